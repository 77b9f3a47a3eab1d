/* train_tokens.c — `bench train`'s token data for gpt: models (train_tokens.h): safetensors x/y,
 * llm.c's .bin token files (llmc/dataloader.h's format and windows, no shuffling), a seeded
 * synthetic stream, and the (B,T) int64 batches cut from them. Every fault of a file is a message
 * naming the file: bench train exits 2 on it. */
#include "harness/train_tokens.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files_impl.h"   // tdm_file_open_read
#include "core/tensor_impl.h"  // tdm_error_set, tdm_alloc_check

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

// The windows of a stream of n tokens for batches of `batch` rows of T: W = (n - 1) / (B*T)
// windows of B*T+1 tokens (each next one B*T further), so rows = W * B.
static tdm_status stream_rows(const char *what, bench_tokens *d, int64_t batch) {
    int64_t per = batch * d->T;
    if (d->n_tok < per + 1)
        return tdm_error_set(TDM_ERR_FORMAT,
                             "%s holds %lld tokens: a batch of %lld rows of %lld "
                             "needs %lld (B*T+1)",
                             what, (long long)d->n_tok, (long long)batch, (long long)d->T,
                             (long long)(per + 1));
    d->rows = (d->n_tok - 1) / per * batch;
    return TDM_OK;
}

// ---- llm.c's .bin -------------------------------------------------------------------------------

static tdm_status load_bin(const char *path, int64_t vocab, int64_t batch, bench_tokens *d) {
    // opened as every reader opens its file (core/files_impl.h): a FIFO, a device or a directory
    // is refused at once (fopen waited on a FIFO for a writer forever)
    int fd = tdm_file_open_read(path, NULL);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0) close(fd);
        return tdm_error_set(TDM_ERR_IO, "%s: %s", path, tdm_file_strerror(err));
    }
    int32_t h[BENCH_LLMC_HEADER];
    tdm_status s = TDM_OK;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0)
        s = tdm_error_set(TDM_ERR_IO, "%s: cannot find its size: %s", path, strerror(errno));
    else if (size < (long)sizeof h)
        s = tdm_error_set(TDM_ERR_FORMAT,
                          "%s: truncated: %ld bytes, shorter than an llm.c token "
                          "file's header (%zu bytes)",
                          path, size, sizeof h);
    else if (fread(h, sizeof h, 1, f) != 1)
        s = tdm_error_set(TDM_ERR_IO, "%s: cannot read its header", path);
    else if (h[0] != BENCH_LLMC_MAGIC)
        s = tdm_error_set(TDM_ERR_FORMAT,
                          "%s: bad magic %d: not an llm.c token file (its header "
                          "starts with %d)",
                          path, h[0], BENCH_LLMC_MAGIC);
    else if (h[1] != 1)
        s = tdm_error_set(TDM_ERR_FORMAT, "%s: bad version %d of an llm.c token file (expected 1)",
                          path, h[1]);
    else if (h[2] <= 0)
        s = tdm_error_set(TDM_ERR_FORMAT, "%s: the header says %d tokens", path, h[2]);
    else if (size != (long)sizeof h + 2L * h[2])
        s = tdm_error_set(TDM_ERR_FORMAT,
                          "%s: %ld bytes, but its header says %d tokens: %ld "
                          "bytes (%s)",
                          path, size, h[2], (long)sizeof h + 2L * h[2],
                          size < (long)sizeof h + 2L * h[2] ? "truncated" : "trailing bytes");
    d->n_tok = s == TDM_OK ? h[2] : 0;
    if (s == TDM_OK) s = tdm_alloc_check("--data tokens", d->n_tok, sizeof(int32_t), true);
    uint16_t *raw = NULL;
    if (s == TDM_OK) {
        raw = malloc((size_t)d->n_tok * sizeof *raw);
        d->stream = malloc((size_t)d->n_tok * sizeof *d->stream);
        if (!raw || !d->stream) s = tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
    }
    if (s == TDM_OK && fread(raw, sizeof *raw, (size_t)d->n_tok, f) != (size_t)d->n_tok)
        s = tdm_error_set(TDM_ERR_IO, "%s: cannot read its tokens", path);
    for (int64_t i = 0; s == TDM_OK && i < d->n_tok; i++) {
        if (raw[i] >= vocab)
            s = tdm_error_set(TDM_ERR_FORMAT,
                              "%s: token %u at position %lld is not below the "
                              "vocabulary size %lld",
                              path, raw[i], (long long)i, (long long)vocab);
        d->stream[i] = raw[i];
    }
    free(raw);
    fclose(f);
    if (s == TDM_OK) s = stream_rows(path, d, batch);
    return s;
}

// ---- safetensors x, y ---------------------------------------------------------------------------

// name's values as int64 (int64 or int32 in the file), checked against [lo, vocab).
static tdm_status load_i64(tdm_safetensors *st, const char *path, const char *name, int64_t lo,
                           int64_t vocab, tdm_tensor **out) {
    tdm_tensor *t = tdm_safetensors_get(st, name, TDM_CPU);
    if (!t) return tdm_error_set(tdm_last_status(), "--data %s", tdm_last_error());
    tdm_dtype dt = tdm_tensor_dtype(t);
    if (dt != TDM_DTYPE_I64 && dt != TDM_DTYPE_I32) {
        tdm_tensor_free(t);
        return tdm_error_set(TDM_ERR_FORMAT, "%s: %s is %s: token data must be int64 or int32",
                             path, name, tdm_dtype_name(dt));
    }
    *out = dt == TDM_DTYPE_I64 ? t : tdm_tensor_to(t, TDM_CPU, TDM_DTYPE_I64);
    if (*out != t) tdm_tensor_free(t);
    if (!*out) return tdm_last_status();
    const int64_t *v = tdm_tensor_data_const(*out);
    for (int64_t i = 0; i < tdm_tensor_numel(*out); i++)
        if (v[i] < lo || v[i] >= vocab)
            return tdm_error_set(TDM_ERR_FORMAT,
                                 "%s: %s[%lld] = %lld is not a token of the "
                                 "vocabulary [0, %lld)%s",
                                 path, name, (long long)i, (long long)v[i], (long long)vocab,
                                 lo < 0 ? " nor -1 (ignored)" : "");
    return TDM_OK;
}

static tdm_status load_safetensors(const char *path, int64_t vocab, int64_t block_size,
                                   bench_tokens *d) {
    tdm_safetensors *st = tdm_safetensors_open(path);
    if (!st) return tdm_error_set(tdm_last_status(), "--data %s", tdm_last_error());
    tdm_tensor *x = NULL, *y = NULL;
    tdm_status s = load_i64(st, path, "x", 0, vocab, &x);
    if (s == TDM_OK) s = load_i64(st, path, "y", -1, vocab, &y);
    tdm_safetensors_close(st);
    if (s == TDM_OK) {
        const int64_t *xs = tdm_tensor_shape(x), *ys = tdm_tensor_shape(y);
        if (tdm_tensor_ndim(x) != 2 || tdm_tensor_ndim(y) != 2 || xs[0] != ys[0] ||
            xs[1] != ys[1] || xs[0] < 1 || xs[1] < 1) {
            char a[96], b[96];
            s = tdm_error_set(TDM_ERR_FORMAT,
                              "%s: x %s and y %s: token data needs x and y of one "
                              "shape (N,T), N and T at least 1",
                              path, tdm_shape_str(tdm_tensor_ndim(x), xs, a, sizeof a),
                              tdm_shape_str(tdm_tensor_ndim(y), ys, b, sizeof b));
        } else if (xs[1] > block_size) {
            s = tdm_error_set(TDM_ERR_FORMAT,
                              "%s: rows of %lld tokens, longer than the model's "
                              "block size %lld",
                              path, (long long)xs[1], (long long)block_size);
        } else {
            d->rows = xs[0];
            d->T = xs[1];
        }
    }
    size_t bytes = s == TDM_OK ? (size_t)(d->rows * d->T) * sizeof(int64_t) : 0;
    if (s == TDM_OK && (!(d->x = malloc(bytes)) || !(d->y = malloc(bytes))))
        s = tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
    if (s == TDM_OK) {
        memcpy(d->x, tdm_tensor_data_const(x), bytes);
        memcpy(d->y, tdm_tensor_data_const(y), bytes);
    }
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    return s;
}

tdm_status bench_tokens_load(const char *path, int64_t vocab, int64_t block_size, int64_t batch,
                             bench_tokens *d) {
    *d = (bench_tokens){.T = block_size};
    tdm_status s = ends_with(path, ".bin") ? load_bin(path, vocab, batch, d)
                                           : load_safetensors(path, vocab, block_size, d);
    if (s != TDM_OK) bench_tokens_free(d);
    return s;
}

// ---- synthetic ----------------------------------------------------------------------------------

tdm_status bench_tokens_synthetic(uint64_t seed, int64_t vocab, int64_t block_size, int64_t batch,
                                  bench_tokens *d) {
    *d = (bench_tokens){.T = block_size};
    int64_t per = batch * block_size;
    d->n_tok = (per < 4096 ? 4096 / per + 1 : 2) * per + 1;  // several windows, >= 4096 tokens
    int64_t nu = vocab + 2 * d->n_tok;                       // draws: permutation, stream
    tdm_status s = tdm_alloc_check("synthetic tokens", nu, sizeof(double), true);
    if (s == TDM_OK) s = tdm_alloc_check("synthetic tokens", vocab, sizeof(int64_t), true);
    tdm_tensor *u =
        s == TDM_OK ? tdm_tensor_rand(1, &nu, TDM_DTYPE_F64, TDM_CPU, seed, 1003) : NULL;
    int64_t *perm = u ? malloc((size_t)vocab * sizeof *perm) : NULL;
    d->stream = perm ? malloc((size_t)d->n_tok * sizeof *d->stream) : NULL;
    if (s == TDM_OK && !d->stream)
        s = u ? tdm_error_set(TDM_ERR_OOM, "train: out of memory") : tdm_last_status();
    if (s == TDM_OK) {
        const double *r = tdm_tensor_data_const(u);
        for (int64_t i = 0; i < vocab; i++) perm[i] = i;
        for (int64_t i = vocab - 1; i > 0; i--) {  // Fisher-Yates
            int64_t j = (int64_t)(r[i] * (double)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        r += vocab;
        d->stream[0] = (int32_t)(r[0] * (double)vocab);
        for (int64_t i = 1; i < d->n_tok; i++)
            d->stream[i] = r[2 * i] < 0.75 ? (int32_t)perm[d->stream[i - 1]]
                                           : (int32_t)(r[2 * i + 1] * (double)vocab);
        s = stream_rows("the synthetic stream", d, batch);
    }
    free(perm);
    tdm_tensor_free(u);
    if (s != TDM_OK) bench_tokens_free(d);
    return s;
}

// ---- batches ------------------------------------------------------------------------------------

tdm_status bench_tokens_batch(const bench_tokens *d, int64_t start, int64_t n, tdm_device dev,
                              tdm_tensor **xb, tdm_tensor **yb) {
    *xb = *yb = NULL;
    int64_t T = d->T, shape[2] = {n, T};
    int64_t *x = malloc((size_t)(n * T) * sizeof *x), *y = malloc((size_t)(n * T) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return tdm_error_set(TDM_ERR_OOM, "train: out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (start + i) % d->rows;
        for (int64_t j = 0; j < T; j++) {
            x[i * T + j] = d->stream ? d->stream[r * T + j] : d->x[r * T + j];
            y[i * T + j] = d->stream ? d->stream[r * T + j + 1] : d->y[r * T + j];
        }
    }
    *xb = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, dev, x);
    *yb = *xb ? tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, dev, y) : NULL;
    free(x);
    free(y);
    if (*yb) return TDM_OK;
    tdm_tensor_free(*xb);
    *xb = NULL;
    return tdm_last_status();
}

void bench_tokens_free(bench_tokens *d) {
    free(d->x);
    free(d->y);
    free(d->stream);
    *d = (bench_tokens){0};
}

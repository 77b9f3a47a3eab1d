/* test_memdata.c — memory accounting (stats, peaks, allocation counts, the tracker scope) and the
 * data loader (order, seeded shuffle, drop_last, workers, restarts, token rows (x and y of (N, T) i64), bad arguments).
 * Usage: test_memdata memory | loader | restart */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

#define MiB ((int64_t)1 << 20)

static tdm_memory_stats cpu_stats(void) {
    tdm_memory_stats s;
    memset(&s, 0xff, sizeof s);
    CHECK(tdm_memory_stats_get(TDM_CPU, &s) == TDM_OK);
    return s;
}

// ---- memory ------------------------------------------------------------------------------

// The exact byte and call counts of allocating and freeing tensors on `dev`. The reference
// reserves exactly what it allocates; the CUDA backend's caching allocator reserves segments
// (reserved >= allocated) and rounds every block up to 512 bytes.
static void test_memory_counts(tdm_device dev) {
    const bool caching = dev.type == TDM_DEVICE_CUDA;
    tdm_memory_stats s0, s1, s2;
    CHECK(tdm_memory_reset_peak(dev) == TDM_OK);
    CHECK(tdm_memory_stats_get(dev, &s0) == TDM_OK);
    CHECK(s0.peak_allocated == s0.allocated);
    CHECK(caching ? s0.reserved >= s0.allocated : s0.reserved == s0.allocated);

    // 1 MiB: 262144 f32
    int64_t n = MiB / 4;
    tdm_tensor *a = tdm_tensor_empty(1, &n, TDM_DTYPE_F32, dev);
    CHECK(a != NULL);
    CHECK(tdm_memory_stats_get(dev, &s1) == TDM_OK);
    CHECK_MSG(s1.allocated - s0.allocated == MiB, "allocated grew by %lld",
              (long long)(s1.allocated - s0.allocated));
    CHECK(caching ? s1.reserved >= s1.allocated : s1.reserved - s0.reserved == MiB);
    CHECK(s1.peak_allocated == s1.allocated);
    CHECK(s1.peak_reserved == s1.reserved);
    CHECK(s1.n_allocs - s0.n_allocs == 1);
    CHECK(s1.n_frees == s0.n_frees);

    // A view shares the storage: no allocation, and one free when both are gone.
    int64_t shape2[2] = {512, 512};
    tdm_tensor *v = tdm_tensor_reshape(a, 2, shape2);
    CHECK(v != NULL);
    tdm_tensor_free(a);
    CHECK(tdm_memory_stats_get(dev, &s2) == TDM_OK);
    CHECK(s2.allocated == s1.allocated && s2.n_allocs == s1.n_allocs && s2.n_frees == s1.n_frees);
    tdm_tensor_free(v);
    CHECK(tdm_memory_stats_get(dev, &s2) == TDM_OK);
    CHECK(s2.allocated == s0.allocated);
    CHECK(caching ? s2.reserved >= s0.reserved : s2.reserved == s0.reserved);   // cached
    CHECK_MSG(s2.peak_allocated == s0.allocated + MiB, "peak %lld, expected %lld",
              (long long)s2.peak_allocated, (long long)(s0.allocated + MiB));
    CHECK(s2.n_allocs - s0.n_allocs == 1);
    CHECK(s2.n_frees - s0.n_frees == 1);

    // reset_peak brings the peak down to the current value.
    CHECK(tdm_memory_reset_peak(dev) == TDM_OK);
    CHECK(tdm_memory_stats_get(dev, &s2) == TDM_OK);
    CHECK(s2.peak_allocated == s0.allocated);
    CHECK(s2.peak_reserved == s0.reserved);

    // An empty tensor still asks the backend for one byte (a 512-byte block when caching).
    int64_t zero = 0;
    tdm_tensor *e = tdm_tensor_zeros(1, &zero, TDM_DTYPE_F32, dev);
    CHECK(e != NULL);
    CHECK(tdm_memory_stats_get(dev, &s1) == TDM_OK);
    CHECK(s1.allocated - s0.allocated == (caching ? 512 : 1));
    tdm_tensor_free(e);
    CHECK(tdm_memory_stats_get(dev, &s1) == TDM_OK);
    CHECK(s1.allocated == s0.allocated);

    // The tracker: +1 MiB, +512 KiB, -1 MiB: peak 1.5 MiB, net 0.5 MiB.
    tdm_memory_tracker t;
    CHECK(tdm_memory_tracker_begin(&t, dev) == TDM_OK);
    CHECK(t.start_allocated == s0.allocated);
    int64_t half = MiB / 2 / 8;  // 512 KiB of i64
    a = tdm_tensor_empty(1, &n, TDM_DTYPE_F32, dev);
    tdm_tensor *b = tdm_tensor_empty(1, &half, TDM_DTYPE_I64, dev);
    tdm_tensor_free(a);
    int64_t peak = -1, net = -1;
    CHECK(tdm_memory_tracker_end(&t, &peak, &net) == TDM_OK);
    CHECK_MSG(peak == MiB + MiB / 2, "tracker peak %lld", (long long)peak);
    CHECK_MSG(net == MiB / 2, "tracker net %lld", (long long)net);
    tdm_tensor_free(b);
    CHECK(tdm_memory_tracker_end(&t, &peak, &net) == TDM_OK);
    CHECK(peak == MiB + MiB / 2 && net == 0);
}

static int run_memory(void) {
    test_memory_counts(TDM_CPU);

    // cuda:0: counted the same way where there is one; a clear error where there is not.
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    if (tdm_device_available(cuda0)) {
        test_memory_counts(cuda0);
    } else {
        tdm_error_clear();
        tdm_memory_stats s;
        CHECK(tdm_memory_stats_get(cuda0, &s) != TDM_OK);
        CHECK(strlen(tdm_last_error()) > 0);
        tdm_memory_tracker t;
        CHECK(tdm_memory_tracker_begin(&t, cuda0) != TDM_OK);
        CHECK(tdm_memory_reset_peak(cuda0) != TDM_OK);
    }
    tdm_device cpu7 = {TDM_DEVICE_CPU, 7};
    tdm_memory_stats s;
    CHECK(tdm_memory_stats_get(cpu7, &s) == TDM_ERR_DEVICE);
    CHECK(tdm_memory_stats_get(TDM_CPU, NULL) == TDM_ERR_ARG);
    CHECK(tdm_memory_tracker_begin(NULL, TDM_CPU) == TDM_ERR_ARG);
    CHECK_DONE("memory");
}

// ---- the data loader ------------------------------------------------------------------------

#define F 3  // features per row

// x (N, F) f32 with x[i, f] = 100 i + f, y (N) i64 with y[i] = i.
static void dataset(int64_t n, tdm_tensor **x, tdm_tensor **y) {
    float *xv = malloc((size_t)(n * F + 1) * sizeof *xv);
    int64_t *yv = malloc((size_t)(n + 1) * sizeof *yv);
    for (int64_t i = 0; i < n; i++) {
        yv[i] = i;
        for (int f = 0; f < F; f++) xv[i * F + f] = (float)(100 * i + f);
    }
    int64_t xs[2] = {n, F};
    *x = tdm_tensor_from_host(2, xs, TDM_DTYPE_F32, TDM_CPU, xv);
    *y = tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, yv);
    free(xv);
    free(yv);
}

static tdm_loader_params params(int64_t batch, bool shuffle, bool drop_last, uint64_t seed,
                                int workers, int prefetch) {
    tdm_loader_params p = {0};
    p.batch_size = batch;
    p.shuffle = shuffle;
    p.drop_last = drop_last;
    p.seed = seed;
    p.workers = workers;
    p.prefetch = prefetch;
    p.device = TDM_CPU;
    return p;
}

// Reads one epoch: the labels in delivery order into order[] (its length returned), the size
// of every batch into sizes[], and checks each x row against its label (x = 100 y + f).
static int64_t read_epoch(tdm_loader *l, int64_t *order, int64_t *sizes, int64_t max_batches,
                          int64_t *n_batches) {
    int64_t n = 0, nb = 0;
    tdm_tensor *xb, *yb;
    while (tdm_loader_next(l, &xb, &yb)) {
        CHECK(tdm_tensor_ndim(xb) == 2 && tdm_tensor_ndim(yb) == 1);
        CHECK(tdm_tensor_shape(xb)[0] == tdm_tensor_shape(yb)[0] && tdm_tensor_shape(xb)[1] == F);
        CHECK(tdm_tensor_dtype(xb) == TDM_DTYPE_F32 && tdm_tensor_dtype(yb) == TDM_DTYPE_I64);
        int64_t rows = tdm_tensor_shape(yb)[0];
        const float *xv = tdm_tensor_data_const(xb);
        const int64_t *yv = tdm_tensor_data_const(yb);
        for (int64_t r = 0; r < rows; r++) {
            for (int f = 0; f < F; f++)
                CHECK_MSG(xv[r * F + f] == (float)(100 * yv[r] + f), "row %lld of batch %lld",
                          (long long)r, (long long)nb);
            order[n++] = yv[r];
        }
        if (nb < max_batches) sizes[nb] = rows;
        nb++;
        tdm_tensor_free(xb);
        tdm_tensor_free(yb);
    }
    CHECK_MSG(tdm_last_status() == TDM_OK, "epoch ended with an error: %s", tdm_last_error());
    CHECK(xb == NULL && yb == NULL);
    *n_batches = nb;
    return n;
}

static bool is_permutation(const int64_t *v, int64_t n) {
    char *seen = calloc((size_t)n + 1, 1);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = v[i] >= 0 && v[i] < n && !seen[v[i]];
        if (ok) seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_sequential(void) {
    tdm_tensor *x, *y;
    dataset(10, &x, &y);
    int64_t order[10], sizes[8], nb;
    for (int drop = 0; drop <= 1; drop++) {
        tdm_loader_params p = params(3, false, drop, 0, 0, 0);
        tdm_loader *l = tdm_loader_new(x, y, &p);
        CHECK(l != NULL);
        // 10 rows in batches of 3: 3,3,3,1 or (drop_last) 3,3,3
        CHECK(tdm_loader_num_batches(l) == (drop ? 3 : 4));
        CHECK(tdm_loader_start_epoch(l, 0) == TDM_OK);
        int64_t n = read_epoch(l, order, sizes, 8, &nb);
        CHECK(n == (drop ? 9 : 10));
        CHECK(nb == (drop ? 3 : 4));
        for (int64_t i = 0; i < n; i++) CHECK(order[i] == i);
        CHECK(sizes[0] == 3 && sizes[1] == 3 && sizes[2] == 3);
        if (!drop) CHECK(sizes[3] == 1);
        // After the end: still false, no error.
        tdm_tensor *xb = (tdm_tensor *)1, *yb = (tdm_tensor *)1;
        CHECK(!tdm_loader_next(l, &xb, &yb) && xb == NULL && yb == NULL);
        CHECK(tdm_last_status() == TDM_OK);
        tdm_loader_free(l);
    }
    // The loader holds its own references: the caller may drop x and y first.
    tdm_loader_params p = params(4, false, false, 0, 2, 1);
    tdm_loader *l = tdm_loader_new(x, y, &p);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    CHECK(tdm_loader_num_batches(l) == 3);
    // next() without start_epoch starts epoch 0.
    int64_t n = read_epoch(l, order, sizes, 8, &nb);
    CHECK(n == 10 && nb == 3 && sizes[2] == 2);
    for (int64_t i = 0; i < n; i++) CHECK(order[i] == i);
    tdm_loader_free(l);
}

static void test_shuffle(void) {
    tdm_tensor *x, *y;
    dataset(10, &x, &y);
    // Expected orders from an independent Python implementation of data.h's algorithm over
    // suites/golden/gen_cases.py's Philox (philox_uniform_bits(2*(N-1), seed, epoch), then
    // j = (r*(i+1)) >> 64 for i = N-1..1), run with /usr/bin/python3.
    static const int64_t want_s1234_e0[10] = {7, 0, 5, 8, 3, 9, 6, 4, 2, 1};
    static const int64_t want_s1234_e1[10] = {5, 3, 4, 6, 2, 1, 9, 0, 7, 8};
    static const int64_t want_s7_5_e3[10] = {1, 2, 3, 9, 0, 8, 7, 4, 5, 6};  // seed 7<<32 | 5
    int64_t order[10], again[10], sizes[8], nb;

    tdm_loader_params p = params(3, true, false, 1234, 0, 0);
    tdm_loader *l = tdm_loader_new(x, y, &p);
    CHECK(tdm_loader_start_epoch(l, 0) == TDM_OK);
    CHECK(read_epoch(l, order, sizes, 8, &nb) == 10);
    CHECK(memcmp(order, want_s1234_e0, sizeof order) == 0);
    CHECK(tdm_loader_start_epoch(l, 1) == TDM_OK);
    CHECK(read_epoch(l, order, sizes, 8, &nb) == 10);
    CHECK(memcmp(order, want_s1234_e1, sizeof order) == 0);
    CHECK(tdm_loader_start_epoch(l, 0) == TDM_OK);  // the same (seed, epoch) again
    CHECK(read_epoch(l, again, sizes, 8, &nb) == 10);
    CHECK(memcmp(again, want_s1234_e0, sizeof again) == 0);
    tdm_loader_free(l);

    p = params(4, true, false, (7ull << 32) | 5, 2, 0);
    l = tdm_loader_new(x, y, &p);
    CHECK(tdm_loader_start_epoch(l, 3) == TDM_OK);
    CHECK(read_epoch(l, order, sizes, 8, &nb) == 10);
    CHECK(memcmp(order, want_s7_5_e3, sizeof order) == 0);
    tdm_loader_free(l);
    tdm_tensor_free(x);
    tdm_tensor_free(y);

    // A larger set: each epoch a permutation, reproducible, different across epochs and seeds.
    enum { N = 1000 };
    dataset(N, &x, &y);
    static int64_t e0[N], e0b[N], e1[N], s2[N];
    int64_t sz[200];
    p = params(64, true, false, 99, 3, 2);
    l = tdm_loader_new(x, y, &p);
    CHECK(tdm_loader_start_epoch(l, 0) == TDM_OK);
    CHECK(read_epoch(l, e0, sz, 200, &nb) == N && nb == 16 && sz[15] == N - 15 * 64);
    CHECK(tdm_loader_start_epoch(l, 1) == TDM_OK);
    CHECK(read_epoch(l, e1, sz, 200, &nb) == N);
    CHECK(tdm_loader_start_epoch(l, 0) == TDM_OK);
    CHECK(read_epoch(l, e0b, sz, 200, &nb) == N);
    tdm_loader_free(l);
    p.seed = 100;
    l = tdm_loader_new(x, y, &p);
    CHECK(read_epoch(l, s2, sz, 200, &nb) == N);
    tdm_loader_free(l);
    CHECK(is_permutation(e0, N) && is_permutation(e1, N) && is_permutation(s2, N));
    CHECK(memcmp(e0, e0b, sizeof e0) == 0);
    CHECK(memcmp(e0, e1, sizeof e0) != 0);
    CHECK(memcmp(e0, s2, sizeof e0) != 0);
    int fixed = 0;  // a shuffled order is not the identity: ~1 fixed point expected of 1000
    for (int i = 0; i < N; i++) fixed += e0[i] == i;
    CHECK_MSG(fixed < 10, "%d fixed points", fixed);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
}

// workers 0, 1, 3 (and ring depths 1, 2, 5) deliver the same batches in the same order.
static void test_workers_agree(void) {
    enum { N = 503 };
    tdm_tensor *x, *y;
    dataset(N, &x, &y);
    static int64_t ref[N], got[N];
    int64_t ref_sizes[80], sizes[80], ref_nb, nb;
    for (int drop = 0; drop <= 1; drop++) {
        tdm_loader_params p = params(7, true, drop, 5, 0, 0);
        tdm_loader *l = tdm_loader_new(x, y, &p);
        CHECK(tdm_loader_start_epoch(l, 2) == TDM_OK);
        int64_t ref_n = read_epoch(l, ref, ref_sizes, 80, &ref_nb);
        tdm_loader_free(l);
        CHECK(ref_nb == (drop ? N / 7 : N / 7 + 1));  // 503 = 71 * 7 + 6
        CHECK(ref_sizes[ref_nb - 1] == (drop ? 7 : 6));
        const int cfg[][2] = {{1, 0}, {1, 1}, {3, 0}, {3, 1}, {3, 5}, {8, 2}};
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
            p = params(7, true, drop, 5, cfg[c][0], cfg[c][1]);
            l = tdm_loader_new(x, y, &p);
            CHECK(tdm_loader_start_epoch(l, 2) == TDM_OK);
            int64_t n = read_epoch(l, got, sizes, 80, &nb);
            CHECK_MSG(n == ref_n && nb == ref_nb && !memcmp(got, ref, (size_t)n * sizeof *got) &&
                          !memcmp(sizes, ref_sizes, (size_t)nb * sizeof *sizes),
                      "workers %d prefetch %d drop_last %d differ from workers 0", cfg[c][0],
                      cfg[c][1], drop);
            tdm_loader_free(l);
        }
    }
    tdm_tensor_free(x);
    tdm_tensor_free(y);
}

// Other dtypes pass through: bf16 x, i32 y; and an empty dataset has no batches.
static void test_dtypes(void) {
    int64_t n = 5, xs[3] = {5, 2, 2};
    uint16_t xv[20];
    int32_t yv[5] = {10, 11, 12, 13, 14};
    for (int i = 0; i < 20; i++) xv[i] = tdm_f32_to_bf16((float)i);
    tdm_tensor *x = tdm_tensor_from_host(3, xs, TDM_DTYPE_BF16, TDM_CPU, xv);
    tdm_tensor *y = tdm_tensor_from_host(1, &n, TDM_DTYPE_I32, TDM_CPU, yv);
    tdm_loader_params p = params(2, false, false, 0, 1, 0);
    tdm_loader *l = tdm_loader_new(x, y, &p);
    CHECK(l != NULL);
    tdm_tensor *xb, *yb;
    CHECK(tdm_loader_next(l, &xb, &yb));
    tdm_tensor_free(xb);
    tdm_tensor_free(yb);
    CHECK(tdm_loader_next(l, &xb, &yb));  // the 2nd batch: rows 2, 3
    CHECK(tdm_tensor_dtype(xb) == TDM_DTYPE_BF16 && tdm_tensor_dtype(yb) == TDM_DTYPE_I32);
    CHECK(tdm_tensor_ndim(xb) == 3 && tdm_tensor_shape(xb)[0] == 2 && tdm_tensor_shape(xb)[2] == 2);
    CHECK(!memcmp(tdm_tensor_data_const(xb), xv + 8, 8 * sizeof xv[0]));
    CHECK(!memcmp(tdm_tensor_data_const(yb), yv + 2, 2 * sizeof yv[0]));
    tdm_tensor_free(xb);
    tdm_tensor_free(yb);
    tdm_loader_free(l);
    tdm_tensor_free(x);
    tdm_tensor_free(y);

    int64_t zs[2] = {0, 4}, zero = 0;
    x = tdm_tensor_empty(2, zs, TDM_DTYPE_F32, TDM_CPU);
    y = tdm_tensor_empty(1, &zero, TDM_DTYPE_I64, TDM_CPU);
    p = params(3, true, false, 1, 2, 0);
    l = tdm_loader_new(x, y, &p);
    CHECK(l != NULL && tdm_loader_num_batches(l) == 0);
    CHECK(!tdm_loader_next(l, &xb, &yb) && tdm_last_status() == TDM_OK);
    tdm_loader_free(l);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
}

// Each bad argument is refused with a message naming the problem.
// Token rows, as a GPT's data: x (N, T) i64 token ids and y (N, T) their next tokens; shuffled
// and assembled by 2 workers, every batch keeps (B, T) and each row of y is its row of x plus one.
static void test_token_rows(void) {
    enum { N = 9, T = 5 };
    int64_t xv[N * T], yv[N * T], shape[2] = {N, T};
    for (int i = 0; i < N * T; i++) xv[i] = 1000 * (i / T) + i % T, yv[i] = xv[i] + 1;
    tdm_tensor *x = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, TDM_CPU, xv);
    tdm_tensor *y = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, TDM_CPU, yv);
    tdm_loader_params p = params(4, true, false, 7, 2, 0);
    tdm_loader *l = tdm_loader_new(x, y, &p);
    CHECK_MSG(l != NULL, "%s", tdm_last_error());
    tdm_tensor *xb, *yb;
    int seen[N] = {0}, rows = 0;
    while (l && tdm_loader_next(l, &xb, &yb)) {
        int64_t b = tdm_tensor_shape(xb)[0];
        CHECK(tdm_tensor_ndim(xb) == 2 && tdm_tensor_ndim(yb) == 2 && tdm_tensor_shape(yb)[0] == b &&
              tdm_tensor_shape(xb)[1] == T && tdm_tensor_shape(yb)[1] == T);
        CHECK(tdm_tensor_dtype(xb) == TDM_DTYPE_I64 && tdm_tensor_dtype(yb) == TDM_DTYPE_I64);
        const int64_t *xs = tdm_tensor_data_const(xb), *ys = tdm_tensor_data_const(yb);
        for (int64_t r = 0; r < b; r++) {
            int64_t row = xs[r * T] / 1000;
            CHECK(row >= 0 && row < N);
            if (row >= 0 && row < N) seen[row]++;
            for (int t = 0; t < T; t++)
                CHECK_MSG(xs[r * T + t] == 1000 * row + t && ys[r * T + t] == xs[r * T + t] + 1,
                          "batch row %lld, position %d: x %lld, y %lld", (long long)r, t,
                          (long long)xs[r * T + t], (long long)ys[r * T + t]);
        }
        rows += (int)b;
        tdm_tensor_free(xb);
        tdm_tensor_free(yb);
    }
    CHECK(tdm_last_status() == TDM_OK && rows == N);
    for (int i = 0; i < N; i++) CHECK_MSG(seen[i] == 1, "row %d seen %d times", i, seen[i]);
    tdm_loader_free(l);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
}

static void expect_refused(tdm_tensor *x, tdm_tensor *y, const tdm_loader_params *p,
                           tdm_status want, const char *words) {
    tdm_error_clear();
    tdm_loader *l = tdm_loader_new(x, y, p);
    CHECK(l == NULL);
    CHECK_MSG(tdm_last_status() == want && strstr(tdm_last_error(), words),
              "expected %s with '%s', got %s: %s", tdm_status_name(want), words,
              tdm_status_name(tdm_last_status()), tdm_last_error());
    tdm_loader_free(l);
}

static void test_bad_arguments(void) {
    tdm_tensor *x, *y, *y9, *x9;
    dataset(10, &x, &y);
    dataset(9, &x9, &y9);
    int64_t n = 10, ys2[2] = {9, 1};
    tdm_tensor *yf = tdm_tensor_zeros(1, &n, TDM_DTYPE_F32, TDM_CPU);
    tdm_tensor *xbool = tdm_tensor_zeros(1, &n, TDM_DTYPE_BOOL, TDM_CPU);
    tdm_tensor *y0 = tdm_tensor_zeros(0, NULL, TDM_DTYPE_I64, TDM_CPU);
    tdm_tensor *y2 = tdm_tensor_zeros(2, ys2, TDM_DTYPE_I64, TDM_CPU);

    tdm_loader_params p = params(0, false, false, 0, 0, 0);
    expect_refused(x, y, &p, TDM_ERR_ARG, "batch_size must be at least 1, got 0");
    p.batch_size = -3;
    expect_refused(x, y, &p, TDM_ERR_ARG, "batch_size must be at least 1, got -3");
    p.batch_size = 2;
    expect_refused(x, y9, &p, TDM_ERR_SHAPE, "different numbers of samples: x (10, 3), y (9)");
    expect_refused(x9, y, &p, TDM_ERR_SHAPE, "different numbers of samples");
    expect_refused(x, yf, &p, TDM_ERR_DTYPE, "y has dtype f32, expected i64 or i32");
    expect_refused(xbool, y, &p, TDM_ERR_DTYPE, "x has dtype bool, expected a floating dtype or i64/i32");
    expect_refused(x, y0, &p, TDM_ERR_SHAPE, "y must have a sample dim");
    expect_refused(x, y2, &p, TDM_ERR_SHAPE, "different numbers of samples: x (10, 3), y (9, 1)");
    expect_refused(NULL, y, &p, TDM_ERR_ARG, "x is NULL");
    expect_refused(x, y, NULL, TDM_ERR_ARG, "params is NULL");
    p.workers = -1;
    expect_refused(x, y, &p, TDM_ERR_ARG, "workers must be in");
    p.workers = 0;
    p.prefetch = -2;
    expect_refused(x, y, &p, TDM_ERR_ARG, "prefetch must be in");
    p.prefetch = 0;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    if (!tdm_device_available(cuda0)) {
        p.device = cuda0;
        expect_refused(x, y, &p, TDM_ERR_DEVICE, "cannot deliver batches to cuda:0");
        p.device = TDM_CPU;
    }

    tdm_loader *l = tdm_loader_new(x, y, &p);
    CHECK(tdm_loader_start_epoch(l, -1) == TDM_ERR_ARG);
    CHECK(tdm_loader_start_epoch(NULL, 0) == TDM_ERR_ARG);
    tdm_tensor *xb, *yb;
    CHECK(!tdm_loader_next(NULL, &xb, &yb) && tdm_last_status() == TDM_ERR_ARG);
    CHECK(!tdm_loader_next(l, NULL, &yb) && tdm_last_status() == TDM_ERR_ARG);
    CHECK(tdm_loader_num_batches(NULL) == -1);
    tdm_loader_free(l);
    tdm_loader_free(NULL);

    tdm_tensor *all[] = {x, y, x9, y9, yf, xbool, y0, y2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tdm_tensor_free(all[i]);
}

// Batches delivered to cuda:0 where there is one.
static void test_device(void) {
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    if (!tdm_device_available(cuda0)) {
        tdm_error_clear();
        return;
    }
    tdm_tensor *x, *y;
    dataset(10, &x, &y);
    tdm_loader_params p = params(4, true, false, 3, 2, 0);
    p.device = cuda0;
    tdm_loader *l = tdm_loader_new(x, y, &p);
    CHECK(l != NULL);
    tdm_tensor *xb, *yb;
    int64_t seen = 0;
    while (tdm_loader_next(l, &xb, &yb)) {
        CHECK(tdm_device_equal(tdm_tensor_device(xb), cuda0));
        CHECK(tdm_device_equal(tdm_tensor_device(yb), cuda0));
        int64_t rows = tdm_tensor_shape(yb)[0];
        double xv[4 * F], yv[4];
        CHECK(tdm_tensor_to_host_f64(xb, xv) == TDM_OK && tdm_tensor_to_host_f64(yb, yv) == TDM_OK);
        for (int64_t r = 0; r < rows; r++) CHECK(xv[r * F + 1] == 100 * yv[r] + 1);
        seen += rows;
        tdm_tensor_free(xb);
        tdm_tensor_free(yb);
    }
    CHECK(seen == 10 && tdm_last_status() == TDM_OK);
    tdm_loader_free(l);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
}

static int run_loader(void) {
    tdm_memory_stats before = cpu_stats();
    test_sequential();
    test_shuffle();
    test_workers_agree();
    test_dtypes();
    test_token_rows();
    test_bad_arguments();
    test_device();
    tdm_memory_stats after = cpu_stats();
    CHECK_MSG(after.allocated == before.allocated, "%lld tensor bytes leaked",
              (long long)(after.allocated - before.allocated));
    CHECK(after.n_allocs - before.n_allocs == after.n_frees - before.n_frees);
    CHECK_DONE("loader");
}

// ---- restarts and frees mid-epoch (run under a ctest timeout: a hang fails) ------------------

static int run_restart(void) {
    enum { N = 1000, B = 10 };
    tdm_tensor *x, *y;
    dataset(N, &x, &y);
    tdm_memory_stats before = cpu_stats();
    static int64_t want[N], got[N];
    int64_t sizes[128], nb;

    // The orders of epochs 0..3 from the caller's thread.
    static int64_t orders[4][N];
    tdm_loader_params p = params(B, true, false, 11, 0, 0);
    tdm_loader *l = tdm_loader_new(x, y, &p);
    for (int e = 0; e < 4; e++) {
        CHECK(tdm_loader_start_epoch(l, e) == TDM_OK);
        CHECK(read_epoch(l, orders[e], sizes, 128, &nb) == N);
    }
    tdm_loader_free(l);

    const int cfg[][2] = {{0, 0}, {1, 1}, {3, 1}, {3, 2}, {4, 8}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        p = params(B, true, false, 11, cfg[c][0], cfg[c][1]);
        l = tdm_loader_new(x, y, &p);
        for (int round = 0; round < 8; round++) {
            // Take a few batches of epoch `round % 4`, then restart (workers mid-batch or
            // blocked on a full ring), sometimes at once, sometimes after a pause.
            int e = round % 4;
            CHECK(tdm_loader_start_epoch(l, e) == TDM_OK);
            int take = (round * 7) % 13;
            int64_t k = 0;
            tdm_tensor *xb, *yb;
            for (int t = 0; t < take && tdm_loader_next(l, &xb, &yb); t++) {
                const int64_t *yv = tdm_tensor_data_const(yb);
                for (int64_t r = 0; r < tdm_tensor_shape(yb)[0]; r++)
                    CHECK(yv[r] == orders[e][k++]);
                tdm_tensor_free(xb);
                tdm_tensor_free(yb);
            }
        }
        // After all that, a full epoch is still right.
        CHECK(tdm_loader_start_epoch(l, 1) == TDM_OK);
        CHECK(read_epoch(l, got, sizes, 128, &nb) == N);
        CHECK_MSG(!memcmp(got, orders[1], sizeof got), "workers %d: epoch 1 after restarts",
                  cfg[c][0]);
        // Free mid-epoch: the workers are joined and their batches freed.
        CHECK(tdm_loader_start_epoch(l, 2) == TDM_OK);
        tdm_tensor *xb, *yb;
        CHECK(tdm_loader_next(l, &xb, &yb));
        tdm_tensor_free(xb);
        tdm_tensor_free(yb);
        tdm_loader_free(l);
        // And right after start, before anything was taken.
        l = tdm_loader_new(x, y, &p);
        CHECK(tdm_loader_start_epoch(l, 0) == TDM_OK);
        tdm_loader_free(l);
    }
    (void)want;
    tdm_memory_stats after = cpu_stats();
    CHECK_MSG(after.allocated == before.allocated, "%lld batch bytes leaked",
              (long long)(after.allocated - before.allocated));
    CHECK(after.n_allocs - before.n_allocs == after.n_frees - before.n_frees);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    CHECK_DONE("restart");
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "memory")) return run_memory();
    if (!strcmp(what, "loader")) return run_loader();
    if (!strcmp(what, "restart")) return run_restart();
    fprintf(stderr, "usage: test_memdata memory|loader|restart\n");
    return 2;
}

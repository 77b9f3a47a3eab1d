/* exact.c — bench conform's bitwise checks of cast, rand, randn and amp_unscale_check against the
 * CPU reference (exact.h). Sizes 1, 7, 129 and 1001 cover a Philox block's tail (4 elements), the
 * kernels' 16-byte vector tails and grid-stride loops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact.h"
#include "core/tensor_impl.h"

static const int64_t SIZES[] = {1, 7, 129, 1001};
#define N_SIZES 4
static const tdm_dtype FLOATS[] = {TDM_DTYPE_F32, TDM_DTYPE_F16, TDM_DTYPE_BF16, TDM_DTYPE_F64};
static const tdm_dtype ALL[] = {TDM_DTYPE_F32, TDM_DTYPE_F16, TDM_DTYPE_BF16, TDM_DTYPE_F64,
                                TDM_DTYPE_I32, TDM_DTYPE_I64, TDM_DTYPE_BOOL};
#define N_ALL 7

const char *tdm_exact_ops(void) { return "cast rand randn amp_unscale"; }

bool tdm_exact_has(const char *op) {
    return !strcmp(op, "cast") || !strcmp(op, "rand") || !strcmp(op, "randn") ||
           !strcmp(op, "amp_unscale");
}

// dev tensor -> cpu copy (same dtype); NULL on error.
static tdm_tensor *to_cpu(const tdm_tensor *t) {
    return t ? tdm_tensor_to(t, TDM_CPU, tdm_tensor_dtype(t)) : NULL;
}

// Bitwise equality of two cpu tensors of one dtype; randn f64 allows 4 ulp. *worst: the first
// differing index, -1 when equal.
static bool same(const tdm_tensor *a, const tdm_tensor *b, bool f64_ulps, int64_t *worst) {
    const int64_t n = tdm_tensor_numel(a);
    const size_t es = tdm_dtype_size(tdm_tensor_dtype(a));
    const unsigned char *pa = tdm_tensor_data_const(a), *pb = tdm_tensor_data_const(b);
    *worst = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!memcmp(pa + i * es, pb + i * es, es)) continue;
        if (f64_ulps) {
            double x, y;
            memcpy(&x, pa + i * es, 8);
            memcpy(&y, pb + i * es, 8);
            if (fabs(x - y) <= 4 * 0x1p-52 * fabs(y)) continue;
        }
        *worst = i;
        return false;
    }
    return true;
}

static void report(const char *what, tdm_status s, bool ok, int64_t worst, bool quiet,
                   int *n_pass, int *n_fail, int *n_err) {
    if (s != TDM_OK) {
        printf("ERROR %s: %s\n", what, tdm_last_error());
        (*n_err)++;
    } else if (!ok) {
        printf("FAIL %s: element %lld differs from the reference\n", what, (long long)worst);
        (*n_fail)++;
    } else {
        if (!quiet) printf("PASS %s (bitwise)\n", what);
        (*n_pass)++;
    }
}

// Values for a cast source: random normals * 37.3 (float sources) or integers in +-1000, plus
// halves and values near f16/bf16 rounding boundaries; all within every dtype's range; every
// fifth value past those is 0 (false as a bool).
static tdm_tensor *cast_source(tdm_dtype dt, int64_t n, uint64_t seed) {
    tdm_tensor *r = tdm_tensor_randn(1, &n, TDM_DTYPE_F64, TDM_CPU, seed, 7);
    if (!r) return NULL;
    double *v = tdm_tensor_data(r);
    static const double special[] = {0.5, -2.5, 1.0009765625, 65504.0, -3.00390625, 1e-6};
    for (int64_t i = 0; i < n; i++) {
        v[i] = i < 6 ? special[i] : v[i] * 37.3;
        if (!tdm_dtype_is_float(dt)) v[i] = trunc(v[i] * 27.0);
        if (i >= 6 && i % 5 == 4) v[i] = 0.0;
    }
    tdm_tensor *t = tdm_tensor_to(r, TDM_CPU, dt);
    tdm_tensor_free(r);
    return t;
}

static void check_cast(tdm_device dev, uint64_t seed, bool quiet, int *np, int *nf, int *ne) {
    for (int a = 0; a < N_ALL; a++)
        for (int b = 0; b < N_ALL; b++) {
            if (a == b) continue;
            for (int k = 0; k < N_SIZES; k++) {
                char what[128];
                snprintf(what, sizeof what, "cast %s->%s n=%lld", tdm_dtype_name(ALL[a]),
                         tdm_dtype_name(ALL[b]), (long long)SIZES[k]);
                tdm_error_clear();
                tdm_tensor *src = cast_source(ALL[a], SIZES[k], seed + (uint64_t)k);
                tdm_tensor *want = src ? tdm_tensor_to(src, TDM_CPU, ALL[b]) : NULL;
                tdm_tensor *sd = src ? tdm_tensor_to(src, dev, ALL[a]) : NULL;
                tdm_tensor *cd = sd ? tdm_tensor_to(sd, dev, ALL[b]) : NULL;
                tdm_tensor *got = to_cpu(cd);
                int64_t w = -1;
                const bool ok = want && got && same(got, want, false, &w);
                report(what, want && got ? TDM_OK : tdm_last_status(), ok, w, quiet, np, nf, ne);
                tdm_tensor_free(src);
                tdm_tensor_free(want);
                tdm_tensor_free(sd);
                tdm_tensor_free(cd);
                tdm_tensor_free(got);
            }
        }
}

static void check_rand(tdm_device dev, uint64_t seed, bool normal, bool quiet, int *np, int *nf,
                       int *ne) {
    for (int d = 0; d < 4; d++)
        for (int k = 0; k < N_SIZES; k++) {
            const uint64_t s = seed * 1000003u + (uint64_t)k, off = (uint64_t)k * 5 + (normal ? 1 : 0);
            const int64_t n = SIZES[k];
            char what[128];
            snprintf(what, sizeof what, "%s %s n=%lld seed=%llu offset=%llu",
                     normal ? "randn" : "rand", tdm_dtype_name(FLOATS[d]), (long long)n,
                     (unsigned long long)s, (unsigned long long)off);
            tdm_error_clear();
            tdm_tensor *want = normal ? tdm_tensor_randn(1, &n, FLOATS[d], TDM_CPU, s, off)
                                      : tdm_tensor_rand(1, &n, FLOATS[d], TDM_CPU, s, off);
            tdm_tensor *td = normal ? tdm_tensor_randn(1, &n, FLOATS[d], dev, s, off)
                                    : tdm_tensor_rand(1, &n, FLOATS[d], dev, s, off);
            tdm_tensor *got = to_cpu(td);
            int64_t w = -1;
            const bool ok = want && got &&
                            same(got, want, normal && FLOATS[d] == TDM_DTYPE_F64, &w);
            report(what, want && got ? TDM_OK : tdm_last_status(), ok, w, quiet, np, nf, ne);
            tdm_tensor_free(want);
            tdm_tensor_free(td);
            tdm_tensor_free(got);
        }
}

// One run of amp_unscale_check over grads of every float dtype (plus an inf planted in one when
// `plant`), on the cpu and on dev: the unscaled grads and the flag must agree bitwise.
static void check_unscale(tdm_device dev, uint64_t seed, bool plant, bool quiet, int *np, int *nf,
                          int *ne) {
    char what[128];
    snprintf(what, sizeof what, "amp_unscale %s", plant ? "with an inf" : "finite");
    tdm_error_clear();
    tdm_tensor *cpu[4] = {0}, *gd[4] = {0}, *got[4] = {0};
    tdm_tensor *fc = NULL, *fd = NULL, *fgot = NULL;
    const double inv = (float)(1.0 / 65536.0 * 3.0);   // not a power of two: products round
    int64_t one = 1;
    bool ok = true;
    tdm_status s = TDM_OK;
    for (int d = 0; d < 4 && s == TDM_OK; d++) {
        const int64_t n = SIZES[d];
        tdm_tensor *r = tdm_tensor_randn(1, &n, TDM_DTYPE_F64, TDM_CPU, seed, 40 + (uint64_t)d);
        if (r) {
            double *v = tdm_tensor_data(r);
            for (int64_t i = 0; i < n; i++) v[i] *= 3000.0;
            if (plant && d == 2) v[n - 1] = INFINITY;
        }
        cpu[d] = r ? tdm_tensor_to(r, TDM_CPU, FLOATS[d]) : NULL;
        gd[d] = cpu[d] ? tdm_tensor_to(cpu[d], dev, FLOATS[d]) : NULL;
        tdm_tensor_free(r);
        if (!gd[d]) s = tdm_last_status();
    }
    if (s == TDM_OK && !(fc = tdm_tensor_zeros(1, &one, TDM_DTYPE_F32, TDM_CPU))) s = tdm_last_status();
    if (s == TDM_OK && !(fd = tdm_tensor_zeros(1, &one, TDM_DTYPE_F32, dev))) s = tdm_last_status();
    const struct tdm_backend_ops *bc = tdm_backend_of(fc ? fc : cpu[0]);
    const struct tdm_backend_ops *bd = fd ? tdm_backend_of(fd) : NULL;
    if (s == TDM_OK && (!bc->amp_unscale_check || !bd->amp_unscale_check))
        s = tdm_error_unsupported("amp_unscale_check", bc->amp_unscale_check ? bd : bc);
    if (s == TDM_OK) s = bc->amp_unscale_check(cpu, 4, inv, fc);
    if (s == TDM_OK) s = bd->amp_unscale_check(gd, 4, inv, fd);
    int64_t w = -1;
    for (int d = 0; d < 4 && s == TDM_OK; d++) {
        if (!(got[d] = to_cpu(gd[d]))) s = tdm_last_status();
        else if (!same(got[d], cpu[d], false, &w)) ok = false;
    }
    if (s == TDM_OK && !(fgot = to_cpu(fd))) s = tdm_last_status();
    if (s == TDM_OK) {
        const float a = *(const float *)tdm_tensor_data_const(fgot);
        const float b = *(const float *)tdm_tensor_data_const(fc);
        if (a != b || b != (plant ? 1.0f : 0.0f)) ok = false;
    }
    report(what, s, ok, w, quiet, np, nf, ne);
    for (int d = 0; d < 4; d++) {
        tdm_tensor_free(cpu[d]);
        tdm_tensor_free(gd[d]);
        tdm_tensor_free(got[d]);
    }
    tdm_tensor_free(fc);
    tdm_tensor_free(fd);
    tdm_tensor_free(fgot);
}

void tdm_exact_check(const char *op, tdm_device dev, uint64_t seed, bool quiet, int *n_pass,
                     int *n_fail, int *n_err) {
    if (!strcmp(op, "cast")) check_cast(dev, seed, quiet, n_pass, n_fail, n_err);
    else if (!strcmp(op, "rand")) check_rand(dev, seed, false, quiet, n_pass, n_fail, n_err);
    else if (!strcmp(op, "randn")) check_rand(dev, seed, true, quiet, n_pass, n_fail, n_err);
    else if (!strcmp(op, "amp_unscale")) {
        check_unscale(dev, seed, false, quiet, n_pass, n_fail, n_err);
        check_unscale(dev, seed, true, quiet, n_pass, n_fail, n_err);
    }
}

/* test_attention.c — TDM_DTYPE_BOOL and F.scaled_dot_product_attention beyond the golden cases
 * (which hold the values to PyTorch's): the bool dtype's creation, copies, casts, safetensors
 * round trip and refusals; SDPA's argument errors; its semantics checked against itself (is_causal
 * = an explicit tril bool mask, a bool mask = an additive 0/-inf one, the default scale, a fully
 * masked row gives zeros and zero gradients, broadcast leading dims = expanded ones, dropout
 * draws from the generator and moves it on); autograd (recorded backward = the explicit one,
 * the mask's gradient, autocast); and on cuda:0 (exit 77 with one line without one) the bool
 * copy paths, cpu = cuda within the bound's order, dropout under graph capture (replay k = the
 * k-th eager step) and the device errors; the fused attention (kernels/k_flash_attention.cu):
 * when it applies, that it keeps no (B,L,S) buffer (the memory statistics), agrees with the plain
 * path, and that its deterministic backward is bit-reproducible (the heuristic one within bounds).
 * usage: test_attention bool | errors | semantics | autograd | gpu_bool | gpu_match |
 *        gpu_graph | gpu_errors | gpu_fused [TMPDIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/backends.h"
#include "tandem/memory.h"
#include "tandem/tandem.h"

#define CUDA0 ((tdm_device){TDM_DEVICE_CUDA, 0})

static bool has_msg(const char *needle) { return strstr(tdm_last_error(), needle) != NULL; }

static bool gpu_or_skip(const char *name) {
    if (tdm_device_available(CUDA0)) return true;
    printf("SKIP %s: %s\n", name, tdm_last_error());
    return false;
}

// (shape) of dt on dev, randn from (seed, offset).
static tdm_tensor *randn(int nd, const int64_t *shape, tdm_dtype dt, tdm_device dev, uint64_t off) {
    return tdm_tensor_randn(nd, shape, dt, dev, 2024, off);
}

static double *host(const tdm_tensor *t) {
    if (!t) return NULL;
    int64_t n = tdm_tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (v && tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        free(v);
        return NULL;
    }
    return v;
}

// max |a - b| over the elements (inf when either is missing or the sizes differ; NaN counts as
// equal to NaN only).
static double max_diff(const tdm_tensor *a, const tdm_tensor *b) {
    if (!a || !b || tdm_tensor_numel(a) != tdm_tensor_numel(b)) return INFINITY;
    double *x = host(a), *y = host(b), m = x && y ? 0.0 : INFINITY;
    for (int64_t i = 0; x && y && i < tdm_tensor_numel(a); i++) {
        if (isnan(x[i]) || isnan(y[i])) {
            if (!(isnan(x[i]) && isnan(y[i]))) m = INFINITY;
            continue;
        }
        m = fmax(m, fabs(x[i] - y[i]));
    }
    free(x);
    free(y);
    return m;
}

static tdm_tensor *bool_tensor(int nd, const int64_t *shape, const uint8_t *v, tdm_device dev) {
    return tdm_tensor_from_host(nd, shape, TDM_DTYPE_BOOL, dev, v);
}

static tdm_tensor *sdpa(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                        const tdm_tensor *m, bool causal) {
    return tdm_scaled_dot_product_attention(q, k, v, m, 0.0, causal, TDM_SDPA_SCALE_DEFAULT,
                                            NULL);
}

// ---- bool ------------------------------------------------------------------------------------

static int run_bool(const char *tmp) {
    tdm_dtype dt;
    CHECK(!strcmp(tdm_dtype_name(TDM_DTYPE_BOOL), "bool") && tdm_dtype_size(TDM_DTYPE_BOOL) == 1);
    CHECK(tdm_dtype_parse("bool", &dt) == TDM_OK && dt == TDM_DTYPE_BOOL);
    CHECK(!tdm_dtype_is_float(TDM_DTYPE_BOOL) && tdm_dtype_unit_roundoff(TDM_DTYPE_BOOL) == 0);
    // from host and back; any nonzero byte is true
    const uint8_t raw[6] = {0, 1, 0, 7, 1, 0};
    const int64_t sh[2] = {2, 3};
    tdm_tensor *b = bool_tensor(2, sh, raw, TDM_CPU);
    uint8_t back[6];
    CHECK(b && tdm_tensor_to_host(b, back, sizeof back) == TDM_OK && !memcmp(back, raw, 6));
    double v[6];
    CHECK(b && tdm_tensor_to_host_f64(b, v) == TDM_OK && v[3] == 1.0 && v[2] == 0.0);
    // casts: bool -> f32 is 0/1; x -> bool is x != 0, NaN true (PyTorch's .to(torch.bool))
    tdm_tensor *f = b ? tdm_tensor_to(b, TDM_CPU, TDM_DTYPE_F32) : NULL;
    float fv[6];
    CHECK(f && tdm_tensor_to_host(f, fv, sizeof fv) == TDM_OK && fv[3] == 1.0f && fv[0] == 0.0f);
    const float src[4] = {0.0f, -0.0f, 0.5f, NAN};
    const int64_t n4 = 4;
    tdm_tensor *fs = tdm_tensor_from_host(1, &n4, TDM_DTYPE_F32, TDM_CPU, src);
    tdm_tensor *bs = fs ? tdm_tensor_to(fs, TDM_CPU, TDM_DTYPE_BOOL) : NULL;
    uint8_t bv[4];
    CHECK(bs && tdm_tensor_to_host(bs, bv, 4) == TDM_OK && bv[0] == 0 && bv[1] == 0 &&
          bv[2] == 1 && bv[3] == 1);
    // safetensors "BOOL" round trip
    char path[600];
    snprintf(path, sizeof path, "%s/bool.safetensors", tmp);
    const char *names[1] = {"mask"};
    const tdm_tensor *ts[1] = {b};
    CHECK_MSG(b && tdm_safetensors_save(path, 1, names, ts, 0, NULL) == TDM_OK, "%s",
              tdm_last_error());
    tdm_safetensors *st = tdm_safetensors_open(path);
    tdm_tensor *r = st ? tdm_safetensors_get(st, "mask", TDM_CPU) : NULL;
    CHECK_MSG(r && tdm_tensor_dtype(r) == TDM_DTYPE_BOOL && tdm_tensor_ndim(r) == 2, "%s",
              tdm_last_error());
    uint8_t rv[6];
    CHECK(r && tdm_tensor_to_host(r, rv, 6) == TDM_OK && !memcmp(rv, raw, 6));
    tdm_safetensors_close(st);
    // ops that cannot take it refuse it by name
    tdm_error_clear();
    CHECK(b && !tdm_relu(b) && has_msg("relu") && has_msg("bool"));
    CHECK(b && !tdm_sum(b, 0, NULL, false) && has_msg("bool"));
    CHECK(!tdm_tensor_rand(2, sh, TDM_DTYPE_BOOL, TDM_CPU, 1, 0) && has_msg("bool"));
    CHECK(b && !tdm_add(b, b, 1.0) && has_msg("bool"));
    CHECK(b && !tdm_softmax(b, 1) && has_msg("bool"));
    tdm_tensor_set_requires_grad(b, true);
    CHECK(b && !tdm_tensor_requires_grad(b) && has_msg("bool"));
    tdm_tensor *q = randn(2, sh, TDM_DTYPE_F32, TDM_CPU, 1);
    CHECK(b && q && !sdpa(b, q, q, NULL, false) && has_msg("query has dtype bool"));
    // autocast leaves it alone: a bool mask stays bool beside bf16 q, k, v
    const uint8_t tri[4] = {1, 0, 1, 1};
    tdm_tensor *b2 = bool_tensor(2, (int64_t[]){2, 2}, tri, TDM_CPU);
    tdm_autocast_state prev = tdm_autocast_enter(TDM_DTYPE_BF16);
    tdm_tensor *y = q && b2 ? sdpa(q, q, q, b2, false) : NULL;
    tdm_autocast_exit(prev);
    CHECK_MSG(y && tdm_tensor_dtype(y) == TDM_DTYPE_BF16 && tdm_tensor_dtype(b2) == TDM_DTYPE_BOOL,
              "%s", tdm_last_error());
    tdm_tensor *mk[7] = {b, f, fs, bs, r, b2, y};
    for (int i = 0; i < 7; i++) tdm_tensor_free(mk[i]);
    tdm_tensor_free(q);
    CHECK_DONE("attention.bool");
}

// ---- errors ----------------------------------------------------------------------------------

// Each call must fail with a message naming the op and containing `want`.
#define EXPECT(call, want)                                                                     \
    do {                                                                                       \
        tdm_error_clear();                                                                     \
        tdm_tensor *y_ = (call);                                                               \
        CHECK_MSG(!y_ && has_msg(want) && has_msg("scaled_dot_product_attention"),             \
                  "want '%s', got '%s'", want, tdm_last_error());                              \
        tdm_tensor_free(y_);                                                                   \
    } while (0)

static int run_errors(void) {
    const tdm_device cpu = TDM_CPU;
    const tdm_dtype f32 = TDM_DTYPE_F32;
    const int64_t qs[4] = {2, 3, 5, 8}, ks[4] = {2, 3, 6, 8}, ke[4] = {2, 3, 6, 7};
    const int64_t vs[4] = {2, 3, 6, 4}, vb[4] = {2, 3, 5, 4}, bad_b[4] = {3, 3, 6, 8};
    tdm_tensor *q = randn(4, qs, f32, cpu, 1), *k = randn(4, ks, f32, cpu, 2);
    tdm_tensor *v = randn(4, vs, f32, cpu, 3), *k_e = randn(4, ke, f32, cpu, 4);
    tdm_tensor *v_s = randn(4, vb, f32, cpu, 5), *k_b = randn(4, bad_b, f32, cpu, 6);
    tdm_tensor *k16 = randn(4, ks, TDM_DTYPE_F16, cpu, 7);
    const int64_t ms_bad[2] = {5, 7}, ms_big[5] = {2, 2, 3, 5, 6}, ms_ok[2] = {5, 6}, one = 8;
    tdm_tensor *m_bad = randn(2, ms_bad, f32, cpu, 8), *m_big = randn(5, ms_big, f32, cpu, 9);
    tdm_tensor *m_i64 = tdm_tensor_zeros(2, ms_ok, TDM_DTYPE_I64, cpu);
    tdm_tensor *m_f64 = randn(2, ms_ok, TDM_DTYPE_F64, cpu, 10);
    tdm_tensor *m_ok = randn(2, ms_ok, f32, cpu, 11), *vec = randn(1, &one, f32, cpu, 12);
    tdm_generator *g = tdm_generator_new(1, 0);
    EXPECT(sdpa(NULL, k, v, NULL, false), "query is NULL");
    EXPECT(sdpa(q, k_e, v, NULL, false), "query (2, 3, 5, 8) and key (2, 3, 6, 7) must have the "
                                         "same last dim (E 8 vs 7)");
    EXPECT(sdpa(q, k, v_s, NULL, false), "must hold the same number of keys (S 6 vs 5)");
    EXPECT(sdpa(q, k_b, v, NULL, false), "leading dims of query (2, 3, 5, 8), key (3, 3, 6, 8) "
                                         "and value (2, 3, 6, 4) do not broadcast");
    EXPECT(sdpa(q, k16, v, NULL, false), "must have one dtype, got f32, f16 and f32");
    EXPECT(sdpa(vec, k, v, NULL, false), "query must be 2-D to 6-D");
    EXPECT(sdpa(q, k, v, m_bad, false), "attn_mask (5, 7) does not broadcast to the attention "
                                        "weights (2, 3, 5, 6)");
    EXPECT(sdpa(q, k, v, m_big, false), "attn_mask (2, 2, 3, 5, 6) does not broadcast");
    EXPECT(sdpa(q, k, v, m_i64, false), "attn_mask has dtype i64; expected bool, f32 or the "
                                        "query's f32");
    EXPECT(sdpa(q, k, v, m_f64, false), "attn_mask has dtype f64");
    EXPECT(sdpa(q, k, v, m_ok, true), "must not be given with is_causal");
    EXPECT(tdm_scaled_dot_product_attention(q, k, v, NULL, 1.5, false, NAN, g),
           "dropout_p has to be between 0 and 1, but got 1.5");
    EXPECT(tdm_scaled_dot_product_attention(q, k, v, NULL, NAN, false, NAN, g),
           "dropout_p has to be between 0 and 1");
    EXPECT(tdm_scaled_dot_product_attention(q, k, v, NULL, 0.1, false, NAN, NULL),
           "needs a generator");
    CHECK(tdm_generator_offset(g) == 0);   // failed calls draw nothing
    // backward: grad_output of the wrong shape or dtype; a bool mask has no gradient
    tdm_tensor *gq = (tdm_tensor *)&gq, *gm = (tdm_tensor *)&gm;
    tdm_tensor *gy_bad = randn(4, qs, f32, cpu, 13);
    CHECK(tdm_scaled_dot_product_attention_backward(gy_bad, q, k, v, NULL, 0, false, NAN, 0, 0,
                                                    &gq, NULL, NULL, NULL) == TDM_ERR_SHAPE &&
          gq == NULL && has_msg("grad_output has shape (2, 3, 5, 8), expected (2, 3, 5, 4)"));
    const uint8_t ones[30] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                              1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    tdm_tensor *mb = bool_tensor(2, ms_ok, ones, TDM_CPU);
    const int64_t ys[4] = {2, 3, 5, 4};
    tdm_tensor *gy = randn(4, ys, f32, cpu, 14);
    CHECK(tdm_scaled_dot_product_attention_backward(gy, q, k, v, mb, 0, false, NAN, 0, 0, NULL,
                                                    NULL, NULL, &gm) == TDM_OK &&
          gm == NULL);
    tdm_tensor_free(gy_bad);
    tdm_tensor_free(gy);
    tdm_tensor_free(mb);
    tdm_tensor *all[] = {q, k, v, k_e, v_s, k_b, k16, m_bad, m_big, m_i64, m_f64, m_ok, vec};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    tdm_generator_free(g);
    CHECK_DONE("attention.errors");
}

// ---- semantics -------------------------------------------------------------------------------

// A (L,S) bool mask: tril (keys j <= i) when tril, else from a pattern; a row all false when
// `dead_row` >= 0.
static tdm_tensor *mask_of(int64_t L, int64_t S, bool tril, int dead_row, tdm_device dev) {
    uint8_t *v = malloc((size_t)(L * S));
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < S; j++)
            v[i * S + j] = tril ? j <= i : (i * 7 + j * 3) % 5 != 0 && i != dead_row;
    const int64_t sh[2] = {L, S};
    tdm_tensor *m = bool_tensor(2, sh, v, dev);
    free(v);
    return m;
}

static int run_semantics(void) {
    const int64_t L = 5, S = 7, E = 8;
    const int64_t qs[4] = {2, 3, L, E}, ks[4] = {2, 3, S, E}, vs[4] = {2, 3, S, 4};
    tdm_tensor *q = randn(4, qs, TDM_DTYPE_F32, TDM_CPU, 1);
    tdm_tensor *k = randn(4, ks, TDM_DTYPE_F32, TDM_CPU, 2);
    tdm_tensor *v = randn(4, vs, TDM_DTYPE_F32, TDM_CPU, 3);
    // is_causal (L != S: top-left aligned) = the explicit tril(ones(L, S)) bool mask
    tdm_tensor *tril = mask_of(L, S, true, -1, TDM_CPU);
    tdm_tensor *yc = sdpa(q, k, v, NULL, true), *ym = sdpa(q, k, v, tril, false);
    CHECK_MSG(max_diff(yc, ym) == 0, "is_causal != tril mask: %g", max_diff(yc, ym));
    // ... and is_causal masks something: it differs from no mask
    tdm_tensor *yn = sdpa(q, k, v, NULL, false);
    CHECK(max_diff(yc, yn) > 1e-3);
    // a bool mask = the additive mask of 0 / -inf
    tdm_tensor *bm = mask_of(L, S, false, 2, TDM_CPU);
    tdm_tensor *bf = bm ? tdm_tensor_to(bm, TDM_CPU, TDM_DTYPE_F32) : NULL;   // 1 / 0
    float *h = malloc((size_t)(L * S) * sizeof *h);
    CHECK(bf && tdm_tensor_to_host(bf, h, (size_t)(L * S) * sizeof *h) == TDM_OK);
    for (int64_t i = 0; i < L * S; i++) h[i] = h[i] != 0 ? 0.0f : -INFINITY;
    const int64_t ms[2] = {L, S};
    tdm_tensor *am = tdm_tensor_from_host(2, ms, TDM_DTYPE_F32, TDM_CPU, h);
    free(h);
    tdm_tensor *yb = sdpa(q, k, v, bm, false), *ya = sdpa(q, k, v, am, false);
    CHECK_MSG(yb && max_diff(yb, ya) == 0, "bool != additive: %g", max_diff(yb, ya));
    // row 2 has no key: zeros there (PyTorch 2.5+), finite elsewhere
    double *yv = host(yb);
    for (int64_t b = 0; yv && b < 6; b++)
        for (int64_t i = 0; i < L; i++)
            for (int64_t e = 0; e < 4; e++) {
                const double x = yv[(b * L + i) * 4 + e];
                CHECK_MSG(i == 2 ? x == 0.0 : isfinite(x) && x != 0.0, "row %lld: %g",
                          (long long)i, x);
            }
    free(yv);
    // an f32 additive mask beside f16 q, k, v (PyTorch allows "bool or float or the query's
    // dtype") = the same values as an f16 mask
    tdm_tensor *q16 = tdm_tensor_to(q, TDM_CPU, TDM_DTYPE_F16);
    tdm_tensor *k16 = tdm_tensor_to(k, TDM_CPU, TDM_DTYPE_F16);
    tdm_tensor *v16 = tdm_tensor_to(v, TDM_CPU, TDM_DTYPE_F16);
    tdm_tensor *am16 = am ? tdm_tensor_to(am, TDM_CPU, TDM_DTYPE_F16) : NULL;
    tdm_tensor *y32m = sdpa(q16, k16, v16, am, false), *y16m = sdpa(q16, k16, v16, am16, false);
    CHECK_MSG(y32m && tdm_tensor_dtype(y32m) == TDM_DTYPE_F16 && max_diff(y32m, y16m) == 0,
              "%s", tdm_last_error());
    tdm_tensor *m16[6] = {q16, k16, v16, am16, y32m, y16m};
    for (int i = 0; i < 6; i++) tdm_tensor_free(m16[i]);
    // the default scale is 1/sqrt(E)
    tdm_tensor *ys = tdm_scaled_dot_product_attention(q, k, v, NULL, 0, false, 1 / sqrt(8.0), NULL);
    CHECK(ys && max_diff(ys, yn) == 0);
    tdm_tensor *y2 = tdm_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0.7, NULL);
    CHECK(y2 && max_diff(y2, yn) > 1e-3);
    // broadcast leading dims = the expanded tensors: k (3,S,E) against q (2,3,L,E)
    const int64_t k3s[3] = {3, S, E};
    tdm_tensor *k3 = randn(3, k3s, TDM_DTYPE_F32, TDM_CPU, 4);
    double *k3h = host(k3);
    double *kx = malloc((size_t)(2 * 3 * S * E) * sizeof *kx);
    for (int64_t i = 0; k3h && i < 2 * 3 * S * E; i++) kx[i] = k3h[i % (3 * S * E)];
    tdm_tensor *kxt = tdm_tensor_from_host(4, ks, TDM_DTYPE_F64, TDM_CPU, kx);
    tdm_tensor *kx32 = kxt ? tdm_tensor_to(kxt, TDM_CPU, TDM_DTYPE_F32) : NULL;
    tdm_tensor *yk3 = sdpa(q, k3, v, NULL, false), *ykx = sdpa(q, kx32, v, NULL, false);
    CHECK_MSG(yk3 && max_diff(yk3, ykx) == 0, "broadcast k: %g", max_diff(yk3, ykx));
    free(k3h);
    free(kx);
    // dropout: from g, which moves on by one; the same (seed, offset) gives the same weights;
    // dropout_p 0 leaves g alone; p = 1 drops everything
    tdm_generator *g1 = tdm_generator_new(9, 4), *g2 = tdm_generator_new(9, 4);
    tdm_tensor *d1 = tdm_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, NAN, g1);
    tdm_tensor *d2 = tdm_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, NAN, g2);
    CHECK(d1 && max_diff(d1, d2) == 0 && tdm_generator_offset(g1) == 5);
    tdm_tensor *d3 = tdm_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, NAN, g1);
    CHECK(d3 && max_diff(d1, d3) > 1e-3 && tdm_generator_offset(g1) == 6);
    tdm_tensor *d0 = tdm_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, NAN, g1);
    CHECK(d0 && max_diff(d0, yn) == 0 && tdm_generator_offset(g1) == 6);
    tdm_tensor *dz = tdm_scaled_dot_product_attention(q, k, v, NULL, 1.0, false, NAN, g1);
    tdm_tensor *zero = tdm_tensor_zeros(4, (int64_t[]){2, 3, L, 4}, TDM_DTYPE_F32, TDM_CPU);
    CHECK(dz && max_diff(dz, zero) == 0);
    // S = 0 (no keys): zeros; E = 0: scores of 0, the mean of v
    const int64_t k0s[4] = {2, 3, 0, E}, v0s[4] = {2, 3, 0, 4};
    tdm_tensor *k0 = tdm_tensor_zeros(4, k0s, TDM_DTYPE_F32, TDM_CPU);
    tdm_tensor *v0 = tdm_tensor_zeros(4, v0s, TDM_DTYPE_F32, TDM_CPU);
    tdm_tensor *y0 = sdpa(q, k0, v0, NULL, false);
    CHECK_MSG(y0 && max_diff(y0, zero) == 0, "%s", tdm_last_error());
    const int64_t qe[4] = {2, 3, L, 0}, kes[4] = {2, 3, S, 0};
    tdm_tensor *qz = tdm_tensor_zeros(4, qe, TDM_DTYPE_F32, TDM_CPU);
    tdm_tensor *kz = tdm_tensor_zeros(4, kes, TDM_DTYPE_F32, TDM_CPU);
    tdm_tensor *ye = sdpa(qz, kz, v, NULL, false);
    int md = 2;
    tdm_tensor *vm = tdm_mean(v, 1, &md, true);   // (2,3,1,4)
    double *yeh = host(ye), *vmh = host(vm);
    for (int64_t b = 0; yeh && vmh && b < 6; b++)
        for (int64_t i = 0; i < L; i++)
            for (int64_t e = 0; e < 4; e++)
                CHECK(fabs(yeh[(b * L + i) * 4 + e] - vmh[b * 4 + e]) < 1e-6);
    free(yeh);
    free(vmh);
    tdm_tensor *all[] = {q, k, v, tril, yc, ym, yn, bm, bf, am, yb, ya, ys, y2, k3, kxt, kx32,
                         yk3, ykx, d1, d2, d3, d0, dz, zero, k0, v0, y0, qz, kz, ye, vm};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    tdm_generator_free(g1);
    tdm_generator_free(g2);
    CHECK_DONE("attention.semantics");
}

// ---- autograd --------------------------------------------------------------------------------

static int run_autograd(void) {
    const int64_t qs[4] = {2, 2, 4, 6}, ks[3] = {2, 5, 6}, vs[4] = {2, 1, 5, 3}, ms[2] = {4, 5};
    const int64_t ys[4] = {2, 2, 4, 3};
    tdm_tensor *q = randn(4, qs, TDM_DTYPE_F32, TDM_CPU, 1);
    tdm_tensor *k = randn(3, ks, TDM_DTYPE_F32, TDM_CPU, 2);
    tdm_tensor *v = randn(4, vs, TDM_DTYPE_F32, TDM_CPU, 3);
    tdm_tensor *m = randn(2, ms, TDM_DTYPE_F32, TDM_CPU, 4);
    tdm_tensor *gy = randn(4, ys, TDM_DTYPE_F32, TDM_CPU, 5);
    tdm_tensor *leaf[4] = {q, k, v, m};
    for (int i = 0; i < 4; i++) tdm_tensor_set_requires_grad(leaf[i], true);
    tdm_generator *g = tdm_generator_new(3, 10);
    tdm_tensor *y = tdm_scaled_dot_product_attention(q, k, v, m, 0.25, false, 0.6, g);
    CHECK_MSG(y && !strcmp(tdm_tensor_grad_fn_name(y), "scaled_dot_product_attention"), "%s",
              tdm_last_error());
    CHECK_MSG(y && tdm_backward(y, gy) == TDM_OK, "%s", tdm_last_error());
    // the explicit backward with the forward's draw (seed 3, offset 10)
    tdm_tensor *ge[4] = {NULL, NULL, NULL, NULL};
    CHECK(tdm_scaled_dot_product_attention_backward(gy, q, k, v, m, 0.25, false, 0.6, 3, 10,
                                                    &ge[0], &ge[1], &ge[2], &ge[3]) == TDM_OK);
    for (int i = 0; i < 4; i++) {
        tdm_tensor *gr = tdm_tensor_grad(leaf[i]);
        CHECK_MSG(gr && max_diff(gr, ge[i]) == 0, "input %d: %g", i, max_diff(gr, ge[i]));
        CHECK(gr && tdm_tensor_ndim(gr) == tdm_tensor_ndim(leaf[i]));
        tdm_tensor_free(ge[i]);
    }
    // the dropout mattered: another draw gives other gradients
    tdm_tensor *go = NULL;
    CHECK(tdm_scaled_dot_product_attention_backward(gy, q, k, v, m, 0.25, false, 0.6, 3, 11, &go,
                                                    NULL, NULL, NULL) == TDM_OK);
    CHECK(max_diff(go, tdm_tensor_grad(q)) > 1e-4);
    tdm_tensor_free(go);
    tdm_tensor_free(y);
    // autocast bf16: f32 leaves, a bf16 result, f32 gradients
    for (int i = 0; i < 4; i++) tdm_tensor_set_grad(leaf[i], NULL);
    tdm_autocast_state prev = tdm_autocast_enter(TDM_DTYPE_BF16);
    tdm_tensor *yb = tdm_scaled_dot_product_attention(q, k, v, m, 0.0, false, NAN, NULL);
    tdm_autocast_exit(prev);
    CHECK(yb && tdm_tensor_dtype(yb) == TDM_DTYPE_BF16);
    tdm_tensor *gyb = tdm_tensor_to(gy, TDM_CPU, TDM_DTYPE_BF16);
    CHECK_MSG(yb && gyb && tdm_backward(yb, gyb) == TDM_OK, "%s", tdm_last_error());
    for (int i = 0; i < 4; i++) {
        tdm_tensor *gr = tdm_tensor_grad(leaf[i]);
        CHECK(gr && tdm_tensor_dtype(gr) == TDM_DTYPE_F32);
    }
    // ... close to the f32 gradients (bf16 inputs: a few 2^-8 relative)
    tdm_tensor *gf = NULL;
    CHECK(tdm_scaled_dot_product_attention_backward(gy, q, k, v, m, 0, false, NAN, 0, 0, &gf,
                                                    NULL, NULL, NULL) == TDM_OK);
    CHECK_MSG(max_diff(gf, tdm_tensor_grad(q)) < 0.05, "%g", max_diff(gf, tdm_tensor_grad(q)));
    tdm_tensor_free(gf);
    tdm_tensor_free(gyb);
    tdm_tensor_free(yb);
    // no_grad records nothing
    bool was = tdm_grad_set_enabled(false);
    tdm_tensor *yn = sdpa(q, k, v, m, false);
    tdm_grad_set_enabled(was);
    CHECK(yn && tdm_tensor_grad_fn_name(yn) == NULL);
    tdm_tensor_free(yn);
    for (int i = 0; i < 4; i++) tdm_tensor_free(leaf[i]);
    tdm_tensor_free(gy);
    tdm_generator_free(g);
    CHECK_DONE("attention.autograd");
}

// ---- cuda:0 ------------------------------------------------------------------------------------

static int run_gpu_bool(void) {
    if (!gpu_or_skip("attention.gpu_bool")) return 77;
    uint8_t raw[257];
    for (int i = 0; i < 257; i++) raw[i] = (uint8_t)((i * 37) % 3 == 0 ? 0 : (i % 5) + 1);
    const int64_t n = 257;
    tdm_tensor *c = bool_tensor(1, &n, raw, CUDA0);
    uint8_t back[257];
    CHECK_MSG(c && tdm_tensor_to_host(c, back, sizeof back) == TDM_OK && !memcmp(back, raw, 257),
              "%s", tdm_last_error());
    // cast on the device = cast on the cpu (0/1 out of any nonzero byte)
    tdm_tensor *cpu = bool_tensor(1, &n, raw, TDM_CPU);
    tdm_tensor *fc = c ? tdm_tensor_to(c, CUDA0, TDM_DTYPE_F16) : NULL;
    tdm_tensor *fh = tdm_tensor_to(cpu, TDM_CPU, TDM_DTYPE_F16);
    CHECK(fc && max_diff(fc, fh) == 0);
    tdm_tensor *bc = fc ? tdm_tensor_to(fc, CUDA0, TDM_DTYPE_BOOL) : NULL;
    uint8_t b01[257];
    CHECK(bc && tdm_tensor_to_host(bc, b01, sizeof b01) == TDM_OK);
    for (int i = 0; i < 257; i++) CHECK(b01[i] == (raw[i] != 0));
    // to the second device (emulated: TANDEM_EMU_DEVICES=2) when there is one, and back
    tdm_device cuda1 = {TDM_DEVICE_CUDA, 1};
    if (c && tdm_device_available(cuda1)) {
        tdm_tensor *c1 = tdm_tensor_to(c, cuda1, TDM_DTYPE_BOOL);
        CHECK(c1 && tdm_tensor_to_host(c1, back, sizeof back) == TDM_OK && !memcmp(back, raw, 257));
        tdm_tensor_free(c1);
    }
    tdm_tensor *all[] = {c, cpu, fc, fh, bc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    CHECK_DONE("attention.gpu_bool");
}

// cuda:0 against the cpu, forward and every gradient, f32: within 1e-5 relative to the largest
// value (the conformance bounds hold them element by element: golden replay, bench conform).
static int run_gpu_match(void) {
    if (!gpu_or_skip("attention.gpu_match")) return 77;
    const int64_t qs[4] = {2, 3, 33, 16}, ks[4] = {1, 3, 1100, 16}, vs[4] = {2, 3, 1100, 5};
    const int64_t ms[4] = {2, 1, 1, 1100}, ys[4] = {2, 3, 33, 5};   // S > 1024: a block per row
    const tdm_dtype f32 = TDM_DTYPE_F32;
    tdm_tensor *in[5] = {randn(4, qs, f32, TDM_CPU, 1), randn(4, ks, f32, TDM_CPU, 2),
                         randn(4, vs, f32, TDM_CPU, 3), randn(4, ms, f32, TDM_CPU, 4),
                         randn(4, ys, f32, TDM_CPU, 5)};
    tdm_tensor *dv[5];
    for (int i = 0; i < 5; i++) dv[i] = in[i] ? tdm_tensor_to(in[i], CUDA0, TDM_DTYPE_F32) : NULL;
    tdm_generator *gc = tdm_generator_new(5, 1), *gd = tdm_generator_new(5, 1);
    tdm_tensor *yc =
        tdm_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.2, false, NAN, gc);
    tdm_tensor *yd =
        tdm_scaled_dot_product_attention(dv[0], dv[1], dv[2], dv[3], 0.2, false, NAN, gd);
    CHECK_MSG(yc && yd && max_diff(yc, yd) < 1e-5, "%g %s", max_diff(yc, yd), tdm_last_error());
    tdm_tensor *gcpu[4] = {0}, *gdev[4] = {0};
    CHECK(tdm_scaled_dot_product_attention_backward(in[4], in[0], in[1], in[2], in[3], 0.2, false,
                                                    NAN, 5, 1, &gcpu[0], &gcpu[1], &gcpu[2],
                                                    &gcpu[3]) == TDM_OK);
    CHECK_MSG(tdm_scaled_dot_product_attention_backward(dv[4], dv[0], dv[1], dv[2], dv[3], 0.2,
                                                        false, NAN, 5, 1, &gdev[0], &gdev[1],
                                                        &gdev[2], &gdev[3]) == TDM_OK,
              "%s", tdm_last_error());
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(max_diff(gcpu[i], gdev[i]) < 1e-5, "grad %d: %g", i, max_diff(gcpu[i], gdev[i]));
        tdm_tensor_free(gcpu[i]);
        tdm_tensor_free(gdev[i]);
    }
    for (int i = 0; i < 5; i++) {
        tdm_tensor_free(in[i]);
        tdm_tensor_free(dv[i]);
    }
    tdm_tensor_free(yc);
    tdm_tensor_free(yd);
    tdm_generator_free(gc);
    tdm_generator_free(gd);
    CHECK_DONE("attention.gpu_match");
}

// A captured step with dropout from a generator, forward and backward: replay k equals the k-th
// eager step of an identical generator, bit for bit, and the generator moves on with the replays.
static int run_gpu_graph(void) {
    if (!gpu_or_skip("attention.gpu_graph")) return 77;
    const int64_t qs[4] = {1, 2, 6, 8}, ys[4] = {1, 2, 6, 8};
    tdm_tensor *q = randn(4, qs, TDM_DTYPE_F32, CUDA0, 1);
    tdm_tensor *gy = randn(4, ys, TDM_DTYPE_F32, CUDA0, 2);
    tdm_tensor *qc = tdm_tensor_detach(q), *qe = tdm_tensor_detach(q);
    tdm_tensor_set_requires_grad(qc, true);
    tdm_tensor_set_requires_grad(qe, true);
    tdm_generator *gc = tdm_generator_new(17, 3), *ge = tdm_generator_new(17, 3);
    // eager warm-up on the captured side (lazy per-device state made outside the capture)
    tdm_tensor *w = tdm_scaled_dot_product_attention(qc, qc, qc, NULL, 0.3, true, NAN, gc);
    CHECK_MSG(w && tdm_backward(w, gy) == TDM_OK, "%s", tdm_last_error());
    tdm_tensor_free(w);
    tdm_tensor *we = tdm_scaled_dot_product_attention(qe, qe, qe, NULL, 0.3, true, NAN, ge);
    CHECK(we && tdm_backward(we, gy) == TDM_OK);
    tdm_tensor_free(we);
    tdm_graph *g = NULL;
    CHECK(tdm_tensor_set_grad(qc, NULL) == TDM_OK);
    CHECK(tdm_graph_capture_begin(CUDA0) == TDM_OK);
    tdm_tensor *y = tdm_scaled_dot_product_attention(qc, qc, qc, NULL, 0.3, true, NAN, gc);
    CHECK_MSG(y && tdm_backward(y, gy) == TDM_OK, "%s", tdm_last_error());
    CHECK_MSG(tdm_graph_capture_end(CUDA0, &g) == TDM_OK, "%s", tdm_last_error());
    CHECK(tdm_generator_offset(gc) == 4);   // the capture drew nothing
    tdm_tensor *prev = NULL;
    for (int k = 0; k < 3 && g; k++) {
        CHECK(tdm_tensor_set_grad(qe, NULL) == TDM_OK);
        tdm_tensor *e = tdm_scaled_dot_product_attention(qe, qe, qe, NULL, 0.3, true, NAN, ge);
        CHECK(e && tdm_backward(e, gy) == TDM_OK);
        CHECK(tdm_graph_replay(g) == TDM_OK);
        CHECK_MSG(max_diff(y, e) == 0, "replay %d: output differs from eager", k);
        // the gradient was made during the capture (none before): each replay rewrites it
        CHECK_MSG(max_diff(tdm_tensor_grad(qc), tdm_tensor_grad(qe)) == 0, "replay %d: grad", k);
        CHECK(prev == NULL || max_diff(prev, e) > 1e-4);   // a new mask each step
        tdm_tensor_free(prev);
        prev = e;
    }
    CHECK(tdm_generator_offset(gc) == tdm_generator_offset(ge));
    tdm_tensor_free(prev);
    tdm_tensor_free(y);
    tdm_graph_free(g);
    tdm_tensor *all[] = {q, gy, qc, qe};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    tdm_generator_free(gc);
    tdm_generator_free(ge);
    CHECK_DONE("attention.gpu_graph");
}

static int run_gpu_errors(void) {
    if (!gpu_or_skip("attention.gpu_errors")) return 77;
    const int64_t s[3] = {2, 4, 8}, ms[2] = {4, 4};
    tdm_tensor *q = randn(3, s, TDM_DTYPE_F32, CUDA0, 1);
    tdm_tensor *kc = randn(3, s, TDM_DTYPE_F32, TDM_CPU, 2);
    tdm_tensor *m = randn(2, ms, TDM_DTYPE_F32, TDM_CPU, 3);
    tdm_tensor *y = sdpa(q, kc, q, NULL, false);
    CHECK_MSG(!y && has_msg("expected all tensors on the same device, got cuda:0 and cpu"), "%s",
              tdm_last_error());
    tdm_tensor_free(y);
    y = sdpa(q, q, q, m, false);
    CHECK_MSG(!y && has_msg("same device"), "%s", tdm_last_error());
    tdm_tensor_free(y);
    tdm_tensor_free(q);
    tdm_tensor_free(kc);
    tdm_tensor_free(m);
    CHECK_DONE("attention.gpu_errors");
}

// One forward and backward through autograd on cuda:0 in the current attention mode: the
// output, the three gradients (*g), and the peak of allocated bytes above the start.
static tdm_tensor *fused_step(const tdm_tensor *const in[4], bool causal, tdm_tensor *g[3],
                              int64_t *peak) {
    tdm_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = tdm_tensor_detach(in[i]);
        tdm_tensor_set_requires_grad(x[i], true);
    }
    tdm_memory_tracker t;
    int64_t net = 0;
    tdm_tensor *y = NULL;
    if (tdm_memory_tracker_begin(&t, CUDA0) == TDM_OK) {
        y = tdm_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.0, causal, NAN, NULL);
        if (y && tdm_backward(y, in[3]) != TDM_OK) {
            tdm_tensor_free(y);
            y = NULL;
        }
        if (tdm_memory_tracker_end(&t, peak, &net) != TDM_OK) *peak = -1;
    }
    for (int i = 0; i < 3; i++) {
        g[i] = tdm_tensor_grad(x[i]) ? tdm_tensor_detach(tdm_tensor_grad(x[i])) : NULL;
        tdm_tensor_free(x[i]);
    }
    return y;
}

// Bit equality of two tensors' values.
static bool same_bits(const tdm_tensor *a, const tdm_tensor *b) {
    return a && b && max_diff(a, b) == 0;
}

// The fused path where it applies: which calls take it; no (B,L,S) buffer (the peak of
// allocated bytes during a forward and backward stays below one f32 score matrix, which the
// plain path's peak exceeds: the check can fail); its output and gradients within a few units of
// the dtype of the plain path's (the golden and conform runs hold both to PyTorch element by
// element); the deterministic mode's backward bit-reproducible, the heuristic one's (f32 atomics
// for gq) within the same bound of it. bf16 with E = 32 and f16 with E = 40, Ev = 24 (not
// multiples of 8: element loads, padded tiles), L = S = 256 and 200, causal and not; head sizes
// 160/256 and 256/100 (the 256 tiles) with L != S both ways; f32 (its own kernels, the same
// backward in every mode: bit-reproducible) in the same shapes' kinds.
static int run_gpu_fused(void) {
    if (!gpu_or_skip("attention.gpu_fused")) return 77;
    const tdm_attn_mode mode0 = tdm_attn_mode_get();
    CHECK(tdm_attn_fused_applies(CUDA0, TDM_DTYPE_BF16, 64, 64, false, 0.0));
    CHECK(tdm_attn_fused_applies(CUDA0, TDM_DTYPE_F16, 256, 7, false, 0.0));
    CHECK(tdm_attn_fused_applies(CUDA0, TDM_DTYPE_F32, 64, 64, false, 0.0));
    CHECK(tdm_attn_fused_applies(CUDA0, TDM_DTYPE_F32, 100, 256, false, 0.0));
    CHECK(!tdm_attn_fused_applies(CUDA0, TDM_DTYPE_F64, 64, 64, false, 0.0));
    CHECK(!tdm_attn_fused_applies(CUDA0, TDM_DTYPE_F32, 64, 257, false, 0.0));
    CHECK(!tdm_attn_fused_applies(CUDA0, TDM_DTYPE_BF16, 257, 64, false, 0.0));
    CHECK(!tdm_attn_fused_applies(CUDA0, TDM_DTYPE_BF16, 64, 64, true, 0.0));
    CHECK(!tdm_attn_fused_applies(CUDA0, TDM_DTYPE_BF16, 64, 64, false, 0.1));
    CHECK(!tdm_attn_fused_applies(TDM_CPU, TDM_DTYPE_BF16, 64, 64, false, 0.0));
    tdm_attn_mode_set(TDM_ATTN_CONFORMANCE);
    CHECK(!tdm_attn_fused_applies(CUDA0, TDM_DTYPE_BF16, 64, 64, false, 0.0));
    CHECK(!tdm_attn_fused_applies(CUDA0, TDM_DTYPE_F32, 64, 64, false, 0.0));
    CHECK(!strcmp(tdm_attn_mode_name(TDM_ATTN_DETERMINISTIC), "deterministic"));
    const struct {
        tdm_dtype dt;
        int64_t L, S, E, Ev;
        bool causal;
        double tol;   // relative to the largest value: a few units of the dtype
        bool mem;     // the scores dominate: check the peaks
    } cfg[] = {{TDM_DTYPE_BF16, 256, 256, 32, 32, true, 4.0 / 128, true},
               {TDM_DTYPE_BF16, 256, 256, 32, 32, false, 4.0 / 128, true},
               {TDM_DTYPE_F16, 200, 200, 40, 24, true, 4.0 / 1024, true},
               // the largest head (256: the 32-key tiles), L != S both ways, not causal and causal
               {TDM_DTYPE_BF16, 70, 130, 160, 256, false, 4.0 / 128, false},
               {TDM_DTYPE_F16, 130, 70, 256, 100, true, 4.0 / 1024, false},
               // f32 (k_flash_attention_f32.cu; tol 0: derived below): E = 32; E = 37, Ev = 21
               // (not multiples of 4: element loads); heads 100/128 (the 128 tiles) and 160/256
               // (8 lanes a row, 16-key tiles), L != S both ways
               {TDM_DTYPE_F32, 256, 256, 32, 32, true, 0, true},
               {TDM_DTYPE_F32, 200, 200, 37, 21, false, 0, true},
               {TDM_DTYPE_F32, 130, 70, 100, 128, false, 0, false},
               {TDM_DTYPE_F32, 70, 130, 160, 256, true, 0, false}};
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        const int64_t B = 2, L = cfg[c].L, S = cfg[c].S;
        const int64_t qs[3] = {B, L, cfg[c].E}, ks[3] = {B, S, cfg[c].E}, vs[3] = {B, S, cfg[c].Ev};
        const int64_t ys[3] = {B, L, cfg[c].Ev};
        // f32: no rounding to a narrower dtype dominates; both paths are within the conformance
        // bound (docs/CONFORMANCE.md), whose relative order is u times the sums' lengths (S keys,
        // E or Ev columns) plus the fused path's 3 n_t tile rescalings, n_t = ceil(S / 16): twice
        // that (both paths err), and a factor 2 for sum |terms| over the largest value
        const double tol = cfg[c].dt != TDM_DTYPE_F32
                               ? cfg[c].tol
                               : 4.0 * (double)(S + (cfg[c].E > cfg[c].Ev ? cfg[c].E : cfg[c].Ev) +
                                                3 * ((S + 15) / 16)) * ldexp(1.0, -24);
        tdm_tensor *in[4] = {randn(3, qs, cfg[c].dt, CUDA0, 11), randn(3, ks, cfg[c].dt, CUDA0, 12),
                             randn(3, vs, cfg[c].dt, CUDA0, 13), randn(3, ys, cfg[c].dt, CUDA0, 14)};
        tdm_tensor *gp[3], *gf[3], *gf2[3], *gf3[3];
        int64_t peak_plain = 0, peak_fused = 0, peak2 = 0, peak3 = 0;
        tdm_attn_mode_set(TDM_ATTN_CONFORMANCE);
        tdm_tensor *yp = fused_step((const tdm_tensor *const *)in, cfg[c].causal, gp, &peak_plain);
        tdm_attn_mode_set(TDM_ATTN_HEURISTIC);
        tdm_tensor *yf = fused_step((const tdm_tensor *const *)in, cfg[c].causal, gf, &peak_fused);
        tdm_attn_mode_set(TDM_ATTN_DETERMINISTIC);
        tdm_tensor *yf2 = fused_step((const tdm_tensor *const *)in, cfg[c].causal, gf2, &peak2);
        tdm_tensor *yf3 = fused_step((const tdm_tensor *const *)in, cfg[c].causal, gf3, &peak3);
        const int64_t scores = B * L * S * 4;   // one f32 (B,L,S) matrix
        CHECK_MSG(yp && yf && yf2, "%s", tdm_last_error());
        CHECK_MSG(!cfg[c].mem || peak_plain >= scores, "config %zu: plain path peak %lld < %lld",
                  c, (long long)peak_plain, (long long)scores);
        CHECK_MSG(!cfg[c].mem || (peak_fused > 0 && peak_fused < scores), "config %zu: fused peak "
                  "%lld, one score matrix is %lld bytes", c, (long long)peak_fused,
                  (long long)scores);
        printf("config %zu: peak allocated plain %lld, fused %lld bytes\n", c,
               (long long)peak_plain, (long long)peak_fused);
        double big = 0;
        double *h = host(yp);
        for (int64_t i = 0; h && i < tdm_tensor_numel(yp); i++) big = fmax(big, fabs(h[i]));
        free(h);
        CHECK_MSG(max_diff(yp, yf) <= tol * big, "config %zu: output %g (max %g)", c,
                  max_diff(yp, yf), big);
        printf("config %zu: output fused vs plain %g of the largest (tolerance %g)\n", c,
               max_diff(yp, yf) / big, tol);
        CHECK(same_bits(yf, yf2) && same_bits(yf2, yf3));
        for (int i = 0; i < 3; i++) {
            double gbig = 0;
            double *hg = host(gp[i]);
            for (int64_t j = 0; hg && j < tdm_tensor_numel(gp[i]); j++) gbig = fmax(gbig, fabs(hg[j]));
            free(hg);
            CHECK_MSG(gp[i] && gf[i] && max_diff(gp[i], gf[i]) <= tol * gbig,
                      "config %zu grad %d: %g (max %g)", c, i, max_diff(gp[i], gf[i]), gbig);
            printf("config %zu grad %d: fused vs plain %g of the largest\n", c, i,
                   max_diff(gp[i], gf[i]) / gbig);
            // deterministic: bit for bit from run to run; heuristic (gq through f32 atomics for
            // heads up to 64, in no fixed order) within the same few units as the plain path
            CHECK_MSG(same_bits(gf2[i], gf3[i]), "config %zu grad %d: two deterministic runs "
                      "differ", c, i);
            CHECK_MSG(max_diff(gf2[i], gf[i]) <= tol * gbig, "config %zu grad %d: "
                      "heuristic vs deterministic %g", c, i, max_diff(gf2[i], gf[i]));
            // f32 has no atomic gq: every mode runs the deterministic backward
            CHECK_MSG(cfg[c].dt != TDM_DTYPE_F32 || same_bits(gf[i], gf2[i]), "config %zu grad "
                      "%d: f32 heuristic and deterministic runs differ", c, i);
            tdm_tensor_free(gp[i]);
            tdm_tensor_free(gf[i]);
            tdm_tensor_free(gf2[i]);
            tdm_tensor_free(gf3[i]);
        }
        for (int i = 0; i < 4; i++) tdm_tensor_free(in[i]);
        tdm_tensor_free(yp);
        tdm_tensor_free(yf);
        tdm_tensor_free(yf2);
        tdm_tensor_free(yf3);
    }
    tdm_attn_mode_set(mode0);
    CHECK_DONE("attention.gpu_fused");
}

int main(int argc, char **argv) {
    const char *t = argc > 1 ? argv[1] : "";
    const char *tmp = argc > 2 ? argv[2] : "/tmp";
    if (!strcmp(t, "bool")) return run_bool(tmp);
    if (!strcmp(t, "errors")) return run_errors();
    if (!strcmp(t, "semantics")) return run_semantics();
    if (!strcmp(t, "autograd")) return run_autograd();
    if (!strcmp(t, "gpu_bool")) return run_gpu_bool();
    if (!strcmp(t, "gpu_match")) return run_gpu_match();
    if (!strcmp(t, "gpu_graph")) return run_gpu_graph();
    if (!strcmp(t, "gpu_errors")) return run_gpu_errors();
    if (!strcmp(t, "gpu_fused")) return run_gpu_fused();
    fprintf(stderr, "usage: test_attention bool|errors|semantics|autograd|gpu_bool|gpu_match|"
                    "gpu_graph|gpu_errors|gpu_fused [TMPDIR]\n");
    return 2;
}

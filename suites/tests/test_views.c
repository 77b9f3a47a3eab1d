/* test_views.c — the views and joins (tensor.h: view, transpose, contiguous, narrow, split,
 * chunk; ops.h: cat, stack) and the ops with a Python number (ops.h: add/sub/rsub/mul/div/rdiv
 * _scalar): values, PyTorch's shapes and type promotion, every error, and autograd through them.
 *   values DEV    the values, shapes and dtypes on DEV (cpu, or cuda:0: exit 77 without one)
 *   errors        every bad argument is a clear message naming the op, never a crash (cpu)
 *   autograd DEV  gradients through each view and scalar op (narrow: zeros with the slice; cat:
 *                 each input's slice, back in its dtype; split pieces summed)
 *   capture       (cuda:0) a step of views, joins and scalar ops captured in a CUDA graph and
 *                 replayed on a new input equals eager execution bit for bit
 *   no_waits      (the emulated device) the same step, forward and backward, makes no host
 *                 wait: many narrows and cats per step cost no synchronization */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

#ifdef TDM_TEST_EMU
unsigned long long tdm_emu_host_waits(void);  // suites/emu/runtime_streams.cc
#endif

static tdm_device dev;
#define S(...)          \
    (const int64_t[]) { \
        __VA_ARGS__     \
    }

// ---- helpers ----------------------------------------------------------------------------------

// A tensor on dev of dtype dt with the values v (as doubles), or 0, 1, 2, ... when v is NULL.
static tdm_tensor *mk(tdm_dtype dt, int ndim, const int64_t *shape, const double *v) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = v ? v[i] : (double)i;
    tdm_tensor *t64 = tdm_tensor_from_host(ndim, shape, TDM_DTYPE_F64, TDM_CPU, h);
    tdm_tensor *t = t64 ? tdm_tensor_to(t64, dev, dt) : NULL;
    tdm_tensor_free(t64);
    free(h);
    return t;
}

static tdm_tensor *mk_i64(int ndim, const int64_t *shape, const int64_t *v) {
    return tdm_tensor_from_host(ndim, shape, TDM_DTYPE_I64, dev, v);
}

// t's values as doubles (malloc'd).
static double *vals(const tdm_tensor *t) {
    int64_t n = tdm_tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        CHECK_MSG(0, "to_host_f64: %s", tdm_last_error());
        for (int64_t i = 0; i < n; i++) v[i] = NAN;
    }
    return v;
}

static bool shape_is(const tdm_tensor *t, int ndim, const int64_t *shape) {
    if (!t || tdm_tensor_ndim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (tdm_tensor_shape(t)[d] != shape[d]) return false;
    return true;
}

// t has the dtype, shape and values want[] (exactly).
static void check_t(const char *what, const tdm_tensor *t, tdm_dtype dt, int ndim,
                    const int64_t *shape, const double *want) {
    CHECK_MSG(t != NULL, "%s: %s", what, tdm_last_error());
    if (!t) return;
    CHECK_MSG(tdm_tensor_dtype(t) == dt, "%s: dtype %s, want %s", what,
              tdm_dtype_name(tdm_tensor_dtype(t)), tdm_dtype_name(dt));
    CHECK_MSG(shape_is(t, ndim, shape), "%s: wrong shape", what);
    if (!shape_is(t, ndim, shape) || !want) return;
    double *v = vals(t);
    for (int64_t i = 0; i < tdm_tensor_numel(t); i++)
        if (v[i] != want[i]) {
            CHECK_MSG(0, "%s: [%lld] = %.17g, want %.17g", what, (long long)i, v[i], want[i]);
            break;
        }
    free(v);
}

// a NULL result (or -1) with a message containing `want`
static void check_err(const char *what, bool failed, const char *want) {
    CHECK_MSG(failed, "%s: succeeded, want an error '%s'", what, want);
    CHECK_MSG(strstr(tdm_last_error(), want) != NULL, "%s: message '%s', want '%s'", what,
              tdm_last_error(), want);
}

static float f32(double x) {
    return (float)x;
}

static double bf16_round(double x) {  // RNE to bf16 through its bits
    tdm_tensor *t = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F64, TDM_CPU, &x);
    tdm_tensor *b = tdm_tensor_to(t, TDM_CPU, TDM_DTYPE_BF16);
    double r = NAN;
    tdm_tensor_to_host_f64(b, &r);
    tdm_tensor_free(t);
    tdm_tensor_free(b);
    return r;
}

// ---- values -----------------------------------------------------------------------------------

static void values_views(void) {
    tdm_tensor *x = mk(TDM_DTYPE_F32, 3, S(2, 3, 4), NULL);
    double w[24];
    for (int i = 0; i < 24; i++) w[i] = i;
    tdm_tensor *v = tdm_tensor_view(x, 2, S(4, -1));
    check_t("view(4,-1)", v, TDM_DTYPE_F32, 2, S(4, 6), w);
    CHECK(v && tdm_tensor_data(v) == tdm_tensor_data(x));  // shares the storage
    tdm_tensor_free(v);
    v = tdm_tensor_view(x, 1, S(-1));
    check_t("view(-1)", v, TDM_DTYPE_F32, 1, S(24), w);
    tdm_tensor_free(v);
    v = tdm_tensor_contiguous(x);
    check_t("contiguous", v, TDM_DTYPE_F32, 3, S(2, 3, 4), w);
    tdm_tensor_free(v);
    tdm_tensor *z = mk(TDM_DTYPE_F32, 2, S(0, 3), NULL);
    v = tdm_tensor_view(z, 2, S(-1, 3));
    check_t("view of zero elements (-1,3)", v, TDM_DTYPE_F32, 2, S(0, 3), NULL);
    tdm_tensor_free(v);
    tdm_tensor_free(z);

    // transpose(0, 2): y[i][j][k] = x[k][j][i]; and (-1, -2)
    double t02[24], t12[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) t02[(i * 3 + j) * 2 + k] = (k * 3 + j) * 4 + i;
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) t12[(a * 4 + i) * 3 + j] = (a * 3 + j) * 4 + i;
    const tdm_dtype dts[] = {TDM_DTYPE_F32, TDM_DTYPE_BF16, TDM_DTYPE_F16,
                             TDM_DTYPE_F64, TDM_DTYPE_I64,  TDM_DTYPE_I32};
    for (int k = 0; k < 6; k++) {
        tdm_tensor *xd = mk(dts[k], 3, S(2, 3, 4), NULL);
        tdm_tensor *y = tdm_tensor_transpose(xd, 0, 2);
        check_t("transpose(0,2)", y, dts[k], 3, S(4, 3, 2), t02);
        tdm_tensor_free(y);
        y = tdm_tensor_transpose(xd, -1, -2);
        check_t("transpose(-1,-2)", y, dts[k], 3, S(2, 4, 3), t12);
        tdm_tensor_free(y);
        y = tdm_tensor_transpose(xd, 1, 1);
        check_t("transpose(1,1)", y, dts[k], 3, S(2, 3, 4), w);
        tdm_tensor_free(y);
        tdm_tensor_free(xd);
    }
    // narrow along each dim, negative start, empty
    double n1[] = {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22};
    tdm_tensor *y = tdm_tensor_narrow(x, 2, 1, 2);
    check_t("narrow(2,1,2)", y, TDM_DTYPE_F32, 3, S(2, 3, 2), n1);
    tdm_tensor_free(y);
    double n0[] = {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
    y = tdm_tensor_narrow(x, 0, -1, 1);
    check_t("narrow(0,-1,1)", y, TDM_DTYPE_F32, 3, S(1, 3, 4), n0);
    tdm_tensor_free(y);
    double nm[] = {4, 5, 6, 7, 16, 17, 18, 19};
    y = tdm_tensor_narrow(x, -2, 1, 1);
    check_t("narrow(-2,1,1)", y, TDM_DTYPE_F32, 3, S(2, 1, 4), nm);
    tdm_tensor_free(y);
    y = tdm_tensor_narrow(x, 1, 3, 0);
    check_t("narrow(1,3,0)", y, TDM_DTYPE_F32, 3, S(2, 0, 4), NULL);
    tdm_tensor_free(y);

    // split: 7 = 3 + 3 + 1; chunk(3) the same; chunk(4) of 6: three of 2; size 0: `chunks` empty
    tdm_tensor *r = mk(TDM_DTYPE_F16, 2, S(7, 2), NULL), *p[8] = {0};
    int np = tdm_tensor_split(r, 3, 0, p, 8);
    CHECK_MSG(np == 3, "split(3) of 7: %d pieces (%s)", np, tdm_last_error());
    if (np == 3) {
        check_t("split piece 0", p[0], TDM_DTYPE_F16, 2, S(3, 2), (double[]){0, 1, 2, 3, 4, 5});
        check_t("split piece 2", p[2], TDM_DTYPE_F16, 2, S(1, 2), (double[]){12, 13});
    }
    for (int i = 0; i < 8; i++) tdm_tensor_free(p[i]), p[i] = NULL;
    np = tdm_tensor_chunk(r, 3, -2, p, 8);
    CHECK(np == 3 && shape_is(p[1], 2, S(3, 2)) && shape_is(p[2], 2, S(1, 2)));
    for (int i = 0; i < 8; i++) tdm_tensor_free(p[i]), p[i] = NULL;
    np = tdm_tensor_split(r, 2, 1, p, 8);
    CHECK(np == 1 && shape_is(p[0], 2, S(7, 2)));
    for (int i = 0; i < 8; i++) tdm_tensor_free(p[i]), p[i] = NULL;
    tdm_tensor *six = mk(TDM_DTYPE_F32, 1, S(6), NULL);
    np = tdm_tensor_chunk(six, 4, 0, p, 8);
    CHECK_MSG(np == 3 && shape_is(p[2], 1, S(2)), "chunk(4) of 6: %d pieces", np);
    if (np == 3) check_t("chunk piece 2", p[2], TDM_DTYPE_F32, 1, S(2), (double[]){4, 5});
    for (int i = 0; i < 8; i++) tdm_tensor_free(p[i]), p[i] = NULL;
    tdm_tensor *empty = mk(TDM_DTYPE_F32, 1, S(0), NULL);
    np = tdm_tensor_chunk(empty, 4, 0, p, 8);
    CHECK_MSG(np == 4 && shape_is(p[3], 1, S(0)), "chunk(4) of 0: %d pieces", np);
    for (int i = 0; i < 8; i++) tdm_tensor_free(p[i]), p[i] = NULL;
    np = tdm_tensor_split(empty, 0, 0, p, 8);
    CHECK_MSG(np == 1 && shape_is(p[0], 1, S(0)), "split(0) of 0: %d pieces", np);
    for (int i = 0; i < 8; i++) tdm_tensor_free(p[i]), p[i] = NULL;
    tdm_tensor_free(empty);
    tdm_tensor_free(six);
    tdm_tensor_free(r);
    tdm_tensor_free(x);
}

static void values_joins(void) {
    tdm_tensor *a = mk(TDM_DTYPE_F32, 2, S(2, 3), NULL);
    tdm_tensor *b = mk(TDM_DTYPE_F32, 2, S(2, 1), (double[]){10, 11});
    tdm_tensor *y = tdm_cat((tdm_tensor *[]){a, b}, 2, 1);
    double c1[] = {0, 1, 2, 10, 3, 4, 5, 11};
    check_t("cat dim 1", y, TDM_DTYPE_F32, 2, S(2, 4), c1);
    tdm_tensor_free(y);
    y = tdm_cat((tdm_tensor *[]){b, a, b}, 3, -1);
    double c2[] = {10, 0, 1, 2, 10, 11, 3, 4, 5, 11};
    check_t("cat dim -1", y, TDM_DTYPE_F32, 2, S(2, 5), c2);
    tdm_tensor_free(y);
    tdm_tensor *a2 = mk(TDM_DTYPE_F32, 2, S(1, 3), (double[]){7, 8, 9});
    tdm_tensor *e = mk(TDM_DTYPE_F32, 1, S(0), NULL);  // skipped (legacy rule)
    y = tdm_cat((tdm_tensor *[]){a, e, a2}, 3, 0);
    double c3[] = {0, 1, 2, 3, 4, 5, 7, 8, 9};
    check_t("cat dim 0 with a (0,)", y, TDM_DTYPE_F32, 2, S(3, 3), c3);
    tdm_tensor_free(y);
    // promotion: f16 with bf16 -> f32; i64 with f16 -> f16; i32 with i64 -> i64; (0,) f64 -> f64
    tdm_tensor *h = mk(TDM_DTYPE_F16, 2, S(2, 3), NULL), *bf = mk(TDM_DTYPE_BF16, 2, S(1, 3), NULL);
    y = tdm_cat((tdm_tensor *[]){h, bf}, 2, 0);
    double c4[] = {0, 1, 2, 3, 4, 5, 0, 1, 2};
    check_t("cat f16 + bf16", y, TDM_DTYPE_F32, 2, S(3, 3), c4);
    tdm_tensor_free(y);
    tdm_tensor *i64 = mk_i64(2, S(1, 3), (const int64_t[]){0, 1, 2});
    y = tdm_cat((tdm_tensor *[]){i64, h}, 2, 0);
    double c5[] = {0, 1, 2, 0, 1, 2, 3, 4, 5};
    check_t("cat i64 + f16", y, TDM_DTYPE_F16, 2, S(3, 3), c5);
    tdm_tensor_free(y);
    tdm_tensor *i32 = mk(TDM_DTYPE_I32, 2, S(1, 3), NULL);
    y = tdm_cat((tdm_tensor *[]){i32, i64}, 2, 0);
    check_t("cat i32 + i64", y, TDM_DTYPE_I64, 2, S(2, 3), (double[]){0, 1, 2, 0, 1, 2});
    tdm_tensor_free(y);
    tdm_tensor *e64 = mk(TDM_DTYPE_F64, 1, S(0), NULL);
    y = tdm_cat((tdm_tensor *[]){h, e64}, 2, 1);
    check_t("cat f16 + (0,) f64", y, TDM_DTYPE_F64, 2, S(2, 3), c5 + 3);
    tdm_tensor_free(y);
    // bool joins bool; with a float it becomes the float (0 and 1)
    tdm_tensor *bo = mk(TDM_DTYPE_BOOL, 2, S(1, 3), (double[]){0, 2, 0});
    y = tdm_cat((tdm_tensor *[]){bo, bo}, 2, 0);
    check_t("cat bool", y, TDM_DTYPE_BOOL, 2, S(2, 3), (double[]){0, 1, 0, 0, 1, 0});
    tdm_tensor_free(y);
    y = tdm_cat((tdm_tensor *[]){bo, a2}, 2, 0);
    check_t("cat bool + f32", y, TDM_DTYPE_F32, 2, S(2, 3), (double[]){0, 1, 0, 7, 8, 9});
    tdm_tensor_free(y);
    tdm_tensor_free(bo);
    // stack
    y = tdm_stack((tdm_tensor *[]){a, a}, 2, 0);
    double s0[] = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5};
    check_t("stack dim 0", y, TDM_DTYPE_F32, 3, S(2, 2, 3), s0);
    tdm_tensor_free(y);
    tdm_tensor *a10 = tdm_add_scalar(a, 10.0);
    y = tdm_stack((tdm_tensor *[]){a, a10}, 2, -1);
    double s2[] = {0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15};
    check_t("stack dim -1", y, TDM_DTYPE_F32, 3, S(2, 3, 2), s2);
    tdm_tensor_free(y);
    y = tdm_stack((tdm_tensor *[]){h, a}, 2, 1);  // promoted as cat
    double s1[] = {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5};
    check_t("stack f16 + f32 dim 1", y, TDM_DTYPE_F32, 3, S(2, 2, 3), s1);
    tdm_tensor_free(y);
    tdm_tensor *sc = mk(TDM_DTYPE_F32, 0, NULL, (double[]){4});
    y = tdm_stack((tdm_tensor *[]){sc, sc}, 2, 0);
    check_t("stack of scalars", y, TDM_DTYPE_F32, 1, S(2), (double[]){4, 4});
    tdm_tensor_free(y);
    if (dev.type == TDM_DEVICE_CUDA) {   // tensors on two devices are refused
        tdm_tensor *c = tdm_tensor_to(a, TDM_CPU, TDM_DTYPE_F32);
        check_err("cat cpu + cuda", !tdm_cat((tdm_tensor *[]){a, c}, 2, 0),
                  "expected all tensors on the same device");
        check_err("stack cpu + cuda", !tdm_stack((tdm_tensor *[]){c, a}, 2, 0),
                  "expected all tensors on the same device");
        tdm_tensor *ga = NULL;
        check_err("backward cpu + cuda",
                  tdm_binary_scalar_backward(TDM_SCALAR_MUL, c, a, 2.0, &ga) != TDM_OK,
                  "expected all tensors on the same device");
        tdm_tensor_free(c);
    }
    tdm_tensor *parts[] = {a, b, a2, e, h, bf, i64, i32, e64, a10, sc};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) tdm_tensor_free(parts[i]);
}

// f16/bf16 with a number: one rounding at the end of f32 math with the number in f32 (PyTorch's
// opmath, what the CUDA kernels do) or of exact math (the reference) — never the number rounded
// to the tensor's dtype first (that changes a few percent of these 257 results).
static void scalar_one_rounding(tdm_dtype dt, tdm_scalar_op op, double s) {
    double xs[257], want[257];
    for (int i = 0; i < 257; i++) xs[i] = (i - 128) * 0.37 + 0.01;
    tdm_tensor *x = mk(dt, 1, S(257), xs);
    double *xv = vals(x);
    for (int i = 0; i < 257; i++) {
        const float a = f32(xv[i]), b = f32(s);
        if (dev.type == TDM_DEVICE_CUDA)
            want[i] = op == TDM_SCALAR_ADD ? a + b : op == TDM_SCALAR_MUL ? a * b : a / b;
        else
            want[i] = op == TDM_SCALAR_ADD   ? xv[i] + s
                      : op == TDM_SCALAR_MUL ? xv[i] * s
                                             : xv[i] / s;
    }
    tdm_tensor *w64 = tdm_tensor_from_host(1, S(257), TDM_DTYPE_F64, TDM_CPU, want);
    tdm_tensor *w = tdm_tensor_to(w64, TDM_CPU, dt), *y = tdm_binary_scalar(op, x, s);
    double *wv = vals(w), *yv = y ? vals(y) : NULL;
    int bad = 0;
    for (int i = 0; yv && i < 257; i++) bad += yv[i] != wv[i];
    CHECK_MSG(y && tdm_tensor_dtype(y) == dt && bad == 0,
              "%s op %d %g: %d of 257 differ from one "
              "rounding",
              tdm_dtype_name(dt), (int)op, s, bad);
    free(xv);
    free(wv);
    free(yv);
    tdm_tensor *ts[] = {x, w64, w, y};
    for (int i = 0; i < 4; i++) tdm_tensor_free(ts[i]);
}

static void values_scalar(void) {
    for (int k = 0; k < 2; k++) {
        tdm_dtype dt = k ? TDM_DTYPE_BF16 : TDM_DTYPE_F16;
        scalar_one_rounding(dt, TDM_SCALAR_MUL, 0.1);
        scalar_one_rounding(dt, TDM_SCALAR_ADD, 0.1);
        scalar_one_rounding(dt, TDM_SCALAR_DIV, 0.3);
    }
    const double xs[] = {-3.5, 0.1, 1.0, 7.25, 1e-3, -2.0};
    tdm_tensor *x = mk(TDM_DTYPE_F32, 2, S(2, 3), xs);
    const double s = 0.1;
    const tdm_scalar_op ops[] = {TDM_SCALAR_ADD, TDM_SCALAR_SUB, TDM_SCALAR_RSUB,
                                 TDM_SCALAR_MUL, TDM_SCALAR_DIV, TDM_SCALAR_RDIV};
    for (int k = 0; k < 6; k++) {
        // f32: the number taken in f32, the op in f32 (PyTorch's opmath) — the reference
        // computes in double and rounds once: both within 2 ulp of this
        tdm_tensor *y = tdm_binary_scalar(ops[k], x, s);
        CHECK_MSG(y && tdm_tensor_dtype(y) == TDM_DTYPE_F32 && shape_is(y, 2, S(2, 3)), "op %d: %s",
                  k, y ? "dtype/shape" : tdm_last_error());
        double *v = y ? vals(y) : NULL;
        for (int i = 0; v && i < 6; i++) {
            float a = f32(xs[i]), b = f32(s);
            float want = k == 0   ? a + b
                         : k == 1 ? a - b
                         : k == 2 ? b - a
                         : k == 3 ? a * b
                         : k == 4 ? a / b
                                  : b / a;
            double mag = k < 3 ? fabs(a) + fabs(b) : fabs(want);  // M of the bound
            CHECK_MSG(fabs(v[i] - want) <= 2 * 0x1p-24 * mag, "op %d [%d]: %.9g vs %.9g", k, i,
                      v[i], want);
        }
        free(v);
        tdm_tensor_free(y);
    }
    // bf16 * 0.1: f32 math, one rounding to bf16 (not bf16(0.1) first)
    tdm_tensor *xb = mk(TDM_DTYPE_BF16, 2, S(2, 3), xs);
    tdm_tensor *yb = tdm_mul_scalar(xb, s);
    double *vb = vals(xb), *vy = yb ? vals(yb) : NULL;
    CHECK(yb && tdm_tensor_dtype(yb) == TDM_DTYPE_BF16);
    for (int i = 0; vy && i < 6; i++) {
        double want = bf16_round((double)(f32(vb[i]) * f32(s)));
        CHECK_MSG(vy[i] == want || fabs(vy[i] - vb[i] * s) <= 0x1p-8 * fabs(vb[i] * s),
                  "bf16 * 0.1 [%d]: %g vs %g", i, vy[i], want);
    }
    free(vb);
    free(vy);
    tdm_tensor_free(yb);
    tdm_tensor_free(xb);
    // integer tensors: an int number keeps i64 (exact past 2^53), a float one gives f32,
    // division gives f32; i32 wraps
    const int64_t big[] = {(1LL << 60) + 1, -7, 3};
    tdm_tensor *xi = mk_i64(1, S(3), big);
    tdm_tensor *y = tdm_binary_scalar_int(TDM_SCALAR_ADD, xi, 2);
    CHECK(y && tdm_tensor_dtype(y) == TDM_DTYPE_I64);
    int64_t got[3] = {0};
    if (y) tdm_tensor_to_host(y, got, sizeof got);
    CHECK_MSG(got[0] == (1LL << 60) + 3 && got[1] == -5 && got[2] == 5, "i64 + 2: %lld %lld %lld",
              (long long)got[0], (long long)got[1], (long long)got[2]);
    tdm_tensor_free(y);
    y = tdm_binary_scalar_int(TDM_SCALAR_RSUB, xi, 1);
    if (y) tdm_tensor_to_host(y, got, sizeof got);
    CHECK(y && tdm_tensor_dtype(y) == TDM_DTYPE_I64 && got[1] == 8 && got[2] == -2);
    tdm_tensor_free(y);
    tdm_tensor *xs3 = mk_i64(1, S(3), (const int64_t[]){7, -3, 0});
    y = tdm_binary_scalar_int(TDM_SCALAR_DIV, xs3, 2);
    check_t("i64 / 2", y, TDM_DTYPE_F32, 1, S(3), (double[]){3.5, -1.5, 0});
    tdm_tensor_free(y);
    y = tdm_mul_scalar(xs3, 2.0);  // a Python float: f32 even when integral
    check_t("i64 * 2.0", y, TDM_DTYPE_F32, 1, S(3), (double[]){14, -6, 0});
    tdm_tensor_free(y);
    y = tdm_binary_scalar_int(TDM_SCALAR_MUL, xs3, 2);
    check_t("i64 * 2", y, TDM_DTYPE_I64, 1, S(3), (double[]){14, -6, 0});
    tdm_tensor_free(y);
    y = tdm_binary_scalar_int(TDM_SCALAR_RDIV, xs3, 1);
    check_t("1 / i64", y, TDM_DTYPE_F32, 1, S(3),
            (double[]){f32(1.0 / 7), f32(-1.0 / 3), INFINITY});
    tdm_tensor_free(y);
    tdm_tensor *x32 = mk(TDM_DTYPE_I32, 1, S(2), (double[]){2147483647.0, -5});
    y = tdm_binary_scalar_int(TDM_SCALAR_ADD, x32, 1);
    check_t("i32 + 1 wraps", y, TDM_DTYPE_I32, 1, S(2), (double[]){-2147483648.0, -4});
    tdm_tensor_free(y);
    y = tdm_sub_scalar(x32, 0.5);
    check_t("i32 - 0.5", y, TDM_DTYPE_F32, 1, S(2), (double[]){f32(2147483647.0f - 0.5f), -5.5});
    tdm_tensor_free(y);
    // a float tensor with an int number keeps its dtype
    tdm_tensor *h = mk(TDM_DTYPE_F16, 1, S(2), (double[]){1.5, -2});
    y = tdm_binary_scalar_int(TDM_SCALAR_MUL, h, 3);
    check_t("f16 * 3", y, TDM_DTYPE_F16, 1, S(2), (double[]){4.5, -6});
    tdm_tensor_free(y);
    tdm_tensor *ps[] = {x, xi, xs3, x32, h};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) tdm_tensor_free(ps[i]);
}

// ---- errors (cpu) -----------------------------------------------------------------------------

static int run_errors(void) {
    dev = TDM_CPU;
    tdm_tensor *x = mk(TDM_DTYPE_F32, 2, S(2, 3), NULL), *p[4] = {0};
    tdm_tensor *s0 = mk(TDM_DTYPE_F32, 0, NULL, (double[]){1});
    check_err("view two -1", !tdm_tensor_view(x, 2, S(-1, -1)),
              "only one dimension can be inferred");
    check_err("view -2", !tdm_tensor_view(x, 2, S(-2, 3)), "invalid shape dimension -2");
    check_err("view (4,-1)", !tdm_tensor_view(x, 2, S(4, -1)),
              "shape '[4, -1]' is invalid for input of size 6");
    check_err("view (7)", !tdm_tensor_view(x, 1, S(7)),
              "shape '[7]' is invalid for input of size 6");
    tdm_tensor *z = mk(TDM_DTYPE_F32, 2, S(0, 3), NULL);
    check_err("view 0 elements (0,-1)", !tdm_tensor_view(z, 2, S(0, -1)), "ambiguous");
    check_err("view 7 dims", !tdm_tensor_view(x, 7, S(1, 1, 1, 1, 1, 2, 3)), "at most 6");
    check_err("view overflow", !tdm_tensor_view(x, 3, S(1LL << 40, 1LL << 40, -1)),
              "is invalid for input of size 6");
    check_err("view NULL", !tdm_tensor_view(NULL, 1, S(6)), "view: input is NULL");
    check_err("transpose dim 2", !tdm_tensor_transpose(x, 0, 2), "dim 2 out of range");
    check_err("transpose dim -3", !tdm_tensor_transpose(x, -3, 0), "dim -3 out of range");
    check_err("narrow 0-dim", !tdm_tensor_narrow(s0, 0, 0, 1), "cannot be applied to a 0-dim");
    check_err("narrow dim", !tdm_tensor_narrow(x, 2, 0, 1), "dim 2 out of range");
    check_err("narrow start", !tdm_tensor_narrow(x, 1, 4, 0), "start 4 out of range");
    check_err("narrow start -4", !tdm_tensor_narrow(x, 1, -4, 1), "start -4 out of range");
    check_err("narrow length", !tdm_tensor_narrow(x, 1, 2, 2),
              "start (2) + length (2) exceeds dimension size (3)");
    check_err("narrow length -1", !tdm_tensor_narrow(x, 1, 0, -1), "length (-1) exceeds");
    check_err("split 0-dim", tdm_tensor_split(s0, 1, 0, p, 4) < 0, "at least a 1-dimensional");
    check_err("split -1", tdm_tensor_split(x, -1, 1, p, 4) < 0, "split_size be non-negative");
    check_err("split 0", tdm_tensor_split(x, 0, 1, p, 4) < 0, "split_size can only be 0");
    check_err("split dim", tdm_tensor_split(x, 1, 3, p, 4) < 0, "dim 3 out of range");
    check_err("split cap", tdm_tensor_split(x, 1, 1, p, 2) < 0, "3 pieces, but out holds 2");
    CHECK(!p[0] && !p[1]);  // nothing left behind
    check_err("split NULL out", tdm_tensor_split(x, 1, 1, NULL, 4) < 0, "out holds 0");
    check_err("chunk 0", tdm_tensor_chunk(x, 0, 0, p, 4) < 0, "`chunks` to be greater than 0");
    check_err("chunk 0-dim", tdm_tensor_chunk(s0, 1, 0, p, 4) < 0, "at least a 1-dimensional");
    check_err("chunk cap", tdm_tensor_chunk(x, 3, 1, p, 2) < 0, "out holds 2");
    tdm_tensor *b = mk(TDM_DTYPE_F32, 2, S(2, 4), NULL),
               *c3 = mk(TDM_DTYPE_F32, 3, S(2, 3, 1), NULL);
    check_err("cat empty", !tdm_cat(NULL, 0, 0), "non-empty list");
    check_err("cat NULL", !tdm_cat((tdm_tensor *[]){x, NULL}, 2, 0), "tensor 1 is NULL");
    check_err("cat 0-dim", !tdm_cat((tdm_tensor *[]){x, s0}, 2, 0),
              "zero-dimensional tensor (at position 1) cannot be concatenated");
    check_err("cat sizes", !tdm_cat((tdm_tensor *[]){x, b}, 2, 0),
              "sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 "
              "for tensor number 1");
    check_err("cat dims", !tdm_cat((tdm_tensor *[]){x, c3}, 2, 0), "same number of dimensions");
    check_err("cat dim", !tdm_cat((tdm_tensor *[]){x, b}, 2, 2), "dim 2 out of range");
    check_err("stack empty", !tdm_stack(NULL, 0, 0), "non-empty TensorList");
    check_err("stack sizes", !tdm_stack((tdm_tensor *[]){x, b}, 2, 0),
              "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] "
              "at entry 1");
    check_err("stack dim", !tdm_stack((tdm_tensor *[]){x, x}, 2, 3), "dim 3 out of range");
    check_err("stack dim -4", !tdm_stack((tdm_tensor *[]){x, x}, 2, -4), "dim -4 out of range");
    tdm_tensor *bo = tdm_tensor_to(x, TDM_CPU, TDM_DTYPE_BOOL);
    check_err("add bool", !tdm_add_scalar(bo, 1.0), "add: input has dtype bool");
    check_err("mul NULL", !tdm_mul_scalar(NULL, 1.0), "mul: input is NULL");
    check_err("op 9", !tdm_binary_scalar((tdm_scalar_op)9, x, 1.0), "unknown op 9");
    tdm_tensor *ga = NULL, *xi = tdm_tensor_to(x, TDM_CPU, TDM_DTYPE_I64);
    check_err("backward int", tdm_binary_scalar_backward(TDM_SCALAR_MUL, xi, xi, 2, &ga) != TDM_OK,
              "expected a floating dtype");
    check_err("backward shape", tdm_binary_scalar_backward(TDM_SCALAR_MUL, b, x, 2, &ga) != TDM_OK,
              "grad_output (2, 4) does not match");
    tdm_tensor *h = tdm_tensor_to(x, TDM_CPU, TDM_DTYPE_F16);
    check_err("backward dtype", tdm_binary_scalar_backward(TDM_SCALAR_DIV, h, x, 2, &ga) != TDM_OK,
              "expected the same dtype");
    CHECK(ga == NULL);
    tdm_tensor *ts[] = {x, s0, z, b, c3, bo, xi, h};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) tdm_tensor_free(ts[i]);
    CHECK_DONE("views.errors");
}

// ---- autograd ---------------------------------------------------------------------------------

static tdm_tensor *leaf(tdm_dtype dt, int ndim, const int64_t *shape, const double *v) {
    tdm_tensor *t = mk(dt, ndim, shape, v);
    if (t) tdm_tensor_set_requires_grad(t, true);
    return t;
}

static void check_grad(const char *what, tdm_tensor *x, tdm_dtype dt, const double *want) {
    const tdm_tensor *g = x ? tdm_tensor_grad(x) : NULL;
    CHECK_MSG(g != NULL, "%s: no gradient", what);
    if (g) check_t(what, g, dt, tdm_tensor_ndim(x), tdm_tensor_shape(x), want);
    if (x) tdm_tensor_set_grad(x, NULL);
}

static void backward_with(const char *what, tdm_tensor *y, const double *gy) {
    tdm_tensor *g = y ? mk(tdm_tensor_dtype(y), tdm_tensor_ndim(y), tdm_tensor_shape(y), gy) : NULL;
    CHECK_MSG(y && g && tdm_backward(y, g) == TDM_OK, "%s: backward: %s", what, tdm_last_error());
    tdm_tensor_free(g);
}

static int run_autograd(void) {
    // narrow then * 3: zeros but 3 gy at the slice
    tdm_tensor *x = leaf(TDM_DTYPE_F32, 2, S(2, 3), NULL);
    tdm_tensor *n = tdm_tensor_narrow(x, 1, 1, 2), *y = tdm_mul_scalar(n, 3.0);
    CHECK(y && !strcmp(tdm_tensor_grad_fn_name(n), "narrow"));
    backward_with("narrow", y, (double[]){1, 2, 3, 4});
    check_grad("narrow grad", x, TDM_DTYPE_F32, (double[]){0, 3, 6, 0, 9, 12});
    tdm_tensor_free(y);
    tdm_tensor_free(n);
    // split pieces each scaled differently: their gradients land in their slices and sum
    tdm_tensor *p[3] = {0};
    CHECK(tdm_tensor_split(x, 1, 1, p, 3) == 3);
    tdm_tensor *q0 = tdm_mul_scalar(p[0], 1), *q1 = tdm_mul_scalar(p[1], 2),
               *q2 = tdm_rsub_scalar(p[2], 5);
    tdm_tensor *j = tdm_cat((tdm_tensor *[]){q2, q0, q1}, 3, 1);
    backward_with("split+cat", j, (double[]){1, 1, 1, 1, 1, 1});
    check_grad("split+cat grad", x, TDM_DTYPE_F32, (double[]){1, 2, -1, 1, 2, -1});
    tdm_tensor *ts[] = {p[0], p[1], p[2], q0, q1, q2, j};
    for (int i = 0; i < 7; i++) tdm_tensor_free(ts[i]);
    // transpose and view
    tdm_tensor *t = tdm_tensor_transpose(x, 0, 1), *v = tdm_tensor_view(t, 1, S(-1));
    backward_with("transpose+view", v, (double[]){0, 1, 2, 3, 4, 5});  // v = x^T flat
    check_grad("transpose grad", x, TDM_DTYPE_F32, (double[]){0, 2, 4, 1, 3, 5});
    tdm_tensor_free(v);
    tdm_tensor_free(t);
    // cat with promotion: the f16 input's gradient comes back in f16
    tdm_tensor *h = leaf(TDM_DTYPE_F16, 2, S(1, 3), NULL);
    tdm_tensor *c = tdm_cat((tdm_tensor *[]){x, h}, 2, 0);
    CHECK(c && tdm_tensor_dtype(c) == TDM_DTYPE_F32 && !strcmp(tdm_tensor_grad_fn_name(c), "cat"));
    backward_with("cat", c, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    check_grad("cat grad 0", x, TDM_DTYPE_F32, (double[]){1, 2, 3, 4, 5, 6});
    check_grad("cat grad 1 (f16)", h, TDM_DTYPE_F16, (double[]){7, 8, 9});
    tdm_tensor_free(c);
    // stack: each input's slice along the new dim
    tdm_tensor *st = tdm_stack((tdm_tensor *[]){x, x}, 2, 2);
    CHECK(st && !strcmp(tdm_tensor_grad_fn_name(st), "stack"));
    backward_with("stack", st, (double[]){1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60});
    check_grad("stack grad", x, TDM_DTYPE_F32, (double[]){11, 22, 33, 44, 55, 66});
    tdm_tensor_free(st);
    // scalar ops: d(s / a)/da = -s / a^2, d(a / s)/da = 1 / s, sub 1, rsub -1, add 1
    tdm_tensor *a = leaf(TDM_DTYPE_F64, 1, S(3), (double[]){1, -2, 4});
    tdm_tensor *r = tdm_rdiv_scalar(a, 8), *d = tdm_div_scalar(a, 4), *sb = tdm_sub_scalar(a, 1);
    tdm_tensor *ad = tdm_add_scalar(a, 1), *rs = tdm_rsub_scalar(a, 1);
    backward_with("rdiv", r, (double[]){1, 1, 2});
    check_grad("rdiv grad", a, TDM_DTYPE_F64, (double[]){-8, -2, -1});
    backward_with("div", d, (double[]){1, 2, 4});
    check_grad("div grad", a, TDM_DTYPE_F64, (double[]){0.25, 0.5, 1});
    backward_with("sub", sb, (double[]){1, 2, 3});
    check_grad("sub grad", a, TDM_DTYPE_F64, (double[]){1, 2, 3});
    backward_with("add", ad, (double[]){1, 2, 3});
    check_grad("add grad", a, TDM_DTYPE_F64, (double[]){1, 2, 3});
    backward_with("rsub", rs, (double[]){1, 2, 3});
    check_grad("rsub grad", a, TDM_DTYPE_F64, (double[]){-1, -2, -3});
    CHECK(!strcmp(tdm_tensor_grad_fn_name(r), "rdiv") &&
          !strcmp(tdm_tensor_grad_fn_name(rs), "rsub"));
    tdm_tensor *more[] = {r, d, sb, ad, rs, a, h, x};
    for (int i = 0; i < 8; i++) tdm_tensor_free(more[i]);
    // an integer tensor never carries history
    tdm_tensor *xi = mk_i64(1, S(2), (const int64_t[]){1, 2});
    tdm_tensor *yi = tdm_mul_scalar(xi, 0.5);
    CHECK(yi && !tdm_tensor_requires_grad(yi));
    tdm_tensor_free(yi);
    tdm_tensor_free(xi);
    CHECK_DONE("views.autograd");
}

// ---- capture and host waits (cuda:0) ----------------------------------------------------------

// A step as GPT's attention block makes it: qkv split, heads by view + transpose, a scaled join.
static tdm_tensor *step(tdm_tensor *x) {
    tdm_tensor *p[3] = {0}, *out = NULL;
    if (tdm_tensor_split(x, 8, 1, p, 3) != 3) return NULL;  // (4, 24) -> 3 x (4, 8)
    tdm_tensor *q = tdm_tensor_view(p[0], 3, S(4, 2, 4)), *k = tdm_tensor_view(p[1], 3, S(4, 2, 4));
    tdm_tensor *qt = tdm_tensor_transpose(q, 0, 1), *kt = tdm_tensor_transpose(k, -1, -3);
    tdm_tensor *qs = tdm_mul_scalar(qt, 0.125), *kr = tdm_rdiv_scalar(kt, 3.0);
    tdm_tensor *v = tdm_tensor_narrow(p[2], 0, 1, 2), *vs = tdm_sub_scalar(v, 1.5);
    tdm_tensor *qf = tdm_tensor_view(qs, 1, S(-1)), *kf = tdm_tensor_view(kr, 1, S(-1));
    tdm_tensor *vf = tdm_tensor_view(vs, 1, S(-1));
    out = tdm_cat((tdm_tensor *[]){qf, kf, vf}, 3, 0);
    tdm_tensor *all[] = {p[0], p[1], p[2], q, k, qt, kt, qs, kr, v, vs, qf, kf, vf};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    return out;
}

static bool same_bits(const tdm_tensor *a, const tdm_tensor *b) {
    if (!a || !b || tdm_tensor_nbytes(a) != tdm_tensor_nbytes(b)) return false;
    size_t n = tdm_tensor_nbytes(a);
    char *x = malloc(n), *y = malloc(n);
    bool same = tdm_tensor_to_host(a, x, n) == TDM_OK && tdm_tensor_to_host(b, y, n) == TDM_OK &&
                !memcmp(x, y, n);
    free(x);
    free(y);
    return same;
}

static int run_capture(void) {
    dev = (tdm_device){TDM_DEVICE_CUDA, 0};
    double v[96], w[96];
    for (int i = 0; i < 96; i++) v[i] = 0.37 * i - 11, w[i] = 5.0 - 0.21 * i;
    tdm_tensor *x = mk(TDM_DTYPE_BF16, 2, S(4, 24), v), *x2 = mk(TDM_DTYPE_BF16, 2, S(4, 24), w);
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(dev) == TDM_OK);
    tdm_tensor *y = step(x);
    CHECK_MSG(y != NULL, "captured step: %s", tdm_last_error());
    CHECK_MSG(tdm_graph_capture_end(dev, &g) == TDM_OK, "%s", tdm_last_error());
    CHECK(tdm_tensor_copy_(x, x2) == TDM_OK && tdm_graph_replay(g) == TDM_OK);
    tdm_tensor *want = step(x2);
    CHECK_MSG(same_bits(y, want), "the replay differs from eager execution");
    tdm_graph_free(g);
    tdm_tensor *ts[] = {x, x2, y, want};
    for (int i = 0; i < 4; i++) tdm_tensor_free(ts[i]);

    // forward and backward (narrow's zeros and slice, cat's slices, the scalar ops' gradients)
    tdm_tensor *xl = mk(TDM_DTYPE_F32, 2, S(4, 24), v), *gy = mk(TDM_DTYPE_F32, 1, S(80), w);
    tdm_tensor_set_requires_grad(xl, true);
    y = step(xl);  // an eager warm-up
    CHECK(y && tdm_backward(y, gy) == TDM_OK);
    tdm_tensor_free(y);
    tdm_tensor_set_grad(xl, NULL);
    CHECK(tdm_graph_capture_begin(dev) == TDM_OK);
    y = step(xl);
    CHECK_MSG(y && tdm_backward(y, gy) == TDM_OK, "captured backward: %s", tdm_last_error());
    CHECK_MSG(tdm_graph_capture_end(dev, &g) == TDM_OK, "%s", tdm_last_error());
    CHECK(tdm_graph_replay(g) == TDM_OK);
    tdm_tensor *got = tdm_tensor_grad(xl) ? tdm_tensor_clone(tdm_tensor_grad(xl)) : NULL;
    tdm_graph_free(g);
    tdm_tensor_free(y);
    tdm_tensor_set_grad(xl, NULL);
    y = step(xl);
    CHECK(y && tdm_backward(y, gy) == TDM_OK);
    CHECK_MSG(got && same_bits(got, tdm_tensor_grad(xl)), "the replayed gradient differs");
    tdm_tensor *us[] = {xl, gy, y, got};
    for (int i = 0; i < 4; i++) tdm_tensor_free(us[i]);
    CHECK_DONE("views.capture");
}

#ifdef TDM_TEST_EMU
static int run_no_waits(void) {
    dev = (tdm_device){TDM_DEVICE_CUDA, 0};
    tdm_tensor *x = mk(TDM_DTYPE_F32, 2, S(4, 24), NULL);
    tdm_tensor_set_requires_grad(x, true);
    tdm_tensor *gy = mk(TDM_DTYPE_F32, 1, S(80), NULL);
    for (int it = 0; it < 3; it++) {  // the first is the warm-up
        unsigned long long before = tdm_emu_host_waits();
        tdm_tensor *y = step(x);
        CHECK_MSG(y && tdm_backward(y, gy) == TDM_OK, "%s", tdm_last_error());
        unsigned long long waits = tdm_emu_host_waits() - before;
        CHECK_MSG(it == 0 || waits == 0, "step %d waited %llu times", it, waits);
        tdm_tensor_free(y);
    }
    tdm_tensor_free(gy);
    tdm_tensor_free(x);
    CHECK_DONE("views.no_waits");
}
#endif

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    dev = TDM_CPU;
    if (argc > 2 && tdm_device_parse(argv[2], &dev) != TDM_OK) return 2;
    bool needs_gpu =
        dev.type == TDM_DEVICE_CUDA || !strcmp(mode, "capture") || !strcmp(mode, "no_waits");
    if (needs_gpu && !tdm_device_available((tdm_device){TDM_DEVICE_CUDA, 0})) {
        printf("SKIP views.%s: %s\n", mode, tdm_last_error());
        return 77;
    }
    if (!strcmp(mode, "values")) {
        values_views();
        values_joins();
        values_scalar();
        CHECK_DONE("views.values");
    }
    if (!strcmp(mode, "errors")) return run_errors();
    if (!strcmp(mode, "autograd")) return run_autograd();
    if (!strcmp(mode, "capture")) return run_capture();
#ifdef TDM_TEST_EMU
    if (!strcmp(mode, "no_waits")) return run_no_waits();
#endif
    fprintf(stderr, "usage: test_views values|autograd [DEVICE] | errors | capture | no_waits\n");
    return 2;
}

/* ref_pointwise.c — the reference elementwise ops: unary activations and their derivatives,
 * broadcast add/mul, dropout, and the two broadcasting helpers of the backward passes (sum_to,
 * expand). Inputs read as double, math in double, one rounding on store (ref.h). */
#include <math.h>

#include "core/philox.h"
#include "ref/ref.h"

// ---- broadcasting ---------------------------------------------------------------------------

// The flat index into t of element i of the (larger) shape `big`, t right-aligned against big
// and broadcast along its missing dims and its dims of size 1.
static int64_t bcast_index(const tdm_tensor *t, const tdm_tensor *big, int64_t i) {
    int64_t ti = 0;
    for (int d = big->ndim - 1; d >= 0; d--) {
        int64_t coord = i % big->shape[d];
        i /= big->shape[d];
        int td = d - (big->ndim - t->ndim);
        if (td >= 0 && t->shape[td] != 1) ti += coord * t->stride[td];
    }
    return ti;
}

// ---- unary: relu, gelu, tanh, sigmoid -------------------------------------------------------

#define SQRT_2_OVER_PI 0.79788456080286535588     // sqrt(2/pi)
#define INV_SQRT_2 0.70710678118654752440         // 1/sqrt(2)
#define INV_SQRT_2PI 0.39894228040143267794       // 1/sqrt(2 pi)
#define GELU_TANH_C 0.044715

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

// y = f(x). relu(NaN) is NaN, as in PyTorch.
static double unary_f(tdm_unary_op op, double x) {
    switch (op) {
    case TDM_UNARY_RELU: return x > 0.0 || isnan(x) ? x : 0.0;
    case TDM_UNARY_GELU: return 0.5 * x * (1.0 + erf(x * INV_SQRT_2));   // x * Phi(x)
    case TDM_UNARY_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)));
    case TDM_UNARY_TANH: return tanh(x);
    case TDM_UNARY_SIGMOID: return sigmoid(x);
    }
    return NAN;
}

// f'(x). relu: PyTorch's threshold_backward passes the gradient unless x <= 0 (so NaN passes).
static double unary_df(tdm_unary_op op, double x) {
    switch (op) {
    case TDM_UNARY_RELU: return x <= 0.0 ? 0.0 : 1.0;
    case TDM_UNARY_GELU: {   // Phi(x) + x phi(x)
        double cdf = 0.5 * (1.0 + erf(x * INV_SQRT_2));
        double pdf = INV_SQRT_2PI * exp(-0.5 * x * x);
        return cdf + x * pdf;
    }
    case TDM_UNARY_GELU_TANH: {   // u = k (x + c x^3), t = tanh u: 0.5 (1+t) + 0.5 x (1-t^2) u'
        double t = tanh(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x));
        double du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * x * x);
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
    }
    case TDM_UNARY_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case TDM_UNARY_SIGMOID: {
        double s = sigmoid(x);
        return s * (1.0 - s);
    }
    }
    return NAN;
}

// x, y: same shape
tdm_status ref_unary(tdm_unary_op op, const tdm_tensor *x, tdm_tensor *y) {
    ref_arena A = {0};
    const double *X = ref_in(&A, x);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < x->numel; i++) Y[i] = unary_f(op, X[i]);
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// gx = gy * f'(x); gy, x, gx: same shape
tdm_status ref_unary_backward(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                              tdm_tensor *gx) {
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *X = ref_in(&A, x);
    double *GX = ref_new(&A, gx->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < x->numel; i++) {
        // relu: a zero derivative gives 0 even where gy is inf or NaN (a select, not a product)
        if (op == TDM_UNARY_RELU)
            GX[i] = X[i] <= 0.0 ? 0.0 : GY[i];
        else
            GX[i] = GY[i] * unary_df(op, X[i]);
    }
    ref_store(&A, gx, GX);
    return ref_finish(&A);
}

// ---- binary: add, mul -----------------------------------------------------------------------

// y = a + alpha b  or  y = a b, with a and b broadcast to y's shape.
tdm_status ref_binary(tdm_binary_op op, const tdm_tensor *a, const tdm_tensor *b, double alpha,
                      tdm_tensor *y) {
    ref_arena A = {0};
    const double *PA = ref_in(&A, a), *PB = ref_in(&A, b);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < y->numel; i++) {
        double va = PA[bcast_index(a, y, i)], vb = PB[bcast_index(b, y, i)];
        Y[i] = op == TDM_BINARY_ADD ? va + alpha * vb : va * vb;
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// gx = scale * (gy summed down to gx's shape): the backward of broadcasting gx up to gy.
tdm_status ref_sum_to(const tdm_tensor *gy, double scale, tdm_tensor *gx) {
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy);
    double *GX = ref_new(&A, gx->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < gy->numel; i++) GX[bcast_index(gx, gy, i)] += GY[i];
    for (int64_t j = 0; j < gx->numel; j++) GX[j] *= scale;
    ref_store(&A, gx, GX);
    return ref_finish(&A);
}

// y = scale * x broadcast to y's shape: the backward of sum and mean.
tdm_status ref_expand(const tdm_tensor *x, double scale, tdm_tensor *y) {
    ref_arena A = {0};
    const double *X = ref_in(&A, x);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < y->numel; i++) Y[i] = scale * X[bcast_index(x, y, i)];
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// ---- dropout ----------------------------------------------------------------------------------

// Keep element i iff its 24-bit Philox draw is below ceil((1-p) 2^24); y = x / (1-p) where
// kept, 0 elsewhere (p = 1: all zero). x, y: same shape.
tdm_status ref_dropout(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                       tdm_tensor *y) {
    ref_arena A = {0};
    const double *X = ref_in(&A, x);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    uint32_t threshold = tdm_dropout_threshold(p);
    double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    for (int64_t i = 0; i < x->numel; i++) {
        bool keep = (tdm_philox_bits(seed, offset, (uint64_t)i) >> 8) < threshold;
        Y[i] = keep ? X[i] * scale : 0.0;
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// ---- a tensor and a Python number: add, sub, rsub, mul, div, rdiv ----------------------------

// a (op) s in double.
static double scalar_f(tdm_scalar_op op, double a, double s) {
    switch (op) {
    case TDM_SCALAR_ADD: return a + s;
    case TDM_SCALAR_SUB: return a - s;
    case TDM_SCALAR_RSUB: return s - a;
    case TDM_SCALAR_MUL: return a * s;
    case TDM_SCALAR_DIV: return a / s;
    case TDM_SCALAR_RDIV: return s / a;
    }
    return NAN;
}

// a (op) s in two's complement (unsigned arithmetic: wraps, as PyTorch's integer tensors do).
static uint64_t scalar_int(tdm_scalar_op op, uint64_t a, uint64_t s) {
    switch (op) {
    case TDM_SCALAR_ADD: return a + s;
    case TDM_SCALAR_SUB: return a - s;
    case TDM_SCALAR_RSUB: return s - a;
    case TDM_SCALAR_MUL: return a * s;
    default: return 0;   // divisions give f32 (core)
    }
}

// y = a (op) s, a and y of one shape. A floating y in double (an integer a read exactly up to
// 2^53), rounded once; an integer y (an integer a and s, no division) exactly, in a's width.
tdm_status ref_binary_scalar(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s,
                             tdm_tensor *y) {
    if (!tdm_dtype_is_float(y->dtype)) {
        const int64_t n = a->numel;
        if (a->dtype == TDM_DTYPE_I64) {
            const int64_t *A = tdm_data_c(a);
            int64_t *Y = tdm_data(y);
            for (int64_t i = 0; i < n; i++)
                Y[i] = (int64_t)scalar_int(op, (uint64_t)A[i], (uint64_t)s->i);
        } else {   // i32: s converted to i32 (wrapping), as PyTorch converts the number
            const int32_t *A = tdm_data_c(a);
            int32_t *Y = tdm_data(y);
            for (int64_t i = 0; i < n; i++)
                Y[i] = (int32_t)(uint32_t)scalar_int(op, (uint32_t)A[i], (uint32_t)s->i);
        }
        return TDM_OK;
    }
    ref_arena A = {0};
    const double *X = ref_in(&A, a);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < a->numel; i++) Y[i] = scalar_f(op, X[i], s->f);
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// ga = d(a op s)/da * gy: gy, gy, -gy, gy s, gy / s, -s gy / a^2 (all of a's shape).
tdm_status ref_binary_scalar_backward(tdm_scalar_op op, const tdm_tensor *gy, const tdm_tensor *a,
                                      const tdm_scalar *s, tdm_tensor *ga) {
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *X = ref_in(&A, a);
    double *GA = ref_new(&A, ga->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < ga->numel; i++) {
        switch (op) {
        case TDM_SCALAR_ADD:
        case TDM_SCALAR_SUB: GA[i] = GY[i]; break;
        case TDM_SCALAR_RSUB: GA[i] = -GY[i]; break;
        case TDM_SCALAR_MUL: GA[i] = GY[i] * s->f; break;
        case TDM_SCALAR_DIV: GA[i] = GY[i] / s->f; break;
        case TDM_SCALAR_RDIV: GA[i] = -(GY[i] * s->f / X[i]) / X[i]; break;
        }
    }
    ref_store(&A, ga, GA);
    return ref_finish(&A);
}

/* ref_reduce.c — the reference reductions (sum, mean over any set of dims) and softmax /
 * log_softmax along one dim, forward and backward. Math in double, one rounding on store. */
#include <math.h>

#include "ref/ref.h"

// ---- sum, mean --------------------------------------------------------------------------------

// x (d0,...,dk); y keepdim-shaped: x's shape with the dims in reduce_mask set to 1.
// sum: y = sum over the reduced dims; mean: that sum / (number of elements summed), NaN when 0.
tdm_status ref_reduce(tdm_reduce_op op, const tdm_tensor *x, unsigned reduce_mask, tdm_tensor *y) {
    ref_arena A = {0};
    const double *X = ref_in(&A, x);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    int64_t count = 1;
    for (int d = 0; d < x->ndim; d++)
        if (reduce_mask & (1u << d)) count *= x->shape[d];
    for (int64_t i = 0; i < x->numel; i++) {
        // x's coordinates with the reduced ones dropped give y's flat index
        int64_t rest = i, yi = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t coord = rest % x->shape[d];
            rest /= x->shape[d];
            if (!(reduce_mask & (1u << d))) yi += coord * y->stride[d];
        }
        Y[yi] += X[i];
    }
    if (op == TDM_REDUCE_MEAN)
        for (int64_t j = 0; j < y->numel; j++) Y[j] = count > 0 ? Y[j] / (double)count : NAN;
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// ---- softmax, log_softmax -------------------------------------------------------------------

// x viewed as (outer, n, inner) around dim; a 0-d x is one element (dim 0).
static void split_at(const tdm_tensor *x, int dim, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    *n = x->ndim ? x->shape[dim] : 1;
    for (int d = 0; d < dim && d < x->ndim; d++) *outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) *inner *= x->shape[d];
}

// Along dim, with m = max x:  softmax y = exp(x - m) / sum exp(x - m);
// log_softmax y = (x - m) - log(sum exp(x - m)).   x, y (outer, n, inner)
tdm_status ref_softmax(const tdm_tensor *x, int dim, bool log_, tdm_tensor *y) {
    ref_arena A = {0};
    const double *X = ref_in(&A, x);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    int64_t outer, n, inner;
    split_at(x, dim, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k = 0; k < inner; k++) {
            const double *xr = X + o * n * inner + k;   // xr[j * inner], j < n
            double *yr = Y + o * n * inner + k;
            double m = -INFINITY;
            for (int64_t j = 0; j < n; j++)
                if (xr[j * inner] > m || isnan(xr[j * inner])) m = xr[j * inner];
            double s = 0.0;
            for (int64_t j = 0; j < n; j++) s += exp(xr[j * inner] - m);
            for (int64_t j = 0; j < n; j++)
                yr[j * inner] = log_ ? (xr[j * inner] - m) - log(s) : exp(xr[j * inner] - m) / s;
        }
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// From the forward output y, along dim:   gy, y, gx (outer, n, inner)
// softmax gx = y (gy - sum(gy y)); log_softmax gx = gy - exp(y) sum(gy).
tdm_status ref_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim, bool log_,
                                tdm_tensor *gx) {
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *Y = ref_in(&A, y);
    double *GX = ref_new(&A, gx->numel);
    if (A.failed) return ref_finish(&A);
    int64_t outer, n, inner;
    split_at(y, dim, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k = 0; k < inner; k++) {
            int64_t base = o * n * inner + k;
            double s = 0.0;
            for (int64_t j = 0; j < n; j++) {
                int64_t i = base + j * inner;
                s += log_ ? GY[i] : GY[i] * Y[i];
            }
            for (int64_t j = 0; j < n; j++) {
                int64_t i = base + j * inner;
                GX[i] = log_ ? GY[i] - exp(Y[i]) * s : Y[i] * (GY[i] - s);
            }
        }
    }
    ref_store(&A, gx, GX);
    return ref_finish(&A);
}

/* ops_reduce.c — reductions (sum, mean), softmax and log_softmax, and the losses
 * (cross_entropy, mse_loss), forward and backward, as PyTorch defines them.
 *
 * The backend's reduce slot always writes a keepdim-shaped output; without keepdim the public op
 * returns a view with the reduced dims dropped. The backend sees cross_entropy only as rows (R,C):
 * the unbatched form (C) is one row, the spatial form (N,C,d1..dk) is permuted to put the classes
 * last.
 *
 * Each public forward applies the autocast policy to its inputs first and records itself for
 * autograd last (core/autograd_impl.h); its body runs with grad mode off. */
#include <math.h>
#include <string.h>

#include "core/autograd_impl.h"
#include "core/profile_impl.h"
#include "tandem/backends.h"

// ---- helpers ---------------------------------------------------------------------------

static tdm_tensor *empty_like(const tdm_tensor *t) {
    return tdm_tensor_empty(t->ndim, t->shape, t->dtype, t->device);
}

static bool shape_equal(int na, const int64_t *a, int nb, const int64_t *b) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static tdm_status check_grad_shape(const char *op, const tdm_tensor *gy, int ndim,
                                   const int64_t *shape) {
    if (shape_equal(gy->ndim, gy->shape, ndim, shape)) return TDM_OK;
    char g[96], s[96];
    return tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output %s does not match the output shape %s",
                         op, tdm_shape_str(gy->ndim, gy->shape, g, sizeof g),
                         tdm_shape_str(ndim, shape, s, sizeof s));
}

// Checks gy for an op whose input is x: same device and dtype, the given shape.
static tdm_status check_grad(const char *op, const tdm_tensor *gy, const tdm_tensor *x, int ndim,
                             const int64_t *shape) {
    TDM_TRY(tdm_check_tensor(op, "grad_output", gy));
    TDM_TRY(tdm_check_same_device(op, gy, x));
    TDM_TRY(tdm_check_same_dtype(op, gy, x));
    return check_grad_shape(op, gy, ndim, shape);
}

// ---- sum, mean -------------------------------------------------------------------------------

// The reduced dims of x as a bit mask, the keepdim shape, the shape without keepdim, and the
// number of elements each output element reduces.
typedef struct {
    unsigned mask;
    int64_t keep_shape[TDM_MAX_DIMS];   // x->ndim dims
    int out_ndim;
    int64_t out_shape[TDM_MAX_DIMS];
    int64_t count;
} reduce_plan;

static tdm_status reduce_plan_make(const char *op, const tdm_tensor *x, int ndims,
                                   const int *dims, reduce_plan *rp) {
    TDM_TRY(tdm_check_tensor(op, "input", x));
    TDM_TRY(tdm_check_float(op, "input", x));
    if (ndims < 0 || (ndims > 0 && !dims))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid dim list (%d dims)", op, ndims);
    unsigned mask = 0;
    for (int i = 0; i < ndims; i++) {
        int d;
        TDM_TRY(tdm_wrap_dim(op, dims[i], x->ndim, &d));
        if (mask & (1u << d))
            return tdm_error_set(TDM_ERR_ARG,
                                 "%s: dim %d appears multiple times in the list of dims", op, d);
        mask |= 1u << d;
    }
    if (ndims == 0) mask = (1u << x->ndim) - 1;   // all dims
    if (x->ndim == 0) mask = 0;                     // a scalar reduces to itself
    rp->mask = mask;
    rp->out_ndim = 0;
    rp->count = 1;
    for (int d = 0; d < x->ndim; d++) {
        bool reduced = mask & (1u << d);
        rp->keep_shape[d] = reduced ? 1 : x->shape[d];
        if (reduced)
            rp->count *= x->shape[d];
        else
            rp->out_shape[rp->out_ndim++] = x->shape[d];
    }
    return TDM_OK;
}

static tdm_tensor *reduce_forward(const char *op, tdm_reduce_op rop, const tdm_tensor *x,
                                  int ndims, const int *dims, bool keepdim) {
    reduce_plan rp;
    if (reduce_plan_make(op, x, ndims, dims, &rp) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->reduce) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *y = tdm_tensor_empty(x->ndim, rp.keep_shape, x->dtype, x->device);
    if (!y) return NULL;
    if (be->reduce(rop, x, rp.mask, y) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    if (keepdim) return y;
    tdm_tensor *v = tdm_tensor_reshape(y, rp.out_ndim, rp.out_shape);
    tdm_tensor_free(y);
    return v;
}

// Autocast: runs in f32. Records itself for autograd.
static tdm_tensor *reduce(const char *op, tdm_reduce_op rop, const tdm_tensor *x, int ndims,
                          const int *dims, bool keepdim) {
    TDM_PROFILE_OP(op, x);
    tdm_autocast_args ac;
    if (tdm_autocast_apply(op, TDM_AUTOCAST_F32, 1, (const tdm_tensor *[]){x}, &ac) != TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = reduce_forward(op, rop, ac.in[0], ndims, dims, keepdim);
    tdm_grad_set_enabled(grad);
    y = tdm_record_reduce(y, ac.in[0], ndims, dims, keepdim, rop == TDM_REDUCE_MEAN);
    tdm_autocast_args_free(&ac);
    return y;
}

tdm_tensor *tdm_sum(const tdm_tensor *x, int ndims, const int *dims, bool keepdim) {
    return reduce("sum", TDM_REDUCE_SUM, x, ndims, dims, keepdim);
}

tdm_tensor *tdm_mean(const tdm_tensor *x, int ndims, const int *dims, bool keepdim) {
    return reduce("mean", TDM_REDUCE_MEAN, x, ndims, dims, keepdim);
}

// gx = gy (viewed keepdim) broadcast back to x's shape, times 1 (sum) or 1/count (mean).
static tdm_status reduce_backward(const char *op, bool mean, const tdm_tensor *gy,
                                  const tdm_tensor *x, int ndims, const int *dims, bool keepdim,
                                  tdm_tensor **gx) {
    TDM_PROFILE_OP(mean ? "mean_backward" : "sum_backward", gy, x);
    if (gx) *gx = NULL;
    reduce_plan rp;
    TDM_TRY(reduce_plan_make(op, x, ndims, dims, &rp));
    if (keepdim)
        TDM_TRY(check_grad(op, gy, x, x->ndim, rp.keep_shape));
    else
        TDM_TRY(check_grad(op, gy, x, rp.out_ndim, rp.out_shape));
    if (!gx) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->expand) return tdm_error_unsupported(op, be);
    double scale = !mean ? 1.0 : rp.count > 0 ? 1.0 / (double)rp.count : NAN;
    tdm_tensor *gk = tdm_tensor_reshape(gy, x->ndim, rp.keep_shape);
    if (!gk) return tdm_last_status();
    tdm_tensor *g = empty_like(x);
    tdm_status s = g ? be->expand(gk, scale, g) : tdm_last_status();
    tdm_tensor_free(gk);
    if (s != TDM_OK) {
        tdm_tensor_free(g);
        return s;
    }
    *gx = g;
    return TDM_OK;
}

tdm_status tdm_sum_backward(const tdm_tensor *gy, const tdm_tensor *x, int ndims, const int *dims,
                            bool keepdim, tdm_tensor **gx) {
    return reduce_backward("sum", false, gy, x, ndims, dims, keepdim, gx);
}

tdm_status tdm_mean_backward(const tdm_tensor *gy, const tdm_tensor *x, int ndims,
                             const int *dims, bool keepdim, tdm_tensor **gx) {
    return reduce_backward("mean", true, gy, x, ndims, dims, keepdim, gx);
}

// ---- softmax, log_softmax ------------------------------------------------------------------

static tdm_tensor *softmax_forward(const char *op, const tdm_tensor *x, int dim, bool log) {
    int d;
    if (tdm_check_tensor(op, "input", x) || tdm_check_float(op, "input", x) ||
        tdm_wrap_dim(op, dim, x->ndim, &d))
        return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->softmax) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *y = empty_like(x);
    if (y && be->softmax(x, d, log, y) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Autocast: runs in f32. Records itself for autograd (the node saves the output).
static tdm_tensor *softmax(const char *op, const tdm_tensor *x, int dim, bool log) {
    TDM_PROFILE_OP(op, x);
    tdm_autocast_args ac;
    if (tdm_autocast_apply(op, TDM_AUTOCAST_F32, 1, (const tdm_tensor *[]){x}, &ac) != TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = softmax_forward(op, ac.in[0], dim, log);
    tdm_grad_set_enabled(grad);
    y = tdm_record_softmax(y, ac.in[0], dim, log);
    tdm_autocast_args_free(&ac);
    return y;
}

tdm_tensor *tdm_softmax(const tdm_tensor *x, int dim) { return softmax("softmax", x, dim, false); }
tdm_tensor *tdm_log_softmax(const tdm_tensor *x, int dim) {
    return softmax("log_softmax", x, dim, true);
}

// From the forward output y: softmax gx = y*(gy - sum(gy*y)); log_softmax gx = gy - exp(y)*sum(gy).
static tdm_status softmax_backward(const char *op, const tdm_tensor *gy, const tdm_tensor *y,
                                   int dim, bool log, tdm_tensor **gx) {
    TDM_PROFILE_OP(op, gy, y);
    if (gx) *gx = NULL;
    int d;
    TDM_TRY(tdm_check_tensor(op, "output", y));
    TDM_TRY(tdm_check_float(op, "output", y));
    TDM_TRY(check_grad(op, gy, y, y->ndim, y->shape));
    TDM_TRY(tdm_wrap_dim(op, dim, y->ndim, &d));
    if (!gx) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(y);
    if (!be->softmax_backward) return tdm_error_unsupported(op, be);
    tdm_tensor *g = empty_like(y);
    if (!g) return tdm_last_status();
    tdm_status s = be->softmax_backward(gy, y, d, log, g);
    if (s != TDM_OK) {
        tdm_tensor_free(g);
        return s;
    }
    *gx = g;
    return TDM_OK;
}

tdm_status tdm_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim,
                                tdm_tensor **gx) {
    return softmax_backward("softmax_backward", gy, y, dim, false, gx);
}

tdm_status tdm_log_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim,
                                    tdm_tensor **gx) {
    return softmax_backward("log_softmax_backward", gy, y, dim, true, gx);
}

// ---- losses --------------------------------------------------------------------------------

tdm_status tdm_reduction_parse(const char *s, tdm_reduction *out) {
    if (s && !strcmp(s, "none")) *out = TDM_REDUCTION_NONE;
    else if (s && !strcmp(s, "mean")) *out = TDM_REDUCTION_MEAN;
    else if (s && !strcmp(s, "sum")) *out = TDM_REDUCTION_SUM;
    else
        return tdm_error_set(TDM_ERR_ARG, "reduction: '%s' is not a valid value (none, mean, sum)",
                             s ? s : "(null)");
    return TDM_OK;
}

static tdm_status check_reduction(const char *op, tdm_reduction red) {
    if (red == TDM_REDUCTION_NONE || red == TDM_REDUCTION_MEAN || red == TDM_REDUCTION_SUM)
        return TDM_OK;
    return tdm_error_set(TDM_ERR_ARG, "%s: invalid reduction %d", op, (int)red);
}

// A loss's output shape: `none_ndim`/`none_shape` for reduction none, else a 0-d scalar.
static void loss_shape(tdm_reduction red, int none_ndim, const int64_t *none_shape, int *ndim,
                       int64_t *shape) {
    *ndim = red == TDM_REDUCTION_NONE ? none_ndim : 0;
    for (int i = 0; i < *ndim; i++) shape[i] = none_shape[i];
}

// cross_entropy, F.cross_entropy's forms: logits (N,C), unbatched (C), or (N,C,d1..dk); target
// class indices (N), (), (N,d1..dk) (int64; int32 accepted), or class probabilities of the
// logits' shape (floating, the logits' dtype); weight (C) or NULL. The backend sees rows: logits
// (R,C) and target (R) or (R,C), where the spatial form is permuted to (N,d1..dk,C) first
// (R = N d1..dk); a loss with reduction none comes back as (R) and is viewed as (N,d1..dk).
typedef struct {
    tdm_tensor *logits2, *target2;   // (R,C); (R) indices or (R,C) probabilities
    bool probs;                      // target holds class probabilities
    bool spatial;                    // logits2 is a permuted copy of (N,C,d1..dk)
    int64_t rows;
    int loss_ndim;                   // the loss's shape for reduction none
    int64_t loss_shape[TDM_MAX_DIMS];
} ce_views;

static void ce_views_free(ce_views *v) {
    tdm_tensor_free(v->logits2);
    tdm_tensor_free(v->target2);
}

// (N,C,d1..dk) -> (N,d1..dk,C): the class dim last.
static tdm_tensor *classes_last(const tdm_tensor *t) {
    int dims[TDM_MAX_DIMS];
    dims[0] = 0;
    for (int d = 2; d < t->ndim; d++) dims[d - 1] = d;
    dims[t->ndim - 1] = 1;
    return tdm_tensor_permute(t, dims);
}

// Its inverse: (N,d1..dk,C) -> (N,C,d1..dk).
static tdm_tensor *classes_second(const tdm_tensor *t) {
    int dims[TDM_MAX_DIMS];
    dims[0] = 0, dims[1] = t->ndim - 1;
    for (int d = 2; d < t->ndim; d++) dims[d] = d - 1;
    return tdm_tensor_permute(t, dims);
}

static tdm_status ce_check(const char *op, const tdm_tensor *logits, const tdm_tensor *target,
                           const tdm_tensor *weight, tdm_reduction red, double smoothing,
                           int64_t ignore_index, ce_views *v) {
    memset(v, 0, sizeof *v);
    TDM_TRY(tdm_check_tensor(op, "input", logits));
    TDM_TRY(tdm_check_tensor(op, "target", target));
    TDM_TRY(tdm_check_same_device(op, logits, target));
    TDM_TRY(tdm_check_float(op, "input", logits));
    TDM_TRY(check_reduction(op, red));
    if (!(smoothing >= 0.0 && smoothing <= 1.0))
        return tdm_error_set(TDM_ERR_ARG, "%s: label_smoothing must be between 0.0 and 1.0, got %g",
                             op, smoothing);
    char a[96], b[96];
    if (logits->ndim < 1)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: input is 0-d: expected (C), (N, C) or (N, C, d1, "
                             "...)", op);
    const int cdim = logits->ndim == 1 ? 0 : 1;
    const int64_t C = logits->shape[cdim];
    v->probs = tdm_dtype_is_float(target->dtype);
    if (v->probs) {   // class probabilities: the logits' shape and dtype
        if (!shape_equal(logits->ndim, logits->shape, target->ndim, target->shape))
            return tdm_error_set(TDM_ERR_SHAPE, "%s: input %s and a floating target (class "
                                 "probabilities) %s: expected equal shapes", op,
                                 tdm_shape_str(logits->ndim, logits->shape, a, sizeof a),
                                 tdm_shape_str(target->ndim, target->shape, b, sizeof b));
        TDM_TRY(tdm_check_same_dtype(op, logits, target));
        if (ignore_index >= 0)
            return tdm_error_set(TDM_ERR_ARG, "%s: ignore_index is not supported for floating "
                                 "point target", op);
    } else {          // class indices: the logits' shape without the class dim
        if (target->dtype != TDM_DTYPE_I64 && target->dtype != TDM_DTYPE_I32)
            return tdm_error_set(TDM_ERR_DTYPE, "%s: target has dtype %s, expected int64 (class "
                                 "indices) or the input's floating dtype (class probabilities)",
                                 op, tdm_dtype_name(target->dtype));
        bool ok = target->ndim == logits->ndim - 1;
        for (int d = 0, e = 0; ok && d < logits->ndim; d++)
            if (d != cdim) ok = target->shape[e++] == logits->shape[d];
        if (!ok)
            return tdm_error_set(TDM_ERR_SHAPE,
                                 "%s: input %s and target %s: expected input (N, C) with target "
                                 "(N), input (C) with a 0-d target, or input (N, C, d1, ...) with "
                                 "target (N, d1, ...)",
                                 op, tdm_shape_str(logits->ndim, logits->shape, a, sizeof a),
                                 tdm_shape_str(target->ndim, target->shape, b, sizeof b));
    }
    if (weight) {
        TDM_TRY(tdm_check_tensor(op, "weight", weight));
        TDM_TRY(tdm_check_same_device(op, logits, weight));
        TDM_TRY(tdm_check_same_dtype(op, logits, weight));
        if (weight->ndim != 1 || weight->shape[0] != C)
            return tdm_error_set(TDM_ERR_SHAPE, "%s: weight %s: expected a 1-D tensor of %lld "
                                 "classes", op,
                                 tdm_shape_str(weight->ndim, weight->shape, a, sizeof a),
                                 (long long)C);
    }
    // the loss of reduction none: the logits' shape without the class dim
    for (int d = 0; d < logits->ndim; d++)
        if (d != cdim) v->loss_shape[v->loss_ndim++] = logits->shape[d];
    v->rows = tdm_shape_numel(v->loss_ndim, v->loss_shape);
    v->spatial = logits->ndim > 2;
    const int64_t s2[2] = {v->rows, C};
    if (v->spatial) {
        tdm_tensor *l = classes_last(logits), *t = v->probs ? classes_last(target) : NULL;
        v->logits2 = l ? tdm_tensor_reshape(l, 2, s2) : NULL;
        v->target2 = v->probs ? (t ? tdm_tensor_reshape(t, 2, s2) : NULL)
                              : tdm_tensor_reshape(target, 1, &v->rows);
        tdm_tensor_free(l);
        tdm_tensor_free(t);
    } else {
        v->logits2 = tdm_tensor_reshape(logits, 2, s2);
        v->target2 = v->probs ? tdm_tensor_reshape(target, 2, s2)
                              : tdm_tensor_reshape(target, 1, &v->rows);
    }
    if (!v->logits2 || !v->target2) {
        ce_views_free(v);
        return tdm_last_status();
    }
    return TDM_OK;
}

// Per row r, with w the weight (1s without one) and the row's target distribution
//   tau_c = (1-eps) w_t [c == t] + eps/C w_c        (class index t; ignored rows: tau = 0)
//   tau_c = w_c ((1-eps) q_c + eps/C)                (class probabilities q)
// loss_r = sum_c tau_c (-log p[r,c]); mean divides the sum by sum_r w_t over the rows not ignored
// (class indices) or by R (probabilities). ref/ref_loss.c has the formulas.
// stats: NULL, or where the fused classifier's row statistics go when the backend has it (the
// backward then reads them; *stats stays NULL otherwise).
static tdm_tensor *cross_entropy_forward(const tdm_tensor *logits, const tdm_tensor *target,
                                         const tdm_tensor *weight, tdm_reduction reduction,
                                         double label_smoothing, int64_t ignore_index,
                                         tdm_tensor **stats) {
    const char *op = "cross_entropy";
    ce_views v;
    if (ce_check(op, logits, target, weight, reduction, label_smoothing, ignore_index, &v) !=
        TDM_OK)
        return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(logits);
    if (!be->cross_entropy) {
        tdm_error_unsupported(op, be);
        ce_views_free(&v);
        return NULL;
    }
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    loss_shape(reduction, v.loss_ndim, v.loss_shape, &ndim, shape);
    tdm_tensor *loss = tdm_tensor_empty(ndim, shape, logits->dtype, logits->device);
    // The backend writes (R) for reduction none: a view of the loss of any shape.
    tdm_tensor *loss_view = !loss                          ? NULL
                            : reduction == TDM_REDUCTION_NONE ? tdm_tensor_reshape(loss, 1, &v.rows)
                                                              : tdm_tensor_reshape(loss, 0, NULL);
    tdm_tensor *st = NULL;
    if (loss_view && stats && be->cross_entropy_stats && be->cross_entropy_backward_stats) {
        const int64_t sshape[2] = {v.rows, 2};
        st = tdm_tensor_empty(2, sshape,
                              logits->dtype == TDM_DTYPE_F64 ? TDM_DTYPE_F64 : TDM_DTYPE_F32,
                              logits->device);
        if (!st) tdm_tensor_free(loss_view), loss_view = NULL;
    }
    const tdm_status s =
        !loss_view ? tdm_last_status()
        : st ? be->cross_entropy_stats(v.logits2, v.target2, weight, reduction, label_smoothing,
                                       ignore_index, loss_view, st)
             : be->cross_entropy(v.logits2, v.target2, weight, reduction, label_smoothing,
                                 ignore_index, loss_view);
    if (s != TDM_OK) {
        tdm_tensor_free(loss);
        tdm_tensor_free(st);
        loss = NULL, st = NULL;
    }
    if (stats) *stats = st;
    tdm_tensor_free(loss_view);
    ce_views_free(&v);
    return loss;
}

// Autocast: runs in f32 (logits, probability targets and weight). Records itself for autograd
// (a gradient for the logits only, as PyTorch's for class indices; none for the target and the
// weight).
tdm_tensor *tdm_cross_entropy_weighted(const tdm_tensor *logits, const tdm_tensor *target,
                                       const tdm_tensor *weight, tdm_reduction reduction,
                                       double label_smoothing, int64_t ignore_index) {
    TDM_PROFILE_OP("cross_entropy", logits, target, weight);
    tdm_autocast_args ac;
    if (tdm_autocast_apply("cross_entropy", TDM_AUTOCAST_F32, 3,
                           (const tdm_tensor *[]){logits, target, weight}, &ac) != TDM_OK)
        return NULL;
    // the fused classifier where a gradient will flow: the backward reads the row statistics
    tdm_tensor *stats = NULL;
    const bool record = tdm_fusions_enabled() &&
                        tdm_autograd_needed(3, (const tdm_tensor *[]){ac.in[0], ac.in[1], ac.in[2]});
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = cross_entropy_forward(ac.in[0], ac.in[1], ac.in[2], reduction,
                                          label_smoothing, ignore_index, record ? &stats : NULL);
    tdm_grad_set_enabled(grad);
    y = tdm_record_cross_entropy(y, ac.in[0], ac.in[1], ac.in[2], reduction, label_smoothing,
                                 ignore_index, stats);
    tdm_tensor_free(stats);
    tdm_autocast_args_free(&ac);
    return y;
}

tdm_tensor *tdm_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                              tdm_reduction reduction, double label_smoothing,
                              int64_t ignore_index) {
    return tdm_cross_entropy_weighted(logits, target, NULL, reduction, label_smoothing,
                                      ignore_index);
}

// glogits[r,c] = g_r (p[r,c] sum_k tau_k - tau_c); g_r = gloss[r] (none), gloss (sum), gloss /
// the mean's divisor (mean).
tdm_status tdm_cross_entropy_backward_at(const tdm_tensor *gloss, const tdm_tensor *logits,
                                         const tdm_tensor *target, const tdm_tensor *weight,
                                         tdm_reduction reduction, double label_smoothing,
                                         int64_t ignore_index, const tdm_tensor *stats,
                                         tdm_tensor **glogits) {
    const char *op = "cross_entropy_backward";
    TDM_PROFILE_OP(op, gloss, logits, target);
    if (glogits) *glogits = NULL;
    ce_views v;
    TDM_TRY(ce_check(op, logits, target, weight, reduction, label_smoothing, ignore_index, &v));
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    loss_shape(reduction, v.loss_ndim, v.loss_shape, &ndim, shape);
    const struct tdm_backend_ops *be = tdm_backend_of(logits);
    tdm_status s = check_grad(op, gloss, logits, ndim, shape);
    if (s == TDM_OK && glogits && !be->cross_entropy_backward) s = tdm_error_unsupported(op, be);
    if (s != TDM_OK || !glogits) {
        ce_views_free(&v);
        return s;
    }
    // The backend sees gloss as (R) for reduction none (a scalar otherwise), glogits as (R,C):
    // the logits' own shape, or for the spatial form (N,d1..dk,C), permuted back below.
    tdm_tensor *gl = reduction == TDM_REDUCTION_NONE ? tdm_tensor_reshape(gloss, 1, &v.rows)
                                                     : tdm_tensor_reshape(gloss, 0, NULL);
    tdm_tensor *g = tdm_tensor_empty(2, tdm_tensor_shape(v.logits2), logits->dtype, logits->device);
    const bool fused = stats && be->cross_entropy_backward_stats &&
                       tdm_tensor_numel(stats) == 2 * v.rows;
    s = !gl || !g ? tdm_last_status()
        : fused   ? be->cross_entropy_backward_stats(gl, v.logits2, v.target2, weight, reduction,
                                                     label_smoothing, ignore_index, stats, g)
                  : be->cross_entropy_backward(gl, v.logits2, v.target2, weight, reduction,
                                               label_smoothing, ignore_index, g);
    tdm_tensor *out = NULL;
    if (s == TDM_OK && v.spatial) {   // (R,C) -> (N,d1..dk,C) -> (N,C,d1..dk)
        int64_t last[TDM_MAX_DIMS];
        for (int d = 0; d < v.loss_ndim; d++) last[d] = v.loss_shape[d];
        last[v.loss_ndim] = logits->shape[1];
        tdm_tensor *gv = tdm_tensor_reshape(g, logits->ndim, last);
        out = gv ? classes_second(gv) : NULL;
        tdm_tensor_free(gv);
    } else if (s == TDM_OK) {
        out = tdm_tensor_reshape(g, logits->ndim, logits->shape);
    }
    if (s == TDM_OK && !out) s = tdm_last_status();
    if (s == TDM_OK) *glogits = out;
    tdm_tensor_free(g);
    tdm_tensor_free(gl);
    ce_views_free(&v);
    return s;
}

tdm_status tdm_cross_entropy_weighted_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                               const tdm_tensor *target, const tdm_tensor *weight,
                                               tdm_reduction reduction, double label_smoothing,
                                               int64_t ignore_index, tdm_tensor **glogits) {
    return tdm_cross_entropy_backward_at(gloss, logits, target, weight, reduction,
                                         label_smoothing, ignore_index, NULL, glogits);
}

tdm_status tdm_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                      const tdm_tensor *target, tdm_reduction reduction,
                                      double label_smoothing, int64_t ignore_index,
                                      tdm_tensor **glogits) {
    return tdm_cross_entropy_weighted_backward(gloss, logits, target, NULL, reduction,
                                               label_smoothing, ignore_index, glogits);
}

// input and target: floating, one dtype, one device, equal shapes.
static tdm_status mse_check(const char *op, const tdm_tensor *a, const tdm_tensor *b,
                            tdm_reduction red) {
    TDM_TRY(tdm_check_tensor(op, "input", a));
    TDM_TRY(tdm_check_tensor(op, "target", b));
    TDM_TRY(tdm_check_same_device(op, a, b));
    TDM_TRY(tdm_check_float(op, "input", a));
    TDM_TRY(tdm_check_float(op, "target", b));
    TDM_TRY(tdm_check_same_dtype(op, a, b));
    TDM_TRY(check_reduction(op, red));
    if (!shape_equal(a->ndim, a->shape, b->ndim, b->shape)) {
        char x[96], y[96];
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: input %s and target %s: shapes must be equal (tandem does not "
                             "broadcast, where PyTorch warns and broadcasts)",
                             op, tdm_shape_str(a->ndim, a->shape, x, sizeof x),
                             tdm_shape_str(b->ndim, b->shape, y, sizeof y));
    }
    return TDM_OK;
}

// d = input - target; none: d^2; sum: sum d^2; mean: sum d^2 / numel.
static tdm_tensor *mse_loss_forward(const tdm_tensor *input, const tdm_tensor *target,
                                    tdm_reduction reduction) {
    const char *op = "mse_loss";
    if (mse_check(op, input, target, reduction) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(input);
    if (!be->mse_loss) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    loss_shape(reduction, input->ndim, input->shape, &ndim, shape);
    tdm_tensor *loss = tdm_tensor_empty(ndim, shape, input->dtype, input->device);
    if (loss && be->mse_loss(input, target, reduction, loss) != TDM_OK) {
        tdm_tensor_free(loss);
        return NULL;
    }
    return loss;
}

// Autocast: runs in f32. Records itself for autograd.
tdm_tensor *tdm_mse_loss(const tdm_tensor *input, const tdm_tensor *target,
                         tdm_reduction reduction) {
    TDM_PROFILE_OP("mse_loss", input, target);
    tdm_autocast_args ac;
    if (tdm_autocast_apply("mse_loss", TDM_AUTOCAST_F32, 2, (const tdm_tensor *[]){input, target},
                           &ac) != TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = mse_loss_forward(ac.in[0], ac.in[1], reduction);
    tdm_grad_set_enabled(grad);
    y = tdm_record_mse_loss(y, ac.in[0], ac.in[1], reduction);
    tdm_autocast_args_free(&ac);
    return y;
}

// ginput = 2 d g (g / numel for mean, g elementwise for none), gtarget = -ginput.
tdm_status tdm_mse_loss_backward(const tdm_tensor *gloss, const tdm_tensor *input,
                                 const tdm_tensor *target, tdm_reduction reduction,
                                 tdm_tensor **ginput, tdm_tensor **gtarget) {
    const char *op = "mse_loss_backward";
    TDM_PROFILE_OP(op, gloss, input, target);
    if (ginput) *ginput = NULL;
    if (gtarget) *gtarget = NULL;
    TDM_TRY(mse_check(op, input, target, reduction));
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    loss_shape(reduction, input->ndim, input->shape, &ndim, shape);
    TDM_TRY(check_grad(op, gloss, input, ndim, shape));
    if (!ginput && !gtarget) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(input);
    if (!be->mse_loss_backward) return tdm_error_unsupported(op, be);
    tdm_tensor *ga = ginput ? empty_like(input) : NULL;
    tdm_tensor *gb = gtarget ? empty_like(target) : NULL;
    tdm_status s = (ginput && !ga) || (gtarget && !gb)
                       ? tdm_last_status()
                       : be->mse_loss_backward(gloss, input, target, reduction, ga, gb);
    if (s != TDM_OK) {
        tdm_tensor_free(ga);
        tdm_tensor_free(gb);
        return s;
    }
    if (ginput) *ginput = ga;
    if (gtarget) *gtarget = gb;
    return TDM_OK;
}

/* ops_reduce.c — reductions (sum, mean), softmax and log_softmax, and the losses
 * (cross_entropy, mse_loss), forward and backward, as PyTorch defines them.
 *
 * The backend's reduce slot always writes a keepdim-shaped output; without keepdim the public op
 * returns a view with the reduced dims dropped. The backend sees cross_entropy only as (N,C):
 * the unbatched form (C) with a 0-d target is passed as views of one row.
 *
 * Each public forward applies the autocast policy to its inputs first and records itself for
 * autograd last (core/autograd_impl.h); its body runs with grad mode off. */
#include <math.h>
#include <string.h>

#include "core/autograd_impl.h"
#include "core/profile_impl.h"

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

// logits (N,C) with target (N), or unbatched logits (C) with a 0-d target. Fills the (N,C) and
// (N) views the backend works on.
typedef struct {
    tdm_tensor *logits2, *target1;   // views: (N,C) and (N)
    int loss_ndim;                   // for reduction none: 1, or 0 unbatched
    int64_t n;
} ce_views;

static void ce_views_free(ce_views *v) {
    tdm_tensor_free(v->logits2);
    tdm_tensor_free(v->target1);
}

static tdm_status ce_check(const char *op, const tdm_tensor *logits, const tdm_tensor *target,
                           tdm_reduction red, double smoothing, ce_views *v) {
    memset(v, 0, sizeof *v);
    TDM_TRY(tdm_check_tensor(op, "input", logits));
    TDM_TRY(tdm_check_tensor(op, "target", target));
    TDM_TRY(tdm_check_same_device(op, logits, target));
    TDM_TRY(tdm_check_float(op, "input", logits));
    if (tdm_dtype_is_float(target->dtype))
        return tdm_error_set(TDM_ERR_UNSUPPORTED,
                             "%s: a floating target (class probabilities) is not supported; "
                             "pass class indices (int64)",
                             op);
    if (target->dtype != TDM_DTYPE_I64 && target->dtype != TDM_DTYPE_I32)
        return tdm_error_set(TDM_ERR_DTYPE, "%s: target has dtype %s, expected int64", op,
                             tdm_dtype_name(target->dtype));
    TDM_TRY(check_reduction(op, red));
    if (!(smoothing >= 0.0 && smoothing <= 1.0))
        return tdm_error_set(TDM_ERR_ARG, "%s: label_smoothing must be between 0.0 and 1.0, got %g",
                             op, smoothing);
    char a[96], b[96];
    if (logits->ndim == 2 && target->ndim == 1 && target->shape[0] == logits->shape[0]) {
        v->n = logits->shape[0];
        v->loss_ndim = 1;
    } else if (logits->ndim == 1 && target->ndim == 0) {
        v->n = 1;
        v->loss_ndim = 0;
    } else {
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: input %s and target %s: expected input (N, C) with target (N), "
                             "or input (C) with a 0-d target",
                             op, tdm_shape_str(logits->ndim, logits->shape, a, sizeof a),
                             tdm_shape_str(target->ndim, target->shape, b, sizeof b));
    }
    int64_t c = logits->shape[logits->ndim - 1];
    int64_t s2[2] = {v->n, c}, s1[1] = {v->n};
    v->logits2 = tdm_tensor_reshape(logits, 2, s2);
    v->target1 = tdm_tensor_reshape(target, 1, s1);
    if (!v->logits2 || !v->target1) {
        ce_views_free(v);
        return tdm_last_status();
    }
    return TDM_OK;
}

// loss_i = (1-eps) * -log p[i,t_i] + eps/C * sum_c -log p[i,c]; ignored rows 0; mean divides by
// the number of rows not ignored.
static tdm_tensor *cross_entropy_forward(const tdm_tensor *logits, const tdm_tensor *target,
                                         tdm_reduction reduction, double label_smoothing,
                                         int64_t ignore_index) {
    const char *op = "cross_entropy";
    ce_views v;
    if (ce_check(op, logits, target, reduction, label_smoothing, &v) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(logits);
    if (!be->cross_entropy) {
        tdm_error_unsupported(op, be);
        ce_views_free(&v);
        return NULL;
    }
    int ndim;
    int64_t shape[1];
    loss_shape(reduction, v.loss_ndim, &v.n, &ndim, shape);
    tdm_tensor *loss = tdm_tensor_empty(ndim, shape, logits->dtype, logits->device);
    // The backend writes (N) for reduction none: a view of the 0-d loss when unbatched.
    int64_t n1[1] = {v.n};
    tdm_tensor *loss_view = !loss                          ? NULL
                            : reduction == TDM_REDUCTION_NONE ? tdm_tensor_reshape(loss, 1, n1)
                                                              : tdm_tensor_reshape(loss, 0, NULL);
    if (!loss_view || be->cross_entropy(v.logits2, v.target1, reduction, label_smoothing,
                                        ignore_index, loss_view) != TDM_OK) {
        tdm_tensor_free(loss);
        loss = NULL;
    }
    tdm_tensor_free(loss_view);
    ce_views_free(&v);
    return loss;
}

// Autocast: runs in f32. Records itself for autograd (no gradient for the integer target).
tdm_tensor *tdm_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                              tdm_reduction reduction, double label_smoothing,
                              int64_t ignore_index) {
    TDM_PROFILE_OP("cross_entropy", logits, target);
    tdm_autocast_args ac;
    if (tdm_autocast_apply("cross_entropy", TDM_AUTOCAST_F32, 2,
                           (const tdm_tensor *[]){logits, target}, &ac) != TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = cross_entropy_forward(ac.in[0], ac.in[1], reduction, label_smoothing,
                                          ignore_index);
    tdm_grad_set_enabled(grad);
    y = tdm_record_cross_entropy(y, ac.in[0], ac.in[1], reduction, label_smoothing, ignore_index);
    tdm_autocast_args_free(&ac);
    return y;
}

// glogits[i,c] = g_i * (p[i,c] - (1-eps)[c == t_i] - eps/C) for rows not ignored, else 0.
tdm_status tdm_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                      const tdm_tensor *target, tdm_reduction reduction,
                                      double label_smoothing, int64_t ignore_index,
                                      tdm_tensor **glogits) {
    const char *op = "cross_entropy_backward";
    TDM_PROFILE_OP(op, gloss, logits, target);
    if (glogits) *glogits = NULL;
    ce_views v;
    TDM_TRY(ce_check(op, logits, target, reduction, label_smoothing, &v));
    int ndim;
    int64_t shape[1];
    loss_shape(reduction, v.loss_ndim, &v.n, &ndim, shape);
    const struct tdm_backend_ops *be = tdm_backend_of(logits);
    tdm_status s = check_grad(op, gloss, logits, ndim, shape);
    if (s == TDM_OK && glogits && !be->cross_entropy_backward) s = tdm_error_unsupported(op, be);
    if (s != TDM_OK || !glogits) {
        ce_views_free(&v);
        return s;
    }
    // The backend sees gloss as (N) for reduction none (a scalar otherwise), glogits as (N,C).
    int64_t n1[1] = {v.n};
    tdm_tensor *gl = reduction == TDM_REDUCTION_NONE ? tdm_tensor_reshape(gloss, 1, n1)
                                                     : tdm_tensor_reshape(gloss, 0, NULL);
    tdm_tensor *g = empty_like(logits);
    tdm_tensor *g2 = g ? tdm_tensor_reshape(g, 2, tdm_tensor_shape(v.logits2)) : NULL;
    s = !gl || !g2 ? tdm_last_status()
                   : be->cross_entropy_backward(gl, v.logits2, v.target1, reduction,
                                                label_smoothing, ignore_index, g2);
    if (s == TDM_OK) {
        *glogits = g;
        g = NULL;
    }
    tdm_tensor_free(g);
    tdm_tensor_free(g2);
    tdm_tensor_free(gl);
    ce_views_free(&v);
    return s;
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

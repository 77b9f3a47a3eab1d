/* ops_norm.c — layer_norm and batch_norm, forward and backward: argument checks, output
 * allocation, and the call through the backend table. The backend sees x as (rows, cols) for
 * layer norm and as (N, C, S) for batch norm (views of the caller's tensors).
 *
 * Each public forward applies the autocast policy to its inputs first and records itself for
 * autograd last (core/autograd_impl.h); its body runs with grad mode off. */
#include "core/autograd_impl.h"
#include "core/profile_impl.h"
#include "tandem/amp.h"
#include "tandem/backends.h"

// ---- shared helpers ----------------------------------------------------------------------

// Saved statistics (mean, rstd/invstd) are kept in f32, or f64 for f64 inputs (PyTorch's
// accumulation type: f16/bf16/f32 -> f32, f64 -> f64).
static tdm_dtype stat_dtype(tdm_dtype x) {
    return x == TDM_DTYPE_F64 ? TDM_DTYPE_F64 : TDM_DTYPE_F32;
}

// A norm parameter or running statistic `t` beside input x: on x's device, of x's dtype (or f32
// beside an f16/bf16 x, as under autocast), of exactly the given shape.
static tdm_status check_param(const char *op, const char *arg, const tdm_tensor *x,
                              const tdm_tensor *t, int ndim, const int64_t *shape) {
    TDM_TRY(tdm_check_same_device(op, x, t));
    bool low = x->dtype == TDM_DTYPE_F16 || x->dtype == TDM_DTYPE_BF16;
    if (t->dtype != x->dtype && !(low && t->dtype == TDM_DTYPE_F32))
        return tdm_error_set(TDM_ERR_DTYPE, "%s: %s has dtype %s, expected %s%s", op, arg,
                             tdm_dtype_name(t->dtype), tdm_dtype_name(x->dtype),
                             low ? " or f32" : "");
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: %s has shape %s, expected %s", op, arg,
                             tdm_shape_str(t->ndim, t->shape, a, sizeof a),
                             tdm_shape_str(ndim, shape, b, sizeof b));
    }
    return TDM_OK;
}

// gy must have x's shape and dtype, on x's device.
static tdm_status check_grad_output(const char *op, const tdm_tensor *gy, const tdm_tensor *x) {
    TDM_TRY(tdm_check_tensor(op, "grad_output", gy));
    TDM_TRY(tdm_check_same_device(op, gy, x));
    TDM_TRY(tdm_check_same_dtype(op, gy, x));
    bool same = gy->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++) same = gy->shape[i] == x->shape[i];
    if (!same) {
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output %s and input %s differ in shape", op,
                             tdm_shape_str(gy->ndim, gy->shape, a, sizeof a),
                             tdm_shape_str(x->ndim, x->shape, b, sizeof b));
    }
    return TDM_OK;
}

// A saved statistic passed back to a backward: floating, on x's device, `n` elements.
static tdm_status check_stat(const char *op, const char *arg, const tdm_tensor *x,
                             const tdm_tensor *t, int64_t n) {
    TDM_TRY(tdm_check_same_device(op, x, t));
    TDM_TRY(tdm_check_float(op, arg, t));
    if (t->numel != n) {
        char a[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: %s has shape %s, expected %lld elements", op, arg,
                             tdm_shape_str(t->ndim, t->shape, a, sizeof a), (long long)n);
    }
    return TDM_OK;
}

// A 1-D or 2-D view (NULL for a NULL tensor; *ok false when the view could not be made).
static tdm_tensor *view1(const tdm_tensor *t, int64_t n, bool *ok) {
    if (!t) return NULL;
    tdm_tensor *v = tdm_tensor_reshape(t, 1, &n);
    if (!v) *ok = false;
    return v;
}

static tdm_tensor *view2(const tdm_tensor *t, int64_t a, int64_t b, bool *ok) {
    if (!t) return NULL;
    int64_t s[2] = {a, b};
    tdm_tensor *v = tdm_tensor_reshape(t, 2, s);
    if (!v) *ok = false;
    return v;
}

// ---- layer_norm ----------------------------------------------------------------------------

// Checks x, normalized_ndim, weight and bias; gives rows (the leading dims' product) and cols.
static tdm_status layer_norm_check(const char *op, const tdm_tensor *x, int normalized_ndim,
                                   const tdm_tensor *weight, const tdm_tensor *bias,
                                   int64_t *rows, int64_t *cols) {
    TDM_TRY(tdm_check_tensor(op, "input", x));
    TDM_TRY(tdm_check_float(op, "input", x));
    if (normalized_ndim < 1 || normalized_ndim > x->ndim) {
        char a[96];
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: normalized_ndim %d out of range for input of shape %s "
                             "(expected 1 to %d)",
                             op, normalized_ndim, tdm_shape_str(x->ndim, x->shape, a, sizeof a),
                             x->ndim);
    }
    int lead = x->ndim - normalized_ndim;
    const int64_t *nshape = x->shape + lead;
    if (weight) TDM_TRY(check_param(op, "weight", x, weight, normalized_ndim, nshape));
    if (bias) TDM_TRY(check_param(op, "bias", x, bias, normalized_ndim, nshape));
    *rows = tdm_shape_numel(lead, x->shape);
    *cols = tdm_shape_numel(normalized_ndim, nshape);
    return TDM_OK;
}

// res NULL: layer_norm(x). Otherwise (the backend's add_layer_norm; res x's shape) *sum_out
// gets x + res, and the result is layer_norm of it.
static tdm_tensor *layer_norm_forward(const tdm_tensor *x, const tdm_tensor *res,
                                      int normalized_ndim, const tdm_tensor *weight,
                                      const tdm_tensor *bias, double eps, tdm_tensor **mean_out,
                                      tdm_tensor **rstd_out, tdm_tensor **sum_out) {
    const char *op = "layer_norm";
    if (mean_out) *mean_out = NULL;
    if (rstd_out) *rstd_out = NULL;
    int64_t rows, cols;
    if (layer_norm_check(op, x, normalized_ndim, weight, bias, &rows, &cols) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->layer_norm) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    int lead = x->ndim - normalized_ndim;
    tdm_dtype sd = stat_dtype(x->dtype);
    tdm_tensor *y = tdm_tensor_empty(x->ndim, x->shape, x->dtype, x->device);
    tdm_tensor *mean = mean_out ? tdm_tensor_empty(lead, x->shape, sd, x->device) : NULL;
    tdm_tensor *rstd = rstd_out ? tdm_tensor_empty(lead, x->shape, sd, x->device) : NULL;
    tdm_tensor *sum = res ? tdm_tensor_empty(x->ndim, x->shape, x->dtype, x->device) : NULL;
    bool ok = y && (!mean_out || mean) && (!rstd_out || rstd) && (!res || sum);
    tdm_tensor *x2 = NULL, *y2 = NULL, *w1 = NULL, *b1 = NULL, *m1 = NULL, *r1 = NULL;
    tdm_tensor *res2 = NULL, *sum2 = NULL;
    if (ok) {
        x2 = view2(x, rows, cols, &ok);
        y2 = view2(y, rows, cols, &ok);
        w1 = view1(weight, cols, &ok);
        b1 = view1(bias, cols, &ok);
        m1 = view1(mean, rows, &ok);
        r1 = view1(rstd, rows, &ok);
        res2 = view2(res, rows, cols, &ok);
        sum2 = view2(sum, rows, cols, &ok);
    }
    if (ok)
        ok = (res ? be->add_layer_norm(x2, res2, w1, b1, eps, sum2, y2, m1, r1)
                  : be->layer_norm(x2, w1, b1, eps, y2, m1, r1)) == TDM_OK;
    tdm_tensor_free(res2);
    tdm_tensor_free(sum2);
    tdm_tensor_free(x2);
    tdm_tensor_free(y2);
    tdm_tensor_free(w1);
    tdm_tensor_free(b1);
    tdm_tensor_free(m1);
    tdm_tensor_free(r1);
    if (!ok) {
        tdm_tensor_free(y);
        tdm_tensor_free(mean);
        tdm_tensor_free(rstd);
        tdm_tensor_free(sum);
        return NULL;
    }
    if (mean_out) *mean_out = mean;
    if (rstd_out) *rstd_out = rstd;
    if (sum_out) *sum_out = sum;
    return y;
}

// Hands the statistics to the caller's out-pointers when they were asked for and y exists, and
// drops the references not handed out (the node, if any, holds its own).
static void give_stats(tdm_tensor *y, tdm_tensor *a, tdm_tensor **a_out, tdm_tensor *b,
                       tdm_tensor **b_out) {
    if (y && a_out) *a_out = tdm_tensor_retain(a);
    if (y && b_out) *b_out = tdm_tensor_retain(b);
    tdm_tensor_free(a);
    tdm_tensor_free(b);
}

// Autocast: runs in f32. Records itself for autograd, saving the statistics (computed whether
// or not the caller asked for them).
tdm_tensor *tdm_layer_norm(const tdm_tensor *x, int normalized_ndim, const tdm_tensor *weight,
                           const tdm_tensor *bias, double eps, tdm_tensor **mean_out,
                           tdm_tensor **rstd_out) {
    TDM_PROFILE_OP("layer_norm", x, weight, bias);
    if (mean_out) *mean_out = NULL;
    if (rstd_out) *rstd_out = NULL;
    tdm_autocast_args ac;
    if (tdm_autocast_apply("layer_norm", TDM_AUTOCAST_F32, 3,
                           (const tdm_tensor *[]){x, weight, bias}, &ac) != TDM_OK)
        return NULL;
    bool rec = tdm_autograd_needed(3, ac.in);
    tdm_tensor *mean = NULL, *rstd = NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = layer_norm_forward(ac.in[0], NULL, normalized_ndim, ac.in[1], ac.in[2], eps,
                                       mean_out || rec ? &mean : NULL,
                                       rstd_out || rec ? &rstd : NULL, NULL);
    tdm_grad_set_enabled(grad);
    if (rec)
        y = tdm_record_layer_norm(y, ac.in[0], normalized_ndim, ac.in[1], ac.in[2], mean, rstd);
    give_stats(y, mean, mean_out, rstd, rstd_out);
    tdm_autocast_args_free(&ac);
    return y;
}

// Can x + res and its layer_norm run as one backend call, with exactly the values of tdm_add
// then tdm_layer_norm? x and res as add sees them (after autocast's promotion): the backend has
// the slot, one device, one floating dtype, equal shapes; and autocast would not cast the sum,
// the weight or the bias for layer_norm (off, or they are f32 or f64 already).
static bool add_layer_norm_fuses(const tdm_tensor *x, const tdm_tensor *res,
                                 const tdm_tensor *weight, const tdm_tensor *bias) {
    if (!x || !res || x->device.type != res->device.type || x->device.index != res->device.index ||
        !tdm_dtype_is_float(x->dtype) || x->dtype != res->dtype || x->ndim != res->ndim ||
        !tdm_backend_of(x)->add_layer_norm || !tdm_fusions_enabled())
        return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != res->shape[d]) return false;
    if (!tdm_autocast_get().enabled) return true;
    const tdm_tensor *ts[3] = {x, weight, bias};
    for (int i = 0; i < 3; i++)
        if (ts[i] && ts[i]->dtype != TDM_DTYPE_F32 && ts[i]->dtype != TDM_DTYPE_F64) return false;
    return true;
}

tdm_tensor *tdm_add_layer_norm(const tdm_tensor *x, const tdm_tensor *res, int normalized_ndim,
                               const tdm_tensor *weight, const tdm_tensor *bias, double eps,
                               tdm_tensor **sum_out) {
    TDM_PROFILE_OP("add_layer_norm", x, res, weight, bias);
    if (sum_out) *sum_out = NULL;
    if (!sum_out) {
        tdm_error_set(TDM_ERR_ARG, "add_layer_norm: sum_out is NULL (the sum is a result)");
        return NULL;
    }
    tdm_autocast_args ac;   // add's policy first, as tdm_add applies it (a recorded cast)
    if (tdm_autocast_apply("add", TDM_AUTOCAST_PROMOTE, 2, (const tdm_tensor *[]){x, res}, &ac) !=
        TDM_OK)
        return NULL;
    x = ac.in[0], res = ac.in[1];
    tdm_tensor *y = NULL, *sum = NULL;
    if (!add_layer_norm_fuses(x, res, weight, bias)) {   // the two ops
        sum = tdm_add(x, res, 1.0);
        y = sum ? tdm_layer_norm(sum, normalized_ndim, weight, bias, eps, NULL, NULL) : NULL;
    } else {
        tdm_tensor *mean = NULL, *rstd = NULL;
        bool grad = tdm_grad_set_enabled(false);
        y = layer_norm_forward(x, res, normalized_ndim, weight, bias, eps, &mean, &rstd, &sum);
        tdm_grad_set_enabled(grad);
        // recorded as what it computes: sum = add(x, res), y = layer_norm(sum)
        if (y) sum = tdm_record_add(sum, x, res, 1.0);
        if (y && !sum) {
            tdm_tensor_free(y);
            y = NULL;
        }
        if (y && tdm_autograd_needed(3, (const tdm_tensor *[]){sum, weight, bias}))
            y = tdm_record_layer_norm(y, sum, normalized_ndim, weight, bias, mean, rstd);
        tdm_tensor_free(mean);
        tdm_tensor_free(rstd);
    }
    if (!y) tdm_tensor_free(sum);
    else *sum_out = sum;
    tdm_autocast_args_free(&ac);
    return y;
}

// PyTorch's backward takes the forward's saved mean and rstd. Without them (NULL), they are
// recomputed with the default eps, 1e-5: the backward is not told the forward's eps.
tdm_status tdm_layer_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, int normalized_ndim,
                                   const tdm_tensor *weight, const tdm_tensor *mean,
                                   const tdm_tensor *rstd, tdm_tensor **gx, tdm_tensor **gweight,
                                   tdm_tensor **gbias) {
    const char *op = "layer_norm_backward";
    TDM_PROFILE_OP(op, gy, x, weight);
    if (gx) *gx = NULL;
    if (gweight) *gweight = NULL;
    if (gbias) *gbias = NULL;
    int64_t rows, cols;
    TDM_TRY(layer_norm_check(op, x, normalized_ndim, weight, NULL, &rows, &cols));
    TDM_TRY(check_grad_output(op, gy, x));
    if (mean) TDM_TRY(check_stat(op, "mean", x, mean, rows));
    if (rstd) TDM_TRY(check_stat(op, "rstd", x, rstd, rows));
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->layer_norm_backward) return tdm_error_unsupported(op, be);

    tdm_tensor *own_mean = NULL, *own_rstd = NULL;
    if (!mean || !rstd) {
        tdm_tensor *y = tdm_layer_norm(x, normalized_ndim, NULL, NULL, 1e-5, &own_mean, &own_rstd);
        if (!y) return tdm_last_status();
        tdm_tensor_free(y);
        mean = own_mean;
        rstd = own_rstd;
    }
    int lead = x->ndim - normalized_ndim;
    tdm_dtype pd = weight ? weight->dtype : x->dtype;   // gradients of the parameters
    tdm_tensor *dx = gx ? tdm_tensor_empty(x->ndim, x->shape, x->dtype, x->device) : NULL;
    tdm_tensor *dw = gweight ? tdm_tensor_empty(normalized_ndim, x->shape + lead, pd, x->device)
                             : NULL;
    tdm_tensor *db = gbias ? tdm_tensor_empty(normalized_ndim, x->shape + lead, pd, x->device)
                           : NULL;
    bool ok = (!gx || dx) && (!gweight || dw) && (!gbias || db);
    tdm_tensor *gy2 = NULL, *x2 = NULL, *w1 = NULL, *m1 = NULL, *r1 = NULL;
    tdm_tensor *dx2 = NULL, *dw1 = NULL, *db1 = NULL;
    if (ok) {
        gy2 = view2(gy, rows, cols, &ok);
        x2 = view2(x, rows, cols, &ok);
        w1 = view1(weight, cols, &ok);
        m1 = view1(mean, rows, &ok);
        r1 = view1(rstd, rows, &ok);
        dx2 = view2(dx, rows, cols, &ok);
        dw1 = view1(dw, cols, &ok);
        db1 = view1(db, cols, &ok);
    }
    tdm_status s = ok ? be->layer_norm_backward(gy2, x2, w1, m1, r1, dx2, dw1, db1)
                      : tdm_last_status();
    tdm_tensor *tmp[] = {gy2, x2, w1, m1, r1, dx2, dw1, db1, own_mean, own_rstd};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) tdm_tensor_free(tmp[i]);
    if (s != TDM_OK) {
        tdm_tensor_free(dx);
        tdm_tensor_free(dw);
        tdm_tensor_free(db);
        return s;
    }
    if (gx) *gx = dx;
    if (gweight) *gweight = dw;
    if (gbias) *gbias = db;
    return TDM_OK;
}

// ---- batch_norm ----------------------------------------------------------------------------

// Checks x (N,C,...) and the optional (C) tensors; gives N, C and S (the spatial positions).
static tdm_status batch_norm_check(const char *op, const tdm_tensor *x, const tdm_tensor *rm,
                                   const tdm_tensor *rv, const tdm_tensor *w, const tdm_tensor *b,
                                   int64_t *N, int64_t *C, int64_t *S) {
    TDM_TRY(tdm_check_tensor(op, "input", x));
    TDM_TRY(tdm_check_float(op, "input", x));
    TDM_TRY(tdm_check_ndim(op, "input", x, 2, TDM_MAX_DIMS));
    const int64_t *c = &x->shape[1];
    if (rm) TDM_TRY(check_param(op, "running_mean", x, rm, 1, c));
    if (rv) TDM_TRY(check_param(op, "running_var", x, rv, 1, c));
    if (w) TDM_TRY(check_param(op, "weight", x, w, 1, c));
    if (b) TDM_TRY(check_param(op, "bias", x, b, 1, c));
    *N = x->shape[0];
    *C = x->shape[1];
    *S = tdm_shape_numel(x->ndim - 2, x->shape + 2);
    return TDM_OK;
}

static tdm_tensor *batch_norm_forward(const tdm_tensor *x, tdm_tensor *running_mean,
                                      tdm_tensor *running_var, const tdm_tensor *weight,
                                      const tdm_tensor *bias, bool training, double momentum,
                                      double eps, tdm_tensor **save_mean,
                                      tdm_tensor **save_invstd) {
    const char *op = "batch_norm";
    if (save_mean) *save_mean = NULL;
    if (save_invstd) *save_invstd = NULL;
    int64_t N, C, S;
    if (batch_norm_check(op, x, running_mean, running_var, weight, bias, &N, &C, &S) != TDM_OK)
        return NULL;
    char a[96];
    if (training && N * S == 1) {
        tdm_error_set(TDM_ERR_ARG,
                      "%s: expected more than 1 value per channel when training, got input size %s",
                      op, tdm_shape_str(x->ndim, x->shape, a, sizeof a));
        return NULL;
    }
    if (!training && (!running_mean || !running_var)) {
        tdm_error_set(TDM_ERR_ARG, "%s: running_mean and running_var are required in eval mode",
                      op);
        return NULL;
    }
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->batch_norm) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_dtype sd = stat_dtype(x->dtype);
    tdm_tensor *y = tdm_tensor_empty(x->ndim, x->shape, x->dtype, x->device);
    tdm_tensor *sm = save_mean ? tdm_tensor_empty(1, &C, sd, x->device) : NULL;
    tdm_tensor *si = save_invstd ? tdm_tensor_empty(1, &C, sd, x->device) : NULL;
    int64_t s3[3] = {N, C, S};
    tdm_tensor *x3 = NULL, *y3 = NULL;
    bool ok = y && (!save_mean || sm) && (!save_invstd || si);
    if (ok) ok = (x3 = tdm_tensor_reshape(x, 3, s3)) && (y3 = tdm_tensor_reshape(y, 3, s3));
    if (ok)
        ok = be->batch_norm(x3, running_mean, running_var, weight, bias, training, momentum, eps,
                            y3, sm, si) == TDM_OK;
    tdm_tensor_free(x3);
    tdm_tensor_free(y3);
    if (!ok) {
        tdm_tensor_free(y);
        tdm_tensor_free(sm);
        tdm_tensor_free(si);
        return NULL;
    }
    if (save_mean) *save_mean = sm;
    if (save_invstd) *save_invstd = si;
    return y;
}

// Autocast: the input (and low-precision weight and bias) run in f32; the running statistics,
// updated in place, are used as they are. Records itself for autograd, saving the statistics the
// output was normalized with (computed whether or not the caller asked for them).
tdm_tensor *tdm_batch_norm(const tdm_tensor *x, tdm_tensor *running_mean, tdm_tensor *running_var,
                           const tdm_tensor *weight, const tdm_tensor *bias, bool training,
                           double momentum, double eps, tdm_tensor **save_mean,
                           tdm_tensor **save_invstd) {
    TDM_PROFILE_OP("batch_norm", x, weight, bias);
    if (save_mean) *save_mean = NULL;
    if (save_invstd) *save_invstd = NULL;
    tdm_autocast_args ac;
    if (tdm_autocast_apply("batch_norm", TDM_AUTOCAST_F32, 3,
                           (const tdm_tensor *[]){x, weight, bias}, &ac) != TDM_OK)
        return NULL;
    bool rec = tdm_autograd_needed(3, ac.in);
    tdm_tensor *sm = NULL, *si = NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = batch_norm_forward(ac.in[0], running_mean, running_var, ac.in[1], ac.in[2],
                                       training, momentum, eps, save_mean || rec ? &sm : NULL,
                                       save_invstd || rec ? &si : NULL);
    tdm_grad_set_enabled(grad);
    if (rec) y = tdm_record_batch_norm(y, ac.in[0], ac.in[1], ac.in[2], training, sm, si);
    give_stats(y, sm, save_mean, si, save_invstd);
    tdm_autocast_args_free(&ac);
    return y;
}

tdm_status tdm_batch_norm_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_tensor *weight, const tdm_tensor *save_mean,
                                   const tdm_tensor *save_invstd, bool training, tdm_tensor **gx,
                                   tdm_tensor **gweight, tdm_tensor **gbias) {
    const char *op = "batch_norm_backward";
    TDM_PROFILE_OP(op, gy, x, weight);
    if (gx) *gx = NULL;
    if (gweight) *gweight = NULL;
    if (gbias) *gbias = NULL;
    int64_t N, C, S;
    TDM_TRY(batch_norm_check(op, x, NULL, NULL, weight, NULL, &N, &C, &S));
    TDM_TRY(check_grad_output(op, gy, x));
    if (!save_mean || !save_invstd)
        return tdm_error_set(TDM_ERR_ARG,
                             "%s: save_mean and save_invstd (from the forward) are required", op);
    TDM_TRY(check_stat(op, "save_mean", x, save_mean, C));
    TDM_TRY(check_stat(op, "save_invstd", x, save_invstd, C));
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->batch_norm_backward) return tdm_error_unsupported(op, be);

    tdm_dtype pd = weight ? weight->dtype : x->dtype;   // gradients of the parameters
    tdm_tensor *dx = gx ? tdm_tensor_empty(x->ndim, x->shape, x->dtype, x->device) : NULL;
    tdm_tensor *dw = gweight ? tdm_tensor_empty(1, &C, pd, x->device) : NULL;
    tdm_tensor *db = gbias ? tdm_tensor_empty(1, &C, pd, x->device) : NULL;
    bool ok = (!gx || dx) && (!gweight || dw) && (!gbias || db);
    int64_t s3[3] = {N, C, S};
    bool vok = true;
    tdm_tensor *gy3 = NULL, *x3 = NULL, *dx3 = NULL, *sm1 = NULL, *si1 = NULL;
    if (ok) {
        gy3 = tdm_tensor_reshape(gy, 3, s3);
        x3 = tdm_tensor_reshape(x, 3, s3);
        dx3 = dx ? tdm_tensor_reshape(dx, 3, s3) : NULL;
        sm1 = view1(save_mean, C, &vok);
        si1 = view1(save_invstd, C, &vok);
        ok = gy3 && x3 && (!dx || dx3) && vok;
    }
    tdm_status s = ok ? be->batch_norm_backward(gy3, x3, weight, sm1, si1, training, dx3, dw, db)
                      : tdm_last_status();
    tdm_tensor_free(gy3);
    tdm_tensor_free(x3);
    tdm_tensor_free(dx3);
    tdm_tensor_free(sm1);
    tdm_tensor_free(si1);
    if (s != TDM_OK) {
        tdm_tensor_free(dx);
        tdm_tensor_free(dw);
        tdm_tensor_free(db);
        return s;
    }
    if (gx) *gx = dx;
    if (gweight) *gweight = dw;
    if (gbias) *gbias = db;
    return TDM_OK;
}

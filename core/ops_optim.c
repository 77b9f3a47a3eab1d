/* ops_optim.c — the optimizer updates (sgd_step, adam_step, and adam_step_multi: Adam over a list
 * of tensors, for fused steps and master weights), in place, and gradient-norm clipping
 * (clip_grad_norm_): argument checks and the calls through the backend table. The
 * hyperparameter checks are torch.optim's. */
#include <math.h>
#include <stdlib.h>

#include "core/graph_impl.h"
#include "core/optim_impl.h"
#include "core/profile_impl.h"

// A state tensor `t` beside param: same device and shape, exactly, and dtype dt.
static tdm_status check_state(const char *op, const char *arg, const tdm_tensor *param,
                              const tdm_tensor *t, tdm_dtype dt) {
    TDM_TRY(tdm_check_tensor(op, arg, t));
    TDM_TRY(tdm_check_same_device(op, param, t));
    if (t->dtype != dt)
        return tdm_error_set(TDM_ERR_DTYPE, "%s: param has dtype %s%s but %s has dtype %s (%s "
                             "expected)", op, tdm_dtype_name(param->dtype),
                             dt != param->dtype ? " with f32 master weights" : "", arg,
                             tdm_dtype_name(t->dtype), tdm_dtype_name(dt));
    bool same = t->ndim == param->ndim;
    for (int i = 0; same && i < t->ndim; i++) same = t->shape[i] == param->shape[i];
    if (!same) {
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: param has shape %s but %s has shape %s", op,
                             tdm_shape_str(param->ndim, param->shape, a, sizeof a), arg,
                             tdm_shape_str(t->ndim, t->shape, b, sizeof b));
    }
    return TDM_OK;
}

// A state tensor `t` beside param: same device, dtype and shape, exactly.
static tdm_status check_like(const char *op, const char *arg, const tdm_tensor *param,
                             const tdm_tensor *t) {
    return check_state(op, arg, param, t, param->dtype);
}

static tdm_status check_param(const char *op, const tdm_tensor *param, const tdm_tensor *grad) {
    TDM_TRY(tdm_check_tensor(op, "param", param));
    TDM_TRY(tdm_check_float(op, "param", param));
    return check_like(op, "grad", param, grad);
}

static tdm_status sgd_check(const char *op, const tdm_tensor *param, const tdm_tensor *grad,
                            tdm_tensor **momentum_buffer, const tdm_sgd_params *p) {
    TDM_TRY(check_param(op, param, grad));
    if (!p) return tdm_error_set(TDM_ERR_ARG, "%s: params is NULL", op);
    if (!(p->lr >= 0))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid learning rate: %g", op, p->lr);
    if (!(p->momentum >= 0))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid momentum value: %g", op, p->momentum);
    if (!(p->weight_decay >= 0))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid weight_decay value: %g", op,
                             p->weight_decay);
    if (p->nesterov && (p->momentum <= 0 || p->dampening != 0))
        return tdm_error_set(TDM_ERR_ARG,
                             "%s: Nesterov momentum requires a momentum and zero dampening "
                             "(momentum %g, dampening %g)",
                             op, p->momentum, p->dampening);
    if (p->momentum != 0) {
        if (!*momentum_buffer)
            return tdm_error_set(TDM_ERR_ARG, "%s: momentum %g needs a momentum_buffer", op,
                                 p->momentum);
        TDM_TRY(check_like(op, "momentum_buffer", param, *momentum_buffer));
    } else {
        *momentum_buffer = NULL;   // unused without momentum, as in torch.optim
    }
    return TDM_OK;
}

tdm_status tdm_sgd_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *momentum_buffer,
                        bool buffer_initialized, const tdm_sgd_params *p) {
    const char *op = "sgd_step";
    TDM_PROFILE_OP(op, param, grad, momentum_buffer);
    TDM_TRY(sgd_check(op, param, grad, &momentum_buffer, p));
    const struct tdm_backend_ops *be = tdm_backend_of(param);
    if (!be->sgd_step) return tdm_error_unsupported(op, be);
    return be->sgd_step(param, grad, momentum_buffer, buffer_initialized, p);
}

// A coef of n doubles at element `at` of the f64 tensor c, on param's device.
static tdm_status check_coef(const char *op, const tdm_tensor *param, const tdm_tensor *c,
                             int64_t at, int64_t n) {
    TDM_TRY(tdm_check_tensor(op, "coef", c));
    TDM_TRY(tdm_check_same_device(op, param, c));
    if (c->dtype != TDM_DTYPE_F64 || at < 0 || at + n > c->numel)
        return tdm_error_set(TDM_ERR_ARG, "%s: coef: %lld f64 values at %lld do not fit", op,
                             (long long)n, (long long)at);
    return TDM_OK;
}

tdm_status tdm_sgd_step_captured(tdm_tensor *param, const tdm_tensor *grad,
                                 tdm_tensor *momentum_buffer, const tdm_tensor *coef, int64_t at,
                                 const tdm_sgd_params *p) {
    const char *op = "sgd_step";
    TDM_PROFILE_OP(op, param, grad, momentum_buffer);
    TDM_TRY(sgd_check(op, param, grad, &momentum_buffer, p));
    TDM_TRY(check_coef(op, param, coef, at, 2));
    const struct tdm_backend_ops *be = tdm_backend_of(param);
    if (!be->sgd_step_dev)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: the %s backend cannot read its step state "
                             "on the device (cannot be captured)", op, be->name);
    return be->sgd_step_dev(param, grad, momentum_buffer, (const double *)tdm_data_c(coef) + at, p);
}

static tdm_status adam_hyper_check(const char *op, const tdm_adam_params *p);

// *max_exp_avg_sq is required (and checked) with p->amsgrad, set to NULL without it (unused, as
// in torch.optim).
static tdm_status adam_check(const char *op, const tdm_tensor *param, const tdm_tensor *grad,
                             const tdm_tensor *exp_avg, const tdm_tensor *exp_avg_sq,
                             tdm_tensor **max_exp_avg_sq, int64_t step, const tdm_adam_params *p) {
    TDM_TRY(check_param(op, param, grad));
    TDM_TRY(check_like(op, "exp_avg", param, exp_avg));
    TDM_TRY(check_like(op, "exp_avg_sq", param, exp_avg_sq));
    if (!p) return tdm_error_set(TDM_ERR_ARG, "%s: params is NULL", op);
    if (p->amsgrad) {
        if (!*max_exp_avg_sq)
            return tdm_error_set(TDM_ERR_ARG, "%s: amsgrad needs a max_exp_avg_sq buffer "
                                 "(tdm_adam_step_amsgrad)", op);
        TDM_TRY(check_like(op, "max_exp_avg_sq", param, *max_exp_avg_sq));
    } else {
        *max_exp_avg_sq = NULL;
    }
    if (step < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: step %lld, expected >= 1 (1-based, after the "
                             "increment)", op, (long long)step);
    return adam_hyper_check(op, p);
}

static tdm_status adam_hyper_check(const char *op, const tdm_adam_params *p) {
    if (!(p->lr >= 0))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid learning rate: %g", op, p->lr);
    if (!(p->eps >= 0))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid epsilon value: %g", op, p->eps);
    if (!(p->beta1 >= 0 && p->beta1 < 1))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid beta parameter at index 0: %g", op,
                             p->beta1);
    if (!(p->beta2 >= 0 && p->beta2 < 1))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid beta parameter at index 1: %g", op,
                             p->beta2);
    if (!(p->weight_decay >= 0))
        return tdm_error_set(TDM_ERR_ARG, "%s: invalid weight_decay value: %g", op,
                             p->weight_decay);
    return TDM_OK;
}

tdm_status tdm_adam_step_amsgrad(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *exp_avg,
                                 tdm_tensor *exp_avg_sq, tdm_tensor *max_exp_avg_sq,
                                 int64_t step, const tdm_adam_params *p) {
    const char *op = "adam_step";
    TDM_PROFILE_OP(op, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
    TDM_TRY(adam_check(op, param, grad, exp_avg, exp_avg_sq, &max_exp_avg_sq, step, p));
    const struct tdm_backend_ops *be = tdm_backend_of(param);
    if (!be->adam_step) return tdm_error_unsupported(op, be);
    return be->adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, p);
}

tdm_status tdm_adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *exp_avg,
                         tdm_tensor *exp_avg_sq, int64_t step, const tdm_adam_params *p) {
    return tdm_adam_step_amsgrad(param, grad, exp_avg, exp_avg_sq, NULL, step, p);
}

tdm_status tdm_adam_step_captured(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *exp_avg,
                                  tdm_tensor *exp_avg_sq, tdm_tensor *max_exp_avg_sq,
                                  const tdm_tensor *coef, int64_t at, const tdm_adam_params *p) {
    const char *op = "adam_step";
    TDM_PROFILE_OP(op, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
    TDM_TRY(adam_check(op, param, grad, exp_avg, exp_avg_sq, &max_exp_avg_sq, 1, p));
    TDM_TRY(check_coef(op, param, coef, at, 4));
    const struct tdm_backend_ops *be = tdm_backend_of(param);
    if (!be->adam_step_dev)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: the %s backend cannot read its step count "
                             "on the device (cannot be captured)", op, be->name);
    return be->adam_step_dev(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                             (const double *)tdm_data_c(coef) + at, p);
}

// ---- Adam over a list of tensors (core/optim_impl.h) ---------------------------------------

// items[i] checked as adam_check checks one tensor (state f32 beside a master), on dev0's device.
static tdm_status adam_item_check(const char *op, const tdm_adam_item *it, int i,
                                  const tdm_tensor *dev0, bool eager, const tdm_adam_params *p) {
    TDM_TRY(check_param(op, it->param, it->grad));
    TDM_TRY(tdm_check_same_device(op, dev0, it->param));
    tdm_dtype sdt = it->param->dtype;
    if (it->master) {
        if (it->param->dtype != TDM_DTYPE_F16 && it->param->dtype != TDM_DTYPE_BF16)
            return tdm_error_set(TDM_ERR_DTYPE, "%s: item %d: master weights are for f16/bf16 "
                                 "params, this one is %s", op, i, tdm_dtype_name(it->param->dtype));
        sdt = TDM_DTYPE_F32;
        TDM_TRY(check_state(op, "master", it->param, it->master, sdt));
    }
    TDM_TRY(check_state(op, "exp_avg", it->param, it->m, sdt));
    TDM_TRY(check_state(op, "exp_avg_sq", it->param, it->v, sdt));
    if (p->amsgrad != (it->vmax != NULL))
        return tdm_error_set(TDM_ERR_ARG, "%s: item %d: max_exp_avg_sq must be given exactly "
                             "with amsgrad", op, i);
    if (it->vmax) TDM_TRY(check_state(op, "max_exp_avg_sq", it->param, it->vmax, sdt));
    if (eager && it->step < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: item %d: step %lld, expected >= 1 (1-based, after "
                             "the increment)", op, i, (long long)it->step);
    tdm_adam_params q = *p;
    q.lr = it->lr;
    q.weight_decay = it->weight_decay;
    return adam_hyper_check(op, &q);
}

tdm_status tdm_adam_step_multi(const tdm_adam_item *items, int n, const tdm_adam_params *p,
                               const tdm_tensor *coef, int64_t at) {
    const char *op = "adam_step_multi";
    TDM_PROFILE_OP(op, n > 0 && items ? items[0].param : NULL);
    if (n < 1 || !items || !p)
        return tdm_error_set(TDM_ERR_ARG, "%s: needs at least one item and the params (n = %d)",
                             op, n);
    bool master = false;
    for (int i = 0; i < n; i++) {
        TDM_TRY(adam_item_check(op, &items[i], i, items[0].param, !coef, p));
        master = master || items[i].master;
    }
    if (coef) TDM_TRY(check_coef(op, items[0].param, coef, at, 4 * (int64_t)n));
    const double *cf = coef ? (const double *)tdm_data_c(coef) + at : NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(items[0].param);
    if (be->adam_step_multi) return be->adam_step_multi(items, n, p, cf);
    if (master)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: the %s backend has no multi-tensor Adam "
                             "step, which master weights need", op, be->name);
    // The backend's per-tensor steps: the same arithmetic, one call (launch) per tensor.
    for (int i = 0; i < n; i++) {
        const tdm_adam_item *it = &items[i];
        if (it->param->numel == 0) continue;
        tdm_adam_params q = *p;
        q.lr = it->lr;
        q.weight_decay = it->weight_decay;
        if (cf && !be->adam_step_dev)
            return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: the %s backend cannot read its step "
                                 "count on the device (cannot be captured)", op, be->name);
        if (!cf && !be->adam_step) return tdm_error_unsupported(op, be);
        TDM_TRY(cf ? be->adam_step_dev(it->param, it->grad, it->m, it->v, it->vmax, cf + 4 * i, &q)
                   : be->adam_step(it->param, it->grad, it->m, it->v, it->vmax, it->step, &q));
    }
    return TDM_OK;
}

// ---- gradient clipping (torch.nn.utils.clip_grad_norm_) -------------------------------------
// The gradients of params[0..n) that have one, all on one device; the norm and the scale through
// the backend, with no host wait unless error_if_nonfinite asks for the total on the host.

static tdm_tensor *clip_fail(tdm_tensor **grads, tdm_tensor *total) {
    free(grads);
    tdm_tensor_free(total);
    return NULL;
}

tdm_tensor *tdm_clip_grad_norm_(tdm_tensor *const *params, int n, double max_norm,
                                double norm_type, bool error_if_nonfinite) {
    const char *op = "clip_grad_norm_";
    TDM_PROFILE_OP(op, n > 0 && params ? params[0] : NULL);
    if (n < 0 || (n > 0 && !params)) {
        tdm_error_set(TDM_ERR_ARG, "%s: invalid parameter list (n = %d)", op, n);
        return NULL;
    }
    if (!(max_norm >= 0)) {
        tdm_error_set(TDM_ERR_ARG, "%s: max_norm must be >= 0, got %g", op, max_norm);
        return NULL;
    }
    if (!(norm_type > 0)) {   // NaN, 0 and negative orders (-inf among them)
        tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: norm_type %g is not supported (a finite p > 0, "
                      "or INFINITY)", op, norm_type);
        return NULL;
    }
    tdm_tensor **grads = malloc((size_t)(n ? n : 1) * sizeof *grads);
    if (!grads) {
        tdm_error_set(TDM_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (tdm_check_tensor(op, "parameter", params[i]) != TDM_OK) return clip_fail(grads, NULL);
        tdm_tensor *g = params[i]->grad;
        if (!g) continue;   // skipped, as in PyTorch
        if (k && (g->device.type != grads[0]->device.type ||
                  g->device.index != grads[0]->device.index)) {
            char a[32], b[32];
            tdm_error_set(TDM_ERR_DEVICE, "%s: the gradients are on more than one device (%s, "
                          "%s): give each device's parameters in a call of their own", op,
                          tdm_device_str(grads[0]->device, a, sizeof a),
                          tdm_device_str(g->device, b, sizeof b));
            return clip_fail(grads, NULL);
        }
        grads[k++] = g;
    }
    const tdm_device dev = k ? grads[0]->device : n ? params[0]->device : TDM_CPU;
    if (!k) {   // nothing to clip: a zero total, as PyTorch's torch.tensor(0.)
        free(grads);
        return tdm_tensor_zeros(0, NULL, TDM_DTYPE_F32, dev);
    }
    if (error_if_nonfinite && tdm_graph_is_capturing(dev)) {
        tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: cannot be captured in a CUDA graph with "
                      "error_if_nonfinite (it reads the total norm on the host); pass false", op);
        return clip_fail(grads, NULL);
    }
    const struct tdm_backend_ops *be = tdm_backend_of(grads[0]);
    if (!be->grad_norm || !be->grad_clip_scale) {
        tdm_error_unsupported(op, be);
        return clip_fail(grads, NULL);
    }
    tdm_tensor *total = tdm_tensor_empty(0, NULL, TDM_DTYPE_F32, dev);
    if (!total || be->grad_norm((const tdm_tensor *const *)grads, k, norm_type, total) != TDM_OK)
        return clip_fail(grads, total);
    if (error_if_nonfinite) {   // the host wait PyTorch's check makes too
        double t = 0;
        if (tdm_tensor_to_host_f64(total, &t) != TDM_OK) return clip_fail(grads, total);
        if (!isfinite(t)) {
            tdm_error_set(TDM_ERR_ARG, "%s: the total norm of order %g of the gradients is %s, "
                          "so they cannot be clipped (error_if_nonfinite: pass false to scale "
                          "them by the non-finite norm anyway)", op, norm_type,
                          isnan(t) ? "nan" : "inf");
            return clip_fail(grads, total);
        }
    }
    if (be->grad_clip_scale(grads, k, max_norm, total) != TDM_OK) return clip_fail(grads, total);
    free(grads);
    return total;
}

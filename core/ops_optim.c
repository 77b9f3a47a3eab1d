/* ops_optim.c — the optimizer updates (sgd_step, adam_step), in place: argument checks and the
 * call through the backend table. The hyperparameter checks are torch.optim's. */
#include "core/graph_impl.h"
#include "core/profile_impl.h"

// A state tensor `t` beside param: same device, dtype and shape, exactly.
static tdm_status check_like(const char *op, const char *arg, const tdm_tensor *param,
                             const tdm_tensor *t) {
    TDM_TRY(tdm_check_tensor(op, arg, t));
    TDM_TRY(tdm_check_same_device(op, param, t));
    if (t->dtype != param->dtype)
        return tdm_error_set(TDM_ERR_DTYPE, "%s: param has dtype %s but %s has dtype %s", op,
                             tdm_dtype_name(param->dtype), arg, tdm_dtype_name(t->dtype));
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

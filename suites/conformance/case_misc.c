/* case_misc.c — the case-runner entries of the misc group: layer_norm, batch_norm, embedding,
 * sgd_step, adam_step, adamw_step, clip_grad_norm_ (docs/CASE_FORMAT.md gives their inputs,
 * attrs and outputs).
 * Each parses its attrs (PyTorch's defaults), runs the public op on the case's inputs, and when
 * there is a grad_output runs the backward, putting gradients at their input's position. The
 * Adam steps also run as a multi-tensor (fused) step, which must give the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"
#include "core/optim_impl.h"
#include "core/tensor_impl.h"

// ---- helpers ------------------------------------------------------------------------------

// A required input.
static tdm_status need(const tdm_case *c, tdm_tensor *const *in, int k, const char *name) {
    if (in[k]) return TDM_OK;
    return tdm_error_set(TDM_ERR_FORMAT, "%s: input.%d (%s) is required", c->op, k, name);
}

// An attr PyTorch allows but tandem does not implement: it must take the value `ok`.
static tdm_status bool_must_be(const tdm_case *c, const char *name, bool ok) {
    bool v;
    TDM_TRY(tdm_attr_bool(c, name, ok, &v));
    if (v != ok)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: %s=%s is not supported", c->op, name,
                             v ? "true" : "false");
    return TDM_OK;
}

// An attr given as null, where PyTorch's null means something tandem does not do.
static tdm_status not_null(const tdm_case *c, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->attrs, name);
    if (v && cJSON_IsNull(v))
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr '%s' must be a number, not null", c->op,
                             name);
    return TDM_OK;
}

static bool is_float(const tdm_tensor *t) { return t && tdm_dtype_is_float(tdm_tensor_dtype(t)); }

// ---- layer_norm: input, weight?, bias?; normalized_shape (required), eps 1e-5 -------------

static tdm_status run_layer_norm(const tdm_case *c, tdm_tensor *const *in,
                                 const tdm_tensor *grad_output, tdm_case_result *r) {
    TDM_TRY(need(c, in, 0, "input"));
    int ns[TDM_MAX_DIMS], nn;
    double eps;
    TDM_TRY(tdm_attr_int_list(c, "normalized_shape", TDM_MAX_DIMS, ns, &nn));
    TDM_TRY(tdm_attr_double(c, "eps", 1e-5, &eps));
    TDM_TRY(not_null(c, "eps"));
    const tdm_tensor *x = in[0];
    int nd = tdm_tensor_ndim(x);
    const int64_t *xs = tdm_tensor_shape(x);
    if (nn == 0)
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr 'normalized_shape' is required and must "
                             "have at least one dim", c->op);
    bool match = nn <= nd;
    for (int i = 0; match && i < nn; i++) match = ns[i] == xs[nd - nn + i];
    if (!match) {
        int64_t s64[TDM_MAX_DIMS];
        for (int i = 0; i < nn; i++) s64[i] = ns[i];
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: normalized_shape %s does not match the trailing dims of input %s",
                             c->op, tdm_shape_str(nn, s64, a, sizeof a),
                             tdm_shape_str(nd, xs, b, sizeof b));
    }
    tdm_tensor *mean = NULL, *rstd = NULL;
    bool bwd = grad_output != NULL;
    r->output[0] = tdm_layer_norm(x, nn, in[1], in[2], eps, bwd ? &mean : NULL,
                                  bwd ? &rstd : NULL);
    if (!r->output[0]) return tdm_last_status();
    tdm_status s = TDM_OK;
    if (bwd)
        s = tdm_layer_norm_backward(grad_output, x, nn, in[1], mean, rstd, &r->grad_input[0],
                                    is_float(in[1]) ? &r->grad_input[1] : NULL,
                                    is_float(in[2]) ? &r->grad_input[2] : NULL);
    tdm_tensor_free(mean);
    tdm_tensor_free(rstd);
    return s;
}

// ---- batch_norm: input, running_mean?, running_var?, weight?, bias?;
//      training false, momentum 0.1, eps 1e-5 ---------------------------------------------------

static tdm_status run_batch_norm(const tdm_case *c, tdm_tensor *const *in,
                                 const tdm_tensor *grad_output, tdm_case_result *r) {
    TDM_TRY(need(c, in, 0, "input"));
    bool training;
    double momentum, eps;
    TDM_TRY(tdm_attr_bool(c, "training", false, &training));
    TDM_TRY(tdm_attr_double(c, "momentum", 0.1, &momentum));
    TDM_TRY(tdm_attr_double(c, "eps", 1e-5, &eps));
    TDM_TRY(not_null(c, "momentum"));   // null (a cumulative average) is not implemented
    TDM_TRY(not_null(c, "eps"));
    // The running statistics are updated in place: work on clones (the inputs are shared).
    tdm_tensor *rm = NULL, *rv = NULL;
    if (in[1] && !(rm = tdm_tensor_clone(in[1]))) return tdm_last_status();
    if (in[2] && !(rv = tdm_tensor_clone(in[2]))) {
        tdm_tensor_free(rm);
        return tdm_last_status();
    }
    tdm_tensor *sm = NULL, *si = NULL;
    bool bwd = grad_output != NULL;
    r->output[0] = tdm_batch_norm(in[0], rm, rv, in[3], in[4], training, momentum, eps,
                                  bwd ? &sm : NULL, bwd ? &si : NULL);
    tdm_status s = r->output[0] ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && training) {   // the updated running statistics
        r->output[1] = rm;
        r->output[2] = rv;
        rm = rv = NULL;
    }
    if (s == TDM_OK && bwd)
        s = tdm_batch_norm_backward(grad_output, in[0], in[3], sm, si, training,
                                    &r->grad_input[0], is_float(in[3]) ? &r->grad_input[3] : NULL,
                                    is_float(in[4]) ? &r->grad_input[4] : NULL);
    tdm_tensor_free(rm);
    tdm_tensor_free(rv);
    tdm_tensor_free(sm);
    tdm_tensor_free(si);
    return s;
}

// ---- embedding: input (indices), weight; padding_idx null, max_norm null,
//      scale_grad_by_freq false, sparse false ---------------------------------------------------

static tdm_status run_embedding(const tdm_case *c, tdm_tensor *const *in,
                                const tdm_tensor *grad_output, tdm_case_result *r) {
    TDM_TRY(need(c, in, 0, "input"));
    TDM_TRY(need(c, in, 1, "weight"));
    int64_t pad = TDM_EMBEDDING_NO_PADDING;
    if (tdm_attr_present(c, "padding_idx")) TDM_TRY(tdm_attr_int(c, "padding_idx", 0, &pad));
    if (tdm_attr_present(c, "max_norm"))
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: max_norm is not supported (must be null)",
                             c->op);
    TDM_TRY(bool_must_be(c, "scale_grad_by_freq", false));
    TDM_TRY(bool_must_be(c, "sparse", false));
    r->output[0] = tdm_embedding(in[0], in[1], pad);
    if (!r->output[0]) return tdm_last_status();
    if (grad_output && is_float(in[1]))
        return tdm_embedding_backward(grad_output, in[0], in[1], pad, &r->grad_input[1]);
    return TDM_OK;
}

// ---- sgd_step: param, grad, momentum_buffer?; lr (required), momentum 0, dampening 0,
//      weight_decay 0, nesterov false, maximize false ------------------------------------------

static tdm_status run_sgd_step(const tdm_case *c, tdm_tensor *const *in,
                               const tdm_tensor *grad_output, tdm_case_result *r) {
    (void)grad_output;   // no backward
    TDM_TRY(need(c, in, 0, "param"));
    TDM_TRY(need(c, in, 1, "grad"));
    if (!tdm_attr_present(c, "lr"))
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr 'lr' is required", c->op);
    tdm_sgd_params p = {0};
    TDM_TRY(tdm_attr_double(c, "lr", 0, &p.lr));
    TDM_TRY(tdm_attr_double(c, "momentum", 0, &p.momentum));
    TDM_TRY(tdm_attr_double(c, "dampening", 0, &p.dampening));
    TDM_TRY(tdm_attr_double(c, "weight_decay", 0, &p.weight_decay));
    TDM_TRY(tdm_attr_bool(c, "nesterov", false, &p.nesterov));
    TDM_TRY(tdm_attr_bool(c, "maximize", false, &p.maximize));
    // In place: step clones. Without a buffer, the first step starts one (uninitialized).
    tdm_tensor *param = tdm_tensor_clone(in[0]), *buf = NULL;
    if (!param) return tdm_last_status();
    r->output[0] = param;
    bool initialized = in[2] != NULL;
    if (p.momentum != 0) {
        buf = initialized ? tdm_tensor_clone(in[2])
                          : tdm_tensor_zeros(tdm_tensor_ndim(param), tdm_tensor_shape(param),
                                             tdm_tensor_dtype(param), tdm_tensor_device(param));
        if (!buf) return tdm_last_status();
        r->output[1] = buf;
    }
    return tdm_sgd_step(param, in[1], buf, initialized, &p);
}

// ---- adam_step, adamw_step: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only);
//      lr 1e-3, betas [0.9, 0.999], eps 1e-8, weight_decay 0 (adam) / 1e-2 (adamw), step
//      (required), amsgrad false, maximize false; outputs param, exp_avg, exp_avg_sq,
//      max_exp_avg_sq (amsgrad only) ----------------------------------------------------------

static tdm_status attr_betas(const tdm_case *c, double *b1, double *b2) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->attrs, "betas");
    *b1 = 0.9;
    *b2 = 0.999;
    if (!v) return TDM_OK;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 ||
        !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(v, 1)))
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr 'betas' must be a list of two numbers",
                             c->op);
    *b1 = cJSON_GetArrayItem(v, 0)->valuedouble;
    *b2 = cJSON_GetArrayItem(v, 1)->valuedouble;
    return TDM_OK;
}

// The same step as one item of the multi-tensor step (tdm_optimizer_step's fused path,
// core/optim_impl.h) on fresh clones: its outputs must be the per-tensor step's bit for bit (the
// fused path's contract), whatever the bound would allow.
static tdm_status adam_fused_same(const tdm_case *c, tdm_tensor *const *in, int64_t step,
                                  const tdm_adam_params *p, const tdm_case_result *r) {
    const int from[4] = {0, 2, 3, 4}, n = p->amsgrad ? 4 : 3;
    tdm_tensor *t[4] = {NULL, NULL, NULL, NULL};
    tdm_status s = TDM_OK;
    for (int k = 0; k < n && s == TDM_OK; k++)
        if (!(t[k] = tdm_tensor_clone(in[from[k]]))) s = tdm_last_status();
    const tdm_adam_item it = {.param = t[0], .grad = in[1], .m = t[1], .v = t[2], .vmax = t[3],
                              .step = step, .lr = p->lr, .weight_decay = p->weight_decay};
    if (s == TDM_OK) s = tdm_adam_step_multi(&it, 1, p, NULL, 0);
    for (int k = 0; k < n && s == TDM_OK; k++) {
        const size_t nb = tdm_tensor_nbytes(t[k]);
        char *a = malloc(nb + 1), *b = malloc(nb + 1);
        if (!a || !b) s = tdm_error_set(TDM_ERR_OOM, "%s: out of memory", c->op);
        if (s == TDM_OK) s = tdm_tensor_to_host(t[k], a, nb);
        if (s == TDM_OK) s = tdm_tensor_to_host(r->output[k], b, nb);
        if (s == TDM_OK && memcmp(a, b, nb))
            s = tdm_error_set(TDM_ERR_ARG, "%s: output.%d of the multi-tensor (fused) step "
                              "differs from the per-tensor step's (they must agree bit for bit)",
                              c->op, k);
        free(a);
        free(b);
    }
    for (int k = 0; k < 4; k++) tdm_tensor_free(t[k]);
    return s;
}

static tdm_status run_adam(const tdm_case *c, tdm_tensor *const *in, bool adamw,
                           tdm_case_result *r) {
    TDM_TRY(need(c, in, 0, "param"));
    TDM_TRY(need(c, in, 1, "grad"));
    TDM_TRY(need(c, in, 2, "exp_avg"));
    TDM_TRY(need(c, in, 3, "exp_avg_sq"));
    if (!tdm_attr_present(c, "step"))
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr 'step' is required", c->op);
    tdm_adam_params p = {.decoupled_weight_decay = adamw};
    int64_t step;
    TDM_TRY(tdm_attr_int(c, "step", 0, &step));
    TDM_TRY(tdm_attr_double(c, "lr", 1e-3, &p.lr));
    TDM_TRY(attr_betas(c, &p.beta1, &p.beta2));
    TDM_TRY(tdm_attr_double(c, "eps", 1e-8, &p.eps));
    TDM_TRY(tdm_attr_double(c, "weight_decay", adamw ? 1e-2 : 0.0, &p.weight_decay));
    TDM_TRY(not_null(c, "lr"));
    TDM_TRY(not_null(c, "eps"));
    TDM_TRY(not_null(c, "weight_decay"));
    TDM_TRY(tdm_attr_bool(c, "amsgrad", false, &p.amsgrad));
    TDM_TRY(tdm_attr_bool(c, "maximize", false, &p.maximize));
    if (p.amsgrad) TDM_TRY(need(c, in, 4, "max_exp_avg_sq"));
    else if (in[4])
        return tdm_error_set(TDM_ERR_FORMAT, "%s: input.4 (max_exp_avg_sq) without amsgrad",
                             c->op);
    // In place: step clones of the param and the state (outputs 0, 1, 2[, 3] = inputs 0, 2,
    // 3[, 4]).
    const int from[4] = {0, 2, 3, 4};
    for (int k = 0; k < (p.amsgrad ? 4 : 3); k++)
        if (!(r->output[k] = tdm_tensor_clone(in[from[k]]))) return tdm_last_status();
    TDM_TRY(tdm_adam_step_amsgrad(r->output[0], in[1], r->output[1], r->output[2], r->output[3],
                                  step, &p));
    return adam_fused_same(c, in, step, &p, r);
}

static tdm_status run_adam_step(const tdm_case *c, tdm_tensor *const *in,
                                const tdm_tensor *grad_output, tdm_case_result *r) {
    (void)grad_output;   // no backward
    return run_adam(c, in, false, r);
}

static tdm_status run_adamw_step(const tdm_case *c, tdm_tensor *const *in,
                                 const tdm_tensor *grad_output, tdm_case_result *r) {
    (void)grad_output;   // no backward
    return run_adam(c, in, true, r);
}

// ---- clip_grad_norm_: the gradients of parameters 0..K-1 (an absent input.k: parameter k has no
//      gradient); max_norm (required), norm_type 2.0 (a number, or "inf" as PyTorch's float()
//      reads it), error_if_nonfinite false, foreach (any: the same result); outputs: total
//      norm, then output.k+1 = gradient k after clipping ------------------------------------------

static tdm_status attr_norm_type(const tdm_case *c, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->attrs, "norm_type");
    if (v && cJSON_IsString(v)) {   // "inf", "-inf", "infinity", as float() in Python
        char *end;
        *out = strtod(v->valuestring, &end);
        if (!v->valuestring[0] || *end || !isinf(*out))
            return tdm_error_set(TDM_ERR_FORMAT, "%s: attr 'norm_type' must be a number or "
                                 "\"inf\"", c->op);
        return TDM_OK;
    }
    return tdm_attr_double(c, "norm_type", 2.0, out);
}

static tdm_status run_clip_grad_norm(const tdm_case *c, tdm_tensor *const *in,
                                     const tdm_tensor *grad_output, tdm_case_result *r) {
    (void)grad_output;   // no backward
    TDM_TRY(need(c, in, 0, "gradient 0"));
    if (!tdm_attr_present(c, "max_norm"))
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr 'max_norm' is required", c->op);
    double max_norm, norm_type;
    bool nonfinite;
    TDM_TRY(tdm_attr_double(c, "max_norm", 0, &max_norm));
    TDM_TRY(attr_norm_type(c, &norm_type));
    TDM_TRY(tdm_attr_bool(c, "error_if_nonfinite", false, &nonfinite));
    const cJSON *fe = cJSON_GetObjectItemCaseSensitive(c->attrs, "foreach");
    if (fe && !cJSON_IsNull(fe) && !cJSON_IsBool(fe))
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr 'foreach' must be true, false or null",
                             c->op);
    // Parameters (zeros) holding clones of the gradients, which the op clips in place.
    const tdm_device dev = tdm_tensor_device(in[0]);
    tdm_tensor *params[TDM_CASE_MAX] = {0};
    int n = 0;
    tdm_status s = TDM_OK;
    for (int k = 0; k < TDM_CASE_MAX - 1 && s == TDM_OK; k++) {
        if (!in[k]) {   // a parameter without a gradient, unless no later input is present
            bool later = false;
            for (int j = k + 1; j < TDM_CASE_MAX; j++) later = later || in[j];
            if (!later) break;
            int64_t one = 1;
            params[n++] = tdm_tensor_zeros(1, &one, TDM_DTYPE_F32, dev);
            if (!params[n - 1]) s = tdm_last_status();
            continue;
        }
        if (!is_float(in[k])) {
            s = tdm_error_set(TDM_ERR_FORMAT, "%s: input.%d is not floating", c->op, k);
            break;
        }
        tdm_tensor *p = tdm_tensor_zeros(tdm_tensor_ndim(in[k]), tdm_tensor_shape(in[k]),
                                         tdm_tensor_dtype(in[k]), dev);
        tdm_tensor *g = p ? tdm_tensor_clone(in[k]) : NULL;
        params[n++] = p;
        if (!g || tdm_tensor_set_grad(p, g) != TDM_OK) s = tdm_last_status();
        r->output[k + 1] = g;
    }
    if (s == TDM_OK && in[TDM_CASE_MAX - 1])
        s = tdm_error_set(TDM_ERR_FORMAT, "%s: at most %d gradients (output.k+1 holds input.k)",
                          c->op, TDM_CASE_MAX - 1);
    if (s == TDM_OK && !(r->output[0] = tdm_clip_grad_norm_(params, n, max_norm, norm_type,
                                                            nonfinite)))
        s = tdm_last_status();
    for (int k = 0; k < n; k++) tdm_tensor_free(params[k]);
    return s;
}

// ---- the table ------------------------------------------------------------------------------

const tdm_case_op tdm_case_ops_misc[] = {
    {"layer_norm", run_layer_norm, "normalized_shape eps"},
    {"batch_norm", run_batch_norm, "training momentum eps"},
    {"embedding", run_embedding, "padding_idx max_norm norm_type scale_grad_by_freq sparse"},
    {"sgd_step", run_sgd_step, "lr momentum dampening weight_decay nesterov maximize"},
    {"adam_step", run_adam_step, "lr betas eps weight_decay step amsgrad maximize"},
    {"adamw_step", run_adamw_step, "lr betas eps weight_decay step amsgrad maximize"},
    {"clip_grad_norm_", run_clip_grad_norm, "max_norm norm_type error_if_nonfinite foreach"},
    {NULL, NULL, NULL},
};

/* autocast.c — automatic mixed precision (tandem/amp.h): the per-thread autocast state and the
 * policy the ops apply to their inputs at their start, as PyTorch's autocast does:
 *   lower:   linear, matmul, conv2d run in the autocast dtype (f16 or bf16);
 *   f32:     softmax, log_softmax, the losses, the norms, sum and mean run in f32;
 *   promote: add and mul run in the widest floating dtype of their two inputs.
 * f64 and integer tensors are never cast. The casts are tdm_tensor_to calls, which autograd
 * records, so the gradients of f32 master weights come back in f32. No cast cache: a weight used
 * twice in one region is cast twice (PyTorch caches the casts of leaves; same numbers). */
#include "core/autograd_impl.h"

static _Thread_local tdm_autocast_state autocast_state;   // zero: off

tdm_autocast_state tdm_autocast_get(void) { return autocast_state; }

tdm_autocast_state tdm_autocast_enter(tdm_dtype dtype) {
    tdm_autocast_state previous = autocast_state;
    if (dtype != TDM_DTYPE_F16 && dtype != TDM_DTYPE_BF16) {
        tdm_error_set(TDM_ERR_DTYPE, "autocast: dtype %s is not f16 or bf16; autocast unchanged",
                      (unsigned)dtype < TDM_DTYPE_COUNT ? tdm_dtype_name(dtype) : "(invalid)");
        return previous;
    }
    autocast_state.enabled = true;
    autocast_state.dtype = dtype;
    return previous;
}

void tdm_autocast_exit(tdm_autocast_state previous) { autocast_state = previous; }

// ---- the policy ----------------------------------------------------------------------------

// Floating and not f64: autocast may cast it (PyTorch's is_eligible).
static bool eligible(const tdm_tensor *t) {
    return t && tdm_dtype_is_float(t->dtype) && t->dtype != TDM_DTYPE_F64;
}

static int rank(tdm_dtype dt) {
    return dt == TDM_DTYPE_F64 ? 3 : dt == TDM_DTYPE_F32 ? 2 : 1;   // f16, bf16: 1
}

// PyTorch's promotion of two floating dtypes: the wider one; f16 with bf16 gives f32.
static tdm_dtype promote(tdm_dtype a, tdm_dtype b) {
    if (a == b) return a;
    if (rank(a) == rank(b)) return TDM_DTYPE_F32;
    return rank(a) > rank(b) ? a : b;
}

tdm_status tdm_autocast_apply(const char *op, tdm_autocast_policy policy, int n,
                              const tdm_tensor *const *inputs, tdm_autocast_args *out) {
    *out = (tdm_autocast_args){0};
    if (n > TDM_AUTOCAST_MAX_ARGS)
        return tdm_error_set(TDM_ERR_ARG, "%s: autocast of %d inputs (at most %d)", op, n,
                             TDM_AUTOCAST_MAX_ARGS);
    for (int i = 0; i < n; i++) out->in[i] = inputs[i];
    if (!autocast_state.enabled) return TDM_OK;

    tdm_dtype target[TDM_AUTOCAST_MAX_ARGS];
    for (int i = 0; i < n; i++) target[i] = inputs[i] ? inputs[i]->dtype : TDM_DTYPE_F32;
    switch (policy) {
    case TDM_AUTOCAST_LOWER:
        for (int i = 0; i < n; i++)
            if (eligible(inputs[i])) target[i] = autocast_state.dtype;
        break;
    case TDM_AUTOCAST_F32:
        for (int i = 0; i < n; i++)
            if (eligible(inputs[i])) target[i] = TDM_DTYPE_F32;
        break;
    case TDM_AUTOCAST_PROMOTE:   // two inputs, both floating, else the op reports the error
        if (n == 2 && inputs[0] && inputs[1] && tdm_dtype_is_float(inputs[0]->dtype) &&
            tdm_dtype_is_float(inputs[1]->dtype))
            target[0] = target[1] = promote(inputs[0]->dtype, inputs[1]->dtype);
        break;
    }
    for (int i = 0; i < n; i++) {
        if (!inputs[i] || inputs[i]->dtype == target[i]) continue;
        out->owned[i] = tdm_tensor_to(inputs[i], inputs[i]->device, target[i]);
        if (!out->owned[i]) {
            tdm_autocast_args_free(out);
            return tdm_last_status();
        }
        out->in[i] = out->owned[i];
    }
    return TDM_OK;
}

void tdm_autocast_args_free(tdm_autocast_args *a) {
    for (int i = 0; i < TDM_AUTOCAST_MAX_ARGS; i++) {
        tdm_tensor_free(a->owned[i]);
        a->owned[i] = NULL;
    }
}

/* optim_impl.h — core's multi-tensor Adam step (core/ops_optim.c), which tdm_optimizer_step
 * (core/optim.c) calls for a fused step (tdm_adam_params.fused, PyTorch's fused=True) and for
 * every step with f32 master weights. */
#ifndef TANDEM_CORE_OPTIM_IMPL_H
#define TANDEM_CORE_OPTIM_IMPL_H

#include "core/backend.h"

// One Adam/AdamW step over items[0..n), all on one device (backend.h's tdm_adam_item: each with
// its own step, lr and weight decay; p's other hyperparameters for all), checked as
// tdm_adam_step_amsgrad checks one tensor (m, v and vmax f32 beside a master; a master only beside
// an f16/bf16 param), then one call of the backend's adam_step_multi; without that slot, item by
// item through adam_step (adam_step_dev with coef), and master weights are TDM_ERR_UNSUPPORTED.
// coef: NULL for an eager step, or an f64 tensor on the device whose elements [at + 4 i, at + 4 i
// + 4) are item i's per-step values (backend.h's adam_step_dev layout), for a captured step.
tdm_status tdm_adam_step_multi(const tdm_adam_item *items, int n, const tdm_adam_params *p,
                               const tdm_tensor *coef, int64_t at);

#endif

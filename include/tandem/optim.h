/* optim.h — optimizers over a list of parameters, as torch.optim (SGD, Adam, AdamW with
 * PyTorch's formulas and defaults, stepping with the ops of ops.h; parameter groups with their
 * own lr and weight decay), gradient-norm clipping (torch.nn.utils.clip_grad_norm_), the
 * learning-rate schedule of nanoGPT (linear warm-up, cosine decay to a floor) and the gradient
 * scaler of mixed-precision training (torch.cuda.amp.GradScaler's algorithm and defaults). */
#ifndef TANDEM_OPTIM_H
#define TANDEM_OPTIM_H

#include "tandem/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_optimizer tdm_optimizer;

// The optimizer keeps references to the n parameters. Parameters without a gradient are skipped
// by step, as in PyTorch.
tdm_optimizer *tdm_optim_sgd(tdm_tensor *const *params, int n, const tdm_sgd_params *p);
// Adam (p->decoupled_weight_decay false) or AdamW (true).
// p->fused (PyTorch's AdamW(..., fused=True)): tdm_optimizer_step updates every parameter that
// has a gradient, of every group and dtype, in one call of the backend's multi-tensor step — on
// cuda one kernel launch (its table of tensors copied from pinned memory, no host wait), on the
// cpu a loop — instead of a call (launch) per parameter; the numbers are the unfused step's bit
// for bit (same formulas, same order, each parameter's own step count, lr and weight decay).
// Parameters on several devices: one call per device. A backend without the multi-tensor step
// takes the per-parameter path (same numbers).
// p->master_weights (llm.c's master weights, apex's O2): each f16/bf16 parameter gets an f32
// copy, made from it at its first step, and f32 exp_avg / exp_avg_sq / max_exp_avg_sq; the step
// updates the f32 copy and writes the parameter as that copy rounded to nearest even (updates
// smaller than half the parameter's ulp accumulate instead of vanishing). f32 and f64 parameters
// are stepped as without it. Saved as "state.<i>.master_param" (below). Fused or not, and under
// graph capture. Both options default to false, as PyTorch's.
tdm_optimizer *tdm_optim_adam(tdm_tensor *const *params, int n, const tdm_adam_params *p);
// Defaults: SGD lr required; Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0; AdamW wd 1e-2;
// maximize, amsgrad, fused and master_weights false (set them on the returned params).
tdm_adam_params tdm_adam_defaults(bool adamw);

// ---- parameter groups (torch.optim's param_groups) ----------------------------------------
// Each group has its own lr and weight_decay; NAN takes the optimizer's (p->lr, p->weight_decay).
// The other hyperparameters are the optimizer's. Parameters are numbered across the groups in
// order (group 0's first), as PyTorch's state_dict numbers them; a parameter in two groups is
// refused (TDM_ERR_ARG), as PyTorch refuses it. AdamW with weight decay on the matrices only, as
// nanoGPT's configure_optimizers: {dim >= 2 params, wd}, {the others (biases, norms), 0.0}.
// tdm_optim_sgd / tdm_optim_adam are one group of the optimizer's lr and weight_decay.
typedef struct {
    tdm_tensor *const *params;
    int n;
    double lr, weight_decay;   // NAN: the optimizer's
} tdm_param_group;

tdm_optimizer *tdm_optim_sgd_groups(const tdm_param_group *g, int n_groups,
                                    const tdm_sgd_params *p);
tdm_optimizer *tdm_optim_adam_groups(const tdm_param_group *g, int n_groups,
                                     const tdm_adam_params *p);
int tdm_optimizer_group_count(const tdm_optimizer *o);

// A step under CUDA graph capture reads each group's lr (and Adam's step count) on the device,
// written before each replay: tdm_optimizer_set_lr / set_group_lr between replays take effect at
// the next replay, as in eager steps.
tdm_status tdm_optimizer_step(tdm_optimizer *o);
void tdm_optimizer_zero_grad(tdm_optimizer *o);   // set_to_none, PyTorch's default
double tdm_optimizer_lr(const tdm_optimizer *o);   // group 0's
// Every group's lr (as nanoGPT's `for g in optimizer.param_groups: g['lr'] = lr`). An lr that is
// NaN or negative is refused: the lr stays, tdm_last_error() says why (so for the ones below).
void tdm_optimizer_set_lr(tdm_optimizer *o, double lr);
double tdm_optimizer_group_lr(const tdm_optimizer *o, int group);   // NAN for no such group
double tdm_optimizer_group_weight_decay(const tdm_optimizer *o, int group);
void tdm_optimizer_set_group_lr(tdm_optimizer *o, int group, double lr);
// The state (momentum buffers, exp_avg, exp_avg_sq, max_exp_avg_sq with amsgrad, master_param
// with master weights, step) under
// names "state.<i>.<key>", i the parameter's index, as safetensors (atomic), and the groups in
// the metadata "param_groups" (JSON: [{"params":[0,1],"lr":..,"weight_decay":..}, ...], as
// PyTorch's state_dict has them); load restores it for the same parameter list (an amsgrad
// optimizer refuses Adam state without max_exp_avg_sq; a state tensor whose dims differ from its
// parameter's, and a step that is not a whole number from 0 to 2^53, are refused: TDM_ERR_SHAPE,
// TDM_ERR_FORMAT, the state left as it was) and, when the file has param_groups, each group's lr
// and weight_decay (as PyTorch's load_state_dict) after checking that the groups hold the same
// parameters (TDM_ERR_FORMAT otherwise). Files without param_groups (single-group files written
// before groups existed) load their state and leave the lr as it is.
// With master weights, state saved without them (no master_param beside exp_avg) loads with each
// master made from its parameter's value at the load, as a first step makes it (so load the
// parameters first); a file's master_param is ignored by an optimizer without master weights,
// whose state is then rounded to the parameters' dtype (as PyTorch's load_state_dict casts it).
tdm_status tdm_optimizer_save(const tdm_optimizer *o, const char *path);
tdm_status tdm_optimizer_load(tdm_optimizer *o, const char *path);
void tdm_optimizer_free(tdm_optimizer *o);

// ---- gradient clipping -------------------------------------------------------------------------
// torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite): the norm of
// every gradient together (as one vector; params without a gradient are skipped), then each
// gradient *= min(max_norm / (total + 1e-6), 1) in place — always, with no host branch, as
// PyTorch's foreach path — and the total is returned, a 0-d f32 tensor on the gradients' device
// (the first parameter's device when none has a gradient: 0; the cpu for n == 0), new reference.
// norm_type: a finite p > 0 ((sum |g|^p)^(1/p); 2 and 1 the usual) or INFINITY (max |g|); 0 and
// negative orders are refused. The reduction runs on the device with f32 accumulation (f64 for
// f64 gradients; f16/bf16 gradients allowed, each scaled gradient rounded once to its dtype); all
// gradients on one device. error_if_nonfinite false: a NaN/inf total is not an error and reaches
// the gradients as in PyTorch (NaN total: every gradient NaN; inf: 0, and NaN where a gradient
// was inf). Neither waits for the device, so it can be captured in a CUDA graph.
// error_if_nonfinite true: the total is read on the host (a wait for the device; refused under
// capture) and a NaN/inf total is an error (NULL, TDM_ERR_ARG, the gradients untouched).
// max_norm must be >= 0 (NaN refused).
tdm_tensor *tdm_clip_grad_norm_(tdm_tensor *const *params, int n, double max_norm,
                                double norm_type, bool error_if_nonfinite);

// ---- learning-rate schedule --------------------------------------------------------------------
// Linear warm-up, then cosine decay to a floor: nanoGPT's get_lr (train.py, 2023 onwards), for a
// 0-based step `it`, in double:
//   it <  warmup_steps:               max_lr * (it + 1) / (warmup_steps + 1)
//   it >  decay_steps:                min_lr
//   otherwise: r = (it - warmup_steps) / (decay_steps - warmup_steps),
//              min_lr + 0.5 * (1 + cos(pi r)) * (max_lr - min_lr)
// (max_lr at it = warmup_steps, min_lr at it = decay_steps; decay_steps == warmup_steps gives
// min_lr from there, where nanoGPT would divide by zero). Older nanoGPT warmed up as
// max_lr * it / warmup_steps (lr 0 at step 0), llm.c as max_lr * (it + 1) / warmup_steps.
// warmup_steps, decay_steps and it >= 0, decay_steps >= warmup_steps, lrs finite and >= 0;
// otherwise NAN and tdm_last_error() says why.
typedef struct {
    double max_lr, min_lr;
    int64_t warmup_steps, decay_steps;
} tdm_lr_cosine;

double tdm_lr_cosine_at(const tdm_lr_cosine *s, int64_t step);

// ---- gradient scaler ---------------------------------------------------------------------------
typedef struct tdm_grad_scaler tdm_grad_scaler;

typedef struct {
    double init_scale;       // 65536
    double growth_factor;    // 2
    double backoff_factor;   // 0.5
    int growth_interval;     // 2000 clean steps
    bool enabled;
} tdm_grad_scaler_params;

tdm_grad_scaler_params tdm_grad_scaler_defaults(void);
tdm_grad_scaler *tdm_grad_scaler_new(const tdm_grad_scaler_params *p);
// loss * scale (recorded by autograd), to backward from.
tdm_tensor *tdm_grad_scaler_scale(tdm_grad_scaler *s, const tdm_tensor *loss);
// Unscales the optimizer's gradients in place and checks them for inf/NaN, now (PyTorch's
// scaler.unscale_(optimizer): before tdm_clip_grad_norm_, so that it clips the true gradients);
// at most once between two updates (a second call is TDM_ERR_ARG, as in PyTorch).
tdm_status tdm_grad_scaler_unscale_(tdm_grad_scaler *s, tdm_optimizer *o);
// Unscales the optimizer's gradients in place (unless unscale_ did since the last update),
// checks them for inf/NaN, and steps unless one was found. *skipped (optional) says whether the
// step was skipped.
tdm_status tdm_grad_scaler_step(tdm_grad_scaler *s, tdm_optimizer *o, bool *skipped);
// Backoff after a skipped step; growth after growth_interval clean steps in a row.
void tdm_grad_scaler_update(tdm_grad_scaler *s);
double tdm_grad_scaler_get_scale(const tdm_grad_scaler *s);
// The optimizer's state with a gradient scaler's (PyTorch's checkpoint of optimizer.state_dict()
// and scaler.state_dict()): tdm_optimizer_save's file plus the metadata grad_scaler, a JSON
// object {scale, growth_factor, backoff_factor, growth_interval, _growth_tracker} as PyTorch
// names them. Loading checks the scaler's state and loads the optimizer's; the scaler (factors and
// interval included, as load_state_dict does) changes only when both succeeded. A file without
// grad_scaler is TDM_ERR_FORMAT; tdm_optimizer_load reads either kind of file.
tdm_status tdm_optimizer_save_with_scaler(const tdm_optimizer *o, const tdm_grad_scaler *s,
                                          const char *path);
tdm_status tdm_optimizer_load_with_scaler(tdm_optimizer *o, tdm_grad_scaler *s, const char *path);
void tdm_grad_scaler_free(tdm_grad_scaler *s);

#ifdef __cplusplus
}
#endif

#endif

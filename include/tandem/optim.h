/* optim.h — optimizers over a list of parameters, as torch.optim (SGD, Adam, AdamW with
 * PyTorch's formulas and defaults, stepping with the ops of ops.h), and the gradient scaler of
 * mixed-precision training (torch.cuda.amp.GradScaler's algorithm and defaults). */
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
tdm_optimizer *tdm_optim_adam(tdm_tensor *const *params, int n, const tdm_adam_params *p);
// Defaults: SGD lr required; Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0; AdamW wd 1e-2;
// maximize and amsgrad false (set them on the returned params).
tdm_adam_params tdm_adam_defaults(bool adamw);

tdm_status tdm_optimizer_step(tdm_optimizer *o);
void tdm_optimizer_zero_grad(tdm_optimizer *o);   // set_to_none, PyTorch's default
double tdm_optimizer_lr(const tdm_optimizer *o);
void tdm_optimizer_set_lr(tdm_optimizer *o, double lr);
// The state (momentum buffers, exp_avg, exp_avg_sq, max_exp_avg_sq with amsgrad, step) under
// names "state.<i>.<key>", i the parameter's index, as safetensors (atomic); load restores it for
// the same parameter list (an amsgrad optimizer refuses Adam state without max_exp_avg_sq; a
// state tensor whose dims differ from its parameter's, and a step that is not a whole number
// from 0 to 2^53, are refused: TDM_ERR_SHAPE, TDM_ERR_FORMAT, the state left as it was).
tdm_status tdm_optimizer_save(const tdm_optimizer *o, const char *path);
tdm_status tdm_optimizer_load(tdm_optimizer *o, const char *path);
void tdm_optimizer_free(tdm_optimizer *o);

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
// Unscales the optimizer's gradients in place (once per step), checks them for inf/NaN, and
// steps unless one was found. *skipped (optional) says whether the step was skipped.
tdm_status tdm_grad_scaler_step(tdm_grad_scaler *s, tdm_optimizer *o, bool *skipped);
// Backoff after a skipped step; growth after growth_interval clean steps in a row.
void tdm_grad_scaler_update(tdm_grad_scaler *s);
double tdm_grad_scaler_get_scale(const tdm_grad_scaler *s);
void tdm_grad_scaler_free(tdm_grad_scaler *s);

#ifdef __cplusplus
}
#endif

#endif

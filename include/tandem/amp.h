/* amp.h — autocast (automatic mixed precision), with PyTorch's op policy, per thread:
 *   lower precision (inputs cast to the autocast dtype, f16 or bf16): linear, matmul, conv2d;
 *   f32 (floating inputs cast up to f32): softmax, log_softmax, cross_entropy, mse_loss,
 *     layer_norm, batch_norm (input only; its params may stay f32), sum, mean;
 *   everything else runs in the widest dtype among its inputs (add, mul promote to match).
 * Casts are recorded by autograd, so gradients flow back to the f32 master weights in f32. */
#ifndef TANDEM_AMP_H
#define TANDEM_AMP_H

#include "tandem/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    bool enabled;
    tdm_dtype dtype;   // TDM_DTYPE_F16 or TDM_DTYPE_BF16
} tdm_autocast_state;

// Enters an autocast scope; returns the state to restore with tdm_autocast_exit.
tdm_autocast_state tdm_autocast_enter(tdm_dtype dtype);
void tdm_autocast_exit(tdm_autocast_state previous);
tdm_autocast_state tdm_autocast_get(void);

#ifdef __cplusplus
}
#endif

#endif

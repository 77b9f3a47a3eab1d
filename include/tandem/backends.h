/* backends.h — process-wide switches for how the backends compute, PyTorch's torch.backends flags:
 *   TF32 for matmul/linear (torch.backends.cuda.matmul.allow_tf32, default off) and for
 *   convolutions (torch.backends.cudnn.allow_tf32, default on); the convolution algorithm mode
 *   (heuristic = PyTorch's default, benchmark = cudnn.benchmark, deterministic =
 *   cudnn.deterministic). The reference backend computes in double whatever they say; the CUDA
 *   backend reads them at each call. */
#ifndef TANDEM_BACKENDS_H
#define TANDEM_BACKENDS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TDM_TF32_MATMUL = 0, TDM_TF32_CONV = 1 } tdm_tf32_scope;
void tdm_tf32_set_allowed(tdm_tf32_scope scope, bool allow);
bool tdm_tf32_allowed(tdm_tf32_scope scope);

typedef enum {
    TDM_CONV_ALGO_HEURISTIC = 0,     // the library's first heuristic choice
    TDM_CONV_ALGO_BENCHMARK = 1,     // every candidate timed once per shape/dtype/layout, winner cached
    TDM_CONV_ALGO_DETERMINISTIC = 2  // only algorithms with bit-reproducible results
} tdm_conv_algo_mode;
void tdm_conv_algo_mode_set(tdm_conv_algo_mode mode);
tdm_conv_algo_mode tdm_conv_algo_mode_get(void);
const char *tdm_conv_algo_mode_name(tdm_conv_algo_mode mode);   // "heuristic", ...

#ifdef __cplusplus
}
#endif

#endif

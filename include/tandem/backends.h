/* backends.h — process-wide switches for how the backends compute, PyTorch's torch.backends flags:
 *   TF32 for matmul/linear (torch.backends.cuda.matmul.allow_tf32, default off) and for
 *   convolutions (torch.backends.cudnn.allow_tf32, default on); the convolution algorithm mode
 *   (heuristic = PyTorch's default, benchmark = cudnn.benchmark, deterministic =
 *   cudnn.deterministic). The reference backend computes in double whatever they say; the CUDA
 *   backend reads them at each call. The environment sets their initial values (read once, before
 *   the first get or set; other values are ignored with a warning on stderr):
 *   TANDEM_TF32_MATMUL=0|1, TANDEM_TF32_CONV=0|1, TANDEM_CONV_ALGO=heuristic|benchmark|deterministic|direct,
 *   TANDEM_ATTN=heuristic|deterministic|conformance, TANDEM_FUSIONS=0|1. */
#ifndef TANDEM_BACKENDS_H
#define TANDEM_BACKENDS_H

#include <stdbool.h>
#include <stdint.h>

#include "tandem/tandem.h"   // tdm_status, tdm_device

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TDM_TF32_MATMUL = 0, TDM_TF32_CONV = 1 } tdm_tf32_scope;
void tdm_tf32_set_allowed(tdm_tf32_scope scope, bool allow);
bool tdm_tf32_allowed(tdm_tf32_scope scope);

typedef enum {
    TDM_CONV_ALGO_HEURISTIC = 0,     // the library's first heuristic choice
    TDM_CONV_ALGO_BENCHMARK = 1,     // every candidate timed once per shape/dtype/layout, winner cached
    TDM_CONV_ALGO_DETERMINISTIC = 2, // only algorithms with bit-reproducible results
    TDM_CONV_ALGO_DIRECT = 3         // tandem's own direct-summation kernels, no library (a
                                     // cross-check of cuDNN; slow). Also what any mode falls
                                     // back to where cuDNN has no engine for a configuration.
} tdm_conv_algo_mode;
void tdm_conv_algo_mode_set(tdm_conv_algo_mode mode);
tdm_conv_algo_mode tdm_conv_algo_mode_get(void);
const char *tdm_conv_algo_mode_name(tdm_conv_algo_mode mode);   // "heuristic", ...

// How scaled_dot_product_attention runs on a device whose backend has a fused kernel (the CUDA
// backend's FlashAttention-2, kernels/k_flash_attention.cu), chosen as convolutions' algorithms
// are. The reference backend has none: it always runs the plain loops.
typedef enum {
    TDM_ATTN_HEURISTIC = 0,      // fused where it applies (tdm_attn_fused_applies), else unfused:
                                 // PyTorch's default choice of SDPA backend; for f16/bf16 head
                                 // sizes up to 64 the fused backward adds gq up with f32 atomics
                                 // (one kernel less, no recomputed scores; its last bits vary run
                                 // to run); f32's fused backward is the deterministic one
    TDM_ATTN_DETERMINISTIC = 1,  // the same, with a bit-reproducible backward (torch's
                                 // use_deterministic_algorithms): gq in a kernel of its own, no
                                 // atomics
    TDM_ATTN_CONFORMANCE = 2     // never fused: q k^T materialized, the products on cuBLASLt in
                                 // f32 (the conformance reference of the fused path)
} tdm_attn_mode;
void tdm_attn_mode_set(tdm_attn_mode mode);
tdm_attn_mode tdm_attn_mode_get(void);
const char *tdm_attn_mode_name(tdm_attn_mode mode);   // "heuristic", "deterministic", ...
// Whether an attention with these settings on `device` runs fused in the current mode: its
// backend has the fused kernel, the mode is not conformance, q is f16, bf16 or f32 (f32: in full
// f32, never TF32; f64 is never fused), E and Ev are at most 256, there is no attn_mask
// (is_causal is fine) and no dropout.
bool tdm_attn_fused_applies(tdm_device device, tdm_dtype dtype, int64_t E, int64_t Ev,
                            bool has_mask, double dropout_p);
#define TDM_ATTN_FUSED_MAX_HEAD 256

// The transformer step's fusions outside attention and the optimizer: two that compute exactly
// what the ops they replace compute (the same values and roundings, checked bit for bit by their
// tests), the fused classifier (cross_entropy keeps its rows' softmax statistics for the
// backward) and the residual add fused into layer_norm (tdm_add_layer_norm); and one that rounds
// once less, within the ops' bound (docs/CONFORMANCE.md), the MLP's GELU in cuBLASLt's epilogues
// (tdm_linear_gelu_linear). On by default; off runs the ops one by one: the A/B of the
// transformer suite. The attention has its own mode above; Adam's `fused` is the optimizer's
// option, as PyTorch's. Environment: TANDEM_FUSIONS=0|1.
void tdm_fusions_set(bool on);
bool tdm_fusions_enabled(void);

// Which algorithm the last convolution of each pass used on a device, and what choosing it cost
// (PyTorch shows neither; the cudnn suite reports both). The three passes of conv2d:
typedef enum {
    TDM_CONV_PASS_FORWARD = 0,          // y from x and w
    TDM_CONV_PASS_BACKWARD_DATA = 1,    // gx from gy and w
    TDM_CONV_PASS_BACKWARD_FILTER = 2,  // gw from gy and x
    TDM_CONV_PASS_COUNT
} tdm_conv_pass;
const char *tdm_conv_pass_name(tdm_conv_pass pass);   // "forward", "backward_data", ...

typedef struct {
    tdm_conv_pass pass;
    tdm_conv_algo_mode mode;   // the mode the choice was made in
    char engine[96];           // "cudnn engine 1 (...notes)", "reference: direct loops"
    int64_t engine_id;         // the library's engine number (cuDNN's global index), -1 none
    double search_ms;          // host wall time the choice took when it was made: heuristics
                               // query, plan builds and, in benchmark mode, timing every
                               // candidate (it stays with the cached plan)
    int candidates;            // configurations considered (built; timed in benchmark mode)
    int64_t workspace_bytes;   // scratch memory the chosen plan uses (caching allocator)
    bool cached;               // the last call reused a cached plan (no search)
    bool tf32;                 // f32 data on an engine that may use TF32 tensor cores
} tdm_conv_algo_info;

// TDM_ERR_ARG when no convolution of that pass has run on the device yet; the reference backend
// answers "reference: direct loops" (nothing to choose).
tdm_status tdm_conv_algo_last(tdm_device device, tdm_conv_pass pass, tdm_conv_algo_info *out);
// Forgets the device's cached choices: the next convolution of every shape searches again.
tdm_status tdm_conv_algo_cache_clear(tdm_device device);

#ifdef __cplusplus
}
#endif

#endif

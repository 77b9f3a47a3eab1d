/* ops.h — the functional ops, forward and backward, named and ordered like PyTorch's
 * torch.nn.functional. Every op checks its inputs (same device, shapes, dtypes) and returns NULL
 * or a status on failure, with the reason in tdm_last_error().
 *
 * Dtypes: floating inputs of one op share a dtype (f32, f16, bf16 or f64); norm parameters and
 * running statistics may also be f32 beside f16/bf16 inputs, as under autocast. Outputs take the
 * input's dtype. Low-precision ops compute as autocast does on a GPU: inputs in their dtype,
 * accumulation in f32 or better, one rounding to the output dtype.
 *
 * Backward functions take the forward's inputs (and, where PyTorch's backward does, its output or
 * saved statistics) plus grad_output, and fill only the gradients whose out-pointer is non-NULL. */
#ifndef TANDEM_OPS_H
#define TANDEM_OPS_H

#include <math.h>   // NAN: TDM_SDPA_SCALE_DEFAULT

#include "tandem/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- matrix products -------------------------------------------------------------------
// x (..., in), weight (out, in), bias (out) or NULL -> (..., out)
tdm_tensor *tdm_linear(const tdm_tensor *x, const tdm_tensor *weight, const tdm_tensor *bias);
tdm_status tdm_linear_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *weight,
                               tdm_tensor **gx, tdm_tensor **gweight, tdm_tensor **gbias);
// An MLP with the tanh GELU (GPT-2's c_fc, gelu, c_proj): linear(gelu_tanh(linear(x, fc_weight,
// fc_bias)), proj_weight, proj_bias), x (..., in) -> (..., out). Recorded as the linear it starts
// with and a node for the GELU and the second linear. On a backend that fuses them (the CUDA
// backend's cuBLASLt GELU_AUX_BIAS and DGELU epilogues, llm.c's fusions; fusions on, one floating
// dtype after autocast, not f64) the GELU rides on the first product and its backward on the
// second's input gradient, with one rounding fewer each (docs/CONFORMANCE.md); the three ops
// otherwise.
tdm_tensor *tdm_linear_gelu_linear(const tdm_tensor *x, const tdm_tensor *fc_weight,
                                   const tdm_tensor *fc_bias, const tdm_tensor *proj_weight,
                                   const tdm_tensor *proj_bias);

// torch.matmul: (n,k)@(k,m) -> (n,m); a 1-D a is a row (1,k) and a 1-D b a column (k,1), the
// added dim dropped from the result ((k)@(k) is a scalar); dims before the last two are batch
// dims, broadcast: (j,1,n,k)@(l,k,m) -> (j,l,n,m), (B,n,k)@(k,m) -> (B,n,m). Up to 6 dims.
tdm_tensor *tdm_matmul(const tdm_tensor *a, const tdm_tensor *b);
tdm_status tdm_matmul_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                               tdm_tensor **ga, tdm_tensor **gb);

// ---- convolution and pooling -------------------------------------------------------------
// Where the channels are stored. NCHW is PyTorch's default (contiguous_format). NHWC is what
// PyTorch's torch.channels_last tensors hold in memory, as contiguous tensors of their own shape:
// x (N,H,W,C) or (H,W,C), weight (O,kh,kw,C/groups), y (N,H',W',O) — x.permute(0,2,3,1) of the
// NCHW tensors (tdm_tensor_permute converts). The math is the same in both; the CUDA backend
// gives cuDNN the NHWC strides, so its channels-last kernels run.
typedef enum { TDM_CONV_LAYOUT_NCHW = 0, TDM_CONV_LAYOUT_NHWC } tdm_conv_layout;

typedef struct {
    int stride[2], padding[2], dilation[2];   // padding: zeros before and after, per spatial dim
    int groups;
    tdm_conv_layout layout;   // of x, weight and y; bias is (O) in both
    int padding_extra[2];     // more zeros after (bottom, right) only: PyTorch's padding='same'
                              // with an odd d(k-1) pads the odd one there
} tdm_conv2d_params;
#define TDM_CONV2D_DEFAULT \
    ((tdm_conv2d_params){{1, 1}, {0, 0}, {1, 1}, 1, TDM_CONV_LAYOUT_NCHW, {0, 0}})
const char *tdm_conv_layout_name(tdm_conv_layout layout);   // "nchw", "nhwc"

// NCHW: x (N,C,H,W) or (C,H,W), weight (O,C/groups,kh,kw), bias (O) or NULL -> (N,O,H',W');
// NHWC: x (N,H,W,C) or (H,W,C), weight (O,kh,kw,C/groups), bias (O) or NULL -> (N,H',W',O)
tdm_tensor *tdm_conv2d(const tdm_tensor *x, const tdm_tensor *weight, const tdm_tensor *bias,
                       const tdm_conv2d_params *p);
tdm_status tdm_conv2d_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *weight,
                               const tdm_conv2d_params *p, tdm_tensor **gx, tdm_tensor **gweight,
                               tdm_tensor **gbias);

typedef struct {
    int kernel_size[2], stride[2], padding[2], dilation[2];
    bool ceil_mode;
    bool count_include_pad;   // avg only
    int divisor_override;     // avg only; 0 = none
} tdm_pool2d_params;

// x (N,C,H,W) or (C,H,W)
tdm_tensor *tdm_max_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p);
tdm_status tdm_max_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_pool2d_params *p, tdm_tensor **gx);
tdm_tensor *tdm_avg_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p);
tdm_status tdm_avg_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_pool2d_params *p, tdm_tensor **gx);

// ---- elementwise -----------------------------------------------------------------------
typedef enum {
    TDM_UNARY_RELU = 0,
    TDM_UNARY_GELU,        // exact: x * Phi(x)
    TDM_UNARY_GELU_TANH,   // approximate='tanh'
    TDM_UNARY_TANH,
    TDM_UNARY_SIGMOID,
} tdm_unary_op;

tdm_tensor *tdm_relu(const tdm_tensor *x);
tdm_tensor *tdm_gelu(const tdm_tensor *x, bool approximate_tanh);
tdm_tensor *tdm_tanh(const tdm_tensor *x);
tdm_tensor *tdm_sigmoid(const tdm_tensor *x);
tdm_tensor *tdm_unary(tdm_unary_op op, const tdm_tensor *x);
tdm_status tdm_unary_backward(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                              tdm_tensor **gx);

// Broadcasting as in PyTorch. add: a + alpha * b.
tdm_tensor *tdm_add(const tdm_tensor *a, const tdm_tensor *b, double alpha);
tdm_tensor *tdm_mul(const tdm_tensor *a, const tdm_tensor *b);
tdm_status tdm_add_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                            double alpha, tdm_tensor **ga, tdm_tensor **gb);
tdm_status tdm_mul_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                            tdm_tensor **ga, tdm_tensor **gb);

// A tensor and a Python number s: a + s, a - s, s - a, a * s, a / s, s / a (PyTorch's
// `other` a Scalar; torch.rsub; s / a is Tensor.__rtruediv__). Type promotion as PyTorch's for a
// number: a floating a keeps its dtype (bf16 stays bf16), s taken in the op's compute dtype (f32
// for f32/f16/bf16, f64 for f64) and the result rounded once; an integer a (i32, i64) with a
// float s, or divided (true division), gives f32 (the default dtype); with an integer s
// (tdm_binary_scalar_int) add, sub, rsub and mul keep a's integer dtype (wrapping on overflow).
// bool tensors are refused (convert them first). Recorded for autograd; no autocast.
typedef enum {
    TDM_SCALAR_ADD = 0,   // a + s
    TDM_SCALAR_SUB,       // a - s
    TDM_SCALAR_RSUB,      // s - a
    TDM_SCALAR_MUL,       // a * s
    TDM_SCALAR_DIV,       // a / s
    TDM_SCALAR_RDIV,      // s / a
} tdm_scalar_op;
// s is a Python float (x + 2.0: an integer x gives f32).
tdm_tensor *tdm_add_scalar(const tdm_tensor *a, double s);
tdm_tensor *tdm_sub_scalar(const tdm_tensor *a, double s);
tdm_tensor *tdm_rsub_scalar(const tdm_tensor *a, double s);
tdm_tensor *tdm_mul_scalar(const tdm_tensor *a, double s);
tdm_tensor *tdm_div_scalar(const tdm_tensor *a, double s);
tdm_tensor *tdm_rdiv_scalar(const tdm_tensor *a, double s);
tdm_tensor *tdm_binary_scalar(tdm_scalar_op op, const tdm_tensor *a, double s);
// s is a Python int (x + 2: an integer x keeps its dtype, but for division).
tdm_tensor *tdm_binary_scalar_int(tdm_scalar_op op, const tdm_tensor *a, int64_t s);
// ga (a's shape and floating dtype; gy the same): gy, gy, -gy, gy s, gy / s, -s gy / a^2.
tdm_status tdm_binary_scalar_backward(tdm_scalar_op op, const tdm_tensor *gy,
                                      const tdm_tensor *a, double s, tdm_tensor **ga);

// ---- joining -----------------------------------------------------------------------------
// torch.cat(ts[0..n), dim): same number of dims and sizes but along dim; 1-D tensors of size 0
// are skipped (PyTorch's legacy rule) but take part in the dtype. Dtypes are promoted as
// PyTorch's (f16 with bf16 -> f32, an integer with a float -> the float, i32 with i64 -> i64,
// anything with f64 -> f64, bool with another dtype -> that dtype, as 0 and 1). Each input's
// gradient is its slice of the output's, back in the input's dtype.
tdm_tensor *tdm_cat(tdm_tensor *const *ts, int n, int dim);
// torch.stack(ts, dim): equal shapes, a new dim at `dim` (in [-(ndim+1), ndim]); dtypes as cat.
tdm_tensor *tdm_stack(tdm_tensor *const *ts, int n, int dim);

// Dropout from the counter-based generator: keep element i iff u_i < 1 - p, scale by 1/(1-p).
tdm_tensor *tdm_dropout(const tdm_tensor *x, double p, bool training, uint64_t seed,
                        uint64_t offset);
tdm_status tdm_dropout_backward(const tdm_tensor *gy, double p, bool training, uint64_t seed,
                                uint64_t offset, tdm_tensor **gx);
// tdm_dropout with g's seed and offset; training moves g's offset on by one (tensor.h: also under
// CUDA graph capture, where the explicit form is refused). The backward redraws the same mask.
tdm_tensor *tdm_generator_dropout(tdm_generator *g, const tdm_tensor *x, double p, bool training);

// ---- reductions --------------------------------------------------------------------------
// dims: `ndims` dims (negative counts from the end); ndims == 0 reduces over all dims.
tdm_tensor *tdm_sum(const tdm_tensor *x, int ndims, const int *dims, bool keepdim);
tdm_tensor *tdm_mean(const tdm_tensor *x, int ndims, const int *dims, bool keepdim);
tdm_status tdm_sum_backward(const tdm_tensor *gy, const tdm_tensor *x, int ndims, const int *dims,
                            bool keepdim, tdm_tensor **gx);
tdm_status tdm_mean_backward(const tdm_tensor *gy, const tdm_tensor *x, int ndims,
                             const int *dims, bool keepdim, tdm_tensor **gx);

// ---- softmax and losses -----------------------------------------------------------------
tdm_tensor *tdm_softmax(const tdm_tensor *x, int dim);
tdm_tensor *tdm_log_softmax(const tdm_tensor *x, int dim);
// PyTorch's backward takes the forward output y.
tdm_status tdm_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim,
                                tdm_tensor **gx);
tdm_status tdm_log_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim,
                                    tdm_tensor **gx);

typedef enum { TDM_REDUCTION_NONE = 0, TDM_REDUCTION_MEAN, TDM_REDUCTION_SUM } tdm_reduction;
tdm_status tdm_reduction_parse(const char *s, tdm_reduction *out);

// F.cross_entropy. logits (N,C), (C) or (N,C,d1..dk); target class indices (N), () or
// (N,d1..dk), int64 (int32 accepted), or class probabilities of the logits' shape and dtype.
// -> scalar (mean|sum) or the target's shape without the classes (none). With w the weight (1s
// without one), per sample: loss = (1-eps) w_t (-log p_t) + eps/C sum_c w_c (-log p_c) for a
// class t (0 when t == ignore_index), or sum_c w_c ((1-eps) q_c + eps/C) (-log p_c) for
// probabilities q (ignore_index must be negative); mean divides the sum by sum of w_t over the
// samples not ignored (indices) or by the number of samples (probabilities).
tdm_tensor *tdm_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                              tdm_reduction reduction, double label_smoothing,
                              int64_t ignore_index);
tdm_status tdm_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                      const tdm_tensor *target, tdm_reduction reduction,
                                      double label_smoothing, int64_t ignore_index,
                                      tdm_tensor **glogits);
// The same with a per-class weight (C) (NULL: none), F.cross_entropy's `weight`. The gradient
// is the logits' only.
tdm_tensor *tdm_cross_entropy_weighted(const tdm_tensor *logits, const tdm_tensor *target,
                                       const tdm_tensor *weight, tdm_reduction reduction,
                                       double label_smoothing, int64_t ignore_index);
tdm_status tdm_cross_entropy_weighted_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                               const tdm_tensor *target, const tdm_tensor *weight,
                                               tdm_reduction reduction, double label_smoothing,
                                               int64_t ignore_index, tdm_tensor **glogits);

tdm_tensor *tdm_mse_loss(const tdm_tensor *input, const tdm_tensor *target,
                         tdm_reduction reduction);
tdm_status tdm_mse_loss_backward(const tdm_tensor *gloss, const tdm_tensor *input,
                                 const tdm_tensor *target, tdm_reduction reduction,
                                 tdm_tensor **ginput, tdm_tensor **gtarget);

// ---- attention -------------------------------------------------------------------------------
// F.scaled_dot_product_attention (PyTorch 2.x). q (...,L,E), k (...,S,E), v (...,S,Ev) ->
// (...,L,Ev); the leading dims broadcast as torch.matmul's (2 to 6 dims each). attn_mask NULL,
// TDM_DTYPE_BOOL (true = takes part) or floating (q's dtype or f32: added to the scores),
// broadcastable to (...,L,S) of the result's leading dims. scale: TDM_SDPA_SCALE_DEFAULT (NAN) =
// 1/sqrt(E). is_causal: tril(ones(L,S)) as PyTorch builds it (top-left aligned: query i sees keys
// j <= i, also when L != S); with an attn_mask it is an error, as in PyTorch. dropout_p in [0,1]:
// > 0 drops attention weights drawn from g (required then; g's offset moves on by one), the mask
// of tdm_dropout over the weights (...,L,S) at g's (seed, offset) (CASE_FORMAT.md), so the
// backward redraws it; 0 leaves g alone (it may be NULL).
//     weights = softmax(scale q k^T + mask) -> dropout -> @ v
// A row whose scores are all -inf (every key masked out) gives weights of 0, so that query's
// output and gradients are 0, as PyTorch 2.5+ (its math backend's _safe_softmax; 2.11 on the GPU
// alike); PyTorch before 2.5 gave NaN. E = 0 gives scores of 0 (the mask alone). Autocast: the
// lower precision (q, k, v and a floating mask cast), as PyTorch's CUDA autocast. Accumulation
// in f32 (f64 for f64) with one rounding to the output dtype; products without TF32.
#define TDM_SDPA_SCALE_DEFAULT NAN
tdm_tensor *tdm_scaled_dot_product_attention(const tdm_tensor *q, const tdm_tensor *k,
                                             const tdm_tensor *v, const tdm_tensor *attn_mask,
                                             double dropout_p, bool is_causal, double scale,
                                             tdm_generator *g);
// The gradients of q, k, v and of a floating attn_mask (gmask: NULL for a bool mask or none;
// its shape is the mask's). seed, offset: the forward's draw (g's seed and offset before the
// call; ignored without dropout). Autograd records the forward and calls this.
tdm_status tdm_scaled_dot_product_attention_backward(
    const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
    const tdm_tensor *attn_mask, double dropout_p, bool is_causal, double scale, uint64_t seed,
    uint64_t offset, tdm_tensor **gq, tdm_tensor **gk, tdm_tensor **gv, tdm_tensor **gmask);

// ---- normalization -----------------------------------------------------------------------
// Normalizes over the last `normalized_ndim` dims. weight/bias (normalized shape) or NULL.
// mean_out/rstd_out (optional): the saved statistics, f32 (f64 for an f64 x), shape = the
// leading dims. The backward takes them back; NULL recomputes them with eps 1e-5.
tdm_tensor *tdm_layer_norm(const tdm_tensor *x, int normalized_ndim, const tdm_tensor *weight,
                           const tdm_tensor *bias, double eps, tdm_tensor **mean_out,
                           tdm_tensor **rstd_out);
// A transformer block's residual add and the next layer_norm: *sum_out = x + res, and the
// result is layer_norm(*sum_out) (mean/rstd not returned). Recorded as the add and the layer_norm
// it is, with their values; one pass on a backend that fuses them (the CUDA backend's
// add_layer_norm: x's dtype at least res's, equal shapes, and under autocast f32 x, weight, bias),
// the two ops otherwise.
tdm_tensor *tdm_add_layer_norm(const tdm_tensor *x, const tdm_tensor *res, int normalized_ndim,
                               const tdm_tensor *weight, const tdm_tensor *bias, double eps,
                               tdm_tensor **sum_out);
tdm_status tdm_layer_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, int normalized_ndim,
                                   const tdm_tensor *weight, const tdm_tensor *mean,
                                   const tdm_tensor *rstd, tdm_tensor **gx, tdm_tensor **gweight,
                                   tdm_tensor **gbias);

// x (N,C,...). In training, batch statistics are used and running_mean/running_var (if given)
// are updated in place: r = (1-momentum) r + momentum * stat, with the unbiased variance.
// In eval, the running statistics are used (and required).
// save_mean/save_invstd (optional out, f32 (C), f64 for an f64 x): the statistics the output
// was normalized with.
tdm_tensor *tdm_batch_norm(const tdm_tensor *x, tdm_tensor *running_mean, tdm_tensor *running_var,
                           const tdm_tensor *weight, const tdm_tensor *bias, bool training,
                           double momentum, double eps, tdm_tensor **save_mean,
                           tdm_tensor **save_invstd);
// `training` says whether save_mean/save_invstd are batch statistics (their gradient flows).
tdm_status tdm_batch_norm_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_tensor *weight, const tdm_tensor *save_mean,
                                   const tdm_tensor *save_invstd, bool training, tdm_tensor **gx,
                                   tdm_tensor **gweight, tdm_tensor **gbias);

// ---- embedding -----------------------------------------------------------------------------
// indices int64 (any shape), weight (V,D) -> (..., D). padding_idx: the row whose gradient
// stays zero; negative values count from the end as in PyTorch; TDM_EMBEDDING_NO_PADDING for none.
#define TDM_EMBEDDING_NO_PADDING INT64_MIN
tdm_tensor *tdm_embedding(const tdm_tensor *indices, const tdm_tensor *weight,
                          int64_t padding_idx);
tdm_status tdm_embedding_backward(const tdm_tensor *gy, const tdm_tensor *indices,
                                  const tdm_tensor *weight, int64_t padding_idx,
                                  tdm_tensor **gweight);

// ---- optimizer updates (in place, torch.optim's single-tensor formulas) ---------------------
// Zero-initialised params are PyTorch's defaults for every flag (maximize, amsgrad false).
typedef struct {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool maximize;   // ascend: the gradient is negated first (before weight decay), as PyTorch
} tdm_sgd_params;

// momentum_buffer may be NULL when momentum == 0. *buffer_initialized says whether the buffer
// holds a previous step's value; when false (first step) it is set to the gradient, as PyTorch does.
tdm_status tdm_sgd_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *momentum_buffer,
                        bool buffer_initialized, const tdm_sgd_params *p);

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled_weight_decay;   // false: Adam (L2 into the gradient); true: AdamW
    bool amsgrad;    // normalise by max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq) (AMSGrad)
    bool maximize;   // ascend: the gradient is negated first (before weight decay), as PyTorch
    // Options of the optimizer object (tandem/optim.h), ignored by the single-tensor steps below:
    bool fused;            // one step over every parameter in one backend call (PyTorch's fused)
    bool master_weights;   // f32 master copies of f16/bf16 parameters (llm.c's master weights)
} tdm_adam_params;

// step is 1-based, counted after the increment (the first update has step 1). With p->amsgrad
// the update needs a max_exp_avg_sq buffer: use tdm_adam_step_amsgrad (this one refuses it).
tdm_status tdm_adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *exp_avg,
                         tdm_tensor *exp_avg_sq, int64_t step, const tdm_adam_params *p);
// tdm_adam_step with the AMSGrad state: max_exp_avg_sq (param's shape, dtype and device; zeros
// before the first step, as PyTorch creates it) is required when p->amsgrad and updated in place
// to max(max_exp_avg_sq, exp_avg_sq); without p->amsgrad it is ignored (may be NULL).
tdm_status tdm_adam_step_amsgrad(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *exp_avg,
                                 tdm_tensor *exp_avg_sq, tdm_tensor *max_exp_avg_sq,
                                 int64_t step, const tdm_adam_params *p);

#ifdef __cplusplus
}
#endif

#endif

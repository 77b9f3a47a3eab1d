/* cuda_kernels.h — the CUDA backend's compute: one launcher per slot of struct tdm_backend_ops
 * (core/backend.h), each in the kernels/k_*.cu file of its concern and each pairing a kernel
 * with the host code that sizes its grid. The launchers have the slots' signatures, so
 * kernels/cuda_backend.cu puts them straight into its table. Also the few host helpers every
 * launcher uses: the device of a call, the stream, the grid size, launch checks, scratch. */
#ifndef TANDEM_CUDA_KERNELS_H
#define TANDEM_CUDA_KERNELS_H

#include "kernels/cuda_check.h"
#include "kernels/cuda_stream.h"

// ---- host helpers (k_common.cu) ----------------------------------------------------------

// The stream every launch and async copy goes on: the calling thread's current stream on the
// current device (tandem/stream.h; the default stream unless one was set). Launchers call
// cuda_use_device first, so the current device is the tensor's.
static inline cudaStream_t cuda_stream_current(void) { return tdm_cuda_stream_here(); }

// The backend's launch_count slot: tdm_cuda_launches (kernels/cuda_check.h).
uint64_t tdm_cuda_launch_count(void);

// Makes t's device current (every launcher's first call).
tdm_status cuda_use_device(const tdm_tensor *t);

// Blocks for a grid-stride loop over `items` work items of `threads` threads each: enough to
// fill the current device (its SM count × resident blocks), never more than the work needs.
unsigned cuda_grid_blocks(int64_t items, int threads);
int cuda_sm_count(void);   // of the current device

// A launch's own errors (bad configuration) and any earlier asynchronous one, with file/line.
#define CUDA_LAUNCH_CHECK() tdm_cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// Scratch memory on t's device through the caching allocator (a tensor of n elements of dt,
// freed with tdm_tensor_free: stream-ordered, so freeing right after the launches that use it is
// safe). NULL + error when out of memory.
tdm_tensor *cuda_scratch(const tdm_tensor *like, int64_t n, tdm_dtype dt);

// Index validation on the device (cross_entropy targets, embedding indices) without a host
// wait: a kernel given a cuda_err_ref (cuda_err_ref_get) records the first bad value it meets in
// its device's error record (mapped pinned host memory, so recording needs no copy and reading it
// no synchronization); the host reads the record after it waits on that device anyway (a copy to
// the host, a stream, event or device synchronize: cuda_err_check) and reports there which op,
// which value and the bound, once. An op never synchronizes for its own checks; under graph
// capture the captured kernels record into the same place on every replay.
typedef enum {
    CUDA_ERR_NONE,
    CUDA_ERR_EMBEDDING,
    CUDA_ERR_EMBEDDING_BACKWARD,
    CUDA_ERR_CROSS_ENTROPY,
    CUDA_ERR_CROSS_ENTROPY_BACKWARD,
} cuda_err_op;
// The record's words. The host reads `raised` and, once it is set, the fields; a kernel claims
// the record through `claimed` and sets `raised` last (k_common.cuh: cuda_raise).
enum {
    CUDA_ERR_REC_RAISED,    // published: the fields are complete
    CUDA_ERR_REC_OP,        // cuda_err_op
    CUDA_ERR_REC_VALUE,     // the bad value
    CUDA_ERR_REC_BOUND,     // rows or classes
    CUDA_ERR_REC_AT,        // its position
    CUDA_ERR_REC_CLAIMED,   // a kernel is writing (or wrote) the fields
    CUDA_ERR_REC_WORDS
};
typedef struct {
    unsigned long long *rec;   // device view of the record (CUDA_ERR_REC_WORDS words)
    int op;                    // cuda_err_op
    long long bound;           // rows (embedding) or classes (cross_entropy)
} cuda_err_ref;
// The record of t's device (made on first use) for `op` checking values against `bound`.
tdm_status cuda_err_ref_get(const tdm_tensor *t, cuda_err_op op, int64_t bound, cuda_err_ref *out);
// After a host wait on `device`: a recorded error becomes this call's error (and is cleared).
tdm_status cuda_err_check(int device);

// ---- the slots ---------------------------------------------------------------------------
// k_elementwise.cu
tdm_status cuda_cast(tdm_tensor *dst, const tdm_tensor *src);
tdm_status cuda_counter_add(tdm_tensor *t, int64_t n);   // t (i64) += n
tdm_status cuda_unary(tdm_unary_op op, const tdm_tensor *x, tdm_tensor *y);
tdm_status cuda_unary_backward(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                               tdm_tensor *gx);
tdm_status cuda_binary(tdm_binary_op op, const tdm_tensor *a, const tdm_tensor *b, double alpha,
                       tdm_tensor *y);
tdm_status cuda_expand(const tdm_tensor *x, double scale, tdm_tensor *y);
tdm_status cuda_binary_scalar(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s,
                              tdm_tensor *y);
tdm_status cuda_binary_scalar_backward(tdm_scalar_op op, const tdm_tensor *gy,
                                       const tdm_tensor *a, const tdm_scalar *s, tdm_tensor *ga);
// k_view.cu
tdm_status cuda_copy_strided(tdm_tensor *dst, int64_t dst_off, const int64_t *dst_stride,
                             const tdm_tensor *src, int64_t src_off, const int64_t *src_stride,
                             int ndim, const int64_t *shape);
// dst (row-major, src's rank <= 4) = src at dst's origin, zero-filled past src's end in each dim,
// or cropped where dst is smaller: conv2d's explicit padding for padding_extra (conv_cudnn.cu).
tdm_status cuda_pad_crop(const tdm_tensor *src, tdm_tensor *dst);
// k_memtest.cu: the device memory test (the memtest slot)
tdm_status cuda_memtest(int device_index, const tdm_memtest_params *p, tdm_memtest_result *out);
// k_random.cu
tdm_status cuda_rand_uniform(tdm_tensor *t, uint64_t seed, uint64_t offset);
tdm_status cuda_rand_normal(tdm_tensor *t, uint64_t seed, uint64_t offset);
tdm_status cuda_dropout(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                        tdm_tensor *y);
// k_reduce.cu
tdm_status cuda_reduce(tdm_reduce_op op, const tdm_tensor *x, unsigned reduce_mask,
                       tdm_tensor *y);
tdm_status cuda_sum_to(const tdm_tensor *gy, double scale, tdm_tensor *gx);
// k_softmax_loss.cu
tdm_status cuda_softmax(const tdm_tensor *x, int dim, bool log, tdm_tensor *y);
tdm_status cuda_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim, bool log,
                                 tdm_tensor *gx);
tdm_status cuda_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                              const tdm_tensor *weight, tdm_reduction red, double smoothing,
                              int64_t ignore_index, tdm_tensor *loss);
tdm_status cuda_cross_entropy_stats(const tdm_tensor *logits, const tdm_tensor *target,
                                    const tdm_tensor *weight, tdm_reduction red, double smoothing,
                                    int64_t ignore_index, tdm_tensor *loss, tdm_tensor *stats);
tdm_status cuda_cross_entropy_backward_stats(const tdm_tensor *gloss, const tdm_tensor *logits,
                                             const tdm_tensor *target, const tdm_tensor *weight,
                                             tdm_reduction red, double smoothing,
                                             int64_t ignore_index, const tdm_tensor *stats,
                                             tdm_tensor *glogits);
tdm_status cuda_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                       const tdm_tensor *target, const tdm_tensor *weight,
                                       tdm_reduction red, double smoothing, int64_t ignore_index,
                                       tdm_tensor *glogits);
tdm_status cuda_mse_loss(const tdm_tensor *a, const tdm_tensor *b, tdm_reduction red,
                         tdm_tensor *loss);
tdm_status cuda_mse_loss_backward(const tdm_tensor *gloss, const tdm_tensor *a,
                                  const tdm_tensor *b, tdm_reduction red, tdm_tensor *ga,
                                  tdm_tensor *gb);
// k_attention.cu
tdm_status cuda_sdpa(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                     const tdm_tensor *mask, const tdm_sdpa_params *p, tdm_tensor *y);
// kernels/k_flash_attention.cu: the fused attention (FlashAttention-2 on the tensor cores; f32
// handed to k_flash_attention_f32.cu)
tdm_status cuda_sdpa_fused(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                           const tdm_sdpa_params *p, tdm_tensor *y, tdm_tensor *lse);
tdm_status cuda_sdpa_fused_backward(const tdm_tensor *gy, const tdm_tensor *q,
                                    const tdm_tensor *k, const tdm_tensor *v, const tdm_tensor *y,
                                    const tdm_tensor *lse, const tdm_sdpa_params *p,
                                    tdm_tensor *gq, tdm_tensor *gk, tdm_tensor *gv);
// kernels/k_flash_attention_f32.cu: its f32 operands (the same algorithm in f32 FMA)
tdm_status cuda_sdpa_fused_f32(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                               const tdm_sdpa_params *p, tdm_tensor *y, tdm_tensor *lse);
tdm_status cuda_sdpa_fused_backward_f32(const tdm_tensor *gy, const tdm_tensor *q,
                                        const tdm_tensor *k, const tdm_tensor *v,
                                        const tdm_tensor *y, const tdm_tensor *lse,
                                        const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                                        tdm_tensor *gv);
tdm_status cuda_sdpa_backward(const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k,
                              const tdm_tensor *v, const tdm_tensor *mask,
                              const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                              tdm_tensor *gv, tdm_tensor *gmask);
// k_norm.cu
tdm_status cuda_add_layer_norm(const tdm_tensor *x, const tdm_tensor *res, const tdm_tensor *w,
                               const tdm_tensor *b, double eps, tdm_tensor *sum, tdm_tensor *y,
                               tdm_tensor *mean, tdm_tensor *rstd);
tdm_status cuda_layer_norm(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                           double eps, tdm_tensor *y, tdm_tensor *mean, tdm_tensor *rstd);
tdm_status cuda_layer_norm_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_tensor *w, const tdm_tensor *mean,
                                    const tdm_tensor *rstd, tdm_tensor *gx, tdm_tensor *gw,
                                    tdm_tensor *gb);
tdm_status cuda_batch_norm(const tdm_tensor *x, tdm_tensor *running_mean,
                           tdm_tensor *running_var, const tdm_tensor *w, const tdm_tensor *b,
                           bool training, double momentum, double eps, tdm_tensor *y,
                           tdm_tensor *save_mean, tdm_tensor *save_invstd);
tdm_status cuda_batch_norm_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_tensor *w, const tdm_tensor *save_mean,
                                    const tdm_tensor *save_invstd, bool training, tdm_tensor *gx,
                                    tdm_tensor *gw, tdm_tensor *gb);
// k_pool.cu
tdm_status cuda_max_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y);
tdm_status cuda_max_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_pool2d_params *p, tdm_tensor *gx);
tdm_status cuda_avg_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y);
tdm_status cuda_avg_pool2d_backward(const tdm_tensor *gy, const tdm_pool2d_params *p,
                                    tdm_tensor *gx);
// k_conv_direct.cu: tandem's own convolution (conv_cudnn.cu's fallback and direct mode). pass 0
// forward (px, pw in; py out; bias or NULL), 1 backward data (py = gy, pw in; px = gx out), 2
// backward filter (px, py = gy in; pw = gw out); dims in (N,C,H,W) order, padding symmetric.
tdm_status cuda_conv_direct(int pass, tdm_dtype dt, const int64_t x[4], const int64_t w[4],
                            const int64_t y[4], const void *px, const void *pw, void *py,
                            const void *bias, const tdm_conv2d_params *p);
// k_embedding.cu
tdm_status cuda_embedding(const tdm_tensor *idx, const tdm_tensor *w, tdm_tensor *y);
tdm_status cuda_embedding_backward(const tdm_tensor *gy, const tdm_tensor *idx,
                                   int64_t padding_idx, tdm_tensor *gw);
// k_optim.cu
tdm_status cuda_sgd_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                         bool buf_initialized, const tdm_sgd_params *p);
tdm_status cuda_adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                          tdm_tensor *v, tdm_tensor *vmax, int64_t step, const tdm_adam_params *p);
tdm_status cuda_adam_step_multi(const tdm_adam_item *items, int n, const tdm_adam_params *p,
                                const double *coef);
tdm_status cuda_amp_unscale_check(tdm_tensor *const *grads, int n, double inv_scale,
                                  tdm_tensor *found_inf);
tdm_status cuda_grad_norm(const tdm_tensor *const *ts, int n, double norm_type,
                          tdm_tensor *total);
tdm_status cuda_grad_clip_scale(tdm_tensor *const *ts, int n, double max_norm,
                                const tdm_tensor *total);
// x (outer, c, inner) of x_dt summed over outer and inner into out (c) of dt (x_dt is dt, or f32
// beside f16/bf16), split and finished as kernels/reduce_plan.h says: bias gradients.
tdm_status cuda_sum_outer_inner(const void *x, tdm_dtype x_dt, void *out, tdm_dtype dt,
                                int64_t outer, int64_t c, int64_t inner);

#endif

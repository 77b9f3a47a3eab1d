/* ref.h — the CPU reference backend's internals. Every ref op reads its inputs as doubles,
 * computes in double with plain loops, and rounds once to the output dtype: an oracle at least as
 * accurate as any backend it judges (f16/bf16 inputs are exact in double; accumulation in double
 * is "f32 or better", as docs/CONFORMANCE.md requires).
 *
 * The pattern of every op:
 *     ref_arena A = {0};
 *     const double *X = ref_in(&A, x);      // NULL when x is NULL
 *     double *Y = ref_new(&A, y->numel);     // zeroed scratch
 *     if (A.failed) return ref_finish(&A);   // out of memory, error already set
 *     ... loops ...
 *     ref_store(&A, y, Y);                   // rounds to y's dtype
 *     return ref_finish(&A);                 // frees everything */
#ifndef TANDEM_REF_H
#define TANDEM_REF_H

#include "core/tensor_impl.h"

#define REF_ARENA_MAX 24

typedef struct {
    void *ptr[REF_ARENA_MAX];
    int n;
    bool failed;
} ref_arena;

const double *ref_in(ref_arena *a, const tdm_tensor *t);
double *ref_new(ref_arena *a, int64_t n);
void ref_store(ref_arena *a, tdm_tensor *t, const double *v);   // t NULL: nothing
tdm_status ref_finish(ref_arena *a);

// Element i of a tensor of integer indices (i32 or i64) in host memory.
int64_t ref_index(const tdm_tensor *t, int64_t i);

// ---- streams, events, host memory, copies (ref_stream.c): the cpu meanings ----
tdm_status ref_stream_new(int device_index, void **out);
void ref_stream_free(void *stream, int device_index);
tdm_status ref_stream_synchronize(void *stream, int device_index);
tdm_status ref_stream_wait_event(void *stream, void *event, int device_index);
tdm_status ref_set_current_stream(void *stream, int device_index);
tdm_status ref_device_synchronize(int device_index);
tdm_status ref_event_new(int device_index, void **out);
void ref_event_free(void *event, int device_index);
tdm_status ref_event_record(void *event, void *stream, int device_index);
tdm_status ref_event_synchronize(void *event, int device_index);
tdm_status ref_event_query(void *event, int device_index, bool *done);
tdm_status ref_event_elapsed_ms(void *start, void *end, int device_index, double *ms);
void *ref_host_alloc(size_t nbytes, tdm_host_kind kind, int device_index);
void ref_host_free(void *ptr, size_t nbytes, tdm_host_kind kind, int device_index);
tdm_status ref_host_stats(int device_index, tdm_host_memory_stats *out);
tdm_status ref_host_empty_cache(int device_index);
tdm_status ref_copy_async(void *dst, const void *src, size_t nbytes, tdm_copy_dir dir,
                          int device_index, int peer_index, void *stream);
tdm_status ref_copy_sm_async(void *dst, const void *src, size_t nbytes, int device_index,
                             void *stream);

// ---- the ops (ref_*.c), declared in the order of struct tdm_backend_ops ----
tdm_status ref_linear(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                      tdm_tensor *y);
tdm_status ref_linear_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                               tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb);
tdm_status ref_matmul(const tdm_tensor *a, const tdm_tensor *b, tdm_tensor *y);
tdm_status ref_matmul_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                               tdm_tensor *ga, tdm_tensor *gb);
tdm_status ref_conv2d(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                      const tdm_conv2d_params *p, tdm_tensor *y);
tdm_status ref_conv2d_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                               const tdm_conv2d_params *p, tdm_tensor *gx, tdm_tensor *gw,
                               tdm_tensor *gb);
tdm_status ref_max_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y);
tdm_status ref_max_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_pool2d_params *p, tdm_tensor *gx);
tdm_status ref_avg_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y);
tdm_status ref_avg_pool2d_backward(const tdm_tensor *gy, const tdm_pool2d_params *p,
                                   tdm_tensor *gx);
tdm_status ref_unary(tdm_unary_op op, const tdm_tensor *x, tdm_tensor *y);
tdm_status ref_unary_backward(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                              tdm_tensor *gx);
tdm_status ref_binary(tdm_binary_op op, const tdm_tensor *a, const tdm_tensor *b, double alpha,
                      tdm_tensor *y);
tdm_status ref_dropout(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                       tdm_tensor *y);
tdm_status ref_reduce(tdm_reduce_op op, const tdm_tensor *x, unsigned reduce_mask, tdm_tensor *y);
tdm_status ref_sum_to(const tdm_tensor *gy, double scale, tdm_tensor *gx);
tdm_status ref_expand(const tdm_tensor *x, double scale, tdm_tensor *y);
tdm_status ref_binary_scalar(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s,
                             tdm_tensor *y);
tdm_status ref_binary_scalar_backward(tdm_scalar_op op, const tdm_tensor *gy, const tdm_tensor *a,
                                      const tdm_scalar *s, tdm_tensor *ga);
tdm_status ref_copy_strided(tdm_tensor *dst, int64_t dst_off, const int64_t *dst_stride,
                            const tdm_tensor *src, int64_t src_off, const int64_t *src_stride,
                            int ndim, const int64_t *shape);
tdm_status ref_softmax(const tdm_tensor *x, int dim, bool log, tdm_tensor *y);
tdm_status ref_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim, bool log,
                                tdm_tensor *gx);
tdm_status ref_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                             const tdm_tensor *weight, tdm_reduction red, double smoothing,
                             int64_t ignore_index, tdm_tensor *loss);
tdm_status ref_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                      const tdm_tensor *target, const tdm_tensor *weight,
                                      tdm_reduction red, double smoothing, int64_t ignore_index,
                                      tdm_tensor *glogits);
tdm_status ref_mse_loss(const tdm_tensor *a, const tdm_tensor *b, tdm_reduction red,
                        tdm_tensor *loss);
tdm_status ref_mse_loss_backward(const tdm_tensor *gloss, const tdm_tensor *a, const tdm_tensor *b,
                                 tdm_reduction red, tdm_tensor *ga, tdm_tensor *gb);
tdm_status ref_sdpa(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                    const tdm_tensor *mask, const tdm_sdpa_params *p, tdm_tensor *y);
tdm_status ref_sdpa_backward(const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k,
                             const tdm_tensor *v, const tdm_tensor *mask,
                             const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                             tdm_tensor *gv, tdm_tensor *gmask);
tdm_status ref_layer_norm(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                          double eps, tdm_tensor *y, tdm_tensor *mean, tdm_tensor *rstd);
tdm_status ref_layer_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                   const tdm_tensor *mean, const tdm_tensor *rstd, tdm_tensor *gx,
                                   tdm_tensor *gw, tdm_tensor *gb);
tdm_status ref_batch_norm(const tdm_tensor *x, tdm_tensor *running_mean, tdm_tensor *running_var,
                          const tdm_tensor *w, const tdm_tensor *b, bool training,
                          double momentum, double eps, tdm_tensor *y, tdm_tensor *save_mean,
                          tdm_tensor *save_invstd);
tdm_status ref_batch_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                   const tdm_tensor *save_mean, const tdm_tensor *save_invstd,
                                   bool training, tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb);
tdm_status ref_embedding(const tdm_tensor *idx, const tdm_tensor *w, tdm_tensor *y);
tdm_status ref_embedding_backward(const tdm_tensor *gy, const tdm_tensor *idx,
                                  int64_t padding_idx, tdm_tensor *gw);
tdm_status ref_sgd_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                        bool buf_initialized, const tdm_sgd_params *p);
tdm_status ref_adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m, tdm_tensor *v,
                         tdm_tensor *vmax, int64_t step, const tdm_adam_params *p);
tdm_status ref_adam_step_multi(const tdm_adam_item *items, int n, const tdm_adam_params *p,
                               const double *coef);
tdm_status ref_amp_unscale_check(tdm_tensor *const *grads, int n, double inv_scale,
                                 tdm_tensor *found_inf);
tdm_status ref_grad_norm(const tdm_tensor *const *ts, int n, double norm_type, tdm_tensor *total);
tdm_status ref_grad_clip_scale(tdm_tensor *const *ts, int n, double max_norm,
                               const tdm_tensor *total);

#endif

/* backend.h — the one table of function pointers through which core reaches a backend.
 *
 * Core checks every argument (devices, shapes, dtypes), allocates the outputs, and only then calls
 * the backend: a backend entry may assume valid, contiguous tensors on its own device, outputs of
 * the right shape and dtype, and returns TDM_OK or an error it has recorded with tdm_error_set.
 * Entries marked "optional" may be NULL; core then reports TDM_ERR_UNSUPPORTED.
 * Core never includes a backend's headers; backends are found through tdm_backend_get(). */
#ifndef TANDEM_CORE_BACKEND_H
#define TANDEM_CORE_BACKEND_H

#include "tandem/tandem.h"
#include "tandem/memory.h"
#include "tandem/memtest.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TDM_BINARY_ADD = 0, TDM_BINARY_MUL } tdm_binary_op;
typedef enum { TDM_REDUCE_SUM = 0, TDM_REDUCE_MEAN } tdm_reduce_op;
// The number of a binary_scalar op, as PyTorch's Scalar: a Python int (is_int: i exact, f its
// double) or a Python float (f).
typedef struct {
    bool is_int;
    int64_t i;
    double f;
} tdm_scalar;
// Where the two sides of an asynchronous copy live (host = cpu memory of any kind).
typedef enum { TDM_COPY_H2D = 0, TDM_COPY_D2H, TDM_COPY_D2D, TDM_COPY_H2H } tdm_copy_dir;
// F.scaled_dot_product_attention's settings as core hands them to the sdpa slots
// (core/ops_attention.c).
typedef struct {
    double scale;            // the scores' factor, resolved (1/sqrt(E) by default; 1 when E = 0)
    bool is_causal;          // key j takes part in query i's row only where j <= i
    double dropout_p;        // 0: none; else weight (b,i,j) is kept iff draw (b L + i) S + j of
    uint64_t seed, offset;   // the uniform stream (seed, offset [+ *delta]) is below
    const uint64_t *delta;   // tdm_dropout_threshold, and scaled by 1/(1-p); delta NULL, or the
                             // device counter of a captured draw (core/random_impl.h)
} tdm_sdpa_params;

// One tensor of a multi-tensor Adam step (adam_step_multi below): contiguous tensors of one
// shape on one device; m, v, vmax of param's dtype, or f32 with a master.
typedef struct {
    tdm_tensor *param;
    const tdm_tensor *grad;
    tdm_tensor *m, *v;
    tdm_tensor *vmax;     // max_exp_avg_sq: non-NULL exactly when p->amsgrad
    tdm_tensor *master;   // NULL, or the f32 master weights of an f16/bf16 param
    int64_t step;         // 1-based, after the increment
    double lr, weight_decay;
} tdm_adam_item;

struct tdm_backend_ops {
    const char *name;

    // ---- devices and memory ----
    int (*device_count)(void);
    // optional: what the device is (tandem.h's tdm_device_props); index already checked
    tdm_status (*device_props)(int device_index, tdm_device_props *out);
    // optional: tandem.h's tdm_device_xid_events (index already checked)
    tdm_status (*device_xid_events)(int device_index, uint64_t *xids, int max, int *n);
    // optional: tandem.h's tdm_device_telemetry_read (index already checked)
    tdm_status (*device_telemetry)(int device_index, tdm_device_telemetry *out);
    void *(*alloc)(size_t nbytes, int device_index);   // NULL + error on failure
    void (*free)(void *ptr, size_t nbytes, int device_index);   // nbytes: as passed to alloc
    // What the backend's allocator holds on a device (tandem/memory.h); index already checked
    // against device_count.
    tdm_status (*memory_stats)(int device_index, tdm_memory_stats *out);
    tdm_status (*memory_reset_peak)(int device_index);
    // optional: a caching allocator's controls (tandem/memory.h's tdm_memory_empty_cache,
    // tdm_memory_summary, tdm_memory_set_caching); index already checked
    tdm_status (*empty_cache)(int device_index);
    tdm_status (*memory_summary)(int device_index, char *buf, size_t n);
    tdm_status (*set_caching)(int device_index, bool caching);
    tdm_status (*copy_from_host)(void *dst, const void *src, size_t nbytes, int device_index);
    tdm_status (*copy_to_host)(void *dst, const void *src, size_t nbytes, int device_index);
    tdm_status (*memset_zero)(void *dst, size_t nbytes, int device_index);

    // ---- streams, events, pinned host memory (tandem/stream.h; all optional) ----
    // Streams and events are the backend's opaque handles; a NULL stream is the device's default
    // stream. set_current_stream makes s the calling thread's stream for the backend's launches
    // and copies on that device. event_query sets *done. elapsed: start and end both recorded
    // (core checks) and on device_index.
    tdm_status (*stream_new)(int device_index, void **out);
    void (*stream_free)(void *stream, int device_index);
    tdm_status (*stream_synchronize)(void *stream, int device_index);
    tdm_status (*stream_wait_event)(void *stream, void *event, int device_index);
    tdm_status (*set_current_stream)(void *stream, int device_index);
    tdm_status (*device_synchronize)(int device_index);
    tdm_status (*event_new)(int device_index, void **out);
    void (*event_free)(void *event, int device_index);
    tdm_status (*event_record)(void *event, void *stream, int device_index);
    tdm_status (*event_synchronize)(void *event, int device_index);
    tdm_status (*event_query)(void *event, int device_index, bool *done);
    tdm_status (*event_elapsed_ms)(void *start, void *end, int device_index, double *ms);
    // Host memory of a kind other than pageable (NULL + error on failure); host_free gets the
    // same nbytes and kind. host_stats and host_empty_cache: the pinned allocator's.
    void *(*host_alloc)(size_t nbytes, tdm_host_kind kind, int device_index);
    void (*host_free)(void *ptr, size_t nbytes, tdm_host_kind kind, int device_index);
    tdm_status (*host_stats)(int device_index, tdm_host_memory_stats *out);
    tdm_status (*host_empty_cache)(int device_index);
    // nbytes from src to dst on `stream` of device_index, enqueued (cpu: done). dir says where
    // each side lives; for TDM_COPY_D2D, src lives on peer_index (== device_index or another).
    // The backend keeps a pinned host block it handed out from reuse until the copy is done.
    tdm_status (*copy_async)(void *dst, const void *src, size_t nbytes, tdm_copy_dir dir,
                             int device_index, int peer_index, void *stream);
    // The same copy by the device's SMs (a kernel); host sides must be mapped host memory.
    tdm_status (*copy_sm_async)(void *dst, const void *src, size_t nbytes, int device_index,
                                void *stream);
    tdm_status (*cast)(tdm_tensor *dst, const tdm_tensor *src);   // same shape, other dtype
    tdm_status (*rand_uniform)(tdm_tensor *t, uint64_t seed, uint64_t offset);
    tdm_status (*rand_normal)(tdm_tensor *t, uint64_t seed, uint64_t offset);

    // ---- matrix products: a (B?,n,k), b (B?,k,m); batch 0 = not batched on that side ----
    tdm_status (*linear)(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                         tdm_tensor *y);   // x viewed as (rows, in)
    tdm_status (*linear_backward)(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                  tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb);
    // optional, both or neither: an MLP's GELU (the tanh form) fused into its two products
    // (tdm_linear_gelu_linear). linear_gelu: pre = x w^T + b (rounded to the dtype) and
    // h = gelu_tanh(x w^T + b), GELU of the sum before or after its rounding (a backend says
    // which; docs/CONFORMANCE.md bounds both); x (rows,in), pre and h (rows,out).
    // linear_dgelu_backward: gpre = (gy w) * gelu_tanh'(pre), the input gradient of the linear
    // that follows the GELU with GELU's backward, the product rounded before or after it; gy
    // (rows,out), w (out,in), pre and gpre (rows,in).
    tdm_status (*linear_gelu)(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                              tdm_tensor *pre, tdm_tensor *h);
    tdm_status (*linear_dgelu_backward)(const tdm_tensor *gy, const tdm_tensor *w,
                                        const tdm_tensor *pre, tdm_tensor *gpre);
    tdm_status (*matmul)(const tdm_tensor *a, const tdm_tensor *b, tdm_tensor *y);
    tdm_status (*matmul_backward)(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                                  tdm_tensor *ga, tdm_tensor *gb);

    // ---- convolution (4-D, NCHW or NHWC as p->layout says) and pooling (4-D NCHW) ----
    tdm_status (*conv2d)(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                         const tdm_conv2d_params *p, tdm_tensor *y);
    tdm_status (*conv2d_backward)(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                  const tdm_conv2d_params *p, tdm_tensor *gx, tdm_tensor *gw,
                                  tdm_tensor *gb);
    tdm_status (*max_pool2d)(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y);
    tdm_status (*max_pool2d_backward)(const tdm_tensor *gy, const tdm_tensor *x,
                                      const tdm_pool2d_params *p, tdm_tensor *gx);
    tdm_status (*avg_pool2d)(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y);
    tdm_status (*avg_pool2d_backward)(const tdm_tensor *gy, const tdm_pool2d_params *p,
                                      tdm_tensor *gx);

    // ---- elementwise ----
    tdm_status (*unary)(tdm_unary_op op, const tdm_tensor *x, tdm_tensor *y);
    tdm_status (*unary_backward)(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                                 tdm_tensor *gx);
    // y has the broadcast shape; a and b are broadcast to it (PyTorch's rules, checked by core).
    tdm_status (*binary)(tdm_binary_op op, const tdm_tensor *a, const tdm_tensor *b, double alpha,
                         tdm_tensor *y);
    tdm_status (*dropout)(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                          tdm_tensor *y);
    // y = a (op) s, elementwise (ops.h's tdm_scalar_op), a and y of one shape; y's dtype is the
    // promoted one core chose: a's, or f32 for an integer a (core/ops_scalar.c). A floating y is
    // computed in its accumulation type (f32 for f32/f16/bf16, f64 for f64) from a and s
    // converted to it (s->i when s->is_int) and rounded once; an integer y (i32/i64 a, integral
    // s, no division) in a's type with s->i converted to it, wrapping. ga = the backward for a
    // floating a (gy and ga of a's shape and dtype): gy, gy, -gy, gy s, gy / s, -(gy s / a) / a,
    // in the accumulation type, one rounding.
    tdm_status (*binary_scalar)(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s,
                                tdm_tensor *y);
    tdm_status (*binary_scalar_backward)(tdm_scalar_op op, const tdm_tensor *gy,
                                         const tdm_tensor *a, const tdm_scalar *s, tdm_tensor *ga);

    // ---- reductions: reduce_mask bit d set = dim d of x is reduced; y is x's shape with
    //      reduced dims set to 1 (keepdim), whatever the caller asked for ----
    tdm_status (*reduce)(tdm_reduce_op op, const tdm_tensor *x, unsigned reduce_mask,
                         tdm_tensor *y);
    // gx = scale * gy summed down to gx's shape: gx right-aligned against gy, summing over gy's
    // extra leading dims and over the dims where gx is 1 and gy is not (the backward of
    // broadcasting in add and mul).
    tdm_status (*sum_to)(const tdm_tensor *gy, double scale, tdm_tensor *gx);
    // y = scale * x broadcast to y's shape (x right-aligned, its dims 1 or equal to y's): the
    // backward of sum and mean. x is read through x->stride, which may be any strides over its
    // storage: tdm_tensor_permute passes a permuted view.
    tdm_status (*expand)(const tdm_tensor *x, double scale, tdm_tensor *y);
    // The copies of the views (core/ops_view.c: narrow, cat, split, transpose): for every
    // coordinate c of `shape` (ndim <= TDM_MAX_DIMS dims, numel >= 1),
    //     dst[dst_off + sum_d c_d dst_stride[d]] = src[src_off + sum_d c_d src_stride[d]]
    // in elements of their (one) dtype, any dtype: bytes moved, never converted (exact). Core
    // has checked that both extents lie inside their storages, and that dst's do not overlap.
    // Asynchronous on the device (no host wait: capturable).
    tdm_status (*copy_strided)(tdm_tensor *dst, int64_t dst_off, const int64_t *dst_stride,
                               const tdm_tensor *src, int64_t src_off, const int64_t *src_stride,
                               int ndim, const int64_t *shape);

    // ---- softmax and losses ----
    tdm_status (*softmax)(const tdm_tensor *x, int dim, bool log, tdm_tensor *y);
    tdm_status (*softmax_backward)(const tdm_tensor *gy, const tdm_tensor *y, int dim, bool log,
                                   tdm_tensor *gx);
    // logits (R,C); target (R) class indices (i64/i32) or (R,C) class probabilities (logits'
    // dtype); weight (C) or NULL; loss: (R) for reduction none, else scalar
    tdm_status (*cross_entropy)(const tdm_tensor *logits, const tdm_tensor *target,
                                const tdm_tensor *weight, tdm_reduction red, double smoothing,
                                int64_t ignore_index, tdm_tensor *loss);
    tdm_status (*cross_entropy_backward)(const tdm_tensor *gloss, const tdm_tensor *logits,
                                         const tdm_tensor *target, const tdm_tensor *weight,
                                         tdm_reduction red, double smoothing,
                                         int64_t ignore_index, tdm_tensor *glogits);
    // optional: the fused classifier's two halves. cross_entropy_stats is cross_entropy that also
    // writes each row's softmax statistics (its max m and sum of exp(x - m), in the accumulation
    // dtype: f32, f64 for f64) into stats (R, 2); cross_entropy_backward_stats takes them instead
    // of recomputing them: one pass over each row of logits, the same values and roundings.
    tdm_status (*cross_entropy_stats)(const tdm_tensor *logits, const tdm_tensor *target,
                                      const tdm_tensor *weight, tdm_reduction red,
                                      double smoothing, int64_t ignore_index, tdm_tensor *loss,
                                      tdm_tensor *stats);
    tdm_status (*cross_entropy_backward_stats)(const tdm_tensor *gloss, const tdm_tensor *logits,
                                               const tdm_tensor *target,
                                               const tdm_tensor *weight, tdm_reduction red,
                                               double smoothing, int64_t ignore_index,
                                               const tdm_tensor *stats, tdm_tensor *glogits);
    tdm_status (*mse_loss)(const tdm_tensor *a, const tdm_tensor *b, tdm_reduction red,
                           tdm_tensor *loss);
    tdm_status (*mse_loss_backward)(const tdm_tensor *gloss, const tdm_tensor *a,
                                    const tdm_tensor *b, tdm_reduction red, tdm_tensor *ga,
                                    tdm_tensor *gb);

    // ---- attention: q (B,L,E), k (B,S,E), v (B,S,Ev), y (B,L,Ev), contiguous, B L S >= 1;
    //      mask NULL or a view of shape (batch dims..., L, S), the batch dims multiplying to B,
    //      read through its strides (0 where it broadcasts; its storage is smaller than the
    //      view): bool (nonzero takes part) or floating (added to the scaled scores). A row
    //      whose scores are all -inf gives zeros (PyTorch's _safe_softmax). Backward: gq, gk,
    //      gv (q's, k's, v's shapes) and gmask ((B,L,S) contiguous, a floating mask's dtype) are
    //      each NULL when not wanted; the weights are recomputed from q, k and the mask. ----
    tdm_status (*sdpa)(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                       const tdm_tensor *mask, const tdm_sdpa_params *p, tdm_tensor *y);
    tdm_status (*sdpa_backward)(const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k,
                                const tdm_tensor *v, const tdm_tensor *mask,
                                const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                                tdm_tensor *gv, tdm_tensor *gmask);
    // optional: the fused attention (FlashAttention-2: tiles of q against k and v streamed
    // through on-chip memory, online softmax, no (B,L,S) buffer), for what
    // tdm_attn_fused_applies admits (no mask, no dropout, f16/bf16, E and Ev <= 256; is_causal
    // and scale from p). lse (B,L) f32 gets each row's log-sum-exp of its scaled scores.
    tdm_status (*sdpa_fused)(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                             const tdm_sdpa_params *p, tdm_tensor *y, tdm_tensor *lse);
    // optional, with sdpa_fused: gq, gk, gv (all three) from gy and the forward's y and lse, the
    // weights recomputed from q, k and lse; bit-reproducible in the deterministic attention mode
    // (tandem/backends.h; the heuristic one may add gq up in any order).
    tdm_status (*sdpa_fused_backward)(const tdm_tensor *gy, const tdm_tensor *q,
                                      const tdm_tensor *k, const tdm_tensor *v,
                                      const tdm_tensor *y, const tdm_tensor *lse,
                                      const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                                      tdm_tensor *gv);

    // ---- normalization: x viewed as (rows, cols) for layer norm, (N, C, S) for batch norm;
    //      weight/bias/running stats/saved stats may be NULL where the op allows ----
    tdm_status (*layer_norm)(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                             double eps, tdm_tensor *y, tdm_tensor *mean, tdm_tensor *rstd);
    tdm_status (*layer_norm_backward)(const tdm_tensor *gy, const tdm_tensor *x,
                                      const tdm_tensor *w, const tdm_tensor *mean,
                                      const tdm_tensor *rstd, tdm_tensor *gx, tdm_tensor *gw,
                                      tdm_tensor *gb);
    // optional: a residual add and the layer_norm of its sum in one pass (a transformer block's
    // x + attn(.) then ln_2): sum = x + res (res of any floating dtype, the sum in x's), then
    // layer_norm(sum) as the slot above, the same values and roundings as the two ops.
    tdm_status (*add_layer_norm)(const tdm_tensor *x, const tdm_tensor *res, const tdm_tensor *w,
                                 const tdm_tensor *b, double eps, tdm_tensor *sum, tdm_tensor *y,
                                 tdm_tensor *mean, tdm_tensor *rstd);
    tdm_status (*batch_norm)(const tdm_tensor *x, tdm_tensor *running_mean,
                             tdm_tensor *running_var, const tdm_tensor *w, const tdm_tensor *b,
                             bool training, double momentum, double eps, tdm_tensor *y,
                             tdm_tensor *save_mean, tdm_tensor *save_invstd);
    tdm_status (*batch_norm_backward)(const tdm_tensor *gy, const tdm_tensor *x,
                                      const tdm_tensor *w, const tdm_tensor *save_mean,
                                      const tdm_tensor *save_invstd, bool training,
                                      tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb);

    // ---- embedding: padding_idx already wrapped to [0,V) or TDM_EMBEDDING_NO_PADDING ----
    tdm_status (*embedding)(const tdm_tensor *idx, const tdm_tensor *w, tdm_tensor *y);
    tdm_status (*embedding_backward)(const tdm_tensor *gy, const tdm_tensor *idx,
                                     int64_t padding_idx, tdm_tensor *gw);

    // ---- optimizer updates, in place ----
    tdm_status (*sgd_step)(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                           bool buf_initialized, const tdm_sgd_params *p);
    // vmax: max_exp_avg_sq, non-NULL exactly when p->amsgrad.
    tdm_status (*adam_step)(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                            tdm_tensor *v, tdm_tensor *vmax, int64_t step,
                            const tdm_adam_params *p);
    // optional: one Adam/AdamW step over n tensors at once (tdm_optimizer_step with p->fused,
    // PyTorch's fused=True; and every step with master weights): items[i] as adam_step's
    // arguments, with its own step count, lr and weight decay (p's lr and weight_decay unused);
    // n >= 1, all on one device (an item with no elements does nothing), each item's arithmetic
    // exactly adam_step's (adam_step_dev's with coef): fused and per-tensor steps agree bit for bit. With items[i].master
    // (an f32 copy of an f16/bf16 param; m, v and vmax then f32): the update reads and writes the
    // master, and param = the new master rounded to nearest even. coef: NULL (eager), or n * 4
    // device doubles, item i's at 4 i in adam_step_dev's layout (the items' step and lr unused;
    // fresh also reads the master's old value from the param). The cuda backend makes one kernel
    // launch (its table of items copied from pinned memory without a host wait; under capture
    // written by captured kernels); NULL: core steps the items one by one through adam_step
    // (fused gives the same numbers, in more launches) and refuses master weights.
    tdm_status (*adam_step_multi)(const tdm_adam_item *items, int n, const tdm_adam_params *p,
                                  const double *coef);

    // ---- collectives (optional: data parallel's all-reduce on the device, NCCL on cuda; NULL:
    //      core/parallel.c reduces through host memory) ----
    // A fresh unique id (TDM_COMM_ID_BYTES) that every rank of one communicator is given.
    tdm_status (*comm_unique_id)(void *id);
    // This rank's member of the communicator of `nranks` (collective: every rank calls it, each
    // on its own thread or process; device_index is this rank's device). NULL + error on failure.
    void *(*comm_new)(const void *id, int nranks, int rank, int device_index);
    void (*comm_free)(void *comm);
    // Starts the mean over ranks of the n gradients (same dtype, on the comm's device), in
    // place, ordered after the work already queued on the device's current stream and running
    // beside what is queued after (a side stream). Returns without waiting.
    tdm_status (*comm_allreduce_mean)(void *comm, tdm_tensor *const *grads, int n);
    // Makes the current stream wait for every all-reduce started so far and reports a failure
    // any of them had.
    tdm_status (*comm_wait)(void *comm);
    // Optional: whether a member may live on the device as it is set up now (TDM_ERR_UNSUPPORTED
    // and the reason otherwise: on cuda, the caching allocator turned off). Every rank asks
    // before any makes its member, so that all refuse together rather than some wait forever.
    tdm_status (*comm_check)(int device_index);
    // ---- profiling (core/profile.c; all optional) ----
    // A named range on the calling thread (NVTX on CUDA, for Nsight Systems); pop closes the
    // innermost. Called only while a profiling session runs or TANDEM_NVTX=1.
    void (*range_push)(const char *name);
    void (*range_pop)(void);
    // Device time of ops (apart from the stream/event slots above: one call per op, the event
    // knows its device): prof_event_record records a new event on the device's current stream
    // and returns it (NULL when it cannot: the op is then "not measured"); prof_event_elapsed_ms
    // waits for both events and returns end - start in milliseconds (< 0 on failure); prof_event_free
    // releases one. Called at each recorded op's start and end, resolved at tdm_profile_stop.
    void *(*prof_event_record)(int device_index);
    double (*prof_event_elapsed_ms)(void *start, void *end);
    void (*prof_event_free)(void *event);
    // Kernel launches and library compute calls (a cuBLASLt matmul, a cuDNN execution, an NCCL
    // collective: each one or more kernels) issued so far in this process, all devices.
    uint64_t (*launch_count)(void);
    // ---- optional: the convolution algorithm choice (tandem/backends.h); index checked ----
    tdm_status (*conv_algo_last)(int device_index, tdm_conv_pass pass, tdm_conv_algo_info *out);
    tdm_status (*conv_algo_cache_clear)(int device_index);
    // optional: the grad scaler's unscale, in place: each grads[i] (NULL skipped) *= inv_scale
    // rounded to its dtype (one rounding of the product); found_inf, a 1-element f32 tensor on the
    // same device, is set to 1 where a result is not finite (left as is otherwise). Lets the CUDA
    // backend check without a host sync per tensor; core reads found_inf once per step.
    tdm_status (*amp_unscale_check)(tdm_tensor *const *grads, int n, double inv_scale,
                                    tdm_tensor *found_inf);
    // optional (NULL: clip_grad_norm_ "not supported"): gradient clipping, no host wait, so that
    // it can be captured. grad_norm: total (0-d f32, the tensors' device) = the norm_type-norm of
    // the n tensors' elements together (any floating dtypes): (sum |x|^p)^(1/p) for a finite
    // p > 0, max |x| for INFINITY; NaN propagates. Accumulated in f32 (f64 for f64 tensors) or
    // better, the root in f64, rounded once to f32. grad_clip_scale: each ts[i] *= c, in place,
    // c = min(max_norm / (total + 1e-6), 1) (NaN stays NaN) evaluated in f64 on the device from
    // the f32 total, each product rounded once to its tensor's dtype.
    tdm_status (*grad_norm)(const tdm_tensor *const *ts, int n, double norm_type,
                            tdm_tensor *total);
    tdm_status (*grad_clip_scale)(tdm_tensor *const *ts, int n, double max_norm,
                                  const tdm_tensor *total);
    // optional: every element of t (i64) += n, in place, in stream order on the device
    // (BatchNorm2d's num_batches_tracked: no host round trip in a training step, and a captured
    // step counts each replay). NULL: core reads and writes the value through the host.
    tdm_status (*counter_add)(tdm_tensor *t, int64_t n);
    // ---- optional: graph capture (tandem/graph.h, core/graph.c; NULL: "needs a CUDA device") --
    // Starts capturing the calling thread's current stream on the device (core has just made a
    // fresh side stream current and synchronized the device); allocations of this thread on the
    // device come from the capture's private pool until the end. *capture = the handle.
    tdm_status (*graph_capture_begin)(int device_index, void **capture);
    // Ends the capture and makes it executable (on failure the capture is freed and the reason
    // recorded; core then restores the current stream).
    tdm_status (*graph_capture_end)(void *capture, int device_index);
    // Launches it on the calling thread's current stream of the device.
    tdm_status (*graph_replay)(void *capture, int device_index);
    // Waits for its replays, frees it and gives its private pool back.
    void (*graph_free)(void *capture, int device_index);
    // optional: while on, this thread's allocations on the capture's device come from a second
    // private pool of the capture that no captured kernel has used (state that outlives the step:
    // an optimizer's buffers made during the capture, the values replay hooks write). Blocks freed
    // during a capture are reused by later captured allocations, so such state taken from the
    // capture's own pool would be overwritten, at each replay, by the kernels that used its block
    // before. NULL: core refuses to make such state during a capture.
    tdm_status (*graph_alloc_persistent)(void *capture, int device_index, bool on);
    // ---- optional: capture-safe state (core/graph.c's replay hooks; NULL: what needs them cannot
    //      be captured). The state a captured step must see change from replay to replay lives
    //      in device memory that core rewrites before each replay, as PyTorch's graph-safe
    //      generator state ("extragraph" seed/offset) and capturable optimizers do. ----
    // Enqueues on the current stream a write of nbytes (<= TDM_WRITE_ASYNC_MAX) from host memory
    // to device memory, without synchronizing; src may be reused as soon as it returns (the bytes
    // travel as a kernel argument). Never called while capturing.
    tdm_status (*write_async)(void *dst, const void *src, size_t nbytes, int device_index);
    // sgd_step / adam_step with their per-step values read on the device from coef (doubles):
    // sgd {buf_initialized (0/1), lr}; adam {lr / (1 - beta1^step), sqrt(1 - beta2^step),
    // 1 - lr * weight_decay, fresh (1: m, v and vmax are read as zeros)}; p's other fields as
    // given (vmax non-NULL exactly when p->amsgrad).
    // Same arithmetic as sgd_step / adam_step with those values as arguments, bit for bit.
    tdm_status (*sgd_step_dev)(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                               const double *coef, const tdm_sgd_params *p);
    tdm_status (*adam_step_dev)(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                                tdm_tensor *v, tdm_tensor *vmax, const double *coef,
                                const tdm_adam_params *p);
    // rand_uniform / rand_normal / dropout drawing at offset + *delta, delta a device uint64_t.
    tdm_status (*rand_fill_dev)(tdm_tensor *t, bool normal, uint64_t seed, uint64_t offset,
                                const uint64_t *delta);
    tdm_status (*dropout_dev)(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                              const uint64_t *delta, tdm_tensor *y);
    // ---- optional: the device memory test (tandem/memtest.h; NULL: TDM_ERR_UNSUPPORTED) ----
    // p resolved by core (fraction in (0, 1], patterns a non-empty subset, passes >= 1); out
    // zeroed but its patterns and passes. Takes fraction x the device's free memory (the cache
    // emptied first), runs the patterns, gives the memory back; TDM_OK whatever it found.
    tdm_status (*memtest)(int device_index, const tdm_memtest_params *p, tdm_memtest_result *out);
};

enum { TDM_WRITE_ASYNC_MAX = 1024 };   // bytes per write_async

enum { TDM_COMM_ID_BYTES = 128 };   // NCCL_UNIQUE_ID_BYTES

// ---- memory accounting shared by the backends (core/memory.c) ----
// A backend keeps one tdm_memory_stats per device and updates it through these, which serialize
// on one lock: tensors are freed from any thread (the data loader's workers among them).
// alloc: allocated and reserved grow by nbytes, peaks follow, n_allocs + 1; free: the reverse,
// n_frees + 1. The CUDA backend's caching allocator (kernels/caching_allocator.h) keeps its own.
void tdm_memory_count_alloc(tdm_memory_stats *c, size_t nbytes);
void tdm_memory_count_free(tdm_memory_stats *c, size_t nbytes);
void tdm_memory_count_get(const tdm_memory_stats *c, tdm_memory_stats *out);
void tdm_memory_count_reset_peak(tdm_memory_stats *c);   // peaks = the current values

// The backend for a device type, or NULL (with the error set) when none is compiled in.
const struct tdm_backend_ops *tdm_backend_get(tdm_device_type type);

// Each compiled-in backend defines one of these (core/dispatch.c lists them).
extern const struct tdm_backend_ops tdm_ref_backend;
#ifdef TDM_HAVE_CUDA
extern const struct tdm_backend_ops tdm_cuda_backend;
#endif

#ifdef __cplusplus
}
#endif

#endif

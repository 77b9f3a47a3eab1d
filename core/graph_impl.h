/* graph_impl.h — core's side of capture-safe state (core/graph.c): replay hooks.
 *
 * A captured step replays the same kernels with the same arguments. State that must change from
 * one step to the next — an optimizer's step count and "momentum buffer initialized" flag, a
 * random stream's offset — is therefore read by the captured kernels from device memory, and a
 * hook registered during the capture rewrites that memory before each replay (PyTorch's
 * "extragraph" generator state and capturable optimizers work the same way). The host keeps the
 * authoritative state and advances it by exactly what each replay does, so eager steps and
 * replays can be mixed and the state saved, and a replay computes bit for bit what the same eager
 * step would: the hook computes each per-step value with the host code of the eager step. */
#ifndef TANDEM_CORE_GRAPH_IMPL_H
#define TANDEM_CORE_GRAPH_IMPL_H

#include "core/tensor_impl.h"
#include "tandem/graph.h"

typedef struct {
    const void *owner;   // the host state's owner (an optimizer, a random stream): see forget
    void *ctx;
    // Before each replay, on the replaying thread, in registration order: advances the host state
    // by one replay and writes what the captured kernels read (tdm_graph_write_async).
    tdm_status (*replay)(void *ctx);
    // Optional: once, when the capture ends; ok = a graph was made.
    void (*ended)(void *ctx, bool ok);
    // When the graph (or the failed capture) goes: frees ctx and what it holds.
    void (*release)(void *ctx);
} tdm_graph_hook;

// Registers h with the capture this thread runs on dev (TDM_ERR_ARG when none). On failure
// h->release(h->ctx) has been called.
tdm_status tdm_graph_hook_add(tdm_device dev, const tdm_graph_hook *h);
// The ctx of the hook `owner` registered with this thread's capture on dev, or NULL.
void *tdm_graph_hook_find(tdm_device dev, const void *owner);
// `owner` is being freed: graphs holding its hooks refuse to replay from now on (with a message
// saying so) instead of reading freed host state.
void tdm_graph_forget(const void *owner);
// An uninitialized tensor for state that outlives the captured step (an optimizer's buffers made
// during the capture, what a replay hook writes): while this thread captures on dev, from a
// second private pool of the capture that no captured kernel has used. (Blocks freed during a
// capture are reused by later captured allocations: state in such a block would be overwritten,
// at each replay, by the kernels that used the block earlier in the step.) Not capturing: a plain
// tdm_tensor_empty.
tdm_tensor *tdm_graph_empty_persistent(int ndim, const int64_t *shape, tdm_dtype dt,
                                       tdm_device dev);
// Enqueues on dev's current stream a write of host bytes into t's device memory at byte offset
// `at` (any size; the backend's write_async in pieces). For replay hooks.
tdm_status tdm_graph_write_async(tdm_tensor *t, size_t at, const void *src, size_t nbytes);

// ---- captured variants of ops whose per-step values live on the device --------------------
// core/ops_optim.c: tdm_sgd_step / tdm_adam_step's checks, then the backend's *_step_dev with
// coef = the f64 values at element `at` of `coef` (core/backend.h says which).
tdm_status tdm_sgd_step_captured(tdm_tensor *param, const tdm_tensor *grad,
                                 tdm_tensor *momentum_buffer, const tdm_tensor *coef, int64_t at,
                                 const tdm_sgd_params *p);
tdm_status tdm_adam_step_captured(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *exp_avg,
                                  tdm_tensor *exp_avg_sq, tdm_tensor *max_exp_avg_sq,
                                  const tdm_tensor *coef, int64_t at, const tdm_adam_params *p);

#endif

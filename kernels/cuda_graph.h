/* cuda_graph.h — the CUDA backend's graph capture (kernels/graph.cu; tandem/graph.h says what it
 * means): the backend table's graph_* slots, the private pool that the allocation path
 * (kernels/cuda_backend.cu) uses while this thread captures, and the checks the launchers make
 * so that what cannot be captured fails with a message instead of breaking the capture. */
#ifndef TANDEM_KERNELS_CUDA_GRAPH_H
#define TANDEM_KERNELS_CUDA_GRAPH_H

#include <cuda_runtime.h>

#include "core/tensor_impl.h"
#include "kernels/caching_allocator.h"

// ---- the slots of core/backend.h ----
tdm_status tdm_cuda_graph_capture_begin(int device_index, void **capture);
tdm_status tdm_cuda_graph_capture_end(void *capture, int device_index);
tdm_status tdm_cuda_graph_replay(void *capture, int device_index);
void tdm_cuda_graph_free(void *capture, int device_index);
tdm_status tdm_cuda_graph_alloc_persistent(void *capture, int device_index, bool on);

// The private pool key (kernels/caching_allocator.h) of the capture the calling thread runs on
// the device, or NULL when it captures nothing there: cuda_alloc then pools by stream.
void *tdm_cuda_graph_pool(int device_index);

// OK when `stream` is not capturing. Otherwise TDM_ERR_UNSUPPORTED "<op>: cannot be captured
// in a CUDA graph: <why>", and the calling thread's capture on the device (if tandem's) is marked
// failed, so that tdm_graph_capture_end reports it instead of returning a partial graph.
tdm_status tdm_cuda_capture_refuse(cudaStream_t stream, int device_index, const char *op,
                                   const char *why);
// Is `stream` capturing (false when the query fails)?
bool tdm_cuda_stream_capturing(cudaStream_t stream);
// Hands scratch that captured kernels write (an index-check flag) to the calling thread's capture
// on t's device: freed with the graph, so that no later captured allocation shares its bytes.
// TDM_ERR_UNSUPPORTED when the capture is not tandem's (t is freed then).
tdm_status tdm_cuda_graph_keep(tdm_tensor *t);

// ---- capture-safe state (core/backend.h's optional slots of that name; core/graph_impl.h) ----
// graph.cu: nbytes (<= TDM_WRITE_ASYNC_MAX) of host memory into device memory, as a kernel
// argument on the current stream (before a replay, the state its kernels read).
tdm_status cuda_write_async(void *dst, const void *src, size_t nbytes, int device_index);
// k_optim.cu, k_random.cu: the captured variants, reading their per-step values on the device.
tdm_status cuda_sgd_step_dev(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                             const double *coef, const tdm_sgd_params *p);
tdm_status cuda_adam_step_dev(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                              tdm_tensor *v, tdm_tensor *vmax, const double *coef,
                              const tdm_adam_params *p);
tdm_status cuda_rand_fill_dev(tdm_tensor *t, bool normal, uint64_t seed, uint64_t offset,
                              const uint64_t *delta);
tdm_status cuda_dropout_dev(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                            const uint64_t *delta, tdm_tensor *y);

// kernels/cuda_backend.cu: the device's caching allocator, made on first use (NULL + error).
tdm_caching_allocator *tdm_cuda_device_allocator(int device_index);

#endif

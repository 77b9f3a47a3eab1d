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

// kernels/cuda_backend.cu: the device's caching allocator, made on first use (NULL + error).
tdm_caching_allocator *tdm_cuda_device_allocator(int device_index);

#endif

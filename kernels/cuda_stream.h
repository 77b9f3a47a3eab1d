/* cuda_stream.h — the CUDA backend's internal stream interface, for every .cu file of kernels/: the
 * calling thread's current stream on a device (tandem/stream.h's tdm_stream_set_current; NULL =
 * the legacy default stream), which every launch and copy uses, and the SM-driven copy kernel. */
#ifndef TANDEM_KERNELS_CUDA_STREAM_H
#define TANDEM_KERNELS_CUDA_STREAM_H

#include <cuda_runtime.h>

#include "core/tensor_impl.h"

#define TDM_CUDA_MAX_DEVICES 64

// The calling thread's current stream on `device` (0 = the default stream; also for an index out
// of range).
cudaStream_t tdm_cuda_current_stream(int device);

// The calling thread's current stream on the current device (for launchers that were handed no
// device index: the caller has set the device).
static inline cudaStream_t tdm_cuda_stream_here(void) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError();
    return tdm_cuda_current_stream(device);
}

// dst = src, nbytes, by a grid-stride copy kernel on `stream` of `device` (kernels/copy_kernel.cu):
// 16-byte vector loads and stores when both pointers are 16-byte aligned, then the tail bytewise.
// Both pointers must be valid on the device (device memory, or mapped host memory's device
// pointer). Asynchronous; launch errors are returned.
tdm_status tdm_cuda_copy_kernel(void *dst, const void *src, size_t nbytes, int device,
                                cudaStream_t stream);

// ---- the backend table's stream, event, host-memory and async-copy slots (kernels/streams.cu;
//      core/backend.h says what each does) ----
tdm_status tdm_cuda_stream_new(int device_index, void **out);
void tdm_cuda_stream_free(void *stream, int device_index);
tdm_status tdm_cuda_stream_synchronize(void *stream, int device_index);
tdm_status tdm_cuda_stream_wait_event(void *stream, void *event, int device_index);
tdm_status tdm_cuda_set_current_stream(void *stream, int device_index);
tdm_status tdm_cuda_device_synchronize(int device_index);
tdm_status tdm_cuda_event_new(int device_index, void **out);
void tdm_cuda_event_free(void *event, int device_index);
tdm_status tdm_cuda_event_record(void *event, void *stream, int device_index);
tdm_status tdm_cuda_event_synchronize(void *event, int device_index);
tdm_status tdm_cuda_event_query(void *event, int device_index, bool *done);
tdm_status tdm_cuda_event_elapsed_ms(void *start, void *end, int device_index, double *ms);
void *tdm_cuda_host_alloc(size_t nbytes, tdm_host_kind kind, int device_index);
void tdm_cuda_host_free(void *ptr, size_t nbytes, tdm_host_kind kind, int device_index);
tdm_status tdm_cuda_host_stats(int device_index, tdm_host_memory_stats *out);
tdm_status tdm_cuda_host_empty_cache(int device_index);
tdm_status tdm_cuda_copy_async(void *dst, const void *src, size_t nbytes, tdm_copy_dir dir,
                               int device_index, int peer_index, void *stream);
tdm_status tdm_cuda_copy_sm_async(void *dst, const void *src, size_t nbytes, int device_index,
                                  void *stream);

#endif

/* nvtx.h — the CUDA backend's profiling slots (core/backend.h's range_push/range_pop), NVTX 3
 * ranges that Nsight Systems shows on the calling thread's timeline, and the events that time
 * each profiled op on the device (kernels/nvtx.cu). */
#ifndef TANDEM_KERNELS_NVTX_H
#define TANDEM_KERNELS_NVTX_H

void tdm_cuda_range_push(const char *name);
void tdm_cuda_range_pop(void);

// Device time of ops (core/backend.h's prof_event_* slots): a timing event recorded on the
// device's current stream; elapsed milliseconds between two (waits for end; < 0 on failure).
void *tdm_cuda_prof_event_record(int device_index);
double tdm_cuda_prof_event_elapsed_ms(void *start, void *end);
void tdm_cuda_prof_event_free(void *event);

#endif

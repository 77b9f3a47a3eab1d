/* nvtx.h — the CUDA backend's profiling slots (core/backend.h's range_push/range_pop), NVTX 3
 * ranges that Nsight Systems shows on the calling thread's timeline (kernels/nvtx.cu). */
#ifndef TANDEM_KERNELS_NVTX_H
#define TANDEM_KERNELS_NVTX_H

void tdm_cuda_range_push(const char *name);
void tdm_cuda_range_pop(void);

#endif

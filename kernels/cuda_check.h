/* cuda_check.h — every CUDA runtime call is checked: a failure becomes a tandem error with the
 * library's own message and the file and line of the call. Also the one launch macro. */
#ifndef TANDEM_CUDA_CHECK_H
#define TANDEM_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "core/tensor_impl.h"

static inline tdm_status tdm_cuda_check(cudaError_t err, const char *call, const char *file,
                                        int line) {
    if (err == cudaSuccess) return TDM_OK;
    (void)cudaGetLastError();   // clear the sticky-free error state
    return tdm_error_set(err == cudaErrorMemoryAllocation ? TDM_ERR_OOM : TDM_ERR_BACKEND,
                         "CUDA error %s (%s) in %s at %s:%d", cudaGetErrorName(err),
                         cudaGetErrorString(err), call, file, line);
}

#define CUDA_CHECK(call) tdm_cuda_check((call), #call, __FILE__, __LINE__)

// Every launch and library compute call is counted (the backend's launch_count slot: the
// profiler's and `bench train --profile`'s launches per step). Relaxed: a count, not an order.
#ifdef __cplusplus
extern "C" uint64_t tdm_cuda_launches;   // kernels/k_common.cu
#else
extern uint64_t tdm_cuda_launches;
#endif
static inline void tdm_cuda_count_launch(void) {
    __atomic_fetch_add(&tdm_cuda_launches, 1, __ATOMIC_RELAXED);
}

// Launches `kernel` (last, so template arguments may hold commas) on a grid:
// TDM_LAUNCH(grid, block, smem, stream, k_cast<S, D>)(args...), counted. Under nvcc it is the
// <<<...>>> launch; in the emulated device's build (suites/emu/cuda_emu.h) a call into the
// emulator (TDM_EMU_LAUNCH), so these files compile unchanged as host C++ there.
#undef TDM_LAUNCH
#ifdef TDM_CUDA_EMU
#define TDM_LAUNCH(grid, block, smem, stream, ...) \
    tdm_cuda_count_launch(), TDM_EMU_LAUNCH(grid, block, smem, stream, __VA_ARGS__)
#else
#define TDM_LAUNCH(grid, block, smem, stream, ...) \
    tdm_cuda_count_launch(), __VA_ARGS__<<<grid, block, smem, stream>>>
#endif

#endif

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

// Launches `kernel` (last, so template arguments may hold commas) on a grid:
// TDM_LAUNCH(grid, block, smem, stream, k_cast<S, D>)(args...). Under nvcc it is the <<<...>>>
// launch; the emulated device's build (suites/emu/cuda_emu.h) defines it first as a call into
// the emulator, so these files compile unchanged as host C++ there.
#ifndef TDM_LAUNCH
#define TDM_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif

#endif

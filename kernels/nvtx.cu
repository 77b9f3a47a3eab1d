/* nvtx.cu — NVTX ranges for the CUDA backend's profiling slots: core's profiler (core/profile.c)
 * calls them around every op and named range while a session runs or TDM_NVTX=1, so Nsight
 * Systems (nsys profile) shows tandem's op and phase names over the kernels they launch.
 *
 * NVTX 3 is header-only (the toolkit's nvtx3/nvToolsExt.h): without a tool attached the calls
 * are no-ops that cost a few nanoseconds; with nsys they go to its injection library. */
#include <nvtx3/nvToolsExt.h>

#include "kernels/nvtx.h"

void tdm_cuda_range_push(const char *name) { nvtxRangePushA(name); }

void tdm_cuda_range_pop(void) { nvtxRangePop(); }

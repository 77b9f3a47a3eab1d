/* memory.h — what a device's memory is doing: bytes allocated (in live tensors), reserved (held
 * by the backend's allocator, cached or in use), their peaks, and allocation counts, as
 * torch.cuda.memory_allocated / memory_reserved / max_memory_allocated report them. The reference
 * backend reports its host allocations (reserved == allocated: it caches nothing). */
#ifndef TANDEM_MEMORY_H
#define TANDEM_MEMORY_H

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t allocated, reserved;             // bytes now
    int64_t peak_allocated, peak_reserved;   // since the start or the last reset
    int64_t n_allocs, n_frees;               // calls to the backend's alloc and free
} tdm_memory_stats;

tdm_status tdm_memory_stats_get(tdm_device dev, tdm_memory_stats *out);
tdm_status tdm_memory_reset_peak(tdm_device dev);

// The caching allocator (the CUDA backend's; TDM_ERR_UNSUPPORTED on a backend without one, as
// the cpu). empty_cache gives the device every cached segment that is entirely free
// (torch.cuda.empty_cache). summary writes a printable account (totals, then each segment and its
// blocks) into buf, truncated to n - 1 characters (torch.cuda.memory_summary). set_caching(false)
// sends every later alloc and free straight to cudaMalloc/cudaFree, as the environment variable
// TANDEM_CACHING_ALLOCATOR=0 does from the start (PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING=1);
// refused (TDM_ERR_UNSUPPORTED) on a device where a data-parallel NCCL communicator lives, which
// in turn refuses to be made on a device without caching (tandem/parallel.h).
tdm_status tdm_memory_empty_cache(tdm_device dev);
tdm_status tdm_memory_summary(tdm_device dev, char *buf, size_t n);
tdm_status tdm_memory_set_caching(tdm_device dev, bool caching);

// A scope measuring the peak and the net change of allocated bytes inside it (the seeds'
// GPUMemoryTracker): begin resets the peak; end reports peak - start and end - start.
typedef struct {
    tdm_device device;
    int64_t start_allocated;
} tdm_memory_tracker;

tdm_status tdm_memory_tracker_begin(tdm_memory_tracker *t, tdm_device dev);
tdm_status tdm_memory_tracker_end(const tdm_memory_tracker *t, int64_t *peak_delta,
                                  int64_t *net_delta);

#ifdef __cplusplus
}
#endif

#endif

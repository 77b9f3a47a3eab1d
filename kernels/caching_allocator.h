/* caching_allocator.h — the CUDA backend's caching device allocator, after PyTorch's
 * CUDACachingAllocator as documented (docs "CUDA memory management"), in plain C over an abstract
 * raw allocator: cudaMalloc/cudaFree in kernels/cuda_backend.cu, a malloc-backed mock in
 * suites/tests/test_caching_allocator.c. It never includes CUDA headers.
 *
 * The design:
 * - requests are rounded up to multiples of 512 bytes (at least 512);
 * - small requests (<= 1 MiB) are carved from 2 MiB segments; large ones from a 20 MiB segment
 *   when under 10 MiB, else from a segment of the request rounded up to 2 MiB;
 * - a request is served by the best-fitting (smallest sufficient) free block of its stream and
 *   size class (small or large pool); a block is split when what is left is >= 512 bytes (small)
 *   or > 1 MiB (large), else it is handed out whole;
 * - a freed block merges with its free neighbours of the same segment and goes back to its pool;
 *   blocks are reused only on the stream they were allocated for (streams are opaque pointers;
 *   cross-stream use, PyTorch's record_stream, is not handled);
 * - when the raw allocator fails, every fully free cached segment is released and the request
 *   retried once; then it fails with TDM_ERR_OOM and "out of memory on <device>: tried to allocate
 *   X MiB; Y MiB allocated, Z MiB reserved (cached), W MiB free of T MiB";
 * - caching off: each alloc gets a segment of its own rounded size, released on free, so every
 *   alloc and free is one raw call (to measure what caching saves).
 * Every entry point takes the allocator's mutex; raw calls are made under it. */
#ifndef TANDEM_KERNELS_CACHING_ALLOCATOR_H
#define TANDEM_KERNELS_CACHING_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

// The memory underneath: whole segments from the device. raw_alloc returns NULL on failure (it
// may record an error: a status other than TDM_ERR_OOM is passed on as is); raw_free receives the
// size given to raw_alloc. free_bytes and device_name are optional (NULL): what the device has
// free (-1 unknown) and its name ("cuda:0"), for the out-of-memory message.
typedef struct {
    void *(*raw_alloc)(size_t bytes, void *ctx);
    void (*raw_free)(void *p, size_t bytes, void *ctx);
    void *ctx;
    int64_t (*free_bytes)(void *ctx);
    const char *device_name;
} tdm_raw_allocator;

typedef struct tdm_caching_allocator tdm_caching_allocator;

// The allocator's counters. mem: allocated = bytes of the blocks handed out (each block's size:
// the request rounded to 512, or more when a large block's remainder was too small to split, as
// PyTorch counts), reserved = bytes of the raw segments held, their peaks, and n_allocs/n_frees =
// successful tdm_ca_alloc / tdm_ca_free calls. Beside them: raw segment allocations and frees,
// allocations served from the cache (no raw call), and raw failures that emptied the cache.
typedef struct {
    tdm_memory_stats mem;
    int64_t n_segment_allocs, n_segment_frees;
    int64_t n_cache_hits;
    int64_t n_oom_retries;
    int64_t n_segments;  // held now
} tdm_ca_stats;

// The raw allocator is copied. device_total_bytes: for messages, 0 unknown. NULL + error when
// out of host memory or raw lacks its functions.
tdm_caching_allocator *tdm_ca_new(const tdm_raw_allocator *raw, bool caching,
                                  int64_t device_total_bytes);
// Releases every segment (live blocks too) and the allocator. NULL is a no-op.
void tdm_ca_destroy(tdm_caching_allocator *ca);

// A block of at least `bytes` for use on `stream`; NULL + error (TDM_ERR_OOM) on failure.
void *tdm_ca_alloc(tdm_caching_allocator *ca, size_t bytes, void *stream);
// Returns the block to its pool (or to the device, caching off). NULL is a no-op; a pointer the
// allocator did not hand out is TDM_ERR_ARG and changes nothing.
tdm_status tdm_ca_free(tdm_caching_allocator *ca, void *p);
// The size of the live block at p (>= the rounded request), 0 when p is not one.
size_t tdm_ca_block_size(tdm_caching_allocator *ca, const void *p);

// Releases every cached segment that is entirely free; live blocks are untouched.
void tdm_ca_empty_cache(tdm_caching_allocator *ca);
// Releases every segment, live blocks included (their pointers become invalid): teardown.
void tdm_ca_free_all(tdm_caching_allocator *ca);
// Private pools (CUDA graphs, as PyTorch's graph pools): a pool is a stream key that no stream
// uses (kernels/graph.cu takes a unique odd number). While held, its segments are never released
// (empty_cache, the out-of-memory retry, caching off), and its free blocks are reused even with
// caching off: a captured graph's replays write into them, so they must neither go back to the
// device nor to any other pool. A request for a held pool that the device cannot serve fails
// without the out-of-memory retry (it comes from a capturing thread, where the retry's raw frees
// would invalidate the capture). Release drops the hold and gives the pool's entirely free
// segments back; segments with live blocks left (a graph's outputs) go back at a later
// empty_cache once their blocks are freed.
tdm_status tdm_ca_pool_hold(tdm_caching_allocator *ca, void *stream);
void tdm_ca_pool_release(tdm_caching_allocator *ca, void *stream);

// Caching off releases the free cached segments now, and each segment once it is free again.
void tdm_ca_set_caching(tdm_caching_allocator *ca, bool caching);
bool tdm_ca_caching(tdm_caching_allocator *ca);

void tdm_ca_stats_get(tdm_caching_allocator *ca, tdm_ca_stats *out);
void tdm_ca_memory_stats(tdm_caching_allocator *ca, tdm_memory_stats *out);
void tdm_ca_reset_peak(tdm_caching_allocator *ca);  // peaks = the current values

// A printable account: the totals, then each segment (address, size, pool, stream) with its
// blocks in address order (offset, size, used/free). Writes at most n bytes (NUL-terminated when
// n > 0) and returns the full length, as snprintf does.
size_t tdm_ca_summary(tdm_caching_allocator *ca, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif

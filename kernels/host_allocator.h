/* host_allocator.h — the CUDA backend's caching pinned-host allocator, after PyTorch's
 * CachingHostAllocator, in plain C over an abstract raw allocator and abstract events
 * (cudaHostAlloc/cudaHostRegister and cudaEvent_t in kernels/streams.cu, malloc and a mock clock
 * in suites/tests/test_host_allocator.c). It never includes CUDA headers.
 *
 * The design:
 * - a request is rounded up to a power of two (at least 4 KiB, a page) and served by a cached
 *   block of the same kind (tdm_host_kind: pinned, write-combined, registered, mapped) and
 *   rounded size, else by a new raw block;
 * - an asynchronous copy that reads or writes a block records an event on its stream
 *   (tdm_ha_record_event); a freed block whose events have not all completed waits aside, and
 *   becomes reusable only when they have (checked, without blocking, at each alloc and free and
 *   by tdm_ha_process_events) — so the host may free a pinned batch right after enqueuing its copy;
 * - caching off: a freed block goes back to the raw allocator once its events have completed;
 * - empty_cache gives every free, completed block back.
 * Every entry point takes the allocator's mutex; raw calls are made under it. Blocks are kept in
 * a list (a host program holds tens of pinned buffers, not thousands). */
#ifndef TANDEM_KERNELS_HOST_ALLOCATOR_H
#define TANDEM_KERNELS_HOST_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TDM_HA_MIN_BLOCK ((size_t)4096)

// raw_alloc returns NULL with the error set; raw_free gets the size and kind given to raw_alloc.
// event_new returns NULL with the error set; event_query returns 1 when the recorded work is
// done, 0 when not yet, -1 on an error (set).
typedef struct {
    void *(*raw_alloc)(size_t bytes, tdm_host_kind kind, void *ctx);
    void (*raw_free)(void *p, size_t bytes, tdm_host_kind kind, void *ctx);
    void *(*event_new)(void *ctx);
    tdm_status (*event_record)(void *event, void *stream, void *ctx);
    int (*event_query)(void *event, void *ctx);
    void (*event_free)(void *event, void *ctx);
    void *ctx;
} tdm_host_raw_allocator;

typedef struct tdm_host_allocator tdm_host_allocator;

// The raw allocator is copied. NULL + error when out of memory or raw lacks functions.
tdm_host_allocator *tdm_ha_new(const tdm_host_raw_allocator *raw, bool caching);
// Releases every block (live ones too) and their events. NULL is a no-op.
void tdm_ha_destroy(tdm_host_allocator *ha);

// A block of at least `bytes` of `kind` (not TDM_HOST_PAGEABLE); NULL + error on failure.
void *tdm_ha_alloc(tdm_host_allocator *ha, size_t bytes, tdm_host_kind kind);
// Gives the block back: reusable once the events recorded on it have completed. NULL is a no-op;
// a pointer the allocator did not hand out is TDM_ERR_ARG.
tdm_status tdm_ha_free(tdm_host_allocator *ha, void *p);
// An asynchronous copy on `stream` uses the live block containing p: record an event there. A
// pointer in no block of the allocator (pageable memory) is fine: nothing to do, *owned false.
tdm_status tdm_ha_record_event(tdm_host_allocator *ha, const void *p, void *stream, bool *owned);
// Is p inside a live block? (*kind is set when so; kind may be NULL.)
bool tdm_ha_owns(tdm_host_allocator *ha, const void *p, tdm_host_kind *kind);
// Moves freed blocks whose events have all completed to the cache (or the raw allocator, caching
// off). Returns the number still waiting, or -1 on an event error.
int64_t tdm_ha_process_events(tdm_host_allocator *ha);
void tdm_ha_empty_cache(tdm_host_allocator *ha);
void tdm_ha_set_caching(tdm_host_allocator *ha, bool caching);
void tdm_ha_stats_get(tdm_host_allocator *ha, tdm_host_memory_stats *out);

#ifdef __cplusplus
}
#endif

#endif

/* memory.c — memory accounting: the counters every backend updates on alloc and free, the
 * public stats query (dispatched to the device's backend), and the tracker scope that reports
 * the peak and the net change of allocated bytes inside it. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/env_impl.h"
#include "core/tensor_impl.h"

// ---- the cap on one allocation -----------------------------------------------------------

// Read once: the machine's physical memory in bytes (0 when unknown), and the cap, lowered by
// TANDEM_MAX_ALLOC_BYTES (bytes) where a node is shared or a fuzzer replays hostile files.
static pthread_once_t limits_once = PTHREAD_ONCE_INIT;
static size_t machine_memory, alloc_cap = TDM_MAX_ALLOC_BYTES;

static void limits_read(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (size_t)pages <= SIZE_MAX / (size_t)page)
        machine_memory = (size_t)pages * (size_t)page;
    // it lowers the cap, never raises it
    int64_t cap = tdm_env_i64("TANDEM_MAX_ALLOC_BYTES", 1, INT64_MAX, (int64_t)TDM_MAX_ALLOC_BYTES);
    if ((uint64_t)cap < TDM_MAX_ALLOC_BYTES) alloc_cap = (size_t)cap;
}

tdm_status tdm_alloc_check(const char *what, int64_t count, size_t elem_size, bool host) {
    pthread_once(&limits_once, limits_read);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    if (count < 0) return tdm_error_set(TDM_ERR_ARG, "%s: negative size %lld", what, (long long)count);
    if (elem_size && (uint64_t)count > alloc_cap / elem_size)
        return tdm_error_set(TDM_ERR_OOM, "%s: %lld x %zu bytes are over tandem's cap of %.4g GiB "
                             "on one allocation", what, (long long)count, elem_size, alloc_cap / gib);
    size_t bytes = (size_t)count * elem_size;
    if (host && machine_memory && bytes > machine_memory)
        return tdm_error_set(TDM_ERR_OOM, "%s: %zu bytes (%.1f GiB) are more than this machine's "
                             "memory (%.1f GiB)", what, bytes, bytes / gib, machine_memory / gib);
    return TDM_OK;
}

// ---- the counters the backends keep --------------------------------------------------------

// One lock for every counter of every backend: an update is a few additions, and tensors are
// freed from any thread.
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

void tdm_memory_count_alloc(tdm_memory_stats *c, size_t nbytes) {
    pthread_mutex_lock(&count_lock);
    c->allocated += (int64_t)nbytes;
    c->reserved += (int64_t)nbytes;
    if (c->allocated > c->peak_allocated) c->peak_allocated = c->allocated;
    if (c->reserved > c->peak_reserved) c->peak_reserved = c->reserved;
    c->n_allocs++;
    pthread_mutex_unlock(&count_lock);
}

void tdm_memory_count_free(tdm_memory_stats *c, size_t nbytes) {
    pthread_mutex_lock(&count_lock);
    c->allocated -= (int64_t)nbytes;
    c->reserved -= (int64_t)nbytes;
    c->n_frees++;
    pthread_mutex_unlock(&count_lock);
}

void tdm_memory_count_get(const tdm_memory_stats *c, tdm_memory_stats *out) {
    pthread_mutex_lock(&count_lock);
    *out = *c;
    pthread_mutex_unlock(&count_lock);
}

void tdm_memory_count_reset_peak(tdm_memory_stats *c) {
    pthread_mutex_lock(&count_lock);
    c->peak_allocated = c->allocated;
    c->peak_reserved = c->reserved;
    pthread_mutex_unlock(&count_lock);
}

// ---- the public API ----------------------------------------------------------------------

// The backend of `dev`, or NULL with the error set (no backend, device not present, or a
// backend without memory stats).
static const struct tdm_backend_ops *stats_backend(const char *op, tdm_device dev) {
    if (!tdm_device_available(dev)) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (be && (!be->memory_stats || !be->memory_reset_peak)) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    return be;
}

tdm_status tdm_memory_stats_get(tdm_device dev, tdm_memory_stats *out) {
    if (!out) return tdm_error_set(TDM_ERR_ARG, "memory_stats_get: out is NULL");
    const struct tdm_backend_ops *be = stats_backend("memory_stats_get", dev);
    if (!be) return tdm_last_status();
    return be->memory_stats(dev.type == TDM_DEVICE_CPU ? 0 : dev.index, out);
}

tdm_status tdm_memory_reset_peak(tdm_device dev) {
    const struct tdm_backend_ops *be = stats_backend("memory_reset_peak", dev);
    if (!be) return tdm_last_status();
    return be->memory_reset_peak(dev.type == TDM_DEVICE_CPU ? 0 : dev.index);
}

// The caching allocator's controls: optional slots, TDM_ERR_UNSUPPORTED where a backend has none.
// The backend of `dev`, or NULL with the error set.
static const struct tdm_backend_ops *cache_backend(tdm_device dev) {
    if (!tdm_device_available(dev)) return NULL;
    return tdm_backend_get(dev.type);
}

static int backend_index(tdm_device dev) { return dev.type == TDM_DEVICE_CPU ? 0 : dev.index; }

tdm_status tdm_memory_empty_cache(tdm_device dev) {
    const struct tdm_backend_ops *be = cache_backend(dev);
    if (!be) return tdm_last_status();
    if (!be->empty_cache) return tdm_error_unsupported("memory_empty_cache", be);
    return be->empty_cache(backend_index(dev));
}

tdm_status tdm_memory_summary(tdm_device dev, char *buf, size_t n) {
    if (!buf || n == 0) return tdm_error_set(TDM_ERR_ARG, "memory_summary: empty buffer");
    buf[0] = '\0';
    const struct tdm_backend_ops *be = cache_backend(dev);
    if (!be) return tdm_last_status();
    if (!be->memory_summary) return tdm_error_unsupported("memory_summary", be);
    return be->memory_summary(backend_index(dev), buf, n);
}

tdm_status tdm_memory_set_caching(tdm_device dev, bool caching) {
    const struct tdm_backend_ops *be = cache_backend(dev);
    if (!be) return tdm_last_status();
    if (!be->set_caching) return tdm_error_unsupported("memory_set_caching", be);
    return be->set_caching(backend_index(dev), caching);
}

// ---- the tracker scope --------------------------------------------------------------------

tdm_status tdm_memory_tracker_begin(tdm_memory_tracker *t, tdm_device dev) {
    if (!t) return tdm_error_set(TDM_ERR_ARG, "memory_tracker_begin: tracker is NULL");
    TDM_TRY(tdm_memory_reset_peak(dev));
    tdm_memory_stats s;
    TDM_TRY(tdm_memory_stats_get(dev, &s));
    t->device = dev;
    t->start_allocated = s.allocated;
    return TDM_OK;
}

tdm_status tdm_memory_tracker_end(const tdm_memory_tracker *t, int64_t *peak_delta,
                                  int64_t *net_delta) {
    if (!t) return tdm_error_set(TDM_ERR_ARG, "memory_tracker_end: tracker is NULL");
    tdm_memory_stats s;
    TDM_TRY(tdm_memory_stats_get(t->device, &s));
    if (peak_delta) *peak_delta = s.peak_allocated - t->start_allocated;
    if (net_delta) *net_delta = s.allocated - t->start_allocated;
    return TDM_OK;
}

/* ref_stream.c — the reference backend's streams, events and "pinned" host memory: the cheap cpu
 * meanings of tandem/stream.h. Work on the cpu is synchronous, so a stream is a token, waiting and
 * synchronizing return at once, an event records the host clock (CLOCK_MONOTONIC) when it is
 * recorded, host memory of any kind is malloc'd (flagged with its kind by core), and copies are
 * done when they return. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ref/ref.h"

// ---- streams: a token each (allocated, so that leaks show) ----

tdm_status ref_stream_new(int device_index, void **out) {
    (void)device_index;
    *out = malloc(1);
    return *out ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "cpu: out of memory for a stream");
}

void ref_stream_free(void *stream, int device_index) {
    (void)device_index;
    free(stream);
}

tdm_status ref_stream_synchronize(void *stream, int device_index) {
    (void)stream, (void)device_index;
    return TDM_OK;
}

tdm_status ref_stream_wait_event(void *stream, void *event, int device_index) {
    (void)stream, (void)event, (void)device_index;
    return TDM_OK;
}

tdm_status ref_set_current_stream(void *stream, int device_index) {
    (void)stream, (void)device_index;
    return TDM_OK;
}

tdm_status ref_device_synchronize(int device_index) {
    (void)device_index;
    return TDM_OK;
}

// ---- events: the host clock in milliseconds at record time ----

tdm_status ref_event_new(int device_index, void **out) {
    (void)device_index;
    *out = calloc(1, sizeof(double));
    return *out ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "cpu: out of memory for an event");
}

void ref_event_free(void *event, int device_index) {
    (void)device_index;
    free(event);
}

tdm_status ref_event_record(void *event, void *stream, int device_index) {
    (void)stream, (void)device_index;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *(double *)event = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    return TDM_OK;
}

tdm_status ref_event_synchronize(void *event, int device_index) {
    (void)event, (void)device_index;
    return TDM_OK;
}

tdm_status ref_event_query(void *event, int device_index, bool *done) {
    (void)event, (void)device_index;
    *done = true;
    return TDM_OK;
}

tdm_status ref_event_elapsed_ms(void *start, void *end, int device_index, double *ms) {
    (void)device_index;
    *ms = *(const double *)end - *(const double *)start;
    return TDM_OK;
}

// ---- host memory: malloc'd, counted apart from the tensor memory of ref_backend.c ----

static tdm_memory_stats ref_host_memory;

void *ref_host_alloc(size_t nbytes, tdm_host_kind kind, int device_index) {
    (void)device_index;
    void *p = malloc(nbytes);
    if (!p)
        tdm_error_set(TDM_ERR_OOM, "cpu: out of memory allocating %zu bytes of %s host memory",
                      nbytes, tdm_host_kind_name(kind));
    else
        tdm_memory_count_alloc(&ref_host_memory, nbytes);
    return p;
}

void ref_host_free(void *ptr, size_t nbytes, tdm_host_kind kind, int device_index) {
    (void)kind, (void)device_index;
    if (!ptr) return;
    free(ptr);
    tdm_memory_count_free(&ref_host_memory, nbytes);
}

// Nothing is cached: every allocation is a raw one, none waits for a copy.
tdm_status ref_host_stats(int device_index, tdm_host_memory_stats *out) {
    (void)device_index;
    memset(out, 0, sizeof *out);
    tdm_memory_stats m;
    tdm_memory_count_get(&ref_host_memory, &m);
    out->allocated = m.allocated;
    out->reserved = m.reserved;
    out->peak_allocated = m.peak_allocated;
    out->peak_reserved = m.peak_reserved;
    out->n_allocs = out->n_raw_allocs = m.n_allocs;
    out->n_frees = out->n_raw_frees = m.n_frees;
    return TDM_OK;
}

tdm_status ref_host_empty_cache(int device_index) {
    (void)device_index;
    return TDM_OK;
}

// ---- copies: done at once ----

tdm_status ref_copy_async(void *dst, const void *src, size_t nbytes, tdm_copy_dir dir,
                          int device_index, int peer_index, void *stream) {
    (void)dir, (void)device_index, (void)peer_index, (void)stream;
    memmove(dst, src, nbytes);
    return TDM_OK;
}

tdm_status ref_copy_sm_async(void *dst, const void *src, size_t nbytes, int device_index,
                             void *stream) {
    (void)device_index, (void)stream;
    memmove(dst, src, nbytes);
    return TDM_OK;
}

/* host_allocator.c — the caching pinned-host allocator (design in host_allocator.h): raw blocks of
 * power-of-two sizes per host-memory kind, events recorded by the asynchronous copies that use a
 * block, and reuse only once those events have completed. Plain C, no CUDA: built into every
 * tandem library and unit-tested on the CPU with a mock raw allocator and mock events. */
#include "kernels/host_allocator.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"

typedef struct ha_block {
    char *ptr;
    size_t size;  // the rounded size given to raw_alloc
    tdm_host_kind kind;
    bool used;      // handed out and not yet freed
    void **events;  // recorded by copies, not yet seen complete
    int n_events, cap_events;
    struct ha_block *next;
} ha_block;

struct tdm_host_allocator {
    pthread_mutex_t lock;
    tdm_host_raw_allocator raw;
    bool caching;
    ha_block *blocks;  // every block held, used or not
    void **pool;       // completed events, for reuse
    int n_pool, cap_pool;
    tdm_host_memory_stats st;
};

// ---- helpers (the lock held) ---------------------------------------------------------------

// bytes rounded up to a power of two, at least TDM_HA_MIN_BLOCK; 0 when that overflows.
static size_t ha_round(size_t bytes) {
    size_t r = TDM_HA_MIN_BLOCK;
    while (r < bytes) {
        if (r > SIZE_MAX / 2) return 0;
        r *= 2;
    }
    return r;
}

static void ha_release(tdm_host_allocator *ha, ha_block **link) {
    ha_block *b = *link;
    *link = b->next;
    ha->raw.raw_free(b->ptr, b->size, b->kind, ha->raw.ctx);
    ha->st.reserved -= (int64_t)b->size;
    ha->st.n_raw_frees++;
    for (int i = 0; i < b->n_events; i++) ha->raw.event_free(b->events[i], ha->raw.ctx);
    free(b->events);
    free(b);
}

static void ha_pool_put(tdm_host_allocator *ha, void *ev) {
    if (ha->n_pool == ha->cap_pool) {
        int cap = ha->cap_pool ? 2 * ha->cap_pool : 8;
        void **p = realloc(ha->pool, (size_t)cap * sizeof *p);
        if (!p) {
            ha->raw.event_free(ev, ha->raw.ctx);
            return;
        }
        ha->pool = p;
        ha->cap_pool = cap;
    }
    ha->pool[ha->n_pool++] = ev;
}

// Drops the completed events of every block; frees blocks that became free and complete when
// not caching. Returns the freed blocks still waiting, or -1 on an event error (set).
static int64_t ha_process(tdm_host_allocator *ha) {
    int64_t waiting = 0;
    bool failed = false;
    for (ha_block **link = &ha->blocks; *link;) {
        ha_block *b = *link;
        int kept = 0;
        for (int i = 0; i < b->n_events; i++) {
            int q = failed ? 0 : ha->raw.event_query(b->events[i], ha->raw.ctx);
            if (q < 0) failed = true;
            if (q == 1)
                ha_pool_put(ha, b->events[i]);
            else
                b->events[kept++] = b->events[i];
        }
        b->n_events = kept;
        if (!b->used && kept) waiting++;
        if (!b->used && !kept && !ha->caching) {
            ha_release(ha, link);
            continue;
        }
        link = &b->next;
    }
    ha->st.n_blocks_pending = waiting;
    return failed ? -1 : waiting;
}

static ha_block *ha_find(tdm_host_allocator *ha, const void *p, bool exact) {
    const char *c = p;
    for (ha_block *b = ha->blocks; b; b = b->next)
        if (b->used && (exact ? c == b->ptr : c >= b->ptr && c < b->ptr + b->size)) return b;
    return NULL;
}

// Gives back every free block whose events have completed.
static void ha_empty(tdm_host_allocator *ha) {
    for (ha_block **link = &ha->blocks; *link;) {
        if (!(*link)->used && !(*link)->n_events)
            ha_release(ha, link);
        else
            link = &(*link)->next;
    }
}

// ---- the API -----------------------------------------------------------------------------------

tdm_host_allocator *tdm_ha_new(const tdm_host_raw_allocator *raw, bool caching) {
    if (!raw || !raw->raw_alloc || !raw->raw_free || !raw->event_new || !raw->event_record ||
        !raw->event_query || !raw->event_free) {
        tdm_error_set(TDM_ERR_ARG, "host allocator: the raw allocator lacks functions");
        return NULL;
    }
    tdm_host_allocator *ha = calloc(1, sizeof *ha);
    if (!ha) {
        tdm_error_set(TDM_ERR_OOM, "host allocator: out of host memory");
        return NULL;
    }
    pthread_mutex_init(&ha->lock, NULL);
    ha->raw = *raw;
    ha->caching = caching;
    return ha;
}

void tdm_ha_destroy(tdm_host_allocator *ha) {
    if (!ha) return;
    while (ha->blocks) ha_release(ha, &ha->blocks);
    for (int i = 0; i < ha->n_pool; i++) ha->raw.event_free(ha->pool[i], ha->raw.ctx);
    free(ha->pool);
    pthread_mutex_destroy(&ha->lock);
    free(ha);
}

void *tdm_ha_alloc(tdm_host_allocator *ha, size_t bytes, tdm_host_kind kind) {
    size_t size = ha_round(bytes);
    if (!size) {
        tdm_error_set(TDM_ERR_OOM, "host allocator: %zu bytes is too large", bytes);
        return NULL;
    }
    if (kind == TDM_HOST_PAGEABLE || (unsigned)kind >= TDM_HOST_KIND_COUNT) {
        tdm_error_set(TDM_ERR_ARG, "host allocator: kind %d is not page-locked memory", (int)kind);
        return NULL;
    }
    pthread_mutex_lock(&ha->lock);
    (void)ha_process(ha);  // an event error leaves those blocks waiting; the alloc goes on
    ha_block *b = ha->blocks;
    while (b && (b->used || b->n_events || b->kind != kind || b->size != size)) b = b->next;
    if (b) {
        ha->st.n_cache_hits++;
    } else {
        void *p = ha->raw.raw_alloc(size, kind, ha->raw.ctx);
        if (!p) {  // once more, after giving the cache back
            ha_empty(ha);
            p = ha->raw.raw_alloc(size, kind, ha->raw.ctx);
        }
        b = p ? calloc(1, sizeof *b) : NULL;
        if (!b) {
            if (p) ha->raw.raw_free(p, size, kind, ha->raw.ctx);
            if (p) tdm_error_set(TDM_ERR_OOM, "host allocator: out of host memory");
            pthread_mutex_unlock(&ha->lock);
            return NULL;
        }
        b->ptr = p;
        b->size = size;
        b->kind = kind;
        b->next = ha->blocks;
        ha->blocks = b;
        ha->st.n_raw_allocs++;
        ha->st.reserved += (int64_t)size;
        if (ha->st.reserved > ha->st.peak_reserved) ha->st.peak_reserved = ha->st.reserved;
    }
    b->used = true;
    ha->st.allocated += (int64_t)size;
    if (ha->st.allocated > ha->st.peak_allocated) ha->st.peak_allocated = ha->st.allocated;
    ha->st.n_allocs++;
    pthread_mutex_unlock(&ha->lock);
    return b->ptr;
}

tdm_status tdm_ha_free(tdm_host_allocator *ha, void *p) {
    if (!p) return TDM_OK;
    pthread_mutex_lock(&ha->lock);
    ha_block *b = ha_find(ha, p, true);
    if (!b) {
        pthread_mutex_unlock(&ha->lock);
        return tdm_error_set(TDM_ERR_ARG, "host allocator: free of %p, which it did not hand out",
                             p);
    }
    b->used = false;
    ha->st.allocated -= (int64_t)b->size;
    ha->st.n_frees++;
    (void)ha_process(ha);
    pthread_mutex_unlock(&ha->lock);
    return TDM_OK;
}

tdm_status tdm_ha_record_event(tdm_host_allocator *ha, const void *p, void *stream, bool *owned) {
    if (owned) *owned = false;
    pthread_mutex_lock(&ha->lock);
    ha_block *b = ha_find(ha, p, false);
    tdm_status s = TDM_OK;
    if (b && b->n_events == b->cap_events) {
        int cap = b->cap_events ? 2 * b->cap_events : 4;
        void **e = realloc(b->events, (size_t)cap * sizeof *e);
        if (e) {
            b->events = e;
            b->cap_events = cap;
        } else {
            s = tdm_error_set(TDM_ERR_OOM, "host allocator: out of host memory for an event");
        }
    }
    if (b && s == TDM_OK) {
        void *ev = ha->n_pool ? ha->pool[--ha->n_pool] : ha->raw.event_new(ha->raw.ctx);
        s = ev ? ha->raw.event_record(ev, stream, ha->raw.ctx) : tdm_last_status();
        if (s == TDM_OK)
            b->events[b->n_events++] = ev;
        else if (ev)
            ha_pool_put(ha, ev);
        if (owned) *owned = true;
    }
    pthread_mutex_unlock(&ha->lock);
    return s;
}

bool tdm_ha_owns(tdm_host_allocator *ha, const void *p, tdm_host_kind *kind) {
    pthread_mutex_lock(&ha->lock);
    ha_block *b = ha_find(ha, p, false);
    if (b && kind) *kind = b->kind;
    pthread_mutex_unlock(&ha->lock);
    return b != NULL;
}

int64_t tdm_ha_process_events(tdm_host_allocator *ha) {
    pthread_mutex_lock(&ha->lock);
    int64_t n = ha_process(ha);
    pthread_mutex_unlock(&ha->lock);
    return n;
}

void tdm_ha_empty_cache(tdm_host_allocator *ha) {
    pthread_mutex_lock(&ha->lock);
    (void)ha_process(ha);
    ha_empty(ha);
    pthread_mutex_unlock(&ha->lock);
}

void tdm_ha_set_caching(tdm_host_allocator *ha, bool caching) {
    pthread_mutex_lock(&ha->lock);
    ha->caching = caching;
    if (!caching) {
        (void)ha_process(ha);
        ha_empty(ha);
    }
    pthread_mutex_unlock(&ha->lock);
}

void tdm_ha_stats_get(tdm_host_allocator *ha, tdm_host_memory_stats *out) {
    pthread_mutex_lock(&ha->lock);
    (void)ha_process(ha);
    *out = ha->st;
    pthread_mutex_unlock(&ha->lock);
}

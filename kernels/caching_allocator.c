/* caching_allocator.c — the caching device allocator (design in caching_allocator.h): segments
 * from a raw allocator, split into blocks, cached in per-size-class pools keyed by stream,
 * best-fit reuse, coalescing on free, release-and-retry on a raw failure. Plain C, no CUDA: built
 * into every tandem library and unit-tested on the CPU with a mock raw allocator. */
#include "kernels/caching_allocator.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/tensor_impl.h"

// ---- PyTorch's constants ----------------------------------------------------------------

#define CA_MIN_BLOCK ((size_t)512)             // every size is a multiple of this
#define CA_SMALL_SIZE ((size_t)1 << 20)        // <= 1 MiB: the small pool
#define CA_SMALL_BUFFER ((size_t)2 << 20)      // small requests share 2 MiB segments
#define CA_LARGE_BUFFER ((size_t)20 << 20)     // 1-10 MiB requests get 20 MiB segments
#define CA_MIN_LARGE_ALLOC ((size_t)10 << 20)  // from 10 MiB: the request's own segment,
#define CA_ROUND_LARGE ((size_t)2 << 20)       //   rounded up to 2 MiB
#define CA_MIB 1048576.0

// ---- the structures ---------------------------------------------------------------------

typedef struct ca_segment ca_segment;

// A piece of a segment, used or free. Free blocks sit in their pool's list; used ones in the
// live table (keyed by ptr).
typedef struct ca_block {
    char *ptr;
    size_t size;
    bool used;
    ca_segment *seg;
    struct ca_block *prev, *next;            // neighbours in the segment, by address
    struct ca_block *pool_prev, *pool_next;  // the pool's list (free blocks)
    struct ca_block *hash_next;              // the live table's chain (used blocks)
} ca_block;

// One raw allocation: its blocks tile it, in address order, from `first`.
struct ca_segment {
    char *base;
    size_t size;
    void *stream;
    bool small;
    ca_block *first;
    ca_segment *prev, *next;  // the allocator's list, oldest first
};

enum { CA_POOL_SMALL = 0, CA_POOL_LARGE = 1 };

struct tdm_caching_allocator {
    pthread_mutex_t lock;
    tdm_raw_allocator raw;
    bool caching;
    int64_t device_total;
    ca_block *pools[2];  // free blocks of every stream, unordered
    ca_segment *seg_head, *seg_tail;
    ca_block **buckets;  // live blocks by pointer, chained
    size_t n_buckets, n_live;
    void **held;  // private pools (stream keys) whose segments are never released
    int n_held, cap_held;
    tdm_ca_stats st;
};

// ---- sizes ------------------------------------------------------------------------------

// The request rounded up to 512 (at least 512); 0 when that overflows the segment arithmetic.
static size_t ca_round(size_t bytes) {
    if (bytes > SIZE_MAX - CA_LARGE_BUFFER) return 0;
    if (bytes < CA_MIN_BLOCK) return CA_MIN_BLOCK;
    return (bytes + CA_MIN_BLOCK - 1) / CA_MIN_BLOCK * CA_MIN_BLOCK;
}

static bool ca_is_small(size_t rounded) {
    return rounded <= CA_SMALL_SIZE;
}

// The raw segment a rounded request is carved from, when caching.
static size_t ca_segment_size(size_t rounded) {
    if (ca_is_small(rounded)) return CA_SMALL_BUFFER;
    if (rounded < CA_MIN_LARGE_ALLOC) return CA_LARGE_BUFFER;
    return (rounded + CA_ROUND_LARGE - 1) / CA_ROUND_LARGE * CA_ROUND_LARGE;
}

// Split off what is left after `rounded` bytes? Small: at least 512 left; large: over 1 MiB.
static bool ca_should_split(const ca_block *b, size_t rounded) {
    size_t rest = b->size - rounded;
    return b->seg->small ? rest >= CA_MIN_BLOCK : rest > CA_SMALL_SIZE;
}

// ---- the counters (lock held) -----------------------------------------------------------

static void ca_count(tdm_caching_allocator *ca, int64_t d_allocated, int64_t d_reserved) {
    tdm_memory_stats *m = &ca->st.mem;
    m->allocated += d_allocated;
    m->reserved += d_reserved;
    if (m->allocated > m->peak_allocated) m->peak_allocated = m->allocated;
    if (m->reserved > m->peak_reserved) m->peak_reserved = m->reserved;
}

// ---- the pools: free blocks in doubly linked lists --------------------------------------

static ca_block **ca_pool_of(tdm_caching_allocator *ca, const ca_block *b) {
    return &ca->pools[b->seg->small ? CA_POOL_SMALL : CA_POOL_LARGE];
}

static void ca_pool_insert(tdm_caching_allocator *ca, ca_block *b) {
    ca_block **head = ca_pool_of(ca, b);
    b->pool_prev = NULL;
    b->pool_next = *head;
    if (*head) (*head)->pool_prev = b;
    *head = b;
}

static void ca_pool_remove(tdm_caching_allocator *ca, ca_block *b) {
    if (b->pool_prev)
        b->pool_prev->pool_next = b->pool_next;
    else
        *ca_pool_of(ca, b) = b->pool_next;
    if (b->pool_next) b->pool_next->pool_prev = b->pool_prev;
    b->pool_prev = b->pool_next = NULL;
}

// The smallest free block of the pool and stream that holds `rounded` bytes (lowest address on
// a tie, so the choice does not depend on the list's order), or NULL.
static ca_block *ca_best_fit(tdm_caching_allocator *ca, int pool, size_t rounded, void *stream) {
    ca_block *best = NULL;
    for (ca_block *b = ca->pools[pool]; b; b = b->pool_next) {
        if (b->seg->stream != stream || b->size < rounded) continue;
        if (!best || b->size < best->size || (b->size == best->size && b->ptr < best->ptr))
            best = b;
    }
    return best;
}

// ---- the live table: used blocks by pointer ---------------------------------------------

static size_t ca_hash(const void *p, size_t n_buckets) {
    uint64_t h = ((uint64_t)(uintptr_t)p >> 9) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (n_buckets - 1);
}

// Doubles the table when it holds more blocks than buckets; on a failed malloc the chains just
// grow longer.
static void ca_live_grow(tdm_caching_allocator *ca) {
    size_t n = ca->n_buckets * 2;
    ca_block **nb = calloc(n, sizeof *nb);
    if (!nb) return;
    for (size_t i = 0; i < ca->n_buckets; i++) {
        ca_block *b = ca->buckets[i];
        while (b) {
            ca_block *next = b->hash_next;
            size_t h = ca_hash(b->ptr, n);
            b->hash_next = nb[h];
            nb[h] = b;
            b = next;
        }
    }
    free(ca->buckets);
    ca->buckets = nb;
    ca->n_buckets = n;
}

static void ca_live_insert(tdm_caching_allocator *ca, ca_block *b) {
    if (ca->n_live >= ca->n_buckets) ca_live_grow(ca);
    size_t h = ca_hash(b->ptr, ca->n_buckets);
    b->hash_next = ca->buckets[h];
    ca->buckets[h] = b;
    ca->n_live++;
}

// Finds the live block at p; with `unlink`, also takes it out of the table.
static ca_block *ca_live_find(tdm_caching_allocator *ca, const void *p, bool unlink) {
    ca_block **link = &ca->buckets[ca_hash(p, ca->n_buckets)];
    for (; *link; link = &(*link)->hash_next) {
        ca_block *b = *link;
        if (b->ptr != (const char *)p) continue;
        if (unlink) {
            *link = b->hash_next;
            b->hash_next = NULL;
            ca->n_live--;
        }
        return b;
    }
    return NULL;
}

// ---- segments ---------------------------------------------------------------------------

// A new raw segment holding one free block (in no pool yet), or NULL: the raw allocator failed
// (its error, if any, left as it set it) or the host is out of memory (error set).
static ca_segment *ca_segment_new(tdm_caching_allocator *ca, size_t size, void *stream,
                                  bool small) {
    ca_segment *seg = calloc(1, sizeof *seg);
    ca_block *b = calloc(1, sizeof *b);
    if (!seg || !b) {
        free(seg);
        free(b);
        tdm_error_set(TDM_ERR_OOM, "caching allocator: out of host memory for its bookkeeping");
        return NULL;
    }
    seg->base = ca->raw.raw_alloc(size, ca->raw.ctx);
    if (!seg->base) {
        free(seg);
        free(b);
        return NULL;
    }
    seg->size = size;
    seg->stream = stream;
    seg->small = small;
    seg->first = b;
    b->ptr = seg->base;
    b->size = size;
    b->seg = seg;
    seg->prev = ca->seg_tail;
    if (ca->seg_tail)
        ca->seg_tail->next = seg;
    else
        ca->seg_head = seg;
    ca->seg_tail = seg;
    ca->st.n_segment_allocs++;
    ca->st.n_segments++;
    ca_count(ca, 0, (int64_t)size);
    return seg;
}

// Gives the segment back to the raw allocator and frees its blocks' records. The caller has
// taken its blocks out of the pools and the live table (or is dropping both wholesale).
static void ca_segment_release(tdm_caching_allocator *ca, ca_segment *seg) {
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        ca->seg_head = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    else
        ca->seg_tail = seg->prev;
    ca->raw.raw_free(seg->base, seg->size, ca->raw.ctx);
    ca->st.n_segment_frees++;
    ca->st.n_segments--;
    ca_count(ca, 0, -(int64_t)seg->size);
    for (ca_block *b = seg->first; b;) {
        ca_block *next = b->next;
        free(b);
        b = next;
    }
    free(seg);
}

static bool ca_segment_is_free(const ca_segment *seg) {
    return !seg->first->used && !seg->first->next;
}

static bool ca_held(const tdm_caching_allocator *ca, const void *stream) {
    for (int i = 0; i < ca->n_held; i++)
        if (ca->held[i] == stream) return true;
    return false;
}

// Free and not in a held private pool: may go back to the raw allocator.
static bool ca_segment_releasable(const tdm_caching_allocator *ca, const ca_segment *seg) {
    return ca_segment_is_free(seg) && !ca_held(ca, seg->stream);
}

// Releases every entirely free segment outside the held pools (its one block leaves its pool);
// returns how many.
static int ca_release_free_segments(tdm_caching_allocator *ca) {
    int n = 0;
    for (ca_segment *seg = ca->seg_head; seg;) {
        ca_segment *next = seg->next;
        if (ca_segment_releasable(ca, seg)) {
            ca_pool_remove(ca, seg->first);
            ca_segment_release(ca, seg);
            n++;
        }
        seg = next;
    }
    return n;
}

// ---- alloc ------------------------------------------------------------------------------

// Cuts the block down to `rounded` when the rest is worth keeping; the rest, a new free block
// right after it, joins the pool. Without host memory for the record it is not split.
static void ca_split(tdm_caching_allocator *ca, ca_block *b, size_t rounded) {
    if (!ca_should_split(b, rounded)) return;
    ca_block *rest = calloc(1, sizeof *rest);
    if (!rest) return;
    rest->ptr = b->ptr + rounded;
    rest->size = b->size - rounded;
    rest->seg = b->seg;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = rounded;
    ca_pool_insert(ca, rest);
}

static const char *ca_device_name(const tdm_caching_allocator *ca) {
    return ca->raw.device_name ? ca->raw.device_name : "device";
}

static void ca_error_oom(tdm_caching_allocator *ca, size_t bytes) {
    int64_t free_b = ca->raw.free_bytes ? ca->raw.free_bytes(ca->raw.ctx) : -1;
    char free_s[48] = "unknown", total_s[48] = "unknown";
    if (free_b >= 0) snprintf(free_s, sizeof free_s, "%.2f MiB", (double)free_b / CA_MIB);
    if (ca->device_total > 0)
        snprintf(total_s, sizeof total_s, "%.2f MiB", (double)ca->device_total / CA_MIB);
    tdm_error_set(TDM_ERR_OOM,
                  "out of memory on %s: tried to allocate %.2f MiB; %.2f MiB allocated, %.2f MiB "
                  "reserved (cached), %s free of %s",
                  ca_device_name(ca), (double)bytes / CA_MIB, (double)ca->st.mem.allocated / CA_MIB,
                  (double)ca->st.mem.reserved / CA_MIB, free_s, total_s);
}

// A new segment for the request; on a raw out-of-memory, releases the free cached segments and
// tries once more — except for a held private pool: its requests come from a thread capturing a
// CUDA graph, where a raw free (cudaFree) would invalidate the capture (PyTorch skips the retry
// during capture too), so it fails with TDM_ERR_OOM at once. NULL with the error set.
static ca_segment *ca_segment_for(tdm_caching_allocator *ca, size_t bytes, size_t rounded,
                                  void *stream) {
    size_t size = ca->caching ? ca_segment_size(rounded) : rounded;
    bool small = ca_is_small(rounded);
    bool may_release = !ca_held(ca, stream);
    for (int attempt = 0; attempt < 2; attempt++) {
        tdm_error_clear();  // so that an error the raw allocator records can be told apart
        ca_segment *seg = ca_segment_new(ca, size, stream, small);
        if (seg) return seg;
        tdm_status s = tdm_last_status();
        if (s != TDM_OK && s != TDM_ERR_OOM) return NULL;  // not a shortage: passed on as is
        if (attempt == 1 || !may_release || ca_release_free_segments(ca) == 0)
            break;  // nothing to retry
        ca->st.n_oom_retries++;
    }
    ca_error_oom(ca, bytes);
    return NULL;
}

static void *ca_alloc_locked(tdm_caching_allocator *ca, size_t bytes, void *stream) {
    size_t rounded = ca_round(bytes);
    if (rounded == 0) {
        ca_error_oom(ca, bytes);
        return NULL;
    }
    ca_block *b = NULL;
    if (ca->caching || ca_held(ca, stream)) {  // a held pool reuses its blocks even uncached
        b = ca_best_fit(ca, ca_is_small(rounded) ? CA_POOL_SMALL : CA_POOL_LARGE, rounded, stream);
        if (b) {
            ca_pool_remove(ca, b);
            ca->st.n_cache_hits++;
        }
    }
    if (!b) {
        ca_segment *seg = ca_segment_for(ca, bytes, rounded, stream);
        if (!seg) return NULL;
        b = seg->first;
    }
    ca_split(ca, b, rounded);
    b->used = true;
    ca_live_insert(ca, b);
    ca->st.mem.n_allocs++;
    ca_count(ca, (int64_t)b->size, 0);
    return b->ptr;
}

// ---- free -------------------------------------------------------------------------------

// Absorbs b's successor `next` (free, in no pool) into b.
static void ca_absorb_next(ca_block *b) {
    ca_block *next = b->next;
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    free(next);
}

static void ca_free_locked(tdm_caching_allocator *ca, ca_block *b) {
    ca->st.mem.n_frees++;
    ca_count(ca, -(int64_t)b->size, 0);
    b->used = false;
    if (b->next && !b->next->used) {
        ca_pool_remove(ca, b->next);
        ca_absorb_next(b);
    }
    if (b->prev && !b->prev->used) {
        ca_block *prev = b->prev;
        ca_pool_remove(ca, prev);
        ca_absorb_next(prev);
        b = prev;
    }
    ca_pool_insert(ca, b);
    if (!ca->caching && ca_segment_releasable(ca, b->seg)) {
        ca_pool_remove(ca, b);
        ca_segment_release(ca, b->seg);
    }
}

// ---- the public entry points ------------------------------------------------------------

tdm_caching_allocator *tdm_ca_new(const tdm_raw_allocator *raw, bool caching,
                                  int64_t device_total_bytes) {
    if (!raw || !raw->raw_alloc || !raw->raw_free) {
        tdm_error_set(TDM_ERR_ARG, "caching allocator: a raw allocator needs alloc and free");
        return NULL;
    }
    tdm_caching_allocator *ca = calloc(1, sizeof *ca);
    ca_block **buckets = calloc(64, sizeof *buckets);
    if (!ca || !buckets || pthread_mutex_init(&ca->lock, NULL) != 0) {
        free(ca);
        free(buckets);
        tdm_error_set(TDM_ERR_OOM, "caching allocator: out of host memory");
        return NULL;
    }
    ca->raw = *raw;
    ca->caching = caching;
    ca->device_total = device_total_bytes;
    ca->buckets = buckets;
    ca->n_buckets = 64;
    return ca;
}

void *tdm_ca_alloc(tdm_caching_allocator *ca, size_t bytes, void *stream) {
    if (!ca) {
        tdm_error_set(TDM_ERR_ARG, "caching allocator: NULL allocator");
        return NULL;
    }
    pthread_mutex_lock(&ca->lock);
    void *p = ca_alloc_locked(ca, bytes, stream);
    pthread_mutex_unlock(&ca->lock);
    return p;
}

tdm_status tdm_ca_free(tdm_caching_allocator *ca, void *p) {
    if (!ca || !p) return TDM_OK;
    pthread_mutex_lock(&ca->lock);
    ca_block *b = ca_live_find(ca, p, true);
    if (b) ca_free_locked(ca, b);
    pthread_mutex_unlock(&ca->lock);
    if (!b)
        return tdm_error_set(TDM_ERR_ARG,
                             "caching allocator: free of %p, which it did not hand "
                             "out (or already freed)",
                             p);
    return TDM_OK;
}

size_t tdm_ca_block_size(tdm_caching_allocator *ca, const void *p) {
    if (!ca || !p) return 0;
    pthread_mutex_lock(&ca->lock);
    ca_block *b = ca_live_find(ca, p, false);
    size_t size = b ? b->size : 0;
    pthread_mutex_unlock(&ca->lock);
    return size;
}

void tdm_ca_empty_cache(tdm_caching_allocator *ca) {
    if (!ca) return;
    pthread_mutex_lock(&ca->lock);
    ca_release_free_segments(ca);
    pthread_mutex_unlock(&ca->lock);
}

void tdm_ca_free_all(tdm_caching_allocator *ca) {
    if (!ca) return;
    pthread_mutex_lock(&ca->lock);
    while (ca->seg_head) ca_segment_release(ca, ca->seg_head);
    for (size_t i = 0; i < ca->n_buckets; i++) ca->buckets[i] = NULL;
    ca->pools[CA_POOL_SMALL] = ca->pools[CA_POOL_LARGE] = NULL;
    ca->n_live = 0;
    ca->st.mem.allocated = 0;
    pthread_mutex_unlock(&ca->lock);
}

void tdm_ca_destroy(tdm_caching_allocator *ca) {
    if (!ca) return;
    tdm_ca_free_all(ca);
    pthread_mutex_destroy(&ca->lock);
    free(ca->buckets);
    free(ca->held);
    free(ca);
}

tdm_status tdm_ca_pool_hold(tdm_caching_allocator *ca, void *stream) {
    if (!ca) return tdm_error_set(TDM_ERR_ARG, "caching allocator: NULL allocator");
    pthread_mutex_lock(&ca->lock);
    tdm_status s = TDM_OK;
    if (!ca_held(ca, stream)) {
        if (ca->n_held == ca->cap_held) {
            int cap = ca->cap_held ? 2 * ca->cap_held : 4;
            void **h = realloc(ca->held, (size_t)cap * sizeof *h);
            if (h) {
                ca->held = h;
                ca->cap_held = cap;
            }
        }
        if (ca->n_held < ca->cap_held)
            ca->held[ca->n_held++] = stream;
        else
            s = tdm_error_set(TDM_ERR_OOM, "caching allocator: out of host memory");
    }
    pthread_mutex_unlock(&ca->lock);
    return s;
}

void tdm_ca_pool_release(tdm_caching_allocator *ca, void *stream) {
    if (!ca) return;
    pthread_mutex_lock(&ca->lock);
    for (int i = 0; i < ca->n_held; i++)
        if (ca->held[i] == stream) {
            ca->held[i] = ca->held[--ca->n_held];
            break;
        }
    for (ca_segment *seg = ca->seg_head; seg;) {  // its free segments go back now
        ca_segment *next = seg->next;
        if (seg->stream == stream && ca_segment_is_free(seg)) {
            ca_pool_remove(ca, seg->first);
            ca_segment_release(ca, seg);
        }
        seg = next;
    }
    pthread_mutex_unlock(&ca->lock);
}

void tdm_ca_set_caching(tdm_caching_allocator *ca, bool caching) {
    if (!ca) return;
    pthread_mutex_lock(&ca->lock);
    ca->caching = caching;
    if (!caching) ca_release_free_segments(ca);
    pthread_mutex_unlock(&ca->lock);
}

bool tdm_ca_caching(tdm_caching_allocator *ca) {
    if (!ca) return false;
    pthread_mutex_lock(&ca->lock);
    bool on = ca->caching;
    pthread_mutex_unlock(&ca->lock);
    return on;
}

void tdm_ca_stats_get(tdm_caching_allocator *ca, tdm_ca_stats *out) {
    pthread_mutex_lock(&ca->lock);
    *out = ca->st;
    pthread_mutex_unlock(&ca->lock);
}

void tdm_ca_memory_stats(tdm_caching_allocator *ca, tdm_memory_stats *out) {
    pthread_mutex_lock(&ca->lock);
    *out = ca->st.mem;
    pthread_mutex_unlock(&ca->lock);
}

void tdm_ca_reset_peak(tdm_caching_allocator *ca) {
    pthread_mutex_lock(&ca->lock);
    ca->st.mem.peak_allocated = ca->st.mem.allocated;
    ca->st.mem.peak_reserved = ca->st.mem.reserved;
    pthread_mutex_unlock(&ca->lock);
}

// ---- the summary ------------------------------------------------------------------------

typedef struct {
    char *buf;
    size_t n, len;  // len: the full length so far, possibly past n
} ca_text;

static void ca_appendf(ca_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ca_appendf(ca_text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *at = t->len < t->n ? t->buf + t->len : NULL;
    int k = vsnprintf(at, at ? t->n - t->len : 0, fmt, ap);
    va_end(ap);
    if (k > 0) t->len += (size_t)k;
}

size_t tdm_ca_summary(tdm_caching_allocator *ca, char *buf, size_t n) {
    ca_text t = {buf, buf ? n : 0, 0};
    if (t.n) buf[0] = '\0';
    if (!ca) return 0;
    pthread_mutex_lock(&ca->lock);
    const tdm_ca_stats *s = &ca->st;
    ca_appendf(&t, "caching allocator on %s: caching %s\n", ca_device_name(ca),
               ca->caching ? "on" : "off");
    ca_appendf(&t,
               "allocated %" PRId64 " B (%.2f MiB, peak %.2f MiB), reserved %" PRId64
               " B (%.2f MiB, peak %.2f MiB)\n",
               s->mem.allocated, (double)s->mem.allocated / CA_MIB,
               (double)s->mem.peak_allocated / CA_MIB, s->mem.reserved,
               (double)s->mem.reserved / CA_MIB, (double)s->mem.peak_reserved / CA_MIB);
    ca_appendf(&t,
               "allocs %" PRId64 ", frees %" PRId64 ", cache hits %" PRId64
               ", segment allocs %" PRId64 ", segment frees %" PRId64 ", oom retries %" PRId64 "\n",
               s->mem.n_allocs, s->mem.n_frees, s->n_cache_hits, s->n_segment_allocs,
               s->n_segment_frees, s->n_oom_retries);
    ca_appendf(&t, "%" PRId64 " segments\n", s->n_segments);
    for (const ca_segment *seg = ca->seg_head; seg; seg = seg->next) {
        char stream[32] = "default";  // the NULL stream
        if (seg->stream) snprintf(stream, sizeof stream, "%p", seg->stream);
        ca_appendf(&t, "segment %p size %zu %s stream %s\n", (void *)seg->base, seg->size,
                   seg->small ? "small" : "large", stream);
        for (const ca_block *b = seg->first; b; b = b->next)
            ca_appendf(&t, "  block offset %zu size %zu %s\n", (size_t)(b->ptr - seg->base),
                       b->size, b->used ? "used" : "free");
    }
    pthread_mutex_unlock(&ca->lock);
    return t.len;
}

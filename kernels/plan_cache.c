/* plan_cache.c — the plan caches of plan_cache.h: chained hashing (FNV-1a over the key bytes),
 * doubling the bucket array when the load passes 1, one mutex. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"
#include "kernels/plan_cache.h"

typedef struct plan_entry {
    struct plan_entry *next;
    uint64_t hash;
    size_t key_len;
    void *value;
    unsigned char key[];   // key_len bytes
} plan_entry;

struct tdm_plan_cache {
    pthread_mutex_t lock;
    void (*destroy)(void *value);
    plan_entry **buckets;
    size_t n_buckets, n_entries;   // n_buckets: a power of two
};

static uint64_t fnv1a(const void *key, size_t n) {
    const unsigned char *p = key;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

tdm_plan_cache *tdm_plan_cache_new(void (*destroy)(void *value)) {
    tdm_plan_cache *c = calloc(1, sizeof *c);
    if (c) c->buckets = calloc(16, sizeof *c->buckets);
    if (!c || !c->buckets) {
        free(c);
        tdm_error_set(TDM_ERR_OOM, "plan cache: out of host memory");
        return NULL;
    }
    c->n_buckets = 16;
    c->destroy = destroy;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void clear_locked(tdm_plan_cache *c) {
    for (size_t b = 0; b < c->n_buckets; b++) {
        for (plan_entry *e = c->buckets[b], *next; e; e = next) {
            next = e->next;
            if (c->destroy) c->destroy(e->value);
            free(e);
        }
        c->buckets[b] = NULL;
    }
    c->n_entries = 0;
}

void tdm_plan_cache_free(tdm_plan_cache *c) {
    if (!c) return;
    clear_locked(c);
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

void tdm_plan_cache_clear(tdm_plan_cache *c) {
    pthread_mutex_lock(&c->lock);
    clear_locked(c);
    pthread_mutex_unlock(&c->lock);
}

size_t tdm_plan_cache_size(tdm_plan_cache *c) {
    pthread_mutex_lock(&c->lock);
    size_t n = c->n_entries;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static plan_entry *find_locked(tdm_plan_cache *c, uint64_t h, const void *key, size_t key_len) {
    for (plan_entry *e = c->buckets[h & (c->n_buckets - 1)]; e; e = e->next)
        if (e->hash == h && e->key_len == key_len && !memcmp(e->key, key, key_len)) return e;
    return NULL;
}

void *tdm_plan_cache_find(tdm_plan_cache *c, const void *key, size_t key_len) {
    const uint64_t h = fnv1a(key, key_len);
    pthread_mutex_lock(&c->lock);
    plan_entry *e = find_locked(c, h, key, key_len);
    void *v = e ? e->value : NULL;
    pthread_mutex_unlock(&c->lock);
    return v;
}

// Doubles the buckets (a failure to grow only makes chains longer).
static void grow_locked(tdm_plan_cache *c) {
    size_t n = c->n_buckets * 2;
    plan_entry **nb = calloc(n, sizeof *nb);
    if (!nb) return;
    for (size_t b = 0; b < c->n_buckets; b++) {
        for (plan_entry *e = c->buckets[b], *next; e; e = next) {
            next = e->next;
            e->next = nb[e->hash & (n - 1)];
            nb[e->hash & (n - 1)] = e;
        }
    }
    free(c->buckets);
    c->buckets = nb;
    c->n_buckets = n;
}

tdm_status tdm_plan_cache_insert(tdm_plan_cache *c, const void *key, size_t key_len, void *value) {
    const uint64_t h = fnv1a(key, key_len);
    pthread_mutex_lock(&c->lock);
    if (find_locked(c, h, key, key_len)) {
        pthread_mutex_unlock(&c->lock);
        if (c->destroy) c->destroy(value);
        return TDM_OK;
    }
    plan_entry *e = malloc(sizeof *e + key_len);
    if (!e) {
        pthread_mutex_unlock(&c->lock);
        if (c->destroy) c->destroy(value);
        return tdm_error_set(TDM_ERR_OOM, "plan cache: out of host memory");
    }
    e->hash = h;
    e->key_len = key_len;
    e->value = value;
    memcpy(e->key, key, key_len);
    if (c->n_entries + 1 > c->n_buckets) grow_locked(c);
    e->next = c->buckets[h & (c->n_buckets - 1)];
    c->buckets[h & (c->n_buckets - 1)] = e;
    c->n_entries++;
    pthread_mutex_unlock(&c->lock);
    return TDM_OK;
}

void tdm_conv_plan_key_make(tdm_conv_plan_key *k, int device, int pass, tdm_dtype dtype,
                            int layout, int mode, int tf32, const int64_t x[4],
                            const int64_t w[4], const int64_t y[4], const tdm_conv2d_params *p,
                            const int32_t align[3]) {
    memset(k, 0, sizeof *k);
    k->device = device;
    k->pass = pass;
    k->dtype = (int32_t)dtype;
    k->layout = layout;
    k->mode = mode;
    k->tf32 = tf32 ? 1 : 0;
    for (int i = 0; i < 4; i++) {
        k->x[i] = x[i];
        k->w[i] = w[i];
        k->y[i] = y[i];
    }
    for (int i = 0; i < 2; i++) {
        k->stride[i] = p->stride[i];
        k->padding[i] = p->padding[i];
        k->padding_extra[i] = p->padding_extra[i];
        k->dilation[i] = p->dilation[i];
    }
    k->groups = p->groups;
    for (int i = 0; i < 3; i++) k->align[i] = align[i];
}

int32_t tdm_ptr_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int32_t align = 16;
    while (align > 1 && a % (uintptr_t)align) align /= 2;
    return align;
}

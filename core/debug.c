/* debug.c — core's debug mode (include/tandem/debug.h): poisoning new tensors with NaN, and guard
 * regions before and after each storage, checked when the storage is freed. tensor.c calls the
 * three hooks below only when a mode is on (one branch each when off). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "core/tensor_impl.h"

#define GUARD_BYTE 0xA7   // the pattern a guard region holds

static atomic_bool poison_on, guards_on;
static atomic_llong violations;
static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_msg[256];

void tdm_debug_set_poison(bool on) { atomic_store(&poison_on, on); }
bool tdm_debug_poison(void) { return atomic_load(&poison_on); }
void tdm_debug_set_guards(bool on) { atomic_store(&guards_on, on); }
bool tdm_debug_guards(void) { return atomic_load(&guards_on); }
int64_t tdm_debug_guard_violations(void) { return (int64_t)atomic_load(&violations); }

const char *tdm_debug_last_violation(void) {
    static char copy[sizeof last_msg];
    pthread_mutex_lock(&msg_lock);
    memcpy(copy, last_msg, sizeof copy);
    pthread_mutex_unlock(&msg_lock);
    return copy;
}

// ---- poison ------------------------------------------------------------------------------

// Fills t's storage with NaN (floating dtypes) or 0x5A bytes through its backend.
tdm_status tdm_debug_poison_tensor(tdm_tensor *t) {
    size_t n = t->storage->nbytes;
    if (!n) return TDM_OK;
    unsigned char *host = malloc(n);
    if (!host) return tdm_error_set(TDM_ERR_OOM, "debug poison: out of host memory");
    int64_t k = t->numel;
    switch (t->dtype) {
    case TDM_DTYPE_F32:
        for (int64_t i = 0; i < k; i++) ((float *)host)[i] = NAN;
        break;
    case TDM_DTYPE_F64:
        for (int64_t i = 0; i < k; i++) ((double *)host)[i] = NAN;
        break;
    case TDM_DTYPE_F16:
        for (int64_t i = 0; i < k; i++) ((uint16_t *)host)[i] = 0x7E00;
        break;
    case TDM_DTYPE_BF16:
        for (int64_t i = 0; i < k; i++) ((uint16_t *)host)[i] = 0x7FC0;
        break;
    default: memset(host, 0x5A, n); break;
    }
    tdm_status s = t->storage->backend->copy_from_host(t->storage->data, host, n,
                                                         t->device.index);
    free(host);
    return s;
}

// ---- guards ------------------------------------------------------------------------------

// Allocates nbytes with a guard region on each side; returns the data pointer (base + guard).
void *tdm_debug_guarded_alloc(const struct tdm_backend_ops *be, size_t nbytes, int dev) {
    size_t g = TDM_DEBUG_GUARD_BYTES;
    unsigned char *base = be->alloc(nbytes + 2 * g, dev);
    if (!base) return NULL;
    unsigned char pat[TDM_DEBUG_GUARD_BYTES];
    memset(pat, GUARD_BYTE, g);
    if (be->copy_from_host(base, pat, g, dev) != TDM_OK ||
        be->copy_from_host(base + g + nbytes, pat, g, dev) != TDM_OK) {
        be->free(base, nbytes + 2 * g, dev);
        return NULL;
    }
    return base + g;
}

// Checks both guards of a guarded storage (t is a tensor viewing it, for the message), then frees.
void tdm_debug_guarded_free(const tdm_tensor *t, tdm_storage *s) {
    size_t g = TDM_DEBUG_GUARD_BYTES, n = s->nbytes ? s->nbytes : 1;
    unsigned char *base = (unsigned char *)s->data - g;
    unsigned char got[2][TDM_DEBUG_GUARD_BYTES];
    bool ok = s->backend->copy_to_host(got[0], base, g, s->device.index) == TDM_OK &&
              s->backend->copy_to_host(got[1], base + g + n, g, s->device.index) == TDM_OK;
    int where = -1;
    size_t at = 0;
    for (int side = 0; ok && side < 2 && where < 0; side++)
        for (size_t i = 0; i < g; i++)
            if (got[side][i] != GUARD_BYTE) {
                where = side;
                at = side ? i : g - i;
                break;
            }
    if (!ok || where >= 0) {
        atomic_fetch_add(&violations, 1);
        char shape[96];
        pthread_mutex_lock(&msg_lock);
        if (!ok)
            snprintf(last_msg, sizeof last_msg, "guard check of a %s %s tensor: could not read "
                     "its guards back", tdm_shape_str(t->ndim, t->shape, shape, sizeof shape),
                     tdm_dtype_name(t->dtype));
        else
            snprintf(last_msg, sizeof last_msg, "guard damaged %s a %s %s tensor (%zu bytes): "
                     "byte %zu %s its data", where ? "after" : "before",
                     tdm_shape_str(t->ndim, t->shape, shape, sizeof shape),
                     tdm_dtype_name(t->dtype), s->nbytes, at, where ? "past the end of" :
                     "before the start of");
        pthread_mutex_unlock(&msg_lock);
        fprintf(stderr, "tandem debug: %s\n", tdm_debug_last_violation());
    }
    s->backend->free(base, n + 2 * g, s->device.index);
}

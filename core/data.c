/* data.c — the data loader of tandem/data.h: batches of rows of an in-memory (x, y), a seeded
 * Fisher-Yates shuffle per epoch, drop_last, and worker threads that assemble batches ahead.
 *
 * Workers: with W workers, worker w assembles batches w, w + W, w + 2W, ... of the epoch, in that
 * order, into its own ring of `prefetch` slots; its k-th batch (batch w + kW) goes to slot
 * k % prefetch. The consumer takes batch b from worker b % W, slot (b / W) % prefetch, so batches
 * come out in order whatever the number of workers, and each worker runs at most `prefetch`
 * batches ahead of the consumer. One mutex and one condition variable guard the counters of
 * every ring. A new epoch (or tdm_loader_free) stops the workers, joins them, frees the batches
 * they made that nobody took, and starts fresh threads: nothing outlives its epoch. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "core/tensor_impl.h"

#define LOADER_MAX_WORKERS 256
#define LOADER_MAX_PREFETCH 1024

// One assembled batch, or the error that stopped its worker.
typedef struct {
    tdm_tensor *x, *y;
    tdm_status status;
    char msg[256];
} loader_slot;

typedef struct {
    tdm_loader *l;
    int index;          // w: this worker assembles batches w, w + W, ...
    loader_slot *ring;  // prefetch slots
    int64_t produced;   // batches this worker has put in its ring this epoch
    int64_t consumed;   // ... and the consumer has taken out
    pthread_t thread;
    bool running;  // a thread was started and not yet joined
} loader_worker;

struct tdm_loader {
    tdm_tensor *x, *y;    // x (N, ...) float or i64/i32, y (N, ...) i64 or i32; both on the cpu
    tdm_loader_params p;  // prefetch resolved (>= 1)
    tdm_device pin_dev;   // with p.pin_memory: the device batches are pinned for
    int64_t n;            // N: rows
    size_t x_row_bytes, y_row_bytes;
    int64_t num_batches;
    int64_t *perm;  // (N) the row order of this epoch

    bool started;  // an epoch has been started
    int64_t epoch;
    int64_t next_batch;  // the batch the consumer gets next
    tdm_status failed;   // an error a worker hit this epoch: next() reports it until a restart
    char failed_msg[320];

    pthread_mutex_t lock;
    pthread_cond_t changed;  // any ring's counters moved, or stop was set
    bool stop;
    loader_worker *workers;  // p.workers of them
};

// ---- the shuffle ---------------------------------------------------------------------------

// perm = 0..N-1, then, when shuffling, Fisher-Yates driven by the uniform stream (seed, epoch),
// bits(m) = tdm_philox_bits(seed, epoch, m): step k = 0..N-2 swaps perm[i] and perm[j] with
// i = N-1-k, r = bits(2k) << 32 | bits(2k+1) (64 random bits) and j = floor(r * (i+1) / 2^64)
// (exact in 128-bit integers, j in [0, i]; the bias is below (i+1) / 2^64).
static void loader_permute(int64_t *perm, int64_t n, bool shuffle, uint64_t seed, uint64_t epoch) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (!shuffle) return;
    for (int64_t i = n - 1; i >= 1; i--) {
        uint64_t k = (uint64_t)(n - 1 - i);
        uint64_t r = (uint64_t)tdm_philox_bits(seed, epoch, 2 * k) << 32 |
                     tdm_philox_bits(seed, epoch, 2 * k + 1);
        int64_t j = (int64_t)(((unsigned __int128)r * (unsigned __int128)(i + 1)) >> 64);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

// ---- assembling one batch --------------------------------------------------------------------

// Rows perm[b*B .. min((b+1)*B, N)) of x and y gathered into new cpu tensors.
static tdm_status loader_assemble(const tdm_loader *l, int64_t b, tdm_tensor **xb,
                                  tdm_tensor **yb) {
    *xb = *yb = NULL;
    int64_t start = b * l->p.batch_size;
    int64_t end = start + l->p.batch_size < l->n ? start + l->p.batch_size : l->n;
    int64_t rows = end - start;

    int64_t shape[TDM_MAX_DIMS], yshape[TDM_MAX_DIMS];
    int ndim = tdm_tensor_ndim(l->x), yndim = tdm_tensor_ndim(l->y);
    memcpy(shape, tdm_tensor_shape(l->x), (size_t)ndim * sizeof shape[0]);
    memcpy(yshape, tdm_tensor_shape(l->y), (size_t)yndim * sizeof yshape[0]);
    shape[0] = yshape[0] = rows;
    tdm_host_kind kind = l->p.pin_memory ? TDM_HOST_PINNED : TDM_HOST_PAGEABLE;
    tdm_tensor *bx = tdm_tensor_empty_host(ndim, shape, tdm_tensor_dtype(l->x), kind, l->pin_dev);
    tdm_tensor *by =
        bx ? tdm_tensor_empty_host(yndim, yshape, tdm_tensor_dtype(l->y), kind, l->pin_dev) : NULL;
    if (!bx || !by) {
        tdm_tensor_free(bx);
        return tdm_last_status();
    }
    const char *x_src = tdm_tensor_data_const(l->x), *y_src = tdm_tensor_data_const(l->y);
    char *x_dst = tdm_tensor_data(bx), *y_dst = tdm_tensor_data(by);
    for (int64_t r = 0; r < rows; r++) {
        int64_t row = l->perm[start + r];
        memcpy(x_dst + (size_t)r * l->x_row_bytes, x_src + (size_t)row * l->x_row_bytes,
               l->x_row_bytes);
        memcpy(y_dst + (size_t)r * l->y_row_bytes, y_src + (size_t)row * l->y_row_bytes,
               l->y_row_bytes);
    }
    *xb = bx;
    *yb = by;
    return TDM_OK;
}

// ---- the workers ------------------------------------------------------------------------------

static void *loader_worker_main(void *arg) {
    loader_worker *w = arg;
    tdm_loader *l = w->l;
    int64_t nw = l->p.workers, depth = l->p.prefetch;
    for (int64_t k = 0;; k++) {
        int64_t b = w->index + k * nw;
        if (b >= l->num_batches) break;

        pthread_mutex_lock(&l->lock);
        while (!l->stop && w->produced - w->consumed >= depth)
            pthread_cond_wait(&l->changed, &l->lock);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->lock);
        if (stop) break;

        loader_slot got = {0};
        got.status = loader_assemble(l, b, &got.x, &got.y);
        if (got.status != TDM_OK) snprintf(got.msg, sizeof got.msg, "%s", tdm_last_error());

        pthread_mutex_lock(&l->lock);
        stop = l->stop;
        if (!stop) {
            w->ring[k % depth] = got;
            w->produced++;
            pthread_cond_broadcast(&l->changed);
        }
        pthread_mutex_unlock(&l->lock);
        if (stop) {  // the epoch was abandoned while this batch was being made
            tdm_tensor_free(got.x);
            tdm_tensor_free(got.y);
            break;
        }
        if (got.status != TDM_OK) break;  // the consumer reports it
    }
    return NULL;
}

// Stops and joins the workers, then frees the batches left in their rings.
static void loader_stop_workers(tdm_loader *l) {
    if (!l->workers) return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < l->p.workers; i++) {
        loader_worker *w = &l->workers[i];
        if (w->running) pthread_join(w->thread, NULL);
        w->running = false;
        for (int64_t k = w->consumed; k < w->produced; k++) {
            loader_slot *s = &w->ring[k % l->p.prefetch];
            tdm_tensor_free(s->x);
            tdm_tensor_free(s->y);
            s->x = s->y = NULL;
        }
        w->produced = w->consumed = 0;
    }
    l->stop = false;
}

// ---- the public API ----------------------------------------------------------------------------

void tdm_loader_free(tdm_loader *l) {
    if (!l) return;
    loader_stop_workers(l);
    if (l->workers) {
        for (int i = 0; i < l->p.workers; i++) free(l->workers[i].ring);
        free(l->workers);
    }
    pthread_cond_destroy(&l->changed);
    pthread_mutex_destroy(&l->lock);
    free(l->perm);
    tdm_tensor_free(l->x);
    tdm_tensor_free(l->y);
    free(l);
}

static tdm_status loader_check(const tdm_tensor *x, const tdm_tensor *y,
                               const tdm_loader_params *p) {
    if (!p) return tdm_error_set(TDM_ERR_ARG, "loader: params is NULL");
    TDM_TRY(tdm_check_tensor("loader", "x", x));
    TDM_TRY(tdm_check_tensor("loader", "y", y));
    char s[96], t[96];
    if (tdm_tensor_device(x).type != TDM_DEVICE_CPU || tdm_tensor_device(y).type != TDM_DEVICE_CPU)
        return tdm_error_set(TDM_ERR_DEVICE, "loader: x and y must be on the cpu, got %s and %s",
                             tdm_device_str(tdm_tensor_device(x), s, sizeof s),
                             tdm_device_str(tdm_tensor_device(y), t, sizeof t));
    if (tdm_tensor_ndim(x) < 1)
        return tdm_error_set(TDM_ERR_SHAPE,
                             "loader: x must have a sample dim (N, ...), got a scalar");
    tdm_dtype xdt = tdm_tensor_dtype(x);
    if (!tdm_dtype_is_float(xdt) && xdt != TDM_DTYPE_I64 && xdt != TDM_DTYPE_I32)
        return tdm_error_set(TDM_ERR_DTYPE, "loader: x has dtype %s, expected a floating dtype "
                             "or i64/i32 (token ids)", tdm_dtype_name(xdt));
    if (tdm_tensor_ndim(y) < 1)
        return tdm_error_set(TDM_ERR_SHAPE, "loader: y must have a sample dim (N) or (N, ...), "
                             "got a scalar");
    tdm_dtype ydt = tdm_tensor_dtype(y);
    if (ydt != TDM_DTYPE_I64 && ydt != TDM_DTYPE_I32)
        return tdm_error_set(TDM_ERR_DTYPE, "loader: y has dtype %s, expected i64 or i32 labels",
                             tdm_dtype_name(ydt));
    if (tdm_tensor_shape(x)[0] != tdm_tensor_shape(y)[0])
        return tdm_error_set(TDM_ERR_SHAPE,
                             "loader: x and y have different numbers of samples: x %s, y %s",
                             tdm_shape_str(tdm_tensor_ndim(x), tdm_tensor_shape(x), s, sizeof s),
                             tdm_shape_str(tdm_tensor_ndim(y), tdm_tensor_shape(y), t, sizeof t));
    if (p->batch_size < 1)
        return tdm_error_set(TDM_ERR_ARG, "loader: batch_size must be at least 1, got %lld",
                             (long long)p->batch_size);
    if (p->workers < 0 || p->workers > LOADER_MAX_WORKERS)
        return tdm_error_set(TDM_ERR_ARG, "loader: workers must be in [0, %d], got %d",
                             LOADER_MAX_WORKERS, p->workers);
    if (p->prefetch < 0 || p->prefetch > LOADER_MAX_PREFETCH)
        return tdm_error_set(TDM_ERR_ARG, "loader: prefetch must be in [0, %d], got %d",
                             LOADER_MAX_PREFETCH, p->prefetch);
    if (!tdm_device_available(p->device)) {
        char why[512];
        snprintf(why, sizeof why, "%s", tdm_last_error());
        return tdm_error_set(TDM_ERR_DEVICE, "loader: cannot deliver batches to %s: %s",
                             tdm_device_str(p->device, s, sizeof s), why);
    }
    return TDM_OK;
}

tdm_loader *tdm_loader_new(tdm_tensor *x, tdm_tensor *y, const tdm_loader_params *p) {
    if (loader_check(x, y, p) != TDM_OK) return NULL;
    tdm_loader *l = calloc(1, sizeof *l);
    if (!l) {
        tdm_error_set(TDM_ERR_OOM, "loader: out of host memory");
        return NULL;
    }
    l->p = *p;
    if (l->p.prefetch == 0) l->p.prefetch = 2;
    if (p->pin_memory)   // (asking whether a CUDA device is there may start its runtime)
        l->pin_dev = p->device.type == TDM_DEVICE_CUDA ? p->device : tdm_pin_device();
    l->n = tdm_tensor_shape(x)[0];
    l->x_row_bytes = (size_t)tdm_shape_numel(tdm_tensor_ndim(x) - 1, tdm_tensor_shape(x) + 1) *
                     tdm_dtype_size(tdm_tensor_dtype(x));
    l->y_row_bytes = (size_t)tdm_shape_numel(tdm_tensor_ndim(y) - 1, tdm_tensor_shape(y) + 1) *
                     tdm_dtype_size(tdm_tensor_dtype(y));
    l->num_batches =
        l->p.drop_last ? l->n / l->p.batch_size : (l->n + l->p.batch_size - 1) / l->p.batch_size;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->changed, NULL);
    l->x = tdm_tensor_retain(x);
    l->y = tdm_tensor_retain(y);

    l->perm = malloc((size_t)(l->n > 0 ? l->n : 1) * sizeof *l->perm);
    bool ok = l->perm != NULL;
    if (ok && l->p.workers > 0) {
        l->workers = calloc((size_t)l->p.workers, sizeof *l->workers);
        ok = l->workers != NULL;
        for (int i = 0; ok && i < l->p.workers; i++) {
            l->workers[i].l = l;
            l->workers[i].index = i;
            l->workers[i].ring = calloc((size_t)l->p.prefetch, sizeof(loader_slot));
            ok = l->workers[i].ring != NULL;
        }
    }
    if (!ok) {
        tdm_loader_free(l);
        tdm_error_set(TDM_ERR_OOM, "loader: out of host memory");
        return NULL;
    }
    return l;
}

tdm_status tdm_loader_start_epoch(tdm_loader *l, int64_t epoch) {
    if (!l) return tdm_error_set(TDM_ERR_ARG, "loader_start_epoch: loader is NULL");
    if (epoch < 0)
        return tdm_error_set(TDM_ERR_ARG, "loader_start_epoch: epoch %lld is negative",
                             (long long)epoch);
    loader_stop_workers(l);
    loader_permute(l->perm, l->n, l->p.shuffle, l->p.seed, (uint64_t)epoch);
    l->epoch = epoch;
    l->next_batch = 0;
    l->failed = TDM_OK;
    l->started = true;
    int64_t needed = l->num_batches < l->p.workers ? l->num_batches : l->p.workers;
    for (int i = 0; i < needed; i++) {
        int err = pthread_create(&l->workers[i].thread, NULL, loader_worker_main, &l->workers[i]);
        if (err) {
            loader_stop_workers(l);
            l->started = false;
            return tdm_error_set(TDM_ERR_BACKEND, "loader: cannot start worker thread %d (%s)", i,
                                 strerror(err));
        }
        l->workers[i].running = true;
    }
    return TDM_OK;
}

int64_t tdm_loader_num_batches(const tdm_loader *l) {
    if (!l) {
        tdm_error_set(TDM_ERR_ARG, "loader_num_batches: loader is NULL");
        return -1;
    }
    return l->num_batches;
}

// Batch b on the cpu: from its worker's ring, or assembled here when there are no workers.
static tdm_status loader_take(tdm_loader *l, int64_t b, tdm_tensor **xb, tdm_tensor **yb) {
    if (l->p.workers == 0) return loader_assemble(l, b, xb, yb);
    loader_worker *w = &l->workers[b % l->p.workers];
    int64_t k = b / l->p.workers;  // == w->consumed
    pthread_mutex_lock(&l->lock);
    while (w->produced <= k) pthread_cond_wait(&l->changed, &l->lock);
    loader_slot got = w->ring[k % l->p.prefetch];
    w->ring[k % l->p.prefetch] = (loader_slot){0};
    w->consumed++;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
    if (got.status != TDM_OK) {  // that worker has stopped: the epoch cannot go on
        l->failed = got.status;
        snprintf(l->failed_msg, sizeof l->failed_msg, "loader: batch %lld: %s", (long long)b,
                 got.msg);
        return tdm_error_set(l->failed, "%s", l->failed_msg);
    }
    *xb = got.x;
    *yb = got.y;
    return TDM_OK;
}

bool tdm_loader_next(tdm_loader *l, tdm_tensor **x, tdm_tensor **y) {
    if (x) *x = NULL;
    if (y) *y = NULL;
    if (!l || !x || !y) {
        tdm_error_set(TDM_ERR_ARG, "loader_next: %s is NULL", !l ? "loader" : !x ? "x" : "y");
        return false;
    }
    if (!l->started && tdm_loader_start_epoch(l, 0) != TDM_OK) return false;
    if (l->failed != TDM_OK) {
        tdm_error_set(l->failed, "%s", l->failed_msg);
        return false;
    }
    if (l->next_batch >= l->num_batches) {
        tdm_error_clear();  // the end of the epoch, not an error
        return false;
    }
    tdm_tensor *xb, *yb;
    if (loader_take(l, l->next_batch, &xb, &yb) != TDM_OK) return false;
    l->next_batch++;
    if (l->p.device.type != TDM_DEVICE_CPU) {
        // In the consumer's thread, on its current stream: without blocking from pinned
        // batches (their blocks stay reserved until the copies are done, so they are freed at
        // once), else a plain synchronous copy.
        tdm_tensor *(*to)(const tdm_tensor *, tdm_device, tdm_dtype) =
            l->p.pin_memory ? tdm_tensor_to_non_blocking : tdm_tensor_to;
        tdm_tensor *dx = to(xb, l->p.device, tdm_tensor_dtype(xb));
        tdm_tensor *dy = dx ? to(yb, l->p.device, tdm_tensor_dtype(yb)) : NULL;
        tdm_tensor_free(xb);
        tdm_tensor_free(yb);
        if (!dx || !dy) {
            tdm_tensor_free(dx);
            return false;
        }
        xb = dx;
        yb = dy;
    }
    *x = xb;
    *y = yb;
    return true;
}

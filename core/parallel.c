/* parallel.c — data parallelism with ranks as threads: buckets of gradients all-reduced as
 * backward finishes them (from autograd's grad hooks), then a final sync. The all-reduce: every
 * rank copies its bucket into its own slot of a shared buffer, a barrier, every rank sums the
 * slots in rank order and keeps the mean, a barrier (so the slots can be reused). All ranks run
 * the same collectives in the same order (same graph), so one group barrier serves them all.
 * An MPI group (one rank per process) replaces the slot copy and barriers by MPI_Allgather and
 * sums the gathered slots in the same rank order.
 *
 * When every rank's parameters are on one GPU each and the backend has collectives (NCCL), a
 * communicator is made at attach (rank 0's unique id handed to the others through the group:
 * memory for threads, MPI_Bcast for processes) and a complete bucket's all-reduce is started on
 * the backend's side stream and not waited for: it overlaps with the rest of backward, and sync
 * makes the compute stream wait for it (TANDEM_DP_COMM=host keeps the host path).
 *
 * Several backwards before one sync (gradient accumulation): an all-reduce still running on the
 * side stream writes the gradients the next backward adds into on the compute stream, so a
 * backward whose hooks have started every bucket's all-reduce ends by making the compute stream
 * wait for them (as DDP's reducer does at the end of each backward). A backward that left a
 * bucket incomplete (a parameter without a gradient) was not seen to end: a later one adding into
 * a bucket whose all-reduce it started is an error sync reports (DDP: "Expected to have finished
 * reduction in the prior iteration"). tdm_dp_no_sync (DDP's no_sync) skips the all-reduces of the
 * micro-batches before the last. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef TDM_HAVE_MPI
#include <mpi.h>
#endif

#include "core/env_impl.h"
#include "core/tensor_impl.h"
#include "tandem/autograd.h"
#include "tandem/parallel.h"

#define DP_MAX_RANKS 64

typedef struct dp_rank dp_rank;

typedef struct {
    dp_rank *rank;
    int param;    // index into the rank's parameters
    int bucket;
} dp_hook_ctx;

typedef struct {
    int first, count;      // parameters [first, first+count) of the bucket order
    int64_t numel;
} dp_bucket;

struct dp_rank {
    tdm_dp_group *g;
    int rank;
    int n;
    tdm_tensor **params;   // references
    dp_hook_ctx *hooks;
    int *order;            // bucket order: parameter indices, last parameter first
    int64_t *offset;       // element offset of parameter order[i] in its bucket
    int *ready;            // per bucket: gradients completed since its last reduce
    bool *reduced;         // per bucket: all-reduced since the last sync
    bool *unordered;       // per bucket: its device all-reduce is not yet ordered before the
                           // compute stream (started in this backward, or one before it)
    int pass_reduced;      // device all-reduces started by hooks since the last ordering
    bool no_sync;          // tdm_dp_no_sync: hooks only accumulate
    tdm_status failed;     // a failure inside a hook (reported by sync), and its message
    char failed_msg[800];
    double comm_seconds;   // wall time spent in reduce_bucket since attach
    void *comm;            // the backend's communicator member, or NULL (host all-reduce)
    const struct tdm_backend_ops *comm_be;
    bool comm_wanted;      // set at attach: all parameters on one device with collectives
    tdm_status comm_refused;   // and the backend's comm_check said no (its message below)
    char comm_refusal[640];
};

struct tdm_dp_group {
    int nranks;
    bool mpi;              // ranks are MPI processes; this process is ranks[self]
    int self;
    int64_t bucket_bytes;
    pthread_barrier_t barrier;
    dp_rank ranks[DP_MAX_RANKS];
    dp_bucket *buckets;    // from rank 0's attach; every rank must match
    int n_buckets;
    double *slots;         // nranks x (largest bucket or allreduce_mean length)
    int64_t slot_len;
    pthread_mutex_t lock;
    bool overlap;          // all-reduce buckets as backward completes them (else all at sync)
    unsigned char comm_id[TDM_COMM_ID_BYTES];   // the device communicator's unique id
    tdm_status comm_id_status;
};

tdm_dp_group *tdm_dp_group_new(int nranks, int64_t bucket_bytes) {
    if (nranks < 1 || nranks > DP_MAX_RANKS || bucket_bytes < 1) {
        tdm_error_set(TDM_ERR_ARG, "data parallel: %d ranks (1..%d) and a bucket of %lld bytes",
                      nranks, DP_MAX_RANKS, (long long)bucket_bytes);
        return NULL;
    }
    tdm_dp_group *g = calloc(1, sizeof *g);
    if (!g) {
        tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
        return NULL;
    }
    g->nranks = nranks;
    g->bucket_bytes = bucket_bytes;
    g->overlap = true;
    pthread_barrier_init(&g->barrier, NULL, (unsigned)nranks);
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

static void rank_clear(dp_rank *r) {
    if (r->comm) r->comm_be->comm_free(r->comm);
    for (int i = 0; i < r->n; i++) {
        tdm_tensor_set_grad_hook(r->params[i], NULL, NULL);
        tdm_tensor_free(r->params[i]);
    }
    free(r->params);
    free(r->hooks);
    free(r->order);
    free(r->offset);
    free(r->ready);
    free(r->reduced);
    free(r->unordered);
    memset(r, 0, sizeof *r);
}

static void *rank_clear_thread(void *r) {
    rank_clear((dp_rank *)r);
    return NULL;
}

void tdm_dp_group_free(tdm_dp_group *g) {
    if (!g) return;
    // Freeing a device communicator's member (ncclCommDestroy) is a collective of the node's
    // members: those of rank threads are freed at once, each on a thread of its own, as they
    // were made (one after another on this thread, the first would wait for the others forever).
    pthread_t th[DP_MAX_RANKS];
    bool started[DP_MAX_RANKS] = {false};
    for (int i = 0; i < g->nranks && !g->mpi && g->nranks > 1; i++)
        if (g->ranks[i].comm)
            started[i] = pthread_create(&th[i], NULL, rank_clear_thread, &g->ranks[i]) == 0;
    for (int i = 0; i < g->nranks; i++)
        if (!started[i]) rank_clear(&g->ranks[i]);
    for (int i = 0; i < g->nranks; i++)
        if (started[i]) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g->barrier);
    pthread_mutex_destroy(&g->lock);
    free(g->buckets);
    free(g->slots);
    free(g);
}

int tdm_dp_group_size(const tdm_dp_group *g) { return g->nranks; }

void tdm_dp_set_overlap(tdm_dp_group *g, bool overlap) { g->overlap = overlap; }

void tdm_dp_no_sync(tdm_dp_group *g, int rank, bool no_sync) {
    if (rank >= 0 && rank < g->nranks) g->ranks[rank].no_sync = no_sync;
}

bool tdm_dp_uses_device_comm(const tdm_dp_group *g, int rank) {
    return rank >= 0 && rank < g->nranks && g->ranks[rank].comm != NULL;
}
int tdm_dp_group_rank(const tdm_dp_group *g) { return g->mpi ? g->self : 0; }

int tdm_dp_launch_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        if (getenv(vars[i]) && tdm_dp_mpi_launched())
            return (int)tdm_env_i64(vars[i], 0, INT_MAX, 0);
    }
    return 0;
}

#ifdef TDM_HAVE_MPI
static void dp_mpi_finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}
#endif

bool tdm_dp_mpi_launched(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        if (getenv(vars[i]) && tdm_env_i64(vars[i], 1, INT_MAX, 1) > 1) return true;
    }
    return false;
}

tdm_dp_group *tdm_dp_group_new_mpi(int64_t bucket_bytes) {
#ifdef TDM_HAVE_MPI
    int inited = 0, provided = 0, size = 1, rank = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        tdm_error_set(TDM_ERR_BACKEND, "data parallel: MPI_Init_thread failed");
        return NULL;
    }
    if (!inited) atexit(dp_mpi_finalize);   // at exit, so that a process can make several groups
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tdm_dp_group *g = tdm_dp_group_new(size, bucket_bytes);
    if (g) {
        g->mpi = true;
        g->self = rank;
    }
    return g;
#else
    (void)bucket_bytes;
    tdm_error_set(TDM_ERR_UNSUPPORTED, "data parallel: this build of tandem has no MPI "
                  "(install libopenmpi-dev and reconfigure)");
    return NULL;
#endif
}

// The group barrier: the threads', or the MPI world's.
static void group_barrier(tdm_dp_group *g) {
#ifdef TDM_HAVE_MPI
    if (g->mpi) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
#endif
    pthread_barrier_wait(&g->barrier);
}

// ---- running the ranks ----------------------------------------------------------------------------

typedef struct {
    tdm_status (*fn)(int rank, void *ctx);
    void *ctx;
    int rank;
    tdm_status status;
    char error[1024];
} dp_thread;

static void *dp_thread_main(void *arg) {
    dp_thread *t = arg;
    t->status = t->fn(t->rank, t->ctx);
    if (t->status != TDM_OK) strncpy(t->error, tdm_last_error(), sizeof t->error - 1);
    return NULL;
}

tdm_status tdm_dp_run(tdm_dp_group *g, tdm_status (*fn)(int rank, void *ctx), void *ctx) {
    if (g->mpi) return fn(g->self, ctx);
    dp_thread th[DP_MAX_RANKS];
    pthread_t tid[DP_MAX_RANKS];
    memset(th, 0, sizeof th);
    int started = 0;
    for (int r = 0; r < g->nranks; r++) {
        th[r] = (dp_thread){.fn = fn, .ctx = ctx, .rank = r};
        if (pthread_create(&tid[r], NULL, dp_thread_main, &th[r]) != 0) break;
        started++;
    }
    for (int r = 0; r < started; r++) pthread_join(tid[r], NULL);
    if (started < g->nranks)
        return tdm_error_set(TDM_ERR_BACKEND, "data parallel: could not start %d threads", g->nranks);
    for (int r = 0; r < g->nranks; r++)
        if (th[r].status != TDM_OK) return tdm_error_set(th[r].status, "rank %d: %s", r, th[r].error);
    return TDM_OK;
}

// ---- the all-reduce ------------------------------------------------------------------------------

// Every rank contributes v[0..n) (doubles); each gets the mean, summed in rank order.
static void allreduce_mean(tdm_dp_group *g, int rank, double *v, int64_t n) {
#ifdef TDM_HAVE_MPI
    if (g->mpi) {   // every process's n values, rank after rank, in every process
        MPI_Allgather(v, (int)n, MPI_DOUBLE, g->slots, (int)n, MPI_DOUBLE, MPI_COMM_WORLD);
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < g->nranks; r++) s += g->slots[(int64_t)r * n + i];
            v[i] = s / g->nranks;
        }
        return;
    }
#endif
    memcpy(g->slots + (int64_t)rank * g->slot_len, v, (size_t)n * sizeof *v);
    pthread_barrier_wait(&g->barrier);
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < g->nranks; r++) s += g->slots[(int64_t)r * g->slot_len + i];
        v[i] = s / g->nranks;
    }
    pthread_barrier_wait(&g->barrier);
}

tdm_status tdm_dp_allreduce_mean(tdm_dp_group *g, int rank, double *v, int n) {
    if (n > g->slot_len)
        return tdm_error_set(TDM_ERR_ARG, "data parallel: all-reduce of %d values (at most %lld)",
                             n, (long long)g->slot_len);
    allreduce_mean(g, rank, v, n);
    return TDM_OK;
}

// All-reduces bucket b of rank r: gather its gradients (zero where a parameter has none) into
// doubles, average across ranks, write the mean back as each parameter's gradient.
// The device path: the bucket's gradients (zeros made where a parameter has none, so that every
// rank contributes the same elements) all-reduced in place by the backend, not waited for.
static tdm_status reduce_bucket_device(dp_rank *r, const dp_bucket *bk) {
    tdm_tensor **grads = calloc((size_t)bk->count + 1, sizeof *grads);
    if (!grads) return tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
    tdm_status s = TDM_OK;
    bool prev = tdm_grad_set_enabled(false);
    for (int k = 0; s == TDM_OK && k < bk->count; k++) {
        tdm_tensor *p = r->params[r->order[bk->first + k]];
        if (!tdm_tensor_grad(p)) {
            tdm_tensor *z = tdm_tensor_zeros(p->ndim, p->shape, p->dtype, p->device);
            s = z ? tdm_tensor_set_grad(p, z) : tdm_last_status();
            tdm_tensor_free(z);
        }
        grads[k] = tdm_tensor_grad(p);
    }
    tdm_grad_set_enabled(prev);
    if (s == TDM_OK) s = r->comm_be->comm_allreduce_mean(r->comm, grads, bk->count);
    free(grads);
    return s;
}

static double dp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tdm_status reduce_bucket_timed(dp_rank *r, int b);

static tdm_status reduce_bucket(dp_rank *r, int b) {
    double t0 = dp_now();
    tdm_status s = reduce_bucket_timed(r, b);
    r->comm_seconds += dp_now() - t0;
    return s;
}

static tdm_status reduce_bucket_timed(dp_rank *r, int b) {
    tdm_dp_group *g = r->g;
    const dp_bucket *bk = &g->buckets[b];
    if (r->comm) {
        r->reduced[b] = true;
        return reduce_bucket_device(r, bk);
    }
    double *buf = calloc((size_t)(bk->numel ? bk->numel : 1), sizeof *buf);
    tdm_status s = buf ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
    for (int k = 0; s == TDM_OK && k < bk->count; k++) {
        int i = r->order[bk->first + k];
        tdm_tensor *grad = tdm_tensor_grad(r->params[i]);
        if (grad) s = tdm_tensor_to_host_f64(grad, buf + r->offset[bk->first + k]);
    }
    // A rank that failed still takes part, so that no other rank waits forever.
    allreduce_mean(g, r->rank, buf, bk->numel);
    bool prev = tdm_grad_set_enabled(false);
    for (int k = 0; s == TDM_OK && k < bk->count; k++) {
        int i = r->order[bk->first + k];
        tdm_tensor *p = r->params[i];
        tdm_tensor *host = tdm_tensor_empty(p->ndim, p->shape, TDM_DTYPE_F64, TDM_CPU);
        if (!host) {
            s = tdm_last_status();
            break;
        }
        memcpy(tdm_data(host), buf + r->offset[bk->first + k], (size_t)p->numel * sizeof(double));
        tdm_tensor *mean = tdm_tensor_to(host, p->device, p->dtype);
        tdm_tensor_free(host);
        s = mean ? tdm_tensor_set_grad(p, mean) : tdm_last_status();
        tdm_tensor_free(mean);
    }
    tdm_grad_set_enabled(prev);
    free(buf);
    r->reduced[b] = true;
    return s;
}

// Keeps the rank's first failure and its message (sync reports it; later calls may set others).
static void rank_fail(dp_rank *r, tdm_status s) {
    if (s == TDM_OK || r->failed != TDM_OK) return;
    r->failed = s;
    snprintf(r->failed_msg, sizeof r->failed_msg, "%s", tdm_last_error());
}

// The compute stream waits for the device all-reduces started so far (stream order, no host
// wait): the gradients they write may then be read or added into.
static void order_device_reduces(dp_rank *r) {
    rank_fail(r, r->comm_be->comm_wait(r->comm));
    memset(r->unordered, 0, (size_t)r->g->n_buckets * sizeof *r->unordered);
    r->pass_reduced = 0;
}

static void dp_grad_ready(tdm_tensor *leaf, void *ctx) {
    (void)leaf;
    dp_hook_ctx *h = ctx;
    dp_rank *r = h->rank;
    const int b = h->bucket, nb = r->g->n_buckets;
    if (r->no_sync) return;   // DDP's no_sync: the gradients accumulate here, reduced later
    // This backward has added into a gradient of bucket b: too late if b's all-reduce from a
    // previous backward was not ordered before it (that backward left a bucket incomplete)
    if (r->comm && r->unordered[b])
        rank_fail(r, tdm_error_set(
            TDM_ERR_ARG, "data parallel: rank %d: a backward added into bucket %d's gradients "
            "while the all-reduce a previous backward started on them may still run on the "
            "device's side stream (not every bucket completed in that backward, as when a "
            "parameter gets no gradient, so its end was not ordered); call tdm_dp_sync after "
            "each backward, or tdm_dp_no_sync for the backwards before the last (PyTorch's "
            "no_sync)",
            r->rank, b));
    // A bucket is reduced each time all of its gradients are complete (with accumulation over
    // micro-batches that is once per backward: averaging is linear, so repeating it is exact).
    // Without overlap, sync reduces every bucket.
    if (++r->ready[b] == r->g->buckets[b].count && r->g->overlap) {
        r->ready[b] = 0;
        rank_fail(r, reduce_bucket(r, b));
        if (r->comm) {
            r->unordered[b] = true;
            // every bucket started: this backward is over; what follows on the compute stream
            // (the next micro-batch's backward included) runs after the all-reduces
            if (++r->pass_reduced == nb) order_device_reduces(r);
        }
    }
}

// ---- attach and sync ----------------------------------------------------------------------------

// Can this rank all-reduce on its device? Every parameter on one non-cpu device whose backend
// has collectives, and TANDEM_DP_COMM is not "host".
static bool comm_possible(const dp_rank *r) {
    const char *env = getenv("TANDEM_DP_COMM");
    if ((env && !strcmp(env, "host")) || r->n == 0) return false;
    tdm_device d = r->params[0]->device;
    const struct tdm_backend_ops *be = r->params[0]->storage->backend;
    if (d.type == TDM_DEVICE_CPU || !be->comm_new || !be->comm_unique_id) return false;
    for (int i = 1; i < r->n; i++)
        if (!tdm_device_equal(r->params[i]->device, d)) return false;
    return true;
}

// Whether the backend lets this rank's member live on its device now (r->comm_refused and the
// message otherwise).
static void comm_check(dp_rank *r) {
    const struct tdm_backend_ops *be = r->params[0]->storage->backend;
    r->comm_refused = be->comm_check ? be->comm_check(r->params[0]->device.index) : TDM_OK;
    if (r->comm_refused != TDM_OK)
        snprintf(r->comm_refusal, sizeof r->comm_refusal, "%s", tdm_last_error());
}

// Makes the rank's communicator member when every rank can (all agree, or all keep the host
// path: one rank waiting in a collective init that another never joins would hang). Called by
// every rank after the attach barrier.
static tdm_status comm_attach(tdm_dp_group *g, dp_rank *r) {
    bool all = true;
    int refused = -1;   // a rank whose backend refused its member
#ifdef TDM_HAVE_MPI
    if (g->mpi) {
        int mine[2] = {r->comm_wanted, r->comm_refused != TDM_OK ? r->rank : -1}, every[2];
        MPI_Allreduce(&mine[0], &every[0], 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&mine[1], &every[1], 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        all = every[0] != 0;
        refused = every[1];
    } else
#endif
        for (int k = 0; k < g->nranks; k++) {
            all = all && g->ranks[k].comm_wanted;
            if (g->ranks[k].comm_refused != TDM_OK && refused < 0) refused = k;
        }
    if (!all) return TDM_OK;
    // NCCL was to be used but a rank's device cannot host it: every rank fails (none waits in
    // an init that another never joins), each saying why
    if (r->comm_refused != TDM_OK)
        return tdm_error_set(r->comm_refused, "%s", r->comm_refusal);
    if (refused >= 0)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "data parallel: rank %d cannot use the device "
                             "communicator (NCCL)%s%s", refused, g->mpi ? "" : ": ",
                             g->mpi ? " (see its error)" : g->ranks[refused].comm_refusal);
    const struct tdm_backend_ops *be = r->params[0]->storage->backend;
    if (r->rank == 0) g->comm_id_status = be->comm_unique_id(g->comm_id);
#ifdef TDM_HAVE_MPI
    if (g->mpi) {
        int st = (int)g->comm_id_status;
        MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Bcast(g->comm_id, TDM_COMM_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
        g->comm_id_status = (tdm_status)st;
    } else
#endif
        pthread_barrier_wait(&g->barrier);   // rank 0's id written before any rank reads it
    if (g->comm_id_status != TDM_OK)
        return r->rank == 0 ? g->comm_id_status
                            : tdm_error_set(g->comm_id_status, "data parallel: rank 0 could not "
                                            "make the device communicator's id");
    r->comm = be->comm_new(g->comm_id, g->nranks, r->rank, r->params[0]->device.index);
    if (!r->comm) return tdm_last_status();
    r->comm_be = be;
    return TDM_OK;
}

tdm_status tdm_dp_attach(tdm_dp_group *g, int rank, tdm_tensor *const *params, int n) {
    if (rank < 0 || rank >= g->nranks || n < 0)
        return tdm_error_set(TDM_ERR_ARG, "data parallel: rank %d of %d", rank, g->nranks);
    dp_rank *r = &g->ranks[rank];
    rank_clear(r);
    r->g = g;
    r->rank = rank;
    r->n = n;
    r->params = calloc((size_t)n + 1, sizeof *r->params);
    r->hooks = calloc((size_t)n + 1, sizeof *r->hooks);
    r->order = calloc((size_t)n + 1, sizeof *r->order);
    r->offset = calloc((size_t)n + 1, sizeof *r->offset);
    if (!r->params || !r->hooks || !r->order || !r->offset)
        return tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
    // Buckets over the parameters in reverse order, each up to bucket_bytes (at least one).
    dp_bucket *bk = calloc((size_t)n + 1, sizeof *bk);
    if (!bk) return tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
    int nb = 0;
    int64_t bytes = 0;
    for (int k = 0; k < n; k++) {
        int i = n - 1 - k;
        r->order[k] = i;
        r->params[i] = tdm_tensor_retain(params[i]);
        int64_t pb = (int64_t)tdm_tensor_nbytes(params[i]);
        // a bucket holds one dtype (the device path packs it into one buffer for one all-reduce)
        const bool new_dtype = k > 0 && params[i]->dtype != params[i + 1]->dtype;
        if (nb == 0 || new_dtype || (bytes + pb > g->bucket_bytes && bk[nb - 1].count > 0)) {
            bk[nb++] = (dp_bucket){.first = k};
            bytes = 0;
        }
        r->offset[k] = bk[nb - 1].numel;
        bk[nb - 1].count++;
        bk[nb - 1].numel += params[i]->numel;
        bytes += pb;
    }
    // Every rank must build the same buckets; rank 0's are kept (under the lock).
    pthread_mutex_lock(&g->lock);
    tdm_status s = TDM_OK;
    if (!g->buckets) {
        g->buckets = bk;
        g->n_buckets = nb;
        int64_t longest = 16;   // room for allreduce_mean of a few values
        for (int b = 0; b < nb; b++) longest = bk[b].numel > longest ? bk[b].numel : longest;
        g->slot_len = longest;
        g->slots = calloc((size_t)(g->nranks * longest), sizeof *g->slots);
        if (!g->slots) s = tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
        bk = NULL;
    } else if (g->n_buckets != nb || memcmp(g->buckets, bk, (size_t)nb * sizeof *bk)) {
        s = tdm_error_set(TDM_ERR_SHAPE, "data parallel: rank %d's parameters differ from another "
                          "rank's (every replica must have the same shapes)", rank);
    }
    pthread_mutex_unlock(&g->lock);
    free(bk);
    r->ready = calloc((size_t)nb + 1, sizeof *r->ready);
    r->reduced = calloc((size_t)nb + 1, sizeof *r->reduced);
    r->unordered = calloc((size_t)nb + 1, sizeof *r->unordered);
    if (s == TDM_OK && (!r->ready || !r->reduced || !r->unordered))
        s = tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
    for (int k = 0; s == TDM_OK && k < n; k++) {
        int b = 0;
        while (b + 1 < nb && g->buckets[b + 1].first <= k) b++;
        r->hooks[k] = (dp_hook_ctx){.rank = r, .param = r->order[k], .bucket = b};
        tdm_tensor_set_grad_hook(r->params[r->order[k]], dp_grad_ready, &r->hooks[k]);
    }
    r->comm_wanted = s == TDM_OK && comm_possible(r);
    if (r->comm_wanted) comm_check(r);
    group_barrier(g);   // every rank attached before any backward starts
#ifdef TDM_HAVE_MPI
    if (g->mpi && s == TDM_OK) {   // every process must have built the same buckets
        long long mine[2] = {nb, 0}, lo[2], hi[2];
        for (int b = 0; b < nb; b++) mine[1] += g->buckets[b].numel;
        MPI_Allreduce(mine, lo, 2, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(mine, hi, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        if (lo[0] != hi[0] || lo[1] != hi[1])
            s = tdm_error_set(TDM_ERR_SHAPE, "data parallel: the MPI ranks' models differ");
    }
#endif
    tdm_status cs = comm_attach(g, r);
    return s != TDM_OK ? s : cs;
}

tdm_status tdm_dp_sync(tdm_dp_group *g, int rank) {
    dp_rank *r = &g->ranks[rank];
    for (int b = 0; b < g->n_buckets; b++) {
        if (!r->reduced[b] || r->ready[b] > 0) {   // never complete, or partly filled since
            rank_fail(r, reduce_bucket(r, b));
        }
    }
    if (r->comm) order_device_reduces(r);   // the compute stream waits for the side stream
    tdm_status s = r->failed;
    if (s != TDM_OK) tdm_error_set(s, "%s", r->failed_msg);
    memset(r->ready, 0, (size_t)g->n_buckets * sizeof *r->ready);
    memset(r->reduced, 0, (size_t)g->n_buckets * sizeof *r->reduced);
    r->failed = TDM_OK;
    return s;
}

double tdm_dp_comm_seconds(const tdm_dp_group *g, int rank) {
    return g && rank >= 0 && rank < g->nranks ? g->ranks[rank].comm_seconds : 0;
}

// The derivation (docs/suites/scaling.md). NCCL's ncclAvg over n ranks in f32: each rank's x_r
// is multiplied by s = fl(1/n) = (1 + d0)/n and rounded, p_r = x_r s (1 + d_r) + e_r (|d| <= u,
// |e_r| <= eta for an underflow), then the p_r are summed in some order (a ring chain, a tree):
// |fl(sum p) - sum p| <= g(n-1) sum |p_r| (Higham's recursive-summation bound, g(k) = k u /
// (1 - k u)). With m = (1/n) sum x_r and A = (1/n) sum |x_r|:
//   |sum p - m| <= (2u + u^2) A + n eta,   sum |p_r| <= (1 + u)^2 A + n eta,
//   |y - m|     <= (2u + u^2) A + n eta + g(n-1) ((1 + u)^2 A + n eta).
// The host path (a double sum in rank order, divided, rounded to f32 once) is within u |m|, less.
double tdm_dp_mean_bound_f32(int nranks, double mean_abs) {
    const double u = 0x1p-24, eta = 0x1p-150;   // f32: unit roundoff, half the least subnormal
    const double n = nranks < 1 ? 1 : nranks;
    const double g = (n - 1) * u / (1 - (n - 1) * u);
    return (2 * u + u * u) * mean_abs + n * eta + g * ((1 + u) * (1 + u) * mean_abs + n * eta);
}

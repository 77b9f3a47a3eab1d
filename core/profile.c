/* profile.c — the profiler (tandem/profile.h): per-thread recording of ops and named ranges, the
 * per-op table, and the Chrome trace with the memory timeline.
 *
 * Recording: each thread owns a buffer (found through a thread-local pointer, registered once in
 * a global list and reused after the thread exits). An op or range opens a frame on the thread's
 * stack (start time, inputs, memory before, device event); closing it appends a finished event
 * to the thread's list under the buffer's lock. tdm_profile_stop bumps the session number (so a
 * frame still open on another thread is dropped when it closes), moves every thread's events
 * into the result, resolves device times and aggregates the table. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/env_impl.h"
#include "core/files_impl.h"
#include "core/profile_impl.h"
#include "tandem/profile.h"

#define PROF_MAX_INPUTS 4
#define PROF_NAME_LEN 64
#define PROF_MAX_DEPTH 64
#define PROF_DEVICE_TID 100000   // device tracks: tid 100000 + device type * 1000 + index

atomic_int tdm_profile_flags;

// ---- events ------------------------------------------------------------------------------

typedef struct {
    char name[PROF_NAME_LEN];
    bool is_range;
    int tid, depth;
    int64_t start_ns, end_ns, child_ns;   // since the session's start
    int n_inputs;                          // as given (beyond PROF_MAX_INPUTS: not described)
    struct {
        bool present;
        int8_t ndim;
        tdm_dtype dtype;
        int64_t shape[TDM_MAX_DIMS];
    } in[PROF_MAX_INPUTS];
    bool has_device;                       // ops: the device of their first input
    tdm_device device;
    const struct tdm_backend_ops *be;
    int64_t mem_start;                     // allocated bytes when it began
    int64_t bytes;                         // net allocated during it
    uint64_t launch_start, launches;       // tdm_profile_launches when it began; during it
    bool has_mem;                          // mem_allocated/mem_reserved were sampled
    int64_t mem_allocated, mem_reserved;   // when it ended
    double flops;
    void *ev_start, *ev_end;               // device events (be's event slots), or NULL
    double device_start_us, device_us;     // < 0: not measured
} prof_event;

typedef struct prof_thread {
    pthread_mutex_t lock;   // guards events/n/cap (tdm_profile_stop takes them)
    prof_event *events;
    int64_t n, cap;
    prof_event frames[PROF_MAX_DEPTH];   // the open ops and ranges: owner thread only
    int depth;
    uint64_t gen;           // the session the frames belong to
    int tid;
    bool in_use;            // a live thread owns it
    struct prof_thread *next;
} prof_thread;

struct tdm_profile {
    prof_event *events;
    int64_t n;
    int64_t wall_ns;
    int n_threads;
    tdm_profile_row *rows;
    int n_rows;
    bool device_measured;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;   // the registry and sessions
static prof_thread *reg_head;
static int reg_count;
static atomic_uint_fast64_t session_gen;
static int64_t session_t0;                 // monotonic ns at start
static bool nvtx_env;                      // TANDEM_NVTX=1
static _Thread_local prof_thread *tls_thread;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The backends compiled in (NVTX goes to each that has ranges).
static const struct tdm_backend_ops *const prof_backends[] = {
    &tdm_ref_backend,
#ifdef TDM_HAVE_CUDA
    &tdm_cuda_backend,
#endif
};
#define PROF_N_BACKENDS (int)(sizeof prof_backends / sizeof prof_backends[0])

static void nvtx_push(const char *name) {
    for (int i = 0; i < PROF_N_BACKENDS; i++)
        if (prof_backends[i]->range_push) prof_backends[i]->range_push(name);
}

static void nvtx_pop(void) {
    for (int i = 0; i < PROF_N_BACKENDS; i++)
        if (prof_backends[i]->range_pop) prof_backends[i]->range_pop();
}

// TANDEM_NVTX=1 turns NVTX ranges on from the start, without a session.
__attribute__((constructor)) static void prof_read_env(void) {
    nvtx_env = tdm_env_flag("TANDEM_NVTX", false);
    if (nvtx_env) atomic_fetch_or(&tdm_profile_flags, TDM_PROFILE_NVTX);
}

// ---- threads -----------------------------------------------------------------------------

static void thread_exit(void *arg) {   // the buffer is reused by a later thread
    prof_thread *t = arg;
    pthread_mutex_lock(&reg_lock);
    t->in_use = false;
    t->depth = 0;
    pthread_mutex_unlock(&reg_lock);
}

static void tls_key_make(void) { (void)pthread_key_create(&tls_key, thread_exit); }

// The calling thread's buffer, or NULL when none can be had (out of memory: nothing recorded).
static prof_thread *thread_buf(void) {
    if (tls_thread) return tls_thread;
    pthread_once(&tls_once, tls_key_make);
    pthread_mutex_lock(&reg_lock);
    prof_thread *t = reg_head;
    while (t && t->in_use) t = t->next;
    if (!t && (t = calloc(1, sizeof *t))) {
        pthread_mutex_init(&t->lock, NULL);
        t->tid = reg_count++;
        t->next = reg_head;
        reg_head = t;
    }
    if (t) {
        t->in_use = true;
        t->depth = 0;
        t->gen = 0;
    }
    pthread_mutex_unlock(&reg_lock);
    if (t) {
        tls_thread = t;
        pthread_setspecific(tls_key, t);
    }
    return t;
}

// The thread's buffer with its frames reset when they belong to an earlier session; NULL when
// not recording.
static prof_thread *thread_recording(uint64_t *gen) {
    if (!(atomic_load(&tdm_profile_flags) & TDM_PROFILE_RECORDING)) return NULL;
    prof_thread *t = thread_buf();
    if (!t) return NULL;
    *gen = atomic_load(&session_gen);
    if (t->gen != *gen) {
        t->gen = *gen;
        t->depth = 0;
    }
    return t;
}

// Appends e to t's list unless the session ended meanwhile (then e is dropped).
static void thread_append(prof_thread *t, uint64_t gen, const prof_event *e) {
    pthread_mutex_lock(&t->lock);
    if (gen == atomic_load(&session_gen)) {
        if (t->n == t->cap) {
            int64_t cap = t->cap ? 2 * t->cap : 256;
            prof_event *ev = realloc(t->events, (size_t)cap * sizeof *ev);
            if (ev) {
                t->events = ev;
                t->cap = cap;
            }
        }
        if (t->n < t->cap) t->events[t->n++] = *e;
    }
    pthread_mutex_unlock(&t->lock);
}

// ---- frames ------------------------------------------------------------------------------

static void copy_name(char *dst, const char *name) {
    snprintf(dst, PROF_NAME_LEN, "%s", name ? name : "?");
}

// Device memory now (allocated, reserved), through the device's backend; false when it cannot.
static bool memory_now(const prof_event *e, int64_t *allocated, int64_t *reserved) {
    tdm_memory_stats st;
    if (!e->has_device || !e->be->memory_stats) return false;
    int index = e->device.type == TDM_DEVICE_CPU ? 0 : e->device.index;
    if (e->be->memory_stats(index, &st) != TDM_OK) return false;
    *allocated = st.allocated;
    *reserved = st.reserved;
    return true;
}

static int device_index(const prof_event *e) {
    return e->device.type == TDM_DEVICE_CPU ? 0 : e->device.index;
}

void tdm_profile_op_begin(tdm_profile_scope *s, const char *name, int n,
                          const tdm_tensor *const *inputs) {
    int flags = atomic_load(&tdm_profile_flags);
    if (flags & TDM_PROFILE_NVTX) {
        nvtx_push(name);
        s->nvtx = true;
    }
    uint64_t gen;
    prof_thread *t = thread_recording(&gen);
    if (!t || t->depth >= PROF_MAX_DEPTH) return;
    prof_event *e = &t->frames[t->depth];
    memset(e, 0, sizeof *e);
    copy_name(e->name, name);
    e->tid = t->tid;
    e->depth = t->depth;
    e->n_inputs = n;
    e->device_start_us = e->device_us = -1;
    for (int i = 0; i < n; i++) {
        const tdm_tensor *x = inputs[i];
        if (!x) continue;
        if (i < PROF_MAX_INPUTS) {
            e->in[i].present = true;
            e->in[i].ndim = (int8_t)x->ndim;
            e->in[i].dtype = x->dtype;
            memcpy(e->in[i].shape, x->shape, sizeof x->shape);
        }
        if (!e->has_device && x->storage) {
            e->has_device = true;
            e->device = x->device;
            e->be = x->storage->backend;
        }
    }
    int64_t reserved;
    if (!memory_now(e, &e->mem_start, &reserved)) e->mem_start = 0;
    e->launch_start = tdm_profile_launches();
    if (e->has_device && e->be->prof_event_record) e->ev_start = e->be->prof_event_record(device_index(e));
    s->frame = t->depth++;
    e->start_ns = now_ns() - session_t0;   // last: the op's own time starts here
}

// Closes frame k of t (and drops frames left open above it); appends it.
static void frame_close(prof_thread *t, uint64_t gen, int k, double flops) {
    int64_t end = now_ns() - session_t0;
    prof_event *e = &t->frames[k];
    for (int j = t->depth - 1; j > k; j--)   // unbalanced ranges inside: dropped
        if (t->frames[j].ev_start && t->frames[j].be->prof_event_free)
            t->frames[j].be->prof_event_free(t->frames[j].ev_start);
    t->depth = k;
    e->end_ns = end;
    e->flops = flops;
    if (e->has_device && e->be->prof_event_record && e->ev_start)
        e->ev_end = e->be->prof_event_record(device_index(e));
    e->launches = tdm_profile_launches() - e->launch_start;
    int64_t allocated, reserved;
    if (memory_now(e, &allocated, &reserved)) {
        e->bytes = allocated - e->mem_start;
        e->has_mem = true;
        e->mem_allocated = allocated;
        e->mem_reserved = reserved;
    }
    if (k > 0) t->frames[k - 1].child_ns += end - e->start_ns;
    thread_append(t, gen, e);
}

void tdm_profile_op_end(tdm_profile_scope *s) {
    if (s->nvtx) nvtx_pop();
    if (s->frame < 0) return;
    prof_thread *t = tls_thread;
    uint64_t gen = atomic_load(&session_gen);
    if (!t || t->gen != gen || s->frame >= t->depth) return;   // the session ended meanwhile
    frame_close(t, gen, s->frame, s->flops);
}

// ---- ranges ------------------------------------------------------------------------------

tdm_status tdm_profile_range_push(const char *name) {
    if (!name) return tdm_error_set(TDM_ERR_ARG, "profile_range_push: name is NULL");
    int flags = atomic_load(&tdm_profile_flags);
    if (flags & TDM_PROFILE_NVTX) nvtx_push(name);
    uint64_t gen;
    prof_thread *t = thread_recording(&gen);
    if (!t) return TDM_OK;
    if (t->depth >= PROF_MAX_DEPTH)
        return tdm_error_set(TDM_ERR_ARG, "profile_range_push: ranges nested deeper than %d",
                             PROF_MAX_DEPTH);
    prof_event *e = &t->frames[t->depth];
    memset(e, 0, sizeof *e);
    copy_name(e->name, name);
    e->is_range = true;
    e->tid = t->tid;
    e->depth = t->depth++;
    e->device_start_us = e->device_us = -1;
    e->start_ns = now_ns() - session_t0;
    return TDM_OK;
}

tdm_status tdm_profile_range_pop(void) {
    int flags = atomic_load(&tdm_profile_flags);
    if (flags & TDM_PROFILE_NVTX) nvtx_pop();
    uint64_t gen;
    prof_thread *t = thread_recording(&gen);
    if (!t) return TDM_OK;
    if (t->depth == 0 || !t->frames[t->depth - 1].is_range)
        return tdm_error_set(TDM_ERR_ARG,
                             "profile_range_pop: no range is open on this thread (pushed before "
                             "the session started, or popped twice)");
    frame_close(t, gen, t->depth - 1, 0);
    return TDM_OK;
}

// ---- sessions ----------------------------------------------------------------------------

bool tdm_profile_is_recording(void) {
    return atomic_load(&tdm_profile_flags) & TDM_PROFILE_RECORDING;
}

uint64_t tdm_profile_launches(void) {
#ifdef TDM_HAVE_CUDA   // the reference backend launches nothing (it has no launch_count)
    const struct tdm_backend_ops *be = tdm_backend_get(TDM_DEVICE_CUDA);
    return be && be->launch_count ? be->launch_count() : 0;
#else
    return 0;
#endif
}

tdm_status tdm_profile_start(void) {
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&tdm_profile_flags) & TDM_PROFILE_RECORDING) {
        pthread_mutex_unlock(&reg_lock);
        return tdm_error_set(TDM_ERR_ARG, "profile_start: a profiling session is already running");
    }
    atomic_fetch_add(&session_gen, 1);
    session_t0 = now_ns();
    atomic_fetch_or(&tdm_profile_flags, TDM_PROFILE_RECORDING | TDM_PROFILE_NVTX);
    pthread_mutex_unlock(&reg_lock);
    return TDM_OK;
}

static int cmp_event_start(const void *a, const void *b) {
    const prof_event *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
    return x->depth - y->depth;   // the parent first when they start together
}

// Device times: each device's first timed op is taken to start on the device when it started on
// the host; every other op is placed by the elapsed time from that reference event.
#define PROF_MAX_DEVICES 16
static void resolve_device_times(tdm_profile *p) {
    const prof_event *ref[PROF_MAX_DEVICES];
    int n_ref = 0;
    for (int64_t i = 0; i < p->n; i++) {
        prof_event *e = &p->events[i];
        if (!e->ev_start || !e->ev_end) continue;
        double ms = e->be->prof_event_elapsed_ms(e->ev_start, e->ev_end);
        if (ms < 0) continue;
        e->device_us = ms * 1e3;
        int k = 0;
        while (k < n_ref && !(ref[k]->be == e->be && tdm_device_equal(ref[k]->device, e->device)))
            k++;
        if (k == n_ref && n_ref < PROF_MAX_DEVICES) ref[n_ref++] = e;
        else if (k < n_ref && e->start_ns < ref[k]->start_ns) ref[k] = e;
    }
    for (int64_t i = 0; i < p->n; i++) {
        prof_event *e = &p->events[i];
        if (e->device_us < 0) continue;
        p->device_measured = true;
        for (int k = 0; k < n_ref; k++) {
            if (ref[k]->be != e->be || !tdm_device_equal(ref[k]->device, e->device)) continue;
            double ms = ref[k] == e ? 0 : e->be->prof_event_elapsed_ms(ref[k]->ev_start, e->ev_start);
            if (ms >= 0) e->device_start_us = (double)ref[k]->start_ns / 1e3 + ms * 1e3;
        }
    }
    for (int64_t i = 0; i < p->n; i++) {
        prof_event *e = &p->events[i];
        if (e->ev_start && e->be->prof_event_free) e->be->prof_event_free(e->ev_start);
        if (e->ev_end && e->be->prof_event_free) e->be->prof_event_free(e->ev_end);
        e->ev_start = e->ev_end = NULL;
    }
}

static int cmp_row(const void *a, const void *b, bool device) {
    const tdm_profile_row *x = a, *y = b;
    double kx = device ? x->device_total_us : x->host_total_us;
    double ky = device ? y->device_total_us : y->host_total_us;
    if (kx != ky) return kx > ky ? -1 : 1;
    return strcmp(x->name, y->name);
}
static int cmp_row_host(const void *a, const void *b) { return cmp_row(a, b, false); }
static int cmp_row_device(const void *a, const void *b) { return cmp_row(a, b, true); }

// One row per op name: the events' names live in p->events, so rows point there.
static tdm_status aggregate(tdm_profile *p) {
    p->rows = calloc((size_t)(p->n ? p->n : 1), sizeof *p->rows);
    if (!p->rows) return tdm_error_set(TDM_ERR_OOM, "profile_stop: out of memory");
    for (int64_t i = 0; i < p->n; i++) {
        const prof_event *e = &p->events[i];
        if (e->is_range) continue;
        tdm_profile_row *r = NULL;
        for (int k = 0; k < p->n_rows && !r; k++)
            if (!strcmp(p->rows[k].name, e->name)) r = &p->rows[k];
        if (!r) {
            r = &p->rows[p->n_rows++];
            r->name = e->name;
            r->device_total_us = -1;
        }
        double total = (double)(e->end_ns - e->start_ns) / 1e3;
        r->calls++;
        r->host_total_us += total;
        r->host_self_us += total - (double)e->child_ns / 1e3;
        if (e->device_us >= 0) r->device_total_us = (r->device_total_us < 0 ? 0 : r->device_total_us) + e->device_us;
        r->flops += e->flops;
        r->bytes += e->bytes;
    }
    for (int k = 0; k < p->n_rows; k++) {
        tdm_profile_row *r = &p->rows[k];
        r->host_mean_us = r->host_total_us / (double)r->calls;
        r->share = p->wall_ns > 0 ? r->host_self_us / ((double)p->wall_ns / 1e3) : 0;
    }
    qsort(p->rows, (size_t)p->n_rows, sizeof *p->rows,
          p->device_measured ? cmp_row_device : cmp_row_host);
    return TDM_OK;
}

tdm_profile *tdm_profile_stop(void) {
    pthread_mutex_lock(&reg_lock);
    if (!(atomic_load(&tdm_profile_flags) & TDM_PROFILE_RECORDING)) {
        pthread_mutex_unlock(&reg_lock);
        tdm_error_set(TDM_ERR_ARG, "profile_stop: no profiling session is running");
        return NULL;
    }
    int64_t wall = now_ns() - session_t0;
    atomic_fetch_and(&tdm_profile_flags, nvtx_env ? ~TDM_PROFILE_RECORDING
                                                  : ~(TDM_PROFILE_RECORDING | TDM_PROFILE_NVTX));
    atomic_fetch_add(&session_gen, 1);   // frames still open elsewhere are dropped
    tdm_profile *p = calloc(1, sizeof *p);
    bool oom = !p;
    for (prof_thread *t = reg_head; t; t = t->next) {
        pthread_mutex_lock(&t->lock);
        if (!oom && t->n) {
            prof_event *ev = realloc(p->events, (size_t)(p->n + t->n) * sizeof *ev);
            if (ev) {
                p->events = ev;
                memcpy(p->events + p->n, t->events, (size_t)t->n * sizeof *ev);
                p->n += t->n;
            } else {
                oom = true;
            }
        }
        if (oom)   // nothing can be kept: release the device events
            for (int64_t i = 0; i < t->n; i++) {
                prof_event *e = &t->events[i];
                if (e->ev_start && e->be->prof_event_free) e->be->prof_event_free(e->ev_start);
                if (e->ev_end && e->be->prof_event_free) e->be->prof_event_free(e->ev_end);
            }
        t->n = 0;
        free(t->events);   // a session's buffers go with it: nothing stays allocated when off
        t->events = NULL;
        t->cap = 0;
        pthread_mutex_unlock(&t->lock);
    }
    int n_threads = reg_count;
    pthread_mutex_unlock(&reg_lock);
    if (oom) {
        tdm_profile_free(p);
        tdm_error_set(TDM_ERR_OOM, "profile_stop: out of memory");
        return NULL;
    }
    p->wall_ns = wall;
    p->n_threads = n_threads;
    qsort(p->events, (size_t)p->n, sizeof *p->events, cmp_event_start);
    resolve_device_times(p);
    if (aggregate(p) != TDM_OK) {
        tdm_profile_free(p);
        return NULL;
    }
    return p;
}

void tdm_profile_free(tdm_profile *p) {
    if (!p) return;
    free(p->events);
    free(p->rows);
    free(p);
}

int tdm_profile_rows(const tdm_profile *p, const tdm_profile_row **rows) {
    if (rows) *rows = p ? p->rows : NULL;
    return p ? p->n_rows : 0;
}

double tdm_profile_wall_us(const tdm_profile *p) { return p ? (double)p->wall_ns / 1e3 : 0; }
int64_t tdm_profile_event_count(const tdm_profile *p) { return p ? p->n : 0; }

// ---- the table ---------------------------------------------------------------------------

static void fmt_us(char *buf, size_t n, double us) {
    if (us < 0) snprintf(buf, n, "not measured");
    else if (us >= 1e6) snprintf(buf, n, "%.3f s", us / 1e6);
    else if (us >= 1e3) snprintf(buf, n, "%.3f ms", us / 1e3);
    else snprintf(buf, n, "%.3f us", us);
}

void tdm_profile_table_print(const tdm_profile *p, FILE *f, int top) {
    if (!p || !f) return;
    int n = top > 0 && top < p->n_rows ? top : p->n_rows;
    fprintf(f, "%-24s %8s %14s %14s %14s %7s %14s %12s %14s\n", "op", "calls", "host total",
            "host self", "host mean", "share", "device total", "GFLOP", "bytes alloc");
    for (int k = 0; k < n; k++) {
        const tdm_profile_row *r = &p->rows[k];
        char tot[32], self[32], mean[32], dev[32];
        fmt_us(tot, sizeof tot, r->host_total_us);
        fmt_us(self, sizeof self, r->host_self_us);
        fmt_us(mean, sizeof mean, r->host_mean_us);
        fmt_us(dev, sizeof dev, r->device_total_us);
        fprintf(f, "%-24s %8lld %14s %14s %14s %6.1f%% %14s %12.4f %14lld\n", r->name,
                (long long)r->calls, tot, self, mean, 100 * r->share, dev, r->flops / 1e9,
                (long long)r->bytes);
    }
    char wall[32];
    fmt_us(wall, sizeof wall, tdm_profile_wall_us(p));
    fprintf(f, "profiled wall time %s; sorted by %s time%s\n", wall,
            p->device_measured ? "device" : "host total",
            p->device_measured ? "" : " (device time not measured on this backend)");
}

static cJSON *table_json(const tdm_profile *p) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddNumberToObject(root, "wall_us", tdm_profile_wall_us(p));
    cJSON_AddStringToObject(root, "sorted_by", p->device_measured ? "device_total_us"
                                                                  : "host_total_us");
    cJSON_AddBoolToObject(root, "device_measured", p->device_measured);
    cJSON *rows = cJSON_AddArrayToObject(root, "rows");
    for (int k = 0; rows && k < p->n_rows; k++) {
        const tdm_profile_row *r = &p->rows[k];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(rows, o);
        cJSON_AddStringToObject(o, "name", r->name);
        cJSON_AddNumberToObject(o, "calls", (double)r->calls);
        cJSON_AddNumberToObject(o, "host_total_us", r->host_total_us);
        cJSON_AddNumberToObject(o, "host_self_us", r->host_self_us);
        cJSON_AddNumberToObject(o, "host_mean_us", r->host_mean_us);
        cJSON_AddNumberToObject(o, "share", r->share);
        if (r->device_total_us >= 0) cJSON_AddNumberToObject(o, "device_total_us", r->device_total_us);
        else cJSON_AddStringToObject(o, "device_total_us", "not measured");
        cJSON_AddNumberToObject(o, "flops", r->flops);
        cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
    }
    return root;
}

char *tdm_profile_table_json(const tdm_profile *p) {
    if (!p) {
        tdm_error_set(TDM_ERR_ARG, "profile_table_json: profile is NULL");
        return NULL;
    }
    cJSON *root = table_json(p);
    char *s = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!s) tdm_error_set(TDM_ERR_OOM, "profile_table_json: out of memory");
    return s;
}

// ---- the trace ---------------------------------------------------------------------------

// Writes text to path: a temp file beside it, fsync, rename (the old file stays on failure; a
// path that is a link, a FIFO or a device is refused, not replaced).
static tdm_status write_atomic(const char *what, const char *path, const char *text) {
    if (tdm_file_write_atomic(path, text, strlen(text)) == 0) return TDM_OK;
    return tdm_error_set(TDM_ERR_IO, "%s: %s: write failed (%s); the old file, if any, is intact",
                         what, path, tdm_file_strerror(errno));
}

static cJSON *event_base(cJSON *arr, const char *name, const char *ph, double ts_us, int pid,
                         int tid) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "ph", ph);
    cJSON_AddNumberToObject(o, "ts", ts_us);
    cJSON_AddNumberToObject(o, "pid", pid);
    cJSON_AddNumberToObject(o, "tid", tid);
    return o;
}

static void meta_name(cJSON *arr, const char *what, int pid, int tid, const char *name) {
    cJSON *o = event_base(arr, what, "M", 0, pid, tid);
    cJSON *args = o ? cJSON_AddObjectToObject(o, "args") : NULL;
    if (args) cJSON_AddStringToObject(args, "name", name);
}

static void event_args(cJSON *o, const prof_event *e) {
    cJSON *args = cJSON_AddObjectToObject(o, "args");
    if (!args || e->is_range) return;
    cJSON *shapes = cJSON_AddArrayToObject(args, "input_shapes");
    cJSON *dtypes = cJSON_AddArrayToObject(args, "input_dtypes");
    int n = e->n_inputs < PROF_MAX_INPUTS ? e->n_inputs : PROF_MAX_INPUTS;
    for (int i = 0; shapes && dtypes && i < n; i++) {
        if (!e->in[i].present) {
            cJSON_AddItemToArray(shapes, cJSON_CreateNull());
            cJSON_AddItemToArray(dtypes, cJSON_CreateNull());
            continue;
        }
        cJSON *sh = cJSON_CreateArray();
        for (int d = 0; sh && d < e->in[i].ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e->in[i].shape[d]));
        cJSON_AddItemToArray(shapes, sh);
        cJSON_AddItemToArray(dtypes, cJSON_CreateString(tdm_dtype_name(e->in[i].dtype)));
    }
    if (e->has_device) {
        char dev[32];
        cJSON_AddStringToObject(args, "device", tdm_device_str(e->device, dev, sizeof dev));
    }
    if (e->flops > 0) cJSON_AddNumberToObject(args, "flops", e->flops);
    cJSON_AddNumberToObject(args, "bytes_allocated", (double)e->bytes);
    cJSON_AddNumberToObject(args, "launches", (double)e->launches);
    if (e->device_us >= 0) cJSON_AddNumberToObject(args, "device_us", e->device_us);
    else cJSON_AddStringToObject(args, "device_us", "not measured");
}

static int device_tid(tdm_device d) {
    return PROF_DEVICE_TID + (int)d.type * 1000 + (d.type == TDM_DEVICE_CPU ? 0 : d.index);
}

static cJSON *trace_json(const tdm_profile *p) {
    const int pid = (int)getpid();
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
    if (!arr) {
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    meta_name(arr, "process_name", pid, 0, "tandem");
    // Host tracks: one per thread that recorded something.
    for (int tid = 0; tid < p->n_threads; tid++) {
        bool used = false;
        for (int64_t i = 0; i < p->n && !used; i++) used = p->events[i].tid == tid;
        char name[48];
        snprintf(name, sizeof name, "host thread %d", tid);
        if (used) meta_name(arr, "thread_name", pid, tid, name);
    }
    // Memory: per device the highest sample, for the peak marker.
    typedef struct { tdm_device dev; int64_t peak; const prof_event *at; } dev_peak;
    dev_peak peaks[8];
    int n_peaks = 0;
    tdm_device named[8];   // device tracks named so far
    int n_named = 0;
    for (int64_t i = 0; i < p->n; i++) {
        const prof_event *e = &p->events[i];
        cJSON *o = event_base(arr, e->name, "X", (double)e->start_ns / 1e3, pid, e->tid);
        if (!o) break;
        cJSON_AddStringToObject(o, "cat", e->is_range ? "range" : "op");
        cJSON_AddNumberToObject(o, "dur", (double)(e->end_ns - e->start_ns) / 1e3);
        event_args(o, e);
        if (e->device_us >= 0 && e->device_start_us >= 0) {   // the device track
            int k = 0;
            while (k < n_named && !tdm_device_equal(named[k], e->device)) k++;
            if (k == n_named && n_named < 8) {
                char dev[32], name[64];
                snprintf(name, sizeof name, "%s (device stream)",
                         tdm_device_str(e->device, dev, sizeof dev));
                meta_name(arr, "thread_name", pid, device_tid(e->device), name);
                named[n_named++] = e->device;
            }
            cJSON *d = event_base(arr, e->name, "X", e->device_start_us, pid, device_tid(e->device));
            if (d) {
                cJSON_AddStringToObject(d, "cat", "device");
                cJSON_AddNumberToObject(d, "dur", e->device_us);
            }
        }
        if (e->is_range || !e->has_mem) continue;
        char cname[64], dev[32];
        snprintf(cname, sizeof cname, "memory %s", tdm_device_str(e->device, dev, sizeof dev));
        cJSON *c = event_base(arr, cname, "C", (double)e->end_ns / 1e3, pid, 0);
        cJSON *args = c ? cJSON_AddObjectToObject(c, "args") : NULL;
        if (args) {
            cJSON_AddNumberToObject(args, "allocated", (double)e->mem_allocated);
            cJSON_AddNumberToObject(args, "reserved", (double)e->mem_reserved);
        }
        int k = 0;
        while (k < n_peaks && !tdm_device_equal(peaks[k].dev, e->device)) k++;
        if (k == n_peaks && n_peaks < 8) peaks[n_peaks++] = (dev_peak){e->device, -1, NULL};
        if (k < n_peaks && e->mem_allocated > peaks[k].peak) {
            peaks[k].peak = e->mem_allocated;
            peaks[k].at = e;
        }
    }
    for (int k = 0; k < n_peaks; k++) {
        const prof_event *e = peaks[k].at;
        char name[96], dev[32];
        snprintf(name, sizeof name, "peak allocated %s (after %s)",
                 tdm_device_str(e->device, dev, sizeof dev), e->name);
        cJSON *o = event_base(arr, name, "i", (double)e->end_ns / 1e3, pid, e->tid);
        if (!o) break;
        cJSON_AddStringToObject(o, "s", "p");   // process-wide: a line across the tracks
        cJSON *args = cJSON_AddObjectToObject(o, "args");
        if (args) {
            cJSON_AddNumberToObject(args, "allocated", (double)e->mem_allocated);
            cJSON_AddNumberToObject(args, "reserved", (double)e->mem_reserved);
        }
    }
    cJSON *other = cJSON_AddObjectToObject(root, "otherData");
    if (other) {
        cJSON_AddStringToObject(other, "producer", tdm_build_info());
        cJSON_AddNumberToObject(other, "wall_us", tdm_profile_wall_us(p));
        cJSON_AddBoolToObject(other, "device_measured", p->device_measured);
        cJSON *table = table_json(p);
        if (table) cJSON_AddItemToObject(other, "table", table);
    }
    return root;
}

tdm_status tdm_profile_trace_save(const tdm_profile *p, const char *path) {
    if (!p || !path) return tdm_error_set(TDM_ERR_ARG, "profile_trace_save: profile or path is NULL");
    cJSON *root = trace_json(p);
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) return tdm_error_set(TDM_ERR_OOM, "profile_trace_save: out of memory");
    tdm_status s = write_atomic("profile_trace_save", path, text);
    free(text);
    return s;
}

tdm_status tdm_profile_table_save(const tdm_profile *p, const char *path) {
    if (!p || !path) return tdm_error_set(TDM_ERR_ARG, "profile_table_save: profile or path is NULL");
    char *text = tdm_profile_table_json(p);
    if (!text) return tdm_last_status();
    tdm_status s = write_atomic("profile_table_save", path, text);
    free(text);
    return s;
}

/* test_profile.c — the profiler on the cpu: a 3-layer MLP training step profiled, its table
 * checked op by op against counts derived from the model (not from a run), the linear FLOPs
 * against 2*M*N*K, the Chrome trace parsed and checked for balanced, nested events on every
 * track that add up to the measured step, the memory counters and the peak marker, ops on a
 * second thread on their own track, and no allocation added by a profiler that is off (malloc,
 * calloc and realloc are counted through the linker's --wrap).
 *
 * test_profile DIR                   the tests (files in DIR)
 * test_profile --plant-extra-op DIR  the same with one extra relu in the forward: must fail
 * test_profile --check-trace FILE [OP...]  FILE is a valid nested trace with events named OP
 * test_profile --check-report DIR    DIR's report.html and report.md (bench report) show the top
 *                                    ops of every profiles/<name>.table.json (bench run --profile) */
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "core/tensor_impl.h"   // a tensor's backend, for the fake device timer
#include "tandem/tandem.h"
#include "harness/fileio.h"

// ---- counting allocations (linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc) ----

static atomic_long n_mallocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n) {
    atomic_fetch_add(&n_mallocs, 1);
    return __real_malloc(n);
}
void *__wrap_calloc(size_t k, size_t n) {
    atomic_fetch_add(&n_mallocs, 1);
    return __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n) {
    atomic_fetch_add(&n_mallocs, 1);
    return __real_realloc(p, n);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// ---- the model: Linear/ReLU layers of these widths, SGD without momentum ---------------------

#define N_LAYERS 3
static const int64_t WIDTHS[N_LAYERS + 1] = {20, 64, 32, 5};
#define BATCH 16

static bool plant_extra_op;   // --plant-extra-op: one relu more than the model has

typedef struct {
    tdm_module *m;
    tdm_optimizer *opt;
    tdm_tensor *x, *y;
} mlp;

static bool mlp_make(mlp *t) {
    char spec[64];
    snprintf(spec, sizeof spec, "mlp:%lld-%lld-%lld-%lld", (long long)WIDTHS[0],
             (long long)WIDTHS[1], (long long)WIDTHS[2], (long long)WIDTHS[3]);
    t->m = tdm_nn_from_spec(spec);
    if (!t->m || tdm_module_init(t->m, 1) != TDM_OK) return false;
    tdm_tensor *ps[2 * N_LAYERS];
    int n = tdm_module_parameters(t->m, ps, 2 * N_LAYERS);
    tdm_sgd_params sp = {.lr = 0.01};
    t->opt = tdm_optim_sgd(ps, n, &sp);
    int64_t xs[2] = {BATCH, WIDTHS[0]}, ns = BATCH, yv[BATCH];
    for (int i = 0; i < BATCH; i++) yv[i] = i % WIDTHS[N_LAYERS];
    t->x = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, TDM_CPU, 7, 0);
    t->y = tdm_tensor_from_host(1, &ns, TDM_DTYPE_I64, TDM_CPU, yv);
    return t->opt && t->x && t->y;
}

static void mlp_free(mlp *t) {
    tdm_optimizer_free(t->opt);
    tdm_module_free(t->m);
    tdm_tensor_free(t->x);
    tdm_tensor_free(t->y);
}

// One training step in ranges step > forward / backward / optimizer; true on success.
static bool mlp_step(mlp *t) {
    bool ok = tdm_profile_range_push("step") == TDM_OK;
    tdm_optimizer_zero_grad(t->opt);
    ok = ok && tdm_profile_range_push("forward") == TDM_OK;
    tdm_tensor *out = tdm_module_forward(t->m, t->x);
    if (plant_extra_op && out) tdm_tensor_free(tdm_relu(out));
    tdm_tensor *loss = out ? tdm_cross_entropy(out, t->y, TDM_REDUCTION_MEAN, 0.0, -100) : NULL;
    ok = ok && loss && tdm_profile_range_pop() == TDM_OK;
    ok = ok && tdm_profile_range_push("backward") == TDM_OK && tdm_backward(loss, NULL) == TDM_OK &&
         tdm_profile_range_pop() == TDM_OK;
    ok = ok && tdm_profile_range_push("optimizer") == TDM_OK &&
         tdm_optimizer_step(t->opt) == TDM_OK && tdm_profile_range_pop() == TDM_OK;
    ok = ok && tdm_profile_range_pop() == TDM_OK;
    tdm_tensor_free(loss);
    tdm_tensor_free(out);
    if (!ok) fprintf(stderr, "step failed: %s\n", tdm_last_error());
    return ok;
}

static const tdm_profile_row *row_of(const tdm_profile *p, const char *name) {
    const tdm_profile_row *rows;
    int n = tdm_profile_rows(p, &rows);
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    return NULL;
}

// ---- the trace's structure -------------------------------------------------------------------

typedef struct {
    const char *name;
    double ts, dur;
    int tid;
} x_event;

static int cmp_x(const void *a, const void *b) {
    const x_event *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->dur > y->dur ? -1 : x->dur < y->dur;   // the parent first
}

// Checks the Chrome trace at path: every event well formed, per track the complete events
// properly nested (a child inside its parent in time), each name in `want` present. Returns the
// parsed root (caller frees) or NULL; *top_sum: the durations of the top-level events of the
// tracks, summed; *n_x: how many complete events.
#define EPS_US 1e-3
static cJSON *check_trace(const char *path, const char *const *want, int n_want, double *top_sum,
                          int *n_x) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f, "cannot open %s", path);
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    size_t got = fread(text, 1, (size_t)len, f);
    fclose(f);
    text[got] = '\0';
    cJSON *root = cJSON_Parse(text);
    free(text);
    CHECK_MSG(root, "%s is not valid JSON", path);
    if (!root) return NULL;
    cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
    CHECK(cJSON_IsArray(evs));
    int n = cJSON_GetArraySize(evs);
    x_event *xs = calloc((size_t)n + 1, sizeof *xs);
    int nx = 0;
    bool seen[16] = {0};
    cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        cJSON *name = cJSON_GetObjectItem(e, "name"), *ph = cJSON_GetObjectItem(e, "ph");
        cJSON *ts = cJSON_GetObjectItem(e, "ts"), *pid = cJSON_GetObjectItem(e, "pid");
        CHECK(cJSON_IsString(name) && cJSON_IsString(ph) && cJSON_IsNumber(ts) &&
              cJSON_IsNumber(pid));
        if (!cJSON_IsString(ph) || !cJSON_IsString(name)) continue;
        if (!strcmp(ph->valuestring, "X")) {
            cJSON *dur = cJSON_GetObjectItem(e, "dur"), *tid = cJSON_GetObjectItem(e, "tid");
            CHECK(cJSON_IsNumber(dur) && dur->valuedouble >= 0 && cJSON_IsNumber(tid));
            CHECK(cJSON_IsObject(cJSON_GetObjectItem(e, "args")) ||
                  cJSON_GetObjectItem(e, "args") == NULL);
            if (!cJSON_IsNumber(dur) || !cJSON_IsNumber(tid)) continue;
            xs[nx++] = (x_event){name->valuestring, ts->valuedouble, dur->valuedouble,
                                 tid->valueint};
            for (int k = 0; k < n_want; k++) seen[k] |= !strcmp(want[k], name->valuestring);
        } else if (!strcmp(ph->valuestring, "C")) {
            cJSON *args = cJSON_GetObjectItem(e, "args");
            CHECK(cJSON_IsNumber(cJSON_GetObjectItem(args, "allocated")) &&
                  cJSON_IsNumber(cJSON_GetObjectItem(args, "reserved")));
        } else {
            CHECK_MSG(!strcmp(ph->valuestring, "M") || !strcmp(ph->valuestring, "i"),
                      "unexpected phase %s", ph->valuestring);
        }
    }
    for (int k = 0; k < n_want; k++) CHECK_MSG(seen[k], "no event named %s in %s", want[k], path);
    // Nesting per track: a stack of open parents.
    qsort(xs, (size_t)nx, sizeof *xs, cmp_x);
    int stack[64], depth = 0, bad = 0;
    double tops = 0;
    for (int i = 0; i < nx; i++) {
        if (i > 0 && xs[i].tid != xs[i - 1].tid) depth = 0;
        while (depth > 0 && xs[stack[depth - 1]].ts + xs[stack[depth - 1]].dur <= xs[i].ts + EPS_US)
            depth--;
        if (depth > 0) {
            const x_event *p = &xs[stack[depth - 1]];
            if (xs[i].ts + xs[i].dur > p->ts + p->dur + EPS_US && bad++ < 5)
                fprintf(stderr, "%s [%.3f, +%.3f] overlaps its parent %s [%.3f, +%.3f]\n",
                        xs[i].name, xs[i].ts, xs[i].dur, p->name, p->ts, p->dur);
        } else {
            tops += xs[i].dur;
        }
        if (depth < 64) stack[depth++] = i;
    }
    CHECK_MSG(bad == 0, "%d events are not nested in their parents", bad);
    free(xs);
    if (top_sum) *top_sum = tops;
    if (n_x) *n_x = nx;
    return root;
}

// ---- the tests -------------------------------------------------------------------------------

static void test_mlp_step(const char *dir) {
    mlp t;
    CHECK_MSG(mlp_make(&t), "%s", tdm_last_error());
    CHECK(mlp_step(&t));   // warm-up, not profiled
    CHECK(tdm_profile_start() == TDM_OK);
    CHECK(tdm_profile_start() == TDM_ERR_ARG);   // one session at a time
    double t0 = now_us();
    CHECK(mlp_step(&t));
    double wall = now_us() - t0;
    tdm_profile *p = tdm_profile_stop();
    CHECK_MSG(p, "%s", tdm_last_error());
    CHECK(tdm_profile_stop() == NULL);   // nothing running any more
    if (!p) {
        mlp_free(&t);
        return;
    }
    // Expected calls, from the model: every Linear layer runs linear once forward and
    // linear_backward once backward; a ReLU follows every layer but the last; one loss; the
    // backward seeds the scalar loss's gradient with a cast ("to") of a ones tensor; SGD steps
    // each parameter (weight and bias of every layer) once. Nothing else.
    struct { const char *name; int64_t calls; } want[] = {
        {"linear", N_LAYERS},          {"linear_backward", N_LAYERS},
        {"relu", N_LAYERS - 1},        {"relu_backward", N_LAYERS - 1},
        {"cross_entropy", 1},          {"cross_entropy_backward", 1},
        {"to", 1},                     {"sgd_step", 2 * N_LAYERS},
    };
    const int n_want = (int)(sizeof want / sizeof want[0]);
    const tdm_profile_row *rows;
    int n_rows = tdm_profile_rows(p, &rows);
    for (int k = 0; k < n_want; k++) {
        const tdm_profile_row *r = row_of(p, want[k].name);
        CHECK_MSG(r && r->calls == want[k].calls, "%s: %lld calls, expected %lld", want[k].name,
                  r ? (long long)r->calls : 0LL, (long long)want[k].calls);
    }
    CHECK_MSG(n_rows == n_want, "%d op names in the table, expected %d", n_rows, n_want);
    for (int i = 0; i < n_rows; i++) {
        bool known = false;
        for (int k = 0; k < n_want; k++) known |= !strcmp(rows[i].name, want[k].name);
        CHECK_MSG(known, "unexpected op %s (%lld calls)", rows[i].name, (long long)rows[i].calls);
        CHECK(rows[i].host_total_us >= 0 && rows[i].host_self_us <= rows[i].host_total_us + 1e-6);
        CHECK(rows[i].device_total_us < 0);   // the cpu measures no device time
        if (i > 0) CHECK(rows[i - 1].host_total_us >= rows[i].host_total_us);   // sorted
    }
    // FLOPs: linear 2*M*N*K per layer (M = batch); linear_backward the same for gw, and again
    // for gx except at the first layer, whose input needs no gradient.
    double fl = 0, fl_bw = 0;
    for (int l = 0; l < N_LAYERS; l++) {
        double mnk = (double)BATCH * (double)WIDTHS[l] * (double)WIDTHS[l + 1];
        fl += 2 * mnk;
        fl_bw += (l == 0 ? 2 : 4) * mnk;
    }
    const tdm_profile_row *lin = row_of(p, "linear"), *lin_bw = row_of(p, "linear_backward");
    CHECK_MSG(lin && lin->flops == fl, "linear flops %g, expected %g", lin ? lin->flops : -1, fl);
    CHECK_MSG(lin_bw && lin_bw->flops == fl_bw, "linear_backward flops %g, expected %g",
              lin_bw ? lin_bw->flops : -1, fl_bw);
    const tdm_profile_row *relu = row_of(p, "relu");
    CHECK(relu && relu->flops == 0);
    // The outputs of linear: BATCH x width floats each, allocated and kept.
    int64_t lin_bytes = 0;
    for (int l = 0; l < N_LAYERS; l++) lin_bytes += BATCH * WIDTHS[l + 1] * 4;
    CHECK_MSG(lin && lin->bytes == lin_bytes, "linear allocated %lld bytes, expected %lld",
              lin ? (long long)lin->bytes : -1LL, (long long)lin_bytes);
    CHECK(tdm_profile_wall_us(p) > 0 && tdm_profile_wall_us(p) >= wall);

    // The trace: valid, nested, the step's top-level events within the measured wall time and
    // covering most of it.
    char path[512];
    snprintf(path, sizeof path, "%s/profile_mlp.json", dir);
    CHECK_MSG(tdm_profile_trace_save(p, path) == TDM_OK, "%s", tdm_last_error());
    const char *names[] = {"step", "forward", "backward", "optimizer", "linear", "linear_backward",
                           "sgd_step"};
    double tops = 0;
    int nx = 0;
    cJSON *root = check_trace(path, names, 7, &tops, &nx);
    CHECK_MSG(nx == tdm_profile_event_count(p), "%d complete events, %lld recorded", nx,
              (long long)tdm_profile_event_count(p));
    CHECK_MSG(tops <= wall + EPS_US && tops >= 0.5 * wall,
              "top-level events sum to %.1f us of a %.1f us step", tops, wall);
    // Ops inside their ranges: the forward holds linear; the memory counter's peak is marked.
    if (root) {
        double peak = -1, marked = -2, fwd_ts = -1, fwd_end = -1;
        int n_lin_in_fwd = 0;
        cJSON *e, *evs = cJSON_GetObjectItem(root, "traceEvents");
        cJSON_ArrayForEach(e, evs) {
            const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
            const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
            cJSON *args = cJSON_GetObjectItem(e, "args");
            if (!strcmp(ph, "C") && !strcmp(name, "memory cpu")) {
                double a = cJSON_GetObjectItem(args, "allocated")->valuedouble;
                if (a > peak) peak = a;
            }
            if (!strcmp(ph, "i") && !strncmp(name, "peak allocated cpu", 18))
                marked = cJSON_GetObjectItem(args, "allocated")->valuedouble;
            if (!strcmp(ph, "X") && !strcmp(name, "forward")) {
                fwd_ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
                fwd_end = fwd_ts + cJSON_GetObjectItem(e, "dur")->valuedouble;
            }
        }
        cJSON_ArrayForEach(e, evs) {
            const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
            if (strcmp(name, "linear") || strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X"))
                continue;
            double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
            n_lin_in_fwd += ts >= fwd_ts && ts <= fwd_end;
            cJSON *args = cJSON_GetObjectItem(e, "args");
            cJSON *shapes = cJSON_GetObjectItem(args, "input_shapes");
            CHECK(cJSON_GetArraySize(shapes) == 3 &&
                  cJSON_GetArraySize(cJSON_GetArrayItem(shapes, 0)) == 2);
            CHECK(!strcmp(cJSON_GetArrayItem(cJSON_GetObjectItem(args, "input_dtypes"), 0)->valuestring,
                          "f32"));
            CHECK(cJSON_IsNumber(cJSON_GetObjectItem(args, "flops")));
            CHECK(!strcmp(cJSON_GetObjectItem(args, "device_us")->valuestring, "not measured"));
        }
        CHECK_MSG(n_lin_in_fwd == N_LAYERS, "%d linear events inside forward", n_lin_in_fwd);
        CHECK_MSG(peak > 0 && marked == peak, "peak %g, marked %g", peak, marked);
        cJSON_Delete(root);
    }
    // The table as JSON.
    char *tj = tdm_profile_table_json(p);
    cJSON *tr = tj ? cJSON_Parse(tj) : NULL;
    CHECK(tr && cJSON_GetArraySize(cJSON_GetObjectItem(tr, "rows")) == n_rows);
    cJSON_Delete(tr);
    free(tj);
    tdm_profile_table_print(p, stdout, 0);
    tdm_profile_free(p);
    mlp_free(&t);
}

// Profiling that is off (never started, or stopped) allocates nothing: the same malloc count and
// the same tensor allocations for a step as before profiling was ever used; a profiled step does
// allocate (so the counter sees the profiler).
static void test_off_allocates_nothing(void) {
    mlp t;
    CHECK_MSG(mlp_make(&t), "%s", tdm_last_error());
    CHECK(mlp_step(&t));   // warm-up
    tdm_memory_stats m0, m1;
    tdm_memory_stats_get(TDM_CPU, &m0);
    long c0 = atomic_load(&n_mallocs);
    CHECK(mlp_step(&t));
    long never = atomic_load(&n_mallocs) - c0;
    tdm_memory_stats_get(TDM_CPU, &m1);
    int64_t never_tensors = m1.n_allocs - m0.n_allocs;

    c0 = atomic_load(&n_mallocs);
    CHECK(tdm_profile_start() == TDM_OK);
    CHECK(mlp_step(&t));
    tdm_profile *p = tdm_profile_stop();
    long on = atomic_load(&n_mallocs) - c0;
    tdm_profile_free(p);

    tdm_memory_stats_get(TDM_CPU, &m0);
    c0 = atomic_load(&n_mallocs);
    CHECK(mlp_step(&t));
    long off = atomic_load(&n_mallocs) - c0;
    tdm_memory_stats_get(TDM_CPU, &m1);
    CHECK_MSG(never > 0 && off == never, "mallocs per step: %ld never profiled, %ld after a "
              "session (profiling off)", never, off);
    CHECK_MSG(m1.n_allocs - m0.n_allocs == never_tensors, "tensor allocations %lld vs %lld",
              (long long)(m1.n_allocs - m0.n_allocs), (long long)never_tensors);
    CHECK_MSG(on > never, "a profiled step: %ld mallocs (the counter must see the profiler's)", on);
    mlp_free(&t);
}

// Ops on a second thread are recorded on their own track; a range popped without a push is an
// error while recording and a no-op when off.
static void *relu_thread(void *arg) {
    tdm_tensor_free(tdm_relu(arg));
    return NULL;
}

static void test_threads_and_ranges(const char *dir) {
    CHECK(tdm_profile_range_pop() == TDM_OK);   // off: nothing to check
    int64_t s = 1000;
    tdm_tensor *x = tdm_tensor_randn(1, &s, TDM_DTYPE_F32, TDM_CPU, 1, 0);
    CHECK(tdm_profile_start() == TDM_OK);
    CHECK(tdm_profile_range_pop() == TDM_ERR_ARG);
    CHECK(tdm_profile_range_push("main") == TDM_OK);
    tdm_tensor_free(tdm_relu(x));
    pthread_t th;
    pthread_create(&th, NULL, relu_thread, x);
    pthread_join(th, NULL);
    CHECK(tdm_profile_range_pop() == TDM_OK);
    tdm_profile *p = tdm_profile_stop();
    const tdm_profile_row *r = row_of(p, "relu");
    CHECK(r && r->calls == 2);
    char path[512];
    snprintf(path, sizeof path, "%s/profile_threads.json", dir);
    CHECK(tdm_profile_trace_save(p, path) == TDM_OK);
    const char *names[] = {"main", "relu"};
    cJSON *root = check_trace(path, names, 2, NULL, NULL);
    int tids[2], n = 0;
    cJSON *e;
    if (root)
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
            if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "relu") || n >= 2) continue;
            tids[n++] = cJSON_GetObjectItem(e, "tid")->valueint;
        }
    CHECK_MSG(n == 2 && tids[0] != tids[1], "the two threads' relu share a track");
    cJSON_Delete(root);
    CHECK(tdm_profile_trace_save(p, "/nonexistent-dir/x.json") == TDM_ERR_IO);
    tdm_profile_free(p);
    tdm_tensor_free(x);
}

// ---- device time through the backend's event slots: the cpu backend with a fake timer ------
// Each event_record stamps the next multiple of 7 us on a fake device clock, so an op's device
// time is 7 us per event recorded inside it plus 7: relu (no nested ops) measures exactly 7 us,
// and the device track places the second relu 14 us after the first.

static struct tdm_backend_ops timed_backend;   // tdm_ref_backend + the fake event slots
static atomic_long fake_clock_us, fake_events_live;

static void *fake_event_record(int device_index) {
    (void)device_index;
    long *ev = malloc(sizeof *ev);
    if (ev) {
        *ev = atomic_fetch_add(&fake_clock_us, 7) + 7;
        atomic_fetch_add(&fake_events_live, 1);
    }
    return ev;
}

static double fake_event_elapsed_ms(void *start, void *end) {
    return (double)(*(long *)end - *(long *)start) / 1e3;
}

static void fake_event_free(void *ev) {
    atomic_fetch_sub(&fake_events_live, 1);
    free(ev);
}

static void test_device_time(const char *dir) {
    timed_backend = tdm_ref_backend;
    timed_backend.prof_event_record = fake_event_record;
    timed_backend.prof_event_elapsed_ms = fake_event_elapsed_ms;
    timed_backend.prof_event_free = fake_event_free;
    int64_t s = 256;
    tdm_tensor *x = tdm_tensor_randn(1, &s, TDM_DTYPE_F32, TDM_CPU, 3, 0);
    if (!x) return;
    x->storage->backend = &timed_backend;   // ops on x now record device events
    CHECK(tdm_profile_start() == TDM_OK);
    tdm_tensor_free(tdm_relu(x));
    tdm_tensor_free(tdm_relu(x));
    tdm_tensor *z = tdm_tensor_randn(1, &s, TDM_DTYPE_F32, TDM_CPU, 4, 0);
    tdm_tensor *y = tdm_relu(z);   // on the plain cpu backend: untimed
    tdm_profile *p = tdm_profile_stop();
    CHECK_MSG(atomic_load(&fake_events_live) == 0, "%ld device events not freed",
              atomic_load(&fake_events_live));
    const tdm_profile_row *rows;
    int n = tdm_profile_rows(p, &rows);
    CHECK(n == 1 && rows[0].calls == 3);
    CHECK_MSG(n >= 1 && fabs(rows[0].device_total_us - 14) < 1e-9, "device total %g us, want 14",
              n >= 1 ? rows[0].device_total_us : -1);
    char path[512];
    snprintf(path, sizeof path, "%s/profile_device.json", dir);
    CHECK(tdm_profile_trace_save(p, path) == TDM_OK);
    const char *names[] = {"relu"};
    cJSON *root = check_trace(path, names, 1, NULL, NULL);
    double dev_ts[2];
    int n_dev = 0, n_measured = 0;
    cJSON *e;
    if (root)
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
            cJSON *cat = cJSON_GetObjectItem(e, "cat"), *args = cJSON_GetObjectItem(e, "args");
            if (cat && !strcmp(cat->valuestring, "device") && n_dev < 2) {
                CHECK(fabs(cJSON_GetObjectItem(e, "dur")->valuedouble - 7) < 1e-9);
                CHECK(cJSON_GetObjectItem(e, "tid")->valueint >= 100000);
                dev_ts[n_dev++] = cJSON_GetObjectItem(e, "ts")->valuedouble;
            }
            if (cat && !strcmp(cat->valuestring, "op"))
                n_measured += cJSON_IsNumber(cJSON_GetObjectItem(args, "device_us"));
        }
    CHECK_MSG(n_dev == 2 && fabs(dev_ts[1] - dev_ts[0] - 14) < 1e-6,
              "%d device events, the second %g us after the first", n_dev,
              n_dev == 2 ? dev_ts[1] - dev_ts[0] : -1);
    CHECK(n_measured == 2);   // the third relu ran on the plain cpu backend: not measured
    cJSON_Delete(root);
    tdm_profile_free(p);
    x->storage->backend = &tdm_ref_backend;
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    tdm_tensor_free(z);
}

// ---- bench report's top-ops tables -----------------------------------------------------------

static void md_escape(const char *s, char *out, size_t n) {
    size_t k = 0;
    for (; *s && k + 2 < n; s++) {
        if (strchr("\\`*_[]<>|~&#", *s)) out[k++] = '\\';
        out[k++] = *s;
    }
    out[k] = '\0';
}

static void check_report(const char *dir) {
    char pattern[600], path[600];
    snprintf(pattern, sizeof pattern, "%s/profiles/*.table.json", dir);
    glob_t g;
    CHECK_MSG(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0, "no %s", pattern);
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = bench_read_file(path, NULL);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = bench_read_file(path, NULL);
    CHECK(html && md && strstr(md, "## Top ops (profiled)"));
    for (size_t i = 0; html && md && i < g.gl_pathc; i++) {
        char *text = bench_read_file(g.gl_pathv[i], NULL);
        cJSON *t = text ? cJSON_Parse(text) : NULL;
        free(text);
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(t, "benchmark"));
        cJSON *row;
        CHECK_MSG(id, "%s has no benchmark id", g.gl_pathv[i]);
        int k = 0;
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(t, "rows")) {
            if (!id || k++ >= 3) break;
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(row, "name"));
            long calls = (long)cJSON_GetNumberValue(cJSON_GetObjectItem(row, "calls"));
            char want[512], esc[256], esc_id[256];
            snprintf(want, sizeof want, "<code>%s</code></td><td class=\"n\">%ld</td>", name, calls);
            CHECK_MSG(strstr(html, want), "report.html lacks the row %s", want);
            md_escape(name, esc, sizeof esc);
            md_escape(id, esc_id, sizeof esc_id);
            snprintf(want, sizeof want, "| %s | %ld |", esc, calls);
            CHECK_MSG(strstr(md, want), "report.md lacks the row %s", want);
            snprintf(want, sizeof want, "### %s\n", esc_id);
            CHECK_MSG(strstr(md, want), "report.md lacks the heading %s", want);
        }
        CHECK_MSG(k > 0, "%s has no rows", g.gl_pathv[i]);
        cJSON_Delete(t);
    }
    free(html);
    free(md);
    globfree(&g);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--check-report")) {
        check_report(argv[2]);
        CHECK_DONE("profile report");
    }
    if (argc >= 3 && !strcmp(argv[1], "--check-trace")) {
        cJSON *root = check_trace(argv[2], (const char *const *)argv + 3, argc - 3, NULL, NULL);
        cJSON_Delete(root);
        CHECK_DONE("profile trace");
    }
    if (argc >= 2 && !strcmp(argv[1], "--plant-extra-op")) {
        plant_extra_op = true;
        argv++;
        argc--;
    }
    const char *dir = argc > 1 ? argv[1] : ".";
    if (!plant_extra_op) test_off_allocates_nothing();   // first: before any session
    test_mlp_step(dir);
    if (!plant_extra_op) {
        test_threads_and_ranges(dir);
        test_device_time(dir);
    }
    CHECK_DONE("profile");
}

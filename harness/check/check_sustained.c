/* check_sustained.c — `bench check`'s sustained load (level 3: `sustained.load`) and pulsed load
 * (level 4: `pulsed.load`), docs/CHECK.md "Sustained and pulsed load": the load on every GPU at
 * once (a thread each), its time series (clocks, power, temperature, throttle reasons, throughput,
 * sampled at 2 Hz) in each GPU's "series", and those series as the tidy CSV the report plots. Their
 * judge and the strict check of recorded series are check_sustained_judge.c's.
 *
 * The load is a bf16 GEMM (tdm_matmul, n x n: 8192 on a GPU, 64 on the emulated device) in windows
 * (0.5 s on a GPU), each timed by CUDA events, and one telemetry sample per window, read while the
 * window's products run (tdm_device_telemetry_read: NVML, cheap; the instantaneous power where the
 * driver has it, "power_source" says which). At each phase's start and end the energy counter and
 * NVML's violation times are read: "phases" holds each phase's seconds, energy, mean power and
 * the time each perf policy held the clocks down (deltas, which no short event escapes). Phases,
 * after DCGM's diagnostics (docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html):
 *   calibrate  after an untimed warm-up product (cuBLASLt's first call: heuristic, plan,
 *              workspace), full-speed windows until one lasts at least window_s of GPU time:
 *              its rate is R0, the GPU's own (the windows before it size it)
 *   stress     targeted stress: held at 0.8 x R0 by sleeping between slices of products
 *   power      targeted power: back to back, the most the GPU draws
 *   on, off    pulsed load (level 4): 1 s of load, 1 s idle, repeated (power transients)
 * Series: {"t_s", "sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c", "throttle_reasons",
 * "tflops", "phase"} arrays of one length (null: not read), and "n", "window_s", "target_tflops",
 * "median_tflops" ({phase: median}), "nvml" (why NVML did not answer, "" when it did), "error",
 * "power_source" ("instant", "average", "mixed" or "none"), "calibration" ({"warmup_s",
 * "seconds", "products", "windows"}: sustained.load) and "phases" ({phase: {"seconds",
 * "energy_j", "mean_power_w", "violation_s": {policy: seconds}}}, null where not read). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/bench.h"
#include "check.h"
#include "check_sustained.h"
#include "harness/stats.h"
#include "tandem/tandem.h"

static void sleep_s(double s) {
    if (!(s > 0)) return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

// ---- the load --------------------------------------------------------------------------------------

// A phase's sums over its periods (pulsed: every on or off second): wall seconds, energy (J) and
// each policy's violation seconds; a sum is unknown (NaN) once a period could not be read.
typedef struct {
    bool ran;
    double seconds, energy_j, violation_s[TDM_VIOLATION_N];
} phase_sum;

typedef struct {
    tdm_device d;
    int64_t n;
    double flop;                  // per product: 2 n^3
    tdm_tensor *a, *b, *c;
    tdm_event *e0, *e1;
    double t0, window_s;
    cJSON *s, *arr[N_KEYS];
    const char *error;
    char msg[400];
    bool nvml_said;
    double last_t;   // the last sample's time: each comes after it (t_s increases)
    bool power_instant, power_average;   // the power sources the samples used
    phase_sum sums[5];                   // per check_series_phases
    int cur;                             // the phase begun (-1: none)
    double cur_t0;
    tdm_device_telemetry cur_start;
    bool cur_ok;
} load;

static int phase_index(const char *phase) {
    for (int p = 0; p < 5; p++)
        if (!strcmp(check_series_phases[p], phase)) return p;
    return 0;
}

// A phase's period begins: the energy counter and the violation times now.
static void phase_begin(load *L, const char *phase) {
    L->cur = phase_index(phase);
    L->cur_ok = tdm_device_telemetry_read(L->d, &L->cur_start) == TDM_OK;
    tdm_error_clear();
    L->cur_t0 = bench_now_s();
}

static double counter_delta(int64_t a, int64_t b, double unit) {
    return a >= 0 && b >= a ? (double)(b - a) * unit : NAN;
}

// ... and ends: its deltas are added to the phase's sums.
static void phase_end(load *L) {
    if (L->cur < 0) return;
    tdm_device_telemetry e;
    bool ok = L->cur_ok && tdm_device_telemetry_read(L->d, &e) == TDM_OK;
    tdm_error_clear();
    phase_sum *p = &L->sums[L->cur];
    if (!p->ran) memset(p, 0, sizeof *p);
    p->ran = true;
    p->seconds += bench_now_s() - L->cur_t0;
    p->energy_j += ok ? counter_delta(L->cur_start.energy_mj, e.energy_mj, 1e-3) : NAN;
    for (int k = 0; k < TDM_VIOLATION_N; k++)
        p->violation_s[k] += ok ? counter_delta(L->cur_start.violation_ns[k], e.violation_ns[k], 1e-9) : NAN;
    L->cur = -1;
}

static void add_reading(cJSON *a, double v) {
    cJSON_AddItemToArray(a, isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull());
}

// Whether a phase takes another window: its first always, then until END (monotonic seconds), while
// the load has no error and the check was not interrupted.
static bool go_on(const load *L, bool first, double end) {
    return !L->error && !check_interrupted() && (first || bench_now_s() < end);
}

// One sample: the telemetry now, the throughput of its window (filled by add_rate).
static void sample(load *L, const char *phase) {
    tdm_device_telemetry t;
    bool ok = tdm_device_telemetry_read(L->d, &t) == TDM_OK;
    tdm_error_clear();
    if (ok && !L->nvml_said) {
        cJSON_AddStringToObject(L->s, "nvml", t.nvml);
        L->nvml_said = true;
    }
    double ts = bench_now_s() - L->t0;
    L->last_t = ts = ts > L->last_t ? ts : L->last_t + 1e-6;
    add_reading(L->arr[K_T], ts);
    add_reading(L->arr[K_SM], ok && t.clock_sm_mhz >= 0 ? t.clock_sm_mhz : NAN);
    add_reading(L->arr[K_MEM], ok && t.clock_mem_mhz >= 0 ? t.clock_mem_mhz : NAN);
    add_reading(L->arr[K_POWER], ok && t.power_mw >= 0 ? t.power_mw / 1e3 : NAN);
    if (ok && t.power_mw >= 0) {
        L->power_instant |= t.power_source == TDM_POWER_INSTANT;
        L->power_average |= t.power_source == TDM_POWER_AVERAGE;
    }
    add_reading(L->arr[K_TEMP], ok && t.temperature_c >= 0 ? t.temperature_c : NAN);
    add_reading(L->arr[K_THROTTLE], ok && t.throttle_reasons >= 0 ? (double)t.throttle_reasons : NAN);
    cJSON_AddItemToArray(L->arr[K_PHASE], cJSON_CreateString(phase));
}

static void add_rate(load *L, double tflops) { add_reading(L->arr[K_TFLOPS], tflops); }

// k products back to back, timed by events; the telemetry sampled while they run when phase is
// given. Returns the GPU seconds, or -1 with L->error.
static double products(load *L, int k, const char *phase) {
    bool ok = tdm_event_record(L->e0, NULL) == TDM_OK;
    for (int i = 0; ok && i < k; i++) {
        tdm_tensor_free(L->c);
        ok = (L->c = tdm_matmul(L->a, L->b)) != NULL;
    }
    ok = ok && tdm_event_record(L->e1, NULL) == TDM_OK;
    if (ok && phase) sample(L, phase);
    double ms = 0;
    ok = ok && tdm_event_synchronize(L->e1) == TDM_OK && tdm_event_elapsed_ms(L->e0, L->e1, &ms) == TDM_OK;
    if (!ok || !(ms > 0)) {
        snprintf(L->msg, sizeof L->msg, "%s", ok ? "a window took no time" : tdm_last_error());
        L->error = L->msg;
        return -1;
    }
    return ms / 1e3;
}

// The median rate (TFLOP/s) of the series' windows of PHASE from sample FROM on; NaN for none.
static double phase_median(load *L, const char *phase, int from) {
    int n = cJSON_GetArraySize(L->arr[K_TFLOPS]), m = 0;
    double *r = malloc((size_t)(n > from ? n - from : 1) * sizeof *r);
    if (!r) return NAN;
    for (int i = from; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(L->arr[K_TFLOPS], i);
        const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(L->arr[K_PHASE], i));
        if (cJSON_IsNumber(v) && p && !strcmp(p, phase)) r[m++] = v->valuedouble;
    }
    double med = m ? bench_median(r, m) : NAN;
    free(r);
    return med;
}

// Windows at full speed until `seconds` passed (one at least); k products per window, resized
// to window_s. Returns the median rate (TFLOP/s) of these windows.
static double full_speed(load *L, const char *phase, double seconds, int *k) {
    double end = bench_now_s() + seconds;
    int from = cJSON_GetArraySize(L->arr[K_T]);
    phase_begin(L, phase);
    for (bool first = true; go_on(L, first, end); first = false) {
        double t = products(L, *k, phase);
        if (t <= 0) break;
        add_rate(L, *k * L->flop / t / 1e12);
        int next = (int)lround(*k * L->window_s / t);
        *k = next < 1 ? 1 : next > 100000 ? 100000 : next;
    }
    phase_end(L);
    return phase_median(L, phase, from);
}

// Calibration: one product untimed first (cuBLASLt's first call picks its algorithm, builds its
// plan and takes its workspace: none of that may be in R0), then full-speed windows, each sized
// from the one before with a 20 % margin, until one lasts at least window_s of GPU time (at most
// 20 windows): its rate is R0. "calibration" records the warm-up's time and R0's window.
static double calibrate(load *L, int *k) {
    double warm = products(L, 1, NULL), r0 = NAN, t = 0;
    int windows = 0;
    phase_begin(L, "calibrate");
    while (!L->error && !check_interrupted() && windows < 20) {
        t = products(L, *k, "calibrate");
        windows++;
        if (t <= 0) break;
        double rate = *k * L->flop / t / 1e12;
        add_rate(L, rate);
        if (t >= L->window_s) {
            r0 = rate;
            break;
        }
        double next = ceil(*k * 1.2 * L->window_s / t);
        *k = next < 1 ? 1 : next > 100000 ? 100000 : (int)next;
    }
    phase_end(L);
    cJSON *c = cJSON_AddObjectToObject(L->s, "calibration");
    cJSON_AddNumberToObject(c, "warmup_s", warm > 0 ? warm : 0);
    cJSON_AddNumberToObject(c, "seconds", isfinite(r0) ? t : 0);
    cJSON_AddNumberToObject(c, "products", *k);
    cJSON_AddNumberToObject(c, "windows", windows);
    if (!L->error && !isfinite(r0) && !check_interrupted()) {
        snprintf(L->msg, sizeof L->msg, "calibration: no window of %d lasted %.2f s of GPU time", windows, L->window_s);
        L->error = L->msg;
    }
    // the windows after it: window_s each
    if (isfinite(r0)) {
        int next = (int)lround(*k * L->window_s / t);
        *k = next < 1 ? 1 : next;
    }
    return r0;
}

// Targeted stress: windows of five slices, each slice k products then a sleep to its deadline,
// so that the window's throughput (its FLOPs over its wall time) is the target.
static double stress(load *L, double seconds, double target) {
    double end = bench_now_s() + seconds, slice = L->window_s / 5;
    int k = (int)lround(target * 1e12 * slice / L->flop);
    if (k < 1) k = 1;
    phase_begin(L, "stress");
    for (bool first = true; go_on(L, first, end); first = false) {
        double w0 = bench_now_s(), flop = 0;
        for (int s = 0; s < 5 && !L->error; s++) {
            double s0 = bench_now_s();
            if (products(L, k, s == 0 ? "stress" : NULL) <= 0) break;
            flop += k * L->flop;
            sleep_s(s0 + k * L->flop / (target * 1e12) - bench_now_s());
        }
        if (L->error) break;
        add_rate(L, flop / (bench_now_s() - w0) / 1e12);
    }
    phase_end(L);
    return phase_median(L, "stress", 0);
}

// Pulsed load: 1 s on (full speed), 1 s off (idle, sampled at the same rate), repeated; on the
// emulated device the periods are two windows each.
static double pulsed(load *L, double seconds, int *k) {
    double end = bench_now_s() + seconds, period = 2 * L->window_s;
    for (bool first = true; go_on(L, first, end); first = false) {
        (void)full_speed(L, "on", period, k);
        phase_begin(L, "off");
        for (double t1 = bench_now_s() + period; go_on(L, false, t1);) {
            sample(L, "off");
            add_rate(L, 0);
            sleep_s(fmin(L->window_s, t1 - bench_now_s()));
        }
        phase_end(L);
    }
    return phase_median(L, "on", 0);
}

static cJSON *new_series(load *L, cJSON *parent, const char *name) {
    L->s = cJSON_AddObjectToObject(parent, name);
    cJSON_AddNumberToObject(L->s, "n", (double)L->n);
    cJSON_AddNumberToObject(L->s, "window_s", L->window_s);
    for (int k = 0; k < N_KEYS; k++) L->arr[k] = cJSON_AddArrayToObject(L->s, check_series_keys[k]);
    L->t0 = bench_now_s();
    L->last_t = -1;
    L->nvml_said = false;
    L->power_instant = L->power_average = false;
    memset(L->sums, 0, sizeof L->sums);
    L->cur = -1;
    return L->s;
}

static void add_or_null(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static void end_series(load *L, cJSON *medians) {
    phase_end(L);   // a phase an error cut short
    cJSON_AddStringToObject(L->s, "power_source", L->power_instant && L->power_average ? "mixed"
                                                  : L->power_instant                 ? "instant"
                                                  : L->power_average                 ? "average"
                                                                                     : "none");
    cJSON *ph = cJSON_AddObjectToObject(L->s, "phases");
    for (int p = 0; p < 5; p++) {
        const phase_sum *u = &L->sums[p];
        if (!u->ran) continue;
        cJSON *o = cJSON_AddObjectToObject(ph, check_series_phases[p]);
        cJSON_AddNumberToObject(o, "seconds", u->seconds);
        add_or_null(o, "energy_j", u->energy_j);
        add_or_null(o, "mean_power_w", u->seconds > 0 ? u->energy_j / u->seconds : NAN);
        cJSON *v = cJSON_AddObjectToObject(o, "violation_s");
        for (int k = 0; k < TDM_VIOLATION_N; k++) add_or_null(v, tdm_violation_policy_name(k), u->violation_s[k]);
    }
    // a window the load's error cut short keeps its sample, without a rate: one length
    while (cJSON_GetArraySize(L->arr[K_TFLOPS]) < cJSON_GetArraySize(L->arr[K_T])) add_rate(L, NAN);
    if (!cJSON_GetObjectItemCaseSensitive(L->s, "nvml")) cJSON_AddStringToObject(L->s, "nvml", "not read");
    cJSON_AddItemToObject(L->s, "median_tflops", medians);
    if (L->error) cJSON_AddStringToObject(L->s, "error", L->error);
}

static void add_median(cJSON *m, const char *phase, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(m, phase, v);
    else cJSON_AddNullToObject(m, phase);
}

// The phases' seconds of a level: level 3: stress and power, half each; level 4: 35 %, 35 % and
// the pulses 30 %.
static void phase_seconds(int level, double duration_s, double *st, double *pw, double *pu) {
    double total = isfinite(duration_s) && duration_s > 0 ? duration_s : level == 3 ? 780 : 3300;
    *st = *pw = level == 3 ? total / 2 : total * 0.35;
    *pu = level == 3 ? 0 : total * 0.30;
}

// One GPU's loads, into a new "series" object.
static cJSON *run_one(int index, bool emulated, int level, double duration_s) {
    double st, pw, pu;
    phase_seconds(level, duration_s, &st, &pw, &pu);
    load L = {.d = {TDM_DEVICE_CUDA, index}, .n = emulated ? 64 : 8192};
    L.flop = 2.0 * (double)L.n * (double)L.n * (double)L.n;
    L.window_s = emulated ? fmin(0.5, fmax(0.05, st / 4)) : 0.5;
    int64_t shape[2] = {L.n, L.n};
    L.a = tdm_tensor_randn(2, shape, TDM_DTYPE_BF16, L.d, 41, 0);
    L.b = tdm_tensor_randn(2, shape, TDM_DTYPE_BF16, L.d, 42, 0);
    L.e0 = tdm_event_new(L.d);
    L.e1 = tdm_event_new(L.d);
    if (!L.a || !L.b || !L.e0 || !L.e1) {
        snprintf(L.msg, sizeof L.msg, "%s", tdm_last_error());
        L.error = L.msg;
    }
    cJSON *series = cJSON_CreateObject();
    new_series(&L, series, "sustained.load");
    cJSON *med = cJSON_CreateObject();
    int k = 1;
    double r0 = L.error ? NAN : calibrate(&L, &k);
    double target = SUSTAINED_TARGET * r0;
    if (isfinite(target)) cJSON_AddNumberToObject(L.s, "target_tflops", target);
    else cJSON_AddNullToObject(L.s, "target_tflops");
    add_median(med, "calibrate", r0);
    add_median(med, "stress", L.error ? NAN : stress(&L, st, target));
    add_median(med, "power", L.error ? NAN : full_speed(&L, "power", pw, &k));
    end_series(&L, med);
    if (pu > 0 && !check_interrupted()) {
        const char *first_error = L.error;
        new_series(&L, series, "pulsed.load");
        med = cJSON_CreateObject();
        add_median(med, "on", first_error ? NAN : pulsed(&L, pu, &k));
        end_series(&L, med);
    }
    tdm_event_free(L.e0);
    tdm_event_free(L.e1);
    tdm_tensor_free(L.a);
    tdm_tensor_free(L.b);
    tdm_tensor_free(L.c);
    tdm_error_clear();
    return series;
}

typedef struct {
    int index, level;
    bool emulated;
    double duration_s;
    cJSON *series;
} gpu_load;

static void *run_thread(void *arg) {
    gpu_load *g = arg;
    g->series = run_one(g->index, g->emulated, g->level, g->duration_s);
    return NULL;
}

void check_run_sustained(cJSON *gpus, const int *index, int n, int level, double duration_s) {
    if (level < 3 || n < 1) return;
    double st, pw, pu;
    phase_seconds(level, duration_s, &st, &pw, &pu);
    char who[48];
    if (n == 1) snprintf(who, sizeof who, "cuda:%d", index[0]);
    else snprintf(who, sizeof who, "%d GPUs at once", n);
    fprintf(stderr, "bench check: %s: sustained load, %.0f s targeted stress and %.0f s targeted power%s ...\n",
            who, st, pw, pu > 0 ? ", then the pulsed load" : "");
    gpu_load *g = calloc((size_t)n, sizeof *g);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    bool *started = calloc((size_t)n, sizeof *started);
    if (!g || !th || !started) {
        free(g);
        free(th);
        free(started);
        return;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(gpus, i);
        g[i] = (gpu_load){index[i], level, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "emulated")), duration_s, NULL};
        started[i] = pthread_create(&th[i], NULL, run_thread, &g[i]) == 0;
        if (!started[i]) run_thread(&g[i]);   // no thread: this GPU's load runs alone, here
    }
    for (int i = 0; i < n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        cJSON *e = cJSON_GetArrayItem(gpus, i);
        if (e && g[i].series) cJSON_AddItemToObject(e, "series", g[i].series);
        else cJSON_Delete(g[i].series);
    }
    free(g);
    free(th);
    free(started);
}


// ---- the series as a results directory's tidy CSV, for the plots ----------------------------------

char *check_series_csv(const cJSON *gpus, const char *series, bool emulated) {
    static const struct {
        int key;
        const char *metric, *unit;
    } cols[] = {{K_SM, "sm_clock", "MHz"},    {K_MEM, "memory_clock", "MHz"}, {K_POWER, "power", "W"},
                {K_TEMP, "temperature", "C"}, {K_TFLOPS, "throughput", "TFLOP/s"}};
    const char *suite = !strcmp(series, "sustained.load") ? "sustained" : "pulsed";
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    bool any = false;
    if (!out) return NULL;
    len = (size_t)snprintf(out, cap, "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions%s\n",
                           emulated ? ",emulated" : "");
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
        const cJSON *g;
        cJSON_ArrayForEach(g, gpus) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g, "series"), series);
            const char *dev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device"));
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "t_s");
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, check_series_keys[cols[c].key]);
            if (!dev || strchr(dev, ',') || strchr(dev, '"') || !cJSON_IsArray(t) || !cJSON_IsArray(v)) continue;
            // the two arrays walked side by side (cJSON_GetArrayItem walks from the start: by index
            // a 200k-sample series would take 2e10 steps)
            for (const cJSON *ti = t->child, *vi = v->child; ti && vi; ti = ti->next, vi = vi->next) {
                if (!cJSON_IsNumber(ti) || !cJSON_IsNumber(vi)) continue;
                double x = vi->valuedouble;
                while (len + 400 > cap) {
                    char *b = realloc(out, cap *= 2);
                    if (!b) {
                        free(out);
                        return NULL;
                    }
                    out = b;
                }
                len += (size_t)snprintf(out + len, cap - len, "%s,%s,t_s:%.3f,%.3f,%s,%s,%.9g,%.9g,0,0,%.9g,%.9g,1%s\n",
                                        suite, dev, ti->valuedouble, ti->valuedouble, cols[c].metric,
                                        cols[c].unit, x, x, x, x, emulated ? ",true" : "");
                any = true;
            }
        }
    }
    if (!any) {
        free(out);
        return NULL;
    }
    return out;
}

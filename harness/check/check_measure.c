/* check_measure.c — what `bench check` measures on a GPU (docs/CHECK.md), through the public API
 * only: numerics and training by running this same program's `replay`, `conform` and `train` as
 * child processes (their code paths, isolated: a crash or a hang is a failed check, bounded by a
 * time limit); device-to-device copy bandwidth, GEMM throughput per precision, pinned host<->device
 * bandwidth (the PCIe link read while copying), all-reduce bus bandwidth and peer copies, timed by
 * CUDA events (the all-reduce, which spans every device, by the host clock); NVML's readings
 * through tdm_device_props_get, taken while a GEMM load runs. Every figure is a median of repetitions after warm-up, and each output is
 * verified after it was timed: a fast wrong answer is a failed measurement, never a figure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/bench.h"
#include "check.h"
#include "check_memtest.h"
#include "core/files_impl.h"   // tdm_file_open_read
#include "harness/stats.h"
#include "tandem/tandem.h"

// ---- child runs: this program's own commands ----------------------------------------------------
// A child runs in a process group of its own, which its time limit and an interruption kill whole,
// and it dies with this process (PR_SET_PDEATHSIG, set after the fork; getppid() then closes the
// race with a parent that died first): a killed `bench check` leaves no run behind, holding a GPU
// with no time limit. SIGINT, SIGTERM and SIGHUP (those not ignored when the check started) kill
// the running child at once and are remembered: nothing more starts, the check stops at its next
// step, and cmd_check removes its temporary folder before it ends by the same signal. A second
// such signal ends the check at once (the child still dies with it).

static volatile sig_atomic_t g_signal;       // the first signal received, or 0
static volatile sig_atomic_t g_child_pgid;   // the running child's process group, or 0

static void on_signal(int sig) {
    if (!g_signal) g_signal = sig;
    pid_t c = (pid_t)g_child_pgid;
    if (c > 0) {
        kill(-c, SIGKILL);
        kill(c, SIGKILL);   // before the child made its group
    }
}

void check_signals_install(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;   // a second one: the default action
        sigaction(sigs[i], &sa, NULL);
    }
}

int check_interrupted(void) { return (int)g_signal; }

void check_signals_reraise(void) {
    int sig = (int)g_signal;
    if (!sig) return;
    fflush(stdout);
    fflush(stderr);
    signal(sig, SIG_DFL);
    raise(sig);
}

// Runs /proc/self/exe ARGV with stdout and stderr into LOG (NULL: stdout to /dev/null, stderr
// this process's), at most timeout_s seconds. Returns its exit status, 124 when it ran out of
// time (killed), 128 + signal when a signal ended it (or the check was interrupted: then nothing
// starts), -1 when it could not start. LAST (when N > 0) gets the log's last non-empty line.
int check_run_child(char *const argv[], const char *log, double timeout_s, char *last, size_t n) {
    if (n) last[0] = '\0';
    if (g_signal) return 128 + (int)g_signal;
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setpgid(0, 0);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(125);
        int in = open("/dev/null", O_RDONLY);   // never the terminal: the group is not its own
        if (in >= 0 && in != 0) {
            dup2(in, 0);
            close(in);
        }
        // A log is a regular file of the log folder's own: never a planted link's target, a FIFO
        // or a device (O_NOFOLLOW, O_NONBLOCK, then checked before it is truncated).
        int fd = log ? open(log, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644)
                     : open("/dev/null", O_WRONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || (log && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
                               ftruncate(fd, 0) != 0 ||
                               fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)))
            _exit(126);
        dup2(fd, 1);
        if (log) dup2(fd, 2);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    setpgid(pid, pid);   // as the child does: whichever runs first
    g_child_pgid = pid;
    int status = 0, rc;
    double t0 = bench_now_s();
    bool killed = false, timed_out = false;
    while ((rc = (int)waitpid(pid, &status, WNOHANG)) == 0 || (rc < 0 && errno == EINTR)) {
        if (!killed && (g_signal || bench_now_s() - t0 > timeout_s)) {
            timed_out = !g_signal;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            killed = true;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    g_child_pgid = 0;
    if (log && n) {
        int lfd = tdm_file_open_read(log, NULL);   // a FIFO put there cannot block this read
        FILE *f = lfd >= 0 ? fdopen(lfd, "r") : NULL;
        if (!f && lfd >= 0) close(lfd);
        if (f) {
            char line[1024];
            while (fgets(line, sizeof line, f)) {
                size_t l = strlen(line);
                while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = '\0';
                if (l) snprintf(last, n, "%s", line);
            }
            fclose(f);
        }
    }
    if (rc < 0) return -1;
    if (timed_out) return 124;
    if (g_signal) return 128 + (int)g_signal;
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

// A numerics entry from a child's exit: 0 pass, 1 fail, else an error (bad input, a crash, the
// time limit).
static void add_run(cJSON *numerics, const char *name, int rc, const char *measured,
                    const char *expected, const char *last, const char *log, double seconds) {
    cJSON *e = cJSON_AddObjectToObject(numerics, name);
    cJSON_AddStringToObject(e, "result", rc == 0 ? "pass" : rc == 1 ? "fail" : "error");
    cJSON_AddStringToObject(e, "measured", measured);
    cJSON_AddStringToObject(e, "expected", expected);
    char d[1400];
    if (rc == 124) snprintf(d, sizeof d, "ran out of its time limit; log %s", log);
    else if (rc > 128) snprintf(d, sizeof d, "ended by signal %d; log %s", rc - 128, log);
    else if (rc < 0) snprintf(d, sizeof d, "could not start: %s", strerror(errno));
    else snprintf(d, sizeof d, "%s%s%s", last, rc ? "; log " : "", rc ? log : "");
    cJSON_AddStringToObject(e, "detail", d);
    cJSON_AddNumberToObject(e, "seconds", seconds);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The golden case files: all, or (quick) the first of each op. NULL-terminated, malloc'd.
static char **golden_cases(bool quick, int *n) {
    *n = 0;
    char dir[4096];
    if (!check_find_source_path("suites/golden/cases", dir, sizeof dir)) return NULL;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 13 || strcmp(e->d_name + l - 12, ".safetensors")) continue;
        if (*n + 2 > cap) {
            char **b = realloc(v, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *v);
            if (!b) break;
            v = b;
        }
        size_t pl = strlen(dir) + l + 2;
        if (!(v[*n] = malloc(pl))) break;
        snprintf(v[(*n)++], pl, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!v) return NULL;
    qsort(v, (size_t)*n, sizeof *v, cmp_str);
    if (quick) {   // one case per op: the op is the file name up to its first '-'
        int k = 0;
        for (int i = 0; i < *n; i++) {
            const char *a = strrchr(v[i], '/') + 1;
            const char *b = k ? strrchr(v[k - 1], '/') + 1 : NULL;
            size_t la = strcspn(a, "-");
            if (b && strcspn(b, "-") == la && !strncmp(a, b, la)) {
                free(v[i]);
                continue;
            }
            v[k++] = v[i];
        }
        *n = k;
    }
    v[*n] = NULL;
    return v;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

// `bench replay --device DEV --quiet CASES...` as the check NAME.
static void replay_check(cJSON *numerics, const char *name, const char *dev, const check_run_opts *o) {
    int n = 0;
    char **cases = golden_cases(o->quick, &n);
    if (!cases || !n) {
        cJSON *e = cJSON_AddObjectToObject(numerics, name);
        cJSON_AddStringToObject(e, "result", "error");
        cJSON_AddStringToObject(e, "detail", "the golden cases (suites/golden/cases) were not found: set TANDEM_DOCS_ROOT to the source tree");
        free_list(cases, n);
        return;
    }
    char **argv = calloc((size_t)n + 8, sizeof *argv);
    char log[4200], last[600], measured[96];
    snprintf(log, sizeof log, "%s/%s.%s.log", o->logdir, name, dev);
    int rc = -1;
    double t0 = bench_now_s();
    if (argv) {
        int a = 0;
        argv[a++] = "bench";
        argv[a++] = "replay";
        argv[a++] = "--device";
        argv[a++] = (char *)dev;
        argv[a++] = "--quiet";
        for (int i = 0; i < n; i++) argv[a++] = cases[i];
        rc = check_run_child(argv, log, o->timeout_s, last, sizeof last);
    }
    snprintf(measured, sizeof measured, "%d golden case%s%s", n, n == 1 ? "" : "s", o->quick ? " (one per op)" : "");
    add_run(numerics, name, rc, measured, "every element within its bound", last, log,
            bench_now_s() - t0);
    free(argv);
    free_list(cases, n);
}

cJSON *check_run_host(const check_run_opts *o) {
    cJSON *h = cJSON_CreateObject();
    replay_check(cJSON_AddObjectToObject(h, "numerics"), "reference.golden", "cpu", o);
    return h;
}

// ---- timing helpers -------------------------------------------------------------------------------

typedef struct {
    double v[32];
    int n;
} samples;

static cJSON *figure(cJSON *figs, const char *name, const char *unit, const samples *s,
                     const char *error, const char *note) {
    cJSON *f = cJSON_AddObjectToObject(figs, name);
    if (error || s->n == 0) {
        cJSON_AddNullToObject(f, "value");
        cJSON_AddStringToObject(f, "error", error ? error : "no sample");
    } else {
        double v[32];
        memcpy(v, s->v, sizeof v);
        cJSON_AddNumberToObject(f, "value", bench_median(v, s->n));
        cJSON_AddItemToObject(f, "samples", cJSON_CreateDoubleArray(s->v, s->n));
    }
    cJSON_AddStringToObject(f, "unit", unit);
    if (note) cJSON_AddStringToObject(f, "note", note);
    return f;
}

// Seconds between two events recorded on a device; -1 on an error.
static double event_s(tdm_event *a, tdm_event *b) {
    double ms;
    return tdm_event_elapsed_ms(a, b, &ms) == TDM_OK ? ms / 1e3 : -1;
}

static void props_health(cJSON *gpu, const tdm_device_props *p, bool under_load) {
    cJSON *h = cJSON_AddObjectToObject(gpu, "health");
#define H_INT(field)                                                   \
    if (p->field >= 0) cJSON_AddNumberToObject(h, #field, (double)p->field); \
    else cJSON_AddNullToObject(h, #field)
    H_INT(throttle_reasons);
    H_INT(temperature_c);
    H_INT(temperature_slowdown_c);
    H_INT(remapped_rows_correctable);
    H_INT(remapped_rows_uncorrectable);
    H_INT(remapped_rows_pending);
    H_INT(remapped_rows_failed);
    H_INT(retired_pages_sbe);
    H_INT(retired_pages_dbe);
    H_INT(retired_pages_pending);
    H_INT(ecc);
    H_INT(ecc_uncorrected_volatile);
    H_INT(ecc_uncorrected_aggregate);
    H_INT(clock_sm_mhz);
    H_INT(clock_sm_max_mhz);
    H_INT(clock_mem_mhz);
    H_INT(power_limit_w);
    H_INT(persistence);
#undef H_INT
    cJSON_AddStringToObject(h, "nvml", p->nvml);
    cJSON_AddBoolToObject(h, "under_load", under_load);
}

// ---- device-to-device copy: 2 x bytes / time (each byte read and written) ----------------------------

static void measure_d2d(cJSON *figs, tdm_device d, bool quick, bool emu) {
    int64_t bytes = emu ? (1 << 20) : quick ? (256LL << 20) : (1LL << 30);
    int64_t n = bytes / 4;
    int reps = emu ? 3 : quick ? 9 : 10, per = emu ? 1 : 4;
    samples s = {.n = 0};
    const char *error = NULL;
    char msg[300];
    tdm_tensor *a = tdm_tensor_rand(1, &n, TDM_DTYPE_F32, d, 11, 0), *b = tdm_tensor_zeros(1, &n, TDM_DTYPE_F32, d);
    tdm_event *e0 = tdm_event_new(d), *e1 = tdm_event_new(d);
    if (!a || !b || !e0 || !e1) error = tdm_last_error();
    for (int r = -2; !error && r < reps; r++) {   // two warm-ups
        bool ok = tdm_event_record(e0, NULL) == TDM_OK;
        for (int k = 0; ok && k < per; k++) ok = tdm_tensor_copy_async(b, a, NULL) == TDM_OK;
        ok = ok && tdm_event_record(e1, NULL) == TDM_OK;
        double t = ok ? event_s(e0, e1) : -1;
        if (t <= 0) error = tdm_last_error();
        else if (r >= 0) s.v[s.n++] = 2.0 * (double)bytes * per / t / 1e9;
    }
    if (!error) {   // the copy holds what was copied
        float *ha = malloc((size_t)bytes), *hb = malloc((size_t)bytes);
        if (!ha || !hb || tdm_tensor_to_host(a, ha, (size_t)bytes) != TDM_OK ||
            tdm_tensor_to_host(b, hb, (size_t)bytes) != TDM_OK)
            error = ha && hb ? tdm_last_error() : "out of host memory to verify the copy";
        else if (memcmp(ha, hb, (size_t)bytes)) error = "the copy differs from its source";
        free(ha);
        free(hb);
    }
    if (error) snprintf(msg, sizeof msg, "%s", error);
    char note[96];
    snprintf(note, sizeof note, "%lld MiB copied %d x per sample, 2 x bytes / time", (long long)(bytes >> 20), per);
    figure(figs, "memory.d2d", "GB/s", &s, error ? msg : NULL, note);
    tdm_event_free(e0);
    tdm_event_free(e1);
    tdm_tensor_free(a);
    tdm_tensor_free(b);
}

// ---- GEMM: 2 n^3 FLOP per product, verified at sampled elements against double ------------------------

typedef struct {
    const char *name;   // gemm.tf32
    tdm_dtype dt;
    bool tf32;
    double u_in, u_acc, u_out;   // operand rounding (TF32), accumulation, output rounding
} gemm_prec;

static void measure_gemm(cJSON *gpu, cJSON *figs, tdm_device d, const gemm_prec *p, bool quick, bool emu,
                         bool read_health) {
    int64_t n = emu ? 64 : quick ? 4096 : 8192;
    int reps = emu ? 2 : quick ? 9 : 10, per = emu ? 1 : (n >= 8192 ? 2 : 8);
    samples s = {.n = 0};
    const char *error = NULL;
    char msg[400];
    bool tf32_was = tdm_tf32_allowed(TDM_TF32_MATMUL);
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, p->tf32);
    int64_t shape[2] = {n, n};
    tdm_tensor *a = tdm_tensor_randn(2, shape, p->dt, d, 21, 0), *b = tdm_tensor_randn(2, shape, p->dt, d, 22, 0);
    tdm_tensor *c = NULL;
    tdm_event *e0 = tdm_event_new(d), *e1 = tdm_event_new(d);
    if (!a || !b || !e0 || !e1) error = tdm_last_error();
    for (int r = -2; !error && r < reps; r++) {
        bool ok = tdm_event_record(e0, NULL) == TDM_OK;
        for (int k = 0; ok && k < per; k++) {
            tdm_tensor_free(c);
            ok = (c = tdm_matmul(a, b)) != NULL;
        }
        ok = ok && tdm_event_record(e1, NULL) == TDM_OK;
        if (ok && read_health && r == reps - 1) {   // NVML while the last repetition runs
            tdm_device_props pr;
            bool done = true;
            if (tdm_device_props_get(d, &pr) == TDM_OK) {
                (void)tdm_event_query(e1, &done);
                props_health(gpu, &pr, !done);
            }
            tdm_error_clear();
        }
        double t = ok ? event_s(e0, e1) : -1;
        if (t <= 0) error = tdm_last_error();
        else if (r >= 0) s.v[s.n++] = 2.0 * (double)n * n * n * per / t / 1e12;
    }
    if (!error) {   // 16 sampled elements of the last product against double
        size_t nn = (size_t)(n * n);
        double *ha = malloc(nn * sizeof *ha), *hb = malloc(nn * sizeof *hb), *hc = malloc(nn * sizeof *hc);
        if (!ha || !hb || !hc || tdm_tensor_to_host_f64(a, ha) != TDM_OK ||
            tdm_tensor_to_host_f64(b, hb) != TDM_OK || tdm_tensor_to_host_f64(c, hc) != TDM_OK)
            error = ha && hb && hc ? tdm_last_error() : "out of host memory to verify the product";
        for (int k = 0; !error && k < 16; k++) {
            int64_t i = (k * 7919 + 13) % n, j = (k * 104729 + 5) % n;
            double e = 0, m = 0;
            for (int64_t q = 0; q < n; q++) {
                e += ha[i * n + q] * hb[q * n + j];
                m += fabs(ha[i * n + q] * hb[q * n + j]);
            }
            double bound = (2 * p->u_in + (double)n * p->u_acc) * m * 2 + p->u_out * fabs(e) + 1e-30;
            double got = hc[i * n + j];
            if (!(fabs(got - e) <= bound)) {
                snprintf(msg, sizeof msg, "the product is wrong at [%lld, %lld]: %.9g, expected %.9g (bound %.3g)",
                         (long long)i, (long long)j, got, e, bound);
                error = msg;
            }
        }
        free(ha);
        free(hb);
        free(hc);
    }
    if (error && error != msg) snprintf(msg, sizeof msg, "%s", error);
    char note[96];
    snprintf(note, sizeof note, "%lld^3 products, %d per sample, 2 n^3 FLOP", (long long)n, per);
    figure(figs, p->name, "TFLOP/s", &s, error ? msg : NULL, note);
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, tf32_was);
    tdm_event_free(e0);
    tdm_event_free(e1);
    tdm_tensor_free(a);
    tdm_tensor_free(b);
    tdm_tensor_free(c);
}

// gpu.link: the PCIe link's generation and width, current and maximum, from p (NULL: none read;
// a field NVML does not give is null), and whether it was read while copies ran.
static void add_link(cJSON *gpu, const tdm_device_props *p, bool under_load) {
    cJSON *l = cJSON_AddObjectToObject(gpu, "link");
    const struct {
        const char *name;
        int value;
    } f[4] = {{"pcie_gen", p ? p->pcie_gen : 0},
              {"pcie_width", p ? p->pcie_width : 0},
              {"pcie_gen_max", p ? p->pcie_gen_max : 0},
              {"pcie_width_max", p ? p->pcie_width_max : 0}};
    for (int i = 0; i < 4; i++)
        if (f[i].value > 0) cJSON_AddNumberToObject(l, f[i].name, f[i].value);
        else cJSON_AddNullToObject(l, f[i].name);
    cJSON_AddBoolToObject(l, "under_load", under_load);
}

// ---- pinned host <-> device, and the link read while copying --------------------------------------------

static void measure_pcie(cJSON *gpu, cJSON *figs, tdm_device d, bool quick, bool emu) {
    int64_t bytes = emu ? (1 << 20) : quick ? (64LL << 20) : (256LL << 20);
    int64_t n = bytes / 4;
    int reps = emu ? 3 : quick ? 9 : 10, per = emu ? 1 : 4;
    tdm_tensor *h = tdm_tensor_empty_host(1, &n, TDM_DTYPE_F32, TDM_HOST_PINNED, d);
    tdm_tensor *h2 = tdm_tensor_empty_host(1, &n, TDM_DTYPE_F32, TDM_HOST_PINNED, d);
    tdm_tensor *g = tdm_tensor_zeros(1, &n, TDM_DTYPE_F32, d);
    tdm_event *e0 = tdm_event_new(d), *e1 = tdm_event_new(d);
    const char *err[2] = {NULL, NULL};
    char msg[2][300];
    samples s[2] = {{.n = 0}, {.n = 0}};
    tdm_device_props link;
    bool have_link = false, under_load = false;
    if (!h || !h2 || !g || !e0 || !e1) err[0] = err[1] = tdm_last_error();
    else {
        uint32_t *p = tdm_tensor_data(h);
        for (int64_t i = 0; i < n; i++) p[i] = (uint32_t)(i * 2654435761u) | 1u;   // never zeros
        memset(tdm_tensor_data(h2), 0, (size_t)bytes);
    }
    for (int dir = 0; dir < 2; dir++)
        for (int r = -2; !err[dir] && r < reps; r++) {
            bool ok = tdm_event_record(e0, NULL) == TDM_OK;
            for (int k = 0; ok && k < per; k++)
                ok = tdm_tensor_copy_async(dir ? h2 : g, dir ? g : h, NULL) == TDM_OK;
            ok = ok && tdm_event_record(e1, NULL) == TDM_OK;
            if (ok && dir == 0 && r == 0) {   // the link as it is while it carries the copies
                have_link = tdm_device_props_get(d, &link) == TDM_OK;
                bool done = true;
                (void)tdm_event_query(e1, &done);
                under_load = !done;
                tdm_error_clear();
            }
            double t = ok ? event_s(e0, e1) : -1;
            if (t <= 0) err[dir] = tdm_last_error();
            else if (r >= 0) s[dir].v[s[dir].n++] = (double)bytes * per / t / 1e9;
        }
    if (!err[1] && memcmp(tdm_tensor_data(h), tdm_tensor_data(h2), (size_t)bytes))
        err[1] = "the data that came back differs from what went (h2d then d2h)";
    for (int k = 0; k < 2; k++)
        if (err[k]) snprintf(msg[k], sizeof msg[k], "%s", err[k]);
    char note[96];
    snprintf(note, sizeof note, "pinned, %lld MiB per copy, %d per sample", (long long)(bytes >> 20), per);
    figure(figs, "pcie.h2d", "GB/s", &s[0], err[0] ? msg[0] : NULL, note);
    figure(figs, "pcie.d2h", "GB/s", &s[1], err[1] ? msg[1] : NULL, note);
    if (!have_link && tdm_device_props_get(d, &link) == TDM_OK) have_link = true;
    tdm_error_clear();
    add_link(gpu, have_link ? &link : NULL, under_load);
    tdm_event_free(e0);
    tdm_event_free(e1);
    tdm_tensor_free(h);
    tdm_tensor_free(h2);
    tdm_tensor_free(g);
}

// ---- numerics and training on the GPU -----------------------------------------------------------------

static void conform_check(cJSON *numerics, const char *dev, const check_run_opts *o) {
    char log[4200], fails[4200], last[600], seed[32], measured[128];
    snprintf(log, sizeof log, "%s/numerics.conform.%s.log", o->logdir, dev);
    snprintf(fails, sizeof fails, "%s/conform-failures-%s", o->logdir, dev);
    snprintf(seed, sizeof seed, "%u", o->seed);
    const char *cases = o->quick ? "1" : "3";
    char *argv[] = {"bench", "conform", "--device", (char *)dev, "--cases", (char *)cases, "--seed", seed,
                    "--dtypes", "f32,f16,bf16,f64", "--quiet", "--failures", fails, NULL};
    double t0 = bench_now_s();
    int rc = check_run_child(argv, log, o->timeout_s, last, sizeof last);
    snprintf(measured, sizeof measured, "%s random case%s per op and dtype, seed %u", cases,
             o->quick ? "" : "s", o->seed);
    add_run(numerics, "numerics.conform", rc, measured, "every element within its bound, guards intact", last, log,
            bench_now_s() - t0);
}

typedef struct {
    const char *file, *amp, *label;   // golden file (no extension), --amp (NULL: the file's), f32/tf32/...
    bool tf32;
} train_run;

static void train_checks(cJSON *numerics, const char *dev, const check_run_opts *o) {
    static const train_run quick[] = {{"mlp-adam-off", NULL, "f32", false},  {"mlp-adam-off", NULL, "tf32", true},
                                      {"mlp-adam-off", "fp16", "fp16", false}, {"mlp-adam-bf16", NULL, "bf16", false},
                                      {"cnn-adam-off", NULL, "f32", false},  {"cnn-adam-bf16", NULL, "bf16", false}};
    static const char *opts_[] = {"sgd", "adam", "adamw"};
    train_run full[36];
    int nf = 0;
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 3; k++) {
            static char names[12][32];
            char *off = names[(m * 3 + k) * 2], *bf = names[(m * 3 + k) * 2 + 1];
            snprintf(off, 32, "%s-%s-off", m ? "cnn" : "mlp", opts_[k]);
            snprintf(bf, 32, "%s-%s-bf16", m ? "cnn" : "mlp", opts_[k]);
            full[nf++] = (train_run){off, NULL, "f32", false};
            full[nf++] = (train_run){off, NULL, "tf32", true};
            full[nf++] = (train_run){off, "fp16", "fp16", false};
            full[nf++] = (train_run){bf, NULL, "bf16", false};
        }
    const train_run *runs = o->quick ? quick : full;
    int nr = o->quick ? (int)(sizeof quick / sizeof *quick) : nf;
    for (int i = 0; i < nr; i++) {
        char rel[128], golden[4096], name[128], dump[4400], log[4400], last[600], store[2048], detail[600];
        snprintf(rel, sizeof rel, "suites/golden/train/%s.safetensors", runs[i].file);
        char base[64];
        snprintf(base, sizeof base, "%s", runs[i].file);
        char *cut = strrchr(base, '-');   // mlp-adam-off -> mlp-adam
        if (cut) *cut = '\0';
        snprintf(name, sizeof name, "train.%s.%s", base, runs[i].label);
        if (!check_find_source_path(rel, golden, sizeof golden)) {
            cJSON *e = cJSON_AddObjectToObject(numerics, name);
            cJSON_AddStringToObject(e, "result", "error");
            cJSON_AddStringToObject(e, "detail", "the golden trajectory was not found (suites/golden/train)");
            continue;
        }
        snprintf(dump, sizeof dump, "%s/%s.%s.safetensors", o->logdir, name, dev);
        snprintf(log, sizeof log, "%s/%s.%s.log", o->logdir, name, dev);
        char *argv[40];
        double t0 = bench_now_s();
        int argc = check_train_argv(golden, runs[i].amp, runs[i].tf32, dev, dump, store, sizeof store, argv, 40);
        int rc = argc < 0 ? 2 : check_run_child(argv, log, o->timeout_s, last, sizeof last);
        const char *amp = runs[i].amp ? runs[i].amp : strstr(runs[i].file, "bf16") ? "bf16" : "off";
        if (rc == 0) {
            int j = check_train_judge(golden, dump, amp, runs[i].tf32, detail, sizeof detail);
            rc = j == 1 ? 0 : j == 0 ? 1 : 2;
            snprintf(last, sizeof last, "%s", detail);
        }
        add_run(numerics, name, rc, "trajectory vs float64", "within 4x PyTorch's own deviation + N u", last, log,
                bench_now_s() - t0);
    }
    // A small GPT-2 (suites/golden/gpt, check_gpt.c's rule): step 0's logits and gradients, then
    // nanoGPT's AdamW steps with clipping and the schedule; quick: f32 and bf16.
    static const char *const gpt_precs[] = {"f32", "bf16", "tf32", "fp16"};
    for (int i = 0; i < (o->quick ? 2 : 4); i++) {
        char golden[4096], name[64], dump[4400], log[4400], last[600], store[4096], detail[600];
        snprintf(name, sizeof name, "train.gpt.%s", gpt_precs[i]);
        const char *rel = "suites/golden/gpt/gpt-l2h2d32t16v67.safetensors";
        if (!check_find_source_path(rel, golden, sizeof golden)) {
            cJSON *e = cJSON_AddObjectToObject(numerics, name);
            cJSON_AddStringToObject(e, "result", "error");
            cJSON_AddStringToObject(e, "detail", "the golden GPT run was not found (suites/golden/gpt)");
            continue;
        }
        snprintf(dump, sizeof dump, "%s/%s.%s.safetensors", o->logdir, name, dev);
        snprintf(log, sizeof log, "%s/%s.%s.log", o->logdir, name, dev);
        char *argv[64];
        double t0 = bench_now_s();
        int argc = check_gpt_argv(golden, gpt_precs[i], dev, dump, store, sizeof store, argv, 64);
        int rc = argc < 0 ? 2 : check_run_child(argv, log, o->timeout_s, last, sizeof last);
        if (rc == 0) {
            int j = check_gpt_judge(golden, dump, gpt_precs[i], false, detail, sizeof detail);
            rc = j == 1 ? 0 : j == 0 ? 1 : 2;
            snprintf(last, sizeof last, "%s", detail);
        }
        add_run(numerics, name, rc, "trajectory vs float64", "within 4x PyTorch's own deviation + N u",
                last, log, bench_now_s() - t0);
    }
}

// ---- one GPU ----------------------------------------------------------------------------------------------

cJSON *check_run_gpu(int index, const check_run_opts *o) {
    tdm_device d = {TDM_DEVICE_CUDA, index};
    char dev[32];
    tdm_device_str(d, dev, sizeof dev);
    cJSON *g = cJSON_CreateObject();
    cJSON_AddNumberToObject(g, "index", index);
    cJSON_AddStringToObject(g, "device", dev);
    tdm_device_props p;
    bool props = tdm_device_props_get(d, &p) == TDM_OK;
    bool emu = props && p.emulated;
    if (props) cJSON_AddStringToObject(g, "name", p.name);
    else cJSON_AddNullToObject(g, "name");
    if (props) cJSON_AddStringToObject(g, "pci_bus_id", p.pci_bus_id);
    cJSON_AddBoolToObject(g, "emulated", emu);
    tdm_error_clear();

    if (props) {   // the driver, the runtime and the libraries this build loads
        cJSON *dr = cJSON_AddObjectToObject(g, "driver");
        cJSON_AddStringToObject(dr, "driver_version", p.driver_version);
        if (p.cuda_driver_version > 0) cJSON_AddNumberToObject(dr, "cuda_driver_version", p.cuda_driver_version);
        else cJSON_AddNullToObject(dr, "cuda_driver_version");
        if (p.cuda_runtime_version > 0) cJSON_AddNumberToObject(dr, "cuda_runtime_version", p.cuda_runtime_version);
        else cJSON_AddNullToObject(dr, "cuda_runtime_version");
        cJSON_AddStringToObject(dr, "cublas_version", p.cublas_version);
        cJSON_AddStringToObject(dr, "cudnn_version", p.cudnn_version);
        cJSON_AddStringToObject(dr, "nccl_version", p.nccl_version);
    }
    if (o->level <= 1) {   // the fast checks only: NVML and the link at idle, no load
        if (props) props_health(g, &p, false);
        add_link(g, props ? &p : NULL, false);
        tdm_error_clear();
        return g;
    }
    cJSON *numerics = cJSON_AddObjectToObject(g, "numerics");
    replay_check(numerics, "numerics.golden", dev, o);
    conform_check(numerics, dev, o);
    train_checks(numerics, dev, o);
    if (check_interrupted()) return g;   // cmd_check judges nothing after an interruption

    cJSON *figs = cJSON_AddObjectToObject(g, "figures");
    measure_d2d(figs, d, o->quick, emu);
    static const gemm_prec precs[] = {
        {"gemm.tf32", TDM_DTYPE_F32, true, 0x1p-11, 0x1p-24, 0x1p-24},
        {"gemm.f16", TDM_DTYPE_F16, false, 0, 0x1p-24, 0x1p-11},
        {"gemm.bf16", TDM_DTYPE_BF16, false, 0, 0x1p-24, 0x1p-8},
        {"gemm.f64", TDM_DTYPE_F64, false, 0, 0x1p-53, 0x1p-53}};
    for (size_t k = 0; k < sizeof precs / sizeof *precs && !check_interrupted(); k++)
        measure_gemm(g, figs, d, &precs[k], o->quick, emu, k == 2);   // health during the bf16 load
    if (!check_interrupted()) measure_pcie(g, figs, d, o->quick, emu);
    if (!cJSON_GetObjectItemCaseSensitive(g, "health")) {   // the load failed: read at idle
        if (props) props_health(g, &p, false);
    }
    (void)tdm_memory_empty_cache(d);
    tdm_error_clear();
    if (check_level_runs(o->level, CHECK_MEMTEST_NAME) && !check_interrupted()) {
        // level 4: the memory test over the free memory, the caches emptied above (check_memtest.c)
        fprintf(stderr, "bench check: %s: the memory test ...\n", dev);
        cJSON_AddItemToObject(numerics, CHECK_MEMTEST_NAME, check_memtest_run(index, NULL));
        tdm_error_clear();
    }
    return g;
}

// ---- the run's error counters: read at its start and its end, Xid events in between -------------

static cJSON *counter_sample(const tdm_device_props *p) {
    cJSON *c = cJSON_CreateObject();
#define C_INT(key, v)                                          \
    if ((v) >= 0) cJSON_AddNumberToObject(c, key, (double)(v)); \
    else cJSON_AddNullToObject(c, key)
    C_INT("pcie_replay", p->pcie_replay_count);
    C_INT("nvlink_links_active", p->nvlink_links_active);
    C_INT("nvlink_crc", p->nvlink_crc_errors);
    C_INT("nvlink_replay", p->nvlink_replay_errors);
    C_INT("nvlink_recovery", p->nvlink_recovery_errors);
    C_INT("ecc_corrected_volatile", p->ecc_corrected_volatile);
    C_INT("ecc_uncorrected_volatile", p->ecc_uncorrected_volatile);
#undef C_INT
    return c;
}

cJSON *check_counters_begin(int index) {
    tdm_device d = {TDM_DEVICE_CUDA, index};
    cJSON *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(b, "t0", bench_now_s());
    tdm_device_props p;
    if (tdm_device_props_get(d, &p) == TDM_OK) cJSON_AddItemToObject(b, "start", counter_sample(&p));
    else cJSON_AddNullToObject(b, "start");
    tdm_error_clear();
    int n = 0;
    uint64_t none[1];
    if (tdm_device_xid_events(d, none, 0, &n) != TDM_OK)   // registers the device
        cJSON_AddStringToObject(b, "xid_why", tdm_last_error());
    tdm_error_clear();
    return b;
}

void check_counters_end(cJSON *gpu, cJSON *begin, int index) {
    tdm_device d = {TDM_DEVICE_CUDA, index};
    cJSON *c = cJSON_AddObjectToObject(gpu, "counters");
    const cJSON *t0 = cJSON_GetObjectItemCaseSensitive(begin, "t0");
    cJSON_AddNumberToObject(c, "seconds", cJSON_IsNumber(t0) ? bench_now_s() - t0->valuedouble : 0);
    cJSON *start = cJSON_DetachItemFromObjectCaseSensitive(begin, "start");
    cJSON_AddItemToObject(c, "start", start ? start : cJSON_CreateNull());
    tdm_device_props p;
    if (tdm_device_props_get(d, &p) == TDM_OK) cJSON_AddItemToObject(c, "end", counter_sample(&p));
    else cJSON_AddNullToObject(c, "end");
    tdm_error_clear();
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(begin, "xid_why");
    uint64_t xids[64];
    int n = 0;
    if (cJSON_IsString(why)) {
        cJSON_AddNullToObject(c, "xid");
        cJSON_AddStringToObject(c, "xid_why", why->valuestring);
    } else if (tdm_device_xid_events(d, xids, 64, &n) != TDM_OK) {
        cJSON_AddNullToObject(c, "xid");
        cJSON_AddStringToObject(c, "xid_why", tdm_last_error());
    } else {
        cJSON *a = cJSON_AddArrayToObject(c, "xid");
        for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)xids[i]));
    }
    tdm_error_clear();
    cJSON_Delete(begin);
}

// ---- two or more GPUs: all-reduce and peer copies ----------------------------------------------------------

typedef struct {
    tdm_dp_group *g;
    const int *index;
    int n;
    int64_t numel;
    tdm_tensor *param[16], *grad[16], *work[16];   // work: the gradient, a copy of grad
    double seconds;
} ar_run;

static tdm_status ar_setup(int rank, void *arg) {
    ar_run *a = arg;
    tdm_device d = {TDM_DEVICE_CUDA, a->index[rank]};
    float *h = malloc((size_t)a->numel * sizeof *h);
    if (!h) return TDM_ERR_OOM;
    for (int64_t i = 0; i < a->numel; i++) h[i] = (float)(rank + 1);
    a->grad[rank] = tdm_tensor_from_host(1, &a->numel, TDM_DTYPE_F32, d, h);
    free(h);
    a->param[rank] = tdm_tensor_zeros(1, &a->numel, TDM_DTYPE_F32, d);
    a->work[rank] = tdm_tensor_zeros(1, &a->numel, TDM_DTYPE_F32, d);
    if (!a->grad[rank] || !a->param[rank] || !a->work[rank]) return tdm_last_status();
    tdm_tensor_set_requires_grad(a->param[rank], true);
    return tdm_dp_attach(a->g, rank, &a->param[rank], 1);
}

static tdm_status ar_iteration(int rank, void *arg) {
    ar_run *a = arg;
    tdm_device d = {TDM_DEVICE_CUDA, a->index[rank]};
    // each iteration averages rank + 1 itself: NCCL averages in place, and averaging the last
    // mean again would add its rounding each time
    tdm_status s = tdm_tensor_copy_(a->work[rank], a->grad[rank]);
    if (s == TDM_OK) s = tdm_tensor_set_grad(a->param[rank], a->work[rank]);
    double t[1] = {0};
    tdm_status s2 = tdm_dp_allreduce_mean(a->g, rank, t, 1);   // all here before the clock starts
    double t0 = bench_now_s();
    tdm_status s3 = tdm_dp_sync(a->g, rank);
    if (s3 == TDM_OK) s3 = tdm_device_synchronize(d);
    t[0] = bench_now_s() - t0;
    tdm_status s4 = tdm_dp_allreduce_mean(a->g, rank, t, 1);
    if (rank == 0) a->seconds = t[0];
    return s != TDM_OK ? s : s2 != TDM_OK ? s2 : s3 != TDM_OK ? s3 : s4;
}

void check_run_multi(cJSON *gpus, const int *index, int n, const check_run_opts *o) {
    if (n < 2 || n > 16) return;
    bool emu = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(gpus, 0), "emulated"));
    int64_t bytes = emu ? (1 << 20) : o->quick ? (256LL << 20) : (1LL << 30);
    int reps = emu ? 2 : o->quick ? 9 : 10;
    // all-reduce: busbw = S / t x 2 (n - 1) / n (nccl-tests)
    ar_run a = {.index = index, .n = n, .numel = bytes / 4};
    samples s = {.n = 0};
    const char *error = NULL;
    char msg[300];
    a.g = tdm_dp_group_new(n, bytes + 1);
    if (!a.g || tdm_dp_run(a.g, ar_setup, &a) != TDM_OK) error = tdm_last_error();
    for (int r = -2; !error && r < reps; r++) {
        if (tdm_dp_run(a.g, ar_iteration, &a) != TDM_OK) error = tdm_last_error();
        else if (r >= 0 && a.seconds > 0) s.v[s.n++] = (double)bytes / a.seconds * 2.0 * (n - 1) / n / 1e9;
    }
    if (!error) {   // every rank holds the mean of 1..n, within NCCL's rounding (parallel.h)
        float *h = malloc((size_t)bytes);
        const double want = (n + 1) / 2.0, bound = tdm_dp_mean_bound_f32(n, want);
        for (int r = 0; h && !error && r < n; r++) {
            const tdm_tensor *gr = tdm_tensor_grad(a.param[r]);
            if (!gr || tdm_tensor_to_host(gr, h, (size_t)bytes) != TDM_OK) error = tdm_last_error();
            for (int64_t i = 0; !error && i < a.numel; i += 4099)
                if (!(fabs(h[i] - want) <= bound)) {
                    snprintf(msg, sizeof msg, "all-reduce: rank %d element %lld = %.9g, expected %g within %.3g",
                             r, (long long)i, h[i], want, bound);
                    error = msg;
                }
        }
        if (!h) error = "out of host memory to verify the all-reduce";
        free(h);
    }
    if (error && error != msg) snprintf(msg, sizeof msg, "%s", error);
    char note[160];
    snprintf(note, sizeof note, "%d GPUs, %lld MiB, %s; busbw = S/t x 2(n-1)/n", n, (long long)(bytes >> 20),
             a.g && tdm_dp_uses_device_comm(a.g, 0) ? "NCCL" : "through host memory (no NCCL)");
    for (int i = 0; i < n; i++)
        figure(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(gpus, i), "figures"), "multi.allreduce", "GB/s",
               &s, error ? msg : NULL, note);
    tdm_dp_group_free(a.g);
    for (int r = 0; r < n; r++) {
        tdm_tensor_free(a.param[r]);
        tdm_tensor_free(a.grad[r]);
        tdm_tensor_free(a.work[r]);
    }
    // peer copies, every ordered pair: bytes / time, timed by events on the destination's current
    // stream, where a copy between devices runs (kernels/streams.cu)
    double *worst = malloc((size_t)n * sizeof *worst);
    char (*pair)[64] = malloc((size_t)n * sizeof *pair);
    char (*perr)[300] = calloc((size_t)n, sizeof *perr);
    cJSON **pairs = calloc((size_t)n, sizeof *pairs);
    if (!worst || !pair || !perr || !pairs) goto out;
    int64_t numel = bytes / 4;
    int per = emu ? 1 : 4;
    for (int i = 0; i < n; i++) {
        worst[i] = INFINITY;
        pair[i][0] = '\0';
        pairs[i] = cJSON_CreateObject();
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j) continue;
            tdm_device di = {TDM_DEVICE_CUDA, index[i]}, dj = {TDM_DEVICE_CUDA, index[j]};
            tdm_tensor *src = tdm_tensor_rand(1, &numel, TDM_DTYPE_F32, di, 31, 0);
            tdm_tensor *dst = tdm_tensor_zeros(1, &numel, TDM_DTYPE_F32, dj);
            tdm_event *e0 = tdm_event_new(dj), *e1 = tdm_event_new(dj);
            samples ps = {.n = 0};
            const char *pe = !src || !dst || !e0 || !e1 ? tdm_last_error() : NULL;
            // a copy waits for src's device (kernels/streams.cu), and the warm-up absorbs that wait
            for (int r = -1; !pe && r < reps; r++) {
                bool ok = tdm_event_record(e0, NULL) == TDM_OK;
                for (int k = 0; ok && k < per; k++) ok = tdm_tensor_copy_async(dst, src, NULL) == TDM_OK;
                ok = ok && tdm_event_record(e1, NULL) == TDM_OK;
                double t = ok ? event_s(e0, e1) : -1;
                if (t <= 0) pe = tdm_last_error();
                else if (r >= 0) ps.v[ps.n++] = (double)bytes * per / t / 1e9;
            }
            tdm_event_free(e0);
            tdm_event_free(e1);
            if (!pe) {
                float *a1 = malloc((size_t)bytes), *b1 = malloc((size_t)bytes);
                if (!a1 || !b1 || tdm_tensor_to_host(src, a1, (size_t)bytes) != TDM_OK ||
                    tdm_tensor_to_host(dst, b1, (size_t)bytes) != TDM_OK)
                    pe = a1 && b1 ? tdm_last_error() : "out of host memory";
                else if (memcmp(a1, b1, (size_t)bytes)) pe = "the peer copy differs from its source";
                free(a1);
                free(b1);
            }
            char key[64];
            snprintf(key, sizeof key, "cuda:%d->cuda:%d", index[i], index[j]);
            double v = pe ? NAN : bench_median(ps.v, ps.n);
            for (int side = 0; side < 2; side++) {   // a pair counts for both of its GPUs
                int g = side ? j : i;
                if (pe) {
                    if (!perr[g][0]) snprintf(perr[g], sizeof perr[g], "%s: %s", key, pe);
                    cJSON_AddNullToObject(pairs[g], key);
                } else {
                    cJSON_AddNumberToObject(pairs[g], key, v);
                    if (v < worst[g]) {
                        worst[g] = v;
                        snprintf(pair[g], sizeof pair[g], "%s", key);
                    }
                }
            }
            tdm_tensor_free(src);
            tdm_tensor_free(dst);
            tdm_error_clear();
        }
    for (int i = 0; i < n; i++) {
        samples one = {.n = isfinite(worst[i]) ? 1 : 0};
        one.v[0] = worst[i];
        char pn[160];
        snprintf(pn, sizeof pn, "the slowest of its pairs: %s (%lld MiB, %d copies per sample)", pair[i],
                 (long long)(bytes >> 20), per);
        cJSON *f = figure(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(gpus, i), "figures"), "multi.peer",
                          "GB/s", &one, perr[i][0] ? perr[i] : NULL, pn);
        cJSON_AddItemToObject(f, "pairs", pairs[i]);
        pairs[i] = NULL;
    }
out:
    for (int i = 0; pairs && i < n; i++) cJSON_Delete(pairs[i]);
    free(worst);
    free(pair);
    free(perr);
    free(pairs);
    tdm_error_clear();
}

/* cmd_run.c — `bench run`: runs benchmark suites through Google Benchmark (gbench_shim.h) and writes
 * a results directory as docs/RESULTS_FORMAT.md defines it; `bench list`: the suites and their
 * benchmarks, with what each measures and its unit.
 *
 * Robustness: every file is written atomically (temp + rename). After every benchmark the suite's
 * JSON (Google Benchmark's output so far), its CSVs and status.json are rewritten; status.json is
 * also rewritten as each benchmark starts, naming it "running". Ctrl-C or SIGTERM stops after the
 * current benchmark (a second Ctrl-C stops it too), records the rest as unfinished and exits with
 * 128 + the signal. A benchmark that crashes the process (SIGSEGV) cannot be survived in-process:
 * the files written before it stay, and status.json names it as "running" and unfinished.
 *
 * A write that fails (a full disk: ENOSPC; a file size limit: EFBIG) leaves that file as it was,
 * its last version written whole, or absent: nothing is renamed over it. Google Benchmark's own
 * output file replaces the suite's last snapshot only when it is byte for byte the JSON its
 * reporter produced and that JSON parses (a full disk truncates it silently). Every failed write
 * is named once on stderr and recorded in status.json's "write_errors" (file, errno text, count);
 * the run is then not complete and exits 1. When status.json itself cannot be written, stderr
 * says so, and the exit is 1 too.
 *
 * On the emulated CUDA device (a -DTDM_CUDA_EMU=ON build, emulated.h) every benchmark runs and is
 * verified as usual, and everything says the timings are the emulator's, not a GPU's: context.json
 * and status.json "emulated": true, an `emulated` column in the CSVs, Google Benchmark's labels and
 * context, and the lines printed. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench.h"
#include "core/files_impl.h"   // tdm_file_temp_commit, tdm_file_type_errno
#include "emulated.h"
#include "fileio.h"
#include "gbench_shim.h"
#include "run_peer.h"
#include "stats.h"
#include "suites.h"
#include "tandem/tandem.h"

#ifndef TDM_VERSION
#define TDM_VERSION "unknown"
#endif

// ---- small utilities ------------------------------------------------------------------------

static char *xstrdup(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    return d;
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    return q;
}

// ---- writes that failed ---------------------------------------------------------------------
// A failed write leaves its file as it was (the last version written whole, or absent). Each one
// is recorded per file, for status.json's "write_errors"; the first failure of a file is said on
// stderr. Any of them makes the run incomplete and its exit status 1.

typedef struct {
    char file[256];    // relative to the results directory: "transfer.json"
    char error[256];   // why the last attempt failed: strerror's text
    int failures;      // failed attempts (a file is rewritten after every benchmark)
} write_error;

typedef struct {
    const char *dir;
    write_error *v;
    int n;
} write_log;

static void write_log_add(write_log *w, const char *file, const char *error) {
    write_error *e = NULL;
    for (int i = 0; i < w->n && !e; i++)
        if (!strcmp(w->v[i].file, file)) e = &w->v[i];
    if (!e) {
        w->v = xrealloc(w->v, (size_t)(w->n + 1) * sizeof *w->v);
        e = &w->v[w->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->file, sizeof e->file, "%s", file);
        fprintf(stderr, "bench run: cannot write %s/%s: %s (the run will not be complete)\n",
                w->dir, file, error);
    }
    snprintf(e->error, sizeof e->error, "%s", error);
    e->failures++;
}

// Writes DIR/FILE atomically; a failure is recorded. Returns 0 or -1.
static int write_result(write_log *w, const char *file, const char *data, size_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", w->dir, file);
    if (bench_write_atomic(path, data, n) == 0) return 0;
    write_log_add(w, file, bench_strerror(errno));
    return -1;
}

// status.json's "write_errors": [{"file", "error", "failures", "present"}], present: whether the
// file exists (an older version written whole) or not (none was).
static cJSON *write_log_json(const write_log *w) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < w->n; i++) {
        char path[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", w->dir, w->v[i].file);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", w->v[i].file);
        cJSON_AddStringToObject(o, "error", w->v[i].error);
        cJSON_AddNumberToObject(o, "failures", w->v[i].failures);
        cJSON_AddBoolToObject(o, "present", stat(path, &sb) == 0);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

// A growable string.
typedef struct {
    char *s;
    size_t n, cap;
} strbuf;

static void sb_add(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(strbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int k = vsnprintf(b->s ? b->s + b->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if ((size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->s = xrealloc(b->s, b->cap);
    }
}

// A CSV field: numbers as %.10g (empty when not finite), text quoted when it needs it.
static void sb_num(strbuf *b, double v) {
    if (isfinite(v)) sb_add(b, "%.10g", v);
}

static void sb_text(strbuf *b, const char *s) {
    if (!strpbrk(s, ",\"\n")) {
        sb_add(b, "%s", s);
        return;
    }
    sb_add(b, "\"");
    for (; *s; s++) sb_add(b, *s == '"' ? "\"\"" : "%c", *s);
    sb_add(b, "\"");
}

static void utc_time(char *iso, size_t n_iso, char *compact, size_t n_compact) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    if (iso) strftime(iso, n_iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (compact) strftime(compact, n_compact, "%Y%m%dT%H%M%SZ", &tm);
}

static void fmt_duration(double s, char *buf, size_t n) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

// ---- benchmark names ------------------------------------------------------------------------
// Google Benchmark names an instance "matmul/n:64/real_time"; results call it benchmark "matmul",
// param "n:64", and status.json "ops/matmul/n:64".

typedef struct {
    char bench[128], param[256];
    bool has_x;
    double x;
} bench_name;

static void split_name(const char *gb, bench_name *out) {
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s", gb);
    static const char *const suffixes[] = {"/real_time", "/manual_time"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(tmp), k = strlen(suffixes[i]);
        if (n > k && !strcmp(tmp + n - k, suffixes[i])) tmp[n - k] = '\0';
    }
    char *slash = strchr(tmp, '/');
    if (slash) *slash = '\0';
    snprintf(out->bench, sizeof out->bench, "%.127s", tmp);
    snprintf(out->param, sizeof out->param, "%.255s", slash ? slash + 1 : "");
    // x: the value of the registered x argument (the param's component of that index).
    out->has_x = false;
    out->x = NAN;
    int xi = -1;
    for (int i = 0; i < tdm_gb_count(); i++) {
        const tdm_gb_info *info = tdm_gb_get(i);
        if (!strcmp(info->name, out->bench)) xi = info->x_arg;
    }
    const char *p = out->param;
    for (int i = 0; xi >= 0 && *p; i++) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (i == xi) {
            char comp[128];
            snprintf(comp, sizeof comp, "%.*s", (int)(len < 127 ? len : 127), p);
            const char *colon = strchr(comp, ':');
            char *e;
            double v = strtod(colon ? colon + 1 : comp, &e);
            if (e != (colon ? colon + 1 : comp) && *e == '\0') out->has_x = true, out->x = v;
            break;
        }
        if (!end) break;
        p = end + 1;
    }
}

static void result_id(const char *suite, const char *gb, char *buf, size_t n) {
    bench_name bn;
    split_name(gb, &bn);
    snprintf(buf, n, "%s/%s%s%s", suite, bn.bench, bn.param[0] ? "/" : "", bn.param);
}

// ---- Google Benchmark JSON -> tidy rows -------------------------------------------------------

typedef struct {
    char *name;   // Google Benchmark's run_name
    char *metric, *unit;
    double *v;
    int *rep;
    int n;
    bool predicted;   // a model's prediction, not a measurement (the counter `predicted`)
} series;

typedef struct {
    series *s;
    int n;
} series_set;

static void series_free(series_set *ss) {
    for (int i = 0; i < ss->n; i++) {
        free(ss->s[i].name);
        free(ss->s[i].metric);
        free(ss->s[i].unit);
        free(ss->s[i].v);
        free(ss->s[i].rep);
    }
    free(ss->s);
    ss->s = NULL;
    ss->n = 0;
}

static void series_add(series_set *ss, const char *name, const char *metric, const char *unit,
                       int rep, double v) {
    series *s = NULL;
    for (int i = 0; i < ss->n && !s; i++)
        if (!strcmp(ss->s[i].name, name) && !strcmp(ss->s[i].metric, metric)) s = &ss->s[i];
    if (!s) {
        ss->s = xrealloc(ss->s, (size_t)(ss->n + 1) * sizeof *ss->s);
        s = &ss->s[ss->n++];
        *s = (series){xstrdup(name), xstrdup(metric), xstrdup(unit), NULL, NULL, 0, false};
    }
    s->v = xrealloc(s->v, (size_t)(s->n + 1) * sizeof *s->v);
    s->rep = xrealloc(s->rep, (size_t)(s->n + 1) * sizeof *s->rep);
    s->v[s->n] = v;
    s->rep[s->n++] = rep;
}

static double time_unit_to_ns(const char *u) {
    if (!u || !strcmp(u, "ns")) return 1;
    if (!strcmp(u, "us")) return 1e3;
    if (!strcmp(u, "ms")) return 1e6;
    if (!strcmp(u, "s")) return 1e9;
    return NAN;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

// The per-repetition values of every benchmark that ran without error: metric `time` (ns, from
// real_time, which is the manual time when the benchmark uses it) and every counter whose name
// ends in "/s" (a rate named by its unit). Aggregate entries are not read: the statistics are
// recomputed from the samples. A benchmark with an error in any repetition (a failed check) has
// no rows: its other repetitions are not to be trusted either.
static const cJSON *run_name(const cJSON *b) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(b, "run_name");
    return cJSON_IsString(name) ? name : cJSON_GetObjectItemCaseSensitive(b, "name");
}

static bool has_error(const cJSON *list, const char *name) {
    const cJSON *b;
    cJSON_ArrayForEach(b, list) {
        const cJSON *n = run_name(b);
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name) &&
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "error_occurred")))
            return true;
    }
    return false;
}

// The unit of a plain counter the suite declares a result (bench_suite.metrics), or NULL.
static const char *plain_metric_unit(const bench_suite *suite, const char *name) {
    for (const bench_metric *m = suite ? suite->metrics : NULL; m && m->name; m++)
        if (!strcmp(m->name, name)) return m->unit;
    return NULL;
}

static int series_from_json(const cJSON *root, series_set *ss, const bench_suite *suite) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "benchmarks");
    if (!cJSON_IsArray(list)) return -1;
    int count = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, list) {
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(b, "run_type");
        if (cJSON_IsString(rt) && strcmp(rt->valuestring, "iteration")) continue;
        const cJSON *name = run_name(b);
        if (!cJSON_IsString(name) || has_error(list, name->valuestring)) continue;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "real_time");
        const cJSON *tu = cJSON_GetObjectItemCaseSensitive(b, "time_unit");
        const cJSON *ri = cJSON_GetObjectItemCaseSensitive(b, "repetition_index");
        if (!cJSON_IsNumber(t)) continue;
        int rep = cJSON_IsNumber(ri) ? ri->valueint : count;
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(b, "predicted");
        series_add(ss, name->valuestring, "time", "ns", rep,
                   t->valuedouble * time_unit_to_ns(cJSON_IsString(tu) ? tu->valuestring : "ns"));
        const cJSON *c;
        cJSON_ArrayForEach(c, b) {
            if (c->string && cJSON_IsNumber(c) && ends_with(c->string, "/s"))
                series_add(ss, name->valuestring, c->string, c->string, rep, c->valuedouble);
            else if (c->string && cJSON_IsNumber(c) && plain_metric_unit(suite, c->string))
                series_add(ss, name->valuestring, c->string, plain_metric_unit(suite, c->string),
                           rep, c->valuedouble);
        }
        // a prediction (scaling's predicted_* rows): every series of this benchmark
        if (cJSON_IsNumber(pr) && pr->valuedouble != 0)
            for (int i = 0; i < ss->n; i++)
                if (!strcmp(ss->s[i].name, name->valuestring)) ss->s[i].predicted = true;
        count++;
    }
    return 0;
}

static void write_row_prefix(strbuf *b, const char *suite, const bench_name *bn, const series *s) {
    sb_text(b, suite);
    sb_add(b, ",");
    sb_text(b, bn->bench);
    sb_add(b, ",");
    sb_text(b, bn->param);
    sb_add(b, ",");
    if (bn->has_x) sb_num(b, bn->x);
    sb_add(b, ",");
    sb_text(b, s->metric);
    sb_add(b, ",");
    sb_text(b, s->unit);
}

// <suite>.csv and <suite>.samples.csv from the series; a run on the emulated device has a last
// column `emulated`, "true" in every row. Each is written even when the other fails. A prediction
// (series.predicted) was computed, not timed: one row in <suite>.csv with its value as median,
// mean, min and max, stddev and cv empty and repetitions 0, and no samples.
static int write_csvs(write_log *w, const char *suite, const series_set *ss, bool emulated) {
    strbuf tidy = {0}, raw = {0};
    const char *emu_col = emulated ? ",emulated" : "", *emu_val = emulated ? ",true" : "";
    sb_add(&tidy,
           "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions%s\n",
           emu_col);
    sb_add(&raw, "suite,benchmark,param,x,metric,unit,repetition,value%s\n", emu_col);
    for (int i = 0; i < ss->n; i++) {
        const series *s = &ss->s[i];
        bench_name bn;
        split_name(s->name, &bn);
        bench_summary sum = bench_summarize(s->v, s->predicted ? 1 : s->n);
        if (s->predicted) sum.stddev = sum.cv = NAN;
        write_row_prefix(&tidy, suite, &bn, s);
        double f[6] = {sum.median, sum.mean, sum.stddev, sum.cv, sum.min, sum.max};
        for (int k = 0; k < 6; k++) {
            sb_add(&tidy, ",");
            sb_num(&tidy, f[k]);
        }
        sb_add(&tidy, ",%d%s\n", s->predicted ? 0 : s->n, emu_val);
        for (int r = 0; r < (s->predicted ? 0 : s->n); r++) {
            write_row_prefix(&raw, suite, &bn, s);
            sb_add(&raw, ",%d,", s->rep[r]);
            sb_num(&raw, s->v[r]);
            sb_add(&raw, "%s\n", emu_val);
        }
    }
    char file[300];
    snprintf(file, sizeof file, "%s.csv", suite);
    int rc = write_result(w, file, tidy.s, tidy.n);
    snprintf(file, sizeof file, "%s.samples.csv", suite);
    rc |= write_result(w, file, raw.s, raw.n);
    free(tidy.s);
    free(raw.s);
    return rc;
}

// ---- clock check --------------------------------------------------------------------------
// The CPU's clock as the kernel reports it (mean "cpu MHz" of /proc/cpuinfo), read before and
// after the run: a large drop means the figures were taken throttled.

static double cpu_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NAN;
    char line[512];
    double sum = 0;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        double v;
        if (!strncmp(line, "cpu MHz", 7) &&
            sscanf(strchr(line, ':') ? strchr(line, ':') + 1 : "", "%lf", &v) == 1)
            sum += v, n++;
    }
    fclose(f);
    return n ? sum / n : NAN;
}

// ---- the run ------------------------------------------------------------------------------

static volatile sig_atomic_t g_stop = 0, g_signal = 0;

static void on_signal(int sig) {
    g_signal = sig;
    if (g_stop < 2) g_stop++;
    static const char first[] =
        "\nbench run: interrupted: stopping after the current benchmark (again to stop it now)\n";
    static const char second[] = "\nbench run: stopping the current benchmark\n";
    ssize_t w = g_stop == 1 ? write(STDERR_FILENO, first, sizeof first - 1)
                            : write(STDERR_FILENO, second, sizeof second - 1);
    (void)w;
    if (g_stop >= 2) signal(sig, SIG_DFL);   // a third one ends the process
}

static int stop_requested(void *user);   // with the time budget, below

typedef struct {
    const bench_suite *suite;
    char **names;   // Google Benchmark's instance names, in run order
    int n;
} suite_plan;

typedef struct {
    const char *dir, *device_name;
    suite_plan *plans;
    int n_plans;
    cJSON *skipped;        // [{"suite", "reason"}], owned
    char **finished;       // ids
    int n_finished;
    char **failed, **failed_msg;
    int n_failed;
    char running[512];
    cJSON *clock_check;    // owned
    bool complete;
    bool emulated;         // the device is the emulated CUDA device: not GPU figures
    write_log wl;          // writes that failed
    bool status_written;   // the last write of status.json succeeded
    // progress
    const suite_plan *cur;
    int base, total, done;
    double t0, bench_t0;
    bool tty;
    // the time budget (--budget; 0: none): see "the time budget" below
    double budget_s, end_t;      // seconds, and the monotonic time the run must end by
    double soft_t, hard_t;       // the current suite: no row starts when it would end after
                                 // soft_t; a row still running at hard_t is cut
    double suite_rows_s;         // the current suite: seconds its finished rows took, in all
    int suite_rows;              // and how many
    int time_stop;               // 1: the current suite stops for time; 2: the row running is cut
    char cut[512];               // the row cut at hard_t, if any
    char **time_skipped;         // ids recorded as skipped for time (not unfinished)
    int n_time_skipped;
    cJSON *budget_json;          // status.json's "budget", owned
} run_ctx;

static bool id_in(char **ids, int n, const char *id) {
    for (int i = 0; i < n; i++)
        if (!strcmp(ids[i], id)) return true;
    return false;
}

// Whether --filter selects a benchmark id (name/param) that was not registered (a suite's
// recorded skip): the same regular expression, searched in the id; "-REGEX" excludes. POSIX ERE
// where Google Benchmark uses std::regex: the same for the filters the suites' names need.
static bool filter_selects(const char *filter, const char *id) {
    if (!filter || !*filter) return true;
    bool neg = filter[0] == '-';
    regex_t rx;
    if (regcomp(&rx, neg ? filter + 1 : filter, REG_EXTENDED | REG_NOSUB) != 0) return true;
    bool hit = regexec(&rx, id, 0, NULL, 0) == 0;
    regfree(&rx);
    return neg ? !hit : hit;
}

static void write_status(run_ctx *r) {
    cJSON *st = cJSON_CreateObject();
    cJSON_AddBoolToObject(st, "complete", r->complete);
    cJSON_AddBoolToObject(st, "emulated", r->emulated);
    cJSON_AddItemToObject(st, "running", r->running[0] ? cJSON_CreateString(r->running)
                                                       : cJSON_CreateNull());
    cJSON *fin = cJSON_AddArrayToObject(st, "finished");
    for (int i = 0; i < r->n_finished; i++)
        cJSON_AddItemToArray(fin, cJSON_CreateString(r->finished[i]));
    cJSON *unf = cJSON_AddArrayToObject(st, "unfinished");
    for (int p = 0; p < r->n_plans; p++) {
        for (int i = 0; i < r->plans[p].n; i++) {
            char id[512];
            result_id(r->plans[p].suite->name, r->plans[p].names[i], id, sizeof id);
            if (!id_in(r->finished, r->n_finished, id) && !id_in(r->failed, r->n_failed, id) &&
                !id_in(r->time_skipped, r->n_time_skipped, id))
                cJSON_AddItemToArray(unf, cJSON_CreateString(id));
        }
    }
    cJSON *fail = cJSON_AddArrayToObject(st, "failed");
    for (int i = 0; i < r->n_failed; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", r->failed[i]);
        cJSON_AddStringToObject(o, "error", r->failed_msg[i]);
        cJSON_AddItemToArray(fail, o);
    }
    cJSON_AddItemToObject(st, "skipped", cJSON_Duplicate(r->skipped, true));
    if (r->budget_json) cJSON_AddItemToObject(st, "budget", cJSON_Duplicate(r->budget_json, true));
    cJSON_AddItemToObject(st, "clock_check", cJSON_Duplicate(r->clock_check, true));
    cJSON_AddItemToObject(st, "write_errors", write_log_json(&r->wl));
    char *text = cJSON_Print(st);
    if (!text) write_log_add(&r->wl, "status.json", "out of memory");
    r->status_written = text && write_result(&r->wl, "status.json", text, strlen(text)) == 0;
    free(text);
    cJSON_Delete(st);
}

static void progress_clear(run_ctx *r) {
    if (r->tty) fputs("\r\033[K", stderr);
}

static void progress_show(run_ctx *r, const char *id) {
    if (!r->tty) return;
    double el = bench_now_s() - r->t0;
    char e[32], eta[32] = "?";
    fmt_duration(el, e, sizeof e);
    double left = r->done > 0 ? el / r->done * (r->total - r->done) : NAN;
    if (r->budget_s > 0 && !(left < r->end_t - bench_now_s())) left = r->end_t - bench_now_s();
    if (isfinite(left)) fmt_duration(left > 0 ? left : 0, eta, sizeof eta);
    fprintf(stderr, "\r\033[K[%d/%d] %s  elapsed %s  ETA %s", r->done + 1, r->total, id, e, eta);
    fflush(stderr);
}

// ---- the time budget ------------------------------------------------------------------------
// bench run --budget S: the run ends within S seconds, the PyTorch peer included. The suites run
// in priority order (suites.c); each gets a share of the time left, by weight, split with the
// peer when it runs. Within its share a suite's repetitions and min-time are sized so its rows fit
// (unless given on the command line); no row starts when the mean time of the suite's rows so far
// would take it past the share; a row still running at the hard limit (1.5 shares, never past the
// run's end less the peer's part) is cut. What did not run is in status.json's "skipped", each row
// with a reason that starts "skipped for time", never silently absent.

#define BUDGET_ROW_SETUP_S 0.1    // a row's set-up and check, assumed before any row has run
#define BUDGET_MIN_TIME_FLOOR 0.005   // the shortest repetition sizing makes: GPU rows of a few
                                      // microseconds still run hundreds of iterations
#define BUDGET_TANDEM_PART 0.55   // tandem's part of a suite's share when the peer runs too
#define BUDGET_PEER_MIN_S 3.0     // less than this is no time for a python with torch to start

static int stop_requested(void *user) {
    run_ctx *r = user;
    if (g_stop) return g_stop;
    if (r->budget_s <= 0 || r->time_stop) return r->time_stop;
    double now = bench_now_s();
    if (!r->running[0]) {   // polled as the next row starts
        double est = r->suite_rows ? r->suite_rows_s / r->suite_rows : 0;
        if (now + est > r->soft_t) r->time_stop = 1;
    } else if (now > r->hard_t) {   // inside a row's loop
        snprintf(r->cut, sizeof r->cut, "%s", r->running);
        r->time_stop = 2;
    }
    return r->time_stop;
}

static int signal_stop_requested(void *user) {
    (void)user;
    return g_stop;
}

// The repetitions and min-time that fit n rows into `share` seconds: a row costs about its set-up,
// a warm-up of at most min-time, the first repetition's search for an iteration count (about 1.5
// min-times more) and its repetitions. Keeps what the command line set; shortens the min-time
// first (to BUDGET_MIN_TIME_FLOOR), then the repetitions (to 3: a median and a spread).
static void budget_size(double share, int n, bool reps_set, bool min_time_set, int *reps,
                        double *min_time) {
    double per_row = share / (n > 0 ? n : 1) - BUDGET_ROW_SETUP_S;
    if (per_row <= 0) per_row = 0;
    if (!min_time_set && per_row < (*reps + 2.5) * *min_time) {
        double m = per_row / (*reps + 2.5);
        *min_time = m > BUDGET_MIN_TIME_FLOOR ? m : BUDGET_MIN_TIME_FLOOR;
    }
    if (!reps_set && per_row < (*reps + 2.5) * *min_time) {
        int k = (int)(per_row / *min_time - 2.5);
        *reps = k > 3 ? (k < *reps ? k : *reps) : 3;
    }
}

// Records a row (an id "suite/bench/param") as skipped for time.
static void record_time_skip(run_ctx *r, const char *suite, const char *id, const char *why) {
    r->time_skipped = xrealloc(r->time_skipped, (size_t)(r->n_time_skipped + 1) * sizeof(char *));
    r->time_skipped[r->n_time_skipped++] = xstrdup(id);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "suite", suite);
    cJSON_AddStringToObject(o, "benchmark", id + strlen(suite) + 1);
    cJSON_AddStringToObject(o, "reason", why);
    cJSON_AddItemToArray(r->skipped, o);
}

// Every row of plan that neither finished nor failed, as skipped for time.
static int record_time_skips(run_ctx *r, const suite_plan *plan, double share) {
    int n = 0;
    for (int i = 0; i < plan->n; i++) {
        char id[512], why[700];
        result_id(plan->suite->name, plan->names[i], id, sizeof id);
        if (id_in(r->finished, r->n_finished, id) || id_in(r->failed, r->n_failed, id) ||
            id_in(r->time_skipped, r->n_time_skipped, id))
            continue;
        if (!strcmp(id, r->cut))
            snprintf(why, sizeof why,
                     "skipped for time: cut when it ran past the suite's limit (its share of "
                     "--budget: %.1f s)", share);
        else if (share > 0)
            snprintf(why, sizeof why,
                     "skipped for time: the suite's share of --budget (%.1f s) was spent", share);
        else
            snprintf(why, sizeof why,
                     "skipped for time: --budget (%.0f s) was spent before the suite started",
                     r->budget_s);
        record_time_skip(r, plan->suite->name, id, why);
        n++;
    }
    return n;
}

// Parses a duration: "90", "90s", "10m", "1h", "1m30s"; "none" or "0" is no limit (0).
// Returns 0, or -1 when it is not one.
static int parse_duration(const char *text, double *seconds) {
    if (!strcmp(text, "none") || !strcmp(text, "0")) {
        *seconds = 0;
        return 0;
    }
    double total = 0;
    const char *p = text;
    if (!*p) return -1;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !isfinite(v) || v < 0) return -1;
        double unit = 1;
        if (*end == 'h') unit = 3600, end++;
        else if (*end == 'm') unit = 60, end++;
        else if (*end == 's') end++;
        else if (*end) return -1;
        total += v * unit;
        p = end;
    }
    if (!(total > 0) || total > 7 * 86400) return -1;
    *seconds = total;
    return 0;
}

// The budget when --budget is not given: what a person gives each kind of device, printed before
// the run starts. A GPU node: --quick in 3 minutes, the full run in 20 (the peer included). The
// CPU (2 cores measure far slower) and the emulated device (an emulator, not a GPU) get more.
static double default_budget(bool gpu, bool emulated, bool quick, const char **kind) {
    if (emulated) {
        *kind = "the emulated CUDA device";
        return quick ? 1800 : 7200;
    }
    if (gpu) {
        *kind = "a GPU";
        return quick ? 180 : 1200;
    }
    *kind = "the cpu";
    return quick ? 300 : 1800;
}

static void on_start(void *user, int index, const char *name) {
    run_ctx *r = user;
    result_id(r->cur->suite->name, name, r->running, sizeof r->running);
    (void)index;
    r->bench_t0 = bench_now_s();
    write_status(r);
    progress_show(r, r->running);
}

static void print_result(run_ctx *r, const char *id, const series_set *ss, const char *gb_name,
                         const char *error) {
    progress_clear(r);
    printf("[%d/%d] %-36s", r->done, r->total, id);
    if (error) {
        printf(" FAILED: %s\n", error);
    } else {
        for (int i = 0; i < ss->n; i++) {
            if (strcmp(ss->s[i].name, gb_name)) continue;
            bench_summary s = bench_summarize(ss->s[i].v, ss->s[i].n);
            if (!strcmp(ss->s[i].metric, "time")) {
                double v = s.median;
                const char *u = v >= 1e9 ? "s" : v >= 1e6 ? "ms" : v >= 1e3 ? "us" : "ns";
                double d = v >= 1e9 ? 1e9 : v >= 1e6 ? 1e6 : v >= 1e3 ? 1e3 : 1;
                printf(" %9.3f %-2s cv %5.1f%%", v / d, u, 100 * s.cv);
            } else {
                printf("  %10.4g %s", s.median, ss->s[i].unit);
            }
        }
        printf("  (%.1f s)%s\n", bench_now_s() - r->bench_t0, r->emulated ? "  [emulated]" : "");
    }
    fflush(stdout);
}

// Google Benchmark writes a NaN or infinite number (the cv aggregate of a counter whose mean is
// 0) as NaN / Infinity, which is not JSON: a copy with those values as null, for cJSON.
static char *json_without_nan(const char *json) {
    size_t n = strlen(json);
    char *out = xrealloc(NULL, 2 * n + 1), *o = out;   // NaN -> null grows by one
    static const char *const bad[] = {"-NaN", "NaN", "-Infinity", "Infinity"};
    for (const char *p = json; *p;) {
        size_t k = 0;
        if (p > json && (p[-1] == ' ' || p[-1] == ':'))
            for (int b = 0; b < 4 && !k; b++)
                if (!strncmp(p, bad[b], strlen(bad[b]))) k = strlen(bad[b]);
        if (k) {
            memcpy(o, "null", 4);
            o += 4;
            p += k;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

static void on_result(void *user, const tdm_gb_result *res) {
    run_ctx *r = user;
    const char *suite = r->cur->suite->name;
    if (res->error && !strcmp(res->error, "interrupted")) return;   // stays unfinished
    char id[512];
    result_id(suite, res->name, id, sizeof id);
    r->running[0] = '\0';
    r->done++;
    r->suite_rows_s += bench_now_s() - r->bench_t0;
    r->suite_rows++;
    if (res->error) {
        r->failed = xrealloc(r->failed, (size_t)(r->n_failed + 1) * sizeof *r->failed);
        r->failed_msg = xrealloc(r->failed_msg, (size_t)(r->n_failed + 1) * sizeof *r->failed_msg);
        r->failed[r->n_failed] = xstrdup(id);
        r->failed_msg[r->n_failed++] = xstrdup(res->error);
    } else {
        r->finished = xrealloc(r->finished, (size_t)(r->n_finished + 1) * sizeof *r->finished);
        r->finished[r->n_finished++] = xstrdup(id);
    }
    // The suite's JSON so far, its CSVs, then status.json.
    series_set ss = {0};
    char *clean = json_without_nan(res->json);
    cJSON *root = cJSON_ParseWithOpts(clean, NULL, true);
    free(clean);
    char file[300];
    snprintf(file, sizeof file, "%s.json", suite);
    if (!root || series_from_json(root, &ss, r->cur->suite) != 0) {
        fprintf(stderr, "bench run: Google Benchmark's JSON for %s does not parse\n", id);
    } else {   // each file on its own: one that cannot be written does not hold back the others
        write_result(&r->wl, file, res->json, strlen(res->json));
        write_csvs(&r->wl, suite, &ss, r->emulated);
    }
    print_result(r, id, &ss, res->name, res->error);
    write_status(r);
    series_free(&ss);
    cJSON_Delete(root);
}

// Is the file at PATH byte for byte TEXT (N bytes)? Then it is fsync'd, so that it can be renamed
// over a snapshot. Google Benchmark writes its output through a stream that stops silently when
// a write fails: on a full disk the file is a truncated copy of what its reporter produced.
static bool file_is_synced_copy(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char buf[65536];
    size_t at = 0, k;
    bool same = true;
    while (same && (k = fread(buf, 1, sizeof buf, f)) > 0) {
        same = at + k <= n && !memcmp(buf, text + at, k);
        at += k;
    }
    same = same && !ferror(f) && at == n && fsync(fileno(f)) == 0;
    fclose(f);
    return same;
}

// A suite's last act: Google Benchmark's complete JSON (GBOUT, and the same text in memory)
// becomes <suite>.json — when it parses and the file is whole, by renaming GBOUT over the last
// snapshot; when the file is not whole, by writing the text atomically. When neither can be
// done the last snapshot stays and the failure is recorded.
static void finish_suite_json(run_ctx *r, const char *suite, const char *gbout) {
    const char *text = tdm_gb_last_json();
    size_t n = strlen(text);
    char file[300], final[4200];
    snprintf(file, sizeof file, "%s.json", suite);
    snprintf(final, sizeof final, "%s/%s", r->dir, file);
    char *clean = json_without_nan(text);
    cJSON *root = cJSON_ParseWithOpts(clean, NULL, true);
    free(clean);
    bool parses = root && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "benchmarks"));
    cJSON_Delete(root);
    if (!parses) {
        fprintf(stderr, "bench run: Google Benchmark's JSON for suite %s does not parse: %s keeps "
                        "its last snapshot\n", suite, final);
        write_log_add(&r->wl, file, "Google Benchmark's JSON does not parse");
        return;
    }
    if (file_is_synced_copy(gbout, text, n) && tdm_file_temp_commit(gbout, final) == 0) return;
    write_result(&r->wl, file, text, n);
}

// ---- --profile: one more untimed run per benchmark under the profiler -------------------------

typedef struct {
    const char *dir, *suite;
    write_log *wl;
    int failures;
} profile_ctx;

static void profile_on_start(void *user, int index, const char *name) {
    (void)user, (void)index, (void)name;
    if (tdm_profile_start() != TDM_OK) fprintf(stderr, "bench run: --profile: %s\n", tdm_last_error());
}

// Writes profiles/<suite>.<benchmark>[.<param>].trace.json and .table.json (the table with the
// benchmark's id added), when the benchmark ran ops.
static void profile_on_result(void *user, const tdm_gb_result *res) {
    profile_ctx *pc = user;
    tdm_profile *p = tdm_profile_stop();
    if (!p || tdm_profile_rows(p, NULL) == 0 || res->error) {
        tdm_profile_free(p);
        return;
    }
    char id[512], file[600], rel[700], path[4200];
    result_id(pc->suite, res->name, id, sizeof id);
    snprintf(file, sizeof file, "%s", id);
    for (char *c = file; *c; c++)
        if (*c == '/') *c = '.';
    snprintf(rel, sizeof rel, "profiles/%s.trace.json", file);
    snprintf(path, sizeof path, "%s/%s", pc->dir, rel);
    tdm_status s = tdm_profile_trace_save(p, path);
    if (s != TDM_OK) {
        write_log_add(pc->wl, rel, tdm_last_error());
        pc->failures++;
    }
    char *table = tdm_profile_table_json(p);
    cJSON *t = table ? cJSON_Parse(table) : NULL;
    free(table);
    if (t) cJSON_AddStringToObject(t, "benchmark", id);
    char *text = t ? cJSON_Print(t) : NULL;
    snprintf(rel, sizeof rel, "profiles/%s.table.json", file);
    if (!text) {
        fprintf(stderr, "bench run: --profile: no table for %s\n", id);
        pc->failures++;
    } else if (write_result(pc->wl, rel, text, strlen(text)) != 0) {
        pc->failures++;
    }
    free(text);
    cJSON_Delete(t);
    tdm_profile_free(p);
}

// Runs the registered benchmarks of `suite` once more, briefly, each under its own session.
static int profile_suite(const char *dir, const char *suite, const char *filter, write_log *wl) {
    char pdir[4200], gbout[4200], err[512];
    snprintf(pdir, sizeof pdir, "%s/profiles", dir);
    snprintf(gbout, sizeof gbout, "%s/.%s.profile.gbench.json.tmp", dir, suite);
    struct stat sb;
    if (mkdir(pdir, 0777) != 0 &&
        (errno != EEXIST || lstat(pdir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        fprintf(stderr, "bench run: --profile: cannot create %s: %s\n", pdir,
                errno == EEXIST ? "it is there and not a directory (a link is not followed)"
                                : strerror(errno));
        return -1;
    }
    profile_ctx pc = {dir, suite, wl, 0};
    tdm_gb_run_options o = {.filter = filter, .repetitions = 1, .min_time = 1e-6,
                            .json_out = gbout, .user = &pc, .on_start = profile_on_start,
                            .on_result = profile_on_result, .stop_requested = signal_stop_requested};
    int ran = tdm_gb_run(&o, err, sizeof err);
    const bench_suite *bs = bench_suite_find(suite);
    if (bs && bs->finish) bs->finish();
    unlink(gbout);
    if (tdm_profile_is_recording()) tdm_profile_free(tdm_profile_stop());
    if (ran < 0) fprintf(stderr, "bench run: --profile: suite %s: %s\n", suite, err);
    return ran < 0 || pc.failures ? -1 : 0;
}

// ---- context ------------------------------------------------------------------------------

// Adds the env fields to Google Benchmark's context as strings: "env.host", "env.gpus.0.name"...
static void add_env_context(const cJSON *j, const char *prefix) {
    char key[512], val[64];
    if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
        int i = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, j) {
            if (c->string) snprintf(key, sizeof key, "%s.%s", prefix, c->string);
            else snprintf(key, sizeof key, "%s.%d", prefix, i);
            add_env_context(c, key);
            i++;
        }
    } else if (cJSON_IsString(j)) {
        tdm_gb_add_context(prefix, j->valuestring);
    } else if (cJSON_IsNumber(j)) {
        snprintf(val, sizeof val, "%.17g", j->valuedouble);
        tdm_gb_add_context(prefix, val);
    } else if (cJSON_IsBool(j)) {
        tdm_gb_add_context(prefix, cJSON_IsTrue(j) ? "true" : "false");
    } else {
        tdm_gb_add_context(prefix, "null");
    }
}

cJSON *bench_context_json(int argc, char **argv, const char *device, bool emulated, const char *started,
                         cJSON *env) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "format", "tandem-results/1");
    cJSON *t = cJSON_AddObjectToObject(c, "tandem");
    cJSON_AddStringToObject(t, "version", TDM_VERSION);
    cJSON_AddStringToObject(t, "commit", bench_git_commit());
    cJSON_AddStringToObject(t, "build", tdm_build_info());
    cJSON *cmd = cJSON_AddArrayToObject(c, "command");
    cJSON_AddItemToArray(cmd, cJSON_CreateString("bench"));
    for (int i = 0; i < argc; i++) cJSON_AddItemToArray(cmd, cJSON_CreateString(argv[i]));
    cJSON_AddStringToObject(c, "device", device);
    cJSON_AddBoolToObject(c, "emulated", emulated);
    if (emulated) cJSON_AddStringToObject(c, "emulated_note", BENCH_EMU_BANNER);
    cJSON_AddStringToObject(c, "started", started);
    cJSON_AddItemToObject(c, "env", env ? env : cJSON_CreateNull());
    return c;
}

static int write_context(const char *dir, int argc, char **argv, const char *device,
                         bool emulated, const char *started, cJSON *env) {
    cJSON *c = bench_context_json(argc, argv, device, emulated, started,
                                  env ? cJSON_Duplicate(env, true) : NULL);
    cJSON_AddBoolToObject(c, "flush_l2", tdm_gb_flush_enabled());
    char *text = cJSON_Print(c);
    char path[4200];
    snprintf(path, sizeof path, "%s/context.json", dir);
    int rc = text ? bench_write_atomic(path, text, strlen(text)) : -1;
    free(text);
    cJSON_Delete(c);
    return rc;
}

// ---- options ------------------------------------------------------------------------------

static void run_usage(FILE *f) {
    fprintf(f,
        "usage: bench run [--suite S[,S...]] [--filter REGEX] [--device cpu|cuda:N]\n"
        "                 [--repetitions N] [--min-time S] [--quick] [--flush-l2] [--out DIR]\n"
        "                 [--peer torch [--python PATH] [--peer-script PATH]]\n"
        "                 [--profile] [--budget DURATION]\n"
        "\n"
        "Runs benchmark suites through Google Benchmark and writes a results directory\n"
        "(docs/RESULTS_FORMAT.md): context.json, <suite>.json (Google Benchmark's JSON),\n"
        "<suite>.csv (median, mean, stddev, cv, min, max per benchmark and metric),\n"
        "<suite>.samples.csv (every repetition) and status.json, each written atomically and\n"
        "rewritten after every benchmark. Prints one line per benchmark; a progress line\n"
        "(benchmark i of n, elapsed, ETA) on stderr when it is a terminal.\n"
        "\n"
        "--suite S,...     suites to run (default: all that run on the device; bench list)\n"
        "--filter REGEX    only benchmarks whose name matches (Google Benchmark's\n"
        "                  --benchmark_filter over names such as matmul/n:64; -REGEX excludes)\n"
        "--device D        cpu or cuda:N (default: cuda:0 when there is a GPU, else cpu);\n"
        "                  suites that do not run on D are skipped, with the reason recorded;\n"
        "                  on the emulated CUDA device (a -DTDM_CUDA_EMU=ON build) every\n"
        "                  benchmark runs and is verified, and the results are marked emulated:\n"
        "                  its timings are the emulator's, not GPU figures\n"
        "--repetitions N   timed repetitions per benchmark (default 9, the fewest that bench\n"
        "                  compare and Google Benchmark's compare.py advise for their U test;\n"
        "                  each costs --min-time or more); statistics over them\n"
        "--min-time S      seconds each repetition runs at least (default 0.5)\n"
        "--quick           3 repetitions, --min-time 0.01, the smallest sizes only: a quick\n"
        "                  look, too few repetitions for bench compare to call a change\n"
        "                  significant (add --repetitions 9 for that)\n"
        "--flush-l2        cold figures: flush the caches (the GPU's L2; the CPU's last-level\n"
        "                  cache) before every timed iteration, outside the timed region\n"
        "--out DIR         results directory (default results/<host>-<device>-<UTC time>);\n"
        "                  must not hold a run already\n"
        "--peer torch      then the same suites, sizes and options through PyTorch\n"
        "                  (suites/peers/torch_peer.py) into DIR/" BENCH_PEER_DIR "/, a results\n"
        "                  directory of the same format; bench report DIR tables the ratios\n"
        "                  (docs/PEERS.md). A python without torch: a message and exit 2,\n"
        "                  tandem's results kept\n"
        "--python PATH     the python with torch (default $TANDEM_PYTHON, else /usr/bin/python3)\n"
        "--peer-script P   the peer script (default: the one in the source tree bench was built\n"
        "                  from)\n"
        "--profile         after each suite's timed run, runs each benchmark once more (one\n"
        "                  short repetition, untimed) under the profiler and writes\n"
        "                  profiles/<suite>.<benchmark>.trace.json (Chrome trace) and\n"
        "                  .table.json (top ops) for those that ran ops (docs/PROFILING.md)\n"
        "--budget D        end the run, the peer included, within D (90s, 10m, 1h, 1m30s;\n"
        "                  none: no limit). Default per device kind, printed first: a GPU\n"
        "                  3m with --quick, else 20m; the cpu 5m / 30m; the emulated device\n"
        "                  30m / 2h. Suites run in priority order (transformer, amp, transfer,\n"
        "                  cudnn, reductions, graphs, pipeline, scaling, ops, cpu-vs-gpu), each\n"
        "                  with a share of the time left; repetitions and min-time not given\n"
        "                  are sized to fit it; rows that did not fit are listed in\n"
        "                  status.json's skipped as \"skipped for time\" (not a failure)\n"
        "Every benchmark is warmed up (untimed) first and verifies the data it produced.\n"
        "Ctrl-C stops after the current benchmark (twice: at once) and keeps the results so far;\n"
        "status.json lists what did not finish.\n"
        "A file that cannot be written (a full disk) keeps its last version written whole;\n"
        "status.json names it under write_errors and the run is not complete.\n"
        "Exit: 0 done, 1 a benchmark failed (its check or a backend error) or a results file\n"
        "could not be written, 2 bad arguments, 128+signal when interrupted.\n");
}

#define bad(...) bench_bad("run", __VA_ARGS__)

// Is D the emulated CUDA device (tdm_device_props.emulated)?
static bool device_emulated(tdm_device d) {
    if (d.type != TDM_DEVICE_CUDA) return false;
    tdm_device_props p;
    memset(&p, 0, sizeof p);
    bool emu = tdm_device_props_get(d, &p) == TDM_OK && p.emulated;
    tdm_error_clear();
    return emu;
}

// Parses "a,b,c" into suites (NULL-terminated array of pointers into the registry).
static int parse_suites(const char *cmd, const char *list, const bench_suite ***out, int *n) {
    int cap = bench_suite_count() + 1;
    const bench_suite **v = calloc((size_t)cap, sizeof *v);
    char *copy = xstrdup(list), *save = NULL;
    int k = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const bench_suite *s = bench_suite_find(tok);
        if (!s) {
            fprintf(stderr, "bench %s: unknown suite '%s' (bench list shows the suites)\n", cmd,
                    tok);
            free(copy);
            free(v);
            return 2;
        }
        bool dup = false;
        for (int i = 0; i < k; i++) dup |= v[i] == s;
        if (!dup && k < cap - 1) v[k++] = s;
    }
    free(copy);
    if (!k) {
        free(v);
        fprintf(stderr, "bench %s: --suite: no suite named\n", cmd);
        return 2;
    }
    *out = v;
    *n = k;
    return 0;
}

// A suite's place in the priority order (bench_suite_at).
static int suite_rank(const bench_suite *s) {
    for (int i = 0; i < bench_suite_count(); i++)
        if (bench_suite_at(i) == s) return i;
    return bench_suite_count();
}

// Removes a directory holding only files (an MPI rank's scratch results).
static void remove_flat_dir(const char *path) {
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char f[4400];
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            snprintf(f, sizeof f, "%s/%s", path, e->d_name) < (int)sizeof f)
            unlink(f);
    }
    if (d) closedir(d);
    rmdir(path);
}

// The files this run writes into DIR (an existing directory may hold anything): each must be
// absent or a regular file, and profiles/ and the peer's folder absent or a directory (not a
// link to one), so that nothing is written through a link, into a FIFO or a device. 0, or 2
// with the path named (bad input, before anything runs).
static int check_out_targets(const char *dir, const suite_plan *plans, int n, bool profile,
                             bool peer) {
    char path[4400];
    const char *fixed[] = {"context.json", "status.json"};
    for (int i = 0; i < 2 + 4 * n; i++) {
        const char *s = i < 2 ? NULL : plans[(i - 2) / 4].suite->name;
        static const char *const fmt[] = {"%s/%s.json", "%s/%s.csv", "%s/%s.samples.csv",
                                          "%s/.%s.gbench.json.tmp"};
        if (i < 2) snprintf(path, sizeof path, "%s/%s", dir, fixed[i]);
        else snprintf(path, sizeof path, fmt[(i - 2) % 4], dir, s);
        if (bench_check_target(path) != 0) {
            fprintf(stderr, "bench run: --out %s: %s: %s (nothing was run)\n", dir, path,
                    bench_strerror(errno));
            return 2;
        }
    }
    const char *subdirs[] = {profile ? "profiles" : NULL, peer ? BENCH_PEER_DIR : NULL};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        if (!subdirs[i]) continue;
        snprintf(path, sizeof path, "%s/%s", dir, subdirs[i]);
        if (lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "bench run: --out %s: %s: %s, not a directory (nothing was run)\n",
                    dir, path, bench_strerror(tdm_file_type_errno(&sb)));
            return 2;
        }
    }
    return 0;
}

typedef struct {
    const char *suites, *filter, *device, *out;
    int repetitions;
    double min_time;
    double budget;   // --budget, seconds (0: none); < 0: not given (the device kind's default)
    bool quick, reps_set, min_time_set, profile;
    bench_peer_opts peer;   // --peer torch
} run_args;

static void free_plans(suite_plan *plans, int n) {
    for (int i = 0; i < n; i++) tdm_gb_names_free(plans[i].names, plans[i].n);
    free(plans);
}

int bench_run(int argc, char **argv) {
    static const struct option opts[] = {{"suite", required_argument, 0, 's'},
                                         {"filter", required_argument, 0, 'f'},
                                         {"device", required_argument, 0, 'd'},
                                         {"repetitions", required_argument, 0, 'r'},
                                         {"min-time", required_argument, 0, 'm'},
                                         {"quick", no_argument, 0, 'q'},
                                         {"flush-l2", no_argument, 0, 'F'},
                                         {"out", required_argument, 0, 'o'},
                                         {"peer", required_argument, 0, 'P'},
                                         {"python", required_argument, 0, 'y'},
                                         {"peer-script", required_argument, 0, 'S'},
                                         {"profile", no_argument, 0, 'R'},
                                         {"budget", required_argument, 0, 'B'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const double started = bench_now_s();   // the budget counts from here
    run_args a = {.repetitions = 9, .min_time = 0.5, .budget = -1};   // 9: what a U test needs (compare.py)
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 's': a.suites = optarg; break;
        case 'f': a.filter = optarg; break;
        case 'd': a.device = optarg; break;
        case 'r': {
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v < 1 || v > 100000)
                return bad("--repetitions %s: expected an integer from 1 to 100000", optarg);
            a.repetitions = (int)v;
            a.reps_set = true;
            break;
        }
        case 'm': {
            double v = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !isfinite(v) || v <= 0 || v > 1e5)
                return bad("--min-time %s: expected seconds > 0", optarg);
            a.min_time = v;
            a.min_time_set = true;
            break;
        }
        case 'q': a.quick = true; break;
        case 'F': tdm_gb_set_flush(true); break;
        case 'o': a.out = optarg; break;
        case 'P': a.peer.peer = optarg; break;
        case 'y': a.peer.python = optarg; break;
        case 'S': a.peer.script = optarg; break;
        case 'R': a.profile = true; break;
        case 'B':
            if (parse_duration(optarg, &a.budget) != 0)
                return bad("--budget %s: expected a duration such as 90s, 10m, 1h or 1m30s (at "
                           "most 7 days), or none",
                           optarg);
            break;
        case 'h': run_usage(stdout); return 0;
        default: run_usage(stderr); return 2;
        }
    }
    if (optind < argc) return bad("unexpected argument '%s' (bench run --help)", argv[optind]);
    if (a.quick && !a.reps_set) a.repetitions = 3;
    if (a.quick && !a.min_time_set) a.min_time = 0.01;
    if (a.filter) {
        const char *re = a.filter[0] == '-' ? a.filter + 1 : a.filter;
        regex_t rx;
        if (regcomp(&rx, re, REG_EXTENDED | REG_NOSUB) != 0)
            return bad("--filter %s: not a valid regular expression", a.filter);
        regfree(&rx);
    }
    if (bench_peer_check(&a.peer)) return 2;

    // The device: as given, or the first GPU, or the CPU.
    tdm_device dev = TDM_CPU;
    bool emulated = false;   // the emulated CUDA device (suites/emu)
    char devname[32];
    if (a.device) {
        if (tdm_device_parse(a.device, &dev) != TDM_OK || !tdm_device_available(dev))
            return bad("--device: %s", tdm_last_error());
        emulated = device_emulated(dev);
    } else {
        tdm_device gpu = {TDM_DEVICE_CUDA, 0};
        bool gpu_suites = false;   // until the GPU suites exist, a GPU node measures its CPU
        for (int i = 0; i < bench_suite_count(); i++)
            gpu_suites = gpu_suites || bench_suite_supports(bench_suite_at(i), gpu);
        if (tdm_device_available(gpu) && gpu_suites) {
            dev = gpu;
            emulated = device_emulated(dev);
            fprintf(stderr, "bench run: running on cuda:0%s (--device cpu for the CPU)\n",
                    emulated ? ", the EMULATED CUDA device on the CPU: not GPU figures" : "");
        } else if (tdm_device_available(gpu)) {
            fprintf(stderr, "bench run: running on the cpu (no suite runs on cuda:0 yet)\n");
        } else {
            fprintf(stderr, "bench run: running on the cpu (%s)\n", tdm_last_error());
        }
    }
    tdm_device_str(dev, devname, sizeof devname);
    if (emulated && a.peer.peer)
        return bad("--peer %s: %s is the emulated CUDA device, whose timings measure the emulator: "
                   "no emulated figure goes into a comparison",
                   a.peer.peer, devname);

    // Suites: the named ones or all; those that do not run on the device are skipped.
    const bench_suite **wanted = NULL;
    int n_wanted = 0;
    if (a.suites) {
        int rc = parse_suites("run", a.suites, &wanted, &n_wanted);
        if (rc) return rc;
        for (int i = 1; i < n_wanted; i++)   // the priority order (suites.c), whatever was typed
            for (int j = i; j > 0 && suite_rank(wanted[j]) < suite_rank(wanted[j - 1]); j--) {
                const bench_suite *t = wanted[j];
                wanted[j] = wanted[j - 1];
                wanted[j - 1] = t;
            }
    } else {
        n_wanted = bench_suite_count();
        wanted = calloc((size_t)n_wanted + 1, sizeof *wanted);
        for (int i = 0; i < n_wanted; i++) wanted[i] = bench_suite_at(i);
    }
    run_ctx r = {.device_name = devname, .skipped = cJSON_CreateArray(), .emulated = emulated};
    r.plans = calloc((size_t)n_wanted + 1, sizeof *r.plans);
    bench_suite_config cfg = {.device = dev, .quick = a.quick};
    int rc = 0;
    for (int i = 0; i < n_wanted && !rc; i++) {
        const bench_suite *s = wanted[i];
        char reason[300], devs[32];
        if (!bench_suite_supports(s, dev)) {
            snprintf(reason, sizeof reason, "runs on %s, not on %s",
                     bench_suite_devices_str(s, devs, sizeof devs), devname);
        } else {
            char err[512];
            suite_plan p = {.suite = s};
            bench_suite_skips_clear();
            if (s->register_benchmarks(&cfg) != 0) {
                fprintf(stderr, "bench run: suite %s: %s\n", s->name, tdm_last_error());
                rc = 1;
            } else if ((p.n = tdm_gb_list(a.filter, &p.names, err, sizeof err)) < 0) {
                fprintf(stderr, "bench run: suite %s: %s\n", s->name, err);
                rc = strstr(err, "re:") || strstr(err, "regex") ? 2 : 1;
            }
            tdm_gb_clear();
            // benchmarks the suite did not register here, with its reason (status.json "skipped")
            for (int k = 0; !rc && k < bench_suite_skip_count(); k++) {
                const char *id = bench_suite_skip_id(k), *why = bench_suite_skip_reason(k);
                if (!filter_selects(a.filter, id)) continue;
                fprintf(stderr, "bench run: skipping %s/%s: %s\n", s->name, id, why);
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "suite", s->name);
                cJSON_AddStringToObject(o, "benchmark", id);
                cJSON_AddStringToObject(o, "reason", why);
                cJSON_AddItemToArray(r.skipped, o);
            }
            bench_suite_skips_clear();
            if (rc) break;
            if (p.n > 0) {
                r.plans[r.n_plans++] = p;
                r.total += p.n;
                continue;
            }
            tdm_gb_names_free(p.names, p.n);
            snprintf(reason, sizeof reason, "no benchmark matches --filter %s",
                     a.filter ? a.filter : "");
        }
        fprintf(stderr, "bench run: skipping suite %s: %s\n", s->name, reason);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "suite", s->name);
        cJSON_AddStringToObject(o, "reason", reason);
        cJSON_AddItemToArray(r.skipped, o);
    }
    free(wanted);
    if (!rc && r.total == 0) {
        fprintf(stderr, "bench run: nothing to run on %s%s%s\n", devname,
                a.filter ? " with --filter " : "", a.filter ? a.filter : "");
        rc = 2;
    }

    // The results directory (an MPI rank but 0 writes to a scratch directory, removed at the end).
    char dir[4096], iso[32], compact[32];
    bool scratch_dir = false;
    utc_time(iso, sizeof iso, compact, sizeof compact);
    if (!rc) {
        if (a.out) {
            snprintf(dir, sizeof dir, "%s", a.out);
        } else {
            char host[256] = "host", dn[32];
            gethostname(host, sizeof host - 1);
            host[sizeof host - 1] = '\0';
            int k = 0;
            for (const char *p = devname; *p; p++)
                if (*p != ':') dn[k++] = *p;
            dn[k] = '\0';
            snprintf(dir, sizeof dir, "results/%s-%s%s-%s", host, dn, emulated ? "-emulated" : "",
                     compact);
        }
        if (tdm_dp_launch_rank() > 0) {   // mpirun/srun: rank 0 writes the results
            const char *tmpdir = getenv("TMPDIR");
            snprintf(dir, sizeof dir, "%s/tandem-bench-rank%d-XXXXXX",
                     tmpdir && *tmpdir ? tmpdir : "/tmp", tdm_dp_launch_rank());
            if (!mkdtemp(dir)) {
                fprintf(stderr, "bench run: %s: %s\n", dir, strerror(errno));
                rc = 2;
            }
            scratch_dir = true;
        }
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/status.json", dir);
        if (rc) {
        } else if (bench_mkdir_p(dir) != 0) {
            fprintf(stderr, "bench run: --out %s: cannot create the directory: %s\n", dir,
                    strerror(errno));
            rc = 2;
        } else if (access(probe, F_OK) == 0) {
            fprintf(
                stderr,
                "bench run: --out %s already holds a run (status.json): choose another directory\n",
                dir);
            rc = 2;
        } else if (access(dir, W_OK) != 0) {
            fprintf(stderr, "bench run: --out %s: not writable: %s\n", dir, strerror(errno));
            rc = 2;
        } else {
            rc = check_out_targets(dir, r.plans, r.n_plans, a.profile, a.peer.peer != NULL);
        }
    }
    if (rc) {
        cJSON_Delete(r.skipped);
        free_plans(r.plans, r.n_plans);
        tdm_gb_shutdown();
        return rc;
    }
    r.dir = dir;
    r.wl.dir = dir;

    // context.json, and the same fields in every Google Benchmark JSON's context.
    cJSON *env = bench_env_json();
    if (write_context(dir, argc, argv, devname, emulated, iso, env) != 0) {
        fprintf(stderr, "bench run: --out %s: cannot write context.json: %s: nothing was run\n",
                dir, strerror(errno));
        cJSON_Delete(env);
        cJSON_Delete(r.skipped);
        free_plans(r.plans, r.n_plans);
        tdm_gb_shutdown();
        return 1;
    }
    tdm_gb_add_context("tandem_version", TDM_VERSION);
    tdm_gb_add_context("tandem_commit", bench_git_commit());
    tdm_gb_add_context("tandem_device", devname);
    tdm_gb_add_context("tandem_emulated", emulated ? "true" : "false");
    if (emulated) {   // every benchmark's label says so too
        tdm_gb_add_context("tandem_emulated_note", BENCH_EMU_BANNER);
        tdm_gb_set_label_mark(BENCH_EMU_LABEL);
        printf("bench run: %s is the EMULATED CUDA device on the CPU (suites/emu): every benchmark "
               "runs and verifies its output, but the timings measure the emulator, not a GPU: "
               "they are not GPU figures\n",
               devname);
        fflush(stdout);
    }
    if (env) add_env_context(env, "env");
    cJSON_Delete(env);

    r.clock_check = cJSON_CreateObject();
    bool on_cpu = dev.type == TDM_DEVICE_CPU || emulated;   // the emulated device is the CPU
    double mhz0 = on_cpu ? cpu_mhz() : NAN;
    r.tty = isatty(STDERR_FILENO);
    r.t0 = bench_now_s();
    const char *kind = NULL;
    double budget = a.budget >= 0 ? a.budget
                                  : default_budget(dev.type == TDM_DEVICE_CUDA, emulated, a.quick, &kind);
    if (budget > 0 && tdm_dp_mpi_launched()) {   // ranks must run the same rows: no cuts by clock
        printf("bench run: no time budget under an MPI launch (each rank's clock would cut "
               "different rows, and their collectives would wait for each other forever)\n");
        budget = 0;
    } else if (budget > 0) {
        char d[32];
        fmt_duration(budget, d, sizeof d);
        printf("bench run: budget %s (%s%s%s), the peer included: rows that do not fit are "
               "skipped for time and listed in status.json\n",
               d, kind ? "the default for " : "--budget", kind ? kind : "",
               kind ? (a.quick ? " with --quick; --budget to change it, none for no limit"
                               : "; --budget to change it, none for no limit")
                    : "");
    }
    fflush(stdout);
    r.budget_s = budget;
    r.end_t = started + 0.99 * budget;   // 1 %: the last files, and the process's exit
    if (budget > 0) {
        r.budget_json = cJSON_CreateObject();
        cJSON_AddNumberToObject(r.budget_json, "seconds", budget);
        cJSON_AddStringToObject(r.budget_json, "source", kind ? "default" : "--budget");
        cJSON_AddItemToObject(r.budget_json, "suites", cJSON_CreateArray());
    }
    // Signals first: once status.json exists, Ctrl-C keeps what is written.
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    g_stop = 0;
    g_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    write_status(&r);

    int peer_rc = 0, peer_calls = 0;
    bool peer_on = a.peer.peer && !scratch_dir;
    for (int p = 0; p < r.n_plans && !g_stop; p++) {
        const suite_plan *plan = &r.plans[p];
        r.cur = plan;
        r.running[0] = r.cut[0] = '\0';
        r.suite_rows = 0;
        r.suite_rows_s = 0;
        r.time_stop = 0;
        // Its share of the time left, split with the peer; the sizing of its rows.
        double ts = bench_now_s(), share = 0, own = 0, weights = 0;
        int reps = a.repetitions;
        double min_time = a.min_time;
        bench_suite_config scfg = cfg;
        if (r.budget_s > 0) {
            for (int q = p; q < r.n_plans; q++) weights += bench_suite_weight(r.plans[q].suite);
            share = (r.end_t - ts) * bench_suite_weight(plan->suite) / weights;
            own = peer_on ? share * BUDGET_TANDEM_PART : share;
            if (share <= 0) {
                int k = record_time_skips(&r, plan, 0);
                r.total -= k;
                printf("bench run: suite %s skipped for time (%d row%s): the budget was spent\n",
                       plan->suite->name, k, k == 1 ? "" : "s");
                write_status(&r);
                continue;
            }
            r.soft_t = ts + own;
            r.hard_t = ts + 1.5 * own;
            double last = r.end_t - (share - own);   // the peer's part is not its to take
            if (r.hard_t > last) r.hard_t = last;
            budget_size(own, plan->n, a.reps_set, a.min_time_set, &reps, &min_time);
            scfg.budget_s = own;
        }
        scfg.repetitions = reps;
        scfg.min_time = min_time;
        if (r.budget_s > 0)
            printf("bench run: suite %s: %.0f s of the budget%s, %d row%s: %d repetition%s of "
                   "%.3g s\n",
                   plan->suite->name, own, peer_on ? " (and as much again for the peer)" : "",
                   plan->n, plan->n == 1 ? "" : "s", reps, reps == 1 ? "" : "s", min_time);
        fflush(stdout);
        char gbout[4200], err[512];
        snprintf(gbout, sizeof gbout, "%s/.%s.gbench.json.tmp", dir, plan->suite->name);
        bench_suite_skips_clear();
        int reg = plan->suite->register_benchmarks(&scfg);
        // Rows the suite left out here that it did not leave out when the run was planned: under
        // the budget, rows it could not fit (its reason says so).
        for (int k = 0; reg == 0 && k < bench_suite_skip_count(); k++) {
            char id[512];
            snprintf(id, sizeof id, "%s/%s", plan->suite->name, bench_suite_skip_id(k));
            bool planned = false;
            for (int i = 0; i < plan->n && !planned; i++) {
                char pid[512];
                result_id(plan->suite->name, plan->names[i], pid, sizeof pid);
                planned = !strcmp(pid, id);
            }
            if (!planned || id_in(r.time_skipped, r.n_time_skipped, id)) continue;
            record_time_skip(&r, plan->suite->name, id, bench_suite_skip_reason(k));
            r.total--;
        }
        bench_suite_skips_clear();
        if (reg != 0) {
            fprintf(stderr, "bench run: suite %s: %s\n", plan->suite->name, tdm_last_error());
            rc = 1;
            tdm_gb_clear();
            continue;
        }
        double warmup = min_time < 0.1 ? min_time : 0.1;
        tdm_gb_run_options o = {.filter = a.filter,
                                .repetitions = reps,
                                .min_time = min_time,
                                .min_warmup_time = warmup,
                                .json_out = gbout,
                                .user = &r,
                                .on_start = on_start,
                                .on_result = on_result,
                                .stop_requested = stop_requested};
        int ran = tdm_gb_run(&o, err, sizeof err);
        if (plan->suite->finish) plan->suite->finish();
        if (ran < 0 && !strstr(err, "no benchmark matches")) {
            fprintf(stderr, "bench run: suite %s: %s\n", plan->suite->name, err);
            rc = 1;
        } else if (!g_stop && ran >= 0) {
            // Google Benchmark's own file, complete: it replaces the last snapshot when whole.
            finish_suite_json(&r, plan->suite->name, gbout);
            if (a.profile && profile_suite(dir, plan->suite->name, a.filter, &r.wl) != 0) rc = 1;
        }
        unlink(gbout);
        tdm_gb_clear();
        r.running[0] = '\0';
        int cut = 0;
        if (!g_stop && r.budget_s > 0) {
            cut = record_time_skips(&r, plan, own);
            r.total -= cut;
            if (cut) {
                progress_clear(&r);
                printf("bench run: suite %s: %d row%s skipped for time (status.json)\n",
                       plan->suite->name, cut, cut == 1 ? "" : "s");
            }
        }
        write_status(&r);
        double te = bench_now_s(), peer_s = 0;
        const char *peer_note = NULL;
        // The same suite through PyTorch, into DIR/peer-torch, in what is left of the share.
        if (peer_on && !g_stop) {
            bench_peer_call pc = {.suites = plan->suite->name, .filter = a.filter,
                                  .device = devname, .quick = a.quick, .repetitions = reps,
                                  .min_time = min_time, .append = peer_calls > 0};
            if (r.budget_s > 0) {
                pc.budget_s = ts + share - te;
                if (pc.budget_s > r.end_t - te) pc.budget_s = r.end_t - te;
            }
            if (r.budget_s > 0 && pc.budget_s < BUDGET_PEER_MIN_S) {
                peer_note = "skipped for time: less than " "3 s of the suite's share was left";
                printf("bench run: the PyTorch peer of suite %s %s\n", plan->suite->name, peer_note);
            } else {
                int prc = bench_peer_run(&a.peer, dir, &pc, argc, argv);
                peer_calls++;
                peer_s = bench_now_s() - te;
                peer_note = prc == 0 ? "ran" : prc == 1 ? "a PyTorch benchmark failed"
                                                         : "could not run";
                if (prc > 128 || (prc && !peer_rc)) peer_rc = prc;
                if (prc == 2 || prc > 128) peer_on = false;   // no torch, or interrupted: no more
                if (prc > 128 && !g_stop) g_stop = 1, g_signal = prc - 128;
            }
        }
        if (r.budget_json) {
            cJSON *o2 = cJSON_CreateObject();
            cJSON_AddStringToObject(o2, "suite", plan->suite->name);
            cJSON_AddNumberToObject(o2, "share_s", share);
            cJSON_AddNumberToObject(o2, "tandem_share_s", own);
            cJSON_AddNumberToObject(o2, "repetitions", reps);
            cJSON_AddNumberToObject(o2, "min_time", min_time);
            cJSON_AddNumberToObject(o2, "tandem_s", te - ts);
            cJSON_AddNumberToObject(o2, "skipped_for_time", cut);
            if (peer_note) {
                cJSON_AddNumberToObject(o2, "peer_s", peer_s);
                cJSON_AddStringToObject(o2, "peer", peer_note);
            }
            cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r.budget_json, "suites"), o2);
        }
        write_status(&r);
    }
    // Suites not reached (Ctrl-C) stay unfinished; suites not reached for time are recorded.
    if (r.budget_json) {
        cJSON_AddNumberToObject(r.budget_json, "elapsed_s", bench_now_s() - r.t0);
    }

    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    double mhz1 = on_cpu ? cpu_mhz() : NAN;
    if (isfinite(mhz0) && isfinite(mhz1)) {
        cJSON_AddStringToObject(r.clock_check, "source", "/proc/cpuinfo cpu MHz, mean over CPUs");
        cJSON_AddNumberToObject(r.clock_check, "before_mhz", mhz0);
        cJSON_AddNumberToObject(r.clock_check, "after_mhz", mhz1);
        cJSON_AddBoolToObject(r.clock_check, "throttled", mhz1 < 0.9 * mhz0);
        if (mhz1 < 0.9 * mhz0)
            fprintf(stderr,
                    "bench run: warning: the CPU clock fell from %.0f to %.0f MHz during the run\n",
                    mhz0, mhz1);
    } else {
        cJSON_AddBoolToObject(r.clock_check, "checked", false);
        cJSON_AddStringToObject(r.clock_check, "reason",
                                on_cpu ? "/proc/cpuinfo has no cpu MHz"
                                       : "GPU clocks are not read by bench run yet");
    }
    r.running[0] = '\0';
    r.complete = !g_stop && !rc && r.wl.n == 0;
    write_status(&r);
    progress_clear(&r);
    int unfinished = r.total - r.n_finished - r.n_failed;
    int skipped_benches = 0;   // entries naming a benchmark (a suite's recorded skips)
    const cJSON *sk;
    cJSON_ArrayForEach(sk, r.skipped) skipped_benches += cJSON_HasObjectItem(sk, "benchmark");
    int skipped_suites = cJSON_GetArraySize(r.skipped) - skipped_benches;
    printf("results in %s: %d finished, %d failed, %d unfinished, %d suite%s skipped", dir,
           r.n_finished, r.n_failed, unfinished, skipped_suites, skipped_suites == 1 ? "" : "s");
    if (skipped_benches)
        printf(", %d benchmark%s skipped", skipped_benches, skipped_benches == 1 ? "" : "s");
    if (r.wl.n) printf(", %d file%s NOT WRITTEN", r.wl.n, r.wl.n == 1 ? "" : "s");
    printf("\n");
    if (r.wl.n) {
        fflush(stdout);
        fprintf(stderr,
                "bench run: the run is not complete: %d file%s could not be written (each keeps "
                "its last version written whole, or is absent):\n",
                r.wl.n, r.wl.n == 1 ? "" : "s");
        for (int i = 0; i < r.wl.n; i++)
            fprintf(stderr, "  %s: %s (%d failed write%s)\n", r.wl.v[i].file, r.wl.v[i].error,
                    r.wl.v[i].failures, r.wl.v[i].failures == 1 ? "" : "s");
    }
    if (!r.status_written) {
        char path[4200];
        snprintf(path, sizeof path, "%s/status.json", dir);
        fprintf(stderr,
                "bench run: status.json could not be written: %s %s: nothing records how this "
                "run ended\n",
                path, access(path, F_OK) == 0 ? "is an older version" : "does not exist");
    }
    for (int i = 0; i < r.n_failed; i++) printf("FAILED %s: %s\n", r.failed[i], r.failed_msg[i]);
    if (emulated)
        printf("EMULATED: these timings measure the emulated CUDA device on the CPU, not a GPU: "
               "they are not GPU figures, and prove only that the benchmarks run and verify "
               "(bench compare refuses them)\n");
    fflush(stdout);

    int exit_code = 0;   // a benchmark that failed, a file not written: 1
    if (g_stop) exit_code = 128 + (g_signal ? g_signal : SIGINT);
    else if (rc) exit_code = rc;
    else if (r.n_failed || r.wl.n || !r.status_written) exit_code = 1;
    if (peer_rc > 128 || (peer_rc && !exit_code)) exit_code = peer_rc;
    if (scratch_dir) remove_flat_dir(dir);
    for (int i = 0; i < r.n_finished; i++) free(r.finished[i]);
    for (int i = 0; i < r.n_failed; i++) free(r.failed[i]), free(r.failed_msg[i]);
    free(r.finished);
    free(r.failed);
    free(r.failed_msg);
    free(r.wl.v);
    for (int i = 0; i < r.n_time_skipped; i++) free(r.time_skipped[i]);
    free(r.time_skipped);
    cJSON_Delete(r.budget_json);
    cJSON_Delete(r.skipped);
    cJSON_Delete(r.clock_check);
    free_plans(r.plans, r.n_plans);
    tdm_gb_shutdown();
    return exit_code;
}

// ---- bench list ---------------------------------------------------------------------------

static void list_usage(FILE *f) {
    fprintf(f,
            "usage: bench list [--suite S[,S...]] [--device D] [--quick] [--json]\n"
            "  The benchmark suites, the devices each runs on, and their benchmarks: the\n"
            "  instances (parameters) `bench run` times, what each measures (bytes or FLOP\n"
            "  counted) and its unit. Names are what --filter matches.\n"
            "  --device D   the benchmarks registered for D (cpu or cuda:N; the device need not\n"
            "               be present). Default: cpu, and cuda:0 for a suite without a cpu form\n"
            "  --quick      the instances of bench run --quick\n"
            "  --json       one JSON object: per suite its rows, each with its id, unit and\n"
            "               \"work\": what one timed iteration does (dtype, shapes, batch,\n"
            "               products or steps per iteration, FLOP or bytes counted; null where\n"
            "               the benchmark does not describe it), as the PyTorch peer's\n"
            "               --list --json (docs/PEERS.md); nothing is timed\n"
            "  Exit: 0, 1 a suite failed to register, 2 bad arguments.\n");
}

// bench list --json: suite i's registered rows (and skips) as a JSON object; NULL on a work
// description that is not a JSON object (with a message on stderr).
static cJSON *list_suite_json(const bench_suite *s, tdm_device d) {
    cJSON *js = cJSON_CreateObject(), *rows = cJSON_CreateArray(), *skips = cJSON_CreateArray();
    char ds[32];
    cJSON_AddStringToObject(js, "name", s->name);
    cJSON_AddStringToObject(js, "device", tdm_device_str(d, ds, sizeof ds));
    cJSON_AddItemToObject(js, "benchmarks", rows);
    cJSON_AddItemToObject(js, "skipped", skips);
    static char work[4096];
    for (int b = 0; b < tdm_gb_count(); b++) {
        const tdm_gb_info *info = tdm_gb_get(b);
        for (int t = 0; t < (info->n_tuples ? info->n_tuples : 1); t++) {
            const int64_t *args = tdm_gb_tuple(b, t);
            strbuf param = {0};
            for (int a = 0; args && a < info->n_args; a++)
                sb_add(&param, "%s%s:%lld", a ? "/" : "", info->arg_names[a], (long long)args[a]);
            cJSON *row = cJSON_CreateObject();
            char id[600];
            snprintf(id, sizeof id, "%s/%s%s%s", s->name, info->name, param.n ? "/" : "",
                     param.n ? param.s : "");
            cJSON_AddStringToObject(row, "id", id);
            cJSON_AddStringToObject(row, "unit", info->unit);
            cJSON_AddStringToObject(row, "description", info->description);
            free(param.s);
            cJSON *w = tdm_gb_work(b, t, work, sizeof work) ? cJSON_Parse(work) : NULL;
            if (work[0] && !cJSON_IsObject(w)) {
                fprintf(stderr, "bench list: %s: its work description is not a JSON object: %s\n", id,
                        work);
                cJSON_Delete(w);
                cJSON_Delete(row);
                cJSON_Delete(js);
                return NULL;
            }
            cJSON_AddItemToObject(row, "work", w ? w : cJSON_CreateNull());
            cJSON_AddItemToArray(rows, row);
        }
    }
    for (int j = 0; j < bench_suite_skip_count(); j++) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "benchmark", bench_suite_skip_id(j));
        cJSON_AddStringToObject(k, "reason", bench_suite_skip_reason(j));
        cJSON_AddItemToArray(skips, k);
    }
    return js;
}

int bench_list(int argc, char **argv) {
    static const struct option opts[] = {{"suite", required_argument, 0, 's'},
                                         {"device", required_argument, 0, 'd'},
                                         {"quick", no_argument, 0, 'q'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *suites = NULL;
    tdm_device dev = TDM_CPU;
    bool dev_given = false, quick = false, json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's': suites = optarg; break;
        case 'd':
            dev_given = true;
            if (tdm_device_parse(optarg, &dev) != TDM_OK) {
                fprintf(stderr, "bench list: --device %s: %s\n", optarg, tdm_last_error());
                return 2;
            }
            break;
        case 'q': quick = true; break;
        case 'j': json = true; break;
        case 'h': list_usage(stdout); return 0;
        default: list_usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bench list: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    const bench_suite **v = NULL;
    int n = 0;
    if (suites) {
        int rc = parse_suites("list", suites, &v, &n);
        if (rc) return rc;
    } else {
        n = bench_suite_count();
        v = calloc((size_t)n + 1, sizeof *v);
        for (int i = 0; i < n; i++) v[i] = bench_suite_at(i);
    }
    int rc = 0;
    cJSON *json_root = json ? cJSON_CreateObject() : NULL, *json_suites = NULL;
    if (json) {
        char ds[32];
        cJSON_AddStringToObject(json_root, "format", "tandem-list/1");
        cJSON_AddStringToObject(json_root, "device", tdm_device_str(dev, ds, sizeof ds));
        cJSON_AddBoolToObject(json_root, "quick", quick);
        json_suites = cJSON_AddArrayToObject(json_root, "suites");
    }
    for (int i = 0; i < n && !rc; i++) {
        char devs[32], err[512];
        // without --device: the cpu form, or the cuda form of a suite that has no cpu form
        tdm_device d = dev_given || bench_suite_supports(v[i], dev) ? dev
                                                                     : (tdm_device){TDM_DEVICE_CUDA, 0};
        bench_suite_config cfg = {.device = d, .quick = quick};
        if (json) {
            cJSON *js = NULL;
            bench_suite_skips_clear();
            if (!bench_suite_supports(v[i], d)) continue;   // listed by the caller's device
            if (v[i]->register_benchmarks(&cfg) != 0) {
                fprintf(stderr, "bench list: suite %s: %s\n", v[i]->name, tdm_last_error());
                rc = 1;
            } else if (!(js = list_suite_json(v[i], d))) {
                rc = 1;
            } else {
                cJSON_AddItemToArray(json_suites, js);
            }
            bench_suite_skips_clear();
            tdm_gb_clear();
            continue;
        }
        printf("%s%s [%s]: %s\n", i ? "\n" : "", v[i]->name,
               bench_suite_devices_str(v[i], devs, sizeof devs), v[i]->description);
        char **names = NULL;
        int k = -1;
        if (!bench_suite_supports(v[i], d)) {
            char ds[32];
            printf("  (no benchmarks on %s)\n", tdm_device_str(d, ds, sizeof ds));
            continue;
        }
        bench_suite_skips_clear();
        if (v[i]->register_benchmarks(&cfg) != 0) {
            fprintf(stderr, "bench list: suite %s: %s\n", v[i]->name, tdm_last_error());
            rc = 1;
        } else if ((k = tdm_gb_list(NULL, &names, err, sizeof err)) < 0) {
            fprintf(stderr, "bench list: suite %s: %s\n", v[i]->name, err);
            rc = 1;
        }
        for (int b = 0; !rc && b < tdm_gb_count(); b++) {
            const tdm_gb_info *info = tdm_gb_get(b);
            printf("  %-12s %-10s %s\n", info->name, info->unit, info->description);
            strbuf params = {0};
            for (int j = 0; j < k; j++) {
                bench_name bn;
                split_name(names[j], &bn);
                if (strcmp(bn.bench, info->name)) continue;
                sb_add(&params, "%s%s", params.n ? "  " : "",
                       bn.param[0] ? bn.param : "(no parameters)");
            }
            if (params.n) printf("  %-12s %-10s %s\n", "", "", params.s);
            free(params.s);
        }
        for (int j = 0; !rc && j < bench_suite_skip_count(); j++)
            printf("  (skipped %s: %s)\n", bench_suite_skip_id(j), bench_suite_skip_reason(j));
        bench_suite_skips_clear();
        tdm_gb_names_free(names, k);
        tdm_gb_clear();
    }
    if (json) {
        char *text = rc ? NULL : cJSON_Print(json_root);
        if (text) printf("%s\n", text);
        free(text);
        cJSON_Delete(json_root);
    }
    free(v);
    tdm_gb_shutdown();
    return rc;
}

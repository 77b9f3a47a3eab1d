/* cmd_check.c — `bench check`: is this node fit to train on? Per GPU, one line per check — name,
 * measured, expected, ratio, PASS/WARN/FAIL — against what its model should deliver
 * (suites/check/expectations.json, or a fleet's own), the GPUs against each other, and the exit
 * status says it: 0 all pass, 1 any FAIL, 2 bad input, 3 no GPU judged (none there, or only the
 * emulated device), 4 incomplete (an expected check of a GPU was not measured). docs/CHECK.md.
 * The measurements are check_measure.c's, the verdicts check_judge.c's (a pure function:
 * --from-figures judges recorded figures); --out writes a results directory in `bench run`'s
 * format with a "check" section in status.json. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness/bench.h"
#include "check.h"
#include "check_memtest.h"
#include "harness/fileio.h"
#include "harness/stats.h"
#include "core/files_impl.h"   // tdm_file_type_errno
#include "tandem/tandem.h"

static void check_usage(FILE *f) {
    fprintf(f,
            "usage: bench check [--device cuda:N|all] [--level 1|2|3|4] [--duration S] [--quick]\n"
            "                   [--expect FILE] [--out DIR] [--json] [--seed S]\n"
            "                   [--format prometheus] [--prometheus FILE]\n"
            "       bench check --from-figures FILE [--expect FILE] [--json] [--format prometheus]\n"
            "                   [--prometheus FILE]\n"
            "       bench check --write-expect DIR... [--expect FILE]   (JSON on stdout)\n"
            "       bench check --write-baseline DIR... [--expect FILE]   (JSON on stdout)\n"
            "       bench check --memtest [--device cuda:N|all] [--json] [--seed S]\n"
            "       bench check --baseline FILE --rules FILE [--format text|jsonl|md|html]\n"
            "                   [--expect FILE] RESULTS...\n"
            "  Is each GPU of this node fit to train on? Per GPU: the golden cases and a seeded\n"
            "  random conformance run against the reference, short training runs (MLP, CNN, a small\n"
            "  GPT-2; f32, TF32, fp16 with the scaler, bf16) against PyTorch's, device memory\n"
            "  bandwidth, GEMM TFLOP/s in TF32/f16/bf16/f64, pinned host<->device bandwidth and the\n"
            "  PCIe link (below its maximum while copying = FAIL), NVML's throttle reasons,\n"
            "  temperature, remapped rows, retired pages, ECC and clocks; with two or more GPUs,\n"
            "  all-reduce bus bandwidth and peer copies. Each figure against its model's datasheet\n"
            "  (suites/check/expectations.json) and against its sibling GPUs (the outlier rule).\n"
            "  One line per check: device, check, measured, expected, ratio, verdict, note; each\n"
            "  FAIL and WARN carries a fault code (TDM-Fnnn) and what to do (docs/CHECK.md).\n"
            "  --device   cuda:N, or all (default): every GPU of the node\n"
            "  --level N  1: seconds: driver, libraries, NVML health, the link, persistence,\n"
            "             remapped rows, retired pages and the error counters (no load);\n"
            "             2: about 2 minutes a GPU (= --quick); 3: about 15 minutes, + the sustained\n"
            "             load (targeted stress, targeted power; clocks, power, temperature and\n"
            "             throttle reasons sampled at 2 Hz) and silent data corruption (the same\n"
            "             GEMM repeated, the same bits; a deterministic training run's fingerprint,\n"
            "             the same on every GPU of a model); 4: an hour, + the memory test and the\n"
            "             pulsed load. Each level's time budget is printed before it starts; a\n"
            "             run past it is a WARN (TDM-F090). A check of the level missing from the\n"
            "             figures makes the verdict INCOMPLETE (exit 4). Without --level and\n"
            "             --quick: level 2's checks at full sizes\n"
            "  --duration S  levels 3 and 4: seconds of their sustained part (default 780, 3300):\n"
            "             level 3 half stress, half power; level 4 35 %%, 35 %% and 30 %% pulses\n"
            "  --quick    level 2: smaller sizes, a case per op, 8 training runs (docs/CHECK.md)\n"
            "  --expect   an expectations file (default: suites/check/expectations.json)\n"
            "  --out DIR  also write a results directory (bench run's format, a \"check\" section\n"
            "             in status.json, check.csv; report.html/md with the verdict table)\n"
            "  --json     print the judged check as JSON instead of lines\n"
            "  --seed S   bench conform's seed (default 1)\n"
            "  --from-figures FILE  judge recorded figures (tandem-check-figures/1, or a check\n"
            "             run's status.json) without measuring anything\n"
            "  --write-expect DIR...  a fleet's own expectations: per model the medians of the\n"
            "             GPUs recorded by `bench check --out` in DIR... (emulated GPUs and GPUs\n"
            "             with a FAIL left out)\n"
            "  --write-baseline DIR...  a fleet's baseline: per model and metric (each figure,\n"
            "             NVML reading and link field) the median, min, max, count and nodes of the\n"
            "             healthy GPUs in DIR... (or their status.json); an emulated run is refused\n"
            "  --baseline FILE --rules FILE RESULTS...  judge each node's results (directories of\n"
            "             `bench check --out`, or their status.json) by the rules (a metric pattern;\n"
            "             relative to the baseline's median, absolute, or missing_fails): a row per\n"
            "             node, accepted or rejected, each failing rule and by how much; exit 1 when\n"
            "             any node is rejected (suites/check/rules.example.json)\n"
            "  --format   text (default), jsonl, md or html: how --rules prints its rows;\n"
            "             prometheus: a check (measured, or --from-figures) printed in Prometheus's\n"
            "             text format instead of lines (node_exporter's textfile collector)\n"
            "  --prometheus FILE  also write the check in Prometheus's text format to FILE\n"
            "             (NAME.prom in node_exporter's textfile directory), atomically: a\n"
            "             temporary file beside it, then renamed\n"
            "  --memtest  only the memory test: walking ones/zeros, address in address, moving\n"
            "             inversions, seeded random over 95 %% of each GPU's free memory; each\n"
            "             failing address with what was written and read (docs/CHECK.md); exit 0\n"
            "             no error, 1 an error or a test that could not run, 3 no GPU; --seed S:\n"
            "             the random pattern's seed\n"
            "  Without a GPU the host's check runs (the reference against the golden cases) and\n"
            "  every GPU check says \"needs a GPU\"; on the emulated device (a -DTDM_CUDA_EMU=ON\n"
            "  build) numerics are judged and every speed is labelled EMULATED, not judged.\n"
            "  Exit: 0 every check on every GPU passed (WARN allowed), 1 a FAIL (a figure above\n"
            "  the GPU's physical limit is one; or a results file that could not be written),\n"
            "  2 bad input, 3 no GPU was judged (none, or only the emulated device) and nothing\n"
            "  failed, 4 incomplete: a check every GPU gets was not measured (absent from the\n"
            "  figures, or not run) and nothing failed. --rules: 0 every node accepted, 1 any\n"
            "  node rejected, 2 bad input (the file and field named).\n");
}

// ---- files ------------------------------------------------------------------------------------

typedef struct {
    const char *dir;
    cJSON *errors;   // status.json's write_errors
} writer;

static void write_one(writer *w, const char *file, const char *data) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", w->dir, file);
    if (data && bench_write_atomic(path, data, strlen(data)) == 0) return;
    const char *why = data ? bench_strerror(errno) : "out of memory";
    fprintf(stderr, "bench check: cannot write %s: %s (the results are not complete)\n", path, why);
    struct stat sb;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "file", file);
    cJSON_AddStringToObject(e, "error", why);
    cJSON_AddNumberToObject(e, "failures", 1);
    cJSON_AddBoolToObject(e, "present", stat(path, &sb) == 0);
    cJSON_AddItemToArray(w->errors, e);
}

// Removes a folder of the runs' logs (files and folders of files) and the folder.
static void rm_tree(const char *path) {
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(path);
}

// ---- setup: what must hold before anything runs ------------------------------------------------

// The files a check writes into --out DIR (besides logs/).
static const char *const out_files[] = {"context.json", "check.csv", "check.samples.csv",
                                        "status.json", "report.html", "report.md", "sustained.csv",
                                        "pulsed.csv", NULL};

// Whether the golden data the child runs read are there: the cases (the host's check and
// numerics.golden replay them) and, with a GPU, the training trajectories. A wrong data root
// (TANDEM_DOCS_ROOT) is bad input, found before anything runs, not a failed check per run.
static bool golden_missing(int n_gpus, char *why, size_t len) {
    char dir[4096];
    if (!check_find_source_path("suites/golden/cases", dir, sizeof dir)) {
        const char *root = getenv("TANDEM_DOCS_ROOT");
        snprintf(why, len, "the golden cases (suites/golden/cases) were not found%s%.500s",
                 root && *root ? " under TANDEM_DOCS_ROOT=" : "", root && *root ? root : "");
        return true;
    }
    DIR *d = opendir(dir);
    int cases = 0;
    for (struct dirent *e; d && !cases && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        cases += l > 12 && !strcmp(e->d_name + l - 12, ".safetensors");
    }
    if (d) closedir(d);
    if (!cases) {
        snprintf(why, len, "the golden cases: %.500s holds no case file (*.safetensors)%s", dir,
                 d ? "" : ": cannot read it");
        return true;
    }
    if (n_gpus && !check_find_source_path("suites/golden/train", dir, sizeof dir)) {
        snprintf(why, len, "the golden training trajectories (suites/golden/train) were not found");
        return true;
    }
    return false;
}

// Whether logdir is a place the child runs can write their logs (and conform its failing cases)
// without writing through anything: a directory of its own (not a symbolic link to one), writable
// (a file is created and removed), holding no symbolic link, FIFO, device or socket (a log opened
// there would truncate a link's target or block on a FIFO). why says what is wrong.
static bool logdir_unusable(const char *logdir, char *why, size_t len) {
    struct stat sb;
    if (lstat(logdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        int err = errno;
        snprintf(why, len, "%.4000s: %s", logdir,
                 lstat(logdir, &sb) != 0 ? strerror(err) : S_ISLNK(sb.st_mode)
                     ? "a symbolic link, not a directory of its own"
                     : "not a directory");
        return true;
    }
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.tandem-check-probe.%ld", logdir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, len, "%.4000s: cannot write there: %s", logdir, strerror(errno));
        return true;
    }
    close(fd);
    unlink(probe);
    DIR *d = opendir(logdir);
    if (!d) {
        snprintf(why, len, "%.4000s: cannot read it: %s", logdir, strerror(errno));
        return true;
    }
    bool bad = false;
    for (struct dirent *e; !bad && (e = readdir(d));) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", logdir, e->d_name);
        if (lstat(p, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
            snprintf(why, len, "%.4000s: %s: remove it (the runs write their logs there)", p,
                     bench_strerror(tdm_file_type_errno(&sb)));
            bad = true;
        }
    }
    closedir(d);
    return bad;
}

// ---- the results directory -----------------------------------------------------------------

static const char *csv_field(const char *s, char *buf, size_t n) {   // quoted when needed
    if (!strpbrk(s, ",\"\n")) return s;
    size_t k = 0;
    buf[k++] = '"';
    for (; *s && k + 3 < n; s++) {
        if (*s == '"') buf[k++] = '"';
        buf[k++] = *s;
    }
    buf[k++] = '"';
    buf[k] = '\0';
    return buf;
}

// check.csv and check.samples.csv: one row per GPU and performance figure (param = the device),
// so `bench report` tables them and `bench compare` tests them (docs/RESULTS_FORMAT.md).
static void write_csvs(writer *w, const cJSON *judged, bool emulated) {
    size_t cap = 1 << 16;
    char *tidy = malloc(cap), *raw = malloc(cap);
    size_t nt = 0, nr = 0;
    const char *ec = emulated ? ",emulated" : "", *ev = emulated ? ",true" : "";
#define APPEND(buf, n, ...)                                                    \
    do {                                                                       \
        if (!buf) break;                                                       \
        int k_ = snprintf(buf + n, cap - n, __VA_ARGS__);                      \
        if (k_ > 0 && (size_t)k_ < cap - n) n += (size_t)k_;                   \
    } while (0)
    APPEND(tidy, nt, "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions%s\n", ec);
    APPEND(raw, nr, "suite,benchmark,param,x,metric,unit,repetition,value%s\n", ec);
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(judged, "gpus")) {
        const char *dev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device"));
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(g, "figures")) {
            const cJSON *sm = cJSON_GetObjectItemCaseSensitive(f, "samples");
            const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "unit"));
            int n = cJSON_GetArraySize(sm);
            if (!n || !dev || !unit || n > 64) continue;
            double v[64];
            for (int i = 0; i < n; i++) v[i] = cJSON_GetArrayItem(sm, i)->valuedouble;
            bench_summary s = bench_summarize(v, n);
            char b1[128];
            if (nt + 512 > cap || nr + 200 * (size_t)n > cap) continue;   // 64 KiB: more than enough
            APPEND(tidy, nt, "check,%s,%s,,%s,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d%s\n",
                   csv_field(f->string, b1, sizeof b1), dev, unit, unit, s.median, s.mean, s.stddev, s.cv,
                   s.min, s.max, n, ev);
            for (int i = 0; i < n; i++)
                APPEND(raw, nr, "check,%s,%s,,%s,%s,%d,%.9g%s\n", csv_field(f->string, b1, sizeof b1), dev, unit,
                       unit, i, v[i], ev);
        }
    }
#undef APPEND
    write_one(w, "check.csv", tidy);
    write_one(w, "check.samples.csv", raw);
    free(tidy);
    free(raw);
}

static void utc_now(char *iso, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(iso, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

// context.json, status.json (with the check), the CSVs (and the load's series: sustained.csv,
// pulsed.csv); then `bench report --no-plots DIR` (with the series: `bench report DIR`, its plots).
static int write_results(const char *dir, int argc, char **argv, const cJSON *judged, const char *device,
                         bool emulated, const char *started) {
    writer w = {dir, cJSON_CreateArray()};
    cJSON *c = bench_context_json(argc, argv, device, emulated, started, bench_env_json());
    char *text = cJSON_Print(c);
    write_one(&w, "context.json", text);
    free(text);
    cJSON_Delete(c);
    write_csvs(&w, judged, emulated);
    bool series = false;   // the sustained and pulsed load's time series, for the report's plots
    for (int k = 0; k < 2; k++) {
        static const char *const names[] = {"sustained.load", "pulsed.load"}, *const files[] = {"sustained.csv", "pulsed.csv"};
        char *csv = check_series_csv(cJSON_GetObjectItemCaseSensitive(judged, "gpus"), names[k], emulated);
        if (!csv) continue;
        write_one(&w, files[k], csv);
        series = true;
        free(csv);
    }

    cJSON *s = cJSON_CreateObject();
    cJSON_AddBoolToObject(s, "complete", cJSON_GetArraySize(w.errors) == 0);
    cJSON_AddBoolToObject(s, "emulated", emulated);
    cJSON *fin = cJSON_AddArrayToObject(s, "finished");
    cJSON *failed = cJSON_AddArrayToObject(s, "failed");
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(judged, "gpus")) {
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(g, "checks")) {
            char id[200];
            snprintf(id, sizeof id, "check/%s/%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "check")),
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device")));
            cJSON_AddItemToArray(fin, cJSON_CreateString(id));
            const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "verdict"));
            if (v && !strcmp(v, CHECK_FAIL)) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "name", id);
                const char *note = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "note"));
                cJSON_AddStringToObject(e, "error", note && note[0] ? note : "FAIL");
                cJSON_AddItemToArray(failed, e);
            }
        }
    }
    cJSON_AddArrayToObject(s, "unfinished");
    cJSON_AddArrayToObject(s, "skipped");
    cJSON_AddNullToObject(s, "running");
    cJSON_AddItemToObject(s, "check", cJSON_Duplicate(judged, true));
    // status.json last: what it says about the other files is then true
    cJSON_AddItemToObject(s, "write_errors", cJSON_Duplicate(w.errors, true));
    text = cJSON_Print(s);
    int before = cJSON_GetArraySize(w.errors);
    write_one(&w, "status.json", text);
    free(text);
    cJSON_Delete(s);
    int lost = cJSON_GetArraySize(w.errors);
    if (lost > before) fprintf(stderr, "bench check: status.json was not written: %s does not record this check\n", dir);
    cJSON_Delete(w.errors);
    if (lost) return 1;

    // the report, as `bench report` writes it (its stdout is its own), a child like the checks'
    // with the load's series, their plots too (a report without gnuplot says why it has none)
    char *rargv[] = {"bench", "report", series ? (char *)dir : "--no-plots", series ? NULL : (char *)dir, NULL};
    if (check_run_child(rargv, NULL, 600, NULL, 0) != 0) {
        fprintf(stderr, "bench check: `bench report %s` failed: the results are there, the report is not\n", dir);
        return 1;
    }
    return 0;
}

// ---- the command ------------------------------------------------------------------------------

// The judged check as Prometheus's text format (check_prometheus.c): on stdout, or written
// atomically to PATH (a temporary file beside it, then renamed: node_exporter's textfile collector
// never reads half a file). False after saying why when it could not be written.
static bool write_prometheus(const cJSON *j, const char *path) {
    char *text = check_prometheus_text(j, (double)time(NULL));
    bool ok = text != NULL;
    if (!path && ok) ok = fputs(text, stdout) >= 0;
    else if (ok && bench_write_atomic(path, text, strlen(text)) != 0) {
        fprintf(stderr, "bench check: --prometheus %s: cannot write it: %s\n", path, bench_strerror(errno));
        ok = false;
    }
    if (!text) fprintf(stderr, "bench check: out of memory for the Prometheus text\n");
    free(text);
    return ok;
}

// How the judged check is printed: lines, JSON or Prometheus's text format; and a Prometheus
// textfile to write (NULL: none).
typedef struct {
    bool json, prometheus;
    const char *prom_path;
} check_output;

static int judge_and_print(const cJSON *figures, const cJSON *expect, const check_output *how,
                           cJSON **out) {
    char err[600];
    cJSON *j = check_judge(figures, expect, err, sizeof err);
    if (!j) return bench_bad("check", "%s", err);
    bool json = how->json, prom_failed = false;
    if (how->prometheus)
        prom_failed = !write_prometheus(j, NULL);
    else if (json) {
        char *s = cJSON_Print(j);
        if (s) printf("%s\n", s);
        free(s);
    } else {
        check_print_text(stdout, j);
    }
    fflush(stdout);
    int rc = check_exit_code(j);
    if (how->prom_path && !write_prometheus(j, how->prom_path)) prom_failed = true;
    if (prom_failed && rc != CHECK_EXIT_BAD) rc = CHECK_EXIT_FAIL;   // as a results file not written
    if (out) *out = j;
    else cJSON_Delete(j);
    return rc;
}

// A baseline or rules file, read whole and checked; NULL after saying why (bad input).
static cJSON *load_fleet_file(const char *opt, const char *path, const cJSON *baseline) {
    size_t n = 0;
    char err[900];
    char *text = bench_read_file_max(path, 64u << 20, &n);  // no such file is this big
    if (!text) {
        bench_bad("check", "%s %s: cannot read: %s", opt, path, bench_strerror(errno ? errno : EIO));
        return NULL;
    }
    cJSON *j = baseline ? check_rules_parse(text, n, path, baseline, err, sizeof err)
                        : check_baseline_parse(text, n, path, err, sizeof err);
    free(text);
    if (!j) bench_bad("check", "%s %s", opt, err);
    return j;
}

// --write-baseline (baseline_path NULL) or --baseline FILE --rules FILE: docs/CHECK.md "A fleet's
// baseline and rules".
static int fleet_rules(const cJSON *expect, const char *baseline_path, const char *rules_path,
                       const char *format, char **args, int n) {
    char err[2200], note[2048];
    if (!baseline_path) {
        cJSON *b = check_baseline_from_runs(expect, args, n, note, sizeof note, err, sizeof err);
        if (!b) return bench_bad("check", "--write-baseline: %s", err);
        if (note[0]) fprintf(stderr, "bench check: left out: %s\n", note);
        char *s = cJSON_Print(b);
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(b);
        return s && fflush(stdout) == 0 && !ferror(stdout) ? CHECK_EXIT_PASS : CHECK_EXIT_FAIL;
    }
    cJSON *baseline = load_fleet_file("--baseline", baseline_path, NULL);
    cJSON *rules = baseline ? load_fleet_file("--rules", rules_path, baseline) : NULL;
    cJSON *rows = rules ? check_rules_judge_runs(expect, baseline, rules, args, n, err, sizeof err) : NULL;
    int rc = CHECK_EXIT_BAD;
    if (rules && !rows) bench_bad("check", "--rules: %s", err);
    if (rows) rc = check_rules_print(stdout, rows, format);
    cJSON_Delete(rows);
    cJSON_Delete(rules);
    cJSON_Delete(baseline);
    return rc;
}

int check_devices_pick(const char *device, const char *flag, int index[64], int *n, char *no_gpu,
                       size_t no_gpu_n) {
    *n = 0;
    no_gpu[0] = '\0';
    tdm_device d0 = {TDM_DEVICE_CUDA, 0};
    tdm_error_clear();
    bool any = tdm_device_available(d0);
    if (!any) snprintf(no_gpu, no_gpu_n, "%s", tdm_last_error());
    if (strcmp(device, "all")) {
        tdm_device d;
        if (tdm_device_parse(device, &d) != TDM_OK || d.type != TDM_DEVICE_CUDA)
            return bench_bad("check", "%s %s: give cuda:N or all", flag, device);
        if (any && !tdm_device_available(d))
            return bench_bad("check", "%s %s: %s", flag, device, tdm_last_error());
        if (any) index[(*n)++] = d.index;
    } else {
        for (int i = 0; any && i < 64; i++) {
            tdm_device d = {TDM_DEVICE_CUDA, i};
            if (!tdm_device_available(d)) break;
            index[(*n)++] = i;
        }
    }
    tdm_error_clear();
    return 0;
}

int bench_check(int argc, char **argv) {
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"quick", no_argument, 0, 'q'},
                                         {"expect", required_argument, 0, 'e'},
                                         {"out", required_argument, 0, 'o'},
                                         {"json", no_argument, 0, 'j'},
                                         {"seed", required_argument, 0, 's'},
                                         {"from-figures", required_argument, 0, 'f'},
                                         {"write-expect", no_argument, 0, 'w'},
                                         {"write-baseline", no_argument, 0, 'W'},
                                         {"baseline", required_argument, 0, 'b'},
                                         {"rules", required_argument, 0, 'r'},
                                         {"format", required_argument, 0, 'F'},
                                         {"level", required_argument, 0, 'L'},
                                         {"duration", required_argument, 0, 'D'},
                                         {"memtest", no_argument, 0, 'M'},
                                         {"prometheus", required_argument, 0, 'P'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *device = "all", *expect_path = NULL, *out = NULL, *from = NULL;
    const char *baseline_path = NULL, *rules_path = NULL, *format = NULL, *prom_path = NULL;
    bool quick = false, json = false, write_expect = false, write_baseline = false, memtest = false;
    unsigned seed = 1;
    int c, level = 0;
    double duration = NAN;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:qe:o:js:f:wWb:r:F:L:D:MP:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'q': quick = true; break;
        case 'e': expect_path = optarg; break;
        case 'o': out = optarg; break;
        case 'j': json = true; break;
        case 's': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (!*optarg || *end || errno || v > 0xffffffffUL || optarg[0] == '-')
                return bench_bad("check", "--seed %s: not a number from 0 to 4294967295", optarg);
            seed = (unsigned)v;
            break;
        }
        case 'L':
            if (strlen(optarg) != 1 || optarg[0] < '0' + CHECK_LEVEL_MIN || optarg[0] > '0' + CHECK_LEVEL_MAX)
                return bench_bad("check", "--level %s: give 1, 2, 3 or 4", optarg);
            level = optarg[0] - '0';
            break;
        case 'D': {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || errno || !isfinite(v) || v < 1 || v > 7 * 86400)
                return bench_bad("check", "--duration %s: give seconds from 1 to 604800", optarg);
            duration = v;
            break;
        }
        case 'f': from = optarg; break;
        case 'w': write_expect = true; break;
        case 'W': write_baseline = true; break;
        case 'b': baseline_path = optarg; break;
        case 'r': rules_path = optarg; break;
        case 'F': format = optarg; break;
        case 'M': memtest = true; break;
        case 'P': prom_path = optarg; break;
        case 'h': check_usage(stdout); return 0;
        default: check_usage(stderr); return 2;
        }
    }
    if (memtest)   // the memory test alone (check_memtest.c)
        return quick || out || from || write_expect || write_baseline || baseline_path ||
                       rules_path || format || prom_path || level || !isnan(duration) || optind < argc
                   ? bench_bad("check", "--memtest takes only --device, --json and --seed")
                   : check_memtest_main(device, json, seed);
    bool judge_rules = baseline_path || rules_path;
    // --format prometheus prints a check (measured, or --from-figures) for node_exporter
    bool prom = format && !strcmp(format, "prometheus");
    if ((prom || prom_path) && (judge_rules || write_baseline || write_expect || memtest))
        return bench_bad("check", "%s applies to a check (measured, or --from-figures), not to "
                                  "--rules, --write-baseline, --write-expect or --memtest",
                         prom ? "--format prometheus" : "--prometheus");
    if (prom && json) return bench_bad("check", "--format prometheus and --json exclude each other");
    if (prom_path && !prom_path[0]) return bench_bad("check", "--prometheus '': give a file (NAME.prom)");
    if (prom) format = NULL;
    if (write_baseline || judge_rules || format) {
        const char *what = write_baseline ? "--write-baseline" : "--rules";
        if (write_baseline && judge_rules)
            return bench_bad("check", "--write-baseline and --baseline/--rules exclude each other");
        if (judge_rules && !(baseline_path && rules_path))
            return bench_bad("check", "--baseline and --rules go together (bench check --help)");
        if (format && !judge_rules) return bench_bad("check", "--format applies to --rules only");
        if (format && !check_rules_format_known(format))
            return bench_bad("check", "--format %s: give text, jsonl, md or html (--rules), or "
                                      "prometheus (a check)", format);
        if (from || write_expect || out || json || strcmp(device, "all") || quick || level ||
            isfinite(duration))
            return bench_bad("check", "%s measures nothing: --from-figures, --write-expect, --out, "
                                      "--json, --device, --level, --duration and --quick do not apply", what);
        if (optind == argc)
            return bench_bad("check", "%s needs one or more results of `bench check --out` (a "
                                      "directory or its status.json)", what);
    }
    if (optind < argc && !write_expect && !write_baseline && !judge_rules)
        return bench_bad("check", "unexpected argument '%s' (bench check --help)", argv[optind]);
    if (write_expect && optind == argc)
        return bench_bad("check", "--write-expect needs one or more results directories of `bench check --out`");
    if ((from || write_expect) && (out || strcmp(device, "all") || quick || level || isfinite(duration)))
        return bench_bad("check", "--%s measures nothing: --out, --device, --level, --duration and --quick do not apply",
                         from ? "from-figures" : "write-expect");
    if (quick && level && level != 2)
        return bench_bad("check", "--quick is level 2: it does not go with --level %d", level);
    if (isfinite(duration) && level < 3)
        return bench_bad("check", "--duration is the sustained part of levels 3 and 4: give --level 3 or 4");
    if (quick) level = 2;
    if (level >= 2) quick = true;   // level 2 is today's --quick; 3 and 4 build on it
    if (!level) level = 2;   // the full check without --level: level 2's checks, full sizes
    if (from && write_expect) return bench_bad("check", "--from-figures and --write-expect exclude each other");

    char path[4096], err[700];
    if (!expect_path) {
        if (!check_expect_default_path(path, sizeof path))
            return bench_bad("check", "suites/check/expectations.json was not found (set TANDEM_CHECK_EXPECT, or "
                                      "give --expect FILE)");
        expect_path = path;
    }
    cJSON *expect = check_expect_load(expect_path, err, sizeof err);
    if (!expect) return bench_bad("check", "--expect %s", err);

    if (write_baseline || judge_rules) {
        int rc = fleet_rules(expect, baseline_path, rules_path, format ? format : "text",
                             argv + optind, argc - optind);
        cJSON_Delete(expect);
        return rc;
    }
    if (write_expect) {
        cJSON *e = check_expect_from_runs(expect, argv + optind, argc - optind, err, sizeof err);
        cJSON_Delete(expect);
        if (!e) return bench_bad("check", "--write-expect: %s", err);
        if (err[0]) fprintf(stderr, "bench check: left out: %s\n", err);
        char *s = cJSON_Print(e);
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(e);
        return s ? 0 : 1;
    }
    if (from) {
        size_t text_len = 0;
        // no figures file is this big
        char *text = bench_read_file_max(from, 256u << 20, &text_len);
        if (!text) {
            cJSON_Delete(expect);
            return bench_bad("check", "--from-figures %s: cannot read: %s", from,
                             bench_strerror(errno ? errno : EIO));
        }
        // strict JSON; a status.json gives its "check" section (its GPUs emulated when it says so)
        cJSON *f = check_figures_parse(text, text_len, from, err, sizeof err);
        free(text);
        if (!f) {
            cJSON_Delete(expect);
            return bench_bad("check", "--from-figures %s: %s", from, err);
        }
        fprintf(stderr, "bench check: judging %s against the expectations %s\n", from, expect_path);
        check_output how = {.json = json, .prometheus = prom, .prom_path = prom_path};
        int rc = judge_and_print(f, expect, &how, NULL);
        if (rc == 2) fprintf(stderr, "bench check: (in %s)\n", from);
        cJSON_Delete(f);
        cJSON_Delete(expect);
        return rc;
    }

    // which GPUs
    int index[64], n = 0;
    char no_gpu[400] = "";
    if (check_devices_pick(device, "--device", index, &n, no_gpu, sizeof no_gpu)) {
        cJSON_Delete(expect);
        return 2;
    }
    // Setup errors are bad input (exit 2), found before anything runs: not a failed check per run.
    if (golden_missing(n, err, sizeof err)) {
        cJSON_Delete(expect);
        return bench_bad("check", "%s: set TANDEM_DOCS_ROOT to the source tree", err);
    }
    if (out) {
        char sp[4200];
        snprintf(sp, sizeof sp, "%s/status.json", out);
        if (!access(sp, F_OK)) {
            cJSON_Delete(expect);
            return bench_bad("check", "--out %s: holds results already (status.json): give a new directory", out);
        }
        if (bench_mkdir_p(out) != 0) {
            cJSON_Delete(expect);
            return bench_bad("check", "--out %s: cannot create it: %s", out, strerror(errno));
        }
        for (int i = 0; out_files[i]; i++) {   // nothing written there may be written through
            snprintf(sp, sizeof sp, "%s/%s", out, out_files[i]);
            if (bench_check_target(sp) != 0) {
                cJSON_Delete(expect);
                return bench_bad("check", "--out %s: %s: %s", out, out_files[i],
                                 bench_strerror(errno));
            }
        }
    }
    check_run_opts o = {.quick = quick, .seed = seed, .timeout_s = quick ? 300 : 1200, .level = level};
    check_signals_install();   // from here, an interruption kills the child and ends the check
    bool temp_logs = !out;
    if (out) {
        snprintf(o.logdir, sizeof o.logdir, "%s/logs", out);
        struct stat sb;
        if (lstat(o.logdir, &sb) != 0 && mkdir(o.logdir, 0777) != 0 && errno != EEXIST) {
            cJSON_Delete(expect);
            return bench_bad("check", "--out %s: cannot create logs/: %s", out, strerror(errno));
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(o.logdir, sizeof o.logdir, "%s/tandem-check-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(o.logdir)) {
            cJSON_Delete(expect);
            return bench_bad("check", "cannot make a folder for the runs' logs (%s): %s", o.logdir,
                             strerror(errno));
        }
    }
    char why[4600];
    if (logdir_unusable(o.logdir, why, sizeof why)) {
        if (temp_logs) rm_tree(o.logdir);
        cJSON_Delete(expect);
        return bench_bad("check", "%s: %s", out ? "--out" : "the runs' logs", why);
    }
    char started[32];
    utc_now(started, sizeof started);
    FILE *say = json || prom ? stderr : stdout;
    double budget = check_level_budget_s(level, quick, n, duration);
    if (n) fprintf(say, "bench check: %d GPU%s, %s check, expectations %s\n", n, n == 1 ? "" : "s",
                   level != 2 ? (level == 1 ? "level 1" : level == 3 ? "level 3" : "level 4")
                   : quick    ? "quick"
                              : "full",
                   expect_path);
    else fprintf(say, "bench check: no GPU (%s): %s; every GPU check needs a GPU\n", no_gpu,
                 check_level_runs(level, "reference.golden") ? "only the host's check runs"
                                                             : "level 1 has no host check");
    // the level and its budget, before anything runs; what the level lacks, said now
    fprintf(say, "bench check: level %d%s, budget %.0f s%s\n", level,
            level == 1 ? " (driver, NVML health, link, error counters: no load)"
            : level == 2 ? (quick ? " (quick)" : " (full sizes)")
                         : "",
            budget, n > 1 ? " for the node" : "");
    for (const check_level_row *r = check_level_rows(); r->check; r++)
        if (r->level <= level && !r->implemented)
            fprintf(say, "bench check: level %d: %s (%s) is not implemented yet: not run, the verdict "
                         "cannot be PASS\n", r->level, r->check, r->what);
    fflush(say);
    double t_start = bench_now_s();
    cJSON *counters[64] = {0};   // the run's error counters and Xid events, from its start
    for (int i = 0; i < n; i++) counters[i] = check_counters_begin(index[i]);

    cJSON *fig = cJSON_CreateObject();
    cJSON_AddStringToObject(fig, "format", CHECK_FIGURES_FORMAT);
    cJSON_AddBoolToObject(fig, "quick", quick);
    cJSON_AddNumberToObject(fig, "seed", seed);
    cJSON_AddStringToObject(fig, "expectations", expect_path);
    cJSON_AddStringToObject(fig, "started", started);
    cJSON_AddNumberToObject(fig, "level", level);
    cJSON_AddNumberToObject(fig, "budget_s", budget);
    if (!n) cJSON_AddStringToObject(fig, "no_gpu", no_gpu);
    if (check_level_runs(level, "reference.golden")) {
        fprintf(stderr, "bench check: host: the reference against the golden cases ...\n");
        cJSON_AddItemToObject(fig, "host", check_run_host(&o));
    }
    cJSON *gpus = cJSON_AddArrayToObject(fig, "gpus");
    bool emulated = false;
    for (int i = 0; i < n && !check_interrupted(); i++) {
        fprintf(stderr, "bench check: cuda:%d: %s ...\n", index[i],
                level == 1 ? "driver, NVML, link" : "numerics, training, memory, GEMM, PCIe, NVML");
        cJSON *g = check_run_gpu(index[i], &o);
        emulated = emulated || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "emulated"));
        cJSON_AddItemToArray(gpus, g);
    }
    if (n >= 2 && !check_interrupted() && check_level_runs(level, "multi.allreduce")) {
        fprintf(stderr, "bench check: %d GPUs: all-reduce and peer copies ...\n", n);
        check_run_multi(gpus, index, n, &o);
    }
    if (n && !check_interrupted() && check_level_runs(level, "sustained.load"))   // levels 3 and 4
        check_run_sustained(gpus, index, n, level, duration);
    if (n && !check_interrupted() && check_level_runs(level, "sdc.gemm"))   // levels 3, 4
        check_sdc_run(gpus, index, n, &o);
    for (int i = 0; i < n; i++) {   // the counters' ends, and the Xids that came in between
        cJSON *g = cJSON_GetArrayItem(gpus, i);
        if (g && !check_interrupted()) check_counters_end(g, counters[i], index[i]);
        else cJSON_Delete(counters[i]);
    }
    cJSON_AddNumberToObject(fig, "elapsed_s", bench_now_s() - t_start);
    cJSON *judged = NULL;
    check_output how = {.json = json, .prometheus = prom, .prom_path = prom_path};
    int rc = check_interrupted() ? 128 + check_interrupted()
                                 : judge_and_print(fig, expect, &how, &judged);
    if (judged && out) {
        char dev[64];
        if (n == 1) snprintf(dev, sizeof dev, "cuda:%d", index[0]);
        else snprintf(dev, sizeof dev, "%s", n ? "cuda:all" : "none");
        if (write_results(out, argc, argv, judged, dev, emulated, started) != 0 && rc != 2) rc = CHECK_EXIT_FAIL;
        else fprintf(say, "results: %s (report.html, report.md, status.json)\n", out);
    }
    if (check_interrupted()) {   // its child killed, nothing (more) judged or written
        fprintf(stderr, "bench check: interrupted by signal %d (%s)%s%s\n", check_interrupted(),
                strsignal(check_interrupted()), out ? ": no results; the logs so far are in " : "",
                out ? o.logdir : "");
        rc = 128 + check_interrupted();
    }
    if (temp_logs) {
        if (rc == CHECK_EXIT_FAIL) fprintf(say, "the runs' logs are kept in %s\n", o.logdir);
        else rm_tree(o.logdir);
    }
    cJSON_Delete(judged);
    cJSON_Delete(fig);
    cJSON_Delete(expect);
    check_signals_reraise();
    return rc;
}

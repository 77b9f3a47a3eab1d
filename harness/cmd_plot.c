/* cmd_plot.c — `bench plot DIR [DIR...] [--out DIR]`: draws each suite's figures with gnuplot, one
 * per metric, as PNG and SVG: lines of the median vs x per benchmark (min..max whiskers, log x when
 * x spans decades), or clustered bars for benchmarks without a numeric x. Several result
 * directories go side by side, one series per run (A100 vs H100, before vs after). A suite with
 * its own plots/<suite>.gp has its line figures drawn by that script (lines.gp's variables, plus
 * kind, metric, runs and scripts). Also the results reader that `bench report` shares (cmd_plot.h).
 * A run on the emulated CUDA device (emulated.h) is labelled "(emulated)" wherever it is named: in
 * every title and legend, with a subtitle saying its timings are not GPU figures. */
#include <errno.h>
#include <math.h>
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cmd_plot.h"
#include "emulated.h"
#include "fileio.h"
#include "json_strict.h"

// ---------------------------------------------------------------------------------------------
// small helpers: strings that grow, whole files

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->p && (size_t)k < room) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)k + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A number filling the whole field; false for an empty or non-numeric field. */
static bool parse_num(const char *s, double *v) {
    char *end;
    if (!*s) return false;
    errno = 0;
    *v = strtod(s, &end);
    return *end == '\0' && end != s;
}

// ---------------------------------------------------------------------------------------------
// reading a results directory

enum {
    COL_SUITE,
    COL_BENCHMARK,
    COL_PARAM,
    COL_X,
    COL_METRIC,
    COL_UNIT,
    COL_MEDIAN,
    COL_MEAN,
    COL_STDDEV,
    COL_CV,
    COL_MIN,
    COL_MAX,
    COL_REPETITIONS,
    N_COLS
};
static const char *const col_names[N_COLS] = {
    "suite", "benchmark", "param", "x",   "metric", "unit",       "median",
    "mean",  "stddev",    "cv",    "min", "max",    "repetitions"};
static const bool col_required[N_COLS] = {
    [COL_BENCHMARK] = true, [COL_PARAM] = true, [COL_X] = true,
    [COL_METRIC] = true,    [COL_UNIT] = true,  [COL_MEDIAN] = true};

/* Splits s in place at commas into at most max fields; returns the count (max + 1 if more). */
static int split_commas(char *s, char **fields, int max) {
    int n = 0;
    for (;;) {
        if (n < max) fields[n] = s;
        n++;
        char *c = strchr(s, ',');
        if (!c) break;
        *c = '\0';
        s = c + 1;
    }
    return n > max ? max + 1 : n;
}

#define MAX_FIELDS 64

static int load_csv(const char *cmd, const char *path, const char *suite, bench_results *run) {
    size_t len;
    char *text = bench_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "bench %s: %s: %s\n", cmd, path, bench_strerror(errno));
        return 2;
    }
    if (memchr(text, '\0', len)) {
        fprintf(stderr, "bench %s: %s: not a text file\n", cmd, path);
        free(text);
        return 2;
    }
    int col[N_COLS], n_header = 0, line_no = 0, rc = 0;
    for (int c = 0; c < N_COLS; c++) col[c] = -1;
    char *line = text, *fields[MAX_FIELDS + 1];
    while (line && *line && rc == 0) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        line_no++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = '\0';
        if (l == 0) {
            line = next;
            continue;
        }
        int nf = split_commas(line, fields, MAX_FIELDS);
        if (n_header == 0) {  // the header
            if (nf > MAX_FIELDS) {
                fprintf(stderr, "bench %s: %s:1: more than %d columns\n", cmd, path, MAX_FIELDS);
                rc = 2;
                break;
            }
            n_header = nf;
            for (int f = 0; f < nf; f++)
                for (int c = 0; c < N_COLS; c++)
                    if (!strcmp(fields[f], col_names[c]) && col[c] < 0) col[c] = f;
            for (int c = 0; c < N_COLS; c++)
                if (col_required[c] && col[c] < 0) {
                    fprintf(stderr,
                            "bench %s: %s: no '%s' column in the header (docs/RESULTS_FORMAT.md)\n",
                            cmd, path, col_names[c]);
                    rc = 2;
                    break;
                }
            line = next;
            continue;
        }
        if (nf != n_header) {
            fprintf(stderr, "bench %s: %s:%d: %d fields where the header has %d\n", cmd, path,
                    line_no, nf, n_header);
            rc = 2;
            break;
        }
        double v[N_COLS];
        for (int c = COL_X; c < N_COLS; c++) {
            v[c] = NAN;
            if (c == COL_METRIC || c == COL_UNIT || col[c] < 0) continue;
            const char *s = fields[col[c]];
            if (*s && !parse_num(s, &v[c]) && c != COL_X) {
                fprintf(stderr, "bench %s: %s:%d: %s '%s' is not a number\n", cmd, path, line_no,
                        col_names[c], s);
                rc = 2;
                break;
            }
        }
        if (rc) break;
        if (!*fields[col[COL_BENCHMARK]] || !*fields[col[COL_METRIC]]) {
            fprintf(stderr, "bench %s: %s:%d: empty benchmark or metric\n", cmd, path, line_no);
            rc = 2;
            break;
        }
        // room doubled at 64 rows and each power of 2 past it (64 more each time copied a long
        // series' rows over and over)
        const int nr = run->n_rows;
        if (nr == 0 || (nr >= 64 && !(nr & (nr - 1)))) {
            bench_row *p = realloc(run->rows, (size_t)(nr ? 2 * nr : 64) * sizeof *p);
            if (!p) {
                fprintf(stderr, "bench %s: out of memory\n", cmd);
                rc = 2;
                break;
            }
            run->rows = p;
        }
        bench_row *r = &run->rows[run->n_rows];
        memset(r, 0, sizeof *r);
        r->suite = xstrdup(suite);
        r->benchmark = xstrdup(fields[col[COL_BENCHMARK]]);
        r->param = xstrdup(fields[col[COL_PARAM]]);
        r->metric = xstrdup(fields[col[COL_METRIC]]);
        r->unit = xstrdup(fields[col[COL_UNIT]]);
        run->n_rows++;
        if (!r->suite || !r->benchmark || !r->param || !r->metric || !r->unit) {
            fprintf(stderr, "bench %s: out of memory\n", cmd);
            rc = 2;
            break;
        }
        r->has_x = isfinite(v[COL_X]);
        r->x = v[COL_X];
        r->median = v[COL_MEDIAN];
        r->mean = v[COL_MEAN];
        r->stddev = v[COL_STDDEV];
        r->cv = v[COL_CV];
        r->min = v[COL_MIN];
        r->max = v[COL_MAX];
        r->repetitions = isfinite(v[COL_REPETITIONS]) ? (int)v[COL_REPETITIONS] : 0;
        line = next;
    }
    if (rc == 0 && n_header == 0) {
        fprintf(stderr, "bench %s: %s: empty (no header)\n", cmd, path);
        rc = 2;
    }
    free(text);
    return rc;
}

/* context.json / status.json: NULL (and 0) when absent, 2 with a message when unreadable. */
static int load_json(const char *cmd, const char *dir, const char *name, cJSON **out) {
    char path[PATH_MAX];
    *out = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "bench %s: %s: path too long\n", cmd, dir);
        return 2;
    }
    size_t len;
    char *text = bench_read_file(path, &len);
    if (!text) {
        if (errno == ENOENT) return 0;
        fprintf(stderr, "bench %s: %s: %s\n", cmd, path, bench_strerror(errno));
        return 2;
    }
    *out = cJSON_ParseWithLength(text, len);
    if (!*out || !cJSON_IsObject(*out)) {
        const char *at = cJSON_GetErrorPtr();
        fprintf(stderr, "bench %s: %s: not a JSON object%s%.20s%s\n", cmd, path,
                at && !*out ? " (near \"" : "", at && !*out ? at : "", at && !*out ? "\")" : "");
        cJSON_Delete(*out);
        *out = NULL;
        free(text);
        return 2;
    }
    free(text);
    return 0;
}

static char *run_label(const char *dir, const char *device, bool emulated) {
    char tmp[PATH_MAX], real[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    size_t l = strlen(tmp);
    while (l > 1 && tmp[l - 1] == '/') tmp[--l] = '\0';
    const char *base = strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp;
    if ((!strcmp(base, ".") || !strcmp(base, "..")) && realpath(dir, real)) {
        base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
        if (!*base) base = "/";
    }
    sbuf b = {0};
    sb_add(&b, "%s", base);
    if (device && *device) {
        char nocolon[64];  // cuda:0 appears as cuda0 in the default directory names
        size_t k = 0;
        for (const char *s = device; *s && k + 1 < sizeof nocolon; s++)
            if (*s != ':') nocolon[k++] = *s;
        nocolon[k] = '\0';
        if (!strstr(base, device) && !strstr(base, nocolon)) sb_add(&b, " (%s)", device);
    }
    if (emulated) sb_add(&b, " (emulated)");
    return b.p;
}

int bench_results_load(const char *cmd, const char *dir, bench_results *run) {
    memset(run, 0, sizeof *run);
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        fprintf(stderr, "bench %s: %s: %s\n", cmd, dir, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "bench %s: %s: not a directory (give a results directory of bench run)\n",
                cmd, dir);
        return 2;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "bench %s: %s: %s\n", cmd, dir, strerror(errno));
        return 2;
    }
    int rc = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] == '.' || !ends_with(n, ".csv") || ends_with(n, ".samples.csv")) continue;
        if (run->n_suites == cap) {
            cap = cap ? cap * 2 : 8;
            char **p = realloc(run->suites, (size_t)cap * sizeof *p);
            if (!p) {
                rc = 2;
                break;
            }
            run->suites = p;
        }
        char *s = xstrdup(n);
        if (!s) {
            rc = 2;
            break;
        }
        s[strlen(s) - 4] = '\0';
        run->suites[run->n_suites++] = s;
    }
    closedir(d);
    if (rc) {
        fprintf(stderr, "bench %s: out of memory\n", cmd);
        bench_results_free(run);
        return 2;
    }
    if (run->n_suites == 0) {
        fprintf(
            stderr,
            "bench %s: %s: no results (no <suite>.csv; give a directory written by bench run)\n",
            cmd, dir);
        bench_results_free(run);
        return 2;
    }
    qsort(run->suites, (size_t)run->n_suites, sizeof *run->suites, cmp_str);
    run->dir = xstrdup(dir);
    for (int i = 0; i < run->n_suites && rc == 0; i++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s.csv", dir, run->suites[i]) >= (int)sizeof path) {
            fprintf(stderr, "bench %s: %s: path too long\n", cmd, dir);
            rc = 2;
        } else {
            rc = load_csv(cmd, path, run->suites[i], run);
        }
    }
    if (rc == 0) rc = load_json(cmd, dir, "context.json", &run->context);
    if (rc == 0) rc = load_json(cmd, dir, "status.json", &run->status);
    if (rc == 0) {  // emulated: context.json, status.json or the CSVs say so
        char why[1024];
        int emu = bench_dir_emulated(dir, why, sizeof why);
        if (emu < 0) {
            fprintf(stderr, "bench %s: %s\n", cmd, why);
            rc = 2;
        }
        run->emulated = emu == 1;
    }
    if (rc == 0) {
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(run->context, "device");
        if (cJSON_IsString(dev)) run->device = xstrdup(dev->valuestring);
        run->label = run_label(dir, run->device, run->emulated);
        if (!run->dir || !run->label) {
            fprintf(stderr, "bench %s: out of memory\n", cmd);
            rc = 2;
        }
    }
    if (rc) bench_results_free(run);
    return rc;
}

void bench_results_free(bench_results *run) {
    for (int i = 0; i < run->n_rows; i++) {
        bench_row *r = &run->rows[i];
        free(r->suite);
        free(r->benchmark);
        free(r->param);
        free(r->metric);
        free(r->unit);
    }
    for (int i = 0; i < run->n_suites; i++) free(run->suites[i]);
    free(run->rows);
    free(run->suites);
    free(run->dir);
    free(run->label);
    free(run->device);
    cJSON_Delete(run->context);
    cJSON_Delete(run->status);
    memset(run, 0, sizeof *run);
}

void bench_results_label(bench_results *runs, int n) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            bool dup = false;
            for (int j = 0; j < n; j++)
                if (j != i && !strcmp(runs[i].label, runs[j].label)) dup = true;
            if (!dup) continue;
            sbuf b = {0};
            if (pass == 0) {  // the path as given, + device
                sb_add(&b, "%s", runs[i].dir);
                if (runs[i].device) sb_add(&b, " (%s)", runs[i].device);
                if (runs[i].emulated) sb_add(&b, " (emulated)");
            } else {  // the same directory twice
                sb_add(&b, "%s #%d", runs[i].label, i + 1);
            }
            if (b.p) {
                free(runs[i].label);
                runs[i].label = b.p;
            }
        }
}

// ---------------------------------------------------------------------------------------------
// planning the figures

void bench_metric_label(const char *metric, const char *unit, char *buf, size_t len) {
    static const struct {
        const char *unit, *means;
    } known[] = {
        {"GB/s", "1e9 bytes/s"},   {"MB/s", "1e6 bytes/s"},   {"TB/s", "1e12 bytes/s"},
        {"GiB/s", "2^30 bytes/s"}, {"GFLOP/s", "1e9 FLOP/s"}, {"TFLOP/s", "1e12 FLOP/s"},
        {"MFLOP/s", "1e6 FLOP/s"}, {"ns", "nanoseconds"},     {"us", "microseconds"},
        {"ms", "milliseconds"},
    };
    const char *means = NULL;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(unit, known[i].unit)) means = known[i].means;
    if (*unit && strcmp(unit, metric)) {
        if (means && strcmp(unit, "ns") && strcmp(unit, "us") && strcmp(unit, "ms"))
            snprintf(buf, len, "%s (%s, %s)", metric, unit, means);
        else
            snprintf(buf, len, "%s (%s)", metric, unit);
    } else if (means) {
        snprintf(buf, len, "%s (%s)", metric, means);
    } else {
        snprintf(buf, len, "%s", metric);
    }
}

/* A file-name-safe spelling: GB/s -> GB_per_s, anything but [A-Za-z0-9._-] -> _. */
static void slug(sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '/')
            sb_add(b, "_per_");
        else if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                 *s == '-' || (*s == '.' && b->len) || *s == '_')
            sb_add(b, "%c", *s);
        else
            sb_add(b, "_");
    }
}

static bool row_in(const bench_row *r, const char *suite, const char *metric) {
    return !strcmp(r->suite, suite) && !strcmp(r->metric, metric) && isfinite(r->median);
}

/* A row is drawn on a line when its benchmark has this metric at two x values or more (in any of
 * the runs); a benchmark measured at one size only (a --quick run) is a bar. */
static bool on_line(const bench_results *runs, int n, const bench_row *r) {
    if (!r->has_x) return false;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < runs[i].n_rows; k++) {
            const bench_row *o = &runs[i].rows[k];
            if (o->has_x && o->x != r->x && row_in(o, r->suite, r->metric) &&
                !strcmp(o->benchmark, r->benchmark))
                return true;
        }
    return false;
}

void bench_figures_free(bench_figure *figs, int n) {
    for (int i = 0; i < n; i++) {
        free(figs[i].suite);
        free(figs[i].metric);
        free(figs[i].unit);
        free(figs[i].name);
    }
    free(figs);
}

static int add_figure(bench_figure **figs, int *n, const bench_row *r, bool bars, bool suffix) {
    bench_figure *p = realloc(*figs, (size_t)(*n + 1) * sizeof *p);
    if (!p) return 1;
    *figs = p;
    bench_figure *f = &p[*n];
    sbuf name = {0};
    slug(&name, r->suite);
    sb_add(&name, "-");
    slug(&name, r->metric);
    if (suffix) sb_add(&name, "-bars");
    // a file name with room for ".png.tmp<pid>.gp" (long names cut), and no other figure's:
    // -2, -3, ... where two metrics spell the same (GB/s and GB_per_s) or were cut alike
    if (name.p && name.len > BENCH_FIGURE_NAME_MAX) name.p[name.len = BENCH_FIGURE_NAME_MAX] = 0;
    size_t base = name.len;
    for (int k = 2, taken = 1; taken && name.p; k++) {
        taken = 0;
        for (int i = 0; i < *n; i++) taken |= !strcmp(p[i].name, name.p);
        if (taken) {
            name.len = base;
            sb_add(&name, "-%d", k);
        }
    }
    f->suite = xstrdup(r->suite);
    f->metric = xstrdup(r->metric);
    f->unit = xstrdup(r->unit);
    f->bars = bars;
    f->name = name.p;
    (*n)++;
    return !f->suite || !f->metric || !f->unit || !f->name ? 1 : 0;
}

int bench_figures_plan(const bench_results *runs, int n, bench_figure **figs, int *n_figs) {
    *figs = NULL;
    *n_figs = 0;
    // every (suite, metric) in the order first seen: suites sorted, metrics in CSV order
    char **suites = NULL;
    int n_suites = 0;
    for (int i = 0; i < n; i++)
        for (int s = 0; s < runs[i].n_suites; s++) {
            bool seen = false;
            for (int k = 0; k < n_suites; k++) seen |= !strcmp(suites[k], runs[i].suites[s]);
            if (seen) continue;
            char **p = realloc(suites, (size_t)(n_suites + 1) * sizeof *p);
            if (!p) {
                free(suites);
                return 1;
            }
            suites = p;
            suites[n_suites++] = runs[i].suites[s];
        }
    qsort(suites, (size_t)n_suites, sizeof *suites, cmp_str);
    int rc = 0;
    for (int s = 0; s < n_suites && !rc; s++)
        for (int i = 0; i < n && !rc; i++)
            for (int k = 0; k < runs[i].n_rows && !rc; k++) {
                const bench_row *r = &runs[i].rows[k];
                if (strcmp(r->suite, suites[s])) continue;
                bool done = false;  // this metric already planned?
                for (int f = 0; f < *n_figs; f++)
                    done |= !strcmp((*figs)[f].suite, r->suite) &&
                            !strcmp((*figs)[f].metric, r->metric);
                if (done) continue;
                bool any_x = false, any_bar = false;
                for (int j = 0; j < n; j++)
                    for (int q = 0; q < runs[j].n_rows; q++)
                        if (row_in(&runs[j].rows[q], r->suite, r->metric)) {
                            if (on_line(runs, n, &runs[j].rows[q]))
                                any_x = true;
                            else
                                any_bar = true;
                        }
                if (any_x) rc = add_figure(figs, n_figs, r, false, false);
                if (any_bar && !rc) rc = add_figure(figs, n_figs, r, true, any_x);
            }
    free(suites);
    if (rc) {
        bench_figures_free(*figs, *n_figs);
        *figs = NULL;
        *n_figs = 0;
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------
// gnuplot: finding it and its scripts, running it

/* An absolute spelling of PATH in OUT (the current directory put before a relative one): gnuplot
 * runs in the figures' directory, where a relative path would mean something else. */
static bool absolute(const char *path, char *out, size_t len) {
    char cwd[PATH_MAX];
    if (path[0] == '/') return snprintf(out, len, "%s", path) < (int)len;
    return getcwd(cwd, sizeof cwd) && snprintf(out, len, "%s/%s", cwd, path) < (int)len;
}

/* The gnuplot program: $GNUPLOT, or gnuplot on PATH; as an absolute path. */
static bool find_gnuplot(char *out, size_t len) {
    const char *g = getenv("GNUPLOT");
    if (!g || !*g) g = "gnuplot";
    if (strchr(g, '/')) return absolute(g, out, len) && access(out, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *c = strchr(path, ':');
        size_t l = c ? (size_t)(c - path) : strlen(path);
        char p[PATH_MAX];
        if (l && snprintf(p, sizeof p, "%.*s/%s", (int)l, path, g) < (int)sizeof p &&
            access(p, X_OK) == 0)
            return absolute(p, out, len);
        path += l + (c ? 1 : 0);
    }
    return false;
}

static bool has_scripts(const char *dir) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/lines.gp", dir) >= (int)sizeof p || access(p, R_OK)) return false;
    return snprintf(p, sizeof p, "%s/bars.gp", dir) < (int)sizeof p && access(p, R_OK) == 0;
}

/* The directory of lines.gp and bars.gp: $TANDEM_PLOTS_DIR, else plots/ as bench_find_source
 * finds it (an install's, the source tree's, or one beside the program); as an absolute path:
 * gnuplot runs in the figures' directory, and `load` never reads a path from '/' as a command. */
static bool find_scripts(char *out, size_t len) {
    const char *env = getenv("TANDEM_PLOTS_DIR");
    char found[PATH_MAX];
    if (env && *env) {
        snprintf(found, sizeof found, "%s", env);
        if (!has_scripts(found)) return false;
    } else if (!bench_find_source("plots", NULL, has_scripts, found, sizeof found)) {
        return false;
    }
    return absolute(found, out, len);
}

/* A file name as gnuplot must be given it: a relative one starts with "./", so that it can never
 * be a pipe ('<cmd' to read, '|cmd' to write), a special file ('-', '+', '++', '') or an option. */
static void gp_file(char *buf, size_t len, const char *path) {
    snprintf(buf, len, "%s%s", path[0] == '/' ? "" : "./", path);
}

/* Runs `gnuplot VARS SCRIPT` in the directory DIR (VARS: the name there of the file of the
 * figure's variables; SCRIPT: an absolute path); on failure prints gnuplot's output under the
 * message. gnuplot works in DIR, so the files it reads and writes are named by bench's own names
 * (infile, outfile: [A-Za-z0-9._-]): the directory's path, which may hold anything (quotes, a line
 * break, '|'), is never in a gnuplot string. */
static int run_gnuplot(const char *cmd, const char *gp, const char *dir, const char *vars,
                       const char *script, const char *what) {
    FILE *log = tmpfile();
    if (!log) {
        fprintf(stderr, "bench %s: cannot make a temporary file: %s\n", cmd, strerror(errno));
        return 1;
    }
    char vars_arg[PATH_MAX + 2], script_arg[PATH_MAX + 2];
    gp_file(vars_arg, sizeof vars_arg, vars);
    gp_file(script_arg, sizeof script_arg, script);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "bench %s: fork: %s\n", cmd, strerror(errno));
        fclose(log);
        return 1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, 0);
        dup2(fileno(log), 1);
        dup2(fileno(log), 2);
        if (chdir(dir) != 0) {
            fprintf(stderr, "cd %s: %s\n", dir, strerror(errno));
            _exit(127);
        }
        execl(gp, gp, vars_arg, script_arg, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", gp, strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "bench %s: waitpid: %s\n", cmd, strerror(errno));
            fclose(log);
            return 1;
        }
    int rc = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFEXITED(status))
            fprintf(stderr, "bench %s: gnuplot failed (exit %d) drawing %s:\n", cmd,
                    WEXITSTATUS(status), what);
        else
            fprintf(stderr, "bench %s: gnuplot killed by signal %d drawing %s\n", cmd,
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0, what);
        rewind(log);
        char line[512];
        for (int k = 0; k < 30 && fgets(line, sizeof line, log); k++)
            fprintf(stderr, "  gnuplot: %s%s", line, strchr(line, '\n') ? "" : "\n");
        rc = 1;
    }
    fclose(log);
    return rc;
}

/* Text from the results as gnuplot is given it: control characters (line breaks included) as
 * spaces, bytes that are not UTF-8 as '?' (an SVG must be UTF-8), and each ' doubled when QUOTE
 * (inside a single-quoted string). */
static void gp_text(sbuf *b, const char *s, bool quote) {
    for (size_t n = strlen(s); n;) {
        size_t ok = bench_utf8_invalid_at(s, n);  // a run of UTF-8, then a byte that is not
        for (size_t i = 0; i < ok; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x20 || c == 0x7f)
                sb_add(b, " ");
            else if (c == '\'' && quote)
                sb_add(b, "''");
            else
                sb_add(b, "%c", c);
        }
        if (ok < n) {
            sb_add(b, "?");
            ok++;
        }
        s += ok;
        n -= ok;
    }
}

/* A variable assignment of the figure's file of variables: VAR = S as a gnuplot single-quoted
 * string, the one kind of string constant in which gnuplot substitutes nothing (no backslash
 * escapes, no `backquotes`, no @macros): only '' means '. One a line: the line ends with the
 * closing quote, never with a backslash (a continuation). */
static void gp_str(sbuf *b, const char *var, const char *s) {
    sb_add(b, "%s='", var);
    gp_text(b, s, true);
    sb_add(b, "'\n");
}

/* A path as a variable (gp_file's spelling). */
static void gp_path(sbuf *b, const char *var, const char *path) {
    char buf[PATH_MAX + 2];
    gp_file(buf, sizeof buf, path);
    gp_str(b, var, buf);
}

/* A comment line of the data file: "# " and the text (names from the results, made one line:
 * a line break in a directory's name would start a data line). */
static void dat_comment(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dat_comment(sbuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    char *text = k >= 0 ? malloc((size_t)k + 1) : NULL;
    if (text) vsnprintf(text, (size_t)k + 1, fmt, ap2);
    va_end(ap2);
    va_end(ap);
    if (!text) {
        b->oom = true;
        return;
    }
    sb_add(b, "# ");
    gp_text(b, text, false);
    sb_add(b, "\n");
    free(text);
}

static int write_atomic(const char *cmd, const char *path, const char *data, size_t len) {
    if (bench_write_atomic(path, data, len) == 0) return 0;
    fprintf(stderr, "bench %s: %s: %s\n", cmd, path, bench_strerror(errno));
    return 2;
}

static int mkdir_p(const char *cmd, const char *dir) {
    if (bench_mkdir_p(dir) == 0) return 0;
    fprintf(stderr, "bench %s: cannot make the directory '%s': %s\n", cmd, dir, strerror(errno));
    return 2;
}

/* Readies TMP, the file gnuplot draws OUT into: OUT must be absent or a regular file (it is
 * replaced, never written through), and TMP is made new, empty and regular (O_EXCL|O_NOFOLLOW:
 * whatever had its name is removed first), so gnuplot's fopen writes no link's target. */
static int gp_output_ready(const char *cmd, const char *tmp, const char *out) {
    if (bench_check_target(out) != 0) {
        fprintf(stderr, "bench %s: %s: %s\n", cmd, out, bench_strerror(errno));
        return 2;
    }
    struct stat sb;
    if (lstat(tmp, &sb) == 0 && !S_ISDIR(sb.st_mode)) unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "bench %s: %s: %s\n", cmd, tmp, strerror(errno));
        return 1;
    }
    close(fd);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the data of one figure

typedef struct {
    double x, median, min, max;
} point;

static int cmp_point(const void *a, const void *b) {
    double x = ((const point *)a)->x, y = ((const point *)b)->x;
    return (x > y) - (x < y);
}

/* The series a row belongs to: benchmark + its param without the part that is x ("n:512" of
 * "n:512/dtype:f32" when x = 512), whose name is the x axis's name (NULL when none matches). */
static void series_key(const bench_row *r, sbuf *key, sbuf *xname) {
    sb_add(key, "%s", r->benchmark);
    const char *p = r->param;
    bool found = false, first = true;
    while (*p) {
        const char *end = strchr(p, '/');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        char comp[256];
        snprintf(comp, sizeof comp, "%.*s", (int)(l < 255 ? l : 255), p);
        char *colon = strchr(comp, ':');
        double v;
        const char *val = colon ? colon + 1 : comp;
        if (!found && r->has_x && parse_num(val, &v) && fabs(v - r->x) <= 1e-9 * fabs(r->x)) {
            found = true;
            if (colon) {
                *colon = '\0';
                sb_add(xname, "%s", comp);
            }
        } else if (l) {
            sb_add(key, "%s%.*s", first ? " " : "/", (int)l, p);
            first = false;
        }
        p += l + (end ? 1 : 0);
    }
}

static void plot_title(sbuf *a, const bench_results *runs, int n, const bench_figure *f,
                       const char *xname) {
    sbuf t = {0};
    sb_add(&t, "%s: %s", f->suite, f->metric);
    if (xname) sb_add(&t, " vs %s", xname);
    sb_add(&t, " - ");
    for (int i = 0; i < n; i++) sb_add(&t, "%s%s", i ? " vs " : "", runs[i].label);
    int reps = -1;
    bool same = true;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < runs[i].n_rows; k++)
            if (row_in(&runs[i].rows[k], f->suite, f->metric)) {
                if (reps >= 0 && runs[i].rows[k].repetitions != reps) same = false;
                reps = runs[i].rows[k].repetitions;
            }
    gp_str(a, "title", t.p ? t.p : "");
    free(t.p);
    bool emulated = false;
    for (int i = 0; i < n; i++) emulated |= runs[i].emulated;
    char sub[256];
    int k = snprintf(sub, sizeof sub, "%s",
                     emulated ? "EMULATED CUDA device on the CPU: not GPU figures; "
                              : "");
    if (same && reps > 0)
        snprintf(sub + k, sizeof sub - (size_t)k, "median of %d repetition%s; whiskers: min..max",
                 reps, reps == 1 ? "" : "s");
    else
        snprintf(sub + k, sizeof sub - (size_t)k, "median over repetitions; whiskers: min..max");
    gp_str(a, "subtitle", sub);
}

/* A comment line in the data file naming the runs on the emulated device. */
static void dat_emulated(sbuf *dat, const bench_results *runs, int n) {
    for (int i = 0; i < n; i++)
        if (runs[i].emulated)
            dat_comment(dat,
                        "(emulated) %s: timings of the emulated CUDA device on the CPU, not GPU "
                        "figures",
                        runs[i].label);
}

/* Times in ns are drawn in the unit that keeps their numbers short (us, ms, s): the factor from
 * the CSV's values, and the unit drawn in *unit. */
static double time_scale(const bench_results *runs, int n, const bench_figure *f,
                         const char **unit) {
    *unit = f->unit;
    if (strcmp(f->unit, "ns")) return 1;
    double hi = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < runs[i].n_rows; k++)
            if (row_in(&runs[i].rows[k], f->suite, f->metric))
                hi = fmax(hi, runs[i].rows[k].median);
    static const struct {
        double from, scale;
        const char *unit;
    } units[] = {{1e9, 1e-9, "s"}, {1e6, 1e-6, "ms"}, {1e3, 1e-3, "us"}};
    for (int u = 0; u < 3; u++)
        if (hi >= units[u].from) {
            *unit = units[u].unit;
            return units[u].scale;
        }
    return 1;
}

/* A long series (bench check's sustained and pulsed loads: 2 samples a second, 200,000 in a
 * day) is thinned for drawing, as a pixel column can show only its lowest and highest value:
 * past PLOT_MAX_POINTS points, the x range is cut into PLOT_MAX_POINTS / 2 buckets and each
 * keeps the point with its lowest min and the one with its highest max, in x order, so no dip (a
 * throttle) and no spike is lost. gnuplot took 111 s over 200,000 points; the CSV keeps every
 * sample. pts (sorted by x) is thinned in place; the points kept. */
#define PLOT_MAX_POINTS 4000
static int thin_points(point *pts, int np) {
    if (np <= PLOT_MAX_POINTS) return np;
    const int nb = PLOT_MAX_POINTS / 2;
    const double x0 = pts[0].x, span = pts[np - 1].x - pts[0].x;
    int out = 0;
    for (int k = 0; k < np;) {
        // the bucket of pts[k]: every point up to the next bucket's x (by index when x is flat)
        const int b = span > 0 ? (int)fmin(nb - 1, floor((pts[k].x - x0) / span * nb))
                               : (int)((int64_t)k * nb / np);
        int end = k, lo = k, hi = k;
        while (end < np && (span > 0 ? (int)fmin(nb - 1, floor((pts[end].x - x0) / span * nb))
                                     : (int)((int64_t)end * nb / np)) == b) {
            if (pts[end].min < pts[lo].min) lo = end;
            if (pts[end].max > pts[hi].max) hi = end;
            end++;
        }
        const point a = pts[lo < hi ? lo : hi], c = pts[lo < hi ? hi : lo];
        pts[out++] = a;
        if (lo != hi) pts[out++] = c;
        k = end;
    }
    return out;
}

/* bench check's load series (suites sustained and pulsed, x the seconds since the load began):
 * where each phase starts, from the first GPU's series in status.json ("phase" beside "t_s"), as
 * the variables nphase, phx<k> (its first sample's t) and phn<k> (its name, a single-quoted
 * constant): calibrate, stress and power; the pulses' on and off are one phase, pulsed. */
static void load_phases(const bench_results *runs, int n, const bench_figure *f, sbuf *a) {
    const bool pulsed = !strcmp(f->suite, "pulsed");
    if (!pulsed && strcmp(f->suite, "sustained")) return;
    for (int i = 0; i < n; i++) {
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(
                                  cJSON_GetObjectItemCaseSensitive(runs[i].status, "check"), "gpus")) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(g, "series"), pulsed ? "pulsed.load" : "sustained.load");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "t_s");
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "phase");
            if (!cJSON_IsArray(t) || !cJSON_IsArray(p)) continue;
            int k = 0;
            const char *last = NULL;
            for (const cJSON *ti = t->child, *pi = p->child; ti && pi && k < 16; ti = ti->next, pi = pi->next) {
                const char *ph = cJSON_GetStringValue(pi);
                if (!cJSON_IsNumber(ti) || !ph || !isfinite(ti->valuedouble)) continue;
                if (!strcmp(ph, "on") || !strcmp(ph, "off")) ph = "pulsed";
                if (last && !strcmp(last, ph)) continue;
                char var[32];
                k++;
                sb_add(a, "phx%d=%.10g\n", k, ti->valuedouble);
                snprintf(var, sizeof var, "phn%d", k);
                gp_str(a, var, !strcmp(ph, "pulsed") ? "pulsed (1 s on, 1 s off)" : ph);
                last = ph;
            }
            if (k) {
                sb_add(a, "nphase=%d\n", k);
                return;
            }
        }
    }
}

/* Lines: the data file (one block per series) and the gnuplot variables. */
static int lines_data(const bench_results *runs, int n, const bench_figure *f, sbuf *dat, sbuf *a) {
    // distinct series keys, in order of first appearance; the x axis's names
    char **keys = NULL, **xnames = NULL;
    int n_keys = 0, n_xnames = 0, rc = 0;
    for (int i = 0; i < n && !rc; i++)
        for (int k = 0; k < runs[i].n_rows && !rc; k++) {
            const bench_row *r = &runs[i].rows[k];
            if (!row_in(r, f->suite, f->metric) || !on_line(runs, n, r)) continue;
            sbuf key = {0}, xn = {0};
            series_key(r, &key, &xn);
            if (key.oom || xn.oom) rc = 1;
            bool seen = false;
            for (int q = 0; q < n_keys && key.p; q++) seen |= !strcmp(keys[q], key.p);
            if (!seen && key.p && !rc) {
                char **p = realloc(keys, (size_t)(n_keys + 1) * sizeof *p);
                if (p) {
                    keys = p;
                    keys[n_keys++] = key.p;
                    key.p = NULL;
                } else
                    rc = 1;
            }
            seen = !xn.p;
            for (int q = 0; q < n_xnames && xn.p; q++) seen |= !strcmp(xnames[q], xn.p);
            if (!seen && !rc) {
                char **p = realloc(xnames, (size_t)(n_xnames + 1) * sizeof *p);
                if (p) {
                    xnames = p;
                    xnames[n_xnames++] = xn.p;
                    xn.p = NULL;
                } else
                    rc = 1;
            }
            free(key.p);
            free(xn.p);
        }
    sbuf xl = {0};
    for (int q = 0; q < n_xnames; q++) sb_add(&xl, "%s%s", q ? " / " : "", xnames[q]);
    char ylabel[256];
    const char *unit;
    double scale = time_scale(runs, n, f, &unit);
    bench_metric_label(f->metric, unit, ylabel, sizeof ylabel);
    plot_title(a, runs, n, f, xl.p);
    gp_str(a, "xlabel", xl.p ? xl.p : "x");
    gp_str(a, "ylabel", ylabel);
    free(xl.p);

    dat_comment(dat, "tandem bench plot: %s %s (%s), one block per series: x median min max",
                f->suite, f->metric, unit);
    dat_emulated(dat, runs, n);
    static const int point_types[] = {7, 5, 9, 11, 13, 15};
    int n_series = 0;
    double xlo = INFINITY, xhi = 0, ylo = INFINITY, yhi = 0;
    bool xpos = true, ypos = true;
    point *pts = NULL;
    int cap = 0;
    for (int q = 0; q < n_keys && !rc; q++)
        for (int i = 0; i < n && !rc; i++) {
            int np = 0;
            for (int k = 0; k < runs[i].n_rows; k++) {
                const bench_row *r = &runs[i].rows[k];
                if (!row_in(r, f->suite, f->metric) || !on_line(runs, n, r)) continue;
                sbuf key = {0}, xn = {0};
                series_key(r, &key, &xn);
                bool mine = key.p && !strcmp(key.p, keys[q]);
                free(key.p);
                free(xn.p);
                if (!mine) continue;
                if (np == cap) {   // doubling: one more each time was quadratic over a long series
                    point *p = realloc(pts, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *p);
                    if (!p) {
                        rc = 1;
                        break;
                    }
                    pts = p;
                }
                double lo = isfinite(r->min) ? r->min : r->median;
                double hi = isfinite(r->max) ? r->max : r->median;
                pts[np++] = (point){r->x, r->median * scale, lo * scale, hi * scale};
            }
            if (np == 0 || rc) continue;
            qsort(pts, (size_t)np, sizeof *pts, cmp_point);
            const int all = np;
            np = thin_points(pts, np);
            n_series++;
            if (n_series > 1) sb_add(dat, "\n\n");
            dat_comment(dat, "series %d: %s%s%s", n_series, keys[q], n > 1 ? " - " : "",
                        n > 1 ? runs[i].label : "");
            if (np < all)
                dat_comment(dat, "thinned for drawing: %d samples to %d points, the lowest and "
                            "highest of each of %d x buckets (the CSV has every sample)", all, np,
                            PLOT_MAX_POINTS / 2);
            for (int k = 0; k < np; k++) {
                sb_add(dat, "%.10g %.10g %.10g %.10g\n", pts[k].x, pts[k].median, pts[k].min,
                       pts[k].max);
                xpos &= pts[k].x > 0;
                ypos &= pts[k].min > 0 && pts[k].median > 0;
                xlo = fmin(xlo, pts[k].x);
                xhi = fmax(xhi, pts[k].x);
                ylo = fmin(ylo, pts[k].median);
                yhi = fmax(yhi, pts[k].median);
            }
            char var[32], title[512];
            snprintf(title, sizeof title, "%s%s%s", keys[q], n > 1 ? " - " : "",
                     n > 1 ? runs[i].label : "");
            snprintf(var, sizeof var, "t%d", n_series);
            gp_str(a, var, title);
            sb_add(a, "c%d=%d\nd%d=%d\np%d=%d\n", n_series, q + 1, n_series, i + 1, n_series,
                   point_types[i % 6]);
        }
    free(pts);
    sb_add(a, "n=%d\nlogx=%d\nlogy=%d\n", n_series, xpos && xhi >= 50 * xlo ? 1 : 0,
           ypos && yhi >= 100 * ylo ? 1 : 0);
    load_phases(runs, n, f, a);
    for (int q = 0; q < n_keys; q++) free(keys[q]);
    for (int q = 0; q < n_xnames; q++) free(xnames[q]);
    free(keys);
    free(xnames);
    return rc || dat->oom || a->oom ? 1 : 0;
}

/* bench check's bars (suite check: a benchmark per figure, a param per GPU): the judged line of
 * FIGURE on DEVICE in the run's status.json ("check": its expected value, the datasheet's or the
 * fleet's, and the thresholds it was judged by), and the GPU's model; NULL when it has none. */
static const cJSON *check_line(const bench_results *run, const char *device, const char *figure,
                               const char **model) {
    const cJSON *g, *c;
    *model = NULL;
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(run->status, "check"), "gpus");
    cJSON_ArrayForEach(g, gpus) {
        const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device"));
        if (!d || strcmp(d, device)) continue;
        *model = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "model"));
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g, "checks")) {
            const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "check"));
            if (n && !strcmp(n, figure)) return c;
        }
        return NULL;
    }
    return NULL;
}

/* The expected value of a judged line and its WARN and FAIL thresholds as values (its ratios
 * times the expected); NaN where the line has none. */
static void check_marks(const cJSON *line, double m[3]) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(line, "expected");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(line, "thresholds");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(t, "warn"), *f = cJSON_GetObjectItemCaseSensitive(t, "fail");
    double x = cJSON_IsNumber(e) && e->valuedouble > 0 ? e->valuedouble : NAN;
    m[0] = x;
    m[1] = cJSON_IsNumber(w) ? x * w->valuedouble : NAN;
    m[2] = cJSON_IsNumber(f) ? x * f->valuedouble : NAN;
}

/* Bars: one row per benchmark (+ param), three columns (median min max) per run; for bench
 * check's figures (suite check) three more per run: the GPU's expected value (its model's
 * datasheet figure, or the fleet's) and its WARN and FAIL thresholds, marks on its bar. */
static int bars_data(const bench_results *runs, int n, const bench_figure *f, sbuf *dat, sbuf *a) {
    char ylabel[256];
    const char *unit;
    double scale = time_scale(runs, n, f, &unit), ylo = INFINITY, yhi = 0;
    int n_bars = 0;
    const bool check = !strcmp(f->suite, "check");
    bool marks = false;
    bench_metric_label(f->metric, unit, ylabel, sizeof ylabel);
    plot_title(a, runs, n, f, NULL);
    gp_str(a, "ylabel", ylabel);
    dat_comment(dat,
                "tandem bench plot: %s %s (%s); a row per benchmark: its number k (its label, "
                "the variable b<k>, in the comment above it), then median min max of each run:",
                f->suite, f->metric, unit);
    for (int i = 0; i < n; i++) dat_comment(dat, "  run %d: %s", i + 1, runs[i].label);
    if (check)
        dat_comment(dat, "then expected warn fail of each run: the GPU's expected value (its "
                         "model's datasheet, or the fleet's) and its WARN and FAIL thresholds");
    dat_emulated(dat, runs, n);
    for (int i = 0; i < n; i++) {
        char var[32];
        snprintf(var, sizeof var, "t%d", i + 1);
        gp_str(a, var, runs[i].label);
    }
    sb_add(a, "nruns=%d\n", n);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < runs[i].n_rows; k++) {
            const bench_row *r = &runs[i].rows[k];
            if (!row_in(r, f->suite, f->metric) || on_line(runs, n, r)) continue;
            bool seen = false;  // a row of this benchmark + param already written?
            for (int j = 0; j <= i && !seen; j++)
                for (int q = 0; q < (j < i ? runs[j].n_rows : k) && !seen; q++) {
                    const bench_row *o = &runs[j].rows[q];
                    seen = row_in(o, f->suite, f->metric) && !on_line(runs, n, o) &&
                           !strcmp(o->benchmark, r->benchmark) && !strcmp(o->param, r->param);
                }
            if (seen) continue;
            // the label as a variable b<k>, never a string in the data file: gnuplot reads
            // backslash escapes inside a data file's quotes, so a name could end its string
            sbuf label = {0};
            char var[32];
            sb_add(&label, "%s%s%s", r->benchmark, *r->param ? " " : "", r->param);
            // bench check's bars name the GPU's model (the first run's that has one)
            for (int j = 0; j < n && check; j++) {
                const char *model;
                check_line(&runs[j], r->param, r->benchmark, &model);
                if (model) {
                    sb_add(&label, " (%s)", model);
                    break;
                }
            }
            snprintf(var, sizeof var, "b%d", ++n_bars);
            gp_str(a, var, label.p ? label.p : "?");
            dat_comment(dat, "%d: %s", n_bars, label.p ? label.p : "?");
            sb_add(dat, "%d", n_bars);
            free(label.p);
            for (int j = 0; j < n; j++) {
                const bench_row *m = NULL;
                for (int q = 0; q < runs[j].n_rows && !m; q++) {
                    const bench_row *o = &runs[j].rows[q];
                    if (row_in(o, f->suite, f->metric) && !on_line(runs, n, o) &&
                        !strcmp(o->benchmark, r->benchmark) && !strcmp(o->param, r->param))
                        m = o;
                }
                if (m) {
                    sb_add(dat, " %.10g %.10g %.10g", m->median * scale,
                           (isfinite(m->min) ? m->min : m->median) * scale,
                           (isfinite(m->max) ? m->max : m->median) * scale);
                    ylo = fmin(ylo, m->median);
                    yhi = fmax(yhi, m->median);
                } else {
                    sb_add(dat, " NaN NaN NaN");
                }
            }
            for (int j = 0; j < n && check; j++) {
                const char *model;
                double m[3];
                check_marks(check_line(&runs[j], r->param, r->benchmark, &model), m);
                for (int q = 0; q < 3; q++) {
                    if (isfinite(m[q])) sb_add(dat, " %.10g", m[q] * scale);
                    else sb_add(dat, " NaN");
                    marks |= isfinite(m[q]);
                }
            }
            sb_add(dat, "\n");
        }
    sb_add(a, "logy=%d\n", ylo > 0 && yhi >= 100 * ylo ? 1 : 0);
    if (marks) sb_add(a, "spec=1\n");
    return dat->oom || a->oom ? 1 : 0;
}

int bench_plots_dir(const char *cmd, const char *dir, char *out, size_t len) {
    if (snprintf(out, len, "%s/plots", dir) >= (int)len) {
        fprintf(stderr, "bench %s: %s/plots: path too long\n", cmd, dir);
        return 2;
    }
    struct stat sb;
    if (lstat(out, &sb) == 0 && !S_ISDIR(sb.st_mode)) {   // lstat: a link is not followed
        fprintf(stderr, "bench %s: %s: not a directory (%s): the figures go only into a plots "
                "folder of the results directory's own\n", cmd, out,
                S_ISLNK(sb.st_mode) ? "a symbolic link" : bench_strerror(ENOTDIR));
        return 2;
    }
    return 0;
}

int bench_plot_draw(const char *cmd, const bench_results *runs, int n, const bench_figure *figs,
                    int n_figs, const char *outdir, bool verbose) {
    char gp[PATH_MAX], scripts[PATH_MAX];
    if (!find_gnuplot(gp, sizeof gp)) {
        fprintf(stderr,
                "bench %s: gnuplot not found (install gnuplot-nox, or set GNUPLOT to its path)\n",
                cmd);
        return 1;
    }
    if (!find_scripts(scripts, sizeof scripts)) {
        fprintf(stderr,
                "bench %s: cannot find the gnuplot scripts lines.gp and bars.gp (set "
                "TANDEM_PLOTS_DIR to tandem's plots/ directory)\n",
                cmd);
        return 1;
    }
    int rc = mkdir_p(cmd, outdir);
    for (int i = 0; i < n_figs && !rc; i++) {
        const bench_figure *f = &figs[i];
        sbuf dat = {0}, a = {0};
        rc = f->bars ? bars_data(runs, n, f, &dat, &a) : lines_data(runs, n, f, &dat, &a);
        if (rc) fprintf(stderr, "bench %s: out of memory\n", cmd);
        char dpath[PATH_MAX], script[PATH_MAX];
        if (!rc &&
            (snprintf(script, sizeof script, "%s/%s", scripts, f->bars ? "bars.gp" : "lines.gp") >=
                 (int)sizeof script ||
             snprintf(dpath, sizeof dpath, "%s/%s.dat", outdir, f->name) >= (int)sizeof dpath)) {
            fprintf(stderr, "bench %s: %s: path too long\n", cmd, outdir);
            rc = 2;
        }
        // A suite's own script, plots/<suite>.gp, draws its line figures when it exists: it gets
        // lines.gp's variables plus kind ('lines'), metric, runs and scripts (and may set colours
        // and styles, then load lines.gp from `scripts`). Bar charts are bars.gp's. (A CSV named
        // lines.csv or bars.csv is drawn by lines.gp like any suite without a script.)
        char own[PATH_MAX];
        if (!rc && !f->bars && strcmp(f->suite, "lines") && strcmp(f->suite, "bars") &&
            snprintf(own, sizeof own, "%s/%s.gp", scripts, f->suite) < (int)sizeof own &&
            !strchr(f->suite, '/') && access(own, R_OK) == 0) {
            snprintf(script, sizeof script, "%s", own);
            gp_str(&a, "kind", f->bars ? "bars" : "lines");
            gp_str(&a, "metric", f->metric);
            gp_str(&a, "scripts", scripts);
            sb_add(&a, "runs=%d\n", n);
            if (a.oom) {
                fprintf(stderr, "bench %s: out of memory\n", cmd);
                rc = 1;
            }
        }
        if (!rc) rc = write_atomic(cmd, dpath, dat.p, dat.len);
        static const char *const fmts[] = {"png", "svg"};
        for (int k = 0; k < 2 && !rc; k++) {
            // names in outdir (where gnuplot runs) and their paths from here
            char oname[NAME_MAX + 1], tname[NAME_MAX + 32], vname[NAME_MAX + 40],
                dname[NAME_MAX + 8];
            snprintf(oname, sizeof oname, "%s.%s", f->name, fmts[k]);
            snprintf(tname, sizeof tname, "%s.tmp%ld", oname, (long)getpid());
            snprintf(vname, sizeof vname, "%s.gp", tname);
            snprintf(dname, sizeof dname, "%s.dat", f->name);
            char out[PATH_MAX], tmp[PATH_MAX + 32], vars[PATH_MAX + 40];
            snprintf(out, sizeof out, "%s/%s", outdir, oname);
            snprintf(tmp, sizeof tmp, "%s/%s", outdir, tname);
            snprintf(vars, sizeof vars, "%s/%s", outdir, vname);
            // the variables go to gnuplot in a file, not on its command line (-e), which one
            // argument's limit (128 KiB) would cap: many series, or long names, still draw
            sbuf all = {0};
            sb_add(&all, "# tandem bench plot: the variables of %s\n", oname);
            sb_add(&all, "%s", a.p);
            gp_path(&all, "infile", dname);
            gp_path(&all, "outfile", tname);
            gp_str(&all, "fmt", fmts[k]);
            if (all.oom) {
                fprintf(stderr, "bench %s: out of memory\n", cmd);
                rc = 1;
            } else {
                rc = gp_output_ready(cmd, tmp, out);
                if (!rc) rc = write_atomic(cmd, vars, all.p, all.len);
                if (!rc) rc = run_gnuplot(cmd, gp, outdir, vname, script, out);
                unlink(vars);
            }
            free(all.p);
            struct stat sb;
            if (!rc && (stat(tmp, &sb) != 0 || sb.st_size == 0)) {
                fprintf(stderr, "bench %s: gnuplot wrote nothing to %s\n", cmd, out);
                rc = 1;
            }
            if (!rc && bench_commit_temp(tmp, out) != 0) {
                fprintf(stderr, "bench %s: %s: %s\n", cmd, out, bench_strerror(errno));
                rc = 1;
            }
            if (rc) unlink(tmp);
        }
        if (!rc && verbose) printf("%s/%s.png .svg\n", outdir, f->name);
        free(dat.p);
        free(a.p);
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------
// the command

static void plot_usage(FILE *f) {
    fprintf(
        f,
        "usage: bench plot DIR [DIR...] [--out DIR] [--quiet]\n"
        "  Draws the figures of results directories (written by bench run) with gnuplot: for\n"
        "  each suite and each metric of its <suite>.csv one figure, as PNG and SVG: the median\n"
        "  vs x (the benchmark's numeric argument; log scale when it spans decades) with\n"
        "  min..max whiskers, a line per benchmark; benchmarks without a numeric x, or measured\n"
        "  at one x only (--quick), as bars.\n"
        "  Files: <out>/<suite>-<metric>.png, .svg and .dat (the data as plotted), the metric\n"
        "  spelled for file names (GB/s -> GB_per_s; at most 200 characters, -2, -3 added to a\n"
        "  name that repeats another); <suite>-<metric>-bars.* when a metric has both kinds.\n"
        "  One DIR: <out> is DIR/plots. Several DIRs go side by side in one figure,\n"
        "  a series per run labelled by its directory name and device; --out is then required.\n"
        "  --out DIR   where the figures go (made when missing)\n"
        "  --quiet     no line per figure\n"
        "  Environment: GNUPLOT the gnuplot program (default: gnuplot on PATH);\n"
        "  TANDEM_PLOTS_DIR the directory of lines.gp and bars.gp (default: found beside bench);\n"
        "  a suite's line figures are drawn by <that directory>/<suite>.gp when it exists.\n"
        "  Exit: 0 drawn, 1 gnuplot missing or failing, 2 bad arguments or results.\n");
}

int bench_plot(int argc, char **argv) {
    static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *out = NULL;
    bool quiet = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
        switch (c) {
            case 'o':
                out = optarg;
                break;
            case 'q':
                quiet = true;
                break;
            case 'h':
                plot_usage(stdout);
                return 0;
            default:
                plot_usage(stderr);
                return 2;
        }
    }
    int n = argc - optind;
    if (n < 1) {
        fprintf(stderr, "bench plot: no results directory given\n");
        plot_usage(stderr);
        return 2;
    }
    if (n > 1 && !out) {
        fprintf(stderr,
                "bench plot: %d results directories: say where their figures go with "
                "--out DIR\n",
                n);
        return 2;
    }
    bench_results *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "bench plot: out of memory\n");
        return 2;
    }
    int rc = 0, loaded = 0;
    for (; loaded < n && !rc; loaded++)
        rc = bench_results_load("plot", argv[optind + loaded], &runs[loaded]);
    if (rc) loaded--;
    char outdir[PATH_MAX];
    if (!rc) {
        bench_results_label(runs, n);
        if (out)
            snprintf(outdir, sizeof outdir, "%s", out);
        else
            rc = bench_plots_dir("plot", runs[0].dir, outdir, sizeof outdir);
    }
    bench_figure *figs = NULL;
    int n_figs = 0;
    if (!rc && bench_figures_plan(runs, n, &figs, &n_figs)) {
        fprintf(stderr, "bench plot: out of memory\n");
        rc = 2;
    }
    if (!rc && n_figs == 0) {
        fprintf(stderr, "bench plot: no figures to draw: the results have no rows with a median\n");
        rc = 2;
    }
    if (!rc) rc = bench_plot_draw("plot", runs, n, figs, n_figs, outdir, !quiet);
    if (!rc)
        printf("bench plot: %d figure%s (PNG and SVG) in %s\n", n_figs, n_figs == 1 ? "" : "s",
               outdir);
    bench_figures_free(figs, n_figs);
    for (int i = 0; i < loaded; i++) bench_results_free(&runs[i]);
    free(runs);
    return rc;
}

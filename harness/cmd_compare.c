/* cmd_compare.c — `bench compare BASE NEW` and `bench compare --fleet DIR...`.
 *
 * Reads results directories (docs/RESULTS_FORMAT.md): the per-repetition values of every
 * <suite>.samples.csv, and context.json for naming the run. Two runs: per (suite, benchmark,
 * param, metric) in both, change = (median(new) - median(base)) / |median(base)|, the two-sided
 * Mann-Whitney U test over the repetitions (as Google Benchmark's compare.py), and a verdict.
 * Each metric is of one kind (metric_kind): a rate (its name ends in "/s": GB/s, samples/s) is
 * better higher, a time (`time`) lower: faster or slower when p < alpha and |change| >= the
 * threshold, else same. Any other metric is a quantity a suite declares a result (loss,
 * loss_vs_f32, efficiency, peak_bytes): not a speed, possibly signed or near zero, so it is
 * called higher or lower (same below the threshold), never faster, slower or suspect, and it never
 * sets the exit status. A fleet (3 runs or more, one per node): per benchmark and metric, each
 * node's median against the fleet's median, a node flagged as an outlier when it is off by more
 * than the threshold and outside the range of the other nodes' medians. A rate's or time's change
 * too large to be real (a median --max-change times the other's or more, 10 by default: a timing
 * bug, or runs of different machines, sizes or builds) is "suspect": named in a warning, never
 * called faster (nor slower), and the exit is 1, so that no one takes it for an improvement.
 * A run on the emulated CUDA device (emulated.h) is refused, whichever side or fleet member it is:
 * its timings measure the emulator, and no emulated figure goes into a comparison.
 * Over results of `bench check --out`, --fleet first compares the fingerprints of silent data
 * corruption (sdc.train, check_sdc.c): per build, libraries, GPU model, precision, model and
 * steps, the fleet's fingerprint is the majority's, and a node with another DIFFERS; an emulated
 * run is allowed there, labelled, its fingerprints grouped apart (its timings left out).
 * Exit: 0, 1 when a benchmark is significantly slower (two runs) or a node is a slow outlier or
 * its fingerprint differs (fleet), or a change is suspect — so CI can gate on it —, 2 on bad
 * arguments, an unreadable results directory or an emulated run. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "bench.h"
#include "check/check.h"
#include "emulated.h"
#include "fileio.h"
#include "json_strict.h"
#include "stats.h"

// ---- one run's samples ---------------------------------------------------------------------

typedef struct {
    char *suite, *benchmark, *param, *metric, *unit;
    double *v;   // the repetitions' values, in file order
    int n, cap;
    double median;
} series;

typedef struct {
    const char *dir;
    char label[256];   // "host device" from context.json, else the directory's name
    char about[512];   // "host, device, started" for the header
    bool emulated;     // a run on the emulated CUDA device: never compared
    char emulated_why[1024];   // the file and field that say so
    series *s;
    int n, cap;
} run_data;

static void run_free(run_data *r) {
    for (int i = 0; i < r->n; i++) {
        series *s = &r->s[i];
        free(s->suite), free(s->benchmark), free(s->param), free(s->metric), free(s->unit);
        free(s->v);
    }
    free(r->s);
    r->s = NULL;
    r->n = r->cap = 0;
}

static bool same_key(const series *a, const series *b) {
    return !strcmp(a->suite, b->suite) && !strcmp(a->benchmark, b->benchmark) &&
           !strcmp(a->param, b->param) && !strcmp(a->metric, b->metric);
}

static series *run_find(run_data *r, const series *key) {
    for (int i = 0; i < r->n; i++)
        if (same_key(&r->s[i], key)) return &r->s[i];
    return NULL;
}

// Errors go to one buffer as "DIR: what"; the command prints it and exits 2.
static char load_error[1024];
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(load_error, sizeof load_error, fmt, ap);
    va_end(ap);
    return -1;
}

// Splits one CSV line in place (RFC 4180 quoting: "a,b", "" for a quote inside quotes).
// Returns the number of fields, or -1 past max or on an unterminated quote.
static int csv_split(char *line, char **field, int max) {
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) return -1;
        if (*p == '"') {
            char *out = ++p;
            field[n++] = out;
            for (;;) {
                if (*p == '\0') return -1;
                if (*p == '"' && p[1] == '"') {
                    *out++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *out++ = *p++;
                }
            }
            *out = '\0';
            if (*p == ',') {
                p++;
                continue;
            }
            return *p == '\0' ? n : -1;
        }
        field[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma) return n;
        *comma = '\0';
        p = comma + 1;
    }
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

// Adds one value to the run's series for its key (rows of one series are usually adjacent).
static int run_add(run_data *r, char *const key[5], double v) {
    series probe = {.suite = key[0], .benchmark = key[1], .param = key[2], .metric = key[3]};
    series *s = r->n && same_key(&r->s[r->n - 1], &probe) ? &r->s[r->n - 1] : run_find(r, &probe);
    if (!s) {
        if (r->n == r->cap) {
            int cap = r->cap ? 2 * r->cap : 64;
            series *ns = realloc(r->s, (size_t)cap * sizeof *ns);
            if (!ns) return -1;
            r->s = ns;
            r->cap = cap;
        }
        s = &r->s[r->n];
        *s = (series){dup_str(key[0]), dup_str(key[1]), dup_str(key[2]), dup_str(key[3]),
                      dup_str(key[4]), NULL, 0, 0, NAN};
        r->n++;
        if (!s->suite || !s->benchmark || !s->param || !s->metric || !s->unit) return -1;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        double *nv = realloc(s->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

enum { COL_SUITE, COL_BENCHMARK, COL_PARAM, COL_METRIC, COL_UNIT, COL_VALUE, N_COLS };
static const char *const col_names[N_COLS] = {"suite", "benchmark", "param",
                                              "metric", "unit", "value"};

static int load_samples(run_data *r, const char *path) {
    char *text = bench_read_file(path, NULL);
    if (!text) return fail("%s: cannot read: %s", path, bench_strerror(errno));
    int rc = 0, lineno = 0, col[N_COLS];
    enum { MAX_FIELDS = 64 };
    char *f[MAX_FIELDS];
    int nf_header = 0;   // 0 until the header is read
    for (char *line = text, *next; line && *line; line = next) {
        lineno++;
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[--len] = '\0';
        if (!len) continue;
        int nf = csv_split(line, f, MAX_FIELDS);
        if (nf < 0) {
            rc = fail("%s:%d: malformed CSV line", path, lineno);
            break;
        }
        if (!nf_header) {   // the header names the columns
            nf_header = nf;
            for (int c = 0; c < N_COLS; c++) {
                col[c] = -1;
                for (int k = 0; k < nf; k++)
                    if (!strcmp(f[k], col_names[c])) col[c] = k;
                if (col[c] < 0) {
                    rc = fail("%s: no '%s' column in the header (expected suite,benchmark,param,"
                              "x,metric,unit,repetition,value)", path, col_names[c]);
                    break;
                }
            }
            if (rc) break;
            continue;
        }
        if (nf != nf_header) {
            rc = fail("%s:%d: %d fields, the header has %d", path, lineno, nf, nf_header);
            break;
        }
        char *end;
        const char *vs = f[col[COL_VALUE]];
        double v = strtod(vs, &end);
        if (end == vs || *end != '\0' || !isfinite(v)) {
            rc = fail("%s:%d: value '%s' is not a finite number", path, lineno, vs);
            break;
        }
        char *key[5] = {f[col[COL_SUITE]], f[col[COL_BENCHMARK]], f[col[COL_PARAM]],
                        f[col[COL_METRIC]], f[col[COL_UNIT]]};
        if (run_add(r, key, v) != 0) {
            rc = fail("%s: out of memory", path);
            break;
        }
    }
    if (!rc && !nf_header) rc = fail("%s: empty file (no header)", path);
    free(text);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *base_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;   // "dir/" names dir
    const char *s = path + n;
    while (s > path && s[-1] != '/') s--;
    return s;
}

// context.json, when there is one: a check that this is a tandem results directory, and names.
static int load_context(run_data *r) {
    char path[4096];
    snprintf(path, sizeof path, "%s/context.json", r->dir);
    const char *b = base_name(r->dir);
    size_t bl = strlen(b);
    while (bl > 1 && b[bl - 1] == '/') bl--;
    snprintf(r->label, sizeof r->label, "%.*s", (int)bl, b);
    snprintf(r->about, sizeof r->about, "no context.json");
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;   // a directory written by hand: samples are enough
    size_t len = 0;
    char *text = bench_read_file(path, &len);
    if (!text) return fail("%s: cannot read: %s", path, bench_strerror(errno));
    char why[300] = "not an object";
    cJSON *c = bench_json_parse_strict(text, len, false, why, sizeof why);
    free(text);
    if (!c || !cJSON_IsObject(c)) {
        cJSON_Delete(c);
        return fail("%s: not valid JSON: %s", path, why);
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(c, "format");
    if (!cJSON_IsString(fmt) || strncmp(fmt->valuestring, "tandem-results/", 15) != 0) {
        cJSON_Delete(c);
        return fail("%s: not a tandem results context (no \"format\": \"tandem-results/1\")",
                    path);
    }
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(c, "env");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(env, "host");
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(c, "device");
    const cJSON *started = cJSON_GetObjectItemCaseSensitive(c, "started");
    const char *h = cJSON_IsString(host) ? host->valuestring : NULL;
    const char *d = cJSON_IsString(dev) ? dev->valuestring : "?";
    if (h) snprintf(r->label, sizeof r->label, "%s %s", h, d);
    snprintf(r->about, sizeof r->about, "%s, %s, started %s", h ? h : "unknown host", d,
             cJSON_IsString(started) ? started->valuestring : "?");
    cJSON_Delete(c);
    return 0;
}

// Reads a results directory; -1 with load_error set when it is not one.
static int run_load(run_data *r, const char *dir) {
    memset(r, 0, sizeof *r);
    r->dir = dir;
    struct stat sb;
    if (stat(dir, &sb) != 0) return fail("%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return fail("%s: not a directory", dir);
    DIR *d = opendir(dir);
    if (!d) return fail("%s: cannot open: %s", dir, strerror(errno));
    char **names = NULL;
    int nn = 0, cap = 0, rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name), sl = strlen(".samples.csv");
        if (len <= sl || strcmp(e->d_name + len - sl, ".samples.csv") != 0) continue;
        if (nn == cap) {
            cap = cap ? 2 * cap : 16;
            char **nb = realloc(names, (size_t)cap * sizeof *nb);
            if (!nb) {
                rc = fail("%s: out of memory", dir);
                break;
            }
            names = nb;
        }
        if (!(names[nn] = dup_str(e->d_name))) {
            rc = fail("%s: out of memory", dir);
            break;
        }
        nn++;
    }
    closedir(d);
    if (!rc && nn == 0)
        rc = fail("%s: no <suite>.samples.csv in it: not a results directory of `bench run`?", dir);
    if (!rc) rc = load_context(r);
    if (names) qsort(names, (size_t)nn, sizeof *names, cmp_str);   // suites in name order
    for (int i = 0; i < nn && !rc; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = load_samples(r, path);
    }
    for (int i = 0; i < nn; i++) free(names[i]);
    free(names);
    if (!rc && r->n == 0) rc = fail("%s: its samples files hold no values", dir);
    if (!rc) {   // a run on the emulated device: context.json, status.json or the CSVs say so
        int emu = bench_dir_emulated(dir, r->emulated_why, sizeof r->emulated_why);
        if (emu < 0) rc = fail("%s", r->emulated_why);
        r->emulated = emu == 1;
    }
    for (int i = 0; i < r->n; i++) r->s[i].median = bench_median(r->s[i].v, r->s[i].n);
    if (rc) run_free(r);
    return rc;
}

// ---- tables --------------------------------------------------------------------------------

enum { MAX_COLS = 10 };
typedef struct {
    int ncols;
    const char *head[MAX_COLS];
    bool right[MAX_COLS];   // numbers align right
    char *(*cells)[MAX_COLS];
    int n, cap;
} table;

// A row from ncols strings (copied).
static int table_row(table *t, char *const cell[]) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char *(*nc)[MAX_COLS] = realloc(t->cells, (size_t)cap * sizeof *nc);
        if (!nc) return -1;
        t->cells = nc;
        t->cap = cap;
    }
    for (int c = 0; c < t->ncols; c++) t->cells[t->n][c] = dup_str(cell[c] ? cell[c] : "");
    t->n++;
    return 0;
}

static void table_print(const table *t) {
    size_t w[MAX_COLS];
    for (int c = 0; c < t->ncols; c++) {
        w[c] = strlen(t->head[c]);
        for (int r = 0; r < t->n; r++)
            if (t->cells[r][c] && strlen(t->cells[r][c]) > w[c]) w[c] = strlen(t->cells[r][c]);
    }
    for (int r = -1; r < t->n; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *s = r < 0 ? t->head[c] : t->cells[r][c] ? t->cells[r][c] : "";
            bool last = c == t->ncols - 1;
            if (t->right[c]) printf("%*s", (int)w[c], s);
            else if (last) printf("%s", s);
            else printf("%-*s", (int)w[c], s);
            if (!last) printf("  ");
        }
        printf("\n");
    }
}

static void table_free(table *t) {
    for (int r = 0; r < t->n; r++)
        for (int c = 0; c < t->ncols; c++) free(t->cells[r][c]);
    free(t->cells);
}

// "synthetic/matmul/n:512"
static void series_name(const series *s, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s%s%s", s->suite, s->benchmark, s->param[0] ? "/" : "", s->param);
}

// "time (ns)", or the unit alone when it is the metric's name ("GB/s")
static void metric_name(const series *s, char *buf, size_t n) {
    if (!strcmp(s->metric, s->unit) || !s->unit[0]) snprintf(buf, n, "%s", s->metric);
    else snprintf(buf, n, "%s (%s)", s->metric, s->unit);
}

// Appends ", name metric" to a list of at most 5 names (the rest are counted, not named).
static void name_list_add(char *buf, size_t n, int count, const series *s) {
    if (count > 5) return;
    char name[512];
    series_name(s, name, sizeof name);
    size_t l = strlen(buf);
    int w = snprintf(buf + l, n - l, "%s%s %s", l ? ", " : "", name, s->metric);
    if (w < 0 || (size_t)w >= n - l) buf[l] = '\0';   // no room: leave the name out
}

// What a metric measures (docs/RESULTS_FORMAT.md "bench compare"): bench run writes every counter
// whose name ends in "/s" as a metric named by its unit (a rate), Google Benchmark's time as
// `time` (ns), and the plain counters a suite declares results (bench_suite.metrics) under their
// own names: loss_vs_f32 is a signed difference near zero, efficiency a ratio, peak_bytes a size.
typedef enum { METRIC_RATE, METRIC_TIME, METRIC_QUANTITY } metric_kind;

static metric_kind kind_of(const series *s) {
    size_t n = strlen(s->metric);
    if (n > 2 && !strcmp(s->metric + n - 2, "/s")) return METRIC_RATE;
    if (!strcmp(s->metric, "time")) return METRIC_TIME;
    return METRIC_QUANTITY;
}

static bool higher_is_better(const series *s) { return kind_of(s) == METRIC_RATE; }

// The relative change of cur from base: (cur - base) / |base|, so that a signed quantity's change
// has the sign of the difference (-2 from -1 is -100%); 0 when both are 0, NaN when base alone is.
static double rel_change(double base, double cur) {
    if (base != 0) return (cur - base) / fabs(base);
    return cur == 0 ? 0 : NAN;
}

// A change too large to be real: one median max_change times the other or more (or one of them
// zero, or below zero, where the other is not): no code change makes a benchmark that much
// faster, while a timing bug, or runs of different machines, sizes or builds, do. Only for rates
// and times (positive by nature); a quantity (a signed loss difference, a ratio) is never suspect.
static bool implausible(double base, double cur, double max_change) {
    if (base == 0 && cur == 0) return false;
    if (!(base > 0 && cur > 0)) return true;
    double r = cur / base;
    return !(r < max_change && r > 1 / max_change);
}

static bool implausible_change(const series *s, double base, double cur, double max_change) {
    return kind_of(s) != METRIC_QUANTITY && implausible(base, cur, max_change);
}

// The warning that names a suspect change (on stderr; the first 10, then a count).
static void warn_suspect(int n, const char *who, const series *s, double base, double cur,
                         double max_change) {
    if (n > 10) return;
    char name[512];
    series_name(s, name, sizeof name);
    if (n == 10) {
        fprintf(stderr,
                "bench compare: warning: more changes too large to be real (see the "
                "table: suspect)\n");
        return;
    }
    fprintf(stderr,
            "bench compare: warning: %s%s%s %s: %.4g against %.4g is a change by %gx or more: too "
            "large to be real (a timing bug, or runs of different machines, sizes or builds?); "
            "not called faster or slower\n",
            who ? who : "", who ? ": " : "", name, s->metric, cur, base, max_change);
}

// ---- two runs ------------------------------------------------------------------------------

static int compare_two(run_data *base, run_data *cur, double threshold, double alpha,
                       double max_change) {
    printf("base: %s  (%s)\n", base->dir, base->about);
    printf("new:  %s  (%s)\n", cur->dir, cur->about);
    printf("change = (median(new) - median(base)) / |median(base)|; p: Mann-Whitney U test, "
           "two-sided, over the repetitions;\nfaster/slower when p < %g and |change| >= %g%% "
           "(rates: higher is faster; times: lower), else same;\nother metrics (losses, ratios, "
           "sizes) are quantities: higher/lower, never faster, slower or suspect\n\n",
           alpha, 100 * threshold);
    table t = {.ncols = 8,
               .head = {"benchmark", "metric", "base", "new", "change", "p", "reps", "verdict"},
               .right = {false, false, true, true, true, true, true, false}};
    bool *matched = calloc((size_t)cur->n + 1, sizeof *matched);
    if (!matched) {
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    int n_slower = 0, n_faster = 0, n_same = 0, n_suspect = 0, n_low_power = 0, only_base = 0;
    int n_moved = 0;   // quantities called higher or lower
    int low_nb = 0, low_nn = 0;
    char only_base_names[512] = "";
    for (int i = 0; i < base->n; i++) {
        const series *b = &base->s[i];
        series *c = run_find(cur, b);
        char name[512];
        series_name(b, name, sizeof name);
        if (!c) {
            name_list_add(only_base_names, sizeof only_base_names, ++only_base, b);
            continue;
        }
        matched[c - cur->s] = true;
        bench_utest u;
        bench_mann_whitney(b->v, b->n, c->v, c->n, &u);
        double change = rel_change(b->median, c->median);
        const char *verdict = "same";
        bool moved = u.p < alpha && c->median != b->median &&
                     (isfinite(change) ? fabs(change) >= threshold : true);
        if (kind_of(b) == METRIC_QUANTITY) {
            if (moved) verdict = c->median > b->median ? "higher" : "lower";
        } else if (implausible_change(b, b->median, c->median, max_change)) {
            verdict = "suspect";
            warn_suspect(++n_suspect, NULL, b, b->median, c->median, max_change);
        } else if (moved && isfinite(change)) {
            bool better = higher_is_better(b) ? change > 0 : change < 0;
            verdict = better ? "faster" : "slower";
        }
        if (!strcmp(verdict, "slower")) n_slower++;
        else if (!strcmp(verdict, "faster")) n_faster++;
        else if (!strcmp(verdict, "higher") || !strcmp(verdict, "lower")) n_moved++;
        else if (strcmp(verdict, "suspect"))
            n_same++;
        if (bench_utest_min_p(b->n, c->n) >= alpha) {
            n_low_power++;
            low_nb = b->n;
            low_nn = c->n;
        }
        char metric[128], bv[32], nv[32], ch[32], p[32], reps[32];
        metric_name(b, metric, sizeof metric);
        snprintf(bv, sizeof bv, "%.4g", b->median);
        snprintf(nv, sizeof nv, "%.4g", c->median);
        if (isfinite(change)) snprintf(ch, sizeof ch, "%+.1f%%", 100 * change);
        else snprintf(ch, sizeof ch, "n/a");
        snprintf(p, sizeof p, u.p >= 1e-4 ? "%.4f" : "%.1e", u.p);
        snprintf(reps, sizeof reps, "%d/%d", b->n, c->n);
        char *cells[] = {name, metric, bv, nv, ch, p, reps, (char *)verdict};
        if (table_row(&t, cells) != 0) {
            fprintf(stderr, "bench compare: out of memory\n");
            table_free(&t);
            free(matched);
            return 2;
        }
    }
    int only_new = 0;
    char only_new_names[512] = "";
    for (int i = 0; i < cur->n; i++) {
        if (!matched[i])
            name_list_add(only_new_names, sizeof only_new_names, ++only_new, &cur->s[i]);
    }
    free(matched);
    if (t.n) table_print(&t);
    table_free(&t);

    int compared = n_slower + n_faster + n_same + n_suspect + n_moved;
    printf("\n%d compared: %d slower, %d faster, %d same", compared, n_slower, n_faster, n_same);
    if (n_moved) printf(", %d higher or lower (quantities)", n_moved);
    if (n_suspect) printf(", %d suspect", n_suspect);
    printf("\n");
    if (only_base)
        printf("only in base (%d): %s%s\n", only_base, only_base_names,
               only_base > 5 ? ", ..." : "");
    if (only_new)
        printf("only in new (%d): %s%s\n", only_new, only_new_names, only_new > 5 ? ", ..." : "");
    if (n_low_power)
        printf("note: %d comparison%s with %d and %d repetitions cannot reach p < %g (the smallest "
               "p is %.3g): run with --repetitions 9 or more, as compare.py advises\n",
               n_low_power, n_low_power == 1 ? "" : "s", low_nb, low_nn, alpha,
               bench_utest_min_p(low_nb, low_nn));
    if (!compared) {
        fprintf(stderr, "bench compare: %s and %s have no benchmark in common\n", base->dir,
                cur->dir);
        return 2;
    }
    if (n_suspect)
        printf(
            "SUSPECT: %d benchmark%s changed by %gx or more, too much to be real: not called "
            "faster or slower; check that the runs time the same thing on comparable machines\n",
            n_suspect, n_suspect == 1 ? "" : "s", max_change);
    if (n_slower) {
        printf("REGRESSION: %d benchmark%s significantly slower by %g%% or more\n", n_slower,
               n_slower == 1 ? "" : "s", 100 * threshold);
        return 1;
    }
    return n_suspect ? 1 : 0;
}

// ---- a fleet -------------------------------------------------------------------------------

static int compare_fleet(run_data *runs, int nruns, double threshold, double max_change) {
    // the same label twice (two runs of one host): name those runs by their directory
    bool *dup = calloc((size_t)nruns, sizeof *dup);
    if (!dup) {
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    for (int i = 0; i < nruns; i++)
        for (int j = 0; j < nruns; j++) dup[i] |= i != j && !strcmp(runs[i].label, runs[j].label);
    for (int i = 0; i < nruns; i++)
        if (dup[i]) snprintf(runs[i].label, sizeof runs[i].label, "%s", runs[i].dir);
    free(dup);
    printf("fleet of %d runs:\n", nruns);
    for (int i = 0; i < nruns; i++) printf("  %s  (%s)\n", runs[i].dir, runs[i].about);
    printf("each node's median against the fleet's median; an outlier is off by more than %g%% "
           "and outside\nthe range of the other nodes' medians (rates: lower is slower; times: "
           "higher;\nquantities such as losses and ratios: higher or lower, never slow)\n\n",
           100 * threshold);

    table t = {.ncols = 8,
               .head = {"node", "benchmark", "metric", "node", "fleet", "off", "others", "verdict"},
               .right = {false, false, false, true, true, true, true, false}};
    int n_keys = 0, n_few = 0, n_slow = 0, n_fast = 0, n_suspect = 0, n_moved = 0;
    double *med = malloc((size_t)nruns * sizeof *med);
    int *who = malloc((size_t)nruns * sizeof *who);
    if (!med || !who) {
        free(med), free(who);
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    int rc = 0;
    // every key once: in the first run that has it
    for (int r = 0; r < nruns && !rc; r++) {
        for (int k = 0; k < runs[r].n && !rc; k++) {
            const series *key = &runs[r].s[k];
            bool earlier = false;
            for (int q = 0; q < r && !earlier; q++) earlier = run_find(&runs[q], key) != NULL;
            if (earlier) continue;
            int m = 0;
            for (int q = r; q < nruns; q++) {
                const series *s = run_find(&runs[q], key);
                if (s) {
                    med[m] = s->median;
                    who[m++] = q;
                }
            }
            if (m < 3) {
                n_few++;
                continue;
            }
            n_keys++;
            double fleet = bench_median(med, m);
            for (int i = 0; i < m; i++) {
                double lo = INFINITY, hi = -INFINITY;
                for (int j = 0; j < m; j++)
                    if (j != i) {
                        if (med[j] < lo) lo = med[j];
                        if (med[j] > hi) hi = med[j];
                    }
                double off = rel_change(fleet, med[i]);
                bool quantity = kind_of(key) == METRIC_QUANTITY;
                bool suspect = implausible_change(key, fleet, med[i], max_change);  // in range or not
                if (!suspect &&
                    !(isfinite(off) && fabs(off) > threshold && (med[i] < lo || med[i] > hi)))
                    continue;
                bool slow = higher_is_better(key) ? off < 0 : off > 0;
                if (suspect)
                    warn_suspect(++n_suspect, runs[who[i]].label, key, fleet, med[i], max_change);
                else if (quantity)
                    n_moved++;
                else if (slow)
                    n_slow++;
                else n_fast++;
                char name[512], metric[128], nv[32], fv[32], ov[32], range[64];
                series_name(key, name, sizeof name);
                metric_name(key, metric, sizeof metric);
                snprintf(nv, sizeof nv, "%.4g", med[i]);
                snprintf(fv, sizeof fv, "%.4g", fleet);
                if (isfinite(off))
                    snprintf(ov, sizeof ov, "%+.1f%%", 100 * off);
                else
                    snprintf(ov, sizeof ov, "n/a");
                snprintf(range, sizeof range, "%.4g..%.4g", lo, hi);
                char *cells[] = {runs[who[i]].label,
                                 name,
                                 metric,
                                 nv,
                                 fv,
                                 ov,
                                 range,
                                 suspect    ? "suspect"
                                 : quantity ? (off > 0 ? "higher" : "lower")
                                 : slow     ? "slower"
                                            : "faster"};
                if (table_row(&t, cells) != 0) rc = 2;
            }
        }
    }
    free(med);
    free(who);
    if (rc) {
        fprintf(stderr, "bench compare: out of memory\n");
        table_free(&t);
        return 2;
    }
    if (t.n) table_print(&t);
    else printf("no outliers\n");
    table_free(&t);
    printf("\n%d benchmark metrics over %d runs: %d outlier%s (%d slower, %d faster", n_keys,
           nruns, n_slow + n_fast + n_moved, n_slow + n_fast + n_moved == 1 ? "" : "s", n_slow,
           n_fast);
    if (n_moved) printf(", %d higher or lower: quantities", n_moved);
    printf(")");
    if (n_suspect) printf(", %d suspect", n_suspect);
    printf("\n");
    if (n_few) printf("not compared: %d benchmark metrics found in fewer than 3 runs\n", n_few);
    if (!n_keys) {
        fprintf(stderr, "bench compare: no benchmark is in 3 or more of the runs\n");
        return 2;
    }
    if (n_suspect)
        printf(
            "SUSPECT: %d node figure%s %gx or more off the fleet's median, too much to be "
            "real: not called faster or slower; check that run\n",
            n_suspect, n_suspect == 1 ? "" : "s", max_change);
    if (n_slow) {
        printf("SLOW NODE%s: %d benchmark metric%s slower than the fleet by more than %g%%\n",
               n_slow == 1 ? "" : "S", n_slow, n_slow == 1 ? "" : "s", 100 * threshold);
        return 1;
    }
    return n_suspect ? 1 : 0;
}

// ---- --fleet over `bench check --out` results: the fingerprints (silent data corruption) -------
// Each GPU's sdc.train fingerprints (check.h) grouped by what must give the same bits — the
// build, the libraries, the GPU model (and whether it is the emulated device), the precision, the
// model trained and its steps —; per group the fleet's fingerprint is the majority's (more than
// half of the group's GPUs, check_sdc_tally), and a node with a GPU outside it DIFFERS, as every
// node of a group where no fingerprint has a majority. docs/CHECK.md "Silent data corruption".

typedef struct {
    const char *dir;
    char label[300];   // context.json's env.host, else the path given
    cJSON *status;     // status.json, when it has a "check" section (else NULL)
    bool emulated;
    char emulated_why[1024];
} fleet_node;

// Control characters of a recorded string (a terminal escape in a hostile name) printed as '?'.
static void tame(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

// Reads DIR's context.json (its host) and status.json (a "check" section, its sdc records valid);
// -1 with load_error on bad input: not a directory, a file that is not strict JSON, a record
// that cannot be one.
static int fleet_node_read(fleet_node *f, const char *dir) {
    memset(f, 0, sizeof *f);
    f->dir = dir;
    snprintf(f->label, sizeof f->label, "%s", dir);
    tame(f->label);
    struct stat sb;
    if (stat(dir, &sb) != 0) return fail("%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return fail("%s: not a directory (a results directory of `bench check --out`)", dir);
    static const char *const files[] = {"context.json", "status.json"};
    for (int k = 0; k < 2; k++) {
        char path[4200], why[300] = "not an object";
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        if (stat(path, &sb) != 0) continue;
        size_t len = 0;
        char *text = bench_read_file_max(path, 256u << 20, &len);
        if (!text) return fail("%s: cannot read: %s", path, bench_strerror(errno));
        cJSON *j = bench_json_parse_strict(text, len, false, why, sizeof why);
        free(text);
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            return fail("%s: not valid JSON: %s", path, why);
        }
        if (k == 0) {
            const cJSON *host = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "env"), "host");
            if (cJSON_IsString(host) && host->valuestring[0])
                snprintf(f->label, sizeof f->label, "%s", host->valuestring);
            tame(f->label);
            cJSON_Delete(j);
            continue;
        }
        const cJSON *check = cJSON_GetObjectItemCaseSensitive(j, "check");
        if (!check) {   // a run of `bench run`: no fingerprint
            cJSON_Delete(j);
            continue;
        }
        const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(check, "gpus"), *g;
        if (!cJSON_IsObject(check) || !cJSON_IsArray(gpus)) {
            cJSON_Delete(j);
            return fail("%s: check: not a check section (an object with a \"gpus\" array)", path);
        }
        int i = 0;
        cJSON_ArrayForEach(g, gpus) {
            char err[600];
            if (!cJSON_IsObject(g)) {
                cJSON_Delete(j);
                return fail("%s: check.gpus[%d]: must be an object", path, i);
            }
            if (!check_sdc_valid(cJSON_GetObjectItemCaseSensitive(g, "sdc"), i, err, sizeof err)) {
                cJSON_Delete(j);
                return fail("%s: check.%s", path, err);
            }
            i++;
        }
        f->status = j;
    }
    int emu = bench_dir_emulated(dir, f->emulated_why, sizeof f->emulated_why);
    if (emu < 0) {
        cJSON_Delete(f->status);
        f->status = NULL;
        return fail("%s", f->emulated_why);
    }
    f->emulated = emu == 1;
    return 0;
}

static const char *fp_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

// The fingerprints' table: a row per node; returns 1 when a node differs, 0 when none does.
static int compare_fingerprints(fleet_node *nodes, int n) {
    int cap = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(
                                  cJSON_GetObjectItemCaseSensitive(nodes[i].status, "check"), "gpus"))
            cap += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g, "sdc"), "sdc.train"),
                "fingerprints"));
    }
    check_sdc_vote *v = calloc((size_t)(cap ? cap : 1), sizeof *v);
    if (!v) {
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *g, *f;
        int gi = 0;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(
                                  cJSON_GetObjectItemCaseSensitive(nodes[i].status, "check"), "gpus")) {
            cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetObjectItemCaseSensitive(
                                          cJSON_GetObjectItemCaseSensitive(g, "sdc"), "sdc.train"),
                                      "fingerprints")) {
                char steps[32];
                snprintf(steps, sizeof steps, "%.0f",
                         cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "steps")));
                const cJSON *em = cJSON_GetObjectItemCaseSensitive(f, "emulated");
                bool emu = cJSON_IsTrue(em) || nodes[i].emulated;
                // each part prefixed by its length: no two different lists read the same
                const char *part[] = {fp_str(f, "build"),     fp_str(f, "libs"),
                                      fp_str(f, "gpu"),       emu ? "emulated" : "gpu",
                                      fp_str(f, "precision"), fp_str(f, "model"),
                                      steps};
                size_t l = 1;
                for (int q = 0; q < 7; q++) l += strlen(part[q]) + 24;
                char *key = malloc(l);
                if (!key) continue;
                int w = 0;
                for (int q = 0; q < 7; q++)
                    w += snprintf(key + w, l - (size_t)w, "%zu:%s", strlen(part[q]), part[q]);
                v[m++] = (check_sdc_vote){.group = key, .digest = fp_str(f, "digest"), .owner = i,
                                          .sub = gi, .what = fp_str(f, "precision"), .ref = g};
            }
            gi++;
        }
    }
    check_sdc_tally(v, m);
    printf("fingerprints (sdc.train, bench check --level 3): each GPU's against the fleet's, the "
           "majority of the GPUs\nwith the same build, libraries, GPU model, precision, model and "
           "steps\n\n");
    table t = {.ncols = 4, .head = {"node", "fingerprints", "verdict", "detail"},
               .right = {false, true, false, false}};
    int differ = 0, rc = 0;
    char names[600] = "";
    for (int i = 0; i < n && !rc; i++) {
        int nf = 0, compared = 0, bad = 0, k = 0;
        char detail[1500] = "";
        for (int x = 0; x < m; x++) {
            if (v[x].owner != i) continue;
            nf++;
            compared += v[x].size > 1;
            bool ok = v[x].majority && !strcmp(v[x].digest, v[x].major);
            if (v[x].size < 2 || ok) continue;
            bad++;
            const cJSON *g = v[x].ref;
            const char *dev = fp_str(g, "device"), *gpu = fp_str(g, "name");
            int w = v[x].majority
                        ? snprintf(detail + k, sizeof detail - (size_t)k,
                                   "%s%s %s (%s): %.16s, the fleet's %.16s (%d of %d GPUs)",
                                   k ? "; " : "", dev, v[x].what, gpu, v[x].digest, v[x].major,
                                   v[x].majority, v[x].size)
                        : snprintf(detail + k, sizeof detail - (size_t)k,
                                   "%s%s %s (%s): %.16s, no majority in the fleet (%d GPUs, %d "
                                   "with this fingerprint)", k ? "; " : "", dev, v[x].what, gpu,
                                   v[x].digest, v[x].size, v[x].same);
            if (w > 0) k = k + w < (int)sizeof detail ? k + w : (int)sizeof detail - 1;
        }
        const char *verdict = !nodes[i].status ? "no fingerprint (not a bench check result)"
                              : !nf            ? "no fingerprint"
                              : bad            ? "DIFFERS"
                              : compared       ? "matches"
                                               : "not compared";
        if (nf && !bad && !compared)
            snprintf(detail, sizeof detail, "no other GPU in the fleet with the same build, libraries, model and precision");
        char cnt[16], verd[96];
        snprintf(cnt, sizeof cnt, "%d", nf);
        snprintf(verd, sizeof verd, "%s%s", verdict, nodes[i].emulated ? " (EMULATED)" : "");
        tame(detail);
        char *cells[] = {nodes[i].label, cnt, verd, detail};
        if (table_row(&t, cells) != 0) rc = 2;
        if (bad) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, " %s", nodes[i].label);
            differ++;
        }
    }
    for (int x = 0; x < m; x++) free(v[x].group);
    free(v);
    if (rc) {
        table_free(&t);
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    table_print(&t);
    table_free(&t);
    bool emu = false;
    for (int i = 0; i < n; i++) emu = emu || nodes[i].emulated;
    if (emu)
        printf("EMULATED: a run on the emulated device (suites/emu) has the emulated device's bits, "
               "grouped apart from any GPU's (its model differs): they prove the check, not a GPU\n");
    if (differ) printf("DIFFERS: %d of %d nodes have a fingerprint other than the fleet's:%s\n", differ, n, names);
    else printf("AGREE: no node's fingerprint differs from the fleet's (%d nodes)\n", n);
    return differ ? 1 : 0;
}

// --fleet when a directory holds `bench check` results: the fingerprints, then the timings of the
// runs that are not emulated when there are 3 or more of them.
static int fleet_check(char **dirs, int n, double threshold, double max_change, bool *handled) {
    *handled = false;
    fleet_node *nodes = calloc((size_t)n, sizeof *nodes);
    if (!nodes) {
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    int rc = 0, loaded = 0;
    bool any_check = false;
    for (; loaded < n; loaded++) {
        if (fleet_node_read(&nodes[loaded], dirs[loaded]) != 0) {
            fprintf(stderr, "bench compare: %s\n", load_error);
            rc = 2;
            break;
        }
        any_check = any_check || nodes[loaded].status;
    }
    *handled = rc || any_check;
    bool *dup = calloc((size_t)n, sizeof *dup);   // the same host twice: the paths name them
    for (int i = 0; dup && !rc && i < n; i++)
        for (int j = 0; j < n; j++) dup[i] |= i != j && !strcmp(nodes[i].label, nodes[j].label);
    for (int i = 0; dup && !rc && i < n; i++)
        if (dup[i]) {
            snprintf(nodes[i].label, sizeof nodes[i].label, "%s", dirs[i]);
            tame(nodes[i].label);
        }
    free(dup);
    if (!rc && any_check) {
        printf("fleet of %d results:\n", n);
        for (int i = 0; i < n; i++) {
            char d[4096];
            snprintf(d, sizeof d, "%s", dirs[i]);
            tame(d);
            printf("  %s  (%s%s)\n", d, nodes[i].label, nodes[i].emulated ? ", EMULATED" : "");
        }
        printf("\n");
        rc = compare_fingerprints(nodes, n);
        // the timings: of the runs not on the emulated device, when 3 or more
        int nt = 0;
        for (int i = 0; i < n; i++) nt += !nodes[i].emulated;
        printf("\n");
        if (rc != 2 && nt < 3) {
            printf("timings: not compared (%d of the %d runs are not on the emulated device: a "
                   "fleet's timings need 3)\n", nt, n);
        } else if (rc != 2) {
            run_data *runs = calloc((size_t)nt, sizeof *runs);
            int k = 0, trc = runs ? 0 : 2;
            for (int i = 0; i < n && !trc; i++) {
                if (nodes[i].emulated) continue;
                if (run_load(&runs[k], dirs[i]) != 0) {   // no timings there (level 1)
                    printf("timings: not compared: %s\n", load_error);
                    trc = -1;
                    break;
                }
                k++;
            }
            if (!trc) trc = compare_fleet(runs, nt, threshold, max_change);
            for (int i = 0; i < k; i++) run_free(&runs[i]);
            free(runs);
            if (trc >= 0) rc = trc == 2 ? 2 : rc > trc ? rc : trc;
        }
    }
    for (int i = 0; i < loaded; i++) cJSON_Delete(nodes[i].status);
    free(nodes);
    return rc;
}

// ---- --fleet: one run, one node ------------------------------------------------------------
// A fleet's vote counts each directory as a node, so one run named twice — the same path twice,
// a link to it, a bind mount (the same st_dev/st_ino), or a copy — would count twice, and a bad
// node named twice outvotes a healthy one. A copy is the same run when its context.json names the
// same host and start time and the files compare reads (context.json, status.json,
// *.samples.csv) are the same bytes: a run of its own on that host in that second (one per GPU,
// say) writes other samples and fingerprints, so it still counts.

static void free_names(char **v) {
    for (int i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

// The file names compare reads in dir, sorted; NULL-terminated, or NULL with load_error set.
static char **run_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0, cap = 16;
    char **v = d ? calloc((size_t)cap, sizeof *v) : NULL;
    if (!v) {
        if (d) closedir(d);
        fail("%s: cannot open: %s", dir, d ? "out of memory" : strerror(errno));
        return NULL;
    }
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(d));) {
        size_t len = strlen(e->d_name), sl = strlen(".samples.csv");
        if (strcmp(e->d_name, "context.json") && strcmp(e->d_name, "status.json") &&
            (len <= sl || strcmp(e->d_name + len - sl, ".samples.csv")))
            continue;
        if (n + 2 > cap) {
            char **nv = realloc(v, (size_t)(2 * cap) * sizeof *nv);
            if (!(ok = nv != NULL)) break;
            v = nv;
            cap *= 2;
        }
        ok = (v[n] = dup_str(e->d_name)) != NULL;
        n += ok;
    }
    closedir(d);
    v[n] = NULL;
    if (!ok) {
        free_names(v);
        fail("%s: out of memory", dir);
        return NULL;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    return v;
}

// context.json's env.host and started, "" where absent or unreadable.
static void run_host_started(const char *dir, char *host, char *started, size_t n) {
    host[0] = started[0] = '\0';
    char path[4200], why[300];
    snprintf(path, sizeof path, "%s/context.json", dir);
    size_t len = 0;
    char *text = bench_read_file_max(path, 256u << 20, &len);
    cJSON *c = text ? bench_json_parse_strict(text, len, false, why, sizeof why) : NULL;
    free(text);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "env"), "host");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(c, "started");
    if (cJSON_IsString(h) && cJSON_IsString(s) && h->valuestring[0] && s->valuestring[0]) {
        snprintf(host, n, "%s", h->valuestring);
        snprintf(started, n, "%s", s->valuestring);
    }
    cJSON_Delete(c);
}

// 1 when a and b hold the same files compare reads, byte for byte; 0 when not; -1 (load_error)
// when one cannot be read.
static int same_run_files(const char *a, const char *b) {
    char **fa = run_files(a), **fb = fa ? run_files(b) : NULL;
    int same = fa && fb ? 1 : -1;
    for (int i = 0; same == 1 && (fa[i] || fb[i]); i++) {
        if (!fa[i] || !fb[i] || strcmp(fa[i], fb[i])) {
            same = 0;
            break;
        }
        char pa[4200], pb[4200];
        snprintf(pa, sizeof pa, "%s/%s", a, fa[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, fb[i]);
        size_t la = 0, lb = 0;
        char *ta = bench_read_file_max(pa, 256u << 20, &la);
        char *tb = ta ? bench_read_file_max(pb, 256u << 20, &lb) : NULL;
        if (!ta || !tb) same = fail("%s: cannot read: %s", ta ? pb : pa, bench_strerror(errno));
        else if (la != lb || memcmp(ta, tb, la)) same = 0;
        free(ta);
        free(tb);
    }
    free_names(fa);
    free_names(fb);
    return same;
}

// 0 when no run is named twice among dirs; else 2, with a line to stderr naming both.
static int fleet_distinct_runs(char **dirs, int n) {
    struct stat *sb = calloc((size_t)n + 1, sizeof *sb);
    bool *have = calloc((size_t)n + 1, sizeof *have);
    if (!sb || !have) {
        free(sb);
        free(have);
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    int rc = 0;
    for (int i = 0; i < n; i++)   // a path that is not a directory is the loaders' to name
        have[i] = stat(dirs[i], &sb[i]) == 0 && S_ISDIR(sb[i].st_mode);
    for (int i = 0; !rc && i < n; i++) {
        if (!have[i]) continue;
        char hi[300], si[300];
        run_host_started(dirs[i], hi, si, sizeof hi);
        for (int j = 0; !rc && j < i; j++) {
            if (!have[j]) continue;
            char a[1100], b[1100];
            snprintf(a, sizeof a, "%s", dirs[j]);
            snprintf(b, sizeof b, "%s", dirs[i]);
            tame(a);
            tame(b);
            if (sb[i].st_dev == sb[j].st_dev && sb[i].st_ino == sb[j].st_ino) {
                fprintf(stderr, "bench compare: --fleet: %s and %s are the same directory (named "
                        "twice, or through a link): one node would count twice in the fleet's "
                        "vote; name each node's results once\n", a, b);
                rc = 2;
                break;
            }
            if (!hi[0]) continue;
            char hj[300], sj[300];
            run_host_started(dirs[j], hj, sj, sizeof hj);
            if (strcmp(hi, hj) || strcmp(si, sj)) continue;
            int same = same_run_files(dirs[j], dirs[i]);
            if (same < 0) {
                fprintf(stderr, "bench compare: %s\n", load_error);
                rc = 2;
            } else if (same) {
                tame(hi);
                tame(si);
                fprintf(stderr, "bench compare: --fleet: %s and %s are one run (a copy: the same "
                        "host %s and start time %s, and the same context.json, status.json and "
                        "samples): one node would count twice in the fleet's vote; name each "
                        "node's results once\n", a, b, hi, si);
                rc = 2;
            }
        }
    }
    free(sb);
    free(have);
    return rc;
}

// ---- the command ---------------------------------------------------------------------------

static void compare_usage(FILE *f) {
    fprintf(f,
            "usage: bench compare BASE NEW [--threshold PCT] [--alpha A]\n"
            "       bench compare --fleet DIR DIR DIR... [--threshold PCT]\n"
            "       bench compare --fleet CHECKDIR CHECKDIR...   (bench check --out results)\n"
            "  BASE NEW: two results directories of `bench run`. For every benchmark and metric\n"
            "  in both: the medians over the repetitions, change = (new - base) / |base|, the\n"
            "  p-value of the two-sided Mann-Whitney U test over the repetitions (as Google\n"
            "  Benchmark's compare.py), and a verdict: faster or slower when p < A and\n"
            "  |change| >= PCT, same otherwise. Rates (GB/s, GFLOP/s, samples/s) are faster\n"
            "  higher, times lower; other metrics (loss_vs_f32, efficiency, peak_bytes) are\n"
            "  quantities: higher or lower, never faster, slower or suspect.\n"
            "  Use 9 or more repetitions: with 3 per side no p-value is below 0.1.\n"
            "  --fleet: 3 or more runs of the same benchmarks, one per node: each node's median\n"
            "  against the fleet's median; a node off by more than PCT and outside the range of\n"
            "  the other nodes is an outlier, one row per node and benchmark (a slow PCIe link, a\n"
            "  throttled GPU). Over results of `bench check --out` (level 3 or 4), first the\n"
            "  fingerprints of silent data corruption (sdc.train): each GPU's against the fleet's,\n"
            "  the majority of the GPUs with the same build, libraries, GPU model, precision,\n"
            "  model and steps; a row per node: matches, DIFFERS (which GPU and precision), no\n"
            "  fingerprint; 2 or more directories; a run on the emulated device labelled\n"
            "  EMULATED, its timings left out (docs/CHECK.md \"Silent data corruption\").\n"
            "  --threshold PCT  smallest change that counts, in percent (default 5)\n"
            "  --alpha A        significance level of the U test (default 0.05)\n"
            "  --max-change F   a median F times the other's or more is too large to be real:\n"
            "                   \"suspect\", named in a warning, never called faster (default 10)\n"
            "  Exit: 0 no regression; 1 a benchmark significantly slower by PCT or more (fleet:\n"
            "  a slow outlier, or a node whose fingerprint differs), or a suspect change, for CI\n"
            "  to gate on; 2 bad arguments, an unreadable directory or status.json, a malformed\n"
            "  fingerprint, or a run on the emulated CUDA device (the emulator's timings: never\n"
            "  compared; bench check's fingerprints excepted).\n");
}

int bench_compare(int argc, char **argv) {
    static const struct option opts[] = {{"threshold", required_argument, 0, 't'},
                                         {"alpha", required_argument, 0, 'a'},
                                         {"fleet", no_argument, 0, 'f'},
                                         {"max-change", required_argument, 0, 'm'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    double threshold = 0.05, alpha = 0.05, max_change = 10;
    bool fleet = false;
    int c;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:a:m:fh", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            threshold = strtod(optarg, &end);
            if (*end == '%') end++;
            if (end == optarg || *end != '\0' || !(threshold >= 0 && threshold < 1e6)) {
                fprintf(stderr, "bench compare: --threshold '%s': expected a percentage >= 0 "
                                "(5 or 5%%)\n", optarg);
                return 2;
            }
            threshold /= 100;
            break;
        case 'a':
            alpha = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(alpha > 0 && alpha < 1)) {
                fprintf(stderr, "bench compare: --alpha '%s': expected a number in (0, 1)\n",
                        optarg);
                return 2;
            }
            break;
        case 'm':
            max_change = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(max_change > 1 && max_change <= 1e12)) {
                fprintf(stderr,
                        "bench compare: --max-change '%s': expected a factor above 1 "
                        "(10: a median 10x the other's is suspect)\n",
                        optarg);
                return 2;
            }
            break;
        case 'f': fleet = true; break;
        case 'h': compare_usage(stdout); return 0;
        default: compare_usage(stderr); return 2;
        }
    }
    int ndirs = argc - optind;
    if (fleet && fleet_distinct_runs(argv + optind, ndirs) != 0) return 2;
    if (fleet && ndirs >= 2) {   // results of `bench check`: their fingerprints first
        bool handled = false;
        int frc = fleet_check(argv + optind, ndirs, threshold, max_change, &handled);
        if (handled) return frc;
    }
    if (fleet ? ndirs < 3 : ndirs != 2) {
        fprintf(stderr, fleet ? "bench compare: --fleet takes 3 or more results directories "
                                "(got %d)\n"
                              : "bench compare: expected two results directories, BASE and NEW "
                                "(got %d)\n",
                ndirs);
        compare_usage(stderr);
        return 2;
    }
    run_data *runs = calloc((size_t)ndirs, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "bench compare: out of memory\n");
        return 2;
    }
    int rc = 0, loaded = 0;
    for (; loaded < ndirs; loaded++) {
        if (run_load(&runs[loaded], argv[optind + loaded]) != 0) {
            fprintf(stderr, "bench compare: %s\n", load_error);
            rc = 2;
            break;
        }
    }
    for (int i = 0; i < loaded && !rc; i++) {
        if (!runs[i].emulated) continue;
        fprintf(stderr,
                "bench compare: %s %s is a run on the emulated CUDA device (%s): its timings "
                "measure the emulator, not a GPU; no emulated figure goes into a comparison\n",
                fleet ? "fleet member" : i ? "NEW" : "BASE", runs[i].dir, runs[i].emulated_why);
        rc = 2;
    }
    if (!rc)
        rc = fleet ? compare_fleet(runs, ndirs, threshold, max_change)
                   : compare_two(&runs[0], &runs[1], threshold, alpha, max_change);
    for (int i = 0; i < loaded; i++) run_free(&runs[i]);
    free(runs);
    return rc;
}

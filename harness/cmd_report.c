/* cmd_report.c — `bench report DIR`: writes DIR/report.html (self-contained: inline CSS, the plots
 * by relative <img> or, with --embed, inline as data URIs) and DIR/report.md with the same content:
 * the run's context, per suite the first paragraph of its doc page (docs/suites/<suite>.md), its
 * ratio table (harness/suites.h's bench_ratio), its figures and a table of medians with CV and
 * unit (predicted_* rows labelled as predictions), and what was
 * skipped or did not finish (status.json). Draws the plots first (bench plot's code) when absent.
 * Everything taken from the results files is escaped. A run on the emulated CUDA device
 * (emulated.h) gets a banner at the top saying its timings are the emulator's, and every caption,
 * table note and the machine section say emulated; its PyTorch peer table, if any, is left out. */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "check/check.h"
#include "cmd_plot.h"
#include "emulated.h"
#include "fileio.h"
#include "run_peer.h"
#include "suites.h"
#include "tandem/tandem.h"

// ---------------------------------------------------------------------------------------------
// escaping and numbers

static void html(FILE *f, const char *s) {
    for (; s && *s; s++) switch (*s) {
            case '&':
                fputs("&amp;", f);
                break;
            case '<':
                fputs("&lt;", f);
                break;
            case '>':
                fputs("&gt;", f);
                break;
            case '"':
                fputs("&quot;", f);
                break;
            case '\'':
                fputs("&#39;", f);
                break;
            default:
                fputc((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t' ? ' ' : *s, f);
        }
}

/* A relative URL: characters outside [A-Za-z0-9._~-] percent-encoded. */
static void url(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("._~-", c))
            fputc(c, f);
        else
            fprintf(f, "%%%02X", c);
    }
}

/* Markdown text in a table cell or a line: punctuation that means something backslash-escaped,
 * line breaks as spaces. */
static void md(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (strchr("\\`*_[]<>|~&#", *s)) fputc('\\', f);
        fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
    }
}

void bench_html_text(FILE *f, const char *s) {
    html(f, s);
}
void bench_md_text(FILE *f, const char *s) {
    md(f, s);
}

/* A figure in a table: 4 significant digits, whole numbers from 1000 up; "" for NaN. */
static const char *num(double v, char *buf, size_t len) {
    if (!isfinite(v))
        snprintf(buf, len, "%s", isnan(v) ? "" : v > 0 ? "inf" : "-inf");
    else if (fabs(v) >= 1000 && fabs(v) < 1e15)
        snprintf(buf, len, "%.0f", v);
    else
        snprintf(buf, len, "%.4g", v);
    return buf;
}

// ---------------------------------------------------------------------------------------------
// the context as (field, value) rows

typedef struct {
    char *key, *value;
} kv;

typedef struct {
    kv *v;
    int n;
    bool oom;
} kv_list;

static void kv_add(kv_list *l, const char *key, const char *value) {
    if (l->oom) return;
    kv *p = realloc(l->v, (size_t)(l->n + 1) * sizeof *p);
    char *k = strdup(key), *v = strdup(value);
    if (!p || !k || !v) {
        if (p) l->v = p;
        free(k);
        free(v);
        l->oom = true;
        return;
    }
    l->v = p;
    l->v[l->n++] = (kv){k, v};
}

static void kv_free(kv_list *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static bool is_scalar(const cJSON *j) {
    return !cJSON_IsObject(j) && !cJSON_IsArray(j);
}

static void scalar_text(const cJSON *j, char *buf, size_t len) {
    if (cJSON_IsString(j))
        snprintf(buf, len, "%s", j->valuestring);
    else if (cJSON_IsBool(j))
        snprintf(buf, len, "%s", cJSON_IsTrue(j) ? "yes" : "no");
    else if (cJSON_IsNumber(j)) {
        double v = j->valuedouble;
        if (v == floor(v) && fabs(v) < 1e15)
            snprintf(buf, len, "%.0f", v);
        else
            snprintf(buf, len, "%.6g", v);
    } else {
        snprintf(buf, len, "unknown");  // null: bench env could not tell
    }
}

/* Objects become dotted keys, arrays of scalars one value (joined by SEP), other arrays key[i]. */
static void flatten(kv_list *l, const char *prefix, const cJSON *j, const char *sep) {
    char key[512], val[4096];
    if (is_scalar(j)) {
        scalar_text(j, val, sizeof val);
        kv_add(l, prefix, val);
        return;
    }
    if (cJSON_IsArray(j)) {
        bool scalars = true;
        const cJSON *e;
        cJSON_ArrayForEach(e, j) scalars &= is_scalar(e);
        if (scalars) {
            size_t at = 0;
            val[0] = '\0';
            cJSON_ArrayForEach(e, j) {
                char one[1024];
                scalar_text(e, one, sizeof one);
                int k = snprintf(val + at, sizeof val - at, "%s%s", at ? sep : "", one);
                if (k < 0 || (size_t)k >= sizeof val - at) break;
                at += (size_t)k;
            }
            kv_add(l, prefix, cJSON_GetArraySize(j) ? val : "(none)");
            return;
        }
        int i = 0;
        cJSON_ArrayForEach(e, j) {
            snprintf(key, sizeof key, "%s[%d]", prefix, i++);
            flatten(l, key, e, sep);
        }
        return;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "",
                 e->string ? e->string : "?");
        flatten(l, key, e, !strcmp(key, "command") ? " " : ", ");
    }
}

// ---------------------------------------------------------------------------------------------
// Google Benchmark's build type: Debian's libbenchmark is built as a debug library (its JSON
// context says "library_build_type": "debug"); what that means for the figures goes beside the
// machine's context.

// "debug" or "release" from the first <suite>.json of the run that says; NULL when none does.
static char *gbench_build_type(const bench_results *run) {
    for (int s = 0; s < run->n_suites; s++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.json", run->dir, run->suites[s]);
        char *text = bench_read_file(path, NULL);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        free(text);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(j, "context"), "library_build_type");
        char *v = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
        cJSON_Delete(j);
        if (v) return v;
    }
    return NULL;
}

static const char gbench_debug_note[] =
    "Google Benchmark was built as a debug library (library_build_type \"debug\": Debian's "
    "libbenchmark). That touches only its own timing loop, compiled without optimization; the "
    "measured work is tandem's own optimized code, and GPU times are CUDA events' (manual time), "
    "so the effect is a fixed overhead per iteration and per repetition, not a slower kernel. "
    "Measured with the same library on a 2-core x86 VM: an empty benchmark's loop costs under "
    "1 ns per iteration (the loop is inline in the library's header, compiled with tandem's "
    "flags), a manual-time iteration (SetIterationTime, a library call) about 3 ns of CPU, "
    "outside the time it reports: below 0.1% of any tandem benchmark, whose iterations take "
    "microseconds or more.";

// ---------------------------------------------------------------------------------------------
// the two documents

typedef struct {
    const bench_results *run;
    const bench_figure *figs;
    int n_figs;
    const bool *drawn;       // per figure: its PNG and SVG exist
    const char *plots_note;  // why there are no plots, or NULL
    kv_list run_info, machine, clock;
    kv_list issues;  // (suite or benchmark, what happened): skipped, failed, unfinished
    bool embed;
    const bench_results *peer;  // DIR/peer-torch (bench run --peer torch), or NULL
    const char *peer_note;      // why DIR/peer-torch could not be read, or NULL
    char *gbench_build;         // Google Benchmark's library_build_type, or NULL
} report;

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;"
    "max-width:1100px;padding:0 1em;color:#1d1d1f;line-height:1.45}"
    "h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:2em;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;margin:.8em 0;font-size:.92em}"
    "th,td{border:1px solid #d8d8d8;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f3f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "tr.noisy td.cv{background:#fff3cd}"
    "table.kv td:first-child{font-family:ui-monospace,monospace;white-space:nowrap;color:#444}"
    ".banner{padding:.6em 1em;border-radius:6px;margin:1em 0}"
    ".ok{background:#e7f6ec;border:1px solid #9bd3ae}"
    ".bad{background:#fdecea;border:1px solid #f1a9a0}"
    ".emulated{background:#fff3cd;border:2px solid #d39e00;font-weight:600}"
    "figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}"
    "figcaption{font-size:.9em;color:#555}.note{color:#555;font-size:.9em}"
    "code{font-family:ui-monospace,monospace}";

static bool status_bool(const cJSON *status, const char *name, bool *value) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(status, name);
    if (!cJSON_IsBool(j)) return false;
    *value = cJSON_IsTrue(j);
    return true;
}

static int array_size(const cJSON *status, const char *name) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(status, name);
    return cJSON_IsArray(j) ? cJSON_GetArraySize(j) : 0;
}

static const char *str_item(const cJSON *o, const char *name) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* One line about how the run ended, in BUF; *good when it completed with nothing failed. */
static const char *status_line(const report *r, char *buf, size_t len, bool *good) {
    bool complete;
    *good = false;
    int failed = array_size(r->run->status, "failed");
    int lost = array_size(r->run->status, "write_errors");
    if (!r->run->status)
        snprintf(buf, len, "status.json is missing: whether every benchmark finished is unknown.");
    else if (lost)
        snprintf(buf, len,
                 "This run did not complete: %d file%s could not be written (a full disk?) and "
                 "%s only an older version or nothing (see Skipped and unfinished).",
                 lost, lost == 1 ? "" : "s", lost == 1 ? "holds" : "hold");
    else if (!status_bool(r->run->status, "complete", &complete))
        snprintf(buf, len, "status.json does not say whether the run is complete.");
    else if (!complete)
        snprintf(buf, len,
                 "This run did not complete: the benchmarks listed under Skipped and "
                 "unfinished have no results.");
    else if (failed)
        snprintf(buf, len,
                 "The run completed, but %d benchmark%s failed (see Skipped and "
                 "unfinished).",
                 failed, failed == 1 ? "" : "s");
    else {
        *good = true;
        snprintf(buf, len, "The run completed.");
    }
    return buf;
}

/* status.json's skipped, failed and unfinished entries as (what, what happened) rows. An entry
 * is a string (an id) or an object: {"suite", "benchmark"?, "reason"} or {"name", "error"}.
 * Then its write_errors: {"file", "error", "failures", "present"}, a row per file. */
static void status_issues(kv_list *l, const cJSON *status) {
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(status, "write_errors")) {
        const char *file = str_item(w, "file"), *error = str_item(w, "error");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(w, "failures");
        bool present = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "present"));
        char why[1024];
        snprintf(why, sizeof why, "not written: %s (%d failed write%s); %s",
                 error ? error : "unknown error", cJSON_IsNumber(n) ? n->valueint : 1,
                 cJSON_IsNumber(n) && n->valueint == 1 ? "" : "s",
                 present ? "the file is an older version, written whole"
                         : "the file was never written");
        kv_add(l, file ? file : "?", why);
    }
    static const char *const lists[] = {"skipped", "failed", "unfinished"};
    const char *running = str_item(status, "running");
    for (int k = 0; k < 3; k++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(status, lists[k])) {
            char what[1024], why[2048], *json = NULL;
            const char *name = cJSON_IsString(e) ? e->valuestring : str_item(e, "name");
            const char *suite = str_item(e, "suite"), *bm = str_item(e, "benchmark");
            const char *reason = str_item(e, "reason");
            if (!reason) reason = str_item(e, "error");
            if (name)
                snprintf(what, sizeof what, "%s", name);
            else if (suite)
                snprintf(what, sizeof what, "%s%s%s", suite, bm ? "/" : "", bm ? bm : "");
            else
                snprintf(what, sizeof what, "%s", (json = cJSON_PrintUnformatted(e)) ? json : "?");
            free(json);
            if (k == 2)
                snprintf(why, sizeof why, "%s",
                         running && name && !strcmp(running, name)
                             ? "unfinished: the run stopped while it was running"
                             : "unfinished: not run");
            else
                snprintf(why, sizeof why, "%s%s%s", lists[k], reason ? ": " : "",
                         reason ? reason : "");
            kv_add(l, what, why);
        }
    }
}

static void base64(FILE *f, const unsigned char *p, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        fputc(a[v >> 18 & 63], f);
        fputc(a[v >> 12 & 63], f);
        fputc(i + 1 < n ? a[v >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? a[v & 63] : '=', f);
    }
}

static void html_kv(FILE *f, const kv_list *l) {
    fputs("<table class=\"kv\">\n", f);
    for (int i = 0; i < l->n; i++) {
        fputs("<tr><td>", f);
        html(f, l->v[i].key);
        fputs("</td><td>", f);
        html(f, l->v[i].value);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void md_kv(FILE *f, const kv_list *l) {
    fputs("| field | value |\n| --- | --- |\n", f);
    for (int i = 0; i < l->n; i++) {
        fputs("| ", f);
        md(f, l->v[i].key);
        fputs(" | ", f);
        md(f, l->v[i].value);
        fputs(" |\n", f);
    }
    fputc('\n', f);
}

static void fig_caption(const bench_figure *g, bool emulated, char *buf, size_t len) {
    char label[256];
    bench_metric_label(g->metric, g->unit, label, sizeof label);
    snprintf(buf, len, "%s: %s, %s%s", g->suite, label,
             g->bars ? "a bar per benchmark" : "a line per benchmark over its size (x)",
             emulated ? " (emulated: the emulated CUDA device on the CPU, not a GPU)" : "");
}

// What the notes under tables and the machine section add for a run on the emulated device.
static const char emu_table_note[] =
    " Emulated: timings of the emulated CUDA device on the CPU, not GPU figures.";
static const char emu_machine_note[] =
    "The CUDA device of this run (gpus) is the emulated CUDA device: " BENCH_EMU_DEVICE ".";
static const char emu_peer_note[] =
    "Not compared: this run is on the emulated CUDA device, whose timings measure the emulator; "
    "no emulated figure goes into a comparison.";

/* A row's figures in a readable unit: times in ns as us, ms or s from 1000 ns up. */
static const char *row_unit(const bench_row *w, double *scale) {
    *scale = 1;
    if (strcmp(w->unit, "ns") || !isfinite(w->median)) return w->unit;
    double v = fabs(w->median);
    if (v >= 1e9) return *scale = 1e-9, "s";
    if (v >= 1e6) return *scale = 1e-6, "ms";
    if (v >= 1e3) return *scale = 1e-3, "us";
    return w->unit;
}

/* The suite's files in DIR that exist, for links: <suite>.csv, .json, .samples.csv. */
static int suite_files(const char *dir, const char *suite, char names[3][PATH_MAX]) {
    static const char *const ext[] = {".csv", ".json", ".samples.csv"};
    int n = 0;
    for (int k = 0; k < 3; k++) {
        char p[PATH_MAX];
        struct stat sb;
        snprintf(names[n], PATH_MAX, "%s%s", suite, ext[k]);
        snprintf(p, sizeof p, "%s/%s", dir, names[n]);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) n++;
    }
    return n;
}

// ---------------------------------------------------------------------------------------------
// a suite's introduction: the first paragraph of its doc page, and its ratio table

/* The file of a suite's doc page (desc->doc, relative to the source tree) into OUT: under
 * $TANDEM_DOCS_ROOT, else as bench_find_source finds it. False when none is readable. */
static bool find_doc(const char *doc, char *out, size_t len) {
    return bench_find_source(doc, "TANDEM_DOCS_ROOT", NULL, out, len);
}

/* The first paragraph of a Markdown page (headings and blank lines before it skipped), its lines
 * joined by spaces; malloc'd, NULL when there is none. */
static char *first_paragraph(const char *path) {
    char *text = bench_read_file(path, NULL);
    if (!text) return NULL;
    size_t out = 0;
    bool started = false;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' ')) line[--l] = '\0';
        if (!started && (l == 0 || line[0] == '#')) continue;
        if (l == 0 || line[0] == '#') break;
        if (started) text[out++] = ' ';
        memmove(text + out, line, l);   // the paragraph is rebuilt in place, never past `line`
        out += l;
        started = true;
    }
    text[out] = '\0';
    if (!started) {
        free(text);
        return NULL;
    }
    return text;
}

/* TO (a file) relative to the directory FROM, when both resolve; else TO as found. */
static void rel_path(const char *from, const char *to, char *buf, size_t len) {
    char a[PATH_MAX], b[PATH_MAX];
    if (!realpath(from, a) || !realpath(to, b)) {
        snprintf(buf, len, "%s", to);
        return;
    }
    // the longest common run of whole components: "/x/r/run" vs "/x/docs/s.md" share "/x"
    size_t common = 0;
    for (size_t i = 0; a[i] && a[i] == b[i]; i++)
        if (b[i + 1] == '/' && (a[i + 1] == '/' || a[i + 1] == '\0')) common = i + 1;
    size_t at = 0;
    buf[0] = '\0';
    for (const char *s = a + common; *s; s++)  // one ../ per component of FROM past the prefix
        if (*s == '/' && at + 4 < len) at += (size_t)snprintf(buf + at, len - at, "../");
    snprintf(buf + at, len - at, "%s", b + common + 1);
}

/* The median of METRIC of BENCHMARK/PARAM in SUITE (NaN when absent). */
static double median_of(const bench_results *run, const char *suite, const char *benchmark,
                        const char *param, const char *metric) {
    for (int k = 0; k < run->n_rows; k++) {
        const bench_row *w = &run->rows[k];
        if (!strcmp(w->suite, suite) && !strcmp(w->benchmark, benchmark) &&
            !strcmp(w->param, param) && !strcmp(w->metric, metric))
            return w->median;
    }
    return NAN;
}

/* Calls fn for every (ratio, param) of the suite whose two medians exist: the ratio's value. */
static int suite_ratios(const bench_results *run, const bench_suite *desc,
                        void (*fn)(FILE *, const bench_ratio *, const char *, double, double, double),
                        FILE *f) {
    int count = 0;
    for (const bench_ratio *q = desc->ratios; q && q->label; q++)
        for (int k = 0; k < run->n_rows; k++) {
            const bench_row *w = &run->rows[k];
            if (strcmp(w->suite, desc->name) || strcmp(w->benchmark, q->num) ||
                strcmp(w->metric, q->metric) || !isfinite(w->median))
                continue;
            double den = median_of(run, desc->name, q->den, w->param, q->metric);
            if (!isfinite(den) || den == 0) continue;  // its benchmark is missing: no row
            if (fn) fn(f, q, w->param, w->median / den, w->median, den);
            count++;
        }
    return count;
}

static void html_ratio_row(FILE *f, const bench_ratio *q, const char *param, double v, double a,
                           double b) {
    char b1[64], b2[64], b3[64];
    fputs("<tr><td>", f);
    html(f, q->label);
    fputs("</td><td>", f);
    html(f, param);
    fprintf(f, "</td><td class=\"n\">%s</td><td>", num(v, b1, sizeof b1));
    html(f, q->num);
    fprintf(f, " %s / ", num(a, b2, sizeof b2));
    html(f, q->den);
    fprintf(f, " %s (", num(b, b3, sizeof b3));
    html(f, q->metric);
    fputs(")</td></tr>\n", f);
}

static void md_ratio_row(FILE *f, const bench_ratio *q, const char *param, double v, double a,
                         double b) {
    char b1[64], b2[64], b3[64];
    fputs("| ", f);
    md(f, q->label);
    fputs(" | ", f);
    md(f, param);
    fprintf(f, " | %s | ", num(v, b1, sizeof b1));
    md(f, q->num);
    fprintf(f, " %s / ", num(a, b2, sizeof b2));
    md(f, q->den);
    fprintf(f, " %s (", num(b, b3, sizeof b3));
    md(f, q->metric);
    fputs(") |\n", f);
}

/* Markdown's `code` spans as <code>, the rest escaped. */
static void html_inline_md(FILE *f, const char *s) {
    bool code = false;
    for (; *s; s++) {
        if (*s == '`') {
            fputs(code ? "</code>" : "<code>", f);
            code = !code;
        } else {
            char one[2] = {*s, '\0'};
            html(f, one);
        }
    }
    if (code) fputs("</code>", f);
}

/* The summary paragraph (with a link to the page) and the ratio table of a suite. */
static void suite_intro(FILE *f, const bench_results *run, const char *suite, bool as_html) {
    const bench_suite *desc = bench_suite_find(suite);
    if (!desc) return;
    char path[PATH_MAX], link[PATH_MAX];
    char *para = desc->doc && find_doc(desc->doc, path, sizeof path) ? first_paragraph(path) : NULL;
    if (para) rel_path(run->dir, path, link, sizeof link);
    if (as_html) {
        fputs("<p>", f);
        if (para) {
            html_inline_md(f, para);
            fputs(" <a href=\"", f);
            html(f, link);
            fputs("\">More: ", f);
            html(f, desc->doc);
            fputs("</a>", f);
        } else {
            html(f, desc->description);
        }
        fputs("</p>\n", f);
    } else {
        if (para) {
            fprintf(f, "%s [More: ", para);
            md(f, desc->doc);
            fprintf(f, "](%s)\n\n", link);  // a path of the source tree
        } else {
            md(f, desc->description);
            fputs("\n\n", f);
        }
    }
    free(para);
    if (!suite_ratios(run, desc, NULL, f)) return;
    if (as_html) {
        fputs("<table>\n<tr><th>ratio</th><th>param</th><th>value</th><th>medians</th></tr>\n", f);
        suite_ratios(run, desc, html_ratio_row, f);
        fputs("</table>\n<p class=\"note\">Ratios of the medians of two benchmarks at the same "
              "param; a ratio whose benchmarks did not both run is left out.</p>\n", f);
    } else {
        fputs("| ratio | param | value | medians |\n| --- | --- | ---: | --- |\n", f);
        suite_ratios(run, desc, md_ratio_row, f);
        fputs("\nRatios of the medians of two benchmarks at the same param; a ratio whose "
              "benchmarks did not both run is left out.\n\n", f);
    }
}

/* Benchmarks named predicted_* hold a model's predictions, not measurements. */
static bool is_prediction(const bench_row *w) { return !strncmp(w->benchmark, "predicted_", 10); }
// ---------------------------------------------------------------------------------------------
// the PyTorch peer (DIR/peer-torch, docs/PEERS.md): tandem's median over PyTorch's, per benchmark,
// for its main metric (its first rate, a counter in "/s"; else time)

typedef struct {
    const bench_row *t, *p;  // tandem's row, PyTorch's (NULL: not in the peer's run)
} peer_pair;

static bool same_bench(const bench_row *a, const bench_row *b) {
    return !strcmp(a->suite, b->suite) && !strcmp(a->benchmark, b->benchmark) &&
           !strcmp(a->param, b->param);
}

static bool is_rate(const bench_row *w) {
    size_t n = strlen(w->unit);
    return n > 2 && !strcmp(w->unit + n - 2, "/s");
}

/* The main metric's row of the benchmark of row k (the first rate in CSV order, else time). */
static const bench_row *main_row(const bench_results *run, int k) {
    const bench_row *time_row = NULL;
    for (int i = 0; i < run->n_rows; i++) {
        const bench_row *w = &run->rows[i];
        if (!same_bench(w, &run->rows[k])) continue;
        if (is_rate(w)) return w;
        if (!strcmp(w->metric, "time") && !time_row) time_row = w;
    }
    return time_row;
}

/* One pair per tandem benchmark (*n), and how many of the peer's have no tandem counterpart. */
// The reason the peer recorded for not running t's benchmark (its status.json "skipped": {suite,
// benchmark "name/param", reason}), or NULL: a missing PyTorch result that is explained.
static const char *peer_skip_reason(const bench_results *peer, const bench_row *t) {
    if (!peer || !peer->status) return NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(peer->status, "skipped")) {
        const char *suite = str_item(e, "suite"), *bm = str_item(e, "benchmark");
        const char *reason = str_item(e, "reason");
        const size_t n = strlen(t->benchmark);
        if (suite && bm && reason && !strcmp(suite, t->suite) && !strncmp(bm, t->benchmark, n) &&
            bm[n] == '/' && !strcmp(bm + n + 1, t->param))
            return reason;
    }
    return NULL;
}

static peer_pair *peer_pairs(const bench_results *run, const bench_results *peer, int *n,
                             int *only_peer) {
    peer_pair *v = calloc((size_t)run->n_rows + 1, sizeof *v);
    *n = *only_peer = 0;
    if (!v) return NULL;
    for (int k = 0; k < run->n_rows; k++) {
        const bench_row *m = main_row(run, k);
        if (m != &run->rows[k]) continue;  // each benchmark once, at its main metric's row
        v[*n] = (peer_pair){m, NULL};
        for (int i = 0; i < peer->n_rows; i++)
            if (same_bench(&peer->rows[i], m) && !strcmp(peer->rows[i].metric, m->metric))
                v[*n].p = &peer->rows[i];
        (*n)++;
    }
    for (int k = 0; k < peer->n_rows; k++) {
        if (main_row(peer, k) != &peer->rows[k]) continue;
        bool found = false;
        for (int i = 0; i < run->n_rows && !found; i++) found = same_bench(&run->rows[i], &peer->rows[k]);
        *only_peer += !found;
    }
    return v;
}

/* "1.8x slower" / "2.1x faster" / "same" for tandem, from the ratio of a metric. */
static const char *peer_reading(const bench_row *t, double ratio, char *buf, size_t len) {
    if (!isfinite(ratio) || ratio <= 0) return snprintf(buf, len, "%s", ""), buf;
    double speed = is_rate(t) ? ratio : 1 / ratio;  // > 1: tandem faster
    if (fabs(speed - 1) < 0.005) {
        snprintf(buf, len, "same");
    } else {
        double x = speed >= 1 ? speed : 1 / speed;  // 1.05x, 12.2x, 2750x: no exponents
        snprintf(buf, len, x >= 100 ? "tandem %.0fx %s" : "tandem %.3gx %s", x,
                 speed >= 1 ? "faster" : "slower");
    }
    return buf;
}

/* "PyTorch 2.11.0 (CUDA 13.0, cuDNN 91000) on cuda:0, NVIDIA H100" from the peer's context. */
static void peer_about(const bench_results *peer, char *buf, size_t len) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(peer->context, "peer");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(peer->context, "env");
    const cJSON *gpu = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(env, "gpus"), 0);
    const char *ver = str_item(p, "torch_version"), *cuda = str_item(p, "cuda");
    const char *gname = peer->device && strncmp(peer->device, "cuda", 4) == 0
                            ? str_item(gpu, "name") : NULL;
    const cJSON *cudnn = cJSON_GetObjectItemCaseSensitive(p, "cudnn");
    const cJSON *threads = cJSON_GetObjectItemCaseSensitive(p, "threads");
    int k = snprintf(buf, len, "PyTorch %s", ver ? ver : "(version unknown)");
    if (cuda && k > 0 && (size_t)k < len)
        k += snprintf(buf + k, len - (size_t)k, " (CUDA %s%s%.0f)", cuda,
                      cJSON_IsNumber(cudnn) ? ", cuDNN " : "",
                      cJSON_IsNumber(cudnn) ? cudnn->valuedouble : 0.0);
    if (k > 0 && (size_t)k < len)
        k += snprintf(buf + k, len - (size_t)k, " on %s%s%s",
                      peer->device ? peer->device : "?", gname ? ", " : "", gname ? gname : "");
    if (cJSON_IsNumber(threads) && k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, ", %.0f CPU thread%s", threads->valuedouble,
                 threads->valuedouble == 1 ? "" : "s");
}

static const char peer_intro[] =
    "The same benchmarks through PyTorch (bench run --peer torch; docs/PEERS.md): the median of "
    "each benchmark's main metric (its rate, else its time) in tandem's run and in PyTorch's, and "
    "their ratio tandem / PyTorch. For a rate a ratio above 1 means tandem is faster; for a time, "
    "below 1.";

static void peer_html(FILE *f, const report *r) {
    fputs("<h2 id=\"peer\">tandem and PyTorch</h2>\n", f);
    if (!r->peer || r->run->emulated) {
        fputs("<p class=\"note\">", f);
        html(f, r->run->emulated ? emu_peer_note : r->peer_note);
        fputs("</p>\n", f);
        return;
    }
    char about[512], b1[64], b2[64], b3[64], rd[64];
    peer_about(r->peer, about, sizeof about);
    fputs("<p>", f);
    html(f, peer_intro);
    fputs("</p>\n<p class=\"note\">", f);
    html(f, about);
    fputs(". Results: <a href=\"" BENCH_PEER_DIR "/\">" BENCH_PEER_DIR "/</a>.</p>\n", f);
    int n, only_peer;
    peer_pair *v = peer_pairs(r->run, r->peer, &n, &only_peer);
    fputs("<table>\n<tr><th>benchmark</th><th>metric</th><th>tandem</th><th>PyTorch</th>"
          "<th>unit</th><th>tandem / PyTorch</th><th>reading</th></tr>\n", f);
    int missing = 0, skipped = 0;
    for (int i = 0; v && i < n; i++) {
        const bench_row *t = v[i].t, *p = v[i].p;
        double sc, ratio = p && p->median != 0 ? t->median / p->median : NAN;
        const char *unit = row_unit(t, &sc);
        const char *skip = p ? NULL : peer_skip_reason(r->peer, t);
        missing += !p && !skip;
        skipped += skip != NULL;
        fputs("<tr><td>", f);
        html(f, t->suite);
        fputs("/", f);
        html(f, t->benchmark);
        if (t->param[0]) fputs("/", f);
        html(f, t->param);
        fputs("</td><td>", f);
        html(f, t->metric);
        fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n\">", num(t->median * sc, b1, sizeof b1));
        if (skip) {
            fputs("skipped: ", f);
            html(f, skip);
        } else {
            fputs(p ? num(p->median * sc, b2, sizeof b2) : "not run", f);
        }
        fputs("</td><td>", f);
        html(f, unit);
        fprintf(f, "</td><td class=\"n\">%s</td><td>%s</td></tr>\n",
                p ? num(ratio, b3, sizeof b3) : "", peer_reading(t, ratio, rd, sizeof rd));
    }
    fputs("</table>\n", f);
    if (missing || only_peer)
        fprintf(f, "<p class=\"note\">%d of tandem's benchmarks have no PyTorch result; %d of "
                   "PyTorch's have no tandem result (different names, or not run).</p>\n",
                missing, only_peer);
    if (skipped)
        fprintf(f, "<p class=\"note\">%d of tandem's benchmarks have a PyTorch counterpart the "
                   "peer skipped, its reason in the table.</p>\n", skipped);
    free(v);
}

static void peer_md(FILE *f, const report *r) {
    fputs("## tandem and PyTorch\n\n", f);
    if (!r->peer || r->run->emulated) {
        md(f, r->run->emulated ? emu_peer_note : r->peer_note);
        fputs("\n\n", f);
        return;
    }
    char about[512], b1[64], b2[64], b3[64], rd[64];
    peer_about(r->peer, about, sizeof about);
    md(f, peer_intro);
    fputs("\n\n", f);
    md(f, about);
    fputs(". Results: " BENCH_PEER_DIR "/.\n\n", f);
    int n, only_peer;
    peer_pair *v = peer_pairs(r->run, r->peer, &n, &only_peer);
    fputs("| benchmark | metric | tandem | PyTorch | unit | tandem / PyTorch | reading |\n"
          "| --- | --- | ---: | ---: | --- | ---: | --- |\n", f);
    int missing = 0, skipped = 0;
    for (int i = 0; v && i < n; i++) {
        const bench_row *t = v[i].t, *p = v[i].p;
        double sc, ratio = p && p->median != 0 ? t->median / p->median : NAN;
        const char *unit = row_unit(t, &sc);
        const char *skip = p ? NULL : peer_skip_reason(r->peer, t);
        missing += !p && !skip;
        skipped += skip != NULL;
        fputs("| ", f);
        md(f, t->suite);
        fputs("/", f);
        md(f, t->benchmark);
        if (t->param[0]) fputs("/", f);
        md(f, t->param);
        fputs(" | ", f);
        md(f, t->metric);
        fprintf(f, " | %s | ", num(t->median * sc, b1, sizeof b1));
        if (skip) {
            fputs("skipped: ", f);
            md(f, skip);
        } else {
            fputs(p ? num(p->median * sc, b2, sizeof b2) : "not run", f);
        }
        fputs(" | ", f);
        md(f, unit);
        fprintf(f, " | %s | %s |\n", p ? num(ratio, b3, sizeof b3) : "",
                peer_reading(t, ratio, rd, sizeof rd));
    }
    fputc('\n', f);
    if (missing || only_peer)
        fprintf(f, "%d of tandem's benchmarks have no PyTorch result; %d of PyTorch's have no "
                   "tandem result (different names, or not run).\n\n", missing, only_peer);
    if (skipped)
        fprintf(f, "%d of tandem's benchmarks have a PyTorch counterpart the peer skipped, its "
                   "reason in the table.\n\n", skipped);
    free(v);
}
static void profile_section(FILE *f, const char *dir, bool as_html);   // the top ops, below

static int write_html(FILE *f, const report *r) {
    const bench_results *run = r->run;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", f);
    fputs(
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
        "tandem bench report: ",
        f);
    html(f, run->label);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>tandem bench report</h1>\n",
            css);
    if (run->emulated) fputs("<div class=\"banner emulated\">" BENCH_EMU_BANNER ".</div>\n", f);
    check_report_table(f, run->dir, true);   // a `bench check --out` directory: its verdicts first
    fputs("<p>", f);
    html(f, run->label);
    const char *started = str_item(run->context, "started");
    if (started) {
        fputs(" &middot; started ", f);
        html(f, started);
    }
    fputs("</p>\n", f);
    bool good;
    char line_buf[256];
    const char *line = status_line(r, line_buf, sizeof line_buf, &good);
    fprintf(f, "<div class=\"banner %s\">", good ? "ok" : "bad");
    html(f, line);
    fputs("</div>\n<p>Contents: <a href=\"#run\">Run</a> &middot; <a href=\"#machine\">Machine</a>",
          f);
    for (int s = 0; s < run->n_suites; s++) {
        fputs(" &middot; <a href=\"#suite-", f);
        html(f, run->suites[s]);
        fputs("\">", f);
        html(f, run->suites[s]);
        fputs("</a>", f);
    }
    if (r->peer || r->peer_note) fputs(" &middot; <a href=\"#peer\">tandem and PyTorch</a>", f);
    fputs(" &middot; <a href=\"#status\">Skipped and unfinished</a></p>\n", f);

    fputs("<h2 id=\"run\">Run</h2>\n", f);
    if (r->run_info.n)
        html_kv(f, &r->run_info);
    else
        fputs("<p class=\"note\">context.json is missing.</p>\n", f);
    fputs("<h2 id=\"machine\">Machine</h2>\n", f);
    if (run->emulated) fprintf(f, "<p class=\"banner emulated\">%s</p>\n", emu_machine_note);
    if (r->machine.n)
        html_kv(f, &r->machine);
    else
        fputs("<p class=\"note\">No machine context (context.json has no env).</p>\n", f);
    if (r->gbench_build && !strcmp(r->gbench_build, "debug"))
        fprintf(f, "<p class=\"note\" id=\"gbench-debug\">%s</p>\n", gbench_debug_note);

    char b1[64], b2[64], b3[64], b4[64];
    for (int s = 0; s < run->n_suites; s++) {
        const char *suite = run->suites[s];
        fputs("<h2 id=\"suite-", f);
        html(f, suite);
        fputs("\">Suite ", f);
        html(f, suite);
        fputs("</h2>\n", f);
        suite_intro(f, run, suite, true);
        char files[3][PATH_MAX];
        int nf = suite_files(run->dir, suite, files);
        for (int k = 0; k < nf; k++) {
            fputs(k ? " &middot; " : "<p class=\"note\">Results: ", f);
            fputs("<a href=\"", f);
            url(f, files[k]);
            fputs("\">", f);
            html(f, files[k]);
            fputs("</a>", f);
        }
        if (nf) fputs("</p>\n", f);
        if (r->plots_note) {
            fputs("<p class=\"note\">No plots: ", f);
            html(f, r->plots_note);
            fputs("</p>\n", f);
        }
        for (int i = 0; i < r->n_figs; i++) {
            const bench_figure *g = &r->figs[i];
            if (strcmp(g->suite, suite) || !r->drawn[i]) continue;
            char cap[512];
            fig_caption(g, run->emulated, cap, sizeof cap);
            fputs("<figure>", f);
            if (r->embed) {
                char path[PATH_MAX];
                size_t len;
                snprintf(path, sizeof path, "%s/plots/%s.png", run->dir, g->name);
                unsigned char *png = (unsigned char *)bench_read_file(path, &len);
                if (!png) {
                    fprintf(stderr, "bench report: %s: %s\n", path, bench_strerror(errno));
                    return 2;
                }
                fputs("<img src=\"data:image/png;base64,", f);
                base64(f, png, len);
                free(png);
            } else {
                fputs("<a href=\"plots/", f);
                html(f, g->name);
                fputs(".png\"><img src=\"plots/", f);
                html(f, g->name);
                fputs(".svg", f);
            }
            fputs("\" alt=\"", f);
            html(f, cap);
            fputs(r->embed ? "\">" : "\"></a>", f);
            fputs("<figcaption>", f);
            html(f, cap);
            fputs(". Median of the repetitions, whiskers from the minimum to the maximum.", f);
            fputs("</figcaption></figure>\n", f);
        }
        int rows = 0;
        for (int k = 0; k < run->n_rows; k++) rows += !strcmp(run->rows[k].suite, suite);
        if (!rows) {
            fputs("<p class=\"note\">No results in this suite's CSV.</p>\n", f);
            continue;
        }
        fputs(
            "<table>\n<tr><th>benchmark</th><th>param</th><th>metric</th><th>median</th>"
            "<th>unit</th><th>CV</th><th>min</th><th>max</th><th>repetitions</th></tr>\n",
            f);
        for (int k = 0; k < run->n_rows; k++) {
            const bench_row *w = &run->rows[k];
            if (strcmp(w->suite, suite)) continue;
            bool noisy = isfinite(w->cv) && w->cv > 0.05;
            fprintf(f, "<tr%s><td>", noisy ? " class=\"noisy\"" : "");
            html(f, w->benchmark);
            if (is_prediction(w)) fputs(" <em>(prediction, not measured)</em>", f);
            fputs("</td><td>", f);
            html(f, w->param);
            fputs("</td><td>", f);
            html(f, w->metric);
            double sc;
            const char *unit = row_unit(w, &sc);
            fprintf(f, "</td><td class=\"n\">%s</td><td>", num(w->median * sc, b1, sizeof b1));
            html(f, unit);
            if (isfinite(w->cv))
                snprintf(b2, sizeof b2, "%.1f%%", 100 * w->cv);
            else
                b2[0] = '\0';
            fprintf(f,
                    "</td><td class=\"n cv\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s"
                    "</td><td class=\"n\">%d</td></tr>\n",
                    b2, num(w->min * sc, b3, sizeof b3), num(w->max * sc, b4, sizeof b4),
                    w->repetitions);
        }
        fputs(
            "</table>\n<p class=\"note\">CV: the coefficient of variation (standard deviation "
            "over mean) of the repetitions; highlighted above 5%. GB/s are 1e9 bytes read + "
            "written per second within one memory, link_GB/s 1e9 bytes crossing the link per "
            "second, GFLOP/s 1e9 floating-point operations per second.",
            f);
        fprintf(f, "%s</p>\n", run->emulated ? emu_table_note : "");
    }

    if (r->peer || r->peer_note) peer_html(f, r);
    profile_section(f, run->dir, true);
    fputs("<h2 id=\"status\">Skipped and unfinished</h2>\n", f);
    int n_fin = array_size(run->status, "finished");
    if (run->status) fprintf(f, "<p>%d benchmark%s finished.</p>\n", n_fin, n_fin == 1 ? "" : "s");
    if (r->issues.n) {
        fputs("<table>\n<tr><th>suite or benchmark</th><th>what happened</th></tr>\n", f);
        for (int i = 0; i < r->issues.n; i++) {
            fputs("<tr><td><code>", f);
            html(f, r->issues.v[i].key);
            fputs("</code></td><td>", f);
            html(f, r->issues.v[i].value);
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    } else {
        fputs(run->status ? "<p>Nothing was skipped; nothing failed or was left unfinished.</p>\n"
                          : "<p>Unknown (no status.json).</p>\n",
              f);
    }
    if (r->clock.n) {
        fputs("<h3>Clock check</h3>\n", f);
        html_kv(f, &r->clock);
    }
    fputs("<hr>\n<p class=\"note\">Written by <code>bench report</code> (", f);
    html(f, tdm_build_info());
    fputs(") from ", f);
    html(f, run->dir);
    fputs(".</p>\n</body>\n</html>\n", f);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// profiles: the top ops of each profiled benchmark (bench run --profile; docs/PROFILING.md)

#define PROFILE_TOP 10

// Prints a "Top ops" section from DIR/profiles/*.table.json (nothing when there are none), as
// HTML or Markdown: per benchmark its first PROFILE_TOP rows (the table is sorted already).
static void profile_section(FILE *f, const char *dir, bool as_html) {
    char pattern[PATH_MAX];
    snprintf(pattern, sizeof pattern, "%s/profiles/*.table.json", dir);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return;
    fputs(as_html ? "<h2 id=\"profiles\">Top ops (profiled)</h2>\n"
                    "<p class=\"note\">One untimed run per benchmark under the profiler "
                    "(<code>bench run --profile</code>); traces beside the tables in "
                    "<code>profiles/</code>, to open in ui.perfetto.dev.</p>\n"
                  : "## Top ops (profiled)\n\nOne untimed run per benchmark under the profiler "
                    "(bench run --profile); traces beside the tables in profiles/, to open in "
                    "ui.perfetto.dev.\n\n",
          f);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char *text = bench_read_file(g.gl_pathv[i], NULL);
        cJSON *t = text ? cJSON_Parse(text) : NULL;
        free(text);
        const cJSON *bm = cJSON_GetObjectItemCaseSensitive(t, "benchmark");
        const cJSON *rows = cJSON_GetObjectItemCaseSensitive(t, "rows");
        if (!cJSON_IsString(bm) || !cJSON_IsArray(rows)) {
            fprintf(stderr, "bench report: %s is not a profile table; left out\n", g.gl_pathv[i]);
            cJSON_Delete(t);
            continue;
        }
        if (as_html) {
            fputs("<h3>", f);
            html(f, bm->valuestring);
            fputs("</h3>\n<table>\n<tr><th>op</th><th>calls</th><th>host total (us)</th><th>host "
                  "mean (us)</th><th>share</th><th>device total (us)</th><th>GFLOP</th></tr>\n", f);
        } else {
            fputs("### ", f);
            md(f, bm->valuestring);
            fputs("\n\n| op | calls | host total (us) | host mean (us) | share | device total (us) "
                  "| GFLOP |\n| --- | --- | --- | --- | --- | --- | --- |\n", f);
        }
        int k = 0;
        const cJSON *row;
        cJSON_ArrayForEach(row, rows) {
            if (k++ >= PROFILE_TOP) break;
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(row, "name");
            const cJSON *dev = cJSON_GetObjectItemCaseSensitive(row, "device_total_us");
            char c[5][32], d[32];
            const char *keys[5] = {"calls", "host_total_us", "host_mean_us", "share", "flops"};
            for (int j = 0; j < 5; j++) {
                double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(row, keys[j]));
                if (j == 3) snprintf(c[j], sizeof c[j], "%.1f%%", 100 * v);
                else if (j == 4) snprintf(c[j], sizeof c[j], "%.4g", v / 1e9);
                else num(v, c[j], sizeof c[j]);
            }
            if (cJSON_IsNumber(dev)) num(dev->valuedouble, d, sizeof d);
            else snprintf(d, sizeof d, "not measured");
            const char *nm = cJSON_IsString(name) ? name->valuestring : "?";
            if (as_html) {
                fputs("<tr><td><code>", f);
                html(f, nm);
                fprintf(f, "</code></td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                        "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                        "<td class=\"n\">%s</td></tr>\n", c[0], c[1], c[2], c[3], d, c[4]);
            } else {
                fputs("| ", f);
                md(f, nm);
                fprintf(f, " | %s | %s | %s | %s | %s | %s |\n", c[0], c[1], c[2], c[3], d, c[4]);
            }
        }
        fputs(as_html ? "</table>\n" : "\n", f);
        cJSON_Delete(t);
    }
    globfree(&g);
}

static int write_md(FILE *f, const report *r) {
    const bench_results *run = r->run;
    fputs("# tandem bench report: ", f);
    md(f, run->label);
    fputs("\n\n", f);
    if (run->emulated) fputs("> **" BENCH_EMU_BANNER ".**\n\n", f);
    check_report_table(f, run->dir, false);
    const char *started = str_item(run->context, "started");
    if (started) {
        fputs("Started ", f);
        md(f, started);
        fputs(".\n\n", f);
    }
    bool good;
    char line_buf[256];
    const char *line = status_line(r, line_buf, sizeof line_buf, &good);
    fprintf(f, "%s", good ? "" : "**");
    md(f, line);
    fprintf(f, "%s\n\n## Run\n\n", good ? "" : "**");
    if (r->run_info.n)
        md_kv(f, &r->run_info);
    else
        fputs("context.json is missing.\n\n", f);
    fputs("## Machine\n\n", f);
    if (run->emulated) fprintf(f, "**%s**\n\n", emu_machine_note);
    if (r->machine.n)
        md_kv(f, &r->machine);
    else
        fputs("No machine context (context.json has no env).\n\n", f);
    if (r->gbench_build && !strcmp(r->gbench_build, "debug"))
        fprintf(f, "%s\n\n", gbench_debug_note);

    char b1[64], b2[64], b3[64], b4[64];
    for (int s = 0; s < run->n_suites; s++) {
        const char *suite = run->suites[s];
        fputs("## Suite ", f);
        md(f, suite);
        fputs("\n\n", f);
        suite_intro(f, run, suite, false);
        if (r->plots_note) {
            fputs("No plots: ", f);
            md(f, r->plots_note);
            fputs("\n\n", f);
        }
        for (int i = 0; i < r->n_figs; i++) {
            const bench_figure *g = &r->figs[i];
            if (strcmp(g->suite, suite) || !r->drawn[i]) continue;
            char cap[512];
            fig_caption(g, run->emulated, cap, sizeof cap);
            fputs("![", f);
            md(f, cap);
            fprintf(f, "](plots/%s.png)\n\n", g->name);  // names are [A-Za-z0-9._-]
        }
        int rows = 0;
        for (int k = 0; k < run->n_rows; k++) rows += !strcmp(run->rows[k].suite, suite);
        if (!rows) {
            fputs("No results in this suite's CSV.\n\n", f);
            continue;
        }
        fputs(
            "| benchmark | param | metric | median | unit | CV | min | max | repetitions |\n"
            "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |\n",
            f);
        for (int k = 0; k < run->n_rows; k++) {
            const bench_row *w = &run->rows[k];
            if (strcmp(w->suite, suite)) continue;
            fputs("| ", f);
            md(f, w->benchmark);
            if (is_prediction(w)) fputs(" (prediction, not measured)", f);
            fputs(" | ", f);
            md(f, w->param);
            fputs(" | ", f);
            md(f, w->metric);
            double sc;
            const char *unit = row_unit(w, &sc);
            fprintf(f, " | %s | ", num(w->median * sc, b1, sizeof b1));
            md(f, unit);
            if (isfinite(w->cv))
                snprintf(b2, sizeof b2, "%.1f%%%s", 100 * w->cv, w->cv > 0.05 ? " (noisy)" : "");
            else
                b2[0] = '\0';
            fprintf(f, " | %s | %s | %s | %d |\n", b2, num(w->min * sc, b3, sizeof b3),
                    num(w->max * sc, b4, sizeof b4), w->repetitions);
        }
        fputs(
            "\nCV: the coefficient of variation (standard deviation over mean) of the "
            "repetitions, \"noisy\" above 5%. GB/s are 1e9 bytes read + written per second "
            "within one memory, link_GB/s 1e9 bytes crossing the link per second, GFLOP/s 1e9 "
            "floating-point operations per second.",
            f);
        fprintf(f, "%s\n\n", run->emulated ? emu_table_note : "");
    }

    if (r->peer || r->peer_note) peer_md(f, r);
    profile_section(f, run->dir, false);
    fputs("## Skipped and unfinished\n\n", f);
    int n_fin = array_size(run->status, "finished");
    if (run->status) fprintf(f, "%d benchmark%s finished.\n\n", n_fin, n_fin == 1 ? "" : "s");
    if (r->issues.n) {
        fputs("| suite or benchmark | what happened |\n| --- | --- |\n", f);
        for (int i = 0; i < r->issues.n; i++) {
            fputs("| ", f);
            md(f, r->issues.v[i].key);
            fputs(" | ", f);
            md(f, r->issues.v[i].value);
            fputs(" |\n", f);
        }
    } else {
        fputs(run->status ? "Nothing was skipped; nothing failed or was left unfinished.\n"
                          : "Unknown (no status.json).\n",
              f);
    }
    if (r->clock.n) {
        fputs("\n### Clock check\n\n", f);
        md_kv(f, &r->clock);
    }
    fputs("\n---\nWritten by bench report (", f);
    md(f, tdm_build_info());
    fputs(").\n", f);
    return 0;
}

/* Writes DIR/NAME through a temporary file renamed into place (a NAME that is a link, a FIFO or a
 * device is refused, never written through: fileio.h). */
static int write_doc(const char *dir, const char *name, int (*body)(FILE *, const report *),
                     const report *r) {
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "bench report: %s: path too long\n", dir);
        return 2;
    }
    int fd = bench_open_temp(path, tmp, sizeof tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "bench report: %s: %s\n", fd >= 0 ? tmp : path, bench_strerror(errno));
        if (fd >= 0) close(fd), unlink(tmp);
        return 2;
    }
    int rc = body(f, r);
    bool ok = !ferror(f) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!rc && !ok) fprintf(stderr, "bench report: %s: write error\n", tmp);
    if (!rc && ok && bench_commit_temp(tmp, path) != 0) {
        fprintf(stderr, "bench report: %s: %s\n", path, bench_strerror(errno));
        ok = false;
    }
    if (rc || !ok) {
        unlink(tmp);
        return rc ? rc : 2;
    }
    printf("%s\n", path);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the command

static void report_usage(FILE *f) {
    fprintf(
        f,
        "usage: bench report DIR [--replot] [--no-plots] [--embed]\n"
        "  Writes DIR/report.html and DIR/report.md from a results directory of bench run: the\n"
        "  run's context (context.json), per suite the summary of its page docs/suites/<suite>.md\n"
        "  (found in the source tree, or under $TANDEM_DOCS_ROOT), its ratios (e.g. fp16 / f32\n"
        "  per batch, from the medians), its figures and a table of every benchmark's\n"
        "  median, CV (stddev/mean over repetitions) and unit, and what was skipped or did not\n"
        "  finish (status.json). The HTML has its CSS inline and shows DIR/plots/*.svg by\n"
        "  relative links (open it where it lies, or copy DIR whole).\n"
        "  Plots are drawn first (as by bench plot DIR) when some are missing or older than the\n"
        "  results; when gnuplot is missing or fails the report is written without them, with\n"
        "  a note saying so.\n"
        "  A run on the emulated CUDA device (a -DTDM_CUDA_EMU=ON build) gets a banner at the\n"
        "  top: its timings measure the emulator, not a GPU; every caption says emulated.\n"
        "  --replot    draw the plots again even when they exist\n"
        "  --no-plots  neither draw nor show plots\n"
        "  --embed     put the PNGs inside report.html (data: URIs): one file to send around\n"
        "  Exit: 0 written, 2 bad arguments or results (missing, unreadable, malformed).\n");
}

/* DIR/plots/NAME.EXT exists, is not empty, and is not older than NEWER (0: any age). */
static bool file_ok(const char *dir, const char *name, const char *ext, time_t newer) {
    char p[PATH_MAX];
    struct stat sb;
    snprintf(p, sizeof p, "%s/plots/%s.%s", dir, name, ext);
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 && sb.st_mtime >= newer;
}

/* The modification time of DIR/SUITE.csv (0 when unknown). */
static time_t csv_time(const char *dir, const char *suite) {
    char p[PATH_MAX];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s.csv", dir, suite);
    return stat(p, &sb) == 0 ? sb.st_mtime : 0;
}

int bench_report(int argc, char **argv) {
    static const struct option opts[] = {{"replot", no_argument, 0, 'r'},
                                         {"no-plots", no_argument, 0, 'n'},
                                         {"embed", no_argument, 0, 'e'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    bool replot = false, no_plots = false, embed = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
            case 'r':
                replot = true;
                break;
            case 'n':
                no_plots = true;
                break;
            case 'e':
                embed = true;
                break;
            case 'h':
                report_usage(stdout);
                return 0;
            default:
                report_usage(stderr);
                return 2;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "bench report: give one results directory (%d given)\n", argc - optind);
        report_usage(stderr);
        return 2;
    }
    if (no_plots && (replot || embed)) {
        fprintf(stderr, "bench report: --no-plots goes with neither --replot nor --embed\n");
        return 2;
    }
    bench_results run;
    if (bench_results_load("report", argv[optind], &run)) return 2;
    report r = {.run = &run, .embed = embed};
    r.gbench_build = gbench_build_type(&run);
    bench_figure *figs = NULL;
    int n_figs = 0, rc = 0;
    if (bench_figures_plan(&run, 1, &figs, &n_figs)) {
        fprintf(stderr, "bench report: out of memory\n");
        bench_results_free(&run);
        return 2;
    }
    bool *drawn = calloc((size_t)n_figs + 1, sizeof *drawn);
    if (!drawn) {
        fprintf(stderr, "bench report: out of memory\n");
        rc = 2;
    }
    if (!rc && no_plots) {
        r.plots_note = "--no-plots was given.";
    } else if (!rc) {
        bool missing = replot;  // or older than their results
        for (int i = 0; i < n_figs; i++) {
            time_t t = csv_time(run.dir, figs[i].suite);
            missing |= !file_ok(run.dir, figs[i].name, "png", t) ||
                       !file_ok(run.dir, figs[i].name, "svg", t);
        }
        char outdir[PATH_MAX];
        rc = bench_plots_dir("report", run.dir, outdir, sizeof outdir);
        if (!rc && missing && n_figs &&
            bench_plot_draw("report", &run, 1, figs, n_figs, outdir, false) != 0) {
            fprintf(stderr,
                    "bench report: writing the report without the plots that are missing\n");
            r.plots_note =
                "gnuplot could not draw the figures (bench report said why on stderr; "
                "bench plot DIR says it again).";
        }
        for (int i = 0; i < n_figs; i++)
            drawn[i] = file_ok(run.dir, figs[i].name, "png", 0) &&
                       file_ok(run.dir, figs[i].name, "svg", 0);
        if (n_figs == 0) r.plots_note = "no benchmark has a median to plot.";
    }
    r.figs = figs;
    r.n_figs = n_figs;
    r.drawn = drawn;
    if (!rc) {
        // context.json: everything but env under Run, env under Machine
        const cJSON *e;
        cJSON_ArrayForEach(e, run.context) {
            if (!e->string) continue;
            flatten(strcmp(e->string, "env") ? &r.run_info : &r.machine,
                    strcmp(e->string, "env") ? e->string : "", e,
                    !strcmp(e->string, "command") ? " " : ", ");
        }
        kv_add(&r.run_info, "results directory", run.dir);
        const cJSON *clock = cJSON_GetObjectItemCaseSensitive(run.status, "clock_check");
        if (clock) flatten(&r.clock, "", clock, ", ");
        status_issues(&r.issues, run.status);
        if (r.run_info.oom || r.machine.oom || r.clock.oom || r.issues.oom) {
            fprintf(stderr, "bench report: out of memory\n");
            rc = 2;
        }
    }
    // DIR/peer-torch (bench run --peer torch): read when there is one; unreadable, a note.
    bench_results peer;
    bool have_peer = false;
    char peer_dir[PATH_MAX];
    struct stat peer_sb;
    snprintf(peer_dir, sizeof peer_dir, "%s/%s", run.dir, BENCH_PEER_DIR);
    if (!rc && stat(peer_dir, &peer_sb) == 0) {
        if (bench_results_load("report", peer_dir, &peer) == 0) {
            have_peer = true;
            r.peer = &peer;
        } else {
            r.peer_note = BENCH_PEER_DIR "/ is there but could not be read (bench report said "
                                         "why on stderr): no PyTorch comparison.";
        }
    }
    if (!rc) rc = write_doc(run.dir, "report.html", write_html, &r);
    if (!rc) rc = write_doc(run.dir, "report.md", write_md, &r);
    kv_free(&r.run_info);
    kv_free(&r.machine);
    kv_free(&r.clock);
    kv_free(&r.issues);
    free(r.gbench_build);
    if (have_peer) bench_results_free(&peer);
    free(drawn);
    bench_figures_free(figs, n_figs);
    bench_results_free(&run);
    return rc;
}

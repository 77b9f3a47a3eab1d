/* check_report.c — the verdict table of a `bench check --out` results directory, which
 * `bench report` puts at the top of report.html and report.md: the summary line, then a row per
 * check and a column per GPU (host checks in their own column), each cell the verdict and the
 * measured figure, green for PASS, amber for WARN, red for FAIL, grey for what was not judged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/bench.h"
#include "check.h"
#include "harness/fileio.h"

/* Text from status.json (check names, GPU names and models, verdicts, figures, notes), escaped
 * as bench report escapes everything from a results directory. */
static void esc(FILE *f, const char *s, bool as_html) {
    if (as_html)
        bench_html_text(f, s);
    else
        bench_md_text(f, s);
}

static cJSON *load_status(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/status.json", dir);
    char *buf = bench_read_file_max(path, 256u << 20, NULL);  // no status.json is this big
    cJSON *j = buf ? cJSON_Parse(buf) : NULL;
    free(buf);
    return j;
}

// ---------------------------------------------------------------------------------------------
// the checks of one column (host, a GPU, needs_gpu) sorted by name, for the table's lookups: a
// status.json may list any number of checks, and every one gets its row

typedef struct {
    const char *name;
    const cJSON *check;
    int seq;  // the order first met: in the column, or over all columns
} named_check;

static int cmp_named(const void *a, const void *b) {
    const named_check *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_seq(const void *a, const void *b) {
    const named_check *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

typedef struct {
    named_check *v;
    int n;
} column;

/* The named checks of LIST (an array of {"check": name, ...}), sorted by name then order. */
static bool column_of(const cJSON *list, column *out) {
    out->n = 0;
    out->v = malloc(((size_t)cJSON_GetArraySize(list) + 1) * sizeof *out->v);
    if (!out->v) return false;
    const cJSON *c;
    cJSON_ArrayForEach(c, list) {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "check"));
        if (!n) continue;
        out->v[out->n] = (named_check){n, c, out->n};
        out->n++;
    }
    qsort(out->v, (size_t)out->n, sizeof *out->v, cmp_named);
    return true;
}

/* The first check of the column named NAME, or NULL. */
static const cJSON *find_check(const column *col, const char *name) {
    int lo = 0, hi = col->n;  // the first entry not below name
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(col->v[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < col->n && !strcmp(col->v[lo].name, name) ? col->v[lo].check : NULL;
}

static void cell(FILE *f, const cJSON *c, bool as_html) {
    if (!c) {
        fputs(as_html ? "<td></td>" : " |", f);
        return;
    }
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "verdict"));
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c, "measured");
    const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "unit"));
    // a FAIL's or WARN's fault code, and what to do (docs/CHECK.md "Fault codes")
    const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "code"));
    const char *remedy = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "remedy"));
    char mb[128] = "";
    if (cJSON_IsNumber(m))
        snprintf(mb, sizeof mb, "%.4g%s%s", m->valuedouble, unit ? " " : "", unit ? unit : "");
    else if (cJSON_IsString(m))
        snprintf(mb, sizeof mb, "%s", m->valuestring);
    const char *cls = !v                       ? "na"
                      : !strcmp(v, CHECK_PASS) ? "pass"
                      : !strcmp(v, CHECK_WARN) ? "warn"
                      : !strcmp(v, CHECK_FAIL) ? "fail"
                                               : "na";
    if (as_html) {
        fprintf(f, "<td class=\"chk-%s\" title=\"", cls);
        esc(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "note")), true);
        if (code && remedy) {
            fputs(" | ", f);
            esc(f, code, true);
            fputs(": ", f);
            esc(f, remedy, true);
        }
        fputs("\"><b>", f);
        esc(f, v, true);
        fputs("</b>", f);
        if (code) {
            fputs(" ", f);
            esc(f, code, true);
        }
        if (mb[0]) {
            fputs("<br>", f);
            esc(f, mb, true);
        }
        fputs("</td>", f);
    } else {
        fputs(" ", f);
        if (!strcmp(cls, "fail") || !strcmp(cls, "warn")) fputs("**", f);
        esc(f, v, false);
        if (!strcmp(cls, "fail") || !strcmp(cls, "warn")) fputs("**", f);
        if (code) {
            fputs(" ", f);
            esc(f, code, false);
        }
        if (mb[0]) {
            fputs(" ", f);
            esc(f, mb, false);
        }
        fputs(" |", f);
    }
}

static const cJSON *item(const cJSON *o, const char *name) {
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

bool check_report_table(FILE *f, const char *dir, bool as_html) {
    cJSON *st = load_status(dir);
    const cJSON *ch = item(st, "check");
    if (!cJSON_IsObject(ch)) {
        cJSON_Delete(st);
        return false;
    }
    const cJSON *gpus = item(ch, "gpus");
    const char *line = cJSON_GetStringValue(item(item(ch, "summary"), "line"));
    int ng = cJSON_GetArraySize(gpus);
    // the columns: host, each GPU, then needs_gpu (shown when there is no GPU)
    int ncol = ng + 2;
    column *cols = calloc((size_t)ncol, sizeof *cols);
    bool ok = cols != NULL;
    const cJSON *gpu = gpus ? gpus->child : NULL;
    for (int k = 0; k < ncol && ok; k++) {
        const cJSON *list = item(item(ch, "host"), "checks");
        if (k == ncol - 1) {
            list = item(ch, "needs_gpu");
        } else if (k > 0) {
            list = item(gpu, "checks");
            gpu = gpu->next;
        }
        ok = column_of(list, &cols[k]);
    }
    // the rows: every check name once, in the order first met (host, each GPU, needs_gpu)
    int total = 0, nn = 0;
    for (int k = 0; k < ncol && ok; k++) total += cols[k].n;
    named_check *rows = ok ? malloc(((size_t)total + 1) * sizeof *rows) : NULL;
    ok = ok && rows;
    if (ok) {
        for (int k = 0, base = 0; k < ncol; base += cols[k].n, k++)
            for (int i = 0; i < cols[k].n; i++) {
                rows[base + i] = cols[k].v[i];
                rows[base + i].seq += base;  // the column's start + the check's place in it
            }
        qsort(rows, (size_t)total, sizeof *rows, cmp_named);
        for (int i = 0; i < total; i++)
            if (i == 0 || strcmp(rows[i].name, rows[i - 1].name)) rows[nn++] = rows[i];
        qsort(rows, (size_t)nn, sizeof *rows, cmp_seq);
    }
    if (as_html) {
        fputs(
            "<style>.chk td{text-align:center;font-size:90%}.chk-pass{background:#d9f2d9}"
            ".chk-warn{background:#fff1c2}.chk-fail{background:#f8c9c9}"
            ".chk-na{background:#eee;color:#555}</style>\n"
            "<h2 id=\"check\">bench check: verdict</h2>\n<p><b>",
            f);
        esc(f, line, true);
        fputs("</b></p>\n<table class=\"chk\"><tr><th>check</th><th>host</th>", f);
        const cJSON *g;
        cJSON_ArrayForEach(g, gpus) {
            fputs("<th>", f);
            esc(f, cJSON_GetStringValue(item(g, "device")), true);
            fputs("<br><small>", f);
            const char *model = cJSON_GetStringValue(item(g, "model"));
            bool emulated = cJSON_IsTrue(item(g, "emulated"));
            esc(f, model ? model : emulated ? "EMULATED" : "no model", true);
            fputs("</small></th>", f);
        }
        if (!ng) fputs("<th>GPU</th>", f);
        fputs("</tr>\n", f);
    } else {
        fputs("## bench check: verdict\n\n**", f);
        esc(f, line, false);
        fputs("**\n\n| check | host |", f);
        const cJSON *g;
        cJSON_ArrayForEach(g, gpus) {
            fputs(" ", f);
            esc(f, cJSON_GetStringValue(item(g, "device")), false);
            fputs(" |", f);
        }
        if (!ng) fputs(" GPU |", f);
        fputs("\n| --- | --- |", f);
        for (int i = 0; i < (ng ? ng : 1); i++) fputs(" --- |", f);
        fputs("\n", f);
    }
    for (int r = 0; r < nn; r++) {
        fputs(as_html ? "<tr><td style=\"text-align:left\">" : "| ", f);
        esc(f, rows[r].name, as_html);
        fputs(as_html ? "</td>" : " |", f);
        for (int k = 0; k < ncol; k++)
            if (k < ncol - 1 || !ng) cell(f, find_check(&cols[k], rows[r].name), as_html);
        fputs(as_html ? "</tr>\n" : "\n", f);
    }
    if (as_html) {
        fputs("</table>\n", f);
        if (!ok)
            fputs(
                "<p class=\"note\"><b>Out of memory: the table lacks rows; status.json's "
                "\"check\" has every check.</b></p>\n",
                f);
        fprintf(f,
                "<p class=\"note\">%d check%s. Hover a cell for its expectation and rule "
                "(docs/CHECK.md); status.json's \"check\" has every figure.</p>\n",
                nn, nn == 1 ? "" : "s");
    } else {
        if (!ok)
            fputs(
                "\n**Out of memory: the table lacks rows; status.json's \"check\" has every "
                "check.**\n",
                f);
        fprintf(f,
                "\n%d check%s. Each cell: the verdict and the measured figure; status.json's "
                "\"check\" has the expectations and rules (docs/CHECK.md).\n\n",
                nn, nn == 1 ? "" : "s");
    }
    for (int k = 0; cols && k < ncol; k++) free(cols[k].v);
    free(cols);
    free(rows);
    cJSON_Delete(st);
    return true;
}

/* check_report.c — the verdict table of a `bench check --out` results directory, which
 * `bench report` puts at the top of report.html and report.md: the summary line, then a row per
 * check and a column per GPU (host checks in their own column), each cell the verdict and the
 * measured figure, green for PASS, amber for WARN, red for FAIL, grey for what was not judged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fileio.h"

static void esc(FILE *f, const char *s, bool as_html) {
    for (; s && *s; s++) {
        if (as_html && *s == '&') fputs("&amp;", f);
        else if (as_html && *s == '<') fputs("&lt;", f);
        else if (as_html && *s == '>') fputs("&gt;", f);
        else if (as_html && *s == '"') fputs("&quot;", f);
        else if (!as_html && (*s == '|' || *s == '\\' || *s == '*' || *s == '_' || *s == '`')) {
            fputc('\\', f);
            fputc(*s, f);
        } else fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
    }
}

static cJSON *load_status(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/status.json", dir);
    char *buf = bench_read_file_max(path, 256u << 20, NULL);   // no status.json is this big
    cJSON *j = buf ? cJSON_Parse(buf) : NULL;
    free(buf);
    return j;
}

static const cJSON *find_check(const cJSON *checks, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, checks) {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "check"));
        if (n && !strcmp(n, name)) return c;
    }
    return NULL;
}

static void cell(FILE *f, const cJSON *c, bool as_html) {
    if (!c) {
        fputs(as_html ? "<td></td>" : " |", f);
        return;
    }
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "verdict"));
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c, "measured");
    const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "unit"));
    char mb[128] = "";
    if (cJSON_IsNumber(m)) snprintf(mb, sizeof mb, "%.4g%s%s", m->valuedouble, unit ? " " : "", unit ? unit : "");
    else if (cJSON_IsString(m)) snprintf(mb, sizeof mb, "%s", m->valuestring);
    const char *cls = !v ? "na" : !strcmp(v, CHECK_PASS) ? "pass" : !strcmp(v, CHECK_WARN) ? "warn"
                                  : !strcmp(v, CHECK_FAIL) ? "fail" : "na";
    if (as_html) {
        fprintf(f, "<td class=\"chk-%s\" title=\"", cls);
        esc(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "note")), true);
        fputs("\"><b>", f);
        esc(f, v, true);
        fputs("</b>", f);
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
        if (mb[0]) {
            fputs(" ", f);
            esc(f, mb, false);
        }
        fputs(" |", f);
    }
}

bool check_report_table(FILE *f, const char *dir, bool as_html) {
    cJSON *st = load_status(dir);
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(st, "check");
    if (!cJSON_IsObject(ch)) {
        cJSON_Delete(st);
        return false;
    }
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(ch, "gpus");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ch, "host"), "checks");
    const cJSON *needs = cJSON_GetObjectItemCaseSensitive(ch, "needs_gpu");
    const char *line = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ch, "summary"), "line"));
    int ng = cJSON_GetArraySize(gpus);
    // the rows: every check name in the order first met (host, then each GPU, then needs_gpu)
    const char *names[256];
    int nn = 0;
    const cJSON *lists[66];
    int nl = 0;
    lists[nl++] = host;
    const cJSON *g;
    cJSON_ArrayForEach(g, gpus) if (nl < 65) lists[nl++] = cJSON_GetObjectItemCaseSensitive(g, "checks");
    lists[nl++] = needs;
    for (int l = 0; l < nl; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, lists[l]) {
            const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "check"));
            bool seen = !n;
            for (int k = 0; k < nn && !seen; k++) seen = !strcmp(names[k], n);
            if (!seen && nn < 256) names[nn++] = n;
        }
    }
    if (as_html) {
        fputs("<style>.chk td{text-align:center;font-size:90%}.chk-pass{background:#d9f2d9}"
              ".chk-warn{background:#fff1c2}.chk-fail{background:#f8c9c9}.chk-na{background:#eee;color:#555}"
              "</style>\n<h2 id=\"check\">bench check: verdict</h2>\n<p><b>", f);
        esc(f, line, true);
        fputs("</b></p>\n<table class=\"chk\"><tr><th>check</th><th>host</th>", f);
        cJSON_ArrayForEach(g, gpus) {
            fputs("<th>", f);
            esc(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device")), true);
            fputs("<br><small>", f);
            const char *model = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "model"));
            esc(f, model ? model : cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "emulated")) ? "EMULATED" : "no model", true);
            fputs("</small></th>", f);
        }
        if (!ng) fputs("<th>GPU</th>", f);
        fputs("</tr>\n", f);
    } else {
        fputs("## bench check: verdict\n\n**", f);
        esc(f, line, false);
        fputs("**\n\n| check | host |", f);
        cJSON_ArrayForEach(g, gpus) {
            fputs(" ", f);
            esc(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device")), false);
            fputs(" |", f);
        }
        if (!ng) fputs(" GPU |", f);
        fputs("\n| --- | --- |", f);
        for (int i = 0; i < (ng ? ng : 1); i++) fputs(" --- |", f);
        fputs("\n", f);
    }
    for (int k = 0; k < nn; k++) {
        fputs(as_html ? "<tr><td style=\"text-align:left\">" : "| ", f);
        esc(f, names[k], as_html);
        fputs(as_html ? "</td>" : " |", f);
        cell(f, find_check(host, names[k]), as_html);
        cJSON_ArrayForEach(g, gpus) cell(f, find_check(cJSON_GetObjectItemCaseSensitive(g, "checks"), names[k]), as_html);
        if (!ng) cell(f, find_check(needs, names[k]), as_html);
        fputs(as_html ? "</tr>\n" : "\n", f);
    }
    fputs(as_html ? "</table>\n<p class=\"note\">Hover a cell for its expectation and rule (docs/CHECK.md); "
                    "status.json's \"check\" has every figure.</p>\n"
                  : "\nEach cell: the verdict and the measured figure; status.json's \"check\" has the "
                    "expectations and rules (docs/CHECK.md).\n\n",
          f);
    cJSON_Delete(st);
    return true;
}

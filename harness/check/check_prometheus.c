/* check_prometheus.c — a judged `bench check` in Prometheus's text exposition format, as
 * node_exporter's textfile collector reads it (docs/CHECK.md "Fleet tools"): per check and GPU one
 * sample of the gauge tandem_check_verdict (0 PASS, 1 WARN, 2 FAIL, 3 incomplete, 4 not judged)
 * labelled with the check, the GPU's index, device, UUID and model, the verdict and the fault
 * code; the measured / expected ratio where there is one; the node's exit status and the run's
 * start time. A pure function of the judged section (test: check.prometheus_*); cmd_check.c
 * prints it (--format prometheus) or writes it atomically (--prometheus FILE: a temporary file in
 * the same directory, then rename(2), as node_exporter's documentation asks). */
#define _GNU_SOURCE   // timegm
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static const cJSON *item(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k) {
    const char *s = cJSON_GetStringValue(item(o, k));
    return s ? s : "";
}

// A growing text.
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (int tries = 0; tries < 2 && !t->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->oom = true;
            return;
        }
        if (t->p && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = (t->cap + (size_t)k + 1) * 2;
        char *q = realloc(t->p, cap);
        if (!q) {
            t->oom = true;
            return;
        }
        t->p = q;
        t->cap = cap;
    }
}

// A label value as the text format writes it: backslash, double quote and line feed escaped;
// other control characters (which no name of the figures should hold) as '?'.
static void put_label(text *t, const char *name, const char *v, bool first) {
    put(t, "%s%s=\"", first ? "" : ",", name);
    for (const char *s = v; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\') put(t, "\\\\");
        else if (c == '"') put(t, "\\\"");
        else if (c == '\n') put(t, "\\n");
        else if (c < 0x20 || c == 0x7f) put(t, "?");
        else put(t, "%c", c);
    }
    put(t, "\"");
}

// 0 PASS, 1 WARN, 2 FAIL, 3 incomplete (absent, not run), 4 not judged (the rest).
static int verdict_value(const char *v) {
    return !strcmp(v, CHECK_PASS)      ? 0
           : !strcmp(v, CHECK_WARN)    ? 1
           : !strcmp(v, CHECK_FAIL)    ? 2
           : !strcmp(v, CHECK_ABSENT) || !strcmp(v, CHECK_NOT_RUN) ? 3
                                                                    : 4;
}

// The labels of a check line of one GPU (or of the host: gp NULL).
static void put_labels(text *t, const cJSON *gp, const cJSON *line) {
    char idx[32] = "host";
    const cJSON *i = item(gp, "index");
    if (cJSON_IsNumber(i)) snprintf(idx, sizeof idx, "%.0f", i->valuedouble);
    put(t, "{");
    put_label(t, "check", str(line, "check"), true);
    put_label(t, "gpu", gp ? idx : "host", false);
    put_label(t, "device", gp ? str(gp, "device") : "host", false);
    put_label(t, "uuid", str(gp, "uuid"), false);
    put_label(t, "model", gp ? (str(gp, "model")[0] ? str(gp, "model") : str(gp, "name")) : "", false);
    put_label(t, "verdict", str(line, "verdict"), false);
    put_label(t, "code", str(line, "code"), false);
    put(t, "}");
}

// Each line of the GPUs and the host: the verdict (ratio false) or the ratio where it is a
// number (ratio true).
static void put_lines(text *t, const cJSON *judged, bool ratio) {
    const cJSON *g, *c;
    const char *metric = ratio ? "tandem_check_ratio" : "tandem_check_verdict";
    cJSON_ArrayForEach(g, item(judged, "gpus")) cJSON_ArrayForEach(c, item(g, "checks")) {
        const cJSON *r = item(c, "ratio");
        if (ratio && !(cJSON_IsNumber(r) && isfinite(r->valuedouble))) continue;
        put(t, "%s", metric);
        put_labels(t, g, c);
        if (ratio) put(t, " %.17g\n", r->valuedouble);
        else put(t, " %d\n", verdict_value(str(c, "verdict")));
    }
    cJSON_ArrayForEach(c, item(item(judged, "host"), "checks")) {
        const cJSON *r = item(c, "ratio");
        if (ratio && !(cJSON_IsNumber(r) && isfinite(r->valuedouble))) continue;
        put(t, "%s", metric);
        put_labels(t, NULL, c);
        if (ratio) put(t, " %.17g\n", r->valuedouble);
        else put(t, " %d\n", verdict_value(str(c, "verdict")));
    }
}

// "2024-05-01T12:00:00Z" (the figures' "started") as Unix seconds; NaN when it is not one.
static double iso_seconds(const char *s) {
    struct tm tm = {0};
    char z = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &z) != 7 || z != 'Z')
        return NAN;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    return t == (time_t)-1 ? NAN : (double)t;
}

char *check_prometheus_text(const cJSON *judged, double now_s) {
    text t = {0};
    put(&t, "# HELP tandem_check_verdict bench check's verdict of a check on a GPU (docs/CHECK.md): "
            "0 PASS, 1 WARN, 2 FAIL, 3 incomplete (absent, not run), 4 not judged (missing, EMULATED, "
            "no expectation); the verdict and its fault code are labels\n"
            "# TYPE tandem_check_verdict gauge\n");
    put_lines(&t, judged, false);
    put(&t, "# HELP tandem_check_ratio bench check's measured / expected of a check on a GPU, where "
            "both are numbers\n"
            "# TYPE tandem_check_ratio gauge\n");
    put_lines(&t, judged, true);
    const cJSON *s = item(judged, "summary"), *lv = item(judged, "level");
    put(&t, "# HELP tandem_check_exit bench check's exit status for the node: 0 PASS, 1 FAIL, "
            "3 no GPU judged, 4 incomplete\n"
            "# TYPE tandem_check_exit gauge\n"
            "tandem_check_exit{level=\"%.0f\"} %d\n",
            cJSON_IsNumber(lv) ? lv->valuedouble : 2, check_exit_code(judged));
    static const char *const counts[] = {"pass", "warn", "fail", "incomplete", "not_judged"};
    put(&t, "# HELP tandem_check_lines bench check's lines of the node by verdict\n"
            "# TYPE tandem_check_lines gauge\n");
    for (int k = 0; k < 5; k++) {
        const cJSON *v = item(s, counts[k]);
        put(&t, "tandem_check_lines{verdict=\"%s\"} %.0f\n", counts[k],
            cJSON_IsNumber(v) ? v->valuedouble : 0);
    }
    double started = iso_seconds(str(judged, "started"));
    put(&t, "# HELP tandem_check_timestamp_seconds when the judged run started (Unix time; when the "
            "figures do not say, when they were judged)\n"
            "# TYPE tandem_check_timestamp_seconds gauge\n"
            "tandem_check_timestamp_seconds %.0f\n",
            isfinite(started) ? started : now_s);
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

/* check_rules_print.c — the rows of `bench check --baseline FILE --rules FILE RESULTS...`
 * (check_rules.c judges them) as a text table, JSON lines, Markdown or HTML: a row per node, its
 * verdict (accepted or rejected) and each failing rule with the GPU, the metric and by how much.
 * Text from the results (node names, devices, metrics) is escaped for each format: control
 * characters as `?` on the terminal, bench report's escaping in Markdown and HTML. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/bench.h"
#include "check.h"

static const cJSON *item(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k) {
    const char *s = cJSON_GetStringValue(item(o, k));
    return s ? s : "";
}

// One failure as words: "rule: cuda:1 gemm.bf16: why" (the device and metric when there).
static void failure_text(const cJSON *f, char *buf, size_t n) {
    const char *dev = str(f, "device"), *metric = str(f, "metric");
    snprintf(buf, n, "%s:%s%s%s%s%s %s", str(f, "rule"), dev[0] ? " " : "", dev,
             metric[0] ? " " : "", metric, dev[0] || metric[0] ? ":" : "", str(f, "why"));
}

// Text for the terminal: control characters as '?'.
static void term(FILE *f, const char *s, int width) {
    int k = 0;
    for (; *s; s++, k++) fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
    for (; k < width; k++) fputc(' ', f);
}

static int rejected_count(const cJSON *rows) {
    int n = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) n += !strcmp(str(r, "verdict"), "accepted") ? 0 : 1;
    return n;
}

// "ACCEPTED: 3 nodes" or "REJECTED: 1 of 3 nodes: node02" (the names as ESC writes them).
static void summary(FILE *f, const cJSON *rows, void (*esc)(FILE *, const char *)) {
    int n = cJSON_GetArraySize(rows), bad = rejected_count(rows);
    if (!bad) {
        fprintf(f, "ACCEPTED: %d node%s, every rule passed", n, n == 1 ? "" : "s");
        return;
    }
    fprintf(f, "REJECTED: %d of %d node%s:", bad, n, n == 1 ? "" : "s");
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) if (strcmp(str(r, "verdict"), "accepted")) {
        fputc(' ', f);
        esc(f, str(r, "node"));
    }
}

static void term_text(FILE *f, const char *s) {
    term(f, s, 0);
}

static void print_text(FILE *f, const cJSON *rows) {
    int w = 4;
    const cJSON *r, *x;
    cJSON_ArrayForEach(r, rows) {
        int k = (int)strlen(str(r, "node"));
        if (k > w) w = k < 40 ? k : 40;
    }
    fprintf(f, "%-*s  %-8s  %4s  %s\n", w, "node", "verdict", "GPUs", "failing rules: GPU, metric, by how much");
    char buf[1200];
    cJSON_ArrayForEach(r, rows) {
        term(f, str(r, "node"), w);
        fprintf(f, "  %-8s  %4d  ", str(r, "verdict"), (int)cJSON_GetNumberValue(item(r, "gpus")));
        int k = 0;
        cJSON_ArrayForEach(x, item(r, "failures")) {
            failure_text(x, buf, sizeof buf);
            if (k++) fprintf(f, "\n%*s", w + 2 + 8 + 2 + 4 + 2, "");
            term(f, buf, 0);
        }
        if (!k) fputc('-', f);
        fputc('\n', f);
    }
    summary(f, rows, term_text);
    fputc('\n', f);
}

// A row's failing rules, one after another with <br> between them (Markdown tables and HTML both
// take it), each escaped by ESC.
static void failures_joined(FILE *f, const cJSON *row, void (*esc)(FILE *, const char *)) {
    char buf[1200];
    const cJSON *x;
    int k = 0;
    cJSON_ArrayForEach(x, item(row, "failures")) {
        failure_text(x, buf, sizeof buf);
        if (k++) fputs("<br>", f);
        esc(f, buf);
    }
}

static void print_md(FILE *f, const cJSON *rows) {
    fprintf(f, "| node | verdict | GPUs | failing rules: GPU, metric, by how much |\n"
               "| --- | --- | --- | --- |\n");
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        fputs("| ", f);
        bench_md_text(f, str(r, "node"));
        bool ok = !strcmp(str(r, "verdict"), "accepted");
        fprintf(f, " | %s | %d | ", ok ? "accepted" : "**rejected**",
                (int)cJSON_GetNumberValue(item(r, "gpus")));
        failures_joined(f, r, bench_md_text);
        fputs(" |\n", f);
    }
    fputs("\n**", f);
    summary(f, rows, bench_md_text);
    fputs("**\n", f);
}

static void print_html(FILE *f, const cJSON *rows) {
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bench check: a fleet's "
          "rules</title>\n<style>body{font-family:sans-serif}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}"
          ".accepted{background:#c8f0c8}.rejected{background:#f4c0c0}</style></head><body>\n"
          "<h1>bench check: a fleet's baseline and rules</h1>\n<p>",
          f);
    summary(f, rows, bench_html_text);
    fputs("</p>\n<table>\n<tr><th>node</th><th>verdict</th><th>GPUs</th><th>failing rules: GPU, "
          "metric, by how much</th></tr>\n",
          f);
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        bool ok = !strcmp(str(r, "verdict"), "accepted");
        fputs("<tr><td>", f);
        bench_html_text(f, str(r, "node"));
        fprintf(f, "</td><td class=\"%s\">%s</td><td>%d</td><td>", ok ? "accepted" : "rejected",
                ok ? "accepted" : "rejected", (int)cJSON_GetNumberValue(item(r, "gpus")));
        failures_joined(f, r, bench_html_text);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n</body></html>\n", f);
}

static bool print_jsonl(FILE *f, const cJSON *rows) {
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        char *s = cJSON_PrintUnformatted(r);
        if (!s) return false;
        fprintf(f, "%s\n", s);
        free(s);
    }
    return true;
}

bool check_rules_format_known(const char *format) {
    return !strcmp(format, "text") || !strcmp(format, "jsonl") || !strcmp(format, "md") ||
           !strcmp(format, "html");
}

int check_rules_print(FILE *f, const cJSON *rows, const char *format) {
    if (!strcmp(format, "jsonl")) {
        if (!print_jsonl(f, rows)) return CHECK_EXIT_FAIL;
    } else if (!strcmp(format, "md"))
        print_md(f, rows);
    else if (!strcmp(format, "html"))
        print_html(f, rows);
    else
        print_text(f, rows);
    if (fflush(f) != 0 || ferror(f)) return CHECK_EXIT_FAIL;
    return rejected_count(rows) ? CHECK_EXIT_FAIL : CHECK_EXIT_PASS;
}

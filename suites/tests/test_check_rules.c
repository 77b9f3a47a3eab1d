/* test_check_rules.c — a fleet's baseline and rules (harness/check/check_rules.c, docs/CHECK.md "A
 * fleet's baseline and rules") without a GPU: planted results directories made from the recorded
 * healthy node (suites/tests/check/healthy-2xa100.json) with a figure changed, the baseline of three
 * nodes (medians, min, max, count, nodes; an emulated run refused, a failed GPU left out), each
 * kind of rule at its edge (relative, absolute, missing_fails), rules combined, a node without a GPU
 * and an emulated node rejected, and malformed rules and baseline files refused with the field
 * named. It leaves under TMPDIR/rules the planted nodes and files that check.cmake's CLI tests
 * (text, JSON lines, Markdown, HTML, exit codes) judge.
 * usage: test_check_rules EXPECTATIONS_JSON HEALTHY_FIGURES_JSON TMPDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"            // the tests' CHECK macros (suites/tests/check.h)
#include "harness/check/check.h"    // bench check's parts
#include "harness/fileio.h"

static cJSON *expect, *healthy;
static char tmp[600];

static void write_text(const char *path, const char *text) {
    FILE *o = fopen(path, "w");
    CHECK_MSG(o && fputs(text, o) >= 0, "cannot write %s", path);
    if (o) CHECK(fclose(o) == 0);
}

static void write_json(const char *path, const cJSON *j) {
    char *text = cJSON_Print(j);
    write_text(path, text);
    free(text);
}

static cJSON *figure(cJSON *f, int g, const char *name) {
    return cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), g), "figures"), name);
}

static void set_num(cJSON *o, const char *k, double v) {
    cJSON_DeleteItemFromObject(o, k);
    cJSON_AddNumberToObject(o, k, v);
}

// A figure of GPU g set to v (its samples with it).
static void set_figure(cJSON *f, int g, const char *name, double v) {
    cJSON *x = figure(f, g, name);
    set_num(x, "value", v);
    cJSON_DeleteItemFromObject(x, "samples");
    cJSON *s = cJSON_AddArrayToObject(x, "samples");
    for (int k = 0; k < 3; k++) cJSON_AddItemToArray(s, cJSON_CreateNumber(v));
}

// The recorded healthy node (2 A100 SXM4 80GB) with both GPUs' gemm.bf16 at bf16 (0: as recorded).
static cJSON *node_figures(double bf16) {
    cJSON *f = cJSON_Duplicate(healthy, true);
    for (int g = 0; bf16 > 0 && g < 2; g++) set_figure(f, g, "gemm.bf16", bf16);
    return f;
}

// A results directory as `bench check --out` writes it: status.json with the figures as its
// "check" section, context.json naming HOST. Returns the path (static storage, one per name).
static const char *plant(const char *name, const char *host, cJSON *figures, bool emulated) {
    static char paths[32][700];
    static int n;
    char *dir = paths[n++ % 32];
    snprintf(dir, 700, "%s/%s", tmp, name);
    mkdir(dir, 0755);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddBoolToObject(s, "complete", true);
    cJSON_AddBoolToObject(s, "emulated", emulated);
    cJSON_AddItemToObject(s, "check", figures);
    cJSON_AddArrayToObject(s, "write_errors");
    char path[800];
    snprintf(path, sizeof path, "%s/status.json", dir);
    write_json(path, s);
    cJSON_Delete(s);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "format", "tandem-results/1");
    cJSON_AddStringToObject(c, "device", "cuda:all");
    cJSON_AddBoolToObject(c, "emulated", emulated);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "env"), "host", host);
    snprintf(path, sizeof path, "%s/context.json", dir);
    write_json(path, c);
    cJSON_Delete(c);
    return dir;
}

static const cJSON *metric(const cJSON *b, const char *model, const char *name) {
    return cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "models"), model), name);
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *A100 = "A100 SXM4 80GB";
static cJSON *baseline;  // of the three planted healthy nodes

static void test_write_baseline(void) {
    // three nodes, bf16 at 240, 250 and 260 TFLOP/s on both GPUs; a fourth whose cuda:1 has a FAIL
    char *dirs[5];
    dirs[0] = (char *)plant("n1", "node01", node_figures(240), false);
    dirs[1] = (char *)plant("n2", "node02", node_figures(250), false);
    dirs[2] = (char *)plant("n3", "node03", node_figures(260), false);
    cJSON *f = node_figures(100);
    set_figure(f, 0, "gemm.bf16", 255);  // cuda:1 at 100 (0.32 x the datasheet): FAIL, left out
    dirs[3] = (char *)plant("n4-fail", "node04", f, false);
    char note[2048], err[2200];
    baseline = check_baseline_from_runs(expect, dirs, 4, note, sizeof note, err, sizeof err);
    CHECK_MSG(baseline, "%s", err);
    if (!baseline) return;
    const cJSON *m = metric(baseline, A100, "gemm.bf16");
    // 240 240 250 250 260 260 and node04's cuda:0 at 255: median 250
    CHECK_MSG(num(m, "median") == 250 && num(m, "min") == 240 && num(m, "max") == 260 &&
                  num(m, "count") == 7,
              "gemm.bf16: median %g min %g max %g count %g", num(m, "median"), num(m, "min"),
              num(m, "max"), num(m, "count"));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(m, "nodes")) == 4);
    CHECK(!strcmp(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "nodes"), 0)->valuestring, "node01"));
    CHECK_MSG(strstr(note, "n4-fail cuda:1 (it had a FAIL"), "note: %s", note);
    // memory.d2d: 1750 and 1760 on each node's two GPUs, node04's cuda:1 left out
    m = metric(baseline, A100, "memory.d2d");
    CHECK_MSG(num(m, "median") == 1750 && num(m, "count") == 7, "memory.d2d median %g count %g",
              num(m, "median"), num(m, "count"));
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "unit")), "GB/s"));
    m = metric(baseline, A100, "nvml.temperature_c");
    CHECK_MSG(num(m, "median") == 55 && !strcmp(cJSON_GetObjectItem(m, "unit")->valuestring, "C"),
              "nvml.temperature_c median %g", num(m, "median"));
    CHECK(metric(baseline, A100, "link.pcie_width") && !metric(baseline, A100, "nvml.nvml"));
    // what it writes reads back
    char *text = cJSON_Print(baseline);
    cJSON *back = check_baseline_parse(text, strlen(text), "b.json", err, sizeof err);
    CHECK_MSG(back, "%s", err);
    cJSON_Delete(back);
    char path[800];
    snprintf(path, sizeof path, "%s/baseline.json", tmp);
    write_text(path, text);
    free(text);

    // an emulated run is refused as a source (bad input), never quietly used or left out
    char *emu[] = {dirs[0], (char *)plant("emu", "emunode", node_figures(0), true)};
    cJSON *b = check_baseline_from_runs(expect, emu, 2, note, sizeof note, err, sizeof err);
    CHECK_MSG(!b && strstr(err, "emulated") && strstr(err, "emu"), "emulated source: %s", err);
    cJSON_Delete(b);
    // a path that is no results directory
    char *none[] = {tmp};
    b = check_baseline_from_runs(expect, none, 1, note, sizeof note, err, sizeof err);
    CHECK_MSG(!b && strstr(err, "status.json"), "no status.json: %s", err);
    cJSON_Delete(b);
}

static cJSON *rules_of(const char *text) {
    char err[900];
    cJSON *r = check_rules_parse(text, strlen(text), "rules.json", baseline, err, sizeof err);
    CHECK_MSG(r, "%s: %s", text, err);
    return r;
}

// Judges figures (a node's) by RULES; the row.
static cJSON *judge(cJSON *figures, const char *rules_text) {
    char err[600];
    cJSON *j = check_judge(figures, expect, err, sizeof err);
    CHECK_MSG(j, "%s", err);
    cJSON *r = rules_of(rules_text);
    cJSON *row = j && r ? check_rules_judge_node("node", j, NULL, false, NULL, baseline, r) : NULL;
    cJSON_Delete(r);
    cJSON_Delete(j);
    cJSON_Delete(figures);
    return row;
}

static bool accepted(const cJSON *row) {
    return row && !strcmp(cJSON_GetObjectItem(row, "verdict")->valuestring, "accepted") &&
           cJSON_GetArraySize(cJSON_GetObjectItem(row, "failures")) == 0;
}

static const cJSON *failure(const cJSON *row, int k) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(row, "failures"), k);
}

static const char *fstr(const cJSON *f, const char *k) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(f, k));
    return s ? s : "";
}

#define RULES(...) "{\"format\": \"tandem-check-rules/1\", \"rules\": [" __VA_ARGS__ "]}"

static void test_relative(void) {
    // cuda:1's bf16 10 % below the fleet's median of 250: rejected at 0.95, accepted at 0.85
    const char *r95 = RULES("{\"name\": \"gemm-95\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.95}}");
    const char *r85 = RULES("{\"name\": \"gemm-85\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.85}}");
    cJSON *f = node_figures(250);
    set_figure(f, 1, "gemm.bf16", 225);
    cJSON *row = judge(f, r95);
    CHECK(row && !accepted(row) && cJSON_GetArraySize(cJSON_GetObjectItem(row, "failures")) == 1);
    const cJSON *x = failure(row, 0);
    CHECK_MSG(!strcmp(fstr(x, "rule"), "gemm-95") && !strcmp(fstr(x, "device"), "cuda:1") &&
                  !strcmp(fstr(x, "metric"), "gemm.bf16") && num(x, "value") == 225 &&
                  fabs(num(x, "limit") - 237.5) < 1e-9 && fabs(num(x, "ratio") - 0.9) < 1e-12,
              "failure: %s %s %s %g %g %g", fstr(x, "rule"), fstr(x, "device"), fstr(x, "metric"),
              num(x, "value"), num(x, "limit"), num(x, "ratio"));
    CHECK_MSG(strstr(fstr(x, "why"), "0.9 x the fleet's median 250"), "%s", fstr(x, "why"));
    cJSON_Delete(row);
    f = node_figures(250);
    set_figure(f, 1, "gemm.bf16", 225);
    row = judge(f, r85);
    CHECK(accepted(row));
    cJSON_Delete(row);
    // the edge belongs to the node: exactly 0.95 x 250 passes, just under it does not
    f = node_figures(237.5);
    row = judge(f, r95);
    CHECK(accepted(row));
    cJSON_Delete(row);
    f = node_figures(237.4);
    row = judge(f, r95);
    CHECK(row && !accepted(row) && cJSON_GetArraySize(cJSON_GetObjectItem(row, "failures")) == 2);
    cJSON_Delete(row);
    // max: a figure far above the fleet's is a rule too
    f = node_figures(300);
    row = judge(f, RULES("{\"name\": \"not-too-fast\", \"metric\": \"gemm.bf16\", \"relative\": {\"max\": 1.1}}"));
    CHECK(row && !accepted(row) && strstr(fstr(failure(row, 0), "why"), "above 1.1 x"));
    cJSON_Delete(row);
    // a GPU of a model the baseline lacks is not accepted by a relative rule
    f = node_figures(250);
    cJSON *g1 = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 1);
    cJSON_ReplaceItemInObject(g1, "name", cJSON_CreateString("NVIDIA H100 80GB HBM3"));
    row = judge(f, r85);
    CHECK_MSG(row && !accepted(row) && strstr(fstr(failure(row, 0), "why"), "baseline has no"),
              "%s", fstr(failure(row, 0), "why"));
    cJSON_Delete(row);
}

static void test_absolute(void) {
    const char *hot = RULES("{\"name\": \"cool\", \"metric\": \"nvml.temperature_c\", \"absolute\": {\"max\": 80}}");
    cJSON *f = node_figures(250);
    set_num(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0), "health"),
            "temperature_c", 81);
    cJSON *row = judge(f, hot);
    const cJSON *x = failure(row, 0);
    CHECK_MSG(row && !accepted(row) && !strcmp(fstr(x, "device"), "cuda:0") &&
                  num(x, "value") == 81 && num(x, "limit") == 80,
              "hot: %s", fstr(x, "why"));
    cJSON_Delete(row);
    f = node_figures(250);
    set_num(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0), "health"),
            "temperature_c", 80);  // at the limit: passes
    row = judge(f, hot);
    CHECK(accepted(row));
    cJSON_Delete(row);
    f = node_figures(229);
    row = judge(f, RULES("{\"name\": \"floor\", \"metric\": \"gemm.bf16\", \"absolute\": {\"min\": 230, \"max\": 400}}"));
    CHECK(row && !accepted(row) && num(failure(row, 0), "limit") == 230 &&
          strstr(fstr(failure(row, 0), "why"), "below the minimum 230"));
    cJSON_Delete(row);
}

static void test_missing(void) {
    const char *mf = RULES("{\"name\": \"gemm-measured\", \"metric\": \"gemm.*\", \"missing_fails\": true}");
    const char *rel = RULES("{\"name\": \"gemm-85\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.85}}");
    // cuda:1 without gemm.f64: rejected by missing_fails, not by a relative rule (it judges values;
    // bench check's own verdict, absent, rejects the node beside the rules)
    cJSON *f = node_figures(250);
    cJSON_DeleteItemFromObject(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 1), "figures"), "gemm.f64");
    cJSON *g = cJSON_Duplicate(f, true);
    cJSON *row = judge(f, mf);
    CHECK_MSG(row && !accepted(row) && !strcmp(fstr(failure(row, 0), "metric"), "gemm.f64") &&
                  !strcmp(fstr(failure(row, 0), "device"), "cuda:1") &&
                  cJSON_GetArraySize(cJSON_GetObjectItem(row, "failures")) == 2 &&
                  !strcmp(fstr(failure(row, 1), "rule"), "(check)"),
              "missing gemm.f64: %s", fstr(failure(row, 0), "why"));
    cJSON_Delete(row);
    row = judge(g, rel);
    CHECK_MSG(row && !accepted(row) && cJSON_GetArraySize(cJSON_GetObjectItem(row, "failures")) == 1 &&
                  !strcmp(fstr(failure(row, 0), "rule"), "(check)") &&
                  strstr(fstr(failure(row, 0), "why"), "bench check's verdict absent (incomplete)"),
              "missing gemm.f64, relative: %s", fstr(failure(row, 0), "why"));
    cJSON_Delete(row);
    // null (a measurement that failed: bench check's verdict FAIL) is a failure too
    f = node_figures(250);
    cJSON *x = figure(f, 0, "gemm.tf32");
    cJSON_DeleteItemFromObject(x, "value");
    cJSON_DeleteItemFromObject(x, "samples");
    cJSON_AddNullToObject(x, "value");
    cJSON_AddStringToObject(x, "error", "cublas failed");
    row = judge(f, mf);
    CHECK_MSG(row && !accepted(row) && !strcmp(fstr(failure(row, 0), "metric"), "gemm.tf32") &&
                  strstr(fstr(failure(row, 0), "why"), "failed"),
              "failed gemm.tf32: %s", fstr(failure(row, 0), "why"));
    cJSON_Delete(row);
    // null without an error: not run (bench check counts it incomplete), a failure too
    f = node_figures(250);
    x = figure(f, 1, "gemm.f16");
    cJSON_DeleteItemFromObject(x, "value");
    cJSON_DeleteItemFromObject(x, "samples");
    cJSON_AddNullToObject(x, "value");
    row = judge(f, mf);
    CHECK_MSG(row && !accepted(row) && !strcmp(fstr(failure(row, 0), "metric"), "gemm.f16") &&
                  !strcmp(fstr(failure(row, 0), "device"), "cuda:1") &&
                  strstr(fstr(failure(row, 0), "why"), "not run"),
              "null gemm.f16: %s", fstr(failure(row, 0), "why"));
    cJSON_Delete(row);
    // the healthy node passes it
    row = judge(node_figures(250), mf);
    CHECK(accepted(row));
    cJSON_Delete(row);
}

static void test_combined(void) {
    const char *two = RULES("{\"name\": \"gemm-95\", \"metric\": \"gemm.bf16\", \"relative\": {\"min\": 0.95}},"
                            "{\"name\": \"cool\", \"metric\": \"nvml.temperature_c\", \"absolute\": {\"max\": 80}}");
    cJSON *f = node_figures(250);
    set_figure(f, 1, "gemm.bf16", 225);
    set_num(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0), "health"),
            "temperature_c", 81);   // above the rule's 80, below the GPU's slowdown threshold
    cJSON *row = judge(f, two);
    CHECK(row && cJSON_GetArraySize(cJSON_GetObjectItem(row, "failures")) == 2 &&
          !strcmp(fstr(failure(row, 0), "rule"), "cool") &&
          !strcmp(fstr(failure(row, 1), "rule"), "gemm-95"));
    cJSON_Delete(row);
    f = node_figures(250);  // one rule fails: the node is rejected by it alone
    set_figure(f, 1, "gemm.bf16", 225);
    row = judge(f, two);
    CHECK(row && !accepted(row) && cJSON_GetArraySize(cJSON_GetObjectItem(row, "failures")) == 1 &&
          !strcmp(fstr(failure(row, 0), "rule"), "gemm-95"));
    cJSON_Delete(row);
    row = judge(node_figures(250), two);  // both pass
    CHECK(accepted(row));
    cJSON_Delete(row);
}

static void test_not_a_gpu_node(void) {
    cJSON *r = rules_of(RULES("{\"name\": \"gemm-85\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.85}}"));
    cJSON *f = node_figures(250), *empty = cJSON_CreateObject();
    char err[600];
    cJSON_AddArrayToObject(empty, "gpus");
    cJSON *j = check_judge(f, expect, err, sizeof err), *je = check_judge(empty, expect, err, sizeof err);
    cJSON *row = r && j ? check_rules_judge_node("emu", j, NULL, true, NULL, baseline, r) : NULL;
    CHECK(row && !accepted(row) && !strcmp(fstr(failure(row, 0), "rule"), "(emulated)"));
    cJSON_Delete(row);
    row = r && je ? check_rules_judge_node("none", je, NULL, false, NULL, baseline, r) : NULL;
    CHECK(row && !accepted(row) && !strcmp(fstr(failure(row, 0), "rule"), "(no GPU)"));
    cJSON_Delete(row);
    row = r && j ? check_rules_judge_node("inc", j, NULL, false, "incomplete", baseline, r) : NULL;
    CHECK(row && !accepted(row) && !strcmp(fstr(failure(row, 0), "rule"), "(run)"));
    cJSON_Delete(row);
    cJSON_Delete(j);
    cJSON_Delete(je);
    cJSON_Delete(empty);
    cJSON_Delete(f);
    cJSON_Delete(r);
}

// bench check's own verdicts (issue 36): a node whose GPUs hold a FAIL, absent or not-run line is
// rejected ("(check)", the GPU and the check named) though every rule passes: none of these is a
// metric, and --write-baseline leaves such GPUs out. Each planted fault on the healthy node (or a
// level-4 run recorded without its level-3 and level-4 checks); also written as results directories
// under TMPDIR/rules/own-* for the CLI's formats (check.cmake).
static cJSON *gpu_of(cJSON *f, int g) { return cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), g); }

static cJSON *own_fault(int k, const char **check, const char **host) {
    cJSON *f = node_figures(250), *g1 = gpu_of(f, 1);
    cJSON *nm = cJSON_GetObjectItem(g1, "numerics");
    switch (k) {
    case 0:   // a failed golden replay
        cJSON_ReplaceItemInObject(nm, "numerics.golden", cJSON_Parse("{\"result\": \"fail\", \"detail\": \"3 cases over their bound\"}"));
        *check = "numerics.golden", *host = "node-golden";
        break;
    case 1:   // a failed memory test
        cJSON_AddItemToObject(nm, "memory.test", cJSON_Parse("{\"result\": \"fail\", \"detail\": \"1 word read wrong\"}"));
        *check = "memory.test", *host = "node-memtest";
        break;
    case 2:   // GEMM repetitions that gave other bits
        cJSON_AddItemToObject(g1, "sdc", cJSON_Parse(
            "{\"sdc.gemm\": {\"repeats\": 20, \"mismatches\": 1, \"first_mismatch\": 7, \"dtype\": \"bf16\","
            " \"shape\": [4096, 4096, 4096], \"digest\": \"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "\", \"seconds\": 10}}"));
        *check = "sdc.gemm", *host = "node-sdc";
        break;
    case 3:   // an Xid 79 (fallen off the bus) during the run
        cJSON_AddItemToObject(g1, "counters", cJSON_Parse("{\"seconds\": 60, \"start\": {}, \"end\": {}, \"xid\": [79]}"));
        *check = "nvml.xid", *host = "node-xid";
        break;
    case 4:   // the sustained load could not run (level 3)
        cJSON_AddNumberToObject(f, "level", 3);
        cJSON_AddItemToObject(g1, "series", cJSON_Parse(
            "{\"sustained.load\": {\"t_s\": [], \"sm_clock_mhz\": [], \"mem_clock_mhz\": [], \"power_w\": [],"
            " \"temperature_c\": [], \"throttle_reasons\": [], \"tflops\": [], \"phase\": [],"
            " \"error\": \"an illegal memory access\"}}"));
        *check = "sustained.load", *host = "node-sustained";
        break;
    default:   // level 4 recorded without its sdc, series and memory test
        cJSON_AddNumberToObject(f, "level", 4);
        *check = "memory.test", *host = "node-level4";
        break;
    }
    return f;
}

static void test_own_verdicts(void) {
    const char *r85 = RULES("{\"name\": \"gemm-85\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.85}}");
    for (int k = 0; k < 6; k++) {
        const char *check = "", *host = "";
        cJSON *f = own_fault(k, &check, &host);
        cJSON *row = judge(f, r85);
        bool named = false;
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(row, "failures"))
            named = named || (!strcmp(fstr(x, "rule"), "(check)") && !strcmp(fstr(x, "device"), "cuda:1") &&
                              !strcmp(fstr(x, "metric"), check) && strstr(fstr(x, "why"), "bench check's verdict"));
        CHECK_MSG(row && !accepted(row) && named, "%s: %s (want (check) cuda:1 %s)", host,
                  row ? fstr(failure(row, 0), "why") : "no row", check);
        // cuda:0 is healthy: only cuda:1 is named
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(row, "failures"))
            CHECK_MSG(strcmp(fstr(x, "device"), "cuda:0") || k >= 4, "%s: cuda:0 named: %s", host, fstr(x, "why"));
        cJSON_Delete(row);
        char name[64];
        snprintf(name, sizeof name, "own-%d", k);
        plant(name, host, own_fault(k, &check, &host), false);
    }
    // a FAIL the run recorded is a failure though the judging again (other expectations) passes
    char err[600];
    cJSON *f = node_figures(250), *r = rules_of(r85);
    cJSON *j = check_judge(f, expect, err, sizeof err);
    cJSON *rec = cJSON_Duplicate(j, true);
    cJSON *line = cJSON_GetArrayItem(cJSON_GetObjectItem(gpu_of(rec, 0), "checks"), 0);
    cJSON_ReplaceItemInObject(line, "verdict", cJSON_CreateString(CHECK_FAIL));
    cJSON *row = j && r ? check_rules_judge_node("node", j, rec, false, NULL, baseline, r) : NULL;
    CHECK_MSG(row && !accepted(row) && !strcmp(fstr(failure(row, 0), "rule"), "(check)") &&
                  strstr(fstr(failure(row, 0), "why"), "as recorded by the run"),
              "recorded FAIL: %s", row ? fstr(failure(row, 0), "why") : "no row");
    cJSON_Delete(row);
    row = j && r ? check_rules_judge_node("node", j, j, false, NULL, baseline, r) : NULL;
    CHECK(accepted(row));
    cJSON_Delete(row);
    cJSON_Delete(rec);
    cJSON_Delete(j);
    cJSON_Delete(f);
    cJSON_Delete(r);
}

// Malformed rules and baselines: refused, the file and the field named. The rules cases are also
// written to TMPDIR/rules/bad-rules-N.json for the CLI's exit 2.
static void test_malformed(void) {
    struct { const char *text, *want; } bad_rules[] = {
        {"{\"format\": \"tandem-check-rules/1\", \"rules\": [", "not JSON"},
        {"{\"format\": \"x/1\", \"rules\": []}", "\"format\""},
        {"{\"format\": \"tandem-check-rules/1\", \"rules\": []}", "\"rules\" must be an array of one or more"},
        {"{\"format\": \"tandem-check-rules/1\", \"rule\": []}", "unknown key \"rule\""},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.9}, \"weight\": 2}"),
         "rules[0] (a): unknown key \"weight\""},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"relative\": {\"min\": \"0.9\"}}"),
         "rules[0] (a): relative.min must be a finite number"},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"relative\": {\"mni\": 0.9}}"),
         "rules[0] (a): unknown key \"mni\""},
        {RULES("{\"name\": \"a\", \"metric\": \"\", \"relative\": {\"min\": 0.9}}"), "rules[0] (a): \"metric\""},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.fp8\", \"relative\": {\"min\": 0.9}}"),
         "rules[0] (a): \"metric\" \"gemm.fp8\" matches no metric of the baseline"},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"missing_fails\": false}"), "\"missing_fails\" must be true"},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\"}"), "needs exactly one of"},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.9}, \"absolute\": {\"min\": 1}}"),
         "needs exactly one of"},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"absolute\": {\"min\": 5, \"max\": 1}}"), "no value passes"},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"absolute\": {}}"), "needs \"min\" or \"max\""},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0}}"), "above 0"},
        {RULES("{\"name\": \"a\", \"metric\": \"nvml.ecc_uncorrected_volatile\", \"relative\": {\"max\": 2}}"),
         "whose median is 0"},
        {RULES("{\"name\": \"a\", \"metric\": \"gemm.*\", \"missing_fails\": true},"
               "{\"name\": \"a\", \"metric\": \"pcie.*\", \"missing_fails\": true}"), "rules[1] (a): \"name\" is also rules[0]'s"},
        {RULES("{\"metric\": \"gemm.*\", \"missing_fails\": true}"), "rules[0]: needs a \"name\""},
        {RULES("{\"name\": \"a\", \"name\": \"b\", \"metric\": \"gemm.*\", \"missing_fails\": true}"), "duplicate key"},
    };
    char err[900], path[800];
    for (size_t k = 0; k < sizeof bad_rules / sizeof *bad_rules; k++) {
        cJSON *r = check_rules_parse(bad_rules[k].text, strlen(bad_rules[k].text), "rules.json", baseline,
                                     err, sizeof err);
        CHECK_MSG(!r && strstr(err, "rules.json") && strstr(err, bad_rules[k].want), "%s -> %s (want %s)",
                  bad_rules[k].text, r ? "accepted" : err, bad_rules[k].want);
        cJSON_Delete(r);
        snprintf(path, sizeof path, "%s/bad-rules-%02zu.json", tmp, k);
        write_text(path, bad_rules[k].text);
    }
    // baselines: the planted one with one field spoiled
    struct { const char *key; const char *json; const char *want; } bad_base[] = {
        {"median", "\"x\"", "\"median\" must be a finite number"},
        {"min", "251", "needs min (251) <= median (250)"},
        {"count", "0", "\"count\" must be a whole number"},
        {"nodes", "[]", "\"nodes\" must be an array of one or more"},
        {"spread", "1", "unknown key \"spread\""},
    };
    for (size_t k = 0; baseline && k < sizeof bad_base / sizeof *bad_base; k++) {
        cJSON *b = cJSON_Duplicate(baseline, true);
        cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "models"), A100), "gemm.bf16");
        cJSON_DeleteItemFromObject(e, bad_base[k].key);
        cJSON_AddItemToObject(e, bad_base[k].key, cJSON_Parse(bad_base[k].json));
        char *text = cJSON_Print(b);
        cJSON *back = check_baseline_parse(text, strlen(text), "b.json", err, sizeof err);
        CHECK_MSG(!back && strstr(err, "b.json: models.\"A100 SXM4 80GB\".\"gemm.bf16\"") &&
                      strstr(err, bad_base[k].want),
                  "baseline %s: %s -> %s", bad_base[k].key, bad_base[k].json, back ? "accepted" : err);
        snprintf(path, sizeof path, "%s/bad-baseline-%02zu.json", tmp, k);
        write_text(path, text);
        free(text);
        cJSON_Delete(back);
        cJSON_Delete(b);
    }
    const char *whole[][2] = {{"{\"format\": \"tandem-check-expectations/1\"}", "not a baseline file"},
                              {"{\"format\": \"tandem-check-baseline/1\", \"models\": {}}", "one or more models"}};
    for (size_t k = 0; k < 2; k++) {
        cJSON *back = check_baseline_parse(whole[k][0], strlen(whole[k][0]), "b.json", err, sizeof err);
        CHECK_MSG(!back && strstr(err, whole[k][1]), "%s -> %s", whole[k][0], back ? "accepted" : err);
        cJSON_Delete(back);
    }
}

// The nodes the CLI tests judge (check.cmake): a healthy one, a slow one (bf16 10 % below the
// median on cuda:1), one missing gemm.f64, one with a hostile host name, and the rules files.
static void plant_cli_nodes(void) {
    plant("cli-healthy", "node-ok", node_figures(250), false);
    cJSON *f = node_figures(250);
    set_figure(f, 1, "gemm.bf16", 225);
    plant("cli-slow", "node-slow", f, false);
    f = node_figures(250);
    cJSON_DeleteItemFromObject(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 1), "figures"), "gemm.f64");
    plant("cli-missing", "node-missing", f, false);
    f = node_figures(250);
    set_figure(f, 0, "gemm.bf16", 200);
    plant("cli-hostile", "<script>alert(1)</script>&\"|x*", f, false);
    plant("cli-emulated", "node-emu", node_figures(0), true);
    char path[800];
    snprintf(path, sizeof path, "%s/rules-95.json", tmp);
    write_text(path, RULES("{\"name\": \"gemm-95\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.95}}"));
    snprintf(path, sizeof path, "%s/rules-85.json", tmp);
    write_text(path, RULES("{\"name\": \"gemm-85\", \"metric\": \"gemm.*\", \"relative\": {\"min\": 0.85}},"
                           "{\"name\": \"gemm-measured\", \"metric\": \"gemm.*\", \"missing_fails\": true}"));
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_check_rules EXPECTATIONS_JSON HEALTHY_FIGURES_JSON TMPDIR\n");
        return 2;
    }
    char err[900];
    expect = check_expect_load(argv[1], err, sizeof err);
    CHECK_MSG(expect, "%s", err);
    size_t n = 0;
    char *text = bench_read_file_max(argv[2], 1u << 20, &n);
    healthy = text ? check_figures_parse(text, n, argv[2], err, sizeof err) : NULL;
    free(text);
    CHECK_MSG(healthy, "%s: %s", argv[2], err);
    snprintf(tmp, sizeof tmp, "%s/rules", argv[3]);
    mkdir(argv[3], 0755);
    mkdir(tmp, 0755);
    if (!expect || !healthy) CHECK_DONE("test_check_rules");
    test_write_baseline();
    if (baseline) {
        test_relative();
        test_absolute();
        test_missing();
        test_combined();
        test_not_a_gpu_node();
        test_own_verdicts();
        test_malformed();
        plant_cli_nodes();
    }
    cJSON_Delete(baseline);
    cJSON_Delete(healthy);
    cJSON_Delete(expect);
    CHECK_DONE("test_check_rules");
}

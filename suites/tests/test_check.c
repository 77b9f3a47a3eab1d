/* test_check.c — `bench check`'s judging without a GPU (harness/check/check_judge.c, check_expect.c):
 * the thresholds at their edges, the datasheet expectations, the PCIe link rule, NVML's readings,
 * the outlier rule, the emulated device and no GPU, the expectations file's validation, and
 * --write-expect's medians (recorded check results in temporary directories); issue 21: the
 * physical limits, absent checks (incomplete), figures that cannot be true, strict JSON, the
 * outlier rule against a brute-force median, and --write-expect's refusals; issue 25: the level
 * and fault-code tables (check_levels.c) and planted error-counter series (PCIe replays at the
 * 80 edge, NVLink CRC and recovery, ECC deltas, an Xid), figures with and without a level, the
 * level's budget at and past its edge.
 * usage: test_check EXPECTATIONS_JSON TMPDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"            // the tests' CHECK macros (suites/tests/check.h)
#include "harness/check/check.h"    // bench check's parts
#include "harness/check/check_lines.h"
#include "harness/fileio.h"
#include "harness/stats.h"

static cJSON *expect;

// A GPU entry with every figure at `scale` of an A100 SXM4 80GB's datasheet.
static cJSON *gpu(int i, const char *name, double scale) {
    cJSON *g = cJSON_CreateObject();
    char dev[16];
    snprintf(dev, sizeof dev, "cuda:%d", i);
    cJSON_AddNumberToObject(g, "index", i);
    cJSON_AddStringToObject(g, "device", dev);
    cJSON_AddStringToObject(g, "name", name);
    cJSON_AddBoolToObject(g, "emulated", false);
    cJSON *num = cJSON_AddObjectToObject(g, "numerics");  // every GPU's runs: a complete entry
    const char *runs[] = {"numerics.golden", "numerics.conform", "train.mlp-adam.f32"};
    for (size_t k = 0; k < 3; k++)
        cJSON_AddStringToObject(cJSON_AddObjectToObject(num, runs[k]), "result", "pass");
    cJSON *f = cJSON_AddObjectToObject(g, "figures");
    struct { const char *k; double v; } v[] = {{"memory.d2d", 2039}, {"gemm.tf32", 156}, {"gemm.f16", 312},
                                              {"gemm.bf16", 312}, {"gemm.f64", 19.5}, {"pcie.h2d", 31.5},
                                              {"pcie.d2h", 31.5}};
    for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
        cJSON *x = cJSON_AddObjectToObject(f, v[k].k);
        cJSON_AddNumberToObject(x, "value", v[k].v * scale);
    }
    cJSON *l = cJSON_AddObjectToObject(g, "link");
    cJSON_AddNumberToObject(l, "pcie_gen", 4);
    cJSON_AddNumberToObject(l, "pcie_width", 16);
    cJSON_AddNumberToObject(l, "pcie_gen_max", 4);
    cJSON_AddNumberToObject(l, "pcie_width_max", 16);
    cJSON_AddBoolToObject(l, "under_load", true);
    cJSON *h = cJSON_AddObjectToObject(g, "health");
    cJSON_AddNumberToObject(h, "throttle_reasons", 0);
    cJSON_AddNumberToObject(h, "temperature_c", 50);
    cJSON_AddNumberToObject(h, "temperature_slowdown_c", 88);
    cJSON_AddNumberToObject(h, "ecc", 1);
    cJSON_AddNumberToObject(h, "ecc_uncorrected_volatile", 0);
    cJSON_AddNumberToObject(h, "ecc_uncorrected_aggregate", 0);
    cJSON_AddStringToObject(h, "nvml", "");
    return g;
}

// n GPUs; from 2 to 16 with the all-reduce and peer figures every such node measures (one
// direction of the A100 SXM4's NVLink, 300 GB/s, x scale).
static cJSON *node(int n, double scale) {
    cJSON *f = cJSON_CreateObject();
    cJSON *gs = cJSON_AddArrayToObject(f, "gpus");
    for (int i = 0; i < n; i++) {
        cJSON *g = gpu(i, "NVIDIA A100-SXM4-80GB", scale);
        cJSON *figs = cJSON_GetObjectItem(g, "figures");
        if (n >= 2 && n <= 16) {
            cJSON_AddNumberToObject(cJSON_AddObjectToObject(figs, "multi.allreduce"), "value",
                                    300 * scale);
            cJSON_AddNumberToObject(cJSON_AddObjectToObject(figs, "multi.peer"), "value",
                                    300 * scale);
        }
        cJSON_AddItemToArray(gs, g);
    }
    return f;
}

static cJSON *fig(cJSON *f, int g, const char *name) {
    return cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), g), "figures"), name);
}

static void set(cJSON *o, const char *k, double v) {
    cJSON_DeleteItemFromObject(o, k);
    cJSON_AddNumberToObject(o, k, v);
}

// The verdict of check NAME on GPU G of a judged node ("" when there is no such line).
static const char *verdict(const cJSON *j, int g, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), g), "checks"))
        if (!strcmp(cJSON_GetObjectItem(c, "check")->valuestring, name))
            return cJSON_GetObjectItem(c, "verdict")->valuestring;
    return "";
}

static cJSON *judge(const cJSON *f) {
    char err[300];
    cJSON *j = check_judge(f, expect, err, sizeof err);
    CHECK_MSG(j, "%s", err);
    return j;
}

static void test_thresholds(void) {
    // memory.d2d: FAIL below 0.70 of 2039 GB/s, WARN below 0.80; the edges belong to the better side
    struct { double ratio; const char *want; } cases[] = {
        {0.69, CHECK_FAIL}, {0.70, CHECK_WARN}, {0.79, CHECK_WARN}, {0.80, CHECK_PASS}, {1.10, CHECK_PASS}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        cJSON *f = node(1, 1.0);
        set(fig(f, 0, "memory.d2d"), "value", 2039 * cases[k].ratio);
        cJSON *j = judge(f);
        CHECK_MSG(!strcmp(verdict(j, 0, "memory.d2d"), cases[k].want), "ratio %.2f: %s, want %s", cases[k].ratio,
                  verdict(j, 0, "memory.d2d"), cases[k].want);
        CHECK(check_exit_code(j) == (!strcmp(cases[k].want, CHECK_FAIL) ? 1 : 0));
        cJSON_Delete(j);
        cJSON_Delete(f);
    }
    // GEMM: FAIL below 0.45 of the dense peak (bf16 312 TFLOP/s)
    cJSON *f = node(1, 1.0);
    set(fig(f, 0, "gemm.bf16"), "value", 312 * 0.44);
    set(fig(f, 0, "gemm.f16"), "value", 312 * 0.50);
    cJSON *j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "gemm.bf16"), CHECK_FAIL));
    CHECK(!strcmp(verdict(j, 0, "gemm.f16"), CHECK_WARN));
    CHECK(!strcmp(verdict(j, 0, "gemm.tf32"), CHECK_PASS));
    cJSON_Delete(j);
    // a failed measurement (an error, no value) is a FAIL, never a figure
    cJSON *x = fig(f, 0, "gemm.tf32");
    cJSON_DeleteItemFromObject(x, "value");
    cJSON_AddNullToObject(x, "value");
    cJSON_AddStringToObject(x, "error", "the product is wrong at [1, 2]");
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "gemm.tf32"), CHECK_FAIL));
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_link_and_health(void) {
    cJSON *f = node(1, 1.0);
    cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0);
    cJSON *l = cJSON_GetObjectItem(g, "link"), *h = cJSON_GetObjectItem(g, "health");
    cJSON *j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "pcie.link"), CHECK_PASS));
    CHECK(!strcmp(verdict(j, 0, "nvml.throttle"), CHECK_PASS));
    CHECK(!strcmp(verdict(j, 0, "nvml.remapped_rows"), CHECK_MISSING));   // not read: reported
    CHECK(check_exit_code(j) == 0);
    cJSON_Delete(j);
    set(l, "pcie_width", 8);   // trained at half width, read while copying
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "pcie.link"), CHECK_FAIL));
    CHECK(check_exit_code(j) == 1);
    cJSON_Delete(j);
    cJSON_DeleteItemFromObject(l, "under_load");   // read at idle, when links train down: a WARN
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "pcie.link"), CHECK_WARN));
    cJSON_Delete(j);
    set(l, "pcie_width", 16);
    set(l, "pcie_gen", 3);
    set(l, "pcie_gen_max", 3);   // a gen3 slot under a gen4 GPU
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "pcie.link"), CHECK_WARN));
    cJSON_Delete(j);
    set(h, "throttle_reasons", 1 << 6);   // hw thermal slowdown during the load
    set(h, "ecc_uncorrected_volatile", 2);
    set(h, "temperature_c", 86);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.throttle"), CHECK_FAIL));
    CHECK(!strcmp(verdict(j, 0, "nvml.ecc"), CHECK_FAIL));
    CHECK(!strcmp(verdict(j, 0, "nvml.temperature"), CHECK_WARN));
    cJSON_Delete(j);
    set(h, "throttle_reasons", 1 << 2);   // at its power cap: expected at full load
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.throttle"), CHECK_PASS));
    cJSON_Delete(j);
    // reason bits newer drivers define (above 0x1ff): named by their value and kept, not refused
    char names[300];
    check_throttle_names((1 << 2) | (1 << 10) | (1 << 12), names, sizeof names);
    CHECK(!strcmp(names, "sw power cap, unknown 0x1400"));
    check_throttle_names(1 << 9, names, sizeof names);
    CHECK(!strcmp(names, "unknown 0x200"));
    set(h, "throttle_reasons", (1 << 2) | (1 << 9));
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.throttle"), CHECK_PASS));
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_outliers(void) {
    // 8 GPUs at 0.95 of the datasheet; cuda:5's bf16 GEMM at 0.70 of it (passes the model's 0.45
    // and 0.60) is 0.74 x its siblings: named, FAIL. cuda:6's d2d at 0.85 x: a WARN.
    cJSON *f = node(8, 0.95);
    set(fig(f, 5, "gemm.bf16"), "value", 312 * 0.70);
    set(fig(f, 6, "memory.d2d"), "value", 2039 * 0.95 * 0.85);
    cJSON *j = judge(f);
    CHECK(!strcmp(verdict(j, 5, "gemm.bf16"), CHECK_PASS));
    CHECK(!strcmp(verdict(j, 5, "outlier.gemm.bf16"), CHECK_FAIL));
    CHECK(!strcmp(verdict(j, 6, "outlier.memory.d2d"), CHECK_WARN));
    CHECK(!strcmp(verdict(j, 0, "outlier.gemm.bf16"), ""));   // the healthy ones are not named
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "outliers")) == 2);
    CHECK(check_exit_code(j) == 1);
    cJSON_Delete(j);
    // an unknown model is judged against its siblings only
    cJSON *gs = cJSON_GetObjectItem(f, "gpus");
    for (int i = 0; i < 8; i++) {
        cJSON *g = cJSON_GetArrayItem(gs, i);
        cJSON_DeleteItemFromObject(g, "name");
        cJSON_AddStringToObject(g, "name", "NVIDIA Z900");
    }
    j = judge(f);
    CHECK(!strcmp(verdict(j, 5, "gemm.bf16"), CHECK_NO_EXPECT));
    CHECK(!strcmp(verdict(j, 5, "outlier.gemm.bf16"), CHECK_FAIL));
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), 0), "model")));
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_no_gpu_and_emulated(void) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddArrayToObject(f, "gpus");
    cJSON_AddStringToObject(f, "no_gpu", "no CUDA device found");
    cJSON *j = judge(f);
    CHECK(check_exit_code(j) == CHECK_EXIT_NO_GPU);   // never a silent PASS
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "needs_gpu")) > 10);
    CHECK(strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "summary"), "line")->valuestring, "NO GPU"));
    cJSON_Delete(j);
    cJSON_Delete(f);
    f = node(1, 0.001);   // the emulated device: slow, but never judged on speed
    cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0);
    cJSON_DeleteItemFromObject(g, "emulated");
    cJSON_AddBoolToObject(g, "emulated", true);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "memory.d2d"), CHECK_EMULATED));
    CHECK(check_exit_code(j) == CHECK_EXIT_NO_GPU);
    cJSON_Delete(j);
    cJSON *golden = cJSON_GetObjectItem(cJSON_GetObjectItem(g, "numerics"), "numerics.golden");
    cJSON_ReplaceItemInObject(golden, "result", cJSON_CreateString("fail"));  // judged there
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "numerics.golden"), CHECK_FAIL));
    CHECK(check_exit_code(j) == CHECK_EXIT_FAIL);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_parse(void) {
    char err[400];
    struct { const char *text, *want; } bad[] = {
        {"{", "not JSON"},
        {"{\"format\": \"x/1\"}", "\"format\""},
        {"{\"format\": \"tandem-check-expectations/1\", \"thresholds\": {}}", "\"memory.d2d\" is missing"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        cJSON *e = check_expect_parse(bad[k].text, "x.json", err, sizeof err);
        CHECK_MSG(!e && strstr(err, bad[k].want) && strstr(err, "x.json"), "%s -> %s", bad[k].text, err);
        cJSON_Delete(e);
    }
    CHECK(check_expect_model(expect, "NVIDIA A100-SXM4-40GB") &&
          !strcmp(cJSON_GetObjectItem(check_expect_model(expect, "NVIDIA A100-SXM4-40GB"), "model")->valuestring,
                  "A100 SXM4 40GB"));
    CHECK(check_expect_model(expect, "nvidia h100 80gb hbm3"));   // case-insensitive
    CHECK(!check_expect_model(expect, "NVIDIA A100"));            // whole names only
}

static void write_status(const char *dir, double d2d_0, double d2d_1, bool fail_1) {
    mkdir(dir, 0755);
    cJSON *f = node(2, 1.0);
    set(fig(f, 0, "memory.d2d"), "value", d2d_0);
    set(fig(f, 1, "memory.d2d"), "value", d2d_1);
    if (fail_1) set(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 1), "link"), "pcie_width", 4);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddBoolToObject(s, "complete", true);
    cJSON_AddBoolToObject(s, "emulated", false);
    cJSON_AddItemToObject(s, "check", judge(f));
    cJSON_AddArrayToObject(s, "write_errors");
    char path[600], *text = cJSON_Print(s);
    snprintf(path, sizeof path, "%s/status.json", dir);
    FILE *o = fopen(path, "w");
    if (o) {
        fputs(text, o);
        fclose(o);
    }
    free(text);
    cJSON_Delete(s);
    cJSON_Delete(f);
}

static void test_write_expect(const char *tmp) {
    char d[3][500];
    for (int i = 0; i < 3; i++) snprintf(d[i], sizeof d[i], "%s/check-run-%d", tmp, i);
    write_status(d[0], 1700, 1800, false);
    write_status(d[1], 1750, 1600, false);
    write_status(d[2], 1900, 100, true);   // cuda:1 had a FAIL: left out
    char *dirs[3] = {d[0], d[1], d[2]}, err[600];
    cJSON *e = check_expect_from_runs(expect, dirs, 3, err, sizeof err);
    CHECK_MSG(e, "%s", err);
    if (!e) return;
    CHECK(strstr(err, "it had a FAIL"));
    const cJSON *m = check_expect_model(e, "NVIDIA A100-SXM4-80GB");
    double med = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "checks"), "memory.d2d")->valuedouble;
    CHECK_MSG(med == 1750, "median of 1700 1800 1750 1600 1900 = %g, want 1750", med);
    // the result is a valid expectations file, judged with measured_thresholds (0.75 x the median)
    char *text = cJSON_Print(e), err2[300];
    cJSON *back = check_expect_parse(text, "fleet.json", err2, sizeof err2);
    CHECK_MSG(back, "%s", err2);
    cJSON *f = node(1, 1.0);
    set(fig(f, 0, "memory.d2d"), "value", 1750 * 0.74);   // 0.63 of the datasheet, 0.74 of the fleet
    cJSON *j = back ? check_judge(f, back, err2, sizeof err2) : NULL;
    CHECK(j && !strcmp(verdict(j, 0, "memory.d2d"), CHECK_FAIL));
    cJSON_Delete(j);
    cJSON_Delete(f);
    cJSON_Delete(back);
    free(text);
    cJSON_Delete(e);
    char *none[1] = {(char *)tmp};   // no status.json there: bad input with a message
    e = check_expect_from_runs(expect, none, 1, err, sizeof err);
    CHECK(!e && strstr(err, "status.json"));
}

// ---- issue 21: no PASS for what cannot be true or was not measured
// -------------------------------

// The note of check NAME on GPU G ("" when there is no such line).
static const char *note_of(const cJSON *j, int g, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(
        c, cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), g),
                               "checks")) if (!strcmp(cJSON_GetObjectItem(c, "check")->valuestring,
                                                      name)) return cJSON_GetObjectItem(c, "note")
        ->valuestring;
    return "";
}

static double summary(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "summary"), k);
    return v ? v->valuedouble : -1;
}

static void test_physical_limits(void) {
    // 1.10 x the datasheet: just below it is a figure (PASS), above it a timing bug (FAIL)
    cJSON *f = node(1, 1.0);
    set(fig(f, 0, "memory.d2d"), "value", 2039 * 1.09);
    cJSON *j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "memory.d2d"), CHECK_PASS) && check_exit_code(j) == 0);
    cJSON_Delete(j);
    double over[] = {2039 * 1.11, 100000, 1e300};  // 100 TB/s on an A100 is a ratio of 49
    for (size_t k = 0; k < sizeof over / sizeof *over; k++) {
        set(fig(f, 0, "memory.d2d"), "value", over[k]);
        j = judge(f);
        CHECK_MSG(
            !strcmp(verdict(j, 0, "memory.d2d"), CHECK_FAIL) &&
                strstr(note_of(j, 0, "memory.d2d"), "faster than this GPU can be: a timing bug?"),
            "%g GB/s: %s (%s)", over[k], verdict(j, 0, "memory.d2d"), note_of(j, 0, "memory.d2d"));
        CHECK(check_exit_code(j) == CHECK_EXIT_FAIL);
        cJSON_Delete(j);
    }
    cJSON_Delete(f);
    // every figure at 1e300: no performance line passes
    f = node(2, 1e300 / 2039);
    j = judge(f);
    for (int g = 0; g < 2; g++)
        for (int k = 0; check_perf_names[k]; k++)
            CHECK_MSG(!strcmp(verdict(j, g, check_perf_names[k]), CHECK_FAIL),
                      "1e300: cuda:%d %s %s", g, check_perf_names[k],
                      verdict(j, g, check_perf_names[k]));
    CHECK(check_exit_code(j) == CHECK_EXIT_FAIL);
    cJSON_Delete(j);
    cJSON_Delete(f);
    // an unknown model: no expectation, but nothing 10 x faster than the fastest model is real
    f = node(1, 1.0);
    cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0);
    cJSON_ReplaceItemInObject(g, "name", cJSON_CreateString("NVIDIA Z900"));
    set(fig(f, 0, "memory.d2d"), "value", 9000);  // faster than any model of the file: a new one
    set(fig(f, 0, "gemm.bf16"), "value", 1e300);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "memory.d2d"), CHECK_NO_EXPECT));
    CHECK(!strcmp(verdict(j, 0, "gemm.bf16"), CHECK_FAIL));
    cJSON_Delete(j);
    cJSON_Delete(f);
    // an impossible figure is no sibling's yardstick: cuda:1 and cuda:2 are not outliers
    f = node(3, 0.9);
    set(fig(f, 0, "memory.d2d"), "value", 100000);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 1, "outlier.memory.d2d"), ""));
    CHECK(!strcmp(verdict(j, 2, "outlier.memory.d2d"), ""));
    CHECK(!strcmp(verdict(j, 0, "memory.d2d"), CHECK_FAIL));
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_incomplete(void) {
    // a GPU with only one check present: every expected one is listed, counted, and the verdict
    // is incomplete (exit 4), never a PASS
    cJSON *f = node(1, 1.0);
    cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0);
    cJSON_DeleteItemFromObject(g, "numerics");
    cJSON_DeleteItemFromObject(g, "link");
    cJSON_DeleteItemFromObject(g, "health");
    cJSON *figs = cJSON_GetObjectItem(g, "figures");
    for (int k = 1; check_perf_names[k]; k++) cJSON_DeleteItemFromObject(figs, check_perf_names[k]);
    cJSON *j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "memory.d2d"), CHECK_PASS));
    const char *absent[] = {"numerics.golden", "numerics.conform", "train",         "gemm.tf32",
                            "gemm.f16",        "gemm.bf16",        "gemm.f64",      "pcie.h2d",
                            "pcie.d2h",        "pcie.link",        "nvml.throttle", "nvml.ecc",
                            "nvml.clocks"};
    for (size_t k = 0; k < sizeof absent / sizeof *absent; k++)
        CHECK_MSG(!strcmp(verdict(j, 0, absent[k]), CHECK_ABSENT), "%s: %s", absent[k],
                  verdict(j, 0, absent[k]));
    CHECK(!strcmp(verdict(j, 0, "multi.peer"), ""));  // one GPU: no multi.*
    CHECK_MSG(check_exit_code(j) == CHECK_EXIT_INCOMPLETE, "exit %d", check_exit_code(j));
    CHECK_MSG(summary(j, "incomplete") == 16, "incomplete %g, want 16", summary(j, "incomplete"));
    CHECK(!strncmp(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "summary"), "line")->valuestring,
                   "INCOMPLETE", 10));
    cJSON_Delete(j);
    cJSON_Delete(f);
    // a figure of null without an error was not measured: incomplete; with an error: FAIL
    f = node(1, 1.0);
    cJSON_ReplaceItemInObject(fig(f, 0, "gemm.f64"), "value", cJSON_CreateNull());
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "gemm.f64"), CHECK_NOT_RUN) &&
          check_exit_code(j) == CHECK_EXIT_INCOMPLETE);
    cJSON_Delete(j);
    cJSON_AddStringToObject(fig(f, 0, "gemm.f64"), "error", "out of memory");
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "gemm.f64"), CHECK_FAIL) && check_exit_code(j) == CHECK_EXIT_FAIL);
    cJSON_Delete(j);
    cJSON_Delete(f);
    // two GPUs measure multi.*; a run result that is not pass, fail or error was not run
    f = node(2, 1.0);
    cJSON_DeleteItemFromObject(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 1), "figures"),
        "multi.peer");
    cJSON *golden = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0), "numerics"),
        "numerics.golden");
    cJSON_ReplaceItemInObject(golden, "result", cJSON_CreateString("skipped"));
    j = judge(f);
    CHECK(!strcmp(verdict(j, 1, "multi.peer"), CHECK_ABSENT));
    CHECK(!strcmp(verdict(j, 0, "numerics.golden"), CHECK_NOT_RUN));
    CHECK(check_exit_code(j) == CHECK_EXIT_INCOMPLETE && summary(j, "incomplete") == 2);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

// Sets KEY of the part WHERE of GPU 0 (gpu, figures, health, link, numerics, or d2d: the
// memory.d2d figure) of a healthy 2-GPU node to JSON: check_judge must refuse it, naming WANT.
static void expect_bad(const char *where, const char *key, const char *json, const char *want) {
    cJSON *f = node(2, 1.0);
    cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0);
    cJSON *t = !strcmp(where, "gpu")   ? g
               : !strcmp(where, "d2d") ? fig(f, 0, "memory.d2d")
                                       : cJSON_GetObjectItem(g, where);
    cJSON *v = cJSON_Parse(json);
    CHECK_MSG(t && v, "%s %s", where, json);
    cJSON_DeleteItemFromObject(t, key);
    cJSON_AddItemToObject(t, key, v);
    char err[400] = "";
    cJSON *j = check_judge(f, expect, err, sizeof err);
    CHECK_MSG(!j && strstr(err, want), "%s.%s = %s: %s, want bad input naming '%s'", where, key,
              json, j ? "judged" : err, want);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_bad_figures(void) {
    expect_bad("d2d", "value", "1e999", "figures.memory.d2d: value inf");  // cJSON: infinity
    expect_bad("d2d", "value", "\"fast\"", "figures.memory.d2d: needs");
    expect_bad("d2d", "value", "{}", "figures.memory.d2d: needs");
    expect_bad("d2d", "value", "-5", "not a finite rate above 0");
    expect_bad("d2d", "value", "0", "not a finite rate above 0");
    expect_bad("figures", "memory.d2d", "{}", "figures.memory.d2d: needs");
    expect_bad("figures", "memory.d2d", "null", "figures.memory.d2d: needs");
    expect_bad("d2d", "samples", "[1700, 1e999]", "memory.d2d.samples[1]");
    expect_bad("d2d", "unit", "\"MB/s\"", "unit must be \"GB/s\"");
    expect_bad("health", "throttle_reasons", "1e30", "health.throttle_reasons");
    // an unknown bit (1024) is kept and named (test_check_health); beyond bit 63 is no bitmask
    expect_bad("health", "throttle_reasons", "36893488147419103232", "health.throttle_reasons");
    expect_bad("health", "throttle_reasons", "4.5", "health.throttle_reasons");
    expect_bad("health", "remapped_rows_failed", "2", "health.remapped_rows_failed");
    expect_bad("health", "remapped_rows_pending", "-1", "health.remapped_rows_pending");
    expect_bad("health", "temperature_c", "-300", "health.temperature_c");
    expect_bad("health", "temperature_c", "1000", "health.temperature_c");
    expect_bad("health", "ecc", "\"on\"", "health.ecc");
    expect_bad("health", "ecc_uncorrected_volatile", "0.5", "health.ecc_uncorrected_volatile");
    expect_bad("link", "pcie_gen", "9", "link.pcie_gen");
    expect_bad("link", "pcie_width", "64", "link.pcie_width");
    expect_bad("link", "pcie_width", "12", "link.pcie_width");
    expect_bad("link", "pcie_width_max", "0.5", "link.pcie_width_max");
    expect_bad("link", "pcie_gen_max", "0", "link.pcie_gen_max");
    expect_bad("link", "pcie_gen", "5", "above its maximum");  // gen5 on a gen4 maximum
    expect_bad("gpu", "emulated", "\"true\"", "emulated: must be true or false");
    expect_bad("gpu", "name", "5", "name: must be a string");
    expect_bad("gpu", "name", "\"A100\\u001b[2J\"", "name: holds a control character");
    expect_bad("gpu", "device", "\"cuda:1\"", "\"cuda:1\" is listed twice");
    expect_bad("numerics", "numerics.golden", "true", "numerics.numerics.golden");
}

// The outlier rule against the definition, brute force: each GPU against the median of its
// siblings (bench_median of the others' figures).
static void test_outliers_brute_force(void) {
    enum { N = 11 };
    cJSON *f = node(N, 0.9);
    double v[N];
    for (int i = 0; i < N; i++) {
        v[i] = 2039 * (0.55 + 0.04 * ((i * 7) % N));  // distinct, some far below the others
        set(fig(f, i, "memory.d2d"), "value", v[i]);
    }
    cJSON *j = judge(f);
    for (int i = 0; i < N; i++) {
        double o[N];
        int m = 0;
        for (int k = 0; k < N; k++)
            if (k != i) o[m++] = v[k];
        double med = bench_median(o, m), ratio = v[i] / med;
        const char *want = ratio < 0.75 ? CHECK_FAIL : ratio < 0.9 ? CHECK_WARN : "";
        CHECK_MSG(!strcmp(verdict(j, i, "outlier.memory.d2d"), want),
                  "cuda:%d ratio %.3f: %s, want %s", i, ratio, verdict(j, i, "outlier.memory.d2d"),
                  want);
        const cJSON *c;
        cJSON_ArrayForEach(
            c,
            cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), i),
                                "checks")) if (!strcmp(cJSON_GetObjectItem(c, "check")->valuestring,
                                                       "outlier.memory.d2d"))
            CHECK_MSG(cJSON_GetObjectItem(c, "expected")->valuedouble == med,
                      "cuda:%d: median %g, want %g", i,
                      cJSON_GetObjectItem(c, "expected")->valuedouble, med);
    }
    cJSON_Delete(j);
    cJSON_Delete(f);
}

// The expectations file with its first FROM replaced by TO: refused, naming WANT.
static void expect_file_bad(const char *text, const char *from, const char *to, const char *want) {
    const char *at = strstr(text, from);
    CHECK_MSG(at, "'%s' is not in the expectations file", from);
    if (!at) return;
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *t = malloc(n), err[600] = "";
    snprintf(t, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    cJSON *e = check_expect_parse(t, "x.json", err, sizeof err);
    CHECK_MSG(!e && strstr(err, want) && strstr(err, "x.json"), "%s -> %s: %s, want '%s'", from, to,
              e ? "accepted" : err, want);
    cJSON_Delete(e);
    free(t);
}

static void test_expect_file(const char *path) {
    char *text = bench_read_file(path, NULL);
    CHECK(text);
    if (!text) return;
    char err[600];
    cJSON *ok = check_expect_parse(text, "x.json", err, sizeof err);
    CHECK_MSG(ok, "%s", err);
    cJSON_Delete(ok);
    expect_file_bad(text, "\"hbm_GBps\": 2039", "\"hbm_GBps\": 1e999", "\"hbm_GBps\" is not");
    expect_file_bad(text, "\"pcie_gen\": 4", "\"pcie_gen\": 99",
                    "\"pcie_gen\" is not a PCIe generation");
    expect_file_bad(text, "\"pcie_width\": 16", "\"pcie_width\": 0.5",
                    "\"pcie_width\" is not a PCIe width");
    expect_file_bad(text, "\"bf16\": 312", "\"bf16\": 1e999", "tflops.bf16 is not");
    expect_file_bad(text, "\"nvlink_GBps\": 600", "\"nvlink_GBps\": -600",
                    "\"nvlink_GBps\" is not");
    expect_file_bad(text, "\"hbm_GBps\": 2039", "\"hbm_GBps\": 2039, \"hbm_GBps\": 20390",
                    "duplicate key \"hbm_GBps\" in models[3]");
    expect_file_bad(text, "\"format\"", "\"outlier\": {\"warn\": 1, \"fail\": 1}, \"format\"",
                    "duplicate key \"outlier\"");
    expect_file_bad(text, "\"models\": [", "\"models\": [] } trailing {\"x\": [",
                    "text after the value");
    expect_file_bad(text, "What each GPU", "What \xff each GPU", "invalid UTF-8");
    expect_file_bad(text, "What each GPU", "What \xc0\xaf each GPU",
                    "invalid UTF-8");  // overlong '/'
    expect_file_bad(text, "\"model\": \"A100 SXM4 80GB\"", "\"model\": \"   \"",
                    "\"model\" is blank");
    expect_file_bad(text, "\"model\": \"A100 SXM4 80GB\"", "\"model\": \"A100\\u0000x\"",
                    "\\u0000");
    expect_file_bad(text, "\"A100-SXM4-80GB\", ", "\"A100-SXM4-80GB\", \"nvidia a100-pcie-40gb\", ",
                    "is also models[0]");
    expect_file_bad(text, "\"outlier\": {", "\"physical_limit\": {\"margin\": 5}, \"outlier\": {",
                    "physical_limit");
    expect_file_bad(text, "\"hbm_GBps\": 2039,",
                    "\"hbm_GBps\": 2039, \"checks\": {\"memory.d2d\": 1e8},",
                    "faster than this GPU can be");
    expect_file_bad(text, "\"warn\": 0.80, \"fail\": 0.70", "\"warn\": 0.80, \"fail\": 1e999",
                    "memory.d2d");
    expect_file_bad(text, "\"warn\": 0.80, \"fail\": 0.70", "\"warn\": 0.80, \"fail\": 1e-9",
                    "needs 0.01 <= fail");   // a FAIL threshold that fails nothing
    free(text);
}

// A check results directory written as `bench check --out` writes it, with the fields it is
// judged by: complete, write_errors, emulated, the check section (figures judged now), and, when
// SPOIL is given, a figure set after judging (a recorded PASS for a figure that cannot be true).
static void write_run(const char *dir, const char *name, bool complete, bool write_error,
                      bool host_fail, double spoil) {
    mkdir(dir, 0755);
    cJSON *f = node(2, 0.85);
    for (int g = 0; g < 2; g++)
        cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), g), "name",
                                  cJSON_CreateString(name));
    cJSON *host = cJSON_AddObjectToObject(f, "host");
    cJSON_AddStringToObject(
        cJSON_AddObjectToObject(cJSON_AddObjectToObject(host, "numerics"), "reference.golden"),
        "result", host_fail ? "fail" : "pass");
    cJSON *s = cJSON_CreateObject();
    cJSON_AddBoolToObject(s, "complete", complete);
    cJSON_AddBoolToObject(s, "emulated", false);
    cJSON *j = judge(f);
    if (spoil > 0)
        for (int g = 0; g < 2; g++) set(fig(j, g, "memory.d2d"), "value", spoil);
    cJSON_AddItemToObject(s, "check", j);
    cJSON *we = cJSON_AddArrayToObject(s, "write_errors");
    if (write_error) cJSON_AddItemToArray(we, cJSON_CreateString("check.csv"));
    char path[700], *text = cJSON_Print(s);
    snprintf(path, sizeof path, "%s/status.json", dir);
    FILE *o = fopen(path, "w");
    if (o) {
        fputs(text, o);
        fclose(o);
    }
    free(text);
    cJSON_Delete(s);
    cJSON_Delete(f);
}

static double fleet_median(const cJSON *e, const char *device, const char *check, const char *key) {
    const cJSON *v =
        cJSON_GetObjectItem(cJSON_GetObjectItem(check_expect_model(e, device), key), check);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void test_write_expect_refusals(const char *tmp) {
    char d[9][500];
    const char *what[9] = {"good",    "good2",     "incomplete", "write-error", "host-fail",
                           "d2d-1e8", "d2d-1e308", "emulated",   "blank-name"};
    for (int i = 0; i < 9; i++) snprintf(d[i], sizeof d[i], "%s/we21-%s", tmp, what[i]);
    const char *a100 = "NVIDIA A100-SXM4-80GB";
    write_run(d[0], a100, true, false, false, 0);
    write_run(d[1], a100, true, false, false, 0);
    write_run(d[2], a100, false, false, false, 0);
    write_run(d[3], a100, true, true, false, 0);
    write_run(d[4], a100, true, false, true, 0);
    write_run(d[5], a100, true, false, false, 1e8);    // recorded PASS, 10^8 GB/s
    write_run(d[6], a100, true, false, false, 1e308);  // the median of two overflows
    write_run(d[7], a100, true, false, false, 0);
    write_run(d[8], "NVIDIA    ", true, false, false, 0);  // a model name of spaces
    char csv[600];  // a run on the emulated device, said only by its samples' column
    snprintf(csv, sizeof csv, "%s/.x.samples.csv", d[7]);
    FILE *o = fopen(csv, "w");
    if (o) {
        fputs(
            "suite,benchmark,param,x,metric,unit,repetition,value,emulated\n"
            "check,memory.d2d,cuda:0,,GB/s,GB/s,0,1,TRUE\n",
            o);
        fclose(o);
    }
    char again[600];  // d[0] named twice, once through "."
    snprintf(again, sizeof again, "%s/.", d[0]);
    char *dirs[] = {d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], again}, err[2000];
    cJSON *e = check_expect_from_runs(expect, dirs, 10, err, sizeof err);
    CHECK_MSG(e, "%s", err);
    if (!e) return;
    const char *left[] = {"we21-incomplete (incomplete",
                          "we21-write-error (incomplete",
                          "we21-host-fail (failed",
                          "we21-d2d-1e8 cuda:0 (it had a FAIL",
                          "we21-d2d-1e308 cuda:0 (it had a FAIL",
                          "we21-emulated (a run on the emulated",
                          "we21-blank-name cuda:0 (its name is not a model name",
                          "counted once"};
    for (size_t k = 0; k < sizeof left / sizeof *left; k++)
        CHECK_MSG(strstr(err, left[k]), "the note lacks '%s': %s", left[k], err);
    // two healthy runs of 2 GPUs each: 4 figures, the median of which is 0.85 x the datasheet
    CHECK_MSG(fleet_median(e, a100, "memory.d2d", "checks_from") == 4, "counted %g",
              fleet_median(e, a100, "memory.d2d", "checks_from"));
    CHECK_MSG(fabs(fleet_median(e, a100, "memory.d2d", "checks") - 2039 * 0.85) < 1e-9, "median %g",
              fleet_median(e, a100, "memory.d2d", "checks"));
    char *text = cJSON_Print(e), err2[600];  // what it writes, --expect reads
    cJSON *back = check_expect_parse(text, "fleet.json", err2, sizeof err2);
    CHECK_MSG(back, "%s", err2);
    cJSON_Delete(back);
    free(text);
    cJSON_Delete(e);
    char *none[] = {d[2], d[8]};  // nothing left: bad input, with what was left out and why
    e = check_expect_from_runs(expect, none, 2, err, sizeof err);
    CHECK_MSG(!e && strstr(err, "no GPU figures") && strstr(err, "name is not a model name"), "%s",
              err);
    cJSON_Delete(e);
}

// --gpus N FILE: writes a healthy node of N A100s to FILE, cuda:1234 (when there) with a slow
// bf16 GEMM, for `bench check --from-figures` to judge (the outlier rule on thousands of GPUs).
static int write_many(int n, const char *path) {
    cJSON *f = node(n > 0 ? n : 1, 0.9);
    if (n > 1234) set(fig(f, 1234, "gemm.bf16"), "value", 312 * 0.5);
    char *text = cJSON_PrintUnformatted(f);
    FILE *o = fopen(path, "w");
    bool ok = text && o && fputs(text, o) >= 0;
    if (o) ok = fclose(o) == 0 && ok;
    free(text);
    cJSON_Delete(f);
    return ok ? 0 : 1;
}

// ---- issue 25: levels, error counters and fault codes (harness/check/check_levels.c) -------------------

// The code of check NAME's line on GPU G ("" when none).
static const char *code_of(const cJSON *j, int g, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), g), "checks"))
        if (!strcmp(cJSON_GetObjectItem(c, "check")->valuestring, name)) {
            const cJSON *k = cJSON_GetObjectItem(c, "code");
            return cJSON_IsString(k) ? k->valuestring : "";
        }
    return "";
}

// A counter sample: every counter 0 but KEY at V (KEY NULL: none).
static cJSON *sample(const char *key, double v) {
    static const char *const keys[] = {"pcie_replay", "nvlink_links_active", "nvlink_crc", "nvlink_replay",
                                       "nvlink_recovery", "ecc_corrected_volatile", "ecc_uncorrected_volatile"};
    cJSON *o = cJSON_CreateObject();
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        cJSON_AddNumberToObject(o, keys[k], key && !strcmp(key, keys[k]) ? v : k == 1 ? 4 : 0);
    return o;
}

// GPU G's counters: KEY grows from 0 to V during the run; XID (0: none) arrives.
static void plant_counters(cJSON *f, int g, const char *key, double v, int xid) {
    cJSON *gp = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), g);
    cJSON_DeleteItemFromObject(gp, "counters");
    cJSON *c = cJSON_AddObjectToObject(gp, "counters");
    cJSON_AddNumberToObject(c, "seconds", 60);
    cJSON_AddItemToObject(c, "start", sample(NULL, 0));
    cJSON_AddItemToObject(c, "end", sample(key, v));
    cJSON *x = cJSON_AddArrayToObject(c, "xid");
    if (xid) cJSON_AddItemToArray(x, cJSON_CreateNumber(xid));
}

static void test_levels_and_codes(void) {
    // the code table: TDM-Fnnn, each once, with a fault, a remedy and a source
    int n = 0;
    for (const check_code *c = check_codes(); c->code; c++, n++) {
        int d = -1;
        CHECK_MSG(strlen(c->code) == 8 && sscanf(c->code, "TDM-F%3d", &d) == 1 && d >= 0, "%s", c->code);
        CHECK(c->title[0] && c->remedy[0] && c->source[0]);
        for (const check_code *o = check_codes(); o != c; o++) CHECK_MSG(strcmp(o->code, c->code), "%s twice", c->code);
        CHECK(check_code_of(c->code) == c);
    }
    CHECK(n >= 30 && !check_code_of("TDM-F999"));
    // the level table: levels 1 to 4; level 1 has no load
    for (const check_level_row *r = check_level_rows(); r->check; r++) CHECK(r->level >= 1 && r->level <= 4);
    static const char *const loads[] = {"gemm.bf16", "memory.d2d", "numerics.golden", "train.gpt.f32",
                                        "pcie.h2d", "multi.peer", "nvml.clocks", "reference.golden"};
    for (size_t k = 0; k < sizeof loads / sizeof *loads; k++)
        CHECK_MSG(!check_level_runs(1, loads[k]) && check_level_runs(2, loads[k]), "%s", loads[k]);
    CHECK(check_level_runs(1, "nvml.xid") && check_level_runs(1, "pcie.link") && !check_level_runs(2, "sustained.load") &&
          check_level_runs(3, "sustained.load") && !check_level_runs(3, "memory.test") &&
          check_level_runs(4, "memory.test") && check_level_row_of("memory.test")->implemented);
    CHECK(check_level_budget_s(1, false, 8, NAN) == 30 && check_level_budget_s(2, true, 2, NAN) == 240 &&
          check_level_budget_s(3, true, 1, 5) == 125 && check_level_budget_s(4, true, 1, NAN) == 3420 &&
          check_level_budget_s(2, false, 1, NAN) == 600);

    // planted series, judged: the rules at their edges, each FAIL and WARN with its code
    cJSON *f = node(2, 1.0);
    cJSON_AddNumberToObject(f, "level", 2);
    plant_counters(f, 0, "pcie_replay", 79, 0);   // 79 replays: WARN; 80: FAIL
    plant_counters(f, 1, NULL, 0, 48);
    cJSON *j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.pcie_replay"), CHECK_WARN) && !strcmp(code_of(j, 0, "nvml.pcie_replay"), "TDM-F032"));
    CHECK(!strcmp(verdict(j, 1, "nvml.xid"), CHECK_FAIL) && !strcmp(code_of(j, 1, "nvml.xid"), "TDM-F060"));
    CHECK(!strcmp(verdict(j, 0, "nvml.xid"), CHECK_PASS) && !code_of(j, 0, "nvml.xid")[0]);
    // a level's figures lack driver and persistence here: absent, counted (and the FAIL wins)
    CHECK(!strcmp(verdict(j, 0, "driver"), CHECK_ABSENT) && check_exit_code(j) == CHECK_EXIT_FAIL);
    cJSON_Delete(j);
    plant_counters(f, 0, "pcie_replay", CHECK_PCIE_REPLAY_FAIL, 0);
    plant_counters(f, 1, "nvlink_crc", 1, 0);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.pcie_replay"), CHECK_FAIL));
    CHECK(!strcmp(verdict(j, 1, "nvml.nvlink"), CHECK_WARN) && !strcmp(code_of(j, 1, "nvml.nvlink"), "TDM-F070"));
    cJSON_Delete(j);
    plant_counters(f, 0, "nvlink_recovery", 1, 0);
    plant_counters(f, 1, "ecc_uncorrected_volatile", 1, 0);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.nvlink"), CHECK_FAIL) && !strcmp(code_of(j, 0, "nvml.nvlink"), "TDM-F071"));
    CHECK(!strcmp(verdict(j, 1, "nvml.ecc_delta"), CHECK_FAIL) && !strcmp(code_of(j, 1, "nvml.ecc_delta"), "TDM-F056"));
    cJSON_Delete(j);
    plant_counters(f, 0, "ecc_corrected_volatile", 1, 0);
    plant_counters(f, 1, NULL, 0, 0);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.ecc_delta"), CHECK_WARN) && !strcmp(code_of(j, 0, "nvml.ecc_delta"), "TDM-F057"));
    CHECK(!strcmp(verdict(j, 1, "nvml.pcie_replay"), CHECK_PASS) && !strcmp(verdict(j, 1, "nvml.ecc_delta"), CHECK_PASS));
    cJSON_Delete(j);
    // figures from before the levels: no counter lines (not recorded then); with a level: absent
    cJSON_DeleteItemFromObject(f, "level");
    cJSON *gs = cJSON_GetObjectItem(f, "gpus");
    for (int g = 0; g < 2; g++) cJSON_DeleteItemFromObject(cJSON_GetArrayItem(gs, g), "counters");
    j = judge(f);
    CHECK(!verdict(j, 0, "nvml.xid")[0] && check_exit_code(j) == CHECK_EXIT_PASS);
    cJSON_Delete(j);
    cJSON_AddNumberToObject(f, "level", 2);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "nvml.xid"), CHECK_ABSENT) && check_exit_code(j) == CHECK_EXIT_INCOMPLETE);
    cJSON_Delete(j);
    // level 3 without the sustained load's series: absent, incomplete (test_check_sustained.c has
    // the series' rules)
    set(f, "level", 3);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 1, "sustained.load"), CHECK_ABSENT) && check_exit_code(j) == CHECK_EXIT_INCOMPLETE);
    cJSON_Delete(j);
    // level 4: the memory test is expected of every GPU (absent: incomplete); a word read wrong is
    // a FAIL with its own code, a test that could not run a FAIL as a run that could not
    set(f, "level", 4);
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "memory.test"), CHECK_ABSENT) && check_exit_code(j) == CHECK_EXIT_INCOMPLETE);
    cJSON_Delete(j);
    for (int g = 0; g < 2; g++) {
        cJSON *nm = cJSON_GetObjectItem(cJSON_GetArrayItem(gs, g), "numerics");
        CHECK(nm != NULL);
        cJSON *mt = cJSON_AddObjectToObject(nm, "memory.test");
        cJSON_AddStringToObject(mt, "result", g ? "error" : "fail");
        cJSON_AddStringToObject(mt, "detail", g ? "tested 40 % of the free memory" : "1 word read wrong");
    }
    j = judge(f);
    CHECK(!strcmp(verdict(j, 0, "memory.test"), CHECK_FAIL) && !strcmp(code_of(j, 0, "memory.test"), "TDM-F058"));
    CHECK(!strcmp(verdict(j, 1, "memory.test"), CHECK_FAIL) && !strcmp(code_of(j, 1, "memory.test"), "TDM-F002"));
    cJSON_Delete(j);
    for (int g = 0; g < 2; g++)
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cJSON_GetArrayItem(gs, g), "numerics"), "memory.test");
    // the budget: past it a WARN with its code, at it a PASS
    set(f, "level", 2);
    set(f, "budget_s", 240);
    set(f, "elapsed_s", 240);
    j = judge(f);
    const cJSON *hc = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "host"), "checks"), 0);
    CHECK(hc && !strcmp(cJSON_GetObjectItem(hc, "verdict")->valuestring, CHECK_PASS));
    cJSON_Delete(j);
    set(f, "elapsed_s", 240.5);
    j = judge(f);
    hc = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "host"), "checks"), 0);
    CHECK(hc && !strcmp(cJSON_GetObjectItem(hc, "verdict")->valuestring, CHECK_WARN) &&
          !strcmp(cJSON_GetObjectItem(hc, "code")->valuestring, "TDM-F090"));
    cJSON_Delete(j);
    // a level that is none, a counter that goes back: bad input
    set(f, "level", 5);
    char err[300];
    CHECK(!check_judge(f, expect, err, sizeof err) && strstr(err, "level"));
    cJSON_Delete(f);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[3], "--gpus")) return write_many(atoi(argv[4]), argv[2]);
    if (argc != 3) {
        fprintf(stderr,
                "usage: test_check EXPECTATIONS_JSON TMPDIR\n"
                "       test_check EXPECTATIONS_JSON FILE --gpus N\n");
        return 2;
    }
    char err[400];
    expect = check_expect_load(argv[1], err, sizeof err);
    CHECK_MSG(expect, "%s", err);
    if (!expect) CHECK_DONE("test_check");
    test_thresholds();
    test_link_and_health();
    test_outliers();
    test_no_gpu_and_emulated();
    test_parse();
    test_write_expect(argv[2]);
    test_physical_limits();
    test_incomplete();
    test_bad_figures();
    test_outliers_brute_force();
    test_expect_file(argv[1]);
    test_write_expect_refusals(argv[2]);
    test_levels_and_codes();
    cJSON_Delete(expect);
    CHECK_DONE("test_check");
}

/* test_check.c — `bench check`'s judging without a GPU (harness/check_judge.c, check_expect.c):
 * the thresholds at their edges, the datasheet expectations, the PCIe link rule, NVML's readings,
 * the outlier rule, the emulated device and no GPU, the expectations file's validation, and
 * --write-expect's medians (recorded check results in temporary directories).
 * usage: test_check EXPECTATIONS_JSON TMPDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"            // the tests' CHECK macros (suites/tests/check.h)
#include "harness/check.h"    // bench check's parts

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

static cJSON *node(int n, double scale) {
    cJSON *f = cJSON_CreateObject();
    cJSON *gs = cJSON_AddArrayToObject(f, "gpus");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(gs, gpu(i, "NVIDIA A100-SXM4-80GB", scale));
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
    cJSON *num = cJSON_AddObjectToObject(g, "numerics");   // its numerics are judged
    cJSON_AddStringToObject(cJSON_AddObjectToObject(num, "numerics.golden"), "result", "fail");
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
    cJSON_AddItemToObject(s, "check", judge(f));
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

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_check EXPECTATIONS_JSON TMPDIR\n");
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
    cJSON_Delete(expect);
    CHECK_DONE("test_check");
}

/* test_check_sustained.c — the judge of `bench check`'s sustained load (level 3) and pulsed load
 * (level 4) without a GPU (harness/check/check_sustained_judge.c through check_judge): a recorded healthy
 * level-2 node (suites/tests/check/level2-healthy.json) given planted series — a healthy one that
 * passes, an SM clock that drops a minute into targeted power (with and without the power cap), a
 * hw thermal throttle from t = 60 s, hw slowdown, the sw power cap alone, throughput that decays,
 * targeted power below 0.75 x the fleet's figure and below the datasheet's threshold, targeted
 * stress that misses its target, the power brake during the pulses, NVML's violation times per
 * phase (hw slowdown attributed by them, a thermal or board-limit violation no sample saw, reason
 * bits above 0x1ff kept and named), an emulated GPU, a series that
 * is absent or whose load failed — and malformed series, refused as bad input with the field named;
 * and tdm_device_telemetry_read on the cpu (unsupported).
 * usage: test_check_sustained EXPECTATIONS_JSON LEVEL2_HEALTHY_JSON */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"            // the tests' CHECK macros (suites/tests/check.h)
#include "harness/check/check.h"    // bench check's parts
#include "harness/fileio.h"
#include "tandem/tandem.h"

static cJSON *expect, *healthy;

// The planted series: a sample every 3 s; 2 calibrate samples, 60 of targeted stress (t 6 to
// 183 s), 60 of targeted power (t 186 to 363 s). An A100 SXM4 (bf16 312 TFLOP/s datasheet):
// 250 TFLOP/s at full speed (0.80 of it), stress held at 200 (0.8 x 250), 1410 MHz, 300 W,
// 60 C, no clocks-event reason.
#define N_CAL 2
#define N_PHASE 60
#define T_STEP 3.0
#define T_POWER (T_STEP * (N_CAL + N_PHASE))   // the first targeted power sample's time

static cJSON *series(bool pulsed) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "n", 8192);
    cJSON_AddNumberToObject(s, "window_s", 0.5);
    static const char *const keys[] = {"t_s", "sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c",
                                       "throttle_reasons", "tflops"};
    cJSON *a[8];
    for (int k = 0; k < 7; k++) a[k] = cJSON_AddArrayToObject(s, keys[k]);
    a[7] = cJSON_AddArrayToObject(s, "phase");
    int n = pulsed ? 2 * N_PHASE : N_CAL + 2 * N_PHASE;
    for (int i = 0; i < n; i++) {
        const char *ph = pulsed ? (i / 2 % 2 ? "off" : "on")
                         : i < N_CAL ? "calibrate" : i < N_CAL + N_PHASE ? "stress" : "power";
        bool idle = !strcmp(ph, "off");
        double tf = idle ? 0 : !strcmp(ph, "stress") ? 200 : 250;
        double v[7] = {i * T_STEP, idle ? 210 : 1410, 1593, idle ? 60 : 300, 60, 0, tf};
        for (int k = 0; k < 7; k++) cJSON_AddItemToArray(a[k], cJSON_CreateNumber(v[k]));
        cJSON_AddItemToArray(a[7], cJSON_CreateString(ph));
    }
    if (!pulsed) cJSON_AddNumberToObject(s, "target_tflops", 200);
    cJSON *m = cJSON_AddObjectToObject(s, "median_tflops");
    if (pulsed) cJSON_AddNumberToObject(m, "on", 250);
    else {
        cJSON_AddNumberToObject(m, "calibrate", 250);
        cJSON_AddNumberToObject(m, "stress", 200);
        cJSON_AddNumberToObject(m, "power", 250);
    }
    cJSON_AddStringToObject(s, "nvml", "");
    return s;
}

// The other checks of levels 3 and 4, passed: the silent data corruption records (the same
// digests on every GPU of the node) and, at level 4, the memory test.
static void other_checks(cJSON *g, int level) {
    static const char *const sdc =
        "{\"sdc.gemm\": {\"repeats\": 20, \"mismatches\": 0, \"first_mismatch\": null, \"dtype\": \"bf16\","
        " \"shape\": [4096, 4096, 4096], \"digest\": \"%s\", \"seconds\": 10},"
        " \"sdc.train\": {\"fingerprints\": [{\"digest\": \"%s\", \"build\": \"tandem\", \"libs\": \"cuBLAS\","
        " \"gpu\": \"%s\", \"emulated\": false, \"precision\": \"f32\", \"model\": \"gpt:L2-H2-D32-T16-V67\","
        " \"steps\": 50, \"final_loss\": 3.25, \"final_loss_bits\": \"0x40500000\"},"
        " {\"digest\": \"%s\", \"build\": \"tandem\", \"libs\": \"cuBLAS\", \"gpu\": \"%s\", \"emulated\": false,"
        " \"precision\": \"bf16\", \"model\": \"gpt:L2-H2-D32-T16-V67\", \"steps\": 50, \"final_loss\": 3.5,"
        " \"final_loss_bits\": \"0x40600000\"}], \"seconds\": 4}}";
    char text[2048], a[65], b[65], c[65];
    memset(a, 'a', 64), memset(b, 'b', 64), memset(c, 'c', 64), a[64] = b[64] = c[64] = '\0';
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(g, "name"));
    snprintf(text, sizeof text, sdc, a, b, name, c, name);
    cJSON *rec = cJSON_Parse(text);
    CHECK(rec != NULL);
    cJSON_AddItemToObject(g, "sdc", rec);
    if (level >= 4) {
        cJSON *mt = cJSON_AddObjectToObject(cJSON_GetObjectItem(g, "numerics"), "memory.test");
        cJSON_AddStringToObject(mt, "result", "pass");
        cJSON_AddNumberToObject(mt, "fraction", 0.95);   // a pass covers 90 % of the free memory at least
        cJSON_AddNumberToObject(mt, "fraction", 0.95);   // a pass covers >= 90 % of the free memory
        cJSON_AddNumberToObject(mt, "errors", 0);
    }
}

// The recorded healthy node at LEVEL, each GPU with healthy series (level 4: pulsed too) and its
// other level-3 and level-4 checks passed.
static cJSON *node(int level) {
    cJSON *f = cJSON_Duplicate(healthy, true);
    cJSON_DeleteItemFromObject(f, "level");
    cJSON_AddNumberToObject(f, "level", level);
    cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(f, "gpus")) {
        cJSON *s = cJSON_AddObjectToObject(g, "series");
        cJSON_AddItemToObject(s, "sustained.load", series(false));
        if (level >= 4) cJSON_AddItemToObject(s, "pulsed.load", series(true));
        other_checks(g, level);
    }
    return f;
}

static cJSON *series_of(cJSON *f, int g, const char *name) {
    return cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), g), "series"),
                               name);
}

// Sets KEY of GPU G's series NAME to V at every sample of PHASE (NULL: any) from time T0 on.
static void plant(cJSON *f, int g, const char *name, const char *key, const char *phase, double t0, double v) {
    cJSON *s = series_of(f, g, name);
    cJSON *t = cJSON_GetObjectItem(s, "t_s"), *ph = cJSON_GetObjectItem(s, "phase"), *a = cJSON_GetObjectItem(s, key);
    int n = cJSON_GetArraySize(t);
    for (int i = 0; i < n; i++)
        if (cJSON_GetArrayItem(t, i)->valuedouble >= t0 &&
            (!phase || !strcmp(cJSON_GetArrayItem(ph, i)->valuestring, phase)))
            cJSON_ReplaceItemInArray(a, i, cJSON_CreateNumber(v));
}

// A phase's median rate set to v, with its windows (a median is its windows': the judge refuses
// one that is not).
static void set_median(cJSON *f, int g, const char *name, const char *phase, double v) {
    plant(f, g, name, "tflops", phase, 0, v);
    cJSON *m = cJSON_GetObjectItem(series_of(f, g, name), "median_tflops");
    cJSON_DeleteItemFromObject(m, phase);
    cJSON_AddNumberToObject(m, phase, v);
}

static const cJSON *line(const cJSON *j, int g, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), g), "checks"))
        if (!strcmp(cJSON_GetObjectItem(c, "check")->valuestring, name)) return c;
    return NULL;
}

static const char *field(const cJSON *j, int g, const char *name, const char *key) {
    const cJSON *c = line(j, g, name);
    const cJSON *v = c ? cJSON_GetObjectItem(c, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : "";
}

static cJSON *judge(const cJSON *f, const cJSON *e) {
    char err[400];
    cJSON *j = check_judge(f, e, err, sizeof err);
    CHECK_MSG(j, "%s", err);
    return j;
}

// Line NAME of GPU G has VERDICT, CODE ("" none) and a note holding NOTE ("" anything).
#define WANT(j, g, name, verdict, code, note)                                                            \
    CHECK_MSG(!strcmp(field(j, g, name, "verdict"), verdict) && !strcmp(field(j, g, name, "code"), code) && \
                  strstr(field(j, g, name, "note"), note),                                               \
              "cuda:%d %s: %s %s '%s', want %s %s '%s'", g, name, field(j, g, name, "verdict"),          \
              field(j, g, name, "code"), field(j, g, name, "note"), verdict, code, note)

static const char *const lines3[] = {"sustained.stress", "sustained.power", "sustained.clocks", "sustained.decay",
                                     "sustained.throttle"};

static void test_healthy(void) {
    cJSON *f = node(3), *j = judge(f, expect);
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < 5; k++) WANT(j, g, lines3[k], CHECK_PASS, "", "");
    CHECK(!line(j, 0, "pulsed.load") && check_exit_code(j) == CHECK_EXIT_PASS);
    cJSON_Delete(j);
    cJSON_Delete(f);
    f = node(4);   // level 4: pulsed too, and the memory test passed
    j = judge(f, expect);
    WANT(j, 1, "pulsed.load", CHECK_PASS, "", "");
    CHECK(check_exit_code(j) == CHECK_EXIT_PASS);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_clock_drop(void) {
    // a minute into targeted power the SM clock falls by 22 %, no power cap: FAIL
    cJSON *f = node(3);
    plant(f, 0, "sustained.load", "sm_clock_mhz", "power", T_POWER + 60, 1100);
    cJSON *j = judge(f, expect);
    WANT(j, 0, "sustained.clocks", CHECK_FAIL, "TDM-F103", "without a power cap");
    WANT(j, 1, "sustained.clocks", CHECK_PASS, "", "");
    CHECK(check_exit_code(j) == CHECK_EXIT_FAIL);
    cJSON_Delete(j);
    // 10 % is the edge: 1269 MHz (0.9 x 1410) passes, 1268 fails
    plant(f, 0, "sustained.load", "sm_clock_mhz", "power", T_POWER + 60, 1269);
    j = judge(f, expect);
    WANT(j, 0, "sustained.clocks", CHECK_PASS, "", "");
    cJSON_Delete(j);
    plant(f, 0, "sustained.load", "sm_clock_mhz", "power", T_POWER + 60, 1268);
    j = judge(f, expect);
    WANT(j, 0, "sustained.clocks", CHECK_FAIL, "TDM-F103", "");
    cJSON_Delete(j);
    // the same drop at the power cap: normal at full power, said
    plant(f, 0, "sustained.load", "throttle_reasons", "power", T_POWER + 60, 4);
    j = judge(f, expect);
    WANT(j, 0, "sustained.clocks", CHECK_PASS, "", "at its power cap");
    WANT(j, 0, "sustained.throttle", CHECK_PASS, "", "at its power cap");
    cJSON_Delete(j);
    // ... but a smaller drop in targeted stress (0.85), without the cap, still fails, and is the one
    // shown beside the larger one at the cap (0.71)
    plant(f, 0, "sustained.load", "sm_clock_mhz", "power", T_POWER + 60, 1000);
    plant(f, 0, "sustained.load", "sm_clock_mhz", "stress", 120, 1200);
    j = judge(f, expect);
    WANT(j, 0, "sustained.clocks", CHECK_FAIL, "TDM-F103", "of the stress phase");
    CHECK(!strcmp(field(j, 0, "sustained.clocks", "measured"), "") &&
          cJSON_GetObjectItem(line(j, 0, "sustained.clocks"), "measured")->valuedouble == 1200);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_throttle(void) {
    // hw thermal from t = 60 s: FAIL naming it, its share of the samples and when it began
    cJSON *f = node(3);
    plant(f, 1, "sustained.load", "throttle_reasons", NULL, 60, 0x40);
    cJSON *j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_FAIL, "TDM-F105", "hw thermal in 84 % of the samples (from t = 60.0 s)");
    CHECK(!strcmp(field(j, 1, "sustained.throttle", "measured"), "hw thermal"));
    WANT(j, 0, "sustained.throttle", CHECK_PASS, "", "");
    cJSON_Delete(j);
    // hw slowdown with the power cap: the slowdown is named, the cap is not a fault
    plant(f, 1, "sustained.load", "throttle_reasons", NULL, 0, 0);
    plant(f, 1, "sustained.load", "throttle_reasons", "power", T_POWER + 90, 0x8 | 0x4);
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_FAIL, "TDM-F105", "hw slowdown in");
    CHECK(!strstr(field(j, 1, "sustained.throttle", "note"), "sw power cap in"));
    cJSON_Delete(j);
    // sw thermal and the power brake: each named
    plant(f, 1, "sustained.load", "throttle_reasons", "power", T_POWER + 90, 0x20 | 0x80);
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_FAIL, "TDM-F105", "sw thermal in");
    WANT(j, 1, "sustained.throttle", CHECK_FAIL, "TDM-F105", "hw power brake in");
    cJSON_Delete(j);
    // the sw power cap through all of targeted power: normal
    plant(f, 1, "sustained.load", "throttle_reasons", "power", 0, 4);
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_PASS, "", "at its power cap in 49 %");
    CHECK(check_exit_code(j) == CHECK_EXIT_PASS);
    cJSON_Delete(j);
    // no reading at all (no NVML): missing, not counted
    plant(f, 1, "sustained.load", "throttle_reasons", NULL, 0, 0);
    cJSON *a = cJSON_GetObjectItem(series_of(f, 1, "sustained.load"), "throttle_reasons");
    for (int i = 0; i < cJSON_GetArraySize(a); i++) cJSON_ReplaceItemInArray(a, i, cJSON_CreateNull());
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_MISSING, "", "no clocks-event reason was read");
    CHECK(check_exit_code(j) == CHECK_EXIT_PASS);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_throughput(void) {
    // targeted power decays: its last fifth 20 % below its first
    cJSON *f = node(3);
    plant(f, 0, "sustained.load", "tflops", "power", T_POWER + 120, 200);
    cJSON *j = judge(f, expect);
    WANT(j, 0, "sustained.decay", CHECK_FAIL, "TDM-F104", "last fifth");
    WANT(j, 1, "sustained.decay", CHECK_PASS, "", "");
    cJSON_Delete(j);
    cJSON_Delete(f);
    // targeted stress that cannot hold its target: 170 of 200 (0.85 < 0.9)
    f = node(3);
    set_median(f, 1, "sustained.load", "stress", 170);
    j = judge(f, expect);
    WANT(j, 1, "sustained.stress", CHECK_FAIL, "TDM-F101", "FAIL below 0.90 x the target");
    cJSON_Delete(j);
    set_median(f, 1, "sustained.load", "stress", 180);   // 0.9: the edge holds
    j = judge(f, expect);
    WANT(j, 1, "sustained.stress", CHECK_PASS, "", "");
    cJSON_Delete(j);
    // targeted power against the datasheet: 130 of 312 (0.42 < 0.45) FAIL, 170 (0.54) WARN
    set_median(f, 0, "sustained.load", "power", 130);
    set_median(f, 1, "sustained.load", "power", 170);
    j = judge(f, expect);
    WANT(j, 0, "sustained.power", CHECK_FAIL, "TDM-F102", "datasheet");
    WANT(j, 1, "sustained.power", CHECK_WARN, "TDM-F102", "datasheet");
    cJSON_Delete(j);
    // against the fleet's measured gemm.bf16 (300): DCGM's 0.75 x a measured reference
    cJSON *e = cJSON_Duplicate(expect, true);
    cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(e, "models")) {
        cJSON *c = cJSON_AddObjectToObject(m, "checks");
        cJSON_AddNumberToObject(c, "gemm.bf16", 300);
    }
    set_median(f, 0, "sustained.load", "power", 224);   // 0.747
    set_median(f, 1, "sustained.load", "power", 226);   // 0.753: not a FAIL, below 0.9: WARN
    j = judge(f, e);
    WANT(j, 0, "sustained.power", CHECK_FAIL, "TDM-F102", "the fleet's median");
    WANT(j, 1, "sustained.power", CHECK_WARN, "TDM-F102", "the fleet's median");
    cJSON_Delete(j);
    cJSON_Delete(e);
    cJSON_Delete(f);
}

static void test_pulsed(void) {
    // the power brake during the pulses: FAIL with its own code, sustained.load untouched
    cJSON *f = node(4);
    plant(f, 0, "pulsed.load", "throttle_reasons", "on", 30, 0x80);
    cJSON *j = judge(f, expect);
    WANT(j, 0, "pulsed.load", CHECK_FAIL, "TDM-F106", "hw power brake in");
    WANT(j, 0, "sustained.throttle", CHECK_PASS, "", "");
    WANT(j, 1, "pulsed.load", CHECK_PASS, "", "");
    cJSON_Delete(j);
    plant(f, 0, "pulsed.load", "throttle_reasons", NULL, 0, 0x8);
    j = judge(f, expect);
    WANT(j, 0, "pulsed.load", CHECK_FAIL, "TDM-F106", "hw slowdown in 100 %");
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_absent_error_emulated(void) {
    // level 3 without the series: absent, incomplete; a load that failed: FAIL
    cJSON *f = node(3);
    cJSON_DeleteItemFromObject(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0), "series");
    cJSON_AddStringToObject(series_of(f, 1, "sustained.load"), "error", "an illegal memory access");
    cJSON *j = judge(f, expect);
    WANT(j, 0, "sustained.load", CHECK_ABSENT, "", "absent from the figures");
    WANT(j, 1, "sustained.load", CHECK_FAIL, "TDM-F100", "an illegal memory access");
    CHECK(check_exit_code(j) == CHECK_EXIT_FAIL);
    cJSON_Delete(j);
    cJSON_Delete(f);
    // level 4 without the pulses: absent
    f = node(4);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 1), "series"),
                               "pulsed.load");
    j = judge(f, expect);
    WANT(j, 1, "pulsed.load", CHECK_ABSENT, "", "");
    cJSON_Delete(j);
    cJSON_Delete(f);
    // the emulated device: its speed is not judged, even a slow one; a stand-in NVML's throttle is
    f = node(4);
    cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(f, "gpus")) {
        cJSON_DeleteItemFromObject(g, "emulated");
        cJSON_AddBoolToObject(g, "emulated", true);
    }
    set_median(f, 0, "sustained.load", "power", 0.001);
    plant(f, 0, "sustained.load", "sm_clock_mhz", "power", T_POWER + 60, 500);
    cJSON *a = cJSON_GetObjectItem(series_of(f, 0, "sustained.load"), "throttle_reasons");
    for (int i = 0; i < cJSON_GetArraySize(a); i++) cJSON_ReplaceItemInArray(a, i, cJSON_CreateNull());
    a = cJSON_GetObjectItem(series_of(f, 0, "pulsed.load"), "throttle_reasons");
    for (int i = 0; i < cJSON_GetArraySize(a); i++) cJSON_ReplaceItemInArray(a, i, cJSON_CreateNull());
    plant(f, 1, "sustained.load", "throttle_reasons", NULL, 60, 0x40);
    j = judge(f, expect);
    for (int k = 0; k < 5; k++) WANT(j, 0, lines3[k], CHECK_EMULATED, "", "");
    WANT(j, 0, "pulsed.load", CHECK_EMULATED, "", "not judged");
    WANT(j, 1, "sustained.power", CHECK_EMULATED, "", "not judged");
    WANT(j, 1, "sustained.throttle", CHECK_FAIL, "TDM-F105", "hw thermal");
    CHECK(check_exit_code(j) == CHECK_EXIT_FAIL);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

// NVML's violation times per phase: every phase of GPU G's series NAME gets one, each policy 0 s
// but POLICY (NULL: none) in PHASE, which gets V seconds.
static void plant_violation(cJSON *f, int g, const char *name, const char *phase, const char *policy, double v) {
    cJSON *s = series_of(f, g, name);
    cJSON_DeleteItemFromObject(s, "phases");
    cJSON *ph = cJSON_AddObjectToObject(s, "phases");
    static const char *const all[] = {"calibrate", "stress", "power", "on", "off"};
    for (int p = !strcmp(name, "pulsed.load") ? 3 : 0; p < (!strcmp(name, "pulsed.load") ? 5 : 3); p++) {
        cJSON *o = cJSON_AddObjectToObject(ph, all[p]);
        cJSON_AddNumberToObject(o, "seconds", 180);
        cJSON_AddNumberToObject(o, "energy_j", 54000);
        cJSON_AddNumberToObject(o, "mean_power_w", 300);
        cJSON *vs = cJSON_AddObjectToObject(o, "violation_s");
        for (int k = 0; k < TDM_VIOLATION_N; k++) {
            const char *pol = tdm_violation_policy_name(k);
            cJSON_AddNumberToObject(vs, pol, policy && !strcmp(pol, policy) && !strcmp(all[p], phase) ? v : 0);
        }
    }
}

static void test_violations(void) {
    // hw slowdown sampled through the pulses, no thermal, board-limit or reliability violation
    // time: a P-state or clock change (NVML says hw slowdown may be reported then), not a fault
    cJSON *f = node(4);
    plant(f, 0, "pulsed.load", "throttle_reasons", NULL, 0, 0x8);
    plant_violation(f, 0, "pulsed.load", "on", NULL, 0);
    cJSON *j = judge(f, expect);
    WANT(j, 0, "pulsed.load", CHECK_PASS, "", "hw slowdown in 100 % of the samples");
    WANT(j, 0, "pulsed.load", CHECK_PASS, "", "a P-state or clock change, not a fault");
    WANT(j, 0, "pulsed.load", CHECK_PASS, "", "NVML's violation times over 360 s: thermal 0 s");
    cJSON_Delete(j);
    // ... the same with a board-limit violation during the pulses: a fault
    plant_violation(f, 0, "pulsed.load", "on", "board_limit", 0.25);
    j = judge(f, expect);
    WANT(j, 0, "pulsed.load", CHECK_FAIL, "TDM-F106", "board limit 0.25 s");
    CHECK(!strcmp(field(j, 0, "pulsed.load", "measured"), "board limit violation"));
    cJSON_Delete(j);
    // a thermal violation during targeted power that no 2 Hz sample caught: FAIL
    plant_violation(f, 1, "sustained.load", "power", "thermal", 2.5);
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_FAIL, "TDM-F105", "thermal 2.5 s");
    WANT(j, 0, "sustained.throttle", CHECK_PASS, "", "");
    cJSON_Delete(j);
    // the power cap's violation time is normal at full power: said, not failed
    plant_violation(f, 1, "sustained.load", "power", "power", 120);
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_PASS, "", "power cap 120 s");
    cJSON_Delete(j);
    // a sampled hw thermal still fails with violation times that show none
    plant(f, 1, "sustained.load", "throttle_reasons", "power", T_POWER + 90, 0x40);
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_FAIL, "TDM-F105", "hw thermal in");
    cJSON_Delete(j);
    // reason bits NVML defined later (above 0x1ff) are kept and named, not refused
    plant(f, 1, "sustained.load", "throttle_reasons", NULL, 0, 0x200 | 0x4);
    plant(f, 0, "pulsed.load", "throttle_reasons", NULL, 0, 0x1000);
    plant_violation(f, 0, "pulsed.load", "on", NULL, 0);
    j = judge(f, expect);
    WANT(j, 1, "sustained.throttle", CHECK_PASS, "", "unknown 0x200");
    WANT(j, 0, "pulsed.load", CHECK_PASS, "", "unknown 0x1000");
    CHECK(check_exit_code(j) == CHECK_EXIT_PASS);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

// A malformed series: bad input naming WANT. KEY of GPU 0's sustained.load becomes JSON (NULL
// KEY: the series itself is replaced; "" the whole "series").
static void expect_bad(const char *key, const char *json, const char *want) {
    cJSON *f = node(3);
    cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 0), *v = cJSON_Parse(json);
    CHECK_MSG(v, "%s", json);
    if (!key) cJSON_ReplaceItemInObject(cJSON_GetObjectItem(g, "series"), "sustained.load", v);
    else if (!key[0]) cJSON_ReplaceItemInObject(g, "series", v);
    else if (cJSON_GetObjectItem(series_of(f, 0, "sustained.load"), key))
        cJSON_ReplaceItemInObject(series_of(f, 0, "sustained.load"), key, v);
    else cJSON_AddItemToObject(series_of(f, 0, "sustained.load"), key, v);
    char err[400] = "";
    cJSON *j = check_judge(f, expect, err, sizeof err);
    CHECK_MSG(!j && strstr(err, want), "%s = %s: %s, want bad input naming '%s'", key ? key : "(series)", json,
              j ? "judged" : err, want);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

static void test_malformed(void) {
    expect_bad("", "[]", "gpus[0].series: must be an object");
    expect_bad(NULL, "3", "gpus[0].series.sustained.load: must be an object");
    expect_bad("power_w", "[300]", "gpus[0].series.sustained.load.power_w: 1 entries, but t_s has 122");
    expect_bad("t_s", "[0, 1, 2]", "sustained.load.sm_clock_mhz: 122 entries, but t_s has 3");
    expect_bad("phase", "{}", "sustained.load.phase: must be an array");
    expect_bad("tflops", "\"fast\"", "sustained.load.tflops: must be an array");
    expect_bad("tflops", "null", "sustained.load.tflops: must be an array");
    // ... then each entry
    cJSON *f = node(3);
    struct {
        const char *key;
        int i;
        const char *json, *want;
    } cases[] = {{"t_s", 5, "3.0", "sustained.load.t_s[5]: 3 does not come after 12: times must increase"},
                 {"t_s", 0, "-1", "sustained.load.t_s[0]: not a time"},
                 {"t_s", 7, "null", "sustained.load.t_s[7]: not a time"},
                 {"power_w", 3, "\"300 W\"", "sustained.load.power_w[3]: not a power"},
                 {"power_w", 3, "1e999", "sustained.load.power_w[3]: not a power"},
                 {"sm_clock_mhz", 9, "-5", "sustained.load.sm_clock_mhz[9]: not a clock"},
                 {"temperature_c", 2, "400", "sustained.load.temperature_c[2]: not a GPU temperature"},
                 {"throttle_reasons", 4, "-1", "sustained.load.throttle_reasons[4]: not a bitmask"},
                 {"throttle_reasons", 4, "1e20", "sustained.load.throttle_reasons[4]: not a bitmask"},
                 {"throttle_reasons", 4, "4.5", "sustained.load.throttle_reasons[4]: not a bitmask"},
                 {"tflops", 1, "true", "sustained.load.tflops[1]: not a rate"},
                 {"phase", 1, "\"warmup\"", "sustained.load.phase[1]: not a phase"},
                 {"phase", 1, "null", "sustained.load.phase[1]: not a phase"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        cJSON *x = cJSON_Duplicate(f, true);
        cJSON *a = cJSON_GetObjectItem(series_of(x, 0, "sustained.load"), cases[c].key);
        cJSON_ReplaceItemInArray(a, cases[c].i, cJSON_Parse(cases[c].json));
        char err[400] = "";
        cJSON *j = check_judge(x, expect, err, sizeof err);
        CHECK_MSG(!j && strstr(err, cases[c].want), "%s[%d] = %s: %s, want '%s'", cases[c].key, cases[c].i,
                  cases[c].json, j ? "judged" : err, cases[c].want);
        cJSON_Delete(j);
        cJSON_Delete(x);
    }
    cJSON_Delete(f);
    expect_bad("target_tflops", "0", "sustained.load.target_tflops: not a rate above 0");
    expect_bad("median_tflops", "{\"power\": \"x\"}", "sustained.load.median_tflops.power");
    expect_bad("median_tflops", "{\"warmup\": 3}", "sustained.load.median_tflops.warmup");
    expect_bad("window_s", "0", "sustained.load.window_s: not a window");
    expect_bad("error", "7", "sustained.load.error: must be a string");
    expect_bad("power_source", "\"guessed\"", "sustained.load.power_source: not instant, average, mixed or none");
    expect_bad("calibration", "{\"seconds\": -1}", "sustained.load.calibration.seconds: not a number");
    expect_bad("calibration", "{\"warm\": 1}", "sustained.load.calibration.warm: not a key");
    expect_bad("phases", "{\"warmup\": {}}", "sustained.load.phases.warmup: not a phase's object");
    expect_bad("phases", "{\"power\": {\"seconds\": 1, \"energy_j\": -5, \"mean_power_w\": null, \"violation_s\": {}}}",
               "sustained.load.phases.power.energy_j: not a number");
    expect_bad("phases", "{\"power\": {\"seconds\": 1, \"energy_j\": null, \"mean_power_w\": null, \"violation_s\": {\"heat\": 1}}}",
               "sustained.load.phases.power.violation_s.heat: not an NVML perf policy");
    expect_bad("phases", "{\"power\": {\"seconds\": 1, \"energy_j\": null, \"mean_power_w\": null, \"violation_s\": {\"thermal\": -1}}}",
               "sustained.load.phases.power.violation_s.thermal: not seconds");
    // a series of another name
    f = node(3);
    cJSON_AddItemToObject(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f, "gpus"), 1), "series"),
                          "burn.load", cJSON_CreateObject());
    char err[400] = "";
    cJSON *j = check_judge(f, expect, err, sizeof err);
    CHECK_MSG(!j && strstr(err, "gpus[1].series.burn.load: not a series"), "%s", j ? "judged" : err);
    cJSON_Delete(j);
    cJSON_Delete(f);
}

// tdm_device_telemetry_read: the cpu has no such readings (unsupported, said), no out is an error.
static void test_telemetry_api(void) {
    tdm_device_telemetry t;
    CHECK(tdm_device_telemetry_read(TDM_CPU, &t) == TDM_ERR_UNSUPPORTED && strstr(tdm_last_error(), "telemetry"));
    CHECK(tdm_device_telemetry_read(TDM_CPU, NULL) == TDM_ERR_ARG);
    tdm_error_clear();
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_check_sustained EXPECTATIONS_JSON LEVEL2_HEALTHY_JSON\n");
        return 2;
    }
    char err[400];
    expect = check_expect_load(argv[1], err, sizeof err);
    CHECK_MSG(expect, "%s", err);
    size_t n = 0;
    char *text = bench_read_file(argv[2], &n);
    healthy = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK_MSG(healthy, "cannot read %s", argv[2]);
    if (!expect || !healthy) CHECK_DONE("test_check_sustained");
    test_healthy();
    test_clock_drop();
    test_throttle();
    test_throughput();
    test_pulsed();
    test_violations();
    test_absent_error_emulated();
    test_malformed();
    test_telemetry_api();
    cJSON_Delete(expect);
    cJSON_Delete(healthy);
    CHECK_DONE("test_check_sustained");
}

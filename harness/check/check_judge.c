/* check_judge.c — `bench check`'s verdicts: a pure function of the measured figures (check.h) and
 * the expectations file, so that every rule is tested with recorded figures and no GPU
 * (`bench check --from-figures`, suites/tests/check.cmake). Per GPU: numerics and training
 * (pass/fail as their runs said), each performance figure against its model's expectation
 * (ratio, thresholds), the PCIe link (current below maximum = FAIL), NVML's health readings; per
 * node: each figure against the GPU's siblings (the outlier rule). docs/CHECK.md has the rules. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_lines.h"
#include "check_memtest.h"
#include "check_sustained.h"
#include "harness/json_strict.h"
#include "harness/stats.h"

// ---- small JSON helpers ---------------------------------------------------------------------

static const cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static double num(const cJSON *o, const char *k) {   // NaN when absent or null
    const cJSON *v = item(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = item(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// str() for printing: "?" for a missing key (a NULL to %s is undefined).
static const char *str_p(const cJSON *o, const char *k) {
    const char *v = str(o, k);
    return v ? v : "?";
}

static const char *by_threshold(double ratio, const cJSON *t) {
    if (!isfinite(ratio)) return CHECK_MISSING;
    if (ratio < num(t, "fail")) return CHECK_FAIL;
    if (ratio < num(t, "warn")) return CHECK_WARN;
    return CHECK_PASS;
}

// ---- numerics and training: the runs said pass or fail -------------------------------------------

// A result other than pass, fail or error (the three a run gives) was not run: incomplete.
static void judge_runs(cJSON *checks, const cJSON *numerics, bool host) {
    const cJSON *r;
    cJSON_ArrayForEach(r, numerics) {
        const char *res = str(r, "result");
        const char *verdict = !res                                            ? CHECK_NOT_RUN
                              : !strcmp(res, "pass")                          ? CHECK_PASS
                              : !strcmp(res, "fail") || !strcmp(res, "error") ? CHECK_FAIL
                                                                              : CHECK_NOT_RUN;
        const char *detail = str(r, "detail");
        const char *code = res && !strcmp(res, "error")      ? "TDM-F002"
                           : host                            ? "TDM-F004"
                           : !strncmp(r->string, "train.", 6) ? "TDM-F003"
                           : !strcmp(r->string, "memory.test") ? "TDM-F058"
                                                             : "TDM-F001";
        cJSON *line = check_line_add(checks, r->string, NAN, str(r, "measured") ? str(r, "measured") : res ? res : "?",
                 NULL, NAN, str(r, "expected") ? str(r, "expected") : "within the bounds", NAN,
                 verdict, "%s%s%s", res && !strcmp(res, "error") ? "could not run: " : "",
                 detail ? detail : "", "");
        check_line_coded(line, code, NULL);
    }
}

// The numerics every GPU runs at LEVEL (check_measure.c): an absent one is listed, and counted.
static void absent_runs(cJSON *checks, const cJSON *numerics, int level) {
    static const char *const names[] = {"numerics.golden", "numerics.conform"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!item(numerics, names[k]))
            check_line_add(checks, names[k], NAN, NULL, NULL, NAN, NULL, NAN, CHECK_ABSENT,
                     "expected, absent from the figures: not measured");
    const cJSON *r;
    bool train = false;
    if (level >= 4 && !item(numerics, "memory.test"))
        check_line_add(checks, "memory.test", NAN, NULL, NULL, NAN, NULL, NAN, CHECK_ABSENT,
                 "expected at level 4, absent from the figures: the memory test did not run");
    cJSON_ArrayForEach(r, numerics) train = train || !strncmp(r->string, "train.", 6);
    if (!train)
        check_line_add(checks, "train", NAN, NULL, NULL, NAN, NULL, NAN, CHECK_ABSENT,
                 "expected, absent from the figures: no training run (train.*) was measured");
}

// ---- performance: against the model ---------------------------------------------------------------

static const char *perf_unit(const char *name) {
    return !strncmp(name, "gemm.", 5) ? "TFLOP/s" : "GB/s";
}

// The threshold group of a performance check in the expectations' "thresholds".
static const char *threshold_group(const char *name) {
    if (!strncmp(name, "gemm.", 5)) return "gemm";
    if (!strncmp(name, "pcie.", 5)) return "pcie.copy";
    return name;
}

// The model's datasheet expectation for a check (NaN when the model does not give one); *why
// says where it comes from.
static double datasheet(const cJSON *model, const cJSON *link, const char *name, char *why,
                        size_t len) {
    double gen = num(link, "pcie_gen_max"), width = num(link, "pcie_width_max");
    if (!isfinite(gen) || !isfinite(width)) {
        gen = num(model, "pcie_gen");
        width = num(model, "pcie_width");
    }
    double pcie = check_pcie_gbps(gen, width);
    if (!strcmp(name, "memory.d2d")) {
        snprintf(why, len, "datasheet HBM bandwidth");
        return num(model, "hbm_GBps");
    }
    if (!strncmp(name, "gemm.", 5)) {
        snprintf(why, len, "datasheet dense Tensor Core peak");
        return num(item(model, "tflops"), name + 5);
    }
    if (!strncmp(name, "pcie.", 5)) {
        snprintf(why, len, "PCIe gen%g x%g per direction", gen, width);
        return pcie;
    }
    // multi.allreduce, multi.peer: one direction of NVLink where the model always has it
    double nvl = num(model, "nvlink_GBps");
    if (isfinite(nvl) && !item(model, "nvlink_note")) {
        snprintf(why, len, "NVLink %g GB/s / 2 (one direction)", nvl);
        return nvl / 2;
    }
    snprintf(why, len, "PCIe gen%g x%g per direction%s", gen, width,
             item(model, "nvlink_note") ? " (an NVLink bridge, when fitted, is faster)" : "");
    return pcie;
}

// Whether a performance check is measured on every GPU of a node of n GPUs: the multi.* ones on
// 2 to 16 (check_run_multi), the others always.
static bool perf_expected(const char *name, int n) {
    return strncmp(name, "multi.", 6) || (n >= 2 && n <= 16);
}

// The fault code of a performance check below its threshold.
static const char *perf_code(const char *name) {
    return !strncmp(name, "gemm.", 5)   ? "TDM-F021"
           : !strncmp(name, "pcie.", 5) ? "TDM-F022"
           : !strncmp(name, "multi.", 6) ? "TDM-F023"
                                        : "TDM-F020";
}

static void judge_perf(cJSON *checks, const cJSON *gpu, const cJSON *model, const cJSON *expect,
                       bool emulated, int n_gpus, int level) {
    const cJSON *figs = item(gpu, "figures");
    for (int k = 0; check_perf_names[k]; k++) {
        const char *name = check_perf_names[k];
        const cJSON *f = item(figs, name);
        if (!f) {
            if (!emulated && perf_expected(name, n_gpus) && check_level_runs(level, name))
                check_line_add(checks, name, NAN, NULL, perf_unit(name), NAN, NULL, NAN, CHECK_ABSENT,
                         "expected, absent from the figures: not measured");
            continue;  // else not applicable here (one GPU: no multi.*)
        }
        double v = num(f, "value");
        const char *unit = perf_unit(name);
        const char *extra = str(f, "note") ? str(f, "note") : "";
        if (!isfinite(v)) {  // a failed measurement is a FAIL; one that did not happen, incomplete
            const char *error = str(f, "error"), *why = str(f, "why");
            cJSON *line = check_line_add(checks, name, NAN, NULL, unit, NAN, NULL, NAN,
                     error      ? CHECK_FAIL
                     : emulated ? CHECK_EMULATED
                                : CHECK_NOT_RUN,
                     "%s%s",
                     error ? "the measurement failed: "
                     : why ? ""
                           : "no value and no error: not measured",
                     error ? error
                     : why ? why
                           : "");
            check_line_coded(line, "TDM-F010", NULL);
            continue;
        }
        if (emulated) {
            check_line_add(checks, name, v, NULL, unit, NAN, NULL, NAN, CHECK_EMULATED,
                     "measured on the emulated device: not a GPU figure, not judged%s%s",
                     extra[0] ? "; " : "", extra);
            continue;
        }
        char why[160] = "", lwhy[160];
        double expected = NAN;
        const cJSON *thr = item(item(expect, "thresholds"), threshold_group(name));
        const cJSON *measured = item(item(model, "checks"), name);
        if (cJSON_IsNumber(measured)) {
            expected = measured->valuedouble;
            thr = item(expect, "measured_thresholds");
            snprintf(why, sizeof why, "the fleet's median (--write-expect)");
        } else if (model) {
            expected = datasheet(model, item(gpu, "link"), name, why, sizeof why);
        }
        double limit = check_expect_limit(expect, model, name, lwhy, sizeof lwhy);
        if (v > limit) {  // no healthy part, however good, measures this: the timing is wrong
            check_line_coded(check_line_add(checks, name, v, NULL, unit, expected, NULL, v / expected, CHECK_FAIL,
                     "faster than this GPU can be: a timing bug? (the physical limit is %s)%s%s",
                     lwhy, extra[0] ? "; " : "", extra), "TDM-F011", NULL);
            continue;
        }
        if (!model) {
            check_line_add(checks, name, v, NULL, unit, NAN, NULL, NAN, CHECK_NO_EXPECT,
                     "unknown model: judged only against its siblings%s%s", extra[0] ? "; " : "",
                     extra);
            continue;
        }
        if (!isfinite(expected)) {
            check_line_add(checks, name, v, NULL, unit, NAN, NULL, NAN, CHECK_NO_EXPECT,
                     "the model has no figure for it%s%s", extra[0] ? "; " : "", extra);
            continue;
        }
        double ratio = v / expected;
        cJSON *line = check_line_coded(check_line_add(checks, name, v, NULL, unit, expected, NULL, ratio, by_threshold(ratio, thr),
                                     "%s; FAIL below %g, WARN below %g%s%s", why, num(thr, "fail"), num(thr, "warn"),
                                     extra[0] ? "; " : "", extra), perf_code(name), NULL);
        // the ratios of `expected` it was judged by, for the plots' marks (cmd_plot.c)
        cJSON *t = cJSON_AddObjectToObject(line, "thresholds");
        cJSON_AddNumberToObject(t, "warn", num(thr, "warn"));
        cJSON_AddNumberToObject(t, "fail", num(thr, "fail"));
    }
}

// ---- the PCIe link: current below maximum is a fault ---------------------------------------------

static void judge_link(cJSON *checks, const cJSON *gpu, const cJSON *model, bool emulated) {
    const cJSON *link = item(gpu, "link");
    if (!link || cJSON_IsNull(link)) {
        if (!emulated)
            check_line_add(checks, "pcie.link", NAN, NULL, NULL, NAN, NULL, NAN, CHECK_ABSENT,
                     "expected, absent from the figures: not read");
        return;
    }
    double g = num(link, "pcie_gen"), w = num(link, "pcie_width");
    double gm = num(link, "pcie_gen_max"), wm = num(link, "pcie_width_max");
    if (emulated) {
        check_line_add(checks, "pcie.link", NAN, "none", NULL, NAN, NULL, NAN, CHECK_EMULATED,
                 "the emulated device has no PCIe link");
        return;
    }
    if (!isfinite(g) || !isfinite(w) || !isfinite(gm) || !isfinite(wm)) {
        check_line_add(checks, "pcie.link", NAN, NULL, NULL, NAN, NULL, NAN, CHECK_MISSING,
                 "neither NVML nor sysfs said the link's generation and width%s%s",
                 str(item(gpu, "health"), "nvml") ? ": " : "",
                 str(item(gpu, "health"), "nvml") ? str(item(gpu, "health"), "nvml") : "");
        return;
    }
    char m[32], e[32];
    snprintf(m, sizeof m, "gen%g x%g", g, w);
    snprintf(e, sizeof e, "gen%g x%g", gm, wm);
    double ratio = check_pcie_gbps(g, w) / check_pcie_gbps(gm, wm);
    bool under_load = cJSON_IsTrue(item(link, "under_load"));
    if (g < gm || w < wm) {
        check_line_coded(check_line_add(checks, "pcie.link", NAN, m, NULL, NAN, e, ratio, under_load ? CHECK_FAIL : CHECK_WARN,
                 "the link trained below its maximum (%s%s%s)%s",
                 g < gm ? "generation" : "", g < gm && w < wm ? " and " : "", w < wm ? "width" : "",
                 under_load ? ", read while copying" : "; read at idle, when links train down"),
              "TDM-F030", NULL);
        return;
    }
    double mg = num(model, "pcie_gen"), mw = num(model, "pcie_width");
    if (model && isfinite(mg) && isfinite(mw) && (gm < mg || wm < mw)) {
        check_line_coded(check_line_add(checks, "pcie.link", NAN, m, NULL, NAN, e, ratio, CHECK_WARN,
                 "the slot allows less than the model's gen%g x%g (a riser, a switch or the BIOS)", mg, mw),
              "TDM-F031", NULL);
        return;
    }
    check_line_add(checks, "pcie.link", NAN, m, NULL, NAN, e, ratio, CHECK_PASS, "%s",
             under_load ? "read while copying" : "read at idle");
}

// ---- NVML's health readings: missing readings are reported, never guessed -------------------------

static void judge_health(cJSON *checks, const cJSON *gpu, bool emulated, int level, bool leveled) {
    static const char *const nvml_names[] = {"nvml.throttle",      "nvml.temperature",
                                             "nvml.remapped_rows", "nvml.retired_pages",
                                             "nvml.ecc",           "nvml.clocks",
                                             "nvml.persistence"};
    const size_t nn = sizeof nvml_names / sizeof *nvml_names;
    const cJSON *h = item(gpu, "health");
    if ((!h || cJSON_IsNull(h)) && !emulated) {
        for (size_t k = 0; k < nn; k++)
            if (check_level_runs(level, nvml_names[k]) && (leveled || k < nn - 1))
                check_line_add(checks, nvml_names[k], NAN, NULL, NULL, NAN, NULL, NAN, CHECK_ABSENT,
                         "expected, absent from the figures (no \"health\"): not read");
        return;
    }
    if (!h) return;
    const char *why = str(h, "nvml");
    char miss[300];
    snprintf(miss, sizeof miss, "%s%s", why && why[0] ? "not read: " : "not reported by the device", why && why[0] ? why : "");
    if (emulated) snprintf(miss, sizeof miss, "the emulated device has no NVML");
    const char *missing = emulated ? CHECK_EMULATED : CHECK_MISSING;
    if (emulated) {   // no NVML there: whatever the emulator's properties say is not a GPU's
        for (size_t k = 0; k < nn; k++)
            if (check_level_runs(level, nvml_names[k]))
                check_line_add(checks, nvml_names[k], NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
        return;
    }

    double r = num(h, "throttle_reasons");
    if (!isfinite(r)) check_line_add(checks, "nvml.throttle", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
    else {
        char names[300];
        check_throttle_names(r, names, sizeof names);
        unsigned long long bits = (unsigned long long)r;
        const unsigned long long bad = CHECK_THROTTLE_BAD;
        check_line_coded(check_line_add(checks, "nvml.throttle", NAN, names, NULL, NAN,
                 "no hw slowdown, thermal or power brake", NAN, bits & bad ? CHECK_FAIL : CHECK_PASS,
                 "%s%s%s", bits & bad ? "clocks held down by the hardware or by heat" : "",
                 !cJSON_IsFalse(item(h, "under_load")) ? (bits & bad ? " during the load" : "read during the load")
                                                      : (bits & bad ? ", read at idle" : "read at idle (no load)"),
                 bits & (1ULL << 2) ? "; at its power cap (expected at full load)" : ""), "TDM-F040", NULL);
    }

    double t = num(h, "temperature_c"), ts = num(h, "temperature_slowdown_c");
    if (!isfinite(t)) check_line_add(checks, "nvml.temperature", NAN, NULL, "C", NAN, NULL, NAN, missing, "%s", miss);
    else if (!isfinite(ts))
        check_line_add(checks, "nvml.temperature", t, NULL, "C", NAN, NULL, NAN, CHECK_MISSING,
                 "no slowdown threshold reported to judge it against");
    else
        check_line_coded(check_line_add(checks, "nvml.temperature", t, NULL, "C", ts, NULL, t / ts,
                 t >= ts ? CHECK_FAIL : t >= ts - 5 ? CHECK_WARN : CHECK_PASS,
                 "expected below the slowdown threshold (WARN within 5 C of it)"), "TDM-F041", NULL);

    double rc = num(h, "remapped_rows_correctable"), ru = num(h, "remapped_rows_uncorrectable");
    double rp = num(h, "remapped_rows_pending"), rf = num(h, "remapped_rows_failed");
    if (!isfinite(ru)) check_line_add(checks, "nvml.remapped_rows", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s%s", miss, emulated ? "" : " (row remapping is Ampere's and later's)");
    else {
        char m[96];
        snprintf(m, sizeof m, "%g correctable, %g uncorrectable", rc, ru);
        check_line_coded(check_line_add(checks, "nvml.remapped_rows", NAN, m, NULL, NAN, "no failed or pending remap", NAN,
                 rf == 1 ? CHECK_FAIL : rp == 1 ? CHECK_WARN : CHECK_PASS, "%s",
                 rf == 1 ? "a row remap failed: the GPU cannot repair its memory (NVIDIA: RMA)"
                 : rp == 1 ? "a remap waits for a GPU reset"
                           : ""), rf == 1 ? "TDM-F050" : "TDM-F051", NULL);
    }

    double ps = num(h, "retired_pages_sbe"), pd = num(h, "retired_pages_dbe"), pp = num(h, "retired_pages_pending");
    if (!isfinite(ps) && !isfinite(pd))
        check_line_add(checks, "nvml.retired_pages", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s%s", miss,
                 emulated ? "" : " (page retirement is for GPUs before Ampere, which remap rows)");
    else {
        char m[96];
        snprintf(m, sizeof m, "%g single-bit, %g double-bit", ps, pd);
        check_line_coded(check_line_add(checks, "nvml.retired_pages", NAN, m, NULL, NAN, "no retirement pending", NAN,
                 pp == 1 ? CHECK_WARN : CHECK_PASS, "%s", pp == 1 ? "a retirement waits for a reset" : ""),
              "TDM-F052", NULL);
    }

    double ecc = num(h, "ecc"), ev = num(h, "ecc_uncorrected_volatile"), ea = num(h, "ecc_uncorrected_aggregate");
    if (!isfinite(ecc) && !isfinite(ev))
        check_line_add(checks, "nvml.ecc", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
    else {
        char m[192];
        snprintf(m, sizeof m, "ECC %s, uncorrected %s since boot, %s ever",
                 ecc == 1 ? "on" : ecc == 0 ? "off" : "?", isfinite(ev) ? "" : "?", isfinite(ea) ? "" : "?");
        if (isfinite(ev) || isfinite(ea)) {
            char a[32] = "?", b[32] = "?";
            if (isfinite(ev)) snprintf(a, sizeof a, "%g", ev);
            if (isfinite(ea)) snprintf(b, sizeof b, "%g", ea);
            snprintf(m, sizeof m, "ECC %s, uncorrected %s since boot, %s ever",
                     ecc == 1 ? "on" : ecc == 0 ? "off" : "?", a, b);
        }
        const char *v = ev > 0 ? CHECK_FAIL : (ecc == 0 || ea > 0) ? CHECK_WARN : CHECK_PASS;
        check_line_coded(check_line_add(checks, "nvml.ecc", NAN, m, NULL, NAN, "on, no uncorrected errors", NAN, v, "%s",
                 ev > 0 ? "uncorrected memory errors since boot: results may be wrong"
                 : ecc == 0 ? "ECC is off: memory errors go unnoticed"
                 : ea > 0 ? "uncorrected errors in an earlier life (counted ever, none since boot)"
                          : ""), ev > 0 ? "TDM-F053" : ecc == 0 ? "TDM-F054" : "TDM-F055", NULL);
    }

    double c = num(h, "clock_sm_mhz"), cm = num(h, "clock_sm_max_mhz");
    if (!check_level_runs(level, "nvml.clocks"))
        ;   // level 1: no load, and clocks at idle are low by design
    else if (!isfinite(c) || !isfinite(cm) || cm <= 0)
        check_line_add(checks, "nvml.clocks", c, NULL, "MHz", cm, NULL, NAN, missing, "%s", miss);
    else
        check_line_coded(check_line_add(checks, "nvml.clocks", c, NULL, "MHz", cm, NULL, c / cm,
                 c / cm < 0.6 ? CHECK_WARN : CHECK_PASS,
                 "SM clock during the load against its maximum (WARN below 0.6)"), "TDM-F042", NULL);

    double pm = num(h, "persistence");
    if (!isfinite(pm) && !leveled)
        ;   // figures from before the levels do not record it
    else if (!isfinite(pm))
        check_line_add(checks, "nvml.persistence", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
    else
        check_line_coded(check_line_add(checks, "nvml.persistence", NAN, pm == 1 ? "on" : "off", NULL, NAN, "on", NAN,
                       pm == 1 ? CHECK_PASS : CHECK_WARN, "%s",
                       pm == 1 ? "" : "persistence mode off: the driver unloads between jobs (slow starts, lost state)"),
              "TDM-F080", NULL);
}

// An expected check the figures lack: absent (incomplete) in figures of the levels, or missing
// (reported, not counted) in figures recorded before it existed.
static void not_recorded(cJSON *checks, const char *name, bool emulated, bool leveled) {
    if (emulated)
        check_line_add(checks, name, NAN, NULL, NULL, NAN, NULL, NAN, CHECK_EMULATED,
                 "the emulated device has no NVML or driver");
    else if (leveled)
        check_line_add(checks, name, NAN, NULL, NULL, NAN, NULL, NAN, CHECK_ABSENT,
                 "expected, absent from the figures: not read");
    else
        check_line_add(checks, name, NAN, NULL, NULL, NAN, NULL, NAN, CHECK_MISSING,
                 "not recorded (figures from before this check)");
}

// ---- the driver, the CUDA runtime and the libraries ------------------------------------------------

static void cuda_version(double v, char *buf, size_t n) {
    if (isfinite(v)) snprintf(buf, n, "%d.%d", (int)v / 1000, (int)v % 1000 / 10);
    else snprintf(buf, n, "?");
}

static void judge_driver(cJSON *checks, const cJSON *gpu, bool emulated, bool leveled) {
    const cJSON *d = item(gpu, "driver");
    if (!cJSON_IsObject(d)) {
        if (leveled || emulated) not_recorded(checks, "driver", emulated, leveled);
        return;
    }
    double dv = num(d, "cuda_driver_version"), rv = num(d, "cuda_runtime_version");
    const char *ver = str(d, "driver_version");
    char a[16], b[16], m[300];
    cuda_version(dv, a, sizeof a);
    cuda_version(rv, b, sizeof b);
    snprintf(m, sizeof m, "driver %s, CUDA %s, runtime %s", ver && ver[0] ? ver : "?", a, b);
    char libs[300];
    snprintf(libs, sizeof libs, "cuBLAS %s, cuDNN %s, NCCL %s", str(d, "cublas_version") ? str(d, "cublas_version") : "?",
             str(d, "cudnn_version") ? str(d, "cudnn_version") : "?",
             str(d, "nccl_version") ? str(d, "nccl_version") : "?");
    if (emulated)
        check_line_add(checks, "driver", NAN, m, NULL, NAN, NULL, NAN, CHECK_EMULATED,
                 "the emulated device's runtime (suites/emu); %s", libs);
    else if (!isfinite(dv) || !isfinite(rv))
        check_line_add(checks, "driver", NAN, m, NULL, NAN, "driver >= runtime", NAN, CHECK_MISSING,
                 "the CUDA driver or runtime version was not read; %s", libs);
    else
        check_line_coded(check_line_add(checks, "driver", NAN, m, NULL, NAN, "driver >= runtime", NAN,
                       dv < rv ? CHECK_FAIL : CHECK_PASS, "%s%s",
                       dv < rv ? "the driver is older than the CUDA runtime this build uses; " : "", libs),
              "TDM-F081", NULL);
}

// ---- the run's error counters: deltas from its start to its end, and Xid events ----------------------

// end - start of a counter, NaN when either was not read; *a, *b the readings.
static double delta(const cJSON *cn, const char *key, double *a, double *b) {
    *a = num(item(cn, "start"), key);
    *b = num(item(cn, "end"), key);
    return isfinite(*a) && isfinite(*b) ? *b - *a : NAN;
}

static void judge_counters(cJSON *checks, const cJSON *gpu, bool emulated, bool leveled) {
    static const char *const names[] = {"nvml.xid", "nvml.pcie_replay", "nvml.nvlink", "nvml.ecc_delta"};
    const cJSON *cn = item(gpu, "counters");
    if (!cJSON_IsObject(cn)) {
        if (leveled || emulated)
            for (size_t k = 0; k < sizeof names / sizeof *names; k++)
                not_recorded(checks, names[k], emulated, leveled);
        return;
    }
    // A reading there is judged, on the emulated device too (a stand-in NVML's planted fault is
    // a fault); one not there is missing, or EMULATED there.
    const char *missing = emulated ? CHECK_EMULATED : CHECK_MISSING;
    const char *nvml = str(item(gpu, "health"), "nvml");
    char miss[300];
    snprintf(miss, sizeof miss, "%s%s", emulated ? "the emulated device has no NVML" : "not read",
             !emulated && nvml && nvml[0] ? ": " : "");
    if (!emulated && nvml && nvml[0]) snprintf(miss + strlen(miss), sizeof miss - strlen(miss), "%s", nvml);
    double secs = num(cn, "seconds");

    const cJSON *x = item(cn, "xid");
    if (!cJSON_IsArray(x)) {
        const char *why = str(cn, "xid_why");
        check_line_add(checks, "nvml.xid", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s%s%s",
                 emulated ? miss : "no Xid event set", why ? ": " : "", why ? why : "");
    } else {
        int k = cJSON_GetArraySize(x), len = 0;
        char m[200] = "none";
        const cJSON *e;
        cJSON_ArrayForEach(e, x) if (len < (int)sizeof m - 24) len += snprintf(m + len, sizeof m - (size_t)len,
                                                                    "%sXid %.0f", len ? ", " : "", e->valuedouble);
        unsigned long long first = k ? (unsigned long long)cJSON_GetArrayItem(x, 0)->valuedouble : 0;
        check_line_coded(check_line_add(checks, "nvml.xid", NAN, m, NULL, NAN, "no critical Xid", NAN, k ? CHECK_FAIL : CHECK_PASS,
                       "%d critical Xid event%s in the run's %.0f s (NVML event set)%s%s", k, k == 1 ? "" : "s",
                       isfinite(secs) ? secs : 0.0, k ? ": " : "", k ? check_xid_remedy(first) : ""),
              "TDM-F060", k ? check_xid_remedy(first) : NULL);
    }

    double a, b, d = delta(cn, "pcie_replay", &a, &b);
    if (!isfinite(d))
        check_line_add(checks, "nvml.pcie_replay", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
    else {
        char m[96];
        snprintf(m, sizeof m, "+%.0f (%.0f -> %.0f)", d, a, b);
        check_line_coded(check_line_add(checks, "nvml.pcie_replay", d, m, NULL, 0, "+0", NAN,
                       d >= CHECK_PCIE_REPLAY_FAIL ? CHECK_FAIL : d > 0 ? CHECK_WARN : CHECK_PASS,
                       "PCIe replays in the run's %.0f s; WARN above 0, FAIL from %d (DCGM's PCIe test)",
                       isfinite(secs) ? secs : 0.0, CHECK_PCIE_REPLAY_FAIL),
              "TDM-F032", NULL);
    }

    double links = num(item(cn, "end"), "nvlink_links_active");
    double ac, bc, crc = delta(cn, "nvlink_crc", &ac, &bc), ar, br, rep = delta(cn, "nvlink_replay", &ar, &br);
    double aq, bq, rec = delta(cn, "nvlink_recovery", &aq, &bq);
    if (!isfinite(links))
        check_line_add(checks, "nvml.nvlink", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s%s", miss,
                 emulated ? "" : " (or no NVLink on this part)");
    else if (links == 0)
        check_line_add(checks, "nvml.nvlink", NAN, "no active link", NULL, NAN, NULL, NAN, CHECK_PASS,
                 "no NVLink is up (a PCIe part, or its links are down: see multi.peer)");
    else {
        char m[160];
        snprintf(m, sizeof m, "%.0f links: CRC +%.0f, replay +%.0f, recovery +%.0f", links,
                 isfinite(crc) ? crc : 0, isfinite(rep) ? rep : 0, isfinite(rec) ? rec : 0);
        bool bad_rec = rec > 0, bad = crc > 0 || rep > 0;
        check_line_coded(check_line_add(checks, "nvml.nvlink", NAN, m, NULL, NAN, "+0", NAN,
                       bad_rec ? CHECK_FAIL : bad ? CHECK_WARN : CHECK_PASS,
                       "NVLink errors in the run's %.0f s, over the active links%s",
                       isfinite(secs) ? secs : 0.0,
                       bad_rec ? ": a link recovered from a fault" : bad ? ": link errors retried" : ""),
              bad_rec ? "TDM-F071" : "TDM-F070", NULL);
    }

    double ca, cb, corr = delta(cn, "ecc_corrected_volatile", &ca, &cb);
    double ua, ub, unc = delta(cn, "ecc_uncorrected_volatile", &ua, &ub);
    if (!isfinite(corr) && !isfinite(unc))
        check_line_add(checks, "nvml.ecc_delta", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
    else {
        char m[160];
        snprintf(m, sizeof m, "uncorrected +%.0f, corrected +%.0f", isfinite(unc) ? unc : 0,
                 isfinite(corr) ? corr : 0);
        check_line_coded(check_line_add(checks, "nvml.ecc_delta", NAN, m, NULL, NAN, "+0", NAN,
                       unc > 0 ? CHECK_FAIL : corr > 0 ? CHECK_WARN : CHECK_PASS,
                       "volatile ECC errors in the run's %.0f s%s", isfinite(secs) ? secs : 0.0,
                       unc > 0 ? ": uncorrected, the run's results may be wrong"
                       : corr > 0 ? ": corrected by ECC" : ""),
              unc > 0 ? "TDM-F056" : "TDM-F057", NULL);
    }
}

// The level's checks that are not implemented yet: listed as not run, so never a silent PASS.
static void not_implemented(cJSON *checks, int level) {
    for (const check_level_row *r = check_level_rows(); r->check; r++)
        if (r->level <= level && !r->implemented)
            check_line_add(checks, r->check, NAN, NULL, NULL, NAN, NULL, NAN, CHECK_NOT_RUN,
                     "level %d: %s: not implemented yet, not measured", r->level, r->what);
}

// The level's time budget (host line level.budget): past it is a WARN, said and counted.
static void judge_budget(cJSON *checks, const cJSON *figures, bool emulated) {
    double budget = num(figures, "budget_s"), el = num(figures, "elapsed_s"), lv = num(figures, "level");
    if (!isfinite(budget) || !isfinite(el)) return;
    char m[32], e[32];
    snprintf(m, sizeof m, "%.1f s", el);
    snprintf(e, sizeof e, "%.0f s", budget);
    if (emulated) {
        check_line_add(checks, "level.budget", NAN, m, NULL, NAN, e, el / budget, CHECK_EMULATED,
                 "level %.0f timed on the emulated device: not a GPU's time, not judged", lv);
        return;
    }
    check_line_coded(check_line_add(checks, "level.budget", NAN, m, NULL, NAN, e, el / budget,
                   el > budget ? CHECK_WARN : CHECK_PASS, "level %.0f%s", lv,
                   el > budget ? ": ran past its budget" : ": within its budget"),
          "TDM-F090", NULL);
}

// ---- the outlier rule: each figure against the GPU's siblings ------------------------------------

typedef struct {
    const char *name;  // the GPU's device name: siblings share it
    double v;
    int i;  // the GPU's place in gpus
} sibling;

static int cmp_sibling(const void *a, const void *b) {
    const sibling *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->v > y->v) - (x->v < y->v);
}

// The median of the m sorted values x but the one at p (bench_median of the other m - 1).
static double median_without(const sibling *x, int m, int p) {
    int r = m - 1;
#define AT(k) x[(k) < p ? (k) : (k) + 1].v
    return r % 2 ? AT(r / 2) : 0.5 * (AT(r / 2 - 1) + AT(r / 2));
#undef AT
}

// gp[n]: the judged GPUs, limit_ok[k * n + i]: whether GPU i's figure of check k is below its
// physical limit (an impossible figure is a FAIL of its own, and no sibling's yardstick). Per
// check: the GPUs sorted by name and figure, so each one's siblings' median is found in O(1):
// O(n log n) per check, for nodes (or --from-figures files) of thousands of GPUs.
static void judge_outliers(cJSON **gp, int n, const bool *limit_ok, const cJSON *expect,
                           cJSON *outliers) {
    const cJSON *o = item(expect, "outlier");
    size_t m = (size_t)(n ? n : 1);
    sibling *s = malloc(m * sizeof *s);
    double *med = malloc(m * sizeof *med);
    int *ns = malloc(m * sizeof *ns);
    if (!s || !med || !ns) goto done;
    for (int k = 0; check_perf_names[k]; k++) {
        const char *name = check_perf_names[k];
        if (!strcmp(name, "multi.allreduce")) continue;   // one figure for the whole group
        int c = 0;
        for (int i = 0; i < n; i++) {
            med[i] = NAN;
            const char *ni = str(gp[i], "name");
            double v = cJSON_IsTrue(item(gp[i], "emulated")) || !limit_ok[k * n + i]
                           ? NAN
                           : num(item(item(gp[i], "figures"), name), "value");
            if (isfinite(v) && ni) s[c++] = (sibling){ni, v, i};
        }
        qsort(s, (size_t)c, sizeof *s, cmp_sibling);
        for (int a = 0, b; a < c; a = b) {
            for (b = a + 1; b < c && !strcmp(s[a].name, s[b].name);) b++;
            for (int p = a; b - a >= 2 && p < b; p++) {
                med[s[p].i] = median_without(s + a, b - a, p - a);
                ns[s[p].i] = b - a - 1;
            }
        }
        for (int i = 0; i < n; i++) {  // in the GPUs' order
            if (!isfinite(med[i])) continue;
            cJSON *gi = gp[i];
            double v = num(item(item(gi, "figures"), name), "value"), ratio = v / med[i];
            const char *verdict = by_threshold(ratio, o);
            if (!strcmp(verdict, CHECK_PASS)) continue;
            char check[64];
            snprintf(check, sizeof check, "outlier.%s", name);
            const char *dev = str_p(gi, "device"), *ni = str(gi, "name");
            cJSON *line = check_line_add(cJSON_GetObjectItemCaseSensitive(gi, "checks"), check, v, NULL,
                                   perf_unit(name), med[i], NULL, ratio, verdict,
                                   "%s is %.2f x the median of its %d sibling%s (%s); FAIL below "
                                   "%g, WARN below %g",
                                   dev, ratio, ns[i], ns[i] == 1 ? "" : "s", ni, num(o, "fail"),
                                   num(o, "warn"));
            check_line_coded(line, "TDM-F024", NULL);
            cJSON *copy = cJSON_Duplicate(line, true);
            cJSON_AddStringToObject(copy, "device", dev);
            cJSON_AddItemToArray(outliers, copy);
        }
    }
done:
    free(s);
    free(med);
    free(ns);
}

// ---- the figures: what cannot be true is bad input, named
// ----------------------------------------

// Absent or null (not read), or a number in [lo, hi] (an integer when asked).
static bool reading_ok(const cJSON *v, double lo, double hi, bool integer) {
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v)) return false;
    double x = v->valuedouble;
    return isfinite(x) && x >= lo && x <= hi && (!integer || x == floor(x));
}

// NVML's readings (check_measure.c props_health), each in the range NVML can report.
static const struct {
    const char *key;
    double lo, hi;
    bool integer;
    const char *what;
} health_fields[] = {
    // newer drivers define reasons above 0x1ff: kept and named (unknown 0x...), not refused
    {"throttle_reasons", 0, CHECK_THROTTLE_MAX, true,
     "a bitmask of NVML's clocks-event reasons (an integer from 0 to 2^63)"},
    {"temperature_c", -40, 150, false, "a GPU temperature (-40 to 150 C)"},
    {"temperature_slowdown_c", -40, 150, false, "a GPU temperature (-40 to 150 C)"},
    {"remapped_rows_correctable", 0, 4294967295.0, true, "a count of rows"},
    {"remapped_rows_uncorrectable", 0, 4294967295.0, true, "a count of rows"},
    {"remapped_rows_pending", 0, 1, true, "NVML's flag: 0 or 1"},
    {"remapped_rows_failed", 0, 1, true, "NVML's flag: 0 or 1"},
    {"retired_pages_sbe", 0, 4294967295.0, true, "a count of pages"},
    {"retired_pages_dbe", 0, 4294967295.0, true, "a count of pages"},
    {"retired_pages_pending", 0, 1, true, "NVML's flag: 0 or 1"},
    {"ecc", 0, 1, true, "the ECC mode: 0 (off) or 1 (on)"},
    {"ecc_uncorrected_volatile", 0, 9007199254740992.0, true, "a count of errors"},
    {"ecc_uncorrected_aggregate", 0, 9007199254740992.0, true, "a count of errors"},
    {"clock_sm_mhz", 1, 10000, false, "a clock of a GPU that answers NVML (1 to 10000 MHz)"},
    {"clock_sm_max_mhz", 1, 10000, false, "a clock of a GPU that answers NVML (1 to 10000 MHz)"},
    {"clock_mem_mhz", 1, 50000, false, "a clock of a GPU that answers NVML (1 to 50000 MHz)"},
    {"power_limit_w", 0, 10000, false, "a power limit (0 to 10000 W)"},
    {"persistence", 0, 1, true, "the persistence mode: 0 (off) or 1 (on)"},
};

// The run's error counters (check_measure.c check_counters_end): counts that only grow.
static bool valid_counters(const cJSON *c, int i, char *err, size_t len) {
    if (!c || cJSON_IsNull(c)) return true;
    if (!cJSON_IsObject(c)) return bench_err(err, len, "gpus[%d].counters: must be an object", i);
    static const char *const keys[] = {"pcie_replay", "nvlink_links_active", "nvlink_crc", "nvlink_replay",
                                       "nvlink_recovery", "ecc_corrected_volatile", "ecc_uncorrected_volatile"};
    static const char *const ends[] = {"start", "end"};
    for (int e = 0; e < 2; e++) {
        const cJSON *o = item(c, ends[e]);
        if (o && !cJSON_IsNull(o) && !cJSON_IsObject(o))
            return bench_err(err, len, "gpus[%d].counters.%s: must be an object", i, ends[e]);
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            if (!reading_ok(item(o, keys[k]), 0, 9007199254740992.0, true))
                return bench_err(err, len,
                                 "gpus[%d].counters.%s.%s: not a count (a whole number from 0)", i,
                                 ends[e], keys[k]);
    }
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        double a = num(item(c, "start"), keys[k]), b = num(item(c, "end"), keys[k]);
        if (k != 1 && b < a)   // the links' count may change; the error counters only grow
            return bench_err(err, len,
                             "gpus[%d].counters.%s: the end (%g) is below the start (%g): "
                             "not one counter",
                             i, keys[k], b, a);
    }
    if (!reading_ok(item(c, "seconds"), 0, 1e7, false))
        return bench_err(err, len, "gpus[%d].counters.seconds: not a duration (0 to 1e7 s)", i);
    const cJSON *x = item(c, "xid"), *e;
    if (x && !cJSON_IsNull(x) && !cJSON_IsArray(x))
        return bench_err(err, len, "gpus[%d].counters.xid: must be an array of Xids or null", i);
    int k = 0;
    const cJSON *xs = cJSON_IsArray(x) ? x : NULL;
    cJSON_ArrayForEach(e, xs) {
        if (!cJSON_IsNumber(e) || !reading_ok(e, 0, 4294967295.0, true))
            return bench_err(err, len,
                             "gpus[%d].counters.xid[%d]: not an Xid (a whole number from 0)", i, k);
        k++;
    }
    const cJSON *w = item(c, "xid_why");
    if (w && !cJSON_IsString(w) && !cJSON_IsNull(w))
        return bench_err(err, len, "gpus[%d].counters.xid_why: must be a string", i);
    return true;
}

static bool valid_driver(const cJSON *d, int i, char *err, size_t len) {
    if (!d || cJSON_IsNull(d)) return true;
    if (!cJSON_IsObject(d)) return bench_err(err, len, "gpus[%d].driver: must be an object", i);
    static const char *const vers[] = {"cuda_driver_version", "cuda_runtime_version"};
    for (int k = 0; k < 2; k++)
        if (!reading_ok(item(d, vers[k]), 1000, 1000000, true))
            return bench_err(err, len, "gpus[%d].driver.%s: not a CUDA version (12040 = 12.4)", i,
                             vers[k]);
    static const char *const texts[] = {"driver_version", "cublas_version", "cudnn_version", "nccl_version"};
    for (int k = 0; k < 4; k++)
        if (item(d, texts[k]) && !cJSON_IsString(item(d, texts[k])) && !cJSON_IsNull(item(d, texts[k])))
            return bench_err(err, len, "gpus[%d].driver.%s: must be a string", i, texts[k]);
    return true;
}

static bool valid_link(const cJSON *l, int i, char *err, size_t len) {
    if (!l || cJSON_IsNull(l)) return true;
    if (!cJSON_IsObject(l)) return bench_err(err, len, "gpus[%d].link: must be an object", i);
    static const char *const gens[] = {"pcie_gen", "pcie_gen_max"};
    static const char *const widths[] = {"pcie_width", "pcie_width_max"};
    for (int k = 0; k < 2; k++) {
        const cJSON *g = item(l, gens[k]), *w = item(l, widths[k]);
        if (!reading_ok(g, 1, 6, true))
            return bench_err(err, len, "gpus[%d].link.%s: not a PCIe generation (1 to 6)", i,
                             gens[k]);
        double x = cJSON_IsNumber(w) ? w->valuedouble : 1;
        if (!reading_ok(w, 1, 32, true) || ((long)x & ((long)x - 1)))
            return bench_err(err, len, "gpus[%d].link.%s: not a PCIe width (1, 2, 4, 8, 16 or 32)",
                             i, widths[k]);
    }
    if (num(l, "pcie_gen") > num(l, "pcie_gen_max") ||
        num(l, "pcie_width") > num(l, "pcie_width_max"))
        return bench_err(err, len,
                         "gpus[%d].link: the current link (gen%g x%g) is above its maximum "
                         "(gen%g x%g): a misreading",
                         i, num(l, "pcie_gen"), num(l, "pcie_width"), num(l, "pcie_gen_max"),
                         num(l, "pcie_width_max"));
    const cJSON *u = item(l, "under_load");
    if (u && !cJSON_IsBool(u) && !cJSON_IsNull(u))
        return bench_err(err, len, "gpus[%d].link.under_load: must be true or false", i);
    return true;
}

static bool valid_health(const cJSON *h, int i, char *err, size_t len) {
    if (!h || cJSON_IsNull(h)) return true;
    if (!cJSON_IsObject(h)) return bench_err(err, len, "gpus[%d].health: must be an object", i);
    for (size_t k = 0; k < sizeof health_fields / sizeof *health_fields; k++) {
        const cJSON *v = item(h, health_fields[k].key);
        if (!reading_ok(v, health_fields[k].lo, health_fields[k].hi, health_fields[k].integer)) {
            char got[48] = "not a number";
            if (cJSON_IsNumber(v)) snprintf(got, sizeof got, "%g", v->valuedouble);
            return bench_err(err, len, "gpus[%d].health.%s: %s is not %s", i, health_fields[k].key,
                             got, health_fields[k].what);
        }
    }
    const cJSON *nv = item(h, "nvml");
    if (nv && !cJSON_IsString(nv) && !cJSON_IsNull(nv))
        return bench_err(err, len, "gpus[%d].health.nvml: must be a string", i);
    return true;
}

// NVML's counters the memory test records before and after itself (check_memtest.c ecc_keys):
// four counts, then two flags.
static const char *const memtest_nvml_keys[] = {"ecc_corrected_volatile", "ecc_uncorrected_volatile",
                                                "remapped_rows_correctable", "remapped_rows_uncorrectable",
                                                "remapped_rows_pending", "remapped_rows_failed"};

// The memory test's entry (check_memtest.c): a "pass" is no word read wrong over at least
// CHECK_MEMTEST_MIN_FRACTION of the free memory, with NVML's counters unchanged around it; one
// that says less is no pass.
static bool valid_memtest(const cJSON *x, const char *where, char *err, size_t len) {
    const char *res = str(x, "result");
    const cJSON *fr = item(x, "fraction"), *er = item(x, "errors");
    if (fr && !(cJSON_IsNumber(fr) && isfinite(fr->valuedouble) && fr->valuedouble >= 0 && fr->valuedouble <= 1))
        return bench_err(err, len, "%s.numerics.memory.test.fraction: not a fraction (0 to 1)", where);
    if (er && !(cJSON_IsNumber(er) && er->valuedouble >= 0 && er->valuedouble == floor(er->valuedouble)))
        return bench_err(err, len, "%s.numerics.memory.test.errors: not a count", where);
    const cJSON *nv = item(x, "nvml");
    if (nv && !cJSON_IsNull(nv) && !cJSON_IsObject(nv))
        return bench_err(err, len, "%s.numerics.memory.test.nvml: must be an object", where);
    static const char *const ends[] = {"start", "end"};
    for (int e = 0; e < 2; e++) {
        const cJSON *o = item(nv, ends[e]);
        if (o && !cJSON_IsNull(o) && !cJSON_IsObject(o))
            return bench_err(err, len, "%s.numerics.memory.test.nvml.%s: must be an object", where, ends[e]);
        for (size_t k = 0; k < 6; k++)
            if (!reading_ok(item(o, memtest_nvml_keys[k]), 0, k < 4 ? 9007199254740992.0 : 1, true))
                return bench_err(err, len, "%s.numerics.memory.test.nvml.%s.%s: not %s", where, ends[e],
                                 memtest_nvml_keys[k], k < 4 ? "a count (a whole number from 0)" : "NVML's flag: 0 or 1");
    }
    if (!res || strcmp(res, "pass")) return true;
    if (!cJSON_IsNumber(fr))
        return bench_err(err, len,
                         "%s.numerics.memory.test.fraction: a pass without the fraction of the free "
                         "memory it tested",
                         where);
    if (fr->valuedouble < CHECK_MEMTEST_MIN_FRACTION)
        return bench_err(err, len,
                         "%s.numerics.memory.test: a pass over %.1f %% of the free memory is no pass "
                         "(a full test covers %.0f %% at least; less is an error)",
                         where, 100 * fr->valuedouble, 100 * CHECK_MEMTEST_MIN_FRACTION);
    if (cJSON_IsNumber(er) && er->valuedouble > 0)
        return bench_err(err, len, "%s.numerics.memory.test: a pass with %g words read wrong", where,
                         er->valuedouble);
    // NVML's counters read around the test: with HBM's ECC on, a fault the test cannot see is
    // counted there; one that grew (or a remap pending or failed at the end) is no pass
    const cJSON *s0 = item(nv, "start"), *s1 = item(nv, "end");
    for (size_t k = 0; k < 4; k++) {
        double a = num(s0, memtest_nvml_keys[k]), b = num(s1, memtest_nvml_keys[k]);
        if (isfinite(a) && isfinite(b) && b > a)
            return bench_err(err, len,
                             "%s.numerics.memory.test: a pass while NVML's %s grew from %g to %g "
                             "during the test (a fault ECC corrected is still a fault)",
                             where, memtest_nvml_keys[k], a, b);
    }
    for (size_t k = 4; k < 6; k++)
        if (num(s1, memtest_nvml_keys[k]) > 0)
            return bench_err(err, len, "%s.numerics.memory.test: a pass with %s set at its end", where,
                             memtest_nvml_keys[k]);
    return true;
}

// The runs' results (numerics): objects with a "result" string.
static bool valid_runs(const cJSON *r, const char *where, char *err, size_t len) {
    if (!r || cJSON_IsNull(r)) return true;
    if (!cJSON_IsObject(r)) return bench_err(err, len, "%s.numerics: must be an object", where);
    if (item(r, "memory.test") && !valid_memtest(item(r, "memory.test"), where, err, len)) return false;
    const cJSON *x;
    cJSON_ArrayForEach(
        x, r) if (!cJSON_IsObject(x) ||
                  !cJSON_IsString(
                      item(x, "result"))) return bench_err(err, len,
                                                           "%s.numerics.%s: needs {\"result\": "
                                                           "\"pass\", \"fail\" or "
                                                           "\"error\"}",
                                                           where, x->string);
    return true;
}

static bool valid_figures(const cJSON *f, int i, char *err, size_t len) {
    if (!f || cJSON_IsNull(f)) return true;
    if (!cJSON_IsObject(f)) return bench_err(err, len, "gpus[%d].figures: must be an object", i);
    const cJSON *x;
    cJSON_ArrayForEach(x, f) {
        const cJSON *v = item(x, "value");
        // a figure is measured (a finite rate above 0) or not (null): 1e999 is read as
        // infinity, "fast", {} or a missing value are no figure at all
        if (!cJSON_IsObject(x) || !v || !(cJSON_IsNull(v) || cJSON_IsNumber(v)))
            return bench_err(err, len, "gpus[%d].figures.%s: needs {\"value\": number or null}", i,
                             x->string);
        if (cJSON_IsNumber(v) && !(isfinite(v->valuedouble) && v->valuedouble > 0))
            return bench_err(err, len, "gpus[%d].figures.%s: value %g is not a finite rate above 0",
                             i, x->string, v->valuedouble);
        const cJSON *u = item(x, "unit");
        bool perf = false;
        for (int k = 0; check_perf_names[k]; k++)
            perf = perf || !strcmp(x->string, check_perf_names[k]);
        if (u && !cJSON_IsNull(u) &&
            !(cJSON_IsString(u) && (!perf || !strcmp(u->valuestring, perf_unit(x->string)))))
            return bench_err(err, len, "gpus[%d].figures.%s: unit must be \"%s\"", i, x->string,
                             perf ? perf_unit(x->string) : "a string");
        const cJSON *sm = item(x, "samples"), *e;
        if (sm && !cJSON_IsArray(sm) && !cJSON_IsNull(sm))
            return bench_err(err, len, "gpus[%d].figures.%s.samples: must be an array", i,
                             x->string);
        int k = 0;
        const cJSON *arr = cJSON_IsArray(sm) ? sm : NULL;
        cJSON_ArrayForEach(e, arr) {
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || !(e->valuedouble > 0))
                return bench_err(err, len,
                                 "gpus[%d].figures.%s.samples[%d]: not a finite rate above 0", i,
                                 x->string, k);
            k++;
        }
        static const char *const texts[] = {"error", "why", "note"};
        for (size_t t = 0; t < sizeof texts / sizeof *texts; t++)
            if (item(x, texts[t]) && !cJSON_IsString(item(x, texts[t])) &&
                !cJSON_IsNull(item(x, texts[t])))
                return bench_err(err, len, "gpus[%d].figures.%s.%s: must be a string", i, x->string,
                                 texts[t]);
    }
    return true;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Figures that cannot be true are bad input (the caller exits 2), named: a non-finite or
// non-numeric figure, a reading outside what NVML or a PCIe link can report, a GPU listed twice.
static bool valid_input(const cJSON *figures, char *err, size_t len) {
    const cJSON *gpus = item(figures, "gpus");
    if (!cJSON_IsObject(figures) || !cJSON_IsArray(gpus))
        return bench_err(err, len,
                         "not check figures: needs an object with a \"gpus\" array (format "
                         "%s, or a status.json \"check\" section)",
                         CHECK_FIGURES_FORMAT);
    int n = cJSON_GetArraySize(gpus), i = 0;
    const char **devs = malloc((size_t)(n ? n : 1) * sizeof *devs);
    if (!devs) return bench_err(err, len, "out of memory");
    bool ok = true;
    const cJSON *g;
    char why[64];
    cJSON_ArrayForEach(g, gpus) {
        char where[32];
        snprintf(where, sizeof where, "gpus[%d]", i);
        const cJSON *name = item(g, "name"), *emu = item(g, "emulated");
        if (!cJSON_IsObject(g) || !cJSON_IsString(item(g, "device")))
            ok = bench_err(err, len, "gpus[%d]: needs an object with a \"device\" (\"cuda:N\")", i);
        else if (!check_name_valid(str(g, "device"), why, sizeof why))
            ok = bench_err(err, len, "gpus[%d].device: %s", i, why);
        else if (name && !cJSON_IsNull(name) && !cJSON_IsString(name))
            ok = bench_err(err, len, "gpus[%d].name: must be a string", i);
        else if (cJSON_IsString(name) && name->valuestring[strspn(name->valuestring, " \t")] &&
                 !check_name_valid(name->valuestring, why, sizeof why))  // blank: no model
            ok = bench_err(err, len, "gpus[%d].name: %s", i, why);
        else if (emu && !cJSON_IsBool(emu) && !cJSON_IsNull(emu))
            ok = bench_err(err, len, "gpus[%d].emulated: must be true or false", i);
        else
            ok = valid_figures(item(g, "figures"), i, err, len) &&
                 valid_link(item(g, "link"), i, err, len) &&
                 valid_health(item(g, "health"), i, err, len) &&
                 valid_counters(item(g, "counters"), i, err, len) &&
                 valid_driver(item(g, "driver"), i, err, len) &&
                 check_sustained_valid(g, i, err, len) &&
                 valid_runs(item(g, "numerics"), where, err, len) &&
                 check_sdc_valid(item(g, "sdc"), i, err, len);
        if (!ok) break;
        devs[i++] = str(g, "device");
    }
    if (ok) {  // the emulator replaces the CUDA backend: a node's devices are all emulated or none
        int emu = -1, k = 0;
        cJSON_ArrayForEach(g, gpus) {
            int e = cJSON_IsTrue(item(g, "emulated"));
            if (emu >= 0 && e != emu) {
                ok = bench_err(err, len,
                               "gpus[%d].emulated: %s beside GPUs that are %s (gpus[0]): a node's "
                               "devices are all emulated or none, its figures cannot mix them",
                               k, e ? "true" : "false", emu ? "emulated" : "not emulated");
                break;
            }
            emu = e;
            k++;
        }
    }
    if (ok) {  // one GPU twice would count twice, among its own siblings too
        qsort(devs, (size_t)i, sizeof *devs, cmp_str);
        for (int k = 1; ok && k < i; k++)
            if (!strcmp(devs[k - 1], devs[k]))
                ok = bench_err(err, len, "gpus: device \"%s\" is listed twice", devs[k]);
    }
    free(devs);
    const cJSON *host = item(figures, "host");
    if (ok && host && !cJSON_IsNull(host) && !cJSON_IsObject(host))
        ok = bench_err(err, len, "host: must be an object");
    if (ok) ok = valid_runs(item(host, "numerics"), "host", err, len);
    if (ok && !reading_ok(item(figures, "level"), CHECK_LEVEL_MIN, CHECK_LEVEL_MAX, true))
        ok = bench_err(err, len, "level: not a level (1, 2, 3 or 4)");
    if (ok && (!reading_ok(item(figures, "budget_s"), 1, 1e7, false) ||
               !reading_ok(item(figures, "elapsed_s"), 0, 1e7, false)))
        ok = bench_err(
            err, len, "%s: not a duration (seconds, up to 1e7)",
            reading_ok(item(figures, "budget_s"), 1, 1e7, false) ? "elapsed_s" : "budget_s");
    const cJSON *ng = item(figures, "no_gpu");
    if (ok && ng && !cJSON_IsString(ng) && !cJSON_IsNull(ng))
        ok = bench_err(err, len, "no_gpu: must be a string");
    return ok;
}

// ---- the whole ---------------------------------------------------------------------------------------



// c: PASS, WARN, FAIL, not judged, incomplete (absent or not run).
static void count(const cJSON *checks, int *c) {
    const cJSON *x;
    cJSON_ArrayForEach(x, checks) {
        const char *v = str(x, "verdict");
        if (!v) continue;
        if (!strcmp(v, CHECK_PASS)) c[0]++;
        else if (!strcmp(v, CHECK_WARN)) c[1]++;
        else if (!strcmp(v, CHECK_FAIL)) c[2]++;
        else if (!strcmp(v, CHECK_ABSENT) || !strcmp(v, CHECK_NOT_RUN))
            c[4]++;
        else c[3]++;
    }
}

// Appends " DEVICE CHECK" for each line of checks with one of the verdicts v1, v2 (the summary).
static int list_lines(char *line, size_t size, int k, const char *dev, const cJSON *checks,
                      const char *v1, const char *v2) {
    const cJSON *x;
    cJSON_ArrayForEach(x, checks) {
        const char *v = str(x, "verdict");
        if (!v || (strcmp(v, v1) && (!v2 || strcmp(v, v2)))) continue;
        if (k >= (int)size - 80) {
            if (k < (int)size - 5) k += snprintf(line + k, size - (size_t)k, " ...");
            return (int)size;
        }
        k += snprintf(line + k, size - (size_t)k, " %s %s", dev, str_p(x, "check"));
    }
    return k;
}

cJSON *check_judge(const cJSON *figures, const cJSON *expect, char *err, size_t len) {
    if (!valid_input(figures, err, len)) return NULL;
    cJSON *out = cJSON_Duplicate(figures, true);
    cJSON_DeleteItemFromObjectCaseSensitive(out, "format");
    cJSON_DeleteItemFromObjectCaseSensitive(out, "summary");
    cJSON_DeleteItemFromObjectCaseSensitive(out, "outliers");
    cJSON_DeleteItemFromObjectCaseSensitive(out, "needs_gpu");
    cJSON_AddStringToObject(out, "format", CHECK_SECTION_FORMAT);
    cJSON *gpus_out = cJSON_GetObjectItemCaseSensitive(out, "gpus");
    int n = cJSON_GetArraySize(gpus_out), np = 0;
    while (check_perf_names[np]) np++;
    cJSON **gp = malloc((size_t)(n ? n : 1) * sizeof *gp);
    bool *limit_ok = malloc((size_t)(n ? n : 1) * (size_t)np * sizeof *limit_ok);
    if (!gp || !limit_ok) {
        free(gp);
        free(limit_ok);
        cJSON_Delete(out);
        snprintf(err, len, "out of memory");
        return NULL;
    }
    int c[5] = {0}, judged_gpus = 0, emulated_gpus = 0, gi = 0;
    // figures of a level say which; figures from before the levels are level 2's (quick or full)
    bool leveled = cJSON_IsNumber(item(figures, "level"));
    int level = leveled ? (int)num(figures, "level") : 2;
    cJSON *go;
    cJSON_ArrayForEach(go, gpus_out) {
        gp[gi] = go;
        cJSON_DeleteItemFromObjectCaseSensitive(go, "checks");
        cJSON_DeleteItemFromObjectCaseSensitive(go, "model");
        bool emulated = cJSON_IsTrue(item(go, "emulated"));
        emulated_gpus += emulated;
        const cJSON *model = emulated ? NULL : check_expect_model(expect, str(go, "name"));
        if (model) cJSON_AddStringToObject(go, "model", str(model, "model"));
        else cJSON_AddNullToObject(go, "model");
        for (int k = 0; k < np; k++) {
            char why[160];
            double v = num(item(item(go, "figures"), check_perf_names[k]), "value");
            limit_ok[k * n + gi] =
                !(v > check_expect_limit(expect, model, check_perf_names[k], why, sizeof why));
        }
        cJSON *checks = cJSON_AddArrayToObject(go, "checks");
        judge_runs(checks, item(go, "numerics"), false);
        if (level >= 2) absent_runs(checks, item(go, "numerics"), level);
        judge_driver(checks, go, emulated, leveled);
        judge_perf(checks, go, model, expect, emulated, n, level);
        judge_link(checks, go, model, emulated);
        judge_health(checks, go, emulated, level, leveled);
        judge_counters(checks, go, emulated, leveled);
        check_judge_sustained(checks, go, model, expect, emulated, level);
        not_implemented(checks, level);
        gi++;
    }
    cJSON *outliers = cJSON_AddArrayToObject(out, "outliers");
    judge_outliers(gp, n, limit_ok, expect, outliers);
    free(limit_ok);
    check_sdc_judge(gp, n, level);   // silent data corruption: each GPU, then across its siblings
    cJSON_ArrayForEach(go, gpus_out) {
        int gc[5] = {0};
        count(item(go, "checks"), gc);
        for (int k = 0; k < 5; k++) c[k] += gc[k];
        if (!cJSON_IsTrue(item(go, "emulated")) && gc[0] + gc[1] + gc[2] > 0) judged_gpus++;
    }
    cJSON *host = cJSON_GetObjectItemCaseSensitive(out, "host");
    if (!host && cJSON_IsNumber(item(figures, "budget_s")))   // level 1: no host check, a budget
        host = cJSON_AddObjectToObject(out, "host");
    if (cJSON_IsObject(host)) {
        cJSON_DeleteItemFromObjectCaseSensitive(host, "checks");
        cJSON *hc = cJSON_AddArrayToObject(host, "checks");
        judge_runs(hc, item(host, "numerics"), true);
        judge_budget(hc, figures, emulated_gpus > 0);
        count(hc, c);
    }
    if (n == 0) {  // say what a GPU would have been checked for
        cJSON *ng = cJSON_AddArrayToObject(out, "needs_gpu");
        int k = 0;   // the level's GPU checks (check_levels.c), "train" for the family
        for (const check_level_row *r = check_level_rows(); r->check; r++, k++)
            if (r->level <= level && strcmp(r->check, "reference.golden"))   // the host's own
                check_line_add(ng, strcmp(r->check, "train.*") ? r->check : "train", NAN, NULL, NULL, NAN,
                         NULL, NAN, CHECK_NEEDS_GPU, "%s",
                         k ? "" : str(figures, "no_gpu") ? str(figures, "no_gpu") : "no GPU");
        c[3] += cJSON_GetArraySize(ng);
    }
    // a FAIL first; then what was expected and not measured (never a PASS); then no GPU at all
    int exit_code = c[2]          ? CHECK_EXIT_FAIL
                    : c[4]        ? CHECK_EXIT_INCOMPLETE
                    : judged_gpus ? CHECK_EXIT_PASS
                                  : CHECK_EXIT_NO_GPU;
    char line[600];
    if (c[2] || c[4]) {
        const char *v1 = c[2] ? CHECK_FAIL : CHECK_ABSENT, *v2 = c[2] ? NULL : CHECK_NOT_RUN;
        int k = c[2] ? snprintf(line, sizeof line, "FAIL: %d check%s failed:", c[2],
                                c[2] == 1 ? "" : "s")
                     : snprintf(line, sizeof line,
                                "INCOMPLETE: %d expected check%s not measured "
                                "(nothing failed, %d PASS, %d WARN):",
                                c[4], c[4] == 1 ? " was" : "s were", c[0], c[1]);
        for (int i = 0; i < n && k < (int)sizeof line; i++)
            k = list_lines(line, sizeof line, k, str_p(gp[i], "device"), item(gp[i], "checks"), v1,
                           v2);
        if (k < (int)sizeof line)
            list_lines(line, sizeof line, k, "host", item(host, "checks"), v1, v2);
    } else if (!judged_gpus && emulated_gpus)
        snprintf(line, sizeof line,
                 "NO GPU JUDGED: %d emulated device%s (not a GPU): numerics judged, speed not judged; "
                 "nothing failed", emulated_gpus, emulated_gpus == 1 ? "" : "s");
    else if (!judged_gpus)
        snprintf(line, sizeof line, "NO GPU: nothing on a GPU was judged (%s)%s",
                 str(figures, "no_gpu") ? str(figures, "no_gpu") : "no GPU checked",
                 c[0] ? "; the host's checks passed" : "");
    else
        snprintf(line, sizeof line, "PASS: %d GPU%s, every check passed (%d PASS, %d WARN, %d not judged)",
                 judged_gpus, judged_gpus == 1 ? "" : "s", c[0], c[1], c[3]);
    free(gp);
    cJSON *s = cJSON_AddObjectToObject(out, "summary");
    cJSON_AddNumberToObject(s, "pass", c[0]);
    cJSON_AddNumberToObject(s, "warn", c[1]);
    cJSON_AddNumberToObject(s, "fail", c[2]);
    cJSON_AddNumberToObject(s, "not_judged", c[3]);
    cJSON_AddNumberToObject(s, "incomplete", c[4]);
    cJSON_AddNumberToObject(s, "judged_gpus", judged_gpus);
    cJSON_AddNumberToObject(s, "outliers", cJSON_GetArraySize(outliers));
    cJSON_AddNumberToObject(s, "exit", exit_code);
    cJSON_AddStringToObject(s, "line", line);
    return out;
}

int check_exit_code(const cJSON *judged) {
    double e = num(item(judged, "summary"), "exit");
    return isfinite(e) ? (int)e : CHECK_EXIT_BAD;
}

// ---- text ---------------------------------------------------------------------------------------------

static void fmt_value(const cJSON *c, const char *key, char *buf, size_t n) {
    const cJSON *v = item(c, key);
    const char *unit = str(c, "unit");
    if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring);
    else if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        snprintf(buf, n,
                 fabs(x) >= 1e7                    ? "%.3g%s%s"
                 : fabs(x) >= 100 || x == floor(x) ? "%.0f%s%s"
                                                   : "%.3g%s%s",
                 x, unit ? " " : "", unit ? unit : "");
    } else snprintf(buf, n, "-");
}

// One line of text, with every control character of the figures' strings (a terminal escape in a
// hostile detail or note) printed as '?'.
static void emit(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(FILE *f, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if (((unsigned char)*p < 0x20 && *p != '\n') || *p == 0x7f) *p = '?';
    fputs(buf, f);
}

static void print_line(FILE *f, const char *dev, const cJSON *c) {
    char m[96], e[96], r[16] = "-";
    fmt_value(c, "measured", m, sizeof m);
    fmt_value(c, "expected", e, sizeof e);
    double ratio = num(c, "ratio");
    if (isfinite(ratio)) snprintf(r, sizeof r, fabs(ratio) < 1000 ? "%.2f" : "%.3g", ratio);
    const char *note = str(c, "note"), *code = str(c, "code");
    emit(f, "%-7s %-22s %-24s %-24s %5s  %-14s%s%s%s%s\n", dev, str_p(c, "check"), m, e, r,
         str_p(c, "verdict"), code ? "  " : "", code ? code : "", note && note[0] ? "  " : "",
         note ? note : "");
}

// Each FAIL and WARN's fault code and what to do about it, after the table.
static void print_remedies(FILE *f, const cJSON *j) {
    const cJSON *g, *c;
    bool any = false;
    cJSON_ArrayForEach(c, item(item(j, "host"), "checks")) {
        if (!str(c, "code")) continue;
        if (!any) fprintf(f, "what to do:\n");
        any = true;
        emit(f, "  host %s %s: %s\n", str_p(c, "code"), str_p(c, "check"), str_p(c, "remedy"));
    }
    cJSON_ArrayForEach(g, item(j, "gpus")) {
        cJSON_ArrayForEach(c, item(g, "checks")) {
            if (!str(c, "code")) continue;
            if (!any) fprintf(f, "what to do:\n");
            any = true;
            emit(f, "  %s %s %s: %s\n", str_p(g, "device"), str_p(c, "code"), str_p(c, "check"),
                 str_p(c, "remedy"));
        }
    }
}

void check_print_text(FILE *f, const cJSON *j) {
    fprintf(f, "%-7s %-22s %-24s %-24s %5s  %s\n", "device", "check", "measured", "expected", "ratio", "verdict");
    const cJSON *host = item(j, "host");
    const cJSON *c;
    cJSON_ArrayForEach(c, item(host, "checks")) print_line(f, "host", c);
    const cJSON *g;
    cJSON_ArrayForEach(g, item(j, "gpus")) {
        const char *model = str(g, "model");
        emit(f, "%s: %s%s%s%s\n", str_p(g, "device"),
             cJSON_IsTrue(item(g, "emulated")) ? "EMULATED on the CPU (suites/emu): not a GPU, "
                                               : "",
             str(g, "name") ? str(g, "name") : "?", model ? ", model " : "",
             model ? model
             : cJSON_IsTrue(item(g, "emulated"))
                 ? ""
                 : " (no model expectation: numerics and its siblings only)");
        cJSON_ArrayForEach(c, item(g, "checks")) print_line(f, str_p(g, "device"), c);
    }
    cJSON_ArrayForEach(c, item(j, "needs_gpu")) print_line(f, "cuda", c);
    int ng = cJSON_GetArraySize(item(j, "gpus"));
    if (ng > 1) {
        int no = cJSON_GetArraySize(item(j, "outliers"));
        if (!no) fprintf(f, "node: no GPU far below its siblings\n");
        cJSON_ArrayForEach(c, item(j, "outliers"))
            emit(f, "node: OUTLIER %s %s: %s\n", str_p(c, "device"), str_p(c, "check"),
                 str_p(c, "note"));
    }
    print_remedies(f, j);
    emit(f, "%s\n", str_p(item(j, "summary"), "line"));
}

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
#include "stats.h"

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

// PCIe per-direction rate, GB/s: GT/s x encoding / 8 x lanes (as suites/bench/transfer.c).
static double pcie_gbps(double gen, double width) {
    static const double gts[] = {2.5, 5, 8, 16, 32, 64};
    static const double enc[] = {0.8, 0.8, 128.0 / 130, 128.0 / 130, 128.0 / 130, 242.0 / 256};
    if (!(gen >= 1 && gen <= 6) || !(width >= 1)) return NAN;
    return gts[(int)gen - 1] * enc[(int)gen - 1] / 8 * width;
}

// Adds one check line: measured and expected are numbers (NaN: null) or, when *_text is given,
// strings; ratio NaN is null.
static cJSON *add_line(cJSON *arr, const char *check, double measured, const char *measured_text,
                       const char *unit, double expected, const char *expected_text, double ratio,
                       const char *verdict, const char *fmt, ...) __attribute__((format(printf, 10, 11)));
static cJSON *add_line(cJSON *arr, const char *check, double measured, const char *measured_text,
                       const char *unit, double expected, const char *expected_text, double ratio,
                       const char *verdict, const char *fmt, ...) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "check", check);
    if (measured_text) cJSON_AddStringToObject(c, "measured", measured_text);
    else if (isfinite(measured)) cJSON_AddNumberToObject(c, "measured", measured);
    else cJSON_AddNullToObject(c, "measured");
    if (unit) cJSON_AddStringToObject(c, "unit", unit);
    else cJSON_AddNullToObject(c, "unit");
    if (expected_text) cJSON_AddStringToObject(c, "expected", expected_text);
    else if (isfinite(expected)) cJSON_AddNumberToObject(c, "expected", expected);
    else cJSON_AddNullToObject(c, "expected");
    if (isfinite(ratio)) cJSON_AddNumberToObject(c, "ratio", ratio);
    else cJSON_AddNullToObject(c, "ratio");
    cJSON_AddStringToObject(c, "verdict", verdict);
    char note[600] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(note, sizeof note, fmt, ap);
        va_end(ap);
    }
    cJSON_AddStringToObject(c, "note", note);
    cJSON_AddItemToArray(arr, c);
    return c;
}

static const char *by_threshold(double ratio, const cJSON *t) {
    if (!isfinite(ratio)) return CHECK_MISSING;
    if (ratio < num(t, "fail")) return CHECK_FAIL;
    if (ratio < num(t, "warn")) return CHECK_WARN;
    return CHECK_PASS;
}

// ---- numerics and training: the runs said pass or fail -------------------------------------------

static void judge_runs(cJSON *checks, const cJSON *numerics) {
    const cJSON *r;
    cJSON_ArrayForEach(r, numerics) {
        const char *res = str(r, "result");
        const char *verdict = !res ? CHECK_MISSING
                              : !strcmp(res, "pass") ? CHECK_PASS
                              : !strcmp(res, "fail") || !strcmp(res, "error") ? CHECK_FAIL
                              : !strcmp(res, "needs a GPU") ? CHECK_NEEDS_GPU
                              : CHECK_NOT_RUN;
        const char *detail = str(r, "detail");
        add_line(checks, r->string, NAN, str(r, "measured") ? str(r, "measured") : res ? res : "?",
                 NULL, NAN, str(r, "expected") ? str(r, "expected") : "within the bounds", NAN,
                 verdict, "%s%s%s", res && !strcmp(res, "error") ? "could not run: " : "",
                 detail ? detail : "", "");
    }
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
    double pcie = pcie_gbps(gen, width);
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

static void judge_perf(cJSON *checks, const cJSON *gpu, const cJSON *model, const cJSON *expect,
                       bool emulated) {
    const cJSON *figs = item(gpu, "figures");
    for (int k = 0; check_perf_names[k]; k++) {
        const char *name = check_perf_names[k];
        const cJSON *f = item(figs, name);
        if (!f) continue;   // not applicable here (one GPU: no multi.*)
        double v = num(f, "value");
        const char *unit = str(f, "unit") ? str(f, "unit") : perf_unit(name);
        const char *extra = str(f, "note") ? str(f, "note") : "";
        if (!isfinite(v)) {
            const char *error = str(f, "error"), *why = str(f, "why");
            add_line(checks, name, NAN, NULL, unit, NAN, NULL, NAN,
                     error ? CHECK_FAIL : why && !strcmp(why, CHECK_NEEDS_GPU) ? CHECK_NEEDS_GPU
                                                                               : CHECK_NOT_RUN,
                     "%s%s", error ? "the measurement failed: " : "", error ? error : why ? why : "");
            continue;
        }
        if (emulated) {
            add_line(checks, name, v, NULL, unit, NAN, NULL, NAN, CHECK_EMULATED,
                     "measured on the emulated device: not a GPU figure, not judged%s%s",
                     extra[0] ? "; " : "", extra);
            continue;
        }
        char why[160] = "";
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
        if (!model) {
            add_line(checks, name, v, NULL, unit, NAN, NULL, NAN, CHECK_NO_EXPECT,
                     "unknown model: judged only against its siblings%s%s", extra[0] ? "; " : "",
                     extra);
            continue;
        }
        if (!isfinite(expected)) {
            add_line(checks, name, v, NULL, unit, NAN, NULL, NAN, CHECK_NO_EXPECT,
                     "the model has no figure for it%s%s", extra[0] ? "; " : "", extra);
            continue;
        }
        double ratio = v / expected;
        add_line(checks, name, v, NULL, unit, expected, NULL, ratio, by_threshold(ratio, thr),
                 "%s; FAIL below %g, WARN below %g%s%s", why, num(thr, "fail"), num(thr, "warn"),
                 extra[0] ? "; " : "", extra);
    }
}

// ---- the PCIe link: current below maximum is a fault ---------------------------------------------

static void judge_link(cJSON *checks, const cJSON *gpu, const cJSON *model, bool emulated) {
    const cJSON *link = item(gpu, "link");
    if (!link) return;
    double g = num(link, "pcie_gen"), w = num(link, "pcie_width");
    double gm = num(link, "pcie_gen_max"), wm = num(link, "pcie_width_max");
    if (emulated) {
        add_line(checks, "pcie.link", NAN, "none", NULL, NAN, NULL, NAN, CHECK_EMULATED,
                 "the emulated device has no PCIe link");
        return;
    }
    if (!isfinite(g) || !isfinite(w) || !isfinite(gm) || !isfinite(wm)) {
        add_line(checks, "pcie.link", NAN, NULL, NULL, NAN, NULL, NAN, CHECK_MISSING,
                 "neither NVML nor sysfs said the link's generation and width%s%s",
                 str(item(gpu, "health"), "nvml") ? ": " : "",
                 str(item(gpu, "health"), "nvml") ? str(item(gpu, "health"), "nvml") : "");
        return;
    }
    char m[32], e[32];
    snprintf(m, sizeof m, "gen%g x%g", g, w);
    snprintf(e, sizeof e, "gen%g x%g", gm, wm);
    double ratio = pcie_gbps(g, w) / pcie_gbps(gm, wm);
    bool under_load = cJSON_IsTrue(item(link, "under_load"));
    if (g < gm || w < wm) {
        add_line(checks, "pcie.link", NAN, m, NULL, NAN, e, ratio, under_load ? CHECK_FAIL : CHECK_WARN,
                 "the link trained below its maximum (%s%s%s)%s",
                 g < gm ? "generation" : "", g < gm && w < wm ? " and " : "", w < wm ? "width" : "",
                 under_load ? ", read while copying" : "; read at idle, when links train down");
        return;
    }
    double mg = num(model, "pcie_gen"), mw = num(model, "pcie_width");
    if (model && isfinite(mg) && isfinite(mw) && (gm < mg || wm < mw)) {
        add_line(checks, "pcie.link", NAN, m, NULL, NAN, e, ratio, CHECK_WARN,
                 "the slot allows less than the model's gen%g x%g (a riser, a switch or the BIOS)", mg, mw);
        return;
    }
    add_line(checks, "pcie.link", NAN, m, NULL, NAN, e, ratio, CHECK_PASS, "%s",
             under_load ? "read while copying" : "read at idle");
}

// ---- NVML's health readings: missing readings are reported, never guessed -------------------------

static void throttle_names(double r, char *buf, size_t n) {
    static const char *names[] = {"gpu idle",    "applications clocks", "sw power cap",
                                  "hw slowdown", "sync boost",          "sw thermal",
                                  "hw thermal",  "hw power brake",      "display clocks"};
    unsigned long long bits = (unsigned long long)r;
    size_t len = 0;
    buf[0] = '\0';
    if (!bits) snprintf(buf, n, "none");
    for (int b = 0; b < 64 && len < n; b++)
        if (bits & (1ULL << b))
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "",
                                    b < 9 ? names[b] : "other");
}

static void judge_health(cJSON *checks, const cJSON *gpu, bool emulated) {
    const cJSON *h = item(gpu, "health");
    if (!h) return;
    const char *why = str(h, "nvml");
    char miss[300];
    snprintf(miss, sizeof miss, "%s%s", why && why[0] ? "not read: " : "not reported by the device", why && why[0] ? why : "");
    if (emulated) snprintf(miss, sizeof miss, "the emulated device has no NVML");
    const char *missing = emulated ? CHECK_EMULATED : CHECK_MISSING;
    if (emulated) {   // no NVML there: whatever the emulator's properties say is not a GPU's
        static const char *names[] = {"nvml.throttle", "nvml.temperature", "nvml.remapped_rows",
                                      "nvml.retired_pages", "nvml.ecc", "nvml.clocks"};
        for (size_t k = 0; k < sizeof names / sizeof *names; k++)
            add_line(checks, names[k], NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
        return;
    }

    double r = num(h, "throttle_reasons");
    if (!isfinite(r)) add_line(checks, "nvml.throttle", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
    else {
        char names[300];
        throttle_names(r, names, sizeof names);
        unsigned long long bits = (unsigned long long)r;
        const unsigned long long bad = (1ULL << 3) | (1ULL << 5) | (1ULL << 6) | (1ULL << 7);
        add_line(checks, "nvml.throttle", NAN, names, NULL, NAN,
                 "no hw slowdown, thermal or power brake", NAN, bits & bad ? CHECK_FAIL : CHECK_PASS,
                 "%s%s", bits & bad ? "clocks held down by the hardware or by heat during the load" : "read during the load",
                 bits & (1ULL << 2) ? "; at its power cap (expected at full load)" : "");
    }

    double t = num(h, "temperature_c"), ts = num(h, "temperature_slowdown_c");
    if (!isfinite(t)) add_line(checks, "nvml.temperature", NAN, NULL, "C", NAN, NULL, NAN, missing, "%s", miss);
    else if (!isfinite(ts))
        add_line(checks, "nvml.temperature", t, NULL, "C", NAN, NULL, NAN, CHECK_MISSING,
                 "no slowdown threshold reported to judge it against");
    else
        add_line(checks, "nvml.temperature", t, NULL, "C", ts, NULL, t / ts,
                 t >= ts ? CHECK_FAIL : t >= ts - 5 ? CHECK_WARN : CHECK_PASS,
                 "expected below the slowdown threshold (WARN within 5 C of it)");

    double rc = num(h, "remapped_rows_correctable"), ru = num(h, "remapped_rows_uncorrectable");
    double rp = num(h, "remapped_rows_pending"), rf = num(h, "remapped_rows_failed");
    if (!isfinite(ru)) add_line(checks, "nvml.remapped_rows", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s%s", miss, emulated ? "" : " (row remapping is Ampere's and later's)");
    else {
        char m[96];
        snprintf(m, sizeof m, "%g correctable, %g uncorrectable", rc, ru);
        add_line(checks, "nvml.remapped_rows", NAN, m, NULL, NAN, "no failed or pending remap", NAN,
                 rf == 1 ? CHECK_FAIL : rp == 1 ? CHECK_WARN : CHECK_PASS, "%s",
                 rf == 1 ? "a row remap failed: the GPU cannot repair its memory (NVIDIA: RMA)"
                 : rp == 1 ? "a remap waits for a GPU reset"
                           : "");
    }

    double ps = num(h, "retired_pages_sbe"), pd = num(h, "retired_pages_dbe"), pp = num(h, "retired_pages_pending");
    if (!isfinite(ps) && !isfinite(pd))
        add_line(checks, "nvml.retired_pages", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s%s", miss,
                 emulated ? "" : " (page retirement is for GPUs before Ampere, which remap rows)");
    else {
        char m[96];
        snprintf(m, sizeof m, "%g single-bit, %g double-bit", ps, pd);
        add_line(checks, "nvml.retired_pages", NAN, m, NULL, NAN, "no retirement pending", NAN,
                 pp == 1 ? CHECK_WARN : CHECK_PASS, "%s", pp == 1 ? "a retirement waits for a reset" : "");
    }

    double ecc = num(h, "ecc"), ev = num(h, "ecc_uncorrected_volatile"), ea = num(h, "ecc_uncorrected_aggregate");
    if (!isfinite(ecc) && !isfinite(ev))
        add_line(checks, "nvml.ecc", NAN, NULL, NULL, NAN, NULL, NAN, missing, "%s", miss);
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
        add_line(checks, "nvml.ecc", NAN, m, NULL, NAN, "on, no uncorrected errors", NAN, v, "%s",
                 ev > 0 ? "uncorrected memory errors since boot: results may be wrong"
                 : ecc == 0 ? "ECC is off: memory errors go unnoticed"
                 : ea > 0 ? "uncorrected errors in an earlier life (counted ever, none since boot)"
                          : "");
    }

    double c = num(h, "clock_sm_mhz"), cm = num(h, "clock_sm_max_mhz");
    if (!isfinite(c) || !isfinite(cm) || cm <= 0)
        add_line(checks, "nvml.clocks", c, NULL, "MHz", cm, NULL, NAN, missing, "%s", miss);
    else
        add_line(checks, "nvml.clocks", c, NULL, "MHz", cm, NULL, c / cm,
                 c / cm < 0.6 ? CHECK_WARN : CHECK_PASS,
                 "SM clock during the load against its maximum (WARN below 0.6)");
}

// ---- the outlier rule: each figure against the GPU's siblings ------------------------------------

static void judge_outliers(cJSON *gpus_out, const cJSON *expect, cJSON *outliers) {
    const cJSON *o = item(expect, "outlier");
    int n = cJSON_GetArraySize(gpus_out);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v), *sib = malloc((size_t)(n ? n : 1) * sizeof *sib);
    if (!v || !sib) goto done;
    for (int k = 0; check_perf_names[k]; k++) {
        const char *name = check_perf_names[k];
        if (!strcmp(name, "multi.allreduce")) continue;   // one figure for the whole group
        for (int i = 0; i < n; i++) {
            const cJSON *g = cJSON_GetArrayItem(gpus_out, i);
            v[i] = cJSON_IsTrue(item(g, "emulated")) ? NAN : num(item(item(g, "figures"), name), "value");
        }
        for (int i = 0; i < n; i++) {
            if (!isfinite(v[i])) continue;
            cJSON *gi = cJSON_GetArrayItem(gpus_out, i);
            const char *ni = str(gi, "name");
            int ns = 0;
            for (int j = 0; j < n; j++) {
                const char *nj = str(cJSON_GetArrayItem(gpus_out, j), "name");
                if (j != i && isfinite(v[j]) && ni && nj && !strcmp(ni, nj)) sib[ns++] = v[j];
            }
            if (!ns) continue;
            double med = bench_median(sib, ns), ratio = v[i] / med;
            const char *verdict = by_threshold(ratio, o);
            if (!strcmp(verdict, CHECK_PASS)) continue;
            char check[64];
            snprintf(check, sizeof check, "outlier.%s", name);
            const char *dev = str(gi, "device") ? str(gi, "device") : "?";
            cJSON *line = add_line(cJSON_GetObjectItemCaseSensitive(gi, "checks"), check, v[i], NULL, perf_unit(name), med, NULL,
                                   ratio, verdict,
                                   "%s is %.2f x the median of its %d sibling%s (%s); FAIL below %g, WARN below %g",
                                   dev, ratio, ns, ns == 1 ? "" : "s", ni, num(o, "fail"), num(o, "warn"));
            cJSON *copy = cJSON_Duplicate(line, true);
            cJSON_AddStringToObject(copy, "device", dev);
            cJSON_AddItemToArray(outliers, copy);
        }
    }
done:
    free(v);
    free(sib);
}

// ---- the whole ---------------------------------------------------------------------------------------

static const char *gpu_check_names[] = {
    "numerics.golden", "numerics.conform", "train", "memory.d2d", "gemm.tf32", "gemm.f16",
    "gemm.bf16", "gemm.f64", "pcie.h2d", "pcie.d2h", "pcie.link", "multi.allreduce", "multi.peer",
    "nvml.throttle", "nvml.temperature", "nvml.remapped_rows", "nvml.retired_pages", "nvml.ecc",
    "nvml.clocks", NULL};

static void count(const cJSON *checks, int *c) {
    const cJSON *x;
    cJSON_ArrayForEach(x, checks) {
        const char *v = str(x, "verdict");
        if (!v) continue;
        if (!strcmp(v, CHECK_PASS)) c[0]++;
        else if (!strcmp(v, CHECK_WARN)) c[1]++;
        else if (!strcmp(v, CHECK_FAIL)) c[2]++;
        else c[3]++;
    }
}

cJSON *check_judge(const cJSON *figures, const cJSON *expect, char *err, size_t len) {
    const cJSON *gpus = item(figures, "gpus");
    if (!cJSON_IsObject(figures) || !cJSON_IsArray(gpus)) {
        snprintf(err, len, "not check figures: needs an object with a \"gpus\" array (format %s, or "
                 "a status.json \"check\" section)", CHECK_FIGURES_FORMAT);
        return NULL;
    }
    int i = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, gpus) {
        if (!cJSON_IsObject(g) || !cJSON_IsString(item(g, "device"))) {
            snprintf(err, len, "gpus[%d]: needs an object with a \"device\" (\"cuda:N\")", i);
            return NULL;
        }
        const cJSON *f = item(g, "figures");
        if (f && !cJSON_IsObject(f)) {
            snprintf(err, len, "gpus[%d].figures: must be an object", i);
            return NULL;
        }
        const cJSON *x;
        cJSON_ArrayForEach(x, f) {
            const cJSON *v = item(x, "value");
            if (!cJSON_IsObject(x) || !(cJSON_IsNumber(v) || cJSON_IsNull(v) || !v)) {
                snprintf(err, len, "gpus[%d].figures.%s: needs {\"value\": number or null}", i, x->string);
                return NULL;
            }
        }
        i++;
    }
    cJSON *out = cJSON_Duplicate(figures, true);
    cJSON_DeleteItemFromObjectCaseSensitive(out, "format");
    cJSON_DeleteItemFromObjectCaseSensitive(out, "summary");
    cJSON_DeleteItemFromObjectCaseSensitive(out, "outliers");
    cJSON_DeleteItemFromObjectCaseSensitive(out, "needs_gpu");
    cJSON_AddStringToObject(out, "format", CHECK_SECTION_FORMAT);
    cJSON *gpus_out = cJSON_GetObjectItemCaseSensitive(out, "gpus");
    int c[4] = {0}, judged_gpus = 0, emulated_gpus = 0;
    cJSON *go;
    cJSON_ArrayForEach(go, gpus_out) {
        cJSON_DeleteItemFromObjectCaseSensitive(go, "checks");
        cJSON_DeleteItemFromObjectCaseSensitive(go, "model");
        bool emulated = cJSON_IsTrue(item(go, "emulated"));
        emulated_gpus += emulated;
        const cJSON *model = emulated ? NULL : check_expect_model(expect, str(go, "name"));
        if (model) cJSON_AddStringToObject(go, "model", str(model, "model"));
        else cJSON_AddNullToObject(go, "model");
        cJSON *checks = cJSON_AddArrayToObject(go, "checks");
        judge_runs(checks, item(go, "numerics"));
        judge_perf(checks, go, model, expect, emulated);
        judge_link(checks, go, model, emulated);
        judge_health(checks, go, emulated);
    }
    cJSON *outliers = cJSON_AddArrayToObject(out, "outliers");
    judge_outliers(gpus_out, expect, outliers);
    cJSON_ArrayForEach(go, gpus_out) {
        int gc[4] = {0};
        count(item(go, "checks"), gc);
        for (int k = 0; k < 4; k++) c[k] += gc[k];
        if (!cJSON_IsTrue(item(go, "emulated")) && gc[0] + gc[1] + gc[2] > 0) judged_gpus++;
    }
    cJSON *host = cJSON_GetObjectItemCaseSensitive(out, "host");
    if (cJSON_IsObject(host)) {
        cJSON_DeleteItemFromObjectCaseSensitive(host, "checks");
        cJSON *hc = cJSON_AddArrayToObject(host, "checks");
        judge_runs(hc, item(host, "numerics"));
        count(hc, c);
    }
    if (cJSON_GetArraySize(gpus_out) == 0) {   // say what a GPU would have been checked for
        cJSON *ng = cJSON_AddArrayToObject(out, "needs_gpu");
        for (int k = 0; gpu_check_names[k]; k++)
            add_line(ng, gpu_check_names[k], NAN, NULL, NULL, NAN, NULL, NAN, CHECK_NEEDS_GPU, "%s",
                     k ? "" : str(figures, "no_gpu") ? str(figures, "no_gpu") : "no GPU");
        c[3] += cJSON_GetArraySize(ng);
    }
    int exit_code = c[2] ? CHECK_EXIT_FAIL : judged_gpus ? CHECK_EXIT_PASS : CHECK_EXIT_NO_GPU;
    char line[600];
    if (c[2]) {
        int k = snprintf(line, sizeof line, "FAIL: %d check%s failed:", c[2], c[2] == 1 ? "" : "s");
        cJSON_ArrayForEach(go, gpus_out) {
            const cJSON *x;
            cJSON_ArrayForEach(x, item(go, "checks")) if (!strcmp(str(x, "verdict"), CHECK_FAIL) &&
                                                          k < (int)sizeof line - 80) k +=
                snprintf(line + k, sizeof line - (size_t)k, " %s %s", str(go, "device"), str(x, "check"));
        }
        const cJSON *x;
        cJSON_ArrayForEach(x, item(host, "checks")) if (!strcmp(str(x, "verdict"), CHECK_FAIL) &&
                                                        k < (int)sizeof line - 80) k +=
            snprintf(line + k, sizeof line - (size_t)k, " host %s", str(x, "check"));
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
    cJSON *s = cJSON_AddObjectToObject(out, "summary");
    cJSON_AddNumberToObject(s, "pass", c[0]);
    cJSON_AddNumberToObject(s, "warn", c[1]);
    cJSON_AddNumberToObject(s, "fail", c[2]);
    cJSON_AddNumberToObject(s, "not_judged", c[3]);
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
        snprintf(buf, n, fabs(x) >= 100 || x == floor(x) ? "%.0f%s%s" : "%.3g%s%s", x, unit ? " " : "", unit ? unit : "");
    } else snprintf(buf, n, "-");
}

static void print_line(FILE *f, const char *dev, const cJSON *c) {
    char m[96], e[96], r[16] = "-";
    fmt_value(c, "measured", m, sizeof m);
    fmt_value(c, "expected", e, sizeof e);
    double ratio = num(c, "ratio");
    if (isfinite(ratio)) snprintf(r, sizeof r, "%.2f", ratio);
    const char *note = str(c, "note");
    fprintf(f, "%-7s %-22s %-24s %-24s %5s  %-14s%s%s\n", dev, str(c, "check"), m, e, r,
            str(c, "verdict"), note && note[0] ? "  " : "", note ? note : "");
}

void check_print_text(FILE *f, const cJSON *j) {
    fprintf(f, "%-7s %-22s %-24s %-24s %5s  %s\n", "device", "check", "measured", "expected", "ratio", "verdict");
    const cJSON *host = item(j, "host");
    const cJSON *c;
    cJSON_ArrayForEach(c, item(host, "checks")) print_line(f, "host", c);
    const cJSON *g;
    cJSON_ArrayForEach(g, item(j, "gpus")) {
        const char *model = str(g, "model");
        fprintf(f, "%s: %s%s%s%s\n", str(g, "device"),
                cJSON_IsTrue(item(g, "emulated")) ? "EMULATED on the CPU (suites/emu): not a GPU, " : "",
                str(g, "name") ? str(g, "name") : "?", model ? ", model " : "",
                model ? model : cJSON_IsTrue(item(g, "emulated")) ? "" : " (no model expectation: numerics and its siblings only)");
        cJSON_ArrayForEach(c, item(g, "checks")) print_line(f, str_p(g, "device"), c);
    }
    cJSON_ArrayForEach(c, item(j, "needs_gpu")) print_line(f, "cuda", c);
    int ng = cJSON_GetArraySize(item(j, "gpus"));
    if (ng > 1) {
        int no = cJSON_GetArraySize(item(j, "outliers"));
        if (!no) fprintf(f, "node: no GPU far below its siblings\n");
        cJSON_ArrayForEach(c, item(j, "outliers"))
            fprintf(f, "node: OUTLIER %s %s: %s\n", str_p(c, "device"), str_p(c, "check"),
                    str_p(c, "note"));
    }
    fprintf(f, "%s\n", str_p(item(j, "summary"), "line"));
}

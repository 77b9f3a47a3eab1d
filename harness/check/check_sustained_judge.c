/* check_sustained_judge.c — the judge of `bench check`'s sustained and pulsed load series
 * (check_sustained.c records them; docs/CHECK.md "Sustained and pulsed load"): a pure function of
 * the recorded series and the expectations, called by check_judge (so recorded and planted series
 * are judged alike, suites/tests/test_check.c), and the strict check of recorded series (bad
 * input: exit 2, the field named).
 *
 * Rules, per GPU: sustained.stress (targeted stress held its target), sustained.power (targeted
 * power's median against the model's bf16 figure), sustained.clocks (the SM clock's last fifth
 * against its first, per phase), sustained.decay (targeted power's throughput, the same way),
 * sustained.throttle and pulsed.load (NVML's clocks-event reasons: hw slowdown, sw or hw thermal,
 * hw power brake are faults; the sw power cap is normal at full power). Where the series holds
 * NVML's violation times per phase ("phases"), they attribute the slowdowns: a thermal,
 * board-limit or reliability violation time in a judged phase FAILs even when no sample saw it,
 * and hw slowdown sampled without any of them is a P-state or clock change (NVML: hw slowdown
 * "may be also reported during PState or clock change"), said, not failed. Reason bits NVML did
 * not define when this was written (above 0x1ff) are named "unknown 0x..." and kept. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_lines.h"
#include "harness/json_strict.h"
#include "check_sustained.h"
#include "harness/stats.h"
#include "tandem/tandem.h"

const char *const check_series_keys[N_KEYS] = {"t_s",           "sm_clock_mhz",  "mem_clock_mhz",
                                               "power_w",       "temperature_c", "throttle_reasons",
                                               "tflops",        "phase"};
const char *const check_series_phases[5] = {"calibrate", "stress", "power", "on", "off"};

// ---- the judge (pure) ------------------------------------------------------------------------------

static const cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static double num(const cJSON *o, const char *k) {
    const cJSON *v = item(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

// A series read for judging: each array as doubles (NaN: null), the phases as strings.
typedef struct {
    int n;
    double *v[N_KEYS - 1];
    const char **phase;
} series;

static void series_free(series *s) {
    for (int k = 0; k < N_KEYS - 1; k++) free(s->v[k]);
    free(s->phase);
}

static bool series_read(const cJSON *o, series *s) {
    memset(s, 0, sizeof *s);
    s->n = cJSON_GetArraySize(item(o, "t_s"));
    size_t m = (size_t)(s->n ? s->n : 1);
    bool ok = (s->phase = calloc(m, sizeof *s->phase)) != NULL;
    for (int k = 0; k < N_KEYS - 1; k++) ok = (s->v[k] = calloc(m, sizeof(double))) && ok;
    if (!ok) return false;
    for (int k = 0; k < N_KEYS; k++) {
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, item(o, check_series_keys[k])) {
            if (i >= s->n) break;
            if (k == K_PHASE) s->phase[i] = cJSON_GetStringValue(e);
            else s->v[k][i] = cJSON_IsNumber(e) ? e->valuedouble : NAN;
            i++;
        }
    }
    return true;
}

// Whether the series has a reading of KEY at any sample.
static bool any_reading(const series *s, int key) {
    for (int i = 0; i < s->n; i++)
        if (isfinite(s->v[key][i])) return true;
    return false;
}

static bool in_phase(const series *s, int i, const char *phase) {
    return s->phase[i] && (!phase || !strcmp(s->phase[i], phase));
}

// The windows a judged phase (stress, power) needs at least: one window is no median over a phase.
#define SUSTAINED_MIN_WINDOWS 2

// The windows of PHASE that have a rate.
static int windows(const series *s, const char *phase) {
    int m = 0;
    for (int i = 0; i < s->n; i++) m += in_phase(s, i, phase) && isfinite(s->v[K_TFLOPS][i]);
    return m;
}

// The median of key over the first (or last) fifth of a phase's samples that have a reading.
static double fifth(const series *s, int key, const char *phase, bool last, int *count) {
    int m = 0;
    for (int i = 0; i < s->n; i++) m += in_phase(s, i, phase) && isfinite(s->v[key][i]);
    *count = m;
    if (m < 2) return NAN;
    int want = m / 5 > 0 ? m / 5 : 1, got = 0;
    double *x = malloc((size_t)want * sizeof *x);
    if (!x) return NAN;
    for (int j = 0; j < s->n && got < want; j++) {
        int i = last ? s->n - 1 - j : j;
        if (in_phase(s, i, phase) && isfinite(s->v[key][i])) x[got++] = s->v[key][i];
    }
    double v = bench_median(x, got);
    free(x);
    return v;
}

// Of the last fifth of a phase's samples with a throttle reading, the fraction at the power cap.
static double power_capped_last(const series *s, const char *phase) {
    int m = 0;
    for (int i = 0; i < s->n; i++) m += in_phase(s, i, phase) && isfinite(s->v[K_THROTTLE][i]);
    int want = m / 5 > 0 ? m / 5 : 1, got = 0, capped = 0;
    for (int j = 0; j < s->n && got < want; j++) {
        int i = s->n - 1 - j;
        if (!in_phase(s, i, phase) || !isfinite(s->v[K_THROTTLE][i])) continue;
        got++;
        capped += ((unsigned long long)s->v[K_THROTTLE][i] & CHECK_THROTTLE_POWER_CAP) != 0;
    }
    return got ? (double)capped / got : 0;
}

// The violation times (s) of the phases given over the series' "phases": per policy, the sum
// (NaN when a phase that ran lacks it); *any false when no judged phase has them.
static void violations(const cJSON *o, const char *const *ph, double v[TDM_VIOLATION_N], double *seconds, bool *any) {
    *any = false;
    *seconds = 0;
    for (int k = 0; k < TDM_VIOLATION_N; k++) v[k] = 0;
    for (int p = 0; ph[p]; p++) {
        const cJSON *x = item(item(o, "phases"), ph[p]);
        if (!cJSON_IsObject(x)) continue;
        *seconds += num(x, "seconds");
        for (int k = 0; k < TDM_VIOLATION_N; k++) {
            double d = num(item(x, "violation_s"), tdm_violation_policy_name(k));
            v[k] += d;   // NaN stays NaN
            *any = *any || isfinite(d);
        }
    }
}

// The violation policies that are heat or the hardware (a fault in a judged phase); the power
// cap is normal at full load, sync boost, low utilization and the clocks' totals are not faults.
static const int bad_policies[] = {TDM_VIOLATION_THERMAL, TDM_VIOLATION_BOARD_LIMIT, TDM_VIOLATION_RELIABILITY};

static void policy_label(int k, char *buf, size_t n) {
    snprintf(buf, n, "%s", tdm_violation_policy_name(k));
    for (char *c = buf; *c; c++)
        if (*c == '_') *c = ' ';
}

// The throttle reasons of the samples of the phases given (NULL-terminated): a line CHECK that
// FAILs with CODE naming each bad reason, the fraction of samples and when it was first seen;
// with NVML's violation times of those phases (the series' "phases"), attributed by them.
static void judge_throttle(cJSON *checks, const char *check, const cJSON *o, const series *s,
                           const char *const *ph, const char *code, const char *what) {
    int read = 0, bad = 0, capped = 0, count[64] = {0};
    double first[64] = {0};
    unsigned long long seen = 0, unknown = 0;
    double viol[TDM_VIOLATION_N], phase_s;
    bool have_viol;
    violations(o, ph, viol, &phase_s, &have_viol);
    // with violation times, hw slowdown alone is attributed by them (below), not a fault by itself
    const unsigned long long bad_bits = have_viol ? CHECK_THROTTLE_BAD & ~CHECK_THROTTLE_HW_SLOWDOWN : CHECK_THROTTLE_BAD;
    const unsigned long long named = CHECK_THROTTLE_BAD;   // named in the note with their share
    for (int i = 0; i < s->n; i++) {
        bool in = false;
        for (int p = 0; ph[p]; p++) in = in || in_phase(s, i, ph[p]);
        if (!in || !isfinite(s->v[K_THROTTLE][i])) continue;
        read++;
        unsigned long long r = (unsigned long long)s->v[K_THROTTLE][i];
        capped += (r & CHECK_THROTTLE_POWER_CAP) != 0;
        bad += (r & bad_bits) != 0;
        unknown |= r & ~CHECK_THROTTLE_KNOWN;
        for (int b = 0; b < 64; b++)
            if (r & named & (1ULL << b)) {
                if (!count[b]++) first[b] = s->v[K_T][i];
                seen |= 1ULL << b;
            }
    }
    char note[900] = "", m[200];
    double bad_viol = 0;
    char vnote[300] = "";
    if (have_viol) {
        size_t vl = (size_t)snprintf(vnote, sizeof vnote, "; NVML's violation times over %.0f s:", phase_s);
        for (size_t j = 0; j < sizeof bad_policies / sizeof *bad_policies; j++) {
            char lab[40];
            policy_label(bad_policies[j], lab, sizeof lab);
            double v = viol[bad_policies[j]];
            if (isfinite(v)) bad_viol += v;
            vl += (size_t)snprintf(vnote + vl, sizeof vnote - vl, "%s %s %.3g s", j ? "," : "", lab, v);
        }
        if (isfinite(viol[TDM_VIOLATION_POWER]) && vl < sizeof vnote)
            snprintf(vnote + vl, sizeof vnote - vl, ", power cap %.3g s", viol[TDM_VIOLATION_POWER]);
    }
    if (!read && !have_viol) {
        check_judge_line(checks, check, NAN, NULL, NULL, NAN, NULL, NAN, CHECK_MISSING, NULL,
                         "no clocks-event reason was read during the load (NVML)");
        return;
    }
    size_t len = 0;
    for (int b = 0; b < 64 && len < sizeof note - 100; b++)
        if (seen & (1ULL << b)) {
            char name[64];
            check_throttle_names((double)(1ULL << b), name, sizeof name);
            len += (size_t)snprintf(note + len, sizeof note - len, "%s%s in %.0f %% of the samples (from t = %.1f s)",
                                    len ? ", " : "", name, 100.0 * count[b] / read, first[b]);
        }
    bool fails = bad || bad_viol > 0;
    if (fails) {
        char names[200] = "";
        if (seen & bad_bits) check_throttle_names((double)(seen & bad_bits), names, sizeof names);
        if (bad_viol > 0) {
            size_t nl = strlen(names);
            for (size_t j = 0; j < sizeof bad_policies / sizeof *bad_policies; j++)
                if (viol[bad_policies[j]] > 0 && nl < sizeof names - 40) {
                    char lab[40];
                    policy_label(bad_policies[j], lab, sizeof lab);
                    nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s%s violation", nl ? ", " : "", lab);
                }
        }
        snprintf(m, sizeof m, "%s", names);
        if (!read) len = (size_t)snprintf(note, sizeof note, "no clocks-event reason was sampled (NVML)");
        len += (size_t)snprintf(note + len, sizeof note - len, ": clocks held down by the hardware or by heat %s", what);
    } else {
        snprintf(m, sizeof m, "%s", capped ? "sw power cap" : "none");
        len = (size_t)snprintf(note, sizeof note, "%d samples", read);
        if (capped)
            len = (size_t)snprintf(note, sizeof note, "%d samples; at its power cap in %.0f %% (normal at full power)",
                                   read, 100.0 * capped / read);
        if (seen & CHECK_THROTTLE_HW_SLOWDOWN)
            len += (size_t)snprintf(note + len, sizeof note - len,
                                    "; hw slowdown in %.0f %% of the samples (from t = %.1f s) with no thermal, "
                                    "board-limit or reliability violation time: a P-state or clock change, not a fault",
                                    100.0 * count[3] / read, first[3]);
    }
    if (unknown && len < sizeof note)
        len += (size_t)snprintf(note + len, sizeof note - len,
                                "; reason bits NVML defined after this tandem (not judged): unknown 0x%llx", unknown);
    if (vnote[0] && len < sizeof note) snprintf(note + len, sizeof note - len, "%s", vnote);
    check_judge_line(checks, check, NAN, m, NULL, NAN, "no hw slowdown, thermal or power brake", NAN,
                     fails ? CHECK_FAIL : CHECK_PASS, code, note);
}

// sustained.clocks: the SM clock's last fifth against its first, per phase (stress, power). The
// line shows the phase whose drop fails (an uncapped one), else the phase that dropped most.
static void judge_clocks(cJSON *checks, const series *s) {
    const char *const ph[] = {"stress", "power"};
    double worst = INFINITY, a = NAN, b = NAN;
    const char *where = NULL;
    bool capped = false, failed = false;
    int read = 0;
    for (int p = 0; p < 2; p++) {
        int m1, m2;
        double f = fifth(s, K_SM, ph[p], false, &m1), l = fifth(s, K_SM, ph[p], true, &m2);
        read += m1;
        if (!(f > 0) || !isfinite(l)) continue;
        bool cap = power_capped_last(s, ph[p]) > 0.5, fails = l / f < 1 - SUSTAINED_DROP && !cap;
        if ((fails && !failed) || (fails == failed && l / f < worst)) {
            worst = l / f;
            a = f;
            b = l;
            where = ph[p];
            capped = cap;
            failed = fails;
        }
    }
    if (!where) {
        check_judge_line(checks, "sustained.clocks", NAN, NULL, "MHz", NAN, NULL, NAN, CHECK_MISSING, NULL,
                         read ? "too few SM clock readings to compare (two per phase at least)"
                              : "no SM clock was read during the load (NVML)");
        return;
    }
    char m[96], e[96], note[300];
    snprintf(m, sizeof m, "%.0f MHz", b);
    snprintf(e, sizeof e, "%.0f MHz", a);
    bool drop = worst < 1 - SUSTAINED_DROP;
    snprintf(note, sizeof note,
             "the SM clock's median over the last fifth of the %s phase against its first fifth; FAIL below %.2f"
             "%s",
             where, 1 - SUSTAINED_DROP,
             drop && capped ? ": at its power cap (sw power cap in most of the last fifth), normal at full power"
             : drop         ? ": the clock fell during the load without a power cap: heat or the hardware"
                            : "");
    check_judge_line(checks, "sustained.clocks", b, NULL, "MHz", a, NULL, worst,
                     drop && !capped ? CHECK_FAIL : CHECK_PASS, "TDM-F103", note);
}

// The model's expectation for the targeted power phase: the fleet's measured gemm.bf16 (DCGM's
// 0.75 x a measured reference: measured_thresholds), else the datasheet's (thresholds.gemm).
static double power_expected(const cJSON *model, const cJSON *expect, const cJSON **thr, char *why,
                             size_t len) {
    const cJSON *measured = item(item(model, "checks"), "gemm.bf16");
    if (cJSON_IsNumber(measured)) {
        *thr = item(expect, "measured_thresholds");
        snprintf(why, len, "the fleet's median gemm.bf16 (--write-expect)");
        return measured->valuedouble;
    }
    *thr = item(item(expect, "thresholds"), "gemm");
    snprintf(why, len, "datasheet dense bf16 peak");
    return num(item(model, "tflops"), "bf16");
}

static void emulated_line(cJSON *checks, const char *check, double v, const char *what) {
    check_judge_line(checks, check, v, NULL, isfinite(v) ? "TFLOP/s" : NULL, NAN, NULL, NAN, CHECK_EMULATED, NULL,
                     what);
}

// Why an emulated run has no clocks-event reason: no NVML there (the series' "nvml" says why), or
// a stand-in NVML that does not give them.
static const char *no_nvml(const cJSON *o) {
    const char *why = cJSON_GetStringValue(item(o, "nvml"));
    return why && why[0] ? "the emulated device has no NVML" : "no clocks-event reason was read (NVML)";
}

static void judge_sustained(cJSON *checks, const cJSON *o, const series *s, const cJSON *model,
                            const cJSON *expect, bool emulated) {
    const cJSON *med = item(o, "median_tflops");
    double vs = num(med, "stress"), vp = num(med, "power"), target = num(o, "target_tflops");
    const char *const load_phases[] = {"calibrate", "stress", "power", NULL};
    if (emulated) {   // the emulator's speed is not a GPU's; its NVML readings are a stand-in's
        char w[200];
        snprintf(w, sizeof w, "measured on the emulated device: not judged (%d samples, %.0f x %.0f bf16)",
                 s->n, num(o, "n"), num(o, "n"));
        emulated_line(checks, "sustained.stress", vs, w);
        emulated_line(checks, "sustained.power", vp, w);
        emulated_line(checks, "sustained.clocks", NAN, w);
        emulated_line(checks, "sustained.decay", NAN, w);
        // a reading there is judged, as the error counters are: a stand-in NVML's planted fault
        if (any_reading(s, K_THROTTLE)) judge_throttle(checks, "sustained.throttle", o, s, load_phases, "TDM-F105", "during the sustained load");
        else emulated_line(checks, "sustained.throttle", NAN, no_nvml(o));
        return;
    }
    char note[400], why[160];
    int ws = windows(s, "stress"), wp = windows(s, "power");
    // targeted stress: the target held (its median over the target)
    if (!isfinite(vs) || !(target > 0) || ws < SUSTAINED_MIN_WINDOWS) {
        snprintf(note, sizeof note, "%d stress window%s%s: not measured (%d at least)", ws, ws == 1 ? "" : "s",
                 target > 0 ? "" : ", no target", SUSTAINED_MIN_WINDOWS);
        check_judge_line(checks, "sustained.stress", vs, NULL, "TFLOP/s", target, NULL, NAN, CHECK_NOT_RUN, NULL,
                         note);
    }
    else {
        snprintf(note, sizeof note, "targeted stress held at %.1f x the GPU's own first rate; FAIL below %.2f x the target",
                 SUSTAINED_TARGET, SUSTAINED_HOLD);
        check_judge_line(checks, "sustained.stress", vs, NULL, "TFLOP/s", target, NULL, vs / target,
                         vs < SUSTAINED_HOLD * target ? CHECK_FAIL : CHECK_PASS, "TDM-F101", note);
    }
    // targeted power: the median against the model's bf16 figure
    const cJSON *thr = NULL;
    double e = model ? power_expected(model, expect, &thr, why, sizeof why) : NAN;
    if (!isfinite(vp) || wp < SUSTAINED_MIN_WINDOWS) {
        snprintf(note, sizeof note, "%d targeted power window%s: not measured (%d at least)", wp,
                 wp == 1 ? "" : "s", SUSTAINED_MIN_WINDOWS);
        check_judge_line(checks, "sustained.power", vp, NULL, "TFLOP/s", e, NULL, NAN, CHECK_NOT_RUN, NULL, note);
    }
    else if (!model || !isfinite(e))
        check_judge_line(checks, "sustained.power", vp, NULL, "TFLOP/s", NAN, NULL, NAN, CHECK_NO_EXPECT, NULL,
                         model ? "the model has no bf16 figure" : "unknown model");
    else {
        double r = vp / e, f = num(thr, "fail"), w = num(thr, "warn");
        snprintf(note, sizeof note, "targeted power (back to back), median over the phase; %s; FAIL below %g, WARN below %g",
                 why, f, w);
        check_judge_line(checks, "sustained.power", vp, NULL, "TFLOP/s", e, NULL, r,
                         r < f ? CHECK_FAIL : r < w ? CHECK_WARN : CHECK_PASS, "TDM-F102", note);
    }
    judge_clocks(checks, s);
    // throughput decay within targeted power
    int m1, m2;
    double f = fifth(s, K_TFLOPS, "power", false, &m1), l = fifth(s, K_TFLOPS, "power", true, &m2);
    if (!(f > 0) || !isfinite(l))
        check_judge_line(checks, "sustained.decay", NAN, NULL, "TFLOP/s", NAN, NULL, NAN, CHECK_NOT_RUN, NULL,
                         "too few targeted power windows to compare (two at least)");
    else {
        snprintf(note, sizeof note, "targeted power's median over its last fifth of windows against its first fifth; FAIL below %.2f",
                 1 - SUSTAINED_DROP);
        check_judge_line(checks, "sustained.decay", l, NULL, "TFLOP/s", f, NULL, l / f,
                         l / f < 1 - SUSTAINED_DROP ? CHECK_FAIL : CHECK_PASS, "TDM-F104", note);
    }
    judge_throttle(checks, "sustained.throttle", o, s, load_phases, "TDM-F105", "during the sustained load");
}

static void judge_pulsed(cJSON *checks, const cJSON *o, const series *s, bool emulated) {
    const char *const ph[] = {"on", "off", NULL};
    double on = num(item(o, "median_tflops"), "on");
    if (emulated && !any_reading(s, K_THROTTLE)) {
        char w[160];
        snprintf(w, sizeof w, "measured on the emulated device: not judged (%d samples)", s->n);
        emulated_line(checks, "pulsed.load", on, w);
        return;
    }
    int windows = 0, read = 0;
    for (int i = 0; i < s->n; i++)
        if (in_phase(s, i, "on") || in_phase(s, i, "off")) {
            windows += in_phase(s, i, "on") && isfinite(s->v[K_TFLOPS][i]);
            read += isfinite(s->v[K_THROTTLE][i]);
        }
    // the pulses are judged by their clocks-event reasons: a load that ran no window, or whose
    // reasons were never read, was not measured (incomplete), never a silent missing
    if (!emulated && (!isfinite(on) || !windows || !read)) {
        check_judge_line(checks, "pulsed.load", NAN, NULL, NULL, NAN, NULL, NAN, CHECK_NOT_RUN, NULL,
                         !isfinite(on) || !windows
                             ? "the pulsed load ran no window: not measured"
                             : "no clocks-event reason was read during the pulses (NVML): the pulsed load "
                               "is judged by them, not measured");
        return;
    }
    judge_throttle(checks, "pulsed.load", o, s, ph, "TDM-F106", "during the pulsed load (power transients)");
}

void check_judge_sustained(cJSON *checks, const cJSON *gpu, const cJSON *model, const cJSON *expect,
                           bool emulated, int level) {
    static const char *const names[] = {"sustained.load", "pulsed.load"};
    for (int k = 0; k < 2; k++) {
        if (!check_level_runs(level, names[k]) || !check_level_row_of(names[k])->implemented) continue;
        const cJSON *o = item(item(gpu, "series"), names[k]);
        if (!cJSON_IsObject(o)) {
            if (emulated)
                check_judge_line(checks, names[k], NAN, NULL, NULL, NAN, NULL, NAN, CHECK_EMULATED, NULL,
                                 "not recorded on the emulated device");
            else
                check_judge_line(checks, names[k], NAN, NULL, NULL, NAN, NULL, NAN, CHECK_ABSENT, NULL,
                                 "expected, absent from the figures: not measured");
            continue;
        }
        const char *error = cJSON_GetStringValue(item(o, "error"));
        if (error) {
            char note[600];
            snprintf(note, sizeof note, "the load could not run: %s", error);
            check_judge_line(checks, names[k], NAN, NULL, NULL, NAN, NULL, NAN, CHECK_FAIL, "TDM-F100", note);
            continue;
        }
        series s;
        if (!series_read(o, &s)) {
            series_free(&s);
            check_judge_line(checks, names[k], NAN, NULL, NULL, NAN, NULL, NAN, CHECK_NOT_RUN, NULL,
                             "out of memory to judge the series");
            continue;
        }
        if (k == 0) judge_sustained(checks, o, &s, model, expect, emulated);
        else judge_pulsed(checks, o, &s, emulated);
        series_free(&s);
    }
}

// ---- recorded series, checked strictly -------------------------------------------------------------

static bool one_series(const cJSON *o, const char *where, char *err, size_t len) {
    if (!cJSON_IsObject(o)) return bench_err(err, len, "%s: must be an object", where);
    static const struct {
        double lo, hi;
        bool integer;
        const char *what;
    } range[N_KEYS - 1] = {{0, 1e7, false, "seconds from the load's start"},
                           {0, 10000, false, "a clock (0 to 10000 MHz)"},
                           {0, 50000, false, "a clock (0 to 50000 MHz)"},
                           {0, 10000, false, "a power (0 to 10000 W)"},
                           {-40, 150, false, "a GPU temperature (-40 to 150 C)"},
                           {0, CHECK_THROTTLE_MAX, true, "a bitmask of NVML's clocks-event reasons (an integer from 0 to 2^63)"},
                           {0, CHECK_FIGURE_CAP, false, "a rate (0 to 1e5 TFLOP/s)"}};
    int n = -1;
    for (int k = 0; k < N_KEYS; k++) {
        const cJSON *a = item(o, check_series_keys[k]);
        if (!cJSON_IsArray(a))
            return bench_err(err, len, "%s.%s: must be an array", where, check_series_keys[k]);
        int m = cJSON_GetArraySize(a);
        if (n >= 0 && m != n)
            return bench_err(err, len,
                             "%s.%s: %d entries, but t_s has %d: every array has one per sample",
                             where, check_series_keys[k], m, n);
        n = m;
        int i = 0;
        double prev = -INFINITY;
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            if (k == K_PHASE) {
                bool known = false;
                for (size_t p = 0; p < 5; p++)
                    known = known || (cJSON_IsString(e) && !strcmp(e->valuestring, check_series_phases[p]));
                if (!known)
                    return bench_err(
                        err, len, "%s.phase[%d]: not a phase (calibrate, stress, power, on or off)",
                        where, i);
            } else if (k == K_T) {
                if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < 0 || e->valuedouble > 1e7)
                    return bench_err(err, len, "%s.t_s[%d]: not a time (seconds from 0 to 1e7)",
                                     where, i);
                if (!(e->valuedouble > prev))
                    return bench_err(err, len,
                                     "%s.t_s[%d]: %g does not come after %g: times must increase",
                                     where, i, e->valuedouble, prev);
                prev = e->valuedouble;
            } else if (!cJSON_IsNull(e)) {
                double x = cJSON_IsNumber(e) ? e->valuedouble : NAN;
                if (!isfinite(x) || x < range[k].lo || x > range[k].hi || (range[k].integer && x != floor(x)))
                    return bench_err(err, len, "%s.%s[%d]: not %s, nor null", where,
                                     check_series_keys[k], i, range[k].what);
            }
            i++;
        }
    }
    const cJSON *t = item(o, "target_tflops"), *nn = item(o, "n"), *w = item(o, "window_s");
    if (t && !cJSON_IsNull(t) && !(cJSON_IsNumber(t) && t->valuedouble > 0 && t->valuedouble <= CHECK_FIGURE_CAP))
        return bench_err(err, len, "%s.target_tflops: not a rate above 0 (TFLOP/s), nor null",
                         where);
    if (nn && !(cJSON_IsNumber(nn) && nn->valuedouble >= 1 && nn->valuedouble <= 1e6 &&
                nn->valuedouble == floor(nn->valuedouble)))
        return bench_err(err, len, "%s.n: not a matrix size (a whole number from 1)", where);
    if (w && !(cJSON_IsNumber(w) && w->valuedouble > 0 && w->valuedouble <= 3600))
        return bench_err(err, len, "%s.window_s: not a window (seconds above 0, up to 3600)",
                         where);
    const cJSON *med = item(o, "median_tflops"), *e;
    if (med && !cJSON_IsObject(med))
        return bench_err(err, len, "%s.median_tflops: must be an object", where);
    cJSON_ArrayForEach(e, med) {
        bool known = false;
        for (size_t p = 0; p < 5; p++) known = known || !strcmp(e->string, check_series_phases[p]);
        if (!known || !(cJSON_IsNull(e) || (cJSON_IsNumber(e) && e->valuedouble >= 0 &&
                                            e->valuedouble <= CHECK_FIGURE_CAP)))
            return bench_err(err, len,
                             "%s.median_tflops.%s: a phase's median rate (TFLOP/s) or null", where,
                             e->string);
    }
    const cJSON *ps = item(o, "power_source");
    if (ps && !(cJSON_IsString(ps) && (!strcmp(ps->valuestring, "instant") || !strcmp(ps->valuestring, "average") ||
                                       !strcmp(ps->valuestring, "mixed") || !strcmp(ps->valuestring, "none"))))
        return bench_err(err, len, "%s.power_source: not instant, average, mixed or none", where);
    const cJSON *cal = item(o, "calibration");
    if (cal && !cJSON_IsObject(cal)) return bench_err(err, len, "%s.calibration: must be an object", where);
    cJSON_ArrayForEach(e, cal) {
        if (strcmp(e->string, "warmup_s") && strcmp(e->string, "seconds") && strcmp(e->string, "products") &&
            strcmp(e->string, "windows"))
            return bench_err(err, len, "%s.calibration.%s: not a key of the calibration (warmup_s, seconds, products, windows)",
                             where, e->string);
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < 0 || e->valuedouble > 1e7)
            return bench_err(err, len, "%s.calibration.%s: not a number from 0 to 1e7", where, e->string);
    }
    const cJSON *phs = item(o, "phases"), *x;
    if (phs && !cJSON_IsObject(phs)) return bench_err(err, len, "%s.phases: must be an object", where);
    cJSON_ArrayForEach(x, phs) {
        bool known = false;
        for (size_t p = 0; p < 5; p++) known = known || !strcmp(x->string, check_series_phases[p]);
        if (!known || !cJSON_IsObject(x))
            return bench_err(err, len, "%s.phases.%s: not a phase's object (calibrate, stress, power, on or off)", where,
                             x->string);
        static const struct {
            const char *key;
            double hi;
            bool null_ok;
        } f[] = {{"seconds", 1e7, false}, {"energy_j", 1e11, true}, {"mean_power_w", 10000, true}};
        for (size_t j = 0; j < sizeof f / sizeof *f; j++) {
            const cJSON *v = item(x, f[j].key);
            if (!(f[j].null_ok && cJSON_IsNull(v)) &&
                !(cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 && v->valuedouble <= f[j].hi))
                return bench_err(err, len, "%s.phases.%s.%s: not a number from 0 to %g%s", where, x->string, f[j].key,
                                 f[j].hi, f[j].null_ok ? ", nor null" : "");
        }
        const cJSON *vs = item(x, "violation_s");
        if (!cJSON_IsObject(vs)) return bench_err(err, len, "%s.phases.%s.violation_s: must be an object", where, x->string);
        cJSON_ArrayForEach(e, vs) {
            bool policy = false;
            for (int k = 0; k < TDM_VIOLATION_N; k++) policy = policy || !strcmp(e->string, tdm_violation_policy_name(k));
            if (!policy)
                return bench_err(err, len, "%s.phases.%s.violation_s.%s: not an NVML perf policy", where, x->string,
                                 e->string);
            if (!cJSON_IsNull(e) &&
                !(cJSON_IsNumber(e) && isfinite(e->valuedouble) && e->valuedouble >= 0 && e->valuedouble <= 1e7))
                return bench_err(err, len, "%s.phases.%s.violation_s.%s: not seconds (0 to 1e7), nor null", where,
                                 x->string, e->string);
        }
    }
    static const char *const texts[] = {"error", "nvml"};
    for (int k = 0; k < 2; k++)
        if (item(o, texts[k]) && !cJSON_IsString(item(o, texts[k])))
            return bench_err(err, len, "%s.%s: must be a string", where, texts[k]);
    // a phase's median is its windows' (check_sustained.c phase_median), the figure the judge
    // reads: one that its samples do not give is forged or misrecorded. calibrate's is R0, the
    // calibration's own window; a load that failed leaves the phase it broke off without one.
    if (!item(o, "error")) {
        static const char *const judged[] = {"stress", "power", "on"};
        const cJSON *tf = item(o, "tflops"), *ph = item(o, "phase");
        for (int p = 0; p < 3; p++) {
            const cJSON *e = item(med, judged[p]);
            if (!e) continue;
            double *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
            if (!x) return bench_err(err, len, "out of memory");
            int m = 0;
            for (const cJSON *a = tf->child, *b = ph->child; a && b; a = a->next, b = b->next)
                if (cJSON_IsNumber(a) && !strcmp(b->valuestring, judged[p])) x[m++] = a->valuedouble;
            double want = m ? bench_median(x, m) : NAN;
            free(x);
            bool same = cJSON_IsNull(e) ? !m
                                        : m && fabs(e->valuedouble - want) <= 1e-9 * fmax(1, fabs(want));
            if (!same)
                return bench_err(err, len,
                                 "%s.median_tflops.%s: %s is not the median of the phase's %d window%s "
                                 "(%g): a phase's median is its windows'",
                                 where, judged[p], cJSON_IsNull(e) ? "null" : "a figure", m,
                                 m == 1 ? "" : "s", m ? want : NAN);
        }
    }
    return true;
}

bool check_sustained_valid(const cJSON *gpu, int i, char *err, size_t len) {
    const cJSON *s = item(gpu, "series"), *x;
    if (!s || cJSON_IsNull(s)) return true;
    if (!cJSON_IsObject(s)) return bench_err(err, len, "gpus[%d].series: must be an object", i);
    cJSON_ArrayForEach(x, s) {
        char where[160];
        snprintf(where, sizeof where, "gpus[%d].series.%s", i, x->string);
        if (strcmp(x->string, "sustained.load") && strcmp(x->string, "pulsed.load"))
            return bench_err(err, len, "%s: not a series (sustained.load or pulsed.load)", where);
        if (!one_series(x, where, err, len)) return false;
    }
    return true;
}

/* check_sdc_judge.c — the verdicts of `bench check`'s silent data corruption checks (sdc.gemm,
 * sdc.train; docs/CHECK.md "Silent data corruption"), a pure function of the recorded figures
 * (check.h's format, measured by check_sdc.c), so that each rule is tested with planted figures:
 * a repetition whose bits differ from the first is a FAIL (TDM-F120); across the GPUs of one
 * model (the same device name) the digests and fingerprints of the same work must be the same
 * bits, the majority being the yardstick: a GPU outside it FAILs (TDM-F121, TDM-F122), and when
 * no digest has a majority (two GPUs that differ, a tie) every GPU of the group FAILs
 * (TDM-F123). The recorded sections are validated strictly: what cannot be a record is bad
 * input, named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_lines.h"
#include "harness/json_strict.h"

static const cJSON *item(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = item(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num(const cJSON *o, const char *k) {  // NaN when absent or null
    const cJSON *v = item(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

// ---- validation: what cannot be a record is bad input -------------------------------------------

bool check_sdc_digest_valid(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

// A count: an integer from lo to hi.
static bool count_in(const cJSON *v, double lo, double hi) {
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
           v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo && v->valuedouble <= hi;
}

static bool text_or_null(const cJSON *v) {
    return !v || cJSON_IsNull(v) || cJSON_IsString(v);
}

static bool seconds_ok(const cJSON *v) {
    return !v || cJSON_IsNull(v) ||
           (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0);
}

static bool valid_gemm(const cJSON *g, int i, char *err, size_t len) {
    const char *w = "sdc[\"sdc.gemm\"]";
    if (!cJSON_IsObject(g)) return bench_err(err, len, "gpus[%d].%s: must be an object", i, w);
    const cJSON *r = item(g, "repeats"), *m = item(g, "mismatches"), *f = item(g, "first_mismatch");
    if (!count_in(r, 0, 1e12))
        return bench_err(err, len, "gpus[%d].%s.repeats: not a count (an integer from 0)", i, w);
    double reps = r->valuedouble;
    if (!count_in(m, 0, reps))
        return bench_err(err, len, "gpus[%d].%s.mismatches: not a count from 0 to repeats (%.0f)",
                         i, w, reps);
    if (m->valuedouble > 0 ? !count_in(f, 1, reps - 1) : !(!f || cJSON_IsNull(f)))
        return bench_err(err, len, "gpus[%d].%s.first_mismatch: %s", i, w,
                         m->valuedouble > 0
                             ? "not a repetition from 1 to repeats - 1 (mismatches > 0)"
                             : "must be null when nothing mismatched");
    if (!cJSON_IsString(item(g, "dtype")))
        return bench_err(err, len, "gpus[%d].%s.dtype: must be a string", i, w);
    const cJSON *sh = item(g, "shape"), *e;
    bool shape_ok = cJSON_IsArray(sh) && cJSON_GetArraySize(sh) == 3;
    const cJSON *dims = shape_ok ? sh : NULL;
    cJSON_ArrayForEach(e, dims) shape_ok = shape_ok && count_in(e, 1, 1e9);
    if (!shape_ok)
        return bench_err(err, len, "gpus[%d].%s.shape: must be [m, k, n], integers from 1", i, w);
    const cJSON *d = item(g, "digest");
    if (reps > 0 ? !(cJSON_IsString(d) && check_sdc_digest_valid(d->valuestring))
                 : !(!d || cJSON_IsNull(d) ||
                     (cJSON_IsString(d) && check_sdc_digest_valid(d->valuestring))))
        return bench_err(err, len,
                         "gpus[%d].%s.digest: not a SHA-256 digest (64 lowercase hex digits)%s", i,
                         w, reps > 0 ? ", with repeats above 0" : "");
    if (!seconds_ok(item(g, "seconds")))
        return bench_err(err, len, "gpus[%d].%s.seconds: not a duration", i, w);
    if (!text_or_null(item(g, "error")))
        return bench_err(err, len, "gpus[%d].%s.error: must be a string", i, w);
    return true;
}

static bool valid_train(const cJSON *t, int i, char *err, size_t len) {
    const char *w = "sdc[\"sdc.train\"]";
    if (!cJSON_IsObject(t)) return bench_err(err, len, "gpus[%d].%s: must be an object", i, w);
    const cJSON *fps = item(t, "fingerprints"), *f;
    if (!cJSON_IsArray(fps))
        return bench_err(err, len, "gpus[%d].%s.fingerprints: must be an array", i, w);
    int k = 0;
    cJSON_ArrayForEach(f, fps) {
        static const char *const texts[] = {"build", "gpu", "precision", "model"};
        if (!cJSON_IsObject(f))
            return bench_err(err, len, "gpus[%d].%s.fingerprints[%d]: must be an object", i, w, k);
        if (!check_sdc_digest_valid(str(f, "digest")))
            return bench_err(err, len,
                             "gpus[%d].%s.fingerprints[%d].digest: not a SHA-256 digest (64 "
                             "lowercase hex digits)",
                             i, w, k);
        for (size_t q = 0; q < sizeof texts / sizeof *texts; q++)
            if (!str(f, texts[q]) || !str(f, texts[q])[0])
                return bench_err(err, len,
                                 "gpus[%d].%s.fingerprints[%d].%s: must be a string, not empty", i,
                                 w, k, texts[q]);
        if (!text_or_null(item(f, "libs")))
            return bench_err(err, len, "gpus[%d].%s.fingerprints[%d].libs: must be a string", i, w,
                             k);
        if (!count_in(item(f, "steps"), 1, 1e12))
            return bench_err(err, len,
                             "gpus[%d].%s.fingerprints[%d].steps: not a count of steps (from 1)", i,
                             w, k);
        const cJSON *l = item(f, "final_loss"), *lb = item(f, "final_loss_bits"),
                    *em = item(f, "emulated");
        if (l && !cJSON_IsNull(l) && !(cJSON_IsNumber(l) && isfinite(l->valuedouble)))
            return bench_err(
                err, len, "gpus[%d].%s.fingerprints[%d].final_loss: not a finite number", i, w, k);
        bool lb_ok = !lb || cJSON_IsNull(lb);
        if (cJSON_IsString(lb) && strlen(lb->valuestring) == 10 &&
            !strncmp(lb->valuestring, "0x", 2))
            lb_ok = strspn(lb->valuestring + 2, "0123456789abcdef") == 8;
        if (!lb_ok)
            return bench_err(err, len,
                             "gpus[%d].%s.fingerprints[%d].final_loss_bits: not \"0x\" and 8 "
                             "lowercase hex digits",
                             i, w, k);
        if (em && !cJSON_IsBool(em) && !cJSON_IsNull(em))
            return bench_err(
                err, len, "gpus[%d].%s.fingerprints[%d].emulated: must be true or false", i, w, k);
        const cJSON *o;
        int q = 0;
        cJSON_ArrayForEach(o, fps) {  // one run per precision, model and steps
            if (q++ >= k) break;
            if (!strcmp(str(o, "precision"), str(f, "precision")) &&
                !strcmp(str(o, "model"), str(f, "model")) && num(o, "steps") == num(f, "steps"))
                return bench_err(err, len,
                                 "gpus[%d].%s.fingerprints[%d]: the same precision, model and "
                                 "steps as fingerprints[%d]",
                                 i, w, k, q - 1);
        }
        k++;
    }
    if (!seconds_ok(item(t, "seconds")))
        return bench_err(err, len, "gpus[%d].%s.seconds: not a duration", i, w);
    if (!text_or_null(item(t, "error")))
        return bench_err(err, len, "gpus[%d].%s.error: must be a string", i, w);
    return true;
}

bool check_sdc_valid(const cJSON *sdc, int i, char *err, size_t len) {
    if (!sdc || cJSON_IsNull(sdc)) return true;
    if (!cJSON_IsObject(sdc)) return bench_err(err, len, "gpus[%d].sdc: must be an object", i);
    const cJSON *g = item(sdc, "sdc.gemm"), *t = item(sdc, "sdc.train");
    if (g && !cJSON_IsNull(g) && !valid_gemm(g, i, err, len)) return false;
    if (t && !cJSON_IsNull(t) && !valid_train(t, i, err, len)) return false;
    return true;
}

// ---- the vote: the same work, the same bits on every GPU of a model ---------------------------

static int cmp_vote(const void *a, const void *b) {
    const check_sdc_vote *x = a, *y = b;
    int c = strcmp(x->group, y->group);
    return c ? c : strcmp(x->digest, y->digest);
}

void check_sdc_tally(check_sdc_vote *v, int m) {
    qsort(v, (size_t)m, sizeof *v, cmp_vote);
    for (int a = 0, b; a < m; a = b) {
        for (b = a + 1; b < m && !strcmp(v[a].group, v[b].group);) b++;
        int majority = 0;
        const char *major = NULL;
        for (int c = a, d; c < b; c = d) {
            for (d = c + 1; d < b && !strcmp(v[c].digest, v[d].digest);) d++;
            for (int k = c; k < d; k++) v[k].same = d - c;
            if (2 * (d - c) > b - a) {
                majority = d - c;
                major = v[c].digest;
            }
        }
        for (int k = a; k < b; k++) {
            v[k].size = b - a;
            v[k].majority = majority;
            v[k].major = major;
        }
    }
}

// What must give the same bits, as one string: the GPU's name, whether it is emulated and PARTS
// (NULL-ended), each part prefixed by its length so that no two different lists read the same.
static char *group_key(const cJSON *gpu, const char *const *parts) {
    const char *name = str(gpu, "name") ? str(gpu, "name") : "?";
    size_t n = strlen(name) + 32;
    for (int i = 0; parts[i]; i++) n += strlen(parts[i]) + 24;
    char *k = malloc(n);
    if (!k) return NULL;
    int w = snprintf(k, n, "%zu:%s%d", strlen(name), name, cJSON_IsTrue(item(gpu, "emulated")));
    for (int i = 0; parts[i] && w > 0 && (size_t)w < n; i++)
        w += snprintf(k + w, n - (size_t)w, "%zu:%s", strlen(parts[i]), parts[i]);
    return k;
}

// Appends the judgement of vote x to the note (at *k of n) and returns its code (NULL: agrees).
static const char *vote_note(const check_sdc_vote *x, const char *name, char *note, size_t n,
                             int *k, bool *alone) {
    int w = 0;
    const char *code = NULL;
    if (x->size < 2) {
        w = snprintf(note + *k, n - (size_t)*k, "%s%s: %.16s", *k ? "; " : "", x->what, x->digest);
    } else if (x->majority && !strcmp(x->digest, x->major)) {
        *alone = false;
        w = snprintf(note + *k, n - (size_t)*k, "%s%s: %.16s, as %d of the %d GPUs of its model",
                     *k ? "; " : "", x->what, x->digest, x->majority, x->size);
    } else if (x->majority) {
        *alone = false;
        code = "differs";
        w = snprintf(note + *k, n - (size_t)*k,
                     "%s%s: %.16s differs from the majority's %.16s (%d of the %d GPUs of its "
                     "model, %s)",
                     *k ? "; " : "", x->what, x->digest, x->major, x->majority, x->size, name);
    } else {
        *alone = false;
        code = "disagree";
        w = snprintf(note + *k, n - (size_t)*k,
                     "%s%s: %.16s: the %d GPUs of its model (%s) disagree, no digest has a "
                     "majority (%d the same as this one)",
                     *k ? "; " : "", x->what, x->digest, x->size, name, x->same);
    }
    if (w > 0) *k = *k + w < (int)n ? *k + w : (int)n - 1;
    return code;
}

// Why a GEMM record is not sdc.gemm's work (an n^3 bf16 GEMM, n by the device, repeated
// CHECK_SDC_GEMM_MIN_REPS times at least): written to why, false when it is.
static bool gemm_not_the_checks(const cJSON *g, bool emu, char *why, size_t n) {
    double want = emu ? CHECK_SDC_GEMM_N_EMU : CHECK_SDC_GEMM_N, reps = num(g, "repeats");
    const cJSON *sh = item(g, "shape");
    bool shape = cJSON_GetArraySize(sh) == 3;
    for (int k = 0; shape && k < 3; k++) shape = cJSON_GetArrayItem(sh, k)->valuedouble == want;
    if (!shape || strcmp(str(g, "dtype"), "bf16")) {
        const cJSON *e;
        int k = snprintf(why, n, "a ");
        cJSON_ArrayForEach(e, sh) k += snprintf(why + k, n - (size_t)k, "%s%.0f", k > 2 ? "x" : "", e->valuedouble);
        snprintf(why + k, n - (size_t)k, " %s GEMM is not the check's (%.0f^3 bf16%s): not measured", str(g, "dtype"),
                 want, emu ? " on the emulated device" : "");
        return true;
    }
    if (reps < CHECK_SDC_GEMM_MIN_REPS) {
        snprintf(why, n, "%.0f repetition%s: fewer than the check's %d compare too little: not measured", reps,
                 reps == 1 ? "" : "s", CHECK_SDC_GEMM_MIN_REPS);
        return true;
    }
    return false;
}

// Why a GPU's fingerprints are not sdc.train's work (one per precision trained, of the check's
// model and steps): written to why, false when they are.
static bool train_not_the_checks(const cJSON *t, bool emu, char *why, size_t n) {
    static const char *const precs[] = {"f32", "bf16"};
    const char *steps = emu ? CHECK_SDC_TRAIN_STEPS_EMU : CHECK_SDC_TRAIN_STEPS;
    const cJSON *f;
    int k = 0;
    cJSON_ArrayForEach(f, item(t, "fingerprints")) {
        if (strcmp(str(f, "model"), CHECK_SDC_TRAIN_MODEL) || num(f, "steps") != atof(steps)) {
            snprintf(why, n,
                     "fingerprints[%d]: %.100s, %.0f step%s is not the check's run (%s, %s steps%s): not "
                     "measured",
                     k, str(f, "model"), num(f, "steps"), num(f, "steps") == 1 ? "" : "s", CHECK_SDC_TRAIN_MODEL,
                     steps, emu ? " on the emulated device" : "");
            return true;
        }
        k++;
    }
    for (int p = 0; p < 2; p++) {
        bool found = false;
        cJSON_ArrayForEach(f, item(t, "fingerprints")) found = found || !strcmp(str(f, "precision"), precs[p]);
        if (!found) {
            snprintf(why, n, "no %s fingerprint: the check trains f32 and bf16: not measured", precs[p]);
            return true;
        }
    }
    return false;
}

// A line of text figures (no unit, no ratio), as check_judge's own.
static void line(cJSON *checks, const char *check, const char *measured, const char *expected,
                 const char *verdict, const char *code, const char *note) {
    check_judge_line(checks, check, NAN, measured, NULL, NAN, expected, NAN, verdict, code, note);
}

// A GPU's line; on the emulated device the same verdict, the note saying where it ran: its bits
// are the emulated device's own (a stuck bit planted there changes them), so they are judged as
// the numerics and the memory test are, while its timings never are.
static void verdict_line(cJSON *checks, const char *check, const char *measured,
                         const char *expected, bool emulated, const char *verdict, const char *code,
                         const char *note) {
    if (!emulated) {
        line(checks, check, measured, expected, verdict, code, note);
        return;
    }
    char n[1440];   // the prefix and a note of up to 1400 bytes
    snprintf(n, sizeof n, "on the emulated device: %s", note);
    line(checks, check, measured, expected, verdict, code, n);
}

void check_sdc_judge(cJSON **gp, int n, int level) {
    // the votes: each GPU's GEMM digest, and each of its training fingerprints
    int cap = 0;
    for (int i = 0; i < n; i++)
        cap += 1 + cJSON_GetArraySize(item(item(item(gp[i], "sdc"), "sdc.train"), "fingerprints"));
    check_sdc_vote *v = calloc((size_t)(cap ? cap : 1), sizeof *v);
    int m = 0;
    for (int i = 0; v && i < n; i++) {
        const cJSON *sdc = item(gp[i], "sdc"), *g = item(sdc, "sdc.gemm"), *f;
        if (cJSON_IsObject(g) && str(g, "digest") && !str(g, "error")) {
            char shape[96] = "";
            const cJSON *e;
            int k = 0;
            cJSON_ArrayForEach(e, item(g, "shape")) k += snprintf(
                shape + k, sizeof shape - (size_t)k, "%s%.0f", k ? "x" : "", e->valuedouble);
            v[m] = (check_sdc_vote){
                .group = group_key(gp[i], (const char *[]){"gemm", str(g, "dtype"), shape, NULL}),
                .digest = str(g, "digest"),
                .owner = i,
                .what = "GEMM",
                .gemm = true};
            if (v[m].group) m++;
        }
        int q = 0;  // each fingerprint's place in its GPU's record: the notes keep that order
        cJSON_ArrayForEach(f, item(item(sdc, "sdc.train"), "fingerprints")) {
            char steps[32];
            snprintf(steps, sizeof steps, "%.0f", num(f, "steps"));
            v[m] = (check_sdc_vote){
                .group =
                    group_key(gp[i], (const char *[]){"train", str(f, "precision"), str(f, "model"),
                                                      steps, str(f, "build"),
                                                      str(f, "libs") ? str(f, "libs") : "", NULL}),
                .digest = str(f, "digest"),
                .owner = i,
                .sub = q++,
                .what = str(f, "precision")};
            if (v[m].group) m++;
        }
    }
    if (v) check_sdc_tally(v, m);
    for (int i = 0; i < n; i++) {
        cJSON *checks = cJSON_GetObjectItemCaseSensitive(gp[i], "checks");
        const cJSON *sdc = item(gp[i], "sdc");
        bool emu = cJSON_IsTrue(item(gp[i], "emulated"));
        const char *name = str(gp[i], "name") ? str(gp[i], "name") : "?";
        if (!cJSON_IsObject(sdc) && level < 3) continue;  // not a check of this level
        char measured[200], note[1200];
        // sdc.gemm: every repetition the first's bits, and the first the same as its siblings'
        const cJSON *g = item(sdc, "sdc.gemm");
        if (!cJSON_IsObject(g)) {
            if (level >= 3)
                line(checks, "sdc.gemm", "-", "the same bits", CHECK_ABSENT, NULL,
                     "expected, absent from the figures: not measured");
        } else {
            double reps = num(g, "repeats"), mis = num(g, "mismatches");
            snprintf(measured, sizeof measured, "%.0f of %.0f differ", mis, reps);
            if (str(g, "error"))
                verdict_line(checks, "sdc.gemm", measured, "0 differ", emu, CHECK_FAIL, "TDM-F002",
                             str(g, "error"));
            else if (mis > 0) {
                snprintf(note, sizeof note,
                         "repetition %.0f gave other bits than the first (%.0f of %.0f repetitions "
                         "differ; %s %s)",
                         num(g, "first_mismatch"), mis, reps, str(g, "dtype"),
                         "GEMM, the same inputs");
                verdict_line(checks, "sdc.gemm", measured, "0 differ", emu, CHECK_FAIL, "TDM-F120",
                             note);
            } else if (gemm_not_the_checks(g, emu, note, sizeof note)) {
                line(checks, "sdc.gemm", measured, "0 differ", CHECK_NOT_RUN, NULL, note);
            } else {
                int k = 0;
                bool alone = true;
                const char *c = NULL;
                for (int x = 0; x < m; x++)
                    if (v[x].owner == i && v[x].gemm)
                        c = vote_note(&v[x], name, note, sizeof note, &k, &alone);
                if (!k) snprintf(note, sizeof note, "no digest");
                char full[1400];
                snprintf(full, sizeof full, "%.0f repetitions, the same bits; %s%s", reps, note,
                         alone ? " (no other GPU of its model here)" : "");
                verdict_line(checks, "sdc.gemm", measured, "0 differ", emu,
                             c ? CHECK_FAIL : CHECK_PASS,
                             !c                      ? NULL
                             : !strcmp(c, "differs") ? "TDM-F121"
                                                     : "TDM-F123",
                             full);
            }
        }
        // sdc.train: each fingerprint the same as its siblings'
        const cJSON *t = item(sdc, "sdc.train");
        if (!cJSON_IsObject(t)) {
            if (level >= 3)
                line(checks, "sdc.train", "-", "the same fingerprint", CHECK_ABSENT, NULL,
                     "expected, absent from the figures: not measured");
            continue;
        }
        int k = 0, nf = 0;
        measured[0] = '\0';
        const cJSON *f;
        cJSON_ArrayForEach(f, item(t, "fingerprints")) {
            k += snprintf(measured + k, sizeof measured - (size_t)k, "%s%s %.8s", nf ? ", " : "",
                          str(f, "precision"), str(f, "digest"));
            if (k >= (int)sizeof measured) k = (int)sizeof measured - 1;
            nf++;
        }
        if (!nf) snprintf(measured, sizeof measured, "no fingerprint");
        if (str(t, "error")) {
            verdict_line(checks, "sdc.train", measured, "the same fingerprint", emu, CHECK_FAIL,
                         "TDM-F002", str(t, "error"));
            continue;
        }
        if (!nf) {
            line(checks, "sdc.train", measured, "the same fingerprint", CHECK_NOT_RUN, NULL,
                 "no training run was recorded");
            continue;
        }
        k = 0;
        bool alone = true, differs = false, disagree = false;
        for (int q = 0; q < nf; q++)
            for (int x = 0; x < m; x++) {
                if (v[x].owner != i || v[x].gemm || v[x].sub != q) continue;
                const char *c = vote_note(&v[x], name, note, sizeof note, &k, &alone);
                differs = differs || (c && !strcmp(c, "differs"));
                disagree = disagree || (c && !strcmp(c, "disagree"));
            }
        char full[1400];
        snprintf(full, sizeof full, "fingerprints %s%s", note,
                 alone ? " (no other GPU of its model here: for `bench compare --fleet`)" : "");
        // bits that differ FAIL whatever was run; otherwise a record of other work is no pass
        if (!differs && !disagree && train_not_the_checks(t, emu, note, sizeof note)) {
            line(checks, "sdc.train", measured, "the same fingerprint", CHECK_NOT_RUN, NULL, note);
            continue;
        }
        verdict_line(checks, "sdc.train", measured, "the same fingerprint", emu,
                     differs || disagree ? CHECK_FAIL : CHECK_PASS,
                     differs    ? "TDM-F122"
                     : disagree ? "TDM-F123"
                                : NULL,
                     full);
    }
    for (int x = 0; x < m; x++) free(v[x].group);
    free(v);
}

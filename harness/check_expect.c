/* check_expect.c — `bench check`'s expectations file (suites/check/expectations.json, format
 * tandem-check-expectations/1, docs/CHECK.md): loading and validating it (a malformed file is
 * refused with the field that is wrong), finding a device's model by name, and --write-expect:
 * a fleet's own expectations from the medians of recorded healthy check runs. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fileio.h"
#include "stats.h"

const char *const check_perf_names[] = {"memory.d2d", "gemm.tf32", "gemm.f16", "gemm.bf16",
                                        "gemm.f64",   "pcie.h2d",  "pcie.d2h", "multi.allreduce",
                                        "multi.peer", NULL};

static bool bad(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return false;
}

static bool positive(const cJSON *o, const char *key, bool required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return !required;
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble > 0;
}

// A {warn, fail} pair: 0 < fail <= warn <= 10 (a fleet's own may ask for more than the datasheet).
static bool valid_threshold(const cJSON *t, const char *name, const char *where, char *err,
                            size_t len) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(t, "warn");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "fail");
    if (!cJSON_IsObject(t) || !cJSON_IsNumber(w) || !cJSON_IsNumber(f))
        return bad(err, len, "%s: %s: needs numbers \"warn\" and \"fail\"", where, name);
    if (!(f->valuedouble > 0 && f->valuedouble <= w->valuedouble && w->valuedouble <= 10))
        return bad(err, len, "%s: %s: needs 0 < fail (%g) <= warn (%g) <= 10", where, name,
                   f->valuedouble, w->valuedouble);
    return true;
}

static bool valid_model(const cJSON *m, int i, const char *name, char *err, size_t len) {
    char where[300];
    snprintf(where, sizeof where, "%s: models[%d]", name, i);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(m, "model");
    if (!cJSON_IsObject(m) || !cJSON_IsString(model) || !model->valuestring[0])
        return bad(err, len, "%s: needs a \"model\" name", where);
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(m, "names");
    if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) == 0)
        return bad(err, len, "%s (%s): \"names\" must be a non-empty array of device names", where,
                   model->valuestring);
    const cJSON *n;
    cJSON_ArrayForEach(n, names) if (!cJSON_IsString(n) || !n->valuestring[0]) return bad(
        err, len, "%s (%s): \"names\" holds something that is not a name", where,
        model->valuestring);
    static const char *nums[] = {"hbm_GBps", "pcie_gen", "pcie_width", "nvlink_GBps"};
    for (size_t k = 0; k < sizeof nums / sizeof *nums; k++)
        if (!positive(m, nums[k], false))
            return bad(err, len, "%s (%s): \"%s\" is not a positive number", where,
                       model->valuestring, nums[k]);
    const cJSON *tf = cJSON_GetObjectItemCaseSensitive(m, "tflops");
    if (tf) {
        if (!cJSON_IsObject(tf))
            return bad(err, len, "%s (%s): \"tflops\" must be an object", where, model->valuestring);
        const cJSON *p;
        cJSON_ArrayForEach(p, tf) {
            if (strcmp(p->string, "tf32") && strcmp(p->string, "f16") && strcmp(p->string, "bf16") &&
                strcmp(p->string, "f64"))
                return bad(err, len, "%s (%s): tflops.%s: unknown precision (tf32, f16, bf16, f64)",
                           where, model->valuestring, p->string);
            if (!cJSON_IsNumber(p) || !(p->valuedouble > 0))
                return bad(err, len, "%s (%s): tflops.%s is not a positive number", where,
                           model->valuestring, p->string);
        }
    }
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(m, "checks");
    if (checks) {   // a fleet's measured medians, per check
        if (!cJSON_IsObject(checks))
            return bad(err, len, "%s (%s): \"checks\" must be an object", where, model->valuestring);
        const cJSON *c;
        cJSON_ArrayForEach(c, checks) {
            bool known = false;
            for (int k = 0; check_perf_names[k]; k++) known = known || !strcmp(c->string, check_perf_names[k]);
            if (!known)
                return bad(err, len, "%s (%s): checks.%s: not a performance check", where,
                           model->valuestring, c->string);
            if (!cJSON_IsNumber(c) || !(c->valuedouble > 0))
                return bad(err, len, "%s (%s): checks.%s is not a positive number", where,
                           model->valuestring, c->string);
        }
    }
    return true;
}

cJSON *check_expect_parse(const char *text, const char *name, char *err, size_t len) {
    cJSON *e = cJSON_Parse(text);
    if (!e) {
        const char *at = cJSON_GetErrorPtr();
        bad(err, len, "%s: not JSON (near \"%.20s\")", name, at ? at : "?");
        return NULL;
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(e, "format");
    bool ok = true;
    if (!cJSON_IsObject(e) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, CHECK_EXPECT_FORMAT))
        ok = bad(err, len, "%s: not an expectations file (\"format\" must be \"%s\")", name,
                 CHECK_EXPECT_FORMAT);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(e, "thresholds");
    static const char *needed[] = {"memory.d2d", "gemm", "pcie.copy", "multi.allreduce", "multi.peer"};
    if (ok && !cJSON_IsObject(th)) ok = bad(err, len, "%s: needs a \"thresholds\" object", name);
    for (size_t k = 0; ok && k < sizeof needed / sizeof *needed; k++) {
        char where[300];
        snprintf(where, sizeof where, "%s: thresholds", name);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(th, needed[k]);
        if (!t) ok = bad(err, len, "%s: thresholds: \"%s\" is missing", name, needed[k]);
        else ok = valid_threshold(t, needed[k], where, err, len);
    }
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(e, "outlier");
    if (ok) ok = valid_threshold(out, "outlier", name, err, len);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(e, "measured_thresholds");
    if (ok && mt) ok = valid_threshold(mt, "measured_thresholds", name, err, len);
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(e, "models");
    if (ok && !cJSON_IsArray(models)) ok = bad(err, len, "%s: needs a \"models\" array", name);
    int i = 0;
    const cJSON *m;
    if (ok) cJSON_ArrayForEach(m, models) {
            if (!(ok = valid_model(m, i++, name, err, len))) break;
        }
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

cJSON *check_expect_load(const char *path, char *err, size_t len) {
    char *buf = bench_read_file_max(path, 64u << 20, NULL);   // no expectations file is this big
    if (!buf) {
        bad(err, len, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    cJSON *e = check_expect_parse(buf, path, err, len);
    free(buf);
    return e;
}

// "NVIDIA A100-SXM4-80GB" and "a100-sxm4-80gb": equal without the vendor and case.
static bool same_name(const char *device, const char *pattern) {
    if (!strncasecmp(device, "NVIDIA ", 7)) device += 7;
    if (!strncasecmp(pattern, "NVIDIA ", 7)) pattern += 7;
    return strcasecmp(device, pattern) == 0;
}

const cJSON *check_expect_model(const cJSON *expect, const char *device_name) {
    if (!device_name) return NULL;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(expect, "models")) {
        const cJSON *n;
        cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(m, "names")) if (
            cJSON_IsString(n) && same_name(device_name, n->valuestring)) return m;
    }
    return NULL;
}

bool check_find_source_path(const char *rel, char *out, size_t len) {
    return bench_find_source(rel, "TANDEM_DOCS_ROOT", NULL, out, len);
}

bool check_expect_default_path(char *out, size_t len) {
    const char *env = getenv("TANDEM_CHECK_EXPECT");
    if (env && *env) return snprintf(out, len, "%s", env) < (int)len;
    return check_find_source_path("suites/check/expectations.json", out, len);
}

// ---- --write-expect ---------------------------------------------------------------------------

static cJSON *read_json(const char *path) {
    char *buf = bench_read_file(path, NULL);
    cJSON *j = buf ? cJSON_Parse(buf) : NULL;
    free(buf);
    return j;
}

typedef struct {
    char name[256];
    double *v[16];   // per check_perf_names entry
    int n[16], cap[16];
} name_figures;

cJSON *check_expect_from_runs(const cJSON *base, char **dirs, int nd, char *err, size_t len) {
    name_figures *nf = NULL;
    int nn = 0, used = 0, left_out = 0;
    char note[512] = "";
    bool ok = true;
    for (int d = 0; ok && d < nd; d++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/status.json", dirs[d]);
        cJSON *st = read_json(path);
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(st, "check");
        if (!st || !cJSON_IsObject(sec)) {
            ok = bad(err, len, "%s: %s", path,
                     st ? "has no \"check\" section: not a results directory of `bench check --out`"
                        : "cannot be read or is not JSON");
            cJSON_Delete(st);
            break;
        }
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(sec, "gpus")) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(g, "name");
            if (!cJSON_IsString(name)) continue;
            bool failed = false;
            const cJSON *c;
            cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g, "checks")) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, "verdict");
                failed = failed || (cJSON_IsString(v) && !strcmp(v->valuestring, CHECK_FAIL));
            }
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "emulated")) || failed) {
                left_out++;
                int k = (int)strlen(note);
                if (k < (int)sizeof note - 80)
                    snprintf(note + k, sizeof note - (size_t)k, "%s%s %s (%s)", k ? "; " : "",
                             dirs[d], cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device"))
                                          ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device"))
                                          : "?",
                             failed ? "it had a FAIL" : "emulated");
                continue;
            }
            int i = 0;
            while (i < nn && strcmp(nf[i].name, name->valuestring)) i++;
            if (i == nn) {
                name_figures *b = realloc(nf, (size_t)(nn + 1) * sizeof *nf);
                if (!b) {
                    ok = bad(err, len, "out of memory");
                    break;
                }
                nf = b;
                memset(&nf[nn], 0, sizeof *nf);
                snprintf(nf[nn++].name, sizeof nf->name, "%s", name->valuestring);
            }
            used++;
            const cJSON *figs = cJSON_GetObjectItemCaseSensitive(g, "figures");
            for (int k = 0; check_perf_names[k]; k++) {
                const cJSON *f = cJSON_GetObjectItemCaseSensitive(figs, check_perf_names[k]);
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(f, "value");
                if (!cJSON_IsNumber(v) || !(v->valuedouble > 0)) continue;
                if (nf[i].n[k] == nf[i].cap[k]) {
                    int cap = nf[i].cap[k] ? 2 * nf[i].cap[k] : 8;
                    double *b = realloc(nf[i].v[k], (size_t)cap * sizeof *b);
                    if (!b) continue;
                    nf[i].v[k] = b;
                    nf[i].cap[k] = cap;
                }
                nf[i].v[k][nf[i].n[k]++] = v->valuedouble;
            }
        }
        cJSON_Delete(st);
    }
    if (ok && used == 0)
        ok = bad(err, len, "no GPU figures to take medians of in %d director%s%s%s", nd,
                 nd == 1 ? "y" : "ies", left_out ? " (left out: " : "", left_out ? note : "");
    cJSON *e = NULL;
    if (ok) {
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "format", CHECK_EXPECT_FORMAT);
        char about[600];
        snprintf(about, sizeof about,
                 "A fleet's own expectations: per model, \"checks\" holds the median of %d healthy "
                 "GPU%s recorded by `bench check --out` (bench check --write-expect), judged with "
                 "measured_thresholds; what no run measured keeps its datasheet figure and threshold.",
                 used, used == 1 ? "" : "s");
        cJSON_AddStringToObject(e, "about", about);
        // the datasheet thresholds stay for what no run measured; the medians get the base's
        // measured_thresholds (DCGM's 0.75 x a measured reference by default)
        cJSON_AddItemToObject(e, "thresholds",
                              cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(base, "thresholds"), true));
        const cJSON *bmt = cJSON_GetObjectItemCaseSensitive(base, "measured_thresholds");
        cJSON *mt = bmt ? cJSON_Duplicate(bmt, true) : cJSON_CreateObject();
        if (!bmt) {
            cJSON_AddNumberToObject(mt, "warn", 0.90);
            cJSON_AddNumberToObject(mt, "fail", 0.75);
        }
        cJSON_AddItemToObject(e, "measured_thresholds", mt);
        const cJSON *bo = cJSON_GetObjectItemCaseSensitive(base, "outlier");
        cJSON_AddItemToObject(e, "outlier", bo ? cJSON_Duplicate(bo, true) : cJSON_CreateObject());
        cJSON *models = cJSON_AddArrayToObject(e, "models");
        cJSON *src = cJSON_AddArrayToObject(e, "runs");
        for (int d = 0; d < nd; d++) cJSON_AddItemToArray(src, cJSON_CreateString(dirs[d]));
        if (left_out) cJSON_AddStringToObject(e, "left_out", note);
        for (int i = 0; i < nn; i++) {
            const cJSON *known = check_expect_model(base, nf[i].name);
            cJSON *m = known ? cJSON_Duplicate(known, true) : cJSON_CreateObject();
            if (!known) {
                const char *s = nf[i].name;
                if (!strncasecmp(s, "NVIDIA ", 7)) s += 7;
                cJSON_AddStringToObject(m, "model", s);
                cJSON *names = cJSON_AddArrayToObject(m, "names");
                cJSON_AddItemToArray(names, cJSON_CreateString(s));
            }
            cJSON_DeleteItemFromObjectCaseSensitive(m, "checks");
            cJSON *checks = cJSON_AddObjectToObject(m, "checks");
            cJSON *counts = cJSON_CreateObject();
            for (int k = 0; check_perf_names[k]; k++) {
                if (!nf[i].n[k]) continue;
                cJSON_AddNumberToObject(checks, check_perf_names[k], bench_median(nf[i].v[k], nf[i].n[k]));
                cJSON_AddNumberToObject(counts, check_perf_names[k], nf[i].n[k]);
            }
            cJSON_DeleteItemFromObjectCaseSensitive(m, "checks_from");
            cJSON_AddItemToObject(m, "checks_from", counts);
            cJSON_AddItemToArray(models, m);
        }
        // the models of base no run measured stay, with their datasheet figures
        const cJSON *bm;
        cJSON_ArrayForEach(bm, cJSON_GetObjectItemCaseSensitive(base, "models")) {
            bool seen = false;
            for (int i = 0; i < nn && !seen; i++) seen = check_expect_model(base, nf[i].name) == bm;
            if (!seen) cJSON_AddItemToArray(models, cJSON_Duplicate(bm, true));
        }
        snprintf(err, len, "%s", left_out ? note : "");
    }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < 16; k++) free(nf[i].v[k]);
    free(nf);
    return e;
}

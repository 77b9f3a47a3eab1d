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
#include "harness/emulated.h"
#include "harness/fileio.h"
#include "harness/json_strict.h"
#include "harness/stats.h"

const char *const check_perf_names[] = {"memory.d2d", "gemm.tf32", "gemm.f16", "gemm.bf16",
                                        "gemm.f64",   "pcie.h2d",  "pcie.d2h", "multi.allreduce",
                                        "multi.peer", NULL};

// A number in [lo, hi] (finite: "1e999" is read as infinity).
static bool in_range(const cJSON *v, double lo, double hi) {
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= lo &&
           v->valuedouble <= hi;
}

double check_pcie_gbps(double gen, double width) {
    static const double gts[] = {2.5, 5, 8, 16, 32, 64};
    static const double enc[] = {0.8, 0.8, 128.0 / 130, 128.0 / 130, 128.0 / 130, 242.0 / 256};
    if (!(gen >= 1 && gen <= 6) || !(width >= 1 && width <= 32)) return NAN;
    return gts[(int)gen - 1] * enc[(int)gen - 1] / 8 * width;
}

bool check_name_valid(const char *s, char *why, size_t len) {
    const char *w = NULL;
    size_t n = s ? strlen(s) : 0;
    bool blank = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) w = "holds a control character";
        if (!isspace(c)) blank = false;
    }
    if (!s)
        w = "is not a string";
    else if (blank)
        w = "is blank";
    else if (n > 200)
        w = "is longer than 200 bytes";
    else if (bench_utf8_invalid_at(s, n) < n)
        w = "is not UTF-8";
    if (w && why && len) snprintf(why, len, "%s", w);
    return !w;
}

// ---- the physical limits ------------------------------------------------------------------------

// The model's own datasheet figure for a check, in the check's unit (NaN when it gives none): what
// no healthy part can beat (docs/CHECK.md "Physical limits").
static double datasheet_peak(const cJSON *m, const char *name) {
    const cJSON *nv = cJSON_GetObjectItemCaseSensitive(m, "nvlink_GBps");
    double pcie =
        check_pcie_gbps(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "pcie_gen"))
                            ? cJSON_GetObjectItemCaseSensitive(m, "pcie_gen")->valuedouble
                            : NAN,
                        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "pcie_width"))
                            ? cJSON_GetObjectItemCaseSensitive(m, "pcie_width")->valuedouble
                            : NAN);
    double nvlink = cJSON_IsNumber(nv) ? nv->valuedouble : NAN;
    const cJSON *v = NULL;
    if (!strcmp(name, "memory.d2d"))
        v = cJSON_GetObjectItemCaseSensitive(m, "hbm_GBps");
    else if (!strncmp(name, "gemm.", 5))
        v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "tflops"),
                                             name + 5);
    else if (!strncmp(name, "pcie.", 5))
        return pcie;
    // a peer copy uses one direction of NVLink (a bridge's, on PCIe cards) or of PCIe; an
    // all-reduce's bus bandwidth can pass one direction (NVLink SHARP reduces in the switch) but
    // not both together
    else if (!strcmp(name, "multi.peer"))
        return isfinite(nvlink) ? nvlink / 2 : pcie;
    else if (!strcmp(name, "multi.allreduce"))
        return isfinite(nvlink) ? nvlink : 2 * pcie;
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : NAN;
}

static double limit_margin(const cJSON *expect) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(expect, "physical_limit"), "margin");
    return in_range(m, 1, 2) ? m->valuedouble : CHECK_LIMIT_MARGIN;
}

double check_expect_limit(const cJSON *expect, const cJSON *model, const char *name, char *why,
                          size_t len) {
    const char *unit = !strncmp(name, "gemm.", 5) ? "TFLOP/s" : "GB/s";
    double margin = limit_margin(expect), d = model ? datasheet_peak(model, name) : NAN;
    if (isfinite(d)) {
        snprintf(why, len, "%g x the datasheet's %g %s", margin, d, unit);
        return margin * d;
    }
    double best = NAN;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(expect, "models")) {
        double x = datasheet_peak(m, name);
        if (isfinite(x) && !(x <= best)) best = x;
    }
    if (isfinite(best) && CHECK_UNKNOWN_FACTOR * best < CHECK_FIGURE_CAP) {
        snprintf(why, len, "%g x the fastest model's %g %s: no GPU is that fast",
                 CHECK_UNKNOWN_FACTOR, best, unit);
        return CHECK_UNKNOWN_FACTOR * best;
    }
    snprintf(why, len, "%g %s: no GPU is that fast", CHECK_FIGURE_CAP, unit);
    return CHECK_FIGURE_CAP;
}

// A {warn, fail} pair: 0.01 <= fail <= warn <= 10 (a fleet's own may ask for more than the
// datasheet; a fail below 1% of the expectation would fail nothing: a check switched off).
static bool valid_threshold(const cJSON *t, const char *name, const char *where, char *err,
                            size_t len) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(t, "warn");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "fail");
    if (!cJSON_IsObject(t) || !cJSON_IsNumber(w) || !cJSON_IsNumber(f))
        return bench_err(err, len, "%s: %s: needs numbers \"warn\" and \"fail\"", where, name);
    if (!(f->valuedouble >= 0.01 && f->valuedouble <= w->valuedouble && w->valuedouble <= 10))
        return bench_err(err, len, "%s: %s: needs 0.01 <= fail (%g) <= warn (%g) <= 10", where,
                         name, f->valuedouble, w->valuedouble);
    return true;
}

static bool valid_model(const cJSON *e, const cJSON *m, int i, const char *name, char *err,
                        size_t len) {
    char where[300], why[64];
    snprintf(where, sizeof where, "%s: models[%d]", name, i);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(m, "model");
    if (!cJSON_IsObject(m) || !cJSON_IsString(model) || !model->valuestring[0])
        return bench_err(err, len, "%s: needs a \"model\" name", where);
    if (!check_name_valid(model->valuestring, why, sizeof why))
        return bench_err(err, len, "%s: \"model\" %s", where, why);
    const char *mn = model->valuestring;
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(m, "names");
    if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) == 0)
        return bench_err(err, len, "%s (%s): \"names\" must be a non-empty array of device names",
                         where, mn);
    int k = 0;
    const cJSON *n;
    cJSON_ArrayForEach(n, names) {
        if (!cJSON_IsString(n) || !n->valuestring[0])
            return bench_err(err, len, "%s (%s): \"names\" holds something that is not a name",
                             where, mn);
        if (!check_name_valid(n->valuestring, why, sizeof why))
            return bench_err(err, len, "%s (%s): names[%d] %s", where, mn, k, why);
        k++;
    }
    // datasheet figures: a number that disables its check (1e999 is infinity, a PCIe generation
    // 99 or a width 0.5 has no rate) or that no GPU has is refused, never ignored
    static const char *rates[] = {"hbm_GBps", "nvlink_GBps"};
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, rates[r]);
        if (v && !in_range(v, 1, CHECK_FIGURE_CAP))
            return bench_err(err, len, "%s (%s): \"%s\" is not a positive number of GB/s up to %g",
                             where, mn, rates[r], CHECK_FIGURE_CAP);
    }
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(m, "pcie_gen");
    const cJSON *width = cJSON_GetObjectItemCaseSensitive(m, "pcie_width");
    if (gen && !(in_range(gen, 1, 6) && gen->valuedouble == floor(gen->valuedouble)))
        return bench_err(err, len, "%s (%s): \"pcie_gen\" is not a PCIe generation (1 to 6)", where,
                         mn);
    if (width && !(in_range(width, 1, 32) &&
                   ((int)width->valuedouble & ((int)width->valuedouble - 1)) == 0 &&
                   width->valuedouble == floor(width->valuedouble)))
        return bench_err(err, len,
                         "%s (%s): \"pcie_width\" is not a PCIe width (1, 2, 4, 8, 16, 32)", where,
                         mn);
    if (!gen != !width)
        return bench_err(err, len, "%s (%s): \"pcie_gen\" and \"pcie_width\" go together", where,
                         mn);
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(m, "nvlink_note");
    if (note && !cJSON_IsString(note))
        return bench_err(err, len, "%s (%s): \"nvlink_note\" must be a string", where, mn);
    const cJSON *tf = cJSON_GetObjectItemCaseSensitive(m, "tflops");
    if (tf) {
        if (!cJSON_IsObject(tf))
            return bench_err(err, len, "%s (%s): \"tflops\" must be an object", where, mn);
        const cJSON *p;
        cJSON_ArrayForEach(p, tf) {
            if (strcmp(p->string, "tf32") && strcmp(p->string, "f16") && strcmp(p->string, "bf16") &&
                strcmp(p->string, "f64"))
                return bench_err(err, len,
                                 "%s (%s): tflops.%s: unknown precision (tf32, f16, bf16, f64)",
                                 where, mn, p->string);
            if (!in_range(p, 0.01, CHECK_FIGURE_CAP))
                return bench_err(err, len,
                                 "%s (%s): tflops.%s is not a positive number of TFLOP/s up to %g",
                                 where, mn, p->string, CHECK_FIGURE_CAP);
        }
    }
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(m, "checks");
    if (checks) {  // a fleet's measured medians, per check: below the model's physical limit
        if (!cJSON_IsObject(checks))
            return bench_err(err, len, "%s (%s): \"checks\" must be an object", where, mn);
        const cJSON *c;
        cJSON_ArrayForEach(c, checks) {
            bool known = false;
            for (int q = 0; check_perf_names[q]; q++)
                known = known || !strcmp(c->string, check_perf_names[q]);
            if (!known)
                return bench_err(err, len, "%s (%s): checks.%s: not a performance check", where, mn,
                                 c->string);
            char lwhy[160];
            double limit = check_expect_limit(e, m, c->string, lwhy, sizeof lwhy);
            if (!cJSON_IsNumber(c) || !(c->valuedouble > 0) || !isfinite(c->valuedouble))
                return bench_err(err, len, "%s (%s): checks.%s is not a positive number", where, mn,
                                 c->string);
            if (c->valuedouble > limit)
                return bench_err(err, len,
                                 "%s (%s): checks.%s = %g is faster than this GPU can be (%s)",
                                 where, mn, c->string, c->valuedouble, lwhy);
        }
    }
    return true;
}

// A device name as check_expect_model compares it: without "NVIDIA ", case-insensitively.
static const char *bare_name(const char *s) {
    return strncasecmp(s, "NVIDIA ", 7) ? s : s + 7;
}

typedef struct {
    const char *name;
    int model, index;
} model_name;

static int cmp_model_name(const void *a, const void *b) {
    const model_name *x = a, *y = b;
    int c = strcasecmp(bare_name(x->name), bare_name(y->name));
    return c ? c : x->model != y->model ? x->model - y->model : x->index - y->index;
}

// No device name in two models (or twice in one): which model judges a device would depend on
// the order. Sorted, so that a file of many names is checked in O(n log n).
static bool unique_names(const cJSON *models, int nn, const char *name, char *err, size_t len) {
    model_name *v = malloc((size_t)(nn ? nn : 1) * sizeof *v);
    if (!v) return bench_err(err, len, "%s: out of memory", name);
    int k = 0, mi = 0;
    const cJSON *m, *n;
    cJSON_ArrayForEach(m, models) {
        int ni = 0;
        cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(m, "names")) if (k < nn) v[k++] =
            (model_name){n->valuestring, mi, ni++};
        mi++;
    }
    qsort(v, (size_t)k, sizeof *v, cmp_model_name);
    for (int i = 1; i < k; i++)
        if (!strcasecmp(bare_name(v[i - 1].name), bare_name(v[i].name))) {
            bench_err(err, len,
                      "%s: models[%d] names[%d] \"%s\" is also models[%d] names[%d]: which model "
                      "judges the device would depend on the order",
                      name, v[i].model, v[i].index, v[i].name, v[i - 1].model, v[i - 1].index);
            free(v);
            return false;
        }
    free(v);
    return true;
}

// The part of an expectations file a judge relies on, valid or not (err names the field).
static bool valid_expect(const cJSON *e, const char *name, char *err, size_t len) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(e, "format");
    if (!cJSON_IsObject(e) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, CHECK_EXPECT_FORMAT))
        return bench_err(err, len, "%s: not an expectations file (\"format\" must be \"%s\")", name,
                         CHECK_EXPECT_FORMAT);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(e, "thresholds");
    static const char *needed[] = {"memory.d2d", "gemm", "pcie.copy", "multi.allreduce", "multi.peer"};
    if (!cJSON_IsObject(th)) return bench_err(err, len, "%s: needs a \"thresholds\" object", name);
    char where[300];
    snprintf(where, sizeof where, "%s: thresholds", name);
    for (size_t k = 0; k < sizeof needed / sizeof *needed; k++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(th, needed[k]);
        if (!t) return bench_err(err, len, "%s: thresholds: \"%s\" is missing", name, needed[k]);
        if (!valid_threshold(t, needed[k], where, err, len)) return false;
    }
    if (!valid_threshold(cJSON_GetObjectItemCaseSensitive(e, "outlier"), "outlier", name, err, len))
        return false;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(e, "measured_thresholds");
    if (mt && !valid_threshold(mt, "measured_thresholds", name, err, len)) return false;
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(e, "physical_limit");
    if (pl &&
        !(cJSON_IsObject(pl) && in_range(cJSON_GetObjectItemCaseSensitive(pl, "margin"), 1, 2)))
        return bench_err(
            err, len, "%s: physical_limit: needs a \"margin\" from 1 to 2 (x the datasheet)", name);
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(e, "models");
    if (!cJSON_IsArray(models)) return bench_err(err, len, "%s: needs a \"models\" array", name);
    int i = 0, nn = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, models) {
        if (!valid_model(e, m, i++, name, err, len)) return false;
        nn += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "names"));
    }
    return unique_names(models, nn, name, err, len);
}

cJSON *check_expect_parse(const char *text, const char *name, char *err, size_t len) {
    return bench_json_parse_valid(text, strlen(text), name, valid_expect, err, len);
}

cJSON *check_expect_load(const char *path, char *err, size_t len) {
    // no expectations file is 64 MiB
    return bench_json_load_valid(path, 64u << 20, valid_expect, err, len);
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

// ---- figures files ------------------------------------------------------------------------------

cJSON *check_figures_parse(const char *text, size_t n, const char *path, char *err, size_t len) {
    char why[1200];
    cJSON *f = bench_json_parse_strict(text, n, false, why, sizeof why);
    if (!f) {
        bench_err(err, len, "%s", why);
        return NULL;
    }
    cJSON *sec = cJSON_GetObjectItemCaseSensitive(f, "check");
    if (!cJSON_IsObject(f) || !cJSON_IsObject(sec)) return f;  // a figures file
    bool emu = bench_json_truthy(cJSON_GetObjectItemCaseSensitive(f, "emulated"));
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (!emu && !strcmp(base, "status.json")) {  // its results directory may say so
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        int e = bench_dir_emulated(dir[0] ? dir : "/", why, sizeof why);
        if (e < 0) {
            cJSON_Delete(f);
            bench_err(err, len, "%s", why);
            return NULL;
        }
        emu = e == 1;
    }
    cJSON *out = cJSON_DetachItemViaPointer(f, sec);
    cJSON_Delete(f);
    cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(out, "gpus")) {
        if (!emu || !cJSON_IsObject(g)) continue;
        cJSON_DeleteItemFromObjectCaseSensitive(g, "emulated");
        cJSON_AddBoolToObject(g, "emulated", true);
    }
    return out;
}

// ---- --write-expect ---------------------------------------------------------------------------

typedef struct {
    char name[256];      // the model's name: a known model's, else the device's without "NVIDIA "
    const cJSON *known;  // BASE's model, or NULL
    double *v[16];       // per check_perf_names entry
    int n[16], cap[16];
} name_figures;

// Appends "; what" to the note (what is left out, and why); "..." once it is full.
static void note_add(char *note, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t n, const char *fmt, ...) {
    size_t k = strlen(note);
    if (k + 4 >= n) return;
    if (k + 200 >= n) {
        snprintf(note + k, n - k, "; ...");
        return;
    }
    if (k) k += (size_t)snprintf(note + k, n - k, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + k, n - k, fmt, ap);
    va_end(ap);
}

// Whether a checks array holds a line with verdict V (one of the words of check.h).
static bool has_verdict(const cJSON *checks, const char *v) {
    const cJSON *c;
    cJSON_ArrayForEach(c, checks) {
        const char *x = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "verdict"));
        if (x && !strcmp(x, v)) return true;
    }
    return false;
}

// The group of a device name: its known model's, else its own name (case-insensitively).
static int group_of(name_figures **nf, int *nn, const cJSON *base, const char *device_name) {
    const cJSON *known = check_expect_model(base, device_name);
    const char *bare = strncasecmp(device_name, "NVIDIA ", 7) ? device_name : device_name + 7;
    for (int i = 0; i < *nn; i++)
        if (known ? (*nf)[i].known == known : !(*nf)[i].known && !strcasecmp((*nf)[i].name, bare))
            return i;
    name_figures *b = realloc(*nf, (size_t)(*nn + 1) * sizeof **nf);
    if (!b) return -1;
    *nf = b;
    memset(&b[*nn], 0, sizeof *b);
    b[*nn].known = known;
    snprintf(b[*nn].name, sizeof b->name, "%s",
             known ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(known, "model")) : bare);
    return (*nn)++;
}

static bool push(name_figures *f, int k, double v) {
    if (f->n[k] == f->cap[k]) {
        int cap = f->cap[k] ? 2 * f->cap[k] : 8;
        double *b = realloc(f->v[k], (size_t)cap * sizeof *b);
        if (!b) return false;
        f->v[k] = b;
        f->cap[k] = cap;
    }
    f->v[k][f->n[k]++] = v;
    return true;
}

// The host name a results directory's context.json records (env.host), "" when it has none.
static void run_host(const char *dir, char *host, size_t n) {
    char path[4200], why[300];
    snprintf(path, sizeof path, "%s/context.json", dir);
    host[0] = 0;
    if (access(path, F_OK) != 0) return;
    size_t len = 0;
    char *text = bench_read_file_max(path, 256u << 20, &len);
    cJSON *c = text ? bench_json_parse_strict(text, len, false, why, sizeof why) : NULL;
    free(text);
    const char *h = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "env"), "host"));
    if (h && check_name_valid(h, NULL, 0)) snprintf(host, n, "%s", h);
    cJSON_Delete(c);
}

bool check_run_read(const cJSON *base, const char *dir, check_run_dir *r, char *err, size_t len) {
    memset(r, 0, sizeof *r);
    char path[4200];
    snprintf(path, sizeof path, "%s/status.json", dir);
    size_t n = 0;
    char *text = bench_read_file_max(path, 256u << 20, &n);  // no status.json is this big
    if (!text) return bench_err(err, len, "%s: cannot read: %s", path, bench_strerror(errno));
    r->status = bench_json_parse_strict(text, n, false, r->why, sizeof r->why);
    free(text);
    if (!r->status) return bench_err(err, len, "%s: %s", path, r->why);
    const cJSON *st = r->status, *sec = cJSON_GetObjectItemCaseSensitive(st, "check");
    if (!cJSON_IsObject(sec)) {
        check_run_dir_free(r);
        return bench_err(err, len,
                         "%s: has no \"check\" section: not a results directory of `bench "
                         "check --out`",
                         path);
    }
    // the run as a whole: emulated, incomplete or failed runs give no figure
    int emu = bench_dir_emulated(dir, r->why, sizeof r->why);
    const cJSON *we = cJSON_GetObjectItemCaseSensitive(st, "write_errors");
    if (emu < 0) {
        bench_err(err, len, "%s", r->why);
        check_run_dir_free(r);
        return false;
    }
    r->emulated = emu == 1;
    char jerr[600];
    r->judged = check_judge(sec, base, jerr, sizeof jerr);  // the figures, judged again
    if (!r->judged) {
        check_run_dir_free(r);
        return bench_err(err, len, "%s: \"check\": %s", path, jerr);
    }
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(sec, "host");
    if (r->emulated)
        r->skip = "a run on the emulated device";
    else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "complete")))
        r->skip = "incomplete: its status.json does not say \"complete\": true";
    else if (we && !(cJSON_IsArray(we) && cJSON_GetArraySize(we) == 0))
        r->skip = "incomplete: it has write_errors";
    else if (has_verdict(cJSON_GetObjectItemCaseSensitive(host, "checks"), CHECK_FAIL) ||
             has_verdict(cJSON_GetObjectItemCaseSensitive(
                             cJSON_GetObjectItemCaseSensitive(r->judged, "host"), "checks"),
                         CHECK_FAIL))
        r->skip = "failed: the host's check failed";
    run_host(dir, r->host, sizeof r->host);
    return true;
}

void check_run_dir_free(check_run_dir *r) {
    cJSON_Delete(r->status);
    cJSON_Delete(r->judged);
    r->status = r->judged = NULL;
}

const char *check_gpu_excluded(const cJSON *recorded, const cJSON *judged, char *why, size_t n) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(recorded, "name"));
    const char *bare = name && !strncasecmp(name, "NVIDIA ", 7) ? name + 7 : name;
    const cJSON *jcheck = cJSON_GetObjectItemCaseSensitive(judged, "checks");
    char nwhy[64] = "";
    const char *out = NULL;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(judged, "emulated")))
        out = "emulated";
    else if (!check_name_valid(bare, nwhy, sizeof nwhy))
        out = "its name is not a model name: it ";
    else if (has_verdict(cJSON_GetObjectItemCaseSensitive(recorded, "checks"), CHECK_FAIL) ||
             has_verdict(jcheck, CHECK_FAIL))
        out = "it had a FAIL";
    else if (has_verdict(jcheck, CHECK_ABSENT) || has_verdict(jcheck, CHECK_NOT_RUN))
        out = "a check of it was not measured";
    if (out) snprintf(why, n, "%s%s", out, nwhy);
    return out ? why : NULL;
}

// One results directory's GPUs into nf: true, or false with err said (bad input).
static bool take_run(const cJSON *base, const char *dir, name_figures **nf, int *nn, int *used,
                     int *left_out, char *note, size_t note_len, char *err, size_t len) {
    check_run_dir run;
    if (!check_run_read(base, dir, &run, err, len)) return false;
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(run.status, "check");
    const cJSON *judged = run.judged;
    if (run.skip) {
        (*left_out)++;
        note_add(note, note_len, "%s (%s%s%s)", dir, run.skip, run.emulated ? ": " : "",
                 run.emulated ? run.why : "");
        check_run_dir_free(&run);
        return true;
    }
    const cJSON *g, *jg = cJSON_GetObjectItemCaseSensitive(judged, "gpus")->child;
    bool ok = true;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(sec, "gpus")) {
        const char *dev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "device"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "name"));
        char why[200];
        const char *out = check_gpu_excluded(g, jg, why, sizeof why);
        jg = jg->next;
        if (out) {
            (*left_out)++;
            note_add(note, note_len, "%s %s (%s)", dir, dev ? dev : "?", out);
            continue;
        }
        int i = group_of(nf, nn, base, name);
        if (i < 0) {
            ok = bench_err(err, len, "out of memory");
            break;
        }
        (*used)++;
        const cJSON *figs = cJSON_GetObjectItemCaseSensitive(g, "figures");
        for (int k = 0; ok && check_perf_names[k]; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(figs, check_perf_names[k]), "value");
            // check_judge let through only finite positive figures below the physical limit
            if (cJSON_IsNumber(v) && v->valuedouble > 0 && isfinite(v->valuedouble) &&
                !push(&(*nf)[i], k, v->valuedouble))
                ok = bench_err(err, len, "out of memory");
        }
    }
    check_run_dir_free(&run);
    return ok;
}

cJSON *check_expect_from_runs(const cJSON *base, char **dirs, int nd, char *err, size_t len) {
    name_figures *nf = NULL;
    int nn = 0, used = 0, left_out = 0, counted = 0;
    char note[2048] = "";
    bool ok = true;
    char **real = calloc((size_t)(nd > 0 ? nd : 1), sizeof *real);
    bool *taken = calloc((size_t)(nd > 0 ? nd : 1), sizeof *taken);
    if (!real || !taken) ok = bench_err(err, len, "out of memory");
    for (int d = 0; ok && d < nd; d++) {
        if (!(real[d] = realpath(dirs[d], NULL))) {
            ok = bench_err(err, len, "%s: %s", dirs[d], strerror(errno));
            break;
        }
        int same = -1;  // the same directory named twice (a path, a link) counts once
        for (int e = 0; e < d && same < 0; e++)
            if (!strcmp(real[e], real[d])) same = e;
        if (same >= 0) {
            note_add(note, sizeof note, "%s (the same directory as %s: counted once)", dirs[d],
                     dirs[same]);
            continue;
        }
        taken[d] = true;
        counted++;
        ok = take_run(base, dirs[d], &nf, &nn, &used, &left_out, note, sizeof note, err, len);
    }
    if (ok && used == 0)
        ok = bench_err(err, len, "no GPU figures to take medians of in %d director%s%s%s%s",
                       counted, counted == 1 ? "y" : "ies", note[0] ? " (left out: " : "", note,
                       note[0] ? ")" : "");
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
        const cJSON *bl = cJSON_GetObjectItemCaseSensitive(base, "physical_limit");
        if (bl) cJSON_AddItemToObject(e, "physical_limit", cJSON_Duplicate(bl, true));
        cJSON *models = cJSON_AddArrayToObject(e, "models");
        cJSON *src = cJSON_AddArrayToObject(e, "runs");
        for (int d = 0; d < nd; d++)
            if (taken[d]) cJSON_AddItemToArray(src, cJSON_CreateString(dirs[d]));
        if (note[0]) cJSON_AddStringToObject(e, "left_out", note);
        for (int i = 0; i < nn; i++) {
            const cJSON *known = nf[i].known;
            cJSON *m = known ? cJSON_Duplicate(known, true) : cJSON_CreateObject();
            if (!known) {
                cJSON_AddStringToObject(m, "model", nf[i].name);
                cJSON *names = cJSON_AddArrayToObject(m, "names");
                cJSON_AddItemToArray(names, cJSON_CreateString(nf[i].name));
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
            for (int i = 0; i < nn && !seen; i++) seen = nf[i].known == bm;
            if (!seen) cJSON_AddItemToArray(models, cJSON_Duplicate(bm, true));
        }
        // what --expect would refuse is not written: the same rule, on the text as written
        char *text = cJSON_Print(e), verr[600];
        cJSON *back = text ? check_expect_parse(text, "the fleet file", verr, sizeof verr) : NULL;
        if (!back) {
            bench_err(err, len, "the result would not be a valid expectations file: %s",
                      text ? verr : "out of memory");
            cJSON_Delete(e);
            e = NULL;
        } else {
            snprintf(err, len, "%s", note);
        }
        cJSON_Delete(back);
        free(text);
    }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < 16; k++) free(nf[i].v[k]);
    free(nf);
    for (int d = 0; real && d < nd; d++) free(real[d]);
    free(real);
    free(taken);
    return e;
}

/* check_rules.c — a fleet's own baseline and rules (docs/CHECK.md "A fleet's baseline and rules"):
 * the metrics of a checked GPU (each figure, NVML reading and link field with a number), the
 * baseline of many nodes' `bench check --out` results (per model and metric: median, min, max,
 * count and the nodes), the rules file (a metric pattern and one criterion: relative to the
 * baseline's median, absolute, or missing/failed counts as a failure) and the judging of one node
 * by every rule. Reading and judging are pure functions of recorded figures (test_check_rules.c);
 * the printing is cmd_check.c's. */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "check.h"
#include "harness/fileio.h"
#include "harness/json_strict.h"
#include "harness/stats.h"

static const cJSON *item(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

// ---- the metrics of a GPU -----------------------------------------------------------------------

static const char *reading_unit(const char *key) {
    size_t n = strlen(key);
    if (n > 2 && !strcmp(key + n - 2, "_c")) return "C";
    if (n > 4 && !strcmp(key + n - 4, "_mhz")) return "MHz";
    if (n > 2 && !strcmp(key + n - 2, "_w")) return "W";
    return "";
}

static void add_metric(cJSON *out, const char *name, const cJSON *v, const char *unit,
                       const char *state) {
    if (item(out, name)) return;  // a name once (the judge refuses a key twice anyway)
    cJSON *m = cJSON_AddObjectToObject(out, name);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble))
        cJSON_AddNumberToObject(m, "value", v->valuedouble);
    else
        cJSON_AddNullToObject(m, "value");
    cJSON_AddStringToObject(m, "unit", unit);
    cJSON_AddStringToObject(m, "state", state);
}

// The verdict of the check line NAME of a judged GPU (NULL when it has none).
static const char *line_verdict(const cJSON *g, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, item(g, "checks")) {
        const char *n = cJSON_GetStringValue(item(c, "check"));
        if (n && !strcmp(n, name)) return cJSON_GetStringValue(item(c, "verdict"));
    }
    return NULL;
}

cJSON *check_gpu_metrics(const cJSON *g) {
    cJSON *out = cJSON_CreateObject();
    const cJSON *f;
    cJSON_ArrayForEach(f, item(g, "figures")) {
        const cJSON *v = item(f, "value");
        const char *u = cJSON_GetStringValue(item(f, "unit"));
        const char *verdict = line_verdict(g, f->string);
        bool failed = verdict && !strcmp(verdict, CHECK_FAIL);
        bool there = cJSON_IsNumber(v);
        add_metric(out, f->string, v,
                   u ? u : !strncmp(f->string, "gemm.", 5) ? "TFLOP/s" : "GB/s",
                   failed ? "failed" : there ? "ok" : "not run");
    }
    // the performance checks the judge expected and the figures do not hold
    const cJSON *c;
    cJSON_ArrayForEach(c, item(g, "checks")) {
        const char *n = cJSON_GetStringValue(item(c, "check"));
        const char *v = cJSON_GetStringValue(item(c, "verdict"));
        for (int k = 0; n && v && check_perf_names[k]; k++)
            if (!strcmp(n, check_perf_names[k]) && !item(out, n))
                add_metric(out, n, NULL, !strncmp(n, "gemm.", 5) ? "TFLOP/s" : "GB/s",
                           !strcmp(v, CHECK_FAIL) ? "failed" : "missing");
    }
    char name[300];
    cJSON_ArrayForEach(f, item(g, "health")) {
        if (!cJSON_IsNumber(f) && !cJSON_IsNull(f)) continue;  // "nvml": NVML's reason
        snprintf(name, sizeof name, "nvml.%s", f->string);
        add_metric(out, name, f, reading_unit(f->string), cJSON_IsNumber(f) ? "ok" : "missing");
    }
    // the run's error counters (docs/CHECK.md "Error counters"): each at the run's end as
    // nvml.<counter>, its growth during the run as nvml.<counter>_delta, Xid events as
    // nvml.xid_events
    const cJSON *cn = item(g, "counters");
    cJSON_ArrayForEach(f, item(cn, "end")) {
        if (!cJSON_IsNumber(f) && !cJSON_IsNull(f)) continue;
        snprintf(name, sizeof name, "nvml.%s", f->string);
        add_metric(out, name, f, "", cJSON_IsNumber(f) ? "ok" : "missing");
        if (!strcmp(f->string, "nvlink_links_active")) continue;   // a count of links, no delta
        const cJSON *a = item(item(cn, "start"), f->string);
        cJSON *d = cJSON_IsNumber(f) && cJSON_IsNumber(a) ? cJSON_CreateNumber(f->valuedouble - a->valuedouble)
                                                          : cJSON_CreateNull();
        snprintf(name, sizeof name, "nvml.%s_delta", f->string);
        add_metric(out, name, d, "", cJSON_IsNumber(d) ? "ok" : "missing");
        cJSON_Delete(d);
    }
    if (cn) {
        const cJSON *x = item(cn, "xid");
        cJSON *k = cJSON_IsArray(x) ? cJSON_CreateNumber(cJSON_GetArraySize(x)) : cJSON_CreateNull();
        add_metric(out, "nvml.xid_events", k, "", cJSON_IsNumber(k) ? "ok" : "missing");
        cJSON_Delete(k);
    }
    cJSON_ArrayForEach(f, item(g, "link")) {
        if (!cJSON_IsNumber(f) && !cJSON_IsNull(f)) continue;  // under_load: a flag
        snprintf(name, sizeof name, "link.%s", f->string);
        add_metric(out, name, f, "", cJSON_IsNumber(f) ? "ok" : "missing");
    }
    return out;
}

// The baseline's name of a judged GPU's model: its expectations model, else the device name
// without "NVIDIA " (as --write-expect groups them).
static const char *model_key(const cJSON *g) {
    const char *m = cJSON_GetStringValue(item(g, "model"));
    if (m) return m;
    const char *n = cJSON_GetStringValue(item(g, "name"));
    if (!n) return NULL;
    return strncasecmp(n, "NVIDIA ", 7) ? n : n + 7;
}

// The baseline's model object whose name is NAME, case-insensitively (NULL when none).
static const cJSON *baseline_model(const cJSON *baseline, const char *name) {
    const cJSON *m;
    cJSON_ArrayForEach(m, item(baseline, "models")) if (name && !strcasecmp(m->string, name)) return m;
    return NULL;
}

// ---- the baseline file ------------------------------------------------------------------------

static bool only_keys(const cJSON *o, const char *const *keys, const char *where, char *err,
                      size_t len) {
    const cJSON *k;
    cJSON_ArrayForEach(k, o) {
        bool known = false;
        for (int i = 0; keys[i] && !known; i++) known = !strcmp(k->string, keys[i]);
        if (!known) {
            char list[300] = "";
            for (int i = 0; keys[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         keys[i]);
            return bench_err(err, len, "%s: unknown key \"%s\" (known: %s)", where, k->string,
                             list);
        }
    }
    return true;
}

static bool finite_num(const cJSON *v) {
    return cJSON_IsNumber(v) && isfinite(v->valuedouble);
}

static bool valid_baseline(const cJSON *b, const char *name, char *err, size_t len) {
    static const char *const top[] = {"format", "about", "runs", "left_out", "models", NULL};
    static const char *const entry[] = {"unit", "median", "min", "max", "count", "nodes", NULL};
    const cJSON *fmt = item(b, "format");
    if (!cJSON_IsObject(b) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, CHECK_BASELINE_FORMAT))
        return bench_err(err, len, "%s: not a baseline file (\"format\" must be \"%s\")", name,
                         CHECK_BASELINE_FORMAT);
    if (!only_keys(b, top, name, err, len)) return false;
    const cJSON *models = item(b, "models");
    if (!cJSON_IsObject(models) || !models->child)
        return bench_err(err, len, "%s: \"models\" must be an object with one or more models",
                         name);
    char why[64], where[700];
    const cJSON *m;
    cJSON_ArrayForEach(m, models) {
        if (!check_name_valid(m->string, why, sizeof why))
            return bench_err(err, len, "%s: models: a model name %s", name, why);
        for (const cJSON *o = models->child; o != m; o = o->next)
            if (!strcasecmp(o->string, m->string))
                return bench_err(err, len,
                                 "%s: models.\"%s\" is also models.\"%s\" (names are compared "
                                 "without case)",
                                 name, m->string, o->string);
        if (!cJSON_IsObject(m) || !m->child)
            return bench_err(err, len, "%s: models.\"%s\" must be an object of one or more metrics",
                             name, m->string);
        const cJSON *e;
        cJSON_ArrayForEach(e, m) {
            snprintf(where, sizeof where, "%s: models.\"%.200s\".\"%.200s\"", name, m->string,
                     e->string);
            if (!check_name_valid(e->string, why, sizeof why))
                return bench_err(err, len, "%s: the metric name %s", where, why);
            if (!cJSON_IsObject(e)) return bench_err(err, len, "%s: must be an object", where);
            if (!only_keys(e, entry, where, err, len)) return false;
            const cJSON *u = item(e, "unit"), *nodes = item(e, "nodes"), *count = item(e, "count");
            if (!cJSON_IsString(u))
                return bench_err(err, len, "%s: \"unit\" must be a string", where);
            static const char *const nums[] = {"median", "min", "max"};
            for (int k = 0; k < 3; k++)
                if (!finite_num(item(e, nums[k])))
                    return bench_err(err, len, "%s: \"%s\" must be a finite number", where,
                                     nums[k]);
            double lo = item(e, "min")->valuedouble, med = item(e, "median")->valuedouble,
                   hi = item(e, "max")->valuedouble;
            if (!(lo <= med && med <= hi))
                return bench_err(err, len, "%s: needs min (%g) <= median (%g) <= max (%g)", where,
                                 lo, med, hi);
            if (!finite_num(count) || count->valuedouble < 1 || count->valuedouble > INT_MAX ||
                count->valuedouble != floor(count->valuedouble))
                return bench_err(err, len, "%s: \"count\" must be a whole number from 1", where);
            if (!cJSON_IsArray(nodes) || !nodes->child)
                return bench_err(err, len,
                                 "%s: \"nodes\" must be an array of one or more node names", where);
            int k = 0;
            const cJSON *n;
            cJSON_ArrayForEach(n, nodes) {
                if (!cJSON_IsString(n) || !check_name_valid(n->valuestring, why, sizeof why))
                    return bench_err(err, len, "%s: nodes[%d] is not a node name", where, k);
                k++;
            }
        }
    }
    return true;
}

cJSON *check_baseline_parse(const char *text, size_t n, const char *name, char *err, size_t len) {
    return bench_json_parse_valid(text, n, name, valid_baseline, err, len);
}

// ---- --write-baseline -------------------------------------------------------------------------

// A results directory as given: a directory, or a path to its status.json (its directory).
static bool run_dir_of(const char *arg, char *dir, size_t n, char *err, size_t len) {
    struct stat sb;
    if (stat(arg, &sb) != 0) return bench_err(err, len, "%s: %s", arg, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return snprintf(dir, n, "%s", arg) < (int)n ||
               bench_err(err, len, "%s: path too long", arg);
    const char *slash = strrchr(arg, '/'), *base = slash ? slash + 1 : arg;
    if (strcmp(base, "status.json"))
        return bench_err(err, len,
                         "%s: not a results directory of `bench check --out` (nor its "
                         "status.json)",
                         arg);
    snprintf(dir, n, "%.*s", slash ? (int)(slash - arg) : 1, slash ? arg : ".");
    if (!dir[0]) snprintf(dir, n, "/");
    return true;
}

// The node of a read run: the host its context.json records, else the path as given.
static const char *node_name(const check_run_dir *r, const char *arg) {
    return r->host[0] ? r->host : arg;
}

static bool push_value(cJSON *acc, const char *model, const char *metric, const char *unit,
                       double v, const char *node) {
    cJSON *m = cJSON_GetObjectItemCaseSensitive(acc, model);
    if (!m) m = cJSON_AddObjectToObject(acc, model);
    cJSON *e = cJSON_GetObjectItemCaseSensitive(m, metric);
    if (!e) {
        e = cJSON_AddObjectToObject(m, metric);
        cJSON_AddStringToObject(e, "unit", unit);
        cJSON_AddArrayToObject(e, "values");
        cJSON_AddArrayToObject(e, "nodes");
    }
    if (!e) return false;
    cJSON *values = cJSON_GetObjectItemCaseSensitive(e, "values");
    cJSON *nodes = cJSON_GetObjectItemCaseSensitive(e, "nodes");
    cJSON_AddItemToArray(values, cJSON_CreateNumber(v));
    const cJSON *n;
    bool seen = false;
    cJSON_ArrayForEach(n, nodes) seen = seen || !strcmp(n->valuestring, node);
    if (!seen) cJSON_AddItemToArray(nodes, cJSON_CreateString(node));
    return true;
}

// The baseline's models from what push_value gathered: per metric median, min, max, count, nodes.
static cJSON *stats_of(const cJSON *acc, char *err, size_t len) {
    cJSON *models = cJSON_CreateObject();
    const cJSON *m, *e;
    cJSON_ArrayForEach(m, acc) {
        cJSON *om = cJSON_AddObjectToObject(models, m->string);
        cJSON_ArrayForEach(e, m) {
            int n = cJSON_GetArraySize(item(e, "values"));
            double *v = malloc((size_t)n * sizeof *v);
            if (!v) {
                cJSON_Delete(models);
                bench_err(err, len, "out of memory");
                return NULL;
            }
            int i = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, item(e, "values")) v[i++] = x->valuedouble;
            bench_summary s = bench_summarize(v, n);
            cJSON *o = cJSON_AddObjectToObject(om, e->string);
            cJSON_AddStringToObject(o, "unit", cJSON_GetStringValue(item(e, "unit")));
            cJSON_AddNumberToObject(o, "median", s.median);
            cJSON_AddNumberToObject(o, "min", s.min);
            cJSON_AddNumberToObject(o, "max", s.max);
            cJSON_AddNumberToObject(o, "count", n);
            cJSON_AddItemToObject(o, "nodes", cJSON_Duplicate(item(e, "nodes"), true));
            free(v);
        }
    }
    return models;
}

cJSON *check_baseline_from_runs(const cJSON *expect, char **args, int nargs, char *note,
                                size_t note_len, char *err, size_t len) {
    note[0] = 0;
    cJSON *acc = cJSON_CreateObject(), *runs = cJSON_CreateArray();
    char **real = calloc((size_t)(nargs > 0 ? nargs : 1), sizeof *real);
    bool ok = acc && runs && real;
    if (!ok) bench_err(err, len, "out of memory");
    int used = 0;
#define NOTE(...)                                                                          \
    do {                                                                                   \
        size_t k_ = strlen(note);                                                          \
        if (k_ + 8 < note_len)                                                             \
            snprintf(note + k_, note_len - k_, "%s", k_ ? "; " : ""),                      \
                snprintf(note + strlen(note), note_len - strlen(note), __VA_ARGS__);       \
    } while (0)
    for (int a = 0; ok && a < nargs; a++) {
        char dir[4096];
        if (!(ok = run_dir_of(args[a], dir, sizeof dir, err, len))) break;
        if (!(real[a] = realpath(dir, NULL))) {
            ok = bench_err(err, len, "%s: %s", args[a], strerror(errno));
            break;
        }
        int same = -1;  // the same directory named twice (a path, a link) counts once
        for (int b = 0; b < a && same < 0; b++)
            if (real[b] && !strcmp(real[b], real[a])) same = b;
        if (same >= 0) {
            NOTE("%s (the same directory as %s: counted once)", args[a], args[same]);
            continue;
        }
        check_run_dir r;
        if (!(ok = check_run_read(expect, dir, &r, err, len))) break;
        if (r.emulated) {  // not a GPU's figure: never a baseline, never quietly left out
            ok = bench_err(err, len,
                           "%s: a run on the emulated device (%s): its figures are not a GPU's, "
                           "so it is no baseline source",
                           args[a], r.why);
            check_run_dir_free(&r);
            break;
        }
        const char *node = node_name(&r, args[a]);
        cJSON *run = cJSON_CreateObject();
        cJSON_AddStringToObject(run, "dir", args[a]);
        cJSON_AddStringToObject(run, "node", node);
        cJSON_AddItemToArray(runs, run);
        if (r.skip) {
            NOTE("%s (%s)", args[a], r.skip);
            check_run_dir_free(&r);
            continue;
        }
        const cJSON *g, *jg = item(r.judged, "gpus")->child;
        cJSON_ArrayForEach(g, item(item(r.status, "check"), "gpus")) {
            char why[200];
            const char *out = check_gpu_excluded(g, jg, why, sizeof why);
            const char *dev = cJSON_GetStringValue(item(g, "device"));
            if (out) {
                NOTE("%s %s (%s)", args[a], dev ? dev : "?", out);
                jg = jg->next;
                continue;
            }
            used++;
            cJSON *metrics = check_gpu_metrics(jg);
            const cJSON *m;
            cJSON_ArrayForEach(m, metrics) {
                const cJSON *v = item(m, "value");
                if (strcmp(cJSON_GetStringValue(item(m, "state")), "ok") || !cJSON_IsNumber(v))
                    continue;
                if (!push_value(acc, model_key(jg), m->string, cJSON_GetStringValue(item(m, "unit")),
                                v->valuedouble, node))
                    ok = bench_err(err, len, "out of memory");
            }
            cJSON_Delete(metrics);
            jg = jg->next;
        }
        check_run_dir_free(&r);
    }
#undef NOTE
    for (int a = 0; real && a < nargs; a++) free(real[a]);
    free(real);
    if (ok && used == 0)
        ok = bench_err(err, len, "no healthy GPU figures in %d result%s%s%s%s", nargs,
                       nargs == 1 ? "" : "s", note[0] ? " (left out: " : "", note,
                       note[0] ? ")" : "");
    cJSON *b = NULL, *models = ok ? stats_of(acc, err, len) : NULL;
    if (models) {
        b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "format", CHECK_BASELINE_FORMAT);
        char about[400];
        snprintf(about, sizeof about,
                 "A fleet's baseline (bench check --write-baseline): per model and metric, the "
                 "median, min and max of %d healthy GPU%s recorded by `bench check --out`, how many "
                 "and on which nodes.", used, used == 1 ? "" : "s");
        cJSON_AddStringToObject(b, "about", about);
        cJSON_AddItemToObject(b, "runs", runs);
        runs = NULL;
        if (note[0]) cJSON_AddStringToObject(b, "left_out", note);
        cJSON_AddItemToObject(b, "models", models);
        // what --baseline would refuse is never written: the same rule on the text as written
        char *text = cJSON_Print(b), verr[600];
        cJSON *back = text ? check_baseline_parse(text, strlen(text), "the baseline", verr, sizeof verr) : NULL;
        if (!back) {
            bench_err(err, len, "the result would not be a valid baseline: %s",
                      text ? verr : "out of memory");
            cJSON_Delete(b);
            b = NULL;
        }
        cJSON_Delete(back);
        free(text);
    }
    cJSON_Delete(runs);
    cJSON_Delete(acc);
    return b;
}

// ---- the rules file ---------------------------------------------------------------------------

// The criterion object {"min", "max"} of a rule: at least one, finite, min <= max; a relative
// one's above 0.
static bool valid_limits(const cJSON *c, bool relative, const char *where, char *err, size_t len) {
    static const char *const keys[] = {"min", "max", NULL};
    const char *kind = relative ? "relative" : "absolute";
    if (!cJSON_IsObject(c))
        return bench_err(err, len, "%s: \"%s\" must be an object {\"min\", \"max\"}", where, kind);
    if (!only_keys(c, keys, where, err, len)) return false;
    const cJSON *lo = item(c, "min"), *hi = item(c, "max");
    if (!lo && !hi)
        return bench_err(err, len, "%s: \"%s\" needs \"min\" or \"max\" (or both)", where, kind);
    for (int k = 0; k < 2; k++) {
        const cJSON *v = k ? hi : lo;
        if (v && (!finite_num(v) || (relative && !(v->valuedouble > 0))))
            return bench_err(err, len, "%s: %s.%s must be a finite number%s", where, kind,
                             k ? "max" : "min",
                             relative ? " above 0 (a fraction of the median)" : "");
    }
    if (lo && hi && lo->valuedouble > hi->valuedouble)
        return bench_err(err, len, "%s: %s.min (%g) is above %s.max (%g): no value passes", where,
                         kind, lo->valuedouble, kind, hi->valuedouble);
    return true;
}

static bool valid_rule(const cJSON *r, int i, const cJSON *rules, const cJSON *baseline,
                       const char *name, char *err, size_t len) {
    static const char *const keys[] = {"name", "about", "metric", "relative", "absolute",
                                       "missing_fails", NULL};
    char where[700], why[64];
    const cJSON *rn = item(r, "name");
    snprintf(where, sizeof where, "%s: rules[%d]", name, i);
    if (!cJSON_IsObject(r)) return bench_err(err, len, "%s: must be an object", where);
    if (!cJSON_IsString(rn)) return bench_err(err, len, "%s: needs a \"name\" (a string)", where);
    if (!check_name_valid(rn->valuestring, why, sizeof why))
        return bench_err(err, len, "%s: \"name\" %s", where, why);
    snprintf(where, sizeof where, "%s: rules[%d] (%s)", name, i, rn->valuestring);
    if (!only_keys(r, keys, where, err, len)) return false;
    int j = 0;
    for (const cJSON *o = rules->child; o != r; o = o->next, j++)
        if (!strcmp(cJSON_GetStringValue(item(o, "name")), rn->valuestring))
            return bench_err(err, len,
                             "%s: \"name\" is also rules[%d]'s: which rule failed would be "
                             "ambiguous",
                             where, j);
    const cJSON *about = item(r, "about");
    if (about && !cJSON_IsString(about))
        return bench_err(err, len, "%s: \"about\" must be a string", where);
    const cJSON *pat = item(r, "metric");
    if (!cJSON_IsString(pat) || !check_name_valid(pat->valuestring, why, sizeof why))
        return bench_err(err, len,
                         "%s: \"metric\" must be a pattern of metric names (\"gemm.*\")%s%s", where,
                         cJSON_IsString(pat) ? ": it " : "", cJSON_IsString(pat) ? why : "");
    const cJSON *rel = item(r, "relative"), *abs_ = item(r, "absolute"), *mf = item(r, "missing_fails");
    if ((rel != NULL) + (abs_ != NULL) + (mf != NULL) != 1)
        return bench_err(err, len,
                         "%s: needs exactly one of \"relative\", \"absolute\", \"missing_fails\"",
                         where);
    if (rel && !valid_limits(rel, true, where, err, len)) return false;
    if (abs_ && !valid_limits(abs_, false, where, err, len)) return false;
    if (mf && !cJSON_IsTrue(mf))
        return bench_err(err, len,
                         "%s: \"missing_fails\" must be true (false would be a rule that never "
                         "fires: leave the rule out)",
                         where);
    // a rule that matches no metric of the baseline could never fire: refused, not passed
    int matched = 0;
    const cJSON *m, *e;
    cJSON_ArrayForEach(m, item(baseline, "models")) cJSON_ArrayForEach(e, m) {
        if (fnmatch(pat->valuestring, e->string, 0) != 0) continue;
        matched++;
        if (rel && !(item(e, "median")->valuedouble > 0))
            return bench_err(err, len,
                             "%s: \"relative\" to %s of %s, whose median is %g: a fraction of "
                             "it means nothing (give an absolute limit)",
                             where, e->string, m->string, item(e, "median")->valuedouble);
    }
    if (!matched)
        return bench_err(err, len,
                         "%s: \"metric\" \"%s\" matches no metric of the baseline: the rule "
                         "could never fire",
                         where, pat->valuestring);
    return true;
}

cJSON *check_rules_parse(const char *text, size_t n, const char *name, const cJSON *baseline,
                         char *err, size_t len) {
    static const char *const top[] = {"format", "about", "rules", NULL};
    char why[300];
    cJSON *r = bench_json_parse_strict(text, n, true, why, sizeof why);
    if (!r) {
        bench_err(err, len, "%s: %s", name, why);
        return NULL;
    }
    const cJSON *fmt = item(r, "format"), *rules = item(r, "rules"), *about = item(r, "about");
    bool ok = true;
    if (!cJSON_IsObject(r) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, CHECK_RULES_FORMAT))
        ok = bench_err(err, len, "%s: not a rules file (\"format\" must be \"%s\")", name,
                       CHECK_RULES_FORMAT);
    else if (!only_keys(r, top, name, err, len))
        ok = false;
    else if (about && !cJSON_IsString(about))
        ok = bench_err(err, len, "%s: \"about\" must be a string", name);
    else if (!cJSON_IsArray(rules) || !rules->child)
        ok = bench_err(err, len, "%s: \"rules\" must be an array of one or more rules", name);
    int i = 0;
    const cJSON *x;
    if (ok) cJSON_ArrayForEach(x, rules) if (ok) ok = valid_rule(x, i++, rules, baseline, name, err, len);
    if (!ok) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

// ---- judging a node ---------------------------------------------------------------------------

static void fail_add(cJSON *fails, const char *rule, const char *device, const char *metric,
                     double value, double limit, double ratio, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
static void fail_add(cJSON *fails, const char *rule, const char *device, const char *metric,
                     double value, double limit, double ratio, const char *fmt, ...) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "rule", rule);
    if (device) cJSON_AddStringToObject(f, "device", device);
    else cJSON_AddNullToObject(f, "device");
    if (metric) cJSON_AddStringToObject(f, "metric", metric);
    else cJSON_AddNullToObject(f, "metric");
    const double v3[3] = {value, limit, ratio};
    const char *k3[3] = {"value", "limit", "ratio"};
    for (int k = 0; k < 3; k++)
        if (isfinite(v3[k])) cJSON_AddNumberToObject(f, k3[k], v3[k]);
        else cJSON_AddNullToObject(f, k3[k]);
    char why[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    cJSON_AddStringToObject(f, "why", why);
    cJSON_AddItemToArray(fails, f);
}

// A relative or absolute rule on one GPU's value of metric NAME.
static void judge_limits(cJSON *fails, const cJSON *rule, const char *dev, const char *model,
                         const cJSON *bm, const char *name, double v, const char *unit) {
    const char *rn = item(rule, "name")->valuestring;
    const cJSON *rel = item(rule, "relative");
    const cJSON *crit = rel ? rel : item(rule, "absolute");
    const cJSON *lo = item(crit, "min"), *hi = item(crit, "max");
    double base = 1;
    if (rel) {
        const cJSON *e = item(bm, name);
        if (!e) {
            fail_add(fails, rn, dev, name, v, NAN, NAN,
                     "%g %s, and the baseline has no %s for %s: nothing to be relative to", v, unit,
                     name, model ? model : "this model");
            return;
        }
        base = item(e, "median")->valuedouble;
    }
    for (int k = 0; k < 2; k++) {
        const cJSON *c = k ? hi : lo;
        if (!c) continue;
        double limit = c->valuedouble * base;
        if (k ? !(v > limit) : !(v < limit)) continue;
        if (rel)
            fail_add(fails, rn, dev, name, v, limit, v / base,
                     "%g %s is %.3g x the fleet's median %g, %s %g x (%g)", v, unit, v / base, base,
                     k ? "above" : "below", c->valuedouble, limit);
        else
            fail_add(fails, rn, dev, name, v, limit, limit != 0 ? v / limit : NAN,
                     "%g %s is %s the %s %g", v, unit, k ? "above" : "below",
                     k ? "maximum" : "minimum", limit);
    }
}

// A missing_fails rule on one GPU: every metric the baseline has for its model (all models' when
// it has none) and every one the GPU has, matching the pattern, must be there and not failed.
static void judge_missing(cJSON *fails, const cJSON *rule, const char *dev, const cJSON *baseline,
                          const cJSON *bm, const cJSON *metrics) {
    const char *rn = item(rule, "name")->valuestring, *pat = item(rule, "metric")->valuestring;
    cJSON *want = cJSON_CreateObject();  // the metric names, once each, in order
    const cJSON *m, *e;
    cJSON_ArrayForEach(m, item(baseline, "models")) {
        if (bm && m != bm) continue;
        cJSON_ArrayForEach(e, m) if (!fnmatch(pat, e->string, 0) && !item(want, e->string))
            cJSON_AddTrueToObject(want, e->string);
    }
    cJSON_ArrayForEach(e, metrics) if (!fnmatch(pat, e->string, 0) && !item(want, e->string))
        cJSON_AddTrueToObject(want, e->string);
    cJSON_ArrayForEach(e, want) {
        const cJSON *x = item(metrics, e->string);
        const char *state = x ? cJSON_GetStringValue(item(x, "state")) : "missing";
        if (!strcmp(state, "ok")) continue;
        const cJSON *v = item(x, "value");
        fail_add(fails, rn, dev, e->string, cJSON_IsNumber(v) ? v->valuedouble : NAN, NAN, NAN,
                 "%s", !strcmp(state, "failed")    ? "failed (bench check's verdict is FAIL)"
                       : !strcmp(state, "not run") ? "not run (the figure is null)"
                                                   : "missing");
    }
    cJSON_Delete(want);
}

// bench check's own verdict on one GPU: every line of it (judged again) that is a FAIL, absent or
// not run is a failure "(check)" — not a metric, so no rule could catch it, and --write-baseline
// leaves such a GPU out; so is a FAIL its status.json recorded (RECORDED, may be NULL) that the
// judging again against other expectations does not give.
static void judge_own_verdicts(cJSON *fails, const char *dev, const cJSON *g, const cJSON *recorded) {
    const cJSON *c;
    cJSON_ArrayForEach(c, item(g, "checks")) {
        const char *v = cJSON_GetStringValue(item(c, "verdict")), *n = cJSON_GetStringValue(item(c, "check"));
        if (!v || !n || (strcmp(v, CHECK_FAIL) && strcmp(v, CHECK_ABSENT) && strcmp(v, CHECK_NOT_RUN)))
            continue;
        const char *code = cJSON_GetStringValue(item(c, "code")), *note = cJSON_GetStringValue(item(c, "note"));
        const cJSON *m = item(c, "measured");
        fail_add(fails, "(check)", dev, n, cJSON_IsNumber(m) ? m->valuedouble : NAN, NAN, NAN,
                 "bench check's verdict %s%s%s%s%s%.300s", v, code ? " " : "", code ? code : "",
                 strcmp(v, CHECK_FAIL) ? " (incomplete)" : "", note && note[0] ? ": " : "",
                 note ? note : "");
    }
    cJSON_ArrayForEach(c, item(recorded, "checks")) {
        const char *v = cJSON_GetStringValue(item(c, "verdict")), *n = cJSON_GetStringValue(item(c, "check"));
        const char *now = n ? line_verdict(g, n) : NULL;
        if (!v || !n || strcmp(v, CHECK_FAIL) || (now && !strcmp(now, CHECK_FAIL))) continue;
        const char *code = cJSON_GetStringValue(item(c, "code"));
        fail_add(fails, "(check)", dev, n, NAN, NAN, NAN,
                 "bench check's verdict FAIL%s%s as recorded by the run (judged again: %s)",
                 code ? " " : "", code ? code : "", now ? now : "no such line");
    }
}

cJSON *check_rules_judge_node(const char *node, const cJSON *judged, const cJSON *recorded,
                              bool emulated, const char *run_problem, const cJSON *baseline,
                              const cJSON *rules) {
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "node", node);
    cJSON *fails = cJSON_CreateArray();
    int ngpu = 0;
    const cJSON *g;
    if (emulated)
        fail_add(fails, "(emulated)", NULL, NULL, NAN, NAN, NAN,
                 "a run on the emulated device: its figures are not a GPU's");
    if (run_problem)
        fail_add(fails, "(run)", NULL, NULL, NAN, NAN, NAN, "%s", run_problem);
    const cJSON *rg = item(recorded, "gpus") ? item(recorded, "gpus")->child : NULL;
    cJSON_ArrayForEach(g, item(judged, "gpus")) {
        ngpu++;
        const cJSON *rec = rg;
        rg = rg ? rg->next : NULL;
        const char *dev = cJSON_GetStringValue(item(g, "device"));
        const char *model = model_key(g);
        const cJSON *bm = baseline_model(baseline, model);
        cJSON *metrics = check_gpu_metrics(g);
        const cJSON *r;
        cJSON_ArrayForEach(r, item(rules, "rules")) {
            const char *pat = item(r, "metric")->valuestring;
            if (cJSON_IsTrue(item(r, "missing_fails"))) {
                judge_missing(fails, r, dev, baseline, bm, metrics);
                continue;
            }
            const cJSON *m;
            cJSON_ArrayForEach(m, metrics) {
                const cJSON *v = item(m, "value");
                if (fnmatch(pat, m->string, 0) != 0 || !cJSON_IsNumber(v)) continue;
                judge_limits(fails, r, dev, model, bm, m->string, v->valuedouble,
                             cJSON_GetStringValue(item(m, "unit")));
            }
        }
        cJSON_Delete(metrics);
        judge_own_verdicts(fails, dev, g, rec);
    }
    if (!ngpu)
        fail_add(fails, "(no GPU)", NULL, NULL, NAN, NAN, NAN,
                 "the results hold no GPU: nothing to accept");
    cJSON_AddStringToObject(row, "verdict", cJSON_GetArraySize(fails) ? "rejected" : "accepted");
    cJSON_AddNumberToObject(row, "gpus", ngpu);
    cJSON_AddItemToObject(row, "failures", fails);
    return row;
}

cJSON *check_rules_judge_runs(const cJSON *expect, const cJSON *baseline, const cJSON *rules,
                              char **args, int nargs, char *err, size_t len) {
    cJSON *rows = cJSON_CreateArray();
    for (int a = 0; a < nargs; a++) {
        char dir[4096];
        check_run_dir r;
        if (!run_dir_of(args[a], dir, sizeof dir, err, len) ||
            !check_run_read(expect, dir, &r, err, len)) {
            cJSON_Delete(rows);
            return NULL;
        }
        // an emulated run is said once, as such; other reasons a run is not whole reject it
        cJSON *row = check_rules_judge_node(node_name(&r, args[a]), r.judged,
                                            item(r.status, "check"), r.emulated,
                                            r.emulated ? NULL : r.skip, baseline, rules);
        cJSON_AddStringToObject(row, "results", args[a]);
        cJSON_AddItemToArray(rows, row);
        check_run_dir_free(&r);
    }
    return rows;
}

/* case.c — loads a case file (docs/CASE_FORMAT.md), reads its attrs, runs it on a device through
 * the op table, and compares actual with expected element by element within the bounds of
 * bounds.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"
#include "bounds.h"
#include "core/tensor_impl.h"

// ---- attrs ------------------------------------------------------------------------------------

static const cJSON *attr_get(const tdm_case *c, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->attrs, name);
    return cJSON_IsNull(v) ? NULL : v;
}

bool tdm_attr_present(const tdm_case *c, const char *name) { return attr_get(c, name) != NULL; }

static tdm_status attr_bad(const tdm_case *c, const char *name, const char *want) {
    return tdm_error_set(TDM_ERR_FORMAT, "%s: attr '%s' must be %s", c->op, name, want);
}

static bool is_integer_dtype(tdm_dtype dt) { return dt == TDM_DTYPE_I32 || dt == TDM_DTYPE_I64; }

static bool is_int(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
           fabs(v->valuedouble) < 9.0e15;
}

tdm_status tdm_attr_int(const tdm_case *c, const char *name, int64_t def, int64_t *out) {
    const cJSON *v = attr_get(c, name);
    if (!v) { *out = def; return TDM_OK; }
    if (cJSON_IsBool(v)) { *out = cJSON_IsTrue(v); return TDM_OK; }
    if (!is_int(v)) return attr_bad(c, name, "an integer");
    *out = (int64_t)v->valuedouble;
    return TDM_OK;
}

tdm_status tdm_attr_double(const tdm_case *c, const char *name, double def, double *out) {
    const cJSON *v = attr_get(c, name);
    if (!v) { *out = def; return TDM_OK; }
    if (!cJSON_IsNumber(v)) return attr_bad(c, name, "a number");
    *out = v->valuedouble;
    return TDM_OK;
}

tdm_status tdm_attr_bool(const tdm_case *c, const char *name, bool def, bool *out) {
    const cJSON *v = attr_get(c, name);
    if (!v) { *out = def; return TDM_OK; }
    if (cJSON_IsBool(v)) { *out = cJSON_IsTrue(v); return TDM_OK; }
    if (is_int(v) && (v->valuedouble == 0 || v->valuedouble == 1)) {
        *out = v->valuedouble != 0;
        return TDM_OK;
    }
    return attr_bad(c, name, "true or false");
}

tdm_status tdm_attr_string(const tdm_case *c, const char *name, const char *def, char *out) {
    const cJSON *v = attr_get(c, name);
    const char *s = def;
    if (v) {
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= 64) return attr_bad(c, name, "a short string");
        s = v->valuestring;
    }
    snprintf(out, 64, "%s", s ? s : "");
    return TDM_OK;
}

tdm_status tdm_attr_int_list(const tdm_case *c, const char *name, int cap, int *out, int *n) {
    const cJSON *v = attr_get(c, name);
    *n = 0;
    if (!v) return TDM_OK;
    // Every entry, a single int too, is range-checked before the conversion to int: 5000000000
    // would be undefined behaviour (and came out as -2147483648).
    if (is_int(v)) {
        if (cap < 1) return attr_bad(c, name, "a shorter list");
        if (fabs(v->valuedouble) > 1e9) return attr_bad(c, name, "an integer of at most 1e9 in size");
        out[(*n)++] = (int)v->valuedouble;
        return TDM_OK;
    }
    if (!cJSON_IsArray(v)) return attr_bad(c, name, "an integer or a list of integers");
    if (cJSON_GetArraySize(v) > cap) return attr_bad(c, name, "a shorter list");
    for (const cJSON *e = v->child; e; e = e->next) {
        if (!is_int(e) || fabs(e->valuedouble) > 1e9)
            return attr_bad(c, name, "a list of integers of at most 1e9 in size");
        out[(*n)++] = (int)e->valuedouble;
    }
    return TDM_OK;
}

tdm_status tdm_attr_pair(const tdm_case *c, const char *name, const int def[2], int out[2]) {
    int v[2], n;
    TDM_TRY(tdm_attr_int_list(c, name, 2, v, &n));
    if (n == 0) { out[0] = def[0]; out[1] = def[1]; }
    else if (n == 1) { out[0] = out[1] = v[0]; }
    else { out[0] = v[0]; out[1] = v[1]; }
    return TDM_OK;
}

// ---- the op table -----------------------------------------------------------------------------

const tdm_case_op *tdm_case_op_find(const char *op) {
    const tdm_case_op *groups[] = {tdm_case_ops_linalg, tdm_case_ops_pointwise, tdm_case_ops_misc,
                                   tdm_case_ops_attention, tdm_case_ops_view};
    for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
        for (const tdm_case_op *e = groups[g]; e->op; e++)
            if (!strcmp(e->op, op)) return e;
    tdm_error_set(TDM_ERR_FORMAT, "unknown op '%s'", op);
    return NULL;
}

static bool attr_accepted(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

// ---- loading ----------------------------------------------------------------------------------

tdm_status tdm_case_check_intermediate(const tdm_case *c, const char *what, int ndim,
                                       const int64_t *shape) {
    int64_t n = 1;
    bool over = false;
    for (int d = 0; d < ndim; d++) over = over || __builtin_mul_overflow(n, shape[d], &n);
    if (!over && n <= TDM_CASE_MAX_INTERMEDIATE) return TDM_OK;
    char b[200];
    tdm_shape_str(ndim, shape, b, sizeof b);
    return tdm_error_set(TDM_ERR_FORMAT,
                         "%s: %s: its %s %s (no tensor of the case holds them) are %s%.4g "
                         "elements, over a case's limit of %lld (2^24; docs/CASE_FORMAT.md)",
                         c->path, c->op, what, b, over ? "over " : "",
                         over ? 9.2e18 : (double)n, (long long)TDM_CASE_MAX_INTERMEDIATE);
}

// "input.3" -> (&c->input, 3); false for names outside the format.
static bool case_slot(tdm_case *c, const char *name, tdm_tensor ***slot) {
    static const char *kinds[] = {"input.", "grad_output.", "output.", "grad_input."};
    tdm_tensor **arrays[] = {c->input, c->grad_output, c->output, c->grad_input};
    for (int k = 0; k < 4; k++) {
        size_t n = strlen(kinds[k]);
        if (strncmp(name, kinds[k], n) || name[n] < '0' || name[n] > '7' || name[n + 1]) continue;
        *slot = &arrays[k][name[n] - '0'];
        return true;
    }
    return false;
}

void tdm_case_free(tdm_case *c) {
    if (!c) return;
    for (int i = 0; i < TDM_CASE_MAX; i++) {
        tdm_tensor_free(c->input[i]);
        tdm_tensor_free(c->grad_output[i]);
        tdm_tensor_free(c->output[i]);
        tdm_tensor_free(c->grad_input[i]);
    }
    cJSON_Delete(c->attrs);
    free(c);
}

static tdm_case *case_fail(tdm_case *c, tdm_safetensors *st) {
    tdm_safetensors_close(st);
    tdm_case_free(c);
    return NULL;
}

tdm_case *tdm_case_load(const char *path) {
    tdm_safetensors *st = tdm_safetensors_open(path);
    if (!st) return NULL;
    tdm_case *c = calloc(1, sizeof *c);
    if (!c) {
        tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
        return case_fail(c, st);
    }
    snprintf(c->path, sizeof c->path, "%s", path);
    const char *fmt = tdm_safetensors_metadata(st, "format");
    const char *op = tdm_safetensors_metadata(st, "op");
    const char *attrs = tdm_safetensors_metadata(st, "attrs");
    if (!fmt || strcmp(fmt, "tandem-case/1")) {
        tdm_error_set(TDM_ERR_FORMAT, "%s: not a tandem case (__metadata__.format is %s%s%s, "
                      "expected \"tandem-case/1\")", path, fmt ? "\"" : "", fmt ? fmt : "absent",
                      fmt ? "\"" : "");
        return case_fail(c, st);
    }
    if (!op || strlen(op) >= sizeof c->op) {
        tdm_error_set(TDM_ERR_FORMAT, "%s: __metadata__.op is missing", path);
        return case_fail(c, st);
    }
    snprintf(c->op, sizeof c->op, "%s", op);
    const tdm_case_op *entry = tdm_case_op_find(op);
    if (!entry) {
        tdm_error_set(TDM_ERR_FORMAT, "%s: unknown op '%s'", path, op);
        return case_fail(c, st);
    }
    c->attrs = attrs ? cJSON_Parse(attrs) : cJSON_CreateObject();
    if (!cJSON_IsObject(c->attrs)) {
        tdm_error_set(TDM_ERR_FORMAT, "%s: __metadata__.attrs is not a JSON object", path);
        return case_fail(c, st);
    }
    for (const cJSON *a = c->attrs->child; a; a = a->next) {
        // An attr PyTorch's call has but tandem does not use is fine as None (null); any other
        // value would change the result, so it is an error, never ignored.
        if (!attr_accepted(entry->attrs, a->string) && !cJSON_IsNull(a)) {
            tdm_error_set(TDM_ERR_FORMAT, "%s: op %s has no attr '%s' (it takes: %s)", path, op,
                          a->string, entry->attrs[0] ? entry->attrs : "none");
            return case_fail(c, st);
        }
    }
    for (int i = 0; i < tdm_safetensors_count(st); i++) {
        const char *name = tdm_safetensors_name(st, i);
        tdm_tensor **slot;
        if (!case_slot(c, name, &slot)) {
            tdm_error_set(TDM_ERR_FORMAT, "%s: unexpected tensor '%s' (expected input.K, "
                          "grad_output.K, output.K, grad_input.K with K < %d)", path, name,
                          TDM_CASE_MAX);
            return case_fail(c, st);
        }
        if (*slot) {
            tdm_error_set(TDM_ERR_FORMAT, "%s: tensor '%s' appears twice", path, name);
            return case_fail(c, st);
        }
        if (!(*slot = tdm_safetensors_get(st, name, TDM_CPU))) return case_fail(c, st);
    }
    tdm_safetensors_close(st);
    // The case's dtype: its first floating input's; f32 (PyTorch's default dtype) for a case
    // of integer inputs only (an integer tensor with a number: add, mul, div, ...).
    c->dtype = TDM_DTYPE_COUNT;
    bool integer_input = false;
    for (int i = 0; i < TDM_CASE_MAX && c->dtype == TDM_DTYPE_COUNT; i++) {
        if (c->input[i] && tdm_dtype_is_float(tdm_tensor_dtype(c->input[i])))
            c->dtype = tdm_tensor_dtype(c->input[i]);
        integer_input |= c->input[i] && is_integer_dtype(tdm_tensor_dtype(c->input[i]));
    }
    if (c->dtype == TDM_DTYPE_COUNT && integer_input) c->dtype = TDM_DTYPE_F32;
    static const struct {
        const char *op;
        tdm_status (*rule)(const tdm_case *c);
    } size_rules[] = {{"scaled_dot_product_attention", tdm_case_size_sdpa},
                      {"linear_gelu_linear", tdm_case_size_linear_gelu_linear}};
    for (size_t i = 0; i < sizeof size_rules / sizeof *size_rules; i++)
        if (!strcmp(size_rules[i].op, c->op) && size_rules[i].rule(c) != TDM_OK)
            return case_fail(c, NULL);
    if (c->dtype == TDM_DTYPE_COUNT || !c->output[0]) {
        tdm_error_set(TDM_ERR_FORMAT, "%s: a case needs a floating input and output.0 (or an "
                      "integer input: an integer tensor with a number)", path);
        return case_fail(c, NULL);
    }
    for (int i = 0; i < TDM_CASE_MAX; i++) {
        if (c->grad_input[i] && !c->grad_output[0]) {
            tdm_error_set(TDM_ERR_FORMAT, "%s: grad_input.%d without grad_output.0", path, i);
            return case_fail(c, NULL);
        }
        // an output may also be an integer result (i32/i64: matched exactly, in its dtype)
        tdm_tensor *e[] = {c->output[i], c->grad_input[i]};
        for (int k = 0; k < 2; k++) {
            tdm_dtype dt = e[k] ? tdm_tensor_dtype(e[k]) : TDM_DTYPE_F64;
            if (!tdm_dtype_is_float(dt) && (k || !is_integer_dtype(dt))) {
                tdm_error_set(TDM_ERR_FORMAT, "%s: expected %s.%d must be floating%s", path,
                              k ? "grad_input" : "output", i, k ? "" : " or i32/i64");
                return case_fail(c, NULL);
            }
        }
    }
    return c;
}

// ---- running ----------------------------------------------------------------------------------

void tdm_case_result_free(tdm_case_result *r) {
    for (int i = 0; i < TDM_CASE_MAX; i++) {
        tdm_tensor_free(r->output[i]);
        tdm_tensor_free(r->grad_input[i]);
        r->output[i] = r->grad_input[i] = NULL;
    }
}

tdm_status tdm_case_run(const tdm_case *c, tdm_device dev, tdm_case_result *r) {
    memset(r, 0, sizeof *r);
    const tdm_case_op *entry = tdm_case_op_find(c->op);
    if (!entry) return tdm_last_status();
    tdm_tensor *in[TDM_CASE_MAX] = {0}, *gy = NULL;
    tdm_status s = TDM_OK;
    for (int i = 0; i < TDM_CASE_MAX && s == TDM_OK; i++) {
        if (c->input[i] && !(in[i] = tdm_tensor_to(c->input[i], dev, tdm_tensor_dtype(c->input[i]))))
            s = tdm_last_status();
    }
    if (s == TDM_OK && c->grad_output[0] &&
        !(gy = tdm_tensor_to(c->grad_output[0], dev, tdm_tensor_dtype(c->grad_output[0]))))
        s = tdm_last_status();
    if (s == TDM_OK) s = entry->run(c, in, gy, r);
    for (int i = 0; i < TDM_CASE_MAX; i++) tdm_tensor_free(in[i]);
    tdm_tensor_free(gy);
    if (s != TDM_OK) tdm_case_result_free(r);
    return s;
}

// ---- comparing ---------------------------------------------------------------------------------

static bool same_shape(const tdm_tensor *a, const tdm_tensor *b) {
    if (tdm_tensor_ndim(a) != tdm_tensor_ndim(b)) return false;
    for (int d = 0; d < tdm_tensor_ndim(a); d++)
        if (tdm_tensor_shape(a)[d] != tdm_tensor_shape(b)[d]) return false;
    return true;
}

// An integer result: every element equal, compared as int64 (doubles would merge neighbours past
// 2^53); the worst element is the first that differs.
static tdm_status compare_integers(const tdm_tensor *exp, const tdm_tensor *act,
                                   tdm_case_check *chk) {
    tdm_tensor *e = tdm_tensor_to(exp, TDM_CPU, TDM_DTYPE_I64);
    tdm_tensor *a = e ? tdm_tensor_to(act, TDM_CPU, TDM_DTYPE_I64) : NULL;
    tdm_status s = a ? TDM_OK : tdm_last_status();
    const int64_t *ev = e ? tdm_tensor_data(e) : NULL, *av = a ? tdm_tensor_data(a) : NULL;
    for (int64_t i = 0; s == TDM_OK && i < tdm_tensor_numel(exp); i++) {
        if (av[i] == ev[i] && chk->worst_index >= 0) continue;
        if (av[i] != ev[i]) chk->n_fail++;
        if (chk->worst_index < 0 || (av[i] != ev[i] && chk->n_fail == 1)) {
            chk->worst_index = i;
            chk->actual = (double)av[i];
            chk->expected = (double)ev[i];
            chk->ratio = av[i] == ev[i] ? 0.0 : INFINITY;
        }
    }
    tdm_tensor_free(e);
    tdm_tensor_free(a);
    return s;
}

static tdm_status compare_one(const tdm_case *c, const tdm_case_result *r, bool grad, int k,
                              tdm_device dev, tdm_case_check *chk) {
    const tdm_tensor *exp = grad ? c->grad_input[k] : c->output[k];
    const tdm_tensor *act = grad ? r->grad_input[k] : r->output[k];
    memset(chk, 0, sizeof *chk);
    snprintf(chk->name, sizeof chk->name, "%s.%d", grad ? "grad_input" : "output", k);
    chk->worst_index = -1;
    if (!act || !same_shape(act, exp)) {
        char as[96], es[96];
        chk->missing = true;
        chk->n_fail = 1;
        tdm_shape_str(tdm_tensor_ndim(exp), tdm_tensor_shape(exp), es, sizeof es);
        if (!act)
            snprintf(chk->why, sizeof chk->why, "the op did not produce it, the case expects shape %s",
                     es);
        else
            snprintf(chk->why, sizeof chk->why, "the op gave shape %s, the case expects %s",
                     tdm_shape_str(tdm_tensor_ndim(act), tdm_tensor_shape(act), as, sizeof as), es);
        return TDM_OK;
    }
    // An integer expectation is an integer result in that dtype; a floating one a floating result.
    const tdm_dtype adt = tdm_tensor_dtype(act), edt = tdm_tensor_dtype(exp);
    if (is_integer_dtype(edt) ? adt != edt : !tdm_dtype_is_float(adt)) {
        chk->missing = true;
        chk->n_fail = 1;
        snprintf(chk->why, sizeof chk->why, "the op gave dtype %s, the case expects %s",
                 tdm_dtype_name(adt), is_integer_dtype(edt) ? tdm_dtype_name(edt) : "a floating one");
        return TDM_OK;
    }
    if (is_integer_dtype(edt)) return compare_integers(exp, act, chk);
    // Three doubles per element of a tensor the file holds (or an empty one): within the cap,
    // but checked, as every allocation a case file decides.
    int64_t n = tdm_tensor_numel(exp);
    if (tdm_alloc_check("compare", 3 * (n ? n : 1), sizeof(double), true) != TDM_OK)
        return tdm_last_status();
    double *e = malloc((size_t)(n ? n : 1) * sizeof *e), *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    double *bound = malloc((size_t)(n ? n : 1) * sizeof *bound);
    tdm_status s = (e && a && bound) ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "compare: out of memory");
    if (s == TDM_OK) s = tdm_tensor_to_host_f64(exp, e);
    if (s == TDM_OK) s = tdm_tensor_to_host_f64(act, a);
    if (s == TDM_OK) s = tdm_case_bounds(c, grad, k, dev, bound);
    for (int64_t i = 0; s == TDM_OK && i < n; i++) {
        double ratio;
        if (isnan(e[i]) || isinf(e[i]) || !isfinite(a[i]))
            ratio = (isnan(e[i]) && isnan(a[i])) || (e[i] == a[i]) ? 0.0 : INFINITY;
        else if (bound[i] > 0)
            ratio = fabs(a[i] - e[i]) / bound[i];
        else
            ratio = a[i] == e[i] ? 0.0 : INFINITY;
        if (ratio > 1.0) chk->n_fail++;
        if (chk->worst_index < 0 || ratio > chk->ratio) {
            chk->worst_index = i;
            chk->ratio = ratio;
            chk->actual = a[i];
            chk->expected = e[i];
            chk->bound = bound[i];
        }
    }
    free(e);
    free(a);
    free(bound);
    return s;
}

tdm_status tdm_case_compare(const tdm_case *c, const tdm_case_result *r, tdm_device dev,
                            tdm_case_report *rep) {
    memset(rep, 0, sizeof *rep);
    rep->pass = true;
    for (int grad = 0; grad < 2; grad++) {
        for (int k = 0; k < TDM_CASE_MAX; k++) {
            if (!(grad ? c->grad_input[k] : c->output[k])) continue;
            tdm_case_check *chk = &rep->check[rep->n++];
            TDM_TRY(compare_one(c, r, grad, k, dev, chk));
            if (chk->n_fail) rep->pass = false;
            if (chk->ratio > rep->worst_ratio) rep->worst_ratio = chk->ratio;
        }
    }
    return TDM_OK;
}

const tdm_case_check *tdm_case_report_worst(const tdm_case_report *rep) {
    const tdm_case_check *w = &rep->check[0];
    for (int k = 1; k < rep->n; k++) {
        const tdm_case_check *ck = &rep->check[k];
        if (ck->missing ? !w->missing : !w->missing && ck->ratio > w->ratio) w = ck;
    }
    return w;
}

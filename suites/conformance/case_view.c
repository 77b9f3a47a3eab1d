/* case_view.c — runs the conformance cases of the views and joins (view, reshape, transpose,
 * narrow, split, chunk, cat, stack) and of a tensor with a number (add, sub, rsub, mul, div,
 * rdiv with `other` a number) — docs/CASE_FORMAT.md. The views have no backward function of
 * their own in the API: their cases run backward through autograd (the inputs as leaves,
 * tdm_backward from output.0 with grad_output.0), which is what a model uses.
 *
 * Every run function builds its results in locals and moves them into r only when all succeeded,
 * so a failure leaves r untouched and nothing leaks. */
#include <math.h>
#include <string.h>

#include "case.h"
#include "core/tensor_impl.h"  // tdm_error_set, TDM_TRY

static tdm_status bad_attr(const tdm_case *c, const char *attr, const char *why) {
    return tdm_error_set(TDM_ERR_FORMAT, "%s: attr %s: %s", c->op, attr, why);
}

// A required integer attr that is a dim (|dim| <= 64: the ops report their own range).
static tdm_status dim_attr(const tdm_case *c, const char *name, bool required, int64_t def,
                           int *out) {
    int64_t v = 0;
    if (required && !tdm_attr_present(c, name)) return bad_attr(c, name, "required");
    TDM_TRY(tdm_attr_int(c, name, def, &v));
    if (v < -64 || v > 64) return bad_attr(c, name, "out of range");
    *out = (int)v;
    return TDM_OK;
}

// ---- through autograd ---------------------------------------------------------------------------

// The op on x[0..n) (present inputs, in order): its outputs into out (at most TDM_CASE_MAX).
typedef tdm_status (*view_fn)(const tdm_case *c, tdm_tensor *const *x, int n, tdm_tensor **out,
                              int *n_out);

// Runs fn on leaves made from the inputs (floating ones require grad when the case has
// grad_output.0), then backward from output.0; every output and input gradient goes into r.
static tdm_status run_autograd(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                               tdm_case_result *r, view_fn fn) {
    tdm_tensor *x[TDM_CASE_MAX] = {0}, *out[TDM_CASE_MAX] = {0}, *g = NULL;
    int n = 0, n_out = 0;
    while (n < TDM_CASE_MAX && in[n]) n++;
    for (int i = n; i < TDM_CASE_MAX; i++)
        if (in[i])
            return tdm_error_set(TDM_ERR_FORMAT, "%s: input.%d without input.%d", c->op, i, n);
    if (n == 0) return tdm_error_set(TDM_ERR_FORMAT, "%s: input.0 missing", c->op);
    tdm_status s = TDM_OK;
    for (int i = 0; i < n && s == TDM_OK; i++) {
        if (!(x[i] = tdm_tensor_detach(in[i])))
            s = tdm_last_status();
        else if (go && tdm_dtype_is_float(tdm_tensor_dtype(x[i])))
            tdm_tensor_set_requires_grad(x[i], true);
    }
    bool grad = tdm_grad_set_enabled(go != NULL);
    if (s == TDM_OK) s = fn(c, x, n, out, &n_out);
    tdm_grad_set_enabled(grad);
    if (s == TDM_OK && go) {
        // grad_output.0 is stored in the case's dtype; a promoted output (cat of f16 and f32)
        // takes it in its own (exactly: a widening)
        const tdm_tensor *gy = go;
        if (tdm_tensor_dtype(go) != tdm_tensor_dtype(out[0]))
            gy = g = tdm_tensor_to(go, tdm_tensor_device(go), tdm_tensor_dtype(out[0]));
        s = gy ? tdm_backward(out[0], gy) : tdm_last_status();
    }
    if (s == TDM_OK) {
        for (int k = 0; k < n_out; k++) r->output[k] = tdm_tensor_detach(out[k]);
        for (int i = 0; go && i < n; i++)
            if (tdm_tensor_grad(x[i])) r->grad_input[i] = tdm_tensor_retain(tdm_tensor_grad(x[i]));
    }
    for (int k = 0; k < TDM_CASE_MAX; k++) {
        tdm_tensor_free(out[k]);
        tdm_tensor_free(x[k]);
    }
    tdm_tensor_free(g);
    return s;
}

// view (size) and reshape (shape): a list of at most 6 ints, one may be -1
static tdm_status fn_view(const tdm_case *c, tdm_tensor *const *x, int n, tdm_tensor **out,
                          int *n_out) {
    (void)n;
    // PyTorch's names (Tensor.view(size), torch.reshape(input, shape)); either is taken
    const char *name = !strcmp(c->op, "view") ? "size" : "shape";
    if (!tdm_attr_present(c, name)) name = !strcmp(name, "size") ? "shape" : "size";
    int v[TDM_MAX_DIMS], nd = 0;
    int64_t shape[TDM_MAX_DIMS];
    if (tdm_attr_present(c, "size") && tdm_attr_present(c, "shape"))
        return bad_attr(c, name, "size and shape both given");
    if (!tdm_attr_present(c, name)) return bad_attr(c, name, "required");
    TDM_TRY(tdm_attr_int_list(c, name, TDM_MAX_DIMS, v, &nd));
    for (int d = 0; d < nd; d++) shape[d] = v[d];
    *n_out = 1;
    return (out[0] = tdm_tensor_view(x[0], nd, shape)) ? TDM_OK : tdm_last_status();
}

// transpose: dim0, dim1 (required)
static tdm_status fn_transpose(const tdm_case *c, tdm_tensor *const *x, int n, tdm_tensor **out,
                               int *n_out) {
    (void)n;
    int d0 = 0, d1 = 0;
    TDM_TRY(dim_attr(c, "dim0", true, 0, &d0));
    TDM_TRY(dim_attr(c, "dim1", true, 0, &d1));
    *n_out = 1;
    return (out[0] = tdm_tensor_transpose(x[0], d0, d1)) ? TDM_OK : tdm_last_status();
}

// narrow: dim, start, length (required)
static tdm_status fn_narrow(const tdm_case *c, tdm_tensor *const *x, int n, tdm_tensor **out,
                            int *n_out) {
    (void)n;
    int dim = 0;
    int64_t start = 0, length = 0;
    TDM_TRY(dim_attr(c, "dim", true, 0, &dim));
    if (!tdm_attr_present(c, "start") || !tdm_attr_present(c, "length"))
        return bad_attr(c, "start/length", "required");
    TDM_TRY(tdm_attr_int(c, "start", 0, &start));
    TDM_TRY(tdm_attr_int(c, "length", 0, &length));
    *n_out = 1;
    return (out[0] = tdm_tensor_narrow(x[0], dim, start, length)) ? TDM_OK : tdm_last_status();
}

// A list of sections (torch.split with a list: split_with_sizes): narrows at running offsets,
// the sizes summing to the dim's.
static tdm_status split_sections(const tdm_case *c, const tdm_tensor *x, int dim, tdm_tensor **out,
                                 int *n_out) {
    int v[TDM_CASE_MAX], n = 0;
    TDM_TRY(tdm_attr_int_list(c, "split_size_or_sections", TDM_CASE_MAX, v, &n));
    int d = 0;
    int64_t sum = 0;
    TDM_TRY(tdm_wrap_dim("split", dim, tdm_tensor_ndim(x), &d));
    for (int i = 0; i < n; i++) sum += v[i] < 0 ? 0 : v[i];
    for (int i = 0; i < n; i++)
        if (v[i] < 0 || sum != tdm_tensor_shape(x)[d])
            return tdm_error_set(TDM_ERR_ARG,
                                 "split_with_sizes expects split_sizes to sum "
                                 "exactly to %lld (input tensor's size at dimension %d), with "
                                 "no negative size",
                                 (long long)tdm_tensor_shape(x)[d], dim);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (!(out[i] = tdm_tensor_narrow(x, dim, at, v[i]))) return tdm_last_status();
        at += v[i];
        *n_out = i + 1;  // run_autograd frees what is made
    }
    return TDM_OK;
}

// split: split_size_or_sections (an int, or a list of sections), dim 0; chunk: chunks, dim 0.
// The pieces are output.0 .. (at most TDM_CASE_MAX).
static tdm_status fn_split(const tdm_case *c, tdm_tensor *const *x, int n, tdm_tensor **out,
                           int *n_out) {
    (void)n;
    const bool chunk = !strcmp(c->op, "chunk");
    const char *name = chunk ? "chunks" : "split_size_or_sections";
    int dim = 0;
    int64_t v = 0;
    if (!tdm_attr_present(c, name)) return bad_attr(c, name, "required");
    TDM_TRY(dim_attr(c, "dim", false, 0, &dim));
    if (!chunk && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(c->attrs, name)))
        return split_sections(c, x[0], dim, out, n_out);
    TDM_TRY(tdm_attr_int(c, name, 0, &v));
    if (chunk && (v < -1 || v > 1000000)) return bad_attr(c, name, "out of range");
    int k = chunk ? tdm_tensor_chunk(x[0], (int)v, dim, out, TDM_CASE_MAX)
                  : tdm_tensor_split(x[0], v, dim, out, TDM_CASE_MAX);
    if (k < 0) return tdm_last_status();
    *n_out = k;
    return TDM_OK;
}

// cat, stack: the inputs in order (torch.cat's list), dim 0
static tdm_status fn_cat(const tdm_case *c, tdm_tensor *const *x, int n, tdm_tensor **out,
                         int *n_out) {
    int dim = 0;
    TDM_TRY(dim_attr(c, "dim", false, 0, &dim));
    *n_out = 1;
    out[0] = !strcmp(c->op, "stack") ? tdm_stack(x, n, dim) : tdm_cat(x, n, dim);
    return out[0] ? TDM_OK : tdm_last_status();
}

#define RUNNER(name, fn)                                                                   \
    static tdm_status name(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go, \
                           tdm_case_result *r) {                                           \
        return run_autograd(c, in, go, r, fn);                                             \
    }
RUNNER(run_view, fn_view)
RUNNER(run_transpose, fn_transpose)
RUNNER(run_narrow, fn_narrow)
RUNNER(run_split, fn_split)
RUNNER(run_cat, fn_cat)

// ---- a tensor and a number ----------------------------------------------------------------------

// op `other` (required, a number); alpha (add, sub) 1 only; div's rounding_mode null only. The
// number is a Python int (tdm_binary_scalar_int) where PyTorch's result kept an integer input's
// dtype (output.0 stored as that integer dtype), else a Python float — the same values for a
// floating input. The result's dtype is checked against PyTorch's promotion.
tdm_status tdm_case_run_scalar(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                               tdm_case_result *r) {
    static const struct {
        const char *name;
        tdm_scalar_op op;
    } ops[] = {{"add", TDM_SCALAR_ADD}, {"sub", TDM_SCALAR_SUB}, {"rsub", TDM_SCALAR_RSUB},
               {"mul", TDM_SCALAR_MUL}, {"div", TDM_SCALAR_DIV}, {"rdiv", TDM_SCALAR_RDIV}};
    int k = 0;
    while (k < 6 && strcmp(ops[k].name, c->op)) k++;
    if (k == 6) return tdm_error_set(TDM_ERR_FORMAT, "%s: not an op with a number", c->op);
    double other = 0, alpha = 1;
    if (!tdm_attr_present(c, "other")) return bad_attr(c, "other", "required (a number)");
    TDM_TRY(tdm_attr_double(c, "other", 0.0, &other));
    TDM_TRY(tdm_attr_double(c, "alpha", 1.0, &alpha));
    if (alpha != 1.0) return bad_attr(c, "alpha", "must be 1 with a number other");
    if (tdm_attr_present(c, "rounding_mode"))
        return bad_attr(c, "rounding_mode", "only true division (null) is supported");
    if (!in[0] || in[1])
        return tdm_error_set(TDM_ERR_FORMAT, "%s: with a number other the case has input.0 only",
                             c->op);
    const tdm_dtype in_dt = tdm_tensor_dtype(in[0]);
    const tdm_dtype out_dt = c->output[0] ? tdm_tensor_dtype(c->output[0]) : TDM_DTYPE_F64;
    const bool int_out = out_dt == TDM_DTYPE_I32 || out_dt == TDM_DTYPE_I64;
    const bool int_number = int_out && other == floor(other) && fabs(other) < 9.0e15;
    if (int_out && !int_number) return bad_attr(c, "other", "an integer result needs an integer");
    tdm_tensor *y = int_number ? tdm_binary_scalar_int(ops[k].op, in[0], (int64_t)other)
                               : tdm_binary_scalar(ops[k].op, in[0], other);
    tdm_tensor *ga = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    // PyTorch's result dtype: an integer expectation's, f32 for an integer input, else the input's
    const tdm_dtype want = int_out ? out_dt : tdm_dtype_is_float(in_dt) ? in_dt : TDM_DTYPE_F32;
    if (s == TDM_OK && c->output[0] && tdm_tensor_dtype(y) != want)
        s = tdm_error_set(TDM_ERR_DTYPE, "%s: the result has dtype %s, PyTorch's has %s", c->op,
                          tdm_dtype_name(tdm_tensor_dtype(y)), tdm_dtype_name(want));
    if (s == TDM_OK && go && tdm_dtype_is_float(in_dt))
        s = tdm_binary_scalar_backward(ops[k].op, go, in[0], other, &ga);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        return s;
    }
    r->output[0] = y;
    r->grad_input[0] = ga;
    return TDM_OK;
}

// ---- the table ----------------------------------------------------------------------------------

const tdm_case_op tdm_case_ops_view[] = {
    {"view", run_view, "size shape"},
    {"reshape", run_view, "shape size"},
    {"transpose", run_transpose, "dim0 dim1"},
    {"narrow", run_narrow, "dim start length"},
    {"split", run_split, "split_size_or_sections dim"},
    {"chunk", run_split, "chunks dim"},
    {"cat", run_cat, "dim"},
    {"stack", run_cat, "dim"},
    {"sub", tdm_case_run_scalar, "other alpha"},
    {"rsub", tdm_case_run_scalar, "other alpha"},
    {"div", tdm_case_run_scalar, "other rounding_mode"},
    {"rdiv", tdm_case_run_scalar, "other"},
    {NULL, NULL, NULL},
};

/* case_linalg.c — the conformance case entries of linear, matmul, linear_gelu_linear, conv2d,
 * max_pool2d and avg_pool2d: attrs parsed with PyTorch's defaults (docs/CASE_FORMAT.md), the forward run, and
 * with grad_output the backward, each gradient stored at its input's position. Results go into
 * r only when every call succeeded; on failure nothing is left allocated. */
#include <string.h>
#include <limits.h>

#include "case.h"
#include "core/tensor_impl.h"   // tdm_error_set, TDM_TRY

// Gradient of input k is wanted when the input is present and floating.
static bool wants_grad(tdm_tensor *const *in, int k) {
    return in[k] && tdm_dtype_is_float(tdm_tensor_dtype(in[k]));
}

// The out-pointer for input k's gradient, or NULL when it is not wanted.
static tdm_tensor **grad_slot(tdm_tensor *const *in, int k, tdm_tensor **g) {
    return wants_grad(in, k) ? &g[k] : NULL;
}

// Moves y and the gradients g[0..n) into r on success, frees them otherwise.
static tdm_status finish(tdm_status s, tdm_tensor *y, tdm_tensor **g, int n, tdm_case_result *r) {
    if (s == TDM_OK && !y) s = tdm_last_status();
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        for (int k = 0; k < n; k++) tdm_tensor_free(g[k]);
        return s;
    }
    r->output[0] = y;
    for (int k = 0; k < n; k++) r->grad_input[k] = g[k];
    return TDM_OK;
}

// An int attr that must fit a C int (groups, divisor_override).
static tdm_status attr_c_int(const tdm_case *c, const char *name, int def, int *out) {
    int64_t v = def;
    if (tdm_attr_present(c, name)) TDM_TRY(tdm_attr_int(c, name, def, &v));
    if (v < INT_MIN || v > INT_MAX)
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr %s = %lld is out of range", c->op, name,
                             (long long)v);
    *out = (int)v;
    return TDM_OK;
}

// ----------------------------------------------------------------------------
// linear: input, weight, bias?

static tdm_status run_linear(const tdm_case *c, tdm_tensor *const *in,
                             const tdm_tensor *grad_output, tdm_case_result *r) {
    (void)c;
    tdm_tensor *g[3] = {NULL, NULL, NULL};
    tdm_tensor *y = tdm_linear(in[0], in[1], in[2]);
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && grad_output)
        s = tdm_linear_backward(grad_output, in[0], in[1], grad_slot(in, 0, g),
                                grad_slot(in, 1, g), grad_slot(in, 2, g));
    return finish(s, y, g, 3, r);
}

// ----------------------------------------------------------------------------
// linear_gelu_linear: input, fc weight, fc bias?, proj weight, proj bias?. The op has no
// backward of its own in the API: its backward runs through autograd (the inputs as leaves),
// which is what a model uses.

// The hidden activations (rows, hidden): with an input width of 0 and no output columns, no
// tensor of the case holds them.
tdm_status tdm_case_size_linear_gelu_linear(const tdm_case *c) {
    const tdm_tensor *x = c->input[0], *w1 = c->input[1];
    if (!x || !w1 || tdm_tensor_ndim(x) < 1 || tdm_tensor_ndim(w1) != 2) return TDM_OK;   // refused later
    const int64_t shape[2] = {tdm_shape_numel(tdm_tensor_ndim(x) - 1, tdm_tensor_shape(x)),
                              tdm_tensor_shape(w1)[0]};
    return tdm_case_check_intermediate(c, "hidden activations", 2, shape);
}

static tdm_status run_linear_gelu_linear(const tdm_case *c, tdm_tensor *const *in,
                                         const tdm_tensor *grad_output, tdm_case_result *r) {
    (void)c;
    tdm_tensor *x[5] = {NULL}, *g[5] = {NULL};
    tdm_status s = TDM_OK;
    for (int i = 0; i < 5 && s == TDM_OK; i++) {
        if (!in[i]) continue;
        if (!(x[i] = tdm_tensor_detach(in[i]))) s = tdm_last_status();
        else if (grad_output) tdm_tensor_set_requires_grad(x[i], true);
    }
    bool grad = tdm_grad_set_enabled(grad_output != NULL);
    tdm_tensor *y = s == TDM_OK ? tdm_linear_gelu_linear(x[0], x[1], x[2], x[3], x[4]) : NULL;
    tdm_grad_set_enabled(grad);
    if (s == TDM_OK && !y) s = tdm_last_status();
    if (s == TDM_OK && grad_output) s = tdm_backward(y, grad_output);
    for (int i = 0; i < 5 && s == TDM_OK; i++)
        if (grad_output && x[i] && tdm_tensor_grad(x[i]))
            g[i] = tdm_tensor_retain(tdm_tensor_grad(x[i]));
    tdm_tensor *out = y && s == TDM_OK ? tdm_tensor_detach(y) : NULL;
    tdm_tensor_free(y);
    for (int i = 0; i < 5; i++) tdm_tensor_free(x[i]);
    return finish(s, out, g, 5, r);
}

// ----------------------------------------------------------------------------
// matmul: input, other

static tdm_status run_matmul(const tdm_case *c, tdm_tensor *const *in,
                             const tdm_tensor *grad_output, tdm_case_result *r) {
    (void)c;
    tdm_tensor *g[2] = {NULL, NULL};
    tdm_tensor *y = tdm_matmul(in[0], in[1]);
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && grad_output)
        s = tdm_matmul_backward(grad_output, in[0], in[1], grad_slot(in, 0, g),
                                grad_slot(in, 1, g));
    return finish(s, y, g, 2, r);
}

// ----------------------------------------------------------------------------
// conv2d: input, weight, bias?; stride 1, padding 0, dilation 1, groups 1

// padding: a pair, an int, or PyTorch's strings: "valid" (none) and "same" (stride 1; the output
// keeps the input's size: d(k-1) zeros, half before, the rest after: an odd one goes after, as
// PyTorch pads it, through padding_extra).
static tdm_status conv_padding(const tdm_case *c, const tdm_tensor *w, tdm_conv2d_params *p) {
    char mode[64];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->attrs, "padding");
    if (!cJSON_IsString(v)) return tdm_attr_pair(c, "padding", (const int[2]){0, 0}, p->padding);
    if (!w || tdm_tensor_ndim(w) != 4)
        return tdm_error_set(TDM_ERR_FORMAT, "conv2d: padding='%s' needs a 4-D weight (input.1)",
                             v->valuestring);
    TDM_TRY(tdm_attr_string(c, "padding", "valid", mode));
    if (!strcmp(mode, "valid")) {
        p->padding[0] = p->padding[1] = 0;
        return TDM_OK;
    }
    if (strcmp(mode, "same"))
        return tdm_error_set(TDM_ERR_FORMAT, "conv2d: padding '%s' (expected a pair, 'valid' or 'same')", mode);
    if (p->stride[0] != 1 || p->stride[1] != 1)
        return tdm_error_set(TDM_ERR_FORMAT, "conv2d: padding='same' is not supported for strided "
                             "convolutions (as in PyTorch)");
    for (int d = 0; d < 2; d++) {
        int64_t total = (int64_t)p->dilation[d] * (tdm_tensor_shape(w)[2 + d] - 1);
        p->padding[d] = (int)(total / 2);
        p->padding_extra[d] = (int)(total % 2);
    }
    return TDM_OK;
}

// memory_format "channels_last" (torch.channels_last; default "contiguous_format"): the case's
// tensors are NCHW, as PyTorch saves them; tandem runs its NHWC layout on permuted copies
// (x (N,H,W,C) or (H,W,C), weight (O,kh,kw,C/g)) and permutes the results back to NCHW.
static tdm_tensor *relayout(const tdm_tensor *t, bool to_nhwc) {
    static const int nhwc4[4] = {0, 2, 3, 1}, nchw4[4] = {0, 3, 1, 2};
    static const int nhwc3[3] = {1, 2, 0}, nchw3[3] = {2, 0, 1};
    if (!t) return NULL;
    // The permutations are of 3 or 4 dims: any other rank is refused here (conv2d would refuse
    // it too, but the permute would first read past the permutation).
    const int nd = tdm_tensor_ndim(t);
    if (nd != 3 && nd != 4) {
        tdm_error_set(TDM_ERR_SHAPE, "conv2d: memory_format 'channels_last' takes 3-D or 4-D "
                      "tensors, got a %d-D one", nd);
        return NULL;
    }
    const bool d4 = nd == 4;
    return tdm_tensor_permute(t, to_nhwc ? (d4 ? nhwc4 : nhwc3) : (d4 ? nchw4 : nchw3));
}

// Replaces *t by its relayout (freeing the old one); NULL stays NULL.
static tdm_status relayout_in_place(tdm_tensor **t, bool to_nhwc) {
    if (!*t) return TDM_OK;
    tdm_tensor *r = relayout(*t, to_nhwc);
    tdm_tensor_free(*t);
    *t = r;
    return r ? TDM_OK : tdm_last_status();
}

static tdm_status run_conv2d(const tdm_case *c, tdm_tensor *const *in,
                             const tdm_tensor *grad_output, tdm_case_result *r) {
    tdm_conv2d_params p = TDM_CONV2D_DEFAULT;
    TDM_TRY(tdm_attr_pair(c, "stride", (const int[2]){1, 1}, p.stride));
    TDM_TRY(tdm_attr_pair(c, "dilation", (const int[2]){1, 1}, p.dilation));
    TDM_TRY(attr_c_int(c, "groups", 1, &p.groups));
    TDM_TRY(conv_padding(c, in[1], &p));
    char format[64];
    TDM_TRY(tdm_attr_string(c, "memory_format", "contiguous_format", format));
    if (strcmp(format, "contiguous_format") && strcmp(format, "channels_last"))
        return tdm_error_set(TDM_ERR_FORMAT, "conv2d: memory_format '%s' (expected "
                             "'contiguous_format' or 'channels_last')", format);
    const bool nhwc = !strcmp(format, "channels_last");

    tdm_tensor *g[3] = {NULL, NULL, NULL}, *y = NULL;
    tdm_tensor *x = NULL, *w = NULL, *gy = NULL;   // the NHWC copies
    tdm_status s = TDM_OK;
    if (nhwc) {
        p.layout = TDM_CONV_LAYOUT_NHWC;
        if (!(x = relayout(in[0], true)) || !(w = relayout(in[1], true)) ||
            (grad_output && !(gy = relayout(grad_output, true))))
            s = tdm_last_status();
    }
    if (s == TDM_OK) {
        y = tdm_conv2d(nhwc ? x : in[0], nhwc ? w : in[1], in[2], &p);
        s = y ? TDM_OK : tdm_last_status();
    }
    if (s == TDM_OK && grad_output)
        s = tdm_conv2d_backward(nhwc ? gy : grad_output, nhwc ? x : in[0], nhwc ? w : in[1], &p,
                                grad_slot(in, 0, g), grad_slot(in, 1, g), grad_slot(in, 2, g));
    if (s == TDM_OK && nhwc) s = relayout_in_place(&y, false);
    for (int k = 0; k < 2 && s == TDM_OK && nhwc; k++) s = relayout_in_place(&g[k], false);
    tdm_tensor_free(x);
    tdm_tensor_free(w);
    tdm_tensor_free(gy);
    return finish(s, y, g, 3, r);
}

// ----------------------------------------------------------------------------
// max_pool2d, avg_pool2d: input; kernel_size (required), stride (= kernel_size when absent,
// null or []), padding 0, ceil_mode false; max: dilation 1, return_indices false (must be);
// avg: count_include_pad true, divisor_override null (0 = none too).

static tdm_status pool_params(const tdm_case *c, bool avg, tdm_pool2d_params *p) {
    *p = (tdm_pool2d_params){{0, 0}, {0, 0}, {0, 0}, {1, 1}, false, true, 0};
    if (!tdm_attr_present(c, "kernel_size"))
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr kernel_size is required", c->op);
    TDM_TRY(tdm_attr_pair(c, "kernel_size", (const int[2]){1, 1}, p->kernel_size));
    TDM_TRY(tdm_attr_pair(c, "stride", p->kernel_size, p->stride));
    TDM_TRY(tdm_attr_pair(c, "padding", (const int[2]){0, 0}, p->padding));
    TDM_TRY(tdm_attr_bool(c, "ceil_mode", false, &p->ceil_mode));
    if (avg) {
        TDM_TRY(tdm_attr_bool(c, "count_include_pad", true, &p->count_include_pad));
        TDM_TRY(attr_c_int(c, "divisor_override", 0, &p->divisor_override));
    } else {
        TDM_TRY(tdm_attr_pair(c, "dilation", (const int[2]){1, 1}, p->dilation));
        bool return_indices;
        TDM_TRY(tdm_attr_bool(c, "return_indices", false, &return_indices));
        if (return_indices)
            return tdm_error_set(TDM_ERR_UNSUPPORTED,
                                 "%s: return_indices=true is not supported (tandem returns the "
                                 "pooled values only)", c->op);
    }
    return TDM_OK;
}

static tdm_status run_max_pool2d(const tdm_case *c, tdm_tensor *const *in,
                                 const tdm_tensor *grad_output, tdm_case_result *r) {
    tdm_pool2d_params p;
    TDM_TRY(pool_params(c, false, &p));
    tdm_tensor *g[1] = {NULL};
    tdm_tensor *y = tdm_max_pool2d(in[0], &p);
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && grad_output)
        s = tdm_max_pool2d_backward(grad_output, in[0], &p, grad_slot(in, 0, g));
    return finish(s, y, g, 1, r);
}

static tdm_status run_avg_pool2d(const tdm_case *c, tdm_tensor *const *in,
                                 const tdm_tensor *grad_output, tdm_case_result *r) {
    tdm_pool2d_params p;
    TDM_TRY(pool_params(c, true, &p));
    tdm_tensor *g[1] = {NULL};
    tdm_tensor *y = tdm_avg_pool2d(in[0], &p);
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && grad_output)
        s = tdm_avg_pool2d_backward(grad_output, in[0], &p, grad_slot(in, 0, g));
    return finish(s, y, g, 1, r);
}

// ----------------------------------------------------------------------------

const tdm_case_op tdm_case_ops_linalg[] = {
    {"linear", run_linear, ""},
    {"matmul", run_matmul, ""},
    {"linear_gelu_linear", run_linear_gelu_linear, ""},
    {"conv2d", run_conv2d, "stride padding dilation groups memory_format"},
    {"max_pool2d", run_max_pool2d, "kernel_size stride padding dilation ceil_mode return_indices"},
    {"avg_pool2d", run_avg_pool2d,
     "kernel_size stride padding ceil_mode count_include_pad divisor_override"},
    {NULL, NULL, NULL},
};

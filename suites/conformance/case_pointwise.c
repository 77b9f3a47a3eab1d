/* case_pointwise.c — runs the conformance cases of the elementwise ops, reductions, softmax and
 * losses (docs/CASE_FORMAT.md): parses each op's attrs (PyTorch's defaults), calls the public
 * ops forward and, when the case has grad_output.0, backward.
 *
 * Every run function builds its results in locals and moves them into r only when all succeeded,
 * so a failure leaves r untouched and nothing leaks. */
#include <stdio.h>
#include <string.h>

#include "case.h"
#include "core/tensor_impl.h"   // tdm_error_set, TDM_TRY

// ---- helpers ---------------------------------------------------------------------------

static tdm_status bad_attr(const tdm_case *c, const char *attr, const char *why) {
    return tdm_error_set(TDM_ERR_FORMAT, "%s: attr %s: %s", c->op, attr, why);
}

static tdm_status reduction_attr(const tdm_case *c, tdm_reduction *red) {
    char s[64];
    TDM_TRY(tdm_attr_string(c, "reduction", "mean", s));
    if (tdm_reduction_parse(s, red) != TDM_OK)
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr reduction: '%s' is not none, mean or sum",
                             c->op, s);
    return TDM_OK;
}

// Moves y (output.0) and up to two gradients into r; frees them all when s is an error.
static tdm_status finish(tdm_status s, tdm_case_result *r, tdm_tensor *y, tdm_tensor *g0,
                         int k0, tdm_tensor *g1, int k1) {
    if (s == TDM_OK && !y) s = tdm_last_status();
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        tdm_tensor_free(g0);
        tdm_tensor_free(g1);
        return s;
    }
    r->output[0] = y;
    if (g0) r->grad_input[k0] = g0;
    if (g1) r->grad_input[k1] = g1;
    return TDM_OK;
}

// ---- unary -------------------------------------------------------------------------------

static tdm_status run_unary(tdm_unary_op op, const tdm_case *c, tdm_tensor *const *in,
                            const tdm_tensor *go, tdm_case_result *r) {
    (void)c;
    tdm_tensor *y = tdm_unary(op, in[0]), *gx = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go) s = tdm_unary_backward(op, go, in[0], &gx);
    return finish(s, r, y, gx, 0, NULL, 0);
}

static tdm_status run_relu(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                           tdm_case_result *r) {
    bool inplace;   // tandem's ops are out of place; the values are the same either way
    TDM_TRY(tdm_attr_bool(c, "inplace", false, &inplace));
    return run_unary(TDM_UNARY_RELU, c, in, go, r);
}

static tdm_status run_tanh(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                           tdm_case_result *r) {
    return run_unary(TDM_UNARY_TANH, c, in, go, r);
}

static tdm_status run_sigmoid(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                              tdm_case_result *r) {
    return run_unary(TDM_UNARY_SIGMOID, c, in, go, r);
}

// approximate: "none" (exact, x Phi(x)) or "tanh"
static tdm_status run_gelu(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                           tdm_case_result *r) {
    char approx[64];
    TDM_TRY(tdm_attr_string(c, "approximate", "none", approx));
    if (strcmp(approx, "none") && strcmp(approx, "tanh"))
        return bad_attr(c, "approximate", "expected \"none\" or \"tanh\"");
    return run_unary(strcmp(approx, "tanh") ? TDM_UNARY_GELU : TDM_UNARY_GELU_TANH, c, in, go, r);
}

// ---- add, mul ------------------------------------------------------------------------------

// add: input + alpha * other
static tdm_status run_add(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                          tdm_case_result *r) {
    double alpha;
    if (tdm_attr_present(c, "other")) return tdm_case_run_scalar(c, in, go, r);   // a number
    TDM_TRY(tdm_attr_double(c, "alpha", 1.0, &alpha));
    tdm_tensor *y = tdm_add(in[0], in[1], alpha), *ga = NULL, *gb = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go) s = tdm_add_backward(go, in[0], in[1], alpha, &ga, &gb);
    return finish(s, r, y, ga, 0, gb, 1);
}

static tdm_status run_mul(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                          tdm_case_result *r) {
    if (tdm_attr_present(c, "other")) return tdm_case_run_scalar(c, in, go, r);   // a number
    tdm_tensor *y = tdm_mul(in[0], in[1]), *ga = NULL, *gb = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go) s = tdm_mul_backward(go, in[0], in[1], &ga, &gb);
    return finish(s, r, y, ga, 0, gb, 1);
}

// ---- dropout -------------------------------------------------------------------------------

// p 0.5, training true, seed 0, offset 0 (tandem's generator); inplace must be false.
static tdm_status run_dropout(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                              tdm_case_result *r) {
    double p;
    bool training, inplace;
    int64_t seed, offset;
    TDM_TRY(tdm_attr_double(c, "p", 0.5, &p));
    TDM_TRY(tdm_attr_bool(c, "training", true, &training));
    TDM_TRY(tdm_attr_int(c, "seed", 0, &seed));
    TDM_TRY(tdm_attr_int(c, "offset", 0, &offset));
    TDM_TRY(tdm_attr_bool(c, "inplace", false, &inplace));
    if (inplace) return bad_attr(c, "inplace", "in-place dropout is not supported");
    if (seed < 0) return bad_attr(c, "seed", "must be >= 0");
    if (offset < 0) return bad_attr(c, "offset", "must be >= 0");
    tdm_tensor *y = tdm_dropout(in[0], p, training, (uint64_t)seed, (uint64_t)offset), *gx = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go)
        s = tdm_dropout_backward(go, p, training, (uint64_t)seed, (uint64_t)offset, &gx);
    return finish(s, r, y, gx, 0, NULL, 0);
}

// ---- sum, mean -----------------------------------------------------------------------------

#define MAX_DIM_LIST 16

// dim: absent or null = all dims, an int, or a list; keepdim false.
static tdm_status run_reduce(bool mean, const tdm_case *c, tdm_tensor *const *in,
                             const tdm_tensor *go, tdm_case_result *r) {
    int dims[MAX_DIM_LIST], n = 0;
    bool keepdim;
    TDM_TRY(tdm_attr_int_list(c, "dim", MAX_DIM_LIST, dims, &n));
    TDM_TRY(tdm_attr_bool(c, "keepdim", false, &keepdim));
    tdm_tensor *y = mean ? tdm_mean(in[0], n, dims, keepdim) : tdm_sum(in[0], n, dims, keepdim);
    tdm_tensor *gx = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go)
        s = mean ? tdm_mean_backward(go, in[0], n, dims, keepdim, &gx)
                 : tdm_sum_backward(go, in[0], n, dims, keepdim, &gx);
    return finish(s, r, y, gx, 0, NULL, 0);
}

static tdm_status run_sum(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                          tdm_case_result *r) {
    return run_reduce(false, c, in, go, r);
}

static tdm_status run_mean(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                           tdm_case_result *r) {
    return run_reduce(true, c, in, go, r);
}

// ---- softmax, log_softmax ------------------------------------------------------------------

// dim (required). The backward takes the forward output.
static tdm_status run_softmax_op(bool log, const tdm_case *c, tdm_tensor *const *in,
                                 const tdm_tensor *go, tdm_case_result *r) {
    int64_t dim;
    if (!tdm_attr_present(c, "dim")) return bad_attr(c, "dim", "required");
    TDM_TRY(tdm_attr_int(c, "dim", 0, &dim));
    if (dim < -TDM_MAX_DIMS || dim > TDM_MAX_DIMS) return bad_attr(c, "dim", "out of range");
    tdm_tensor *y = log ? tdm_log_softmax(in[0], (int)dim) : tdm_softmax(in[0], (int)dim);
    tdm_tensor *gx = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go)
        s = log ? tdm_log_softmax_backward(go, y, (int)dim, &gx)
                : tdm_softmax_backward(go, y, (int)dim, &gx);
    return finish(s, r, y, gx, 0, NULL, 0);
}

static tdm_status run_softmax(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                              tdm_case_result *r) {
    return run_softmax_op(false, c, in, go, r);
}

static tdm_status run_log_softmax(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                                  tdm_case_result *r) {
    return run_softmax_op(true, c, in, go, r);
}

// ---- losses --------------------------------------------------------------------------------

// input (N,C), (C) or (N,C,d1..dk); target class indices ((N), 0-d or (N,d1..dk)) or class
// probabilities (the input's shape); weight (C) optional (input.2); reduction "mean",
// label_smoothing 0, ignore_index -100. A gradient for the input only.
static tdm_status run_cross_entropy(const tdm_case *c, tdm_tensor *const *in,
                                    const tdm_tensor *go, tdm_case_result *r) {
    tdm_reduction red;
    double eps;
    int64_t ignore;
    if (!in[1]) return tdm_error_set(TDM_ERR_FORMAT, "cross_entropy: target (input.1) missing");
    TDM_TRY(reduction_attr(c, &red));
    TDM_TRY(tdm_attr_double(c, "label_smoothing", 0.0, &eps));
    TDM_TRY(tdm_attr_int(c, "ignore_index", -100, &ignore));
    // input.2: the class weights (PyTorch's `weight`), optional
    tdm_tensor *y = tdm_cross_entropy_weighted(in[0], in[1], in[2], red, eps, ignore), *gx = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go)
        s = tdm_cross_entropy_weighted_backward(go, in[0], in[1], in[2], red, eps, ignore, &gx);
    return finish(s, r, y, gx, 0, NULL, 0);
}

// input, target (same shape); reduction "mean". Both get a gradient.
static tdm_status run_mse_loss(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                               tdm_case_result *r) {
    tdm_reduction red;
    TDM_TRY(reduction_attr(c, &red));
    tdm_tensor *y = tdm_mse_loss(in[0], in[1], red), *ga = NULL, *gb = NULL;
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go) s = tdm_mse_loss_backward(go, in[0], in[1], red, &ga, &gb);
    return finish(s, r, y, ga, 0, gb, 1);
}

// ---- the table -----------------------------------------------------------------------------

const tdm_case_op tdm_case_ops_pointwise[] = {
    {"relu", run_relu, "inplace"},
    {"gelu", run_gelu, "approximate"},
    {"tanh", run_tanh, ""},
    {"sigmoid", run_sigmoid, ""},
    {"add", run_add, "alpha other"},
    {"mul", run_mul, "other"},
    {"dropout", run_dropout, "p training seed offset inplace"},
    {"sum", run_sum, "dim keepdim"},
    {"mean", run_mean, "dim keepdim"},
    {"softmax", run_softmax, "dim"},
    {"log_softmax", run_log_softmax, "dim"},
    {"cross_entropy", run_cross_entropy, "reduction label_smoothing ignore_index"},
    {"mse_loss", run_mse_loss, "reduction"},
    {NULL, NULL, NULL},
};

/* case_attention.c — runs the conformance cases of scaled_dot_product_attention
 * (docs/CASE_FORMAT.md): inputs query, key, value and attn_mask (absent, BOOL or floating);
 * PyTorch's attrs dropout_p, is_causal and scale (null: 1/sqrt(E)), and tandem's generator
 * position seed/offset for the dropout (as the dropout op's). Forward, and backward when the case
 * has grad_output.0: gradients of query, key, value and of a floating mask. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "case.h"
#include "core/tensor_impl.h"   // tdm_error_set, TDM_TRY

static tdm_status run_sdpa(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                           tdm_case_result *r) {
    double dropout_p, scale;
    bool is_causal, enable_gqa;
    int64_t seed, offset;
    TDM_TRY(tdm_attr_double(c, "dropout_p", 0.0, &dropout_p));
    TDM_TRY(tdm_attr_bool(c, "is_causal", false, &is_causal));
    TDM_TRY(tdm_attr_double(c, "scale", TDM_SDPA_SCALE_DEFAULT, &scale));
    TDM_TRY(tdm_attr_int(c, "seed", 0, &seed));
    TDM_TRY(tdm_attr_int(c, "offset", 0, &offset));
    TDM_TRY(tdm_attr_bool(c, "enable_gqa", false, &enable_gqa));
    if (enable_gqa)
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attr enable_gqa: grouped-query attention is "
                             "not supported", c->op);
    if (seed < 0 || offset < 0)
        return tdm_error_set(TDM_ERR_FORMAT, "%s: attrs seed and offset must be >= 0", c->op);
    for (int i = 0; i < 3; i++)
        if (!in[i])
            return tdm_error_set(TDM_ERR_FORMAT, "%s: input.%d (query, key, value) is missing",
                                 c->op, i);
    tdm_generator *g = tdm_generator_new((uint64_t)seed, (uint64_t)offset);
    if (!g) return tdm_last_status();
    tdm_tensor *y = tdm_scaled_dot_product_attention(in[0], in[1], in[2], in[3], dropout_p,
                                                     is_causal, scale, g);
    tdm_generator_free(g);
    tdm_tensor *gi[4] = {NULL, NULL, NULL, NULL};
    tdm_status s = y ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && go)
        s = tdm_scaled_dot_product_attention_backward(go, in[0], in[1], in[2], in[3], dropout_p,
                                                      is_causal, scale, (uint64_t)seed,
                                                      (uint64_t)offset, &gi[0], &gi[1], &gi[2],
                                                      in[3] ? &gi[3] : NULL);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        for (int i = 0; i < 4; i++) tdm_tensor_free(gi[i]);
        return s;
    }
    r->output[0] = y;
    for (int i = 0; i < 4; i++) r->grad_input[i] = gi[i];
    return TDM_OK;
}

// The attention weights (batch, L, S): with E = Ev = 0 no tensor of the case holds data, yet
// the reference and the bound compute every weight (and keep rows of S). The batch is each
// leading dim's largest size, right-aligned (what they broadcast to, or more: the op refuses
// those that do not broadcast).
tdm_status tdm_case_size_sdpa(const tdm_case *c) {
    int bnd = 0;
    for (int i = 0; i < 3; i++) {
        if (!c->input[i] || tdm_tensor_ndim(c->input[i]) < 2) return TDM_OK;   // the op refuses
        if (tdm_tensor_ndim(c->input[i]) - 2 > bnd) bnd = tdm_tensor_ndim(c->input[i]) - 2;
    }
    int64_t w[TDM_MAX_DIMS] = {0};
    for (int i = 0; i < 3; i++) {
        const int nd = tdm_tensor_ndim(c->input[i]);
        const int64_t *sh = tdm_tensor_shape(c->input[i]);
        for (int d = 0; d < nd - 2; d++)
            if (sh[d] > w[d + bnd - (nd - 2)]) w[d + bnd - (nd - 2)] = sh[d];
    }
    int64_t b = 1;
    for (int d = 0; d < bnd; d++)
        if (__builtin_mul_overflow(b, w[d], &b)) b = INT64_MAX;
    const tdm_tensor *q = c->input[0], *k = c->input[1];
    const int64_t shape[3] = {b, tdm_tensor_shape(q)[tdm_tensor_ndim(q) - 2],
                              tdm_tensor_shape(k)[tdm_tensor_ndim(k) - 2]};
    return tdm_case_check_intermediate(c, "attention weights", 3, shape);
}

const tdm_case_op tdm_case_ops_attention[] = {
    {"scaled_dot_product_attention", run_sdpa,
     "dropout_p is_causal scale seed offset enable_gqa"},
    {NULL, NULL, NULL},
};

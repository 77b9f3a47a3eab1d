/* random.c — a generator per op for bench conform (random.h). Shapes sweep sizes that catch
 * off-by-one and tail bugs in blocked kernels: 1, odd primes (7, 13), 33, and just past common
 * block/vector widths (129, 257); large sizes go to one dim at a time so a case stays small.
 * Inputs come from tdm_tensor_randn/rand seeded from (seed, index); the expected values are the
 * reference's results on the same inputs converted to f64 (exact), stored in F64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random.h"
#include "core/tensor_impl.h"

// ---- the case's private generator (shapes and attrs) --------------------------------------

typedef struct {
    uint64_t state;        // splitmix64
    uint64_t tensor_seed;  // seed for tdm_tensor_randn/rand; offset = the input's slot
    tdm_dtype dt;
    tdm_case *c;
} gen;

static uint64_t next_u64(gen *g) {
    uint64_t z = (g->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int pick(gen *g, int n) { return (int)(next_u64(g) % (uint64_t)n); }
static bool coin(gen *g) { return pick(g, 2) == 1; }

static const int64_t SMALL[] = {1, 2, 3, 5, 7};
static const int64_t SIZES[] = {1, 7, 13, 33, 129, 257};
static int64_t small(gen *g) { return SMALL[pick(g, 5)]; }
static int64_t any_size(gen *g) { return SIZES[pick(g, 6)]; }

// A shape of nd dims: one dim from SIZES, the others small.
static void rand_shape(gen *g, int nd, int64_t *shape) {
    int big = pick(g, nd ? nd : 1);
    for (int i = 0; i < nd; i++) shape[i] = i == big ? any_size(g) : small(g);
}

// ---- building the case ----------------------------------------------------------------------

static tdm_status put(gen *g, int slot, tdm_tensor *t) {
    if (!t) return tdm_last_status();
    g->c->input[slot] = t;
    return TDM_OK;
}
static tdm_status randn_in(gen *g, int slot, int nd, const int64_t *shape) {
    return put(g, slot, tdm_tensor_randn(nd, shape, g->dt, TDM_CPU, g->tensor_seed, (uint64_t)slot));
}
static tdm_status rand_in(gen *g, int slot, int nd, const int64_t *shape) {
    return put(g, slot, tdm_tensor_rand(nd, shape, g->dt, TDM_CPU, g->tensor_seed, (uint64_t)slot));
}
// Integers in [lo, hi) (I64), with `ignore` substituted at random where ignore_p > 0.
static tdm_status ints_in(gen *g, int slot, int nd, const int64_t *shape, int64_t lo, int64_t hi) {
    int64_t n = tdm_shape_numel(nd, shape);
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return tdm_error_set(TDM_ERR_OOM, "random case: out of memory");
    for (int64_t i = 0; i < n; i++) v[i] = lo + (int64_t)(next_u64(g) % (uint64_t)(hi - lo));
    tdm_status s = put(g, slot, tdm_tensor_from_host(nd, shape, TDM_DTYPE_I64, TDM_CPU, v));
    free(v);
    return s;
}
static void attr_num(gen *g, const char *k, double v) { cJSON_AddNumberToObject(g->c->attrs, k, v); }
static void attr_bool(gen *g, const char *k, bool v) { cJSON_AddBoolToObject(g->c->attrs, k, v); }
static void attr_str(gen *g, const char *k, const char *v) { cJSON_AddStringToObject(g->c->attrs, k, v); }
static void attr_pair(gen *g, const char *k, int a, int b) {
    int v[2] = {a, b};
    cJSON_AddItemToObject(g->c->attrs, k, cJSON_CreateIntArray(v, 2));
}

// ---- generators, one per op -------------------------------------------------------------------

static tdm_status gen_unary(gen *g) {   // relu tanh sigmoid gelu
    int64_t sh[4];
    int nd = 1 + pick(g, 3);
    rand_shape(g, nd, sh);
    if (!strcmp(g->c->op, "gelu")) attr_str(g, "approximate", coin(g) ? "tanh" : "none");
    return randn_in(g, 0, nd, sh);
}

static tdm_status gen_softmax(gen *g) {   // softmax log_softmax
    int64_t sh[4];
    int nd = 1 + pick(g, 3);
    rand_shape(g, nd, sh);
    attr_num(g, "dim", pick(g, 2 * nd) - nd);
    return randn_in(g, 0, nd, sh);
}

// The numbers of ops with a number `other` (0.1 and -0.37 are not exact in any dtype).
static const double NUMBERS[] = {0.1, -2.5, 3, 1e-3, 7.75, -0.37};

static tdm_status gen_binary(gen *g) {   // add mul: b broadcasts against a
    int64_t a[4], b[4];
    int nd = 1 + pick(g, 3), ndb = nd - pick(g, nd);
    rand_shape(g, nd, a);
    for (int i = 0; i < ndb; i++) b[i] = coin(g) ? 1 : a[nd - ndb + i];
    if (coin(g))   // sometimes a is the one broadcast
        for (int i = 0; i < ndb; i++) { int64_t t = a[nd - ndb + i]; a[nd - ndb + i] = b[i]; b[i] = t; }
    if (!strcmp(g->c->op, "add") && coin(g)) attr_num(g, "alpha", coin(g) ? 0.5 : -2.0);
    TDM_TRY(randn_in(g, 0, nd, a));
    TDM_TRY(randn_in(g, 1, ndb, b));
    if (pick(g, 4)) return TDM_OK;   // drawn last: the earlier draws are as before
    // a number `other` instead of input.1 (add: without alpha)
    tdm_tensor_free(g->c->input[1]);
    g->c->input[1] = NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(g->c->attrs, "alpha");
    attr_num(g, "other", NUMBERS[pick(g, 6)]);
    return TDM_OK;
}

static tdm_status gen_reduce(gen *g) {   // sum mean
    int64_t sh[4];
    int nd = 1 + pick(g, 3);
    rand_shape(g, nd, sh);
    if (coin(g)) {
        cJSON *dims = cJSON_CreateArray();
        for (int i = 0; i < nd; i++)
            if (coin(g)) cJSON_AddItemToArray(dims, cJSON_CreateNumber(coin(g) ? i : i - nd));
        if (!cJSON_GetArraySize(dims)) cJSON_AddItemToArray(dims, cJSON_CreateNumber(nd - 1));
        cJSON_AddItemToObject(g->c->attrs, "dim", dims);
    }
    attr_bool(g, "keepdim", coin(g));
    return randn_in(g, 0, nd, sh);
}

static const char *REDUCTIONS[] = {"mean", "sum", "none"};

static tdm_status gen_mse(gen *g) {
    int64_t sh[4];
    int nd = 1 + pick(g, 3);
    rand_shape(g, nd, sh);
    attr_str(g, "reduction", REDUCTIONS[pick(g, 3)]);
    TDM_TRY(randn_in(g, 0, nd, sh));
    return randn_in(g, 1, nd, sh);
}

// Class indices or probabilities, optional class weights, (N,C) or spatial (N,C,d) logits.
static tdm_status gen_cross_entropy(gen *g) {
    int64_t n = coin(g) ? small(g) : any_size(g), cl = coin(g) ? small(g) + 1 : any_size(g);
    if (n * cl > 4096) n = 3;
    const int64_t d = pick(g, 3) ? 0 : small(g);   // a spatial dim: logits (N,C,d)
    attr_str(g, "reduction", REDUCTIONS[pick(g, 3)]);
    if (coin(g)) attr_num(g, "label_smoothing", coin(g) ? 0.1 : 0.25);
    const bool probs = !pick(g, 3);
    const bool ignore = !probs && coin(g);
    if (ignore) attr_num(g, "ignore_index", 0);   // class 0 is ignored; target 1 always remains
    const int64_t xs[3] = {n, cl, d}, ts[2] = {n, d};
    TDM_TRY(randn_in(g, 0, d ? 3 : 2, xs));
    if (probs) {
        TDM_TRY(rand_in(g, 1, d ? 3 : 2, xs));
    } else {
        TDM_TRY(ints_in(g, 1, d ? 2 : 1, ts, 0, cl));
        int64_t *t = tdm_tensor_data(g->c->input[1]);
        if (ignore && cl > 1) t[0] = 1;   // at least one row counts (mean over none is 0/0)
    }
    if (coin(g)) TDM_TRY(rand_in(g, 2, 1, &cl));   // class weights in [0, 1)
    return TDM_OK;
}

static tdm_status gen_linear(gen *g) {
    int64_t in = any_size(g), out = coin(g) ? small(g) : any_size(g), sh[3];
    int nd = 1 + pick(g, 3);
    for (int i = 0; i < nd - 1; i++) sh[i] = small(g);
    sh[nd - 1] = in;
    TDM_TRY(randn_in(g, 0, nd, sh));
    TDM_TRY(randn_in(g, 1, 2, (int64_t[]){out, in}));
    return coin(g) ? randn_in(g, 2, 1, (int64_t[]){out}) : TDM_OK;
}

// The transformer MLP: x (..., in), w1 (hid, in), b1?, w2 (out, hid), b2?; hid a multiple of 8
// (the CUDA backend's epilogues) or not (its fallback).
static tdm_status gen_linear_gelu_linear(gen *g) {
    int64_t in = any_size(g), hid = coin(g) ? 8 * (1 + pick(g, 4)) : small(g), out = small(g);
    int64_t sh[3];
    int nd = 1 + pick(g, 3);
    for (int i = 0; i < nd - 1; i++) sh[i] = small(g);
    sh[nd - 1] = in;
    TDM_TRY(randn_in(g, 0, nd, sh));
    TDM_TRY(randn_in(g, 1, 2, (int64_t[]){hid, in}));
    if (coin(g)) TDM_TRY(randn_in(g, 2, 1, (int64_t[]){hid}));
    TDM_TRY(randn_in(g, 3, 2, (int64_t[]){out, hid}));
    return coin(g) ? randn_in(g, 4, 1, (int64_t[]){out}) : TDM_OK;
}

// torch.matmul's forms: the 4 the backends take, 1-D operands, and broadcast batch dims.
static tdm_status gen_matmul(gen *g) {
    int64_t n = small(g), k = any_size(g), m = coin(g) ? small(g) : any_size(g), b = small(g);
    if (coin(g)) { int64_t t = n; n = m; m = t; }
    switch (pick(g, 8)) {
    case 0:
        TDM_TRY(randn_in(g, 0, 2, (int64_t[]){n, k}));
        return randn_in(g, 1, 2, (int64_t[]){k, m});
    case 1:
        TDM_TRY(randn_in(g, 0, 3, (int64_t[]){b, n, k}));
        return randn_in(g, 1, 3, (int64_t[]){b, k, m});
    case 2:
        TDM_TRY(randn_in(g, 0, 3, (int64_t[]){b, n, k}));
        return randn_in(g, 1, 2, (int64_t[]){k, m});
    case 3:
        TDM_TRY(randn_in(g, 0, 2, (int64_t[]){n, k}));
        return randn_in(g, 1, 3, (int64_t[]){b, k, m});
    case 4:   // vector @ matrix (or batch of matrices)
        TDM_TRY(randn_in(g, 0, 1, (int64_t[]){k}));
        return coin(g) ? randn_in(g, 1, 2, (int64_t[]){k, m})
                       : randn_in(g, 1, 3, (int64_t[]){b, k, m});
    case 5:   // matrix (or batch) @ vector, or a dot product
        if (coin(g)) TDM_TRY(randn_in(g, 0, 1, (int64_t[]){k}));
        else TDM_TRY(randn_in(g, 0, 3, (int64_t[]){b, n, k}));
        return randn_in(g, 1, 1, (int64_t[]){k});
    case 6:   // broadcast batch dims: (b,1,n,k) @ (c,k,m) -> (b,c,n,m)
        TDM_TRY(randn_in(g, 0, 4, (int64_t[]){b, 1, n, k}));
        return randn_in(g, 1, 3, (int64_t[]){1 + pick(g, 3), k, m});
    default:  // a batch of one against a batch: (1,n,k) @ (b,k,m)
        TDM_TRY(randn_in(g, 0, 3, (int64_t[]){1, n, k}));
        return randn_in(g, 1, 4, (int64_t[]){2, b, k, m});
    }
}

// A spatial size with a window (k, s, p, d) fitting at least once: h + 2p >= d (k - 1) + 1.
static int64_t spatial(gen *g, int k, int p, int d) {
    static const int64_t hs[] = {1, 2, 5, 7, 13, 33};
    int64_t h = hs[pick(g, 6)], need = (int64_t)d * (k - 1) + 1 - 2 * p;
    return h < need ? need : h;
}

static tdm_status gen_conv2d(gen *g) {
    int groups = 1 + pick(g, 3), cpg = 1 + pick(g, 3), opg = 1 + pick(g, 3);
    int kh = 1 + pick(g, 3), kw = 1 + pick(g, 3), sh = 1 + pick(g, 2), sw = 1 + pick(g, 2);
    int ph = pick(g, 2), pw = pick(g, 2), dh = 1 + pick(g, 2), dw = 1 + pick(g, 2);
    int64_t n = 1 + pick(g, 2), c = (int64_t)groups * cpg, o = (int64_t)groups * opg;
    int64_t h = spatial(g, kh, ph, dh), w = spatial(g, kw, pw, dw);
    attr_pair(g, "stride", sh, sw);
    if (sh == 1 && sw == 1 && !pick(g, 3)) attr_str(g, "padding", "same");   // odd d(k-1) too
    else attr_pair(g, "padding", ph, pw);
    attr_pair(g, "dilation", dh, dw);
    attr_num(g, "groups", groups);
    if (coin(g)) attr_str(g, "memory_format", "channels_last");   // the NHWC layout
    TDM_TRY(randn_in(g, 0, 4, (int64_t[]){n, c, h, w}));
    TDM_TRY(randn_in(g, 1, 4, (int64_t[]){o, cpg, kh, kw}));
    return coin(g) ? randn_in(g, 2, 1, (int64_t[]){o}) : TDM_OK;
}

static tdm_status gen_pool(gen *g) {   // max_pool2d avg_pool2d
    bool is_max = !strcmp(g->c->op, "max_pool2d");
    int kh = 1 + pick(g, 3), kw = 1 + pick(g, 3);
    int sh = 1 + pick(g, kh), sw = 1 + pick(g, kw), ph = pick(g, kh / 2 + 1), pw = pick(g, kw / 2 + 1);
    int dh = is_max ? 1 + pick(g, 2) : 1, dw = is_max ? 1 + pick(g, 2) : 1;
    attr_pair(g, "kernel_size", kh, kw);
    if (coin(g)) attr_pair(g, "stride", sh, sw);
    attr_pair(g, "padding", ph, pw);
    attr_bool(g, "ceil_mode", coin(g));
    if (is_max) {
        attr_pair(g, "dilation", dh, dw);
    } else {
        attr_bool(g, "count_include_pad", coin(g));
        if (!pick(g, 4)) attr_num(g, "divisor_override", 1 + pick(g, 5));
    }
    int64_t c = small(g), h = spatial(g, kh, ph, dh), w = spatial(g, kw, pw, dw);
    if (coin(g)) return randn_in(g, 0, 3, (int64_t[]){c, h, w});
    return randn_in(g, 0, 4, (int64_t[]){1 + pick(g, 2), c, h, w});
}

static tdm_status gen_layer_norm(gen *g) {
    int64_t sh[3];
    int nd = 1 + pick(g, 3), nn = 1 + pick(g, nd < 2 ? 1 : 2);
    rand_shape(g, nd, sh);
    cJSON *ns = cJSON_CreateArray();
    for (int i = nd - nn; i < nd; i++) cJSON_AddItemToArray(ns, cJSON_CreateNumber((double)sh[i]));
    cJSON_AddItemToObject(g->c->attrs, "normalized_shape", ns);
    if (coin(g)) attr_num(g, "eps", 1e-3);
    TDM_TRY(randn_in(g, 0, nd, sh));
    if (coin(g)) {
        TDM_TRY(randn_in(g, 1, nn, sh + nd - nn));
        TDM_TRY(randn_in(g, 2, nn, sh + nd - nn));
    }
    return TDM_OK;
}

static tdm_status gen_batch_norm(gen *g) {
    int64_t n = 1 + pick(g, 3), c = coin(g) ? small(g) : any_size(g), sp = small(g);
    if (n * sp < 2) n = 2;   // training needs more than one value per channel
    bool training = coin(g);
    attr_bool(g, "training", training);
    if (coin(g)) attr_num(g, "momentum", 0.3);
    if (coin(g)) TDM_TRY(randn_in(g, 0, 3, (int64_t[]){n, c, sp}));
    else TDM_TRY(randn_in(g, 0, 4, (int64_t[]){n, c, sp, 1 + pick(g, 3)}));
    bool stats = !training || coin(g), affine = coin(g);
    if (stats) {
        TDM_TRY(randn_in(g, 1, 1, (int64_t[]){c}));
        TDM_TRY(rand_in(g, 2, 1, (int64_t[]){c}));   // positive: [0, 1) + eps
    }
    if (affine) {
        TDM_TRY(randn_in(g, 3, 1, (int64_t[]){c}));
        TDM_TRY(randn_in(g, 4, 1, (int64_t[]){c}));
    }
    return TDM_OK;
}

static tdm_status gen_embedding(gen *g) {
    int64_t v = coin(g) ? small(g) + 1 : any_size(g), d = any_size(g), sh[3];
    int nd = 1 + pick(g, 2);
    for (int i = 0; i < nd; i++) sh[i] = small(g);
    if (coin(g)) attr_num(g, "padding_idx", pick(g, (int)v));
    TDM_TRY(ints_in(g, 0, nd, sh, 0, v));
    return randn_in(g, 1, 2, (int64_t[]){v, d});
}

static tdm_status gen_dropout(gen *g) {
    static const double ps[] = {0.0, 0.1, 0.5, 0.9, 1.0};
    int64_t sh[4];
    int nd = 1 + pick(g, 3);
    rand_shape(g, nd, sh);
    attr_num(g, "p", ps[pick(g, 5)]);
    attr_bool(g, "training", pick(g, 4) != 0);
    attr_num(g, "seed", (double)(next_u64(g) & 0xffffff));
    attr_num(g, "offset", pick(g, 100));
    return randn_in(g, 0, nd, sh);
}

static tdm_status gen_sgd(gen *g) {
    int64_t sh[2];
    int nd = 1 + pick(g, 2);
    rand_shape(g, nd, sh);
    double mom = coin(g) ? 0.9 : 0.0;
    attr_num(g, "lr", coin(g) ? 0.1 : 0.01);
    attr_num(g, "momentum", mom);
    if (coin(g)) attr_num(g, "weight_decay", 0.01);
    bool nesterov = mom > 0 && coin(g);
    attr_bool(g, "nesterov", nesterov);
    if (mom > 0 && !nesterov && coin(g)) attr_num(g, "dampening", 0.1);
    TDM_TRY(randn_in(g, 0, nd, sh));
    TDM_TRY(randn_in(g, 1, nd, sh));
    TDM_TRY(mom > 0 && coin(g) ? randn_in(g, 2, nd, sh) : TDM_OK);
    attr_bool(g, "maximize", coin(g));   // drawn last: the earlier draws are as before
    return TDM_OK;
}

static tdm_status gen_adam(gen *g) {
    int64_t sh[2];
    int nd = 1 + pick(g, 2);
    rand_shape(g, nd, sh);
    attr_num(g, "lr", coin(g) ? 1e-3 : 1e-2);
    attr_num(g, "step", 1 + pick(g, 20));
    if (coin(g)) attr_num(g, "weight_decay", 0.05);
    if (coin(g)) attr_num(g, "eps", 1e-6);
    TDM_TRY(randn_in(g, 0, nd, sh));
    TDM_TRY(randn_in(g, 1, nd, sh));
    TDM_TRY(randn_in(g, 2, nd, sh));
    TDM_TRY(rand_in(g, 3, nd, sh));   // exp_avg_sq >= 0
    // drawn last: the earlier draws are as before. max_exp_avg_sq is drawn like exp_avg_sq,
    // independently, so that either side of max(max_exp_avg_sq, exp_avg_sq) wins somewhere.
    attr_bool(g, "maximize", coin(g));
    const bool amsgrad = coin(g);
    attr_bool(g, "amsgrad", amsgrad);
    return amsgrad ? rand_in(g, 4, nd, sh) : TDM_OK;
}

// scaled_dot_product_attention: q (lead..., L, E), k (lead..., S, E), v (lead..., S, Ev) with up
// to two leading dims, each of q, k, v sometimes 1 there (broadcast); one of L, S a size past
// block widths, E and Ev small or 33; no mask, causal, a bool mask (sometimes a row all false:
// zeros) or an additive one (sometimes -inf entries), either possibly broadcast; sometimes a
// scale, sometimes dropout.
static tdm_status gen_sdpa(gen *g) {
    static const int64_t EDIMS[] = {1, 2, 5, 8, 16, 33};
    const int nl = pick(g, 3);
    int64_t lead[2] = {small(g), small(g)}, bs[2] = {1, 1};   // bs: the broadcast lead dims
    int64_t L = coin(g) ? small(g) : any_size(g);
    const int64_t S = coin(g) ? any_size(g) : small(g);
    if (L * S > 4096) L = small(g);   // a case stays small
    const int64_t E = EDIMS[pick(g, 6)], Ev = coin(g) ? E : EDIMS[pick(g, 6)];
    const int64_t last[3][2] = {{L, E}, {S, E}, {S, Ev}};
    for (int t = 0; t < 3; t++) {
        int64_t sh[4];
        for (int d = 0; d < nl; d++) {
            sh[d] = pick(g, 4) ? lead[d] : 1;
            if (sh[d] > bs[d]) bs[d] = sh[d];
        }
        sh[nl] = last[t][0], sh[nl + 1] = last[t][1];
        TDM_TRY(randn_in(g, t, nl + 2, sh));
    }
    const int kind = pick(g, 4);   // 0 none, 1 causal, 2 bool, 3 additive
    if (kind == 1) attr_bool(g, "is_causal", true);
    if (kind >= 2) {
        int64_t sh[4];
        const int nm = pick(g, nl + 1) + 2;   // the mask's dims: (L, S) plus some leading ones
        for (int d = 0; d < nm - 2; d++) sh[d] = pick(g, 3) ? bs[d + nl - (nm - 2)] : 1;
        sh[nm - 2] = pick(g, 4) ? L : 1, sh[nm - 1] = S;
        const int64_t n = tdm_shape_numel(nm, sh);
        double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
        if (!v) return tdm_error_set(TDM_ERR_OOM, "random case: out of memory");
        const bool full_row = !pick(g, 4);   // mask out every key of the first row
        for (int64_t i = 0; i < n; i++) {
            const bool out = (full_row && i < S) || !pick(g, 6);
            if (kind == 2) v[i] = !out;
            else v[i] = out && coin(g) ? -INFINITY : 0.5 * (double)(int64_t)(next_u64(g) % 9) - 2.0;
        }
        tdm_tensor *f = tdm_tensor_from_host(nm, sh, TDM_DTYPE_F64, TDM_CPU, v);
        free(v);
        tdm_tensor *m = f ? tdm_tensor_to(f, TDM_CPU, kind == 2 ? TDM_DTYPE_BOOL : g->dt) : NULL;
        tdm_tensor_free(f);
        TDM_TRY(put(g, 3, m));
    }
    if (!pick(g, 4)) attr_num(g, "scale", coin(g) ? 0.5 : 2.0);
    if (!pick(g, 3)) {
        attr_num(g, "dropout_p", coin(g) ? 0.1 : 0.5);
        attr_num(g, "seed", (double)(next_u64(g) & 0xffffff));
        attr_num(g, "offset", pick(g, 100));
    }
    return TDM_OK;
}

// clip_grad_norm_: 1 to 4 gradients of random shapes (input.0 always; a later one absent at
// random: a parameter without a gradient), max_norm and norm_type (2, 1, inf, 3) at random.
static tdm_status gen_clip(gen *g) {
    static const double max_norms[] = {0.0, 0.1, 1.0, 10.0};
    const int k = 1 + pick(g, 4);
    for (int i = 0; i < k; i++) {
        if (i > 0 && pick(g, 4) == 0) continue;
        int64_t sh[2];
        int nd = 1 + pick(g, 2);
        rand_shape(g, nd, sh);
        TDM_TRY(randn_in(g, i, nd, sh));
    }
    attr_num(g, "max_norm", max_norms[pick(g, 4)]);
    switch (pick(g, 4)) {
    case 0: break;   // 2, the default
    case 1: attr_num(g, "norm_type", 1.0); break;
    case 2: attr_str(g, "norm_type", "inf"); break;
    default: attr_num(g, "norm_type", 3.0); break;
    }
    return TDM_OK;
}

// ---- views and joins (exact copies), a tensor with a number ------------------------------------

static tdm_status gen_view(gen *g) {   // view/reshape: the leading dims merged, one -1
    int64_t sh[4];
    const int nd = 1 + pick(g, 3), p = pick(g, nd + 1);
    rand_shape(g, nd, sh);
    cJSON *size = cJSON_CreateArray();
    if (p > 0) cJSON_AddItemToArray(size, cJSON_CreateNumber((double)tdm_shape_numel(p, sh)));
    cJSON_AddItemToArray(size, cJSON_CreateNumber(-1));
    cJSON_AddItemToObject(g->c->attrs, !strcmp(g->c->op, "view") ? "size" : "shape", size);
    return randn_in(g, 0, nd, sh);
}

static tdm_status gen_transpose(gen *g) {
    int64_t sh[4];
    const int nd = 1 + pick(g, 4);
    rand_shape(g, nd, sh);
    attr_num(g, "dim0", pick(g, 2 * nd) - nd);
    attr_num(g, "dim1", pick(g, 2 * nd) - nd);
    return randn_in(g, 0, nd, sh);
}

static tdm_status gen_narrow(gen *g) {   // start in [-size, size], length up to the end
    int64_t sh[4];
    const int nd = 1 + pick(g, 3), dim = pick(g, nd);
    rand_shape(g, nd, sh);
    const int64_t size = sh[dim], start = pick(g, (int)(2 * size + 1)) - size;
    const int64_t from = start < 0 ? start + size : start;
    attr_num(g, "dim", coin(g) ? dim : dim - nd);
    attr_num(g, "start", (double)start);
    attr_num(g, "length", pick(g, (int)(size - from + 1)));
    return randn_in(g, 0, nd, sh);
}

static tdm_status gen_split(gen *g) {   // split: a size; chunk: 1..8 chunks (at most 8 pieces)
    int64_t sh[4];
    const int nd = 1 + pick(g, 3), dim = pick(g, nd);
    rand_shape(g, nd, sh);
    const int64_t size = sh[dim], least = (size + 7) / 8;   // pieces <= 8
    if (!strcmp(g->c->op, "chunk")) attr_num(g, "chunks", 1 + pick(g, 8));
    else attr_num(g, "split_size_or_sections", (double)(least + pick(g, (int)(size - least + 1))));
    if (coin(g)) {
        attr_num(g, "dim", coin(g) ? dim : dim - nd);
    } else {   // dim 0, the default: the drawn dim moves there
        sh[dim] = sh[0];
        sh[0] = size;
    }
    return randn_in(g, 0, nd, sh);
}

static tdm_status gen_cat(gen *g) {   // 1..4 tensors; cat: sizes differ along dim; stack: equal
    int64_t sh[4];
    const bool stack = !strcmp(g->c->op, "stack");
    const int nd = 1 + pick(g, 3), n = 1 + pick(g, 4), dim = pick(g, nd + stack);
    rand_shape(g, nd, sh);
    attr_num(g, "dim", coin(g) ? dim : dim - nd - stack);
    for (int i = 0; i < n; i++) {
        if (!stack && dim < nd) sh[dim] = coin(g) ? small(g) : any_size(g);
        TDM_TRY(randn_in(g, i, nd, sh));
    }
    return TDM_OK;
}

// sub, rsub, div, rdiv (and add, mul with a number: gen_binary): input.0 and `other`; rdiv's
// input is kept away from 0 (|x| in [0.5, 1.5): no overflow to inf in f16)
static tdm_status gen_scalar(gen *g) {
    int64_t sh[4];
    const int nd = pick(g, 4);
    rand_shape(g, nd, sh);
    attr_num(g, "other", NUMBERS[pick(g, 6)]);
    if (strcmp(g->c->op, "rdiv")) return randn_in(g, 0, nd, sh);
    tdm_tensor *u = tdm_tensor_rand(nd, sh, TDM_DTYPE_F64, TDM_CPU, g->tensor_seed, 0);
    if (!u) return tdm_last_status();
    double *v = tdm_tensor_data(u);
    for (int64_t i = 0; i < tdm_tensor_numel(u); i++) v[i] = i % 2 ? -0.5 - v[i] : 0.5 + v[i];
    tdm_tensor *t = tdm_tensor_to(u, TDM_CPU, g->dt);
    tdm_tensor_free(u);
    return put(g, 0, t);
}

static const struct {
    const char *op;
    tdm_status (*gen)(gen *g);
    bool backward;
} GENERATORS[] = {
    {"linear", gen_linear, true},         {"matmul", gen_matmul, true},
    {"linear_gelu_linear", gen_linear_gelu_linear, true},
    {"conv2d", gen_conv2d, true},         {"max_pool2d", gen_pool, true},
    {"avg_pool2d", gen_pool, true},       {"relu", gen_unary, true},
    {"gelu", gen_unary, true},            {"tanh", gen_unary, true},
    {"sigmoid", gen_unary, true},         {"add", gen_binary, true},
    {"mul", gen_binary, true},            {"dropout", gen_dropout, true},
    {"sum", gen_reduce, true},            {"mean", gen_reduce, true},
    {"softmax", gen_softmax, true},       {"log_softmax", gen_softmax, true},
    {"cross_entropy", gen_cross_entropy, true}, {"mse_loss", gen_mse, true},
    {"layer_norm", gen_layer_norm, true}, {"batch_norm", gen_batch_norm, true},
    {"embedding", gen_embedding, true},   {"sgd_step", gen_sgd, false},
    {"adam_step", gen_adam, false},       {"adamw_step", gen_adam, false},
    {"scaled_dot_product_attention", gen_sdpa, true},
    {"clip_grad_norm_", gen_clip, false},
    {"view", gen_view, true},             {"reshape", gen_view, true},
    {"transpose", gen_transpose, true},   {"narrow", gen_narrow, true},
    {"split", gen_split, true},           {"chunk", gen_split, true},
    {"cat", gen_cat, true},               {"stack", gen_cat, true},
    {"sub", gen_scalar, true},            {"rsub", gen_scalar, true},
    {"div", gen_scalar, true},            {"rdiv", gen_scalar, true},
};
#define N_GENERATORS ((int)(sizeof GENERATORS / sizeof *GENERATORS))

const char *tdm_random_ops(void) {
    static char list[1024];
    if (!list[0])
        for (int i = 0; i < N_GENERATORS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "",
                     GENERATORS[i].op);
    return list;
}

static int find_gen(const char *op) {
    for (int i = 0; i < N_GENERATORS; i++)
        if (!strcmp(GENERATORS[i].op, op)) return i;
    return -1;
}
bool tdm_random_has(const char *op) { return find_gen(op) >= 0; }

// ---- expected values: the reference on the inputs in f64 ------------------------------------

static tdm_case *case_f64(const tdm_case *c) {
    tdm_case *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    memcpy(d->path, c->path, sizeof d->path);
    memcpy(d->op, c->op, sizeof d->op);
    d->attrs = cJSON_Duplicate(c->attrs, true);
    d->dtype = TDM_DTYPE_F64;
    for (int i = 0; i < TDM_CASE_MAX; i++) {
        const tdm_tensor *src[] = {c->input[i], c->grad_output[i]};
        tdm_tensor **dst[] = {&d->input[i], &d->grad_output[i]};
        for (int k = 0; k < 2; k++) {
            if (!src[k]) continue;
            tdm_dtype dt = tdm_dtype_is_float(src[k]->dtype) ? TDM_DTYPE_F64 : src[k]->dtype;
            if (!(*dst[k] = tdm_tensor_to(src[k], TDM_CPU, dt))) {
                tdm_case_free(d);
                return NULL;
            }
        }
    }
    return d;
}

static uint64_t mix(uint64_t a, uint64_t b) {
    gen g = {.state = a ^ (b * 0xD6E8FEB86659FD93ull)};
    return next_u64(&g);
}

tdm_case *tdm_random_case(const char *op, tdm_dtype dt, uint64_t seed, int64_t index) {
    int gi = find_gen(op);
    if (gi < 0) {
        tdm_error_set(TDM_ERR_ARG, "random case: no generator for op '%s'", op);
        return NULL;
    }
    tdm_case *c = calloc(1, sizeof *c);
    if (!c) {
        tdm_error_set(TDM_ERR_OOM, "random case: out of memory");
        return NULL;
    }
    uint64_t h = 1469598103934665603ull;   // FNV-1a of the op: each op its own stream
    for (const char *p = op; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    gen g = {.state = mix(mix(seed, h), (uint64_t)index), .dt = dt, .c = c};
    g.tensor_seed = next_u64(&g) ^ (uint64_t)dt;
    snprintf(c->op, sizeof c->op, "%s", op);
    snprintf(c->path, sizeof c->path, "%s-%s-s%llu-i%lld", op, tdm_dtype_name(dt),
             (unsigned long long)seed, (long long)index);
    c->attrs = cJSON_CreateObject();
    c->dtype = dt;
    tdm_status s = c->attrs ? GENERATORS[gi].gen(&g) : tdm_error_set(TDM_ERR_OOM, "out of memory");
    tdm_case *e = NULL;
    tdm_case_result r = {0};
    // Forward in f64 first for the output's shape, then grad_output of that shape, then the full
    // run in f64 for the expected values.
    if (s == TDM_OK && !(e = case_f64(c))) s = tdm_last_status();
    if (s == TDM_OK) s = tdm_case_run(e, TDM_CPU, &r);
    if (s == TDM_OK && GENERATORS[gi].backward) {
        const tdm_tensor *y = r.output[0];
        c->grad_output[0] = tdm_tensor_randn(y->ndim, y->shape, dt, TDM_CPU, g.tensor_seed, 100);
        tdm_case_result_free(&r);
        tdm_case_free(e);
        e = NULL;
        if (!c->grad_output[0] || !(e = case_f64(c))) s = tdm_last_status();
        if (s == TDM_OK) s = tdm_case_run(e, TDM_CPU, &r);
    }
    if (s == TDM_OK) {
        for (int i = 0; i < TDM_CASE_MAX; i++) {
            c->output[i] = r.output[i];
            c->grad_input[i] = r.grad_input[i];
            r.output[i] = r.grad_input[i] = NULL;
        }
        if (!c->output[0]) s = tdm_error_set(TDM_ERR_ARG, "random case %s: no output", c->path);
    }
    tdm_case_result_free(&r);
    tdm_case_free(e);
    if (s != TDM_OK) {
        tdm_case_free(c);
        return NULL;
    }
    return c;
}

// ---- writing a case file --------------------------------------------------------------------

tdm_status tdm_random_case_save(const tdm_case *c, const char *path, uint64_t seed, int64_t index) {
    static const char *kinds[] = {"input", "grad_output", "output", "grad_input"};
    tdm_tensor *const *arrays[] = {c->input, c->grad_output, c->output, c->grad_input};
    char names[4 * TDM_CASE_MAX][32];
    const char *np[4 * TDM_CASE_MAX];
    const tdm_tensor *tp[4 * TDM_CASE_MAX];
    int n = 0;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < TDM_CASE_MAX; i++) {
            if (!arrays[k][i]) continue;
            snprintf(names[n], sizeof names[n], "%s.%d", kinds[k], i);
            np[n] = names[n];
            tp[n++] = arrays[k][i];
        }
    char *attrs = cJSON_PrintUnformatted(c->attrs);
    char seed_s[64];
    snprintf(seed_s, sizeof seed_s, "%llu:%lld", (unsigned long long)seed, (long long)index);
    const char *meta[] = {"format", "tandem-case/1", "op", c->op, "attrs", attrs ? attrs : "{}",
                          "seed", seed_s, "generator", "bench conform"};
    tdm_status s = tdm_safetensors_save(path, n, np, tp, 5, meta);
    free(attrs);
    return s;
}

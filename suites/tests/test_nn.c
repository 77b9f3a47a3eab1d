/* test_nn.c — modules (nn.h): the model grammar (good and bad specs, PyTorch's state-dict names
 * and shapes), forward values against the functional ops and by hand, PyTorch's default init
 * (ranges, moments, reproducibility, Philox's known answer), train/eval of BatchNorm2d and
 * Dropout (numbers from PyTorch), the state dict saved and loaded (round trip, prefix, dtype
 * conversion, strict failures that change nothing), and activation checkpointing (bit-identical
 * gradients, one running-stat update, lower peak memory).
 * Usage: test_nn AREA TMPDIR, AREA one of spec init forward train_eval state checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

static const char *tmpdir = ".";

static bool has(const char *needle) { return strstr(tdm_last_error(), needle) != NULL; }

static bool shape_is(const tdm_tensor *t, int ndim, const int64_t *shape) {
    if (tdm_tensor_ndim(t) != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (tdm_tensor_shape(t)[i] != shape[i]) return false;
    return true;
}

static bool bytes_equal(const tdm_tensor *a, const tdm_tensor *b) {
    return a && b && tdm_tensor_dtype(a) == tdm_tensor_dtype(b) &&
           tdm_tensor_nbytes(a) == tdm_tensor_nbytes(b) &&
           !memcmp(tdm_tensor_data_const(a), tdm_tensor_data_const(b), tdm_tensor_nbytes(a));
}

// A copy of every state tensor of m (to compare later); returns the count.
static int state_snapshot(tdm_module *m, tdm_tensor **out, int cap) {
    tdm_tensor *t[64];
    int n = tdm_module_state(m, NULL, t, 64);
    for (int i = 0; i < n && i < cap; i++) out[i] = tdm_tensor_clone(t[i]);
    return n;
}

static bool state_equals(tdm_module *m, tdm_tensor *const *snap, int n) {
    tdm_tensor *t[64];
    if (tdm_module_state(m, NULL, t, 64) != n) return false;
    for (int i = 0; i < n; i++)
        if (!bytes_equal(t[i], snap[i])) return false;
    return true;
}

static void snapshot_free(tdm_tensor **snap, int n) {
    for (int i = 0; i < n; i++) tdm_tensor_free(snap[i]);
}

static tdm_tensor *f32(int ndim, const int64_t *shape, const float *data) {
    return tdm_tensor_from_host(ndim, shape, TDM_DTYPE_F32, TDM_CPU, data);
}

// ---- spec ---------------------------------------------------------------------------------------

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[4];
} entry;

static void check_state(tdm_module *m, const entry *want, int n_want) {
    const char *names[64];
    tdm_tensor *t[64];
    int n = tdm_module_state(m, names, t, 64);
    CHECK_MSG(n == n_want, "%d state entries, expected %d", n, n_want);
    for (int i = 0; i < n && i < n_want; i++) {
        CHECK_MSG(!strcmp(names[i], want[i].name), "entry %d is '%s', expected '%s'", i, names[i],
                  want[i].name);
        CHECK_MSG(shape_is(t[i], want[i].ndim, want[i].shape), "entry '%s' has the wrong shape",
                  names[i]);
        bool nbt = strstr(want[i].name, "num_batches_tracked") != NULL;
        CHECK(tdm_tensor_dtype(t[i]) == (nbt ? TDM_DTYPE_I64 : TDM_DTYPE_F32));
    }
}

// Forward of a batch of 2 random inputs of the spec's input shape: the output's shape.
static bool forward_shape(tdm_module *m, const char *spec, int ndim, const int64_t *want) {
    int nd;
    int64_t in[4] = {2};
    if (tdm_nn_spec_input_shape(spec, &nd, in + 1) != TDM_OK) return false;
    tdm_tensor *x = tdm_tensor_randn(nd + 1, in, TDM_DTYPE_F32, TDM_CPU, 5, 0);
    tdm_tensor *y = tdm_module_forward(m, x);
    bool ok = y && shape_is(y, ndim, want);
    if (!y) fprintf(stderr, "forward %s: %s\n", spec, tdm_last_error());
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    return ok;
}

static void test_spec(void) {
    // The names and shapes of PyTorch's state_dict for the equivalent nn.Sequential, printed by
    // torch 1.13: `for k, v in model.state_dict().items(): print(k, tuple(v.shape), v.dtype)`.
    const char *mlp = "mlp:1000-512-128-10";
    const entry mlp_state[] = {{"0.weight", 2, {512, 1000}}, {"0.bias", 1, {512}},
                               {"2.weight", 2, {128, 512}},  {"2.bias", 1, {128}},
                               {"4.weight", 2, {10, 128}},   {"4.bias", 1, {10}}};
    tdm_module *m = tdm_nn_from_spec(mlp);
    CHECK_MSG(m, "%s", tdm_last_error());
    if (m) {
        check_state(m, mlp_state, 6);
        tdm_tensor *p[8];
        CHECK(tdm_module_parameters(m, p, 8) == 6);
        CHECK(forward_shape(m, mlp, 2, (int64_t[]){2, 10}));
        tdm_module_free(m);
    }

    const char *cnn = "cnn:3x8x8/c8k3p1-bn-relu-mp2-c8k3p1-bn-relu-ap2-flat-fc5";
    const entry cnn_state[] = {
        {"0.weight", 4, {8, 3, 3, 3}}, {"0.bias", 1, {8}},
        {"1.weight", 1, {8}},          {"1.bias", 1, {8}},
        {"1.running_mean", 1, {8}},    {"1.running_var", 1, {8}},
        {"1.num_batches_tracked", 0, {0}},
        {"4.weight", 4, {8, 8, 3, 3}}, {"4.bias", 1, {8}},
        {"5.weight", 1, {8}},          {"5.bias", 1, {8}},
        {"5.running_mean", 1, {8}},    {"5.running_var", 1, {8}},
        {"5.num_batches_tracked", 0, {0}},
        {"9.weight", 2, {5, 32}},      {"9.bias", 1, {5}}};
    m = tdm_nn_from_spec(cnn);
    CHECK_MSG(m, "%s", tdm_last_error());
    if (m) {
        check_state(m, cnn_state, 16);
        tdm_tensor *p[16];
        const char *names[16];
        int np = tdm_module_parameters(m, p, 16);
        CHECK(np == 10);   // state order without the buffers
        tdm_tensor *st[16];
        tdm_module_state(m, names, st, 16);
        CHECK(np == 10 && p[0] == st[0] && p[3] == st[3] && p[4] == st[7] && p[9] == st[15]);
        for (int i = 0; i < np; i++)
            CHECK(tdm_tensor_requires_grad(p[i]) && tdm_tensor_is_leaf(p[i]));
        CHECK(!tdm_tensor_requires_grad(st[4]) && !tdm_tensor_requires_grad(st[6]));
        CHECK(forward_shape(m, cnn, 2, (int64_t[]){2, 5}));
        tdm_module_free(m);
    }

    int nd;
    int64_t s[3];
    CHECK(tdm_nn_spec_input_shape(cnn, &nd, s) == TDM_OK && nd == 3 && s[0] == 3 && s[1] == 8 &&
          s[2] == 8);
    CHECK(tdm_nn_spec_input_shape(mlp, &nd, s) == TDM_OK && nd == 1 && s[0] == 1000);
    CHECK(tdm_nn_spec_input_shape("cnn:2x3/", &nd, s) != TDM_OK && has("CxHxW"));

    // Strides, the pools' default stride = kernel, gelu and dropout: (1,9,9) -c4k3s2-> (4,4,4)
    // -mp3s1-> (4,2,2) -ap2-> (4,1,1) -flat-> 4 -fc2-> 2 (the golden generator's self-check).
    const char *odd = "cnn:1x9x9/c4k3s2-mp3s1-ap2-gelu-do0.25-flat-fc2";
    m = tdm_nn_from_spec(odd);
    CHECK_MSG(m, "%s", tdm_last_error());
    if (m) {
        const entry odd_state[] = {{"0.weight", 4, {4, 1, 3, 3}}, {"0.bias", 1, {4}},
                                   {"6.weight", 2, {2, 4}}, {"6.bias", 1, {2}}};
        check_state(m, odd_state, 4);
        CHECK(forward_shape(m, odd, 2, (int64_t[]){2, 2}));
        tdm_module_free(m);
    }
    m = tdm_nn_from_spec("cnn:2x5x5/c3k5-flat-do.5-fc4-relu-fc1");   // (3,1,1) -> 3
    CHECK_MSG(m, "%s", tdm_last_error());
    if (m) {
        const entry st2[] = {{"0.weight", 4, {3, 2, 5, 5}}, {"0.bias", 1, {3}},
                             {"3.weight", 2, {4, 3}},       {"3.bias", 1, {4}},
                             {"5.weight", 2, {1, 4}},       {"5.bias", 1, {1}}};
        check_state(m, st2, 6);
        tdm_module_free(m);
    }

    // Bad specs: NULL, and a message that names the token and says why.
    struct {
        const char *spec, *msg;
    } bad[] = {
        {"mlp:20", "at least two widths"},
        {"mlp:", "width '' is not a positive integer"},
        {"mlp:20-x", "width 'x' is not a positive integer"},
        {"mlp:20-0", "width '0'"},
        {"mlp:20-10-", "width ''"},
        {"mlp:-20-10", "width ''"},
        {"mlp:99999999999-2", "width '99999999999'"},
        {"rnn:1-2", "unknown model kind 'rnn'"},
        {"mlp20-10", "unknown model kind"},
        {"", "unknown model kind"},
        {"cnn:3x8x8", "expected cnn:CxHxW/TOKENS"},
        {"cnn:3x8/c8", "input '3x8' must be CxHxW"},
        {"cnn:3x0x8/c8", "input '3x0x8'"},
        {"cnn:3x8x8/fc5", "token 'fc5': needs a flat input"},
        {"cnn:3x8x8/c8q", "token 'c8q': expected cO[kK][sS][pP]"},
        {"cnn:3x8x8/c8x3", "token 'c8x3': expected cO[kK][sS][pP]"},
        {"cnn:3x8x8/c8p1k3", "token 'c8p1k3': expected cO[kK][sS][pP]"},
        {"cnn:3x8x8/c0", "token 'c0': channels, kernel and stride must be positive"},
        {"cnn:3x8x8/c8k0", "token 'c8k0'"},
        {"cnn:3x8x8/c8s0", "token 'c8s0'"},
        {"cnn:3x8x8/c", "token 'c': expected"},
        {"cnn:3x4x4/mp8", "token 'mp8': spatial size vanishes"},
        {"cnn:3x4x4/c8k5", "token 'c8k5': spatial size vanishes"},
        {"cnn:3x4x4/mp2s0", "token 'mp2s0'"},
        {"cnn:3x4x4/ap", "token 'ap': expected apK[sS]"},
        {"cnn:3x8x8/flat-bn", "token 'bn': needs a (C, H, W) input"},
        {"cnn:3x8x8/flat-c8", "token 'c8': needs a (C, H, W) input"},
        {"cnn:3x8x8/flat-mp2", "token 'mp2': needs a (C, H, W) input"},
        {"cnn:3x8x8/relu--relu", "empty token"},
        {"cnn:3x8x8/", "empty token"},
        {"cnn:3x8x8/relu-", "empty token"},
        {"cnn:3x8x8/do1.5", "token 'do1.5': expected doP"},
        {"cnn:3x8x8/do", "token 'do'"},
        {"cnn:3x8x8/do0.1.2", "token 'do0.1.2'"},
        {"cnn:3x8x8/fc", "token 'fc': expected fcN"},
        {"cnn:3x8x8/flat-fc0", "token 'fc0'"},
        {"cnn:3x8x8/Relu", "token 'Relu': unknown token"},
        {"cnn:3x8x8/relu-foo", "token 'foo': unknown token (expected cO[kK][sS][pP], bn"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tdm_error_clear();
        tdm_module *b = tdm_nn_from_spec(bad[i].spec);
        CHECK_MSG(!b && has(bad[i].msg), "spec '%s': got %s, message '%s', expected '%s'",
                  bad[i].spec, b ? "a model" : "NULL", tdm_last_error(), bad[i].msg);
        tdm_module_free(b);
    }
    CHECK(!tdm_nn_from_spec(NULL));
    CHECK(!tdm_nn_from_spec("mlp:2147483647-2147483647") && tdm_last_status() == TDM_ERR_OOM);
    CHECK(!tdm_nn_from_spec("cnn:3x8x8/c8x3"));
    printf("  e.g. %s\n", tdm_last_error());
}

// ---- init ---------------------------------------------------------------------------------------

// min, max, mean and (population) variance of a tensor.
static void moments(const tdm_tensor *t, double *lo, double *hi, double *mean, double *var) {
    int64_t n = tdm_tensor_numel(t);
    double *d = malloc((size_t)n * sizeof *d);
    tdm_tensor_to_host_f64(t, d);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s += d[i];
        *lo = fmin(*lo, d[i]);
        *hi = fmax(*hi, d[i]);
    }
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (d[i] - *mean) * (d[i] - *mean);
    *var = s2 / (double)n;
    free(d);
}

// U(-b, b): inside the bounds, reaching near both ends, mean 0 and variance b^2/3 (4 standard
// errors: the variance of u^2 terms gives the relative error of the variance ~ 1.34/sqrt(n)).
static void check_uniform(const char *what, const tdm_tensor *t, double b) {
    double lo, hi, mean, var;
    moments(t, &lo, &hi, &mean, &var);
    double n = (double)tdm_tensor_numel(t);
    double bf = b * (1 + 0x1p-23);   // f32 rounding may land on the nearest float above b
    CHECK_MSG(lo >= -bf && hi <= bf, "%s: range [%g, %g] outside ±%g", what, lo, hi, b);
    CHECK_MSG(lo < -0.9 * b && hi > 0.9 * b, "%s: range [%g, %g] does not fill ±%g", what, lo, hi,
              b);
    CHECK_MSG(fabs(mean) < 4 * b / sqrt(3 * n), "%s: mean %g", what, mean);
    CHECK_MSG(fabs(var / (b * b / 3) - 1) < 4 * 0.9 / sqrt(n), "%s: variance %g, expected %g",
              what, var, b * b / 3);
}

// tdm_module_init_copy: a module set up by copying a fresh module's state is, to the bit, what
// tdm_module_init with the same seed draws (checked against a third module drawn directly):
// every state entry, a BatchNorm's buffers included, and the dropout streams (the same masks in
// a training forward).
static void test_init_copy(void) {
    static const char *const specs[] = {
        "cnn:3x8x8/c4p1-bn-relu-mp2-flat-do0.5-fc10",
        "gpt:L1-H2-D8-T4-V11-drop0.25",
    };
    for (int k = 0; k < 2; k++) {
        tdm_module *src = tdm_nn_from_spec(specs[k]), *copy = tdm_nn_from_spec(specs[k]),
                   *drawn = tdm_nn_from_spec(specs[k]);
        CHECK(src && copy && drawn);
        if (!src || !copy || !drawn) continue;
        CHECK(tdm_module_init(src, 5) == TDM_OK && tdm_module_init(drawn, 5) == TDM_OK);
        CHECK(tdm_module_init(copy, 9) == TDM_OK);   // other weights, other streams first
        CHECK_MSG(tdm_module_init_copy(copy, src, 5) == TDM_OK, "%s", tdm_last_error());
        tdm_tensor *a[64], *b[64];
        int n = tdm_module_state(copy, NULL, a, 64);
        CHECK(n == tdm_module_state(drawn, NULL, b, 64) && n > 0 && n <= 64);
        for (int i = 0; i < n && i < 64; i++) CHECK_MSG(bytes_equal(a[i], b[i]), "%s entry %d", specs[k], i);
        // The dropout streams: a training forward draws the same masks in both.
        int64_t shape[4] = {2, 3, 8, 8};
        tdm_tensor *x = k == 0 ? tdm_tensor_randn(4, shape, TDM_DTYPE_F32, TDM_CPU, 3, 0)
                               : tdm_tensor_from_host(2, (int64_t[]){1, 4}, TDM_DTYPE_I64, TDM_CPU,
                                                      (int64_t[]){1, 2, 3, 4});
        tdm_tensor *ya = x ? tdm_module_forward(copy, x) : NULL;
        tdm_tensor *yb = x ? tdm_module_forward(drawn, x) : NULL;
        CHECK_MSG(ya && yb && bytes_equal(ya, yb), "%s: the forwards in training differ", specs[k]);
        tdm_tensor_free(ya);
        tdm_tensor_free(yb);
        tdm_tensor_free(x);
        tdm_module_free(src);
        tdm_module_free(copy);
        tdm_module_free(drawn);
    }
    // Another structure is refused, naming why.
    tdm_module *a = tdm_nn_from_spec("mlp:4-3"), *b = tdm_nn_from_spec("mlp:4-5");
    CHECK(tdm_module_init_copy(a, b, 0) == TDM_ERR_ARG && strstr(tdm_last_error(), "differ"));
    tdm_module_free(a);
    tdm_module_free(b);
}

static void test_init(void) {
    // Philox's known answer (Random123's kat_vectors): key (0,0), counter (0,0,0,0) gives the words
    // 6627e8d5 e169c58d: the first two elements of the stream (seed 0, offset 0), the weight of a
    // fresh Linear: u = (bits >> 8) / 2^24, w = u * 2b - b with b = 1/sqrt(in_features) = 1/2.
    tdm_module *lin = tdm_nn_linear(4, 3, true);
    tdm_tensor *st[4];
    const char *names[4];
    CHECK(tdm_module_state(lin, names, st, 4) == 2 && !strcmp(names[0], "weight") &&
          !strcmp(names[1], "bias"));
    float w[12];
    tdm_tensor_to_host(st[0], w, sizeof w);
    double u0 = (double)(0x6627e8d5u >> 8) / 16777216.0,
           u1 = (double)(0xe169c58du >> 8) / 16777216.0;
    CHECK_MSG(w[0] == (float)(u0 - 0.5) && w[1] == (float)(u1 - 0.5), "w[0] %.9g w[1] %.9g", w[0],
              w[1]);
    // The bias has its own stream (offset 1): not a copy of the weight's first numbers.
    float b[3];
    tdm_tensor_to_host(st[1], b, sizeof b);
    CHECK(b[0] != w[0] && fabsf(b[0]) <= 0.5f && fabsf(b[2]) <= 0.5f);
    tdm_module_free(lin);

    // Ranges and moments: Linear and Conv2d weights and biases U(±1/sqrt(fan_in)).
    tdm_module *m = tdm_nn_from_spec("mlp:1000-512-128-10");
    tdm_tensor *t[8];
    tdm_module_state(m, NULL, t, 8);
    check_uniform("0.weight", t[0], 1 / sqrt(1000.0));
    check_uniform("0.bias", t[1], 1 / sqrt(1000.0));
    check_uniform("2.weight", t[2], 1 / sqrt(512.0));
    check_uniform("4.weight", t[4], 1 / sqrt(128.0));
    // Reproducible: the same structure and seed give the same bytes; another seed other bytes.
    tdm_module *m2 = tdm_nn_from_spec("mlp:1000-512-128-10");
    tdm_tensor *t2[8];
    tdm_module_state(m2, NULL, t2, 8);
    for (int i = 0; i < 6; i++) CHECK(bytes_equal(t[i], t2[i]));
    CHECK(tdm_module_init(m2, 7) == TDM_OK);
    for (int i = 0; i < 6; i++) CHECK(!bytes_equal(t[i], t2[i]));
    check_uniform("0.weight seed 7", t2[0], 1 / sqrt(1000.0));
    CHECK(tdm_module_init(m2, 0) == TDM_OK);   // back to the constructor's seed
    for (int i = 0; i < 6; i++) CHECK(bytes_equal(t[i], t2[i]));
    tdm_module_free(m);
    tdm_module_free(m2);

    // Layers of the same shape get different weights (each entry has its own stream).
    m = tdm_nn_from_spec("mlp:64-64-64");
    tdm_module_state(m, NULL, t, 8);
    CHECK(!bytes_equal(t[0], t[2]) && !bytes_equal(t[1], t[3]));
    tdm_module_free(m);

    // Conv2d: fan_in = in_channels / groups * kh * kw.
    tdm_conv2d_params cp = TDM_CONV2D_DEFAULT;
    cp.groups = 2;
    tdm_module *conv = tdm_nn_conv2d(8, 64, 5, &cp, true);
    tdm_module_state(conv, NULL, t, 8);
    int64_t ws[4] = {64, 4, 5, 5};
    CHECK(shape_is(t[0], 4, ws));
    check_uniform("conv weight", t[0], 1 / sqrt(4 * 25.0));
    tdm_module_free(conv);

    // Norms: weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0.
    tdm_module *bn = tdm_nn_batch_norm2d(3, 1e-5, 0.1);
    const char *bn_names[5];
    CHECK(tdm_module_state(bn, bn_names, t, 8) == 5 && !strcmp(bn_names[4], "num_batches_tracked"));
    double v[3];
    tdm_tensor_to_host_f64(t[0], v);
    CHECK(v[0] == 1 && v[2] == 1);
    tdm_tensor_to_host_f64(t[1], v);
    CHECK(v[0] == 0 && v[2] == 0);
    tdm_tensor_to_host_f64(t[3], v);
    CHECK(v[0] == 1 && v[2] == 1);
    CHECK(tdm_tensor_ndim(t[4]) == 0 && tdm_tensor_dtype(t[4]) == TDM_DTYPE_I64);
    tdm_module_free(bn);
    int64_t ns[2] = {3, 4};
    tdm_module *ln = tdm_nn_layer_norm(2, ns, 1e-5);
    CHECK(tdm_module_state(ln, NULL, t, 8) == 2 && shape_is(t[0], 2, ns));
    double lv[12];
    tdm_tensor_to_host_f64(t[0], lv);
    CHECK(lv[0] == 1 && lv[11] == 1);
    tdm_module_free(ln);

    // Embedding: N(0, 1).
    tdm_module *emb = tdm_nn_embedding(1000, 32);
    tdm_module_state(emb, NULL, t, 8);
    double lo, hi, mean, var;
    moments(t[0], &lo, &hi, &mean, &var);
    CHECK_MSG(fabs(mean) < 4 / sqrt(32000.0) && fabs(var - 1) < 4 * sqrt(2 / 32000.0),
              "embedding mean %g var %g", mean, var);
    tdm_module_free(emb);

    // Bad sizes: NULL with a message.
    CHECK(!tdm_nn_linear(0, 3, true) && has("in_features must be positive"));
    CHECK(!tdm_nn_conv2d(3, 8, 0, NULL, true) && has("kernel_size"));
    cp.groups = 3;
    CHECK(!tdm_nn_conv2d(8, 6, 3, &cp, true) && has("divisible by groups 3"));
    CHECK(!tdm_nn_dropout(1.5) && has("between 0 and 1"));
    CHECK(!tdm_nn_batch_norm2d(0, 1e-5, 0.1));
    CHECK(!tdm_nn_layer_norm(0, ns, 1e-5));
    CHECK(!tdm_nn_max_pool2d(NULL));
    tdm_pool2d_params pp = {{2, 2}, {2, 2}, {2, 2}, {1, 1}, false, true, 0};
    CHECK(!tdm_nn_avg_pool2d(&pp) && has("at most half the kernel"));
    tdm_module *kids[2] = {tdm_nn_relu(), NULL};
    CHECK(!tdm_nn_sequential(2, kids) && has("child 1 is NULL"));   // frees the relu (ASan)
}

// ---- forward ------------------------------------------------------------------------------------

static void test_forward(void) {
    // Linear against the functional op (bit-identical) and by hand after loading known weights.
    tdm_module *lin = tdm_nn_linear(3, 2, true);
    tdm_tensor *p[2];
    CHECK(tdm_module_parameters(lin, p, 2) == 2);
    float xv[6] = {1, -1, 2, 0.5f, 0.25f, -3};
    tdm_tensor *x = f32(2, (int64_t[]){2, 3}, xv);
    tdm_tensor *y = tdm_module_forward(lin, x), *want = tdm_linear(x, p[0], p[1]);
    CHECK(bytes_equal(y, want));
    CHECK(y && !strcmp(tdm_tensor_grad_fn_name(y) ? tdm_tensor_grad_fn_name(y) : "", "linear"));
    tdm_tensor_free(y);
    tdm_tensor_free(want);
    tdm_module_free(lin);

    // By hand: w = [[1,2,3],[-1,0.5,2]], b = [0.5,-1]; x0 = [1,-1,2]: y = [5.5, 1.5];
    // x1 = [0.5,0.25,-3]: y = [0.5+0.5-9+0.5, -0.5+0.125-6-1] = [-7.5, -7.375].
    float wv[6] = {1, 2, 3, -1, 0.5f, 2}, bv[2] = {0.5f, -1};
    lin = tdm_nn_linear(3, 2, true);
    tdm_module_parameters(lin, p, 2);
    tdm_tensor *w = f32(2, (int64_t[]){2, 3}, wv), *b = f32(1, (int64_t[]){2}, bv);
    CHECK(tdm_tensor_copy_(p[0], w) == TDM_OK && tdm_tensor_copy_(p[1], b) == TDM_OK);
    y = tdm_module_forward(lin, x);
    float yv[4] = {0};
    if (y) tdm_tensor_to_host(y, yv, sizeof yv);
    CHECK_MSG(yv[0] == 5.5f && yv[1] == 1.5f && yv[2] == -7.5f && yv[3] == -7.375f,
              "y = %g %g %g %g", yv[0], yv[1], yv[2], yv[3]);
    tdm_tensor_free(y);
    tdm_tensor_free(w);
    tdm_tensor_free(b);
    // A wrong input size: the op's message, prefixed inside a Sequential by the module's index.
    tdm_tensor *x4 = tdm_tensor_zeros(2, (int64_t[]){2, 4}, TDM_DTYPE_F32, TDM_CPU);
    tdm_module *seq = tdm_nn_sequential(2, (tdm_module *[]){tdm_nn_relu(), lin});
    CHECK(!tdm_module_forward(seq, x4) && has("Sequential module 1 (Linear)"));
    printf("  e.g. %s\n", tdm_last_error());
    tdm_tensor_free(x4);
    tdm_module_free(seq);
    tdm_tensor_free(x);

    // Conv2d (stride 2, padding 1, no bias) against the functional op, and by hand: a 2x2 kernel
    // of ones over a 1x1x3x3 input of 1..9 with padding 1, stride 2 sums the 4 pixels under it:
    // (1,1,2,2): [1, 2+3, 4+7, 5+6+8+9] = [1, 5, 11, 28].
    tdm_conv2d_params cp = TDM_CONV2D_DEFAULT;
    cp.stride[0] = cp.stride[1] = 2;
    cp.padding[0] = cp.padding[1] = 1;
    tdm_module *conv = tdm_nn_conv2d(1, 1, 2, &cp, false);
    CHECK(tdm_module_parameters(conv, p, 2) == 1);
    float img[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    x = f32(4, (int64_t[]){1, 1, 3, 3}, img);
    y = tdm_module_forward(conv, x);
    want = tdm_conv2d(x, p[0], NULL, &cp);
    CHECK(bytes_equal(y, want) && shape_is(y, 4, (int64_t[]){1, 1, 2, 2}));
    tdm_tensor_free(y);
    tdm_tensor_free(want);
    float ones[4] = {1, 1, 1, 1};
    w = f32(4, (int64_t[]){1, 1, 2, 2}, ones);
    tdm_tensor_copy_(p[0], w);
    y = tdm_module_forward(conv, x);
    float cv[4] = {0};
    if (y) tdm_tensor_to_host(y, cv, sizeof cv);
    CHECK_MSG(cv[0] == 1 && cv[1] == 5 && cv[2] == 11 && cv[3] == 28, "conv %g %g %g %g", cv[0],
              cv[1], cv[2], cv[3]);
    tdm_tensor_free(y);
    tdm_tensor_free(w);
    tdm_module_free(conv);

    // Pools, activations, flatten: a Sequential equals the chain of functional ops.
    tdm_pool2d_params pp = {{2, 2}, {1, 1}, {0, 0}, {1, 1}, false, true, 0};
    seq = tdm_nn_sequential(5, (tdm_module *[]){tdm_nn_max_pool2d(&pp), tdm_nn_gelu(true),
                                                tdm_nn_avg_pool2d(&pp), tdm_nn_relu(),
                                                tdm_nn_flatten()});
    y = tdm_module_forward(seq, x);
    tdm_tensor *a = tdm_max_pool2d(x, &pp), *g = tdm_gelu(a, true), *v = tdm_avg_pool2d(g, &pp),
               *r = tdm_relu(v);
    CHECK(y && shape_is(y, 2, (int64_t[]){1, 1}) && r &&
          ((const float *)tdm_tensor_data_const(y))[0] ==
              ((const float *)tdm_tensor_data_const(r))[0]);
    tdm_tensor_free(a);
    tdm_tensor_free(g);
    tdm_tensor_free(v);
    tdm_tensor_free(r);
    tdm_tensor_free(y);
    tdm_module_free(seq);
    tdm_tensor_free(x);

    // LayerNorm and Embedding against the functional ops.
    tdm_module *ln = tdm_nn_layer_norm(1, (int64_t[]){4}, 1e-5);
    x = tdm_tensor_randn(2, (int64_t[]){3, 4}, TDM_DTYPE_F32, TDM_CPU, 1, 0);
    tdm_module_parameters(ln, p, 2);
    y = tdm_module_forward(ln, x);
    want = tdm_layer_norm(x, 1, p[0], p[1], 1e-5, NULL, NULL);
    CHECK(bytes_equal(y, want));
    tdm_tensor_free(y);
    tdm_tensor_free(want);
    tdm_tensor_free(x);
    tdm_module_free(ln);
    tdm_module *emb = tdm_nn_embedding(5, 3);
    int64_t idx[3] = {4, 0, 4};
    x = tdm_tensor_from_host(1, (int64_t[]){3}, TDM_DTYPE_I64, TDM_CPU, idx);
    tdm_module_parameters(emb, p, 1);
    y = tdm_module_forward(emb, x);
    want = tdm_embedding(x, p[0], TDM_EMBEDDING_NO_PADDING);
    CHECK(bytes_equal(y, want) && shape_is(y, 2, (int64_t[]){3, 3}));
    tdm_tensor_free(y);
    tdm_tensor_free(want);
    tdm_tensor_free(x);
    tdm_module_free(emb);

    // An empty Sequential is the identity; Flatten wants (N, ...).
    seq = tdm_nn_sequential(0, NULL);
    x = tdm_tensor_zeros(1, (int64_t[]){3}, TDM_DTYPE_F32, TDM_CPU);
    y = tdm_module_forward(seq, x);
    CHECK(y == x);
    tdm_tensor_free(y);
    tdm_module_free(seq);
    tdm_module *fl = tdm_nn_flatten();
    CHECK(!tdm_module_forward(fl, x) && has("at least 2 dims"));
    tdm_module_free(fl);
    tdm_tensor_free(x);
    // tdm_module_to: cpu -> cpu keeps the tensors.
    lin = tdm_nn_linear(2, 2, true);
    tdm_tensor *before[2];
    tdm_module_parameters(lin, before, 2);
    CHECK(tdm_module_to(lin, TDM_CPU) == TDM_OK);
    tdm_module_parameters(lin, p, 2);
    CHECK(p[0] == before[0] && p[1] == before[1]);
    tdm_module_free(lin);
}

// ---- train/eval ---------------------------------------------------------------------------------

static void test_train_eval(void) {
    // BatchNorm2d(2) with weight [1.5, -0.5], bias [0.25, 1] on x (2,2,1,2); expected values from
    // torch 1.13: bn = nn.BatchNorm2d(2); x = torch.tensor([1, 2, -1, .5, 3, -2, 4, .25])
    // .reshape(2,2,1,2); y = bn(x) (train), then bn.eval(); y = bn(x).
    const double y_train[8] = {0.25, 1.05178261, 1.52161574, 1.11778414,
                               1.8535651, -2.15534759, 0.175510526, 1.18508947};
    const double y_eval[8] = {1.40478432, 2.68787813, 1.46895766, 0.825815797,
                              3.97097158, -2.44449663, -0.674848795, 0.933006108};
    const double rm[2] = {0.10000000149011612, 0.09375}, rv[2] = {1.36666667, 1.35989583};
    tdm_module *bn = tdm_nn_batch_norm2d(2, 1e-5, 0.1);
    tdm_tensor *t[5];
    tdm_module_state(bn, NULL, t, 5);
    float wv[2] = {1.5f, -0.5f}, bv[2] = {0.25f, 1};
    tdm_tensor *w = f32(1, (int64_t[]){2}, wv), *b = f32(1, (int64_t[]){2}, bv);
    tdm_tensor_copy_(t[0], w);
    tdm_tensor_copy_(t[1], b);
    float xv[8] = {1, 2, -1, 0.5f, 3, -2, 4, 0.25f};
    tdm_tensor *x = f32(4, (int64_t[]){2, 2, 1, 2}, xv);
    double got[8], stat[2];
    int64_t nbt = -1;
    for (int step = 0; step < 2; step++) {   // two training steps: the counter goes to 2
        tdm_tensor *y = tdm_module_forward(bn, x);
        CHECK(y && tdm_tensor_to_host_f64(y, got) == TDM_OK);
        for (int i = 0; y && i < 8; i++)
            CHECK_MSG(fabs(got[i] - y_train[i]) <= 1e-6 * fmax(1, fabs(y_train[i])),
                      "train y[%d] = %.9g, torch %.9g", i, got[i], y_train[i]);
        tdm_tensor_free(y);
        tdm_tensor_to_host(t[4], &nbt, sizeof nbt);
        CHECK_MSG(nbt == step + 1, "num_batches_tracked %lld", (long long)nbt);
        if (step == 0) {
            tdm_tensor_to_host_f64(t[2], stat);
            CHECK(fabs(stat[0] - rm[0]) < 1e-7 && fabs(stat[1] - rm[1]) < 1e-7);
            tdm_tensor_to_host_f64(t[3], stat);
            CHECK(fabs(stat[0] - rv[0]) < 1e-6 && fabs(stat[1] - rv[1]) < 1e-6);
        }
    }
    // Eval after one step's statistics: reset them to torch's values after one step.
    float rmf[2] = {(float)rm[0], (float)rm[1]}, rvf[2] = {(float)rv[0], (float)rv[1]};
    tdm_tensor *a = f32(1, (int64_t[]){2}, rmf), *c = f32(1, (int64_t[]){2}, rvf);
    tdm_tensor_copy_(t[2], a);
    tdm_tensor_copy_(t[3], c);
    tdm_module *seq = tdm_nn_sequential(1, &bn);   // train/eval recurse into children
    tdm_module_init(seq, 0);
    tdm_tensor_copy_(t[0], w);
    tdm_tensor_copy_(t[1], b);
    tdm_tensor_copy_(t[2], a);
    tdm_tensor_copy_(t[3], c);
    tdm_module_train(seq, false);
    tdm_tensor *y = tdm_module_forward(seq, x);
    CHECK(y && tdm_tensor_to_host_f64(y, got) == TDM_OK);
    for (int i = 0; y && i < 8; i++)
        CHECK_MSG(fabs(got[i] - y_eval[i]) <= 1e-6 * fmax(1, fabs(y_eval[i])),
                  "eval y[%d] = %.9g, torch %.9g", i, got[i], y_eval[i]);
    tdm_tensor_free(y);
    tdm_tensor_to_host(t[4], &nbt, sizeof nbt);
    CHECK(nbt == 0);   // eval updates nothing (init reset it to 0)
    tdm_tensor_to_host_f64(t[2], stat);
    CHECK(stat[0] == (float)rm[0]);
    tdm_module_free(seq);
    tdm_tensor_free(a);
    tdm_tensor_free(c);
    tdm_tensor_free(w);
    tdm_tensor_free(b);
    tdm_tensor_free(x);
    int64_t x3s[3] = {2, 2, 2};
    bn = tdm_nn_batch_norm2d(2, 1e-5, 0.1);
    x = tdm_tensor_zeros(3, x3s, TDM_DTYPE_F32, TDM_CPU);
    CHECK(!tdm_module_forward(bn, x) && has("expected 4D input"));
    tdm_tensor_free(x);
    tdm_module_free(bn);

    // Dropout(0.5): training zeroes about half and doubles the rest, with a new mask per call;
    // eval is the identity; init(seed) restarts the stream.
    enum { N = 4096 };
    tdm_module *drop = tdm_nn_dropout(0.5);
    x = tdm_tensor_rand(1, (int64_t[]){N}, TDM_DTYPE_F32, TDM_CPU, 3, 0);   // > 0 almost surely
    float *in = malloc(N * sizeof *in), *m1 = malloc(N * sizeof *m1), *m2 = malloc(N * sizeof *m2);
    tdm_tensor_to_host(x, in, N * sizeof *in);
    tdm_tensor *y1 = tdm_module_forward(drop, x), *y2 = tdm_module_forward(drop, x);
    tdm_tensor_to_host(y1, m1, N * sizeof *m1);
    tdm_tensor_to_host(y2, m2, N * sizeof *m2);
    int zeros = 0, same = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        zeros += m1[i] == 0;
        same += (m1[i] == 0) == (m2[i] == 0);
        bad += m1[i] != 0 && m1[i] != 2 * in[i];
    }
    // 4 standard deviations of a binomial(4096, 1/2): 128.
    CHECK_MSG(abs(zeros - N / 2) < 128 && bad == 0, "%d zeros, %d wrong values", zeros, bad);
    CHECK_MSG(abs(same - N / 2) < 128, "masks of two calls agree on %d of %d", same, N);
    CHECK(tdm_module_init(drop, 0) == TDM_OK);
    tdm_tensor *y3 = tdm_module_forward(drop, x);
    CHECK(bytes_equal(y1, y3));
    tdm_module_train(drop, false);
    tdm_tensor *y4 = tdm_module_forward(drop, x);
    CHECK(bytes_equal(y4, x));
    tdm_tensor_free(y1);
    tdm_tensor_free(y2);
    tdm_tensor_free(y3);
    tdm_tensor_free(y4);
    tdm_tensor_free(x);
    tdm_module_free(drop);
    free(in);
    free(m1);
    free(m2);
}

// ---- state: save and load
// -------------------------------------------------------------------------

static void path_in_tmp(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void test_state(void) {
    const char *spec = "cnn:3x8x8/c8k3p1-bn-relu-mp2-c8k3p1-bn-relu-ap2-flat-fc5";
    char path[512], path2[512];
    path_in_tmp(path, sizeof path, "nn_state.safetensors");
    path_in_tmp(path2, sizeof path2, "nn_state_bad.safetensors");

    // A model with non-trivial buffers: seed 1, one training forward.
    tdm_module *a = tdm_nn_from_spec(spec);
    CHECK(tdm_module_init(a, 1) == TDM_OK);
    tdm_tensor *x = tdm_tensor_randn(4, (int64_t[]){4, 3, 8, 8}, TDM_DTYPE_F32, TDM_CPU, 9, 0);
    tdm_tensor *y = tdm_module_forward(a, x);
    tdm_tensor_free(y);
    CHECK(tdm_module_save(a, path) == TDM_OK);

    // The file: PyTorch's names, dtypes, shapes and {"format": "pt"}.
    tdm_safetensors *st = tdm_safetensors_open(path);
    CHECK(st && tdm_safetensors_count(st) == 16);
    const char *meta = st ? tdm_safetensors_metadata(st, "format") : NULL;
    CHECK(meta && !strcmp(meta, "pt"));
    tdm_tensor *nbt = st ? tdm_safetensors_get(st, "5.num_batches_tracked", TDM_CPU) : NULL;
    CHECK(nbt && tdm_tensor_dtype(nbt) == TDM_DTYPE_I64 && tdm_tensor_ndim(nbt) == 0 &&
          ((const int64_t *)tdm_tensor_data_const(nbt))[0] == 1);
    tdm_tensor_free(nbt);
    tdm_safetensors_close(st);

    // Round trip: another model (seed 2) loads it bit for bit.
    tdm_module *b = tdm_nn_from_spec(spec);
    tdm_module_init(b, 2);
    tdm_tensor *snap_a[16];
    int n = state_snapshot(a, snap_a, 16);
    CHECK(!state_equals(b, snap_a, n));
    CHECK_MSG(tdm_module_load(b, path, "", true) == TDM_OK, "%s", tdm_last_error());
    CHECK(state_equals(b, snap_a, n));
    tdm_tensor *p[16];
    int np = tdm_module_parameters(b, p, 16);
    for (int i = 0; i < np; i++) CHECK(tdm_tensor_is_leaf(p[i]) && tdm_tensor_requires_grad(p[i]));

    // Failures leave the module unchanged: a file with every entry but a wrong shape for the last
    // one; a file missing one entry. (b is reset to seed 2 first, so a partial copy would show.)
    tdm_module_init(b, 2);
    tdm_tensor *snap_b[16];
    state_snapshot(b, snap_b, 16);
    const char *names[16];
    tdm_tensor *t[16];
    tdm_module_state(a, names, t, 16);
    tdm_tensor *wrong = tdm_tensor_zeros(2, (int64_t[]){5, 31}, TDM_DTYPE_F32, TDM_CPU);
    const tdm_tensor *ct[16];
    for (int i = 0; i < 16; i++) ct[i] = i == 14 ? wrong : t[i];
    CHECK(tdm_safetensors_save(path2, 16, names, ct, 0, NULL) == TDM_OK);
    CHECK(tdm_module_load(b, path2, "", true) == TDM_ERR_SHAPE &&
          has("size mismatch for '9.weight': shape (5, 31) in the file, (5, 32) in the module"));
    printf("  e.g. %s\n", tdm_last_error());
    CHECK(state_equals(b, snap_b, n));
    CHECK(tdm_module_load(b, path2, "", false) == TDM_ERR_SHAPE);   // non-strict checks shapes too
    CHECK(state_equals(b, snap_b, n));
    tdm_tensor_free(wrong);

    const char *names15[16];
    const tdm_tensor *t15[16];
    for (int i = 0, k = 0; i < 16; i++) {
        if (i == 15) continue;   // no 9.bias
        names15[k] = names[i];
        t15[k++] = t[i];
    }
    CHECK(tdm_safetensors_save(path2, 15, names15, t15, 0, NULL) == TDM_OK);
    CHECK(tdm_module_load(b, path2, "", true) == TDM_ERR_FORMAT && has("missing entry '9.bias'"));
    CHECK(state_equals(b, snap_b, n));
    // Non-strict: loads what is there, keeps the rest.
    CHECK(tdm_module_load(b, path2, "", false) == TDM_OK);
    tdm_tensor *bt[16];
    tdm_module_state(b, NULL, bt, 16);
    CHECK(bytes_equal(bt[14], snap_a[14]) && bytes_equal(bt[15], snap_b[15]));
    // A file without num_batches_tracked loads strictly (as in PyTorch), keeping the counters.
    tdm_module_init(b, 2);
    const char *nn_names[16];
    const tdm_tensor *nn_t[16];
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (strstr(names[i], "num_batches_tracked")) continue;
        nn_names[k] = names[i];
        nn_t[k++] = t[i];
    }
    CHECK(tdm_safetensors_save(path2, k, nn_names, nn_t, 0, NULL) == TDM_OK);
    CHECK(tdm_module_load(b, path2, "", true) == TDM_OK);
    int64_t cnt = -1;
    tdm_tensor_to_host(bt[6], &cnt, sizeof cnt);
    CHECK(cnt == 0 && bytes_equal(bt[0], snap_a[0]));
    CHECK(tdm_module_load(b, "/nonexistent/x.safetensors", "", true) == TDM_ERR_IO);

    // A prefix ("init." as in a golden training file) and dtype conversion (f64 in the file).
    const char *pnames[16];
    char pbuf[16][64];
    tdm_tensor *t64[16];
    for (int i = 0; i < 16; i++) {
        snprintf(pbuf[i], sizeof pbuf[i], "init.%s", names[i]);
        pnames[i] = pbuf[i];
        t64[i] = tdm_tensor_to(
            t[i], TDM_CPU, tdm_tensor_dtype(t[i]) == TDM_DTYPE_F32 ? TDM_DTYPE_F64 : TDM_DTYPE_I64);
    }
    CHECK(tdm_safetensors_save(path2, 16, pnames, (const tdm_tensor *const *)t64, 0, NULL) ==
          TDM_OK);
    tdm_module_init(b, 2);
    CHECK(tdm_module_load(b, path2, "", true) == TDM_ERR_FORMAT && has("missing entry '0.weight'"));
    CHECK_MSG(tdm_module_load(b, path2, "init.", true) == TDM_OK, "%s", tdm_last_error());
    CHECK(state_equals(b, snap_a, n));   // f32 -> f64 -> f32 is exact
    for (int i = 0; i < 16; i++) tdm_tensor_free(t64[i]);

    // Loaded weights give the same forward as the saved model (eval: running stats used).
    tdm_module_train(a, false);
    tdm_module_train(b, false);
    tdm_tensor *ya = tdm_module_forward(a, x), *yb = tdm_module_forward(b, x);
    CHECK(bytes_equal(ya, yb));
    tdm_tensor_free(ya);
    tdm_tensor_free(yb);

    snapshot_free(snap_a, n);
    snapshot_free(snap_b, n);
    tdm_tensor_free(x);
    tdm_module_free(a);
    tdm_module_free(b);
}

// ---- checkpointing ------------------------------------------------------------------------------

// One forward + cross-entropy (under bf16 autocast when amp) + backward (outside it) from fresh
// gradients; returns copies of the parameter gradients (and x's gradient last, when x requires
// grad) in g; the count.
static bool amp;

static int grads_of(tdm_module *m, tdm_tensor *x, const tdm_tensor *target, tdm_tensor **g) {
    tdm_tensor *p[32];
    int np = tdm_module_parameters(m, p, 32);
    for (int i = 0; i < np; i++) tdm_tensor_set_grad(p[i], NULL);
    tdm_tensor_set_grad(x, NULL);
    tdm_autocast_state ac = amp ? tdm_autocast_enter(TDM_DTYPE_BF16) : tdm_autocast_get();
    tdm_tensor *y = tdm_module_forward(m, x);
    tdm_tensor *loss = y ? tdm_cross_entropy(y, target, TDM_REDUCTION_MEAN, 0.0, -100) : NULL;
    tdm_autocast_exit(ac);
    CHECK(!y || tdm_tensor_dtype(y) == (amp ? TDM_DTYPE_BF16 : TDM_DTYPE_F32));
    tdm_status s = loss ? tdm_backward(loss, NULL) : tdm_last_status();
    CHECK_MSG(s == TDM_OK, "%s", tdm_last_error());
    int n = 0;
    for (int i = 0; i < np; i++) {
        tdm_tensor *gi = tdm_tensor_grad(p[i]);
        g[n++] = gi ? tdm_tensor_clone(gi) : NULL;
    }
    if (tdm_tensor_requires_grad(x)) {
        tdm_tensor *gx = tdm_tensor_grad(x);
        g[n++] = gx ? tdm_tensor_clone(gx) : NULL;
    }
    tdm_tensor_free(loss);
    tdm_tensor_free(y);
    return n;
}

static void check_same_grads(const char *what, tdm_tensor **a, tdm_tensor **b, int n) {
    for (int i = 0; i < n; i++)
        CHECK_MSG(a[i] && bytes_equal(a[i], b[i]), "%s: gradient %d differs (or is missing)", what,
                  i);
}

static void free_all(tdm_tensor **t, int n) {
    for (int i = 0; i < n; i++) tdm_tensor_free(t[i]);
}

// Bit-identical gradients with and without checkpointing for each segment count; the buffers
// (running stats, num_batches_tracked) end as without checkpointing.
static void checkpoint_compare(const char *what, tdm_module *m, tdm_tensor *x,
                               const tdm_tensor *target) {
    tdm_tensor *g0[40], *g1[40], *s0[40];
    CHECK(tdm_module_init(m, 3) == TDM_OK);
    CHECK(tdm_sequential_set_checkpoint_segments(m, 0) == TDM_OK);
    int n = grads_of(m, x, target, g0);
    int ns = state_snapshot(m, s0, 40);
    const int segs[] = {0, 2, 3, 4, 100};
    for (size_t k = 0; k < sizeof segs / sizeof *segs; k++) {
        CHECK(tdm_module_init(m, 3) == TDM_OK);   // the same weights and dropout streams
        CHECK(tdm_sequential_set_checkpoint_segments(m, segs[k]) == TDM_OK);
        int n1 = grads_of(m, x, target, g1);
        char buf[96];
        snprintf(buf, sizeof buf, "%s, %d segments", what, segs[k]);
        CHECK(n1 == n);
        check_same_grads(buf, g0, g1, n);
        CHECK_MSG(state_equals(m, s0, ns), "%s: the state differs (running stats updated twice?)",
                  buf);
        free_all(g1, n1);
    }
    CHECK(tdm_sequential_set_checkpoint_segments(m, 0) == TDM_OK);
    free_all(g0, n);
    snapshot_free(s0, ns);
}

// Peak bytes allocated over forward + loss + backward.
static int64_t peak_of(tdm_module *m, tdm_tensor *x, const tdm_tensor *target) {
    tdm_memory_stats s0, s1;
    CHECK(tdm_memory_stats_get(TDM_CPU, &s0) == TDM_OK && tdm_memory_reset_peak(TDM_CPU) == TDM_OK);
    tdm_tensor *g[40];
    int n = grads_of(m, x, target, g);
    CHECK(tdm_memory_stats_get(TDM_CPU, &s1) == TDM_OK);
    free_all(g, n);
    return s1.peak_allocated - s0.allocated;
}

static void test_checkpoint(void) {
    // A small MLP with dropout; x requires grad (its gradient must match too).
    tdm_module *mlp = tdm_nn_sequential(
        7, (tdm_module *[]){tdm_nn_linear(6, 16, true), tdm_nn_relu(), tdm_nn_dropout(0.3),
                            tdm_nn_linear(16, 16, true), tdm_nn_gelu(false), tdm_nn_dropout(0.3),
                            tdm_nn_linear(16, 4, true)});
    tdm_tensor *x = tdm_tensor_randn(2, (int64_t[]){8, 6}, TDM_DTYPE_F32, TDM_CPU, 11, 0);
    int64_t tv[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    tdm_tensor *target = tdm_tensor_from_host(1, (int64_t[]){8}, TDM_DTYPE_I64, TDM_CPU, tv);
    tdm_tensor_set_requires_grad(x, true);
    checkpoint_compare("mlp with dropout", mlp, x, target);
    // Under autocast (backward outside it): the recomputation runs under the forward's autocast.
    amp = true;
    checkpoint_compare("mlp with dropout, bf16 autocast", mlp, x, target);
    amp = false;
    // Nested Sequentials (dropouts inside them replay their masks too) and an empty one, which
    // hands its input on as a whole segment.
    tdm_module *nested = tdm_nn_sequential(
        4,
        (tdm_module *[]){
            tdm_nn_sequential(2, (tdm_module *[]){tdm_nn_linear(6, 8, true), tdm_nn_dropout(0.5)}),
            tdm_nn_sequential(0, NULL),
            tdm_nn_sequential(3, (tdm_module *[]){tdm_nn_linear(8, 8, true), tdm_nn_relu(),
                                                  tdm_nn_dropout(0.25)}),
            tdm_nn_linear(8, 4, true)});
    const char *nn_names[8];
    CHECK(tdm_module_state(nested, nn_names, NULL, 8) == 6 && !strcmp(nn_names[2], "2.0.weight") &&
          !strcmp(nn_names[5], "3.bias"));
    checkpoint_compare("nested", nested, x, target);
    tdm_module_free(nested);
    // Without grad mode: the same output, nothing recorded.
    tdm_module_init(mlp, 3);
    tdm_tensor *y0 = tdm_module_forward(mlp, x);
    tdm_module_init(mlp, 3);
    tdm_sequential_set_checkpoint_segments(mlp, 3);
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y1 = tdm_module_forward(mlp, x);
    tdm_grad_set_enabled(grad);
    CHECK(bytes_equal(y0, y1) && y1 && !tdm_tensor_requires_grad(y1));
    tdm_tensor_free(y0);
    tdm_tensor_free(y1);
    CHECK(tdm_sequential_set_checkpoint_segments(mlp, -1) == TDM_ERR_ARG);
    tdm_module *relu = tdm_nn_relu();
    CHECK(tdm_sequential_set_checkpoint_segments(relu, 2) == TDM_ERR_ARG &&
          has("not a Sequential"));
    tdm_module_free(relu);
    tdm_tensor_free(x);
    tdm_tensor_free(target);
    tdm_module_free(mlp);

    // The CNN (batch norm: running stats must be updated once); x without grad.
    tdm_module *cnn = tdm_nn_from_spec("cnn:3x8x8/c8k3p1-bn-relu-mp2-c8k3p1-bn-relu-ap2-flat-fc5");
    x = tdm_tensor_randn(4, (int64_t[]){4, 3, 8, 8}, TDM_DTYPE_F32, TDM_CPU, 12, 0);
    int64_t tc[4] = {4, 0, 2, 1};
    target = tdm_tensor_from_host(1, (int64_t[]){4}, TDM_DTYPE_I64, TDM_CPU, tc);
    checkpoint_compare("cnn", cnn, x, target);
    amp = true;
    checkpoint_compare("cnn, bf16 autocast", cnn, x, target);
    amp = false;
    tdm_tensor_free(x);
    tdm_tensor_free(target);
    tdm_module_free(cnn);

    // Peak memory: a deep, wide MLP whose activations outweigh its weights keeps less with
    // checkpointing (8 segments of 2 modules instead of all 16 modules' activations).
    tdm_module *kids[16];
    for (int i = 0; i < 16; i += 2) {
        kids[i] = tdm_nn_linear(128, 128, true);
        kids[i + 1] = tdm_nn_relu();
    }
    tdm_module *deep = tdm_nn_sequential(16, kids);
    x = tdm_tensor_randn(2, (int64_t[]){512, 128}, TDM_DTYPE_F32, TDM_CPU, 13, 0);
    int64_t *tt = calloc(512, sizeof *tt);
    for (int i = 0; i < 512; i++) tt[i] = i % 128;
    target = tdm_tensor_from_host(1, (int64_t[]){512}, TDM_DTYPE_I64, TDM_CPU, tt);
    free(tt);
    int64_t plain = peak_of(deep, x, target);
    tdm_sequential_set_checkpoint_segments(deep, 8);
    int64_t ckpt = peak_of(deep, x, target);
    printf("  peak allocated over forward+backward: %lld bytes plain, %lld with 8 segments\n",
           (long long)plain, (long long)ckpt);
    // Activations are 512x128 f32 = 256 KiB each. Without checkpointing the graph keeps 16 (each
    // Linear's input, each ReLU's); with it, the 7 checkpointed segments keep only their inputs and
    // the last segment its 2, and backward recomputes one segment's 2 at a time: 11 at the peak,
    // 5 fewer (1.25 MiB). Asked: at least 4 fewer.
    CHECK_MSG(ckpt < plain - 4 * 262144, "checkpointing saves less than 1 MiB: %lld vs %lld",
              (long long)ckpt, (long long)plain);
    tdm_tensor_free(x);
    tdm_tensor_free(target);
    tdm_module_free(deep);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_nn spec|init|forward|train_eval|state|checkpoint [TMPDIR]\n");
        return 2;
    }
    if (argc > 2) tmpdir = argv[2];
    const char *area = argv[1];
    if (!strcmp(area, "spec")) test_spec();
    else if (!strcmp(area, "init")) test_init();
    else if (!strcmp(area, "init_copy")) test_init_copy();
    else if (!strcmp(area, "forward")) test_forward();
    else if (!strcmp(area, "train_eval")) test_train_eval();
    else if (!strcmp(area, "state")) test_state();
    else if (!strcmp(area, "checkpoint")) test_checkpoint();
    else {
        fprintf(stderr, "test_nn: unknown area '%s'\n", area);
        return 2;
    }
    CHECK_DONE(area);
}

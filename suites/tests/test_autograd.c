/* test_autograd.c — the autograd engine and autocast (tandem/autograd.h, tandem/amp.h):
 *   gradcheck   leaf gradients of composite graphs (an MLP with cross-entropy; conv2d, batch
 *               norm, relu, max-pool, reshape, linear, log_softmax, mean) against central finite
 *               differences in f64;
 *   accumulate  two backwards give twice the gradient, in the same tensor; set_grad(NULL) clears;
 *   reuse       a tensor used twice (x*x, two branches) gets the summed gradient;
 *   nograd      grad mode off records nothing, and backward says so; non-scalar roots, leaves;
 *   hooks       once per leaf per backward, after its last contribution;
 *   autocast    bf16 policy: dtypes of linear/softmax/add outputs, f32 master gradients, values
 *               bit-equal to a manual cast-then-compute;
 *   lifetime    freeing in any order, a 20000-op chain (no recursion), custom nodes, no leaks
 *               (run under ASan);
 *   microbatch  K micro-batches of loss/K accumulate to the gradient of one batch K times larger.
 * usage: test_autograd [TEST...] (all when none is named) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

// ---- helpers ---------------------------------------------------------------------------

static uint64_t next_seed = 1;

// N(0,1) f64 values (or `dt`), optionally a leaf that requires grad.
static tdm_tensor *randn_t(int nd, const int64_t *shape, tdm_dtype dt, bool requires_grad) {
    tdm_tensor *t = tdm_tensor_randn(nd, shape, dt, TDM_CPU, 42, 1000 * next_seed++);
    if (t) tdm_tensor_set_requires_grad(t, requires_grad);
    return t;
}

static tdm_tensor *from_f64(int nd, const int64_t *shape, const double *v) {
    return tdm_tensor_from_host(nd, shape, TDM_DTYPE_F64, TDM_CPU, v);
}

static tdm_tensor *labels(int64_t n, const int64_t *v) {
    return tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, v);
}

// The elements of t as doubles (caller frees).
static double *values(const tdm_tensor *t) {
    int64_t n = tdm_tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (v && tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static double scalar(const tdm_tensor *t) {
    double v = NAN;
    if (t && tdm_tensor_numel(t) == 1) tdm_tensor_to_host_f64(t, &v);
    return v;
}

// Largest |a - b| over the elements of two tensors of equal numel (INFINITY if unreadable).
static double max_diff(const tdm_tensor *a, const tdm_tensor *b) {
    if (!a || !b || tdm_tensor_numel(a) != tdm_tensor_numel(b)) return INFINITY;
    double *x = values(a), *y = values(b), m = 0;
    for (int64_t i = 0; x && y && i < tdm_tensor_numel(a); i++) m = fmax(m, fabs(x[i] - y[i]));
    if (!x || !y) m = INFINITY;
    free(x);
    free(y);
    return m;
}

static bool has(const char *haystack, const char *needle) {
    return haystack && strstr(haystack, needle);
}

// ---- finite differences -----------------------------------------------------------------

typedef tdm_tensor *(*loss_fn)(void *ctx);

// Compares the gradient tdm_backward leaves in each f64 leaf with central differences
// (L(v + h) - L(v - h)) / 2h over every element, h = 1e-5 (1 + |v|). Tolerance
// 1e-6 (1 + |g|): truncation (h^2 |L'''| ~ 1e-10) and roundoff (1e-16 |L| / h ~ 1e-11) are far
// below it, while a wrong term in a backward is of the gradient's own size.
static void gradcheck(const char *label, loss_fn f, void *ctx, tdm_tensor **leaves, int n) {
    for (int k = 0; k < n; k++) tdm_tensor_set_grad(leaves[k], NULL);
    tdm_tensor *loss = f(ctx);
    CHECK_MSG(loss, "%s: forward: %s", label, tdm_last_error());
    if (!loss) return;
    CHECK_MSG(tdm_backward(loss, NULL) == TDM_OK, "%s: backward: %s", label, tdm_last_error());
    tdm_tensor_free(loss);
    bool grad = tdm_grad_set_enabled(false);
    int64_t checked = 0;
    for (int k = 0; k < n; k++) {
        tdm_tensor *g = tdm_tensor_grad(leaves[k]);
        CHECK_MSG(g, "%s: leaf %d has no gradient", label, k);
        if (!g) continue;
        double *an = values(g), *v = tdm_tensor_data(leaves[k]);
        double worst = 0;
        int64_t worst_i = 0;
        for (int64_t i = 0; an && i < tdm_tensor_numel(leaves[k]); i++) {
            double x0 = v[i], h = 1e-5 * (1 + fabs(x0));
            v[i] = x0 + h;
            tdm_tensor *lp = f(ctx);
            v[i] = x0 - h;
            tdm_tensor *lm = f(ctx);
            v[i] = x0;
            double fd = (scalar(lp) - scalar(lm)) / (2 * h);
            tdm_tensor_free(lp);
            tdm_tensor_free(lm);
            double err = fabs(fd - an[i]) / (1 + fabs(an[i]));
            if (!(err <= worst)) worst = err, worst_i = i;
            if (!(err <= 1e-6))
                CHECK_MSG(0, "%s: leaf %d element %lld: backward %.12g, finite differences %.12g",
                          label, k, (long long)i, an[i], fd);
            checked++;
        }
        if (getenv("TANDEM_TEST_VERBOSE"))
            printf("  %s leaf %d: worst relative error %.2e (element %lld)\n", label, k, worst,
                   (long long)worst_i);
        free(an);
    }
    tdm_grad_set_enabled(grad);
    CHECK(checked > 0);
}

// ---- gradcheck: an MLP and a small CNN ----------------------------------------------------

typedef struct {
    tdm_tensor *x, *w1, *b1, *w2, *b2, *target;
} mlp;

// cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), target), mean over the batch
static tdm_tensor *mlp_loss(void *ctx) {
    mlp *m = ctx;
    tdm_tensor *h = tdm_linear(m->x, m->w1, m->b1);
    tdm_tensor *a = tdm_relu(h);
    tdm_tensor *z = tdm_linear(a, m->w2, m->b2);
    tdm_tensor *loss = tdm_cross_entropy(z, m->target, TDM_REDUCTION_MEAN, 0.0, -100);
    tdm_tensor_free(h);
    tdm_tensor_free(a);
    tdm_tensor_free(z);
    return loss;
}

static mlp mlp_new(int64_t n, int64_t in, int64_t hid, int64_t out, bool x_requires_grad) {
    mlp m;
    m.x = randn_t(2, (int64_t[]){n, in}, TDM_DTYPE_F64, x_requires_grad);
    m.w1 = randn_t(2, (int64_t[]){hid, in}, TDM_DTYPE_F64, true);
    m.b1 = randn_t(1, (int64_t[]){hid}, TDM_DTYPE_F64, true);
    m.w2 = randn_t(2, (int64_t[]){out, hid}, TDM_DTYPE_F64, true);
    m.b2 = randn_t(1, (int64_t[]){out}, TDM_DTYPE_F64, true);
    int64_t *t = malloc((size_t)n * sizeof *t);
    for (int64_t i = 0; i < n; i++) t[i] = (i * 7 + 3) % out;
    m.target = labels(n, t);
    free(t);
    return m;
}

static void mlp_free(mlp *m) {
    tdm_tensor *all[] = {m->x, m->w1, m->b1, m->w2, m->b2, m->target};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tdm_tensor_free(all[i]);
}

typedef struct {
    tdm_tensor *x, *cw, *cb, *gamma, *beta, *rmean, *rvar, *fw, *fb;
} cnn;

// mean(log_softmax(linear(reshape(max_pool2d(relu(batch_norm(conv2d(x)))), (N, 12))), dim 1))
static tdm_tensor *cnn_loss(void *ctx) {
    cnn *c = ctx;
    tdm_conv2d_params cp = TDM_CONV2D_DEFAULT;
    cp.padding[0] = cp.padding[1] = 1;
    tdm_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, false, 0};
    tdm_tensor *t[8] = {0};
    t[0] = tdm_conv2d(c->x, c->cw, c->cb, &cp);                           // (2,3,5,5)
    t[1] = tdm_batch_norm(t[0], c->rmean, c->rvar, c->gamma, c->beta, true, 0.1, 1e-5, NULL,
                          NULL);
    t[2] = tdm_relu(t[1]);
    t[3] = tdm_max_pool2d(t[2], &pp);                                     // (2,3,2,2)
    t[4] = t[3] ? tdm_tensor_reshape(t[3], 2, (int64_t[]){2, 12}) : NULL;
    t[5] = tdm_linear(t[4], c->fw, c->fb);                                // (2,4)
    t[6] = tdm_log_softmax(t[5], 1);
    tdm_tensor *loss = tdm_mean(t[6], 0, NULL, false);
    for (int i = 0; i < 8; i++) tdm_tensor_free(t[i]);
    return loss;
}

static void test_gradcheck(void) {
    mlp m = mlp_new(4, 5, 6, 3, true);
    tdm_tensor *mleaves[] = {m.x, m.w1, m.b1, m.w2, m.b2};
    gradcheck("mlp", mlp_loss, &m, mleaves, 5);
    CHECK(!tdm_tensor_grad(m.target));   // integer: never a gradient
    mlp_free(&m);

    cnn c;
    c.x = randn_t(4, (int64_t[]){2, 2, 5, 5}, TDM_DTYPE_F64, true);
    c.cw = randn_t(4, (int64_t[]){3, 2, 3, 3}, TDM_DTYPE_F64, true);
    c.cb = randn_t(1, (int64_t[]){3}, TDM_DTYPE_F64, true);
    c.gamma = randn_t(1, (int64_t[]){3}, TDM_DTYPE_F64, true);
    c.beta = randn_t(1, (int64_t[]){3}, TDM_DTYPE_F64, true);
    c.rmean = tdm_tensor_zeros(1, (int64_t[]){3}, TDM_DTYPE_F64, TDM_CPU);
    c.rvar = tdm_tensor_zeros(1, (int64_t[]){3}, TDM_DTYPE_F64, TDM_CPU);
    c.fw = randn_t(2, (int64_t[]){4, 12}, TDM_DTYPE_F64, true);
    c.fb = randn_t(1, (int64_t[]){4}, TDM_DTYPE_F64, true);
    tdm_tensor *cleaves[] = {c.x, c.cw, c.cb, c.gamma, c.beta, c.fw, c.fb};
    gradcheck("cnn", cnn_loss, &c, cleaves, 7);
    CHECK(!tdm_tensor_grad(c.rmean) && !tdm_tensor_requires_grad(c.rvar));

    // The graph's names, from the loss back.
    tdm_tensor *loss = cnn_loss(&c);
    CHECK(has(tdm_tensor_grad_fn_name(loss), "mean"));
    CHECK(!tdm_tensor_is_leaf(loss) && tdm_tensor_requires_grad(loss));
    CHECK(tdm_tensor_is_leaf(c.cw) && !tdm_tensor_grad_fn_name(c.cw));
    tdm_tensor_free(loss);

    // batch_norm's statistics are outputs without a gradient: only output 0 has a grad_fn.
    tdm_tensor *sm = NULL, *si = NULL;
    tdm_tensor *x3 = randn_t(3, (int64_t[]){2, 3, 4}, TDM_DTYPE_F64, true);
    tdm_tensor *y = tdm_batch_norm(x3, NULL, NULL, c.gamma, c.beta, true, 0.1, 1e-5, &sm, &si);
    tdm_tensor_free(x3);
    CHECK(y && sm && si && has(tdm_tensor_grad_fn_name(y), "batch_norm"));
    CHECK(!tdm_tensor_requires_grad(sm) && !tdm_tensor_grad_fn_name(si));
    tdm_tensor_free(y);
    tdm_tensor_free(sm);
    tdm_tensor_free(si);
    tdm_tensor *all[] = {c.x, c.cw, c.cb, c.gamma, c.beta, c.rmean, c.rvar, c.fw, c.fb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tdm_tensor_free(all[i]);
}

// ---- more ops through the engine, against their backward functions called directly ----------

// sum(op(x) * w) for a fixed random w: the gradient of x is op's backward of w.
static void test_ops(void) {
    int64_t shape[2] = {3, 4};
    tdm_tensor *x = randn_t(2, shape, TDM_DTYPE_F64, true);
    tdm_tensor *w = randn_t(2, shape, TDM_DTYPE_F64, false);

    // dropout: the node redraws the mask from (p, seed, offset)
    tdm_tensor *y = tdm_dropout(x, 0.5, true, 7, 11);
    tdm_tensor *yw = tdm_mul(y, w);
    tdm_tensor *l = tdm_sum(yw, 0, NULL, false);
    CHECK(has(tdm_tensor_grad_fn_name(y), "dropout"));
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    tdm_tensor *expect = NULL;
    CHECK(tdm_dropout_backward(w, 0.5, true, 7, 11, &expect) == TDM_OK);
    CHECK(max_diff(tdm_tensor_grad(x), expect) == 0);
    tdm_tensor_free(expect);
    tdm_tensor_free(y);
    tdm_tensor_free(yw);
    tdm_tensor_free(l);

    // softmax (its node saves a detached alias of the output), gelu, sigmoid, reshape, clone, to
    tdm_tensor_set_grad(x, NULL);
    y = tdm_softmax(x, 1);
    tdm_tensor *g1 = tdm_gelu(y, false);
    tdm_tensor *r = tdm_tensor_reshape(g1, 1, (int64_t[]){12});
    tdm_tensor *c = tdm_tensor_clone(r);
    tdm_tensor *f = tdm_tensor_to(c, TDM_CPU, TDM_DTYPE_F32);
    tdm_tensor *wf = tdm_tensor_to(w, TDM_CPU, TDM_DTYPE_F32);
    tdm_tensor *wf1 = tdm_tensor_reshape(wf, 1, (int64_t[]){12});
    tdm_tensor *fw = tdm_mul(f, wf1);
    l = tdm_sum(fw, 0, NULL, false);
    CHECK(has(tdm_tensor_grad_fn_name(r), "reshape") && has(tdm_tensor_grad_fn_name(c), "clone"));
    CHECK(has(tdm_tensor_grad_fn_name(f), "to") && has(tdm_tensor_grad_fn_name(g1), "gelu"));
    CHECK(!tdm_tensor_grad_fn_name(wf));   // w does not require grad: nothing recorded
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    CHECK(tdm_tensor_dtype(tdm_tensor_grad(x)) == TDM_DTYPE_F64);
    // by hand: gw = w (rounded to f32 and back), through gelu and softmax
    tdm_tensor *wr = tdm_tensor_to(wf, TDM_CPU, TDM_DTYPE_F64);
    tdm_tensor *gg = NULL, *gs = NULL;
    CHECK(tdm_unary_backward(TDM_UNARY_GELU, wr, y, &gg) == TDM_OK);
    CHECK(tdm_softmax_backward(gg, y, 1, &gs) == TDM_OK);
    CHECK(max_diff(tdm_tensor_grad(x), gs) == 0);
    tdm_tensor *tmp[] = {y, g1, r, c, f, wf, wf1, fw, l, wr, gg, gs};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) tdm_tensor_free(tmp[i]);

    // embedding: the indices get nothing, the weight gets embedding_backward's gradient
    tdm_tensor *table = randn_t(2, (int64_t[]){5, 4}, TDM_DTYPE_F64, true);
    tdm_tensor *idx = labels(3, (int64_t[]){4, 0, 4});
    tdm_tensor *e = tdm_embedding(idx, table, 0);
    tdm_tensor *ew = tdm_mul(e, w);
    l = tdm_sum(ew, 0, NULL, false);
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    expect = NULL;
    CHECK(tdm_embedding_backward(w, idx, table, 0, &expect) == TDM_OK);
    CHECK(max_diff(tdm_tensor_grad(table), expect) == 0);
    CHECK(!tdm_tensor_grad(idx));
    tdm_tensor *tmp2[] = {table, idx, e, ew, l, expect};
    for (size_t i = 0; i < sizeof tmp2 / sizeof tmp2[0]; i++) tdm_tensor_free(tmp2[i]);

    // mse_loss: both sides get gradients, opposite in sign
    tdm_tensor *t2 = randn_t(2, shape, TDM_DTYPE_F64, true);
    tdm_tensor_set_grad(x, NULL);
    l = tdm_mse_loss(x, t2, TDM_REDUCTION_SUM);
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    double *gx = values(tdm_tensor_grad(x)), *gt = values(tdm_tensor_grad(t2));
    double *xv = values(x), *tv = values(t2);
    for (int i = 0; gx && gt && xv && tv && i < 12; i++) {
        CHECK(fabs(gx[i] - 2 * (xv[i] - tv[i])) < 1e-14);
        CHECK(gt[i] == -gx[i]);
    }
    free(gx), free(gt), free(xv), free(tv);
    tdm_tensor_free(l);
    tdm_tensor_free(t2);
    tdm_tensor_free(x);
    tdm_tensor_free(w);
}

// ---- accumulation, reuse ------------------------------------------------------------------

static void test_accumulate(void) {
    mlp m = mlp_new(4, 5, 6, 3, false);
    tdm_tensor *loss = mlp_loss(&m);
    CHECK(tdm_backward(loss, NULL) == TDM_OK);
    tdm_tensor *g = tdm_tensor_grad(m.w1);
    CHECK(g && tdm_tensor_dtype(g) == TDM_DTYPE_F64);
    double *g1 = values(g);
    // the same graph again: gradients add up, in the same tensor
    CHECK(tdm_backward(loss, NULL) == TDM_OK);
    CHECK(tdm_tensor_grad(m.w1) == g);
    double *g2 = values(g);
    for (int i = 0; g1 && g2 && i < 30; i++) CHECK(g2[i] == 2 * g1[i]);
    CHECK(!tdm_tensor_grad(m.x));   // x does not require grad
    // cleared: the next backward starts again from nothing
    CHECK(tdm_tensor_set_grad(m.w1, NULL) == TDM_OK && !tdm_tensor_grad(m.w1));
    CHECK(tdm_backward(loss, NULL) == TDM_OK);
    double *g3 = values(tdm_tensor_grad(m.w1));
    for (int i = 0; g1 && g3 && i < 30; i++) CHECK(g3[i] == g1[i]);
    // a gradient set by the caller is accumulated into (the caller's tensor sees the sum)
    tdm_tensor *mine = tdm_tensor_zeros(2, (int64_t[]){6, 5}, TDM_DTYPE_F64, TDM_CPU);
    CHECK(tdm_tensor_set_grad(m.w1, mine) == TDM_OK && tdm_tensor_grad(m.w1) == mine);
    CHECK(tdm_backward(loss, NULL) == TDM_OK);
    CHECK(tdm_tensor_grad(m.w1) == mine);
    double *g4 = values(mine);
    for (int i = 0; g1 && g4 && i < 30; i++) CHECK(g4[i] == g1[i]);
    tdm_tensor_free(mine);
    // set_grad refuses a gradient of another shape or dtype
    tdm_tensor *bad = tdm_tensor_zeros(1, (int64_t[]){6}, TDM_DTYPE_F64, TDM_CPU);
    CHECK(tdm_tensor_set_grad(m.w1, bad) == TDM_ERR_SHAPE && has(tdm_last_error(), "shape"));
    tdm_tensor_free(bad);
    bad = tdm_tensor_zeros(2, (int64_t[]){6, 5}, TDM_DTYPE_F32, TDM_CPU);
    CHECK(tdm_tensor_set_grad(m.w1, bad) == TDM_ERR_DTYPE);
    tdm_tensor_free(bad);
    free(g1), free(g2), free(g3), free(g4);
    tdm_tensor_free(loss);
    mlp_free(&m);
}

static void test_reuse(void) {
    double xv[4] = {0.5, -1.25, 2.0, 3.5};
    tdm_tensor *x = from_f64(1, (int64_t[]){4}, xv);
    tdm_tensor_set_requires_grad(x, true);
    // l = sum(x * x) + 3 sum(x): x is both inputs of mul, and feeds two branches
    tdm_tensor *xx = tdm_mul(x, x);
    tdm_tensor *s1 = tdm_sum(xx, 0, NULL, false), *s2 = tdm_sum(x, 0, NULL, false);
    tdm_tensor *l = tdm_add(s1, s2, 3.0);
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    double *g = values(tdm_tensor_grad(x));
    for (int i = 0; g && i < 4; i++) CHECK_MSG(g[i] == 2 * xv[i] + 3, "%g", g[i]);
    free(g);
    // a non-leaf used twice: y = relu(x); l = sum(y * y) -> 2 relu(x) relu'(x)
    tdm_tensor_set_grad(x, NULL);
    tdm_tensor *y = tdm_relu(x), *yy = tdm_mul(y, y), *l2 = tdm_sum(yy, 0, NULL, false);
    CHECK(tdm_backward(l2, NULL) == TDM_OK);
    g = values(tdm_tensor_grad(x));
    for (int i = 0; g && i < 4; i++) CHECK(g[i] == (xv[i] > 0 ? 2 * xv[i] : 0));
    free(g);
    tdm_tensor *all[] = {x, xx, s1, s2, l, y, yy, l2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tdm_tensor_free(all[i]);
}

// ---- no-grad mode, errors -------------------------------------------------------------------

static void test_nograd(void) {
    mlp m = mlp_new(4, 5, 6, 3, false);
    CHECK(tdm_grad_enabled());
    bool prev = tdm_grad_set_enabled(false);
    CHECK(prev && !tdm_grad_enabled());
    tdm_tensor *loss = mlp_loss(&m);
    tdm_tensor *h = tdm_linear(m.x, m.w1, m.b1);
    tdm_grad_set_enabled(prev);
    CHECK(tdm_grad_enabled());
    CHECK(loss && !tdm_tensor_grad_fn_name(loss) && !tdm_tensor_requires_grad(loss));
    CHECK(h && !tdm_tensor_grad_fn_name(h) && tdm_tensor_is_leaf(h));
    CHECK(tdm_backward(loss, NULL) == TDM_ERR_ARG);
    CHECK_MSG(has(tdm_last_error(), "does not require grad"), "%s", tdm_last_error());
    CHECK(!tdm_tensor_grad(m.w1));
    tdm_tensor_free(loss);

    // a non-scalar root needs grad_output; with it, backward works
    tdm_tensor *y = tdm_linear(m.x, m.w1, m.b1);
    CHECK(tdm_backward(y, NULL) == TDM_ERR_SHAPE);
    CHECK_MSG(has(tdm_last_error(), "grad can be implicitly created only for scalar outputs"),
              "%s", tdm_last_error());
    tdm_tensor *gy = tdm_tensor_zeros(2, (int64_t[]){2, 6}, TDM_DTYPE_F64, TDM_CPU);
    CHECK(tdm_backward(y, gy) == TDM_ERR_SHAPE && has(tdm_last_error(), "shape"));
    tdm_tensor_free(gy);
    gy = randn_t(2, (int64_t[]){4, 6}, TDM_DTYPE_F64, false);
    CHECK(tdm_backward(y, gy) == TDM_OK);
    tdm_tensor *gw = NULL;
    CHECK(tdm_linear_backward(gy, m.x, m.w1, NULL, &gw, NULL) == TDM_OK);
    CHECK(max_diff(tdm_tensor_grad(m.w1), gw) == 0);
    tdm_tensor_free(gw);
    tdm_tensor_free(gy);

    // a leaf as the root: its gradient is the seed
    tdm_tensor *s = randn_t(0, NULL, TDM_DTYPE_F64, true);
    CHECK(tdm_backward(s, NULL) == TDM_OK && scalar(tdm_tensor_grad(s)) == 1.0);
    tdm_tensor_free(s);

    // requires_grad: floating leaves only; a computed tensor cannot drop it; detach does
    tdm_tensor *idx = labels(2, (int64_t[]){0, 1});
    tdm_tensor_set_requires_grad(idx, true);
    CHECK(!tdm_tensor_requires_grad(idx) && has(tdm_last_error(), "floating point"));
    tdm_tensor_set_requires_grad(y, false);
    CHECK(tdm_tensor_requires_grad(y) && has(tdm_last_error(), "leaf"));
    tdm_tensor *d = tdm_tensor_detach(y);
    CHECK(d && !tdm_tensor_requires_grad(d) && tdm_tensor_is_leaf(d));
    CHECK(tdm_tensor_data(d) == tdm_tensor_data(y));   // shares the storage
    tdm_tensor_free(d);
    tdm_tensor_free(idx);
    tdm_tensor_free(y);
    tdm_tensor_free(h);
    mlp_free(&m);
}

// ---- hooks ----------------------------------------------------------------------------------

typedef struct {
    int calls;
    double grad_at_call[8];   // the first elements of the gradient when the hook ran
} hook_log;

static void hook(tdm_tensor *leaf, void *ctx) {
    hook_log *h = ctx;
    tdm_tensor *g = tdm_tensor_grad(leaf);
    double v[64];
    if (g && tdm_tensor_numel(g) <= 64 && tdm_tensor_to_host_f64(g, v) == TDM_OK)
        memcpy(h->grad_at_call, v, sizeof h->grad_at_call);
    h->calls++;
}

static void test_hooks(void) {
    // w feeds three consumers: linear, and both sides of w * w; b one (linear).
    tdm_tensor *x = randn_t(2, (int64_t[]){3, 4}, TDM_DTYPE_F64, false);
    tdm_tensor *w = randn_t(2, (int64_t[]){2, 4}, TDM_DTYPE_F64, true);
    tdm_tensor *b = randn_t(1, (int64_t[]){2}, TDM_DTYPE_F64, true);
    hook_log hw = {0}, hb = {0};
    tdm_tensor_set_grad_hook(w, hook, &hw);
    tdm_tensor_set_grad_hook(b, hook, &hb);
    tdm_tensor *y = tdm_linear(x, w, b), *ww = tdm_mul(w, w);
    tdm_tensor *s1 = tdm_sum(y, 0, NULL, false), *s2 = tdm_sum(ww, 0, NULL, false);
    tdm_tensor *l = tdm_add(s1, s2, 1.0);
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    CHECK_MSG(hw.calls == 1 && hb.calls == 1, "calls %d %d", hw.calls, hb.calls);
    double *g = values(tdm_tensor_grad(w));
    for (int i = 0; g && i < 8; i++) CHECK(hw.grad_at_call[i] == g[i]);   // complete at the call
    free(g);
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    CHECK(hw.calls == 2 && hb.calls == 2);
    g = values(tdm_tensor_grad(w));
    for (int i = 0; g && i < 8; i++) CHECK(hw.grad_at_call[i] == g[i]);
    free(g);
    // removed: no more calls
    tdm_tensor_set_grad_hook(w, NULL, NULL);
    CHECK(tdm_backward(l, NULL) == TDM_OK);
    CHECK(hw.calls == 2 && hb.calls == 3);
    tdm_tensor *all[] = {x, w, b, y, ww, s1, s2, l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tdm_tensor_free(all[i]);
}

// ---- autocast -----------------------------------------------------------------------------

static void test_autocast(void) {
    CHECK(!tdm_autocast_get().enabled);
    tdm_tensor *x = randn_t(2, (int64_t[]){4, 8}, TDM_DTYPE_F32, false);
    tdm_tensor *w = randn_t(2, (int64_t[]){5, 8}, TDM_DTYPE_F32, true);
    tdm_tensor *b = randn_t(1, (int64_t[]){5}, TDM_DTYPE_F32, true);
    tdm_tensor *t = labels(4, (int64_t[]){0, 4, 2, 1});

    tdm_autocast_state prev = tdm_autocast_enter(TDM_DTYPE_BF16);
    CHECK(!prev.enabled && tdm_autocast_get().enabled &&
          tdm_autocast_get().dtype == TDM_DTYPE_BF16);
    tdm_tensor *y = tdm_linear(x, w, b);
    tdm_tensor *p = tdm_softmax(y, 1);
    tdm_tensor *loss = tdm_cross_entropy(y, t, TDM_REDUCTION_MEAN, 0.0, -100);
    tdm_tensor *mixed = tdm_add(y, p, 1.0);   // bf16 + f32 -> f32
    tdm_tensor *x64 = tdm_tensor_to(x, TDM_CPU, TDM_DTYPE_F64);
    tdm_tensor *w64 = tdm_tensor_to(w, TDM_CPU, TDM_DTYPE_F64);
    tdm_tensor *y64 = tdm_linear(x64, w64, NULL);   // f64 is never cast
    // nested scopes restore what they found; f32 is not an autocast dtype
    tdm_autocast_state inner = tdm_autocast_enter(TDM_DTYPE_F16);
    CHECK(tdm_autocast_get().dtype == TDM_DTYPE_F16);
    tdm_autocast_exit(inner);
    tdm_autocast_state same = tdm_autocast_enter(TDM_DTYPE_F32);
    CHECK(tdm_autocast_get().dtype == TDM_DTYPE_BF16 && has(tdm_last_error(), "f32"));
    tdm_autocast_exit(same);
    tdm_autocast_exit(prev);
    CHECK(!tdm_autocast_get().enabled);

    CHECK(y && tdm_tensor_dtype(y) == TDM_DTYPE_BF16);
    CHECK(p && tdm_tensor_dtype(p) == TDM_DTYPE_F32);
    CHECK(loss && tdm_tensor_dtype(loss) == TDM_DTYPE_F32);
    CHECK(mixed && tdm_tensor_dtype(mixed) == TDM_DTYPE_F32);
    CHECK(y64 && tdm_tensor_dtype(y64) == TDM_DTYPE_F64);
    CHECK(tdm_backward(loss, NULL) == TDM_OK);
    tdm_tensor *gw = tdm_tensor_grad(w), *gb = tdm_tensor_grad(b);
    CHECK(gw && tdm_tensor_dtype(gw) == TDM_DTYPE_F32);   // f32 master weights, f32 gradients
    CHECK(gb && tdm_tensor_dtype(gb) == TDM_DTYPE_F32);

    // by hand, autocast off: cast to bf16, compute, cast up; the backward in reverse
    tdm_tensor *xb = tdm_tensor_to(x, TDM_CPU, TDM_DTYPE_BF16);
    tdm_tensor *wb = tdm_tensor_to(w, TDM_CPU, TDM_DTYPE_BF16);
    tdm_tensor *bb = tdm_tensor_to(b, TDM_CPU, TDM_DTYPE_BF16);
    tdm_tensor *yr = tdm_linear(xb, wb, bb);
    tdm_tensor *yf = tdm_tensor_to(yr, TDM_CPU, TDM_DTYPE_F32);
    tdm_tensor *pr = tdm_softmax(yf, 1);
    tdm_tensor *lr = tdm_cross_entropy(yf, t, TDM_REDUCTION_MEAN, 0.0, -100);
    CHECK(max_diff(y, yr) == 0 && max_diff(p, pr) == 0 && max_diff(loss, lr) == 0);
    tdm_grad_set_enabled(false);
    tdm_tensor *one = tdm_tensor_to(lr, TDM_CPU, TDM_DTYPE_F32);   // any scalar: overwritten
    double v1 = 1.0;
    tdm_tensor *h1 = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F64, TDM_CPU, &v1);
    tdm_tensor_copy_(one, h1);
    tdm_tensor *gl = NULL, *gyb = NULL, *gwb = NULL, *gbb = NULL;
    CHECK(tdm_cross_entropy_backward(one, yf, t, TDM_REDUCTION_MEAN, 0.0, -100, &gl) == TDM_OK);
    gyb = gl ? tdm_tensor_to(gl, TDM_CPU, TDM_DTYPE_BF16) : NULL;
    CHECK(tdm_linear_backward(gyb, xb, wb, NULL, &gwb, &gbb) == TDM_OK);
    tdm_tensor *gwf = gwb ? tdm_tensor_to(gwb, TDM_CPU, TDM_DTYPE_F32) : NULL;
    tdm_tensor *gbf = gbb ? tdm_tensor_to(gbb, TDM_CPU, TDM_DTYPE_F32) : NULL;
    tdm_grad_set_enabled(true);
    CHECK(max_diff(gw, gwf) == 0 && max_diff(gb, gbf) == 0);
    CHECK(max_diff(gw, gwf) < INFINITY && scalar(loss) > 0);

    tdm_tensor *all[] = {x,  w,  b,  t,  y,  p,   loss, mixed, x64, w64, y64, xb,  wb,  bb,
                         yr, yf, pr, lr, one, h1, gl,   gyb,   gwb, gbb, gwf, gbf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tdm_tensor_free(all[i]);
}

// ---- lifetime, custom nodes ---------------------------------------------------------------

static int ctx_frees;
static void ctx_free(void *ctx) {
    ctx_frees++;
    free(ctx);
}

// gx = scale * gy, the scale in ctx
static tdm_status scale_backward(void *ctx, const tdm_tensor *gy, tdm_tensor **gin) {
    double *scale = ctx;
    tdm_tensor *s = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F64, TDM_CPU, scale);
    gin[0] = s ? tdm_mul(gy, s) : NULL;
    tdm_tensor_free(s);
    return gin[0] ? TDM_OK : tdm_last_status();
}

// a gradient of the wrong shape: the engine must refuse it with a message naming the node
static tdm_status bad_backward(void *ctx, const tdm_tensor *gy, tdm_tensor **gin) {
    (void)ctx;
    (void)gy;
    gin[0] = tdm_tensor_zeros(1, (int64_t[]){7}, TDM_DTYPE_F64, TDM_CPU);
    return TDM_OK;
}

static void test_lifetime(void) {
    // the parameters freed before the loss: the graph keeps what it needs
    mlp m = mlp_new(4, 5, 6, 3, false);
    tdm_tensor *loss = mlp_loss(&m);
    tdm_tensor *w1 = tdm_tensor_retain(m.w1);
    mlp_free(&m);
    CHECK(tdm_backward(loss, NULL) == TDM_OK && tdm_tensor_grad(w1));
    tdm_tensor_free(loss);
    tdm_tensor_free(w1);

    // a chain of 20000 ops: freed one node at a time, walked without recursion
    double one = 1.0;
    tdm_tensor *x = from_f64(0, NULL, &one);
    tdm_tensor_set_requires_grad(x, true);
    tdm_tensor *c = from_f64(0, NULL, &one);
    tdm_tensor *y = tdm_tensor_retain(x);
    for (int i = 0; i < 20000 && y; i++) {
        tdm_tensor *next = i % 2 ? tdm_add(y, c, 1.0) : tdm_mul(y, c);
        tdm_tensor_free(y);
        y = next;
    }
    CHECK(y && scalar(y) == 10001.0);
    CHECK(tdm_backward(y, NULL) == TDM_OK && scalar(tdm_tensor_grad(x)) == 1.0);
    tdm_tensor_free(y);
    tdm_tensor_free(c);

    // custom nodes: routed like any op, ctx freed with the node
    double *scale = malloc(sizeof *scale);
    *scale = 3.0;
    tdm_tensor_set_grad(x, NULL);
    bool grad = tdm_grad_set_enabled(false);   // the "forward": out = x, unrecorded
    tdm_tensor *out = tdm_tensor_clone(x);
    tdm_grad_set_enabled(grad);
    CHECK(out && !tdm_tensor_grad_fn_name(out));
    CHECK(tdm_autograd_custom("scale3", &x, 1, out, scale_backward, scale, ctx_free) == out);
    CHECK(has(tdm_tensor_grad_fn_name(out), "scale3"));
    tdm_tensor *sq = tdm_mul(out, out);   // d/dx (3x)^2 with the forward out = x: 2 out * 3
    CHECK(tdm_backward(sq, NULL) == TDM_OK && scalar(tdm_tensor_grad(x)) == 6.0);
    tdm_tensor_free(sq);
    CHECK(ctx_frees == 0);
    tdm_tensor_free(out);
    CHECK(ctx_frees == 1);

    // a custom backward returning a wrong shape: an error naming the node, nothing leaks
    int *dummy = malloc(sizeof *dummy);
    out = tdm_tensor_detach(x);
    CHECK(tdm_autograd_custom("badshape", &x, 1, out, bad_backward, dummy, ctx_free) == out);
    CHECK(tdm_backward(out, NULL) == TDM_ERR_SHAPE);
    CHECK_MSG(has(tdm_last_error(), "backward of badshape, input 0"), "%s", tdm_last_error());
    tdm_tensor_free(out);
    CHECK(ctx_frees == 2);
    // bad arguments: ctx freed, NULL returned
    CHECK(!tdm_autograd_custom("none", &x, 1, NULL, bad_backward, malloc(4), ctx_free));
    CHECK(ctx_frees == 3);
    tdm_tensor_free(x);
}

// ---- gradient accumulation over micro-batches -------------------------------------------------

// Rows [r0, r0 + n) of a (N, D) f64 tensor, and of its labels.
static tdm_tensor *rows(const tdm_tensor *t, int64_t r0, int64_t n) {
    const int64_t *s = tdm_tensor_shape(t);
    int64_t d = tdm_tensor_ndim(t) == 2 ? s[1] : 1;
    size_t es = tdm_dtype_size(tdm_tensor_dtype(t));
    int64_t shape[2] = {n, d};
    return tdm_tensor_from_host(tdm_tensor_ndim(t), shape, tdm_tensor_dtype(t), TDM_CPU,
                                (const char *)tdm_tensor_data_const(t) + (size_t)(r0 * d) * es);
}

static void test_microbatch(void) {
    enum { K = 4, B = 3 };
    mlp m = mlp_new(K * B, 5, 7, 4, false);
    tdm_tensor *params[] = {m.w1, m.b1, m.w2, m.b2};
    tdm_tensor *loss = mlp_loss(&m);
    CHECK(tdm_backward(loss, NULL) == TDM_OK);
    tdm_tensor_free(loss);
    tdm_tensor *full[4];
    for (int k = 0; k < 4; k++) {
        full[k] = tdm_tensor_retain(tdm_tensor_grad(params[k]));
        tdm_tensor_set_grad(params[k], NULL);
    }
    // loss / K per micro-batch, gradients accumulating until read
    double inv_k = 1.0 / K;
    tdm_tensor *scale = from_f64(0, NULL, &inv_k);
    tdm_tensor *x = m.x, *t = m.target;
    for (int i = 0; i < K; i++) {
        m.x = rows(x, i * B, B);
        m.target = rows(t, i * B, B);
        tdm_tensor *l = mlp_loss(&m);
        tdm_tensor *ls = tdm_mul(l, scale);
        CHECK(tdm_backward(ls, NULL) == TDM_OK);
        tdm_tensor_free(l);
        tdm_tensor_free(ls);
        tdm_tensor_free(m.x);
        tdm_tensor_free(m.target);
    }
    m.x = x;
    m.target = t;
    // f64: the two sums differ only by rounding (a few ulps of the gradient's size)
    for (int k = 0; k < 4; k++) {
        double d = max_diff(tdm_tensor_grad(params[k]), full[k]);
        CHECK_MSG(d < 1e-14, "param %d: accumulated vs full batch differ by %g", k, d);
        tdm_tensor_free(full[k]);
    }
    tdm_tensor_free(scale);
    mlp_free(&m);
}

// ---- main ---------------------------------------------------------------------------------

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"gradcheck", test_gradcheck}, {"ops", test_ops},         {"accumulate", test_accumulate},
        {"reuse", test_reuse},         {"nograd", test_nograd},   {"hooks", test_hooks},
        {"autocast", test_autocast},   {"lifetime", test_lifetime}, {"microbatch", test_microbatch},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        bool wanted = argc < 2;
        for (int a = 1; a < argc; a++) wanted |= !strcmp(argv[a], tests[i].name);
        if (!wanted) continue;
        tests[i].fn();
        ran++;
    }
    CHECK_MSG(ran > 0, "no test named %s", argc > 1 ? argv[1] : "");
    CHECK_DONE("autograd");
}

/* test_gpt.c — the GPT model (nn.h's tdm_nn_gpt, the gpt: grammar): nanoGPT's state-dict names
 * and shapes, weight tying (one parameter, stepped once, saved once as safetensors' save_model
 * does, loaded from either form), GPT-2's init, the forward's shapes and errors, dropout's
 * streams, activation checkpointing (bit-identical gradients), step 0 of a golden file
 * (tandem-gpt/1: logits, loss and every parameter's gradient, by check_gpt.c's rule) and the
 * golden file's whole run through bench train (AdamW, clipping, the schedule).
 * Usage: test_gpt AREA TMPDIR [GOLDEN_DIR], AREA one of spec structure init forward state
 * checkpoint; test_gpt step0 GOLDEN_FILE DEVICE PRECISION TMPDIR (f32, tf32, bf16, fp16; exit 77
 * when DEVICE is absent); test_gpt golden BENCH GOLDEN_FILE DEVICE PRECISION TMPDIR [FLAGS...]
 * (a whole run through bench train, judged; FLAGS appended to its command); test_gpt
 * resume-compare A B C (a run, its first part and the resumed rest); test_gpt eval STATE SPEC
 * TOKENS A:B (prints a state's loss on token rows); test_gpt write-tokens DIR (malformed token
 * files). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "harness/check/check.h"  // check_gpt_judge
#include "tandem/tandem.h"
#include "tensor_eq.h"

static const char *tmpdir = ".", *golden_dir = NULL;

static bool has(const char *needle) {
    return strstr(tdm_last_error(), needle) != NULL;
}

static double *host(const tdm_tensor *t) {
    double *v = malloc((size_t)tdm_tensor_numel(t) * sizeof *v + 8);
    if (v && tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        free(v);
        return NULL;
    }
    return v;
}

// A batch of token indices (B,T) with values i * 7 + 3 modulo V.
static tdm_tensor *tokens(int64_t B, int64_t T, int64_t V, int64_t salt) {
    int64_t *v = malloc((size_t)(B * T) * sizeof *v), shape[2] = {B, T};
    for (int64_t i = 0; i < B * T; i++) v[i] = (i * 7 + 3 + salt) % V;
    tdm_tensor *t = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, TDM_CPU, v);
    free(v);
    return t;
}

// ---- spec ---------------------------------------------------------------------------------------

static void test_spec(void) {
    tdm_gpt_config c;
    CHECK(tdm_nn_gpt_spec("gpt:L2-H2-D32-T16-V67", &c) == TDM_OK && c.n_layer == 2 &&
          c.n_head == 2 && c.n_embd == 32 && c.block_size == 16 && c.vocab_size == 67 &&
          c.dropout == 0 && c.gelu_tanh);
    CHECK(tdm_nn_gpt_spec("gpt:V5-T4-D6-H3-L1-drop0.25-erf", &c) == TDM_OK && c.n_layer == 1 &&
          c.n_head == 3 && c.n_embd == 6 && c.block_size == 4 && c.vocab_size == 5 &&
          c.dropout == 0.25 && !c.gelu_tanh);
    CHECK(tdm_nn_gpt_spec("gpt:L1-H1-D4-T4-V5-drop.1", &c) == TDM_OK && c.dropout == 0.1);
    int nd = 0;
    int64_t s[2];
    CHECK(tdm_nn_spec_input_shape("gpt:L1-H1-D4-T9-V5", &nd, s) == TDM_OK && nd == 1 && s[0] == 9);
    struct {
        const char *spec, *msg;
    } bad[] = {
        {"gpt:L2-H2-D32-T16", "'V' is missing"},
        {"gpt:H2-D32-T16-V67", "'L' is missing"},
        {"gpt:L2-H3-D32-T16-V67", "D32 (n_embd) must be a multiple of H3"},
        {"gpt:L2-H2-D32-T16-V67-L3", "token 'L3': given twice"},
        {"gpt:L0-H2-D32-T16-V67", "token 'L0': needs a positive integer"},
        {"gpt:Lx-H2-D32-T16-V67", "token 'Lx'"},
        {"gpt:L2-H2-D32-T16-V67-drop1", "token 'drop1': dropP needs a probability in [0, 1)"},
        {"gpt:L2-H2-D32-T16-V67-drop", "token 'drop': unknown token"},
        {"gpt:L2-H2-D32-T16-V67-drop0.1x", "token 'drop0.1x'"},
        {"gpt:L2-H2-D32-T16-V67-", "empty"},
        {"gpt:L2-H2-D32-T16-V67-bias", "token 'bias': unknown token"},
        {"gpt:L2-H2-D32-T16-V99999999999", "token 'V99999999999'"},
        {"gpt:", "token '': empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tdm_module *m = tdm_nn_from_spec(bad[i].spec);
        CHECK_MSG(!m && has(bad[i].msg), "%s: '%s', expected '%s'", bad[i].spec, tdm_last_error(),
                  bad[i].msg);
        tdm_module_free(m);
        CHECK(tdm_nn_spec_input_shape(bad[i].spec, &nd, s) == TDM_ERR_ARG);
    }
    tdm_gpt_config z = {1, 1, 4, 4, 5, 1.0, true};
    CHECK(!tdm_nn_gpt(&z) && has("dropout must be in [0, 1)"));
    z.dropout = 0;
    z.n_head = 3;
    CHECK(!tdm_nn_gpt(&z) && has("multiple of n_head"));
    CHECK(!tdm_nn_gpt(NULL));
}

// ---- structure: names, shapes, tying ------------------------------------------------------------

static void test_structure(void) {
    // nanoGPT's GPT(GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=11))
    // .state_dict(), as gen_gpt.py's self-check lists it (NANOGPT_NAMES_L1), with the shapes.
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[2];
    } want[] = {
        {"transformer.wte.weight", 2, {11, 8}},
        {"transformer.wpe.weight", 2, {4, 8}},
        {"transformer.h.0.ln_1.weight", 1, {8}},
        {"transformer.h.0.ln_1.bias", 1, {8}},
        {"transformer.h.0.attn.c_attn.weight", 2, {24, 8}},
        {"transformer.h.0.attn.c_attn.bias", 1, {24}},
        {"transformer.h.0.attn.c_proj.weight", 2, {8, 8}},
        {"transformer.h.0.attn.c_proj.bias", 1, {8}},
        {"transformer.h.0.ln_2.weight", 1, {8}},
        {"transformer.h.0.ln_2.bias", 1, {8}},
        {"transformer.h.0.mlp.c_fc.weight", 2, {32, 8}},
        {"transformer.h.0.mlp.c_fc.bias", 1, {32}},
        {"transformer.h.0.mlp.c_proj.weight", 2, {8, 32}},
        {"transformer.h.0.mlp.c_proj.bias", 1, {8}},
        {"transformer.ln_f.weight", 1, {8}},
        {"transformer.ln_f.bias", 1, {8}},
        {"lm_head.weight", 2, {11, 8}},
    };
    tdm_module *m = tdm_nn_from_spec("gpt:L1-H2-D8-T4-V11");
    CHECK_MSG(m, "%s", tdm_last_error());
    if (!m) return;
    const char *names[32];
    tdm_tensor *st[32], *p[32];
    int n = tdm_module_state(m, names, st, 32);
    CHECK_MSG(n == 17, "%d state entries", n);
    for (int i = 0; i < n && i < 17; i++) {
        CHECK_MSG(!strcmp(names[i], want[i].name), "entry %d: %s, expected %s", i, names[i],
                  want[i].name);
        bool shape = tdm_tensor_ndim(st[i]) == want[i].ndim;
        for (int d = 0; shape && d < want[i].ndim; d++)
            shape = tdm_tensor_shape(st[i])[d] == want[i].shape[d];
        CHECK_MSG(shape && tdm_tensor_dtype(st[i]) == TDM_DTYPE_F32, "%s: shape or dtype",
                  names[i]);
    }
    // Tied: lm_head.weight is transformer.wte.weight; the parameters list it once, first (as
    // named_parameters()), so an optimizer steps it once.
    CHECK(n == 17 && st[16] == st[0]);
    int np = tdm_module_parameters(m, p, 32);
    CHECK_MSG(np == 16, "%d parameters", np);
    for (int i = 0; i < np && i < 16; i++) {
        CHECK(p[i] == st[i] && tdm_tensor_requires_grad(p[i]) && tdm_tensor_is_leaf(p[i]));
        for (int j = 0; j < i; j++) CHECK(p[i] != p[j]);
    }
    // One SGD step moves the tied weight by lr * grad once: p - lr g, rounded once to f32.
    tdm_tensor *x = tokens(2, 4, 11, 0), *y = tokens(2, 4, 11, 5);
    tdm_tensor *logits = tdm_module_forward(m, x), *loss = logits ? tdm_gpt_loss(logits, y) : NULL;
    CHECK_MSG(loss && tdm_backward(loss, NULL) == TDM_OK, "%s", tdm_last_error());
    tdm_tensor *g = tdm_tensor_grad(st[0]);
    double *w0 = host(st[0]), *g0 = g ? host(g) : NULL;
    tdm_sgd_params sp = {.lr = 0.5};
    tdm_optimizer *o = tdm_optim_sgd(p, np, &sp);
    CHECK(o && tdm_optimizer_step(o) == TDM_OK);
    double *w1 = host(st[0]);
    bool once = w0 && g0 && w1, moved = false;
    for (int64_t i = 0; once && i < tdm_tensor_numel(st[0]); i++) {
        once = w1[i] == (double)(float)(w0[i] - 0.5 * g0[i]);
        moved = moved || w1[i] != w0[i];
    }
    CHECK_MSG(once && moved, "the tied weight was not stepped exactly once");
    free(w0);
    free(g0);
    free(w1);
    tdm_optimizer_free(o);
    tdm_tensor_free(loss);
    tdm_tensor_free(logits);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    tdm_module_free(m);
}

// ---- init -------------------------------------------------------------------------------------

static void test_init(void) {
    // GPT-2's init (gen_gpt.py's self-check, same model): N(0, 0.02), the c_proj weights
    // N(0, 0.02/sqrt(2L)), biases 0, LayerNorms 1 and 0; by the module seed.
    tdm_gpt_config c = {2, 4, 64, 64, 512, 0, true};
    tdm_module *a = tdm_nn_gpt(&c), *b = tdm_nn_gpt(&c);
    CHECK_MSG(a && b, "%s", tdm_last_error());
    if (!a || !b) return;
    CHECK(tdm_module_init(a, 7) == TDM_OK && tdm_module_init(b, 7) == TDM_OK);
    const char *names[64];
    tdm_tensor *st[64], *sb[64];
    int n = tdm_module_state(a, names, st, 64);
    tdm_module_state(b, NULL, sb, 64);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(tensors_identical(st[i], sb[i]), "%s differs for one seed", names[i]);
        int64_t k = tdm_tensor_numel(st[i]);
        double *v = host(st[i]), sum = 0, sq = 0;
        for (int64_t j = 0; v && j < k; j++) {
            sum += v[j];
            sq += v[j] * v[j];
        }
        double mean = sum / (double)k, sd = sqrt(sq / (double)k - mean * mean);
        const char *nm = names[i];
        size_t l = strlen(nm);
        if (tdm_tensor_ndim(st[i]) == 2) {
            double want = strstr(nm, "c_proj.weight") ? 0.02 / sqrt(4.0) : 0.02;
            CHECK_MSG(fabs(sd / want - 1) < 0.05 && fabs(mean) < 3 * want / sqrt((double)k),
                      "%s: mean %g sd %g, expected sd %g", nm, mean, sd, want);
        } else if (l > 5 && !strcmp(nm + l - 5, ".bias")) {
            CHECK_MSG(sq == 0, "%s is not zero", nm);
        } else {  // a LayerNorm's weight
            CHECK_MSG(sum == (double)k && sq == (double)k, "%s is not ones", nm);
        }
        free(v);
    }
    CHECK(tdm_module_init(b, 8) == TDM_OK);
    CHECK(!tensors_identical(st[0], sb[0]) && !tensors_identical(st[4], sb[4]));
    CHECK(sb[n - 1] == sb[0]);  // still tied after a redraw
    tdm_module_free(a);
    tdm_module_free(b);
}

// ---- forward ------------------------------------------------------------------------------------

static void test_forward(void) {
    tdm_module *m = tdm_nn_from_spec("gpt:L2-H2-D8-T6-V13");
    CHECK_MSG(m, "%s", tdm_last_error());
    if (!m) return;
    tdm_module_init(m, 3);
    bool g = tdm_grad_set_enabled(false);
    for (int64_t T = 6; T >= 1; T -= 3) {  // a full block, then shorter (positions made again)
        tdm_tensor *x = tokens(3, T, 13, 0), *y = tdm_module_forward(m, x);
        CHECK_MSG(y && tdm_tensor_ndim(y) == 3 && tdm_tensor_shape(y)[0] == 3 &&
                      tdm_tensor_shape(y)[1] == T && tdm_tensor_shape(y)[2] == 13,
                  "T %lld: %s", (long long)T, tdm_last_error());
        // Causal: the logits of position t do not depend on later tokens.
        int64_t *v = malloc((size_t)(3 * T) * sizeof *v), shape[2] = {3, T};
        tdm_tensor_to_host(x, v, (size_t)(3 * T) * sizeof *v);
        v[T - 1] = (v[T - 1] + 1) % 13;  // the last token of row 0
        tdm_tensor *x2 = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, TDM_CPU, v);
        tdm_tensor *y2 = tdm_module_forward(m, x2);
        double *a = y ? host(y) : NULL, *b = y2 ? host(y2) : NULL;
        bool causal = a && b, later = false;
        for (int64_t i = 0; causal && i < 3 * T * 13; i++) {
            bool last = i / 13 == T - 1;  // row 0's last position
            if (!last)
                causal = a[i] == b[i];
            else
                later = later || a[i] != b[i];
        }
        CHECK_MSG(causal && later, "T %lld: the logits are not causal", (long long)T);
        free(a);
        free(b);
        free(v);
        tdm_tensor_free(x2);
        tdm_tensor_free(y2);
        tdm_tensor_free(x);
        tdm_tensor_free(y);
    }
    tdm_tensor *x = tokens(2, 7, 13, 0);
    CHECK(!tdm_module_forward(m, x) && has("cannot forward a sequence of length 7, block size is "
                                           "only 6"));
    tdm_tensor_free(x);
    int64_t fs[2] = {2, 3};
    x = tdm_tensor_zeros(2, fs, TDM_DTYPE_F32, TDM_CPU);
    CHECK(!tdm_module_forward(m, x) && has("expected token indices (B,T) int64"));
    tdm_tensor_free(x);
    x = tokens(2, 3, 13, 0);
    int64_t *bad = malloc(6 * sizeof *bad);
    tdm_tensor_to_host(x, bad, 6 * sizeof *bad);
    bad[4] = 13;  // out of the vocabulary
    tdm_tensor *xb = tdm_tensor_from_host(2, fs, TDM_DTYPE_I64, TDM_CPU, bad);
    tdm_tensor *yb = tdm_module_forward(m, xb);
    CHECK_MSG(!yb, "a token out of the vocabulary was embedded");
    tdm_tensor_free(yb);
    free(bad);
    tdm_tensor_free(xb);
    tdm_tensor_free(x);
    tdm_grad_set_enabled(g);
    tdm_module_free(m);

    // Dropout: the same seed draws the same masks; a second step draws new ones; eval none.
    tdm_module *d1 = tdm_nn_from_spec("gpt:L1-H2-D8-T4-V11-drop0.3");
    tdm_module *d2 = tdm_nn_from_spec("gpt:L1-H2-D8-T4-V11-drop0.3");
    CHECK_MSG(d1 && d2, "%s", tdm_last_error());
    if (!d1 || !d2) return;
    tdm_module_init(d1, 5);
    tdm_module_init(d2, 5);
    x = tokens(2, 4, 11, 0);
    tdm_tensor *a1 = tdm_module_forward(d1, x), *a2 = tdm_module_forward(d2, x);
    tdm_tensor *b1 = tdm_module_forward(d1, x);
    CHECK(tensors_identical(a1, a2) && !tensors_identical(a1, b1));
    tdm_module_train(d1, false);
    tdm_tensor *e1 = tdm_module_forward(d1, x), *e2 = tdm_module_forward(d1, x);
    CHECK(tensors_identical(e1, e2) && !tensors_identical(e1, a1));
    tdm_tensor_free(a1);
    tdm_tensor_free(a2);
    tdm_tensor_free(b1);
    tdm_tensor_free(e1);
    tdm_tensor_free(e2);
    tdm_tensor_free(x);
    tdm_module_free(d1);
    tdm_module_free(d2);
}

// ---- state: the tied weight saved once, loaded from either form --------------------------------

static void test_state(void) {
    tdm_module *m = tdm_nn_from_spec("gpt:L2-H2-D32-T16-V67");
    tdm_module *r = tdm_nn_from_spec("gpt:L2-H2-D32-T16-V67");
    CHECK_MSG(m && r, "%s", tdm_last_error());
    if (!m || !r) return;
    tdm_module_init(m, 1);
    char path[600];
    snprintf(path, sizeof path, "%s/gpt_state.safetensors", tmpdir);
    CHECK(tdm_module_save(m, path) == TDM_OK);
    tdm_safetensors *st = tdm_safetensors_open(path);
    CHECK(st && tdm_safetensors_count(st) == 28 && tdm_safetensors_has(st, "lm_head.weight") &&
          !tdm_safetensors_has(st, "transformer.wte.weight"));
    const char *alias = st ? tdm_safetensors_metadata(st, "transformer.wte.weight") : NULL;
    CHECK(alias && !strcmp(alias, "lm_head.weight"));
    tdm_safetensors_close(st);
    CHECK(tdm_module_load(r, path, "", true) == TDM_OK);
    tdm_tensor *sm[32], *sr[32];
    int n = tdm_module_state(m, NULL, sm, 32);
    tdm_module_state(r, NULL, sr, 32);
    for (int i = 0; i < n; i++) CHECK(tensors_identical(sm[i], sr[i]));
    CHECK(sr[0] == sr[n - 1]);

    // Both names (a plain state_dict) load too; unequal values under the two are refused, and a
    // file with neither is missing both (the message names them), leaving the module as it was.
    tdm_module_init(r, 2);
    char full[600];
    snprintf(full, sizeof full, "%s/gpt_full.safetensors", tmpdir);
    const char *fn[32];
    tdm_tensor *ft[32];
    int k = tdm_module_state(m, fn, ft, 32);
    CHECK(tdm_safetensors_save(full, k, fn, (const tdm_tensor *const *)ft, 0, NULL) == TDM_OK);
    CHECK_MSG(tdm_module_load(r, full, "", true) == TDM_OK, "%s", tdm_last_error());
    for (int i = 0; i < n; i++) CHECK(tensors_identical(sm[i], sr[i]));
    // unequal
    tdm_tensor *w3 = tdm_add_scalar(sm[0], 1e-3);
    for (int i = 0; i < k; i++)
        if (!strcmp(fn[i], "lm_head.weight")) ft[i] = w3;
    CHECK(tdm_safetensors_save(full, k, fn, (const tdm_tensor *const *)ft, 0, NULL) == TDM_OK);
    tdm_module_init(r, 2);
    tdm_tensor *before = tdm_tensor_clone(sr[0]);
    CHECK(tdm_module_load(r, full, "", true) == TDM_ERR_FORMAT && has("are tied (one tensor) but "
                                                                      "differ in the file"));
    CHECK(tensors_identical(before, sr[0]));
    // neither
    int kk = 0;
    for (int i = 0; i < k; i++)
        if (strcmp(fn[i], "lm_head.weight") && strcmp(fn[i], "transformer.wte.weight")) {
            fn[kk] = fn[i];
            ft[kk++] = ft[i];
        }
    CHECK(tdm_safetensors_save(full, kk, fn, (const tdm_tensor *const *)ft, 0, NULL) == TDM_OK);
    CHECK(tdm_module_load(r, full, "", true) == TDM_ERR_FORMAT &&
          has("missing entry 'transformer.wte.weight' (or 'lm_head.weight'"));
    CHECK(tdm_module_load(r, full, "", false) == TDM_OK && tensors_identical(before, sr[0]));
    tdm_tensor_free(before);
    tdm_tensor_free(w3);

    // PyTorch's files (gen_gpt.py): the save_model form (lm_head.weight + the alias) and the
    // plain state_dict (both names) load to the same weights, the golden file's init.
    if (golden_dir) {
        char tied[600], plain[600], gold[600];
        snprintf(tied, sizeof tied, "%s/nanogpt-init-tied.safetensors", golden_dir);
        snprintf(plain, sizeof plain, "%s/nanogpt-init-plain.safetensors", golden_dir);
        snprintf(gold, sizeof gold, "%s/gpt-l2h2d32t16v67.safetensors", golden_dir);
        CHECK_MSG(tdm_module_load(m, tied, "", true) == TDM_OK, "%s", tdm_last_error());
        CHECK_MSG(tdm_module_load(r, plain, "", true) == TDM_OK, "%s", tdm_last_error());
        for (int i = 0; i < n; i++) CHECK(tensors_identical(sm[i], sr[i]));
        tdm_module_init(r, 9);
        CHECK_MSG(tdm_module_load(r, gold, "init.", true) == TDM_OK, "%s", tdm_last_error());
        for (int i = 0; i < n; i++) CHECK(tensors_identical(sm[i], sr[i]));
        // and tandem's save of it is the save_model form, byte for byte in every tensor
        snprintf(path, sizeof path, "%s/gpt_resaved.safetensors", tmpdir);
        CHECK(tdm_module_save(m, path) == TDM_OK);
        tdm_safetensors *a = tdm_safetensors_open(path), *b = tdm_safetensors_open(tied);
        CHECK(a && b && tdm_safetensors_count(a) == tdm_safetensors_count(b));
        for (int i = 0; a && b && i < tdm_safetensors_count(b); i++) {
            const char *nm = tdm_safetensors_name(b, i);
            tdm_tensor *ta = tdm_safetensors_get(a, nm, TDM_CPU),
                       *tb = tdm_safetensors_get(b, nm, TDM_CPU);
            CHECK_MSG(tensors_identical(ta, tb), "%s differs from PyTorch's", nm);
            tdm_tensor_free(ta);
            tdm_tensor_free(tb);
        }
        tdm_safetensors_close(a);
        tdm_safetensors_close(b);
    }
    tdm_module_free(m);
    tdm_module_free(r);
}

// ---- checkpointing ------------------------------------------------------------------------------

// The gradients of one forward/backward (clones, in parameter order) and the loss.
static int grads_of(tdm_module *m, const tdm_tensor *x, const tdm_tensor *y, tdm_tensor **out,
                    double *loss_v) {
    tdm_tensor *p[64];
    int np = tdm_module_parameters(m, p, 64);
    for (int i = 0; i < np; i++) tdm_tensor_set_grad(p[i], NULL);
    tdm_tensor *logits = tdm_module_forward(m, x), *loss = logits ? tdm_gpt_loss(logits, y) : NULL;
    bool ok = loss && tdm_backward(loss, NULL) == TDM_OK &&
              tdm_tensor_to_host_f64(loss, loss_v) == TDM_OK;
    CHECK_MSG(ok, "%s", tdm_last_error());
    for (int i = 0; i < np; i++) {
        tdm_tensor *g = tdm_tensor_grad(p[i]);
        out[i] = g ? tdm_tensor_clone(g) : NULL;
    }
    tdm_tensor_free(loss);
    tdm_tensor_free(logits);
    return np;
}

static void test_checkpoint(void) {
    // One block a segment (segments = n_layer: all blocks but the last recomputed) and 2 of 3:
    // the same gradients bit for bit, dropout (the attention's generator too) replayed.
    tdm_module *m = tdm_nn_from_spec("gpt:L3-H2-D8-T5-V11-drop0.2");
    CHECK_MSG(m, "%s", tdm_last_error());
    if (!m) return;
    tdm_tensor *x = tokens(2, 5, 11, 0), *y = tokens(2, 5, 11, 4);
    tdm_tensor *g0[64], *g1[64];
    for (int segs = 2; segs <= 3; segs++) {
        double l0, l1;
        tdm_module_init(m, 4);
        CHECK(tdm_sequential_set_checkpoint_segments(m, 0) == TDM_OK);
        int n = grads_of(m, x, y, g0, &l0);
        tdm_module_init(m, 4);
        CHECK(tdm_sequential_set_checkpoint_segments(m, segs) == TDM_OK);
        grads_of(m, x, y, g1, &l1);
        CHECK_MSG(l0 == l1, "segments %d: loss %.17g vs %.17g", segs, l1, l0);
        for (int i = 0; i < n; i++) {
            CHECK_MSG(g0[i] && tensors_identical(g0[i], g1[i]),
                      "segments %d: gradient %d "
                      "differs",
                      segs, i);
            tdm_tensor_free(g0[i]);
            tdm_tensor_free(g1[i]);
        }
    }
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    tdm_module_free(m);
}

// ---- step 0 of a golden file --------------------------------------------------------------------

// The golden file's model, initial weights and first batch on DEVICE at PRECISION: the logits,
// the loss and every parameter's gradient written as a candidate for check_gpt_judge.
static int test_step0(const char *golden, const char *device, const char *precision) {
    tdm_device dev;
    if (tdm_device_parse(device, &dev) != TDM_OK) return 2;
    if (!tdm_device_available(dev)) {
        printf("SKIP: %s: %s\n", device, tdm_last_error());
        return 77;
    }
    tdm_safetensors *g = tdm_safetensors_open(golden);
    CHECK_MSG(g, "%s", tdm_last_error());
    if (!g) return 1;
    const char *keys[] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "batch"};
    int64_t v[6];
    for (int i = 0; i < 6; i++) {
        const char *s = tdm_safetensors_metadata(g, keys[i]);
        v[i] = s ? atoll(s) : 0;
    }
    const char *gelu = tdm_safetensors_metadata(g, "gelu");
    tdm_gpt_config c = {v[0], v[1], v[2], v[3], v[4], 0, !gelu || !strcmp(gelu, "tanh")};
    tdm_tensor *xa = tdm_safetensors_get(g, "x", TDM_CPU),
               *ya = tdm_safetensors_get(g, "y", TDM_CPU);
    tdm_safetensors_close(g);
    tdm_module *m = tdm_nn_gpt(&c);
    CHECK_MSG(m && xa && ya, "%s", tdm_last_error());
    if (!m || !xa || !ya) return 1;
    CHECK_MSG(tdm_module_load(m, golden, "init.", true) == TDM_OK, "%s", tdm_last_error());
    CHECK_MSG(tdm_module_to(m, dev) == TDM_OK, "%s", tdm_last_error());
    int64_t B = v[5], T = tdm_tensor_shape(xa)[1], shape[2] = {B, T};
    tdm_tensor *x0 = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, dev, tdm_tensor_data(xa));
    tdm_tensor *y0 = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, dev, tdm_tensor_data(ya));
    bool tf32 = !strcmp(precision, "tf32"), fp16 = !strcmp(precision, "fp16");
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, tf32);
    tdm_autocast_state prev = {0};
    bool ac = fp16 || !strcmp(precision, "bf16");
    if (ac) prev = tdm_autocast_enter(fp16 ? TDM_DTYPE_F16 : TDM_DTYPE_BF16);
    tdm_tensor *logits = tdm_module_forward(m, x0), *loss = logits ? tdm_gpt_loss(logits, y0) : NULL;
    if (ac) tdm_autocast_exit(prev);
    // fp16: the GradScaler's loss x 2^16, the gradients x 2^-16 (exact), as gen_gpt.py's run
    tdm_tensor *scaled = loss && fp16 ? tdm_mul_scalar(loss, 65536.0) : tdm_tensor_retain(loss);
    CHECK_MSG(scaled && tdm_backward(scaled, NULL) == TDM_OK, "%s", tdm_last_error());
    const char *names[64];
    tdm_tensor *st[64];
    int n = tdm_module_state(m, names, st, 64);
    const char *cn[70];
    const tdm_tensor *ct[70];
    tdm_tensor *own[70] = {NULL};
    char gnames[64][300];
    int k = 0;
    own[k] = loss ? tdm_tensor_reshape(loss, 1, (int64_t[]){1}) : NULL;
    cn[k] = "loss";
    ct[k] = own[k];
    k++;
    cn[k] = "logits0";
    ct[k++] = logits;
    for (int i = 0; i < n; i++) {
        if (!strcmp(names[i], "transformer.wte.weight")) continue;  // stored as lm_head.weight
        tdm_tensor *gr = tdm_tensor_grad(st[i]);
        own[k] = gr && fp16 ? tdm_mul_scalar(gr, 1.0 / 65536.0) : gr ? tdm_tensor_retain(gr) : NULL;
        snprintf(gnames[i], sizeof gnames[i], "grad0.%s", names[i]);
        cn[k] = gnames[i];
        ct[k] = own[k];
        CHECK_MSG(own[k], "no gradient for %s", names[i]);
        k++;
    }
    char cand[700], detail[700];
    snprintf(cand, sizeof cand, "%s/gpt-step0-%s-%s.safetensors", tmpdir, precision,
             dev.type == TDM_DEVICE_CPU ? "cpu" : "cuda");
    bool all = true;
    for (int i = 0; i < k; i++) all = all && ct[i];
    CHECK(all && tdm_safetensors_save(cand, k, cn, ct, 0, NULL) == TDM_OK);
    int j = all ? check_gpt_judge(golden, cand, precision, true, detail, sizeof detail) : -1;
    printf("%s %s %s: %s\n", j == 1 ? "PASS" : "FAIL", device, precision, all ? detail : "-");
    CHECK(j == 1);
    for (int i = 0; i < k; i++) tdm_tensor_free(own[i]);
    tdm_tensor_free(scaled);
    tdm_tensor_free(loss);
    tdm_tensor_free(logits);
    tdm_tensor_free(x0);
    tdm_tensor_free(y0);
    tdm_tensor_free(xa);
    tdm_tensor_free(ya);
    tdm_module_free(m);
    CHECK_DONE("test_gpt step0");
}

// ---- a golden run through bench train
// ------------------------------------------------------------

// bench train on GOLDEN's model, weights, data and optimizer at PRECISION on DEVICE
// (check_gpt_argv), its dump judged whole by check_gpt_judge: step 0, every step's loss, grad norm
// and lr, and the final parameters.
static int test_golden(const char *bench, const char *golden, const char *device,
                       const char *precision, int n_extra, char **extra) {
    tdm_device dev;
    if (tdm_device_parse(device, &dev) != TDM_OK) return 2;
    if (!tdm_device_available(dev)) {
        printf("SKIP: %s: %s\n", device, tdm_last_error());
        return 77;
    }
    const char *base = strrchr(golden, '/') ? strrchr(golden, '/') + 1 : golden;
    char dump[1024], store[4096], detail[1024];
    snprintf(dump, sizeof dump, "%s/run-%s-%s-%s", tmpdir,
             dev.type == TDM_DEVICE_CPU ? "cpu" : "cuda", precision, base);
    char *args[64];
    int na = check_gpt_argv(golden, precision, device, dump, store, sizeof store, args, 64);
    CHECK_MSG(na > 0, "%s: not a tandem-gpt/1 file bench train can run", golden);
    if (na < 0) CHECK_DONE("test_gpt golden");
    args[0] = (char *)bench;
    for (int i = 0; i < n_extra && na < 63; i++) args[na++] = extra[i];  // later flags win
    args[na] = NULL;
    for (int i = 0; i < na; i++) printf("%s%s", args[i], i + 1 < na ? " " : "\n");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execv(bench, args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench train failed on %s", golden);
    if (check_failures) CHECK_DONE("test_gpt golden");
    int j = check_gpt_judge(golden, dump, precision, false, detail, sizeof detail);
    printf("%s %s %s %s: %s\n", j == 1 ? "PASS" : "FAIL", base, device, precision, detail);
    CHECK_MSG(j == 1, "%s", j < 0 ? "cannot judge" : "outside the rule");
    CHECK_DONE("test_gpt golden");
}

// `test_gpt resume-compare A B C`: the dumps of a run of N steps (A), of its first K steps (B)
// and of the resumed rest (C, --init B --init-optimizer ... --start-step K): C's state equals A's
// bit for bit, and the per-step records (loss, lr, grad_norm, fp16's scale) of B then C are A's.
static int resume_compare(const char *pa, const char *pb, const char *pc) {
    tdm_safetensors *a = tdm_safetensors_open(pa), *b = a ? tdm_safetensors_open(pb) : NULL;
    tdm_safetensors *c = b ? tdm_safetensors_open(pc) : NULL;
    CHECK_MSG(a && b && c, "%s", tdm_last_error());
    int n_state = 0;
    for (int i = 0; c && i < tdm_safetensors_count(a); i++) {
        const char *name = tdm_safetensors_name(a, i);
        tdm_tensor *ta = tdm_safetensors_get(a, name, TDM_CPU);
        bool record = !strcmp(name, "loss") || !strcmp(name, "lr") || !strcmp(name, "grad_norm") ||
                      !strcmp(name, "scale");
        if (!record) {  // a state entry: C's equals A's
            tdm_tensor *tc = tdm_safetensors_get(c, name, TDM_CPU);
            CHECK_MSG(tensors_identical(ta, tc), "%s differs from the uninterrupted run's", name);
            n_state++;
            tdm_tensor_free(tc);
        } else {  // B's steps then C's are A's
            tdm_tensor *tb = tdm_safetensors_get(b, name, TDM_CPU),
                       *tc = tdm_safetensors_get(c, name, TDM_CPU);
            int64_t na = ta ? tdm_tensor_numel(ta) : 0, nb = tb ? tdm_tensor_numel(tb) : -1;
            int64_t nc = tc ? tdm_tensor_numel(tc) : -1;
            double *va = ta ? host(ta) : NULL, *vb = tb ? host(tb) : NULL,
                   *vc = tc ? host(tc) : NULL;
            bool same = va && vb && vc && nb + nc == na;
            for (int64_t k = 0; same && k < na; k++) same = va[k] == (k < nb ? vb[k] : vc[k - nb]);
            CHECK_MSG(same, "%s: the two parts are not the uninterrupted run's", name);
            free(va);
            free(vb);
            free(vc);
            tdm_tensor_free(tb);
            tdm_tensor_free(tc);
        }
        tdm_tensor_free(ta);
    }
    CHECK_MSG(n_state > 0, "no state entries compared");
    tdm_safetensors_close(a);
    tdm_safetensors_close(b);
    tdm_safetensors_close(c);
    CHECK_DONE("test_gpt resume-compare");
}

// `test_gpt eval STATE SPEC TOKENS A:B`: loads STATE (a --dump, either safetensors form) strictly
// into the SPEC model and prints its loss (eval mode, f32) on rows [A, B) of TOKENS' x and y.
static int eval_loss(const char *state, const char *spec, const char *tokens, const char *rows) {
    long long a = 0, b = 0;
    if (sscanf(rows, "%lld:%lld", &a, &b) != 2 || a < 0 || b <= a) return 2;
    tdm_module *m = tdm_nn_from_spec(spec);
    tdm_safetensors *st = m ? tdm_safetensors_open(tokens) : NULL;
    tdm_tensor *x = st ? tdm_safetensors_get(st, "x", TDM_CPU) : NULL;
    tdm_tensor *y = x ? tdm_safetensors_get(st, "y", TDM_CPU) : NULL;
    tdm_safetensors_close(st);
    bool ok = y && tdm_module_load(m, state, "", true) == TDM_OK && b <= tdm_tensor_shape(x)[0];
    CHECK_MSG(ok, "%s", tdm_last_error());
    if (ok) {
        int64_t T = tdm_tensor_shape(x)[1], shape[2] = {b - a, T};
        const int64_t *xv = tdm_tensor_data_const(x), *yv = tdm_tensor_data_const(y);
        tdm_tensor *xr = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, TDM_CPU, xv + a * T);
        tdm_tensor *yr = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, TDM_CPU, yv + a * T);
        tdm_module_train(m, false);
        bool g = tdm_grad_set_enabled(false);
        tdm_tensor *logits = tdm_module_forward(m, xr), *loss = logits ? tdm_gpt_loss(logits, yr) : NULL;
        tdm_grad_set_enabled(g);
        double l = NAN;
        CHECK_MSG(loss && tdm_tensor_to_host_f64(loss, &l) == TDM_OK, "%s", tdm_last_error());
        printf("%.9g\n", l);
        tdm_tensor_free(loss);
        tdm_tensor_free(logits);
        tdm_tensor_free(xr);
        tdm_tensor_free(yr);
    }
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    tdm_module_free(m);
    return check_failures ? 1 : 0;
}

// `test_gpt write-tokens DIR`: malformed token files for a V = 67, block 16 model, each with the
// fault bench train must name (gpt.cmake's gpt.train.bad_token_files_exit_2).
static int write_tokens(const char *dir) {
    int64_t xs[2] = {8, 16}, n = 8 * 16, wide[2] = {8, 17};
    int64_t *v = malloc((size_t)(8 * 17) * sizeof *v);
    for (int64_t i = 0; i < 8 * 17; i++) v[i] = (i * 5) % 67;
    tdm_tensor *good = tdm_tensor_from_host(2, xs, TDM_DTYPE_I64, TDM_CPU, v);
    tdm_tensor *f = tdm_tensor_to(good, TDM_CPU, TDM_DTYPE_F32);
    tdm_tensor *w = tdm_tensor_from_host(2, wide, TDM_DTYPE_I64, TDM_CPU, v);
    tdm_tensor *flat = tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, v);
    v[9] = 67;
    tdm_tensor *oov = tdm_tensor_from_host(2, xs, TDM_DTYPE_I64, TDM_CPU, v);
    v[9] = -2;
    tdm_tensor *neg = tdm_tensor_from_host(2, xs, TDM_DTYPE_I64, TDM_CPU, v);
    free(v);
    struct {
        const char *file;
        const tdm_tensor *x, *y;
    } files[] = {{"tokens-x-float.safetensors", f, good}, {"tokens-y-67.safetensors", good, oov},
                 {"tokens-x-neg.safetensors", neg, good}, {"tokens-y-neg2.safetensors", good, neg},
                 {"tokens-t17.safetensors", w, w},        {"tokens-1d.safetensors", flat, flat},
                 {"tokens-x-67.safetensors", oov, good}};
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].file);
        const char *names[2] = {"x", "y"};
        const tdm_tensor *ts[2] = {files[i].x, files[i].y};
        if (!ts[0] || !ts[1] || tdm_safetensors_save(path, 2, names, ts, 0, NULL) != TDM_OK) rc = 1;
    }
    tdm_tensor_free(good);
    tdm_tensor_free(f);
    tdm_tensor_free(w);
    tdm_tensor_free(oov);
    tdm_tensor_free(neg);
    tdm_tensor_free(flat);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "write-tokens")) return write_tokens(argv[2]);
    if (argc == 6 && !strcmp(argv[1], "eval")) return eval_loss(argv[2], argv[3], argv[4], argv[5]);
    if (argc == 5 && !strcmp(argv[1], "resume-compare"))
        return resume_compare(argv[2], argv[3], argv[4]);
    if (argc >= 7 && !strcmp(argv[1], "golden")) {
        tmpdir = argv[6];
        return test_golden(argv[2], argv[3], argv[4], argv[5], argc - 7, argv + 7);
    }
    if (argc == 6 && !strcmp(argv[1], "step0")) {
        tmpdir = argv[5];
        return test_step0(argv[2], argv[3], argv[4]);
    }
    if (argc < 3) {
        fprintf(stderr,
                "usage: test_gpt AREA TMPDIR [GOLDEN_DIR] | test_gpt step0 GOLDEN DEVICE "
                "PRECISION TMPDIR\n");
        return 2;
    }
    tmpdir = argv[2];
    golden_dir = argc > 3 ? argv[3] : NULL;
    const char *area = argv[1];
    if (!strcmp(area, "spec"))
        test_spec();
    else if (!strcmp(area, "structure"))
        test_structure();
    else if (!strcmp(area, "init"))
        test_init();
    else if (!strcmp(area, "forward"))
        test_forward();
    else if (!strcmp(area, "state"))
        test_state();
    else if (!strcmp(area, "checkpoint"))
        test_checkpoint();
    else
        return 2;
    CHECK_DONE(area);
}

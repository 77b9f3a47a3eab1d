/* nn_spec.c — the model grammar of `bench train --model` (documented in nn.h):
 *   mlp:D0-D1-...-Dk          Linear/ReLU layers
 *   cnn:CxHxW/TOK-TOK-...     conv, batch norm, activations, pools, flatten, linear, dropout
 *   gpt:L2-H2-D32-T16-V67     nanoGPT's GPT (tdm_nn_gpt): its GPTConfig as tokens
 * A hand-written tokenizer builds the equivalent nn.Sequential, tracking the activation's shape
 * (without the batch dim) so that each layer gets its input size: Conv2d and BatchNorm2d take the
 * channels, Linear after `flat` takes C*H*W. Every error names the offending token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"

#define SPEC_MAX_NUMBER 2147483647   // sizes, kernels, strides and paddings fit an int

// ---- lexing helpers -------------------------------------------------------------------------

// A token: [s, s + n) of the spec.
typedef struct {
    const char *s;
    int n;
} span;

// The token as a printable string (truncated when very long).
static const char *span_str(span t, char *buf, size_t cap) {
    int n = t.n < (int)cap - 4 ? t.n : (int)cap - 4;
    snprintf(buf, cap, "%.*s%s", n, t.s, n < t.n ? "..." : "");
    return buf;
}

static bool span_is(span t, const char *word) {
    return (size_t)t.n == strlen(word) && !strncmp(t.s, word, (size_t)t.n);
}

// Reads a decimal number at t.s[*i] (digits only, at most SPEC_MAX_NUMBER). False when there is
// no digit there or the number is too large.
static bool read_number(span t, int *i, int64_t *out) {
    int64_t v = 0;
    int start = *i;
    while (*i < t.n && t.s[*i] >= '0' && t.s[*i] <= '9') {
        v = v * 10 + (t.s[*i] - '0');
        if (v > SPEC_MAX_NUMBER) return false;
        (*i)++;
    }
    *out = v;
    return *i > start;
}

// An optional "<letter><number>" part of a token; *out keeps its default when absent.
static bool read_option(span t, int *i, char letter, int64_t *out) {
    if (*i >= t.n || t.s[*i] != letter) return true;
    (*i)++;
    return read_number(t, i, out);
}

// Whether t.s[from..] is digits only, at least one: a number read_number refused is then too
// large, not malformed.
static bool all_digits(span t, int from) {
    for (int i = from; i < t.n; i++)
        if (t.s[i] < '0' || t.s[i] > '9') return false;
    return t.n > from;
}

// Digits from `from` on that are a number above zero: a positive number a reader refused can only
// have been too large (0 and 00 are not positive).
static bool digits_too_large(span t, int from) {
    bool nonzero = false;
    for (int i = from; i < t.n; i++) nonzero |= t.s[i] != '0';
    return all_digits(t, from) && nonzero;
}

// A whole token or field that is one positive decimal number.
static bool span_positive(span t, int64_t *out) {
    int i = 0;
    return read_number(t, &i, out) && i == t.n && *out > 0;
}

// Splits [s, end) at `sep` into *n spans (the array grows; caller frees). False when out of memory.
static bool split(const char *s, const char *end, char sep, span **out, int *n) {
    int cap = 1;
    for (const char *p = s; p < end; p++) cap += *p == sep;
    *out = malloc((size_t)cap * sizeof **out);
    if (!*out) return false;
    *n = 0;
    const char *start = s;
    for (const char *p = s;; p++) {
        if (p == end || *p == sep) {
            (*out)[(*n)++] = (span){start, (int)(p - start)};
            start = p + 1;
        }
        if (p == end) break;
    }
    return true;
}

// ---- building the Sequential -------------------------------------------------------------------

typedef struct {
    tdm_module **children;
    int n, cap;
} layers;

// Takes ownership of m (NULL: the constructor failed, its error stands).
static bool layers_push(layers *l, tdm_module *m) {
    if (!m) return false;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        tdm_module **c = realloc(l->children, (size_t)cap * sizeof *c);
        if (!c) {
            tdm_module_free(m);
            tdm_error_set(TDM_ERR_OOM, "model spec: out of host memory");
            return false;
        }
        l->children = c;
        l->cap = cap;
    }
    l->children[l->n++] = m;
    return true;
}

static void layers_free(layers *l) {
    for (int i = 0; i < l->n; i++) tdm_module_free(l->children[i]);
    free(l->children);
}

static tdm_module *layers_finish(layers *l) {
    tdm_module *seq = tdm_nn_sequential(l->n, l->children);   // owns them, also on failure
    free(l->children);
    return seq;
}

// ---- mlp:D0-D1-...-Dk -------------------------------------------------------------------------

static bool mlp_widths(const char *body, span **w, int *n) {
    if (!split(body, body + strlen(body), '-', w, n)) {
        tdm_error_set(TDM_ERR_OOM, "model spec: out of host memory");
        return false;
    }
    return true;
}

static bool mlp_width(span t, int64_t *out) {
    if (span_positive(t, out)) return true;
    char b[80];
    tdm_error_set(TDM_ERR_ARG, "mlp: width '%s' is %s (at most %d)", span_str(t, b, sizeof b),
                  digits_too_large(t, 0) ? "too large" : "not a positive integer", SPEC_MAX_NUMBER);
    return false;
}

static tdm_module *mlp_build(const char *body) {
    span *w;
    int n;
    if (!mlp_widths(body, &w, &n)) return NULL;
    int64_t *d = malloc((size_t)n * sizeof *d);
    bool ok = d != NULL;
    if (!ok) tdm_error_set(TDM_ERR_OOM, "model spec: out of host memory");
    for (int i = 0; ok && i < n; i++) ok = mlp_width(w[i], &d[i]);
    if (ok && n < 2) {
        tdm_error_set(TDM_ERR_ARG, "mlp: needs at least two widths (mlp:D0-D1-...), got %d", n);
        ok = false;
    }
    layers l = {0};
    for (int i = 0; ok && i + 1 < n; i++) {
        if (i > 0) ok = layers_push(&l, tdm_nn_relu());
        if (ok) ok = layers_push(&l, tdm_nn_linear(d[i], d[i + 1], true));
    }
    free(w);
    free(d);
    if (!ok) {
        layers_free(&l);
        return NULL;
    }
    return layers_finish(&l);
}

// ---- cnn:CxHxW/TOK-... ------------------------------------------------------------------------

// The input part "CxHxW" (up to '/' or the end).
static bool cnn_input(const char *body, const char *end, int64_t chw[3]) {
    span *d;
    int n;
    if (!split(body, end, 'x', &d, &n)) {
        tdm_error_set(TDM_ERR_OOM, "model spec: out of host memory");
        return false;
    }
    bool ok = n == 3;
    for (int i = 0; ok && i < 3; i++) ok = span_positive(d[i], &chw[i]);
    free(d);
    if (!ok) {
        char b[80];
        tdm_error_set(TDM_ERR_ARG, "cnn: input '%s' must be CxHxW, three positive integers "
                      "(cnn:3x32x32/...)", span_str((span){body, (int)(end - body)}, b, sizeof b));
    }
    return ok;
}

// The activation's shape without the batch dim: (C, H, W) (ndim 3) or (F) (ndim 1, after flat).
typedef struct {
    int ndim;
    int64_t c, h, w, f;
} act_shape;

#define CNN_TOKENS "cO[kK][sS][pP], bn, relu, gelu, mpK[sS], apK[sS], flat, fcN or doP"

static bool token_error(span t, const char *fmt, const char *detail) {
    char b[80], msg[256];
    snprintf(msg, sizeof msg, fmt, detail);
    tdm_error_set(TDM_ERR_ARG, "cnn: token '%s': %s", span_str(t, b, sizeof b), msg);
    return false;
}

// Layers that need the (C, H, W) form.
static bool need_chw(span t, const act_shape *a) {
    if (a->ndim == 3) return true;
    return token_error(t, "%s", "needs a (C, H, W) input, but it comes after flat");
}

// out = (n + 2p - k) / s + 1, the size of a conv or pool output; false when it would vanish.
static bool out_size(span t, int64_t n, int64_t k, int64_t s, int64_t p, int64_t *out) {
    if (n + 2 * p - k < 0) {
        char d[96];
        snprintf(d, sizeof d, "spatial size vanishes (kernel %lld > input %lld + 2 * padding %lld)",
                 (long long)k, (long long)n, (long long)p);
        return token_error(t, "%s", d);
    }
    *out = (n + 2 * p - k) / s + 1;
    return true;
}

// cO[kK][sS][pP]
static bool cnn_conv(span t, act_shape *a, layers *l) {
    int i = 1;
    int64_t o, k = 3, s = 1, p = 0;
    if (!read_number(t, &i, &o) || !read_option(t, &i, 'k', &k) || !read_option(t, &i, 's', &s) ||
        !read_option(t, &i, 'p', &p) || i != t.n)
        return token_error(t, "%s", "expected cO[kK][sS][pP] (e.g. c16k3s1p1)");
    if (o < 1 || k < 1 || s < 1)
        return token_error(t, "%s", "channels, kernel and stride must be positive");
    if (!need_chw(t, a)) return false;
    int64_t h = 0, w = 0;
    if (!out_size(t, a->h, k, s, p, &h) || !out_size(t, a->w, k, s, p, &w)) return false;
    tdm_conv2d_params cp = TDM_CONV2D_DEFAULT;
    cp.stride[0] = cp.stride[1] = (int)s;
    cp.padding[0] = cp.padding[1] = (int)p;
    if (!layers_push(l, tdm_nn_conv2d(a->c, o, (int)k, &cp, true))) return false;
    *a = (act_shape){3, o, h, w, 0};
    return true;
}

// mpK[sS] / apK[sS]
static bool cnn_pool(span t, act_shape *a, layers *l) {
    int i = 2;
    int64_t k = 0, s = -1;   // the stride defaults to the kernel size
    bool ok = read_number(t, &i, &k) && read_option(t, &i, 's', &s) && i == t.n;
    if (!ok)
        return token_error(t, "expected %s",
                           t.s[0] == 'm' ? "mpK[sS] (e.g. mp2)" : "apK[sS] (e.g. ap2)");
    if (s == -1) s = k;
    if (k < 1 || s < 1) return token_error(t, "%s", "kernel and stride must be positive");
    if (!need_chw(t, a)) return false;
    int64_t h = 0, w = 0;
    if (!out_size(t, a->h, k, s, 0, &h) || !out_size(t, a->w, k, s, 0, &w)) return false;
    tdm_pool2d_params pp = {{(int)k, (int)k}, {(int)s, (int)s}, {0, 0}, {1, 1}, false, true, 0};
    tdm_module *m = t.s[0] == 'm' ? tdm_nn_max_pool2d(&pp) : tdm_nn_avg_pool2d(&pp);
    if (!layers_push(l, m)) return false;
    a->h = h;
    a->w = w;
    return true;
}

// doP: P a probability written as a decimal number (do0.5, do.1, do0).
static bool cnn_dropout(span t, layers *l) {
    char num[32];
    int n = t.n - 2, digits = 0, dots = 0;
    bool ok = n > 0 && n < (int)sizeof num;
    for (int i = 2; ok && i < t.n; i++) {
        if (t.s[i] >= '0' && t.s[i] <= '9') digits++;
        else if (t.s[i] == '.') dots++;
        else ok = false;
    }
    ok = ok && digits > 0 && dots <= 1;
    double p = 0;
    if (ok) {
        memcpy(num, t.s + 2, (size_t)n);
        num[n] = '\0';
        p = strtod(num, NULL);
    }
    if (!ok || p > 1)
        return token_error(t, "%s", "expected doP with P a probability in [0, 1] (e.g. do0.5)");
    return layers_push(l, tdm_nn_dropout(p));
}

static bool cnn_token(span t, act_shape *a, layers *l) {
    if (t.n == 0) {
        tdm_error_set(TDM_ERR_ARG, "cnn: empty token (a '-' at an end, or two in a row)");
        return false;
    }
    if (t.s[0] == 'c') return cnn_conv(t, a, l);
    if (t.n >= 2 && (!strncmp(t.s, "mp", 2) || !strncmp(t.s, "ap", 2))) return cnn_pool(t, a, l);
    if (t.n >= 2 && !strncmp(t.s, "do", 2)) return cnn_dropout(t, l);
    if (span_is(t, "bn"))
        return need_chw(t, a) && layers_push(l, tdm_nn_batch_norm2d(a->c, 1e-5, 0.1));
    if (span_is(t, "relu")) return layers_push(l, tdm_nn_relu());
    if (span_is(t, "gelu")) return layers_push(l, tdm_nn_gelu(false));
    if (span_is(t, "flat")) {
        if (a->ndim == 3) {
            int64_t f;
            if (__builtin_mul_overflow(a->c, a->h, &f) || __builtin_mul_overflow(f, a->w, &f))
                return token_error(t, "%s", "C*H*W overflows");
            *a = (act_shape){1, 0, 0, 0, f};
        }
        return layers_push(l, tdm_nn_flatten());
    }
    if (t.n >= 2 && !strncmp(t.s, "fc", 2)) {
        int i = 2;
        int64_t n;
        if (!read_number(t, &i, &n) || i != t.n || n < 1)
            return token_error(t, "%s", "expected fcN with N a positive integer (e.g. fc10)");
        if (a->ndim != 1) return token_error(t, "%s", "needs a flat input (add 'flat' before it)");
        if (!layers_push(l, tdm_nn_linear(a->f, n, true))) return false;
        a->f = n;
        return true;
    }
    return token_error(t, "unknown token (expected %s)", CNN_TOKENS);
}

static tdm_module *cnn_build(const char *body) {
    const char *slash = strchr(body, '/');
    int64_t chw[3] = {0, 0, 0};
    if (!slash) {
        tdm_error_set(TDM_ERR_ARG, "cnn: expected cnn:CxHxW/TOKENS (e.g. cnn:3x32x32/c16-relu-"
                      "flat-fc10)");
        return NULL;
    }
    if (!cnn_input(body, slash, chw)) return NULL;
    span *toks;
    int n;
    if (!split(slash + 1, slash + 1 + strlen(slash + 1), '-', &toks, &n)) {
        tdm_error_set(TDM_ERR_OOM, "model spec: out of host memory");
        return NULL;
    }
    act_shape a = {3, chw[0], chw[1], chw[2], 0};
    layers l = {0};
    bool ok = true;
    for (int i = 0; ok && i < n; i++) ok = cnn_token(toks[i], &a, &l);
    free(toks);
    if (!ok) {
        layers_free(&l);
        return NULL;
    }
    return layers_finish(&l);
}

// ---- gpt:L2-H2-D32-T16-V67[-dropP][-erf] -----------------------------------------------------------

#define GPT_TOKENS "Ln, Hn, Dn, Tn, Vn (each once, all required), dropP or erf"

static bool gpt_error(span t, const char *why) {
    char b[80];
    tdm_error_set(TDM_ERR_ARG, "gpt: token '%s': %s (expected %s; e.g. gpt:L2-H2-D32-T16-V67)",
                  span_str(t, b, sizeof b), why, GPT_TOKENS);
    return false;
}

// dropP: a probability in [0, 1) written as a decimal number (drop0.1, drop.1, drop0).
static bool gpt_dropout(span t, double *p) {
    char num[32];
    int n = t.n - 4, digits = 0, dots = 0;
    bool ok = n > 0 && n < (int)sizeof num;
    for (int i = 4; ok && i < t.n; i++) {
        if (t.s[i] >= '0' && t.s[i] <= '9') digits++;
        else if (t.s[i] == '.') dots++;
        else ok = false;
    }
    if (ok && digits > 0 && dots <= 1) {
        memcpy(num, t.s + 4, (size_t)n);
        num[n] = '\0';
        *p = strtod(num, NULL);
        if (*p < 1) return true;
    }
    return gpt_error(t, "dropP needs a probability in [0, 1)");
}

static bool gpt_parse(const char *body, tdm_gpt_config *c) {
    span *toks;
    int n;
    if (!split(body, body + strlen(body), '-', &toks, &n)) {
        tdm_error_set(TDM_ERR_OOM, "model spec: out of host memory");
        return false;
    }
    static const char letters[] = "LHDTV";
    int64_t v[5] = {0};
    bool seen[7] = {false}, ok = true;   // L H D T V, drop, erf
    *c = (tdm_gpt_config){.gelu_tanh = true};
    for (int i = 0; ok && i < n; i++) {
        span t = toks[i];
        const char *l = t.n ? strchr(letters, t.s[0]) : NULL;
        int k = l ? (int)(l - letters) : span_is(t, "erf") ? 6 : 5;
        if (t.n == 0) {
            ok = gpt_error(t, "empty (a '-' at an end, or two in a row)");
        } else if (seen[k]) {
            ok = gpt_error(t, "given twice");
        } else if (l) {
            int j = 1;
            ok = (read_number(t, &j, &v[k]) && j == t.n && v[k] > 0) ||
                 gpt_error(t, digits_too_large(t, 1) ? "too large: at most 2147483647"
                                               : "needs a positive integer after the letter");
        } else if (k == 6) {
            c->gelu_tanh = false;
        } else if (t.n > 4 && !strncmp(t.s, "drop", 4)) {
            ok = gpt_dropout(t, &c->dropout);
        } else {
            ok = gpt_error(t, "unknown token");
        }
        seen[k] = true;
    }
    free(toks);
    for (int k = 0; ok && k < 5; k++)
        if (!seen[k]) {
            tdm_error_set(TDM_ERR_ARG, "gpt: '%c' is missing (expected %s; e.g. "
                          "gpt:L2-H2-D32-T16-V67)", letters[k], GPT_TOKENS);
            ok = false;
        }
    if (ok && v[2] % v[1]) {
        tdm_error_set(TDM_ERR_ARG, "gpt: D%lld (n_embd) must be a multiple of H%lld (n_head)",
                      (long long)v[2], (long long)v[1]);
        ok = false;
    }
    c->n_layer = v[0];
    c->n_head = v[1];
    c->n_embd = v[2];
    c->block_size = v[3];
    c->vocab_size = v[4];
    return ok;
}

tdm_status tdm_nn_gpt_spec(const char *spec, tdm_gpt_config *c) {
    if (!spec || !c) return tdm_error_set(TDM_ERR_ARG, "nn_gpt_spec: spec and config are required");
    if (strncmp(spec, "gpt:", 4))
        return tdm_error_set(TDM_ERR_ARG, "model spec '%.80s': not a gpt: spec", spec);
    return gpt_parse(spec + 4, c) ? TDM_OK : tdm_last_status();
}

// ---- public entry points ------------------------------------------------------------------------

tdm_module *tdm_nn_from_spec(const char *spec) {
    if (!spec) {
        tdm_error_set(TDM_ERR_ARG, "model spec is NULL");
        return NULL;
    }
    if (!strncmp(spec, "mlp:", 4)) return mlp_build(spec + 4);
    if (!strncmp(spec, "cnn:", 4)) return cnn_build(spec + 4);
    if (!strncmp(spec, "gpt:", 4)) {
        tdm_gpt_config c;
        return gpt_parse(spec + 4, &c) ? tdm_nn_gpt(&c) : NULL;
    }
    char b[80];
    span kind = {spec, (int)strcspn(spec, ":")};
    tdm_error_set(TDM_ERR_ARG, "model spec '%s': unknown model kind '%s' (expected mlp:D0-D1-..., "
                  "cnn:CxHxW/TOKENS or gpt:L..-H..-D..-T..-V..)", spec, span_str(kind, b, sizeof b));
    return NULL;
}

tdm_status tdm_nn_spec_input_shape(const char *spec, int *ndim, int64_t *shape) {
    if (!spec || !ndim || !shape)
        return tdm_error_set(TDM_ERR_ARG, "nn_spec_input_shape: spec, ndim and shape are required");
    if (!strncmp(spec, "mlp:", 4)) {
        const char *body = spec + 4;
        int64_t d;
        if (!mlp_width((span){body, (int)strcspn(body, "-")}, &d)) return tdm_last_status();
        *ndim = 1;
        shape[0] = d;
        return TDM_OK;
    }
    if (!strncmp(spec, "cnn:", 4)) {
        const char *body = spec + 4;
        if (!cnn_input(body, body + strcspn(body, "/"), shape)) return tdm_last_status();
        *ndim = 3;
        return TDM_OK;
    }
    if (!strncmp(spec, "gpt:", 4)) {   // (T) token indices
        tdm_gpt_config c;
        if (!gpt_parse(spec + 4, &c)) return tdm_last_status();
        *ndim = 1;
        shape[0] = c.block_size;
        return TDM_OK;
    }
    char b[80];
    span kind = {spec, (int)strcspn(spec, ":")};
    return tdm_error_set(TDM_ERR_ARG, "model spec '%s': unknown model kind '%s' (expected "
                         "mlp:D0-D1-..., cnn:CxHxW/TOKENS or gpt:L..-H..-D..-T..-V..)", spec,
                         span_str(kind, b, sizeof b));
}

/* check_gpt.c — the golden GPT-2 rule (tandem-gpt/1 files, suites/golden/gen_gpt.py; docs/
 * CONFORMANCE.md "Golden GPT-2"): a run of tandem's GPT (bench train's dump, or a library test's
 * step 0) against the file's float64 run and the family of reference runs R at the precision
 * tandem trains in, in check_train.c's style — tandem may be at most 4x further from the exact
 * values than the worst of those runs is (per check), plus the rounding of the precision (u)
 * times the steps that can add it:
 *
 *   loss, grad_norm (per step):  max_t |c - f64| <= 4 max_R max_t |R - f64| + N u max_t |f64|
 *   lr (per step):               |c - lr| / lr <= 1e-6 (the schedule is computed in double)
 *   logits0, grad0.<name>:       max|c - f64| / max|f64| <= 4 max_R (same for R) + u
 *   final <name>:                the same + N u, but the ill_conditioned slices, which must stay
 *                                within ill_conditioned_tol (3 sum(lr)) of f64 instead
 *
 * R and u by precision: f32 (f32, f32_k2, f32_k4: PyTorch's f32 and split-K orders, 2^-24), tf32
 * (tf32_rna and tf32_rz, 2^-10), bf16 (bf16, bf16_k2: CUDA autocast's policy, 2^-8), fp16 (fp16,
 * fp16_k2 with the GradScaler, 2^-11): one run is one sample of the rounding noise, which 16
 * AdamW steps amplify chaotically in places, so the yardstick is the worst of several legitimate
 * orders. The ill_conditioned slices
 * are each c_attn.bias's key third: its exact gradient is zero (a key bias adds the same score to
 * a whole row, which softmax cancels), so Adam turns rounding noise into steps of ~lr. The step-0
 * form judges logits0, grad0 and the first loss (N = 1) only: the forward and backward alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "tandem/tandem.h"

typedef struct {
    tdm_safetensors *g, *c;
    const char *refs[4];  // the reference runs, NULL-terminated
    double u;
    int64_t steps;
    double worst;
    char worst_name[300], why[600];
    int pass;  // 1, 0 (over a tolerance), -1 (missing or malformed)
} judge;

static double *values(tdm_safetensors *st, const char *name, int64_t *n) {
    if (!tdm_safetensors_has(st, name)) return NULL;
    tdm_tensor *t = tdm_safetensors_get(st, name, TDM_CPU);
    if (!t) return NULL;
    *n = tdm_tensor_numel(t);
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    if (v && tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        free(v);
        v = NULL;
    }
    tdm_tensor_free(t);
    return v;
}

static void missing(judge *j, const char *what, const char *name) {
    if (j->pass == -1) return;
    j->pass = -1;
    snprintf(j->why, sizeof j->why, "%s has no %s of the expected size", what, name);
}

// A check's ratio to its tolerance: the worst so far is kept, the first over 1 is the reason.
static void record(judge *j, const char *name, double dev, double tol) {
    double ratio = tol > 0 ? dev / tol : dev == 0 ? 0 : INFINITY;
    if (!(ratio <= j->worst)) {
        j->worst = ratio;
        snprintf(j->worst_name, sizeof j->worst_name, "%.*s", (int)sizeof j->worst_name - 1, name);
    }
    if (!(ratio <= 1) && j->pass == 1) {
        j->pass = 0;
        snprintf(j->why, sizeof j->why, "%s deviates %.3g from float64, %.3g x its tolerance %.3g",
                 name, dev, ratio, tol);
    }
}

// max|a - b| and max|b| over [0, n) without the [skip0, skip1) range.
static void deviation(const double *a, const double *b, int64_t n, int64_t skip0, int64_t skip1,
                      double *dev, double *scale) {
    *dev = *scale = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i >= skip0 && i < skip1) continue;
        *dev = fmax(*dev, fabs(a[i] - b[i]));
        *scale = fmax(*scale, fabs(b[i]));
    }
}

static double rel(const double *a, const double *b, int64_t n, int64_t s0, int64_t s1) {
    double d, s;
    deviation(a, b, n, s0, s1, &d, &s);
    return s > 0 ? d / s : d;
}

// A per-step series (loss, grad_norm) over its first `n` steps: absolute, slack n u max|f64|.
static void series(judge *j, const char *what, int64_t n) {
    char name[64];
    int64_t k = 0, kc = 0;
    snprintf(name, sizeof name, "%s.f64", what);
    double *ex = values(j->g, name, &k), *c = values(j->c, what, &kc);
    if (!ex || k < n)
        missing(j, "the golden file", name);
    else if (!c || kc < n)
        missing(j, "the run", what);
    double dp = 0, scale = 0, dev = 0;
    for (int r = 0; j->pass >= 0 && j->refs[r]; r++) {
        int64_t kr = 0;
        snprintf(name, sizeof name, "%s.%s", what, j->refs[r]);
        double *v = values(j->g, name, &kr);
        if (!v || kr < n) missing(j, "the golden file", name);
        for (int64_t i = 0; v && kr >= n && i < n; i++) dp = fmax(dp, fabs(v[i] - ex[i]));
        free(v);
    }
    if (j->pass >= 0) {
        for (int64_t i = 0; i < n; i++) {
            scale = fmax(scale, fabs(ex[i]));
            dev = fmax(dev, fabs(c[i] - ex[i]));
        }
        record(j, what, dev, 4 * dp + (double)n * j->u * scale);
    }
    free(ex);
    free(c);
}

// A tensor: cand `cname` against golden `<what>.f64<suffix>`, relative to max|f64|, slack n u;
// [s0, s1) left out (an ill_conditioned slice).
static void tensor(judge *j, const char *cname, const char *what, const char *suffix, double n,
                   int64_t s0, int64_t s1) {
    char name[400];
    int64_t k = 0, kc = 0;
    snprintf(name, sizeof name, "%s.f64%s", what, suffix);
    double *ex = values(j->g, name, &k), *c = values(j->c, cname, &kc);
    if (!ex)
        missing(j, "the golden file", name);
    else if (!c || kc != k)
        missing(j, "the run", cname);
    double dp = 0;
    for (int r = 0; j->pass >= 0 && j->refs[r]; r++) {
        int64_t kr = 0;
        snprintf(name, sizeof name, "%s.%s%s", what, j->refs[r], suffix);
        double *v = values(j->g, name, &kr);
        if (!v || kr != k)
            missing(j, "the golden file", name);
        else
            dp = fmax(dp, rel(v, ex, k, s0, s1));
        free(v);
    }
    if (j->pass >= 0) record(j, cname, rel(c, ex, k, s0, s1), 4 * dp + n * j->u);
    free(ex);
    free(c);
}

// The file's ill_conditioned slice of parameter `p` ("name[a:b]" entries); false when none.
static bool ill_slice(const cJSON *ill, const char *p, int64_t *a, int64_t *b) {
    const cJSON *e;
    size_t n = strlen(p);
    cJSON_ArrayForEach(e, ill) {
        const char *s = cJSON_GetStringValue(e);
        long long x, y;
        if (s && !strncmp(s, p, n) && s[n] == '[' && sscanf(s + n, "[%lld:%lld]", &x, &y) == 2) {
            *a = x;
            *b = y;
            return true;
        }
    }
    return false;
}

int check_gpt_judge(const char *golden, const char *cand, const char *precision, bool step0_only,
                    char *detail, size_t len) {
    judge j = {.pass = 1};
    static const struct {
        const char *name, *refs[4];
        double u;
    } rules[] = {{"f32", {"f32", "f32_k2", "f32_k4", NULL}, 0x1p-24},
                 {"tf32", {"tf32_rna", "tf32_rz", NULL}, 0x1p-10},
                 {"bf16", {"bf16", "bf16_k2", NULL}, 0x1p-8},
                 {"fp16", {"fp16", "fp16_k2", NULL}, 0x1p-11}};
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
        if (precision && !strcmp(precision, rules[i].name)) {
            memcpy(j.refs, rules[i].refs, sizeof j.refs);
            j.u = rules[i].u;
        }
    if (!j.refs[0]) {
        snprintf(detail, len, "precision %s: expected f32, tf32, bf16 or fp16",
                 precision ? precision : "(none)");
        return -1;
    }
    j.g = tdm_safetensors_open(golden);
    j.c = j.g ? tdm_safetensors_open(cand) : NULL;
    const char *fmt = j.g ? tdm_safetensors_metadata(j.g, "format") : NULL;
    const char *steps = j.g ? tdm_safetensors_metadata(j.g, "steps") : NULL;
    const char *illtol = j.g ? tdm_safetensors_metadata(j.g, "ill_conditioned_tol") : NULL;
    const char *illmeta = j.g ? tdm_safetensors_metadata(j.g, "ill_conditioned") : NULL;
    cJSON *ill = illmeta ? cJSON_Parse(illmeta) : NULL;
    j.steps = steps ? atoll(steps) : 0;
    if (!j.g || !j.c) {
        snprintf(j.why, sizeof j.why, "%s", tdm_last_error());
        j.pass = -1;
    } else if (!fmt || strcmp(fmt, "tandem-gpt/1") || j.steps < 1 || !illtol ||
               !cJSON_IsArray(ill)) {
        snprintf(j.why, sizeof j.why,
                 "%s: not a tandem-gpt/1 file (format, steps, "
                 "ill_conditioned)",
                 golden);
        j.pass = -1;
    }
    int64_t N = step0_only ? 1 : j.steps;
    if (j.pass >= 0) series(&j, "loss", N);
    if (j.pass >= 0 && !step0_only) series(&j, "grad_norm", N);
    if (j.pass >= 0 && !step0_only) {  // the schedule
        int64_t k = 0, kc = 0;
        double *lr = values(j.g, "lr", &k), *c = values(j.c, "lr", &kc);
        if (!lr || k != N)
            missing(&j, "the golden file", "lr");
        else if (!c || kc != N)
            missing(&j, "the run", "lr");
        double dev = 0;
        for (int64_t i = 0; j.pass >= 0 && i < N; i++) dev = fmax(dev, fabs(c[i] - lr[i]) / lr[i]);
        if (j.pass >= 0) record(&j, "lr", dev, 1e-6);
        free(lr);
        free(c);
    }
    if (j.pass >= 0) tensor(&j, "logits0", "logits0", "", 1, 0, 0);
    for (int i = 0; j.pass >= 0 && i < tdm_safetensors_count(j.g); i++) {
        const char *name = tdm_safetensors_name(j.g, i);
        if (strncmp(name, "init.", 5)) continue;
        const char *p = name + 5;
        char cname[300], suffix[300];
        snprintf(cname, sizeof cname, "grad0.%s", p);
        snprintf(suffix, sizeof suffix, ".%s", p);
        tensor(&j, cname, "grad0", suffix, 1, 0, 0);
        if (step0_only || j.pass < 0) continue;
        int64_t a = 0, b = 0;
        bool sliced = ill_slice(ill, p, &a, &b);
        tensor(&j, p, "final", suffix, (double)N, a, b);
        if (sliced && j.pass >= 0) {  // the ill slice: absolute, within 3 sum(lr)
            char fname[320];
            snprintf(fname, sizeof fname, "final.f64.%s", p);
            int64_t k = 0, kc = 0;
            double *ex = values(j.g, fname, &k), *c = values(j.c, p, &kc);
            double dev = 0, scale = 0;
            if (ex && c && k == kc && a >= 0 && b <= k)
                deviation(c, ex, b, 0, a, &dev, &scale);
            else
                missing(&j, "the run", p);
            snprintf(fname, sizeof fname, "%s[%lld:%lld]", p, (long long)a, (long long)b);
            if (j.pass >= 0) record(&j, fname, dev, atof(illtol));
            free(ex);
            free(c);
        }
    }
    cJSON_Delete(ill);
    tdm_safetensors_close(j.c);
    tdm_safetensors_close(j.g);
    if (j.pass == 1)
        snprintf(detail, len, "%s: every check within its tolerance; worst %s at %.2g of it",
                 step0_only ? "step 0" : "run", j.worst_name[0] ? j.worst_name : "-", j.worst);
    else
        snprintf(detail, len, "%s", j.why);
    return j.pass;
}

// ---- the bench train command of a golden file
// -----------------------------------------------------

int check_gpt_argv(const char *golden, const char *precision, const char *device, const char *dump,
                   char *store, size_t store_len, char **argv, int max) {
    tdm_safetensors *g = tdm_safetensors_open(golden);
    if (!g || max < 48) {
        tdm_safetensors_close(g);
        return -1;
    }
    static const char *keys[] = {"format",         "n_layer", "n_head", "n_embd",    "block_size",
                                 "vocab_size",     "gelu",    "batch",  "steps",     "lr",
                                 "weight_decay",   "betas",   "eps",    "grad_clip", "warmup_iters",
                                 "lr_decay_iters", "min_lr",  "opt",    "schedule",  "decay",
                                 "dropout"};
    enum {
        FMT,
        L,
        H,
        D,
        BS,
        V,
        GELU,
        B,
        N,
        LR,
        WD,
        BETAS,
        EPS,
        CLIP,
        WARM,
        DECAY,
        MINLR,
        OPT,
        SCHED,
        DEC,
        DROP,
        NK
    };
    const char *v[NK];
    bool ok = true;
    for (int i = 0; i < NK; i++) ok = ok && (v[i] = tdm_safetensors_metadata(g, keys[i])) != NULL;
    double b1 = 0, b2 = 0;
    ok = ok && !strcmp(v[FMT], "tandem-gpt/1") && !strcmp(v[OPT], "adamw") &&
         !strcmp(v[SCHED], "nanogpt_cosine") && !strcmp(v[DEC], "dim>=2") && atof(v[DROP]) == 0 &&
         atof(v[EPS]) == 1e-8 && sscanf(v[BETAS], "[%lf,%lf]", &b1, &b2) == 2;
    size_t used = 0;
    int na = 0;
    // Each formatted string goes into store; NULL when it is full.
#define PUT(...)                                                                               \
    do {                                                                                       \
        int w_ = snprintf(store + used, used < store_len ? store_len - used : 0, __VA_ARGS__); \
        if (w_ < 0 || used + (size_t)w_ + 1 > store_len)                                       \
            ok = false;                                                                        \
        else                                                                                   \
            argv[na++] = store + used, used += (size_t)w_ + 1;                                 \
    } while (0)
    argv[na++] = "bench";
    argv[na++] = "train";
    if (ok) {
        argv[na++] = "--model";
        PUT("gpt:L%s-H%s-D%s-T%s-V%s%s", v[L], v[H], v[D], v[BS], v[V],
            strcmp(v[GELU], "tanh") ? "-erf" : "");
        argv[na++] = "--batch";
        PUT("%s", v[B]);
        argv[na++] = "--steps";
        PUT("%s", v[N]);
        argv[na++] = "--opt";
        argv[na++] = "adamw";
        argv[na++] = "--lr";
        PUT("%s", v[LR]);
        argv[na++] = "--weight-decay";
        PUT("%s", v[WD]);
        argv[na++] = "--weight-decay-matrices-only";
        argv[na++] = "--betas";
        PUT("%.17g,%.17g", b1, b2);
        argv[na++] = "--clip-grad-norm";
        PUT("%s", v[CLIP]);
        argv[na++] = "--lr-schedule";
        PUT("cosine:%s:%s:%s", v[WARM], v[DECAY], v[MINLR]);
    }
    tdm_safetensors_close(g);
    if (!ok) return -1;
    bool tf32 = !strcmp(precision, "tf32");
    const char *amp = !strcmp(precision, "bf16")   ? "bf16"
                      : !strcmp(precision, "fp16") ? "fp16"
                                                   : "off";
    const char *rest[] = {"--init",
                          golden,
                          "--data",
                          golden,
                          "--dump",
                          dump,
                          "--dump-step0",
                          "--device",
                          device,
                          "--tf32",
                          tf32 ? "on" : "off",
                          "--amp",
                          amp};
    for (size_t k = 0; k < sizeof rest / sizeof *rest; k++) argv[na++] = (char *)rest[k];
    argv[na] = NULL;
#undef PUT
    return na;
}

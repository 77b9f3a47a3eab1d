/* bench_train.c — the training step shared by the suites amp, cpu-vs-gpu and scaling
 * (bench_train.h): build a seed model and a fixed batch, step it, read the loss. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tensor_impl.h"   // tdm_error_set
#include "harness/check/check.h"      // the expectations file (the GPU models' dense peaks)
#include "suites/bench/bench_train.h"

const bench_model bench_models[] = {
    {"mlp_1000_512_10", "mlp:1000-512-10", false},
    {"mlp_1000_512_128_10", "mlp:1000-512-128-10", false},
    {"mlp_10000_5000_2000_10", "mlp:10000-5000-2000-10", true},
    // conv-bn-relu-pool x2 + linear on 3x32x32 (CIFAR-sized), 10 classes
    {"cnn_bn", "cnn:3x32x32/c8p1-bn-relu-mp2-c16p1-bn-relu-mp2-flat-fc10", false},
    {0},
};

const char *bench_prec_name(bench_prec p) {
    static const char *const names[] = {"f32", "tf32", "fp16", "bf16"};
    return p >= 0 && p < BENCH_PREC_COUNT ? names[p] : "?";
}

unsigned bench_prec_apply(bench_prec p) {
    unsigned prev = (tdm_tf32_allowed(TDM_TF32_MATMUL) ? 1u : 0u) |
                    (tdm_tf32_allowed(TDM_TF32_CONV) ? 2u : 0u);
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, p == BENCH_PREC_TF32);
    tdm_tf32_set_allowed(TDM_TF32_CONV, p == BENCH_PREC_TF32);
    return prev;
}

void bench_prec_restore(unsigned previous) {
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, previous & 1u);
    tdm_tf32_set_allowed(TDM_TF32_CONV, (previous & 2u) != 0);
}

bool bench_trainer_timed_steps(tdm_gb_state *st, bench_trainer *t, bool ok, double *first,
                               int64_t *steps) {
    int64_t n = 0;
    while (tdm_gb_keep_running(st)) {
        if (!ok) continue;
        double loss;
        if (bench_trainer_step(t, &loss) != TDM_OK) {
            bench_fail(st, "step");
            ok = false;
        } else if (!isfinite(loss)) {
            tdm_gb_skip_with_error(st, "the loss is not finite");
            ok = false;
        } else if (first && n == 0) {
            *first = loss;
        }
        n++;
    }
    if (steps) *steps = n;
    return ok;
}

void bench_fail(tdm_gb_state *st, const char *what) {
    char msg[700];
    snprintf(msg, sizeof msg, "%s: %s", what, tdm_last_error());
    tdm_gb_skip_with_error(st, msg);
}

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---- initial weights, drawn once per (spec, seed) ----------------------------------------------
// tdm_module_init draws every weight in double on the host (a model starts from the same weights
// on every device) at about 100 ns a parameter: 6 s for the 60 M-parameter MLP, 12 s for GPT-2
// 124M. Every trainer of a model starts from the same weights, and Google Benchmark calls a row's
// function for its warm-up, its iteration-count search and each repetition: so the last two
// (spec, seed) drawn are kept on the host and copied (tdm_module_init_copy: the same state to the
// bit). Data-parallel ranks set up their trainers on threads of their own: hence the lock.
enum { INIT_CACHE = 2 };
static struct {
    char spec[256];
    uint64_t seed, used;
    tdm_module *m;
} init_cache[INIT_CACHE];
static uint64_t init_clock;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static tdm_status module_init_cached(tdm_module *m, const char *spec, uint64_t seed) {
    if (strlen(spec) >= sizeof init_cache[0].spec) return tdm_module_init(m, seed);
    pthread_mutex_lock(&init_lock);
    int hit = -1, victim = 0;
    for (int i = 0; i < INIT_CACHE; i++) {
        if (init_cache[i].m && init_cache[i].seed == seed && !strcmp(init_cache[i].spec, spec))
            hit = i;
        if (init_cache[i].used < init_cache[victim].used) victim = i;
    }
    tdm_status s = TDM_OK;
    if (hit < 0) {
        tdm_module *c = tdm_nn_from_spec(spec);
        s = c ? tdm_module_init(c, seed) : tdm_last_status();
        if (s == TDM_OK) {
            tdm_module_free(init_cache[victim].m);
            init_cache[victim].m = c;
            init_cache[victim].seed = seed;
            snprintf(init_cache[victim].spec, sizeof init_cache[victim].spec, "%s", spec);
            hit = victim;
        } else {
            tdm_module_free(c);
        }
    }
    if (s == TDM_OK) {
        init_cache[hit].used = ++init_clock;
        s = tdm_module_init_copy(m, init_cache[hit].m, seed);
    }
    pthread_mutex_unlock(&init_lock);
    return s;
}

// ---- a row's trainer, kept across Google Benchmark's calls of the row --------------------------

static struct {
    char spec[256];
    tdm_device dev;
    bench_prec prec;
    int64_t batch;
    uint64_t seed;
    bool live;
    bench_trainer t;
} row;

tdm_status bench_trainer_row(bench_trainer **t, bool *fresh, const char *spec, tdm_device dev,
                             bench_prec prec, int64_t batch, uint64_t seed) {
    *t = NULL;
    *fresh = false;
    if (row.live && !strcmp(row.spec, spec) && row.dev.type == dev.type &&
        row.dev.index == dev.index && row.prec == prec && row.batch == batch && row.seed == seed) {
        *t = &row.t;
        return TDM_OK;
    }
    bench_trainer_row_drop();
    if (strlen(spec) >= sizeof row.spec)
        return tdm_error_set(TDM_ERR_ARG, "bench: model spec of %zu characters", strlen(spec));
    tdm_status s = bench_trainer_init(&row.t, spec, dev, prec, batch, seed, 1);
    if (s != TDM_OK) return s;
    snprintf(row.spec, sizeof row.spec, "%s", spec);
    row.dev = dev;
    row.prec = prec;
    row.batch = batch;
    row.seed = seed;
    row.live = true;
    *t = &row.t;
    *fresh = true;
    return TDM_OK;
}

void bench_trainer_row_drop(void) {
    if (row.live) bench_trainer_free(&row.t);
    row.live = false;
}

void bench_train_cache_clear(void) {
    bench_trainer_row_drop();
    pthread_mutex_lock(&init_lock);
    for (int i = 0; i < INIT_CACHE; i++) {
        tdm_module_free(init_cache[i].m);
        init_cache[i].m = NULL;
        init_cache[i].used = 0;
    }
    pthread_mutex_unlock(&init_lock);
}

// ---- the trainer ------------------------------------------------------------------------------

void bench_trainer_free(bench_trainer *t) {
    tdm_grad_scaler_free(t->scaler);
    tdm_optimizer_free(t->opt);
    tdm_module_free(t->m);
    tdm_tensor_free(t->x);
    tdm_tensor_free(t->y);
    free(t->params);
    *t = (bench_trainer){0};
}

tdm_status bench_trainer_init(bench_trainer *t, const char *spec, tdm_device dev, bench_prec prec,
                              int64_t batch, uint64_t seed, uint64_t data_offset) {
    *t = (bench_trainer){.dev = dev, .prec = prec, .batch = batch};
    int ndim = 0;
    int64_t shape[TDM_MAX_DIMS] = {batch};
    tdm_status s = tdm_nn_spec_input_shape(spec, &ndim, shape + 1);
    if (s == TDM_OK && ndim + 1 > TDM_MAX_DIMS)
        s = tdm_error_set(TDM_ERR_ARG, "bench: %s: input of %d dims", spec, ndim);
    tdm_gpt_config gc;
    t->lm = s == TDM_OK && !strncmp(spec, "gpt:", 4);
    if (t->lm && (s = tdm_nn_gpt_spec(spec, &gc)) == TDM_OK)   // tokens (batch,T), next tokens
        s = bench_gpt_token_tensors(seed + data_offset, gc.vocab_size, batch, gc.block_size, dev,
                                    &t->x, &t->y);
    int64_t *labels = s == TDM_OK && !t->lm ? malloc((size_t)batch * sizeof *labels) : NULL;
    if (s == TDM_OK && !t->lm && !labels) s = tdm_error_set(TDM_ERR_OOM, "bench: out of memory");
    if (s == TDM_OK && !t->lm) {
        // x (batch, input...) ~ N(0,1); labels from a small LCG over the same stream number
        t->x = tdm_tensor_randn(ndim + 1, shape, TDM_DTYPE_F32, dev, seed, data_offset);
        uint64_t r = data_offset * 2654435761u + 12345;
        for (int64_t i = 0; i < batch; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            labels[i] = (int64_t)((r >> 33) % BENCH_CLASSES);
        }
        t->y = tdm_tensor_from_host(1, &batch, TDM_DTYPE_I64, dev, labels);
        if (!t->x || !t->y) s = tdm_last_status();
    }
    free(labels);
    if (s == TDM_OK && !(t->m = tdm_nn_from_spec(spec))) s = tdm_last_status();
    if (s == TDM_OK) s = module_init_cached(t->m, spec, seed);
    if (s == TDM_OK) s = tdm_module_to(t->m, dev);
    if (s == TDM_OK) {
        t->n_params = tdm_module_parameters(t->m, NULL, 0);
        t->params = calloc((size_t)t->n_params + 1, sizeof *t->params);
        if (!t->params) s = tdm_error_set(TDM_ERR_OOM, "bench: out of memory");
    }
    if (s == TDM_OK) {
        tdm_module_parameters(t->m, t->params, t->n_params);
        for (int i = 0; i < t->n_params; i++)
            t->param_bytes += tdm_tensor_numel(t->params[i]) * 4;
        tdm_sgd_params p = {.lr = 0.01};
        if (!(t->opt = tdm_optim_sgd(t->params, t->n_params, &p))) s = tdm_last_status();
    }
    if (s == TDM_OK && prec == BENCH_PREC_FP16) {
        tdm_grad_scaler_params p = tdm_grad_scaler_defaults();
        if (!(t->scaler = tdm_grad_scaler_new(&p))) s = tdm_last_status();
    }
    if (s != TDM_OK) bench_trainer_free(t);
    return s;
}

tdm_status bench_trainer_attach(bench_trainer *t, tdm_dp_group *g, int rank) {
    t->dp = g;
    t->rank = rank;
    return tdm_dp_attach(g, rank, t->params, t->n_params);
}

// Forward and loss under the precision's autocast: the loss (f32, a new reference) or NULL.
static tdm_tensor *trainer_forward(bench_trainer *t) {
    bool mixed = t->prec == BENCH_PREC_FP16 || t->prec == BENCH_PREC_BF16;
    tdm_autocast_state prev = {0};
    if (mixed) prev = tdm_autocast_enter(t->prec == BENCH_PREC_FP16 ? TDM_DTYPE_F16 : TDM_DTYPE_BF16);
    tdm_tensor *out = tdm_module_forward(t->m, t->x), *loss = NULL;
    if (out)
        loss = t->lm ? tdm_gpt_loss(out, t->y)
                     : tdm_cross_entropy(out, t->y, TDM_REDUCTION_MEAN, 0.0, -100);
    if (mixed) tdm_autocast_exit(prev);
    tdm_tensor_free(out);
    return loss;
}

tdm_status bench_trainer_step(bench_trainer *t, double *loss_out) {
    unsigned tf32 = bench_prec_apply(t->prec);
    tdm_optimizer_zero_grad(t->opt);
    tdm_tensor *loss = trainer_forward(t), *scaled = NULL;
    tdm_status s = loss ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && t->scaler) {
        scaled = tdm_grad_scaler_scale(t->scaler, loss);
        s = scaled ? tdm_backward(scaled, NULL) : tdm_last_status();
    } else if (s == TDM_OK) {
        s = tdm_backward(loss, NULL);
    }
    if (s == TDM_OK && t->dp) s = tdm_dp_sync(t->dp, t->rank);
    if (s == TDM_OK && t->scaler) {
        bool skipped = false;
        s = tdm_grad_scaler_step(t->scaler, t->opt, &skipped);
        tdm_grad_scaler_update(t->scaler);
        t->skipped += skipped;
    } else if (s == TDM_OK) {
        s = tdm_optimizer_step(t->opt);
    }
    double v = NAN;   // loss.item(): after the step's work in the device's queue
    if (s == TDM_OK) s = tdm_tensor_to_host_f64(loss, &v);
    if (loss_out) *loss_out = v;
    tdm_tensor_free(scaled);
    tdm_tensor_free(loss);
    bench_prec_restore(tf32);
    return s;
}

tdm_status bench_trainer_loss(bench_trainer *t, double *v) {
    unsigned tf32 = bench_prec_apply(t->prec);
    bool prev = tdm_grad_set_enabled(false);
    tdm_tensor *loss = trainer_forward(t);
    tdm_status s = loss ? tdm_tensor_to_host_f64(loss, v) : tdm_last_status();
    tdm_grad_set_enabled(prev);
    tdm_tensor_free(loss);
    bench_prec_restore(tf32);
    return s;
}

tdm_status bench_train_protocol(const char *spec, tdm_device dev, bench_prec prec, int64_t batch,
                                uint64_t seed, int steps, double *before, double *after) {
    bench_trainer t;
    tdm_status s = bench_trainer_init(&t, spec, dev, prec, batch, seed, 1);
    if (s != TDM_OK) return s;
    for (int i = 0; s == TDM_OK && i < steps; i++) s = bench_trainer_step(&t, i == 0 ? before : NULL);
    if (s == TDM_OK) s = bench_trainer_loss(&t, after);
    bench_trainer_free(&t);
    return s;
}

double bench_spec_init_seconds(const char *spec) {
    const double per_param = 100e-9;
    double params = 0;
    tdm_gpt_config g;
    if (!strncmp(spec, "mlp:", 4)) {   // Linear(D0,D1) ... : D_i * D_i+1 weights + D_i+1 biases
        const char *p = spec + 4;
        char *end;
        double prev = strtod(p, &end);
        while (end != p && *end == '-') {
            p = end + 1;
            double d = strtod(p, &end);
            if (end == p) break;
            params += prev * d + d;
            prev = d;
        }
    } else if (!strncmp(spec, "gpt:", 4) && tdm_nn_gpt_spec(spec, &g) == TDM_OK) {
        double D = (double)g.n_embd;   // wte (tied lm_head), wpe, L blocks of 12 D^2 + 13 D, ln_f
        params = (double)g.vocab_size * D + (double)g.block_size * D +
                 (double)g.n_layer * (12 * D * D + 13 * D) + 2 * D;
    } else {
        tdm_error_clear();
    }
    return params * per_param;
}

// ---- the GPT benchmarks ------------------------------------------------------------------------

const bench_gpt_model bench_gpt_124m = {"gpt_124m", "gpt:L12-H12-D768-T1024-V50257"};
const bench_gpt_model bench_gpt_124m_t256 = {"gpt_124m_t256", "gpt:L12-H12-D768-T256-V50257"};
const bench_gpt_model bench_gpt_tiny = {"gpt_tiny", "gpt:L2-H2-D32-T16-V67"};

const bench_gpt_model *bench_gpt_for(tdm_device dev, bool quick) {
    tdm_device_props p;
    if (dev.type != TDM_DEVICE_CUDA || tdm_device_props_get(dev, &p) != TDM_OK || p.emulated)
        return &bench_gpt_tiny;
    return quick ? &bench_gpt_124m_t256 : &bench_gpt_124m;
}

static uint64_t gpt_draw(uint64_t *r, uint64_t n) {
    *r = *r * 6364136223846793005ull + 1442695040888963407ull;
    return (*r >> 33) % n;
}

void bench_gpt_tokens(uint64_t seed, int64_t vocab, int64_t batch, int64_t T, int64_t *x,
                      int64_t *y) {
    uint64_t r = seed * 2654435761u + 12345, V = (uint64_t)vocab;
    int64_t *perm = malloc((size_t)vocab * sizeof *perm), n = batch * T;
    for (int64_t i = 0; perm && i < vocab; i++) perm[i] = i;
    for (int64_t i = vocab - 1; perm && i > 0; i--) {   // Fisher-Yates
        int64_t j = (int64_t)gpt_draw(&r, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int64_t prev = (int64_t)gpt_draw(&r, V);
    for (int64_t i = 0; i < n; i++) {   // token i is x[i]; token i+1 is y[i]
        int64_t next = gpt_draw(&r, 4) && perm ? perm[prev] : (int64_t)gpt_draw(&r, V);
        x[i] = prev;
        y[i] = next;
        prev = next;
    }
    free(perm);
}

tdm_status bench_gpt_token_tensors(uint64_t seed, int64_t vocab, int64_t batch, int64_t T,
                                   tdm_device dev, tdm_tensor **x, tdm_tensor **y) {
    int64_t n = batch * T, shape[2] = {batch, T};
    int64_t *hx = malloc((size_t)n * sizeof *hx), *hy = malloc((size_t)n * sizeof *hy);
    *x = *y = NULL;
    tdm_status s = hx && hy ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "bench: out of host memory");
    if (s == TDM_OK) {
        bench_gpt_tokens(seed, vocab, batch, T, hx, hy);
        *x = tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, dev, hx);
        *y = *x ? tdm_tensor_from_host(2, shape, TDM_DTYPE_I64, dev, hy) : NULL;
        if (!*y) {
            s = tdm_last_status();
            tdm_tensor_free(*x);
            *x = NULL;
        }
    }
    free(hx);
    free(hy);
    return s;
}

int64_t bench_tokens_per_sample(const char *spec) {
    tdm_gpt_config c;
    if (strncmp(spec, "gpt:", 4) || tdm_nn_gpt_spec(spec, &c) != TDM_OK) return 0;
    return c.block_size;
}

void bench_work_train(char *buf, int len, const char *spec, const char *prec, int64_t batch,
                      double lr, double momentum, int steps) {
    int64_t T = bench_tokens_per_sample(spec), samples = (int64_t)steps * batch;
    char opt[64], tokens[48] = "";
    if (momentum > 0)
        snprintf(opt, sizeof opt, "SGD lr %g momentum %g", lr, momentum);
    else
        snprintf(opt, sizeof opt, "SGD lr %g", lr);
    if (T > 0) snprintf(tokens, sizeof tokens, ", \"tokens\": %lld", (long long)(samples * T));
    snprintf(buf, (size_t)len,
             "{\"op\": \"train_step\", \"model\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, "
             "\"optimizer\": \"%s\", \"per_iteration\": %d, \"samples\": %lld%s}",
             spec, prec, (long long)batch, opt, steps, (long long)samples, tokens);
}

void bench_rate_counters(tdm_gb_state *st, double samples, int64_t tokens_per_sample,
                         bool per_iteration) {
    bool lm = tokens_per_sample > 0;
    double n = lm ? samples * (double)tokens_per_sample : samples;
    tdm_gb_counter(st, lm ? "tokens/s" : "samples/s", n, TDM_GB_PER_ITERATION_RATE);
    if (per_iteration)
        tdm_gb_counter(st, lm ? "tokens/iteration" : "samples/iteration", n, TDM_GB_PLAIN);
}

double bench_gpt_flop_per_token(const tdm_gpt_config *c) {
    double L = (double)c->n_layer, D = (double)c->n_embd, V = (double)c->vocab_size,
           T = (double)c->block_size;
    // per block: ln_1, ln_2 (2D each), c_attn (3D^2 + 3D), attn c_proj (D^2 + D), c_fc (4D^2 +
    // 4D), mlp c_proj (4D^2 + D); then wte (V D, tied to lm_head) and ln_f (2D); wpe left out
    double N = L * (12 * D * D + 13 * D) + V * D + 2 * D;
    return 6 * N + 12 * L * D * T;
}

double bench_gpt_peak_flops(tdm_device dev, bench_prec p, char *model, size_t model_len) {
    static const char *const keys[BENCH_PREC_COUNT] = {NULL, "tf32", "f16", "bf16"};
    if (model && model_len) model[0] = 0;
    tdm_device_props d;
    if (dev.type != TDM_DEVICE_CUDA || p < 0 || p >= BENCH_PREC_COUNT || !keys[p] ||
        tdm_device_props_get(dev, &d) != TDM_OK || d.emulated)
        return 0;
    char path[4096], err[512];
    cJSON *e = check_expect_default_path(path, sizeof path)
                   ? check_expect_load(path, err, sizeof err)
                   : NULL;
    const cJSON *m = e ? check_expect_model(e, d.name) : NULL;
    const cJSON *tf = cJSON_GetObjectItemCaseSensitive(m, "tflops");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tf, keys[p]);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "model");
    double peak = cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble * 1e12 : 0;
    if (peak > 0 && model && model_len && cJSON_IsString(name))
        snprintf(model, model_len, "%s", name->valuestring);
    cJSON_Delete(e);
    return peak;
}

void bench_gpt_counters(tdm_gb_state *st, const char *spec, tdm_device dev, int64_t batch,
                        bench_prec p, int64_t n_params, char *note, size_t note_len) {
    tdm_gpt_config c;
    note[0] = 0;
    if (tdm_nn_gpt_spec(spec, &c) != TDM_OK) return;
    double tokens = (double)(batch * c.block_size), fpt = bench_gpt_flop_per_token(&c);
    // the formula's N against the model's own parameters (wpe left out): a check of the count
    double n_formula = (fpt - 12.0 * c.n_layer * c.n_embd * c.block_size) / 6;
    if (n_params && fabs((double)(n_params - c.block_size * c.n_embd) - n_formula) > 0.5) {
        char msg[200];
        snprintf(msg, sizeof msg, "N = %.0f by the formula, %lld parameters without wpe",
                 n_formula, (long long)(n_params - c.block_size * c.n_embd));
        tdm_gb_skip_with_error(st, msg);
    }
    tdm_gb_counter(st, "FLOP/token", fpt, TDM_GB_PLAIN);
    char model[128];
    double peak = bench_gpt_peak_flops(dev, p, model, sizeof model);
    if (peak > 0) {
        tdm_gb_counter(st, "MFU", tokens * fpt / peak, TDM_GB_PER_ITERATION_RATE);
        tdm_gb_counter(st, "peak_TFLOP_per_s", peak / 1e12, TDM_GB_PLAIN);
        snprintf(note, note_len, "; MFU = tokens/s * FLOP/token / %s's dense %s peak", model,
                 bench_prec_name(p));
    }
}

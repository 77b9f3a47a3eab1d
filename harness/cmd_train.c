/* cmd_train.c — `bench train`: the training API from the command line. Builds a model from the
 * grammar of nn.h, trains it on a --data file (rows in order, wrapping around) or on a seeded
 * synthetic task, with SGD/Adam/AdamW, optional autocast (fp16 with the gradient scaler, bf16),
 * gradient accumulation and activation checkpointing; prints a line per step and a summary, and
 * --dump writes the final state dict and the loss of every step. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "harness/train_tokens.h"   // gpt: token data
#include "core/env_impl.h"      // tdm_env_i64
#include "core/files_impl.h"    // tdm_file_check_target
#include "core/tensor_impl.h"   // tdm_error_set, TDM_TRY
#include "tandem/tandem.h"

typedef struct {
    const char *model, *opt, *amp, *init, *data, *dump, *device, *profile;
    int64_t batch, steps, accumulate, segments, ranks;
    double lr, momentum, weight_decay;
    bool lr_set, momentum_set, wd_set, ranks_set;
    bool maximize, amsgrad;   // torch.optim's maximize (all) and amsgrad (adam/adamw)
    bool fused_adam;          // --fused-adam: Adam/AdamW(..., fused=True), one step call
    bool init_partial;        // --init-partial: load_state_dict(strict=False): names may differ
    bool graph;   // --graph: capture one step into a CUDA graph, replay it (tandem/graph.h)
    uint64_t seed;
    double clip;         // --clip-grad-norm: max_norm of clip_grad_norm_ (0: off, as nanoGPT's)
    bool wd_matrices;    // --weight-decay-matrices-only: nanoGPT's two parameter groups
    bool sched_set;      // --lr-schedule cosine:WARMUP:DECAY:MIN_LR (max_lr: the --lr)
    tdm_lr_cosine sched;
    bool gpt;                // a gpt: model: token data, the language-model loss
    tdm_gpt_config gpt_cfg;
    double betas[2];         // --betas (adam/adamw); NAN: the defaults
    bool dump_step0;         // --dump-step0: step 0's logits and gradients in the --dump
    const char *dump_optimizer, *init_optimizer;   // the optimizer's state out / in
    int64_t start_step;      // --start-step: the global index of the first step (a resume)
    double scaler_init;      // --scaler-init-scale (fp16): GradScaler's init_scale; 0: 65536
    int64_t scaler_interval; // --scaler-growth-interval (fp16): its growth_interval; 0: 2000
} train_args;

static void train_usage(FILE *f) {
    fprintf(f,
        "usage: bench train --model SPEC [--batch B] --steps N --opt sgd|adam|adamw --lr F\n"
        "                   [--momentum F] [--weight-decay F] [--maximize] [--amsgrad]\n"
        "                   [--clip-grad-norm X] [--lr-schedule cosine:WARMUP:DECAY:MIN_LR]\n"
        "                   [--weight-decay-matrices-only] [--betas B1,B2] [--fused-adam]\n"
        "                   [--dump-step0] [--dump-optimizer FILE] [--init-optimizer FILE]\n"
        "                   [--start-step N] [--scaler-init-scale S] [--scaler-growth-interval N]\n"
        "                   [--seed S] [--device cpu|cuda:N]\n"
        "                   [--amp off|fp16|bf16] [--ranks N] [--accumulate K]\n"
        "                   [--checkpoint-segments K] [--init FILE] [--data FILE] [--dump FILE]\n"
        "                   [--tf32 on|off] [--deterministic] [--graph]\n"
        "\n"
        "Trains a model with cross-entropy loss and prints one line per step (to stderr when it is\n"
        "a terminal) and a summary. Model grammar (an equivalent torch.nn.Sequential; state dict\n"
        "names 0.weight, 0.bias, 2.weight, ...):\n"
        "  mlp:D0-D1-...-Dk        Linear(D0,D1), ReLU, ..., Linear(Dk-1,Dk)\n"
        "  cnn:CxHxW/TOK-TOK-...   TOK: cO[kK][sS][pP] Conv2d (K=3, S=1, P=0) | bn BatchNorm2d |\n"
        "                          relu | gelu | mpK[sS] MaxPool2d | apK[sS] AvgPool2d | flat |\n"
        "                          fcN Linear | doP Dropout\n"
        "  e.g. cnn:3x32x32/c16k3p1-bn-relu-mp2-c32k3p1-bn-relu-mp2-flat-fc10\n"
        "  gpt:TOK-TOK-...         nanoGPT's GPT-2: Ln layers, Hn heads, Dn width, Tn context,\n"
        "                          Vn vocabulary (any order); [dropP] dropout, [erf] exact GELU;\n"
        "                          nanoGPT's state dict names, lm_head tied to wte (dumped once,\n"
        "                          as lm_head.weight); loss over (B*T, V), targets -1 ignored\n"
        "  e.g. gpt:L2-H2-D32-T16-V67\n"
        "--batch B         rows per optimizer step (default 64); with --accumulate K, K micro-batches of B/K\n"
        "                  rows whose losses are divided by K (B must be a multiple of K)\n"
        "--data FILE       safetensors with x (samples, features...) floating and y (samples) int64\n"
        "                  or int32;\n"
        "                  step i uses rows [i*B, (i+1)*B) modulo samples, no shuffle. Without it:\n"
        "                  a seeded synthetic task (y = argmax of a random linear map of x).\n"
        "                  gpt: x and y (N,T) int64/int32 token rows (T <= context; y -1 ignored),\n"
        "                  or FILE.bin, llm.c's token file (magic 20240520, uint16 tokens): step\n"
        "                  i reads window i mod W of B*T+1 tokens as llm.c's DataLoader; without\n"
        "                  it, a seeded synthetic token stream\n"
        "--init FILE       parameters by state dict name (a golden training file's init.* too);\n"
        "                  a name the model lacks, or a tensor of the model the file lacks, is\n"
        "                  refused (exit 2, the names named), as load_state_dict(strict=True)\n"
        "--init-partial    with --init: loads the names the model has, keeps the others'\n"
        "                  initialisation (load_state_dict(strict=False))\n"
        "--dump FILE       writes the final state dict and `loss` (steps,) f32, atomically (a\n"
        "                  link, FIFO or device at FILE is refused before training, exit 2)\n"
        "--amp fp16        autocast to f16 with a gradient scaler; bf16: autocast, no scaler\n"
        "--ranks N         data parallel: N replicas (threads on the cpu) on B/N rows each, their\n"
        "                  gradients averaged (all-reduced in buckets during backward) every step.\n"
        "                  Under mpirun/srun (a build with MPI) the ranks are the processes, on one\n"
        "                  node or many: mpirun -np 4 bench train ... (rank 0 prints and dumps).\n"
        "                  On cuda:N, rank r uses cuda:N+r (MPI: N + its rank on the node) and\n"
        "                  gradients are all-reduced by NCCL (TANDEM_DP_COMM=host: through the host)\n"
        "--tf32 on|off     f32 matmuls and convolutions may (not) use TF32 tensor cores: PyTorch's\n"
        "                  allow_tf32 for both; default as PyTorch: off for matmul, on for convs\n"
        "--deterministic   convolutions use only bit-reproducible algorithms\n"
        "                  (cudnn.deterministic) and the fused attention's backward runs\n"
        "                  without atomics (attention mode deterministic); the cpu\n"
        "                  reference always is\n"
        "--checkpoint-segments K  recompute activations of K segments in backward (less memory)\n"
        "--graph           CUDA graphs (PyTorch's reduce-overhead): up to 3 eager warm-up steps,\n"
        "                  then one whole step (zero_grad, forward, loss, backward, optimizer\n"
        "                  step) is captured with static input/target tensors and each later step\n"
        "                  copies its batch into them and replays the graph; step counts, momentum\n"
        "                  state and dropout masks advance per replay as in eager steps (same\n"
        "                  results bit for bit). cuda only, one rank, no --accumulate, no --amp\n"
        "                  fp16, no --profile\n"
        "--profile FILE    profiles steps 2-4 (step 1 is warm-up; with --steps 1, step 1), writes\n"
        "                  their Chrome trace to FILE (open in ui.perfetto.dev) and prints the\n"
        "                  top ops (docs/PROFILING.md)\n"
        "--opt defaults    sgd: momentum 0, weight decay 0; adam: wd 0; adamw: wd 1e-2;\n"
        "                  adam/adamw betas (0.9, 0.999), eps 1e-8\n"
        "--betas B1,B2     adam/adamw's betas (default 0.9,0.999; nanoGPT trains with 0.9,0.95)\n"
        "--dump-step0      --dump also holds step 0's logits (logits0) and every parameter's\n"
        "                  gradient (grad0.<name>: after the backward, unscaled with fp16, before\n"
        "                  clipping), as a golden GPT check reads them (docs/CASE_FORMAT.md); every\n"
        "                  dump holds each step's loss and lr, grad_norm with --clip-grad-norm and\n"
        "                  the scaler's scale with --amp fp16\n"
        "--dump-optimizer FILE  writes the optimizer's state (tdm_optimizer_save) after the run;\n"
        "                  with --amp fp16 the gradient scaler's too (scale, _growth_tracker)\n"
        "--init-optimizer FILE  starts from such a state; with --init DUMP and --start-step N a run\n"
        "                  resumes one that did N steps: its data rows, schedule and dropout\n"
        "                  masks continue from step N, bit for bit as the run uninterrupted\n"
        "                  (with --amp fp16 the scaler too: the file must hold its state)\n"
        "--scaler-init-scale S, --scaler-growth-interval N  (--amp fp16) the gradient scaler's\n"
        "                  init_scale (default 65536) and growth_interval (default 2000), as\n"
        "                  torch.amp.GradScaler's arguments\n"
        "--maximize        ascend the loss (PyTorch's maximize: the gradient negated first)\n"
        "--amsgrad         adam/adamw: AMSGrad (normalise by the running maximum of exp_avg_sq)\n"
        "--fused-adam      adam/adamw: PyTorch's fused=True: every parameter's update in one call\n"
        "                  (on cuda one kernel launch per step instead of one per parameter), the\n"
        "                  same numbers bit for bit; the summary line says \"adamw fused\"\n"
        "--clip-grad-norm X  before each optimizer step the gradients' total 2-norm is clipped to\n"
        "                  X, as torch.nn.utils.clip_grad_norm_ (after the ranks' all-reduce;\n"
        "                  with --amp fp16 after unscaling; inside the captured step with\n"
        "                  --graph). 0: no clipping (nanoGPT's grad_clip = 0)\n"
        "--lr-schedule cosine:WARMUP:DECAY:MIN_LR  nanoGPT's get_lr from the --lr (max_lr):\n"
        "                  step i (0-based) warms up as lr (i+1)/(WARMUP+1) while i < WARMUP, then\n"
        "                  decays on a cosine to MIN_LR at step DECAY, MIN_LR after; every\n"
        "                  group's lr is set before each step (--graph: before each replay)\n"
        "--weight-decay-matrices-only  two parameter groups, as nanoGPT's configure_optimizers:\n"
        "                  the weight decay on parameters of dim >= 2 (weights, embeddings), none\n"
        "                  on the others (biases, norms' weights)\n"
        "Exit: 0 done, 1 a failure while training (a loss that is NaN or infinite ends the run\n"
        "there: nothing dumped), 2 bad arguments or input (--init weights that are not finite).\n");
}

#define bad(...) bench_bad("train", __VA_ARGS__)

static bool parse_i64(const char *s, int64_t lo, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo) return false;
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !isfinite(v) || v < 0) return false;
    *out = v;
    return true;
}

// --lr-schedule cosine:WARMUP:DECAY:MIN_LR (WARMUP <= DECAY, steps; MIN_LR a number >= 0).
static int parse_schedule(const char *arg, tdm_lr_cosine *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    char *w = strncmp(buf, "cosine:", 7) ? NULL : buf + 7;
    char *d = w ? strchr(w, ':') : NULL, *m = d ? strchr(d + 1, ':') : NULL;
    if (d) *d++ = '\0';
    if (m) *m++ = '\0';
    *s = (tdm_lr_cosine){0};
    if (strlen(arg) >= sizeof buf || !m || !parse_i64(w, 0, &s->warmup_steps) ||
        !parse_i64(d, 0, &s->decay_steps) || !parse_f64(m, &s->min_lr) ||
        s->decay_steps < s->warmup_steps || !(s->min_lr >= 0) || !isfinite(s->min_lr))
        return bad("--lr-schedule %s: expected cosine:WARMUP:DECAY:MIN_LR (steps 0 <= WARMUP <= "
                   "DECAY, MIN_LR a number >= 0)", arg);
    return 0;
}

// An output file must be writable before the training that produces it, not found unwritable
// after it: the temp file the atomic writers put beside it (path.tmp.<pid>) is created and
// removed, so a missing folder, a read-only place or a directory given as the file fail at once;
// and a path that is a symbolic link, a FIFO or a device (--dump /dev/null) is refused: the
// writers never replace one (core/files_impl.h).
static int check_output(const char *flag, const char *path) {
    if (!path[0]) return bad("%s '': expected the path of a file to write", flag);
    if (tdm_file_check_target(path) != 0)
        return bad("%s %s: %s: give the path of a regular file to write", flag, path,
                   tdm_file_strerror(errno));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return bad("%s %s: cannot write: %s", flag, path, strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    return 0;
}

// ---- data ---------------------------------------------------------------------------------

typedef struct {
    tdm_tensor *x, *y;   // (samples, ...) f32, (samples) i64, on the cpu
    int64_t samples, row_elems;
    bench_tokens tok;    // gpt: instead of x, y (tok.rows > 0)
} dataset;

static int load_data(const train_args *a, const char *spec, dataset *d) {
    int nd;
    int64_t in_shape[TDM_MAX_DIMS], row = 1;
    if (tdm_nn_spec_input_shape(spec, &nd, in_shape) != TDM_OK) return bad("%s", tdm_last_error());
    for (int i = 0; i < nd; i++) row *= in_shape[i];
    d->row_elems = row;
    if (a->gpt) {   // token data: --data (safetensors x/y or llm.c .bin) or a synthetic stream
        const tdm_gpt_config *c = &a->gpt_cfg;
        tdm_status s = a->data ? bench_tokens_load(a->data, c->vocab_size, c->block_size, a->batch, &d->tok)
                               : bench_tokens_synthetic(a->seed, c->vocab_size, c->block_size, a->batch, &d->tok);
        return s == TDM_OK ? 0 : bad("%s%s", a->data ? "--data " : "", tdm_last_error());
    }
    if (a->data) {
        tdm_safetensors *st = tdm_safetensors_open(a->data);
        if (!st) return bad("%s", tdm_last_error());
        d->x = tdm_safetensors_get(st, "x", TDM_CPU);
        d->y = d->x ? tdm_safetensors_get(st, "y", TDM_CPU) : NULL;
        tdm_safetensors_close(st);
        if (!d->x || !d->y) return bad("--data: %s", tdm_last_error());
        const int64_t *xs = tdm_tensor_shape(d->x);
        d->samples = tdm_tensor_ndim(d->x) ? xs[0] : 0;
        if (tdm_tensor_dtype(d->y) == TDM_DTYPE_I32) {   // int32 labels: widened, as .long() would
            tdm_tensor *y64 = tdm_tensor_to(d->y, TDM_CPU, TDM_DTYPE_I64);
            tdm_tensor_free(d->y);
            d->y = y64;
            if (!d->y) return bad("--data: %s", tdm_last_error());
        }
        if (!tdm_dtype_is_float(tdm_tensor_dtype(d->x)) || tdm_tensor_dtype(d->y) != TDM_DTYPE_I64 ||
            tdm_tensor_ndim(d->y) != 1 || tdm_tensor_shape(d->y)[0] != d->samples || d->samples < 1)
            return bad("%s: needs x (samples, ...) floating and y (samples) int64", a->data);
        if (tdm_tensor_numel(d->x) != d->samples * row) {
            char s[1200];
            snprintf(s, sizeof s, "%.1000s: x has %lld features per sample but the model takes %lld",
                     a->data, (long long)(tdm_tensor_numel(d->x) / d->samples), (long long)row);
            return bad("%s", s);
        }
        if (tdm_tensor_dtype(d->x) != TDM_DTYPE_F32) {
            tdm_tensor *f = tdm_tensor_to(d->x, TDM_CPU, TDM_DTYPE_F32);
            tdm_tensor_free(d->x);
            d->x = f;
        }
        return d->x ? 0 : bad("%s", tdm_last_error());
    }
    // Synthetic: x ~ N(0,1), y = argmax(x W) with W (row, classes) ~ N(0,1), all from the seed.
    d->samples = 4096;
    int64_t xs[2] = {d->samples, row};
    d->x = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, TDM_CPU, a->seed, 1001);
    return d->x ? 0 : bad("%s", tdm_last_error());
}

// Labels of the synthetic task need the model's class count: argmax over a random projection.
static int synth_labels(dataset *d, int64_t classes, uint64_t seed) {
    int64_t ws[2] = {d->row_elems, classes}, ys[1] = {d->samples};
    tdm_tensor *w = tdm_tensor_randn(2, ws, TDM_DTYPE_F64, TDM_CPU, seed, 1002);
    d->y = tdm_tensor_zeros(1, ys, TDM_DTYPE_I64, TDM_CPU);
    if (!w || !d->y) {
        tdm_tensor_free(w);
        return bad("%s", tdm_last_error());
    }
    const float *x = tdm_tensor_data(d->x);
    const double *W = tdm_tensor_data(w);
    int64_t *y = tdm_tensor_data(d->y);
    for (int64_t i = 0; i < d->samples; i++) {
        double best = -INFINITY;
        for (int64_t c = 0; c < classes; c++) {
            double s = 0;
            for (int64_t j = 0; j < d->row_elems; j++) s += x[i * d->row_elems + j] * W[j * classes + c];
            if (s > best) best = s, y[i] = c;
        }
    }
    tdm_tensor_free(w);
    return 0;
}

// Rows [start, start+n) modulo samples, shaped (n, input shape...), on `dev`.
static tdm_status batch_rows(const dataset *d, const char *spec, int64_t start, int64_t n,
                             tdm_device dev, tdm_tensor **xb, tdm_tensor **yb) {
    if (d->tok.rows) return bench_tokens_batch(&d->tok, start, n, dev, xb, yb);   // (n,T) tokens
    int nd;
    int64_t shape[TDM_MAX_DIMS + 1];
    TDM_TRY(tdm_nn_spec_input_shape(spec, &nd, shape + 1));
    shape[0] = n;
    float *xh = malloc((size_t)(n * d->row_elems) * sizeof *xh);
    int64_t *yh = malloc((size_t)n * sizeof *yh);
    tdm_status s = xh && yh ? TDM_OK : TDM_ERR_OOM;
    const float *x = tdm_tensor_data_const(d->x);
    const int64_t *y = tdm_tensor_data_const(d->y);
    for (int64_t i = 0; s == TDM_OK && i < n; i++) {
        int64_t r = (start + i) % d->samples;
        memcpy(xh + i * d->row_elems, x + r * d->row_elems, (size_t)d->row_elems * sizeof *xh);
        yh[i] = y[r];
    }
    *xb = s == TDM_OK ? tdm_tensor_from_host(nd + 1, shape, TDM_DTYPE_F32, dev, xh) : NULL;
    *yb = *xb ? tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, dev, yh) : NULL;
    free(xh);
    free(yh);
    if (!*yb) {
        tdm_tensor_free(*xb);
        *xb = NULL;
        return s == TDM_OK ? tdm_last_status() : tdm_error_set(TDM_ERR_OOM, "train: out of memory");
    }
    return TDM_OK;
}

// ---- the loop -----------------------------------------------------------------------------------

// The loss: F.cross_entropy(out, y) (ignore_index -100, PyTorch's default); a language model's
// logits (B,T,V) with targets (B,T) as nanoGPT's F.cross_entropy(logits.view(-1, V),
// targets.view(-1), ignore_index=-1).
static tdm_tensor *train_loss(const tdm_tensor *out, const tdm_tensor *y) {
    if (tdm_tensor_ndim(out) != 3 || tdm_tensor_ndim(y) != 2)
        return tdm_cross_entropy(out, y, TDM_REDUCTION_MEAN, 0.0, -100);
    return tdm_gpt_loss(out, y);
}

// One micro-batch: forward (under autocast), loss / K (scaled for fp16), backward. *loss_out
// gets the unscaled, undivided loss.
static tdm_status micro_step(tdm_module *m, tdm_tensor *xb, tdm_tensor *yb, int64_t k,
                             const char *amp, tdm_grad_scaler *scaler, double *loss_out,
                             tdm_tensor **logits_out) {
    tdm_autocast_state prev = {0};
    bool ac = strcmp(amp, "off") != 0;
    (void)tdm_profile_range_push("forward");
    if (ac) prev = tdm_autocast_enter(!strcmp(amp, "fp16") ? TDM_DTYPE_F16 : TDM_DTYPE_BF16);
    tdm_tensor *out = tdm_module_forward(m, xb);
    tdm_tensor *loss = out ? train_loss(out, yb) : NULL;
    if (ac) tdm_autocast_exit(prev);
    tdm_status s = loss ? tdm_tensor_to_host_f64(loss, loss_out) : tdm_last_status();
    if (s == TDM_OK && logits_out && !(*logits_out = tdm_tensor_detach(out))) s = tdm_last_status();
    (void)tdm_profile_range_pop();   // forward
    (void)tdm_profile_range_push("backward");
    tdm_tensor *scaled = NULL, *kinv = NULL, *f = NULL;
    if (s == TDM_OK) {
        double inv = 1.0 / (double)k;
        f = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F64, TDM_CPU, &inv);
        kinv = f ? tdm_tensor_to(f, tdm_tensor_device(loss), tdm_tensor_dtype(loss)) : NULL;
        tdm_tensor *div = kinv ? (k > 1 ? tdm_mul(loss, kinv) : tdm_tensor_retain(loss)) : NULL;
        scaled = div && scaler ? tdm_grad_scaler_scale(scaler, div) : div;
        if (scaled != div) tdm_tensor_free(div);
        s = scaled ? tdm_backward(scaled, NULL) : tdm_last_status();
    }
    (void)tdm_profile_range_pop();   // backward
    tdm_tensor_free(scaled);
    tdm_tensor_free(kinv);
    tdm_tensor_free(f);
    tdm_tensor_free(loss);
    tdm_tensor_free(out);
    return s;
}

// --clip-grad-norm: clip_grad_norm_ over the model's parameters (the caller unscales first with
// the fp16 scaler, as nanoGPT: scaler.unscale_(optimizer); clip_grad_norm_(model.parameters(),
// clip)). *total (when not NULL): the norm before clipping, a 0-d tensor on the device.
static tdm_status clip_grads(tdm_module *m, double clip, tdm_tensor **total_out) {
    int np = tdm_module_parameters(m, NULL, 0);
    tdm_tensor **params = calloc((size_t)np + 1, sizeof *params);
    if (!params) return tdm_error_set(TDM_ERR_OOM, "train: out of memory");
    tdm_module_parameters(m, params, np);
    tdm_tensor *total = tdm_clip_grad_norm_(params, np, clip, 2.0, false);
    free(params);
    tdm_status s = total ? TDM_OK : tdm_last_status();
    if (total_out) *total_out = total;
    else tdm_tensor_free(total);
    return s;
}

// --graph: the step that is captured. Everything it reads is static (the model, xs, ys, ones,
// the optimizer's state); the loss it returns is the graph's output, rewritten by each replay.
// What changes from step to step (Adam's step count, whether the momentum buffer holds a value,
// dropout's offsets) is read on the device and advanced before each replay (core/graph_impl.h). backward is seeded with `ones` made before the capture (the
// implicit seed would be a host copy, which cannot be captured).
static tdm_status graph_step(tdm_module *m, tdm_optimizer *opt, tdm_tensor *xs, tdm_tensor *ys,
                             tdm_tensor *ones, const char *amp, double clip,
                             tdm_tensor **loss_out, tdm_tensor **norm_out) {
    tdm_autocast_state prev = {0};
    bool ac = strcmp(amp, "off") != 0;
    tdm_optimizer_zero_grad(opt);
    if (ac) prev = tdm_autocast_enter(TDM_DTYPE_BF16);   // fp16 is refused (the scaler)
    tdm_tensor *out = tdm_module_forward(m, xs);
    tdm_tensor *loss = out ? train_loss(out, ys) : NULL;
    if (ac) tdm_autocast_exit(prev);
    tdm_status s = loss ? tdm_backward(loss, ones) : tdm_last_status();
    if (s == TDM_OK && clip > 0) s = clip_grads(m, clip, norm_out);   // captured: no host wait
    if (s == TDM_OK) s = tdm_optimizer_step(opt);
    tdm_tensor_free(out);
    if (s != TDM_OK) {
        tdm_tensor_free(loss);
        loss = NULL;
    }
    *loss_out = loss;
    return s;
}

// --graph, step `step` >= the warm-up: this batch into the static tensors, then (the first time)
// capture the step, and replay it; *l = the static loss after the replay.
typedef struct {
    tdm_tensor *xs, *ys, *ones, *loss, *norm;   // norm: clip_grad_norm_'s total (--clip-grad-norm)
    tdm_graph *g;
} graph_state;

static tdm_status graph_run(graph_state *gs, tdm_module *m, tdm_optimizer *opt, tdm_tensor *xb,
                            tdm_tensor *yb, const char *amp, double clip, tdm_device dev,
                            double *l, double *norm) {
    if (!gs->xs) {   // the static tensors, shaped as the batch
        gs->xs = tdm_tensor_zeros(tdm_tensor_ndim(xb), tdm_tensor_shape(xb), tdm_tensor_dtype(xb), dev);
        gs->ys = tdm_tensor_zeros(tdm_tensor_ndim(yb), tdm_tensor_shape(yb), tdm_tensor_dtype(yb), dev);
        float one = 1.0f;
        gs->ones = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, dev, &one);
        if (!gs->xs || !gs->ys || !gs->ones) return tdm_last_status();
    }
    TDM_TRY(tdm_tensor_copy_(gs->xs, xb));
    TDM_TRY(tdm_tensor_copy_(gs->ys, yb));
    if (!gs->g) {
        TDM_TRY(tdm_graph_capture_begin(dev));
        tdm_status s = graph_step(m, opt, gs->xs, gs->ys, gs->ones, amp, clip, &gs->loss,
                                  &gs->norm);
        char why[512];
        snprintf(why, sizeof why, "%s", tdm_last_error());
        tdm_status e = tdm_graph_capture_end(dev, &gs->g);
        if (s != TDM_OK) return tdm_error_set(s, "--graph: capturing the step: %s", why);
        if (e != TDM_OK) return tdm_error_set(e, "--graph: %s", tdm_last_error());
    }
    TDM_TRY(tdm_graph_replay(gs->g));
    if (gs->norm) TDM_TRY(tdm_tensor_to_host_f64(gs->norm, norm));
    return tdm_tensor_to_host_f64(gs->loss, l);   // on the current stream: after the replay
}

// ---- one rank -----------------------------------------------------------------------------------
// Every rank builds its replica from the same spec, seed and --init (so all start identical), takes
// its slice of each global batch, and (with several ranks) all-reduces gradients before stepping.

typedef struct {
    const train_args *a;
    const dataset *d;
    tdm_device dev;
    tdm_dp_group *group;   // NULL for one rank
    float *losses;         // written by rank 0
    int64_t skipped_steps;
    double elapsed;
    tdm_memory_stats mem0, mem1;
    tdm_module *model0;    // rank 0's trained model, kept for --dump (owned by the caller)
    tdm_profile *prof;     // --profile: the profiled steps (rank 0 starts and stops the session)
    uint64_t launches;     // --profile: kernel launches + library calls during those steps (all ranks)
    // What --dump holds besides the state dict and the losses (rank 0): each step's lr,
    // clip_grad_norm_'s total (--clip-grad-norm) and the fp16 scaler's scale; --dump-step0: step
    // 0's logits and each state entry's gradient (unscaled, before clipping; NULL: none).
    double *lrs;
    float *norms, *scales;
    tdm_tensor *logits0, **grad0;
    int n_grad0;
} train_ctx;

// --dump-step0: every parameter's gradient now, copied (clipping changes them in place).
static tdm_status snapshot_grads(tdm_module *m, train_ctx *t) {
    int n = tdm_module_state(m, NULL, NULL, 0);
    tdm_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
    t->grad0 = calloc((size_t)n + 1, sizeof *t->grad0);
    t->n_grad0 = t->grad0 ? n : 0;
    tdm_status s = ts && t->grad0 ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "train: out of memory");
    if (s == TDM_OK) tdm_module_state(m, NULL, ts, n);
    for (int i = 0; s == TDM_OK && i < n; i++) {
        tdm_tensor *g = tdm_tensor_grad(ts[i]);
        if (g && !(t->grad0[i] = tdm_tensor_clone(g))) s = tdm_last_status();
    }
    free(ts);
    return s;
}

// The state dict as tdm_module_save writes it (a tied tensor once, as safetensors' save_model),
// and the records: loss, lr (steps), grad_norm and scale when kept, logits0 and grad0.<name>
// (a tied parameter's under the name its weights are saved under), as docs/CASE_FORMAT.md's
// tandem-gpt/1 section says a dump holds.
static int dump_state(const train_ctx *t, const char *path) {
    tdm_module *m = t->model0;
    int64_t steps = t->a->steps;
    int n = tdm_module_state(m, NULL, NULL, 0), k = 0;
    const char **names = calloc((size_t)n + 1, sizeof *names), **en = calloc((size_t)n + 6, sizeof *en);
    tdm_tensor **st = calloc((size_t)n + 1, sizeof *st), **own = calloc((size_t)n + 6, sizeof *own);
    const tdm_tensor **et = calloc((size_t)n + 6, sizeof *et);
    char **gname = calloc((size_t)n + 1, sizeof *gname);
    int rc = !names || !en || !st || !own || !et || !gname;
    if (!rc) {
        tdm_module_state(m, names, st, n);
        own[k] = tdm_tensor_from_host(1, &steps, TDM_DTYPE_F32, TDM_CPU, t->losses);
        en[k++] = "loss";
        own[k] = tdm_tensor_from_host(1, &steps, TDM_DTYPE_F64, TDM_CPU, t->lrs);
        en[k++] = "lr";
        if (t->norms) {
            own[k] = tdm_tensor_from_host(1, &steps, TDM_DTYPE_F32, TDM_CPU, t->norms);
            en[k++] = "grad_norm";
        }
        if (t->scales) {
            own[k] = tdm_tensor_from_host(1, &steps, TDM_DTYPE_F32, TDM_CPU, t->scales);
            en[k++] = "scale";
        }
        if (t->logits0) {
            own[k] = tdm_tensor_retain(t->logits0);
            en[k++] = "logits0";
        }
        for (int i = 0; i < k; i++) rc |= !(et[i] = own[i]);
    }
    for (int i = 0; !rc && t->grad0 && i < n; i++) {
        bool kept = t->grad0[i] != NULL;
        for (int j = 0; kept && j < n; j++)   // a tied tensor: under its first name in sorted order
            kept = !(st[j] == st[i] && strcmp(names[j], names[i]) < 0);
        if (!kept) continue;
        size_t l = strlen(names[i]) + 7;
        if (!(gname[i] = malloc(l))) rc = 1;
        else snprintf(gname[i], l, "grad0.%s", names[i]);
        en[k] = gname[i];
        et[k++] = t->grad0[i];
    }
    if (!rc) rc = tdm_module_save_with(m, path, k, en, et) != TDM_OK;
    if (rc) fprintf(stderr, "bench train: --dump %s: %s\n", path, tdm_last_error());
    for (int i = 0; own && i < 6; i++) tdm_tensor_free(own[i]);
    for (int i = 0; gname && i < n; i++) free(gname[i]);
    free(names);
    free(en);
    free(st);
    free(own);
    free(et);
    free(gname);
    return rc;
}

#define PROFILE_STEPS 3   // --profile: steps profiled after the warm-up step

// Every floating state entry of m (on the cpu) holds finite values, or an error naming the first
// entry that does not (its name as in the file: prefix + state name), the element and the value.
// A NaN or infinite weight (in the file, or a finite f64 beyond the model's dtype) can only make
// a NaN loss: `bench train --init` refuses it as bad input.
static tdm_status check_finite_state(tdm_module *m, const char *path, const char *prefix) {
    int n = tdm_module_state(m, NULL, NULL, 0);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    tdm_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
    tdm_status s = names && ts ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "--init: out of memory");
    if (s == TDM_OK) tdm_module_state(m, names, ts, n);
    for (int i = 0; s == TDM_OK && i < n; i++) {
        tdm_dtype dt = tdm_tensor_dtype(ts[i]);
        if (!tdm_dtype_is_float(dt)) continue;   // num_batches_tracked
        int64_t k = tdm_tensor_numel(ts[i]);
        double *v = malloc((size_t)(k ? k : 1) * sizeof *v);
        if (!v) s = tdm_error_set(TDM_ERR_OOM, "--init: out of memory");
        else s = tdm_tensor_to_host_f64(ts[i], v);
        for (int64_t j = 0; s == TDM_OK && j < k; j++)
            if (!isfinite(v[j]))
                s = tdm_error_set(TDM_ERR_FORMAT, "--init %s: tensor '%s%s' holds %g at element "
                                  "%lld (as %s): the weights must be finite", path, prefix,
                                  names[i], v[j], (long long)j, tdm_dtype_name(dt));
        free(v);
    }
    free(names);
    free(ts);
    return s;
}

// --init's names against the model's (prefix: "init." in a golden training file, whose other
// tensors are not weights; a --dump's own records, loss, lr, grad_norm, scale, logits0 and
// grad0.*, are not weights either: a dump resumes): a name the model does not have is refused, as PyTorch's
// load_state_dict(strict=True) refuses "Unexpected key(s) in state_dict", naming the names
// (tdm_module_load itself ignores them: --init-partial keeps that).
static tdm_status check_init_names(tdm_module *m, const char *path, const char *prefix) {
    tdm_safetensors *st = tdm_safetensors_open(path);
    if (!st) return tdm_last_status();
    const int n = tdm_module_state(m, NULL, NULL, 0);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    if (!names) {
        tdm_safetensors_close(st);
        return tdm_error_set(TDM_ERR_OOM, "--init: out of memory");
    }
    tdm_module_state(m, names, NULL, n);
    const size_t lp = strlen(prefix);
    char list[900] = "";
    int unknown = 0;
    for (int i = 0; i < tdm_safetensors_count(st); i++) {
        const char *f = tdm_safetensors_name(st, i);
        if (strncmp(f, prefix, lp)) continue;
        static const char *const records[] = {"loss", "lr", "grad_norm", "scale", "logits0"};
        bool record = !lp && !strncmp(f, "grad0.", 6);
        for (size_t r = 0; !lp && r < sizeof records / sizeof *records; r++)
            record = record || !strcmp(f, records[r]);
        if (record) continue;
        bool known = false;
        for (int k = 0; k < n && !known; k++) known = !strcmp(names[k], f + lp);
        if (known) continue;
        size_t l = strlen(list);
        if (unknown < 8 && l + 8 < sizeof list)
            snprintf(list + l, sizeof list - l, "%s'%s'", unknown ? ", " : "", f);
        unknown++;
    }
    free(names);
    tdm_safetensors_close(st);
    if (!unknown) return TDM_OK;
    return tdm_error_set(TDM_ERR_FORMAT,
                         "--init %s: %d name%s the model does not have: %s%s (PyTorch's "
                         "load_state_dict(strict=True) refuses them too; --init-partial loads "
                         "the names the model has and ignores the others)",
                         path, unknown, unknown == 1 ? "" : "s", list, unknown > 8 ? ", ..." : "");
}

static tdm_module *build_model(const train_args *a, tdm_device dev) {
    tdm_module *m = tdm_nn_from_spec(a->model);
    if (!m) return NULL;
    tdm_status s = tdm_module_init(m, a->seed);
    if (s == TDM_OK && a->init) {
        tdm_safetensors *st = tdm_safetensors_open(a->init);
        const char *fmt = st ? tdm_safetensors_metadata(st, "format") : NULL;
        bool golden = fmt && (!strcmp(fmt, "tandem-train/1") || !strcmp(fmt, "tandem-gpt/1"));
        tdm_safetensors_close(st);
        s = st ? TDM_OK : tdm_last_status();
        if (s == TDM_OK && !a->init_partial) s = check_init_names(m, a->init, golden ? "init." : "");
        if (s == TDM_OK) s = tdm_module_load(m, a->init, golden ? "init." : "", !a->init_partial);
        if (s == TDM_OK) s = check_finite_state(m, a->init, golden ? "init." : "");
    }
    if (s == TDM_OK && a->segments > 1) s = tdm_sequential_set_checkpoint_segments(m, (int)a->segments);
    if (s == TDM_OK) s = tdm_module_to(m, dev);
    if (s != TDM_OK) {
        tdm_module_free(m);
        return NULL;
    }
    return m;
}

static tdm_optimizer *build_optimizer(const train_args *a, tdm_module *m) {
    int np = tdm_module_parameters(m, NULL, 0);
    tdm_tensor **params = calloc((size_t)np + 1, sizeof *params);
    if (!params) {
        tdm_error_set(TDM_ERR_OOM, "train: out of memory");
        return NULL;
    }
    tdm_module_parameters(m, params, np);
    // One group, or --weight-decay-matrices-only's two (nanoGPT's configure_optimizers: dim >= 2
    // decayed, the others not; each group in the model's order): params reordered in place.
    tdm_param_group g[2] = {{params, np, NAN, NAN}, {NULL, 0, NAN, 0.0}};
    int ng = 1;
    if (a->wd_matrices) {
        tdm_tensor **rest = calloc((size_t)np + 1, sizeof *rest);
        if (!rest) {
            free(params);
            tdm_error_set(TDM_ERR_OOM, "train: out of memory");
            return NULL;
        }
        int nd = 0, nr = 0;
        for (int i = 0; i < np; i++) {
            if (tdm_tensor_ndim(params[i]) >= 2) params[nd++] = params[i];
            else rest[nr++] = params[i];
        }
        memcpy(params + nd, rest, (size_t)nr * sizeof *rest);
        free(rest);
        g[0].n = nd;
        g[1].params = params + nd;
        g[1].n = nr;
        ng = 2;
    }
    tdm_optimizer *o;
    if (!strcmp(a->opt, "sgd")) {
        tdm_sgd_params p = {.lr = a->lr, .momentum = a->momentum, .weight_decay = a->weight_decay,
                            .maximize = a->maximize};
        o = tdm_optim_sgd_groups(g, ng, &p);
    } else {
        tdm_adam_params p = tdm_adam_defaults(!strcmp(a->opt, "adamw"));
        if (a->lr_set) p.lr = a->lr;
        if (a->wd_set) p.weight_decay = a->weight_decay;
        p.maximize = a->maximize;
        p.amsgrad = a->amsgrad;
        p.fused = a->fused_adam;
        if (!isnan(a->betas[0])) {   // --betas
            p.beta1 = a->betas[0];
            p.beta2 = a->betas[1];
        }
        o = tdm_optim_adam_groups(g, ng, &p);
    }
    free(params);
    return o;
}

// The device of a rank: on cuda, one GPU per rank (NCCL allows no two ranks on one GPU): thread
// ranks take cuda:(N + rank), MPI processes cuda:(N + their rank on the node).
static tdm_device rank_device(const train_ctx *t, int rank) {
    tdm_device d = t->dev;
    if (d.type != TDM_DEVICE_CUDA || !t->group) return d;
    if (!tdm_dp_mpi_launched()) {   // the ranks are this process's threads
        d.index += rank;
        return d;
    }
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) {   // a launcher's number: strictly parsed, 0 when malformed
            d.index += (int)tdm_env_i64(vars[i], 0, 63, 0);
            break;
        }
    return d;
}

// A step's loss that is NaN or infinite ends the run (exit 1, nothing dumped): PyTorch would go on
// training NaN weights and print "loss nan" to the end; a run that measures or checks training
// must not end as if it had succeeded (Megatron-LM stops likewise). With --amp fp16 the scaler
// skips steps whose gradients overflow; a loss that overflows stops the run all the same.
static tdm_status diverged(double loss) {
    // named, not printed with %g: glibc writes a NaN's sign bit ("-nan"), which varies by build
    const char *what = isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf";
    return tdm_error_set(TDM_ERR_ARG, "the loss is %s: training diverged (a non-finite loss); "
                         "stopped", what);
}

static tdm_status train_rank(int rank, void *arg) {
    train_ctx *t = arg;
    const train_args *a = t->a;
    int nranks = t->group ? tdm_dp_group_size(t->group) : 1;
    tdm_device dev = rank_device(t, rank);
    tdm_module *m = build_model(a, dev);
    tdm_optimizer *opt = m ? build_optimizer(a, m) : NULL;
    tdm_grad_scaler *scaler = NULL;
    tdm_status s = opt ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && !strcmp(a->amp, "fp16")) {
        tdm_grad_scaler_params sp = tdm_grad_scaler_defaults();
        if (a->scaler_init > 0) sp.init_scale = a->scaler_init;
        if (a->scaler_interval > 0) sp.growth_interval = (int)a->scaler_interval;
        scaler = tdm_grad_scaler_new(&sp);
        if (!scaler) s = tdm_last_status();
    }
    // the optimizer's state, and with fp16 the scaler's (PyTorch's checkpoint holds both)
    if (s == TDM_OK && a->init_optimizer &&
        (scaler ? tdm_optimizer_load_with_scaler(opt, scaler, a->init_optimizer)
                : tdm_optimizer_load(opt, a->init_optimizer)) != TDM_OK)
        s = tdm_error_set(tdm_last_status(), "--init-optimizer %s: %s", a->init_optimizer,
                          tdm_last_error());
    // a resumed run's dropout streams continue where the first run's stopped
    if (s == TDM_OK) tdm_module_rng_advance(m, (uint64_t)(a->start_step * a->accumulate));
    tdm_tensor **params = NULL;
    if (s == TDM_OK && t->group) {
        int np = tdm_module_parameters(m, NULL, 0);
        params = calloc((size_t)np + 1, sizeof *params);
        tdm_module_parameters(m, params, np);
        s = tdm_dp_attach(t->group, rank, params, np);
    }
    bool tty = rank == 0 && isatty(STDERR_FILENO);
    if (rank == 0) {
        tdm_memory_stats_get(t->dev, &t->mem0);
        tdm_memory_reset_peak(t->dev);
    }
    graph_state gs = {0};
    // --graph: eager warm-up steps (at least one when there are two steps or more, so that the
    // optimizer's state exists before the capture), then capture + replays
    const int64_t warm = a->graph ? (a->steps - 1 < 3 ? a->steps - 1 : 3) : a->steps;
    double t0 = bench_now_s();
    int64_t slice = a->batch / nranks, micro = slice / a->accumulate;
    const int64_t pfirst = a->steps > 1 ? 1 : 0;
    const int64_t plast = (a->steps < pfirst + PROFILE_STEPS ? a->steps : pfirst + PROFILE_STEPS) - 1;
    for (int64_t step = 0; s == TDM_OK && step < a->steps; step++) {
        double total = 0, norm = NAN;
        const int64_t gstep = a->start_step + step;   // the data's and the schedule's step
        if (rank == 0 && a->profile && step == pfirst) {
            s = tdm_profile_start();
            t->launches = tdm_profile_launches();
        }
        if (a->sched_set)   // (parsed valid: the lr is a number >= 0)
            tdm_optimizer_set_lr(opt, tdm_lr_cosine_at(&a->sched, gstep));
        if (rank == 0) t->lrs[step] = tdm_optimizer_lr(opt);
        if (step >= warm) {   // --graph: replay the captured step
            tdm_tensor *xb = NULL, *yb = NULL;
            s = batch_rows(t->d, a->model, gstep * a->batch, a->batch, dev, &xb, &yb);
            if (s == TDM_OK) s = graph_run(&gs, m, opt, xb, yb, a->amp, a->clip, dev, &total, &norm);
            if (s == TDM_OK && !isfinite(total)) s = diverged(total);
            tdm_tensor_free(xb);
            tdm_tensor_free(yb);
            if (s != TDM_OK) {
                tdm_error_set(s, "step %lld: %s", (long long)step, tdm_last_error());
                break;
            }
            t->losses[step] = (float)total;
            if (t->norms) t->norms[step] = (float)norm;
            if (tty)
                fprintf(stderr, "step %lld/%lld  loss %.6f  (graph replay)  %.0f samples/s\n",
                        (long long)step + 1, (long long)a->steps, total,
                        (double)(step + 1) * a->batch / fmax(bench_now_s() - t0, 1e-9));
            continue;
        }
        (void)tdm_profile_range_push("step");
        tdm_optimizer_zero_grad(opt);
        for (int64_t k = 0; s == TDM_OK && k < a->accumulate; k++) {
            tdm_tensor *xb = NULL, *yb = NULL;
            double l = 0;
            (void)tdm_profile_range_push("data");
            if (s == TDM_OK) s = batch_rows(t->d, a->model, gstep * a->batch + rank * slice + k * micro, micro, dev, &xb, &yb);
            (void)tdm_profile_range_pop();
            // PyTorch's no_sync: the micro-batches before the last only accumulate; the last
            // backward all-reduces their sum, overlapped with itself
            if (t->group) tdm_dp_no_sync(t->group, rank, k + 1 < a->accumulate);
            bool logits0 = rank == 0 && step == 0 && k == 0 && a->dump_step0;
            if (s == TDM_OK) s = micro_step(m, xb, yb, a->accumulate, a->amp, scaler, &l, logits0 ? &t->logits0 : NULL);
            tdm_tensor_free(xb);
            tdm_tensor_free(yb);
            total += l / (double)a->accumulate;
        }
        if (t->group) {   // average the gradients (and, for the report, the losses) over ranks
            (void)tdm_profile_range_push("allreduce");
            tdm_status sy = tdm_dp_sync(t->group, rank);
            if (s == TDM_OK) s = sy;
            tdm_status sm = tdm_dp_allreduce_mean(t->group, rank, &total, 1);
            if (s == TDM_OK) s = sm;
            (void)tdm_profile_range_pop();
        }
        if (s == TDM_OK && !isfinite(total)) s = diverged(total);   // the same on every rank
        bool skipped = false, grad0 = rank == 0 && step == 0 && a->dump_step0;
        double scale = scaler ? tdm_grad_scaler_get_scale(scaler) : NAN;
        (void)tdm_profile_range_push("optimizer");
        // nanoGPT: scaler.unscale_(optimizer), then clip_grad_norm_ on the true gradients
        if (s == TDM_OK && scaler && (a->clip > 0 || grad0)) s = tdm_grad_scaler_unscale_(scaler, opt);
        if (s == TDM_OK && grad0) s = snapshot_grads(m, t);
        if (s == TDM_OK && a->clip > 0) {
            tdm_tensor *tot = NULL;
            s = clip_grads(m, a->clip, &tot);
            if (s == TDM_OK && t->norms) s = tdm_tensor_to_host_f64(tot, &norm);
            tdm_tensor_free(tot);
        }
        if (s == TDM_OK) s = scaler ? tdm_grad_scaler_step(scaler, opt, &skipped) : tdm_optimizer_step(opt);
        if (scaler) tdm_grad_scaler_update(scaler);
        (void)tdm_profile_range_pop();
        (void)tdm_profile_range_pop();   // step
        if (rank == 0 && a->profile && step == plast) t->launches = tdm_profile_launches() - t->launches;
        if (rank == 0 && a->profile && step == plast && !(t->prof = tdm_profile_stop()) && s == TDM_OK)
            s = tdm_last_status();
        if (s != TDM_OK) {
            tdm_error_set(s, "step %lld: %s", (long long)step, tdm_last_error());
            break;
        }
        if (rank != 0) continue;
        t->skipped_steps += skipped;
        t->losses[step] = (float)total;
        if (t->norms) t->norms[step] = (float)norm;
        if (t->scales) t->scales[step] = (float)scale;
        double el = bench_now_s() - t0;
        if (tty) {
            fprintf(stderr, "step %lld/%lld  loss %.6f", (long long)step + 1, (long long)a->steps, total);
            if (scaler) fprintf(stderr, "  scale %g%s", tdm_grad_scaler_get_scale(scaler), skipped ? " (skipped)" : "");
            fprintf(stderr, "  %.0f samples/s\n", (double)(step + 1) * a->batch / (el > 0 ? el : 1e-9));
        }
    }
    if (rank == 0 && s == TDM_OK && a->dump_optimizer &&
        (scaler ? tdm_optimizer_save_with_scaler(opt, scaler, a->dump_optimizer)
                : tdm_optimizer_save(opt, a->dump_optimizer)) != TDM_OK)
        s = tdm_error_set(tdm_last_status(), "--dump-optimizer %s: %s", a->dump_optimizer,
                          tdm_last_error());
    if (rank == 0) {
        t->elapsed = bench_now_s() - t0;
        if (tdm_profile_is_recording()) tdm_profile_free(tdm_profile_stop());   // after an error
        tdm_memory_stats_get(t->dev, &t->mem1);
        t->model0 = m;
        m = NULL;
    }
    tdm_graph_free(gs.g);   // the static tensors and the loss after it: it synchronizes first
    tdm_tensor_free(gs.loss);
    tdm_tensor_free(gs.norm);
    tdm_tensor_free(gs.xs);
    tdm_tensor_free(gs.ys);
    tdm_tensor_free(gs.ones);
    free(params);
    tdm_grad_scaler_free(scaler);
    tdm_optimizer_free(opt);
    tdm_module_free(m);
    return s;
}

int bench_train(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},    {"batch", required_argument, 0, 'b'},
        {"steps", required_argument, 0, 'n'},    {"opt", required_argument, 0, 'o'},
        {"lr", required_argument, 0, 'l'},       {"momentum", required_argument, 0, 'M'},
        {"weight-decay", required_argument, 0, 'w'}, {"seed", required_argument, 0, 's'},
        {"device", required_argument, 0, 'd'},   {"amp", required_argument, 0, 'a'},
        {"ranks", required_argument, 0, 'r'},    {"accumulate", required_argument, 0, 'k'},
        {"checkpoint-segments", required_argument, 0, 'c'}, {"init", required_argument, 0, 'i'},
        {"data", required_argument, 0, 'D'},     {"dump", required_argument, 0, 'u'},
        {"tf32", required_argument, 0, 'T'},           {"deterministic", no_argument, 0, 'Z'},
        {"profile", required_argument, 0, 'P'},  {"graph", no_argument, 0, 'G'},
        {"maximize", no_argument, 0, 'X'},       {"amsgrad", no_argument, 0, 'A'},
        {"clip-grad-norm", required_argument, 0, 1001}, {"lr-schedule", required_argument, 0, 1002},
        {"weight-decay-matrices-only", no_argument, 0, 1003},
        {"betas", required_argument, 0, 1004},   {"dump-step0", no_argument, 0, 1005},
        {"dump-optimizer", required_argument, 0, 1006}, {"init-optimizer", required_argument, 0, 1007},
        {"start-step", required_argument, 0, 1008},
        {"scaler-init-scale", required_argument, 0, 1009},
        {"scaler-growth-interval", required_argument, 0, 1010},
        {"fused-adam", no_argument, 0, 1011},    {"init-partial", no_argument, 0, 1012},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    train_args a = {.opt = "sgd", .amp = "off", .device = "cpu", .batch = 64, .steps = 0, .accumulate = 1,
                    .segments = 0, .ranks = 1, .seed = 0, .betas = {NAN, NAN}};
    int64_t seed = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a.model = optarg; break;
        case 'b': if (!parse_i64(optarg, 1, &a.batch)) return bad("--batch %s: expected an integer >= 1", optarg); break;
        case 'n': if (!parse_i64(optarg, 1, &a.steps)) return bad("--steps %s: expected an integer >= 1", optarg); break;
        case 'o': a.opt = optarg; break;
        case 'l': if (!parse_f64(optarg, &a.lr)) return bad("--lr %s: expected a number >= 0", optarg); a.lr_set = true; break;
        case 'M': if (!parse_f64(optarg, &a.momentum)) return bad("--momentum %s: expected a number >= 0", optarg); a.momentum_set = true; break;
        case 'w': if (!parse_f64(optarg, &a.weight_decay)) return bad("--weight-decay %s: expected a number >= 0", optarg); a.wd_set = true; break;
        case 's': if (!parse_i64(optarg, 0, &seed)) return bad("--seed %s: expected an integer >= 0", optarg); a.seed = (uint64_t)seed; break;
        case 'd': a.device = optarg; break;
        case 'a': a.amp = optarg; break;
        case 'r': if (!parse_i64(optarg, 1, &a.ranks)) return bad("--ranks %s: expected an integer >= 1", optarg); a.ranks_set = true; break;
        case 'k': if (!parse_i64(optarg, 1, &a.accumulate)) return bad("--accumulate %s: expected an integer >= 1", optarg); break;
        case 'c': if (!parse_i64(optarg, 0, &a.segments)) return bad("--checkpoint-segments %s: expected an integer >= 0", optarg); break;
        case 'i': a.init = optarg; break;
        case 'D': a.data = optarg; break;
        case 'u': a.dump = optarg; break;
        case 'T':   // PyTorch's allow_tf32, for matmul and cudnn together
            if (strcmp(optarg, "on") && strcmp(optarg, "off")) return bad("--tf32 %s: expected on or off", optarg);
            tdm_tf32_set_allowed(TDM_TF32_MATMUL, !strcmp(optarg, "on"));
            tdm_tf32_set_allowed(TDM_TF32_CONV, !strcmp(optarg, "on"));
            break;
        case 'Z':
            tdm_conv_algo_mode_set(TDM_CONV_ALGO_DETERMINISTIC);
            tdm_attn_mode_set(TDM_ATTN_DETERMINISTIC);
            break;
        case 'P': a.profile = optarg; break;
        case 'G': a.graph = true; break;
        case 'X': a.maximize = true; break;
        case 'A': a.amsgrad = true; break;
        case 1001: if (!parse_f64(optarg, &a.clip)) return bad("--clip-grad-norm %s: expected a number >= 0", optarg); break;
        case 1002: if (parse_schedule(optarg, &a.sched)) return 2; a.sched_set = true; break;
        case 1003: a.wd_matrices = true; break;
        case 1004: {   // B1,B2 in [0, 1), as torch.optim.Adam checks them
            char *comma = strchr(optarg, ',');
            if (comma) *comma = '\0';
            bool ok = comma && parse_f64(optarg, &a.betas[0]) && parse_f64(comma + 1, &a.betas[1]) &&
                      a.betas[0] < 1 && a.betas[1] < 1;
            if (comma) *comma = ',';
            if (!ok) return bad("--betas %s: expected B1,B2, each in [0, 1) (nanoGPT: 0.9,0.95)", optarg);
            break;
        }
        case 1005: a.dump_step0 = true; break;
        case 1006: a.dump_optimizer = optarg; break;
        case 1007: a.init_optimizer = optarg; break;
        case 1008: if (!parse_i64(optarg, 0, &a.start_step)) return bad("--start-step %s: expected an integer >= 0", optarg); break;
        case 1009: if (!parse_f64(optarg, &a.scaler_init) || !(a.scaler_init > 0) || !isfinite(a.scaler_init)) return bad("--scaler-init-scale %s: expected a finite number > 0", optarg); break;
        case 1010: if (!parse_i64(optarg, 1, &a.scaler_interval) || a.scaler_interval > INT_MAX) return bad("--scaler-growth-interval %s: expected an integer from 1 to 2^31-1", optarg); break;
        case 1011: a.fused_adam = true; break;
        case 1012: a.init_partial = true; break;
        case 'h': train_usage(stdout); return 0;
        default: train_usage(stderr); return 2;
        }
    }
    if (optind < argc) return bad("unexpected argument '%s'", argv[optind]);
    if (!a.model) return bad("%s--model is required (bench train --help)", "");
    a.gpt = !strncmp(a.model, "gpt:", 4);
    if (a.gpt && tdm_nn_gpt_spec(a.model, &a.gpt_cfg) != TDM_OK) return bad("--model: %s", tdm_last_error());
    if (!a.steps) return bad("%s--steps is required", "");
    bool sgd = !strcmp(a.opt, "sgd"), adamw = !strcmp(a.opt, "adamw");
    if (!sgd && !adamw && strcmp(a.opt, "adam")) return bad("--opt %s: expected sgd, adam or adamw", a.opt);
    if (sgd && !a.lr_set) return bad("%s--lr is required with --opt sgd", "");
    if (sgd && a.amsgrad) return bad("%s--amsgrad needs --opt adam or adamw", "");
    if (sgd && a.fused_adam) return bad("%s--fused-adam needs --opt adam or adamw", "");
    if (sgd && !isnan(a.betas[0])) return bad("%s--betas needs --opt adam or adamw", "");
    if (a.dump_step0 && (!a.dump || a.accumulate > 1 || a.ranks > 1 || (a.graph && a.steps < 2)))
        return bad("%s--dump-step0 needs --dump, and step 0 whole in one eager micro-batch (no "
                   "--accumulate, no --ranks; --graph only with --steps 2 or more)", "");
    if ((a.scaler_init > 0 || a.scaler_interval > 0) && strcmp(a.amp, "fp16"))
        return bad("%s--scaler-init-scale and --scaler-growth-interval need --amp fp16", "");
    if (a.sched_set) a.sched.max_lr = a.lr_set ? a.lr : tdm_adam_defaults(false).lr;   // max_lr
    if (strcmp(a.amp, "off") && strcmp(a.amp, "fp16") && strcmp(a.amp, "bf16"))
        return bad("--amp %s: expected off, fp16 or bf16", a.amp);
    tdm_device dev;
    if (tdm_device_parse(a.device, &dev) != TDM_OK) return bad("%s", tdm_last_error());
    if (a.graph) {   // what one captured step cannot hold, said before anything runs
        const char *why = dev.type != TDM_DEVICE_CUDA ? "needs a CUDA device (--device cuda:N)"
                          : a.ranks > 1 || tdm_dp_mpi_launched() ? "needs one rank (no --ranks, no mpirun)"
                          : a.accumulate > 1 ? "needs --accumulate 1 (one micro-batch per captured step)"
                          : !strcmp(a.amp, "fp16") ? "cannot hold --amp fp16 (the scaler reads found_inf on the host)"
                          : a.profile ? "cannot be profiled (--profile)"
                          : NULL;
        if (why) return bad("--graph %s", why);
    }
    if (!tdm_device_available(dev)) return bad("%s", tdm_last_error());
    if ((a.dump && check_output("--dump", a.dump)) || (a.profile && check_output("--profile", a.profile)) ||
        (a.dump_optimizer && check_output("--dump-optimizer", a.dump_optimizer)))
        return 2;
    // Under mpirun/srun (a build with MPI) the ranks are the launched processes.
    tdm_dp_group *mpi_group = NULL;
    if (tdm_dp_mpi_launched()) {
        if (!(mpi_group = tdm_dp_group_new_mpi(25 << 20))) return bad("%s", tdm_last_error());
        if (a.ranks_set && a.ranks != tdm_dp_group_size(mpi_group)) {
            tdm_dp_group_free(mpi_group);
            return bad("--ranks: %s", "must equal the number of MPI processes (or be left out)");
        }
        a.ranks = tdm_dp_group_size(mpi_group);
    }
    if (a.batch % (a.ranks * a.accumulate)) {
        tdm_dp_group_free(mpi_group);
        return bad("%s--batch must be a multiple of --ranks x --accumulate", "");
    }
    // Thread ranks on cuda take one GPU each, cuda:N .. cuda:N+ranks-1 (rank_device): all must be
    // there before any rank starts (a rank that cannot build its model would leave the others
    // waiting for it at the group's first barrier).
    if (dev.type == TDM_DEVICE_CUDA && a.ranks > 1 && !mpi_group) {
        for (int64_t r = 1; r < a.ranks; r++) {
            tdm_device d = dev;
            d.index += (int)r;
            if (!tdm_device_available(d))
                return bad("--ranks %lld on cuda:%d needs one GPU per rank, cuda:%d to cuda:%lld: %s",
                           (long long)a.ranks, dev.index, dev.index,
                           (long long)(dev.index + a.ranks - 1), tdm_last_error());
        }
    }

    // Check the model and --init up front (exit 2 on bad input), and size the synthetic labels.
    tdm_module *probe = tdm_nn_from_spec(a.model);
    bool spec_ok = probe != NULL;
    if (probe) {
        tdm_module_free(probe);
        probe = build_model(&a, TDM_CPU);
    }
    if (!probe) {   // the model's spec, or --init (its messages name the file)
        tdm_dp_group_free(mpi_group);
        return bad(spec_ok && a.init ? "%s" : "--model: %s", tdm_last_error());
    }
    // A model with nothing to train is refused here, not at step 0 (and before the synthetic
    // labels, whose cost grows with the model's output: cnn:3x32x32/flat has 3072 "classes").
    if (tdm_module_parameters(probe, NULL, 0) == 0) {
        tdm_module_free(probe);
        tdm_dp_group_free(mpi_group);
        return bad("--model %s: has no parameters to train", a.model);
    }
    // --init-optimizer is read once here too, into the probe's optimizer (and with fp16 its
    // scaler): a file that does not fit the model, the optimizer or the run is bad input (exit 2),
    // refused before any training starts, as --init is.
    if (a.init_optimizer) {
        tdm_optimizer *po = build_optimizer(&a, probe);
        tdm_grad_scaler_params sp = tdm_grad_scaler_defaults();
        tdm_grad_scaler *ps = po && !strcmp(a.amp, "fp16") ? tdm_grad_scaler_new(&sp) : NULL;
        tdm_status ls = !po ? tdm_last_status()
                        : !strcmp(a.amp, "fp16") ? (ps ? tdm_optimizer_load_with_scaler(po, ps, a.init_optimizer)
                                                       : tdm_last_status())
                                                 : tdm_optimizer_load(po, a.init_optimizer);
        tdm_grad_scaler_free(ps);
        tdm_optimizer_free(po);
        if (ls != TDM_OK) {
            tdm_module_free(probe);
            tdm_dp_group_free(mpi_group);
            return bad("--init-optimizer %s: %s", a.init_optimizer, tdm_last_error());
        }
    }
    // What the command line sizes is checked against the allocation cap and the machine's memory
    // before any of it is made: a step's input rows (--batch, host and device), the losses (--steps).
    int nd_in;
    int64_t in_shape[TDM_MAX_DIMS];
    double row_bytes = sizeof(float);   // one sample of the model's input, f32
    tdm_status chk = tdm_nn_spec_input_shape(a.model, &nd_in, in_shape);
    for (int i = 0; chk == TDM_OK && i < nd_in; i++) row_bytes *= (double)in_shape[i];
    if (chk == TDM_OK && row_bytes > (double)TDM_MAX_ALLOC_BYTES)
        chk = tdm_error_set(TDM_ERR_OOM, "--model: one input sample is %.3g bytes, over tandem's "
                            "cap on one allocation", row_bytes);
    if (chk == TDM_OK) chk = tdm_alloc_check("--batch", a.batch, (size_t)row_bytes, true);
    if (chk == TDM_OK) chk = tdm_alloc_check("--steps", a.steps, sizeof(float), true);
    if (chk != TDM_OK) {
        tdm_module_free(probe);
        tdm_dp_group_free(mpi_group);
        return bad("%s", tdm_last_error());
    }
    dataset d = {0};
    int rc = load_data(&a, a.model, &d);
    if (!rc && !d.y && !a.gpt) {
        int nd;
        int64_t shape[TDM_MAX_DIMS + 1] = {1};
        tdm_nn_spec_input_shape(a.model, &nd, shape + 1);
        bool prev = tdm_grad_set_enabled(false);
        tdm_tensor *x1 = tdm_tensor_zeros(nd + 1, shape, TDM_DTYPE_F32, TDM_CPU);
        tdm_tensor *out = x1 ? tdm_module_forward(probe, x1) : NULL;
        tdm_grad_set_enabled(prev);
        int64_t classes = out ? tdm_tensor_shape(out)[tdm_tensor_ndim(out) - 1] : 0;
        tdm_tensor_free(out);
        tdm_tensor_free(x1);
        rc = classes < 1 ? bad("--model: %s", tdm_last_error()) : synth_labels(&d, classes, a.seed);
    }
    tdm_module_free(probe);
    train_ctx t = {.a = &a, .d = &d, .dev = dev, .group = mpi_group};
    bool report = !mpi_group || tdm_dp_group_rank(mpi_group) == 0;   // MPI: rank 0 reports
    t.losses = calloc((size_t)a.steps, sizeof *t.losses);
    t.lrs = calloc((size_t)a.steps, sizeof *t.lrs);
    if (a.clip > 0) t.norms = calloc((size_t)a.steps, sizeof *t.norms);
    if (!strcmp(a.amp, "fp16")) t.scales = calloc((size_t)a.steps, sizeof *t.scales);
    if (!rc && (!t.losses || !t.lrs || (a.clip > 0 && !t.norms) || (!strcmp(a.amp, "fp16") && !t.scales)))
        rc = bad("%sout of memory", "");
    if (!rc && a.ranks > 1 && !t.group && !(t.group = tdm_dp_group_new((int)a.ranks, 25 << 20)))
        rc = bad("%s", tdm_last_error());
    if (!rc) {
        tdm_status s = t.group ? tdm_dp_run(t.group, train_rank, &t) : train_rank(0, &t);
        if (s != TDM_OK) {
            fprintf(stderr, "bench train: %s\n", tdm_last_error());
            rc = 1;
        }
    }
    if (!rc && report) {
        double el = t.elapsed > 0 ? t.elapsed : 1e-9;
        printf("trained %s for %lld steps of %lld samples (%s%s, lr %g, amp %s, %lld rank%s%s): "
               "loss %.6f -> %.6f, %.1f samples/s, peak memory %.2f MB above the start (%s%s)%s\n",
               a.model, (long long)a.steps, (long long)a.batch, a.opt, a.fused_adam ? " fused" : "",
               a.lr_set ? a.lr : tdm_adam_defaults(false).lr, a.amp, (long long)a.ranks,
               a.ranks > 1 ? "s" : "", a.accumulate > 1 ? ", accumulated" : "", t.losses[0],
               t.losses[a.steps - 1], (double)(a.steps * a.batch) / el,
               (double)(t.mem1.peak_allocated - t.mem0.allocated) / 1e6, a.device,
               a.graph ? ", CUDA graph replays" : "", t.skipped_steps ? " (some fp16 steps skipped by the scaler)" : "");
        if (a.dump) rc = dump_state(&t, a.dump);
        if (!rc && a.profile && t.prof) {   // the trace, then the top ops
            if (tdm_profile_trace_save(t.prof, a.profile) != TDM_OK) {
                fprintf(stderr, "bench train: --profile %s: %s\n", a.profile, tdm_last_error());
                rc = 1;
            } else {
                const int first = a.steps > 1 ? 2 : 1;
                const long long last = a.steps > 1 + PROFILE_STEPS ? 1 + PROFILE_STEPS : a.steps;
                printf("profile of steps %d-%lld written to %s; top ops:\n", first, last,
                       a.profile);
                printf("device launches per step: %.1f (kernels and library calls, %llu over "
                       "steps %d-%lld)\n", (double)t.launches / (double)(last - first + 1),
                       (unsigned long long)t.launches, first, last);
                tdm_profile_table_print(t.prof, stdout, 15);
            }
        }
    }
    tdm_profile_free(t.prof);
    tdm_module_free(t.model0);
    tdm_dp_group_free(t.group);
    free(t.losses);
    free(t.lrs);
    free(t.norms);
    free(t.scales);
    tdm_tensor_free(t.logits0);
    for (int i = 0; i < t.n_grad0; i++) tdm_tensor_free(t.grad0[i]);
    free(t.grad0);
    tdm_tensor_free(d.x);
    tdm_tensor_free(d.y);
    bench_tokens_free(&d.tok);
    return rc;
}

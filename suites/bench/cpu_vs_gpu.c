/* cpu_vs_gpu.c — suite `cpu-vs-gpu`: the same f32 training step of each seed model on the
 * reference cpu backend and on the GPU, samples/s per model and batch; the report's ratio
 * "cuda / cpu" is the GPU's speedup (the seeds' "10-50x", and their pitfall that tiny models can
 * be slower on a GPU). On a cpu run only the _cpu benchmarks are registered; on a cuda run both
 * (the _cpu ones on the host's reference backend). mlp_10000_5000_2000_10 is cuda only: a step
 * of it takes minutes on the reference backend. train_gpt_tiny_<where>/batch:8 is nanoGPT's GPT
 * gpt:L2-H2-D32-T16-V67 on a synthetic token batch (bench_gpt_tokens), tokens/s = B*T / step time
 * (GPT-2 124M is the amp suite's: a step of it would take hours on the reference backend).
 *
 * Checks: every step's loss is finite, and the loss falls over the timed steps. */
#include <math.h>
#include <stdio.h>

#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "suites/bench/bench_train.h"
#include "tandem/tandem.h"

static bench_suite_config cvg_cfg;

enum { CVG_MAX_MODELS = 8 };

typedef struct {
    const char *spec;
    bool cuda;
} cvg_ctx;

// The seed models' [0, CVG_MAX_MODELS) and the tiny GPT's [CVG_MAX_MODELS].
static cvg_ctx cvg_ctxs[CVG_MAX_MODELS + 1][2];

static void bm_train(tdm_gb_state *st, void *arg) {
    const cvg_ctx *c = arg;
    int64_t batch = tdm_gb_arg(st, 0);
    tdm_device dev = c->cuda ? cvg_cfg.device : TDM_CPU;
    bench_trainer *t = NULL;   // the row's, kept across its calls (bench_trainer_row)
    bool fresh = false;
    bool ok = bench_trainer_row(&t, &fresh, c->spec, dev, BENCH_PREC_F32, batch, 1) == TDM_OK;
    if (!ok) bench_fail(st, "setup");
    double first = NAN, last = NAN;
    ok = bench_trainer_timed_steps(st, t, ok, &first, NULL);
    if (ok && bench_trainer_loss(t, &last) != TDM_OK) {
        bench_fail(st, "loss");
        ok = false;
    }
    if (ok && !(last < first)) {   // SGD on one batch: the loss must fall
        char msg[200];
        snprintf(msg, sizeof msg, "the loss did not fall over %lld steps (%.6g -> %.6g)",
                 (long long)tdm_gb_iterations(st), first, last);
        tdm_gb_skip_with_error(st, msg);
    }
    if (!ok) bench_trainer_row_drop();
    // a GPT's rate is tokens/s (from the spec: t is zeroed when setup failed)
    bench_rate_counters(st, (double)batch, bench_tokens_per_sample(c->spec), true);
    char label[200];
    snprintf(label, sizeof label, "%s f32 on %s, SGD lr 0.01", c->spec, c->cuda ? "cuda" : "cpu");
    tdm_gb_set_label(st, label);
}

// The work of one timed iteration (bench list --json; the peer's rows match: peer.work_match).
static void cvg_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const cvg_ctx *c = ctx;
    bench_work_train(buf, len, c->spec, "f32", n ? args[0] : 0, 0.01, 0, 1);
}

static int cvg_register(const bench_suite_config *cfg) {
    cvg_cfg = *cfg;
    bool cuda = cfg->device.type == TDM_DEVICE_CUDA;
    static const int64_t batches[] = {64, 256, 1024};
    char name[96], info[300];
    for (int d = 0; d < (cuda ? 2 : 1); d++)
        for (int m = 0; bench_models[m].name && m < CVG_MAX_MODELS; m++) {
            if (bench_models[m].cuda_only && d == 0) continue;
            cvg_ctxs[m][d] = (cvg_ctx){bench_models[m].spec, d == 1};
            snprintf(name, sizeof name, "train_%s_%s", bench_models[m].name, d ? "cuda" : "cpu");
            tdm_gb_bench *b = tdm_gb_register(name, bm_train, &cvg_ctxs[m][d]);
            if (!b) return -1;
            tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
            for (int i = 0; i < (cfg->quick ? 1 : 3); i++) tdm_gb_args(b, 1, &batches[i]);
            snprintf(info, sizeof info,
                     "a f32 training step of %s on %s (forward, cross-entropy, backward, SGD, "
                     "loss.item()); samples/s = batch / step time",
                     bench_models[m].spec, d ? "the GPU" : "the cpu reference backend");
            tdm_gb_set_info(b, info, "samples/s");
            tdm_gb_set_work(b, cvg_work, &cvg_ctxs[m][d]);
        }
    for (int d = 0; d < (cuda ? 2 : 1); d++) {   // the tiny GPT, the same model on both
        cvg_ctxs[CVG_MAX_MODELS][d] = (cvg_ctx){bench_gpt_tiny.spec, d == 1};
        snprintf(name, sizeof name, "train_%s_%s", bench_gpt_tiny.name, d ? "cuda" : "cpu");
        tdm_gb_bench *b = tdm_gb_register(name, bm_train, &cvg_ctxs[CVG_MAX_MODELS][d]);
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
        tdm_gb_args(b, 1, (const int64_t[]){BENCH_GPT_BATCH});
        snprintf(info, sizeof info,
                 "a f32 training step of nanoGPT's GPT %s on %s on a synthetic token batch "
                 "(cross-entropy over (B*T,V)); tokens/s = B*T / step time",
                 bench_gpt_tiny.spec, d ? "the GPU" : "the cpu reference backend");
        tdm_gb_set_info(b, info, "tokens/s");
        tdm_gb_set_work(b, cvg_work, &cvg_ctxs[CVG_MAX_MODELS][d]);
    }
    return 0;
}

static const bench_ratio cvg_ratios[] = {
    {"cuda / cpu (mlp_1000_512_10)", "train_mlp_1000_512_10_cuda", "train_mlp_1000_512_10_cpu",
     "samples/s"},
    {"cuda / cpu (mlp_1000_512_128_10)", "train_mlp_1000_512_128_10_cuda",
     "train_mlp_1000_512_128_10_cpu", "samples/s"},
    {"cuda / cpu (cnn_bn)", "train_cnn_bn_cuda", "train_cnn_bn_cpu", "samples/s"},
    {"cuda / cpu (gpt_tiny)", "train_gpt_tiny_cuda", "train_gpt_tiny_cpu", "tokens/s"},
    {0},
};

const bench_suite bench_suite_cpu_vs_gpu = {
    .name = "cpu-vs-gpu",
    .description = "the same f32 training step on the cpu reference backend and on the GPU, "
                   "samples/s per model and batch, a tiny GPT's tokens/s (on a cpu run the _cpu "
                   "forms only)",
    .doc = "docs/suites/cpu-vs-gpu.md",
    .devices = BENCH_SUITE_CPU | BENCH_SUITE_CUDA,
    .ratios = cvg_ratios,
    .register_benchmarks = cvg_register,
    .finish = bench_train_cache_clear,
};

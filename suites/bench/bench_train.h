/* bench_train.h — the training step the suites amp, cpu-vs-gpu and scaling time: a seed model
 * (nn.h's grammar) on a fixed random batch, forward + cross-entropy under the precision's
 * autocast, backward (through the gradient scaler for fp16), the optional data-parallel sync,
 * an SGD step, and the loss read back to the host (loss.item(), as the seeds' loops do: it also
 * waits for the device's queued work, so a step's wall time is its device time). */
#ifndef TANDEM_BENCH_TRAIN_H
#define TANDEM_BENCH_TRAIN_H

#include "harness/gbench_shim.h"
#include "tandem/tandem.h"

typedef enum {
    BENCH_PREC_F32 = 0,   // f32, TF32 off for matmul and conv
    BENCH_PREC_TF32,      // f32 tensors, TF32 allowed for matmul and conv (cuda only)
    BENCH_PREC_FP16,      // autocast f16 + the gradient scaler
    BENCH_PREC_BF16,      // autocast bf16 (no scaler: bf16 has f32's range)
    BENCH_PREC_COUNT
} bench_prec;

const char *bench_prec_name(bench_prec p);   // "f32", "tf32", "fp16", "bf16"

// The seed models: a name used in benchmark names and its spec in nn.h's grammar.
typedef struct {
    const char *name, *spec;
    bool cuda_only;   // too big for the reference backend (mlp_10000_5000_2000_10)
} bench_model;
extern const bench_model bench_models[];   // ended by {0}
enum { BENCH_CLASSES = 10 };

// Makes TF32 allowed or not for matmul and conv as prec wants; returns the previous settings
// (bit 0 matmul, bit 1 conv) for bench_prec_restore.
unsigned bench_prec_apply(bench_prec p);
void bench_prec_restore(unsigned previous);

typedef struct {
    tdm_device dev;
    bench_prec prec;
    int64_t batch;
    tdm_module *m;
    tdm_optimizer *opt;
    tdm_grad_scaler *scaler;   // fp16 only
    tdm_tensor *x, *y;         // (batch, input...) f32 from N(0,1); (batch) i64 labels 0..9;
                               // gpt: (batch,T) i64 tokens and their next tokens (bench_gpt_tokens)
    bool lm;                   // a gpt: model: the loss is over (batch*T, vocab) logits
    tdm_tensor **params;       // borrowed from m
    int n_params;
    int64_t param_bytes;       // f32 bytes of all parameters (the gradients a DP step reduces)
    tdm_dp_group *dp;          // optional: all-reduce gradients before the step
    int rank;
    int skipped;               // steps the scaler skipped (inf/NaN gradients)
} bench_trainer;

// Builds the model (seed `seed`, the same weights for every rank and precision), the batch
// (drawn from stream `data_offset`: ranks pass different offsets), SGD (lr 0.01) and, for fp16,
// the scaler with PyTorch's defaults. On failure: the status, the trainer freed.
tdm_status bench_trainer_init(bench_trainer *t, const char *spec, tdm_device dev, bench_prec prec,
                              int64_t batch, uint64_t seed, uint64_t data_offset);
// Joins a data-parallel group as `rank` (tdm_dp_attach of the parameters).
tdm_status bench_trainer_attach(bench_trainer *t, tdm_dp_group *g, int rank);
// One step; *loss (optional) gets the batch's loss before the step.
tdm_status bench_trainer_step(bench_trainer *t, double *loss);
// The batch's loss under the trainer's precision, without training.
tdm_status bench_trainer_loss(bench_trainer *t, double *loss);
void bench_trainer_free(bench_trainer *t);
// A row's trainer, kept across Google Benchmark's calls of the row (its warm-up, iteration-count
// search and repetitions each call the function again): set up on the first call (*fresh true)
// and handed back while the row (spec, device, precision, batch, seed) stays the same; the
// previous row's is freed. Not to be freed by the caller: bench_trainer_row_drop after a failure
// (its state is then unknown), bench_train_cache_clear when the suite has run (its finish).
// Not for data-parallel ranks (one row trainer per process).
tdm_status bench_trainer_row(bench_trainer **t, bool *fresh, const char *spec, tdm_device dev,
                             bench_prec prec, int64_t batch, uint64_t seed);
void bench_trainer_row_drop(void);
// Frees the row's trainer and the initial weights kept for bench_trainer_init (it copies the last
// two (spec, seed) it drew instead of drawing them again: tdm_module_init_copy).
void bench_train_cache_clear(void);
// A training benchmark's timed loop: one bench_trainer_step per iteration while ok; a failed step
// or a loss that is not finite fails the benchmark (and stops stepping). *first (optional) gets the
// first step's loss, *steps (optional) the steps taken. Returns ok at the end.
bool bench_trainer_timed_steps(tdm_gb_state *st, bench_trainer *t, bool ok, double *first,
                               int64_t *steps);

// The fixed accuracy protocol: a fresh trainer (seed), `steps` steps, the loss before and after.
tdm_status bench_train_protocol(const char *spec, tdm_device dev, bench_prec prec, int64_t batch,
                                uint64_t seed, int steps, double *before, double *after);

// The seconds drawing a model's initial weights takes on the host (tdm_module_init: about 100 ns a
// parameter, measured on a 2.6 GHz core), once per process and (spec, seed) since they are kept
// (bench_trainer_init); 0 for a spec whose parameters are not counted here (cnn:, which are small).
// A suite whose budget (bench_suite_config.budget_s) cannot carry it leaves the model's rows out.
double bench_spec_init_seconds(const char *spec);

// ---- the GPT benchmarks (amp, cpu-vs-gpu, graphs) ----------------------------------------------

// The GPT models the suites train: GPT-2 124M's shape on a GPU (nanoGPT's gpt2 config; T256 is the
// same model with rows of 256 tokens, the --quick form), the tiny one on the cpu reference backend
// and on the emulated device. name is the <tag> of train_<tag>_<prec>.
typedef struct {
    const char *name, *spec;
} bench_gpt_model;
extern const bench_gpt_model bench_gpt_124m, bench_gpt_124m_t256, bench_gpt_tiny;
enum { BENCH_GPT_BATCH = 8 };   // rows of T tokens per step, every GPT benchmark
// Which GPT a suite trains on dev: the tiny one on the cpu and on the emulated device, else
// GPT-2 124M (T256 when quick).
const bench_gpt_model *bench_gpt_for(tdm_device dev, bool quick);

// The synthetic token batch, the same in the PyTorch peer (suites/peers/torch_peer.py,
// gpt_tokens): an LCG (Knuth's MMIX constants, state seeded with seed * 2654435761 + 12345)
// draws a permutation P of the vocabulary (Fisher-Yates, j = (r >> 33) % (i + 1)), then a
// stream of batch*T+1 tokens: the first (r >> 33) % V, each next one P[previous] when
// (r >> 33) % 4 != 0, else (r >> 33) % V (learnable: the loss falls from ln V). x is the stream's
// first batch*T tokens as (batch,T), y the same shifted by one. Host arrays of batch*T each.
void bench_gpt_tokens(uint64_t seed, int64_t vocab, int64_t batch, int64_t T, int64_t *x,
                      int64_t *y);
// The same as (batch,T) i64 tensors on dev (*x, *y new; both NULL on an error).
tdm_status bench_gpt_token_tensors(uint64_t seed, int64_t vocab, int64_t batch, int64_t T,
                                   tdm_device dev, tdm_tensor **x, tdm_tensor **y);

// Model FLOPs per token of a training step, nanoGPT's estimate_mfu (from the PaLM paper's
// appendix B): 6N + 12*L*D*T, N the parameters without the position embedding wpe (nanoGPT's
// get_num_params(non_embedding=True); the tied wte/lm_head counted once), T the row length.
double bench_gpt_flop_per_token(const tdm_gpt_config *c);
// The dense peak FLOP/s of dev's GPU model for p from suites/check/expectations.json ("tflops":
// tf32 for tf32, f16 for fp16, bf16 for bf16); 0 when not known: on the cpu, on the emulated
// device, for f32 (no tensor-core peak: plain f32 runs on the CUDA cores), a model the file
// lacks or no file found. *model (optional) gets the file's model name ("" when 0).
double bench_gpt_peak_flops(tdm_device dev, bench_prec p, char *model, size_t model_len);

// The GPT's counters besides tokens/s (amp, transformer): FLOP/token and, where the expectations
// file has dev's GPU model's dense peak for p, MFU = tokens/s x FLOP/token / peak (a rate: the
// per-iteration amount batch x T x FLOP/token / peak over the iteration time) and
// peak_TFLOP_per_s. Checks the formula's N against n_params (the model's parameters, wpe
// included; 0 skips the check: the benchmark fails on a mismatch). *note gets "; MFU = ..." for
// the label, or "".
void bench_gpt_counters(tdm_gb_state *st, const char *spec, tdm_device dev, int64_t batch,
                        bench_prec p, int64_t n_params, char *note, size_t note_len);

// The work description (gbench_shim.h's tdm_gb_set_work; compared with the PyTorch peer's by
// the test peer.work_match) of `steps` training steps of spec in prec on batch samples with
// plain SGD at lr (momentum when > 0): {"op": "train_step", "model", "dtype", "batch",
// "optimizer", "per_iteration": steps, "samples": steps x batch (+ "tokens" x T for a GPT)}.
void bench_work_train(char *buf, int len, const char *spec, const char *prec, int64_t batch,
                      double lr, double momentum, int steps);

// A gpt: spec's row length T (the tokens of one sample); 0 for any other spec.
int64_t bench_tokens_per_sample(const char *spec);
// A training benchmark's main rate: tokens/s (samples x tokens_per_sample per iteration) when
// tokens_per_sample > 0, else samples/s; with per_iteration also tokens/ or samples/iteration.
void bench_rate_counters(tdm_gb_state *st, double samples, int64_t tokens_per_sample,
                         bool per_iteration);

// Fails the benchmark with "what: <tdm_last_error()>".
void bench_fail(tdm_gb_state *st, const char *what);
double bench_now(void);   // seconds, monotonic

#endif

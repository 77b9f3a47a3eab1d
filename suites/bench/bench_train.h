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
    tdm_tensor *x, *y;         // (batch, input...) f32 from N(0,1); (batch) i64 labels 0..9
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

// The fixed accuracy protocol: a fresh trainer, `steps` steps, the loss before and after.
tdm_status bench_train_protocol(const char *spec, tdm_device dev, bench_prec prec, int64_t batch,
                                int steps, double *before, double *after);

// Fails the benchmark with "what: <tdm_last_error()>".
void bench_fail(tdm_gb_state *st, const char *what);
double bench_now(void);   // seconds, monotonic

#endif

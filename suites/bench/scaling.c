/* scaling.c — suite `scaling`: data parallelism through parallel.h. The all-reduce's bandwidth
 * over sizes (nccl-tests' algbw = S/t and busbw = algbw * 2(n-1)/n), weak scaling (fixed batch
 * per rank) and strong scaling (fixed global batch) of a training step over 1..N ranks with the
 * efficiency thr(N) / (N thr(1)) and the share of the step spent all-reducing (tdm_dp_comm_seconds
 * over the step, host all-reduce only). Ranks are threads of one process: on the cpu N = 1, 2
 * (reference backend); on cuda one per GPU present; under mpirun/srun the MPI world's processes.
 * Each DP benchmark also runs with overlap off (_no_overlap: every bucket all-reduced by
 * tdm_dp_sync after backward); the ratio table gives what overlap buys. On the host path the
 * all-reduce blocks the rank's thread either way; with NCCL it runs on a side stream.
 *
 * With one GPU, N = 1 is measured and predicted_dp_<link>_<model>/ranks:N gives the step time,
 * samples/s, efficiency and communication share for 2, 4, 8 GPUs on NVLink and PCIe from the
 * measured compute time and the ring model of scaling_model.h: predictions, named so, never mixed
 * with the measured rows.
 *
 * Each timed iteration runs every rank once (tdm_dp_run); the ranks meet at a small all-reduce,
 * then each times its own work; the iteration's time is the mean over ranks (manual time).
 * Checks: the all-reduce's result is within tdm_dp_mean_bound_f32 of the mean computed on the
 * host (NCCL's ncclAvg pre-multiplies by float(1/n) and sums in ring or tree order: not sum/n
 * rounded once for most n above 2); after DP training every replica's parameters are identical
 * and the loss fell.
 *
 * nanoGPT's GPT (issue 23) scales too: dp_<weak|strong>_<gpt>[_no_overlap]/ranks:N with <gpt> the
 * amp suite's (bench_gpt_for: GPT-2 124M on a GPU, T256 with --quick; gpt_tiny on the cpu and the
 * emulated device), 8 rows of T tokens per rank (weak) or 16 rows in all (strong), each rank its
 * own synthetic token rows; its rate is tokens/s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/gbench_shim.h"
#include "harness/stats.h"
#include "harness/suites.h"
#include "core/tensor_impl.h"   // tdm_error_set
#include "suites/bench/bench_train.h"
#include "suites/bench/scaling_model.h"
#include "tandem/tandem.h"

static bench_suite_config sc_cfg;

// Thread ranks: at most 8 (GPUs of a node); MPI ranks: up to parallel.c's 64.
enum { SC_MAX_THREADS = 8, SC_MAX_RANKS = 64, SC_BUCKET = 25 * 1000 * 1000 };
// The per-model tables hold the seed models (bench_models) and, in their last slot, the GPT.
enum { SC_MODELS = 16, SC_GPT = SC_MODELS - 1 };

static bool on_cuda(void) { return sc_cfg.device.type == TDM_DEVICE_CUDA; }

static const char *sc_spec(int m) {
    return m == SC_GPT ? bench_gpt_for(sc_cfg.device, sc_cfg.quick)->spec : bench_models[m].spec;
}
static const char *sc_name(int m) {
    return m == SC_GPT ? bench_gpt_for(sc_cfg.device, sc_cfg.quick)->name : bench_models[m].name;
}

// An integer from the first of the environment variables that is set, else dflt.
static int env_int(const char *const *vars, int n, int dflt) {
    for (int i = 0; i < n; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return dflt;
}

// Launched by mpirun or srun with several processes: the largest groups are the MPI world's.
static bool sc_mpi(void) { return tdm_dp_mpi_launched(); }
static int mpi_world_size(void) {
    static const char *const v[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    int n = env_int(v, 4, 1);
    return n < 1 ? 1 : n > SC_MAX_RANKS ? SC_MAX_RANKS : n;
}

static int gpus_present(void) {
    int n = 0;
    while (n < SC_MAX_THREADS && tdm_device_available((tdm_device){TDM_DEVICE_CUDA, n})) n++;
    return n;
}

// The ranks a run can use: the MPI world's processes; else 2 threads on the cpu, the GPUs
// present on cuda (1 when none, so that `bench list --device cuda` shows the benchmarks).
static int max_ranks(void) {
    if (sc_mpi()) return mpi_world_size();
    if (!on_cuda()) return 2;
    int n = gpus_present();
    return n ? n : 1;
}

// A group of n ranks: the MPI world when n is its size, else n threads of this process.
static tdm_dp_group *new_group(int n, int64_t bucket) {
    return sc_mpi() && n == mpi_world_size() && n > 1 ? tdm_dp_group_new_mpi(bucket)
                                                      : tdm_dp_group_new(n, bucket);
}

// Thread rank r uses the run's device + r; under MPI (the world's group, or a one-thread group
// in each process) a process uses the GPU of its node-local rank.
static tdm_device rank_device(const tdm_dp_group *g, int rank) {
    (void)g;
    if (!on_cuda()) return TDM_CPU;
    if (sc_mpi()) {
        static const char *const v[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                        "SLURM_LOCALID"};
        int gpus = gpus_present();
        return (tdm_device){TDM_DEVICE_CUDA, env_int(v, 3, 0) % (gpus ? gpus : 1)};
    }
    return (tdm_device){TDM_DEVICE_CUDA, sc_cfg.device.index + rank};
}

// The ranks this process runs: all of a thread group's; its own of an MPI group.
static bool local_rank(const tdm_dp_group *g, int rank) {
    return sc_mpi() && tdm_dp_group_size(g) == mpi_world_size() && tdm_dp_group_size(g) > 1
               ? tdm_dp_group_rank(g) == rank : true;
}

// The iteration's timing, agreed by all ranks: every rank passes its seconds and gets the mean.
static tdm_status agree(tdm_dp_group *g, int rank, double *v, int n) {
    return tdm_dp_allreduce_mean(g, rank, v, n);
}

// ---- allreduce/bytes:S ---------------------------------------------------------------------------

typedef struct {
    tdm_dp_group *g;
    int n;
    int64_t numel;
    float *base;                       // host values, exact in f32
    tdm_tensor *param[SC_MAX_RANKS];   // the "parameter" whose gradient is reduced
    tdm_tensor *grad[SC_MAX_RANKS];    // rank r's contribution: base * 2^r (exact)
    tdm_tensor *work[SC_MAX_RANKS];    // the parameter's gradient: a copy of grad, reduced in place
    double seconds;                    // the last iteration's mean time
} ar_run;

static tdm_status ar_setup(int rank, void *arg) {
    ar_run *a = arg;
    tdm_device d = rank_device(a->g, rank);
    float *h = malloc((size_t)a->numel * sizeof *h);
    if (!h) return tdm_error_set(TDM_ERR_OOM, "allreduce: out of memory");
    for (int64_t i = 0; i < a->numel; i++) h[i] = ldexpf(a->base[i], rank);
    a->grad[rank] = tdm_tensor_from_host(1, &a->numel, TDM_DTYPE_F32, d, h);
    a->param[rank] = tdm_tensor_zeros(1, &a->numel, TDM_DTYPE_F32, d);
    a->work[rank] = tdm_tensor_zeros(1, &a->numel, TDM_DTYPE_F32, d);
    free(h);
    if (!a->grad[rank] || !a->param[rank] || !a->work[rank]) return tdm_last_status();
    tdm_tensor_set_requires_grad(a->param[rank], true);
    return tdm_dp_attach(a->g, rank, &a->param[rank], 1);
}

static tdm_status ar_iteration(int rank, void *arg) {
    ar_run *a = arg;
    // every iteration reduces the contributions themselves (NCCL averages in place: reducing the
    // last iteration's mean again would add its rounding each time)
    tdm_status s = tdm_tensor_copy_(a->work[rank], a->grad[rank]);
    if (s == TDM_OK) s = tdm_tensor_set_grad(a->param[rank], a->work[rank]);
    double t[1] = {0};
    tdm_status s2 = agree(a->g, rank, t, 1);   // every rank here before the clock starts
    double t0 = bench_now();
    tdm_status s3 = tdm_dp_sync(a->g, rank);   // the all-reduce of the one bucket
    if (s3 == TDM_OK) s3 = tdm_device_synchronize(rank_device(a->g, rank));   // NCCL: its stream
    t[0] = bench_now() - t0;
    tdm_status s4 = agree(a->g, rank, t, 1);
    if (rank == tdm_dp_group_rank(a->g)) a->seconds = t[0];
    return s != TDM_OK ? s : s2 != TDM_OK ? s2 : s3 != TDM_OK ? s3 : s4;
}

static void ar_free(ar_run *a) {
    tdm_dp_group_free(a->g);
    for (int r = 0; r < SC_MAX_RANKS; r++) {
        tdm_tensor_free(a->param[r]);
        tdm_tensor_free(a->grad[r]);
        tdm_tensor_free(a->work[r]);
    }
    free(a->base);
}

static void bm_allreduce(tdm_gb_state *st, void *arg) {
    (void)arg;
    int64_t bytes = tdm_gb_arg(st, 0);
    ar_run a = {.n = max_ranks(), .numel = bytes / 4};
    bool ok = (a.base = malloc((size_t)a.numel * sizeof *a.base)) != NULL;
    uint64_t s = 5;
    for (int64_t i = 0; ok && i < a.numel; i++) {   // 24-bit values in [-1, 1)
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a.base[i] = (float)((int64_t)(s >> 40) - (1 << 23)) / (float)(1 << 23);
    }
    ok = ok && (a.g = new_group(a.n, bytes + 1)) != NULL;
    ok = ok && tdm_dp_run(a.g, ar_setup, &a) == TDM_OK;
    if (!ok) bench_fail(st, "allreduce: setup");
    while (tdm_gb_keep_running(st)) {
        if (ok && tdm_dp_run(a.g, ar_iteration, &a) != TDM_OK) {
            bench_fail(st, "allreduce");
            ok = false;
        }
        tdm_gb_set_iteration_time(st, ok ? a.seconds : 1e-9);
    }
    // Every rank's gradient must be the mean of base * 2^r within tdm_dp_mean_bound_f32 (exact
    // for n = 2 and on the host path; NCCL's rounding otherwise), plus this reference's own
    // rounding: the sum in double, then / n (n 2^-52 of the mean of |x| is ample for it).
    double *got = ok ? malloc((size_t)a.numel * sizeof *got) : NULL;
    for (int r = 0; got && r < a.n && ok; r++) {
        if (!local_rank(a.g, r)) continue;
        const tdm_tensor *g = tdm_tensor_grad(a.param[r]);
        if (!g || tdm_tensor_to_host_f64(g, got) != TDM_OK) {
            bench_fail(st, "allreduce: reading the result");
            ok = false;
        }
        for (int64_t i = 0; ok && i < a.numel; i++) {
            double sum = 0, sum_abs = 0;
            for (int q = 0; q < a.n; q++) sum += ldexp((double)a.base[i], q);
            for (int q = 0; q < a.n; q++) sum_abs += fabs(ldexp((double)a.base[i], q));
            const double want = sum / a.n, mean_abs = sum_abs / a.n;
            const double bound = tdm_dp_mean_bound_f32(a.n, mean_abs) + a.n * 0x1p-52 * mean_abs;
            if (!(fabs(got[i] - want) <= bound)) {
                char msg[240];
                snprintf(msg, sizeof msg, "allreduce: rank %d element %lld = %.9g, expected "
                         "%.9g within %.3g (tdm_dp_mean_bound_f32)", r, (long long)i, got[i],
                         want, bound);
                tdm_gb_skip_with_error(st, msg);
                ok = false;
            }
        }
    }
    free(got);
    ar_free(&a);
    // algbw = S / t; busbw = algbw * 2(n-1)/n (nccl-tests' all-reduce definitions)
    tdm_gb_counter(st, "algbw_GB/s", (double)bytes / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "ranks", a.n, TDM_GB_PLAIN);
    tdm_gb_counter(st, "bytes/iteration", (double)bytes, TDM_GB_PLAIN);
    char label[160];
    snprintf(label, sizeof label, "%d ranks (%s); algbw = S/t, busbw = algbw*2(n-1)/n", a.n,
             sc_mpi() && a.n > 1 ? "MPI processes" : "threads");
    tdm_gb_set_label(st, label);
}

// busbw is algbw scaled: a second rate with the same time.
// (Google Benchmark divides per-iteration rates by the time, so S*2(n-1)/n per iteration.)
static void busbw_counter(tdm_gb_state *st, int64_t bytes, int n) {
    tdm_gb_counter(st, "busbw_GB/s", bench_busbw((double)bytes, n) / 1e9, TDM_GB_PER_ITERATION_RATE);
}

static void bm_allreduce_all(tdm_gb_state *st, void *arg) {
    bm_allreduce(st, arg);
    busbw_counter(st, tdm_gb_arg(st, 0), max_ranks());
}

// ---- dp_weak_<model>/ranks:N and dp_strong_<model>/ranks:N ---------------------------------

typedef struct {
    int model;
    bool weak, overlap;
} dp_ctx;

typedef struct {
    const dp_ctx *c;
    tdm_dp_group *g;
    int n;
    int64_t batch;   // per rank
    bench_trainer t[SC_MAX_RANKS];
    double first_loss, seconds, comm;   // rank 0's first loss; the last iteration's means
    bool started;
} dp_run;

// Per rank batch: weak scaling keeps it (64 on the cpu, 256 on cuda; a GPT's 8 rows); strong
// scaling splits a global batch (128 on the cpu, 1024 on cuda; a GPT's 16 rows) over the ranks.
static int64_t per_rank_batch(int m, bool weak, int n) {
    int64_t b = m == SC_GPT ? (weak ? BENCH_GPT_BATCH : 2 * BENCH_GPT_BATCH)
                : weak      ? (on_cuda() ? 256 : 64)
                            : (on_cuda() ? 1024 : 128);
    return weak ? b : b / n;
}

static tdm_status dp_setup(int rank, void *arg) {
    dp_run *d = arg;
    tdm_status s = bench_trainer_init(&d->t[rank], sc_spec(d->c->model),
                                      rank_device(d->g, rank), BENCH_PREC_F32, d->batch, 1,
                                      1 + (uint64_t)rank);   // same weights, own data
    // attach even after a failure would leave the others waiting: a failed rank attaches nothing
    return s == TDM_OK ? bench_trainer_attach(&d->t[rank], d->g, rank) : s;
}

static tdm_status dp_iteration(int rank, void *arg) {
    dp_run *d = arg;
    double v[2] = {0, 0};
    tdm_status s = agree(d->g, rank, v, 1);
    double c0 = tdm_dp_comm_seconds(d->g, rank), t0 = bench_now(), loss = NAN;
    if (s == TDM_OK) s = bench_trainer_step(&d->t[rank], &loss);
    v[0] = bench_now() - t0;
    v[1] = tdm_dp_comm_seconds(d->g, rank) - c0;
    tdm_status s2 = agree(d->g, rank, v, 2);
    if (rank == tdm_dp_group_rank(d->g)) {   // rank 0 of threads; this process's MPI rank
        d->seconds = v[0];
        d->comm = v[1];
        if (!d->started) d->first_loss = loss;
        d->started = true;
    }
    return s != TDM_OK ? s : s2;
}

// The one-rank row's invocations per (model, weak, overlap): Google Benchmark calls a benchmark
// function for its warm-up and to size the iteration count before the timed repetitions, which
// are the last calls and share one iteration count. Efficiency(N) divides by the median
// throughput of those repetitions (the CSV's median of the ranks:1 row), and the predictions take
// their median step and all-reduce time: never a mean that includes the warm-up's slow first step.
enum { SC_CALLS = 64 };
typedef struct {
    int n;                       // calls recorded (the last SC_CALLS kept)
    int64_t iters[SC_CALLS];     // each call's iteration count
    double thr[SC_CALLS], step[SC_CALLS], comm[SC_CALLS];   // its throughput, mean step, comm
    int64_t bytes;               // the gradients' bytes (the model's parameters in f32)
} sc_one_rank;
static sc_one_rank sc_t1[SC_MODELS][2][2];

static void sc_one_rank_add(sc_one_rank *o, int64_t iters, double thr, double step, double comm,
                            int64_t bytes) {
    int i = o->n % SC_CALLS;
    o->iters[i] = iters, o->thr[i] = thr, o->step[i] = step, o->comm[i] = comm;
    o->bytes = bytes;
    o->n++;
}

// The median of field v (thr, step or comm of o) over the timed repetitions: the trailing calls
// with the last call's iteration count (Google Benchmark sizes the count on the first repetition
// and reuses it; the sizing calls before it ran fewer iterations), at most the run's repetitions
// (a step longer than --min-time runs 1 iteration per call, as its warm-up call did). NaN when
// none was recorded.
static double sc_one_rank_median(const sc_one_rank *o, const double *v) {
    int kept = o->n < SC_CALLS ? o->n : SC_CALLS, reps = sc_cfg.repetitions, k = 0;
    double x[SC_CALLS];
    for (int j = 0; j < kept && (reps <= 0 || k < reps); j++) {
        int i = (o->n - 1 - j) % SC_CALLS;
        if (o->iters[i] != o->iters[(o->n - 1) % SC_CALLS]) break;
        x[k++] = v[i];
    }
    return k ? bench_median(x, k) : NAN;
}

static void bm_dp(tdm_gb_state *st, void *arg) {
    const dp_ctx *c = arg;
    dp_run d = {.c = c, .n = (int)tdm_gb_arg(st, 0)};
    d.batch = per_rank_batch(c->model, c->weak, d.n);
    bool ok = d.batch > 0 && (d.g = new_group(d.n, SC_BUCKET)) != NULL;
    if (ok) tdm_dp_set_overlap(d.g, c->overlap);
    ok = ok && tdm_dp_run(d.g, dp_setup, &d) == TDM_OK;
    if (!ok) bench_fail(st, "setup");
    double step_sum = 0, comm_sum = 0;
    while (tdm_gb_keep_running(st)) {
        if (ok && tdm_dp_run(d.g, dp_iteration, &d) != TDM_OK) {
            bench_fail(st, "step");
            ok = false;
        } else if (ok && !isfinite(d.first_loss)) {
            tdm_gb_skip_with_error(st, "the loss is not finite");
            ok = false;
        }
        step_sum += d.seconds;
        comm_sum += d.comm;
        tdm_gb_set_iteration_time(st, ok ? d.seconds : 1e-9);
    }
    // Checks: the loss fell on this process's first rank's batch, and every replica holds the
    // same parameters (threads: compared; MPI: the mean of each rank's sum and sum of squares of
    // its last parameter equals its own on every rank).
    int me = ok ? tdm_dp_group_rank(d.g) : 0;
    double last = NAN;
    if (ok && bench_trainer_loss(&d.t[me], &last) != TDM_OK) {
        bench_fail(st, "loss");
        ok = false;
    }
    if (ok && !(last < d.first_loss)) {
        char msg[200];
        snprintf(msg, sizeof msg, "the loss did not fall (%.6g -> %.6g)", d.first_loss, last);
        tdm_gb_skip_with_error(st, msg);
        ok = false;
    }
    if (ok && !local_rank(d.g, (me + 1) % d.n)) {
        const tdm_tensor *p = d.t[me].params[d.t[me].n_params - 1];
        int64_t k = tdm_tensor_numel(p);
        double *a = malloc((size_t)k * sizeof *a), mine[2] = {0, 0}, mean[2];
        ok = a && tdm_tensor_to_host_f64(p, a) == TDM_OK;
        for (int64_t i = 0; ok && i < k; i++) mine[0] += a[i], mine[1] += a[i] * a[i];
        mean[0] = mine[0], mean[1] = mine[1];
        ok = ok && agree(d.g, me, mean, 2) == TDM_OK;
        // (equal values averaged in double may round in the last place: 1e-12 relative)
        bool same = fabs(mean[0] - mine[0]) <= 1e-12 * fabs(mine[0]) &&
                    fabs(mean[1] - mine[1]) <= 1e-12 * fabs(mine[1]);
        if (!ok) bench_fail(st, "comparing the replicas");
        else if (!same) tdm_gb_skip_with_error(st, "replicas differ across the MPI ranks");
        ok = ok && same;
        free(a);
    }
    for (int r = 1; ok && r < d.n && local_rank(d.g, 0) && local_rank(d.g, r); r++) {
        const tdm_tensor *p0 = d.t[0].params[d.t[0].n_params - 1], *pr = d.t[r].params[d.t[r].n_params - 1];
        int64_t k = tdm_tensor_numel(p0);
        double *a = malloc((size_t)k * 2 * sizeof *a);
        if (!a || tdm_tensor_to_host_f64(p0, a) != TDM_OK || tdm_tensor_to_host_f64(pr, a + k) != TDM_OK) {
            bench_fail(st, "reading the parameters");
            ok = false;
        }
        for (int64_t i = 0; ok && i < k; i++)
            if (a[i] != a[k + i]) {
                char msg[200];
                snprintf(msg, sizeof msg, "replicas differ: rank %d's last parameter[%lld] %.9g, rank 0's %.9g",
                         r, (long long)i, a[k + i], a[i]);
                tdm_gb_skip_with_error(st, msg);
                ok = false;
            }
        free(a);
    }
    int64_t param_bytes = d.t[me].param_bytes;
    // NCCL runs on a side stream: the host's timer sees only the enqueueing, so no comm_share
    bool host_comm = ok && !tdm_dp_uses_device_comm(d.g, me);
    for (int r = 0; r < SC_MAX_RANKS; r++) bench_trainer_free(&d.t[r]);
    tdm_dp_group_free(d.g);
    int64_t iters = tdm_gb_iterations(st);
    double global = (double)d.batch * d.n;
    bench_rate_counters(st, global, bench_tokens_per_sample(sc_spec(c->model)), true);
    tdm_gb_counter(st, "gradient_bytes", (double)param_bytes, TDM_GB_PLAIN);
    if (ok && iters > 0 && step_sum > 0) {
        double thr = global * (double)iters / step_sum;
        if (host_comm) tdm_gb_counter(st, "comm_share", comm_sum / step_sum, TDM_GB_PLAIN);
        sc_one_rank *one = &sc_t1[c->model][c->weak][c->overlap];
        // efficiency = thr(N) / (N thr(1)): at one rank it is 1 by definition; above, thr(1) is
        // the ranks:1 row's median (its timed repetitions), so the median efficiency is the
        // ratio of the rows' medians
        double thr1 = NAN;
        if (d.n == 1) sc_one_rank_add(one, iters, thr, step_sum / (double)iters,
                                      comm_sum / (double)iters, param_bytes);
        else thr1 = sc_one_rank_median(one, one->thr);
        if (d.n == 1) tdm_gb_counter(st, "efficiency", 1.0, TDM_GB_PLAIN);
        else if (thr1 > 0) tdm_gb_counter(st, "efficiency", thr / (d.n * thr1), TDM_GB_PLAIN);
    }
    char label[200];
    snprintf(label, sizeof label, "%s, %s scaling, %lld per rank, bucket 25 MB, overlap %s, %s",
             sc_spec(c->model), c->weak ? "weak" : "strong", (long long)d.batch,
             c->overlap ? "on" : "off", host_comm ? "host all-reduce" : "NCCL");
    tdm_gb_set_label(st, label);
}

// ---- predicted_dp_<link>_<model>/ranks:N ------------------------------------------------------

typedef struct {
    int model, link;
} pred_ctx;

static void bm_predict(tdm_gb_state *st, void *arg) {
    const pred_ctx *c = arg;
    int n = (int)tdm_gb_arg(st, 0), m = c->model;
    const bench_link *link = &bench_links[c->link];
    const sc_one_rank *one = &sc_t1[m][1][1];
    if (one->n == 0) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "needs dp_weak_%s/ranks:1 measured earlier in the run (not filtered out)",
                 sc_name(m));
        tdm_gb_skip_with_error(st, msg);
        while (tdm_gb_keep_running(st)) {}
        return;
    }
    // compute = the measured 1-rank step (the median of that row's timed repetitions: its CSV
    // time) without its all-reduce with itself (the median over the same repetitions)
    double step1 = sc_one_rank_median(one, one->step), comm1 = sc_one_rank_median(one, one->comm);
    double compute = step1 - comm1;
    int64_t bytes = one->bytes;   // the gradients: the model's parameters in f32
    bench_dp_prediction p = bench_dp_predict(compute, n, (double)bytes, link);
    // nothing is timed: the loop only reports the predicted step (bench run records the row once,
    // as a prediction: the counter `predicted`)
    while (tdm_gb_keep_running(st)) tdm_gb_set_iteration_time(st, p.step);
    double global = (double)per_rank_batch(m, true, n) * n;
    bench_rate_counters(st, global, bench_tokens_per_sample(sc_spec(m)), false);
    tdm_gb_counter(st, "efficiency", p.efficiency, TDM_GB_PLAIN);
    tdm_gb_counter(st, "comm_share", p.comm_share, TDM_GB_PLAIN);
    tdm_gb_counter(st, "predicted_comm_seconds", p.comm, TDM_GB_PLAIN);
    tdm_gb_counter(st, "measured_step_seconds", step1, TDM_GB_PLAIN);
    tdm_gb_counter(st, "measured_comm_seconds", comm1, TDM_GB_PLAIN);
    tdm_gb_counter(st, "measured_compute_seconds", compute, TDM_GB_PLAIN);
    tdm_gb_counter(st, "predicted", 1, TDM_GB_PLAIN);
    tdm_gb_counter(st, "gradient_bytes", (double)bytes, TDM_GB_PLAIN);
    char label[300];
    snprintf(label, sizeof label,
             "PREDICTION: ring all-reduce on %s (%.0f GB/s, %.0f us/step) + measured compute",
             link->name, link->bw / 1e9, link->latency * 1e6);
    tdm_gb_set_label(st, label);
}

// ---- work descriptions (bench list --json; the PyTorch peer's rows match: test peer.work_match)

// allreduce/bytes:S: the mean of S bytes of f32 over the run's ranks.
static void sc_allreduce_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    (void)ctx;
    snprintf(buf, (size_t)len,
             "{\"op\": \"allreduce_mean\", \"dtype\": \"f32\", \"ranks\": %d, "
             "\"per_iteration\": 1, \"bytes\": %lld}",
             max_ranks(), n ? (long long)args[0] : 0LL);
}

// dp_<weak|strong>_<model>[_no_overlap]/ranks:N: one data-parallel f32 step on every rank (SGD lr
// 0.01, buckets of SC_BUCKET bytes), `batch` samples per rank, the global samples (and tokens).
static void sc_dp_work(const int64_t *args, int n_args, void *ctx, char *buf, int len) {
    const dp_ctx *c = ctx;
    const int n = n_args ? (int)args[0] : 1;
    const int64_t batch = per_rank_batch(c->model, c->weak, n),
                  T = bench_tokens_per_sample(sc_spec(c->model));
    char tokens[64] = "";
    if (T > 0) snprintf(tokens, sizeof tokens, ", \"tokens\": %lld", (long long)(batch * n * T));
    snprintf(buf, (size_t)len,
             "{\"op\": \"dp_train_step\", \"model\": \"%s\", \"dtype\": \"f32\", \"batch\": %lld, "
             "\"optimizer\": \"SGD lr 0.01\", \"ranks\": %d, \"overlap\": %s, "
             "\"bucket_bytes\": %d, \"per_iteration\": 1, \"samples\": %lld%s}",
             sc_spec(c->model), (long long)batch, n, c->overlap ? "true" : "false", SC_BUCKET,
             (long long)(batch * n), tokens);
}

// ---- registration -------------------------------------------------------------------------

static dp_ctx sc_dp_ctx[SC_MODELS][2][2];
static pred_ctx sc_pred_ctx[SC_MODELS][BENCH_N_LINKS];

// Predictions are made with one GPU (no MPI); TANDEM_SCALING_PREDICT=1 makes them wherever the
// suite runs (the cpu, several GPUs: to set the model beside measured rows, and for the tests).
static bool sc_predict(int nmax) {
    const char *force = getenv("TANDEM_SCALING_PREDICT");
    if (force && !strcmp(force, "1")) return true;
    return on_cuda() && nmax == 1 && !sc_mpi();
}

// dp_<weak|strong>_<model>[_no_overlap] and, with one GPU, predicted_dp_<link>_<model>.
static int register_dp(int m, int nmax) {
    const bool gpt = m == SC_GPT;
    const char *what = gpt ? "rows of tokens" : "samples", *rate = gpt ? "tokens/s" : "samples/s";
    char name[96], info[500];
    tdm_gb_bench *b;
    for (int v = 0; v < 4; v++) {
        int w = v == 0 || v == 2, o = v < 2;   // weak, strong; then both without overlap
        sc_dp_ctx[m][w][o] = (dp_ctx){m, w == 1, o == 1};
        snprintf(name, sizeof name, "dp_%s_%s%s", w ? "weak" : "strong", sc_name(m),
                 o ? "" : "_no_overlap");
        if (!(b = tdm_gb_register(name, bm_dp, &sc_dp_ctx[m][w][o]))) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"ranks"});
        tdm_gb_use_manual_time(b);
        if (sc_mpi()) {   // 1 (a thread group in each process) and the MPI world
            tdm_gb_args(b, 1, (const int64_t[]){1});
            if (nmax > 1) tdm_gb_args(b, 1, (const int64_t[]){nmax});
        } else {
            for (int64_t n = 1; n <= nmax; n *= 2) tdm_gb_args(b, 1, &n);
            if (nmax & (nmax - 1)) tdm_gb_args(b, 1, (const int64_t[]){nmax});
        }
        snprintf(info, sizeof info,
                 "data-parallel f32 training of %s, %s (%lld %s %s), all-reduce %s; %s = "
                 "global batch%s / step; efficiency = thr(N) / (N thr(1)); comm_share = "
                 "all-reduce time / step (host all-reduce); replicas checked identical",
                 sc_spec(m), w ? "weak scaling" : "strong scaling",
                 (long long)per_rank_batch(m, w, 1), what, w ? "per rank" : "in all",
                 o ? "overlapped with backward" : "after backward (no overlap)", rate,
                 gpt ? " x T" : "");
        tdm_gb_set_info(b, info, rate);
        tdm_gb_set_work(b, sc_dp_work, &sc_dp_ctx[m][w][o]);
    }
    if (sc_predict(nmax))
        for (int l = 0; l < BENCH_N_LINKS; l++) {
            sc_pred_ctx[m][l] = (pred_ctx){m, l};
            snprintf(name, sizeof name, "predicted_dp_%s_%s", bench_links[l].name, sc_name(m));
            if (!(b = tdm_gb_register(name, bm_predict, &sc_pred_ctx[m][l]))) return -1;
            tdm_gb_arg_names(b, 1, (const char *const[]){"ranks"});
            tdm_gb_use_manual_time(b);
            for (int64_t n = 2; n <= 8; n *= 2) tdm_gb_args(b, 1, &n);
            snprintf(info, sizeof info,
                     "PREDICTION, not a measurement: weak scaling of %s on N GPUs over %s "
                     "(%.0f GB/s, %.0f us per ring step): step = measured compute + "
                     "2(N-1)/N*S/bw + 2(N-1)*lat",
                     sc_spec(m), bench_links[l].name, bench_links[l].bw / 1e9,
                     bench_links[l].latency * 1e6);
            tdm_gb_set_info(b, info, rate);
        }
    return 0;
}

static int sc_register(const bench_suite_config *cfg) {
    sc_cfg = *cfg;
    memset(sc_t1, 0, sizeof sc_t1);
    int nmax = max_ranks();
    char info[400];
    tdm_gb_bench *b = tdm_gb_register("allreduce", bm_allreduce_all, NULL);
    if (!b) return -1;
    tdm_gb_arg_names(b, 1, (const char *const[]){"bytes"});
    tdm_gb_use_manual_time(b);
    static const int64_t cpu_sizes[] = {4096, 65536, 1 << 20, 16 << 20};
    static const int64_t cuda_sizes[] = {4096, 65536, 1 << 20, 16 << 20, 256 << 20};
    static const int64_t quick_size[] = {65536};
    const int64_t *sizes = cfg->quick ? quick_size : on_cuda() ? cuda_sizes : cpu_sizes;
    int n_sizes = cfg->quick ? 1 : on_cuda() ? 5 : 4;
    for (int i = 0; i < n_sizes; i++) tdm_gb_args(b, 1, &sizes[i]);
    snprintf(info, sizeof info,
             "all-reduce (mean) of S bytes of f32 gradients over %d rank%s (%s) through "
             "tdm_dp_sync; algbw = S/t, busbw = algbw*2(n-1)/n; result checked against the "
             "mean within tdm_dp_mean_bound_f32",
             nmax, nmax == 1 ? "" : "s",
             sc_mpi() ? "MPI processes" : on_cuda() ? "one per GPU" : "threads");
    tdm_gb_set_info(b, info, "algbw_GB/s");
    tdm_gb_set_work(b, sc_allreduce_work, NULL);

    for (int m = 0; bench_models[m].name && m < SC_GPT; m++) {
        bool cuda_model = !strcmp(bench_models[m].name, "mlp_10000_5000_2000_10");
        if (strcmp(bench_models[m].name, "mlp_1000_512_10") && !(on_cuda() && cuda_model)) continue;
        if (register_dp(m, nmax)) return -1;
    }
    if (register_dp(SC_GPT, nmax)) return -1;
    return 0;
}

#define SC_OVERLAP(kind, model)                                                            \
    {"overlap / no overlap (" #kind ", " #model ")", "dp_" #kind "_" #model,                 \
     "dp_" #kind "_" #model "_no_overlap", "samples/s"}
#define SC_OVERLAP_GPT(kind, model)                                                        \
    {"overlap / no overlap (" #kind ", " #model ")", "dp_" #kind "_" #model,                 \
     "dp_" #kind "_" #model "_no_overlap", "tokens/s"}
static const bench_ratio sc_ratios[] = {
    SC_OVERLAP(weak, mlp_1000_512_10),          SC_OVERLAP(strong, mlp_1000_512_10),
    SC_OVERLAP(weak, mlp_10000_5000_2000_10),   SC_OVERLAP(strong, mlp_10000_5000_2000_10),
    SC_OVERLAP_GPT(weak, gpt_tiny),             SC_OVERLAP_GPT(strong, gpt_tiny),
    SC_OVERLAP_GPT(weak, gpt_124m_t256),        SC_OVERLAP_GPT(strong, gpt_124m_t256),
    SC_OVERLAP_GPT(weak, gpt_124m),             SC_OVERLAP_GPT(strong, gpt_124m),
    {0},
};

static const bench_metric sc_metrics[] = {
    {"efficiency", "ratio"}, {"comm_share", "ratio"}, {"measured_step_seconds", "s"}, {0},
};

const bench_suite bench_suite_scaling = {
    .name = "scaling",
    .description = "data parallelism: all-reduce algbw/busbw over sizes, weak and strong "
                   "scaling of DP training over 1..N ranks (threads: 2 on the cpu, one per GPU "
                   "on cuda) with efficiency and communication share, of the seed MLPs and "
                   "nanoGPT's GPT (tokens/s); with one GPU, "
                   "predictions for 2-8 GPUs on NVLink and PCIe (predicted_* rows)",
    .doc = "docs/suites/scaling.md",
    .devices = BENCH_SUITE_CPU | BENCH_SUITE_CUDA,
    .ratios = sc_ratios,
    .metrics = sc_metrics,
    .register_benchmarks = sc_register,
};

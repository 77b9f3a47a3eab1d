/* parallel.h — data-parallel training (DistributedDataParallel's scheme): N ranks each run a
 * replica of the model on a slice of the global batch; as backward produces each parameter's
 * gradient, it joins a bucket, and a full bucket is all-reduced (averaged across ranks) at once,
 * so the optimizer steps of all replicas see the same gradients and the replicas stay identical.
 * On the reference backend the ranks are threads of one process and the all-reduce sums each
 * rank's contribution in rank order (bit-identical on every rank, run after run). In a build
 * with MPI, launched by mpirun or srun, the ranks are the MPI world's processes instead (on one
 * node or many); the all-reduce gathers every rank's bucket and sums it in the same rank order,
 * so thread ranks and process ranks give bit-identical results. When each rank's parameters are
 * on a GPU (one per rank) and tandem was built with NCCL, buckets are all-reduced by NCCL on a
 * side stream, overlapped with the rest of backward (MPI, or the threads, only hand out NCCL's
 * unique id); the environment variable TANDEM_DP_COMM=host keeps the host path. */
#ifndef TANDEM_PARALLEL_H
#define TANDEM_PARALLEL_H

#include "tandem/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_dp_group tdm_dp_group;

// A group of nranks ranks; buckets hold up to bucket_bytes of gradients (DDP: 25 MB).
tdm_dp_group *tdm_dp_group_new(int nranks, int64_t bucket_bytes);
void tdm_dp_group_free(tdm_dp_group *g);
int tdm_dp_group_size(const tdm_dp_group *g);

// Was this process started by an MPI launcher (mpirun, srun) with more than one process?
bool tdm_dp_mpi_launched(void);
// This process's rank as the MPI launcher's environment gives it (0 when not launched by one):
// what a program reads before any group exists (e.g. so that only rank 0 writes results).
int tdm_dp_launch_rank(void);
// A group of the MPI world's processes (initializes MPI when needed, and then finalizes it at
// exit: a process may make several groups one after another, for different models).
// NULL + error in a build without MPI.
tdm_dp_group *tdm_dp_group_new_mpi(int64_t bucket_bytes);
// This process's rank: the MPI rank for an MPI group, 0 for a thread group (which holds them all).
int tdm_dp_group_rank(const tdm_dp_group *g);

// Runs fn(rank, ctx) for rank 0..nranks-1 on one thread each (an MPI group: this process's rank
// on the calling thread); returns the first failure (by rank).
tdm_status tdm_dp_run(tdm_dp_group *g, tdm_status (*fn)(int rank, void *ctx), void *ctx);

// Each rank registers its replica's parameters (same count, shapes and order on every rank):
// grad hooks put finished gradients into buckets (in reverse parameter order, as backward
// produces them) and all-reduce a bucket when it is complete.
tdm_status tdm_dp_attach(tdm_dp_group *g, int rank, tdm_tensor *const *params, int n);
// After a backward: all-reduces the buckets not yet reduced (parameters without a gradient count
// as zero) and returns when this rank's gradients hold the average over ranks.
tdm_status tdm_dp_sync(tdm_dp_group *g, int rank);
// Overlap (default on): all-reduce each bucket as soon as backward completes it. Off: every
// bucket is all-reduced by tdm_dp_sync, after backward (to measure what overlap saves). Set it
// before the ranks run. Several backwards may run before one sync (gradient accumulation): on
// the device (NCCL) path a backward that started every bucket's all-reduce ends by ordering them
// before the compute stream's next work (the next backward adds into the gradients they write);
// one in which a bucket stayed incomplete (a parameter without a gradient), followed by another
// backward before sync, is an error that sync reports. tdm_dp_no_sync avoids both the repeated
// all-reduces and that error.
void tdm_dp_set_overlap(tdm_dp_group *g, bool overlap);
// PyTorch DDP's no_sync for `rank`: while on, its backwards only accumulate gradients (no
// all-reduce); the first backward after it is turned off all-reduces the accumulated gradients
// as usual (overlapped), then tdm_dp_sync. For micro-batches: on before all but the last
// backward of a step, off before the last. Every rank must do the same.
void tdm_dp_no_sync(tdm_dp_group *g, int rank, bool no_sync);
// Does this rank all-reduce on its device (NCCL) rather than through host memory? (After attach.)
bool tdm_dp_uses_device_comm(const tdm_dp_group *g, int rank);
// Seconds rank has spent all-reducing gradient buckets since its attach (in the grad hooks
// during backward and in tdm_dp_sync; gathering, waiting for the other ranks, summing and
// writing back): the communication share of a step is its difference over the step's time.
// The host all-reduce runs on the rank's own thread and blocks its backward. On the device path
// (NCCL on a side stream) this is only the time to enqueue the all-reduces.
double tdm_dp_comm_seconds(const tdm_dp_group *g, int rank);
// Averages n doubles across ranks (every rank passes its own; all get the mean), in rank order.
tdm_status tdm_dp_allreduce_mean(tdm_dp_group *g, int rank, double *v, int n);
// How far an f32 gradient tdm_dp_sync averaged over nranks may be from the exact mean
// (1/n) sum x_r, given mean_abs = (1/n) sum |x_r|: NCCL's ncclAvg multiplies each rank's value by
// float(1/n) and sums in an order of its choosing (ring, tree), so for most rank counts above 2
// its bits are not sum/n rounded once. The bound, derived in parallel.c and
// docs/suites/scaling.md: (2u + u^2) A + n eta + g(n-1) ((1 + u)^2 A + n eta), u = 2^-24,
// eta = 2^-150, g(k) = k u / (1 - k u), A = mean_abs; the host path is within it too.
double tdm_dp_mean_bound_f32(int nranks, double mean_abs);

#ifdef __cplusplus
}
#endif

#endif

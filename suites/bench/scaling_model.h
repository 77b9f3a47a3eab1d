/* scaling_model.h — the all-reduce cost model behind the scaling suite's predictions (plain
 * inline C, unit-tested in suites/tests/test_suites.c). A ring all-reduce of S bytes over n ranks
 * sends 2(n-1)/n * S bytes through each rank's link in 2(n-1) steps (reduce-scatter, then
 * all-gather), so with a link bandwidth bw (bytes/s, one direction) and a per-step latency lat:
 *     t(n, S) = 2(n-1)/n * S / bw + 2(n-1) * lat        (0 for n = 1)
 * Data parallelism without overlap (tandem's all-reduce blocks backward) adds it to each step:
 *     step(n) = compute + t(n, S),  efficiency(n) = compute / step(n),  comm share = t / step. */
#ifndef TANDEM_SCALING_MODEL_H
#define TANDEM_SCALING_MODEL_H

typedef struct {
    const char *name;   // "nvlink", "pcie"
    double bw;          // bytes/s per direction a rank sustains in a ring
    double latency;     // seconds per ring step
    const char *why;    // where the figures come from
} bench_link;

// The links predictions are made for (stated in docs/suites/scaling.md).
static const bench_link bench_links[] = {
    {"nvlink", 200e9, 5e-6,
     "NVLink 3/4 through NVSwitch: NCCL's measured all-reduce busbw on 8x A100 is ~230 GB/s "
     "(H100: ~450); 200 GB/s and 5 us per step are conservative"},
    {"pcie", 20e9, 10e-6,
     "PCIe 4.0 x16 (31.5 GB/s raw per direction): ~20 GB/s sustained in a ring through the "
     "host bridge, 10 us per step"},
};
enum { BENCH_N_LINKS = 2 };

static inline double bench_ring_allreduce_seconds(int n, double bytes, double bw, double lat) {
    if (n <= 1) return 0;
    return 2.0 * (n - 1) / n * bytes / bw + 2.0 * (n - 1) * lat;
}

typedef struct {
    double step, comm, efficiency, comm_share;
} bench_dp_prediction;

static inline bench_dp_prediction bench_dp_predict(double compute, int n, double bytes,
                                                   const bench_link *link) {
    bench_dp_prediction p;
    p.comm = bench_ring_allreduce_seconds(n, bytes, link->bw, link->latency);
    p.step = compute + p.comm;
    p.efficiency = p.step > 0 ? compute / p.step : 0;
    p.comm_share = p.step > 0 ? p.comm / p.step : 0;
    return p;
}

// nccl-tests' bus bandwidth from the algorithm bandwidth S/t of an all-reduce over n ranks.
static inline double bench_busbw(double algbw, int n) { return n > 0 ? algbw * 2.0 * (n - 1) / n : 0; }

#endif

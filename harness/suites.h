/* suites.h — the benchmark suites `bench run` and `bench list` know: each has a name, a one-line
 * description, the devices it runs on, and a function that registers its benchmarks with the
 * Google Benchmark shim (gbench_shim.h) for one device. The suites live in suites/bench/. */
#ifndef TANDEM_BENCH_SUITES_H
#define TANDEM_BENCH_SUITES_H

#include <stdbool.h>

#include "tandem/tandem.h"

// Devices a suite supports (bit mask).
#define BENCH_SUITE_CPU 1u
#define BENCH_SUITE_CUDA 2u

typedef struct {
    tdm_device device;
    bool quick;   // smallest sizes only
    // The seconds this suite may take in all (bench run --budget: its share of the run's budget),
    // or 0 for no limit. A suite whose largest rows cannot fit leaves them out or shrinks them,
    // recording each with bench_suite_skip (never silently).
    double budget_s;
    int repetitions;   // the repetitions bench run asks of each benchmark (0: not known)
    double min_time;   // seconds per repetition (0: not known)
} bench_suite_config;

// A ratio the report tables for a suite, one row per param both benchmarks share: the median of
// `metric` of benchmark `num` over that of `den` (names without arguments, e.g. "h2d_pinned" over
// "h2d_pageable" in GB/s).
typedef struct {
    const char *label;    // "pinned / pageable"
    const char *num, *den;
    const char *metric;   // "GB/s", "samples/s", "time"
} bench_ratio;

// A plain (non-rate) counter that is a result of the suite, written to the CSVs beside the
// counters ending in "/s": its name and unit ("efficiency", "1"; "peak_bytes", "bytes").
typedef struct {
    const char *name, *unit;
} bench_metric;

typedef struct {
    const char *name;
    const char *description;
    const char *doc;      // its page, docs/suites/<name>.md: what it measures, formulas, the plot
    unsigned devices;
    const bench_ratio *ratios;   // optional: the ratios its report section tables, ended by a
                                 // {0} entry; NULL for none
    const bench_metric *metrics;   // optional: plain counters that are results, ended by {0}
    // Registers the suite's benchmarks for cfg (tdm_gb_register ...). Returns 0, or -1 with a
    // message in tdm_last_error(). The config is only valid during the call: keep a copy.
    int (*register_benchmarks)(const bench_suite_config *cfg);
    // Optional: called once the suite's benchmarks have run, to free what they kept across
    // Google Benchmark's calls (a row's trainer, initial weights); NULL for nothing.
    void (*finish)(void);
} bench_suite;

// A benchmark a suite chose not to register on this device, with the reason (a recorded skip,
// never a silent one): `bench run` writes it to status.json's "skipped" as {"suite", "benchmark",
// "reason"} (when --filter selects it) and `bench list` prints it. Called from
// register_benchmarks; id is the instance name as it would have been ("attn_fwd_f16_d64_conformance/T:8192").
void bench_suite_skip(const char *id, const char *reason);
// The skips recorded since the last clear (id and reason of skip i < n; NULL past the end).
int bench_suite_skip_count(void);
const char *bench_suite_skip_id(int i);
const char *bench_suite_skip_reason(int i);
void bench_suite_skips_clear(void);

// The suites in bench run's priority order (suites.c says why): bench_suite_at(0) runs first.
int bench_suite_count(void);
const bench_suite *bench_suite_at(int i);
// A suite's share of a time budget relative to the suites after it (bench run --budget).
double bench_suite_weight(const bench_suite *s);
const bench_suite *bench_suite_find(const char *name);   // NULL when there is none
bool bench_suite_supports(const bench_suite *s, tdm_device d);
// "cpu", "cuda", "cpu, cuda": the devices a suite runs on, into buf.
const char *bench_suite_devices_str(const bench_suite *s, char *buf, int n);

// The suites (one per file in suites/bench/).
extern const bench_suite bench_suite_ops;
extern const bench_suite bench_suite_cudnn;
extern const bench_suite bench_suite_transfer;   // suites/bench/transfer.c
extern const bench_suite bench_suite_pipeline;   // suites/bench/pipeline.c
extern const bench_suite bench_suite_amp;
extern const bench_suite bench_suite_cpu_vs_gpu;
extern const bench_suite bench_suite_scaling;
extern const bench_suite bench_suite_graphs;     // suites/bench/graphs.c
extern const bench_suite bench_suite_reductions; // suites/bench/reductions.c
extern const bench_suite bench_suite_transformer; // suites/bench/transformer.c

#endif

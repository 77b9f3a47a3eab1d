/* gbench_shim.h — Google Benchmark (1.7) for C: the benchmark suites register C functions here and
 * time them with Google Benchmark's loop, repetitions and statistics, without seeing C++.
 *
 * A suite's function looks like Google Benchmark's own:
 *
 *     static void bm_add(tdm_gb_state *st, void *ctx) {
 *         ...set up (untimed)...
 *         while (tdm_gb_keep_running(st)) { ...the timed work... }
 *         ...verify the last result; tdm_gb_skip_with_error(st, "...") on a mismatch...
 *         tdm_gb_counter(st, "GB/s", bytes / 1e9, TDM_GB_PER_ITERATION_RATE);
 *     }
 *     tdm_gb_bench *b = tdm_gb_register("add", bm_add, NULL);
 *     tdm_gb_arg_names(b, 1, (const char *[]){"n"});
 *     tdm_gb_args(b, 1, (int64_t[]){1 << 20});      // one call per argument tuple: add/n:1048576
 *     tdm_gb_set_info(b, "c = a + b, f32; bytes = 3*4*n", "GB/s");
 *
 * Time is wall-clock time (UseRealTime), or the time the function reports per iteration with
 * tdm_gb_set_iteration_time after tdm_gb_use_manual_time (GPU work timed with events). Every
 * benchmark gets a warm-up (MinWarmUpTime) before its timed runs. Nothing here aborts: misuse that
 * Google Benchmark would CHECK-fail on (returning before the loop ends, a manual-time iteration
 * without a time) fails that benchmark with a message instead. */
#ifndef TANDEM_GBENCH_SHIM_H
#define TANDEM_GBENCH_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_gb_state tdm_gb_state;   // a running benchmark (benchmark::State)
typedef struct tdm_gb_bench tdm_gb_bench;   // a registered benchmark family
typedef void (*tdm_gb_fn)(tdm_gb_state *st, void *ctx);

// ---- registration -------------------------------------------------------------------------
// `ctx` is handed to fn on every call and is not owned (suites keep it in static storage).
// Returns NULL only when out of memory or name is empty.
tdm_gb_bench *tdm_gb_register(const char *name, tdm_gb_fn fn, void *ctx);
// What `bench list` shows: what is measured and how (formula of bytes/FLOP), and the main unit.
void tdm_gb_set_info(tdm_gb_bench *b, const char *description, const char *unit);
// Names of the arguments ("n" gives instance names like add/n:1048576); then one tdm_gb_args per
// argument tuple, each with the same count (at most TDM_GB_MAX_ARGS).
#define TDM_GB_MAX_ARGS 8
void tdm_gb_arg_names(tdm_gb_bench *b, int n, const char *const *names);
void tdm_gb_args(tdm_gb_bench *b, int n, const int64_t *values);
// Which argument plots put on the x axis (default: the only one when there is one; -1: none).
void tdm_gb_set_x_arg(tdm_gb_bench *b, int index);
void tdm_gb_use_manual_time(tdm_gb_bench *b);
// The work one timed iteration of an instance does, for `bench list --json` (the PyTorch peer's
// --list --json describes its rows the same way, and a test compares the two): fn writes a JSON
// object for the instance with arguments args[0..n_args) into buf (at most len bytes), e.g.
// {"op": "matmul", "dtype": "f32", "shapes": [[n,n],[n,n]], "per_iteration": 1, "FLOP": 2n^3}.
// ctx is handed to fn, not owned. Benchmarks without one are listed with "work": null.
typedef void (*tdm_gb_work_fn)(const int64_t *args, int n_args, void *ctx, char *buf, int len);
void tdm_gb_set_work(tdm_gb_bench *b, tdm_gb_work_fn fn, void *ctx);
// Forgets every registered benchmark (between suites).
void tdm_gb_clear(void);

// What was registered, in order, for `bench list` and for naming results. Pointers stay valid
// until tdm_gb_clear. arg_names has n_args entries.
typedef struct {
    const char *name, *description, *unit;
    int n_args, x_arg;
    const char *const *arg_names;
    bool manual_time;
    int n_tuples;   // the argument tuples given (tdm_gb_args calls), in registration order
} tdm_gb_info;
int tdm_gb_count(void);
const tdm_gb_info *tdm_gb_get(int i);   // NULL when out of range
// The values of argument tuple t of benchmark i (n_args of them), NULL when out of range.
const int64_t *tdm_gb_tuple(int i, int t);
// The work description (tdm_gb_set_work) of tuple t of benchmark i into buf; false when the
// benchmark has none (buf is then "").
bool tdm_gb_work(int i, int t, char *buf, int len);

// ---- inside a benchmark function ----------------------------------------------------------
// The loop: true while another timed iteration should run. Always call it until it returns false
// (or fail the benchmark with tdm_gb_skip_with_error and return).
bool tdm_gb_keep_running(tdm_gb_state *st);
int64_t tdm_gb_arg(const tdm_gb_state *st, int i);   // the i-th argument of this instance
int64_t tdm_gb_iterations(const tdm_gb_state *st);   // iterations run so far
// Manual time: the seconds this iteration took (once per iteration, inside the loop).
void tdm_gb_set_iteration_time(tdm_gb_state *st, double seconds);
// Stop and restart the clock inside the loop (costly: avoid per iteration for short work).
void tdm_gb_pause_timing(tdm_gb_state *st);
void tdm_gb_resume_timing(tdm_gb_state *st);

typedef enum {
    TDM_GB_PLAIN,                // reported as set (e.g. FLOP per iteration, a constant)
    TDM_GB_RATE,                 // a total over the run, reported divided by the run's time
    TDM_GB_PER_ITERATION_RATE,   // a per-iteration amount, reported x iterations / time
                                 // (kIsIterationInvariantRate): FLOP/s from FLOP per iteration
} tdm_gb_counter_kind;
// Set after the loop. Rates that are results must be named by their unit, ending in "/s"
// ("GB/s", "GFLOP/s", "samples/s"): `bench run` takes every counter ending in "/s" as a metric.
void tdm_gb_counter(tdm_gb_state *st, const char *name, double value, tdm_gb_counter_kind kind);
void tdm_gb_set_label(tdm_gb_state *st, const char *label);   // after the loop
// A mark put before every benchmark's label from now on ("MARK; label", or MARK alone when the
// benchmark sets none): `bench run` marks the runs on the emulated CUDA device so. NULL or "": none.
void tdm_gb_set_label_mark(const char *mark);
// Fails this benchmark with a message (recorded in the results); the loop then ends.
void tdm_gb_skip_with_error(tdm_gb_state *st, const char *msg);
bool tdm_gb_error_occurred(const tdm_gb_state *st);
// Keep the compiler from discarding a result / reordering memory around the timed work.
void tdm_gb_do_not_optimize(const void *p);
void tdm_gb_clobber_memory(void);

// Cold figures (bench run --flush-l2): when enabled, flushes the caches with the clock paused —
// on the CPU by writing and reading a buffer twice the size of the last-level cache (a GPU suite
// flushes its device's L2 itself when tdm_gb_flush_enabled() says so). Call it first thing in
// each iteration of a benchmark whose cold figure matters; a no-op when disabled.
void tdm_gb_set_flush(bool enabled);
bool tdm_gb_flush_enabled(void);
void tdm_gb_flush_caches(tdm_gb_state *st);

// ---- running ------------------------------------------------------------------------------
// A key/value pair added to the "context" of every JSON output of this process (once per key).
void tdm_gb_add_context(const char *key, const char *value);

// The instances (name with arguments, as Google Benchmark names them: "matmul/n:64/real_time")
// that `filter` (Google Benchmark's regex; NULL or "" for all) selects among the registered
// benchmarks, in the order they run. Returns the count (>= 0) and a malloc'd array of malloc'd
// strings in *names (free with tdm_gb_names_free), or -1 with a message in err.
int tdm_gb_list(const char *filter, char ***names, char *err, int errlen);
void tdm_gb_names_free(char **names, int n);

typedef struct {
    int index;                // position in the tdm_gb_list order
    const char *name;         // Google Benchmark's instance name
    const char *error;        // NULL, or the first error a repetition reported
    const char *json;         // the suite's JSON so far: Google Benchmark's output up to and
                              // including this benchmark, closed so that it parses
} tdm_gb_result;

typedef struct {
    const char *filter;       // regex, NULL for all
    int repetitions;          // >= 1
    double min_time;          // seconds per repetition, > 0
    double min_warmup_time;   // seconds of untimed warm-up per benchmark, >= 0
    const char *json_out;     // where Google Benchmark writes its JSON (--benchmark_out)
    void *user;
    // Called as each benchmark starts (before its warm-up) and when it has finished (all its
    // repetitions reported). Either may be NULL.
    void (*on_start)(void *user, int index, const char *name);
    void (*on_result)(void *user, const tdm_gb_result *r);
    // Polled as benchmarks start and inside the loop: 1 = stop after the current benchmark
    // (the rest are not run and fail with "interrupted"), 2 = stop the current one too.
    int (*stop_requested)(void *user);
} tdm_gb_run_options;

// Runs the registered benchmarks that match. Returns the number run (>= 0), or -1 with a
// message in err when the output file cannot be written or nothing matches.
int tdm_gb_run(const tdm_gb_run_options *o, char *err, int errlen);
// The final JSON (with its closing) of the last tdm_gb_run; valid until the next run or
// tdm_gb_shutdown.
const char *tdm_gb_last_json(void);

// Releases what Google Benchmark and the shim hold (registrations, context). Call once at exit.
void tdm_gb_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif

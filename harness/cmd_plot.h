/* cmd_plot.h — what `bench plot` and `bench report` share: a results directory read into memory
 * (docs/RESULTS_FORMAT.md: the tidy <suite>.csv files, context.json, status.json) and the figures
 * drawn from one or several of them with gnuplot (plots/lines.gp, plots/bars.gp). */
#ifndef TANDEM_CMD_PLOT_H
#define TANDEM_CMD_PLOT_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* One row of <suite>.csv: a benchmark's figure for one metric. NaN where a field is empty. */
typedef struct {
    char *suite, *benchmark, *param, *metric, *unit;
    bool has_x;  // x is a number (the plots' x axis); without it the benchmark is drawn as bars
    double x, median, mean, stddev, cv, min, max;
    int repetitions;
} bench_row;

/* A results directory. */
typedef struct {
    char *dir;     // as given
    char *label;   // what plots call this run: the directory's name, + " (device)" when it lacks it,
                   // + " (emulated)" for a run on the emulated CUDA device
    char *device;  // context.json "device", or NULL
    bool emulated; // a run on the emulated CUDA device (emulated.h): its timings are not GPU figures
    cJSON *context, *status;  // parsed context.json / status.json, NULL when absent
    char **suites;            // the <suite>.csv files' suites, sorted
    int n_suites;
    bench_row *rows;
    int n_rows;
} bench_results;

/* Reads DIR into *run. Returns 0, or 2 with a one-line message "bench CMD: ..." on stderr when DIR
 * is missing, unreadable, holds no <suite>.csv, or a file is malformed. */
int bench_results_load(const char *cmd, const char *dir, bench_results *run);
void bench_results_free(bench_results *run);
/* Makes the runs' labels unique (the path as given where two directories share a name). */
void bench_results_label(bench_results *runs, int n);

/* One figure: a metric of a suite, as lines (benchmarks with a numeric x) or bars (without). */
typedef struct {
    char *suite, *metric, *unit;
    bool bars;
    char *name;  // file name without extension: ops-GB_per_s, ops-samples_per_s-bars; at most
                 // BENCH_FIGURE_NAME_MAX characters of [A-Za-z0-9._-], unique among the figures
} bench_figure;
#define BENCH_FIGURE_NAME_MAX 200

/* The figures that the runs' results make, in suite then CSV order. Returns 0, or 1 when out of
 * memory. Free with bench_figures_free. */
int bench_figures_plan(const bench_results *runs, int n, bench_figure **figs, int *n_figs);
void bench_figures_free(bench_figure *figs, int n);

/* DIR/plots into out (len bytes): 0; or 2, with a message, when it exists as anything but a
 * directory (a symbolic link planted in a results directory would have the figures written
 * wherever it points). */
int bench_plots_dir(const char *cmd, const char *dir, char *out, size_t len);

/* Draws every figure as OUTDIR/<name>.png and .svg (+ <name>.dat, the data as plotted), created
 * atomically; OUTDIR is created when missing. Returns 0, 1 when gnuplot is missing or fails (the
 * message says which figure, with gnuplot's own output), 2 when OUTDIR cannot be made. */
int bench_plot_draw(const char *cmd, const bench_results *runs, int n, const bench_figure *figs,
                    int n_figs, const char *outdir, bool verbose);

/* The axis label of a metric with its unit spelled out: "GB/s (1e9 bytes/s)", "time (ns)". */
void bench_metric_label(const char *metric, const char *unit, char *buf, size_t len);

#endif

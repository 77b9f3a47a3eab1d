/* bench.c — the `bench` program's entry: dispatches to its commands. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "tandem/tandem.h"

static const struct {
    const char *name, *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"run", "run benchmark suites through Google Benchmark and write a results directory", bench_run},
    {"list", "the benchmark suites and their benchmarks: what each measures, its unit", bench_list},
    {"replay", "run case files (forward and backward) and compare within error bounds", bench_replay},
    {"conform", "random cases per op and dtype vs the f64 reference, NaN poison and guards", bench_conform},
    {"train", "train a model (mlp:/cnn: grammar) with SGD/Adam/AdamW, AMP, accumulation", bench_train},
    {"plot", "draw a results directory's figures (PNG, SVG) with gnuplot; several side by side", bench_plot},
    {"report", "write report.html and report.md: context, tables, plots of a results directory", bench_report},
    {"env", "the machine's context: host, CPU, memory, OS, GPUs, driver, CUDA, PCIe, clocks", bench_env},
    {"compare", "compare two runs (U test, verdict, exit 1 on a regression) or a fleet of runs", bench_compare},
    {"check", "is this node fit to train on: PASS/FAIL per GPU and check against its model", bench_check},
    {"counters", "the emulated device's kernel counters: traffic, coalescing, bank conflicts, PREDICTED time", bench_counters},
    {"resources", "ptxas's registers, spills, shared memory per kernel and the occupancy they allow", bench_resources},
};

double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_bad(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench COMMAND [ARGS...]   (bench COMMAND --help for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n%s\n", tdm_build_info());
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "bench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

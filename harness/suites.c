/* suites.c — the registry of benchmark suites (suites.h): add a suite's descriptor to the table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

// The suites in bench run's priority order: what A100/H100 nodes mostly train today and where
// mixed precision matters first (transformer, amp), then the node's data paths (transfer, cudnn,
// reductions, graphs, pipeline), multi-GPU scaling, and the CPU-side suites. Under a time budget
// (bench run --budget) the suites run in this order, and what did not fit is recorded as skipped
// for time. The weight is a suite's share of the budget relative to the suites after it.
static const struct {
    const bench_suite *suite;
    double weight;
} all_suites[] = {
    {&bench_suite_transformer, 3}, {&bench_suite_amp, 3},      {&bench_suite_transfer, 2},
    {&bench_suite_cudnn, 2},       {&bench_suite_reductions, 1}, {&bench_suite_graphs, 1},
    {&bench_suite_pipeline, 1},    {&bench_suite_scaling, 1},  {&bench_suite_ops, 1},
    {&bench_suite_cpu_vs_gpu, 1},
};

int bench_suite_count(void) { return (int)(sizeof all_suites / sizeof *all_suites); }

const bench_suite *bench_suite_at(int i) {
    return i >= 0 && i < bench_suite_count() ? all_suites[i].suite : NULL;
}

double bench_suite_weight(const bench_suite *s) {
    for (int i = 0; i < bench_suite_count(); i++)
        if (all_suites[i].suite == s) return all_suites[i].weight;
    return 1;
}

const bench_suite *bench_suite_find(const char *name) {
    for (int i = 0; name && i < bench_suite_count(); i++)
        if (!strcmp(all_suites[i].suite->name, name)) return all_suites[i].suite;
    return NULL;
}

bool bench_suite_supports(const bench_suite *s, tdm_device d) {
    return (s->devices & (d.type == TDM_DEVICE_CUDA ? BENCH_SUITE_CUDA : BENCH_SUITE_CPU)) != 0;
}

const char *bench_suite_devices_str(const bench_suite *s, char *buf, int n) {
    bool cpu = s->devices & BENCH_SUITE_CPU, cuda = s->devices & BENCH_SUITE_CUDA;
    snprintf(buf, (size_t)n, "%s%s%s", cpu ? "cpu" : "", cpu && cuda ? ", " : "",
             cuda ? "cuda" : "");
    return buf;
}

// ---- recorded skips ------------------------------------------------------------------------

enum { MAX_SKIPS = 256 };
static struct {
    char *id, *reason;
} skips[MAX_SKIPS];
static int n_skips;

static char *dup_str(const char *s) {
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s ? s : "", n);
    return d;
}

void bench_suite_skip(const char *id, const char *reason) {
    if (n_skips >= MAX_SKIPS) return;
    char *i = dup_str(id), *r = dup_str(reason);
    if (!i || !r) {
        free(i);
        free(r);
        return;
    }
    skips[n_skips].id = i;
    skips[n_skips++].reason = r;
}

int bench_suite_skip_count(void) { return n_skips; }
const char *bench_suite_skip_id(int i) { return i >= 0 && i < n_skips ? skips[i].id : NULL; }
const char *bench_suite_skip_reason(int i) {
    return i >= 0 && i < n_skips ? skips[i].reason : NULL;
}

void bench_suite_skips_clear(void) {
    for (int i = 0; i < n_skips; i++) {
        free(skips[i].id);
        free(skips[i].reason);
    }
    n_skips = 0;
}

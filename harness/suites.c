/* suites.c — the registry of benchmark suites (suites.h): add a suite's descriptor to the table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

static const bench_suite *const all_suites[] = {
    &bench_suite_ops,
    &bench_suite_cudnn,
    &bench_suite_transfer,
    &bench_suite_pipeline,
    &bench_suite_amp,
    &bench_suite_cpu_vs_gpu,
    &bench_suite_scaling,
    &bench_suite_graphs,
    &bench_suite_reductions,
    &bench_suite_transformer,
};

int bench_suite_count(void) { return (int)(sizeof all_suites / sizeof *all_suites); }

const bench_suite *bench_suite_at(int i) {
    return i >= 0 && i < bench_suite_count() ? all_suites[i] : NULL;
}

const bench_suite *bench_suite_find(const char *name) {
    for (int i = 0; name && i < bench_suite_count(); i++)
        if (!strcmp(all_suites[i]->name, name)) return all_suites[i];
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

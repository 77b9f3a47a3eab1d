/* test_stats.c — the harness's statistics (harness/stats.c) against reference values, and the
 * results-directory fixtures the `bench compare` tests (envcmp.cmake) run on.
 *
 *   test_stats                 U test, median, mean, stddev against scipy / numpy values
 *   test_stats env FILE        checks `bench env --json` output: valid JSON, every field there
 *   test_stats fixtures DIR    writes DIR/{base,slow,same,faster_rate,base3,slow3}/ and
 *                              DIR/fleet/node{1..4}/:
 *                              minimal results directories (context.json, <suite>.csv,
 *                              <suite>.samples.csv; docs/RESULTS_FORMAT.md) from synthetic samples
 *
 * Reference values: scipy 1.10.1 (Debian's python3-scipy), scipy.stats.mannwhitneyu(x, y,
 * alternative='two-sided') with its defaults (method 'auto', use_continuity=True) — the call
 * Google Benchmark's compare.py makes — printed with repr(); numpy 1.24 for median/mean/std
 * (ddof=1). The inputs are written out below exactly as they were given to scipy. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "stats.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof *(a)))

static void check_close(const char *what, double got, double want, double rtol) {
    double err = fabs(got - want), bound = rtol * fabs(want) + 1e-300;
    CHECK_MSG(err <= bound, "%s: got %.17g, want %.17g (|err| %.3g > %.3g)", what, got, want, err,
              bound);
}

typedef struct {
    const char *name;
    const double *x, *y;
    int nx, ny;
    double u1, p;     // scipy's statistic and pvalue
    bool exact;       // the method scipy's "auto" picks
} utest_case;

static void check_utest(const utest_case *c) {
    bench_utest r;
    CHECK_MSG(bench_mann_whitney(c->x, c->nx, c->y, c->ny, &r) == 0, "%s", c->name);
    char what[128];
    snprintf(what, sizeof what, "%s: U1", c->name);
    check_close(what, r.u1, c->u1, 1e-12);
    snprintf(what, sizeof what, "%s: p", c->name);
    // exact: a ratio of counts, good to the last bits; asymptotic: erfc vs scipy's norm.sf
    check_close(what, r.p, c->p, c->exact ? 1e-12 : 1e-9);
    CHECK_MSG(r.exact == c->exact, "%s: method %s, scipy's is %s", c->name,
              r.exact ? "exact" : "asymptotic", c->exact ? "exact" : "asymptotic");
}

static int test_reference_values(void) {
    // exact (no ties, a sample of at most 8)
    static const double d5x[] = {1, 2, 3, 4, 5}, d5y[] = {6, 7, 8, 9, 10};
    static const double i4x[] = {1.1, 3.2, 5.3, 7.4}, i4y[] = {2.5, 4.5, 6.5, 8.5, 9.5, 0.5};
    static const double s3x[] = {11.5, 10.9, 10.65};
    static const double s3y[] = {9.0, 9.3, 9.9, 10.0, 10.2, 10.4, 10.6, 10.8, 11.0, 11.2, 9.1, 9.6};
    static const double e8x[] = {9.8472, 10.6857, 9.1297, 8.4856, 10.395, 9.3294, 8.0797, 9.1859};
    static const double e8y[] = {10.2324, 9.5068, 9.2075,  10.7366, 11.5972, 10.4669, 9.9564,
                                 11.085,  11.4172, 10.4,   11.2447, 11.7429, 10.493,  9.8865,
                                 11.0477, 10.9475, 11.7988, 9.4154,  10.0384, 9.8618};
    static const double o1x[] = {1.0}, o1y[] = {2.0};
    // normal approximation: ties, or both samples larger than 8
    static const double t5x[] = {1, 2, 2, 3, 3}, t5y[] = {2, 3, 4, 4, 5};
    static const double eqx[] = {7, 7, 7, 7}, eqy[] = {7, 7, 7, 7};
    static const double n9x[] = {10.0342, 11.3597, 11.2247, 9.4897, 9.702,
                                 9.4726,  10.5697, 9.9439,  10.7469};
    static const double n9y[] = {9.1527,  12.5665, 10.9036, 11.6804, 10.8634,
                                 10.6209, 11.4631, 11.8245, 10.7975};
    static const double n10x[] = {99.198069, 98.675641, 99.751638, 100.420445, 101.136047,
                                  100.109706, 99.447353, 99.21522, 100.748746, 101.634783};
    static const double n12y[] = {101.072769, 99.566671, 99.841735, 102.400019,
                                  101.002882, 99.067865, 100.716304, 99.636774,
                                  100.170712, 100.311994, 100.086687, 101.353378};
    static const double n25x[] = {50, 49, 51, 52, 47, 49, 48, 50, 47, 50, 50, 49, 48,
                                  49, 48, 47, 50, 48, 52, 51, 46, 51, 48, 50, 50};
    static const double n30y[] = {47, 51, 50, 53, 49, 52, 49, 50, 49, 54, 52, 56, 52, 53, 53,
                                  50, 51, 54, 50, 51, 51, 52, 50, 51, 51, 51, 49, 53, 48, 49};
    const utest_case cases[] = {
        {"disjoint 5/5", d5x, d5y, 5, 5, 0.0, 0.007936507936507936, true},
        {"interleaved 4/6", i4x, i4y, 4, 6, 10.0, 0.7619047619047619, true},
        {"3/12", s3x, s3y, 3, 12, 31.0, 0.07032967032967033, true},
        {"8/20", e8x, e8y, 8, 20, 23.0, 0.002586141716576499, true},
        {"1/1", o1x, o1y, 1, 1, 0.0, 1.0, true},
        {"ties 5/5", t5x, t5y, 5, 5, 4.0, 0.08567343955231686, false},
        {"all equal 4/4", eqx, eqy, 4, 4, 8.0, 1.0, false},
        {"9/9", n9x, n9y, 9, 9, 18.0, 0.052058768750600205, false},
        {"10/12", n10x, n12y, 10, 12, 47.0, 0.40981138833093633, false},
        {"ties 25/30", n25x, n30y, 25, 30, 182.0, 0.0009898088236954226, false},
    };
    for (int i = 0; i < N_OF(cases); i++) check_utest(&cases[i]);

    // swapping the samples keeps p and mirrors U1
    bench_utest a, b;
    bench_mann_whitney(e8x, 8, e8y, 20, &a);
    bench_mann_whitney(e8y, 20, e8x, 8, &b);
    check_close("swap: p", b.p, a.p, 1e-12);
    check_close("swap: U1", b.u1, 8.0 * 20 - a.u1, 1e-12);

    // the smallest p the exact test can reach: 2 / C(n1 + n2, n1)
    check_close("min p 3/3", bench_utest_min_p(3, 3), 0.1, 1e-12);
    check_close("min p 5/5", bench_utest_min_p(5, 5), 0.007936507936507936, 1e-12);
    check_close("min p 1/1", bench_utest_min_p(1, 1), 1.0, 0);

    // refused: an empty sample, a NaN
    const double nanv[] = {1, NAN};
    CHECK(bench_mann_whitney(d5x, 0, d5y, 5, &a) == -1 && isnan(a.p));
    CHECK(bench_mann_whitney(nanv, 2, d5y, 5, &a) == -1);

    // summaries (numpy: median, mean, std(ddof=1))
    const double s7[] = {3.1, 1.2, 5.5, 2.2, 9.9, 4.0, 7.5};
    bench_summary s = bench_summarize(s7, 7);
    check_close("median 7", s.median, 4.0, 1e-15);
    check_close("mean 7", s.mean, 4.771428571428571, 1e-15);
    check_close("stddev 7", s.stddev, 3.0831338416802936, 1e-14);
    check_close("cv 7", s.cv, 0.6461657752024568, 1e-14);
    CHECK(s.min == 1.2 && s.max == 9.9 && s.n == 7);
    check_close("median 4", bench_median(s7, 4), 2.6500000000000004, 1e-15);
    check_close("stddev 4", bench_stddev(s7, 4), 1.8384776310850237, 1e-14);
    CHECK(s7[0] == 3.1 && s7[1] == 1.2);   // the input is left alone
    CHECK(bench_stddev(s7, 1) == 0);
    s = bench_summarize(s7, 0);
    CHECK(isnan(s.median) && isnan(s.cv));
    CHECK_DONE("stats");
}

// ---- fixtures ------------------------------------------------------------------------------

// Deterministic normal deviates (xorshift64* + Box-Muller): the fixtures are the same every run.
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform01(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return ((rng_state * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0) + 1e-17;
}
static double normal(double mean, double sd) {
    return mean + sd * sqrt(-2 * log(uniform01())) * cos(6.283185307179586 * uniform01());
}

#define REPS 10
#define N_BENCH 3

typedef struct {
    const char *name, *param, *metric, *unit;
    double x, base;   // x for plots; the base run's typical value
} fixture_bench;

static const fixture_bench fixture_benches[N_BENCH] = {
    {"matmul", "n:256", "time", "ns", 256, 1.0e5},
    {"matmul", "n:512", "time", "ns", 512, 8.0e5},
    {"copy", "bytes:1048576", "GB/s", "GB/s", 1048576, 20.0},
};

static int make_dir(const char *path) {
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "test_stats: mkdir %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

// One results directory: suite "synthetic", every benchmark's reps samples (at most REPS) from
// sample(benchmark, repetition).
static int write_results(const char *dir, const char *host, double (*sample)(int b, int r),
                         int reps) {
    char path[4096];
    if (make_dir(dir) != 0) return -1;
    if (snprintf(path, sizeof path, "%s/context.json", dir) >= (int)sizeof path) return -1;
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"format\": \"tandem-results/1\", \"device\": \"cpu\", \"started\": "
               "\"2026-01-01T00:00:00Z\", \"env\": {\"host\": \"%s\"}}\n", host);
    fclose(f);
    double v[N_BENCH][REPS];
    for (int b = 0; b < N_BENCH; b++)
        for (int r = 0; r < reps; r++) v[b][r] = sample(b, r);
    if (snprintf(path, sizeof path, "%s/synthetic.samples.csv", dir) >= (int)sizeof path) return -1;
    if (!(f = fopen(path, "w"))) return -1;
    fprintf(f, "suite,benchmark,param,x,metric,unit,repetition,value\n");
    for (int b = 0; b < N_BENCH; b++) {
        const fixture_bench *fb = &fixture_benches[b];
        for (int r = 0; r < reps; r++)
            fprintf(f, "synthetic,%s,%s,%g,%s,%s,%d,%.17g\n", fb->name, fb->param, fb->x,
                    fb->metric, fb->unit, r, v[b][r]);
    }
    fclose(f);
    if (snprintf(path, sizeof path, "%s/synthetic.csv", dir) >= (int)sizeof path) return -1;
    if (!(f = fopen(path, "w"))) return -1;
    fprintf(f, "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n");
    for (int b = 0; b < N_BENCH; b++) {
        const fixture_bench *fb = &fixture_benches[b];
        bench_summary s = bench_summarize(v[b], reps);
        fprintf(f, "synthetic,%s,%s,%g,%s,%s,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%d\n", fb->name,
                fb->param, fb->x, fb->metric, fb->unit, s.median, s.mean, s.stddev, s.cv, s.min,
                s.max, reps);
    }
    fclose(f);
    return 0;
}

// base ~ N(typical, 1% of it); the others derive from the very same base samples
static double base_v[N_BENCH][REPS];
static int fleet_slow_node;
static double sample_base(int b, int r) { return base_v[b][r]; }
// a planted 20% regression in every benchmark: times x1.2, the rate /1.2
static double sample_slow(int b, int r) {
    return fixture_benches[b].unit[0] == 'G' ? base_v[b][r] / 1.2 : base_v[b][r] * 1.2;
}
// a re-run of the same data: 0.1% noise
static double sample_same(int b, int r) { return base_v[b][r] * (1 + normal(0, 0.001)); }
// only the rate improves by 20% (a higher rate is faster)
static double sample_faster_rate(int b, int r) {
    return fixture_benches[b].unit[0] == 'G' ? base_v[b][r] * 1.2 : base_v[b][r];
}
// a fleet node: the base with 0.5% node-to-node noise; the slow node 25% slower
static double sample_fleet(int b, int r) {
    double v = base_v[b][r] * (1 + normal(0, 0.005));
    if (!fleet_slow_node) return v;
    return fixture_benches[b].unit[0] == 'G' ? v / 1.25 : v * 1.25;
}

static int write_fixtures(const char *root) {
    char path[4096];
    for (int b = 0; b < N_BENCH; b++)
        for (int r = 0; r < REPS; r++)
            base_v[b][r] = normal(fixture_benches[b].base, 0.01 * fixture_benches[b].base);
    if (make_dir(root) != 0) return 1;
    int rc = 0;
    snprintf(path, sizeof path, "%s/base", root);
    rc |= write_results(path, "base-host", sample_base, REPS);
    snprintf(path, sizeof path, "%s/slow", root);
    rc |= write_results(path, "slow-host", sample_slow, REPS);
    snprintf(path, sizeof path, "%s/same", root);
    rc |= write_results(path, "same-host", sample_same, REPS);
    snprintf(path, sizeof path, "%s/faster_rate", root);
    rc |= write_results(path, "faster-host", sample_faster_rate, REPS);
    // the regression again with 3 repetitions a side: the U test cannot reach p < 0.05 (0.1)
    snprintf(path, sizeof path, "%s/base3", root);
    rc |= write_results(path, "base-host", sample_base, 3);
    snprintf(path, sizeof path, "%s/slow3", root);
    rc |= write_results(path, "slow-host", sample_slow, 3);
    snprintf(path, sizeof path, "%s/fleet", root);
    rc |= make_dir(path);
    for (int node = 1; node <= 4; node++) {
        char host[32];
        snprintf(host, sizeof host, "node%d", node);
        snprintf(path, sizeof path, "%s/fleet/node%d", root, node);
        fleet_slow_node = node == 3;
        rc |= write_results(path, host, sample_fleet, REPS);
    }
    if (rc) fprintf(stderr, "test_stats: could not write the fixtures under %s\n", root);
    else printf("fixtures written under %s\n", root);
    return rc ? 1 : 0;
}

// ---- bench env --json ------------------------------------------------------------------------

// The fields `bench run` stores and `bench report` shows: present (null when unknown), the GPU
// list consistent with its count, and a reason when there are none.
static int check_env_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "test_stats: cannot open %s\n", path);
        return 1;
    }
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *e = cJSON_Parse(text);
    CHECK_MSG(cJSON_IsObject(e), "%s is not a JSON object", path);
    if (!e) CHECK_DONE("env json");
    static const char *const keys[] = {
        "host", "cpu_model", "cpu_logical", "cpu_cores", "cpu_sockets", "cpu_governor",
        "cpu_max_mhz", "memory_total_bytes", "memory_available_bytes", "os", "kernel",
        "compiler", "tandem_version", "tandem_build", "tandem_commit", "nvidia_driver",
        "cuda_driver", "cuda_runtime", "cublas", "cudnn", "nccl", "gpu_count", "gpu_note", "gpus",
        "cuda_emulated"};
    for (int i = 0; i < N_OF(keys); i++)
        CHECK_MSG(cJSON_GetObjectItemCaseSensitive(e, keys[i]), "no \"%s\"", keys[i]);
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(e, "host");
    CHECK(cJSON_IsString(host) && host->valuestring[0]);
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(e, "memory_total_bytes");
    CHECK_MSG(cJSON_IsNumber(mem) && mem->valuedouble > 1e6, "memory_total_bytes");
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(e, "gpu_count");
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(e, "gpus");
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(e, "gpu_note");
    CHECK(cJSON_IsNumber(count) && cJSON_IsArray(gpus) &&
          count->valueint == cJSON_GetArraySize(gpus));
    if (cJSON_IsNumber(count) && count->valueint == 0)
        CHECK_MSG(cJSON_IsString(note) &&
                      !strncmp(note->valuestring, "none (no CUDA device found: ", 28),
                  "gpu_note says why there is no GPU");
    // the emulated CUDA device (a -DTDM_CUDA_EMU=ON build, whose build line says EMULATED): every
    // GPU says whether it is that device, and the whole says whether any is
    const cJSON *build = cJSON_GetObjectItemCaseSensitive(e, "tandem_build");
    bool emu_build = cJSON_IsString(build) && strstr(build->valuestring, "EMULATED");
    const cJSON *emu = cJSON_GetObjectItemCaseSensitive(e, "cuda_emulated");
    CHECK_MSG(cJSON_IsBool(emu) && cJSON_IsTrue(emu) == (emu_build && cJSON_GetArraySize(gpus) > 0),
              "cuda_emulated is not %s", emu_build ? "true" : "false");
    const cJSON *g;
    cJSON_ArrayForEach(g, gpus) {
        CHECK(cJSON_GetObjectItemCaseSensitive(g, "name") ||
              cJSON_GetObjectItemCaseSensitive(g, "error"));
        // NVML's health readings are recorded, a number or null (not reported), never absent
        static const char *health[] = {"temperature_c", "temperature_slowdown_c",
            "remapped_rows_correctable", "remapped_rows_uncorrectable", "remapped_rows_pending",
            "remapped_rows_failed", "retired_pages_sbe", "retired_pages_dbe",
            "retired_pages_pending", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"};
        for (size_t h = 0; h < sizeof health / sizeof *health; h++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(g, health[h]);
            if (!cJSON_GetObjectItemCaseSensitive(g, "error"))
                CHECK_MSG(cJSON_IsNumber(x) || cJSON_IsNull(x), "a GPU without \"%s\"", health[h]);
        }
        const cJSON *ge = cJSON_GetObjectItemCaseSensitive(g, "emulated");
        if (!cJSON_GetObjectItemCaseSensitive(g, "error"))
            CHECK_MSG(cJSON_IsBool(ge) && cJSON_IsTrue(ge) == emu_build,
                      "a GPU whose \"emulated\" is not %s", emu_build ? "true" : "false");
    }
    if (!check_failures) printf("env: host %s, %d GPU(s)\n", host->valuestring, count->valueint);
    cJSON_Delete(e);
    CHECK_DONE("env json");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "fixtures")) return write_fixtures(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "env")) return check_env_json(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_stats [fixtures DIR | env FILE]\n");
        return 2;
    }
    return test_reference_values();
}

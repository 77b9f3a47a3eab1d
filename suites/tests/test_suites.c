/* test_suites.c — the suites amp, cpu-vs-gpu and scaling and the harness mechanisms they use:
 *   model              the scaling suite's ring all-reduce model against hand computations
 *   csv DIR            a `bench run --device cpu --quick --suite amp,cpu-vs-gpu,scaling` DIR has
 *                      the expected rows, metrics and units, with sane values
 *   scaling DIR        a scaling run of dp_weak_mlp_1000_512_10 and its NVLink predictions
 *                      (TANDEM_SCALING_PREDICT=1, 3 repetitions): efficiency 1 at one rank in
 *                      every repetition, efficiency(2) the ratio of the rows' medians, the
 *                      predictions from the measured one-rank step and recorded as predictions
 *   report BENCH TMP   `bench report` on a hand-made results dir: each suite's summary paragraph
 *                      (from a doc page made here, and from the real docs/suites), the ratio
 *                      table with the ratios of known medians, missing ratios left out, and
 *                      predictions labelled
 *   plotscript BENCH TMP RUN   `bench plot` calls plots/<suite>.gp with kind, metric, runs and
 *                      scripts when it exists (a stand-in amp.gp records its variables) */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "suites/bench/scaling_model.h"
#include "harness/fileio.h"

static int put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int sh(const char *fmt, const char *a, const char *b, const char *c) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, a, b, c);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// ---- model ---------------------------------------------------------------------------------

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-300; }

static int test_model(void) {
    // 4 ranks, 100 MB, 200 GB/s, 5 us: 2*3/4 * 100e6 / 200e9 = 7.5e-4 s, + 2*3*5e-6 = 3e-5 s
    CHECK(near(bench_ring_allreduce_seconds(4, 100e6, 200e9, 5e-6), 7.8e-4));
    CHECK(bench_ring_allreduce_seconds(1, 100e6, 200e9, 5e-6) == 0);
    // 2 ranks move S once: 2*1/2 * 1e9 / 20e9 = 0.05 s, + 2 * 10e-6
    CHECK(near(bench_ring_allreduce_seconds(2, 1e9, 20e9, 10e-6), 0.05002));
    // a prediction on the stated PCIe link: 8 GPUs, 240 MB of gradients, 10 ms of compute
    const bench_link *pcie = NULL, *nvlink = NULL;
    for (int i = 0; i < BENCH_N_LINKS; i++) {
        if (!strcmp(bench_links[i].name, "pcie")) pcie = &bench_links[i];
        if (!strcmp(bench_links[i].name, "nvlink")) nvlink = &bench_links[i];
    }
    CHECK(pcie && nvlink);
    if (pcie && nvlink) {
        CHECK(pcie->bw == 20e9 && pcie->latency == 10e-6);   // what scaling.md states
        CHECK(nvlink->bw == 200e9 && nvlink->latency == 5e-6);
        bench_dp_prediction p = bench_dp_predict(0.010, 8, 240e6, pcie);
        double comm = 1.75 * 240e6 / 20e9 + 14 * 10e-6;   // 0.021 + 0.00014
        CHECK_MSG(near(p.comm, 0.02114), "comm %.17g", p.comm);
        CHECK(near(comm, 0.02114));
        CHECK(near(p.step, 0.03114));
        CHECK_MSG(near(p.efficiency, 0.010 / 0.03114), "efficiency %.17g", p.efficiency);
        CHECK(near(p.comm_share, 0.02114 / 0.03114));
        CHECK(near(p.efficiency + p.comm_share, 1));
        bench_dp_prediction one = bench_dp_predict(0.010, 1, 240e6, nvlink);
        CHECK(one.efficiency == 1 && one.comm_share == 0 && one.step == 0.010);
        // NVLink beats PCIe at every N > 1
        for (int n = 2; n <= 8; n *= 2)
            CHECK(bench_dp_predict(0.01, n, 240e6, nvlink).efficiency >
                  bench_dp_predict(0.01, n, 240e6, pcie).efficiency);
    }
    CHECK(near(bench_busbw(10, 2), 10) && near(bench_busbw(10, 4), 15) && bench_busbw(10, 1) == 0);
    CHECK_DONE("suites model");
}

// ---- csv -----------------------------------------------------------------------------------

// The median of (benchmark, param, metric) in DIR/SUITE.csv and its unit; NaN when absent.
static double median(const char *dir, const char *suite, const char *bench, const char *param,
                     const char *metric, char *unit) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.csv", dir, suite);
    char *text = bench_read_file(path, NULL);
    double v = NAN;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char *f[13];
        int n = 0;
        for (char *p = line; n < 13; n++) {
            f[n] = p;
            char *c = strchr(p, ',');
            if (!c) {
                n++;
                break;
            }
            *c = '\0';
            p = c + 1;
        }
        if (n >= 7 && !strcmp(f[0], suite) && !strcmp(f[1], bench) && !strcmp(f[2], param) &&
            !strcmp(f[4], metric)) {
            v = strtod(f[6], NULL);
            if (unit) snprintf(unit, 32, "%s", f[5]);
        }
    }
    free(text);
    return v;
}

static void expect(const char *dir, const char *suite, const char *bench, const char *param,
                   const char *metric, const char *unit, double lo, double hi) {
    char u[32] = "";
    double v = median(dir, suite, bench, param, metric, u);
    CHECK_MSG(v >= lo && v <= hi && !strcmp(u, unit), "%s/%s/%s %s = %g %s (want %g..%g %s)",
              suite, bench, param, metric, v, u, lo, hi, unit);
}

static int test_csv(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/status.json", dir);
    char *status = bench_read_file(path, NULL);
    for (char *p = status, *q = status; p && (*q = *p); p++)   // without white space
        q += !strchr(" \t\n\r", *p);
    CHECK_MSG(status && strstr(status, "\"complete\":true") && strstr(status, "\"failed\":[]"),
              "%s: not complete, or failures", path);
    free(status);
    const double big = 1e12;
    static const char *const models[] = {"mlp_1000_512_10", "mlp_1000_512_128_10", "cnn_bn"};
    for (int m = 0; m < 3; m++) {
        char name[96];
        for (int p = 0; p < 2; p++) {
            snprintf(name, sizeof name, "train_%s_%s", models[m], p ? "bf16" : "f32");
            expect(dir, "amp", name, "batch:64", "samples/s", "samples/s", 1e-3, big);
            expect(dir, "amp", name, "batch:64", "time", "ns", 1, big);
            expect(dir, "amp", name, "batch:64", "peak_bytes", "bytes", 1e4, 1e10);
            expect(dir, "amp", name, "batch:64", "loss", "nats", 0.01, 10);
            expect(dir, "amp", name, "batch:64", "loss_vs_f32", "nats", p ? -0.5 : 0, p ? 0.5 : 0);
            // fp16 and tf32 are not registered on the cpu
            snprintf(name, sizeof name, "train_%s_%s", models[m], p ? "fp16" : "tf32");
            CHECK_MSG(isnan(median(dir, "amp", name, "batch:64", "samples/s", NULL)), "%s ran", name);
        }
        snprintf(name, sizeof name, "train_%s_cpu", models[m]);
        expect(dir, "cpu-vs-gpu", name, "batch:64", "samples/s", "samples/s", 1e-3, big);
        snprintf(name, sizeof name, "train_%s_cuda", models[m]);
        CHECK(isnan(median(dir, "cpu-vs-gpu", name, "batch:64", "samples/s", NULL)));
    }
    CHECK(isnan(median(dir, "amp", "train_mlp_10000_5000_2000_10_f32", "batch:64", "samples/s", NULL)));
    expect(dir, "amp", "matmul_f32", "n:128", "GFLOP/s", "GFLOP/s", 1e-3, big);
    expect(dir, "amp", "matmul_bf16", "n:128", "GFLOP/s", "GFLOP/s", 1e-3, big);
    expect(dir, "amp", "conv_f32", "batch:1", "GFLOP/s", "GFLOP/s", 1e-3, big);
    expect(dir, "amp", "conv_bf16", "batch:1", "GFLOP/s", "GFLOP/s", 1e-3, big);
    // the matmul's GFLOP/s is 2 n^3 / time
    double t = median(dir, "amp", "matmul_f32", "n:128", "time", NULL);
    double g = median(dir, "amp", "matmul_f32", "n:128", "GFLOP/s", NULL);
    CHECK_MSG(fabs(g - 2.0 * 128 * 128 * 128 / t) <= 0.3 * g, "GFLOP/s %g vs 2n^3/time %g", g,
              2.0 * 128 * 128 * 128 / t);
    // scaling: 2 thread ranks; busbw = algbw * 2(n-1)/n = algbw
    expect(dir, "scaling", "allreduce", "bytes:65536", "algbw_GB/s", "algbw_GB/s", 1e-6, 1e4);
    double a = median(dir, "scaling", "allreduce", "bytes:65536", "algbw_GB/s", NULL);
    double b = median(dir, "scaling", "allreduce", "bytes:65536", "busbw_GB/s", NULL);
    CHECK_MSG(near(b, a), "busbw %g, algbw %g", b, a);
    for (int w = 0; w < 2; w++)
        for (int n = 1; n <= 2; n++) {
            const char *bench = w ? "dp_weak_mlp_1000_512_10" : "dp_strong_mlp_1000_512_10";
            const char *param = n == 1 ? "ranks:1" : "ranks:2";
            expect(dir, "scaling", bench, param, "samples/s", "samples/s", 1e-3, big);
            expect(dir, "scaling", bench, param, "efficiency", "ratio", 0.05, 3);
            expect(dir, "scaling", bench, param, "comm_share", "ratio", 1e-9, 1);
        }
    expect(dir, "scaling", "dp_weak_mlp_1000_512_10_no_overlap", "ranks:2", "samples/s",
           "samples/s", 1e-3, big);
    expect(dir, "scaling", "dp_strong_mlp_1000_512_10_no_overlap", "ranks:2", "efficiency",
           "ratio", 0.05, 3);
    CHECK_DONE("suites csv");
}

// ---- scaling: efficiency and predictions ---------------------------------------------------

// Column col (0-based) of the row (bench, param, metric) of DIR/FILE into out; false when absent.
static bool csv_cell(const char *dir, const char *file, const char *bench, const char *param,
                     const char *metric, int col, char *out, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = bench_read_file(path, NULL);
    bool found = false;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char *f[16];
        int k = 0;
        for (char *p = line; k < 16;) {   // empty fields kept (strsep-like)
            f[k++] = p;
            char *c = strchr(p, ',');
            if (!c) break;
            *c = '\0';
            p = c + 1;
        }
        if (k > col && k >= 5 && !strcmp(f[1], bench) && !strcmp(f[2], param) &&
            !strcmp(f[4], metric)) {
            snprintf(out, n, "%s", f[col]);
            found = true;
        }
    }
    free(text);
    return found;
}

static bool rel_near(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

static int test_scaling(const char *dir) {
    const char *w = "dp_weak_mlp_1000_512_10";
    // one rank: 1 by definition, in every repetition (min = max = 1), never thr / a mean over
    // warm-up calls
    char c[64];
    for (int col = 6; col <= 11; col += 4) {   // median, min
        CHECK_MSG(csv_cell(dir, "scaling.csv", w, "ranks:1", "efficiency", col, c, sizeof c) &&
                      !strcmp(c, "1"), "efficiency at ranks:1, column %d: '%s' (want 1)", col, c);
    }
    CHECK_MSG(csv_cell(dir, "scaling.csv", w, "ranks:1", "efficiency", 11, c, sizeof c) &&
                  !strcmp(c, "1"), "efficiency at ranks:1 max: '%s' (want 1)", c);
    // two ranks: thr(2) / (2 thr(1)) with thr(1) the ranks:1 row's median, so the medians agree
    double s1 = median(dir, "scaling", w, "ranks:1", "samples/s", NULL);
    double s2 = median(dir, "scaling", w, "ranks:2", "samples/s", NULL);
    double e2 = median(dir, "scaling", w, "ranks:2", "efficiency", NULL);
    CHECK_MSG(rel_near(e2, s2 / (2 * s1), 1e-6), "efficiency(2) %.10g, samples/s %.10g / (2 x "
              "%.10g) = %.10g", e2, s2, s1, s2 / (2 * s1));
    // the predictions: from the measured one-rank step (its row's median time), recorded once
    double t1 = median(dir, "scaling", w, "ranks:1", "time", NULL);
    const char *pred = "predicted_dp_nvlink_mlp_1000_512_10";
    for (int n = 2; n <= 8; n *= 2) {
        char param[32];
        snprintf(param, sizeof param, "ranks:%d", n);
        double step = median(dir, "scaling", pred, param, "measured_step_seconds", NULL);
        CHECK_MSG(rel_near(step * 1e9, t1, 1e-6), "%s/%s: measured step %.10g ns, the ranks:1 "
                  "row's time %.10g ns", pred, param, step * 1e9, t1);
        static const char *const metrics[] = {"time", "efficiency", "samples/s"};
        for (int m = 0; m < 3; m++) {
            char sd[64] = "?", cv[64] = "?", reps[64] = "?";
            CHECK_MSG(csv_cell(dir, "scaling.csv", pred, param, metrics[m], 8, sd, sizeof sd) &&
                          csv_cell(dir, "scaling.csv", pred, param, metrics[m], 9, cv, sizeof cv) &&
                          csv_cell(dir, "scaling.csv", pred, param, metrics[m], 12, reps,
                                   sizeof reps) &&
                          !sd[0] && !cv[0] && !strcmp(reps, "0"),
                      "%s/%s %s: stddev '%s', cv '%s', repetitions '%s' (want '', '', 0: a "
                      "prediction)", pred, param, metrics[m], sd, cv, reps);
            CHECK_MSG(!csv_cell(dir, "scaling.samples.csv", pred, param, metrics[m], 7, sd,
                                sizeof sd), "%s/%s %s has samples", pred, param, metrics[m]);
        }
    }
    // a measured row keeps its repetitions
    CHECK(csv_cell(dir, "scaling.csv", w, "ranks:1", "time", 12, c, sizeof c) && !strcmp(c, "3"));
    CHECK_DONE("suites scaling");
}

// ---- report ----------------------------------------------------------------------------------

static const char amp_csv[] =
    "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n"
    "amp,train_mlp_1000_512_10_f32,batch:64,64,samples/s,samples/s,100,100,0,0,100,100,3\n"
    "amp,train_mlp_1000_512_10_fp16,batch:64,64,samples/s,samples/s,300,300,0,0,300,300,3\n"
    "amp,train_mlp_1000_512_10_f32,batch:256,256,samples/s,samples/s,200,200,0,0,200,200,3\n"
    "amp,train_mlp_1000_512_10_fp16,batch:256,256,samples/s,samples/s,900,900,0,0,900,900,3\n"
    "amp,train_mlp_1000_512_10_bf16,batch:256,256,samples/s,samples/s,500,500,0,0,500,500,3\n"
    "amp,train_cnn_bn_bf16,batch:64,64,samples/s,samples/s,70,70,0,0,70,70,3\n"
    "amp,train_cnn_bn_f32,batch:256,256,samples/s,samples/s,20,20,0,0,20,20,3\n";
static const char cvg_csv[] =
    "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n"
    "cpu-vs-gpu,train_cnn_bn_cpu,batch:64,64,samples/s,samples/s,40,40,0,0,40,40,3\n"
    "cpu-vs-gpu,train_cnn_bn_cuda,batch:64,64,samples/s,samples/s,5000,5000,0,0,5000,5000,3\n";
static const char scaling_csv[] =
    "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n"
    "scaling,dp_weak_mlp_1000_512_10,ranks:1,1,efficiency,ratio,1,1,0,0,1,1,3\n"
    "scaling,predicted_dp_nvlink_mlp_10000_5000_2000_10,ranks:2,2,efficiency,ratio,0.9,0.9,0,0,"
    "0.9,0.9,3\n";

// The line of TEXT that contains every one of the strings (NULL-terminated list); 0/1.
static bool line_with(const char *text, const char *const *parts) {
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(n < 2047 ? n : 2047), l);
        bool all = true;
        for (int i = 0; parts[i]; i++) all &= strstr(line, parts[i]) != NULL;
        if (all) return true;
        l = e ? e + 1 : NULL;
    }
    return false;
}

static int test_report(const char *bench, const char *tmp) {
    char dir[1024], root[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/results", tmp);
    snprintf(root, sizeof root, "%s/root", tmp);
    CHECK(sh("rm -rf '%s' '%s' && mkdir -p '%s/docs/suites'", dir, root, root) == 0);
    CHECK(sh("mkdir -p '%s'%s%s", dir, "", "") == 0);
    snprintf(path, sizeof path, "%s/amp.csv", dir);
    CHECK(put(path, amp_csv) == 0);
    snprintf(path, sizeof path, "%s/cpu-vs-gpu.csv", dir);
    CHECK(put(path, cvg_csv) == 0);
    snprintf(path, sizeof path, "%s/scaling.csv", dir);
    CHECK(put(path, scaling_csv) == 0);
    snprintf(path, sizeof path, "%s/docs/suites/amp.md", root);
    CHECK(put(path, "# Suite `amp`\n\nFirst paragraph, line one\nand line two.\n\n"
                    "Second paragraph: not in the report.\n") == 0);
    // 1. the docs of a root made here
    CHECK(sh("TANDEM_DOCS_ROOT='%s' '%s' report --no-plots '%s' >/dev/null", root, bench, dir) == 0);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = bench_read_file(path, NULL);
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = bench_read_file(path, NULL);
    CHECK(md && html);
    if (md && html) {
        CHECK_MSG(strstr(md, "First paragraph, line one and line two."), "no summary in report.md");
        CHECK(!strstr(md, "Second paragraph"));
        CHECK(strstr(html, "First paragraph, line one and line two."));
        CHECK(strstr(html, "<code>amp</code>") == NULL);   // the heading is not the summary
        // fp16 / f32 = 300 / 100 = 3 at batch 64 and 900 / 200 = 4.5 at batch 256
        CHECK(line_with(md, (const char *const[]){"fp16 / f32 (mlp", "| batch:64 | 3 |", NULL}));
        CHECK(line_with(md, (const char *const[]){"fp16 / f32 (mlp", "| batch:256 | 4.5 |", NULL}));
        CHECK(line_with(md, (const char *const[]){"bf16 / f32 (mlp", "| batch:256 | 2.5 |", NULL}));
        CHECK(line_with(html, (const char *const[]){"fp16 / f32 (mlp", "batch:256", ">4.5<", NULL}));
        // bf16 at batch 64 has no f32 partner, cnn_bn's two precisions share no batch: omitted
        CHECK(!line_with(md, (const char *const[]){"bf16 / f32 (mlp", "batch:64", NULL}));
        CHECK(!strstr(md, "f32 (cnn\\_bn)") && !strstr(md, "tf32 / f32"));
        // cuda / cpu = 5000 / 40 = 125
        CHECK(line_with(md, (const char *const[]){"cuda / cpu (cnn", "| batch:64 | 125 |", NULL}));
        // predictions are labelled, measurements are not
        CHECK(line_with(md, (const char *const[]){"predicted", "(prediction, not measured)", NULL}));
        CHECK(!line_with(md, (const char *const[]){"dp\\_weak", "prediction", NULL}));
        // a suite whose page is not under this root: its description instead
        CHECK(strstr(md, "the same f32 training step on the cpu reference backend"));
    }
    free(md);
    free(html);
    // 2. the real pages (found from the build's source tree): docs/suites/amp.md's summary
    CHECK(sh("rm -f '%s/report.md' && '%s' report --no-plots '%s' >/dev/null", dir, bench, dir) == 0);
    snprintf(path, sizeof path, "%s/report.md", dir);
    md = bench_read_file(path, NULL);
    CHECK_MSG(md && strstr(md, "What mixed precision buys") &&
                  strstr(md, "More: docs/suites/amp.md") &&
                  strstr(md, "The same f32 training step of each seed model") &&
                  strstr(md, "Data parallelism as DistributedDataParallel does it"),
              "the docs/suites pages' first paragraphs are not in %s", path);
    free(md);
    CHECK_DONE("suites report");
}

// ---- plotscript ---------------------------------------------------------------------------------

// Rows over two sizes (line figures) for the three suites, predictions included.
static const char *const sweep_files[][2] = {
    {"amp.csv",
     "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n"
     "amp,train_mlp_1000_512_10_f32,batch:64,64,samples/s,samples/s,100,100,0,0,90,110,3\n"
     "amp,train_mlp_1000_512_10_f32,batch:256,256,samples/s,samples/s,200,200,0,0,190,210,3\n"
     "amp,train_mlp_1000_512_10_fp16,batch:64,64,samples/s,samples/s,300,300,0,0,290,310,3\n"
     "amp,train_mlp_1000_512_10_fp16,batch:256,256,samples/s,samples/s,900,900,0,0,890,910,3\n"},
    {"cpu-vs-gpu.csv",
     "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n"
     "cpu-vs-gpu,train_cnn_bn_cpu,batch:64,64,samples/s,samples/s,40,40,0,0,40,40,3\n"
     "cpu-vs-gpu,train_cnn_bn_cpu,batch:256,256,samples/s,samples/s,41,41,0,0,41,41,3\n"
     "cpu-vs-gpu,train_cnn_bn_cuda,batch:64,64,samples/s,samples/s,5000,5000,0,0,5000,5000,3\n"
     "cpu-vs-gpu,train_cnn_bn_cuda,batch:256,256,samples/s,samples/s,9000,9000,0,0,9000,9000,3\n"},
    {"scaling.csv",
     "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n"
     "scaling,dp_weak_mlp_1000_512_10,ranks:1,1,efficiency,ratio,1,1,0,0,1,1,3\n"
     "scaling,dp_weak_mlp_1000_512_10,ranks:2,2,efficiency,ratio,0.8,0.8,0,0,0.8,0.8,3\n"
     "scaling,predicted_dp_nvlink_mlp_1000_512_10,ranks:2,2,efficiency,ratio,0.95,0.95,0,0,0.95,0.95,1\n"
     "scaling,predicted_dp_nvlink_mlp_1000_512_10,ranks:4,4,efficiency,ratio,0.9,0.9,0,0,0.9,0.9,1\n"},
};

static int test_plotscript(const char *bench, const char *tmp, const char *run) {
    char plots[1024], marker[1200], path[1200], out[1024], sweep[1024];
    snprintf(plots, sizeof plots, "%s/plots", tmp);
    snprintf(out, sizeof out, "%s/figures", tmp);
    snprintf(sweep, sizeof sweep, "%s/sweep", tmp);
    snprintf(marker, sizeof marker, "%s/amp-called", tmp);
    CHECK(sh("rm -rf '%s' '%s' && mkdir -p '%s'", plots, out, plots) == 0);
    CHECK(sh("rm -rf '%s' && mkdir -p '%s'%s", sweep, sweep, "") == 0);
    for (size_t i = 0; i < sizeof sweep_files / sizeof *sweep_files; i++) {
        snprintf(path, sizeof path, "%s/%s", sweep, sweep_files[i][0]);
        CHECK(put(path, sweep_files[i][1]) == 0);
    }
    CHECK(sh("cp '%s'/plots/lines.gp '%s'/plots/bars.gp '%s'/", TDM_SOURCE_DIR,
             TDM_SOURCE_DIR, plots) == 0);
    // a stand-in amp.gp that records how it was called, then draws with lines.gp
    snprintf(path, sizeof path, "%s/amp.gp", plots);
    char script[2048];
    snprintf(script, sizeof script,
             "set print '%s' append\nprint kind.' '.metric.' '.runs.' '.scripts\nset print\n"
             "load scripts.'/lines.gp'\n",
             marker);
    CHECK(put(path, script) == 0);
    CHECK(sh("rm -f '%s'%s%s", marker, "", "") == 0);
    CHECK(sh("TANDEM_PLOTS_DIR='%s' '%s' plot --quiet '%s' >/dev/null", plots, bench, sweep) == 0);
    char *called = bench_read_file(marker, NULL);
    CHECK_MSG(called && strstr(called, "lines samples/s 1 ") && strstr(called, plots),
              "amp.gp was not called with kind, metric, runs, scripts (got: %s)",
              called ? called : "nothing");
    int lines = 0;   // amp's one line figure, as PNG and SVG; the other suites' not through it
    for (const char *p = called; p && *p; p++) lines += *p == '\n';
    CHECK_MSG(lines == 2, "%d calls of amp.gp, want 2", lines);
    free(called);
    // bar charts (a quick run) are bars.gp's: amp.gp is not called
    CHECK(sh("rm -f '%s'%s%s", marker, "", "") == 0);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "TANDEM_PLOTS_DIR='%s' '%s' plot --quiet --out '%s/q' '%s' >/dev/null",
             plots, bench, out, run);
    CHECK(system(cmd) == 0);
    called = bench_read_file(marker, NULL);
    CHECK_MSG(!called, "amp.gp drew a bar chart: %s", called);
    free(called);
    // the real scripts draw every suite's figures: lines from the sweep, bars from the quick run
    static const char *const figs[] = {"sweep/plots/amp-samples_per_s",
                                       "sweep/plots/cpu-vs-gpu-samples_per_s",
                                       "sweep/plots/scaling-efficiency",
                                       "figures/real/amp-samples_per_s",
                                       "figures/real/amp-peak_bytes",
                                       "figures/real/cpu-vs-gpu-samples_per_s",
                                       "figures/real/scaling-comm_share",
                                       "figures/real/scaling-busbw_GB_per_s"};
    snprintf(cmd, sizeof cmd, "'%s' plot --quiet '%s' >/dev/null && '%s' plot --quiet --out '%s/real' '%s' >/dev/null",
             bench, sweep, bench, out, run);
    CHECK(system(cmd) == 0);
    for (size_t i = 0; i < sizeof figs / sizeof *figs; i++)
        for (int k = 0; k < 2; k++) {
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s.%s", tmp, figs[i], k ? "svg" : "png");
            CHECK_MSG(stat(path, &sb) == 0 && sb.st_size > 1000, "%s missing or empty", path);
        }
    // scaling.gp marks the predictions in the key
    snprintf(path, sizeof path, "%s/sweep/plots/scaling-efficiency.svg", tmp);
    char *svg = bench_read_file(path, NULL);
    CHECK_MSG(svg && strstr(svg, "(PREDICTION)"), "%s: predictions not labelled", path);
    free(svg);
    CHECK_DONE("suites plotscript");
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "model")) return test_model();
    if (argc == 3 && !strcmp(argv[1], "csv")) return test_csv(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "scaling")) return test_scaling(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "report")) return test_report(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "plotscript")) return test_plotscript(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: test_suites model | csv DIR | scaling DIR | report BENCH TMP | plotscript BENCH TMP RUN\n");
    return 2;
}

/* test_transformer.c — the transformer suite's results (suites/bench/transformer.c):
 *   results DIR cpu|cuda   a `bench run --suite transformer --quick` DIR: complete, no failures;
 *                          every training benchmark (f32 and bf16 on the cpu, all four precisions
 *                          on cuda; heuristic and conformance, deterministic for bf16) has
 *                          tokens/s, time, FLOP/token and peak_bytes rows, and in the JSON a label
 *                          naming its attention mode and whether the fused path applied, which
 *                          the counter attn_fused agrees with (on cuda: fused exactly for
 *                          heuristic/deterministic, f32 and tf32 too; on the cpu never); every
 *                          attention benchmark has GFLOP/s = FLOP/iteration / time and
 *                          call_peak_bytes; on cuda the fused (heuristic) call's peak memory is
 *                          below the unfused (conformance) one's at every shared T — recorded
 *                          results, not a timing
 *   plot BENCH OUT DIR     `bench plot --out OUT DIR` draws the suite's figures (tokens/s bars,
 *                          attention time, GFLOP/s and call_peak_bytes over T) as PNG and SVG, and
 *                          the time figure's series are the attention benchmarks */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "harness/fileio.h"

// ---- the CSV -----------------------------------------------------------------------------------

typedef struct {
    char bench[128], param[64], metric[64], unit[32];
    double median;
} row;

static row *rows;
static int n_rows;

static bool load_csv(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/transformer.csv", dir);
    char *text = bench_read_file(path, NULL);
    if (!text) return false;
    int line_no = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line_no++ == 0) continue;   // the header
        char *f[14];
        int n = 0;
        for (char *p = line; n < 14;) {
            f[n++] = p;
            char *c = strchr(p, ',');
            if (!c) break;
            *c = '\0';
            p = c + 1;
        }
        if (n < 7) continue;
        row *r = realloc(rows, (size_t)(n_rows + 1) * sizeof *r);
        if (!r) break;
        rows = r;
        r = &rows[n_rows++];
        snprintf(r->bench, sizeof r->bench, "%s", f[1]);
        snprintf(r->param, sizeof r->param, "%s", f[2]);
        snprintf(r->metric, sizeof r->metric, "%s", f[4]);
        snprintf(r->unit, sizeof r->unit, "%s", f[5]);
        r->median = strtod(f[6], NULL);
    }
    free(text);
    return n_rows > 0;
}

// The median of (bench, param, metric), NaN when absent; *unit (optional) its unit.
static double median(const char *bench, const char *param, const char *metric, const char **unit) {
    for (int i = 0; i < n_rows; i++)
        if (!strcmp(rows[i].bench, bench) && !strcmp(rows[i].param, param) &&
            !strcmp(rows[i].metric, metric)) {
            if (unit) *unit = rows[i].unit;
            return rows[i].median;
        }
    return NAN;
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static bool ends(const char *s, const char *p) {
    size_t a = strlen(s), b = strlen(p);
    return a >= b && !strcmp(s + a - b, p);
}

// ---- results -----------------------------------------------------------------------------------

static const char *const modes[3] = {"heuristic", "conformance", "deterministic"};

static const char *mode_of(const char *name) {
    for (int m = 0; m < 3; m++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "_%s", modes[m]);
        if (ends(name, suffix)) return modes[m];
    }
    return NULL;
}

static int test_results(const char *dir, bool cuda) {
    char path[1024];
    snprintf(path, sizeof path, "%s/status.json", dir);
    char *text = bench_read_file(path, NULL);
    cJSON *status = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK_MSG(cJSON_IsTrue(cJSON_GetObjectItem(status, "complete")) &&
                  cJSON_GetArraySize(cJSON_GetObjectItem(status, "failed")) == 0,
              "%s: not complete, or failures", path);
    cJSON_Delete(status);
    CHECK_MSG(load_csv(dir), "%s/transformer.csv: missing or empty", dir);

    // the training benchmarks: each precision of the device in each of its modes
    static const char *const precs[4] = {"f32", "tf32", "fp16", "bf16"};
    char tag[64] = "";
    for (int i = 0; i < n_rows && !tag[0]; i++)   // train_<tag>_f32_heuristic
        if (starts(rows[i].bench, "train_") && ends(rows[i].bench, "_f32_heuristic"))
            snprintf(tag, sizeof tag, "%.*s", (int)(strlen(rows[i].bench) - 20),
                     rows[i].bench + 6);
    CHECK_MSG(tag[0], "no train_<gpt>_f32_heuristic rows");
    int n_train = 0;
    for (int p = 0; p < 4 && tag[0]; p++) {
        bool here = cuda || p == 0 || p == 3;
        for (int m = 0; m < 3; m++) {
            char name[128];
            snprintf(name, sizeof name, "train_%s_%s_%s", tag, precs[p], modes[m]);
            bool want = here && (m < 2 || p == 3);
            const char *u = "";
            double tps = median(name, "batch:8", "tokens/s", &u);
            if (!want) {
                CHECK_MSG(isnan(tps), "%s ran (not a benchmark of this device)", name);
                continue;
            }
            n_train++;
            CHECK_MSG(tps > 0 && !strcmp(u, "tokens/s"), "%s: tokens/s %g %s", name, tps, u);
            CHECK_MSG(median(name, "batch:8", "time", &u) > 0 && !strcmp(u, "ns"), "%s: time",
                      name);
            CHECK_MSG(median(name, "batch:8", "FLOP/token", &u) > 0 && !strcmp(u, "FLOP"),
                      "%s: FLOP/token", name);
            CHECK_MSG(median(name, "batch:8", "peak_bytes", &u) > 1e4 && !strcmp(u, "bytes"),
                      "%s: peak_bytes", name);
        }
    }
    // launches per step (0 on the cpu, which launches nothing); the unfused bf16 step: on cuda
    // more launches than the fused one (a count, not a time); the AdamW step fused in one
    // launch on cuda, a launch per parameter tensor per tensor
    if (tag[0]) {
        char on[128], off[128];
        snprintf(on, sizeof on, "train_%s_bf16_heuristic", tag);
        snprintf(off, sizeof off, "train_%s_bf16_unfused", tag);
        const char *u = "";
        const double lon = median(on, "batch:8", "launches_per_step", &u);
        const double loff = median(off, "batch:8", "launches_per_step", NULL);
        CHECK_MSG(median(off, "batch:8", "tokens/s", NULL) > 0, "%s: no tokens/s", off);
        CHECK_MSG(!strcmp(u, "launches") && (cuda ? lon > 0 && loff > lon : lon == 0 && loff == 0),
                  "launches per step: fused %g, unfused %g (%s)", lon, loff, u);
        const double fused = median("optim_adamw_fused", "", "launches_per_step", NULL);
        const double each = median("optim_adamw_per_tensor", "", "launches_per_step", NULL);
        CHECK_MSG(cuda ? fused == 1 && each > 1 : fused == 0 && each == 0,
                  "AdamW launches per step: fused %g, per tensor %g", fused, each);
        CHECK_MSG(median("optim_adamw_fused", "", "params", NULL) > 0, "AdamW: no params");
    }
    // the attention benchmarks: GFLOP/s = FLOP/iteration / time (from the JSON), call_peak_bytes
    int n_attn = 0, n_pairs = 0;
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        if (!starts(r->bench, "attn_") || strcmp(r->metric, "GFLOP/s")) continue;
        n_attn++;
        const char *u = "";
        CHECK_MSG(r->median > 0 && !strcmp(r->unit, "GFLOP/s"), "%s/%s: GFLOP/s %g", r->bench,
                  r->param, r->median);
        double mem = median(r->bench, r->param, "call_peak_bytes", &u);
        CHECK_MSG(mem > 0 && !strcmp(u, "bytes"), "%s/%s: call_peak_bytes %g", r->bench, r->param,
                  mem);
        // fused below unfused on cuda: heuristic (fused there) against its conformance partner
        if (cuda && ends(r->bench, "_heuristic")) {
            char partner[160];
            snprintf(partner, sizeof partner, "%.*sconformance",
                     (int)(strlen(r->bench) - strlen("heuristic")), r->bench);
            double unfused = median(partner, r->param, "call_peak_bytes", NULL);
            if (isnan(unfused)) continue;   // a recorded skip (over the budget)
            n_pairs++;
            CHECK_MSG(mem < unfused, "%s/%s: the fused call's peak %g bytes is not below the "
                      "unfused call's %g bytes", r->bench, r->param, mem, unfused);
        }
    }
    CHECK_MSG(n_attn >= 16, "%d attention rows with GFLOP/s, want 16 or more", n_attn);
    if (cuda) CHECK_MSG(n_pairs >= 4, "%d fused/unfused pairs, want 4 or more", n_pairs);

    // the JSON: labels name the mode and the fused path, attn_fused agrees
    snprintf(path, sizeof path, "%s/transformer.json", dir);
    text = bench_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    int n_labelled = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItem(j, "benchmarks")) {
        const cJSON *nm = cJSON_GetObjectItem(b, "run_name"), *lb = cJSON_GetObjectItem(b, "label");
        const cJSON *fu = cJSON_GetObjectItem(b, "attn_fused");
        if (!cJSON_IsString(nm)) continue;
        char name[160];
        snprintf(name, sizeof name, "%s", nm->valuestring);
        char *slash = strchr(name, '/');
        if (slash) *slash = '\0';
        const char *mode = mode_of(name);
        if (!mode) continue;
        n_labelled++;
        // every precision the suite runs (fp16, bf16, f32, tf32: f32 fused in full f32) fuses
        bool want_fused = cuda && strcmp(mode, "conformance");
        char want[96];
        snprintf(want, sizeof want, "attention %s (fused FlashAttention-2: %s)", mode,
                 want_fused ? "yes" : "no");
        CHECK_MSG(cJSON_IsString(lb) && strstr(lb->valuestring, want), "%s: label %s lacks '%s'",
                  name, cJSON_IsString(lb) ? lb->valuestring : "(none)", want);
        CHECK_MSG(cJSON_IsNumber(fu) && fu->valuedouble == (want_fused ? 1 : 0),
                  "%s: attn_fused %g, want %d", name, cJSON_IsNumber(fu) ? fu->valuedouble : -1,
                  want_fused);
        // MFU only on a GPU the expectations file knows: never on the cpu
        if (!cuda) CHECK_MSG(!cJSON_GetObjectItem(b, "MFU"), "%s: MFU on the cpu", name);
    }
    cJSON_Delete(j);
    CHECK_MSG(n_labelled >= n_train + n_attn, "%d benchmarks in the JSON with a mode, want %d",
              n_labelled, n_train + n_attn);
    free(rows);
    CHECK_DONE("transformer results");
}

// ---- plot --------------------------------------------------------------------------------------

static int test_plot(const char *bench, const char *out, const char *dir) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && '%s' plot --quiet --out '%s' '%s' >/dev/null", out,
             bench, out, dir);
    CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
    static const char *const figs[] = {"transformer-tokens_per_s", "transformer-peak_bytes",
                                       "transformer-time", "transformer-GFLOP_per_s",
                                       "transformer-call_peak_bytes"};
    for (size_t i = 0; i < sizeof figs / sizeof *figs; i++)
        for (int k = 0; k < 2; k++) {
            char path[1200];
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s.%s", out, figs[i], k ? "svg" : "png");
            CHECK_MSG(stat(path, &sb) == 0 && sb.st_size > 1000, "%s missing or empty", path);
        }
    // the time figure: lines over T, one per attention benchmark, drawn by transformer.gp (its
    // subtitle names the colours)
    char path[1200];
    snprintf(path, sizeof path, "%s/transformer-time.svg", out);
    char *svg = bench_read_file(path, NULL);
    CHECK_MSG(svg && strstr(svg, "attn_fwd_bf16_") && strstr(svg, "attn_fwdbwd_f16_") &&
                  strstr(svg, "_conformance") && strstr(svg, "blue heuristic"),
              "%s: not the attention series drawn by plots/transformer.gp", path);
    free(svg);
    CHECK_DONE("transformer plot");
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "results") && (!strcmp(argv[3], "cpu") || !strcmp(argv[3], "cuda")))
        return test_results(argv[2], !strcmp(argv[3], "cuda"));
    if (argc == 5 && !strcmp(argv[1], "plot")) return test_plot(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: test_transformer results DIR cpu|cuda | plot BENCH OUT DIR\n");
    return 2;
}

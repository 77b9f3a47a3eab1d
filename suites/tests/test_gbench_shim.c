/* test_gbench_shim.c — the Google Benchmark shim from C (harness/gbench_shim.h): instance names and
 * listing, the callbacks' order, manual time and per-iteration rates (exact relations, never
 * timings), failures (SkipWithError, a function that returns before its loop ends, a manual-time
 * iteration without a time) becoming errors instead of aborts, stopping after an interrupt, and
 * bad filters and output paths refused with a message, the label mark of runs on the emulated
 * device. Usage: test_gbench_shim TMPDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gbench_shim.h"

static int failures = 0;
#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            failures++;                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                             \
            fputc('\n', stderr);                                      \
        }                                                             \
    } while (0)

// ---- benchmark functions ---------------------------------------------------------------------

static volatile double sink;

static void bm_work(tdm_gb_state *st, void *ctx) {
    int *calls = ctx;
    (*calls)++;
    int64_t n = tdm_gb_arg(st, 0);
    while (tdm_gb_keep_running(st)) {
        double s = 0;
        for (int64_t i = 0; i < n * 100; i++) s += (double)i;
        sink = s;
    }
    tdm_gb_counter(st, "items/s", (double)n, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "items/iteration", (double)n, TDM_GB_PLAIN);
}

// 1 ms per iteration by the clock it reports: real_time must be 1e6 ns, "things/s" 2000.
static void bm_manual(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    while (tdm_gb_keep_running(st)) tdm_gb_set_iteration_time(st, 1e-3);
    tdm_gb_counter(st, "things/s", 2.0, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_set_label(st, "things = 2");
}

static void bm_fails(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    while (tdm_gb_keep_running(st)) sink = 1;
    tdm_gb_skip_with_error(st, "planted mismatch");
}

static void bm_returns_early(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    tdm_gb_keep_running(st);   // one iteration, then leaves the loop
}

static void bm_manual_without_time(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    while (tdm_gb_keep_running(st)) sink = 2;
}

static void bm_paused(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    while (tdm_gb_keep_running(st)) {
        tdm_gb_pause_timing(st);   // left paused: the shim resumes before the loop ends
    }
}

// ---- callbacks -----------------------------------------------------------------------------

typedef struct {
    int started[32], results[32], n_started, n_results;
    char errors[32][200];
    int stop_after;   // > 0: request a stop once this many results arrived
    const int *calls;   // with stop_now_at: "stop now" (2) once *calls reaches stop_now_at
    int stop_now_at;
    char last_json[1 << 16];
} log_t;

static void on_start(void *user, int index, const char *name) {
    log_t *l = user;
    (void)name;
    CHECK(l->n_started == l->n_results, "start of %d before the previous result", index);
    if (l->n_started < 32) l->started[l->n_started++] = index;
}

static void on_result(void *user, const tdm_gb_result *r) {
    log_t *l = user;
    if (l->n_results < 32) {
        snprintf(l->errors[l->n_results], sizeof l->errors[0], "%s", r->error ? r->error : "");
        l->results[l->n_results++] = r->index;
    }
    cJSON *j = cJSON_ParseWithOpts(r->json, NULL, true);
    CHECK(j != NULL, "the JSON after %s does not parse", r->name);
    cJSON_Delete(j);
    snprintf(l->last_json, sizeof l->last_json, "%s", r->json);
}

static int stop_requested(void *user) {
    log_t *l = user;
    if (l->calls && *l->calls >= l->stop_now_at) return 2;
    return l->stop_after > 0 && l->n_results >= l->stop_after;
}

static const cJSON *find_run(const cJSON *root, const char *name) {
    const cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItem(root, "benchmarks")) {
        const cJSON *n = cJSON_GetObjectItem(b, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return b;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_gbench_shim TMPDIR\n");
        return 2;
    }
    char out[1024], err[512];
    snprintf(out, sizeof out, "%s/shim.json", argv[1]);
    int calls = 0;

    tdm_gb_bench *b = tdm_gb_register("work", bm_work, &calls);
    tdm_gb_arg_names(b, 1, (const char *const[]){"n"});
    tdm_gb_args(b, 1, (const int64_t[]){1});
    tdm_gb_args(b, 1, (const int64_t[]){2});
    tdm_gb_set_info(b, "sums", "items/s");
    b = tdm_gb_register("manual", bm_manual, NULL);
    tdm_gb_use_manual_time(b);
    b = tdm_gb_register("fails", bm_fails, NULL);
    tdm_gb_register("returns_early", bm_returns_early, NULL);
    b = tdm_gb_register("manual_without_time", bm_manual_without_time, NULL);
    tdm_gb_use_manual_time(b);
    tdm_gb_register("paused", bm_paused, NULL);
    tdm_gb_add_context("test_key", "test value");

    // Registration info and listing.
    CHECK(tdm_gb_count() == 6, "%d registered", tdm_gb_count());
    const tdm_gb_info *info = tdm_gb_get(0);
    CHECK(info && !strcmp(info->unit, "items/s") && info->n_args == 1 && info->x_arg == 0 &&
              !strcmp(info->arg_names[0], "n"),
          "info of work");
    CHECK(tdm_gb_get(1)->manual_time && tdm_gb_get(1)->x_arg == -1, "info of manual");
    CHECK(tdm_gb_get(6) == NULL, "out of range");
    char **names = NULL;
    int n = tdm_gb_list(NULL, &names, err, sizeof err);
    static const char *const want[] = {"work/n:1/real_time",  "work/n:2/real_time",
                                       "manual/manual_time",  "fails/real_time",
                                       "returns_early/real_time", "manual_without_time/manual_time",
                                       "paused/real_time"};
    CHECK(n == 7, "%d instances (%s)", n, n < 0 ? err : "");
    for (int i = 0; i < n && i < 7; i++)
        CHECK(!strcmp(names[i], want[i]), "%s != %s", names[i], want[i]);
    tdm_gb_names_free(names, n);
    n = tdm_gb_list("^work", &names, err, sizeof err);
    CHECK(n == 2, "filter ^work: %d", n);
    tdm_gb_names_free(names, n);
    n = tdm_gb_list("nothing-matches", &names, err, sizeof err);
    CHECK(n == 0, "filter without match: %d", n);
    tdm_gb_names_free(names, n);
    n = tdm_gb_list("(", &names, err, sizeof err);
    CHECK(n == -1 && err[0], "a bad regex: %d", n);

    // A run of everything.
    static log_t log;
    tdm_gb_run_options o = {.repetitions = 2, .min_time = 0.002, .min_warmup_time = 0.001,
                            .json_out = out, .user = &log, .on_start = on_start,
                            .on_result = on_result, .stop_requested = stop_requested};
    int ran = tdm_gb_run(&o, err, sizeof err);
    CHECK(ran == 7, "ran %d (%s)", ran, ran < 0 ? err : "");
    CHECK(log.n_started == 7 && log.n_results == 7, "%d started, %d results", log.n_started,
          log.n_results);
    for (int i = 0; i < log.n_results; i++)
        CHECK(log.started[i] == i && log.results[i] == i, "order at %d", i);
    CHECK(calls >= 4, "work ran %d times (warm-up and 2 repetitions each)", calls);
    CHECK(!log.errors[0][0] && !log.errors[1][0] && !log.errors[2][0] && !log.errors[6][0],
          "unexpected errors: '%s' '%s' '%s' '%s'", log.errors[0], log.errors[1], log.errors[2],
          log.errors[6]);
    CHECK(!strcmp(log.errors[3], "planted mismatch"), "fails: '%s'", log.errors[3]);
    CHECK(strstr(log.errors[4], "returned before its loop ended"), "early: '%s'", log.errors[4]);
    CHECK(strstr(log.errors[5], "without tdm_gb_set_iteration_time"), "no time: '%s'",
          log.errors[5]);

    // The final JSON: Google Benchmark's, with context, repetitions and aggregates.
    cJSON *root = cJSON_ParseWithOpts(tdm_gb_last_json(), NULL, true);
    CHECK(root != NULL, "final JSON does not parse");
    CHECK(!strcmp(tdm_gb_last_json(), log.last_json),
          "the last snapshot differs from the final JSON");
    FILE *f = fopen(out, "r");
    CHECK(f != NULL, "no %s", out);
    if (f) {
        static char file[1 << 16];
        size_t k = fread(file, 1, sizeof file - 1, f);
        file[k] = '\0';
        fclose(f);
        CHECK(!strcmp(file, tdm_gb_last_json()), "--benchmark_out differs from the captured JSON");
    }
    const cJSON *ctx = cJSON_GetObjectItem(root, "context");
    const cJSON *tk = cJSON_GetObjectItem(ctx, "test_key");
    CHECK(cJSON_IsString(tk) && !strcmp(tk->valuestring, "test value"), "custom context");
    const cJSON *m = find_run(root, "manual/manual_time");
    CHECK(m != NULL, "no manual run");
    if (m) {
        double t = cJSON_GetObjectItem(m, "real_time")->valuedouble;
        double rate = cJSON_GetObjectItem(m, "things/s")->valuedouble;
        CHECK(fabs(t - 1e6) < 1e-3, "manual time %.9g ns, want 1e6", t);
        CHECK(fabs(rate - 2000) < 1e-6, "per-iteration rate %.9g, want 2000", rate);
        CHECK(!strcmp(cJSON_GetObjectItem(m, "label")->valuestring, "things = 2"), "label");
    }
    const cJSON *w = find_run(root, "work/n:2/real_time");
    if (w) {
        double t = cJSON_GetObjectItem(w, "real_time")->valuedouble;
        double rate = cJSON_GetObjectItem(w, "items/s")->valuedouble;
        CHECK(fabs(rate * t / 1e9 - 2) < 1e-6, "items/s x time = %.9g, want 2 per iteration",
              rate * t / 1e9);
    }
    CHECK(find_run(root, "work/n:2/real_time_median") != NULL, "no median aggregate");
    CHECK(find_run(root, "work/n:2/real_time_cv") != NULL, "no cv aggregate");
    cJSON_Delete(root);

    // Interrupted after the second result: the rest are not started and fail "interrupted".
    memset(&log, 0, sizeof log);
    log.stop_after = 2;
    ran = tdm_gb_run(&o, err, sizeof err);
    CHECK(ran == 7 && log.n_started == 2 && log.n_results == 7,
          "interrupted: %d ran, %d started, %d results", ran, log.n_started, log.n_results);
    for (int i = 2; i < log.n_results; i++)
        CHECK(!strcmp(log.errors[i], "interrupted"), "result %d after the stop: '%s'", i,
              log.errors[i]);

    // "Stop now" (level 2, a second Ctrl-C or a row cut by bench run's budget) at every call of
    // a row of 4 repetitions: the row ends "interrupted" at once, however many repetitions
    // succeeded before. Google Benchmark's statistics abort the process (ending this test) when
    // a repetition after two successful ones reports another iteration count, as one that
    // errors before its loop started does (the calls after the stop).
    o.filter = "^work/n:1/";
    o.repetitions = 4;
    memset(&log, 0, sizeof log);
    int calls0 = calls;
    ran = tdm_gb_run(&o, err, sizeof err);
    int row_calls = calls - calls0;   // warm-up, the iteration-count search, the repetitions
    CHECK(ran == 1 && row_calls >= 4, "a row of 4 repetitions: %d calls", row_calls);
    for (int k = 1; k <= row_calls; k++) {
        memset(&log, 0, sizeof log);
        log.calls = &calls;
        log.stop_now_at = calls + k;
        ran = tdm_gb_run(&o, err, sizeof err);
        CHECK(ran == 1 && log.n_results == 1, "stop now at call %d: %d ran (%s)", k, ran,
              ran < 0 ? err : "");
        CHECK(!strcmp(log.errors[0], "interrupted"), "stop now at call %d: '%s' (not cut)", k,
              log.errors[0]);
    }
    o.repetitions = 2;
    o.filter = NULL;
    memset(&log, 0, sizeof log);

    // A label mark (runs on the emulated device): before a benchmark's own label, or alone.
    memset(&log, 0, sizeof log);
    tdm_gb_set_label_mark("EMULATED");
    o.filter = "manual|work";
    ran = tdm_gb_run(&o, err, sizeof err);
    tdm_gb_set_label_mark(NULL);
    o.filter = NULL;
    root = cJSON_ParseWithOpts(tdm_gb_last_json(), NULL, true);
    m = find_run(root, "manual/manual_time");
    w = find_run(root, "work/n:2/real_time");
    const cJSON *ml = cJSON_GetObjectItem(m, "label"), *wl = cJSON_GetObjectItem(w, "label");
    CHECK(ran > 0 && cJSON_IsString(ml) && !strcmp(ml->valuestring, "EMULATED; things = 2"),
          "marked label: '%s'", cJSON_IsString(ml) ? ml->valuestring : "(none)");
    CHECK(cJSON_IsString(wl) && !strcmp(wl->valuestring, "EMULATED"), "mark alone: '%s'",
          cJSON_IsString(wl) ? wl->valuestring : "(none)");
    cJSON_Delete(root);

    // Refused without exiting: an output file that cannot be written, a filter without match.
    o.json_out = "/nonexistent-dir/x.json";
    CHECK(tdm_gb_run(&o, err, sizeof err) == -1 && strstr(err, "nonexistent"), "bad out: %s", err);
    o.json_out = out;
    o.filter = "nothing-matches";
    CHECK(tdm_gb_run(&o, err, sizeof err) == -1, "no match");

    // Argument tuples of the wrong length are refused when listing, not CHECK-failed.
    tdm_gb_clear();
    CHECK(tdm_gb_count() == 0, "clear");
    b = tdm_gb_register("bad", bm_work, &calls);
    tdm_gb_arg_names(b, 1, (const char *const[]){"n"});
    tdm_gb_args(b, 2, (const int64_t[]){1, 2});
    CHECK(tdm_gb_list(NULL, &names, err, sizeof err) == -1 && strstr(err, "wrong length"), "%s",
          err);
    tdm_gb_shutdown();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    else printf("gbench shim: all checks passed\n");
    return failures ? 1 : 0;
}

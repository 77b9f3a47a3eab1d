/* test_run.c — checks a results directory written by `bench run` against docs/RESULTS_FORMAT.md:
 * context.json, status.json, and per suite <suite>.json (Google Benchmark's JSON), <suite>.csv
 * (exact header, positive medians, cv = stddev / mean) and <suite>.samples.csv (as many samples
 * as repetitions), no temp files left behind. "emulated" in context.json and status.json: false,
 * or true for a run on the emulated CUDA device, whose CSVs then end in an `emulated` column.
 *
 * Usage: test_run DIR complete REPETITIONS   a finished run: complete, nothing unfinished
 *        test_run DIR partial                 an interrupted run: complete false, something
 *                                             finished and something unfinished, nothing running */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "harness/fileio.h"

static int failures = 0;
#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            failures++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

static char *read_file(const char *dir, const char *name) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return bench_read_file(path, NULL);
}

static cJSON *read_json(const char *dir, const char *name) {
    char *s = read_file(dir, name);
    CHECK(s != NULL, "%s/%s is missing", dir, name);
    cJSON *j = s ? cJSON_ParseWithOpts(s, NULL, true) : NULL;
    CHECK(!s || j, "%s/%s is not valid JSON", dir, name);
    free(s);
    return j;
}

// Splits a CSV line (no quoted fields in tandem's output) into at most max fields, in place.
static int split(char *line, char **f, int max) {
    int n = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

static bool in_array(const cJSON *a, const char *s) {
    const cJSON *e;
    cJSON_ArrayForEach(e, a) if (cJSON_IsString(e) && !strcmp(e->valuestring, s)) return true;
    return false;
}

// <suite>.csv, <suite>.samples.csv and <suite>.json; every row's benchmark must be finished.
static void check_suite(const char *dir, const char *suite, int reps, const cJSON *finished,
                        bool emu) {
    char name[512];
    snprintf(name, sizeof name, "%s.json", suite);
    cJSON *gb = read_json(dir, name);
    const cJSON *list = cJSON_GetObjectItem(gb, "benchmarks");
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(gb, "context")), "%s: no context", name);
    CHECK(cJSON_IsArray(list) && cJSON_GetArraySize(list) > 0, "%s: no benchmarks", name);
    const cJSON *b;
    cJSON_ArrayForEach(b, list) {
        CHECK(cJSON_IsString(cJSON_GetObjectItem(b, "name")) &&
                  cJSON_IsNumber(cJSON_GetObjectItem(b, "real_time")),
              "%s: an entry without name or real_time", name);
    }
    cJSON_Delete(gb);

    snprintf(name, sizeof name, "%s.csv", suite);
    char *csv = read_file(dir, name);
    CHECK(csv != NULL, "%s missing", name);
    int rows = 0;
    // every row's benchmark|param|metric and repetitions (a cuda transfer run has 616 rows)
    enum { MAX_KEYS = 4096 };
    static char keys[MAX_KEYS][160];
    static int key_reps[MAX_KEYS], seen[MAX_KEYS];
    for (char *save = NULL, *line = csv ? strtok_r(csv, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        if (!rows++) {
            CHECK(!strcmp(line, emu ? "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,"
                                      "max,repetitions,emulated"
                                    : "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,"
                                      "min,max,repetitions"),
                  "%s header: %s", name, line);
            continue;
        }
        char *f[16] = {0};
        int n = split(line, f, 16);
        CHECK(n == 13 + emu, "%s: %d fields in a row", name, n);
        if (n != 13 + emu) continue;
        if (emu) CHECK(!strcmp(f[13], "true"), "%s: emulated is '%s'", name, f[13]);
        double med = atof(f[6]), mean = atof(f[7]), sd = atof(f[8]), cv = atof(f[9]);
        double mn = atof(f[10]), mx = atof(f[11]);
        int r = atoi(f[12]);
        CHECK(!strcmp(f[0], suite) && f[1][0] && f[4][0] && f[5][0], "%s: empty fields", name);
        CHECK(med > 0 && mn > 0 && mn <= med && med <= mx, "%s %s %s: median %g min %g max %g",
              name, f[1], f[4], med, mn, mx);
        CHECK(fabs(cv - sd / mean) <= 1e-6 * (cv + 1e-12) + 1e-12, "%s %s: cv %g != %g / %g", name,
              f[1], cv, sd, mean);
        CHECK(!strcmp(f[4], "time") ? !strcmp(f[5], "ns") : !strcmp(f[4], f[5]),
              "%s %s: metric %s with unit %s", name, f[1], f[4], f[5]);
        if (reps > 0) CHECK(r == reps, "%s %s: %d repetitions, want %d", name, f[1], r, reps);
        char id[512];
        snprintf(id, sizeof id, "%s/%s%s%s", suite, f[1], f[2][0] ? "/" : "", f[2]);
        CHECK(in_array(finished, id), "%s: a row for %s, which status.json has not finished", name,
              id);
        CHECK(rows - 2 < MAX_KEYS, "%s: more than %d rows", name, (int)MAX_KEYS);
        if (rows - 2 < MAX_KEYS) {
            snprintf(keys[rows - 2], sizeof keys[0], "%s|%s|%s", f[1], f[2], f[4]);
            key_reps[rows - 2] = r;
        }
    }
    int n_keys = rows - 1 < MAX_KEYS ? rows - 1 : MAX_KEYS;
    CHECK(n_keys > 0, "%s has no rows", name);
    free(csv);

    snprintf(name, sizeof name, "%s.samples.csv", suite);
    char *raw = read_file(dir, name);
    CHECK(raw != NULL, "%s missing", name);
    int lines = 0;
    memset(seen, 0, sizeof seen);
    for (char *save = NULL, *line = raw ? strtok_r(raw, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        if (!lines++) {
            CHECK(!strcmp(line, emu ? "suite,benchmark,param,x,metric,unit,repetition,value,emulated"
                                    : "suite,benchmark,param,x,metric,unit,repetition,value"),
                  "%s header: %s", name, line);
            continue;
        }
        char *f[10] = {0}, key[160];
        int n = split(line, f, 10);
        CHECK(n == 8 + emu && atof(f[7]) > 0, "%s: a bad row", name);
        if (n != 8 + emu) continue;
        snprintf(key, sizeof key, "%s|%s|%s", f[1], f[2], f[4]);
        int k = 0;
        while (k < n_keys && strcmp(keys[k], key)) k++;
        CHECK(k < n_keys, "%s: samples of %s, which is not in the csv", name, key);
        if (k < n_keys) seen[k]++;
    }
    for (int k = 0; k < n_keys; k++)
        CHECK(seen[k] == key_reps[k], "%s: %s has %d samples, the csv says %d", name, keys[k],
              seen[k], key_reps[k]);
    free(raw);
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "complete") && strcmp(argv[2], "partial"))) {
        fprintf(stderr, "usage: test_run DIR complete REPETITIONS | test_run DIR partial\n");
        return 2;
    }
    const char *dir = argv[1];
    bool complete = !strcmp(argv[2], "complete");
    int reps = complete && argc > 3 ? atoi(argv[3]) : 0;

    cJSON *ctx = read_json(dir, "context.json");
    const cJSON *fmt = cJSON_GetObjectItem(ctx, "format");
    CHECK(cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "tandem-results/1"), "context format");
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(ctx, "tandem")), "context.tandem");
    CHECK(cJSON_IsArray(cJSON_GetObjectItem(ctx, "command")), "context.command");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(ctx, "device")), "context.device");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(ctx, "started")), "context.started");
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(ctx, "env")), "context.env");
    // "emulated" (the PyTorch peer's directory, tandem.version "peer", may leave it out: false)
    const cJSON *ce = cJSON_GetObjectItem(ctx, "emulated");
    const cJSON *tv = cJSON_GetObjectItem(cJSON_GetObjectItem(ctx, "tandem"), "version");
    bool peer = cJSON_IsString(tv) && !strcmp(tv->valuestring, "peer");
    CHECK(cJSON_IsBool(ce) || (peer && !ce), "context.emulated: not true or false");
    bool emu = cJSON_IsTrue(ce);
    cJSON_Delete(ctx);

    cJSON *st = read_json(dir, "status.json");
    const cJSON *fin = cJSON_GetObjectItem(st, "finished"),
                *unf = cJSON_GetObjectItem(st, "unfinished");
    CHECK(cJSON_IsArray(fin) && cJSON_IsArray(unf) &&
              cJSON_IsArray(cJSON_GetObjectItem(st, "skipped")) &&
              cJSON_IsArray(cJSON_GetObjectItem(st, "failed")) &&
              cJSON_IsObject(cJSON_GetObjectItem(st, "clock_check")),
          "status.json lacks a field");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(st, "running")), "status.json: still running");
    CHECK((cJSON_IsBool(cJSON_GetObjectItem(st, "emulated")) || (peer && !ce)) &&
              cJSON_IsTrue(cJSON_GetObjectItem(st, "emulated")) == emu,
          "status.json: emulated is not %s, as in context.json", emu ? "true" : "false");
    CHECK(cJSON_IsBool(cJSON_GetObjectItem(st, "complete")) &&
              cJSON_IsTrue(cJSON_GetObjectItem(st, "complete")) == complete,
          "status.json: complete is not %s", complete ? "true" : "false");
    CHECK(cJSON_GetArraySize(fin) > 0, "nothing finished");
    if (complete) CHECK(cJSON_GetArraySize(unf) == 0, "unfinished benchmarks in a complete run");
    else CHECK(cJSON_GetArraySize(unf) > 0, "an interrupted run with nothing unfinished");

    // The suites with finished benchmarks: their files.
    char done[16][64];
    int n_done = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, fin) {
        char suite[64];
        snprintf(suite, sizeof suite, "%s", e->valuestring);
        if (strchr(suite, '/')) *strchr(suite, '/') = '\0';
        bool seen = false;
        for (int i = 0; i < n_done; i++) seen |= !strcmp(done[i], suite);
        if (!seen && n_done < 16) {
            snprintf(done[n_done++], sizeof done[0], "%s", suite);
            check_suite(dir, suite, reps, fin, emu);
        }
    }
    cJSON_Delete(st);

    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        CHECK(!strstr(de->d_name, ".tmp"), "a temp file: %s", de->d_name);
    if (d) closedir(d);
    if (failures) fprintf(stderr, "%d failure(s) in %s\n", failures, dir);
    else printf("%s: a valid %s run\n", dir, argv[2]);
    return failures ? 1 : 0;
}

/* test_emulated.c — runs on the emulated CUDA device (harness/emulated.h) before that device can be
 * built here: the helper that tells one, and results directories marked as such a run marks them.
 *
 *   test_emulated unit WORK               bench_env_emulated, bench_context_emulated and
 *                                         bench_dir_emulated on hand-made env objects, contexts
 *                                         and directories under WORK (each marker alone, a cpu run
 *                                         of an emulated build, unreadable files)
 *   test_emulated mark SRC DEST [WHAT]    copies the results directory SRC (a real `bench run
 *                                         --device cpu`) to DEST marked as `bench run` marks a run
 *                                         on the emulated cuda:0 (docs/RESULTS_FORMAT.md): WHAT
 *                                         all (default: context.json with device cuda:0, "emulated"
 *                                         and the env's emulated GPU; status.json "emulated"; the
 *                                         CSVs' `emulated` column; Google Benchmark's context and
 *                                         labels), or one marker alone: context, status or csv
 *   test_emulated run DIR                 checks a real run on the emulated device (an emulated
 *                                         build) carries every marker */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "emulated.h"
#include "harness/fileio.h"

// ---- files ----------------------------------------------------------------------------------

static bool spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static bool spit_in(const char *dir, const char *name, const char *text) {
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return spit(p, text);
}

static cJSON *json_in(const char *dir, const char *name) {
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *s = bench_read_file(p, NULL);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

static bool json_out(const char *dir, const char *name, const cJSON *j) {
    char *s = cJSON_Print(j);
    bool ok = s && spit_in(dir, name, s);
    free(s);
    return ok;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static void set(cJSON *o, const char *key, cJSON *v) {
    if (cJSON_GetObjectItemCaseSensitive(o, key)) cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else cJSON_AddItemToObject(o, key, v);
}

// ---- test_emulated unit ---------------------------------------------------------------------

static cJSON *parse(const char *text) {
    cJSON *j = cJSON_Parse(text);
    CHECK_MSG(j != NULL, "test JSON does not parse: %s", text);
    return j;
}

static void context_case(const char *text, bool want) {
    cJSON *c = parse(text);
    CHECK_MSG(bench_context_emulated(c) == want, "bench_context_emulated(%s) is not %s", text,
              want ? "true" : "false");
    cJSON_Delete(c);
}

// DIR under WORK with the files given (name, text pairs, NULL-ended): bench_dir_emulated == want.
static void dir_case(const char *work, const char *name, int want, const char *why_has,
                     const char *const *files) {
    char dir[4096], cmd[8300];
    snprintf(dir, sizeof dir, "%s/%s", work, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0);
    for (int i = 0; files[i]; i += 2) CHECK(spit_in(dir, files[i], files[i + 1]));
    char why[1024] = "unset";
    int got = bench_dir_emulated(dir, why, sizeof why);
    CHECK_MSG(got == want, "%s: bench_dir_emulated %d, want %d (%s)", name, got, want, why);
    if (why_has) CHECK_MSG(strstr(why, why_has), "%s: why is '%s', lacks '%s'", name, why, why_has);
    else CHECK_MSG(!why[0], "%s: why is '%s' for a run that is not emulated", name, why);
}

#define CSV_HEAD "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions"
#define CTX_CPU "{\"format\":\"tandem-results/1\",\"device\":\"cpu\"}"

static int mode_unit(const char *work) {
    // env objects
    cJSON *e = parse("{\"gpus\":[{\"index\":0,\"emulated\":false}],\"cuda_emulated\":false}");
    CHECK(!bench_env_emulated(e));
    cJSON_Delete(e);
    e = parse("{\"gpus\":[{\"index\":0,\"emulated\":true}]}");
    CHECK(bench_env_emulated(e));
    cJSON_Delete(e);
    e = parse("{\"gpus\":[],\"cuda_emulated\":true}");
    CHECK(bench_env_emulated(e));
    cJSON_Delete(e);
    CHECK(!bench_env_emulated(NULL));

    // contexts
    context_case("{\"device\":\"cuda:0\",\"emulated\":true}", true);
    context_case("{\"device\":\"cpu\",\"emulated\":true}", true);   // the flag is the word
    context_case("{\"device\":\"cuda:0\",\"emulated\":false}", false);
    // a marker is read failing safe (json_strict.h): "true", 1, "TRUE" say emulated too
    context_case("{\"device\":\"cuda:0\",\"emulated\":\"true\"}", true);
    context_case("{\"device\":\"cuda:0\",\"emulated\":\"no\"}", false);
    context_case("{\"device\":\"cuda:0\"}", false);
    context_case("{\"device\":\"cuda:0\",\"env\":{\"gpus\":[{\"index\":0,\"emulated\":true}]}}",
                 true);   // an older context without the flag: the device's own env entry
    context_case("{\"device\":\"cuda:1\",\"env\":{\"gpus\":[{\"index\":0,\"emulated\":false},"
                 "{\"index\":1,\"emulated\":true}]}}", true);
    context_case("{\"device\":\"cuda:0\",\"env\":{\"gpus\":[{\"index\":0,\"emulated\":false},"
                 "{\"index\":1,\"emulated\":true}]}}", false);
    // a cpu run of an emulated build: the CPU's own figures
    context_case("{\"device\":\"cpu\",\"emulated\":false,\"env\":{\"cuda_emulated\":true,"
                 "\"gpus\":[{\"index\":0,\"emulated\":true}]}}", false);
    // not one GPU (cuda:x, cuda:all): emulated when any GPU of its env is
    context_case("{\"device\":\"cuda:x\",\"env\":{\"gpus\":[{\"emulated\":true}]}}", true);
    context_case("{\"device\":\"cuda:all\",\"env\":{\"gpus\":[{\"index\":0,\"emulated\":true},"
                 "{\"index\":1,\"emulated\":true}]}}", true);
    context_case("{\"device\":\"cuda:all\",\"env\":{\"gpus\":[{\"index\":0,\"emulated\":false}]}}",
                 false);
    context_case("[]", false);
    CHECK(!bench_context_emulated(NULL));

    // directories: each marker alone, none, a cpu run of an emulated build, a bad file
    dir_case(work, "none", 0, NULL,
             (const char *const[]){"context.json", CTX_CPU, "status.json", "{\"emulated\":false}",
                                   "ops.csv", CSV_HEAD "\nops,add,n:1,1,GB/s,GB/s,3,3,0,0,3,3,1\n",
                                   NULL});
    dir_case(work, "no_context", 0, NULL,
             (const char *const[]){"ops.samples.csv",
                                   "suite,benchmark,param,x,metric,unit,repetition,value\n"
                                   "ops,add,n:1,1,GB/s,GB/s,0,3\n", NULL});
    dir_case(work, "context", 1, "context.json: \"emulated\": true",
             (const char *const[]){"context.json",
                                   "{\"format\":\"tandem-results/1\",\"device\":\"cuda:0\","
                                   "\"emulated\":true}", NULL});
    dir_case(work, "context_env", 1, "context.json",
             (const char *const[]){"context.json",
                                   "{\"device\":\"cuda:0\",\"env\":{\"gpus\":[{\"index\":0,"
                                   "\"emulated\":true}]}}", NULL});
    dir_case(work, "status", 1, "status.json: \"emulated\": true",
             (const char *const[]){"context.json", CTX_CPU, "status.json",
                                   "{\"complete\":true,\"emulated\":true}", NULL});
    dir_case(work, "csv", 1, "ops.csv: column emulated = true",
             (const char *const[]){"ops.csv",
                                   CSV_HEAD ",emulated\nops,add,n:1,1,GB/s,GB/s,3,3,0,0,3,3,1,true\n",
                                   NULL});
    dir_case(work, "samples_csv", 1, "ops.samples.csv: column emulated = true",
             (const char *const[]){"ops.samples.csv",
                                   "suite,benchmark,param,x,metric,unit,repetition,value,emulated\n"
                                   "ops,\"a,b\",\"it's \"\"q\"\"\",,GB/s,GB/s,0,3,true\n", NULL});
    dir_case(work, "csv_false", 0, NULL,
             (const char *const[]){"ops.csv",
                                   CSV_HEAD ",emulated\nops,add,n:1,1,GB/s,GB/s,3,3,0,0,3,3,1,false\n"
                                   "ops,x,\"true,true\",,GB/s,GB/s,3,3,0,0,3,3,1,\n", NULL});
    dir_case(work, "cpu_of_emulated_build", 0, NULL,
             (const char *const[]){"context.json",
                                   "{\"device\":\"cpu\",\"emulated\":false,\"env\":{"
                                   "\"cuda_emulated\":true,\"gpus\":[{\"index\":0,\"emulated\":"
                                   "true}]}}", "status.json", "{\"emulated\":false}", NULL});
    dir_case(work, "bad_context", -1, "context.json: not a JSON object",
             (const char *const[]){"context.json", "{\"device\": ", NULL});
    dir_case(work, "bad_status", -1, "status.json: not a JSON object",
             (const char *const[]){"context.json", CTX_CPU, "status.json", "[1,2]", NULL});
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/no_such_dir", work);
    CHECK_MSG(bench_dir_emulated(missing, NULL, 0) == 0, "a missing directory says nothing");
    CHECK_DONE("emulated unit");
}

// ---- test_emulated mark ---------------------------------------------------------------------

// Adds the `emulated` column ("true") to a CSV.
static bool mark_csv(const char *path) {
    char *text = bench_read_file(path, NULL);
    if (!text) return false;
    size_t n = strlen(text), cap = n + 64 * 1024 + n / 2, at = 0;
    char *out = malloc(cap);
    bool head = true;
    for (const char *line = text; out && *line;) {
        const char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line) : strlen(line);
        if (at + l + 16 > cap) {
            cap = 2 * cap + l;
            char *o = realloc(out, cap);
            if (!o) {
                free(out);
                out = NULL;
                break;
            }
            out = o;
        }
        if (l) at += (size_t)snprintf(out + at, cap - at, "%.*s,%s\n", (int)l, line,
                                      head ? "emulated" : "true");
        head = false;
        line += l + (nl ? 1 : 0);
    }
    bool ok = out && spit(path, out);
    free(out);
    free(text);
    return ok;
}

// Google Benchmark's JSON of a suite: its context and labels as `bench run` writes them.
static bool mark_gbench(const char *dir, const char *name) {
    cJSON *j = json_in(dir, name);
    if (!j) return false;
    cJSON *ctx = cJSON_GetObjectItemCaseSensitive(j, "context");
    set(ctx, "tandem_device", cJSON_CreateString("cuda:0"));
    set(ctx, "tandem_emulated", cJSON_CreateString("true"));
    set(ctx, "tandem_emulated_note", cJSON_CreateString(BENCH_EMU_BANNER));
    set(ctx, "env.cuda_emulated", cJSON_CreateString("true"));
    cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(j, "benchmarks")) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(b, "label");
        char label[1024];
        if (cJSON_IsString(l) && l->valuestring[0])
            snprintf(label, sizeof label, "%s; %s", BENCH_EMU_LABEL, l->valuestring);
        else snprintf(label, sizeof label, "%s", BENCH_EMU_LABEL);
        set(b, "label", cJSON_CreateString(label));
    }
    bool ok = json_out(dir, name, j);
    cJSON_Delete(j);
    return ok;
}

static int mode_mark(const char *src, const char *dest, const char *what) {
    bool all = !strcmp(what, "all");
    if (!all && strcmp(what, "context") && strcmp(what, "status") && strcmp(what, "csv")) {
        fprintf(stderr, "test_emulated mark: WHAT is all, context, status or csv\n");
        return 2;
    }
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s'/*.csv '%s'/*.json '%s'/",
             dest, dest, src, src, dest);
    CHECK_MSG(system(cmd) == 0, "cannot copy %s to %s", src, dest);
    if (all || !strcmp(what, "context")) {
        cJSON *c = json_in(dest, "context.json");
        CHECK_MSG(c != NULL, "%s/context.json", dest);
        cJSON *env = cJSON_GetObjectItemCaseSensitive(c, "env");
        CHECK_MSG(cJSON_IsObject(env), "%s/context.json has no env", dest);
        set(c, "device", cJSON_CreateString("cuda:0"));
        set(c, "emulated", cJSON_CreateTrue());
        set(c, "emulated_note", cJSON_CreateString(BENCH_EMU_BANNER));
        cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "tandem");
        set(t, "build", cJSON_CreateString("tandem (backends: cpu reference, cuda on the EMULATED "
                                           "device (CPU; tests only))"));
        cJSON *g = cJSON_CreateObject();
        cJSON_AddNumberToObject(g, "index", 0);
        cJSON_AddStringToObject(g, "device", "cuda:0");
        cJSON_AddStringToObject(g, "name", "NVIDIA H100 80GB HBM3 (emulated)");
        cJSON_AddBoolToObject(g, "emulated", true);
        cJSON *gpus = cJSON_CreateArray();
        cJSON_AddItemToArray(gpus, g);
        set(env, "gpus", gpus);
        set(env, "gpu_count", cJSON_CreateNumber(1));
        set(env, "gpu_note", cJSON_CreateNull());
        set(env, "cuda_emulated", cJSON_CreateTrue());
        CHECK(json_out(dest, "context.json", c));
        cJSON_Delete(c);
    }
    if (all || !strcmp(what, "status")) {
        cJSON *s = json_in(dest, "status.json");
        CHECK_MSG(s != NULL, "%s/status.json", dest);
        set(s, "emulated", cJSON_CreateTrue());
        CHECK(json_out(dest, "status.json", s));
        cJSON_Delete(s);
    }
    DIR *d = opendir(dest);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[8400];
        snprintf(p, sizeof p, "%s/%s", dest, e->d_name);
        if ((all || !strcmp(what, "csv")) && ends_with(e->d_name, ".csv"))
            CHECK_MSG(mark_csv(p), "cannot mark %s", p);
        if (all && ends_with(e->d_name, ".json") && strcmp(e->d_name, "context.json") &&
            strcmp(e->d_name, "status.json"))
            CHECK_MSG(mark_gbench(dest, e->d_name), "cannot mark %s", p);
    }
    if (d) closedir(d);
    char why[1024];
    CHECK_MSG(bench_dir_emulated(dest, why, sizeof why) == 1, "%s is not emulated after marking",
              dest);
    CHECK_DONE("emulated mark");
}

// ---- test_emulated run ----------------------------------------------------------------------

static int mode_run(const char *dir) {
    cJSON *c = json_in(dir, "context.json"), *s = json_in(dir, "status.json");
    CHECK_MSG(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "emulated")),
              "context.json: \"emulated\" is not true");
    CHECK_MSG(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "emulated_note")),
              "context.json: no emulated_note");
    CHECK_MSG(bench_env_emulated(cJSON_GetObjectItemCaseSensitive(c, "env")),
              "context.json: the env has no emulated GPU");
    CHECK_MSG(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "emulated")),
              "status.json: \"emulated\" is not true");
    cJSON_Delete(c);
    cJSON_Delete(s);
    int n_csv = 0, n_json = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[8400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (ends_with(e->d_name, ".csv")) {
            char *text = bench_read_file(p, NULL);
            int rows = 0, marked = 0;
            for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
                if (!rows++) CHECK_MSG(ends_with(line, ",emulated"), "%s header: %s", p, line);
                else marked += ends_with(line, ",true");
            }
            CHECK_MSG(rows > 1 && marked == rows - 1, "%s: %d of %d rows end in true", p, marked,
                      rows - 1);
            free(text);
            n_csv++;
        } else if (ends_with(e->d_name, ".json") && strcmp(e->d_name, "context.json") &&
                   strcmp(e->d_name, "status.json")) {
            cJSON *j = json_in(dir, e->d_name);
            const cJSON *te = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(j, "context"), "tandem_emulated");
            CHECK_MSG(cJSON_IsString(te) && !strcmp(te->valuestring, "true"),
                      "%s: context.tandem_emulated is not \"true\"", p);
            const cJSON *b;
            cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(j, "benchmarks")) {
                const cJSON *l = cJSON_GetObjectItemCaseSensitive(b, "label");
                CHECK_MSG(cJSON_IsString(l) && !strncmp(l->valuestring, BENCH_EMU_LABEL,
                                                        strlen(BENCH_EMU_LABEL)),
                          "%s: a benchmark whose label lacks the mark", p);
            }
            cJSON_Delete(j);
            n_json++;
        }
    }
    if (d) closedir(d);
    CHECK_MSG(n_csv >= 2 && n_json >= 1, "%s: %d CSVs, %d suite JSONs", dir, n_csv, n_json);
    CHECK_DONE("emulated run");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "unit")) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", argv[2]);
        if (system(cmd) != 0) return 2;
        return mode_unit(argv[2]);
    }
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "mark"))
        return mode_mark(argv[2], argv[3], argc == 5 ? argv[4] : "all");
    if (argc == 3 && !strcmp(argv[1], "run")) return mode_run(argv[2]);
    fprintf(stderr, "usage: test_emulated unit WORK | mark SRC DEST [all|context|status|csv] | "
                    "run DIR\n");
    return 2;
}

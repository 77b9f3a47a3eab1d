/* test_diskfull.c — `bench run` when files cannot be written (issue 15.1: a full disk was
 * reported as a complete run). The disk is filled the way a CI job without root can: a limit on the
 * size of any file the process writes (RLIMIT_FSIZE) with SIGXFSZ ignored, so that write() fails
 * with EFBIG partway through a file, as on a full disk (ENOSPC). The run is bench run --device cpu
 * --quick --suite transfer --repetitions 1 --min-time 0.01 (70 benchmarks: context.json ~1.2 KB,
 * status.json ~2.7 KB, transfer.samples.csv ~9.5 KB, transfer.csv ~16 KB, transfer.json ~42 KB when
 * whole), and what must hold afterwards:
 *   - bench run exits 1 (a failed write fails the run; docs/RESULTS_FORMAT.md) and says on stderr
 *     which file it could not write;
 *   - status.json (when it could be written) says "complete": false and names each file it lost
 *     under "write_errors" with the errno text ("File too large");
 *   - every file in the directory is whole: each .json parses, each CSV line has the header's
 *     number of fields and ends in a newline, no temp file is left; every benchmark a CSV or
 *     transfer.json has is one status.json lists as finished;
 *   - bench report DIR does not say "The run completed", and names the lost files.
 *
 * Usage: test_diskfull BENCH DIR results   limit 8 KiB: every file but context.json and
 *                                          status.json outgrows it
 *        test_diskfull BENCH DIR json      limit 32 KiB: only transfer.json outgrows it — the CSVs
 *                                          must be complete, transfer.json a whole, older snapshot
 *        test_diskfull BENCH DIR status    status.json cannot be written either: the limit lies
 *                                          between context.json's size and status.json's, both
 *                                          measured by a run without a limit first */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

// ---- files --------------------------------------------------------------------------------

static char *read_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return bench_read_file(path, NULL);
}

static long file_size(const char *dir, const char *name) {
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

// Parses JSON as Python's json does for Google Benchmark's output: NaN and Infinity as null.
static cJSON *parse_json(const char *s) {
    size_t n = strlen(s);
    char *t = malloc(2 * n + 1), *o = t;
    static const char *const bad[] = {"-NaN", "NaN", "-Infinity", "Infinity"};
    for (const char *p = s; *p;) {
        size_t k = 0;
        if (p > s && (p[-1] == ' ' || p[-1] == ':'))
            for (int b = 0; b < 4 && !k; b++)
                if (!strncmp(p, bad[b], strlen(bad[b]))) k = strlen(bad[b]);
        if (k) {
            memcpy(o, "null", 4);
            o += 4;
            p += k;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    cJSON *j = cJSON_ParseWithOpts(t, NULL, true);
    free(t);
    return j;
}

static bool in_array(const cJSON *a, const char *s) {
    const cJSON *e;
    cJSON_ArrayForEach(e, a) if (cJSON_IsString(e) && !strcmp(e->valuestring, s)) return true;
    return false;
}

// ---- running bench ------------------------------------------------------------------------

// Runs BENCH with ARGV (NULL-terminated) under a file-size limit of LIMIT bytes (0: none),
// SIGXFSZ ignored, stdout to /dev/null; its stderr into ERR (malloc'd). Returns the exit status,
// or -1 when it was killed by a signal (the signal is printed).
static int run_bench(char *const argv[], long limit, char **err) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        if (limit > 0) {
            struct rlimit rl;
            getrlimit(RLIMIT_FSIZE, &rl);
            rl.rlim_cur = (rlim_t)limit;
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(125);
            signal(SIGXFSZ, SIG_IGN);  // ignored signals stay ignored across exec: EFBIG
        }
        if (!freopen("/dev/null", "w", stdout)) _exit(125);
        dup2(fd[1], STDERR_FILENO);
        execv(argv[0], argv);
        _exit(126);
    }
    close(fd[1]);
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t k;
    while ((k = read(fd[0], buf + n, cap - n - 1)) > 0 || (k < 0 && errno == EINTR)) {
        if (k < 0) continue;
        n += (size_t)k;
        if (cap - n < 2) buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *err = buf;
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "%s: killed by signal %d\n", argv[0], WTERMSIG(st));
        return -1;
    }
    return WEXITSTATUS(st);
}

static int run_transfer(const char *bench, const char *out, long limit, char **err) {
    char *argv[] = {(char *)bench, "run",      "--device",      "cpu", "--quick",
                    "--suite",     "transfer", "--repetitions", "1",   "--min-time",
                    "0.01",        "--out",    (char *)out,     NULL};
    return run_bench(argv, limit, err);
}

// ---- the checks ---------------------------------------------------------------------------

// Every file in DIR is whole: .json parses, a .csv has whole lines with the header's fields; no
// temp file. Rows and transfer.json's benchmarks are finished ones (FINISHED may be NULL).
static void check_files_whole(const char *dir, const cJSON *finished) {
    DIR *d = opendir(dir);
    CHECK(d != NULL, "%s cannot be opened", dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "report.html") ||
            !strcmp(name, "report.md") || !strcmp(name, "plots"))
            continue;
        CHECK(!strstr(name, ".tmp"), "%s/%s: a temp file left behind", dir, name);
        char *text = read_file(dir, name);
        if (!text) continue;
        if (len > 5 && !strcmp(name + len - 5, ".json")) {
            cJSON *j = parse_json(text);
            CHECK(j != NULL, "%s/%s is not whole JSON (%zu bytes)", dir, name, strlen(text));
            const cJSON *b;
            cJSON_ArrayForEach(b, cJSON_GetObjectItem(j, "benchmarks")) {
                const cJSON *rn = cJSON_GetObjectItem(b, "run_name");
                char id[600];
                if (!cJSON_IsString(rn) || !finished) continue;
                snprintf(id, sizeof id, "transfer/%s", rn->valuestring);
                char *suffix = strstr(id, "/real_time");
                if (!suffix) suffix = strstr(id, "/manual_time");
                if (suffix) *suffix = '\0';
                CHECK(in_array(finished, id), "%s: %s, which status.json has not finished", name,
                      id);
            }
            cJSON_Delete(j);
        } else if (len > 4 && !strcmp(name + len - 4, ".csv")) {
            CHECK(len == 0 || text[strlen(text) - 1] == '\n', "%s/%s: the last line is cut", dir,
                  name);
            int fields = -1, line_no = 0;
            for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
                 line = strtok_r(NULL, "\n", &save)) {
                int n = 1;
                for (char *c = line; *c; c++) n += *c == ',';
                line_no++;
                if (fields < 0) fields = n;
                CHECK(n == fields, "%s/%s line %d: %d fields, the header has %d", dir, name,
                      line_no, n, fields);
            }
        }
        free(text);
    }
    if (d) closedir(d);
}

// status.json: complete false, write_errors naming each of LOST (NULL-terminated) and nothing
// else when EXACT, each with the errno text. Returns the finished list (owned by *st).
static const cJSON *check_status(const char *dir, const char *const *lost, bool exact, cJSON **st) {
    char *text = read_file(dir, "status.json");
    CHECK(text != NULL, "%s/status.json is missing", dir);
    *st = text ? parse_json(text) : NULL;
    free(text);
    CHECK(*st != NULL, "%s/status.json does not parse", dir);
    const cJSON *complete = cJSON_GetObjectItem(*st, "complete");
    CHECK(cJSON_IsFalse(complete), "status.json says complete: %s",
          cJSON_IsTrue(complete) ? "true" : "(not a bool)");
    const cJSON *we = cJSON_GetObjectItem(*st, "write_errors");
    CHECK(cJSON_IsArray(we) && cJSON_GetArraySize(we) > 0, "status.json has no write_errors");
    int named = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, we) {
        const cJSON *file = cJSON_GetObjectItem(e, "file"),
                    *error = cJSON_GetObjectItem(e, "error");
        const cJSON *count = cJSON_GetObjectItem(e, "failures");
        const cJSON *present = cJSON_GetObjectItem(e, "present");
        CHECK(cJSON_IsString(file) && cJSON_IsString(error) && cJSON_IsNumber(count) &&
                  count->valueint >= 1 && cJSON_IsBool(present),
              "a write_errors entry without file, error, failures or present");
        if (!cJSON_IsString(file) || !cJSON_IsString(error)) continue;
        CHECK(strstr(error->valuestring, "File too large") != NULL, "%s: error '%s'",
              file->valuestring, error->valuestring);
        CHECK(cJSON_IsTrue(present) == (file_size(dir, file->valuestring) >= 0),
              "%s: present is %s", file->valuestring, cJSON_IsTrue(present) ? "true" : "false");
        bool wanted = false;
        for (int i = 0; lost[i]; i++) wanted |= !strcmp(lost[i], file->valuestring);
        named += wanted;
        CHECK(wanted || !exact, "write_errors names %s, which could be written", file->valuestring);
    }
    int n_lost = 0;
    while (lost[n_lost]) n_lost++;
    CHECK(named == n_lost, "write_errors names %d of the %d files lost", named, n_lost);
    const cJSON *fin = cJSON_GetObjectItem(*st, "finished");
    CHECK(cJSON_IsArray(fin) && cJSON_GetArraySize(fin) == 70,
          "%d benchmarks finished, want the 70 of transfer --quick", cJSON_GetArraySize(fin));
    return fin;
}

// bench report DIR --no-plots: must not say the run completed, and names LOST's files. With
// NO_CSV_OK, a directory without a whole CSV may be refused (exit 2, "no results").
static void check_report(const char *bench, const char *dir, const char *const *lost,
                         bool no_csv_ok) {
    char *argv[] = {(char *)bench, "report", "--no-plots", (char *)dir, NULL}, *err = NULL;
    int rc = run_bench(argv, 0, &err);
    bool refused = no_csv_ok && rc == 2 && strstr(err, "no results");
    CHECK(rc == 0 || refused, "bench report exit %d: %s", rc, err);
    free(err);
    if (refused) {
        fprintf(stderr, "bench report refused the directory (no whole CSV): nothing said\n");
        return;
    }
    char *md = read_file(dir, "report.md"), *html = read_file(dir, "report.html");
    CHECK(md && html, "report.md or report.html missing");
    CHECK(!md || !strstr(md, "The run completed"), "report.md says the run completed");
    CHECK(!html || !strstr(html, "The run completed"), "report.html says the run completed");
    for (int i = 0; md && lost[i]; i++)
        CHECK(strstr(md, lost[i]) != NULL, "report.md does not name %s", lost[i]);
    free(md);
    free(html);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_diskfull BENCH DIR results|json|status\n");
        return 2;
    }
    const char *bench = argv[1], *dir = argv[2], *mode = argv[3];
    char out[4096], ref[4096], cmd[8300];
    snprintf(out, sizeof out, "%s/run", dir);
    snprintf(ref, sizeof ref, "%s/ref", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return 2;
    char *err = NULL;

    if (!strcmp(mode, "results") || !strcmp(mode, "json")) {
        bool json_only = !strcmp(mode, "json");
        long limit = json_only ? 32 * 1024 : 8 * 1024;
        int rc = run_transfer(bench, out, limit, &err);
        fprintf(stderr, "bench run under a %ld-byte file size limit: exit %d\n", limit, rc);
        CHECK(rc == 1, "exit %d, want 1 (a write failed)", rc);
        CHECK(strstr(err, "transfer.json") && strstr(err, "File too large"),
              "stderr does not name transfer.json and the error:\n%s", err);
        static const char *const lost_all[] = {"transfer.json", "transfer.csv",
                                               "transfer.samples.csv", NULL};
        static const char *const lost_json[] = {"transfer.json", NULL};
        const char *const *lost = json_only ? lost_json : lost_all;
        cJSON *st = NULL;
        const cJSON *fin = check_status(out, lost, true, &st);
        check_files_whole(out, fin);
        if (json_only) {  // the CSVs have every finished benchmark; transfer.json fewer
            char *csv = read_file(out, "transfer.csv");
            const cJSON *id;
            cJSON_ArrayForEach(id, fin) {
                char want[600];
                const char *s = cJSON_IsString(id) ? id->valuestring : "";
                const char *b = strchr(s, '/') ? strchr(s, '/') + 1 : s, *p = strchr(b, '/');
                snprintf(want, sizeof want, "\ntransfer,%.*s,%s,",
                         p ? (int)(p - b) : (int)strlen(b), b, p ? p + 1 : "");
                CHECK(csv && strstr(csv, want), "transfer.csv has no row for %s", s);
            }
            free(csv);
            char *gb = read_file(out, "transfer.json");
            cJSON *j = gb ? parse_json(gb) : NULL;
            CHECK(j != NULL, "transfer.json: no whole snapshot kept");
            int n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "benchmarks"));
            CHECK(n > 0 && n < 70, "transfer.json has %d benchmarks: not an older snapshot", n);
            cJSON_Delete(j);
            free(gb);
        }
        cJSON_Delete(st);
        check_report(bench, out, lost, false);
    } else if (!strcmp(mode, "status")) {
        int rc = run_transfer(bench, ref, 0, &err);
        free(err);
        long c = file_size(ref, "context.json"), s = file_size(ref, "status.json");
        CHECK(rc == 0 && c > 0 && s > c + 256,
              "the run without a limit: exit %d, context.json "
              "%ld bytes, status.json %ld: no limit fits one and not the other",
              rc, c, s);
        if (failures) return 1;
        long limit = c + (s - c) / 2;
        rc = run_transfer(bench, out, limit, &err);
        fprintf(stderr, "bench run under a %ld-byte file size limit: exit %d\n", limit, rc);
        CHECK(rc == 1, "exit %d, want 1 (status.json could not be written)", rc);
        CHECK(strstr(err, "status.json") && strstr(err, "File too large"),
              "stderr does not say status.json could not be written:\n%s", err);
        CHECK(file_size(out, "context.json") > 0, "context.json was not written");
        CHECK(file_size(out, "status.json") < 0, "a status.json larger than the limit exists");
        check_files_whole(out, NULL);
        static const char *const none[] = {NULL};
        check_report(bench, out, none, true);
    } else {
        fprintf(stderr, "test_diskfull: unknown mode %s\n", mode);
        return 2;
    }
    if (failures) fprintf(stderr, "bench run's stderr:\n%s", err ? err : "");
    free(err);
    fprintf(stderr, "%s: %d failure%s\n", mode, failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}

/* test_hostile21_files.c — issue 21's file primitives (harness/fileio.c over core/files.c)
 * against the paths a hostile results directory holds: the bounded reader refuses a FIFO at once
 * (no wait for a writer), a device (a link to /dev/zero), a directory ("is a directory", not
 * "Input/output error") and a regular file over its limit (before allocating it); the atomic
 * writers (bench_write_atomic, tdm_safetensors_save) refuse a target that is a link, a FIFO or a
 * directory and never write through a link planted under their temp file's name; bench_mkdir_p("")
 * fails cleanly (it read past the string: the copy is exactly the string, so ASan sees such a
 * read). An alarm ends the test if anything blocks.
 * usage: test_hostile21_files DIR (made empty first) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/fileio.h"
#include "tandem/tandem.h"

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

static char dir[2048];

static const char *at(const char *name) {
    static char p[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *name, const char *text) {
    FILE *f = fopen(at(name), "w");
    if (f) fputs(text, f), fclose(f);
}

static bool holds(const char *name, const char *text) {
    char *s = bench_read_file(at(name), NULL);
    bool same = s && !strcmp(s, text);
    free(s);
    return same;
}

static bool is_link(const char *name) {
    struct stat sb;
    return lstat(at(name), &sb) == 0 && S_ISLNK(sb.st_mode);
}

// ---- reading --------------------------------------------------------------------------------

static void reads(void) {
    // a FIFO: refused at once (fopen waited for a writer forever)
    CHECK(mkfifo(at("fifo"), 0644) == 0, "mkfifo: %s", strerror(errno));
    errno = 0;
    char *s = bench_read_file(at("fifo"), NULL);
    CHECK(!s && !strcmp(bench_strerror(errno), "not a regular file (a FIFO)"), "FIFO: %s",
          s ? "read" : bench_strerror(errno));
    free(s);
    // /dev/zero through a link: refused, not read until memory runs out
    CHECK(symlink("/dev/zero", at("zero")) == 0, "symlink: %s", strerror(errno));
    s = bench_read_file(at("zero"), NULL);
    CHECK(!s && !strcmp(bench_strerror(errno), "not a regular file (a device)"), "/dev/zero: %s",
          s ? "read" : bench_strerror(errno));
    free(s);
    // a directory: EISDIR, said as such
    s = bench_read_file(dir, NULL);
    CHECK(!s && errno == EISDIR && !strcmp(bench_strerror(errno), "is a directory"),
          "a directory: %s", s ? "read" : bench_strerror(errno));
    free(s);
    // a sparse regular file over the limit: EFBIG before it is read (no 300 MiB allocation)
    int fd = open(at("huge"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)BENCH_READ_MAX + 1) == 0, "huge: %s", strerror(errno));
    if (fd >= 0) close(fd);
    s = bench_read_file(at("huge"), NULL);
    CHECK(!s && errno == EFBIG, "a file over BENCH_READ_MAX: %s", s ? "read" : strerror(errno));
    free(s);
    put("small", "0123456789");
    s = bench_read_file_max(at("small"), 10, NULL);
    CHECK(!s && errno == EFBIG, "10 bytes with max 10: %s", s ? "read" : strerror(errno));
    free(s);
    size_t n = 0;
    s = bench_read_file_max(at("small"), 11, &n);
    CHECK(s && n == 10 && !strcmp(s, "0123456789"), "10 bytes with max 11: %s",
          s ? s : strerror(errno));
    free(s);
    CHECK(!bench_read_file(at("absent"), NULL) && errno == ENOENT, "absent: %s", strerror(errno));
}

// ---- writing --------------------------------------------------------------------------------

static void writes(void) {
    put("victim", "keep");
    // a link to a file: refused, the link stays and its target keeps its content
    CHECK(symlink("victim", at("link.json")) == 0, "symlink: %s", strerror(errno));
    CHECK(bench_write_atomic(at("link.json"), "new", 3) != 0 &&
              !strcmp(bench_strerror(errno), "not a regular file (a symbolic link)"),
          "a link: %s", bench_strerror(errno));
    CHECK(is_link("link.json") && holds("victim", "keep"), "the link or its target changed");
    // a FIFO: refused, still a FIFO
    CHECK(mkfifo(at("fifo.json"), 0644) == 0, "mkfifo: %s", strerror(errno));
    CHECK(bench_write_atomic(at("fifo.json"), "new", 3) != 0 &&
              !strcmp(bench_strerror(errno), "not a regular file (a FIFO)"),
          "a FIFO: %s", bench_strerror(errno));
    struct stat sb;
    CHECK(lstat(at("fifo.json"), &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    // a directory
    CHECK(mkdir(at("dir.json"), 0755) == 0, "mkdir: %s", strerror(errno));
    CHECK(bench_write_atomic(at("dir.json"), "new", 3) != 0 && errno == EISDIR, "a dir: %s",
          bench_strerror(errno));
    // a link planted under the temp file's name: removed, not written through; the write works
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", at("out.json"), (long)getpid());
    CHECK(symlink(at("victim"), tmp) == 0, "symlink: %s", strerror(errno));
    CHECK(bench_write_atomic(at("out.json"), "new", 3) == 0, "out.json: %s", bench_strerror(errno));
    CHECK(holds("out.json", "new") && holds("victim", "keep") && !is_link("out.json"),
          "the write went through the planted temp link");
    CHECK(lstat(tmp, &sb) != 0, "the temp file is left");
    // a regular file is replaced
    CHECK(bench_write_atomic(at("out.json"), "newer", 5) == 0 && holds("out.json", "newer"),
          "replacing a regular file: %s", bench_strerror(errno));
    // bench_check_target says the same up front
    CHECK(bench_check_target(at("link.json")) != 0 && bench_check_target(at("out.json")) == 0 &&
              bench_check_target(at("absent")) == 0,
          "bench_check_target");
    // the safetensors writer (checkpoints, --dump, conform's failing cases): the same refusal
    int64_t shape[1] = {2};
    tdm_tensor *t = tdm_tensor_zeros(1, shape, TDM_DTYPE_F32, TDM_CPU);
    const char *names[] = {"w"};
    const tdm_tensor *ts[] = {t};
    CHECK(symlink("victim", at("link.safetensors")) == 0, "symlink: %s", strerror(errno));
    CHECK(tdm_safetensors_save(at("link.safetensors"), 1, names, ts, 0, NULL) != TDM_OK &&
              strstr(tdm_last_error(), "not a regular file (a symbolic link)"),
          "safetensors to a link: %s", tdm_last_error());
    CHECK(is_link("link.safetensors") && holds("victim", "keep"), "the link or its target changed");
    CHECK(tdm_safetensors_save(at("fifo.json"), 1, names, ts, 0, NULL) != TDM_OK &&
              strstr(tdm_last_error(), "not a regular file (a FIFO)"),
          "safetensors to a FIFO: %s", tdm_last_error());
    CHECK(tdm_safetensors_save(at("w.safetensors"), 1, names, ts, 0, NULL) == TDM_OK,
          "safetensors to a new file: %s", tdm_last_error());
    tdm_tensor_free(t);
}

// ---- directories ----------------------------------------------------------------------------

static void dirs(void) {
    errno = 0;
    CHECK(bench_mkdir_p("") != 0 && errno == ENOENT, "mkdir_p(\"\"): %s", strerror(errno));
    CHECK(bench_mkdir_p(at("a/b/c")) == 0 && bench_mkdir_p(at("a/b/c/")) == 0, "a/b/c: %s",
          strerror(errno));
    struct stat sb;
    CHECK(stat(at("a/b/c"), &sb) == 0 && S_ISDIR(sb.st_mode), "a/b/c is no directory");
    put("file", "x");
    CHECK(bench_mkdir_p(at("file")) != 0 && errno == ENOTDIR, "a file: %s", strerror(errno));
    CHECK(bench_mkdir_p(at("file/sub")) != 0 && errno == ENOTDIR, "under a file: %s",
          strerror(errno));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_hostile21_files DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return 2;
    alarm(60);  // a blocked open (a FIFO) ends the test: SIGALRM
    reads();
    writes();
    dirs();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("test_hostile21_files: every check passed\n");
    return failures ? 1 : 0;
}

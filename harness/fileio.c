/* fileio.c — whole-file reads, atomic writes and finding the source tree's files (fileio.h). */
#include "fileio.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/files_impl.h"

char *bench_read_file(const char *path, size_t *len) {
    return bench_read_file_max(path, BENCH_READ_MAX, len);
}

char *bench_read_file_max(const char *path, size_t max, size_t *len) {
    struct stat sb;
    int fd = tdm_file_open_read(path, &sb);   // a regular file, or a clear errno at once
    if (fd < 0) return NULL;
    if ((uint64_t)sb.st_size >= max) {
        close(fd);
        errno = EFBIG;
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    for (;;) {
        if (cap - n < 65536) {   // st_size + 1 at first: the file is normally read in one go
            size_t want = cap ? cap * 2 : (size_t)sb.st_size + 65536;
            char *p = realloc(buf, want);
            if (!p) {
                err = ENOMEM;
                break;
            }
            buf = p;
            cap = want;
        }
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            err = errno;
            break;
        }
        if (k == 0) break;
        n += (size_t)k;
        if (n >= max) {   // it grew while being read
            err = EFBIG;
            break;
        }
    }
    close(fd);
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

const char *bench_strerror(int err) {
    return tdm_file_strerror(err);
}

int bench_check_target(const char *path) {
    return tdm_file_check_target(path);
}

int bench_open_temp(const char *path, char *tmp, size_t ntmp) {
    return tdm_file_temp_open(path, tmp, ntmp);
}

int bench_commit_temp(const char *tmp, const char *path) {
    return tdm_file_temp_commit(tmp, path);
}

int bench_write_atomic(const char *path, const char *data, size_t n) {
    return tdm_file_write_atomic(path, data, n);
}

int bench_mkdir_p(const char *path) {
    if (!path[0]) {   // "" names no directory (and the loop below starts after the first byte)
        errno = ENOENT;
        return -1;
    }
    char *p = strdup(path);   // exactly the string: a read past its end is a sanitizer report
    if (!p) return -1;
    int rc = 0;
    for (char *s = p + 1; *s && !rc; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) rc = -1;
        *s = '/';
    }
    if (!rc && mkdir(p, 0777) != 0 && errno != EEXIST) rc = -1;
    struct stat sb;
    if (!rc && stat(p, &sb) != 0) rc = -1;
    if (!rc && !S_ISDIR(sb.st_mode)) rc = -1, errno = ENOTDIR;
    int err = errno;
    free(p);
    errno = err;
    return rc;
}

static bool found(bool (*ok)(const char *), const char *path) {
    return ok ? ok(path) : access(path, R_OK) == 0;
}

bool bench_find_source(const char *rel, const char *root_env, bool (*ok)(const char *path), char *out,
                       size_t len) {
    const char *root = root_env ? getenv(root_env) : NULL;
    if (root && *root) return snprintf(out, len, "%s/%s", root, rel) < (int)len && found(ok, out);
    char dir[PATH_MAX];   // the program's directory, "" when /proc/self/exe cannot be read
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    dir[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    const char *installed = strncmp(rel, "suites/", 7) ? rel : rel + 7;
    if (slash && snprintf(out, len, "%s/../share/tandem/%s", dir, installed) < (int)len && found(ok, out))
        return true;
#ifdef TDM_PLOTS_DIR   // <source>/plots, as the bench target is compiled
    if (snprintf(out, len, "%s/../%s", TDM_PLOTS_DIR, rel) < (int)len && found(ok, out)) return true;
#endif
    for (int up = 0; slash && up < 4; up++) {
        if (snprintf(out, len, "%s/%s", dir, rel) < (int)len && found(ok, out)) return true;
        if (!(slash = strrchr(dir, '/')) || slash == dir) break;
        *slash = '\0';
    }
    return false;
}

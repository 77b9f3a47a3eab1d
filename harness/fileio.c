/* fileio.c — whole-file reads, atomic writes and finding the source tree's files (fileio.h). */
#include "fileio.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *bench_read_file(const char *path, size_t *len) { return bench_read_file_max(path, SIZE_MAX, len); }

char *bench_read_file_max(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? cap * 2 : 65536;
            char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = p;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0) break;
        if (n >= max) {
            free(buf);
            fclose(f);
            errno = EFBIG;
            return NULL;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

int bench_write_atomic(const char *path, const char *data, size_t n) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    errno = 0;
    bool ok = fwrite(data, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = ok ? 0 : errno ? errno : EIO;
    if (fclose(f) != 0 && ok) ok = false, err = errno ? errno : EIO;
    if (ok && rename(tmp, path) != 0) ok = false, err = errno;
    if (!ok) {
        unlink(tmp);
        errno = err;
        return -1;
    }
    return 0;
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

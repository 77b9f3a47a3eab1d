/* files.c — opening files to read and replacing files atomically, refusing what is not a regular
 * file (files_impl.h). */
#include "core/files_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *tdm_file_strerror(int err) {
    switch (err) {
        case TDM_EFILE_LINK:
            return "not a regular file (a symbolic link)";
        case TDM_EFILE_FIFO:
            return "not a regular file (a FIFO)";
        case TDM_EFILE_DEVICE:
            return "not a regular file (a device)";
        case TDM_EFILE_SOCKET:
            return "not a regular file (a socket)";
        case EISDIR:
            return "is a directory";
        default:
            return strerror(err);
    }
}

int tdm_file_type_errno(const struct stat *sb) {
    if (S_ISREG(sb->st_mode)) return 0;
    if (S_ISDIR(sb->st_mode)) return EISDIR;
    if (S_ISLNK(sb->st_mode)) return TDM_EFILE_LINK;
    if (S_ISFIFO(sb->st_mode)) return TDM_EFILE_FIFO;
    if (S_ISSOCK(sb->st_mode)) return TDM_EFILE_SOCKET;
    return TDM_EFILE_DEVICE;  // character and block devices
}

int tdm_file_check_target(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return 0;  // a new file
        return -1;
    }
    int err = tdm_file_type_errno(&sb);
    if (!err) return 0;
    errno = err;
    return -1;
}

int tdm_file_open_read(const char *path, struct stat *sb) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    int err = fstat(fd, &st) != 0 ? errno : tdm_file_type_errno(&st);
    if (!err && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) err = errno;
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    if (sb) *sb = st;
    return fd;
}

int tdm_file_temp_open(const char *path, char *tmp, size_t ntmp) {
    if (tdm_file_check_target(path) != 0) return -1;
    if (snprintf(tmp, ntmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)ntmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (int attempt = 0;; attempt++) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST || attempt) return fd;
        // Our temp name is taken (a run of the same pid that died, or something planted): what is
        // there is removed, never written through; a directory stays and the open fails.
        struct stat sb;
        if (lstat(tmp, &sb) != 0 || S_ISDIR(sb.st_mode) || unlink(tmp) != 0) {
            errno = EEXIST;
            return -1;
        }
    }
}

int tdm_file_temp_commit(const char *tmp, const char *path) {
    if (tdm_file_check_target(path) != 0 || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        errno = err;
        return -1;
    }
    return 0;
}

int tdm_file_write_atomic(const char *path, const void *data, size_t n) {
    char tmp[4200];
    int fd = tdm_file_temp_open(path, tmp, sizeof tmp);
    if (fd < 0) return -1;
    int err = 0;
    for (const char *p = data; !err && n > 0;) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            err = k < 0 ? errno : EIO;
        else
            p += k, n -= (size_t)k;
    }
    if (!err && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno ? errno : EIO;
    if (err) {
        unlink(tmp);
        errno = err;
        return -1;
    }
    return tdm_file_temp_commit(tmp, path);
}

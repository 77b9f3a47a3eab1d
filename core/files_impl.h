/* files_impl.h — how tandem opens the files it reads and replaces the files it writes, one copy
 * for core (safetensors, profiler traces) and the harness (harness/fileio.c): a file to read is
 * opened without blocking and must be a regular file (a FIFO cannot hang a reader, a device cannot
 * feed it forever); a file to write is replaced atomically through a temp file created new beside
 * it (O_EXCL|O_NOFOLLOW: nothing planted there is written through), and a target that exists and
 * is not a regular file (a symbolic link, a FIFO, a device, a socket, a directory) is refused. */
#ifndef TANDEM_CORE_FILES_IMPL_H
#define TANDEM_CORE_FILES_IMPL_H

#include <stddef.h>
#include <sys/stat.h>

// errno values of tandem's own for a path that is not a regular file (beyond the system's: only
// tdm_file_strerror names them); a directory is EISDIR.
enum { TDM_EFILE_LINK = 4001, TDM_EFILE_FIFO, TDM_EFILE_DEVICE, TDM_EFILE_SOCKET };

// strerror, but "not a regular file (a FIFO)" etc. for the codes above, "is a directory" for
// EISDIR (never "Input/output error").
const char *tdm_file_strerror(int err);
// The errno for a file of sb's type that is not a regular file (TDM_EFILE_* or EISDIR); 0 for a
// regular file.
int tdm_file_type_errno(const struct stat *sb);
// Whether path may be replaced: 0 when nothing is there or a regular file is (lstat: a link is
// not followed); -1 with errno (EISDIR, TDM_EFILE_*) when something else is.
int tdm_file_check_target(const char *path);
// path opened for reading (O_CLOEXEC), checked to be a regular file before anything is read:
// opened O_NONBLOCK (then cleared), so a FIFO fails at once instead of waiting for a writer. The
// descriptor, sb (when not NULL) its fstat; or -1 with errno (ENOENT, EISDIR, TDM_EFILE_*...).
int tdm_file_open_read(const char *path, struct stat *sb);
// The temp file that will replace path (path.tmp.<pid>, written into tmp), created new and open
// for writing: refused (-1, errno) when path is no regular file (tdm_file_check_target) or the
// temp name is taken by something that is not a regular file. A stale regular temp file of the
// same name is removed first. The descriptor, or -1 with errno.
int tdm_file_temp_open(const char *path, char *tmp, size_t ntmp);
// tmp, written, fsync'd and closed, renamed over path (path checked again first: a link or FIFO
// put there since is refused, not replaced). 0; or -1 with errno, tmp removed and path as it was.
int tdm_file_temp_commit(const char *tmp, const char *path);
// The whole write: data (n bytes) to path through the two calls above, fsync'd. 0 or -1 + errno.
int tdm_file_write_atomic(const char *path, const void *data, size_t n);

#endif

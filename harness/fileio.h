/* fileio.h — the harness's whole-file reads and atomic writes, one copy for every command (and
 * the tests that link harness files): results, reports and plots are never left half-written; and
 * where the source tree's data files (plots, docs, expectations, golden cases) are found. */
#ifndef TANDEM_BENCH_FILEIO_H
#define TANDEM_BENCH_FILEIO_H

#include <stdbool.h>
#include <stddef.h>

/* The whole file, NUL-terminated (*len, when len is not NULL, its length without the NUL); NULL
 * with errno set on failure (ENOENT: not there; EISDIR, or tandem's own codes for a FIFO, a device,
 * a socket: not a regular file, said at once, as no FIFO is waited on; EFBIG: BENCH_READ_MAX bytes
 * or more). bench_strerror(errno) says which. The caller frees it. */
#define BENCH_READ_MAX (256u << 20)   // no results, figures or status file is this big
char *bench_read_file(const char *path, size_t *len);
/* bench_read_file refusing a file of max bytes or more (errno EFBIG): for inputs that are never
 * that big (an expectations file, a status.json), so a wrong path never fills memory. */
char *bench_read_file_max(const char *path, size_t max, size_t *len);
/* strerror for the errno of these functions: "not a regular file (a FIFO)", "is a directory". */
const char *bench_strerror(int err);

/* data (n bytes) to path atomically: a temp file created new in the same directory (nothing
 * planted under its name is written through), fsync, rename. 0; or -1 with errno saying why (the
 * first error met), and path as it was. A path that exists and is not a regular file (a symbolic
 * link, a FIFO, a device, a directory) is refused, never replaced. */
int bench_write_atomic(const char *path, const char *data, size_t n);
/* 0 when path may be written by bench_write_atomic (nothing there, or a regular file); -1 with
 * errno (bench_strerror) when it is refused: for checking output paths before work starts. */
int bench_check_target(const char *path);
/* For a writer of its own (a FILE *): the temp file that will replace path, created new
 * (path.tmp.<pid> into tmp), open for writing; -1 with errno when path is refused (as
 * bench_check_target) or the temp file cannot be made. The caller writes, fsyncs and closes it,
 * then calls bench_commit_temp (or unlinks tmp). */
int bench_open_temp(const char *path, char *tmp, size_t ntmp);
/* tmp (a file written beside path, closed) renamed over path, which is checked again first as
 * bench_check_target does: 0; or -1 with errno, tmp removed and path as it was. */
int bench_commit_temp(const char *tmp, const char *path);
/* mkdir -p: path and its missing parents (mode 0777 less the umask). 0 when path is a directory
 * afterwards; -1 with errno (ENOENT for "", ENOTDIR when it or a parent is not a directory). */
int bench_mkdir_p(const char *path);

/* The path of the source tree's file or directory rel ("docs/CHECK.md", "suites/golden/cases")
 * into out, for a bench run from its build directory or from an install. Candidates, in order:
 * $root_env/rel when root_env names a set variable (and then only that one);
 * <bin>/../share/tandem/rel, with a leading "suites/" dropped (where CMakeLists.txt installs
 * them: an installed bench uses its own files); <source>/rel when the program was compiled with
 * TDM_PLOTS_DIR (<source>/plots); rel beside the program or in one of its three parents (a build
 * directory inside the source tree). The first for which ok(path) holds (ok NULL: the path is
 * readable); false when none does. */
bool bench_find_source(const char *rel, const char *root_env, bool (*ok)(const char *path), char *out,
                       size_t len);

#endif

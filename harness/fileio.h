/* fileio.h — the harness's whole-file reads and atomic writes, one copy for every command (and
 * the tests that link harness files): results, reports and plots are never left half-written; and
 * where the source tree's data files (plots, docs, expectations, golden cases) are found. */
#ifndef TANDEM_BENCH_FILEIO_H
#define TANDEM_BENCH_FILEIO_H

#include <stdbool.h>
#include <stddef.h>

/* The whole file, NUL-terminated (*len, when len is not NULL, its length without the NUL); NULL
 * with errno set on failure (ENOENT: not there). The caller frees it. */
char *bench_read_file(const char *path, size_t *len);
/* bench_read_file refusing a file of max bytes or more (errno EFBIG): for inputs that are never
 * that big (an expectations file, a status.json), so a wrong path never fills memory. */
char *bench_read_file_max(const char *path, size_t max, size_t *len);

/* data (n bytes) to path atomically: a temp file in the same directory, fsync, rename. 0; or -1
 * with errno saying why (the first error met), and path as it was. */
int bench_write_atomic(const char *path, const char *data, size_t n);

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

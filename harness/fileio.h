/* fileio.h — the harness's whole-file reads and atomic writes, one copy for every command (and
 * the tests that link harness files): results, reports and plots are never left half-written. */
#ifndef TANDEM_BENCH_FILEIO_H
#define TANDEM_BENCH_FILEIO_H

#include <stddef.h>

/* The whole file, NUL-terminated (*len, when len is not NULL, its length without the NUL); NULL
 * with errno set on failure (ENOENT: not there). The caller frees it. */
char *bench_read_file(const char *path, size_t *len);

/* data (n bytes) to path atomically: a temp file in the same directory, fsync, rename. 0; or -1
 * with errno saying why (the first error met), and path as it was. */
int bench_write_atomic(const char *path, const char *data, size_t n);

#endif

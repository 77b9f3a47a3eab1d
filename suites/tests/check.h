/* check.h — the tiny assertion macros of tandem's C tests: a failed check prints file, line and
 * the expression, counts, and the test exits 1 at the end (CHECK_DONE). */
#ifndef TANDEM_TEST_CHECK_H
#define TANDEM_TEST_CHECK_H

#include <stdio.h>

static int check_failures;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
            check_failures++;                                                         \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            check_failures++;                                                         \
        }                                                                             \
    } while (0)

#define CHECK_DONE(name)                                                              \
    do {                                                                              \
        printf("%s: %s\n", name, check_failures ? "FAILED" : "ok");                   \
        return check_failures ? 1 : 0;                                                \
    } while (0)

#endif

/* json_strict.h — reading JSON the way every other JSON reader would: files that travel between
 * machines (expectations, figures, status.json, context.json) are refused when two readers could
 * read them differently — a duplicate key (cJSON keeps the first, most readers the last), text
 * after the value, a NUL byte or a "\u0000" escape (which cut a C string short), and, for a file
 * written by hand, bytes that are not UTF-8 — instead of being read one way here and another way
 * there. */
#ifndef TANDEM_BENCH_JSON_STRICT_H
#define TANDEM_BENCH_JSON_STRICT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

// Writes a one-line reason (printf's FMT) into err (len bytes) and returns false: how the readers
// and validators of these files fail ("models[3].hbm_GBps: must be a number"), in one line.
bool bench_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// The first byte of s[0..n) that is not part of well-formed UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF); n when all of it is.
size_t bench_utf8_invalid_at(const char *s, size_t n);

// Parses text (len bytes, NUL-terminated after them) as one JSON value and nothing else. NULL with
// a one-line reason in err ("duplicate key \"hbm_GBps\" in models[3]", "invalid UTF-8 at byte
// 120", "not JSON at byte 7 (near ...)") when it is not strict JSON. utf8: the text must be UTF-8
// too (a file written by hand: the expectations); false for files bench writes, whose strings
// may carry a path's or a child's bytes as they were.
cJSON *bench_json_parse_strict(const char *text, size_t len, bool utf8, char *err, size_t err_len);

// A file written by hand (an expectations file, a baseline): strict JSON and UTF-8, then checked
// by VALID (which names NAME and the field in err and returns false when it is wrong). NULL with
// err ("NAME: why") when either fails.
cJSON *bench_json_parse_valid(const char *text, size_t n, const char *name,
                              bool (*valid)(const cJSON *, const char *, char *, size_t), char *err,
                              size_t len);

// The same from the file at PATH, read whole and refused at MAX bytes or more: NULL with err
// ("PATH: cannot read: why", or bench_json_parse_valid's) when it cannot be read or is not one.
cJSON *bench_json_load_valid(const char *path, size_t max,
                             bool (*valid)(const cJSON *, const char *, char *, size_t), char *err,
                             size_t len);

// A JSON value read as a truthy marker, failing safe: absent, null, false, 0 and the strings
// "false", "0", "no" and "" (any case, blanks around) are false; anything else (true, 1, "TRUE",
// "yes", an object ...) is true. For markers such as "emulated" that must never be missed.
bool bench_json_truthy(const cJSON *v);

// The same for a CSV field.
bool bench_text_truthy(const char *s);

#endif

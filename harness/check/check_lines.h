/* check_lines.h — the check lines every judge writes (check_judge.c, check_sustained_judge.c,
 * check_sdc_judge.c): one line of a GPU's or the host's "checks", its fault code, and NVML's
 * clocks-event reasons by name. The judges depend on this file, never on each other's, so the
 * dependency runs one way: check_judge.c -> the series' and SDC judges -> check_lines.c. */
#ifndef TANDEM_BENCH_CHECK_LINES_H
#define TANDEM_BENCH_CHECK_LINES_H

#include <stddef.h>

#include <cjson/cJSON.h>

// Adds one check line to ARR: measured and expected are numbers (NaN: null) or, when *_text is
// given, strings; ratio NaN is null; the note printf's FMT (NULL: empty).
cJSON *check_line_add(cJSON *arr, const char *check, double measured, const char *measured_text,
                      const char *unit, double expected, const char *expected_text, double ratio,
                      const char *verdict, const char *fmt, ...) __attribute__((format(printf, 10, 11)));
// A FAIL or WARN line gets its fault code and remediation (check_levels.c); REMEDY (may be NULL)
// replaces the code's own (an Xid's). Other verdicts are left as they are. Returns LINE.
cJSON *check_line_coded(cJSON *line, const char *code, const char *remedy);
// One check line (check_line_add's form, the note whole) with its fault code when it is a FAIL or
// WARN (code NULL: none).
cJSON *check_judge_line(cJSON *checks, const char *check, double measured, const char *measured_text,
                        const char *unit, double expected, const char *expected_text, double ratio,
                        const char *verdict, const char *code, const char *note);
// NVML's clocks-event reasons by name ("sw power cap, hw thermal"; bits newer drivers define,
// above the 9 known, as "unknown 0x..."; "none" for 0).
void check_throttle_names(double reasons, char *buf, size_t n);

#endif

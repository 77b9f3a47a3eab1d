/* check_lines.c — the check lines the judges write (check_lines.h): a line, its fault code, and
 * NVML's clocks-event reasons by name. Depends on check_levels.c's fault codes only. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "check_lines.h"
#include "check_sustained.h"

cJSON *check_line_add(cJSON *arr, const char *check, double measured, const char *measured_text,
                      const char *unit, double expected, const char *expected_text, double ratio,
                      const char *verdict, const char *fmt, ...) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "check", check);
    if (measured_text) cJSON_AddStringToObject(c, "measured", measured_text);
    else if (isfinite(measured)) cJSON_AddNumberToObject(c, "measured", measured);
    else cJSON_AddNullToObject(c, "measured");
    if (unit) cJSON_AddStringToObject(c, "unit", unit);
    else cJSON_AddNullToObject(c, "unit");
    if (expected_text) cJSON_AddStringToObject(c, "expected", expected_text);
    else if (isfinite(expected)) cJSON_AddNumberToObject(c, "expected", expected);
    else cJSON_AddNullToObject(c, "expected");
    if (isfinite(ratio)) cJSON_AddNumberToObject(c, "ratio", ratio);
    else cJSON_AddNullToObject(c, "ratio");
    cJSON_AddStringToObject(c, "verdict", verdict);
    char note[600] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(note, sizeof note, fmt, ap);
        va_end(ap);
    }
    cJSON_AddStringToObject(c, "note", note);
    cJSON_AddItemToArray(arr, c);
    return c;
}

cJSON *check_line_coded(cJSON *line, const char *code, const char *remedy) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(line, "verdict"));
    const check_code *c = check_code_of(code);
    if (!v || (strcmp(v, CHECK_FAIL) && strcmp(v, CHECK_WARN)) || !c) return line;
    cJSON_DeleteItemFromObjectCaseSensitive(line, "code");
    cJSON_DeleteItemFromObjectCaseSensitive(line, "remedy");
    cJSON_AddStringToObject(line, "code", c->code);
    cJSON_AddStringToObject(line, "remedy", remedy ? remedy : c->remedy);
    return line;
}

cJSON *check_judge_line(cJSON *checks, const char *check, double measured, const char *measured_text,
                        const char *unit, double expected, const char *expected_text, double ratio,
                        const char *verdict, const char *code, const char *note) {
    cJSON *line = check_line_add(checks, check, measured, measured_text, unit, expected, expected_text,
                                 ratio, verdict, NULL);
    cJSON_ReplaceItemInObjectCaseSensitive(line, "note", cJSON_CreateString(note ? note : ""));
    return code ? check_line_coded(line, code, NULL) : line;
}

// ---- NVML's clocks-event reasons

void check_throttle_names(double r, char *buf, size_t n) {
    static const char *names[] = {"gpu idle",    "applications clocks", "sw power cap",
                                  "hw slowdown", "sync boost",          "sw thermal",
                                  "hw thermal",  "hw power brake",      "display clocks"};
    unsigned long long bits = (unsigned long long)r, unknown = bits & ~CHECK_THROTTLE_KNOWN;
    size_t len = 0;
    buf[0] = '\0';
    if (!bits) snprintf(buf, n, "none");
    for (int b = 0; b < 9 && len < n; b++)
        if (bits & (1ULL << b))
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", names[b]);
    // bits NVML defined after this was written (newer drivers): named by their value, kept
    if (unknown && len < n) snprintf(buf + len, n - len, "%sunknown 0x%llx", len ? ", " : "", unknown);
}

/* json_strict.c — strict JSON for files that travel between machines (json_strict.h): one value,
 * well-formed UTF-8, no NUL, no "\u0000", no key twice in an object; and the fail-safe reading
 * of a marker ("emulated") that must never be missed. */
#include "json_strict.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fileio.h"

bool bench_err(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return false;
}

cJSON *bench_json_parse_valid(const char *text, size_t n, const char *name,
                              bool (*valid)(const cJSON *, const char *, char *, size_t), char *err,
                              size_t len) {
    char why[300];
    cJSON *v = bench_json_parse_strict(text, n, true, why, sizeof why);
    if (!v) {
        bench_err(err, len, "%s: %s", name, why);
        return NULL;
    }
    if (!valid(v, name, err, len)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

cJSON *bench_json_load_valid(const char *path, size_t max,
                             bool (*valid)(const cJSON *, const char *, char *, size_t), char *err,
                             size_t len) {
    size_t n = 0;
    char *text = bench_read_file_max(path, max, &n);
    if (!text) {
        bench_err(err, len, "%s: cannot read: %s", path, bench_strerror(errno));
        return NULL;
    }
    cJSON *v = bench_json_parse_valid(text, n, path, valid, err, len);
    free(text);
    return v;
}

size_t bench_utf8_invalid_at(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;                       // continuation bytes
        unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the first continuation byte
        if (c >= 0xC2 && c <= 0xDF)
            k = 1;
        else if (c == 0xE0)
            k = 2, lo = 0xA0;  // no overlong forms
        else if (c == 0xED)
            k = 2, hi = 0x9F;  // no UTF-16 surrogates
        else if (c >= 0xE1 && c <= 0xEF)
            k = 2;
        else if (c == 0xF0)
            k = 3, lo = 0x90;
        else if (c == 0xF4)
            k = 3, hi = 0x8F;  // nothing above U+10FFFF
        else if (c >= 0xF1 && c <= 0xF3)
            k = 3;
        else
            return i;
        if (i + k >= n) return i;  // truncated at the end
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t j = 2; j <= k; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xBF) return i;
        i += k + 1;
    }
    return n;
}

// ---- duplicate keys ----------------------------------------------------------------------------

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

// "models[3].tflops" for the messages.
static void path_push(char *path, size_t len, const cJSON *child, int index) {
    size_t k = strlen(path);
    if (k >= len - 1) return;
    if (child->string)
        snprintf(path + k, len - k, "%s%.80s", k ? "." : "", child->string);
    else
        snprintf(path + k, len - k, "[%d]", index);
}

// The first object under v (v included) that holds a key twice: true with err said.
static bool has_duplicate(const cJSON *v, char *path, size_t plen, char *err, size_t err_len) {
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return false;
    int n = 0;
    for (const cJSON *c = v->child; c; c = c->next) n++;
    if (cJSON_IsObject(v) && n > 1) {
        const cJSON **keys = malloc((size_t)n * sizeof *keys);
        if (!keys) {
            snprintf(err, err_len, "out of memory");
            return true;
        }
        int k = 0;
        for (const cJSON *c = v->child; c; c = c->next) keys[k++] = c;
        qsort(keys, (size_t)n, sizeof *keys, cmp_key);  // O(n log n): a hostile object is large
        for (int i = 1; i < n; i++)
            if (!strcmp(keys[i - 1]->string, keys[i]->string)) {
                snprintf(err, err_len,
                         "duplicate key \"%.80s\" in %s (JSON readers disagree on "
                         "which one counts)",
                         keys[i]->string, path[0] ? path : "the top object");
                free(keys);
                return true;
            }
        free(keys);
    }
    size_t at = strlen(path);
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
        path_push(path, plen, c, i);
        bool dup = has_duplicate(c, path, plen, err, err_len);
        path[at] = '\0';
        if (dup) return true;
    }
    return false;
}

// The offset of a "\u0000" escape inside a string of the (valid JSON) text; -1 when none.
static long nul_escape_at(const char *t) {
    bool in_string = false;
    for (const char *p = t; *p; p++) {
        if (!in_string) {
            in_string = *p == '"';
            continue;
        }
        if (*p == '"')
            in_string = false;
        else if (*p == '\\') {
            if (p[1] == 'u' && !strncmp(p + 2, "0000", 4)) return (long)(p - t);
            if (p[1]) p++;  // the escaped character
        }
    }
    return -1;
}

cJSON *bench_json_parse_strict(const char *text, size_t len, bool utf8, char *err, size_t err_len) {
    size_t nul = strlen(text);
    if (nul < len) {
        snprintf(err, err_len, "a NUL byte at byte %zu: not a JSON text", nul);
        return NULL;
    }
    size_t bad = utf8 ? bench_utf8_invalid_at(text, len) : len;
    if (bad < len) {
        snprintf(err, err_len, "invalid UTF-8 at byte %zu (JSON text is UTF-8)", bad);
        return NULL;
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, &end, true);
    if (!j) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        char near[24];
        size_t k = 0;
        for (const char *p = text + at; *p && k < 20; p++)  // printable for the message
            near[k++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
        near[k] = '\0';
        while (k && ((unsigned char)near[k - 1] & 0xC0) == 0x80) near[--k] = '\0';  // whole chars
        if (k && (unsigned char)near[k - 1] >= 0xC0) near[--k] = '\0';
        cJSON *loose = cJSON_ParseWithOpts(text, NULL, false);  // one value, then more text?
        snprintf(err, err_len, "not JSON at byte %zu (near \"%s\")%s", at, near,
                 loose ? ": text after the value" : "");
        cJSON_Delete(loose);
        return NULL;
    }
    long z = nul_escape_at(text);
    if (z >= 0) {
        snprintf(err, err_len, "a \"\\u0000\" escape at byte %ld (it cuts the string short)", z);
        cJSON_Delete(j);
        return NULL;
    }
    char path[512] = "";
    if (has_duplicate(j, path, sizeof path, err, err_len)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

// ---- markers ------------------------------------------------------------------------------------

bool bench_text_truthy(const char *s) {
    if (!s) return false;
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) n--;
    if (!n) return false;
    static const char *const no[] = {"false", "0", "no", "null"};
    for (size_t k = 0; k < sizeof no / sizeof *no; k++)
        if (n == strlen(no[k]) && !strncasecmp(s, no[k], n)) return false;
    return true;
}

bool bench_json_truthy(const cJSON *v) {
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return false;
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    if (cJSON_IsString(v)) return bench_text_truthy(v->valuestring);
    return true;
}

/* emulated.c — telling a run on the emulated CUDA device (emulated.h) from its results directory or
 * its env: the one place `bench report`, `plot` and `compare` ask. */
#include "emulated.h"
#include "fileio.h"
#include "json_strict.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// A marker is read failing safe (json_strict.h): true, 1, "TRUE", "yes" all say emulated.
static bool is_true(const cJSON *o, const char *key) {
    return bench_json_truthy(cJSON_GetObjectItemCaseSensitive(o, key));
}

static void say(char *why, size_t len, const char *fmt, const char *a, const char *b) {
    if (why && len) snprintf(why, len, fmt, a, b);
}

bool bench_env_emulated(const cJSON *env) {
    if (!cJSON_IsObject(env)) return false;
    if (is_true(env, "cuda_emulated")) return true;
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(env, "gpus")) if (is_true(g, "emulated"))
        return true;
    return false;
}

bool bench_context_emulated(const cJSON *context) {
    if (!cJSON_IsObject(context)) return false;
    if (is_true(context, "emulated")) return true;
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(context, "device");
    if (!cJSON_IsString(dev) || strncasecmp(dev->valuestring, "cuda", 4) != 0) return false;
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(context, "env");
    if (is_true(env, "cuda_emulated")) return true;  // the build's CUDA is the emulator
    const char *d = dev->valuestring + 4;
    char *end = NULL;
    long n = *d == ':' && isdigit((unsigned char)d[1]) ? strtol(d + 1, &end, 10) : -1;
    if (n < 0 || *end) return bench_env_emulated(env);  // cuda:all, cuda: any GPU emulated
    const cJSON *g;
    int i = 0;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(env, "gpus")) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(g, "index");
        long at = cJSON_IsNumber(idx) ? (long)idx->valuedouble : i;
        if (at == n) return is_true(g, "emulated");
        i++;
    }
    return false;
}

// DIR/NAME parsed: 0 with *out NULL when absent, -1 when unreadable or not a JSON object.
static int load_json(const char *dir, const char *name, cJSON **out, char *why, size_t len) {
    char path[4096];
    *out = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n = 0;
    char *text = bench_read_file(path, &n);
    if (!text) {
        if (errno == ENOENT) return 0;
        say(why, len, "%s: %s", path, bench_strerror(errno));
        return -1;
    }
    // strict: a key twice ("emulated": false, then true) is read one way here, another elsewhere
    char err[300];
    *out = bench_json_parse_strict(text, n, false, err, sizeof err);
    free(text);
    if (!*out) {
        char what[400];
        snprintf(what, sizeof what, "not a JSON object: %s", err);
        say(why, len, "%s: %s", path, what);
        return -1;
    }
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        say(why, len, "%s: %s", path, "not a JSON object");
        return -1;
    }
    return 0;
}

// Field WANT of the CSV line at p (RFC 4180 quotes; up to the line's end) into buf; false when the
// line has fewer fields.
static bool csv_nth(const char *p, int want, char *buf, size_t len) {
    for (int i = 0;; i++) {
        size_t k = 0;
        bool quoted = *p == '"';
        if (quoted) p++;
        for (; *p && (quoted || (*p != ',' && *p != '\n' && *p != '\r')); p++) {
            if (quoted && *p == '"' && p[1] != '"') {
                quoted = false;
                continue;
            }
            if (quoted && *p == '"') p++;   // "" inside quotes
            if (i == want && k + 1 < len) buf[k++] = *p;
        }
        if (i == want) {
            buf[k] = '\0';
            return true;
        }
        if (*p != ',') return false;
        p++;
    }
}

// f without blanks around it, in place.
static char *trim(char *f) {
    while (isspace((unsigned char)*f)) f++;
    size_t n = strlen(f);
    while (n && isspace((unsigned char)f[n - 1])) f[--n] = '\0';
    return f;
}

// A CSV whose `emulated` column (any case) holds a truthy value in some row: true, TRUE, 1, yes.
static bool csv_emulated(const char *text) {
    char f[256];
    int col = -1;
    for (int i = 0; col < 0 && i < 256 && csv_nth(text, i, f, sizeof f); i++)
        if (!strcasecmp(trim(f), "emulated")) col = i;
    if (col < 0) return false;
    for (const char *p = strchr(text, '\n'); p; p = strchr(p, '\n'))
        if (*++p && csv_nth(p, col, f, sizeof f) && bench_text_truthy(f)) return true;
    return false;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcasecmp(s + n - k, suffix);
}

int bench_dir_emulated(const char *dir, char *why, size_t why_len) {
    if (why && why_len) why[0] = '\0';
    cJSON *ctx, *st;
    if (load_json(dir, "context.json", &ctx, why, why_len)) return -1;
    if (load_json(dir, "status.json", &st, why, why_len)) {
        cJSON_Delete(ctx);
        return -1;
    }
    int rc = 0;
    if (bench_context_emulated(ctx)) {
        say(why, why_len, "%s%s", "context.json: ",
            is_true(ctx, "emulated")
                ? "\"emulated\": true"
                : "its env says its device is emulated (cuda_emulated, or env.gpus)");
        rc = 1;
    } else if (is_true(st, "emulated")) {
        say(why, why_len, "%s%s", "status.json: ", "\"emulated\": true");
        rc = 1;
    }
    cJSON_Delete(ctx);
    cJSON_Delete(st);
    DIR *d = rc ? NULL : opendir(dir);
    struct dirent *e;
    while (d && !rc && (e = readdir(d))) {
        // every CSV, hidden ones too: bench compare reads any *.samples.csv
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !ends_with(e->d_name, ".csv"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = bench_read_file(path, NULL);
        if (!text) {
            say(why, why_len, "%s: %s", path, bench_strerror(errno));
            rc = -1;
        } else if (csv_emulated(text)) {
            say(why, why_len, "%s%s", e->d_name, ": column emulated = true");
            rc = 1;
        }
        free(text);
    }
    if (d) closedir(d);
    return rc;
}

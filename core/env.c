/* env.c — strict parsing of the numbers and switches tandem reads from the environment and from
 * files' metadata (env_impl.h says what is accepted and what a malformed value does). */
#include <stdio.h>
#include <stdlib.h>

#include "core/env_impl.h"

bool tdm_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || *s < '0' || *s > '9') return false;  // no sign, no space, not empty
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return false;  // overflow
        v = v * 10 + d;
    }
    if (*s || lo < 0 || v < (uint64_t)lo || v > (uint64_t)(hi < 0 ? 0 : hi)) return false;
    *out = (int64_t)v;
    return true;
}

int64_t tdm_env_i64(const char *name, int64_t lo, int64_t hi, int64_t def) {
    const char *v = getenv(name);
    int64_t x;
    if (!v) return def;
    if (tdm_parse_i64(v, lo, hi, &x)) return x;
    fprintf(stderr, "tandem: ignoring %s=%s: not a whole number from %lld to %lld; using %lld\n",
            name, v, (long long)lo, (long long)hi, (long long)def);
    return def;
}

bool tdm_env_flag(const char *name, bool def) {
    const char *v = getenv(name);
    if (!v) return def;
    if (v[0] == '1' && !v[1]) return true;
    if (v[0] == '0' && !v[1]) return false;
    fprintf(stderr, "tandem: ignoring %s=%s: expected 0 or 1; using %d\n", name, v, (int)def);
    return def;
}

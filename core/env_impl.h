/* env_impl.h — strict parsing of numbers and switches that tandem reads from the environment
 * (TANDEM_*) and from files' metadata, one copy for core, the CUDA backend and the harness (the
 * emulated device has its C++ twin in suites/emu/runtime.cc). A number is decimal digits only:
 * no sign, no spaces, no suffix, nothing after it ("12abc", "", " 3", "+3", "0x10" are not
 * numbers), in the range the caller gives (an overflow is out of range). A switch is 0 or 1.
 * A malformed environment value is ignored with one line on stderr naming the variable, what it
 * holds, what is expected and the value used instead (the default): a library does not exit the
 * program it is part of, and the default is always a safe one (docs/ARCHITECTURE.md). */
#ifndef TANDEM_CORE_ENV_IMPL_H
#define TANDEM_CORE_ENV_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// s as a whole number from lo to hi (lo >= 0); false when it is anything else.
bool tdm_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);

// The environment variable NAME as a number from lo to hi: def when unset; def, with a line on
// stderr, when set to anything else.
int64_t tdm_env_i64(const char *name, int64_t lo, int64_t hi, int64_t def);

// NAME as a switch: def when unset; "1" true, "0" false; def, with a line on stderr, otherwise.
bool tdm_env_flag(const char *name, bool def);

#ifdef __cplusplus
}
#endif

#endif

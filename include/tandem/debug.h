/* debug.h — core's debug mode: poisoned allocations and guard regions around every storage.
 * Both are off by default and cost one branch per allocation when off. `bench conform` turns both
 * on, so that an element an op fails to write reads NaN and a write past a tensor's end is seen. */
#ifndef TANDEM_DEBUG_H
#define TANDEM_DEBUG_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Poison: every tensor tdm_tensor_empty creates is filled, through its backend, with NaN (floating
// dtypes) or 0x5A bytes (integer dtypes). tdm_tensor_zeros / from_host / rand then overwrite it.
void tdm_debug_set_poison(bool on);
bool tdm_debug_poison(void);

// Guards: each storage allocated while on has TDM_DEBUG_GUARD_BYTES of a known pattern before and
// after its data; they are copied back to the host and checked when the storage is freed. A damaged
// guard counts one violation and records a message naming the tensor's shape and dtype.
#define TDM_DEBUG_GUARD_BYTES 256
void tdm_debug_set_guards(bool on);
bool tdm_debug_guards(void);
int64_t tdm_debug_guard_violations(void);
const char *tdm_debug_last_violation(void);   // "" when none

#ifdef __cplusplus
}
#endif

#endif

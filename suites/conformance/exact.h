/* exact.h — bench conform's checks of the backend slots that are not ops of the case format:
 * cast between every pair of dtypes, the random fills (rand, randn: Philox streams, defined
 * element by element) and the grad scaler's amp_unscale_check. Each must reproduce the CPU
 * reference bit for bit (randn in f64 within 4 ulp: the device's log/cos are not glibc's). */
#ifndef TANDEM_EXACT_CHECKS_H
#define TANDEM_EXACT_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#include "tandem/tandem.h"

const char *tdm_exact_ops(void);   // "cast rand randn amp_unscale"
bool tdm_exact_has(const char *op);

// Runs the checks of `op` on dev (seeded); prints one line per check (PASS lines unless quiet).
// *n_pass/*n_fail/*n_err are incremented.
void tdm_exact_check(const char *op, tdm_device dev, uint64_t seed, bool quiet, int *n_pass,
                     int *n_fail, int *n_err);

#endif

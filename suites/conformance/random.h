/* random.h — random conformance cases built in memory (bench conform): a generator per op draws
 * shapes (sizes 1, odd primes, values just past block widths such as 129 and 257), attrs valid for
 * the op and inputs from tandem's counter-based generator; the expected values come from the CPU
 * reference run on the same inputs converted to f64. */
#ifndef TANDEM_RANDOM_CASE_H
#define TANDEM_RANDOM_CASE_H

#include "case.h"

// The ops with a generator, space separated, in the op table's order.
const char *tdm_random_ops(void);
bool tdm_random_has(const char *op);

// Case `index` of `op` in dtype `dt` (f32, f16, bf16, f64), from (seed, index): inputs (on the
// cpu, in dt; integer inputs as I64 in range), attrs, grad_output (ops with a backward), and the
// expected outputs and gradients in F64. NULL + error on failure.
tdm_case *tdm_random_case(const char *op, tdm_dtype dt, uint64_t seed, int64_t index);

// Writes a case as a replayable case file (docs/CASE_FORMAT.md) with "seed" in its metadata.
tdm_status tdm_random_case_save(const tdm_case *c, const char *path, uint64_t seed, int64_t index);

#endif

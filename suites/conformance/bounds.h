/* bounds.h — the rounding-error bound of every op's outputs and gradients
 * (docs/CONFORMANCE.md derives each one). */
#ifndef TANDEM_BOUNDS_H
#define TANDEM_BOUNDS_H

#include "case.h"

// bound[i] for element i of expected output k (grad: grad_input k) of case c run on dev.
tdm_status tdm_case_bounds(const tdm_case *c, bool grad, int k, tdm_device dev, double *bound);

#endif

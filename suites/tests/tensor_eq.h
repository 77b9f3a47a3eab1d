/* tensor_eq.h — bit-for-bit tensor comparisons for the C tests that check one computation against
 * another that must agree exactly (a layout against its permutation, a form against its rows). */
#ifndef TANDEM_TEST_TENSOR_EQ_H
#define TANDEM_TEST_TENSOR_EQ_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tandem/tandem.h"

// Same dtype, same number of elements and the same bytes in row-major order (shapes may differ).
static inline bool tensors_same_bytes(const tdm_tensor *a, const tdm_tensor *b) {
    if (!a || !b || tdm_tensor_dtype(a) != tdm_tensor_dtype(b) ||
        tdm_tensor_numel(a) != tdm_tensor_numel(b))
        return false;
    size_t n = tdm_tensor_nbytes(a);
    char *ha = malloc(n + 1), *hb = malloc(n + 1);
    bool same = ha && hb && tdm_tensor_to_host(a, ha, n) == TDM_OK &&
                tdm_tensor_to_host(b, hb, n) == TDM_OK && memcmp(ha, hb, n) == 0;
    free(ha);
    free(hb);
    return same;
}

// The same shape as well.
static inline bool tensors_identical(const tdm_tensor *a, const tdm_tensor *b) {
    if (!a || !b || tdm_tensor_ndim(a) != tdm_tensor_ndim(b)) return false;
    for (int i = 0; i < tdm_tensor_ndim(a); i++)
        if (tdm_tensor_shape(a)[i] != tdm_tensor_shape(b)[i]) return false;
    return tensors_same_bytes(a, b);
}

#endif

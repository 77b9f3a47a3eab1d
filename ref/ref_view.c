/* ref_view.c — the reference's strided copy, what the views of core/ops_view.c (transpose,
 * narrow, split, cat, stack) and narrow's backward are made of: elements moved as bytes, never
 * converted, so every dtype is copied exactly. */
#include <string.h>

#include "ref/ref.h"

// For every coordinate c of shape (ndim dims):
//     dst[dst_off + c . dst_stride] = src[src_off + c . src_stride]
// (offsets and strides in elements of the one dtype). The coordinate runs like an odometer,
// the last dim fastest.
tdm_status ref_copy_strided(tdm_tensor *dst, int64_t dst_off, const int64_t *dst_stride,
                            const tdm_tensor *src, int64_t src_off, const int64_t *src_stride,
                            int ndim, const int64_t *shape) {
    const size_t es = tdm_dtype_size(dst->dtype);
    unsigned char *D = tdm_data(dst);
    const unsigned char *S = tdm_data_c(src);
    int64_t c[TDM_MAX_DIMS] = {0}, n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t at_d = dst_off, at_s = src_off;
        for (int d = 0; d < ndim; d++) {
            at_d += c[d] * dst_stride[d];
            at_s += c[d] * src_stride[d];
        }
        memcpy(D + (size_t)at_d * es, S + (size_t)at_s * es, es);
        for (int d = ndim - 1; d >= 0 && ++c[d] == shape[d]; d--) c[d] = 0;  // next coordinate
    }
    return TDM_OK;
}

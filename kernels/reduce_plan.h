/* reduce_plan.h — how the CUDA backend's reductions are launched: how many splits of the reduced
 * range, how many blocks of how many threads. Plain C (no CUDA headers), built into every library
 * so that the plans are tested on the CPU (suites/tests/test_reduce_plan.c): a reduction whose
 * outputs are few (a bias gradient over 64 channels, batch-norm statistics) splits its reduced
 * range until the device is full, and a finish kernel adds each output's splits in order
 * (deterministic). Two kernel shapes (kernels/k_reduce.cu, kernels/k_norm.cu):
 *   rows     the reduced elements of an output are contiguous (innermost): a warp per
 *            (output, split), 256-thread blocks;
 *   columns  outputs are contiguous (innermost kept): (32 x 8) blocks, 32 adjacent outputs by 8
 *            rows of a split; gridDim.y = splits.
 * And the width of the kernels' index arithmetic: 32-bit with precomputed dividers when every
 * index fits, which is every tensor under 2^31 elements (kernels/int_divider.h). */
#ifndef TANDEM_KERNELS_REDUCE_PLAN_H
#define TANDEM_KERNELS_REDUCE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t splits;   // of each output's reduced range (1: no finish kernel)
    int64_t blocks;   // rows: 1-D grid of 256-thread blocks; columns: gridDim.x (x splits in y)
    int64_t total_blocks;   // blocks of the partial kernel in all
    bool index32;   // nout * nred <= INT32_MAX: 32-bit indices, division by multiplication
                    // (kernels/int_divider.h); else (or TANDEM_CUDA_INDEX64=1) 64-bit division
} tdm_reduce_plan;

// Rows: a split keeps >= 256 terms (8 per lane); the target is 64 resident warps per SM.
// Columns: a split needs >= 64 rows; the target is 8 resident (32 x 8) blocks per SM.
enum { TDM_REDUCE_ROW_MIN = 256, TDM_REDUCE_COL_MIN = 64, TDM_REDUCE_MAX_Y = 65535 };

// nout outputs of nred terms each on a device of sm_count SMs (2048 resident threads per SM).
tdm_reduce_plan tdm_reduce_plan_make(int64_t nout, int64_t nred, bool rows, int sm_count);

#ifdef __cplusplus
}
#endif
#endif

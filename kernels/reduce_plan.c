/* reduce_plan.c — launch plans of the CUDA backend's reductions (reduce_plan.h): split the
 * reduced range while the outputs alone leave the device's SMs idle. */
#include "kernels/reduce_plan.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

tdm_reduce_plan tdm_reduce_plan_make(int64_t nout, int64_t nred, bool rows, int sm_count) {
    const int64_t sm = sm_count > 0 ? sm_count : 1;
    tdm_reduce_plan p = {1, 1, 1};
    if (nout <= 0) return p;
    if (rows) {
        const int64_t target = sm * 64;   // resident warps (2048 threads per SM)
        if (nout < target && nred > 2 * TDM_REDUCE_ROW_MIN) {
            p.splits = ceil_div(target, nout);
            const int64_t most = nred / TDM_REDUCE_ROW_MIN;   // every split >= the minimum
            if (p.splits > most) p.splits = most;
        }
        const int64_t need = ceil_div(nout * p.splits, 8), full = sm * 8;   // 8 warps a block
        p.blocks = need < full ? need : full;   // a grid-stride loop over the tasks
        p.total_blocks = p.blocks;
    } else {
        const int64_t bx = ceil_div(nout, 32), target = sm * 8;   // resident (32 x 8) blocks
        if (bx < target && nred > TDM_REDUCE_COL_MIN) {
            p.splits = ceil_div(target, bx);
            const int64_t most = nred / TDM_REDUCE_COL_MIN;
            if (p.splits > most) p.splits = most;
            if (p.splits > TDM_REDUCE_MAX_Y) p.splits = TDM_REDUCE_MAX_Y;
        }
        p.blocks = bx;
        p.total_blocks = bx * p.splits;
    }
    return p;
}

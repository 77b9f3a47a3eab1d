/* reduce_plan.c — launch plans of the CUDA backend's reductions (reduce_plan.h): split the
 * reduced range while the outputs alone leave the device's SMs idle, and pick the width of the
 * kernels' index arithmetic. */
#include "kernels/reduce_plan.h"

#include "core/env_impl.h"
#include "kernels/int_divider.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// TANDEM_CUDA_INDEX64=1: every launch takes the 64-bit index path. A test switch: the emulated
// device cannot hold the 2^31 elements that choose that path otherwise (gpu.golden.cuda0.index64).
static bool index64_forced(void) {
    static int forced = -1;   // not read yet (threads racing here compute the same value)
    int f = __atomic_load_n(&forced, __ATOMIC_RELAXED);
    if (f < 0) {
        f = tdm_env_flag("TANDEM_CUDA_INDEX64", false);
        __atomic_store_n(&forced, f, __ATOMIC_RELAXED);
    }
    return f != 0;
}

tdm_reduce_plan tdm_reduce_plan_make(int64_t nout, int64_t nred, bool rows, int sm_count) {
    const int64_t sm = sm_count > 0 ? sm_count : 1;
    tdm_reduce_plan p = {1, 1, 1, true};
    if (nout <= 0) return p;
    p.index32 = !index64_forced() && nout <= TDM_INDEX32_MAX &&
                nred <= TDM_INDEX32_MAX &&   // (then no overflow below)
                tdm_index32_fits(nout * (nred > 0 ? nred : 1));
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

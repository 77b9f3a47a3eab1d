/* test_reduce_plan.c — the CUDA backend's reduction launch plans (kernels/reduce_plan.h) on the
 * CPU: the shapes issue 14 names — a conv bias gradient over O = 64 channels of 32x56x56
 * positions in both layouts, BatchNorm2d statistics of 64 channels, BatchNorm1d over (N, 64), and
 * the smaller late-ResNet ones — launch at least two blocks per SM of an A100 (108 SMs) and an
 * H100 (132 SMs), and every split keeps enough terms to be worth its partial sum. Before the
 * split scheme, these were one block per channel (64 blocks: 0.5 per SM) or ceil(O/32) = 2. */
#include <stdio.h>

#include "check.h"
#include "kernels/reduce_plan.h"

typedef struct {
    const char *what;
    long long nout, nred;
    bool rows;
} shape;

int main(void) {
    const shape shapes[] = {
        {"conv bias grad NCHW, O=64 over 32x56x56", 64, 32LL * 56 * 56, true},
        {"conv bias grad NHWC, O=64 over 32x56x56", 64, 32LL * 56 * 56, false},
        {"batch_norm2d stats, C=64 over 32x56x56", 64, 32LL * 56 * 56, true},
        {"batch_norm1d stats, C=64 over N=100352", 64, 100352, false},
        {"conv bias grad NCHW, O=512 over 32x7x7", 512, 32LL * 7 * 7, true},
        {"conv bias grad NHWC, O=512 over 32x7x7", 512, 32LL * 7 * 7, false},
        {"linear bias grad, O=1000 over 4096 rows", 1000, 4096, false},
    };
    const int sms[] = {108, 132};   // A100, H100 SXM5
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *s = &shapes[i];
        for (int k = 0; k < 2; k++) {
            const tdm_reduce_plan p = tdm_reduce_plan_make(s->nout, s->nred, s->rows, sms[k]);
            const long long per_split = (s->nred + p.splits - 1) / p.splits;
            printf("%-42s %3d SMs: %s, %lld splits of <= %lld terms, %lld blocks (%.1f per SM)\n",
                   s->what, sms[k], s->rows ? "rows" : "columns", (long long)p.splits, per_split,
                   (long long)p.total_blocks, (double)p.total_blocks / sms[k]);
            CHECK_MSG(p.total_blocks >= 2LL * sms[k], "%s on %d SMs: %lld blocks", s->what,
                      sms[k], (long long)p.total_blocks);
            CHECK_MSG(per_split >= (s->rows ? TDM_REDUCE_ROW_MIN : TDM_REDUCE_COL_MIN) ||
                          p.splits == 1,
                      "%s: splits of %lld terms", s->what, per_split);
            // the grid-stride rows kernel never launches more blocks than are resident
            if (s->rows) CHECK(p.blocks <= 8LL * sms[k]);
        }
    }
    // a reduction with outputs enough to fill the device is not split
    tdm_reduce_plan big = tdm_reduce_plan_make(1 << 20, 4096, true, 108);
    CHECK(big.splits == 1);
    big = tdm_reduce_plan_make(1 << 20, 4096, false, 108);
    CHECK(big.splits == 1 && big.blocks == (1 << 20) / 32);
    // nothing to reduce: one split; no outputs: a harmless plan
    CHECK(tdm_reduce_plan_make(64, 0, true, 108).splits == 1);
    CHECK(tdm_reduce_plan_make(0, 100, false, 108).total_blocks == 1);
    CHECK_DONE("unit.reduce_plan");
}

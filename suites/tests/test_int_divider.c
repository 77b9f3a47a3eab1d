/* test_int_divider.c — the 32-bit index arithmetic of the CUDA backend's reductions and batch
 * norm (kernels/int_divider.h) on the CPU, against plain 64-bit division: tdm_divider_div/_mod for
 * every n below 2^14 by every divisor below 2^11, near the top of the range (n and divisors near
 * 2^31 - 1, powers of two and their neighbours, divisor 1), at multiples q*d - 1, q*d, q*d + 1, and
 * 2,000,000 random pairs; tdm_index_offset32 (a flat index to its offset over up to 6 strided
 * dims) against tdm_index_offset64 and an independent digit-by-place-value computation, for
 * random shapes of up to 2^31 - 1 elements, the first and last index of each and random ones;
 * and which launches take the 32-bit path (tdm_index32_fits, tdm_reduce_plan's index32). */
#include <stdio.h>

#include "check.h"
#include "kernels/int_divider.h"
#include "kernels/reduce_plan.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {   // xorshift64*
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}
static uint32_t below(uint64_t n) { return (uint32_t)(next_u64() % n); }   // n <= 2^31

static long long bad_div;   // counted, the first few printed
static void check_div(uint32_t n, uint32_t d) {
    const tdm_divider v = tdm_divider_make(d);
    const uint32_t q = tdm_divider_div(v, n), r = tdm_divider_mod(v, n);
    if (q == n / d && r == n % d) return;
    if (bad_div++ < 10)
        printf("FAIL %u / %u: %u rem %u, want %u rem %u (magic %u, shift %u)\n", n, d, q, r, n / d,
               n % d, v.magic, v.shift);
}

// Offsets: an independent oracle (digit d = (idx / place[d]) % size[d], place[d] the product of
// the inner sizes) against both forms of the header.
static long long bad_off;
static void check_offset(int nd, const int64_t *size, const int64_t *stride, int64_t idx) {
    tdm_divider div[6];
    int64_t want = 0, place = 1;
    for (int d = nd - 1; d >= 0; d--) {
        div[d] = tdm_divider_make(size[d]);
        want += (idx / place) % size[d] * stride[d];
        place *= size[d];
    }
    const int64_t o64 = tdm_index_offset64(nd, size, stride, idx);
    const uint32_t o32 = tdm_index_offset32(nd, div, stride, (uint32_t)idx);
    if (o64 == want && (int64_t)o32 == want) return;
    if (bad_off++ < 10) {
        printf("FAIL offset of %lld over %d dims (", (long long)idx, nd);
        for (int d = 0; d < nd; d++) printf("%s%lld:%lld", d ? " " : "", (long long)size[d],
                                           (long long)stride[d]);
        printf("): 32-bit %u, 64-bit %lld, want %lld\n", o32, (long long)o64, (long long)want);
    }
}

// A random row-major tensor of 2..6 dims and fewer than 2^bits elements (bits <= 31); `size` /
// `stride` get the dims of one kind (kept or reduced: every other dim, as kernels/k_reduce.cu's
// canonical layouts alternate, so strides skip the dims of the other kind), or all of them.
static int random_layout(int64_t *size, int64_t *stride, int64_t *count, int bits) {
    int64_t shape[6], numel;
    const int nd = 2 + (int)below(5);
    do {
        int b[6] = {0, 0, 0, 0, 0, 0};
        for (int k = 0; k < bits; k++) b[below((uint64_t)nd)]++;   // the bits among the dims
        numel = 1;
        for (int d = 0; d < nd; d++) {
            const int64_t lo = b[d] ? (int64_t)1 << (b[d] - 1) : 1;
            shape[d] = lo + (int64_t)below((uint64_t)lo);            // [2^(b-1), 2^b)
            if (below(4) == 0) shape[d] = lo | 1;                    // odd, at a power of 2
            numel *= shape[d];
        }
    } while (numel > TDM_INDEX32_MAX);
    int64_t strides[6], st = 1;
    for (int d = nd - 1; d >= 0; d--) {
        strides[d] = st;
        st *= shape[d];
    }
    const int mode = (int)below(3);   // 0, 1: every other dim from dim 0 / 1; 2: all
    int n = 0;
    *count = 1;
    for (int d = mode == 1; d < nd; d += mode == 2 ? 1 : 2) {
        size[n] = shape[d];
        stride[n] = strides[d];
        *count *= shape[d];
        n++;
    }
    return n;
}

int main(void) {
    // exhaustive: every n < 2^14 by every divisor < 2^11
    for (uint32_t d = 1; d < (1u << 11); d++)
        for (uint32_t n = 0; n < (1u << 14); n++) check_div(n, d);
    // the top of the range, and edges around powers of two
    const uint32_t top = TDM_INDEX32_MAX;
    uint32_t divisors[200];
    int nd = 0;
    divisors[nd++] = 1;
    divisors[nd++] = top;
    divisors[nd++] = top - 1;
    divisors[nd++] = top / 2;
    divisors[nd++] = top / 3;
    for (int b = 1; b < 31; b++) {
        divisors[nd++] = 1u << b;
        divisors[nd++] = (1u << b) - 1;
        divisors[nd++] = (1u << b) + 1;
    }
    for (int i = 0; i < 60; i++) divisors[nd++] = below(top) | 1u;   // random odd divisors
    for (int i = 0; i < nd; i++) {
        const uint32_t d = divisors[i];
        for (uint32_t k = 0; k < 4096; k++) {
            check_div(top - k, d);
            check_div(k, d);
        }
        for (int k = 0; k < 2000; k++) {   // around multiples of d
            const uint64_t q = below((uint64_t)top / d + 1);
            const uint64_t m = q * d;
            if (m >= 1) check_div((uint32_t)(m - 1), d);
            if (m <= top) check_div((uint32_t)m, d);
            if (m + 1 <= top) check_div((uint32_t)(m + 1), d);
        }
    }
    for (int i = 0; i < 2000000; i++) {   // random pairs, divisors of every magnitude
        const uint32_t d = 1 + below((uint64_t)1 << (1 + below(31)));
        check_div(below((uint64_t)top + 1), d <= top ? d : top);
    }
    CHECK_MSG(bad_div == 0, "%lld quotients or remainders differ from plain division", bad_div);

    // offsets over random layouts, up to 2^31 - 1 elements
    for (int i = 0; i < 20000; i++) {   // half of them 2^24 elements and more
        int64_t size[6], stride[6], count;
        const int bits = below(2) ? 24 + (int)below(8) : 1 + (int)below(31);
        const int n = random_layout(size, stride, &count, bits);
        check_offset(n, size, stride, 0);
        check_offset(n, size, stride, count - 1);
        for (int k = 0; k < 50; k++) check_offset(n, size, stride, (int64_t)below((uint64_t)count));
    }
    // a batch norm's positions, (N, S) with strides (C*S, 1): the largest 32-bit shape
    {
        const int64_t size[2] = {32768, 65535}, stride[2] = {65535, 1};   // C = 1: 2^31 - 2^15
        for (int k = 0; k < 100000; k++)
            check_offset(2, size, stride, (int64_t)below((uint64_t)size[0] * size[1]));
        check_offset(2, size, stride, size[0] * size[1] - 1);
    }
    CHECK_MSG(bad_off == 0, "%lld offsets differ", bad_off);

    // which launches are 32-bit
    CHECK(tdm_index32_fits(0) && tdm_index32_fits(TDM_INDEX32_MAX));
    CHECK(!tdm_index32_fits((int64_t)TDM_INDEX32_MAX + 1) && !tdm_index32_fits(-1));
    CHECK(tdm_reduce_plan_make(64, 32LL * 56 * 56, true, 108).index32);
    CHECK(tdm_reduce_plan_make(1, TDM_INDEX32_MAX, true, 108).index32);
    CHECK(!tdm_reduce_plan_make(2, (1LL << 30) + 1, true, 108).index32);     // 2^31 + 2 elements
    CHECK(!tdm_reduce_plan_make(1LL << 31, 1, false, 108).index32);
    CHECK(!tdm_reduce_plan_make(3, 1LL << 40, true, 108).index32);           // no overflow
    CHECK(tdm_reduce_plan_make(1000, 0, false, 108).index32);                // empty sums
    CHECK_DONE("unit.int_divider");
}

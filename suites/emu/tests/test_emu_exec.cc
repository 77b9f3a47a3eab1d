/* test_emu_exec.cc — the emulator's kernel execution (exec.cc, cuda_emu.h) against CUDA's
 * semantics, with kernels written here and launched through TDM_LAUNCH: thread and block
 * coordinates, barriers and warp intrinsics (shuffle lanes computed from CUDA's documented
 * rules, independently of exec.cc's PTX-style computation), the three thread orders, a missing
 * __syncthreads making a block reduction wrong, shared memory that is garbage at every block's
 * start (a planted read before the first write), atomics of every type across blocks running on
 * several OS threads, argument conversion at the launch, and the reports a GPU's failures get
 * (barrier divergence, mismatched warp masks, __trap, bad launch configurations): each of those
 * runs in a child process (this program with --case NAME) whose stderr is checked, so a hang is
 * a timeout and the sticky error does not leak into the other checks.
 *
 * Exit 0: all passed. Built with cuda_emu.h force-included (suites/emu/CMakeLists.txt).
 * --bench prints the cost of blocks with and without barriers. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "child_case.h"
#include "emu_check.h"

static void sync_ok(const char *what) {
    const cudaError_t e = cudaDeviceSynchronize();
    CHECK(e == cudaSuccess, "%s: cudaDeviceSynchronize gave %d (%s)", what, (int)e,
          cudaGetErrorString(e));
    const cudaError_t l = cudaGetLastError();
    CHECK(l == cudaSuccess, "%s: cudaGetLastError gave %d (%s)", what, (int)l,
          cudaGetErrorString(l));
}

// ---- coordinates --------------------------------------------------------------------------------

// 12 values per thread: threadIdx, blockIdx, blockDim, gridDim.
__global__ void k_coords(unsigned *out) {
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned *o = out + ((size_t)b * blockDim.x * blockDim.y * blockDim.z + t) * 12;
    const unsigned v[12] = {threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x,
                            blockIdx.y,  blockIdx.z,  blockDim.x,  blockDim.y,
                            blockDim.z,  gridDim.x,   gridDim.y,   gridDim.z};
    for (int i = 0; i < 12; i++) o[i] = v[i];
}

static void check_coords(dim3 g, dim3 b, const std::vector<unsigned> &out, const char *what) {
    size_t bad = 0;
    for (unsigned bz = 0; bz < g.z; bz++)
        for (unsigned by = 0; by < g.y; by++)
            for (unsigned bx = 0; bx < g.x; bx++)
                for (unsigned tz = 0; tz < b.z; tz++)
                    for (unsigned ty = 0; ty < b.y; ty++)
                        for (unsigned tx = 0; tx < b.x; tx++) {
                            const size_t blk = bx + g.x * (by + (size_t)g.y * bz);
                            const size_t thr = tx + b.x * (ty + (size_t)b.y * tz);
                            const unsigned *o = &out[(blk * b.x * b.y * b.z + thr) * 12];
                            const unsigned want[12] = {tx,  ty,  tz,  bx,  by,  bz,
                                                       b.x, b.y, b.z, g.x, g.y, g.z};
                            if (memcmp(o, want, sizeof want) != 0) bad++;
                        }
    CHECK(bad == 0, "%s: %zu threads saw wrong coordinates", what, bad);
}

static void test_coords() {
    {  // 1-D, int arguments
        const int g = 7, b = 33;
        std::vector<unsigned> out((size_t)g * b * 12, 0xdead);
        TDM_LAUNCH(g, b, 0, 0, k_coords)(out.data());
        sync_ok("coords 1-D");
        check_coords(dim3(g), dim3(b), out, "1-D grid 7 x block 33");
    }
    {  // 2-D block, unsigned grid
        const unsigned g = 3;
        const dim3 b(5, 4);
        std::vector<unsigned> out((size_t)g * 20 * 12, 0xdead);
        TDM_LAUNCH(g, b, 0, 0, k_coords)(out.data());
        sync_ok("coords 2-D");
        check_coords(dim3(g), b, out, "grid 3u x block (5,4)");
    }
    for (tdm_emu::thread_order o : all_orders) {  // 3-D both
        tdm_emu::set_thread_order(o, 7);
        const dim3 g(3, 2, 2), b(4, 3, 2);
        std::vector<unsigned> out((size_t)12 * 24 * 12, 0xdead);
        TDM_LAUNCH(g, b, 0, 0, k_coords)(out.data());
        sync_ok("coords 3-D");
        check_coords(g, b, out, order_name(o));
    }
}

// ---- a block reduction, with and without its first barrier -------------------------------------

static const int RED_THREADS = 256;

// out[block] = sum of its 256 x's: shared-memory tree down to 32 partials, then a warp shuffle.
// SYNC false leaves out the barrier between the stores and the first reads.
template <bool SYNC>
__global__ void k_block_sum(const float *x, float *out) {
    __shared__ float sh[RED_THREADS];
    const int t = threadIdx.x;
    sh[t] = x[blockIdx.x * RED_THREADS + t];
    if (SYNC) __syncthreads();
    for (int s = RED_THREADS / 2; s >= 32; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t < 32) {
        float v = sh[t];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (t == 0) out[blockIdx.x] = v;
    }
}

template <bool SYNC>
static int block_sum_wrong(int blocks, tdm_emu::thread_order order) {
    tdm_emu::set_thread_order(order, 12345);
    std::vector<float> x((size_t)blocks * RED_THREADS), out(blocks, -1.0f);
    for (size_t i = 0; i < x.size(); i++) x[i] = (float)((i * 7 + 3) % 17) - 8.0f;  // exact sums
    TDM_LAUNCH(blocks, RED_THREADS, 0, 0, k_block_sum<SYNC>)(x.data(), out.data());
    sync_ok("block sum");
    int wrong = 0;
    for (int b = 0; b < blocks; b++) {
        double want = 0;
        for (int t = 0; t < RED_THREADS; t++) want += x[(size_t)b * RED_THREADS + t];
        wrong += out[b] != (float)want;
    }
    return wrong;
}

static void test_block_sum() {
    const int blocks = 600;
    for (tdm_emu::thread_order o : all_orders) {
        const int wrong = block_sum_wrong<true>(blocks, o);
        CHECK(wrong == 0, "correct reduction, %s order: %d of %d blocks wrong", order_name(o),
              wrong, blocks);
    }
    // The race shows in forward order (thread 0 reads sh[128] before thread 128 stores it) and in
    // random order; reverse happens to store before it reads.
    const int fwd = block_sum_wrong<false>(blocks, tdm_emu::order_forward);
    const int rnd = block_sum_wrong<false>(blocks, tdm_emu::order_random);
    const int rev = block_sum_wrong<false>(blocks, tdm_emu::order_reverse);
    printf(
        "reduction without its first __syncthreads: %d (forward), %d (random), %d (reverse) of "
        "%d blocks wrong\n",
        fwd, rnd, rev, blocks);
    CHECK(fwd > 0, "missing barrier not seen in forward order");
    CHECK(rnd > 0, "missing barrier not seen in random order");
}

// ---- shared memory is garbage at block start ----------------------------------------------------
// On a GPU a block's shared memory holds whatever was there: a kernel that reads it before
// writing it is wrong. The emulator fills it with 0xFF bytes (NaN, -1) at every block start, so
// such a read shows instead of reading zeros (a fresh OS thread) or the previous block's values.

// A __device__ helper's own shared memory, read before it is written: its bits.
__device__ unsigned helper_first_read() {
    __shared__ unsigned h;
    const unsigned v = h;
    __syncthreads();
    if (threadIdx.x == 0) h = 5;
    __syncthreads();
    return v;
}

// Each block first reads (bits) what is in its shared memory, then writes its own values there,
// as a block that forgets to initialize does: out[block * 4 + {float, double, half, helper}].
template <typename T>
__global__ void k_shared_first_read(unsigned long long *out) {
    __shared__ T f[64];
    __shared__ double d[3];
    __shared__ __half h[2];
    const unsigned t = threadIdx.x;
    unsigned long long bits[3] = {0, 0, 0};
    if (t == 0) {
        memcpy(&bits[0], (const void *)&f[63], sizeof(T));
        memcpy(&bits[1], (const void *)&d[2], sizeof(double));
        memcpy(&bits[2], (const void *)&h[1], sizeof(__half));
    }
    __syncthreads();
    f[t] = (T)blockIdx.x;
    if (t < 3) d[t] = blockIdx.x;
    if (t < 2) h[t] = __float2half((float)blockIdx.x);
    const unsigned helper = helper_first_read();
    if (t == 0) {
        for (int i = 0; i < 3; i++) out[blockIdx.x * 4 + i] = bits[i];
        out[blockIdx.x * 4 + 3] = helper;
    }
}

// A planted bug: a block sum into shared memory nobody zeroed (acc += rather than acc =). On the
// emulator before shared memory was filled, every OS thread's first block summed right (zeros)
// and later blocks were off by what the one before left: only garbage makes every block wrong.
__global__ void k_sum_unzeroed(const float *x, float *out) {
    __shared__ float acc;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 0; i < 32; i++) acc += x[blockIdx.x * 32 + i];   // the bug: acc never zeroed
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
    if (threadIdx.x == 0) acc = 0;   // what "works" when the next block on this thread comes
}

static void test_shared_garbage() {
    const int blocks = 64;   // over 4 OS threads: each runs several blocks in turn
    std::vector<unsigned long long> out((size_t)blocks * 4, 0);
    TDM_LAUNCH(blocks, 64, 0, 0, k_shared_first_read<float>)(out.data());
    sync_ok("shared first read (float)");
    int bad = 0;
    for (int b = 0; b < blocks; b++) {
        const unsigned long long *o = &out[(size_t)b * 4];
        bad += o[0] != 0xFFFFFFFFull || o[1] != ~0ull || o[2] != 0xFFFFull || o[3] != 0xFFFFFFFFull;
        if (bad == 1 && (o[0] != 0xFFFFFFFFull || o[3] != 0xFFFFFFFFull))
            printf("  block %d read %llx %llx %llx %llx first\n", b, o[0], o[1], o[2], o[3]);
    }
    CHECK(bad == 0, "%d of %d blocks read something other than garbage (0xFF bytes) from shared "
          "memory before writing it", bad, blocks);
    float nan_bits;
    memcpy(&nan_bits, &out[0], 4);
    CHECK(std::isnan(nan_bits), "the garbage is a NaN as f32");
    TDM_LAUNCH(blocks, 64, 0, 0, k_shared_first_read<int>)(out.data());
    sync_ok("shared first read (int)");
    CHECK(out[0] == 0xFFFFFFFFull && out[(size_t)(blocks - 1) * 4] == 0xFFFFFFFFull,
          "an int read first: %llx, %llx (want -1)", out[0], out[(size_t)(blocks - 1) * 4]);

    std::vector<float> x((size_t)blocks * 32, 1.0f), sums(blocks, 0.0f);
    TDM_LAUNCH(blocks, 32, 0, 0, k_sum_unzeroed)(x.data(), sums.data());
    sync_ok("sum into unzeroed shared memory");
    int nan = 0;
    for (float v : sums) nan += std::isnan(v);
    CHECK(nan == blocks, "the planted read-before-write made %d of %d block sums NaN", nan, blocks);
}

// ---- warp intrinsics --------------------------------------------------------------------------

static const int widths[] = {32, 16, 8, 4, 2, 1};
static const int src_lanes[] = {-1, 0, 3, 17, 40};
static const unsigned deltas[] = {0, 1, 5, 16};
static const int xor_masks[] = {1, 6, 16, 31};
static const int N_SHFL = 6 * (5 + 2 * 4 + 4);

__global__ void k_shuffles(int *out) {
    const int v = (int)threadIdx.x * 10 + 1;
    int *o = out + threadIdx.x * N_SHFL;
    int k = 0;
    for (int w : widths) {
        for (int s : src_lanes) o[k++] = __shfl_sync(0xffffffffu, v, s, w);
        for (unsigned d : deltas) {
            o[k++] = __shfl_up_sync(0xffffffffu, v, d, w);
            o[k++] = __shfl_down_sync(0xffffffffu, v, d, w);
        }
        for (int m : xor_masks) o[k++] = __shfl_xor_sync(0xffffffffu, v, m, w);
    }
}

// What lane `lane` (of the warp starting at thread `base`) gets, by CUDA's documented rules.
static int value_of(int base, int lane) {
    return (base + lane) * 10 + 1;
}

static void test_shuffles() {
    const int n = 64;  // two warps
    std::vector<int> out((size_t)n * N_SHFL, -7);
    TDM_LAUNCH(1, n, 0, 0, k_shuffles)(out.data());
    sync_ok("shuffles");
    int bad = 0;
    for (int t = 0; t < n; t++) {
        const int base = t & ~31, lane = t & 31;
        int k = 0;
        for (int w : widths) {
            const int seg = lane / w * w;  // the first lane of its width segment
            auto expect = [&](int want, const char *what, int arg) {
                const int got = out[(size_t)t * N_SHFL + k++];
                if (got != want && bad++ < 10)
                    printf("FAIL shuffle: thread %d %s(%d, width %d) = %d, want %d\n", t, what, arg,
                           w, got, want);
            };
            for (int s : src_lanes)
                expect(value_of(base, seg + ((s % w) + w) % w), "__shfl_sync", s);
            for (unsigned d : deltas) {
                expect(value_of(base, (lane - seg) >= (int)d ? lane - (int)d : lane),
                       "__shfl_up_sync", d);
                expect(value_of(base, (lane - seg) + (int)d < w ? lane + (int)d : lane),
                       "__shfl_down_sync", d);
            }
            // xor: a lane may read an earlier segment; a later one gives its own value.
            for (int m : xor_masks)
                expect(value_of(base, (lane ^ m) < seg + w ? lane ^ m : lane), "__shfl_xor_sync",
                       m);
        }
    }
    CHECK(bad == 0, "%d shuffle results wrong", bad);
}

struct votes {
    unsigned ballot, partial_ballot, any_, all_true, all_false, match, active, reduce, partial_warp;
    int count, and_, or_;
    double dsum;
    float hsum;
};

// Block 48: warp 0 full, warp 1 a partial warp of 16 lanes.
__global__ void k_votes(votes *out) {
    const unsigned lane = threadIdx.x & 31;
    votes r = {};
    r.ballot = __ballot_sync(0xffffffffu, lane % 3 == 0);
    if (lane < 16) r.partial_ballot = __ballot_sync(0x0000ffffu, lane & 1);
    r.any_ = __any_sync(0xffffffffu, lane == 5);
    r.all_true = __all_sync(0xffffffffu, lane < 40);
    r.all_false = __all_sync(0xffffffffu, lane < 15);
    r.match = __match_any_sync(0xffffffffu, lane / 4);
    if (lane < 10) r.active = __activemask();
    __syncwarp();
    r.reduce = __reduce_add_sync(0xffffffffu, lane);  // in warp 1: lanes 0..15 only
    r.count = __syncthreads_count(threadIdx.x % 3 == 0);
    r.and_ = __syncthreads_and(threadIdx.x < 100);
    r.or_ = __syncthreads_or(threadIdx.x == 47);
    double d = lane + 0.5;
    for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
    r.dsum = d;
    __half h = __float2half((float)(lane & 7));
    for (int o = 4; o > 0; o >>= 1) h = __hadd(h, __shfl_xor_sync(0xffffffffu, h, o, 8));
    r.hsum = __half2float(h);
    out[threadIdx.x] = r;
}

static void test_votes() {
    for (tdm_emu::thread_order o : all_orders) {
        tdm_emu::set_thread_order(o, 99);
        std::vector<votes> out(48);
        TDM_LAUNCH(1, 48, 0, 0, k_votes)(out.data());
        sync_ok("votes");
        for (int t = 0; t < 48; t++) {
            const votes &r = out[t];
            const unsigned lane = t & 31;
            const bool partial = t >= 32;  // lanes 16..31 of warp 1 do not exist
            const unsigned exist = partial ? 0xffffu : 0xffffffffu;
            CHECK(r.ballot == (0x49249249u & exist), "%s: thread %d ballot 0x%08x", order_name(o),
                  t, r.ballot);
            CHECK(lane >= 16 || r.partial_ballot == 0xaaaau, "thread %d partial ballot 0x%x", t,
                  r.partial_ballot);
            CHECK(r.any_ == 1 && r.all_true == 1 && r.all_false == 0, "thread %d any %u all %u %u",
                  t, r.any_, r.all_true, r.all_false);
            CHECK(r.match == (0xfu << (lane / 4 * 4)), "thread %d match_any 0x%08x", t, r.match);
            CHECK(lane >= 10 || r.active == 0x3ffu, "%s: thread %d activemask 0x%08x",
                  order_name(o), t, r.active);
            CHECK(r.reduce == (partial ? 120u : 496u), "thread %d reduce_add %u", t, r.reduce);
            CHECK(r.count == 16 && r.and_ == 1 && r.or_ == 1,
                  "thread %d syncthreads count %d and %d or %d", t, r.count, r.and_, r.or_);
            const double dsum = partial ? 0 : 16.0 + 496.0;  // the partial warp reads absent lanes
            CHECK(partial || r.dsum == dsum, "thread %d double shuffle sum %g", t, r.dsum);
            CHECK(r.hsum == 28.0f, "thread %d half shuffle sum (width 8) %g", t, r.hsum);
        }
    }
}

// ---- thread order
// ---------------------------------------------------------------------------------

__global__ void k_order(int *seq, int *counter) {
    seq[atomicAdd(counter, 1)] = (int)threadIdx.x;
    __syncthreads();
    seq[atomicAdd(counter, 1)] = (int)threadIdx.x;
}

static void test_order() {
    const int n = 64;
    for (tdm_emu::thread_order o : all_orders) {
        tdm_emu::set_thread_order(o, 2024);
        std::vector<int> seq(2 * n, -1);
        int counter = 0;
        TDM_LAUNCH(1, n, 0, 0, k_order)(seq.data(), &counter);
        sync_ok("order");
        bool fwd[2] = {true, true}, rev[2] = {true, true}, perm[2] = {true, true};
        for (int r = 0; r < 2; r++) {
            std::vector<int> seen(n, 0);
            for (int i = 0; i < n; i++) {
                const int t = seq[r * n + i];
                fwd[r] = fwd[r] && t == i;
                rev[r] = rev[r] && t == n - 1 - i;
                if (t < 0 || t >= n || seen[t]++) perm[r] = false;
            }
        }
        CHECK(perm[0] && perm[1], "%s: each thread must run once per round", order_name(o));
        if (o == tdm_emu::order_forward) CHECK(fwd[0] && fwd[1], "forward order is not 0, 1, 2..");
        if (o == tdm_emu::order_reverse)
            CHECK(rev[0] && rev[1], "reverse order is not .., 2, 1, 0");
        if (o == tdm_emu::order_random) {
            CHECK(!fwd[0] && !rev[0], "random order ran threads in order");
            CHECK(memcmp(&seq[0], &seq[n], n * sizeof(int)) != 0,
                  "random order: the same shuffle twice");
        }
    }
    tdm_emu::set_thread_order(tdm_emu::order_forward, 0);
}

// ---- atomics
// --------------------------------------------------------------------------------------

struct atomic_sums {
    int i;
    unsigned u;
    unsigned long long ull;
    float f;
    double d;
    __half h;
    __nv_bfloat16 b;
    int mx, mn, sub, cas_wins, cas_slot, exch;
    unsigned inc, dec, orv, xorv, andv;
    long long llmax;
};

__global__ void k_atomics(atomic_sums *s) {
    const int g = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    atomicAdd(&s->i, 1);
    atomicAdd(&s->u, 2u);
    atomicAdd(&s->ull, 1ull << 33);
    atomicAdd(&s->f, 0.5f);
    atomicAdd(&s->d, 0.25);
    atomicAdd(&s->h, __float2half(1.0f));                      // 2048: exact in f16
    if (g % 8 == 0) atomicAdd(&s->b, __float2bfloat16(1.0f));  // 256: exact in bf16
    atomicMax(&s->mx, g * 7 % 2048);
    atomicMin(&s->mn, g * 7 % 2048 - 5);
    atomicSub(&s->sub, 3);
    if (atomicCAS(&s->cas_slot, 0, g + 1) == 0) atomicAdd(&s->cas_wins, 1);
    atomicExch(&s->exch, g);
    atomicInc(&s->inc, 100u);
    atomicDec(&s->dec, 1000u);
    atomicOr(&s->orv, 1u << (g % 32));
    atomicXor(&s->xorv, 1u << (g % 32));
    atomicAnd(&s->andv, ~(1u << (g % 16)));
    atomicMax(&s->llmax, (long long)g << 32);
}

static void test_atomics() {
    atomic_sums s;
    memset(&s, 0, sizeof s);
    s.mn = 1 << 30;
    s.dec = 5;
    s.andv = 0xffffffffu;
    s.h = __float2half(0.0f);
    s.b = __float2bfloat16(0.0f);
    const int blocks = 8, threads = 256, n = blocks * threads;
    TDM_LAUNCH(blocks, threads, 0, 0, k_atomics)(&s);
    sync_ok("atomics");
    CHECK(s.i == n, "int %d", s.i);
    CHECK(s.u == 2u * n, "unsigned %u", s.u);
    CHECK(s.ull == (unsigned long long)n << 33, "unsigned long long %llu", s.ull);
    CHECK(s.f == 0.5f * n, "float %g", s.f);
    CHECK(s.d == 0.25 * n, "double %g", s.d);
    CHECK(__half2float(s.h) == (float)n, "half %g", __half2float(s.h));
    CHECK(__bfloat162float(s.b) == n / 8.0f, "bf16 %g", __bfloat162float(s.b));
    CHECK(s.mx == 2047 && s.mn == -5, "max %d min %d", s.mx, s.mn);
    CHECK(s.sub == -3 * n, "sub %d", s.sub);
    CHECK(s.cas_wins == 1 && s.cas_slot >= 1 && s.cas_slot <= n, "cas wins %d slot %d", s.cas_wins,
          s.cas_slot);
    CHECK(s.exch >= 0 && s.exch < n, "exch %d", s.exch);
    CHECK(s.inc == (unsigned)(n % 101), "inc %u", s.inc);
    // dec from 5 with limit 1000: 5,4,..,0 then wraps to 1000 and counts down.
    CHECK(s.dec == (unsigned)(1000 - ((n - 6) % 1001)), "dec %u", s.dec);
    CHECK(s.orv == 0xffffffffu && s.xorv == 0 && s.andv == 0xffff0000u, "or 0x%x xor 0x%x and 0x%x",
          s.orv, s.xorv, s.andv);
    CHECK(s.llmax == (long long)(n - 1) << 32, "long long max %lld", s.llmax);
}

// ---- launch arguments
// -----------------------------------------------------------------------------

struct args_seen {
    int n;
    float f;
    long long big;
    bool null_p;
};

__global__ void k_args(int n, float f, const int *p, long long big, args_seen *out) {
    if (threadIdx.x == 0) *out = args_seen{n, f, big, p == NULL};
    n += 1000;  // a kernel's parameters are its own copies
}

template <typename T>
__global__ void k_fill(T *y, T v, int64_t n) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = v;
}

template <typename S, typename D>
__global__ void k_convert(const S *x, D *y, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = (D)x[i];
}

namespace some_ns {
static __global__ void k_static(int *out) {
    out[threadIdx.x] = (int)threadIdx.x + 1;
}
}  // namespace some_ns

static void test_args() {
    args_seen seen = {};
    const int64_t n64 = 5;
    const double d = 2.5;
    TDM_LAUNCH(1, 4, 0, 0, k_args)(n64, d, NULL, 7, &seen);  // converted to (int, float, ...)
    sync_ok("args");
    CHECK(seen.n == 5 && seen.f == 2.5f && seen.big == 7 && seen.null_p, "args %d %g %lld %d",
          seen.n, seen.f, seen.big, (int)seen.null_p);

    std::vector<float> y(40, 0.0f);
    TDM_LAUNCH(1, 32, 0, 0, k_fill)(y.data(), 1.5f, (int64_t)40);  // T deduced at the call
    sync_ok("deduced");
    int bad = 0;
    for (float v : y) bad += v != 1.5f;
    CHECK(bad == 0, "deduced template kernel: %d wrong", bad);

    std::vector<int> xi(100);
    std::vector<double> yd(100, -1);
    for (int i = 0; i < 100; i++) xi[i] = i * 3;
    TDM_LAUNCH(4, 32, 0, 0, k_convert<int, double>)(xi.data(), yd.data(), 100);  // commas
    sync_ok("convert");
    bad = 0;
    for (int i = 0; i < 100; i++) bad += yd[i] != i * 3.0;
    CHECK(bad == 0, "k_convert<int, double>: %d wrong", bad);

    std::vector<int> o(8, 0);
    TDM_LAUNCH(1, 8, 0, 0, some_ns::k_static)(o.data());
    sync_ok("static");
    CHECK(o[7] == 8, "namespaced static kernel: %d", o[7]);
}

// ---- failures, each in a child process ----------------------------------------------------------

__global__ void k_early_return(int *out) {
    if (threadIdx.x < 8) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void k_shfl_elsewhere(int *out) {
    const int lane = threadIdx.x & 31;
    int v = lane;
    if (lane == 31)
        __syncthreads();
    else
        v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

__global__ void k_shfl_self_excluded(int *out) {
    const int lane = threadIdx.x & 31;
    out[threadIdx.x] = __shfl_sync(lane == 3 ? 0x1u : 0xffffffffu, lane, 0);
}

__global__ void k_shfl_lane_exited(int *out) {
    const int lane = threadIdx.x & 31;
    if (lane == 5) return;
    int v = lane;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

__global__ void k_shfl_masks_differ(int *out) {
    const int lane = threadIdx.x & 31;
    const unsigned mask = lane < 16 ? 0xffffffffu : 0xffff0001u;
    out[threadIdx.x] = __shfl_sync(mask, lane, 0);
}

__global__ void k_two_barriers(int *out) {
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}

__global__ void k_trap(int *out) {
    if (threadIdx.x == 7) __trap();
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void k_nothing(int *) {}

static std::vector<int> child_out(1 << 16);

// A child: runs one failing launch; exit 0 when the error it must give is there.
static int run_case(const char *name) {
    alarm(60);  // a hang is a failure, not a stuck CI job
    int *o = child_out.data();
    std::string c = name;
    if (c == "bad_config") {
        struct {
            dim3 g, b;
            size_t smem;
            cudaError_t want;
        } cases[] = {
            {dim3(1), dim3(1025), 0, cudaErrorInvalidConfiguration},
            {dim3(1), dim3(1, 1, 65), 0, cudaErrorInvalidConfiguration},
            {dim3(1), dim3(2048, 1, 1), 0, cudaErrorInvalidConfiguration},
            {dim3(1, 65536, 1), dim3(32), 0, cudaErrorInvalidConfiguration},
            {dim3(0), dim3(32), 0, cudaErrorInvalidConfiguration},
            {dim3(1), dim3(0), 0, cudaErrorInvalidConfiguration},
            {dim3(1), dim3(32), 49153, cudaErrorInvalidValue},
            {dim3(1), dim3(32), 49152, cudaSuccess},
        };
        int bad = 0;
        for (auto &k : cases) {
            TDM_LAUNCH(k.g, k.b, k.smem, 0, k_nothing)(o);
            const cudaError_t e = cudaGetLastError();
            if (e != k.want) {
                printf("launch (%u,%u,%u) x (%u,%u,%u) smem %zu gave %d, want %d\n", k.g.x, k.g.y,
                       k.g.z, k.b.x, k.b.y, k.b.z, k.smem, (int)e, (int)k.want);
                bad++;
            }
        }
        tdm_emu::set_max_dynamic_smem((const void *)k_nothing, 100 << 10);
        TDM_LAUNCH(1, 32, 80 << 10, 0, k_nothing)(o);
        if (cudaGetLastError() != cudaSuccess)
            bad++, printf("80 KiB after the attribute refused\n");
        TDM_LAUNCH(1, 32, 120 << 10, 0, k_nothing)(o);
        if (cudaGetLastError() != cudaErrorInvalidValue)
            bad++, printf("120 KiB past the attribute allowed\n");
        // Not sticky: the next launch works.
        TDM_LAUNCH(1, 32, 0, 0, k_nothing)(o);
        if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) bad++;
        return bad ? 1 : 0;
    }
    if (c == "early_return")
        TDM_LAUNCH(1, 64, 0, 0, k_early_return)(o);
    else if (c == "early_return_many")
        TDM_LAUNCH(200, 128, 0, 0, k_early_return)(o);
    else if (c == "shfl_elsewhere")
        TDM_LAUNCH(1, 32, 0, 0, k_shfl_elsewhere)(o);
    else if (c == "shfl_self_excluded")
        TDM_LAUNCH(1, 32, 0, 0, k_shfl_self_excluded)(o);
    else if (c == "shfl_lane_exited")
        TDM_LAUNCH(2, 64, 0, 0, k_shfl_lane_exited)(o);
    else if (c == "shfl_masks_differ")
        TDM_LAUNCH(1, 32, 0, 0, k_shfl_masks_differ)(o);
    else if (c == "two_barriers")
        TDM_LAUNCH(1, 64, 0, 0, k_two_barriers)(o);
    else if (c == "trap")
        TDM_LAUNCH(1, 32, 0, 0, k_trap)(o);
    else
        return 3;
    const cudaError_t e = cudaDeviceSynchronize();
    printf("cudaDeviceSynchronize: %d\n", (int)e);
    return e == cudaErrorLaunchFailure ? 0 : 2;
}

// Runs this program with --case NAME; its stderr must hold every one of `want`.
static void expect_case(const char *name, std::vector<const char *> want) {
    std::string err;
    const int status = child_case_run("test_emu_exec", name, &err);
    const bool exited = WIFEXITED(status);
    CHECK(exited && WEXITSTATUS(status) == 0, "case %s: %s %d; stderr:\n%s", name,
          exited ? "exit status" : "killed by signal",
          exited ? WEXITSTATUS(status) : WTERMSIG(status), err.c_str());
    for (const char *w : want)
        CHECK(err.find(w) != std::string::npos, "case %s: stderr lacks \"%s\":\n%s", name, w,
              err.c_str());
    printf("case %-20s %s", name, err.c_str());
}

static void test_failures() {
    expect_case("early_return", {"kernel k_early_return: block (0,0,0): barrier divergence: thread "
                                 "(8,0,0) waits at __syncthreads (test_emu_exec.cc:",
                                 "but thread (0,0,0) has exited (8 of 64 threads exited)"});
    expect_case("early_return_many", {"kernel k_early_return: block (", "barrier divergence"});
    expect_case("shfl_elsewhere",
                {"kernel k_shfl_elsewhere: block (0,0,0): warp 0: thread (0,0,0) waits at "
                 "__shfl_xor_sync (mask 0xffffffff",
                 "but lane 31 of its mask, thread (31,0,0), waits at __syncthreads"});
    expect_case("shfl_self_excluded",
                {"kernel k_shfl_self_excluded: block (0,0,0), thread (3,0,0): __shfl_sync",
                 "with mask 0x00000001, which leaves out its own lane 3"});
    expect_case("shfl_lane_exited", {"warp 0: thread (0,0,0) waits at __shfl_xor_sync",
                                     "lane 5 of its mask, thread (5,0,0), has exited"});
    expect_case("shfl_masks_differ",
                {"thread (0,0,0) waits at __shfl_sync (mask 0xffffffff",
                 "lane 16 of its mask, thread (16,0,0), waits at __shfl_sync (mask 0xffff0001"});
    expect_case("two_barriers",
                {"barrier divergence: thread (0,0,0) waits at __syncthreads (test_emu_exec.cc:",
                 "but thread (32,0,0) waits at __syncthreads (test_emu_exec.cc:"});
    expect_case("trap",
                {"kernel k_trap: block (0,0,0), thread (7,0,0): __trap() (test_emu_exec.cc:"});
    expect_case("bad_config",
                {"tandem emu: kernel k_nothing: block (1025,1,1) has 1025 threads, more than 1024",
                 "block (1,1,65): dimensions at most (1024,1024,64)",
                 "block (2048,1,1) has 2048 threads, more than 1024",
                 "grid (1,65536,1): dimensions at most (2147483647,65535,65535)",
                 "grid (0,1,1) has a zero dimension", "block (0,1,1) has a zero dimension",
                 "49153 bytes of dynamic shared memory, more than 49152",
                 "122880 bytes of dynamic shared memory, more than 102400"});
}

// ---- cost -------------------------------------------------------------------------------------

template <int BARRIERS>
__global__ void k_barriers(float *out) {
    __shared__ float sh[256];
    float v = (float)threadIdx.x;
    for (int i = 0; i < BARRIERS; i++) {
        sh[threadIdx.x] = v;
        __syncthreads();
        v += sh[(threadIdx.x + 1) & 255];
    }
    out[blockIdx.x * 256 + threadIdx.x] = v;
}

static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <int BARRIERS>
static double us_per_block(int blocks) {
    std::vector<float> out((size_t)blocks * 256);
    TDM_LAUNCH(blocks, 256, 0, 0, k_barriers<BARRIERS>)(out.data());  // warm the fiber pools
    sync_ok("bench");
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {  // the best of five: CI machines are shared
        const double t0 = now_s();
        TDM_LAUNCH(blocks, 256, 0, 0, k_barriers<BARRIERS>)(out.data());
        sync_ok("bench");
        best = std::min(best, now_s() - t0);
    }
    return best / blocks * 1e6;
}

static void bench() {
    const int blocks = 400;
    printf(
        "cost (wall, all OS threads): block of 256 threads: %.1f us without barriers, %.1f us "
        "with 10 __syncthreads\n",
        us_per_block<0>(blocks), us_per_block<10>(blocks));
}

int main(int argc, char **argv) {
    // Several OS threads even on a small machine, so atomics and shared memory meet real
    // concurrency between blocks (an explicit TANDEM_EMU_THREADS wins).
    setenv("TANDEM_EMU_THREADS", "4", 0);
    if (argc == 3 && strcmp(argv[1], "--case") == 0) return run_case(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--bench") == 0) {
        bench();
        return 0;
    }
    test_coords();
    test_args();
    test_order();
    test_shuffles();
    test_votes();
    test_atomics();
    test_block_sum();
    test_shared_garbage();
    test_failures();
    bench();
    if (failures) {
        printf("test_emu_exec: %d checks failed\n", failures);
        return 1;
    }
    printf("test_emu_exec: all passed\n");
    return 0;
}

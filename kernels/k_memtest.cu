/* k_memtest.cu — the device memory test (tandem/memtest.h, docs/CHECK.md "Memory test"): the
 * backend's memtest slot and its kernels. The patterns are memtestG80's / cuda_memtest's and
 * MemTest86's: walking ones and zeros (32-bit words), address in address, moving inversions and a
 * seeded random pattern (64-bit words). Every pattern is written by one kernel and read back by a
 * later one, and before every reading step the L2 is evicted: an eviction buffer of twice the
 * L2's size (cudaDevAttrL2CacheSize) is written with cudaMemsetAsync, so the lines the test wrote
 * last are written back and read again from the DRAM. (No load qualifier does it: the PTX ISA's
 * ld.cv "invalidates (discards) a matching L2 line and re-fetches the line on each new load" only
 * for a global *system* memory address; for device memory the L2 is the point of coherence, and
 * .cg/.cv/.cs/.lu still read through it. Without the eviction, moving inversions' descending
 * sweep and its final check read back the L2's worth of lines just written: 40-60 MB.)
 * A mismatch costs a thread a register increment; each warp adds its count to the step's with one
 * atomic at its end (the verifying grids are 4 blocks per SM, each thread walking many words), and a thread claims a record (address, expected, got) of the small device
 * log only while the log is not full (a plain read first): a bad region costs no more atomics per
 * bad word, whatever its size. The host reads the log after each verifying step. Random values
 * come from Philox (core/philox.h) by word index: the check recomputes them, no copy is stored.
 *
 * The memory: the caching allocator's free cache is emptied, then fraction x cudaMemGetInfo's
 * free bytes are taken with cudaMalloc in chunks (the whole at once, halving on failure down to
 * MT_GRANULE), straight from the device (not cached), and each is cudaFree'd at the end. */
#include <algorithm>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/philox.h"
#include "kernels/caching_allocator.h"
#include "kernels/cuda_graph.h"
#include "kernels/k_common.cuh"

enum { MT_LOG_RECORDS = 16, MT_MAX_CHUNKS = 4096 };
#define MT_GRANULE ((size_t)64 << 10)   // chunk sizes are multiples of 64 KiB

// The device log of one verifying step: every mismatch counted, the first records kept.
typedef struct {
    unsigned long long errors;   // words read wrong
    unsigned long long n;        // records claimed (may exceed MT_LOG_RECORDS)
    unsigned long long rec[MT_LOG_RECORDS][3];   // address, expected, got
} mt_log;

// What word i holds: kind, and its argument (the shift of a walking pattern, the constant).
enum { MT_WALK1, MT_WALK0, MT_ADDR, MT_ADDR_INV, MT_CONST, MT_RANDOM, MT_RANDOM_INV };
typedef struct {
    int kind;
    uint64_t arg;
    uint64_t seed, stream;   // random: Philox key and the pass
    uint64_t first;          // the chunk's first word among all chunks (random's index)
} mt_pat;

template <typename W> __device__ __forceinline__ W mt_value(const mt_pat &p, const W *at, int64_t i) {
    switch (p.kind) {
    case MT_WALK1: return (W)((W)1 << (((uint64_t)i + p.arg) % (8 * sizeof(W))));
    case MT_WALK0: return (W) ~((W)1 << (((uint64_t)i + p.arg) % (8 * sizeof(W))));
    case MT_ADDR: return (W)(uintptr_t)at;
    case MT_ADDR_INV: return (W) ~(W)(uintptr_t)at;
    case MT_CONST: return (W)p.arg;
    default: {   // MT_RANDOM(_INV): word g = bits 64 (g mod 2) .. of Philox block g / 2
        const uint64_t g = p.first + (uint64_t)i, q = g / 2;
        tdm_philox4 c = {{(uint32_t)q, (uint32_t)(q >> 32), (uint32_t)p.stream,
                          (uint32_t)(p.stream >> 32)}};
        tdm_philox4 r = tdm_philox4x32_10(c, (uint32_t)p.seed, (uint32_t)(p.seed >> 32));
        const int k = (int)(g & 1) * 2;
        const uint64_t v = (uint64_t)r.v[k] | ((uint64_t)r.v[k + 1] << 32);
        return (W)(p.kind == MT_RANDOM ? v : ~v);
    }
    }
}

// A word read wrong: counted by the thread (*mine), recorded while the log has room.
__device__ __forceinline__ void mt_record(mt_log *log, unsigned *mine, const void *at, uint64_t expected,
                                          uint64_t got) {
    ++*mine;
    if (*(volatile unsigned long long *)&log->n >= MT_LOG_RECORDS) return;   // full: no atomic
    const unsigned long long k = atomicAdd(&log->n, 1ull);
    if (k < MT_LOG_RECORDS) {
        log->rec[k][0] = (unsigned long long)(uintptr_t)at;
        log->rec[k][1] = expected;
        log->rec[k][2] = got;
    }
}

// The end of a verifying kernel: the warp's counts summed, one atomic per warp that saw any.
// Every thread of the block reaches it (the grid-stride loop ends for all), so the full mask.
__device__ __forceinline__ void mt_count(mt_log *log, unsigned mine) {
    for (int o = 16; o > 0; o /= 2) mine += __shfl_down_sync(0xffffffffu, mine, o);
    if ((threadIdx.x & 31) == 0 && mine) atomicAdd(&log->errors, (unsigned long long)mine);
}

// p (n words) = the pattern.
template <typename W> __global__ void k_mt_write(W *p, int64_t n, mt_pat pat) {
    GRID_STRIDE(i, n) p[i] = mt_value<W>(pat, p + i, i);
}

// Each word of p (n) against the pattern.
template <typename W> __global__ void k_mt_verify(const W *p, int64_t n, mt_pat pat, mt_log *log) {
    unsigned mine = 0;
    GRID_STRIDE(i, n) {
        const W want = mt_value<W>(pat, p + i, i), got = p[i];
        if (got != want) mt_record(log, &mine, p + i, want, got);
    }
    mt_count(log, mine);
}

// Moving inversions' sweep: each word checked against `check`, then `write` written, in
// ascending or (down) descending address order of the grid-stride walk.
template <typename W>
__global__ void k_mt_verify_write(W *p, int64_t n, mt_pat check, mt_pat write, bool down,
                                  mt_log *log) {
    unsigned mine = 0;
    GRID_STRIDE(j, n) {
        const int64_t i = down ? n - 1 - j : j;
        const W want = mt_value<W>(check, p + i, i), got = p[i];
        if (got != want) mt_record(log, &mine, p + i, want, got);
        p[i] = mt_value<W>(write, p + i, i);
    }
    mt_count(log, mine);
}

// ---- the host side ------------------------------------------------------------------------

static double mt_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    char *ptr[MT_MAX_CHUNKS];
    size_t bytes[MT_MAX_CHUNKS];
    int n;
    mt_log *log;   // device
    void *evict;   // the eviction buffer (device), evict_bytes
    size_t evict_bytes;
    unsigned max_blocks;   // verifying grids: 4 blocks per SM, each thread many words (grid stride)
    cudaStream_t stream;
    tdm_memtest_result *out;
    int pattern, pass;
} mt_state;

static mt_pat mt_make(int kind, uint64_t arg, uint64_t seed, uint64_t stream) {
    mt_pat p = {kind, arg, seed, stream, 0};
    return p;
}

static bool mt_record_less(const tdm_memtest_failure &a, const tdm_memtest_failure &b) {
    return a.address != b.address ? a.address < b.address : (a.expected ^ a.got) < (b.expected ^ b.got);
}

// Reads the log of the step just queued, adds its count to the pattern's and keeps its records
// (in address order, a word and its bits once per pattern, at most TDM_MEMTEST_PER_PATTERN), then
// clears the log.
static tdm_status mt_collect(mt_state *s, int word_bytes) {
    mt_log h;
    TDM_TRY(CUDA_CHECK(cudaMemcpyAsync(&h, s->log, sizeof h, cudaMemcpyDeviceToHost, s->stream)));
    TDM_TRY(CUDA_CHECK(cudaStreamSynchronize(s->stream)));
    if (h.errors == 0) return TDM_OK;
    tdm_memtest_result *r = s->out;
    r->errors[s->pattern] += h.errors;
    r->errors_total += h.errors;
    const int n = (int)std::min<unsigned long long>(h.n, MT_LOG_RECORDS);
    tdm_memtest_failure got[MT_LOG_RECORDS];
    for (int k = 0; k < n; k++) {
        got[k].address = h.rec[k][0];
        got[k].expected = h.rec[k][1];
        got[k].got = h.rec[k][2];
        got[k].word_bytes = word_bytes;
        got[k].pattern = s->pattern;
        got[k].pass = s->pass;
    }
    std::sort(got, got + n, mt_record_less);
    for (int k = 0; k < n; k++) {
        int mine = 0, dup = 0;
        for (int j = 0; j < r->n_failures; j++) {
            const tdm_memtest_failure &f = r->failures[j];
            if (f.pattern != s->pattern) continue;
            mine++;
            dup |= f.address == got[k].address && (f.expected ^ f.got) == (got[k].expected ^ got[k].got);
        }
        if (!dup && mine < TDM_MEMTEST_PER_PATTERN && r->n_failures < TDM_MEMTEST_MAX_FAILURES)
            r->failures[r->n_failures++] = got[k];
    }
    return CUDA_CHECK(cudaMemsetAsync(s->log, 0, sizeof(mt_log), s->stream));
}

// One kernel over every chunk, as words of W; then, for a verifying step, the log.
template <typename W> static tdm_status mt_write(mt_state *s, mt_pat pat) {
    uint64_t first = 0;
    for (int c = 0; c < s->n; c++) {
        const int64_t n = (int64_t)(s->bytes[c] / sizeof(W));
        pat.first = first;
        TDM_LAUNCH(cuda_grid_blocks(n, 256), 256, 0, s->stream, k_mt_write<W>)((W *)s->ptr[c], n, pat);
        TDM_TRY(CUDA_LAUNCH_CHECK());
        first += (uint64_t)n;
    }
    return TDM_OK;
}

// Before a reading step: the L2 evicted (every line the test wrote last written back to the
// DRAM), by writing the eviction buffer. Counted, with the reading steps, in the result.
static tdm_status mt_evict(mt_state *s) {
    s->out->verify_steps++;
    if (!s->evict) return TDM_OK;
    TDM_TRY(CUDA_CHECK(cudaMemsetAsync(s->evict, (int)(s->out->evictions & 0xff), s->evict_bytes, s->stream)));
    s->out->evictions++;
    return TDM_OK;
}

template <typename W> static tdm_status mt_verify(mt_state *s, mt_pat pat) {
    TDM_TRY(mt_evict(s));
    uint64_t first = 0;
    for (int c = 0; c < s->n; c++) {
        const int64_t n = (int64_t)(s->bytes[c] / sizeof(W));
        pat.first = first;
        TDM_LAUNCH(std::min(cuda_grid_blocks(n, 256), s->max_blocks), 256, 0, s->stream, k_mt_verify<W>)
        ((const W *)s->ptr[c], n, pat, s->log);
        TDM_TRY(CUDA_LAUNCH_CHECK());
        first += (uint64_t)n;
    }
    return mt_collect(s, (int)sizeof(W));
}

template <typename W> static tdm_status mt_verify_write(mt_state *s, mt_pat check, mt_pat write, bool down) {
    TDM_TRY(mt_evict(s));
    for (int k = 0; k < s->n; k++) {
        const int c = down ? s->n - 1 - k : k;   // descending: the last chunk first
        const int64_t n = (int64_t)(s->bytes[c] / sizeof(W));
        TDM_LAUNCH(std::min(cuda_grid_blocks(n, 256), s->max_blocks), 256, 0, s->stream, k_mt_verify_write<W>)
        ((W *)s->ptr[c], n, check, write, down, s->log);
        TDM_TRY(CUDA_LAUNCH_CHECK());
    }
    return mt_collect(s, (int)sizeof(W));
}

// One pass of one pattern over every chunk.
static tdm_status mt_pattern(mt_state *s, uint64_t seed) {
    const uint64_t pass = (uint64_t)s->pass;
    switch (s->pattern) {
    case TDM_MEMTEST_WALKING_ONES:
    case TDM_MEMTEST_WALKING_ZEROS: {
        const int kind = s->pattern == TDM_MEMTEST_WALKING_ONES ? MT_WALK1 : MT_WALK0;
        for (uint64_t shift = 0; shift < 32; shift++) {
            TDM_TRY(mt_write<uint32_t>(s, mt_make(kind, shift, 0, 0)));
            TDM_TRY(mt_verify<uint32_t>(s, mt_make(kind, shift, 0, 0)));
        }
        return TDM_OK;
    }
    case TDM_MEMTEST_ADDRESS:
        TDM_TRY(mt_write<uint64_t>(s, mt_make(MT_ADDR, 0, 0, 0)));
        TDM_TRY(mt_verify<uint64_t>(s, mt_make(MT_ADDR, 0, 0, 0)));
        TDM_TRY(mt_write<uint64_t>(s, mt_make(MT_ADDR_INV, 0, 0, 0)));
        return mt_verify<uint64_t>(s, mt_make(MT_ADDR_INV, 0, 0, 0));
    case TDM_MEMTEST_MOVING_INVERSIONS: {
        static const uint64_t pats[2] = {0, 0x5555555555555555ull};
        for (int k = 0; k < 2; k++) {
            const mt_pat p = mt_make(MT_CONST, pats[k], 0, 0), np = mt_make(MT_CONST, ~pats[k], 0, 0);
            TDM_TRY(mt_write<uint64_t>(s, p));
            TDM_TRY(mt_verify_write<uint64_t>(s, p, np, false));
            TDM_TRY(mt_verify_write<uint64_t>(s, np, p, true));
            TDM_TRY(mt_verify<uint64_t>(s, p));
        }
        return TDM_OK;
    }
    default:   // TDM_MEMTEST_RANDOM
        TDM_TRY(mt_write<uint64_t>(s, mt_make(MT_RANDOM, 0, seed, pass)));
        TDM_TRY(mt_verify<uint64_t>(s, mt_make(MT_RANDOM, 0, seed, pass)));
        TDM_TRY(mt_write<uint64_t>(s, mt_make(MT_RANDOM_INV, 0, seed, pass)));
        return mt_verify<uint64_t>(s, mt_make(MT_RANDOM_INV, 0, seed, pass));
    }
}

// Takes up to `want` bytes in chunks: the rest at once, halved on failure down to MT_GRANULE.
static tdm_status mt_take(mt_state *s, size_t want) {
    size_t got = 0, chunk = want / MT_GRANULE * MT_GRANULE;
    while (got + MT_GRANULE <= want && chunk >= MT_GRANULE && s->n < MT_MAX_CHUNKS) {
        const size_t size = std::min(chunk, (want - got) / MT_GRANULE * MT_GRANULE);
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, size);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            chunk = chunk / 2 / MT_GRANULE * MT_GRANULE;
            continue;
        }
        TDM_TRY(CUDA_CHECK(e));
        s->ptr[s->n] = (char *)p;
        s->bytes[s->n++] = size;
        got += size;
    }
    return TDM_OK;
}

tdm_status cuda_memtest(int device_index, const tdm_memtest_params *p, tdm_memtest_result *out) {
    const double t0 = mt_now();
    if (tdm_cuda_graph_pool(device_index))
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "device_memtest: cuda:%d: not while this thread "
                             "captures a CUDA graph there", device_index);
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(CUDA_CHECK(cudaDeviceSynchronize()));
    tdm_caching_allocator *ca = tdm_cuda_device_allocator(device_index);
    if (ca) tdm_ca_empty_cache(ca);   // the free cached segments go back: they are tested too
    mt_state *s = (mt_state *)calloc(1, sizeof *s);
    if (!s) return tdm_error_set(TDM_ERR_OOM, "device_memtest: out of host memory");
    s->out = out;
    tdm_status st = CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    if (st == TDM_OK) st = CUDA_CHECK(cudaMalloc((void **)&s->log, sizeof(mt_log)));
    if (st == TDM_OK) st = CUDA_CHECK(cudaMemsetAsync(s->log, 0, sizeof(mt_log), s->stream));
    size_t free_b = 0, total_b = 0;
    if (st == TDM_OK) st = CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (st == TDM_OK) {
        out->free_bytes = free_b;
        out->total_bytes = total_b;
        st = mt_take(s, (size_t)(p->fraction * (double)free_b));
    }
    if (st == TDM_OK && s->n == 0)
        st = tdm_error_set(TDM_ERR_OOM, "device_memtest: cuda:%d: not even %zu bytes of the %zu "
                           "free could be taken", device_index, (size_t)MT_GRANULE, free_b);
    // the eviction buffer, from what the test left (5 % of the free memory: GBs on a GPU): twice
    // the L2, halved while it cannot be had (the result says how much it got)
    int l2 = 0, sms = 0;
    if (st == TDM_OK) st = CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_index));
    if (st == TDM_OK) st = CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_index));
    s->max_blocks = 4u * (unsigned)(sms > 0 ? sms : 1);
    out->l2_bytes = l2 > 0 ? (uint64_t)l2 : 0;
    for (size_t want = 2 * (size_t)out->l2_bytes; st == TDM_OK && want >= MT_GRANULE; want /= 2) {
        const cudaError_t e = cudaMalloc(&s->evict, want);
        if (e == cudaSuccess) {
            s->evict_bytes = want;
            break;
        }
        s->evict = NULL;
        if (e != cudaErrorMemoryAllocation) st = CUDA_CHECK(e);
        else (void)cudaGetLastError();
    }
    out->evict_bytes = s->evict_bytes;
    for (int c = 0; c < s->n; c++) out->bytes_tested += s->bytes[c];
    out->chunks = s->n;
    out->fraction = free_b ? (double)out->bytes_tested / (double)free_b : 0;
    for (s->pass = 0; st == TDM_OK && s->pass < p->passes; s->pass++)
        for (s->pattern = 0; st == TDM_OK && s->pattern < TDM_MEMTEST_N_PATTERNS; s->pattern++) {
            if (!(p->patterns & (1u << s->pattern))) continue;
            const double t = mt_now();
            st = mt_pattern(s, p->seed);
            out->seconds[s->pattern] += mt_now() - t;
        }
    if (s->stream) (void)cudaStreamSynchronize(s->stream);
    for (int c = 0; c < s->n; c++) {   // back to the device, whatever happened
        const cudaError_t e = cudaFree(s->ptr[c]);
        if (st == TDM_OK && e != cudaSuccess) st = CUDA_CHECK(e);   // else the first error stays
    }
    if (s->log) (void)cudaFree(s->log);
    if (s->evict) (void)cudaFree(s->evict);
    if (s->stream) (void)cudaStreamDestroy(s->stream);
    free(s);
    out->seconds_total = mt_now() - t0;
    return st;
}

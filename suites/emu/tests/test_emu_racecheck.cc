/* test_emu_racecheck.cc — racecheck (suites/emu/racecheck.cc) against the fault it exists for: a
 * shared tile refilled without the __syncthreads that ends the reads of it, where the last reads
 * are warp-collective (ldmatrix). Two warps each load the whole 16x16 tile (half of it written by
 * the other warp) with ldmatrix.x4 and multiply it by ones; then the next tile is written.
 *   - Without racecheck the kernel missing the barrier gives the right result in forward,
 *     reverse and random order (the warps advance in step at every warp operation: all reads
 *     happen before any write); the warp order (TANDEM_EMU_ORDER=warp: each warp as far as it
 *     can go before the next) gives wrong values, and right ones with the barrier.
 *   - With racecheck it is a fault naming the kernel, the hazard and both threads (in a child
 *     process: the error is sticky), in every order; the kernel with the barrier is clean.
 *   - The plain hazards, by ordinary loads and stores of two warps: a read of another warp's
 *     write (read-after-write, or write-after-read in an order that runs the reader first) and
 *     two writes (write-after-write) with no barrier between, and
 *     none when the same warp does both or a barrier separates them.
 * Exit 0: all passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "child_case.h"
#include "emu_check.h"

extern "C" void tdm_emu_racecheck_enable(int on);

// f16 bits of small whole numbers (exact): 0x3c00 is 1; value v in 1..16 as 0x3c00 + ...
static uint16_t f16_of(int v) {
    const float f = (float)v;
    const __half h = __float2half(f);
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}

// Tiles of 16x16 f16 (row pitch 24 halves); each of the 64 threads writes 4 elements of a tile,
// the two warps load all of it with ldmatrix.x4, times B = ones: D[r][c] = sum_k A[r][k]. Out:
// per warp the sum over the tiles of D's element (lane / 4, 2 (lane % 4)).
template <bool BARRIER>
__global__ void k_tiles(const uint16_t *tiles, int ntiles, float *out) {
    __shared__ __align__(16) uint16_t a[16 * 24];
    __shared__ __align__(16) uint16_t b[8 * 24];
    const int t = threadIdx.x, l = t % 32;
    for (int i = t; i < 8 * 24; i += 64) b[i] = 0x3c00;
    float acc[4] = {0, 0, 0, 0};
    for (int tile = 0; tile < ntiles; tile++) {
        for (int e = 0; e < 4; e++) {
            const int i = t * 4 + e;  // element i of the tile, row-major
            a[(i / 16) * 24 + i % 16] = tiles[tile * 256 + i];
        }
        __syncthreads();
        uint32_t ra[4], rb[2];
        TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x4, ra, &a[(l % 16) * 24 + (l / 16) * 8]);
        TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x2, rb, &b[(l % 8) * 24 + ((l / 8) % 2) * 8]);
        TDM_EMU_MMA(tdm_emu::tc_mma_m16n8k16_f16, acc, ra, rb, acc);
        if (BARRIER) __syncthreads();  // the barrier that ends the tile's reads
    }
    out[t] = acc[0];
}

// Plain loads and stores of two warps on one shared word (x[at], at = 0: an index the compiler
// cannot see, as AddressSanitizer does not instrument a constant one, docs/EMULATION.md). mode 0:
// warp 1 reads what warp 0 wrote, no barrier (RAW); 1: both warps write it (WAW); 2: warp 0
// writes and reads it itself; 3: warp 0 writes, a barrier, warp 1 reads.
__global__ void k_plain(int mode, int at, float *out) {
    __shared__ float x[2];
    const int t = threadIdx.x;
    if (t == 0 || (mode == 1 && t == 32)) x[at] = (float)t;
    if (mode == 3) __syncthreads();
    if ((mode == 0 || mode == 3) && t == 32) out[0] = x[at];
    if (mode == 2 && t == 1) out[0] = x[at];
}


static uint16_t *g_tiles;
static float *g_out;

static void setup() {
    std::vector<uint16_t> h(3 * 256);
    for (int i = 0; i < 3 * 256; i++) h[i] = f16_of(1 + (i * 7 + i / 256) % 5);
    CUDA_OK(cudaMalloc(&g_tiles, h.size() * 2));
    CUDA_OK(cudaMemcpy(g_tiles, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc(&g_out, 64 * 4));
}

// The right answer: per lane, the sum over the tiles of row (lane / 4) of each.
static float want_of(int lane) {
    float s = 0;
    for (int tile = 0; tile < 3; tile++)
        for (int k = 0; k < 16; k++) {
            const int i = tile * 256 + (lane / 4) * 16 + k;
            s += (float)(1 + (i * 7 + i / 256) % 5);
        }
    return s;
}

static int wrong_values() {
    std::vector<float> h(64);
    CUDA_OK(cudaMemcpy(h.data(), g_out, 64 * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int t = 0; t < 64; t++) bad += h[t] != want_of(t % 32);
    return bad;
}

// The child's side: one launch with racecheck on, in the order given.
static int run_case(const char *name) {
    setup();
    int o = name[strlen(name) - 1] - '0';
    tdm_emu::set_thread_order(all_orders[o < 0 || o > 2 ? 0 : o], 11);
    tdm_emu_racecheck_enable(1);
    if (!strncmp(name, "missing_barrier", 15))
        TDM_LAUNCH(1, 64, 0, 0, k_tiles<false>)(g_tiles, 3, g_out);
    else if (!strncmp(name, "raw", 3))
        TDM_LAUNCH(1, 64, 0, 0, k_plain)(0, 0, g_out);
    else if (!strncmp(name, "waw", 3))
        TDM_LAUNCH(1, 64, 0, 0, k_plain)(1, 0, g_out);
    const cudaError_t e = cudaDeviceSynchronize();
    fprintf(stderr, "%s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 3;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--case")) return run_case(argv[2]);
    setup();

    // Without racecheck: the missing barrier is invisible in forward, reverse and random order;
    // the warp order (each warp as far as it can go first) overwrites the tile under the second
    // warp, whose ldmatrix then reads the next tile's values; with the barrier all are right.
    tdm_emu_racecheck_enable(0);
    for (int o = 0; o < 3; o++) {
        tdm_emu::set_thread_order(all_orders[o], 11);
        TDM_LAUNCH(1, 64, 0, 0, k_tiles<false>)(g_tiles, 3, g_out);
        CUDA_OK(cudaDeviceSynchronize());
        CHECK(wrong_values() == 0, "%s order: the premise: the orders hide the missing barrier",
              order_name(all_orders[o]));
    }
    tdm_emu::set_thread_order(tdm_emu::order_warp, 0);
    TDM_LAUNCH(1, 64, 0, 0, k_tiles<false>)(g_tiles, 3, g_out);
    CUDA_OK(cudaDeviceSynchronize());
    const int seen = wrong_values();
    CHECK(seen > 0, "warp order: the missing barrier gave right values");
    TDM_LAUNCH(1, 64, 0, 0, k_tiles<true>)(g_tiles, 3, g_out);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(wrong_values() == 0, "warp order: wrong values with the barrier");
    printf("warp order: %d of 64 values wrong without the barrier, none with it\n", seen);

    // With it: the kernel with its barrier is clean, so are a warp's own accesses and accesses
    // across a barrier.
    tdm_emu_racecheck_enable(1);
    for (int o = 0; o < 3; o++) {
        tdm_emu::set_thread_order(all_orders[o], 11);
        TDM_LAUNCH(1, 64, 0, 0, k_tiles<true>)(g_tiles, 3, g_out);
        TDM_LAUNCH(1, 64, 0, 0, k_plain)(2, 0, g_out);
        TDM_LAUNCH(1, 64, 0, 0, k_plain)(3, 0, g_out);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s order: a clean kernel faulted",
              order_name(all_orders[o]));
        TDM_LAUNCH(1, 64, 0, 0, k_tiles<true>)(g_tiles, 3, g_out);
        CUDA_OK(cudaDeviceSynchronize());
        CHECK(wrong_values() == 0, "%s order: wrong values with the barrier", order_name(all_orders[o]));
    }
    tdm_emu_racecheck_enable(0);

    // The hazards, each in a child, every order.
    // (The plain read and write: read-after-write when the writer ran first, write-after-read
    // in an order that runs the reader first.)
    const struct {
        const char *name, *want, *or_want;
    } cases[] = {{"missing_barrier", "write-after-read hazard on shared memory", nullptr},
                 {"raw", "read-after-write hazard on shared memory",
                  "write-after-read hazard on shared memory"},
                 {"waw", "write-after-write hazard on shared memory", nullptr}};
    for (const auto &c : cases)
        for (int o = 0; o < 3; o++) {
            std::string name = std::string(c.name) + "_" + std::to_string(o), err;
            const int status = child_case_run("test_emu_racecheck", name.c_str(), &err);
            const bool failed = WIFEXITED(status) && WEXITSTATUS(status) == 3;
            const bool named = err.find(c.want) != std::string::npos ||
                               (c.or_want && err.find(c.or_want) != std::string::npos);
            CHECK(failed && named && err.find("racecheck: kernel k_") != std::string::npos &&
                      err.find("warp 0") != std::string::npos &&
                      err.find("warp 1") != std::string::npos,
                  "%s, %s order: not reported (status %d): %.500s", c.name, order_name(all_orders[o]), status,
                  err.c_str());
        }
    cudaFree(g_tiles);
    cudaFree(g_out);
    if (failures)
        printf("%d failure(s)\n", failures);
    else
        printf("emu racecheck: all checks passed\n");
    return failures ? 1 : 0;
}

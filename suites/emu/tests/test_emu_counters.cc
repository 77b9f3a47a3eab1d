/* test_emu_counters.cc — the emulated device's counters (suites/emu/counters.cc) on kernels whose
 * counts are worked out by hand below, as Nsight Compute would report them on a GPU:
 *   - a coalesced copy (4 sectors per 128-byte warp request), the same shifted by one float
 *     (5 sectors), a strided copy (a sector per lane), a copy by odd lanes only (divergence: one
 *     request of 16 lanes);
 *   - a 32x32 shared-memory transpose without padding (a column read: 32-way bank conflicts) and
 *     with a padded row (none);
 *   - one mma.sync m16n8k16 tile loaded with ldmatrix from rows 32 bytes apart (two wavefronts per
 *     8x8 matrix) and 48 bytes apart (one);
 *   - atomics counted once each, their own accesses not as loads or stores;
 *   - nothing counted while the counters are off;
 *   - AddressSanitizer's checks, which the counters' calls make for it, still catch a kernel
 *     that reads one element past its allocation, and one that writes a float before it (in a
 *     child process: the report names the kernel's line).
 * Every count must be the same in the three thread orders. Exit 0: all passed. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "child_case.h"
#include "emu_check.h"

extern "C" void tdm_emu_counters_enable(int on);
extern "C" void tdm_emu_counters_reset(void);
extern "C" char *tdm_emu_counters_json(void);

// ---- the kernels ------------------------------------------------------------------------------

__global__ void k_copy(const float *in, float *out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}

__global__ void k_copy_strided(const float *in, float *out, int n, int stride) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(size_t)i * stride];
}

__global__ void k_copy_odd(const float *in, float *out) {
    if (threadIdx.x % 2) out[threadIdx.x] = in[threadIdx.x];
}

// One 32x32 tile, a block of 32x32 threads: written by rows, read by columns.
template <int PAD>
__global__ void k_transpose(const float *in, float *out) {
    __shared__ float tile[32][32 + PAD];
    tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * 32 + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}

// One warp: A (16x16) and B (8 rows of 16 k) of f16 ones in shared memory, rows PITCH halves
// apart; A by ldmatrix.x4, B by .x2, one mma; every element of D is 16.
template <int PITCH>
__global__ void k_mma_tile(float *out) {
    __shared__ __align__(16) uint16_t a[16 * PITCH];
    __shared__ __align__(16) uint16_t b[8 * PITCH];
    const int l = threadIdx.x;
    for (int i = l; i < 16 * PITCH; i += 32) a[i] = 0x3c00;  // 1.0
    for (int i = l; i < 8 * PITCH; i += 32) b[i] = 0x3c00;
    __syncwarp();
    uint32_t ra[4], rb[2];
    TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x4, ra, &a[(l % 16) * PITCH + (l / 16) * 8]);
    TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x2, rb, &b[(l % 8) * PITCH + ((l / 8) % 2) * 8]);
    float c[4] = {0, 0, 0, 0}, d[4];
    TDM_EMU_MMA(tdm_emu::tc_mma_m16n8k16_f16, d, ra, rb, c);
    for (int i = 0; i < 4; i++) out[l * 4 + i] = d[i];
}

__global__ void k_read_past(const float *in, float *out, int n) {
    out[0] = in[n];  // one element past the end
}
__global__ void k_write_before(float *out) {
    out[-1] = 1.0f;
}

__global__ void k_atomics(int *count, float *sum) {
    atomicAdd(count, 1);
    atomicAdd(sum, 1.0f);
}

// ---- reading the counters ---------------------------------------------------------------------

struct counts {
    cJSON *root = nullptr;
    ~counts() { cJSON_Delete(root); }
    const cJSON *kernel(const char *name) const {
        const cJSON *k;
        cJSON_ArrayForEach(k, cJSON_GetObjectItem(root, "kernels")) {
            const cJSON *n = cJSON_GetObjectItem(k, "name");
            if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return k;
        }
        return nullptr;
    }
    // kernel name, then "global_load.sectors" and the like
    double get(const char *name, const char *path) const {
        const cJSON *o = kernel(name);
        std::string p = path;
        size_t at = 0;
        while (o && at <= p.size()) {
            size_t dot = p.find('.', at);
            if (dot == std::string::npos) dot = p.size();
            o = cJSON_GetObjectItem(o, p.substr(at, dot - at).c_str());
            at = dot + 1;
        }
        return cJSON_IsNumber(o) ? o->valuedouble : -1;
    }
};

static void read_counts(counts &c) {
    char *text = tdm_emu_counters_json();
    c.root = text ? cJSON_Parse(text) : nullptr;
    free(text);
    if (!c.root) {
        printf("FAIL: the counters' JSON does not parse\n");
        exit(1);
    }
}

struct want {
    const char *kernel, *what;
    double value;
};

static void expect(const counts &c, const char *order, const std::vector<want> &w) {
    for (const want &x : w) {
        const double got = c.get(x.kernel, x.what);
        CHECK(got == x.value, "%s order: %s %s = %.0f, want %.0f", order, x.kernel, x.what, got,
              x.value);
    }
}

// The child's side of the AddressSanitizer cases: a launch that must not return.
static int run_case(const char *name) {
    float *in, *out;
    CUDA_OK(cudaMalloc(&in, 64 * 4));
    CUDA_OK(cudaMalloc(&out, 64 * 4));
    tdm_emu_counters_enable(!strcmp(name, "read_past_counted"));
    if (!strcmp(name, "write_before"))
        TDM_LAUNCH(1, 1, 0, 0, k_write_before)(out);
    else
        TDM_LAUNCH(1, 1, 0, 0, k_read_past)(in, out, 64);
    cudaDeviceSynchronize();
    printf("the launch returned\n");
    return 0;
}

static void check_asan() {
    const struct {
        const char *name, *line;
        bool store;
    } cases[] = {{"read_past", "k_read_past", false},
                 {"read_past_counted", "k_read_past", false},
                 {"write_before", "k_write_before", true}};
    for (const auto &c : cases) {
        std::string err;
        const int status = child_case_run("test_emu_counters", c.name, &err);
        const bool died = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(died && err.find("ERROR: AddressSanitizer") != std::string::npos &&
                  err.find(c.store ? "WRITE of size 4" : "READ of size 4") != std::string::npos &&
                  err.find(c.line) != std::string::npos,
              "%s: not reported by AddressSanitizer (status %d): %.600s", c.name, status,
              err.c_str());
    }
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--case")) return run_case(argv[2]);
    check_asan();
    float *in, *out, *sum;
    int *count;
    CUDA_OK(cudaMalloc(&in, 8192 * 4));
    CUDA_OK(cudaMalloc(&out, 8192 * 4));
    CUDA_OK(cudaMalloc(&count, 4));
    CUDA_OK(cudaMalloc(&sum, 4));
    CUDA_OK(cudaMemset(in, 0, 8192 * 4));

    // Off: nothing is counted.
    tdm_emu_counters_enable(0);
    TDM_LAUNCH(32, 128, 0, 0, k_copy)(in, out, 4096);
    CUDA_OK(cudaDeviceSynchronize());
    {
        counts c;
        read_counts(c);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(c.root, "kernels")) == 0, "counted while off");
    }

    tdm_emu_counters_enable(1);
    for (int o = 0; o < 3; o++) {
        tdm_emu::set_thread_order(all_orders[o], 7);
        tdm_emu_counters_reset();
        TDM_LAUNCH(32, 128, 0, 0, k_copy)(in, out, 4096);
        TDM_LAUNCH(1, 32, 0, 0, k_copy_strided)(in, out, 32, 8);
        TDM_LAUNCH(1, 32, 0, 0, k_copy_odd)(in, out);
        TDM_LAUNCH(dim3(1), dim3(32, 32), 0, 0, k_transpose<0>)(in, out);
        TDM_LAUNCH(dim3(1), dim3(32, 32), 0, 0, k_transpose<1>)(in, out);
        TDM_LAUNCH(1, 32, 0, 0, k_mma_tile<16>)(out);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> h(128);
        CUDA_OK(cudaMemcpy(h.data(), out, 128 * 4, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (float v : h) bad += v != 16.0f;
        CHECK(bad == 0, "%d elements of the mma tile are not 16", bad);
        TDM_LAUNCH(1, 32, 0, 0, k_mma_tile<24>)(out);
        TDM_LAUNCH(2, 32, 0, 0, k_atomics)(count, sum);
        // Shifted by one float: each warp's 128 bytes straddle 5 sectors.
        TDM_LAUNCH(1, 64, 0, 0, k_copy)(in + 1, out, 64);
        CUDA_OK(cudaDeviceSynchronize());
        counts c;
        read_counts(c);
        expect(
            c, order_name(all_orders[o]),
            {
                // 4096 floats, 128 warps: each warp reads 32 consecutive floats = 128 bytes = 4
                // sectors, and writes as much. Launched twice (the second: 64 floats from in + 1,
                // 2 warps of 5 sectors each).
                {"k_copy", "launches", 2},
                {"k_copy", "global_load.requests", 128 + 2},
                {"k_copy", "global_load.sectors", 128 * 4 + 2 * 5},
                {"k_copy", "global_load.bytes_requested", 4096 * 4 + 64 * 4},
                {"k_copy", "global_load.bytes_unique", 4096 * 4 + 64 * 4},
                {"k_copy", "global_store.requests", 128 + 2},
                {"k_copy", "global_store.sectors", 128 * 4 + 2 * 4},
                {"k_copy", "shared_load.requests", 0},
                // A stride of 8 floats: every lane in a sector of its own.
                {"k_copy_strided", "global_load.requests", 1},
                {"k_copy_strided", "global_load.sectors", 32},
                {"k_copy_strided", "global_store.sectors", 4},
                // Odd lanes: one request of 16 lanes over the warp's 128 bytes.
                {"k_copy_odd", "global_load.requests", 1},
                {"k_copy_odd", "global_load.sectors", 4},
                {"k_copy_odd", "global_load.bytes_requested", 64},
                // Transpose, 32 warps: by rows into shared memory (one wavefront each), by columns
                // out: 32 lanes on one bank, 32 words: 32 wavefronts, 31 conflicts per request.
                {"k_transpose<0>", "global_load.requests", 32},
                {"k_transpose<0>", "global_load.sectors", 128},
                {"k_transpose<0>", "shared_store.requests", 32},
                {"k_transpose<0>", "shared_store.wavefronts", 32},
                {"k_transpose<0>", "shared_store.bank_conflicts", 0},
                {"k_transpose<0>", "shared_load.requests", 32},
                {"k_transpose<0>", "shared_load.wavefronts", 32 * 32},
                {"k_transpose<0>", "shared_load.bank_conflicts", 32 * 31},
                {"k_transpose<0>", "shared_load.max_ways", 32},
                {"k_transpose<0>", "global_store.sectors", 128},
                // A row of 33 floats: lane x reads word 33x + y, bank (x + y) % 32: all distinct.
                {"k_transpose<1>", "shared_load.requests", 32},
                {"k_transpose<1>", "shared_load.wavefronts", 32},
                {"k_transpose<1>", "shared_load.bank_conflicts", 0},
                {"k_transpose<1>", "shared_load.max_ways", 1},
                // The mma tile. Rows 32 bytes apart: rows r and r + 4 of a matrix share banks, two
                // wavefronts per 8x8 matrix: A's four and B's two make 12, 6 of them conflicts.
                // Its stores into shared memory: 2-byte halves, 32 lanes on 64 bytes, one wavefront
                // per request; A has 16 x 16 / 32 = 8 requests, B 4. Out: 4 stores per lane at a
                // stride of 16 bytes, 16 sectors per request.
                {"k_mma_tile<16>", "tensor_core.mma", 1},
                {"k_mma_tile<16>", "tensor_core.flops", 4096},
                {"k_mma_tile<16>", "tensor_core.ldmatrix", 2},
                {"k_mma_tile<16>", "tensor_core.ldmatrix_shared.wavefronts", 12},
                {"k_mma_tile<16>", "tensor_core.ldmatrix_shared.bank_conflicts", 6},
                {"k_mma_tile<16>", "tensor_core.ldmatrix_shared.max_ways", 2},
                {"k_mma_tile<16>", "shared_store.requests", 12},
                {"k_mma_tile<16>", "shared_store.wavefronts", 12},
                {"k_mma_tile<16>", "shared_load.requests", 0},
                {"k_mma_tile<16>", "global_store.requests", 4},
                {"k_mma_tile<16>", "global_store.sectors", 64},
                // Rows 48 bytes apart: word 12r of row r, banks 0, 12, 24, 4, 16, 28, 8, 20.
                {"k_mma_tile<24>", "tensor_core.ldmatrix_shared.wavefronts", 6},
                {"k_mma_tile<24>", "tensor_core.ldmatrix_shared.bank_conflicts", 0},
                {"k_mma_tile<24>", "shared_store.requests", 18},
                // 64 threads, two atomics each; no load or store of theirs counted.
                {"k_atomics", "atomics.global", 128},
                {"k_atomics", "atomics.shared", 0},
                {"k_atomics", "global_load.requests", 0},
                {"k_atomics", "global_store.requests", 0},
            });
        printf("ok %s order\n", order_name(all_orders[o]));
    }
    tdm_emu_counters_enable(0);
    cudaFree(in);
    cudaFree(out);
    cudaFree(count);
    cudaFree(sum);
    if (failures)
        printf("%d failure(s)\n", failures);
    else
        printf("emu counters: all checks passed\n");
    return failures ? 1 : 0;
}

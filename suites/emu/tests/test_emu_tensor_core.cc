/* test_emu_tensor_core.cc — the emulated tensor-core instructions (suites/emu/tensor_core.cc)
 * against PyTorch's products (tests/data/tensor_core_cases.txt, gen_tensor_core_cases.py) and
 * the PTX ISA's fragment tables, which this file writes out again on its own:
 *   - mma.sync m16n8k16 (f16, bf16): each lane places A, B and C in its registers by the tables,
 *     D comes back by them and must equal A B + C within the f32 accumulation bound;
 *   - ldmatrix (x1, x2, x4, each with and without .trans): every register of every lane against
 *     the table, from 8x8 matrices whose elements are their own coordinates;
 *   - ldmatrix + mma as a kernel uses them: larger products staged through shared memory, A
 *     loaded with .x4 and B from row-major storage with .x2.trans;
 *   - the faults a GPU has: an mma in a warp of fewer than 32 threads, a lane that skips it, a
 *     misaligned ldmatrix row (each in a child process whose stderr is checked).
 * Every check runs in the three thread orders. Exit 0: all passed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "child_case.h"
#include "emu_check.h"

// ---- the cases -------------------------------------------------------------------------------

struct tc_case {
    std::string name, dtype;
    int m = 0, n = 0, k = 0;
    std::map<std::string, std::vector<double>> arr;
};

static std::vector<tc_case> read_cases() {
    const std::string path = std::string(TDM_EMU_TEST_DATA) + "/tensor_core_cases.txt";
    FILE *f = fopen(path.c_str(), "r");
    if (!f) {
        printf("FAIL: cannot open %s: %s\n", path.c_str(), strerror(errno));
        exit(1);
    }
    std::vector<tc_case> cases;
    tc_case c;
    char key[64];
    while (fscanf(f, "%63s", key) == 1) {
        const std::string k = key;
        char word[64];
        if (k == "case" && fscanf(f, "%63s", word) == 1) c = tc_case(), c.name = word;
        else if (k == "dtype" && fscanf(f, "%63s", word) == 1) c.dtype = word;
        else if (k == "mnk") {
            if (fscanf(f, "%d %d %d", &c.m, &c.n, &c.k) != 3) break;
        } else if (k == "end") cases.push_back(c);
        else {
            size_t count = 0;
            if (fscanf(f, "%zu", &count) != 1) break;
            std::vector<double> &v = c.arr[k];
            v.resize(count);
            for (size_t i = 0; i < count; i++)
                if (fscanf(f, "%lf", &v[i]) != 1) {
                    printf("FAIL: %s: short array %s\n", c.name.c_str(), key);
                    exit(1);
                }
        }
    }
    fclose(f);
    CHECK(cases.size() >= 10, "read only %zu cases from %s", cases.size(), path.c_str());
    return cases;
}

// A value (exact in the type) as its f16 / bf16 bits, through the toolkit's conversions.
static uint16_t bits_of(double v, bool bf16) {
    uint16_t b;
    if (bf16) {
        const __nv_bfloat16 h = __float2bfloat16_rn((float)v);
        memcpy(&b, &h, 2);
    } else {
        const __half h = __float2half_rn((float)v);
        memcpy(&b, &h, 2);
    }
    return b;
}

// ---- mma from registers placed by the PTX tables ------------------------------------------------

__global__ void k_mma_direct(const uint16_t *A, const uint16_t *B, const float *C, float *D,
                             int op) {
    const int l = threadIdx.x, g = l >> 2, t = l & 3;
    uint32_t a[4], b[2];
    float c[4], d[4];
    // A 16x16 row-major: register r holds a(2r), a(2r+1)
    for (int r = 0; r < 4; r++) {
        const int row = (r == 0 || r == 2) ? g : g + 8;
        const int col = 2 * t + (r >= 2 ? 8 : 0);
        a[r] = (uint32_t)A[row * 16 + col] | (uint32_t)A[row * 16 + col + 1] << 16;
    }
    // B 16x8 row-major (k, n): register r holds b(2r), b(2r+1): k = 2t + (r ? 8 : 0) and + 1
    for (int r = 0; r < 2; r++) {
        const int k = 2 * t + (r ? 8 : 0);
        b[r] = (uint32_t)B[k * 8 + g] | (uint32_t)B[(k + 1) * 8 + g] << 16;
    }
    for (int i = 0; i < 4; i++) c[i] = C[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)];
    TDM_EMU_MMA(op, d, a, b, c);
    for (int i = 0; i < 4; i++) D[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = d[i];
}

// ---- ldmatrix + mma: D (M,N) = A (M,K) B (K,N) + C, one warp per 16x8 tile of D ---------------

static const int MAX_M = 64, MAX_N = 32, MAX_K = 64;

__global__ void k_mma_tiled(const uint16_t *A, const uint16_t *B, const float *C, float *D, int M,
                            int N, int K, int op) {
    __shared__ __align__(16) uint16_t As[MAX_M * MAX_K];
    __shared__ __align__(16) uint16_t Bs[MAX_K * MAX_N];
    for (int i = threadIdx.x; i < M * K; i += blockDim.x) As[i] = A[i];
    for (int i = threadIdx.x; i < K * N; i += blockDim.x) Bs[i] = B[i];
    __syncthreads();
    const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32, l = threadIdx.x % 32;
    const int g = l >> 2, t = l & 3;
    for (int tile = warp; tile < (M / 16) * (N / 8); tile += nwarps) {
        const int tm = tile / (N / 8), tn = tile % (N / 8);
        float acc[4];
        for (int i = 0; i < 4; i++)
            acc[i] = C[(tm * 16 + (i < 2 ? g : g + 8)) * N + tn * 8 + 2 * t + (i & 1)];
        for (int k0 = 0; k0 < K; k0 += 16) {
            uint32_t a[4], b[2];
            // x4: lanes 0-7 rows 0-7 cols 0-7, 8-15 rows 8-15, 16-23 rows 0-7 cols 8-15, 24-31
            const int arow = tm * 16 + (l % 8) + 8 * ((l / 8) % 2), acol = k0 + 8 * (l / 16);
            TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x4, a, &As[arow * K + acol]);
            // x2.trans: lanes 0-15 give rows k0..k0+15 of B's (K,N) storage, columns tn*8..+7
            TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x2_trans, b, &Bs[(k0 + l % 16) * N + tn * 8]);
            TDM_EMU_MMA(op, acc, a, b, acc);
        }
        for (int i = 0; i < 4; i++)
            D[(tm * 16 + (i < 2 ? g : g + 8)) * N + tn * 8 + 2 * t + (i & 1)] = acc[i];
    }
}

static void check_products(const tc_case &c) {
    const bool bf16 = c.dtype == "bf16";
    const int op = bf16 ? tdm_emu::tc_mma_m16n8k16_bf16 : tdm_emu::tc_mma_m16n8k16_f16;
    const size_t na = (size_t)c.m * c.k, nb = (size_t)c.k * c.n, nd = (size_t)c.m * c.n;
    std::vector<uint16_t> a(na), b(nb);
    std::vector<float> cc(nd), d(nd);
    for (size_t i = 0; i < na; i++) a[i] = bits_of(c.arr.at("A")[i], bf16);
    for (size_t i = 0; i < nb; i++) b[i] = bits_of(c.arr.at("B")[i], bf16);
    for (size_t i = 0; i < nd; i++) cc[i] = (float)c.arr.at("C")[i];
    uint16_t *da, *db;
    float *dc, *dd;
    CUDA_OK(cudaMalloc(&da, na * 2));
    CUDA_OK(cudaMalloc(&db, nb * 2));
    CUDA_OK(cudaMalloc(&dc, nd * 4));
    CUDA_OK(cudaMalloc(&dd, nd * 4));
    CUDA_OK(cudaMemcpy(da, a.data(), na * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db, b.data(), nb * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dc, cc.data(), nd * 4, cudaMemcpyHostToDevice));
    for (tdm_emu::thread_order o : all_orders) {
        tdm_emu::set_thread_order(o, 77);
        CUDA_OK(cudaMemset(dd, 0xff, nd * 4));
        if (c.m == 16 && c.n == 8 && c.k == 16)
            TDM_LAUNCH(1, 32, 0, 0, k_mma_direct)(da, db, dc, dd, op);
        else
            TDM_LAUNCH(1, 96, 0, 0, k_mma_tiled)(da, db, dc, dd, c.m, c.n, c.k, op);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(d.data(), dd, nd * 4, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (size_t i = 0; i < nd; i++) {
            // f32 accumulation of K products and C: at most K + 1 roundings of u = 2^-24
            const double want = c.arr.at("D")[i], tol = (c.k + 1) * ldexp(c.arr.at("scale")[i], -24);
            if (!(fabs(d[i] - want) <= tol) && bad++ < 5)
                printf("  %s order %d: D[%zu] (%zu,%zu) = %.9g, want %.9g (tol %.3g)\n",
                       c.name.c_str(), (int)o, i, i / c.n, i % c.n, d[i], want, tol);
        }
        CHECK(bad == 0, "%s: %d of %zu elements of D wrong", c.name.c_str(), bad, nd);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
    printf("ok %s (%dx%dx%d)\n", c.name.c_str(), c.m, c.n, c.k);
}

// ---- ldmatrix's layouts -------------------------------------------------------------------------

// Four 8x8 matrices, element (j, r, c) = j*64 + r*8 + c; each lane gives the row of every variant
// (lanes 8j + r: row r of matrix j). out: per variant, per lane, 4 registers.
__global__ void k_ldmatrix(uint32_t *out) {
    __shared__ __align__(16) uint16_t m[4 * 64];
    for (int i = threadIdx.x; i < 256; i += 32) m[i] = (uint16_t)i;
    __syncthreads();
    const int l = threadIdx.x;
    const uint16_t *row = &m[(l / 8) * 64 + (l % 8) * 8];
    for (int v = 0; v < 6; v++) {
        uint32_t r[4] = {0, 0, 0, 0};
        const int op = tdm_emu::tc_ldmatrix_x1 + v;
        TDM_EMU_LDMATRIX(op, r, row);
        for (int j = 0; j < 4; j++) out[(v * 32 + l) * 4 + j] = r[j];
    }
}

static void check_ldmatrix() {
    uint32_t *d;
    CUDA_OK(cudaMalloc(&d, 6 * 32 * 4 * 4));
    std::vector<uint32_t> h(6 * 32 * 4);
    for (tdm_emu::thread_order o : all_orders) {
        tdm_emu::set_thread_order(o, 5);
        CUDA_OK(cudaMemset(d, 0, 6 * 32 * 4 * 4));
        TDM_LAUNCH(1, 32, 0, 0, k_ldmatrix)(d);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int v = 0; v < 6; v++) {
            const int n = v % 3 == 0 ? 1 : v % 3 == 1 ? 2 : 4;
            const bool trans = v >= 3;
            for (int l = 0; l < 32; l++)
                for (int j = 0; j < 4; j++) {
                    uint32_t want = 0;   // registers past the count: left as they were
                    if (j < n) {
                        // PTX: lane l holds (l/4, 2(l%4)) and (l/4, 2(l%4)+1); .trans: the
                        // transposed positions
                        const int r0 = trans ? 2 * (l % 4) : l / 4, c0 = trans ? l / 4 : 2 * (l % 4);
                        const int r1 = trans ? r0 + 1 : r0, c1 = trans ? c0 : c0 + 1;
                        want = (uint32_t)(j * 64 + r0 * 8 + c0) | (uint32_t)(j * 64 + r1 * 8 + c1) << 16;
                    }
                    const uint32_t got = h[(v * 32 + l) * 4 + j];
                    if (got != want && bad++ < 5)
                        printf("  variant %d lane %d reg %d: 0x%08x, want 0x%08x\n", v, l, j, got,
                               want);
                }
        }
        CHECK(bad == 0, "ldmatrix layouts: %d registers wrong (order %d)", bad, (int)o);
    }
    cudaFree(d);
    printf("ok ldmatrix x1/x2/x4, plain and .trans\n");
}

// ---- faults ---------------------------------------------------------------------------------------

__global__ void k_mma_some_lanes(float *out, int lanes) {
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0}, d[4];
    if ((int)(threadIdx.x % 32) >= lanes) return;
    TDM_EMU_MMA(tdm_emu::tc_mma_m16n8k16_bf16, d, a, b, c);
    out[threadIdx.x] = d[0];
}

__global__ void k_ldmatrix_misaligned(uint32_t *out) {
    __shared__ __align__(16) uint16_t m[8 * 8 + 8];
    for (int i = threadIdx.x; i < 72; i += 32) m[i] = (uint16_t)i;
    __syncthreads();
    uint32_t r[1];
    TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x1, r, &m[(threadIdx.x % 8) * 8 + 1]);
    out[threadIdx.x] = r[0];
}

static int run_case(const char *name) {
    alarm(60);
    float *f;
    CUDA_OK(cudaMalloc(&f, 64 * 4));
    const std::string c = name;
    if (c == "mma_partial_warp") TDM_LAUNCH(1, 48, 0, 0, k_mma_some_lanes)(f, 32);
    else if (c == "mma_lanes_exited") TDM_LAUNCH(1, 32, 0, 0, k_mma_some_lanes)(f, 16);
    else if (c == "ldmatrix_misaligned") TDM_LAUNCH(1, 32, 0, 0, k_ldmatrix_misaligned)((uint32_t *)f);
    else return 3;
    const cudaError_t e = cudaDeviceSynchronize();
    return e == cudaErrorLaunchFailure ? 0 : 2;
}

static void expect_case(const char *name, std::vector<const char *> want) {
    std::string err;
    const int status = child_case_run("test_emu_tensor_core", name, &err);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "case %s: status %d; stderr:\n%s", name,
          status, err.c_str());
    for (const char *w : want)
        CHECK(err.find(w) != std::string::npos, "case %s: stderr lacks \"%s\":\n%s", name, w,
              err.c_str());
    printf("case %-20s %s", name, err.c_str());
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--case") == 0) return run_case(argv[2]);
    for (const tc_case &c : read_cases()) check_products(c);
    check_ldmatrix();
    expect_case("mma_partial_warp",
                {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "in a warp of 16 threads"});
    expect_case("mma_lanes_exited", {"has exited"});
    expect_case("ldmatrix_misaligned", {"ldmatrix.sync.aligned.m8n8.x1.shared.b16",
                                        "row address", "is not 16-byte aligned"});
    if (failures) printf("%d check(s) FAILED\n", failures);
    else printf("all passed\n");
    return failures ? 1 : 0;
}

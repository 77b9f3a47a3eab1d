/* tensor_core.cc — the tensor-core instructions of the emulated device: mma.sync (m16n8k16, f16
 * and bf16 inputs, f32 accumulators) and ldmatrix (m8n8 b16, x1/x2/x4, with and without .trans),
 * with the fragment layouts of NVIDIA's PTX ISA ("Warp-level matrix instructions": "Matrix
 * Fragments for mma.m16n8k16 with floating point type" and "Warp-level matrix load instruction:
 * ldmatrix"). exec.cc runs them as warp operations: every lane of the warp arrives with its
 * operands (cuda_emu.h's mma_at / ldmatrix_at), and the last one's arrival completes the
 * instruction for all 32 here. Tested on their own against PyTorch's products
 * (tests/test_emu_tensor_core.cc, tests/gen_tensor_core_cases.py).
 *
 * Lane l's place in a fragment: groupID g = l >> 2, threadID_in_group t = l % 4.
 *   A (16x16, .row), elements a0..a7 in four .f16x2 registers (a0 the low half of register 0):
 *       row g for a0, a1, a4, a5; g + 8 for a2, a3, a6, a7
 *       col 2t + (i & 1) for i < 4; 2t + (i & 1) + 8 for i >= 4
 *   B (16x8, .col), b0..b3 in two registers: row (k) 2t + (i & 1) for i < 2, + 8 for i >= 2;
 *       col (n) g
 *   C, D (16x8, f32), c0..c3: row g for i < 2, g + 8 for i >= 2; col 2t + (i & 1)
 *   ldmatrix: lanes 8j..8j+7 give the addresses of rows 0..7 of matrix j (16 bytes each, 16-byte
 *       aligned); lane l gets in register j elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1)
 *       of matrix j (low half first); with .trans, elements (2 (l % 4), l / 4) and
 *       (2 (l % 4) + 1, l / 4).
 *
 * Arithmetic: the products of f16 or bf16 values are exact in double and so is their sum of 16
 * here; D = C + that sum, rounded once to f32. NVIDIA does not specify the order or the internal
 * precision of the accumulation (only that it is at least f32), so tandem's bounds count one f32
 * rounding per term of every dot product, which covers this and the hardware's. */
#include "emu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_emu.h"

namespace tdm_emu {

const char *tc_op_name(int op) {
    static const char *const names[] = {
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "ldmatrix.sync.aligned.m8n8.x1.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"};
    return op >= 0 && op < tc_op_count ? names[op] : "tensor-core op";
}

// IEEE binary16 bits to their (exact) value.
static double f16_value(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 0) v = ldexp((double)man, -24);                       // subnormal or zero
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexp((double)(man | 1024), exp - 25);
    return sign ? -v : v;
}

// bfloat16 bits: the high half of an f32.
static double bf16_value(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

// Element i (0..7 of A, 0..3 of B) of a lane's registers: register i / 2, low half for even i.
static uint16_t half_of(const uint32_t *regs, int i) {
    return (uint16_t)(regs[i / 2] >> (16 * (i & 1)));
}

static void mma_16816(bool bf16, const void *const in[32], void *const out[32]) {
    double A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const tc_mma_in *x = (const tc_mma_in *)in[l];
        const int g = l >> 2, t = l & 3;
        for (int i = 0; i < 8; i++) {
            const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
            const int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            const uint16_t h = half_of(x->a, i);
            A[row][col] = bf16 ? bf16_value(h) : f16_value(h);
        }
        for (int i = 0; i < 4; i++) {
            const int k = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            const uint16_t h = half_of(x->b, i);
            B[k][g] = bf16 ? bf16_value(h) : f16_value(h);
        }
        for (int i = 0; i < 4; i++) C[i < 2 ? g : g + 8][2 * t + (i & 1)] = x->c[i];
    }
    for (int l = 0; l < 32; l++) {
        float *d = (float *)out[l];
        const int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++) {
            const int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
            double sum = 0;
            for (int k = 0; k < 16; k++) sum += A[row][k] * B[k][col];
            d[i] = (float)(C[row][col] + sum);
        }
    }
}

static int ldmatrix_count(int op) {
    switch (op) {
        case tc_ldmatrix_x1:
        case tc_ldmatrix_x1_trans: return 1;
        case tc_ldmatrix_x2:
        case tc_ldmatrix_x2_trans: return 2;
        default: return 4;
    }
}

void ldmatrix_check(const char *file, int line, int op, const void *row, int lane) {
    // Only the lanes whose addresses the instruction uses (8 per matrix) must give valid ones.
    if (lane >= 8 * ldmatrix_count(op)) return;
    if ((uintptr_t)row % 16 != 0) {
        char what[224];
        snprintf(what, sizeof what, "%s: lane %d's row address %p is not 16-byte aligned",
                 tc_op_name(op), lane, row);
        kernel_trap(what, file, line);
    }
}

static void ldmatrix(int op, const void *const in[32], void *const out[32]) {
    const int n = ldmatrix_count(op);
    const bool trans = op >= tc_ldmatrix_x1_trans;
    for (int l = 0; l < 32; l++) {
        uint32_t *r = (uint32_t *)out[l];
        for (int j = 0; j < n; j++) {
            uint16_t h[2];
            for (int e = 0; e < 2; e++) {
                const int row = trans ? 2 * (l % 4) + e : l / 4;
                const int col = trans ? l / 4 : 2 * (l % 4) + e;
                memcpy(&h[e], (const char *)in[8 * j + row] + 2 * col, 2);
            }
            r[j] = (uint32_t)h[0] | (uint32_t)h[1] << 16;
        }
    }
}

void tc_complete(int op, const void *const in[32], void *const out[32], int warp_base) {
    const int matrices = op >= tc_ldmatrix_x1 ? ldmatrix_count(op) : 0;
    if (tl_watch & 1) counters_tensor_op(op, in, matrices, warp_base);
    if (tl_watch & 2)   // ldmatrix reads its rows from shared memory: lane l gives row l
        for (int l = 0; l < 8 * matrices; l++) racecheck_access(in[l], 16, false, warp_base + l);
    switch (op) {
        case tc_mma_m16n8k16_f16: mma_16816(false, in, out); break;
        case tc_mma_m16n8k16_bf16: mma_16816(true, in, out); break;
        default: ldmatrix(op, in, out); break;
    }
}

}  // namespace tdm_emu

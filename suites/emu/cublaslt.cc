/* cublaslt.cc — the emulated device's cuBLASLt, plus the few cuBLAS helpers tandem links
 * (cublasGetStatusName/String, cublasGetProperty): handles, matrix layouts, matmul descriptors,
 * heuristic preferences, cublasLtMatmulAlgoGetHeuristic, and cublasLtMatmul computed on the CPU in
 * stream order (tdm_emu::enqueue), every operand first checked against the device allocations.
 *
 * The semantics are NVIDIA's documented ones (the cuBLASLt API reference and the comments of
 * cublasLt.h, which carry the same attribute tables), written without looking at how tandem uses
 * them:
 *   D = epilogue(alpha op(A) op(B) + beta C), column-major by default (CUBLASLT_ORDER_ROW also
 *   taken), op(A) m x k, op(B) k x n, C and D m x n; strided batches (BATCH_COUNT,
 *   STRIDED_BATCH_OFFSET in elements, 0 broadcasts an operand); beta == 0 never reads C; C may be
 *   D (same layout then). BIAS adds a packed bias of D's rows (broadcast over columns, per batch at
 *   BIAS_BATCH_STRIDE) before the activation; RELU is max(x, 0); GELU is the tanh approximation
 *   (cuBLASLt's, as PyTorch's _addmm_activation notes, pytorch/pytorch#104061); BGRADA writes the
 *   sum over k of op(A)'s rows (length m), BGRADB the sum over k of op(B)'s columns (length n),
 *   into the bias pointer, in the bias type (D's by default).
 *   GELU_AUX(_BIAS) also writes GELU's input (after the bias) to the aux buffer, and DGELU
 *   multiplies the result by GELU'(aux) (the tanh form's derivative): the aux matrix is m x n,
 *   column-major at EPILOGUE_AUX_LD (divisible by 8, at least m) and EPILOGUE_AUX_BATCH_STRIDE
 *   (divisible by 8), of D's type (EPILOGUE_AUX_DATA_TYPE unset or D's); the value stored is the
 *   compute-type pre-activation rounded once, and GELU (or the product) uses the unrounded one.
 *   DGELU_BGRAD is not emulated: cublasLt.h says it applies "independently GELU and Bias gradient
 *   to matmul output", which leaves open whether the bias gradient sums the product before or
 *   after GELU' (its reason for being suggests after); a GPU should settle it first.
 *   The type combinations are those of the documented table for regular (non-fp8, real) matmuls:
 *     compute                          scale  A = B   C = D
 *     16F, 16F_PEDANTIC                16F    16F     16F
 *     32F, 32F_PEDANTIC                32F    16F     16F or 32F
 *                                      32F    16BF    16BF or 32F
 *                                      32F    32F     32F
 *     32F_FAST_16F / _16BF / _TF32     32F    32F     32F
 *     64F, 64F_PEDANTIC                64F    64F     64F
 *   Anything else (int8, fp8, complex, emulated compute types, the ReLU bit-mask epilogues,
 *   DGELU_BGRAD, pointer arrays,
 *   vector alpha) is CUBLAS_STATUS_NOT_SUPPORTED: a heuristic with no result, as on a GPU that has
 *   no kernel for it. Inconsistent problems (ld < rows, shapes that do not chain, batch counts that
 *   differ, a bad attribute size) are CUBLAS_STATUS_INVALID_VALUE, with the reason on stderr.
 *
 * Numerics: f16/bf16 inputs are exact in f32 and accumulate in f32; FAST_TF32 rounds f32 inputs to
 * TF32 (10-bit mantissa, round to nearest, ties away from zero, as cvt.rna.tf32.f32), FAST_16F and
 * FAST_16BF to half / bfloat16 (nearest even); 64F is double throughout; 16F compute rounds the
 * running sum to half after every step. Dot products run in k order; alpha, beta, bias and the
 * activation are applied in the compute type; D (and a bias gradient) is rounded once.
 *
 * Where a GPU is free to choose, the emulator takes the choice that shows a caller's mistakes:
 * for k >= kSplitKMin the heuristic offers split-K (two halves of k) with every reduction scheme
 * the preference's REDUCTION_SCHEME_MASK allows, output-type schemes first (OUTPUT_TYPE and INPLACE
 * round each half to D's type before they are summed: an f16 product asked without a mask loses
 * what a GPU may lose); the partial sums really go through the workspace, so a workspace freed or
 * reused too early is caught. An algorithm remembers the alignments it was chosen for
 * (MIN_ALIGNMENT_*, capped at 16 bytes; the bias pointer's own alignment), and cublasLtMatmul
 * refuses pointers less aligned.
 * Descriptors are snapshotted at the call: a descriptor changed or destroyed after cublasLtMatmul
 * returns does not change the queued (or graph-captured) product. */
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_set>
#include <vector>

#include "emu.h"

// The handle type cublasLt.h leaves incomplete.
struct cublasLtContext {
    uint64_t magic;
};

namespace {

constexpr uint64_t kHandleMagic = 0x4c54484e444c4531ull;   // "LTHNDLE1"
constexpr uint64_t kLayoutMagic = 0x4c544c41594f5531ull;
constexpr uint64_t kDescMagic = 0x4c544d4d44455331ull;
constexpr uint64_t kPrefMagic = 0x4c5450524546531ull;
constexpr uint64_t kAlgoMagic = 0x4c54414c474f5331ull;

// Split-K is offered from this k on (two halves: [0, ceil(k/2)) and the rest).
constexpr int64_t kSplitKMin = 16;

// ---------------------------------------------------------------------------------------------
// messages

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tandem emu: cuBLASLt: %s\n", buf);
}

// NOT_SUPPORTED is an answer callers handle (a fallback), so its reason is printed only with
// CUBLASLT_LOG_LEVEL >= 1, as the real library logs; INVALID_VALUE is a caller's bug, always said.
bool log_on() {
    static const int level = [] {
        const char *s = getenv("CUBLASLT_LOG_LEVEL");
        return s ? atoi(s) : 0;
    }();
    return level >= 1;
}

// ---------------------------------------------------------------------------------------------
// number formats (bit-exact, independent of cuda_fp16.h's host paths)

float bits_float(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}
uint32_t float_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {   // zero or subnormal: mant * 2^-24
        const float f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

// Round to nearest even; overflow to infinity, NaN stays NaN (quiet).
uint16_t float_to_half(float f) {
    const uint32_t x = float_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00;
    if (ax >= 0x477ff000u) return sign | 0x7c00;   // >= 65520: rounds to infinity
    if (ax < 0x38800000u) {                          // below 2^-14: a subnormal (or zero) half
        const float r = nearbyintf(bits_float(ax) * 16777216.0f);   // units of 2^-24 (exact)
        return (uint16_t)(sign | (uint16_t)r);
    }
    uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffffu) >> 13));
    const uint32_t rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

uint16_t float_to_bf16(float f) {
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

// TF32: 10 explicit mantissa bits, round to nearest with ties away from zero (cvt.rna.tf32.f32).
float round_tf32(float f) {
    uint32_t x = float_bits(f);
    if ((x & 0x7f800000u) == 0x7f800000u) return f;   // inf, NaN
    x += 0x1000u;
    x &= 0xffffe000u;
    return bits_float(x);
}

float round_half(float f) { return half_to_float(float_to_half(f)); }
float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

size_t type_size(int t) {
    switch (t) {
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    default: return 0;
    }
}

const char *type_name(int t) {
    switch (t) {
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
    default: return "(a type the emulator does not compute)";
    }
}

double load(int t, const void *base, int64_t i) {
    const char *p = (const char *)base;
    switch (t) {
    case CUDA_R_16F: {
        uint16_t v;
        memcpy(&v, p + i * 2, 2);
        return half_to_float(v);
    }
    case CUDA_R_16BF: {
        uint16_t v;
        memcpy(&v, p + i * 2, 2);
        return bf16_to_float(v);
    }
    case CUDA_R_32F: {
        float v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    default: {
        double v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    }
}

// v is a float's value unless t is CUDA_R_64F (64F compute only meets 64F data): one rounding.
void store(int t, void *base, int64_t i, double v) {
    char *p = (char *)base;
    switch (t) {
    case CUDA_R_16F: {
        const uint16_t h = float_to_half((float)v);
        memcpy(p + i * 2, &h, 2);
        break;
    }
    case CUDA_R_16BF: {
        const uint16_t h = float_to_bf16((float)v);
        memcpy(p + i * 2, &h, 2);
        break;
    }
    case CUDA_R_32F: {
        const float f = (float)v;
        memcpy(p + i * 4, &f, 4);
        break;
    }
    default: memcpy(p + i * 8, &v, 8); break;
    }
}

// A value rounded to type t and back (the output-type reduction schemes).
double round_to(int t, double v) {
    switch (t) {
    case CUDA_R_16F: return round_half((float)v);
    case CUDA_R_16BF: return round_bf16((float)v);
    case CUDA_R_32F: return (float)v;
    default: return v;
    }
}

// ---------------------------------------------------------------------------------------------
// descriptors: kept inside the header's semi-opaque structs (so *Init_internal works too), read
// and written through memcpy

struct Layout {
    uint64_t magic;
    uint32_t type;
    int32_t order;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    uint32_t batch_mode;
    int64_t stride;
    int64_t plane_offset;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits");

struct Desc {
    uint64_t magic;
    int32_t compute, scale, pointer_mode, transa, transb, transc, fill;
    uint32_t epilogue;
    int32_t bias_type, aux_type, sm_count;
    int32_t scale_mode[5];   // A, B, C, D, aux
    int32_t d_out_scale_mode;
    int8_t fast_accum;
    const void *bias;
    const void *aux;
    const void *scale_ptr[4];   // A, B, C, D
    const void *amax_d, *aux_scale, *aux_amax, *d_out_scale, *emulation;
    int64_t bias_stride, aux_ld, aux_stride, alpha_stride;
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t), "desc fits");

struct Pref {
    uint64_t magic;
    uint32_t search_mode;
    uint32_t scheme_mask;
    uint64_t max_workspace;
    uint32_t align[4];   // A, B, C, D
    float max_waves;
    uint64_t impl_mask;
};
static_assert(sizeof(Pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "pref fits");

struct Algo {
    uint64_t magic;
    uint32_t scheme;   // cublasLtReductionScheme_t
    uint32_t splits;   // 1, or 2 (split-K)
    uint32_t align[6]; // A, B, C, D, bias, aux: the alignment (bytes) the algorithm was chosen for
};
static_assert(sizeof(Algo) <= sizeof(cublasLtMatmulAlgo_t), "algo fits");

// The objects Create made and Destroy has not freed: a second Destroy (or one of an object
// *Init_internal placed in the caller's memory) is refused without touching the memory.
std::mutex live_lock;
std::unordered_set<const void *> &live() {
    // never freed: Destroy may run from static destructors after this file's statics are gone
    static std::unordered_set<const void *> *set = new std::unordered_set<const void *>;
    return *set;
}
void live_add(const void *o) {
    std::lock_guard<std::mutex> g(live_lock);
    live().insert(o);
}
bool live_remove(const void *o) {
    std::lock_guard<std::mutex> g(live_lock);
    return live().erase(o) == 1;
}

template <typename T, typename O> bool get(const O *o, uint64_t magic, T *out) {
    if (!o) return false;
    memcpy(out, o, sizeof *out);
    return out->magic == magic;
}
template <typename T, typename O> void put(O *o, const T &v) { memcpy((void *)o, &v, sizeof v); }

Layout layout_default(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    Layout l;
    memset(&l, 0, sizeof l);
    l.magic = kLayoutMagic;
    l.type = (uint32_t)type;
    l.order = CUBLASLT_ORDER_COL;
    l.rows = rows, l.cols = cols, l.ld = ld;
    l.batch = 1;
    l.batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
    return l;
}

Desc desc_default(cublasComputeType_t compute, cudaDataType_t scale) {
    Desc d;
    memset(&d, 0, sizeof d);
    d.magic = kDescMagic;
    d.compute = compute;
    d.scale = scale;
    d.pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d.transa = d.transb = d.transc = CUBLAS_OP_N;
    d.fill = CUBLAS_FILL_MODE_FULL;
    d.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d.bias_type = d.aux_type = -1;
    return d;
}

Pref pref_default() {
    Pref p;
    memset(&p, 0, sizeof p);
    p.magic = kPrefMagic;
    p.search_mode = CUBLASLT_SEARCH_BEST_FIT;
    p.scheme_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    p.max_workspace = 0;
    for (int i = 0; i < 4; i++) p.align[i] = 256;
    p.impl_mask = ~(uint64_t)0;
    return p;
}

// An attribute's storage: where it lives in the struct and its documented size.
struct Field {
    void *at;
    size_t size;
};

Field layout_field(Layout *l, int attr) {
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return {&l->type, 4};
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return {&l->order, 4};
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return {&l->rows, 8};
    case CUBLASLT_MATRIX_LAYOUT_COLS: return {&l->cols, 8};
    case CUBLASLT_MATRIX_LAYOUT_LD: return {&l->ld, 8};
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return {&l->batch, 4};
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return {&l->stride, 8};
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return {&l->plane_offset, 8};
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: return {&l->batch_mode, 4};
    default: return {nullptr, 0};
    }
}

Field desc_field(Desc *d, int attr) {
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return {&d->compute, 4};
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return {&d->scale, 4};
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return {&d->pointer_mode, 4};
    case CUBLASLT_MATMUL_DESC_TRANSA: return {&d->transa, 4};
    case CUBLASLT_MATMUL_DESC_TRANSB: return {&d->transb, 4};
    case CUBLASLT_MATMUL_DESC_TRANSC: return {&d->transc, 4};
    case CUBLASLT_MATMUL_DESC_FILL_MODE: return {&d->fill, 4};
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return {&d->epilogue, 4};
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return {&d->bias, sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return {&d->bias_stride, 8};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return {&d->aux, sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return {&d->aux_ld, 8};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return {&d->aux_stride, 8};
    case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE: return {&d->alpha_stride, 8};
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return {&d->sm_count, 4};
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return {&d->scale_ptr[0], sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return {&d->scale_ptr[1], sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return {&d->scale_ptr[2], sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return {&d->scale_ptr[3], sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return {&d->amax_d, sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return {&d->aux_type, 4};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER: return {&d->aux_scale, sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER: return {&d->aux_amax, sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return {&d->fast_accum, 1};
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return {&d->bias_type, 4};
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return {&d->scale_mode[0], 4};
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return {&d->scale_mode[1], 4};
    case CUBLASLT_MATMUL_DESC_C_SCALE_MODE: return {&d->scale_mode[2], 4};
    case CUBLASLT_MATMUL_DESC_D_SCALE_MODE: return {&d->scale_mode[3], 4};
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE: return {&d->scale_mode[4], 4};
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER: return {&d->d_out_scale, sizeof(void *)};
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE: return {&d->d_out_scale_mode, 4};
    case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR: return {&d->emulation, sizeof(void *)};
    default: return {nullptr, 0};
    }
}

Field pref_field(Pref *p, int attr) {
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return {&p->search_mode, 4};
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return {&p->max_workspace, 8};
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return {&p->scheme_mask, 4};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return {&p->align[0], 4};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return {&p->align[1], 4};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return {&p->align[2], 4};
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return {&p->align[3], 4};
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return {&p->max_waves, 4};
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: return {&p->impl_mask, 8};
    default: return {nullptr, 0};
    }
}

// The documented Set/GetAttribute contract, for any of the three descriptor kinds.
cublasStatus_t set_field(Field f, const void *buf, size_t size) {
    if (!f.at || !buf || size != f.size) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(f.at, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t get_field(Field f, void *buf, size_t size, size_t *written) {
    if (!f.at) return CUBLAS_STATUS_INVALID_VALUE;
    if (size == 0) {
        if (!written) return CUBLAS_STATUS_INVALID_VALUE;
        *written = f.size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != f.size) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, f.at, size);
    if (written) *written = size;
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// the problem a (desc, layouts) set describes, validated

struct Operand {
    int type;
    int32_t order;
    int64_t rows, cols, ld, stride;
    // element (r, c) of batch entry b, in elements from the base pointer
    int64_t at(int64_t b, int64_t r, int64_t c) const {
        return b * stride + (order == CUBLASLT_ORDER_COL ? r + c * ld : r * ld + c);
    }
    // bytes from the base pointer that `batch` entries span (0 when empty)
    uint64_t span(int64_t batch) const {
        if (rows == 0 || cols == 0 || batch == 0) return 0;
        const int64_t last = order == CUBLASLT_ORDER_COL ? (rows - 1) + (cols - 1) * ld
                                                         : (rows - 1) * ld + (cols - 1);
        return (uint64_t)((batch - 1) * stride + last + 1) * type_size(type);
    }
};

// ACT_DGELU: the result times GELU'(aux) (the DGELU epilogue: the gradient through the GELU whose
// input the forward's GELU_AUX(_BIAS) wrote to the aux buffer).
enum Activation { ACT_NONE, ACT_RELU, ACT_GELU, ACT_DGELU };

struct Problem {
    int64_t m, n, k, batch;
    int compute, scale;
    bool ta, tb;
    Operand a, b, c, d;
    uint32_t epilogue;
    bool bias_in;     // BIAS, RELU_BIAS, GELU_BIAS: bias (m) read
    int bias_grad;    // 0, or 'A' (BGRADA: m written) / 'B' (BGRADB: n written)
    Activation act;
    int bias_type;
    int64_t bias_len, bias_stride;
    int aux;          // 0, or 'W' (GELU_AUX(_BIAS): the pre-activation written) / 'R' (DGELU: read)
    int aux_type;     // D's type (the only one the emulator takes, as the header's default)
    int64_t aux_ld, aux_stride;   // column-major m x n per batch entry
    bool device_scalars;
    int input_round;  // 0, 'T' (TF32), 'H' (half), 'B' (bfloat16): FAST_* compute types
    bool acc_double, acc_half;

    uint64_t bias_span() const {
        if (bias_len == 0 || batch == 0) return 0;
        return (uint64_t)((batch - 1) * bias_stride + bias_len) * type_size(bias_type);
    }
    int64_t aux_at(int64_t b, int64_t r, int64_t c) const { return b * aux_stride + r + c * aux_ld; }
    uint64_t aux_span() const {
        if (!aux || m == 0 || n == 0 || batch == 0) return 0;
        return (uint64_t)aux_at(batch - 1, m - 1, n - 1) * type_size(aux_type) + type_size(aux_type);
    }
};

// What a check answers: the status, and why (printed by the caller for INVALID_VALUE, or for
// NOT_SUPPORTED under CUBLASLT_LOG_LEVEL).
struct Verdict {
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    char why[256] = "";
};

#define REFUSE(v, st, ...)                                   \
    do {                                                     \
        (v)->status = (st);                                  \
        snprintf((v)->why, sizeof (v)->why, __VA_ARGS__);    \
        return false;                                        \
    } while (0)

bool check_layout(const char *name, const Layout &l, Verdict *v) {
    if (l.order != CUBLASLT_ORDER_COL && l.order != CUBLASLT_ORDER_ROW)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "%s: order %d (the emulator computes COL and ROW)",
               name, l.order);
    if (l.batch_mode != CUBLASLT_BATCH_MODE_STRIDED)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "%s: pointer-array batches", name);
    if (l.plane_offset != 0)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "%s: planar complex layout", name);
    if (type_size((int)l.type) == 0)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "%s: data type %u", name, l.type);
    if (l.rows > INT32_MAX || l.cols > INT32_MAX)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "%s: %llu x %llu is past int32", name,
               (unsigned long long)l.rows, (unsigned long long)l.cols);
    // ld: "non-negative ... large enough so that matrix memory locations are not overlapping
    // (e.g. greater or equal to CUBLASLT_MATRIX_LAYOUT_ROWS in case of CUBLASLT_ORDER_COL)"
    const uint64_t need = l.order == CUBLASLT_ORDER_COL ? l.rows : l.cols;
    if (l.ld < 0 || (uint64_t)l.ld < (need > 1 ? need : 1))
        REFUSE(v, CUBLAS_STATUS_INVALID_VALUE,
               "%s: leading dimension %lld < %llu (%s order, %llu x %llu)", name, (long long)l.ld,
               (unsigned long long)(need > 1 ? need : 1),
               l.order == CUBLASLT_ORDER_COL ? "column" : "row", (unsigned long long)l.rows,
               (unsigned long long)l.cols);
    if (l.batch < 1) REFUSE(v, CUBLAS_STATUS_INVALID_VALUE, "%s: batch count %d", name, l.batch);
    if (l.stride < 0)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "%s: negative batch stride %lld", name,
               (long long)l.stride);
    return true;
}

Operand operand_of(const Layout &l) {
    Operand o;
    o.type = (int)l.type;
    o.order = l.order;
    o.rows = (int64_t)l.rows, o.cols = (int64_t)l.cols, o.ld = l.ld;
    o.stride = l.batch > 1 ? l.stride : 0;
    return o;
}

bool is_float_family(int compute) {
    return compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
           compute == CUBLAS_COMPUTE_32F_FAST_16F || compute == CUBLAS_COMPUTE_32F_FAST_16BF ||
           compute == CUBLAS_COMPUTE_32F_FAST_TF32;
}

// The documented type table (see the top of the file).
bool types_supported(int compute, int scale, int ab, int cd) {
    switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        return scale == CUDA_R_16F && ab == CUDA_R_16F && cd == CUDA_R_16F;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        if (scale != CUDA_R_32F) return false;
        if (ab == CUDA_R_16F) return cd == CUDA_R_16F || cd == CUDA_R_32F;
        if (ab == CUDA_R_16BF) return cd == CUDA_R_16BF || cd == CUDA_R_32F;
        return ab == CUDA_R_32F && cd == CUDA_R_32F;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        return scale == CUDA_R_32F && ab == CUDA_R_32F && cd == CUDA_R_32F;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
        return scale == CUDA_R_64F && ab == CUDA_R_64F && cd == CUDA_R_64F;
    default: return false;
    }
}

// Builds the problem from the descriptors; false with the verdict when it is refused.
bool make_problem(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t ad, cublasLtMatrixLayout_t bd,
                  cublasLtMatrixLayout_t cd, cublasLtMatrixLayout_t dd, Problem *p, Desc *desc,
                  Verdict *v) {
    Layout la, lb, lc, ld;
    if (!get(op, kDescMagic, desc))
        REFUSE(v, CUBLAS_STATUS_INVALID_VALUE, "the matmul descriptor is NULL or not live");
    if (!get(ad, kLayoutMagic, &la) || !get(bd, kLayoutMagic, &lb) ||
        !get(dd, kLayoutMagic, &ld))
        REFUSE(v, CUBLAS_STATUS_INVALID_VALUE, "a layout (A, B or D) is NULL or not live");
    if (!cd) lc = ld;   // "if Cdesc is omitted, it is assumed equal to Ddesc"
    else if (!get(cd, kLayoutMagic, &lc))
        REFUSE(v, CUBLAS_STATUS_INVALID_VALUE, "layout C is not live");
    if (!check_layout("A", la, v) || !check_layout("B", lb, v) || !check_layout("C", lc, v) ||
        !check_layout("D", ld, v))
        return false;

    const Desc &d = *desc;
    for (int32_t t : {d.transa, d.transb})
        if (t != CUBLAS_OP_N && t != CUBLAS_OP_T && t != CUBLAS_OP_C)
            REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "transpose %d", t);
    if (d.transc != CUBLAS_OP_N)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC must be CUBLAS_OP_N");
    if (d.fill != CUBLAS_FILL_MODE_FULL)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "fill mode %d (only FULL)", d.fill);
    if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST &&
        d.pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "pointer mode %d (vector alpha)", d.pointer_mode);
    for (const void *q : {d.scale_ptr[0], d.scale_ptr[1], d.scale_ptr[2], d.scale_ptr[3],
                          d.amax_d, d.aux_scale, d.aux_amax, d.d_out_scale, d.emulation})
        if (q) REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "scale / amax / emulation pointers (fp8)");

    if (la.type != lb.type)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "A is %s but B is %s", type_name((int)la.type),
               type_name((int)lb.type));
    if (lc.type != ld.type)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "C is %s but D is %s", type_name((int)lc.type),
               type_name((int)ld.type));
    if (!types_supported(d.compute, d.scale, (int)la.type, (int)ld.type))
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED,
               "compute type %d, scale %s, A/B %s, C/D %s is not a supported combination",
               d.compute, type_name(d.scale), type_name((int)la.type), type_name((int)ld.type));

    p->ta = d.transa != CUBLAS_OP_N, p->tb = d.transb != CUBLAS_OP_N;
    p->a = operand_of(la), p->b = operand_of(lb), p->c = operand_of(lc), p->d = operand_of(ld);
    p->m = p->d.rows, p->n = p->d.cols;
    const int64_t am = p->ta ? p->a.cols : p->a.rows, ak = p->ta ? p->a.rows : p->a.cols;
    const int64_t bk = p->tb ? p->b.cols : p->b.rows, bn = p->tb ? p->b.rows : p->b.cols;
    p->k = ak;
    if (am != p->m || bn != p->n || bk != ak)
        REFUSE(v, CUBLAS_STATUS_INVALID_VALUE,
               "shapes do not chain: op(A) %lld x %lld, op(B) %lld x %lld, D %lld x %lld",
               (long long)am, (long long)ak, (long long)bk, (long long)bn, (long long)p->m,
               (long long)p->n);
    if (p->c.rows != p->m || p->c.cols != p->n)
        REFUSE(v, CUBLAS_STATUS_INVALID_VALUE, "C is %lld x %lld but D is %lld x %lld",
               (long long)p->c.rows, (long long)p->c.cols, (long long)p->m, (long long)p->n);
    if (lc.order != ld.order) REFUSE(v, CUBLAS_STATUS_INVALID_VALUE, "C and D differ in order");
    if (la.batch != ld.batch || lb.batch != ld.batch || lc.batch != ld.batch)
        REFUSE(v, CUBLAS_STATUS_INVALID_VALUE, "batch counts differ: A %d, B %d, C %d, D %d",
               la.batch, lb.batch, lc.batch, ld.batch);
    p->batch = ld.batch;
    // The outputs of two batch entries must not overlap (they would race on a GPU).
    if (p->batch > 1 && p->m > 0 && p->n > 0) {
        const uint64_t one = p->d.span(1) / type_size(p->d.type);
        if ((uint64_t)p->d.stride < one)
            REFUSE(v, CUBLAS_STATUS_INVALID_VALUE,
                   "D's batch stride %lld overlaps its %llu-element matrices",
                   (long long)p->d.stride, (unsigned long long)one);
    }

    p->compute = d.compute, p->scale = d.scale;
    p->device_scalars = d.pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
    p->acc_double = d.compute == CUBLAS_COMPUTE_64F || d.compute == CUBLAS_COMPUTE_64F_PEDANTIC;
    p->acc_half = d.compute == CUBLAS_COMPUTE_16F || d.compute == CUBLAS_COMPUTE_16F_PEDANTIC;
    p->input_round = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32   ? 'T'
                     : d.compute == CUBLAS_COMPUTE_32F_FAST_16F  ? 'H'
                     : d.compute == CUBLAS_COMPUTE_32F_FAST_16BF ? 'B'
                                                                 : 0;

    p->epilogue = d.epilogue;
    p->bias_in = false, p->bias_grad = 0, p->act = ACT_NONE, p->aux = 0;
    switch (d.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: break;
    case CUBLASLT_EPILOGUE_RELU: p->act = ACT_RELU; break;
    case CUBLASLT_EPILOGUE_GELU: p->act = ACT_GELU; break;
    case CUBLASLT_EPILOGUE_BIAS: p->bias_in = true; break;
    case CUBLASLT_EPILOGUE_RELU_BIAS: p->bias_in = true, p->act = ACT_RELU; break;
    case CUBLASLT_EPILOGUE_GELU_BIAS: p->bias_in = true, p->act = ACT_GELU; break;
    case CUBLASLT_EPILOGUE_BGRADA: p->bias_grad = 'A'; break;
    case CUBLASLT_EPILOGUE_BGRADB: p->bias_grad = 'B'; break;
    case CUBLASLT_EPILOGUE_GELU_AUX: p->act = ACT_GELU, p->aux = 'W'; break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: p->bias_in = true, p->act = ACT_GELU, p->aux = 'W'; break;
    case CUBLASLT_EPILOGUE_DGELU: p->act = ACT_DGELU, p->aux = 'R'; break;
    default:   // the ReLU bit-mask epilogues, and DGELU_BGRAD (see the top of the file)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED,
               "epilogue %u (the emulator's aux-buffer epilogues are GELU_AUX, GELU_AUX_BIAS and "
               "DGELU)", d.epilogue);
    }
    p->aux_type = (int)ld.type, p->aux_ld = d.aux_ld, p->aux_stride = p->batch > 1 ? d.aux_stride : 0;
    if (p->aux) {
        // cublasLt.h, EPILOGUE_AUX_LD and _BATCH_STRIDE: "GELU input matrix leading dimension in
        // elements ... Must be divisible by 8 and be no less than the number of rows in the
        // output matrix"; the batch stride "Must be divisible by 8".
        if (d.aux_type != -1 && d.aux_type != (int)ld.type)
            REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "aux type %s beside D of %s",
                   type_name(d.aux_type), type_name((int)ld.type));
        if (ld.order != CUBLASLT_ORDER_COL)
            REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "an aux epilogue with a row-major D");
        if (p->aux_ld % 8 != 0 || p->aux_ld < (p->m > 1 ? p->m : 1))
            REFUSE(v, CUBLAS_STATUS_INVALID_VALUE,
                   "EPILOGUE_AUX_LD %lld: must be divisible by 8 and at least D's %lld rows",
                   (long long)p->aux_ld, (long long)p->m);
        if (p->aux_stride % 8 != 0 || p->aux_stride < 0)
            REFUSE(v, CUBLAS_STATUS_INVALID_VALUE,
                   "EPILOGUE_AUX_BATCH_STRIDE %lld: must be divisible by 8",
                   (long long)p->aux_stride);
        if (p->aux == 'W' && p->batch > 1 && p->aux_stride < p->aux_ld * p->n)
            REFUSE(v, CUBLAS_STATUS_INVALID_VALUE,
                   "EPILOGUE_AUX_BATCH_STRIDE %lld overlaps the %lld x %lld aux matrices",
                   (long long)p->aux_stride, (long long)p->m, (long long)p->n);
    }
    p->bias_len = p->bias_in || p->bias_grad == 'A' ? p->m : p->bias_grad == 'B' ? p->n : 0;
    p->bias_stride = p->batch > 1 ? d.bias_stride : 0;
    // The bias (gradient) has D's type unless BIAS_DATA_TYPE says otherwise; the emulator also
    // takes an f32 bias beside an f16/bf16 D (the fp32-bias variant); nothing else.
    p->bias_type = d.bias_type == -1 ? (int)ld.type : d.bias_type;
    if (p->bias_len && p->bias_type != (int)ld.type &&
        !(p->bias_type == CUDA_R_32F && (ld.type == CUDA_R_16F || ld.type == CUDA_R_16BF)))
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "bias type %s beside D of %s",
               type_name(p->bias_type), type_name((int)ld.type));
    if (p->bias_stride < 0)
        REFUSE(v, CUBLAS_STATUS_NOT_SUPPORTED, "negative bias batch stride");
    return true;
}

void tell(const char *call, const Verdict &v) {
    if (v.status == CUBLAS_STATUS_INVALID_VALUE || log_on())
        say("%s: %s: %s", call, cublasGetStatusName(v.status), v.why);
}

// cublasLtMatmul's own refusals: INVALID_VALUE, said.
cublasStatus_t invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
cublasStatus_t invalid(const char *fmt, ...) {
    Verdict v;
    v.status = CUBLAS_STATUS_INVALID_VALUE;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v.why, sizeof v.why, fmt, ap);
    va_end(ap);
    tell("cublasLtMatmul", v);
    return v.status;
}

// ---------------------------------------------------------------------------------------------
// algorithms: a reduction scheme and a split count

size_t acc_size(const Problem &p) { return p.acc_double ? 8 : p.acc_half ? 2 : 4; }

// Workspace the scheme needs for this problem: the two partial sums of every output element.
size_t workspace_need(const Problem &p, uint32_t scheme, uint32_t splits) {
    if (splits < 2 || scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE ||
        scheme == CUBLASLT_REDUCTION_SCHEME_NONE)
        return 0;
    const size_t elem = scheme == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE ? type_size(p.d.type)
                                                                        : acc_size(p);
    const size_t bytes = (size_t)splits * (size_t)p.m * (size_t)p.n * (size_t)p.batch * elem;
    return (bytes + 255) / 256 * 256;
}

uint32_t align_of(const void *ptr) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)ptr % a) a /= 2;
    return a;
}

// The algorithms for p under preference f, best first (see the top of the file for the order).
int candidates(const Problem &p, const Pref &f, const void *bias, const void *aux, Algo *out,
               size_t *ws, int max_out) {
    // An algorithm reads X with X's own element alignment at least: a preference below it
    // excludes every algorithm.
    const int types[4] = {p.a.type, p.b.type, p.c.type, p.d.type};
    Algo base;
    memset(&base, 0, sizeof base);
    base.magic = kAlgoMagic;
    for (int i = 0; i < 4; i++) {
        if (f.align[i] < type_size(types[i])) return 0;
        base.align[i] = f.align[i] < 16 ? f.align[i] : 16;
    }
    const uint32_t ba = align_of(bias);
    if (p.bias_len && ba < type_size(p.bias_type)) return 0;
    base.align[4] = ba < 16 ? ba : 16;
    const uint32_t xa = align_of(aux);   // "depend on its value to determine expected alignment"
    if (p.aux && xa < type_size(p.aux_type)) return 0;
    base.align[5] = xa < 16 ? xa : 16;

    int n = 0;
    auto offer = [&](uint32_t scheme, uint32_t splits) {
        if (n >= max_out) return;
        const size_t need = workspace_need(p, scheme, splits);
        if (need > f.max_workspace) return;
        out[n] = base;
        out[n].scheme = scheme;
        out[n].splits = splits;
        ws[n] = need;
        n++;
    };
    if (p.k >= kSplitKMin) {
        for (uint32_t scheme :
             {CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, CUBLASLT_REDUCTION_SCHEME_INPLACE,
              CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE})
            if (f.scheme_mask & scheme) offer(scheme, 2);
    }
    offer(CUBLASLT_REDUCTION_SCHEME_NONE, 1);   // never filtered: the mask names split-K schemes
    return n;
}

// ---------------------------------------------------------------------------------------------
// the product, run as a work item

struct Job {
    Problem p;
    const void *a, *b, *c;
    void *d;
    void *bias;
    void *aux;        // GELU_AUX(_BIAS): written; DGELU: read
    void *ws;
    uint32_t scheme, splits;
    double alpha, beta;                  // host pointer mode: read at the call
    const void *alpha_ptr, *beta_ptr;    // device pointer mode: read when the work runs
};

double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
// d/dx of the tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2),
// t = tanh(sqrt(2/pi) (x + 0.044715 x^3))
template <typename T> T gelu_tanh_grad(T x) {
    const T k0 = (T)0.7978845608028654, k1 = (T)0.044715;
    const T t = std::tanh(k0 * (x + k1 * x * x * x));
    return (T)0.5 * (1 + t) + (T)0.5 * x * (1 - t * t) * k0 * (1 + 3 * k1 * x * x);
}

template <typename Acc> void run_entry(const Job &j, int64_t bi, Acc alpha, Acc beta) {
    const Problem &p = j.p;
    const int64_t m = p.m, n = p.n, k = p.k;
    // op(A) as rows of k, op(B) as columns of k, in the compute type (inputs are exact there)
    std::vector<Acc> a((size_t)(m * k)), bt((size_t)(n * k));
    for (int64_t i = 0; i < m; i++)
        for (int64_t l = 0; l < k; l++)
            a[(size_t)(i * k + l)] =
                (Acc)load(p.a.type, j.a, p.ta ? p.a.at(bi, l, i) : p.a.at(bi, i, l));
    for (int64_t c = 0; c < n; c++)
        for (int64_t l = 0; l < k; l++)
            bt[(size_t)(c * k + l)] =
                (Acc)load(p.b.type, j.b, p.tb ? p.b.at(bi, c, l) : p.b.at(bi, l, c));

    // bias gradients: sums over k of the operands as given (before any FAST_* rounding)
    if (p.bias_grad) {
        const std::vector<Acc> &src = p.bias_grad == 'A' ? a : bt;
        for (int64_t r = 0; r < p.bias_len; r++) {
            Acc s = 0;
            for (int64_t l = 0; l < k; l++) s += src[(size_t)(r * k + l)];
            store(p.bias_type, j.bias, bi * p.bias_stride + r, (double)s);
        }
    }
    if (p.input_round) {
        for (std::vector<Acc> *v : {&a, &bt})
            for (Acc &x : *v)
                x = p.input_round == 'T'   ? (Acc)round_tf32((float)x)
                    : p.input_round == 'H' ? (Acc)round_half((float)x)
                                           : (Acc)round_bf16((float)x);
    }

    const bool output_rounding = j.scheme == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE ||
                                 j.scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE;
    const int part_type = j.scheme == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE ? p.d.type
                          : p.acc_double                                    ? CUDA_R_64F
                          : p.acc_half                                      ? CUDA_R_16F
                                                                            : CUDA_R_32F;
    const int64_t half_k = (k + 1) / 2;
    for (int64_t c = 0; c < n; c++) {
        for (int64_t r = 0; r < m; r++) {
            const Acc *x = &a[(size_t)(r * k)], *y = &bt[(size_t)(c * k)];
            auto dot = [&](int64_t l0, int64_t l1) {
                Acc s = 0;
                if (p.acc_half)
                    for (int64_t l = l0; l < l1; l++) s = (Acc)round_half((float)(s + x[l] * y[l]));
                else
                    for (int64_t l = l0; l < l1; l++) s += x[l] * y[l];
                return s;
            };
            Acc acc;
            if (j.splits < 2) {
                acc = dot(0, k);
            } else {
                Acc part[2] = {dot(0, half_k), dot(half_k, k)};
                for (int s = 0; s < 2; s++) {
                    if (output_rounding) part[s] = (Acc)round_to(p.d.type, (double)part[s]);
                    if (j.ws) {   // the partial sums live in the workspace until reduced
                        const int64_t slot = ((bi * n + c) * m + r) * 2 + s;
                        store(part_type, j.ws, slot, (double)part[s]);
                        part[s] = (Acc)load(part_type, j.ws, slot);
                    }
                }
                acc = part[0] + part[1];
            }
            Acc v = alpha * acc;
            if (beta != 0) v += beta * (Acc)load(p.c.type, j.c, p.c.at(bi, r, c));
            if (p.bias_in) v += (Acc)load(p.bias_type, j.bias, bi * p.bias_stride + r);
            if (p.aux == 'W') store(p.aux_type, j.aux, p.aux_at(bi, r, c), (double)v);
            if (p.act == ACT_RELU) v = v > 0 ? v : 0;   // max(x, 0): NaN gives 0 as on a GPU
            else if (p.act == ACT_GELU) v = gelu_tanh(v);
            else if (p.act == ACT_DGELU)
                v *= gelu_tanh_grad((Acc)load(p.aux_type, j.aux, p.aux_at(bi, r, c)));
            if (p.acc_half) v = (Acc)round_half((float)v);
            store(p.d.type, j.d, p.d.at(bi, r, c), (double)v);
        }
    }
}

void run_job(const Job &j) {
    double alpha = j.alpha, beta = j.beta;
    if (j.p.device_scalars) {
        alpha = load(j.p.scale, j.alpha_ptr, 0);
        beta = load(j.p.scale, j.beta_ptr, 0);
    }
    for (int64_t bi = 0; bi < j.p.batch; bi++) {
        if (j.p.acc_double) run_entry<double>(j, bi, alpha, beta);
        else run_entry<float>(j, bi, (float)alpha, (float)beta);
    }
}

bool range_ok(const void *ptr, uint64_t bytes, int device, const char *what, const Operand *o,
              int64_t batch) {
    if (bytes == 0) return true;
    char buf[256];
    if (o)
        snprintf(buf, sizeof buf,
                 "cublasLtMatmul %s (%lld x %lld %s, ld %lld, batch %lld, stride %lld: %llu bytes)",
                 what, (long long)o->rows, (long long)o->cols, type_name(o->type), (long long)o->ld,
                 (long long)batch, (long long)o->stride, (unsigned long long)bytes);
    else
        snprintf(buf, sizeof buf, "cublasLtMatmul %s (%llu bytes)", what,
                 (unsigned long long)bytes);
    return tdm_emu::check_device_range(ptr, (size_t)bytes, device, buf);
}

}   // namespace

// =============================================================================================
// the API

extern "C" {

const char *CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    default: return "unknown error";
    }
}

cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int *value) {
    if (!value) return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

const char *CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
    return cublasGetStatusName(status);
}
const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
    return cublasGetStatusString(status);
}

// The version of the headers the emulator was built against: major*10000 + minor*100 + patch.
size_t CUBLASWINAPI cublasLtGetVersion(void) { return CUBLAS_VERSION; }
size_t CUBLASWINAPI cublasLtGetCudartVersion(void) { return CUDART_VERSION; }
cublasStatus_t CUBLASWINAPI cublasLtGetProperty(libraryPropertyType type, int *value) {
    return cublasGetProperty(type, value);
}

// ---- handle

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtContext *h = new (std::nothrow) cublasLtContext;
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = kHandleMagic;
    live_add(h);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t handle) {
    if (!handle || !live_remove(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->magic = 0;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- matrix layouts

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t l,
                                                              size_t size, cudaDataType type,
                                                              uint64_t rows, uint64_t cols,
                                                              int64_t ld) {
    if (!l || size < sizeof(Layout)) return CUBLAS_STATUS_ALLOC_FAILED;
    put(l, layout_default(type, rows, cols, ld));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
    if (!l) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatrixLayoutOpaque_t *o = new (std::nothrow) cublasLtMatrixLayoutOpaque_t();
    if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
    put(o, layout_default(type, rows, cols, ld));
    live_add(o);
    *l = o;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    if (!l) return CUBLAS_STATUS_SUCCESS;
    if (!live_remove(l)) return CUBLAS_STATUS_INVALID_VALUE;
    memset((void *)l, 0, sizeof *l);
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void *buf, size_t size) {
    Layout v;
    if (!get(l, kLayoutMagic, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    const cublasStatus_t s = set_field(layout_field(&v, attr), buf, size);
    if (s == CUBLAS_STATUS_SUCCESS) put(l, v);
    return s;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             void *buf, size_t size,
                                                             size_t *written) {
    Layout v;
    if (!get(l, kLayoutMagic, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    return get_field(layout_field(&v, attr), buf, size, written);
}

// ---- matmul descriptors

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t d, size_t size,
                                                            cublasComputeType_t compute,
                                                            cudaDataType_t scale) {
    if (!d || size < sizeof(Desc)) return CUBLAS_STATUS_ALLOC_FAILED;
    put(d, desc_default(compute, scale));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
                                                     cublasComputeType_t compute,
                                                     cudaDataType_t scale) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulDescOpaque_t *o = new (std::nothrow) cublasLtMatmulDescOpaque_t();
    if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
    put(o, desc_default(compute, scale));
    live_add(o);
    *d = o;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    if (!d) return CUBLAS_STATUS_SUCCESS;
    if (!live_remove(d)) return CUBLAS_STATUS_INVALID_VALUE;
    memset((void *)d, 0, sizeof *d);
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void *buf, size_t size) {
    Desc v;
    if (!get(d, kDescMagic, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    const cublasStatus_t s = set_field(desc_field(&v, attr), buf, size);
    if (s == CUBLAS_STATUS_SUCCESS) put(d, v);
    return s;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           void *buf, size_t size,
                                                           size_t *written) {
    Desc v;
    if (!get(d, kDescMagic, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    return get_field(desc_field(&v, attr), buf, size, written);
}

// ---- preferences

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t p,
                                                                  size_t size) {
    if (!p || size < sizeof(Pref)) return CUBLAS_STATUS_ALLOC_FAILED;
    put(p, pref_default());
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    if (!p) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulPreferenceOpaque_t *o = new (std::nothrow) cublasLtMatmulPreferenceOpaque_t();
    if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
    put(o, pref_default());
    live_add(o);
    *p = o;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    if (!p) return CUBLAS_STATUS_SUCCESS;
    if (!live_remove(p)) return CUBLAS_STATUS_INVALID_VALUE;
    memset((void *)p, 0, sizeof *p);
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t size) {
    Pref v;
    if (!get(p, kPrefMagic, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    const cublasStatus_t s = set_field(pref_field(&v, attr), buf, size);
    if (s == CUBLAS_STATUS_SUCCESS) put(p, v);
    return s;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, void *buf,
    size_t size, size_t *written) {
    Pref v;
    if (!get(p, kPrefMagic, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    return get_field(pref_field(&v, attr), buf, size, written);
}

// ---- heuristic

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t ad,
    cublasLtMatrixLayout_t bd, cublasLtMatrixLayout_t cd, cublasLtMatrixLayout_t dd,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int *returned) {
    if (!handle || handle->magic != kHandleMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (returned) *returned = 0;
    if (requested <= 0 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
    Pref f;
    if (!get(pref, kPrefMagic, &f)) return CUBLAS_STATUS_INVALID_VALUE;
    Problem p;
    Desc desc;
    Verdict v;
    if (!make_problem(op, ad, bd, cd, dd, &p, &desc, &v)) {
        tell("cublasLtMatmulAlgoGetHeuristic", v);
        return v.status;
    }
    Algo algos[4];
    size_t ws[4];
    const int n = candidates(p, f, desc.bias, desc.aux, algos, ws, requested < 4 ? requested : 4);
    if (n == 0) {
        if (log_on())
            say("cublasLtMatmulAlgoGetHeuristic: no algorithm within the preference (alignment, "
                "workspace %llu bytes)", (unsigned long long)f.max_workspace);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    for (int i = 0; i < n; i++) {
        memset(&results[i], 0, sizeof results[i]);
        put(&results[i].algo, algos[i]);
        results[i].workspaceSize = ws[i];
        results[i].state = CUBLAS_STATUS_SUCCESS;
        results[i].wavesCount = 1.0f;
    }
    *returned = n;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- the product

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                           const void *alpha, const void *A,
                                           cublasLtMatrixLayout_t ad, const void *B,
                                           cublasLtMatrixLayout_t bd, const void *beta,
                                           const void *C, cublasLtMatrixLayout_t cd, void *D,
                                           cublasLtMatrixLayout_t dd,
                                           const cublasLtMatmulAlgo_t *algo, void *workspace,
                                           size_t workspace_bytes, cudaStream_t stream) {
    static const char *const call = "cublasLtMatmul";
    if (!handle || handle->magic != kHandleMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    auto job = std::make_shared<Job>();
    Problem &p = job->p;
    Desc desc;
    Verdict v;
    if (!make_problem(op, ad, bd, cd, dd, &p, &desc, &v)) {
        tell(call, v);
        return v.status;
    }
    if (!alpha || !beta) return invalid("alpha or beta is NULL");

    // scalars: host ones are read now (a graph keeps these values), device ones when it runs
    bool beta_zero = false;
    if (p.device_scalars) {
        job->alpha_ptr = alpha, job->beta_ptr = beta;
    } else {
        job->alpha = load(p.scale, alpha, 0);
        job->beta = load(p.scale, beta, 0);
        beta_zero = job->beta == 0;
    }
    // In place: C and D the same matrix must be described alike.
    if (C == D && C && (p.c.ld != p.d.ld || p.c.stride != p.d.stride || p.c.type != p.d.type))
        return invalid("C is D but Cdesc differs from Ddesc (ld %lld / %lld)", (long long)p.c.ld,
                       (long long)p.d.ld);
    if (p.bias_len && !desc.bias)
        return invalid("epilogue %u needs CUBLASLT_MATMUL_DESC_BIAS_POINTER", p.epilogue);
    if (p.aux && !desc.aux)
        return invalid("epilogue %u needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", p.epilogue);

    // the algorithm: given (checked against this call), or the heuristic's first with the
    // workspace given as the limit
    Algo al;
    if (algo) {
        if (!get(algo, kAlgoMagic, &al)) return invalid("algo was not made by the heuristic");
    } else {
        Pref f = pref_default();
        f.max_workspace = workspace_bytes;
        const void *ptrs[4] = {A, B, C ? C : D, D};
        for (int i = 0; i < 4; i++) f.align[i] = align_of(ptrs[i]);
        size_t ws;
        if (candidates(p, f, desc.bias, desc.aux, &al, &ws, 1) == 0) {
            if (log_on()) say("%s: no algorithm for these pointers and workspace", call);
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    }
    job->scheme = al.scheme;
    job->splits = al.splits >= 2 && p.k >= 2 ? 2 : 1;
    const size_t need = workspace_need(p, job->scheme, job->splits);
    if (workspace_bytes < need)
        return invalid("the algorithm needs %zu bytes of workspace, %zu given", need,
                       workspace_bytes);
    if (workspace && workspace_bytes && (uintptr_t)workspace % 256)
        return invalid("the workspace %p is not 256-byte aligned", workspace);
    if (need && !workspace) return invalid("workspace is NULL but %zu bytes are needed", need);
    // The alignments the algorithm was chosen for.
    const void *ptrs[6] = {A, B, beta_zero ? nullptr : C, D, p.bias_len ? desc.bias : nullptr,
                           p.aux ? desc.aux : nullptr};
    static const char *const names[6] = {"A", "B", "C", "D", "the bias", "the aux buffer"};
    for (int i = 0; i < 6; i++)
        if (ptrs[i] && align_of(ptrs[i]) < al.align[i])
            return invalid("%s at %p is %u-byte aligned; the algorithm was chosen for %u (%s)",
                           names[i], ptrs[i], align_of(ptrs[i]), al.align[i],
                           i < 4 ? "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES"
                                 : "the bias or aux pointer's alignment at the heuristic");

    const int device = tdm_emu::stream_device(stream);
    if (device < 0) {
        say("%s: the stream is not a live stream", call);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (p.m == 0 || p.n == 0 || p.batch == 0) return CUBLAS_STATUS_SUCCESS;   // nothing to do

    // Every operand lies in device memory of the stream's device, as far as its layout reaches.
    bool ok = range_ok(A, p.a.span(p.batch), device, "A", &p.a, p.batch) &&
              range_ok(B, p.b.span(p.batch), device, "B", &p.b, p.batch) &&
              (beta_zero || range_ok(C, p.c.span(p.batch), device, "C", &p.c, p.batch)) &&
              range_ok(D, p.d.span(p.batch), device, "D", &p.d, p.batch) &&
              (!p.bias_len || range_ok(desc.bias, p.bias_span(), device,
                                       p.bias_grad ? "bias gradient" : "bias", nullptr, 0)) &&
              (!p.aux || range_ok(desc.aux, p.aux_span(), device,
                                  p.aux == 'W' ? "aux (GELU input) output" : "aux (GELU input)",
                                  nullptr, 0)) &&
              // the whole workspace declared: another algorithm could use all of it
              (!workspace ||
               range_ok(workspace, workspace_bytes, device, "workspace", nullptr, 0));
    if (ok && p.device_scalars)
        ok = range_ok(alpha, type_size(p.scale), device, "alpha", nullptr, 0) &&
             range_ok(beta, type_size(p.scale), device, "beta", nullptr, 0);
    if (!ok) return CUBLAS_STATUS_EXECUTION_FAILED;   // reported: the device error is sticky

    job->a = A, job->b = B, job->c = beta_zero ? nullptr : C, job->d = D;
    job->bias = const_cast<void *>(desc.bias);
    job->aux = const_cast<void *>(desc.aux);
    job->ws = need ? workspace : nullptr;
    std::shared_ptr<const Job> run = job;
    const cudaError_t e = tdm_emu::enqueue(stream, call, [run] { run_job(*run); });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}   // extern "C"

/* cudnn.cc — the emulated device's cuDNN 9: handles and the backend (graph) API for single
 * convolutions (forward, backward data, backward filter), computed on the CPU in stream order
 * (tdm_emu::enqueue), every operand first checked against the device allocations.
 *
 * The semantics are NVIDIA's documented ones (the cuDNN 9 "cudnn_graph library" reference: the
 * backend functions and the "backend descriptor types" with their attributes), written without
 * looking at how tandem uses them:
 *   - cudnnBackendSetAttribute on a finalized descriptor is CUDNN_STATUS_NOT_INITIALIZED;
 *     an attribute the descriptor does not have, a read-only one, a wrong attribute type, an
 *     unexpected element count or an invalid value is CUDNN_STATUS_BAD_PARAM (the cuDNN 9 detail
 *     codes of that category: _ATTRIBUTE_TYPE, _NULL_POINTER, _DESCRIPTOR_TYPE, ...);
 *   - cudnnBackendGetAttribute on a descriptor not finalized is CUDNN_STATUS_NOT_INITIALIZED; it
 *     writes min(requested, available) elements and the available count; a descriptor-valued
 *     attribute is copied into descriptors the caller created (of the attribute's type);
 *   - cudnnBackendFinalize with a required attribute missing, or inconsistent values, is
 *     CUDNN_STATUS_BAD_PARAM; with values this cuDNN does not support, CUDNN_STATUS_NOT_SUPPORTED;
 *   - cudnnBackendExecute with a data pointer missing for a tensor of the graph, or another
 *     invalid value, is CUDNN_STATUS_BAD_PARAM.
 * Descriptors are objects with a kind tag (cudnnBackendDescriptorType_t); a finalized descriptor
 * keeps value snapshots of the descriptors it was built from, so destroying those afterwards is
 * harmless (before the finalize that reads them it is a caller's bug, reported as BAD_PARAM).
 *
 * The convolution (dims always (N, C, spatial...), any positive strides: NCHW, NHWC, ...):
 *   y[n,k,o] = alpha sum_{c',r} x[n, g cg + c', o*stride - pre + r*dil] w[k, c', r'] + beta
 * y[n,k,o] with groups G = C / (W's C), cg = C / G, g = k / (K / G), r' = r (CROSS_CORRELATION) or
 * R-1-r (CONVOLUTION: the filter flipped), zero padding; backward data and backward filter are
 * its adjoints with respect to x and w. 1 to 3 spatial dims. beta == 0 never reads the output.
 * Numerics: f16/bf16 inputs are exact in f32 and accumulate in f32; f32 in f32; f64 in f64;
 * alpha and beta are applied in the accumulation type and the output is rounded once.
 *
 * What real cuDNN does not do is refused, so a caller cannot come to lean on it: post-paddings
 * that differ from the pre-paddings (reported to be refused with BAD_PARAM when lower, computed
 * wrongly when higher) make the operation graph's finalize CUDNN_STATUS_NOT_SUPPORTED_PADDING; the
 * graph's finalize also refuses (NOT_SUPPORTED_DATA_TYPE, _GRAPH_PATTERN) mixed data types, a half
 * compute type, more than one operation, virtual or by-value tensors.
 * Execution checks each data pointer against its tensor's BYTE_ALIGNMENT (BAD_PARAM_MISALIGNED_
 * POINTER) and, with tdm_emu::check_device_range, the whole extent its dims and strides reach
 * (1 + sum (dim-1) stride elements), and the workspace, on the device of the handle's stream
 * (which must be the handle's device: cudnnCreate takes the current one). The HANDLE attributes
 * of the operation graph and the execution plan are required (the DEVICEPROP descriptor of cuDNN
 * 9.8+ is not modelled). Every refusal is also said on stderr and kept for cudnnGetLastErrorString.
 *
 * Engines (cudnnBackendNumericalNote_t as the header has them), global index: what it models
 *   0 direct            no notes                        all passes; f32, f64, f16, bf16
 *   1 implicit GEMM TC  TENSOR_CORE                     all passes; f16, bf16, and f32 as TF32:
 *                                                       f32 inputs rounded to TF32 (10-bit
 *                                                       mantissa, nearest, ties away) first
 *   2 Winograd 4x4      WINOGRAD, WINOGRAD_TILE_4x4     fwd, bwd data; f32, f16; 2-D, 3x3 filter,
 *                                                       stride 1, dilation 1; workspace
 *   3 FFT               FFT                             fwd; f32; 2-D, stride 1, dilation 1;
 *                                                       workspace
 *   4 f16 accumulation  TENSOR_CORE,                    all passes; f16; the running sum is
 *                       REDUCED_PRECISION_REDUCTION     rounded to half after every addition
 *   5 split reduction   NONDETERMINISTIC                bwd data, bwd filter; all types; workspace
 *   6 f16 inputs        TENSOR_CORE, DOWN_CONVERT_INPUTS all passes; f32 inputs rounded to half
 * Engines with a workspace sum each output's terms in two halves, written to and read back from
 * the workspace (so a workspace too small, freed or reused too early is caught); Winograd and FFT
 * are not reproduced numerically (only their notes and constraints). f64 has engines 0 and 5 only:
 * real cuDNN runs double on its legacy, non-tensor-core kernels. Heuristics (modes INSTANT, A, B
 * alike) rank for f32: 1 6 2 3 5 0; f16: 4 1 2 5 0; bf16: 1 5 0; f64: 0 5 (those that apply);
 * FALLBACK offers engine 0 only. TANDEM_EMU_CUDNN_ENGINES=i,j,... (or none) keeps only those
 * engines, for configurations a real cuDNN has no engine for. */
#include <cudnn_graph.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "emu.h"

// The handle (cudnn_graph.h declares struct cudnnContext and leaves it to the library).
struct cudnnContext {
    int device;           // the current device at cudnnCreate
    cudaStream_t stream;  // cudnnSetStream; 0 (the legacy default stream) at creation
};

namespace {

// =============================================================================================
// errors: the calling thread's last message (cudnnGetLastErrorString), also said on stderr

thread_local char tls_last_error[512];

cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_last_error, sizeof tls_last_error, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tandem emu: cuDNN: %s: %s\n", cudnnGetErrorString(st), tls_last_error);
    return st;
}

// =============================================================================================
// storage types

constexpr int kMaxDims = CUDNN_DIM_MAX;  // 8
constexpr int kSp = 3;                   // spatial dims the computation handles

uint32_t fbits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
float bitsf(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

// float -> IEEE half, round to nearest even (overflow to inf, subnormals kept).
uint16_t f32_to_f16(float f) {
    const uint32_t x = fbits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 rounds to inf
    if (ax < 0x38800000u)                                      // below 2^-14: subnormal
        return (uint16_t)(sign | (uint32_t)nearbyintf(bitsf(ax) * 16777216.0f));
    const uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}
float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        const float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31) return bitsf(sign | 0x7f800000u | (m << 13));
    return bitsf(sign | ((e + 112u) << 23) | (m << 13));
}
uint16_t f32_to_bf16(float f) {
    uint32_t b = fbits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);  // quiet NaN
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}
float bf16_to_f32(uint16_t h) {
    return bitsf((uint32_t)h << 16);
}
// TF32 as cvt.rna.tf32.f32: 10 mantissa bits, nearest, ties away from zero.
float round_tf32(float f) {
    const uint32_t b = fbits(f);
    if ((b & 0x7f800000u) == 0x7f800000u) return f;
    return bitsf((b + 0x1000u) & 0xffffe000u);
}
float round_f16(float f) {
    return f16_to_f32(f32_to_f16(f));
}

// The data types a convolution may have here, and their element sizes (0: not a storage type
// the emulator computes with).
size_t elem_size(cudnnDataType_t t) {
    switch (t) {
        case CUDNN_DATA_FLOAT:
            return 4;
        case CUDNN_DATA_DOUBLE:
            return 8;
        case CUDNN_DATA_HALF:
            return 2;
        case CUDNN_DATA_BFLOAT16:
            return 2;
        case CUDNN_DATA_INT8:
        case CUDNN_DATA_UINT8:
        case CUDNN_DATA_BOOLEAN:
        case CUDNN_DATA_FP8_E4M3:
        case CUDNN_DATA_FP8_E5M2:
        case CUDNN_DATA_FP8_E8M0:
            return 1;
        case CUDNN_DATA_INT32:
        case CUDNN_DATA_UINT32:
            return 4;
        case CUDNN_DATA_INT64:
        case CUDNN_DATA_COMPLEX_FP32:
            return 8;
        case CUDNN_DATA_COMPLEX_FP64:
            return 16;
        default:
            return 0;  // sub-byte and vectorized types
    }
}
const char *type_name(cudnnDataType_t t) {
    switch (t) {
        case CUDNN_DATA_FLOAT:
            return "float";
        case CUDNN_DATA_DOUBLE:
            return "double";
        case CUDNN_DATA_HALF:
            return "half";
        case CUDNN_DATA_BFLOAT16:
            return "bfloat16";
        default:
            return "(a type the emulator does not compute with)";
    }
}
bool valid_data_type(int64_t t) {
    return t >= CUDNN_DATA_FLOAT && t <= CUDNN_DATA_COMPLEX_FP64;
}

double load(cudnnDataType_t t, const void *p, int64_t i) {
    switch (t) {
        case CUDNN_DATA_DOUBLE:
            return ((const double *)p)[i];
        case CUDNN_DATA_HALF:
            return f16_to_f32(((const uint16_t *)p)[i]);
        case CUDNN_DATA_BFLOAT16:
            return bf16_to_f32(((const uint16_t *)p)[i]);
        default:
            return ((const float *)p)[i];
    }
}
// Stores v rounded once to t (a float v is exact in double, so the double path rounds once).
void store(cudnnDataType_t t, void *p, int64_t i, double v) {
    switch (t) {
        case CUDNN_DATA_DOUBLE:
            ((double *)p)[i] = v;
            break;
        case CUDNN_DATA_HALF:
            ((uint16_t *)p)[i] = f32_to_f16((float)v);
            break;  // v is a float here
        case CUDNN_DATA_BFLOAT16:
            ((uint16_t *)p)[i] = f32_to_bf16((float)v);
            break;
        default:
            ((float *)p)[i] = (float)v;
            break;
    }
}

// =============================================================================================
// descriptor contents: value types, so finalized descriptors hold snapshots

struct Tensor {
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    int nd = 0;
    int64_t dim[kMaxDims] = {}, stride[kMaxDims] = {};
    int64_t uid = 0, align = 0;
    bool is_virtual = false, by_value = false;
    int64_t vector_count = 1, vector_dim = -1;
    cudnnBackendTensorReordering_t reorder = CUDNN_TENSOR_REORDERING_NONE;

    // Elements from the first to one past the last addressed (strides are positive).
    int64_t extent() const {
        int64_t e = 1;
        for (int i = 0; i < nd; i++) e += (dim[i] - 1) * stride[i];
        return e;
    }
    int64_t count() const {
        int64_t e = 1;
        for (int i = 0; i < nd; i++) e *= dim[i];
        return e;
    }
};

std::string dims_str(const int64_t *v, int n) {
    std::string s = "[";
    for (int i = 0; i < n; i++) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
}

struct Conv {
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t nsp = 0;
    int n_pre = 0, n_post = 0, n_stride = 0, n_dil = 0;  // element counts as set
    int64_t pre[kMaxDims] = {}, post[kMaxDims] = {}, stride[kMaxDims] = {}, dil[kMaxDims] = {};
};

enum Pass { FWD = 0, BWD_DATA = 1, BWD_FILTER = 2 };
const char *const kPassWhat[3] = {"cudnnBackendExecute conv fwd",
                                  "cudnnBackendExecute conv bwd data",
                                  "cudnnBackendExecute conv bwd filter"};

// The three operation descriptor types: their attribute names, in the roles x-shaped, w-shaped,
// y-shaped (for backward data the x-shaped one, DX, is the output; for backward filter DW).
struct OpNames {
    cudnnBackendDescriptorType_t kind;
    Pass pass;
    cudnnBackendAttributeName_t alpha, beta, conv, t[3];
    const char *label[3];
};
const OpNames kOps[3] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
     FWD,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
     {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
     {"X", "W", "Y"}},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
     BWD_DATA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
     {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
     {"DX", "W", "DY"}},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
     BWD_FILTER,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
     {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
     {"X", "DW", "DY"}},
};
const OpNames *op_names(cudnnBackendDescriptorType_t k) {
    for (const OpNames &o : kOps)
        if (o.kind == k) return &o;
    return nullptr;
}
const int kOutRole[3] = {2, 0, 1};  // per pass: which role is written

// The geometry of a finalized convolution, spatial dims padded to 3 (leading unit dims).
struct Geo {
    int64_t N, C, K, G, cg, kg;
    int64_t in[kSp], out[kSp], R[kSp], pre[kSp], str[kSp], dil[kSp];
    int64_t xs[2 + kSp], ws[2 + kSp], ys[2 + kSp];  // element strides: n/k, c, spatial
    bool flip;
};

struct ConvOp {
    Pass pass = FWD;
    double alpha = 1, beta = 0;
    Conv conv;
    Tensor t[3];  // x-shaped, w-shaped, y-shaped
    Geo geo{};
};

struct Graph {
    cudnnHandle_t handle = nullptr;
    ConvOp op;  // the one operation (the emulator runs single-convolution graphs)
};

// =============================================================================================
// engines

enum Numerics { EXACT, TF32_INPUTS, F16_INPUTS };  // what an engine does to f32 inputs
enum : unsigned { T_F32 = 1, T_F64 = 2, T_F16 = 4, T_BF16 = 8, T_ALL = 15 };
enum : unsigned { P_FWD = 1, P_BWD_DATA = 2, P_BWD_FILTER = 4, P_ALL = 7 };

struct Engine {
    int64_t index;
    const char *name;
    unsigned passes, types;
    int n_notes;
    cudnnBackendNumericalNote_t notes[3];
    Numerics f32_numerics;  // what it does to f32 inputs (other types are exact in f32)
    bool split;             // two partial sums through the workspace
    bool small_2d_only;     // 2-D, stride 1, dilation 1 (Winograd, FFT)
    bool filter_3x3_only;
    bool half_acc;  // f16 running sums (rounded to half after every addition)
};
const Engine kEngines[] = {
    {0, "direct", P_ALL, T_ALL, 0, {}, EXACT, false, false, false, false},
    {1,
     "implicit GEMM (tensor cores)",
     P_ALL,
     T_F32 | T_F16 | T_BF16,
     1,
     {CUDNN_NUMERICAL_NOTE_TENSOR_CORE},
     TF32_INPUTS,
     false,
     false,
     false,
     false},
    {2,
     "Winograd 4x4",
     P_FWD | P_BWD_DATA,
     T_F32 | T_F16,
     2,
     {CUDNN_NUMERICAL_NOTE_WINOGRAD, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4},
     EXACT,
     true,
     true,
     true,
     false},
    {3, "FFT", P_FWD, T_F32, 1, {CUDNN_NUMERICAL_NOTE_FFT}, EXACT, true, true, false, false},
    {4,
     "f16 accumulation (tensor cores)",
     P_ALL,
     T_F16,
     2,
     {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION},
     EXACT,
     false,
     false,
     false,
     true},
    {5,
     "split reduction",
     P_BWD_DATA | P_BWD_FILTER,
     T_ALL,
     1,
     {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC},
     EXACT,
     true,
     false,
     false,
     false},
    {6,
     "f16 inputs (tensor cores)",
     P_ALL,
     T_F32,
     2,
     {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS},
     F16_INPUTS,
     false,
     false,
     false,
     false},
};
constexpr int64_t kEngineCount = sizeof kEngines / sizeof kEngines[0];

unsigned type_bit(cudnnDataType_t t) {
    switch (t) {
        case CUDNN_DATA_FLOAT:
            return T_F32;
        case CUDNN_DATA_DOUBLE:
            return T_F64;
        case CUDNN_DATA_HALF:
            return T_F16;
        case CUDNN_DATA_BFLOAT16:
            return T_BF16;
        default:
            return 0;
    }
}

// TANDEM_EMU_CUDNN_ENGINES=i,j,... (or "none"): only these engines exist, as a cuDNN build or GPU
// without engines for some configurations (f64 with groups or dilation in NHWC, on real cuDNN).
// Read once; unset: all of them; anything else (an empty item, "1x", 32): all of them, with a
// line on stderr (emu.h's env_number).
bool engine_enabled(int64_t index) {
    static const unsigned mask = [] {
        const char *v = getenv("TANDEM_EMU_CUDNN_ENGINES");
        if (!v) return ~0u;
        if (strcmp(v, "none") == 0) return 0u;
        unsigned m = 0;
        for (const char *p = v;;) {
            char item[24] = "";
            size_t n = strcspn(p, ",");
            if (n < sizeof item) memcpy(item, p, n);
            unsigned long long i;
            if (n >= sizeof item || !tdm_emu::parse_number(item, 0, 31, &i)) {
                fprintf(stderr,
                        "tandem emu: ignoring TANDEM_EMU_CUDNN_ENGINES=%s: expected none or "
                        "engine numbers from 0 to 31 separated by commas; using all engines\n",
                        v);
                return ~0u;
            }
            m |= 1u << i;
            if (!p[n]) break;
            p += n + 1;
        }
        return m;
    }();
    return index >= 0 && index < 32 && (mask >> index & 1u);
}

// Whether engine e runs op (and if not, why, into why).
bool engine_fits(const Engine &e, const ConvOp &op, std::string *why) {
    const Geo &g = op.geo;
    if (!engine_enabled(e.index))
        return *why = "it is disabled (TANDEM_EMU_CUDNN_ENGINES)", false;
    if (!(e.passes & (1u << op.pass))) return *why = "it does not run this operation", false;
    if (!(e.types & type_bit(op.t[0].type))) return *why = "it does not take this data type", false;
    if (e.small_2d_only) {
        if (op.conv.nsp != 2) return *why = "it runs 2-D convolutions only", false;
        for (int d = 0; d < kSp; d++)
            if (g.str[d] != 1 || g.dil[d] != 1)
                return *why = "it needs stride 1 and dilation 1", false;
    }
    if (e.filter_3x3_only && (g.R[1] != 3 || g.R[2] != 3))
        return *why = "it needs a 3x3 filter", false;
    return true;
}

// Heuristic ranking per data type (global indices), before filtering by engine_fits.
std::vector<int64_t> heuristic_order(cudnnBackendHeurMode_t mode, cudnnDataType_t t) {
    if (mode == CUDNN_HEUR_MODE_FALLBACK) return {0};
    switch (t) {
        case CUDNN_DATA_FLOAT:
            return {1, 6, 2, 3, 5, 0};
        case CUDNN_DATA_HALF:
            return {4, 1, 2, 5, 0};
        case CUDNN_DATA_BFLOAT16:
            return {1, 5, 0};
        default:
            return {0, 5};
    }
}

size_t acc_size(const ConvOp &op) {
    return op.t[0].type == CUDNN_DATA_DOUBLE ? 8 : 4;
}

int64_t workspace_size(const Engine &e, const ConvOp &op) {
    if (!e.split) return 0;
    return 2 * op.t[kOutRole[op.pass]].count() * (int64_t)acc_size(op);
}

// =============================================================================================
// descriptors

struct Desc {
    cudnnBackendDescriptorType_t kind;
    bool finalized = false;
    std::set<int> set;  // the attributes set (cudnnBackendAttributeName_t)

    // TENSOR, CONVOLUTION: their values, as set and after finalize
    Tensor t;
    int n_strides = 0;
    Conv c;

    // operations: staged scalars and descriptor references; the snapshot once finalized
    double scal[2] = {1, 0};
    Desc *ref_conv = nullptr, *ref_t[3] = {};
    std::shared_ptr<const ConvOp> op;

    // OPERATIONGRAPH, ENGINEHEUR, ENGINE, ENGINECFG, EXECUTION_PLAN
    cudnnHandle_t handle = nullptr;
    std::vector<Desc *> ref_ops;
    Desc *ref = nullptr;  // heur/engine: the graph; cfg: the engine; plan: the cfg
    cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
    int64_t engine = -1;  // engine, cfg, plan: the global index
    std::shared_ptr<const Graph> graph;
    std::vector<int64_t> results;  // heur: engine indices, best first
    int64_t workspace = 0;         // cfg, plan

    // VARIANT_PACK
    std::vector<int64_t> uids;
    std::vector<void *> ptrs;
    void *ws_ptr = nullptr;
};

std::mutex g_mu;                          // every API call holds it
std::unordered_set<const Desc *> g_live;  // created and not destroyed
std::unordered_set<const cudnnContext *> g_handles;

Desc *live(cudnnBackendDescriptor_t d) {
    Desc *p = (Desc *)d;
    return d && g_live.count(p) ? p : nullptr;
}
bool live_handle(cudnnHandle_t h) {
    return h && g_handles.count(h);
}

const char *kind_name(cudnnBackendDescriptorType_t k) {
    switch (k) {
        case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
            return "TENSOR";
        case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
            return "CONVOLUTION";
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
            return "OPERATION_CONVOLUTION_FORWARD";
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
            return "OPERATION_CONVOLUTION_BACKWARD_DATA";
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
            return "OPERATION_CONVOLUTION_BACKWARD_FILTER";
        case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
            return "OPERATIONGRAPH";
        case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
            return "ENGINEHEUR";
        case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
            return "ENGINE";
        case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
            return "ENGINECFG";
        case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
            return "EXECUTION_PLAN";
        case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
            return "VARIANT_PACK";
        default:
            return "(a descriptor type the emulator does not model)";
    }
}

// ---- the attribute table: which attributes each descriptor type has, their types and counts

enum : unsigned {
    SET = 1,   // settable before finalize
    GET = 2,   // gettable after finalize
    REQ = 4,   // required by finalize
    NOPE = 8,  // a cuDNN attribute of this descriptor that the emulator does not model
};
constexpr int64_t kMany = INT64_MAX;
constexpr int kAnyOp = -1;   // Spec::ref: any operation descriptor
constexpr int kNoType = -1;  // Spec::type2: no second type

struct Spec {
    cudnnBackendDescriptorType_t kind;
    cudnnBackendAttributeName_t name;
    const char *label;
    int type, type2;   // cudnnBackendAttributeType_t; type2: a second accepted type, or kNoType
    int64_t min, max;  // element counts accepted by Set
    unsigned flags;
    int ref;  // BACKEND_DESCRIPTOR values: their cudnnBackendDescriptorType_t (or kAnyOp)
};

// The table: {descriptor, attribute}, its type (and an alternative one), the element counts Set
// accepts, flags, and the descriptor type of BACKEND_DESCRIPTOR values.
// clang-format off
#define A_(k, n) CUDNN_BACKEND_##k##_DESCRIPTOR, CUDNN_ATTR_##n, #n
#define T_(t) CUDNN_TYPE_##t
#define D_(k) CUDNN_BACKEND_##k##_DESCRIPTOR
constexpr unsigned SG = SET | GET, SGR = SET | GET | REQ;
const Spec kSpecs[] = {
    {A_(TENSOR, TENSOR_DATA_TYPE), T_(DATA_TYPE), kNoType, 1, 1, SGR, 0},
    {A_(TENSOR, TENSOR_DIMENSIONS), T_(INT64), kNoType, 1, kMaxDims, SGR, 0},
    {A_(TENSOR, TENSOR_STRIDES), T_(INT64), kNoType, 1, kMaxDims, SGR, 0},
    {A_(TENSOR, TENSOR_UNIQUE_ID), T_(INT64), kNoType, 1, 1, SGR, 0},
    {A_(TENSOR, TENSOR_BYTE_ALIGNMENT), T_(INT64), kNoType, 1, 1, SGR, 0},
    {A_(TENSOR, TENSOR_IS_VIRTUAL), T_(BOOLEAN), kNoType, 1, 1, SG, 0},
    {A_(TENSOR, TENSOR_IS_BY_VALUE), T_(BOOLEAN), kNoType, 1, 1, SG, 0},
    {A_(TENSOR, TENSOR_VECTOR_COUNT), T_(INT64), kNoType, 1, 1, SG, 0},
    {A_(TENSOR, TENSOR_VECTORIZED_DIMENSION), T_(INT64), kNoType, 1, 1, SG, 0},
    {A_(TENSOR, TENSOR_REORDERING_MODE), T_(TENSOR_REORDERING_MODE), kNoType, 1, 1, SG, 0},
    {A_(TENSOR, TENSOR_RAGGED_OFFSET_DESC), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, NOPE, 0},

    {A_(CONVOLUTION, CONVOLUTION_COMP_TYPE), T_(DATA_TYPE), kNoType, 1, 1, SGR, 0},
    {A_(CONVOLUTION, CONVOLUTION_CONV_MODE), T_(CONVOLUTION_MODE), kNoType, 1, 1, SGR, 0},
    {A_(CONVOLUTION, CONVOLUTION_SPATIAL_DIMS), T_(INT64), kNoType, 1, 1, SGR, 0},
    {A_(CONVOLUTION, CONVOLUTION_DILATIONS), T_(INT64), kNoType, 1, kMaxDims, SGR, 0},
    {A_(CONVOLUTION, CONVOLUTION_FILTER_STRIDES), T_(INT64), kNoType, 1, kMaxDims, SGR, 0},
    {A_(CONVOLUTION, CONVOLUTION_PRE_PADDINGS), T_(INT64), kNoType, 1, kMaxDims, SGR, 0},
    {A_(CONVOLUTION, CONVOLUTION_POST_PADDINGS), T_(INT64), kNoType, 1, kMaxDims, SGR, 0},

    // operations: alpha and beta are CUDNN_TYPE_FLOAT or CUDNN_TYPE_DOUBLE, as documented
#define OP_(K, P, X, W, Y)                                                                     \
    {A_(K, P##_ALPHA), T_(FLOAT), T_(DOUBLE), 1, kMany, SGR, 0},                                \
    {A_(K, P##_BETA), T_(FLOAT), T_(DOUBLE), 1, kMany, SGR, 0},                                 \
    {A_(K, P##_CONV_DESC), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, SGR, D_(CONVOLUTION)},        \
    {A_(K, P##_##X), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, SGR, D_(TENSOR)},                   \
    {A_(K, P##_##W), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, SGR, D_(TENSOR)},                   \
    {A_(K, P##_##Y), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, SGR, D_(TENSOR)}
    OP_(OPERATION_CONVOLUTION_FORWARD, OPERATION_CONVOLUTION_FORWARD, X, W, Y),
    OP_(OPERATION_CONVOLUTION_BACKWARD_DATA, OPERATION_CONVOLUTION_BWD_DATA, DX, W, DY),
    OP_(OPERATION_CONVOLUTION_BACKWARD_FILTER, OPERATION_CONVOLUTION_BWD_FILTER, X, DW, DY),
#undef OP_

    {A_(OPERATIONGRAPH, OPERATIONGRAPH_HANDLE), T_(HANDLE), kNoType, 1, 1, SGR, 0},
    {A_(OPERATIONGRAPH, OPERATIONGRAPH_OPS), T_(BACKEND_DESCRIPTOR), kNoType,
     1, kMany, SGR, kAnyOp},
    {A_(OPERATIONGRAPH, OPERATIONGRAPH_ENGINE_GLOBAL_COUNT), T_(INT64), kNoType, 0, 0, GET, 0},
    {A_(OPERATIONGRAPH, OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED), T_(BOOLEAN), kNoType,
     1, 1, NOPE, 0},

    {A_(ENGINEHEUR, ENGINEHEUR_OPERATION_GRAPH), T_(BACKEND_DESCRIPTOR), kNoType,
     1, 1, SGR, D_(OPERATIONGRAPH)},
    {A_(ENGINEHEUR, ENGINEHEUR_MODE), T_(HEUR_MODE), kNoType, 1, 1, SGR, 0},
    {A_(ENGINEHEUR, ENGINEHEUR_SM_COUNT_TARGET), T_(INT32), kNoType, 1, 1, SET, 0},
    {A_(ENGINEHEUR, ENGINEHEUR_RESULTS), T_(BACKEND_DESCRIPTOR), kNoType, 0, 0, GET, D_(ENGINECFG)},
    {A_(ENGINEHEUR, ENGINEHEUR_DEVICEPROP), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, NOPE, 0},

    {A_(ENGINE, ENGINE_OPERATION_GRAPH), T_(BACKEND_DESCRIPTOR), kNoType,
     1, 1, SGR, D_(OPERATIONGRAPH)},
    {A_(ENGINE, ENGINE_GLOBAL_INDEX), T_(INT64), kNoType, 1, 1, SGR, 0},
    {A_(ENGINE, ENGINE_NUMERICAL_NOTE), T_(NUMERICAL_NOTE), kNoType, 0, 0, GET, 0},
    {A_(ENGINE, ENGINE_BEHAVIOR_NOTE), T_(BEHAVIOR_NOTE), kNoType, 0, 0, GET, 0},
    {A_(ENGINE, ENGINE_KNOB_INFO), T_(BACKEND_DESCRIPTOR), kNoType, 0, 0, GET, D_(KNOB_INFO)},
    {A_(ENGINE, ENGINE_LAYOUT_INFO), T_(BACKEND_DESCRIPTOR), kNoType, 0, 0, GET, D_(LAYOUT_INFO)},
    {A_(ENGINE, ENGINE_SM_COUNT_TARGET), T_(INT32), kNoType, 1, 1, SET, 0},
    {A_(ENGINE, ENGINE_DEVICEPROP), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, NOPE, 0},

    {A_(ENGINECFG, ENGINECFG_ENGINE), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, SGR, D_(ENGINE)},
    {A_(ENGINECFG, ENGINECFG_KNOB_CHOICES), T_(BACKEND_DESCRIPTOR), kNoType,
     0, kMany, SG, D_(KNOB_CHOICE)},
    {A_(ENGINECFG, ENGINECFG_WORKSPACE_SIZE), T_(INT64), kNoType, 0, 0, GET, 0},
    {A_(ENGINECFG, ENGINECFG_SHARED_MEMORY_USED), T_(INT64), kNoType, 0, 0, GET, 0},
    {A_(ENGINECFG, ENGINECFG_INTERMEDIATE_INFO), T_(BACKEND_DESCRIPTOR), kNoType,
     0, 0, GET, D_(INTERMEDIATE_INFO)},

    {A_(EXECUTION_PLAN, EXECUTION_PLAN_HANDLE), T_(HANDLE), kNoType, 1, 1, SGR, 0},
    {A_(EXECUTION_PLAN, EXECUTION_PLAN_ENGINE_CONFIG), T_(BACKEND_DESCRIPTOR), kNoType,
     1, 1, SGR, D_(ENGINECFG)},
    {A_(EXECUTION_PLAN, EXECUTION_PLAN_WORKSPACE_SIZE), T_(INT64), kNoType, 0, 0, GET, 0},
    {A_(EXECUTION_PLAN, EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS), T_(INT64), kNoType,
     0, kMany, NOPE, 0},
    {A_(EXECUTION_PLAN, EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS), T_(INT64), kNoType,
     0, kMany, NOPE, 0},
    {A_(EXECUTION_PLAN, EXECUTION_PLAN_DEVICEPROP), T_(BACKEND_DESCRIPTOR), kNoType, 1, 1, NOPE, 0},
    {A_(EXECUTION_PLAN, EXECUTION_PLAN_KERNEL_CACHE), T_(BACKEND_DESCRIPTOR), kNoType,
     1, 1, NOPE, 0},

    {A_(VARIANT_PACK, VARIANT_PACK_UNIQUE_IDS), T_(INT64), kNoType, 0, kMany, SGR, 0},
    {A_(VARIANT_PACK, VARIANT_PACK_DATA_POINTERS), T_(VOID_PTR), kNoType, 0, kMany, SGR, 0},
    {A_(VARIANT_PACK, VARIANT_PACK_WORKSPACE), T_(VOID_PTR), kNoType, 1, 1, SGR, 0},
    {A_(VARIANT_PACK, VARIANT_PACK_INTERMEDIATES), T_(VOID_PTR), kNoType, 0, kMany, NOPE, 0},
};
#undef A_
#undef T_
#undef D_
// clang-format on

const Spec *spec_of(cudnnBackendDescriptorType_t kind, cudnnBackendAttributeName_t name) {
    for (const Spec &s : kSpecs)
        if (s.kind == kind && s.name == name) return &s;
    return nullptr;
}

// Enum-typed attribute values are read and written as 32-bit ints (checked before the cast).
static_assert(sizeof(cudnnDataType_t) == 4 && sizeof(cudnnConvolutionMode_t) == 4 &&
                  sizeof(cudnnBackendHeurMode_t) == 4 && sizeof(cudnnBackendNumericalNote_t) == 4 &&
                  sizeof(cudnnBackendTensorReordering_t) == 4 && sizeof(bool) == 1,
              "enum attribute values are 32-bit ints, booleans one byte");

size_t attr_type_size(cudnnBackendAttributeType_t t) {
    switch (t) {
        case CUDNN_TYPE_HANDLE:
            return sizeof(cudnnHandle_t);
        case CUDNN_TYPE_DATA_TYPE:
            return sizeof(cudnnDataType_t);
        case CUDNN_TYPE_BOOLEAN:
            return sizeof(bool);
        case CUDNN_TYPE_INT64:
            return sizeof(int64_t);
        case CUDNN_TYPE_FLOAT:
            return sizeof(float);
        case CUDNN_TYPE_DOUBLE:
            return sizeof(double);
        case CUDNN_TYPE_VOID_PTR:
            return sizeof(void *);
        case CUDNN_TYPE_CONVOLUTION_MODE:
            return sizeof(cudnnConvolutionMode_t);
        case CUDNN_TYPE_HEUR_MODE:
            return sizeof(cudnnBackendHeurMode_t);
        case CUDNN_TYPE_NUMERICAL_NOTE:
            return sizeof(cudnnBackendNumericalNote_t);
        case CUDNN_TYPE_BEHAVIOR_NOTE:
            return sizeof(cudnnBackendBehaviorNote_t);
        case CUDNN_TYPE_BACKEND_DESCRIPTOR:
            return sizeof(cudnnBackendDescriptor_t);
        case CUDNN_TYPE_TENSOR_REORDERING_MODE:
            return sizeof(cudnnBackendTensorReordering_t);
        case CUDNN_TYPE_INT32:
            return sizeof(int32_t);
        default:
            return 0;
    }
}

// ---- finalize, per descriptor type

bool missing_required(const Desc *d, const char **label) {
    for (const Spec &s : kSpecs)
        if (s.kind == d->kind && (s.flags & REQ) && !d->set.count(s.name)) {
            *label = s.label;
            return true;
        }
    return false;
}

cudnnStatus_t finalize_tensor(Desc *d) {
    Tensor &t = d->t;
    if (elem_size(t.type) == 0)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                    "tensor uid %lld: data type %d is not supported", (long long)t.uid,
                    (int)t.type);
    if (d->n_strides != t.nd)
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor uid %lld: %d dims but %d strides",
                    (long long)t.uid, t.nd, d->n_strides);
    for (int i = 0; i < t.nd; i++)
        if (t.dim[i] <= 0 || t.stride[i] <= 0)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "tensor uid %lld: dims %s and strides %s must all be positive",
                        (long long)t.uid, dims_str(t.dim, t.nd).c_str(),
                        dims_str(t.stride, t.nd).c_str());
    if (t.align <= 0 || t.align % (int64_t)elem_size(t.type) != 0)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "tensor uid %lld: byte alignment %lld is not a positive multiple of the "
                    "element size %zu",
                    (long long)t.uid, (long long)t.align, elem_size(t.type));
    if (t.vector_count != 1) {
        if (!d->set.count(CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION))
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "tensor uid %lld: VECTOR_COUNT %lld without VECTORIZED_DIMENSION",
                        (long long)t.uid, (long long)t.vector_count);
        return fail(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
                    "tensor uid %lld: vectorized tensors are not supported by the emulator",
                    (long long)t.uid);
    }
    if (t.reorder != CUDNN_TENSOR_REORDERING_NONE)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
                    "tensor uid %lld: reordered layouts are "
                    "not supported by the emulator",
                    (long long)t.uid);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_conv(Desc *d) {
    Conv &c = d->c;
    if (c.nsp < 1 || c.nsp > kSp)
        return c.nsp < 1 || c.nsp > kMaxDims - 2
                   ? fail(CUDNN_STATUS_BAD_PARAM, "convolution: SPATIAL_DIMS %lld is not in 1..%d",
                          (long long)c.nsp, kMaxDims - 2)
                   : fail(CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
                          "convolution: %lld spatial dims (the emulator runs 1 to 3)",
                          (long long)c.nsp);
    const struct {
        int n;
        const char *what;
    } counts[4] = {{c.n_dil, "DILATIONS"},
                   {c.n_stride, "FILTER_STRIDES"},
                   {c.n_pre, "PRE_PADDINGS"},
                   {c.n_post, "POST_PADDINGS"}};
    for (const auto &k : counts)
        if (k.n != c.nsp)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "convolution: %s has %d elements but SPATIAL_DIMS is %lld", k.what, k.n,
                        (long long)c.nsp);
    for (int i = 0; i < c.nsp; i++)
        if (c.dil[i] < 1 || c.stride[i] < 1 || c.pre[i] < 0 || c.post[i] < 0)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "convolution: dilations %s and strides %s must be >= 1, paddings %s "
                        "and %s >= 0",
                        dims_str(c.dil, c.nsp).c_str(), dims_str(c.stride, c.nsp).c_str(),
                        dims_str(c.pre, c.nsp).c_str(), dims_str(c.post, c.nsp).c_str());
    if (!valid_data_type(c.comp))
        return fail(CUDNN_STATUS_BAD_PARAM, "convolution: COMP_TYPE %d", (int)c.comp);
    return CUDNN_STATUS_SUCCESS;
}

// A referenced descriptor, live, of kind k and finalized; else a status (and message).
cudnnStatus_t referenced(Desc *r, int k, const char *who, const char *what) {
    if (!g_live.count(r))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: the %s descriptor was destroyed before finalize",
                    who, what);
    if (k == kAnyOp ? op_names(r->kind) == nullptr : (int)r->kind != k)
        return fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "%s: %s is a %s descriptor", who, what,
                    kind_name(r->kind));
    if (!r->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "%s: the %s descriptor is not finalized",
                    who, what);
    return CUDNN_STATUS_SUCCESS;
}

// An operation: snapshot of its convolution and tensors, and the shape relations.
cudnnStatus_t finalize_op(Desc *d) {
    const OpNames &on = *op_names(d->kind);
    const char *who = kind_name(d->kind);
    cudnnStatus_t st =
        referenced(d->ref_conv, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, who, "CONV_DESC");
    for (int i = 0; i < 3 && st == CUDNN_STATUS_SUCCESS; i++)
        st = referenced(d->ref_t[i], CUDNN_BACKEND_TENSOR_DESCRIPTOR, who, on.label[i]);
    if (st != CUDNN_STATUS_SUCCESS) return st;

    auto op = std::make_shared<ConvOp>();
    op->pass = on.pass;
    op->alpha = d->scal[0];
    op->beta = d->scal[1];
    op->conv = d->ref_conv->c;
    for (int i = 0; i < 3; i++) op->t[i] = d->ref_t[i]->t;
    const Conv &c = op->conv;
    const Tensor &x = op->t[0], &w = op->t[1], &y = op->t[2];
    const int nd = (int)c.nsp + 2;
    std::string shapes = std::string(on.label[0]) + " " + dims_str(x.dim, x.nd) + ", " +
                         on.label[1] + " " + dims_str(w.dim, w.nd) + ", " + on.label[2] + " " +
                         dims_str(y.dim, y.nd);
    if (x.nd != nd || w.nd != nd || y.nd != nd)
        return fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                    "%s: %s: a convolution with %lld spatial dims takes %d-D tensors", who,
                    shapes.c_str(), (long long)c.nsp, nd);
    const int64_t N = x.dim[0], C = x.dim[1], K = w.dim[0], Cw = w.dim[1];
    if (y.dim[0] != N || y.dim[1] != K)
        return fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                    "%s: %s: %s must be [N=%lld, K=%lld, ...]", who, shapes.c_str(), on.label[2],
                    (long long)N, (long long)K);
    if (C % Cw != 0 || K % (C / Cw) != 0)
        return fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                    "%s: %s: groups C/C_w = %lld/%lld must divide both C and K", who,
                    shapes.c_str(), (long long)C, (long long)Cw);
    for (int i = 0; i < c.nsp; i++) {
        const int64_t span = c.dil[i] * (w.dim[2 + i] - 1) + 1;
        const int64_t padded = x.dim[2 + i] + c.pre[i] + c.post[i];
        const int64_t out = padded >= span ? (padded - span) / c.stride[i] + 1 : 0;
        if (out < 1 || y.dim[2 + i] != out)
            return fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                        "%s: %s: spatial dim %d: input %lld + paddings %lld + %lld, filter %lld "
                        "dilated %lld, stride %lld give %lld, not %lld",
                        who, shapes.c_str(), i, (long long)x.dim[2 + i], (long long)c.pre[i],
                        (long long)c.post[i], (long long)w.dim[2 + i], (long long)c.dil[i],
                        (long long)c.stride[i], (long long)out, (long long)y.dim[2 + i]);
    }

    // the geometry, spatial dims padded to three
    Geo &g = op->geo;
    g.N = N, g.C = C, g.K = K, g.G = C / Cw, g.cg = Cw, g.kg = K / (C / Cw);
    g.flip = c.mode == CUDNN_CONVOLUTION;
    g.xs[0] = x.stride[0], g.xs[1] = x.stride[1];
    g.ws[0] = w.stride[0], g.ws[1] = w.stride[1];
    g.ys[0] = y.stride[0], g.ys[1] = y.stride[1];
    const int lead = kSp - (int)c.nsp;
    for (int d3 = 0; d3 < kSp; d3++) {
        const int i = d3 - lead;  // the tensors' spatial index, < 0 for a padding unit dim
        const bool real = i >= 0;
        g.in[d3] = real ? x.dim[2 + i] : 1;
        g.out[d3] = real ? y.dim[2 + i] : 1;
        g.R[d3] = real ? w.dim[2 + i] : 1;
        g.pre[d3] = real ? c.pre[i] : 0;
        g.str[d3] = real ? c.stride[i] : 1;
        g.dil[d3] = real ? c.dil[i] : 1;
        g.xs[2 + d3] = real ? x.stride[2 + i] : 0;
        g.ws[2 + d3] = real ? w.stride[2 + i] : 0;
        g.ys[2 + d3] = real ? y.stride[2 + i] : 0;
    }
    d->op = op;
    return CUDNN_STATUS_SUCCESS;
}

// The operation graph: here is where what cuDNN does not support is refused.
cudnnStatus_t finalize_graph(Desc *d) {
    if (!live_handle(d->handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "OPERATIONGRAPH: HANDLE is not a live cuDNN handle");
    for (Desc *o : d->ref_ops) {
        const cudnnStatus_t st = referenced(o, kAnyOp, "OPERATIONGRAPH", "OPS element");
        if (st != CUDNN_STATUS_SUCCESS) return st;
    }
    if (d->ref_ops.size() != 1)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                    "OPERATIONGRAPH: %zu operations; the emulator runs single convolutions",
                    d->ref_ops.size());
    const ConvOp &op = *d->ref_ops[0]->op;
    const OpNames &on = kOps[op.pass];
    for (int i = 0; i < 3; i++) {
        if (op.t[i].is_virtual || op.t[i].by_value)
            return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                        "OPERATIONGRAPH: %s (uid %lld) is %s; a single convolution's tensors are "
                        "in device memory",
                        on.label[i], (long long)op.t[i].uid,
                        op.t[i].is_virtual ? "virtual" : "by value");
        for (int j = 0; j < i; j++)
            if (op.t[i].uid == op.t[j].uid)
                return fail(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                            "OPERATIONGRAPH: %s and %s have the same unique id %lld", on.label[j],
                            on.label[i], (long long)op.t[i].uid);
    }
    const Conv &c = op.conv;
    for (int i = 0; i < c.nsp; i++)
        if (c.pre[i] != c.post[i])
            return fail(CUDNN_STATUS_NOT_SUPPORTED_PADDING,
                        "OPERATIONGRAPH: pre-paddings %s differ from post-paddings %s; cuDNN "
                        "convolutions take symmetric padding only",
                        dims_str(c.pre, (int)c.nsp).c_str(), dims_str(c.post, (int)c.nsp).c_str());
    const cudnnDataType_t t = op.t[0].type;
    if (op.t[1].type != t || op.t[2].type != t)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                    "OPERATIONGRAPH: %s %s, %s %s, %s %s: mixed data types are not supported",
                    on.label[0], type_name(t), on.label[1], type_name(op.t[1].type), on.label[2],
                    type_name(op.t[2].type));
    const bool ok = (t == CUDNN_DATA_DOUBLE && c.comp == CUDNN_DATA_DOUBLE) ||
                    ((t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16) &&
                     c.comp == CUDNN_DATA_FLOAT);
    if (!ok)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                    "OPERATIONGRAPH: %s data with compute type %d: the emulator runs float, half "
                    "and bfloat16 data with float compute, double with double",
                    type_name(t), (int)c.comp);
    auto g = std::make_shared<Graph>();
    g->handle = d->handle;
    g->op = op;
    d->graph = g;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_heur(Desc *d) {
    const cudnnStatus_t st = referenced(d->ref, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                        "ENGINEHEUR", "OPERATION_GRAPH");
    if (st != CUDNN_STATUS_SUCCESS) return st;
    d->graph = d->ref->graph;
    d->results.clear();
    std::string why;
    for (int64_t e : heuristic_order(d->heur_mode, d->graph->op.t[0].type))
        if (engine_fits(kEngines[e], d->graph->op, &why)) d->results.push_back(e);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_engine(Desc *d) {
    const cudnnStatus_t st =
        referenced(d->ref, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "ENGINE", "OPERATION_GRAPH");
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (d->engine < 0 || d->engine >= kEngineCount)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "ENGINE: GLOBAL_INDEX %lld is not in 0..%lld",
                    (long long)d->engine, (long long)kEngineCount - 1);
    std::string why;
    if (!engine_fits(kEngines[d->engine], d->ref->graph->op, &why))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "ENGINE %lld (%s) does not support this graph: %s",
                    (long long)d->engine, kEngines[d->engine].name, why.c_str());
    d->graph = d->ref->graph;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_cfg(Desc *d) {
    const cudnnStatus_t st =
        referenced(d->ref, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "ENGINECFG", "ENGINE");
    if (st != CUDNN_STATUS_SUCCESS) return st;
    d->graph = d->ref->graph;
    d->engine = d->ref->engine;
    d->workspace = workspace_size(kEngines[d->engine], d->graph->op);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_plan(Desc *d) {
    if (!live_handle(d->handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "EXECUTION_PLAN: HANDLE is not a live cuDNN handle");
    const cudnnStatus_t st =
        referenced(d->ref, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "EXECUTION_PLAN", "ENGINE_CONFIG");
    if (st != CUDNN_STATUS_SUCCESS) return st;
    d->graph = d->ref->graph;
    d->engine = d->ref->engine;
    d->workspace = d->ref->workspace;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_pack(Desc *d) {
    if (d->uids.size() != d->ptrs.size())
        return fail(CUDNN_STATUS_BAD_PARAM, "VARIANT_PACK: %zu unique ids but %zu data pointers",
                    d->uids.size(), d->ptrs.size());
    for (size_t i = 0; i < d->uids.size(); i++)
        for (size_t j = 0; j < i; j++)
            if (d->uids[i] == d->uids[j])
                return fail(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                            "VARIANT_PACK: unique id %lld appears twice", (long long)d->uids[i]);
    return CUDNN_STATUS_SUCCESS;
}

// ---- attribute values read by Set and written by Get

template <class T>
T elem(const void *a, int64_t i) {
    T v;
    memcpy(&v, (const char *)a + i * sizeof(T), sizeof(T));
    return v;
}

// A descriptor as GetAttribute hands it out: finalized, of kind k, built from snapshots.
Desc made(cudnnBackendDescriptorType_t k) {
    Desc r;
    r.kind = k;
    r.finalized = true;
    return r;
}
Desc tensor_desc(const Tensor &t) {
    Desc r = made(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    r.t = t;
    return r;
}
Desc graph_desc(const std::shared_ptr<const Graph> &g) {
    Desc r = made(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    r.graph = g;
    r.handle = g->handle;
    return r;
}
Desc engine_desc(const std::shared_ptr<const Graph> &g, int64_t e) {
    Desc r = made(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    r.graph = g;
    r.engine = e;
    return r;
}
Desc cfg_desc(const std::shared_ptr<const Graph> &g, int64_t e) {
    Desc r = made(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    r.graph = g;
    r.engine = e;
    r.workspace = workspace_size(kEngines[e], g->op);
    return r;
}

// =============================================================================================
// the computation

struct Job {
    ConvOp op;
    int64_t engine;
    const void *ptr[3];  // x-shaped, w-shaped, y-shaped
    void *ws;
};

// The computation is optimized even in Debug builds (the emu preset's -O0 with sanitizers makes a
// direct convolution of a few hundred million products take minutes otherwise); the sanitizers'
// instrumentation stays.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O2")
#endif

// One output element's sum: its terms in a fixed order (the reduction index t runs over every
// tap, in bounds or not), in one partial sum, or two for split engines (t < T/2 and the rest);
// HALF rounds the running sum to half after every addition.
template <class Acc, bool HALF, bool SPLIT>
struct Sum {
    Acc part[2] = {0, 0};
    int cur = 0;
    int64_t t = 0, split;
    explicit Sum(int64_t split_at) : cur(SPLIT && split_at == 0), split(split_at) {}
    void add(Acc v) {
        if (!SPLIT && !HALF) {
            part[0] += v;
            return;
        }
        part[cur] = HALF ? (Acc)round_f16((float)(part[cur] + v)) : part[cur] + v;
        step(1);
    }
    void step(int64_t n) {  // n taps done (skipped ones contribute nothing)
        if (!SPLIT) return;
        t += n;
        if (t >= split) cur = 1;
    }
};

// A tensor's values as Acc, in logical order over the padded 5-D dims (outer, C, spatial x3),
// rounded as the engine rounds its inputs.
// flip: the spatial dims reversed (a CONVOLUTION-mode filter becomes a cross-correlation one).
template <class Acc>
std::vector<Acc> unpack(cudnnDataType_t type, const void *p, const int64_t dim[5],
                        const int64_t str[5], Numerics num, bool flip = false) {
    std::vector<Acc> v((size_t)(dim[0] * dim[1] * dim[2] * dim[3] * dim[4]));
    size_t k = 0;
    auto at = [&](int i, int64_t x) { return (flip ? dim[i] - 1 - x : x) * str[i]; };
    for (int64_t a = 0; a < dim[0]; a++)
        for (int64_t b = 0; b < dim[1]; b++)
            for (int64_t c = 0; c < dim[2]; c++)
                for (int64_t d = 0; d < dim[3]; d++)
                    for (int64_t e = 0; e < dim[4]; e++) {
                        const double x =
                            load(type, p, a * str[0] + b * str[1] + at(2, c) + at(3, d) + at(4, e));
                        v[k++] = num == TF32_INPUTS  ? (Acc)round_tf32((float)x)
                                 : num == F16_INPUTS ? (Acc)round_f16((float)x)
                                                     : (Acc)x;
                    }
    return v;
}

template <class Acc, bool HALF, bool SPLIT>
void run_conv(const Job &j) {
    const ConvOp &op = j.op;
    const Geo &g = op.geo;
    const Engine &e = kEngines[j.engine];
    const cudnnDataType_t type = op.t[0].type;
    const Numerics num = type == CUDNN_DATA_FLOAT ? e.f32_numerics : EXACT;
    const int64_t xd[5] = {g.N, g.C, g.in[0], g.in[1], g.in[2]},
                  wd[5] = {g.K, g.cg, g.R[0], g.R[1], g.R[2]},
                  yd[5] = {g.N, g.K, g.out[0], g.out[1], g.out[2]};
    const int out_role = kOutRole[op.pass];
    // the inputs, unpacked (the output is read, if at all, element by element: beta != 0)
    std::vector<Acc> X, W, Y;
    if (op.pass != BWD_DATA) X = unpack<Acc>(type, j.ptr[0], xd, g.xs, num);
    if (op.pass != BWD_FILTER) W = unpack<Acc>(type, j.ptr[1], wd, g.ws, num, g.flip);
    if (op.pass != FWD) Y = unpack<Acc>(type, j.ptr[2], yd, g.ys, num);
    void *OUT = (void *)j.ptr[out_role];
    const Acc alpha = (Acc)op.alpha, beta = (Acc)op.beta;
    Acc *ws = (Acc *)j.ws;
    int64_t slot = 0;  // the output element, in logical order (its workspace slots)

    const int64_t I0 = g.in[0], I1 = g.in[1], I2 = g.in[2], R0 = g.R[0], R1 = g.R[1], R2 = g.R[2],
                  O0 = g.out[0], O1 = g.out[1], O2 = g.out[2];
    const int64_t in_sz = I0 * I1 * I2, r_sz = R0 * R1 * R2, out_sz = O0 * O1 * O2;
    int64_t T = 0;  // the reduction length of one output element
    if (op.pass == FWD) T = g.cg * r_sz;
    if (op.pass == BWD_DATA) T = g.kg * r_sz;
    if (op.pass == BWD_FILTER) T = g.N * out_sz;
    const int64_t split = e.split ? T / 2 : INT64_MAX;
    auto tap = [&](int64_t r, int64_t R) { return g.flip ? R - 1 - r : r; };
    // the taps r in [0, R) whose position base + r*step lies in [0, I): [*lo, *hi)
    auto in_range = [](int64_t base, int64_t step, int64_t R, int64_t I, int64_t *lo, int64_t *hi) {
        *lo = base >= 0 ? 0 : (-base + step - 1) / step;
        *hi = base > I - 1 ? 0 : std::min(R, (I - 1 - base) / step + 1);
        if (*hi < *lo) *hi = *lo;
    };

    auto finish = [&](Sum<Acc, HALF, SPLIT> &s, int64_t off) {
        Acc acc = s.part[0];
        if (SPLIT) {  // the halves go through the workspace
            ws[2 * slot] = s.part[0];
            ws[2 * slot + 1] = s.part[1];
            acc = ws[2 * slot] + ws[2 * slot + 1];
        }
        slot++;
        Acc v = alpha * acc;
        if (op.beta != 0) v += beta * (Acc)load(op.t[out_role].type, OUT, off);
        store(op.t[out_role].type, OUT, off, (double)v);
    };

    if (op.pass == FWD) {
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t k = 0; k < g.K; k++)
                for (int64_t o0 = 0; o0 < O0; o0++)
                    for (int64_t o1 = 0; o1 < O1; o1++)
                        for (int64_t o2 = 0; o2 < O2; o2++) {
                            Sum<Acc, HALF, SPLIT> s(split);
                            for (int64_t c = 0; c < g.cg; c++) {
                                const Acc *xc =
                                    &X[(size_t)((n * g.C + k / g.kg * g.cg + c) * in_sz)];
                                const Acc *wc = &W[(size_t)((k * g.cg + c) * r_sz)];
                                for (int64_t r0 = 0; r0 < R0; r0++) {
                                    const int64_t i0 = o0 * g.str[0] - g.pre[0] + r0 * g.dil[0];
                                    if (i0 < 0 || i0 >= I0) {
                                        s.step(R1 * R2);
                                        continue;
                                    }
                                    for (int64_t r1 = 0; r1 < R1; r1++) {
                                        const int64_t i1 = o1 * g.str[1] - g.pre[1] + r1 * g.dil[1];
                                        if (i1 < 0 || i1 >= I1) {
                                            s.step(R2);
                                            continue;
                                        }
                                        const Acc *xr = xc + (i0 * I1 + i1) * I2;
                                        const Acc *wr = wc + (r0 * R1 + r1) * R2;  // W is flipped
                                        const int64_t b2 = o2 * g.str[2] - g.pre[2], d2 = g.dil[2];
                                        int64_t lo, hi;
                                        in_range(b2, d2, R2, I2, &lo, &hi);
                                        s.step(lo);
                                        for (int64_t r2 = lo; r2 < hi; r2++)
                                            s.add(xr[b2 + r2 * d2] * wr[r2]);
                                        s.step(R2 - hi);
                                    }
                                }
                            }
                            finish(s, n * g.ys[0] + k * g.ys[1] + o0 * g.ys[2] + o1 * g.ys[3] +
                                          o2 * g.ys[4]);
                        }
    } else if (op.pass == BWD_DATA) {
        // dx[n, c, i] sums dy[n, k, o] w[k, c', r] over the o, r with i = o*stride - pre + r*dil
        auto outpos = [&](int64_t i, int d, int64_t r, int64_t O) {  // o, or -1
            const int64_t p = i + g.pre[d] - r * g.dil[d];
            if (p < 0 || p % g.str[d]) return (int64_t)-1;
            const int64_t o = p / g.str[d];
            return o < O ? o : (int64_t)-1;
        };
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t cc = 0; cc < g.C; cc++)
                for (int64_t i0 = 0; i0 < I0; i0++)
                    for (int64_t i1 = 0; i1 < I1; i1++)
                        for (int64_t i2 = 0; i2 < I2; i2++) {
                            const int64_t grp = cc / g.cg, c = cc % g.cg;
                            Sum<Acc, HALF, SPLIT> s(split);
                            for (int64_t kk = 0; kk < g.kg; kk++) {
                                const int64_t k = grp * g.kg + kk;
                                const Acc *yk = &Y[(size_t)((n * g.K + k) * out_sz)];
                                const Acc *wc = &W[(size_t)((k * g.cg + c) * r_sz)];
                                for (int64_t r0 = 0; r0 < R0; r0++) {
                                    const int64_t o0 = outpos(i0, 0, r0, O0);
                                    if (o0 < 0) {
                                        s.step(R1 * R2);
                                        continue;
                                    }
                                    for (int64_t r1 = 0; r1 < R1; r1++) {
                                        const int64_t o1 = outpos(i1, 1, r1, O1);
                                        if (o1 < 0) {
                                            s.step(R2);
                                            continue;
                                        }
                                        const Acc *yr = yk + (o0 * O1 + o1) * O2;
                                        const Acc *wr = wc + (r0 * R1 + r1) * R2;  // W is flipped
                                        for (int64_t r2 = 0; r2 < R2; r2++) {
                                            const int64_t o2 = outpos(i2, 2, r2, O2);
                                            if (o2 < 0) {
                                                s.step(1);
                                                continue;
                                            }
                                            s.add(yr[o2] * wr[r2]);
                                        }
                                    }
                                }
                            }
                            finish(s, n * g.xs[0] + cc * g.xs[1] + i0 * g.xs[2] + i1 * g.xs[3] +
                                          i2 * g.xs[4]);
                        }
    } else {  // BWD_FILTER: dw[k, c, stored tap] sums dy[n, k, o] x[n, g cg + c, i] over n and o
        for (int64_t k = 0; k < g.K; k++)
            for (int64_t c = 0; c < g.cg; c++)
                for (int64_t s0 = 0; s0 < R0; s0++)
                    for (int64_t s1 = 0; s1 < R1; s1++)
                        for (int64_t s2 = 0; s2 < R2; s2++) {
                            const int64_t r0 = tap(s0, R0), r1 = tap(s1, R1), r2 = tap(s2, R2);
                            Sum<Acc, HALF, SPLIT> s(split);
                            for (int64_t n = 0; n < g.N; n++) {
                                const Acc *yk = &Y[(size_t)((n * g.K + k) * out_sz)];
                                const Acc *xc =
                                    &X[(size_t)((n * g.C + k / g.kg * g.cg + c) * in_sz)];
                                for (int64_t o0 = 0; o0 < O0; o0++) {
                                    const int64_t i0 = o0 * g.str[0] - g.pre[0] + r0 * g.dil[0];
                                    if (i0 < 0 || i0 >= I0) {
                                        s.step(O1 * O2);
                                        continue;
                                    }
                                    for (int64_t o1 = 0; o1 < O1; o1++) {
                                        const int64_t i1 = o1 * g.str[1] - g.pre[1] + r1 * g.dil[1];
                                        if (i1 < 0 || i1 >= I1) {
                                            s.step(O2);
                                            continue;
                                        }
                                        const Acc *yr = yk + (o0 * O1 + o1) * O2;
                                        const Acc *xr = xc + (i0 * I1 + i1) * I2;
                                        const int64_t b2 = r2 * g.dil[2] - g.pre[2], s2 = g.str[2];
                                        int64_t lo, hi;
                                        in_range(b2, s2, O2, I2, &lo, &hi);
                                        s.step(lo);
                                        for (int64_t o2 = lo; o2 < hi; o2++)
                                            s.add(yr[o2] * xr[b2 + o2 * s2]);
                                        s.step(O2 - hi);
                                    }
                                }
                            }
                            finish(s, k * g.ws[0] + c * g.ws[1] + s0 * g.ws[2] + s1 * g.ws[3] +
                                          s2 * g.ws[4]);
                        }
    }
}

void run_job(const Job &j) {
    const Engine &e = kEngines[j.engine];
    if (j.op.t[0].type == CUDNN_DATA_DOUBLE) {
        if (e.split)
            run_conv<double, false, true>(j);
        else
            run_conv<double, false, false>(j);
    } else if (e.half_acc) {
        if (e.split)
            run_conv<float, true, true>(j);
        else
            run_conv<float, true, false>(j);
    } else {
        if (e.split)
            run_conv<float, false, true>(j);
        else
            run_conv<float, false, false>(j);
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

}  // namespace

// =============================================================================================
// the API

extern "C" {

size_t CUDNNWINAPI cudnnGetVersion(void) {
    return CUDNN_VERSION;
}
size_t CUDNNWINAPI cudnnGetMaxDeviceVersion(void) {
    return CUDNN_MAX_DEVICE_VERSION;
}
size_t CUDNNWINAPI cudnnGetCudartVersion(void) {
    return CUDART_VERSION;
}
cudnnStatus_t CUDNNWINAPI cudnnGraphVersionCheck(void) {
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetProperty(libraryPropertyType type, int *value) {
    if (!value) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetProperty: value is NULL");
    switch (type) {
        case MAJOR_VERSION:
            *value = CUDNN_MAJOR;
            break;
        case MINOR_VERSION:
            *value = CUDNN_MINOR;
            break;
        case PATCH_LEVEL:
            *value = CUDNN_PATCHLEVEL;
            break;
        default:
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetProperty: type %d", (int)type);
    }
    return CUDNN_STATUS_SUCCESS;
}

const char *CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
    switch ((int)status) {
#define S_(x) \
    case x:   \
        return #x;
        S_(CUDNN_STATUS_SUCCESS)
        S_(CUDNN_STATUS_NOT_INITIALIZED)
        S_(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
        S_(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
        S_(CUDNN_STATUS_DEPRECATED)
        S_(CUDNN_STATUS_LICENSE_ERROR)
        S_(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
        S_(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
        S_(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        S_(CUDNN_STATUS_BAD_PARAM)
        S_(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        S_(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        S_(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        S_(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        S_(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        S_(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        S_(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        S_(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
        S_(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
        S_(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
        S_(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
        S_(CUDNN_STATUS_NOT_SUPPORTED)
        S_(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
        S_(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        S_(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        S_(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        S_(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
        S_(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
        S_(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        S_(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
        S_(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
        S_(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
        S_(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
        S_(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
        S_(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
        S_(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
        S_(CUDNN_STATUS_INTERNAL_ERROR)
        S_(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
        S_(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
        S_(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        S_(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        S_(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
        S_(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        S_(CUDNN_STATUS_EXECUTION_FAILED)
        S_(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
        S_(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
        S_(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
        S_(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
        case 2001:
            return "CUDNN_STATUS_INVALID_VALUE";
#undef S_
        default:
            return "CUDNN_STATUS_UNKNOWN";
    }
}

void CUDNNWINAPI cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || max_size == 0) return;
    snprintf(message, max_size, "%s", tls_last_error);
    tls_last_error[0] = '\0';
}

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t *handle) {
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: handle is NULL");
    if (tdm_emu::device_count() < 1)
        return fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate: no (emulated) device");
    cudnnContext *h = new (std::nothrow) cudnnContext{tdm_emu::current_device(), nullptr};
    if (!h)
        return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                    "cudnnCreate: out of memory");
    std::lock_guard<std::mutex> lock(g_mu);
    g_handles.insert(h);
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!live_handle(handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy: %p is not a live handle",
                    (void *)handle);
    g_handles.erase(handle);
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!live_handle(handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: %p is not a live handle",
                    (void *)handle);
    const int dev = tdm_emu::stream_device(stream);
    if (dev < 0)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: %p is not a live stream",
                    (void *)stream);
    if (dev != handle->device)
        return fail(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH,
                    "cudnnSetStream: the stream belongs to emulated cuda:%d, the handle to cuda:%d",
                    dev, handle->device);
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!live_handle(handle) || !stream)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream: bad handle or NULL stream pointer");
    *stream = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                                       cudnnBackendDescriptor_t *descriptor) {
    if (!descriptor)
        return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                    "cudnnBackendCreateDescriptor: descriptor is NULL");
    switch (type) {
        case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
        case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
        case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
            break;
        default:
            return fail(CUDNN_STATUS_NOT_SUPPORTED,
                        "cudnnBackendCreateDescriptor: descriptor type %d is not modelled by the "
                        "emulator (it runs single convolutions)",
                        (int)type);
    }
    Desc *d = new (std::nothrow) Desc;
    if (!d)
        return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                    "cudnnBackendCreateDescriptor: out of memory");
    d->kind = type;
    std::lock_guard<std::mutex> lock(g_mu);
    g_live.insert(d);
    *descriptor = d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
    std::lock_guard<std::mutex> lock(g_mu);
    Desc *d = live(descriptor);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "cudnnBackendDestroyDescriptor: %p is not a live descriptor", descriptor);
    g_live.erase(d);
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor) {
    std::lock_guard<std::mutex> lock(g_mu);
    Desc *d = live(descriptor);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendInitialize: %p is not a live descriptor",
                    descriptor);
    const cudnnBackendDescriptorType_t k = d->kind;
    *d = Desc();
    d->kind = k;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                   cudnnBackendAttributeName_t name,
                                                   cudnnBackendAttributeType_t type, int64_t count,
                                                   const void *a) {
    std::lock_guard<std::mutex> lock(g_mu);
    Desc *d = live(descriptor);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute: %p is not a live descriptor",
                    descriptor);
    const char *who = kind_name(d->kind);
    const Spec *s = spec_of(d->kind, name);
    if (d->finalized)
        return fail(CUDNN_STATUS_NOT_INITIALIZED, "%s: attribute %s set after finalize", who,
                    s ? s->label : "?");
    if (!s) return fail(CUDNN_STATUS_BAD_PARAM, "%s has no attribute %d", who, (int)name);
    if (s->flags & NOPE)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: %s is not modelled by the emulator", who,
                    s->label);
    if (!(s->flags & SET))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: %s is read-only", who, s->label);
    if ((int)type != s->type && (int)type != s->type2)
        return fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                    "%s: %s set with attribute type %d (it takes %d%s)", who, s->label, (int)type,
                    (int)s->type, s->type2 != kNoType ? " or its alternative" : "");
    if (count < s->min || count > s->max)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: %s set with %lld elements (it takes %lld to %lld)",
                    who, s->label, (long long)count, (long long)s->min,
                    (long long)(s->max == kMany ? -1 : s->max));
    if (count > 0 && !a)
        return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: %s: arrayOfElements is NULL", who,
                    s->label);

    // descriptor values: live, of the documented type
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < count; i++) {
            Desc *r = live(elem<cudnnBackendDescriptor_t>(a, i));
            if (!r)
                return fail(CUDNN_STATUS_BAD_PARAM, "%s: %s[%lld] is not a live descriptor", who,
                            s->label, (long long)i);
            const bool ok =
                s->ref == kAnyOp ? op_names(r->kind) != nullptr : (int)r->kind == s->ref;
            if (!ok)
                return fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                            "%s: %s[%lld] is a %s descriptor", who, s->label, (long long)i,
                            kind_name(r->kind));
        }
    auto i64 = [a](int64_t i) { return elem<int64_t>(a, i); };
    auto dref = [a](int64_t i) { return (Desc *)elem<cudnnBackendDescriptor_t>(a, i); };

    switch (d->kind) {
        case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
            Tensor &t = d->t;
            switch (name) {
                case CUDNN_ATTR_TENSOR_DATA_TYPE: {
                    const int32_t v = elem<int32_t>(a, 0);  // enums read as ints until checked
                    if (!valid_data_type(v))
                        return fail(CUDNN_STATUS_BAD_PARAM, "TENSOR: DATA_TYPE %d", v);
                    t.type = (cudnnDataType_t)v;
                    break;
                }
                case CUDNN_ATTR_TENSOR_DIMENSIONS:
                    t.nd = (int)count;
                    for (int i = 0; i < t.nd; i++) t.dim[i] = i64(i);
                    break;
                case CUDNN_ATTR_TENSOR_STRIDES:  // kept with their own count: finalize compares
                    d->n_strides = (int)count;
                    for (int i = 0; i < count; i++) t.stride[i] = i64(i);
                    break;
                case CUDNN_ATTR_TENSOR_UNIQUE_ID:
                    t.uid = i64(0);
                    break;
                case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
                    t.align = i64(0);
                    break;
                case CUDNN_ATTR_TENSOR_IS_VIRTUAL:
                    t.is_virtual = elem<uint8_t>(a, 0) != 0;
                    break;
                case CUDNN_ATTR_TENSOR_IS_BY_VALUE:
                    t.by_value = elem<uint8_t>(a, 0) != 0;
                    break;
                case CUDNN_ATTR_TENSOR_VECTOR_COUNT:
                    t.vector_count = i64(0);
                    break;
                case CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION:
                    t.vector_dim = i64(0);
                    break;
                case CUDNN_ATTR_TENSOR_REORDERING_MODE: {
                    const int32_t v = elem<int32_t>(a, 0);
                    if (v < CUDNN_TENSOR_REORDERING_NONE || v > CUDNN_TENSOR_REORDERING_F8_128x4)
                        return fail(CUDNN_STATUS_BAD_PARAM, "TENSOR: REORDERING_MODE %d", v);
                    t.reorder = (cudnnBackendTensorReordering_t)v;
                    break;
                }
                default:
                    break;
            }
            break;
        }
        case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
            Conv &c = d->c;
            auto arr = [&](int64_t *dst, int *n) {
                *n = (int)count;
                for (int i = 0; i < count; i++) dst[i] = i64(i);
            };
            switch (name) {
                case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: {
                    const int32_t v = elem<int32_t>(a, 0);
                    if (!valid_data_type(v))
                        return fail(CUDNN_STATUS_BAD_PARAM, "CONVOLUTION: COMP_TYPE %d", v);
                    c.comp = (cudnnDataType_t)v;
                    break;
                }
                case CUDNN_ATTR_CONVOLUTION_CONV_MODE: {
                    const int32_t v = elem<int32_t>(a, 0);
                    if (v != CUDNN_CONVOLUTION && v != CUDNN_CROSS_CORRELATION)
                        return fail(CUDNN_STATUS_BAD_PARAM, "CONVOLUTION: CONV_MODE %d", v);
                    c.mode = (cudnnConvolutionMode_t)v;
                    break;
                }
                case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS:
                    c.nsp = i64(0);
                    break;
                case CUDNN_ATTR_CONVOLUTION_DILATIONS:
                    arr(c.dil, &c.n_dil);
                    break;
                case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES:
                    arr(c.stride, &c.n_stride);
                    break;
                case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS:
                    arr(c.pre, &c.n_pre);
                    break;
                case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS:
                    arr(c.post, &c.n_post);
                    break;
                default:
                    break;
            }
            break;
        }
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: {
            const OpNames &on = *op_names(d->kind);
            if (name == on.alpha || name == on.beta) {
                if (count != 1)
                    return fail(CUDNN_STATUS_NOT_SUPPORTED,
                                "%s: %s with %lld elements: the emulator "
                                "takes one (scalar) value",
                                who, s->label, (long long)count);
                d->scal[name == on.beta] =
                    type == CUDNN_TYPE_FLOAT ? (double)elem<float>(a, 0) : elem<double>(a, 0);
            } else if (name == on.conv) {
                d->ref_conv = dref(0);
            } else {
                for (int i = 0; i < 3; i++)
                    if (name == on.t[i]) d->ref_t[i] = dref(0);
            }
            break;
        }
        case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
            if (name == CUDNN_ATTR_OPERATIONGRAPH_HANDLE) {
                d->handle = elem<cudnnHandle_t>(a, 0);
                if (!live_handle(d->handle))
                    return fail(CUDNN_STATUS_BAD_PARAM,
                                "OPERATIONGRAPH: HANDLE %p is not a live "
                                "handle",
                                (void *)d->handle);
            } else {
                d->ref_ops.clear();
                for (int64_t i = 0; i < count; i++) d->ref_ops.push_back(dref(i));
            }
            break;
        case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
            if (name == CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH) d->ref = dref(0);
            if (name == CUDNN_ATTR_ENGINEHEUR_MODE) {
                const int32_t m = elem<int32_t>(a, 0);
                if (m < CUDNN_HEUR_MODE_INSTANT || m >= CUDNN_HEUR_MODES_COUNT)
                    return fail(CUDNN_STATUS_BAD_PARAM, "ENGINEHEUR: MODE %d", m);
                d->heur_mode = (cudnnBackendHeurMode_t)m;
            }
            break;
        case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
            if (name == CUDNN_ATTR_ENGINE_OPERATION_GRAPH) d->ref = dref(0);
            if (name == CUDNN_ATTR_ENGINE_GLOBAL_INDEX) d->engine = i64(0);
            break;
        case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
            if (name == CUDNN_ATTR_ENGINECFG_ENGINE) d->ref = dref(0);
            // KNOB_CHOICES: no KNOB_CHOICE descriptor can be created here, so only an empty list
            break;
        case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
            if (name == CUDNN_ATTR_EXECUTION_PLAN_HANDLE) {
                d->handle = elem<cudnnHandle_t>(a, 0);
                if (!live_handle(d->handle))
                    return fail(CUDNN_STATUS_BAD_PARAM,
                                "EXECUTION_PLAN: HANDLE %p is not a live "
                                "handle",
                                (void *)d->handle);
            }
            if (name == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG) d->ref = dref(0);
            break;
        case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
            if (name == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)
                d->uids.assign((const int64_t *)a, (const int64_t *)a + count);
            if (name == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)
                d->ptrs.assign((void *const *)a, (void *const *)a + count);
            if (name == CUDNN_ATTR_VARIANT_PACK_WORKSPACE) d->ws_ptr = elem<void *>(a, 0);
            break;
        default:
            break;
    }
    d->set.insert(name);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
    std::lock_guard<std::mutex> lock(g_mu);
    Desc *d = live(descriptor);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize: %p is not a live descriptor",
                    descriptor);
    const char *who = kind_name(d->kind);
    if (d->finalized) return fail(CUDNN_STATUS_BAD_PARAM, "%s: finalized twice", who);
    const char *label = nullptr;
    if (missing_required(d, &label))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: required attribute %s is not set", who, label);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    switch (d->kind) {
        case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
            st = finalize_tensor(d);
            break;
        case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
            st = finalize_conv(d);
            break;
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
            st = finalize_op(d);
            break;
        case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
            st = finalize_graph(d);
            break;
        case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
            st = finalize_heur(d);
            break;
        case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
            st = finalize_engine(d);
            break;
        case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
            st = finalize_cfg(d);
            break;
        case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
            st = finalize_plan(d);
            break;
        case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
            st = finalize_pack(d);
            break;
        default:
            break;
    }
    if (st == CUDNN_STATUS_SUCCESS) d->finalized = true;
    return st;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                   cudnnBackendAttributeName_t name,
                                                   cudnnBackendAttributeType_t type,
                                                   int64_t requested, int64_t *count, void *a) {
    std::lock_guard<std::mutex> lock(g_mu);
    Desc *d = live(descriptor);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute: %p is not a live descriptor",
                    descriptor);
    const char *who = kind_name(d->kind);
    const Spec *s = spec_of(d->kind, name);
    if (!s || !(s->flags & GET))
        return fail(s && (s->flags & NOPE) ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM,
                    "%s: attribute %s cannot be read here", who, s ? s->label : "(unknown)");
    if (!d->finalized)
        return fail(CUDNN_STATUS_NOT_INITIALIZED, "%s: %s read before finalize", who, s->label);
    if ((int)type != s->type && (int)type != s->type2)
        return fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "%s: %s read as attribute type %d", who,
                    s->label, (int)type);
    if (!count)
        return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: %s: elementCount is NULL", who,
                    s->label);
    if (requested < 0)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: %s: requestedElementCount %lld", who, s->label,
                    (long long)requested);
    if (requested > 0 && !a)
        return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: %s: arrayOfElements is NULL", who,
                    s->label);

    // The values, as a byte image of `n` elements of the attribute type (descriptor values as
    // Desc images, copied into the caller's descriptors below).
    std::vector<int64_t> iv;
    std::vector<double> fv;
    std::vector<int32_t> ev;  // enum values
    std::vector<void *> pv;
    std::vector<Desc> dv;
    bool is_enum = false;
    const ConvOp *op = d->op.get();
    const OpNames *on = op_names(d->kind);
    switch (name) {
        case CUDNN_ATTR_TENSOR_DATA_TYPE:
            is_enum = true, ev = {(int32_t)d->t.type};
            break;
        case CUDNN_ATTR_TENSOR_DIMENSIONS:
            iv.assign(d->t.dim, d->t.dim + d->t.nd);
            break;
        case CUDNN_ATTR_TENSOR_STRIDES:
            iv.assign(d->t.stride, d->t.stride + d->t.nd);
            break;
        case CUDNN_ATTR_TENSOR_UNIQUE_ID:
            iv = {d->t.uid};
            break;
        case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
            iv = {d->t.align};
            break;
        case CUDNN_ATTR_TENSOR_IS_VIRTUAL:
            is_enum = true, ev = {d->t.is_virtual};
            break;
        case CUDNN_ATTR_TENSOR_IS_BY_VALUE:
            is_enum = true, ev = {d->t.by_value};
            break;
        case CUDNN_ATTR_TENSOR_VECTOR_COUNT:
            iv = {d->t.vector_count};
            break;
        case CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION:
            iv = {d->t.vector_dim};
            break;
        case CUDNN_ATTR_TENSOR_REORDERING_MODE:
            is_enum = true, ev = {(int32_t)d->t.reorder};
            break;
        case CUDNN_ATTR_CONVOLUTION_COMP_TYPE:
            is_enum = true, ev = {(int32_t)d->c.comp};
            break;
        case CUDNN_ATTR_CONVOLUTION_CONV_MODE:
            is_enum = true, ev = {(int32_t)d->c.mode};
            break;
        case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS:
            iv = {d->c.nsp};
            break;
        case CUDNN_ATTR_CONVOLUTION_DILATIONS:
            iv.assign(d->c.dil, d->c.dil + d->c.n_dil);
            break;
        case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES:
            iv.assign(d->c.stride, d->c.stride + d->c.n_stride);
            break;
        case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS:
            iv.assign(d->c.pre, d->c.pre + d->c.n_pre);
            break;
        case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS:
            iv.assign(d->c.post, d->c.post + d->c.n_post);
            break;
        case CUDNN_ATTR_OPERATIONGRAPH_HANDLE:
        case CUDNN_ATTR_EXECUTION_PLAN_HANDLE:
            pv = {(void *)d->handle};
            break;
        case CUDNN_ATTR_OPERATIONGRAPH_OPS: {
            Desc o = made(kOps[d->graph->op.pass].kind);
            o.op = std::make_shared<ConvOp>(d->graph->op);
            dv.push_back(o);
            break;
        }
        case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
            iv = {kEngineCount};
            break;
        case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH:
        case CUDNN_ATTR_ENGINE_OPERATION_GRAPH:
            dv.push_back(graph_desc(d->graph));
            break;
        case CUDNN_ATTR_ENGINEHEUR_MODE:
            is_enum = true, ev = {(int32_t)d->heur_mode};
            break;
        case CUDNN_ATTR_ENGINEHEUR_RESULTS:
            for (int64_t e : d->results) dv.push_back(cfg_desc(d->graph, e));
            break;
        case CUDNN_ATTR_ENGINE_GLOBAL_INDEX:
            iv = {d->engine};
            break;
        case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
            is_enum = true;
            for (int i = 0; i < kEngines[d->engine].n_notes; i++)
                ev.push_back((int32_t)kEngines[d->engine].notes[i]);
            break;
        case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE:
            is_enum = true;
            break;  // none
        case CUDNN_ATTR_ENGINE_KNOB_INFO:
        case CUDNN_ATTR_ENGINE_LAYOUT_INFO:
        case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES:
        case CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO:
            break;  // none
        case CUDNN_ATTR_ENGINECFG_ENGINE:
            dv.push_back(engine_desc(d->graph, d->engine));
            break;
        case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
        case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
            iv = {d->workspace};
            break;
        case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED:
            iv = {0};
            break;
        case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG:
            dv.push_back(cfg_desc(d->graph, d->engine));
            break;
        case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
            iv = d->uids;
            break;
        case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS:
            pv = d->ptrs;
            break;
        case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
            pv = {d->ws_ptr};
            break;
        default:
            if (on && op) {  // operation attributes, from the snapshot
                if (name == on->alpha)
                    fv = {op->alpha};
                else if (name == on->beta)
                    fv = {op->beta};
                else if (name == on->conv) {
                    Desc c = made(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
                    c.c = op->conv;
                    dv.push_back(c);
                } else {
                    for (int i = 0; i < 3; i++)
                        if (name == on->t[i]) dv.push_back(tensor_desc(op->t[i]));
                }
            }
            break;
    }
    const int64_t n = (int64_t)(iv.size() + fv.size() + ev.size() + pv.size() + dv.size());
    const int64_t w = std::min(n, requested);
    *count = n;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < w; i++) {  // into the caller's descriptors, of the right type
            Desc *t = live(((cudnnBackendDescriptor_t *)a)[i]);
            if (!t || t->kind != dv[i].kind)
                return fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                            "%s: %s[%lld]: the caller's descriptor must be a live %s descriptor",
                            who, s->label, (long long)i, kind_name(dv[i].kind));
        }
        for (int64_t i = 0; i < w; i++) *live(((cudnnBackendDescriptor_t *)a)[i]) = dv[i];
        return CUDNN_STATUS_SUCCESS;
    }
    for (int64_t i = 0; i < w; i++) {
        char *p = (char *)a + i * attr_type_size(type);
        switch (type) {
            case CUDNN_TYPE_INT64:
                memcpy(p, &iv[i], 8);
                break;
            case CUDNN_TYPE_FLOAT: {
                const float f = (float)fv[i];
                memcpy(p, &f, 4);
                break;
            }
            case CUDNN_TYPE_DOUBLE:
                memcpy(p, &fv[i], 8);
                break;
            case CUDNN_TYPE_HANDLE:
            case CUDNN_TYPE_VOID_PTR:
                memcpy(p, &pv[i], sizeof(void *));
                break;
            case CUDNN_TYPE_BOOLEAN: {
                const bool b = ev[i] != 0;
                memcpy(p, &b, sizeof b);
                break;
            }
            default:  // the enum types: int-sized
                if (is_enum) memcpy(p, &ev[i], sizeof(int32_t));
                break;
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendExecute(cudnnHandle_t handle,
                                              cudnnBackendDescriptor_t executionPlan,
                                              cudnnBackendDescriptor_t variantPack) {
    std::shared_ptr<Job> job = std::make_shared<Job>();
    cudaStream_t stream;
    int device;
    const char *what;
    {
        std::lock_guard<std::mutex> lock(g_mu);
        if (!live_handle(handle))
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: %p is not a live handle",
                        (void *)handle);
        Desc *plan = live(executionPlan), *pack = live(variantPack);
        if (!plan || plan->kind != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "cudnnBackendExecute: %p is not a live EXECUTION_PLAN descriptor",
                        executionPlan);
        if (!pack || pack->kind != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "cudnnBackendExecute: %p is not a live VARIANT_PACK descriptor",
                        variantPack);
        if (!plan->finalized || !pack->finalized)
            return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                        "cudnnBackendExecute: the %s is not finalized",
                        plan->finalized ? "variant pack" : "execution plan");
        const ConvOp &op = plan->graph->op;
        const OpNames &on = kOps[op.pass];
        what = kPassWhat[op.pass];
        job->op = op;
        job->engine = plan->engine;

        // a data pointer for every tensor of the graph, aligned as its descriptor declares
        for (int i = 0; i < 3; i++) {
            const Tensor &t = op.t[i];
            size_t k = 0;
            while (k < pack->uids.size() && pack->uids[k] != t.uid) k++;
            if (k == pack->uids.size())
                return fail(CUDNN_STATUS_BAD_PARAM,
                            "%s: the variant pack has no data pointer for %s (uid %lld)", what,
                            on.label[i], (long long)t.uid);
            const void *p = pack->ptrs[k];
            if (!p)
                return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                            "%s: the data pointer of %s (uid %lld) is NULL", what, on.label[i],
                            (long long)t.uid);
            if ((uintptr_t)p % (uintptr_t)t.align)
                return fail(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                            "%s: %s (uid %lld) at %p is not %lld-byte aligned as its "
                            "BYTE_ALIGNMENT declares",
                            what, on.label[i], (long long)t.uid, p, (long long)t.align);
            job->ptr[i] = p;
        }
        job->ws = plan->workspace > 0 ? pack->ws_ptr : nullptr;
        if (plan->workspace > 0 && !pack->ws_ptr)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "%s: engine %lld needs %lld bytes of workspace but the variant pack's "
                        "WORKSPACE is NULL",
                        what, (long long)plan->engine, (long long)plan->workspace);

        if (live_handle(plan->handle) && plan->handle->device != handle->device)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "%s: the plan was built for emulated cuda:%d, the "
                        "handle is cuda:%d's",
                        what, plan->handle->device, handle->device);
        stream = handle->stream;
        device = tdm_emu::stream_device(stream);
        if (device < 0)
            return fail(CUDNN_STATUS_BAD_PARAM, "%s: the handle's stream %p is not a live stream",
                        what, (void *)stream);
        if (device != handle->device)
            return fail(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH,
                        "%s: the handle belongs to emulated cuda:%d but its stream runs on "
                        "cuda:%d",
                        what, handle->device, device);

        // every operand lies in device memory of the stream's device, as far as its strides reach
        for (int i = 0; i < 3; i++) {
            const Tensor &t = op.t[i];
            const size_t bytes = (size_t)t.extent() * elem_size(t.type);
            char buf[320];
            snprintf(buf, sizeof buf, "%s %s (uid %lld, %s dims %s strides %s: %zu bytes)", what,
                     on.label[i], (long long)t.uid, type_name(t.type),
                     dims_str(t.dim, t.nd).c_str(), dims_str(t.stride, t.nd).c_str(), bytes);
            if (!tdm_emu::check_device_range(job->ptr[i], bytes, device, buf))
                return fail(CUDNN_STATUS_EXECUTION_FAILED,
                            "%s: %s is not device memory of "
                            "the stream's device as far as its strides reach",
                            what, on.label[i]);
        }
        if (job->ws) {
            char buf[160];
            snprintf(buf, sizeof buf, "%s workspace (%lld bytes)", what,
                     (long long)plan->workspace);
            if (!tdm_emu::check_device_range(job->ws, (size_t)plan->workspace, device, buf))
                return fail(CUDNN_STATUS_EXECUTION_FAILED,
                            "%s: the workspace is not device memory "
                            "of the stream's device",
                            what);
        }
    }
    std::shared_ptr<const Job> run = job;
    const cudaError_t e = tdm_emu::enqueue(stream, what, [run] { run_job(*run); });
    if (e != cudaSuccess)
        return fail(CUDNN_STATUS_EXECUTION_FAILED, "%s: the stream refused the work: %s", what,
                    cudaGetErrorName(e));
    return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"

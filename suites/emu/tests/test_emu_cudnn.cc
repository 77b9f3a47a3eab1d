/* test_emu_cudnn.cc — the emulated cuDNN (suites/emu/cudnn.cc) against expectations it did not
 * compute: the convolutions of data/cudnn_cases.txt, written by gen_cudnn_cases.py with PyTorch
 * (conv2d/conv3d and autograd, float64) from the rounded inputs, and the refusals NVIDIA's
 * documentation promises. Each case builds its descriptors the way the cuDNN 9 backend API
 * reference prescribes (tensors, convolution, the pass's operation, operation graph, engine
 * heuristics in modes A and FALLBACK, engine configurations, execution plans, variant packs) and
 * runs every engine the heuristics offer on cudaMalloc'd memory, NCHW or NHWC through the strides.
 * Then:
 *   - refusals: asymmetric padding; a required attribute missing at finalize; wrong attribute
 *     types and element counts; set after finalize, get before it; a variant pack missing a uid;
 *     inconsistent shapes; non-positive strides; misaligned pointers; engines out of range;
 *   - stream order with the descriptors destroyed before the work runs, and graph capture;
 *   - an NHWC tensor described with wrong strides that reach past its allocation is reported by
 *     the runtime's check_device_range (in a child process: the fault makes the error sticky).
 *
 * Tolerance (tolerance() below), per output element, from the generator's magnitude
 * S = |alpha| sum|terms| + |beta y0| and T = the most products one output sums:
 *   (T + 2) u S           accumulation: each of the T products and sums, alpha and beta add at most
 *                         u of S; u = 2^-24 (f32 accumulation: f32, f16 and bf16 data, whose
 *                         products are exact in f32), 2^-53 (f64), 2^-11 for an engine with the
 *                         REDUCED_PRECISION_REDUCTION note (f16 accumulation);
 *   + 1.01 2^-10 S        inputs rounded to 11 significant bits before the product: f32 data on an
 *                         engine with the TENSOR_CORE note (TF32) or DOWN_CONVERT_INPUTS (f16);
 *   + T 2^-24 |alpha| m^2 f16 inputs: subnormal rounding (absolute 2^-25 per input, m = 8 bounds
 *                         the inputs' magnitude);
 *   + ulp_out(|expected|) the one rounding to the output type, which may fall either side of a
 *                         boundary the float64 expectation sits near (ulp = |x| 2^-p, p = 23, 52,
 *                         10, 7; at least the smallest subnormal).
 * Untouched elements (an input never read by any term, e.g. dx under a stride larger than the
 * filter) must come back exactly 0 (beta 0) or y0 (beta 1), which the rule gives with S = 0. For
 * f32 data an engine with the TENSOR_CORE or DOWN_CONVERT_INPUTS note must also differ from the
 * expectation by more than the exact-input tolerance somewhere: the emulator models what those
 * notes mean, so a caller's engine filter is exercised. */
#include <cudnn.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#ifndef TDM_EMU_TEST_DATA
#define TDM_EMU_TEST_DATA "suites/emu/tests/data"
#endif

extern char **environ;

static int failures = 0;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            failures++;                                                     \
        }                                                                   \
    } while (0)

#define CUDA_OK(call)                                                      \
    do {                                                                   \
        cudaError_t e_ = (call);                                           \
        CHECK(e_ == cudaSuccess, "%s -> %s", #call, cudaGetErrorName(e_)); \
    } while (0)

#define DNN_OK(call)                                                                   \
    do {                                                                               \
        cudnnStatus_t s_ = (call);                                                     \
        CHECK(s_ == CUDNN_STATUS_SUCCESS, "%s -> %s", #call, cudnnGetErrorString(s_)); \
    } while (0)

// cuDNN 9 statuses come in categories (BAD_PARAM, NOT_SUPPORTED, ...) with detail codes: the
// documentation promises the category.
#define DNN_CAT(want, call)                                                    \
    do {                                                                       \
        cudnnStatus_t s_ = (call);                                             \
        CHECK(CUDNN_STATUS_CATEGORY(s_) == (want), "%s -> %s, want %s", #call, \
              cudnnGetErrorString(s_), cudnnGetErrorString(want));             \
    } while (0)

typedef cudnnBackendDescriptor_t bdesc;

// ---------------------------------------------------------------------------------------------
// host-side encodings of the storage types (the test's own, round to nearest even)

static uint32_t fbits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static float bitsf(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t to_half(float f) {  // exact for the values the generator writes, NaN otherwise
    if (isnan(f)) return 0x7e00;
    const uint32_t b = fbits(f), sign = (b >> 16) & 0x8000u;
    const float a = fabsf(f);
    if (a == 0) return (uint16_t)sign;
    int e;
    frexpf(a, &e);  // a = m 2^e, m in [0.5, 1)
    if (e < -13) return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));  // subnormal
    const uint32_t mant = (uint32_t)lrintf(ldexpf(a, 11 - e)) - 1024u;         // 10 bits
    return (uint16_t)(sign | ((uint32_t)(e + 14) << 10) | mant);
}
static float from_half(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}
static uint16_t to_bf16(float f) {
    if (isnan(f)) return 0x7fc0;
    uint32_t b = fbits(f);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}
static float from_bf16(uint16_t h) {
    return bitsf((uint32_t)h << 16);
}

static size_t size_of(cudnnDataType_t t) {
    return t == CUDNN_DATA_DOUBLE ? 8 : t == CUDNN_DATA_FLOAT ? 4 : 2;
}
static void put(cudnnDataType_t t, unsigned char *p, double v) {
    if (t == CUDNN_DATA_DOUBLE)
        memcpy(p, &v, 8);
    else if (t == CUDNN_DATA_FLOAT) {
        const float f = (float)v;
        memcpy(p, &f, 4);
    } else {
        const uint16_t h = t == CUDNN_DATA_HALF ? to_half((float)v) : to_bf16((float)v);
        memcpy(p, &h, 2);
    }
}
static double get(cudnnDataType_t t, const unsigned char *p) {
    if (t == CUDNN_DATA_DOUBLE) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    if (t == CUDNN_DATA_FLOAT) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return t == CUDNN_DATA_HALF ? from_half(h) : from_bf16(h);
}

// ---------------------------------------------------------------------------------------------
// the cases file

struct Case {
    std::string name;
    std::map<std::string, std::vector<std::string>> kv;
    std::map<std::string, std::vector<double>> arr;
    std::vector<int64_t> ints(const char *k) const {
        std::vector<int64_t> v;
        for (const std::string &s : kv.at(k)) v.push_back(strtoll(s.c_str(), nullptr, 10));
        return v;
    }
    std::string str(const char *k) const { return kv.at(k).at(0); }
    double num(const char *k) const { return strtod(kv.at(k).at(0).c_str(), nullptr); }
};

static std::vector<Case> read_cases(const char *path) {
    std::vector<Case> out;
    FILE *f = fopen(path, "r");
    CHECK(f, "cannot open %s", path);
    if (!f) return out;
    static char line[1 << 20];
    Case c;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        std::vector<std::string> tok;
        for (char *s = strtok(line, " \n"); s; s = strtok(nullptr, " \n")) tok.push_back(s);
        if (tok.empty()) continue;
        if (tok[0] == "case")
            c = Case(), c.name = tok.at(1);
        else if (tok[0] == "end")
            out.push_back(c);
        else if (tok[0] == "x" || tok[0] == "w" || tok[0] == "y" || tok[0] == "out" ||
                 tok[0] == "scale") {
            const bool f32_text = tok[0] != "out" && tok[0] != "scale";
            std::vector<double> v;
            for (size_t i = 2; i < tok.size(); i++)
                v.push_back(f32_text && c.str("type") != "DOUBLE"
                                ? (double)strtof(tok[i].c_str(), nullptr)
                                : strtod(tok[i].c_str(), nullptr));
            CHECK((int64_t)v.size() == strtoll(tok[1].c_str(), nullptr, 10), "%s: %s count",
                  c.name.c_str(), tok[0].c_str());
            c.arr[tok[0]] = v;
        } else {
            c.kv[tok[0]] = std::vector<std::string>(tok.begin() + 1, tok.end());
        }
    }
    fclose(f);
    return out;
}

static cudnnDataType_t type_of(const std::string &s) {
    if (s == "DOUBLE") return CUDNN_DATA_DOUBLE;
    if (s == "HALF") return CUDNN_DATA_HALF;
    if (s == "BFLOAT16") return CUDNN_DATA_BFLOAT16;
    return CUDNN_DATA_FLOAT;
}

// Packed strides for dims (N, C, spatial...): NCHW-like, or channels last (NHWC, NDHWC).
static std::vector<int64_t> strides_for(const std::vector<int64_t> &d, bool channels_last) {
    const size_t n = d.size();
    std::vector<int64_t> s(n);
    if (!channels_last) {
        s[n - 1] = 1;
        for (size_t i = n - 1; i-- > 0;) s[i] = s[i + 1] * d[i + 1];
    } else {
        s[1] = 1;
        int64_t acc = d[1];
        for (size_t i = n - 1; i >= 2; i--) s[i] = acc, acc *= d[i];
        s[0] = acc;
    }
    return s;
}

// Logical (row-major over dims) index i -> element offset under strides.
static int64_t offset_of(int64_t i, const std::vector<int64_t> &d, const std::vector<int64_t> &s) {
    int64_t off = 0;
    for (size_t k = d.size(); k-- > 0;) off += (i % d[k]) * s[k], i /= d[k];
    return off;
}
static int64_t extent_of(const std::vector<int64_t> &d, const std::vector<int64_t> &s) {
    int64_t e = 1;
    for (size_t k = 0; k < d.size(); k++) e += (d[k] - 1) * s[k];
    return e;
}
static int64_t count_of(const std::vector<int64_t> &d) {
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    return n;
}

struct Dev {
    void *p = nullptr;
    size_t bytes = 0;
    Dev() = default;
    explicit Dev(size_t n) : bytes(n) {
        if (n) CUDA_OK(cudaMalloc(&p, n));
    }
    ~Dev() {
        if (p) cudaFree(p);
    }
    Dev(const Dev &) = delete;
    Dev &operator=(const Dev &) = delete;
    void alloc(size_t n) {
        bytes = n;
        if (n) CUDA_OK(cudaMalloc(&p, n));
    }
    void write(const std::vector<unsigned char> &b) {
        CUDA_OK(cudaMemcpy(p, b.data(), b.size(), cudaMemcpyHostToDevice));
        // from pageable memory cudaMemcpy may return before the bytes land (CUDA's documented
        // behaviour, kept by the emulator); work on non-blocking streams would not wait for it
        CUDA_OK(cudaDeviceSynchronize());
    }
    std::vector<unsigned char> read() const {
        std::vector<unsigned char> b(bytes);
        if (bytes) CUDA_OK(cudaMemcpy(b.data(), p, bytes, cudaMemcpyDeviceToHost));
        return b;
    }
};

// ---------------------------------------------------------------------------------------------
// descriptors, built as the backend API reference prescribes

static bdesc make(cudnnBackendDescriptorType_t t) {
    bdesc d = nullptr;
    DNN_OK(cudnnBackendCreateDescriptor(t, &d));
    return d;
}
static cudnnStatus_t set(bdesc d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t,
                         int64_t count, const void *v) {
    return cudnnBackendSetAttribute(d, n, t, count, v);
}
static cudnnStatus_t set_i64(bdesc d, cudnnBackendAttributeName_t n, std::vector<int64_t> v) {
    return set(d, n, CUDNN_TYPE_INT64, (int64_t)v.size(), v.data());
}
static cudnnStatus_t set_desc(bdesc d, cudnnBackendAttributeName_t n, bdesc v) {
    return set(d, n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}
static void destroy(bdesc &d) {
    if (d) DNN_OK(cudnnBackendDestroyDescriptor(d));
    d = nullptr;
}

// A tensor: data type, dims, strides, unique id, byte alignment (all required), not finalized.
static bdesc tensor_unfinalized(int64_t uid, cudnnDataType_t t, const std::vector<int64_t> &dims,
                                const std::vector<int64_t> &strides, int64_t align) {
    bdesc d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    DNN_OK(set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t));
    DNN_OK(set_i64(d, CUDNN_ATTR_TENSOR_DIMENSIONS, dims));
    DNN_OK(set_i64(d, CUDNN_ATTR_TENSOR_STRIDES, strides));
    DNN_OK(set_i64(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, {uid}));
    DNN_OK(set_i64(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {align}));
    return d;
}
static bdesc tensor(int64_t uid, cudnnDataType_t t, const std::vector<int64_t> &dims,
                    const std::vector<int64_t> &strides, int64_t align = 16) {
    bdesc d = tensor_unfinalized(uid, t, dims, strides, align);
    DNN_OK(cudnnBackendFinalize(d));
    return d;
}

struct ConvParams {
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    std::vector<int64_t> pre, post, stride, dil;
};
static bdesc conv_desc(const ConvParams &p, bool finalize = true) {
    bdesc d = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const int64_t nsp = (int64_t)p.pre.size();
    DNN_OK(set(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &p.comp));
    DNN_OK(set(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &p.mode));
    DNN_OK(set_i64(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, {nsp}));
    DNN_OK(set_i64(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, p.pre));
    DNN_OK(set_i64(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, p.post));
    DNN_OK(set_i64(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, p.stride));
    DNN_OK(set_i64(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, p.dil));
    if (finalize) DNN_OK(cudnnBackendFinalize(d));
    return d;
}

enum Pass { FWD, BWD_DATA, BWD_FILTER };
struct OpAttrs {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;  // x-, w-, y-shaped tensors
};
static const OpAttrs kOp[3] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
};
static const int kOutRole[3] = {2, 0, 1};

// The operation (alpha and beta as float, or double for double compute, as the legacy API's
// scaling-parameter rule has it; the backend reference accepts either type).
static bdesc op_desc(Pass pass, double alpha, double beta, bool dbl, bdesc conv, bdesc x, bdesc w,
                     bdesc y, bool finalize = true) {
    const OpAttrs &a = kOp[pass];
    bdesc d = make(a.type);
    const float af = (float)alpha, bf = (float)beta;
    if (dbl) {
        DNN_OK(set(d, a.alpha, CUDNN_TYPE_DOUBLE, 1, &alpha));
        DNN_OK(set(d, a.beta, CUDNN_TYPE_DOUBLE, 1, &beta));
    } else {
        DNN_OK(set(d, a.alpha, CUDNN_TYPE_FLOAT, 1, &af));
        DNN_OK(set(d, a.beta, CUDNN_TYPE_FLOAT, 1, &bf));
    }
    DNN_OK(set_desc(d, a.conv, conv));
    if (x) DNN_OK(set_desc(d, a.x, x));
    if (w) DNN_OK(set_desc(d, a.w, w));
    if (y) DNN_OK(set_desc(d, a.y, y));
    if (finalize) DNN_OK(cudnnBackendFinalize(d));
    return d;
}

static bdesc graph_desc(cudnnHandle_t h, bdesc op, cudnnStatus_t *st) {
    bdesc g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    DNN_OK(set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    DNN_OK(set_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, op));
    *st = cudnnBackendFinalize(g);
    return g;
}

// The engine configurations a heuristic mode proposes (caller destroys them); the status of
// the heuristic descriptor's finalize in *st.
static std::vector<bdesc> heuristics(bdesc graph, cudnnBackendHeurMode_t mode,
                                     cudnnStatus_t *st = nullptr) {
    std::vector<bdesc> cfgs;
    bdesc h = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    DNN_OK(set_desc(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
    DNN_OK(set(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    const cudnnStatus_t fs = cudnnBackendFinalize(h);
    if (st)
        *st = fs;
    else
        DNN_OK(fs);
    int64_t n = 0;
    if (fs == CUDNN_STATUS_SUCCESS)
        DNN_OK(cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr));
    if (n > 0) {
        cfgs.resize((size_t)n);
        for (bdesc &c : cfgs) c = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        int64_t got = 0;
        DNN_OK(cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfgs.data()));
        CHECK(got == n, "results: %lld then %lld", (long long)n, (long long)got);
    }
    destroy(h);
    return cfgs;
}

struct EngineInfo {
    int64_t index = -1;
    std::vector<int> notes;
    bool has(cudnnBackendNumericalNote_t n) const {
        for (int v : notes)
            if (v == (int)n) return true;
        return false;
    }
};
static EngineInfo engine_of(bdesc cfg) {
    EngineInfo e;
    bdesc eng = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    DNN_OK(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                    1, &n, &eng));
    DNN_OK(cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                    &e.index));
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    DNN_OK(cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                    CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                                    notes));
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        e.notes.push_back((int)notes[i]);
    destroy(eng);
    return e;
}

// An execution plan for a configuration, and its workspace size.
static bdesc plan_of(cudnnHandle_t h, bdesc cfg, int64_t *ws, cudnnStatus_t *st = nullptr) {
    bdesc p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    DNN_OK(set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    DNN_OK(set_desc(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg));
    const cudnnStatus_t fs = cudnnBackendFinalize(p);
    if (st)
        *st = fs;
    else
        DNN_OK(fs);
    int64_t n = 0;
    *ws = 0;
    if (fs == CUDNN_STATUS_SUCCESS)
        DNN_OK(cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                        CUDNN_TYPE_INT64, 1, &n, ws));
    return p;
}

static cudnnStatus_t execute(cudnnHandle_t h, bdesc plan, std::vector<int64_t> uids,
                             std::vector<void *> ptrs, void *ws) {
    bdesc pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    DNN_OK(set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, (int64_t)uids.size(),
               uids.data()));
    DNN_OK(set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
               (int64_t)ptrs.size(), ptrs.data()));
    DNN_OK(set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws));
    DNN_OK(cudnnBackendFinalize(pack));
    const cudnnStatus_t st = cudnnBackendExecute(h, plan, pack);
    destroy(pack);
    return st;
}

// ---------------------------------------------------------------------------------------------
// tolerance (the rule is in the comment at the top)

static double ulp_out(double x, cudnnDataType_t t) {
    const int p = t == CUDNN_DATA_DOUBLE  ? 52
                  : t == CUDNN_DATA_FLOAT ? 23
                  : t == CUDNN_DATA_HALF  ? 10
                                          : 7;
    const double tiny = t == CUDNN_DATA_DOUBLE  ? ldexp(1, -1074)
                        : t == CUDNN_DATA_FLOAT ? ldexp(1, -149)
                        : t == CUDNN_DATA_HALF  ? ldexp(1, -24)
                                                : ldexp(1, -133);
    return fmax(fabs(x) * ldexp(1, -p), tiny);
}

static double tolerance(cudnnDataType_t t, const EngineInfo &e, int64_t terms, double alpha,
                        double expected, double scale) {
    double u = t == CUDNN_DATA_DOUBLE ? ldexp(1, -53) : ldexp(1, -24);
    if (e.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) u = ldexp(1, -11);
    double tol = (double)(terms + 2) * u * scale;
    const bool rounded_inputs =
        t == CUDNN_DATA_FLOAT && (e.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
                                  e.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS));
    if (rounded_inputs)
        tol += 1.01 * ldexp(1, -10) * scale + terms * ldexp(1, -24) * fabs(alpha) * 64;
    return tol + ulp_out(expected, t);
}

// ---------------------------------------------------------------------------------------------
// one case: every engine the heuristics offer (modes A and FALLBACK)

static void run_case(cudnnHandle_t h, cudaStream_t stream, const Case &c) {
    const char *nm = c.name.c_str();
    const std::string ps = c.str("pass");
    const Pass pass = ps == "FWD" ? FWD : ps == "BWD_DATA" ? BWD_DATA : BWD_FILTER;
    const cudnnDataType_t t = type_of(c.str("type"));
    const bool cl = c.str("layout") == "NHWC";
    const std::vector<int64_t> dims[3] = {c.ints("xdims"), c.ints("wdims"), c.ints("ydims")};
    std::vector<int64_t> str[3];
    for (int i = 0; i < 3; i++) str[i] = strides_for(dims[i], cl);
    const double alpha = c.num("alpha"), beta = c.num("beta");
    const int64_t terms = c.ints("terms")[0];
    const int out = kOutRole[pass];
    const int64_t uids[3] = {101, 102, 103};
    static const char *const keys[3] = {"x", "w", "y"};

    // buffers: the inputs, and the output's initial contents (NaN when beta is zero: not read)
    std::vector<unsigned char> host[3];
    Dev dev[3];
    for (int i = 0; i < 3; i++) {
        const size_t es = size_of(t);
        host[i].assign((size_t)extent_of(dims[i], str[i]) * es, 0);
        const int64_t n = count_of(dims[i]);
        const bool have = c.arr.count(keys[i]) > 0;
        CHECK(have || (i == out && beta == 0), "%s: no %s", nm, keys[i]);
        for (int64_t k = 0; k < n; k++)
            put(t, &host[i][(size_t)offset_of(k, dims[i], str[i]) * es],
                have ? c.arr.at(keys[i])[(size_t)k] : NAN);
        dev[i].alloc(host[i].size());
    }

    ConvParams cp;
    cp.comp = t == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cp.mode = c.str("mode") == "CONVOLUTION" ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
    cp.pre = cp.post = c.ints("pad");
    cp.stride = c.ints("stride");
    cp.dil = c.ints("dil");
    bdesc td[3];
    for (int i = 0; i < 3; i++) td[i] = tensor(uids[i], t, dims[i], str[i]);
    bdesc cd = conv_desc(cp);
    bdesc od = op_desc(pass, alpha, beta, t == CUDNN_DATA_DOUBLE, cd, td[0], td[1], td[2]);
    cudnnStatus_t gst;
    bdesc gd = graph_desc(h, od, &gst);
    DNN_OK(gst);

    std::vector<bdesc> cfgs = heuristics(gd, CUDNN_HEUR_MODE_A);
    CHECK(!cfgs.empty(), "%s: mode A offers no engine", nm);
    std::vector<bdesc> fb = heuristics(gd, CUDNN_HEUR_MODE_FALLBACK);
    CHECK(!fb.empty(), "%s: FALLBACK offers no engine", nm);
    for (bdesc f : fb) cfgs.push_back(f);

    std::vector<int64_t> seen;
    for (bdesc cfg : cfgs) {
        const EngineInfo e = engine_of(cfg);
        bool dup = false;
        for (int64_t s : seen) dup |= s == e.index;
        if (dup) continue;
        seen.push_back(e.index);
        if (t == CUDNN_DATA_DOUBLE)
            CHECK(!e.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE), "%s: a tensor-core engine for double",
                  nm);
        int64_t wsb = 0;
        bdesc plan = plan_of(h, cfg, &wsb);
        Dev ws((size_t)wsb);
        for (int i = 0; i < 3; i++) dev[i].write(host[i]);
        DNN_OK(cudnnSetStream(h, stream));
        DNN_OK(execute(h, plan, {uids[0], uids[1], uids[2]}, {dev[0].p, dev[1].p, dev[2].p}, ws.p));
        CUDA_OK(cudaStreamSynchronize(stream));

        // the inputs are untouched, the output as expected
        for (int i = 0; i < 3; i++)
            if (i != out)
                CHECK(dev[i].read() == host[i], "%s engine %lld: input %s was written", nm,
                      (long long)e.index, keys[i]);
        const std::vector<unsigned char> got = dev[out].read();
        const std::vector<double> &want = c.arr.at("out"), &scale = c.arr.at("scale");
        int bad = 0;
        bool differs = false;  // beyond what an engine without notes may differ
        const EngineInfo exact;
        for (size_t k = 0; k < want.size(); k++) {
            const double g =
                get(t, &got[(size_t)offset_of((int64_t)k, dims[out], str[out]) * size_of(t)]);
            const double tol = tolerance(t, e, terms, alpha, want[k], scale[k]);
            if (!(fabs(g - want[k]) <= tol) && bad++ < 3)
                CHECK(false, "%s engine %lld: element %zu: %.9g, want %.9g (tolerance %.3g)", nm,
                      (long long)e.index, k, g, want[k], tol);
            differs |= fabs(g - want[k]) > tolerance(t, exact, terms, alpha, want[k], scale[k]);
        }
        const bool lossy =
            (t == CUDNN_DATA_FLOAT && (e.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
                                       e.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))) ||
            e.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION);
        if (lossy)
            CHECK(differs,
                  "%s engine %lld: its notes say it rounds inputs or partial sums, yet "
                  "every element is within the tolerance of exact inputs and f32 sums",
                  nm, (long long)e.index);
        destroy(plan);
    }
    // FALLBACK's engines carry no note that changes the numbers
    for (bdesc f : fb) {
        const EngineInfo e = engine_of(f);
        CHECK(!e.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE) &&
                  !e.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) &&
                  !e.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION),
              "%s: the fallback engine %lld has numerical notes", nm, (long long)e.index);
    }
    printf("%-32s engines", nm);
    for (int64_t s : seen) printf(" %lld", (long long)s);
    printf("\n");
    for (bdesc &cf : cfgs) destroy(cf);
    destroy(gd);
    destroy(od);
    destroy(cd);
    for (bdesc &x : td) destroy(x);
}

// ---------------------------------------------------------------------------------------------
// refusals

// A small f32 forward problem: x [1,2,5,5], w [2,2,3,3], NCHW, with the given paddings.
struct Small {
    bdesc x, w, y, conv, op, graph;
    cudnnStatus_t graph_status;
    void destroy_all() {
        for (bdesc *d : {&graph, &op, &conv, &x, &w, &y}) destroy(*d);
    }
};
static Small small_fwd(cudnnHandle_t h, std::vector<int64_t> pre, std::vector<int64_t> post) {
    Small s{};
    const std::vector<int64_t> xd = {1, 2, 5, 5}, wd = {2, 2, 3, 3};
    std::vector<int64_t> yd = {1, 2, 0, 0};
    for (int i = 0; i < 2; i++) yd[2 + i] = xd[2 + i] + pre[i] + post[i] - wd[2 + i] + 1;
    s.x = tensor('x', CUDNN_DATA_FLOAT, xd, strides_for(xd, false));
    s.w = tensor('w', CUDNN_DATA_FLOAT, wd, strides_for(wd, false));
    s.y = tensor('y', CUDNN_DATA_FLOAT, yd, strides_for(yd, false));
    ConvParams p;
    p.pre = pre, p.post = post, p.stride = {1, 1}, p.dil = {1, 1};
    s.conv = conv_desc(p);
    s.op = op_desc(FWD, 1, 0, false, s.conv, s.x, s.w, s.y);
    s.graph = graph_desc(h, s.op, &s.graph_status);
    return s;
}

// cuDNN refuses asymmetric padding: either the graph does not finalize (NOT_SUPPORTED), or no
// heuristic offers an engine for it.
static void check_asymmetric_refused(cudnnHandle_t h, std::vector<int64_t> pre,
                                     std::vector<int64_t> post) {
    Small s = small_fwd(h, pre, post);
    if (s.graph_status == CUDNN_STATUS_SUCCESS) {
        for (cudnnBackendHeurMode_t m : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
            cudnnStatus_t st;
            std::vector<bdesc> cfgs = heuristics(s.graph, m, &st);
            CHECK(cfgs.empty(), "asymmetric padding: heuristic mode %d offers %zu engines", (int)m,
                  cfgs.size());
            for (bdesc &c : cfgs) destroy(c);
        }
    } else {
        CHECK(CUDNN_STATUS_CATEGORY(s.graph_status) == CUDNN_STATUS_NOT_SUPPORTED,
              "asymmetric padding: graph finalize -> %s", cudnnGetErrorString(s.graph_status));
    }
    s.destroy_all();
}

static void test_refusals(cudnnHandle_t h, cudaStream_t stream) {
    CHECK(strcmp(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM") == 0,
          "error string %s", cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM));

    // asymmetric padding, post > pre and pre > post
    check_asymmetric_refused(h, {1, 1}, {2, 2});
    check_asymmetric_refused(h, {1, 1}, {0, 1});
    {  // the symmetric problem of the same kind runs
        Small s = small_fwd(h, {1, 1}, {1, 1});
        DNN_OK(s.graph_status);
        s.destroy_all();
    }

    // a required attribute missing at finalize: BAD_PARAM
    {
        bdesc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const cudnnDataType_t f = CUDNN_DATA_FLOAT;
        DNN_OK(set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f));
        DNN_OK(set_i64(t, CUDNN_ATTR_TENSOR_DIMENSIONS, {1, 2, 3, 4}));
        DNN_OK(set_i64(t, CUDNN_ATTR_TENSOR_STRIDES, {24, 12, 4, 1}));
        DNN_OK(set_i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, {7}));
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(t));  // no BYTE_ALIGNMENT
        // get before finalize, set after: NOT_INITIALIZED
        int64_t n = 0, uid = 0;
        CHECK(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &n,
                                       &uid) == CUDNN_STATUS_NOT_INITIALIZED,
              "get before finalize%s", "");
        DNN_OK(set_i64(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {4}));
        DNN_OK(cudnnBackendFinalize(t));
        CHECK(set_i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, {8}) == CUDNN_STATUS_NOT_INITIALIZED,
              "set after finalize%s", "");
        DNN_OK(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &n,
                                        &uid));
        CHECK(n == 1 && uid == 7, "uid %lld (%lld elements)", (long long)uid, (long long)n);
        int64_t dims[8] = {};
        DNN_OK(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 2, &n,
                                        dims));
        CHECK(n == 4 && dims[0] == 1 && dims[1] == 2 && dims[2] == 0,
              "dims: %lld available, first two %lld %lld, third untouched", (long long)n,
              (long long)dims[0], (long long)dims[1]);
        // a wrong attribute type on get: BAD_PARAM
        double dv = 0;
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID,
                                                                 CUDNN_TYPE_DOUBLE, 1, &n, &dv));
        destroy(t);
    }
    {
        ConvParams p;
        p.pre = p.post = {0, 0}, p.stride = {1, 1}, p.dil = {1, 1};
        bdesc c = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
        const int64_t two = 2;
        DNN_OK(set(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &p.comp));
        DNN_OK(set(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &p.mode));
        DNN_OK(set(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &two));
        DNN_OK(set_i64(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, p.pre));
        DNN_OK(set_i64(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, p.post));
        DNN_OK(set_i64(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, p.stride));
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(c));  // no DILATIONS
        // element counts that disagree with SPATIAL_DIMS: BAD_PARAM at finalize
        DNN_OK(set_i64(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, {1, 1, 1}));
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(c));
        DNN_OK(set_i64(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, {1, 1}));
        DNN_OK(cudnnBackendFinalize(c));
        destroy(c);
    }
    {  // an operation without its output tensor
        Small s = small_fwd(h, {1, 1}, {1, 1});
        bdesc op = op_desc(FWD, 1, 0, false, s.conv, s.x, s.w, nullptr, false);
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(op));
        destroy(op);
        // an output of the wrong shape: BAD_PARAM at the operation's finalize
        bdesc yb = tensor('y', CUDNN_DATA_FLOAT, {1, 2, 4, 5}, {40, 20, 5, 1});
        op = op_desc(FWD, 1, 0, false, s.conv, s.x, s.w, yb, false);
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(op));
        destroy(op);
        destroy(yb);
        // an execution plan without its engine configuration
        bdesc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        DNN_OK(set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(plan));
        destroy(plan);
        s.destroy_all();
    }

    // wrong attribute types and element counts: BAD_PARAM at set
    {
        bdesc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const int32_t uid32 = 5;
        const double dd[4] = {1, 2, 3, 4};
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT32, 1, &uid32));
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_DOUBLE, 4, dd));
        const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 9, nine));
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 2, nine));
        // an attribute of another descriptor type
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(t, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, nine));
        bdesc c = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
        const int64_t mode64 = CUDNN_CROSS_CORRELATION;
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_INT64, 1, &mode64));
        bdesc op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
        const int64_t one = 1;
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_INT64, 1, &one));
        // a descriptor of the wrong type where a tensor belongs
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, c));
        // read-only attributes cannot be set
        bdesc p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                set(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &one));
        destroy(p);
        destroy(op);
        destroy(c);
        destroy(t);
        char msg[256] = "";
        cudnnGetLastErrorString(msg, sizeof msg);
        CHECK(msg[0] != '\0', "no last error message after a refusal%s", "");
    }

    // tensors: non-positive strides, an alignment that is not a multiple of the element size
    {
        bdesc t = tensor_unfinalized(1, CUDNN_DATA_FLOAT, {1, 2, 3, 3}, {18, 9, 0, 1}, 16);
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(t));
        destroy(t);
        t = tensor_unfinalized(1, CUDNN_DATA_FLOAT, {1, 2, 3, 3}, {18, 9, 3, 1}, 2);
        DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(t));
        destroy(t);
    }

    // mixed data types: no graph (or no engine)
    {
        const std::vector<int64_t> xd = {1, 2, 5, 5}, wd = {2, 2, 3, 3}, yd = {1, 2, 3, 3};
        bdesc x = tensor('x', CUDNN_DATA_FLOAT, xd, strides_for(xd, false));
        bdesc w = tensor('w', CUDNN_DATA_HALF, wd, strides_for(wd, false));
        bdesc y = tensor('y', CUDNN_DATA_FLOAT, yd, strides_for(yd, false));
        ConvParams p;
        p.pre = p.post = {0, 0}, p.stride = {1, 1}, p.dil = {1, 1};
        bdesc c = conv_desc(p);
        bdesc op = op_desc(FWD, 1, 0, false, c, x, w, y);
        cudnnStatus_t st;
        bdesc g = graph_desc(h, op, &st);
        if (st == CUDNN_STATUS_SUCCESS) {
            std::vector<bdesc> cfgs = heuristics(g, CUDNN_HEUR_MODE_FALLBACK);
            CHECK(cfgs.empty(), "mixed types: %zu engines", cfgs.size());
            for (bdesc &cf : cfgs) destroy(cf);
        } else {
            CHECK(CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED, "mixed types: %s",
                  cudnnGetErrorString(st));
        }
        for (bdesc *d : {&g, &op, &c, &x, &w, &y}) destroy(*d);
    }

    // execution: a variant pack missing a uid, a misaligned pointer, a missing workspace;
    // an engine index out of range
    {
        Small s = small_fwd(h, {1, 1}, {1, 1});
        Dev x(2 * 25 * 4 + 64), w(2 * 9 * 2 * 4), y(2 * 25 * 4);
        std::vector<bdesc> cfgs = heuristics(s.graph, CUDNN_HEUR_MODE_FALLBACK);
        CHECK(!cfgs.empty(), "no fallback engine%s", "");
        if (!cfgs.empty()) {
            int64_t wsb = 0;
            bdesc plan = plan_of(h, cfgs[0], &wsb);
            Dev ws((size_t)wsb);
            DNN_OK(cudnnSetStream(h, stream));
            DNN_CAT(CUDNN_STATUS_BAD_PARAM, execute(h, plan, {'x', 'w'}, {x.p, w.p}, ws.p));
            DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                    execute(h, plan, {'x', 'w', 'y'}, {(char *)x.p + 4, w.p, y.p}, ws.p));
            DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                    execute(h, plan, {'x', 'w', 'y'}, {x.p, nullptr, y.p}, ws.p));
            DNN_OK(execute(h, plan, {'x', 'w', 'y', 'z'}, {x.p, w.p, y.p, x.p}, ws.p));
            CUDA_OK(cudaStreamSynchronize(stream));
            destroy(plan);
            // uids and pointers in different numbers: the variant pack does not finalize
            bdesc pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
            const int64_t u[3] = {'x', 'w', 'y'};
            void *pp[2] = {x.p, w.p}, *nows = nullptr;
            DNN_OK(set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, u));
            DNN_OK(set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 2, pp));
            DNN_OK(set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &nows));
            DNN_CAT(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(pack));
            destroy(pack);
        }
        // an engine that needs a workspace, run without one
        std::vector<bdesc> all = heuristics(s.graph, CUDNN_HEUR_MODE_A);
        for (bdesc cfg : all) {
            int64_t wsb = 0;
            bdesc plan = plan_of(h, cfg, &wsb);
            if (wsb > 0) {
                DNN_CAT(CUDNN_STATUS_BAD_PARAM,
                        execute(h, plan, {'x', 'w', 'y'}, {x.p, w.p, y.p}, nullptr));
                destroy(plan);
                break;
            }
            destroy(plan);
        }
        // engines by global index: the count the graph reports is one past the last
        int64_t count = 0, n = 0;
        DNN_OK(cudnnBackendGetAttribute(s.graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                        CUDNN_TYPE_INT64, 1, &n, &count));
        CHECK(count >= 1, "engine global count %lld", (long long)count);
        bdesc eng = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        DNN_OK(set_desc(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, s.graph));
        DNN_OK(set_i64(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, {count}));
        DNN_CAT(CUDNN_STATUS_NOT_SUPPORTED, cudnnBackendFinalize(eng));
        destroy(eng);
        // a configuration built by hand from the fallback's engine index runs
        if (!cfgs.empty()) {
            const EngineInfo e = engine_of(cfgs[0]);
            eng = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
            DNN_OK(set_desc(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, s.graph));
            DNN_OK(set_i64(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, {e.index}));
            DNN_OK(cudnnBackendFinalize(eng));
            bdesc cfg = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
            DNN_OK(set_desc(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, eng));
            DNN_OK(cudnnBackendFinalize(cfg));
            int64_t wsb = 0;
            bdesc plan = plan_of(h, cfg, &wsb);
            Dev ws((size_t)wsb);
            DNN_OK(execute(h, plan, {'x', 'w', 'y'}, {x.p, w.p, y.p}, ws.p));
            CUDA_OK(cudaStreamSynchronize(stream));
            for (bdesc *d : {&plan, &cfg, &eng}) destroy(*d);
        }
        for (bdesc &c : all) destroy(c);
        for (bdesc &c : cfgs) destroy(c);
        s.destroy_all();
    }
}

// ---------------------------------------------------------------------------------------------
// stream order and graph capture: y += conv(ones, ones) (beta 1): each element gains the number
// of in-bounds taps, exactly

static void test_stream_and_graph(cudnnHandle_t h) {
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    DNN_OK(cudnnSetStream(h, s));
    const std::vector<int64_t> xd = {1, 3, 4, 4}, wd = {2, 3, 3, 3}, yd = {1, 2, 4, 4};
    Dev x(48 * 4), w(54 * 4), y(32 * 4);
    std::vector<unsigned char> ones(54 * 4), zeros(32 * 4, 0);
    for (int i = 0; i < 54; i++) put(CUDNN_DATA_FLOAT, &ones[(size_t)i * 4], 1.0);
    x.write(std::vector<unsigned char>(ones.begin(), ones.begin() + 48 * 4));
    w.write(ones);
    y.write(zeros);
    bdesc xt = tensor(1, CUDNN_DATA_FLOAT, xd, strides_for(xd, true));
    bdesc wt = tensor(2, CUDNN_DATA_FLOAT, wd, strides_for(wd, true));
    bdesc yt = tensor(3, CUDNN_DATA_FLOAT, yd, strides_for(yd, true));
    ConvParams p;
    p.pre = p.post = {1, 1}, p.stride = {1, 1}, p.dil = {1, 1};
    bdesc c = conv_desc(p);
    bdesc op = op_desc(FWD, 1, 1, false, c, xt, wt, yt);
    cudnnStatus_t st;
    bdesc g = graph_desc(h, op, &st);
    DNN_OK(st);
    std::vector<bdesc> cfgs = heuristics(g, CUDNN_HEUR_MODE_FALLBACK);
    int64_t wsb = 0;
    bdesc plan = cfgs.empty() ? nullptr : plan_of(h, cfgs[0], &wsb);
    Dev ws((size_t)wsb);
    auto taps = [](int64_t i) { return (int64_t)(i == 0 || i == 3 ? 2 : 3); };
    auto check_y = [&](double times, const char *what) {
        const std::vector<unsigned char> b = y.read();
        int bad = 0;
        for (int64_t k = 0; k < 32; k++) {  // NHWC: k = (h*4 + w)*2 + channel
            const int64_t hh = k / 8, ww = k / 2 % 4;
            const double want = times * 3.0 * (double)(taps(hh) * taps(ww));
            const double got = get(CUDNN_DATA_FLOAT, &b[(size_t)k * 4]);
            if (got != want && bad++ < 3)
                CHECK(false, "%s: y[%lld] = %g, want %g", what, (long long)k, got, want);
        }
    };
    if (plan) {
        // the descriptors are destroyed before the work runs: the queued work keeps what it needs
        const cudnnStatus_t e = execute(h, plan, {1, 2, 3}, {x.p, w.p, y.p}, ws.p);
        DNN_OK(e);
        for (bdesc *d : {&plan, &g, &op, &c, &xt, &wt, &yt}) destroy(*d);
        for (bdesc &cf : cfgs) destroy(cf);
        CUDA_OK(cudaStreamSynchronize(s));
        check_y(1, "stream order");
    }
    // capture: two executions in one graph, launched twice -> 4 more
    xt = tensor(1, CUDNN_DATA_FLOAT, xd, strides_for(xd, true));
    wt = tensor(2, CUDNN_DATA_FLOAT, wd, strides_for(wd, true));
    yt = tensor(3, CUDNN_DATA_FLOAT, yd, strides_for(yd, true));
    c = conv_desc(p);
    op = op_desc(FWD, 1, 1, false, c, xt, wt, yt);
    g = graph_desc(h, op, &st);
    cfgs = heuristics(g, CUDNN_HEUR_MODE_FALLBACK);
    plan = cfgs.empty() ? nullptr : plan_of(h, cfgs[0], &wsb);
    if (plan) {
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        DNN_OK(execute(h, plan, {1, 2, 3}, {x.p, w.p, y.p}, ws.p));
        DNN_OK(execute(h, plan, {1, 2, 3}, {x.p, w.p, y.p}, ws.p));
        CUDA_OK(cudaStreamEndCapture(s, &graph));
        check_y(1, "after capture (nothing ran)");
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_OK(cudaGraphLaunch(exec, s));
        CUDA_OK(cudaGraphLaunch(exec, s));
        CUDA_OK(cudaStreamSynchronize(s));
        check_y(5, "graph launched twice");
        CUDA_OK(cudaGraphExecDestroy(exec));
        CUDA_OK(cudaGraphDestroy(graph));
    }
    for (bdesc *d : {&plan, &g, &op, &c, &xt, &wt, &yt}) destroy(*d);
    for (bdesc &cf : cfgs) destroy(cf);
    DNN_OK(cudnnSetStream(h, 0));
    CUDA_OK(cudaStreamDestroy(s));
}

// ---------------------------------------------------------------------------------------------
// an NHWC tensor described with wrong strides (H's stride twice what it is) that reach past its
// allocation: reported by the runtime's check_device_range. Run in a child process (the fault
// makes the device error sticky, or aborts under TANDEM_EMU_ABORT=1); the parent reads its stderr.

static int oob_child(void) {
    cudnnHandle_t h;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return 2;
    const std::vector<int64_t> xd = {1, 4, 5, 5}, wd = {4, 4, 3, 3}, yd = {1, 4, 3, 3};
    Dev x(100 * 4), w(144 * 4), y(36 * 4);
    bdesc xt = tensor('x', CUDNN_DATA_FLOAT, xd, {100, 1, 40, 4});  // H stride 40, not 20
    bdesc wt = tensor('w', CUDNN_DATA_FLOAT, wd, strides_for(wd, true));
    bdesc yt = tensor('y', CUDNN_DATA_FLOAT, yd, strides_for(yd, true));
    ConvParams p;
    p.pre = p.post = {0, 0}, p.stride = {1, 1}, p.dil = {1, 1};
    bdesc c = conv_desc(p);
    bdesc op = op_desc(FWD, 1, 0, false, c, xt, wt, yt);
    cudnnStatus_t st;
    bdesc g = graph_desc(h, op, &st);
    std::vector<bdesc> cfgs = heuristics(g, CUDNN_HEUR_MODE_FALLBACK);
    if (cfgs.empty()) return 3;
    int64_t wsb = 0;
    bdesc plan = plan_of(h, cfgs[0], &wsb);
    const cudnnStatus_t e = execute(h, plan, {'x', 'w', 'y'}, {x.p, w.p, y.p}, nullptr);
    const cudaError_t sync = cudaDeviceSynchronize();
    fprintf(stderr, "oob child: cudnnBackendExecute -> %s, then cudaDeviceSynchronize -> %s\n",
            cudnnGetErrorString(e), cudaGetErrorName(sync));
    for (bdesc *d : {&plan, &g, &op, &c, &xt, &wt, &yt}) destroy(*d);
    for (bdesc &cf : cfgs) destroy(cf);
    cudnnDestroy(h);
    return e != CUDNN_STATUS_SUCCESS || sync != cudaSuccess ? 0 : 1;
}

static void test_out_of_bounds_reported(void) {
    char path[] = "/tmp/test_emu_cudnn_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp%s", "");
    if (fd < 0) return;
    close(fd);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, path, O_WRONLY | O_TRUNC, 0600);
    char self[] = "/proc/self/exe", flag[] = "--oob-child";
    char *argv[] = {self, flag, nullptr};
    pid_t pid = -1;
    const int e = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK(e == 0, "posix_spawn: %s", strerror(e));
    int status = 0;
    if (e == 0) waitpid(pid, &status, 0);
    std::string err;
    if (FILE *f = fopen(path, "r")) {
        char buf[4096];
        for (size_t r; (r = fread(buf, 1, sizeof buf, f)) > 0;) err.append(buf, r);
        fclose(f);
    }
    unlink(path);
    CHECK(err.find("cudnnBackendExecute conv fwd X") != std::string::npos,
          "no report naming cudnnBackendExecute's X on stderr:\n%s", err.c_str());
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0) || WIFSIGNALED(status),
          "the child saw no error (status %d):\n%s", status, err.c_str());
}

// ---------------------------------------------------------------------------------------------

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--oob-child") == 0) return oob_child();

    CHECK(cudnnGetVersion() >= 90000, "version %zu", cudnnGetVersion());
    cudnnHandle_t h = nullptr;
    DNN_OK(cudnnCreate(&h));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));

    const std::vector<Case> cases = read_cases(TDM_EMU_TEST_DATA "/cudnn_cases.txt");
    CHECK(cases.size() >= 15, "%zu cases in the data file", cases.size());
    for (const Case &c : cases) {
        const int before = failures;
        run_case(h, stream, c);
        if (failures != before) printf("%-32s FAILED\n", c.name.c_str());
    }
    const int before = failures;
    test_refusals(h, stream);
    printf("%-32s %s\n", "refusals", failures == before ? "ok" : "FAILED");
    test_stream_and_graph(h);
    test_out_of_bounds_reported();

    CUDA_OK(cudaStreamDestroy(stream));
    DNN_OK(cudnnDestroy(h));
    if (failures) {
        printf("test_emu_cudnn: %d failures\n", failures);
        return 1;
    }
    printf("test_emu_cudnn: all passed (%zu cases)\n", cases.size());
    return 0;
}

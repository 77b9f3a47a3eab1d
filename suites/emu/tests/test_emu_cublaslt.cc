/* test_emu_cublaslt.cc — the emulated cuBLASLt (suites/emu/cublaslt.cc) against expectations it
 * did not compute: the products of data/cublaslt_cases.txt, written by gen_cublaslt_cases.py in
 * PyTorch from the rounded inputs, and the refusals NVIDIA's documentation promises. Each case runs
 * the documented sequence (layouts, matmul descriptor, preference, cublasLtMatmulAlgoGetHeuristic,
 * cublasLtMatmul on a stream with the algorithm and its workspace) on cudaMalloc'd memory and
 * compares whole buffers back, padding included. Then:
 *   - refusals: ld < rows, shapes that do not chain, unsupported type combinations and epilogues,
 *     bad attribute sizes, a too-small or misaligned workspace, a pointer less aligned than the
 *     algorithm was chosen for, alignment preferences below the element size;
 *   - reduction schemes: a sum whose halves round differently in f16 shows the mask is obeyed;
 *   - stream order with the descriptors destroyed before the work runs, device-pointer scalars,
 *     and graph capture (the product runs at each launch, with the values of that time);
 *   - a wrong leading dimension that reaches past A's allocation is reported by the runtime's
 *     check_device_range (in a child process: the fault makes the device error sticky).
 *
 * Tolerance (tolerance() below), per element of D with magnitude scale
 * S = |alpha| sum_l |op(A)[i,l] op(B)[l,j]| + |beta C[i,j]| + |bias[i]| from the generator:
 *   (k + 4) u S        accumulation in the compute type (u = 2^-24 for f32 compute, 2^-53 for f64,
 *                      2^-11 for 16F compute, which rounds after every step): each of the k
 *                      products and sums, alpha, beta and the bias add at most u of S;
 *   + 8 u S, x 1.2     with GELU (|GELU'| <= 1.13; tanhf's own error); with DGELU the generator
 *                      gives S (|GELU'(aux)| + 1): the product's error times GELU', and GELU''s
 *                      own evaluation in f32 (a few u, relative to the product, |.| <= S);
 *   + ulp_D(|expected|) the one rounding to D's type, which may fall either side of a boundary the
 *                      float64 expectation sits near (ulp = |x| 2^-p, p = 10, 7, 23, 52; at least
 *                      the smallest subnormal).
 * f16/bf16/TF32 inputs make exact products in f32, so the bound holds for them as for f32 ones.
 * D's padding (Dtol -1) must come back bit-identical, and so must the aux matrix's (GELU_AUX
 * writes GELU's input there, held to the rule without GELU); a bias gradient uses the same rule with
 * S = sum_l |op(B)[l,j]| (or op(A)'s). TF32 cases must also differ, beyond that tolerance, from the
 * product of the unrounded inputs in at least one element (Dnot). */
#include <cublasLt.h>
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

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
            failures++;                                                   \
        }                                                                 \
    } while (0)

#define CUDA_OK(call)                                                                        \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        CHECK(e_ == cudaSuccess, "%s -> %s", #call, cudaGetErrorName(e_));                   \
    } while (0)

#define LT_IS(want, call)                                                                    \
    do {                                                                                     \
        cublasStatus_t s_ = (call);                                                          \
        CHECK(s_ == (want), "%s -> %s, want %s", #call, cublasGetStatusName(s_),             \
              cublasGetStatusName(want));                                                    \
    } while (0)
#define LT_OK(call) LT_IS(CUBLAS_STATUS_SUCCESS, call)

// ---------------------------------------------------------------------------------------------
// host-side encodings of the storage types (test's own, round to nearest even)

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

static uint16_t to_half(float f) {
    const uint32_t x = fbits(f), ax = x & 0x7fffffffu;
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    if (ax > 0x7f800000u) return sign | 0x7e00;
    if (ax >= 0x477ff000u) return sign | 0x7c00;
    if (ax < 0x38800000u) return (uint16_t)(sign | (uint16_t)nearbyintf(bitsf(ax) * 16777216.0f));
    uint32_t h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffffu) >> 13);
    const uint32_t rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
static float from_half(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) return sign ? -ldexpf((float)m, -24) : ldexpf((float)m, -24);
    if (e == 31) return bitsf(sign | 0x7f800000u | (m << 13));
    return bitsf(sign | ((e + 112) << 23) | (m << 13));
}
static uint16_t to_bf16(float f) {
    uint32_t x = fbits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
static float from_bf16(uint16_t b) { return bitsf((uint32_t)b << 16); }

static cudaDataType_t type_of(const std::string &s) {
    if (s == "16F") return CUDA_R_16F;
    if (s == "16BF") return CUDA_R_16BF;
    if (s == "64F") return CUDA_R_64F;
    return CUDA_R_32F;
}
static size_t size_of(cudaDataType_t t) {
    return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
}
static cublasComputeType_t compute_of(const std::string &s) {
    if (s == "16F") return CUBLAS_COMPUTE_16F;
    if (s == "64F") return CUBLAS_COMPUTE_64F;
    if (s == "32F_FAST_TF32") return CUBLAS_COMPUTE_32F_FAST_TF32;
    if (s == "32F_FAST_16F") return CUBLAS_COMPUTE_32F_FAST_16F;
    if (s == "32F_FAST_16BF") return CUBLAS_COMPUTE_32F_FAST_16BF;
    return CUBLAS_COMPUTE_32F;
}
static uint32_t epilogue_of(const std::string &s) {
    static const std::map<std::string, uint32_t> m = {
        {"DEFAULT", CUBLASLT_EPILOGUE_DEFAULT},     {"RELU", CUBLASLT_EPILOGUE_RELU},
        {"BIAS", CUBLASLT_EPILOGUE_BIAS},           {"RELU_BIAS", CUBLASLT_EPILOGUE_RELU_BIAS},
        {"GELU", CUBLASLT_EPILOGUE_GELU},           {"GELU_BIAS", CUBLASLT_EPILOGUE_GELU_BIAS},
        {"BGRADA", CUBLASLT_EPILOGUE_BGRADA},       {"BGRADB", CUBLASLT_EPILOGUE_BGRADB},
        {"GELU_AUX", CUBLASLT_EPILOGUE_GELU_AUX},   {"GELU_AUX_BIAS", CUBLASLT_EPILOGUE_GELU_AUX_BIAS},
        {"DGELU", CUBLASLT_EPILOGUE_DGELU}};
    auto it = m.find(s);
    return it == m.end() ? 0 : it->second;
}

// values (exact in t) to t's bytes, and back
static std::vector<unsigned char> encode(const std::vector<double> &v, cudaDataType_t t) {
    std::vector<unsigned char> out(v.size() * size_of(t));
    for (size_t i = 0; i < v.size(); i++) {
        unsigned char *p = &out[i * size_of(t)];
        if (t == CUDA_R_64F) memcpy(p, &v[i], 8);
        else if (t == CUDA_R_32F) {
            const float f = (float)v[i];
            memcpy(p, &f, 4);
        } else {
            const uint16_t h = t == CUDA_R_16F ? to_half((float)v[i]) : to_bf16((float)v[i]);
            memcpy(p, &h, 2);
        }
    }
    return out;
}
static std::vector<double> decode(const std::vector<unsigned char> &b, cudaDataType_t t) {
    std::vector<double> out(b.size() / size_of(t));
    for (size_t i = 0; i < out.size(); i++) {
        const unsigned char *p = &b[i * size_of(t)];
        if (t == CUDA_R_64F) memcpy(&out[i], p, 8);
        else if (t == CUDA_R_32F) {
            float f;
            memcpy(&f, p, 4);
            out[i] = f;
        } else {
            uint16_t h;
            memcpy(&h, p, 2);
            out[i] = t == CUDA_R_16F ? from_half(h) : from_bf16(h);
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// device buffers

struct Dev {
    void *p = nullptr;
    size_t bytes = 0;
    Dev() = default;
    explicit Dev(size_t n) : bytes(n) {
        if (n) CUDA_OK(cudaMalloc(&p, n));
    }
    Dev(const std::vector<double> &v, cudaDataType_t t) : Dev(v.size() * size_of(t)) {
        // cudaMemcpy from pageable memory may return before the bytes land (CUDA's documented
        // API synchronization behaviour, which the emulator keeps), and the tests' non-blocking
        // streams do not wait for the legacy stream: wait here.
        if (bytes) CUDA_OK(cudaMemcpy(p, encode(v, t).data(), bytes, cudaMemcpyHostToDevice));
        CUDA_OK(cudaDeviceSynchronize());
    }
    ~Dev() {
        if (p) cudaFree(p);
    }
    Dev(const Dev &) = delete;
    Dev &operator=(const Dev &) = delete;
    std::vector<double> read(cudaDataType_t t) const {
        std::vector<unsigned char> b(bytes);
        if (bytes) CUDA_OK(cudaMemcpy(b.data(), p, bytes, cudaMemcpyDeviceToHost));
        return decode(b, t);
    }
};

// ---------------------------------------------------------------------------------------------
// tolerance (the rule is in the comment at the top)

static double ulp_of(double x, cudaDataType_t t) {
    const int p = t == CUDA_R_16F ? 10 : t == CUDA_R_16BF ? 7 : t == CUDA_R_32F ? 23 : 52;
    const double tiny = t == CUDA_R_16F ? ldexp(1, -24) : t == CUDA_R_16BF ? ldexp(1, -133)
                        : t == CUDA_R_32F ? ldexp(1, -149) : ldexp(1, -1074);
    const double u = fabs(x) * ldexp(1, -p);
    return u > tiny ? u : tiny;
}

static double unit_of(cublasComputeType_t c) {
    return c == CUBLAS_COMPUTE_64F ? ldexp(1, -53) : c == CUBLAS_COMPUTE_16F ? ldexp(1, -11)
                                                                             : ldexp(1, -24);
}

static double tolerance(double expected, double scale, int64_t k, cublasComputeType_t c,
                        cudaDataType_t out, bool gelu) {
    const double u = unit_of(c);
    const double acc = gelu ? 1.2 * (double)(k + 12) * u * scale : (double)(k + 4) * u * scale;
    return acc + ulp_of(expected, out);
}

// got vs expected with per-element scales (-1: untouched, must be bit-identical); returns the
// number of mismatches, printing the first few
static int compare(const char *what, const std::string &name, const std::vector<double> &got,
                   const std::vector<double> &want, const std::vector<double> &scale, int64_t k,
                   cublasComputeType_t c, cudaDataType_t out, bool gelu) {
    int bad = 0;
    if (got.size() != want.size() || scale.size() != want.size()) {
        fprintf(stderr, "FAIL %s %s: %zu elements back, %zu expected, %zu scales\n", name.c_str(),
                what, got.size(), want.size(), scale.size());
        return 1;
    }
    for (size_t i = 0; i < want.size(); i++) {
        bool ok;
        double tol = 0;
        if (scale[i] < 0)
            ok = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i];
        else {
            tol = tolerance(want[i], scale[i], k, c, out, gelu);
            ok = fabs(got[i] - want[i]) <= tol;   // false for NaN
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "FAIL %s %s[%zu]: got %.9g, want %.9g (tol %.3g%s)\n", name.c_str(),
                    what, i, got[i], want[i], tol, scale[i] < 0 ? ", untouched" : "");
    }
    return bad;
}

// ---------------------------------------------------------------------------------------------
// the cases file

struct Case {
    std::map<std::string, std::vector<std::string>> kv;
    std::string name;
    const std::vector<std::string> &at(const std::string &key) const {
        static const std::vector<std::string> none;
        auto it = kv.find(key);
        return it == kv.end() ? none : it->second;
    }
    bool has(const std::string &key) const { return kv.count(key) != 0; }
    long long i(const std::string &key, size_t idx) const {
        return idx < at(key).size() ? atoll(at(key)[idx].c_str()) : 0;
    }
    double d(const std::string &key, size_t idx) const {
        return idx < at(key).size() ? strtod(at(key)[idx].c_str(), nullptr) : 0;
    }
    // an array line "key count v...": f32-family values read with strtof (their shortest float
    // form), f64 ones with strtod
    std::vector<double> arr(const std::string &key, cudaDataType_t t) const {
        const std::vector<std::string> &v = at(key);
        std::vector<double> out;
        const size_t n = v.empty() ? 0 : (size_t)atoll(v[0].c_str());
        for (size_t j = 1; j <= n && j < v.size(); j++)
            out.push_back(t == CUDA_R_64F ? strtod(v[j].c_str(), nullptr)
                                          : (double)strtof(v[j].c_str(), nullptr));
        if (out.size() != n) fprintf(stderr, "bad array %s in %s\n", key.c_str(), name.c_str());
        return out;
    }
};

static std::vector<Case> read_cases(const char *path) {
    std::vector<Case> cases;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "FAIL: cannot open %s\n", path);
        failures++;
        return cases;
    }
    std::string line;
    Case cur;
    bool in = false;
    for (int ch; (ch = fgetc(f)) != EOF || !line.empty();) {
        if (ch != '\n' && ch != EOF) {
            line.push_back((char)ch);
            continue;
        }
        std::vector<std::string> tok;
        for (size_t p = 0; p < line.size();) {
            while (p < line.size() && line[p] == ' ') p++;
            size_t q = p;
            while (q < line.size() && line[q] != ' ') q++;
            if (q > p) tok.push_back(line.substr(p, q - p));
            p = q;
        }
        line.clear();
        if (tok.empty() || tok[0][0] == '#') {
            if (ch == EOF) break;
            continue;
        }
        if (tok[0] == "case") {
            cur = Case();
            cur.name = tok.size() > 1 ? tok[1] : "?";
            in = true;
        } else if (tok[0] == "end") {
            if (in) cases.push_back(cur);
            in = false;
        } else if (in) {
            cur.kv[tok[0]] = std::vector<std::string>(tok.begin() + 1, tok.end());
        }
        if (ch == EOF) break;
    }
    fclose(f);
    return cases;
}

// ---------------------------------------------------------------------------------------------
// descriptors, made the documented way

struct Layouts {
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    ~Layouts() {
        for (cublasLtMatrixLayout_t l : {a, b, c, d})
            if (l) cublasLtMatrixLayoutDestroy(l);
    }
};

static cublasLtMatrixLayout_t layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld,
                                     int32_t batch = 1, int64_t stride = 0, bool row = false) {
    cublasLtMatrixLayout_t l = nullptr;
    LT_OK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
    if (row) {
        const int32_t order = CUBLASLT_ORDER_ROW;
        LT_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                               sizeof order));
    }
    if (batch != 1) {
        LT_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                               sizeof batch));
        LT_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stride, sizeof stride));
    }
    return l;
}

static cudaDataType_t scale_type_of(cublasComputeType_t c) {
    return c == CUBLAS_COMPUTE_64F ? CUDA_R_64F : c == CUBLAS_COMPUTE_16F ? CUDA_R_16F : CUDA_R_32F;
}

static cublasLtMatmulDesc_t matmul_desc(cublasComputeType_t c, cublasOperation_t ta,
                                        cublasOperation_t tb, uint32_t epilogue = 1,
                                        const void *bias = nullptr) {
    cublasLtMatmulDesc_t d = nullptr;
    LT_OK(cublasLtMatmulDescCreate(&d, c, scale_type_of(c)));
    const int32_t a = ta, b = tb;
    LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &a, sizeof a));
    LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &b, sizeof b));
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
        LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                             sizeof epilogue));
        LT_OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                             sizeof bias));
    }
    return d;
}

static cublasLtMatmulPreference_t preference(uint64_t max_ws, uint32_t mask = 7,
                                             uint32_t align = 256) {
    cublasLtMatmulPreference_t p = nullptr;
    LT_OK(cublasLtMatmulPreferenceCreate(&p));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &max_ws, sizeof max_ws));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                               &mask, sizeof mask));
    for (cublasLtMatmulPreferenceAttributes_t a :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        LT_OK(cublasLtMatmulPreferenceSetAttribute(p, a, &align, sizeof align));
    return p;
}

// alpha / beta in the scale type
struct Scalar {
    unsigned char bytes[8];
    Scalar(double v, cudaDataType_t t) {
        const std::vector<unsigned char> b = encode({v}, t);
        memcpy(bytes, b.data(), b.size());
    }
};

// ---------------------------------------------------------------------------------------------
// one case from the file

static void run_case(cublasLtHandle_t lt, cudaStream_t stream, const Case &c) {
    if (c.at("types").size() < 3 || c.at("trans").size() < 2 || c.at("order").empty() ||
        c.at("epilogue").size() < 3) {
        fprintf(stderr, "FAIL case %s: malformed\n", c.name.c_str());
        failures++;
        return;
    }
    const cudaDataType_t ab = type_of(c.at("types")[0]), cd = type_of(c.at("types")[1]);
    const cublasComputeType_t compute = compute_of(c.at("types")[2]);
    const int64_t m = c.i("dims", 0), n = c.i("dims", 1), k = c.i("dims", 2);
    const int32_t batch = (int32_t)c.i("dims", 3);
    const bool ta = c.at("trans")[0] == "T", tb = c.at("trans")[1] == "T";
    const bool row = c.at("order")[0] == "ROW";
    const int64_t lda = c.i("ld", 0), ldb = c.i("ld", 1), ldc = c.i("ld", 2), ldd = c.i("ld", 3);
    const int64_t sa = c.i("stride", 0), sb = c.i("stride", 1), sc = c.i("stride", 2),
                  sd = c.i("stride", 3);
    const double alpha = c.d("scalars", 0), beta = c.d("scalars", 1);
    const uint32_t epi = epilogue_of(c.at("epilogue")[0]);
    const cudaDataType_t bias_t = type_of(c.at("epilogue")[1]);
    const int64_t bias_stride = c.i("epilogue", 2);
    const uint32_t mask = (uint32_t)c.i("mask", 0);
    const bool alias = c.i("alias", 0) != 0;
    const bool gelu = epi == CUBLASLT_EPILOGUE_GELU || epi == CUBLASLT_EPILOGUE_GELU_BIAS ||
                      epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
                      epi == CUBLASLT_EPILOGUE_DGELU;
    const int64_t aux_ld = c.i("auxld", 0), aux_stride = c.i("auxld", 1);

    Dev A(c.arr("A", ab), ab), B(c.arr("B", ab), ab), D(c.arr("D0", cd), cd);
    Dev C(alias ? std::vector<double>() : c.arr("C", cd), cd);   // unused when C is D
    Dev bias(c.arr("bias", bias_t), bias_t);                       // none without an epilogue
    Dev aux(c.has("aux") ? c.arr("aux", cd) : std::vector<double>(), cd);   // aux epilogues

    Layouts l;
    l.a = layout(ab, ta ? k : m, ta ? m : k, lda, batch, sa, row);
    l.b = layout(ab, tb ? n : k, tb ? k : n, ldb, batch, sb, row);
    l.c = layout(cd, m, n, ldc, batch, sc, row);
    l.d = layout(cd, m, n, ldd, batch, sd, row);
    cublasLtMatmulDesc_t op = matmul_desc(compute, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          tb ? CUBLAS_OP_T : CUBLAS_OP_N, epi, bias.p);
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
        const int32_t bt = bias_t;
        LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                             sizeof bt));
        if (bias_stride)
            LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                                                 &bias_stride, sizeof bias_stride));
    }
    if (c.has("aux")) {
        LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux.p,
                                             sizeof aux.p));
        LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                             sizeof aux_ld));
        if (aux_stride)
            LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
                                                 &aux_stride, sizeof aux_stride));
    }
    const uint64_t max_ws = 1 << 20;
    cublasLtMatmulPreference_t pref = preference(max_ws, mask);
    cublasLtMatmulHeuristicResult_t res[3];
    int found = 0;
    LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.c, l.d, pref, 3, res, &found));
    CHECK(found >= 1 && res[0].state == CUBLAS_STATUS_SUCCESS &&
              res[0].workspaceSize <= max_ws,
          "%s: %d algorithms, state %d, workspace %zu", c.name.c_str(), found,
          found ? (int)res[0].state : -1, found ? res[0].workspaceSize : 0);
    if (found >= 1) {
        Dev ws(res[0].workspaceSize);
        const Scalar al(alpha, scale_type_of(compute)), be(beta, scale_type_of(compute));
        LT_OK(cublasLtMatmul(lt, op, al.bytes, A.p, l.a, B.p, l.b, be.bytes,
                             alias ? D.p : C.p, l.c, D.p, l.d, &res[0].algo, ws.p, ws.bytes,
                             stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        const std::vector<double> got = D.read(cd);
        int bad = compare("D", c.name, got, c.arr("D", cd), c.arr("Dtol", CUDA_R_64F), k, compute,
                          cd, gelu);
        if (c.has("Dnot")) {   // must be the TF32 product, not the f32 one
            const std::vector<double> plain = c.arr("Dnot", cd), tol = c.arr("Dtol", CUDA_R_64F);
            bool differs = false;
            for (size_t i = 0; i < plain.size() && i < got.size(); i++)
                if (tol[i] >= 0 &&
                    fabs(got[i] - plain[i]) > tolerance(plain[i], tol[i], k, compute, cd, gelu))
                    differs = true;
            CHECK(differs, "%s: the result is the unrounded inputs' product", c.name.c_str());
        }
        if (c.has("biasx"))
            bad += compare("bias gradient", c.name, bias.read(bias_t), c.arr("biasx", bias_t),
                           c.arr("biastol", CUDA_R_64F), k, compute, bias_t, false);
        if (c.has("auxx"))   // GELU's input as written (a read-only aux must come back unchanged)
            bad += compare("aux", c.name, aux.read(cd), c.arr("auxx", cd),
                           c.arr("auxtol", CUDA_R_64F), k, compute, cd, false);
        else if (c.has("aux"))
            bad += compare("aux (read only)", c.name, aux.read(cd), c.arr("aux", cd),
                           std::vector<double>(c.arr("aux", cd).size(), -1.0), k, compute, cd,
                           false);
        if (bad) {
            fprintf(stderr, "FAIL case %s: %d elements wrong\n", c.name.c_str(), bad);
            failures++;
        }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(op);
}

// ---------------------------------------------------------------------------------------------
// refusals the documentation promises

static void test_refusals(cublasLtHandle_t lt, cudaStream_t stream) {
    const int64_t m = 4, n = 3, k = 5;
    Dev A(std::vector<double>(m * k, 1.0), CUDA_R_32F),
        B(std::vector<double>(k * n, 1.0), CUDA_R_32F),
        D(std::vector<double>(m * n, 0.0), CUDA_R_32F);
    const float one = 1, zero = 0;
    cublasLtMatmulDesc_t op = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N);
    cublasLtMatmulPreference_t pref = preference(1 << 20);
    cublasLtMatmulHeuristicResult_t res[2];
    int found = -1;

    {   // ld < rows: refused by the heuristic and by the product
        Layouts l;
        l.a = layout(CUDA_R_32F, m, k, m - 1);
        l.b = layout(CUDA_R_32F, k, n, k);
        l.d = layout(CUDA_R_32F, m, n, m);
        LT_IS(CUBLAS_STATUS_INVALID_VALUE,
              cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.d, l.d, pref, 1, res, &found));
        CHECK(found == 0, "found %d", found);
        LT_IS(CUBLAS_STATUS_INVALID_VALUE, cublasLtMatmul(lt, op, &one, A.p, l.a, B.p, l.b, &zero,
                                                          D.p, l.d, D.p, l.d, nullptr, nullptr,
                                                          0, stream));
    }
    {   // shapes that do not chain (op(A) is 4 x 5, B 4 x 3)
        Layouts l;
        l.a = layout(CUDA_R_32F, m, k, m);
        l.b = layout(CUDA_R_32F, k - 1, n, k);
        l.d = layout(CUDA_R_32F, m, n, m);
        LT_IS(CUBLAS_STATUS_INVALID_VALUE,
              cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.d, l.d, pref, 1, res, &found));
    }
    {   // type combinations outside the table: no algorithm, no result
        struct {
            cudaDataType_t a, b, d;
            cublasComputeType_t c;
            cudaDataType_t scale;
        } bad[] = {{CUDA_R_32F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
                   {CUDA_R_16F, CUDA_R_16F, CUDA_R_64F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
                   {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_64F, CUDA_R_64F},
                   {CUDA_R_32F, CUDA_R_32F, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
                   {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F_FAST_TF32,
                    CUDA_R_32F},
                   {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_64F}};
        for (const auto &t : bad) {
            Layouts l;
            l.a = layout(t.a, m, k, m);
            l.b = layout(t.b, k, n, k);
            l.d = layout(t.d, m, n, m);
            cublasLtMatmulDesc_t o = nullptr;
            LT_OK(cublasLtMatmulDescCreate(&o, t.c, t.scale));
            found = -1;
            LT_IS(CUBLAS_STATUS_NOT_SUPPORTED,
                  cublasLtMatmulAlgoGetHeuristic(lt, o, l.a, l.b, l.d, l.d, pref, 2, res, &found));
            CHECK(found == 0, "types %d %d %d compute %d: %d results", t.a, t.b, t.d, t.c, found);
            cublasLtMatmulDescDestroy(o);
        }
    }
    {   // aux epilogues: DGELU_BGRAD and the ReLU bit-mask ones are not emulated
        // (NOT_SUPPORTED); the aux leading dimension must be a multiple of 8 and at least m, the
        // aux batch stride a multiple of 8 (INVALID_VALUE); the aux pointer must be set
        Layouts l;
        l.a = layout(CUDA_R_32F, m, k, m);
        l.b = layout(CUDA_R_32F, k, n, k);
        l.d = layout(CUDA_R_32F, m, n, m);
        Dev X(std::vector<double>(8 * n, 0.0), CUDA_R_32F);
        for (uint32_t e : {(uint32_t)CUBLASLT_EPILOGUE_DGELU_BGRAD,
                           (uint32_t)CUBLASLT_EPILOGUE_RELU_AUX,
                           (uint32_t)CUBLASLT_EPILOGUE_DRELU}) {
            cublasLtMatmulDesc_t o = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N, e,
                                                 D.p);
            LT_IS(CUBLAS_STATUS_NOT_SUPPORTED,
                  cublasLtMatmulAlgoGetHeuristic(lt, o, l.a, l.b, l.d, l.d, pref, 1, res, &found));
            cublasLtMatmulDescDestroy(o);
        }
        struct {
            int64_t ld;
            int32_t aux_type;
            bool set_ptr;
            cublasStatus_t heuristic, matmul;
        } aux_cases[] = {
            {4, -1, true, CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_INVALID_VALUE},   // ld % 8
            {0, -1, true, CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_INVALID_VALUE},   // unset
            {8, CUDA_R_16F, true, CUBLAS_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_NOT_SUPPORTED},
            {8, -1, false, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_INVALID_VALUE},   // no pointer
            {8, -1, true, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS},
        };
        for (const auto &ac : aux_cases) {
            cublasLtMatmulDesc_t o = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N,
                                                 CUBLASLT_EPILOGUE_GELU_AUX, D.p);
            LT_OK(cublasLtMatmulDescSetAttribute(o, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ac.ld,
                                                 sizeof ac.ld));
            LT_OK(cublasLtMatmulDescSetAttribute(o, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                                 &ac.aux_type, sizeof ac.aux_type));
            if (ac.set_ptr)
                LT_OK(cublasLtMatmulDescSetAttribute(o, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                     &X.p, sizeof X.p));
            found = -1;
            LT_IS(ac.heuristic,
                  cublasLtMatmulAlgoGetHeuristic(lt, o, l.a, l.b, l.d, l.d, pref, 1, res, &found));
            LT_IS(ac.matmul, cublasLtMatmul(lt, o, &one, A.p, l.a, B.p, l.b, &zero, D.p, l.d, D.p,
                                            l.d, nullptr, nullptr, 0, stream));
            cublasLtMatmulDescDestroy(o);
        }
        CUDA_OK(cudaStreamSynchronize(stream));
        {   // the one that ran wrote GELU's input (A B = 5 everywhere) at ld 8, and GELU(5) to D
            const std::vector<double> x = X.read(CUDA_R_32F), d = D.read(CUDA_R_32F);
            CHECK(x[0] == 5.0 && x[m - 1] == 5.0 && x[m] == 0.0 && x[8] == 5.0,
                  "aux at ld 8: %g %g %g %g", x[0], x[m - 1], x[m], x[8]);
            CHECK(fabs(d[0] - 5.0) < 1e-5, "D = GELU(5): %.9g", d[0]);
        }
        // requestedAlgoCount <= 0
        LT_IS(CUBLAS_STATUS_INVALID_VALUE,
              cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.d, l.d, pref, 0, res, &found));
        // alignment preferences below the element size leave no algorithm
        cublasLtMatmulPreference_t p2 = preference(1 << 20, 7, 2);
        LT_IS(CUBLAS_STATUS_NOT_SUPPORTED,
              cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.d, l.d, p2, 1, res, &found));
        cublasLtMatmulPreferenceDestroy(p2);
    }
    {   // attribute sizes are checked; GetAttribute with size 0 tells the size
        cublasLtMatrixLayout_t l = layout(CUDA_R_32F, m, k, m);
        const int64_t batch64 = 2;
        LT_IS(CUBLAS_STATUS_INVALID_VALUE,
              cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch64,
                                               sizeof batch64));
        LT_IS(CUBLAS_STATUS_INVALID_VALUE,
              cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, nullptr, 8));
        size_t written = 0;
        LT_OK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, nullptr, 0,
                                               &written));
        CHECK(written == 8, "ROWS is %zu bytes", written);
        uint64_t rows64 = 0;
        int32_t order = -1;
        LT_OK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                               sizeof order, &written));
        CHECK(order == CUBLASLT_ORDER_COL, "default order %d", order);
        LT_OK(cublasLtMatrixLayoutDestroy(l));
        LT_IS(CUBLAS_STATUS_INVALID_VALUE, cublasLtMatrixLayoutDestroy(l));   // not a double free
        cublasLtMatrixLayoutOpaque_t placed;   // *Init: the caller's memory, never destroyed
        LT_OK(cublasLtMatrixLayoutInit(&placed, CUDA_R_32F, m, k, m));
        LT_OK(cublasLtMatrixLayoutGetAttribute(&placed, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows64,
                                               sizeof rows64, &written));
        CHECK(rows64 == (uint64_t)m, "rows %llu", (unsigned long long)rows64);
        LT_IS(CUBLAS_STATUS_INVALID_VALUE, cublasLtMatrixLayoutDestroy(&placed));
        const uint8_t epi8 = 4;
        LT_IS(CUBLAS_STATUS_INVALID_VALUE,
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi8, 1));
        uint32_t mask = 0;
        LT_OK(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                   &mask, sizeof mask, &written));
        CHECK(mask == 7, "mask %u", mask);
        LT_IS(CUBLAS_STATUS_NOT_INITIALIZED,
              cublasLtMatmulAlgoGetHeuristic(nullptr, op, nullptr, nullptr, nullptr, nullptr, pref,
                                             1, res, &found));
    }
    {   // workspace: less than the algorithm needs, or misaligned; pointers less aligned than
        // the algorithm was chosen for
        const int64_t kk = 32;
        Dev A2(std::vector<double>(m * kk + 8, 1.0), CUDA_R_32F),
            B2(std::vector<double>(kk * n, 1.0), CUDA_R_32F);
        Layouts l;
        l.a = layout(CUDA_R_32F, m, kk, m);
        l.b = layout(CUDA_R_32F, kk, n, kk);
        l.d = layout(CUDA_R_32F, m, n, m);
        const uint32_t compute_type_only = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
        cublasLtMatmulPreference_t p2 = preference(1 << 20, compute_type_only);
        LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.d, l.d, p2, 2, res, &found));
        CHECK(found >= 1 && res[0].workspaceSize > 0, "split-K for k=32: %d, %zu bytes", found,
              found ? res[0].workspaceSize : 0);
        if (found >= 1 && res[0].workspaceSize > 0) {
            Dev ws(res[0].workspaceSize + 512);
            LT_IS(CUBLAS_STATUS_INVALID_VALUE,
                  cublasLtMatmul(lt, op, &one, A2.p, l.a, B2.p, l.b, &zero, D.p, l.d, D.p, l.d,
                                 &res[0].algo, ws.p, res[0].workspaceSize - 1, stream));
            LT_IS(CUBLAS_STATUS_INVALID_VALUE,
                  cublasLtMatmul(lt, op, &one, A2.p, l.a, B2.p, l.b, &zero, D.p, l.d, D.p, l.d,
                                 &res[0].algo, (char *)ws.p + 128, res[0].workspaceSize,
                                 stream));
            // A 4 bytes past a 256-byte boundary: the algorithm was chosen for 16
            LT_IS(CUBLAS_STATUS_INVALID_VALUE,
                  cublasLtMatmul(lt, op, &one, (float *)A2.p + 1, l.a, B2.p, l.b, &zero, D.p, l.d,
                                 D.p, l.d, &res[0].algo, ws.p, res[0].workspaceSize, stream));
            LT_OK(cublasLtMatmul(lt, op, &one, A2.p, l.a, B2.p, l.b, &zero, D.p, l.d, D.p, l.d,
                                 &res[0].algo, ws.p, res[0].workspaceSize, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            const std::vector<double> d = D.read(CUDA_R_32F);
            CHECK(d[0] == 32 && d[m * n - 1] == 32, "split-K sum of 32 ones: %g, %g", d[0],
                  d[m * n - 1]);
        }
        cublasLtMatmulPreferenceDestroy(p2);
        // chosen with 4-byte alignment, the offset A is fine (no workspace: the NONE scheme)
        cublasLtMatmulPreference_t p4 = preference(0, 7, 4);
        LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.d, l.d, p4, 1, res, &found));
        if (found >= 1) {
            CHECK(res[0].workspaceSize == 0, "%zu bytes of workspace past the limit 0",
                  res[0].workspaceSize);
            LT_OK(cublasLtMatmul(lt, op, &one, (float *)A2.p + 1, l.a, B2.p, l.b, &zero, D.p, l.d,
                                 D.p, l.d, &res[0].algo, nullptr, 0, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
        }
        cublasLtMatmulPreferenceDestroy(p4);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(op);
}

// ---------------------------------------------------------------------------------------------
// the reduction scheme mask: 31 x 64 + 65 = 2049 in the first half of k, -2048 in the second.
// Exact: 1. With each half rounded to f16 first (OUTPUT_TYPE / INPLACE): 2048 - 2048 = 0.

static void test_reduction_schemes(cublasLtHandle_t lt, cudaStream_t stream) {
    const int64_t k = 64;
    std::vector<double> a(k, 1.0), b(k);
    for (int64_t l = 0; l < k; l++) b[l] = l < 31 ? 64.0 : l == 31 ? 65.0 : -64.0;
    Dev A(a, CUDA_R_16F), B(b, CUDA_R_16F), D(std::vector<double>(1, 7.0), CUDA_R_16F);
    Layouts l;
    l.a = layout(CUDA_R_16F, 1, k, 1);
    l.b = layout(CUDA_R_16F, k, 1, k);
    l.d = layout(CUDA_R_16F, 1, 1, 1);
    cublasLtMatmulDesc_t op = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N);
    const float one = 1, zero = 0;
    struct {
        uint64_t max_ws;
        uint32_t mask;
        double want;
    } runs[] = {{1 << 20, 7, 0.0},   // every scheme allowed: output-type partial sums
                {0, 7, 0.0},         // no workspace: INPLACE, still in f16
                {1 << 20, CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                 1.0},               // what an f16 caller should ask for
                {1 << 20, 0, 1.0}};  // no split-K at all
    for (const auto &r : runs) {
        cublasLtMatmulPreference_t pref = preference(r.max_ws, r.mask);
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.d, l.d, pref, 1, &res, &found));
        if (found == 1) {
            Dev ws(res.workspaceSize);
            LT_OK(cublasLtMatmul(lt, op, &one, A.p, l.a, B.p, l.b, &zero, D.p, l.d, D.p, l.d,
                                 &res.algo, ws.p, ws.bytes, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            const double got = D.read(CUDA_R_16F)[0];
            CHECK(got == r.want, "mask %u, workspace %llu: %g, want %g", r.mask,
                  (unsigned long long)r.max_ws, got, r.want);
        }
        CHECK(found == 1, "mask %u: %d results", r.mask, found);
        cublasLtMatmulPreferenceDestroy(pref);
    }
    cublasLtMatmulDescDestroy(op);
}

// ---------------------------------------------------------------------------------------------
// stream order, snapshot descriptors, device scalars, graph capture

static void test_stream_and_graph(cublasLtHandle_t lt) {
    const int64_t m = 3, n = 2, k = 4;
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::vector<double> a(m * k), b(k * n);
    for (int64_t i = 0; i < m * k; i++) a[i] = (double)(i % 5) - 2;
    for (int64_t i = 0; i < k * n; i++) b[i] = (double)(i % 3) + 0.5;
    auto product = [&](const std::vector<double> &x, double alpha) {   // column-major A B
        std::vector<double> d(m * n, 0.0);
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t l = 0; l < k; l++) d[i + j * m] += alpha * x[i + l * m] * b[l + j * k];
        return d;
    };
    Dev A(m * k * 4), B(b, CUDA_R_32F), D(m * n * 4);
    const std::vector<unsigned char> ha = encode(a, CUDA_R_32F);
    std::vector<unsigned char> hd(m * n * 4);

    {   // async copies and the product in one stream; descriptors gone before it runs
        Layouts l;
        l.a = layout(CUDA_R_32F, m, k, m);
        l.b = layout(CUDA_R_32F, k, n, k);
        l.d = layout(CUDA_R_32F, m, n, m);
        cublasLtMatmulDesc_t op = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N);
        const float alpha = 2, beta = 0;
        CUDA_OK(cudaMemcpyAsync(A.p, ha.data(), ha.size(), cudaMemcpyHostToDevice, s));
        LT_OK(cublasLtMatmul(lt, op, &alpha, A.p, l.a, B.p, l.b, &beta, D.p, l.d, D.p, l.d,
                             nullptr, nullptr, 0, s));
        cublasLtMatmulDescDestroy(op);
        for (cublasLtMatrixLayout_t *x : {&l.a, &l.b, &l.d}) {
            cublasLtMatrixLayoutDestroy(*x);
            *x = nullptr;
        }
        CUDA_OK(cudaMemcpyAsync(hd.data(), D.p, hd.size(), cudaMemcpyDeviceToHost, s));
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(decode(hd, CUDA_R_32F) == product(a, 2), "stream-ordered product%s", "");
    }
    {   // alpha and beta in device memory (CUBLASLT_POINTER_MODE_DEVICE)
        Layouts l;
        l.a = layout(CUDA_R_32F, m, k, m);
        l.b = layout(CUDA_R_32F, k, n, k);
        l.d = layout(CUDA_R_32F, m, n, m);
        cublasLtMatmulDesc_t op = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N);
        const int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
        LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode,
                                             sizeof mode));
        Dev scal(std::vector<double>{-1.0, 0.0}, CUDA_R_32F);
        LT_OK(cublasLtMatmul(lt, op, scal.p, A.p, l.a, B.p, l.b, (float *)scal.p + 1, D.p, l.d,
                             D.p, l.d, nullptr, nullptr, 0, s));
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(D.read(CUDA_R_32F) == product(a, -1), "device-pointer alpha%s", "");
        cublasLtMatmulDescDestroy(op);
    }
    {   // captured into a graph: runs at each launch, on the data of that time, with the host
        // alpha of the capture
        Layouts l;
        l.a = layout(CUDA_R_32F, m, k, m);
        l.b = layout(CUDA_R_32F, k, n, k);
        l.d = layout(CUDA_R_32F, m, n, m);
        cublasLtMatmulDesc_t op = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N);
        float alpha = 3;
        const float beta = 0;
        cudaGraph_t g = nullptr;
        cudaGraphExec_t ge = nullptr;
        CUDA_OK(cudaMemset(D.p, 0, D.bytes));
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        LT_OK(cublasLtMatmul(lt, op, &alpha, A.p, l.a, B.p, l.b, &beta, D.p, l.d, D.p, l.d,
                             nullptr, nullptr, 0, s));
        CUDA_OK(cudaStreamEndCapture(s, &g));
        alpha = 100;   // too late: the capture holds 3
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(D.read(CUDA_R_32F) == std::vector<double>(m * n, 0.0), "capture ran the product%s",
              "");
        std::vector<double> a2(a);
        for (double &x : a2) x = -x + 1;
        const std::vector<unsigned char> ha2 = encode(a2, CUDA_R_32F);
        CUDA_OK(cudaMemcpy(A.p, ha2.data(), ha2.size(), cudaMemcpyHostToDevice));
        CUDA_OK(cudaDeviceSynchronize());   // pageable: may not have landed (see Dev)
        if (g) CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
        if (ge) CUDA_OK(cudaGraphLaunch(ge, s));
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(D.read(CUDA_R_32F) == product(a2, 3), "graph launch: the product of that time%s",
              "");
        if (ge) cudaGraphExecDestroy(ge);
        if (g) cudaGraphDestroy(g);
        cublasLtMatmulDescDestroy(op);
    }
    CUDA_OK(cudaStreamDestroy(s));
}

// ---------------------------------------------------------------------------------------------
// a leading dimension that is valid (>= rows) but reaches past A's allocation: reported by the
// runtime's check_device_range. Run in a child process (the fault makes the device error sticky,
// or aborts under TANDEM_EMU_ABORT=1); the parent reads the child's stderr.

static int oob_child(void) {
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 2;
    const int64_t m = 4, n = 2, k = 3;
    Dev A(std::vector<double>(m * k, 1.0), CUDA_R_32F),
        B(std::vector<double>(k * n, 1.0), CUDA_R_32F),
        D(m * n * 4);
    Layouts l;
    l.a = layout(CUDA_R_32F, m, k, m + 3);   // needs (k-1)(m+3)+m = 18 floats; 12 allocated
    l.b = layout(CUDA_R_32F, k, n, k);
    l.d = layout(CUDA_R_32F, m, n, m);
    cublasLtMatmulDesc_t op = matmul_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_N);
    const float one = 1, zero = 0;
    const cublasStatus_t st = cublasLtMatmul(lt, op, &one, A.p, l.a, B.p, l.b, &zero, D.p, l.d,
                                             D.p, l.d, nullptr, nullptr, 0, 0);
    const cudaError_t sync = cudaDeviceSynchronize();
    fprintf(stderr, "oob child: cublasLtMatmul -> %s, then cudaDeviceSynchronize -> %s\n",
            cublasGetStatusName(st), cudaGetErrorName(sync));
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    return st != CUBLAS_STATUS_SUCCESS || sync != cudaSuccess ? 0 : 1;
}

static void test_out_of_bounds_reported(void) {
    char path[] = "/tmp/test_emu_cublaslt_XXXXXX";
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
    // the report names the call and the operand (check_device_range's `what`)
    CHECK(err.find("cublasLtMatmul A") != std::string::npos,
          "no report naming cublasLtMatmul's A on stderr:\n%s", err.c_str());
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0) || WIFSIGNALED(status),
          "the child saw no error (status %d):\n%s", status, err.c_str());
}

// ---------------------------------------------------------------------------------------------

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--oob-child") == 0) return oob_child();

    cublasLtHandle_t lt = nullptr;
    LT_OK(cublasLtCreate(&lt));
    CHECK(cublasLtGetVersion() >= 120000, "version %zu", cublasLtGetVersion());
    CHECK(strcmp(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
                 "CUBLAS_STATUS_NOT_SUPPORTED") == 0, "status name%s", "");
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));

    const std::vector<Case> cases = read_cases(TDM_EMU_TEST_DATA "/cublaslt_cases.txt");
    CHECK(cases.size() >= 25, "%zu cases in the data file", cases.size());
    for (const Case &c : cases) {
        const int before = failures;
        run_case(lt, stream, c);
        printf("%-28s %s\n", c.name.c_str(), failures == before ? "ok" : "FAILED");
    }
    test_refusals(lt, stream);
    printf("%-28s %s\n", "refusals", failures ? "(see above)" : "ok");
    test_reduction_schemes(lt, stream);
    test_stream_and_graph(lt);
    test_out_of_bounds_reported();

    CUDA_OK(cudaStreamDestroy(stream));
    LT_OK(cublasLtDestroy(lt));
    LT_IS(CUBLAS_STATUS_NOT_INITIALIZED, cublasLtDestroy(nullptr));
    if (failures) {
        printf("test_emu_cublaslt: %d failures\n", failures);
        return 1;
    }
    printf("test_emu_cublaslt: all passed (%zu cases)\n", cases.size());
    return 0;
}

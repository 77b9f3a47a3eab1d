/* blas.cu — the CUDA backend's matrix products through cuBLASLt: linear and matmul, forward and
 * backward (the semantics of ref/ref_linalg.c), in f32 (TF32 tensor cores when
 * tdm_tf32_allowed(TDM_TF32_MATMUL)), f16 and bf16 with f32 accumulation, and f64; plus the small
 * kernels that matrix products and convolutions share (bias fill, sums over outer/inner dims).
 *
 * Row-major data meets column-major cuBLAS through the transpose trick: a row-major (r,c) matrix
 * is a column-major (c,r) one, so row-major Y = A B is column-major Y^T = B^T A^T, computed with
 * the operands swapped and no data moved. Each op below writes its product in those terms.
 *
 * Every result is rounded once: a bias is added inside the product (cuBLASLt's BIAS epilogue, or
 * else y pre-filled with the bias and beta = 1, which cuBLASLt blends in f32 before rounding); a
 * broadcast operand's gradient summed over the batch goes through an f32 buffer (f16/bf16) before
 * its one rounding. f16/bf16 products ask cuBLASLt for reduction schemes that keep partial sums in
 * f32 (split-K in the output type would round each partial sum).
 *
 * Per device: one cuBLASLt handle, and a cache of (descriptors, heuristic algorithm, workspace
 * size) keyed by everything cublasLtMatmulAlgoGetHeuristic depends on (kernels/plan_cache.h); a
 * key with no algorithm is cached as such. Workspace comes from the caching allocator. Work runs
 * on the calling thread's current stream (kernels/cuda_stream.h), like the rest of the backend. */
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda_check.h"
#include "kernels/cuda_kernels.h"
#include "kernels/cuda_libs.h"
#include "kernels/cuda_stream.h"
#include "kernels/plan_cache.h"

static tdm_status cublas_check(cublasStatus_t st, const char *call, const char *file, int line) {
    if (st == CUBLAS_STATUS_SUCCESS) return TDM_OK;
    return tdm_error_set(st == CUBLAS_STATUS_ALLOC_FAILED ? TDM_ERR_OOM : TDM_ERR_BACKEND,
                         "cuBLAS error %s (%s) in %s at %s:%d", cublasGetStatusName(st),
                         cublasGetStatusString(st), call, file, line);
}
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)

void tdm_cuda_cublas_version(char *buf, size_t n) {
    size_t v = cublasLtGetVersion();   // major*10000 + minor*100 + patch
    snprintf(buf, n, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
}

// ----------------------------------------------------------------------------
// small kernels shared with conv_cudnn.cu

// y viewed as (outer, C, inner): y[o,c,i] = b[c]. Grid-stride over y's n elements.
template <typename T>
__global__ void bias_fill_kernel(T *y, const T *b, int64_t n, int64_t c, int64_t inner) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = b[(i / inner) % c];
}

static unsigned grid_for(int64_t n, int threads) {
    int64_t blocks = (n + threads - 1) / threads;
    return (unsigned)(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

tdm_status tdm_cuda_bias_fill(void *y, const void *b, tdm_dtype dt, int64_t outer, int64_t c,
                              int64_t inner) {
    const int64_t n = outer * c * inner;
    if (n == 0) return TDM_OK;
    const unsigned grid = grid_for(n, 256);
    switch (dt) {
    case TDM_DTYPE_F32:
        TDM_LAUNCH(grid, 256, 0, tdm_cuda_stream_here(), bias_fill_kernel)
        ((float *)y, (const float *)b, n, c, inner);
        break;
    case TDM_DTYPE_F64:
        TDM_LAUNCH(grid, 256, 0, tdm_cuda_stream_here(), bias_fill_kernel)
        ((double *)y, (const double *)b, n, c, inner);
        break;
    case TDM_DTYPE_F16:
        TDM_LAUNCH(grid, 256, 0, tdm_cuda_stream_here(), bias_fill_kernel)
        ((__half *)y, (const __half *)b, n, c, inner);
        break;
    case TDM_DTYPE_BF16:
        TDM_LAUNCH(grid, 256, 0, tdm_cuda_stream_here(), bias_fill_kernel)
        ((__nv_bfloat16 *)y, (const __nv_bfloat16 *)b, n, c, inner);
        break;
    default: return tdm_error_set(TDM_ERR_DTYPE, "bias fill: dtype %s", tdm_dtype_name(dt));
    }
    return CUDA_CHECK(cudaGetLastError());
}

// x_dt is dt, or f32 beside an f16/bf16 dt (a product kept in f32 before its one rounding):
// k_reduce.cu's split-and-finish reduction (kernels/reduce_plan.h), which fills the device
// however few the channels.
static tdm_status sum_outer_inner(const void *x, tdm_dtype x_dt, void *out, tdm_dtype dt,
                                  int64_t outer, int64_t c, int64_t inner) {
    return cuda_sum_outer_inner(x, x_dt, out, dt, outer, c, inner);
}

tdm_status tdm_cuda_sum_outer_inner(const void *x, void *out, tdm_dtype dt, int64_t outer,
                                    int64_t c, int64_t inner) {
    return sum_outer_inner(x, dt, out, dt, outer, c, inner);
}

// ----------------------------------------------------------------------------
// per device: the cuBLASLt handle, the plan cache, the workspace limit

#define BLAS_MAX_DEVICES 64

typedef struct {
    bool ready;
    pthread_mutex_t lock;   // the handle and the cached descriptors (bias pointer set per call)
    cublasLtHandle_t lt;
    tdm_plan_cache *plans;
    uint64_t max_workspace;
} blas_device;

static blas_device blas_devices[BLAS_MAX_DEVICES];
static pthread_mutex_t blas_init_lock = PTHREAD_MUTEX_INITIALIZER;

// One cached heuristic answer: the descriptors it was asked with and the algorithm, or none.
typedef struct {
    bool found;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
} blas_plan;

static void blas_plan_destroy(void *v) {
    blas_plan *p = (blas_plan *)v;
    if (!p) return;
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->ld) cublasLtMatrixLayoutDestroy(p->ld);
    free(p);
}

// The device's state, created on first use (device already current). NULL + error on failure.
static blas_device *blas_device_get(int dev) {
    if (dev < 0 || dev >= BLAS_MAX_DEVICES) {
        tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: cuBLASLt state is kept for cuda:0..%d only", dev,
                      BLAS_MAX_DEVICES - 1);
        return NULL;
    }
    blas_device *d = &blas_devices[dev];
    pthread_mutex_lock(&blas_init_lock);
    if (!d->ready) {
        int major = 0;
        tdm_status s = CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                                         dev));
        if (s == TDM_OK) s = CUBLAS_CHECK(cublasLtCreate(&d->lt));
        if (s == TDM_OK && !(d->plans = tdm_plan_cache_new(blas_plan_destroy))) {
            s = tdm_last_status();
            cublasLtDestroy(d->lt);
        }
        if (s == TDM_OK) {
            pthread_mutex_init(&d->lock, NULL);
            // cuBLAS's advice: 32 MiB of workspace on Hopper, 4 MiB before
            d->max_workspace = major >= 9 ? 32u << 20 : 4u << 20;
            d->ready = true;
        }
    }
    pthread_mutex_unlock(&blas_init_lock);
    return d->ready ? d : NULL;
}

// ----------------------------------------------------------------------------
// one column-major product: D (m,n) = op(A) (m,k) op(B) (k,n) [+ beta D], batched by strides

typedef struct {
    cublasOperation_t ta, tb;
    int64_t m, n, k;
    const void *a;            // stored (m,k) when ta == N, else (k,m); leading dim lda
    int64_t lda, stride_a;    // stride_*: elements between batch entries (0: shared)
    const void *b;            // stored (k,n) when tb == N, else (n,k)
    int64_t ldb, stride_b;
    void *d;
    int64_t ldd, stride_d;
    int64_t batch;
    tdm_dtype dt;             // A and B
    tdm_dtype d_dt;           // D: dt, or f32 beside f16/bf16
    bool accumulate;          // beta = 1 (D holds what to add: a pre-filled bias)
    bool no_tf32;             // f32 in f32 whatever tdm_tf32_allowed says (tdm_cuda_gemm_rm)
    cublasLtEpilogue_t epilogue;   // DEFAULT, BIAS (bias (m) added), BGRADB (bias (n) written),
                                   // GELU_AUX(_BIAS) (aux written), DGELU (aux read)
    void *bias;
    void *aux;                // GELU's input (m,n), column-major at aux_ld (a multiple of 8)
    int64_t aux_ld;
} lt_gemm;

// Everything the heuristic's answer depends on (zeroed whole: padding compares equal).
typedef struct {
    int32_t dt, d_dt, compute, ta, tb, epilogue, accumulate;
    int32_t align[5];   // of A, B, D, bias, aux (<= 256)
    int64_t m, n, k, lda, ldb, ldd, stride_a, stride_b, stride_d, batch, aux_ld;
} blas_key;

static cudaDataType_t cuda_type(tdm_dtype dt) {
    switch (dt) {
    case TDM_DTYPE_F64: return CUDA_R_64F;
    case TDM_DTYPE_F16: return CUDA_R_16F;
    case TDM_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

static uint32_t align256(const void *p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a) a /= 2;
    return a;
}

static tdm_status layout_new(cublasLtMatrixLayout_t *l, tdm_dtype dt, int64_t rows, int64_t cols,
                             int64_t ld, int64_t batch, int64_t stride) {
    TDM_TRY(CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, cuda_type(dt), (uint64_t)rows,
                                                    (uint64_t)cols, ld)));
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        TDM_TRY(CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count)));
        TDM_TRY(CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride)));
    }
    return TDM_OK;
}

// Builds the descriptors for g and asks the heuristic for its best algorithm (plan->found false
// when there is none). The bias pointer's alignment is in the key; its value is set per call.
static tdm_status blas_plan_make(blas_device *d, const lt_gemm *g, cublasComputeType_t compute,
                                 const blas_key *key, blas_plan *p) {
    const cudaDataType_t scale = g->dt == TDM_DTYPE_F64 ? CUDA_R_64F : CUDA_R_32F;
    TDM_TRY(CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, compute, scale)));
    int32_t ta = g->ta, tb = g->tb;
    uint32_t epi = g->epilogue;
    TDM_TRY(CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                        sizeof ta)));
    TDM_TRY(CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                        sizeof tb)));
    if (g->epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
        TDM_TRY(CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                            &epi, sizeof epi)));
        TDM_TRY(CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias)));
    }
    if (g->aux) {   // its alignment is in the key; its value is set per call
        TDM_TRY(CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof g->aux)));
        TDM_TRY(CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &g->aux_ld, sizeof g->aux_ld)));
    }
    const bool an = g->ta == CUBLAS_OP_N, bn = g->tb == CUBLAS_OP_N;
    TDM_TRY(layout_new(&p->la, g->dt, an ? g->m : g->k, an ? g->k : g->m, g->lda, g->batch,
                       g->stride_a));
    TDM_TRY(layout_new(&p->lb, g->dt, bn ? g->k : g->n, bn ? g->n : g->k, g->ldb, g->batch,
                       g->stride_b));
    TDM_TRY(layout_new(&p->ld, g->d_dt, g->m, g->n, g->ldd, g->batch, g->stride_d));

    cublasLtMatmulPreference_t pref;
    TDM_TRY(CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref)));
    uint32_t al[4] = {(uint32_t)key->align[0], (uint32_t)key->align[1], (uint32_t)key->align[2],
                      (uint32_t)key->align[2]};
    // f16/bf16: split-K partial sums in f32 (the compute type), never in the output type
    uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    tdm_status s = CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &d->max_workspace,
        sizeof d->max_workspace));
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && s == TDM_OK; i++)
        s = CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &al[i],
                                                              sizeof al[i]));
    if (s == TDM_OK && (g->dt == TDM_DTYPE_F16 || g->dt == TDM_DTYPE_BF16))
        s = CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (s == TDM_OK) {
        memset(&res, 0, sizeof res);
        cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(d->lt, p->op, p->la, p->lb, p->ld,
                                                           p->ld, pref, 1, &res, &found);
        if (hs != CUBLAS_STATUS_NOT_SUPPORTED) s = CUBLAS_CHECK(hs);
        else found = 0;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    TDM_TRY(s);
    p->found = found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (p->found) {
        p->algo = res.algo;
        p->workspace = res.workspaceSize;
    }
    return TDM_OK;
}

// Runs g. *ran is false (and nothing happened) when cuBLASLt has no algorithm for it: the caller
// falls back (an epilogue done another way) or reports it.
static tdm_status lt_gemm_run(int dev, const lt_gemm *g, bool *ran) {
    *ran = false;
    blas_device *d = blas_device_get(dev);
    if (!d) return tdm_last_status();
    const bool tf32 = g->dt == TDM_DTYPE_F32 && !g->no_tf32 && tdm_tf32_allowed(TDM_TF32_MATMUL);
    const cublasComputeType_t compute = g->dt == TDM_DTYPE_F64 ? CUBLAS_COMPUTE_64F
                                        : tf32                  ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                : CUBLAS_COMPUTE_32F;
    blas_key key;
    memset(&key, 0, sizeof key);
    key.dt = g->dt;
    key.d_dt = g->d_dt;
    key.compute = compute;
    key.ta = g->ta;
    key.tb = g->tb;
    key.epilogue = g->epilogue;
    key.accumulate = g->accumulate;
    key.align[0] = (int32_t)align256(g->a);
    key.align[1] = (int32_t)align256(g->b);
    key.align[2] = (int32_t)align256(g->d);
    key.align[3] = g->bias ? (int32_t)align256(g->bias) : 0;
    key.align[4] = g->aux ? (int32_t)align256(g->aux) : 0;
    key.aux_ld = g->aux ? g->aux_ld : 0;
    key.m = g->m, key.n = g->n, key.k = g->k;
    key.lda = g->lda, key.ldb = g->ldb, key.ldd = g->ldd;
    key.stride_a = g->stride_a, key.stride_b = g->stride_b, key.stride_d = g->stride_d;
    key.batch = g->batch;

    pthread_mutex_lock(&d->lock);
    blas_plan *p = (blas_plan *)tdm_plan_cache_find(d->plans, &key, sizeof key);
    tdm_status s = TDM_OK;
    if (!p) {
        p = (blas_plan *)calloc(1, sizeof *p);
        if (!p) s = tdm_error_set(TDM_ERR_OOM, "cuBLASLt plan: out of host memory");
        if (s == TDM_OK) s = blas_plan_make(d, g, compute, &key, p);
        if (s != TDM_OK) {
            blas_plan_destroy(p);
            p = NULL;
        } else {
            s = tdm_plan_cache_insert(d->plans, &key, sizeof key, p);   // p destroyed on failure
            p = s == TDM_OK ? (blas_plan *)tdm_plan_cache_find(d->plans, &key, sizeof key) : NULL;
        }
    }
    void *ws = NULL;
    if (s == TDM_OK && p->found) {
        if (g->epilogue != CUBLASLT_EPILOGUE_DEFAULT)
            s = CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
                p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias));
        if (s == TDM_OK && g->aux)
            s = CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
                p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof g->aux));
        if (s == TDM_OK && p->workspace && !(ws = tdm_cuda_backend.alloc(p->workspace, dev)))
            s = tdm_last_status();
        const float one_f = 1.0f, zero_f = 0.0f;
        const double one_d = 1.0, zero_d = 0.0;
        const bool f64 = g->dt == TDM_DTYPE_F64;
        const void *alpha = f64 ? (const void *)&one_d : (const void *)&one_f;
        const void *beta = g->accumulate ? alpha : f64 ? (const void *)&zero_d
                                                       : (const void *)&zero_f;
        if (s == TDM_OK) tdm_cuda_count_launch();
        if (s == TDM_OK)
            s = CUBLAS_CHECK(cublasLtMatmul(d->lt, p->op, alpha, g->a, p->la, g->b, p->lb, beta,
                                            g->d, p->ld, g->d, p->ld, &p->algo, ws, p->workspace,
                                            tdm_cuda_current_stream(dev)));
        // stream-ordered: the block is reused only by later work on the same (current) stream
        if (ws) tdm_cuda_backend.free(ws, p->workspace, dev);
        if (s == TDM_OK) *ran = true;
    }
    pthread_mutex_unlock(&d->lock);
    return s;
}

// g with no epilogue must run: no algorithm is an error.
static tdm_status lt_gemm_must(int dev, const char *op, const lt_gemm *g) {
    bool ran;
    TDM_TRY(lt_gemm_run(dev, g, &ran));
    if (ran) return TDM_OK;
    return tdm_error_set(TDM_ERR_UNSUPPORTED,
                         "%s: cuBLASLt has no algorithm for %s m=%lld n=%lld k=%lld batch=%lld",
                         op, tdm_dtype_name(g->dt), (long long)g->m, (long long)g->n,
                         (long long)g->k, (long long)g->batch);
}

static lt_gemm gemm_of(tdm_dtype dt) {
    lt_gemm g;
    memset(&g, 0, sizeof g);
    g.ta = g.tb = CUBLAS_OP_N;
    g.batch = 1;
    g.dt = g.d_dt = dt;
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return g;
}

// On the current stream (the caller has set the device), like every other launch: the legacy
// stream that cudaMemset uses is not ordered with the backend's non-blocking streams, and is not
// captured into a graph.
static tdm_status zero(tdm_tensor *t) {
    return t && t->numel ? CUDA_CHECK(cudaMemsetAsync(tdm_data(t), 0, (size_t)t->numel *
                                                                         tdm_dtype_size(t->dtype),
                                                      tdm_cuda_stream_here()))
                         : TDM_OK;
}

// ----------------------------------------------------------------------------
// linear: x (rows,in), w (out,in), b (out) or NULL -> y (rows,out) = x w^T + b
// column-major: y^T (out,rows) = op_T(w stored (in,out)) x^T (in,rows), bias along m = out

tdm_status tdm_cuda_linear(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                           tdm_tensor *y) {
    const int dev = x->device.index;
    const int64_t rows = x->shape[0], in = x->shape[1], out = w->shape[0];
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    if (y->numel == 0) return TDM_OK;
    if (in == 0)   // an empty sum: y = b, or 0
        return b ? tdm_cuda_bias_fill(tdm_data(y), tdm_data_c(b), y->dtype, rows, out, 1)
                 : zero(y);
    lt_gemm g = gemm_of(x->dtype);
    g.ta = CUBLAS_OP_T;
    g.m = out, g.n = rows, g.k = in;
    g.a = tdm_data_c(w), g.lda = in;
    g.b = tdm_data_c(x), g.ldb = in;
    g.d = tdm_data(y), g.ldd = out;
    if (b) {
        g.epilogue = CUBLASLT_EPILOGUE_BIAS;
        g.bias = (void *)tdm_data_c(b);
        bool ran;
        TDM_TRY(lt_gemm_run(dev, &g, &ran));
        if (ran) return TDM_OK;
        // no BIAS epilogue for this shape/dtype: y = b broadcast, then y += x w^T (one rounding)
        TDM_TRY(tdm_cuda_bias_fill(tdm_data(y), tdm_data_c(b), y->dtype, rows, out, 1));
        g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
        g.bias = NULL;
        g.accumulate = true;
    }
    return lt_gemm_must(dev, "linear", &g);
}

// gx (rows,in) = gy (rows,out) w (out,in): column-major gx^T (in,rows) = w^T(in,out) gy^T
// gw (out,in) = gy^T x: column-major gw^T (in,out) = x^T (in,rows) op_T(gy^T (out,rows))
// gb (out) = column sums of gy: BGRADB of the gw product (columns of D = out, summed over k =
// rows), or the sum kernel.
tdm_status tdm_cuda_linear_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_tensor *w, tdm_tensor *gx, tdm_tensor *gw,
                                    tdm_tensor *gb) {
    const int dev = x->device.index;
    const int64_t rows = x->shape[0], in = x->shape[1], out = w->shape[0];
    const tdm_dtype dt = x->dtype;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    if (gx && gx->numel) {
        if (out == 0) TDM_TRY(zero(gx));
        else {
            lt_gemm g = gemm_of(dt);
            g.m = in, g.n = rows, g.k = out;
            g.a = tdm_data_c(w), g.lda = in;
            g.b = tdm_data_c(gy), g.ldb = out;
            g.d = tdm_data(gx), g.ldd = in;
            TDM_TRY(lt_gemm_must(dev, "linear_backward", &g));
        }
    }
    bool gb_done = false;
    if (gw && gw->numel) {
        if (rows == 0) TDM_TRY(zero(gw));
        else {
            lt_gemm g = gemm_of(dt);
            g.tb = CUBLAS_OP_T;
            g.m = in, g.n = out, g.k = rows;
            g.a = tdm_data_c(x), g.lda = in;
            g.b = tdm_data_c(gy), g.ldb = out;
            g.d = tdm_data(gw), g.ldd = in;
            if (gb && gb->numel) {
                g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
                g.bias = tdm_data(gb);
                bool ran;
                TDM_TRY(lt_gemm_run(dev, &g, &ran));
                gb_done = ran;
                g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
                g.bias = NULL;
            }
            if (!gb_done) TDM_TRY(lt_gemm_must(dev, "linear_backward", &g));
        }
    }
    if (gb && gb->numel && !gb_done)
        TDM_TRY(tdm_cuda_sum_outer_inner(tdm_data_c(gy), tdm_data(gb), dt, rows, out, 1));
    return TDM_OK;
}

// ----------------------------------------------------------------------------
// The MLP's GELU (tanh form) fused into its products, where cuBLASLt has the epilogue: llm.c's
// fusions. The aux matrix is GELU's input, column-major (out,rows) = row-major (rows,out) at
// leading dimension out, which cuBLASLt needs to be a multiple of 8 (cublasLt.h,
// EPILOGUE_AUX_LD). Elsewhere, or with no algorithm for the epilogue, the same results come from
// the unfused ops (one more rounding of GELU's input, as tdm_linear then tdm_gelu give).

static bool aux_fits(int64_t ld) { return ld % 8 == 0; }

// pre (rows,out) = x w^T + b (rounded to the dtype); h = gelu_tanh(x w^T + b): GELU_AUX_BIAS
// (GELU_AUX without b), GELU taken of the unrounded sum.
tdm_status tdm_cuda_linear_gelu(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                                tdm_tensor *pre, tdm_tensor *h) {
    const int dev = x->device.index;
    const int64_t rows = x->shape[0], in = x->shape[1], out = w->shape[0];
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    if (h->numel == 0) return TDM_OK;
    if (in > 0 && aux_fits(out) && x->dtype != TDM_DTYPE_F64) {
        lt_gemm g = gemm_of(x->dtype);
        g.ta = CUBLAS_OP_T;
        g.m = out, g.n = rows, g.k = in;
        g.a = tdm_data_c(w), g.lda = in;
        g.b = tdm_data_c(x), g.ldb = in;
        g.d = tdm_data(h), g.ldd = out;
        g.epilogue = b ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        g.bias = b ? (void *)tdm_data_c(b) : NULL;
        g.aux = tdm_data(pre), g.aux_ld = out;
        bool ran;
        TDM_TRY(lt_gemm_run(dev, &g, &ran));
        if (ran) return TDM_OK;
    }
    TDM_TRY(tdm_cuda_linear(x, w, b, pre));
    return cuda_unary(TDM_UNARY_GELU_TANH, pre, h);
}

// gpre (rows,in) = (gy (rows,out) w (out,in)) * gelu_tanh'(pre (rows,in)): the input gradient of
// the linear that follows the GELU, with GELU's backward as its DGELU epilogue.
tdm_status tdm_cuda_linear_dgelu_backward(const tdm_tensor *gy, const tdm_tensor *w,
                                          const tdm_tensor *pre, tdm_tensor *gpre) {
    const int dev = pre->device.index;
    const int64_t rows = pre->shape[0], in = pre->shape[1], out = w->shape[0];
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    if (gpre->numel == 0) return TDM_OK;
    if (out > 0 && aux_fits(in) && pre->dtype != TDM_DTYPE_F64) {
        lt_gemm g = gemm_of(pre->dtype);
        g.m = in, g.n = rows, g.k = out;
        g.a = tdm_data_c(w), g.lda = in;
        g.b = tdm_data_c(gy), g.ldb = out;
        g.d = tdm_data(gpre), g.ldd = in;
        g.epilogue = CUBLASLT_EPILOGUE_DGELU;
        g.aux = (void *)tdm_data_c(pre), g.aux_ld = in;
        bool ran;
        TDM_TRY(lt_gemm_run(dev, &g, &ran));
        if (ran) return TDM_OK;
    }
    tdm_tensor *gh = tdm_tensor_empty(2, pre->shape, pre->dtype, pre->device);
    if (!gh) return tdm_last_status();
    tdm_status s = tdm_cuda_linear_backward(gy, pre, w, gh, NULL, NULL);
    if (s == TDM_OK) s = cuda_unary_backward(TDM_UNARY_GELU_TANH, gh, pre, gpre);
    tdm_tensor_free(gh);
    return s;
}

// ----------------------------------------------------------------------------
// matmul: a (n,k) or (B,n,k), b (k,m) or (B,k,m) -> y (n,m) or (B,n,m)

typedef struct {
    int64_t batch, n, k, m;
    bool a3, b3;
} mm_dims;

static mm_dims mm_dims_of(const tdm_tensor *a, const tdm_tensor *b) {
    mm_dims d;
    d.a3 = a->ndim == 3, d.b3 = b->ndim == 3;
    d.batch = d.a3 ? a->shape[0] : d.b3 ? b->shape[0] : 1;
    d.n = a->shape[a->ndim - 2];
    d.k = a->shape[a->ndim - 1];
    d.m = b->shape[b->ndim - 1];
    return d;
}

// y[t] = a[t] b[t]: column-major y^T (m,n) = b^T (m,k) a^T (k,n). A 3-D a with a 2-D b is one
// product with n' = B n (a and y are contiguous (B n, .) matrices); a 2-D a with a 3-D b is
// batched with a's stride 0.
tdm_status tdm_cuda_matmul(const tdm_tensor *a, const tdm_tensor *b, tdm_tensor *y) {
    const int dev = a->device.index;
    const mm_dims d = mm_dims_of(a, b);
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    if (y->numel == 0) return TDM_OK;
    if (d.k == 0) return zero(y);
    lt_gemm g = gemm_of(a->dtype);
    g.m = d.m, g.k = d.k;
    g.a = tdm_data_c(b), g.lda = d.m;
    g.b = tdm_data_c(a), g.ldb = d.k;
    g.d = tdm_data(y), g.ldd = d.m;
    if (d.a3 && !d.b3) {
        g.n = d.batch * d.n;
    } else {
        g.n = d.n;
        g.batch = d.batch;
        g.stride_a = d.b3 ? d.k * d.m : 0;
        g.stride_b = d.a3 ? d.n * d.k : 0;
        g.stride_d = d.n * d.m;
    }
    return lt_gemm_must(dev, "matmul", &g);
}

// ga[t] = gy[t] b[t]^T: column-major ga^T (k,n) = op_T(b^T stored (m,k)) gy^T (m,n).
// gb[t] = a[t]^T gy[t]: column-major gb^T (m,k) = gy^T (m,n) op_T(a^T stored (k,n)).
// A 2-D operand beside a 3-D one gets the gradient summed over the batch: gb as one product over
// k' = B n (a and gy are contiguous), ga as a batched product into an f32 (or dtype) buffer
// summed by the kernel, each rounded once.
tdm_status tdm_cuda_matmul_backward(const tdm_tensor *gy, const tdm_tensor *a,
                                    const tdm_tensor *b, tdm_tensor *ga, tdm_tensor *gb) {
    const int dev = a->device.index;
    const mm_dims d = mm_dims_of(a, b);
    const tdm_dtype dt = a->dtype;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    const bool empty_sum = d.batch == 0 || d.n == 0 || d.m == 0;   // gy has no elements

    if (ga && ga->numel) {
        if (empty_sum) TDM_TRY(zero(ga));
        else {
            lt_gemm g = gemm_of(dt);
            g.ta = CUBLAS_OP_T;
            g.m = d.k, g.k = d.m;
            g.a = tdm_data_c(b), g.lda = d.m;
            g.b = tdm_data_c(gy), g.ldb = d.m;
            g.ldd = d.k;
            if (d.a3 && !d.b3) {   // one product over the B n rows
                g.n = d.batch * d.n;
                g.d = tdm_data(ga);
                TDM_TRY(lt_gemm_must(dev, "matmul_backward", &g));
            } else if (d.a3 || !d.b3) {   // batched alike, or plain 2-D
                g.n = d.n;
                g.batch = d.batch;
                g.stride_a = d.b3 ? d.k * d.m : 0;
                g.stride_b = d.n * d.m;
                g.stride_d = d.n * d.k;
                g.d = tdm_data(ga);
                TDM_TRY(lt_gemm_must(dev, "matmul_backward", &g));
            } else {   // a 2-D, b 3-D: per-batch products into a buffer, then the batch sum
                const tdm_dtype buf_dt = dt == TDM_DTYPE_F64 ? dt : TDM_DTYPE_F32;
                const size_t bytes = (size_t)(d.batch * d.n * d.k) * tdm_dtype_size(buf_dt);
                void *buf = tdm_cuda_backend.alloc(bytes, dev);
                if (!buf) return tdm_last_status();
                g.n = d.n;
                g.batch = d.batch;
                g.stride_a = d.k * d.m;
                g.stride_b = d.n * d.m;
                g.stride_d = d.n * d.k;
                g.d = buf;
                g.d_dt = buf_dt;
                tdm_status s = lt_gemm_must(dev, "matmul_backward", &g);
                if (s == TDM_OK)
                    s = sum_outer_inner(buf, buf_dt, tdm_data(ga), dt, d.batch, d.n * d.k, 1);
                tdm_cuda_backend.free(buf, bytes, dev);
                TDM_TRY(s);
            }
        }
    }
    if (gb && gb->numel) {
        if (empty_sum) TDM_TRY(zero(gb));
        else {
            lt_gemm g = gemm_of(dt);
            g.tb = CUBLAS_OP_T;
            g.m = d.m, g.n = d.k;
            g.a = tdm_data_c(gy), g.lda = d.m;
            g.b = tdm_data_c(a), g.ldb = d.k;
            g.d = tdm_data(gb), g.ldd = d.m;
            if (d.a3 && !d.b3) {   // summed over the batch: k' = B n
                g.k = d.batch * d.n;
            } else {
                g.k = d.n;
                g.batch = d.batch;
                g.stride_a = d.n * d.m;
                g.stride_b = d.a3 ? d.n * d.k : 0;
                g.stride_d = d.k * d.m;
            }
            TDM_TRY(lt_gemm_must(dev, "matmul_backward", &g));
        }
    }
    return TDM_OK;
}

// ----------------------------------------------------------------------------
// a row-major batched product for the backend's composite ops (k_attention.cu):
// C[t] (M,N) = op(A[t]) op(B[t]); column-major C^T (N,M) = op(B)^T op(A)^T, B's data first.
// A stored (M,K), or (K,M) when ta; B stored (K,N), or (N,K) when tb.

tdm_status tdm_cuda_gemm_rm(tdm_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                            const void *a, int64_t stride_a, const void *b, int64_t stride_b,
                            void *c, int64_t stride_c, int64_t batch) {
    int dev = 0;
    TDM_TRY(CUDA_CHECK(cudaGetDevice(&dev)));
    if (M == 0 || N == 0 || batch == 0) return TDM_OK;
    if (K == 0)   // empty sums
        return CUDA_CHECK(cudaMemsetAsync(c, 0, (size_t)(batch * stride_c) * tdm_dtype_size(dt),
                                          tdm_cuda_stream_here()));
    lt_gemm g = gemm_of(dt);
    g.no_tf32 = true;
    g.m = N, g.n = M, g.k = K;
    g.a = b, g.ta = tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.lda = tb ? K : N, g.stride_a = stride_b;
    g.b = a, g.tb = ta ? CUBLAS_OP_T : CUBLAS_OP_N, g.ldb = ta ? M : K, g.stride_b = stride_a;
    g.d = c, g.ldd = N, g.stride_d = stride_c;
    g.batch = batch;
    return lt_gemm_must(dev, "scaled_dot_product_attention", &g);
}

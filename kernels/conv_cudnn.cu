/* conv_cudnn.cu — the CUDA backend's conv2d, forward and both backward passes, through cuDNN 9's
 * graph (backend) API: tensor and convolution descriptors, one operation (CONVOLUTION_FORWARD,
 * BACKWARD_DATA or BACKWARD_FILTER) in an operation graph, engine heuristics (mode A, then the
 * fallback list), engine configurations, execution plans and variant packs. Semantics are those
 * of ref/ref_linalg.c (cross-correlation, zero padding, groups given by the filter's C/g).
 * Layouts: cuDNN takes dims in (N,C,H,W) order always; the strides say where the channels are
 * stored, so an NHWC convolution (tdm_conv2d_params.layout) is the same graph with NHWC strides
 * on all three tensors, which lets cuDNN pick its channels-last kernels.
 *
 * Choosing a plan, per tdm_conv_algo_mode_get():
 *   heuristic      the first configuration, in heuristic order, whose plan builds;
 *   benchmark      every configuration that builds is run once untimed and 3 times timed with
 *                  CUDA events; the fastest (minimum) wins — PyTorch's cudnn.benchmark;
 *   deterministic  as heuristic, among engines without the NONDETERMINISTIC numerical note;
 *   direct         no cuDNN: tandem's own direct-summation kernels (k_conv_direct.cu).
 * Heuristic and deterministic exclude Winograd and FFT engines (notes WINOGRAD*, FFT): their error
 * is not the direct summation's that docs/CONFORMANCE.md bounds; benchmark searches them, as
 * PyTorch's cudnn.benchmark does. A configuration for which cuDNN offers no engine that builds
 * (f64 has few, none for some NHWC, grouped or dilated cases) runs on the direct kernels in any
 * mode, never "unsupported"; tdm_conv_algo_last says so. In every mode, engines are excluded that would break the accumulation contract (f32 or
 * better): notes DOWN_CONVERT_INPUTS and REDUCED_PRECISION_REDUCTION; for f32 data while
 * tdm_tf32_allowed(TDM_TF32_CONV) is false, engines with the TENSOR_CORE note (on f32 data they
 * compute in TF32), as PyTorch does. The plan is cached per device under a key of everything it
 * depends on (kernels/plan_cache.h: pass, dtype, shapes, params, mode, TF32, pointer alignment),
 * with the descriptors it was built from; tdm_conv_algo_last reads the choice back.
 *
 * A bias is pre-filled into y and the convolution accumulates into it (beta = 1), so y is
 * rounded once; the bias gradient is the sum kernel of blas.cu. Workspace comes from the caching
 * allocator, per execution. Work runs on the calling thread's current stream.
 *
 * cuDNN 9.8 deprecated the HANDLE attributes of the operation graph and the execution plan in
 * favour of a DEVICEPROP descriptor that older cuDNN 9 runtimes lack; the HANDLE attributes work
 * in every cuDNN 9, so they are used. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda_kernels.h"
#include "kernels/cuda_libs.h"
#include "kernels/cuda_stream.h"

#ifndef TDM_HAVE_CUDNN

void tdm_cuda_cudnn_version(char *buf, size_t n) { snprintf(buf, n, "not linked"); }

#else

#include <cudnn.h>
#include <pthread.h>
#include <time.h>

#include "kernels/cuda_check.h"
#include "kernels/cuda_graph.h"
#include "kernels/plan_cache.h"

void tdm_cuda_cudnn_version(char *buf, size_t n) {
    size_t v = cudnnGetVersion();   // major*10000 + minor*100 + patch since cuDNN 9
    snprintf(buf, n, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
}

static tdm_status cudnn_check(cudnnStatus_t st, const char *call, const char *file, int line) {
    if (st == CUDNN_STATUS_SUCCESS) return TDM_OK;
    char detail[512];
    detail[0] = '\0';
    cudnnGetLastErrorString(detail, sizeof detail);
    return tdm_error_set(st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ? TDM_ERR_OOM
                                                                                 : TDM_ERR_BACKEND,
                         "cuDNN error %s in %s at %s:%d%s%s", cudnnGetErrorString(st), call, file,
                         line, detail[0] ? ": " : "", detail);
}
#define CUDNN_CHECK(call) cudnn_check((call), #call, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// descriptors: small wrappers over cudnnBackendSetAttribute

typedef cudnnBackendDescriptor_t bdesc;

static tdm_status set_attr(bdesc d, cudnnBackendAttributeName_t name,
                           cudnnBackendAttributeType_t type, int64_t count, const void *v) {
    return CUDNN_CHECK(cudnnBackendSetAttribute(d, name, type, count, v));
}

static tdm_status set_i64(bdesc d, cudnnBackendAttributeName_t name, int64_t n, const int64_t *v) {
    return set_attr(d, name, CUDNN_TYPE_INT64, n, v);
}

static tdm_status set_desc(bdesc d, cudnnBackendAttributeName_t name, bdesc v) {
    return set_attr(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}

static void destroy(bdesc *d) {
    if (*d) cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

static cudnnDataType_t cudnn_type(tdm_dtype dt) {
    switch (dt) {
    case TDM_DTYPE_F64: return CUDNN_DATA_DOUBLE;
    case TDM_DTYPE_F16: return CUDNN_DATA_HALF;
    case TDM_DTYPE_BF16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
    }
}

// A 4-D tensor with its unique id: dims (N,C,H,W) stored NCHW- or NHWC-contiguous.
static tdm_status tensor_new(bdesc *t, int64_t uid, const int64_t dims[4], tdm_conv_layout layout,
                             tdm_dtype dt, int64_t align) {
    const int64_t C = dims[1], H = dims[2], W = dims[3];
    const int64_t nchw[4] = {C * H * W, H * W, W, 1}, nhwc[4] = {H * W * C, 1, W * C, C};
    const int64_t *strides = layout == TDM_CONV_LAYOUT_NHWC ? nhwc : nchw;
    cudnnDataType_t type = cudnn_type(dt);
    TDM_TRY(CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t)));
    TDM_TRY(set_attr(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    TDM_TRY(set_i64(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, 4, dims));
    TDM_TRY(set_i64(*t, CUDNN_ATTR_TENSOR_STRIDES, 4, strides));
    TDM_TRY(set_i64(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, 1, &uid));
    TDM_TRY(set_i64(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 1, &align));
    return CUDNN_CHECK(cudnnBackendFinalize(*t));
}

// ----------------------------------------------------------------------------
// per device: handle, plan cache, the last choice of each pass

#define CONV_MAX_DEVICES 64
enum { UID_X = 'x', UID_W = 'w', UID_Y = 'y' };

typedef struct {
    bool ready;
    pthread_mutex_t lock;   // handle, cache, last: a plan is searched and run under it
    cudnnHandle_t handle;
    tdm_plan_cache *plans;
    tdm_conv_algo_info last[TDM_CONV_PASS_COUNT];
    bool have_last[TDM_CONV_PASS_COUNT];
} conv_device;

static conv_device conv_devices[CONV_MAX_DEVICES];
static pthread_mutex_t conv_init_lock = PTHREAD_MUTEX_INITIALIZER;

// A cached plan with the descriptors it was built from (kept alive with it).
typedef struct {
    bdesc tensors[3], conv, op, graph, cfg, plan;
    int64_t workspace;
    tdm_conv_algo_info info;
} conv_plan;

static void conv_plan_destroy(void *v) {
    conv_plan *p = (conv_plan *)v;
    if (!p) return;
    destroy(&p->plan);
    destroy(&p->cfg);
    destroy(&p->graph);
    destroy(&p->op);
    destroy(&p->conv);
    for (int i = 0; i < 3; i++) destroy(&p->tensors[i]);
    free(p);
}

static conv_device *conv_device_get(int dev) {
    if (dev < 0 || dev >= CONV_MAX_DEVICES) {
        tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: cuDNN state is kept for cuda:0..%d only", dev,
                      CONV_MAX_DEVICES - 1);
        return NULL;
    }
    conv_device *d = &conv_devices[dev];
    pthread_mutex_lock(&conv_init_lock);
    if (!d->ready) {
        tdm_status s = CUDA_CHECK(cudaSetDevice(dev));
        if (s == TDM_OK) s = CUDNN_CHECK(cudnnCreate(&d->handle));
        if (s == TDM_OK && (s = CUDNN_CHECK(cudnnSetStream(d->handle, 0))) != TDM_OK)
            cudnnDestroy(d->handle);
        if (s == TDM_OK && !(d->plans = tdm_plan_cache_new(conv_plan_destroy))) {
            s = tdm_last_status();
            cudnnDestroy(d->handle);
        }
        if (s == TDM_OK) {
            pthread_mutex_init(&d->lock, NULL);
            d->ready = true;
        }
    }
    pthread_mutex_unlock(&conv_init_lock);
    return d->ready ? d : NULL;
}

// ----------------------------------------------------------------------------
// one pass: its three tensors (x-, w- and y-shaped; which are outputs depends on the pass)

typedef struct {
    tdm_conv_pass pass;
    tdm_dtype dt;
    int64_t x[4], w[4], y[4];   // dims in (N,C,H,W) order whatever the layout: cuDNN's order
    void *px, *pw, *py;
    const tdm_conv2d_params *p;
    bool accumulate;   // beta = 1: forward into a pre-filled bias
} conv_call;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// The tensors, the convolution, the operation of the pass and its graph, into p.
static tdm_status graph_build(conv_device *d, const conv_call *c, conv_plan *p) {
    const int64_t *dims[3] = {c->x, c->w, c->y};
    const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    void *ptrs[3] = {c->px, c->pw, c->py};
    for (int i = 0; i < 3; i++)
        TDM_TRY(tensor_new(&p->tensors[i], uids[i], dims[i], c->p->layout, c->dt,
                           tdm_ptr_alignment(ptrs[i])));

    const bool f64 = c->dt == TDM_DTYPE_F64;
    cudnnDataType_t comp = f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t spatial = 2;
    const int64_t dil[2] = {c->p->dilation[0], c->p->dilation[1]};
    const int64_t str[2] = {c->p->stride[0], c->p->stride[1]};
    const int64_t pad[2] = {c->p->padding[0], c->p->padding[1]};
    const int64_t post[2] = {c->p->padding[0] + c->p->padding_extra[0],
                             c->p->padding[1] + c->p->padding_extra[1]};
    TDM_TRY(CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR,
                                                     &p->conv)));
    TDM_TRY(set_attr(p->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    TDM_TRY(set_attr(p->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
                     &mode));
    TDM_TRY(set_i64(p->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 1, &spatial));
    TDM_TRY(set_i64(p->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, 2, dil));
    TDM_TRY(set_i64(p->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 2, str));
    TDM_TRY(set_i64(p->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 2, pad));
    TDM_TRY(set_i64(p->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, 2, post));
    TDM_TRY(CUDNN_CHECK(cudnnBackendFinalize(p->conv)));

    // per pass: the operation type and its attributes (alpha, beta, conv, and the 3 tensors in
    // the order x-shaped, w-shaped, y-shaped)
    static const struct {
        cudnnBackendDescriptorType_t type;
        cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
    } ops[TDM_CONV_PASS_COUNT] = {
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
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
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
    };
    const int k = (int)c->pass;
    TDM_TRY(CUDNN_CHECK(cudnnBackendCreateDescriptor(ops[k].type, &p->op)));
    const double alpha_d = 1.0, beta_d = c->accumulate ? 1.0 : 0.0;
    const float alpha_f = 1.0f, beta_f = c->accumulate ? 1.0f : 0.0f;
    const cudnnBackendAttributeType_t scale_t = f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
    TDM_TRY(set_attr(p->op, ops[k].alpha, scale_t, 1,
                     f64 ? (const void *)&alpha_d : (const void *)&alpha_f));
    TDM_TRY(set_attr(p->op, ops[k].beta, scale_t, 1,
                     f64 ? (const void *)&beta_d : (const void *)&beta_f));
    TDM_TRY(set_desc(p->op, ops[k].conv, p->conv));
    TDM_TRY(set_desc(p->op, ops[k].x, p->tensors[0]));
    TDM_TRY(set_desc(p->op, ops[k].w, p->tensors[1]));
    TDM_TRY(set_desc(p->op, ops[k].y, p->tensors[2]));
    TDM_TRY(CUDNN_CHECK(cudnnBackendFinalize(p->op)));

    TDM_TRY(CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                                     &p->graph)));
    TDM_TRY(set_attr(p->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                     &d->handle));
    TDM_TRY(set_desc(p->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, p->op));
    return CUDNN_CHECK(cudnnBackendFinalize(p->graph));
}

// The engine configurations the heuristic of `mode` proposes for the graph, best first, into a
// malloc'd array (*n of them; the caller destroys each and frees the array). A mode that
// proposes nothing (or cannot finalize for this graph) gives 0 configurations, not an error.
static tdm_status heuristic_configs(bdesc graph, cudnnBackendHeurMode_t mode, bdesc **out,
                                    int64_t *n) {
    *out = NULL;
    *n = 0;
    bdesc heur = NULL;
    TDM_TRY(CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur)));
    tdm_status s = set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    if (s == TDM_OK) s = set_attr(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (s == TDM_OK && cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) {
        destroy(&heur);   // no answer from this heuristic for this graph
        return TDM_OK;
    }
    int64_t count = 0;
    if (s == TDM_OK)
        s = CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    bdesc *cfgs = NULL;
    if (s == TDM_OK && count > 0) {
        cfgs = (bdesc *)calloc((size_t)count, sizeof *cfgs);
        if (!cfgs) s = tdm_error_set(TDM_ERR_OOM, "conv2d: out of host memory");
        for (int64_t i = 0; s == TDM_OK && i < count; i++)
            s = CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                                         &cfgs[i]));
        int64_t got = 0;
        if (s == TDM_OK)
            s = CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                                     cfgs));
        if (s == TDM_OK) {
            for (int64_t i = got; i < count; i++) destroy(&cfgs[i]);
            *n = got < count ? got : count;
        } else {
            for (int64_t i = 0; cfgs && i < count; i++) destroy(&cfgs[i]);
            free(cfgs);
            cfgs = NULL;
        }
    }
    destroy(&heur);
    *out = cfgs;
    return s;
}

// What a configuration's engine is: its global index and numerical notes.
typedef struct {
    int64_t id;
    bool note[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
} engine_desc;

static tdm_status engine_of(bdesc cfg, engine_desc *e) {
    memset(e, 0, sizeof *e);
    e->id = -1;
    bdesc eng = NULL;
    int64_t n = 0;
    TDM_TRY(CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng)));
    tdm_status s = CUDNN_CHECK(cudnnBackendGetAttribute(
        cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng));
    if (s == TDM_OK)
        s = CUDNN_CHECK(cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                                 CUDNN_TYPE_INT64, 1, &n, &e->id));
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (s == TDM_OK)
        s = CUDNN_CHECK(cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                                 CUDNN_TYPE_NUMERICAL_NOTE,
                                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes));
    for (int64_t i = 0; s == TDM_OK && i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        if (notes[i] >= 0 && notes[i] < CUDNN_NUMERICAL_NOTE_TYPE_COUNT) e->note[notes[i]] = true;
    destroy(&eng);
    return s;
}

// May this engine run under the current mode and TF32 setting (see the file's comment)?
static bool engine_allowed(const engine_desc *e, const conv_call *c, tdm_conv_algo_mode mode,
                           bool tf32) {
    if (e->note[CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS]) return false;
    if (e->note[CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION]) return false;
    if (mode == TDM_CONV_ALGO_DETERMINISTIC && e->note[CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC])
        return false;
    // Winograd's transforms amplify rounding error and FFT's error is only normwise: the direct-
    // summation bound (docs/CONFORMANCE.md) covers neither, so only the benchmark mode, which
    // searches what PyTorch's cudnn.benchmark searches, may take them
    if (mode != TDM_CONV_ALGO_BENCHMARK &&
        (e->note[CUDNN_NUMERICAL_NOTE_FFT] || e->note[CUDNN_NUMERICAL_NOTE_WINOGRAD] ||
         e->note[CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4] ||
         e->note[CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6] ||
         e->note[CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13]))
        return false;
    if (c->dt == TDM_DTYPE_F32 && !tf32 && e->note[CUDNN_NUMERICAL_NOTE_TENSOR_CORE]) return false;
    return true;
}

// An execution plan for cfg, or *plan NULL when the configuration does not build here.
static tdm_status plan_build(conv_device *d, bdesc cfg, bdesc *plan, int64_t *workspace) {
    *plan = NULL;
    TDM_TRY(CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan)));
    tdm_status s = set_attr(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                            &d->handle);
    if (s == TDM_OK) s = set_desc(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    if (s == TDM_OK && cudnnBackendFinalize(*plan) != CUDNN_STATUS_SUCCESS) {
        destroy(plan);   // not supported for this graph/device: the next one
        return TDM_OK;
    }
    int64_t n = 0;
    if (s == TDM_OK)
        s = CUDNN_CHECK(cudnnBackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                 CUDNN_TYPE_INT64, 1, &n, workspace));
    if (s != TDM_OK) destroy(plan);
    return s;
}

// Runs plan on c's buffers with a workspace from the caching allocator.
static tdm_status plan_execute(conv_device *d, int dev, bdesc plan, int64_t workspace,
                               const conv_call *c) {
    void *ws = NULL;
    if (workspace > 0 && !(ws = tdm_cuda_backend.alloc((size_t)workspace, dev)))
        return tdm_last_status();
    bdesc pack = NULL;
    void *ptrs[3] = {c->px, c->pw, c->py};
    const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    tdm_status s = CUDNN_CHECK(
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    if (s == TDM_OK)
        s = set_attr(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (s == TDM_OK) s = set_i64(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, 3, uids);
    if (s == TDM_OK)
        s = set_attr(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (s == TDM_OK) s = CUDNN_CHECK(cudnnBackendFinalize(pack));
    if (s == TDM_OK) s = CUDNN_CHECK(cudnnSetStream(d->handle, tdm_cuda_current_stream(dev)));
    if (s == TDM_OK) tdm_cuda_count_launch();
    if (s == TDM_OK) s = CUDNN_CHECK(cudnnBackendExecute(d->handle, plan, pack));
    destroy(&pack);
    // stream-ordered: the block is reused only by later work on the same (current) stream
    if (ws) tdm_cuda_backend.free(ws, (size_t)workspace, dev);
    return s;
}

// Benchmark mode: one untimed run, then the minimum of 3 timed ones, in ms; a negative time when
// the plan fails to run (no workspace, or an execution error), which drops the candidate.
static double plan_time(conv_device *d, int dev, bdesc plan, int64_t workspace,
                        const conv_call *c) {
    if (plan_execute(d, dev, plan, workspace, c) != TDM_OK) return -1;
    cudaEvent_t ev[2];
    if (CUDA_CHECK(cudaEventCreate(&ev[0])) != TDM_OK) return -1;
    if (CUDA_CHECK(cudaEventCreate(&ev[1])) != TDM_OK) {
        cudaEventDestroy(ev[0]);
        return -1;
    }
    double best = -1;
    for (int r = 0; r < 3; r++) {
        float ms = 0;
        if (CUDA_CHECK(cudaEventRecord(ev[0], tdm_cuda_current_stream(dev))) != TDM_OK ||
            plan_execute(d, dev, plan, workspace, c) != TDM_OK ||
            CUDA_CHECK(cudaEventRecord(ev[1], tdm_cuda_current_stream(dev))) != TDM_OK ||
            CUDA_CHECK(cudaEventSynchronize(ev[1])) != TDM_OK ||
            CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1])) != TDM_OK) {
            best = -1;
            break;
        }
        if (best < 0 || ms < best) best = ms;
    }
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    return best;
}

static void info_engine_name(tdm_conv_algo_info *info, const engine_desc *e) {
    static const char *const names[] = {   // cuDNN's order (9.0's enum ends before strict_nan)
        "tensor_core", "down_convert", "reduced_precision", "fft", "nondeterministic",
        "winograd", "winograd_4x4", "winograd_6x6", "winograd_13x13", "strict_nan"};
    const int n_names = (int)(sizeof names / sizeof *names);
    int len = snprintf(info->engine, sizeof info->engine, "cudnn engine %lld", (long long)e->id);
    const char *sep = " (";
    for (int i = 0; i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT && len > 0 &&
                    len < (int)sizeof info->engine; i++) {
        if (!e->note[i]) continue;
        len += snprintf(info->engine + len, sizeof info->engine - (size_t)len, "%s%s", sep,
                        i < n_names ? names[i] : "note");
        sep = ", ";
    }
    if (sep[0] == ',' && len > 0 && len < (int)sizeof info->engine)
        snprintf(info->engine + len, sizeof info->engine - (size_t)len, ")");
}

// Searches a plan for c under the current mode (the graph is built into p first).
static tdm_status plan_search(conv_device *d, int dev, const conv_call *c, conv_plan *p) {
    const double t0 = now_ms();
    const tdm_conv_algo_mode mode = tdm_conv_algo_mode_get();
    const bool tf32 = tdm_tf32_allowed(TDM_TF32_CONV);
    TDM_TRY(graph_build(d, c, p));

    bdesc *lists[2] = {NULL, NULL};
    int64_t counts[2] = {0, 0};
    tdm_status s = heuristic_configs(p->graph, CUDNN_HEUR_MODE_A, &lists[0], &counts[0]);
    if (s == TDM_OK) s = heuristic_configs(p->graph, CUDNN_HEUR_MODE_FALLBACK, &lists[1], &counts[1]);

    int candidates = 0;
    double best_ms = -1;
    engine_desc best_e;
    memset(&best_e, 0, sizeof best_e);
    int64_t timed_ids[256];
    int n_timed = 0;
    for (int l = 0; l < 2 && s == TDM_OK; l++) {
        for (int64_t i = 0; i < counts[l] && s == TDM_OK; i++) {
            if (p->plan && mode != TDM_CONV_ALGO_BENCHMARK) break;   // first working one
            engine_desc e;
            if ((s = engine_of(lists[l][i], &e)) != TDM_OK) break;
            if (!engine_allowed(&e, c, mode, tf32)) continue;
            bool seen = false;   // the fallback list repeats engines heuristic A proposed
            for (int j = 0; l == 1 && j < n_timed; j++) seen = seen || timed_ids[j] == e.id;
            if (seen) continue;
            bdesc plan = NULL;
            int64_t ws = 0;
            if ((s = plan_build(d, lists[l][i], &plan, &ws)) != TDM_OK || !plan) continue;
            candidates++;
            if (n_timed < (int)(sizeof timed_ids / sizeof *timed_ids)) timed_ids[n_timed++] = e.id;
            double ms = 0;
            if (mode == TDM_CONV_ALGO_BENCHMARK) {
                ms = plan_time(d, dev, plan, ws, c);
                if (ms < 0) {   // could not run it (workspace, launch): not a candidate
                    (void)cudaGetLastError();
                    destroy(&plan);
                    continue;
                }
            }
            if (!p->plan || ms < best_ms) {
                destroy(&p->plan);
                destroy(&p->cfg);
                p->plan = plan;
                p->cfg = lists[l][i];
                lists[l][i] = NULL;   // now owned by p
                p->workspace = ws;
                best_ms = ms;
                best_e = e;
            } else {
                destroy(&plan);
            }
        }
    }
    for (int l = 0; l < 2; l++) {
        for (int64_t i = 0; i < counts[l]; i++) destroy(&lists[l][i]);
        free(lists[l]);
    }
    TDM_TRY(s);
    if (!p->plan)
        return tdm_error_set(TDM_ERR_UNSUPPORTED,
                             "conv2d %s: cuDNN has no engine for %s %s x (N,C,H,W) "
                             "(%lld,%lld,%lld,%lld) w (%lld,%lld,%lld,%lld) in %s mode%s",
                             tdm_conv_pass_name(c->pass), tdm_dtype_name(c->dt),
                             tdm_conv_layout_name(c->p->layout),
                             (long long)c->x[0], (long long)c->x[1], (long long)c->x[2],
                             (long long)c->x[3], (long long)c->w[0], (long long)c->w[1],
                             (long long)c->w[2], (long long)c->w[3],
                             tdm_conv_algo_mode_name(mode),
                             c->dt == TDM_DTYPE_F32 && !tf32 ? " without TF32" : "");
    tdm_conv_algo_info *info = &p->info;
    memset(info, 0, sizeof *info);
    info->pass = c->pass;
    info->mode = mode;
    info->engine_id = best_e.id;
    info_engine_name(info, &best_e);
    info->candidates = candidates;
    info->workspace_bytes = p->workspace;
    info->tf32 = c->dt == TDM_DTYPE_F32 && best_e.note[CUDNN_NUMERICAL_NOTE_TENSOR_CORE];
    info->search_ms = now_ms() - t0;
    return TDM_OK;
}

// y (dims (N,O,OH,OW) in the layout) = the bias b (O) broadcast over every position.
static tdm_status bias_fill(void *y, const tdm_tensor *b, tdm_dtype dt, const int64_t dims[4],
                            tdm_conv_layout layout) {
    const int64_t n = dims[0], o = dims[1], hw = dims[2] * dims[3];
    return layout == TDM_CONV_LAYOUT_NHWC ? tdm_cuda_bias_fill(y, tdm_data_c(b), dt, n * hw, o, 1)
                                          : tdm_cuda_bias_fill(y, tdm_data_c(b), dt, n, o, hw);
}

// The choice recorded for a configuration run by tandem's direct kernels (k_conv_direct.cu).
static void direct_info(tdm_conv_algo_info *info, const conv_call *c, tdm_conv_algo_mode mode) {
    memset(info, 0, sizeof *info);
    info->pass = c->pass;
    info->mode = mode;
    info->engine_id = -1;
    snprintf(info->engine, sizeof info->engine, "%s",
             mode == TDM_CONV_ALGO_DIRECT ? "tandem direct (direct mode)"
                                          : "tandem direct (cuDNN has no engine)");
}

// Runs one pass: the cached plan, or a new search. A bias (forward only, may be NULL) is filled
// into y after the search and before the execution (a benchmark search scribbles on y).
static tdm_status conv_pass_run(int dev, const conv_call *c, const tdm_tensor *bias) {
    conv_device *d = conv_device_get(dev);
    if (!d) return tdm_last_status();
    const int32_t align[3] = {tdm_ptr_alignment(c->px), tdm_ptr_alignment(c->pw),
                              tdm_ptr_alignment(c->py)};
    tdm_conv_plan_key key;
    tdm_conv_plan_key_make(&key, dev, (int)c->pass, c->dt, (int)c->p->layout,
                           (int)tdm_conv_algo_mode_get(),
                           tdm_tf32_allowed(TDM_TF32_CONV), c->x, c->w, c->y, c->p, align);
    key.accumulate = c->accumulate;

    pthread_mutex_lock(&d->lock);
    tdm_status s = TDM_OK;
    bool cached = true;
    conv_plan *p = (conv_plan *)tdm_plan_cache_find(d->plans, &key, sizeof key);
    if (!p) {
        cached = false;
        const tdm_conv_algo_mode mode = tdm_conv_algo_mode_get();
        // a benchmark search times candidates with a host wait on events, which a capture
        // forbids (and would record the candidate runs into the graph)
        if (mode == TDM_CONV_ALGO_BENCHMARK)
            s = tdm_cuda_capture_refuse(tdm_cuda_current_stream(dev), dev,
                                        "conv2d (benchmark search)",
                                        "timing candidates waits on the host; run this shape once "
                                        "before capturing");
        if (s == TDM_OK && !(p = (conv_plan *)calloc(1, sizeof *p)))
            s = tdm_error_set(TDM_ERR_OOM, "conv2d: out of host memory");
        if (s == TDM_OK && mode != TDM_CONV_ALGO_DIRECT) s = plan_search(d, dev, c, p);
        if (s == TDM_ERR_UNSUPPORTED || (s == TDM_OK && mode == TDM_CONV_ALGO_DIRECT)) {
            // no cuDNN engine for this configuration (or the direct mode): tandem's own kernels
            conv_plan_destroy(p);
            p = (conv_plan *)calloc(1, sizeof *p);
            s = p ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "conv2d: out of host memory");
            if (p) direct_info(&p->info, c, mode);
        }
        if (s != TDM_OK) {
            conv_plan_destroy(p);
            p = NULL;
        } else if ((s = tdm_plan_cache_insert(d->plans, &key, sizeof key, p)) == TDM_OK) {
            p = (conv_plan *)tdm_plan_cache_find(d->plans, &key, sizeof key);
        } else {
            p = NULL;   // destroyed by the failed insert
        }
    }
    if (s == TDM_OK && !p->plan) {   // direct kernels (the bias added in the sum)
        s = cuda_conv_direct((int)c->pass, c->dt, c->x, c->w, c->y, c->px, c->pw, c->py,
                             bias ? tdm_data_c(bias) : NULL, c->p);
    } else if (s == TDM_OK) {
        if (bias) s = bias_fill(c->py, bias, c->dt, c->y, c->p->layout);
        if (s == TDM_OK) s = plan_execute(d, dev, p->plan, p->workspace, c);
    }
    if (s == TDM_OK) {
        d->last[c->pass] = p->info;
        d->last[c->pass].cached = cached;
        d->have_last[c->pass] = true;
    }
    pthread_mutex_unlock(&d->lock);
    return s;
}

// t's shape in (N,C,H,W) order: an NHWC tensor is (N,H,W,C), an NHWC weight (O,kh,kw,C/g).
static void dims_nchw(const tdm_tensor *t, tdm_conv_layout layout, int64_t d[4]) {
    const int *ax = tdm_conv_axes(layout);
    d[0] = t->shape[0], d[1] = t->shape[ax[0]], d[2] = t->shape[ax[1]], d[3] = t->shape[ax[2]];
}

static conv_call call_of(tdm_conv_pass pass, const tdm_tensor *x, const tdm_tensor *w,
                         const tdm_tensor *y, const tdm_conv2d_params *p) {
    conv_call c;
    memset(&c, 0, sizeof c);
    c.pass = pass;
    c.dt = x->dtype;
    dims_nchw(x, p->layout, c.x);
    dims_nchw(w, p->layout, c.w);
    dims_nchw(y, p->layout, c.y);
    c.px = (void *)tdm_data_c(x);
    c.pw = (void *)tdm_data_c(w);
    c.py = (void *)tdm_data_c(y);
    c.p = p;
    return c;
}

// On the current stream, like every other launch (the caller has set the device): cudaMemset runs
// on the legacy stream, which is not ordered with the backend's non-blocking streams and is not
// captured into a graph.
static tdm_status zero(tdm_tensor *t) {
    return CUDA_CHECK(cudaMemsetAsync(tdm_data(t), 0, (size_t)t->numel * tdm_dtype_size(t->dtype),
                                      tdm_cuda_stream_here()));
}

// ---- asymmetric padding ----
// cuDNN's engines take one padding per dim for both sides (its legacy engines, the only ones for
// f64 and most f32, ignore or refuse a post-padding that differs), so padding_extra (PyTorch's
// padding='same' with an even kernel: one more zero after) is done as PyTorch does: x padded
// explicitly by the extra rows and columns, then a symmetric convolution; the data gradient of
// the padded x cropped back to x.
static bool has_extra(const tdm_conv2d_params *p) {
    return p->padding_extra[0] != 0 || p->padding_extra[1] != 0;
}

static tdm_conv2d_params symmetric(const tdm_conv2d_params *p) {
    tdm_conv2d_params q = *p;
    q.padding_extra[0] = q.padding_extra[1] = 0;
    return q;
}

// A tensor of x's dtype and device, x's shape grown by the extra rows and columns (in its layout).
static tdm_tensor *extra_padded_like(const tdm_tensor *x, const tdm_conv2d_params *p) {
    const int *ax = tdm_conv_axes(p->layout);
    int64_t shape[4] = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
    shape[ax[1]] += p->padding_extra[0];
    shape[ax[2]] += p->padding_extra[1];
    return tdm_tensor_empty(4, shape, x->dtype, x->device);
}

static tdm_status conv2d_extra(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                               const tdm_conv2d_params *p, tdm_tensor *y) {
    const tdm_conv2d_params q = symmetric(p);
    tdm_tensor *xp = extra_padded_like(x, p);
    if (!xp) return tdm_last_status();
    tdm_status s = cuda_pad_crop(x, xp);
    if (s == TDM_OK) s = tdm_cuda_conv2d(xp, w, b, &q, y);
    tdm_tensor_free(xp);   // stream-ordered
    return s;
}

static tdm_status conv2d_backward_extra(const tdm_tensor *gy, const tdm_tensor *x,
                                        const tdm_tensor *w, const tdm_conv2d_params *p,
                                        tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb) {
    const tdm_conv2d_params q = symmetric(p);
    const bool want_gx = gx && gx->numel, want_gw = gw && gw->numel;
    tdm_tensor *xp = extra_padded_like(x, p), *gxp = want_gx ? extra_padded_like(x, p) : NULL;
    tdm_status s = !xp || (want_gx && !gxp) ? tdm_last_status() : TDM_OK;
    if (s == TDM_OK && want_gw) s = cuda_pad_crop(x, xp);
    if (s == TDM_OK) s = tdm_cuda_conv2d_backward(gy, xp, w, &q, gxp, want_gw ? gw : NULL, gb);
    if (s == TDM_OK && want_gx) s = cuda_pad_crop(gxp, gx);
    tdm_tensor_free(xp);
    tdm_tensor_free(gxp);
    return s;
}

// ----------------------------------------------------------------------------
// the slots: x (N,C,H,W), w (O,C/g,kh,kw), b (O) or NULL, y (N,O,OH,OW); in the NHWC layout
// x (N,H,W,C), w (O,kh,kw,C/g), y (N,OH,OW,O)

tdm_status tdm_cuda_conv2d(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                           const tdm_conv2d_params *p, tdm_tensor *y) {
    const int dev = x->device.index;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    if (y->numel == 0) return TDM_OK;
    if (has_extra(p)) return conv2d_extra(x, w, b, p, y);
    conv_call c = call_of(TDM_CONV_PASS_FORWARD, x, w, y, p);
    if (c.w[1] == 0)   // C/g = 0: an empty sum, y = b or 0
        return b ? bias_fill(c.py, b, y->dtype, c.y, p->layout) : zero(y);
    c.accumulate = b != NULL;
    return conv_pass_run(dev, &c, b);
}

// gy (N,O,OH,OW); any of gx (N,C,H,W), gw (O,C/g,kh,kw), gb (O) may be NULL (NHWC: as above).
tdm_status tdm_cuda_conv2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_tensor *w, const tdm_conv2d_params *p,
                                    tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb) {
    const int dev = x->device.index;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(dev)));
    if (has_extra(p)) return conv2d_backward_extra(gy, x, w, p, gx, gw, gb);
    if (gx && gx->numel) {
        if (gy->numel == 0) TDM_TRY(zero(gx));   // O = 0: nothing flows back
        else {
            conv_call c = call_of(TDM_CONV_PASS_BACKWARD_DATA, gx, w, gy, p);
            TDM_TRY(conv_pass_run(dev, &c, NULL));
        }
    }
    if (gw && gw->numel) {
        if (gy->numel == 0) TDM_TRY(zero(gw));   // N = 0: an empty sum
        else {
            conv_call c = call_of(TDM_CONV_PASS_BACKWARD_FILTER, x, gw, gy, p);
            TDM_TRY(conv_pass_run(dev, &c, NULL));
        }
    }
    if (gb && gb->numel) {   // gb[o] = the sum of gy over every sample and position
        int64_t d[4];
        dims_nchw(gy, p->layout, d);
        const int64_t n = d[0], o = d[1], hw = d[2] * d[3];
        const bool nhwc = p->layout == TDM_CONV_LAYOUT_NHWC;
        TDM_TRY(tdm_cuda_sum_outer_inner(tdm_data_c(gy), tdm_data(gb), gy->dtype,
                                         nhwc ? n * hw : n, o, nhwc ? 1 : hw));
    }
    return TDM_OK;
}

tdm_status tdm_cuda_conv_algo_last(int device_index, tdm_conv_pass pass,
                                   tdm_conv_algo_info *out) {
    conv_device *d = conv_device_get(device_index);
    if (!d) return tdm_last_status();
    pthread_mutex_lock(&d->lock);
    const bool have = d->have_last[pass];
    if (have) *out = d->last[pass];
    pthread_mutex_unlock(&d->lock);
    if (have) return TDM_OK;
    return tdm_error_set(TDM_ERR_ARG, "conv algo last: no conv2d %s has run on cuda:%d yet",
                         tdm_conv_pass_name(pass), device_index);
}

tdm_status tdm_cuda_conv_algo_cache_clear(int device_index) {
    conv_device *d = conv_device_get(device_index);
    if (!d) return tdm_last_status();
    pthread_mutex_lock(&d->lock);
    tdm_plan_cache_clear(d->plans);
    pthread_mutex_unlock(&d->lock);
    return TDM_OK;
}

#endif   // TDM_HAVE_CUDNN

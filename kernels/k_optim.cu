/* k_optim.cu — the fused optimizer updates (one pass over param, grad and state per parameter,
 * torch.optim's single-tensor formulas as ref/ref_optim.c writes them; Adam also over a whole
 * list of parameters in one launch, with optional f32 master weights), the grad scaler's
 * unscale + non-finite check that leaves its verdict on the device (no host sync per tensor), and
 * gradient-norm clipping (clip_grad_norm_: the norm reduced on the device, the scale read there).
 * The steps compute in f64 for every dtype, as the reference: a step chains up to ~11 roundings
 * (hyperparameters that f32 cannot hold exactly, decay, momentum, dampening, nesterov, lr, the
 * subtraction), more than docs/CONFORMANCE.md's gamma_6 allows in f32 when |param| is small; in
 * f64 only the final rounding is left. These passes are memory-bound: A100/H100 f64 throughput
 * (1/2 of f32) is not the limit. One rounding per stored tensor. */
#include <math.h>

#include "kernels/k_common.cuh"
#include "kernels/cuda_graph.h"

// ---- sgd ---------------------------------------------------------------------------------------
// d = (maximize ? -grad : grad) + wd param; with momentum: buf = initialized ? momentum buf +
// (1 - dampening) d : d, d = nesterov ? d + momentum buf : buf; param -= lr d.
// in: param, grad[, buf]; out: param[, buf]
// Captured (cuda_sgd_step_dev): initialized and lr are read on the device from coef = {initialized,
// lr}, which core rewrites before each replay; the same arithmetic either way.
template <bool MOM> struct sgd_fn {
    double lr, momentum, dampening, wd;
    bool nesterov, initialized, maximize;
    const double *coef;   // NULL: the arguments above
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        const bool init = coef ? coef[0] != 0 : initialized;
        const double rate = coef ? coef[1] : lr;
        A d = maximize ? -in[1] : in[1];
        if (wd != 0) d += (A)wd * in[0];
        if (MOM) {
            const A b = init ? (A)momentum * in[2] + (A)(1 - dampening) * d : d;
            d = nesterov ? d + (A)momentum * b : b;
            out[1] = b;
        }
        out[0] = in[0] - (A)rate * d;
    }
};

static tdm_status sgd_launch(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                             bool buf_initialized, const double *coef, const tdm_sgd_params *p) {
    if (param->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(param));
    const bool mom = p->momentum != 0;
    TDM_DISPATCH_FLOAT(param->dtype, "sgd_step", T, {
        if (mom) {
            map_ptrs<T, 3, 2> ptr = {{cptr<T>(param), cptr<T>(grad), cptr<T>(buf)},
                                     {mptr<T>(param), mptr<T>(buf)}};
            sgd_fn<true> f = {p->lr, p->momentum, p->dampening, p->weight_decay, p->nesterov,
                              buf_initialized, p->maximize, coef};
            return launch_map<T, 3, 2, sgd_fn<true>, double>(param->numel, ptr, f);
        }
        map_ptrs<T, 2, 1> ptr = {{cptr<T>(param), cptr<T>(grad)}, {mptr<T>(param)}};
        sgd_fn<false> f = {p->lr, p->momentum, p->dampening, p->weight_decay, p->nesterov,
                           buf_initialized, p->maximize, coef};
        return launch_map<T, 2, 1, sgd_fn<false>, double>(param->numel, ptr, f);
    });
    return TDM_OK;
}

tdm_status cuda_sgd_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                         bool buf_initialized, const tdm_sgd_params *p) {
    return sgd_launch(param, grad, buf, buf_initialized, NULL, p);
}

tdm_status cuda_sgd_step_dev(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                             const double *coef, const tdm_sgd_params *p) {
    return sgd_launch(param, grad, buf, false, coef, p);
}

// ---- adam / adamw --------------------------------------------------------------------------------
// g = maximize ? -grad : grad.  AdamW: param *= 1 - lr wd.  Adam: g += wd param.
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; amsgrad: vmax = max(vmax, v) (NaN wins, as
// torch.maximum), used for v below; param -= lr/(1-b1^step) m / (sqrt(v)/sqrt(1-b2^step) + eps).
// in: param, grad, m, v[, vmax]; out: param, m, v[, vmax].
// Captured (cuda_adam_step_dev, PyTorch's capturable=True): the values that depend on the step
// count and lr are read on the device from coef = {lr/(1-b1^step), sqrt(1-b2^step), 1 - lr wd,
// fresh}, which core computes on the host as the eager step does and writes before each replay;
// fresh = 1 reads m, v and vmax as zeros (state made during the capture, never written yet:
// b1*0 + (1-b1) g and max(0, v) are what the eager step computes from zeroed state, bit for bit).
template <bool AMS> struct adam_fn {
    double decay, wd, b1, b2, step_size, bc2_sqrt, eps;
    bool decoupled, maximize;
    const double *coef;   // NULL: the arguments above
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        const double ss = coef ? coef[0] : step_size, bc2s = coef ? coef[1] : bc2_sqrt;
        const double dec = coef ? coef[2] : decay;
        const bool fresh = coef && coef[3] != 0;
        A x = in[0], g = maximize ? -in[1] : in[1];
        if (decoupled) x *= (A)dec;
        else if (wd != 0) g += (A)wd * x;
        const A m0 = fresh ? (A)0 : in[2], v0 = fresh ? (A)0 : in[3];
        const A m = (A)b1 * m0 + (A)(1 - b1) * g;
        const A v = (A)b2 * v0 + (A)(1 - b2) * g * g;
        A den = v;
        if (AMS) {   // (the indices stay inside the arrays of the AMS = false instance too)
            den = k_max(v, fresh ? (A)0 : in[AMS ? 4 : 3]);
            out[AMS ? 3 : 2] = den;
        }
        out[0] = x - (A)ss * m / (k_sqrt(den) / (A)bc2s + (A)eps);
        out[1] = m;
        out[2] = v;
    }
};

static tdm_status adam_launch(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                              tdm_tensor *v, tdm_tensor *vmax, const adam_fn<false> &f) {
    if (param->numel == 0) return TDM_OK;
    TDM_DISPATCH_FLOAT(param->dtype, "adam_step", T, {
        if (vmax) {
            map_ptrs<T, 5, 4> ptr = {
                {cptr<T>(param), cptr<T>(grad), cptr<T>(m), cptr<T>(v), cptr<T>(vmax)},
                {mptr<T>(param), mptr<T>(m), mptr<T>(v), mptr<T>(vmax)}};
            adam_fn<true> fa = {f.decay, f.wd, f.b1, f.b2, f.step_size, f.bc2_sqrt, f.eps,
                                f.decoupled, f.maximize, f.coef};
            return launch_map<T, 5, 4, adam_fn<true>, double>(param->numel, ptr, fa);
        }
        map_ptrs<T, 4, 3> ptr = {{cptr<T>(param), cptr<T>(grad), cptr<T>(m), cptr<T>(v)},
                                 {mptr<T>(param), mptr<T>(m), mptr<T>(v)}};
        return launch_map<T, 4, 3, adam_fn<false>, double>(param->numel, ptr, f);
    });
    return TDM_OK;
}

tdm_status cuda_adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                          tdm_tensor *v, tdm_tensor *vmax, int64_t step, const tdm_adam_params *p) {
    if (param->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(param));
    TDM_TRY(tdm_cuda_capture_refuse(cuda_stream_current(), param->device.index, "adam_step",
                                    "the step count is a kernel argument (for the bias "
                                    "corrections) that every replay would repeat; use "
                                    "tdm_optimizer_step, which reads it on the device"));
    const double bc1 = 1 - pow(p->beta1, (double)step), bc2 = 1 - pow(p->beta2, (double)step);
    adam_fn<false> f = {1 - p->lr * p->weight_decay, p->weight_decay, p->beta1, p->beta2,
                        p->lr / bc1, sqrt(bc2), p->eps, p->decoupled_weight_decay, p->maximize,
                        NULL};
    return adam_launch(param, grad, m, v, vmax, f);
}

tdm_status cuda_adam_step_dev(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                              tdm_tensor *v, tdm_tensor *vmax, const double *coef,
                              const tdm_adam_params *p) {
    if (param->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(param));
    adam_fn<false> f = {0, p->weight_decay, p->beta1, p->beta2, 0, 0, p->eps,
                        p->decoupled_weight_decay, p->maximize, coef};
    return adam_launch(param, grad, m, v, vmax, f);
}

// ---- adam / adamw over a list of tensors (adam_step_multi: fused=True, master weights) ------
// One launch for the whole list. Each tensor with elements is a row of a table in device memory
// and owns a run of consecutive blocks; a block finds its row by binary search over the rows'
// first blocks and runs adam_fn over its slice of that tensor, each element loaded and stored by
// its runtime dtype (any_ld / any_st: the same conversions as launch_map's ld and st<T>). The
// arithmetic is adam_fn's in f64, as adam_launch's: a fused step equals the per-tensor one bit
// for bit. With a master (f32 master weights of an f16/bf16 param; m, v, vmax f32): x is read
// from the master (from the param while fresh: a master made during a capture), the new x is
// stored to the master rounded to f32 and the param is that f32 value rounded to nearest even.
// The table reaches the device without a host wait: eagerly by an async copy from a pinned block
// (the host allocator keeps the block from reuse until the copy is done); under capture by
// captured k_write_bytes launches holding its bytes in their parameters (a pinned block would
// have to outlive the graph), the per-step values then read from coef.
// rows: (n) adam_row; in: param, grad, m, v[, vmax][, master]; out: param, m, v[, vmax][, master]
struct adam_row {
    void *param;
    const void *grad;
    void *m, *v, *vmax;        // vmax: amsgrad only
    float *master;             // NULL: none
    int64_t numel;
    unsigned block0, blocks;   // its blocks in the launch: [block0, block0 + blocks)
    int dt, sdt;               // param's (and grad's) dtype; the state's (f32 with a master)
    int64_t item;              // its index in the list: its coef row
    double step_size, bc2_sqrt, decay, wd;   // eager: adam_fn's arguments
};

struct adam_multi_args {
    double b1, b2, eps;
    bool decoupled, maximize;
    const double *coef;   // NULL: the rows' values; else 4 per item (cuda_adam_step_dev's)
};

template <bool AMS>
__global__ void k_adam_multi(const adam_row *rows, int n, adam_multi_args a) {
    int lo = 0, hi = n - 1;   // the last row whose first block is <= blockIdx.x
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (rows[mid].block0 <= blockIdx.x) lo = mid;
        else hi = mid - 1;
    }
    const adam_row r = rows[lo];
    const double *coef = a.coef ? a.coef + 4 * r.item : NULL;
    const adam_fn<AMS> f = {r.decay, r.wd,   a.b1,        a.b2,       r.step_size,
                            r.bc2_sqrt, a.eps, a.decoupled, a.maximize, coef};
    const bool fresh = coef && coef[3] != 0;
    const any_cptr pc = {r.param, r.dt}, gc = {r.grad, r.dt}, mc = {r.m, r.sdt};
    const any_cptr vc = {r.v, r.sdt}, xc = {r.vmax, r.sdt};
    const any_ptr pm = {r.param, r.dt}, mm = {r.m, r.sdt}, vm = {r.v, r.sdt};
    const any_ptr xm = {r.vmax, r.sdt};
    const int64_t stride = (int64_t)r.blocks * blockDim.x;
    for (int64_t i = (int64_t)(blockIdx.x - r.block0) * blockDim.x + threadIdx.x; i < r.numel;
         i += stride) {
        double in[5], out[4];
        in[0] = r.master && !fresh ? (double)r.master[i] : any_ld<double>(pc, i, 0.0);
        in[1] = any_ld<double>(gc, i, 0.0);
        in[2] = any_ld<double>(mc, i, 0.0);
        in[3] = any_ld<double>(vc, i, 0.0);
        in[4] = AMS ? any_ld<double>(xc, i, 0.0) : 0.0;
        f(i, in, out);
        if (r.master) {
            const float x = (float)out[0];
            r.master[i] = x;
            any_st<float>(pm, i, x);
        } else {
            any_st<double>(pm, i, out[0]);
        }
        any_st<double>(mm, i, out[1]);
        any_st<double>(vm, i, out[2]);
        if (AMS) any_st<double>(xm, i, out[3]);
    }
}

tdm_status cuda_adam_step_multi(const tdm_adam_item *items, int n, const tdm_adam_params *p,
                                const double *coef) {
    TDM_TRY(cuda_use_device(items[0].param));
    const int dev = items[0].param->device.index;
    cudaStream_t stream = cuda_stream_current();
    const bool capturing = tdm_cuda_stream_capturing(stream);
    if (capturing && !coef)
        return tdm_cuda_capture_refuse(stream, dev, "adam_step_multi", "the step counts are "
                                       "kernel arguments that every replay would repeat; use "
                                       "tdm_optimizer_step, which reads them on the device");
    const int threads = 256;
    const size_t bytes = (size_t)n * sizeof(adam_row);
    adam_row *rows = (adam_row *)(capturing ? malloc(bytes)
                                            : tdm_cuda_host_alloc(bytes, TDM_HOST_PINNED, dev));
    if (!rows)
        return capturing ? tdm_error_set(TDM_ERR_OOM, "adam_step_multi: out of host memory")
                         : tdm_last_status();
    int nr = 0;
    int64_t blocks = 0;
    for (int i = 0; i < n; i++) {
        const tdm_adam_item *it = &items[i];
        if (it->param->numel == 0) continue;
        const double bc1 = 1 - pow(p->beta1, (double)it->step);   // as cuda_adam_step's
        const double bc2 = 1 - pow(p->beta2, (double)it->step);
        const unsigned b = cuda_grid_blocks((it->param->numel + 3) / 4, threads);
        adam_row r = {tdm_data(it->param), tdm_data_c(it->grad), tdm_data(it->m), tdm_data(it->v),
                      it->vmax ? tdm_data(it->vmax) : NULL,
                      it->master ? (float *)tdm_data(it->master) : NULL, it->param->numel,
                      (unsigned)blocks, b, (int)it->param->dtype, (int)it->m->dtype, i,
                      it->lr / bc1, sqrt(bc2), 1 - it->lr * it->weight_decay, it->weight_decay};
        rows[nr++] = r;
        blocks += b;
    }
    tdm_status s = TDM_OK;
    if (blocks > 2147483647LL)
        s = tdm_error_set(TDM_ERR_ARG, "adam_step_multi: %lld blocks, more than a grid holds",
                          (long long)blocks);
    const int64_t words = (int64_t)((nr * sizeof(adam_row) + 7) / 8);
    tdm_tensor *table = s == TDM_OK && nr ? cuda_scratch(items[0].param, words, TDM_DTYPE_I64)
                                          : NULL;
    if (s == TDM_OK && nr && !table) s = tdm_last_status();
    const size_t used = (size_t)nr * sizeof(adam_row), piece = TDM_WRITE_ASYNC_MAX;
    for (size_t k = 0; table && capturing && k < used && s == TDM_OK; k += piece)
        s = cuda_write_async((char *)tdm_data(table) + k, (const char *)rows + k,
                             used - k < piece ? used - k : piece, dev);
    if (table && !capturing && s == TDM_OK)
        s = tdm_cuda_copy_async(tdm_data(table), rows, used, TDM_COPY_H2D, dev, dev, stream);
    if (capturing) free(rows);
    else tdm_cuda_host_free(rows, bytes, TDM_HOST_PINNED, dev);   // reused once copied
    if (table && s == TDM_OK) {
        const adam_multi_args a = {p->beta1, p->beta2, p->eps, p->decoupled_weight_decay,
                                   p->maximize, coef};
        const adam_row *t = (const adam_row *)tdm_data_c(table);
        const unsigned grid = (unsigned)blocks;
        if (p->amsgrad) TDM_LAUNCH(grid, threads, 0, stream, k_adam_multi<true>)(t, nr, a);
        else TDM_LAUNCH(grid, threads, 0, stream, k_adam_multi<false>)(t, nr, a);
        s = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(table);   // stream-ordered: after the launch that reads it
    return s;
}

// ---- grad scaler: unscale in place, flag non-finite ---------------------------------------------
// g = g * k, k = inv_scale rounded to g's dtype; the product is exact in A and rounds once, as the
// reference's. found_inf[0] (f32) = 1 when a rounded result is not finite (racing stores all
// write 1). k is rounded from the double straight to T, as the reference's round_to: through
// f32 first (f16/bf16) it could round twice (inv_scale 1 + 2^-11 + 2^-40: f16 1 + 2^-10 directly,
// 1 through f32).
template <typename T> struct unscale_fn {
    double k;
    float *found_inf;
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        const A r = ld(st<T>(in[0] * ld(st<T>(k))));
        if (!isfinite(r)) *found_inf = 1.0f;
        out[0] = r;
    }
};

tdm_status cuda_amp_unscale_check(tdm_tensor *const *grads, int n, double inv_scale,
                                  tdm_tensor *found_inf) {
    TDM_TRY(cuda_use_device(found_inf));
    for (int i = 0; i < n; i++) {
        tdm_tensor *g = grads[i];
        if (!g || g->numel == 0) continue;
        TDM_DISPATCH_FLOAT(g->dtype, "amp_unscale_check", T, {
            map_ptrs<T, 1, 1> ptr = {{cptr<T>(g)}, {mptr<T>(g)}};
            unscale_fn<T> f = {inv_scale, mptr<float>(found_inf)};
            TDM_TRY(launch_map(g->numel, ptr, f));
        });
    }
    return TDM_OK;
}

// ---- gradient clipping: total norm, then scale -------------------------------------------------
// grad_norm: each tensor's blocks reduce |x|^p (or max |x|) in its accumulation type (f32 for
// f16/bf16/f32, f64 for f64) over a grid-stride slice, one partial per block (stored as f64,
// exactly); one block then adds the partials in a fixed order in f64 and takes the root in f64:
// deterministic, no host wait (capturable). grad_clip_scale: c = min(max_norm / (total + 1e-6), 1)
// read from the f32 total on the device (a NaN total stays NaN: `c > 1 ? 1 : c`), x * c in f64,
// rounded once.

enum { NORM_TWO, NORM_ONE, NORM_INF, NORM_P };

__device__ __forceinline__ float k_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double k_pow(double a, double b) { return pow(a, b); }

// in: x (n elements); out: partial[blockIdx.x]
template <typename T, int MODE>
__global__ void k_norm_partial(const T *x, int64_t n, double p, double *partial) {
    typedef acc_t<T> A;
    __shared__ A sh[32];
    A acc = 0;
    GRID_STRIDE(i, n) {
        const A a = fabs(ld(x[i]));
        if (MODE == NORM_TWO) acc += a * a;
        else if (MODE == NORM_ONE) acc += a;
        else if (MODE == NORM_P) acc += k_pow(a, (A)p);
        else acc = k_max(acc, a);   // NaN wins
    }
    acc = MODE == NORM_INF ? block_max(acc, sh) : block_sum(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = (double)acc;
}

// in: partial (n); out: total[0] (f32) = the root of their sum (or their max)
template <int MODE>
__global__ void k_norm_finish(const double *partial, int64_t n, double p, float *total) {
    __shared__ double sh[32];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        acc = MODE == NORM_INF ? k_max(acc, partial[i]) : acc + partial[i];
    acc = MODE == NORM_INF ? block_max(acc, sh) : block_sum(acc, sh);
    if (threadIdx.x == 0)
        total[0] = (float)(MODE == NORM_TWO ? sqrt(acc) : MODE == NORM_P ? pow(acc, 1.0 / p) : acc);
}

template <int MODE>
static tdm_status norm_partial_launch(const tdm_tensor *t, unsigned blocks, int threads, double p,
                                      double *partial) {
    TDM_DISPATCH_FLOAT(t->dtype, "clip_grad_norm_", T, {
        TDM_LAUNCH(blocks, threads, 0, cuda_stream_current(), k_norm_partial<T, MODE>)
        (cptr<T>(t), t->numel, p, partial);
    });
    return CUDA_LAUNCH_CHECK();
}

template <int MODE>
static tdm_status norm_launch(const tdm_tensor *const *ts, int n, double p, tdm_tensor *total) {
    const int threads = 256;
    int64_t parts = 0;
    for (int j = 0; j < n; j++)
        if (ts[j]->numel) parts += cuda_grid_blocks(ts[j]->numel, threads);
    tdm_tensor *partial = cuda_scratch(total, parts, TDM_DTYPE_F64);
    if (!partial) return tdm_last_status();
    double *pp = mptr<double>(partial);
    tdm_status s = TDM_OK;
    int64_t at = 0;
    for (int j = 0; j < n && s == TDM_OK; j++) {
        if (!ts[j]->numel) continue;
        const unsigned blocks = cuda_grid_blocks(ts[j]->numel, threads);
        s = norm_partial_launch<MODE>(ts[j], blocks, threads, p, pp + at);
        at += blocks;
    }
    if (s == TDM_OK) {
        TDM_LAUNCH(1, threads, 0, cuda_stream_current(), k_norm_finish<MODE>)
        (pp, parts, p, mptr<float>(total));
        s = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(partial);   // stream-ordered: after the launches that read it
    return s;
}

tdm_status cuda_grad_norm(const tdm_tensor *const *ts, int n, double norm_type,
                          tdm_tensor *total) {
    TDM_TRY(cuda_use_device(total));
    if (isinf(norm_type)) return norm_launch<NORM_INF>(ts, n, norm_type, total);
    if (norm_type == 2) return norm_launch<NORM_TWO>(ts, n, norm_type, total);
    if (norm_type == 1) return norm_launch<NORM_ONE>(ts, n, norm_type, total);
    return norm_launch<NORM_P>(ts, n, norm_type, total);
}

struct clip_fn {
    double max_norm;
    const float *total;
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        double c = max_norm / ((double)total[0] + 1e-6);
        c = c > 1.0 ? 1.0 : c;   // NaN stays NaN, as torch.clamp(max=1)
        out[0] = in[0] * (A)c;
    }
};

tdm_status cuda_grad_clip_scale(tdm_tensor *const *ts, int n, double max_norm,
                                const tdm_tensor *total) {
    TDM_TRY(cuda_use_device(total));
    for (int j = 0; j < n; j++) {
        tdm_tensor *g = ts[j];
        TDM_DISPATCH_FLOAT(g->dtype, "clip_grad_norm_", T, {
            map_ptrs<T, 1, 1> ptr = {{cptr<T>(g)}, {mptr<T>(g)}};
            clip_fn f = {max_norm, cptr<float>(total)};
            TDM_TRY((launch_map<T, 1, 1, clip_fn, double>(g->numel, ptr, f)));
        });
    }
    return TDM_OK;
}

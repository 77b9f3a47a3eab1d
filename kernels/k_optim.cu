/* k_optim.cu — the fused optimizer updates (one pass over param, grad and state per parameter,
 * torch.optim's single-tensor formulas as ref/ref_optim.c writes them), the grad scaler's
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

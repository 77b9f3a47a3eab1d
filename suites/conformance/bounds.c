/* bounds.c — the tolerance of every comparison, derived from rounding-error analysis, never tuned.
 * One place for every op's rule; docs/CONFORMANCE.md explains each derivation.
 *
 * For element i of an expected tensor e (exact, or nearly: PyTorch in float64):
 *
 *     bound_i = err_i + (u_out + u_exp) * |e_i| + eta_out
 *
 * err_i     the error of the computation before its final rounding, with accumulation unit
 *           roundoff u (f32's 2^-24 for f32/f16/bf16, f64's for f64): the op's rule below;
 * u_out     the final rounding to the output dtype (2^-24 f32, 2^-11 f16, 2^-8 bf16);
 * u_exp     the rounding of the stored expected value (0 in practice: stored as f64);
 * eta_out   the absolute spacing near zero of the output dtype (underflow).
 *
 * Multilinear ops (linear, matmul, conv2d, avg_pool2d, add, mul, sum, mean, embedding backward,
 * max_pool2d backward) use the classic bound gamma_n * M with gamma_n = n u / (1 - n u), n the
 * number of roundings on the longest path (the reduction length plus the epilogue), and
 * M = the same computation on absolute values (sum |a_i| |b_i|), which the reference evaluates
 * by running the case in f64 on |inputs|. The other ops propagate each rounding (u per + - * /,
 * 2 ulp = 4u per exp, log, tanh, erf, rsqrt, as CUDA's libdevice and glibc guarantee) through
 * the formula, written out per op below. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "tandem/backends.h"
#include "core/philox.h"
#include "core/tensor_impl.h"

#define FN_ERR 4.0   // a library function's error, in units of u: 2 ulp

typedef struct {
    const tdm_case *c;
    bool grad;
    int k;
    int64_t n;          // numel of the expected tensor
    double u;           // unit roundoff of the accumulation
    double u_in;        // unit roundoff of the case dtype (outputs fed back into a backward)
    double eta_in;      // and its absolute rounding near zero (half its subnormal spacing)
    double u_tf32;      // > 0: f32 inputs of a product are rounded to TF32 first (TF32_U)
    tdm_device dev;     // where the case runs (the fused attention is the CUDA backend's)
    const double *e;    // expected values
    double *err;        // out: err_i
} bctx;

static double gamma_n(double n, double u) { return n * u / (1.0 - n * u); }

// TF32 keeps 10 of f32's 23 mantissa bits: rounding to nearest gives u = 2^-11; NVIDIA does not
// document the rounding of the tensor cores' f32 -> TF32 conversion, so the bound allows
// truncation too (relative error < 2^-10). See docs/CONFORMANCE.md, "TF32".
#define TF32_U (1.0 / 1024.0)

// ---- helpers ----------------------------------------------------------------------------------

static const int64_t *shape_of(const tdm_tensor *t) { return tdm_tensor_shape(t); }

// n doubles, zeroed. Scratch is sized from the dims a case file chose (a zero-size input may
// have huge other dims), so the size is checked against the allocation cap and the machine's
// memory first. NULL with the error set.
static double *scratch(int64_t n) {
    if (tdm_alloc_check("bound scratch", n ? n : 1, sizeof(double), true) != TDM_OK) return NULL;
    double *v = calloc((size_t)(n ? n : 1), sizeof(double));
    if (!v) tdm_error_set(TDM_ERR_OOM, "bound: out of memory");
    return v;
}

// The status of a failed load() or scratch(): their error when they set one (the cap's message),
// else out of memory.
static tdm_status bound_oom(void) {
    tdm_status s = tdm_last_status();
    return s != TDM_OK ? s : tdm_error_set(TDM_ERR_OOM, "bound: out of memory");
}

// t's values as doubles on the host; NULL for a NULL t, or with the error set.
static double *load(const tdm_tensor *t) {
    if (!t) return NULL;
    double *v = scratch(tdm_tensor_numel(t));
    if (v && tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        free(v);
        return NULL;
    }
    return v;
}

// The case on |inputs| and |grad_output| (inputs in `keep_sign` keep theirs), in f64 on the cpu:
// its outputs are the magnitudes M of a multilinear op.
static tdm_status abs_run(const tdm_case *c, unsigned keep_sign, tdm_case_result *r) {
    tdm_case a;
    memset(&a, 0, sizeof a);
    snprintf(a.op, sizeof a.op, "%s", c->op);
    snprintf(a.path, sizeof a.path, "%.480s (abs)", c->path);
    a.attrs = cJSON_Duplicate(c->attrs, 1);
    cJSON *alpha = cJSON_GetObjectItemCaseSensitive(a.attrs, "alpha");
    if (cJSON_IsNumber(alpha)) cJSON_SetNumberValue(alpha, fabs(alpha->valuedouble));
    a.dtype = TDM_DTYPE_F64;
    tdm_status s = TDM_OK;
    for (int i = 0; i < TDM_CASE_MAX && s == TDM_OK; i++) {
        const tdm_tensor *src[2] = {c->input[i], c->grad_output[i]};
        tdm_tensor **dst[2] = {&a.input[i], &a.grad_output[i]};
        for (int j = 0; j < 2 && s == TDM_OK; j++) {
            if (!src[j]) continue;
            bool fl = tdm_dtype_is_float(tdm_tensor_dtype(src[j]));
            *dst[j] = tdm_tensor_to(src[j], TDM_CPU, fl ? TDM_DTYPE_F64 : tdm_tensor_dtype(src[j]));
            if (!*dst[j]) {
                s = tdm_last_status();
                break;
            }
            if (fl && !(j == 0 && (keep_sign >> i & 1))) {
                double *v = tdm_tensor_data(*dst[j]);
                for (int64_t q = 0; q < tdm_tensor_numel(*dst[j]); q++) v[q] = fabs(v[q]);
            }
        }
    }
    if (s == TDM_OK) s = tdm_case_run(&a, TDM_CPU, r);
    for (int i = 0; i < TDM_CASE_MAX; i++) {
        tdm_tensor_free(a.input[i]);
        tdm_tensor_free(a.grad_output[i]);
    }
    cJSON_Delete(a.attrs);
    return s;
}

// A product's gamma_n: n roundings in the accumulation. TF32: each product a~ b~ of inputs
// rounded to TF32 is within (1+u_t)^2 - 1 of a b, then summed in f32:
// |err| <= ((1+u_t)^2 (1+gamma_n) - 1) M.
static double product_gamma(const bctx *b, double n) {
    const double g = gamma_n(n, b->u);
    return b->u_tf32 > 0 ? (1 + b->u_tf32) * (1 + b->u_tf32) * (1 + g) - 1 : g;
}

// err = gamma_n * M for a multilinear op, M from the absolute-value run.
static tdm_status multilinear(bctx *b, double n, unsigned keep_sign) {
    tdm_case_result r;
    TDM_TRY(abs_run(b->c, keep_sign, &r));
    const tdm_tensor *m = b->grad ? r.grad_input[b->k] : r.output[b->k];
    double *M = m && tdm_tensor_numel(m) == b->n ? load(m) : NULL;
    tdm_case_result_free(&r);
    if (!M) return tdm_error_set(TDM_ERR_BACKEND, "%s: bound: no magnitude for %s.%d", b->c->path,
                                 b->grad ? "grad_input" : "output", b->k);
    const double g = product_gamma(b, n);
    for (int64_t i = 0; i < b->n; i++) b->err[i] = g * M[i];
    free(M);
    return TDM_OK;
}

// The rows of a (rows..., width) operand: the product of its dims but the last. Not its numel
// over its width: with a width of 0 that is 0 whatever the rows, and a bound sized from it reads
// the output's rows past its scratch.
static int64_t lead_rows(const tdm_tensor *t) {
    return tdm_shape_numel(tdm_tensor_ndim(t) - 1, shape_of(t));
}

static int64_t in_numel(const bctx *b, int i) {
    return b->c->input[i] ? tdm_tensor_numel(b->c->input[i]) : 0;
}

// GELU's tanh form evaluated in floating point at x: the error of y = 0.5 x (1 + tanh(w)),
// w = sqrt(2/pi) (x + 0.044715 x^3), and of its derivative d (with *d set), in units of u.
static double gelu_tanh_err(double x, bool grad, double *d) {
    const double kk = sqrt(2.0 / M_PI);
    double w = kk * (x + 0.044715 * x * x * x), t = tanh(w);
    double dw = 4 * kk * (fabs(x) + 0.044715 * fabs(x * x * x));   // inner, units of u
    double dt = FN_ERR * fabs(t) + (1 - t * t) * dw;
    double q = kk * (1 + 3 * 0.044715 * x * x);
    double dv = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * q;
    if (d) *d = dv;
    if (!grad) return 0.5 * fabs(x) * (dt + 1 + fabs(t)) + 2 * fabs(0.5 * x * (1 + t));
    return 0.5 * (1 + fabs(t)) + 0.5 * dt + 0.5 * fabs(x) * q * (2 * fabs(t) * dt + 6 * (1 - t * t)) +
           2 * fabs(dv);
}

// ---- multilinear ops --------------------------------------------------------------------------

static tdm_status bound_linear(bctx *b) {
    const tdm_tensor *x = b->c->input[0], *w = b->c->input[1];
    int64_t in = shape_of(w)[1], out = shape_of(w)[0], rows = lead_rows(x);
    if (!b->grad) return multilinear(b, (double)in + 1, 0);   // dot of length in, + bias
    return multilinear(b, b->k == 0 ? (double)out : (double)rows, 0);
}

// torch.matmul: a 1-D a is (1,k), a 1-D b (k,1); batch dims broadcast (ops.h).
static tdm_status bound_matmul(bctx *b) {
    const tdm_tensor *A = b->c->input[0], *B = b->c->input[1];
    const int na = tdm_tensor_ndim(A), nb = tdm_tensor_ndim(B);
    const int64_t *sa = shape_of(A), *sb = shape_of(B);
    const int64_t kdim = sa[na - 1], n = na > 1 ? sa[na - 2] : 1, m = nb > 1 ? sb[nb - 1] : 1;
    // the broadcast batch, and each operand's own batch (the product of its dims before the
    // last two)
    const int la = na > 2 ? na - 2 : 0, lb = nb > 2 ? nb - 2 : 0, l = la > lb ? la : lb;
    int64_t batch = 1, ab = 1, bb = 1;
    for (int d = 0; d < l; d++) {
        const int da = d - (l - la), db = d - (l - lb);
        const int64_t x = da >= 0 ? sa[da] : 1, y = db >= 0 ? sb[db] : 1;
        batch *= x == 1 ? y : x;
        ab *= x;
        bb *= y;
    }
    if (!b->grad) return multilinear(b, (double)kdim, 0);
    // ga = gy b^T sums over m and over the batch copies a was broadcast to; gb likewise over n.
    if (b->k == 0) return multilinear(b, (double)m * (double)(ab ? batch / ab : 0), 0);
    return multilinear(b, (double)n * (double)(bb ? batch / bb : 0), 0);
}

// linear_gelu_linear: y = linear(gelu_tanh(linear(x, w1, b1)), w2, b2), x (rows,in), w1
// (hid,in), w2 (out,hid). The three ops round P = x w1^T + b1, H = gelu(P) and, backward,
// GH = gy w2 to the dtype (u_in); the CUDA backend's cuBLASLt epilogues skip the first and the
// last of these, so the bound of the three ops covers both (docs/CONFORMANCE.md). Per element,
// S1 = |x||w1|^T + |b1|, G1 = |gy||w2|, |gelu'| <= 1.13, |gelu''| <= 0.80:
//   eP  = gamma_(in+1) S1 + u_in |P|
//   eH  = 1.13 eP + u gelu_tanh_err(P) + u_in |H|
//   y:    |w2| eH + gamma_(hid+1) (|H||w2|^T + |b2|)
//   eGH = gamma_out G1 + u_in |GH|;  GP = GH gelu'(P)
//   eGP = 1.13 eGH + G1 (0.80 eP + u gelu_tanh_err'(P)) + u_in |GP|
//   gx:   eGP |w1| + gamma_hid |GP||w1|;  gw1, gb1: eGP^T |x|, sum eGP + gamma_rows (...)
//   gw2:  |gy|^T eH + gamma_rows |gy|^T |H|;  gb2: gamma_rows sum |gy|
static tdm_status bound_linear_gelu_linear(bctx *b) {
    const tdm_case *c = b->c;
    const int64_t in = shape_of(c->input[1])[1], hid = shape_of(c->input[1])[0];
    const int64_t out = shape_of(c->input[3])[0];
    const int64_t rows = lead_rows(c->input[0]);
    double *x = load(c->input[0]), *w1 = load(c->input[1]), *b1 = load(c->input[2]);
    double *w2 = load(c->input[3]), *b2 = load(c->input[4]);
    double *gy = b->grad ? load(c->grad_output[0]) : NULL;
    int64_t rh;
    if (__builtin_mul_overflow(rows, hid, &rh))   // the case format bounds it; the API does not
        return tdm_error_set(TDM_ERR_OOM, "%s: bound: %lld rows of %lld hidden units are too many",
                             c->path, (long long)rows, (long long)hid);
    double *P = scratch(rh), *eP = scratch(rh), *H = scratch(rh), *eH = scratch(rh);
    double *GP = b->grad ? scratch(rh) : NULL, *eGP = b->grad ? scratch(rh) : NULL;
    double *all[] = {x, w1, b1, w2, b2, gy, P, eP, H, eH, GP, eGP};
    bool ok = x && w1 && (b1 || !c->input[2]) && w2 && (b2 || !c->input[4]) &&
              (gy || !b->grad) && P && eP && H && eH && (!b->grad || (GP && eGP));
    const double u = b->u, ui = b->u_in;
    for (int64_t r = 0; ok && r < rows; r++)
        for (int64_t j = 0; j < hid; j++) {
            double p = b1 ? b1[j] : 0, s1 = b1 ? fabs(b1[j]) : 0;
            for (int64_t k = 0; k < in; k++) {
                p += x[r * in + k] * w1[j * in + k];
                s1 += fabs(x[r * in + k] * w1[j * in + k]);
            }
            const int64_t i = r * hid + j;
            double d;
            P[i] = p;
            eP[i] = product_gamma(b, (double)in + 1) * s1 + ui * fabs(p);
            H[i] = 0.5 * p * (1 + tanh(sqrt(2.0 / M_PI) * (p + 0.044715 * p * p * p)));
            eH[i] = 1.13 * eP[i] + u * gelu_tanh_err(p, false, &d) + ui * fabs(H[i]);
            if (!b->grad) continue;
            double gh = 0, g1 = 0;
            for (int64_t o = 0; o < out; o++) {
                gh += gy[r * out + o] * w2[o * hid + j];
                g1 += fabs(gy[r * out + o] * w2[o * hid + j]);
            }
            const double egh = product_gamma(b, (double)out) * g1 + ui * fabs(gh);
            GP[i] = gh * d;
            eGP[i] = 1.13 * egh + g1 * (0.80 * eP[i] + u * gelu_tanh_err(p, true, NULL)) +
                     ui * fabs(GP[i]);
        }
    for (int64_t i = 0; ok && i < b->n; i++) {
        double e = 0, m = 0;   // the propagated error, and the product's magnitude
        if (!b->grad) {        // y (rows, out)
            const int64_t r = i / out, o = i % out;
            m = b2 ? fabs(b2[o]) : 0;
            for (int64_t j = 0; j < hid; j++) {
                e += fabs(w2[o * hid + j]) * eH[r * hid + j];
                m += fabs(H[r * hid + j] * w2[o * hid + j]);
            }
            b->err[i] = e + product_gamma(b, (double)hid + 1) * m;
            continue;
        }
        switch (b->k) {
        case 0: {   // gx (rows, in) = GP w1
            const int64_t r = i / in, k = i % in;
            for (int64_t j = 0; j < hid; j++) {
                e += eGP[r * hid + j] * fabs(w1[j * in + k]);
                m += fabs(GP[r * hid + j] * w1[j * in + k]);
            }
            b->err[i] = e + product_gamma(b, (double)hid) * m;
            break;
        }
        case 1: case 2: {   // gw1 (hid, in) = GP^T x; gb1 (hid) = sum over rows of GP
            const int64_t j = b->k == 1 ? i / in : i, k = b->k == 1 ? i % in : -1;
            for (int64_t r = 0; r < rows; r++) {
                const double xv = k >= 0 ? fabs(x[r * in + k]) : 1.0;
                e += eGP[r * hid + j] * xv;
                m += fabs(GP[r * hid + j]) * xv;
            }
            b->err[i] = e + product_gamma(b, (double)rows) * m;
            break;
        }
        default: {   // gw2 (out, hid) = gy^T H; gb2 (out) = sum over rows of gy
            const int64_t o = b->k == 3 ? i / hid : i, j = b->k == 3 ? i % hid : -1;
            for (int64_t r = 0; r < rows; r++) {
                const double g = fabs(gy[r * out + o]);
                e += j >= 0 ? g * eH[r * hid + j] : 0;
                m += j >= 0 ? g * fabs(H[r * hid + j]) : g;
            }
            b->err[i] = e + product_gamma(b, (double)rows) * m;
        }
        }
    }
    for (size_t q = 0; q < sizeof all / sizeof *all; q++) free(all[q]);
    return ok ? TDM_OK : bound_oom();
}

static tdm_status bound_conv2d(bctx *b) {
    const tdm_tensor *w = b->c->input[1];
    const int64_t *ws = shape_of(w);
    int64_t groups;
    TDM_TRY(tdm_attr_int(b->c, "groups", 1, &groups));
    if (!b->grad) return multilinear(b, (double)(ws[1] * ws[2] * ws[3]) + 1, 0);
    if (b->k == 0) return multilinear(b, (double)(ws[0] / (groups ? groups : 1) * ws[2] * ws[3]), 0);
    // grad weight and bias sum over every output position of every sample.
    // (N, O, H, W) or unbatched (O, H, W): every dim but O's (not numel / O: O may be 0)
    const tdm_tensor *gy = b->c->grad_output[0];
    const int nd = tdm_tensor_ndim(gy), ch = nd == 4 ? 1 : 0;
    int64_t positions = 1;
    for (int d = 0; d < nd; d++)
        if (d != ch) positions *= shape_of(gy)[d];
    return multilinear(b, (double)positions, 0);
}

static int gcd_int(int a, int b) { return b ? gcd_int(b, a % b) : a; }

// Along one axis, the windows that hold a given input are those whose tap t < k satisfies
// o*s = i + p - t*d: the t in one residue class of t*d mod s, whose period is s / gcd(s, d), so
// at most ceil(k / (s / gcd(s, d))) of them (ceil(k/s) without dilation). E.g. k=5, s=2, d=2:
// all 5 taps land on outputs, where ceil(k/s) = 3 would undercount.
static tdm_status pool_windows(const tdm_case *c, double *per_window, double *overlap) {
    int k[2], s[2], d[2];
    TDM_TRY(tdm_attr_pair(c, "kernel_size", (int[2]){1, 1}, k));
    TDM_TRY(tdm_attr_pair(c, "stride", k, s));
    TDM_TRY(tdm_attr_pair(c, "dilation", (int[2]){1, 1}, d));
    *per_window = (double)k[0] * k[1];
    *overlap = 1;
    for (int a = 0; a < 2; a++) {
        int period = s[a] > 0 && d[a] > 0 ? s[a] / gcd_int(s[a], d[a]) : 1;
        *overlap *= ceil((double)k[a] / period);
    }
    return TDM_OK;
}

static tdm_status bound_avg_pool2d(bctx *b) {
    double win, overlap;
    TDM_TRY(pool_windows(b->c, &win, &overlap));
    return multilinear(b, b->grad ? overlap + 1 : win + 1, 0);   // + the division
}

static tdm_status bound_max_pool2d(bctx *b) {
    if (!b->grad) return TDM_OK;   // a selection: exact
    double win, overlap;
    TDM_TRY(pool_windows(b->c, &win, &overlap));
    return multilinear(b, overlap, 1u);   // x keeps its sign: it picks the maxima
}

static tdm_status bound_scalar(bctx *b);

static tdm_status bound_add_mul(bctx *b) {
    if (tdm_attr_present(b->c, "other")) return bound_scalar(b);   // a tensor and a number
    if (!b->grad) return multilinear(b, 2, 0);   // a + alpha*b: two roundings
    int64_t summed = tdm_tensor_numel(b->c->grad_output[0]) / (in_numel(b, b->k) ? in_numel(b, b->k) : 1);
    return multilinear(b, (double)summed + 1, 0);
}

// A tensor a and a number s (add, sub, rsub, mul, div, rdiv with attr `other`), computed in the
// accumulation type from s rounded to it (u) and, for an integer a, from a rounded to f32 (u
// more): n roundings on M, one of them the op's. Forward: a +- s n = 2 on |a| + |s|; a s n = 2
// on |a s|; a / s, s / a n = 3 on |a / s|, |s / a| (PyTorch's CUDA divides by multiplying with
// the reciprocal: one more). Backward: +-gy exact; gy s n = 2; gy / s n = 3; -(gy s / a) / a
// n = 4 on |gy s| / a^2.
static tdm_status bound_scalar(bctx *b) {
    const char *op = b->c->op;
    double s;
    TDM_TRY(tdm_attr_double(b->c, "other", 0.0, &s));
    const bool add = !strcmp(op, "add") || !strcmp(op, "sub") || !strcmp(op, "rsub");
    const bool mul = !strcmp(op, "mul"), div = !strcmp(op, "div");
    const tdm_tensor *in = b->c->input[0];
    const bool int_in = in && !tdm_dtype_is_float(tdm_tensor_dtype(in));
    if (b->grad && add) return TDM_OK;   // +-gy: exact
    double *a = load(in), *gy = b->grad ? load(b->c->grad_output[0]) : NULL;
    if (!a || (b->grad && !gy)) {
        free(a);
        free(gy);
        return bound_oom();
    }
    const double n = (b->grad ? (mul ? 2 : div ? 3 : 4) : (add || mul ? 2 : 3)) + (int_in ? 1 : 0);
    const double g = gamma_n(n, b->u);
    for (int64_t i = 0; i < b->n; i++) {
        double M;
        if (b->grad)
            M = mul ? fabs(gy[i] * s) : div ? fabs(gy[i] / s) : fabs(gy[i] * s) / (a[i] * a[i]);
        else
            M = add ? fabs(a[i]) + fabs(s) : mul ? fabs(a[i] * s)
                : div ? fabs(a[i] / s) : fabs(s / a[i]);
        b->err[i] = g * M;
    }
    free(a);
    free(gy);
    return TDM_OK;
}

static tdm_status bound_sum_mean(bctx *b) {
    int64_t reduced = in_numel(b, 0) / (b->n ? b->n : 1);
    if (b->grad) return multilinear(b, 1, 0);   // gy * (1 or 1/count)
    return multilinear(b, (double)reduced + 1, 0);
}

static tdm_status bound_embedding(bctx *b) {
    if (!b->grad) return TDM_OK;   // a gather: exact
    return multilinear(b, (double)in_numel(b, 0), 0);   // scatter-add of at most every index
}

static tdm_status bound_dropout(bctx *b) {
    for (int64_t i = 0; i < b->n; i++) b->err[i] = 2 * b->u * fabs(b->e[i]);   // 1/(1-p), x*scale
    return TDM_OK;
}

static tdm_status bound_exact(bctx *b) {   // relu forward and backward: selections
    (void)b;
    return TDM_OK;
}

static tdm_status bound_mse(bctx *b) {
    // forward: d = a-b, d^2, a sum of n terms (+ the division): gamma_{n+3} * sum d^2 = |e|-scaled
    char red[64];
    TDM_TRY(tdm_attr_string(b->c, "reduction", "mean", red));
    double n = strcmp(red, "none") ? (double)in_numel(b, 0) : 1.0;
    double g = gamma_n(b->grad ? 4 : n + 3, b->u);
    for (int64_t i = 0; i < b->n; i++) b->err[i] = g * fabs(b->e[i]);
    return TDM_OK;
}

// ---- activations --------------------------------------------------------------------------------
// x from input.0, gy from grad_output.0; each rule is the propagated error of the formula the
// op computes, in units of u (written as u * (...)).

static tdm_status bound_unary(bctx *b) {
    double *x = load(b->c->input[0]), *gy = b->grad ? load(b->c->grad_output[0]) : NULL;
    if (!x || (b->grad && !gy)) {
        free(x);
        free(gy);
        return bound_oom();
    }
    const char *op = b->c->op;
    char approx[64] = "none";
    if (!strcmp(op, "gelu")) TDM_TRY(tdm_attr_string(b->c, "approximate", "none", approx));
    const double u = b->u;
    for (int64_t i = 0; i < b->n; i++) {
        double xi = x[i], g = b->grad ? fabs(gy[i]) : 1.0, err;
        if (!strcmp(op, "tanh")) {
            double t = tanh(xi);
            // y = tanh(x): 2 ulp. dy = gy (1 - t^2): t carries 4u, t^2 and 1-t^2 one each.
            err = b->grad ? u * g * (9 * t * t + 2 * fabs(1 - t * t)) : FN_ERR * u * fabs(t);
        } else if (!strcmp(op, "sigmoid")) {
            double s = 1.0 / (1.0 + exp(-xi));
            // s = 1/(1+exp(-x)): exp 4u, + and / one each: 6u relative.
            err = b->grad ? u * g * s * (9 * fabs(1 - s) + 6 * s) : 6 * u * s;
        } else if (!strcmp(approx, "tanh")) {
            err = u * g * gelu_tanh_err(xi, b->grad, NULL);
        } else {   // exact gelu: 0.5 x (1 + erf(x/sqrt2))
            double z = xi * M_SQRT1_2, ef = erf(z);
            double dphi2 = 5 * fabs(ef) + 1 + M_2_SQRTPI * fabs(z) * exp(-z * z);   // 1+erf, in u
            if (!b->grad) {
                err = u * (0.5 * fabs(xi) * dphi2 + 2 * fabs(0.5 * xi * (1 + ef)));
            } else {
                double xphi = xi * exp(-0.5 * xi * xi) / sqrt(2 * M_PI);
                double d = 0.5 * (1 + ef) + xphi;
                err = u * g * (0.5 * dphi2 + fabs(xphi) * (7 + xi * xi) + 2 * fabs(d));
            }
        }
        b->err[i] = err;
    }
    free(x);
    free(gy);
    return TDM_OK;
}

// ---- softmax, log_softmax, cross_entropy ----------------------------------------------------------
// Rows along `dim`: element (outer o, j, inner q) at o*n*inner + j*inner + q.

typedef struct {
    int64_t outer, n, inner;
} rows3;

static rows3 rows_along(const tdm_tensor *t, int dim) {
    rows3 r = {1, 1, 1};
    int nd = tdm_tensor_ndim(t);
    for (int d = 0; d < nd; d++) {
        if (d < dim) r.outer *= shape_of(t)[d];
        else if (d == dim) r.n = shape_of(t)[d];
        else r.inner *= shape_of(t)[d];
    }
    return r;
}

// Per element of one row (stride `st`): y = softmax, my = the forward error of softmax (units
// of u) or of log_softmax, and log S.
static void softmax_row(const double *x, int64_t n, int64_t st, bool log_out, double *y, double *my) {
    double m = -INFINITY, S = 0, spread = 0;
    for (int64_t j = 0; j < n; j++) m = fmax(m, x[j * st]);
    for (int64_t j = 0; j < n; j++) {
        S += exp(x[j * st] - m);
        spread = fmax(spread, fabs(x[j * st] - m));
    }
    double logS = log(S);
    for (int64_t j = 0; j < n; j++) {
        double d = fabs(x[j * st] - m), p = exp(x[j * st] - m) / S;
        // e_j = exp(x_j - m): (4 + |x_j - m|) u relative; S: + (n + max|x - m|) u; /: + u
        if (!log_out) {
            y[j] = p;
            my[j] = p * (n + 9 + d + spread);
        } else {
            y[j] = x[j * st] - m - logS;
            my[j] = d + n + 4 + spread + FN_ERR * fabs(logS) + fabs(y[j]);
        }
    }
}

static tdm_status bound_softmax(bctx *b) {
    bool log_out = !strcmp(b->c->op, "log_softmax");
    const tdm_tensor *xt = b->c->input[0];
    int64_t dim64;
    TDM_TRY(tdm_attr_int(b->c, "dim", 0, &dim64));
    int dim;
    TDM_TRY(tdm_wrap_dim("softmax", (int)dim64, tdm_tensor_ndim(xt), &dim));
    rows3 R = rows_along(xt, tdm_tensor_ndim(xt) ? dim : 0);
    double *x = load(xt), *gy = b->grad ? load(b->c->grad_output[0]) : NULL;
    double *y = scratch(R.n), *my = scratch(R.n);
    if (!x || !y || !my || (b->grad && !gy)) {
        free(x); free(gy); free(y); free(my);
        return bound_oom();
    }
    const double u = b->u;
    for (int64_t o = 0; o < R.outer; o++) {
        for (int64_t q = 0; q < R.inner; q++) {
            int64_t base = o * R.n * R.inner + q;
            softmax_row(x + base, R.n, R.inner, log_out, y, my);
            if (!b->grad) {
                for (int64_t j = 0; j < R.n; j++) b->err[base + j * R.inner] = u * my[j];
                continue;
            }
            // The backward reads the forward output y as the case ran it: its forward error plus
            // its rounding to the case dtype, dy_j = u my_j + u_in |y_j| + eta_in.
            double D = 0, Dabs = 0, G = 0, Gabs = 0, gdy = 0;
            for (int64_t j = 0; j < R.n; j++) {
                double g = gy[base + j * R.inner], dy = u * my[j] + b->u_in * fabs(y[j]) + b->eta_in;
                D += g * y[j];
                Dabs += fabs(g * y[j]);
                G += g;
                Gabs += fabs(g);
                gdy += fabs(g) * dy;
            }
            for (int64_t j = 0; j < R.n; j++) {
                double g = gy[base + j * R.inner], dy = u * my[j] + b->u_in * fabs(y[j]) + b->eta_in, err;
                if (!log_out) {   // gx = y (gy - D), D = sum gy y
                    double inner = fabs(g - D);
                    err = dy * inner + y[j] * (gdy + gamma_n((double)R.n, u) * Dabs + u * inner) +
                          u * fabs(y[j]) * inner;
                } else {          // gx = gy - exp(y) G
                    double p = exp(y[j]);
                    err = p * fabs(G) * ((FN_ERR + 1) * u + dy) + p * gamma_n((double)R.n, u) * Gabs +
                          u * fabs(g - p * G);
                }
                b->err[base + j * R.inner] = err;
            }
        }
    }
    free(x); free(gy); free(y); free(my);
    return TDM_OK;
}

// cross_entropy (ops.h): rows along the class dim (1, or 0 unbatched), row r = (o, q) of
// rows_along; each row's target distribution tau (the reference's ce_tau) and loss
// sum_c tau_c (-log p_c).
static tdm_status bound_cross_entropy(bctx *b) {
    const tdm_tensor *lt = b->c->input[0], *tt = b->c->input[1], *wt = b->c->input[2];
    char red[64];
    double eps;
    int64_t ignore;
    TDM_TRY(tdm_attr_string(b->c, "reduction", "mean", red));
    TDM_TRY(tdm_attr_double(b->c, "label_smoothing", 0.0, &eps));
    TDM_TRY(tdm_attr_int(b->c, "ignore_index", -100, &ignore));
    const bool probs = tdm_dtype_is_float(tdm_tensor_dtype(tt));
    rows3 R = rows_along(lt, tdm_tensor_ndim(lt) > 1 ? 1 : 0);
    const int64_t C = R.n, st = R.inner, nrows = R.outer * R.inner;
    double *x = load(lt), *t = load(tt), *w = wt ? load(wt) : NULL;
    double *gy = b->grad ? load(b->c->grad_output[0]) : NULL;
    double *y = scratch(C), *my = scratch(C), *p = scratch(C), *mp = scratch(C), *tau = scratch(C);
    if (!x || !t || (wt && !w) || !y || !my || !p || !mp || !tau || (b->grad && !gy)) {
        free(x); free(t); free(w); free(gy); free(y); free(my); free(p); free(mp); free(tau);
        return bound_oom();
    }
    const double u = b->u;
    const bool none = !strcmp(red, "none"), mean = !strcmp(red, "mean");
    // The mean's divisor: sum of w_t over the rows kept (class indices), or the row count, summed
    // in f64 by the backends (exact for counts; ~R 2^-53 relative with weights: no term here).
    double divisor = 0;
    for (int64_t r = 0; r < nrows; r++)
        divisor += probs ? 1.0 : t[r] == (double)ignore ? 0.0 : w ? w[(int64_t)t[r]] : 1.0;
    double total_err = 0, total_abs = 0;
    for (int64_t o = 0; o < R.outer; o++) {
        for (int64_t q = 0; q < R.inner; q++) {
            const int64_t r = o * R.inner + q, base = o * C * R.inner + q;
            const bool ign = !probs && t[r] == (double)ignore;
            const int64_t ti = probs || ign ? -1 : (int64_t)t[r];
            double S = 0, Sabs = 0;
            for (int64_t c = 0; c < C; c++) {
                const double wc = w ? w[c] : 1.0;
                tau[c] = ign     ? 0.0
                         : probs ? wc * ((1 - eps) * t[base + c * st] + eps / C)
                                 : (c == ti ? (1 - eps) * (w ? w[ti] : 1.0) : 0.0) + eps / C * wc;
                S += tau[c];
                Sabs += fabs(tau[c]);
            }
            softmax_row(x + base, C, st, true, y, my);    // log p and its error
            softmax_row(x + base, C, st, false, p, mp);   // p and its error
            if (!b->grad) {
                // loss_r = sum_c tau_c (-log p_c): each -log p_c carries u my_c, tau_c one rounding
                // to the accumulation type, the weighted sum of C terms gamma_{C+3}
                double e_r = 0, a_r = 0;
                for (int64_t c = 0; c < C; c++) {
                    if (tau[c] == 0.0) continue;   // not read (class indices), or adds 0
                    e_r += fabs(tau[c]) * u * my[c];
                    a_r += fabs(tau[c]) * fabs(y[c]);
                }
                e_r += gamma_n((double)C + 3, u) * a_r;
                if (none) b->err[r] = e_r;
                total_err += e_r;
                total_abs += a_r;
                continue;
            }
            // glogit = g (p S - tau): p carries u mp; S is 1 exactly for class indices without
            // weights, else a sum of C terms; one product, one subtraction, the scaling by g
            const double g = none ? gy[r] : mean ? (divisor != 0 ? gy[0] / divisor : NAN) : gy[0];
            const double dS = w || probs ? gamma_n((double)C, u) * Sabs : 0.0;
            for (int64_t c = 0; c < C; c++) {
                const double v = fabs(p[c] * S) + fabs(tau[c]);
                b->err[base + c * st] =
                    ign ? 0.0
                        : fabs(g) * (u * mp[c] * fabs(S) + p[c] * dS + 3 * u * v);
            }
        }
    }
    if (!b->grad && !none) {   // reduce R terms (+ the division by the divisor for mean)
        double e = total_err + gamma_n((double)nrows + 1, u) * total_abs;
        b->err[0] = mean ? e / divisor : e;
    }
    free(x); free(t); free(w); free(gy); free(y); free(my); free(p); free(mp); free(tau);
    return TDM_OK;
}

// ---- scaled_dot_product_attention --------------------------------------------------------------
// Per row (b, i) of the weights, from the exact inputs (docs/CONFORMANCE.md derives each term),
// with A_j = sum_e |q_ie k_je| and m_ij the mask's term (-inf where a key is masked out: p_j = 0
// exactly, no error):
//   scores   s_j = scale <q_i,k_j> + m_ij:  ds_j = gamma_{E+3} (|scale| A_j + |m_ij|)
//            (the dot, the scale's rounding and product, the mask's addition)
//   softmax  p_j: dp_j = p_j (u (S + 9 + |s_j - M| + max_l |s_l - M|) + ds_j + sum_l p_l ds_l)
//            (softmax's rule on exact scores, plus the scores' error carried through it)
//   dropout  p'_j = p_j kf_j, kf = keep / (1 - dropout_p) rounded:  dp'_j = kf_j (dp_j + 2u p_j)
//   output   y_i = sum_j p'_j v_j:  gamma_S sum_j p'_j |v_j| + sum_j dp'_j |v_j|
// backward, from gy:
//   r_j = kf_j <gy_i, v_j>:  dr_j = kf_j (gamma_Ev sum |gy_i| |v_j| + 2u |<gy_i, v_j>|)
//   D = sum_j p_j r_j:  dD = sum_j (dp_j |r_j| + p_j dr_j) + gamma_S sum_j p_j |r_j|
//   t_j = r_j - D:  dt_j = dr_j + dD + u |t_j|
//   g_j = p_j t_j (the mask's gradient):  dg_j = dp_j |t_j| + p_j dt_j + u p_j |t_j|
//   gq_i = scale sum_j g_j k_j:  |scale| (gamma_{S+2} sum_j |g_j k_j| + sum_j dg_j |k_j|)
//   gk_j = scale sum_i g_ij q_i:  the same over the L rows (gamma_{L+2})
//   gv_j = sum_i p'_ij gy_i:  gamma_L sum_i p'_ij |gy_i| + sum_i dp'_ij |gy_i|
// An input broadcast over c > 1 copies of the batch sums c per-copy gradients, each rounded to
// the accumulation type: + gamma_{c+1} sum |copy|.
// The fused path (tdm_attn_fused_applies on a CUDA device; kernels/k_flash_attention.cu and, for
// f32, k_flash_attention_f32.cu) adds, with u_T the operands' unit roundoff, u_P the rounding of
// the weights and ds to T for their products (u_T for f16/bf16; 0 for f32, where T is the f32
// the kernel computes in: nothing is rounded) and n_t = ceil(S / 16) key tiles at most:
//   weights  rounded to T for the product with v, and rescaled once per tile in f32 (the online
//            softmax: e^(m - m') and the products): dp'_j += p_j (u_P + (3 n_t + 2) u)
//   recomputed from lse (backward): p_j = exp2(x_j - lse_2), lse_2 = m + log2 l rounded, x_j
//            rounded: dp_j += p_j u (S + 6 + 3 log2(e) (|s_j| + |M| + log S + 1))
//   D from the rounded output y (not the exact weights): dD += sum_j (u_T p_j + gamma_S p_j +
//            dp'_j) sum_e |gy_e v_je|  (|y| and its forward error, through gy)
//   ds_j rounded to T for the products with k and q: dg_j += u_P |g_j|

// Offset in t (row-major) of the element at index idx of the nd-dim shape t broadcasts to
// (right-aligned; t's size-1 dims read index 0).
static int64_t bcast_at(const tdm_tensor *t, int nd, const int64_t *idx) {
    const int nt = tdm_tensor_ndim(t);
    int64_t off = 0, stride = 1;
    for (int d = nt - 1; d >= 0; d--) {
        const int64_t n = shape_of(t)[d];
        if (n != 1) off += idx[d + nd - nt] * stride;
        stride *= n;
    }
    return off;
}

typedef struct {
    int64_t L, S, E, Ev, batch;
    int bnd;
    int64_t bs[TDM_MAX_DIMS];
    double scale, dropout_p;
    bool causal;
    bool fused;        // the fused path runs it (see above); u_T its operands' unit roundoff,
    double u_t, u_p;   // u_P the weights' and ds's rounding to T (0 when T is f32)
    uint64_t seed, offset;
    const double *q, *k, *v, *m, *gy;
    const tdm_tensor *Q, *K, *V, *M;
} sdpa_b;

// Row (bi, i) at batch index idx[0..bnd): the weights p, their error dp, the dropout factors
// kf, p' and dp'. idx[bnd], idx[bnd+1] are set to (i, j) on the way.
static void sdpa_row(const sdpa_b *a, double u, int64_t bi, int64_t i, int64_t *idx, double *s,
                     double *ds, double *p, double *dp, double *kf, double *pd, double *dpd) {
    const int nd = a->bnd + 2;
    double M = -INFINITY;
    idx[a->bnd] = i;
    for (int64_t j = 0; j < a->S; j++) {
        double dot = 0, A = 0;
        for (int64_t e = 0; e < a->E; e++) {
            idx[a->bnd] = i, idx[a->bnd + 1] = e;
            const double qe = a->q[bcast_at(a->Q, nd, idx)];
            idx[a->bnd] = j;
            const double ke = a->k[bcast_at(a->K, nd, idx)];
            dot += qe * ke;
            A += fabs(qe * ke);
        }
        idx[a->bnd] = i, idx[a->bnd + 1] = j;
        const double mij = a->M ? a->m[bcast_at(a->M, nd, idx)] : 0.0;
        s[j] = a->scale * dot + mij;
        if (a->causal && j > i) s[j] = -INFINITY;
        ds[j] = s[j] == -INFINITY ? 0.0
                                  : gamma_n((double)a->E + 3, u) * (fabs(a->scale) * A + fabs(mij));
        if (s[j] > M || isnan(s[j])) M = s[j];
    }
    double sum = 0, spread = 0, pds = 0;
    for (int64_t j = 0; j < a->S; j++) {
        p[j] = M == -INFINITY ? 0.0 : exp(s[j] - M);
        sum += p[j];
        if (s[j] != -INFINITY) spread = fmax(spread, fabs(s[j] - M));
    }
    for (int64_t j = 0; j < a->S; j++) {
        if (M != -INFINITY) p[j] /= sum;
        pds += p[j] * ds[j];
    }
    const uint32_t threshold = tdm_dropout_threshold(a->dropout_p);
    const double keep_scale = a->dropout_p < 1.0 ? 1.0 / (1.0 - a->dropout_p) : 0.0;
    for (int64_t j = 0; j < a->S; j++) {
        const double d = s[j] == -INFINITY ? 0.0 : fabs(s[j] - M);
        dp[j] = p[j] * (u * ((double)a->S + 9 + d + spread) + ds[j] + pds);
        kf[j] = 1.0;
        if (a->dropout_p > 0) {
            const uint64_t at = (uint64_t)((bi * a->L + i) * a->S + j);
            kf[j] = (tdm_philox_bits(a->seed, a->offset, at) >> 8) < threshold ? keep_scale : 0.0;
        }
        pd[j] = p[j] * kf[j];
        dpd[j] = kf[j] * (dp[j] + 2 * u * p[j]);
        if (a->fused && p[j] > 0) {
            const double nt = ceil((double)a->S / 16.0);
            dpd[j] += p[j] * (a->u_p + (3 * nt + 2) * u);
            dp[j] += p[j] * u * ((double)a->S + 6 +
                                 3 * M_LOG2E * (fabs(s[j]) + fabs(M) + log((double)a->S) + 1));
        }
    }
}

static tdm_status bound_sdpa(bctx *b) {
    const tdm_case *c = b->c;
    sdpa_b a;
    memset(&a, 0, sizeof a);
    a.Q = c->input[0], a.K = c->input[1], a.V = c->input[2], a.M = c->input[3];
    int64_t seed, offset;
    double scale;
    TDM_TRY(tdm_attr_double(c, "dropout_p", 0.0, &a.dropout_p));
    TDM_TRY(tdm_attr_bool(c, "is_causal", false, &a.causal));
    TDM_TRY(tdm_attr_double(c, "scale", NAN, &scale));
    TDM_TRY(tdm_attr_int(c, "seed", 0, &seed));
    TDM_TRY(tdm_attr_int(c, "offset", 0, &offset));
    a.seed = (uint64_t)seed, a.offset = (uint64_t)offset;
    const tdm_tensor *T[3] = {a.Q, a.K, a.V};
    for (int t = 0; t < 3; t++)
        if (!T[t] || tdm_tensor_ndim(T[t]) < 2)
            return tdm_error_set(TDM_ERR_FORMAT, "%s: bound: query, key, value must be >= 2-D",
                                 c->path);
    const int nq = tdm_tensor_ndim(a.Q), nk = tdm_tensor_ndim(a.K), nv = tdm_tensor_ndim(a.V);
    a.L = shape_of(a.Q)[nq - 2], a.E = shape_of(a.Q)[nq - 1];
    a.S = shape_of(a.K)[nk - 2], a.Ev = shape_of(a.V)[nv - 1];
    a.scale = a.E == 0 ? 1.0 : isnan(scale) ? 1.0 / sqrt((double)a.E) : scale;
    for (int t = 0; t < 3; t++)
        if (tdm_tensor_ndim(T[t]) - 2 > a.bnd) a.bnd = tdm_tensor_ndim(T[t]) - 2;
    a.batch = 1;
    for (int d = 0; d < a.bnd; d++) {
        a.bs[d] = 1;
        for (int t = 0; t < 3; t++) {
            const int td = d - (a.bnd - (tdm_tensor_ndim(T[t]) - 2));
            if (td >= 0 && shape_of(T[t])[td] != 1) a.bs[d] = shape_of(T[t])[td];
        }
        a.batch *= a.bs[d];
    }
    const int nd = a.bnd + 2;
    bool whole = true;   // no operand broadcast over the batch (the fused path's condition too)
    for (int t = 0; t < 3; t++)
        whole = whole && tdm_shape_numel(tdm_tensor_ndim(T[t]) - 2, shape_of(T[t])) == a.batch;
    a.fused = b->dev.type == TDM_DEVICE_CUDA && whole && a.L > 0 && a.S > 0 && a.batch > 0 &&
              tdm_attn_fused_applies(b->dev, c->dtype, a.E, a.Ev, a.M != NULL, a.dropout_p);
    a.u_t = b->u_in;
    a.u_p = b->u_in > b->u ? b->u_in : 0.0;   // f16/bf16 round p and ds; f32 keeps them
    double *q = load(a.Q), *k = load(a.K), *v = load(a.V), *m = load(a.M);
    double *gy = b->grad ? load(c->grad_output[0]) : NULL;
    const int64_t S = a.S;
    double *s = scratch(S), *ds = scratch(S), *p = scratch(S), *dp = scratch(S), *kf = scratch(S);
    double *pd = scratch(S), *dpd = scratch(S), *r = scratch(S), *dr = scratch(S);
    // per-copy sums of gk / gv (one batch entry's S x E or S x Ev), and |copy| per element
    const int64_t wk = b->grad && b->k == 1 ? S * a.E : b->grad && b->k == 2 ? S * a.Ev : 1;
    double *cv = scratch(wk), *cm = scratch(wk), *ce = scratch(wk), *absum = scratch(b->n);
    tdm_status st = TDM_OK;
    if (!q || !k || !v || (a.M && !m) || (b->grad && !gy) || !s || !ds || !p || !dp || !kf ||
        !pd || !dpd || !r || !dr || !cv || !cm || !ce || !absum)
        st = bound_oom();
    if (st == TDM_OK && a.M && tdm_tensor_dtype(a.M) == TDM_DTYPE_BOOL)
        for (int64_t x = 0; x < tdm_tensor_numel(a.M); x++) m[x] = m[x] != 0 ? 0.0 : -INFINITY;
    a.q = q, a.k = k, a.v = v, a.m = m, a.gy = gy;
    const double u = b->u;
    int64_t idx[TDM_MAX_DIMS + 2];
    for (int64_t bi = 0; st == TDM_OK && bi < a.batch; bi++) {
        for (int64_t rem = bi, d = a.bnd - 1; d >= 0; d--) {
            idx[d] = rem % a.bs[d];
            rem /= a.bs[d];
        }
        if (b->grad && (b->k == 1 || b->k == 2))
            for (int64_t x = 0; x < wk; x++) cv[x] = cm[x] = ce[x] = 0;
        for (int64_t i = 0; i < a.L; i++) {
            sdpa_row(&a, u, bi, i, idx, s, ds, p, dp, kf, pd, dpd);
            const double *gyi = gy ? gy + (bi * a.L + i) * a.Ev : NULL;
            if (!b->grad) {
                for (int64_t e = 0; e < a.Ev; e++) {
                    double mag = 0, err = 0;
                    for (int64_t j = 0; j < S; j++) {
                        idx[a.bnd] = j, idx[a.bnd + 1] = e;
                        const double vj = fabs(v[bcast_at(a.V, nd, idx)]);
                        mag += pd[j] * vj;
                        err += dpd[j] * vj;
                    }
                    b->err[(bi * a.L + i) * a.Ev + e] = gamma_n((double)S, u) * mag + err;
                }
                continue;
            }
            if (b->k == 2) {   // gv_j += p'_ij gy_i
                for (int64_t j = 0; j < S; j++)
                    for (int64_t e = 0; e < a.Ev; e++) {
                        cv[j * a.Ev + e] += pd[j] * gyi[e];
                        cm[j * a.Ev + e] += pd[j] * fabs(gyi[e]);
                        ce[j * a.Ev + e] += dpd[j] * fabs(gyi[e]);
                    }
                continue;
            }
            double D = 0, dD = 0, Dabs = 0;
            for (int64_t j = 0; j < S; j++) {
                double dot = 0, mag = 0;
                for (int64_t e = 0; e < a.Ev; e++) {
                    idx[a.bnd] = j, idx[a.bnd + 1] = e;
                    const double vj = v[bcast_at(a.V, nd, idx)];
                    dot += gyi[e] * vj;
                    mag += fabs(gyi[e] * vj);
                }
                r[j] = kf[j] * dot;
                dr[j] = kf[j] * (gamma_n((double)a.Ev, u) * mag + 2 * u * fabs(dot));
                D += p[j] * r[j];
                Dabs += p[j] * fabs(r[j]);
                dD += dp[j] * fabs(r[j]) + p[j] * dr[j];
                if (a.fused) dD += (a.u_t * p[j] + gamma_n((double)S, u) * p[j] + dpd[j]) * mag;
            }
            dD += gamma_n((double)S, u) * Dabs;
            for (int64_t j = 0; j < S; j++) {   // g_j and dg_j, into r and dr
                const double t = r[j] - D, dt = dr[j] + dD + u * fabs(r[j] - D);
                r[j] = p[j] * t;
                dr[j] = dp[j] * fabs(t) + p[j] * dt + u * p[j] * fabs(t);
                if (a.fused) dr[j] += a.u_p * fabs(r[j]);
            }
            if (b->k == 3) {   // the mask's gradient: g_j itself
                for (int64_t j = 0; j < S; j++) {
                    idx[a.bnd] = i, idx[a.bnd + 1] = j;
                    const int64_t o = bcast_at(a.M, nd, idx);
                    b->err[o] += dr[j];
                    absum[o] += fabs(r[j]);
                }
            } else if (b->k == 0) {   // gq_i = scale sum_j g_j k_j
                for (int64_t e = 0; e < a.E; e++) {
                    double val = 0, mag = 0, err = 0;
                    for (int64_t j = 0; j < S; j++) {
                        idx[a.bnd] = j, idx[a.bnd + 1] = e;
                        const double kj = k[bcast_at(a.K, nd, idx)];
                        val += r[j] * kj;
                        mag += fabs(r[j] * kj);
                        err += dr[j] * fabs(kj);
                    }
                    idx[a.bnd] = i, idx[a.bnd + 1] = e;
                    const int64_t o = bcast_at(a.Q, nd, idx);
                    b->err[o] += fabs(a.scale) * (gamma_n((double)S + 2, u) * mag + err);
                    absum[o] += fabs(a.scale * val);
                }
            } else {   // gk_j += scale g_j q_i
                idx[a.bnd] = i;
                for (int64_t e = 0; e < a.E; e++) {
                    idx[a.bnd + 1] = e;
                    const double qi = q[bcast_at(a.Q, nd, idx)];
                    for (int64_t j = 0; j < S; j++) {
                        cv[j * a.E + e] += a.scale * r[j] * qi;
                        cm[j * a.E + e] += fabs(a.scale * r[j] * qi);
                        ce[j * a.E + e] += fabs(a.scale) * dr[j] * fabs(qi);
                    }
                }
            }
        }
        if (b->grad && (b->k == 1 || b->k == 2)) {   // this batch entry's copy of gk / gv
            const tdm_tensor *X = b->k == 1 ? a.K : a.V;
            const int64_t w = b->k == 1 ? a.E : a.Ev;
            const double g = gamma_n((double)a.L + (b->k == 1 ? 2 : 0), u);
            for (int64_t j = 0; j < S; j++)
                for (int64_t e = 0; e < w; e++) {
                    idx[a.bnd] = j, idx[a.bnd + 1] = e;
                    const int64_t o = bcast_at(X, nd, idx);
                    b->err[o] += g * cm[j * w + e] + ce[j * w + e];
                    absum[o] += fabs(cv[j * w + e]);
                }
        }
    }
    // a gradient summed over c > 1 broadcast copies
    if (st == TDM_OK && b->grad) {
        const tdm_tensor *X = c->input[b->k];
        const int nx = tdm_tensor_ndim(X);
        const int64_t own = tdm_tensor_numel(X);
        const int64_t per = b->k == 3 ? a.L * S : shape_of(X)[nx - 2] * shape_of(X)[nx - 1];
        const int64_t copies = own ? a.batch * per / own : 0;
        if (copies > 1)
            for (int64_t x = 0; x < b->n; x++)
                b->err[x] += gamma_n((double)copies + 1, u) * absum[x];
    }
    free(q); free(k); free(v); free(m); free(gy); free(s); free(ds); free(p); free(dp); free(kf);
    free(pd); free(dpd); free(r); free(dr); free(cv); free(cm); free(ce); free(absum);
    return st;
}

// ---- layer_norm, batch_norm ---------------------------------------------------------------------
// Both normalize groups of n elements: layer_norm a row (weight by position in the row),
// batch_norm a channel over (N, spatial) (weight by channel). The two-pass error analysis:
//   mean:  dmu = (n+1) u mean|x|
//   var:   dvar = (n+4) u var + 2 dmu mean|x - mu|
//   rstd = 1/sqrt(var + eps): relative (dvar/(var+eps))/2 + 6u (+ eps, sqrt, rsqrt 2 ulp)
//   xhat_j: dxh_j = (u |x_j - mu| + dmu) rstd + |xhat_j| (rel_rstd + u)
//   y_j = xhat_j w + b: |w| dxh_j + 2u (|xhat_j w| + |b|)

typedef struct {
    int64_t groups, n;       // n elements per group
    int64_t N, C, S;         // batch_norm layout (N, C, S); layer_norm: N = groups, C = 1, S = n
    bool per_channel;        // batch_norm
} normlay;

static int64_t norm_at(const normlay *L, int64_t g, int64_t j) {
    if (!L->per_channel) return g * L->n + j;
    return (j / L->S) * L->C * L->S + g * L->S + j % L->S;
}

static int64_t norm_w(const normlay *L, int64_t g, int64_t j) { return L->per_channel ? g : j; }

static tdm_status bound_norm(bctx *b) {
    const tdm_case *c = b->c;
    bool bn = !strcmp(c->op, "batch_norm");
    const tdm_tensor *xt = c->input[0];
    int nd = tdm_tensor_ndim(xt);
    normlay L = {0};
    double eps, mom = 0.1;
    bool training = true;
    int wi = bn ? 3 : 1, bi = bn ? 4 : 2;
    if (bn) {
        TDM_TRY(tdm_attr_double(c, "eps", 1e-5, &eps));
        TDM_TRY(tdm_attr_double(c, "momentum", 0.1, &mom));
        TDM_TRY(tdm_attr_bool(c, "training", false, &training));
        L.per_channel = true;
        L.N = shape_of(xt)[0];
        L.C = nd > 1 ? shape_of(xt)[1] : 1;
        int64_t nc = L.N * L.C;
        L.S = tdm_tensor_numel(xt) / (nc > 0 ? nc : 1);
        L.groups = L.C;
        L.n = L.N * L.S;
    } else {
        int ns[TDM_MAX_DIMS], nn;
        TDM_TRY(tdm_attr_double(c, "eps", 1e-5, &eps));
        TDM_TRY(tdm_attr_int_list(c, "normalized_shape", TDM_MAX_DIMS, ns, &nn));
        int64_t cols = 1;
        for (int d = 0; d < nn; d++) cols *= ns[d];
        L.n = cols;
        L.groups = tdm_tensor_numel(xt) / (cols ? cols : 1);
    }
    double *x = load(xt), *w = load(c->input[wi]), *bias = load(c->input[bi]);
    double *rm = bn ? load(c->input[1]) : NULL, *rv = bn ? load(c->input[2]) : NULL;
    double *gy = b->grad ? load(c->grad_output[0]) : NULL;
    double *xh = scratch(L.n), *dxh = scratch(L.n);
    tdm_status s = TDM_OK;
    if (!xh || !dxh) s = bound_oom();
    else if (!x || (b->grad && !gy) || (bn && !training && (!rm || !rv)))
        s = tdm_error_set(TDM_ERR_FORMAT, "%s: bound: inputs missing or out of memory", c->path);
    const double u = b->u;
    for (int64_t g = 0; s == TDM_OK && g < L.groups; g++) {
        double n = (double)L.n, mu = 0, amu = 0, var = 0, adev = 0;
        for (int64_t j = 0; j < L.n; j++) {
            mu += x[norm_at(&L, g, j)];
            amu += fabs(x[norm_at(&L, g, j)]);
        }
        mu /= n;
        amu /= n;
        for (int64_t j = 0; j < L.n; j++) {
            double d = x[norm_at(&L, g, j)] - mu;
            var += d * d;
            adev += fabs(d);
        }
        var /= n;
        adev /= n;
        double dmu = (n + 1) * u * amu, dvar = (n + 4) * u * var + 2 * dmu * adev;
        bool batch_stats = !bn || training;
        if (!batch_stats) {   // eval: running statistics, exact inputs
            mu = rm[g];
            var = rv[g];
            dmu = 0;
            dvar = 0;
        }
        double rstd = 1.0 / sqrt(var + eps);
        double rel_rstd = 0.5 * (dvar + u * (var + eps)) / (var + eps) + 6 * u;
        double m1 = 0, m1abs = 0, m2 = 0, m2abs = 0, m2err = 0;
        for (int64_t j = 0; j < L.n; j++) {
            int64_t at = norm_at(&L, g, j);
            double d = x[at] - mu;
            xh[j] = d * rstd;
            dxh[j] = (u * fabs(d) + dmu) * rstd + fabs(xh[j]) * (rel_rstd + u);
            if (b->grad) {
                double wj = w ? w[norm_w(&L, g, j)] : 1.0, gh = gy[at] * wj;
                m1 += gh;
                m1abs += fabs(gh);
                m2 += gh * xh[j];
                m2abs += fabs(gh * xh[j]);
                m2err += fabs(gh) * dxh[j];
            }
        }
        m1 /= n; m1abs /= n; m2 /= n; m2abs /= n; m2err /= n;
        double G = gamma_n(n + 2, u);
        if (!b->grad && b->k == 0) {
            for (int64_t j = 0; j < L.n; j++) {
                double wj = w ? w[norm_w(&L, g, j)] : 1.0, bj = bias ? bias[norm_w(&L, g, j)] : 0.0;
                b->err[norm_at(&L, g, j)] = fabs(wj) * dxh[j] + 2 * u * (fabs(xh[j] * wj) + fabs(bj));
            }
        } else if (!b->grad) {   // batch_norm running stats: (1-m) r + m stat (unbiased var)
            double unb = n / (n > 1 ? n - 1 : 1);
            b->err[g] = b->k == 1 ? 2 * u * (fabs((1 - mom) * rm[g]) + fabs(mom * mu)) + mom * dmu
                                  : 2 * u * (fabs((1 - mom) * rv[g]) + fabs(mom * var * unb)) +
                                        mom * unb * (dvar + u * var);
        } else if (b->k == 0) {   // gx
            for (int64_t j = 0; j < L.n; j++) {
                int64_t at = norm_at(&L, g, j);
                double wj = w ? w[norm_w(&L, g, j)] : 1.0, gh = gy[at] * wj, err;
                if (batch_stats) {   // rstd (gh - mean(gh) - xhat mean(gh xhat))
                    double inner = gh - m1 - xh[j] * m2;
                    err = rstd * (2 * u * fabs(gh) + G * m1abs + dxh[j] * fabs(m2) +
                                  fabs(xh[j]) * (G * m2abs + m2err) +
                                  2 * u * (fabs(gh) + fabs(m1) + fabs(xh[j] * m2))) +
                          fabs(inner) * rstd * (rel_rstd + u);
                } else {             // gy w rstd
                    err = fabs(gh) * rstd * (rel_rstd + 3 * u);
                }
                b->err[at] = err;
            }
        }
    }
    // gweight = sum gy xhat, gbias = sum gy, per weight element over the elements it scales.
    if (s == TDM_OK && b->grad && b->k != 0) {
        memset(b->err, 0, (size_t)b->n * sizeof *b->err);
        double *acc = scratch(b->n), *cnt = scratch(b->n);
        if (!acc || !cnt) s = bound_oom();
        for (int64_t g = 0; s == TDM_OK && g < L.groups; g++) {
            double n = (double)L.n, mu = 0, var = 0;
            bool batch_stats = !bn || training;
            for (int64_t j = 0; j < L.n; j++) mu += x[norm_at(&L, g, j)];
            mu /= n;
            for (int64_t j = 0; j < L.n; j++) var += pow(x[norm_at(&L, g, j)] - mu, 2);
            var /= n;
            double amu = 0, adev = 0;
            for (int64_t j = 0; j < L.n; j++) {
                amu += fabs(x[norm_at(&L, g, j)]);
                adev += fabs(x[norm_at(&L, g, j)] - mu);
            }
            amu /= n;
            adev /= n;
            double dmu = (n + 1) * u * amu, dvar = (n + 4) * u * var + 2 * dmu * adev;
            if (!batch_stats) { mu = rm[g]; var = rv[g]; dmu = 0; dvar = 0; }
            double rstd = 1.0 / sqrt(var + eps);
            double rel_rstd = 0.5 * (dvar + u * (var + eps)) / (var + eps) + 6 * u;
            for (int64_t j = 0; j < L.n; j++) {
                int64_t at = norm_at(&L, g, j), wj = norm_w(&L, g, j);
                double d = x[at] - mu, xhj = d * rstd;
                double dx = (u * fabs(d) + dmu) * rstd + fabs(xhj) * (rel_rstd + u);
                if (b->k == wi) {
                    b->err[wj] += fabs(gy[at]) * (dx + u * fabs(xhj));
                    acc[wj] += fabs(gy[at] * xhj);
                } else {
                    acc[wj] += fabs(gy[at]);
                }
                cnt[wj] += 1;
            }
        }
        for (int64_t i = 0; s == TDM_OK && i < b->n; i++) b->err[i] += gamma_n(cnt[i], u) * acc[i];
        free(acc);
        free(cnt);
    }
    free(x); free(w); free(bias); free(rm); free(rv); free(gy); free(xh); free(dxh);
    return s;
}

// ---- optimizer steps --------------------------------------------------------------------------------

static tdm_status bound_sgd(bctx *b) {
    const tdm_case *c = b->c;
    double lr, mom, damp, wd;
    bool nesterov;
    TDM_TRY(tdm_attr_double(c, "lr", 0, &lr));
    TDM_TRY(tdm_attr_double(c, "momentum", 0, &mom));
    TDM_TRY(tdm_attr_double(c, "dampening", 0, &damp));
    TDM_TRY(tdm_attr_double(c, "weight_decay", 0, &wd));
    TDM_TRY(tdm_attr_bool(c, "nesterov", false, &nesterov));
    double *p = load(c->input[0]), *g = load(c->input[1]), *buf = load(c->input[2]);
    if (!p || !g) {
        free(p); free(g); free(buf);
        return bound_oom();
    }
    // Every quantity on absolute values (maximize only flips the gradient's sign, exactly); at
    // most 6 roundings on the longest path.
    for (int64_t i = 0; i < b->n; i++) {
        double dabs = fabs(g[i]) + fabs(wd * p[i]);
        double babs = buf ? fabs(mom * buf[i]) + fabs(1 - damp) * dabs : dabs;
        double step = mom != 0 ? (nesterov ? dabs + fabs(mom) * babs : babs) : dabs;
        b->err[i] = b->k == 0 ? gamma_n(6, b->u) * (fabs(p[i]) + fabs(lr) * step)
                              : gamma_n(4, b->u) * babs;
    }
    free(p); free(g); free(buf);
    return TDM_OK;
}

static tdm_status bound_adam(bctx *b) {
    const tdm_case *c = b->c;
    bool adamw = !strcmp(c->op, "adamw_step");
    double lr, eps, wd, betas[2] = {0.9, 0.999};
    int64_t step;
    TDM_TRY(tdm_attr_double(c, "lr", 1e-3, &lr));
    TDM_TRY(tdm_attr_double(c, "eps", 1e-8, &eps));
    TDM_TRY(tdm_attr_double(c, "weight_decay", adamw ? 1e-2 : 0, &wd));
    TDM_TRY(tdm_attr_int(c, "step", 1, &step));
    const cJSON *bj = cJSON_GetObjectItemCaseSensitive(c->attrs, "betas");
    if (cJSON_GetArraySize(bj) == 2) {
        betas[0] = cJSON_GetArrayItem(bj, 0)->valuedouble;
        betas[1] = cJSON_GetArrayItem(bj, 1)->valuedouble;
    }
    bool amsgrad, maximize;
    TDM_TRY(tdm_attr_bool(c, "amsgrad", false, &amsgrad));
    TDM_TRY(tdm_attr_bool(c, "maximize", false, &maximize));
    double *p = load(c->input[0]), *g = load(c->input[1]), *m = load(c->input[2]), *v = load(c->input[3]);
    double *vm = amsgrad ? load(c->input[4]) : NULL;
    if (!p || !g || !m || !v || (amsgrad && !vm)) {
        free(p); free(g); free(m); free(v); free(vm);
        return bound_oom();
    }
    const double u = b->u, b1 = betas[0], b2 = betas[1];
    double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step), ss = lr / bc1;
    for (int64_t i = 0; i < b->n; i++) {
        const double gi = maximize ? -g[i] : g[i];   // exact
        double gt = adamw ? gi : gi + wd * p[i];
        double dg = adamw ? 0 : 2 * u * (fabs(g[i]) + fabs(wd * p[i]));
        double m1 = b1 * m[i] + (1 - b1) * gt, v1 = b2 * v[i] + (1 - b2) * gt * gt;
        double dm = 3 * u * (fabs(b1 * m[i]) + fabs((1 - b1) * gt)) + (1 - b1) * dg;
        double dv = 3 * u * (fabs(b2 * v[i]) + (1 - b2) * gt * gt) + (1 - b2) * 2 * fabs(gt) * dg;
        // amsgrad: vh = max(vmax, v1), vmax exact (an input): max moves by at most v1's error
        double vh = amsgrad && vm[i] > v1 ? vm[i] : v1;
        double sq = sqrt(vh) / sqrt(bc2), den = sq + eps;
        // sqrt(vh): half vh's relative error + 1 rounding; / sqrt(bc2) + 2; + eps: 1
        double dden = (vh > 0 ? sq * (0.5 * dv / vh + 3 * u) : sqrt(dv / bc2)) + u * den;
        double upd = ss * m1 / den;
        double dupd = ss * (dm / den + fabs(m1) * dden / (den * den)) + 4 * u * fabs(upd);
        double pd = adamw ? p[i] * (1 - lr * wd) : p[i];
        double dp = (adamw ? 3 * u * fabs(pd) : 0) + u * fabs(pd - upd) + dupd;
        b->err[i] = b->k == 0 ? dp : b->k == 1 ? dm : dv;   // k == 3 (max_exp_avg_sq): dv too
    }
    free(p); free(g); free(m); free(v); free(vm);
    return TDM_OK;
}

// ---- gradient clipping -----------------------------------------------------------------------------
// clip_grad_norm_ over N elements x of the gradients (input.0..): total T = (sum |x|^p)^(1/p), or
// max |x| (exact) for p = inf. The sum S accumulates in f32 or better (u): |dS| <= gamma_N S for
// p = 1 (|x| exact) and 2 (each x^2 one rounding, within gamma_N), plus 4u per term |x|^p (pow,
// 2 ulp) for other p, plus N eta_acc for terms that underflow; the root is taken in f64 (4 ulp
// of f64 allowed) and T stored in f32. The root carries dS through its derivative: for sqrt,
// |sqrt(S') - sqrt(S)| <= dS / (sqrt(S) + sqrt(S - dS)) (sqrt(dS) when S <= dS); for 1/p,
// (1/p) xi^(1/p - 1) dS at the worst xi in [S - dS, S + dS]. The gradients are scaled by
// c = min(max_norm / (T' + 1e-6), 1) evaluated in f64 from the f32 total T' (its error dT plus
// its f32 rounding, counted twice: the reference's expected values for bench conform were scaled
// by an f32 total too): |c(T') - c(T)| <= max_norm dT' / ((T + 1e-6)(T - dT' + 1e-6)), at most 1
// (both are in [0, 1]; min(., 1) moves nothing further), plus 2 f64 roundings; each x c is formed in
// f64 (one rounding) and rounded to its dtype (the generic u_out term). Non-finite sums (an inf
// or NaN gradient) give exact results (0, NaN, inf), matched exactly.
static tdm_status bound_clip_grad_norm(bctx *b) {
    const tdm_case *c = b->c;
    double max_norm, p = 2.0;
    TDM_TRY(tdm_attr_double(c, "max_norm", 0, &max_norm));
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(c->attrs, "norm_type");
    if (cJSON_IsString(nt)) p = strtod(nt->valuestring, NULL);
    else TDM_TRY(tdm_attr_double(c, "norm_type", 2.0, &p));
    const double u = b->u, u64 = 0x1p-53;
    const double eta_acc = u == u64 ? 0x1p-1074 : 0x1p-149;
    double S = 0, N = 0;
    for (int k = 0; k < TDM_CASE_MAX; k++) {
        double *x = load(c->input[k]);
        if (c->input[k] && !x) return bound_oom();
        for (int64_t i = 0; x && i < tdm_tensor_numel(c->input[k]); i++) {
            const double a = fabs(x[i]);
            if (isinf(p)) S = a > S || isnan(a) ? a : S;
            else S += p == 2 ? a * a : p == 1 ? a : pow(a, p);
        }
        N += x ? (double)tdm_tensor_numel(c->input[k]) : 0;
        free(x);
    }
    if (!isfinite(S)) return TDM_OK;   // exact results, matched exactly
    double T, dT;
    if (isinf(p)) {
        T = S;
        dT = 0;
    } else if (p == 1) {
        T = S;
        dT = gamma_n(N, u) * S;
    } else if (p == 2) {
        const double dS = gamma_n(N, u) * S + N * eta_acc;
        T = sqrt(S);
        const double den = T + sqrt(S > dS ? S - dS : 0);
        dT = den > 0 ? dS / den : sqrt(dS);
    } else {
        const double dS = (gamma_n(N, u) + FN_ERR * u * (1 + gamma_n(N, u))) * S + N * eta_acc;
        T = pow(S, 1 / p);
        if (S <= dS) dT = pow(S + dS, 1 / p);
        else dT = (1 / p) * pow(1 / p >= 1 ? S + dS : S - dS, 1 / p - 1) * dS;
    }
    dT += FN_ERR * u64 * T;   // the root in f64
    if (b->k == 0) {          // the total (f32: its rounding is the generic u_out term)
        for (int64_t i = 0; i < b->n; i++) b->err[i] = dT;
        return TDM_OK;
    }
    // the f32 total the scale reads; once more for expected values made by the reference
    // (bench conform), whose scale read its own f32 total
    const double dTs = dT + 2 * (0x1p-24 * T + 0x1p-149);
    double cc = max_norm / (T + 1e-6);
    cc = cc > 1 ? 1 : cc;
    double dc;
    if (isinf(max_norm) || max_norm == 0) {
        dc = 0;   // exactly 1 / exactly 0
    } else {
        const double lo = T - dTs + 1e-6;
        dc = lo > 0 ? max_norm * dTs / ((T + 1e-6) * lo) : 1.0;
        dc = (dc < 1 ? dc : 1) + 2 * u64 * cc;
    }
    double *x = load(c->input[b->k - 1]);
    if (!x) return bound_oom();
    for (int64_t i = 0; i < b->n; i++) b->err[i] = fabs(x[i]) * dc + u64 * fabs(x[i] * cc);
    free(x);
    return TDM_OK;
}

// ---- the table -------------------------------------------------------------------------------------

static const struct {
    const char *op;
    tdm_status (*rule)(bctx *b);
} rules[] = {
    {"linear", bound_linear},       {"matmul", bound_matmul},
    {"linear_gelu_linear", bound_linear_gelu_linear},
    {"conv2d", bound_conv2d},       {"max_pool2d", bound_max_pool2d},
    {"avg_pool2d", bound_avg_pool2d}, {"relu", bound_exact},
    {"gelu", bound_unary},          {"tanh", bound_unary},
    {"sigmoid", bound_unary},       {"softmax", bound_softmax},
    {"log_softmax", bound_softmax}, {"cross_entropy", bound_cross_entropy},
    {"mse_loss", bound_mse},        {"layer_norm", bound_norm},
    {"batch_norm", bound_norm},     {"add", bound_add_mul},
    {"mul", bound_add_mul},         {"sum", bound_sum_mean},
    {"mean", bound_sum_mean},       {"embedding", bound_embedding},
    {"dropout", bound_dropout},     {"sgd_step", bound_sgd},
    {"scaled_dot_product_attention", bound_sdpa},
    {"adam_step", bound_adam},      {"adamw_step", bound_adam},
    {"clip_grad_norm_", bound_clip_grad_norm},
    // a tensor and a number (add and mul above, when `other` is a number)
    {"sub", bound_scalar},          {"rsub", bound_scalar},
    {"div", bound_scalar},          {"rdiv", bound_scalar},
    // the views and joins: copies, exact
    {"view", bound_exact},          {"reshape", bound_exact},
    {"transpose", bound_exact},     {"narrow", bound_exact},
    {"split", bound_exact},         {"chunk", bound_exact},
    {"cat", bound_exact},           {"stack", bound_exact},
};

tdm_status tdm_case_bounds(const tdm_case *c, bool grad, int k, tdm_device dev, double *bound) {
    // Every backend is held to the same bound, but for TF32: on a CUDA device, f32 linear/matmul
    // while tdm_tf32_allowed(TDM_TF32_MATMUL) and f32 conv2d while TDM_TF32_CONV may round their
    // product's inputs to TF32 (the reference computes in double whatever the switches say).
    const bool tf32_op = !strcmp(c->op, "conv2d") ? tdm_tf32_allowed(TDM_TF32_CONV)
                         : !strcmp(c->op, "linear") || !strcmp(c->op, "matmul") ||
                                 !strcmp(c->op, "linear_gelu_linear")
                             ? tdm_tf32_allowed(TDM_TF32_MATMUL)
                             : false;
    const bool tf32 = dev.type == TDM_DEVICE_CUDA && c->dtype == TDM_DTYPE_F32 && tf32_op;
    const tdm_tensor *exp = grad ? c->grad_input[k] : c->output[k];
    tdm_dtype out_dt = c->dtype;
    // Outputs that are running statistics or optimizer state keep their input's dtype.
    if (!grad && k > 0) {
        int src = !strcmp(c->op, "batch_norm")        ? k
                  : !strcmp(c->op, "clip_grad_norm_") ? k - 1
                                                      : k + 1;
        if (src < TDM_CASE_MAX && c->input[src]) out_dt = tdm_tensor_dtype(c->input[src]);
    }
    if (!grad && k == 0 && !strcmp(c->op, "clip_grad_norm_")) out_dt = TDM_DTYPE_F32;   // total
    if (grad && c->input[k]) out_dt = tdm_tensor_dtype(c->input[k]);
    bctx b = {.c = c, .grad = grad, .k = k, .n = tdm_tensor_numel(exp),
              .u = tdm_dtype_unit_roundoff(c->dtype == TDM_DTYPE_F64 ? TDM_DTYPE_F64 : TDM_DTYPE_F32),
              .u_in = tdm_dtype_unit_roundoff(c->dtype),
              .eta_in = 0.5 * tdm_dtype_min_subnormal(c->dtype),
              .u_tf32 = tf32 ? TF32_U : 0, .dev = dev};
    memset(bound, 0, (size_t)b.n * sizeof *bound);
    const tdm_dtype edt = tdm_tensor_dtype(exp);
    if (edt == TDM_DTYPE_I32 || edt == TDM_DTYPE_I64) return TDM_OK;   // an integer result: exact
    double *e = load(exp);
    b.e = e;
    b.err = bound;
    if (!e) return bound_oom();
    tdm_status s = TDM_ERR_UNSUPPORTED;
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
        if (!strcmp(rules[i].op, c->op)) s = rules[i].rule(&b);
    if (s == TDM_ERR_UNSUPPORTED) tdm_error_set(s, "%s: no error bound for op %s", c->path, c->op);
    double u_out = tdm_dtype_unit_roundoff(out_dt), u_exp = tdm_dtype_unit_roundoff(tdm_tensor_dtype(exp));
    double eta = tdm_dtype_min_subnormal(out_dt);
    for (int64_t i = 0; s == TDM_OK && i < b.n; i++)
        bound[i] += (u_out + u_exp) * fabs(e[i]) + eta;
    free(e);
    return s;
}

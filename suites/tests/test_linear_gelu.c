/* test_linear_gelu.c — tdm_linear_gelu_linear (a transformer MLP: linear, the tanh GELU, linear)
 * against float64, forward and every gradient, within the rounding-error bound below; on the cpu
 * (the three ops) and, with `gpu` (label gpu, exit 77 without a device), on cuda:0 both fused
 * (cuBLASLt's GELU_AUX_BIAS and DGELU epilogues; or, with a hidden width that is no multiple of 8,
 * the backend's unfused fallback) and with fusions off (the three ops); f32, bf16 and f16; and the
 * fused pair makes two launches fewer than the three ops, forward and backward.
 *
 * The bound, per element, from the inputs as rounded (x, w1, b1, w2, b2, gy), with u the dtype's
 * unit roundoff, a = 2^-24 (products accumulate in f32), P = x w1^T + b1, H = gelu(P) and
 * S1 = |x||w1|^T + |b1| (float64), |gelu'| <= 1.13, |gelu''| <= 0.80:
 *   pre   e_P  = (in a + u) S1                    the sum, rounded to the dtype or not (fused)
 *   h     e_H  = 1.13 e_P + 8 a S1 + u (|H| + 1.13 e_P)        GELU in f32, one rounding
 *   y     e_Y  = |w2| e_H + hid a S2 + u (|Y| + |w2| e_H + hid a S2),  S2 = |H||w2|^T + |b2|
 *   gh    e_GH = (out a + u) G1,  G1 = |gy||w2|   (rounded by the three ops, not by DGELU)
 *   gpre  e_GP = 1.13 e_GH + G1 (0.80 e_P + 16 a (1 + S1)) + u (|GP| + that)
 *   gx    |e_GP||w1| + (hid a + u) |GP||w1|;  gw1, gb1: the same over rows with x and 1;
 *   gw2   |gy|^T e_H + (rows a + u) |gy|^T |H|;  gb2: (rows a + u) sum |gy|
 * each term first order; the second-order rest is covered by taking 1.1 x the sum.
 * usage: test_linear_gelu cpu | gpu */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"   // first: the other public headers build on it
#include "tandem/backends.h"
#include "tandem/profile.h"

enum { R = 6, IN = 10, OUT = 7, MAXH = 16 };

static double *host(const tdm_tensor *t) {
    double *v = calloc((size_t)tdm_tensor_numel(t) + 1, sizeof *v);
    if (v && tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static double gelu(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double gelu_grad(double x) {
    const double k0 = 0.7978845608028654, k1 = 0.044715, t = tanh(k0 * (x + k1 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k0 * (1 + 3 * k1 * x * x);
}

// Counts elements of got outside want +- 1.1 tol, printing the first few.
static int over(const char *what, const char *cfg, const double *got, const double *want,
                const double *tol, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1.1 * tol[i]) && bad++ < 3)
            fprintf(stderr, "FAIL %s %s[%d]: got %.9g, want %.9g (bound %.3g)\n", cfg, what, i,
                    got[i], want[i], 1.1 * tol[i]);
    return bad;
}

// One configuration: dtype, hidden width, fusions on or off; the device's result against float64.
static void check_mlp(tdm_device dev, tdm_dtype dt, int hid, bool fused) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "%s %s hid=%d fusions %s", dev.type ? "cuda:0" : "cpu",
             tdm_dtype_name(dt), hid, fused ? "on" : "off");
    const int64_t sx[2] = {R, IN}, sw1[2] = {hid, IN}, sb1[1] = {hid}, sw2[2] = {OUT, hid},
                  sb2[1] = {OUT}, sy[2] = {R, OUT};
    tdm_tensor *in[6] = {tdm_tensor_randn(2, sx, dt, dev, 11, (uint64_t)hid),
                         tdm_tensor_randn(2, sw1, dt, dev, 12, 0),
                         tdm_tensor_randn(1, sb1, dt, dev, 13, 0),
                         tdm_tensor_randn(2, sw2, dt, dev, 14, 0),
                         tdm_tensor_randn(1, sb2, dt, dev, 15, 0),
                         tdm_tensor_randn(2, sy, dt, dev, 16, 0)};   // x w1 b1 w2 b2 gy
    for (int i = 0; i < 5; i++) tdm_tensor_set_requires_grad(in[i], true);
    const bool was = tdm_fusions_enabled();
    tdm_fusions_set(fused);
    tdm_tensor *y = tdm_linear_gelu_linear(in[0], in[1], in[2], in[3], in[4]);
    CHECK_MSG(y && tdm_backward(y, in[5]) == TDM_OK, "%s: %s", cfg, tdm_last_error());
    tdm_fusions_set(was);
    double *v[6], *g[5], *yd = y ? host(y) : NULL;
    for (int i = 0; i < 6; i++) v[i] = host(in[i]);
    for (int i = 0; i < 5; i++) g[i] = tdm_tensor_grad(in[i]) ? host(tdm_tensor_grad(in[i])) : NULL;
    bool ok = yd;
    for (int i = 0; i < 6; i++) ok = ok && v[i];
    for (int i = 0; i < 5; i++) ok = ok && g[i];
    CHECK_MSG(ok, "%s: results missing", cfg);
    if (ok) {
        const double *x = v[0], *w1 = v[1], *b1 = v[2], *w2 = v[3], *b2 = v[4], *gy = v[5];
        const double u = dt == TDM_DTYPE_BF16 ? 0x1p-8 : dt == TDM_DTYPE_F16 ? 0x1p-11 : 0x1p-24;
        const double a = 0x1p-24;
        double P[R][MAXH], S1[R][MAXH], H[R][MAXH], eP[R][MAXH], eH[R][MAXH];
        double GP[R][MAXH], eGP[R][MAXH];
        double Y[R * OUT], eY[R * OUT];
        for (int r = 0; r < R; r++)
            for (int j = 0; j < hid; j++) {
                double p = b1[j], s = fabs(b1[j]);
                for (int k = 0; k < IN; k++) {
                    p += x[r * IN + k] * w1[j * IN + k];
                    s += fabs(x[r * IN + k] * w1[j * IN + k]);
                }
                P[r][j] = p, S1[r][j] = s, H[r][j] = gelu(p);
                eP[r][j] = (IN * a + u) * s;
                eH[r][j] = 1.13 * eP[r][j] + 8 * a * s + u * (fabs(H[r][j]) + 1.13 * eP[r][j]);
            }
        for (int r = 0; r < R; r++)
            for (int o = 0; o < OUT; o++) {
                double yv = b2[o], s2 = fabs(b2[o]), prop = 0;
                for (int j = 0; j < hid; j++) {
                    yv += H[r][j] * w2[o * hid + j];
                    s2 += fabs(H[r][j] * w2[o * hid + j]);
                    prop += fabs(w2[o * hid + j]) * eH[r][j];
                }
                Y[r * OUT + o] = yv;
                eY[r * OUT + o] = prop + hid * a * s2 + u * (fabs(yv) + prop + hid * a * s2);
            }
        for (int r = 0; r < R; r++)
            for (int j = 0; j < hid; j++) {
                double gh = 0, g1 = 0;
                for (int o = 0; o < OUT; o++) {
                    gh += gy[r * OUT + o] * w2[o * hid + j];
                    g1 += fabs(gy[r * OUT + o] * w2[o * hid + j]);
                }
                GP[r][j] = gh * gelu_grad(P[r][j]);
                const double e = 1.13 * (OUT * a + u) * g1 +
                                 g1 * (0.80 * eP[r][j] + 16 * a * (1 + S1[r][j]));
                eGP[r][j] = e + u * (fabs(GP[r][j]) + e);
            }
        double want[MAXH * IN + MAXH], tol[MAXH * IN + MAXH];   // a matrix, then a bias
        int bad = over("y", cfg, yd, Y, eY, R * OUT);
        for (int r = 0; r < R; r++)   // gx = gpre w1
            for (int k = 0; k < IN; k++) {
                double s = 0, e = 0, m = 0;
                for (int j = 0; j < hid; j++) {
                    s += GP[r][j] * w1[j * IN + k];
                    e += eGP[r][j] * fabs(w1[j * IN + k]);
                    m += fabs(GP[r][j] * w1[j * IN + k]);
                }
                want[r * IN + k] = s, tol[r * IN + k] = e + (hid * a + u) * m;
            }
        bad += over("grad x", cfg, g[0], want, tol, R * IN);
        for (int j = 0; j < hid; j++)   // gw1 = gpre^T x, gb1 = sum over rows of gpre
            for (int k = 0; k <= IN; k++) {
                double s = 0, e = 0, m = 0;
                for (int r = 0; r < R; r++) {
                    const double xv = k < IN ? x[r * IN + k] : 1.0;
                    s += GP[r][j] * xv, e += eGP[r][j] * fabs(xv), m += fabs(GP[r][j] * xv);
                }
                const int at = k < IN ? j * IN + k : MAXH * IN + j;
                want[at] = s, tol[at] = e + (R * a + u) * m;
            }
        bad += over("grad fc weight", cfg, g[1], want, tol, hid * IN);
        bad += over("grad fc bias", cfg, g[2], want + MAXH * IN, tol + MAXH * IN, hid);
        for (int o = 0; o < OUT; o++)   // gw2 = gy^T h, gb2 = sum over rows of gy
            for (int j = 0; j <= hid; j++) {
                double s = 0, e = 0, m = 0;
                for (int r = 0; r < R; r++) {
                    const double hv = j < hid ? H[r][j] : 1.0, eh = j < hid ? eH[r][j] : 0.0;
                    s += gy[r * OUT + o] * hv, e += fabs(gy[r * OUT + o]) * eh;
                    m += fabs(gy[r * OUT + o] * hv);
                }
                const int at = j < hid ? o * hid + j : MAXH * IN + o;
                want[at] = s, tol[at] = e + (R * a + u) * m;
            }
        bad += over("grad proj weight", cfg, g[3], want, tol, OUT * hid);
        bad += over("grad proj bias", cfg, g[4], want + MAXH * IN, tol + MAXH * IN, OUT);
        CHECK_MSG(bad == 0, "%s: %d elements outside the bound", cfg, bad);
    }
    free(yd);
    for (int i = 0; i < 6; i++) {
        free(v[i]);
        tdm_tensor_free(in[i]);
    }
    for (int i = 0; i < 5; i++) free(g[i]);
    tdm_tensor_free(y);
}

// Launches of forward + backward, fused against the three ops: the GELU rides on the first
// product and its backward on the second's input gradient (two launches fewer).
static uint64_t launches(tdm_device dev, bool fused) {
    const int64_t sx[2] = {4, 8}, sw1[2] = {16, 8}, sb1[1] = {16}, sw2[2] = {8, 16}, sb2[1] = {8};
    tdm_tensor *in[5] = {tdm_tensor_randn(2, sx, TDM_DTYPE_BF16, dev, 1, 0),
                         tdm_tensor_randn(2, sw1, TDM_DTYPE_BF16, dev, 2, 0),
                         tdm_tensor_randn(1, sb1, TDM_DTYPE_BF16, dev, 3, 0),
                         tdm_tensor_randn(2, sw2, TDM_DTYPE_BF16, dev, 4, 0),
                         tdm_tensor_randn(1, sb2, TDM_DTYPE_BF16, dev, 5, 0)};
    tdm_tensor *gy = tdm_tensor_randn(2, (int64_t[]){4, 8}, TDM_DTYPE_BF16, dev, 6, 0);
    for (int i = 0; i < 5; i++) tdm_tensor_set_requires_grad(in[i], true);
    const bool was = tdm_fusions_enabled();
    tdm_fusions_set(fused);
    const uint64_t l0 = tdm_profile_launches();
    tdm_tensor *y = tdm_linear_gelu_linear(in[0], in[1], in[2], in[3], in[4]);
    CHECK_MSG(y && tdm_backward(y, gy) == TDM_OK, "%s", tdm_last_error());
    const uint64_t n = tdm_profile_launches() - l0;
    tdm_fusions_set(was);
    tdm_tensor_free(y);
    tdm_tensor_free(gy);
    for (int i = 0; i < 5; i++) tdm_tensor_free(in[i]);
    return n;
}

int main(int argc, char **argv) {
    const bool gpu = argc > 1 && !strcmp(argv[1], "gpu");
    const tdm_device dev = {gpu ? TDM_DEVICE_CUDA : TDM_DEVICE_CPU, 0};
    if (gpu && !tdm_device_available(dev)) {
        printf("SKIP linear_gelu.gpu: %s\n", tdm_last_error());
        return 77;
    }
    const tdm_dtype dts[3] = {TDM_DTYPE_F32, TDM_DTYPE_BF16, TDM_DTYPE_F16};
    for (int d = 0; d < 3; d++)
        for (int hid = 12; hid <= 16; hid += 4) {   // 16: the epilogues; 12: no aux ld of 8
            check_mlp(dev, dts[d], hid, true);
            check_mlp(dev, dts[d], hid, false);
        }
    {   // shape errors are linear's, and nothing is returned
        tdm_tensor *x = tdm_tensor_randn(2, (int64_t[]){2, 3}, TDM_DTYPE_F32, dev, 1, 0);
        tdm_tensor *w = tdm_tensor_randn(2, (int64_t[]){8, 4}, TDM_DTYPE_F32, dev, 2, 0);
        tdm_tensor *w2 = tdm_tensor_randn(2, (int64_t[]){3, 8}, TDM_DTYPE_F32, dev, 3, 0);
        CHECK(!tdm_linear_gelu_linear(x, w, NULL, w2, NULL) && strstr(tdm_last_error(), "in_features"));
        tdm_tensor_free(x);
        tdm_tensor_free(w);
        tdm_tensor_free(w2);
    }
    if (gpu) {
        const uint64_t f = launches(dev, true), u = launches(dev, false);
        printf("launches, forward + backward: fused %llu, three ops %llu\n", (unsigned long long)f,
               (unsigned long long)u);
        CHECK(u == f + 2);
    }
    CHECK_DONE(gpu ? "linear_gelu.gpu" : "linear_gelu.cpu");
}

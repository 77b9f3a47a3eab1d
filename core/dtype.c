/* dtype.c — dtype names, sizes, unit roundoffs, and the f16/bf16 conversions
 * (round to nearest even; NaN stays NaN, overflow goes to infinity). */
#include <math.h>
#include <string.h>

#include "core/tensor_impl.h"

static const struct {
    const char *name, *alias;
    size_t size;
} dtype_info[TDM_DTYPE_COUNT] = {
    [TDM_DTYPE_F32] = {"f32", "float32", 4},  [TDM_DTYPE_F16] = {"f16", "float16", 2},
    [TDM_DTYPE_BF16] = {"bf16", "bfloat16", 2}, [TDM_DTYPE_F64] = {"f64", "float64", 8},
    [TDM_DTYPE_I32] = {"i32", "int32", 4},    [TDM_DTYPE_I64] = {"i64", "int64", 8},
    [TDM_DTYPE_BOOL] = {"bool", "bool", 1},
};

static bool dtype_valid(tdm_dtype dt) { return (unsigned)dt < TDM_DTYPE_COUNT; }

size_t tdm_dtype_size(tdm_dtype dt) { return dtype_valid(dt) ? dtype_info[dt].size : 0; }
const char *tdm_dtype_name(tdm_dtype dt) { return dtype_valid(dt) ? dtype_info[dt].name : "?"; }

tdm_status tdm_dtype_parse(const char *s, tdm_dtype *out) {
    for (int i = 0; s && i < TDM_DTYPE_COUNT; i++) {
        if (!strcmp(s, dtype_info[i].name) || !strcmp(s, dtype_info[i].alias)) {
            *out = (tdm_dtype)i;
            return TDM_OK;
        }
    }
    return tdm_error_set(TDM_ERR_ARG,
                         "unknown dtype '%s' (expected f32, f16, bf16, f64, i32, i64, bool)",
                         s ? s : "(null)");
}

bool tdm_dtype_is_float(tdm_dtype dt) {
    return dt == TDM_DTYPE_F32 || dt == TDM_DTYPE_F16 || dt == TDM_DTYPE_BF16 ||
           dt == TDM_DTYPE_F64;
}

double tdm_dtype_unit_roundoff(tdm_dtype dt) {
    switch (dt) {
    case TDM_DTYPE_F32: return ldexp(1.0, -24);
    case TDM_DTYPE_F16: return ldexp(1.0, -11);
    case TDM_DTYPE_BF16: return ldexp(1.0, -8);
    case TDM_DTYPE_F64: return ldexp(1.0, -53);
    default: return 0.0;   // integers are exact
    }
}

double tdm_dtype_min_subnormal(tdm_dtype dt) {
    switch (dt) {
    case TDM_DTYPE_F32: return ldexp(1.0, -149);
    case TDM_DTYPE_F16: return ldexp(1.0, -24);
    case TDM_DTYPE_BF16: return ldexp(1.0, -133);
    case TDM_DTYPE_F64: return ldexp(1.0, -1074);
    default: return 0.0;
    }
}

// ---- conversions ------------------------------------------------------------------------
// Both narrow formats are derived from one routine: round a double to a binary format with
// `mant` stored mantissa bits and exponent bias `bias` (exponent field `ebits` wide), RNE.
static uint16_t round_to_narrow(double x, int mant, int ebits) {
    const int bias = (1 << (ebits - 1)) - 1;
    uint16_t sign = signbit(x) ? (uint16_t)(1u << (mant + ebits)) : 0;
    const uint16_t exp_all = (uint16_t)(((1u << ebits) - 1) << mant);
    if (isnan(x)) return (uint16_t)(sign | exp_all | (1u << (mant - 1)));   // quiet NaN
    double a = fabs(x);
    if (isinf(a)) return sign | exp_all;
    if (a == 0.0) return sign;
    int e;
    frexp(a, &e);   // a = f * 2^e, f in [0.5, 1): a's leading bit has weight 2^(e-1)
    int exp_unbiased = e - 1;
    int min_exp = 1 - bias;
    // Spacing of representable numbers at a's binade (subnormals share the lowest one).
    int q = (exp_unbiased < min_exp ? min_exp : exp_unbiased) - mant;
    double scaled = ldexp(a, -q);          // exact: a power-of-two scaling
    double r = nearbyint(scaled);          // default rounding mode: to nearest even
    // r * 2^q is the rounded magnitude; re-encode it (r may have carried into a new binade).
    if (r == 0.0) return sign;             // underflow to (signed) zero
    double v = ldexp(r, q);
    if (v > ldexp(2.0 - ldexp(1.0, -mant), bias)) return sign | exp_all;   // overflow
    int ev;
    frexp(v, &ev);
    int eu = ev - 1;
    if (eu < min_exp) {                    // subnormal: exponent field 0
        return (uint16_t)(sign | (uint16_t)r);
    }
    uint32_t frac = (uint32_t)ldexp(v, mant - eu) - (1u << mant);
    return (uint16_t)(sign | ((uint32_t)(eu + bias) << mant) | frac);
}

static double widen_narrow(uint16_t h, int mant, int ebits) {
    const int bias = (1 << (ebits - 1)) - 1;
    int sign = (h >> (mant + ebits)) & 1;
    int e = (h >> mant) & ((1 << ebits) - 1);
    int f = h & ((1 << mant) - 1);
    double v;
    if (e == (1 << ebits) - 1) v = f ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)f, 1 - bias - mant);
    else v = ldexp((double)(f | (1 << mant)), e - bias - mant);
    return sign ? -v : v;
}

uint16_t tdm_f64_to_f16(double x) { return round_to_narrow(x, 10, 5); }
uint16_t tdm_f64_to_bf16(double x) { return round_to_narrow(x, 7, 8); }
uint16_t tdm_f32_to_f16(float x) { return round_to_narrow((double)x, 10, 5); }
uint16_t tdm_f32_to_bf16(float x) { return round_to_narrow((double)x, 7, 8); }
float tdm_f16_to_f32(uint16_t h) { return (float)widen_narrow(h, 10, 5); }
float tdm_bf16_to_f32(uint16_t b) { return (float)widen_narrow(b, 7, 8); }

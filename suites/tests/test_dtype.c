/* test_dtype.c — f16/bf16 conversions: every f16 and bf16 bit pattern round-trips, rounding is
 * to nearest even at ties, overflow and underflow go where IEEE says; dtype names and parsing. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

// Independent bf16 rounding from the float's bits (the well-known RNE bit trick).
static uint16_t bf16_bits_rne(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

int main(void) {
    // Every finite f16 and bf16 value converts to double and back to the same bits.
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tdm_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            CHECK(isnan(tdm_f16_to_f32(tdm_f64_to_f16(f))));
            continue;
        }
        CHECK_MSG(tdm_f64_to_f16(f) == h, "f16 0x%04x", h);
        CHECK_MSG(tdm_f32_to_f16(f) == h, "f16 0x%04x via f32", h);
        float b = tdm_bf16_to_f32((uint16_t)h);
        if (!isnan(b)) CHECK_MSG(tdm_f64_to_bf16(b) == h, "bf16 0x%04x", h);
    }
    // Known values.
    CHECK(tdm_f32_to_f16(1.0f) == 0x3c00);
    CHECK(tdm_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(tdm_f32_to_f16(65520.0f) == 0x7c00);            // halfway to 2^16 rounds to inf
    CHECK(tdm_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(tdm_f32_to_f16(-INFINITY) == 0xfc00);
    CHECK(tdm_f16_to_f32(0x0001) == ldexpf(1.0f, -24));   // smallest subnormal
    CHECK(tdm_f64_to_f16(ldexp(1.0, -25)) == 0x0000);     // tie at half the spacing: to even 0
    CHECK(tdm_f64_to_f16(ldexp(1.5, -25)) == 0x0001);
    CHECK(tdm_f64_to_f16(-0.0) == 0x8000);
    CHECK(tdm_f64_to_f16(1.0 + ldexp(1.0, -11)) == 0x3c00);   // tie -> even
    CHECK(tdm_f64_to_f16(1.0 + 3 * ldexp(1.0, -11)) == 0x3c02);
    CHECK(tdm_f64_to_f16(1.0 + ldexp(1.0, -11) + ldexp(1.0, -40)) == 0x3c01);   // one rounding
    CHECK(tdm_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(tdm_bf16_to_f32(0x4049) == 3.140625f);
    // bf16 rounding agrees with the bit trick on a sweep of floats.
    uint32_t state = 12345;
    for (int i = 0; i < 200000; i++) {
        state = state * 1664525u + 1013904223u;
        float f;
        memcpy(&f, &state, 4);
        if (isnan(f)) continue;
        CHECK_MSG(tdm_f32_to_bf16(f) == bf16_bits_rne(f), "bf16 of %a", (double)f);
    }
    // Names and parsing.
    tdm_dtype dt;
    CHECK(tdm_dtype_parse("bfloat16", &dt) == TDM_OK && dt == TDM_DTYPE_BF16);
    CHECK(tdm_dtype_parse("f32", &dt) == TDM_OK && dt == TDM_DTYPE_F32);
    CHECK(tdm_dtype_parse("float8", &dt) == TDM_ERR_ARG && strstr(tdm_last_error(), "float8"));
    CHECK(tdm_dtype_size(TDM_DTYPE_BF16) == 2 && tdm_dtype_size(TDM_DTYPE_I64) == 8);
    CHECK(tdm_dtype_unit_roundoff(TDM_DTYPE_F16) == ldexp(1.0, -11));
    CHECK_DONE("test_dtype");
}

// tests/test_fp8.c — FP8 E4M3FN decode of all 256 codes against the OCP
// spec formula, evaluated independently here with ldexp in double.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/quant.h"

// OCP 8-bit FP spec, E4M3 ("FN" variant): S.EEEE.MMM, bias 7; E=0 is
// subnormal (M/8 * 2^-6); S.1111.111 is NaN; no infinities.
static double ocp_e4m3(unsigned code, int *is_nan)
{
    unsigned s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    *is_nan = (e == 15 && m == 7);
    double mag = e == 0 ? ldexp((double)m / 8.0, 1 - 7) : ldexp(1.0 + (double)m / 8.0, (int)e - 7);
    return s ? -mag : mag;
}

Test(fp8, all_256_codes)
{
    int nan_count = 0;
    for (unsigned c = 0; c < 256; c++) {
        int is_nan;
        double want = ocp_e4m3(c, &is_nan);
        float got = pt_fp8_e4m3_to_f32((uint8_t)c);
        if (is_nan) {
            cr_assert(isnan(got), "code 0x%02X must be NaN, got %g", c, got);
            nan_count++;
            continue;
        }
        cr_assert(!isnan(got) && !isinf(got), "code 0x%02X", c);
        cr_assert_eq((double)got, want, "code 0x%02X: got %.9g want %.9g", c, got, want);
        cr_assert_eq(signbit(got) != 0, (c & 0x80) != 0, "sign of code 0x%02X", c);
    }
    cr_assert_eq(nan_count, 2); // 0x7F and 0xFF only
}

Test(fp8, landmarks)
{
    cr_assert(isnan(pt_fp8_e4m3_to_f32(0x7F)));
    cr_assert(isnan(pt_fp8_e4m3_to_f32(0xFF)));
    float nz = pt_fp8_e4m3_to_f32(0x80);
    cr_assert(nz == 0.0f && signbit(nz), "0x80 is -0");
    float pz = pt_fp8_e4m3_to_f32(0x00);
    cr_assert(pz == 0.0f && !signbit(pz));
    cr_assert_eq(pt_fp8_e4m3_to_f32(0x7E), 448.0f);   // max finite
    cr_assert_eq(pt_fp8_e4m3_to_f32(0xFE), -448.0f);
    cr_assert_eq(pt_fp8_e4m3_to_f32(0x01), 0.001953125f); // min subnormal 2^-9
    cr_assert_eq(pt_fp8_e4m3_to_f32(0x07), 7.0f / 512.0f); // max subnormal
    cr_assert_eq(pt_fp8_e4m3_to_f32(0x08), 0.015625f);   // min normal 2^-6
    cr_assert_eq(pt_fp8_e4m3_to_f32(0x38), 1.0f);
    cr_assert_eq(pt_fp8_e4m3_to_f32(0x78), 256.0f);     // exponent 15 is finite
    cr_assert_eq(pt_fp8_e4m3_to_f32(0xC4), -3.0f);
}

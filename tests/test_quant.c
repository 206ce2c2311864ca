// tests/test_quant.c — type conversions and ggml block quantisation.
// References: the compiler's own _Float16 conversions (libgcc, RNE), a
// double-precision bf16 rounding written here, hand-checked blocks, and
// error bounds derived from the quantisation formulas.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() & 0xFFFFFF) / 16777216.0f; }

Test(types, names_and_sizes)
{
    cr_assert_str_eq(pt_dtype_name(PT_Q4_0), "q4_0");
    cr_assert_eq(pt_dtype_from_name("q8_0"), PT_Q8_0);
    cr_assert_eq(pt_dtype_from_name("BF16"), PT_BF16);
    cr_assert_eq(pt_dtype_from_name("Q5_K"), PT_Q5_K);
    cr_assert_eq(pt_dtype_from_name("q5_x"), -1);
    cr_assert_eq(pt_dtype_from_name("q8_k"), -1); // activations only
    cr_assert(pt_dtype_valid(30) && !pt_dtype_valid(4) && !pt_dtype_valid(PT_Q8_K));
    cr_assert_eq(pt_row_bytes(PT_Q4_K, 7168), 28 * 144);
    cr_assert_eq(pt_row_bytes(PT_Q4_K, 7168 + 32), 0);
    cr_assert_eq(pt_row_bytes(PT_IQ2_XXS, 2048), 8 * 66);
    cr_assert(pt_dtype_is_block(PT_Q4_0) && !pt_dtype_is_block(PT_BF16));
    cr_assert_eq(pt_row_bytes(PT_F32, 7), 28);
    cr_assert_eq(pt_row_bytes(PT_BF16, 7), 14);
    cr_assert_eq(pt_row_bytes(PT_Q8_0, 7168), 7168 / 32 * 34);
    cr_assert_eq(pt_row_bytes(PT_Q4_0, 2048), 2048 / 32 * 18);
    cr_assert_eq(pt_row_bytes(PT_Q4_0, 48), 0);
    // DeepSeek-V3 expert: 3 matrices 7168x2048 in q4_0 = 24,772,608 bytes
    cr_assert_eq(3 * 2048 * pt_row_bytes(PT_Q4_0, 7168), 24772608);
}

Test(fp16, decode_all_and_roundtrip)
{
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 r;
        uint16_t hh = (uint16_t)h;
        memcpy(&r, &hh, 2);
        float want = (float)r;
        float got = pt_fp16_to_f32(hh);
        if (isnan(want)) {
            cr_assert(isnan(got), "h=0x%04X", h);
            continue;
        }
        cr_assert_eq(fbits(got), fbits(want), "h=0x%04X: %g vs %g", h, got, want);
        cr_assert_eq(pt_f32_to_fp16(got), hh, "roundtrip 0x%04X", h);
    }
}

Test(fp16, encode_matches_compiler_rne)
{
    // random bit patterns over the whole f32 range plus every midpoint
    // between adjacent fp16 values (ties to even)
    for (int i = 0; i < 2000000; i++) {
        float f = bitsf(rnd32() ^ (rnd32() << 21));
        if (isnan(f))
            continue;
        _Float16 r = (_Float16)f;
        uint16_t want;
        memcpy(&want, &r, 2);
        cr_assert_eq(pt_f32_to_fp16(f), want, "f=%a", f);
    }
    for (uint32_t h = 0; h < 0x7C00; h++) {
        float a = pt_fp16_to_f32((uint16_t)h), b = pt_fp16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)a + (double)b) / 2); // exact in f32
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        cr_assert_eq(pt_f32_to_fp16(mid), want, "midpoint after 0x%04X", h);
        cr_assert_eq(pt_f32_to_fp16(-mid), want | 0x8000, "neg midpoint after 0x%04X", h);
    }
    cr_assert_eq(pt_f32_to_fp16(65504.0f), 0x7BFF);
    cr_assert_eq(pt_f32_to_fp16(65520.0f), 0x7C00);
    cr_assert_eq(pt_f32_to_fp16(1e30f), 0x7C00);
    cr_assert_eq(pt_f32_to_fp16(-0.0f), 0x8000);
    cr_assert_eq(pt_f32_to_fp16(INFINITY), 0x7C00);
    cr_assert_eq(pt_f32_to_fp16(0x1p-24f), 0x0001);
    cr_assert_eq(pt_f32_to_fp16(NAN) & 0x7E00, 0x7E00);
}

// bf16 reference: nearest representable (exhaustive over the two neighbours
// in double), ties to the one with an even last bit.
static uint16_t bf16_ref(float f)
{
    uint32_t u = fbits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dl = fabs((double)bitsf((uint32_t)lo << 16) - f);
    double dh = isinf(bitsf((uint32_t)lo << 16)) ? INFINITY : fabs((double)bitsf((uint32_t)hi << 16) - f);
    if ((hi & 0x7F80) == 0x7F80 && (lo & 0x7F80) != 0x7F80) // hi overflows to inf
        dh = fabs(ldexp(1.0, 128) * (f < 0 ? -1 : 1) - f);
    if (dl < dh)
        return lo;
    if (dh < dl)
        return hi;
    return (lo & 1) ? hi : lo;
}

Test(bf16, conversions)
{
    for (uint32_t b = 0; b < 65536; b++) {
        float f = pt_bf16_to_f32((uint16_t)b);
        cr_assert_eq(fbits(f), b << 16);
        if (!isnan(f))
            cr_assert_eq(pt_f32_to_bf16(f), b);
    }
    for (int i = 0; i < 2000000; i++) {
        float f = bitsf(rnd32() ^ (rnd32() << 21));
        if (isnan(f)) {
            cr_assert(isnan(pt_bf16_to_f32(pt_f32_to_bf16(f))));
            continue;
        }
        cr_assert_eq(pt_f32_to_bf16(f), bf16_ref(f), "f=%a", f);
    }
    cr_assert_eq(pt_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);  // tie -> even (down)
    cr_assert_eq(pt_f32_to_bf16(1.0f + 0x3p-8f), 0x3F82);  // tie -> even (up)
}

Test(q8_0, hand_checked_block)
{
    // amax 127 -> d = 1, id = 1: quants are roundf(x), halves away from zero
    float x[32] = {127, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -127, 3.51f};
    block_q8_0 b;
    pt_quantize_row(PT_Q8_0, x, &b, 32);
    const int8_t want[8] = {127, 3, -3, 1, -1, 1, -127, 4};
    cr_assert_eq(b.d, 0x3C00);
    for (int j = 0; j < 8; j++)
        cr_assert_eq(b.qs[j], want[j], "q[%d]=%d", j, b.qs[j]);
    for (int j = 8; j < 32; j++)
        cr_assert_eq(b.qs[j], 0);
    // byte layout: fp16 d (little endian) then the 32 quants
    uint8_t raw[34];
    memcpy(raw, &b, 34);
    cr_assert_eq(raw[0], 0x00);
    cr_assert_eq(raw[1], 0x3C);
    cr_assert_eq((int8_t)raw[2], 127);
    cr_assert_eq((int8_t)raw[4], -3);

    // x = j - 16: amax 16, d = 16/127 -> fp16 0x3008 (0.1259765625),
    // quants roundf(x * 127/16): -16 -> -127, 1 -> 8 (7.9375), 2 -> 16 (15.875), 15 -> 119 (119.06)
    float y[32];
    for (int j = 0; j < 32; j++)
        y[j] = (float)(j - 16);
    pt_quantize_row(PT_Q8_0, y, &b, 32);
    cr_assert_eq(b.d, 0x3008, "d=0x%04X", b.d);
    cr_assert_eq(b.qs[0], -127);
    cr_assert_eq(b.qs[17], 8);
    cr_assert_eq(b.qs[18], 16);
    cr_assert_eq(b.qs[31], 119);
    cr_assert_eq(b.qs[16], 0);
    float deq[32];
    pt_dequantize_row(PT_Q8_0, &b, deq, 32);
    cr_assert_eq(deq[17], 8 * 0.1259765625f);
    cr_assert_eq(deq[0], -127 * 0.1259765625f);

    // all zeros: d = 0 and quants 0
    memset(y, 0, sizeof y);
    pt_quantize_row(PT_Q8_0, y, &b, 32);
    cr_assert_eq(b.d, 0);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(b.qs[j], 0);
}

Test(q4_0, hand_checked_blocks)
{
    // x_j = (j % 16) - 8: largest magnitude is -8 (first), d = -8/-8 = 1,
    // nibble = x + 8 = j % 16; byte j holds value j (low) and j+16 (high)
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j % 16 - 8);
    block_q4_0 b;
    pt_quantize_row(PT_Q4_0, x, &b, 32);
    cr_assert_eq(b.d, 0x3C00);
    for (int j = 0; j < 16; j++)
        cr_assert_eq(b.qs[j], (uint8_t)(j * 0x11), "qs[%d]=0x%02X", j, b.qs[j]);
    float deq[32];
    pt_dequantize_row(PT_Q4_0, &b, deq, 32);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(deq[j], x[j]);

    // tie in magnitude: first wins -> max = 4, d = -0.5 (0xB800), id = -2:
    // 4 -> (int8)(-8 + 8.5) = 0; -4 -> (int8)(16.5) = 16 -> clipped 15; 0 -> 8
    memset(x, 0, sizeof x);
    x[0] = 4;
    x[1] = -4;
    x[17] = 1; // value 17 -> -2 + 8.5 = 6.5 -> 6, stored in high nibble of byte 1
    pt_quantize_row(PT_Q4_0, x, &b, 32);
    cr_assert_eq(b.d, 0xB800, "d=0x%04X", b.d);
    cr_assert_eq(b.qs[0], 0x80);
    cr_assert_eq(b.qs[1], 0x6F);
    for (int j = 2; j < 16; j++)
        cr_assert_eq(b.qs[j], 0x88);
    uint8_t raw[18];
    memcpy(raw, &b, 18);
    cr_assert_eq(raw[0], 0x00);
    cr_assert_eq(raw[1], 0xB8);
    cr_assert_eq(raw[2], 0x80);
    pt_dequantize_row(PT_Q4_0, &b, deq, 32);
    cr_assert_eq(deq[0], 4.0f);
    cr_assert_eq(deq[1], -3.5f); // clipped
    cr_assert_eq(deq[17], 1.0f);
    cr_assert_eq(deq[5], 0.0f);
}

Test(quant, error_bounds)
{
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static block_q8_0 b8[N / 32];
    static block_q4_0 b4[N / 32];
    for (int rep = 0; rep < 50; rep++) {
        // keep d a normal fp16 number (subnormal scales lose relative precision)
        float scale = ldexpf(1.0f, (int)(rnd32() % 14) - 6);
        for (int i = 0; i < N; i++)
            x[i] = rndf(-1, 1) * scale * ((rnd32() % 7) == 0 ? 8 : 1);
        pt_quantize_row(PT_Q8_0, x, b8, N);
        pt_dequantize_row(PT_Q8_0, b8, y, N);
        for (int blk = 0; blk < N / 32; blk++) {
            double amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmax(amax, fabs(x[blk * 32 + j]));
            double d = amax / 127;
            // |q - x/d| <= 1/2 and d is stored in fp16 (rel. error <= 2^-11)
            double bound = 0.5 * d + 127 * d * 0x1p-11 + amax * 1e-6;
            for (int j = 0; j < 32; j++)
                cr_assert_leq(fabs((double)y[blk * 32 + j] - x[blk * 32 + j]), bound);
        }
        pt_quantize_row(PT_Q4_0, x, b4, N);
        pt_dequantize_row(PT_Q4_0, b4, y, N);
        for (int blk = 0; blk < N / 32; blk++) {
            double amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmax(amax, fabs(x[blk * 32 + j]));
            double d = amax / 8;
            // rounding error d/2, except the clipped side (error <= d)
            double bound = d + 8 * d * 0x1p-11 + amax * 1e-6;
            for (int j = 0; j < 32; j++) {
                double e = fabs((double)y[blk * 32 + j] - x[blk * 32 + j]);
                cr_assert_leq(e, bound);
                // beyond d/2 only for values clipped at nibble 15 (|x| > 7.5 d)
                if (e > 0.5 * d + 8 * d * 0x1p-11 + amax * 1e-6)
                    cr_assert_geq(fabs(x[blk * 32 + j]), 7.4 * d);
            }
        }
    }
}

Test(quant, f16_bf16_rows)
{
    float x[5] = {1.0f, -2.5f, 65504.0f, 0x1p-24f, 3.14159f}, y[5];
    uint16_t h[5];
    pt_quantize_row(PT_F16, x, h, 5);
    pt_dequantize_row(PT_F16, h, y, 5);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(y[i], x[i]);
    cr_assert_float_eq(y[4], x[4], 2e-3);
    pt_quantize_row(PT_BF16, x, h, 5);
    pt_dequantize_row(PT_BF16, h, y, 5);
    cr_assert_eq(y[0], 1.0f);
    cr_assert_eq(y[1], -2.5f);
    cr_assert_float_eq(y[4], x[4], 2e-2);
}

// The SIMD row quantisers (used by pt_quantize_row on x86 paths) give the
// scalar code's bytes: random rows with ties, zero blocks and, for the float
// types, arbitrary bit patterns (NaN, inf, subnormals).
#include "kernels/matmul.h"

Test(quant, simd_rows_equal_scalar)
{
    if (!pt_kernel_path_supported(PT_PATH_AVX2)) {
        cr_log_info("no AVX2 on this CPU: only the scalar quantisers exist");
        return;
    }
    enum { N = 32 * 41 + 0 };
    static float x[N];
    static uint8_t a[N * 4], b[N * 4];
    const pt_dtype types[] = {PT_Q8_0, PT_Q4_0, PT_BF16, PT_F16};
    for (int rep = 0; rep < 300; rep++) {
        for (int i = 0; i < N; i++) {
            if (rep % 3 == 2)
                x[i] = bitsf(rnd32() ^ (rnd32() << 21));
            else
                x[i] = rndf(-1, 1) * ldexpf(1.0f, (int)(rnd32() % 12) - 6);
        }
        if (rep % 3 == 1)
            for (int blk = 0; blk < N / 32; blk++) {
                // ties in magnitude (first wins for q4_0), exact halves, zeros
                x[blk * 32 + (blk % 32)] = 4.0f;
                x[blk * 32 + ((blk + 7) % 32)] = -4.0f;
                x[blk * 32 + ((blk + 3) % 32)] = 2.0f;   // q8: 2 * 127/4 = 63.5 -> 64
                x[blk * 32 + ((blk + 5) % 32)] = -0.0f;
                if (blk % 5 == 0)
                    for (int j = 0; j < 32; j++)
                        x[blk * 32 + j] = 0.0f;
            }
        for (size_t ti = 0; ti < 4; ti++) {
            pt_dtype t = types[ti];
            if (rep % 3 == 2 && pt_dtype_is_block(t))
                continue; // block types need finite input
            size_t bytes = pt_row_bytes(t, N);
            pt_kernel_set_path(PT_PATH_SCALAR);
            pt_quantize_row(t, x, a, N);
            pt_kernel_set_path(PT_PATH_AVX2);
            pt_quantize_row(t, x, b, N);
            for (size_t k = 0; k < bytes; k++)
                cr_assert_eq(a[k], b[k], "%s rep %d byte %zu: scalar 0x%02X simd 0x%02X", pt_dtype_name(t),
                             rep, k, a[k], b[k]);
        }
        // odd lengths for the float types
        pt_kernel_set_path(PT_PATH_SCALAR);
        pt_quantize_row(PT_BF16, x, a, 13);
        pt_kernel_set_path(PT_PATH_AVX2);
        pt_quantize_row(PT_BF16, x, b, 13);
        cr_assert(memcmp(a, b, 26) == 0);
    }
    pt_kernel_set_path(PT_PATH_AUTO);
}

// kernels/qt_legacy.c — Q4_1, Q5_0 and Q5_1 (32-value blocks): ggml's
// dequantisation to the bit, the scalar dot products with Q8_0 / Q8_1
// activations (the 32-block contract of qtypes.h), and the three activation
// quantisers every quantised type's dot product starts from.
#include "kernels/qt_legacy.h"
#include "kernels/qt_blocks.h"
#include "kernels/kern_internal.h"
#include "kernels/qt_lanes.h"

#include <assert.h>
#include <math.h>
#include <string.h>

// ---- rounding ----------------------------------------------------------

// Round to nearest, ties to even, whatever the FPU rounding mode: truncf is
// mode-free and v - trunc(v) is exact. |v| < 2^23 (activations scaled to
// +-127 are far inside).
float pt_round_even(float v)
{
    const float t = truncf(v);
    const float f = fabsf(v - t);
    const float away = v < 0 ? t - 1.0f : t + 1.0f;
    if (f > 0.5f)
        return away;
    if (f < 0.5f)
        return t;
    return fmodf(t, 2.0f) != 0.0f ? away : t; // a tie: take the even one
}

// cvtps_epi32 of an already rounded value: NaN and values out of int32
// range give INT32_MIN ("integer indefinite"), as the x86 instruction
// does. Only a block whose amax is below ~7.5e-37 (so that 127 / amax is
// infinite) gets there; ggml's x86 code then stores -128s, and so does
// this.
static int32_t cvt_i32(float r)
{
    return r >= -2147483648.0f && r < 2147483648.0f ? (int32_t)r : INT32_MIN;
}

// int32 -> int8 with saturation, as the packs instructions
static int8_t sat8(int32_t v)
{
    return (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
}

// ---- activation quantisers ---------------------------------------------

// Q8_0 as ggml's x86 quantize_row_q8_0 (AVX2 branch), per 32 values:
// amax = max |x|; d = amax / 127 stored as fp16; id = 127 / amax (0 when
// amax == 0; NOT 1 / d as the reference quantiser has it); q = RNE(x * id),
// saturated to int8 as the packs instructions do.
void pt_actq_q8_0_scalar(const float *x, void *dst, int64_t n)
{
    assert(n % 32 == 0);
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = pt_f32_to_fp16(d);
        for (int j = 0; j < 32; j++)
            y[b].qs[j] = sat8(cvt_i32(pt_round_even(x[j] * id)));
    }
}

// Q8_1 as ggml's x86 quantize_row_q8_1 (AVX2 branch): Q8_0's quants and
// fp16 d, plus s = fp16(d * sum(q)) with the f32 (not fp16-rounded) d.
void pt_actq_q8_1_scalar(const float *x, void *dst, int64_t n)
{
    assert(n % 32 == 0);
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        // the sum is of the int32 values before saturation, wrapping, as
        // ggml's x86 code adds them (the same as the stored quants' sum
        // unless amax is degenerate, see cvt_i32)
        uint32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            const int32_t v = cvt_i32(pt_round_even(x[j] * id));
            y[b].qs[j] = sat8(v);
            sum += (uint32_t)v;
        }
        y[b].d = pt_f32_to_fp16(d);
        y[b].s = pt_f32_to_fp16(d * (float)(int32_t)sum);
    }
}

// Q8_K as ggml's quantize_row_q8_K_ref (what the x86 build runs), per 256
// values: max = the first value of largest magnitude, with its sign;
// iscale = -127 / max; q = min(127, RNE(iscale * x)); bsums = sums of 16;
// d = 1 / iscale in f32. An all-zero block gets d = 0, q = 0 and (unlike
// ggml, which leaves them as they were) bsums = 0; a block so small that
// iscale is infinite gets ggml's result there: q = 0, d = +-0 (bsums 0).
void pt_actq_q8_k_scalar(const float *x, void *dst, int64_t n)
{
    assert(n % QK_K == 0);
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -127.0f / max;
        if (isinf(iscale)) {
            // |max| < ~7.5e-37: ggml's nearest_int turns every inf / NaN
            // product into a quant of 0 (its int8 cast of -4194304 or 0)
            memset(&y[b], 0, sizeof y[b]);
            y[b].d = 1.0f / iscale;
            continue;
        }
        for (int j = 0; j < QK_K; j++) {
            const float r = pt_round_even(iscale * x[j]);
            y[b].qs[j] = (int8_t)(r > 127.0f ? 127 : (int)r);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += y[b].qs[g * 16 + j];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1.0f / iscale;
    }
}

// The public quantisers: the AVX2 code (same bytes) on every SIMD path.
static bool use_avx2(void)
{
#if defined(__x86_64__)
    return pt_kern_current() != &pt_kern_scalar;
#else
    return false;
#endif
}

void pt_actq_q8_0(const float *x, void *dst, int64_t n)
{
#if defined(__x86_64__)
    if (use_avx2()) {
        pt_actq_q8_0_avx2(x, dst, n);
        return;
    }
#endif
    pt_actq_q8_0_scalar(x, dst, n);
}

void pt_actq_q8_1(const float *x, void *dst, int64_t n)
{
#if defined(__x86_64__)
    if (use_avx2()) {
        pt_actq_q8_1_avx2(x, dst, n);
        return;
    }
#endif
    pt_actq_q8_1_scalar(x, dst, n);
}

void pt_actq_q8_k(const float *x, void *dst, int64_t n)
{
    assert(n % QK_K == 0);
#if defined(__x86_64__)
    if (use_avx2()) {
        pt_actq_q8_k_avx2(x, dst, n);
        return;
    }
#endif
    pt_actq_q8_k_scalar(x, dst, n);
}

// ---- dequantisation (ggml's dequantize_row_*, same f32 operations) -----

void pt_deq_q4_1(const void *src, float *y, int64_t n)
{
    assert(n % 32 == 0);
    const pt_blk_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = pt_fp16_to_f32(b[i].d), m = pt_fp16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

// The 5-bit quants 0..31 of a Q5_0 / Q5_1 block in value order.
static void q5_unpack(const uint8_t qh4[4], const uint8_t qs[16], uint8_t q[32])
{
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (uint8_t)((qs[j] & 0xF) | (((qh >> j) & 1) << 4));
        q[j + 16] = (uint8_t)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}

void pt_deq_q5_0(const void *src, float *y, int64_t n)
{
    assert(n % 32 == 0);
    const pt_blk_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = pt_fp16_to_f32(b[i].d);
        uint8_t q[32];
        q5_unpack(b[i].qh, b[i].qs, q);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(q[j] - 16) * d;
    }
}

void pt_deq_q5_1(const void *src, float *y, int64_t n)
{
    assert(n % 32 == 0);
    const pt_blk_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = pt_fp16_to_f32(b[i].d), m = pt_fp16_to_f32(b[i].m);
        uint8_t q[32];
        q5_unpack(b[i].qh, b[i].qs, q);
        for (int j = 0; j < 32; j++)
            y[j] = (float)q[j] * d + m;
    }
}

// ---- scalar dot products -----------------------------------------------
//
// Contract: the f32 arithmetic of ggml's x86 (AVX2) kernels
// ggml_vec_dot_q4_1_q8_1 / q5_0_q8_0 / q5_1_q8_1, so that a row's dot
// product is bit-identical to llama.cpp's (for Q5_0's dense products
// llama.cpp runs llamafile's tinyBLAS_Q0_AVX instead, which per output does
// the same operations: per block an fma of d_w * d_x with the same eight
// lane sums, then the same horizontal sum; sgemm.cpp). Per block b,
// in order, with eight f32 lanes acc[l] and one f32 summs, all from +0:
//   lane sums p_l = sum_{v<4} q(4l + v) * x(4l + v), exact int32 (lane l
//   of ggml's 32-byte register), q the unsigned quants (Q4_1: 0..15,
//   Q5_1: 0..31) or q - 16 (Q5_0)
//   acc[l] = fmaf(d_w * d_x, (float)p_l, acc[l])
//   Q4_1 / Q5_1 also: summs = fmaf(m_w, s_x, summs)  (ggml's
//   `summs += m * s`, contracted to an fma by its -march=native build)
// result = ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)) + summs (ggml's hsum_float_8)
// d_w * d_x is a product of two fp16 values, exact in f32.

// One block's lane sums into acc: q (32, value order) times x.
static void lanes_fma(const int8_t q[32], const int8_t x[32], float dd, float acc[8])
{
    for (int l = 0; l < 8; l++) {
        int32_t p = 0;
        for (int v = 0; v < 4; v++)
            p += q[4 * l + v] * x[4 * l + v];
        acc[l] = fmaf(dd, (float)p, acc[l]);
    }
}

float pt_vdot_q4_1_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % 32 == 0);
    const pt_blk_q4_1 *b = w;
    const block_q8_1 *x = xq;
    float acc[8] = {0}, summs = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int8_t q[32];
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)(b[i].qs[j] & 0xF);
            q[j + 16] = (int8_t)(b[i].qs[j] >> 4);
        }
        summs = fmaf(pt_fp16_to_f32(b[i].m), pt_fp16_to_f32(x[i].s), summs);
        lanes_fma(q, x[i].qs, pt_fp16_to_f32(b[i].d) * pt_fp16_to_f32(x[i].d), acc);
    }
    return qt_hsum8(acc) + summs;
}

float pt_vdot_q5_0_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % 32 == 0);
    const pt_blk_q5_0 *b = w;
    const block_q8_0 *x = xq;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        uint8_t u[32];
        int8_t q[32];
        q5_unpack(b[i].qh, b[i].qs, u);
        for (int j = 0; j < 32; j++)
            q[j] = (int8_t)(u[j] - 16);
        lanes_fma(q, x[i].qs, pt_fp16_to_f32(b[i].d) * pt_fp16_to_f32(x[i].d), acc);
    }
    return qt_hsum8(acc);
}

float pt_vdot_q5_1_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % 32 == 0);
    const pt_blk_q5_1 *b = w;
    const block_q8_1 *x = xq;
    float acc[8] = {0}, summs = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        uint8_t u[32];
        int8_t q[32];
        q5_unpack(b[i].qh, b[i].qs, u);
        for (int j = 0; j < 32; j++)
            q[j] = (int8_t)u[j];
        summs = fmaf(pt_fp16_to_f32(b[i].m), pt_fp16_to_f32(x[i].s), summs);
        lanes_fma(q, x[i].qs, pt_fp16_to_f32(b[i].d) * pt_fp16_to_f32(x[i].d), acc);
    }
    return qt_hsum8(acc) + summs;
}

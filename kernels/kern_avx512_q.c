// kernels/kern_avx512_q.c — the AVX-512 path's Q4_0 / Q8_0 products on
// 512-bit registers, and its activation quantiser. Bit-identical to
// kern_scalar.c and to ggml's x86 ggml_vec_dot_q{4,8}_0_q8_0 (contract:
// kern_internal.h): per block, the eight exact int32 sums of 4 consecutive
// products meet fp32(d_w) * fp32(d_x) in one fma into eight f32 lanes.
//
// Each lane's chain is sequential over blocks, so one zmm carries the same
// block of two independent chains side by side: rows r and r + 1 against
// one vector (GEMV; the activation block is broadcast to both halves) or
// one row against vectors j and j + 1 (GEMM; the weight block broadcast).
// GEMV runs four rows (two zmm chains) per pass over the activation.
// - vpdpbusd multiplies u8 by s8, so the weights are made unsigned and the
//   offset taken out in the accumulator's start value: Q4_0 uses the raw
//   nibbles (0..15), start -8 * (sum of the activation's 4 quants of the
//   lane); Q8_0 flips the sign bit (w + 128), start -128 * that sum. The
//   start is one vpdpbusd of the activation per block, shared by all rows;
//   every partial sum is exact in int32, so the lane sums are ggml's.
// - the scale product d_w * d_x of each block is the f32 product of the two
//   (rounded once, as ggml's), broadcast over the block's eight lanes.
// Activation layout: natural (block b at b * 32), for both types.
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define KX_TGT "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define TGT __attribute__((target(KX_TGT)))
#define TGTI __attribute__((target(KX_TGT), always_inline)) inline

// Software prefetch distance in bytes ahead of the weight stream (0: none).
#ifndef KZ_PREFETCH
#define KZ_PREFETCH 1024
#endif

// ---- activation quantisation ------------------------------------------------

// Same result as pt_quant_act_scalar, bit for bit (ggml's x86
// quantize_row_q8_0: id = 127 / amax, products rounded to nearest even),
// one block per step on two zmm, natural layout.
#define KZ_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) // a constant, as the intrinsic needs

TGT void pt_quant_act_avx512(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8)
{
    assert(nb >= 0 && qs && d && s8);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float db = amax / 127.0f;
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), KZ_RNE);
        const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), KZ_RNE);
        (void)paired; // one layout for both types
        int8_t *lo = qs + b * QK, *hi = lo + 16;
        _mm_storeu_si128((__m128i *)lo, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)hi, _mm512_cvtepi32_epi8(q1));
        s8[b] = 8 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT));
    }
}

// ---- products ------------------------------------------------------------------

static TGTI uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static TGTI float dw_of(const uint8_t *wb) { return _cvtsh_ss(ld16(wb)); }

// 32 weights of a block, unsigned (Q4_0: 16 low nibbles then 16 high ones,
// 0..15; Q8_0: w + 128), in a ymm.
static TGTI __m256i wq_u(bool q8, const uint8_t *wb)
{
    if (q8)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wb + 2)), _mm256_set1_epi8((char)0x80));
    const __m128i t = _mm_loadu_si128((const __m128i *)(wb + 2));
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

// Two blocks' unsigned weights side by side (a in the low half).
static TGTI __m512i wq_u2(bool q8, const uint8_t *wa, const uint8_t *wb)
{
    if (q8) {
        const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(wa + 2))),
                                             _mm256_loadu_si256((const __m256i *)(wb + 2)), 1);
        return _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
    }
    // [ta, ta, tb, tb] by broadcast loads (no shuffle port), the odd
    // 128-bit lanes then shifted down by a nibble
    __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(wa + 2)));
    z = _mm512_mask_broadcast_i32x4(z, 0xFF00, _mm_loadu_si128((const __m128i *)(wb + 2)));
    z = _mm512_mask_srli_epi16(z, 0xFF00FF00u, z, 4);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
}

// [fp32(d_a) x 8 | fp32(d_b) x 8] from the blocks' fp16 scales.
static TGTI __m512 dw2(const uint8_t *wa, const uint8_t *wb)
{
    const __m128i ha = _mm_set1_epi16((short)ld16(wa)), hb = _mm_set1_epi16((short)ld16(wb));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(ha), hb, 1));
}

// Start value of the lanes: -off * (sum of the 4 activation quants of each
// lane), off 8 (Q4_0) or 128 (Q8_0); xx holds activation blocks.
static TGTI __m512i start(bool q8, __m512i xx)
{
    const __m512i off = _mm512_set1_epi8(q8 ? (char)0x80 : 8);
    return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, xx));
}

// [a x 8 | b x 8]
static TGTI __m512 bcast2(float a, float b)
{
    const __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(a)));
    return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

// ggml's hsum_float_8 of each half: lanes 0-7 -> *y0, 8-15 -> *y1.
static TGTI float hsum8(__m256 a)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

static TGTI void hsum2(__m512 a, float *y0, float *y1)
{
    *y0 = hsum8(_mm512_castps512_ps256(a));
    *y1 = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

// NP pairs of rows (rows 2p, 2p + 1 at w + row * rb), NP in 1..2, · one
// vector -> y[0 .. 2 * NP).
static TGTI void rows_q(bool q8, int np, const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, int64_t nb,
                        float *y)
{
    const size_t bs = q8 ? 34 : 18;
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const __m512i xx = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)(xq + b * QK)));
        const __m512i s0 = start(q8, xx);
        const __m512 dx = _mm512_set1_ps(xd[b]);
#pragma GCC unroll 2
        for (int p = 0; p < np; p++) {
            const uint8_t *wa = w + 2 * p * rb + b * bs, *wb = wa + rb;
            if (KZ_PREFETCH) {
                _mm_prefetch((const char *)wa + KZ_PREFETCH, _MM_HINT_T0);
                _mm_prefetch((const char *)wb + KZ_PREFETCH, _MM_HINT_T0);
            }
            const __m512i s = _mm512_dpbusd_epi32(s0, wq_u2(q8, wa, wb), xx);
            // d_w * d_x exact in f32 (11 x 11 bits), as ggml's scalar product
            acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dw2(wa, wb), dx), _mm512_cvtepi32_ps(s), acc[p]);
        }
    }
#pragma GCC unroll 2
    for (int p = 0; p < np; p++)
        hsum2(acc[p], y + 2 * p, y + 2 * p + 1);
}

// One row (nr = 1) · one vector, ymm: the leftover row of a GEMV.
static TGTI float row1_q(bool q8, const uint8_t *w, const int8_t *xq, const float *xd, int64_t nb)
{
    const size_t bs = q8 ? 34 : 18;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bs;
        const __m256i x = _mm256_load_si256((const __m256i *)(xq + b * QK));
        const __m256i s0 = _mm512_castsi512_si256(start(q8, _mm512_castsi256_si512(x)));
        const __m256i s = _mm256_dpbusd_epi32(s0, wq_u(q8, wb), x);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dw_of(wb) * xd[b]), _mm256_cvtepi32_ps(s), acc);
    }
    return hsum8(acc);
}

// One weight row · four vectors (v .. v+3) -> y[j * ldy]: vectors in pairs
// side by side, the weight block broadcast to both halves.
static TGTI void row_x4(bool q8, const uint8_t *w, const pt_q8act *x, int64_t v, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    const size_t bs = q8 ? 34 : 18;
    const int8_t *xq[4];
    const float *xd[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        xq[j] = x->qs + (v + j) * nb * QK;
        xd[j] = x->d + (v + j) * nb;
    }
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bs;
        const __m512i wu = _mm512_broadcast_i64x4(wq_u(q8, wb));
        const __m512 dw = _mm512_set1_ps(dw_of(wb));
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m512i xx = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(xq[2 * p] + b * QK))),
                _mm256_load_si256((const __m256i *)(xq[2 * p + 1] + b * QK)), 1);
            const __m512i s = _mm512_dpbusd_epi32(start(q8, xx), wu, xx);
            acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, bcast2(xd[2 * p][b], xd[2 * p + 1][b])),
                                     _mm512_cvtepi32_ps(s), acc[p]);
        }
    }
    hsum2(acc[0], y, y + ldy);
    hsum2(acc[1], y + 2 * ldy, y + 3 * ldy);
}

// ---- tiles ---------------------------------------------------------------------

// Rows x vectors (pt_qtile_fn): vectors in fours (each weight block loaded
// and unpacked once for four), then the remaining vectors one at a time,
// rows in fours, pairs, then one.
TGT void pt_qtile_avx512(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x, int64_t v0,
                         int64_t nvec, float *y, int64_t ldy)
{
    assert(t == PT_Q4_0 || t == PT_Q8_0);
    assert(w && x && y && nrows >= 0 && nvec >= 0);
    const int64_t nb = x->nb;
    const bool q8 = t == PT_Q8_0;
    int64_t v = 0;
    for (; v + 4 <= nvec; v += 4) {
        if (q8)
            for (int64_t r = 0; r < nrows; r++)
                row_x4(true, w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
        else
            for (int64_t r = 0; r < nrows; r++)
                row_x4(false, w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
    }
    for (; v < nvec; v++) {
        const int8_t *xq = x->qs + (v0 + v) * nb * QK;
        const float *xd = x->d + (v0 + v) * nb;
        float *yv = y + v * ldy;
        int64_t r = 0;
        if (q8) {
            for (; r + 4 <= nrows; r += 4)
                rows_q(true, 2, w + r * rb, rb, xq, xd, nb, yv + r);
            for (; r + 2 <= nrows; r += 2)
                rows_q(true, 1, w + r * rb, rb, xq, xd, nb, yv + r);
            for (; r < nrows; r++)
                yv[r] = row1_q(true, w + r * rb, xq, xd, nb);
        } else {
            for (; r + 4 <= nrows; r += 4)
                rows_q(false, 2, w + r * rb, rb, xq, xd, nb, yv + r);
            for (; r + 2 <= nrows; r += 2)
                rows_q(false, 1, w + r * rb, rb, xq, xd, nb, yv + r);
            for (; r < nrows; r++)
                yv[r] = row1_q(false, w + r * rb, xq, xd, nb);
        }
    }
}

#endif

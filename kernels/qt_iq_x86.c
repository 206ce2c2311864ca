// kernels/qt_iq_x86.c — AVX2 (and AVX-512 VNNI) dot products of the
// i-quants, bit-identical to the scalar ones in qt_iq.c: the integer sums
// are computed with vector instructions (maddubs / madd, or dpbusd), then
// reduced to the same exact int32 (integer addition is associative), and
// meet their float scales in the same scalar f32 steps as the contract
// written above each scalar function. Compiled per function with target
// attributes (no -march flag); matmul.c chooses the path at run time.
//
// Products: a grid magnitude (u8) times an activation quant with the
// weight's sign folded in (sign_epi8, never overflowing: quants are in
// [-127, 127]); maddubs sums pairs into int16 (|pair| <= 2 * 127 * 127 <
// 2^15, no saturation), madd with the block scale widens to int32.
#include "kernels/qt_iq.h"
#include "kernels/qt_iq_grid.h"
#include "kernels/qtypes.h"
#include "kernels/kern_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <assert.h>
#include <math.h>
#include <string.h>

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGTI __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#define TGT512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

static TGTI float h2f(const uint8_t *p) { return _cvtsh_ss(pt_iq_u16(p)); }

static TGTI int32_t hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

// u8 magnitudes `w` times signed quants `q` (signs already applied), pairs
// summed to int16, then madd with the int16 scales `sc` into int32 lanes.
static TGTI __m256i mul_scaled(__m256i w, __m256i q, __m256i sc)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, q), sc);
}

// Eight sign bytes (one per 8 values; bit j of byte l = value 8l + j is
// negative) of 32 values -> +1 / -1 per value. `bytes` holds the 4 sign bytes
// of the 32 values in its low 32 bits.
static TGTI __m256i signs_from_bytes(uint32_t bytes)
{
    const __m256i sel = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                          0x0101010101010101, 0x0000000000000000);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ull);
    const __m256i s = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)bytes), sel);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(s, bit), bit);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

// Four 7-bit ksigns indices (bits 0..27 of `aux`) -> +1 / -1 per value.
static TGTI __m256i signs_from_ksigns(uint32_t aux)
{
    return _mm256_set_epi64x((int64_t)pt_ksigns_pm1[(aux >> 21) & 127], (int64_t)pt_ksigns_pm1[(aux >> 14) & 127],
                             (int64_t)pt_ksigns_pm1[(aux >> 7) & 127], (int64_t)pt_ksigns_pm1[aux & 127]);
}

// ---- IQ4_NL / IQ4_XS -------------------------------------------------------

// The 32 levels of one IQ4 32-block (16 nibble bytes) as int8, in value order.
static TGTI __m256i iq4_levels(const uint8_t *q)
{
    const __m128i tab = _mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i b = _mm_loadu_si128((const __m128i *)q);
    return _mm256_set_m128i(_mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                            _mm_shuffle_epi8(tab, _mm_and_si128(b, m4)));
}

// Exact dot of signed levels `w` with quants `q`: |w| x sign(q, w).
static TGTI __m256i dot_signed(__m256i w, __m256i q, __m256i sc)
{
    return mul_scaled(_mm256_sign_epi8(w, w), _mm256_sign_epi8(q, w), sc);
}

TGT float pt_vdot_iq4_xs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint16_t sh = pt_iq_u16(x[i].scales_h);
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | ((sh >> 2 * ib) & 3) << 4) - 32;
            const __m256i wl = iq4_levels(x[i].qs + 16 * ib);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            sum = _mm256_add_epi32(sum, dot_signed(wl, q8, _mm256_set1_epi16((int16_t)ls)));
        }
        const float ds = h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)hsum_i32(sum), acc);
    }
    return acc;
}

// Lane k of the result = sum of the 8 int32 lanes of p[k].
static TGTI __m256i fold8(const __m256i p[8])
{
    const __m256i a = _mm256_hadd_epi32(p[0], p[1]), b = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i c = _mm256_hadd_epi32(p[4], p[5]), d = _mm256_hadd_epi32(p[6], p[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

TGT float pt_vdot_iq4_nl_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK == 0);
    const pt_blk_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    const int64_t nb = n / QK, nb8 = nb / 8 * 8;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb8; b0 += 8) {
        __m256i p[8];
        uint16_t dw[8], dx[8];
        for (int k = 0; k < 8; k++) {
            const int64_t b = b0 + k;
            p[k] = dot_signed(iq4_levels(x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs), ones);
            dw[k] = pt_iq_u16(x[b].d);
            dx[k] = y[b].d;
        }
        const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dw)),
                                        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dx)));
        vacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(fold8(p)), dd, vacc);
    }
    float acc[8];
    _mm256_storeu_ps(acc, vacc);
    for (int64_t b = nb8; b < nb; b++) {
        const int32_t s = hsum_i32(dot_signed(iq4_levels(x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs), ones));
        acc[b % 8] = fmaf((float)s, h2f(x[b].d) * _cvtsh_ss(y[b].d), acc[b % 8]);
    }
    return pt_reduce8(acc);
}

// ---- IQ2 ---------------------------------------------------------------------

TGT float pt_vdot_iq2_xxs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xxs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = pt_iq_u32(q + 4);
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq2xxs_grid[q[3]], (int64_t)pt_iq2xxs_grid[q[2]],
                                                (int64_t)pt_iq2xxs_grid[q[1]], (int64_t)pt_iq2xxs_grid[q[0]]);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i sc = _mm256_set1_epi16((int16_t)(2 * (aux >> 28) + 1));
            sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, signs_from_ksigns(aux)), sc));
        }
        const float ds = 0.125f * h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)hsum_i32(sum), acc);
    }
    return acc;
}

// int16 scales 2 * s + 1 of the two 16-value halves of a 32-block (low
// nibble: first half, in the low 128 bits).
static TGTI __m256i half_scales(uint8_t sc)
{
    return _mm256_set_m128i(_mm_set1_epi16((int16_t)(2 * (sc >> 4) + 1)), _mm_set1_epi16((int16_t)(2 * (sc & 0xf) + 1)));
}

TGT float pt_vdot_iq2_xs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint16_t q[4];
            for (int l = 0; l < 4; l++)
                q[l] = pt_iq_u16(x[i].qs + 2 * (4 * ib + l));
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq2xs_grid[q[3] & 511], (int64_t)pt_iq2xs_grid[q[2] & 511],
                                                (int64_t)pt_iq2xs_grid[q[1] & 511], (int64_t)pt_iq2xs_grid[q[0] & 511]);
            const __m256i s = _mm256_set_epi64x((int64_t)pt_ksigns_pm1[q[3] >> 9], (int64_t)pt_ksigns_pm1[q[2] >> 9],
                                                (int64_t)pt_ksigns_pm1[q[1] >> 9], (int64_t)pt_ksigns_pm1[q[0] >> 9]);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, s), half_scales(x[i].scales[ib])));
        }
        const float ds = 0.125f * h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)hsum_i32(sum), acc);
    }
    return acc;
}

TGT float pt_vdot_iq2_s_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_s *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = x[i].qs + 4 * ib;
            const int qh = x[i].qh[ib];
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq2s_grid[qs[3] | ((qh << 2) & 0x300)],
                                                (int64_t)pt_iq2s_grid[qs[2] | ((qh << 4) & 0x300)],
                                                (int64_t)pt_iq2s_grid[qs[1] | ((qh << 6) & 0x300)],
                                                (int64_t)pt_iq2s_grid[qs[0] | ((qh << 8) & 0x300)]);
            const __m256i s = signs_from_bytes(pt_iq_u32(x[i].signs + 4 * ib));
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, s), half_scales(x[i].scales[ib])));
        }
        const float ds = 0.125f * h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)hsum_i32(sum), acc);
    }
    return acc;
}

// ---- IQ3 ---------------------------------------------------------------------

TGT float pt_vdot_iq3_xxs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_xxs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = pt_iq_u32(x[i].sas + 4 * ib);
            const __m256i g = _mm256_set_epi32((int)pt_iq3xxs_grid[q[7]], (int)pt_iq3xxs_grid[q[6]],
                                               (int)pt_iq3xxs_grid[q[5]], (int)pt_iq3xxs_grid[q[4]],
                                               (int)pt_iq3xxs_grid[q[3]], (int)pt_iq3xxs_grid[q[2]],
                                               (int)pt_iq3xxs_grid[q[1]], (int)pt_iq3xxs_grid[q[0]]);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i sc = _mm256_set1_epi16((int16_t)(2 * (aux >> 28) + 1));
            sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, signs_from_ksigns(aux)), sc));
        }
        const float ds = 0.25f * h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)hsum_i32(sum), acc);
    }
    return acc;
}

TGT float pt_vdot_iq3_s_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_s *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const int qh = x[i].qh[ib];
            int idx[8];
            for (int k = 0; k < 8; k++)
                idx[k] = q[k] | ((qh << (8 - k)) & 256);
            const __m256i g = _mm256_set_epi32((int)pt_iq3s_grid[idx[7]], (int)pt_iq3s_grid[idx[6]],
                                               (int)pt_iq3s_grid[idx[5]], (int)pt_iq3s_grid[idx[4]],
                                               (int)pt_iq3s_grid[idx[3]], (int)pt_iq3s_grid[idx[2]],
                                               (int)pt_iq3s_grid[idx[1]], (int)pt_iq3s_grid[idx[0]]);
            const __m256i s = signs_from_bytes(pt_iq_u32(x[i].signs + 4 * ib));
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const int sc = ib % 2 ? x[i].scales[ib / 2] >> 4 : x[i].scales[ib / 2] & 0xf;
            sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, s), _mm256_set1_epi16((int16_t)(2 * sc + 1))));
        }
        const float ds = h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)hsum_i32(sum), acc);
    }
    return acc;
}

// ---- IQ1 ---------------------------------------------------------------------

// Exact sum over 32 values of (signed grid value) * q8, pairs in int16 and
// then madd with the scales `sc`: sign_epi8 multiplies by -1 / 0 / +1.
static TGTI __m256i dot_ternary(__m256i g, __m256i q8, __m256i sc)
{
    return mul_scaled(_mm256_set1_epi8(1), _mm256_sign_epi8(q8, g), sc);
}

TGT float pt_vdot_iq1_s_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_s *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
        int32_t dsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib;
            const uint16_t qh = pt_iq_u16(x[i].qh + 2 * ib);
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq1s_grid[q[3] | ((qh >> 9) & 7) << 8],
                                                (int64_t)pt_iq1s_grid[q[2] | ((qh >> 6) & 7) << 8],
                                                (int64_t)pt_iq1s_grid[q[1] | ((qh >> 3) & 7) << 8],
                                                (int64_t)pt_iq1s_grid[q[0] | (qh & 7) << 8]);
            const int16_t ls = (int16_t)(2 * ((qh >> 12) & 7) + 1);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            sum = _mm256_add_epi32(sum, dot_ternary(g, q8, _mm256_set1_epi16(ls)));
            const int32_t b = y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1];
            dsum += ls * (qh & 0x8000 ? -b : b);
        }
        const float ds = 0.125f * h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)(8 * hsum_i32(sum) + dsum), acc);
    }
    return acc;
}

TGT float pt_vdot_iq1_m_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_m *x = w;
    const block_q8_K *y = xq;
    const __m256i ones8 = _mm256_set1_epi8(1);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256(), dsum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib;
            const uint8_t h0 = x[i].qh[2 * ib], h1 = x[i].qh[2 * ib + 1];
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq1s_grid[q[3] | ((h1 << 4) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[2] | ((h1 << 8) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[1] | ((h0 << 4) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[0] | ((h0 << 8) & 0x700)]);
            // +1 / -1 per 8-group: the delta signs
            const __m256i e = _mm256_set_epi64x(h1 & 0x80 ? -1 : 0x0101010101010101, h1 & 0x08 ? -1 : 0x0101010101010101,
                                                h0 & 0x80 ? -1 : 0x0101010101010101, h0 & 0x08 ? -1 : 0x0101010101010101);
            const uint16_t sw = pt_iq_u16(x[i].scales + 2 * (ib / 2));
            const int sh = 6 * (ib % 2);
            const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((int16_t)(2 * ((sw >> (sh + 3)) & 7) + 1)),
                                                _mm_set1_epi16((int16_t)(2 * ((sw >> sh) & 7) + 1)));
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            sum = _mm256_add_epi32(sum, dot_ternary(g, q8, sc));
            dsum = _mm256_add_epi32(dsum, mul_scaled(ones8, _mm256_sign_epi8(q8, e), sc));
        }
        const float ds = 0.125f * _cvtsh_ss(pt_iq1m_scale(&x[i])) * y[i].d;
        acc = fmaf(ds, (float)(8 * hsum_i32(sum) + hsum_i32(dsum)), acc);
    }
    return acc;
}

// ---- AVX-512 VNNI: the 32-block types, where dpbusd replaces maddubs + madd

static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m256i iq4_dot_vnni(const uint8_t *qs, const int8_t *q8)
{
    const __m128i tab = _mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i wl = _mm256_set_m128i(_mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                                        _mm_shuffle_epi8(tab, _mm_and_si128(b, m4)));
    const __m256i q = _mm256_loadu_si256((const __m256i *)q8);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(wl, wl), _mm256_sign_epi8(q, wl));
}

TGT512 float pt_vdot_iq4_nl_avx512(const void *w, const void *xq, int64_t n)
{
    assert(n % QK == 0);
    const pt_blk_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    const int64_t nb = n / QK, nb8 = nb / 8 * 8;
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb8; b0 += 8) {
        __m256i p[8];
        uint16_t dw[8], dx[8];
        for (int k = 0; k < 8; k++) {
            const int64_t b = b0 + k;
            p[k] = iq4_dot_vnni(x[b].qs, y[b].qs);
            dw[k] = pt_iq_u16(x[b].d);
            dx[k] = y[b].d;
        }
        const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dw)),
                                        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dx)));
        vacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(fold8(p)), dd, vacc);
    }
    float acc[8];
    _mm256_storeu_ps(acc, vacc);
    for (int64_t b = nb8; b < nb; b++) {
        const int32_t s = hsum_i32(iq4_dot_vnni(x[b].qs, y[b].qs));
        acc[b % 8] = fmaf((float)s, h2f(x[b].d) * _cvtsh_ss(y[b].d), acc[b % 8]);
    }
    return pt_reduce8(acc);
}

TGT512 float pt_vdot_iq4_xs_avx512(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint16_t sh = pt_iq_u16(x[i].scales_h);
        __m256i sum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | ((sh >> 2 * ib) & 3) << 4) - 32;
            sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(iq4_dot_vnni(x[i].qs + 16 * ib, y[i].qs + 32 * ib),
                                                           _mm256_set1_epi32(ls)));
        }
        const float ds = h2f(x[i].d) * y[i].d;
        acc = fmaf(ds, (float)hsum_i32(sum), acc);
    }
    return acc;
}

#endif

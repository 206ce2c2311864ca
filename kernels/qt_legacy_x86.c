// kernels/qt_legacy_x86.c — AVX2 activation quantisers (Q8_0, Q8_1, Q8_K)
// and AVX2 / AVX-512 dot products of Q4_1, Q5_0, Q5_1, bit-identical to the scalar
// code of qt_legacy.c. Compiled per function with target attributes.
//
// Quantisers: the same IEEE operations as the scalar ones, with
// _mm256_round_ps(TO_NEAREST_INT) for the ties-to-even rounding (what
// ggml's own x86 code uses; it ignores the MXCSR mode).
// Dot products: ggml's own AVX2 loop (qt_legacy.c's contract): per block
// the eight int32 lane sums of maddubs + madd (or one vpdpbusd), converted
// and fma'd with d_w * d_x into eight f32 lanes; the min term in a scalar.
#include "kernels/qt_legacy.h"
#include "kernels/qt_blocks.h"

#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGTI __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

// ---- activation quantisers -------------------------------------------------

TGTI float hmax8(__m256 m)
{
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

TGTI __m256i rne_i32(__m256 v, __m256 s)
{
    return _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 4 x 8 int32 -> 32 int8 in order (saturating, as the packs instructions)
TGTI __m256i pack32(__m256i q0, __m256i q1, __m256i q2, __m256i q3)
{
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3)),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

TGTI int32_t hsum_i32(__m256i a)
{
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    return _mm_cvtsi128_si32(t);
}

// One block of 32 as ggml's x86 quantize_row_q8_0 / q8_1: returns d (f32),
// stores the quants, *sum = sum of the quants.
TGTI float q8_block(const float *x, int8_t *qs, int32_t *sum)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const float amax = hmax8(_mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                           _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3))));
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i q0 = rne_i32(v0, id), q1 = rne_i32(v1, id), q2 = rne_i32(v2, id), q3 = rne_i32(v3, id);
    _mm256_storeu_si256((__m256i *)qs, pack32(q0, q1, q2, q3));
    // the sum of the int32 values before the pack, as ggml's x86 code
    // (equal to the stored quants' sum: |q| <= 127 unless 127 / amax is inf)
    *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    return d;
}

TGT void pt_actq_q8_0_avx2(const float *x, void *dst, int64_t n)
{
    assert(n % 32 == 0);
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / 32; b++) {
        int32_t sum;
        const float d = q8_block(x + 32 * b, y[b].qs, &sum);
        y[b].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    }
}

TGT void pt_actq_q8_1_avx2(const float *x, void *dst, int64_t n)
{
    assert(n % 32 == 0);
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / 32; b++) {
        int32_t sum;
        const float d = q8_block(x + 32 * b, y[b].qs, &sum);
        y[b].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[b].s = (uint16_t)_cvtss_sh(d * (float)sum, _MM_FROUND_TO_NEAREST_INT);
    }
}

// Sums of 16 consecutive int32 in order: g[k] = v[2k] + v[2k+1] summed
// over lanes, for 8 groups (16 vectors) -> 8 int32 in group order.
TGTI __m256i group_sums8(const __m256i *v)
{
    __m256i s[8];
    for (int k = 0; k < 8; k++)
        s[k] = _mm256_add_epi32(v[2 * k], v[2 * k + 1]);
    const __m256i h01 = _mm256_hadd_epi32(s[0], s[1]), h23 = _mm256_hadd_epi32(s[2], s[3]);
    const __m256i h45 = _mm256_hadd_epi32(s[4], s[5]), h67 = _mm256_hadd_epi32(s[6], s[7]);
    const __m256i a = _mm256_hadd_epi32(h01, h23), c = _mm256_hadd_epi32(h45, h67);
    // a: (g0 g1 g2 g3 | g0' g1' g2' g3') halves of each group; same for c
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, c, 0x20), _mm256_permute2x128_si256(a, c, 0x31));
}

// Q8_K as quantize_row_q8_K_ref (qt_legacy.c's contract): max by magnitude
// with its sign (the first such value), iscale = -127 / max, RNE, min 127
// (the packs saturation), bsums, d = 1 / iscale.
TGT void pt_actq_q8_k_avx2(const float *x, void *dst, int64_t n)
{
    assert(n % QK_K == 0);
    block_q8_K *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        const float amax = hmax8(m);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        // the first value whose magnitude is amax
        const __m256 va = _mm256_set1_ps(amax);
        int first = 0;
        for (int j = 0; j < QK_K; j += 8) {
            const int mk = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
            if (mk) {
                first = j + __builtin_ctz((unsigned)mk);
                break;
            }
        }
        const float iscale = -127.0f / x[first];
        if (isinf(iscale)) { // as the scalar code (qt_legacy.c)
            memset(&y[b], 0, sizeof y[b]);
            y[b].d = 1.0f / iscale;
            continue;
        }
        const __m256 vs = _mm256_set1_ps(iscale);
        __m256i q[32];
        for (int k = 0; k < 32; k++)
            q[k] = rne_i32(_mm256_loadu_ps(x + 8 * k), vs);
        for (int k = 0; k < 8; k++)
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * k), pack32(q[4 * k], q[4 * k + 1], q[4 * k + 2], q[4 * k + 3]));
        // bsums from the stored (saturated) quants: clamp first (only +128 can occur)
        const __m256i c127 = _mm256_set1_epi32(127);
        for (int k = 0; k < 32; k++)
            q[k] = _mm256_min_epi32(q[k], c127);
        const __m256i g0 = group_sums8(q), g1 = group_sums8(q + 16);
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(g0, g1), 0xD8);
        _mm256_storeu_si256((__m256i *)y[b].bsums, p);
        y[b].d = 1.0f / iscale;
    }
}

// ---- dot products ------------------------------------------------------------

// 32 5-bit (or 4-bit when qh == NULL) unsigned quants of one block in value
// order: low nibbles (values 0-15) in the low 128-bit lane, high nibbles
// (16-31) in the high lane, plus 16 where bit j of qh is set.
TGTI __m256i quants32(const uint8_t *qs, const uint8_t *qh)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0xF));
    if (qh) {
        uint32_t h;
        memcpy(&h, qh, 4);
        // byte j gets byte j / 8 of h, then its bit j % 8 -> 0xFF
        const __m256i hb = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit);
        v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(16)));
    }
    return v;
}

// exact int32 partial sums (8 lanes) of unsigned u (0..31) times signed x:
// maddubs + madd (AVX2), or one vpdpbusd (AVX-512 VNNI)
TGTI __m256i dot_u(__m256i u, __m256i x)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
}

#define TGT5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define TGT5I __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline)) static inline

TGT5I __m256i dot_u_vnni(__m256i u, __m256i x)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
}

// ggml's hsum_float_8
TGTI float hsum8_ps(__m256 a)
{
    __m128 t = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

TGTI float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

// The three kernels share one loop (qt_legacy.c's contract): BLK the
// weight block, XB the activation block, QH the fifth bits of block i
// (NULL for Q4_1), OFF whether 16 is subtracted from the quants (Q5_0,
// through the sign trick, as ggml), HAS_M the min term (m_w at byte 2 of
// the weight block, s_x at byte 2 of Q8_1), DOT the lane sums (dot_u or
// dot_u_vnni).
#define LEGACY_LOOP(BLK, XB, QH, OFF, HAS_M, DOT)                                                    \
    assert(n % 32 == 0);                                                                             \
    const BLK *wb = w;                                                                               \
    const XB *xb = xq;                                                                               \
    __m256 acc = _mm256_setzero_ps();                                                                \
    float summs = 0.0f;                                                                              \
    for (int64_t i = 0; i < n / 32; i++) {                                                           \
        const __m256i u = quants32(wb[i].qs, QH);                                                    \
        const __m256i xv = _mm256_loadu_si256((const __m256i *)xb[i].qs);                            \
        __m256i p;                                                                                   \
        if (OFF) { /* (u - 16) * x = |u - 16| * sign(x, u - 16) */                                   \
            const __m256i sq = _mm256_sub_epi8(u, _mm256_set1_epi8(16));                             \
            p = DOT(_mm256_sign_epi8(sq, sq), _mm256_sign_epi8(xv, sq));                             \
        } else {                                                                                     \
            p = DOT(u, xv);                                                                          \
        }                                                                                            \
        if (HAS_M) {                                                                                 \
            uint16_t mh, sh;                                                                         \
            memcpy(&mh, (const uint8_t *)&wb[i] + 2, 2);                                             \
            memcpy(&sh, (const uint8_t *)&xb[i] + 2, 2);                                             \
            summs = fmaf(h2f(mh), h2f(sh), summs);                                                   \
        }                                                                                            \
        const __m256 dd = _mm256_set1_ps(h2f(wb[i].d) * h2f(xb[i].d));                               \
        acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(p), acc);                                       \
    }                                                                                                \
    return hsum8_ps(acc) + summs;

TGT float pt_vdot_q4_1_avx2(const void *w, const void *xq, int64_t n)
{
    LEGACY_LOOP(pt_blk_q4_1, block_q8_1, NULL, 0, 1, dot_u)
}

TGT float pt_vdot_q5_0_avx2(const void *w, const void *xq, int64_t n)
{
    LEGACY_LOOP(pt_blk_q5_0, block_q8_0, wb[i].qh, 1, 0, dot_u)
}

TGT float pt_vdot_q5_1_avx2(const void *w, const void *xq, int64_t n)
{
    LEGACY_LOOP(pt_blk_q5_1, block_q8_1, wb[i].qh, 0, 1, dot_u)
}

// AVX-512 VNNI (on 256-bit registers): the same loop with vpdpbusd (Q4_1
// gains nothing from it and keeps the AVX2 kernel on that path)
TGT5 float pt_vdot_q5_0_avx512(const void *w, const void *xq, int64_t n)
{
    LEGACY_LOOP(pt_blk_q5_0, block_q8_0, wb[i].qh, 1, 0, dot_u_vnni)
}

TGT5 float pt_vdot_q5_1_avx512(const void *w, const void *xq, int64_t n)
{
    LEGACY_LOOP(pt_blk_q5_1, block_q8_1, wb[i].qh, 0, 1, dot_u_vnni)
}

#endif

// kernels/kern_avx2.c — the AVX2 + FMA + F16C path. Compiled per function
// with target attributes (the library needs no -march flag) and chosen at
// run time. Bit-identical to kern_scalar.c (contract: kern_internal.h).
//
// Block products: maddubs (u8 x s8 -> pairs of int16) then madd with ones
// (-> 8 int32 lanes). Q4_0 multiplies the raw nibbles (0..15) and subtracts
// 8 * sum(x quants) afterwards; Q8_0 uses |w| x sign(x, w). Eight blocks'
// lane vectors are folded by an hadd tree into one vector whose lane j is
// block j's exact integer dot, which then meets its scale in one fma, i.e.
// block b lands in accumulator lane b % 8 as the contract says.
#include "kernels/kern_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGTI __attribute__((target("avx2,fma,f16c"), always_inline)) inline

static TGTI uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

// ---- integer block dots: 8 int32 lanes summing to the block's dot -------

static TGTI __m256i q4_nibbles(const uint8_t *qs)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

static TGTI __m256i bdot_q4(const uint8_t *wb, const int8_t *xq)
{
    const __m256i p = _mm256_maddubs_epi16(q4_nibbles(wb + 2), _mm256_load_si256((const __m256i *)xq));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static TGTI __m256i bdot_q8(const uint8_t *wb, const int8_t *xq)
{
    const __m256i w = _mm256_loadu_si256((const __m256i *)(wb + 2));
    const __m256i y = _mm256_load_si256((const __m256i *)xq);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// lane j of the result = sum of the 8 lanes of v_j
static TGTI __m256i tree8(__m256i v0, __m256i v1, __m256i v2, __m256i v3, __m256i v4, __m256i v5,
                          __m256i v6, __m256i v7)
{
    const __m256i g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    const __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v4, v5), _mm256_hadd_epi32(v6, v7));
    return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20),
                            _mm256_permute2x128_si256(g0, g1, 0x31));
}

static TGTI int32_t hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

// fp16 scales of 8 consecutive blocks (stride bs) as f32
static TGTI __m256 scales8(const uint8_t *w, size_t bs)
{
    const __m128i h = _mm_setr_epi16((short)ld16(w), (short)ld16(w + bs), (short)ld16(w + 2 * bs),
                                     (short)ld16(w + 3 * bs), (short)ld16(w + 4 * bs),
                                     (short)ld16(w + 5 * bs), (short)ld16(w + 6 * bs),
                                     (short)ld16(w + 7 * bs));
    return _mm256_cvtph_ps(h);
}

// One weight row (nb blocks) against one quantised vector. The main loop
// takes 8 blocks per step (lane j = block 8g + j); leftover blocks finish
// in scalar fmaf on the stored lanes, which is the same arithmetic.
#define ROW_DOT(NAME, BDOT, BS, Q4)                                                               \
    static TGT float NAME(const uint8_t *w, const int8_t *xq, const float *xd, const int32_t *xs, \
                          int64_t nb)                                                             \
    {                                                                                             \
        __m256 acc = _mm256_setzero_ps();                                                         \
        int64_t b = 0;                                                                            \
        for (; b + 8 <= nb; b += 8) {                                                             \
            const uint8_t *wb = w + b * BS;                                                       \
            const int8_t *xb = xq + b * QK;                                                       \
            _mm_prefetch((const char *)wb + 768, _MM_HINT_T0);                                    \
            _mm_prefetch((const char *)wb + 832, _MM_HINT_T0);                                    \
            __m256i s = tree8(BDOT(wb, xb), BDOT(wb + BS, xb + 32), BDOT(wb + 2 * BS, xb + 64),    \
                              BDOT(wb + 3 * BS, xb + 96), BDOT(wb + 4 * BS, xb + 128),            \
                              BDOT(wb + 5 * BS, xb + 160), BDOT(wb + 6 * BS, xb + 192),           \
                              BDOT(wb + 7 * BS, xb + 224));                                       \
            if (Q4)                                                                               \
                s = _mm256_sub_epi32(s, _mm256_loadu_si256((const __m256i *)(xs + b)));           \
            const __m256 dd = _mm256_mul_ps(scales8(wb, BS), _mm256_loadu_ps(xd + b));            \
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc);                                \
        }                                                                                         \
        float a[8];                                                                               \
        _mm256_storeu_ps(a, acc);                                                                 \
        for (; b < nb; b++) {                                                                     \
            const uint8_t *wb = w + b * BS;                                                       \
            int32_t s = hsum_i32(BDOT(wb, xq + b * QK)) - (Q4 ? xs[b] : 0);                       \
            const float dd = _cvtsh_ss(ld16(wb)) * xd[b];                                         \
            a[b % 8] = fmaf((float)s, dd, a[b % 8]);                                              \
        }                                                                                         \
        return pt_reduce8(a);                                                                     \
    }

ROW_DOT(row_q4_avx2, bdot_q4, 18, 1)
ROW_DOT(row_q8_avx2, bdot_q8, 34, 0)

static TGT void qtile_avx2(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x,
                           int64_t v0, int64_t nvec, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    for (int64_t v = 0; v < nvec; v++) {
        const int8_t *xq = x->qs + (v0 + v) * nb * QK;
        const float *xd = x->d + (v0 + v) * nb;
        const int32_t *xs = x->s8 + (v0 + v) * nb;
        for (int64_t r = 0; r < nrows; r++)
            y[v * ldy + r] = t == PT_Q4_0 ? row_q4_avx2(w + r * rb, xq, xd, xs, nb)
                                          : row_q8_avx2(w + r * rb, xq, xd, xs, nb);
    }
}

// ---- float weights: 16 lanes as two 8-lane accumulators -----------------

static TGTI __m256 ld8(pt_dtype t, const uint8_t *w, int64_t i)
{
    if (t == PT_F32)
        return _mm256_loadu_ps((const float *)w + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)(w + 2 * i));
    if (t == PT_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static TGTI float welem(pt_dtype t, const uint8_t *w, int64_t i)
{
    if (t == PT_F32) {
        float f;
        memcpy(&f, w + 4 * i, 4);
        return f;
    }
    const uint16_t h = ld16(w + 2 * i);
    if (t == PT_F16)
        return _cvtsh_ss(h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static TGTI float row_dot_f(pt_dtype t, const uint8_t *w, const float *x, int64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(ld8(t, w, i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(ld8(t, w, i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float a[16];
    _mm256_storeu_ps(a, a0);
    _mm256_storeu_ps(a + 8, a1);
    for (; i < n; i++)
        a[i % 16] = fmaf(welem(t, w, i), x[i], a[i % 16]);
    return pt_reduce16(a);
}

static TGT void ftile_avx2(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, int64_t cols,
                           const float *X, int64_t ldx, int64_t nvec, float *y, int64_t ldy)
{
    for (int64_t v = 0; v < nvec; v++)
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *wr = w + r * rb;
            const float *x = X + v * ldx;
            y[v * ldy + r] = t == PT_F32   ? row_dot_f(PT_F32, wr, x, cols)
                             : t == PT_F16 ? row_dot_f(PT_F16, wr, x, cols)
                                           : row_dot_f(PT_BF16, wr, x, cols);
        }
}

static TGT float dot_f32_avx2(const float *a, const float *b, int64_t n)
{
    return row_dot_f(PT_F32, (const uint8_t *)a, b, n);
}

static TGT void axpy_avx2(float *y, float a, const float *x, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

const pt_kern pt_kern_avx2 = {
    .name = "avx2",
    .qtile = qtile_avx2,
    .ftile = ftile_avx2,
    .dot_f32 = dot_f32_avx2,
    .axpy = axpy_avx2,
};

#endif

// kernels/kern_avx2.c — the AVX2 + FMA + F16C path. Compiled per function
// with target attributes (the library needs no -march flag) and chosen at
// run time. Bit-identical to kern_scalar.c (contract: kern_internal.h).
//
// Block products (kern_x86_body.h): |w| x sign(x, w) by maddubs (u8 x s8
// -> pairs of int16; no saturation: |w| <= 127 or 8) then madd with ones
// (-> int32 lane l = products 4l..4l+3), ggml's own AVX2 arithmetic.
//
// This file also holds the AVX2 activation quantiser and row quantisers
// (exact ggml reference results) and the float-weight dots, which the
// AVX-VNNI path reuses.
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGTI __attribute__((target("avx2,fma,f16c"), always_inline)) inline

#define KX_TGT "avx2,fma,f16c"
#define KX(name) name##_avx2
#define KX_DOT(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))
#include "kernels/kern_x86_body.h"

static TGTI uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

// ---- activation quantisation -----------------------------------------------

// roundf (halves away from zero) exactly: t = trunc(v); v - t is exact, and
// |v - t| >= 0.5 means round away from zero.
static TGTI __m256 roundf8(__m256 v)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f)));
    return _mm256_add_ps(t, up);
}

// Same result as pt_quant_act_scalar, bit for bit (ggml's x86
// quantize_row_q8_0: id = 127 / amax, round to nearest even).
TGT void pt_quant_act_avx2(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const int64_t ngroups = paired ? nb / 8 : 0;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        const __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        const __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float db = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        enum { rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; // a constant expression (clang)
        const __m256i q0 = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, vid), rne));
        const __m256i q1 = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, vid), rne));
        const __m256i q2 = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, vid), rne));
        const __m256i q3 = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, vid), rne));
        const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3));
        // int32 -> int8 in order: packs work per 128-bit lane, fix with a permute
        const __m256i p16a = _mm256_packs_epi32(q0, q1);
        const __m256i p16b = _mm256_packs_epi32(q2, q3);
        const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        if (b < ngroups * 8) {
            const int64_t kk = b % 8;
            int8_t *g = qs + (b - kk) * QK + (kk % 4) * 64 + (kk / 4) * 16;
            _mm_storeu_si128((__m128i *)g, _mm256_castsi256_si128(p8));
            _mm_storeu_si128((__m128i *)(g + 32), _mm256_extracti128_si256(p8, 1));
        } else {
            _mm256_storeu_si256((__m256i *)(qs + b * QK), p8);
        }
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
        s8[b] = 8 * _mm_cvtsi128_si32(s);
        d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT));
    }
}

// ---- row quantisation for the converter (pt_quantize_row) -----------------

// 4 x 8 int32 (values fit in int8) -> 32 int8 in order
static TGTI __m256i pack32(__m256i q0, __m256i q1, __m256i q2, __m256i q3)
{
    return _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3)),
        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static TGTI float hmax8(__m256 m)
{
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

// ggml's quantize_row_q8_0_ref, bit for bit (same IEEE operations).
static TGT void quantize_q8_0_avx2(const float *x, block_q8_0 *y, int64_t nb)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        const __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        const __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        const float amax = hmax8(_mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
            _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3))));
        const float d = amax / 127.0f;
        const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        const __m256i p8 = pack32(_mm256_cvttps_epi32(roundf8(_mm256_mul_ps(v0, id))),
                                  _mm256_cvttps_epi32(roundf8(_mm256_mul_ps(v1, id))),
                                  _mm256_cvttps_epi32(roundf8(_mm256_mul_ps(v2, id))),
                                  _mm256_cvttps_epi32(roundf8(_mm256_mul_ps(v3, id))));
        y[b].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_si256((__m256i *)y[b].qs, p8);
    }
}

// ggml's quantize_row_q4_0_ref, bit for bit: `max` is the first value of
// largest magnitude; q = min(15, trunc(x * id + 8.5)).
static TGT void quantize_q4_0_avx2(const float *x, block_q4_0 *y, int64_t nb)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 h = _mm256_set1_ps(8.5f);
    const __m256i fifteen = _mm256_set1_epi32(15);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        const __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        const __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        const __m256 a0 = _mm256_andnot_ps(sign, v0), a1 = _mm256_andnot_ps(sign, v1);
        const __m256 a2 = _mm256_andnot_ps(sign, v2), a3 = _mm256_andnot_ps(sign, v3);
        const float amax = hmax8(_mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
        float max = 0.0f;
        if (amax > 0.0f) {
            const __m256 am = _mm256_set1_ps(amax);
            const uint32_t hit = (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a0, am, _CMP_EQ_OQ)) |
                                 (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a1, am, _CMP_EQ_OQ)) << 8 |
                                 (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a2, am, _CMP_EQ_OQ)) << 16 |
                                 (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a3, am, _CMP_EQ_OQ)) << 24;
            max = xb[__builtin_ctz(hit)];
        }
        const float d = max / -8.0f;
        const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
#define Q4(v) _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps((v), id), h)), fifteen)
        const __m256i p8 = pack32(Q4(v0), Q4(v1), Q4(v2), Q4(v3));
#undef Q4
        const __m128i lo = _mm256_castsi256_si128(p8), hi = _mm256_extracti128_si256(p8, 1);
        y[b].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)y[b].qs, _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
    }
}

// f32 -> bf16 round to nearest even, NaN kept quiet (as pt_f32_to_bf16)
static TGT void to_bf16_avx2(const float *x, uint16_t *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256i u = _mm256_castps_si256(v);
        const __m256i r = _mm256_srli_epi32(
            _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)),
                             _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))),
            16);
        const __m256i nanv = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        const __m256i res = _mm256_blendv_epi8(r, nanv, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(res, res), 0x08);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(pk));
    }
    for (; i < n; i++)
        y[i] = pt_f32_to_bf16(x[i]);
}

// f32 -> fp16 round to nearest even (F16C), NaN kept quiet (as pt_f32_to_fp16)
static TGT void to_f16_avx2(const float *x, uint16_t *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = pt_f32_to_fp16(x[i]);
}

// pt_quantize_row for the narrowing types; false when not handled here.
TGT bool pt_quantize_row_avx2(pt_dtype t, const float *x, void *dst, int64_t n)
{
    switch (t) {
    case PT_Q8_0: quantize_q8_0_avx2(x, dst, n / QK); return true;
    case PT_Q4_0: quantize_q4_0_avx2(x, dst, n / QK); return true;
    case PT_BF16: to_bf16_avx2(x, dst, n); return true;
    case PT_F16: to_f16_avx2(x, dst, n); return true;
    default: return false;
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

// One row · four vectors (GEMM): weights converted once, per vector the
// same fma sequence as row_dot_f.
static TGTI void row_dot_f_x4(pt_dtype t, const uint8_t *w, const float *X, int64_t ldx, int64_t n,
                              float *y, int64_t ldy)
{
    const float *x0 = X, *x1 = X + ldx, *x2 = X + 2 * ldx, *x3 = X + 3 * ldx;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,
           a31 = a00;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 = ld8(t, w, i), w1 = ld8(t, w, i + 8);
        a00 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x0 + i), a00);
        a01 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x0 + i + 8), a01);
        a10 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x1 + i), a10);
        a11 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x1 + i + 8), a11);
        a20 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x2 + i), a20);
        a21 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x2 + i + 8), a21);
        a30 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x3 + i), a30);
        a31 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x3 + i + 8), a31);
    }
    const __m256 acc[8] = {a00, a01, a10, a11, a20, a21, a30, a31};
    for (int j = 0; j < 4; j++) {
        float a[16];
        _mm256_storeu_ps(a, acc[2 * j]);
        _mm256_storeu_ps(a + 8, acc[2 * j + 1]);
        for (int64_t k = i; k < n; k++)
            a[k % 16] = fmaf(welem(t, w, k), X[j * ldx + k], a[k % 16]);
        y[j * ldy] = pt_reduce16(a);
    }
}

TGT void pt_ftile_avx2(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, int64_t cols,
                           const float *X, int64_t ldx, int64_t nvec, float *y, int64_t ldy)
{
    int64_t v = 0;
    for (; v + 4 <= nvec; v += 4)
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *wr = w + r * rb;
            const float *x = X + v * ldx;
            if (t == PT_F32)
                row_dot_f_x4(PT_F32, wr, x, ldx, cols, y + v * ldy + r, ldy);
            else if (t == PT_F16)
                row_dot_f_x4(PT_F16, wr, x, ldx, cols, y + v * ldy + r, ldy);
            else
                row_dot_f_x4(PT_BF16, wr, x, ldx, cols, y + v * ldy + r, ldy);
        }
    for (; v < nvec; v++)
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *wr = w + r * rb;
            const float *x = X + v * ldx;
            y[v * ldy + r] = t == PT_F32   ? row_dot_f(PT_F32, wr, x, cols)
                             : t == PT_F16 ? row_dot_f(PT_F16, wr, x, cols)
                                           : row_dot_f(PT_BF16, wr, x, cols);
        }
}

TGT float pt_dot_f32_avx2(const float *a, const float *b, int64_t n)
{
    return row_dot_f(PT_F32, (const uint8_t *)a, b, n);
}

TGT void pt_axpy_avx2(float *y, float a, const float *x, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

// out[t] = row_dot_f(q, row t): four rows per step (eight independent fma
// chains); per row the lanes see exactly row_dot_f's fma sequence.
TGT void pt_dot_rows_avx2(float *out, const float *q, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) {
        const float *r0 = rows + t * ld, *r1 = r0 + ld, *r2 = r1 + ld, *r3 = r2 + ld;
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
               a30 = a00, a31 = a00;
        int64_t i = 0;
        for (; i + 16 <= d; i += 16) {
            const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
            a00 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(r0 + i), a00);
            a01 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(r0 + i + 8), a01);
            a10 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(r1 + i), a10);
            a11 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(r1 + i + 8), a11);
            a20 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(r2 + i), a20);
            a21 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(r2 + i + 8), a21);
            a30 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(r3 + i), a30);
            a31 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(r3 + i + 8), a31);
        }
        const __m256 acc[8] = {a00, a01, a10, a11, a20, a21, a30, a31};
        for (int j = 0; j < 4; j++) {
            float a[16];
            _mm256_storeu_ps(a, acc[2 * j]);
            _mm256_storeu_ps(a + 8, acc[2 * j + 1]);
            const float *r = rows + (t + j) * ld;
            for (int64_t k = i; k < d; k++)
                a[k % 16] = fmaf(q[k], r[k], a[k % 16]);
            out[t + j] = pt_reduce16(a);
        }
    }
    for (; t < n; t++)
        out[t] = row_dot_f(PT_F32, (const uint8_t *)q, rows + t * ld, d);
}

// for t in order: out = fmaf(p[t], row t, out). Chunks of 64 outputs stay in
// eight registers across all rows; each element sees the same fma chain as
// n pt_axpy calls.
TGT void pt_axpy_rows_avx2(float *out, const float *p, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    int64_t i = 0;
    for (; i + 64 <= d; i += 64) {
        __m256 o0 = _mm256_loadu_ps(out + i), o1 = _mm256_loadu_ps(out + i + 8);
        __m256 o2 = _mm256_loadu_ps(out + i + 16), o3 = _mm256_loadu_ps(out + i + 24);
        __m256 o4 = _mm256_loadu_ps(out + i + 32), o5 = _mm256_loadu_ps(out + i + 40);
        __m256 o6 = _mm256_loadu_ps(out + i + 48), o7 = _mm256_loadu_ps(out + i + 56);
        for (int64_t t = 0; t < n; t++) {
            const __m256 pt = _mm256_set1_ps(p[t]);
            const float *r = rows + t * ld + i;
            o0 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r), o0);
            o1 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r + 8), o1);
            o2 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r + 16), o2);
            o3 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r + 24), o3);
            o4 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r + 32), o4);
            o5 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r + 40), o5);
            o6 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r + 48), o6);
            o7 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(r + 56), o7);
        }
        _mm256_storeu_ps(out + i, o0);
        _mm256_storeu_ps(out + i + 8, o1);
        _mm256_storeu_ps(out + i + 16, o2);
        _mm256_storeu_ps(out + i + 24, o3);
        _mm256_storeu_ps(out + i + 32, o4);
        _mm256_storeu_ps(out + i + 40, o5);
        _mm256_storeu_ps(out + i + 48, o6);
        _mm256_storeu_ps(out + i + 56, o7);
    }
    for (; i + 8 <= d; i += 8) {
        __m256 o = _mm256_loadu_ps(out + i);
        for (int64_t t = 0; t < n; t++)
            o = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), _mm256_loadu_ps(rows + t * ld + i), o);
        _mm256_storeu_ps(out + i, o);
    }
    for (; i < d; i++) {
        float o = out[i];
        for (int64_t t = 0; t < n; t++)
            o = fmaf(p[t], rows[t * ld + i], o);
        out[i] = o;
    }
}

const pt_kern pt_kern_avx2 = {
    .name = "avx2",
    .qpath = PT_QPATH_AVX2,
    .qtile = qtile_avx2,
    .q4_paired = false,
    .quant_act = pt_quant_act_avx2,
    .ftile = pt_ftile_avx2,
    .dot_f32 = pt_dot_f32_avx2,
    .axpy = pt_axpy_avx2,
    .dot_rows = pt_dot_rows_avx2,
    .axpy_rows = pt_axpy_rows_avx2,
};

#endif

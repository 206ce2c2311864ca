// kernels/kern_avx512.c — the AVX-512 (F, BW, VL, VNNI) path. Compiled per
// function with target attributes and chosen at run time when the CPU has
// all of these. Bit-identical to kern_scalar.c (contract: kern_internal.h).
//
// Block products (Q4_0 / Q8_0) and their activation quantiser: the zmm
// kernels of kern_avx512_q.c. Float weights use one 16-lane zmm
// accumulator, which is the contract's acc[i % 16] directly.
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define TGTI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline

static TGTI uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

// ---- float weights: one 16-lane accumulator ------------------------------

static TGTI __m512 ld16f(pt_dtype t, const uint8_t *w, int64_t i)
{
    if (t == PT_F32)
        return _mm512_loadu_ps((const float *)w + i);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(w + 2 * i));
    if (t == PT_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
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
    __m512 a0 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        a0 = _mm512_fmadd_ps(ld16f(t, w, i), _mm512_loadu_ps(x + i), a0);
    float a[16];
    _mm512_storeu_ps(a, a0);
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
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 w0 = ld16f(t, w, i);
        a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x0 + i), a0);
        a1 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x1 + i), a1);
        a2 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x2 + i), a2);
        a3 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x3 + i), a3);
    }
    const __m512 acc[4] = {a0, a1, a2, a3};
    for (int j = 0; j < 4; j++) {
        float a[16];
        _mm512_storeu_ps(a, acc[j]);
        for (int64_t k = i; k < n; k++)
            a[k % 16] = fmaf(welem(t, w, k), X[j * ldx + k], a[k % 16]);
        y[j * ldy] = pt_reduce16(a);
    }
}

static TGT void ftile_avx512(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, int64_t cols,
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

static TGT float dot_f32_avx512(const float *a, const float *b, int64_t n)
{
    return row_dot_f(PT_F32, (const uint8_t *)a, b, n);
}

static TGT void axpy_avx512(float *y, float a, const float *x, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

const pt_kern pt_kern_avx512 = {
    .name = "avx512vnni",
    .qpath = PT_QPATH_AVX512,
    .qtile = pt_qtile_avx512_gemm, // larger Q4_0 batches: kern_avx512_qgemm.c; the rest pt_qtile_avx512
    .q4_paired = false,
    .quant_act = pt_quant_act_avx512,
    .ftile = ftile_avx512,
    .tile_act_min = pt_qgemm_tile_act_min,
    .tile_act_bytes = pt_qgemm_tile_act_bytes,
    .tile_act = pt_qgemm_tile_act,
    .dot_f32 = dot_f32_avx512,
    .axpy = axpy_avx512,
    .dot_rows = pt_dot_rows_avx2,   // same 16-lane order as the zmm dot
    .axpy_rows = pt_axpy_rows_avx2,
};

#endif

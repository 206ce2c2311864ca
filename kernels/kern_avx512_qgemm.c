// kernels/kern_avx512_qgemm.c — the AVX-512 path's Q4_0 GEMM tile for
// larger batches (>= KG_MIN_VEC vectors: prefill's expert groups, the
// trunk's prefill products). Bit-identical to kern_scalar.c (contract:
// kern_internal.h) and to kern_avx512_q.c's tile, which still takes Q8_0,
// smaller batches (GEMV included) and the last nvec % 4 vectors.
//
// Same arithmetic as kern_avx512_q.c's kq() with R = V = 4 (u8 x s8
// vpdpbusd of unsigned weights, the offset taken out in the lane's start
// value, one fma per block with fp32(d_w) * fp32(d_x) broadcast), with the
// work that does not depend on the (row, vector) pair done once per tile
// call instead of once per 4 x 4 sub-tile:
// - each row's unsigned weights (nibbles split: 32 bytes per block) and its
//   fp16 block scales widened to f32, once for all groups of 4 vectors;
// - each group of 4 vectors' start values, once for all groups of 4 rows.
// and int32 -> f32 without vcvtdq2ps: the start value carries the magic
// 0x4B400000 (1.5 * 2^23), so the lane sum s' = 0x4B400000 + s, with |s| <=
// 4 * 128 * 127 < 2^22, read as a float is exactly 12582912 + s; one vsubps
// of 12582912.0f gives (float)s exactly (s = 0 gives +0, as the conversion).
// Every lane's chain is the contract's, block after block.
// Zen 4, 1 thread, in L2, A/B in one binary (CPU time, 3 runs): Q4_0 16
// rows x 32 vectors, 64 blocks 0.455-0.483 -> 0.425-0.451 ns per (row,
// vector, block) (1.06-1.07x), 32 blocks 1.04-1.09x, 20 vectors 1.02-1.03x,
// 16 vectors 0.91-0.96x (the preparation amortised over too few vectors:
// hence KG_MIN_VEC); Q8_0 0.99-1.02x (not taken).
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KG_TGT "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define TGT __attribute__((target(KG_TGT)))
#define TGTI __attribute__((target(KG_TGT), always_inline)) inline

#define KG_MAGIC 0x4B400000 // bits of 12582912.0f = 1.5 * 2^23

// ---- per-thread scratch (start values, row scales) ---------------------------

static _Thread_local void *t_buf;
static _Thread_local size_t t_cap;
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void buf_key_make(void) { pthread_key_create(&buf_key, free); }

// Grown on demand, never shrunk; freed when the thread exits (pthread key).
static void *kg_scratch(size_t bytes)
{
    if (bytes > t_cap) {
        pthread_once(&buf_once, buf_key_make);
        free(t_buf);
        t_cap = (bytes + 4095) & ~(size_t)4095;
        t_buf = aligned_alloc(64, t_cap);
        assert(t_buf);
        pthread_setspecific(buf_key, t_buf);
    }
    return t_buf;
}

// ---- the kernel ----------------------------------------------------------------
//
// kern_avx512_q.c's 4 x 4 ymm tile with everything that does not depend on
// the (row, vector) pair done once per tile call: the rows' unsigned
// weights (Q4_0: nibbles split; Q8_0: xor 0x80) and f32 scales, and per
// group of 4 vectors the start values. Per (row, vector, block) then: a
// copy of the start values, vpdpbusd, vsubps and vfmadd with dd broadcast.

static TGTI float hsum8(__m256 a) // ggml's hsum_float_8 (the contract's reduce8)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

// Row w (nb blocks) -> its 32 unsigned weights per block (uw) and its fp16
// block scales as f32 (dw, zero-padded to a multiple of 8 blocks).
static TGTI void row_prep(bool q8, const uint8_t *w, int64_t nb, __m256i *uw, float *dw)
{
    const size_t bs = q8 ? 34 : 18;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + (size_t)b * bs;
        if (q8)
            uw[b] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wb + 2)), _mm256_set1_epi8((char)0x80));
        else {
            const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
            uw[b] = _mm256_and_si256(_mm256_mask_srli_epi16(t, 0xFF00, t, 4), _mm256_set1_epi8(0x0F));
        }
    }
    const int64_t nb8 = (nb + 7) & ~(int64_t)7;
    for (int64_t b0 = 0; b0 < nb8; b0 += 8) {
        uint16_t h[8] = {0};
        const int g = nb - b0 < 8 ? (int)(nb - b0) : 8;
        for (int k = 0; k < g; k++)
            memcpy(&h[k], w + (size_t)(b0 + k) * bs, 2);
        _mm256_store_ps(dw + b0, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
    }
}

// Start values of vector xq (nb blocks): per block 8 int32 lanes,
// KG_MAGIC - off * (the lane's 4 quants summed), off 8 (Q4_0) or 128 (Q8_0).
static TGTI void starts(bool q8, const int8_t *xq, int64_t nb, __m256i *s0)
{
    const __m256i off = _mm256_set1_epi8(q8 ? (char)0x80 : 8);
    const __m256i mg = _mm256_set1_epi32(KG_MAGIC);
    for (int64_t b = 0; b < nb; b++) {
        const __m256i x = _mm256_load_si256((const __m256i *)(xq + b * QK));
        s0[b] = _mm256_sub_epi32(mg, _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, x));
    }
}

enum { KG_RMAX = 4, KG_V = 4 };
#ifndef KG_Q8
#define KG_Q8 0 // 1: Q8_0 through this tile too (for A/B; no gain measured)
#endif
#ifndef KG_MIN_VEC
#define KG_MIN_VEC 24 // fewer vectors: kern_avx512_q.c's tile
#endif

// R rows (prepared weights uw + r * nb, scales dw + r * ldw) x 4 vectors
// (quants xq[v], scales xd[v], start values s0 + v * nb) -> y[v * ldy + r].
static TGTI void kg(int R, const __m256i *uw, const float *dw, int64_t ldw, const int8_t *const *xq,
                    const float *const *xd, const __m256i *s0, int64_t nb, float *y, int64_t ldy)
{
    const __m256 mgf = _mm256_set1_ps(12582912.0f); // the bits of KG_MAGIC as a float
    __m256 acc[KG_RMAX][KG_V];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < KG_V; v++)
            acc[r][v] = _mm256_setzero_ps();
    _Alignas(32) float dd[KG_RMAX][KG_V][8];
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int g = nb - b0 < 8 ? (int)(nb - b0) : 8;
        const __mmask8 m = (__mmask8)((1u << g) - 1);
        __m256 dx[KG_V];
#pragma GCC unroll 4
        for (int v = 0; v < KG_V; v++)
            dx[v] = _mm256_maskz_loadu_ps(m, xd[v] + b0);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 dwr = _mm256_load_ps(dw + r * ldw + b0);
#pragma GCC unroll 4
            for (int v = 0; v < KG_V; v++)
                _mm256_store_ps(dd[r][v], _mm256_mul_ps(dwr, dx[v]));
        }
        for (int k = 0; k < g; k++) {
            const int64_t b = b0 + k;
            __m256i x[KG_V], st[KG_V];
#pragma GCC unroll 4
            for (int v = 0; v < KG_V; v++) {
                x[v] = _mm256_load_si256((const __m256i *)(xq[v] + b * QK));
                st[v] = _mm256_load_si256(s0 + v * nb + b);
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256i u = _mm256_load_si256(uw + r * nb + b);
#pragma GCC unroll 4
                for (int v = 0; v < KG_V; v++) {
                    const __m256i s = _mm256_dpbusd_epi32(st[v], u, x[v]);
                    const __m256 f = _mm256_sub_ps(_mm256_castsi256_ps(s), mgf); // (float)(s - magic), exact
                    acc[r][v] = _mm256_fmadd_ps(_mm256_set1_ps(dd[r][v][k]), f, acc[r][v]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < KG_V; v++)
            y[v * ldy + r] = hsum8(acc[r][v]);
}

// One type's tile: vectors in fours (rows in fours, then one at a time);
// the last nvec % 4 vectors go to kern_avx512_q.c's tile.
static TGTI void qgemm_t(bool q8, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x, int64_t v0,
                         int64_t nvec, float *y, int64_t ldy)
{
    const int64_t nb = x->nb, nb8 = (nb + 7) & ~(int64_t)7;
    const int64_t nv4 = nvec & ~(int64_t)3;
    if (nv4 > 0 && nb > 0 && nrows > 0) {
        // scratch: start values of 4 vectors, the rows' weights, their scales
        const size_t sbytes = (size_t)(KG_V * nb) * sizeof(__m256i);
        const size_t ubytes = (size_t)(nrows * nb) * sizeof(__m256i);
        char *s = kg_scratch(sbytes + ubytes + (size_t)(nrows * nb8) * sizeof(float));
        __m256i *s0 = (__m256i *)s, *uw = (__m256i *)(s + sbytes);
        float *dw = (float *)(s + sbytes + ubytes);
        for (int64_t r = 0; r < nrows; r++)
            row_prep(q8, w + r * rb, nb, uw + r * nb, dw + r * nb8);
        const int8_t *xq[KG_V];
        const float *xd[KG_V];
        for (int64_t v = 0; v < nv4; v += 4) {
            for (int j = 0; j < KG_V; j++) {
                xq[j] = x->qs + (v0 + v + j) * nb * QK;
                xd[j] = x->d + (v0 + v + j) * nb;
                starts(q8, xq[j], nb, s0 + j * nb);
            }
            int64_t r = 0;
            for (; r + 4 <= nrows; r += 4)
                kg(4, uw + r * nb, dw + r * nb8, nb8, xq, xd, s0, nb, y + v * ldy + r, ldy);
            for (; r < nrows; r++)
                kg(1, uw + r * nb, dw + r * nb8, nb8, xq, xd, s0, nb, y + v * ldy + r, ldy);
        }
    }
    if (nvec > nv4)
        pt_qtile_avx512(q8 ? PT_Q8_0 : PT_Q4_0, w, rb, nrows, x, v0 + nv4, nvec - nv4, y + nv4 * ldy, ldy);
}

// Rows x vectors (pt_qtile_fn), Q4_0 or Q8_0 weights: Q8_0 and batches of
// fewer than KG_MIN_VEC vectors go to kern_avx512_q.c's tile as they are.
TGT void pt_qtile_avx512_gemm(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x,
                              int64_t v0, int64_t nvec, float *y, int64_t ldy)
{
    assert(t == PT_Q4_0 || t == PT_Q8_0);
    assert(w && x && y && nrows >= 0 && nvec >= 0);
    if ((t == PT_Q4_0 || KG_Q8) && nvec >= KG_MIN_VEC)
        qgemm_t(t == PT_Q8_0, w, rb, nrows, x, v0, nvec, y, ldy);
    else
        pt_qtile_avx512(t, w, rb, nrows, x, v0, nvec, y, ldy);
}

#endif

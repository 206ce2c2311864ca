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
#include "kernels/cpu.h"
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
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

// The 32 weights of block wb as vpdpbusd's unsigned operand: Q4_0 the
// nibbles split (16 low, then 16 high: 0..15), Q8_0 w ^ 0x80 = w + 128.
static TGTI __m256i uw_block(bool q8, const uint8_t *wb)
{
    if (q8)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wb + 2)), _mm256_set1_epi8((char)0x80));
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
    return _mm256_and_si256(_mm256_mask_srli_epi16(t, 0xFF00, t, 4), _mm256_set1_epi8(0x0F));
}

// Row w (nb blocks) -> its 32 unsigned weights per block (uw) and its fp16
// block scales as f32 (dw, zero-padded to a multiple of 8 blocks).
static TGTI void row_prep(bool q8, const uint8_t *w, int64_t nb, __m256i *uw, float *dw)
{
    const size_t bs = q8 ? 34 : 18;
    for (int64_t b = 0; b < nb; b++)
        uw[b] = uw_block(q8, w + (size_t)b * bs);
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
#ifndef KZ_MIN_VEC
#define KZ_MIN_VEC 8 // kz() (Intel) from this many vectors
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

// ---- the zmm tile for Intel (kz) ------------------------------------------------
//
// On Intel cores ymm vpdpbusd and vfmadd share ports 0 and 1, so kg()'s
// three ymm operations per (row, vector, block) cost at least one cycle;
// zmm operations run on ports 0 and 5 at 16 lanes each. kz() holds TWO
// rows in one zmm, interleaved lane by lane: dword 2l is lane l of row r,
// dword 2l + 1 lane l of row r + 1. Then per (pair of rows, vector,
// block): one vpdpbusd (the pair's prepared weights x the vector's quants
// with each 4-byte lane duplicated), one vsubps, and one vfmadd whose
// multiplier, [dd(r), dd(r + 1)] repeated, is ONE 8-byte vbroadcastsd load
// from a table computed per group of 8 blocks by one zmm multiply of the
// pair's interleaved row scales by the vector's duplicated block scales.
// Each lane still runs the contract's chain block after block (a 16-lane
// register is just two rows' 8-lane accumulators side by side), and the
// final reduce8 takes the even / odd lanes in the contract's order.
// On Zen 4 a zmm operation takes two ymm slots and the interleave costs
// shuffles, so kg() stays there (kz_use()). Zen 5 (family 0x1A) runs zmm
// operations whole, and kz() is the faster there: on a Zen 5 EPYC
// (2026-12-07, 1 thread, in cache, bench_kernels --incache, two rounds
// interleaved) Q4_0 GEMM at 64 vectors 175-254 GFLOP/s against kg()'s
// 151-179, Q8_0 158-228 against kq()'s 124-156; bench16's 512-token
// resident prefill 80.2 tok/s against 55.6 (routed experts 3.70 s against
// 5.66, attention projections 0.57 s against 0.85).

enum { KZ_PMAX = 4, KZ_V = 4 }; // row pairs x vectors per pass

#define MAGICF 12582912.0f

// Row pair (w0, w1) -> per block 64 bytes of interleaved unsigned weights
// (uw2 + b * 64) and per block the interleaved f32 scales (dw2[2b], dw2[2b
// + 1]), zero-padded to a multiple of 8 blocks.
static TGTI void pair_prep(bool q8, const uint8_t *w0, const uint8_t *w1, int64_t nb, __m512i *uw2, float *dw2)
{
    const size_t bs = q8 ? 34 : 18;
    const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int64_t b = 0; b < nb; b++) {
        __m256i u[2];
        for (int j = 0; j < 2; j++) {
            const uint8_t *wb = (j ? w1 : w0) + (size_t)b * bs;
            u[j] = uw_block(q8, wb);
            uint16_t h;
            memcpy(&h, wb, 2);
            dw2[2 * b + j] = _cvtsh_ss(h);
        }
        uw2[b] = _mm512_permutex2var_epi32(_mm512_castsi256_si512(u[0]), il, _mm512_castsi256_si512(u[1]));
    }
    const int64_t nb8 = (nb + 7) & ~(int64_t)7;
    for (int64_t b = nb; b < nb8; b++)
        dw2[2 * b] = dw2[2 * b + 1] = 0.0f;
}

// Vector xq (nb blocks, scales xd) -> per block its quants with each 4-byte
// lane duplicated (x2 + b), its start values duplicated the same way (s2 +
// b: KG_MAGIC - off * lane sum), and its scales duplicated (dx2[2b], dx2[2b
// + 1]), zero-padded to a multiple of 8 blocks.
static TGTI void vec_prep(bool q8, const int8_t *xq, const float *xd, int64_t nb, __m512i *x2, __m512i *s2,
                          float *dx2)
{
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i off = _mm512_set1_epi8(q8 ? (char)0x80 : 8);
    const __m512i mg = _mm512_set1_epi32(KG_MAGIC);
    for (int64_t b = 0; b < nb; b++) {
        const __m512i x = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(xq + b * QK))));
        x2[b] = x;
        s2[b] = _mm512_sub_epi32(mg, _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, x));
        dx2[2 * b] = dx2[2 * b + 1] = xd[b];
    }
    const int64_t nb8 = (nb + 7) & ~(int64_t)7;
    for (int64_t b = nb; b < nb8; b++)
        dx2[2 * b] = dx2[2 * b + 1] = 0.0f;
}

// P row pairs (uw2 + p * nb, dw2 + p * 2 * nb8) x 4 vectors (x2 / s2 + v *
// nb, dx2 + v * 2 * nb8) -> y[v * ldy + 2p + j] for rows 2p + j < nr.
static TGTI void kz(int P, const __m512i *uw2, const float *dw2, const __m512i *x2, const __m512i *s2,
                    const float *dx2, int64_t nb, float *y, int64_t ldy, int nr)
{
    const int64_t nb8 = (nb + 7) & ~(int64_t)7;
    const __m512 mgf = _mm512_set1_ps(MAGICF);
    __m512 acc[KZ_PMAX][KZ_V];
#pragma GCC unroll 4
    for (int p = 0; p < P; p++)
#pragma GCC unroll 4
        for (int v = 0; v < KZ_V; v++)
            acc[p][v] = _mm512_setzero_ps();
    _Alignas(64) double dd[KZ_PMAX][KZ_V][8]; // 8-byte pairs [dd(r), dd(r + 1)] per block of the group
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
#pragma GCC unroll 4
        for (int p = 0; p < P; p++) {
            const __m512 dwp = _mm512_load_ps(dw2 + p * 2 * nb8 + 2 * b0);
#pragma GCC unroll 4
            for (int v = 0; v < KZ_V; v++)
                _mm512_store_ps((float *)dd[p][v], _mm512_mul_ps(dwp, _mm512_load_ps(dx2 + v * 2 * nb8 + 2 * b0)));
        }
        const int g = nb - b0 < 8 ? (int)(nb - b0) : 8;
        for (int k = 0; k < g; k++) {
            const int64_t b = b0 + k;
            __m512i x[KZ_V], st[KZ_V];
#pragma GCC unroll 4
            for (int v = 0; v < KZ_V; v++) {
                x[v] = _mm512_load_si512(x2 + v * nb + b);
                st[v] = _mm512_load_si512(s2 + v * nb + b);
            }
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
                const __m512i u = _mm512_load_si512(uw2 + p * nb + b);
#pragma GCC unroll 4
                for (int v = 0; v < KZ_V; v++) {
                    const __m512i s = _mm512_dpbusd_epi32(st[v], u, x[v]);
                    const __m512 f = _mm512_sub_ps(_mm512_castsi512_ps(s), mgf); // (float)(s - magic), exact
                    const __m512 m = _mm512_castpd_ps(_mm512_set1_pd(dd[p][v][k]));
                    acc[p][v] = _mm512_fmadd_ps(m, f, acc[p][v]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; p++)
#pragma GCC unroll 4
        for (int v = 0; v < KZ_V; v++) {
            _Alignas(64) float a[16];
            _mm512_store_ps(a, acc[p][v]);
            for (int j = 0; j < 2 && 2 * p + j < nr; j++) {
                const float t[8] = {a[j], a[2 + j], a[4 + j], a[6 + j], a[8 + j], a[10 + j], a[12 + j], a[14 + j]};
                y[v * ldy + 2 * p + j] = pt_reduce8(t);
            }
        }
}

// kz over one tile: rows in pairs (an odd last row pairs with itself; its
// twin's outputs are not stored), vectors in fours; the last nvec % 4
// vectors go to kern_avx512_q.c's tile. The vectors' layout comes from
// x->tq (built once per product by pt_qgemm_tile_act) or, without it, is
// built here for each group of 4.
static TGTI void qgemm_z(bool q8, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x, int64_t v0,
                         int64_t nvec, float *y, int64_t ldy)
{
    const int64_t nb = x->nb, nb8 = (nb + 7) & ~(int64_t)7;
    const int64_t nv4 = nvec & ~(int64_t)3, np = (nrows + 1) / 2;
    if (nv4 > 0 && nb > 0 && nrows > 0) {
        // scratch: the pairs' weights and scales (and, without x->tq, 4 vectors' layout)
        const size_t ubytes = (size_t)(np * nb) * 64, dwbytes = (size_t)(np * 2 * nb8) * sizeof(float);
        const size_t xbytes = x->tq ? 0 : (size_t)(KZ_V * nb) * 64;
        const size_t dxbytes = x->tq ? 0 : (size_t)(KZ_V * 2 * nb8) * sizeof(float);
        char *s = kg_scratch(ubytes + dwbytes + 2 * xbytes + dxbytes);
        __m512i *uw2 = (__m512i *)s;
        float *dw2 = (float *)(s + ubytes);
        for (int64_t p = 0; p < np; p++) {
            const uint8_t *w0 = w + (size_t)(2 * p) * rb;
            pair_prep(q8, w0, 2 * p + 1 < nrows ? w0 + rb : w0, nb, uw2 + p * nb, dw2 + p * 2 * nb8);
        }
        for (int64_t v = 0; v < nv4; v += 4) {
            const __m512i *x2, *s2;
            const float *dx2;
            if (x->tq) {
                x2 = (const __m512i *)x->tq + (v0 + v) * nb;
                s2 = (const __m512i *)x->tq_s + (v0 + v) * nb;
                dx2 = x->tq_d + (v0 + v) * 2 * nb8;
            } else {
                __m512i *bx = (__m512i *)(s + ubytes + dwbytes), *bs = bx + KZ_V * nb;
                float *bd = (float *)(s + ubytes + dwbytes + 2 * xbytes);
                for (int j = 0; j < KZ_V; j++)
                    vec_prep(q8, x->qs + (v0 + v + j) * nb * QK, x->d + (v0 + v + j) * nb, nb, bx + j * nb,
                             bs + j * nb, bd + j * 2 * nb8);
                x2 = bx, s2 = bs, dx2 = bd;
            }
            int64_t p = 0;
            for (; p + 4 <= np; p += 4)
                kz(4, uw2 + p * nb, dw2 + p * 2 * nb8, x2, s2, dx2, nb, y + v * ldy + 2 * p, ldy, (int)(nrows - 2 * p));
            const int left = (int)(np - p);
            float *yp = y + v * ldy + 2 * p;
            const int nr = (int)(nrows - 2 * p);
            if (left == 3)
                kz(3, uw2 + p * nb, dw2 + p * 2 * nb8, x2, s2, dx2, nb, yp, ldy, nr);
            else if (left == 2)
                kz(2, uw2 + p * nb, dw2 + p * 2 * nb8, x2, s2, dx2, nb, yp, ldy, nr);
            else if (left == 1)
                kz(1, uw2 + p * nb, dw2 + p * 2 * nb8, x2, s2, dx2, nb, yp, ldy, nr);
        }
    }
    if (nvec > nv4)
        pt_qtile_avx512(q8 ? PT_Q8_0 : PT_Q4_0, w, rb, nrows, x, v0 + nv4, nvec - nv4, y + nv4 * ldy, ldy);
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

// Whether kz() runs (Intel, where zmm work runs on two ports and the ymm
// tile's operations share them with each other, and AMD from Zen 5, whose
// zmm units are whole; Zen 4 and older keep kg()): PETREL_KZ=0 / 1 forces
// either (tests, A/B).
static _Atomic int g_kz = -1;
static bool kz_use(void)
{
    int v = atomic_load_explicit(&g_kz, memory_order_relaxed);
    if (v < 0) {
        v = pt_env_switch("PETREL_KZ");
        if (v < 0)
            v = pt_cpu_vendor_id() == PT_CPU_INTEL || (pt_cpu_vendor_id() == PT_CPU_AMD && pt_cpu_family() >= 0x1a);
        atomic_store_explicit(&g_kz, v, memory_order_relaxed);
    }
    return v;
}

int pt_qgemm_set_kz(int on)
{
    kz_use();
    return atomic_exchange(&g_kz, on < 0 ? -1 : on != 0);
}

// The per-product layout hooks (pt_kern.tile_act*): kz's vector layout for
// products of >= KZ_MIN_VEC vectors where kz runs.
int64_t pt_qgemm_tile_act_min(pt_dtype t)
{
    return (t == PT_Q4_0 || t == PT_Q8_0) && kz_use() ? KZ_MIN_VEC : 0;
}

size_t pt_qgemm_tile_act_bytes(int64_t nb, int64_t batch)
{
    const int64_t nb8 = (nb + 7) & ~(int64_t)7;
    return (size_t)(batch * nb) * 128 + (size_t)(batch * 2 * nb8) * sizeof(float);
}

TGT void pt_qgemm_tile_act(pt_dtype t, pt_q8act *x, int64_t batch, void *buf)
{
    assert((t == PT_Q4_0 || t == PT_Q8_0) && x && buf && ((uintptr_t)buf & 63) == 0);
    const int64_t nb = x->nb, nb8 = (nb + 7) & ~(int64_t)7;
    __m512i *x2 = (__m512i *)buf, *s2 = x2 + batch * nb;
    float *dx2 = (float *)(s2 + batch * nb);
    for (int64_t v = 0; v < batch; v++)
        vec_prep(t == PT_Q8_0, x->qs + v * nb * QK, x->d + v * nb, nb, x2 + v * nb, s2 + v * nb, dx2 + v * 2 * nb8);
    x->tq = x2;
    x->tq_s = s2;
    x->tq_d = dx2;
}

// Rows x vectors (pt_qtile_fn), Q4_0 or Q8_0 weights. On Intel: kz() from
// KZ_MIN_VEC vectors, both types; elsewhere kg() for Q4_0 from KG_MIN_VEC
// vectors; the rest to kern_avx512_q.c's tile as they are.
TGT void pt_qtile_avx512_gemm(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x,
                              int64_t v0, int64_t nvec, float *y, int64_t ldy)
{
    assert(t == PT_Q4_0 || t == PT_Q8_0);
    assert(w && x && y && nrows >= 0 && nvec >= 0);
    if (nvec >= KZ_MIN_VEC && kz_use())
        qgemm_z(t == PT_Q8_0, w, rb, nrows, x, v0, nvec, y, ldy);
    else if ((t == PT_Q4_0 || KG_Q8) && nvec >= KG_MIN_VEC)
        qgemm_t(t == PT_Q8_0, w, rb, nrows, x, v0, nvec, y, ldy);
    else
        pt_qtile_avx512(t, w, rb, nrows, x, v0, nvec, y, ldy);
}

#endif

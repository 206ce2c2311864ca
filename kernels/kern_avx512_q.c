// kernels/kern_avx512_q.c — the AVX-512 path's Q4_0 / Q8_0 products on
// 512-bit registers, and its activation quantiser (the "quad" activation
// layouts those products read). Bit-identical to kern_scalar.c (contract:
// kern_internal.h): block b's exact int32 dot meets d_w[b] * d_x[b] in one
// fmaf into accumulator lane b % 8, eight blocks per vector fma.
//
// Per group of 8 blocks the ymm body (kern_x86_body.h) spends most of its
// instructions on glue: 128-bit loads and inserts, an hadd tree and seven
// word blends for the scales. Here:
// - weights come in as a few overlapping loads of the group (no byte past
//   it); one vpermt2b puts 16 quants of each of four blocks in one zmm,
//   block k in 128-bit lane k (Q4_0: the 16 nibble bytes; Q8_0: 16 of the
//   32 quants, the other 16 in a second zmm), and one vpermt2w picks the
//   fp16 scales out of the same loads;
// - the activation groups are stored so that the matching quants sit in
//   the same places (layouts below): two vpdpbusd put block k's dot in the
//   four int32 of lane k. Q4_0 uses the raw nibbles (0..15) and subtracts
//   8 * sum(x quants); Q8_0 weights are made unsigned by flipping the sign
//   bit (w + 128) and 128 * sum(x quants) (16 * the quantiser's s8) is
//   subtracted afterwards, which replaces the vpsignb pair;
// - eight blocks' lanes are reduced by two unpacks, one in-lane shuffle and
//   one vpermd into a ymm whose lane j is block j's exact dot;
// - GEMV takes two weight rows per pass over the activation (the loads
//   are what limits this loop on Zen 4; KZ_ROWS2), GEMM one row against
//   four vectors, each weight group loaded and unpacked once for the four.
// Leftover blocks after the last full group use kern_x86_body.h's tails
// (natural activation layout, scalar fmaf on the stored lanes).
//
// Activation layouts of this path (quant_act; the tails' leftover blocks
// keep the natural layout). In each full group of 8 blocks (256 bytes),
// blocks 4h .. 4h+3 (h = 0, 1) take the 128 bytes at h * 128:
//   Q4_0 (`paired`): [x_{4h}[0..15] | x_{4h+1}[0..15] | x_{4h+2}[0..15] |
//                     x_{4h+3}[0..15] | x_{4h}[16..31] | ... | x_{4h+3}[16..31]]
//   so that the zmm of low nibbles of blocks 4h..4h+3 meets its activation
//   in one 64-byte load and the high nibbles in the next;
//   Q8_0 (not `paired`): the same with the two halves of block 4h+1
//   swapped, as q8_load's registers hold them.
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define KX_TGT "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,gfni"
#define KX(name) name##_avx512q
#define KX_DOT(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))
#define KX_DOT2(u1, s1, u2, s2) \
    _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), (u1), (s1)), (u2), (s2))
#define KX_NO_QTILE 1 // only the tails of the ymm body are used here
#include "kernels/kern_x86_body.h"

#define TGT __attribute__((target(KX_TGT)))
#define TGTI __attribute__((target(KX_TGT), always_inline)) inline

// Software prefetch distance in bytes ahead of the weight stream (0: none).
#ifndef KZ_PREFETCH
#define KZ_PREFETCH 1024
#endif

// GEMV two rows at a time (1), sharing the activation loads, or one (0).
#ifndef KZ_ROWS2
#define KZ_ROWS2 1
#endif

// ---- activation quantisation ------------------------------------------------

// Same result as pt_quant_act_scalar, bit for bit (ggml's x86
// quantize_row_q8_0: id = 127 / amax, products rounded to nearest even),
// one block per step on two zmm; `paired` selects the Q4_0 layout (else
// the Q8_0 one).
#define KZ_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) // a constant, as the intrinsic needs

TGT void pt_quant_act_avx512(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8)
{
    assert(nb >= 0 && qs && d && s8);
    const int64_t full = nb / 8 * 8;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float db = amax / 127.0f;
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), KZ_RNE);
        const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), KZ_RNE);
        int8_t *lo = qs + b * QK, *hi = lo + 16;
        if (b < full) {
            const int64_t k = b % 8;
            lo = qs + (b - k) * QK + (k / 4) * 128 + (k % 4) * 16;
            hi = lo + 64;
            if (!paired && k % 4 == 1) { // Q8_0 layout: block 1 of a quad swaps its halves
                int8_t *t = lo;
                lo = hi;
                hi = t;
            }
        }
        _mm_storeu_si128((__m128i *)lo, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)hi, _mm512_cvtepi32_epi8(q1));
        s8[b] = 8 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT));
    }
}

// ---- shared pieces ------------------------------------------------------------

// Eight blocks' int32 lane vectors -> ymm lane j = block j's dot. t0 holds
// blocks 0..3, t1 blocks 4..7, block k (of its half) in 128-bit lane k as
// four partial sums. unpacklo + unpackhi give per lane [a0+a2, b0+b2,
// a1+a3, b1+b3], adding the 64-bit-swapped copy gives [sa, sb, sa, sb]
// (sa = block k, sb = block 4 + k), and vpermd picks dwords 0, 4, 8, 12
// (blocks 0..3) then 1, 5, 9, 13 (blocks 4..7).
static TGTI __m256i reduce_quads(__m512i t0, __m512i t1)
{
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(t0, t1), _mm512_unpackhi_epi32(t0, t1));
    const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 4, 8, 12, 1, 5, 9, 13);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, v));
}

// ---- Q4_0 --------------------------------------------------------------------

// A group of 8 Q4_0 blocks (144 bytes at w) loaded and unpacked: lo[h] /
// hi[h] hold the low / high nibbles (0..15) of block 4h + k's 16 bytes in
// 128-bit lane k, dw the eight scales as f32.
typedef struct q4g {
    __m512i lo[2], hi[2]; // (2 halves) unsigned nibbles of 4 blocks, 16 per lane
    __m256 dw;            // (8,) weight scales
} q4g;

// Loads of 64, 64 and 16 bytes at w, w+64, w+128 cover the group exactly
// (no byte past 144). Half 0 (blocks 0..3, nibbles at 18k+2 .. 18k+17)
// lies in the first two loads as they stand (bytes 0..127); half 1 (bytes
// 74..143) in the second (74..125 -> 10..61) and third (128..143 -> 0..15;
// the rest of that register is never read). Scales: bytes 0, 18,
// 36, 54 (words 0, 9, 18, 27 of the first load) and 72, 90, 108, 126
// (words 4, 13, 22, 31 of the second).
static TGTI q4g q4_load(const uint8_t *w)
{
    const __m512i idx0 = _mm512_setr_epi32(
        0x05040302, 0x09080706, 0x0D0C0B0A, 0x11100F0E, 0x17161514, 0x1B1A1918, 0x1F1E1D1C, 0x23222120,
        0x29282726, 0x2D2C2B2A, 0x31302F2E, 0x35343332, 0x3B3A3938, 0x3F3E3D3C, 0x43424140, 0x47464544);
    const __m512i idx1 = _mm512_setr_epi32(
        0x0D0C0B0A, 0x11100F0E, 0x15141312, 0x19181716, 0x1F1E1D1C, 0x23222120, 0x27262524, 0x2B2A2928,
        0x31302F2E, 0x35343332, 0x39383736, 0x3D3C3B3A, 0x43424140, 0x47464544, 0x4B4A4948, 0x4F4E4D4C);
    const __m512i sidx = _mm512_setr_epi32(9 << 16 | 0, 27 << 16 | 18, 45 << 16 | 36, 63 << 16 | 54, 0, 0, 0, 0,
                                           0, 0, 0, 0, 0, 0, 0, 0);
    __m512i l0 = _mm512_loadu_si512(w), l1 = _mm512_loadu_si512(w + 64);
    __m512i l2 = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w + 128)));
    __asm__("" : "+v"(l0), "+v"(l1), "+v"(l2)); // loaded once each (see x_load)
    const __m512i r0 = _mm512_permutex2var_epi8(l0, idx0, l1);
    const __m512i r1 = _mm512_permutex2var_epi8(l1, idx1, l2);
    const __m512i m = _mm512_set1_epi8(0x0F);
    q4g g;
    g.lo[0] = _mm512_and_si512(r0, m);
    // high nibbles: one GF(2) affine map per byte (y = x >> 4) instead of a
    // shift and a mask
    const __m512i shr4 = _mm512_set1_epi64(0x1020408000000000ll);
    g.hi[0] = _mm512_gf2p8affine_epi64_epi8(r0, shr4, 0);
    g.lo[1] = _mm512_and_si512(r1, m);
    g.hi[1] = _mm512_gf2p8affine_epi64_epi8(r1, shr4, 0);
    g.dw = _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(l0, sidx, l1)));
    return g;
}

// An activation group (256 bytes; vectors are only 32-byte aligned, so
// unaligned loads) in four registers. The empty asm keeps each load a
// register value: without it the compiler folds the load into every
// vpdpbusd that reads it, loading it again per weight row (loads are what
// limits these loops on Zen 4).
typedef struct xg4 {
    __m512i v[4]; // (4, 64) activation quants
} xg4;

static TGTI xg4 x_load(const int8_t *xg)
{
    xg4 x;
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        x.v[i] = _mm512_loadu_si512(xg + 64 * i);
        __asm__("" : "+v"(x.v[i]));
    }
    return x;
}

// Lane j = nibble dot of block j with the quad-layout activation group x.
static TGTI __m256i q4_dots(const q4g *g, const xg4 *x)
{
    const __m512i t0 =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g->lo[0], x->v[0]), g->hi[0], x->v[1]);
    const __m512i t1 =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g->lo[1], x->v[2]), g->hi[1], x->v[3]);
    return reduce_quads(t0, t1);
}

// acc += (dots - 8 * sum(x)) * (d_w * d_x), the contract's fma per lane
static TGTI __m256 q4_fma_v(__m256i dots, __m256 dw, __m256 xd, __m256i xs, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(dots, xs)), _mm256_mul_ps(dw, xd), acc);
}

static TGTI __m256 q4_fma(__m256i dots, __m256 dw, const float *xd, const int32_t *xs, __m256 acc)
{
    return q4_fma_v(dots, dw, _mm256_loadu_ps(xd), _mm256_loadu_si256((const __m256i *)xs), acc);
}

static TGTI void prefetch(const uint8_t *p, int lines)
{
    if (KZ_PREFETCH)
        for (int i = 0; i < lines; i++)
            _mm_prefetch((const char *)p + KZ_PREFETCH + 64 * i, _MM_HINT_T0);
}

// One weight row (nb blocks) · one quantised vector.
static TGTI float row_q4(const uint8_t *w, const int8_t *xq, const float *xd, const int32_t *xs, int64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *wg = w + b * 18;
        prefetch(wg, 3);
        const q4g g = q4_load(wg);
        const xg4 xv = x_load(xq + b * QK);
        acc = q4_fma(q4_dots(&g, &xv), g.dw, xd + b, xs + b, acc);
    }
    return tail_q4_avx512q(w, xq, xd, xs, b, nb, acc);
}

// Two weight rows · one vector (GEMV): the activation loads are shared; per
// row the arithmetic is row_q4's exactly.
static TGTI void rows2_q4(const uint8_t *w0, const uint8_t *w1, const int8_t *xq, const float *xd,
                          const int32_t *xs, int64_t nb, float *y0, float *y1)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        prefetch(w0 + b * 18, 3);
        prefetch(w1 + b * 18, 3);
        const q4g g0 = q4_load(w0 + b * 18), g1 = q4_load(w1 + b * 18);
        const xg4 xv = x_load(xq + b * QK);
        const __m256 xdv = _mm256_loadu_ps(xd + b);
        const __m256i xsv = _mm256_loadu_si256((const __m256i *)(xs + b));
        acc0 = q4_fma_v(q4_dots(&g0, &xv), g0.dw, xdv, xsv, acc0);
        acc1 = q4_fma_v(q4_dots(&g1, &xv), g1.dw, xdv, xsv, acc1);
    }
    *y0 = tail_q4_avx512q(w0, xq, xd, xs, b, nb, acc0);
    *y1 = tail_q4_avx512q(w1, xq, xd, xs, b, nb, acc1);
}

// One weight row · four vectors (GEMM): the group is loaded and unpacked
// once for the four; per vector the arithmetic is row_q4's exactly.
static TGTI void row_q4_x4(const uint8_t *w, const pt_q8act *x, int64_t v, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        xq[j] = x->qs + (v + j) * nb * QK;
        xd[j] = x->d + (v + j) * nb;
        xs[j] = x->s8 + (v + j) * nb;
        acc[j] = _mm256_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const q4g g = q4_load(w + b * 18);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
        {
            const xg4 xv = x_load(xq[j] + b * QK);
            acc[j] = q4_fma(q4_dots(&g, &xv), g.dw, xd[j] + b, xs[j] + b, acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        y[j * ldy] = tail_q4_avx512q(w, xq[j], xd[j], xs[j], b, nb, acc[j]);
}

// ---- Q8_0 --------------------------------------------------------------------

// A group of 8 Q8_0 blocks (272 bytes at w): q[m] = blocks 2m, 2m+1's
// quants + 128 (unsigned), one block per 256-bit half; dw the scales.
typedef struct q8g {
    __m512i q[2][2]; // (2 quads, 2 registers) biased quants: 16 of block 4h + k in lane k
    __m256 dw;       // (8,) weight scales
} q8g;

// Quad h (blocks 4h .. 4h+3, bytes 136h .. 136h+135) comes from loads at
// q = w + 136h, q + 64 and q + 72 (the last one ends at byte 272: nothing
// past the group is read). Block k of the quad has its quants at 34k + 2 ..
// 34k + 33 of q. Register 0 takes 16 of them per lane out of the window
// q .. q+127 (the first two loads), register 1 the other 16 out of q ..
// q+63 and q+72 .. q+135 (the first and third): bytes 2..17 / 18..33 of
// block 0, 70..85 / 86..101 of block 2 and 104..119 / 120..135 of block 3,
// but 52..67 / 36..51 of block 1, whose first half is not in register 1's
// window; the Q8_0 activation layout follows (see the top of the file).
// Scale k of the quad: word 17 (k & 1) of the first load for k < 2, of
// the second (at q + 64: bytes 4 and 38) for k >= 2.
static TGTI q8g q8_load(const uint8_t *w)
{
    const __m512i i0 = _mm512_setr_epi32(
        0x05040302, 0x09080706, 0x0D0C0B0A, 0x11100F0E, 0x37363534, 0x3B3A3938, 0x3F3E3D3C, 0x43424140,
        0x49484746, 0x4D4C4B4A, 0x51504F4E, 0x55545352, 0x6B6A6968, 0x6F6E6D6C, 0x73727170, 0x77767574);
    const __m512i i1 = _mm512_setr_epi32(
        0x15141312, 0x19181716, 0x1D1C1B1A, 0x21201F1E, 0x27262524, 0x2B2A2928, 0x2F2E2D2C, 0x33323130,
        0x51504F4E, 0x55545352, 0x59585756, 0x5D5C5B5A, 0x73727170, 0x77767574, 0x7B7A7978, 0x7F7E7D7C);
    const __m512i si = _mm512_setr_epi32(17 << 16 | 0, (32 + 19) << 16 | (32 + 2), 17 << 16 | 0,
                                         (32 + 19) << 16 | (32 + 2), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    q8g g;
    __m512i sc[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = w + 136 * h;
        __m512i l0 = _mm512_loadu_si512(q), l1 = _mm512_loadu_si512(q + 64), l2 = _mm512_loadu_si512(q + 72);
        __asm__("" : "+v"(l0), "+v"(l1), "+v"(l2)); // loaded once each (see x_load)
        g.q[h][0] = _mm512_xor_si512(_mm512_permutex2var_epi8(l0, i0, l1), flip);
        g.q[h][1] = _mm512_xor_si512(_mm512_permutex2var_epi8(l0, i1, l2), flip);
        sc[h] = _mm512_permutex2var_epi16(l0, si, l1); // words 0..3 and again 4..7
    }
    g.dw = _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_mask_blend_epi16(0xF0, sc[0], sc[1])));
    return g;
}

// Lane j = biased dot of block j, sum((w + 128) * x) over the block, with
// the activation group in the Q8_0 layout.
static TGTI __m256i q8_dots(const q8g *g, const xg4 *x)
{
    const __m512i t0 =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g->q[0][0], x->v[0]), g->q[0][1], x->v[1]);
    const __m512i t1 =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g->q[1][0], x->v[2]), g->q[1][1], x->v[3]);
    return reduce_quads(t0, t1);
}

// acc += (dots - 128 * sum(x)) * (d_w * d_x); xs holds 8 * sum(x)
static TGTI __m256 q8_fma(__m256i dots, __m256 dw, const float *xd, const int32_t *xs, __m256 acc)
{
    const __m256i x128 = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)xs), 4);
    return q4_fma_v(dots, dw, _mm256_loadu_ps(xd), x128, acc);
}

static TGTI float row_q8(const uint8_t *w, const int8_t *xq, const float *xd, const int32_t *xs, int64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *wg = w + b * 34;
        prefetch(wg, 5);
        const q8g g = q8_load(wg);
        const xg4 xv = x_load(xq + b * QK);
        acc = q8_fma(q8_dots(&g, &xv), g.dw, xd + b, xs + b, acc);
    }
    return tail_q8_avx512q(w, xq, xd, b, nb, acc);
}

static TGTI void rows2_q8(const uint8_t *w0, const uint8_t *w1, const int8_t *xq, const float *xd,
                          const int32_t *xs, int64_t nb, float *y0, float *y1)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        prefetch(w0 + b * 34, 5);
        prefetch(w1 + b * 34, 5);
        const q8g g0 = q8_load(w0 + b * 34), g1 = q8_load(w1 + b * 34);
        const xg4 xv = x_load(xq + b * QK);
        const __m256 xdv = _mm256_loadu_ps(xd + b);
        const __m256i x128 = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(xs + b)), 4);
        acc0 = q4_fma_v(q8_dots(&g0, &xv), g0.dw, xdv, x128, acc0);
        acc1 = q4_fma_v(q8_dots(&g1, &xv), g1.dw, xdv, x128, acc1);
    }
    *y0 = tail_q8_avx512q(w0, xq, xd, b, nb, acc0);
    *y1 = tail_q8_avx512q(w1, xq, xd, b, nb, acc1);
}

static TGTI void row_q8_x4(const uint8_t *w, const pt_q8act *x, int64_t v, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        xq[j] = x->qs + (v + j) * nb * QK;
        xd[j] = x->d + (v + j) * nb;
        xs[j] = x->s8 + (v + j) * nb;
        acc[j] = _mm256_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const q8g g = q8_load(w + b * 34);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
        {
            const xg4 xv = x_load(xq[j] + b * QK);
            acc[j] = q8_fma(q8_dots(&g, &xv), g.dw, xd[j] + b, xs[j] + b, acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        y[j * ldy] = tail_q8_avx512q(w, xq[j], xd[j], b, nb, acc[j]);
}

// ---- tiles ---------------------------------------------------------------------

// Rows x vectors (pt_qtile_fn): vectors in fours (each weight group loaded
// and unpacked once for four), then the remaining vectors one at a time.
TGT void pt_qtile_avx512(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x, int64_t v0,
                         int64_t nvec, float *y, int64_t ldy)
{
    assert(t == PT_Q4_0 || t == PT_Q8_0);
    assert(w && x && y && nrows >= 0 && nvec >= 0);
    const int64_t nb = x->nb;
    int64_t v = 0;
    for (; v + 4 <= nvec; v += 4) {
        if (t == PT_Q4_0)
            for (int64_t r = 0; r < nrows; r++)
                row_q4_x4(w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
        else
            for (int64_t r = 0; r < nrows; r++)
                row_q8_x4(w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
    }
    for (; v < nvec; v++) {
        const int8_t *xq = x->qs + (v0 + v) * nb * QK;
        const float *xd = x->d + (v0 + v) * nb;
        const int32_t *xs = x->s8 + (v0 + v) * nb;
        float *yv = y + v * ldy;
        int64_t r = 0;
        if (KZ_ROWS2) {
            if (t == PT_Q4_0)
                for (; r + 2 <= nrows; r += 2)
                    rows2_q4(w + r * rb, w + (r + 1) * rb, xq, xd, xs, nb, yv + r, yv + r + 1);
            else
                for (; r + 2 <= nrows; r += 2)
                    rows2_q8(w + r * rb, w + (r + 1) * rb, xq, xd, xs, nb, yv + r, yv + r + 1);
        }
        if (t == PT_Q4_0)
            for (; r < nrows; r++)
                yv[r] = row_q4(w + r * rb, xq, xd, xs, nb);
        else
            for (; r < nrows; r++)
                yv[r] = row_q8(w + r * rb, xq, xd, xs, nb);
    }
}

#endif

// kernels/qt_iq_x86.c — AVX2 (and AVX-512) dot products of the i-quants,
// bit-identical to the scalar ones in qt_iq.c and so to ggml's x86
// vec_dot: the integer sums are computed with vector instructions
// (maddubs / madd, or dpbusd) into ggml's eight int32 lanes per
// super-block (lane l = positions 4l .. 4l + 3 of every 32 values; integer
// addition is associative, so any grouping that keeps a value in its lane
// gives the same lane sums), which then meet their float scales in the
// same f32 operations as the contract above the scalar functions: one
// 8-wide fma per super-block (IQ4_NL: per block, into ggml's even / odd
// accumulators) and ggml's hsum_float_8. Compiled per function with target
// attributes (no -march flag); matmul.c chooses the path at run time.
//
// Products (AVX2): a weight magnitude (u8) times an activation quant with
// the weight's sign folded in (sign_epi8, never overflowing: quants are in
// [-127, 127]); maddubs sums pairs into int16 (|pair| <= 2 * 127 * 127 <
// 2^15, no saturation), madd with the block scale widens to int32. The IQ1
// delta terms go into their own sums as ggml keeps them (IQ1_S: from the
// Q8_K bsums; IQ1_M: a second set of lanes).
// AVX-512 (IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S; the others use their
// AVX2 function there): 64 values per register, whose two 32-value halves
// fold into the eight lanes with one add; for IQ4_NL dpbusd of the levels
// biased to unsigned (w + 128) minus dpbusd of 128, both exact int32; for
// IQ4_XS level magnitudes times the quants negated under a mask (maddubs,
// then dpwssd with the block scale), for IQ2_XXS (with VBMI + GFNI) the
// grid in registers and vector-made sign masks (dpbusd, then dpwssd), see their
// kernels. Where one step handles two or four 32-blocks, the activation
// quants are regrouped (permute2x128 / shuffle_i64x2) to meet the nibble
// order of the weights, and the first / second halves of the blocks are
// summed apart and put back in lane order at the end. The block loops are
// unrolled: the scale selection and index arithmetic then fold into
// constants.
#include "kernels/cpu.h"
#include "kernels/qt_iq.h"
#include "kernels/qt_k.h"
#include "kernels/qt_iq_grid.h"
#include "kernels/qtypes.h"
#include "kernels/kern_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <pthread.h>
#include <stdlib.h>

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

// ggml's hsum_float_8: ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)).
static TGTI float hsum8(__m256 v)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
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

// The 8 scales (6-bit, minus 32) of an IQ4_XS super-block as int32 lanes.
static TGTI __m256i iq4xs_scales32(const pt_blk_iq4_xs *b)
{
    const __m256i sl = _mm256_set1_epi32((int32_t)pt_iq_u32(b->scales_l));
    const __m256i sh = _mm256_set1_epi32(pt_iq_u16(b->scales_h));
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(sl, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                        _mm256_set1_epi32(0xf));
    const __m256i hi = _mm256_slli_epi32(
        _mm256_and_si256(_mm256_srlv_epi32(sh, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), _mm256_set1_epi32(3)), 4);
    return _mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(32));
}

// The same as int16 lanes 0..7 of a 128-bit vector.
static TGTI __m128i iq4xs_scales(const pt_blk_iq4_xs *b)
{
    const __m256i ls = iq4xs_scales32(b);
    return _mm_packs_epi32(_mm256_castsi256_si128(ls), _mm256_extracti128_si256(ls, 1));
}

// Sums of first halves (sL: lanes 0..3 block 2j, 4..7 block 2j + 1) and
// second halves (sH) -> ggml's lanes: lane l < 4 = positions 4l.. of the
// first halves of both blocks, lane 4 + l the same of the second halves.
static TGTI __m256i halves_to_lanes(__m256i sL, __m256i sH)
{
    return _mm256_add_epi32(_mm256_permute2x128_si256(sL, sH, 0x20), _mm256_permute2x128_si256(sL, sH, 0x31));
}

// Software prefetch distance of the IQ row loops, in bytes ahead of the
// weights being read (0: none): as K_PREFETCH in qt_k_x86.c, the core's own
// loads keep too few lines in flight for DRAM in a compute-heavy loop, so
// the lines are asked for this far ahead (one hint per 64-byte line). Hints
// only: the arithmetic, hence the bits, are unchanged. 4096 rather than
// 2048 (as K_PREFETCH): 1 thread streaming 512 MiB on an Ice Lake Xeon,
// GB per CPU second, best of 3 passes per run, best run of 14 interleaved
// pairs: IQ4_XS 9.58 -> 9.89, IQ2_XXS 4.19 -> 4.57 (plain read 9.8-11.4;
// 4096 the faster in 11 of the 14 pairs; 8192 no better, none 20-35 % worse).
#ifndef IQ_PREFETCH
#define IQ_PREFETCH 4096
#endif
static inline void iq_prefetch(const void *blk, size_t bytes)
{
    const char *p = (const char *)blk + IQ_PREFETCH;
    for (size_t o = 0; o < bytes; o += 64)
        __builtin_prefetch(p + o, 0, 3);
}

// One 32-block per step, its levels in value order: the block's 16 nibble
// bytes broadcast to both 128-bit lanes (a load, no shuffle uop), shifted
// by 0 (low lane: values 0..15) or 4 (high lane: 16..31) and looked up, so
// the activation quants are used as stored (no regrouping permutes); the
// block's int16 scale is picked from the eight with one pshufb. Two
// accumulators (even / odd blocks) shorten the add chain; integer sums, so
// the lanes are ggml's exactly.
TGT float pt_vdot_iq4_xs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = w;
    const block_q8_K *y = xq;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i shift = _mm256_setr_epi64x(0, 0, 4, 4);
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (IQ_PREFETCH)
            iq_prefetch(&x[i], sizeof x[i]);
        const __m256i ls = _mm256_broadcastsi128_si256(iq4xs_scales(&x[i]));
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[i].qs + 16 * j)));
            const __m256i W = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srlv_epi64(q, shift), m4));
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * j));
            const __m256i sc = _mm256_shuffle_epi8(ls, _mm256_set1_epi16((short)(0x0100 * (2 * j + 1) + 2 * j)));
            const __m256i p = dot_signed(W, q8, sc);
            if (j & 1)
                s1 = _mm256_add_epi32(s1, p);
            else
                s0 = _mm256_add_epi32(s0, p);
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), vacc);
    }
    return hsum8(vacc);
}

// The super-block i of the 4 activation rows of a vdot4, rows ldx bytes
// apart (plain pointer arithmetic: inlines into every target).
static inline void q8k_rows4(const void *xq, size_t ldx, int64_t i, const block_q8_K *y[4])
{
    for (int r = 0; r < 4; r++)
        y[r] = (const block_q8_K *)((const char *)xq + r * ldx) + i;
}

// The per-super-block step of a vdot4 (one weight row x 4 activation rows):
// accumulator r += (d_w * d_x[r]) * sum[r], the vdot's own f32 operations.
static TGTI void acc4_scaled(__m256 vacc[4], const __m256i sum[4], float dw, const block_q8_K *const y[4])
{
    for (int r = 0; r < 4; r++)
        vacc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[r]->d), _mm256_cvtepi32_ps(sum[r]), vacc[r]);
}

// One IQ4_XS row times 4 activation rows at xq + r * ldx bytes (batched
// products): the levels, their magnitudes and the block scale are made
// once per 32-block for the four; each output takes exactly the integer
// sums and float operations of pt_vdot_iq4_xs_avx2, so equals it bit for bit.
TGT void pt_vdot4_iq4_xs_avx2(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = w;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i shift = _mm256_setr_epi64x(0, 0, 4, 4);
    __m256 vacc[4];
    for (int r = 0; r < 4; r++)
        vacc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q8_K *y[4];
        q8k_rows4(xq, ldx, i, y);
        const __m256i ls = _mm256_broadcastsi128_si256(iq4xs_scales(&x[i]));
        __m256i sum[4];
        for (int r = 0; r < 4; r++)
            sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[i].qs + 16 * j)));
            const __m256i W = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srlv_epi64(q, shift), m4));
            const __m256i A = _mm256_sign_epi8(W, W);
            const __m256i sc = _mm256_shuffle_epi8(ls, _mm256_set1_epi16((short)(0x0100 * (2 * j + 1) + 2 * j)));
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[r]->qs + 32 * j));
                sum[r] = _mm256_add_epi32(sum[r], mul_scaled(A, _mm256_sign_epi8(q8, W), sc));
            }
        }
        acc4_scaled(vacc, sum, h2f(x[i].d), y);
    }
    for (int r = 0; r < 4; r++)
        out[r] = hsum8(vacc[r]);
}

// IQ4_NL blocks b, b + 1 as AVX2 operands: L / H = the levels of the first /
// second halves of both blocks (block b in the low 128-bit lane), qL / qH
// the activation quants regrouped to match.
typedef struct {
    __m256i L, H, qL, qH;
} iq4_pair;

static TGTI iq4_pair iq4nl_pair(const pt_blk_iq4_nl *x, const block_q8_0 *y, __m256i tab)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i q = _mm256_loadu2_m128i((const __m128i *)x[1].qs, (const __m128i *)x[0].qs);
    const __m256i a = _mm256_loadu_si256((const __m256i *)y[0].qs), b = _mm256_loadu_si256((const __m256i *)y[1].qs);
    return (iq4_pair){_mm256_shuffle_epi8(tab, _mm256_and_si256(q, m4)),
                      _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)),
                      _mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31)};
}

// d_w[b] * d_x[b] of blocks b0 .. b0 + 7 (exact products of fp16 values).
static TGTI __m256 iq4nl_scales8(const pt_blk_iq4_nl *x, const block_q8_0 *y)
{
    // four fp16 scales per 64-bit word, assembled in general registers
    // (fewer vector-shuffle uops than eight 16-bit inserts)
    uint64_t w0 = 0, w1 = 0, x0 = 0, x1 = 0;
    for (int k = 0; k < 4; k++) {
        w0 |= (uint64_t)pt_iq_u16(x[k].d) << 16 * k;
        w1 |= (uint64_t)pt_iq_u16(x[k + 4].d) << 16 * k;
        x0 |= (uint64_t)y[k].d << 16 * k;
        x1 |= (uint64_t)y[k + 4].d << 16 * k;
    }
    const __m128i dw = _mm_insert_epi64(_mm_cvtsi64_si128((long long)w0), (long long)w1, 1);
    const __m128i dx = _mm_insert_epi64(_mm_cvtsi64_si128((long long)x0), (long long)x1, 1);
    return _mm256_mul_ps(_mm256_cvtph_ps(dw), _mm256_cvtph_ps(dx));
}

// ggml's even / odd accumulators acc1, acc2 are kept half-major: AL =
// lanes 0..3 of acc1 | lanes 0..3 of acc2, AH = lanes 4..7 of both (the
// layout the pair's dot products come in, so no shuffle of data per pair;
// every lane takes the same fmas in the same order).
// One pair (blocks b, b + 1): their lane sums times d_x * d_w, broadcast
// per 128-bit lane from lanes k, k + 1 of dd.
static TGTI void iq4nl_acc2(__m256i sL, __m256i sH, __m256 dd, int k, __m256 *AL, __m256 *AH)
{
    const __m256 d = _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(k, k, k, k, k + 1, k + 1, k + 1, k + 1));
    *AL = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sL), *AL);
    *AH = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sH), *AH);
}

static TGTI void iq4nl_pair_acc(const pt_blk_iq4_nl *x, const block_q8_0 *y, __m256i tab, __m256 dd, int k,
                                __m256 *AL, __m256 *AH)
{
    const iq4_pair p = iq4nl_pair(x, y, tab);
    const __m256i ones = _mm256_set1_epi16(1);
    iq4nl_acc2(dot_signed(p.L, p.qL, ones), dot_signed(p.H, p.qH, ones), dd, k, AL, AH);
}

// d_x * d_w of blocks b, b + 1 as lanes 0 and 1.
static TGTI __m256 iq4nl_scales2(const pt_blk_iq4_nl *x, const block_q8_0 *y)
{
    const __m128 w = _mm_cvtph_ps(_mm_cvtsi32_si128((int)(pt_iq_u16(x[0].d) | (uint32_t)pt_iq_u16(x[1].d) << 16)));
    const __m128 a = _mm_cvtph_ps(_mm_cvtsi32_si128((int)(y[0].d | (uint32_t)y[1].d << 16)));
    return _mm256_castps128_ps256(_mm_mul_ps(w, a));
}

// ggml's pairs and scalar tail (the contract above pt_vdot_iq4_nl_scalar).
static TGTI float iq4nl_tail(const pt_blk_iq4_nl *x, const block_q8_0 *y, int64_t b, int64_t nb, __m256i tab,
                             __m256 AL, __m256 AH)
{
    for (; b + 1 < nb; b += 2)
        iq4nl_pair_acc(x + b, y + b, tab, iq4nl_scales2(x + b, y + b), 0, &AL, &AH);
    const __m256 acc1 = _mm256_permute2f128_ps(AL, AH, 0x20), acc2 = _mm256_permute2f128_ps(AL, AH, 0x31);
    float s = hsum8(_mm256_add_ps(acc1, acc2));
    if (b < nb) {
        const int32_t t = hsum_i32(dot_signed(iq4_levels(x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs),
                                              _mm256_set1_epi16(1)));
        s += _cvtsh_ss(y[b].d) * h2f(x[b].d) * (float)t;
    }
    return s;
}

TGT float pt_vdot_iq4_nl_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK == 0);
    const pt_blk_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    const int64_t nb = n / QK, nb8 = nb / 8 * 8;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl));
    __m256 AL = _mm256_setzero_ps(), AH = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb8; b += 8) {
        const __m256 dd = iq4nl_scales8(x + b, y + b);
#pragma GCC unroll 4
        for (int k = 0; k < 8; k += 2)
            iq4nl_pair_acc(x + b + k, y + b + k, tab, dd, k, &AL, &AH);
    }
    return iq4nl_tail(x, y, nb8, nb, tab, AL, AH);
}

// ---- IQ2 ---------------------------------------------------------------------

// The sign words and half scales of an IQ2_XXS super-block's
// eight 32-blocks, computed side by side from the eight aux words (one per
// block: 4 x 7 sign bits, 4-bit scale s on top). aux32 holds them in the
// order [0 1 4 5 | 2 3 6 7] (what one shuffle_ps of the two halves of the
// 64 bytes gives). sign word = the 4 ksigns bytes (7 stored bits, bit 7 =
// their parity: ggml's ksigns_iq2xs, the SWAR fold of ksigns4 below);
// SA / SB (LA / LB) = the sign words (scales 2 s + 1) of blocks 0 1 4 5 /
// 2 3 6 7 in both 128-bit lanes, so one in-lane pshufb per block spreads
// them (xxs_pick).
typedef struct {
    __m256i SA, SB, LA, LB;
} xxs_side;

static TGTI xxs_side xxs_signs_scales(__m256i aux32)
{
    const __m256i a = aux32;
    __m256i s = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi32(0x7f)),
                        _mm256_and_si256(_mm256_slli_epi32(a, 1), _mm256_set1_epi32(0x7f00))),
        _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(a, 2), _mm256_set1_epi32(0x7f0000)),
                        _mm256_and_si256(_mm256_slli_epi32(a, 3), _mm256_set1_epi32(0x7f000000))));
    __m256i t = _mm256_xor_si256(s, _mm256_srli_epi32(s, 4));
    t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 2));
    t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 1));
    s = _mm256_or_si256(s, _mm256_slli_epi32(_mm256_and_si256(t, _mm256_set1_epi32(0x01010101)), 7));
    const __m256i ls = _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(a, 28), 1), _mm256_set1_epi32(1));
    return (xxs_side){_mm256_permute2x128_si256(s, s, 0x00), _mm256_permute2x128_si256(s, s, 0x11),
                      _mm256_permute2x128_si256(ls, ls, 0x00), _mm256_permute2x128_si256(ls, ls, 0x11)};
}

// Block ib's +1 / -1 per value (*sg) and its int16 scale in every word (*sc).
static TGTI void xxs_pick(const xxs_side *v, int ib, __m256i *sg, __m256i *sc)
{
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ull);
    const int pos = (ib & 1) | ((ib & 4) >> 1); // word of block ib in SA (ib & 2 == 0) or SB
    const __m256i S = (ib & 2) ? v->SB : v->SA, L = (ib & 2) ? v->LB : v->LA;
    const char b0 = (char)(4 * pos), b1 = (char)(4 * pos + 1), b2 = (char)(4 * pos + 2), b3 = (char)(4 * pos + 3);
    const __m256i sel = _mm256_setr_epi8(b0, b0, b0, b0, b0, b0, b0, b0, b1, b1, b1, b1, b1, b1, b1, b1, b2, b2, b2,
                                         b2, b2, b2, b2, b2, b3, b3, b3, b3, b3, b3, b3, b3);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(S, sel), bit), bit);
    *sg = _mm256_or_si256(neg, _mm256_set1_epi8(1));
    *sc = _mm256_shuffle_epi8(L, _mm256_set1_epi16((short)(0x0100 * b1 + b0)));
}

// The aux words of the super-block's 64 bytes qs (8 x [4 grid bytes, aux])
// in xxs_signs_scales' order.
static TGTI __m256i xxs_aux(const uint8_t *qs)
{
    const __m256 r0 = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)qs));
    const __m256 r1 = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(qs + 32)));
    return _mm256_castps_si256(_mm256_shuffle_ps(r0, r1, 0xdd));
}

// Signs and scales of all eight blocks computed once per super-block in
// vector registers (xxs_side), then per block: the four grid entries, one
// pshufb + and + cmpeq for the signs, one pshufb for the scale.
TGT float pt_vdot_iq2_xxs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xxs *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (IQ_PREFETCH)
            iq_prefetch(&x[i], sizeof x[i]);
        const xxs_side v = xxs_signs_scales(xxs_aux(x[i].qs));
        __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq2xxs_grid[q[3]], (int64_t)pt_iq2xxs_grid[q[2]],
                                                (int64_t)pt_iq2xxs_grid[q[1]], (int64_t)pt_iq2xxs_grid[q[0]]);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            __m256i sg, sc;
            xxs_pick(&v, ib, &sg, &sc);
            sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, sg), sc));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), vacc);
    }
    return 0.125f * hsum8(vacc);
}

// One IQ2_XXS row times 4 activation rows (as pt_vdot4_iq4_xs_avx2): the
// grid entries, signs and scale of each 32-block are made once for the
// four, each output bit for bit pt_vdot_iq2_xxs_avx2's.
TGT void pt_vdot4_iq2_xxs_avx2(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xxs *x = w;
    __m256 vacc[4];
    for (int r = 0; r < 4; r++)
        vacc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q8_K *y[4];
        q8k_rows4(xq, ldx, i, y);
        const xxs_side v = xxs_signs_scales(xxs_aux(x[i].qs));
        __m256i sum[4];
        for (int r = 0; r < 4; r++)
            sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq2xxs_grid[q[3]], (int64_t)pt_iq2xxs_grid[q[2]],
                                                (int64_t)pt_iq2xxs_grid[q[1]], (int64_t)pt_iq2xxs_grid[q[0]]);
            __m256i sg, sc;
            xxs_pick(&v, ib, &sg, &sc);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[r]->qs + 32 * ib));
                sum[r] = _mm256_add_epi32(sum[r], mul_scaled(g, _mm256_sign_epi8(q8, sg), sc));
            }
        }
        acc4_scaled(vacc, sum, h2f(x[i].d), y);
    }
    for (int r = 0; r < 4; r++)
        out[r] = 0.125f * hsum8(vacc[r]);
}

// The 16 half scales 2 * s + 1 of an IQ2_XS / IQ2_S super-block (4-bit
// s, low nibble first) as int16; A holds halves 0..7 (blocks 0..3) in both
// 128-bit lanes, B halves 8..15.
static TGTI void iq2_half_scales(const uint8_t *scales, __m256i *A, __m256i *B)
{
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i sc = _mm_loadl_epi64((const __m128i *)scales);
    const __m128i h = _mm_unpacklo_epi8(_mm_and_si128(sc, m4), _mm_and_si128(_mm_srli_epi16(sc, 4), m4));
    const __m256i w = _mm256_cvtepu8_epi16(_mm_add_epi8(_mm_add_epi8(h, h), _mm_set1_epi8(1)));
    *A = _mm256_permute2x128_si256(w, w, 0x00);
    *B = _mm256_permute2x128_si256(w, w, 0x11);
}

// Block ib's two half scales from iq2_half_scales: word 2 (ib % 4) of its
// vector into the low 128-bit lane, word 2 (ib % 4) + 1 into the high one.
static TGTI __m256i iq2_block_scales(__m256i A, __m256i B, int ib)
{
    const int j = ib % 4;
    const __m256i pick = _mm256_set_m128i(_mm_set1_epi16((int16_t)((4 * j + 3) << 8 | (4 * j + 2))),
                                          _mm_set1_epi16((int16_t)((4 * j + 1) << 8 | 4 * j)));
    return _mm256_shuffle_epi8(ib < 4 ? A : B, pick);
}

// IQ2_XS, four 32-blocks (16 u16 words: 9-bit grid index | 7 sign bits << 9)
// at a time: the indices are masked in a vector and read back, the 8th sign
// bit (even parity of the 8) comes from a nibble-parity lookup: parity of
// bits 0..6 = parity of (bits 0..3 ^ bits 4..6).
TGT float pt_vdot_iq2_xs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xs *x = w;
    const block_q8_K *y = xq;
    const __m256i parity = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0,
                                            0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    // sign byte of group l (word l of the 4-block group) -> its 8 values
    const __m256i sel01 = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2,
                                           4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);
    const __m256i sel23 = _mm256_add_epi8(sel01, _mm256_set1_epi8(8));
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ull);
    const __m256i ones8 = _mm256_set1_epi8(1);
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i A, B;
        iq2_half_scales(x[i].scales, &A, &B);
        __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            _Alignas(32) uint16_t gi[16];
            const __m256i qd = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * half));
            _mm256_store_si256((__m256i *)gi, _mm256_and_si256(qd, _mm256_set1_epi16(511)));
            const __m256i s7 = _mm256_srli_epi16(qd, 9);
            const __m256i s8 = _mm256_or_si256(s7, _mm256_shuffle_epi8(parity, _mm256_xor_si256(s7, _mm256_srli_epi16(qd, 13))));
            const __m256i lo = _mm256_permute2x128_si256(s8, s8, 0x00), hi = _mm256_permute2x128_si256(s8, s8, 0x11);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const int ib = 4 * half + k;
                const __m256i g = _mm256_set_epi64x((int64_t)pt_iq2xs_grid[gi[4 * k + 3]], (int64_t)pt_iq2xs_grid[gi[4 * k + 2]],
                                                    (int64_t)pt_iq2xs_grid[gi[4 * k + 1]], (int64_t)pt_iq2xs_grid[gi[4 * k]]);
                const __m256i sb = _mm256_shuffle_epi8(k < 2 ? lo : hi, k % 2 ? sel23 : sel01);
                const __m256i sg = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(sb, bit), bit), ones8);
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
                sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, sg), iq2_block_scales(A, B, ib)));
            }
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), vacc);
    }
    return 0.125f * hsum8(vacc);
}

// IQ2_S: 10-bit indices (8 from qs, 2 from qh) built for four blocks at a
// time in a vector and read back; the sign bytes are stored whole.
TGT float pt_vdot_iq2_s_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_s *x = w;
    const block_q8_K *y = xq;
    const __m128i rep4 = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i shl = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i A, B;
        iq2_half_scales(x[i].scales, &A, &B);
        __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            _Alignas(32) uint16_t gi[16];
            const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x[i].qs + 16 * half)));
            const __m128i qh = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)pt_iq_u32(x[i].qh + 4 * half)), rep4);
            const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(qh), shl), _mm256_set1_epi16(0x300));
            _mm256_store_si256((__m256i *)gi, _mm256_or_si256(lo, hi));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const int ib = 4 * half + k;
                const __m256i g = _mm256_set_epi64x((int64_t)pt_iq2s_grid[gi[4 * k + 3]], (int64_t)pt_iq2s_grid[gi[4 * k + 2]],
                                                    (int64_t)pt_iq2s_grid[gi[4 * k + 1]], (int64_t)pt_iq2s_grid[gi[4 * k]]);
                const __m256i s = signs_from_bytes(pt_iq_u32(x[i].signs + 4 * ib));
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
                sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, s), iq2_block_scales(A, B, ib)));
            }
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), vacc);
    }
    return 0.125f * hsum8(vacc);
}

// ---- IQ3 ---------------------------------------------------------------------

TGT float pt_vdot_iq3_xxs_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_xxs *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
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
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), vacc);
    }
    return 0.25f * hsum8(vacc);
}

// 4-value IQ3_S grid entries of one 32-block (8 indices: 8 low bits from
// qs, the 9th from bit k of qh) as one vector. The indices are computed in
// a vector and read back from memory: cheaper than 8 scalar index sums.
static TGTI __m256i iq3s_grid8(const uint8_t *qs, int qh)
{
    _Alignas(32) uint32_t idx[8];
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
    const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(qh), _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)),
                                        _mm256_set1_epi32(256));
    _mm256_store_si256((__m256i *)idx, _mm256_or_si256(lo, hi));
    return _mm256_set_epi32((int)pt_iq3s_grid[idx[7]], (int)pt_iq3s_grid[idx[6]], (int)pt_iq3s_grid[idx[5]],
                            (int)pt_iq3s_grid[idx[4]], (int)pt_iq3s_grid[idx[3]], (int)pt_iq3s_grid[idx[2]],
                            (int)pt_iq3s_grid[idx[1]], (int)pt_iq3s_grid[idx[0]]);
}

TGT float pt_vdot_iq3_s_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_s *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const __m256i g = iq3s_grid8(x[i].qs + 8 * ib, x[i].qh[ib]);
            const __m256i s = signs_from_bytes(pt_iq_u32(x[i].signs + 4 * ib));
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const int sc = ib % 2 ? x[i].scales[ib / 2] >> 4 : x[i].scales[ib / 2] & 0xf;
            sum = _mm256_add_epi32(sum, mul_scaled(g, _mm256_sign_epi8(q8, s), _mm256_set1_epi16((int16_t)(2 * sc + 1))));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), vacc);
    }
    return hsum8(vacc);
}

// ---- IQ1 ---------------------------------------------------------------------

// IQ1_S: the grid values g in {-1, 0, 1} in ggml's lanes; the delta term
// sum_ib e_ib ls_ib (bsum_2ib + bsum_2ib+1) as one madd of the Q8_K block
// sums with e_ib ls_ib (each word twice) and an integer hsum.
// The IQ1 grid values are signs, so ls * g * q8 per value is one maddubs of
// the scale bytes (u8, <= 15) with q8 signed by g: pairs of at most
// 2 * 15 * 127, summed over the 8 blocks of a super-block in int16
// (<= 30480, no overflow), widened to ggml's int32 lanes once (madd 1).
TGT float pt_vdot_iq1_s_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_s *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps();
    float accum1 = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        // per 32-block, from its qh word: scale 2 s + 1 (int16 word ib, in
        // both 128-bit lanes), and the same times its delta sign +-1
        const __m128i qhv = _mm_loadu_si128((const __m128i *)x[i].qh);
        const __m256i ls = _mm256_broadcastsi128_si256(
            _mm_add_epi16(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qhv, 12), _mm_set1_epi16(7)), 1), _mm_set1_epi16(1)));
        const __m128i els = _mm_sign_epi16(_mm256_castsi256_si128(ls), _mm_or_si128(_mm_srai_epi16(qhv, 15), _mm_set1_epi16(1)));
        const __m256i eld = _mm256_set_m128i(_mm_unpackhi_epi16(els, els), _mm_unpacklo_epi16(els, els));
        const int32_t sumi1 = hsum_i32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), eld));
        __m256i sum16 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib;
            const uint16_t qh = pt_iq_u16(x[i].qh + 2 * ib);
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq1s_grid[q[3] | ((qh >> 1) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[2] | ((qh << 2) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[1] | ((qh << 5) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[0] | ((qh << 8) & 0x700)]);
            const __m256i sc8 = _mm256_shuffle_epi8(ls, _mm256_set1_epi8((char)(2 * ib)));
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(sc8, _mm256_sign_epi8(q8, g)));
        }
        const __m256i sum = _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
        const float d = y[i].d * h2f(x[i].d);
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), vacc);
        accum1 = fmaf(d, (float)sumi1, accum1);
    }
    return hsum8(vacc) + 0.125f * accum1;
}

// IQ1_M: the grid values g in {-1, 0, 1} and, separately, the delta
// signs e = +-1 of each 8-group, each in ggml's lanes with the same scales
// (both in int16 per super-block as IQ1_S's grid values).
TGT float pt_vdot_iq1_m_avx2(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_m *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps(), vacc2 = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        // the 16 3-bit scales as 2 * s + 1, int16: qword k of the vector holds
        // the 4 scale words shifted by 0, 6, 3, 9 bits, so the low 128-bit lane
        // has the first-half scales of blocks 0 2 4 6 1 3 5 7, the high lane
        // the second-half ones in the same order
        uint64_t sw;
        memcpy(&sw, x[i].scales, 8);
        __m256i ls = _mm256_srlv_epi64(_mm256_set1_epi64x((int64_t)sw), _mm256_setr_epi64x(0, 6, 3, 9));
        ls = _mm256_add_epi16(_mm256_slli_epi16(_mm256_and_si256(ls, _mm256_set1_epi16(7)), 1), _mm256_set1_epi16(1));
        // delta sign of each 8-group g = 4 ib + l: bit 3 (l even) or 7 (l odd)
        // of qh byte g / 2, as +-1 bytes in group order; E0 = groups 0..15
        // (blocks 0..3), E1 = groups 16..31, each in both 128-bit lanes
        const __m128i qhv = _mm_loadu_si128((const __m128i *)x[i].qh);
        const __m128i n3 = _mm_cmpeq_epi8(_mm_and_si128(qhv, _mm_set1_epi8(0x08)), _mm_set1_epi8(0x08));
        const __m128i n7 = _mm_cmpeq_epi8(_mm_and_si128(qhv, _mm_set1_epi8(-128)), _mm_set1_epi8(-128));
        const __m256i E0 = _mm256_broadcastsi128_si256(_mm_or_si128(_mm_unpacklo_epi8(n3, n7), _mm_set1_epi8(1)));
        const __m256i E1 = _mm256_broadcastsi128_si256(_mm_or_si128(_mm_unpackhi_epi8(n3, n7), _mm_set1_epi8(1)));
        __m256i sum16 = _mm256_setzero_si256(), sum16e = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib;
            const uint8_t h0 = x[i].qh[2 * ib], h1 = x[i].qh[2 * ib + 1];
            const int g0 = 4 * (ib % 4); // first group of block ib in E0 / E1
            const __m256i esel = _mm256_set_epi64x(0x0101010101010101 * (g0 + 3), 0x0101010101010101 * (g0 + 2),
                                                   0x0101010101010101 * (g0 + 1), 0x0101010101010101 * g0);
            const __m256i g = _mm256_set_epi64x((int64_t)pt_iq1s_grid[q[3] | ((h1 << 4) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[2] | ((h1 << 8) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[1] | ((h0 << 4) & 0x700)],
                                                (int64_t)pt_iq1s_grid[q[0] | ((h0 << 8) & 0x700)]);
            const __m256i e = _mm256_shuffle_epi8(ib < 4 ? E0 : E1, esel);
            const int k = ib % 2 ? 4 + ib / 2 : ib / 2; // word of block ib in each lane of ls
            const __m256i sc8 = _mm256_shuffle_epi8(ls, _mm256_set1_epi8((char)(2 * k)));
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(sc8, _mm256_sign_epi8(q8, g)));
            sum16e = _mm256_add_epi16(sum16e, _mm256_maddubs_epi16(sc8, _mm256_sign_epi8(q8, e)));
        }
        const __m256i sum = _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
        const __m256i sum2 = _mm256_madd_epi16(sum16e, _mm256_set1_epi16(1));
        const __m256 d = _mm256_set1_ps(y[i].d * _cvtsh_ss(pt_iq1m_scale(&x[i])));
        vacc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), vacc);
        vacc2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum2), vacc2);
    }
    return hsum8(vacc) + 0.125f * hsum8(vacc2);
}

// A 512-bit register of two 32-value halves (values 64k .. 64k + 63) ->
// ggml's eight lanes: lane l = positions 4l .. 4l + 3 of either half.
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m256i fold512(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// ---- AVX-512 VNNI: the 32-block types, where dpbusd replaces maddubs + madd

// IQ4_NL blocks b, b + 1 in one 512-bit register, in ggml's lane order:
// the weights as [low nibbles of b | high of b | low of b + 1 | high of
// b + 1] (each block's 16 bytes broadcast to two 128-bit lanes, shifted by
// 0 / 4 per lane) meet the two blocks' quants as they are stored, so lanes
// 0..7 are block b's ggml lanes and 8..15 block b + 1's.
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i iq4nl_pair_vnni(const pt_blk_iq4_nl *x, const block_q8_0 *y, __m512i tab)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), bias = _mm512_set1_epi8(-128);
    const __m512i shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x[0].qs))),
                                         _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x[1].qs)), 1);
    const __m512i W = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srlv_epi64(q, shift), m4));
    const __m512i Q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[0].qs)),
                                         _mm256_loadu_si256((const __m256i *)y[1].qs), 1);
    const __m512i z = _mm512_setzero_si512();
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(z, W, Q), _mm512_dpbusd_epi32(z, bias, Q));
}

// ggml's even / odd accumulators side by side in one 512-bit register
// (acc1 | acc2), one pair of blocks per step.
TGT512 float pt_vdot_iq4_nl_avx512(const void *w, const void *xq, int64_t n)
{
    assert(n % QK == 0);
    const pt_blk_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    const int64_t nb = n / QK, nb8 = nb / 8 * 8;
    const __m512i tab = _mm512_broadcast_i32x4(
        _mm_add_epi8(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl), _mm_set1_epi8(-128)));
    // d_x * d_w of pair k (blocks 2k, 2k + 1) per half of the register
    const __m512i spread[4] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                               _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                               _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
                               _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7)};
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb8; b += 8) {
        const __m512 dd = _mm512_castps256_ps512(iq4nl_scales8(x + b, y + b));
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            acc = _mm512_fmadd_ps(_mm512_permutexvar_ps(spread[k], dd),
                                  _mm512_cvtepi32_ps(iq4nl_pair_vnni(x + b + 2 * k, y + b + 2 * k, tab)), acc);
    }
    // the AVX2 tail takes the accumulators half-major
    const __m256 acc1 = _mm512_castps512_ps256(acc), acc2 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    const __m256i tab2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl));
    return iq4nl_tail(x, y, nb8, nb, tab2, _mm256_permute2f128_ps(acc1, acc2, 0x20), _mm256_permute2f128_ps(acc1, acc2, 0x31));
}

// IQ4_XS with 512-bit registers, two 32-blocks (64 values) per step, in
// the activations' own order: the 16 nibble bytes of block 2j broadcast to
// 128-bit lanes 0, 1 and those of block 2j + 1 to lanes 2, 3 (two
// broadcast loads, merged under a mask: no shuffle uop), the low nibbles
// taken in lanes 0 and 2, the high ones in 1 and 3, so bytes 0..15 are
// block 2j's values 0..15, 16..31 its values 16..31, 32..63 the same of
// block 2j + 1. AVX-512 has no byte sign instruction: the level
// magnitudes |w| come from a table and the activation quants are negated
// under the mask of the negative levels (nibble < 8: bit 3 clear), so
// maddubs (|w| <= 127, |q| <= 127: pairs <= 32258, no saturation) gives
// exact int16 pair sums and one dpwssd with the block scale (in both words
// of a dword) adds positions 4m .. 4m + 3 times ls into dword m: dwords
// 0..7 are block 2j's ggml lanes, 8..15 block 2j + 1's (exact int32,
// folded into the eight lanes at the end as the other AVX-512 kernels),
// then the vdot's one fma per super-block. With VBMI one vpmultishiftqb
// cuts the nibbles (bits 4k or 4k + 4 of each qword into byte k) and
// vpermb looks them up (it ignores the bits above the 6th: the table is
// the 16 levels four times), without VBMI a vpsrlvq by 0 / 4, a vpand and
// vpshufb do the same: one uop fewer per 64 values on the ports that
// bound this loop (measured: 8.9 vs 9.4 ns per super-block here).

#define TGT512V __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))
#define TGTI512V __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"), always_inline)) inline

// The eight IQ4_XS scales of a super-block as dwords with the int16 scale
// in both words (dpwssd's operand), and the selector of blocks 2j, 2j + 1
// from such a vector (dwords 0..7 <- block 2j, 8..15 <- block 2j + 1).
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i iq4xs_scales_w2(const pt_blk_iq4_xs *b)
{
    const __m256i ls = iq4xs_scales32(b);
    const __m256i dup = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                         0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    return _mm512_castsi256_si512(_mm256_shuffle_epi8(ls, dup));
}
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i pair_sel(int j)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * j)), _mm256_set1_epi32(2 * j + 1), 1);
}

// Blocks 2j, 2j + 1 of an IQ4_XS super-block (their 32 nibble bytes at
// qs): level magnitudes *A and the mask *neg of the negative levels, in the
// activations' order (see above); with VBMI and without.
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i iq4xs_bytes512(const uint8_t *qs)
{
    return _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qs)), 0xff00,
                                       _mm_loadu_si128((const __m128i *)(qs + 16)));
}
static TGTI512V void iq4xs_pair_vbmi(const uint8_t *qs, __m512i tabs, __m512i *A, __mmask64 *neg)
{
    const int64_t lo = 0x3830282018100800ll, hi = 0x3c342c241c140c04ll; // bit offsets 8k / 8k + 4
    const __m512i idx = _mm512_multishift_epi64_epi8(_mm512_setr_epi64(lo, lo, hi, hi, lo, lo, hi, hi), iq4xs_bytes512(qs));
    *A = _mm512_permutexvar_epi8(idx, tabs);
    *neg = _mm512_testn_epi8_mask(idx, _mm512_set1_epi8(0x08));
}
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
void iq4xs_pair_bw(const uint8_t *qs, __m512i tabs, __m512i *A, __mmask64 *neg)
{
    const __m512i idx = _mm512_and_si512(_mm512_srlv_epi64(iq4xs_bytes512(qs), _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)),
                                         _mm512_set1_epi8(0x0f));
    *A = _mm512_shuffle_epi8(tabs, idx);
    *neg = _mm512_testn_epi8_mask(idx, _mm512_set1_epi8(0x08));
}

// acc + ls-scaled ggml lane sums of 64 magnitudes A (u8) with the quants at
// q8 negated under neg.
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i iq4xs_dot512(__m512i acc, __m512i A, __mmask64 neg, const int8_t *q8, __m512i sc)
{
    const __m512i x = _mm512_loadu_si512((const void *)q8);
    const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(A, xs), sc);
}

// The vdot and vdot4 bodies, made twice below: with the VBMI pair step
// and without (PAIR).
#define IQ4XS_VDOT512(ATTR, NAME, PAIR) \
ATTR float NAME(const void *w, const void *xq, int64_t n) \
{ \
    assert(n % QK_K == 0); \
    const pt_blk_iq4_xs *x = w; \
    const block_q8_K *y = xq; \
    const __m512i tabs = _mm512_broadcast_i32x4(_mm_abs_epi8(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl))); \
    __m256 vacc = _mm256_setzero_ps(); \
    for (int64_t i = 0; i < n / QK_K; i++) { \
        if (IQ_PREFETCH) \
            iq_prefetch(&x[i], sizeof x[i]); \
        const __m512i ls = iq4xs_scales_w2(&x[i]); \
        __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512(); \
_Pragma("GCC unroll 4") \
        for (int j = 0; j < 4; j++) { \
            __m512i A; \
            __mmask64 neg; \
            PAIR(x[i].qs + 32 * j, tabs, &A, &neg); \
            const __m512i sc = _mm512_permutexvar_epi32(pair_sel(j), ls); \
            if (j & 1) \
                acc1 = iq4xs_dot512(acc1, A, neg, y[i].qs + 64 * j, sc); \
            else \
                acc0 = iq4xs_dot512(acc0, A, neg, y[i].qs + 64 * j, sc); \
        } \
        const __m256i sum = fold512(_mm512_add_epi32(acc0, acc1)); \
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), vacc); \
    } \
    return hsum8(vacc); \
}

// One IQ4_XS row times 4 activation rows (as pt_vdot4_iq4_xs_avx2): the
// magnitudes, negation mask and scales of each pair of blocks made once
// for the four; each output takes the vdot's integer sums and float
// operations, so equals it (and the scalar vdot) bit for bit.
#define IQ4XS_VDOT4_512(ATTR, NAME, PAIR) \
ATTR void NAME(const void *w, const void *xq, size_t ldx, int64_t n, float *out) \
{ \
    assert(n % QK_K == 0); \
    const pt_blk_iq4_xs *x = w; \
    const __m512i tabs = _mm512_broadcast_i32x4(_mm_abs_epi8(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl))); \
    __m256 vacc[4]; \
    for (int r = 0; r < 4; r++) \
        vacc[r] = _mm256_setzero_ps(); \
    for (int64_t i = 0; i < n / QK_K; i++) { \
        const block_q8_K *y[4]; \
        q8k_rows4(xq, ldx, i, y); \
        const __m512i ls = iq4xs_scales_w2(&x[i]); \
        __m512i acc[4]; \
        for (int r = 0; r < 4; r++) \
            acc[r] = _mm512_setzero_si512(); \
_Pragma("GCC unroll 4") \
        for (int j = 0; j < 4; j++) { \
            __m512i A; \
            __mmask64 neg; \
            PAIR(x[i].qs + 32 * j, tabs, &A, &neg); \
            const __m512i sc = _mm512_permutexvar_epi32(pair_sel(j), ls); \
_Pragma("GCC unroll 4") \
            for (int r = 0; r < 4; r++) \
                acc[r] = iq4xs_dot512(acc[r], A, neg, y[r]->qs + 64 * j, sc); \
        } \
        __m256i sum[4]; \
        for (int r = 0; r < 4; r++) \
            sum[r] = fold512(acc[r]); \
        acc4_scaled(vacc, sum, h2f(x[i].d), y); \
    } \
    for (int r = 0; r < 4; r++) \
        out[r] = hsum8(vacc[r]); \
}

IQ4XS_VDOT512(TGT512V, pt_vdot_iq4_xs_avx512vbmi, iq4xs_pair_vbmi)
IQ4XS_VDOT512(TGT512, pt_vdot_iq4_xs_avx512bw, iq4xs_pair_bw)
IQ4XS_VDOT4_512(static TGT512V, iq4xs_vdot4_vbmi, iq4xs_pair_vbmi)
IQ4XS_VDOT4_512(static TGT512, iq4xs_vdot4_bw, iq4xs_pair_bw)

// IQ4_XS rows on ymm (AVX-512VL + VNNI + GFNI), for Intel, where 512-bit
// uops close port 1's vector ALU and this port-bound loop does better on
// three ports of ymm (as the K-quant rows, qt_k_x86.c). Per 32-block: the
// 16 nibble bytes broadcast to both 128-bit lanes, one gf2p8affineqb takes
// the low nibbles in the low lane and the high ones in the high lane
// (values 0..15, 16..31: the activations' order), one vpshufb gives the
// level magnitudes, the negative levels (index < 8: bit 3, resp. 7, of the
// byte clear) negate the quants under a mask, maddubs + vpdpwssd with the
// block scale: the AVX2 kernel's exact lane sums and f32 steps.
#define TGTYG __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni")))
static inline uint64_t iq_gf_sel(int s, int w) // gf2p8affineqb matrix: bits s .. s + w - 1 -> 0 .. w - 1
{
    uint64_t a = 0;
    for (int i = 0; i < w; i++)
        a |= (uint64_t)(1u << (s + i)) << (8 * (7 - i));
    return a;
}
TGTYG float pt_vdot_iq4_xs_avx512ymm(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = w;
    const block_q8_K *y = xq;
    const __m256i tabs = _mm256_broadcastsi128_si256(_mm_abs_epi8(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl)));
    const long long lo = (long long)iq_gf_sel(0, 4), hi = (long long)iq_gf_sel(4, 4);
    const __m256i sel = _mm256_setr_epi64x(lo, lo, hi, hi);
    const __m256i sgn = _mm256_setr_epi64x(0x0808080808080808ll, 0x0808080808080808ll, (long long)0x8080808080808080ull,
                                           (long long)0x8080808080808080ull);
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (IQ_PREFETCH)
            iq_prefetch(&x[i], sizeof x[i]);
        const __m256i ls = _mm256_broadcastsi128_si256(iq4xs_scales(&x[i]));
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[i].qs + 16 * j)));
            const __m256i A = _mm256_shuffle_epi8(tabs, _mm256_gf2p8affine_epi64_epi8(q, sel, 0));
            const __mmask32 neg = _mm256_testn_epi8_mask(q, sgn);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * j));
            const __m256i xs = _mm256_mask_sub_epi8(q8, neg, _mm256_setzero_si256(), q8);
            const __m256i sc = _mm256_shuffle_epi8(ls, _mm256_set1_epi16((short)(0x0100 * (2 * j + 1) + 2 * j)));
            if (j & 1)
                s1 = _mm256_dpwssd_epi32(s1, _mm256_maddubs_epi16(A, xs), sc);
            else
                s0 = _mm256_dpwssd_epi32(s0, _mm256_maddubs_epi16(A, xs), sc);
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), vacc);
    }
    return hsum8(vacc);
}

// IQ4_XS rows for AMD Zen 4 (AVX-512VL + VNNI + VBMI): the ymm rows'
// layout, rebalanced for Zen 4's vector pipes (measured there with
// independent instruction streams: maddubs, dpwssd, dpbusd, vptestnmb,
// gf2p8affineqb and vpmultishiftqb share two pipes; vpshufb, vpermb,
// vpermd and merging broadcasts another two, overlapping by one; vector
// shifts a third pair; adds, logic and masked subtracts any of the four).
// Per 32-block: the 16 nibble bytes broadcast to both 128-bit lanes (a
// load), one vpsrlvq by 0 / 4 (a shift, where gf2p8affineqb took a slot
// of the multiply pipes) leaves each byte's level index in bits 0..3 of
// the low lane (values 0..15) and the high lane (16..31), and vpermb of a
// 32-entry table (the 16 magnitudes twice: bit 4, the neighbouring
// nibble's, is ignored) gives the magnitudes without a vpand; the
// negative levels (bit 3 clear) negate the quants under a mask as before;
// the block scale comes as a dword broadcast load from the eight stored
// once per super-block (int16 in both words: vpdpwssd's operand), where a
// vpshufb took a shuffle slot per block. maddubs + dpwssd: the same exact
// int32 lanes, the same f32 steps as the AVX2 kernel, so the same bits.
// In L2, 1 thread, Zen 4 (EPYC, 3.7 GHz), the same binary interleaved:
// 8.07 -> 7.05 ns per super-block (16.9 -> 19.3 GB/s); the zmm VBMI row
// 8.63, AVX2 8.5.
#define TGTYV __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))
TGTYV float pt_vdot_iq4_xs_avx512z4(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = w;
    const block_q8_K *y = xq;
    const __m256i tabs = _mm256_broadcastsi128_si256(_mm_abs_epi8(_mm_loadu_si128((const __m128i *)pt_kvalues_iq4nl)));
    const __m256i shift = _mm256_setr_epi64x(0, 0, 4, 4), b3 = _mm256_set1_epi8(0x08);
    const __m256i dup = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                         0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    _Alignas(32) int32_t sc[8];
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (IQ_PREFETCH)
            iq_prefetch(&x[i], sizeof x[i]);
        _mm256_store_si256((__m256i *)sc, _mm256_shuffle_epi8(iq4xs_scales32(&x[i]), dup));
        __asm__("" : "+m"(sc)); // read back as broadcast loads, not register shuffles
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[i].qs + 16 * j)));
            const __m256i idx = _mm256_srlv_epi64(q, shift);
            const __m256i A = _mm256_permutexvar_epi8(idx, tabs);
            const __mmask32 neg = _mm256_testn_epi8_mask(idx, b3);
            const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * j));
            const __m256i xs = _mm256_mask_sub_epi8(q8, neg, _mm256_setzero_si256(), q8);
            const __m256i p = _mm256_maddubs_epi16(A, xs);
            if (j & 1)
                s1 = _mm256_dpwssd_epi32(s1, p, _mm256_set1_epi32(sc[j]));
            else
                s0 = _mm256_dpwssd_epi32(s0, p, _mm256_set1_epi32(sc[j]));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), vacc);
    }
    return hsum8(vacc);
}

// Which types take the Zen 4 rows above (a mask of IQZ4_*): on AMD family
// 0x19 (Zen 3 / Zen 4: of these only Zen 4 has AVX-512) with VBMI, both;
// on later AMD families, IQ2_XXS only. Written for Zen 4, the IQ2_XXS rows
// are the faster ones on Zen 5 (family 0x1A) too: on a Zen 5 EPYC
// (2026-12-07), in L2, 1 thread, bench_qt 64 rows, PETREL_IQ_Z4=0 / 1
// alternately, 3 rounds, ns per 7168-value row 218-230 / 151-163, and
// from DRAM 0.23-0.29 / 0.32-0.35 of the read (bench_kernels, 2 threads,
// 2 rounds). IQ4_XS keeps its zmm VBMI row there: 133-135 ns in L2
// against the Zen 4 row's 157, and from DRAM (1 thread, 6 rounds)
// 0.70-0.79 of the read against 0.64-0.76. Cached; PETREL_IQ_Z4=1 / 0
// forces them on / off for both types (where the CPU has VBMI).
enum { IQZ4_IQ4_XS = 1, IQZ4_IQ2_XXS = 2 };
static int g_iq_z4 = -1; // -1: not decided yet
static bool iq_prefer_z4(int type_bit)
{
    int v = __atomic_load_n(&g_iq_z4, __ATOMIC_RELAXED);
    if (v < 0) {
        const int sw = pt_env_switch("PETREL_IQ_Z4");
        const bool amd = pt_cpu_vendor_id() == PT_CPU_AMD;
        if (sw >= 0)
            v = sw ? IQZ4_IQ4_XS | IQZ4_IQ2_XXS : 0;
        else if (amd && pt_cpu_family() == 0x19)
            v = IQZ4_IQ4_XS | IQZ4_IQ2_XXS;
        else if (amd && pt_cpu_family() > 0x19)
            v = IQZ4_IQ2_XXS;
        else
            v = 0;
        if (!__builtin_cpu_supports("avx512vbmi"))
            v = 0;
        __atomic_store_n(&g_iq_z4, v, __ATOMIC_RELAXED);
    }
    return (v & type_bit) != 0;
}

// The AVX-512 IQ4_XS entries: on Zen 4 the rows for it above; on Intel
// with GFNI the ymm rows (pt_kq_prefer_zmm, qt_k_x86.c: the same choice as
// the K-quant rows), else
// the VBMI zmm form where the CPU has VBMI (Intel since Ice Lake, AMD since
// Zen 4), the F/BW/VL/VNNI one on the others (Cascade Lake); the same
// integer sums, so the same bits.
TGT512 float pt_vdot_iq4_xs_avx512(const void *w, const void *xq, int64_t n)
{
    if (iq_prefer_z4(IQZ4_IQ4_XS))
        return pt_vdot_iq4_xs_avx512z4(w, xq, n);
    if (!pt_kq_prefer_zmm())
        return pt_vdot_iq4_xs_avx512ymm(w, xq, n);
    return __builtin_cpu_supports("avx512vbmi") ? pt_vdot_iq4_xs_avx512vbmi(w, xq, n) : pt_vdot_iq4_xs_avx512bw(w, xq, n);
}
TGT512 void pt_vdot4_iq4_xs_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    if (__builtin_cpu_supports("avx512vbmi"))
        iq4xs_vdot4_vbmi(w, xq, ldx, n, out);
    else
        iq4xs_vdot4_bw(w, xq, ldx, n, out);
}

// ---- AVX-512: IQ2_XXS with 512-bit registers and mask negation ------------
// (pdep: every AVX-512 BW CPU has BMI2)
#define TGT512B __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,bmi2")))

// The 4 sign bytes of an IQ2_XXS / IQ3_XXS 32-block: 4 x 7 stored bits
// (bits 0..27 of aux) spread to bytes, bit 7 of each = parity of its 7
// (a SWAR fold: bit 0 of byte k ends up as the xor of its 8 bits).
static inline __attribute__((target("bmi2"), always_inline)) uint32_t ksigns4(uint32_t aux)
{
    const uint32_t s = _pdep_u32(aux, 0x7f7f7f7fu);
    uint32_t t = s ^ (s >> 4);
    t ^= t >> 2;
    t ^= t >> 1;
    return s | (t & 0x01010101u) << 7;
}

// The IQ2 types' step on two 32-blocks: sum + the int16-scaled pair sums
// of the 64 grid magnitudes g with the activation quants at q8, negated
// where `neg` has a bit (the stored signs): exact int32, ggml's lanes.
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i iq2_pair_dot512(__m512i sum, __m512i g, __mmask64 neg, const int8_t *q8, __m512i sc)
{
    const __m512i x = _mm512_loadu_si512((const void *)q8);
    const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
    return _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(g, xs), sc));
}

// Two 32-blocks per step: 8 grid entries in one register, the 64 sign bits
// as a mask that negates the activation quants, the two blocks' scales
// picked from one vector of the 8 (word 4 ib of the qword lanes). The
// AVX-512 kernel of CPUs without VBMI (pt_vdot_iq2_xxs_avx512 below picks).
TGT512B float pt_vdot_iq2_xxs_avx512bw(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xxs *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m512i raw = _mm512_loadu_si512((const void *)x[i].qs);
        const __m512i ls = _mm512_add_epi64(_mm512_slli_epi64(_mm512_srli_epi64(raw, 60), 1), _mm512_set1_epi64(1));
        __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib += 2) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const __m512i g = _mm512_set_epi64((int64_t)pt_iq2xxs_grid[q[11]], (int64_t)pt_iq2xxs_grid[q[10]],
                                               (int64_t)pt_iq2xxs_grid[q[9]], (int64_t)pt_iq2xxs_grid[q[8]],
                                               (int64_t)pt_iq2xxs_grid[q[3]], (int64_t)pt_iq2xxs_grid[q[2]],
                                               (int64_t)pt_iq2xxs_grid[q[1]], (int64_t)pt_iq2xxs_grid[q[0]]);
            const __mmask64 neg = (__mmask64)ksigns4(pt_iq_u32(q + 4)) | (__mmask64)ksigns4(pt_iq_u32(q + 12)) << 32;
            const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi16((int16_t)(4 * ib)), _mm256_set1_epi16((int16_t)(4 * ib + 4)), 1);
            sum = iq2_pair_dot512(sum, g, neg, y[i].qs + 32 * ib, _mm512_permutexvar_epi16(pick, ls));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(fold512(sum)), vacc);
    }
    return 0.125f * hsum8(vacc);
}

// ---- AVX-512 VBMI + GFNI: IQ2_XXS with the grid held in registers ---------
// What bounds the kernel above is the scalar work per 64 values (8 grid
// loads + inserts, two ksigns4); fetching the 8 entries with one vpgatherqq
// instead (the previous kernel here: 11.4 ns per super-block on Emerald
// Rapids) is slow where the microcode mitigates Gather Data Sampling (Ice
// Lake, Tiger Lake, Skylake-SP / Cascade Lake): 42-48 ns on an Ice Lake
// Xeon, 2.5x the AVX2 kernel. So the grid is looked up in registers. Every
// grid value is 8, 25 or 43: an entry is 8 two-bit codes (0 / 1 / 2), 16
// bits, and the 256 entries are 512 bytes = 8 zmm, as two byte planes
// (values 0..3 / 4..7), each two 128-entry halves. Per super-block: one
// vpermb spreads its 32 grid indices to the 64 (entry, plane) bytes, four
// vpermi2b (7-bit index: the grid index's low bits) look up both halves
// of both planes, and two blends under index bit 7 and one under the
// plane pick each byte's: the 64 code bytes, stored. Per 64 values (8
// entries, two 32-blocks): one broadcast load of their 16 code bytes
// (stored in the order that puts entry e in word e / 2 of qword e of the
// broadcast), one vpmultishiftqb cuts each value's code into the low bits
// of its byte and one gf2p8affineqb maps code c to its value (8 ^ 0x11 c0
// ^ 0x23 c1 is 8, 25, 43: the map is affine over GF(2)). Signs: one vpermd
// puts the eight aux words side by side, one vpmultishiftqb cuts their
// 4 x 7-bit sign fields into bytes and one vpermi2b looks them up in
// ggml's ksigns table (parity bit included); stored, so that each 64
// values' mask is a kmovq from memory. Products: the quants negated under
// the sign mask, one dpbusd of the magnitudes (u8) gives the exact 4-value
// sums (<= 4 x 43 x 127 = 21844: an int16 in the low word, its sign in the
// high word), one dpwssd with the block scale 2 s + 1 in the low word (0
// in the high one) adds sum x scale into dword m: ggml's lanes, folded as
// the kernel above. Measured here (Ice Lake Xeon, in L2, 1 thread, busy
// machine, same run): 12.5 ns per super-block, AVX2 18-25, gather 42-47.
#define TGT512VG __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,gfni")))
#define TGTI512VG __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,gfni"), always_inline)) inline

// code of value v (0..7) of entry e: bits 2 (v % 4) .. of byte
// xxs_codes[256 (v / 4) + e] (plane-major: vpermi2b's 7-bit index is then
// the grid index itself, bit 7 picking the half)
static _Alignas(64) uint8_t xxs_codes[512];
// vpermb / vpmultishiftqb controls of xxs_consts (spread, cut), built with
// the code table once per process rather than on every row's call
static _Alignas(64) uint8_t xxs_spread[64], xxs_cut[64];
static pthread_once_t xxs_codes_once = PTHREAD_ONCE_INIT;
static void xxs_codes_make(void)
{
    for (int e = 0; e < 256; e++)
        for (int v = 0; v < 8; v++) {
            const int g = (int)(pt_iq2xxs_grid[e] >> 8 * v & 0xff);
            const int c = g == 8 ? 0 : g == 25 ? 1 : 2;
            assert(g == 8 || g == 25 || g == 43);
            xxs_codes[256 * (v / 4) + e] |= (uint8_t)(c << 2 * (v % 4));
        }
    // code byte 2W + p (word W, plane p): word W of qword q = W / 4 holds
    // entry 8 (q / 2) + q % 2 + 2 (W % 4), which is grid index byte
    // 8 (e / 4) + e % 4 of the super-block
    for (int b = 0; b < 64; b++) {
        const int W = b / 2, q = W / 4, e = 8 * (q / 2) + q % 2 + 2 * (W % 4);
        xxs_spread[b] = (uint8_t)(8 * (e / 4) + e % 4);
        const int qe = b / 8, v = b % 8; // output qword qe = entry qe of the 8: word qe / 2, plane v / 4
        xxs_cut[b] = (uint8_t)(16 * (qe / 2) + 2 * v);
    }
}

typedef struct {
    __m512i T[8];       // the code table (xxs_codes)
    __m512i spread;     // raw byte of the entry of each code byte
    __m512i cut;        // vpmultishiftqb offsets of the 8 values of the entry in qword e
    __m512i ks0, ks1;   // ksigns table
} xxs_consts;

static TGTI512VG void xxs_consts_init(xxs_consts *c)
{
    pthread_once(&xxs_codes_once, xxs_codes_make);
    for (int k = 0; k < 8; k++)
        c->T[k] = _mm512_load_si512((const void *)(xxs_codes + 64 * k));
    c->spread = _mm512_load_si512((const void *)xxs_spread);
    c->cut = _mm512_load_si512((const void *)xxs_cut);
    c->ks0 = _mm512_loadu_si512((const void *)pt_ksigns_iq2xs);
    c->ks1 = _mm512_loadu_si512((const void *)(pt_ksigns_iq2xs + 64));
}

// The 64 code bytes of a super-block (raw = its 64 bytes qs) into r.
static TGTI512VG void xxs_codes512(__m512i raw, const xxs_consts *c, uint8_t *r)
{
    const __m512i X = _mm512_permutexvar_epi8(c->spread, raw);
    const __mmask64 k7 = _mm512_movepi8_mask(X);
    const __m512i p0 = _mm512_mask_blend_epi8(k7, _mm512_permutex2var_epi8(c->T[0], X, c->T[1]),
                                              _mm512_permutex2var_epi8(c->T[2], X, c->T[3]));
    const __m512i p1 = _mm512_mask_blend_epi8(k7, _mm512_permutex2var_epi8(c->T[4], X, c->T[5]),
                                              _mm512_permutex2var_epi8(c->T[6], X, c->T[7]));
    _mm512_store_si512((void *)r, _mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaull, p0, p1)); // odd bytes: plane 1
}

// The grid magnitudes of values 64j .. 64j + 63 from the stored codes.
static TGTI512VG __m512i xxs_grid512(const uint8_t *r, const xxs_consts *c, int j)
{
    const long long map = 0x0302000001020000ll; // row of output bit i in byte 7 - i
    const __m512i b = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(r + 16 * j)));
    return _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(c->cut, b), _mm512_set1_epi64(map), 0x08);
}

// What the stage of two super-blocks a, b leaves in memory for their
// 64-value steps: code bytes r[h] (h = 0: a, 1: b), sign masks m[4h + j]
// (values 64j .. 64j + 63 of super-block h, bit p set = value negative),
// block scales 2 s + 1 ls[8h + ib]. Read back by loads (broadcasts, kmovq
// from memory), which take no shuffle-port uop where register extracts
// would. Two super-blocks at a time fill the sign step's vectors (16 aux
// words) and the fold's (below): 12.5 against 14.2 ns per super-block here.
typedef struct {
    _Alignas(64) uint8_t r[2][64];
    _Alignas(64) uint64_t m[8];
    _Alignas(64) int32_t ls[16];
} xxs_stage;

// The stage of super-blocks with the 64 bytes qs at qa and qb (qb = qa for
// a lone last one).
static TGTI512VG void xxs_block2(const uint8_t *qa, const uint8_t *qb, const xxs_consts *c, xxs_stage *sb)
{
    const __m512i ra = _mm512_loadu_si512((const void *)qa), rb = _mm512_loadu_si512((const void *)qb);
    xxs_codes512(ra, c, sb->r[0]);
    xxs_codes512(rb, c, sb->r[1]);
    // the 16 aux words; bytes 0..3 / 4..7 of qword t <- the 7-bit fields of aux 2t / 2t + 1
    const __m512i asel = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i cut = _mm512_set1_epi64(0x352e2720150e0700ll);
    const __m512i aux = _mm512_permutex2var_epi32(ra, asel, rb);
    _mm512_store_si512((void *)sb->m, _mm512_permutex2var_epi8(c->ks0, _mm512_multishift_epi64_epi8(cut, aux), c->ks1));
    _mm512_store_si512((void *)sb->ls, _mm512_or_si512(_mm512_srli_epi32(aux, 27), _mm512_set1_epi32(1)));
    // the stores are read back as memory (see above), not forwarded by
    // the compiler from the registers
    __asm__("" : "+m"(*sb));
}

// acc + scale x exact 4-value sums of the magnitudes g with the quants at
// q8 negated under neg (dpbusd, then dpwssd: see above).
static TGTI512VG __m512i xxs_dot512(__m512i acc, __m512i g, __mmask64 neg, const int8_t *q8, __m512i sc)
{
    const __m512i x = _mm512_loadu_si512((const void *)q8);
    const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
    return _mm512_dpwssd_epi32(acc, _mm512_dpbusd_epi32(_mm512_setzero_si512(), g, xs), sc);
}

// The step inputs of values 64j .. 64j + 63 of super-block h: magnitudes,
// sign mask, scales (dwords 0..7: block 2j's, 8..15: block 2j + 1's).
static TGTI512VG __m512i xxs_step(const xxs_stage *sb, const xxs_consts *c, int h, int j, __mmask64 *neg, __m512i *sc)
{
    *neg = _load_mask64((__mmask64 *)&sb->m[4 * h + j]);
    *sc = _mm512_mask_set1_epi32(_mm512_set1_epi32(sb->ls[8 * h + 2 * j]), 0xff00, sb->ls[8 * h + 2 * j + 1]);
    return xxs_grid512(sb->r[h], c, j);
}

// Super-block h's 16 lanes (dwords 0..7 the first halves', 8..15 the
// second halves' ggml lanes) with the quants q8.
static TGTI512VG __m512i xxs_sum(const xxs_stage *sb, const xxs_consts *c, int h, const int8_t *q8)
{
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __mmask64 neg;
        __m512i sc;
        const __m512i g = xxs_step(sb, c, h, j, &neg, &sc);
        if (j & 1)
            acc1 = xxs_dot512(acc1, g, neg, q8 + 64 * j, sc);
        else
            acc0 = xxs_dot512(acc0, g, neg, q8 + 64 * j, sc);
    }
    return _mm512_add_epi32(acc0, acc1);
}

// Pairs of super-blocks: both folds in one add of two shuffles and one
// conversion, then the vdot's fmas in super-block order.
static TGT512VG float iq2_xxs_vbmi(const void *w, const void *xq, int64_t n)
{
    const pt_blk_iq2_xxs *x = w;
    const block_q8_K *y = xq;
    const int64_t nb = n / QK_K;
    xxs_consts c;
    xxs_consts_init(&c);
    xxs_stage sb;
    __m256 vacc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        if (IQ_PREFETCH) {
            iq_prefetch(&x[i], sizeof x[i]);
            iq_prefetch(&x[i + 1], sizeof x[i]);
        }
        xxs_block2(x[i].qs, x[i + 1].qs, &c, &sb);
        const __m512i A = xxs_sum(&sb, &c, 0, y[i].qs), B = xxs_sum(&sb, &c, 1, y[i + 1].qs);
        const __m512 F = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_shuffle_i64x2(A, B, 0x44), _mm512_shuffle_i64x2(A, B, 0xee)));
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm512_castps512_ps256(F), vacc);
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i + 1].d) * y[i + 1].d),
                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(F), 1)), vacc);
    }
    if (i < nb) {
        xxs_block2(x[i].qs, x[i].qs, &c, &sb);
        const __m256i sum = fold512(xxs_sum(&sb, &c, 0, y[i].qs));
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), vacc);
    }
    return 0.125f * hsum8(vacc);
}

// The Zen 4 form of the kernel above (AVX-512 BITALG too): there the
// stage's stores and the steps' loads of them cost more than register
// moves (in L2, 1 thread, the stage alone 2.4 and the steps alone 4.9 ns
// per super-block, together 11.0), so the code bytes stay in registers
// (each step's 16 by one vshufi32x4) and each step's sign mask comes from
// one vpshufbitqmb of the sign bytes transposed once per pair of
// super-blocks (qword q, byte s = byte q of step s's mask: byte i of a step
// then picks bit 8 s + i % 8 of qword i / 8); the scales as before. The
// same integer sums: the same bits. Measured there in one binary,
// interleaved: 11.0-11.2 -> 10.0-10.1 ns per super-block; with the stores
// of the codes as before 10.7, the scales by vpermd 13.0, the code map by
// vpermb instead of gf2p8affineqb the same, the next pair's stage computed
// a pair ahead 11.7.
#define TGT512VGB __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,gfni,avx512bitalg")))
#define TGTI512VGB __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,gfni,avx512bitalg"), always_inline)) inline

static TGTI512VGB __m512i xxs_codes512_reg(__m512i raw, const xxs_consts *c)
{
    const __m512i X = _mm512_permutexvar_epi8(c->spread, raw);
    const __mmask64 k7 = _mm512_movepi8_mask(X);
    const __m512i p0 = _mm512_mask_blend_epi8(k7, _mm512_permutex2var_epi8(c->T[0], X, c->T[1]),
                                              _mm512_permutex2var_epi8(c->T[2], X, c->T[3]));
    const __m512i p1 = _mm512_mask_blend_epi8(k7, _mm512_permutex2var_epi8(c->T[4], X, c->T[5]),
                                              _mm512_permutex2var_epi8(c->T[6], X, c->T[7]));
    return _mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaull, p0, p1);
}

// 128-bit lane j of R in all four lanes; the shuffle's control must be an
// integer constant expression for clang, hence one case per lane (j is a
// constant after unrolling, so GCC and clang keep one vshufi32x4).
static TGTI512VGB __m512i xxs_lane128(__m512i R, int j)
{
    switch (j) {
    case 0: return _mm512_shuffle_i32x4(R, R, 0x00);
    case 1: return _mm512_shuffle_i32x4(R, R, 0x55);
    case 2: return _mm512_shuffle_i32x4(R, R, 0xaa);
    default: return _mm512_shuffle_i32x4(R, R, 0xff);
    }
}

// Super-block h's 16 lanes (as xxs_sum) from its code bytes R, the
// transposed sign bytes N (steps 4 h .. 4 h + 3) and the stored scales.
static TGTI512VGB __m512i xxs_sum_reg(__m512i R, __m512i N, const int32_t *ls, const xxs_consts *c, int h, const int8_t *q8)
{
    const long long map = 0x0302000001020000ll;
    const __m512i bi = _mm512_set1_epi64(0x0706050403020100ll);
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __mmask64 neg = _mm512_bitshuffle_epi64_mask(N, _mm512_add_epi8(bi, _mm512_set1_epi8((char)(8 * (4 * h + j)))));
        const __m512i sc = _mm512_mask_set1_epi32(_mm512_set1_epi32(ls[8 * h + 2 * j]), 0xff00, ls[8 * h + 2 * j + 1]);
        const __m512i g = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(c->cut, xxs_lane128(R, j)),
                                                        _mm512_set1_epi64(map), 0x08);
        if (j & 1)
            acc1 = xxs_dot512(acc1, g, neg, q8 + 64 * j, sc);
        else
            acc0 = xxs_dot512(acc0, g, neg, q8 + 64 * j, sc);
    }
    return _mm512_add_epi32(acc0, acc1);
}

static TGT512VGB float iq2_xxs_z4(const void *w, const void *xq, int64_t n)
{
    const pt_blk_iq2_xxs *x = w;
    const block_q8_K *y = xq;
    const int64_t nb = n / QK_K;
    xxs_consts c;
    xxs_consts_init(&c);
    const __m512i asel = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i cut = _mm512_set1_epi64(0x352e2720150e0700ll);
    const __m512i tr = _mm512_setr_epi64(0x3830282018100800ll, 0x3931292119110901ll, 0x3a322a221a120a02ll, 0x3b332b231b130b03ll,
                                         0x3c342c241c140c04ll, 0x3d352d251d150d05ll, 0x3e362e261e160e06ll, 0x3f372f271f170f07ll);
    _Alignas(64) int32_t ls[16];
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const bool two = i + 1 < nb; // a lone last super-block is paired with itself, its copy unused
        if (IQ_PREFETCH) {
            iq_prefetch(&x[i], sizeof x[i]);
            iq_prefetch(&x[i + two], sizeof x[i]);
        }
        const __m512i ra = _mm512_loadu_si512((const void *)x[i].qs), rb = _mm512_loadu_si512((const void *)x[i + two].qs);
        const __m512i aux = _mm512_permutex2var_epi32(ra, asel, rb);
        const __m512i N = _mm512_permutexvar_epi8(tr, _mm512_permutex2var_epi8(c.ks0, _mm512_multishift_epi64_epi8(cut, aux), c.ks1));
        _mm512_store_si512((void *)ls, _mm512_or_si512(_mm512_srli_epi32(aux, 27), _mm512_set1_epi32(1)));
        __asm__("" : "+m"(ls)); // read back as broadcast loads (see xxs_stage)
        const __m512i A = xxs_sum_reg(xxs_codes512_reg(ra, &c), N, ls, &c, 0, y[i].qs);
        if (!two) {
            vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(fold512(A)), vacc);
            break;
        }
        const __m512i B = xxs_sum_reg(xxs_codes512_reg(rb, &c), N, ls, &c, 1, y[i + 1].qs);
        const __m512 F = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_shuffle_i64x2(A, B, 0x44), _mm512_shuffle_i64x2(A, B, 0xee)));
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm512_castps512_ps256(F), vacc);
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i + 1].d) * y[i + 1].d),
                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(F), 1)), vacc);
    }
    return 0.125f * hsum8(vacc);
}
float pt_vdot_iq2_xxs_avx512z4(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    return iq2_xxs_z4(w, xq, n);
}

// One IQ2_XXS row times 4 activation rows with the register grid: codes,
// sign masks and scales made once for the four; each output takes
// iq2_xxs_vbmi's integer sums and float operations, so equals it bit for bit.
static TGT512VG void iq2_xxs_vdot4_vbmi(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    const pt_blk_iq2_xxs *x = w;
    const int64_t nb = n / QK_K;
    xxs_consts c;
    xxs_consts_init(&c);
    xxs_stage sb;
    __m256 vacc[4];
    for (int k = 0; k < 4; k++)
        vacc[k] = _mm256_setzero_ps();
    for (int64_t i0 = 0; i0 < nb; i0 += 2) {
        const int nh = i0 + 1 < nb ? 2 : 1;
        xxs_block2(x[i0].qs, x[i0 + nh - 1].qs, &c, &sb);
        for (int h = 0; h < nh; h++) {
            const int64_t i = i0 + h;
            const block_q8_K *y[4];
            q8k_rows4(xq, ldx, i, y);
            __m512i acc[4];
            for (int k = 0; k < 4; k++)
                acc[k] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __mmask64 neg;
                __m512i sc;
                const __m512i g = xxs_step(&sb, &c, h, j, &neg, &sc);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    acc[k] = xxs_dot512(acc[k], g, neg, y[k]->qs + 64 * j, sc);
            }
            __m256i sum[4];
            for (int k = 0; k < 4; k++)
                sum[k] = fold512(acc[k]);
            acc4_scaled(vacc, sum, h2f(x[i].d), y);
        }
    }
    for (int k = 0; k < 4; k++)
        out[k] = 0.125f * hsum8(vacc[k]);
}

// The AVX-512 IQ2_XXS entry: the register-grid kernel where the CPU has
// VBMI and GFNI (Intel since Ice Lake, AMD since Zen 4; on Zen 4 / Zen 5
// its register-stage form), the F/BW/VL/VNNI
// one above on the others (Cascade Lake); both equal the scalar vdot bit
// for bit.
TGT512B float pt_vdot_iq2_xxs_avx512(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    if (__builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("gfni")) {
        if (iq_prefer_z4(IQZ4_IQ2_XXS) && __builtin_cpu_supports("avx512bitalg"))
            return iq2_xxs_z4(w, xq, n);
        return iq2_xxs_vbmi(w, xq, n);
    }
    return pt_vdot_iq2_xxs_avx512bw(w, xq, n);
}

// Without VBMI + GFNI the AVX2 vdot4 (the same bits).
TGT512B void pt_vdot4_iq2_xxs_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    assert(n % QK_K == 0);
    if (__builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("gfni"))
        iq2_xxs_vdot4_vbmi(w, xq, ldx, n, out);
    else
        pt_vdot4_iq2_xxs_avx2(w, xq, ldx, n, out);
}

// The 16 half scales 2 s + 1 of an IQ2_XS / IQ2_S super-block as words
// 0..15 of a 512-bit register, and the pick of blocks ib, ib + 1 from it
// (words 0..7 <- half 2 ib, 8..15 <- 2 ib + 1, 16..31 <- the next block's).
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i iq2_half_scales512(const uint8_t *scales)
{
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i sc = _mm_loadl_epi64((const __m128i *)scales);
    const __m128i h = _mm_unpacklo_epi8(_mm_and_si128(sc, m4), _mm_and_si128(_mm_srli_epi16(sc, 4), m4));
    return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_add_epi8(_mm_add_epi8(h, h), _mm_set1_epi8(1))));
}
static inline __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
__m512i iq2_pair_scales512(__m512i hs, int ib)
{
    const __m256i lo = _mm256_set_m128i(_mm_set1_epi16((int16_t)(2 * ib + 1)), _mm_set1_epi16((int16_t)(2 * ib)));
    const __m256i hi = _mm256_set_m128i(_mm_set1_epi16((int16_t)(2 * ib + 3)), _mm_set1_epi16((int16_t)(2 * ib + 2)));
    return _mm512_permutexvar_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), hs);
}

// IQ2_XS: as IQ2_XXS, the 7-bit sign fields of a block's four u16 words
// gathered with pext.
TGT512B float pt_vdot_iq2_xs_avx512(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xs *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m512i hs = iq2_half_scales512(x[i].scales);
        __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib += 2) {
            uint64_t v0, v1;
            memcpy(&v0, x[i].qs + 8 * ib, 8);
            memcpy(&v1, x[i].qs + 8 * ib + 8, 8);
            const __m512i g = _mm512_set_epi64(
                (int64_t)pt_iq2xs_grid[(v1 >> 48) & 511], (int64_t)pt_iq2xs_grid[(v1 >> 32) & 511],
                (int64_t)pt_iq2xs_grid[(v1 >> 16) & 511], (int64_t)pt_iq2xs_grid[v1 & 511],
                (int64_t)pt_iq2xs_grid[(v0 >> 48) & 511], (int64_t)pt_iq2xs_grid[(v0 >> 32) & 511],
                (int64_t)pt_iq2xs_grid[(v0 >> 16) & 511], (int64_t)pt_iq2xs_grid[v0 & 511]);
            const uint64_t fm = 0xfe00fe00fe00fe00ull;
            const __mmask64 neg = (__mmask64)ksigns4((uint32_t)_pext_u64(v0, fm)) |
                                  (__mmask64)ksigns4((uint32_t)_pext_u64(v1, fm)) << 32;
            sum = iq2_pair_dot512(sum, g, neg, y[i].qs + 32 * ib, iq2_pair_scales512(hs, ib));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(fold512(sum)), vacc);
    }
    return 0.125f * hsum8(vacc);
}

// IQ2_S: its sign bytes are the negation mask as they are stored.
TGT512B float pt_vdot_iq2_s_avx512(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_s *x = w;
    const block_q8_K *y = xq;
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m512i hs = iq2_half_scales512(x[i].scales);
        __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib += 2) {
            const uint8_t *qs = x[i].qs + 4 * ib;
            const int h0 = x[i].qh[ib], h1 = x[i].qh[ib + 1];
            const __m512i g = _mm512_set_epi64(
                (int64_t)pt_iq2s_grid[qs[7] | ((h1 << 2) & 0x300)], (int64_t)pt_iq2s_grid[qs[6] | ((h1 << 4) & 0x300)],
                (int64_t)pt_iq2s_grid[qs[5] | ((h1 << 6) & 0x300)], (int64_t)pt_iq2s_grid[qs[4] | ((h1 << 8) & 0x300)],
                (int64_t)pt_iq2s_grid[qs[3] | ((h0 << 2) & 0x300)], (int64_t)pt_iq2s_grid[qs[2] | ((h0 << 4) & 0x300)],
                (int64_t)pt_iq2s_grid[qs[1] | ((h0 << 6) & 0x300)], (int64_t)pt_iq2s_grid[qs[0] | ((h0 << 8) & 0x300)]);
            uint64_t m;
            memcpy(&m, x[i].signs + 4 * ib, 8);
            sum = iq2_pair_dot512(sum, g, (__mmask64)m, y[i].qs + 32 * ib, iq2_pair_scales512(hs, ib));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(fold512(sum)), vacc);
    }
    return 0.125f * hsum8(vacc);
}

#endif

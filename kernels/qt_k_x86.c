// kernels/qt_k_x86.c — AVX2 and AVX-512 dot products of the K-quants with
// Q8_K activations, bit-identical to the scalar functions of qt_k.c and so
// to llama.cpp's x86 kernels. Compiled per function with target attributes
// (no -march flag); chosen at run time through the type-traits table.
//
// Per super-block the eight lane sums of qt_k.c's contract are computed
// exactly with vector instructions, in ggml's lane layout (lane l of a
// 32-value register sums its bytes 4l .. 4l + 3), then meet the scales in
// ggml's own f32 instructions. The tricks (after ggml's x86 kernels):
// maddubs multiplies the unsigned weight quants with the signed activation
// quants into int16 pairs (never saturating: at most 2 * 63 * 128), madd
// (or AVX-512 VNNI's vpdpwssd) with the block scale as int16 widens to
// int32. A 512-bit register holds two of ggml's 32-value registers, one per
// 256-bit half; adding the halves gives ggml's lanes.
#include "kernels/cpu.h"
#include "kernels/qt_k.h"
#include "kernels/qt_blocks.h"

#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <math.h>
#include <unistd.h>
#include <string.h>

#define TGT2 __attribute__((target("avx2,fma,f16c")))
#define TGT2I __attribute__((target("avx2,fma,f16c"), always_inline)) static inline
#define TGT5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define TGT5I __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline)) static inline

// ---- shared helpers ------------------------------------------------------

static inline uint32_t ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

// Q3_K: the 16 6-bit scales (before the -32) as 16 bytes, the word form of
// pt_q3k_scales.
static inline void q3k_unpack(const uint8_t s[12], uint32_t u[4])
{
    const uint32_t a0 = ld32(s), a1 = ld32(s + 4), a2 = ld32(s + 8);
    u[0] = (a0 & 0x0f0f0f0fu) | ((a2 & 0x03030303u) << 4);
    u[1] = (a1 & 0x0f0f0f0fu) | (((a2 >> 2) & 0x03030303u) << 4);
    u[2] = ((a0 >> 4) & 0x0f0f0f0fu) | (((a2 >> 4) & 0x03030303u) << 4);
    u[3] = ((a1 >> 4) & 0x0f0f0f0fu) | (((a2 >> 6) & 0x03030303u) << 4);
}

// fp16 -> f32 with F16C: exact, the same value as pt_fp16_to_f32.
TGT2I float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

// ---- AVX2 --------------------------------------------------------------

// Q4_K / Q5_K scales and mins as 16 int16 (sc0..7, m0..7), the vector form
// of pt_k4_scale_min: bytes 0-3 and 4-7 give scales / mins 0-3 (low 6 bits);
// 4-7 take a nibble of bytes 8-11 plus bits 6-7 of bytes 0-3 / 4-7. Reads
// 16 bytes from `s` (the 12 scale bytes and 4 quant bytes, ignored).
TGT2I __m256i k4_scales16(const uint8_t *s)
{
    const __m128i z = _mm_loadu_si128((const __m128i *)s);
    const char Z = (char)0x80;
    const __m128i p = _mm_shuffle_epi8(z, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, Z, Z, Z, Z));
    const __m128i q = _mm_shuffle_epi8(_mm_srli_epi16(z, 4),
                                       _mm_setr_epi8(Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, 8, 9, 10, 11));
    const __m128i h = _mm_shuffle_epi8(_mm_srli_epi16(z, 2),
                                       _mm_setr_epi8(Z, Z, Z, Z, 0, 1, 2, 3, Z, Z, Z, Z, 4, 5, 6, 7));
    const __m128i mask = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15);
    const __m128i r = _mm_or_si128(_mm_and_si128(_mm_or_si128(p, q), mask),
                                   _mm_and_si128(h, _mm_set1_epi8(0x30)));
    return _mm256_cvtepu8_epi16(r);
}

// int16 vector holding scale k in every lane, from v = 16 int16 scales
// duplicated in both 128-bit lanes (k < 8).
TGT2I __m256i bcast_sc(__m256i v, int k)
{
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)((2 * k + 1) << 8 | 2 * k)));
}

// For the 16-value-block types: int16 scales with the even-numbered blocks
// in the low 128-bit lane and the odd ones in the high lane, so that one
// shuffle gives (scale 2m in the low lane, scale 2m + 1 in the high lane),
// matching a 32-quant register of blocks 2m, 2m + 1.
TGT2I __m256i evenodd16(__m128i s8, bool is_signed)
{
    const __m128i eo = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m128i p = _mm_shuffle_epi8(s8, eo);
    return is_signed ? _mm256_cvtepi8_epi16(p) : _mm256_cvtepu8_epi16(p);
}

// Bit k of every byte of v moved to bit `to` (others cleared): one 16-bit
// shift and a mask; bits crossing a byte boundary are masked off.
TGT2I __m256i bit_to(__m256i v, int k, int to)
{
    const __m256i m = _mm256_set1_epi8((char)(1 << to));
    if (k < to)
        return _mm256_and_si256(_mm256_slli_epi16(v, to - k), m);
    if (k > to)
        return _mm256_and_si256(_mm256_srli_epi16(v, k - to), m);
    return _mm256_and_si256(v, m);
}

TGT2I __m256i dot_sc_avx2(__m256i q, const int8_t *x, __m256i sc)
{
    return _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)x)));
}

// One super-block's exact integer sums: `is` the eight lane sums sumi_l of
// qt_k.c's contract, `ms` the min products (Q2_K: 8 lanes; Q4_K / Q5_K: 4
// lanes in the low half; unused otherwise).
typedef struct {
    __m256i is; // (8,) int32 lane sums
    __m256i ms; // (8,) or (4,) int32 min products
} sb_sums;

// ggml's hsum_float_8: ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7))
TGT2I float hsum8_ps(__m256 a)
{
    __m128 t = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

// A K row's result from its accumulators: ggml's hsum_float_8 of acc,
// plus (Q4_K's 4-lane min accumulator, with_am) am's sum in ggml's order
// ((m0+m2)+(m1+m3)).
TGT2I float k_row_sum(__m256 acc, __m128 am, bool with_am)
{
    float r = hsum8_ps(acc);
    if (with_am) {
        const __m128 t = _mm_add_ps(am, _mm_movehl_ps(am, am));
        r += _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
    }
    return r;
}

TGT2I int32_t hsum4_i32(__m128i a)
{
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0x4E));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0xB1));
    return _mm_cvtsi128_si32(a);
}

// Software prefetch distance of the K-type row loops, in bytes ahead of the
// weights being read (0: none). A GEMV reads each row once, one row after
// the other, and the core's own loads keep too few cache lines in flight
// for DRAM (its reorder window covers only a few hundred bytes of a
// compute-heavy loop), so the lines are asked for ahead: measured +20-40 %
// GB/s from DRAM on Zen 3 (docs/kernels.md). How far depends on the core,
// measured per machine, 1 thread streaming from DRAM (docs/kernels.md):
// - Ice Lake Xeon (1.25 MiB L2): 4096 over 2048, Q2_K 7.9 -> 8.3, Q4_K
//   9.7 -> 10.3, Q6_K 10.3 -> 10.9 GB per CPU second; Zen 4 (1 MiB L2):
//   2048 and 8192 slower than 4096 or within noise;
// - Intel Xeon with AVX-512 FP16 / AMX and 2 MiB of L2 per core: 2048 over
//   4096, ratio to the read (cpu1) Q4_K 0.57 -> 0.77-0.80, Q6_K 0.58-0.59
//   -> 0.72-0.80, Q2_K 0.64-0.68 -> 0.71 (4096 there is worse than none
//   for Q4_K / Q6_K).
// So: 2048 where the L2 holds >= 2 MiB per core, 4096 elsewhere; the
// environment variable PETREL_K_PREFETCH=N sets N bytes (0: none). Hint
// T0 (K_PREFETCH_LOC 3): T1, T2 and NTA measured 2-10 % slower on Ice
// Lake, and T1 at 4096 below T0 at 2048 on the 2 MiB machine.
static size_t g_k_prefetch = 4096;
#define K_PREFETCH g_k_prefetch
#ifndef K_PREFETCH_LOC
#define K_PREFETCH_LOC 3
#endif

__attribute__((constructor)) static void k_prefetch_init(void)
{
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    g_k_prefetch = (size_t)pt_env_prefetch("PETREL_K_PREFETCH", l2 >= 2L * 1024 * 1024 ? 2048 : 4096);
}

// Software prefetch of the `bytes` of weights at p (one hint per 64-byte line).
static inline void k_prefetch(const char *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        __builtin_prefetch(p + o, 0, K_PREFETCH_LOC);
}

// The row loop of every K-type kernel: SUMS(block, activation block) ->
// sb_sums per super-block, then the f32 steps of qt_k.c's contract with
// ggml's own vector instructions. KIND: 0 no min (Q3_K, Q6_K), 1 Q2_K
// (8-lane min products into the same accumulators, first), 2 Q4_K (4 min
// accumulators), 3 Q5_K (a scalar min sum); DMIN the min scale field.
// MEMB 1: d / dmin reach the FMAs through memory, as broadcast operands
// (see K_ROW_LOOP_DM; AVX2 and ymm rows); 0: broadcast from registers, what
// the zmm rows keep: with MEMB 1 the zmm Q6_K row was 4-5 % slower (Ice
// Lake, PETREL_KQ_ZMM=1, in L2, A/B in one binary: 195.6 -> 204-208 ns).
#define K_ROW_LOOP(BLK, SUMS, KIND, DMIN) K_ROW_LOOP_M(BLK, SUMS, KIND, DMIN, 1)
#define K_ROW_LOOP_M(BLK, SUMS, KIND, DMIN, MEMB)                                                  \
    assert(n % QK_K == 0);                                                                          \
    const BLK *b = w;                                                                               \
    const block_q8_K *x = xq;                                                                       \
    __m256 acc = _mm256_setzero_ps();                                                               \
    __m128 am = _mm_setzero_ps();                                                                   \
    float summs = 0.0f;                                                                             \
    _Alignas(8) float dd_[2];                                                                       \
    for (int64_t i = 0; i < n / QK_K; i++) {                                                        \
        if (K_PREFETCH)                                                                             \
            k_prefetch((const char *)&b[i] + K_PREFETCH, sizeof(BLK));                             \
        const sb_sums sm_ = SUMS(&b[i], &x[i]);                                                     \
        const float d = x[i].d * h2f(b[i].d), dmin = -x[i].d * h2f(b[i].DMIN);                      \
        /* d, dmin through memory: the FMAs take broadcast operands (see K_ROW_LOOP_DM) */          \
        if (MEMB) {                                                                                 \
            dd_[0] = d;                                                                             \
            if (KIND == 1 || KIND == 2) /* else dmin would be computed for nothing */               \
                dd_[1] = dmin;                                                                      \
            __asm__ volatile("" : : "r"(dd_) : "memory");                                           \
        }                                                                                           \
        if (KIND == 1)                                                                              \
            acc = _mm256_fmadd_ps(_mm256_set1_ps(MEMB ? dd_[1] : dmin), _mm256_cvtepi32_ps(sm_.ms), acc); \
        if (KIND == 2)                                                                              \
            am = _mm_fmadd_ps(_mm_set1_ps(MEMB ? dd_[1] : dmin), _mm_cvtepi32_ps(_mm256_castsi256_si128(sm_.ms)), am); \
        if (KIND == 3)                                                                              \
            summs = fmaf(dmin, (float)hsum4_i32(_mm256_castsi256_si128(sm_.ms)), summs);            \
        acc = _mm256_fmadd_ps(_mm256_set1_ps(MEMB ? dd_[0] : d), _mm256_cvtepi32_ps(sm_.is), acc);  \
    }                                                                                               \
    float r_ = k_row_sum(acc, am, KIND == 2);                                                       \
    if (KIND == 3)                                                                                  \
        r_ += summs;                                                                                \
    return r_;

// The row loop of Q4_K (KIND 2) and Q2_K (KIND 1), whose d and dmin are
// adjacent fp16: K_ROW_LOOP's f32 steps with both converted by one
// vcvtph2ps and multiplied by x.d in one vmulps (lane 0: ggml's d = x.d *
// d_w; lane 1: x.d * dmin_w, ggml's dmin negated, so the min term is an
// fnmadd: c - a * b rounded once is c + (-a) * b, the same bits), and the
// prefetch test out of the loop (one loop with the prefetch, one without).
// MEMB 1 (the ymm rows): the two products go through memory (dd_), so
// that the FMAs take them as broadcast operands ({1to8}: a load) instead
// of two shuffle uops on the vector ports these loops are bound by; the
// store is off the accumulator chain. Measured with the Q2_K change below
// (Ice Lake, 1 thread, in L2, A/B in one binary, 3 runs): Q2_K 149 -> 141
// ns per 7168-row. MEMB 0 (the zmm rows): broadcast from the register;
// there this loop replaced K_ROW_LOOP_M's separate conversions, scalar
// products and sign flip (11 instructions per super-block became 7): in
// L2, 1 thread, bench_qt 64 rows, before / after interleaved, 4 rounds
// (2026-12-07, Zen 5), ns per 7168-value row: Q2_K 91-109 / 79-86, Q4_K
// 112-134 / 101-112.
#define K_DM_STEP(SUMS, KIND, MEMB)                                                                 \
    {                                                                                               \
        const sb_sums sm_ = SUMS(&b[i], &x[i]);                                                     \
        const __m128 dw_ = _mm_cvtph_ps(_mm_cvtsi32_si128((int)ld32((const uint8_t *)&b[i].d)));     \
        const __m128 p_ = _mm_mul_ps(_mm_set1_ps(x[i].d), dw_);                                     \
        if (MEMB) {                                                                                 \
            _mm_store_ps(dd_, p_);                                                                  \
            /* dd_ escapes: each dd_[k] below is read back from memory */                           \
            __asm__ volatile("" : : "r"(dd_) : "memory");                                           \
        }                                                                                           \
        if (KIND == 1)                                                                              \
            acc = _mm256_fnmadd_ps(MEMB ? _mm256_set1_ps(dd_[1]) : _mm256_broadcastss_ps(_mm_movehdup_ps(p_)), \
                                   _mm256_cvtepi32_ps(sm_.ms), acc);                                \
        if (KIND == 2)                                                                              \
            am = _mm_fnmadd_ps(MEMB ? _mm_set1_ps(dd_[1]) : _mm_shuffle_ps(p_, p_, 0x55),           \
                               _mm_cvtepi32_ps(_mm256_castsi256_si128(sm_.ms)), am);                \
        acc = _mm256_fmadd_ps(MEMB ? _mm256_set1_ps(dd_[0]) : _mm256_broadcastss_ps(p_),            \
                              _mm256_cvtepi32_ps(sm_.is), acc);                                     \
    }
#define K_ROW_LOOP_DM(BLK, SUMS, KIND, MEMB)                                                        \
    assert(n % QK_K == 0);                                                                          \
    _Static_assert(offsetof(BLK, dmin) == offsetof(BLK, d) + 2, "d, dmin adjacent");                \
    _Static_assert(KIND == 1 || KIND == 2, "the types with a min");                                 \
    const BLK *b = w;                                                                               \
    const block_q8_K *x = xq;                                                                       \
    __m256 acc = _mm256_setzero_ps();                                                               \
    __m128 am = _mm_setzero_ps();                                                                   \
    _Alignas(16) float dd_[4];                                                                      \
    const size_t pf_ = K_PREFETCH;                                                                  \
    const int64_t nsb_ = n / QK_K;                                                                  \
    int64_t i = 0;                                                                                  \
    if (pf_)                                                                                        \
        for (; i < nsb_; i++) {                                                                     \
            k_prefetch((const char *)&b[i] + pf_, sizeof(BLK));                                     \
            K_DM_STEP(SUMS, KIND, MEMB)                                                             \
        }                                                                                           \
    for (; i < nsb_; i++)                                                                           \
        K_DM_STEP(SUMS, KIND, MEMB)                                                                 \
    return k_row_sum(acc, am, KIND == 2);

// Q4_K (contract in qt_k.c). Per 64-value chunk c: the low nibbles are
// block 2c, the high ones block 2c + 1.
TGT2I sb_sums sums_q4_k_avx2(const pt_blk_q4_k *b, const block_q8_K *x)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i sm = k4_scales16(b->scales);
    const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    const __m128i bs2 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bs2);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        const __m256i ql = _mm256_and_si256(qb, m4);
        const __m256i qh = _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4);
        s0 = _mm256_add_epi32(s0, dot_sc_avx2(ql, x->qs + 64 * c, bcast_sc(sc, 2 * c)));
        s1 = _mm256_add_epi32(s1, dot_sc_avx2(qh, x->qs + 64 * c + 32, bcast_sc(sc, 2 * c + 1)));
    }
    return (sb_sums){_mm256_add_epi32(s0, s1), _mm256_castsi128_si256(mprod)};
}

TGT2 float pt_vdot_q4_k_avx2(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q4_k, sums_q4_k_avx2, 2, dmin)
}

// Q5_K: Q4_K with the fifth bit k of qh[l] added as 16 to value 32k + l.
TGT2I sb_sums sums_q5_k_avx2(const pt_blk_q5_k *b, const block_q8_K *x)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i sm = k4_scales16(b->scales);
    const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    const __m128i bs2 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bs2);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)b->qh);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        // bit 2c (2c + 1) of each byte moved to bit 4
        const __m256i h0 = bit_to(hb, 2 * c, 4), h1 = bit_to(hb, 2 * c + 1, 4);
        const __m256i ql = _mm256_or_si256(_mm256_and_si256(qb, m4), h0);
        const __m256i qh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), h1);
        s0 = _mm256_add_epi32(s0, dot_sc_avx2(ql, x->qs + 64 * c, bcast_sc(sc, 2 * c)));
        s1 = _mm256_add_epi32(s1, dot_sc_avx2(qh, x->qs + 64 * c + 32, bcast_sc(sc, 2 * c + 1)));
    }
    return (sb_sums){_mm256_add_epi32(s0, s1), _mm256_castsi128_si256(mprod)};
}

TGT2 float pt_vdot_q5_k_avx2(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q5_k, sums_q5_k_avx2, 3, dmin)
}

// Q2_K. Half h (128 values) is qs[32h ..]: shift 2s gives values
// 128h + 32s + l, i.e. blocks 8h + 2s (l < 16) and 8h + 2s + 1.
// Q2_K min products mp_l (8 lanes, ggml's madd of mins and bsums) and the
// 4-bit scales.
TGT2I __m256i q2k_mins(const pt_blk_q2_k *b, const block_q8_K *x, __m128i *sc8)
{
    const __m128i sm = _mm_loadu_si128((const __m128i *)b->scales);
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
    *sc8 = _mm_and_si128(sm, m4);
    return _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)x->bsums));
}

// Register scales of the 16-value-block Q2_K straight from its 4-bit scale
// bytes: broadcast to both 128-bit lanes and masked (v8), one vpshufb per
// 32-quant register picks byte 2j (low lane) / 2j + 1 (high lane) with a
// zero byte above it: the int16 scales of blocks 2j, 2j + 1, zero-extended,
// as bcast_sc of evenodd16's vector gives them, without evenodd16's
// vpshufb and vpmovzxbw.
// W16(a): a vpshufb control word taking byte a, zero-extended to int16
#define W16(a) a, (char)0x80
#define Q2L8(a) W16(a), W16(a), W16(a), W16(a), W16(a), W16(a), W16(a), W16(a)
static const char q2k_bc_tab[8][32] __attribute__((aligned(32))) = {
    {Q2L8(0), Q2L8(1)},   {Q2L8(2), Q2L8(3)},   {Q2L8(4), Q2L8(5)},   {Q2L8(6), Q2L8(7)},
    {Q2L8(8), Q2L8(9)},   {Q2L8(10), Q2L8(11)}, {Q2L8(12), Q2L8(13)}, {Q2L8(14), Q2L8(15)}};

// int16 scales of register j (blocks 2j, 2j + 1) from v8 = the 16 scale
// nibbles as bytes in both 128-bit lanes
TGT2I __m256i q2k_bcast(__m256i v8, int j)
{
    return _mm256_shuffle_epi8(v8, _mm256_load_si256((const __m256i *)q2k_bc_tab[j]));
}

TGT2I sb_sums sums_q2_k_avx2(const pt_blk_q2_k *b, const block_q8_K *x)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    __m128i sc8;
    const __m256i mprod = q2k_mins(b, x, &sc8);
    const __m256i v8 = _mm256_broadcastsi128_si256(sc8);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        const int8_t *xh = x->qs + 128 * h;
        const __m256i q0 = _mm256_and_si256(qb, m3);
        const __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(qb, 2), m3);
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qb, 4), m3);
        const __m256i q3 = _mm256_and_si256(_mm256_srli_epi16(qb, 6), m3);
        s0 = _mm256_add_epi32(s0, dot_sc_avx2(q0, xh, q2k_bcast(v8, 4 * h + 0)));
        s1 = _mm256_add_epi32(s1, dot_sc_avx2(q1, xh + 32, q2k_bcast(v8, 4 * h + 1)));
        s0 = _mm256_add_epi32(s0, dot_sc_avx2(q2, xh + 64, q2k_bcast(v8, 4 * h + 2)));
        s1 = _mm256_add_epi32(s1, dot_sc_avx2(q3, xh + 96, q2k_bcast(v8, 4 * h + 3)));
    }
    return (sb_sums){_mm256_add_epi32(s0, s1), mprod};
}

TGT2 float pt_vdot_q2_k_avx2(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q2_k, sums_q2_k_avx2, 1, dmin)
}

// Q3_K: quants taken as q + 4 = low2 + 4 * hbit (0..7); the offset comes
// off in each register, (q + 4) * x - 4 * x in int16 before the scale, so
// that every lane holds ggml's signed-q sum. Layout of the low bits as
// Q2_K; bit k of hmask[l] belongs to value 32k + l. Returns the signed
// scales (sc - 32).
TGT2I __m128i q3k_scales8(const pt_blk_q3_k *b)
{
    uint32_t u[4];
    q3k_unpack(b->scales, u);
    return _mm_sub_epi8(_mm_setr_epi32((int)u[0], (int)u[1], (int)u[2], (int)u[3]), _mm_set1_epi8(32));
}

TGT2I __m256i dot_sc_off4_avx2(__m256i q, const int8_t *x, __m256i sc)
{
    const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, xv), _mm256_maddubs_epi16(_mm256_set1_epi8(4), xv));
    return _mm256_madd_epi16(sc, p);
}

TGT2I sb_sums sums_q3_k_avx2(const pt_blk_q3_k *b, const block_q8_K *x)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i sc = evenodd16(q3k_scales8(b), true);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        const int8_t *xh = x->qs + 128 * h;
        #pragma GCC unroll 2
        for (int s = 0; s < 4; s += 2) {
            const int k = 4 * h + s;
            // bit k (k + 1) of each hmask byte moved to bit 2
            const __m256i h0 = bit_to(hm, k, 2), h1 = bit_to(hm, k + 1, 2);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 2 * s), m3), h0);
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 2 * s + 2), m3), h1);
            s0 = _mm256_add_epi32(s0, dot_sc_off4_avx2(q0, xh + 32 * s, bcast_sc(sc, 4 * h + s)));
            s1 = _mm256_add_epi32(s1, dot_sc_off4_avx2(q1, xh + 32 * s + 32, bcast_sc(sc, 4 * h + s + 1)));
        }
    }
    return (sb_sums){_mm256_add_epi32(s0, s1), _mm256_setzero_si256()};
}

TGT2 float pt_vdot_q3_k_avx2(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q3_k, sums_q3_k_avx2, 0, d)
}

// Q6_K: quants taken as q + 32 (0..63), the offset removed from lane l as
// 32 * (sc_2l * bsum_2l + sc_2l+1 * bsum_2l+1), ggml's way (one madd of
// the scales with the bsums). Half h: ql[64h ..] and qh[32h ..]; byte l of
// the two 32-byte ql halves and of qh give values l, l + 32 (low nibbles,
// qh bits 0-1 and 2-3) and l + 64, l + 96 (high nibbles, bits 4-5, 6-7).
TGT2I sb_sums sums_q6_k_avx2(const pt_blk_q6_k *b, const block_q8_K *x)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(0x30);
    const __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    const __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(s8), _mm256_loadu_si256((const __m256i *)x->bsums));
    const __m256i sc = evenodd16(s8, true);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        const int8_t *xh = x->qs + 128 * h;
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m3));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m3));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m3));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m3));
        s0 = _mm256_add_epi32(s0, dot_sc_avx2(q0, xh, bcast_sc(sc, 4 * h + 0)));
        s1 = _mm256_add_epi32(s1, dot_sc_avx2(q1, xh + 32, bcast_sc(sc, 4 * h + 1)));
        s0 = _mm256_add_epi32(s0, dot_sc_avx2(q2, xh + 64, bcast_sc(sc, 4 * h + 2)));
        s1 = _mm256_add_epi32(s1, dot_sc_avx2(q3, xh + 96, bcast_sc(sc, 4 * h + 3)));
    }
    return (sb_sums){_mm256_sub_epi32(_mm256_add_epi32(s0, s1), _mm256_slli_epi32(off, 5)), _mm256_setzero_si256()};
}

TGT2 float pt_vdot_q6_k_avx2(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q6_k, sums_q6_k_avx2, 0, d)
}

// ---- AVX-512 (BW + VNNI) -------------------------------------------------
//
// One zmm register holds 64 consecutive values of the super-block: the
// packed quants are broadcast to both 256-bit halves and shifted by a
// different count per half (vpsrlvw), so that no lane crossing is needed;
// maddubs then vpdpwssd (int16 pairs times the scale, added into int32)
// replaces AVX2's maddubs + madd + add. The scale vector of each register
// comes from one vpermw of the super-block's int16 scales.
// These zmm rows (pt_vdot_*_avx512zmm) are what the avx512 entries below
// run on AMD CPUs; on Intel the ymm rows of the next section (see there).

// Constant vectors as tables (loaded as memory operands; built in
// registers they were rematerialised inside the loops).
#define HALVES16(a, b) {a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b}
// per-16-bit-lane shift counts: low half, high half
static const int16_t cnt_tab[4][32] __attribute__((aligned(64))) = {
    HALVES16(0, 4), HALVES16(0, 2), HALVES16(4, 6), HALVES16(4, 2)};
enum { CNT_0_4, CNT_0_2, CNT_4_6, CNT_4_2 };
#define BITS32(a) a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a
// bytes: bit 2k in the low half, bit 2k + 1 in the high half
static const uint8_t bitpair[4][64] __attribute__((aligned(64))) = {
    {BITS32(0x01), BITS32(0x02)}, {BITS32(0x04), BITS32(0x08)}, {BITS32(0x10), BITS32(0x20)}, {BITS32(0x40), BITS32(0x80)}};

TGT5I __m512i cnt_vec(int k)
{
    return _mm512_load_si512(cnt_tab[k]);
}

// 32 bytes broadcast to both halves of a zmm, then each 16-bit lane
// shifted right by the counts of cnt_tab[k] (low half, high half).
TGT5I __m512i bcast_shift(const uint8_t *p, int k)
{
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_srlv_epi16(v, cnt_vec(k));
}

// vpermw index vectors: lane group g (of `per` int16 lanes) gets scale
// base + g. Tables, not built per call: the loops below must stay free of
// constant construction.
#define IDX16(b) {b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, \
                  b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1}
#define IDX8(b) {b, b, b, b, b, b, b, b, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, \
                 b + 2, b + 2, b + 2, b + 2, b + 2, b + 2, b + 2, b + 2, b + 3, b + 3, b + 3, b + 3, b + 3, b + 3, b + 3, b + 3}
static const int16_t idx_per16[4][32] __attribute__((aligned(64))) = {IDX16(0), IDX16(2), IDX16(4), IDX16(6)};
static const int16_t idx_per8[4][32] __attribute__((aligned(64))) = {IDX8(0), IDX8(4), IDX8(8), IDX8(12)};

TGT5I __m512i sc_index(int base, int per)
{
    return per == 16 ? _mm512_load_si512(idx_per16[base / 2]) : _mm512_load_si512(idx_per8[base / 4]);
}

// acc += scale-weighted dot of 64 unsigned quants q with 64 activations x
TGT5I __m512i dot_sc_512(__m512i acc, __m512i q, const int8_t *x, __m512i sc)
{
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q, _mm512_loadu_si512(x)), sc);
}

// Q3_K's register product with the +4 offset taken off in int16 (see
// dot_sc_off4_avx2)
TGT5I __m512i dot_sc_off4_512(__m512i acc, __m512i q, const int8_t *x, __m512i sc)
{
    const __m512i xv = _mm512_loadu_si512(x);
    const __m512i p = _mm512_sub_epi16(_mm512_maddubs_epi16(q, xv), _mm512_maddubs_epi16(_mm512_set1_epi8(4), xv));
    return _mm512_dpwssd_epi32(acc, p, sc);
}

TGT5I __m256i fold512(__m512i s0, __m512i s1)
{
    const __m512i s = _mm512_add_epi32(s0, s1);
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

// The 32-value block sums of Q8_K bsums (pairs of its 16-value sums) as 8
// int16, for the Q4_K / Q5_K min products: one vpmaddwd by ones (exact
// int32 pair sums, |s| <= 2 * 16 * 128) and one vpmovdw (exact: they fit
// in int16) instead of hadd's three uops and an extract.
TGT5I __m128i k4_bsums2_vl(const block_q8_K *x)
{
    const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    return _mm256_cvtepi32_epi16(_mm256_madd_epi16(bs, _mm256_set1_epi16(1)));
}

// Q4_K's weight side of a super-block, unpacked once for any number of
// activation rows: the unsigned nibbles of the four 64-value chunk pairs
// and the matching int16 scale vectors, the 8 scales / 8 mins (k4_scales16).
typedef struct {
    __m512i q[4];  // chunk c / 2, low (q[c]) and high (q[c + 1]) register
    __m512i sc[4]; // the scales of q[k]'s two 32-value blocks as int16
    __m256i sm;    // sc0..7, m0..7 (int16)
} q4k_w512;

TGT5I q4k_w512 q4k_unpack_512(const pt_blk_q4_k *b)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    q4k_w512 u;
    u.sm = k4_scales16(b->scales);
    const __m512i sc = _mm512_castsi256_si512(u.sm);
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c += 2) {
        // chunk c: values 64c .. 64c + 63 = blocks 2c (low nibbles), 2c + 1
        u.q[c] = _mm512_and_si512(bcast_shift(b->qs + 32 * c, CNT_0_4), m4);
        u.q[c + 1] = _mm512_and_si512(bcast_shift(b->qs + 32 * c + 32, CNT_0_4), m4);
        u.sc[c] = _mm512_permutexvar_epi16(sc_index(2 * c, 16), sc);
        u.sc[c + 1] = _mm512_permutexvar_epi16(sc_index(2 * c + 2, 16), sc);
    }
    return u;
}

TGT5I sb_sums q4k_sums_x_512(const q4k_w512 *u, const block_q8_K *x)
{
    const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(u->sm, 1), k4_bsums2_vl(x));
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c += 2) {
        s0 = dot_sc_512(s0, u->q[c], x->qs + 64 * c, u->sc[c]);
        s1 = dot_sc_512(s1, u->q[c + 1], x->qs + 64 * c + 64, u->sc[c + 1]);
    }
    return (sb_sums){fold512(s0, s1), _mm256_castsi128_si256(mprod)};
}

TGT5I sb_sums sums_q4_k_512(const pt_blk_q4_k *b, const block_q8_K *x)
{
    const q4k_w512 u = q4k_unpack_512(b);
    return q4k_sums_x_512(&u, x);
}

TGT5 float pt_vdot_q4_k_avx512zmm(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP_DM(pt_blk_q4_k, sums_q4_k_512, 2, 0)
}

// One Q4_K row times 4 activation rows (xq + j * ldx): each output is
// pt_vdot_q4_k_avx512's, bit for bit (the same integer sums and the same
// f32 steps per activation row); the weights are unpacked once for the 4.
TGT5 void pt_vdot4_q4_k_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    assert(n % QK_K == 0);
    const pt_blk_q4_k *b = w;
    __m256 acc[4];
    __m128 am[4];
    for (int j = 0; j < 4; j++) {
        acc[j] = _mm256_setzero_ps();
        am[j] = _mm_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; i++) {
        const q4k_w512 u = q4k_unpack_512(&b[i]);
        const float dw = h2f(b[i].d), dmw = h2f(b[i].dmin);
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)xq + j * ldx) + i;
            const sb_sums sm = q4k_sums_x_512(&u, x);
            const float d = x->d * dw, dmin = -x->d * dmw;
            am[j] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm256_castsi256_si128(sm.ms)), am[j]);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sm.is), acc[j]);
        }
    }
    for (int j = 0; j < 4; j++)
        out[j] = k_row_sum(acc[j], am[j], true);
}

TGT5I sb_sums sums_q5_k_512(const pt_blk_q5_k *b, const block_q8_K *x)
{
    const __m512i m4 = _mm512_set1_epi8(0xF), m16 = _mm512_set1_epi8(16);
    const __m256i sm = k4_scales16(b->scales);
    const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), k4_bsums2_vl(x));
    const __m512i sc = _mm512_castsi256_si512(sm);
    const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->qh));
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        // fifth bits: bit 2c for the low half of the register, 2c + 1 for the high
        const __mmask64 k = _mm512_test_epi8_mask(hb, _mm512_load_si512(bitpair[c]));
        __m512i q = _mm512_and_si512(bcast_shift(b->qs + 32 * c, CNT_0_4), m4);
        q = _mm512_mask_add_epi8(q, k, q, m16);
        const __m512i scv = _mm512_permutexvar_epi16(sc_index(2 * c, 16), sc);
        if (c % 2 == 0)
            s0 = dot_sc_512(s0, q, x->qs + 64 * c, scv);
        else
            s1 = dot_sc_512(s1, q, x->qs + 64 * c, scv);
    }
    return (sb_sums){fold512(s0, s1), _mm256_castsi128_si256(mprod)};
}

TGT5 float pt_vdot_q5_k_avx512zmm(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP_M(pt_blk_q5_k, sums_q5_k_512, 3, dmin, 0)
}

// 16-value-block types: the register of values 64p .. 64p + 63 holds
// blocks 4p .. 4p + 3, one per 128-bit lane.
// Q2_K's weight side of a super-block (unpacked once for any number of
// activation rows): the four registers of 2-bit quants, their int16 scale
// vectors, and the 4-bit mins as int16.
typedef struct {
    __m512i q[4];  // values 64k .. 64k + 63 (k = 2h + s: half h, shifts 4s, 4s + 2)
    __m512i sc[4];
    __m256i mins;  // (16,) int16
} q2k_w512;

TGT5I q2k_w512 q2k_unpack_512(const pt_blk_q2_k *b)
{
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m128i sm = _mm_loadu_si128((const __m128i *)b->scales);
    const __m128i m4 = _mm_set1_epi8(0xF);
    q2k_w512 u;
    u.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
    const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sm, m4)));
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        // half h: shifts 0 / 2 give values 128h + 0..63, shifts 4 / 6 the rest
        u.q[2 * h] = _mm512_and_si512(bcast_shift(b->qs + 32 * h, CNT_0_2), m3);
        u.q[2 * h + 1] = _mm512_and_si512(bcast_shift(b->qs + 32 * h, CNT_4_6), m3);
        u.sc[2 * h] = _mm512_permutexvar_epi16(sc_index(8 * h, 8), sc);
        u.sc[2 * h + 1] = _mm512_permutexvar_epi16(sc_index(8 * h + 4, 8), sc);
    }
    return u;
}

// The scaled lane sums of a 16-value-block type's four quant registers
// (values 64k .. 64k + 63 in q[k], int16 scales sc[k]) with 256 activation
// quants: Q2_K's and Q6_K's integer core.
TGT5I __m256i sums16_x_512(const __m512i q[4], const __m512i sc[4], const int8_t *xqs)
{
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        s0 = dot_sc_512(s0, q[2 * h], xqs + 128 * h, sc[2 * h]);
        s1 = dot_sc_512(s1, q[2 * h + 1], xqs + 128 * h + 64, sc[2 * h + 1]);
    }
    return fold512(s0, s1);
}

TGT5I sb_sums q2k_sums_x_512(const q2k_w512 *u, const block_q8_K *x)
{
    const __m256i mprod = _mm256_madd_epi16(u->mins, _mm256_loadu_si256((const __m256i *)x->bsums));
    return (sb_sums){sums16_x_512(u->q, u->sc, x->qs), mprod};
}

TGT5I sb_sums sums_q2_k_512(const pt_blk_q2_k *b, const block_q8_K *x)
{
    const q2k_w512 u = q2k_unpack_512(b);
    return q2k_sums_x_512(&u, x);
}

TGT5 float pt_vdot_q2_k_avx512zmm(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP_DM(pt_blk_q2_k, sums_q2_k_512, 1, 0)
}

// One Q2_K row times 4 activation rows (see pt_vdot4_q4_k_avx512).
TGT5 void pt_vdot4_q2_k_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    assert(n % QK_K == 0);
    const pt_blk_q2_k *b = w;
    __m256 acc[4];
    for (int j = 0; j < 4; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const q2k_w512 u = q2k_unpack_512(&b[i]);
        const float dw = h2f(b[i].d), dmw = h2f(b[i].dmin);
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)xq + j * ldx) + i;
            const sb_sums sm = q2k_sums_x_512(&u, x);
            const float d = x->d * dw, dmin = -x->d * dmw;
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(sm.ms), acc[j]);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sm.is), acc[j]);
        }
    }
    for (int j = 0; j < 4; j++)
        out[j] = hsum8_ps(acc[j]);
}

TGT5I sb_sums sums_q3_k_512(const pt_blk_q3_k *b, const block_q8_K *x)
{
    const __m512i m3 = _mm512_set1_epi8(3), m4b = _mm512_set1_epi8(4);
    const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(q3k_scales8(b)));
    const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->hmask));
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        // values 64p .. 64p + 63: half h = p / 2, low-bit shifts 4(p%2) and +2,
        // high bits k = 2p and 2p + 1
        const int h = p / 2;
        const __mmask64 k = _mm512_test_epi8_mask(hm, _mm512_load_si512(bitpair[p]));
        __m512i q = _mm512_and_si512(bcast_shift(b->qs + 32 * h, p % 2 ? CNT_4_6 : CNT_0_2), m3);
        q = _mm512_mask_add_epi8(q, k, q, m4b);
        const __m512i scv = _mm512_permutexvar_epi16(sc_index(4 * p, 8), sc);
        if (p % 2 == 0)
            s0 = dot_sc_off4_512(s0, q, x->qs + 64 * p, scv);
        else
            s1 = dot_sc_off4_512(s1, q, x->qs + 64 * p, scv);
    }
    return (sb_sums){fold512(s0, s1), _mm256_setzero_si256()};
}

TGT5 float pt_vdot_q3_k_avx512zmm(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP_M(pt_blk_q3_k, sums_q3_k_512, 0, d, 0)
}

// Q6_K: per half h, ql[64h .. 64h + 63] in one register: its low nibbles
// are values 128h + 0..63 in order, its high nibbles values 128h + 64..127;
// the qh bits (shifts 0 / 2 and 4 / 6) join them at bit 4.
// Q6_K's weight side of a super-block: the four registers of 6-bit quants
// (q + 32, 0..63), their int16 scale vectors, the signed scales as int16.
typedef struct {
    __m512i q[4];  // values 64k .. 64k + 63
    __m512i sc[4];
    __m256i s16;   // (16,) int16 scales
} q6k_w512;

TGT5I q6k_w512 q6k_unpack_512(const pt_blk_q6_k *b)
{
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    q6k_w512 u;
    u.s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    const __m512i sc = _mm512_castsi256_si512(u.s16);
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512(b->ql + 64 * h);
        const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        // high bits to bit 4: shifts left 4 / 2 (low register), 0 / right 2 (high)
        const __m512i hl = _mm512_sllv_epi16(hb, cnt_vec(CNT_4_2));
        const __m512i hh = _mm512_srlv_epi16(hb, cnt_vec(CNT_0_2));
        // nibble | (high & 0x30) in one vpternlog (0xF8: a | (b & c))
        u.q[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(l, m4), hl, m30, 0xF8);
        u.q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), hh, m30, 0xF8);
        u.sc[2 * h] = _mm512_permutexvar_epi16(sc_index(8 * h, 8), sc);
        u.sc[2 * h + 1] = _mm512_permutexvar_epi16(sc_index(8 * h + 4, 8), sc);
    }
    return u;
}

TGT5I sb_sums q6k_sums_x_512(const q6k_w512 *u, const block_q8_K *x)
{
    const __m256i off = _mm256_madd_epi16(u->s16, _mm256_loadu_si256((const __m256i *)x->bsums));
    return (sb_sums){_mm256_sub_epi32(sums16_x_512(u->q, u->sc, x->qs), _mm256_slli_epi32(off, 5)),
                     _mm256_setzero_si256()};
}

TGT5I sb_sums sums_q6_k_512(const pt_blk_q6_k *b, const block_q8_K *x)
{
    const q6k_w512 u = q6k_unpack_512(b);
    return q6k_sums_x_512(&u, x);
}

TGT5 float pt_vdot_q6_k_avx512zmm(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP_M(pt_blk_q6_k, sums_q6_k_512, 0, d, 0)
}

// One Q6_K row times 4 activation rows (see pt_vdot4_q4_k_avx512).
TGT5 void pt_vdot4_q6_k_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out)
{
    assert(n % QK_K == 0);
    const pt_blk_q6_k *b = w;
    __m256 acc[4];
    for (int j = 0; j < 4; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const q6k_w512 u = q6k_unpack_512(&b[i]);
        const float dw = h2f(b[i].d);
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)xq + j * ldx) + i;
            const sb_sums sm = q6k_sums_x_512(&u, x);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(x->d * dw), _mm256_cvtepi32_ps(sm.is), acc[j]);
        }
    }
    for (int j = 0; j < 4; j++)
        out[j] = hsum8_ps(acc[j]);
}

// ---- AVX-512VL: the GEMV row kernels on ymm ----------------------------------
//
// One weight row times one activation row (vdot, what decode runs) on
// 256-bit registers with AVX-512VL's ymm forms: the AVX2 kernels' layout,
// with VNNI's vpdpwssd in place of madd + add (one uop instead of two;
// exact, no saturation: the same int32 lane sums) and, for Q6_K, one
// vpternlog per quant register. Why not the zmm kernels above: on Intel
// cores (Emerald Rapids measured, docs/kernels.md) port 1's vector ALU is
// closed while 512-bit uops are in flight, and these kernels are
// throughput-bound on the vector ports, so three ports of ymm beat two of
// zmm on Intel (in cache, 1 thread, Emerald Rapids: ns per super-block Q4_K
// 8.4 -> 6.3, Q2_K 7.2 -> 5.4, Q6_K 7.7 -> 7.3, Q5_K 9.7 -> 8.1, Q3_K
// 8.7 -> 8.3; docs/kernels.md). The zmm rows stay for AMD (entries
// below) and the zmm kernels for the 4-vector products (vdot4), where the
// weight unpacking is shared by four activation rows.

// The ymm rows of Q2_K, Q4_K and Q6_K also use GFNI's gf2p8affineqb as a
// bit-field extract: one uop for a shift plus mask within each byte
// (output bits to .. to + w - 1 = input bits s .. s + w - 1, the others 0).
#define TGTG __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,gfni")))
#define TGTGI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,gfni"), always_inline)) static inline

// gf2p8affineqb's matrix for that: row 7 - j (byte 7 - j of the qword)
// picks the input bit of output bit j.
static inline uint64_t gf_sel(int s, int w, int to)
{
    uint64_t a = 0;
    for (int i = 0; i < w; i++)
        a |= (uint64_t)(1u << (s + i)) << (8 * (7 - (to + i)));
    return a;
}

TGTGI __m256i gf_bits(__m256i v, int s, int w, int to)
{
    return _mm256_gf2p8affine_epi64_epi8(v, _mm256_set1_epi64x((long long)gf_sel(s, w, to)), 0);
}

TGT5I __m256i dot_sc_vl(__m256i acc, __m256i q, const int8_t *x, __m256i sc)
{
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)x)), sc);
}

// k4_scales16's bytes (before the widening) in fewer uops (6 instead of
// 9): with Z0, Z1, Z2 the three 32-bit words of the 12 scale bytes, the
// results are the words
// Z0 & 0x3f, (Z2 & 0x0f) | ((Z0 >> 2) & 0x30), Z1 & 0x3f and
// ((Z2 >> 4) & 0x0f) | ((Z1 >> 2) & 0x30) (bytes: scales 0-3, 4-7, mins
// 0-3, 4-7): one vpshufd [Z0 Z2 Z1 Z2] with a vpsrlvd of the last word by
// 4, the (Z >> 2) & 0x30 parts moved to words 1 and 3 by one vpshufb (zero
// in 0 and 2), joined by one vpternlog (a & c) | b.
TGT5I __m128i k4_scales8_vl(const uint8_t *s)
{
    const __m128i z = _mm_loadu_si128((const __m128i *)s);
    const char Z = (char)0x80;
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(z, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i h = _mm_and_si128(_mm_srli_epi32(z, 2), _mm_set1_epi8(0x30));
    const __m128i b = _mm_shuffle_epi8(h, _mm_setr_epi8(Z, Z, Z, Z, 0, 1, 2, 3, Z, Z, Z, Z, 4, 5, 6, 7));
    const __m128i c = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    return _mm_ternarylogic_epi32(a, b, c, 0xEC);
}

// Q5_K's scale k (k < 8) as the dword (sc_k, sc_k) of int16 words into
// st[k], for vpdpwssd to read as a broadcast from memory (a load, no
// shuffle uop per register: each 32 quants are one block, one scale);
// returns the 8 mins as int16. r8 = k4_scales8_vl's bytes. Measured A/B in
// L2 (Emerald Rapids): Q5_K 8.15 -> 7.70 ns per super-block; for Q4_K it
// was slower (5.86 -> 6.12), so Q4_K keeps the per-register vpshufb.
TGT5I __m128i k4_scale_pairs(__m128i r8, int32_t st[8])
{
    const char Z = (char)0x80;
    const __m256i idx = _mm256_setr_epi8(0, Z, 0, Z, 1, Z, 1, Z, 2, Z, 2, Z, 3, Z, 3, Z, //
                                         4, Z, 4, Z, 5, Z, 5, Z, 6, Z, 6, Z, 7, Z, 7, Z);
    _mm256_store_si256((__m256i *)st, _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(r8), idx));
    // st escapes here, so each st[k] below is read back from memory (a
    // broadcast load) instead of being extracted from the register (what
    // the compiler does otherwise: a shuffle uop per scale, as before)
    __asm__ volatile("" : : "r"(st) : "memory");
    return _mm_cvtepu8_epi16(_mm_unpackhi_epi64(r8, r8));
}

// vpshufb controls: scale k (byte k of a vector holding k4_scales8_vl's
// bytes in both 128-bit lanes) as int16 in every word, zero-extended by
// the zero byte above it (bcast_sc's vector without the vpmovzxbw)
#define K4L16(a) Q2L8(a), Q2L8(a)
static const char k4_bc_tab[8][32] __attribute__((aligned(32))) = {
    {K4L16(0)}, {K4L16(1)}, {K4L16(2)}, {K4L16(3)}, {K4L16(4)}, {K4L16(5)}, {K4L16(6)}, {K4L16(7)}};

// Q4_K (as sums_q4_k_avx2), with k4_bsums2_vl's min products and the
// register scales picked from the scale bytes by k4_bc_tab: Ice Lake, 1
// thread, in L2, A/B in one binary (2 runs): 184 -> 175.5 ns per 7168-row
// with the first, 171.6 with both.
// The lane sums of one super-block given v8 = its k4_scales8_vl bytes in
// both 128-bit lanes.
TGTGI __m256i q4k_is_vl(const pt_blk_q4_k *b, const block_q8_K *x, __m256i v8)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        const __m256i ql = _mm256_and_si256(qb, m4);
        const __m256i qh = gf_bits(qb, 4, 4, 0);
        s0 = dot_sc_vl(s0, ql, x->qs + 64 * c, _mm256_shuffle_epi8(v8, _mm256_load_si256((const __m256i *)k4_bc_tab[2 * c])));
        s1 = dot_sc_vl(s1, qh, x->qs + 64 * c + 32,
                       _mm256_shuffle_epi8(v8, _mm256_load_si256((const __m256i *)k4_bc_tab[2 * c + 1])));
    }
    return _mm256_add_epi32(s0, s1);
}

// k4_scales8_vl of two super-blocks at once, one per 128-bit lane (the
// same operations on ymm)
TGTGI __m256i k4_scales8_vl2(const uint8_t *s0, const uint8_t *s1)
{
    const __m256i z = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)s0)),
                                              _mm_loadu_si128((const __m128i *)s1), 1);
    const char Z = (char)0x80;
    const __m256i a = _mm256_srlv_epi32(_mm256_shuffle_epi32(z, _MM_SHUFFLE(2, 1, 2, 0)), _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4));
    const __m256i h = _mm256_and_si256(_mm256_srli_epi32(z, 2), _mm256_set1_epi8(0x30));
    const __m256i b = _mm256_shuffle_epi8(h, _mm256_setr_epi8(Z, Z, Z, Z, 0, 1, 2, 3, Z, Z, Z, Z, 4, 5, 6, 7, //
                                                              Z, Z, Z, Z, 0, 1, 2, 3, Z, Z, Z, Z, 4, 5, 6, 7));
    const __m256i c = _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    return _mm256_ternarylogic_epi32(a, b, c, 0xEC);
}

TGTGI sb_sums sums_q4_k_vl(const pt_blk_q4_k *b, const block_q8_K *x)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m128i r8 = k4_scales8_vl(b->scales);
    const __m256i v8 = _mm256_broadcastsi128_si256(r8);
    const __m128i mprod = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(r8, r8)), k4_bsums2_vl(x));
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        const __m256i ql = _mm256_and_si256(qb, m4);
        const __m256i qh = gf_bits(qb, 4, 4, 0);
        s0 = dot_sc_vl(s0, ql, x->qs + 64 * c, _mm256_shuffle_epi8(v8, _mm256_load_si256((const __m256i *)k4_bc_tab[2 * c])));
        s1 = dot_sc_vl(s1, qh, x->qs + 64 * c + 32,
                       _mm256_shuffle_epi8(v8, _mm256_load_si256((const __m256i *)k4_bc_tab[2 * c + 1])));
    }
    return (sb_sums){_mm256_add_epi32(s0, s1), _mm256_castsi128_si256(mprod)};
}

#ifndef Q4_PAIR
#define Q4_PAIR 1
#endif
// The Q4_K row, super-blocks in pairs: the scale unpacking, the mins and
// the bsums pair sums of two super-blocks in one set of ymm operations
// (one per 128-bit lane); then each super-block's f32 steps in order, as
// K_ROW_LOOP_DM's (an odd last one by sums_q4_k_vl).
static TGTG float vdot_q4_k_vl(const void *w, const void *xq, int64_t n)
{
#if !Q4_PAIR
    K_ROW_LOOP_DM(pt_blk_q4_k, sums_q4_k_vl, 2, 1)
#else
    assert(n % QK_K == 0);
    const pt_blk_q4_k *b = w;
    const block_q8_K *x = xq;
    const int64_t nsb = n / QK_K;
    __m256 acc = _mm256_setzero_ps();
    __m128 am = _mm_setzero_ps();
    _Alignas(16) float dd_[8];
    int64_t i = 0;
    for (; i + 2 <= nsb; i += 2) {
        if (K_PREFETCH) {
            k_prefetch((const char *)&b[i] + K_PREFETCH, sizeof(pt_blk_q4_k));
            k_prefetch((const char *)&b[i + 1] + K_PREFETCH, sizeof(pt_blk_q4_k));
        }
        const __m256i r8 = k4_scales8_vl2(b[i].scales, b[i + 1].scales);
        // mins as int16 (bytes 8-15 of each lane) and the 32-value bsums of both
        const __m256i mins = _mm256_unpackhi_epi8(r8, _mm256_setzero_si256());
        const __m256i one = _mm256_set1_epi16(1);
        const __m256i ba = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x[i].bsums), one);
        const __m256i bb = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x[i + 1].bsums), one);
        const __m256i bs2 = _mm256_permute4x64_epi64(_mm256_packs_epi32(ba, bb), _MM_SHUFFLE(3, 1, 2, 0));
        const __m256i mp = _mm256_madd_epi16(mins, bs2);
        const __m256i is0 = q4k_is_vl(&b[i], &x[i], _mm256_permute4x64_epi64(r8, _MM_SHUFFLE(1, 0, 1, 0)));
        const __m256i is1 = q4k_is_vl(&b[i + 1], &x[i + 1], _mm256_permute4x64_epi64(r8, _MM_SHUFFLE(3, 2, 3, 2)));
        _mm_store_ps(dd_, _mm_mul_ps(_mm_set1_ps(x[i].d), _mm_cvtph_ps(_mm_cvtsi32_si128((int)ld32((const uint8_t *)&b[i].d)))));
        _mm_store_ps(dd_ + 4, _mm_mul_ps(_mm_set1_ps(x[i + 1].d),
                                         _mm_cvtph_ps(_mm_cvtsi32_si128((int)ld32((const uint8_t *)&b[i + 1].d)))));
        __asm__ volatile("" : : "r"(dd_) : "memory");
        am = _mm_fnmadd_ps(_mm_set1_ps(dd_[1]), _mm_cvtepi32_ps(_mm256_castsi256_si128(mp)), am);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dd_[0]), _mm256_cvtepi32_ps(is0), acc);
        am = _mm_fnmadd_ps(_mm_set1_ps(dd_[5]), _mm_cvtepi32_ps(_mm256_extracti128_si256(mp, 1)), am);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dd_[4]), _mm256_cvtepi32_ps(is1), acc);
    }
    if (i < nsb) {
        const sb_sums sm = sums_q4_k_vl(&b[i], &x[i]);
        const __m128 dd = _mm_mul_ps(_mm_set1_ps(x[i].d), _mm_cvtph_ps(_mm_cvtsi32_si128((int)ld32((const uint8_t *)&b[i].d))));
        am = _mm_fnmadd_ps(_mm_permute_ps(dd, 0x55), _mm_cvtepi32_ps(_mm256_castsi256_si128(sm.ms)), am);
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(sm.is), acc);
    }
    return k_row_sum(acc, am, true);
#endif
}

// Q2_K with the scales folded into the quants: a 4-bit scale times a
// 2-bit quant fits a byte (<= 45), so each 32-quant register's bytes
// sc * q come from one vpshufb of a product table, and one vpdpbusd
// (unsigned sc * q by the signed activations, exact int32) gives lane l
// the sum over its 4 values of sc * q * x: the integers ggml's maddubs +
// madd by the scale give (its 4 values share one 16-value block), so the
// same bits with 8 multiply-pipe uops per super-block instead of 16 and
// no scale shuffle per register. Table: register j = 4h + s holds blocks
// 2j (low 128-bit lane) and 2j + 1 (high lane); ymm table h holds in lane
// L, dword s, the bytes (0, sc, 2 sc, 3 sc) of block 8h + 2s + L, so the
// register's index is q | 4s in both lanes: one gf2p8affineqb (shift,
// mask and the constant 4s as its xor operand) per register. Both tables
// come from the 16 scale nibbles by one vpermt2b of (sc | 2 sc | 2 sc |
// 3 sc) each, zero-masked for q = 0. Zen 4, 1 thread, 64 rows in L2, A/B
// in one binary against the maddubs + vpdpwssd row (interleaved, best of
// 300-400 rounds, 4 runs): 128.3-141.8 -> 120.7-129.7 ns per 7168-row
// (0.91-0.94); 4 accumulators or two rows per pass sharing the
// activation loads gained nothing more (< 2 %).
#define TGTV __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c,gfni")))
#define TGTVI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c,gfni"), \
                                   always_inline)) static inline
// vpermt2b index of table byte (h, L, s, k) in (sc | 2 sc | 2 sc | 3 sc):
// block, 16 + block, 48 + block for k = 1, 2, 3 (block = 8h + 2s + L); k = 0 masked
#define Q2P4(h, L, s) 0, 8 * (h) + 2 * (s) + (L), 16 + 8 * (h) + 2 * (s) + (L), 48 + 8 * (h) + 2 * (s) + (L)
#define Q2PL(h, L) Q2P4(h, L, 0), Q2P4(h, L, 1), Q2P4(h, L, 2), Q2P4(h, L, 3)
static const uint8_t q2k_ptab[2][32] __attribute__((aligned(32))) = {{Q2PL(0, 0), Q2PL(0, 1)},
                                                                     {Q2PL(1, 0), Q2PL(1, 1)}};

// A macro, not a function: the xor operand x must be an integer constant
// expression for clang (GCC folds it through the inlining).
#define gf_bits_x(v, s, w, to, x) \
    _mm256_gf2p8affine_epi64_epi8((v), _mm256_set1_epi64x((long long)gf_sel((s), (w), (to))), (x))

TGTVI sb_sums sums_q2_k_vl(const pt_blk_q2_k *b, const block_q8_K *x)
{
    const __m128i sm = _mm_loadu_si128((const __m128i *)b->scales);
    // the mins: each scale byte zero-extended, >> 4
    const __m256i mins = _mm256_srli_epi16(_mm256_cvtepu8_epi16(sm), 4);
    const __m256i mprod = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)x->bsums));
    // (sc | 2 sc) and (2 sc | 3 sc) from the broadcast scale nibbles
    const __m256i p1 = _mm256_and_si256(_mm256_broadcastsi128_si256(sm), _mm256_set1_epi8(0xF));
    const __m256i p12 = _mm256_mask_add_epi8(p1, 0xFFFF0000u, p1, p1), p23 = _mm256_add_epi8(p12, p1);
    const __mmask32 nz = 0xEEEEEEEEu; // k != 0
    __m256i tab[2];
    tab[0] = _mm256_maskz_permutex2var_epi8(nz, p12, _mm256_load_si256((const __m256i *)q2k_ptab[0]), p23);
    tab[1] = _mm256_maskz_permutex2var_epi8(nz, p12, _mm256_load_si256((const __m256i *)q2k_ptab[1]), p23);
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        const int8_t *xh = x->qs + 128 * h;
        const __m256i i0 = _mm256_and_si256(qb, _mm256_set1_epi8(3));
        const __m256i i1 = gf_bits_x(qb, 2, 2, 0, 4), i2 = gf_bits_x(qb, 4, 2, 0, 8), i3 = gf_bits_x(qb, 6, 2, 0, 12);
        a0 = _mm256_dpbusd_epi32(a0, _mm256_shuffle_epi8(tab[h], i0), _mm256_loadu_si256((const __m256i *)xh));
        a1 = _mm256_dpbusd_epi32(a1, _mm256_shuffle_epi8(tab[h], i1), _mm256_loadu_si256((const __m256i *)(xh + 32)));
        a0 = _mm256_dpbusd_epi32(a0, _mm256_shuffle_epi8(tab[h], i2), _mm256_loadu_si256((const __m256i *)(xh + 64)));
        a1 = _mm256_dpbusd_epi32(a1, _mm256_shuffle_epi8(tab[h], i3), _mm256_loadu_si256((const __m256i *)(xh + 96)));
    }
    return (sb_sums){_mm256_add_epi32(a0, a1), mprod};
}

static TGTV float vdot_q2_k_vl(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP_DM(pt_blk_q2_k, sums_q2_k_vl, 1, 1)
}

// Q6_K (as sums_q6_k_avx2): the high nibbles and the qh bit pairs moved
// into place by gf_bits, joined with the low nibbles by one vpternlog
// (0xEC: (a & c) | b; 0xF8: a | (b & c)).
TGTGI sb_sums sums_q6_k_vl(const pt_blk_q6_k *b, const block_q8_K *x)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(0x30);
    const __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    const __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(s8), _mm256_loadu_si256((const __m256i *)x->bsums));
    const __m256i sc = evenodd16(s8, true);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        const int8_t *xh = x->qs + 128 * h;
        const __m256i q0 = _mm256_ternarylogic_epi32(l0, gf_bits(hb, 0, 2, 4), m4, 0xEC);
        const __m256i q1 = _mm256_ternarylogic_epi32(l1, gf_bits(hb, 2, 2, 4), m4, 0xEC);
        const __m256i q2 = _mm256_ternarylogic_epi32(gf_bits(l0, 4, 4, 0), hb, m3, 0xF8);
        const __m256i q3 = _mm256_or_si256(gf_bits(l1, 4, 4, 0), gf_bits(hb, 6, 2, 4));
        s0 = dot_sc_vl(s0, q0, xh, bcast_sc(sc, 4 * h + 0));
        s1 = dot_sc_vl(s1, q1, xh + 32, bcast_sc(sc, 4 * h + 1));
        s0 = dot_sc_vl(s0, q2, xh + 64, bcast_sc(sc, 4 * h + 2));
        s1 = dot_sc_vl(s1, q3, xh + 96, bcast_sc(sc, 4 * h + 3));
    }
    return (sb_sums){_mm256_sub_epi32(_mm256_add_epi32(s0, s1), _mm256_slli_epi32(off, 5)), _mm256_setzero_si256()};
}

static TGTG float vdot_q6_k_vl(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q6_k, sums_q6_k_vl, 0, d)
}

// Q5_K (as sums_q5_k_avx2)
TGT5I sb_sums sums_q5_k_vl(const pt_blk_q5_k *b, const block_q8_K *x)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    _Alignas(32) int32_t st[8];
    const __m128i mins = k4_scale_pairs(k4_scales8_vl(b->scales), st);
    const __m128i mprod = _mm_madd_epi16(mins, k4_bsums2_vl(x));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)b->qh);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        const __m256i h0 = bit_to(hb, 2 * c, 4), h1 = bit_to(hb, 2 * c + 1, 4);
        const __m256i ql = _mm256_or_si256(_mm256_and_si256(qb, m4), h0);
        const __m256i qh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), h1);
        s0 = dot_sc_vl(s0, ql, x->qs + 64 * c, _mm256_set1_epi32(st[2 * c]));
        s1 = dot_sc_vl(s1, qh, x->qs + 64 * c + 32, _mm256_set1_epi32(st[2 * c + 1]));
    }
    return (sb_sums){_mm256_add_epi32(s0, s1), _mm256_castsi128_si256(mprod)};
}

static TGT5 float vdot_q5_k_vl(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q5_k, sums_q5_k_vl, 3, dmin)
}

// Q3_K (as sums_q3_k_avx2): the +4 offset taken off in int16 before vpdpwssd
TGT5I __m256i dot_sc_off4_vl(__m256i acc, __m256i q, const int8_t *x, __m256i sc)
{
    const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, xv), _mm256_maddubs_epi16(_mm256_set1_epi8(4), xv));
    return _mm256_dpwssd_epi32(acc, p, sc);
}

TGT5I sb_sums sums_q3_k_vl(const pt_blk_q3_k *b, const block_q8_K *x)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i sc = evenodd16(q3k_scales8(b), true);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int h = 0; h < 2; h++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        const int8_t *xh = x->qs + 128 * h;
        #pragma GCC unroll 2
        for (int s = 0; s < 4; s += 2) {
            const int k = 4 * h + s;
            const __m256i h0 = bit_to(hm, k, 2), h1 = bit_to(hm, k + 1, 2);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 2 * s), m3), h0);
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 2 * s + 2), m3), h1);
            s0 = dot_sc_off4_vl(s0, q0, xh + 32 * s, bcast_sc(sc, 4 * h + s));
            s1 = dot_sc_off4_vl(s1, q1, xh + 32 * s + 32, bcast_sc(sc, 4 * h + s + 1));
        }
    }
    return (sb_sums){_mm256_add_epi32(s0, s1), _mm256_setzero_si256()};
}

static TGT5 float vdot_q3_k_vl(const void *w, const void *xq, int64_t n)
{
    K_ROW_LOOP(pt_blk_q3_k, sums_q3_k_vl, 0, d)
}


// ---- AVX-512 entries: zmm or ymm rows -------------------------------------
//
// Which of the two bit-identical row kernels a CPU runs: the ymm ones on
// Intel (measured faster there: port 1's vector ALU closes while 512-bit
// uops are in flight) and on Zen 4 (AMD family 0x19, which splits a 512-bit
// uop in two: the ymm rows measured faster there too, bench_qt 64 rows in
// L2, 1 thread, ZMM=0 / 1 alternately, 3 runs, ns per 7168-row: Q4_K
// 149-153 / 188-230, Q2_K 127-131 / 154-156, Q6_K 165-172 / 166-174,
// IQ4_XS 227-235 / 242-249); the zmm ones on later AMD (Zen 5, family
// 0x1A: full-width 512-bit units; measured on a Zen 5 EPYC, 2026-12-07,
// the same way, ZMM=0 / 1: Q2_K 94-110 / 92-95, Q3_K 181-207 / 122-133,
// Q4_K 124-132 / 108-111, Q5_K 194-210 / 142-151, Q6_K 122-133 / 88-91)
// and on CPUs without GFNI, which the ymm rows use. PETREL_KQ_ZMM=1 / 0 in the environment
// forces either (A/B).
static _Atomic int g_kq_zmm = -1; // -1: not decided yet

bool pt_kq_prefer_zmm(void)
{
    int v = atomic_load_explicit(&g_kq_zmm, memory_order_relaxed);
    if (v < 0) {
        v = pt_env_switch("PETREL_KQ_ZMM");
        if (v < 0) // family: Zen 4 is 0x19, Zen 5 0x1A
            v = pt_cpu_vendor_id() == PT_CPU_AMD && pt_cpu_family() >= 0x1a;
        if (!__builtin_cpu_supports("gfni")) // the ymm rows need it (Skylake-SP / Cascade Lake: zmm)
            v = 1;
        atomic_store_explicit(&g_kq_zmm, v, memory_order_relaxed);
    }
    return v;
}

#define K_ENTRY(t)                                                                                   \
    TGT5 float pt_vdot_##t##_avx512(const void *w, const void *xq, int64_t n)                        \
    {                                                                                                \
        return pt_kq_prefer_zmm() ? pt_vdot_##t##_avx512zmm(w, xq, n) : vdot_##t##_vl(w, xq, n);               \
    }
// Q2_K's ymm row also takes VBMI (its product tables)
TGT5 float pt_vdot_q2_k_avx512(const void *w, const void *xq, int64_t n)
{
    return pt_kq_prefer_zmm() || !__builtin_cpu_supports("avx512vbmi") ? pt_vdot_q2_k_avx512zmm(w, xq, n)
                                                                        : vdot_q2_k_vl(w, xq, n);
}
K_ENTRY(q3_k)
K_ENTRY(q4_k)
K_ENTRY(q5_k)
K_ENTRY(q6_k)

#endif

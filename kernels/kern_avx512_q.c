// kernels/kern_avx512_q.c — the AVX-512 path's Q4_0 / Q8_0 products and its
// activation quantiser. Bit-identical to kern_scalar.c and to ggml's x86
// ggml_vec_dot_q{4,8}_0_q8_0 (contract: kern_internal.h): per block, the
// eight exact int32 sums of 4 consecutive products meet fp32(d_w) *
// fp32(d_x) in one fma into eight f32 lanes.
//
// Each lane's chain is sequential over blocks, so the kernels run many
// independent chains side by side: GEMV 8 rows per pass over the
// activation, GEMM tiles of 4 rows x 4 vectors (kq() below has the details).
// - vpdpbusd multiplies u8 by s8, so the weights are made unsigned and the
//   offset taken out in the accumulator's start value: Q4_0 uses the raw
//   nibbles (0..15), start -8 * (sum of the activation's 4 quants of the
//   lane); Q8_0 flips the sign bit (w + 128), start -128 * that sum. The
//   start is one vpdpbusd of the activation per block, shared by all rows;
//   every partial sum is exact in int32, so the lane sums are ggml's.
// - the scale product d_w * d_x of each block is the f32 product of the two
//   (rounded once, as ggml's), broadcast over the block's eight lanes.
// Activation layout: natural (block b at b * 32), for both types.
#include "kernels/kern_internal.h"
#include "kernels/cpu.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define KX_TGT "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define TGT __attribute__((target(KX_TGT)))
#define TGTI __attribute__((target(KX_TGT), always_inline)) inline

// Software prefetch distance in bytes ahead of each row's own progress (0:
// none); one prefetch per 64-byte line of each row (see kq()).
#ifndef KZ_PREFETCH
#define KZ_PREFETCH 2048
#endif
// Q4_0's prefetch hint: into L2 only (T1). Measured on Intel Emerald Rapids
// (DRAM, 1 thread, A/B in one binary, twice): T1 vs T0 0.82 vs 0.73 of the
// read on 7168x2048, 0.90 vs 0.92 on 2048x7168; for Q8_0 T0 stayed ahead
// (0.90 / 1.04 vs 0.89 / 1.01), so Q8_0 keeps T0.
#ifndef KZ_HINT_Q4
#define KZ_HINT_Q4 _MM_HINT_T1
#endif

// ---- activation quantisation ------------------------------------------------

// Same result as pt_quant_act_scalar, bit for bit (ggml's x86
// quantize_row_q8_0: id = 127 / amax, products rounded to nearest even),
// one block per step on two zmm, natural layout.
#define KZ_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) // a constant, as the intrinsic needs

TGT void pt_quant_act_avx512(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8)
{
    assert(nb >= 0 && qs && d && s8);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float db = amax / 127.0f;
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), KZ_RNE);
        const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), KZ_RNE);
        (void)paired; // one layout for both types
        int8_t *lo = qs + b * QK, *hi = lo + 16;
        _mm_storeu_si128((__m128i *)lo, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)hi, _mm512_cvtepi32_epi8(q1));
        s8[b] = 8 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT));
    }
}

// ---- products ------------------------------------------------------------------
//
// kq() computes R weight rows x V activation vectors (GEMV before kg():
// R = 8, V = 1; GEMM: R = 4, V = 4) on ymm registers, one 8-lane
// accumulator per (row, vector) - the contract's acc[0..7] itself. On Zen 4
// a zmm operation costs two ymm slots, so ymm loses nothing there, and the
// narrower layout lets the per-block scale come from memory as an embedded
// broadcast of the fma instead of a shuffle.
// Per group of 8 blocks:
// - the 8 fp16 scales of each row are gathered by one or two vpermt2w from
//   the row's bytes (Q4_0: block k's scale is word 9k of the group, all in
//   128 bytes; Q8_0: word 17k, two windows of 4 blocks), widened once, and
//   multiplied by the 8 activation scales: dd[r][v][k] = fp32(d_w) *
//   fp32(d_x), the contract's product, rounded once;
// - per block: the activation's start value (shared by the rows), per row
//   the unsigned weights (Q4_0: one broadcast load, the high half shifted by
//   a nibble, masked; Q8_0: one load xor 0x80), per (row, vector) one
//   vpdpbusd, one conversion and one fma with dd broadcast from memory.
// Every lane's chain is the contract's, block after block, so the result
// of a (row, vector) pair does not depend on R, V or the tile.

static TGTI uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

// 32 weights of a block, unsigned (Q4_0: 16 low nibbles then 16 high ones,
// 0..15; Q8_0: w + 128), in a ymm.
static TGTI __m256i wq_u(bool q8, const uint8_t *wb)
{
    if (q8)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wb + 2)), _mm256_set1_epi8((char)0x80));
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
    return _mm256_and_si256(_mm256_mask_srli_epi16(t, 0xFF00, t, 4), _mm256_set1_epi8(0x0F));
}

// Start value of the lanes: -off * (sum of the 4 activation quants of each
// lane), off 8 (Q4_0) or 128 (Q8_0).
static TGTI __m256i start(bool q8, __m256i x)
{
    const __m256i off = _mm256_set1_epi8(q8 ? (char)0x80 : 8);
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, x));
}

// The fp16 scales of blocks 0..g-1 from wb (block stride bs) as 8 f32
// (zero beyond g). Full groups: the eight fp16 words inserted into one xmm,
// widened by F16C; ymm / xmm instructions only. The earlier gather of the
// words by one or two zmm vpermt2w is cheaper on its own (4 vs 7 cycles per
// group in a loop of nothing else), but inside the products it made the
// whole Q4_0 / Q8_0 GEMV ~1.5x slower on Intel (Emerald Rapids; measured
// A/B, docs/kernels.md). That fits Intel cores closing port 1's vector ALU
// while 512-bit uops are in flight: the loop's ymm work then shares ports 0
// and 5 only. On Zen 4 it cost nothing.
static TGTI __m256 dw8(bool q8, const uint8_t *wb, int g)
{
    const size_t bs = q8 ? 34 : 18;
    if (g == 8) {
        __m128i h = _mm_cvtsi32_si128(ld16(wb));
        h = _mm_insert_epi16(h, ld16(wb + bs), 1);
        h = _mm_insert_epi16(h, ld16(wb + 2 * bs), 2);
        h = _mm_insert_epi16(h, ld16(wb + 3 * bs), 3);
        h = _mm_insert_epi16(h, ld16(wb + 4 * bs), 4);
        h = _mm_insert_epi16(h, ld16(wb + 5 * bs), 5);
        h = _mm_insert_epi16(h, ld16(wb + 6 * bs), 6);
        h = _mm_insert_epi16(h, ld16(wb + 7 * bs), 7);
        return _mm256_cvtph_ps(h);
    }
    uint16_t h[8] = {0};
    for (int k = 0; k < g; k++)
        h[k] = ld16(wb + k * bs);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

// ggml's hsum_float_8.
static TGTI float hsum8(__m256 a)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

enum { KQ_RMAX = 8, KQ_VMAX = 4 };

// R rows (row r at w + r * rb) x V vectors (quants xq[v], scales xd[v], nb
// blocks) -> y[v * ldy + r]. R, V are constants at every call site.
static TGTI void kq(bool q8, int R, int V, const uint8_t *w, size_t rb, const int8_t *const *xq,
                    const float *const *xd, int64_t nb, float *y, int64_t ldy)
{
    const size_t bs = q8 ? 34 : 18;
    __m256 acc[KQ_RMAX][KQ_VMAX];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            acc[r][v] = _mm256_setzero_ps();
    _Alignas(32) float dd[KQ_RMAX][KQ_VMAX][8];
    // Prefetch KZ_PREFETCH bytes ahead in each row's own progress (the AVX2
    // path's scheme, kern_x86_body.h): the R rows are consumed side by side,
    // so position p + KZ_PREFETCH of a row lies k = (p + KZ_PREFETCH) / rb
    // groups of R rows further on, at its own row's p + pfo with pfo =
    // KZ_PREFETCH + k * (R - 1) * rb; k grows incrementally (wrap). A fixed
    // distance past p would, for rows shorter than it, ask for lines of the
    // group's own next row, already being read, and none of the next group.
    size_t pfo = KZ_PREFETCH, wrap = rb; // wrap: where k next grows, + KZ_PREFETCH
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int g = nb - b0 < 8 ? (int)(nb - b0) : 8;
        const __mmask8 m = (__mmask8)((1u << g) - 1);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t *wg = w + r * rb + b0 * bs;
            const __m256 dw = dw8(q8, wg, g);
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                _mm256_store_ps(dd[r][v], _mm256_mul_ps(dw, _mm256_maskz_loadu_ps(m, xd[v] + b0)));
        }
        for (int k = 0; k < g; k++) {
            const int64_t b = b0 + k;
            const size_t pos = (size_t)b * bs;
            while (KZ_PREFETCH && pos + KZ_PREFETCH >= wrap) {
                pfo += (size_t)(R - 1) * rb;
                wrap += rb;
            }
            const bool pf = KZ_PREFETCH && (pos & 63) < bs; // once per 64-byte line
            __m256i x[KQ_VMAX], s0[KQ_VMAX];
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) {
                x[v] = _mm256_load_si256((const __m256i *)(xq[v] + b * QK));
                s0[v] = start(q8, x[v]);
            }
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                if (pf && q8)
                    _mm_prefetch((const char *)w + r * rb + pos + pfo, _MM_HINT_T0);
                else if (pf)
                    _mm_prefetch((const char *)w + r * rb + pos + pfo, KZ_HINT_Q4);
                const __m256i u = wq_u(q8, w + r * rb + b * bs);
#pragma GCC unroll 4
                for (int v = 0; v < V; v++) {
                    const __m256i s = _mm256_dpbusd_epi32(s0[v], u, x[v]);
                    acc[r][v] = _mm256_fmadd_ps(_mm256_set1_ps(dd[r][v][k]), _mm256_cvtepi32_ps(s), acc[r][v]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            y[v * ldy + r] = hsum8(acc[r][v]);
}

// ---- GEMV (one vector) -----------------------------------------------------------
//
// kg(): R rows x 1 vector, the GEMM kernel's scheme (kq() with V = 1) with
// fewer operations per (row, block), for the case where the product is
// compute-bound (fast memory):
// - Q4_0 weights by one AND of the 16 bytes broadcast to both 128-bit halves:
//   low half & 0x0F = the low nibbles (values 0..15), high half & 0xF0 = 16 x
//   the high nibbles. Lanes 4..7 then start from -128 x their activation sum
//   and hold 16 x the contract's int32 sum S (exact: |16 S| < 2^17), and
//   their accumulators 16 x the contract's: fma(dd, 16 S, 16 acc) =
//   16 fma(dd, S, acc) exactly, as scaling by 16 commutes with rounding
//   (every acc value is a multiple of 2^-48, far from the subnormals, and
//   below 2^70, far from overflow). The last step multiplies those lanes by
//   1/16 (exact) before the contract's reduction: the same bits.
// - the 8 blocks of a group unrolled, the scale products dd through memory
//   (embedded broadcasts of the fmas), the prefetches at fixed offsets of
//   each group (3 lines per row for Q4_0, 5 for Q8_0, at 64-byte spacing, so
//   every line of a row is covered), one per row in each of the group's
//   first blocks (all at the group's start measured slower from DRAM), no
//   branch per block.
#ifndef KG_R
#define KG_R 8 // rows per GEMV pass on AMD (16 and 12 measured no faster on Zen 4); Intel: kg_rows()
#endif
// GEMV's Q8_0 prefetch hint: T1 as Q4_0's. On Zen 4 (1 thread, streaming
// 512 MiB, A/B in one binary) T0 left Q8_0 at 0.40-0.59 of the read, T1
// 0.75-0.86: T0 fills L1 with lines the 8 rows need only later.
#ifndef KZ_HINT_Q8
#define KZ_HINT_Q8 _MM_HINT_T1
#endif
// Bytes ahead in each row's progress (kq()'s scheme): kg_prefetch() below,
// a run-time value because the best distance differs between cores.
enum { KG_RMAX = 16 };
static size_t kg_prefetch(void);

// 32 weights of a block as vpdpbusd's unsigned operand (Q4_0: lanes 4..7
// 16 x the high nibbles, see above; Q8_0: w + 128).
static TGTI __m256i kg_wq(bool q8, const uint8_t *wb)
{
    if (q8)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wb + 2)), _mm256_set1_epi8((char)0x80));
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
    return _mm256_and_si256(t, _mm256_set_epi64x((long long)0xF0F0F0F0F0F0F0F0ull, (long long)0xF0F0F0F0F0F0F0F0ull,
                                                 0x0F0F0F0F0F0F0F0Fll, 0x0F0F0F0F0F0F0F0Fll));
}

// Start value of the lanes: -off x (sum of the 4 activation quants of the
// lane); off 128 (Q8_0), 8 (Q4_0 lanes 0..3) or 128 (Q4_0 lanes 4..7).
static TGTI __m256i kg_start(bool q8, __m256i x)
{
    const __m256i off = q8 ? _mm256_set1_epi8((char)0x80)
                           : _mm256_set_epi64x((long long)0x8080808080808080ull, (long long)0x8080808080808080ull,
                                               0x0808080808080808ll, 0x0808080808080808ll);
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, x));
}

// R rows (row r at w + r * rb) x one vector (quants xq, scales xd, nb
// blocks) -> y[r]. R is a constant at every call site.
static TGTI void kg(bool q8, int R, const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, int64_t nb,
                    float *y)
{
    const size_t bs = q8 ? 34 : 18;
    const int npf = q8 ? 5 : 3; // prefetches per row and group: offsets 0, 64, .. (spacing <= 64 over groups)
    __m256 acc[KG_RMAX];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    _Alignas(32) float dd[KG_RMAX][8];
    // prefetch distance: kq()'s scheme, per group
    const size_t pf = kg_prefetch();
    size_t pfo = pf, wrap = rb;
    int64_t b0 = 0;
    for (; b0 + 8 <= nb; b0 += 8) {
        const size_t pos = (size_t)b0 * bs;
        while (pf && pos + pf >= wrap) {
            pfo += (size_t)(R - 1) * rb;
            wrap += rb;
        }
        const __m256 xd8 = _mm256_loadu_ps(xd + b0);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            const uint8_t *wg = w + r * rb + pos;
            _mm256_store_ps(dd[r], _mm256_mul_ps(dw8(q8, wg, 8), xd8));
        }
        // dd through memory: the fmas below take it as an embedded broadcast
        // (the compiler would otherwise extract it from the registers by
        // two shuffles per row and block)
        __asm__ volatile("" ::: "memory");
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m256i x = _mm256_load_si256((const __m256i *)(xq + (b0 + k) * QK));
            const __m256i s0 = kg_start(q8, x);
#pragma GCC unroll 16
            for (int r = 0; r < R; r++) {
                // spread over the group's blocks; the hint must be a constant
                // expression for clang, hence one call per type
                if (pf && k < npf && q8)
                    _mm_prefetch((const char *)w + r * rb + pos + pfo + 64 * k, KZ_HINT_Q8);
                else if (pf && k < npf)
                    _mm_prefetch((const char *)w + r * rb + pos + pfo + 64 * k, KZ_HINT_Q4);
                const __m256i s = _mm256_dpbusd_epi32(s0, kg_wq(q8, w + r * rb + pos + k * bs), x);
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dd[r][k]), _mm256_cvtepi32_ps(s), acc[r]);
            }
        }
    }
    if (b0 < nb) { // the last group, g < 8 blocks
        const int g = (int)(nb - b0);
        const size_t pos = (size_t)b0 * bs;
        const __m256 xd8 = _mm256_maskz_loadu_ps((__mmask8)((1u << g) - 1), xd + b0);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
            _mm256_store_ps(dd[r], _mm256_mul_ps(dw8(q8, w + r * rb + pos, g), xd8));
        __asm__ volatile("" ::: "memory");
        for (int k = 0; k < g; k++) {
            const __m256i x = _mm256_load_si256((const __m256i *)(xq + (b0 + k) * QK));
            const __m256i s0 = kg_start(q8, x);
#pragma GCC unroll 16
            for (int r = 0; r < R; r++) {
                const __m256i s = _mm256_dpbusd_epi32(s0, kg_wq(q8, w + r * rb + pos + k * bs), x);
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dd[r][k]), _mm256_cvtepi32_ps(s), acc[r]);
            }
        }
    }
    const __m256 unscale = q8 ? _mm256_set1_ps(1.0f) : _mm256_set_ps(0.0625f, 0.0625f, 0.0625f, 0.0625f, 1, 1, 1, 1);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
        y[r] = hsum8(q8 ? acc[r] : _mm256_mul_ps(acc[r], unscale));
}

// Rows per GEMV pass: KG_R (8), or 4 on Intel. There each row is its own
// stream of misses (the rows of a pass advance side by side), and fewer
// streams keep more of each one's lines in flight: on the Xeon with AMX of
// 2026-12-07 (DRAM, variants compiled side by side, six rounds) 4 rows
// read 0.72-0.77 (Q4_0) and 0.79-0.83 (Q8_0) of the 2-thread read against
// 8 rows' 0.69-0.74 and 0.74-0.78; 2 rows 0.64-0.67 / 0.76-0.79, 1 row
// 0.72 / 0.83-0.84 (Q4_0 then pays the activation loads of every block);
// docs/kernels.md has the sweep. On Zen
// 4 8 rows were measured the fastest. Every row's sum is the same whatever
// the pass, so the bits do not depend on it. PETREL_KG4=0 / 1 forces.
static int g_kg_rows = -1;
static int kg_rows(void)
{
    int v = __atomic_load_n(&g_kg_rows, __ATOMIC_RELAXED);
    if (v < 0) {
        int s = pt_env_switch("PETREL_KG4");
        if (s < 0)
            s = pt_cpu_vendor_id() == PT_CPU_INTEL;
        v = s ? 4 : 8;
        __atomic_store_n(&g_kg_rows, v, __ATOMIC_RELAXED);
    }
    return v;
}

// kg()'s prefetch distance in bytes (0: none): 2048 on AMD Zen 5 (family
// 0x1A), 4096 elsewhere; PETREL_Q_PREFETCH=N in the environment sets N.
// 4096 was measured the best on Zen 4 (docs/kernels.md); on a Zen 5 EPYC
// (2026-12-07: 1 MiB L2 per core, ~30 GB/s read per core; DRAM, 8 rows per
// pass, 1 and 2 threads, variants compiled side by side, 3 + 2 rounds
// interleaved) 2048 read Q4_0 at 0.81-0.86 of the 1-thread read against
// 4096's 0.58-0.77, and 0.66-0.73 of the 2-thread read against 0.48-0.68;
// 1024 and 3072 between, none (0) 0.43-0.60; Q8_0 within noise of 4096.
// Four later rounds (this variable, 2048 / 4096) found the two within the
// host's noise (0.53-0.90 / 0.67-0.81 of the 2-thread read): never worse.
static size_t g_kg_prefetch = (size_t)-1; // -1: not decided yet
static size_t kg_prefetch(void)
{
    size_t v = __atomic_load_n(&g_kg_prefetch, __ATOMIC_RELAXED);
    if (v == (size_t)-1) {
        const bool zen5 = pt_cpu_vendor_id() == PT_CPU_AMD && pt_cpu_family() >= 0x1a;
        v = (size_t)pt_env_prefetch("PETREL_Q_PREFETCH", zen5 ? 2048 : 4096);
        __atomic_store_n(&g_kg_prefetch, v, __ATOMIC_RELAXED);
    }
    return v;
}

int pt_qtile_set_kg4(int on)
{
    const int prev = kg_rows() == 4;
    __atomic_store_n(&g_kg_rows, on < 0 ? -1 : on ? 4 : 8, __ATOMIC_RELAXED);
    return prev;
}

// One type's tile: vectors in fours (GEMM: rows in fours, then one at a
// time), the remaining vectors one at a time (kg(): rows in kg_rows(), 4, 1).
static TGTI void qtile_t(bool q8, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x, int64_t v0,
                         int64_t nvec, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    const int8_t *xq[KQ_VMAX];
    const float *xd[KQ_VMAX];
    int64_t v = 0;
    for (; v + 4 <= nvec; v += 4) {
        for (int j = 0; j < 4; j++) {
            xq[j] = x->qs + (v0 + v + j) * nb * QK;
            xd[j] = x->d + (v0 + v + j) * nb;
        }
        int64_t r = 0;
        for (; r + 4 <= nrows; r += 4)
            kq(q8, 4, 4, w + r * rb, rb, xq, xd, nb, y + v * ldy + r, ldy);
        for (; r < nrows; r++)
            kq(q8, 1, 4, w + r * rb, rb, xq, xd, nb, y + v * ldy + r, ldy);
    }
    for (; v < nvec; v++) {
        const int8_t *q = x->qs + (v0 + v) * nb * QK;
        const float *d = x->d + (v0 + v) * nb;
        float *yv = y + v * ldy;
        int64_t r = 0;
        if (kg_rows() == 8)
            for (; r + KG_R <= nrows; r += KG_R)
                kg(q8, KG_R, w + r * rb, rb, q, d, nb, yv + r);
#if KG_R > 8
        for (; r + 8 <= nrows; r += 8)
            kg(q8, 8, w + r * rb, rb, q, d, nb, yv + r);
#endif
        for (; r + 4 <= nrows; r += 4)
            kg(q8, 4, w + r * rb, rb, q, d, nb, yv + r);
        for (; r < nrows; r++)
            kg(q8, 1, w + r * rb, rb, q, d, nb, yv + r);
    }
}

// ---- tiles ---------------------------------------------------------------------

// Rows x vectors (pt_qtile_fn), Q4_0 or Q8_0 weights.
TGT void pt_qtile_avx512(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x, int64_t v0,
                         int64_t nvec, float *y, int64_t ldy)
{
    assert(t == PT_Q4_0 || t == PT_Q8_0);
    assert(w && x && y && nrows >= 0 && nvec >= 0);
    if (t == PT_Q8_0)
        qtile_t(true, w, rb, nrows, x, v0, nvec, y, ldy);
    else
        qtile_t(false, w, rb, nrows, x, v0, nvec, y, ldy);
}

#endif

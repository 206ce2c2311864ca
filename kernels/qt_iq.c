// kernels/qt_iq.c — the i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS: dequantisation (ggml's dequantize_row_iq*
// bit for bit: the same f32 operations in the same order) and the scalar dot
// products with int8 activations, which define each type's numerics contract
// (qtypes.h); qt_iq_x86.c reproduces them bit for bit.
//
// The dot products follow ggml's x86 (AVX2) kernels operation for
// operation (the contract is above the scalar functions below), so a row's
// dot product equals llama.cpp's on x86 bit for bit. Activation quants must
// lie in [-127, 127] (as ggml's Q8_0 / Q8_K quantisers produce); the SIMD
// paths rely on it.
#include "kernels/qt_iq.h"
#include "kernels/qt_iq_grid.h"
#include "kernels/qtypes.h"
#include "kernels/kern_internal.h"
#include "kernels/qt_lanes.h"

#include <assert.h>
#include <math.h>

// Value j of grid entry `e` (little-endian byte j).
static inline uint8_t gbyte64(uint64_t e, int j) { return (uint8_t)(e >> (8 * j)); }
static inline uint8_t gbyte32(uint32_t e, int j) { return (uint8_t)(e >> (8 * j)); }

// ---- dequantisation --------------------------------------------------------

// 8 values db * grid value * sign, signs from bit j of `signs`.
static void put8(float *y, float db, uint64_t grid, uint8_t signs)
{
    for (int j = 0; j < 8; j++) {
        const float v = db * (float)gbyte64(grid, j);
        y[j] = signs >> j & 1 ? -v : v;
    }
}

// Same for two 4-value entries of a 3-bit grid.
static void put4x2(float *y, float db, uint32_t g1, uint32_t g2, uint8_t signs)
{
    for (int j = 0; j < 4; j++) {
        const float v1 = db * (float)gbyte32(g1, j), v2 = db * (float)gbyte32(g2, j);
        y[j] = signs >> j & 1 ? -v1 : v1;
        y[j + 4] = signs >> (j + 4) & 1 ? -v2 : v2;
    }
}

// IQ2_XXS: per 32-block 8 bytes: 4 grid indices (8 values each) and a u32
// of 4 x 7 sign bits | 4-bit scale s << 28; value = d * (0.5 + s) * 0.25 *
// grid byte, negated where its sign bit is set (the 8th from ksigns).
void pt_deq_iq2_xxs(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xxs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[i].d));
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = pt_iq_u32(q + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8)
                put8(y, db, pt_iq2xxs_grid[q[l]], pt_ksigns_iq2xs[(aux >> 7 * l) & 127]);
        }
    }
}

// IQ2_XS: one u16 per 8 values (9-bit grid index | 7-bit ksigns index << 9),
// a 4-bit scale per 16 values; value = d * (0.5 + s) * 0.25 * grid byte * sign.
void pt_deq_iq2_xs(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[i].d));
        for (int ib = 0; ib < 8; ib++) {
            const float db[2] = {d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = pt_iq_u16(x[i].qs + 2 * (4 * ib + l));
                put8(y, db[l / 2], pt_iq2xs_grid[q & 511], pt_ksigns_iq2xs[q >> 9]);
            }
        }
    }
}

// IQ2_S: 10-bit grid index (qs byte | 2 bits of qh) and a plain sign byte
// per 8 values, a 4-bit scale per 16; value as IQ2_XS.
void pt_deq_iq2_s(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_s *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[i].d));
        for (int ib = 0; ib < 8; ib++) {
            const float db[2] = {d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                const int idx = x[i].qs[4 * ib + l] | ((x[i].qh[ib] << (8 - 2 * l)) & 0x300);
                put8(y, db[l / 2], pt_iq2s_grid[idx], x[i].signs[4 * ib + l]);
            }
        }
    }
}

// IQ3_XXS: one 4-value grid index per byte, per 32-block a u32 of 4 x 7
// sign bits | scale s << 28; value = d * (0.5 + s) * 0.5 * grid byte * sign.
void pt_deq_iq3_xxs(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_xxs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[i].d));
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = pt_iq_u32(x[i].sas + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8)
                put4x2(y, db, pt_iq3xxs_grid[q[2 * l]], pt_iq3xxs_grid[q[2 * l + 1]],
                       pt_ksigns_iq2xs[(aux >> 7 * l) & 127]);
        }
    }
}

// Grid index of group l (0..3, 8 values) of 32-block ib in an IQ3_S block:
// two 4-value entries, their 9th bits in qh[ib] bits 2l and 2l+1.
static inline void iq3s_idx(const pt_blk_iq3_s *b, int ib, int l, int *i1, int *i2)
{
    const uint8_t *q = b->qs + 8 * ib;
    *i1 = q[2 * l] | ((b->qh[ib] << (8 - 2 * l)) & 256);
    *i2 = q[2 * l + 1] | ((b->qh[ib] << (7 - 2 * l)) & 256);
}

// IQ3_S: 9-bit 4-value grid indices (qs byte | one qh bit), plain sign
// bytes, a 4-bit scale s per 32; value = d * (1 + 2 s) * grid byte * sign.
void pt_deq_iq3_s(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_s *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[i].d));
        for (int ib = 0; ib < 8; ib++) {
            const int sc = ib % 2 ? x[i].scales[ib / 2] >> 4 : x[i].scales[ib / 2] & 0xf;
            const float db = d * (float)(1 + 2 * sc);
            for (int l = 0; l < 4; l++, y += 8) {
                int i1, i2;
                iq3s_idx(&x[i], ib, l, &i1, &i2);
                put4x2(y, db, pt_iq3s_grid[i1], pt_iq3s_grid[i2], x[i].signs[4 * ib + l]);
            }
        }
    }
}

// IQ1_S: 11-bit grid index per 8 values (qs byte | 3 bits of the block's
// u16 qh), per 32-block a 3-bit scale s and a delta sign in qh;
// value = d * (2 s + 1) * (grid value + delta), delta = +-1/8.
void pt_deq_iq1_s(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_s *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[i].d));
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t qh = pt_iq_u16(x[i].qh + 2 * ib);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -PT_IQ1_DELTA : PT_IQ1_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = pt_iq1s_grid[x[i].qs[4 * ib + l] | (((qh >> 3 * l) & 7) << 8)];
                for (int j = 0; j < 8; j++)
                    y[j] = dl * ((float)(int8_t)gbyte64(g, j) + delta);
            }
        }
    }
}

// IQ1_M group l (0..3) of 32-block ib: grid index and delta sign.
static inline int iq1m_idx(const pt_blk_iq1_m *b, int ib, int l)
{
    const uint8_t qh = b->qh[2 * ib + l / 2];
    return b->qs[4 * ib + l] | ((l % 2 ? qh << 4 : qh << 8) & 0x700);
}
static inline bool iq1m_neg(const pt_blk_iq1_m *b, int ib, int l)
{
    return b->qh[2 * ib + l / 2] & (l % 2 ? 0x80 : 0x08);
}
// 3-bit scale of half h (0: values 0..15, 1: 16..31) of 32-block ib.
static inline int iq1m_ls(const pt_blk_iq1_m *b, int ib, int h)
{
    const uint16_t sc = pt_iq_u16(b->scales + 2 * (ib / 2));
    return 2 * ((sc >> (6 * (ib % 2) + 3 * h)) & 7) + 1;
}

// IQ1_M: as IQ1_S with a delta sign per 8 values (bit 3 of each qh nibble)
// and a 3-bit scale per 16; d is an fp16 spread over the scale words' top
// nibbles.
void pt_deq_iq1_m(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_m *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq1m_scale(&x[i]));
        for (int ib = 0; ib < 8; ib++) {
            const float dl[2] = {d * (float)iq1m_ls(&x[i], ib, 0), d * (float)iq1m_ls(&x[i], ib, 1)};
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = pt_iq1s_grid[iq1m_idx(&x[i], ib, l)];
                const float delta = iq1m_neg(&x[i], ib, l) ? -PT_IQ1_DELTA : PT_IQ1_DELTA;
                for (int j = 0; j < 8; j++)
                    y[j] = dl[l / 2] * ((float)(int8_t)gbyte64(g, j) + delta);
            }
        }
    }
}

// IQ4_NL: 32-value blocks of fp16 d and 16 nibble bytes; value = d * level.
void pt_deq_iq4_nl(const void *src, float *y, int64_t n)
{
    assert(n % QK == 0);
    const pt_blk_iq4_nl *x = src;
    for (int64_t b = 0; b < n / QK; b++, y += QK) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[b].d));
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)pt_kvalues_iq4nl[x[b].qs[j] & 0xf];
            y[j + 16] = d * (float)pt_kvalues_iq4nl[x[b].qs[j] >> 4];
        }
    }
}

// 6-bit scale of 32-block ib of an IQ4_XS block, minus its offset 32.
static inline int iq4xs_ls(const pt_blk_iq4_xs *b, int ib)
{
    const int lo = (b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf;
    const int hi = (pt_iq_u16(b->scales_h) >> 2 * ib) & 3;
    return (lo | hi << 4) - 32;
}

// IQ4_XS: IQ4_NL's levels with a 6-bit scale l per 32 (offset 32) under one
// fp16 d per 256; value = d * (l - 32) * level.
void pt_deq_iq4_xs(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = pt_fp16_to_f32(pt_iq_u16(x[i].d));
        for (int ib = 0; ib < 8; ib++, y += 32) {
            const float dl = d * (float)iq4xs_ls(&x[i], ib);
            const uint8_t *q = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)pt_kvalues_iq4nl[q[j] & 0xf];
                y[j + 16] = dl * (float)pt_kvalues_iq4nl[q[j] >> 4];
            }
        }
    }
}

// ---- scalar dot products ---------------------------------------------------
//
// Contract: the f32 arithmetic of ggml's x86 (AVX2) kernels
// ggml_vec_dot_iq*_q8_K and ggml_vec_dot_iq4_nl_q8_0, operation for
// operation, so that a row's dot product is bit-identical to llama.cpp's on
// x86 (llama.cpp has no AVX-512 code for these; checked against the built
// libggml-cpu, tests/fixtures/llamacpp_vdot_iq).
//
// ggml works on 32-value registers: register r (0..7) holds values
// 32r .. 32r + 31 of a super-block, and its int32 lane l (0..7) sums
// positions 32r + 4l .. 32r + 4l + 3. So every super-block gives eight exact
// int32 lane sums
//   sumi_l = sum_r ls(32r + 4l) * sum_{v<4} w(32r + 4l + v) * q8(32r + 4l + v)
// (w the signed weight integer of the value: grid byte times sign, IQ4
// level, IQ1 grid value in {-1, 0, 1}; ls the integer scale of its 16-value
// group: 2 s + 1, or l - 32 for IQ4_XS), and eight f32 accumulators acc[l]
// (from +0) take, per super-block, with d = d_w * x.d (fp16 weight scale
// times the Q8_K scale, one f32 product):
//   acc[l] = fmaf(d, (float)sumi_l, acc[l])
// The result is c * hsum(acc), hsum = ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7))
// (ggml's hsum_float_8), c = 0.125f (IQ2_XXS, IQ2_XS, IQ2_S), 0.25f
// (IQ3_XXS), 1 (IQ3_S, IQ4_XS; no multiplication). The IQ1 types add their
// delta term (value = ls * (g +- 1/8)) in ggml's own way:
//   IQ1_S: one int per super-block, sumi1 = sum_ib e_ib * ls_ib *
//          (bsum_2ib + bsum_2ib+1) (e = +-1 the block's delta sign, bsums
//          of the Q8_K block), and one f32 accum1 = fmaf(d, (float)sumi1,
//          accum1) (ggml's `accum1 += d * sumi1`, contracted to an fma by
//          its -O3 -march=native build: that is what matches);
//          result = hsum(acc) + 0.125f * accum1
//   IQ1_M: a second set of lane sums t_l = sum_r ls * sum_{v<4} e * q8 (e
//          the delta sign of the value's 8-group) into a second set of
//          accumulators acc2[l] = fmaf(d, (float)t_l, acc2[l]);
//          result = hsum(acc) + 0.125f * hsum(acc2)
// IQ4_NL (32-value blocks, Q8_0) in ggml's pairs: block b's lanes
// p_l = sum_{v<4} w(4l + v) * q8(4l + v), dd_b = d_x[b] * d_w[b] (exact);
// even blocks into acc1, odd ones into acc2 (acc[l] = fmaf(dd_b,
// (float)p_l, acc[l])) over the first 2 floor(nb / 2) blocks; s =
// hsum(acc1 + acc2, lane by lane); an odd last block adds
// s = s + dd * (float)p (two roundings), p its whole exact sum.
// Every integer sum fits int32 with room (|w| <= 127, |q8| <= 127, ls <= 31).

// acc[l] = fmaf(d, (float)sumi[l], acc[l]) for the eight lanes.
static void lanes_fma(float d, const int32_t sumi[8], float acc[8])
{
    for (int l = 0; l < 8; l++)
        acc[l] = fmaf(d, (float)sumi[l], acc[l]);
}

// 8 values grid byte * sign into w (signs from bit j of `signs`).
static void unpack8(int8_t *w, uint64_t grid, uint8_t signs)
{
    for (int j = 0; j < 8; j++) {
        const int v = gbyte64(grid, j);
        w[j] = (int8_t)(signs >> j & 1 ? -v : v);
    }
}

// Signed weights and 16-value scales of each type's super-block.
static void unpack_iq2_xxs(const void *blk, int8_t w[QK_K], int32_t ls[16])
{
    const pt_blk_iq2_xxs *b = blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b->qs + 8 * ib;
        const uint32_t aux = pt_iq_u32(q + 4);
        for (int l = 0; l < 4; l++)
            unpack8(w + 32 * ib + 8 * l, pt_iq2xxs_grid[q[l]], pt_ksigns_iq2xs[(aux >> 7 * l) & 127]);
        ls[2 * ib] = ls[2 * ib + 1] = (int32_t)(2 * (aux >> 28) + 1);
    }
}

static void unpack_iq2_xs(const void *blk, int8_t w[QK_K], int32_t ls[16])
{
    const pt_blk_iq2_xs *b = blk;
    for (int g = 0; g < 32; g++) {
        const uint16_t q = pt_iq_u16(b->qs + 2 * g);
        unpack8(w + 8 * g, pt_iq2xs_grid[q & 511], pt_ksigns_iq2xs[q >> 9]);
    }
    for (int h = 0; h < 16; h++)
        ls[h] = 2 * (h % 2 ? b->scales[h / 2] >> 4 : b->scales[h / 2] & 0xf) + 1;
}

static void unpack_iq2_s(const void *blk, int8_t w[QK_K], int32_t ls[16])
{
    const pt_blk_iq2_s *b = blk;
    for (int ib = 0; ib < 8; ib++)
        for (int l = 0; l < 4; l++) {
            const int idx = b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
            unpack8(w + 32 * ib + 8 * l, pt_iq2s_grid[idx], b->signs[4 * ib + l]);
        }
    for (int h = 0; h < 16; h++)
        ls[h] = 2 * (h % 2 ? b->scales[h / 2] >> 4 : b->scales[h / 2] & 0xf) + 1;
}

static void unpack_iq3_xxs(const void *blk, int8_t w[QK_K], int32_t ls[16])
{
    const pt_blk_iq3_xxs *b = blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b->qs + 8 * ib;
        const uint32_t aux = pt_iq_u32(b->sas + 4 * ib);
        for (int l = 0; l < 4; l++) {
            const uint64_t g = (uint64_t)pt_iq3xxs_grid[q[2 * l]] | (uint64_t)pt_iq3xxs_grid[q[2 * l + 1]] << 32;
            unpack8(w + 32 * ib + 8 * l, g, pt_ksigns_iq2xs[(aux >> 7 * l) & 127]);
        }
        ls[2 * ib] = ls[2 * ib + 1] = (int32_t)(2 * (aux >> 28) + 1);
    }
}

static void unpack_iq3_s(const void *blk, int8_t w[QK_K], int32_t ls[16])
{
    const pt_blk_iq3_s *b = blk;
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            int i1, i2;
            iq3s_idx(b, ib, l, &i1, &i2);
            const uint64_t g = (uint64_t)pt_iq3s_grid[i1] | (uint64_t)pt_iq3s_grid[i2] << 32;
            unpack8(w + 32 * ib + 8 * l, g, b->signs[4 * ib + l]);
        }
        const int sc = ib % 2 ? b->scales[ib / 2] >> 4 : b->scales[ib / 2] & 0xf;
        ls[2 * ib] = ls[2 * ib + 1] = 2 * sc + 1;
    }
}

static void unpack_iq4_xs(const void *blk, int8_t w[QK_K], int32_t ls[16])
{
    const pt_blk_iq4_xs *b = blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b->qs + 16 * ib;
        for (int j = 0; j < 16; j++) {
            w[32 * ib + j] = pt_kvalues_iq4nl[q[j] & 0xf];
            w[32 * ib + j + 16] = pt_kvalues_iq4nl[q[j] >> 4];
        }
        ls[2 * ib] = ls[2 * ib + 1] = iq4xs_ls(b, ib);
    }
}

// The lane accumulators of the types with no delta term: super-block i
// (`bytes` long, its fp16 d_w in its first two bytes) unpacked by `un`,
// its lanes meeting d = d_w * x.d.
typedef void (*unpack_fn)(const void *blk, int8_t w[QK_K], int32_t ls[16]);

static void lane_acc(const void *w, size_t bytes, unpack_fn un, const block_q8_K *y, int64_t n, float acc[8])
{
    assert(n % QK_K == 0);
    int8_t wv[QK_K];
    int32_t ls[16], sumi[8];
    for (int l = 0; l < 8; l++)
        acc[l] = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)i * bytes;
        un(blk, wv, ls);
        qt_lane_sums(wv, ls, y[i].qs, sumi);
        lanes_fma(pt_fp16_to_f32(pt_iq_u16(blk)) * y[i].d, sumi, acc);
    }
}

float pt_vdot_iq2_xxs_scalar(const void *w, const void *xq, int64_t n)
{
    float acc[8];
    lane_acc(w, sizeof(pt_blk_iq2_xxs), unpack_iq2_xxs, xq, n, acc);
    return 0.125f * qt_hsum8(acc);
}

float pt_vdot_iq2_xs_scalar(const void *w, const void *xq, int64_t n)
{
    float acc[8];
    lane_acc(w, sizeof(pt_blk_iq2_xs), unpack_iq2_xs, xq, n, acc);
    return 0.125f * qt_hsum8(acc);
}

float pt_vdot_iq2_s_scalar(const void *w, const void *xq, int64_t n)
{
    float acc[8];
    lane_acc(w, sizeof(pt_blk_iq2_s), unpack_iq2_s, xq, n, acc);
    return 0.125f * qt_hsum8(acc);
}

float pt_vdot_iq3_xxs_scalar(const void *w, const void *xq, int64_t n)
{
    float acc[8];
    lane_acc(w, sizeof(pt_blk_iq3_xxs), unpack_iq3_xxs, xq, n, acc);
    return 0.25f * qt_hsum8(acc);
}

float pt_vdot_iq3_s_scalar(const void *w, const void *xq, int64_t n)
{
    float acc[8];
    lane_acc(w, sizeof(pt_blk_iq3_s), unpack_iq3_s, xq, n, acc);
    return qt_hsum8(acc);
}

float pt_vdot_iq4_xs_scalar(const void *w, const void *xq, int64_t n)
{
    float acc[8];
    lane_acc(w, sizeof(pt_blk_iq4_xs), unpack_iq4_xs, xq, n, acc);
    return qt_hsum8(acc);
}

// IQ1_S: grid values in w, one scale per 32-block; the delta term from the
// Q8_K block sums, as ggml (the bsums must be those of qs, as every Q8_K
// quantiser writes them).
float pt_vdot_iq1_s_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_s *x = w;
    const block_q8_K *y = xq;
    int8_t wv[QK_K];
    int32_t ls[16], sumi[8];
    float acc[8] = {0}, accum1 = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t sumi1 = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t qh = pt_iq_u16(x[i].qh + 2 * ib);
            for (int l = 0; l < 4; l++) {
                const uint64_t g = pt_iq1s_grid[x[i].qs[4 * ib + l] | (((qh >> 3 * l) & 7) << 8)];
                for (int j = 0; j < 8; j++)
                    wv[32 * ib + 8 * l + j] = (int8_t)gbyte64(g, j);
            }
            ls[2 * ib] = ls[2 * ib + 1] = 2 * ((qh >> 12) & 7) + 1;
            const int32_t bs = y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1];
            sumi1 += (qh & 0x8000 ? -bs : bs) * ls[2 * ib];
        }
        qt_lane_sums(wv, ls, y[i].qs, sumi);
        const float d = y[i].d * pt_fp16_to_f32(pt_iq_u16(x[i].d));
        lanes_fma(d, sumi, acc);
        accum1 = fmaf(d, (float)sumi1, accum1);
    }
    return qt_hsum8(acc) + 0.125f * accum1;
}

// IQ1_M: grid values and, separately, the delta signs (+-1 per 8-group)
// as two sets of lanes with the same 16-value scales.
float pt_vdot_iq1_m_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_m *x = w;
    const block_q8_K *y = xq;
    int8_t wv[QK_K], ev[QK_K];
    int32_t ls[16], sumi[8], sumt[8];
    float acc[8] = {0}, acc2[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int ib = 0; ib < 8; ib++) {
            for (int l = 0; l < 4; l++) {
                const uint64_t g = pt_iq1s_grid[iq1m_idx(&x[i], ib, l)];
                const int8_t e = iq1m_neg(&x[i], ib, l) ? -1 : 1;
                for (int j = 0; j < 8; j++) {
                    wv[32 * ib + 8 * l + j] = (int8_t)gbyte64(g, j);
                    ev[32 * ib + 8 * l + j] = e;
                }
            }
            ls[2 * ib] = iq1m_ls(&x[i], ib, 0);
            ls[2 * ib + 1] = iq1m_ls(&x[i], ib, 1);
        }
        qt_lane_sums(wv, ls, y[i].qs, sumi);
        qt_lane_sums(ev, ls, y[i].qs, sumt);
        const float d = y[i].d * pt_fp16_to_f32(pt_iq1m_scale(&x[i]));
        lanes_fma(d, sumi, acc);
        lanes_fma(d, sumt, acc2);
    }
    return qt_hsum8(acc) + 0.125f * qt_hsum8(acc2);
}

// IQ4_NL block b's four-value lane sums p[8] and its whole sum.
static int32_t iq4nl_lanes(const pt_blk_iq4_nl *b, const int8_t *q8, int32_t p[8])
{
    int8_t wv[QK];
    for (int j = 0; j < 16; j++) {
        wv[j] = pt_kvalues_iq4nl[b->qs[j] & 0xf];
        wv[j + 16] = pt_kvalues_iq4nl[b->qs[j] >> 4];
    }
    int32_t s = 0;
    for (int l = 0; l < 8; l++) {
        p[l] = 0;
        for (int v = 0; v < 4; v++)
            p[l] += wv[4 * l + v] * q8[4 * l + v];
        s += p[l];
    }
    return s;
}

float pt_vdot_iq4_nl_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK == 0);
    const pt_blk_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    const int64_t nb = n / QK, npair = nb / 2 * 2;
    float acc[2][8] = {{0}}, sum[8];
    int32_t p[8];
    for (int64_t b = 0; b < npair; b++) {
        iq4nl_lanes(&x[b], y[b].qs, p);
        lanes_fma(pt_fp16_to_f32(y[b].d) * pt_fp16_to_f32(pt_iq_u16(x[b].d)), p, acc[b % 2]);
    }
    for (int l = 0; l < 8; l++)
        sum[l] = acc[0][l] + acc[1][l];
    float s = qt_hsum8(sum);
    if (nb > npair) {
        const int64_t b = npair;
        const int32_t t = iq4nl_lanes(&x[b], y[b].qs, p);
        // ggml's `sumf += d * (sumi1 + sumi2)`: a multiply and an add (not
        // contracted to an fma there: that is what matches)
        s += pt_fp16_to_f32(y[b].d) * pt_fp16_to_f32(pt_iq_u16(x[b].d)) * (float)t;
    }
    return s;
}

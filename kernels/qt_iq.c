// kernels/qt_iq.c — the i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS: dequantisation (ggml's dequantize_row_iq*
// bit for bit: the same f32 operations in the same order) and the scalar dot
// products with int8 activations, which define each type's numerics contract
// (qtypes.h); qt_iq_x86.c reproduces them bit for bit.
//
// All super-block dots share one shape: the integer part of a super-block
// is an exact int32 `isum` (bounds below each function), and
//     acc = fmaf(ds, (float)isum, acc)      (acc starts at +0)
// with ds = c * d_w * x.d evaluated left to right, c a power of two that
// the type's scale encoding implies (so c * d_w is exact). The result is acc
// after the last super-block. Activation quants must lie in [-127, 127]
// (as ggml's Q8_0 / Q8_K quantisers produce); the SIMD paths rely on it.
#include "kernels/qt_iq.h"
#include "kernels/qt_iq_grid.h"
#include "kernels/qtypes.h"
#include "kernels/kern_internal.h"

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

// sum_j grid value j * sign j * q8[j] over 8 values (exact).
static inline int32_t dot8(uint64_t grid, uint8_t signs, const int8_t *q8)
{
    int32_t s = 0;
    for (int j = 0; j < 8; j++) {
        const int32_t v = gbyte64(grid, j) * q8[j];
        s += signs >> j & 1 ? -v : v;
    }
    return s;
}

static inline int32_t dot4x2(uint32_t g1, uint32_t g2, uint8_t signs, const int8_t *q8)
{
    return dot8((uint64_t)g1 | (uint64_t)g2 << 32, signs, q8);
}

// IQ2_XXS · Q8_K. Per super-block: s_ib = exact dot of 32-block ib's signed
// grid values with its 32 quants, ls_ib = 2 * scale + 1 (1..31);
// isum = sum_ib ls_ib * s_ib (|isum| <= 8 * 31 * 32 * 43 * 127 < 2^31);
// acc = fmaf(0.125f * d_w * x.d, (float)isum, acc).
float pt_vdot_iq2_xxs_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xxs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = pt_iq_u32(q + 4);
            int32_t s = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                s += dot8(pt_iq2xxs_grid[q[l]], pt_ksigns_iq2xs[(aux >> 7 * l) & 127], q8);
            isum += (int32_t)(2 * (aux >> 28) + 1) * s;
        }
        const float ds = 0.125f * pt_fp16_to_f32(pt_iq_u16(x[i].d)) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

// IQ2_XS · Q8_K. Per super-block: s_h = exact dot of each 16-value half
// (h = 0..15) with its quants, ls_h = 2 * its 4-bit scale + 1;
// isum = sum_h ls_h * s_h (< 2^31 as IQ2_XXS);
// acc = fmaf(0.125f * d_w * x.d, (float)isum, acc).
float pt_vdot_iq2_xs_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_xs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int h = 0; h < 16; h++) {
            int32_t s = 0;
            for (int l = 0; l < 2; l++, q8 += 8) {
                const uint16_t q = pt_iq_u16(x[i].qs + 2 * (2 * h + l));
                s += dot8(pt_iq2xs_grid[q & 511], pt_ksigns_iq2xs[q >> 9], q8);
            }
            const int sc = h % 2 ? x[i].scales[h / 2] >> 4 : x[i].scales[h / 2] & 0xf;
            isum += (2 * sc + 1) * s;
        }
        const float ds = 0.125f * pt_fp16_to_f32(pt_iq_u16(x[i].d)) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

// IQ2_S · Q8_K: exactly the IQ2_XS sequence (16-value halves, ls_h =
// 2 * scale + 1, isum = sum_h ls_h * s_h, acc = fmaf(0.125f * d_w * x.d,
// (float)isum, acc)); grid index 10 bits, signs stored as plain bytes.
float pt_vdot_iq2_s_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq2_s *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int h = 0; h < 16; h++) {
            const int ib = h / 2;
            int32_t s = 0;
            for (int l = 2 * (h % 2); l < 2 * (h % 2) + 2; l++, q8 += 8) {
                const int idx = x[i].qs[4 * ib + l] | ((x[i].qh[ib] << (8 - 2 * l)) & 0x300);
                s += dot8(pt_iq2s_grid[idx], x[i].signs[4 * ib + l], q8);
            }
            const int sc = h % 2 ? x[i].scales[ib] >> 4 : x[i].scales[ib] & 0xf;
            isum += (2 * sc + 1) * s;
        }
        const float ds = 0.125f * pt_fp16_to_f32(pt_iq_u16(x[i].d)) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

// IQ3_XXS · Q8_K. Per super-block: s_ib exact per 32-block, ls_ib =
// 2 * scale + 1; isum = sum_ib ls_ib * s_ib (<= 8 * 31 * 32 * 62 * 127 < 2^31);
// acc = fmaf(0.25f * d_w * x.d, (float)isum, acc).
float pt_vdot_iq3_xxs_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_xxs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const uint32_t aux = pt_iq_u32(x[i].sas + 4 * ib);
            int32_t s = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                s += dot4x2(pt_iq3xxs_grid[q[2 * l]], pt_iq3xxs_grid[q[2 * l + 1]],
                            pt_ksigns_iq2xs[(aux >> 7 * l) & 127], q8);
            isum += (int32_t)(2 * (aux >> 28) + 1) * s;
        }
        const float ds = 0.25f * pt_fp16_to_f32(pt_iq_u16(x[i].d)) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

// IQ3_S · Q8_K. Per super-block: s_ib exact per 32-block, ls_ib =
// 2 * scale + 1 (1..31); isum = sum_ib ls_ib * s_ib (<= 8 * 31 * 32 * 15 * 127);
// acc = fmaf(d_w * x.d, (float)isum, acc).
float pt_vdot_iq3_s_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq3_s *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int32_t s = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                int i1, i2;
                iq3s_idx(&x[i], ib, l, &i1, &i2);
                s += dot4x2(pt_iq3s_grid[i1], pt_iq3s_grid[i2], x[i].signs[4 * ib + l], q8);
            }
            const int sc = ib % 2 ? x[i].scales[ib / 2] >> 4 : x[i].scales[ib / 2] & 0xf;
            isum += (2 * sc + 1) * s;
        }
        const float ds = pt_fp16_to_f32(pt_iq_u16(x[i].d)) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

// sum_j grid value j * q8[j] over 8 signed IQ1 grid values (exact).
static inline int32_t dot8s(uint64_t grid, const int8_t *q8)
{
    int32_t s = 0;
    for (int j = 0; j < 8; j++)
        s += (int8_t)gbyte64(grid, j) * q8[j];
    return s;
}

// IQ1_S · Q8_K. Value = ls * (g + delta), delta = +-1/8 per 32-block, so
// with exact integers s_ib = sum g * q8 over the 32-block, b_ib = the sum
// of its quants (summed from qs, not taken from x.bsums, so that no path
// depends on the bsums agreeing with qs), e_ib = +1 / -1 (delta sign) and
// ls_ib = 2 * scale + 1:
//   isum = sum_ib ls_ib * (8 * s_ib + e_ib * b_ib)   (|isum| <= 8*15*9*4064)
//   acc = fmaf(0.125f * d_w * x.d, (float)isum, acc).
// The delta term is thus integer too (8 * delta = +-1), and exact.
float pt_vdot_iq1_s_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_s *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t qh = pt_iq_u16(x[i].qh + 2 * ib);
            int32_t s = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                s += dot8s(pt_iq1s_grid[x[i].qs[4 * ib + l] | (((qh >> 3 * l) & 7) << 8)], q8);
            int32_t b = 0;
            for (int j = 0; j < 32; j++)
                b += y[i].qs[32 * ib + j];
            const int32_t ls = 2 * ((qh >> 12) & 7) + 1;
            isum += ls * (8 * s + (qh & 0x8000 ? -b : b));
        }
        const float ds = 0.125f * pt_fp16_to_f32(pt_iq_u16(x[i].d)) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

// IQ1_M · Q8_K. As IQ1_S with the delta sign per 8 values and the scale
// per 16: for each half h (16 values) of each 32-block, s_h = sum g * q8,
// t_h = sum over its two 8-groups of e_group * (sum of the group's quants),
// ls_h = 2 * scale + 1 (1..15):
//   isum = sum_h ls_h * (8 * s_h + t_h);
//   acc = fmaf(0.125f * d_w * x.d, (float)isum, acc), d_w the fp16 scale
// assembled from the top nibbles of the 4 scale words.
float pt_vdot_iq1_m_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq1_m *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            for (int h = 0; h < 2; h++) {
                int32_t s = 0, t = 0;
                for (int l = 2 * h; l < 2 * h + 2; l++, q8 += 8) {
                    s += dot8s(pt_iq1s_grid[iq1m_idx(&x[i], ib, l)], q8);
                    int32_t b = 0;
                    for (int j = 0; j < 8; j++)
                        b += q8[j];
                    t += iq1m_neg(&x[i], ib, l) ? -b : b;
                }
                isum += iq1m_ls(&x[i], ib, h) * (8 * s + t);
            }
        }
        const float ds = 0.125f * pt_fp16_to_f32(pt_iq1m_scale(&x[i])) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

// sum_j level(q[j] nibbles) * q8[j] over one 32-value IQ4 block (exact).
static inline int32_t dot_iq4(const uint8_t *q, const int8_t *q8)
{
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += pt_kvalues_iq4nl[q[j] & 0xf] * q8[j] + pt_kvalues_iq4nl[q[j] >> 4] * q8[j + 16];
    return s;
}

// IQ4_NL · Q8_0: the 32-value-block contract of qtypes.h: s_b = exact dot
// of block b's levels with its quants, dd_b = d_w[b] * d_x[b] (exact),
// acc[b % 8] = fmaf((float)s_b, dd_b, acc[b % 8]), result = reduce8(acc).
float pt_vdot_iq4_nl_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK == 0);
    const pt_blk_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    float acc[8] = {0};
    for (int64_t b = 0; b < n / QK; b++) {
        const float dd = pt_fp16_to_f32(pt_iq_u16(x[b].d)) * pt_fp16_to_f32(y[b].d);
        acc[b % 8] = fmaf((float)dot_iq4(x[b].qs, y[b].qs), dd, acc[b % 8]);
    }
    return pt_reduce8(acc);
}

// IQ4_XS · Q8_K. Per super-block: s_ib exact per 32-block, l_ib = its 6-bit
// scale - 32 (-32..31); isum = sum_ib l_ib * s_ib (<= 8 * 32 * 32 * 127 * 127);
// acc = fmaf(d_w * x.d, (float)isum, acc).
float pt_vdot_iq4_xs_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_iq4_xs *x = w;
    const block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++)
            isum += iq4xs_ls(&x[i], ib) * dot_iq4(x[i].qs + 16 * ib, y[i].qs + 32 * ib);
        const float ds = pt_fp16_to_f32(pt_iq_u16(x[i].d)) * y[i].d;
        acc = fmaf(ds, (float)isum, acc);
    }
    return acc;
}

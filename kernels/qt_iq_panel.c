// kernels/qt_iq_panel.c — the i-quant dot products in the per-output float
// sequence of llama.cpp's IQ panel GEMM (ggml-cpu/iqp.cpp), which ggml's
// mul_mat runs instead of vec_dot for IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S and IQ4_XS when the product has 8 or more activation rows
// (a dense matrix times >= 8 vectors; in mul_mat_id an expert given >= 8
// rows), on AVX2 machines. qt_iq_panel_x86.c has the SIMD paths, bit for
// bit the same. Not in the traits table (which holds vec_dot's sequence,
// qt_iq.c): for a caller that mirrors llama.cpp's batched products.
//
// Sequence (iqp.cpp's gemm / gemv kernels): per super-block the exact int32
// isum = sum over 16-value groups of the integer scale times the group's
// dot of the integer weights with the Q8_K quants (IQ1: weights 8 g +- 1,
// the delta folded in), and one f32 accumulator from +0:
//     acc = fmaf(dfac * x.d, (float)isum, acc),  dfac = d_w * c
// c = 0.125 (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M), 0.25 (IQ3_XXS), 1
// (IQ3_S, IQ4_XS): a power of two, so dfac is exact. The result is acc.
// Activation quants must lie in [-127, 127].
#include "kernels/qt_iq.h"
#include "kernels/qt_iq_grid.h"
#include "kernels/qtypes.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>

static inline uint8_t gbyte64(uint64_t e, int j) { return (uint8_t)(e >> (8 * j)); }

// Grid index of group l (0..3, 8 values) of 32-block ib in an IQ3_S block:
// two 4-value entries, their 9th bits in qh[ib] bits 2l and 2l+1.
static inline void iq3s_idx(const pt_blk_iq3_s *b, int ib, int l, int *i1, int *i2)
{
    const uint8_t *q = b->qs + 8 * ib;
    *i1 = q[2 * l] | ((b->qh[ib] << (8 - 2 * l)) & 256);
    *i2 = q[2 * l + 1] | ((b->qh[ib] << (7 - 2 * l)) & 256);
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

// 6-bit scale of 32-block ib of an IQ4_XS block, minus its offset 32.
static inline int iq4xs_ls(const pt_blk_iq4_xs *b, int ib)
{
    const int lo = (b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf;
    const int hi = (pt_iq_u16(b->scales_h) >> 2 * ib) & 3;
    return (lo | hi << 4) - 32;
}

// ---- dot products ----------------------------------------------------------

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
float pt_vdot_iq2_xxs_panel_scalar(const void *w, const void *xq, int64_t n)
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
float pt_vdot_iq2_xs_panel_scalar(const void *w, const void *xq, int64_t n)
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
float pt_vdot_iq2_s_panel_scalar(const void *w, const void *xq, int64_t n)
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
float pt_vdot_iq3_xxs_panel_scalar(const void *w, const void *xq, int64_t n)
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
float pt_vdot_iq3_s_panel_scalar(const void *w, const void *xq, int64_t n)
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
float pt_vdot_iq1_s_panel_scalar(const void *w, const void *xq, int64_t n)
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
float pt_vdot_iq1_m_panel_scalar(const void *w, const void *xq, int64_t n)
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

// IQ4_XS · Q8_K. Per super-block: s_ib exact per 32-block, l_ib = its 6-bit
// scale - 32 (-32..31); isum = sum_ib l_ib * s_ib (<= 8 * 32 * 32 * 127 * 127);
// acc = fmaf(d_w * x.d, (float)isum, acc).
float pt_vdot_iq4_xs_panel_scalar(const void *w, const void *xq, int64_t n)
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

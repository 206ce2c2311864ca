// kernels/qt_quantize_iq4.c — the non-linear 4-bit quantisers IQ4_NL and
// IQ4_XS as llama-quantize runs them without an importance matrix:
// ggml_quantize_chunk -> quantize_iq4_nl / quantize_iq4_xs(..., NULL), both
// with the best-scale search over +-7 steps (ntry = 7). Note: ggml's
// quantize_row_iq4_nl_ref runs the same code with ntry = -1 and gives other
// bytes; Petrel writes what llama-quantize writes.
#include "kernels/qt_iq_grid.h"
#include "kernels/qt_quantize.h"
#include "kernels/qt_quantize_util.h"

// The 16 IQ4_NL levels (format data, ggml's kvalues_iq4nl).
static const int8_t *const iq4_values = pt_kvalues_iq4nl;

enum { NTRY = 7, SB = 256 }; // search steps, IQ4_XS super-block

// Index of the level nearest v (ggml best_index_int8: binary search, ties
// between two neighbours go to the upper one).
static int nearest_level(float v)
{
    const int8_t *t = iq4_values;
    if (v <= t[0])
        return 0;
    if (v >= t[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < t[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - t[hi - 1] < t[hi] - v ? hi - 1 : hi;
}

// Best f32 scale of one block of 32 values (ggml quantize_row_iq4_nl_impl's
// per-block search, weights x^2): start at d = -max / -127 (max = signed
// value of largest magnitude), refit by least squares, then try
// id = (itry - 127) / max for itry in [-7, 7] and keep the refit with the
// largest sumqx^2 / sumq2. 0 for an all-zero block.
float qz_iq4_block_scale(const float *x)
{
    float amax = 0, mx = 0;
    for (int j = 0; j < 32; j++) {
        float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            mx = x[j];
        }
    }
    if (amax < GROUP_MAX_EPS)
        return 0;
    float d = -mx / iq4_values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        float q = iq4_values[nearest_level(id * x[j])];
        float w = x[j] * x[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -NTRY; itry <= NTRY; itry++) {
        id = (itry + iq4_values[0]) / mx;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float q = iq4_values[nearest_level(id * x[j])];
            float w = x[j] * x[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// Packs the levels of 32 values: byte j = value j (low nibble), j + 16 (high).
static void pack32(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(L[j] | (L[16 + j] << 4));
}

// IQ4_NL block (18 bytes): fp16 d, qs[16] (pack32); value = d * level.
// d is the block's best f32 scale; the levels are chosen against 1/d
// (unrounded).
void pt_quant_iq4_nl(const float *x, void *dst, int64_t n)
{
    assert(n % 32 == 0);
    uint8_t *y = dst;
    uint8_t L[32];
    float d8[8];
    const int64_t nb = n / 32, nb8 = nb - nb % 8; // blocks searched 8 at a time
    for (int64_t b = 0; b < nb; b++, x += 32, y += 18) {
        if (b < nb8 && b % 8 == 0)
            qz_iq4_scales_x8(x, iq4_values, NTRY, d8);
        const float d = b < nb8 ? d8[b % 8] : qz_iq4_block_scale(x);
        qz_put16(y, qz_h(d));
        const float id = d ? 1 / d : 0;
        for (int j = 0; j < 32; j++)
            L[j] = (uint8_t)nearest_level(id * x[j]);
        pack32(L, y + 2);
    }
}

// IQ4_XS block (136 bytes): fp16 d, u16 scales_h (2 bits per block),
// scales_l[4] (4 bits per block), qs[128] (pack32 per block); block scale
// = d * (6-bit scale - 32). d = -max_scale / 32 over the 8 blocks' best
// scales (max_scale: the one of largest magnitude); each block's levels are
// re-chosen against its quantised scale d * l.
void pt_quant_iq4_xs(const float *x, void *dst, int64_t n)
{
    assert(n % SB == 0);
    uint8_t *y = dst;
    uint8_t L[32];
    float scales[8];
    for (int64_t b = 0; b < n / SB; b++, x += SB, y += 136) {
        float max_scale = 0, amax_scale = 0;
        qz_iq4_scales_x8(x, iq4_values, NTRY, scales);
        for (int ib = 0; ib < 8; ib++) {
            float a = fabsf(scales[ib]);
            if (a > amax_scale) {
                amax_scale = a;
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32;
        qz_put16(y, qz_h(d));
        const float id = d ? 1 / d : 0.f;
        uint16_t sh = 0;
        uint8_t *sl = y + 4;
        memset(sl, 0, 4);
        for (int ib = 0; ib < 8; ib++) {
            int l = qz_max_i(-32, qz_min_i(31, qz_nearest_int(id * scales[ib])));
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++)
                L[j] = (uint8_t)nearest_level(idl * x[32 * ib + j]);
            pack32(L, y + 8 + 16 * ib);
            l += 32;
            sl[ib / 2] |= (uint8_t)((l & 0xF) << (4 * (ib % 2)));
            sh |= (uint16_t)((l >> 4) << (2 * ib));
        }
        qz_put16(y + 2, sh);
    }
}

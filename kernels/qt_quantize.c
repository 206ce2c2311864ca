// kernels/qt_quantize.c — the 32-value legacy quantisers Q4_1, Q5_0, Q5_1:
// ggml's quantize_row_<t>_ref, which llama-quantize runs for these types
// when there is no importance matrix (quantize_q4_1 & co. call the _ref
// function on the whole chunk then). The K types are in qt_quantize_k.c,
// IQ4_NL / IQ4_XS in qt_quantize_iq4.c.
#include "kernels/qt_quantize.h"
#include "kernels/qt_quantize_util.h"

#include <float.h>

enum { QB = 32 };

// Q4_1 block (20 bytes): fp16 d, fp16 m, 16 bytes of nibbles (low nibble
// value j, high nibble value j + 16); value = q * d + m.
// Contract: per 32 values min/max; d = (max - min) / 15;
// q = min(15, (int8)((x - min) * (1/d) + 0.5)), 1/d taken unrounded.
void pt_quant_q4_1(const float *x, void *dst, int64_t n)
{
    assert(n % QB == 0);
    uint8_t *y = dst;
    for (int64_t b = 0; b < n / QB; b++, x += QB, y += 20) {
        float mn = FLT_MAX, mx = -FLT_MAX;
        for (int j = 0; j < QB; j++) {
            if (x[j] < mn) mn = x[j];
            if (x[j] > mx) mx = x[j];
        }
        const float d = (mx - mn) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        qz_put16(y, qz_h(d));
        qz_put16(y + 2, qz_h(mn));
        for (int j = 0; j < QB / 2; j++) {
            const float x0 = (x[j] - mn) * id, x1 = (x[QB / 2 + j] - mn) * id;
            const uint8_t q0 = (uint8_t)qz_min_i(15, (int8_t)(x0 + 0.5f));
            const uint8_t q1 = (uint8_t)qz_min_i(15, (int8_t)(x1 + 0.5f));
            y[4 + j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

// Q5_0 block (22 bytes): fp16 d, u32 qh (bit j = 5th bit of value j),
// 16 bytes of low nibbles as Q4_1; value = (q - 16) * d.
// Contract: `max` = the signed value of largest magnitude (first on ties),
// d = max / -16, q = min(31, (int8)(x * (1/d) + 16.5)).
void pt_quant_q5_0(const float *x, void *dst, int64_t n)
{
    assert(n % QB == 0);
    uint8_t *y = dst;
    for (int64_t b = 0; b < n / QB; b++, x += QB, y += 22) {
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < QB; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                mx = x[j];
            }
        const float d = mx / -16;
        const float id = d ? 1.0f / d : 0.0f;
        qz_put16(y, qz_h(d));
        uint32_t qh = 0;
        for (int j = 0; j < QB / 2; j++) {
            const uint8_t q0 = (uint8_t)qz_min_i(31, (int8_t)(x[j] * id + 16.5f));
            const uint8_t q1 = (uint8_t)qz_min_i(31, (int8_t)(x[QB / 2 + j] * id + 16.5f));
            y[6 + j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + QB / 2);
        }
        qz_put32(y + 2, qh);
    }
}

// Q5_1 block (24 bytes): fp16 d, fp16 m, u32 qh, 16 bytes of low nibbles;
// value = q * d + m. Contract as Q4_1 with d = (max - min) / 31 and
// q = (uint8)((x - min) * (1/d) + 0.5) (ggml clamps nothing here).
void pt_quant_q5_1(const float *x, void *dst, int64_t n)
{
    assert(n % QB == 0);
    uint8_t *y = dst;
    for (int64_t b = 0; b < n / QB; b++, x += QB, y += 24) {
        float mn = FLT_MAX, mx = -FLT_MAX;
        for (int j = 0; j < QB; j++) {
            if (x[j] < mn) mn = x[j];
            if (x[j] > mx) mx = x[j];
        }
        const float d = (mx - mn) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        qz_put16(y, qz_h(d));
        qz_put16(y + 2, qz_h(mn));
        uint32_t qh = 0;
        for (int j = 0; j < QB / 2; j++) {
            const uint8_t q0 = (uint8_t)((x[j] - mn) * id + 0.5f);
            const uint8_t q1 = (uint8_t)((x[QB / 2 + j] - mn) * id + 0.5f);
            y[8 + j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + QB / 2);
        }
        qz_put32(y + 4, qh);
    }
}

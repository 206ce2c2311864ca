// kernels/qt_blocks.h — ggml's storage layouts of the 32-value legacy types
// with a min or a fifth bit (Q4_1, Q5_0, Q5_1) and of the K-quants (Q2_K ..
// Q6_K), byte for byte (ggml-common.h). Shared by qt_legacy*.c, qt_k*.c and
// their tests; not a public header. fp16 fields are raw bits (pt_fp16_to_f32).
#ifndef PETREL_KERNELS_QT_BLOCKS_H
#define PETREL_KERNELS_QT_BLOCKS_H

#include <stdint.h>
#include "kernels/qtypes.h"

typedef struct {
    uint16_t d, m;       // fp16 scale and min: value = q * d + m
    uint8_t qs[16];      // (16,) nibbles: low = value j, high = value j + 16
} pt_blk_q4_1;

typedef struct {
    uint16_t d;          // fp16 scale: value = (q - 16) * d
    uint8_t qh[4];       // (32,) fifth bits, bit j of the LE uint32 = value j
    uint8_t qs[16];      // (16,) low nibbles as in Q4_1
} pt_blk_q5_0;

typedef struct {
    uint16_t d, m;       // fp16 scale and min: value = q * d + m
    uint8_t qh[4];       // (32,) fifth bits as in Q5_0
    uint8_t qs[16];      // (16,) low nibbles as in Q4_1
} pt_blk_q5_1;

// Q2_K: 16 blocks of 16; value = d * (sc & 15) * q - dmin * (sc >> 4), q 0..3.
typedef struct {
    uint8_t scales[16];  // (16,) low nibble scale, high nibble min, per 16 values
    uint8_t qs[64];      // (64,) 2-bit quants: byte l of 32-byte half h holds
                         // values h*128 + 32*s + l (shift 2s) for l < 32
    uint16_t d, dmin;    // fp16 super-block scales of the scales and mins
} pt_blk_q2_k;

// Q3_K: 16 blocks of 16; value = d * (sc - 32) * (q - (hbit ? 0 : 4)).
typedef struct {
    uint8_t hmask[32];   // (32,) high bits: bit k of byte l = value 32*k + l
    uint8_t qs[64];      // (64,) low 2 bits, laid out as Q2_K's qs
    uint8_t scales[12];  // (16,) 6-bit scales, packed (see qt_k.c)
    uint16_t d;          // fp16 super-block scale
} pt_blk_q3_k;

// Q4_K: 8 blocks of 32; value = d * sc * q - dmin * m, q 0..15.
typedef struct {
    uint16_t d, dmin;    // fp16 super-block scales
    uint8_t scales[12];  // (8 + 8,) 6-bit scales and mins, packed (get_scale_min)
    uint8_t qs[128];     // (128,) nibbles: byte l of 32-byte chunk c holds value
                         // 64c + l (low) and 64c + 32 + l (high)
} pt_blk_q4_k;

// Q5_K: Q4_K plus a fifth bit per value.
typedef struct {
    uint16_t d, dmin;    // fp16 super-block scales
    uint8_t scales[12];  // as Q4_K
    uint8_t qh[32];      // (32,) fifth bits: bit k of byte l = value 32*k + l
    uint8_t qs[128];     // as Q4_K
} pt_blk_q5_k;

// Q6_K: 16 blocks of 16; value = d * sc * (q - 32), q 0..63.
typedef struct {
    uint8_t ql[128];     // (128,) low nibbles, per 128-value half: byte l (< 64)
                         // = values l (low) and l + 64 (high) of the half
    uint8_t qh[64];      // (64,) high 2 bits, per half: byte l (< 32) = values
                         // l, l+32, l+64, l+96 at shifts 0, 2, 4, 6
    int8_t scales[16];   // (16,) signed scales per 16 values
    uint16_t d;          // fp16 super-block scale
} pt_blk_q6_k;

_Static_assert(sizeof(pt_blk_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(pt_blk_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(pt_blk_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(pt_blk_q2_k) == 84, "q2_k layout");
_Static_assert(sizeof(pt_blk_q3_k) == 110, "q3_k layout");
_Static_assert(sizeof(pt_blk_q4_k) == 144, "q4_k layout");
_Static_assert(sizeof(pt_blk_q5_k) == 176, "q5_k layout");
_Static_assert(sizeof(pt_blk_q6_k) == 210, "q6_k layout");

// The 6-bit scale and min of block j (0..7) of a Q4_K / Q5_K super-block
// (ggml's get_scale_min_k4): blocks 0-3 in the low 6 bits of bytes j and
// j + 4; blocks 4-7 as a nibble of byte j + 4 plus the top 2 bits of bytes
// j - 4 (scale) and j (min).
static inline void pt_k4_scale_min(const uint8_t q[12], int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// The 16 signed scales (sc - 32, -32..31) of a Q3_K super-block: scale j
// has low nibble from byte j % 8 (low nibble for j < 8, high for j >= 8)
// and two high bits from byte 8 + j % 4 at shift 2 * (j / 4).
static inline void pt_q3k_scales(const uint8_t s[12], int8_t out[16])
{
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

#endif

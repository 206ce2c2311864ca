// kernels/qt_iq_grid.h — the i-quant lookup tables (format data, exactly
// ggml's ggml-common.h tables; defined in qt_iq_grid.c) and the block
// layouts. Private to the i-quant family (qt_iq.c, qt_iq_x86.c) and its
// tests.
//
// A grid entry packs 8 (or 4) values in little-endian byte order: value j of
// entry k is byte j of grid[k]. The IQ2/IQ3 grids hold magnitudes (signs come
// from separate sign bits), the IQ1 grid holds signed bytes -1, 0, +1.
#ifndef PETREL_KERNELS_QT_IQ_GRID_H
#define PETREL_KERNELS_QT_IQ_GRID_H

#include <stdint.h>

extern const uint64_t pt_iq2xxs_grid[256];  // (256,) x 8 magnitudes 8/25/43
extern const uint64_t pt_iq2xs_grid[512];   // (512,) x 8 magnitudes
extern const uint64_t pt_iq2s_grid[1024];   // (1024,) x 8 magnitudes
extern const uint32_t pt_iq3xxs_grid[256];  // (256,) x 4 magnitudes 4..62
extern const uint32_t pt_iq3s_grid[512];    // (512,) x 4 magnitudes 1..15
extern const uint64_t pt_iq1s_grid[2048];   // (2048,) x 8 signed bytes in {-1,0,1}
// 7 stored sign bits -> 8 sign bits (bit j set: value j negative); the 8th
// bit makes the count of negatives even.
extern const uint8_t pt_ksigns_iq2xs[128];  // (128,)
extern const int8_t pt_kvalues_iq4nl[16];   // (16,) IQ4_NL / IQ4_XS levels
// pt_ksigns_iq2xs[k] as 8 bytes of +1 / -1 (what SIMD code multiplies by)
extern const uint64_t pt_ksigns_pm1[128];   // (128,)

// IQ1_S / IQ1_M: every value is shifted by +-IQ1_DELTA before scaling.
#define PT_IQ1_DELTA 0.125f

// Block layouts, byte for byte ggml's block_iq* (all fields little-endian;
// byte arrays so that a block may sit at any address; fp16 scales as 2 bytes).
typedef struct {
    uint8_t d[2];        // fp16 super-block scale
    uint8_t qs[64];      // (8, 8) per 32: 4 grid indices, then u32 = 4 x 7 sign bits | scale << 28
} pt_blk_iq2_xxs;
typedef struct {
    uint8_t d[2];        // fp16
    uint8_t qs[64];      // (32,) u16: grid index (9 bits) | sign index << 9, one per 8 values
    uint8_t scales[8];   // (8,) two 4-bit scales per 32 (low: values 0..15, high: 16..31)
} pt_blk_iq2_xs;
typedef struct {
    uint8_t d[2];        // fp16
    uint8_t qs[32];      // (32,) low 8 bits of the grid index, one per 8 values
    uint8_t signs[32];   // (32,) sign bits, one byte per 8 values
    uint8_t qh[8];       // (8,) per 32: bits 2l..2l+1 = index bits 8..9 of group l
    uint8_t scales[8];   // (8,) two 4-bit scales per 32
} pt_blk_iq2_s;
typedef struct {
    uint8_t d[2];        // fp16
    uint8_t qs[64];      // (64,) grid index, one per 4 values
    uint8_t sas[32];     // (8,) u32 per 32: 4 x 7 sign bits | scale << 28
} pt_blk_iq3_xxs;
typedef struct {
    uint8_t d[2];        // fp16
    uint8_t qs[64];      // (64,) low 8 bits of the grid index, one per 4 values
    uint8_t qh[8];       // (8,) per 32: bit k = index bit 8 of group k
    uint8_t signs[32];   // (32,) sign bits, one byte per 8 values
    uint8_t scales[4];   // (4,) two 4-bit scales per 64
} pt_blk_iq3_s;
typedef struct {
    uint8_t d[2];        // fp16
    uint8_t qs[32];      // (32,) low 8 bits of the grid index, one per 8 values
    uint8_t qh[16];      // (8,) u16 per 32: 4 x 3 index bits | scale << 12 | delta sign << 15
} pt_blk_iq1_s;
typedef struct {
    uint8_t qs[32];      // (32,) low 8 bits of the grid index, one per 8 values
    uint8_t qh[16];      // (16,) per 16 values: 2 x (3 index bits | delta sign << 3)
    uint8_t scales[8];   // (4,) u16: 4 x 3-bit scales | fp16 nibble << 12
} pt_blk_iq1_m;
typedef struct {
    uint8_t d[2];        // fp16
    uint8_t qs[16];      // (16,) nibbles: low = value j, high = value j + 16
} pt_blk_iq4_nl;
typedef struct {
    uint8_t d[2];        // fp16
    uint8_t scales_h[2]; // u16: 2 high bits of each 6-bit scale, per 32
    uint8_t scales_l[4]; // (4,) 4 low bits of each scale (low nibble: even block)
    uint8_t qs[128];     // (8, 16) nibbles per 32: low = value j, high = value j + 16
} pt_blk_iq4_xs;
_Static_assert(sizeof(pt_blk_iq2_xxs) == 66, "block_iq2_xxs layout");
_Static_assert(sizeof(pt_blk_iq2_xs) == 74, "block_iq2_xs layout");
_Static_assert(sizeof(pt_blk_iq2_s) == 82, "block_iq2_s layout");
_Static_assert(sizeof(pt_blk_iq3_xxs) == 98, "block_iq3_xxs layout");
_Static_assert(sizeof(pt_blk_iq3_s) == 110, "block_iq3_s layout");
_Static_assert(sizeof(pt_blk_iq1_s) == 50, "block_iq1_s layout");
_Static_assert(sizeof(pt_blk_iq1_m) == 56, "block_iq1_m layout");
_Static_assert(sizeof(pt_blk_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(pt_blk_iq4_xs) == 136, "block_iq4_xs layout");

static inline uint16_t pt_iq_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t pt_iq_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
// IQ1_M keeps its fp16 super-block scale in the top nibbles of its 4 u16 scale words.
static inline uint16_t pt_iq1m_scale(const pt_blk_iq1_m *b)
{
    const uint8_t *s = b->scales;
    return (uint16_t)((pt_iq_u16(s) >> 12) | ((pt_iq_u16(s + 2) >> 8) & 0x00f0) |
                      ((pt_iq_u16(s + 4) >> 4) & 0x0f00) | (pt_iq_u16(s + 6) & 0xf000));
}

#endif

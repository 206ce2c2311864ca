// kernels/qt_quantize_util.h — small helpers shared by the quantiser files
// (qt_quantize.c, qt_quantize_k.c, qt_quantize_iq4.c). Not a public header.
//
// Byte-exactness with ggml depends on doing the same f32 operations in the
// same order; these files are compiled as ISO C (-std=c17, so GCC does not
// contract a*b+c into an fma) and without -march, like ggml-base.
#ifndef PETREL_KERNELS_QT_QUANTIZE_UTIL_H
#define PETREL_KERNELS_QT_QUANTIZE_UTIL_H

#include <assert.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/quant.h"

#define GROUP_MAX_EPS 1e-15f // ggml's "all zero" threshold of a group's amax

// Round to nearest, ties to even, for |v| <= 2^22: adding 1.5 * 2^23 puts
// the integer in the low mantissa bits (ggml's nearest_int, which defines
// the rounding the formats are produced with). Outside that range (which
// ggml asserts against only in debug builds) the result is the same
// meaningless but deterministic value as llama-quantize's release build
// computes, and callers clamp it as ggml does.
static inline int qz_nearest_int(float v)
{
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int qz_min_i(int a, int b) { return a < b ? a : b; }
static inline int qz_max_i(int a, int b) { return a > b ? a : b; }

// Little-endian stores into a block's bytes (the formats are little-endian).
static inline void qz_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void qz_put32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

// fp16 storage and its exact value back (the second pass of the K types
// quantises against the stored, rounded scales).
static inline uint16_t qz_h(float f) { return pt_f32_to_fp16(f); }
static inline float qz_f(uint16_t h) { return pt_fp16_to_f32(h); }

// ---- the K quantisers' scale searches (qt_quantize_k.c: scalar, ggml's
// operation order; qt_quantize_x8.c: the same on 8 groups at once) ----------

// ggml's make_qkx2_quants on one group of n values x with weights w.
float qz_make_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min, uint8_t *Laux,
                   float rmin, float rdelta, int nstep, bool use_mad);
// ggml's make_qx_quants with rmse_type 1 and no weights.
float qz_make_qx(int n, int nmax, const float *x, int8_t *L);
// Eight groups k = 0..7 of n <= 32 values at x + k * n (weights w + k * n,
// levels L + k * n): scale_out[k] and min_out[k] bit-identical to
// qz_make_qkx2 (nstep >= 1) / qz_make_qx on each group.
void qz_make_qkx2_x8(int n, int nmax, const float *x, const float *w, uint8_t *L, float *scale_out, float *min_out,
                     float rmin, float rdelta, int nstep, bool use_mad);
void qz_make_qx_x8(int n, int nmax, const float *x, int8_t *L, float *scale_out);
// ggml's make_q3_quants with do_rmse (Q3_K) on 8 groups of n values at
// x + k * n; qz_make_q3 is the scalar one (qt_quantize_k.c).
void qz_make_q3_x8(int n, int nmax, const float *x, int8_t *L, float *scale_out);
float qz_make_q3(int n, int nmax, const float *x, int8_t *L);
// The IQ4 best scales (ggml quantize_row_iq4_nl_impl's per-block search with
// x^2 weights, ntry steps either side) of 8 blocks of 32 values at x + 32 k,
// over the 16 levels; bit-identical to qt_quantize_iq4.c's scalar search.
void qz_iq4_scales_x8(const float *x, const int8_t *levels, int ntry, float *d_out);
// The scalar search of one block (qt_quantize_iq4.c; IQ4_NL's ntry 7).
float qz_iq4_block_scale(const float *x);

#endif

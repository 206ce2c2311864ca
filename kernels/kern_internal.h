// kernels/kern_internal.h — what matmul.c / ops.c expect from each code
// path (scalar, AVX2, AVX-512). Not a public header.
//
// THE NUMERICS CONTRACT (every path reproduces it bit for bit):
//
// Block-quantised weights (Q8_0, Q4_0) with a Q8_0-quantised activation,
// ggml's x86 arithmetic (ggml_vec_dot_q{4,8}_0_q8_0's AVX2 branch and
// llamafile's tinyBLAS_Q0_AVX, which do the same per output), so the
// products equal llama.cpp's on x86 bit for bit:
//   for block b = 0 .. nb-1 (in order), for lane l = 0 .. 7:
//     s_{b,l} = exact int32 sum of the products of values 4l .. 4l+3 of the
//               block's weights and activation quants (Q4_0 weight value j:
//               j < 16 low nibble of byte j, else high nibble of byte j-16,
//               minus 8)
//     dd_b    = fp32(d_w[b]) * fp32(d_x[b])   (exact: 11x11-bit mantissas)
//     acc[l]  = fmaf(dd_b, (float)s_{b,l}, acc[l])   (acc starts at +0)
//   result = reduce8(acc)  (ggml's hsum_float_8)
// Float weights (F32, F16, BF16 converted exactly to f32) with f32 input:
//   for i = 0 .. n-1: acc[i % 16] = fmaf(w_i, x_i, acc[i % 16])
//   result = reduce8(acc[i] + acc[i + 8], i = 0..7)
// reduce8(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)),
// the natural 256->128->64->32-bit halving of an 8-lane register.
//
// Zero-padding a tail is allowed in a SIMD path: an accumulator that starts
// at +0 can never become -0, so fmaf(0, 0, acc) == acc exactly.
#ifndef PETREL_KERNELS_KERN_INTERNAL_H
#define PETREL_KERNELS_KERN_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "kernels/quant.h"

// A set of activation vectors quantised to Q8_0, split into arrays so that
// SIMD code can load 8 consecutive block scales at once.
typedef struct pt_q8act {
    const int8_t *qs;   // (nvec, nb * 32) quants, 32-byte aligned rows
    const float *d;     // (nvec, nb) block scale, fp16-rounded, as f32
    const int32_t *s8;  // (nvec, nb) 8 * sum of the block's quants (no product reads it today)
    int64_t nb;         // blocks per vector
    // Optional (NULL: absent): the same vectors in the layout of the path's
    // GEMM tile, built once per product by pt_kern.tile_act for all of
    // them (kern_avx512_qgemm.c's Intel tile, per vector v and block b:
    // 64 bytes of lane-duplicated quants at tq + (v * nb + b) * 64, as many
    // of start values at tq_s, and the block scale twice at tq_d + v * 2 *
    // nb8 + 2 b, nb8 = nb rounded up to a multiple of 8).
    const void *tq;
    const void *tq_s;
    const float *tq_d;
} pt_q8act;

// Dot products of `nrows` weight rows (row r at w + r*rb) with vectors
// [v0, v0+nvec) of x; y[(v - v0) * ldy + r] receives row r · vector v.
typedef void (*pt_qtile_fn)(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows,
                            const pt_q8act *x, int64_t v0, int64_t nvec, float *y, int64_t ldy);
// Same for float weight types; X rows are f32 vectors of `cols` with stride ldx.
typedef void (*pt_ftile_fn)(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, int64_t cols,
                            const float *X, int64_t ldx, int64_t nvec, float *y, int64_t ldy);

typedef struct pt_kern {
    const char *name;   // "scalar", "avx2", "avxvnni", "avx512vnni"
    int qpath;          // which vdot of a qtypes.h row this path uses (PT_QPATH_*)
    pt_qtile_fn qtile;  // block-quantised weights
    bool q4_paired;     // Q4_0 activation quants in the paired layout (quant_act's `paired`; no path today)
    pt_ftile_fn ftile;  // F32 / F16 / BF16 weights
    // Optional (NULL: none): for a product of `batch` >= tile_act_min(t)
    // vectors with weight type t, lays the quantised activations out for
    // qtile (pt_q8act.tq / .tq_d, tile_act_bytes(t, nb, batch) bytes in
    // all, 64-byte aligned); tile_act_min returns 0 when the tile takes
    // none (then no layout is built).
    int64_t (*tile_act_min)(pt_dtype t);
    size_t (*tile_act_bytes)(int64_t nb, int64_t batch);
    void (*tile_act)(pt_dtype t, pt_q8act *x, int64_t batch, void *buf);
    // One f32 vector (nb blocks) -> Q8_0 quants exactly as ggml's
    // quantize_row_q8_0 on x86 (id = 127/amax, ties to even), scales rounded to fp16 (kept as f32) and
    // 8 * per-block sums; quants in the natural or (paired) Q4_0 layout.
    void (*quant_act)(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8);
    float (*dot_f32)(const float *a, const float *b, int64_t n); // 16-lane order
    void (*axpy)(float *y, float a, const float *x, int64_t n);   // y = fmaf(a, x, y)
    // out[t] = dot_f32(q, rows + t * ld, d), t < n
    void (*dot_rows)(float *out, const float *q, const float *rows, int64_t n, int64_t d, int64_t ld);
    // for t < n in order: out = fmaf(p[t], rows + t * ld, out) element-wise
    void (*axpy_rows)(float *out, const float *p, const float *rows, int64_t n, int64_t d, int64_t ld);
} pt_kern;

extern const pt_kern pt_kern_scalar;
void pt_quant_act_scalar(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8);
#if defined(__x86_64__)
extern const pt_kern pt_kern_avx2;
extern const pt_kern pt_kern_avx512;
extern const pt_kern pt_kern_avxvnni;
// AVX2 pieces that the AVX-VNNI / AVX-512 paths reuse as they are
void pt_quant_act_avx2(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8);
void pt_ftile_avx2(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, int64_t cols, const float *X,
                   int64_t ldx, int64_t nvec, float *y, int64_t ldy);
float pt_dot_f32_avx2(const float *a, const float *b, int64_t n);
void pt_axpy_avx2(float *y, float a, const float *x, int64_t n);
void pt_dot_rows_avx2(float *out, const float *q, const float *rows, int64_t n, int64_t d, int64_t ld);
void pt_axpy_rows_avx2(float *out, const float *p, const float *rows, int64_t n, int64_t d, int64_t ld);
// The AVX-512 path's zmm Q4_0 / Q8_0 products (kern_avx512_q.c) and its
// activation quantiser (natural layout for both types; `paired` ignored).
void pt_qtile_avx512(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x, int64_t v0,
                     int64_t nvec, float *y, int64_t ldy);
void pt_quant_act_avx512(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8);
// Its GEMM tile (kern_avx512_qgemm.c): larger Q4_0 batches (Intel: Q4_0
// and Q8_0); the rest goes to pt_qtile_avx512. With the activations laid
// out once per product by pt_qgemm_tile_act (the pt_kern hooks).
void pt_qtile_avx512_gemm(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x,
                          int64_t v0, int64_t nvec, float *y, int64_t ldy);
int64_t pt_qgemm_tile_act_min(pt_dtype t);
size_t pt_qgemm_tile_act_bytes(int64_t nb, int64_t batch);
void pt_qgemm_tile_act(pt_dtype t, pt_q8act *x, int64_t batch, void *buf);
// Forces the Intel zmm GEMM tile of kern_avx512_qgemm.c on (1) or off (0),
// or back to the CPU's default (-1); returns the previous setting (0 / 1).
// For tests and A/B; not while products run.
int pt_qgemm_set_kz(int on);
// Forces pt_qtile_avx512's GEMV passes of 4 rows (1; Intel's default) or 8
// (0; the others'), or back to the CPU's default (-1); returns the previous
// setting (0 / 1). For tests and A/B; not while products run.
int pt_qtile_set_kg4(int on);
// pt_quantize_row for Q8_0 / Q4_0 / BF16 / F16 (bit-identical to quant.c's
// scalar code); false for other types.
bool pt_quantize_row_avx2(pt_dtype t, const float *x, void *dst, int64_t n);
#endif

// Where quant j of block b goes: natural (b * 32 + j) or, when `paired`,
// blocks p and p + 4 of each full group of 8 interleaved by 16-byte halves
// (a layout the quantisers still write on request; no product reads it).
static inline int64_t pt_act_pos(bool paired, int64_t nb, int64_t b, int j)
{
    if (!paired || b >= nb / 8 * 8)
        return b * QK + j;
    const int64_t k = b % 8;
    return (b - k) * QK + (k % 4) * 64 + (j / 16) * 32 + (k / 4) * 16 + j % 16;
}

// The path in force (set by matmul.c's dispatch).
const pt_kern *pt_kern_current(void);

static inline float pt_reduce8(const float a[8])
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static inline float pt_reduce16(const float a[16])
{
    float t[8];
    for (int i = 0; i < 8; i++)
        t[i] = a[i] + a[i + 8];
    return pt_reduce8(t);
}

#endif

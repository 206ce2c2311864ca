// kernels/qtypes.h — one row of traits per weight type, in the spirit of
// ggml's type_traits: block size, bytes per block, the activation type its
// dot product takes, and the functions that decode, encode and multiply it.
// Code that handles "any type" asks this table instead of switching over
// types. The ids are ggml's (GGUF stores them).
//
// Families and their numerics contracts (kern_internal.h has the Q4_0/Q8_0
// one; every path - scalar, AVX2, AVX-512 - reproduces its family's
// contract bit for bit, so results never depend on the path or threads):
//
//  * 32-value blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL): activations
//    quantised per 32 values (Q8_0, or Q8_1 for the types with a min);
//    every type follows ggml's AVX2 lanes and equals llama.cpp's x86 dot
//    products bit for bit: Q4_0 / Q8_0 (kern_internal.h): per block b and
//    lane l, acc[l] = fmaf(d_w*d_x, (float)s_{b,l}, acc[l]) with s_{b,l}
//    the exact sum of the 4 products 4l..4l+3, acc from +0, result =
//    reduce8; Q4_1, Q5_0, Q5_1 and IQ4_NL: their contracts are in
//    qt_legacy.c and qt_iq.c
//  * 256-value super-blocks (the K and IQ types but IQ4_NL): activations
//    quantised to Q8_K (ggml's quantize_row_q8_K_ref); each super-block's
//    integer sums are exact int32, combined with the block's float scales
//    in the type's own fixed sequence of f32 operations into ggml's eight
//    AVX2 lane accumulators (starting at +0), super-block after
//    super-block, so that they equal llama.cpp's x86 dot products bit for
//    bit (the K-quants: qt_k.c; the i-quants: qt_iq.c, with the IQ1 delta
//    terms in ggml's own extra accumulators). The sequence of each type is
//    written above its scalar functions. (llama.cpp's batched products of
//    the i-quants run other sequences - its IQ panel GEMM for >= 8
//    activation rows, tinyBLAS for dense IQ4_NL with >= 2; Petrel keeps
//    this one sequence at every batch size: docs/llamacpp-files.md.)
#ifndef PETREL_KERNELS_QTYPES_H
#define PETREL_KERNELS_QTYPES_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "kernels/quant.h"

#define QK_K 256 // values per super-block

// Q8_K activation block (ggml's block_q8_K): 292 bytes per 256 values.
typedef struct {
    float d;             // scale (1 / iscale, not rounded to fp16)
    int8_t qs[QK_K];     // (256,) quants
    int16_t bsums[16];   // (16,) sums of qs in groups of 16
} block_q8_K;
// Q8_1 activation block (ggml's block_q8_1): 36 bytes per 32 values.
typedef struct {
    uint16_t d;          // fp16 scale
    uint16_t s;          // fp16 of d * sum(qs)
    int8_t qs[32];       // (32,) quants
} block_q8_1;
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");

enum { PT_QPATH_SCALAR = 0, PT_QPATH_AVX2 = 1, PT_QPATH_AVX512 = 2, PT_QPATH_N = 3 };

// ggml's dequantize_row_<type>: n values (n a multiple of blck).
typedef void (*pt_dequant_fn)(const void *src, float *y, int64_t n);
// What llama-quantize writes without an importance matrix, byte for byte:
// quantize_row_<type>_ref for most types; for IQ4_NL / IQ4_XS the scale
// search of quantize_iq4_nl / quantize_iq4_xs (kernels/qt_quantize.h).
typedef void (*pt_quant_fn)(const float *x, void *dst, int64_t n);
// Activation quantiser into the act type's ggml block layout.
typedef void (*pt_actq_fn)(const float *x, void *dst, int64_t n);
// One weight row (n values) · one activation row already quantised to the
// row's act type (ggml layout), following the family contract above.
typedef float (*pt_vdot_fn)(const void *w, const void *xq, int64_t n);
// One weight row (n values) · 4 activation rows at xq + j * ldx bytes ->
// out[0..3], each bit for bit the type's vdot (the weights unpacked once
// for the four: batched products).
typedef void (*pt_vdot4_fn)(const void *w, const void *xq, size_t ldx, int64_t n, float *out);

typedef struct pt_qtraits {
    const char *name;      // Petrel's lower-case name: "q4_k", "iq2_xxs"
    const char *ggml_name; // ggml's: "Q4_K", "IQ2_XXS"
    int32_t blck;          // values per block (1 for float types)
    int32_t bytes;         // bytes per block
    pt_dtype act;          // activation type of the dot product: PT_Q8_0,
                           // PT_Q8_1, PT_Q8_K; PT_F32 for the float types
    pt_dequant_fn dequant; // NULL for F32/F16/BF16 (quant.c converts those)
    pt_quant_fn quant;     // NULL: Petrel does not write this type
    pt_vdot_fn vdot[PT_QPATH_N]; // per path; NULL: use the path below it
    pt_vdot4_fn vdot4[PT_QPATH_N]; // optional, per path; NULL everywhere: 4 vdot calls
} pt_qtraits;

// The row of a type id, or NULL for an id Petrel does not know.
const pt_qtraits *pt_qtraits_of(uint32_t type);
// Activation row bytes of act type `act` (PT_Q8_0 / PT_Q8_1 / PT_Q8_K, in
// ggml's block layouts) for n values, and its quantiser (NULL if missing).
size_t pt_act_row_bytes(pt_dtype act, int64_t n);
pt_actq_fn pt_actq_of(pt_dtype act);
// The vdot of `t` for `path`, falling back to the nearest path below.
pt_vdot_fn pt_vdot_of(const pt_qtraits *t, int path);
// The vdot4 of `t` for `path` (nearest path below), or NULL if it has none.
pt_vdot4_fn pt_vdot4_of(const pt_qtraits *t, int path);

#endif

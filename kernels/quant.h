// kernels/quant.h — element types and their exact storage layouts.
//
// Type ids are ggml's (GGUF stores them). Block layouts are exactly ggml's:
//   Q8_0: { fp16 d; int8 qs[32]; }                      34 bytes / 32 values
//   Q4_0: { fp16 d; uint8 qs[16]; }                     18 bytes / 32 values,
//         value j (0..15) = ((qs[j] & 0xF) - 8) * d, value j+16 = ((qs[j] >> 4) - 8) * d
// A row of n values of a block type holds n/32 blocks (n % 32 == 0 required).
#ifndef PETREL_KERNELS_QUANT_H
#define PETREL_KERNELS_QUANT_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

typedef enum pt_dtype {
    PT_F32 = 0,
    PT_F16 = 1,
    PT_Q4_0 = 2,
    PT_Q4_1 = 3,
    PT_Q5_0 = 6,
    PT_Q5_1 = 7,
    PT_Q8_0 = 8,
    PT_Q8_1 = 9,    // activations only
    PT_Q2_K = 10,
    PT_Q3_K = 11,
    PT_Q4_K = 12,
    PT_Q5_K = 13,
    PT_Q6_K = 14,
    PT_Q8_K = 15,   // activations only
    PT_IQ2_XXS = 16,
    PT_IQ2_XS = 17,
    PT_IQ3_XXS = 18,
    PT_IQ1_S = 19,
    PT_IQ4_NL = 20,
    PT_IQ3_S = 21,
    PT_IQ2_S = 22,
    PT_IQ4_XS = 23,
    PT_IQ1_M = 29,
    PT_BF16 = 30,
} pt_dtype;

#define QK 32 // values per quantisation block

typedef struct {
    uint16_t d;        // fp16 scale
    int8_t qs[QK];     // (32,) signed quants
} block_q8_0;

typedef struct {
    uint16_t d;            // fp16 scale
    uint8_t qs[QK / 2];    // (16,) nibbles: low = value j, high = value j+16
} block_q4_0;

_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");

// Every weight type's block size, bytes and functions are one row of the
// traits table in kernels/qtypes.h; these are the common questions to it.
// Supported weight type (Petrel decodes and multiplies it)?
bool pt_dtype_valid(uint32_t t);
// Known to ggml's table at all (for messages: "type q8_k is not a weight type")
bool pt_dtype_known(uint32_t t);
const char *pt_dtype_name(pt_dtype t);     // "q4_k"; "?" if unknown
int pt_dtype_from_name(const char *name); // -1 if unknown (case-insensitive)
bool pt_dtype_is_block(pt_dtype t);        // block-quantised (block size > 1)
int64_t pt_dtype_block(pt_dtype t);        // values per block (1 for float types, 0 if unknown)
// Petrel can write it (has ggml's reference quantiser)?
bool pt_dtype_can_quantize(pt_dtype t);
// Bytes for a row of n values (n a multiple of the block size); 0 if invalid.
size_t pt_row_bytes(pt_dtype t, uint64_t n);

// Scalar conversions (exact, round-to-nearest-even where narrowing).
float pt_fp16_to_f32(uint16_t h);
uint16_t pt_f32_to_fp16(float f);
float pt_bf16_to_f32(uint16_t b);
uint16_t pt_f32_to_bf16(float f); // RNE; NaN stays NaN
// FP8 E4M3 (OCP "E4M3FN": bias 7, no infinities, 0x7F/0xFF are NaN, max 448).
float pt_fp8_e4m3_to_f32(uint8_t v);

// Quantise/dequantise a row of n values (n a multiple of the block size).
// Quantisation follows ggml's reference functions (quantize_row_q8_0_ref,
// quantize_row_q4_0_ref, quantize_row_q4_K_ref ...) so files match what
// llama.cpp's tools would write; dequantisation is ggml's to the bit.
// pt_quantize_row requires pt_dtype_can_quantize(t).
void pt_quantize_row(pt_dtype t, const float *x, void *dst, int64_t n);
void pt_dequantize_row(pt_dtype t, const void *src, float *y, int64_t n);

#endif

// kernels/qt_quantize.h — the quantisers Petrel writes beyond Q4_0 / Q8_0
// (those are in quant.c): byte for byte what llama-quantize --pure writes
// from the same F32 input without an importance matrix. That is ggml's
// quantize_row_<t>_ref for Q4_1, Q5_0, Q5_1 and the K types, and
// quantize_iq4_nl / quantize_iq4_xs (ntry 7) for the IQ4 types.
// Each takes n values (a multiple of the type's block) and writes n / blck
// blocks in ggml's layout. A name #defined to NULL is not implemented.
#ifndef PETREL_KERNELS_QT_QUANTIZE_H
#define PETREL_KERNELS_QT_QUANTIZE_H

#include <stdint.h>

void pt_quant_q4_1(const float *x, void *dst, int64_t n);   // qt_quantize.c
void pt_quant_q5_0(const float *x, void *dst, int64_t n);
void pt_quant_q5_1(const float *x, void *dst, int64_t n);
void pt_quant_q2_k(const float *x, void *dst, int64_t n);   // qt_quantize_k.c
void pt_quant_q3_k(const float *x, void *dst, int64_t n);
void pt_quant_q4_k(const float *x, void *dst, int64_t n);
void pt_quant_q5_k(const float *x, void *dst, int64_t n);
void pt_quant_q6_k(const float *x, void *dst, int64_t n);
void pt_quant_iq4_nl(const float *x, void *dst, int64_t n); // qt_quantize_iq4.c
void pt_quant_iq4_xs(const float *x, void *dst, int64_t n);

#endif

// kernels/qt_quantize.h — ggml's reference quantisers (no importance matrix),
// byte for byte: what llama-quantize --pure writes from the same F32 input.
// A name #defined to NULL is not implemented (Petrel cannot write the type).
#ifndef PETREL_KERNELS_QT_QUANTIZE_H
#define PETREL_KERNELS_QT_QUANTIZE_H

#include <stdint.h>

#define pt_quant_q4_1 NULL
#define pt_quant_q5_0 NULL
#define pt_quant_q5_1 NULL
#define pt_quant_q2_k NULL
#define pt_quant_q3_k NULL
#define pt_quant_q4_k NULL
#define pt_quant_q5_k NULL
#define pt_quant_q6_k NULL
#define pt_quant_iq4_nl NULL
#define pt_quant_iq4_xs NULL

#endif

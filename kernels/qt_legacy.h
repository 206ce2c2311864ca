// kernels/qt_legacy.h — Q4_1, Q5_0, Q5_1 (32-value blocks) and the activation quantisers (Q8_0 / Q8_1 / Q8_K in ggml's block layouts).
//
// Each name below is either declared (implemented in the matching .c file)
// or #defined to NULL while that piece does not exist yet: qtypes.c's table
// takes what is here, and a NULL entry means 'not supported'.
#ifndef PETREL_KERNELS_QT_LEGACY_H
#define PETREL_KERNELS_QT_LEGACY_H

#include <stdint.h>

#define pt_deq_q4_1 NULL
#define pt_vdot_q4_1_scalar NULL
#define pt_vdot_q4_1_avx2 NULL
#define pt_vdot_q4_1_avx512 NULL
#define pt_deq_q5_0 NULL
#define pt_vdot_q5_0_scalar NULL
#define pt_vdot_q5_0_avx2 NULL
#define pt_vdot_q5_0_avx512 NULL
#define pt_deq_q5_1 NULL
#define pt_vdot_q5_1_scalar NULL
#define pt_vdot_q5_1_avx2 NULL
#define pt_vdot_q5_1_avx512 NULL

// Activation quantisers (pt_actq_fn) into ggml's block_q8_0 / block_q8_1 /
// block_q8_K layouts, rounding exactly as ggml's x86 build quantises
// activations (what llama.cpp computes with on these machines).
#define pt_actq_q8_0 NULL
#define pt_actq_q8_1 NULL
#define pt_actq_q8_k NULL

#endif

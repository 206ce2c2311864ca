// kernels/qt_legacy.h — Q4_1, Q5_0, Q5_1 (32-value blocks) and the activation quantisers (Q8_0 / Q8_1 / Q8_K in ggml's block layouts).
//
// Each name below is either declared (implemented in the matching .c file)
// or #defined to NULL while that piece does not exist yet: qtypes.c's table
// takes what is here, and a NULL entry means 'not supported'.
#ifndef PETREL_KERNELS_QT_LEGACY_H
#define PETREL_KERNELS_QT_LEGACY_H

#include <stdint.h>

void pt_deq_q4_1(const void *src, float *y, int64_t n);
float pt_vdot_q4_1_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q4_1_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q4_1_avx2 NULL
#endif
#define pt_vdot_q4_1_avx512 NULL // the AVX2 kernel is as fast
void pt_deq_q5_0(const void *src, float *y, int64_t n);
float pt_vdot_q5_0_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q5_0_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q5_0_avx2 NULL
#endif
#if defined(__x86_64__)
float pt_vdot_q5_0_avx512(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q5_0_avx512 NULL
#endif
void pt_deq_q5_1(const void *src, float *y, int64_t n);
float pt_vdot_q5_1_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q5_1_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q5_1_avx2 NULL
#endif
#if defined(__x86_64__)
float pt_vdot_q5_1_avx512(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q5_1_avx512 NULL
#endif

// Activation quantisers (pt_actq_fn) into ggml's block_q8_0 / block_q8_1 /
// block_q8_K layouts, rounding exactly as ggml's x86 build quantises
// activations (what llama.cpp computes with on these machines).
void pt_actq_q8_0(const float *x, void *dst, int64_t n);
void pt_actq_q8_1(const float *x, void *dst, int64_t n);
void pt_actq_q8_k(const float *x, void *dst, int64_t n);
// The paths behind them (same bytes; the public ones take AVX2 whenever the
// kernel path in force is not the scalar one). For tests.
void pt_actq_q8_0_scalar(const float *x, void *dst, int64_t n);
void pt_actq_q8_1_scalar(const float *x, void *dst, int64_t n);
void pt_actq_q8_k_scalar(const float *x, void *dst, int64_t n);
#if defined(__x86_64__)
void pt_actq_q8_0_avx2(const float *x, void *dst, int64_t n);
void pt_actq_q8_1_avx2(const float *x, void *dst, int64_t n);
void pt_actq_q8_k_avx2(const float *x, void *dst, int64_t n);
#endif


// Round to nearest, ties to even, independent of the FPU rounding mode
// (|v| < 2^23): the rounding of ggml's _mm256_round_ps / nearest_int.
float pt_round_even(float v);

#endif

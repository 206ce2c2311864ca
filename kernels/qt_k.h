// kernels/qt_k.h — the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: dequantisation and dot products with Q8_K activations.
//
// Each name below is either declared (implemented in the matching .c file)
// or #defined to NULL while that piece does not exist yet: qtypes.c's table
// takes what is here, and a NULL entry means 'not supported'.
#ifndef PETREL_KERNELS_QT_K_H
#define PETREL_KERNELS_QT_K_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

// x86 AVX-512 CPUs: whether the row kernels (vdot) take their zmm forms
// (AMD since Zen 5, or no GFNI) or their ymm ones (Intel and Zen 4 with
// GFNI): qt_k_x86.c;
// PETREL_KQ_ZMM=1 / 0 in the environment forces either.
bool pt_kq_prefer_zmm(void);

void pt_deq_q2_k(const void *src, float *y, int64_t n);
float pt_vdot_q2_k_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q2_k_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q2_k_avx2 NULL
#endif
#if defined(__x86_64__)
float pt_vdot_q2_k_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_q2_k_avx512zmm(const void *w, const void *xq, int64_t n); // zmm rows (AMD); tests
void pt_vdot4_q2_k_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out);
#else
#define pt_vdot_q2_k_avx512 NULL
#define pt_vdot_q2_k_avx512zmm NULL
#define pt_vdot4_q2_k_avx512 NULL
#endif
void pt_deq_q3_k(const void *src, float *y, int64_t n);
float pt_vdot_q3_k_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q3_k_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q3_k_avx2 NULL
#endif
#if defined(__x86_64__)
float pt_vdot_q3_k_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_q3_k_avx512zmm(const void *w, const void *xq, int64_t n); // zmm rows (AMD); tests
#else
#define pt_vdot_q3_k_avx512 NULL
#define pt_vdot_q3_k_avx512zmm NULL
#endif
void pt_deq_q4_k(const void *src, float *y, int64_t n);
float pt_vdot_q4_k_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q4_k_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q4_k_avx2 NULL
#endif
#if defined(__x86_64__)
float pt_vdot_q4_k_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_q4_k_avx512zmm(const void *w, const void *xq, int64_t n); // zmm rows (AMD); tests
void pt_vdot4_q4_k_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out);
#else
#define pt_vdot_q4_k_avx512 NULL
#define pt_vdot_q4_k_avx512zmm NULL
#define pt_vdot4_q4_k_avx512 NULL
#endif
void pt_deq_q5_k(const void *src, float *y, int64_t n);
float pt_vdot_q5_k_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q5_k_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q5_k_avx2 NULL
#endif
#if defined(__x86_64__)
float pt_vdot_q5_k_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_q5_k_avx512zmm(const void *w, const void *xq, int64_t n); // zmm rows (AMD); tests
#else
#define pt_vdot_q5_k_avx512 NULL
#define pt_vdot_q5_k_avx512zmm NULL
#endif
void pt_deq_q6_k(const void *src, float *y, int64_t n);
float pt_vdot_q6_k_scalar(const void *w, const void *xq, int64_t n);
#if defined(__x86_64__)
float pt_vdot_q6_k_avx2(const void *w, const void *xq, int64_t n);
#else
#define pt_vdot_q6_k_avx2 NULL
#endif
#if defined(__x86_64__)
float pt_vdot_q6_k_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_q6_k_avx512zmm(const void *w, const void *xq, int64_t n); // zmm rows (AMD); tests
void pt_vdot4_q6_k_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out);
#else
#define pt_vdot_q6_k_avx512 NULL
#define pt_vdot_q6_k_avx512zmm NULL
#define pt_vdot4_q6_k_avx512 NULL
#endif

#endif

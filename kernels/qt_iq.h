// kernels/qt_iq.h — the i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS: lookup grids, dequantisation, dot products.
//
// Each name below is either declared (implemented in the matching .c file)
// or #defined to NULL while that piece does not exist yet: qtypes.c's table
// takes what is here, and a NULL entry means 'not supported'.
#ifndef PETREL_KERNELS_QT_IQ_H
#define PETREL_KERNELS_QT_IQ_H

#include <stddef.h>
#include <stdint.h>

// pt_deq_*: ggml's dequantize_row_* bit for bit (pt_dequant_fn).
// pt_vdot_*_<path>: one row · one activation row (Q8_0 for IQ4_NL, Q8_K for
// the others, ggml layouts, quants in [-127, 127]; IQ1_S reads the Q8_K
// bsums, as ggml does); the numerics contract (ggml's x86 vec_dot, bit for
// bit) is written above the scalar functions in qt_iq.c and every path
// returns the same bits.

void pt_deq_iq2_xxs(const void *src, float *y, int64_t n);
float pt_vdot_iq2_xxs_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq2_xs(const void *src, float *y, int64_t n);
float pt_vdot_iq2_xs_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq3_xxs(const void *src, float *y, int64_t n);
float pt_vdot_iq3_xxs_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq1_s(const void *src, float *y, int64_t n);
float pt_vdot_iq1_s_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq4_nl(const void *src, float *y, int64_t n);
float pt_vdot_iq4_nl_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq3_s(const void *src, float *y, int64_t n);
float pt_vdot_iq3_s_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq2_s(const void *src, float *y, int64_t n);
float pt_vdot_iq2_s_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq4_xs(const void *src, float *y, int64_t n);
float pt_vdot_iq4_xs_scalar(const void *w, const void *xq, int64_t n);
void pt_deq_iq1_m(const void *src, float *y, int64_t n);
float pt_vdot_iq1_m_scalar(const void *w, const void *xq, int64_t n);

// SIMD paths (qt_iq_x86.c): AVX2 for every type; AVX-512 for IQ4_NL,
// IQ4_XS, IQ2_XXS, IQ2_XS and IQ2_S (the others take their AVX2 function on that path).
#if defined(__x86_64__)
float pt_vdot_iq2_xxs_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq2_xs_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq3_xxs_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq1_s_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq4_nl_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq3_s_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq2_s_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq4_xs_avx2(const void *w, const void *xq, int64_t n);
float pt_vdot_iq1_m_avx2(const void *w, const void *xq, int64_t n);
// One row times 4 activation rows at xq + j * ldx bytes, each output bit
// for bit the AVX2 vdot (batched products; qtypes.h pt_vdot4_fn).
void pt_vdot4_iq2_xxs_avx2(const void *w, const void *xq, size_t ldx, int64_t n, float *out);
void pt_vdot4_iq4_xs_avx2(const void *w, const void *xq, size_t ldx, int64_t n, float *out);
float pt_vdot_iq2_xxs_avx512(const void *w, const void *xq, int64_t n);
// The AVX-512 F/BW/VL/VNNI IQ2_XXS kernel that pt_vdot_iq2_xxs_avx512 runs
// on CPUs without VBMI (exposed so that tests check it on any AVX-512 CPU).
float pt_vdot_iq2_xxs_avx512bw(const void *w, const void *xq, int64_t n);
// Its Zen 4 form (VBMI + GFNI + BITALG; tests).
float pt_vdot_iq2_xxs_avx512z4(const void *w, const void *xq, int64_t n);
void pt_vdot4_iq2_xxs_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out);
float pt_vdot_iq2_xs_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_iq2_s_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_iq4_nl_avx512(const void *w, const void *xq, int64_t n);
float pt_vdot_iq4_xs_avx512(const void *w, const void *xq, int64_t n);
// The AVX-512 F/BW/VL/VNNI IQ4_XS kernel that pt_vdot_iq4_xs_avx512 runs
// on CPUs without VBMI (exposed so that tests check it on any AVX-512 CPU).
float pt_vdot_iq4_xs_avx512bw(const void *w, const void *xq, int64_t n);
float pt_vdot_iq4_xs_avx512vbmi(const void *w, const void *xq, int64_t n); // zmm, VBMI (tests)
float pt_vdot_iq4_xs_avx512ymm(const void *w, const void *xq, int64_t n);  // ymm, GFNI (tests)
float pt_vdot_iq4_xs_avx512z4(const void *w, const void *xq, int64_t n);   // ymm, VBMI: Zen 4 (tests)
void pt_vdot4_iq4_xs_avx512(const void *w, const void *xq, size_t ldx, int64_t n, float *out);
#define pt_vdot_iq3_xxs_avx512 NULL
#define pt_vdot_iq1_s_avx512 NULL
#define pt_vdot_iq3_s_avx512 NULL
#define pt_vdot_iq1_m_avx512 NULL
#else
#define pt_vdot_iq2_xxs_avx2 NULL
#define pt_vdot_iq2_xxs_avx512 NULL
#define pt_vdot_iq2_xs_avx2 NULL
#define pt_vdot_iq2_xs_avx512 NULL
#define pt_vdot_iq3_xxs_avx2 NULL
#define pt_vdot_iq3_xxs_avx512 NULL
#define pt_vdot_iq1_s_avx2 NULL
#define pt_vdot_iq1_s_avx512 NULL
#define pt_vdot_iq4_nl_avx2 NULL
#define pt_vdot_iq4_nl_avx512 NULL
#define pt_vdot_iq3_s_avx2 NULL
#define pt_vdot_iq3_s_avx512 NULL
#define pt_vdot_iq2_s_avx2 NULL
#define pt_vdot_iq2_s_avx512 NULL
#define pt_vdot_iq4_xs_avx2 NULL
#define pt_vdot_iq4_xs_avx512 NULL
#define pt_vdot_iq1_m_avx2 NULL
#define pt_vdot_iq1_m_avx512 NULL
#define pt_vdot4_iq2_xxs_avx2 NULL
#define pt_vdot4_iq4_xs_avx2 NULL
#define pt_vdot4_iq4_xs_avx512 NULL
#define pt_vdot4_iq2_xxs_avx512 NULL
#define pt_vdot_iq2_xxs_avx512bw NULL
#define pt_vdot_iq2_xxs_avx512z4 NULL
#define pt_vdot_iq4_xs_avx512bw NULL
#define pt_vdot_iq4_xs_avx512vbmi NULL
#define pt_vdot_iq4_xs_avx512ymm NULL
#define pt_vdot_iq4_xs_avx512z4 NULL
#endif

#endif

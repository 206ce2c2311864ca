// kernels/qt_iq.h — the i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS: lookup grids, dequantisation, dot products.
//
// Each name below is either declared (implemented in the matching .c file)
// or #defined to NULL while that piece does not exist yet: qtypes.c's table
// takes what is here, and a NULL entry means 'not supported'.
#ifndef PETREL_KERNELS_QT_IQ_H
#define PETREL_KERNELS_QT_IQ_H

#include <stdint.h>

#define pt_deq_iq2_xxs NULL
#define pt_vdot_iq2_xxs_scalar NULL
#define pt_vdot_iq2_xxs_avx2 NULL
#define pt_vdot_iq2_xxs_avx512 NULL
#define pt_deq_iq2_xs NULL
#define pt_vdot_iq2_xs_scalar NULL
#define pt_vdot_iq2_xs_avx2 NULL
#define pt_vdot_iq2_xs_avx512 NULL
#define pt_deq_iq3_xxs NULL
#define pt_vdot_iq3_xxs_scalar NULL
#define pt_vdot_iq3_xxs_avx2 NULL
#define pt_vdot_iq3_xxs_avx512 NULL
#define pt_deq_iq1_s NULL
#define pt_vdot_iq1_s_scalar NULL
#define pt_vdot_iq1_s_avx2 NULL
#define pt_vdot_iq1_s_avx512 NULL
#define pt_deq_iq4_nl NULL
#define pt_vdot_iq4_nl_scalar NULL
#define pt_vdot_iq4_nl_avx2 NULL
#define pt_vdot_iq4_nl_avx512 NULL
#define pt_deq_iq3_s NULL
#define pt_vdot_iq3_s_scalar NULL
#define pt_vdot_iq3_s_avx2 NULL
#define pt_vdot_iq3_s_avx512 NULL
#define pt_deq_iq2_s NULL
#define pt_vdot_iq2_s_scalar NULL
#define pt_vdot_iq2_s_avx2 NULL
#define pt_vdot_iq2_s_avx512 NULL
#define pt_deq_iq4_xs NULL
#define pt_vdot_iq4_xs_scalar NULL
#define pt_vdot_iq4_xs_avx2 NULL
#define pt_vdot_iq4_xs_avx512 NULL
#define pt_deq_iq1_m NULL
#define pt_vdot_iq1_m_scalar NULL
#define pt_vdot_iq1_m_avx2 NULL
#define pt_vdot_iq1_m_avx512 NULL

#endif

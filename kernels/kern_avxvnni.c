// kernels/kern_avxvnni.c — the AVX-VNNI path (AVX2 machines with the VEX
// encoded vpdpbusd, e.g. Intel Alder Lake and later without AVX-512).
// Block dots use vpdpbusd; everything else is the AVX2 path's code.
// Bit-identical to kern_scalar.c (contract: kern_internal.h).
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define KX_TGT "avx2,fma,f16c,avxvnni"
#define KX(name) name##_avxvnni
#define KX_DOT(u, s) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), (u), (s))
#include "kernels/kern_x86_body.h"

const pt_kern pt_kern_avxvnni = {
    .name = "avxvnni",
    .qpath = PT_QPATH_AVX2,
    .qtile = qtile_avxvnni,
    .q4_paired = false,
    .quant_act = pt_quant_act_avx2,
    .ftile = pt_ftile_avx2,
    .dot_f32 = pt_dot_f32_avx2,
    .axpy = pt_axpy_avx2,
    .dot_rows = pt_dot_rows_avx2,
    .axpy_rows = pt_axpy_rows_avx2,
};

#endif

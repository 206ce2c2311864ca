// kernels/qtypes.c — the type-traits table (one row per ggml type id) and
// the lookups over it. The functions of each row live in the family files
// (qt_legacy.c, qt_k.c, qt_iq.c, qt_quantize.c and their x86 companions).
#include "kernels/qtypes.h"
#include "kernels/qt_legacy.h"
#include "kernels/qt_k.h"
#include "kernels/qt_iq.h"
#include "kernels/qt_quantize.h"

#include <assert.h>

#define NTYPES 40

static const pt_qtraits table[NTYPES] = {
    [0] = {"f32", "F32", 1, 4, PT_F32, NULL, NULL, {NULL, NULL, NULL}},
    [1] = {"f16", "F16", 1, 2, PT_F32, NULL, NULL, {NULL, NULL, NULL}},
    [2] = {"q4_0", "Q4_0", 32, 18, PT_Q8_0, NULL, NULL, {NULL, NULL, NULL}},
    [8] = {"q8_0", "Q8_0", 32, 34, PT_Q8_0, NULL, NULL, {NULL, NULL, NULL}},
    [30] = {"bf16", "BF16", 1, 2, PT_F32, NULL, NULL, {NULL, NULL, NULL}},
    [3] = {"q4_1", "Q4_1", 32, 20, PT_Q8_1, pt_deq_q4_1, pt_quant_q4_1,
             {pt_vdot_q4_1_scalar, pt_vdot_q4_1_avx2, pt_vdot_q4_1_avx512}},
    [6] = {"q5_0", "Q5_0", 32, 22, PT_Q8_0, pt_deq_q5_0, pt_quant_q5_0,
             {pt_vdot_q5_0_scalar, pt_vdot_q5_0_avx2, pt_vdot_q5_0_avx512}},
    [7] = {"q5_1", "Q5_1", 32, 24, PT_Q8_1, pt_deq_q5_1, pt_quant_q5_1,
             {pt_vdot_q5_1_scalar, pt_vdot_q5_1_avx2, pt_vdot_q5_1_avx512}},
    [10] = {"q2_k", "Q2_K", 256, 84, PT_Q8_K, pt_deq_q2_k, pt_quant_q2_k,
             {pt_vdot_q2_k_scalar, pt_vdot_q2_k_avx2, pt_vdot_q2_k_avx512},
             {NULL, NULL, pt_vdot4_q2_k_avx512}},
    [11] = {"q3_k", "Q3_K", 256, 110, PT_Q8_K, pt_deq_q3_k, pt_quant_q3_k,
             {pt_vdot_q3_k_scalar, pt_vdot_q3_k_avx2, pt_vdot_q3_k_avx512}},
    [12] = {"q4_k", "Q4_K", 256, 144, PT_Q8_K, pt_deq_q4_k, pt_quant_q4_k,
             {pt_vdot_q4_k_scalar, pt_vdot_q4_k_avx2, pt_vdot_q4_k_avx512},
             {NULL, NULL, pt_vdot4_q4_k_avx512}},
    [13] = {"q5_k", "Q5_K", 256, 176, PT_Q8_K, pt_deq_q5_k, pt_quant_q5_k,
             {pt_vdot_q5_k_scalar, pt_vdot_q5_k_avx2, pt_vdot_q5_k_avx512}},
    [14] = {"q6_k", "Q6_K", 256, 210, PT_Q8_K, pt_deq_q6_k, pt_quant_q6_k,
             {pt_vdot_q6_k_scalar, pt_vdot_q6_k_avx2, pt_vdot_q6_k_avx512},
             {NULL, NULL, pt_vdot4_q6_k_avx512}},
    [16] = {"iq2_xxs", "IQ2_XXS", 256, 66, PT_Q8_K, pt_deq_iq2_xxs, NULL,
             {pt_vdot_iq2_xxs_scalar, pt_vdot_iq2_xxs_avx2, pt_vdot_iq2_xxs_avx512},
             {NULL, pt_vdot4_iq2_xxs_avx2, pt_vdot4_iq2_xxs_avx512}},
    [17] = {"iq2_xs", "IQ2_XS", 256, 74, PT_Q8_K, pt_deq_iq2_xs, NULL,
             {pt_vdot_iq2_xs_scalar, pt_vdot_iq2_xs_avx2, pt_vdot_iq2_xs_avx512}},
    [18] = {"iq3_xxs", "IQ3_XXS", 256, 98, PT_Q8_K, pt_deq_iq3_xxs, NULL,
             {pt_vdot_iq3_xxs_scalar, pt_vdot_iq3_xxs_avx2, pt_vdot_iq3_xxs_avx512}},
    [19] = {"iq1_s", "IQ1_S", 256, 50, PT_Q8_K, pt_deq_iq1_s, NULL,
             {pt_vdot_iq1_s_scalar, pt_vdot_iq1_s_avx2, pt_vdot_iq1_s_avx512}},
    [20] = {"iq4_nl", "IQ4_NL", 32, 18, PT_Q8_0, pt_deq_iq4_nl, pt_quant_iq4_nl,
             {pt_vdot_iq4_nl_scalar, pt_vdot_iq4_nl_avx2, pt_vdot_iq4_nl_avx512}},
    [21] = {"iq3_s", "IQ3_S", 256, 110, PT_Q8_K, pt_deq_iq3_s, NULL,
             {pt_vdot_iq3_s_scalar, pt_vdot_iq3_s_avx2, pt_vdot_iq3_s_avx512}},
    [22] = {"iq2_s", "IQ2_S", 256, 82, PT_Q8_K, pt_deq_iq2_s, NULL,
             {pt_vdot_iq2_s_scalar, pt_vdot_iq2_s_avx2, pt_vdot_iq2_s_avx512}},
    [23] = {"iq4_xs", "IQ4_XS", 256, 136, PT_Q8_K, pt_deq_iq4_xs, pt_quant_iq4_xs,
             {pt_vdot_iq4_xs_scalar, pt_vdot_iq4_xs_avx2, pt_vdot_iq4_xs_avx512},
             {NULL, pt_vdot4_iq4_xs_avx2, pt_vdot4_iq4_xs_avx512}},
    [29] = {"iq1_m", "IQ1_M", 256, 56, PT_Q8_K, pt_deq_iq1_m, NULL,
             {pt_vdot_iq1_m_scalar, pt_vdot_iq1_m_avx2, pt_vdot_iq1_m_avx512}},
};

const pt_qtraits *pt_qtraits_of(uint32_t type)
{
    if (type >= NTYPES || !table[type].name)
        return NULL;
    return &table[type];
}

size_t pt_act_row_bytes(pt_dtype act, int64_t n)
{
    switch (act) {
    case PT_Q8_0: return (size_t)(n / 32) * 34;
    case PT_Q8_1: return (size_t)(n / 32) * sizeof(block_q8_1);
    case PT_Q8_K: return (size_t)(n / QK_K) * sizeof(block_q8_K);
    default: return 0;
    }
}

pt_actq_fn pt_actq_of(pt_dtype act)
{
    switch (act) {
    case PT_Q8_0: return pt_actq_q8_0;
    case PT_Q8_1: return pt_actq_q8_1;
    case PT_Q8_K: return pt_actq_q8_k;
    default: return NULL;
    }
}

pt_vdot4_fn pt_vdot4_of(const pt_qtraits *t, int path)
{
    assert(t && path >= 0 && path < PT_QPATH_N);
    for (int p = path; p >= 0; p--)
        if (t->vdot4[p])
            return t->vdot4[p];
    return NULL;
}

pt_vdot_fn pt_vdot_of(const pt_qtraits *t, int path)
{
    assert(t && path >= 0 && path < PT_QPATH_N);
    for (int p = path; p >= 0; p--)
        if (t->vdot[p])
            return t->vdot[p];
    return NULL;
}

// tests/test_kern_avx512.c — the AVX-512 path's own activation quantiser and Q4_0 / Q8_0 products
// (kernels/kern_avx512_q.c): quants, scales and sums equal a plain float
// transcription of ggml's x86 quantize_row_q8_0 (id = 127 / amax, ties to
// even), at the positions of the layouts as documented there (the Q4_0 and
// Q8_0 "quad" layouts of full groups of 8 blocks, natural after them). The
// products that read these layouts are checked bit for bit against the
// contract by tests/test_kernels.c on every path.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_internal.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

static uint32_t rs = 0x9E3779B9u;
static uint32_t rnd32(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}

// Where quant j of block b goes: the natural layout, for both types
// (kern_avx512_q.c).
static int64_t quad_pos(bool q4, int64_t nb, int64_t b, int j)
{
    (void)q4;
    (void)nb;
    return b * 32 + j;
}

#if defined(__x86_64__)
Test(kern_avx512, quant_act_equals_float_reference)
{
    if (!pt_kernel_path_supported(PT_PATH_AVX512) || !__builtin_cpu_supports("avx512vbmi") ||
        !__builtin_cpu_supports("gfni")) {
        cr_log_info("AVX-512 VNNI + VBMI + GFNI not available on this CPU: skipped");
        return;
    }
    const int64_t nbs[] = {1, 7, 8, 9, 16, 37};
    for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++) {
        const int64_t nb = nbs[ni];
        float *x = malloc(sizeof(float) * (size_t)(nb * 32));
        int8_t *qs = aligned_alloc(64, (size_t)((nb * 32 + 127) / 64 * 64)); // a multiple of 64 (C11)
        float *d = malloc(sizeof(float) * (size_t)nb);
        int32_t *s8 = malloc(sizeof(int32_t) * (size_t)nb);
        for (int rep = 0; rep < 50; rep++) {
            for (int64_t i = 0; i < nb * 32; i++)
                x[i] = ((float)(rnd32() & 0xFFFFFF) / 8388608.0f - 1.0f) * ldexpf(1.0f, (int)(rnd32() % 20) - 10);
            if (rep % 3 == 0) // exact halves after scaling (amax 127: id = 1), and -0
                for (int64_t b = 0; b < nb; b++) {
                    x[b * 32] = 127.0f;
                    for (int j = 1; j < 32; j++)
                        x[b * 32 + j] = (float)((int)(rnd32() % 253) - 126) + ((rnd32() & 1) ? 0.5f : -0.5f);
                    x[b * 32 + 7] = -0.0f;
                }
            if (rep == 1)
                memset(x, 0, sizeof(float) * 32); // a zero block: d = 0, quants 0
            for (int q4 = 0; q4 < 2; q4++) {
                memset(qs, 0x55, (size_t)(nb * 32));
                pt_quant_act_avx512(x, nb, q4, qs, d, s8);
                for (int64_t b = 0; b < nb; b++) {
                    float amax = 0.0f;
                    for (int j = 0; j < 32; j++)
                        amax = fmaxf(amax, fabsf(x[b * 32 + j]));
                    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
                    int32_t sum = 0;
                    for (int j = 0; j < 32; j++) {
                        const int8_t want = (int8_t)rintf(x[b * 32 + j] * id); // default mode: ties to even
                        const int8_t got = qs[quad_pos(q4, nb, b, j)];
                        cr_assert_eq(got, want, "nb %ld q4 %d block %ld quant %d: %d != %d", (long)nb, q4,
                                     (long)b, j, got, want);
                        sum += want;
                    }
                    cr_assert_eq(d[b], pt_fp16_to_f32(pt_f32_to_fp16(amax / 127.0f)), "nb %ld block %ld scale",
                                 (long)nb, (long)b);
                    cr_assert_eq(s8[b], 8 * sum, "nb %ld block %ld sum", (long)nb, (long)b);
                }
            }
        }
        free(x);
        free(qs);
        free(d);
        free(s8);
    }
}
#endif

#if defined(__x86_64__)
// The contract of kern_internal.h, written out here on its own: per block,
// lane l's exact int32 sum of products 4l..4l+3, fmaf(fp32(d_w) * d_x, s,
// acc[l]), ggml's hsum_float_8 at the end.
static float contract_row(bool q8, const uint8_t *w, const int8_t *xq, const float *xd, int64_t nb)
{
    float acc[8] = {0};
    const size_t bs = q8 ? 34 : 18;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bs;
        uint16_t h;
        memcpy(&h, wb, 2);
        const float dd = pt_fp16_to_f32(h) * xd[b];
        for (int l = 0; l < 8; l++) {
            int32_t s = 0;
            for (int j = 4 * l; j < 4 * l + 4; j++) {
                const int32_t wj = q8 ? (int8_t)wb[2 + j] : (j < 16 ? (wb[2 + j] & 15) : (wb[2 + j - 16] >> 4)) - 8;
                s += wj * xq[b * 32 + j];
            }
            acc[l] = fmaf(dd, (float)s, acc[l]);
        }
    }
    const float a0 = acc[0] + acc[4], a1 = acc[1] + acc[5], a2 = acc[2] + acc[6], a3 = acc[3] + acc[7];
    return (a0 + a2) + (a1 + a3);
}

// pt_qtile_avx512's GEMV kernel (one vector: rows in passes of 8, then 4,
// then 1, or of 4 then 1 as on Intel: both forced in turn; 8-block groups
// and a shorter last group) and its GEMM tiles (4
// vectors) equal the contract bit for bit: row counts around the pass
// sizes, block counts around the group size, random fp16 scales of both
// signs, activation quants from the full range (-127..127, extremes forced).
Test(kern_avx512, q4_0_q8_0_products_equal_contract)
{
    if (!pt_kernel_path_supported(PT_PATH_AVX512)) {
        cr_log_info("AVX-512 VNNI not available on this CPU: skipped");
        return;
    }
    const int64_t nrs[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 24, 31, 37};
    const int64_t nbs[] = {1, 2, 7, 8, 9, 15, 16, 17, 23, 64, 65};
    const int nvmax = 5; // 4 (GEMM tile) + 1 (GEMV)
    for (int q8 = 0; q8 < 2; q8++)
        for (size_t bi = 0; bi < sizeof nbs / sizeof nbs[0]; bi++) {
            const int64_t nb = nbs[bi];
            const size_t bs = q8 ? 34 : 18, rb = bs * (size_t)nb;
            int8_t *xq = aligned_alloc(64, (size_t)((nvmax * nb * 32 + 63) / 64 * 64));
            float *xd = malloc(sizeof(float) * (size_t)(nvmax * nb));
            int32_t *s8 = calloc((size_t)(nvmax * nb), sizeof(int32_t));
            for (int64_t i = 0; i < nvmax * nb * 32; i++)
                xq[i] = (int8_t)((int)(rnd32() % 255) - 127);
            xq[0] = 127, xq[1] = -127;
            for (int64_t i = 0; i < nvmax * nb; i++)
                xd[i] = pt_fp16_to_f32(pt_f32_to_fp16(ldexpf((float)(rnd32() % 1000 + 1), -(int)(rnd32() % 16) - 6)));
            const pt_q8act act = {.qs = xq, .d = xd, .s8 = s8, .nb = nb};
            for (size_t ri = 0; ri < sizeof nrs / sizeof nrs[0]; ri++) {
                const int64_t nr = nrs[ri];
                uint8_t *w = malloc(rb * (size_t)nr);
                for (size_t i = 0; i < rb * (size_t)nr; i++)
                    w[i] = (uint8_t)rnd32();
                for (int64_t b = 0; b < nr * nb; b++) {
                    const float f = ldexpf((float)(rnd32() % 2000) - 1000.0f, -(int)(rnd32() % 20) - 2);
                    const uint16_t h = pt_f32_to_fp16(f);
                    memcpy(w + b * bs, &h, 2);
                }
                float *y = malloc(sizeof(float) * (size_t)(nr * nvmax));
                for (int kg4 = 0; kg4 < 2; kg4++)
                for (int nv = 1; nv <= nvmax; nv += nvmax - 1) {
                    memset(y, 0xFF, sizeof(float) * (size_t)(nr * nvmax));
                    const int kg4_prev = pt_qtile_set_kg4(kg4);
                    pt_qtile_avx512(q8 ? PT_Q8_0 : PT_Q4_0, w, rb, nr, &act, 0, nv, y, nr);
                    pt_qtile_set_kg4(kg4_prev);
                    for (int v = 0; v < nv; v++)
                        for (int64_t r = 0; r < nr; r++) {
                            const float want = contract_row(q8, w + r * rb, xq + v * nb * 32, xd + v * nb, nb);
                            uint32_t a, b;
                            memcpy(&a, &y[v * nr + r], 4);
                            memcpy(&b, &want, 4);
                            cr_assert_eq(a, b, "%s kg4 %d nb %ld rows %ld nvec %d: vector %d row %ld: %a != %a",
                                         q8 ? "q8_0" : "q4_0", kg4, (long)nb, (long)nr, nv, v, (long)r,
                                         (double)y[v * nr + r], (double)want);
                        }
                }
                free(y);
                free(w);
            }
            free(xq);
            free(xd);
            free(s8);
        }
}
#endif

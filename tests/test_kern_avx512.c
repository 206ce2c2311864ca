// tests/test_kern_avx512.c — the AVX-512 path's own activation quantiser
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

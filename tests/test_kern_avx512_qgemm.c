// tests/test_kern_avx512_qgemm.c — the AVX-512 path's GEMM tile
// (kernels/kern_avx512_qgemm.c, pt_qtile_avx512_gemm) equals the scalar
// contract tile (kern_scalar.c) bit for bit: every row count from 1 to 19
// (the 4-row sub-tiles and the single-row tail), batches on both sides of
// the tile's threshold with and without a tail of nvec % 4 vectors, block
// counts with and without a partial group of 8, a vector offset v0 and an
// output stride wider than the rows; random and extreme weights (Q4_0
// nibbles 0 / 15, Q8_0 -128 / 127) and activation quants (-128 / 127, 0),
// scales from fp16 zero to large. Both GEMM tiles run on any AVX-512 CPU:
// kg() (AMD's choice) and kz() (Intel's: two rows per zmm), the latter with
// the activations laid out per call and once per product
// (pt_qgemm_tile_act), so every combination is checked wherever AVX-512 is.
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_internal.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

static uint32_t rs = 0x2545F491u;
static uint32_t rnd32(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// mode 0: random bytes; 1: every weight at its maximum; 2: at its minimum
static void fill_weights(pt_dtype t, uint8_t *w, int64_t nrows, int64_t nb, int mode)
{
    const size_t bs = t == PT_Q8_0 ? 34 : 18;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = w + (size_t)(r * nb + b) * bs;
            for (size_t j = 2; j < bs; j++)
                blk[j] = mode == 0 ? (uint8_t)rnd32() : mode == 1 ? (t == PT_Q8_0 ? 0x7F : 0xFF)
                                                                  : (t == PT_Q8_0 ? 0x80 : 0x00);
            const float d = (rnd32() % 16 == 0) ? 0.0f : (float)(rnd32() % 4000 + 1) * 1e-4f;
            const uint16_t h = pt_f32_to_fp16((rnd32() & 1) ? -d : d);
            memcpy(blk, &h, 2);
        }
}

// mode 0: random quants in [-128, 127]; 1: all 127; 2: all -128
static void fill_act(int8_t *qs, float *d, int64_t nvec, int64_t nb, int mode)
{
    for (int64_t i = 0; i < nvec * nb * 32; i++)
        qs[i] = mode == 0 ? (int8_t)(rnd32() & 0xFF) : mode == 1 ? 127 : -128;
    for (int64_t i = 0; i < nvec * nb; i++)
        d[i] = (rnd32() % 16 == 0) ? 0.0f : pt_fp16_to_f32(pt_f32_to_fp16((float)(rnd32() % 9000 + 1) * 1e-3f));
}

#if defined(__x86_64__)
Test(kern_avx512_qgemm, tile_equals_scalar)
{
    if (!pt_kernel_path_supported(PT_PATH_AVX512)) {
        cr_log_info("AVX-512 VNNI not available on this CPU: skipped");
        return;
    }
    const pt_dtype types[] = {PT_Q4_0, PT_Q8_0};
    const int64_t nbs[] = {1, 7, 8, 9, 33, 64};
    const int64_t nvecs[] = {4, 8, 11, 16, 23, 24, 27, 32, 33};
    const int64_t v0 = 3, extra = 5; // vectors before v0; output stride nrows + extra
    const int kz_prev = pt_qgemm_set_kz(0);
    for (int kz = 0; kz < 2; kz++)
    for (int lay = 0; lay < 1 + kz; lay++) // kz: without and with the per-product layout
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t bi = 0; bi < sizeof nbs / sizeof nbs[0]; bi++)
            for (size_t vi = 0; vi < sizeof nvecs / sizeof nvecs[0]; vi++)
                for (int64_t nrows = 1; nrows <= 19; nrows += (nrows < 9 ? 1 : 5)) {
                    const pt_dtype t = types[ti];
                    const int64_t nb = nbs[bi], nvec = nvecs[vi], ntot = v0 + nvec;
                    const size_t rb = (size_t)nb * (t == PT_Q8_0 ? 34 : 18);
                    const int mode = (int)((bi + vi + (size_t)nrows) % 5); // 0..2 weights, 0..2 acts
                    uint8_t *w = malloc(rb * (size_t)nrows);
                    int8_t *qs = aligned_alloc(64, (size_t)((ntot * nb * 32 + 63) / 64 * 64));
                    float *d = malloc(sizeof(float) * (size_t)(ntot * nb));
                    int32_t *s8 = calloc((size_t)(ntot * nb), sizeof(int32_t));
                    fill_weights(t, w, nrows, nb, mode < 3 ? mode : 0);
                    fill_act(qs, d, ntot, nb, mode >= 3 ? mode - 2 : 0);
                    pt_qgemm_set_kz(kz);
                    pt_q8act a = {.qs = qs, .d = d, .s8 = s8, .nb = nb};
                    void *lb = NULL;
                    if (lay) {
                        lb = aligned_alloc(64, (pt_qgemm_tile_act_bytes(nb, ntot) + 63) / 64 * 64);
                        pt_qgemm_tile_act(t, &a, ntot, lb);
                        cr_assert(a.tq && a.tq_s && a.tq_d);
                    }
                    const int64_t ldy = nrows + extra, ny = nvec * ldy;
                    float *ys = malloc(sizeof(float) * (size_t)ny), *yt = malloc(sizeof(float) * (size_t)ny);
                    memset(ys, 0x7F, sizeof(float) * (size_t)ny);
                    memset(yt, 0x7F, sizeof(float) * (size_t)ny);
                    pt_kern_scalar.qtile(t, w, rb, nrows, &a, v0, nvec, ys, ldy);
                    pt_qtile_avx512_gemm(t, w, rb, nrows, &a, v0, nvec, yt, ldy);
                    for (int64_t i = 0; i < ny; i++)
                        cr_assert_eq(fbits(yt[i]), fbits(ys[i]),
                                     "kz %d layout %d %s nb %ld nvec %ld nrows %ld mode %d: v %ld r %ld: %.9g != %.9g",
                                     kz, lay, pt_dtype_name(t), (long)nb, (long)nvec, (long)nrows, mode,
                                     (long)(i / ldy), (long)(i % ldy), yt[i], ys[i]);
                    free(lb);
                    free(ys);
                    free(yt);
                    free(w);
                    free(qs);
                    free(d);
                    free(s8);
                }
    pt_qgemm_set_kz(kz_prev);
}

// Through pt_gemm (the path's registered tile and per-product layout,
// matmul.c's tiling): prefill-sized Q4_0 and Q8_0 products on the AVX-512
// path, with kz() off and on, equal the scalar path.
Test(kern_avx512_qgemm, gemm_avx512_equals_scalar)
{
    if (!pt_kernel_path_supported(PT_PATH_AVX512)) {
        cr_log_info("AVX-512 VNNI not available on this CPU: skipped");
        return;
    }
    const int64_t rows = 70, cols = 32 * 37, batches[] = {7, 8, 24, 61};
    const int kz_prev = pt_qgemm_set_kz(0);
    for (int kz = 0; kz < 2; kz++)
    for (int ti = 0; ti < 2; ti++) {
    const pt_dtype t = ti ? PT_Q8_0 : PT_Q4_0;
    const size_t rb = (size_t)(cols / 32) * (ti ? 34 : 18);
    uint8_t *w = malloc(rb * (size_t)rows);
    fill_weights(t, w, rows, cols / 32, 0);
    const pt_mat m = {.data = w, .type = t, .rows = rows, .cols = cols};
    pt_qgemm_set_kz(kz);
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
        const int64_t B = batches[bi];
        float *X = malloc(sizeof(float) * (size_t)(B * cols));
        for (int64_t i = 0; i < B * cols; i++)
            X[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
        float *Y0 = malloc(sizeof(float) * (size_t)(B * rows)), *Y1 = malloc(sizeof(float) * (size_t)(B * rows));
        pt_kernel_set_path(PT_PATH_SCALAR);
        pt_gemm(&m, X, B, Y0);
        pt_kernel_set_path(PT_PATH_AVX512);
        pt_gemm(&m, X, B, Y1);
        pt_kernel_set_path(PT_PATH_AUTO);
        for (int64_t i = 0; i < B * rows; i++)
            cr_assert_eq(fbits(Y1[i]), fbits(Y0[i]), "kz %d %s batch %ld v %ld r %ld", kz, pt_dtype_name(t), (long)B,
                         (long)(i / rows), (long)(i % rows));
        free(X);
        free(Y0);
        free(Y1);
    }
    free(w);
    }
    pt_qgemm_set_kz(kz_prev);
}
#endif

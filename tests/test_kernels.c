// tests/test_kernels.c — matrix products and per-token ops.
//
// Three kinds of reference:
//  1. a double-precision dot of the dequantised weights with the input
//     (error within what the weight / activation quantisation allows);
//  2. the numerics contract of kernels/kern_internal.h transcribed here
//     independently (exact integer block dots, ggml x86 lanes of 4 products per block or
//     i % 16, fixed halving reduction) — every path must equal it bit for bit;
//  3. the paths and thread counts against each other, gemm against gemv.
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

static uint64_t rng = 0x1234567887654321ull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float rndf(void) { return (float)(rnd32() & 0xFFFFFF) / 8388608.0f - 1.0f; } // [-1, 1)

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static const pt_dtype all_types[] = {PT_F32, PT_F16, PT_BF16, PT_Q8_0, PT_Q4_0};
static const pt_kernel_path all_paths[] = {PT_PATH_SCALAR, PT_PATH_AVX2, PT_PATH_AVXVNNI, PT_PATH_AVX512};
enum { NPATHS = sizeof all_paths / sizeof all_paths[0] };

// A random matrix in type t plus its dequantised f32 copy.
typedef struct {
    pt_mat m;
    void *data;  // (rows, row_bytes)
    float *deq;  // (rows, cols)
} tmat;

static tmat make_mat(pt_dtype t, int64_t rows, int64_t cols)
{
    tmat r;
    size_t rb = pt_row_bytes(t, (uint64_t)cols);
    r.data = malloc(rb * (size_t)rows + 64);
    r.deq = malloc(sizeof(float) * (size_t)(rows * cols));
    float *tmp = malloc(sizeof(float) * (size_t)cols);
    for (int64_t i = 0; i < rows; i++) {
        float scale = ldexpf(1.0f, (int)(rnd32() % 6) - 3);
        for (int64_t j = 0; j < cols; j++)
            tmp[j] = rndf() * scale * ((rnd32() % 17) == 0 ? 4.0f : 1.0f);
        pt_quantize_row(t, tmp, (char *)r.data + (size_t)i * rb, cols);
        pt_dequantize_row(t, (char *)r.data + (size_t)i * rb, r.deq + i * cols, cols);
    }
    free(tmp);
    r.m = (pt_mat){.data = r.data, .type = t, .rows = rows, .cols = cols};
    return r;
}

static void free_mat(tmat *t)
{
    free(t->data);
    free(t->deq);
}

static float *rand_vec(int64_t n)
{
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        x[i] = rndf() * 2.0f;
    return x;
}

// ---- reference 2: the contract, transcribed -----------------------------

static float halve8(const float a[8])
{
    float t[4], u[2];
    for (int i = 0; i < 4; i++)
        t[i] = a[i] + a[i + 4];
    u[0] = t[0] + t[2];
    u[1] = t[1] + t[3];
    return u[0] + u[1];
}

static float contract_dot(const tmat *W, int64_t r, const float *x)
{
    const int64_t cols = W->m.cols;
    const size_t rb = pt_row_bytes(W->m.type, (uint64_t)cols);
    const uint8_t *row = (const uint8_t *)W->data + (size_t)r * rb;
    if (!pt_dtype_is_block(W->m.type)) {
        float acc[16] = {0}, h[8];
        for (int64_t i = 0; i < cols; i++)
            acc[i % 16] = fmaf(W->deq[r * cols + i], x[i], acc[i % 16]);
        for (int i = 0; i < 8; i++)
            h[i] = acc[i] + acc[i + 8];
        return halve8(h);
    }
    // activation through the library's own (separately tested) ggml quantiser
    const int64_t nb = cols / 32;
    block_q8_0 *xq = malloc(sizeof(block_q8_0) * (size_t)nb);
    pt_quantize_row(PT_Q8_0, x, xq, cols);
    // ggml's x86 order: lane l of block b = the 4 products 4l..4l+3 (Q4_0:
    // values 0..15 the low nibbles, 16..31 the high ones), one fmaf per lane
    float acc[8] = {0};
    for (int64_t b = 0; b < nb; b++) {
        int32_t wv[32];
        uint16_t dw;
        if (W->m.type == PT_Q8_0) {
            const block_q8_0 *wb = (const block_q8_0 *)row + b;
            for (int j = 0; j < 32; j++)
                wv[j] = wb->qs[j];
            dw = wb->d;
        } else {
            const block_q4_0 *wb = (const block_q4_0 *)row + b;
            for (int j = 0; j < 16; j++) {
                wv[j] = (wb->qs[j] & 15) - 8;
                wv[j + 16] = (wb->qs[j] >> 4) - 8;
            }
            dw = wb->d;
        }
        const float dd = pt_fp16_to_f32(dw) * pt_fp16_to_f32(xq[b].d);
        for (int l = 0; l < 8; l++) {
            int32_t s = 0;
            for (int j = 4 * l; j < 4 * l + 4; j++)
                s += wv[j] * xq[b].qs[j];
            acc[l] = fmaf(dd, (float)s, acc[l]);
        }
    }
    free(xq);
    return halve8(acc);
}

// ---- reference 1: double precision ---------------------------------------

static void check_against_double(const tmat *W, const float *x, const float *y)
{
    const int64_t cols = W->m.cols;
    for (int64_t r = 0; r < W->m.rows; r++) {
        double ref = 0, mag = 0, xmax = 0;
        for (int64_t i = 0; i < cols; i++) {
            ref += (double)W->deq[r * cols + i] * x[i];
            mag += fabs((double)W->deq[r * cols + i]);
            xmax = fmax(xmax, fabs(x[i]));
        }
        // activation quantisation moves each x_i by <= 0.5 * amax_block/127
        // (+ fp16 scale rounding); fp32 accumulation adds a little.
        double tol = pt_dtype_is_block(W->m.type) ? mag * xmax * (0.5 / 127 + 127 * 0x1p-11 / 127) + 1e-4
                                                  : mag * xmax * 1e-5 + 1e-6;
        cr_assert(fabs((double)y[r] - ref) <= tol, "%s %ldx%ld row %ld: got %.9g want %.9g (tol %g)",
                  pt_dtype_name(W->m.type), (long)W->m.rows, (long)cols, (long)r, y[r], ref, tol);
    }
}

static bool path_ok(pt_kernel_path p)
{
    if (!pt_kernel_path_supported(p)) {
        cr_log_info("path %d not supported by this CPU: skipped", (int)p);
        return false;
    }
    return true;
}

// gemv on every path == contract bit for bit, and close to the double ref
static void check_shape(pt_dtype t, int64_t rows, int64_t cols)
{
    tmat W = make_mat(t, rows, cols);
    float *x = rand_vec(cols);
    float *y = malloc(sizeof(float) * (size_t)rows);
    float *want = malloc(sizeof(float) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++)
        want[r] = contract_dot(&W, r, x);
    for (size_t p = 0; p < NPATHS; p++) {
        if (!path_ok(all_paths[p]))
            continue;
        pt_kernel_set_path(all_paths[p]);
        memset(y, 0xFF, sizeof(float) * (size_t)rows);
        pt_gemv(&W.m, x, y);
        for (int64_t r = 0; r < rows; r++)
            cr_assert_eq(fbits(y[r]), fbits(want[r]), "%s path %s %ldx%ld row %ld: %.9g != %.9g",
                         pt_dtype_name(t), pt_kernel_path_name(), (long)rows, (long)cols, (long)r,
                         y[r], want[r]);
        check_against_double(&W, x, y);
    }
    pt_kernel_set_path(PT_PATH_AUTO);
    free(x);
    free(y);
    free(want);
    free_mat(&W);
}

Test(matmul, paths_match_contract_and_double_reference)
{
    const int64_t qcols[] = {32, 96, 256, 416, 1056, 7168};
    const int64_t fcols[] = {1, 7, 15, 16, 17, 33, 100, 1001};
    const int64_t rows[] = {1, 3, 37};
    for (size_t ti = 0; ti < 5; ti++)
        for (size_t ri = 0; ri < 3; ri++) {
            if (pt_dtype_is_block(all_types[ti]))
                for (size_t c = 0; c < 6; c++)
                    check_shape(all_types[ti], rows[ri], qcols[c]);
            else
                for (size_t c = 0; c < 8; c++)
                    check_shape(all_types[ti], rows[ri], fcols[c]);
        }
}

Test(matmul, path_names)
{
    pt_kernel_set_path(PT_PATH_SCALAR);
    cr_assert_str_eq(pt_kernel_path_name(), "scalar");
    if (pt_kernel_path_supported(PT_PATH_AVX2)) {
        pt_kernel_set_path(PT_PATH_AVX2);
        cr_assert_str_eq(pt_kernel_path_name(), "avx2");
    }
    if (pt_kernel_path_supported(PT_PATH_AVX512)) {
        pt_kernel_set_path(PT_PATH_AVX512);
        cr_assert_str_eq(pt_kernel_path_name(), "avx512vnni");
    } else {
        cr_log_info("AVX-512 VNNI not available on this CPU: its path is not exercised");
    }
    if (pt_kernel_path_supported(PT_PATH_AVXVNNI)) {
        pt_kernel_set_path(PT_PATH_AVXVNNI);
        cr_assert_str_eq(pt_kernel_path_name(), "avxvnni");
    } else {
        cr_log_info("AVX-VNNI not available on this CPU: its path is not exercised");
    }
    pt_kernel_set_path(PT_PATH_AVX512);
    pt_kernel_path prev = pt_kernel_set_path(PT_PATH_AUTO);
    cr_assert(prev == PT_PATH_AVX512);
    // auto picks the best supported path
    const char *best = pt_kernel_path_supported(PT_PATH_AVX512)    ? "avx512vnni"
                       : pt_kernel_path_supported(PT_PATH_AVXVNNI) ? "avxvnni"
                       : pt_kernel_path_supported(PT_PATH_AVX2)    ? "avx2"
                                                                   : "scalar";
    cr_assert_str_eq(pt_kernel_path_name(), best);
}

// gemm(batch) == gemv per vector, bit for bit; gemm_rows slices too
Test(matmul, gemm_equals_gemv)
{
    const int64_t batches[] = {1, 2, 5, 33, 70};
    for (size_t ti = 0; ti < 5; ti++) {
        pt_dtype t = all_types[ti];
        int64_t rows = 45, cols = pt_dtype_is_block(t) ? 32 * 11 : 203;
        tmat W = make_mat(t, rows, cols);
        for (size_t p = 0; p < NPATHS; p++) {
            if (!path_ok(all_paths[p]))
                continue;
            pt_kernel_set_path(all_paths[p]);
            for (size_t bi = 0; bi < 5; bi++) {
                int64_t B = batches[bi];
                float *X = rand_vec(B * cols);
                float *Y = malloc(sizeof(float) * (size_t)(B * rows));
                float *y1 = malloc(sizeof(float) * (size_t)rows);
                pt_gemm(&W.m, X, B, Y);
                for (int64_t v = 0; v < B; v++) {
                    pt_gemv(&W.m, X + v * cols, y1);
                    for (int64_t r = 0; r < rows; r++)
                        cr_assert_eq(fbits(Y[v * rows + r]), fbits(y1[r]), "%s batch %ld v %ld r %ld",
                                     pt_dtype_name(t), (long)B, (long)v, (long)r);
                }
                // rows [7, 30) into a buffer with a wider stride
                int64_t ldy = 40;
                float *Z = malloc(sizeof(float) * (size_t)(B * ldy));
                pt_gemm_rows(&W.m, 7, 30, X, B, Z, ldy);
                for (int64_t v = 0; v < B; v++)
                    for (int64_t r = 7; r < 30; r++)
                        cr_assert_eq(fbits(Z[v * ldy + r - 7]), fbits(Y[v * rows + r]));
                free(Z);
                free(X);
                free(Y);
                free(y1);
            }
        }
        pt_kernel_set_path(PT_PATH_AUTO);
        free_mat(&W);
    }
}

// pt_gemm_pair == two pt_gemm calls, bit for bit (the gate/up products of
// every FFN go through it), on every path, odd shapes, big enough to be
// split over threads; and a pair of different types falls back correctly.
Test(matmul, gemm_pair_equals_two_gemms)
{
    const int64_t batches[] = {1, 3, 40};
    for (size_t ti = 0; ti < 5; ti++) {
        pt_dtype t = all_types[ti];
        int64_t cols = pt_dtype_is_block(t) ? 32 * 37 : 1203;
        tmat A = make_mat(t, 301, cols), Bm = make_mat(t, 133, cols);
        tmat C = make_mat(t == PT_F32 ? PT_F16 : PT_F32, 133, cols); // another type: fallback
        for (size_t p = 0; p < NPATHS; p++) {
            if (!path_ok(all_paths[p]))
                continue;
            pt_kernel_set_path(all_paths[p]);
            for (size_t bi = 0; bi < 3; bi++) {
                int64_t B = batches[bi];
                float *X = rand_vec(B * cols);
                float *ya = malloc(sizeof(float) * (size_t)(B * 301)), *yb = malloc(sizeof(float) * (size_t)(B * 133));
                float *za = malloc(sizeof(float) * (size_t)(B * 301)), *zb = malloc(sizeof(float) * (size_t)(B * 133));
                for (int k = 0; k < 2; k++) {
                    const tmat *second = k == 0 ? &Bm : &C;
                    pt_gemm(&A.m, X, B, ya);
                    pt_gemm(&second->m, X, B, yb);
                    pt_gemm_pair(&A.m, &second->m, X, B, za, zb);
                    for (int64_t i = 0; i < B * 301; i++)
                        cr_assert_eq(fbits(za[i]), fbits(ya[i]), "%s batch %ld A %ld", pt_dtype_name(t), (long)B, (long)i);
                    for (int64_t i = 0; i < B * 133; i++)
                        cr_assert_eq(fbits(zb[i]), fbits(yb[i]), "%s batch %ld B %ld (%d)", pt_dtype_name(t), (long)B,
                                     (long)i, k);
                }
                free(X);
                free(ya);
                free(yb);
                free(za);
                free(zb);
            }
        }
        pt_kernel_set_path(PT_PATH_AUTO);
        free_mat(&A);
        free_mat(&Bm);
        free_mat(&C);
    }
}

// 1 vs 2 threads on matrices big enough to be split
Test(matmul, thread_count_independent)
{
    for (size_t ti = 0; ti < 5; ti++) {
        pt_dtype t = all_types[ti];
        int64_t rows = 301, cols = pt_dtype_is_block(t) ? 32 * 37 : 1111, B = 9;
        tmat W = make_mat(t, rows, cols);
        float *X = rand_vec(B * cols);
        float *Y1 = malloc(sizeof(float) * (size_t)(B * rows));
        float *Y2 = malloc(sizeof(float) * (size_t)(B * rows));
        for (int g = 0; g < 2; g++) {
            int64_t nb = g ? B : 1;
            omp_set_num_threads(1);
            pt_gemm(&W.m, X, nb, Y1);
            omp_set_num_threads(2);
            pt_gemm(&W.m, X, nb, Y2);
            omp_set_num_threads(3);
            pt_gemm(&W.m, X, nb, Y2 + 0);
            for (int64_t i = 0; i < nb * rows; i++)
                cr_assert_eq(fbits(Y1[i]), fbits(Y2[i]), "%s i %ld", pt_dtype_name(t), (long)i);
        }
        free(X);
        free(Y1);
        free(Y2);
        free_mat(&W);
    }
}

// special values go through the same arithmetic on every path
Test(matmul, zeros_and_negative_zero)
{
    float x[64] = {0};
    x[3] = -0.0f;
    for (size_t ti = 0; ti < 5; ti++) {
        tmat W = make_mat(all_types[ti], 4, 64);
        float y[4];
        for (size_t p = 0; p < NPATHS; p++) {
            if (!pt_kernel_path_supported(all_paths[p]))
                continue;
            pt_kernel_set_path(all_paths[p]);
            pt_gemv(&W.m, x, y);
            for (int r = 0; r < 4; r++)
                cr_assert_eq(fbits(y[r]), 0u, "+0 expected (%s)", pt_kernel_path_name());
        }
        pt_kernel_set_path(PT_PATH_AUTO);
        free_mat(&W);
    }
}

// ---- ops -------------------------------------------------------------------

Test(ops, dot_axpy_paths_and_reference)
{
    const int64_t ns[] = {0, 1, 5, 16, 31, 100, 1027};
    for (size_t k = 0; k < 7; k++) {
        int64_t n = ns[k];
        float *a = rand_vec(n), *b = rand_vec(n), *y0 = rand_vec(n), *y = malloc(sizeof(float) * (size_t)(n + 1));
        // contract order
        float acc[16] = {0}, h[8];
        double ref = 0;
        for (int64_t i = 0; i < n; i++) {
            acc[i % 16] = fmaf(a[i], b[i], acc[i % 16]);
            ref += (double)a[i] * b[i];
        }
        for (int i = 0; i < 8; i++)
            h[i] = acc[i] + acc[i + 8];
        float want = halve8(h);
        for (size_t p = 0; p < NPATHS; p++) {
            if (!pt_kernel_path_supported(all_paths[p]))
                continue;
            pt_kernel_set_path(all_paths[p]);
            float d = pt_dot_f32(a, b, n);
            cr_assert_eq(fbits(d), fbits(want), "dot n=%ld path %s", (long)n, pt_kernel_path_name());
            cr_assert(fabs(d - ref) <= 1e-5 * (double)(n + 1));
            memcpy(y, y0, sizeof(float) * (size_t)n);
            pt_axpy(y, 0.37f, a, n);
            for (int64_t i = 0; i < n; i++)
                cr_assert_eq(fbits(y[i]), fbits(fmaf(0.37f, a[i], y0[i])));
        }
        pt_kernel_set_path(PT_PATH_AUTO);
        free(a);
        free(b);
        free(y0);
        free(y);
    }
}

Test(ops, rmsnorm_softmax_swiglu_against_double)
{
    enum { N = 777 };
    float *x = rand_vec(N), *w = rand_vec(N), *y = malloc(sizeof(float) * N);
    float *y2 = malloc(sizeof(float) * N);
    double ss = 0;
    for (int i = 0; i < N; i++)
        ss += (double)x[i] * x[i];
    double sc = 1.0 / sqrt(ss / N + 1e-6);
    pt_rmsnorm(y, x, w, N, 1e-6f);
    for (int i = 0; i < N; i++)
        cr_assert_float_eq(y[i], x[i] * sc * w[i], 1e-5);
    // in place, and identical on every path
    for (size_t p = 0; p < NPATHS; p++) {
        if (!pt_kernel_path_supported(all_paths[p]))
            continue;
        pt_kernel_set_path(all_paths[p]);
        memcpy(y2, x, sizeof(float) * N);
        pt_rmsnorm(y2, y2, w, N, 1e-6f);
        for (int i = 0; i < N; i++)
            cr_assert_eq(fbits(y2[i]), fbits(y[i]));
    }
    pt_kernel_set_path(PT_PATH_AUTO);

    memcpy(y, x, sizeof(float) * N);
    y[5] = 80.0f; // large logits must not overflow
    double m = 80.0, se = 0;
    for (int i = 0; i < N; i++)
        se += exp((double)(i == 5 ? 80.0f : x[i]) - m);
    pt_softmax(y, N);
    double tot = 0;
    for (int i = 0; i < N; i++) {
        double e = exp((double)(i == 5 ? 80.0f : x[i]) - m) / se;
        cr_assert(fabs(y[i] - e) <= 1e-6 * e + 1e-30, "softmax %d", i);
        tot += y[i];
    }
    cr_assert_float_eq(tot, 1.0, 1e-5);

    pt_swiglu(y, x, w, N);
    for (int i = 0; i < N; i++) {
        double g = x[i], e = g / (1 + exp(-g)) * w[i];
        cr_assert(fabs(y[i] - e) <= 1e-6 * fabs(e) + 1e-7, "swiglu %d", i);
    }
    memcpy(y2, x, sizeof(float) * N);
    pt_swiglu(y2, y2, w, N); // out aliases gate
    for (int i = 0; i < N; i++)
        cr_assert_eq(fbits(y2[i]), fbits(y[i]));
    cr_assert_float_eq(pt_sigmoid(0.0f), 0.5f, 0);
    free(x);
    free(w);
    free(y);
    free(y2);
}

// ---- activation quantisation: every path == ggml's reference -------------

#include "kernels/kern_internal.h"

// ggml's x86 quantize_row_q8_0 (ggml-cpu/arch/x86/quants.c, AVX2 branch),
// written out independently: d = amax / 127 stored as fp16, id = 127 / amax,
// q = x * id rounded half to even (by hand, not through the FPU mode).
static int8_t round_half_even(float v)
{
    float t = truncf(v), f = fabsf(v - t);
    if (f > 0.5f || (f == 0.5f && fmodf(t, 2.0f) != 0.0f))
        t += v < 0 ? -1.0f : 1.0f;
    return (int8_t)t;
}

static void ggml_x86_q8_0(const float *x, block_q8_0 *y, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        y[b].d = pt_f32_to_fp16(amax / 127.f);
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < 32; j++)
            y[b].qs[j] = round_half_even(x[b * 32 + j] * id);
    }
}

static void check_quant_act(void (*qa)(const float *, int64_t, bool, int8_t *, float *, int32_t *),
                            const float *x, int64_t nb)
{
    block_q8_0 *ref = malloc(sizeof(block_q8_0) * (size_t)nb);
    ggml_x86_q8_0(x, ref, nb);
    int8_t *qs = aligned_alloc(64, (size_t)((nb * 32 + 127) / 64 * 64)); // a multiple of 64 (C11)
    float *d = malloc(sizeof(float) * (size_t)nb);
    int32_t *s8 = malloc(sizeof(int32_t) * (size_t)nb);
    for (int paired = 0; paired < 2; paired++) {
        qa(x, nb, paired, qs, d, s8);
        for (int64_t b = 0; b < nb; b++) {
            int32_t sum = 0;
            for (int j = 0; j < 32; j++) {
                int8_t q = qs[pt_act_pos(paired, nb, b, j)];
                cr_assert_eq(q, ref[b].qs[j], "block %ld quant %d: %d != %d (x=%a)", (long)b, j, q,
                             ref[b].qs[j], x[b * 32 + j]);
                sum += q;
            }
            cr_assert_eq(fbits(d[b]), fbits(pt_fp16_to_f32(ref[b].d)));
            cr_assert_eq(s8[b], 8 * sum);
        }
    }
    free(ref);
    free(qs);
    free(d);
    free(s8);
}

Test(quant_act, paths_equal_ggml_x86)
{
    enum { NB = 37 };
    float *x = malloc(sizeof(float) * NB * 32);
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < NB * 32; i++)
            x[i] = rndf() * ldexpf(1.0f, (int)(rnd32() % 20) - 10);
        if (rep % 2 == 0) {
            // exact halves after scaling: amax 127 -> id 1
            for (int b = 0; b < NB; b++) {
                x[b * 32] = 127.0f;
                for (int j = 1; j < 32; j++)
                    x[b * 32 + j] = (float)((int)(rnd32() % 253) - 126) + ((rnd32() & 1) ? 0.5f : -0.5f);
                x[b * 32 + 5] = 0.49999997f;
                x[b * 32 + 6] = -0.49999997f;
                x[b * 32 + 7] = -0.0f;
                x[b * 32 + 8] = 0.5f;
                x[b * 32 + 9] = -126.5f;
            }
        }
        if (rep == 1)
            memset(x, 0, sizeof(float) * 32 * 3); // zero blocks: d = 0
        check_quant_act(pt_quant_act_scalar, x, NB);
        if (pt_kernel_path_supported(PT_PATH_AVX2))
            check_quant_act(pt_quant_act_avx2, x, NB);
    }
    free(x);
}

// ---- attention helpers: identical to the per-row dot / axpy loops ----------

Test(ops, dot_rows_and_axpy_rows_equal_loops)
{
    const int64_t ds[] = {1, 7, 16, 17, 64, 100, 512};
    const int64_t ns[] = {0, 1, 3, 4, 9, 70};
    for (size_t di = 0; di < 7; di++)
        for (size_t ni = 0; ni < 6; ni++) {
            int64_t d = ds[di], n = ns[ni], ld = d + 5;
            float *rows = rand_vec(n * ld + 1), *q = rand_vec(d), *p = rand_vec(n + 1);
            float *want = malloc(sizeof(float) * (size_t)(n + d + 1));
            float *got = malloc(sizeof(float) * (size_t)(n + d + 1));
            float *o0 = rand_vec(d);
            for (size_t pi = 0; pi < NPATHS; pi++) {
                if (!pt_kernel_path_supported(all_paths[pi]))
                    continue;
                pt_kernel_set_path(all_paths[pi]);
                for (int64_t t = 0; t < n; t++)
                    want[t] = pt_dot_f32(q, rows + t * ld, d);
                pt_dot_rows_f32(got, q, rows, n, d, ld);
                for (int64_t t = 0; t < n; t++)
                    cr_assert_eq(fbits(got[t]), fbits(want[t]), "dot_rows d=%ld n=%ld t=%ld path %s", (long)d,
                                 (long)n, (long)t, pt_kernel_path_name());
                memcpy(want, o0, sizeof(float) * (size_t)d);
                memcpy(got, o0, sizeof(float) * (size_t)d);
                for (int64_t t = 0; t < n; t++)
                    pt_axpy(want, p[t], rows + t * ld, d);
                pt_axpy_rows_f32(got, p, rows, n, d, ld);
                for (int64_t i = 0; i < d; i++)
                    cr_assert_eq(fbits(got[i]), fbits(want[i]), "axpy_rows d=%ld n=%ld i=%ld path %s", (long)d,
                                 (long)n, (long)i, pt_kernel_path_name());
            }
            // and the scalar path's loops agree with the SIMD ones
            pt_kernel_set_path(PT_PATH_SCALAR);
            float *s = malloc(sizeof(float) * (size_t)(n + 1));
            pt_dot_rows_f32(s, q, rows, n, d, ld);
            pt_kernel_set_path(PT_PATH_AUTO);
            pt_dot_rows_f32(got, q, rows, n, d, ld);
            for (int64_t t = 0; t < n; t++)
                cr_assert_eq(fbits(s[t]), fbits(got[t]));
            pt_kernel_set_path(PT_PATH_AUTO);
            free(s);
            free(rows);
            free(q);
            free(p);
            free(want);
            free(got);
            free(o0);
        }
}

// Strided rows (attention scores over a cache): == pt_dot_f32 per pair, and
// == pt_gemm on a packed copy for block types.
Test(matmul, strided_rows)
{
    const int64_t n = 45, d = 96, ldf = 107, B = 6;
    float *rows = rand_vec(n * ldf), *Q = rand_vec(B * d), *Y = malloc(sizeof(float) * (size_t)(B * n));
    pt_mat W = {.data = rows, .type = PT_F32, .rows = n, .cols = d};
    for (size_t pi = 0; pi < NPATHS; pi++) {
        if (!pt_kernel_path_supported(all_paths[pi]))
            continue;
        pt_kernel_set_path(all_paths[pi]);
        for (int64_t B1 = 1; B1 <= B; B1 += B - 1) {
            pt_gemm_strided(&W, sizeof(float) * ldf, Q, B1, Y, n);
            for (int64_t b = 0; b < B1; b++)
                for (int64_t t = 0; t < n; t++)
                    cr_assert_eq(fbits(Y[b * n + t]), fbits(pt_dot_f32(Q + b * d, rows + t * ldf, d)),
                                 "path %s b %ld t %ld", pt_kernel_path_name(), (long)b, (long)t);
        }
        // Q8_0 rows with 10 spare bytes between them
        tmat P = make_mat(PT_Q8_0, n, d);
        size_t rb = pt_row_bytes(PT_Q8_0, d), ld = rb + 10;
        uint8_t *sp = malloc(ld * (size_t)n);
        for (int64_t t = 0; t < n; t++)
            memcpy(sp + (size_t)t * ld, (uint8_t *)P.data + (size_t)t * rb, rb);
        float *Y2 = malloc(sizeof(float) * (size_t)(B * n));
        pt_gemm(&P.m, Q, B, Y);
        pt_mat S = {.data = sp, .type = PT_Q8_0, .rows = n, .cols = d};
        pt_gemm_strided(&S, ld, Q, B, Y2, n);
        cr_assert(memcmp(Y, Y2, sizeof(float) * (size_t)(B * n)) == 0);
        free(Y2);
        free(sp);
        free_mat(&P);
    }
    pt_kernel_set_path(PT_PATH_AUTO);
    free(rows);
    free(Q);
    free(Y);
}

// kernels/ops.c — per-token element-wise work, in the arithmetic of ggml's
// x86 (AVX-512) CPU build, so that on the same GGUF file Petrel's floats
// equal llama.cpp's bit for bit and no 8-bit activation rounding flips
// (issue 11; docs/llamacpp-files.md). Every function here is plain C whose
// operations (fmaf, +, *, /, double sums) are IEEE-exact, so the result is
// the same on every code path; the "fast" clones below only let the
// compiler use FMA instructions and vectors for the same operations.
//
// What is mirrored (each checked bit for bit against llama.cpp's own
// intermediate tensors on tiny-dsv3 Q2_K-mix):
//  - RMS norm: ggml_compute_forward_rms_norm_f32 (squares in float, summed
//    in double in order; mean rounded to float);
//  - exp: ggml_v_expf's AVX-512 polynomial for every full 16-lane chunk,
//    libm's expf for a tail (as ggml_vec_soft_max_f32 / ggml_vec_swiglu_f32);
//  - softmax: ggml_soft_max_ext with its -inf mask over key positions,
//    chunk sums reduced in _mm512_reduce_add_ps order and added in double,
//    then multiplied by (float)(1 / sum);
//  - F32 dot: ggml_vec_dot_f32 (4 x 16 lanes over 64-chunks, reduce, then
//    the tail added one product at a time, not fused), the attention
//    scores over the F32 KV cache;
//  - weighted sum of cache rows: llamafile's tinyBLAS sgemm (one 16-lane
//    fused accumulator per output over key positions), the kqv product.
#include "kernels/ops.h"
#include "kernels/kern_internal.h"

#include <assert.h>
#include <math.h>
#include <string.h>

// Compiles f twice: for any x86-64 and for Haswell (FMA, AVX2), chosen
// once at load (ifunc). Same IEEE operations, so the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PT_FAST __attribute__((target_clones("avx512f", "fma", "default")))
#else
#define PT_FAST
#endif

float pt_dot_f32(const float *a, const float *b, int64_t n)
{
    assert(n >= 0);
    return pt_kern_current()->dot_f32(a, b, n);
}

void pt_axpy(float *y, float a, const float *x, int64_t n)
{
    assert(n >= 0);
    pt_kern_current()->axpy(y, a, x, n);
}

void pt_dot_rows_f32(float *out, const float *q, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    assert(n >= 0 && d >= 0 && (n <= 1 || ld >= d));
    pt_kern_current()->dot_rows(out, q, rows, n, d, ld);
}

void pt_axpy_rows_f32(float *out, const float *p, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    assert(n >= 0 && d >= 0 && (n <= 1 || ld >= d));
    pt_kern_current()->axpy_rows(out, p, rows, n, d, ld);
}

// ggml_compute_forward_rms_norm_f32 then the weight multiply:
// sum = double sum of (float)(x_i * x_i) in order, mean = (float)(sum / n),
// scale = 1 / sqrtf(mean + eps), y_i = x_i * scale * w_i.
PT_FAST void pt_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    assert(n > 0);
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

// One lane of ggml_v_expf (AVX-512): exp(x) = 2^n * p(b) with n = round(x /
// ln 2) by the 1.5 * 2^23 trick, b = x - n ln 2 in two fused steps, p a
// degree-5 polynomial in Estrin form; |n| > 192 gives 0 or +inf. Branch-free
// so that the loops calling it vectorise.
static inline float pow2i(int k) // 2^k, -126 <= k <= 127
{
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)(k + 127) << 23};
    return v.f;
}

static inline float v_expf(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    // j * 2^n as vscalefps: two exact power-of-two factors, so that a
    // subnormal or overflowing result is rounded once.
    const float nlo = n >= -192.0f ? n : -192.0f; // (NaN: -192, overridden by j's NaN)
    const int k = (int)(nlo <= 192.0f ? nlo : 192.0f);
    const int k1 = k < -126 ? k + 126 : k > 127 ? k - 127 : 0;
    const float res = j * pow2i(k1) * pow2i(k - k1);
    const float alt = n > 0 ? INFINITY : 0.0f; // (x = -inf gives n = -inf: 0)
    return fabsf(n) > 192.0f ? alt : res;
}

float pt_expf_ggml(float x)
{
    return v_expf(x);
}

// The sum of one 16-lane register as _mm512_reduce_add_ps computes it
// (GCC's halving: 512 -> 256 -> 128 -> 64 -> 32 bits), = pt_reduce16.
static inline float reduce16(const float a[16])
{
    return pt_reduce16(a);
}

// ggml_soft_max_ext over key positions: x[j] is the (already scaled)
// score of position pos[j] (ascending; pos NULL: position j), every other
// position is masked (-inf, exp 0). The exps of each aligned 16-position
// chunk (v_expf) are reduced as one register and the chunk sums added in
// double; the probabilities are exp * (float)(1 / sum).
PT_FAST void pt_softmax_at(float *x, const int32_t *pos, int64_t n)
{
    assert(n > 0);
    float m = x[0];
    for (int64_t i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    double sum = 0;
    if (!pos) { // positions 0..n-1: whole chunks, the last one zero-padded
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            x[i] = v_expf(x[i] - m);
        for (int64_t i0 = 0; i0 < n; i0 += 16) {
            float lane[16];
            memset(lane, 0, sizeof lane);
            memcpy(lane, x + i0, sizeof(float) * (size_t)(n - i0 < 16 ? n - i0 : 16));
            sum += (double)reduce16(lane);
        }
        const float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            x[i] *= inv;
        return;
    }
    float lane[16];
    memset(lane, 0, sizeof lane);
    int64_t chunk = pos[0] / 16;
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = pos[i];
        assert(i == 0 || pos[i] > pos[i - 1]);
        if (p / 16 != chunk) {
            sum += (double)reduce16(lane);
            memset(lane, 0, sizeof lane);
            chunk = p / 16;
        }
        x[i] = v_expf(x[i] - m);
        lane[p % 16] = x[i];
    }
    sum += (double)reduce16(lane);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

void pt_softmax(float *x, int64_t n)
{
    pt_softmax_at(x, NULL, n);
}

// ggml_vec_swiglu_f32: full 16-chunks silu(g) = g / (1 + v_expf(0 - g)),
// the tail with libm's expf; times up (each rounded separately).
PT_FAST void pt_swiglu(float *out, const float *gate, const float *up, int64_t n)
{
    assert(n >= 0);
    const int64_t nv = n / 16 * 16;
#pragma omp simd
    for (int64_t i = 0; i < nv; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + v_expf(0.0f - g)) * up[i];
    }
    for (int64_t i = nv; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// ggml_vec_dot_f32 (AVX-512 build): 4 accumulators of 16 lanes over each
// 64-value chunk (fused), acc0 + acc2, acc1 + acc3, then those two, the
// register reduced, then the tail's products added one by one unfused.
PT_FAST float pt_dot_f32_ggml(const float *a, const float *b, int64_t n)
{
    assert(n >= 0);
    float acc[4][16];
    memset(acc, 0, sizeof acc);
    const int64_t np = n / 64 * 64;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++)
                acc[j][l] = fmaf(a[i + j * 16 + l], b[i + j * 16 + l], acc[j][l]);
    for (int l = 0; l < 16; l++) {
        acc[0][l] += acc[2][l];
        acc[1][l] += acc[3][l];
    }
    for (int l = 0; l < 16; l++)
        acc[0][l] += acc[1][l];
    float s = reduce16(acc[0]);
    for (int64_t i = np; i < n; i++) {
        const float p = a[i] * b[i];
        s += p;
    }
    return s;
}

// tinyBLAS (llamafile sgemm, AVX-512) for V^T p over the key positions:
// out[i] = reduce16(lanes), lane L accumulating fmaf(p[j], row_j[i], .) over
// the keys whose position is L mod 16, in position order (masked positions
// add exact zeros). Rows: row j at rows + (pos ? pos[j] : j) * ld. The 16
// lanes of WC columns at a time live in a stack block (16 KiB), each key's
// row added to its lane's vector (an axpy), then the lanes reduced.
PT_FAST void pt_wsum_rows(float *out, const float *p, const int32_t *pos, const float *rows, int64_t n, int64_t d,
                          int64_t ld)
{
    assert(n >= 0 && d >= 0);
    enum { WC = 256 };
    float acc[16][WC]; // (lane, column)
    for (int64_t i0 = 0; i0 < d; i0 += WC) {
        const int w = d - i0 < WC ? (int)(d - i0) : WC;
        for (int k = 0; k < 16; k++)
            memset(acc[k], 0, sizeof(float) * (size_t)w);
        for (int64_t j = 0; j < n; j++) {
            const int64_t t = pos ? pos[j] : j;
            const float *r = rows + (size_t)t * (size_t)ld + i0;
            float *a = acc[t % 16];
            const float pj = p[j];
#pragma omp simd
            for (int c = 0; c < w; c++)
                a[c] = fmaf(pj, r[c], a[c]);
        }
        // reduce16 per column: t_k = a_k + a_{k+8}, ((t0+t4)+(t2+t6)) + ((t1+t5)+(t3+t7))
#pragma omp simd
        for (int c = 0; c < w; c++) {
            const float t0 = acc[0][c] + acc[8][c], t1 = acc[1][c] + acc[9][c];
            const float t2 = acc[2][c] + acc[10][c], t3 = acc[3][c] + acc[11][c];
            const float t4 = acc[4][c] + acc[12][c], t5 = acc[5][c] + acc[13][c];
            const float t6 = acc[6][c] + acc[14][c], t7 = acc[7][c] + acc[15][c];
            out[i0 + c] = ((t0 + t4) + (t2 + t6)) + ((t1 + t5) + (t3 + t7));
        }
    }
}

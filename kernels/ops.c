// kernels/ops.c — per-token element-wise work, in the arithmetic of ggml's
// x86 (AVX-512) CPU build, so that on the same GGUF file Petrel's floats
// equal llama.cpp's bit for bit and no 8-bit activation rounding flips
// (issue 11; docs/llamacpp-files.md). Every function here is plain C whose
// operations (fmaf, +, *, /, double sums) are IEEE-exact, so the result is
// the same on every code path; the AVX2 and AVX-512 builds of the same C
// (kernels/ops_ggml_body.h) only let the compiler use FMA instructions and
// vectors for those operations.
//
// What is mirrored (each checked bit for bit against llama.cpp's own
// intermediate tensors: tests/test_llamacpp_ops.c):
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
#include "kernels/qtypes.h"

#include <assert.h>
#include <math.h>
#include <string.h>


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
    // n as an integer from z's mantissa (exact while |n| < 2^22; beyond
    // that, or for NaN, the select below overrides the result).
    union {
        float f;
        uint32_t u;
    } zb = {.f = z}, rb = {.f = r};
    const int k = (int)(zb.u - rb.u);
    int k2 = k < -126 ? -126 : k; // min / max: no control flow, so the loops vectorise on AVX2 too
    k2 = k2 > 127 ? 127 : k2;
    const float res = j * pow2i(k - k2) * pow2i(k2);
    // |n| > 192: +inf if n > 0 else 0 (x = -inf gives n = -inf: 0), selected
    // with bit masks (no control flow, so the loops vectorise on AVX2 too).
    const uint32_t big = 0u - (uint32_t)(fabsf(n) > 192.0f), pos = 0u - (uint32_t)(n > 0);
    union {
        float f;
        uint32_t u;
    } out = {.f = res};
    out.u = (out.u & ~big) | (0x7f800000u & pos & big);
    return out.f;
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

// The ops once per code path (kernels/ops_ggml_body.h): plain (any CPU,
// fmaf from libm), AVX2 + FMA, AVX-512; the current kernel path
// (pt_kernel_set_path / PETREL_KERNELS) chooses, so tests can run each.
#define OPS_ATTR
#define OPS_FN(name) name##_generic
#include "kernels/ops_ggml_body.h"
#undef OPS_ATTR
#undef OPS_FN
#if defined(__x86_64__) && defined(__GNUC__)
#define OPS_X86 1
#define OPS_ATTR __attribute__((target("avx2,fma")))
#define OPS_FN(name) name##_avx2
#include "kernels/ops_ggml_body.h"
#undef OPS_ATTR
#undef OPS_FN
#define OPS_ATTR __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define OPS_FN(name) name##_avx512
#include "kernels/ops_ggml_body.h"
#undef OPS_ATTR
#undef OPS_FN
#endif

// The variant for the current kernel path.
#if OPS_X86
#define OPS_PICK(name)                                                                                     \
    (pt_kern_current()->qpath == PT_QPATH_AVX512 ? name##_avx512                                          \
     : pt_kern_current()->qpath == PT_QPATH_AVX2 ? name##_avx2                                            \
                                                 : name##_generic)
#else
#define OPS_PICK(name) name##_generic
#endif

void pt_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    OPS_PICK(rmsnorm)(y, x, w, n, eps);
}

void pt_softmax_at(float *x, const int32_t *pos, int64_t n)
{
    OPS_PICK(softmax_at)(x, pos, n);
}

void pt_swiglu(float *out, const float *gate, const float *up, int64_t n)
{
    OPS_PICK(swiglu)(out, gate, up, n);
}

float pt_dot_f32_ggml(const float *a, const float *b, int64_t n)
{
    return OPS_PICK(dot_f32_ggml)(a, b, n);
}

void pt_wsum_rows(float *out, const float *p, const int32_t *pos, const float *rows, int64_t n, int64_t d,
                  int64_t ld)
{
    OPS_PICK(wsum_rows)(out, p, pos, rows, n, d, ld);
}

void pt_softmax(float *x, int64_t n)
{
    pt_softmax_at(x, NULL, n);
}


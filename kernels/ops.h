// kernels/ops.h — the per-token work besides the matrix products.
// All functions are deterministic with a fixed accumulation order.
#ifndef PETREL_KERNELS_OPS_H
#define PETREL_KERNELS_OPS_H

#include <stdint.h>

// These follow ggml's x86 (AVX-512) CPU arithmetic bit for bit (see ops.c).
// y = x * rsqrt(mean(x^2) + eps) * w   (y may alias x; squares summed in double)
void pt_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
// In-place softmax over n values (positions 0..n-1), as ggml_soft_max_ext.
void pt_softmax(float *x, int64_t n);
// Same over n scores of key positions pos[0..n) (ascending; NULL: 0..n-1),
// every other position masked, as ggml_soft_max_ext with a -inf mask.
void pt_softmax_at(float *x, const int32_t *pos, int64_t n);
// out[i] = silu(gate[i]) * up[i]   (out may alias gate; ggml_vec_swiglu_f32,
// whose 16-chunks count from out[0]: exact per row when a row is whole 16s)
void pt_swiglu(float *out, const float *gate, const float *up, int64_t n);
// exp(x) as one lane of ggml_v_expf (AVX-512).
float pt_expf_ggml(float x);
// a . b in ggml_vec_dot_f32's AVX-512 order (attention scores).
float pt_dot_f32_ggml(const float *a, const float *b, int64_t n);
// out (d) = sum_j p[j] * row j (row j at rows + (pos ? pos[j] : j) * ld), in
// llamafile sgemm's order: 16 fused lanes by key position mod 16 (kqv).
void pt_wsum_rows(float *out, const float *p, const int32_t *pos, const float *rows, int64_t n, int64_t d,
                  int64_t ld);
static inline float pt_sigmoid(float x);
// Dot product of two f32 vectors in the fixed order of kernels/matmul.h.
float pt_dot_f32(const float *a, const float *b, int64_t n);
// y += a * x   (y_i = fmaf(a, x_i, y_i))
void pt_axpy(float *y, float a, const float *x, int64_t n);

// Attention over a cache of n rows (row t at rows + t * ld, d values used):
// out[t] = pt_dot_f32(q, row t, d), bit for bit, but several rows at a
// time (scores over c_kv / k_rope in absorbed MLA).
void pt_dot_rows_f32(float *out, const float *q, const float *rows, int64_t n, int64_t d, int64_t ld);
// out = out + sum_t p[t] * row t, exactly what the n calls
// pt_axpy(out, p[t], row t, d) (t = 0 .. n-1, in order) give, with out kept
// in registers across rows (the weighted sum of latents in absorbed MLA).
void pt_axpy_rows_f32(float *out, const float *p, const float *rows, int64_t n, int64_t d, int64_t ld);

#include <math.h>
static inline float pt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

#endif

// kernels/ops.h — the per-token work besides the matrix products.
// All functions are deterministic with a fixed accumulation order.
#ifndef PETREL_KERNELS_OPS_H
#define PETREL_KERNELS_OPS_H

#include <stdint.h>

// y = x * rsqrt(mean(x^2) + eps) * w   (y may alias x)
void pt_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
// In-place softmax over n values.
void pt_softmax(float *x, int64_t n);
// out[i] = silu(gate[i]) * up[i]   (out may alias gate)
void pt_swiglu(float *out, const float *gate, const float *up, int64_t n);
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

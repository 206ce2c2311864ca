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

// Attention of several queries over the same keys (absorbed MLA: every head
// of a token, and every token of a chunk, attends over one latent cache), as
// matrix-matrix products whose every output has the bits of the one-pair
// functions above, so that a batched prefill equals token-by-token decoding:
//   S[q * lds + t] = pt_dot_f32_ggml(Q + q * ldq, K + t * ldk, d) * scale
// for q < nq, t < n. kT (may be NULL): the keys' values past their last
// whole 64 (d - d/64*64 of them, see pt_attn_key_tail) transposed, kT[(i -
// d/64*64) * ldt + t], so that those sequential tail sums run 8 keys at a time.
void pt_attn_scores(float *S, int64_t lds, const float *Q, int nq, int64_t ldq, const float *K, int64_t n, int64_t d,
                    int64_t ldk, const float *kT, int64_t ldt, float scale);
// kT for pt_attn_scores: kT[(i - d/64*64) * ldt + t] = K[t * ldk + i], t < n.
void pt_attn_key_tail(float *kT, int64_t ldt, const float *K, int64_t n, int64_t d, int64_t ldk);
// O[q * ldo .. + d) = pt_wsum_rows(P + q * ldp, NULL, V, n, d, ldv) for q < nq,
// bit for bit. Vp (may be NULL): V's rows packed by pt_attn_pack_v (of at
// least n rows; kstride its return value), which the x86 paths read instead.
void pt_attn_wsum(float *O, int64_t ldo, const float *P, int64_t ldp, int nq, const float *V, int64_t ldv,
                  const float *Vp, int64_t kstride, int64_t n, int64_t d);
// Packs rows 0..n-1 of V (d values each, d a multiple of 16) for
// pt_attn_wsum: the keys j = L, L+16, ... of each 16-column block
// contiguous, Vp[((c0/16 * 16 + j % 16) * kstride + j / 16) * 16 + c % 16],
// n * d floats in all (none when d is not a multiple of 16). Returns kstride = ceil(n / 16).
int64_t pt_attn_pack_v(float *Vp, const float *V, int64_t n, int64_t d, int64_t ldv);
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

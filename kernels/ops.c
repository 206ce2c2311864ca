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


// Batched attention (kernels/ops.h: pt_attn_scores, pt_attn_wsum). The
// generic path runs the one-pair functions pair by pair; the x86 paths run
// the same IEEE operations in register tiles (every (query, key) pair's 64
// fused lanes, their combination and the sequential tail; every (query,
// column) output's 16 fused lanes by key position mod 16), so every path
// gives the one-pair bits.
void pt_attn_key_tail(float *kT, int64_t ldt, const float *K, int64_t n, int64_t d, int64_t ldk)
{
    const int64_t np = d / 64 * 64;
    assert(n >= 0 && (np == d || ldt >= n));
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = np; i < d; i++)
            kT[(i - np) * ldt + t] = K[t * ldk + i];
}

static void attn_scores_generic(float *S, int64_t lds, const float *Q, int nq, int64_t ldq, const float *K, int64_t n,
                                int64_t d, int64_t ldk, float scale)
{
    for (int q = 0; q < nq; q++)
        for (int64_t t = 0; t < n; t++)
            S[q * lds + t] = OPS_PICK(dot_f32_ggml)(Q + q * ldq, K + t * ldk, d) * scale;
}

static void attn_wsum_generic(float *O, int64_t ldo, const float *P, int64_t ldp, int nq, const float *V, int64_t n,
                              int64_t d, int64_t ldv)
{
    for (int q = 0; q < nq; q++)
        OPS_PICK(wsum_rows)(O + q * ldo, P + q * ldp, NULL, V, n, d, ldv);
}

#if OPS_X86
#include <immintrin.h>

#define AVX2_ATTR __attribute__((target("avx2,fma")))

// ((t0+t4)+(t2+t6)) + ((t1+t5)+(t3+t7)) of one register: pt_reduce8.
static AVX2_ATTR inline float hsum8(__m256 t)
{
    const __m128 y = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    const __m128 z = _mm_add_ps(y, _mm_movehl_ps(y, y));
    return _mm_cvtss_f32(_mm_add_ss(z, _mm_shuffle_ps(z, z, 1)));
}

// The scores' tail: the products of values np = d / 64 * 64 .. d-1 added
// one at a time, in order, unfused (as ggml's leftover loop), then the
// scale; keys from `from` on (those before it were done by the caller),
// 8 keys at a time from the transposed tail kT when there is one.
static AVX2_ATTR void scores_tail_avx2(float *S, int64_t lds, const float *Q, int nq, int64_t ldq, const float *K,
                                       int64_t n, int64_t d, int64_t ldk, const float *kT, int64_t ldt, float scale,
                                       int64_t from)
{
    const int64_t np = d / 64 * 64;
    for (int q = 0; q < nq; q++) {
        const float *x = Q + q * ldq;
        float *s = S + q * lds;
        int64_t t = from;
        if (kT)
            for (; t + 8 <= n; t += 8) {
                __m256 v = _mm256_loadu_ps(s + t);
                for (int64_t i = np; i < d; i++)
                    v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(x[i]), _mm256_loadu_ps(kT + (i - np) * ldt + t)));
                _mm256_storeu_ps(s + t, _mm256_mul_ps(v, _mm256_set1_ps(scale)));
            }
        for (; t < n; t++) {
            float v = s[t];
            const float *k = K + t * ldk;
            for (int64_t i = np; i < d; i++) {
                const float p = x[i] * k[i];
                v += p;
            }
            s[t] = v * scale;
        }
    }
}

// Scores: tiles of 2 queries x 4 keys. Lane group g (lanes 8g .. 8g+7 of the
// 64 of ggml_vec_dot_f32's four 16-lane accumulators) of the 8 pairs runs
// over every whole 64-chunk in order; the groups combine as acc0 + acc2,
// acc1 + acc3, then their sum, reduced as one 16-lane register. Edge tiles
// repeat the last query / key (results dropped). The tail adds its
// products one by one, unfused, 8 keys at a time from kT.
static AVX2_ATTR void attn_scores_avx2(float *S, int64_t lds, const float *Q, int nq, int64_t ldq, const float *K,
                                       int64_t n, int64_t d, int64_t ldk, const float *kT, int64_t ldt, float scale)
{
    const int64_t np = d / 64 * 64, nc = np / 64;
    for (int64_t t0 = 0; t0 < n; t0 += 4) { // 4 keys (in L1) against every query
        const float *kr[4];
        for (int b = 0; b < 4; b++)
            kr[b] = K + (t0 + b < n ? t0 + b : n - 1) * ldk;
        for (int q0 = 0; q0 < nq; q0 += 2) {
            const float *qr[2];
            for (int a = 0; a < 2; a++)
                qr[a] = Q + (q0 + a < nq ? q0 + a : nq - 1) * ldq;
            float lane[8][64]; // (pair a*4+b, lane)
            for (int g = 0; g < 8; g++) {
                __m256 acc[2][4];
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 4; b++)
                        acc[a][b] = _mm256_setzero_ps();
                for (int64_t c = 0; c < nc; c++) {
                    const int64_t o = c * 64 + g * 8;
                    const __m256 x0 = _mm256_loadu_ps(qr[0] + o), x1 = _mm256_loadu_ps(qr[1] + o);
                    for (int b = 0; b < 4; b++) {
                        const __m256 y = _mm256_loadu_ps(kr[b] + o);
                        acc[0][b] = _mm256_fmadd_ps(x0, y, acc[0][b]);
                        acc[1][b] = _mm256_fmadd_ps(x1, y, acc[1][b]);
                    }
                }
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 4; b++)
                        _mm256_storeu_ps(&lane[a * 4 + b][g * 8], acc[a][b]);
            }
            for (int a = 0; a < 2 && q0 + a < nq; a++)
                for (int b = 0; b < 4 && t0 + b < n; b++) {
                    const float *l = lane[a * 4 + b];
                    const __m256 lo = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(l), _mm256_loadu_ps(l + 32)),
                                                    _mm256_add_ps(_mm256_loadu_ps(l + 16), _mm256_loadu_ps(l + 48)));
                    const __m256 hi = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(l + 8), _mm256_loadu_ps(l + 40)),
                                                    _mm256_add_ps(_mm256_loadu_ps(l + 24), _mm256_loadu_ps(l + 56)));
                    S[(q0 + a) * lds + t0 + b] = hsum8(_mm256_add_ps(lo, hi));
                }
        }
    }
    scores_tail_avx2(S, lds, Q, nq, ldq, K, n, d, ldk, kT, ldt, scale, 0);
}

// Weighted sums: tiles of 4 queries x 16 columns. Lane L (keys L, L+16, ...,
// in order) of every (query, column) is one fused accumulator, as tinyBLAS'
// 16 lanes; the 16 lanes are then reduced as pt_reduce16 per column. The
// keys of one (column block, lane) lie contiguous in Vp (pt_attn_pack_v).
static AVX2_ATTR void attn_wsum_avx2(float *O, int64_t ldo, const float *P, int64_t ldp, int nq, const float *Vp,
                                     int64_t kstride, int64_t n, int64_t d)
{
    for (int64_t c0 = 0; c0 < d; c0 += 16) {
        for (int q0 = 0; q0 < nq; q0 += 4) {
            const float *pr[4];
            for (int a = 0; a < 4; a++)
                pr[a] = P + (q0 + a < nq ? q0 + a : nq - 1) * ldp;
            float lane[16][4][16]; // (lane, query, column)
            for (int L = 0; L < 16; L++) {
                __m256 acc[4][2];
                for (int a = 0; a < 4; a++)
                    acc[a][0] = acc[a][1] = _mm256_setzero_ps();
                const float *r = Vp + ((c0 / 16) * 16 + L) * kstride * 16;
                for (int64_t j = L; j < n; j += 16, r += 16) {
                    const __m256 r0 = _mm256_loadu_ps(r), r1 = _mm256_loadu_ps(r + 8);
                    for (int a = 0; a < 4; a++) {
                        const __m256 p = _mm256_broadcast_ss(pr[a] + j);
                        acc[a][0] = _mm256_fmadd_ps(p, r0, acc[a][0]);
                        acc[a][1] = _mm256_fmadd_ps(p, r1, acc[a][1]);
                    }
                }
                for (int a = 0; a < 4; a++) {
                    _mm256_storeu_ps(&lane[L][a][0], acc[a][0]);
                    _mm256_storeu_ps(&lane[L][a][8], acc[a][1]);
                }
            }
            for (int a = 0; a < 4 && q0 + a < nq; a++)
                for (int h = 0; h < 16; h += 8) {
                    __m256 t[8];
                    for (int k = 0; k < 8; k++)
                        t[k] = _mm256_add_ps(_mm256_loadu_ps(&lane[k][a][h]), _mm256_loadu_ps(&lane[k + 8][a][h]));
                    const __m256 u = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(t[0], t[4]), _mm256_add_ps(t[2], t[6])),
                                                   _mm256_add_ps(_mm256_add_ps(t[1], t[5]), _mm256_add_ps(t[3], t[7])));
                    _mm256_storeu_ps(O + (q0 + a) * ldo + c0 + h, u);
                }
        }
    }
}

// The same two kernels on zmm (the AVX-512 path): the same fused lanes in
// the same order, twice as many per instruction.
#define AVX512_ATTR __attribute__((target("avx2,fma,avx512f,avx512vl")))

// Scores: tiles of 4 queries x 4 keys; lane block j (lanes 16j .. 16j+15
// of the 64: ggml's accumulator j) of the 16 pairs runs over every whole
// 64-chunk in order, then per pair (acc0 + acc2) + (acc1 + acc3), its two
// halves added and reduced as pt_reduce8: what attn_scores_avx2 computes.
static AVX512_ATTR void attn_scores_avx512(float *S, int64_t lds, const float *Q, int nq, int64_t ldq, const float *K,
                                           int64_t n, int64_t d, int64_t ldk, const float *kT, int64_t ldt, float scale)
{
    const int64_t np = d / 64 * 64, nc = np / 64;
    for (int64_t t0 = 0; t0 < n; t0 += 4) {
        const float *kr[4];
        for (int b = 0; b < 4; b++)
            kr[b] = K + (t0 + b < n ? t0 + b : n - 1) * ldk;
        for (int q0 = 0; q0 < nq; q0 += 4) {
            const float *qr[4];
            for (int a = 0; a < 4; a++)
                qr[a] = Q + (q0 + a < nq ? q0 + a : nq - 1) * ldq;
            __m512 blk[4][4][4]; // (lane block j, query, key)
            for (int j = 0; j < 4; j++) {
                __m512 acc[4][4];
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 4; b++)
                        acc[a][b] = _mm512_setzero_ps();
                for (int64_t c = 0; c < nc; c++) {
                    const int64_t o = c * 64 + j * 16;
                    __m512 x[4];
                    for (int a = 0; a < 4; a++)
                        x[a] = _mm512_loadu_ps(qr[a] + o);
                    for (int b = 0; b < 4; b++) {
                        const __m512 y = _mm512_loadu_ps(kr[b] + o);
                        for (int a = 0; a < 4; a++)
                            acc[a][b] = _mm512_fmadd_ps(x[a], y, acc[a][b]);
                    }
                }
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 4; b++)
                        blk[j][a][b] = acc[a][b];
            }
            for (int a = 0; a < 4 && q0 + a < nq; a++)
                for (int b = 0; b < 4 && t0 + b < n; b++) {
                    const __m512 u = _mm512_add_ps(_mm512_add_ps(blk[0][a][b], blk[2][a][b]),
                                                   _mm512_add_ps(blk[1][a][b], blk[3][a][b]));
                    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1));
                    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(u), hi);
                    S[(q0 + a) * lds + t0 + b] = hsum8(h);
                }
        }
    }
    // The tail: 16 keys at a time from kT here, the rest as the AVX2 kernel.
    const int64_t n16 = kT ? n / 16 * 16 : 0;
    for (int q = 0; q < nq; q++) {
        const float *x = Q + q * ldq;
        float *s = S + q * lds;
        for (int64_t t = 0; t < n16; t += 16) {
            __m512 v = _mm512_loadu_ps(s + t);
            for (int64_t i = np; i < d; i++)
                v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(x[i]), _mm512_loadu_ps(kT + (i - np) * ldt + t)));
            _mm512_storeu_ps(s + t, _mm512_mul_ps(v, _mm512_set1_ps(scale)));
        }
    }
    scores_tail_avx2(S, lds, Q, nq, ldq, K, n, d, ldk, kT, ldt, scale, n16);
}

// Weighted sums: tiles of 8 queries x 16 columns, one zmm per (lane,
// query): lane L (keys L, L+16, ..., in order) of the 16 columns; then per
// column pt_reduce16 over the lanes: what attn_wsum_avx2 computes.
static AVX512_ATTR void attn_wsum_avx512(float *O, int64_t ldo, const float *P, int64_t ldp, int nq, const float *Vp,
                                         int64_t kstride, int64_t n, int64_t d)
{
    enum { QT = 8 };
    for (int64_t c0 = 0; c0 < d; c0 += 16) {
        for (int q0 = 0; q0 < nq; q0 += QT) {
            const float *pr[QT];
            for (int a = 0; a < QT; a++)
                pr[a] = P + (q0 + a < nq ? q0 + a : nq - 1) * ldp;
            __m512 lane[16][QT]; // (lane, query): the 16 columns
            for (int L = 0; L < 16; L++) {
                __m512 acc[QT];
                for (int a = 0; a < QT; a++)
                    acc[a] = _mm512_setzero_ps();
                const float *r = Vp + ((c0 / 16) * 16 + L) * kstride * 16;
                for (int64_t j = L; j < n; j += 16, r += 16) {
                    const __m512 rv = _mm512_loadu_ps(r);
                    for (int a = 0; a < QT; a++)
                        acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(pr[a][j]), rv, acc[a]);
                }
                for (int a = 0; a < QT; a++)
                    lane[L][a] = acc[a];
            }
            for (int a = 0; a < QT && q0 + a < nq; a++) {
                __m512 t[8];
                for (int k = 0; k < 8; k++)
                    t[k] = _mm512_add_ps(lane[k][a], lane[k + 8][a]);
                const __m512 u = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(t[0], t[4]), _mm512_add_ps(t[2], t[6])),
                                               _mm512_add_ps(_mm512_add_ps(t[1], t[5]), _mm512_add_ps(t[3], t[7])));
                _mm512_storeu_ps(O + (q0 + a) * ldo + c0, u);
            }
        }
    }
}
#endif

void pt_attn_scores(float *S, int64_t lds, const float *Q, int nq, int64_t ldq, const float *K, int64_t n, int64_t d,
                    int64_t ldk, const float *kT, int64_t ldt, float scale)
{
    assert(nq >= 0 && n >= 0 && d >= 0 && (nq <= 1 || lds >= n) && (n <= 1 || ldk >= d));
#if OPS_X86
    if (pt_kern_current()->qpath == PT_QPATH_AVX512) {
        if (nq > 0 && n > 0)
            attn_scores_avx512(S, lds, Q, nq, ldq, K, n, d, ldk, kT, ldt, scale);
        return;
    }
    if (pt_kern_current()->qpath == PT_QPATH_AVX2) {
        if (nq > 0 && n > 0)
            attn_scores_avx2(S, lds, Q, nq, ldq, K, n, d, ldk, kT, ldt, scale);
        return;
    }
#endif
    (void)kT;
    (void)ldt;
    attn_scores_generic(S, lds, Q, nq, ldq, K, n, d, ldk, scale);
}

int64_t pt_attn_pack_v(float *Vp, const float *V, int64_t n, int64_t d, int64_t ldv)
{
    assert(n >= 0 && d >= 0);
    const int64_t ks = (n + 15) / 16;
    if (d % 16)
        return ks; // (unused: pt_attn_wsum reads V itself)
    for (int64_t c0 = 0; c0 < d; c0 += 16)
        for (int64_t j = 0; j < n; j++)
            memcpy(Vp + (((c0 / 16) * 16 + j % 16) * ks + j / 16) * 16, V + j * ldv + c0, 16 * sizeof(float));
    return ks;
}

void pt_attn_wsum(float *O, int64_t ldo, const float *P, int64_t ldp, int nq, const float *V, int64_t ldv,
                  const float *Vp, int64_t kstride, int64_t n, int64_t d)
{
    assert(nq >= 0 && n >= 0 && d >= 0 && (n <= 1 || ldv >= d) && (!Vp || kstride * 16 >= n));
#if OPS_X86
    if (Vp && (pt_kern_current()->qpath == PT_QPATH_AVX2 || pt_kern_current()->qpath == PT_QPATH_AVX512) &&
        d % 16 == 0) {
        if (nq > 0 && pt_kern_current()->qpath == PT_QPATH_AVX512)
            attn_wsum_avx512(O, ldo, P, ldp, nq, Vp, kstride, n, d);
        else if (nq > 0)
            attn_wsum_avx2(O, ldo, P, ldp, nq, Vp, kstride, n, d);
        return;
    }
#endif
    (void)Vp;
    (void)kstride;
    attn_wsum_generic(O, ldo, P, ldp, nq, V, n, d, ldv);
}

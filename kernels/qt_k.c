// kernels/qt_k.c — the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: ggml's
// dequantisation to the bit and the scalar dot products with Q8_K
// activations that define each type's numerics (qt_k_x86.c reproduces them
// bit for bit with AVX2 / AVX-512).
//
// Each super-block's quants are first unpacked to one int8 per value in
// value order (the layouts are in qt_blocks.h), then both the dequantiser
// and the dot product read that array: the float arithmetic per value is
// ggml's, only the bit-fiddling is shared.
#include "kernels/qt_k.h"
#include "kernels/qt_blocks.h"

#include <assert.h>
#include <math.h>
#include <string.h>

// ---- unpacking (quants in value order, signed as ggml's dequantiser uses them)

// Q2_K: q 0..3; value 128h + 32s + l is bits 2s of qs[32h + l].
static void unpack_q2_k(const pt_blk_q2_k *b, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * s + l] = (int8_t)((b->qs[32 * h + l] >> (2 * s)) & 3);
}

// Q3_K: q -4..3: Q2_K's low bits minus 4 where the high bit is clear.
static void unpack_q3_k(const pt_blk_q3_k *b, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                const int k = 4 * h + s;
                const int lo = (b->qs[32 * h + l] >> (2 * s)) & 3;
                q[32 * k + l] = (int8_t)(lo - ((b->hmask[l] >> k) & 1 ? 0 : 4));
            }
}

// Q4_K: q 0..15; Q5_K: plus 16 for a set fifth bit.
static void unpack_q4_nibbles(const uint8_t qs[128], int8_t q[QK_K])
{
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(qs[32 * c + l] & 0xF);
            q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
        }
}

static void unpack_q5_k(const pt_blk_q5_k *b, int8_t q[QK_K])
{
    unpack_q4_nibbles(b->qs, q);
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 32; l++)
            q[32 * k + l] = (int8_t)(q[32 * k + l] + (((b->qh[l] >> k) & 1) << 4));
}

// Q6_K: q -32..31.
static void unpack_q6_k(const pt_blk_q6_k *b, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

// ---- dequantisation: ggml's per-value f32 expressions ------------------

// y = (d * (sc & 15)) * q - dmin * (sc >> 4) per 16 values.
void pt_deq_q2_k(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q2_k *b = src;
    int8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = pt_fp16_to_f32(b[i].d), dmin = pt_fp16_to_f32(b[i].dmin);
        unpack_q2_k(&b[i], q);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)(b[i].scales[j] & 0xF);
            const float ml = dmin * (float)(b[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                y[16 * j + l] = dl * (float)q[16 * j + l] - ml;
        }
    }
}

// y = (d * (sc - 32)) * q per 16 values.
void pt_deq_q3_k(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q3_k *b = src;
    int8_t q[QK_K], sc[16];
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = pt_fp16_to_f32(b[i].d);
        unpack_q3_k(&b[i], q);
        pt_q3k_scales(b[i].scales, sc);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)sc[j];
            for (int l = 0; l < 16; l++)
                y[16 * j + l] = dl * (float)q[16 * j + l];
        }
    }
}

// Q4_K / Q5_K: y = (d * sc) * q - dmin * m per 32 values.
static void deq_k4(uint16_t dh, uint16_t mh, const uint8_t scales[12], const int8_t q[QK_K], float *y)
{
    const float d = pt_fp16_to_f32(dh), dmin = pt_fp16_to_f32(mh);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        pt_k4_scale_min(scales, j, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int l = 0; l < 32; l++)
            y[32 * j + l] = d1 * (float)q[32 * j + l] - m1;
    }
}

void pt_deq_q4_k(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q4_k *b = src;
    int8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        unpack_q4_nibbles(b[i].qs, q);
        deq_k4(b[i].d, b[i].dmin, b[i].scales, q, y);
    }
}

void pt_deq_q5_k(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q5_k *b = src;
    int8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        unpack_q5_k(&b[i], q);
        deq_k4(b[i].d, b[i].dmin, b[i].scales, q, y);
    }
}

// y = (d * sc) * q per 16 values.
void pt_deq_q6_k(const void *src, float *y, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q6_k *b = src;
    int8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = pt_fp16_to_f32(b[i].d);
        unpack_q6_k(&b[i], q);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)b[i].scales[j];
            for (int l = 0; l < 16; l++)
                y[16 * j + l] = dl * (float)q[16 * j + l];
        }
    }
}

// ---- scalar dot products with Q8_K -------------------------------------
//
// Contract (qtypes.h, super-blocks): ONE f32 accumulator acc = +0; per
// super-block, in order, exact int32 sums isum / msum, then the type's
// fixed f32 steps (x.d is the activation's f32 scale, d_w / dmin_w the
// fp16 weight scales):
//   Q2_K: isum = sum_j (sc_j & 15) * dot16(q_j, x_j)        (16 blocks, q 0..3)
//         msum = sum_j (sc_j >> 4) * bsum_j
//   Q4_K: isum = sum_j sc_j * dot32(q_j, x_j)               (8 blocks, q 0..15)
//         msum = sum_j m_j * (bsum_2j + bsum_2j+1)
//   Q5_K: as Q4_K with q 0..31
//         for these three: acc = fmaf(d_w * x.d, (float)isum, acc);
//                          acc = fmaf(-(dmin_w * x.d), (float)msum, acc)
//   Q3_K: isum = sum_j (sc_j - 32) * dot16(q_j, x_j)        (q -4..3)
//   Q6_K: isum = sum_j sc_j * dot16(q_j, x_j)               (q -32..31, sc int8)
//         for these two:   acc = fmaf(d_w * x.d, (float)isum, acc)
// (ggml's own order: d * isum and dmin * msum per super-block, the same
// products; ggml splits isum over 8 lanes, which Petrel does not.)
// Every sum fits int32 (largest: Q6_K, 16 * 128 * 32 * 127 * 16 < 2^31).

static int32_t dot16(const int8_t *a, const int8_t *b)
{
    int32_t s = 0;
    for (int l = 0; l < 16; l++)
        s += a[l] * b[l];
    return s;
}

static float step_min(float acc, uint16_t dh, uint16_t mh, float xd, int32_t isum, int32_t msum)
{
    acc = fmaf(pt_fp16_to_f32(dh) * xd, (float)isum, acc);
    return fmaf(-(pt_fp16_to_f32(mh) * xd), (float)msum, acc);
}

float pt_vdot_q2_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q2_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q2_k(&b[i], q);
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 16; j++) {
            isum += (b[i].scales[j] & 0xF) * dot16(q + 16 * j, x[i].qs + 16 * j);
            msum += (b[i].scales[j] >> 4) * x[i].bsums[j];
        }
        acc = step_min(acc, b[i].d, b[i].dmin, x[i].d, isum, msum);
    }
    return acc;
}

float pt_vdot_q3_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q3_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K], sc[16];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q3_k(&b[i], q);
        pt_q3k_scales(b[i].scales, sc);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += sc[j] * dot16(q + 16 * j, x[i].qs + 16 * j);
        acc = fmaf(pt_fp16_to_f32(b[i].d) * x[i].d, (float)isum, acc);
    }
    return acc;
}

// Q4_K / Q5_K integer sums of one super-block (q unpacked).
static void sums_k4(const uint8_t scales[12], const int8_t q[QK_K], const block_q8_K *x, int32_t *isum,
                    int32_t *msum)
{
    int32_t is = 0, ms = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        pt_k4_scale_min(scales, j, &sc, &m);
        is += sc * (dot16(q + 32 * j, x->qs + 32 * j) + dot16(q + 32 * j + 16, x->qs + 32 * j + 16));
        ms += m * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
    }
    *isum = is;
    *msum = ms;
}

float pt_vdot_q4_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q4_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t isum, msum;
        unpack_q4_nibbles(b[i].qs, q);
        sums_k4(b[i].scales, q, &x[i], &isum, &msum);
        acc = step_min(acc, b[i].d, b[i].dmin, x[i].d, isum, msum);
    }
    return acc;
}

float pt_vdot_q5_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q5_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t isum, msum;
        unpack_q5_k(&b[i], q);
        sums_k4(b[i].scales, q, &x[i], &isum, &msum);
        acc = step_min(acc, b[i].d, b[i].dmin, x[i].d, isum, msum);
    }
    return acc;
}

float pt_vdot_q6_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q6_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q6_k(&b[i], q);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += b[i].scales[j] * dot16(q + 16 * j, x[i].qs + 16 * j);
        acc = fmaf(pt_fp16_to_f32(b[i].d) * x[i].d, (float)isum, acc);
    }
    return acc;
}

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
#include "kernels/qt_lanes.h"

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
// Contract: the f32 arithmetic of ggml's x86 (AVX2) kernels
// ggml_vec_dot_<type>_q8_K, operation for operation, so that a row's dot
// product is bit-identical to llama.cpp's on x86 (llama.cpp has no AVX-512
// code for these types; with the same Q8_K activation the outputs match).
//
// ggml works on 32-value registers: register r (0..7) holds values
// 32r .. 32r + 31 of a super-block and its int32 lane l (0..7) sums
// positions 32r + 4l .. 32r + 4l + 3. So every super-block gives eight
// exact int32 lane sums
//   sumi_l = sum_r sum_{v<4} sc(32r + 4l + v) * q(32r + 4l + v) * x(32r + 4l + v)
// (sc the scale of the value's block; q as the type stores it, see below),
// and eight f32 accumulators acc[l] (from +0) take, per super-block, with
// d = x.d * d_w and dmin = (-x.d) * dmin_w (x.d the Q8_K scale, d_w / dmin_w
// the fp16 weight scales):
//   Q3_K, Q4_K, Q5_K, Q6_K:  acc[l] = fmaf(d, (float)sumi_l, acc[l])
//   Q2_K:  acc[l] = fmaf(dmin, (float)mp_l, acc[l]), then the line above,
//          with mp_l = m_2l * bsum_2l + m_2l+1 * bsum_2l+1 (4-bit mins)
// and the result is hsum(acc) = ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)), plus
// for Q4_K: four more accumulators am[k] = fmaf(dmin, (float)mp_k, am[k]),
//           mp_k = m_2k * (bsum_4k + bsum_4k+1) + m_2k+1 * (bsum_4k+2 + bsum_4k+3),
//           result = hsum(acc) + ((am0+am2)+(am1+am3))
// for Q5_K: one scalar summs = fmaf(dmin, (float)msum, summs), msum the
//           whole sum_j m_j * (bsum_2j + bsum_2j+1); result = hsum(acc) + summs
//           (ggml's `summs += dmin * msum`, contracted to an fma by its
//           -O3 -march=native build, which is what matches)
// The lane sums are ggml's own: Q3_K's quants are the signed q (-4..3);
// Q6_K's are q + 32 (0..63) with 32 * (sc_2l * bsum_2l + sc_2l+1 * bsum_2l+1)
// subtracted from lane l (ggml's offset trick, applied per lane); Q2_K,
// Q4_K, Q5_K's are the unsigned q. Every sum fits int32.

float pt_vdot_q2_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q2_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    int32_t sc[16], sumi[8];
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q2_k(&b[i], q);
        for (int j = 0; j < 16; j++)
            sc[j] = b[i].scales[j] & 0xF;
        qt_lane_sums(q, sc, x[i].qs, sumi);
        const float d = x[i].d * pt_fp16_to_f32(b[i].d), dmin = -x[i].d * pt_fp16_to_f32(b[i].dmin);
        for (int l = 0; l < 8; l++) {
            const int32_t mp = (b[i].scales[2 * l] >> 4) * x[i].bsums[2 * l] +
                               (b[i].scales[2 * l + 1] >> 4) * x[i].bsums[2 * l + 1];
            acc[l] = fmaf(dmin, (float)mp, acc[l]);
            acc[l] = fmaf(d, (float)sumi[l], acc[l]);
        }
    }
    return qt_hsum8(acc);
}

float pt_vdot_q3_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q3_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K], s8[16];
    int32_t sc[16], sumi[8];
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q3_k(&b[i], q);
        pt_q3k_scales(b[i].scales, s8);
        for (int j = 0; j < 16; j++)
            sc[j] = s8[j];
        qt_lane_sums(q, sc, x[i].qs, sumi);
        const float d = x[i].d * pt_fp16_to_f32(b[i].d);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)sumi[l], acc[l]);
    }
    return qt_hsum8(acc);
}

// Q4_K / Q5_K: lane sums with the 32-value block scales, and the min sum
// in ggml's 4-lane form (mp[4]).
static void sums_k4(const uint8_t scales[12], const int8_t q[QK_K], const block_q8_K *x, int32_t sumi[8],
                    int32_t mp[4])
{
    int32_t sc[16];
    uint8_t s[8], m[8];
    for (int j = 0; j < 8; j++) {
        pt_k4_scale_min(scales, j, &s[j], &m[j]);
        sc[2 * j] = sc[2 * j + 1] = s[j];
    }
    qt_lane_sums(q, sc, x->qs, sumi);
    for (int k = 0; k < 4; k++)
        mp[k] = m[2 * k] * (x->bsums[4 * k] + x->bsums[4 * k + 1]) +
                m[2 * k + 1] * (x->bsums[4 * k + 2] + x->bsums[4 * k + 3]);
}

float pt_vdot_q4_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q4_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    int32_t sumi[8], mp[4];
    float acc[8] = {0}, am[4] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q4_nibbles(b[i].qs, q);
        sums_k4(b[i].scales, q, &x[i], sumi, mp);
        const float d = x[i].d * pt_fp16_to_f32(b[i].d), dmin = -x[i].d * pt_fp16_to_f32(b[i].dmin);
        for (int k = 0; k < 4; k++)
            am[k] = fmaf(dmin, (float)mp[k], am[k]);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)sumi[l], acc[l]);
    }
    return qt_hsum8(acc) + ((am[0] + am[2]) + (am[1] + am[3]));
}

float pt_vdot_q5_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q5_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    int32_t sumi[8], mp[4];
    float acc[8] = {0}, summs = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q5_k(&b[i], q);
        sums_k4(b[i].scales, q, &x[i], sumi, mp);
        const float d = x[i].d * pt_fp16_to_f32(b[i].d), dmin = -x[i].d * pt_fp16_to_f32(b[i].dmin);
        summs = fmaf(dmin, (float)(mp[0] + mp[1] + mp[2] + mp[3]), summs);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)sumi[l], acc[l]);
    }
    return qt_hsum8(acc) + summs;
}

float pt_vdot_q6_k_scalar(const void *w, const void *xq, int64_t n)
{
    assert(n % QK_K == 0);
    const pt_blk_q6_k *b = w;
    const block_q8_K *x = xq;
    int8_t q[QK_K];
    int32_t sc[16], sumi[8];
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack_q6_k(&b[i], q);
        for (int j = 0; j < 16; j++)
            sc[j] = b[i].scales[j];
        // ggml's lanes: (q + 32) products minus 32 * the lane's two groups' bsums
        for (int k = 0; k < QK_K; k++)
            q[k] = (int8_t)(q[k] + 32);
        qt_lane_sums(q, sc, x[i].qs, sumi);
        for (int l = 0; l < 8; l++)
            sumi[l] -= 32 * (sc[2 * l] * x[i].bsums[2 * l] + sc[2 * l + 1] * x[i].bsums[2 * l + 1]);
        const float d = x[i].d * pt_fp16_to_f32(b[i].d);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)sumi[l], acc[l]);
    }
    return qt_hsum8(acc);
}

// kernels/kern_scalar.c — the portable path: a literal transcription of the
// numerics contract in kernels/kern_internal.h. The SIMD paths must match it
// bit for bit; the tests compare them.
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#include <math.h>
#include <string.h>

static uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

// Weight value j (0..31) of a Q8_0 / Q4_0 block as an integer (Q4_0:
// values 0..15 are the low nibbles, 16..31 the high ones, minus 8).
static int32_t wval(bool q8, const uint8_t *wb, int j)
{
    if (q8)
        return ((const int8_t *)(wb + 2))[j];
    const uint8_t b = wb[2 + j % 16];
    return (j < 16 ? b & 0xF : b >> 4) - 8;
}

// The contract of kern_internal.h: block b's lane l gets the exact int32
// sum of the products of values 4l..4l+3, scaled by d_w * d_x in one fmaf.
static float row_dot_q(pt_dtype t, const uint8_t *w, const int8_t *xq, const float *xd, int64_t nb)
{
    const bool q8 = t == PT_Q8_0;
    const size_t bs = q8 ? sizeof(block_q8_0) : sizeof(block_q4_0);
    float acc[8] = {0};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bs;
        const int8_t *xb = xq + b * QK;
        const float dd = pt_fp16_to_f32(load_u16(wb)) * xd[b];
        for (int l = 0; l < 8; l++) {
            int32_t s = 0;
            for (int j = 4 * l; j < 4 * l + 4; j++)
                s += wval(q8, wb, j) * xb[j];
            acc[l] = fmaf(dd, (float)s, acc[l]);
        }
    }
    return pt_reduce8(acc);
}

static void qtile_scalar(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x,
                         int64_t v0, int64_t nvec, float *y, int64_t ldy)
{
    for (int64_t v = 0; v < nvec; v++) {
        const int8_t *xq = x->qs + (v0 + v) * x->nb * QK;
        const float *xd = x->d + (v0 + v) * x->nb;
        for (int64_t r = 0; r < nrows; r++)
            y[v * ldy + r] = row_dot_q(t, w + r * rb, xq, xd, x->nb);
    }
}

static float welem(pt_dtype t, const uint8_t *w, int64_t i)
{
    switch (t) {
    case PT_F32: {
        float f;
        memcpy(&f, w + i * 4, 4);
        return f;
    }
    case PT_F16: return pt_fp16_to_f32(load_u16(w + i * 2));
    case PT_BF16: return pt_bf16_to_f32(load_u16(w + i * 2));
    default: return NAN;
    }
}

static void ftile_scalar(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, int64_t cols,
                         const float *X, int64_t ldx, int64_t nvec, float *y, int64_t ldy)
{
    for (int64_t v = 0; v < nvec; v++) {
        const float *x = X + v * ldx;
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *wr = w + r * rb;
            float acc[16] = {0};
            for (int64_t i = 0; i < cols; i++)
                acc[i % 16] = fmaf(welem(t, wr, i), x[i], acc[i % 16]);
            y[v * ldy + r] = pt_reduce16(acc);
        }
    }
}

static float dot_f32_scalar(const float *a, const float *b, int64_t n)
{
    float acc[16] = {0};
    for (int64_t i = 0; i < n; i++)
        acc[i % 16] = fmaf(a[i], b[i], acc[i % 16]);
    return pt_reduce16(acc);
}

static void axpy_scalar(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

// ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x * (1 / d)).
void pt_quant_act_scalar(const float *x, int64_t nb, bool paired, int8_t *qs, float *d, int32_t *s8)
{
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(xb[j]);
            amax = amax > a ? amax : a;
        }
        // ggml's x86 quantize_row_q8_0 (what llama.cpp multiplies with):
        // id = 127 / amax (not 1 / d), products rounded to nearest even.
        // nearbyintf rounds in the current mode; Petrel never changes it
        // from the default round-to-nearest-even.
        const float db = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < QK; j++) {
            int8_t q = (int8_t)nearbyintf(xb[j] * id);
            qs[pt_act_pos(paired, nb, b, j)] = q;
            sum += q;
        }
        d[b] = pt_fp16_to_f32(pt_f32_to_fp16(db));
        s8[b] = 8 * sum;
    }
}

static void dot_rows_scalar(float *out, const float *q, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    for (int64_t t = 0; t < n; t++)
        out[t] = dot_f32_scalar(q, rows + t * ld, d);
}

static void axpy_rows_scalar(float *out, const float *p, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    for (int64_t t = 0; t < n; t++)
        axpy_scalar(out, p[t], rows + t * ld, d);
}

const pt_kern pt_kern_scalar = {
    .name = "scalar",
    .qpath = PT_QPATH_SCALAR,
    .qtile = qtile_scalar,
    .quant_act = pt_quant_act_scalar,
    .ftile = ftile_scalar,
    .dot_f32 = dot_f32_scalar,
    .axpy = axpy_scalar,
    .dot_rows = dot_rows_scalar,
    .axpy_rows = axpy_rows_scalar,
};

// kernels/quant.c — element types, scalar conversions and ggml-identical
// block quantisation (see kernels/quant.h for the layouts).
#include "kernels/quant.h"
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

bool pt_dtype_known(uint32_t t) { return pt_qtraits_of(t) != NULL; }

bool pt_dtype_valid(uint32_t t)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    if (!q)
        return false;
    if (q->blck == 1 || t == PT_Q4_0 || t == PT_Q8_0)
        return true; // converted / multiplied by quant.c and the kern_* paths
    return q->dequant && q->vdot[PT_QPATH_SCALAR] && pt_actq_of(q->act);
}

const char *pt_dtype_name(pt_dtype t)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    return q ? q->name : "?";
}

int pt_dtype_from_name(const char *name)
{
    if (!name)
        return -1;
    for (uint32_t t = 0; t < 64; t++) {
        const pt_qtraits *q = pt_qtraits_of(t);
        if (!q || t == PT_Q8_1 || t == PT_Q8_K)
            continue;
        const char *s = q->name;
        size_t k = 0;
        // case-insensitive compare ("Q4_K" is accepted as well as "q4_k")
        while (s[k] && name[k] && (name[k] | 0x20) == (s[k] | 0x20))
            k++;
        if (!s[k] && !name[k])
            return (int)t;
    }
    return -1;
}

bool pt_dtype_is_block(pt_dtype t)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    return q && q->blck > 1;
}

int64_t pt_dtype_block(pt_dtype t)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    return q ? q->blck : 0;
}

bool pt_dtype_can_quantize(pt_dtype t)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    return q && (q->blck == 1 || t == PT_Q4_0 || t == PT_Q8_0 || q->quant);
}

size_t pt_row_bytes(pt_dtype t, uint64_t n)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    if (!q || t == PT_Q8_1 || t == PT_Q8_K || n % (uint64_t)q->blck)
        return 0;
    return (size_t)(n / (uint64_t)q->blck) * (size_t)q->bytes;
}

// ---- fp16 / bf16 -------------------------------------------------------

float pt_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F) // inf / NaN (payload kept, quiet bit set as hardware does)
        return bits_f32(sign | 0x7F800000u | (man << 13) | (man ? 0x00400000u : 0));
    if (exp == 0) { // zero / subnormal: man * 2^-24, exact in f32
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t pt_f32_to_fp16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) // NaN: keep top payload bits, force quiet
        return sign | 0x7E00 | (uint16_t)((a >> 13) & 0x3FF);
    if (a >= 0x477FF000u) // >= 65520 rounds to infinity
        return sign | 0x7C00;
    if (a < 0x38800000u) { // below 2^-14: subnormal fp16 (or zero)
        // value / 2^-24 rounded to nearest even; exact via integer shifts.
        if (a < 0x33000000u) // < 2^-25: rounds to zero
            return sign;
        uint32_t e = a >> 23;              // biased f32 exponent (102..112)
        uint32_t m = (a & 0x7FFFFF) | 0x800000; // 24-bit significand
        uint32_t shift = 126 - e;          // value = m * 2^(e-150); /2^-24 -> m >> (126-e)
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return sign | (uint16_t)q;
    }
    // normal: rebias exponent, round 13 dropped bits to nearest even (a carry
    // into the exponent is correct, including up to infinity handled above)
    uint32_t r = a + 0xFFF + ((a >> 13) & 1);
    r -= (uint32_t)(127 - 15) << 23;
    return sign | (uint16_t)(r >> 13);
}

float pt_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t pt_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep sign/top payload, force quiet
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

// ---- FP8 E4M3FN ----------------------------------------------------------

float pt_fp8_e4m3_to_f32(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80) << 24;
    uint32_t exp = (v >> 3) & 0xF;
    uint32_t man = v & 0x7;
    if (exp == 0xF && man == 0x7)
        return bits_f32(sign | 0x7FC00000u);
    if (exp == 0) { // subnormal: man/8 * 2^-6 = man * 2^-9
        float x = (float)man * 0x1p-9f;
        return sign ? -x : x;
    }
    return bits_f32(sign | ((exp + 120) << 23) | (man << 20));
}

// ---- ggml block quantisation -------------------------------------------

// ggml's quantize_row_q8_0_ref: d = amax/127, q = roundf(x / d) (half away
// from zero), computed with the unrounded reciprocal; d stored as fp16.
static void quantize_q8_0(const float *x, block_q8_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / QK; i++) {
        const float *xb = x + i * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(xb[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = pt_f32_to_fp16(d);
        for (int j = 0; j < QK; j++)
            y[i].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

// ggml's quantize_row_q4_0_ref: `max` is the signed value of largest
// magnitude (first one on ties), d = max / -8, q = min(15, (int8)(x/d + 8.5)).
static void quantize_q4_0(const float *x, block_q4_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / QK; i++) {
        const float *xb = x + i * QK;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++) {
            if (amax < fabsf(xb[j])) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = pt_f32_to_fp16(d);
        for (int j = 0; j < QK / 2; j++) {
            const float x0 = xb[j] * id;
            const float x1 = xb[QK / 2 + j] * id;
            int8_t q0 = (int8_t)(x0 + 8.5f);
            int8_t q1 = (int8_t)(x1 + 8.5f);
            uint8_t xi0 = (uint8_t)(q0 < 15 ? q0 : 15);
            uint8_t xi1 = (uint8_t)(q1 < 15 ? q1 : 15);
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void pt_quantize_row(pt_dtype t, const float *x, void *dst, int64_t n)
{
    assert(n >= 0 && n % pt_dtype_block(t) == 0 && pt_dtype_can_quantize(t));
    const pt_qtraits *q = pt_qtraits_of(t);
    if (q->quant && t != PT_Q4_0 && t != PT_Q8_0) {
        q->quant(x, dst, n);
        return;
    }
#if defined(__x86_64__)
    // every SIMD path has AVX2; the AVX2 code gives the same bytes
    if (pt_kern_current() != &pt_kern_scalar && pt_quantize_row_avx2(t, x, dst, n))
        return;
#endif
    uint16_t *h = dst;
    switch (t) {
    case PT_F32: memcpy(dst, x, (size_t)n * 4); break;
    case PT_F16:
        for (int64_t i = 0; i < n; i++)
            h[i] = pt_f32_to_fp16(x[i]);
        break;
    case PT_BF16:
        for (int64_t i = 0; i < n; i++)
            h[i] = pt_f32_to_bf16(x[i]);
        break;
    case PT_Q8_0: quantize_q8_0(x, dst, n); break;
    case PT_Q4_0: quantize_q4_0(x, dst, n); break;
    default: assert(!"unreachable");
    }
}

void pt_dequantize_row(pt_dtype t, const void *src, float *y, int64_t n)
{
    assert(n >= 0 && pt_dtype_block(t) > 0 && n % pt_dtype_block(t) == 0);
    const pt_qtraits *q = pt_qtraits_of(t);
    if (q->dequant) {
        q->dequant(src, y, n);
        return;
    }
    const uint16_t *h = src;
    switch (t) {
    case PT_F32: memcpy(y, src, (size_t)n * 4); break;
    case PT_F16:
        for (int64_t i = 0; i < n; i++)
            y[i] = pt_fp16_to_f32(h[i]);
        break;
    case PT_BF16:
        for (int64_t i = 0; i < n; i++)
            y[i] = pt_bf16_to_f32(h[i]);
        break;
    case PT_Q8_0: {
        const block_q8_0 *b = src;
        for (int64_t i = 0; i < n / QK; i++) {
            const float d = pt_fp16_to_f32(b[i].d);
            for (int j = 0; j < QK; j++)
                y[i * QK + j] = b[i].qs[j] * d;
        }
        break;
    }
    case PT_Q4_0: {
        const block_q4_0 *b = src;
        for (int64_t i = 0; i < n / QK; i++) {
            const float d = pt_fp16_to_f32(b[i].d);
            for (int j = 0; j < QK / 2; j++) {
                y[i * QK + j] = ((b[i].qs[j] & 0xF) - 8) * d;
                y[i * QK + j + QK / 2] = ((b[i].qs[j] >> 4) - 8) * d;
            }
        }
        break;
    }
    default: assert(!"type without a dequantiser");
    }
}

// kernels/qt_quantize_k.c — the K-quant quantisers Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K: ggml's quantize_row_<t>_ref, which is what llama-quantize runs for
// these types without an importance matrix (quantize_q4_K(..., NULL) calls
// the _ref function; the _impl variants are the imatrix path only).
//
// Every type works the same way: per sub-block of 16 or 32 values an f32
// scale (and min) is searched (make_qkx2 / make_qx / make_q3 below), the
// scales are quantised to 4/6/8 bits against one fp16 super-block scale, and
// the values are then re-quantised against the stored, rounded scales.
#include "kernels/qt_quantize.h"
#include "kernels/qt_quantize_util.h"

enum { QKK = 256 };

// ---- scale searches (ggml's make_*_quants, same f32 operation order) ----

// Asymmetric search (ggml make_qkx2_quants): levels L in [0, nmax] of
// x ~ scale * L - the_min, minimising sum w * err (|err| when use_mad,
// err^2 otherwise) over the initial range split and nstep + 1 candidate
// scales (rmin + rdelta * is + nmax) / (max - min), each refit by weighted
// least squares. min is clamped to <= 0. Returns the scale; *the_min = -min.
float qz_make_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min, uint8_t *Laux,
                   float rmin, float rdelta, int nstep, bool use_mad)
{
    float mn = x[0], mx = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (mn > 0)
        mn = 0;
    if (mx == mn) {
        memset(L, 0, (size_t)n);
        *the_min = -mn;
        return 0.f;
    }
    float iscale = nmax / (mx - mn);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = qz_nearest_int(iscale * (x[i] - mn));
        L[i] = (uint8_t)qz_max_i(0, qz_min_i(nmax, l));
        float diff = scale * L[i] + mn - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -mn;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = qz_max_i(0, qz_min_i(nmax, qz_nearest_int(iscale * (x[i] - mn))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += w[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                mn = this_min;
            }
        }
    }
    *the_min = -mn;
    return scale;
}

// Symmetric search (ggml make_qx_quants with rmse_type 1, no weights):
// levels L = l + nmax, l in [-nmax, nmax - 1], for iscale = -nmax / max (max
// the signed value of largest magnitude) and the 18 neighbours
// -(nmax + 0.1 * is) / max, weights x^2; keeps the least-squares scale of the
// best. Returns the scale (0 and L = 0 for an all-zero group).
float qz_make_qx(int n, int nmax, const float *x, int8_t *L)
{
    float mx = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            mx = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / mx;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = qz_max_i(-nmax, qz_min_i(nmax - 1, qz_nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / mx;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = qz_max_i(-nmax, qz_min_i(nmax - 1, qz_nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + qz_max_i(-nmax, qz_min_i(nmax - 1, qz_nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's search (ggml make_q3_quants with do_rmse): start from
// iscale = -nmax / max, then up to 5 sweeps that move one level at a time to
// the value that improves the weighted (x^2) least-squares fit. Levels
// returned as l + nmax; returns sumlx / suml2.
float qz_make_q3(int n, int nmax, const float *x, int8_t *L)
{
    float mx = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            mx = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / mx;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = qz_max_i(-nmax, qz_min_i(nmax - 1, qz_nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = qz_max_i(-nmax, qz_min_i(nmax - 1, qz_nearest_int(x[i] * sl2 / slx)));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs 2-bit levels L[256] the K way: byte j/4 + l of each 128-value half
// holds values j + l, j + l + 32, j + l + 64, j + l + 96 (bits 0-1 .. 6-7).
static void pack2(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < QKK; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// ---- Q2_K ------------------------------------------------------------------
// Block (84 bytes): scales[16] (low nibble scale, high nibble min of each
// 16 values), qs[64] (2-bit, pack2), fp16 d, fp16 dmin;
// value = d * (sc & 15) * q - dmin * (sc >> 4).
void pt_quant_q2_k(const float *x, void *dst, int64_t n)
{
    assert(n % QKK == 0);
    uint8_t *y = dst;
    uint8_t L[QKK];
    float w[QKK], mins[16], scales[16];
    for (int64_t b = 0; b < n / QKK; b++, x += QKK, y += 84) {
        uint8_t *sc = y, *qs = y + 16;
        float max_scale = 0, max_min = 0;
        for (int l = 0; l < QKK; l++)
            w[l] = fabsf(x[l]);
        for (int j = 0; j < 16; j += 8)
            qz_make_qkx2_x8(16, 3, x + 16 * j, w + 16 * j, L + 16 * j, scales + j, mins + j, -0.5f, 0.1f, 15, true);
        for (int j = 0; j < 16; j++) {
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        uint16_t d = qz_h(0.f), dmin = qz_h(0.f);
        if (max_scale > 0) {
            float iscale = 15.f / max_scale;
            for (int j = 0; j < 16; j++)
                sc[j] = (uint8_t)qz_nearest_int(iscale * scales[j]);
            d = qz_h(max_scale / 15.f);
        } else {
            memset(sc, 0, 16);
        }
        if (max_min > 0) {
            float iscale = 15.f / max_min;
            for (int j = 0; j < 16; j++)
                sc[j] |= (uint8_t)(qz_nearest_int(iscale * mins[j]) << 4);
            dmin = qz_h(max_min / 15.f);
        }
        for (int j = 0; j < 16; j++) {
            const float dl = qz_f(d) * (sc[j] & 0xF);
            if (!dl)
                continue;
            const float ml = qz_f(dmin) * (sc[j] >> 4);
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (uint8_t)qz_max_i(0, qz_min_i(3, qz_nearest_int((x[16 * j + i] + ml) / dl)));
        }
        pack2(L, qs);
        qz_put16(y + 80, d);
        qz_put16(y + 82, dmin);
    }
}

// ---- Q3_K ------------------------------------------------------------------
// Block (110 bytes): hmask[32] (bit k of byte m: high bit of value
// 32 * k + m), qs[64] (low 2 bits, pack2), scales[12] (16 6-bit signed
// scales + 32: low nibbles in bytes 0-7, top 2 bits in bytes 8-11), fp16 d;
// value = d * (scale - 32) * (q - 4).
void pt_quant_q3_k(const float *x, void *dst, int64_t n)
{
    assert(n % QKK == 0);
    uint8_t *y = dst;
    int8_t L[QKK];
    float scales[16];
    for (int64_t b = 0; b < n / QKK; b++, x += QKK, y += 110) {
        uint8_t *hmask = y, *qs = y + 32, *sc = y + 96;
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j += 8)
            qz_make_q3_x8(16, 4, x + 16 * j, L + 16 * j, scales + j);
        for (int j = 0; j < 16; j++) {
            float a = fabsf(scales[j]);
            if (a > amax) {
                amax = a;
                max_scale = scales[j];
            }
        }
        memset(sc, 0, 12);
        uint16_t d = qz_h(0.f);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int8_t l = (int8_t)qz_nearest_int(iscale * scales[j]);
                l = (int8_t)(qz_max_i(-32, qz_min_i(31, l)) + 32);
                if (j < 8)
                    sc[j] = (uint8_t)(l & 0xF);
                else
                    sc[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                sc[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            d = qz_h(1 / iscale);
        }
        for (int j = 0; j < 16; j++) {
            int s = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
            s = (s | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float dl = qz_f(d) * (int8_t)s;
            if (!dl)
                continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(qz_max_i(-4, qz_min_i(3, qz_nearest_int(x[16 * j + i] / dl))) + 4);
        }
        memset(hmask, 0, 32);
        uint8_t U[QKK];
        for (int j = 0; j < QKK; j++) {
            U[j] = (uint8_t)L[j];
            if (U[j] > 3) {
                hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                U[j] -= 4;
            }
        }
        pack2(U, qs);
        qz_put16(y + 108, d);
    }
}

// Packs the 8 6-bit scales and mins of Q4_K / Q5_K into 12 bytes: j < 4 in
// bytes j and j + 4 (6 bits); j >= 4 low nibbles in byte j + 4, top 2 bits
// in bits 6-7 of bytes j - 4 (scale) and j (min).
static void pack_scale_min(uint8_t *s, int j, uint8_t ls, uint8_t lm)
{
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls >> 4) << 6);
        s[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

static void unpack_scale_min(const uint8_t *s, int j, uint8_t *ls, uint8_t *lm)
{
    if (j < 4) {
        *ls = s[j] & 63;
        *lm = s[j + 4] & 63;
    } else {
        *ls = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *lm = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// The common part of Q4_K and Q5_K: 8 sub-blocks of 32 values, levels
// [0, nmax], weights sqrt(mean x^2) + |x|; fills d, dmin, scales[12] and the
// final levels L[256] (against the stored scales).
static void q45k_levels(const float *x, int nmax, float rmin, int nstep, uint16_t *d, uint16_t *dmin,
                        uint8_t *sc12, uint8_t *L)
{
    float w[QKK], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[32 * j + l] = av_x + fabsf(x[32 * j + l]);
    }
    qz_make_qkx2_x8(32, nmax, x, w, L, scales, mins, rmin, 0.1f, nstep, false);
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(sc12, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)qz_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)qz_nearest_int(inv_min * mins[j]);
        pack_scale_min(sc12, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d = qz_h(max_scale / 63.f);
    *dmin = qz_h(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t ls, lm;
        unpack_scale_min(sc12, j, &ls, &lm);
        const float dl = qz_f(*d) * ls;
        if (!dl)
            continue;
        const float ml = qz_f(*dmin) * lm;
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)qz_max_i(0, qz_min_i(nmax, qz_nearest_int((x[32 * j + i] + ml) / dl)));
    }
}

// ---- Q4_K ------------------------------------------------------------------
// Block (144 bytes): fp16 d, fp16 dmin, scales[12] (pack_scale_min),
// qs[128]: per 64 values, byte l holds value l (low nibble) and l + 32 (high);
// value = d * sc * q - dmin * m.
void pt_quant_q4_k(const float *x, void *dst, int64_t n)
{
    assert(n % QKK == 0);
    uint8_t *y = dst;
    uint8_t L[QKK];
    for (int64_t b = 0; b < n / QKK; b++, x += QKK, y += 144) {
        uint16_t d, dmin;
        q45k_levels(x, 15, -1.f, 20, &d, &dmin, y + 4, L);
        qz_put16(y, d);
        qz_put16(y + 2, dmin);
        uint8_t *q = y + 16;
        for (int j = 0; j < QKK; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

// ---- Q5_K ------------------------------------------------------------------
// Block (176 bytes): fp16 d, fp16 dmin, scales[12], qh[32] (bit 2k / 2k+1 of
// byte l: 5th bit of value 64k + l / 64k + l + 32), qs[128] as Q4_K.
void pt_quant_q5_k(const float *x, void *dst, int64_t n)
{
    assert(n % QKK == 0);
    uint8_t *y = dst;
    uint8_t L[QKK];
    for (int64_t b = 0; b < n / QKK; b++, x += QKK, y += 176) {
        uint16_t d, dmin;
        q45k_levels(x, 31, -0.5f, 15, &d, &dmin, y + 4, L);
        qz_put16(y, d);
        qz_put16(y + 2, dmin);
        uint8_t *qh = y + 16, *ql = y + 48;
        memset(qh, 0, 32);
        uint8_t m1 = 1, m2 = 2;
        for (int k = 0; k < QKK; k += 64, ql += 32, m1 <<= 2, m2 <<= 2)
            for (int j = 0; j < 32; j++) {
                int l1 = L[k + j], l2 = L[k + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
    }
}

// ---- Q6_K ------------------------------------------------------------------
// Block (210 bytes): ql[128] (low nibbles), qh[64] (top 2 bits), int8
// scales[16], fp16 d; per 128 values, ql byte l holds values l / l + 64
// (low / high nibble), byte l + 32 values l + 32 / l + 96, qh byte l the top
// bits of l, l + 32, l + 64, l + 96; value = d * scale * (q - 32).
void pt_quant_q6_k(const float *x, void *dst, int64_t n)
{
    assert(n % QKK == 0);
    uint8_t *y = dst;
    int8_t L[QKK];
    float scales[16];
    for (int64_t b = 0; b < n / QKK; b++, x += QKK, y += 210) {
        int8_t *sc = (int8_t *)(y + 192);
        float max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; j += 8)
            qz_make_qx_x8(16, 32, x + 16 * j, L + 16 * j, scales + j);
        for (int j = 0; j < 16; j++) {
            float a = fabsf(scales[j]);
            if (a > max_abs) {
                max_abs = a;
                max_scale = scales[j];
            }
        }
        if (max_abs < GROUP_MAX_EPS) {
            memset(y, 0, 210);
            qz_put16(y + 208, qz_h(0.f));
            continue;
        }
        float iscale = -128.f / max_scale;
        uint16_t d = qz_h(1 / iscale);
        for (int j = 0; j < 16; j++)
            sc[j] = (int8_t)qz_min_i(127, qz_nearest_int(iscale * scales[j]));
        for (int j = 0; j < 16; j++) {
            const float dl = qz_f(d) * sc[j];
            if (!dl)
                continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(qz_max_i(-32, qz_min_i(31, qz_nearest_int(x[16 * j + i] / dl))) + 32);
        }
        uint8_t *ql = y, *qh = y + 128;
        for (int j = 0; j < QKK; j += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                const uint8_t *u = (const uint8_t *)L + j + l;
                ql[l] = (uint8_t)((u[0] & 0xF) | ((u[64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((u[32] & 0xF) | ((u[96] & 0xF) << 4));
                qh[l] = (uint8_t)((u[0] >> 4) | ((u[32] >> 4) << 2) | ((u[64] >> 4) << 4) | ((u[96] >> 4) << 6));
            }
        qz_put16(y + 208, d);
    }
}

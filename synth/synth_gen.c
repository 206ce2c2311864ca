// synth/synth_gen.c — the values of synthetic tensors.
//
// Every value is a pure function of (tensor seed, row, column): a row's
// random bits come from splitmix64 over a counter (one 64-bit draw per four
// values), so any split of a tensor into row ranges, on any number of
// threads, gives identical bytes, and copies (MTP embed/head) are made from
// the source tensor's seed key and come out byte-identical.
//
// "N(0,1)" below is a 16-bit lookup into a table of the normal quantiles
// (resolution 1/128 sigma, tails cut at 4.33 sigma), rescaled to unit
// variance: four values per 64-bit draw.
//   FP8 linears  N(0,1) * gain / sqrt(in) * f(block), f log-uniform in
//                [0.5, 2] per 128x128 block; stored as E4M3 of
//                x * 448 / amax(block) with scale_inv = amax(block) / 448
//                (round-to-nearest-even, saturating); one element per block
//                is set to the table's extreme (4.33 sigma), see below.
//   BF16 dense   N(0,1) * gain / sqrt(in)     (lm_head, eh_proj)
//   embeddings   N(0,1) * gain
//   norms        1 + 0.1 N(0,1)
//   router       see synth_router_init / synth_router_bias.
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "synth/synth_int.h"

#define SYNTH_BLK 128u
#define NV_MAX 600                 // |normal table entry| <= NV_MAX (4.33 sigma * 128 = 554)

// The normal table: entry k = round(128 * inverse normal CDF((k + 0.5) / 65536)),
// mirrored so that it is exactly symmetric; nv_unit = 1 / its standard deviation.
static int16_t nv_table[65536];
static float nv_unit;
static int nv_max;                 // max |entry| (= -nv_table[0])
static uint8_t fp8_table[65536];   // E4M3 code of nv_table[k] * 448 / nv_max
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

// Acklam's inverse normal CDF (relative error < 1.2e-9), for p in (0, 0.5].
static double inv_normal_lower(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01,  -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    if (p < 0.02425) {
        double q = sqrt(-2.0 * log(p));
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    }
    double q = p - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

static void nv_init(void)
{
    double ss = 0;
    for (int k = 0; k < 32768; k++) {
        double x = inv_normal_lower(((double)k + 0.5) / 65536.0);
        int v = (int)lround(128.0 * x);
        nv_table[k] = (int16_t)v;
        nv_table[65535 - k] = (int16_t)-v;
        ss += 2.0 * (double)v * v;
    }
    nv_unit = (float)(1.0 / sqrt(ss / 65536.0));
    nv_max = -nv_table[0];
    for (int k = 0; k < 65536; k++)
        fp8_table[k] = synth_fp8_e4m3((float)nv_table[k] * (448.0f / (float)nv_max));
}

static inline void nv_ready(void) { pthread_once(&nv_once, nv_init); }

uint64_t synth_seed_of(uint64_t seed, const char *key)
{
    // FNV-1a over the key, then mixed with the seed.
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return synth_mix(h ^ synth_mix(seed));
}

// Row r's counter base: columns 4k..4k+3 of row r use synth_mix(base + k).
static inline uint64_t row_base(uint64_t tseed, uint64_t r)
{
    return synth_mix(tseed ^ (r * 0xD1B54A32D192ED03ull));
}

// Normal values (in table units, |v| <= NV_MAX) for columns [c0, c0 + n) of
// a row (c0 % 4 == 0): each 16-bit lane of a 64-bit draw indexes the table.
static void row_normal(uint64_t base, uint64_t c0, uint32_t n, int16_t *out)
{
    assert(c0 % 4 == 0);
    const uint64_t k0 = base + c0 / 4;
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint64_t a = synth_mix(k0 + i / 4);
        out[i] = nv_table[a & 0xFFFF];
        out[i + 1] = nv_table[(a >> 16) & 0xFFFF];
        out[i + 2] = nv_table[(a >> 32) & 0xFFFF];
        out[i + 3] = nv_table[a >> 48];
    }
    if (i < n) {
        uint64_t a = synth_mix(k0 + i / 4);
        for (uint32_t k = 0; i < n; i++, k++)
            out[i] = nv_table[(a >> (16 * k)) & 0xFFFF];
    }
}

uint8_t synth_fp8_e4m3(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    uint32_t sign = (b >> 24) & 0x80u;
    b &= 0x7FFFFFFFu;
    uint32_t code;
    if (b >= 0x3C800000u) { // |x| >= 2^-6: normal E4M3
        if (b >= 0x43E00000u) // >= 448 (and inf / NaN): saturate
            code = 0x7E;
        else {
            uint32_t r = b + 0x7FFFFu + ((b >> 20) & 1u); // RNE to 3 mantissa bits
            code = (r >> 20) - (120u << 3);               // rebias exponent 127 -> 7
            if (code > 0x7E)
                code = 0x7E;
        }
    } else { // subnormal: multiples of 2^-9; 2^14 has an ulp of 2^-9
        float ax;
        memcpy(&ax, &b, 4);
        float t = ax + 16384.0f;
        uint32_t tb;
        memcpy(&tb, &t, 4);
        code = tb - 0x46800000u; // 0..8 (8 == 2^-6, the smallest normal)
    }
    return (uint8_t)(code | sign);
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// Per-block factor, log-uniform in [0.5, 2].
static float block_factor(uint64_t tseed, uint64_t bi, uint64_t bj)
{
    uint64_t h = synth_mix(tseed ^ synth_mix(0xB10C0000ull + bi * 0x10001ull + (bj << 40)));
    double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
    return (float)exp2(2.0 * u - 1.0);
}

// One row of FP8 codes, table units scaled by 448 / nv_max.
static void row_fp8(uint64_t base, uint64_t cols, uint8_t *out)
{
    uint64_t i = 0;
    for (; i + 4 <= cols; i += 4) {
        uint64_t a = synth_mix(base + i / 4);
        out[i] = fp8_table[a & 0xFFFF];
        out[i + 1] = fp8_table[(a >> 16) & 0xFFFF];
        out[i + 2] = fp8_table[(a >> 32) & 0xFFFF];
        out[i + 3] = fp8_table[a >> 48];
    }
    if (i < cols) {
        uint64_t a = synth_mix(base + i / 4);
        for (uint32_t k = 0; i < cols; i++, k++)
            out[i] = fp8_table[(a >> (16 * k)) & 0xFFFF];
    }
}

// One 128-row block row of an FP8 linear: rows [r0, r1), all columns.
// Every 128x128 block gets one element set to +-nv_max (the table's largest
// magnitude) at a seeded position, so that each block's amax is exactly
// nv_max: one global code table then maps random bits straight to E4M3
// codes (no per-block amax pass), and scale_inv = amax / 448 holds exactly.
static void make_fp8_blockrow(const synth_tensor *t, uint64_t tseed, uint64_t r0, uint64_t r1,
                              uint8_t *dst, float *scale)
{
    const uint64_t cols = t->cols;
    const uint64_t ncb = (cols + SYNTH_BLK - 1) / SYNTH_BLK;
    const uint32_t nr = (uint32_t)(r1 - r0);
    const float std = t->gain / sqrtf((float)cols);
    for (uint32_t r = 0; r < nr; r++)
        row_fp8(row_base(tseed, r0 + r), cols, dst + (uint64_t)r * cols);
    const uint64_t bi = r0 / SYNTH_BLK;
    for (uint64_t j = 0; j < ncb; j++) {
        uint64_t c0 = j * SYNTH_BLK;
        uint32_t nc = (uint32_t)((cols - c0) < SYNTH_BLK ? (cols - c0) : SYNTH_BLK);
        uint64_t h = synth_mix(tseed ^ synth_mix(0xA3A3000000ull + bi * 0x10001ull + (j << 40)));
        uint32_t pos = (uint32_t)((h & 0xFFFFFFFFull) % ((uint64_t)nr * nc));
        dst[(uint64_t)(pos / nc) * cols + c0 + pos % nc] = (h >> 63) ? 0xFE : 0x7E;
        float f = block_factor(tseed, bi, j);
        scale[j] = (float)nv_max * nv_unit * std * f / 448.0f;
    }
}

void synth_make_rows(const synth_tensor *t, uint64_t tseed, const synth_router *router,
                     uint64_t r0, uint64_t r1, uint8_t *dst, float *scale)
{
    assert(r0 < r1 && r1 <= t->rows);
    nv_ready();
    const uint64_t cols = t->cols;
    switch (t->init) {
    case SI_LINEAR: {
        assert(r0 % SYNTH_BLK == 0 && (r1 % SYNTH_BLK == 0 || r1 == t->rows));
        const uint64_t ncb = (cols + SYNTH_BLK - 1) / SYNTH_BLK;
        for (uint64_t b0 = r0; b0 < r1; b0 += SYNTH_BLK) {
            uint64_t b1 = b0 + SYNTH_BLK < r1 ? b0 + SYNTH_BLK : r1;
            make_fp8_blockrow(t, tseed, b0, b1, dst + (b0 - r0) * cols,
                              scale + ((b0 - r0) / SYNTH_BLK) * ncb);
        }
        break;
    }
    case SI_DENSE:
    case SI_EMBED:
    case SI_NORM: {
        float std = t->init == SI_DENSE ? t->gain / sqrtf((float)cols)
                  : t->init == SI_EMBED ? t->gain : 0.1f;
        float add = t->init == SI_NORM ? 1.0f : 0.0f;
        uint16_t lut[2 * NV_MAX + 1];
        for (int v = -NV_MAX; v <= NV_MAX; v++)
            lut[v + NV_MAX] = f32_to_bf16(add + (float)v * nv_unit * std);
        int16_t tmp[256];
        uint16_t *out = (uint16_t *)dst;
        for (uint64_t r = r0; r < r1; r++) {
            uint64_t base = row_base(tseed, r);
            for (uint64_t c0 = 0; c0 < cols; c0 += 256) {
                uint32_t n = (uint32_t)(cols - c0 < 256 ? cols - c0 : 256);
                row_normal(base, c0, n, tmp);
                for (uint32_t c = 0; c < n; c++)
                    out[(r - r0) * cols + c0 + c] = lut[tmp[c] + NV_MAX];
            }
        }
        break;
    }
    case SI_GATE: {
        assert(router && (uint32_t)t->layer < router->n_blocks && cols == router->hidden);
        const float *g = router->gate + (uint64_t)t->layer * router->experts * router->hidden;
        uint16_t *out = (uint16_t *)dst;
        for (uint64_t r = r0; r < r1; r++)
            for (uint64_t c = 0; c < cols; c++)
                out[(r - r0) * cols + c] = f32_to_bf16(g[r * cols + c]);
        break;
    }
    case SI_BIAS: {
        assert(router && r0 == 0 && r1 == 1 && cols == router->experts);
        memcpy(dst, router->bias + (uint64_t)t->layer * router->experts, cols * sizeof(float));
        break;
    }
    case SI_SCALE:
        assert(!"scale_inv tensors are made with their FP8 tensor");
        break;
    }
}

// ---- router ---------------------------------------------------------------

// A random permutation of n (Fisher-Yates over a splitmix stream).
static void permutation(uint64_t seed, uint32_t n, uint32_t *perm)
{
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        uint64_t h = synth_mix(seed + i);
        uint32_t j = (uint32_t)(h % i);
        uint32_t x = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = x;
    }
}

float synth_router_bias(uint64_t seed, uint32_t layer, uint32_t e, uint32_t n_experts)
{
    assert(e < n_experts && n_experts >= 2);
    uint32_t *perm = malloc(n_experts * sizeof *perm);
    if (!perm)
        return 0.0f;
    permutation(synth_seed_of(seed, "router.rank") + layer * 0x9E3779B97F4A7C15ull, n_experts, perm);
    uint32_t rank = perm[e];
    free(perm);
    // Zipf-like popularity: bias falls with log(rank), its range normalised
    // so that the skew is similar for any expert count (~8x max/median with
    // 128 experts top-8 on isotropic inputs).
    double b = 0.1 - 0.3 * log(1.0 + rank) / log((double)n_experts);
    return (float)b;
}

// Router gates: rows of block l are rho * (rows of block l-1, permuted) +
// sqrt(1 - rho^2) * fresh noise, so consecutive layers' routing is
// correlated (a next-layer predictor has signal), then scaled by
// 1 / sqrt(hidden) so that logits on a unit-RMS input have unit variance.
#define ROUTER_RHO 0.6f

int synth_router_init(synth_router *r, const synth_preset *p, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->n_blocks = p->layers + p->nextn;
    r->first = p->first_dense;
    r->experts = p->experts;
    r->hidden = p->hidden;
    const uint64_t per = (uint64_t)p->experts * p->hidden;
    r->gate = calloc((uint64_t)r->n_blocks * per, sizeof(float));
    r->bias = calloc((uint64_t)r->n_blocks * p->experts, sizeof(float));
    uint32_t *perm = malloc(p->experts * sizeof *perm);
    int16_t *tmp = malloc(p->hidden * sizeof *tmp);
    if (!r->gate || !r->bias || !perm || !tmp) {
        free(perm);
        free(tmp);
        synth_router_free(r);
        return -1;
    }
    nv_ready();
    const float keep = ROUTER_RHO, fresh = sqrtf(1.0f - ROUTER_RHO * ROUTER_RHO);
    const float unit = 1.0f / sqrtf((float)p->hidden);
    for (uint32_t l = r->first; l < r->n_blocks; l++) {
        float *g = r->gate + (uint64_t)l * per;
        const float *prev = l > r->first ? r->gate + (uint64_t)(l - 1) * per : NULL;
        uint64_t ls = synth_seed_of(seed, "router.gate") + l * 0x9E3779B97F4A7C15ull;
        permutation(ls ^ 0x5A5A5A5Aull, p->experts, perm);
        for (uint32_t e = 0; e < p->experts; e++) {
            row_normal(row_base(ls, e), 0, p->hidden, tmp);
            for (uint32_t h = 0; h < p->hidden; h++) {
                float n = (float)tmp[h] * nv_unit * unit;
                g[(uint64_t)e * p->hidden + h] =
                    prev ? keep * prev[(uint64_t)perm[e] * p->hidden + h] + fresh * n : n;
            }
        }
        for (uint32_t e = 0; e < p->experts; e++)
            r->bias[(uint64_t)l * p->experts + e] = synth_router_bias(seed, l, e, p->experts);
    }
    free(perm);
    free(tmp);
    return 0;
}

void synth_router_free(synth_router *r)
{
    free(r->gate);
    free(r->bias);
    r->gate = r->bias = NULL;
}

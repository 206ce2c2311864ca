// tests/test_qt_iq.c — the i-quants (kernels/qt_iq*.c).
// References: llama.cpp's own dequantisation of sampled rows of the tiny-dsv3
// i-quant files (tests/fixtures/llamacpp/samples + qrows: ggml's
// dequantize_row_iq*, bit for bit); ggml's lookup tables through spot
// values copied from ggml-common.h; for the dot products a double-precision
// dot of the dequantised weights with the dequantised activations (within
// a bound derived from the magnitudes), bit equality of every compiled
// path with the scalar one, and llama.cpp's own x86 vec_dot / tinyBLAS
// results (tests/fixtures/llamacpp_vdot_iq), bit for bit on every path.
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_internal.h"
#include "kernels/matmul.h"
#include "kernels/qtypes.h"
#include "kernels/qt_iq.h"
#include "kernels/qt_iq_grid.h"
#include "tests/testutil.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() & 0xFFFFFF) / 16777216.0f; }

static const uint32_t IQ_TYPES[] = {PT_IQ1_S, PT_IQ1_M, PT_IQ2_XXS, PT_IQ2_XS, PT_IQ2_S,
                                    PT_IQ3_XXS, PT_IQ3_S, PT_IQ4_NL, PT_IQ4_XS};
#define N_IQ_TYPES (sizeof IQ_TYPES / sizeof IQ_TYPES[0])

static bool is_iq(uint32_t t)
{
    for (size_t k = 0; k < N_IQ_TYPES; k++)
        if (IQ_TYPES[k] == t)
            return true;
    return false;
}

static const pt_qtraits *traits_by_ggml_name(const char *name)
{
    for (uint32_t t = 0; t < 40; t++) {
        const pt_qtraits *q = pt_qtraits_of(t);
        if (q && strcmp(q->ggml_name, name) == 0)
            return q;
    }
    return NULL;
}

// ---- tables ----------------------------------------------------------------

Test(iq_grid, spot_values_from_ggml_common_h)
{
    // first / last / an inner entry of each table, as printed in ggml-common.h
    cr_assert_eq(pt_iq2xxs_grid[0], 0x0808080808080808ull);
    cr_assert_eq(pt_iq2xxs_grid[128], 0x082b2b0808082b08ull);
    cr_assert_eq(pt_iq2xxs_grid[255], 0x2b2b2b1908081908ull);
    cr_assert_eq(pt_iq2xs_grid[256], 0x190808080808192bull);
    cr_assert_eq(pt_iq2xs_grid[511], 0x2b2b2b2b2b2b2b2bull);
    cr_assert_eq(pt_iq2s_grid[512], 0x19080819082b1919ull);
    cr_assert_eq(pt_iq2s_grid[1023], 0x2b2b2b2b2b2b2b2bull);
    cr_assert_eq(pt_iq3xxs_grid[128], 0x141c3e04u);
    cr_assert_eq(pt_iq3xxs_grid[255], 0x3e341c04u);
    cr_assert_eq(pt_iq3s_grid[256], 0x05090507u);
    cr_assert_eq(pt_iq3s_grid[511], 0x0f0f0101u);
    cr_assert_eq(pt_iq1s_grid[0], 0xffffffffffffffffull);
    cr_assert_eq(pt_iq1s_grid[1024], 0x0000000000ff0100ull);
    cr_assert_eq(pt_iq1s_grid[2047], 0x0101010101010101ull);
    cr_assert_eq(pt_ksigns_iq2xs[1], 129);
    cr_assert_eq(pt_ksigns_iq2xs[127], 255);
    const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    cr_assert_eq(memcmp(pt_kvalues_iq4nl, kv, 16), 0);
}

Test(iq_grid, structure)
{
    // properties the format defines: IQ2 grids use magnitudes {8, 25, 43},
    // IQ3_XXS {4, 12, ..., 52, 62}, IQ3_S odd 1..15, IQ1 {-1, 0, 1}; entries
    // are distinct; ksigns has even parity and keeps the 7 low bits;
    // ksigns_pm1 is its byte expansion.
    const uint64_t *g2[3] = {pt_iq2xxs_grid, pt_iq2xs_grid, pt_iq2s_grid};
    const int n2[3] = {256, 512, 1024};
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < n2[t]; k++) {
            for (int j = 0; j < 8; j++) {
                const int v = (int)(g2[t][k] >> 8 * j & 0xff);
                cr_assert(v == 8 || v == 25 || v == 43, "grid %d entry %d", t, k);
            }
            if (k)
                cr_assert(g2[t][k] > g2[t][k - 1], "sorted and distinct");
        }
    for (int k = 0; k < 256; k++)
        for (int j = 0; j < 4; j++) {
            const int v = (int)(pt_iq3xxs_grid[k] >> 8 * j & 0xff);
            cr_assert(v == 62 || (v % 8 == 4 && v <= 52), "iq3xxs %d", k);
        }
    for (int k = 0; k < 512; k++)
        for (int j = 0; j < 4; j++) {
            const int v = (int)(pt_iq3s_grid[k] >> 8 * j & 0xff);
            cr_assert(v % 2 == 1 && v <= 15, "iq3s %d", k);
        }
    for (int k = 0; k < 2048; k++) {
        for (int j = 0; j < 8; j++) {
            const int v = (int8_t)(pt_iq1s_grid[k] >> 8 * j & 0xff);
            cr_assert(v >= -1 && v <= 1, "iq1s %d", k);
        }
        if (k)
            cr_assert(pt_iq1s_grid[k] != pt_iq1s_grid[k - 1]);
    }
    for (int k = 0; k < 128; k++) {
        const int s = pt_ksigns_iq2xs[k];
        cr_assert_eq(s & 127, k);
        cr_assert_eq(__builtin_popcount(s) % 2, 0);
        for (int j = 0; j < 8; j++)
            cr_assert_eq((int8_t)(pt_ksigns_pm1[k] >> 8 * j & 0xff), s >> j & 1 ? -1 : 1);
    }
}

// ---- dequantisation against llama.cpp's --------------------------------------

// Every tensor of an i-quant type in the sampled rows of <label>: our
// dequantisation of its stored bytes equals ggml's floats bit for bit.
// Returns how many rows were checked.
static int check_label(const char *label, int *per_type)
{
    char rel[256];
    snprintf(rel, sizeof rel, "llamacpp/samples/tiny-dsv3-%s.rows.json", label);
    char *pj = tu_fixture(rel);
    snprintf(rel, sizeof rel, "llamacpp/samples/tiny-dsv3-%s.rows.f32", label);
    char *pf = tu_fixture(rel);
    snprintf(rel, sizeof rel, "llamacpp/qrows/tiny-dsv3-%s.qrows.json", label);
    char *pqj = tu_fixture(rel);
    snprintf(rel, sizeof rel, "llamacpp/qrows/tiny-dsv3-%s.qrows.bin", label);
    char *pqb = tu_fixture(rel);
    json_object *rows = json_object_from_file(pj), *qrows = json_object_from_file(pqj);
    size_t flen = 0, qlen = 0;
    uint8_t *f32 = tu_read(pf, &flen), *qbin = tu_read(pqb, &qlen);
    cr_assert(rows && qrows && f32 && qbin, "fixtures of %s", label);

    json_object *tensors = json_object_object_get(rows, "tensors");
    int checked = 0;
    for (size_t t = 0; t < json_object_array_length(tensors); t++) {
        json_object *te = json_object_array_get_idx(tensors, t);
        const char *name = json_object_get_string(json_object_object_get(te, "name"));
        const char *type = json_object_get_string(json_object_object_get(te, "type"));
        const pt_qtraits *q = traits_by_ggml_name(type);
        cr_assert(q, "%s: type %s unknown", name, type);
        uint32_t id = 0;
        while (pt_qtraits_of(id) != q)
            id++;
        if (!is_iq(id))
            continue;
        cr_assert(q->dequant, "%s: no dequant", type);
        const int64_t n = json_object_get_int64(json_object_object_get(te, "n_per_row"));
        const int64_t foff = json_object_get_int64(json_object_object_get(te, "offset_bytes"));
        json_object *qe = json_object_object_get(qrows, name);
        cr_assert(qe, "%s: %s not in qrows", label, name);
        const int64_t qoff = json_object_get_int64(json_object_array_get_idx(qe, 0));
        const int64_t qrb = json_object_get_int64(json_object_array_get_idx(qe, 1));
        cr_assert_eq(qrb, n / q->blck * q->bytes, "%s: row bytes", name);
        const size_t nrows = json_object_array_length(json_object_object_get(te, "rows"));
        float *got = malloc((size_t)n * sizeof(float));
        uint8_t *qcopy = malloc((size_t)qrb);
        for (size_t r = 0; r < nrows; r++) {
            cr_assert((size_t)(qoff + (int64_t)(r + 1) * qrb) <= qlen);
            cr_assert((size_t)foff + (r + 1) * (size_t)n * 4 <= flen);
            memcpy(qcopy, qbin + qoff + (int64_t)r * qrb, (size_t)qrb); // any alignment
            q->dequant(qcopy, got, n);
            const uint8_t *want = f32 + foff + r * (size_t)n * 4;
            for (int64_t j = 0; j < n; j++) {
                float w;
                memcpy(&w, want + 4 * j, 4);
                cr_assert_eq(fbits(got[j]), fbits(w), "%s %s row %zu [%ld]: %.9g vs ggml %.9g",
                             label, name, r, (long)j, got[j], w);
            }
            checked++;
            per_type[id]++;
        }
        free(got);
        free(qcopy);
    }
    json_object_put(rows);
    json_object_put(qrows);
    free(f32); free(qbin); free(pj); free(pf); free(pqj); free(pqb);
    return checked;
}

Test(iq_dequant, bit_identical_to_ggml)
{
    const char *labels[] = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S",
                            "IQ3_XXS", "IQ3_S", "IQ4_NL", "IQ4_XS", "IQ2_M"};
    int per_type[40] = {0}, total = 0;
    for (size_t k = 0; k < sizeof labels / sizeof labels[0]; k++)
        total += check_label(labels[k], per_type);
    for (size_t k = 0; k < N_IQ_TYPES; k++)
        cr_assert(per_type[IQ_TYPES[k]] > 0, "no fixture rows of type %u", IQ_TYPES[k]);
    cr_assert(total > 1000, "%d rows", total);
}

// ---- dot products ------------------------------------------------------------

// Random weight blocks: random bytes, then a sane fp16 scale where the type
// keeps one (IQ1_M: in the top nibbles of its four scale words).
static void rand_weights(uint32_t t, uint8_t *w, int64_t n)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    const int64_t nb = n / q->blck;
    for (int64_t i = 0; i < nb * q->bytes; i++)
        w[i] = (uint8_t)rnd32();
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * q->bytes;
        const uint16_t h = pt_f32_to_fp16(rndf(0.0005f, 0.02f) * (rnd32() & 1 ? -1.0f : 1.0f));
        if (t == PT_IQ1_M) {
            uint8_t *sc = blk + 48;
            for (int k = 0; k < 4; k++)
                sc[2 * k + 1] = (uint8_t)((sc[2 * k + 1] & 0x0f) | ((h >> 4 * k & 0xf) << 4));
        } else {
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
        }
    }
}

// Activations in the act type's ggml layout with quants in [-127, 127]
// (mode 0 random, 1 all +127, 2 all -127), and their dequantised floats.
static void rand_act(pt_dtype act, void *xq, float *xf, int64_t n, int mode)
{
    for (int64_t i = 0; i < n; i++)
        xf[i] = mode == 1 ? 127.0f : mode == 2 ? -127.0f : (float)((int)(rnd32() % 255) - 127);
    if (act == PT_Q8_K) {
        block_q8_K *y = xq;
        for (int64_t b = 0; b < n / QK_K; b++) {
            y[b].d = rndf(0.001f, 0.05f);
            for (int j = 0; j < QK_K; j++)
                y[b].qs[j] = (int8_t)xf[b * QK_K + j];
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++)
                    s += y[b].qs[16 * g + j];
                y[b].bsums[g] = (int16_t)s;
            }
            for (int j = 0; j < QK_K; j++)
                xf[b * QK_K + j] *= y[b].d;
        }
    } else {
        block_q8_0 *y = xq;
        for (int64_t b = 0; b < n / QK; b++) {
            y[b].d = pt_f32_to_fp16(rndf(0.001f, 0.05f));
            const float d = pt_fp16_to_f32(y[b].d);
            for (int j = 0; j < QK; j++) {
                y[b].qs[j] = (int8_t)xf[b * QK + j];
                xf[b * QK + j] *= d;
            }
        }
    }
}

static bool path_available(int path)
{
#if defined(__x86_64__)
    if (path == PT_QPATH_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (path == PT_QPATH_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
    return path == PT_QPATH_SCALAR;
}

// The AVX-512 row kernels that the entry may not pick on this CPU, with
// the extra feature each needs (0: none, 1: VBMI, 2: GFNI, 3: VBMI + GFNI +
// BITALG).
static const struct {
    uint32_t t;
    pt_vdot_fn f;
    int needs;
} alt512[] = {{PT_IQ4_XS, pt_vdot_iq4_xs_avx512bw, 0},
              {PT_IQ2_XXS, pt_vdot_iq2_xxs_avx512bw, 0},
              {PT_IQ4_XS, pt_vdot_iq4_xs_avx512vbmi, 1},
              {PT_IQ4_XS, pt_vdot_iq4_xs_avx512ymm, 2},
              {PT_IQ4_XS, pt_vdot_iq4_xs_avx512z4, 1},
              {PT_IQ2_XXS, pt_vdot_iq2_xxs_avx512z4, 3}};

static bool alt_ok(int needs)
{
#if defined(__x86_64__)
    if (needs == 1)
        return __builtin_cpu_supports("avx512vbmi");
    if (needs == 2)
        return __builtin_cpu_supports("gfni");
    if (needs == 3)
        return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("gfni") &&
               __builtin_cpu_supports("avx512bitalg");
#endif
    return needs == 0;
}

static void check_vdot(uint32_t t)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    cr_assert(q && q->vdot[PT_QPATH_SCALAR], "%u: no scalar vdot", t);
    const int64_t lens_k[] = {256, 512, 768, 2048, 7168};
    const int64_t lens_nl[] = {32, 64, 96, 128, 160, 192, 224, 288, 512, 7168};
    const bool nl = t == PT_IQ4_NL;
    const int64_t *lens = nl ? lens_nl : lens_k;
    const size_t nlens = nl ? 10 : 5;
    int ran[PT_QPATH_N] = {0};
    int alt_ran[sizeof alt512 / sizeof alt512[0]] = {0};
    for (size_t li = 0; li < nlens; li++) {
        const int64_t n = lens[li];
        uint8_t *w = malloc((size_t)(n / q->blck * q->bytes));
        void *xq = aligned_alloc(64, (pt_act_row_bytes(q->act, n) + 63) / 64 * 64);
        float *wf = malloc((size_t)n * 4), *xf = malloc((size_t)n * 4);
        for (int rep = 0; rep < 12; rep++) {
            rand_weights(t, w, n);
            rand_act(q->act, xq, xf, n, rep < 10 ? 0 : rep - 9);
            q->dequant(w, wf, n);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wf[i] * xf[i];
                mag += fabs((double)wf[i] * xf[i]);
            }
            const float s = q->vdot[PT_QPATH_SCALAR](w, xq, n);
            // each super-block (or block) contributes its exact sum rounded a
            // few times (scale products, int -> float, the fma), each
            // dequantised weight is itself rounded once: a few ulps of the
            // magnitude per term.
            const double tol = 8.0 * 0x1p-24 * (mag + fabs(ref)) + 1e-30;
            cr_assert(fabs((double)s - ref) <= tol, "%s n=%ld rep %d: %.9g vs %.9g (tol %.3g)",
                      q->name, (long)n, rep, s, ref, tol);
            for (int p = 1; p < PT_QPATH_N; p++) {
                if (!q->vdot[p] || !path_available(p))
                    continue;
                const float v = q->vdot[p](w, xq, n);
                cr_assert_eq(fbits(v), fbits(s), "%s path %d n=%ld rep %d: %.9g vs scalar %.9g",
                             q->name, p, (long)n, rep, v, s);
                ran[p]++;
            }
            // the AVX-512 kernels a CPU without VBMI runs instead (the
            // AVX-512 entry picks at run time), checked on any AVX-512 CPU
            for (size_t k = 0; k < sizeof alt512 / sizeof alt512[0]; k++)
                if (alt512[k].t == t && alt512[k].f && path_available(PT_QPATH_AVX512) && alt_ok(alt512[k].needs)) {
                    cr_assert_eq(fbits(alt512[k].f(w, xq, n)), fbits(s), "%s AVX-512 variant %zu n=%ld rep %d",
                                 q->name, k, (long)n, rep);
                    alt_ran[k]++;
                }
        }
        free(w); free(xq); free(wf); free(xf);
    }
    // a SIMD path the CPU has and the type defines must have run (not
    // skipped by a wrong capability check)
    for (int p = 1; p < PT_QPATH_N; p++)
        if (q->vdot[p] && path_available(p))
            cr_assert_gt(ran[p], 0, "%s: path %d available but not run", q->name, p);
    for (size_t k = 0; k < sizeof alt512 / sizeof alt512[0]; k++)
        if (alt512[k].t == t && alt512[k].f && path_available(PT_QPATH_AVX512) && alt_ok(alt512[k].needs))
            cr_assert_gt(alt_ran[k], 0, "%s: AVX-512 variant %zu available but not run", q->name, k);
}

Test(iq_vdot, iq1_s) { check_vdot(PT_IQ1_S); }
Test(iq_vdot, iq1_m) { check_vdot(PT_IQ1_M); }
Test(iq_vdot, iq2_xxs) { check_vdot(PT_IQ2_XXS); }
Test(iq_vdot, iq2_xs) { check_vdot(PT_IQ2_XS); }
Test(iq_vdot, iq2_s) { check_vdot(PT_IQ2_S); }
Test(iq_vdot, iq3_xxs) { check_vdot(PT_IQ3_XXS); }
Test(iq_vdot, iq3_s) { check_vdot(PT_IQ3_S); }
Test(iq_vdot, iq4_nl) { check_vdot(PT_IQ4_NL); }
Test(iq_vdot, iq4_xs) { check_vdot(PT_IQ4_XS); }

// Batched products: where an i-quant has a vdot4 (one weight row times 4
// activation rows), each of its outputs equals that path's vdot bit for bit
// (random rows, activations random / all +127 / all -127, the four rows
// different), and pt_gemm of any batch (fours through vdot4, the rest
// vdot) equals pt_gemv per vector on every kernel path.
// The vdot4-against-vdot part on rows of n values; returns the outputs checked.
static int vdot4_vs_vdot(uint32_t t, int64_t n)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    const size_t ab = pt_act_row_bytes(q->act, n);
    uint8_t *w = malloc((size_t)(n / q->blck * q->bytes));
    char *xq = aligned_alloc(64, (4 * ab + 63) / 64 * 64);
    float *xf = malloc((size_t)n * 4);
    int checked = 0;
    for (int rep = 0; rep < 6; rep++) {
        rand_weights(t, w, n);
        for (int j = 0; j < 4; j++)
            rand_act(q->act, xq + j * ab, xf, n, (rep + j) % 3);
        for (int p = 0; p < PT_QPATH_N; p++) {
            if (!q->vdot4[p] || !path_available(p))
                continue;
            float o[4];
            q->vdot4[p](w, xq, ab, n, o);
            for (int j = 0; j < 4; j++) {
                const float want = pt_vdot_of(q, p)(w, xq + j * ab, n);
                cr_assert_eq(fbits(o[j]), fbits(want), "%s path %d rep %d row %d: vdot4 %.9g vdot %.9g", q->name, p,
                             rep, j, o[j], want);
                checked++;
            }
        }
    }
    free(w); free(xq); free(xf);
    return checked;
}

static void check_vdot4(uint32_t t)
{
    const pt_qtraits *q = pt_qtraits_of(t);
    const int64_t n = 2048;
    // an odd number of super-blocks too (kernels that take them in pairs)
    const int checked = vdot4_vs_vdot(t, n);
    vdot4_vs_vdot(t, 768);
    if (path_available(PT_QPATH_AVX2))
        cr_assert_gt(checked, 0, "%s: no vdot4 ran on this AVX2 CPU", q->name);
    if (path_available(PT_QPATH_AVX512) && q->vdot4[PT_QPATH_AVX512])
        cr_assert_geq(checked, 6 * 4 * 2, "%s: the AVX-512 vdot4 did not run on this AVX-512 CPU", q->name);
    const int64_t rows = 13, batches[] = {1, 4, 9};
    const size_t rb = (size_t)(n / q->blck * q->bytes);
    uint8_t *W = malloc(rb * rows);
    for (int64_t r = 0; r < rows; r++)
        rand_weights(t, W + r * rb, n);
    pt_mat m = {.data = W, .type = t, .rows = rows, .cols = n};
    float *X = malloc(sizeof(float) * (size_t)(9 * n)), *Y = malloc(sizeof(float) * (size_t)(9 * rows));
    float *y1 = malloc(sizeof(float) * rows);
    for (int64_t i = 0; i < 9 * n; i++)
        X[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
    const pt_kernel_path paths[] = {PT_PATH_SCALAR, PT_PATH_AVX2, PT_PATH_AVX512};
    for (size_t pi = 0; pi < 3; pi++) {
        if (!pt_kernel_path_supported(paths[pi]))
            continue;
        pt_kernel_set_path(paths[pi]);
        for (size_t bi = 0; bi < 3; bi++) {
            pt_gemm(&m, X, batches[bi], Y);
            for (int64_t v = 0; v < batches[bi]; v++) {
                pt_gemv(&m, X + v * n, y1);
                for (int64_t r = 0; r < rows; r++)
                    cr_assert_eq(fbits(Y[v * rows + r]), fbits(y1[r]), "%s path %s batch %lld v %lld r %lld",
                                 q->name, pt_kernel_path_name(), (long long)batches[bi], (long long)v, (long long)r);
            }
        }
    }
    pt_kernel_set_path(PT_PATH_AUTO);
    free(W); free(X); free(Y); free(y1);
}

// On this CPU matmul's automatic choice is the best path it has, and for
// every i-quant the row kernel it takes is that path's own (or, where the
// type has none, the one below it): which functions the products run.
Test(iq_vdot, dispatch_on_this_cpu)
{
    pt_kernel_set_path(PT_PATH_AUTO);
    const int qp = pt_kern_current()->qpath;
    int want = PT_QPATH_SCALAR;
    if (path_available(PT_QPATH_AVX512))
        want = PT_QPATH_AVX512;
    else if (path_available(PT_QPATH_AVX2))
        want = PT_QPATH_AVX2;
    if (!getenv("PETREL_KERNELS")) // (that variable forces a path)
        cr_assert_eq(qp, want, "kernel path %s takes i-quant path %d, expected %d", pt_kernel_path_name(), qp, want);
    for (size_t k = 0; k < N_IQ_TYPES; k++) {
        const pt_qtraits *q = pt_qtraits_of(IQ_TYPES[k]);
        int p = qp;
        while (!q->vdot[p])
            p--;
        cr_assert_eq((void *)pt_vdot_of(q, qp), (void *)q->vdot[p], "%s", q->name);
        cr_log_info("%s: path %s runs the vdot of i-quant path %d%s", q->name, pt_kernel_path_name(), p,
                    pt_vdot4_of(q, qp) ? " and a vdot4" : "");
    }
}

Test(iq_vdot, iq2_xxs_vdot4) { check_vdot4(PT_IQ2_XXS); }
Test(iq_vdot, iq4_xs_vdot4) { check_vdot4(PT_IQ4_XS); }

// The dequantisation of real llama.cpp blocks (the fixture rows) meets the
// dot product too: scalar vdot of a fixture row with random activations
// against the float dot of ggml's own dequantised floats.
Test(iq_vdot, fixture_rows_against_ggml_floats)
{
    const char *labels[] = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS"};
    for (size_t k = 0; k < sizeof labels / sizeof labels[0]; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "llamacpp/samples/tiny-dsv3-%s.rows.json", labels[k]);
        char *pj = tu_fixture(rel);
        snprintf(rel, sizeof rel, "llamacpp/samples/tiny-dsv3-%s.rows.f32", labels[k]);
        char *pf = tu_fixture(rel);
        snprintf(rel, sizeof rel, "llamacpp/qrows/tiny-dsv3-%s.qrows.json", labels[k]);
        char *pqj = tu_fixture(rel);
        snprintf(rel, sizeof rel, "llamacpp/qrows/tiny-dsv3-%s.qrows.bin", labels[k]);
        char *pqb = tu_fixture(rel);
        json_object *rows = json_object_from_file(pj), *qrows = json_object_from_file(pqj);
        size_t flen, qlen;
        uint8_t *f32 = tu_read(pf, &flen), *qbin = tu_read(pqb, &qlen);
        cr_assert(rows && qrows && f32 && qbin);
        json_object *tensors = json_object_object_get(rows, "tensors");
        for (size_t t = 0; t < json_object_array_length(tensors); t++) {
            json_object *te = json_object_array_get_idx(tensors, t);
            const char *name = json_object_get_string(json_object_object_get(te, "name"));
            const pt_qtraits *q = traits_by_ggml_name(json_object_get_string(json_object_object_get(te, "type")));
            if (!q || q->act != PT_Q8_K || strncmp(q->name, "iq", 2) != 0)
                continue;
            const int64_t n = json_object_get_int64(json_object_object_get(te, "n_per_row"));
            const int64_t foff = json_object_get_int64(json_object_object_get(te, "offset_bytes"));
            json_object *qe = json_object_object_get(qrows, name);
            const int64_t qoff = json_object_get_int64(json_object_array_get_idx(qe, 0));
            void *xq = aligned_alloc(64, (pt_act_row_bytes(PT_Q8_K, n) + 63) / 64 * 64);
            float *xf = malloc((size_t)n * 4), *wf = malloc((size_t)n * 4);
            rand_act(PT_Q8_K, xq, xf, n, 0);
            memcpy(wf, f32 + foff, (size_t)n * 4);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wf[i] * xf[i];
                mag += fabs((double)wf[i] * xf[i]);
            }
            const float s = q->vdot[PT_QPATH_SCALAR](qbin + qoff, xq, n);
            cr_assert(fabs((double)s - ref) <= 8.0 * 0x1p-24 * (mag + fabs(ref)) + 1e-30,
                      "%s %s: %.9g vs %.9g", labels[k], name, s, ref);
            for (int p = 1; p < PT_QPATH_N; p++)
                if (q->vdot[p] && path_available(p))
                    cr_assert_eq(fbits(q->vdot[p](qbin + qoff, xq, n)), fbits(s), "%s %s path %d",
                                 labels[k], name, p);
            free(xq); free(xf); free(wf);
        }
        json_object_put(rows);
        json_object_put(qrows);
        free(f32); free(qbin); free(pj); free(pf); free(pqj); free(pqb);
    }
}

// With the engine's own activation quantisers (pt_actq_of): every i-quant is
// a supported type, and vdot of a real activation row stays within the
// bound of the float dot of the dequantised weights with the original f32
// activations (the bound adds the activation rounding: half a quantisation
// step per value). The result does not depend on the bsums of Q8_K (but
// for IQ1_S, whose delta term ggml takes from them).
Test(iq_vdot, with_engine_activation_quantisers)
{
    for (size_t k = 0; k < N_IQ_TYPES; k++) {
        const uint32_t t = IQ_TYPES[k];
        const pt_qtraits *q = pt_qtraits_of(t);
        cr_assert(pt_dtype_valid(t), "%s not supported", q->name);
        const pt_actq_fn actq = pt_actq_of(q->act);
        cr_assert(actq);
        const int64_t n = 2048;
        uint8_t *w = malloc((size_t)(n / q->blck * q->bytes));
        void *xq = aligned_alloc(64, (pt_act_row_bytes(q->act, n) + 63) / 64 * 64);
        float *wf = malloc((size_t)n * 4), *x = malloc((size_t)n * 4);
        for (int rep = 0; rep < 4; rep++) {
            rand_weights(t, w, n);
            q->dequant(w, wf, n);
            float amax = 0;
            for (int64_t i = 0; i < n; i++) {
                x[i] = rndf(-1.0f, 1.0f);
                amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            }
            actq(x, xq, n);
            double ref = 0, mag = 0, wsum = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wf[i] * x[i];
                mag += fabs((double)wf[i] * x[i]);
                wsum += fabs((double)wf[i]);
            }
            const float s = q->vdot[PT_QPATH_SCALAR](w, xq, n);
            // Q8_0 rounds its scale to fp16: error <= (0.5 + 127 * 2^-11) * step
            const double tol = 8.0 * 0x1p-24 * mag + 0.57 * (amax / 127.0) * wsum;
            cr_assert(fabs((double)s - ref) <= tol, "%s: %.9g vs %.9g (tol %.3g)", q->name, s, ref, tol);
            for (int p = 1; p < PT_QPATH_N; p++)
                if (q->vdot[p] && path_available(p))
                    cr_assert_eq(fbits(q->vdot[p](w, xq, n)), fbits(s), "%s path %d", q->name, p);
            if (q->act == PT_Q8_K && t != PT_IQ1_S) { // IQ1_S reads the bsums, as ggml does
                block_q8_K *y = xq;
                for (int64_t b = 0; b < n / QK_K; b++)
                    memset(y[b].bsums, 0x5a, sizeof y[b].bsums);
                for (int p = 0; p < PT_QPATH_N; p++)
                    if (q->vdot[p] && path_available(p))
                        cr_assert_eq(fbits(q->vdot[p](w, xq, n)), fbits(s), "%s path %d uses bsums", q->name, p);
            }
        }
        free(w); free(xq); free(wf); free(x);
    }
}

// ---- llama.cpp's own x86 results ---------------------------------------------

// tests/fixtures/llamacpp_vdot_iq (gen_vdot_iq.c there): rows of every
// i-quant with activations, llama.cpp's x86 quantisation of the activations
// and its ggml_vec_dot result. Petrel's activation quantiser gives the same
// bytes and every path's vdot the same float, bit for bit.
Test(iq_vdot, llamacpp_x86_bit_identical)
{
    char *js = tu_fixture("llamacpp_vdot_iq/cases.json"), *bn = tu_fixture("llamacpp_vdot_iq/cases.bin");
    json_object *root = json_object_from_file(js), *cases, *v;
    size_t blen = 0;
    uint8_t *bin = tu_read(bn, &blen);
    cr_assert(root && bin, "fixture %s", js);
    cr_assert(json_object_object_get_ex(root, "cases", &cases));
    int checked = 0, per_type[40] = {0};
    for (size_t k = 0; k < json_object_array_length(cases); k++) {
        json_object *c = json_object_array_get_idx(cases, k);
        cr_assert(json_object_object_get_ex(c, "type", &v));
        const int type = pt_dtype_from_name(json_object_get_string(v));
        const pt_qtraits *q = pt_qtraits_of((uint32_t)type);
        cr_assert(q && is_iq((uint32_t)type));
        cr_assert(json_object_object_get_ex(c, "n", &v));
        const int64_t n = json_object_get_int64(v);
        int64_t off[3], len[3];
        const char *keys[3] = {"w", "x_f32", "xq"};
        for (int i = 0; i < 3; i++) {
            cr_assert(json_object_object_get_ex(c, keys[i], &v));
            off[i] = json_object_get_int64(json_object_array_get_idx(v, 0));
            len[i] = json_object_get_int64(json_object_array_get_idx(v, 1));
            cr_assert_leq((size_t)(off[i] + len[i]), blen);
        }
        cr_assert(json_object_object_get_ex(c, "dot_bits", &v));
        const uint32_t want = (uint32_t)json_object_get_int64(v);
        cr_assert_eq((size_t)len[0], (size_t)(n / q->blck * q->bytes));
        cr_assert_eq((size_t)len[2], pt_act_row_bytes(q->act, n));
        float *x = malloc((size_t)len[1]);
        memcpy(x, bin + off[1], (size_t)len[1]);
        uint8_t *xq = malloc((size_t)len[2]);
        pt_actq_of(q->act)(x, xq, n);
        cr_assert(memcmp(xq, bin + off[2], (size_t)len[2]) == 0,
                  "case %zu (%s n=%lld): activation bytes differ from llama.cpp's", k, q->name, (long long)n);
        for (int p = 0; p < PT_QPATH_N; p++) {
            if (!path_available(p) || !q->vdot[p])
                continue;
            const float got = q->vdot[p](bin + off[0], xq, n);
            float wf;
            memcpy(&wf, &want, 4);
            cr_expect_eq(fbits(got), want, "case %zu (%s n=%lld) path %d: %.9g, llama.cpp %.9g", k, q->name,
                         (long long)n, p, got, wf);
        }
        free(x);
        free(xq);
        per_type[type]++;
        checked++;
    }
    for (size_t k = 0; k < N_IQ_TYPES; k++)
        cr_assert_geq(per_type[IQ_TYPES[k]], 12, "%u: too few cases", IQ_TYPES[k]);
    cr_log_info("%d llama.cpp cases bit-identical", checked);
    json_object_put(root);
    free(bin);
    free(js);
    free(bn);
}

// tests/test_qt_k.c — the dot products of Q4_1, Q5_0, Q5_1 and Q2_K..Q6_K
// and the three activation quantisers.
// References: (1) a float dot of ggml-dequantised weights (pt_deq_*, itself
// checked bit for bit against ggml in test_qt_dequant_ggml) with the
// dequantised activations, computed in double, within a bound derived from
// the magnitudes of the terms; (2) every SIMD path equals the scalar path
// bit for bit (the family contracts of qtypes.h); (3) the activation
// quantisers against a straightforward reimplementation of ggml's
// formulas written here (lrintf in the default rounding mode, i.e. ties to
// even, as _mm256_round_ps and nearest_int round) on crafted inputs;
// (4) llama.cpp's own tensors (fixtures qrows/) against llama.cpp's own
// dequantisation of them (samples/), dotted in double with the activation;
// (5) llama.cpp's own x86 activation quantisation and vec_dot results
// (fixtures llamacpp_vdot/), bit for bit.
#include <criterion/criterion.h>
#include <dirent.h>
#include <json-c/json.h>
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/qt_k.h"
#include "kernels/qtypes.h"
#include "kernels/qt_legacy.h"
#include "testutil.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() & 0xFFFFFF) / 16777216.0f; }
static float rndn(void) // roughly normal: sum of 4 uniforms, centred
{
    return rndf(-1, 1) + rndf(-1, 1) + rndf(-1, 1) + rndf(-1, 1);
}
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// Where a type keeps its fp16 scale and (if any) its min inside a block,
// and the largest factor the min field is multiplied by (6-bit or 4-bit
// integer mins of the K types; 1 for the float min of Q4_1 / Q5_1).
typedef struct {
    pt_dtype t;
    int dofs;     // byte offset of fp16 d
    int mofs;     // byte offset of fp16 dmin / m, -1 if none
    float mmul;   // max integer multiplier of the min
} tinfo;

static const tinfo types[] = {
    {PT_Q4_1, 0, 2, 1}, {PT_Q5_0, 0, -1, 0}, {PT_Q5_1, 0, 2, 1},
    {PT_Q2_K, 80, 82, 15}, {PT_Q3_K, 108, -1, 0}, {PT_Q4_K, 0, 2, 63},
    {PT_Q5_K, 0, 2, 63}, {PT_Q6_K, 208, -1, 0},
};
#define NTYPES_T (sizeof types / sizeof types[0])

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

// Random weight row: random bytes, fp16 scales set by `mode`:
// 0 typical (d ~ 1e-3 .. 1e-2), 1 extremes (largest fp16, subnormal, zero,
// negative, mixed per block), 2 all-ones bytes (largest quants and scales).
static void rand_row(const tinfo *ti, uint8_t *w, int64_t nblk, int mode)
{
    const pt_qtraits *q = pt_qtraits_of(ti->t);
    for (int64_t i = 0; i < nblk * q->bytes; i++)
        w[i] = mode == 2 ? 0xFF : (uint8_t)rnd32();
    static const float ext[] = {65504.0f, -65504.0f, 6e-8f, -6e-8f, 0.0f, 1.0f, -0.5f, 3e-5f};
    for (int64_t b = 0; b < nblk; b++) {
        uint8_t *blk = w + b * q->bytes;
        float d, m;
        if (mode == 1) {
            d = ext[rnd32() % 8];
            m = ext[rnd32() % 8];
        } else {
            d = rndf(1e-3f, 1e-2f) * (rnd32() & 1 ? 1 : -1);
            m = rndf(1e-3f, 1e-2f) * (mode == 2 ? 1 : -1);
        }
        put16(blk + ti->dofs, pt_f32_to_fp16(d));
        if (ti->mofs >= 0)
            put16(blk + ti->mofs, pt_f32_to_fp16(m));
    }
}

// Random activation vector: mode 0 normal-ish, 1 spiky (one huge value per
// 32 among small ones, some all-zero blocks), 2 a constant of large
// magnitude (every quant +-127).
static void rand_x(float *x, int64_t n, int mode)
{
    for (int64_t i = 0; i < n; i++) {
        if (mode == 2)
            x[i] = (rnd32() & 1) ? 3.0f : -3.0f;
        else if (mode == 1)
            x[i] = (i % 32 == 7) ? rndf(-1e4f, 1e4f) : ((i / 64) % 5 == 3 ? 0.0f : rndn() * 1e-3f);
        else
            x[i] = rndn();
    }
}

// Activation value i as the quantised vector encodes it.
static double act_value(pt_dtype act, const void *xq, int64_t i)
{
    if (act == PT_Q8_K) {
        const block_q8_K *b = (const block_q8_K *)xq + i / QK_K;
        return (double)b->d * b->qs[i % QK_K];
    }
    if (act == PT_Q8_1) {
        const block_q8_1 *b = (const block_q8_1 *)xq + i / 32;
        return (double)pt_fp16_to_f32(b->d) * b->qs[i % 32];
    }
    const block_q8_0 *b = (const block_q8_0 *)xq + i / 32;
    return (double)pt_fp16_to_f32(b->d) * b->qs[i % 32];
}

static bool path_ok(int path)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (path == PT_QPATH_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (path == PT_QPATH_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#endif
    return path == PT_QPATH_SCALAR;
}

// The zmm row kernel of a K type (NULL: none, or not x86).
static pt_vdot_fn zmm_row(pt_dtype t)
{
    switch (t) {
    case PT_Q2_K: return pt_vdot_q2_k_avx512zmm;
    case PT_Q3_K: return pt_vdot_q3_k_avx512zmm;
    case PT_Q4_K: return pt_vdot_q4_k_avx512zmm;
    case PT_Q5_K: return pt_vdot_q5_k_avx512zmm;
    case PT_Q6_K: return pt_vdot_q6_k_avx512zmm;
    default: return NULL;
    }
}
static int zmm_checked; // cases in which the zmm rows ran

// One case: scalar vdot against the float reference, every path against
// the scalar one, bit for bit.
static void check_case(const tinfo *ti, int64_t n, int wmode, int xmode)
{
    const pt_qtraits *q = pt_qtraits_of(ti->t);
    cr_assert(q && q->dequant && q->vdot[PT_QPATH_SCALAR], "%s incomplete", pt_dtype_name(ti->t));
    const int64_t nblk = n / q->blck;
    uint8_t *w = malloc((size_t)(nblk * q->bytes));
    float *x = malloc((size_t)n * 4), *wd = malloc((size_t)n * 4);
    void *xq = malloc(pt_act_row_bytes(q->act, n));
    rand_row(ti, w, nblk, wmode);
    rand_x(x, n, xmode);
    pt_actq_of(q->act)(x, xq, n);
    q->dequant(w, wd, n);

    // reference and the bound: the kernel's terms are d*sc*q*x and
    // dmin*m*x (or m * s_x), each at most |w| + |min part|; a handful of
    // f32 roundings per block and one per accumulation step.
    double ref = 0, mag = 0, srnd = 0;
    for (int64_t i = 0; i < n; i++) {
        const double xv = act_value(q->act, xq, i);
        const uint8_t *blk = w + (i / q->blck) * q->bytes;
        const double mb = ti->mofs >= 0 ? fabs(pt_fp16_to_f32(get16(blk + ti->mofs))) * ti->mmul : 0;
        ref += (double)wd[i] * xv;
        mag += fabs(xv) * (fabs(wd[i]) + 2 * mb);
    }
    if (q->act == PT_Q8_1) // s = fp16(d * sum q): the min term carries a 2^-11 rounding
        for (int64_t b = 0; b < nblk; b++) {
            const block_q8_1 *xb = (const block_q8_1 *)xq + b;
            srnd += fabs(pt_fp16_to_f32(get16(w + b * q->bytes + ti->mofs))) *
                    fabs(pt_fp16_to_f32(xb->s)) * 0x1p-10;
        }
    const double tol = (8.0 + 3.0 * (double)nblk) * 0x1p-23 * mag + srnd + 1e-30;
    const float got = q->vdot[PT_QPATH_SCALAR](w, xq, n);
    if (isfinite(ref) && fabs(ref) < 1e30)
        cr_assert(fabs((double)got - ref) <= tol, "%s n=%lld w%d x%d: scalar %.9g ref %.9g tol %.3g",
                  pt_dtype_name(ti->t), (long long)n, wmode, xmode, got, ref, tol);
    for (int p = 1; p < PT_QPATH_N; p++) {
        if (!path_ok(p) || !q->vdot[p])
            continue;
        const float g = q->vdot[p](w, xq, n);
        cr_assert(fbits(g) == fbits(got) || (isnan(g) && isnan(got)),
                  "%s n=%lld w%d x%d: path %d %.9g != scalar %.9g", pt_dtype_name(ti->t), (long long)n, wmode,
                  xmode, p, g, got);
    }
    // the AVX-512 entry runs the zmm rows on AMD and the ymm rows on Intel
    // (qt_k_x86.c); the one it does not pick here must match as well
    const pt_vdot_fn zmm = zmm_row(ti->t);
    if (zmm && path_ok(PT_QPATH_AVX512)) {
        const float g = zmm(w, xq, n);
        cr_assert(fbits(g) == fbits(got) || (isnan(g) && isnan(got)),
                  "%s n=%lld w%d x%d: zmm rows %.9g != scalar %.9g", pt_dtype_name(ti->t), (long long)n, wmode,
                  xmode, g, got);
        zmm_checked++;
    }
    free(w); free(x); free(wd); free(xq);
}

Test(qt_vdot, scalar_vs_float_and_paths_bit_exact)
{
    static const int64_t lens[] = {256, 512, 768, 1280, 1792, 2048, 3328, 7168};
    for (size_t k = 0; k < NTYPES_T; k++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (int wm = 0; wm < 3; wm++)
                for (int xm = 0; xm < 3; xm++)
                    for (int rep = 0; rep < 3; rep++)
                        check_case(&types[k], lens[l], wm, xm);
    if (path_ok(PT_QPATH_AVX512)) // every K type's zmm rows ran, on any AVX-512 CPU
        cr_assert(zmm_checked >= 5 * 8 * 27, "zmm rows ran in %d cases", zmm_checked);
}

// 32-value types also at lengths that are not multiples of 256 (tails of
// fewer than 8 blocks in the SIMD paths).
Test(qt_vdot, legacy_odd_lengths)
{
    static const int64_t lens[] = {32, 64, 96, 160, 224, 288, 544, 7200};
    for (size_t k = 0; k < 3; k++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (int wm = 0; wm < 3; wm++)
                for (int xm = 0; xm < 3; xm++)
                    check_case(&types[k], lens[l], wm, xm);
}

// Batched products: a type's vdot4 (one row times 4 activation rows) gives
// each output of its vdot bit for bit, on random rows of every scale mode,
// and pt_gemm of any batch equals pt_gemv per vector on every kernel path
// (matmul sends vectors in fours through vdot4 where a type has one).
Test(qt_vdot, vdot4_and_gemm_equal_vdot_and_gemv)
{
    const int64_t n = 2048;
    int checked4 = 0;
    for (size_t k = 0; k < NTYPES_T; k++) {
        const pt_qtraits *q = pt_qtraits_of(types[k].t);
        const int64_t nblk = n / q->blck;
        const size_t ab = pt_act_row_bytes(q->act, n);
        uint8_t *w = malloc((size_t)(nblk * q->bytes));
        float *x = malloc((size_t)n * 4);
        char *xq = malloc(4 * ab);
        for (int wm = 0; wm < 3; wm++) {
            rand_row(&types[k], w, nblk, wm);
            for (int j = 0; j < 4; j++) {
                rand_x(x, n, (wm + j) % 3);
                pt_actq_of(q->act)(x, xq + j * ab, n);
            }
            for (int p = 0; p < PT_QPATH_N; p++) {
                if (!path_ok(p) || !q->vdot4[p])
                    continue;
                float o[4];
                q->vdot4[p](w, xq, ab, n, o);
                for (int j = 0; j < 4; j++) {
                    const float want = pt_vdot_of(q, p)(w, xq + j * ab, n);
                    cr_assert(fbits(o[j]) == fbits(want) || (isnan(o[j]) && isnan(want)),
                              "%s path %d w%d vector %d: vdot4 %.9g vdot %.9g", q->name, p, wm, j, o[j], want);
                    checked4++;
                }
            }
        }
        free(w); free(x); free(xq);
        // pt_gemm vs pt_gemv
        const int64_t rows = 21, batches[] = {1, 3, 4, 9};
        const size_t rb = (size_t)(nblk * q->bytes);
        uint8_t *W = malloc(rb * rows);
        for (int64_t r = 0; r < rows; r++)
            rand_row(&types[k], W + r * rb, nblk, 0);
        pt_mat m = {.data = W, .type = types[k].t, .rows = rows, .cols = n};
        float *X = malloc(sizeof(float) * (size_t)(9 * n)), *Y = malloc(sizeof(float) * (size_t)(9 * rows));
        float *y1 = malloc(sizeof(float) * rows);
        for (int64_t i = 0; i < 9 * n; i++)
            X[i] = rndn();
        const pt_kernel_path paths[] = {PT_PATH_SCALAR, PT_PATH_AVX2, PT_PATH_AVX512};
        for (size_t pi = 0; pi < 3; pi++) {
            if (!pt_kernel_path_supported(paths[pi]))
                continue;
            pt_kernel_set_path(paths[pi]);
            for (size_t bi = 0; bi < 4; bi++) {
                pt_gemm(&m, X, batches[bi], Y);
                for (int64_t v = 0; v < batches[bi]; v++) {
                    pt_gemv(&m, X + v * n, y1);
                    for (int64_t r = 0; r < rows; r++)
                        cr_assert_eq(fbits(Y[v * rows + r]), fbits(y1[r]), "%s path %s batch %lld v %lld r %lld",
                                     q->name, pt_kernel_path_name(), (long long)batches[bi], (long long)v,
                                     (long long)r);
                }
            }
        }
        pt_kernel_set_path(PT_PATH_AUTO);
        free(W); free(X); free(Y); free(y1);
    }
    cr_log_info("%d vdot4 outputs checked", checked4);
    if (path_ok(PT_QPATH_AVX512))
        cr_assert_gt(checked4, 0, "no vdot4 ran on this AVX-512 CPU");
}

Test(qt_vdot, paths_reported)
{
    for (size_t k = 0; k < NTYPES_T; k++) {
        const pt_qtraits *q = pt_qtraits_of(types[k].t);
        cr_log_info("%-5s scalar%s%s", q->name, q->vdot[1] ? " avx2" : "", q->vdot[2] ? " avx512" : "");
        cr_assert(pt_dtype_valid(types[k].t), "%s not supported", q->name);
    }
}

// ---- real rows: llama.cpp's tensors and llama.cpp's dequantisation ------

// Every row of every Q4_1 .. Q6_K tensor sampled in the fixtures (stored
// bytes in qrows/, ggml's dequantisation in samples/): each path's vdot
// against the float dot of ggml's dequantised row with the dequantised
// activation (random activations, two per row).
static void check_fixture_file(const char *dir, const char *label, int64_t counts[64])
{
    char p[1024];
    snprintf(p, sizeof p, "%s/samples/%s.rows.json", dir, label);
    json_object *rows = json_object_from_file(p);
    cr_assert(rows, "cannot parse %s", p);
    snprintf(p, sizeof p, "%s/samples/%s.rows.f32", dir, label);
    size_t flen = 0;
    uint8_t *ref = tu_read(p, &flen);
    snprintf(p, sizeof p, "%s/qrows/%s.qrows.json", dir, label);
    json_object *qidx = json_object_from_file(p);
    snprintf(p, sizeof p, "%s/qrows/%s.qrows.bin", dir, label);
    size_t qlen = 0;
    uint8_t *qbin = tu_read(p, &qlen);
    cr_assert(ref && qidx && qbin, "fixtures of %s", label);
    json_object *tens, *v;
    cr_assert(json_object_object_get_ex(rows, "tensors", &tens));
    for (size_t k = 0; k < json_object_array_length(tens); k++) {
        json_object *te = json_object_array_get_idx(tens, k);
        cr_assert(json_object_object_get_ex(te, "type", &v));
        const int type = pt_dtype_from_name(json_object_get_string(v));
        const tinfo *ti = NULL;
        for (size_t t = 0; t < NTYPES_T; t++)
            if ((int)types[t].t == type)
                ti = &types[t];
        if (!ti)
            continue;
        const pt_qtraits *q = pt_qtraits_of((uint32_t)type);
        cr_assert(json_object_object_get_ex(te, "name", &v));
        const char *name = json_object_get_string(v);
        cr_assert(json_object_object_get_ex(te, "n_per_row", &v));
        const int64_t n = json_object_get_int64(v);
        cr_assert(json_object_object_get_ex(te, "offset_bytes", &v));
        const int64_t off = json_object_get_int64(v);
        json_object *rl, *qe;
        cr_assert(json_object_object_get_ex(te, "rows", &rl));
        cr_assert(json_object_object_get_ex(qidx, name, &qe));
        const int64_t qoff = json_object_get_int64(json_object_array_get_idx(qe, 0));
        const int64_t rb = json_object_get_int64(json_object_array_get_idx(qe, 1));
        float *x = malloc((size_t)n * 4);
        void *xq = malloc(pt_act_row_bytes(q->act, n));
        for (size_t r = 0; r < json_object_array_length(rl); r++) {
            const uint8_t *w = qbin + qoff + (int64_t)r * rb;
            const float *wd = (const float *)(ref + off) + (int64_t)r * n;
            for (int rep = 0; rep < 2; rep++) {
                rand_x(x, n, rep);
                pt_actq_of(q->act)(x, xq, n);
                double dot = 0, mag = 0, srnd = 0;
                for (int64_t i = 0; i < n; i++) {
                    const double xv = act_value(q->act, xq, i);
                    const uint8_t *blk = w + (i / q->blck) * q->bytes;
                    const double mb = ti->mofs >= 0 ? fabs(pt_fp16_to_f32(get16(blk + ti->mofs))) * ti->mmul : 0;
                    dot += (double)wd[i] * xv;
                    mag += fabs(xv) * (fabs(wd[i]) + 2 * mb);
                }
                if (q->act == PT_Q8_1)
                    for (int64_t b = 0; b < n / 32; b++)
                        srnd += fabs(pt_fp16_to_f32(get16(w + b * q->bytes + ti->mofs))) *
                                fabs(pt_fp16_to_f32(((const block_q8_1 *)xq)[b].s)) * 0x1p-10;
                const double tol = (8.0 + 3.0 * (double)(n / q->blck)) * 0x1p-23 * mag + srnd;
                for (int pth = 0; pth < PT_QPATH_N; pth++) {
                    if (!path_ok(pth) || !q->vdot[pth])
                        continue;
                    const float got = q->vdot[pth](w, xq, n);
                    cr_assert(fabs((double)got - dot) <= tol, "%s %s row %zu path %d: %.9g, ggml rows %.9g (tol %.3g)",
                              label, name, r, pth, got, dot, tol);
                }
            }
        }
        counts[type]++;
        free(x);
        free(xq);
    }
    free(ref);
    free(qbin);
    json_object_put(rows);
    json_object_put(qidx);
}

Test(qt_vdot, fixture_rows_vs_ggml_dequantised)
{
    char *dir = tu_fixture("llamacpp");
    char sdir[1024];
    snprintf(sdir, sizeof sdir, "%s/samples", dir);
    DIR *d = opendir(sdir);
    cr_assert(d, "no %s", sdir);
    int64_t counts[64] = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len <= 10 || strcmp(e->d_name + len - 10, ".rows.json") != 0)
            continue;
        char label[512];
        snprintf(label, sizeof label, "%.*s", (int)(len - 10), e->d_name);
        check_fixture_file(dir, label, counts);
    }
    closedir(d);
    for (size_t t = 0; t < NTYPES_T; t++) {
        cr_log_info("%-5s %3lld fixture tensors", pt_dtype_name(types[t].t), (long long)counts[types[t].t]);
        cr_assert_gt(counts[types[t].t], 0, "no %s tensor in the fixtures", pt_dtype_name(types[t].t));
    }
    free(dir);
}

// ---- llama.cpp's own x86 results ----------------------------------------

// tests/fixtures/llamacpp_vdot (gen_vdot.c there): rows of every type with
// activations, llama.cpp's x86 quantisation of the activations and its
// ggml_vec_dot result. Petrel's activation quantiser gives the same bytes
// and every path's vdot the same float, bit for bit.
Test(qt_vdot, llamacpp_x86_bit_identical)
{
    char *js = tu_fixture("llamacpp_vdot/cases.json"), *bn = tu_fixture("llamacpp_vdot/cases.bin");
    json_object *root = json_object_from_file(js), *cases;
    size_t blen = 0;
    uint8_t *bin = tu_read(bn, &blen);
    cr_assert(root && bin, "fixture %s", js);
    cr_assert(json_object_object_get_ex(root, "cases", &cases));
    int checked = 0;
    for (size_t k = 0; k < json_object_array_length(cases); k++) {
        json_object *c = json_object_array_get_idx(cases, k), *v;
        cr_assert(json_object_object_get_ex(c, "type", &v));
        const int type = pt_dtype_from_name(json_object_get_string(v));
        const pt_qtraits *q = pt_qtraits_of((uint32_t)type);
        cr_assert(q);
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
        cr_assert_eq((size_t)len[0], pt_row_bytes((pt_dtype)type, (uint64_t)n));
        cr_assert_eq((size_t)len[2], pt_act_row_bytes(q->act, n));
        float *x = malloc((size_t)len[1]);
        memcpy(x, bin + off[1], (size_t)len[1]);
        uint8_t *xq = malloc((size_t)len[2]);
        pt_actq_of(q->act)(x, xq, n);
        cr_assert(memcmp(xq, bin + off[2], (size_t)len[2]) == 0, "case %zu (%s n=%lld): activation bytes differ from llama.cpp's",
                  k, q->name, (long long)n);
        for (int p = 0; p < PT_QPATH_N; p++) {
            if (!path_ok(p) || !q->vdot[p])
                continue;
            const float got = q->vdot[p](bin + off[0], xq, n);
            float wf;
            memcpy(&wf, &want, 4);
            cr_assert_eq(fbits(got), want, "case %zu (%s n=%lld) path %d: %.9g, llama.cpp %.9g", k, q->name,
                         (long long)n, p, got, wf);
        }
        free(x);
        free(xq);
        checked++;
    }
    cr_log_info("%d llama.cpp cases bit-identical", checked);
    cr_assert_geq(checked, 96);
    json_object_put(root);
    free(bin);
    free(js);
    free(bn);
}

// ---- activation quantisers ---------------------------------------------

// ggml's x86 quantize_row_q8_0 / q8_1 written out plainly: rintf (ties to
// even in the default mode) and cvtps_epi32's INT32_MIN for NaN / out of
// range, the packs saturation, the sum of the int32 values.
static void ref_q8_01(const float *x, int8_t *qs, float *d, float *sumd)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    *d = amax / 127.0f;
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    int64_t sum = 0;
    for (int j = 0; j < 32; j++) {
        const float r = rintf(x[j] * id);
        const int32_t v = (r == r && fabsf(r) < 2147483648.0f) ? (int32_t)r : INT32_MIN;
        qs[j] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
        sum += v;
    }
    *sumd = *d * (float)(int32_t)(uint32_t)(uint64_t)sum;
}

static void crafted_block32(float *x, int kind)
{
    switch (kind) {
    case 0: // amax 127: id = 1, the values themselves are rounded; ties
        for (int j = 0; j < 32; j++)
            x[j] = (float)(j - 16) + 0.5f;
        x[31] = 127.0f;
        break;
    case 1: // all zero
        for (int j = 0; j < 32; j++)
            x[j] = 0.0f;
        break;
    case 2: // negative max, ties at -x.5
        for (int j = 0; j < 32; j++)
            x[j] = -(float)j - 0.5f;
        x[3] = -127.0f;
        break;
    case 3: // signed zeros and tiny values
        for (int j = 0; j < 32; j++)
            x[j] = (j & 1) ? -0.0f : 1e-30f * (float)j;
        break;
    case 5: // degenerate: 127 / amax is infinite
        for (int j = 0; j < 32; j++)
            x[j] = j == 9 ? -1e-38f : (j % 3 == 0 ? 1e-39f : 0.0f);
        break;
    default: // random
        for (int j = 0; j < 32; j++)
            x[j] = rndn() * 10.0f;
    }
}

// The implementations behind pt_actq_of: scalar and (where the CPU has it)
// AVX2; each is checked against the references on its own.
typedef struct {
    const char *name;
    pt_actq_fn q80, q81, q8k;
} actq_impl;

static int actq_impls(actq_impl out[2])
{
    int k = 0;
    out[k++] = (actq_impl){"scalar", pt_actq_q8_0_scalar, pt_actq_q8_1_scalar, pt_actq_q8_k_scalar};
#if defined(__x86_64__)
    if (path_ok(PT_QPATH_AVX2))
        out[k++] = (actq_impl){"avx2", pt_actq_q8_0_avx2, pt_actq_q8_1_avx2, pt_actq_q8_k_avx2};
#endif
    return k;
}

Test(actq, q8_0_and_q8_1_match_ggml_x86)
{
    cr_assert_eq(fegetround(), FE_TONEAREST);
    enum { NB = 64 };
    float x[32 * NB];
    for (int b = 0; b < NB; b++)
        crafted_block32(x + 32 * b, b < 4 ? b : b == 4 ? 5 : 4);
    actq_impl im[2];
    const int ni = actq_impls(im);
    for (int v = 0; v < ni; v++) {
        block_q8_0 y0[NB];
        block_q8_1 y1[NB];
        im[v].q80(x, y0, 32 * NB);
        im[v].q81(x, y1, 32 * NB);
        for (int b = 0; b < NB; b++) {
            int8_t qs[32];
            float d, sd;
            ref_q8_01(x + 32 * b, qs, &d, &sd);
            cr_assert_eq(y0[b].d, pt_f32_to_fp16(d), "%s block %d", im[v].name, b);
            cr_assert_eq(y1[b].d, pt_f32_to_fp16(d), "%s block %d", im[v].name, b);
            cr_assert_eq(y1[b].s, pt_f32_to_fp16(sd), "%s block %d", im[v].name, b);
            cr_assert(memcmp(y0[b].qs, qs, 32) == 0, "%s q8_0 block %d", im[v].name, b);
            cr_assert(memcmp(y1[b].qs, qs, 32) == 0, "%s q8_1 block %d", im[v].name, b);
        }
        // the tie block by hand: x = j - 15.5 with id = 1 -> even neighbours
        cr_assert_eq(y0[0].qs[0], -16); // -15.5 -> -16
        cr_assert_eq(y0[0].qs[1], -14); // -14.5 -> -14
        cr_assert_eq(y0[0].qs[16], 0);  // 0.5 -> 0
        cr_assert_eq(y0[0].qs[17], 2);  // 1.5 -> 2
        cr_assert_eq(y0[1].d, 0);
    }
}

// ggml's quantize_row_q8_K_ref written out plainly, with its nearest_int
// (the 1.5 * 2^23 trick); bsums of a zero block taken as 0 (ggml leaves
// them untouched there, Petrel clears them).
static int ggml_nearest_int(float f)
{
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static void ref_q8_k(const float *x, block_q8_K *y)
{
    float max = 0, amax = 0;
    for (int j = 0; j < QK_K; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    memset(y, 0, sizeof *y);
    if (amax == 0)
        return;
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; j++) {
        const int v = ggml_nearest_int(iscale * x[j]);
        y->qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += y->qs[16 * g + j];
        y->bsums[g] = (int16_t)s;
    }
    y->d = 1 / iscale;
}

Test(actq, q8_k_matches_ggml_ref)
{
    enum { NB = 24 };
    float x[QK_K * NB];
    for (int i = 0; i < QK_K * NB; i++)
        x[i] = rndn() * (float)(1 + i / QK_K);
    // block 0: max -127 (iscale = +1): values are rounded as they are; ties
    for (int j = 0; j < QK_K; j++)
        x[j] = (float)(j % 64) - 31.5f;
    x[5] = -127.0f;
    // block 1: all zero
    for (int j = 0; j < QK_K; j++)
        x[QK_K + j] = 0.0f;
    // block 2: +5 and -5 tie for the largest magnitude: the first (-5) wins
    for (int j = 0; j < QK_K; j++)
        x[2 * QK_K + j] = rndf(-4, 4);
    x[2 * QK_K + 10] = -5.0f;
    x[2 * QK_K + 20] = 5.0f;
    // block 3: positive max
    x[3 * QK_K + 100] = 40.0f;
    // block 4: one non-zero (negative) value among zeros
    for (int j = 0; j < QK_K; j++)
        x[4 * QK_K + j] = j == 200 ? -1e-20f : 0.0f;
    // block 5: degenerate, -127 / max is infinite
    for (int j = 0; j < QK_K; j++)
        x[5 * QK_K + j] = j == 77 ? 1e-38f : (j % 5 == 0 ? -1e-39f : 0.0f);
    actq_impl im[2];
    const int ni = actq_impls(im);
    for (int v = 0; v < ni; v++) {
        block_q8_K y[NB], r;
        memset(y, 0x5A, sizeof y);
        im[v].q8k(x, y, QK_K * NB);
        for (int b = 0; b < NB; b++) {
            ref_q8_k(x + QK_K * b, &r);
            cr_assert_eq(fbits(y[b].d), fbits(r.d), "%s block %d d %g vs %g", im[v].name, b, y[b].d, r.d);
            cr_assert(memcmp(y[b].qs, r.qs, QK_K) == 0, "%s block %d qs", im[v].name, b);
            cr_assert(memcmp(y[b].bsums, r.bsums, sizeof r.bsums) == 0, "%s block %d bsums", im[v].name, b);
        }
        cr_assert_eq(y[0].d, 1.0f);      // iscale = -127 / -127 = 1, d = 1 / iscale
        cr_assert_eq(y[0].qs[0], -32);   // -31.5 * 1 -> -32 (even)
        cr_assert_eq(y[0].qs[1], -30);   // -30.5 -> -30
        cr_assert_eq(y[0].qs[5], -127);
        cr_assert_eq(y[1].d, 0.0f);
        cr_assert_eq(y[2].qs[10], -127); // the first of the tied maxima
        cr_assert_eq(y[2].qs[20], 127);
        cr_assert_eq(y[3].qs[100], -127);
        cr_assert_eq(y[4].qs[200], -127);
    }
}

// The public quantisers give the same bytes as the scalar ones on long
// random rows (whichever implementation pt_actq_of picks).
Test(actq, public_equals_scalar_on_random_rows)
{
    const int64_t n = 7168;
    float *x = malloc((size_t)n * 4);
    for (int rep = 0; rep < 20; rep++) {
        for (int64_t i = 0; i < n; i++)
            x[i] = rep % 4 == 3 ? (float)(int)(rndf(-20, 20)) * 0.5f : rndn() * (float)(rep + 1);
        const pt_dtype acts[3] = {PT_Q8_0, PT_Q8_1, PT_Q8_K};
        const pt_actq_fn sc[3] = {pt_actq_q8_0_scalar, pt_actq_q8_1_scalar, pt_actq_q8_k_scalar};
        for (int a = 0; a < 3; a++) {
            const size_t nbytes = pt_act_row_bytes(acts[a], n);
            uint8_t *p = malloc(nbytes), *q = malloc(nbytes);
            pt_actq_of(acts[a])(x, p, n);
            sc[a](x, q, n);
            cr_assert(memcmp(p, q, nbytes) == 0, "act %d rep %d", a, rep);
            free(p);
            free(q);
        }
    }
    free(x);
}

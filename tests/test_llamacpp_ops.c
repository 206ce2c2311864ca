// tests/test_llamacpp_ops.c — Petrel's float ops (kernels/ops.h) against
// llama.cpp's own intermediate tensors (tests/fixtures/llamacpp/intermediates,
// README there): each op is fed the tensors llama.cpp fed it and must give
// llama.cpp's output bit for bit. These are the ops whose last-ulp
// differences used to flip 8-bit activation roundings between the two
// engines on quantised files (issue 11); test_llamacpp_files checks the whole
// network (Q4_K file: logits bit for bit).
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_float.h"
#include "tests/testutil/tu_kernel.h"

enum { T = 33, H = 4, EMB = 256, QD = 176, KVL = 160, CELLS = 256, FF = 512 };

static float *load(const char *name, size_t want)
{
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/intermediates/%s.f32", name);
    char *path = tu_fixture(rel);
    size_t len = 0;
    float *p = tu_read(path, &len);
    cr_assert(p, "cannot read %s", path);
    cr_assert_eq(len, want * sizeof(float), "%s: %zu bytes", path, len);
    free(path);
    return p;
}

// llama.cpp's attention tensors of block 0, every head and query position.
typedef struct attn_io {
    float *q;   // Qcur-0 (T, H, QD)
    float *k;   // Kcur-0 (T, QD)
    float *v;   // Vcur-0 (T, KVL)
    float *kq;  // kq-0 (H, T, CELLS): unscaled scores
    float *sm;  // kq_soft_max-0 (H, T, CELLS): probabilities, masked cells 0
    float *kqv; // kqv-0 (H, T, KVL): weighted sums
} attn_io;
#define ATTN_SCALE 0x1.7f3e3p-3f // ggml_soft_max_ext's scale in llama.cpp's graph

static attn_io attn_load(void)
{
    return (attn_io){.q = load("Qcur-0", (size_t)QD * H * T), .k = load("Kcur-0", (size_t)QD * T),
                     .v = load("Vcur-0", (size_t)KVL * T), .kq = load("kq-0", (size_t)CELLS * T * H),
                     .sm = load("kq_soft_max-0", (size_t)CELLS * T * H), .kqv = load("kqv-0", (size_t)KVL * T * H)};
}

static void attn_free(attn_io *a)
{
    free(a->q);
    free(a->k);
    free(a->v);
    free(a->kq);
    free(a->sm);
    free(a->kqv);
}

Test(llamacpp_ops, rms_norm)
{
    float *x = load("embd", (size_t)EMB * T), *want = load("norm-0", (size_t)EMB * T);
    float ones[EMB], y[EMB * T];
    for (int i = 0; i < EMB; i++)
        ones[i] = 1.0f;
    for (size_t it = 0; tu_next_kernel_path(&it);) {
        for (int b = 0; b < T; b++)
            pt_rmsnorm(y + b * EMB, x + b * EMB, ones, EMB, 1e-6f);
        cr_expect_eq(tu_count_bit_diffs(y, want, (size_t)EMB * T), 0, "rms norm (%s path) differs from ggml's",
                     pt_kernel_path_name());
    }
    free(x);
    free(want);
}

// kq, kq_soft_max and kqv of block 0, every head and query position.
Test(llamacpp_ops, attention_scores_softmax_and_weighted_sum)
{
    attn_io a = attn_load();
    const float *q = a.q, *k = a.k, *v = a.v, *kq = a.kq, *sm = a.sm, *kqv = a.kqv, scale = ATTN_SCALE;
    for (size_t it = 0; tu_next_kernel_path(&it);) {
        int dkq = 0, dsm = 0, dsp = 0, dkqv = 0;
        for (int h = 0; h < H; h++)
            for (int b = 0; b < T; b++) {
                const int n = b + 1; // causal: cells 0..b
                float sc[T], sc2[T], out[KVL];
                int32_t pos[T];
                for (int t = 0; t < n; t++) {
                    const float s = pt_dot_f32_ggml(q + ((size_t)b * H + h) * QD, k + (size_t)t * QD, QD);
                    dkq += memcmp(&s, &kq[((size_t)h * T + b) * CELLS + t], sizeof s) != 0;
                    sc[t] = kq[((size_t)h * T + b) * CELLS + t] * scale;
                    pos[t] = t;
                }
                memcpy(sc2, sc, sizeof(float) * (size_t)n);
                pt_softmax(sc, n);
                pt_softmax_at(sc2, pos, n); // the sparse (DSA) entry with every key kept
                const float *ws = sm + ((size_t)h * T + b) * CELLS;
                dsm += tu_count_bit_diffs(sc, ws, (size_t)n);
                dsp += tu_count_bit_diffs(sc2, ws, (size_t)n);
                for (int t = n; t < CELLS; t++)
                    cr_assert_eq(ws[t], 0.0f); // masked cells: exactly 0, so leaving them out is exact
                pt_wsum_rows(out, ws, NULL, v, n, KVL, KVL);
                dkqv += tu_count_bit_diffs(out, kqv + ((size_t)h * T + b) * KVL, KVL);
            }
        const char *pn = pt_kernel_path_name();
        cr_expect_eq(dkq, 0, "%s path: %d attention scores differ from ggml's kq", pn, dkq);
        cr_expect_eq(dsm, 0, "%s path: %d probabilities differ from ggml's kq_soft_max", pn, dsm);
        cr_expect_eq(dsp, 0, "%s path: %d probabilities (positions given) differ from ggml's kq_soft_max", pn, dsp);
        cr_expect_eq(dkqv, 0, "%s path: %d weighted-sum values differ from ggml's kqv", pn, dkqv);
    }
    attn_free(&a);
}

// The batched forms (every head of a token at once; with and without the
// transposed key tail and the packed values) against the same kq and kqv, bit for bit.
Test(llamacpp_ops, batched_attention_scores_and_weighted_sum)
{
    attn_io a = attn_load();
    const float *q = a.q, *k = a.k, *v = a.v, *kq = a.kq, *sm = a.sm, *kqv = a.kqv, scale = ATTN_SCALE;
    const int tail = QD - QD / 64 * 64;
    float *kT = malloc(sizeof(float) * (size_t)tail * T);
    pt_attn_key_tail(kT, T, k, T, QD, QD);
    float *vp = malloc(sizeof(float) * (size_t)KVL * (T + 15) / 16 * 16);
    const int64_t ks = pt_attn_pack_v(vp, v, T, KVL, KVL);
    for (size_t it = 0; tu_next_kernel_path(&it);) {
        int dkq = 0, dkqv = 0;
        for (int withT = 0; withT < 2; withT++)
            for (int b = 0; b < T; b++) {
                const int n = b + 1;
                float S[H * T], O[H * KVL];
                // heads 1..H-1 only on one pass: an odd number of queries (edge tiles)
                const int h0 = withT ? 0 : 1;
                pt_attn_scores(S, T, q + ((size_t)b * H + h0) * QD, H - h0, QD, k, n, QD, QD, withT ? kT : NULL, T,
                               scale);
                for (int h = h0; h < H; h++)
                    for (int t = 0; t < n; t++) {
                        const float want = kq[((size_t)h * T + b) * CELLS + t] * scale;
                        dkq += memcmp(&S[(h - h0) * T + t], &want, sizeof want) != 0;
                    }
                pt_attn_wsum(O, KVL, sm + ((size_t)h0 * T + b) * CELLS, (int64_t)T * CELLS, H - h0, v, KVL,
                             withT ? vp : NULL, ks, n, KVL);
                for (int h = h0; h < H; h++)
                    dkqv += tu_count_bit_diffs(O + (h - h0) * KVL, kqv + ((size_t)h * T + b) * KVL, KVL);
            }
        const char *pn = pt_kernel_path_name();
        cr_expect_eq(dkq, 0, "%s path: %d batched attention scores differ from ggml's kq", pn, dkq);
        cr_expect_eq(dkqv, 0, "%s path: %d batched weighted-sum values differ from ggml's kqv", pn, dkqv);
    }
    free(vp);
    free(kT);
    attn_free(&a);
}

Test(llamacpp_ops, swiglu)
{
    float *g = load("ffn_gate-0", (size_t)FF * T), *u = load("ffn_up-0", (size_t)FF * T);
    float *want = load("ffn_swiglu-0", (size_t)FF * T);
    float *y = malloc(sizeof(float) * FF * T);
    for (size_t it = 0; tu_next_kernel_path(&it);) {
        pt_swiglu(y, g, u, (int64_t)FF * T);
        cr_expect_eq(tu_count_bit_diffs(y, want, (size_t)FF * T), 0, "SwiGLU (%s path) differs from ggml's",
                     pt_kernel_path_name());
        memcpy(y, g, sizeof(float) * FF * T);
        pt_swiglu(y, y, u, (int64_t)FF * T); // in place
        cr_expect_eq(tu_count_bit_diffs(y, want, (size_t)FF * T), 0, "SwiGLU in place (%s path) differs from ggml's",
                     pt_kernel_path_name());
    }
    free(y);
    free(g);
    free(u);
    free(want);
}

// ggml_v_expf against double exp: within 3e-7 relative on [-80, 80]; 0 at
// -inf, +inf past its range, NaN through.
Test(llamacpp_ops, expf_ggml_range)
{
    for (float x = -80.0f; x <= 80.0f; x += 0.0137f) {
        const double e = exp((double)x), r = pt_expf_ggml(x);
        cr_assert(fabs(r - e) <= 3e-7 * e, "exp(%a): %a vs %a", x, r, e);
    }
    cr_assert_eq(pt_expf_ggml(-INFINITY), 0.0f);
    cr_assert_eq(pt_expf_ggml(200.0f), INFINITY);
    cr_assert(isnan(pt_expf_ggml(NAN)));
}

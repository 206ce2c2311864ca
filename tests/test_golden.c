// tests/test_golden.c — the forward pass against the DeepSeek-V3 reference
// implementation's golden outputs for tiny-dsv3 (tests/fixtures/tiny-dsv3/
// golden, see its README): logits per position (one at a time and as one
// batch), prefill-last logits, routed expert ids per MoE layer, MTP logits.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_decode.h"
#include "tests/testutil/tu_float.h"

#define VOCAB 512
#define N_MOE 3
#define TOPK 4
static const int case_len[4] = {1, 7, 33, 64};

typedef struct route_rec {
    int32_t ids[8][128][TOPK]; // (block, pos, k)
    int seen[8][128];
} route_rec;

static void on_route(void *user, int layer, int32_t pos, const int32_t *ids, const float *w, int n)
{
    (void)w;
    route_rec *r = user;
    cr_assert(n == TOPK && layer < 8 && pos < 128);
    memcpy(r->ids[layer][pos], ids, sizeof(int32_t) * TOPK);
    r->seen[layer][pos] = 1;
}

static petrel_token *case_tokens(int k)
{
    char name[64];
    snprintf(name, sizeof name, "case%d_tokens.i32.bin", k);
    size_t n;
    int32_t *t = tu_golden_i32(name, &n);
    cr_assert_eq((int)n, case_len[k]);
    return t;
}

// The route records of a run: main-model decodes into main, MTP decodes
// into mtp (NULL: not recorded).
typedef struct route_hook {
    petrel_context *c;
    route_rec *main, *mtp;
} route_hook;

// tu_decode_hook: points the route observer at the record of the decode
// that follows.
static void set_routes(void *user, bool mtp)
{
    route_hook *h = user;
    route_rec *r = mtp ? h->mtp : h->main;
    if (r)
        petrel_set_route_observer(h->c, on_route, r);
}

// Runs case k through the f32 model; incremental (one token per decode) or
// one batch. Fills logits (n, vocab), mtp (n-1, vocab) and routes.
static void run_case(const char *model, int k, int incremental, int slots, int threads, float *logits,
                     float *mtp, route_rec *rr, route_rec *rr_mtp)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.experts_per_layer = slots;
    mp.n_threads = threads;
    petrel_model *m = petrel_model_open(model, &mp, err, sizeof err);
    cr_assert(m, "open: %s", err);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "context: %s", err);
    const int n = case_len[k];
    petrel_token *tok = case_tokens(k);
    route_hook h = {c, rr, rr_mtp};
    tu_decode_case(c, tok, n, VOCAB, incremental, logits, mtp, set_routes, &h);
    free(tok);
    petrel_context_free(c);
    petrel_model_close(m);
}

static void check_case(int k, int incremental)
{
    char *model = tu_tiny_model("f32");
    const int n = case_len[k];
    float *logits = calloc((size_t)n * VOCAB, sizeof(float));
    float *mtp = calloc((size_t)n * VOCAB, sizeof(float));
    route_rec *rr = calloc(1, sizeof *rr), *rm = calloc(1, sizeof *rm);
    run_case(model, k, incremental, 0, 0, logits, mtp, rr, rm);

    char name[96];
    size_t cnt;
    snprintf(name, sizeof name, "case%d_logits.f32.bin", k);
    float *g = tu_golden_f32(name, &cnt);
    cr_assert_eq(cnt, (size_t)n * VOCAB);
    float d = tu_max_abs_diff(logits, g, cnt);
    cr_expect(d <= 1e-3f, "case %d (%s): logits max abs diff %g > 1e-3", k, incremental ? "incremental" : "batch", d);
    free(g);

    snprintf(name, sizeof name, "case%d_prefill_last_logits.f32.bin", k);
    g = tu_golden_f32(name, &cnt);
    d = tu_max_abs_diff(logits + (size_t)(n - 1) * VOCAB, g, VOCAB);
    cr_expect(d <= 1e-3f, "case %d: prefill-last logits max abs diff %g", k, d);
    free(g);

    snprintf(name, sizeof name, "case%d_router_ids.i32.bin", k);
    int32_t *gi = tu_golden_i32(name, &cnt);
    cr_assert_eq(cnt, (size_t)N_MOE * n * TOPK);
    for (int l = 0; l < N_MOE; l++)
        for (int t = 0; t < n; t++) {
            cr_assert(rr->seen[l + 1][t], "no routing seen for layer %d pos %d", l + 1, t);
            for (int j = 0; j < TOPK; j++)
                cr_expect_eq(rr->ids[l + 1][t][j], gi[((size_t)l * n + t) * TOPK + j],
                             "case %d layer %d pos %d: expert ids differ", k, l + 1, t);
        }
    free(gi);

    if (n > 1) {
        snprintf(name, sizeof name, "case%d_mtp_logits.f32.bin", k);
        g = tu_golden_f32(name, &cnt);
        cr_assert_eq(cnt, (size_t)(n - 1) * VOCAB);
        d = tu_max_abs_diff(mtp, g, cnt);
        cr_expect(d <= 1e-3f, "case %d (%s): MTP logits max abs diff %g > 1e-3", k,
                  incremental ? "incremental" : "batch", d);
        free(g);
        snprintf(name, sizeof name, "case%d_mtp_router_ids.i32.bin", k);
        gi = tu_golden_i32(name, &cnt);
        for (int t = 0; t < n - 1; t++)
            for (int j = 0; j < TOPK; j++)
                cr_expect_eq(rm->ids[4][t][j], gi[(size_t)t * TOPK + j], "case %d MTP pos %d: expert ids differ",
                             k, t);
        free(gi);
    }
    free(logits);
    free(mtp);
    free(rr);
    free(rm);
    free(model);
}

Test(golden, case0_incremental) { check_case(0, 1); }
Test(golden, case1_incremental) { check_case(1, 1); }
Test(golden, case2_incremental) { check_case(2, 1); }
Test(golden, case3_incremental) { check_case(3, 1); }
Test(golden, case0_batch) { check_case(0, 0); }
Test(golden, case1_batch) { check_case(1, 0); }
Test(golden, case2_batch) { check_case(2, 0); }
Test(golden, case3_batch) { check_case(3, 0); }

// Placement invariance: one expert slot per layer vs all of them, 1 vs 2
// threads, batch vs incremental, experts of a batch side by side or one at
// a time: bit-identical logits.
Test(golden, placement_invariance)
{
    char *model = tu_tiny_model("q8_0");
    const int k = 3, n = case_len[k];
    float *ref = calloc((size_t)n * VOCAB, sizeof(float)), *alt = calloc((size_t)n * VOCAB, sizeof(float));
    float *mref = calloc((size_t)n * VOCAB, sizeof(float)), *malt = calloc((size_t)n * VOCAB, sizeof(float));
    run_case(model, k, 0, 0, 2, ref, mref, NULL, NULL);
    // {slots, threads, incremental, side rows}: with 2 threads a batch
    // computes the ready experts with at most `side rows` rows side by side
    // (PETREL_PP_SIDE_ROWS; 0: the default, 64) and the others one at a
    // time with split products, so 1 and 3 mix both ways within a layer.
    const int cfg[][4] = {{1, 1, 0, 0}, {1, 2, 0, 0}, {16, 1, 0, 0}, {1, 2, 1, 0}, {16, 2, 1, 0},
                          {0, 2, 0, 1}, {0, 2, 0, 3}, {2, 2, 0, 3}};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        char rows[16];
        snprintf(rows, sizeof rows, "%d", cfg[i][3]);
        if (cfg[i][3])
            setenv("PETREL_PP_SIDE_ROWS", rows, 1);
        run_case(model, k, cfg[i][2], cfg[i][0], cfg[i][1], alt, malt, NULL, NULL);
        unsetenv("PETREL_PP_SIDE_ROWS");
        cr_expect(memcmp(ref, alt, sizeof(float) * (size_t)n * VOCAB) == 0,
                  "logits differ with %d slots, %d threads, %s, side rows %d", cfg[i][0], cfg[i][1],
                  cfg[i][2] ? "incremental" : "batch", cfg[i][3]);
        cr_expect(memcmp(mref, malt, sizeof(float) * (size_t)(n - 1) * VOCAB) == 0,
                  "MTP logits differ with %d slots, %d threads", cfg[i][0], cfg[i][1]);
    }
    free(ref);
    free(alt);
    free(mref);
    free(malt);
    free(model);
}

// q8_0: argmax agreement with the golden. The goal is >= 99%; on this
// random fixture it is not reachable by any 8-bit weight format because the
// router decisions have margins down to 2e-4 (fixture README): quantising only
// the token embedding (a table lookup, 0.4% error) already flips routing and
// changes the argmax at ~5% of positions (docs/quality.md has the per-tensor
// table). The bound here guards the measured figure (82.9%, 87/105, since
// the Q8_0 products sum as ggml's x86 kernels: llama.cpp's own figure on
// this very file, fixtures/llamacpp/README "Calibration") against
// regressions; bench/quality.sh prints it with KL divergence.
Test(golden, q8_0_argmax)
{
    char *model = tu_tiny_model("q8_0");
    int agree = 0, total = 0;
    for (int k = 0; k < 4; k++) {
        const int n = case_len[k];
        float *lg = calloc((size_t)n * VOCAB, sizeof(float));
        run_case(model, k, 0, 0, 0, lg, NULL, NULL, NULL);
        char name[64];
        snprintf(name, sizeof name, "case%d_logits.f32.bin", k);
        float *g = tu_golden_f32(name, NULL);
        for (int t = 0; t < n; t++) {
            int a = 0, b = 0;
            for (int v = 1; v < VOCAB; v++) {
                if (lg[(size_t)t * VOCAB + v] > lg[(size_t)t * VOCAB + a])
                    a = v;
                if (g[(size_t)t * VOCAB + v] > g[(size_t)t * VOCAB + b])
                    b = v;
            }
            agree += a == b;
            total++;
        }
        free(g);
        free(lg);
    }
    cr_expect(agree * 100 >= total * 82, "q8_0 argmax agreement %d/%d < 82%%", agree, total);
    free(model);
}

// Bad input: token out of range and position past the context are errors.
Test(golden, bad_tokens_and_positions)
{
    char *model = tu_tiny_model("f32");
    char err[1024];
    petrel_model *m = petrel_model_open(model, NULL, err, sizeof err);
    cr_assert(m, "%s", err);
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 8;
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    cr_assert(c, "%s", err);
    petrel_token bad[2] = {5, VOCAB};
    cr_expect_eq(petrel_decode(c, bad, NULL, 2, PETREL_LOGITS_LAST), -1);
    cr_expect(strstr(petrel_context_error(c), "out of range") != NULL, "%s", petrel_context_error(c));
    petrel_token neg = -1;
    cr_expect_eq(petrel_decode(c, &neg, NULL, 1, PETREL_LOGITS_LAST), -1);
    petrel_token ok = 3;
    int32_t pos = 8;
    cr_expect_eq(petrel_decode(c, &ok, &pos, 1, PETREL_LOGITS_LAST), -1);
    cr_expect(strstr(petrel_context_error(c), "context length") != NULL, "%s", petrel_context_error(c));
    pos = 2; // gap: nothing decoded yet
    cr_expect_eq(petrel_decode(c, &ok, &pos, 1, PETREL_LOGITS_LAST), -1);
    cr_expect_eq(petrel_decode(c, &ok, NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
    petrel_context_free(c);
    petrel_model_close(m);
    free(model);
}

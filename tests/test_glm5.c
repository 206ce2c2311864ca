// tests/test_glm5.c — GLM-5 (glm_moe_dsa) with DeepSeek Sparse Attention
// against the reference's golden outputs for tiny-glm5
// (tests/fixtures/tiny-glm5, see its README): logits per position, one token
// at a time and as one batch, prefill-last logits, routed experts, the
// indexer's selected key positions per layer and token, the MTP block with
// its own indexer, dense-attention logits with the indexer off; placement
// invariance; shared indexers (indexer_types) against a float reference.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/context.h"
#include "engine/dsa.h"
#include "petrel.h"
#include "tests/testutil.h"

#define VOCAB 512
#define N_LAYER 4
#define N_MOE 3
#define TOPK 4
#define IDX_K 8
#define MAXPOS 64
static const int case_len[4] = {1, 7, 33, 64};

// ---- fixture access -------------------------------------------------------------

static void *golden(const char *name, size_t *bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/tiny-glm5/golden/%s", PETREL_SOURCE_DIR, name);
    void *p = tu_read(path, bytes);
    cr_assert(p, "missing golden file %s", path);
    return p;
}

static float *gold_f32(const char *fmt, int k, size_t *count)
{
    char name[128];
    snprintf(name, sizeof name, fmt, k);
    size_t b;
    float *p = golden(name, &b);
    *count = b / sizeof(float);
    return p;
}

static int32_t *gold_i32(const char *fmt, int k, size_t *count)
{
    return (int32_t *)gold_f32(fmt, k, count);
}

// tiny-glm5 converted with `--type TYPE`, once per build (lock-serialised).
static char *glm5_model(const char *type)
{
    char *path = malloc(1024), lock[1100];
    snprintf(path, 1024, "%s/test-models/tiny-glm5-%s.gguf", PETREL_BUILD_DIR, type);
    snprintf(lock, sizeof lock, "%s/test-models/.glm5.lock", PETREL_BUILD_DIR);
    tu_sh(NULL, "mkdir -p '%s/test-models'", PETREL_BUILD_DIR);
    int fd = open(lock, O_CREAT | O_RDWR, 0644);
    cr_assert(fd >= 0);
    flock(fd, LOCK_EX);
    struct stat st;
    if (stat(path, &st) != 0) {
        char *out = NULL;
        int rc = tu_sh(&out, "'%s' convert '%s/tests/fixtures/tiny-glm5' -o '%s.tmp' --type %s 2>&1 && mv '%s.tmp' '%s'",
                       PETREL_BIN, PETREL_SOURCE_DIR, path, type, path, path);
        cr_assert_eq(rc, 0, "convert failed: %s", out);
        free(out);
    }
    flock(fd, LOCK_UN);
    close(fd);
    return path;
}

// ---- a run ----------------------------------------------------------------------

typedef struct rec {
    int32_t route[8][MAXPOS][TOPK];  // (block, pos, k)
    int32_t sel[8][MAXPOS][IDX_K];   // (block, pos, k) -1 padded
    int nsel[8][MAXPOS];             // 0 = not seen
} rec;

typedef struct run_out {
    float *logits, *mtp;  // (n, vocab), (n-1, vocab)
    rec main, mtpr;
} run_out;

static rec *cur_rec;

static void on_route(void *user, int layer, int32_t pos, const int32_t *ids, const float *w, int n)
{
    (void)user;
    (void)w;
    cr_assert(n == TOPK && layer < 8 && pos < MAXPOS);
    memcpy(cur_rec->route[layer][pos], ids, sizeof(int32_t) * TOPK);
}

static void on_sel(void *user, int layer, int32_t pos, const int32_t *keys, int n)
{
    (void)user;
    cr_assert(layer < 8 && pos < MAXPOS && n >= 1 && n <= IDX_K, "selection of %d keys at layer %d pos %d", n,
              layer, pos);
    for (int j = 0; j < IDX_K; j++)
        cur_rec->sel[layer][pos][j] = j < n ? keys[j] : -1;
    cur_rec->nsel[layer][pos] = n;
}

static petrel_token *case_tokens(int k)
{
    size_t n;
    int32_t *t = gold_i32("case%d_tokens.i32.bin", k, &n);
    cr_assert_eq((int)n, case_len[k]);
    return t;
}

// Runs case k; incremental (one token per decode, MTP after each) or one
// batch. dsa: indexer on. slots / threads: placement.
static run_out *run_case(const char *model, int k, int incremental, int slots, int threads, bool dsa)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.experts_per_layer = slots;
    mp.n_threads = threads;
    petrel_model *m = petrel_model_open(model, &mp, err, sizeof err);
    cr_assert(m, "open: %s", err);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "context: %s", err);
    pt_dsa_set_enabled(c, dsa);
    pt_dsa_set_observer(c, on_sel, NULL);
    const int n = case_len[k];
    petrel_token *tok = case_tokens(k);
    run_out *r = calloc(1, sizeof *r);
    r->logits = calloc((size_t)n * VOCAB, sizeof(float));
    r->mtp = calloc((size_t)n * VOCAB, sizeof(float));
    petrel_set_route_observer(c, on_route, NULL);
    if (incremental) {
        for (int t = 0; t < n; t++) {
            cur_rec = &r->main;
            cr_assert_eq(petrel_decode(c, &tok[t], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
            memcpy(r->logits + (size_t)t * VOCAB, petrel_get_logits(c, 0), sizeof(float) * VOCAB);
            if (t + 1 < n) {
                int bi = 0;
                cur_rec = &r->mtpr;
                cr_assert_eq(petrel_decode_mtp(c, &bi, &tok[t + 1], 1), 0, "%s", petrel_context_error(c));
                memcpy(r->mtp + (size_t)t * VOCAB, petrel_get_mtp_logits(c, 0), sizeof(float) * VOCAB);
            }
        }
    } else {
        cur_rec = &r->main;
        cr_assert_eq(petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
        for (int t = 0; t < n; t++)
            memcpy(r->logits + (size_t)t * VOCAB, petrel_get_logits(c, t), sizeof(float) * VOCAB);
        if (n > 1) {
            int bi[MAXPOS];
            for (int t = 0; t < n - 1; t++)
                bi[t] = t;
            cur_rec = &r->mtpr;
            cr_assert_eq(petrel_decode_mtp(c, bi, tok + 1, n - 1), 0, "%s", petrel_context_error(c));
            for (int t = 0; t < n - 1; t++)
                memcpy(r->mtp + (size_t)t * VOCAB, petrel_get_mtp_logits(c, t), sizeof(float) * VOCAB);
        }
    }
    free(tok);
    petrel_context_free(c);
    petrel_model_close(m);
    return r;
}

static void run_free(run_out *r)
{
    free(r->logits);
    free(r->mtp);
    free(r);
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m))
            m = d;
    }
    return m;
}

// Selections of block `layer` (rows pos 0..n-1) against golden g (n, IDX_K).
static void check_sel(const rec *r, int layer, const int32_t *g, int n, const char *what, int k)
{
    for (int t = 0; t < n; t++) {
        cr_assert(r->nsel[layer][t], "case %d %s: no selection seen for layer %d pos %d", k, what, layer, t);
        for (int j = 0; j < IDX_K; j++)
            cr_expect_eq(r->sel[layer][t][j], g[(size_t)t * IDX_K + j],
                         "case %d %s layer %d pos %d: selected position %d is %d, golden %d", k, what, layer, t, j,
                         r->sel[layer][t][j], g[(size_t)t * IDX_K + j]);
    }
}

static void check_case(int k, int incremental)
{
    char *model = glm5_model("f32");
    const int n = case_len[k];
    run_out *r = run_case(model, k, incremental, 0, 0, true);
    const char *mode = incremental ? "incremental" : "batch";
    size_t cnt;

    float *g = gold_f32("case%d_logits.f32.bin", k, &cnt);
    cr_assert_eq(cnt, (size_t)n * VOCAB);
    float d = max_abs_diff(r->logits, g, cnt);
    cr_expect(d <= 1e-3f, "case %d (%s): logits max abs diff %g > 1e-3", k, mode, d);
    free(g);
    g = gold_f32("case%d_prefill_last_logits.f32.bin", k, &cnt);
    d = max_abs_diff(r->logits + (size_t)(n - 1) * VOCAB, g, VOCAB);
    cr_expect(d <= 1e-3f, "case %d (%s): prefill-last logits max abs diff %g", k, mode, d);
    free(g);

    int32_t *gi = gold_i32("case%d_router_ids.i32.bin", k, &cnt);
    cr_assert_eq(cnt, (size_t)N_MOE * n * TOPK);
    for (int l = 0; l < N_MOE; l++)
        for (int t = 0; t < n; t++)
            for (int j = 0; j < TOPK; j++)
                cr_expect_eq(r->main.route[l + 1][t][j], gi[((size_t)l * n + t) * TOPK + j],
                             "case %d (%s) layer %d pos %d: expert ids differ", k, mode, l + 1, t);
    free(gi);

    gi = gold_i32("case%d_indexer_topk.i32.bin", k, &cnt);
    cr_assert_eq(cnt, (size_t)N_LAYER * n * IDX_K);
    for (int l = 0; l < N_LAYER; l++)
        check_sel(&r->main, l, gi + (size_t)l * n * IDX_K, n, mode, k);
    free(gi);

    if (n > 1) {
        g = gold_f32("case%d_mtp_logits.f32.bin", k, &cnt);
        cr_assert_eq(cnt, (size_t)(n - 1) * VOCAB);
        d = max_abs_diff(r->mtp, g, cnt);
        cr_expect(d <= 1e-3f, "case %d (%s): MTP logits max abs diff %g > 1e-3", k, mode, d);
        free(g);
        gi = gold_i32("case%d_mtp_router_ids.i32.bin", k, &cnt);
        for (int t = 0; t < n - 1; t++)
            for (int j = 0; j < TOPK; j++)
                cr_expect_eq(r->mtpr.route[4][t][j], gi[(size_t)t * TOPK + j], "case %d MTP pos %d: expert ids differ",
                             k, t);
        free(gi);
        gi = gold_i32("case%d_mtp_indexer_topk.i32.bin", k, &cnt);
        cr_assert_eq(cnt, (size_t)(n - 1) * IDX_K);
        check_sel(&r->mtpr, 4, gi, n - 1, incremental ? "MTP incremental" : "MTP batch", k);
        free(gi);
    }
    run_free(r);
    free(model);
}

Test(glm5, case0_incremental) { check_case(0, 1); }
Test(glm5, case1_incremental) { check_case(1, 1); }
Test(glm5, case2_incremental) { check_case(2, 1); }
Test(glm5, case3_incremental) { check_case(3, 1); }
Test(glm5, case0_batch) { check_case(0, 0); }
Test(glm5, case1_batch) { check_case(1, 0); }
Test(glm5, case2_batch) { check_case(2, 0); }
Test(glm5, case3_batch) { check_case(3, 0); }

// The indexer off: dense MLA, the reference's dense logits (MLA with
// v_head 64 != qk_nope 48); rows t < index_topk equal the DSA run bit for bit.
Test(glm5, dense_attention)
{
    char *model = glm5_model("f32");
    const int k = 3, n = case_len[k];
    size_t cnt;
    float *g = gold_f32("case%d_dense_logits.f32.bin", k, &cnt);
    cr_assert_eq(cnt, (size_t)n * VOCAB);
    for (int inc = 0; inc < 2; inc++) {
        run_out *dn = run_case(model, k, inc, 0, 0, false);
        float d = max_abs_diff(dn->logits, g, cnt);
        cr_expect(d <= 1e-3f, "dense (%s): logits max abs diff %g > 1e-3", inc ? "incremental" : "batch", d);
        run_out *sp = run_case(model, k, inc, 0, 0, true);
        cr_expect(memcmp(dn->logits, sp->logits, sizeof(float) * IDX_K * VOCAB) == 0,
                  "rows t < index_topk: DSA differs from dense attention");
        cr_expect(memcmp(dn->logits, sp->logits, sizeof(float) * (size_t)n * VOCAB) != 0,
                  "rows t >= index_topk: DSA equals dense attention (no selection took effect)");
        run_free(dn);
        run_free(sp);
    }
    free(g);
    free(model);
}

// Placement invariance: expert slots 1 / all, 1 / 2 threads, batch /
// incremental: bit-identical logits and MTP logits (q8_0 weights).
Test(glm5, placement_invariance)
{
    char *model = glm5_model("q8_0");
    const int k = 3, n = case_len[k];
    run_out *ref = run_case(model, k, 0, 0, 2, true);
    const int cfg[][3] = {{1, 1, 0}, {1, 2, 0}, {16, 1, 0}, {1, 2, 1}, {16, 2, 1}};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        run_out *alt = run_case(model, k, cfg[i][2], cfg[i][0], cfg[i][1], true);
        cr_expect(memcmp(ref->logits, alt->logits, sizeof(float) * (size_t)n * VOCAB) == 0,
                  "logits differ with %d slots, %d threads, %s", cfg[i][0], cfg[i][1],
                  cfg[i][2] ? "incremental" : "batch");
        cr_expect(memcmp(ref->mtp, alt->mtp, sizeof(float) * (size_t)(n - 1) * VOCAB) == 0,
                  "MTP logits differ with %d slots, %d threads", cfg[i][0], cfg[i][1]);
        cr_expect(memcmp(ref->main.sel, alt->main.sel, sizeof ref->main.sel) == 0,
                  "selections differ with %d slots, %d threads", cfg[i][0], cfg[i][1]);
        run_free(alt);
    }
    run_free(ref);
    free(model);
}

// The indexer key cache counts in the context's KV bytes: per position,
// every block's latent row (kv_lora + rope) plus d_I for each block with an
// indexer (4 trunk + MTP), in f32.
Test(glm5, kv_bytes_include_indexer_keys)
{
    char *model = glm5_model("f32");
    char err[1024];
    petrel_model *m = petrel_model_open(model, NULL, err, sizeof err);
    cr_assert(m, "%s", err);
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 100;
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    cr_assert(c, "%s", err);
    petrel_stats st;
    petrel_get_stats(c, &st);
    cr_expect_eq(st.kv_bytes, 100ull * (5 * (160 + 16) + 5 * 32) * 4, "kv_bytes %llu",
                 (unsigned long long)st.kv_bytes);
    petrel_context_free(c);
    petrel_model_close(m);
    free(model);
}

// A saved state carries the indexer key cache: decoding case 3 after a
// save / restore into a fresh context at position 40 (past index_topk) gives
// the uninterrupted run's logits bit for bit. A version-1 state (before the
// indexer keys) is refused, naming the version.
Test(glm5, state_roundtrip_with_indexer_keys)
{
    char *model = glm5_model("f32");
    char err[1024];
    petrel_model *m = petrel_model_open(model, NULL, err, sizeof err);
    cr_assert(m, "%s", err);
    const int k = 3, n = case_len[k], cut = 40;
    petrel_token *tok = case_tokens(k);
    run_out *ref = run_case(model, k, 0, 0, 0, true);

    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "%s", err);
    cr_assert_eq(petrel_decode(c, tok, NULL, cut, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
    void *blob;
    size_t len;
    cr_assert_eq(petrel_state_save_mem(c, &blob, &len, err, sizeof err), 0, "%s", err);
    petrel_context_free(c);

    c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert_eq(petrel_state_load_mem(c, blob, len, err, sizeof err), 0, "%s", err);
    cr_assert_eq(petrel_kv_len(c), cut);
    cr_assert_eq(petrel_decode(c, tok + cut, NULL, n - cut, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    for (int t = cut; t < n; t++)
        cr_expect(memcmp(petrel_get_logits(c, t - cut), ref->logits + (size_t)t * VOCAB, sizeof(float) * VOCAB) == 0,
                  "position %d after restore differs from the uninterrupted run", t);

    // The same blob claiming version 1 (the version field follows the 8-byte magic).
    uint32_t one = 1;
    memcpy((char *)blob + 8, &one, 4);
    cr_expect_neq(petrel_state_load_mem(c, blob, len, err, sizeof err), 0);
    cr_expect(strstr(err, "version 1"), "message: %s", err);
    free(blob);
    free(tok);
    run_free(ref);
    petrel_context_free(c);
    petrel_model_close(m);
    free(model);
}

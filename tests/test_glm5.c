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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/hfconfig.h"
#include "synth/synth_plan.h"
#include "engine/context.h"
#include "engine/dsa.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_decode.h"
#include "tests/testutil/tu_float.h"
#include "tests/testutil/tu_gguf.h"

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

// tu_decode_hook: the observers record into r's main or MTP record.
static void set_rec(void *user, bool mtp)
{
    run_out *r = user;
    cur_rec = mtp ? &r->mtpr : &r->main;
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
    tu_decode_case(c, tok, n, VOCAB, incremental, r->logits, r->mtp, set_rec, r);
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
    float d = tu_max_abs_diff(r->logits, g, cnt);
    cr_expect(d <= 1e-3f, "case %d (%s): logits max abs diff %g > 1e-3", k, mode, d);
    free(g);
    g = gold_f32("case%d_prefill_last_logits.f32.bin", k, &cnt);
    d = tu_max_abs_diff(r->logits + (size_t)(n - 1) * VOCAB, g, VOCAB);
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
        d = tu_max_abs_diff(r->mtp, g, cnt);
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
        float d = tu_max_abs_diff(dn->logits, g, cnt);
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

// ---- shared indexers (indexer_types) against a float reference -------------------
//
// ref_* below is a plain double-precision forward pass of tiny-glm5 written
// from the formulas of the fixture's README (naive MLA, the indexer, the
// noaux_tc router), reading the BF16 safetensors directly. It is first held
// to the golden logits and selections with every layer full; then Petrel on
// a variant whose config marks layers 1 and 3 "shared" must match it run
// with the same marks (a shared layer reuses the selection of the last full
// layer before it).


#define R_E 256
#define R_H 4
#define R_QL 192
#define R_KVL 160
#define R_NOPE 48
#define R_ROPE 16
#define R_VH 64
#define R_HI 4
#define R_DI 32
#define R_X 16

typedef struct ref_w {
    st_file *sh[2];
    char *names[256];
    float *vals[256];
    int n;
} ref_w;

// Tensor `name` as float32 (cached).
static const float *rw(ref_w *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const float *rw(ref_w *w, const char *fmt, ...)
{
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->names[i], name))
            return w->vals[i];
    for (int s = 0; s < 2; s++) {
        const st_tensor *t = st_find(w->sh[s], name);
        if (!t)
            continue;
        size_t n = (t->end - t->begin) / st_dtype_size(t->dtype);
        float *v = malloc(n * sizeof(float));
        pt_err err = {{0}};
        cr_assert_eq(st_read_f32(w->sh[s], t, v, &err), 0, "%s", err.msg);
        cr_assert(w->n < 256);
        w->names[w->n] = strdup(name);
        w->vals[w->n++] = v;
        return v;
    }
    cr_assert_fail("tensor %s not in tiny-glm5", name);
    return NULL;
}

// y (rows) = W (rows, cols) x, in double.
static void mv(const float *W, const double *x, int rows, int cols, double *y)
{
    for (int r = 0; r < rows; r++) {
        double a = 0;
        for (int c = 0; c < cols; c++)
            a += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = a;
    }
}

static void rms(const double *x, const float *w, int n, double *y)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * inv * w[i];
}

// Interleaved RoPE on x[0..16) at position t (theta 1e6).
static void rope16(double *x, int t)
{
    for (int i = 0; i < R_ROPE / 2; i++) {
        double a = t * pow(1e6, -2.0 * i / R_ROPE), c = cos(a), s = sin(a);
        double x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
    }
}

static double silu(double x) { return x / (1 + exp(-x)); }

static void swiglu_ffn(ref_w *w, const char *pre, int ff, const double *x, double *out)
{
    double *g = malloc(sizeof(double) * ff), *u = malloc(sizeof(double) * ff);
    mv(rw(w, "%s.gate_proj.weight", pre), x, ff, R_E, g);
    mv(rw(w, "%s.up_proj.weight", pre), x, ff, R_E, u);
    for (int i = 0; i < ff; i++)
        g[i] = silu(g[i]) * u[i];
    mv(rw(w, "%s.down_proj.weight", pre), g, R_E, ff, out);
    free(g);
    free(u);
}

typedef struct ref_cache {
    double ckv[N_LAYER][MAXPOS][R_KVL], kpe[N_LAYER][MAXPOS][R_ROPE], ik[N_LAYER][MAXPOS][R_DI];
} ref_cache;

// Main-model logits of token tok at position t; shared[l] marks layers that
// reuse the selection; sel_out[l] (IDX_K, -1 padded) gets each layer's set.
static void ref_step(ref_w *w, ref_cache *C, const bool *shared, int tok, int t, double *logits,
                     int32_t sel_out[N_LAYER][IDX_K])
{
    double h[R_E], x[R_E], tmp[R_E];
    const float *emb = rw(w, "model.embed_tokens.weight");
    for (int i = 0; i < R_E; i++)
        h[i] = emb[(size_t)tok * R_E + i];
    int sel[IDX_K], nsel = 0;
    for (int l = 0; l < N_LAYER; l++) {
        char p[64];
        snprintf(p, sizeof p, "model.layers.%d", l);
        rms(h, rw(w, "%s.input_layernorm.weight", p), R_E, x);
        double qa[R_QL], qr[R_QL];
        mv(rw(w, "%s.self_attn.q_a_proj.weight", p), x, R_QL, R_E, qa);
        rms(qa, rw(w, "%s.self_attn.q_a_layernorm.weight", p), R_QL, qr);
        double kva[R_KVL + R_ROPE];
        mv(rw(w, "%s.self_attn.kv_a_proj_with_mqa.weight", p), x, R_KVL + R_ROPE, R_E, kva);
        rms(kva, rw(w, "%s.self_attn.kv_a_layernorm.weight", p), R_KVL, C->ckv[l][t]);
        memcpy(C->kpe[l][t], kva + R_KVL, sizeof(double) * R_ROPE);
        rope16(C->kpe[l][t], t);
        const int n = t + 1;
        if (!shared[l]) { // the indexer
            double k[R_DI], q[R_HI * R_DI], wt[R_HI], mean = 0, var = 0;
            mv(rw(w, "%s.self_attn.indexer.wk.weight", p), x, R_DI, R_E, k);
            for (int i = 0; i < R_DI; i++)
                mean += k[i] / R_DI;
            for (int i = 0; i < R_DI; i++)
                var += (k[i] - mean) * (k[i] - mean) / R_DI;
            const float *kw = rw(w, "%s.self_attn.indexer.k_norm.weight", p);
            const float *kb = rw(w, "%s.self_attn.indexer.k_norm.bias", p);
            for (int i = 0; i < R_DI; i++)
                C->ik[l][t][i] = (k[i] - mean) / sqrt(var + 1e-6) * kw[i] + kb[i];
            rope16(C->ik[l][t], t);
            mv(rw(w, "%s.self_attn.indexer.wq_b.weight", p), qr, R_HI * R_DI, R_QL, q);
            for (int hh = 0; hh < R_HI; hh++)
                rope16(q + hh * R_DI, t);
            mv(rw(w, "%s.self_attn.indexer.weights_proj.weight", p), x, R_HI, R_E, wt);
            double sc[MAXPOS];
            for (int s = 0; s < n; s++) {
                double a = 0;
                for (int hh = 0; hh < R_HI; hh++) {
                    double d = 0;
                    for (int i = 0; i < R_DI; i++)
                        d += q[hh * R_DI + i] * C->ik[l][s][i];
                    a += wt[hh] * (d > 0 ? d : 0);
                }
                sc[s] = a / sqrt((double)R_DI) / sqrt((double)R_HI);
            }
            // Keep the best min(8, n): repeatedly the highest remaining score, lower position on ties.
            bool taken[MAXPOS] = {0};
            nsel = n < IDX_K ? n : IDX_K;
            for (int j = 0; j < nsel; j++) {
                int best = -1;
                for (int s = 0; s < n; s++)
                    if (!taken[s] && (best < 0 || sc[s] > sc[best]))
                        best = s;
                taken[best] = true;
            }
            for (int s = 0, j = 0; s < n; s++)
                if (taken[s])
                    sel[j++] = s;
        }
        for (int j = 0; j < IDX_K; j++)
            sel_out[l][j] = j < nsel ? sel[j] : -1;
        // Naive MLA over the kept keys.
        double q[R_H * (R_NOPE + R_ROPE)], o[R_H * R_VH];
        mv(rw(w, "%s.self_attn.q_b_proj.weight", p), qr, R_H * (R_NOPE + R_ROPE), R_QL, q);
        const float *kvb = rw(w, "%s.self_attn.kv_b_proj.weight", p);
        for (int hh = 0; hh < R_H; hh++) {
            double *qh = q + hh * (R_NOPE + R_ROPE);
            rope16(qh + R_NOPE, t);
            const float *wk = kvb + (size_t)hh * (R_NOPE + R_VH) * R_KVL, *wv = wk + (size_t)R_NOPE * R_KVL;
            double sc[IDX_K], mx = -1e300, sum = 0;
            for (int j = 0; j < nsel; j++) {
                const int s = sel[j];
                double kn[R_NOPE], a = 0;
                mv(wk, C->ckv[l][s], R_NOPE, R_KVL, kn);
                for (int i = 0; i < R_NOPE; i++)
                    a += qh[i] * kn[i];
                for (int i = 0; i < R_ROPE; i++)
                    a += qh[R_NOPE + i] * C->kpe[l][s][i];
                sc[j] = a * 0.125;
                mx = sc[j] > mx ? sc[j] : mx;
            }
            for (int j = 0; j < nsel; j++)
                sum += (sc[j] = exp(sc[j] - mx));
            double *oh = o + hh * R_VH;
            memset(oh, 0, sizeof(double) * R_VH);
            for (int j = 0; j < nsel; j++) {
                double v[R_VH];
                mv(wv, C->ckv[l][sel[j]], R_VH, R_KVL, v);
                for (int i = 0; i < R_VH; i++)
                    oh[i] += sc[j] / sum * v[i];
            }
        }
        mv(rw(w, "%s.self_attn.o_proj.weight", p), o, R_E, R_H * R_VH, tmp);
        for (int i = 0; i < R_E; i++)
            h[i] += tmp[i];
        // FFN: dense layer 0, MoE (sigmoid + bias top-4, normalised, x2.5) after.
        rms(h, rw(w, "%s.post_attention_layernorm.weight", p), R_E, x);
        char pre[96];
        if (l == 0) {
            snprintf(pre, sizeof pre, "%s.mlp", p);
            swiglu_ffn(w, pre, 512, x, tmp);
        } else {
            double g[R_X], s[R_X], b[R_X];
            mv(rw(w, "%s.mlp.gate.weight", p), x, R_X, R_E, g);
            const float *bias = rw(w, "%s.mlp.gate.e_score_correction_bias", p);
            for (int e = 0; e < R_X; e++) {
                s[e] = 1 / (1 + exp(-g[e]));
                b[e] = s[e] + bias[e];
            }
            bool used[R_X] = {0};
            int ids[TOPK];
            double wsum = 0;
            for (int j = 0; j < TOPK; j++) {
                int best = -1;
                for (int e = 0; e < R_X; e++)
                    if (!used[e] && (best < 0 || b[e] > b[best]))
                        best = e;
                used[best] = true;
                ids[j] = best;
                wsum += s[best];
            }
            snprintf(pre, sizeof pre, "%s.mlp.shared_experts", p);
            swiglu_ffn(w, pre, 128, x, tmp);
            for (int j = 0; j < TOPK; j++) {
                double eo[R_E];
                snprintf(pre, sizeof pre, "%s.mlp.experts.%d", p, ids[j]);
                swiglu_ffn(w, pre, 128, x, eo);
                for (int i = 0; i < R_E; i++)
                    tmp[i] += s[ids[j]] / wsum * 2.5 * eo[i];
            }
        }
        for (int i = 0; i < R_E; i++)
            h[i] += tmp[i];
    }
    rms(h, rw(w, "model.norm.weight"), R_E, x);
    mv(rw(w, "lm_head.weight"), x, VOCAB, R_E, logits);
}

static void ref_open(ref_w *w)
{
    memset(w, 0, sizeof *w);
    pt_err err = {{0}};
    for (int s = 0; s < 2; s++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/fixtures/tiny-glm5/model-0000%d-of-000002.safetensors",
                 PETREL_SOURCE_DIR, s + 1);
        w->sh[s] = st_open(path, &err);
        cr_assert(w->sh[s], "%s", err.msg);
    }
}

static void ref_close(ref_w *w)
{
    for (int i = 0; i < w->n; i++) {
        free(w->names[i]);
        free(w->vals[i]);
    }
    st_close(w->sh[0]);
    st_close(w->sh[1]);
}

// Reference logits (n, vocab) and selections for case k under `shared`.
static void ref_run(ref_w *w, int k, const bool *shared, float *logits, int32_t (*sel)[MAXPOS][IDX_K])
{
    const int n = case_len[k];
    petrel_token *tok = case_tokens(k);
    ref_cache *C = calloc(1, sizeof *C);
    double lg[VOCAB];
    for (int t = 0; t < n; t++) {
        int32_t s[N_LAYER][IDX_K];
        ref_step(w, C, shared, tok[t], t, lg, s);
        for (int v = 0; v < VOCAB; v++)
            logits[(size_t)t * VOCAB + v] = (float)lg[v];
        for (int l = 0; l < N_LAYER; l++)
            memcpy(sel[l][t], s[l], sizeof s[l]);
    }
    free(C);
    free(tok);
}

// The reference itself, every layer full: the golden logits and selections.
Test(glm5, float_reference_matches_golden)
{
    ref_w w;
    ref_open(&w);
    const int k = 3, n = case_len[k];
    const bool full[N_LAYER] = {0};
    float *lg = calloc((size_t)n * VOCAB, sizeof(float));
    int32_t (*sel)[MAXPOS][IDX_K] = calloc(N_LAYER, sizeof *sel);
    ref_run(&w, k, full, lg, sel);
    size_t cnt;
    float *g = gold_f32("case%d_logits.f32.bin", k, &cnt);
    float d = tu_max_abs_diff(lg, g, cnt);
    cr_expect(d <= 1e-3f, "reference vs golden logits: max abs diff %g", d);
    int32_t *gi = gold_i32("case%d_indexer_topk.i32.bin", k, &cnt);
    for (int l = 0; l < N_LAYER; l++)
        for (int t = 0; t < n; t++)
            cr_expect(memcmp(sel[l][t], gi + ((size_t)l * n + t) * IDX_K, sizeof sel[l][t]) == 0,
                      "reference selection differs at layer %d pos %d", l, t);
    free(g);
    free(gi);
    free(lg);
    free(sel);
    ref_close(&w);
}

// A copy of the GGUF at src as llama.cpp's glm-dsa converter writes it:
// `glm-dsa.attention.indexer.types` a BOOL array (llama.cpp's add_indexer_types),
// no petrel.* keys. Tensors and data unchanged.
static void write_llamacpp_style(const char *src, const char *dst)
{
    pt_err err = {{0}};
    gguf_file *g = gguf_open(src, &err);
    cr_assert(g, "%s", err.msg);
    gguf_writer *w = gguf_writer_new((uint32_t)g->alignment);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv kv = g->kv[i];
        if (!strncmp(kv.key, "petrel.", 7))
            continue;
        uint8_t flags[64];
        if (!strcmp(kv.key, "glm-dsa.attention.indexer.types")) {
            cr_assert(kv.type == GGUF_ARRAY && kv.arr_type == GGUF_UINT32 && kv.n <= 64);
            for (uint64_t j = 0; j < kv.n; j++)
                flags[j] = ((const uint32_t *)kv.arr)[j] != 0;
            kv.arr_type = GGUF_BOOL;
            kv.arr = flags;
        }
        gguf_w_copy_kv(w, &kv);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        gguf_w_tensor(w, g->tensors[i].name, g->tensors[i].n_dims, g->tensors[i].ne, g->tensors[i].type);
    tu_gguf_write(dst, w, g, NULL, (int)g->n_tensors, NULL, NULL);
    gguf_writer_free(w);
    gguf_close(g);
}

// Petrel on the variant with layers 1 and 3 shared (no indexer weights
// written for them) against the reference with the same marks: logits, and
// every layer's set (a shared layer reports the set it reuses), one token at
// a time and as one batch, and from a copy written as llama.cpp writes it.
Test(glm5, shared_indexers)
{
    char *dir = tu_tmpdir("glm5-shared");
    const char *src = PETREL_SOURCE_DIR "/tests/fixtures/tiny-glm5";
    char *out = NULL;
    int rc = tu_sh(&out,
                   "cd '%s' && ln -s '%s'/model-0000*.safetensors '%s'/model.safetensors.index.json . && "
                   "sed 's/\"index_topk\": 8,/\"index_topk\": 8, \"indexer_types\": [\"full\", \"shared\", "
                   "\"full\", \"shared\"],/' '%s/config.json' > config.json && grep -q indexer_types config.json && "
                   "'%s' convert . -o shared.gguf --type f32 2>&1",
                   dir, src, src, src, PETREL_BIN);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
    char model[1200];
    snprintf(model, sizeof model, "%s/shared.gguf", dir);
    rc = tu_sh(&out, "'%s' inspect '%s' 2>&1", PETREL_BIN, model);
    cr_assert(rc == 0 && strstr(out, "glm-dsa.attention.indexer.types"), "%s", out);
    cr_expect(!strstr(out, "blk.1.indexer.") && !strstr(out, "blk.3.indexer.") && strstr(out, "blk.2.indexer."),
              "indexer tensors of shared layers written: %s", out);
    free(out);

    ref_w w;
    ref_open(&w);
    const int k = 3, n = case_len[k];
    const bool shared[N_LAYER] = {false, true, false, true};
    float *lg = calloc((size_t)n * VOCAB, sizeof(float));
    int32_t (*sel)[MAXPOS][IDX_K] = calloc(N_LAYER, sizeof *sel);
    ref_run(&w, k, shared, lg, sel);
    size_t cnt;
    float *g = gold_f32("case%d_logits.f32.bin", k, &cnt);
    cr_expect(tu_max_abs_diff(lg, g, cnt) > 1e-2f, "sharing the indexers changed nothing in the reference");
    free(g);
    char lmodel[1300];
    snprintf(lmodel, sizeof lmodel, "%s/llamacpp-style.gguf", dir);
    write_llamacpp_style(model, lmodel);
    for (int inc = 0; inc < 3; inc++) {
        // 0 batch, 1 incremental, 2 the llama.cpp-style copy (batch)
        run_out *r = run_case(inc == 2 ? lmodel : model, k, inc == 1, 0, 0, true);
        float d = tu_max_abs_diff(r->logits, lg, (size_t)n * VOCAB);
        const char *what = inc == 2 ? "llama.cpp-style file" : inc ? "incremental" : "batch";
        cr_expect(d <= 1e-3f, "shared (%s): logits max abs diff %g vs the reference", what, d);
        for (int l = 0; l < N_LAYER; l++)
            for (int t = 0; t < n; t++)
                cr_expect(memcmp(r->main.sel[l][t], sel[l][t], sizeof sel[l][t]) == 0,
                          "shared (%s): selection differs at layer %d pos %d", what, l, t);
        run_free(r);
    }
    free(lg);
    free(sel);
    ref_close(&w);
    tu_rmrf(dir);
    free(dir);
}

// ---- the GLM-shaped synth preset ---------------------------------------------------

// `petrel synth --preset glm5` describes GLM-5's attention (64 heads, kv_lora
// 512, qk_rope 64, qk_nope 192, v_head 256) and DSA indexer (32 x 128, top
// 2048): its config.json parses to those figures, and its checkpoint plan
// holds the indexer of every block (MTP included), FP8 wq_b / wk with their
// scales, BF16 k_norm (weight, bias) and weights_proj.
Test(glm5, synth_preset_glm5)
{
    const synth_preset *p = synth_find_preset("glm5");
    cr_assert(p);
    char *dir = tu_tmpdir("glm5-synth"), path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *js = synth_config_json(p);
    FILE *f = fopen(path, "w");
    cr_assert(js && f);
    fputs(js, f);
    fclose(f);
    free(js);
    pt_hf_config cfg;
    pt_err err = {{0}};
    cr_assert_eq(pt_hf_config_load(path, &cfg, &err), 0, "%s", err.msg);
    const pt_hparams *hp = &cfg.hp;
    cr_expect(!strcmp(cfg.model_type, "glm_moe_dsa"));
    cr_expect(hp->n_head == 64 && hp->kv_lora_rank == 512 && hp->qk_rope == 64 && hp->qk_nope == 192 &&
              hp->v_head == 256);
    cr_expect(hp->idx_n_head == 32 && hp->idx_head_dim == 128 && hp->idx_topk == 2048 && !hp->idx_rope_neox);
    cr_expect_eq(cfg.n_unimpl, 0);
    // Latent (512 + 64) and indexer key (128) per block, 3 layers + MTP, f32.
    cr_expect_eq(pt_hparams_kv_bytes_per_token(hp, 4), 4ull * (512 + 64 + 128) * 4);
    pt_hf_config_free(&cfg);

    synth_plan pl;
    cr_assert_eq(synth_plan_build(&pl, p, &err), 0, "%s", err.msg);
    int found = 0;
    for (uint32_t l = 0; l <= p->layers; l++) {
        const char *names[] = {"wq_b.weight", "wq_b.weight_scale_inv", "wk.weight", "wk.weight_scale_inv",
                               "k_norm.weight", "k_norm.bias", "weights_proj.weight"};
        const st_dtype types[] = {ST_F8_E4M3, ST_F32, ST_F8_E4M3, ST_F32, ST_BF16, ST_BF16, ST_BF16};
        for (int k = 0; k < 7; k++) {
            char nm[160];
            snprintf(nm, sizeof nm, "model.layers.%u.self_attn.indexer.%s", l, names[k]);
            for (uint32_t i = 0; i < pl.n; i++)
                if (!strcmp(pl.t[i].name, nm)) {
                    cr_expect_eq(pl.t[i].dtype, types[k], "%s dtype", nm);
                    found++;
                }
        }
    }
    cr_expect_eq(found, 7 * 4);
    synth_plan_free(&pl);
    tu_rmrf(dir);
    free(dir);
}

// indexer_types errors name the key: a value other than full / shared, the
// wrong length, a first layer that is shared.
Test(glm5, indexer_types_errors)
{
    const char *bad[][2] = {
        {"[\"full\", \"bogus\", \"full\", \"full\"]", "indexer_types[1]"},
        {"[\"full\", \"shared\"]", "indexer_types"},
        {"[\"shared\", \"full\", \"full\", \"full\"]", "layer 0 is 'shared'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *dir = tu_tmpdir("glm5-types"), *out = NULL;
        int rc = tu_sh(&out,
                       "cd '%s' && sed 's/\"index_topk\": 8,/\"index_topk\": 8, \"indexer_types\": %s,/' "
                       "'%s/tests/fixtures/tiny-glm5/config.json' > config.json && '%s' convert --plan config.json 2>&1",
                       dir, bad[i][0], PETREL_SOURCE_DIR, PETREL_BIN);
        cr_expect_neq(rc, 0, "accepted indexer_types %s: %s", bad[i][0], out);
        cr_expect(out && strstr(out, bad[i][1]), "indexer_types %s: message lacks '%s': %s", bad[i][0], bad[i][1],
                  out);
        free(out);
        tu_rmrf(dir);
        free(dir);
    }
}

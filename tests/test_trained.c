// tests/test_trained.c — Petrel against the trained model's own oracle
// (tests/fixtures/trained, made by tools/train: the PyTorch module's float32
// outputs on the FP8-dequantised weights). The fixture is converted with
// `petrel convert --type f32`; checks: logits within 1e-3 per position (one
// batch and one token at a time), identical routed experts per MoE layer,
// MTP logits and the MTP block's experts, the greedy continuation of a
// held-out prefix token for token (its smallest top1-top2 margin is in the
// manifest, far above 1e-3), that continuation being English words of the
// corpus, and the tokenizer against Hugging Face tokenizers' ids.
#include <criterion/criterion.h>
#include <ctype.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_float.h"
#include "tokenizer/tokenizer.h"

#define VOCAB 2048
#define N_LAYER 4 // main blocks; the MTP block is block 4
#define TOPK 4
#define MAXN 64
static const int case_len[3] = {8, 24, 64};

typedef struct route_rec {
    int32_t ids[N_LAYER + 1][MAXN][TOPK]; // (block, pos, k)
    int seen[N_LAYER + 1][MAXN];
} route_rec;

static void on_route(void *user, int layer, int32_t pos, const int32_t *ids, const float *w, int n)
{
    (void)w;
    route_rec *r = user;
    cr_assert(n == TOPK && layer <= N_LAYER && pos >= 0 && pos < MAXN, "route layer %d pos %d n %d", layer, pos, n);
    memcpy(r->ids[layer][pos], ids, sizeof(int32_t) * TOPK);
    r->seen[layer][pos] = 1;
}

static void *ref(const char *name, size_t *count, size_t elem)
{
    char rel[256];
    snprintf(rel, sizeof rel, "trained/refs/%s", name);
    char *p = tu_fixture(rel);
    size_t b;
    void *d = tu_read(p, &b);
    cr_assert(d, "missing reference %s", p);
    free(p);
    *count = b / elem;
    return d;
}

// The fixture converted to an f32 GGUF in a fresh temporary folder (*dir, to
// remove). Returns the malloc'ed model path.
static char *convert_f32(char **dir)
{
    *dir = tu_tmpdir("trained");
    cr_assert(*dir);
    char *src = tu_fixture("trained");
    size_t n = strlen(*dir) + 32;
    char *path = malloc(n);
    snprintf(path, n, "%s/trained-f32.gguf", *dir);
    char *out = NULL;
    int rc = tu_sh(&out, "'%s' convert '%s' -o '%s' --type f32 2>&1", PETREL_BIN, src, path);
    cr_assert_eq(rc, 0, "convert failed: %s", out ? out : "");
    free(out);
    free(src);
    return path;
}

static petrel_context *open_ctx(const char *model, petrel_model **m)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 2;
    *m = petrel_model_open(model, &mp, err, sizeof err);
    cr_assert(*m, "open: %s", err);
    cr_assert_eq(petrel_model_n_vocab(*m), VOCAB);
    cr_assert(petrel_model_has_mtp(*m));
    petrel_context *c = petrel_context_new(*m, NULL, err, sizeof err);
    cr_assert(c, "context: %s", err);
    return c;
}

// Case k: logits of every position, experts per MoE block and position, MTP
// logits and the MTP block's experts, against the references.
static void check_case(const char *model, int k, int incremental)
{
    const int n = case_len[k];
    char name[96];
    size_t cnt;
    snprintf(name, sizeof name, "case%d_tokens.i32.bin", k);
    int32_t *tok = ref(name, &cnt, 4);
    cr_assert_eq((int)cnt, n);
    petrel_model *m;
    petrel_context *c = open_ctx(model, &m);
    route_rec *rr = calloc(1, sizeof *rr), *rm = calloc(1, sizeof *rm);
    float *logits = calloc((size_t)n * VOCAB, sizeof(float)), *mtp = calloc((size_t)n * VOCAB, sizeof(float));
    petrel_set_route_observer(c, on_route, rr);
    if (incremental) {
        for (int t = 0; t < n; t++) {
            petrel_set_route_observer(c, on_route, rr);
            cr_assert_eq(petrel_decode(c, &tok[t], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
            memcpy(logits + (size_t)t * VOCAB, petrel_get_logits(c, 0), sizeof(float) * VOCAB);
            if (t + 1 < n) {
                int bi = 0;
                petrel_set_route_observer(c, on_route, rm);
                cr_assert_eq(petrel_decode_mtp(c, &bi, &tok[t + 1], 1), 0, "%s", petrel_context_error(c));
                memcpy(mtp + (size_t)t * VOCAB, petrel_get_mtp_logits(c, 0), sizeof(float) * VOCAB);
            }
        }
    } else {
        cr_assert_eq(petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
        for (int t = 0; t < n; t++)
            memcpy(logits + (size_t)t * VOCAB, petrel_get_logits(c, t), sizeof(float) * VOCAB);
        int bi[MAXN];
        for (int t = 0; t < n - 1; t++)
            bi[t] = t;
        petrel_set_route_observer(c, on_route, rm);
        cr_assert_eq(petrel_decode_mtp(c, bi, tok + 1, n - 1), 0, "%s", petrel_context_error(c));
        for (int t = 0; t < n - 1; t++)
            memcpy(mtp + (size_t)t * VOCAB, petrel_get_mtp_logits(c, t), sizeof(float) * VOCAB);
    }
    const char *mode = incremental ? "incremental" : "batch";

    snprintf(name, sizeof name, "case%d_logits.f32.bin", k);
    float *g = ref(name, &cnt, 4);
    cr_assert_eq(cnt, (size_t)n * VOCAB);
    float d = tu_max_abs_diff(logits, g, cnt);
    cr_expect(d <= 1e-3f, "case %d (%s): logits max abs diff %g > 1e-3", k, mode, d);
    free(g);

    snprintf(name, sizeof name, "case%d_router_ids.i32.bin", k);
    int32_t *gi = ref(name, &cnt, 4);
    cr_assert_eq(cnt, (size_t)(N_LAYER - 1) * n * TOPK);
    for (int l = 1; l < N_LAYER; l++)
        for (int t = 0; t < n; t++) {
            cr_assert(rr->seen[l][t], "no routing seen for block %d pos %d", l, t);
            for (int j = 0; j < TOPK; j++)
                cr_expect_eq(rr->ids[l][t][j], gi[((size_t)(l - 1) * n + t) * TOPK + j],
                             "case %d (%s) block %d pos %d: expert ids differ", k, mode, l, t);
        }
    free(gi);

    snprintf(name, sizeof name, "case%d_mtp_logits.f32.bin", k);
    g = ref(name, &cnt, 4);
    cr_assert_eq(cnt, (size_t)(n - 1) * VOCAB);
    d = tu_max_abs_diff(mtp, g, cnt);
    cr_expect(d <= 1e-3f, "case %d (%s): MTP logits max abs diff %g > 1e-3", k, mode, d);
    free(g);
    snprintf(name, sizeof name, "case%d_mtp_router_ids.i32.bin", k);
    gi = ref(name, &cnt, 4);
    cr_assert_eq(cnt, (size_t)(n - 1) * TOPK);
    for (int t = 0; t < n - 1; t++) {
        cr_assert(rm->seen[N_LAYER][t], "no MTP routing seen for pos %d", t);
        for (int j = 0; j < TOPK; j++)
            cr_expect_eq(rm->ids[N_LAYER][t][j], gi[(size_t)t * TOPK + j], "case %d (%s) MTP pos %d: expert ids differ",
                         k, mode, t);
    }
    free(gi);
    free(logits);
    free(mtp);
    free(rr);
    free(rm);
    free(tok);
    petrel_context_free(c);
    petrel_model_close(m);
}

Test(trained, logits_experts_mtp)
{
    char *dir, *model = convert_f32(&dir);
    for (int k = 0; k < 3; k++)
        check_case(model, k, 0);
    check_case(model, 1, 1);
    free(model);
    tu_rmrf(dir);
    free(dir);
}

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

// Greedy continuation: the PyTorch tokens exactly, and readable: at least 80%
// of its words (letters only, lower-cased) occur in the held-out text.
Test(trained, greedy_continuation)
{
    char *dir, *model = convert_f32(&dir);
    size_t np, ng;
    int32_t *prefix = ref("greedy_prefix.i32.bin", &np, 4), *want = ref("greedy_tokens.i32.bin", &ng, 4);
    cr_assert(np > 0 && ng >= 16);
    petrel_model *m;
    petrel_context *c = open_ctx(model, &m);
    cr_assert_eq(petrel_decode(c, prefix, NULL, (int)np, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
    int32_t *got = calloc(ng, sizeof *got);
    for (size_t i = 0; i < ng; i++) {
        const float *lg = petrel_get_logits(c, i ? 0 : (int)np - 1); // the last entry of the batch
        cr_assert(lg, "no logits at greedy step %zu", i);
        got[i] = argmax(lg, VOCAB);
        cr_assert_eq(petrel_decode(c, &got[i], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
    }
    for (size_t i = 0; i < ng; i++)
        cr_expect_eq(got[i], want[i], "greedy token %zu: petrel %d, PyTorch %d", i, got[i], want[i]);

    char *tp = tu_fixture("trained/tokenizer.json"), *hp = tu_fixture("trained/heldout.txt");
    pt_err err = {{0}};
    pt_tokenizer *tok = pt_tokenizer_load(tp, &err);
    cr_assert(tok, "tokenizer: %s", err.msg);
    char *text = pt_tokenizer_decode(tok, got, ng, true, NULL);
    size_t hl;
    char *held = tu_read(hp, &hl);
    cr_assert(held && text);
    for (size_t i = 0; i < hl; i++)
        held[i] = (char)tolower((unsigned char)held[i]);
    int words = 0, known = 0;
    for (char *p = text; *p;) {
        while (*p && !isalpha((unsigned char)*p))
            p++;
        char w[64];
        size_t n = 0;
        while (*p && isalpha((unsigned char)*p)) {
            if (n + 1 < sizeof w)
                w[n++] = (char)tolower((unsigned char)*p);
            p++;
        }
        if (!n)
            continue;
        w[n] = 0;
        words++;
        char pat[80];
        snprintf(pat, sizeof pat, " %s", w);
        known += strstr(held, pat) != NULL;
    }
    cr_log_info("greedy continuation: %s (%d of %d words in the held-out text)", text, known, words);
    cr_expect(words >= 8, "too few words in the greedy text: \"%s\"", text);
    cr_expect(known * 10 >= words * 8, "only %d of %d words are corpus words: \"%s\"", known, words, text);
    free(held);
    free(text);
    pt_tokenizer_free(tok);
    free(tp);
    free(hp);
    free(got);
    free(prefix);
    free(want);
    petrel_context_free(c);
    petrel_model_close(m);
    free(model);
    tu_rmrf(dir);
    free(dir);
}

// Held-out lines and edge cases: ids and decodings as Hugging Face tokenizers
// (npm tokenizers 0.23.2, tools/train/hf_tokenize.js) gives them.
Test(trained, tokenizer_matches_hf)
{
    char *tp = tu_fixture("trained/tokenizer.json"), *cp = tu_fixture("trained/tokenizer_cases.jsonl");
    pt_err err = {{0}};
    pt_tokenizer *tok = pt_tokenizer_load(tp, &err);
    cr_assert(tok, "tokenizer: %s", err.msg);
    size_t len;
    char *all = tu_read(cp, &len);
    cr_assert(all, "missing %s", cp);
    int cases = 0;
    char *save = NULL;
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_object *o = json_tokener_parse(line);
        cr_assert(o, "bad line %d of %s", cases, cp);
        json_object *jt, *ji, *jd;
        cr_assert(json_object_object_get_ex(o, "text", &jt) && json_object_object_get_ex(o, "ids", &ji) &&
                  json_object_object_get_ex(o, "decoded", &jd));
        const char *text = json_object_get_string(jt);
        int32_t *ids = NULL;
        int64_t n = pt_tokenizer_encode(tok, text, strlen(text), true, false, &ids, &err);
        cr_assert(n >= 0, "encode: %s", err.msg);
        size_t nw = json_object_array_length(ji);
        cr_expect_eq((size_t)n, nw, "case %d: %lld ids, HF %zu (\"%.40s\")", cases, (long long)n, nw, text);
        for (size_t i = 0; i < nw && i < (size_t)n; i++)
            if (ids[i] != json_object_get_int(json_object_array_get_idx(ji, i))) {
                cr_expect(0, "case %d: id %zu differs (\"%.40s\")", cases, i, text);
                break;
            }
        char *dec = pt_tokenizer_decode(tok, ids, (size_t)n, false, NULL);
        cr_expect_str_eq(dec, json_object_get_string(jd), "case %d: decoding differs", cases);
        free(dec);
        free(ids);
        json_object_put(o);
        cases++;
    }
    cr_expect(cases >= 50, "only %d tokenizer cases", cases);
    free(all);
    pt_tokenizer_free(tok);
    free(tp);
    free(cp);
}

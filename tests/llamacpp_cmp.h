// tests/llamacpp_cmp.h — running a GGUF on tiny-dsv3's golden token cases
// and comparing with llama.cpp's own outputs on the same file
// (tests/fixtures/llamacpp/{logits,logits_dequant,routing}, see its README).
// Header-only (static functions): shared by test_llamacpp_files.c and
// test_split.c.
//
// Why per row and "before the first routing difference": this random model
// has routing near-ties, so a float-rounding difference can pick another
// expert and move every later row by O(1) (llama.cpp itself moves by up to
// 3 between two of its kernels). Attention is causal, so row t depends only
// on positions 0..t: while every (layer, position <= t) picks the same
// experts as llama.cpp did, row t must agree to float rounding.
#ifndef PETREL_TESTS_LLAMACPP_CMP_H
#define PETREL_TESTS_LLAMACPP_CMP_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_float.h"

#define LC_VOCAB 512
#define LC_N_MOE 3   // MoE blocks 1..3 (block 0 is dense; block 4 is the MTP block)
#define LC_TOPK 4
#define LC_MAX_POS 64
static const int lc_case_len[4] = {1, 7, 33, 64};
#define LC_TIGHT 1e-3f // float-rounding agreement

typedef struct lc_routes {
    int32_t ids[LC_N_MOE + 1][LC_MAX_POS][LC_TOPK]; // (block, pos, k), ascending
    int seen[LC_N_MOE + 1][LC_MAX_POS];
} lc_routes;

// What one case gave against llama.cpp's outputs.
typedef struct lc_result {
    int rows;             // positions of the case
    int rows_same_route;  // rows before the first position whose experts differ
    int rows_tight;       // leading rows (of those) within LC_TIGHT of llama.cpp
    float max_diff;       // max |Petrel - llama.cpp| over those rows
    float max_diff_all;   // ... over all rows
    int argmax_same;      // rows (all) with llama.cpp's argmax
    float max_dq;         // max |Petrel - llama.cpp on ggml's F32 dequantisation| over same-route rows
    float max_dq_llama;   // max |llama.cpp - llama.cpp dequantised| over the same rows
} lc_result;

static inline void lc_sort4(int32_t *v)
{
    for (int i = 1; i < LC_TOPK; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int32_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

static inline void lc_on_route(void *user, int layer, int32_t pos, const int32_t *ids, const float *w, int n)
{
    (void)w;
    lc_routes *r = user;
    if (layer < 1 || layer > LC_N_MOE || pos < 0 || pos >= LC_MAX_POS || n != LC_TOPK)
        return;
    memcpy(r->ids[layer][pos], ids, sizeof(int32_t) * LC_TOPK);
    lc_sort4(r->ids[layer][pos]);
    r->seen[layer][pos] = 1;
}

static inline float lc_row_diff(const float *a, const float *b) { return tu_max_abs_diff(a, b, LC_VOCAB); }

static inline int lc_argmax(const float *a)
{
    int best = 0;
    for (int i = 1; i < LC_VOCAB; i++)
        if (a[i] > a[best])
            best = i;
    return best;
}

// Reads a fixture file of llama.cpp's outputs (NULL if absent) and checks its length.
static inline void *lc_fixture(const char *dir, const char *label, int k, const char *ext, size_t want)
{
    char rel[256];
    snprintf(rel, sizeof rel, "llamacpp/%s/tiny-dsv3-%s.case%d.%s", dir, label, k, ext);
    char *path = tu_fixture(rel);
    size_t len = 0;
    void *p = tu_read(path, &len);
    if (p)
        cr_assert_eq(len, want, "%s: %zu bytes, expected %zu", path, len, want);
    free(path);
    return p;
}

// Opens a model with 2 threads (as llama.cpp's runs) and no usage file;
// NULL with the message in err when Petrel refuses it.
static inline petrel_model *lc_open(const char *path, char *err, size_t errlen)
{
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 2;
    mp.no_usage = true;
    return petrel_model_open(path, &mp, err, errlen);
}

// Runs golden case k through model m as one batch (a fresh context) and
// compares with llama.cpp's logits / routing / dequantised logits for LABEL.
static inline void lc_run_case(petrel_model *m, const char *label, int k, lc_result *r)
{
    const int n = lc_case_len[k];
    char name[64], err[1024];
    snprintf(name, sizeof name, "case%d_tokens.i32.bin", k);
    size_t nt;
    int32_t *tok = tu_golden_i32(name, &nt);
    cr_assert_eq((int)nt, n);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "%s: context: %s", label, err);
    lc_routes *rt = calloc(1, sizeof *rt);
    petrel_set_route_observer(c, lc_on_route, rt);
    cr_assert_eq(petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL), 0, "%s: %s", label, petrel_context_error(c));
    float *lg = malloc(sizeof(float) * (size_t)n * LC_VOCAB);
    for (int t = 0; t < n; t++)
        memcpy(lg + (size_t)t * LC_VOCAB, petrel_get_logits(c, t), sizeof(float) * LC_VOCAB);
    petrel_context_free(c);

    const size_t nl = (size_t)n * LC_VOCAB * sizeof(float);
    float *ref = lc_fixture("logits", label, k, "f32", nl);
    cr_assert(ref, "%s case %d: no llama.cpp logits in the fixtures", label, k);
    int32_t *ids = lc_fixture("routing", label, k, "ids.i32", (size_t)LC_N_MOE * n * LC_TOPK * sizeof(int32_t));
    cr_assert(ids, "%s case %d: no llama.cpp routing in the fixtures", label, k);
    float *dq = lc_fixture("logits_dequant", label, k, "f32", nl);

    // The first position where any MoE block picked other experts.
    int first = n;
    for (int t = 0; t < n && first == n; t++)
        for (int l = 0; l < LC_N_MOE; l++) {
            cr_assert(rt->seen[l + 1][t], "%s case %d: no routing seen for block %d pos %d", label, k, l + 1, t);
            int32_t want[LC_TOPK];
            memcpy(want, ids + ((size_t)l * n + t) * LC_TOPK, sizeof want);
            lc_sort4(want);
            if (memcmp(want, rt->ids[l + 1][t], sizeof want) != 0) {
                first = t;
                break;
            }
        }
    memset(r, 0, sizeof *r);
    r->rows = n;
    r->rows_same_route = first;
    bool tight = true;
    for (int t = 0; t < n; t++) {
        const float *a = lg + (size_t)t * LC_VOCAB, *b = ref + (size_t)t * LC_VOCAB;
        float d = lc_row_diff(a, b);
        tight = tight && t < first && d <= LC_TIGHT;
        r->rows_tight += tight;
        if (!(d <= r->max_diff_all))
            r->max_diff_all = d;
        if (t < first && !(d <= r->max_diff))
            r->max_diff = d;
        r->argmax_same += lc_argmax(a) == lc_argmax(b);
        if (dq && t < first) {
            const float *q = dq + (size_t)t * LC_VOCAB;
            float e = lc_row_diff(a, q), f = lc_row_diff(b, q);
            if (!(e <= r->max_dq))
                r->max_dq = e;
            if (!(f <= r->max_dq_llama))
                r->max_dq_llama = f;
        }
    }
    free(dq);
    free(ids);
    free(ref);
    free(lg);
    free(rt);
    free(tok);
}

// Writes an F32 copy of the GGUF at src to dst: same metadata (every
// record copied), same tensors in the same order, each dequantised row by
// row with Petrel's decoders (ggml's dequantize_row_*, bit for bit: the
// samples/ tests check that). This is what llama-quantize ... F32 made for
// logits_dequant/, so Petrel on the copy must give those logits.
static inline void lc_write_dequant_copy(const char *src, const char *dst)
{
    pt_err err = {{0}};
    gguf_file *g = gguf_open(src, &err);
    cr_assert(g, "%s", err.msg);
    gguf_writer *w = gguf_writer_new(32);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strncmp(g->kv[i].key, "split.", 6) != 0)
            gguf_w_copy_kv(w, &g->kv[i]);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        gguf_w_tensor(w, g->tensors[i].name, g->tensors[i].n_dims, g->tensors[i].ne, PT_F32);
    uint64_t hl;
    void *h = gguf_writer_header(w, &hl);
    cr_assert(h);
    int fd = open(dst, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    cr_assert(fd >= 0, "cannot create %s", dst);
    cr_assert_eq(pwrite(fd, h, hl, 0), (ssize_t)hl);
    free(h);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        const uint64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
        void *raw = malloc(t->size);
        float *f = malloc(sizeof(float) * cols * rows);
        cr_assert(raw && f);
        cr_assert_eq(gguf_read(g, t->offset, raw, t->size, &err), 0, "%s", err.msg);
        const size_t rb = (size_t)(t->size / rows);
        for (uint64_t r = 0; r < rows; r++) {
            if (t->type == PT_F32)
                memcpy(f + r * cols, (const char *)raw + r * rb, rb);
            else
                pt_dequantize_row((pt_dtype)t->type, (const char *)raw + r * rb, f + r * cols, (int64_t)cols);
        }
        const uint64_t sz = gguf_writer_tensor_size(w, (int)i);
        cr_assert_eq(sz, sizeof(float) * cols * rows);
        cr_assert_eq(pwrite(fd, f, sz, (off_t)gguf_writer_tensor_offset(w, (int)i)), (ssize_t)sz);
        free(raw);
        free(f);
    }
    cr_assert_eq(ftruncate(fd, (off_t)gguf_writer_total_size(w)), 0);
    close(fd);
    gguf_writer_free(w);
    gguf_close(g);
}

// Petrel on the F32 dequantised copy of a file against llama.cpp's
// logits_dequant/ for LABEL: every row of the 4 cases (no activation
// quantisation on either side, so no routing flips are expected; the
// first routing difference, against the quantised run's routing, is not
// the right cut here). Returns the max abs diff over all 105 rows.
static inline float lc_dequant_max_diff(petrel_model *m, const char *label, int *argmax_same)
{
    float worst = 0;
    *argmax_same = 0;
    for (int k = 0; k < 4; k++) {
        const int n = lc_case_len[k];
        char name[64], err[1024];
        snprintf(name, sizeof name, "case%d_tokens.i32.bin", k);
        size_t nt;
        int32_t *tok = tu_golden_i32(name, &nt);
        petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
        cr_assert(c, "%s: context: %s", label, err);
        cr_assert_eq(petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
        float *dq = lc_fixture("logits_dequant", label, k, "f32", (size_t)n * LC_VOCAB * sizeof(float));
        cr_assert(dq, "%s case %d: no logits_dequant fixture", label, k);
        for (int t = 0; t < n; t++) {
            const float *a = petrel_get_logits(c, t), *b = dq + (size_t)t * LC_VOCAB;
            float d = lc_row_diff(a, b);
            if (!(d <= worst))
                worst = d;
            *argmax_same += lc_argmax(a) == lc_argmax(b);
        }
        free(dq);
        free(tok);
        petrel_context_free(c);
    }
    return worst;
}

#endif

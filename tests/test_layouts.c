// tests/test_layouts.c — llama.cpp's other deepseek2 layouts. The legacy one:
// blk.N.attn_kv_b.weight {kv_lora, H*(nope+v)} per block instead of
// attn_k_b + attn_v_b, and the pre-MLA head keys (key_length = nope+rope,
// value_length = v, no *_mla keys, head_count_kv = H), as
// convert_hf_to_gguf.py wrote DeepSeek files before the MLA split.
//
// The variant is made here from tiny-dsv3's F32 conversion by composing
// kv_b from k_b and v_b exactly as the converter decomposes HF's
// kv_b_proj (per head: nope k rows, k_b[h] transposed, then v rows), and
// must give the logits of the original (the same floats, moved).
//
// The fused one (convert_hf_to_gguf.py --fuse-gate-up-exps): per MoE block
// one ffn_gate_up_exps {n_embd, 2*n_ff_exp, n_expert} (expert e: its gate
// rows, then its up rows) instead of ffn_gate_exps + ffn_up_exps.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_float.h"
#include "tests/testutil/tu_gguf.h"

#define VOCAB 512

static uint32_t key_u32(const gguf_file *g, const char *key)
{
    uint32_t v = 0;
    pt_err err;
    cr_assert_eq(gguf_get_u32(g, key, &v, &err), 0, "%s", err.msg);
    return v;
}

// The legacy variant's dimensions (write_legacy) and kv_b's stored type.
typedef struct legacy_dims {
    uint32_t H, kvl, nope, vd;
    pt_dtype type;
} legacy_dims;

// tu_gguf_make_fn of write_legacy: block -src-1's kv_b composed from its
// k_b and v_b (per head: nope k rows, k_b[h] transposed, then v rows).
static void make_kv_b(void *user, const gguf_file *g, int j, int src, void *out, uint64_t sz)
{
    (void)j;
    (void)sz;
    const legacy_dims *d = user;
    const uint32_t H = d->H, kvl = d->kvl, nope = d->nope, vd = d->vd;
    pt_err err = {{0}};
    char kn[64], vn[64];
    snprintf(kn, sizeof kn, "blk.%d.attn_k_b.weight", -src - 1);
    snprintf(vn, sizeof vn, "blk.%d.attn_v_b.weight", -src - 1);
    const gguf_tensor *kt = gguf_find_tensor(g, kn), *vt = gguf_find_tensor(g, vn);
    cr_assert(kt && vt && kt->type == PT_F32 && vt->type == PT_F32);
    float *kb = malloc(kt->size), *vb = malloc(vt->size);
    cr_assert_eq(gguf_read(g, kt->offset, kb, kt->size, &err), 0);
    cr_assert_eq(gguf_read(g, vt->offset, vb, vt->size, &err), 0);
    // k_b: ne {nope, kvl, H}, element (j, c, h); v_b: ne {kvl, vd, H}, element (c, i, h).
    float *kv = malloc(sizeof(float) * (size_t)H * (nope + vd) * kvl);
    for (uint32_t hh = 0; hh < H; hh++) {
        for (uint32_t jj = 0; jj < nope; jj++)
            for (uint32_t c = 0; c < kvl; c++)
                kv[((size_t)hh * (nope + vd) + jj) * kvl + c] = kb[((size_t)hh * kvl + c) * nope + jj];
        for (uint32_t i = 0; i < vd; i++)
            memcpy(kv + ((size_t)hh * (nope + vd) + nope + i) * kvl, vb + ((size_t)hh * vd + i) * kvl,
                   sizeof(float) * kvl);
    }
    const size_t rb = pt_row_bytes(d->type, kvl);
    for (size_t r = 0; r < (size_t)H * (nope + vd); r++) {
        if (d->type == PT_F32)
            memcpy((char *)out + r * rb, kv + r * kvl, rb);
        else
            pt_quantize_row(d->type, kv + r * kvl, (char *)out + r * rb, kvl);
    }
    free(kb);
    free(vb);
    free(kv);
}

// Writes the legacy variant of the F32 model at src to dst; kv_b stored as
// `type` (F32, or a block type quantised from the composed F32 rows).
static void write_legacy(const char *src, const char *dst, pt_dtype type)
{
    pt_err err = {{0}};
    gguf_file *g = gguf_open(src, &err);
    cr_assert(g, "%s", err.msg);
    const uint32_t H = key_u32(g, "deepseek2.attention.head_count");
    const uint32_t kvl = key_u32(g, "deepseek2.attention.kv_lora_rank");
    const uint32_t rope = key_u32(g, "deepseek2.rope.dimension_count");
    const uint32_t nope = key_u32(g, "deepseek2.attention.key_length_mla") - rope;
    const uint32_t vd = key_u32(g, "deepseek2.attention.value_length_mla");
    gguf_writer *w = gguf_writer_new(32);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (!strcmp(kv->key, "deepseek2.attention.key_length_mla") ||
            !strcmp(kv->key, "deepseek2.attention.value_length_mla") || !strcmp(kv->key, "general.alignment"))
            continue;
        if (!strcmp(kv->key, "deepseek2.attention.key_length"))
            gguf_w_u32(w, kv->key, nope + rope);
        else if (!strcmp(kv->key, "deepseek2.attention.value_length"))
            gguf_w_u32(w, kv->key, vd);
        else if (!strcmp(kv->key, "deepseek2.attention.head_count_kv"))
            gguf_w_u32(w, kv->key, H);
        else
            gguf_w_copy_kv(w, kv);
    }
    // Tensor list: k_b replaced by kv_b, v_b dropped. src_of[j]: the source
    // tensor, or -(block+1) for a composed kv_b.
    int src_of[1024], n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        unsigned il;
        int end = 0;
        if (sscanf(t->name, "blk.%u.attn_v_b.weight%n", &il, &end) == 1 && !t->name[end])
            continue;
        if (sscanf(t->name, "blk.%u.attn_k_b.weight%n", &il, &end) == 1 && !t->name[end]) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.attn_kv_b.weight", il);
            gguf_w_tensor(w, name, 2, (uint64_t[]){kvl, (uint64_t)H * (nope + vd)}, type);
            src_of[n++] = -(int)il - 1;
            continue;
        }
        gguf_w_tensor(w, t->name, t->n_dims, t->ne, t->type);
        src_of[n++] = (int)i;
    }
    legacy_dims d = {.H = H, .kvl = kvl, .nope = nope, .vd = vd, .type = type};
    tu_gguf_write(dst, w, g, src_of, n, make_kv_b, &d);
    gguf_writer_free(w);
    gguf_close(g);
}

// Logits of golden case k as one batch, and the MTP logits after it.
static void run(petrel_model *m, int k, float **logits, float **mtp, int *n_out)
{
    char name[64], err[1024];
    snprintf(name, sizeof name, "case%d_tokens.i32.bin", k);
    size_t n;
    int32_t *tok = tu_golden_i32(name, &n);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "%s", err);
    cr_assert_eq(petrel_decode(c, tok, NULL, (int)n, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    *logits = malloc(sizeof(float) * n * VOCAB);
    for (size_t t = 0; t < n; t++)
        memcpy(*logits + t * VOCAB, petrel_get_logits(c, (int)t), sizeof(float) * VOCAB);
    *mtp = NULL;
    if (n > 1) {
        int bi[64];
        for (size_t t = 0; t + 1 < n; t++)
            bi[t] = (int)t;
        cr_assert_eq(petrel_decode_mtp(c, bi, tok + 1, (int)n - 1), 0, "%s", petrel_context_error(c));
        *mtp = malloc(sizeof(float) * (n - 1) * VOCAB);
        for (size_t t = 0; t + 1 < n; t++)
            memcpy(*mtp + t * VOCAB, petrel_get_mtp_logits(c, (int)t), sizeof(float) * VOCAB);
    }
    *n_out = (int)n;
    petrel_context_free(c);
    free(tok);
}

static petrel_model *open_model(const char *path)
{
    char err[1024] = "";
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 2;
    mp.no_usage = true;
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "%s: %s", path, err);
    return m;
}

Test(layouts, f32_variant_gives_the_original_logits)
{
    char *orig = tu_tiny_model("f32");
    char *dir = tu_tmpdir("kvb");
    char path[1024];
    snprintf(path, sizeof path, "%s/legacy.gguf", dir);
    write_legacy(orig, path, PT_F32);
    petrel_model *a = open_model(orig), *b = open_model(path);
    for (int il = 0; il < 5; il++)
        cr_expect(b->layers[il].kv_b_legacy && !a->layers[il].kv_b_legacy);
    for (int k = 0; k < 4; k++) {
        float *la, *ma, *lb, *mb;
        int n;
        run(a, k, &la, &ma, &n);
        run(b, k, &lb, &mb, &n);
        float d = tu_max_abs_diff(la, lb, (size_t)n * VOCAB);
        cr_expect(d <= 1e-5f, "case %d: logits differ by %g", k, d);
        if (ma) {
            d = tu_max_abs_diff(ma, mb, (size_t)(n - 1) * VOCAB);
            cr_expect(d <= 1e-5f, "case %d: MTP logits differ by %g", k, d);
        }
        free(la);
        free(lb);
        free(ma);
        free(mb);
    }
    petrel_model_close(a);
    petrel_model_close(b);
    tu_rmrf(dir);
    free(dir);
    free(orig);
}

// A quantised kv_b (Q8_0): v_b keeps its stored rows (bytes equal to
// kv_b's v rows), k_b holds the k rows dequantised and transposed.
Test(layouts, quantised_kv_b_is_split_exactly)
{
    char *orig = tu_tiny_model("f32");
    char *dir = tu_tmpdir("kvb");
    char path[1024];
    snprintf(path, sizeof path, "%s/legacy-q8.gguf", dir);
    write_legacy(orig, path, PT_Q8_0);
    petrel_model *m = open_model(path);
    const pt_hparams *hp = &m->hp;
    const int64_t H = hp->n_head, nope = hp->qk_nope, vd = hp->v_head, kvl = hp->kv_lora_rank;
    const gguf_tensor *t = gguf_find_tensor(m->gguf, "blk.2.attn_kv_b.weight");
    cr_assert(t && t->type == PT_Q8_0);
    unsigned char *raw = malloc(t->size);
    pt_err err;
    cr_assert_eq(gguf_read(m->gguf, t->offset, raw, t->size, &err), 0);
    const size_t rb = pt_row_bytes(PT_Q8_0, (uint64_t)kvl);
    const pt_layer *L = &m->layers[2];
    cr_assert_eq(L->v_b.type, PT_Q8_0);
    cr_assert_eq(L->k_b.type, PT_F32);
    cr_assert(L->v_b.rows == H * vd && L->v_b.cols == kvl && L->k_b.rows == H * kvl && L->k_b.cols == nope);
    float *row = malloc(sizeof(float) * (size_t)kvl);
    for (int64_t h = 0; h < H; h++) {
        for (int64_t i = 0; i < vd; i++)
            cr_expect(memcmp((const char *)L->v_b.data + (size_t)(h * vd + i) * rb,
                             raw + (size_t)(h * (nope + vd) + nope + i) * rb, rb) == 0, "v_b head %ld row %ld",
                      (long)h, (long)i);
        for (int64_t j = 0; j < nope; j++) {
            // Q8_0 by hand: value = fp16 d * int8 q (kernels/quant.h's layout).
            const unsigned char *src = raw + (size_t)(h * (nope + vd) + j) * rb;
            for (int64_t c = 0; c < kvl; c++) {
                const block_q8_0 *b = (const block_q8_0 *)src + c / 32;
                row[c] = pt_fp16_to_f32(b->d) * (float)b->qs[c % 32];
            }
            const float *kf = L->k_b.data;
            for (int64_t c = 0; c < kvl; c++)
                cr_expect_eq(kf[(size_t)((h * kvl + c) * nope + j)], row[c], "k_b head %ld (%ld, %ld)", (long)h,
                             (long)c, (long)j);
        }
    }
    free(row);
    free(raw);
    // And it runs: finite logits.
    float *lg, *mtp;
    int n;
    run(m, 1, &lg, &mtp, &n);
    for (int i = 0; i < n * VOCAB; i++)
        cr_assert(isfinite(lg[i]));
    free(lg);
    free(mtp);
    petrel_model_close(m);
    tu_rmrf(dir);
    free(dir);
    free(orig);
}

// Both layouts in one block are refused, naming the tensors.
Test(layouts, both_layouts_refused)
{
    char *orig = tu_tiny_model("f32");
    char *dir = tu_tmpdir("kvb");
    char path[1024];
    snprintf(path, sizeof path, "%s/both.gguf", dir);
    // The original plus one legacy kv_b of the right shape.
    pt_err err = {{0}};
    gguf_file *g = gguf_open(orig, &err);
    cr_assert(g);
    gguf_writer *w = gguf_writer_new(32);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, "general.alignment"))
            gguf_w_copy_kv(w, &g->kv[i]);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        gguf_w_tensor(w, g->tensors[i].name, g->tensors[i].n_dims, g->tensors[i].ne, g->tensors[i].type);
    const uint64_t ne[2] = {160, 4 * (32 + 32)};
    gguf_w_tensor(w, "blk.1.attn_kv_b.weight", 2, ne, PT_F32);
    tu_gguf_write(path, w, g, NULL, (int)g->n_tensors + 1, NULL, NULL); // the extra kv_b: zeros
    gguf_writer_free(w);
    gguf_close(g);
    char msg[1024] = "";
    petrel_model *m = petrel_model_open(path, NULL, msg, sizeof msg);
    cr_expect_null(m);
    cr_expect(strstr(msg, "blk.1.attn_kv_b.weight") && strstr(msg, "blk.1.attn_k_b.weight"), "%s", msg);
    tu_rmrf(dir);
    free(dir);
    free(orig);
}

// tu_gguf_make_fn of write_fused: block -src-1's ffn_gate_up_exps, expert
// e's gate rows then its up rows.
static void make_gate_up(void *user, const gguf_file *g, int j, int src, void *buf, uint64_t sz)
{
    (void)user;
    (void)j;
    (void)sz;
    unsigned char *out = buf;
    pt_err err = {{0}};
    char gn[64], un[64];
    snprintf(gn, sizeof gn, "blk.%d.ffn_gate_exps.weight", -src - 1);
    snprintf(un, sizeof un, "blk.%d.ffn_up_exps.weight", -src - 1);
    const gguf_tensor *gt = gguf_find_tensor(g, gn), *ut = gguf_find_tensor(g, un);
    cr_assert(gt && ut && gt->size == ut->size && gt->type == ut->type);
    const uint64_t X = gt->ne[2], per = gt->size / X; // one expert's gate (or up) bytes
    for (uint64_t e = 0; e < X; e++) {
        cr_assert_eq(gguf_read(g, gt->offset + e * per, out + 2 * e * per, per, &err), 0);
        cr_assert_eq(gguf_read(g, ut->offset + e * per, out + (2 * e + 1) * per, per, &err), 0);
    }
}

// Writes the fused variant of the model at src (any types) to dst.
static void write_fused(const char *src, const char *dst)
{
    pt_err err = {{0}};
    gguf_file *g = gguf_open(src, &err);
    cr_assert(g, "%s", err.msg);
    gguf_writer *w = gguf_writer_new(32);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, "general.alignment"))
            gguf_w_copy_kv(w, &g->kv[i]);
    int src_of[1024], n = 0; // source tensor, or -(block+1) for a fused one
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        unsigned il;
        int end = 0;
        if (sscanf(t->name, "blk.%u.ffn_up_exps.weight%n", &il, &end) == 1 && !t->name[end])
            continue;
        end = 0;
        if (sscanf(t->name, "blk.%u.ffn_gate_exps.weight%n", &il, &end) == 1 && !t->name[end]) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.ffn_gate_up_exps.weight", il);
            gguf_w_tensor(w, name, 3, (uint64_t[]){t->ne[0], 2 * t->ne[1], t->ne[2]}, t->type);
            src_of[n++] = -(int)il - 1;
            continue;
        }
        gguf_w_tensor(w, t->name, t->n_dims, t->ne, t->type);
        src_of[n++] = (int)i;
    }
    tu_gguf_write(dst, w, g, src_of, n, make_gate_up, NULL);
    gguf_writer_free(w);
    gguf_close(g);
}

// The fused variant gives the original's logits bit for bit (the same
// experts read from other offsets), with a roomy and with a one-slot cache.
Test(layouts, fused_gate_up_exps_gives_the_original_logits)
{
    char *orig = tu_tiny_model("q8_0");
    char *dir = tu_tmpdir("fused");
    char path[1024];
    snprintf(path, sizeof path, "%s/fused.gguf", dir);
    write_fused(orig, path);
    petrel_model *a = open_model(orig), *b = open_model(path);
    for (int il = 1; il < 5; il++)
        cr_expect(b->layers[il].gate_up_fused && !a->layers[il].gate_up_fused);
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 2;
    mp.no_usage = true;
    mp.experts_per_layer = 1;
    petrel_model *c = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(c, "%s", err);
    for (int k = 0; k < 4; k++) {
        float *la, *ma, *lb, *mb, *lc, *mc;
        int n;
        run(a, k, &la, &ma, &n);
        run(b, k, &lb, &mb, &n);
        run(c, k, &lc, &mc, &n);
        cr_expect(memcmp(la, lb, sizeof(float) * (size_t)n * VOCAB) == 0, "case %d: logits differ", k);
        cr_expect(memcmp(la, lc, sizeof(float) * (size_t)n * VOCAB) == 0, "case %d: logits differ (1 slot)", k);
        if (ma)
            cr_expect(memcmp(ma, mb, sizeof(float) * (size_t)(n - 1) * VOCAB) == 0, "case %d: MTP differs", k);
        free(la);
        free(lb);
        free(lc);
        free(ma);
        free(mb);
        free(mc);
    }
    petrel_model_close(a);
    petrel_model_close(b);
    petrel_model_close(c);
    tu_rmrf(dir);
    free(dir);
    free(orig);
}

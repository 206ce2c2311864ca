// tests/test_gguf.c — GGUF writer/reader round trip, byte layout against a
// hand-assembled reference, hparams metadata round trip, tensor list, and
// rejection of malformed files.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/hparams.h"
#include "format/tensors.h"
#include "kernels/quant.h"
#include "tests/testutil.h"

// ---- a hand-written GGUF byte builder (the independent reference) ----------
typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;
static void bb_put(bb *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void bb_u32(bb *b, uint32_t v) { bb_put(b, &v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_put(b, &v, 8); }
static void bb_str(bb *b, const char *s) { bb_u64(b, strlen(s)); bb_put(b, s, strlen(s)); }
static void bb_pad(bb *b, size_t a) { while (b->n % a) { uint8_t z = 0; bb_put(b, &z, 1); } }

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

// Reference file: 2 keys, 2 tensors (f32 {3,2} and q8_0 {32}), alignment 64.
static bb reference_file(uint64_t off1_override, uint32_t type1_override)
{
    bb b = {0};
    bb_put(&b, "GGUF", 4);
    bb_u32(&b, 3);
    bb_u64(&b, 2); // tensors
    bb_u64(&b, 2); // kv
    bb_str(&b, "general.alignment"); bb_u32(&b, GGUF_UINT32); bb_u32(&b, 64);
    bb_str(&b, "x.name"); bb_u32(&b, GGUF_STRING); bb_str(&b, "hello");
    bb_str(&b, "a"); bb_u32(&b, 2); bb_u64(&b, 3); bb_u64(&b, 2); bb_u32(&b, PT_F32); bb_u64(&b, 0);
    bb_str(&b, "b"); bb_u32(&b, 1); bb_u64(&b, 32); bb_u32(&b, type1_override); bb_u64(&b, off1_override);
    bb_pad(&b, 64);
    float a[6] = {1, 2, 3, 4, 5, 6};
    bb_put(&b, a, sizeof a);
    bb_pad(&b, 64);
    uint8_t q[34];
    for (int i = 0; i < 34; i++)
        q[i] = (uint8_t)i;
    bb_put(&b, q, 34);
    bb_pad(&b, 64);
    return b;
}

Test(gguf, writer_matches_hand_assembled_bytes)
{
    gguf_writer *w = gguf_writer_new(64);
    gguf_w_u32(w, "general.alignment", 64);
    gguf_w_str(w, "x.name", "hello");
    int ia = gguf_w_tensor(w, "a", 2, (uint64_t[]){3, 2}, PT_F32);
    int ib = gguf_w_tensor(w, "b", 1, (uint64_t[]){32}, PT_Q8_0);
    bb ref = reference_file(64, PT_Q8_0);
    uint64_t hlen;
    uint8_t *h = gguf_writer_header(w, &hlen);
    cr_assert_not_null(h);
    cr_assert_eq(gguf_writer_header_size(w), hlen);
    cr_assert_eq(gguf_writer_tensor_offset(w, ia), hlen);
    cr_assert_eq(gguf_writer_tensor_offset(w, ib), hlen + 64);
    cr_assert_eq(gguf_writer_tensor_size(w, ib), 34);
    cr_assert_eq(gguf_writer_total_size(w), ref.n);
    cr_assert(memcmp(h, ref.p, hlen) == 0, "header bytes differ from the hand-assembled reference");
    free(h);
    gguf_writer_free(w);
    free(ref.p);
}

Test(gguf, reader_parses_reference)
{
    char *dir = tu_tmpdir("gguf");
    char path[512];
    snprintf(path, sizeof path, "%s/ref.gguf", dir);
    bb ref = reference_file(64, PT_Q8_0);
    write_bytes(path, ref.p, ref.n);
    pt_err err = {0};
    gguf_file *g = gguf_open(path, &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_eq(g->version, 3);
    cr_assert_eq(g->alignment, 64);
    cr_assert_eq(g->n_tensors, 2);
    cr_assert_str_eq(gguf_get_str(g, "x.name", &err), "hello");
    uint32_t al;
    cr_assert_eq(gguf_get_u32(g, "general.alignment", &al, &err), 0);
    cr_assert_eq(al, 64);
    // Type mismatch and missing keys name the key.
    float f;
    cr_assert_eq(gguf_get_f32(g, "general.alignment", &f, &err), -1);
    cr_assert(strstr(err.msg, "general.alignment"));
    cr_assert_eq(gguf_get_u32(g, "nope", &al, &err), -1);
    cr_assert(strstr(err.msg, "nope"));
    const gguf_tensor *a = gguf_find_tensor(g, "a"), *b = gguf_find_tensor(g, "b");
    cr_assert(a && b);
    cr_assert_eq(a->offset % 64, 0);
    cr_assert_eq(a->size, 24);
    cr_assert_eq(b->size, 34);
    cr_assert_eq(b->offset, a->offset + 64);
    float av[6];
    cr_assert_eq(gguf_read(g, a->offset, av, sizeof av, &err), 0);
    cr_assert_eq(av[5], 6.0f);
    uint8_t bv[34];
    cr_assert_eq(gguf_read(g, b->offset, bv, 34, &err), 0);
    cr_assert_eq(bv[33], 33);
    gguf_close(g);
    free(ref.p);
    tu_rmrf(dir);
    free(dir);
}

static void expect_reject(const void *p, size_t n, const char *needle)
{
    char *dir = tu_tmpdir("gguf");
    char path[512];
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    write_bytes(path, p, n);
    pt_err err = {0};
    gguf_file *g = gguf_open(path, &err);
    cr_assert_null(g, "accepted a bad file (expected '%s')", needle);
    cr_assert(strstr(err.msg, path), "error does not name the file: %s", err.msg);
    cr_assert(strstr(err.msg, needle), "error '%s' lacks '%s'", err.msg, needle);
    tu_rmrf(dir);
    free(dir);
}

Test(gguf, rejects_malformed)
{
    bb ok = reference_file(64, PT_Q8_0);
    // Truncated inside the header, and inside the data of tensor 'b'.
    expect_reject(ok.p, 60, "truncated");
    expect_reject(ok.p, ok.n - 64, "'b'");
    // Bad magic, bad version.
    uint8_t *c = malloc(ok.n);
    memcpy(c, ok.p, ok.n);
    c[0] = 'X';
    expect_reject(c, ok.n, "magic");
    memcpy(c, ok.p, ok.n);
    c[4] = 9;
    expect_reject(c, ok.n, "version");
    free(c);
    // Misaligned offset, overlapping tensors, unknown type, out of range.
    bb m = reference_file(8, PT_Q8_0);
    expect_reject(m.p, m.n, "aligned");
    free(m.p);
    bb o = reference_file(0, PT_Q8_0);
    expect_reject(o.p, o.n, "overlaps");
    free(o.p);
    bb t = reference_file(64, 77);
    expect_reject(t.p, t.n, "type");
    free(t.p);
    bb r = reference_file(1u << 20, PT_Q8_0);
    expect_reject(r.p, r.n, "past end");
    free(r.p);
    free(ok.p);
}

// A DeepSeek-V3-like hparams set with small sizes.
static pt_hparams small_hp(void)
{
    pt_hparams hp = {
        .n_vocab = 512, .n_embd = 256, .n_layer = 4, .n_nextn = 1, .n_ctx_train = 256, .n_head = 4,
        .q_lora_rank = 192, .kv_lora_rank = 160, .qk_nope = 32, .qk_rope = 16, .v_head = 32, .n_ff = 512,
        .n_ff_exp = 128, .n_expert = 16, .n_expert_used = 4, .n_expert_shared = 1, .n_dense_lead = 1,
        .n_group = 4, .topk_group = 2, .gating = 2, .norm_topk = true, .routed_scale = 2.5f, .rms_eps = 1e-6f,
        .rope_theta = 10000.0f, .yarn = true, .yarn_factor = 4, .yarn_orig_ctx = 64, .yarn_beta_fast = 32,
        .yarn_beta_slow = 1, .yarn_mscale = 0.75f, .yarn_mscale_all_dim = 0.5f, .bos_id = 0, .n_eos = 2,
        .eos_ids = {1, 7},
    };
    return hp;
}

Test(gguf, hparams_round_trip_and_key_types)
{
    pt_hparams hp = small_hp();
    pt_err err = {0};
    cr_assert_eq(pt_hparams_validate(&hp, "t", &err), 0, "%s", err.msg);
    gguf_writer *w = gguf_writer_new(4096);
    gguf_w_str(w, "general.architecture", "deepseek2");
    gguf_w_u32(w, "general.alignment", 4096);
    pt_hparams_to_gguf(&hp, w, 0);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 0);
    pt_tensor_spec *specs;
    int n = pt_tensor_specs(&hp, &specs);
    cr_assert_gt(n, 0);
    for (int i = 0; i < n; i++)
        if (!specs[i].optional)
            gguf_w_tensor(w, specs[i].name, specs[i].n_dims, specs[i].ne, PT_F32);
    uint64_t hlen;
    void *h = gguf_writer_header(w, &hlen);
    char *dir = tu_tmpdir("gguf");
    char path[512];
    snprintf(path, sizeof path, "%s/hp.gguf", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    cr_assert_eq(pwrite(fd, h, hlen, 0), (ssize_t)hlen);
    cr_assert_eq(ftruncate(fd, (off_t)gguf_writer_total_size(w)), 0);
    close(fd);
    free(h);
    gguf_writer_free(w);

    gguf_file *g = gguf_open(path, &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_eq(g->alignment, 4096);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        cr_assert_eq(g->tensors[i].offset % 4096, 0);
    // Exact types as llama.cpp requires.
    cr_assert_eq(gguf_get(g, "deepseek2.block_count")->type, GGUF_UINT32);
    cr_assert_eq(gguf_get(g, "deepseek2.block_count")->v.u32, 5);
    cr_assert_eq(gguf_get(g, "deepseek2.expert_weights_norm")->type, GGUF_BOOL);
    cr_assert_eq(gguf_get(g, "deepseek2.rope.scaling.yarn_log_multiplier")->type, GGUF_FLOAT32);
    cr_assert_float_eq(gguf_get(g, "deepseek2.rope.scaling.yarn_log_multiplier")->v.f32, 0.05f, 1e-7);
    cr_assert_eq(gguf_get(g, "deepseek2.attention.key_length")->v.u32, 160 + 16);
    cr_assert_eq(gguf_get(g, "deepseek2.attention.value_length")->v.u32, 160);
    cr_assert_eq(gguf_get(g, "deepseek2.attention.key_length_mla")->v.u32, 48);
    cr_assert_eq(gguf_get(g, "deepseek2.attention.head_count_kv")->v.u32, 1);
    cr_assert_eq(gguf_get(g, "deepseek2.expert_gating_func")->v.u32, 2);
    cr_assert_eq(gguf_get(g, "petrel.eos_token_ids")->arr_type, GGUF_INT32);

    pt_hparams back;
    cr_assert_eq(pt_hparams_from_gguf(g, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.n_layer, 4);
    cr_assert_eq(back.n_nextn, 1);
    cr_assert_eq(back.qk_nope, 32);
    cr_assert_eq(back.v_head, 32);
    cr_assert_eq(back.q_lora_rank, 192);
    cr_assert_eq(back.n_group, 4);
    cr_assert_eq(back.topk_group, 2);
    cr_assert(back.yarn && back.norm_topk);
    cr_assert_eq(back.yarn_mscale, 0.75f);
    cr_assert_eq(back.yarn_mscale_all_dim, 0.5f);
    cr_assert_eq(back.n_eos, 2);
    cr_assert_eq(back.eos_ids[1], 7);
    cr_assert_eq(back.bos_id, 0);
    cr_assert_eq(memcmp(&back.n_vocab, &hp.n_vocab, offsetof(pt_hparams, gating) - offsetof(pt_hparams, n_vocab)),
                 0);
    // KV bytes per token: (4 + 1) x (160 + 16) x 4.
    cr_assert_eq(pt_hparams_kv_bytes_per_token(&back, 4), 5u * 176 * 4);
    gguf_close(g);
    free(specs);
    tu_rmrf(dir);
    free(dir);
}

Test(gguf, tensor_specs_follow_contract)
{
    pt_hparams hp = small_hp();
    pt_tensor_spec *s;
    int n = pt_tensor_specs(&hp, &s);
    const pt_tensor_spec *kb = NULL, *vb = NULL, *gx = NULL, *dx = NULL, *eh = NULL, *shn = NULL, *emb = NULL;
    int n_exps = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(s[i].name, "blk.1.attn_k_b.weight")) kb = &s[i];
        if (!strcmp(s[i].name, "blk.1.attn_v_b.weight")) vb = &s[i];
        if (!strcmp(s[i].name, "blk.2.ffn_gate_exps.weight")) gx = &s[i];
        if (!strcmp(s[i].name, "blk.2.ffn_down_exps.weight")) dx = &s[i];
        if (!strcmp(s[i].name, "blk.4.nextn.eh_proj.weight")) eh = &s[i];
        if (!strcmp(s[i].name, "blk.4.nextn.shared_head_norm.weight")) shn = &s[i];
        if (!strcmp(s[i].name, "blk.4.nextn.embed_tokens.weight")) emb = &s[i];
        if (s[i].role == PT_ROLE_EXPERTS) n_exps++;
        cr_assert(strcmp(s[i].name, "blk.0.ffn_gate_inp.weight") != 0, "dense block has a router");
    }
    cr_assert(kb && vb && gx && dx && eh && shn && emb);
    cr_assert(kb->ne[0] == 32 && kb->ne[1] == 160 && kb->ne[2] == 4);
    cr_assert(vb->ne[0] == 160 && vb->ne[1] == 32 && vb->ne[2] == 4);
    cr_assert(gx->ne[0] == 256 && gx->ne[1] == 128 && gx->ne[2] == 16);
    cr_assert(dx->ne[0] == 128 && dx->ne[1] == 256 && dx->ne[2] == 16);
    cr_assert(eh->ne[0] == 512 && eh->ne[1] == 256);
    cr_assert(!shn->optional && emb->optional);
    cr_assert_eq(n_exps, 3 * 4); // MoE blocks 1,2,3 and MTP block 4
    free(s);
}

// Writes a header-only GGUF (no tensors) built by fill() and opens it.
static gguf_file *open_meta(const char *dir, void (*fill)(gguf_writer *), pt_err *err)
{
    gguf_writer *w = gguf_writer_new(32);
    fill(w);
    uint64_t hlen;
    void *h = gguf_writer_header(w, &hlen);
    char path[512];
    snprintf(path, sizeof path, "%s/meta.gguf", dir);
    write_bytes(path, h, hlen);
    free(h);
    gguf_writer_free(w);
    return gguf_open(path, err);
}

// What another tool might write: legacy MLA keys (no *_mla), no petrel.*
// keys, no gating/group keys, per-layer FFN length arrays, i32 token ids.
static void fill_foreign(gguf_writer *w)
{
    gguf_w_str(w, "general.architecture", "deepseek2");
    gguf_w_u32(w, "deepseek2.block_count", 3);
    gguf_w_u32(w, "deepseek2.context_length", 4096);
    gguf_w_u32(w, "deepseek2.embedding_length", 64);
    gguf_w_u32(w, "deepseek2.attention.head_count", 2);
    gguf_w_u32(w, "deepseek2.attention.kv_lora_rank", 32);
    gguf_w_f32(w, "deepseek2.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_w_u32(w, "deepseek2.attention.key_length", 48);   // nope 32 + rope 16
    gguf_w_u32(w, "deepseek2.attention.value_length", 32);
    gguf_w_u32(w, "deepseek2.rope.dimension_count", 16);
    uint32_t ffe[3] = {0, 96, 96}, ff[3] = {128, 0, 0};
    gguf_w_arr_u32(w, "deepseek2.expert_feed_forward_length", ffe, 3);
    gguf_w_arr_u32(w, "deepseek2.feed_forward_length", ff, 3);
    gguf_w_u32(w, "deepseek2.leading_dense_block_count", 1);
    gguf_w_u32(w, "deepseek2.expert_count", 8);
    gguf_w_u32(w, "deepseek2.expert_used_count", 2);
    gguf_w_u32(w, "deepseek2.expert_shared_count", 1);
    gguf_w_str(w, "deepseek2.rope.scaling.type", "yarn");
    gguf_w_f32(w, "deepseek2.rope.scaling.factor", 4.0f);
    gguf_w_u32(w, "deepseek2.rope.scaling.original_context_length", 1024);
    gguf_w_f32(w, "deepseek2.rope.scaling.yarn_log_multiplier", 0.0707f);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    const char *toks[5] = {"a", "b", "c", "d", "e"};
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    gguf_w_i32(w, "tokenizer.ggml.eos_token_id", 4);
}

static void fill_bad_type(gguf_writer *w)
{
    fill_foreign(w);
    gguf_w_i32(w, "deepseek2.nextn_predict_layers", 1); // must be u32
}

Test(gguf, hparams_from_foreign_files)
{
    char *dir = tu_tmpdir("gguf");
    pt_err err = {0};
    gguf_file *g = open_meta(dir, fill_foreign, &err);
    cr_assert_not_null(g, "%s", err.msg);
    pt_hparams hp;
    cr_assert_eq(pt_hparams_from_gguf(g, &hp, &err), 0, "%s", err.msg);
    cr_assert_eq(hp.n_layer, 3);
    cr_assert_eq(hp.n_nextn, 0);
    cr_assert_eq(hp.qk_nope, 32);
    cr_assert_eq(hp.v_head, 32);
    cr_assert_eq(hp.n_ff_exp, 96);
    cr_assert_eq(hp.n_ff, 128);
    cr_assert_eq(hp.n_vocab, 5);          // from the token list
    cr_assert_eq(hp.gating, 1);           // llama.cpp's default: softmax
    cr_assert_eq(hp.n_group, 1);
    cr_assert_eq(hp.q_lora_rank, 0);
    cr_assert(hp.yarn);
    cr_assert_float_eq(hp.yarn_mscale_all_dim, 0.707f, 1e-6);
    cr_assert_eq(hp.yarn_mscale, hp.yarn_mscale_all_dim);
    cr_assert_eq(hp.yarn_beta_fast, 32.0f);
    cr_assert_eq(hp.yarn_beta_slow, 1.0f);
    cr_assert_eq(hp.n_eos, 1);
    cr_assert_eq(hp.eos_ids[0], 4);
    cr_assert_eq(hp.bos_id, -1);
    gguf_close(g);
    g = open_meta(dir, fill_bad_type, &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_eq(pt_hparams_from_gguf(g, &hp, &err), -1);
    cr_assert(strstr(err.msg, "deepseek2.nextn_predict_layers") && strstr(err.msg, "i32"), "%s", err.msg);
    gguf_close(g);
    tu_rmrf(dir);
    free(dir);
}

// Every type id a GGUF may hold, with ggml's block size and bytes per block
// (ggml.c type_traits / ggml-common.h static_asserts, transcribed): the
// reader sizes tensors of all of them, Petrel's types and the ones it cannot
// compute alike. Ids ggml removed and its activation-only types are unknown.
Test(gguf, every_ggml_type_is_sized)
{
    static const struct { uint32_t id; const char *name; uint64_t blck, bytes; } ggml[] = {
        {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},     {3, "Q4_1", 32, 20},
        {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},     {10, "Q2_K", 256, 84},
        {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},  {14, "Q6_K", 256, 210},
        {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
        {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},  {23, "IQ4_XS", 256, 136},
        {24, "I8", 1, 1},         {25, "I16", 1, 2},        {26, "I32", 1, 4},       {27, "I64", 1, 8},
        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},      {34, "TQ1_0", 256, 54},
        {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},   {41, "Q1_0", 128, 18},
        {42, "Q2_0", 64, 18},
    };
    for (size_t i = 0; i < sizeof ggml / sizeof ggml[0]; i++) {
        cr_expect_eq(gguf_row_bytes(ggml[i].id, 1024), 1024 / ggml[i].blck * ggml[i].bytes, "type %s",
                     ggml[i].name);
        cr_expect_str_eq(gguf_type_name(ggml[i].id), ggml[i].name);
        if (ggml[i].blck > 1)
            cr_expect_eq(gguf_row_bytes(ggml[i].id, 1024 + ggml[i].blck / 2), 0, "type %s", ggml[i].name);
    }
    const uint32_t unknown[] = {4, 5, 9, 15, 31, 32, 33, 36, 37, 38, 43, 77, 1000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        cr_expect_eq(gguf_row_bytes(unknown[i], 1024), 0, "id %u", unknown[i]);
        cr_expect_str_eq(gguf_type_name(unknown[i]), "?");
    }
}

// A tensor of a type the reader does not know names file, tensor and id; a
// row that is not whole blocks names the tensor and the type. A file with a
// type Petrel cannot compute (TQ2_0 here) still opens: the engine refuses it.
Test(gguf, type_errors_name_tensor_and_type)
{
    char *dir = tu_tmpdir("gguf");
    char path[512];
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    pt_err err = {0};
    bb t = reference_file(64, 77);
    write_bytes(path, t.p, t.n);
    cr_assert_null(gguf_open(path, &err));
    cr_expect(strstr(err.msg, path) && strstr(err.msg, "'b'") && strstr(err.msg, "77"), "%s", err.msg);
    free(t.p);
    bb k = reference_file(64, PT_Q4_K); // 32 values: not a whole 256-value block
    write_bytes(path, k.p, k.n);
    cr_assert_null(gguf_open(path, &err));
    cr_expect(strstr(err.msg, "'b'") && strstr(err.msg, "Q4_K") && strstr(err.msg, "not a multiple"), "%s",
              err.msg);
    free(k.p);
    bb m = reference_file(64, 39); // MXFP4: 32 values = one 17-byte block
    write_bytes(path, m.p, m.n);
    gguf_file *g = gguf_open(path, &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_expect_eq(gguf_find_tensor(g, "b")->size, 17);
    cr_expect_eq(g->n_parts, 1u);
    gguf_close(g);
    free(m.p);
    tu_rmrf(dir);
    free(dir);
}

// gguf_w_copy_kv writes every value type back as it was read.
Test(gguf, copy_kv_round_trip)
{
    char *dir = tu_tmpdir("gguf");
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a.gguf", dir);
    snprintf(b, sizeof b, "%s/b.gguf", dir);
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_u16(w, "k.u16", 65000);
    gguf_w_i32(w, "k.i32", -5);
    gguf_w_u64(w, "k.u64", 1ull << 40);
    gguf_w_f32(w, "k.f32", 1.5f);
    gguf_w_bool(w, "k.bool", true);
    gguf_w_str(w, "k.str", "deepseek2");
    const char *ss[] = {"a", "", "ccc"};
    gguf_w_arr_str(w, "k.astr", ss, 3);
    gguf_w_arr_f32(w, "k.af32", (const float[]){1, 2}, 2);
    uint64_t hl;
    void *h = gguf_writer_header(w, &hl);
    write_bytes(a, h, hl);
    gguf_writer_free(w);
    pt_err err = {0};
    gguf_file *g = gguf_open(a, &err);
    cr_assert(g, "%s", err.msg);
    gguf_writer *w2 = gguf_writer_new(32);
    for (uint64_t i = 0; i < g->n_kv; i++)
        gguf_w_copy_kv(w2, &g->kv[i]);
    uint64_t hl2;
    void *h2 = gguf_writer_header(w2, &hl2);
    cr_expect_eq(hl2, hl);
    cr_expect(memcmp(h, h2, hl) == 0, "copied header differs");
    write_bytes(b, h2, hl2);
    gguf_close(g);
    gguf_writer_free(w2);
    free(h);
    free(h2);
    tu_rmrf(dir);
    free(dir);
}

// tests/test_convert_mini.c — conversion paths tiny-dsv3 does not take, on a
// checkpoint built here: single-file model.safetensors (no index), plain
// q projection (q_lora_rank null), qk_nope 48 (attn_k_b cannot be
// block-quantised: BF16 fallback, F32 under --type f32), F32/F16/BF16
// sources, tied embeddings (no lm_head), MTP embedding/head that differ from
// the main ones (kept). Also `petrel inspect` on the results, and its
// llama.cpp "lite" warning on a 26-layer file.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/hparams.h"
#include "format/tensors.h"
#include "kernels/quant.h"
#include "tests/testutil.h"

enum { V = 64, E = 64, H = 2, KVL = 32, NOPE = 48, ROPE = 16, VH = 32, FF = 64, FFE = 32, X = 4 };

static const char *CONFIG =
    "{\"model_type\": \"deepseek_v3\", \"vocab_size\": 64, \"hidden_size\": 64, \"num_hidden_layers\": 2,"
    " \"num_nextn_predict_layers\": 1, \"num_attention_heads\": 2, \"q_lora_rank\": null, \"kv_lora_rank\": 32,"
    " \"qk_nope_head_dim\": 48, \"qk_rope_head_dim\": 16, \"v_head_dim\": 32, \"intermediate_size\": 64,"
    " \"first_k_dense_replace\": 1, \"moe_intermediate_size\": 32, \"n_routed_experts\": 4,"
    " \"num_experts_per_tok\": 2, \"n_shared_experts\": 1, \"n_group\": 1, \"topk_group\": 1,"
    " \"scoring_func\": \"sigmoid\", \"norm_topk_prob\": true, \"routed_scaling_factor\": 1.5,"
    " \"max_position_embeddings\": 128, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000,"
    " \"tie_word_embeddings\": true, \"bos_token_id\": 0, \"eos_token_id\": [1, 2]}";

typedef struct mt {
    char name[128];
    const char *dtype;  // F32 | F16 | BF16
    uint64_t r, c;      // [r, c]; c = 0 for 1-D
} mt;

static mt g_t[128];
static int g_n;

static void add(const char *dtype, uint64_t r, uint64_t c, const char *fmt, int layer)
{
    mt *t = &g_t[g_n++];
    snprintf(t->name, sizeof t->name, fmt, layer);
    t->dtype = dtype;
    t->r = r;
    t->c = c;
}

// Deterministic value of element i of tensor k (exactly representable in bf16).
static float val(int k, uint64_t i) { return (float)((int)((i * 2654435761u + (uint64_t)k * 97u) % 255) - 127) / 64.0f; }

static void build_list(void)
{
    g_n = 0;
    add("BF16", V, E, "model.embed_tokens.weight", 0);
    add("BF16", E, 0, "model.norm.weight", 0);
    for (int L = 0; L < 3; L++) {
        add("BF16", E, 0, "model.layers.%d.input_layernorm.weight", L);
        add("F16", H * (NOPE + ROPE), E, "model.layers.%d.self_attn.q_proj.weight", L);
        add("F32", KVL + ROPE, E, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", L);
        add("BF16", KVL, 0, "model.layers.%d.self_attn.kv_a_layernorm.weight", L);
        add("F32", H * (NOPE + VH), KVL, "model.layers.%d.self_attn.kv_b_proj.weight", L);
        add("F32", E, H * VH, "model.layers.%d.self_attn.o_proj.weight", L);
        add("BF16", E, 0, "model.layers.%d.post_attention_layernorm.weight", L);
        if (L == 0) {
            add("F32", FF, E, "model.layers.%d.mlp.gate_proj.weight", L);
            add("F32", FF, E, "model.layers.%d.mlp.up_proj.weight", L);
            add("F32", E, FF, "model.layers.%d.mlp.down_proj.weight", L);
            continue;
        }
        add("BF16", X, E, "model.layers.%d.mlp.gate.weight", L);
        add("F32", X, 0, "model.layers.%d.mlp.gate.e_score_correction_bias", L);
        for (int e = 0; e < X; e++) {
            char f[128];
            snprintf(f, sizeof f, "model.layers.%%d.mlp.experts.%d.gate_proj.weight", e);
            add("F32", FFE, E, f, L);
            snprintf(f, sizeof f, "model.layers.%%d.mlp.experts.%d.up_proj.weight", e);
            add("F32", FFE, E, f, L);
            snprintf(f, sizeof f, "model.layers.%%d.mlp.experts.%d.down_proj.weight", e);
            add("F32", E, FFE, f, L);
        }
        add("F32", FFE, E, "model.layers.%d.mlp.shared_experts.gate_proj.weight", L);
        add("F32", FFE, E, "model.layers.%d.mlp.shared_experts.up_proj.weight", L);
        add("F32", E, FFE, "model.layers.%d.mlp.shared_experts.down_proj.weight", L);
    }
    add("BF16", E, 2 * E, "model.layers.%d.eh_proj.weight", 2);
    add("BF16", E, 0, "model.layers.%d.enorm.weight", 2);
    add("BF16", E, 0, "model.layers.%d.hnorm.weight", 2);
    add("BF16", V, E, "model.layers.%d.embed_tokens.weight", 2);     // differs from the main one
    add("BF16", V, E, "model.layers.%d.shared_head.head.weight", 2); // no lm_head to match
    add("BF16", E, 0, "model.layers.%d.shared_head.norm.weight", 2);
}

static size_t esize(const char *d) { return !strcmp(d, "F32") ? 4 : 2; }

static void write_checkpoint(const char *dir)
{
    build_list();
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs(CONFIG, f);
    fclose(f);
    char *hdr = malloc(1 << 16);
    size_t hl = 0;
    uint64_t off = 0;
    hl += (size_t)sprintf(hdr + hl, "{");
    for (int k = 0; k < g_n; k++) {
        uint64_t n = g_t[k].r * (g_t[k].c ? g_t[k].c : 1), b = n * esize(g_t[k].dtype);
        if (g_t[k].c)
            hl += (size_t)sprintf(hdr + hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}",
                                  k ? "," : "", g_t[k].name, g_t[k].dtype, (unsigned long long)g_t[k].r,
                                  (unsigned long long)g_t[k].c, (unsigned long long)off, (unsigned long long)(off + b));
        else
            hl += (size_t)sprintf(hdr + hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                                  k ? "," : "", g_t[k].name, g_t[k].dtype, (unsigned long long)g_t[k].r,
                                  (unsigned long long)off, (unsigned long long)(off + b));
        off += b;
    }
    hl += (size_t)sprintf(hdr + hl, "}");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    uint64_t hl64 = hl;
    fwrite(&hl64, 8, 1, f);
    fwrite(hdr, 1, hl, f);
    for (int k = 0; k < g_n; k++) {
        uint64_t n = g_t[k].r * (g_t[k].c ? g_t[k].c : 1);
        for (uint64_t i = 0; i < n; i++) {
            float v = val(k, i);
            if (!strcmp(g_t[k].dtype, "F32")) {
                fwrite(&v, 4, 1, f);
            } else {
                uint16_t h = !strcmp(g_t[k].dtype, "F16") ? pt_f32_to_fp16(v) : pt_f32_to_bf16(v);
                fwrite(&h, 2, 1, f);
            }
        }
    }
    fclose(f);
    free(hdr);
}

static int find_src(const char *name)
{
    for (int k = 0; k < g_n; k++)
        if (!strcmp(g_t[k].name, name))
            return k;
    cr_assert_fail("no source %s", name);
    return -1;
}

Test(mini, fallbacks_plain_q_single_file_and_inspect, .timeout = 120)
{
    char *dir = tu_tmpdir("mini");
    write_checkpoint(dir);
    char out[1024], out32[1024];
    snprintf(out, sizeof out, "%s/m.gguf", dir);
    snprintf(out32, sizeof out32, "%s/m32.gguf", dir);
    char *log = NULL;
    cr_assert_eq(tu_sh(&log, "%s convert '%s' -o '%s' 2>&1", PETREL_BIN, dir, out), 0, "%s", log);
    cr_assert(strstr(log, "fallback: blk.0.attn_k_b.weight row length 48 is not a multiple of 32: bf16 instead of q8_0"),
              "%s", log);
    cr_assert(strstr(log, "fallbacks=3"), "%s", log);
    free(log);
    pt_err err = {{0}};
    gguf_file *g = gguf_open(out, &err);
    cr_assert_not_null(g, "%s", err.msg);
    const gguf_tensor *kb = gguf_find_tensor(g, "blk.1.attn_k_b.weight"), *q = gguf_find_tensor(g, "blk.1.attn_q.weight");
    cr_assert(kb && kb->type == PT_BF16 && kb->ne[0] == NOPE && kb->ne[1] == KVL && kb->ne[2] == H);
    cr_assert(q && q->type == PT_Q8_0 && q->ne[0] == E && q->ne[1] == H * (NOPE + ROPE));
    cr_assert_null(gguf_find_tensor(g, "output.weight"));
    cr_assert_null(gguf_find_tensor(g, "blk.1.attn_q_a.weight"));
    cr_assert_not_null(gguf_find_tensor(g, "blk.2.nextn.embed_tokens.weight"));
    cr_assert_not_null(gguf_find_tensor(g, "blk.2.nextn.shared_head_head.weight"));
    const gguf_kv *eos = gguf_get(g, "petrel.eos_token_ids");
    cr_assert(eos && eos->n == 2 && ((int32_t *)eos->arr)[1] == 2);
    pt_hparams hp;
    cr_assert_eq(pt_hparams_from_gguf(g, &hp, &err), 0, "%s", err.msg);
    cr_assert(hp.q_lora_rank == 0 && hp.qk_nope == NOPE && !hp.yarn && hp.n_nextn == 1);
    // k_b bf16 values: the source kv_b rows per head, transposed, rounded to bf16.
    build_list();
    int kv = find_src("model.layers.1.self_attn.kv_b_proj.weight");
    uint16_t *kbv = malloc(kb->size);
    cr_assert_eq(gguf_read(g, kb->offset, kbv, kb->size, &err), 0);
    for (int h = 0; h < H; h++)
        for (int c = 0; c < KVL; c++)
            for (int n = 0; n < NOPE; n++)
                cr_assert_eq(kbv[(h * KVL + c) * NOPE + n], pt_f32_to_bf16(val(kv, (uint64_t)(h * (NOPE + VH) + n) * KVL + c)));
    free(kbv);
    uint64_t kb_off = kb->offset;
    gguf_close(g);

    // --type f32: no fallback, values exact (F16 source widened).
    cr_assert_eq(tu_sh(&log, "%s convert '%s' -o '%s' --type f32 2>&1", PETREL_BIN, dir, out32), 0, "%s", log);
    cr_assert(strstr(log, "fallbacks=0"), "%s", log);
    free(log);
    g = gguf_open(out32, &err);
    q = gguf_find_tensor(g, "blk.0.attn_q.weight");
    cr_assert(q && q->type == PT_F32);
    int qs = find_src("model.layers.0.self_attn.q_proj.weight");
    float *qv = malloc(q->size);
    cr_assert_eq(gguf_read(g, q->offset, qv, q->size, &err), 0);
    for (uint64_t i = 0; i < q->size / 4; i++)
        cr_assert_eq(qv[i], pt_fp16_to_f32(pt_f32_to_fp16(val(qs, i))));
    free(qv);
    gguf_close(g);

    // inspect: fallback list, expert slice ranges, KV bytes per token.
    cr_assert_eq(tu_sh(&log, "%s inspect '%s' --expert 1 3", PETREL_BIN, out), 0, "%s", log);
    char want[256];
    snprintf(want, sizeof want, "blk.1.attn_k_b.weight  bf16  row length 48");
    cr_assert(strstr(log, want), "%s", log);
    snprintf(want, sizeof want, "%llu", (unsigned long long)kb_off);
    cr_assert(strstr(log, want), "tensor table lacks the k_b offset: %s", log);
    // (2 + 1) blocks x (32 + 16) x 4 bytes.
    cr_assert(strstr(log, "KV cache:         576 bytes per token"), "%s", log);
    cr_assert(strstr(log, "without q_lora_rank it expects the DeepSeek-V2-Lite"), "%s", log);
    g = gguf_open(out, &err);
    const gguf_tensor *gx = gguf_find_tensor(g, "blk.1.ffn_gate_exps.weight");
    uint64_t slice = gx->size / X;
    cr_assert_eq(slice, (uint64_t)FFE * E / 32 * 18);
    snprintf(want, sizeof want, "blk.1.ffn_gate_exps.weight       q4_0  offset %14llu  bytes %10llu",
             (unsigned long long)(gx->offset + 3 * slice), (unsigned long long)slice);
    cr_assert(strstr(log, want), "expected '%s' in: %s", want, log);
    gguf_close(g);
    free(log);
    tu_rmrf(dir);
    free(dir);
}

Test(mini, inspect_warns_about_the_lite_trap)
{
    pt_hparams hp = {
        .n_vocab = 64, .n_embd = 64, .n_layer = 26, .n_nextn = 0, .n_ctx_train = 128, .n_head = 2,
        .q_lora_rank = 32, .kv_lora_rank = 32, .qk_nope = 32, .qk_rope = 16, .v_head = 32, .n_ff = 64,
        .n_ff_exp = 32, .n_expert = 4, .n_expert_used = 2, .n_expert_shared = 1, .n_dense_lead = 1, .n_group = 1,
        .topk_group = 1, .gating = 2, .routed_scale = 1, .rms_eps = 1e-6f, .rope_theta = 10000, .bos_id = -1,
    };
    gguf_writer *w = gguf_writer_new(4096);
    gguf_w_str(w, "general.architecture", "deepseek2");
    gguf_w_u32(w, "general.alignment", 4096);
    pt_hparams_to_gguf(&hp, w, 0);
    gguf_w_str(w, "tokenizer.ggml.model", "none");
    pt_tensor_spec *s;
    int n = pt_tensor_specs(&hp, &s);
    for (int i = 0; i < n; i++)
        if (!s[i].optional)
            gguf_w_tensor(w, s[i].name, s[i].n_dims, s[i].ne, PT_F32);
    free(s);
    uint64_t hl;
    void *h = gguf_writer_header(w, &hl);
    char *dir = tu_tmpdir("lite");
    char path[1024];
    snprintf(path, sizeof path, "%s/lite.gguf", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_eq(pwrite(fd, h, hl, 0), (ssize_t)hl);
    cr_assert_eq(ftruncate(fd, (off_t)gguf_writer_total_size(w)), 0);
    close(fd);
    free(h);
    gguf_writer_free(w);
    char *log = NULL;
    cr_assert_eq(tu_sh(&log, "%s inspect '%s' --no-tensors", PETREL_BIN, path), 0, "%s", log);
    cr_assert(strstr(log, "llama.cpp will refuse this file"), "%s", log);
    cr_assert(strstr(log, "26 trunk layers"), "%s", log);
    free(log);
    tu_rmrf(dir);
    free(dir);
}

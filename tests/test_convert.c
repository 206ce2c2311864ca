// tests/test_convert.c — converting tiny-dsv3 reproduces every checkpoint
// tensor: with --type f32 bit for bit (FP8 x block scale in float32, BF16
// widened), including the kv_b split/permutation and the expert slices; with
// the default types the bytes equal ggml-layout quantisation of those values.
// The checkpoint is read here independently (json-c + a spec FP8 decoder),
// not through format/safetensors.c.
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "tests/testutil.h"

// ---- independent checkpoint reader -----------------------------------------
typedef struct ref_tensor {
    char name[160];
    char dtype[16];
    int nd;
    uint64_t shape[4];
    uint8_t *data;
    uint64_t bytes;
} ref_tensor;

typedef struct ref_ckpt {
    ref_tensor *t;
    int n;
} ref_ckpt;

static void load_shard(ref_ckpt *c, const char *path)
{
    size_t len;
    uint8_t *buf = tu_read(path, &len);
    cr_assert_not_null(buf, "cannot read %s", path);
    uint64_t hl;
    memcpy(&hl, buf, 8);
    char *js = strndup((char *)buf + 8, hl);
    json_object *root = json_tokener_parse(js);
    cr_assert_not_null(root);
    json_object_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__"))
            continue;
        c->t = realloc(c->t, (size_t)(c->n + 1) * sizeof *c->t);
        ref_tensor *t = &c->t[c->n++];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", key);
        snprintf(t->dtype, sizeof t->dtype, "%s", json_object_get_string(json_object_object_get(val, "dtype")));
        json_object *sh = json_object_object_get(val, "shape"), *of = json_object_object_get(val, "data_offsets");
        t->nd = (int)json_object_array_length(sh);
        for (int d = 0; d < t->nd; d++)
            t->shape[d] = (uint64_t)json_object_get_int64(json_object_array_get_idx(sh, (size_t)d));
        uint64_t b = (uint64_t)json_object_get_int64(json_object_array_get_idx(of, 0));
        uint64_t e = (uint64_t)json_object_get_int64(json_object_array_get_idx(of, 1));
        t->bytes = e - b;
        t->data = malloc(t->bytes);
        memcpy(t->data, buf + 8 + hl + b, t->bytes);
    }
    json_object_put(root);
    free(js);
    free(buf);
}

static const ref_tensor *ref_find(const ref_ckpt *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->t[i].name, name))
            return &c->t[i];
    return NULL;
}

// OCP E4M3FN from the definition: bias 7, subnormals m/8 * 2^-6, S.1111.111 NaN.
static float spec_fp8(uint8_t b)
{
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7)
        return NAN;
    float v = e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return s ? -v : v;
}

static float bf16_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// The checkpoint tensor as float32 [rows, cols] (rows = 1 for 1-D).
static float *ref_values(const ref_ckpt *c, const char *name, uint64_t *rows, uint64_t *cols)
{
    const ref_tensor *t = ref_find(c, name);
    cr_assert_not_null(t, "checkpoint lacks %s", name);
    *rows = t->nd == 1 ? 1 : t->shape[0];
    *cols = t->nd == 1 ? t->shape[0] : t->shape[1];
    uint64_t n = *rows * *cols;
    float *v = malloc(n * sizeof *v);
    if (!strcmp(t->dtype, "BF16")) {
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            v[i] = bf16_widen(h);
        }
    } else if (!strcmp(t->dtype, "F32")) {
        memcpy(v, t->data, n * 4);
    } else {
        cr_assert_str_eq(t->dtype, "F8_E4M3");
        char sn[200];
        snprintf(sn, sizeof sn, "%s_scale_inv", name);
        const ref_tensor *s = ref_find(c, sn);
        cr_assert_not_null(s);
        const float *sc = (const float *)s->data;
        uint64_t scols = s->shape[1];
        for (uint64_t i = 0; i < *rows; i++)
            for (uint64_t j = 0; j < *cols; j++)
                v[i * *cols + j] = spec_fp8(t->data[i * *cols + j]) * sc[(i / 128) * scols + j / 128];
    }
    return v;
}

// ---- expected GGUF tensor from the checkpoint --------------------------------
enum { H = 4, NOPE = 32, VH = 32, KVL = 160, NEXP = 16 };

// Expected float32 contents of GGUF tensor `gname` in ggml order (ne[0] fastest).
static float *expected(const ref_ckpt *c, const char *gname, uint64_t *n_out)
{
    static const char *const map[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
        {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
        {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
        {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
        {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
        {"ffn_gate_inp.weight", "mlp.gate.weight"},
        {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
        {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
        {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
        {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"},
        {"nextn.eh_proj.weight", "eh_proj.weight"},
        {"nextn.enorm.weight", "enorm.weight"},
        {"nextn.hnorm.weight", "hnorm.weight"},
        {"nextn.shared_head_norm.weight", "shared_head.norm.weight"},
    };
    char hf[200];
    uint64_t r, cc;
    if (!strcmp(gname, "token_embd.weight") || !strcmp(gname, "output_norm.weight") || !strcmp(gname, "output.weight")) {
        const char *h = gname[0] == 't' ? "model.embed_tokens.weight"
                        : gname[6] == '_' ? "model.norm.weight" : "lm_head.weight";
        float *v = ref_values(c, h, &r, &cc);
        *n_out = r * cc;
        return v;
    }
    int L;
    char suffix[96];
    cr_assert_eq(sscanf(gname, "blk.%d.%95s", &L, suffix), 2, "unexpected tensor %s", gname);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(suffix, map[i][0])) {
            snprintf(hf, sizeof hf, "model.layers.%d.%s", L, map[i][1]);
            float *v = ref_values(c, hf, &r, &cc);
            *n_out = r * cc;
            return v;
        }
    if (!strcmp(suffix, "attn_k_b.weight") || !strcmp(suffix, "attn_v_b.weight")) {
        snprintf(hf, sizeof hf, "model.layers.%d.self_attn.kv_b_proj.weight", L);
        float *kv = ref_values(c, hf, &r, &cc);
        cr_assert(r == H * (NOPE + VH) && cc == KVL);
        bool k = suffix[5] == 'k';
        uint64_t n = (uint64_t)H * (k ? NOPE : VH) * KVL;
        float *v = malloc(n * sizeof *v);
        for (int h = 0; h < H; h++) {
            if (k) // ne {nope, kv_lora, H}: element (n, c, h) = kv[h*(nope+v) + n][c]
                for (int ci = 0; ci < KVL; ci++)
                    for (int ni = 0; ni < NOPE; ni++)
                        v[((uint64_t)h * KVL + ci) * NOPE + ni] = kv[((uint64_t)h * (NOPE + VH) + ni) * KVL + ci];
            else // ne {kv_lora, v, H}: element (c, j, h) = kv[h*(nope+v) + nope + j][c]
                for (int j = 0; j < VH; j++)
                    for (int ci = 0; ci < KVL; ci++)
                        v[((uint64_t)h * VH + j) * KVL + ci] = kv[((uint64_t)h * (NOPE + VH) + NOPE + j) * KVL + ci];
        }
        free(kv);
        *n_out = n;
        return v;
    }
    const char *proj = !strcmp(suffix, "ffn_gate_exps.weight") ? "gate_proj"
                       : !strcmp(suffix, "ffn_up_exps.weight") ? "up_proj"
                       : !strcmp(suffix, "ffn_down_exps.weight") ? "down_proj" : NULL;
    cr_assert_not_null(proj, "no reference mapping for %s", gname);
    float *all = NULL;
    uint64_t per = 0;
    for (int e = 0; e < NEXP; e++) {
        snprintf(hf, sizeof hf, "model.layers.%d.mlp.experts.%d.%s.weight", L, e, proj);
        float *v = ref_values(c, hf, &r, &cc);
        per = r * cc;
        all = realloc(all, per * (uint64_t)(e + 1) * sizeof *all);
        memcpy(all + per * (uint64_t)e, v, per * sizeof *v);
        free(v);
    }
    *n_out = per * NEXP;
    return all;
}

static ref_ckpt load_fixture(void)
{
    ref_ckpt c = {0};
    char *a = tu_fixture("tiny-dsv3/model-00001-of-000002.safetensors");
    char *b = tu_fixture("tiny-dsv3/model-00002-of-000002.safetensors");
    load_shard(&c, a);
    load_shard(&c, b);
    free(a);
    free(b);
    return c;
}

static void free_ckpt(ref_ckpt *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->t[i].data);
    free(c->t);
}

static char *convert_fixture(const char *dir, const char *name, const char *opts)
{
    char *fx = tu_fixture("tiny-dsv3");
    char *out = malloc(1024);
    snprintf(out, 1024, "%s/%s", dir, name);
    char *log = NULL;
    int rc = tu_sh(&log, "%s convert %s -o %s %s 2>&1", PETREL_BIN, fx, out, opts);
    cr_assert_eq(rc, 0, "convert failed: %s", log);
    free(log);
    free(fx);
    return out;
}

Test(convert, tiny_f32_bit_exact, .timeout = 120)
{
    char *dir = tu_tmpdir("conv");
    char *out = convert_fixture(dir, "tiny.gguf", "--type f32");
    ref_ckpt c = load_fixture();
    pt_err err = {0};
    gguf_file *g = gguf_open(out, &err);
    cr_assert_not_null(g, "%s", err.msg);
    // Every checkpoint tensor except the MTP copies (identical to the main
    // ones, omitted) and the scales is represented: 1 + 4 blocks... counted below.
    cr_assert_null(gguf_find_tensor(g, "blk.4.nextn.embed_tokens.weight"));
    cr_assert_null(gguf_find_tensor(g, "blk.4.nextn.shared_head_head.weight"));
    cr_assert_not_null(gguf_find_tensor(g, "blk.4.nextn.shared_head_norm.weight"));
    cr_assert_not_null(gguf_find_tensor(g, "output.weight"));
    uint64_t covered = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        cr_assert_eq(t->type, PT_F32, "%s not f32", t->name);
        cr_assert_eq(t->offset % 4096, 0);
        uint64_t n;
        float *want = expected(&c, t->name, &n);
        cr_assert_eq(t->size, n * 4, "%s: size %llu, expected %llu", t->name, (unsigned long long)t->size,
                     (unsigned long long)(n * 4));
        float *got = malloc(t->size);
        cr_assert_eq(gguf_read(g, t->offset, got, t->size, &err), 0);
        cr_assert(memcmp(got, want, t->size) == 0, "%s: values differ from the checkpoint", t->name);
        covered += n;
        free(got);
        free(want);
    }
    // Element count of the checkpoint minus scales and the two MTP copies.
    uint64_t ck = 0;
    for (int i = 0; i < c.n; i++) {
        const ref_tensor *t = &c.t[i];
        if (strstr(t->name, "_scale_inv") || strstr(t->name, "layers.4.embed_tokens") ||
            strstr(t->name, "layers.4.shared_head.head"))
            continue;
        uint64_t e = 1;
        for (int d = 0; d < t->nd; d++)
            e *= t->shape[d];
        ck += e;
    }
    cr_assert_eq(covered, ck, "GGUF covers %llu values, checkpoint has %llu", (unsigned long long)covered,
                 (unsigned long long)ck);
    // Metadata against config.json.
    cr_assert_str_eq(gguf_get_str(g, "general.architecture", &err), "deepseek2");
    uint32_t u;
    cr_assert_eq(gguf_get_u32(g, "general.alignment", &u, &err), 0);
    cr_assert_eq(u, 4096);
    cr_assert_eq(gguf_get_u32(g, "deepseek2.block_count", &u, &err), 0);
    cr_assert_eq(u, 5);
    cr_assert_eq(gguf_get_u32(g, "deepseek2.nextn_predict_layers", &u, &err), 0);
    cr_assert_eq(u, 1);
    cr_assert_eq(gguf_get_u32(g, "deepseek2.context_length", &u, &err), 0);
    cr_assert_eq(u, 256);
    cr_assert_eq(gguf_get_u32(g, "deepseek2.expert_gating_func", &u, &err), 0);
    cr_assert_eq(u, 2);
    cr_assert_eq(gguf_get_u32(g, "deepseek2.rope.scaling.original_context_length", &u, &err), 0);
    cr_assert_eq(u, 64);
    float f;
    cr_assert_eq(gguf_get_f32(g, "deepseek2.rope.scaling.yarn_log_multiplier", &f, &err), 0);
    cr_assert_float_eq(f, 0.1f, 1e-7);
    cr_assert_eq(gguf_get_f32(g, "deepseek2.expert_weights_scale", &f, &err), 0);
    cr_assert_eq(f, 2.5f);
    cr_assert_eq(gguf_get_f32(g, "petrel.rope.scaling.beta_fast", &f, &err), 0);
    cr_assert_eq(f, 32.0f);
    gguf_close(g);
    free_ckpt(&c);
    free(out);
    tu_rmrf(dir);
    free(dir);
}

Test(convert, tiny_default_types_match_quantised_reference, .timeout = 120)
{
    char *dir = tu_tmpdir("conv");
    char *out = convert_fixture(dir, "tiny-q.gguf", "--threads 2");
    ref_ckpt c = load_fixture();
    pt_err err = {0};
    gguf_file *g = gguf_open(out, &err);
    cr_assert_not_null(g, "%s", err.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        bool exps = strstr(t->name, "_exps") != NULL;
        bool f32 = t->n_dims == 1 || strstr(t->name, "ffn_gate_inp");
        pt_dtype want_type = f32 ? PT_F32 : exps ? PT_Q4_0 : PT_Q8_0;
        cr_assert_eq(t->type, want_type, "%s: type %u", t->name, t->type);
        uint64_t n;
        float *want = expected(&c, t->name, &n);
        uint64_t rows = n / t->ne[0];
        size_t rb = pt_row_bytes(want_type, t->ne[0]);
        cr_assert_eq(t->size, rows * rb);
        uint8_t *ref = malloc(t->size), *got = malloc(t->size);
        for (uint64_t r = 0; r < rows; r++)
            pt_quantize_row(want_type, want + r * t->ne[0], ref + r * rb, (int64_t)t->ne[0]);
        cr_assert_eq(gguf_read(g, t->offset, got, t->size, &err), 0);
        cr_assert(memcmp(got, ref, t->size) == 0, "%s: bytes differ from quantised reference", t->name);
        free(ref);
        free(got);
        free(want);
    }
    gguf_close(g);
    free_ckpt(&c);
    free(out);
    tu_rmrf(dir);
    free(dir);
}

Test(convert, tokenizer_is_stored, .timeout = 120)
{
    char *dir = tu_tmpdir("conv");
    char *fx = tu_fixture("tiny-dsv3"), *tok = tu_fixture("tokenizer/deepseek_v3");
    cr_assert_eq(tu_sh(NULL, "mkdir -p '%s/ck' && cp '%s'/*.json '%s'/*.safetensors '%s/tokenizer.json' "
                       "'%s/tokenizer_config.json' '%s/ck/'", dir, fx, fx, tok, tok, dir), 0);
    char out[1024], *log = NULL;
    snprintf(out, sizeof out, "%s/tok.gguf", dir);
    cr_assert_eq(tu_sh(&log, "%s convert '%s/ck' -o '%s' 2>&1", PETREL_BIN, dir, out), 0, "%s", log);
    free(log);
    pt_err err = {0};
    gguf_file *g = gguf_open(out, &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_str_eq(gguf_get_str(g, "tokenizer.ggml.model", &err), "gpt2");
    const gguf_kv *toks = gguf_get(g, "tokenizer.ggml.tokens"), *merges = gguf_get(g, "tokenizer.ggml.merges");
    cr_assert(toks && toks->type == GGUF_ARRAY && toks->arr_type == GGUF_STRING && toks->n > 100000);
    cr_assert(merges && merges->n > 100000);
    cr_assert_not_null(gguf_get_str(g, "tokenizer.chat_template", &err));
    cr_assert_not_null(gguf_get_str(g, "petrel.tokenizer.json", &err));
    cr_assert_eq(gguf_get(g, "tokenizer.ggml.bos_token_id")->type, GGUF_UINT32);
    gguf_close(g);
    free(fx);
    free(tok);
    tu_rmrf(dir);
    free(dir);
}

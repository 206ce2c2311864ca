// format/hparams.c — pt_hparams <-> GGUF metadata (llama.cpp deepseek2 keys
// plus petrel.* extras), validation and KV-cache sizing.
#include "format/hparams.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// A key under the file's architecture prefix ("deepseek2." or "glm-dsa."):
// K("block_count") in a function that has `const char *arch` and a
// `char kbuf_[]`; every key is consumed before the next one is made.
static const char *key_of(char *buf, size_t n, const char *arch, const char *name)
{
    snprintf(buf, n, "%s.%s", arch, name);
    return buf;
}
#define K(name) key_of(kbuf_, sizeof kbuf_, arch, name)

// ---- writing ------------------------------------------------------------------

const char *pt_hparams_arch(const pt_hparams *hp) { return hp->idx_n_head ? "glm-dsa" : "deepseek2"; }

// The DSA keys as llama.cpp's glm-dsa writes them (indexer.types: 1 = full,
// one entry per trunk layer, only when some layer is shared), plus Petrel's
// own key for half-split indexer RoPE, which llama.cpp's glm-dsa lacks.
static void idx_to_gguf(const pt_hparams *hp, gguf_writer *w, const char *arch)
{
    char kbuf_[96];
    gguf_w_u32(w, K("attention.indexer.head_count"), hp->idx_n_head);
    gguf_w_u32(w, K("attention.indexer.key_length"), hp->idx_head_dim);
    gguf_w_u32(w, K("attention.indexer.top_k"), hp->idx_topk);
    bool any_shared = false;
    uint32_t types[PT_MAX_BLOCKS];
    for (uint32_t il = 0; il < hp->n_layer && il < PT_MAX_BLOCKS; il++) {
        types[il] = hp->idx_shared[il] ? 0u : 1u;
        any_shared = any_shared || hp->idx_shared[il];
    }
    if (any_shared)
        gguf_w_arr_u32(w, K("attention.indexer.types"), types, hp->n_layer);
    if (hp->idx_rope_neox)
        gguf_w_bool(w, "petrel.attention.indexer.rope_neox", true);
}

void pt_hparams_to_gguf(const pt_hparams *hp, gguf_writer *w, uint32_t n_ctx)
{
    assert(hp && w);
    const char *arch = pt_hparams_arch(hp);
    char kbuf_[96];
    gguf_w_u32(w, K("context_length"), n_ctx ? n_ctx : hp->n_ctx_train);
    gguf_w_u32(w, K("embedding_length"), hp->n_embd);
    gguf_w_u32(w, K("block_count"), pt_hp_n_blocks(hp));
    gguf_w_u32(w, K("feed_forward_length"), hp->n_ff);
    gguf_w_u32(w, K("leading_dense_block_count"), hp->n_dense_lead);
    gguf_w_u32(w, K("vocab_size"), hp->n_vocab);
    gguf_w_u32(w, K("nextn_predict_layers"), hp->n_nextn);

    gguf_w_u32(w, K("attention.head_count"), hp->n_head);
    gguf_w_u32(w, K("attention.head_count_kv"), 1);
    gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), hp->rms_eps);
    if (hp->q_lora_rank)
        gguf_w_u32(w, K("attention.q_lora_rank"), hp->q_lora_rank);
    gguf_w_u32(w, K("attention.kv_lora_rank"), hp->kv_lora_rank);
    gguf_w_u32(w, K("attention.key_length"), hp->kv_lora_rank + hp->qk_rope);
    gguf_w_u32(w, K("attention.value_length"), hp->kv_lora_rank);
    gguf_w_u32(w, K("attention.key_length_mla"), hp->qk_nope + hp->qk_rope);
    gguf_w_u32(w, K("attention.value_length_mla"), hp->v_head);
    gguf_w_u32(w, K("rope.dimension_count"), hp->qk_rope);

    gguf_w_u32(w, K("expert_feed_forward_length"), hp->n_ff_exp);
    gguf_w_u32(w, K("expert_count"), hp->n_expert);
    gguf_w_u32(w, K("expert_used_count"), hp->n_expert_used);
    gguf_w_u32(w, K("expert_shared_count"), hp->n_expert_shared);
    gguf_w_f32(w, K("expert_weights_scale"), hp->routed_scale);
    gguf_w_bool(w, K("expert_weights_norm"), hp->norm_topk);
    gguf_w_u32(w, K("expert_gating_func"), hp->gating);
    gguf_w_u32(w, K("expert_group_count"), hp->n_group);
    gguf_w_u32(w, K("expert_group_used_count"), hp->topk_group);

    gguf_w_f32(w, K("rope.freq_base"), hp->rope_theta);
    if (hp->yarn) {
        gguf_w_str(w, K("rope.scaling.type"), "yarn");
        gguf_w_f32(w, K("rope.scaling.factor"), hp->yarn_factor);
        gguf_w_u32(w, K("rope.scaling.original_context_length"), hp->yarn_orig_ctx);
        gguf_w_f32(w, K("rope.scaling.yarn_log_multiplier"), 0.1f * hp->yarn_mscale_all_dim);
        gguf_w_f32(w, "petrel.rope.scaling.beta_fast", hp->yarn_beta_fast);
        gguf_w_f32(w, "petrel.rope.scaling.beta_slow", hp->yarn_beta_slow);
        gguf_w_f32(w, "petrel.rope.scaling.mscale", hp->yarn_mscale);
        gguf_w_f32(w, "petrel.rope.scaling.mscale_all_dim", hp->yarn_mscale_all_dim);
    }
    if (hp->n_eos > 1)
        gguf_w_arr_i32(w, "petrel.eos_token_ids", hp->eos_ids, hp->n_eos);
    if (hp->idx_n_head)
        idx_to_gguf(hp, w, arch);
}

// ---- reading ------------------------------------------------------------------

static int get_u32_opt(const gguf_file *g, const char *key, uint32_t *out, uint32_t def, pt_err *err)
{
    if (!gguf_get(g, key)) {
        *out = def;
        return 0;
    }
    return gguf_get_u32(g, key, out, err);
}

static int get_f32_opt(const gguf_file *g, const char *key, float *out, float def, pt_err *err)
{
    if (!gguf_get(g, key)) {
        *out = def;
        return 0;
    }
    return gguf_get_f32(g, key, out, err);
}

// u32 key that may also be stored as a per-layer array (some files do so for
// the feed-forward lengths, with 0 for layers that lack that FFN): takes the
// non-zero value and requires all non-zero values to be equal.
static int get_u32_or_arr(const gguf_file *g, const char *key, uint32_t *out, pt_err *err)
{
    const gguf_kv *kv = gguf_get(g, key);
    if (kv && kv->type == GGUF_ARRAY && (kv->arr_type == GGUF_UINT32 || kv->arr_type == GGUF_INT32)) {
        const uint32_t *a = kv->arr;
        *out = 0;
        for (uint64_t i = 0; i < kv->n; i++) {
            if (a[i] == 0)
                continue;
            if (*out && a[i] != *out)
                return pt_errf(err, "%s: key '%s': per-layer values differ (%u vs %u), not supported", g->path,
                               key, *out, a[i]);
            *out = a[i];
        }
        return 0;
    }
    return gguf_get_u32(g, key, out, err);
}

// Token ids stored as u32 (tokenizer.ggml.*) or i32; -1 when absent.
static int32_t get_token_id(const gguf_file *g, const char *key)
{
    const gguf_kv *kv = gguf_get(g, key);
    if (!kv)
        return -1;
    if (kv->type == GGUF_UINT32)
        return (int32_t)kv->v.u32;
    if (kv->type == GGUF_INT32)
        return kv->v.i32;
    return -1;
}

// GLM-5.2's indexer types when a glm-dsa file has none and a 1M context
// (llama.cpp's rule for its own older files): layers 0, 1, then every
// fourth from 2 are full.
static bool glm52_default_full(uint32_t il) { return il < 2 || (il - 2) % 4 == 0; }

// The glm-dsa indexer keys. indexer.types: one entry per trunk layer,
// 1/true = full, 0/false = shared (bool, u32 or i32 array); absent: every
// layer full (GLM-5 / 5.1). The MTP block runs its own indexer when the file
// holds its weights (engine/model.c).
static int idx_from_gguf(const gguf_file *g, pt_hparams *hp, const char *arch, pt_err *err)
{
    char kbuf_[96];
    if (gguf_get_u32(g, K("attention.indexer.head_count"), &hp->idx_n_head, err) < 0 ||
        gguf_get_u32(g, K("attention.indexer.key_length"), &hp->idx_head_dim, err) < 0 ||
        gguf_get_u32(g, K("attention.indexer.top_k"), &hp->idx_topk, err) < 0)
        return -1;
    if (gguf_get(g, "petrel.attention.indexer.rope_neox") &&
        gguf_get_bool(g, "petrel.attention.indexer.rope_neox", &hp->idx_rope_neox, err) < 0)
        return -1;
    if (hp->n_layer > PT_MAX_BLOCKS)
        return pt_errf(err, "%s: %u layers with an indexer: at most %d are supported", g->path, hp->n_layer,
                       PT_MAX_BLOCKS);
    const gguf_kv *ty = gguf_get(g, K("attention.indexer.types"));
    if (!ty) {
        for (uint32_t il = 0; il < hp->n_layer; il++)
            hp->idx_shared[il] = hp->n_ctx_train >= 1048576 && !glm52_default_full(il);
        return 0;
    }
    if (ty->type != GGUF_ARRAY ||
        (ty->arr_type != GGUF_BOOL && ty->arr_type != GGUF_UINT32 && ty->arr_type != GGUF_INT32))
        return pt_errf(err, "%s: key '%s' must be an array of bool or integers", g->path, K("attention.indexer.types"));
    if (ty->n != hp->n_layer)
        return pt_errf(err, "%s: key '%s' has %llu entries, the model has %u layers", g->path,
                       K("attention.indexer.types"), (unsigned long long)ty->n, hp->n_layer);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        bool full = ty->arr_type == GGUF_BOOL ? ((const uint8_t *)ty->arr)[il] != 0
                                               : ((const uint32_t *)ty->arr)[il] != 0;
        hp->idx_shared[il] = !full;
    }
    return 0;
}

int pt_hparams_from_gguf(const gguf_file *g, pt_hparams *hp, pt_err *err)
{
    memset(hp, 0, sizeof *hp);
    const char *arch = gguf_get_str(g, "general.architecture", err);
    if (!arch)
        return -1;
    if (strcmp(arch, "deepseek2") != 0 && strcmp(arch, "glm-dsa") != 0)
        return pt_errf(err, "%s: general.architecture is '%s', only 'deepseek2' and 'glm-dsa' are supported",
                       g->path, arch);
    char kbuf_[96];

    uint32_t n_blocks = 0;
    if (gguf_get_u32(g, K("block_count"), &n_blocks, err) < 0 ||
        get_u32_opt(g, K("nextn_predict_layers"), &hp->n_nextn, 0, err) < 0)
        return -1;
    if (hp->n_nextn >= n_blocks)
        return pt_errf(err, "%s: key '%s.nextn_predict_layers' = %u >= block_count %u", g->path, arch, hp->n_nextn,
                       n_blocks);
    hp->n_layer = n_blocks - hp->n_nextn;

    if (gguf_get_u32(g, K("context_length"), &hp->n_ctx_train, err) < 0 ||
        gguf_get_u32(g, K("embedding_length"), &hp->n_embd, err) < 0 ||
        gguf_get_u32(g, K("attention.head_count"), &hp->n_head, err) < 0 ||
        gguf_get_u32(g, K("attention.kv_lora_rank"), &hp->kv_lora_rank, err) < 0 ||
        get_u32_opt(g, K("attention.q_lora_rank"), &hp->q_lora_rank, 0, err) < 0 ||
        gguf_get_f32(g, K("attention.layer_norm_rms_epsilon"), &hp->rms_eps, err) < 0 ||
        get_u32_or_arr(g, K("expert_feed_forward_length"), &hp->n_ff_exp, err) < 0 ||
        gguf_get_u32(g, K("expert_shared_count"), &hp->n_expert_shared, err) < 0 ||
        gguf_get_u32(g, K("expert_count"), &hp->n_expert, err) < 0 ||
        gguf_get_u32(g, K("expert_used_count"), &hp->n_expert_used, err) < 0 ||
        get_u32_or_arr(g, K("feed_forward_length"), &hp->n_ff, err) < 0 ||
        get_u32_opt(g, K("leading_dense_block_count"), &hp->n_dense_lead, 0, err) < 0 ||
        get_u32_opt(g, K("expert_gating_func"), &hp->gating, 1, err) < 0 ||
        get_u32_opt(g, K("expert_group_count"), &hp->n_group, 1, err) < 0 ||
        get_u32_opt(g, K("expert_group_used_count"), &hp->topk_group, 1, err) < 0 ||
        get_f32_opt(g, K("expert_weights_scale"), &hp->routed_scale, 1.0f, err) < 0 ||
        get_f32_opt(g, K("rope.freq_base"), &hp->rope_theta, 10000.0f, err) < 0)
        return -1;
    if (gguf_get(g, K("expert_weights_norm"))) {
        if (gguf_get_bool(g, K("expert_weights_norm"), &hp->norm_topk, err) < 0)
            return -1;
    }

    // Head dimensions: rope from rope.dimension_count; nope / v from the *_mla
    // keys (MLA files) or, in legacy files, from key_length / value_length.
    uint32_t key_len = 0, val_len = 0;
    if (gguf_get_u32(g, K("rope.dimension_count"), &hp->qk_rope, err) < 0)
        return -1;
    if (gguf_get(g, K("attention.key_length_mla"))) {
        uint32_t kl_mla = 0;
        if (gguf_get_u32(g, K("attention.key_length_mla"), &kl_mla, err) < 0 ||
            gguf_get_u32(g, K("attention.value_length_mla"), &hp->v_head, err) < 0)
            return -1;
        if (kl_mla <= hp->qk_rope)
            return pt_errf(err, "%s: key '%s.attention.key_length_mla' = %u <= rope dimension %u", g->path, arch,
                           kl_mla, hp->qk_rope);
        hp->qk_nope = kl_mla - hp->qk_rope;
    } else {
        if (gguf_get_u32(g, K("attention.key_length"), &key_len, err) < 0 ||
            gguf_get_u32(g, K("attention.value_length"), &val_len, err) < 0)
            return -1;
        if (key_len <= hp->qk_rope)
            return pt_errf(err, "%s: key '%s.attention.key_length' = %u <= rope dimension %u", g->path, arch,
                           key_len, hp->qk_rope);
        hp->qk_nope = key_len - hp->qk_rope;
        hp->v_head = val_len;
    }

    // Vocabulary size: the key, else the token list's length, else token_embd's shape.
    const gguf_kv *toks = gguf_get(g, "tokenizer.ggml.tokens");
    const gguf_tensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (gguf_get(g, K("vocab_size"))) {
        if (gguf_get_u32(g, K("vocab_size"), &hp->n_vocab, err) < 0)
            return -1;
    } else if (toks && toks->type == GGUF_ARRAY) {
        hp->n_vocab = (uint32_t)toks->n;
    } else if (emb && emb->n_dims == 2) {
        hp->n_vocab = (uint32_t)emb->ne[1];
    } else {
        return pt_errf(err, "%s: missing key '%s.vocab_size' (and no tokenizer.ggml.tokens)", g->path, arch);
    }

    // RoPE scaling.
    const gguf_kv *st = gguf_get(g, K("rope.scaling.type"));
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_factor = 1.0f;
    hp->yarn_mscale = hp->yarn_mscale_all_dim = 1.0f;
    if (st && st->type == GGUF_STRING && !strcmp(st->str.s, "yarn")) {
        hp->yarn = true;
        float mult = 0;
        if (gguf_get_f32(g, K("rope.scaling.factor"), &hp->yarn_factor, err) < 0 ||
            gguf_get_u32(g, K("rope.scaling.original_context_length"), &hp->yarn_orig_ctx, err) < 0 ||
            get_f32_opt(g, K("rope.scaling.yarn_log_multiplier"), &mult, 0.1f, err) < 0)
            return -1;
        float all_dim = mult / 0.1f;
        // Betas: llama.cpp's converter writes them as rope.scaling.yarn_beta_*
        // (from the HF config) when the config has them; Petrel's own keys
        // win where both exist (Petrel writes the same values).
        float bf = 32.0f, bs = 1.0f, ext = 1.0f, attn = 1.0f;
        if (get_f32_opt(g, K("rope.scaling.yarn_beta_fast"), &bf, 32.0f, err) < 0 ||
            get_f32_opt(g, K("rope.scaling.yarn_beta_slow"), &bs, 1.0f, err) < 0 ||
            get_f32_opt(g, K("rope.scaling.yarn_ext_factor"), &ext, 1.0f, err) < 0 ||
            get_f32_opt(g, K("rope.scaling.yarn_attn_factor"), &attn, 1.0f, err) < 0)
            return -1;
        // Petrel's YaRN is DeepSeek's: full extrapolation blend (ext_factor 1)
        // and the attention factor from mscale / mscale_all_dim only.
        if (ext != 1.0f)
            return pt_errf(err, "%s: key '%s.rope.scaling.yarn_ext_factor' = %g is not supported (1 only)",
                           g->path, arch, (double)ext);
        if (attn != 1.0f)
            return pt_errf(err, "%s: key '%s.rope.scaling.yarn_attn_factor' = %g is not supported (1 only)",
                           g->path, arch, (double)attn);
        if (get_f32_opt(g, "petrel.rope.scaling.beta_fast", &hp->yarn_beta_fast, bf, err) < 0 ||
            get_f32_opt(g, "petrel.rope.scaling.beta_slow", &hp->yarn_beta_slow, bs, err) < 0 ||
            get_f32_opt(g, "petrel.rope.scaling.mscale_all_dim", &hp->yarn_mscale_all_dim, all_dim, err) < 0 ||
            get_f32_opt(g, "petrel.rope.scaling.mscale", &hp->yarn_mscale, hp->yarn_mscale_all_dim, err) < 0)
            return -1;
    } else if (st && (st->type != GGUF_STRING || strcmp(st->str.s, "none") != 0)) {
        return pt_errf(err, "%s: key '%s.rope.scaling.type' = '%s' is not supported (yarn or none)", g->path, arch,
                       st->type == GGUF_STRING ? st->str.s : "?");
    }

    // Attention temperature tuning (Mistral Large 3 ships as deepseek2 with
    // it): Petrel's attention has no such term.
    if (gguf_get(g, K("attention.temperature_scale")))
        return pt_errf(err, "%s: key '%s.attention.temperature_scale' (attention temperature tuning) is not "
                            "supported", g->path, arch);

    // Gating: llama.cpp also has 3 (sqrt-softplus, other architectures).
    if (hp->gating != 1 && hp->gating != 2)
        return pt_errf(err, "%s: key '%s.expert_gating_func' = %u is not supported (1 softmax, 2 sigmoid)",
                       g->path, arch, hp->gating);

    if (!strcmp(arch, "glm-dsa") && idx_from_gguf(g, hp, arch, err) < 0)
        return -1;

    // Special tokens.
    hp->bos_id = get_token_id(g, "tokenizer.ggml.bos_token_id");
    const gguf_kv *eos = gguf_get(g, "petrel.eos_token_ids");
    if (eos && eos->type == GGUF_ARRAY && eos->arr_type == GGUF_INT32 && eos->n > 0) {
        hp->n_eos = eos->n > PT_MAX_EOS ? PT_MAX_EOS : (uint32_t)eos->n;
        memcpy(hp->eos_ids, eos->arr, hp->n_eos * sizeof(int32_t));
    } else {
        int32_t e = get_token_id(g, "tokenizer.ggml.eos_token_id");
        if (e >= 0) {
            hp->n_eos = 1;
            hp->eos_ids[0] = e;
        }
    }
    return pt_hparams_validate(hp, g->path, err);
}

// ---- validation -----------------------------------------------------------------

int pt_hparams_validate(const pt_hparams *hp, const char *what, pt_err *err)
{
#define REQ(cond, field, fmt, ...) \
    do { if (!(cond)) return pt_errf(err, "%s: %s: " fmt, what, field, ##__VA_ARGS__); } while (0)
    REQ(hp->n_vocab > 0, "vocab_size", "must be > 0");
    REQ(hp->n_embd > 0, "hidden_size", "must be > 0");
    REQ(hp->n_layer > 0, "num_hidden_layers", "must be > 0");
    // Bounds far above any real model (DeepSeek-V3 62 blocks, Kimi-K2 384 experts), so that a
    // hostile header cannot make the tensor list or the router's tables absurdly large.
    REQ(pt_hp_n_blocks(hp) <= PT_MAX_BLOCKS, "num_hidden_layers", "%u blocks: at most %d are supported",
        pt_hp_n_blocks(hp), PT_MAX_BLOCKS);
    REQ(hp->n_expert <= 65536, "n_routed_experts", "%u: at most 65536 are supported", hp->n_expert);
    REQ(hp->n_nextn <= 4, "num_nextn_predict_layers", "%u is more than 4", hp->n_nextn);
    REQ(hp->n_head > 0, "num_attention_heads", "must be > 0");
    REQ(hp->kv_lora_rank > 0, "kv_lora_rank", "must be > 0 (MLA)");
    REQ(hp->qk_nope > 0, "qk_nope_head_dim", "must be > 0");
    REQ(hp->qk_rope > 0 && hp->qk_rope % 2 == 0, "qk_rope_head_dim", "%u must be even and > 0", hp->qk_rope);
    REQ(hp->v_head > 0, "v_head_dim", "must be > 0");
    REQ(hp->n_dense_lead <= hp->n_layer, "first_k_dense_replace", "%u exceeds num_hidden_layers %u",
        hp->n_dense_lead, hp->n_layer);
    REQ(hp->n_dense_lead == 0 || hp->n_ff > 0, "intermediate_size", "must be > 0 with dense layers");
    bool has_moe = hp->n_dense_lead < pt_hp_n_blocks(hp);
    if (has_moe) {
        REQ(hp->n_expert > 0, "n_routed_experts", "must be > 0");
        REQ(hp->n_ff_exp > 0, "moe_intermediate_size", "must be > 0");
        REQ(hp->n_expert_used > 0 && hp->n_expert_used <= hp->n_expert, "num_experts_per_tok",
            "%u must be in 1..n_routed_experts (%u)", hp->n_expert_used, hp->n_expert);
        REQ(hp->n_group >= 1 && hp->n_expert % hp->n_group == 0, "n_group",
            "%u must divide n_routed_experts (%u)", hp->n_group, hp->n_expert);
        REQ(hp->topk_group >= 1 && hp->topk_group <= hp->n_group, "topk_group", "%u must be in 1..n_group (%u)",
            hp->topk_group, hp->n_group);
        REQ(hp->n_group == 1 || hp->n_expert_used <= hp->topk_group * (hp->n_expert / hp->n_group),
            "num_experts_per_tok", "%u exceeds the experts in topk_group groups", hp->n_expert_used);
    }
    REQ(hp->gating == 1 || hp->gating == 2, "scoring_func", "gating %u is not softmax (1) or sigmoid (2)",
        hp->gating);
    REQ(hp->rms_eps > 0 && isfinite(hp->rms_eps), "rms_norm_eps", "must be > 0");
    REQ(hp->rope_theta > 0 && isfinite(hp->rope_theta), "rope_theta", "must be > 0");
    REQ(isfinite(hp->routed_scale) && hp->routed_scale > 0, "routed_scaling_factor", "must be > 0");
    if (hp->yarn) {
        REQ(hp->yarn_factor >= 1 && isfinite(hp->yarn_factor), "rope_scaling.factor", "must be >= 1");
        REQ(hp->yarn_orig_ctx > 0, "rope_scaling.original_max_position_embeddings", "must be > 0");
    }
    REQ(hp->n_eos <= PT_MAX_EOS, "eos_token_id", "more than %d ids", PT_MAX_EOS);
    if (hp->idx_n_head) {
        REQ(hp->q_lora_rank > 0, "q_lora_rank", "must be > 0 with a DSA indexer (its query is the MLA latent)");
        REQ(hp->idx_head_dim >= hp->qk_rope && hp->idx_head_dim % 2 == 0, "index_head_dim",
            "%u must be even and at least qk_rope_head_dim (%u)", hp->idx_head_dim, hp->qk_rope);
        REQ(hp->idx_topk > 0, "index_topk", "must be > 0");
        REQ(pt_hp_n_blocks(hp) <= PT_MAX_BLOCKS, "num_hidden_layers", "at most %d blocks with an indexer",
            PT_MAX_BLOCKS);
        REQ(!hp->idx_shared[0], "indexer_types", "layer 0 is 'shared': a shared layer needs a full one before it");
    }
#undef REQ
    return 0;
}

uint64_t pt_hparams_kv_bytes_per_token(const pt_hparams *hp, uint32_t elem_size)
{
    uint64_t per = (uint64_t)pt_hp_n_blocks(hp) * (hp->kv_lora_rank + hp->qk_rope);
    for (uint32_t il = 0; il < pt_hp_n_blocks(hp); il++) // the indexer key cache beside it
        if (pt_hp_idx_full(hp, il))
            per += hp->idx_head_dim;
    return per * elem_size;
}

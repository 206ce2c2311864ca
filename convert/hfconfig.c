// convert/hfconfig.c — config.json parsing (json-c).
#include "convert/hfconfig.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

// Keys that are read below, or that carry no information Petrel needs.
static const char *const known_keys[] = {
    "architectures", "attention_bias", "attention_dropout", "aux_loss_alpha", "bos_token_id", "eos_token_id",
    "ep_size", "first_k_dense_replace", "hidden_act", "hidden_size", "initializer_range", "intermediate_size",
    "kv_lora_rank", "max_position_embeddings", "model_type", "moe_intermediate_size", "moe_layer_freq", "n_group",
    "n_routed_experts", "n_shared_experts", "norm_topk_prob", "num_attention_heads", "num_experts_per_tok",
    "num_hidden_layers", "num_key_value_heads", "num_nextn_predict_layers", "pretraining_tp", "q_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "quantization_config", "rms_norm_eps", "rope_scaling", "rope_theta",
    "rope_parameters", "rope_interleave", "routed_scaling_factor", "scoring_func", "seq_aux",
    "tie_word_embeddings", "topk_group", "topk_method", "torch_dtype", "dtype", "transformers_version",
    "use_cache", "v_head_dim", "vocab_size", "auto_map", "pad_token_id", "head_dim", "qk_head_dim",
    "_name_or_path", "output_router_logits", "router_aux_loss_coef", "use_sliding_window", "partial_rotary_factor",
};

typedef struct ctx {
    const char *path;
    json_object *root;
    pt_hf_config *cfg;
    pt_err *err;
} ctx;

static void note(char **list, uint32_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char **list, uint32_t *n, const char *fmt, ...)
{
    if (*n >= PT_HF_MAX_NOTES)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    list[(*n)++] = strdup(buf);
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return v;
}

// Unsigned integer key; required unless def >= 0 (then the default when absent).
static int get_u32(ctx *c, json_object *o, const char *key, int64_t def, uint32_t *out)
{
    json_object *v = get(o, key);
    if (!v) {
        if (def < 0)
            return pt_errf(c->err, "%s: missing required key '%s'", c->path, key);
        *out = (uint32_t)def;
        return 0;
    }
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
        json_object_get_int64(v) > UINT32_MAX)
        return pt_errf(c->err, "%s: key '%s' must be a non-negative integer (got %s)", c->path, key,
                       json_object_to_json_string(v));
    *out = (uint32_t)json_object_get_int64(v);
    return 0;
}

// Number key (int or double); required when has_def is false.
static int get_num(ctx *c, json_object *o, const char *key, bool has_def, double def, double *out)
{
    json_object *v = get(o, key);
    if (!v) {
        if (!has_def)
            return pt_errf(c->err, "%s: missing required key '%s'", c->path, key);
        *out = def;
        return 0;
    }
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return pt_errf(c->err, "%s: key '%s' must be a number (got %s)", c->path, key, json_object_to_json_string(v));
    *out = json_object_get_double(v);
    return 0;
}

static int get_f32(ctx *c, json_object *o, const char *key, bool has_def, double def, float *out)
{
    double d;
    if (get_num(c, o, key, has_def, def, &d) < 0)
        return -1;
    *out = (float)d;
    return 0;
}

static int get_bool(ctx *c, json_object *o, const char *key, bool def, bool *out)
{
    json_object *v = get(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_object_is_type(v, json_type_boolean))
        return pt_errf(c->err, "%s: key '%s' must be true or false", c->path, key);
    *out = json_object_get_boolean(v);
    return 0;
}

static const char *get_str(json_object *o, const char *key)
{
    json_object *v = get(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

// RoPE: `rope_theta` + `rope_scaling`, or `rope_parameters` {rope_theta, rope_type, ...}.
static int parse_rope(ctx *c)
{
    pt_hparams *hp = &c->cfg->hp;
    json_object *rp = get(c->root, "rope_parameters");
    json_object *rs = get(c->root, "rope_scaling");
    const char *scal_key = "rope_scaling";
    if (rp) {
        if (!json_object_is_type(rp, json_type_object))
            return pt_errf(c->err, "%s: key 'rope_parameters' must be an object", c->path);
        json_object *owner = get(rp, "rope_theta") ? rp : c->root;
        if (!get(owner, "rope_theta"))
            return pt_errf(c->err, "%s: missing required key 'rope_parameters.rope_theta'", c->path);
        if (get_f32(c, owner, "rope_theta", false, 0, &hp->rope_theta) < 0)
            return -1;
        if (!rs) {
            rs = rp;
            scal_key = "rope_parameters";
        }
    } else if (get_f32(c, c->root, "rope_theta", true, 10000.0, &hp->rope_theta) < 0) {
        return -1;
    }
    hp->yarn = false;
    hp->yarn_factor = 1.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_mscale = hp->yarn_mscale_all_dim = 1.0f;
    if (!rs)
        return 0;
    if (!json_object_is_type(rs, json_type_object))
        return pt_errf(c->err, "%s: key '%s' must be an object", c->path, scal_key);
    const char *type = get_str(rs, "type");
    if (!type)
        type = get_str(rs, "rope_type");
    if (!type || !strcmp(type, "default"))
        return 0;
    if (strcmp(type, "yarn") != 0)
        return pt_errf(c->err, "%s: key '%s.type' = '%s' is not supported (only yarn or default)", c->path, scal_key,
                       type);
    hp->yarn = true;
    char k[112];
    double d;
#define RS_F32(name, has_def, def, dst)                                        \
    do {                                                                      \
        if (get_num(c, rs, name, has_def, def, &d) < 0)                       \
            return pt_errf(c->err, "%s: missing required key '%s.%s'", c->path, scal_key, name); \
        dst = (float)d;                                                       \
    } while (0)
    RS_F32("factor", false, 0, hp->yarn_factor);
    RS_F32("beta_fast", true, 32.0, hp->yarn_beta_fast);
    RS_F32("beta_slow", true, 1.0, hp->yarn_beta_slow);
    RS_F32("mscale", true, 1.0, hp->yarn_mscale);
    RS_F32("mscale_all_dim", true, 0.0, hp->yarn_mscale_all_dim);
#undef RS_F32
    snprintf(k, sizeof k, "%s.original_max_position_embeddings", scal_key);
    if (get_u32(c, rs, "original_max_position_embeddings", -1, &hp->yarn_orig_ctx) < 0)
        return pt_errf(c->err, "%s: missing required key '%s'", c->path, k);
    return 0;
}

static int parse_special_ids(ctx *c)
{
    pt_hparams *hp = &c->cfg->hp;
    json_object *b = get(c->root, "bos_token_id");
    hp->bos_id = b && json_object_is_type(b, json_type_int) ? (int32_t)json_object_get_int64(b) : -1;
    json_object *e = get(c->root, "eos_token_id");
    hp->n_eos = 0;
    if (!e)
        return 0;
    if (json_object_is_type(e, json_type_int)) {
        hp->eos_ids[hp->n_eos++] = (int32_t)json_object_get_int64(e);
        return 0;
    }
    if (!json_object_is_type(e, json_type_array))
        return pt_errf(c->err, "%s: key 'eos_token_id' must be an integer or a list of integers", c->path);
    size_t n = json_object_array_length(e);
    if (n > PT_MAX_EOS)
        return pt_errf(c->err, "%s: key 'eos_token_id' has %zu ids (at most %d)", c->path, n, PT_MAX_EOS);
    for (size_t i = 0; i < n; i++) {
        json_object *x = json_object_array_get_idx(e, i);
        if (!json_object_is_type(x, json_type_int))
            return pt_errf(c->err, "%s: key 'eos_token_id[%zu]' is not an integer", c->path, i);
        hp->eos_ids[hp->n_eos++] = (int32_t)json_object_get_int64(x);
    }
    return 0;
}

// DSA (the lightning indexer): index_n_heads, index_head_dim, index_topk
// (all three or none); indexer_rope_interleave (default: interleaved for
// GLM's glm_moe_dsa, half-split otherwise, as DeepSeek-V3.2's current
// reference); indexer_types, one "full" / "shared" per trunk layer.
static int parse_indexer(ctx *c)
{
    pt_hparams *hp = &c->cfg->hp;
    if (!get(c->root, "index_n_heads") && !get(c->root, "index_topk"))
        return 0;
    if (get_u32(c, c->root, "index_n_heads", -1, &hp->idx_n_head) < 0 ||
        get_u32(c, c->root, "index_head_dim", -1, &hp->idx_head_dim) < 0 ||
        get_u32(c, c->root, "index_topk", -1, &hp->idx_topk) < 0)
        return -1;
    bool inter = false;
    if (get_bool(c, c->root, "indexer_rope_interleave", !strncmp(c->cfg->model_type, "glm", 3), &inter) < 0)
        return -1;
    hp->idx_rope_neox = !inter;
    json_object *ty = get(c->root, "indexer_types");
    if (!ty)
        return 0;
    if (!json_object_is_type(ty, json_type_array) || json_object_array_length(ty) != hp->n_layer)
        return pt_errf(c->err, "%s: key 'indexer_types' must be a list of %u entries (one per layer)", c->path,
                       hp->n_layer);
    if (hp->n_layer > PT_MAX_BLOCKS)
        return pt_errf(c->err, "%s: key 'indexer_types': at most %d layers are supported", c->path, PT_MAX_BLOCKS);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const char *t = json_object_get_string(json_object_array_get_idx(ty, il));
        if (!t || (strcmp(t, "full") && strcmp(t, "shared")))
            return pt_errf(c->err, "%s: key 'indexer_types[%u]' = %s is not 'full' or 'shared'", c->path, il,
                           t ? t : "(not a string)");
        hp->idx_shared[il] = !strcmp(t, "shared");
    }
    return 0;
}

static int parse_quant(ctx *c)
{
    json_object *q = get(c->root, "quantization_config");
    c->cfg->fp8 = false;
    c->cfg->fp8_block[0] = c->cfg->fp8_block[1] = 128;
    if (!q)
        return 0;
    const char *m = get_str(q, "quant_method");
    if (!m || strcmp(m, "fp8") != 0)
        return pt_errf(c->err, "%s: key 'quantization_config.quant_method' = '%s' is not supported (fp8 only)",
                       c->path, m ? m : "(missing)");
    c->cfg->fp8 = true;
    const char *fmt = get_str(q, "fmt");
    if (fmt && strcmp(fmt, "e4m3") != 0)
        return pt_errf(c->err, "%s: key 'quantization_config.fmt' = '%s' is not supported (e4m3 only)", c->path, fmt);
    json_object *bs = get(q, "weight_block_size");
    if (bs) {
        if (!json_object_is_type(bs, json_type_array) || json_object_array_length(bs) != 2)
            return pt_errf(c->err, "%s: key 'quantization_config.weight_block_size' must be [rows, cols]", c->path);
        for (int i = 0; i < 2; i++)
            c->cfg->fp8_block[i] = (uint32_t)json_object_get_int64(json_object_array_get_idx(bs, (size_t)i));
        if (c->cfg->fp8_block[0] != 128 || c->cfg->fp8_block[1] != 128)
            return pt_errf(c->err, "%s: key 'quantization_config.weight_block_size' = [%u, %u] is not supported "
                           "([128, 128] only)", c->path, c->cfg->fp8_block[0], c->cfg->fp8_block[1]);
    }
    return 0;
}

// Settings Petrel parses but does not implement: reported, not fatal.
static void collect_notes(ctx *c)
{
    pt_hf_config *cfg = c->cfg;
    json_object_object_foreach(c->root, key, val) {
        bool known = false;
        for (size_t i = 0; i < sizeof known_keys / sizeof known_keys[0]; i++)
            if (!strcmp(key, known_keys[i]))
                known = true;
        const char *js = json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN);
        if (!strncmp(key, "index_", 6) || !strncmp(key, "indexer_", 8)) {
            // DSA keys parse_indexer reads; any other one is reported.
            if (strcmp(key, "index_n_heads") && strcmp(key, "index_head_dim") && strcmp(key, "index_topk") &&
                strcmp(key, "indexer_rope_interleave") && strcmp(key, "indexer_types"))
                note(cfg->unimpl, &cfg->n_unimpl, "%s=%s: DSA indexer setting not implemented", key, js);
        } else if (!known) {
            note(cfg->unknown, &cfg->n_unknown, "%s=%s", key, js);
        }
    }
    const char *act = get_str(c->root, "hidden_act");
    if (act && strcmp(act, "silu") != 0)
        note(cfg->unimpl, &cfg->n_unimpl, "hidden_act=%s: only silu is implemented", act);
    json_object *ab = get(c->root, "attention_bias");
    if (ab && json_object_get_boolean(ab))
        note(cfg->unimpl, &cfg->n_unimpl, "attention_bias=true: attention biases not implemented");
    json_object *mf = get(c->root, "moe_layer_freq");
    if (mf && json_object_get_int64(mf) != 1)
        note(cfg->unimpl, &cfg->n_unimpl, "moe_layer_freq=%lld: only 1 is implemented",
             (long long)json_object_get_int64(mf));
    json_object *ri = get(c->root, "rope_interleave");
    if (ri && !json_object_get_boolean(ri))
        note(cfg->unimpl, &cfg->n_unimpl, "rope_interleave=false: only interleaved RoPE is implemented");
    const char *tm = get_str(c->root, "topk_method");
    if (tm && strcmp(tm, "noaux_tc") != 0 && strcmp(tm, "greedy") != 0 && strcmp(tm, "group_limited_greedy") != 0)
        note(cfg->unimpl, &cfg->n_unimpl, "topk_method=%s: not implemented (noaux_tc is used)", tm);
}

int pt_hf_config_load(const char *path, pt_hf_config *cfg, pt_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    size_t len = 0;
    char *text = pt_read_file(path, &len, err);
    if (!text)
        return -1;
    json_tokener *tok = json_tokener_new();
    json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    free(text);
    if (!root || jerr != json_tokener_success || !json_object_is_type(root, json_type_object)) {
        if (root)
            json_object_put(root);
        return pt_errf(err, "%s: not a valid JSON object (%s)", path,
                       jerr != json_tokener_success ? json_tokener_error_desc(jerr) : "not an object");
    }
    ctx c = {.path = path, .root = root, .cfg = cfg, .err = err};
    pt_hparams *hp = &cfg->hp;
    const char *mt = get_str(root, "model_type");
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", mt ? mt : "unknown");
    double eps, scale;
    const char *scoring = get_str(root, "scoring_func");
    int rc = 0;
    if (get_u32(&c, root, "vocab_size", -1, &hp->n_vocab) < 0 ||
        get_u32(&c, root, "hidden_size", -1, &hp->n_embd) < 0 ||
        get_u32(&c, root, "num_hidden_layers", -1, &hp->n_layer) < 0 ||
        get_u32(&c, root, "num_nextn_predict_layers", 0, &hp->n_nextn) < 0 ||
        get_u32(&c, root, "max_position_embeddings", -1, &hp->n_ctx_train) < 0 ||
        get_u32(&c, root, "num_attention_heads", -1, &hp->n_head) < 0 ||
        get_u32(&c, root, "q_lora_rank", 0, &hp->q_lora_rank) < 0 ||
        get_u32(&c, root, "kv_lora_rank", -1, &hp->kv_lora_rank) < 0 ||
        get_u32(&c, root, "qk_nope_head_dim", -1, &hp->qk_nope) < 0 ||
        get_u32(&c, root, "qk_rope_head_dim", -1, &hp->qk_rope) < 0 ||
        get_u32(&c, root, "v_head_dim", -1, &hp->v_head) < 0 ||
        get_u32(&c, root, "first_k_dense_replace", 0, &hp->n_dense_lead) < 0 ||
        get_u32(&c, root, "intermediate_size", hp->n_dense_lead ? -1 : 0, &hp->n_ff) < 0 ||
        get_u32(&c, root, "moe_intermediate_size", -1, &hp->n_ff_exp) < 0 ||
        get_u32(&c, root, "n_routed_experts", -1, &hp->n_expert) < 0 ||
        get_u32(&c, root, "num_experts_per_tok", -1, &hp->n_expert_used) < 0 ||
        get_u32(&c, root, "n_shared_experts", 0, &hp->n_expert_shared) < 0 ||
        get_u32(&c, root, "n_group", 1, &hp->n_group) < 0 ||
        get_u32(&c, root, "topk_group", 1, &hp->topk_group) < 0 ||
        get_bool(&c, root, "norm_topk_prob", false, &hp->norm_topk) < 0 ||
        get_num(&c, root, "routed_scaling_factor", true, 1.0, &scale) < 0 ||
        get_num(&c, root, "rms_norm_eps", false, 0, &eps) < 0 ||
        get_bool(&c, root, "tie_word_embeddings", false, &cfg->tie_embeddings) < 0 ||
        parse_rope(&c) < 0 || parse_special_ids(&c) < 0 || parse_quant(&c) < 0 || parse_indexer(&c) < 0) {
        rc = -1;
    } else if (scoring && strcmp(scoring, "sigmoid") != 0 && strcmp(scoring, "softmax") != 0) {
        rc = pt_errf(err, "%s: key 'scoring_func' = '%s' is not supported (sigmoid or softmax)", path, scoring);
    } else {
        hp->gating = scoring && !strcmp(scoring, "softmax") ? 1 : 2;
        hp->routed_scale = (float)scale;
        hp->rms_eps = (float)eps;
        collect_notes(&c);
        rc = pt_hparams_validate(hp, path, err);
    }
    json_object_put(root);
    if (rc < 0)
        pt_hf_config_free(cfg);
    return rc;
}

void pt_hf_config_free(pt_hf_config *cfg)
{
    for (uint32_t i = 0; i < cfg->n_unimpl; i++)
        free(cfg->unimpl[i]);
    for (uint32_t i = 0; i < cfg->n_unknown; i++)
        free(cfg->unknown[i]);
    cfg->n_unimpl = cfg->n_unknown = 0;
}

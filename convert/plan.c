// convert/plan.c — the output layout: tensors, types, offsets, work units.
#include "convert/plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "convert/tokwrite.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

// The compiled --type-rules (one match-data block serves them all: plans
// are built by one thread).
typedef struct rules_re {
    pcre2_code *re[PT_MAX_TYPE_RULES];
    uint32_t n;
    pcre2_match_data *md;
} rules_re;

// GGUF name suffix -> HF name suffix (inside "model.layers.N.").
static const struct {
    const char *gguf, *hf;
    pt_xform x;
} layer_map[] = {
    {"attn_norm.weight", "input_layernorm.weight", PT_X_COPY},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight", PT_X_COPY},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight", PT_X_COPY},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight", PT_X_COPY},
    {"attn_q.weight", "self_attn.q_proj.weight", PT_X_COPY},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight", PT_X_COPY},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight", PT_X_COPY},
    {"attn_k_b.weight", "self_attn.kv_b_proj.weight", PT_X_KB},
    {"attn_v_b.weight", "self_attn.kv_b_proj.weight", PT_X_VB},
    {"attn_output.weight", "self_attn.o_proj.weight", PT_X_COPY},
    {"indexer.attn_q_b.weight", "self_attn.indexer.wq_b.weight", PT_X_COPY},
    {"indexer.attn_k.weight", "self_attn.indexer.wk.weight", PT_X_COPY},
    {"indexer.k_norm.weight", "self_attn.indexer.k_norm.weight", PT_X_COPY},
    {"indexer.k_norm.bias", "self_attn.indexer.k_norm.bias", PT_X_COPY},
    {"indexer.proj.weight", "self_attn.indexer.weights_proj.weight", PT_X_COPY},
    {"ffn_norm.weight", "post_attention_layernorm.weight", PT_X_COPY},
    {"ffn_gate.weight", "mlp.gate_proj.weight", PT_X_COPY},
    {"ffn_up.weight", "mlp.up_proj.weight", PT_X_COPY},
    {"ffn_down.weight", "mlp.down_proj.weight", PT_X_COPY},
    {"ffn_gate_inp.weight", "mlp.gate.weight", PT_X_COPY},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias", PT_X_COPY},
    {"ffn_gate_exps.weight", "mlp.experts.%d.gate_proj.weight", PT_X_COPY},
    {"ffn_up_exps.weight", "mlp.experts.%d.up_proj.weight", PT_X_COPY},
    {"ffn_down_exps.weight", "mlp.experts.%d.down_proj.weight", PT_X_COPY},
    {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight", PT_X_COPY},
    {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight", PT_X_COPY},
    {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight", PT_X_COPY},
    {"nextn.eh_proj.weight", "eh_proj.weight", PT_X_COPY},
    {"nextn.enorm.weight", "enorm.weight", PT_X_COPY},
    {"nextn.hnorm.weight", "hnorm.weight", PT_X_COPY},
    {"nextn.embed_tokens.weight", "embed_tokens.weight", PT_X_COPY},
    {"nextn.shared_head_head.weight", "shared_head.head.weight", PT_X_COPY},
    {"nextn.shared_head_norm.weight", "shared_head.norm.weight", PT_X_COPY},
};

static const struct {
    const char *gguf, *hf;
} global_map[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// HF source name (with "%d" for the expert) and transform of a spec; 0 on success.
static int hf_source(const pt_tensor_spec *s, char *buf, size_t len, pt_xform *x)
{
    *x = PT_X_COPY;
    if (s->layer < 0) {
        for (size_t i = 0; i < sizeof global_map / sizeof global_map[0]; i++)
            if (!strcmp(s->name, global_map[i].gguf)) {
                snprintf(buf, len, "%s", global_map[i].hf);
                return 0;
            }
        return -1;
    }
    const char *suffix = strchr(s->name + 4, '.'); // after "blk.N"
    assert(suffix);
    suffix++;
    for (size_t i = 0; i < sizeof layer_map / sizeof layer_map[0]; i++)
        if (!strcmp(suffix, layer_map[i].gguf)) {
            snprintf(buf, len, "model.layers.%d.%s", s->layer, layer_map[i].hf);
            *x = layer_map[i].x;
            return 0;
        }
    return -1;
}

// The type the options ask for: norms, router and bias F32; a matrix takes
// the first --type-rule its name matches (*rule = its index), else the
// expert or trunk type.
static pt_dtype requested_type(const pt_tensor_spec *s, const pt_plan_opts *o, const rules_re *rr, int32_t *rule)
{
    *rule = -1;
    if (s->role != PT_ROLE_EXPERTS && s->role != PT_ROLE_TRUNK)
        return PT_F32;
    for (uint32_t k = 0; k < rr->n; k++)
        if (pcre2_match(rr->re[k], (PCRE2_SPTR)s->name, PCRE2_ZERO_TERMINATED, 0, 0, rr->md, NULL) >= 0) {
            *rule = (int32_t)k;
            return o->rules[k].type;
        }
    return s->role == PT_ROLE_EXPERTS ? o->expert_type : o->trunk_type;
}

pt_dtype pt_plan_fallback_type(pt_dtype t, uint64_t ne0)
{
    int64_t blck = pt_dtype_block(t);
    assert(blck > 0);
    if (ne0 % (uint64_t)blck == 0)
        return t;
    pt_dtype f = t;
    switch (t) {
    case PT_Q2_K:
    case PT_Q3_K: f = PT_Q4_0; break;
    case PT_Q4_K: f = PT_Q5_0; break;
    case PT_Q5_K: f = PT_Q5_1; break;
    case PT_Q6_K: f = PT_Q8_0; break;
    case PT_IQ1_S:
    case PT_IQ1_M:
    case PT_IQ2_XXS:
    case PT_IQ2_XS:
    case PT_IQ2_S:
    case PT_IQ3_XXS:
    case PT_IQ3_S:
    case PT_IQ4_XS: f = PT_IQ4_NL; break;
    default: break; // a 32-value type: nothing smaller to fall back to
    }
    // llama-quantize uses F16 here; Petrel keeps its BF16 (no overflow).
    return ne0 % (uint64_t)pt_dtype_block(f) == 0 ? f : PT_BF16;
}

// llama.cpp general.file_type (LLAMA_FTYPE_*) for the expert type.
static uint32_t file_type(pt_dtype t)
{
    switch (t) {
    case PT_F32: return 0;
    case PT_F16: return 1;
    case PT_Q4_0: return 2;
    case PT_Q8_0: return 7;
    case PT_BF16: return 32;
    case PT_Q4_1: return 3;
    case PT_Q5_0: return 8;
    case PT_Q5_1: return 9;
    case PT_Q2_K: return 10;
    case PT_Q3_K: return 12;  // Q3_K_M
    case PT_Q4_K: return 15;  // Q4_K_M
    case PT_Q5_K: return 17;  // Q5_K_M
    case PT_Q6_K: return 18;
    case PT_IQ2_XXS: return 19;
    case PT_IQ2_XS: return 20;
    case PT_IQ3_XXS: return 23;
    case PT_IQ1_S: return 24;
    case PT_IQ4_NL: return 25;
    case PT_IQ3_S: return 26;
    case PT_IQ2_S: return 28;
    case PT_IQ4_XS: return 30;
    case PT_IQ1_M: return 31;
    default: return 0;
    }
}

static bool in_index(pt_hf_index *ix, const char *name) { return ix && pt_hf_index_find(ix, name) >= 0; }

// Marks name (and its _scale_inv) used; returns shard, scale shard.
static int locate(pt_hf_index *ix, const char *name, int32_t *shard, int32_t *scale_shard, pt_err *err)
{
    *shard = *scale_shard = -1;
    if (!ix)
        return 0;
    int64_t k = pt_hf_index_find(ix, name);
    if (k < 0)
        return pt_errf(err, "%s: tensor '%s' missing (config.json implies it)", ix->path, name);
    ix->used[k] = true;
    *shard = (int32_t)ix->shard_of[k];
    char sname[160];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    int64_t ks = pt_hf_index_find(ix, sname);
    if (ks >= 0) {
        ix->used[ks] = true;
        *scale_shard = (int32_t)ix->shard_of[ks];
    }
    return 0;
}

// Adds the tensor to the header and the plan; fills its units.
static int add_tensor(pt_plan *p, pt_hf_index *ix, const pt_tensor_spec *s, const pt_plan_opts *o,
                      const rules_re *rr, pt_err *err)
{
    pt_out_tensor *t = &p->tensors[p->n_tensors];
    memset(t, 0, sizeof *t);
    t->spec = *s;
    if (hf_source(s, t->hf_name, sizeof t->hf_name, &t->xform) < 0)
        return pt_errf(err, "internal: no HF source for tensor '%s'", s->name);
    t->requested = requested_type(s, o, rr, &t->rule);
    if (t->rule >= 0)
        p->rule_hits[t->rule]++;
    t->type = pt_plan_fallback_type(t->requested, s->ne[0]);
    if (t->type != t->requested) {
        t->fallback = true;
        p->n_fallbacks++;
    }
    if (t->xform == PT_X_KB || t->xform == PT_X_VB) {
        const pt_hparams *hp = &p->cfg->hp;
        t->src_dims = 2;
        t->src_shape[0] = (uint64_t)hp->n_head * (hp->qk_nope + hp->v_head);
        t->src_shape[1] = hp->kv_lora_rank;
    } else if (s->n_dims == 1) {
        t->src_dims = 1;
        t->src_shape[0] = s->ne[0];
    } else {
        t->src_dims = 2;
        t->src_shape[0] = s->ne[1];
        t->src_shape[1] = s->ne[0];
    }
    int idx = gguf_w_tensor(p->w, s->name, s->n_dims, s->ne, t->type);
    if (idx < 0)
        return pt_errf(err, "out of memory");
    t->size = gguf_writer_tensor_size(p->w, idx);
    p->bytes_by_type[t->type] += t->size;
    p->count_by_type[t->type]++;
    bool experts = s->role == PT_ROLE_EXPERTS;
    if (experts)
        p->expert_bytes += t->size;
    else
        p->trunk_bytes += t->size;
    uint32_t n_units = experts ? (uint32_t)s->ne[2] : 1;
    for (uint32_t e = 0; e < n_units; e++) {
        pt_unit *u = &p->units[p->n_units++];
        u->tensor = p->n_tensors;
        u->expert = experts ? (int32_t)e : -1;
        u->out_bytes = t->size / n_units;
        u->out_offset = (uint64_t)e * u->out_bytes; // relative until the header is final
        char name[160];
        snprintf(name, sizeof name, t->hf_name, (int)e);
        if (locate(ix, name, &u->shard, &u->scale_shard, err) < 0)
            return -1;
    }
    p->n_tensors++;
    return 0;
}

static int add_metadata(pt_plan *p, const pt_plan_opts *o, pt_err *err)
{
    const pt_hf_config *cfg = p->cfg;
    gguf_writer *w = p->w;
    gguf_w_str(w, "general.architecture", pt_hparams_arch(&cfg->hp));
    gguf_w_str(w, "general.name", cfg->model_type);
    gguf_w_u32(w, "general.alignment", PT_ALIGN);
    gguf_w_u32(w, "general.file_type", file_type(o->expert_type));
    gguf_w_u32(w, "general.quantization_version", 2);
    pt_hparams_to_gguf(&cfg->hp, w, 0);
    if (o->tokenizer_json) {
        if (pt_convert_write_tokenizer(o->tokenizer_json, o->tokenizer_config, cfg->hp.bos_id,
                                       cfg->hp.n_eos ? cfg->hp.eos_ids[0] : -1, cfg->hp.n_vocab, w, err) < 0)
            return -1;
    } else {
        gguf_w_str(w, "tokenizer.ggml.model", "none");
        if (cfg->hp.bos_id >= 0)
            gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)cfg->hp.bos_id);
        if (cfg->hp.n_eos > 0)
            gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)cfg->hp.eos_ids[0]);
    }
    gguf_w_str(w, "petrel.convert.expert_type", pt_dtype_name(o->expert_type));
    gguf_w_str(w, "petrel.convert.trunk_type", pt_dtype_name(o->trunk_type));
    if (o->n_rules) {
        // "REGEX=type" in priority order: how the per-tensor types were chosen
        char *buf[PT_MAX_TYPE_RULES];
        for (uint32_t k = 0; k < o->n_rules; k++) {
            size_t n = strlen(o->rules[k].pattern) + 16;
            buf[k] = malloc(n);
            if (!buf[k]) {
                while (k-- > 0)
                    free(buf[k]);
                return pt_errf(err, "out of memory");
            }
            snprintf(buf[k], n, "%s=%s", o->rules[k].pattern, pt_dtype_name(o->rules[k].type));
        }
        gguf_w_arr_str(w, "petrel.convert.type_rules", (const char *const *)buf, o->n_rules);
        for (uint32_t k = 0; k < o->n_rules; k++)
            free(buf[k]);
    }
    return 0;
}

static void free_rules(rules_re *rr)
{
    for (uint32_t k = 0; k < rr->n; k++)
        pcre2_code_free(rr->re[k]);
    pcre2_match_data_free(rr->md);
    memset(rr, 0, sizeof *rr);
}

// Compiles the --type-rule patterns (PCRE2, the syntax of llama-quantize's
// std::regex patterns for these names: \d, [0-9]+, (a|b) ...). On an invalid
// pattern or a type Petrel cannot write, frees what it compiled and fails
// naming the rule.
static int compile_rules(const pt_plan_opts *o, rules_re *rr, pt_err *err)
{
    memset(rr, 0, sizeof *rr);
    if (o->n_rules > PT_MAX_TYPE_RULES)
        return pt_errf(err, "--type-rule: at most %d rules", PT_MAX_TYPE_RULES);
    for (uint32_t k = 0; k < o->n_rules; k++) {
        const pt_type_rule *r = &o->rules[k];
        if (!pt_dtype_can_quantize(r->type)) {
            free_rules(rr);
            return pt_errf(err, "--type-rule '%s': Petrel cannot write type %s", r->pattern, pt_dtype_name(r->type));
        }
        int ecode;
        PCRE2_SIZE eoff;
        rr->re[k] = pcre2_compile((PCRE2_SPTR)r->pattern, PCRE2_ZERO_TERMINATED, 0, &ecode, &eoff, NULL);
        if (!rr->re[k]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ecode, msg, sizeof msg);
            free_rules(rr);
            return pt_errf(err, "--type-rule '%s': not a regular expression: %s at offset %zu", r->pattern,
                           (const char *)msg, (size_t)eoff);
        }
        rr->n = k + 1;
    }
    if (rr->n && !(rr->md = pcre2_match_data_create(1, NULL))) {
        free_rules(rr);
        return pt_errf(err, "out of memory");
    }
    return 0;
}

int pt_plan_build(pt_plan *p, const pt_hf_config *cfg, pt_hf_index *ix, const pt_plan_opts *o, pt_err *err)
{
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->ix = ix;
    p->rules = o->rules;
    p->n_rules = o->n_rules;
    const pt_hparams *hp = &cfg->hp;
    pt_tensor_spec *specs = NULL;
    int n_specs = pt_tensor_specs(hp, &specs);
    p->w = gguf_writer_new(PT_ALIGN);
    if (n_specs < 0 || !p->w) {
        free(specs);
        return pt_errf(err, "out of memory");
    }
    rules_re rr;
    int rc = compile_rules(o, &rr, err);
    if (rc < 0) {
        free(specs);
        gguf_writer_free(p->w);
        memset(p, 0, sizeof *p);
        return -1;
    }
    if (ix)
        memset(ix->used, 0, ix->n_names * sizeof *ix->used);
    uint64_t max_units = 0;
    for (int i = 0; i < n_specs; i++)
        max_units += specs[i].role == PT_ROLE_EXPERTS ? specs[i].ne[2] : 1;
    p->tensors = calloc((size_t)n_specs, sizeof *p->tensors);
    p->units = calloc(max_units ? max_units : 1, sizeof *p->units);
    rc = p->tensors && p->units ? add_metadata(p, o, err) : pt_errf(err, "out of memory");
    char nm[160];
    for (int i = 0; i < n_specs && rc == 0; i++) {
        const pt_tensor_spec *s = &specs[i];
        if (s->optional) {
            pt_xform x;
            hf_source(s, nm, sizeof nm, &x);
            bool present = ix ? in_index(ix, nm) : false;
            if (!strcmp(s->name, "output.weight")) {
                present = ix ? present : !cfg->tie_embeddings;
            } else if (strstr(s->name, ".indexer.")) {
                present = ix ? present : true; // an MTP block's indexer: assumed present without an index
            } else if (strstr(s->name, "nextn.embed_tokens")) {
                p->mtp_embed_present = present;
                if (o->omit_mtp_embed || !ix)
                    present = false;
            } else if (strstr(s->name, "nextn.shared_head_head")) {
                p->mtp_head_present = present;
                if (o->omit_mtp_head || !ix)
                    present = false;
            }
            if (!present) {
                // Omitted copies are still "consumed": mark them so they are not reported unused.
                int32_t a, b;
                if (ix && in_index(ix, nm))
                    locate(ix, nm, &a, &b, NULL);
                continue;
            }
        }
        rc = add_tensor(p, ix, s, o, &rr, err);
    }
    free_rules(&rr);
    free(specs);
    if (rc < 0) {
        pt_plan_free(p);
        return -1;
    }
    if (p->n_fallbacks) {
        const char **names = malloc(p->n_fallbacks * sizeof *names);
        uint32_t k = 0;
        for (uint32_t i = 0; i < p->n_tensors; i++)
            if (p->tensors[i].fallback)
                names[k++] = p->tensors[i].spec.name;
        gguf_w_arr_str(p->w, "petrel.convert.fallbacks", names, k);
        free(names);
    }
    // Final offsets now that the header (and so the data section start) is fixed.
    p->header_size = gguf_writer_header_size(p->w);
    p->file_size = gguf_writer_total_size(p->w);
    for (uint32_t i = 0; i < p->n_tensors; i++)
        p->tensors[i].offset = gguf_writer_tensor_offset(p->w, (int)i);
    for (uint32_t i = 0; i < p->n_units; i++)
        p->units[i].out_offset += p->tensors[p->units[i].tensor].offset;
    // Expert statistics: routed experts over all MoE blocks, bytes of one expert.
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        const pt_out_tensor *t = &p->tensors[i];
        if (t->spec.role != PT_ROLE_EXPERTS)
            continue;
        if (strstr(t->spec.name, "ffn_gate_exps"))
            p->n_routed_experts += t->spec.ne[2];
        if (t->spec.layer == (int32_t)hp->n_dense_lead)
            p->bytes_per_expert += t->size / t->spec.ne[2];
    }
    if (ix)
        for (uint64_t k = 0; k < ix->n_names; k++)
            if (!ix->used[k]) {
                if (p->n_unused < 4)
                    snprintf(p->unused_example[p->n_unused], sizeof p->unused_example[0], "%s", ix->names[k]);
                p->n_unused++;
            }
    return 0;
}

void pt_plan_free(pt_plan *p)
{
    gguf_writer_free(p->w);
    free(p->tensors);
    free(p->units);
    memset(p, 0, sizeof *p);
}

void pt_plan_unit_name(const pt_plan *p, const pt_unit *u, char *buf, size_t len)
{
    snprintf(buf, len, p->tensors[u->tensor].hf_name, u->expert < 0 ? 0 : u->expert);
}

void pt_plan_print_fallback(const pt_plan *p, uint32_t i, FILE *f, const char *indent)
{
    const pt_out_tensor *t = &p->tensors[i];
    fprintf(f, "%sfallback: %s row length %llu is not a multiple of %lld: %s instead of %s\n", indent, t->spec.name,
            (unsigned long long)t->spec.ne[0], (long long)pt_dtype_block(t->requested), pt_dtype_name(t->type),
            pt_dtype_name(t->requested));
}

// One expert's bytes per MoE block, when --type-rules make them differ
// from block to block ("  block N: BYTES").
static void print_expert_bytes_by_block(const pt_plan *p, FILE *f)
{
    const uint32_t nb = p->cfg->hp.n_layer + p->cfg->hp.n_nextn;
    uint64_t *per = calloc(nb ? nb : 1, sizeof *per);
    if (!per)
        return;
    bool differ = false;
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        const pt_out_tensor *t = &p->tensors[i];
        if (t->spec.role == PT_ROLE_EXPERTS && t->spec.layer >= 0 && (uint32_t)t->spec.layer < nb)
            per[t->spec.layer] += t->size / t->spec.ne[2];
    }
    for (uint32_t L = 0; L < nb; L++)
        differ = differ || (per[L] && per[L] != p->bytes_per_expert);
    if (differ) {
        fprintf(f, "bytes_per_expert_by_block:\n");
        for (uint32_t L = 0; L < nb; L++)
            if (per[L])
                fprintf(f, "  block %u: %llu\n", L, (unsigned long long)per[L]);
    }
    free(per);
}

void pt_plan_print(const pt_plan *p, FILE *f)
{
    const pt_hparams *hp = &p->cfg->hp;
    fprintf(f, "model_type: %s\n", p->cfg->model_type);
    fprintf(f, "source: %s\n", p->ix ? p->ix->path : "config.json only (standard DeepSeek-V3 tensor names assumed)");
    if (p->ix)
        fprintf(f, "shards: %u\n", p->ix->n_shards);
    fprintf(f, "blocks: %u trunk + %u MTP (%u dense)\n", hp->n_layer, hp->n_nextn, hp->n_dense_lead);
    fprintf(f, "rope: theta %g, %s", hp->rope_theta, hp->yarn ? "yarn" : "no scaling");
    if (hp->yarn)
        fprintf(f, " factor %g over %u, beta_fast %g, beta_slow %g, mscale %g, mscale_all_dim %g", hp->yarn_factor,
                hp->yarn_orig_ctx, hp->yarn_beta_fast, hp->yarn_beta_slow, hp->yarn_mscale, hp->yarn_mscale_all_dim);
    fprintf(f, "\neos_token_ids:");
    for (uint32_t i = 0; i < hp->n_eos; i++)
        fprintf(f, "%s%d", i ? "," : " ", hp->eos_ids[i]);
    fprintf(f, "\nrouting: %s, %u of %u experts, groups %u (top %u), scale %g%s\n", hp->gating == 2 ? "sigmoid" : "softmax",
            hp->n_expert_used, hp->n_expert, hp->n_group, hp->topk_group, hp->routed_scale,
            hp->norm_topk ? ", normalised" : "");
    if (hp->idx_n_head) {
        uint32_t n_full = 0;
        for (uint32_t il = 0; il < hp->n_layer; il++)
            n_full += !hp->idx_shared[il];
        fprintf(f, "dsa: indexer %u heads x %u, top %u keys, %s RoPE, %u of %u layers full (+ MTP)\n",
                hp->idx_n_head, hp->idx_head_dim, hp->idx_topk, hp->idx_rope_neox ? "half-split" : "interleaved",
                n_full, hp->n_layer);
    }
    fprintf(f, "tensors: %u\n", p->n_tensors);
    for (uint32_t t = 0; t < 32; t++)
        if (p->count_by_type[t])
            fprintf(f, "bytes_%s: %llu\n", pt_dtype_name((pt_dtype)t), (unsigned long long)p->bytes_by_type[t]);
    fprintf(f, "type_mix:");
    for (uint32_t t = 0; t < 32; t++)
        if (p->count_by_type[t])
            fprintf(f, " %s %u (%.2f MiB)", pt_dtype_name((pt_dtype)t), p->count_by_type[t],
                    (double)p->bytes_by_type[t] / (1024.0 * 1024));
    fprintf(f, "\n");
    fprintf(f, "trunk_bytes: %llu\n", (unsigned long long)p->trunk_bytes);
    fprintf(f, "expert_bytes: %llu\n", (unsigned long long)p->expert_bytes);
    fprintf(f, "routed_experts: %llu\n", (unsigned long long)p->n_routed_experts);
    fprintf(f, "bytes_per_expert: %llu\n", (unsigned long long)p->bytes_per_expert);
    print_expert_bytes_by_block(p, f);
    fprintf(f, "header_bytes: %llu\n", (unsigned long long)p->header_size);
    fprintf(f, "file_bytes: %llu\n", (unsigned long long)p->file_size);
    fprintf(f, "file_gib: %.2f\n", (double)p->file_size / (1024.0 * 1024 * 1024));
    fprintf(f, "kv_bytes_per_token_f32: %llu\n", (unsigned long long)pt_hparams_kv_bytes_per_token(hp, 4));
    for (uint32_t k = 0; k < p->n_rules; k++) {
        fprintf(f, "type_rule: %s=%s matches %u tensors\n", p->rules[k].pattern, pt_dtype_name(p->rules[k].type),
                p->rule_hits[k]);
        for (uint32_t i = 0; i < p->n_tensors; i++)
            if (p->tensors[i].rule == (int32_t)k)
                fprintf(f, "  rule_tensor: %s %s %llu bytes\n", p->tensors[i].spec.name,
                        pt_dtype_name(p->tensors[i].type), (unsigned long long)p->tensors[i].size);
    }
    fprintf(f, "fallbacks: %u\n", p->n_fallbacks);
    for (uint32_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i].fallback)
            pt_plan_print_fallback(p, i, f, "  ");
    if (hp->n_nextn)
        fprintf(f, "mtp_copies: embed_tokens and shared_head.head %s\n",
                !p->ix ? "assumed identical to the main ones (omitted)"
                : p->mtp_embed_present || p->mtp_head_present
                    ? "present in the checkpoint; omitted here (the converter checks they are byte-identical)"
                    : "absent");
    fprintf(f, "unimplemented_config_keys: %u\n", p->cfg->n_unimpl);
    for (uint32_t i = 0; i < p->cfg->n_unimpl; i++)
        fprintf(f, "  unimplemented: %s\n", p->cfg->unimpl[i]);
    if (p->cfg->n_unknown) {
        fprintf(f, "unknown_config_keys: %u\n", p->cfg->n_unknown);
        for (uint32_t i = 0; i < p->cfg->n_unknown; i++)
            fprintf(f, "  unknown: %s\n", p->cfg->unknown[i]);
    }
    if (p->ix) {
        fprintf(f, "unused_checkpoint_tensors: %llu\n", (unsigned long long)p->n_unused);
        for (uint64_t i = 0; i < p->n_unused && i < 4; i++)
            fprintf(f, "  unused: %s\n", p->unused_example[i]);
    }
}

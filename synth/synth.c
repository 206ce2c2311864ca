// synth/synth.c — presets and the checkpoint plan of `petrel synth`.
//
// The plan lists every tensor of a DeepSeek-V3 checkpoint (names, dtypes and
// shapes as in the real one and in tests/fixtures/tiny-dsv3), assigns them
// to shards by size in model order (an FP8 weight and its scale_inv always
// share a shard) and orders each shard's data as the safetensors Python
// writer does (by dtype alignment F32, BF16, F8, then by name). Writing is
// in synth_write.c, values in synth_gen.c, the tokenizer in synth_tok.c.
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "synth/synth_int.h"
#include "synth/synth_plan.h"

#define MB (1024ull * 1024ull)
#define GB (1024ull * MB)

// name, about, vocab, hidden, layers, first_dense, dense_ffn, experts, top_k,
// n_group, topk_group, n_shared, moe_ffn, heads, q_lora, kv_lora, nope, rope,
// v_head, max_pos, rope_theta, yarn_factor, yarn_orig, routed_scale, nextn,
// shard_bytes, idx_heads, idx_dim, idx_topk
static const synth_preset PRESETS[] = {
    {"tiny", "demo / test model, ~12 MB (hidden 256, 4 layers, 16 experts top-4)",
     1024, 256, 4, 1, 512, 16, 4, 4, 2, 1, 128, 4, 192, 160, 32, 16, 32,
     4096, 10000.0, 4.0, 64, 2.5, 1, 5 * MB, 0, 0, 0},
    {"small", "streaming tests, ~170 MB (hidden 512, 6 layers, 64 experts top-6)",
     2048, 512, 6, 1, 1024, 64, 6, 8, 4, 1, 256, 8, 256, 128, 32, 32, 32,
     4096, 10000.0, 4.0, 1024, 2.5, 1, 64 * MB, 0, 0, 0},
    {"bench16", "benchmark model, ~22 GB (hidden 2048, 28 layers, 128 experts top-8)",
     32000, 2048, 28, 1, 5632, 128, 8, 8, 4, 1, 1024, 16, 512, 256, 64, 32, 64,
     163840, 10000.0, 40.0, 4096, 2.5, 1, 4 * GB, 0, 0, 0},
    // GLM-5's attention as it is (64 heads, q_lora 2048, kv_lora 512, nope 192,
    // rope 64, v 256, indexer 32 x 128 keeping 2048 keys) with 3 layers and 8
    // small experts: long-context costs per layer are the real model's.
    {"glm5", "GLM-5 attention + DSA indexer, ~1.2 GB (hidden 6144, 3 layers, 8 experts top-2)",
     4096, 6144, 3, 1, 4096, 8, 2, 1, 1, 1, 512, 64, 2048, 512, 192, 64, 256,
     202752, 1000000.0, 1.0, 202752, 2.5, 1, 1 * GB, 32, 128, 2048},
};

int synth_n_presets(void) { return (int)(sizeof PRESETS / sizeof PRESETS[0]); }
const synth_preset *synth_preset_at(int i) { return (i >= 0 && i < synth_n_presets()) ? &PRESETS[i] : NULL; }

const synth_preset *synth_find_preset(const char *name)
{
    for (int i = 0; i < synth_n_presets(); i++)
        if (strcmp(PRESETS[i].name, name) == 0)
            return &PRESETS[i];
    return NULL;
}

int synth_resolve_preset(const synth_opts *o, synth_preset *p, pt_err *err)
{
    const synth_preset *base = synth_find_preset(o->preset ? o->preset : "");
    if (!base)
        return pt_errf(err, "synth: unknown preset '%s' (tiny, small, bench16, glm5)", o->preset ? o->preset : "");
    *p = *base;
    if (o->layers) {
        if (o->layers <= p->first_dense)
            return pt_errf(err, "synth: --layers %u must exceed first_k_dense_replace %u", o->layers,
                           p->first_dense);
        p->layers = o->layers;
    }
    if (o->experts) {
        if (o->experts < p->top_k || o->experts > 4096)
            return pt_errf(err, "synth: --experts %u must be in [%u, 4096] (top-k %u)", o->experts, p->top_k,
                           p->top_k);
        p->experts = o->experts;
        // keep the group limit when it still divides evenly, else drop it
        if (p->experts % p->n_group != 0 || p->experts / p->n_group < 2 ||
            (p->experts / p->n_group) * p->topk_group < p->top_k) {
            p->n_group = 1;
            p->topk_group = 1;
        }
    }
    return 0;
}

// ---- plan -------------------------------------------------------------------

static synth_tensor *plan_add(synth_plan *pl, const char *name, st_dtype dt, uint32_t n_dims, uint64_t rows,
                              uint64_t cols, synth_init init, float gain, int32_t layer)
{
    if (pl->n == pl->cap) {
        uint32_t cap = pl->cap ? pl->cap * 2 : 1024;
        synth_tensor *t = realloc(pl->t, cap * sizeof *t);
        if (!t)
            return NULL;
        pl->t = t;
        pl->cap = cap;
    }
    synth_tensor *t = &pl->t[pl->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->key, sizeof t->key, "%s", name);
    t->dtype = dt;
    t->n_dims = n_dims;
    t->rows = rows;
    t->cols = cols;
    t->init = init;
    t->gain = gain;
    t->layer = layer;
    t->src = -1;
    t->bytes = rows * cols * synth_dtype_size(dt);
    return t;
}

// An FP8 linear [out, in] and its scale_inv [ceil(out/128), ceil(in/128)].
static int add_linear(synth_plan *pl, const char *name, uint64_t out, uint64_t in, float gain, int32_t layer)
{
    char sn[160];
    if (!plan_add(pl, name, ST_F8_E4M3, 2, out, in, SI_LINEAR, gain, layer))
        return -1;
    int32_t w = (int32_t)pl->n - 1;
    snprintf(sn, sizeof sn, "%s_scale_inv", name);
    synth_tensor *s = plan_add(pl, sn, ST_F32, 2, (out + 127) / 128, (in + 127) / 128, SI_SCALE, 0, layer);
    if (!s)
        return -1;
    s->src = w;
    return 0;
}

static int add_norm(synth_plan *pl, const char *name, uint64_t n, int32_t layer)
{
    return plan_add(pl, name, ST_BF16, 1, 1, n, SI_NORM, 1, layer) ? 0 : -1;
}

static int add_bf16(synth_plan *pl, const char *name, const char *key, uint64_t rows, uint64_t cols,
                    synth_init init, float gain, int32_t layer)
{
    synth_tensor *t = plan_add(pl, name, ST_BF16, 2, rows, cols, init, gain, layer);
    if (!t)
        return -1;
    if (key)
        snprintf(t->key, sizeof t->key, "%s", key);
    return 0;
}

// "<pre>.<fmt>" formatted into buf (fmt takes one unsigned).
static const char *block_name(char *buf, size_t n, const char *pre, const char *fmt, unsigned v)
{
    int k = snprintf(buf, n, "%s.", pre);
    snprintf(buf + k, n - (size_t)k, fmt, v);
    return buf;
}
#define NM(fmt, v) block_name(nm, sizeof nm, pre, fmt, v)

// All tensors of block l (a trunk layer, or the MTP layer when l == layers).
static int add_block(synth_plan *pl, const synth_preset *p, uint32_t l)
{
    char pre[64], nm[160];
    const int32_t L = (int32_t)l;
    const uint64_t H = p->hidden;
    // Residual-branch output projections are scaled down so that the hidden
    // state's RMS stays O(1) over all layers (each sublayer adds ~1/(n+1)).
    const float out_gain = 1.0f / sqrtf((float)(p->layers + p->nextn + 1));
    snprintf(pre, sizeof pre, "model.layers.%u", l);
    int rc = 0;
    if (l == p->layers) { // MTP extras (copies share the source's seed key)
        rc |= add_bf16(pl, NM("embed_tokens.weight", 0u), "model.embed_tokens.weight", p->vocab, H, SI_EMBED, 1, -1);
        rc |= add_norm(pl, NM("enorm.weight", 0u), H, L);
        rc |= add_norm(pl, NM("hnorm.weight", 0u), H, L);
        rc |= add_bf16(pl, NM("eh_proj.weight", 0u), NULL, H, 2 * H, SI_DENSE, 1, L);
    }
    rc |= add_norm(pl, NM("input_layernorm.weight", 0u), H, L);
    rc |= add_linear(pl, NM("self_attn.q_a_proj.weight", 0u), p->q_lora, H, 1, L);
    rc |= add_norm(pl, NM("self_attn.q_a_layernorm.weight", 0u), p->q_lora, L);
    rc |= add_linear(pl, NM("self_attn.q_b_proj.weight", 0u), (uint64_t)p->heads * (p->nope + p->rope), p->q_lora, 1, L);
    rc |= add_linear(pl, NM("self_attn.kv_a_proj_with_mqa.weight", 0u), p->kv_lora + p->rope, H, 1, L);
    rc |= add_norm(pl, NM("self_attn.kv_a_layernorm.weight", 0u), p->kv_lora, L);
    rc |= add_linear(pl, NM("self_attn.kv_b_proj.weight", 0u), (uint64_t)p->heads * (p->nope + p->v_head), p->kv_lora, 1,
                     L);
    rc |= add_linear(pl, NM("self_attn.o_proj.weight", 0u), H, (uint64_t)p->heads * p->v_head, out_gain, L);
    if (p->idx_heads) { // DSA indexer, the MTP layer's included
        rc |= add_linear(pl, NM("self_attn.indexer.wq_b.weight", 0u), (uint64_t)p->idx_heads * p->idx_dim, p->q_lora, 1,
                         L);
        rc |= add_linear(pl, NM("self_attn.indexer.wk.weight", 0u), p->idx_dim, H, 1, L);
        rc |= add_norm(pl, NM("self_attn.indexer.k_norm.weight", 0u), p->idx_dim, L);
        if (!rc && !plan_add(pl, NM("self_attn.indexer.k_norm.bias", 0u), ST_BF16, 1, 1, p->idx_dim, SI_EMBED, 0.5f, L))
            rc = -1;
        rc |= add_bf16(pl, NM("self_attn.indexer.weights_proj.weight", 0u), NULL, p->idx_heads, H, SI_DENSE, 1, L);
    }
    rc |= add_norm(pl, NM("post_attention_layernorm.weight", 0u), H, L);
    if (l < p->first_dense) {
        rc |= add_linear(pl, NM("mlp.gate_proj.weight", 0u), p->dense_ffn, H, 1, L);
        rc |= add_linear(pl, NM("mlp.up_proj.weight", 0u), p->dense_ffn, H, 1, L);
        rc |= add_linear(pl, NM("mlp.down_proj.weight", 0u), H, p->dense_ffn, out_gain, L);
    } else {
        rc |= add_bf16(pl, NM("mlp.gate.weight", 0u), NULL, p->experts, H, SI_GATE, 1, L);
        if (!rc && !plan_add(pl, NM("mlp.gate.e_score_correction_bias", 0u), ST_F32, 1, 1, p->experts, SI_BIAS, 1, L))
            rc = -1;
        for (uint32_t e = 0; e < p->experts && !rc; e++) {
            rc |= add_linear(pl, NM("mlp.experts.%u.gate_proj.weight", e), p->moe_ffn, H, 1, L);
            rc |= add_linear(pl, NM("mlp.experts.%u.up_proj.weight", e), p->moe_ffn, H, 1, L);
            rc |= add_linear(pl, NM("mlp.experts.%u.down_proj.weight", e), H, p->moe_ffn, out_gain, L);
        }
        uint64_t sh = (uint64_t)p->moe_ffn * p->n_shared;
        if (sh) {
            rc |= add_linear(pl, NM("mlp.shared_experts.gate_proj.weight", 0u), sh, H, 1, L);
            rc |= add_linear(pl, NM("mlp.shared_experts.up_proj.weight", 0u), sh, H, 1, L);
            rc |= add_linear(pl, NM("mlp.shared_experts.down_proj.weight", 0u), H, sh, out_gain, L);
        }
    }
    if (l == p->layers) {
        rc |= add_norm(pl, NM("shared_head.norm.weight", 0u), H, L);
        rc |= add_bf16(pl, NM("shared_head.head.weight", 0u), "lm_head.weight", p->vocab, H, SI_DENSE, 1, -1);
    }
    return rc;
}

static int cmp_in_shard(const void *a, const void *b)
{
    const synth_tensor *x = *(synth_tensor *const *)a, *y = *(synth_tensor *const *)b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    size_t ax = synth_dtype_size(x->dtype), ay = synth_dtype_size(y->dtype);
    if (ax != ay)
        return ax > ay ? -1 : 1;
    return strcmp(x->name, y->name);
}

int synth_plan_build(synth_plan *pl, const synth_preset *p, pt_err *err)
{
    memset(pl, 0, sizeof *pl);
    int rc = 0;
    rc |= add_bf16(pl, "model.embed_tokens.weight", NULL, p->vocab, p->hidden, SI_EMBED, 1, -1);
    for (uint32_t l = 0; l < p->layers + p->nextn && !rc; l++)
        rc |= add_block(pl, p, l);
    rc |= add_norm(pl, "model.norm.weight", p->hidden, -1);
    rc |= add_bf16(pl, "lm_head.weight", NULL, p->vocab, p->hidden, SI_DENSE, 1, -1);
    if (rc) {
        synth_plan_free(pl);
        return pt_errf(err, "synth: out of memory building the tensor plan");
    }
    // Shards by size, in model order; a scale_inv stays with its weight.
    uint32_t shard = 0;
    uint64_t used = 0;
    for (uint32_t i = 0; i < pl->n; i++) {
        synth_tensor *t = &pl->t[i];
        uint64_t need = t->bytes;
        if (t->init == SI_LINEAR && i + 1 < pl->n && pl->t[i + 1].src == (int32_t)i)
            need += pl->t[i + 1].bytes;
        if (t->init != SI_SCALE && used > 0 && used + need > p->shard_bytes) {
            shard++;
            used = 0;
        }
        t->shard = shard;
        used += t->bytes;
    }
    pl->n_shards = shard + 1;
    // Order inside each shard, then offsets.
    pl->order = malloc(pl->n * sizeof *pl->order);
    pl->shard_bytes = calloc(pl->n_shards, sizeof *pl->shard_bytes);
    if (!pl->order || !pl->shard_bytes) {
        synth_plan_free(pl);
        return pt_errf(err, "synth: out of memory building the tensor plan");
    }
    for (uint32_t i = 0; i < pl->n; i++)
        pl->order[i] = &pl->t[i];
    qsort(pl->order, pl->n, sizeof *pl->order, cmp_in_shard);
    for (uint32_t i = 0; i < pl->n; i++) {
        synth_tensor *t = pl->order[i];
        t->begin = pl->shard_bytes[t->shard];
        pl->shard_bytes[t->shard] += t->bytes;
        pl->total += t->bytes;
    }
    return 0;
}

void synth_plan_free(synth_plan *pl)
{
    free(pl->t);
    free(pl->order);
    free(pl->shard_bytes);
    memset(pl, 0, sizeof *pl);
}

void synth_shard_name(char *buf, size_t n, uint32_t shard, uint32_t n_shards)
{
    // As in the real checkpoint: model-00001-of-000163.safetensors.
    snprintf(buf, n, "model-%05u-of-%06u.safetensors", shard + 1, n_shards);
}

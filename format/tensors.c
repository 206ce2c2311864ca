// format/tensors.c — the deepseek2 tensor list for given hyper-parameters
// (shared/docs/gguf-deepseek2.md). Order: token_embd, blocks 0..n_blocks-1
// (MTP blocks last), output_norm, output. Within a block: attention, norms,
// then the FFN (dense or MoE), then the nextn extras for MTP blocks.
#include "format/tensors.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct spec_list {
    pt_tensor_spec *v;  // (n,)
    int n, cap;
    bool oom;
} spec_list;

// Appends one spec; ne given innermost first, n_dims values.
static void add(spec_list *l, pt_role role, int32_t layer, bool optional, uint32_t n_dims, const uint64_t *ne,
                const char *fmt, ...)
{
    if (l->oom)
        return;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 256;
        pt_tensor_spec *nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv) {
            l->oom = true;
            return;
        }
        l->v = nv;
        l->cap = cap;
    }
    pt_tensor_spec *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->n_dims = n_dims;
    for (uint32_t d = 0; d < 4; d++)
        s->ne[d] = d < n_dims ? ne[d] : 1;
    s->role = role;
    s->layer = layer;
    s->optional = optional;
}

#define NE(...) (const uint64_t[]){__VA_ARGS__}
#define ADD1(role, il, a, ...) add(l, role, il, false, 1, NE(a), __VA_ARGS__)
#define ADD2(role, il, a, b, ...) add(l, role, il, false, 2, NE(a, b), __VA_ARGS__)
#define ADD3(role, il, a, b, c, ...) add(l, role, il, false, 3, NE(a, b, c), __VA_ARGS__)

static void add_block(spec_list *l, const pt_hparams *hp, uint32_t il)
{
    const int32_t L = (int32_t)il;
    const uint64_t E = hp->n_embd, H = hp->n_head, qk = hp->qk_nope + hp->qk_rope;
    ADD1(PT_ROLE_NORM, L, E, "blk.%u.attn_norm.weight", il);
    if (hp->q_lora_rank) {
        ADD2(PT_ROLE_TRUNK, L, E, hp->q_lora_rank, "blk.%u.attn_q_a.weight", il);
        ADD1(PT_ROLE_NORM, L, hp->q_lora_rank, "blk.%u.attn_q_a_norm.weight", il);
        ADD2(PT_ROLE_TRUNK, L, hp->q_lora_rank, H * qk, "blk.%u.attn_q_b.weight", il);
    } else {
        ADD2(PT_ROLE_TRUNK, L, E, H * qk, "blk.%u.attn_q.weight", il);
    }
    ADD2(PT_ROLE_TRUNK, L, E, hp->kv_lora_rank + hp->qk_rope, "blk.%u.attn_kv_a_mqa.weight", il);
    ADD1(PT_ROLE_NORM, L, hp->kv_lora_rank, "blk.%u.attn_kv_a_norm.weight", il);
    ADD3(PT_ROLE_TRUNK, L, hp->qk_nope, hp->kv_lora_rank, H, "blk.%u.attn_k_b.weight", il);
    ADD3(PT_ROLE_TRUNK, L, hp->kv_lora_rank, hp->v_head, H, "blk.%u.attn_v_b.weight", il);
    ADD2(PT_ROLE_TRUNK, L, H * hp->v_head, E, "blk.%u.attn_output.weight", il);
    if (pt_hp_idx_full(hp, il)) {
        // DSA lightning indexer (llama.cpp glm-dsa names). Optional in an MTP
        // block: without it the MTP block attends densely.
        const bool opt = il >= hp->n_layer;
        const uint64_t Di = hp->idx_head_dim, QI = (uint64_t)hp->idx_n_head * Di;
        add(l, PT_ROLE_TRUNK, L, opt, 2, NE(hp->q_lora_rank, QI), "blk.%u.indexer.attn_q_b.weight", il);
        add(l, PT_ROLE_TRUNK, L, opt, 2, NE(E, Di), "blk.%u.indexer.attn_k.weight", il);
        add(l, PT_ROLE_NORM, L, opt, 1, NE(Di), "blk.%u.indexer.k_norm.weight", il);
        add(l, PT_ROLE_NORM, L, opt, 1, NE(Di), "blk.%u.indexer.k_norm.bias", il);
        add(l, PT_ROLE_TRUNK, L, opt, 2, NE(E, hp->idx_n_head), "blk.%u.indexer.proj.weight", il);
    }
    ADD1(PT_ROLE_NORM, L, E, "blk.%u.ffn_norm.weight", il);
    if (!pt_hp_is_moe(hp, il)) {
        ADD2(PT_ROLE_TRUNK, L, E, hp->n_ff, "blk.%u.ffn_gate.weight", il);
        ADD2(PT_ROLE_TRUNK, L, E, hp->n_ff, "blk.%u.ffn_up.weight", il);
        ADD2(PT_ROLE_TRUNK, L, hp->n_ff, E, "blk.%u.ffn_down.weight", il);
    } else {
        const uint64_t X = hp->n_expert, F = hp->n_ff_exp, S = hp->n_ff_exp * hp->n_expert_shared;
        ADD2(PT_ROLE_ROUTER, L, E, X, "blk.%u.ffn_gate_inp.weight", il);
        ADD1(PT_ROLE_BIAS, L, X, "blk.%u.exp_probs_b.bias", il);
        ADD3(PT_ROLE_EXPERTS, L, E, F, X, "blk.%u.ffn_gate_exps.weight", il);
        ADD3(PT_ROLE_EXPERTS, L, E, F, X, "blk.%u.ffn_up_exps.weight", il);
        ADD3(PT_ROLE_EXPERTS, L, F, E, X, "blk.%u.ffn_down_exps.weight", il);
        if (S) {
            ADD2(PT_ROLE_TRUNK, L, E, S, "blk.%u.ffn_gate_shexp.weight", il);
            ADD2(PT_ROLE_TRUNK, L, E, S, "blk.%u.ffn_up_shexp.weight", il);
            ADD2(PT_ROLE_TRUNK, L, S, E, "blk.%u.ffn_down_shexp.weight", il);
        }
    }
    if (il >= hp->n_layer) { // MTP (nextn) block
        ADD2(PT_ROLE_TRUNK, L, 2 * E, E, "blk.%u.nextn.eh_proj.weight", il);
        ADD1(PT_ROLE_NORM, L, E, "blk.%u.nextn.enorm.weight", il);
        ADD1(PT_ROLE_NORM, L, E, "blk.%u.nextn.hnorm.weight", il);
        // Embedding and head: copies of the main ones in DeepSeek-V3, omitted then.
        add(l, PT_ROLE_TRUNK, L, true, 2, NE(E, hp->n_vocab), "blk.%u.nextn.embed_tokens.weight", il);
        add(l, PT_ROLE_TRUNK, L, true, 2, NE(E, hp->n_vocab), "blk.%u.nextn.shared_head_head.weight", il);
        // The MTP final norm differs from output_norm: required.
        ADD1(PT_ROLE_NORM, L, E, "blk.%u.nextn.shared_head_norm.weight", il);
    }
}

int pt_tensor_specs(const pt_hparams *hp, pt_tensor_spec **out)
{
    assert(hp && out);
    spec_list list = {0}, *l = &list;
    ADD2(PT_ROLE_TRUNK, -1, hp->n_embd, hp->n_vocab, "token_embd.weight");
    for (uint32_t il = 0; il < pt_hp_n_blocks(hp); il++)
        add_block(l, hp, il);
    ADD1(PT_ROLE_NORM, -1, hp->n_embd, "output_norm.weight");
    add(l, PT_ROLE_TRUNK, -1, true, 2, NE(hp->n_embd, hp->n_vocab), "output.weight");
    if (list.oom) {
        free(list.v);
        *out = NULL;
        return -1;
    }
    *out = list.v;
    return list.n;
}

void pt_tensor_kv_b_spec(const pt_hparams *hp, uint32_t il, pt_tensor_spec *out)
{
    assert(hp && out && il < pt_hp_n_blocks(hp));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "blk.%u.attn_kv_b.weight", il);
    out->n_dims = 2;
    out->ne[0] = hp->kv_lora_rank;
    out->ne[1] = (uint64_t)hp->n_head * (hp->qk_nope + hp->v_head);
    out->ne[2] = out->ne[3] = 1;
    out->role = PT_ROLE_TRUNK;
    out->layer = (int32_t)il;
}

void pt_tensor_gate_up_exps_spec(const pt_hparams *hp, uint32_t il, pt_tensor_spec *out)
{
    assert(hp && out && il < pt_hp_n_blocks(hp));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "blk.%u.ffn_gate_up_exps.weight", il);
    out->n_dims = 3;
    out->ne[0] = hp->n_embd;
    out->ne[1] = 2 * (uint64_t)hp->n_ff_exp;
    out->ne[2] = hp->n_expert;
    out->ne[3] = 1;
    out->role = PT_ROLE_EXPERTS;
    out->layer = (int32_t)il;
}

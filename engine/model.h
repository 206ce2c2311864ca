// engine/model.h — a loaded model: hyper-parameters, the trunk in RAM, and
// where each layer's routed experts lie in the file.
#ifndef PETREL_ENGINE_MODEL_H
#define PETREL_ENGINE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "cache/ecache.h"
#include "engine/spec_policy.h"
#include "format/gguf.h"
#include "format/hparams.h"
#include "kernels/matmul.h"
#include "petrel.h"

typedef struct pt_layer {
    float *attn_norm;       // (n_embd)
    pt_mat q_a;             // (q_lora, n_embd)                 when q_lora_rank > 0
    float *q_a_norm;        // (q_lora)
    pt_mat q_b;             // (H*(nope+rope), q_lora)
    pt_mat q;               // (H*(nope+rope), n_embd)           when q_lora_rank == 0
    pt_mat kv_a;            // (kv_lora+rope, n_embd)
    float *kv_a_norm;       // (kv_lora)
    pt_mat k_b;             // (H*kv_lora, nope): head h = rows [h*kv_lora, (h+1)*kv_lora)
    pt_mat v_b;             // (H*v, kv_lora):    head h = rows [h*v, (h+1)*v)
    bool kv_b_legacy;       // the file has attn_kv_b instead: k_b / v_b made from it at load
    pt_mat o;               // (n_embd, H*v)
    // DSA lightning indexer (engine/dsa.c); has_idx false: none in this block
    bool has_idx;
    pt_mat idx_q_b;         // (H_I*d_I, q_lora) head h = rows [h*d_I, (h+1)*d_I), [rope | nope]
    pt_mat idx_k;           // (d_I, n_embd)
    float *idx_k_norm;      // (d_I) LayerNorm weight
    float *idx_k_bias;      // (d_I) LayerNorm bias
    pt_mat idx_proj;        // (H_I, n_embd) per-head weights
    float *ffn_norm;        // (n_embd)
    // dense FFN (il < n_dense_lead)
    pt_mat ffn_gate, ffn_up; // (n_ff, n_embd)
    pt_mat ffn_down;        // (n_embd, n_ff)
    // MoE
    bool moe;
    pt_mat gate_inp;        // (n_expert, n_embd)
    float *exp_bias;        // (n_expert) or NULL
    pt_mat sh_gate, sh_up;  // (n_ff_exp*n_shared, n_embd)
    pt_mat sh_down;         // (n_embd, n_ff_exp*n_shared)
    pt_dtype exps_type[3];  // gate/up/down expert slice types
    bool gate_up_fused;     // the file has ffn_gate_up_exps (gate and up of an expert in one slice pair)
    // MTP (nextn) block extras
    pt_mat eh_proj;         // (n_embd, 2*n_embd)
    float *enorm, *hnorm;   // (n_embd)
    float *head_norm;       // (n_embd) shared_head_norm
    const pt_mat *embed;    // nextn.embed_tokens or the main token_embd
    const pt_mat *head;     // nextn.shared_head_head or the main output
    pt_mat own_embed, own_head;
} pt_layer;

struct petrel_model {
    char *path;
    gguf_file *gguf;         // open file (fd used for expert reads)
    pt_hparams hp;
    petrel_model_params params;
    pt_mat tok_embd;         // (n_vocab, n_embd)
    float *output_norm;      // (n_embd)
    pt_mat output;           // (n_vocab, n_embd)
    pt_layer *layers;        // (n_layer + n_nextn)
    pt_ecache_layer_src *exp_src; // (n_layer + n_nextn)
    void **allocs;           // trunk buffers (freed at close)
    int n_allocs, cap_allocs;
    uint64_t trunk_bytes;
    float softmax_scale;
    float *rope_cos, *rope_sin; // (n_ctx_max, qk_rope/2) computed lazily per context length
    int rope_len;
    pt_spec_prior spec_prior; // step costs a new context's adaptive speculation starts from (engine/spec_policy.h)
};

// Prepares the RoPE table for positions [0, n) (YaRN-corrected frequencies).
int pt_model_rope_prepare(petrel_model *m, int n);

#endif

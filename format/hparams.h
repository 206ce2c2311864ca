// format/hparams.h — the model's hyper-parameters, as one plain struct.
//
// Filled from a Hugging Face config.json by the converter (convert/) and
// from GGUF metadata by the engine (engine/). Written to GGUF under the
// llama.cpp `deepseek2.` keys (docs/format.md), plus `petrel.` keys for what
// llama.cpp does not store (YaRN betas and mscale).
#ifndef PETREL_FORMAT_HPARAMS_H
#define PETREL_FORMAT_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"
#include "format/gguf.h"

#define PT_MAX_EOS 8
#define PT_MAX_BLOCKS 256   // trunk + MTP blocks a file may have (indexer types are kept per block)

typedef struct pt_hparams {
    uint32_t n_vocab;          // vocab_size
    uint32_t n_embd;           // hidden_size
    uint32_t n_layer;          // trunk layers (num_hidden_layers), MTP excluded
    uint32_t n_nextn;          // MTP layers (num_nextn_predict_layers), 0 or 1
    uint32_t n_ctx_train;      // max_position_embeddings
    uint32_t n_head;           // num_attention_heads
    uint32_t q_lora_rank;      // 0 = plain q projection
    uint32_t kv_lora_rank;
    uint32_t qk_nope;          // qk_nope_head_dim
    uint32_t qk_rope;          // qk_rope_head_dim
    uint32_t v_head;           // v_head_dim
    uint32_t n_ff;             // intermediate_size (dense layers)
    uint32_t n_ff_exp;         // moe_intermediate_size
    uint32_t n_expert;         // n_routed_experts
    uint32_t n_expert_used;    // num_experts_per_tok
    uint32_t n_expert_shared;  // n_shared_experts
    uint32_t n_dense_lead;     // first_k_dense_replace
    uint32_t n_group;          // n_group (1 = no group limit)
    uint32_t topk_group;       // topk_group
    uint32_t gating;           // 1 softmax, 2 sigmoid
    bool norm_topk;            // norm_topk_prob
    float routed_scale;        // routed_scaling_factor
    float rms_eps;             // rms_norm_eps
    float rope_theta;
    bool yarn;                 // rope scaling type yarn present
    float yarn_factor;
    uint32_t yarn_orig_ctx;    // original_max_position_embeddings
    float yarn_beta_fast, yarn_beta_slow;
    float yarn_mscale, yarn_mscale_all_dim;
    // DeepSeek Sparse Attention (DSA): the lightning indexer (GLM-5, DeepSeek-V3.2).
    // idx_n_head 0 = no indexer (dense MLA). A file with one is written as
    // llama.cpp's `glm-dsa` architecture (docs/architecture.md, "DSA").
    uint32_t idx_n_head;       // index_n_heads (H_I)
    uint32_t idx_head_dim;     // index_head_dim (d_I); its first qk_rope dims take RoPE
    uint32_t idx_topk;         // index_topk: keys each query attends to
    bool idx_rope_neox;        // indexer RoPE pairs (i, i+R/2) (DeepSeek-V3.2); false: (2i, 2i+1) (GLM)
    uint8_t idx_shared[PT_MAX_BLOCKS]; // (n_blocks) 1 = indexer_types "shared": no indexer weights, the
                                       // selection of the last full layer before it is reused
    int32_t bos_id;            // -1 if unknown
    uint32_t n_eos;
    int32_t eos_ids[PT_MAX_EOS];
} pt_hparams;

// Total layers in the file (trunk + MTP).
static inline uint32_t pt_hp_n_blocks(const pt_hparams *hp) { return hp->n_layer + hp->n_nextn; }
// Is block `il` (0..n_blocks-1) a MoE block? (MTP blocks are MoE.)
static inline bool pt_hp_is_moe(const pt_hparams *hp, uint32_t il) { return il >= hp->n_dense_lead; }

// The GGUF architecture name: "glm-dsa" with an indexer, else "deepseek2".
const char *pt_hparams_arch(const pt_hparams *hp);
// Does block il run its own indexer? (DSA on, and the block not "shared".)
static inline bool pt_hp_idx_full(const pt_hparams *hp, uint32_t il)
{
    return hp->idx_n_head > 0 && (il >= PT_MAX_BLOCKS || !hp->idx_shared[il]);
}

// Reads from GGUF metadata (deepseek2.* keys, petrel.* extras); validates
// ranges and consistency (e.g. n_expert % n_group == 0). -1 + err naming the key.
int pt_hparams_from_gguf(const gguf_file *g, pt_hparams *hp, pt_err *err);
// Writes the deepseek2.* / petrel.* keys.
void pt_hparams_to_gguf(const pt_hparams *hp, gguf_writer *w, uint32_t n_ctx);
// Checks internal consistency; -1 + err naming the field (`what` prefixes it).
int pt_hparams_validate(const pt_hparams *hp, const char *what, pt_err *err);
// KV-cache bytes per token for all blocks incl. MTP, with the DSA indexer's
// key cache (idx_head_dim per block that runs an indexer), at elem_size.
uint64_t pt_hparams_kv_bytes_per_token(const pt_hparams *hp, uint32_t elem_size);

#endif

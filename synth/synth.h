// synth/synth.h — deterministic synthetic DeepSeek-V3 checkpoints.
//
// `petrel synth --preset NAME -o DIR [--seed N]` writes a random (untrained)
// model in exactly the Hugging Face DeepSeek-V3 FP8 layout of
// tests/fixtures/tiny-dsv3: config.json, model.safetensors.index.json,
// model-0000K-of-0000N.safetensors shards split by size, tokenizer.json and
// tokenizer_config.json (a byte-level BPE trained on a built-in text). A
// preset with an indexer (glm5) is a GLM-5 glm_moe_dsa checkpoint instead:
// the same layout plus self_attn.indexer.* (FP8 wq_b / wk, BF16 k_norm and
// weights_proj, as GLM-5's FP8 release) and the index_* config keys.
// Same preset + seed => byte-identical files. Shards are streamed to disk
// tensor by tensor (memory does not grow with the model) under temporary
// names; the index is written last, so a killed run never leaves a
// complete-looking checkpoint. docs of the weight distributions: synth.c.
//
// This header is the folder's contract: cli/cmd_synth.c and the tests use
// only it (test_glm5.c also reads the tensor plan, synth_plan.h). synth/
// depends on common/ and format/safetensors.h (dtype enum) only, never on
// convert/: the generator writes the Hugging Face layout that convert/ reads.
#ifndef PETREL_SYNTH_H
#define PETREL_SYNTH_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"

typedef struct synth_preset {
    const char *name;
    const char *about;          // one line for --help
    uint32_t vocab;             // vocab_size (== tokenizer size)
    uint32_t hidden;            // hidden_size
    uint32_t layers;            // num_hidden_layers (MTP excluded)
    uint32_t first_dense;       // first_k_dense_replace
    uint32_t dense_ffn;         // intermediate_size
    uint32_t experts;           // n_routed_experts
    uint32_t top_k;             // num_experts_per_tok
    uint32_t n_group;           // n_group
    uint32_t topk_group;        // topk_group
    uint32_t n_shared;          // n_shared_experts
    uint32_t moe_ffn;           // moe_intermediate_size
    uint32_t heads;             // num_attention_heads
    uint32_t q_lora;            // q_lora_rank
    uint32_t kv_lora;           // kv_lora_rank
    uint32_t nope;              // qk_nope_head_dim
    uint32_t rope;              // qk_rope_head_dim
    uint32_t v_head;            // v_head_dim
    uint32_t max_pos;           // max_position_embeddings
    double rope_theta;          // rope_theta
    double yarn_factor;         // rope_scaling.factor
    uint32_t yarn_orig;         // rope_scaling.original_max_position_embeddings
    double routed_scale;        // routed_scaling_factor
    uint32_t nextn;             // num_nextn_predict_layers (0 or 1)
    uint64_t shard_bytes;       // target shard size (tensor data bytes)
    // DSA lightning indexer (GLM-5 glm_moe_dsa); idx_heads 0 = none (DeepSeek-V3)
    uint32_t idx_heads;         // index_n_heads
    uint32_t idx_dim;           // index_head_dim
    uint32_t idx_topk;          // index_topk
} synth_preset;

typedef struct synth_opts {
    const char *preset;         // preset name
    const char *out_dir;        // created if missing
    uint64_t seed;              // weights seed (tokenizer does not depend on it)
    uint32_t layers;            // 0 = preset's; else override num_hidden_layers
    uint32_t experts;           // 0 = preset's; else override n_routed_experts
    int threads;                // 0 = OpenMP default
    bool quiet;                 // no progress / summary
} synth_opts;

typedef struct synth_stats {
    uint64_t bytes;             // tensor data bytes (index total_size)
    uint64_t file_bytes;        // bytes written to shards (incl. headers)
    uint32_t shards;            // shard files
    uint32_t tensors;           // tensors in the index
    double seconds;             // wall time of the whole run
} synth_stats;

// Preset table access. NULL when unknown.
const synth_preset *synth_find_preset(const char *name);
// Number of presets and the i-th one (for --help listings).
int synth_n_presets(void);
const synth_preset *synth_preset_at(int i);

// Writes the checkpoint described by opts into opts->out_dir. 0 on success,
// -1 + err (naming the file) on failure; stats (optional) is filled.
int synth_run(const synth_opts *opts, synth_stats *stats, pt_err *err);

// Writes tokenizer.json and tokenizer_config.json for a byte-level BPE with
// exactly vocab_size ids (specials + 256 bytes + merges). max_pos sets
// model_max_length. Deterministic; independent of any seed.
int synth_write_tokenizer(const char *dir, uint32_t vocab_size, uint32_t max_pos, pt_err *err);

// Router bias profile used by synth (exposed for tests): the value added to
// expert e's score in MoE block `layer`. Zipf-like over a per-layer random
// ranking of experts. Deterministic in (seed, layer, e).
float synth_router_bias(uint64_t seed, uint32_t layer, uint32_t e, uint32_t n_experts);

// FP8 E4M3 (OCP E4M3FN) encoding: round-to-nearest-even, saturating to
// +-448 (never produces NaN); exposed for tests.
uint8_t synth_fp8_e4m3(float x);

#endif

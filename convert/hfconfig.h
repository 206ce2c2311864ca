// convert/hfconfig.h — Hugging Face config.json -> pt_hparams.
//
// Accepts the DeepSeek-V3 family (deepseek_v3, kimi_k2, glm_moe_dsa, ...):
// RoPE settings either as top-level `rope_theta` + `rope_scaling` or as the
// transformers-5 `rope_parameters` object; `eos_token_id` an int or a list.
// GLM-5's DSA indexer keys (`index_*`, `indexer_rope_interleave`,
// `indexer_types`) fill the idx_* fields. Keys Petrel recognises but does
// not implement and keys it does not know at all are collected so that the converter can
// report them instead of ignoring them silently.
#ifndef PETREL_CONVERT_HFCONFIG_H
#define PETREL_CONVERT_HFCONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"
#include "format/hparams.h"

#define PT_HF_MAX_NOTES 64

typedef struct pt_hf_config {
    pt_hparams hp;
    char model_type[64];        // "deepseek_v3", "glm_moe_dsa", ...
    bool tie_embeddings;        // tie_word_embeddings: no lm_head
    bool fp8;                   // quantization_config.quant_method == "fp8"
    uint32_t fp8_block[2];      // weight_block_size (128, 128)
    uint32_t n_unimpl;
    char *unimpl[PT_HF_MAX_NOTES];  // (n_unimpl,) "key=value: why" for unimplemented settings
    uint32_t n_unknown;
    char *unknown[PT_HF_MAX_NOTES]; // (n_unknown,) keys not recognised at all
} pt_hf_config;

// Parses the config.json at `path`. -1 + err naming the file and the key on
// a missing required key, a value of the wrong type or an unsupported setting.
int pt_hf_config_load(const char *path, pt_hf_config *cfg, pt_err *err);
void pt_hf_config_free(pt_hf_config *cfg);

#endif

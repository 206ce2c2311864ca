// format/tensors.h — the tensors a deepseek2 GGUF holds for given
// hyper-parameters: names, ggml shapes and roles (shared/docs contract,
// docs/format.md). The converter lays files out from this list; the engine
// checks a file against it.
#ifndef PETREL_FORMAT_TENSORS_H
#define PETREL_FORMAT_TENSORS_H

#include <stdbool.h>
#include <stdint.h>
#include "format/hparams.h"

typedef enum pt_role {
    PT_ROLE_NORM,      // 1-D norm weights: always F32
    PT_ROLE_BIAS,      // exp_probs_b.bias: always F32
    PT_ROLE_ROUTER,    // ffn_gate_inp: always F32 (as llama-quantize)
    PT_ROLE_TRUNK,     // other trunk matrices: --trunk-type
    PT_ROLE_EXPERTS,   // ffn_{gate,up,down}_exps: --expert-type
} pt_role;

typedef struct pt_tensor_spec {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[4];        // ggml order
    pt_role role;
    int32_t layer;         // block index, -1 for global tensors
    bool optional;         // e.g. MTP embed/head copies, output.weight
} pt_tensor_spec;

// Fills *out with a malloc'ed array of every tensor expected for hp
// (including optional ones, flagged). Returns the count, -1 on OOM.
int pt_tensor_specs(const pt_hparams *hp, pt_tensor_spec **out);

// The legacy alternative to block il's attn_k_b + attn_v_b: llama.cpp's
// deepseek2 files from before the MLA split hold one
// blk.N.attn_kv_b.weight, ggml ne {kv_lora, H*(nope+v)}: per head h, rows
// h*(nope+v) .. +nope are k (a {kv_lora}-row per nope channel), the next v
// rows are v. (convert_hf_to_gguf.py's DeepseekV2Model: kv_b_proj viewed
// as [H, nope+v, kv_lora]; attn_k_b = the k part transposed to
// [H, kv_lora, nope], attn_v_b = the v part [H, v, kv_lora].) Not in the
// list above: the converter never writes it; the engine accepts it instead
// of the pair.
void pt_tensor_kv_b_spec(const pt_hparams *hp, uint32_t il, pt_tensor_spec *out);

// The fused alternative to MoE block il's ffn_gate_exps + ffn_up_exps
// (convert_hf_to_gguf.py --fuse-gate-up-exps): blk.N.ffn_gate_up_exps.weight,
// ggml ne {n_embd, 2*n_ff_exp, n_expert}; expert e's rows 0..n_ff_exp-1 are
// its gate, the next n_ff_exp its up. Engine-only, as above.
void pt_tensor_gate_up_exps_spec(const pt_hparams *hp, uint32_t il, pt_tensor_spec *out);

#endif

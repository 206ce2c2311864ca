// convert/plan.h — the output layout of a conversion, computed up front.
//
// The layout (GGUF header bytes, every tensor's type, offset and size, and
// which checkpoint tensor feeds which byte range) is a pure function of
// config.json, the index, the type options, the tokenizer files and the
// MTP de-duplication decision; no weight is read to build it. The converter
// executes its units shard by shard; `--plan` prints its summary.
#ifndef PETREL_CONVERT_PLAN_H
#define PETREL_CONVERT_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"
#include "convert/hfconfig.h"
#include "convert/hfindex.h"
#include "format/gguf.h"
#include "format/tensors.h"
#include "kernels/quant.h"

typedef enum pt_xform {
    PT_X_COPY,   // HF [out, in] -> ne {in, out}, rows unchanged (also 1-D and expert slices)
    PT_X_KB,     // kv_b_proj -> attn_k_b: per head the first nope rows, transposed
    PT_X_VB,     // kv_b_proj -> attn_v_b: per head the last v rows
} pt_xform;

typedef struct pt_out_tensor {
    pt_tensor_spec spec;
    pt_dtype type;          // stored type
    pt_dtype requested;     // type the options asked for (differs on a fallback)
    bool fallback;          // row length not whole blocks of `requested`: llama-quantize's
                            // fallback type (Q4_K -> Q5_0 ...), BF16 if even that does not fit
    int32_t rule;           // index of the --type-rule that chose `requested`, -1 if none
    pt_xform xform;
    uint64_t offset, size;  // absolute byte offset in the file, bytes
    uint64_t src_shape[2];  // expected HF shape of each source [rows, cols]; 1-D: [n, 0]
    uint32_t src_dims;      // 1 or 2
    char hf_name[128];      // HF source name ("%d" in place of the expert index for experts)
} pt_out_tensor;

typedef struct pt_unit {    // one unit of work: a whole tensor or one expert's slice
    uint32_t tensor;        // index into plan->tensors
    int32_t expert;         // slice index, -1 for a whole tensor
    int32_t shard;          // shard holding the weight (-1: unknown, plan from config alone)
    int32_t scale_shard;    // shard holding "<name>_scale_inv", -1 if the index has none
    uint64_t out_offset;    // absolute
    uint64_t out_bytes;
} pt_unit;

// `--type-rule REGEX=TYPE`: a matrix whose GGUF name the regex (PCRE2)
// matches anywhere, like llama-quantize's --tensor-type, is stored as TYPE;
// the first matching rule wins. Norms, router and bias stay F32.
typedef struct pt_type_rule {
    const char *pattern;    // PCRE2 pattern
    pt_dtype type;
} pt_type_rule;
#define PT_MAX_TYPE_RULES 32

typedef struct pt_plan_opts {
    pt_dtype expert_type;   // default Q4_0
    pt_dtype trunk_type;    // default Q8_0
    const pt_type_rule *rules; // (n_rules,) in priority order, may be NULL
    uint32_t n_rules;
    const char *tokenizer_json;    // NULL if none
    const char *tokenizer_config;  // NULL if none
    bool omit_mtp_embed;    // MTP embed_tokens identical to token_embd: not stored
    bool omit_mtp_head;     // MTP shared_head.head identical to lm_head: not stored
} pt_plan_opts;

typedef struct pt_plan {
    const pt_hf_config *cfg;
    const pt_hf_index *ix;  // NULL: from config.json alone
    gguf_writer *w;         // header (metadata + tensor infos)
    uint32_t n_tensors;
    pt_out_tensor *tensors; // (n_tensors,)
    uint32_t n_units;
    pt_unit *units;         // (n_units,)
    uint64_t header_size, file_size;
    uint64_t bytes_by_type[32];   // tensor bytes per pt_dtype id
    uint64_t trunk_bytes, expert_bytes;
    uint64_t n_routed_experts;    // MoE blocks (MTP included) x n_expert
    uint64_t bytes_per_expert;    // one expert's gate+up+down slices
    uint32_t n_fallbacks;
    const pt_type_rule *rules;    // (n_rules,) the options' rules (not owned)
    uint32_t n_rules;
    uint32_t rule_hits[PT_MAX_TYPE_RULES]; // tensors each --type-rule chose the type of
    uint32_t count_by_type[32];   // tensors per pt_dtype id
    uint64_t n_unused;            // index tensors not consumed
    char unused_example[4][128];  // first few of them
    bool mtp_embed_present, mtp_head_present; // in the index (before de-duplication)
} pt_plan;

// Builds the layout. -1 + err (naming the index file and the tensor) when a
// tensor the config implies is missing from the index, or naming the rule
// when a --type-rule does not compile.
int pt_plan_build(pt_plan *p, const pt_hf_config *cfg, pt_hf_index *ix, const pt_plan_opts *o, pt_err *err);
void pt_plan_free(pt_plan *p);
// HF name of a unit's weight into buf.
void pt_plan_unit_name(const pt_plan *p, const pt_unit *u, char *buf, size_t len);
// llama-quantize's type for a row of ne0 values wanted in type t: t itself
// when ne0 is whole blocks of t; else Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0,
// Q5_K -> Q5_1, Q6_K -> Q8_0, the 256-block IQ types -> IQ4_NL; BF16 when
// that does not fit either (llama-quantize: F16).
pt_dtype pt_plan_fallback_type(pt_dtype t, uint64_t ne0);
// The "fallback: NAME row length N is not a multiple of B: T instead of R"
// line of tensor i (both the summary and --plan print it).
void pt_plan_print_fallback(const pt_plan *p, uint32_t i, FILE *f, const char *indent);
// Prints the `--plan` summary ("key: value" lines) to f.
void pt_plan_print(const pt_plan *p, FILE *f);

#endif

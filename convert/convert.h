// convert/convert.h — `petrel convert`: Hugging Face checkpoint -> GGUF.
//
// Shard by shard: the layout is computed up front (convert/plan.h); each
// shard's tensors are converted and written at their final offsets into
// `<out>.partial`; after a shard's data are fdatasynced, a `done` line goes
// to `<out>.journal` (convert/journal.h). A killed conversion resumes from
// the journal and ends byte-identical to an uninterrupted one; the result is
// renamed to <out> only when complete. See docs/format.md.
#ifndef PETREL_CONVERT_CONVERT_H
#define PETREL_CONVERT_CONVERT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"
#include "convert/plan.h"
#include "kernels/quant.h"

typedef struct pt_convert_opts {
    const char *in_dir;         // checkpoint directory
    const char *out_path;       // MODEL.gguf
    pt_dtype expert_type;       // routed experts (default q4_0)
    pt_dtype trunk_type;        // other matrices (default q8_0)
    const pt_type_rule *rules;  // (n_rules,) --type-rule REGEX=TYPE, first match wins
    uint32_t n_rules;
    int threads;                // 0 = OpenMP default
    bool delete_source;         // unlink each shard once everything taken from it is durable
    const char *fetch_cmd;      // "CMD {file}" run in in_dir when a shard is missing, or NULL
    const char *tokenizer;      // --tokenizer: tokenizer.json, tiktoken.model or a folder; NULL = in_dir's
    bool force;                 // redo even if complete / discard a journal
    uint64_t debug_stop_after_units;  // test hook: SIGKILL self after N units (0 = off)
    uint64_t debug_stop_after_shards; // test hook: SIGKILL self after N shards marked done
    FILE *summary;              // where the summary goes (stdout)
} pt_convert_opts;

// Runs a conversion. 0 on success (also when <out> is already complete);
// -1 + err naming the file and the tensor or key otherwise.
int pt_convert_run(const pt_convert_opts *o, pt_err *err);

// `--plan`: prints the layout for a checkpoint directory (config.json + index,
// or config.json alone) or a config.json path, without reading any weight,
// with the types of o (expert_type, trunk_type, rules; the rest unused).
int pt_convert_plan(const char *path, const pt_convert_opts *o, FILE *out, pt_err *err);

#endif

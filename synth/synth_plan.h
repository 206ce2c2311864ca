// synth/synth_plan.h — the tensor plan of a synthetic checkpoint (internal).
#ifndef PETREL_SYNTH_PLAN_H
#define PETREL_SYNTH_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "synth/synth_int.h"

typedef struct synth_plan {
    synth_tensor *t;            // (n,) in model order
    uint32_t n, cap;
    synth_tensor **order;       // (n,) shard by shard, in file data order
    uint32_t n_shards;
    uint64_t *shard_bytes;      // (n_shards,) data bytes per shard
    uint64_t total;             // sum of tensor bytes (index total_size)
} synth_plan;

// Applies --layers / --experts overrides to the named preset.
int synth_resolve_preset(const synth_opts *o, synth_preset *p, pt_err *err);
// Lists all tensors, assigns shards and data offsets.
int synth_plan_build(synth_plan *pl, const synth_preset *p, pt_err *err);
void synth_plan_free(synth_plan *pl);
// "model-0000K-of-00000N.safetensors" for 0-based shard K-1.
void synth_shard_name(char *buf, size_t n, uint32_t shard, uint32_t n_shards);

// Writers (synth_json.c): config.json and the index, as strings (malloc'ed).
char *synth_config_json(const synth_preset *p);
char *synth_index_json(const synth_plan *pl);
// The safetensors header of one shard, padded with spaces to 8 bytes
// (malloc'ed; *len = its length without the 8-byte length prefix).
char *synth_shard_header(const synth_plan *pl, uint32_t shard, size_t *len);

#endif

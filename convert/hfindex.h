// convert/hfindex.h — which checkpoint tensor lives in which shard.
//
// Read from `model.safetensors.index.json` (weight_map), or, for a
// single-file checkpoint, from the header of `model.safetensors`. Shards are
// kept in sorted file-name order (model-00001-of-N first); tensor names are
// looked up through a hash table (a DeepSeek-V3 index has ~90k names).
#ifndef PETREL_CONVERT_HFINDEX_H
#define PETREL_CONVERT_HFINDEX_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"

typedef struct pt_hf_index {
    char *path;            // the index file (or the single shard) named in errors
    uint64_t total_size;   // metadata.total_size, 0 when absent
    uint32_t n_shards;
    char **shards;         // (n_shards,) file names relative to the checkpoint directory
    uint64_t n_names;
    char **names;          // (n_names,) tensor names
    uint32_t *shard_of;    // (n_names,) index into shards
    bool *used;            // (n_names,) set by the planner for tensors it consumes
    uint64_t ht_cap;       // power of two
    uint64_t *ht;          // (ht_cap,) name index + 1, 0 = empty
} pt_hf_index;

// Loads the index of checkpoint directory `dir`. -1 + err naming the file
// (and the tensor or key) when neither file exists or the JSON is malformed.
int pt_hf_index_load(const char *dir, pt_hf_index *ix, pt_err *err);
void pt_hf_index_free(pt_hf_index *ix);
// Name index of a tensor, or -1.
int64_t pt_hf_index_find(const pt_hf_index *ix, const char *name);

#endif

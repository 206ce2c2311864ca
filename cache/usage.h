// cache/usage.h — routing heat recorded beside the model (MODEL.gguf.usage)
// and the hot-store chosen from it.
//
// The file is text: a header line "petrel-usage 1 <blocks> <experts>", then
// one line per block with the use count of each expert. It is rewritten
// atomically (temp name, fsync, rename) when a context closes, adding that
// session's counts to what the file held then, so the engine pins better
// experts the more it is used.
#ifndef PETREL_CACHE_USAGE_H
#define PETREL_CACHE_USAGE_H

#include <stdint.h>

#include "cache/ecache.h"
#include "common/err.h"

// Fills counts (n_blocks * n_expert) from path: 1 when read, 0 (counts
// zeroed) when the file is missing, malformed or of another shape.
int pt_usage_load(const char *path, int n_blocks, int n_expert, uint64_t *counts);
// Adds add[] to the counts now in the file and rewrites it atomically.
int pt_usage_merge_save(const char *path, int n_blocks, int n_expert, const uint64_t *add, pt_err *err);
// Picks the hottest (block, expert) pairs whose slots fit in `bytes` (most
// used first, only experts used at least once, ties to the lower block and
// expert). Writes (n, 2) pairs to out (room for all experts); returns n.
int pt_usage_pick_hot(const uint64_t *counts, int n_blocks, int n_expert, const pt_ecache_layer_src *layers,
                      uint64_t bytes, int32_t *out);

#endif

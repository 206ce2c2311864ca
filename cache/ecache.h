// cache/ecache.h — the routed-expert cache: per-layer slots under one
// budget, LRU eviction, pinning while an expert is in use.
//
// The engine asks for (layer, expert); the cache returns pointers to that
// expert's three weight slices (gate, up, down) in RAM, reading them from
// the model file on a miss. An expert stays pinned until released, and a
// pinned expert is never evicted, so a layer with one slot still works: the
// engine computes experts one after another.
#ifndef PETREL_CACHE_ECACHE_H
#define PETREL_CACHE_ECACHE_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"

typedef struct pt_ecache_layer_src {
    int n_expert;           // routed experts in this layer (0: not a MoE layer)
    uint64_t off[3];        // absolute file offsets of expert 0's gate/up/down slices
    uint64_t bytes[3];      // bytes of one expert's gate/up/down slice
} pt_ecache_layer_src;

typedef struct pt_ecache_cfg {
    int fd;                           // model file
    const char *path;                 // for messages
    int n_layers;                     // blocks (trunk + MTP)
    const pt_ecache_layer_src *layers; // (n_layers,)
    int slots_per_layer;              // > 0: fixed slots per MoE layer
    uint64_t budget_bytes;            // else: total bytes, split evenly over MoE layers
} pt_ecache_cfg;

typedef struct pt_ecache_stats {
    uint64_t hits, misses, bytes_read;
    double t_read_s;
} pt_ecache_stats;

typedef struct pt_ecache pt_ecache;

pt_ecache *pt_ecache_new(const pt_ecache_cfg *cfg, pt_err *err);
void pt_ecache_free(pt_ecache *c);
// Pins expert e of layer il and sets w[0..2] to its gate/up/down slices.
// -1 + err on a read failure (naming layer, expert, file, offset) or when
// every slot of the layer is pinned.
int pt_ecache_acquire(pt_ecache *c, int il, int e, const void *w[3], pt_err *err);
void pt_ecache_release(pt_ecache *c, int il, int e);
void pt_ecache_get_stats(const pt_ecache *c, pt_ecache_stats *s);
void pt_ecache_reset_stats(pt_ecache *c);
uint64_t pt_ecache_bytes(const pt_ecache *c);   // bytes of slot memory allocated
int pt_ecache_slots(const pt_ecache *c, int il); // capacity of a layer

#endif

// cache/hotstore.h — how much of the expert budget the hot-store takes.
//
// One function shared by the engine (engine/stream.c) and the cache-policy
// replay (bench/bench_trace.c), so that the replay sizes the hot-store
// exactly as a real session does.
#ifndef PETREL_CACHE_HOTSTORE_H
#define PETREL_CACHE_HOTSTORE_H

#include <stdint.h>

// Bytes to pin in the hot-store out of an expert budget of eb bytes (budget
// mode) when pin_bytes are asked for. Nothing is pinned unless asked: with
// eviction by decayed use counts seeded from the same heat (cache/ecache.c),
// a hot-store fixed from earlier sessions' heat only loses hits, on the
// trained model's routing and on random routing alike (bench/trace-replay.sh,
// docs/benchmarks.md). The reserve kept for the adaptive slots is what one
// token needs beyond the hot-store (min_lru: one slot per MoE layer, plus
// n_used slots of an average layer for the layer being computed and each
// layer predicted ahead), at least an eighth of eb, at most half of it,
// never below what one token needs (n_used slots in one layer, one in each
// other layer).
uint64_t pt_hot_store_bytes(uint64_t eb, uint64_t pin_bytes, uint64_t min_lru, int n_moe, int n_used,
                            int prefetch_depth);

#endif

// cache/ecache.h — the routed-expert cache: per-layer LRU slots under one
// global byte budget, a hot-store of pinned experts, asynchronous reads.
//
// The engine asks for (layer, expert). A resident expert is a hit (tier:
// hot-store, prefetched, or LRU); an absent one gets a slot and its read is
// started through the reader (io/reader.h); pt_ecache_wait returns experts
// as their reads finish. Slots:
//   - budget mode: slots are created while the byte budget has room; once
//     it is full, a layer at or above its fair share (budget /
//     MoE layers) evicts one of its own experts, a layer below it takes one
//     of the layer furthest above its share; a layer whose slots are all
//     in use, with no layer above its share, takes one of the layer
//     holding the most. So the split follows use rather than being fixed.
// Victims: the expert with the lowest score, the least recently used among
// equals. The score is this session's demand uses, each counting half as
// much every `halflife` tokens of the layer (recency and frequency
// together; the engine's PT_EC_HALFLIFE), starting from a prior from the
// usage file (the expert's share of earlier uses, in the same units, decaying
// the same way). On
// random routing (close to independent from token to token, skewed
// popularity) this is LFU, which beats LRU by far; on the trained model's
// routing (issue 13) the decay adds 1-2 points (bench/trace-replay.sh).
// Next-aware (with a half-life, unless no_next): each layer also learns
// online which experts a step uses right after a step using each expert,
// and the score is first the chance that the next step uses the expert,
// given the experts of the step in progress (the current token's known
// selection; before the layer's step, at prefetch time, the previous
// token's), the decayed uses weighing 0.05 each: +1.5-2.5 points on the
// trained model's routing. A layer's step opens with a demand after another
// layer's demand or after a release in that layer.
// Without a half-life: plain use counts (prior heat + this session); plain
// LRU with lru_only. A prefetched expert not yet used ranks one use lower,
// so mispredictions leave first.
//   - slot mode (slots_per_layer > 0, tests): exactly that many LRU slots
//     per layer.
// Hot-store experts (given by the caller, chosen from routing heat) get
// their own slots on first use and are never evicted. Nothing that is
// pinned (in use) or still being read is ever evicted; a request that finds
// no evictable slot returns PT_EC_NOROOM and may be repeated after a
// release or a finished read.
//
// Each slot holds the expert's gate/up/down slices, each read through its
// enclosing 4 KiB-aligned range (pt_io_span), so O_DIRECT works for slices
// at any offset. The memory of every slot the cache may hold (the budget or
// the fixed slots, plus the hot-store) is mapped and faulted in by all
// threads when the cache is created, so reads never page-fault; slots that
// layers give up are reused, also by layers whose slots have another size
// (split from larger given-back pieces, neighbouring pieces merged).
// Single-threaded.
#ifndef PETREL_CACHE_ECACHE_H
#define PETREL_CACHE_ECACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

typedef struct pt_reader pt_reader;

typedef struct pt_ecache_layer_src {
    int n_expert;           // routed experts in this layer (0: not a MoE layer)
    uint64_t off[3];        // located offsets (io/io.h) of expert 0's gate/up/down slices
    uint64_t bytes[3];      // bytes of one expert's gate/up/down slice
    uint64_t stride[3];     // bytes from expert e's slice to e+1's; 0 = bytes[k] (one
                            // tensor per slice kind); 2*bytes for a fused gate_up tensor
} pt_ecache_layer_src;

typedef struct pt_ecache_cfg {
    pt_reader *reader;                 // reads (owned by the caller, outlives the cache)
    const char *path;                  // for messages
    int n_layers;                      // blocks (trunk + MTP)
    const pt_ecache_layer_src *layers; // (n_layers,)
    int slots_per_layer;               // > 0: fixed LRU slots per MoE layer
    uint64_t budget_bytes;             // else: bytes for all LRU slots
    const int32_t *hot;                // (n_hot, 2) (layer, expert) pairs of the hot-store, or NULL
    int n_hot;
    const uint64_t *heat;              // (n_layers, heat_stride) prior use counts (usage file), or NULL
    int heat_stride;
    bool lru_only;                     // plain LRU eviction (else frequency-aware, see above)
    double halflife;                   // > 0: uses decay by half every halflife tokens of
                                       // the layer (recency + frequency); 0: plain counts
    int n_used;                        // experts per token (the decay's unit; 0 = 1)
    bool no_next;                      // without next-aware eviction (see below; with a half-life only)
} pt_ecache_cfg;

// Per-layer counters (one "use" = one distinct expert of one batch).
typedef struct pt_ecache_layer_stats {
    uint64_t hits_lru;          // resident in an LRU slot
    uint64_t hits_hot;          // resident in the hot-store
    uint64_t hits_prefetch;     // brought in (or being brought in) by prefetch
    uint64_t misses;            // needed a demand read
    uint64_t bytes_read;        // slice bytes read (demand + prefetch)
    uint64_t prefetch_reads;    // prefetch reads started
    uint64_t prefetch_wasted_bytes; // prefetched, evicted unused
    uint64_t predicted, predicted_correct, actual; // lookahead recall counters
    double t_wait_s;            // time the engine stalled on reads for this layer
} pt_ecache_layer_stats;

typedef struct pt_ecache_stats {
    uint64_t hits, misses, bytes_read;
    double t_read_s;
} pt_ecache_stats;

enum {
    PT_EC_READY = 0,   // resident and readable
    PT_EC_LOADING = 1, // its read is in flight
    PT_EC_NOROOM = 2,  // absent, and no slot can be freed now
};
enum { PT_EC_DEMAND = 0, PT_EC_PREFETCH = 1, PT_EC_RETRY = 2, PT_EC_AHEAD = 4 }; // (3: a result)
enum { PT_EC_SKIPPED = 3 }; // pt_ecache_prefetch: not worth reading

// Prefetch confidence (pt_ecache_prefetch): margins are binned from
// PT_EC_PF_LO in steps of PT_EC_PF_W (the ends open); a bin's counts are
// halved when they reach PT_EC_PF_WINDOW; the prior weighs PT_EC_PF_PRIOR
// predictions. Default bar: PT_EC_PF_MIN, PT_EC_PF_VICTIM; a resident's
// prediction weighs PT_EC_PF_PRED in its eviction rank (see ecache.c).
// Chosen on bench/trace-replay.sh --trained (docs/benchmarks.md): a floor of
// 1/4 cuts what is rarely used and costs nothing there; the victim bar at 1
// and the prediction weight at 1 gained 1-2 points each at every capacity.
#define PT_EC_PF_BINS 20
#define PT_EC_PF_LO (-0.45f)
#define PT_EC_PF_W 0.05f
#define PT_EC_PF_WINDOW 4096u
#define PT_EC_PF_PRIOR 4.0
#define PT_EC_PF_MIN 0.25f
#define PT_EC_PF_VICTIM 1.0f
#define PT_EC_PF_PRED 1.0f
// Below a share of PT_EC_PF_COLD of the recent demand uses needing a read (the last
// ~PT_EC_PF_COLD_WINDOW uses of all layers), an absent expert's chance of use is
// scaled down in proportion: the cache holds the working set (ecache.c, cold_factor).
#define PT_EC_PF_COLD 0.1
#define PT_EC_PF_COLD_WINDOW 32.0

// The engine's half-life of expert uses, in tokens (engine/stream.c; the
// cache-policy replay bench/bench_trace.c uses the same).
#define PT_EC_HALFLIFE 32.0

typedef struct pt_ecache pt_ecache;

pt_ecache *pt_ecache_new(const pt_ecache_cfg *cfg, pt_err *err);
// Waits for reads in flight (their slots), then frees everything.
void pt_ecache_free(pt_ecache *c);

// Asks for expert e of layer il; starts its read when absent and a slot can
// be had. kind: PT_EC_DEMAND counts the use in the statistics (once per
// distinct expert and batch), PT_EC_RETRY repeats a NOROOM demand without
// counting it again, PT_EC_PREFETCH starts a speculative read (it only
// evicts within the layer and never counts a use), PT_EC_AHEAD a prefill's
// read-ahead of the next layer (as PT_EC_PREFETCH, but its slot may come
// from another layer, as a demand's: a cold prefill's next layer holds few
// or no slots of its own). Returns PT_EC_READY / LOADING / NOROOM, or -1 +
// err when a read cannot be queued.
int pt_ecache_request(pt_ecache *c, int il, int e, int kind, pt_err *err);
// The lookahead prefetch with a confidence cut: records expert e as
// predicted for layer il's next step with the router's margin (its
// selection score minus the midpoint between the n_used-th and the next
// best score: > 0 when the prediction selects it; several predictions of
// one expert before the step keep the highest), and reads it (as
// PT_EC_PREFETCH) only when its chance of being used, estimated from this
// layer's earlier predictions of about that margin (counted when their step
// is over), is at least the bar: min_chance, and when a resident would
// have to leave for it, victim_factor times that resident's chance of use
// by the next step (next-aware eviction's estimate). The chance is scaled
// down while fewer than PT_EC_PF_COLD of the recent demand uses needed a
// read: the cache then holds the working set and an absent expert is a
// misprediction. Returns READY / LOADING (resident, or its read started),
// PT_EC_SKIPPED, NOROOM, or -1.
int pt_ecache_prefetch(pt_ecache *c, int il, int e, float margin, pt_err *err);
// The margin pt_ecache_prefetch takes for the k-th best of a token's
// experts: sorted holds the token's selection scores best first (at least
// n_used + 1 of them; -inf for experts a group limit drops).
static inline float pt_ecache_margin(const float *sorted, int n_used, int k)
{
    const float lo = sorted[n_used], hi = sorted[n_used - 1];
    const float mid = lo > -3.0e38f ? 0.5f * (hi + lo) : hi;
    return sorted[k] > -3.0e38f ? sorted[k] - mid : -1.0e30f;
}
// Sets the bar of pt_ecache_prefetch (defaults PT_EC_PF_MIN, PT_EC_PF_VICTIM).
void pt_ecache_set_prefetch_bar(pt_ecache *c, float min_chance, float victim_factor, float pred_weight);
// Its lowest chance of use alone, read and set (engine/stream_prefetch.c
// raises it while the engine is disk-bound).
float pt_ecache_prefetch_min(const pt_ecache *c);
void pt_ecache_set_prefetch_min(pt_ecache *c, float min_chance);
// Sets pt_ecache_prefetch's cold check: the share of recent uses needing a read
// below which absent experts' chances are scaled down (default PT_EC_PF_COLD;
// 0: off, the cut as before it, for A/B runs).
void pt_ecache_set_cold_bar(pt_ecache *c, double share);
// Pins a READY expert (not evictable until released) and sets w[0..2] to its
// gate/up/down slices.
void pt_ecache_pin(pt_ecache *c, int il, int e, const void *w[3]);
void pt_ecache_release(pt_ecache *c, int il, int e);
bool pt_ecache_is_ready(const pt_ecache *c, int il, int e);
bool pt_ecache_is_loading(const pt_ecache *c, int il, int e);
// Waits for the next read to finish: 1 with *il, *e set (now READY); 0 when
// nothing is in flight; -1 when that read failed (the slot is emptied, err
// names layer, expert, file and offset).
int pt_ecache_wait(pt_ecache *c, int *il, int *e, pt_err *err);
// Like pt_ecache_wait, but returns 0 at once when no read has finished yet.
int pt_ecache_poll(pt_ecache *c, int *il, int *e, pt_err *err);
// Blocking convenience: request (as a demand), wait until ready, pin.
int pt_ecache_acquire(pt_ecache *c, int il, int e, const void *w[3], pt_err *err);

void pt_ecache_get_stats(const pt_ecache *c, pt_ecache_stats *s);
void pt_ecache_reset_stats(pt_ecache *c);
pt_ecache_layer_stats *pt_ecache_lstats(pt_ecache *c, int il); // (mutable) counters of layer il
uint64_t pt_ecache_bytes(const pt_ecache *c);   // bytes of slot memory allocated now
uint64_t pt_ecache_hot_bytes(const pt_ecache *c); // ... of which hot-store slots
// Slot memory ever taken from the heap instead of the arena (0 unless the
// arena, sized for the budget, is fragmented by slots of unequal sizes).
uint64_t pt_ecache_heap_bytes(const pt_ecache *c);
int pt_ecache_slots(const pt_ecache *c, int il); // fair share (slot mode: the fixed count) of a layer
uint64_t pt_ecache_slot_bytes(const pt_ecache *c, int il); // bytes of one slot of layer il
// Bytes of one slot for a layer: each slice's aligned span at worst.
uint64_t pt_ecache_slot_bytes_for(const pt_ecache_layer_src *src);

#endif

// engine/stream.h — expert streaming state of a context: the RAM budget,
// the reader, the expert cache with its hot-store, routing heat (the usage
// file), the lookahead predictor and the trace. Internal to the engine.
#ifndef PETREL_ENGINE_STREAM_H
#define PETREL_ENGINE_STREAM_H

#include <stdio.h>

#include "engine/context.h"
#include "io/reader.h"

// Batches of at most this many tokens compute their ready experts side by
// side (one per thread), at most PT_PAR_EXPERT_MAX at a time.
#define PT_PAR_EXPERT_B 8
#define PT_PAR_EXPERT_MAX 64
// Larger batches (prefill chunks) compute side by side the ready experts
// that at most this many of their rows chose; experts with more rows
// compute one at a time, each product split over the threads.
#define PT_PAR_BIG_B 64

typedef struct pt_stream {
    pt_reader *reader;
    uint64_t budget;          // RAM budget (bytes) everything is held under
    uint64_t expert_budget;   // LRU slot bytes
    uint64_t *heat;           // (n_blocks, n_expert_max) uses this session
    uint64_t *heat_old;       // (n_blocks, n_expert_max) from the usage file
    int n_expert_max;
    char *usage_path;         // NULL: usage not recorded
    // MoE loop scratch
    float *sh_out;            // (n_batch, n_embd) shared-expert output
    int prows;                // rows per thread of pscratch: PT_PAR_EXPERT_B, or up to
                              // PT_PAR_BIG_B when n_batch is larger
    int side_rows;            // experts of larger batches with at most this many rows
                              // compute side by side (<= prows; PETREL_PP_SIDE_ROWS lowers it)
    float *pscratch;          // (n_threads, prows*(n_embd + 2*n_ff_exp) + 2*prows)
                              // per-thread scratch for experts computed side by side
    int32_t *uniq;            // (n_expert_max) distinct experts of a batch
    int8_t *ustate;           // (n_expert_max) their progress
    int8_t *utries;           // (n_expert_max) demand reads started
    int16_t *upos;            // (n_expert_max) index in uniq of an expert or -1
    int32_t *ucount;          // (n_expert_max) rows of the batch that chose uniq[i]
    // lookahead predictor
    bool prefetch;
    int prefetch_depth;       // blocks predicted ahead (>= 1)
    int prefetch_top;         // best-scored predictions per token that are read
    int fill_below;           // fill prefetch (PETREL_PREFETCH_FILL=N[:K]): with fewer than N
    int fill_top;             // experts' reads in flight, also read the K best predictions
                              // of the block after the predicted ones (0: off)
    uint64_t fill_issued;     // times the fill prefetch ran
    // The disk-bound bar (engine/stream_prefetch.c): the share of a window
    // of decode time the engine waited on reads sets the prefetch bar.
    double bw_t0, bw_wait0;   // window start: pt_now(), the layers' summed wait seconds then
    double wait_share;        // waited / elapsed over the last full window (0 before one)
    float pf_min_base;        // the cache's own bar, restored when no longer disk-bound (< 0: not read yet)
    int bound_bar;            // PETREL_PF_BOUND: 1 (default) raise the bar while disk-bound,
                              // 0 never, "max" always at its disk-bound height (tests)
    float *pxn;               // (n_batch, n_embd) normed hidden for the predictor
    float *plogits;           // (n_batch, n_expert_max)
    int32_t *pids;            // (n_batch, n_used)
    float *pw;                // (n_batch, n_used)
    uint8_t *pred;            // (n_blocks, n_expert_max) predicted set for a block (one block ahead)
    uint8_t *pfar;            // (n_expert_max) scratch: a prediction further ahead
    uint8_t *pwant;           // (n_expert_max) scratch: predictions to read
    bool *has_pred;           // (n_blocks)
    pt_reader_stats rbase;    // reader counters at the last statistics reset
    FILE *trace;
} pt_stream;

// Reads every routed expert of every MoE block into c's expert cache, in
// block then expert order; for benchmarks that want everything resident
// (the budget must hold every expert for all of them to stay). Returns 0,
// or -1 with err set by the first read that fails.
int pt_stream_preload(petrel_context *c, pt_err *err);

// Sets up c->stream and c->ecache from the model parameters (RAM budget,
// I/O mode, hot-store from the usage file). -1 + err (naming the sizes when
// the budget is too small).
int pt_stream_init(petrel_context *c, pt_err *err);
// Writes the usage file (atomically) and frees the streaming state.
void pt_stream_free(petrel_context *c);
// The RAM budget when params.ram_budget is 0 (MemAvailable or the cgroup
// limit, less a margin).
uint64_t pt_stream_default_budget(void);
// At model open, before the trunk is read: fails clearly when the trunk
// alone exceeds params.ram_budget.
int pt_stream_check_trunk(const petrel_model *m, pt_err *err);

// Lookahead: after block il's attention (s->x is the residual stream),
// predicts the experts of blocks il+1 .. il+prefetch_depth and starts reads
// for the absent ones, nearest block first.
void pt_stream_prefetch_next(petrel_context *c, int il, int B);
// Prefill read-ahead: for a prefill chunk (more rows than the lookahead
// predicts for, at least 2 x n_expert / n_used of them: the chunk uses most
// of a block's experts), after block il's own experts are requested, the experts
// that the next MoE block's router would choose for the chunk's rows now
// (block il+1's gate on the residual stream after il's attention), most
// chosen first, are read as PT_EC_AHEAD while il computes, as far as the
// budget has slots that nothing in use holds. Placement only.
void pt_stream_read_ahead(petrel_context *c, int il, int B);
// Records recall of block il's prediction against its actual experts.
void pt_stream_note_actual(petrel_context *c, int il, const int32_t *uniq, int nu);

// Streaming fields of petrel_stats / their reset (engine/stream_stats.c).
void pt_stream_fill_stats(const petrel_context *c, petrel_stats *out);
void pt_stream_reset_stats(petrel_context *c);

// Trace lines (no-ops without a trace).
void pt_stream_trace(petrel_context *c, char kind, int il, int B, const int32_t *ids, int n_used);

#endif

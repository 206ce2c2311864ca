// petrel.h — the public C API of Petrel.
//
// Petrel runs DeepSeek-V3-architecture MoE models (DeepSeek-V3/R1, Kimi-K2,
// GLM-5 class) from a deepseek2 GGUF file: the dense trunk stays in RAM, the
// routed experts are read from the file on demand through an expert cache.
//
// Typical use (see docs/api.md for a complete example):
//
//   petrel_model *m = petrel_model_open("model.gguf", NULL, err, sizeof err);
//   petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
//   petrel_decode(c, ids, pos, n, PETREL_LOGITS_LAST);
//   const float *logits = petrel_get_logits(c, n - 1);
//
// Every function that can fail returns a negative value or NULL and leaves a
// message in the caller's buffer or in petrel_context_error().
// Placement invariant: the numbers returned never depend on cache sizes,
// I/O mode, prefetching, thread count or batch composition.
#ifndef PETREL_H
#define PETREL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t petrel_token;
typedef struct petrel_model petrel_model;
typedef struct petrel_context petrel_context;

// ---- model ------------------------------------------------------------------

typedef struct petrel_model_params {
    int n_threads;             // 0 = all cores
    uint64_t ram_budget;       // bytes Petrel may hold in all; 0 = from MemAvailable
    uint64_t expert_cache;     // bytes for routed experts; 0 = what the budget leaves
    int experts_per_layer;     // > 0: cache exactly this many expert slots per layer (tests)
    bool verbose;              // print load information on stderr
    // Expert streaming (docs/streaming.md). Zero values are the defaults.
    int io_mode;               // PETREL_IO_AUTO (io_uring, else pread pool), _URING, _POOL, _BUFFERED
    int io_queue_depth;        // device reads in flight; 0 = 32
    uint64_t pin_bytes;        // hot-store bytes; 0 = none (the usage file seeds the eviction order instead)
    bool no_hot_store;         // never pin experts
    bool no_prefetch;          // no lookahead prefetch
    bool no_usage;             // neither read nor update the usage file
    const char *usage_path;    // routing-heat file; NULL = "<model>.usage"
    bool cache_lru;            // plain LRU eviction (default: fewest uses, then least recent)
    int prefetch_depth;        // MoE blocks predicted ahead; 0 = 1
    int prefetch_top;          // best-scored predicted experts per token that are read; 0 = 5/8 of top-k
} petrel_model_params;

enum { PETREL_IO_AUTO = 0, PETREL_IO_URING = 1, PETREL_IO_POOL = 2, PETREL_IO_BUFFERED = 3 };

petrel_model_params petrel_model_default_params(void);
// Opens a deepseek2 GGUF, validates it against its metadata and reads the
// trunk into RAM. NULL + message in err on failure.
petrel_model *petrel_model_open(const char *path, const petrel_model_params *params, char *err,
                                size_t errlen);
void petrel_model_close(petrel_model *m);

int32_t petrel_model_n_vocab(const petrel_model *m);
int32_t petrel_model_n_ctx_train(const petrel_model *m);
int32_t petrel_model_n_embd(const petrel_model *m);
bool petrel_model_has_mtp(const petrel_model *m);
uint64_t petrel_model_trunk_bytes(const petrel_model *m);
// End-of-generation tokens (from the GGUF); returns the count written.
int petrel_model_eos(const petrel_model *m, petrel_token *out, int max);
int32_t petrel_model_bos(const petrel_model *m);  // -1 if none
const char *petrel_model_path(const petrel_model *m);

// ---- context ----------------------------------------------------------------

typedef struct petrel_context_params {
    uint32_t n_ctx;            // KV-cache positions; 0 = min(n_ctx_train, 4096)
    uint32_t n_batch;          // max tokens per petrel_decode call (the prefill chunk); 0 = chosen
                               // from the RAM budget (engine/context.c: at most 512 resident, 2048 streaming)
} petrel_context_params;

petrel_context_params petrel_context_default_params(void);
petrel_context *petrel_context_new(petrel_model *m, const petrel_context_params *params, char *err,
                                   size_t errlen);
void petrel_context_free(petrel_context *c);
uint32_t petrel_context_n_ctx(const petrel_context *c);
// The prefill chunk size in force (n_batch; chosen from the RAM budget when 0 was given).
uint32_t petrel_context_n_batch(const petrel_context *c);
const char *petrel_context_error(const petrel_context *c);

// Which positions of a batch get logits.
enum { PETREL_LOGITS_LAST = 0, PETREL_LOGITS_ALL = 1 };

// Runs the model on n tokens at positions pos[0..n) (pos NULL = continue
// after the current length: n_past, n_past+1, ...). Each token attends to
// the KV cache entries at positions <= its own; a position p requires all
// positions < p to be filled (by this batch or earlier ones). Writing a
// position that already exists overwrites it and truncates the cache after
// it (speculative decoding rolls back this way). Returns 0, or -1 with
// petrel_context_error() set (token id out of range, position past n_ctx,
// a gap, an I/O error).
int petrel_decode(petrel_context *c, const petrel_token *tokens, const int32_t *pos, int n,
                  int logits_mode);
// One decode step for n conversations at once: context ctxs[i] gets token
// tokens[i] at its next position (petrel_kv_len(ctxs[i])), attends over its own
// KV cache, and afterwards holds that position's logits (petrel_get_logits(ctxs[i],
// 0)), as if petrel_decode(ctxs[i], &tokens[i], NULL, 1, PETREL_LOGITS_LAST) had
// run: bit-identical logits and KV entries, and petrel_decode_mtp works on it
// after. The trunk's matrix products run once over the n rows, and the MoE of
// every block over all n rows together: each distinct routed expert of the
// step is fetched (through ctxs[0]'s expert cache) and computed once for all
// the rows that chose it. All contexts must belong to the same model and be
// distinct, n <= ctxs[0]'s n_batch; use contexts made by petrel_context_new_shared
// so that they share one expert cache. Returns 0, or -1 with a message in err
// (and in petrel_context_error(ctxs[0])); on failure no context advances.
int petrel_decode_multi(petrel_context **ctxs, const petrel_token *tokens, int n, char *err, size_t errlen);
// A new context of base's model with its own KV cache, scratch and decode
// statistics that shares base's expert cache, streaming state, routing heat
// and RAM budget (the expert budget is not re-divided; its KV cache comes on
// top). n_batch is capped at base's. base must outlive it, and contexts that
// share a cache must not decode at the same time from different threads.
petrel_context *petrel_context_new_shared(petrel_context *base, const petrel_context_params *params, char *err,
                                          size_t errlen);
// Logits (n_vocab floats) of batch entry i of the last petrel_decode; only
// the last entry with PETREL_LOGITS_LAST. NULL if not computed.
const float *petrel_get_logits(petrel_context *c, int i);

// Multi-token prediction: for entries i of the last petrel_decode batch, runs
// the MTP block on (final hidden state of entry i, embedding of next[i]) at
// the entry's position, giving logits for the token after next[i]. The MTP
// block keeps its own KV cache. Returns 0 or -1.
int petrel_decode_mtp(petrel_context *c, const int *batch_idx, const petrel_token *next, int n);
const float *petrel_get_mtp_logits(petrel_context *c, int j);

// Number of filled KV positions; truncation drops positions >= n.
int32_t petrel_kv_len(const petrel_context *c);
void petrel_kv_truncate(petrel_context *c, int32_t n);
// Token history of the filled positions (length petrel_kv_len).
const petrel_token *petrel_kv_tokens(const petrel_context *c);

// Routing observer (traces, checks): called for every MoE block and batch
// entry with the selected experts (ascending ids) and their weights. layer is
// the block index (the MTP block is n_layer). NULL removes it.
typedef void (*petrel_route_fn)(void *user, int layer, int32_t pos, const int32_t *experts,
                                const float *weights, int n);
void petrel_set_route_observer(petrel_context *c, petrel_route_fn fn, void *user);

// ---- sampling ---------------------------------------------------------------

typedef struct petrel_sampler_params {
    float temperature;         // <= 0: greedy
    int32_t top_k;             // 0 = off
    float top_p;               // 1 = off
    float min_p;               // 0 = off
    float repeat_penalty;      // 1 = off (llama.cpp style, over the last repeat_last_n)
    int32_t repeat_last_n;     // 64
    float frequency_penalty;   // 0 = off (OpenAI style)
    float presence_penalty;    // 0 = off
    uint64_t seed;
} petrel_sampler_params;

typedef struct petrel_sampler petrel_sampler;
petrel_sampler_params petrel_sampler_default_params(void);
petrel_sampler *petrel_sampler_new(const petrel_sampler_params *p, int32_t n_vocab);
void petrel_sampler_free(petrel_sampler *s);
// Picks a token from logits given the tokens generated/seen so far (for
// penalties). Deterministic for a given seed and call sequence.
petrel_token petrel_sampler_sample(petrel_sampler *s, const float *logits,
                                   const petrel_token *history, int n_history);
void petrel_sampler_reset(petrel_sampler *s, uint64_t seed);

// ---- state (save / restore a context) ----------------------------------------
// A context's state is its latent KV cache (every block, MTP included), the
// filled lengths and the token history. Saved as a versioned, checksummed,
// zstd-compressed blob tied to the model it came from (a state from another
// model, a truncated or corrupted one is refused with a message). Loading
// replaces the context's state; decoding then continues exactly as if the
// context had never stopped (bit-identical logits). On a failed load the
// context is left empty (kv_len 0). The last batch's logits are not part of
// the state: decode at least one token after a load before sampling.

// Writes the state to path durably (temporary name, fsync, rename). 0 or -1.
int petrel_state_save(petrel_context *c, const char *path, char *err, size_t errlen);
int petrel_state_load(petrel_context *c, const char *path, char *err, size_t errlen);
// In-memory variants: *out is malloc'ed (free it); the bytes are exactly
// what petrel_state_save writes to a file.
int petrel_state_save_mem(petrel_context *c, void **out, size_t *out_len, char *err, size_t errlen);
int petrel_state_load_mem(petrel_context *c, const void *buf, size_t len, char *err, size_t errlen);
// The token history stored in a state blob, without a context: returns the
// count and a malloc'ed array in *tokens, or -1 + err.
int petrel_state_tokens(const void *buf, size_t len, petrel_token **tokens, char *err, size_t errlen);

// ---- statistics -------------------------------------------------------------

typedef struct petrel_stats {
    uint64_t n_prompt_tokens;      // tokens decoded in batches of > 1 (prefill)
    uint64_t n_decode_tokens;      // tokens decoded one at a time
    double t_prompt_s, t_decode_s; // time spent in those calls
    uint64_t expert_hits;          // expert uses served from RAM (any tier)
    uint64_t expert_hits_hot;      // ... of which from the pinned hot-store
    uint64_t expert_hits_prefetch; // ... of which arrived through prefetch
    uint64_t expert_misses;        // expert uses that needed a read
    uint64_t bytes_read;           // bytes read from the model file for experts
    double t_io_wait_s;            // time the engine waited on expert reads
    uint64_t prefetch_predicted, prefetch_correct, prefetch_wasted_bytes;
    uint64_t rss_bytes;            // resident memory now
    uint64_t peak_rss_bytes;
    uint64_t trunk_bytes, expert_cache_bytes, kv_bytes;
    // Expert streaming (additions).
    uint64_t expert_hits_lru;      // expert uses served from the LRU slots
    uint64_t prefetch_actual;      // experts used where a prediction was made (recall = correct / actual)
    uint64_t prefetch_reads;       // prefetch reads started
    uint64_t hot_store_bytes;      // bytes of pinned hot-store slots
    uint64_t ram_budget;           // the budget everything is held under
    double t_io_busy_s;            // time with at least one expert read in flight
    int io_mode;                   // backend in use (PETREL_IO_*)
    double io_mean_queue_depth;    // device requests in flight on average while reading
    // Multi-context decoding (petrel_decode_multi; counted for all contexts sharing one
    // expert cache) and batched prefill (additions).
    uint64_t multi_steps;          // petrel_decode_multi calls
    uint64_t multi_rows;           // rows over them: mean batch size = multi_rows / multi_steps
    uint64_t multi_max_rows;       // largest batch
    uint64_t multi_expert_uses;    // (row, routed expert) uses in them, every MoE block
    uint64_t multi_expert_visits;  // distinct experts fetched and computed for them;
                                   // multi_expert_uses - multi_expert_visits = fetches avoided
    uint64_t multi_bytes_shared;   // expert bytes those avoided fetches would have been
    double t_multi_s;              // time in those calls
    uint64_t prefill_chunks;       // batches of > 1 token (prefill chunks) of this context
    uint64_t prefill_chunk_max;    // largest such batch
    uint64_t prefill_expert_visits;// distinct experts computed over them, every MoE block
    uint64_t prefill_expert_rows;  // token rows computed by those visits:
                                   // tokens per expert visit = rows / visits
    uint64_t prefill_ahead_reads;  // experts of the next block read ahead during them
                                   // (engine/stream.h: pt_stream_read_ahead)
    // Compute time by part of the forward pass (all calls; seconds).
    double t_attn_proj_s;          // attention's matrix products (q, kv, absorption, v, o)
    double t_attn_s;               // attention over the cached latents (scores, softmax, sums)
    double t_router_s, t_shared_s; // router; shared experts
    double t_routed_s;             // routed experts' products (waits on reads excluded)
    double t_combine_s, t_dense_s; // combining expert outputs; dense FFN blocks
    double t_head_s;               // final norm and output head
    // Speculative decoding (petrel_generate with speculative; engine/spec_policy.h),
    // summed over the calls since the last reset; the estimates are the last call's.
    bool spec_used;                // a speculative generation ran
    bool spec_on;                  // the adaptive policy's regime at the end: verifying drafts
    int spec_mode;                 // PETREL_SPEC_* of the last call
    uint64_t spec_plain_steps;     // one-token steps
    uint64_t spec_verify_steps;    // two-token verifications of a draft
    uint64_t spec_accepted;        // ... whose draft was right
    uint64_t spec_probes;          // drafts made only to sample acceptance (not verified)
    uint64_t spec_probe_hits;      // ... that were right
    uint64_t spec_switches;        // adaptive regime changes
    uint64_t spec_explore;         // steps of the other regime taken to refresh its cost
    double spec_acceptance;        // acceptance estimate (decayed window)
    double spec_t_plain_s;         // seconds per plain step (moving average)
    double spec_t_verify_s;        // seconds per verification, without its draft
    double spec_t_draft_s;         // seconds per draft
    double spec_bytes_plain;       // expert bytes read per plain step
    double spec_bytes_verify;      // ... per verification and its draft
    double spec_uses_plain;        // distinct experts computed per plain step
    double spec_uses_verify;       // ... per verification
    double spec_gain;              // expected speed-up of verifying, last decision (adaptive)
    bool spec_dormant;             // (adaptive) the last call was dormant: plain steps, no MTP upkeep
    bool spec_from_prior;          // (adaptive) ... started from the model's step costs (a fresh context)
    int spec_dormant_calls;        // (adaptive) dormant calls since the last live one
    int spec_dormant_gap;          // (adaptive) dormant calls between live re-checks now (0: none yet)
    double spec_dormant_s;         // (adaptive) decode seconds of the dormant calls since the last live one
    double spec_recheck_s;         // (adaptive) what the last live re-check cost over plain steps (0: none yet)
} petrel_stats;

// Per-layer expert statistics (MoE blocks; layer n_layer is the MTP block).
typedef struct petrel_layer_stats {
    uint64_t hits_lru, hits_hot, hits_prefetch, misses;
    uint64_t bytes_read;           // demand + prefetch
    uint64_t prefetch_reads, prefetch_wasted_bytes;
    uint64_t predicted, predicted_correct, actual; // lookahead recall = predicted_correct / actual
    double t_io_wait_s;            // time stalled on this layer's reads
} petrel_layer_stats;
// -1 when layer is out of range or not a MoE block.
int petrel_get_layer_stats(const petrel_context *c, int layer, petrel_layer_stats *out);
// The per-layer table and totals printed by --stats.
void petrel_print_stream_stats(const petrel_context *c, void *file /* FILE* */);
// Records the routed experts of every token and MoE block (and the
// lookahead predictions) into a text trace for bench/trace-replay.sh.
// Replaces the file; closed by petrel_trace_close or petrel_context_free.
int petrel_trace_open(petrel_context *c, const char *path, char *err, size_t errlen);
void petrel_trace_close(petrel_context *c);

void petrel_get_stats(const petrel_context *c, petrel_stats *out);
void petrel_reset_stats(petrel_context *c);
// Prints the one-paragraph summary the CLI commands print (stderr style).
void petrel_print_stats(const petrel_context *c, void *file /* FILE* */);

// ---- generation ---------------------------------------------------------------

// Speculation modes (petrel_gen_params.spec_mode); names as the CLI's --spec-mode.
enum { PETREL_SPEC_ADAPTIVE = 0, PETREL_SPEC_ALWAYS = 1, PETREL_SPEC_OFF = 2 };
// "adaptive" / "always" / "off" -> PETREL_SPEC_*, -1 for anything else.
int petrel_spec_mode_parse(const char *name);
const char *petrel_spec_mode_name(int mode);

typedef struct petrel_gen_params {
    int n_predict;             // tokens to generate (> 0)
    bool speculative;          // draft one token with the MTP layer and verify it in the
                               // same batch; the output is identical either way
    int spec_mode;             // with speculative: PETREL_SPEC_ADAPTIVE (0, default) verifies
                               // only while it pays, _ALWAYS every step, _OFF never
    bool ignore_eos;           // do not stop at end-of-generation tokens
    bool reuse_prefix;         // keep the KV cache's common prefix with the prompt
    petrel_sampler *sampler;   // NULL = greedy
    // Optional external drafter used instead of the MTP layer (a draft model,
    // or tests): returns its guess for the token at position pos, given the
    // n tokens before it.
    petrel_token (*draft_fn)(void *user, const petrel_token *tokens, int n, int32_t pos);
    void *draft_user;
} petrel_gen_params;

typedef struct petrel_gen_result {
    int n_prompt;              // prompt tokens
    int n_prefilled;           // prompt tokens actually computed (less with prefix reuse)
    int n_generated;           // tokens passed to the callback
    int n_drafted, n_accepted; // speculative drafts made / accepted
    double ttft_s;             // call start to the first generated token
    double t_total_s;
    bool stopped_eos;          // ended on an end-of-generation token (not passed on)
    bool stopped_cb;           // the callback asked to stop
} petrel_gen_result;

// Called for each generated token in order; return non-zero to stop.
typedef int (*petrel_token_fn)(void *user, petrel_token token);

// Prefills the prompt (in n_batch pieces; with reuse_prefix only what
// differs from the tokens already in the KV cache) and generates up to
// n_predict tokens, calling on_token for each. With speculative, every step
// verifies the MTP draft in a batch of two: the tokens are the same as
// without it, for any sampler (each position consumes the sampler the same
// way). Returns 0 or -1 with petrel_context_error() set.
int petrel_generate(petrel_context *c, const petrel_token *prompt, int n_prompt, const petrel_gen_params *gp,
                    petrel_token_fn on_token, void *user, petrel_gen_result *res);

#ifdef __cplusplus
}
#endif
#endif

// engine/context.h — a decoding context: the latent KV cache, the expert
// cache, reusable scratch buffers, statistics.
#ifndef PETREL_ENGINE_CONTEXT_H
#define PETREL_ENGINE_CONTEXT_H

#include <stdint.h>

#include "cache/ecache.h"
#include "engine/spec_policy.h"
#include "common/err.h"
#include "engine/model.h"
#include "petrel.h"

// Heads of one token that attention computes together (engine/forward.c).
#define PT_ATTN_G 16

// Scratch for one batch of up to n_batch tokens; allocated once per context.
typedef struct pt_scratch {
    float *x;        // (B, n_embd) residual stream
    float *xn;       // (B, n_embd) normed input of a sub-block
    float *tmp;      // (B, n_embd) sub-block output
    float *qa;       // (B, q_lora)
    float *q;        // (B, H*(nope+rope))
    float *kva;      // (B, kv_lora+rope)
    float *qh;       // (H, B, nope) each head's q_nope, gathered
    float *qlat;     // (H, B, kv_lora) absorbed queries
    float *olat;     // (H, B, kv_lora) attention-weighted latents
    float *oh;       // (H, B, v) each head's output
    float *attn;     // (B, H*v)
    float *scores;   // (n_threads, PT_ATTN_G, n_ctx) one attention item's scores per thread
    float *qc;       // (n_threads, PT_ATTN_G, kv_lora+rope) its queries, as cache rows
    float *kT;       // (kv_dim - kv_dim/64*64, n_ctx) the keys' tail transposed (kernels/ops.h)
    float *vp;       // (n_ctx rounded up to 16, kv_lora) the latents packed for pt_attn_wsum
    float *ff_a;     // (B, max(n_ff, n_ff_exp*n_shared, n_ff_exp))
    float *ff_b;     // same
    float *rlogits;  // (B, n_expert) router logits
    float *rscratch; // (2*n_expert)
    int32_t *rids;   // (B, n_used) selected experts, ascending
    float *rw;       // (B, n_used) their weights
    float *eo;       // (B, n_used, n_embd) routed expert outputs
    float *gx;       // (B, n_embd) tokens gathered for one expert
    int32_t *gsel;   // (B) batch entry of each gathered row
    int32_t *gk;     // (B) selection slot of each gathered row
    float *cat;      // (B, 2*n_embd) MTP input concat
    int32_t *pos;    // (B) positions of the batch being computed
    // DSA indexer (engine/dsa.c); 1-element buffers when the model has none
    float *iq;       // (B, H_I*d_I) indexer queries
    float *iw;       // (B, H_I) indexer head weights
    float *ikn;      // (B, d_I) indexer keys of the batch
    float *iscore;   // (n_ctx) index scores of one query
    int32_t *iheap;  // (sel_stride) top-k heap
    int32_t *sel;    // (B, sel_stride) kept key positions per query, ascending
    int32_t *nsel;   // (B) their count, -1 = every key (dense)
} pt_scratch;

// Compute time by part of the forward pass (seconds, summed over calls);
// copied into petrel_stats (t_*_s) and printed by --stats.
typedef struct pt_prof {
    double attn_proj; // attention's matrix products (q, kv, k_b absorption, v_b, o)
    double router;    // router logits and selection
    double shared;    // shared experts
    double routed;    // routed experts' products (excluding waits on reads)
    double combine;   // weighting and summing expert outputs
    double dense;     // dense FFN blocks
    double head;      // final norm and output head
    double attn_base; // c->t_attn_s at the last statistics reset
} pt_prof;

// Counters of multi-context steps (petrel_decode_multi); copied into petrel_stats.
typedef struct pt_multi_stats {
    uint64_t steps;         // petrel_decode_multi calls
    uint64_t rows;          // rows (contexts) over those calls
    uint64_t max_rows;      // largest step
    uint64_t expert_uses;   // (row, routed expert) uses in those steps, all MoE blocks
    uint64_t expert_visits; // distinct experts fetched and computed for them
    uint64_t bytes_shared;  // expert bytes a per-context step would have fetched again
    double t_s;             // time in those calls
} pt_multi_stats;

struct petrel_context {
    petrel_model *model;
    uint32_t n_ctx;
    uint32_t n_batch;         // the prefill chunk size: tokens per petrel_decode at most
    bool n_batch_auto;        // n_batch chosen from the RAM budget (engine/context.c), not given
    int n_threads;
    uint32_t kv_dim;          // kv_lora + qk_rope
    float **kv;               // (n_blocks) -> (n_ctx, kv_dim): c_kv then k_rope
    float **ik;               // (n_blocks) -> (n_ctx, idx_head_dim) indexer keys, NULL where no indexer
    uint32_t sel_stride;      // min(index_topk, n_ctx): row length of s.sel
    bool dsa_on;              // indexer selections used (engine/dsa.h)
    bool sel_valid;           // s.sel holds this batch's selection of an earlier block (shared blocks reuse it)
    void (*dsa_fn)(void *, int, int32_t, const int32_t *, int); // selection observer or NULL
    void *dsa_user;
    double t_idx_s, t_attn_s; // time in the indexer / the rest of attention
    int32_t n_past;           // filled trunk positions
    int32_t mtp_len;          // filled MTP positions
    petrel_token *tokens;     // (n_ctx) history of filled positions
    pt_ecache *ecache;
    pt_scratch s;
    float *hidden;            // (n_batch, n_embd) final-normed hidden of the last batch
    int32_t *last_pos;        // (n_batch) positions of the last batch
    int last_n;
    float *logits;            // (n_batch, n_vocab) grown on demand
    int logits_rows;          // rows allocated
    int logits_first;         // batch index of logits row 0 (n-1 in LAST mode)
    int logits_n;             // rows valid
    float *mtp_logits;        // (mtp_rows, n_vocab) grown on demand
    int mtp_rows;             // rows allocated
    int mtp_n;
    petrel_route_fn route_fn; // routing observer or NULL
    void *route_user;
    petrel_stats st;
    pt_err err;
    struct pt_stream *stream; // expert streaming state (engine/stream.h)
    // Multi-context decoding (engine/batch.c)
    petrel_context *expert_owner; // context whose expert cache and streaming state this one
                                  // shares (petrel_context_new_shared); NULL = its own
    int n_sharing;                // contexts sharing this one's expert cache (must be 0 at free)
    petrel_context **rowctx;      // (n_batch) during a petrel_decode_multi step: the context owning
                                  // each batch row (its KV cache, observers); NULL otherwise
    petrel_context **rowbuf;      // (n_batch) storage for rowctx
    pt_multi_stats mst;           // multi-context steps, kept by the expert owner
    pt_prof prof;                 // compute time by part
    pt_spec_costs spec_costs;     // step costs adaptive speculation measured, kept across
                                  // petrel_generate calls (engine/spec_policy.h)
};

// The context owning c's expert cache (c itself unless shared).
static inline petrel_context *pt_expert_root(petrel_context *c) { return c->expert_owner ? c->expert_owner : c; }
// The context owning batch row b of a step on c (c unless a multi-context step).
static inline petrel_context *pt_row_ctx(petrel_context *c, int b) { return c->rowctx ? c->rowctx[b] : c; }

// Runs one block (trunk layer or MTP block il) on s->x (B rows) in place,
// with the batch's positions in s->pos. -1 + c->err on an I/O failure.
int pt_forward_block(petrel_context *c, int il, int B);
// SwiGLU FFN: X (B, n_embd) -> Y (B, n_embd); Y may alias X.
void pt_ffn(petrel_context *c, const pt_mat *gate, const pt_mat *up, const pt_mat *down, const float *X, int B,
            float *Y);
// MoE sub-block of block il: s->xn (B rows) -> s->tmp. -1 + c->err on I/O failure.
int pt_moe(petrel_context *c, int il, int B);
// Grows *buf to rows rows of n_vocab floats (*have = rows allocated). -1 when out of memory.
int pt_ensure_rows(float **buf, int *have, int rows, int n_vocab);
// Final norm of s->x (B rows) into c->hidden, then logits for rows [first, B). -1 + c->err.
int pt_finish(petrel_context *c, int B, int first);
// Embedding rows for tokens into out (B, n_embd).
void pt_embed(const pt_mat *embd, const petrel_token *tokens, int B, float *out);

#endif

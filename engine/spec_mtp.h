// engine/spec_mtp.h — the MTP block's inputs, queued until a draft is wanted.
//
// The MTP block at position p reads (final hidden state of the trunk at p,
// the token at p+1) and attends over its own KV cache of every position
// < p, so that cache must be filled without gaps even while no draft is
// being made (the adaptive policy of engine/spec_policy.h decodes plain
// steps whenever speculation does not pay). Each step queues its hidden
// states here; a draft runs the queue through the MTP block, where every row
// but the last only writes its KV entry (its draft logits would be thrown
// away, and the KV entry needs no attention, MoE nor head: an eh_proj and a
// kv_a product), and only the last row runs the whole block and the head.
// The entries written are exactly those the whole block writes (same
// products on the same inputs), so drafts never depend on when the queue is
// run. A block with a DSA indexer runs whole on every row (its indexer keys
// are part of the cache).
#ifndef PETREL_ENGINE_SPEC_MTP_H
#define PETREL_ENGINE_SPEC_MTP_H

#include <stdint.h>

#include "engine/context.h"

typedef struct pt_mtp_queue {
    float *h;            // (cap, n_embd) trunk hidden states (final-normed) of positions pos0..pos0+n
    petrel_token *next;  // (cap) the token that followed each of them
    int32_t pos0;        // position of row 0 (the MTP cache's length when rows are queued)
    int n, cap;          // rows queued; capacity (the context's n_batch)
    float *logits;       // (n_vocab) MTP logits of the last draft
} pt_mtp_queue;

// 0, or -1 + c->err when out of memory.
int pt_mtp_queue_init(pt_mtp_queue *q, petrel_context *c);
void pt_mtp_queue_free(pt_mtp_queue *q);
// Queues (hidden state of entry bi of the last petrel_decode batch, next)
// at that entry's position, which must follow the queued rows (or equal
// the MTP cache's length when the queue is empty; a queue left behind by
// a rollback is dropped). A full queue is written to the cache first.
// 0, or -1 + c->err.
int pt_mtp_push(petrel_context *c, pt_mtp_queue *q, int bi, petrel_token next);
// Writes every queued row's KV entry (no draft). 0 or -1 + c->err.
int pt_mtp_fill(petrel_context *c, pt_mtp_queue *q);
// Empties the queue through the MTP block and returns the draft for the
// position after the last row's next token (argmax of the MTP logits);
// *t_full gets the seconds of the last row's whole-block pass (the cost of
// a draft as such). The queue must not be empty. 0 or -1 + c->err.
int pt_mtp_draft(petrel_context *c, pt_mtp_queue *q, petrel_token *draft, double *t_full);

#endif

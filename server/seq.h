// server/seq.h — one generating sequence as a step machine: prefix restore,
// prefill in chunks, then one sampled token per step with stop strings,
// logprobs and streamed pieces. The decode of each step is done by the
// caller — alone (srv_generate, `petrel chat`) or in one batch with the
// other active sequences (the server's continuous batching, worker.c) —
// so one loop can drive many sequences and each still produces exactly
// what it would alone.
#ifndef PETREL_SERVER_SEQ_H
#define PETREL_SERVER_SEQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/engine.h"

enum { SRV_SEQ_PREFILL = 0, SRV_SEQ_DECODE = 1, SRV_SEQ_DONE = 2 };
// What srv_seq_begin may reuse of the KV cache already in the context.
enum { SRV_REUSE_NONE = 0, SRV_REUSE_LIVE = 1, SRV_REUSE_ALL = 2 /* live context or a kept state */ };

// Text produced so far: buf[0..emitted) has been passed on, the rest is
// held while it could still become a stop string.
typedef struct srv_text {
    char *buf;                  // (len, cap) NUL-terminated
    size_t len, cap, emitted;
} srv_text;

typedef struct srv_seq {
    srv_engine *e;              // borrowed
    petrel_context *c;          // this sequence's context (its KV cache), borrowed
    srv_gen_params p;           // copy; prompt and stop strings borrowed from the caller
    srv_piece_fn piece;         // NULL: no pieces passed on
    void *user;
    atomic_bool *cancel;        // polled before every prefill chunk and every sample; may be NULL
    srv_gen_result *r;          // filled as the sequence runs (borrowed)
    int phase;                  // SRV_SEQ_PREFILL / DECODE / DONE
    int done;                   // prompt positions in the KV cache
    int max_tokens;             // p.max_tokens clamped to the context
    petrel_sampler *smp;
    petrel_token *hist;         // (n_prompt + max_tokens + 1) prompt then generated ids, nh filled
    int nh;
    pt_detok dt;                // valid when has_dt
    bool has_dt;
    srv_text tx;
    petrel_token next;          // phase DECODE: the token the next decode step feeds
    double t0, t1;              // begin; first sampled token
    int rc;                     // 0, or -1 after an engine error (r->err)
} srv_seq;

// Starts a sequence for p on context c: reuses what `reuse` allows of the
// KV cache (always recomputing at least the last prompt token), allocates
// the sampler and buffers. The phase is PREFILL while prompt tokens other
// than the last are missing from the cache, else DECODE with next = the
// last prompt token. Returns 0, or -1 with r->err (prompt too long for the
// context); a failed sequence is DONE and still needs srv_seq_end.
int srv_seq_begin(srv_seq *s, srv_engine *e, petrel_context *c, const srv_gen_params *p, int reuse,
                  srv_piece_fn piece, void *user, atomic_bool *cancel, srv_gen_result *r);
// Phase PREFILL: decodes up to `chunk` more prompt tokens (never the last
// one). Moves to DECODE when only the last prompt token is left, to DONE on
// cancellation or an engine error. Returns the tokens computed (0 if none), -1 on error.
int srv_seq_prefill(srv_seq *s, int chunk);
// Phase DECODE, after the caller decoded s->next on s->c: samples the next
// token from logits (n_vocab floats) and passes its text on. Returns true
// when s->next must be decoded again, false when the sequence is DONE
// (length, EOS, stop string, cancellation).
bool srv_seq_step(srv_seq *s, const float *logits);
// Ends the sequence with an engine error (message msg).
void srv_seq_fail(srv_seq *s, const char *msg);
// Flushes the text held back (unless cancelled or failed), fills r's text,
// finish reason and decode time, keeps the context's state in e->kv when
// `keep` and the run succeeded, frees the buffers. Returns s->rc.
int srv_seq_end(srv_seq *s, bool keep);

#endif

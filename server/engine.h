// server/engine.h — one model + one context driven by one thread: prompt
// rendering (chat template), prefix reuse through the live context and the
// kept states, prefill, sampling, stop strings, streaming text. Shared by
// `petrel serve` and `petrel chat`.
#ifndef PETREL_SERVER_ENGINE_H
#define PETREL_SERVER_ENGINE_H

#include <json-c/json.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "petrel.h"
#include "server/kvstore.h"
#include "tokenizer/tokenizer.h"

#define SRV_MAX_STOP 16

#define SRV_PREFILL_CHUNK 256 // prompt tokens per prefill call by default
#define SRV_MAX_SLOTS 64      // --parallel limit

typedef struct srv_engine {
    petrel_model *m;
    petrel_context *c;     // slot 0 (the only one of `petrel chat`)
    petrel_context *slots[SRV_MAX_SLOTS]; // (n_slots) one context (KV cache) per parallel sequence; slots[0] == c
    int n_slots;
    petrel_context_params cp; // what every slot's context is made with
    pt_tokenizer *tok;     // NULL when the model has no usable tokenizer
    srv_kvstore *kv;       // kept states, or NULL (live context only)
    petrel_token eos[16];  // (n_eos) end-of-generation ids
    int n_eos;
    char *model_id;        // name served in /v1/models
} srv_engine;

typedef struct srv_gen_params {
    const petrel_token *prompt; // (n_prompt)
    int n_prompt;
    int max_tokens;
    petrel_sampler_params sp;
    char *stop[SRV_MAX_STOP];   // (n_stop) stop strings (not owned)
    int n_stop;
    int top_logprobs;           // -1: no logprobs; else the alternatives per token (0..20)
    bool ignore_eos;            // keep generating past end-of-generation tokens (llama.cpp extension)
} srv_gen_params;

typedef struct srv_gen_result {
    petrel_token *ids;          // (n_gen) generated ids (malloc'ed), EOS excluded
    int n_gen;
    char *text;                 // generated text after stop handling (malloc'ed)
    size_t text_len;
    const char *finish;         // "stop", "length", "cancelled", "error"
    int n_cached;               // prompt tokens reused from a kept / live state
    int n_prefilled;            // prompt tokens computed
    double ttft_s, t_decode_s;  // time to first token; time of the sampling loop after it
    char err[512];
} srv_gen_result;

// Called with each piece of text as soon as it is final (stop strings held
// back until decided); tok is the token that completed it (-1 for a flush)
// and lp its log-probability details or NULL. Returns false to cancel.
typedef bool (*srv_piece_fn)(void *user, const char *text, size_t len, petrel_token tok, json_object *lp);

// Opens model, context and tokenizer (missing tokenizer = token ids only).
// kv_dir may be NULL; kv_ram is the RAM budget for kept states (0: none kept).
srv_engine *srv_engine_open(const char *model, const petrel_model_params *mp, const petrel_context_params *cp,
                            const char *kv_dir, uint64_t kv_ram, char *err, size_t errlen);
void srv_engine_close(srv_engine *e);
// Grows the engine to n slots (contexts made with the open's parameters),
// for the server's parallel sequences. 0, or -1 + err (out of memory: the
// slots made so far stay).
int srv_engine_set_slots(srv_engine *e, int n, char *err, size_t errlen);
// Most tokens one petrel_decode call of a slot takes (--batch, capped at the context).
int srv_engine_batch(const srv_engine *e);
// Bytes of one routed expert of block il (gate + up + down slices); 0 for
// a dense block.
uint64_t srv_engine_expert_bytes(const srv_engine *e, int il);

// Renders OpenAI-style messages through the model's chat template and
// tokenizes the result. tools (a JSON array or NULL) is passed to the
// template as `tools`. Returns the count and malloc'ed ids, or -1 + err.
int srv_render_chat(srv_engine *e, json_object *messages, json_object *tools, petrel_token **ids, char *err,
                    size_t errlen);
// Encodes plain text (special tokens parsed, no BOS added). -1 + err.
int srv_encode(srv_engine *e, const char *text, petrel_token **ids, char *err, size_t errlen);

// Generates for p on slot 0 alone (server/seq.h drives the steps): reuses the longest kept prefix, prefills the rest,
// samples up to max_tokens, stops at EOS or a stop string, calls piece for
// each final text piece, and keeps the resulting state in e->kv. *cancel is
// polled between steps. Returns 0 (r filled; r->finish says why it ended),
// or -1 with r->err on an engine error.
int srv_generate(srv_engine *e, const srv_gen_params *p, srv_piece_fn piece, void *user, atomic_bool *cancel,
                 srv_gen_result *r);
void srv_gen_result_free(srv_gen_result *r);

#endif

// server/job.h — one API request on its way through the generation queue:
// the parsed request, and the channel between the generation thread (which
// produces SSE bytes or the final result) and the HTTP connection thread.
#ifndef PETREL_SERVER_JOB_H
#define PETREL_SERVER_JOB_H

#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "server/engine.h"

enum { SRV_CHAT = 1, SRV_COMPLETION = 2 };
#define SRV_MAX_N 16 // choices per request (OpenAI `n`), each a parallel sequence
enum { SRV_QUEUED = 0, SRV_RUNNING = 1, SRV_DONE = 2 };

typedef struct srv_job {
    // request
    int kind;                   // SRV_CHAT / SRV_COMPLETION
    srv_gen_params gp;          // prompt points at `prompt`, stop at `stop`
    int n;                      // choices (OpenAI `n`, 1..SRV_MAX_N): sequences sharing the prompt's KV
    petrel_token *prompt;       // (gp.n_prompt) owned
    char *stop[SRV_MAX_STOP];   // (gp.n_stop) owned
    bool stream, include_usage, return_ids;
    char id[64];                // "chatcmpl-..." / "cmpl-..."
    long created;               // unix seconds
    const char *model_id;       // the engine's, not owned
    // channel (mu)
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;                  // (out_len) SSE bytes produced, out_off sent
    size_t out_len, out_off, out_cap;
    int state;                  // SRV_QUEUED / RUNNING / DONE
    int refs;                   // HTTP side + queue side
    atomic_bool cancel;         // set by the HTTP side when the client left
    // result (valid once DONE)
    int rc;                     // 0, or -1 with res.err (engine) / 503 shutdown
    int http_status;            // non-zero: fail with this status (e.g. 503)
    srv_gen_result res;         // choice 0
    srv_gen_result more[SRV_MAX_N - 1]; // (n - 1) choices 1..n-1
    json_object *lp[SRV_MAX_N]; // (n) per choice: array of logprobs content entries, non-streaming
    // generation thread only
    int n_live;                 // choices still holding a slot
    struct srv_job *next;       // queue link
} srv_job;

srv_job *srv_job_new(void);
// Result of choice i (0 <= i < j->n).
static inline srv_gen_result *srv_job_result(srv_job *j, int i) { return i ? &j->more[i - 1] : &j->res; }
static inline const srv_gen_result *srv_job_cresult(const srv_job *j, int i) { return i ? &j->more[i - 1] : &j->res; }
// Drops one reference; frees at zero. Thread-safe.
void srv_job_unref(srv_job *j);
// Appends bytes to the SSE channel and wakes the reader (caller holds no lock).
void srv_job_emit(srv_job *j, const char *s, size_t n);
// Emits "data: <json>\n\n" and releases o.
void srv_job_emit_json(srv_job *j, json_object *o);

#endif

// server/worker.h — the generation thread: continuous batching of up to
// --parallel sequences (one context each) in one decode loop, a bounded
// FIFO of requests waiting for free slots, and the counters behind /metrics.
#ifndef PETREL_SERVER_WORKER_H
#define PETREL_SERVER_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/engine.h"
#include "server/job.h"
#include "server/seq.h"
#include "server/server.h"

#define SRV_BATCH_BUCKETS 7 // decode-step sizes: 1, 2, <=4, <=8, <=16, <=32, more

typedef struct srv_metrics {
    uint64_t requests_ok, requests_error, requests_cancelled, requests_rejected;
    uint64_t tokens_generated, prompt_tokens, prefill_tokens, cached_tokens;
    double ttft_sum_s, ttft_last_s;
    uint64_t ttft_count;
    double decode_s;                 // time of the sampling loops after the first token
    uint64_t decode_tokens;          // tokens produced in that time
    double last_tok_s;               // decode speed of the last request
    // Continuous batching (live counters).
    uint64_t steps;                  // decode steps (one petrel_decode_multi each)
    uint64_t rows;                   // sequences over those steps: mean batch = rows / steps
    uint64_t batch_hist[SRV_BATCH_BUCKETS]; // (non-cumulative) steps by size bucket
    uint64_t prefill_chunks;         // prefill calls (--prefill-chunk tokens at most beside decoding sequences)
    uint64_t prefill_chunks_interleaved; // ... run while other sequences were decoding
    double prefill_chunk_max_s;      // longest prefill chunk
    double step_gap_max_s;           // longest time between two decode steps with sequences decoding
    uint64_t prefill_tok;            // prompt tokens computed by those chunks
    double prefill_s;                // time in them
    petrel_stats st;                 // engine statistics after the last job (slot 0: the shared expert cache)
    uint64_t slot_prefill_chunks;    // engine's prefill batches, all slots (after the last job)
    uint64_t slot_prefill_visits, slot_prefill_rows;
    int kept_states;
} srv_metrics;

// One parallel sequence: a context and what runs in it.
typedef struct srv_slot {
    petrel_context *c;               // the engine's slots[i]
    srv_job *j;                      // the job using it (reference held by the worker) or NULL; set under mu
    int choice;                      // which of j's choices
    bool started;                    // seq begun (other choices begin once choice 0's prefill is done)
    bool first;                      // no chunk streamed yet (the first chat chunk carries the role)
    srv_seq seq;
} srv_slot;

typedef struct srv_worker {
    srv_engine *e;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job *head, *tail;            // FIFO of queued jobs
    int n_queued, max_queue;
    srv_slot slots[SRV_MAX_SLOTS];   // (n_slots)
    int n_slots;
    int n_running;                   // jobs holding slots
    int chunk;                       // prompt tokens per prefill chunk while other sequences decode
    int chunk_alone;                 // ... while none does (the batch size)
    int rr;                          // next slot considered for a prefill chunk (round robin)
    double last_step;                // time of the last decode step (0: none pending)
    bool print_stats;                // --stats: print the batching and engine figures at stop
    bool stopping;
    srv_metrics m;                   // guarded by mu
} srv_worker;

// Makes cfg->parallel slots and starts the thread. NULL + err (no memory
// for the slots' KV caches, no thread).
srv_worker *srv_worker_start(srv_engine *e, const srv_config *cfg, char *err, size_t errlen);
// Queues j (taking a reference). 0, 429 when the queue is full, 503 when stopping.
int srv_worker_submit(srv_worker *w, srv_job *j);
// Counts a request refused before reaching the queue (4xx).
void srv_worker_count_rejected(srv_worker *w);
// Prometheus text exposition; malloc'ed (server/metrics.c).
char *srv_worker_metrics(srv_worker *w);
// The --stats summary: batching figures, then the engine's (server/metrics.c).
void srv_worker_print_stats(srv_worker *w, void *file /* FILE* */);
// Fails queued jobs with 503, cancels the running ones, joins the thread
// (with --stats, prints the figures). The counters stay usable until srv_worker_free.
void srv_worker_stop(srv_worker *w);
void srv_worker_free(srv_worker *w);

#endif

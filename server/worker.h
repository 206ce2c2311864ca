// server/worker.h — the generation thread: a bounded FIFO of jobs served
// one at a time by the engine, and the counters behind /metrics.
#ifndef PETREL_SERVER_WORKER_H
#define PETREL_SERVER_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/engine.h"
#include "server/job.h"

typedef struct srv_metrics {
    uint64_t requests_ok, requests_error, requests_cancelled, requests_rejected;
    uint64_t tokens_generated, prompt_tokens, prefill_tokens, cached_tokens;
    double ttft_sum_s, ttft_last_s;
    uint64_t ttft_count;
    double decode_s;                 // time of the sampling loops after the first token
    uint64_t decode_tokens;          // tokens produced in that time
    double last_tok_s;               // decode speed of the last request
    petrel_stats st;                 // engine statistics after the last job
    int kept_states;
} srv_metrics;

typedef struct srv_worker {
    srv_engine *e;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job *head, *tail;            // FIFO of queued jobs
    int n_queued, max_queue;
    bool busy;                       // a job is running
    srv_job *current;                // the running job (borrowed), or NULL
    bool stopping;
    srv_metrics m;                   // guarded by mu
} srv_worker;

srv_worker *srv_worker_start(srv_engine *e, int max_queue);
// Queues j (taking a reference). 0, 429 when the queue is full, 503 when stopping.
int srv_worker_submit(srv_worker *w, srv_job *j);
// Counts a request refused before reaching the queue (4xx).
void srv_worker_count_rejected(srv_worker *w);
// Prometheus text exposition; malloc'ed.
char *srv_worker_metrics(srv_worker *w);
// Fails queued jobs with 503, cancels the running one, joins the thread. The counters stay usable until srv_worker_free.
void srv_worker_stop(srv_worker *w);
void srv_worker_free(srv_worker *w);

#endif

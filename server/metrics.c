// server/metrics.c — /metrics (Prometheus text) and the --stats summary of
// the generation thread's counters (see worker.h).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "server/worker.h"

typedef struct sbuf {
    char *b;         // (len, cap) NUL-terminated; NULL after a failed allocation
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...)
{
    if (!s->b)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->b + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < s->cap - s->len) {
            s->len += (size_t)n;
            return;
        }
        char *p = realloc(s->b, s->cap * 2 + (size_t)n);
        if (!p) {
            free(s->b);
            s->b = NULL;
            return;
        }
        s->b = p;
        s->cap = s->cap * 2 + (size_t)n;
    }
}

// One metric with its HELP and TYPE lines; value printed with vfmt.
#define METRIC(s, name, type, help, vfmt, ...)                                                                       \
    sb_printf(s, "# HELP " name " " help "\n# TYPE " name " " type "\n" name " " vfmt "\n", __VA_ARGS__)

typedef struct snap {
    srv_metrics m;
    int queued, waiting, busy_slots, n_slots, chunk;
} snap;

static snap take(srv_worker *w)
{
    snap s;
    pthread_mutex_lock(&w->mu);
    s.m = w->m;
    s.queued = w->n_queued + w->n_running;
    s.waiting = w->n_queued;
    s.busy_slots = 0;
    for (int i = 0; i < w->n_slots; i++)
        s.busy_slots += w->slots[i].j != NULL;
    s.n_slots = w->n_slots;
    s.chunk = w->chunk;
    pthread_mutex_unlock(&w->mu);
    return s;
}

static const char *const bucket_le[SRV_BATCH_BUCKETS] = {"1", "2", "4", "8", "16", "32", "+Inf"};

char *srv_worker_metrics(srv_worker *w)
{
    snap s = take(w);
    const srv_metrics *m = &s.m;
    sbuf b = {malloc(16384), 0, 16384};
    typedef unsigned long long ull;
    const uint64_t uses = m->st.expert_hits + m->st.expert_misses;
    sb_printf(&b,
              "# HELP petrel_requests_total Completed API requests by outcome.\n"
              "# TYPE petrel_requests_total counter\n"
              "petrel_requests_total{outcome=\"ok\"} %llu\n"
              "petrel_requests_total{outcome=\"error\"} %llu\n"
              "petrel_requests_total{outcome=\"cancelled\"} %llu\n"
              "petrel_requests_total{outcome=\"rejected\"} %llu\n",
              (ull)m->requests_ok, (ull)m->requests_error, (ull)m->requests_cancelled, (ull)m->requests_rejected);
    METRIC(&b, "petrel_tokens_generated_total", "counter", "Tokens generated (all choices).", "%llu",
           (ull)m->tokens_generated);
    METRIC(&b, "petrel_prompt_tokens_total", "counter", "Prompt tokens received.", "%llu", (ull)m->prompt_tokens);
    METRIC(&b, "petrel_prefill_tokens_total", "counter", "Prompt tokens computed (not reused from a kept state).",
           "%llu", (ull)m->prefill_tokens);
    METRIC(&b, "petrel_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a kept state.", "%llu",
           (ull)m->cached_tokens);
    sb_printf(&b,
              "# HELP petrel_ttft_seconds Time to first token.\n"
              "# TYPE petrel_ttft_seconds summary\n"
              "petrel_ttft_seconds_sum %.6f\n"
              "petrel_ttft_seconds_count %llu\n",
              m->ttft_sum_s, (ull)m->ttft_count);
    METRIC(&b, "petrel_ttft_last_seconds", "gauge", "Time to first token of the last request.", "%.6f",
           m->ttft_last_s);
    METRIC(&b, "petrel_decode_tokens_per_second", "gauge",
           "Generation speed per request (all requests; after the first token).", "%.3f",
           m->decode_s > 0 ? m->decode_tokens / m->decode_s : 0.0);
    METRIC(&b, "petrel_decode_tokens_per_second_last", "gauge", "Generation speed of the last request.", "%.3f",
           m->last_tok_s);
    METRIC(&b, "petrel_expert_hit_rate", "gauge", "Expert uses served from RAM / all expert uses.", "%.6f",
           uses ? (double)m->st.expert_hits / (double)uses : 0.0);
    METRIC(&b, "petrel_expert_bytes_read_total", "counter", "Bytes read from the model file for experts.", "%llu",
           (ull)m->st.bytes_read);
    METRIC(&b, "petrel_queue_length", "gauge", "Requests waiting or running.", "%d", s.queued);
    METRIC(&b, "petrel_queue_waiting", "gauge", "Requests waiting.", "%d", s.waiting);
    METRIC(&b, "petrel_kv_states_kept", "gauge", "Conversation states kept for prefix reuse.", "%d", m->kept_states);
    METRIC(&b, "petrel_resident_memory_bytes", "gauge", "Resident memory of the server.", "%llu",
           (ull)pt_rss_bytes());
    // Continuous batching.
    METRIC(&b, "petrel_parallel_slots", "gauge", "Sequences that can decode together (--parallel).", "%d",
           s.n_slots);
    METRIC(&b, "petrel_slots_busy", "gauge", "Slots holding a running sequence.", "%d", s.busy_slots);
    sb_printf(&b, "# HELP petrel_batch_size Sequences per decode step (one forward each).\n"
                  "# TYPE petrel_batch_size histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i < SRV_BATCH_BUCKETS; i++) {
        cum += m->batch_hist[i];
        sb_printf(&b, "petrel_batch_size_bucket{le=\"%s\"} %llu\n", bucket_le[i], (ull)cum);
    }
    sb_printf(&b, "petrel_batch_size_sum %llu\npetrel_batch_size_count %llu\n", (ull)m->rows, (ull)m->steps);
    METRIC(&b, "petrel_batch_size_mean", "gauge", "Mean sequences per decode step.", "%.4f",
           m->steps ? (double)m->rows / (double)m->steps : 0.0);
    METRIC(&b, "petrel_batch_expert_uses_total", "counter",
           "(sequence, routed expert) uses in batched decode steps, every MoE block (after the last request).",
           "%llu", (ull)m->st.multi_expert_uses);
    METRIC(&b, "petrel_batch_expert_visits_total", "counter",
           "Distinct experts fetched and computed for those uses (after the last request).", "%llu",
           (ull)m->st.multi_expert_visits);
    METRIC(&b, "petrel_batch_shared_bytes_total", "counter",
           "Expert bytes not fetched again thanks to batching: uses served by a visit another sequence of "
           "the step made (after the last request).",
           "%llu", (ull)m->st.multi_bytes_shared);
    METRIC(&b, "petrel_prefill_chunk_tokens", "gauge", "Prompt tokens per prefill chunk (--prefill-chunk).", "%d",
           s.chunk);
    METRIC(&b, "petrel_prefill_chunks_total", "counter", "Prefill chunks run.", "%llu", (ull)m->prefill_chunks);
    METRIC(&b, "petrel_prefill_chunks_interleaved_total", "counter",
           "Prefill chunks run between decode steps of other sequences.", "%llu", (ull)m->prefill_chunks_interleaved);
    METRIC(&b, "petrel_prefill_chunk_max_seconds", "gauge", "Longest prefill chunk.", "%.6f",
           m->prefill_chunk_max_s);
    METRIC(&b, "petrel_prefill_tokens_per_second", "gauge", "Prompt tokens computed per second of prefill chunks.",
           "%.3f", m->prefill_s > 0 ? (double)m->prefill_tok / m->prefill_s : 0.0);
    METRIC(&b, "petrel_decode_step_gap_max_seconds", "gauge",
           "Longest time between two decode steps while sequences were decoding (a step plus at most one chunk).",
           "%.6f", m->step_gap_max_s);
    METRIC(&b, "petrel_prefill_batch_tokens", "gauge",
           "The engine's prefill chunk size: tokens per forward at most (--batch, or chosen from the RAM budget).",
           "%u", petrel_context_n_batch(w->e->c));
    METRIC(&b, "petrel_prefill_experts_per_chunk", "gauge",
           "Distinct routed experts visited per engine prefill chunk, every MoE block (after the last request).",
           "%.4f", m->slot_prefill_chunks ? (double)m->slot_prefill_visits / (double)m->slot_prefill_chunks : 0.0);
    METRIC(&b, "petrel_prefill_tokens_per_expert_visit", "gauge",
           "Prompt tokens computed per routed-expert visit in prefill chunks (after the last request).", "%.4f",
           m->slot_prefill_visits ? (double)m->slot_prefill_rows / (double)m->slot_prefill_visits : 0.0);
    return b.b;
}

void srv_worker_print_stats(srv_worker *w, void *file)
{
    FILE *f = file;
    snap s = take(w);
    const srv_metrics *m = &s.m;
    petrel_stats st;
    petrel_get_stats(w->e->c, &st); // after the thread ended: nothing decodes
    fprintf(f, "serve: %llu requests (%llu ok, %llu cancelled, %llu error, %llu rejected), %llu tokens generated\n",
            (unsigned long long)(m->requests_ok + m->requests_cancelled + m->requests_error),
            (unsigned long long)m->requests_ok, (unsigned long long)m->requests_cancelled,
            (unsigned long long)m->requests_error, (unsigned long long)m->requests_rejected,
            (unsigned long long)m->tokens_generated);
    fprintf(f, "batching: %d slots, %llu decode steps, mean batch %.2f (max %llu); steps by size:",
            s.n_slots, (unsigned long long)m->steps, m->steps ? (double)m->rows / (double)m->steps : 0.0,
            (unsigned long long)st.multi_max_rows);
    for (int i = 0; i < SRV_BATCH_BUCKETS; i++)
        fprintf(f, " <=%s: %llu", bucket_le[i], (unsigned long long)m->batch_hist[i]);
    fprintf(f, "\n");
    fprintf(f, "shared reads: %llu expert uses served by %llu visits (%.2f uses per visit), %.1f MB not fetched "
               "again\n",
            (unsigned long long)st.multi_expert_uses, (unsigned long long)st.multi_expert_visits,
            st.multi_expert_visits ? (double)st.multi_expert_uses / (double)st.multi_expert_visits : 0.0,
            (double)st.multi_bytes_shared / 1e6);
    fprintf(f, "prefill: %llu chunks of <= %d tokens (%llu between decode steps), %.2f tok/s, longest chunk %.3fs; "
               "longest gap between decode steps %.3fs\n",
            (unsigned long long)m->prefill_chunks, s.chunk, (unsigned long long)m->prefill_chunks_interleaved,
            m->prefill_s > 0 ? (double)m->prefill_tok / m->prefill_s : 0.0, m->prefill_chunk_max_s,
            m->step_gap_max_s);
    petrel_print_stats(w->e->c, f);
    petrel_print_stream_stats(w->e->c, f);
}

// server/worker.c — the generation thread and /metrics (see worker.h).
#include "server/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "server/api.h"

typedef struct stream_state {
    srv_job *j;
    bool first;
} stream_state;

// Piece callback: streaming jobs get a chunk per piece (and per token when
// logprobs are on); others collect logprobs entries.
static bool on_piece(void *user, const char *text, size_t len, petrel_token tok, json_object *lp)
{
    stream_state *ss = user;
    srv_job *j = ss->j;
    if (atomic_load(&j->cancel))
        return false;
    if (lp && !j->stream) {
        if (!j->lp)
            j->lp = json_object_new_array();
        json_object_array_add(j->lp, json_object_get(lp));
    }
    bool ids = j->return_ids && tok >= 0;
    if (j->stream && (len || lp || ids)) {
        json_object *o = srv_chunk(j, text, len, ss->first && j->kind == SRV_CHAT, lp, NULL);
        if (ids) {
            json_object *ch, *arr = json_object_new_array();
            json_object_array_add(arr, json_object_new_int(tok));
            json_object_object_get_ex(o, "choices", &ch);
            json_object_object_add(json_object_array_get_idx(ch, 0), "token_ids", arr);
        }
        srv_job_emit_json(j, o);
        ss->first = false;
    }
    return true;
}

static void finish_job(srv_worker *w, srv_job *j, int rc)
{
    srv_engine *e = w->e;
    if (j->stream) {
        if (rc < 0) {
            srv_job_emit_json(j, srv_error_json(500, j->res.err, NULL));
        } else if (strcmp(j->res.finish, "cancelled")) {
            srv_job_emit_json(j, srv_chunk(j, "", 0, false, NULL, j->res.finish));
            if (j->include_usage)
                srv_job_emit_json(j, srv_usage_chunk(j));
        }
        srv_job_emit(j, "data: [DONE]\n\n", 14);
    }
    pthread_mutex_lock(&w->mu);
    srv_metrics *m = &w->m;
    if (rc < 0)
        m->requests_error++;
    else if (!strcmp(j->res.finish, "cancelled"))
        m->requests_cancelled++;
    else
        m->requests_ok++;
    m->tokens_generated += (uint64_t)j->res.n_gen;
    m->prompt_tokens += (uint64_t)j->gp.n_prompt;
    m->prefill_tokens += (uint64_t)j->res.n_prefilled;
    m->cached_tokens += (uint64_t)j->res.n_cached;
    if (j->res.n_gen > 0) {
        m->ttft_sum_s += j->res.ttft_s;
        m->ttft_last_s = j->res.ttft_s;
        m->ttft_count++;
    }
    if (j->res.n_gen > 1 && j->res.t_decode_s > 0) {
        m->decode_s += j->res.t_decode_s;
        m->decode_tokens += (uint64_t)(j->res.n_gen - 1);
        m->last_tok_s = (j->res.n_gen - 1) / j->res.t_decode_s;
    }
    petrel_get_stats(e->c, &m->st);
    m->kept_states = e->kv ? e->kv->n : 0;
    pthread_mutex_unlock(&w->mu);

    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->state = SRV_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void *worker_main(void *arg)
{
    srv_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->head && !w->stopping)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stopping) {
            pthread_mutex_unlock(&w->mu);
            break;
        }
        srv_job *j = w->head;
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->n_queued--;
        w->busy = true;
        w->current = j;
        pthread_mutex_unlock(&w->mu);

        pthread_mutex_lock(&j->mu);
        j->state = SRV_RUNNING;
        pthread_mutex_unlock(&j->mu);
        int rc = 0;
        if (atomic_load(&j->cancel)) {
            j->res.finish = "cancelled";
        } else {
            stream_state ss = {j, true};
            rc = srv_generate(w->e, &j->gp, on_piece, &ss, &j->cancel, &j->res);
        }
        pthread_mutex_lock(&w->mu);
        w->busy = false;
        w->current = NULL;
        pthread_mutex_unlock(&w->mu);
        finish_job(w, j, rc);
        srv_job_unref(j);
    }
    return NULL;
}

srv_worker *srv_worker_start(srv_engine *e, int max_queue)
{
    srv_worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->e = e;
    w->max_queue = max_queue;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
        free(w);
        return NULL;
    }
    return w;
}

int srv_worker_submit(srv_worker *w, srv_job *j)
{
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    if (w->stopping)
        rc = 503;
    else if (w->n_queued >= w->max_queue)
        rc = 429;
    if (rc) {
        w->m.requests_rejected++;
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    w->n_queued++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void srv_worker_count_rejected(srv_worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->m.requests_rejected++;
    pthread_mutex_unlock(&w->mu);
}

void srv_worker_stop(srv_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    if (w->current)
        atomic_store(&w->current->cancel, true);
    srv_job *q = w->head;
    w->head = w->tail = NULL;
    w->n_queued = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    while (q) {
        srv_job *nx = q->next;
        atomic_store(&q->cancel, true);
        if (q->stream)
            srv_job_emit(q, "data: [DONE]\n\n", 14);
        pthread_mutex_lock(&q->mu);
        q->http_status = 503;
        q->state = SRV_DONE;
        q->res.finish = "cancelled";
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        srv_job_unref(q);
        q = nx;
    }
    pthread_join(w->th, NULL);
}

void srv_worker_free(srv_worker *w)
{
    if (!w)
        return;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

char *srv_worker_metrics(srv_worker *w)
{
    pthread_mutex_lock(&w->mu);
    srv_metrics m = w->m;
    int queued = w->n_queued + (w->busy ? 1 : 0), waiting = w->n_queued;
    pthread_mutex_unlock(&w->mu);
    size_t cap = 8192;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    const uint64_t uses = m.st.expert_hits + m.st.expert_misses;
    snprintf(b, cap,
             "# HELP petrel_requests_total Completed API requests by outcome.\n"
             "# TYPE petrel_requests_total counter\n"
             "petrel_requests_total{outcome=\"ok\"} %llu\n"
             "petrel_requests_total{outcome=\"error\"} %llu\n"
             "petrel_requests_total{outcome=\"cancelled\"} %llu\n"
             "petrel_requests_total{outcome=\"rejected\"} %llu\n"
             "# HELP petrel_tokens_generated_total Tokens generated.\n"
             "# TYPE petrel_tokens_generated_total counter\n"
             "petrel_tokens_generated_total %llu\n"
             "# HELP petrel_prompt_tokens_total Prompt tokens received.\n"
             "# TYPE petrel_prompt_tokens_total counter\n"
             "petrel_prompt_tokens_total %llu\n"
             "# HELP petrel_prefill_tokens_total Prompt tokens computed (not reused from a kept state).\n"
             "# TYPE petrel_prefill_tokens_total counter\n"
             "petrel_prefill_tokens_total %llu\n"
             "# HELP petrel_prompt_tokens_cached_total Prompt tokens reused from a kept state.\n"
             "# TYPE petrel_prompt_tokens_cached_total counter\n"
             "petrel_prompt_tokens_cached_total %llu\n"
             "# HELP petrel_ttft_seconds Time to first token.\n"
             "# TYPE petrel_ttft_seconds summary\n"
             "petrel_ttft_seconds_sum %.6f\n"
             "petrel_ttft_seconds_count %llu\n"
             "# HELP petrel_ttft_last_seconds Time to first token of the last request.\n"
             "# TYPE petrel_ttft_last_seconds gauge\n"
             "petrel_ttft_last_seconds %.6f\n"
             "# HELP petrel_decode_tokens_per_second Generation speed (all requests; after the first token).\n"
             "# TYPE petrel_decode_tokens_per_second gauge\n"
             "petrel_decode_tokens_per_second %.3f\n"
             "# HELP petrel_decode_tokens_per_second_last Generation speed of the last request.\n"
             "# TYPE petrel_decode_tokens_per_second_last gauge\n"
             "petrel_decode_tokens_per_second_last %.3f\n"
             "# HELP petrel_expert_hit_rate Expert uses served from RAM / all expert uses.\n"
             "# TYPE petrel_expert_hit_rate gauge\n"
             "petrel_expert_hit_rate %.6f\n"
             "# HELP petrel_expert_bytes_read_total Bytes read from the model file for experts.\n"
             "# TYPE petrel_expert_bytes_read_total counter\n"
             "petrel_expert_bytes_read_total %llu\n"
             "# HELP petrel_queue_length Requests waiting or running.\n"
             "# TYPE petrel_queue_length gauge\n"
             "petrel_queue_length %d\n"
             "# HELP petrel_queue_waiting Requests waiting.\n"
             "# TYPE petrel_queue_waiting gauge\n"
             "petrel_queue_waiting %d\n"
             "# HELP petrel_kv_states_kept Conversation states kept for prefix reuse.\n"
             "# TYPE petrel_kv_states_kept gauge\n"
             "petrel_kv_states_kept %d\n"
             "# HELP petrel_resident_memory_bytes Resident memory of the server.\n"
             "# TYPE petrel_resident_memory_bytes gauge\n"
             "petrel_resident_memory_bytes %llu\n",
             (unsigned long long)m.requests_ok, (unsigned long long)m.requests_error,
             (unsigned long long)m.requests_cancelled, (unsigned long long)m.requests_rejected,
             (unsigned long long)m.tokens_generated, (unsigned long long)m.prompt_tokens,
             (unsigned long long)m.prefill_tokens, (unsigned long long)m.cached_tokens, m.ttft_sum_s,
             (unsigned long long)m.ttft_count, m.ttft_last_s, m.decode_s > 0 ? m.decode_tokens / m.decode_s : 0.0,
             m.last_tok_s, uses ? (double)m.st.expert_hits / (double)uses : 0.0,
             (unsigned long long)m.st.bytes_read, queued, waiting, m.kept_states,
             (unsigned long long)pt_rss_bytes());
    return b;
}

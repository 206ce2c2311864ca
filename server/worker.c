// server/worker.c — the generation thread (see worker.h): continuous
// batching. Every turn of the loop admits queued requests into free slots,
// runs at most one prefill chunk (round robin over the sequences still
// prefilling), then one decode step over the next token of every decoding
// sequence with petrel_decode_multi (each routed expert of the step read
// and computed once for all the rows that chose it), and retires what
// finished. A request with n choices takes n slots: choice 0 prefills, its
// state is copied into the others, which then decode beside it.
#include "server/worker.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "server/api.h"

// Piece callback (user = the slot): streaming jobs get a chunk per piece
// (and per token when logprobs or ids are on); others collect logprobs.
static bool on_piece(void *user, const char *text, size_t len, petrel_token tok, json_object *lp)
{
    srv_slot *sl = user;
    srv_job *j = sl->j;
    if (atomic_load(&j->cancel))
        return false;
    if (lp && !j->stream) {
        if (!j->lp[sl->choice])
            j->lp[sl->choice] = json_object_new_array();
        json_object_array_add(j->lp[sl->choice], json_object_get(lp));
    }
    bool ids = j->return_ids && tok >= 0;
    if (j->stream && (len || lp || ids)) {
        json_object *o = srv_chunk(j, sl->choice, text, len, sl->first && j->kind == SRV_CHAT, lp, NULL);
        if (ids) {
            json_object *ch, *arr = json_object_new_array();
            json_object_array_add(arr, json_object_new_int(tok));
            json_object_object_get_ex(o, "choices", &ch);
            json_object_object_add(json_object_array_get_idx(ch, 0), "token_ids", arr);
        }
        srv_job_emit_json(j, o);
        sl->first = false;
    }
    return true;
}

// All choices of j are done: the end of its stream, the counters, and the
// HTTP side woken. rc: 0, or -1 when a choice failed (its message in j->res.err).
static void finish_job(srv_worker *w, srv_job *j, int rc)
{
    srv_engine *e = w->e;
    const char *fin = j->res.finish ? j->res.finish : "cancelled";
    const bool cancelled = !strcmp(fin, "cancelled");
    if (j->stream) {
        if (rc < 0)
            srv_job_emit_json(j, srv_error_json(500, j->res.err, NULL));
        else if (!cancelled && j->include_usage)
            srv_job_emit_json(j, srv_usage_chunk(j));
        srv_job_emit(j, "data: [DONE]\n\n", 14);
    }
    petrel_stats st;
    petrel_get_stats(e->c, &st);
    uint64_t pc = 0, pv = 0, pr = 0;
    for (int i = 0; i < e->n_slots; i++) {
        petrel_stats si;
        petrel_get_stats(e->slots[i], &si);
        pc += si.prefill_chunks;
        pv += si.prefill_expert_visits;
        pr += si.prefill_expert_rows;
    }
    pthread_mutex_lock(&w->mu);
    srv_metrics *m = &w->m;
    if (rc < 0)
        m->requests_error++;
    else if (cancelled)
        m->requests_cancelled++;
    else
        m->requests_ok++;
    for (int i = 0; i < j->n; i++)
        m->tokens_generated += (uint64_t)srv_job_result(j, i)->n_gen;
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
    m->st = st;
    m->slot_prefill_chunks = pc;
    m->slot_prefill_visits = pv;
    m->slot_prefill_rows = pr;
    m->kept_states = e->kv ? e->kv->n : 0;
    w->n_running--;
    pthread_mutex_unlock(&w->mu);

    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->state = SRV_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

// Free slots for choice 0 of a prompt: the one whose live KV cache shares
// the longest prefix with it (a conversation's follow-up lands where its
// state is), ties to the shortest live cache (the least to lose).
static int pick_slot(srv_worker *w, const petrel_token *ids, int n)
{
    int best = -1, best_lcp = -1, best_len = 0;
    for (int i = 0; i < w->n_slots; i++) {
        srv_slot *sl = &w->slots[i];
        if (sl->j)
            continue;
        int len = petrel_kv_len(sl->c);
        int l = srv_lcp(petrel_kv_tokens(sl->c), len, ids, n);
        if (l > best_lcp || (l == best_lcp && len < best_len)) {
            best = i;
            best_lcp = l;
            best_len = len;
        }
    }
    return best;
}

static int free_slots(const srv_worker *w)
{
    int k = 0;
    for (int i = 0; i < w->n_slots; i++)
        k += w->slots[i].j == NULL;
    return k;
}

// Pops the jobs at the head of the queue that fit into free slots (FIFO:
// a job needing more slots than are free holds the ones behind it) and
// assigns their slots. Caller holds mu. Returns the count, jobs in out.
static int admit(srv_worker *w, srv_job **out)
{
    int na = 0;
    while (w->head && !w->stopping && free_slots(w) >= w->head->n) {
        srv_job *j = w->head;
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->n_queued--;
        w->n_running++;
        j->n_live = j->n;
        for (int c = 0; c < j->n; c++) {
            int i = c == 0 ? pick_slot(w, j->gp.prompt, j->gp.n_prompt) : pick_slot(w, NULL, 0);
            assert(i >= 0);
            srv_slot *sl = &w->slots[i];
            sl->j = j;
            sl->choice = c;
            sl->started = false;
            sl->first = true;
        }
        out[na++] = j;
    }
    return na;
}

// Begins choice `choice` of sl->j on its slot. Choices after 0 decode from
// a copy of choice 0's state (the prompt's KV, computed once) and sample
// with seed + choice.
static void start_choice(srv_worker *w, srv_slot *sl, int reuse)
{
    srv_job *j = sl->j;
    srv_gen_params p = j->gp;
    p.sp.seed += (uint64_t)sl->choice;
    sl->started = true;
    srv_seq_begin(&sl->seq, w->e, sl->c, &p, reuse, on_piece, sl, &j->cancel, srv_job_result(j, sl->choice));
}

// Choice 0 of j (in slot p) has its prompt in the KV cache: the other
// choices get a copy of it. A copy that fails only costs a prefill (the
// choice then computes the prompt itself).
static void start_siblings(srv_worker *w, srv_slot *p)
{
    srv_job *j = p->j;
    void *blob = NULL;
    size_t len = 0;
    char err[512];
    if (petrel_state_save_mem(p->c, &blob, &len, err, sizeof err) < 0)
        fprintf(stderr, "petrel serve: copying the prompt's state: %s\n", err);
    for (int i = 0; i < w->n_slots; i++) {
        srv_slot *sl = &w->slots[i];
        if (sl->j != j || sl->started)
            continue;
        if (blob && petrel_state_load_mem(sl->c, blob, len, err, sizeof err) < 0)
            fprintf(stderr, "petrel serve: copying the prompt's state: %s\n", err);
        start_choice(w, sl, SRV_REUSE_LIVE);
    }
    free(blob);
}

static bool any_decoding(const srv_worker *w)
{
    for (int i = 0; i < w->n_slots; i++)
        if (w->slots[i].started && w->slots[i].seq.phase == SRV_SEQ_DECODE)
            return true;
    return false;
}

// One prefill chunk of the next prefilling sequence (round robin), so a
// long prompt delays the decoding sequences by one chunk per step.
static void prefill_one(srv_worker *w)
{
    for (int k = 0; k < w->n_slots; k++) {
        int i = (w->rr + k) % w->n_slots;
        srv_slot *sl = &w->slots[i];
        if (!sl->started || sl->seq.phase != SRV_SEQ_PREFILL)
            continue;
        // Alone, a prompt goes in pieces of the batch size (fewest passes over
        // the experts); beside decoding sequences, in --prefill-chunk pieces.
        const bool inter = any_decoding(w);
        double t0 = pt_now();
        int got = srv_seq_prefill(&sl->seq, inter ? w->chunk : w->chunk_alone);
        double dt = pt_now() - t0;
        pthread_mutex_lock(&w->mu);
        if (got > 0) {
            w->m.prefill_chunks++;
            w->m.prefill_chunks_interleaved += inter;
            w->m.prefill_tok += (uint64_t)got;
            w->m.prefill_s += dt;
            if (dt > w->m.prefill_chunk_max_s)
                w->m.prefill_chunk_max_s = dt;
        }
        pthread_mutex_unlock(&w->mu);
        if (sl->choice == 0 && sl->seq.phase == SRV_SEQ_DECODE && sl->j->n > 1)
            start_siblings(w, sl);
        w->rr = i + 1;
        return;
    }
}

static int bucket(int n)
{
    int b = 0;
    for (int lim = 1; b < SRV_BATCH_BUCKETS - 1 && n > lim; lim *= 2)
        b++;
    return b;
}

// One decode step over every decoding sequence, then a sample for each.
static void decode_step(srv_worker *w)
{
    petrel_context *ctxs[SRV_MAX_SLOTS];
    petrel_token toks[SRV_MAX_SLOTS];
    srv_slot *who[SRV_MAX_SLOTS];
    int n = 0;
    for (int i = 0; i < w->n_slots; i++) {
        srv_slot *sl = &w->slots[i];
        if (sl->started && sl->seq.phase == SRV_SEQ_DECODE) {
            ctxs[n] = sl->c;
            toks[n] = sl->seq.next;
            who[n++] = sl;
        }
    }
    if (n == 0) {
        w->last_step = 0;
        return;
    }
    char err[512];
    double t0 = pt_now();
    if (w->last_step > 0) {
        double gap = t0 - w->last_step;
        pthread_mutex_lock(&w->mu);
        if (gap > w->m.step_gap_max_s)
            w->m.step_gap_max_s = gap;
        pthread_mutex_unlock(&w->mu);
    }
    int rc = petrel_decode_multi(ctxs, toks, n, err, sizeof err);
    w->last_step = pt_now();
    pthread_mutex_lock(&w->mu);
    w->m.steps++;
    w->m.rows += (uint64_t)n;
    w->m.batch_hist[bucket(n)]++;
    pthread_mutex_unlock(&w->mu);
    for (int k = 0; k < n; k++) {
        if (rc < 0)
            srv_seq_fail(&who[k]->seq, err);
        else
            srv_seq_step(&who[k]->seq, petrel_get_logits(ctxs[k], 0));
    }
}

// Releases slot sl (its choice is done) and finishes the job with its last choice.
static void release(srv_worker *w, srv_slot *sl)
{
    srv_job *j = sl->j;
    pthread_mutex_lock(&w->mu);
    sl->j = NULL;
    sl->started = false;
    pthread_mutex_unlock(&w->mu);
    if (--j->n_live > 0)
        return;
    int rc = 0;
    for (int c = 0; c < j->n; c++) {
        srv_gen_result *r = srv_job_result(j, c);
        if (r->finish && !strcmp(r->finish, "error")) {
            if (c)
                snprintf(j->res.err, sizeof j->res.err, "%s", r->err);
            rc = -1;
            break;
        }
    }
    finish_job(w, j, rc);
    srv_job_unref(j);
}

// Ends the sequences that are done: final chunk of their choice, state
// kept for prefix reuse, slot freed. Choices that never started because
// choice 0 ended during its prefill end with it.
static void reap(srv_worker *w)
{
    for (int i = 0; i < w->n_slots; i++) {
        srv_slot *sl = &w->slots[i];
        if (!sl->started || sl->seq.phase != SRV_SEQ_DONE)
            continue;
        srv_job *j = sl->j;
        srv_seq_end(&sl->seq, true);
        const srv_gen_result *r = srv_job_result(j, sl->choice);
        if (j->stream && sl->seq.rc == 0 && strcmp(r->finish, "cancelled"))
            srv_job_emit_json(j, srv_chunk(j, sl->choice, "", 0, false, NULL, r->finish));
        if (sl->choice == 0)
            for (int k = 0; k < w->n_slots; k++) {
                srv_slot *o = &w->slots[k];
                if (o->j == j && !o->started) {
                    srv_gen_result *ro = srv_job_result(j, o->choice);
                    ro->finish = j->res.finish;
                    release(w, o);
                }
            }
        release(w, sl);
    }
    if (!any_decoding(w))
        w->last_step = 0; // an idle wait is not a stall
}

static void *worker_main(void *arg)
{
    srv_worker *w = arg;
    for (;;) {
        srv_job *adm[SRV_MAX_SLOTS];
        pthread_mutex_lock(&w->mu);
        while (!w->stopping && !w->head && w->n_running == 0)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stopping && w->n_running == 0) {
            pthread_mutex_unlock(&w->mu);
            break;
        }
        int na = admit(w, adm);
        pthread_mutex_unlock(&w->mu);
        for (int a = 0; a < na; a++) {
            srv_job *j = adm[a];
            pthread_mutex_lock(&j->mu);
            j->state = SRV_RUNNING;
            pthread_mutex_unlock(&j->mu);
            for (int i = 0; i < w->n_slots; i++)
                if (w->slots[i].j == j && w->slots[i].choice == 0) {
                    start_choice(w, &w->slots[i], SRV_REUSE_ALL);
                    if (j->n > 1 && w->slots[i].seq.phase == SRV_SEQ_DECODE)
                        start_siblings(w, &w->slots[i]);
                }
        }
        prefill_one(w);
        decode_step(w);
        reap(w);
    }
    return NULL;
}

srv_worker *srv_worker_start(srv_engine *e, const srv_config *cfg, char *err, size_t errlen)
{
    const int np = cfg->parallel > 0 ? cfg->parallel : 4;
    if (np > SRV_MAX_SLOTS) {
        snprintf(err, errlen, "--parallel %d: at most %d", np, SRV_MAX_SLOTS);
        return NULL;
    }
    const uint32_t nb = (uint32_t)srv_engine_batch(e);
    if ((uint32_t)np > nb) {
        snprintf(err, errlen, "--parallel %d is more than the batch size %u (--batch)", np, nb);
        return NULL;
    }
    if (srv_engine_set_slots(e, np, err, errlen) < 0)
        return NULL;
    srv_worker *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->e = e;
    w->max_queue = cfg->max_queue;
    w->n_slots = np;
    for (int i = 0; i < np; i++)
        w->slots[i].c = e->slots[i];
    w->chunk = cfg->prefill_chunk > 0 ? cfg->prefill_chunk : SRV_PREFILL_CHUNK;
    if ((uint32_t)w->chunk > nb)
        w->chunk = (int)nb; // one petrel_decode call per chunk
    w->chunk_alone = (int)nb;
    w->print_stats = cfg->stats;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        snprintf(err, errlen, "cannot start the generation thread");
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
    else if (w->n_queued >= w->max_queue && (w->head || free_slots(w) < j->n))
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
    for (int i = 0; i < w->n_slots; i++)
        if (w->slots[i].j)
            atomic_store(&w->slots[i].j->cancel, true);
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
    if (w->print_stats)
        srv_worker_print_stats(w, stderr);
}

void srv_worker_free(srv_worker *w)
{
    if (!w)
        return;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

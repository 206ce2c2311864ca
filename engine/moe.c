// engine/moe.c — the FFN sub-block: SwiGLU FFNs and the MoE (router,
// routed experts streamed through the expert cache, shared experts).
//
// Overlap: the reads of every missing expert of the batch start first (each
// distinct expert is read once per batch: batch union), then the lookahead
// predictor starts reads for the next block, then the shared experts and the
// resident routed experts compute while those reads are in flight, and each
// missing expert computes as soon as its bytes arrive. Experts may thus
// compute in any order, but each writes its own rows of s->eo and the
// outputs are combined afterwards in the router's selection order, so the
// arrival order never changes a bit of the result.
#include <assert.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/context.h"
#include "engine/stream.h"
#include "kernels/ops.h"
#include "router/router.h"

// SwiGLU FFN with matrices gate/up (n_ff, n_embd), down (n_embd, n_ff):
// X (B, n_embd) -> Y (B, n_embd), with scratch fa, fb (B, n_ff) each.
static void ffn_with(const pt_mat *gate, const pt_mat *up, const pt_mat *down, const float *X, int B, float *Y,
                     float *fa, float *fb)
{
    const int64_t nff = gate->rows;
    pt_gemm_pair(gate, up, X, B, fa, fb);
    pt_swiglu(fa, fa, fb, nff * B);
    pt_gemm(down, fa, B, Y);
}

void pt_ffn(petrel_context *c, const pt_mat *gate, const pt_mat *up, const pt_mat *down,
                const float *X, int B, float *Y)
{
    ffn_with(gate, up, down, X, B, Y, c->s.ff_a, c->s.ff_b);
}

// PETREL_MOE_TEAM=off: small batches take the per-group path (comparisons).
static bool pt_moe_team_off(void)
{
    static int off = -1;
    return pt_env_off("PETREL_MOE_TEAM", &off);
}

// PETREL_PP_SIDE=off: batches larger than PT_PAR_EXPERT_B compute every
// expert one at a time with split products, as before 2026-12-07 (A/B).
static bool pt_pp_side_off(void)
{
    static int off = -1;
    return pt_env_off("PETREL_PP_SIDE", &off);
}

static inline void pt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Progress of one distinct expert of the batch.
enum { U_DEFERRED = 0, U_LOADING = 1, U_READY = 2, U_DONE = 3 };

// Scratch for applying one expert to up to B rows.
typedef struct expert_scratch {
    float *gx;       // (B, n_embd) gathered rows, then their outputs
    int32_t *gsel;   // (B) batch entry of each gathered row
    int32_t *gk;     // (B) selection slot of each gathered row
    float *fa, *fb;  // (B, n_ff_exp)
} expert_scratch;

// Applies routed expert e (weights w) to the batch rows that chose it and
// writes each row's output to its selection slot of s->eo.
static void run_expert_with(petrel_context *c, int il, int e, const void *w[3], int B, const expert_scratch *x)
{
    const pt_hparams *hp = &c->model->hp;
    const pt_layer *L = &c->model->layers[il];
    pt_scratch *s = &c->s;
    const int n_used = (int)hp->n_expert_used, n_embd = (int)hp->n_embd;
    int ng = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < n_used; k++)
            if (s->rids[(size_t)b * n_used + k] == e) {
                memcpy(x->gx + (size_t)ng * n_embd, s->xn + (size_t)b * n_embd, sizeof(float) * (size_t)n_embd);
                x->gsel[ng] = b;
                x->gk[ng] = k;
                ng++;
            }
    pt_mat g = {w[0], L->exps_type[0], hp->n_ff_exp, hp->n_embd};
    pt_mat u = {w[1], L->exps_type[1], hp->n_ff_exp, hp->n_embd};
    pt_mat d = {w[2], L->exps_type[2], hp->n_embd, hp->n_ff_exp};
    ffn_with(&g, &u, &d, x->gx, ng, x->gx, x->fa, x->fb);
    for (int r = 0; r < ng; r++)
        memcpy(s->eo + ((size_t)x->gsel[r] * n_used + x->gk[r]) * n_embd, x->gx + (size_t)r * n_embd,
               sizeof(float) * (size_t)n_embd);
}

static void run_expert(petrel_context *c, int il, int e, const void *w[3], int B)
{
    pt_scratch *s = &c->s;
    const expert_scratch x = {s->gx, s->gsel, s->gk, s->ff_a, s->ff_b};
    run_expert_with(c, il, e, w, B, &x);
}

// Thread tid's part of st->pscratch: room for st->prows rows.
static expert_scratch thread_scratch(const pt_stream *st, const pt_hparams *hp, int tid)
{
    const size_t pr = (size_t)st->prows;
    const size_t per = pr * (hp->n_embd + 2 * hp->n_ff_exp) + 2 * pr;
    float *base = st->pscratch + (size_t)tid * per;
    expert_scratch x = {
        .gx = base,
        .fa = base + pr * hp->n_embd,
        .fb = base + pr * (hp->n_embd + hp->n_ff_exp),
        .gsel = (int32_t *)(base + pr * (hp->n_embd + 2 * hp->n_ff_exp)),
    };
    x.gk = x.gsel + pr;
    return x;
}

// The experts that are ready computed side by side, one per thread, each
// product single-threaded inside, instead of one after another with every
// product split over the threads: a few parallel regions per layer instead
// of several per expert (and, for small batches, no wake-up per expert
// arriving). Each of them has at most st->prows rows. They are handed out
// largest first, so that the threads finish together. The bits are the
// same either way (kernels/matmul.h).
static void run_ready_parallel(petrel_context *c, int il, const int *list, int n, const void *(*w)[3], int B)
{
    pt_stream *st = c->stream;
    const pt_hparams *hp = &c->model->hp;
    int ord[PT_PAR_EXPERT_MAX];
    for (int j = 0; j < n; j++) { // insertion sort by rows, descending
        int k = j;
        for (; k > 0 && st->ucount[list[ord[k - 1]]] < st->ucount[list[j]]; k--)
            ord[k] = ord[k - 1];
        ord[k] = j;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        const int j = ord[i];
        assert(st->ucount[list[j]] <= st->prows);
        const expert_scratch x = thread_scratch(st, hp, omp_get_thread_num());
        run_expert_with(c, il, st->uniq[list[j]], w[j], B, &x);
    }
}

// Asks the cache for distinct expert i of the batch (a demand, or a retry of
// one that found no room) and updates its state. -1 on a queueing failure.
static int request_expert(petrel_context *c, int il, int i, int kind)
{
    pt_stream *st = c->stream;
    const int e = st->uniq[i];
    int r = pt_ecache_request(c->ecache, il, e, kind, &c->err);
    if (r < 0)
        return -1;
    if (r == PT_EC_READY) {
        const void *w[3];
        pt_ecache_pin(c->ecache, il, e, w); // kept until computed
        st->ustate[i] = U_READY;
    } else if (r == PT_EC_LOADING) {
        if (st->ustate[i] == U_DEFERRED)
            st->utries[i]++;
        st->ustate[i] = U_LOADING;
    } else {
        st->ustate[i] = U_DEFERRED;
    }
    return 0;
}

static int retry_deferred(petrel_context *c, int il, int nu)
{
    for (int i = 0; i < nu; i++)
        if (c->stream->ustate[i] == U_DEFERRED && request_expert(c, il, i, PT_EC_RETRY) < 0)
            return -1;
    return 0;
}

// Takes note of one finished (or failed) read returned by the cache: an
// expert of this batch becomes READY (pinned), or a failed read of one is
// retried once as a demand (a failed prefetch) or reported.
static int on_read_done(petrel_context *c, int il, int rc, int wl, int we, const pt_err *err)
{
    pt_stream *st = c->stream;
    const int ui = (wl == il && we >= 0) ? st->upos[we] : -1;
    if (ui < 0 || st->ustate[ui] != U_LOADING)
        return 0; // another layer's (prefetched) expert
    if (rc < 0) {
        if (st->utries[ui] >= 1) {
            memcpy(c->err.msg, err->msg, sizeof err->msg);
            return -1;
        }
        st->ustate[ui] = U_DEFERRED;
    } else if (rc > 0) {
        const void *w[3];
        pt_ecache_pin(c->ecache, il, we, w);
        st->ustate[ui] = U_READY;
    }
    return 0;
}

// Reaps every read that has already finished, without blocking.
static int reap_finished(petrel_context *c, int il)
{
    for (;;) {
        int wl = -1, we = -1;
        pt_err err = {{0}};
        const int rc = pt_ecache_poll(c->ecache, &wl, &we, &err);
        if (rc == 0)
            return 0;
        if (on_read_done(c, il, rc, wl, we, &err) < 0)
            return -1;
    }
}

// Computes the ready experts listed (pinned once each when they became
// ready) and marks them done. Small batches with at least one expert per
// thread compute them side by side; otherwise one at a time with each
// product split over the threads, so that no thread idles either way.
static void compute_ready(petrel_context *c, int il, int B, const int *list, int n)
{
    pt_stream *st = c->stream;
    pt_ecache *ec = c->ecache;
    const void *w[PT_PAR_EXPERT_MAX][3];
    for (int j = 0; j < n; j++) {
        pt_ecache_pin(ec, il, st->uniq[list[j]], w[j]);
        pt_ecache_release(ec, il, st->uniq[list[j]]); // (the pin taken when it became ready)
    }
    const double t0 = pt_now();
    if (n > 1)
        run_ready_parallel(c, il, list, n, w, B);
    else
        run_expert(c, il, st->uniq[list[0]], w[0], B);
    c->prof.routed += pt_now() - t0;
    for (int j = 0; j < n; j++) {
        pt_ecache_release(ec, il, st->uniq[list[j]]);
        st->ustate[list[j]] = U_DONE;
    }
}

// Computes every distinct expert of the batch as it becomes ready. Between
// computations, finished reads are reaped (which also hands queued requests
// to the device), so the disk stays busy while the CPU works.
static int stream_experts(petrel_context *c, int il, int B, int nu)
{
    pt_stream *st = c->stream;
    pt_ecache *ec = c->ecache;
    const int nt = c->n_threads > 0 ? c->n_threads : 1;
    const bool side_by_side = (B <= PT_PAR_EXPERT_B || !pt_pp_side_off()) && st->pscratch && nt > 1;
    int left = nu;
    while (left > 0) {
        if (reap_finished(c, il) < 0)
            return -1;
        // ready experts with at most st->side_rows rows (list), and the
        // first ready one with more (big)
        int list[PT_PAR_EXPERT_MAX], n = 0, pending = 0, big = -1;
        for (int j = 0; j < nu; j++) {
            if (st->ustate[j] == U_READY) {
                if (B > PT_PAR_EXPERT_B && st->ucount[j] > st->side_rows)
                    big = big < 0 ? j : big;
                else if (n < PT_PAR_EXPERT_MAX)
                    list[n++] = j;
            }
            pending += st->ustate[j] == U_LOADING || st->ustate[j] == U_DEFERRED;
        }
        if (n > 0 || big >= 0) {
            // Side by side in multiples of the thread count (all of them
            // when nothing else is coming); the rest one at a time, each
            // product split over the threads.
            int take = 1;
            const int *from = list;
            if (side_by_side && n >= nt)
                take = pending == 0 && big < 0 ? n : n - n % nt;
            else if (big >= 0)
                from = &big;
            compute_ready(c, il, B, from, take);
            left -= take;
            if (retry_deferred(c, il, nu) < 0)
                return -1;
            continue;
        }
        int wl = -1, we = -1;
        pt_err err = {{0}};
        double t0 = pt_now();
        int rc = pt_ecache_wait(ec, &wl, &we, &err);
        pt_ecache_lstats(ec, il)->t_wait_s += pt_now() - t0;
        if (rc != 0) {
            if (on_read_done(c, il, rc, wl, we, &err) < 0)
                return -1;
        } else {
            // Nothing in flight: deferred experts must find room now.
            bool any_deferred = false;
            for (int j = 0; j < nu; j++)
                any_deferred |= st->ustate[j] == U_DEFERRED;
            if (retry_deferred(c, il, nu) < 0)
                return -1;
            bool progress = false;
            for (int j = 0; j < nu; j++)
                progress |= st->ustate[j] != U_DEFERRED;
            if (any_deferred && !progress)
                return pt_errf(&c->err, "expert cache: layer %d: no slot can be freed for its experts", il);
        }
        if (retry_deferred(c, il, nu) < 0)
            return -1;
    }
    return 0;
}

// ---- small batches: one team of threads per block -----------------------
//
// For decode-sized batches the threads stay in ONE parallel region for the
// whole block instead of one region per group of ready experts: thread 0
// talks to the cache (reaps finished reads, retries deferred requests,
// releases computed experts) and publishes each expert as it becomes ready
// in a queue; every thread, thread 0 between its polls included, takes the
// next published expert and computes it whole, single-threaded, into its
// own rows of s->eo. Experts arriving one or two at a time thus cost no
// parallel-region wake-up each, and the disk is polled while others
// compute. Each expert's result is the same bits wherever and whenever it
// is computed (kernels/matmul.h), and the combination order is fixed
// afterwards, so this changes nothing but the time.

typedef struct team {
    const void *w[PT_PAR_EXPERT_MAX][3]; // weights of queue entry q
    int idx[PT_PAR_EXPERT_MAX];          // queue entry -> distinct-expert index
    _Atomic int tail;                    // entries published (thread 0 writes)
    _Atomic int head;                    // entries claimed
    _Atomic int8_t done[PT_PAR_EXPERT_MAX]; // queue entry computed
    _Atomic int n_done;
    _Atomic int stop;                    // thread 0 gave up (error): everyone leaves
} team;

// Claims and computes one published expert; false when none is waiting.
static bool team_work(petrel_context *c, int il, int B, team *t)
{
    int q = atomic_load_explicit(&t->head, memory_order_relaxed);
    for (;;) {
        if (q >= atomic_load_explicit(&t->tail, memory_order_acquire))
            return false;
        if (atomic_compare_exchange_weak(&t->head, &q, q + 1))
            break;
    }
    pt_stream *st = c->stream;
    const expert_scratch x = thread_scratch(st, &c->model->hp, omp_get_thread_num());
    run_expert_with(c, il, st->uniq[t->idx[q]], t->w[q], B, &x);
    atomic_store_explicit(&t->done[q], 1, memory_order_release);
    atomic_fetch_add_explicit(&t->n_done, 1, memory_order_acq_rel);
    return true;
}

// Thread 0: publishes every READY expert not yet published (its pin, taken
// when it became ready, is kept until it is computed).
static void team_publish(petrel_context *c, int il, int nu, team *t)
{
    pt_stream *st = c->stream;
    int q = atomic_load_explicit(&t->tail, memory_order_relaxed);
    for (int j = 0; j < nu; j++)
        if (st->ustate[j] == U_READY) {
            pt_ecache_pin(c->ecache, il, st->uniq[j], t->w[q]);
            pt_ecache_release(c->ecache, il, st->uniq[j]); // (the pointers only; one pin stays)
            t->idx[q++] = j;
            st->ustate[j] = U_DONE; // (published: computed by the team)
        }
    atomic_store_explicit(&t->tail, q, memory_order_release);
}

// Thread 0: releases the experts computed since the last call (so that
// deferred requests may find room). *released counts queue entries seen.
static void team_release(petrel_context *c, int il, team *t, bool *released)
{
    const int tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    for (int q = 0; q < tail; q++)
        if (!released[q] && atomic_load_explicit(&t->done[q], memory_order_acquire)) {
            pt_ecache_release(c->ecache, il, c->stream->uniq[t->idx[q]]);
            released[q] = true;
        }
}

// Thread 0's loop: keeps the queue fed until every expert is published,
// computing experts itself whenever there is one waiting. 0 or -1 + c->err.
static int team_feed(petrel_context *c, int il, int B, int nu, team *t, bool *released)
{
    pt_stream *st = c->stream;
    pt_ecache *ec = c->ecache;
    for (;;) {
        if (reap_finished(c, il) < 0)
            return -1;
        team_publish(c, il, nu, t);
        team_release(c, il, t, released);
        if (retry_deferred(c, il, nu) < 0)
            return -1;
        team_publish(c, il, nu, t);
        if (atomic_load_explicit(&t->tail, memory_order_relaxed) == nu)
            return 0;
        if (team_work(c, il, B, t))
            continue; // (then poll again)
        int loading = 0;
        for (int j = 0; j < nu; j++)
            loading += st->ustate[j] == U_LOADING;
        const bool idle = atomic_load_explicit(&t->n_done, memory_order_acquire) == atomic_load(&t->tail);
        if (loading > 0 || idle) {
            // Nothing to compute here: sleep on the next finished read (ours,
            // or a prefetch whose slot a deferred expert may then take).
            int wl = -1, we = -1;
            pt_err err = {{0}};
            const double t0 = pt_now();
            const int rc = pt_ecache_wait(ec, &wl, &we, &err);
            pt_ecache_lstats(ec, il)->t_wait_s += pt_now() - t0;
            if (rc != 0) {
                if (on_read_done(c, il, rc, wl, we, &err) < 0)
                    return -1;
                continue;
            }
            // Nothing in flight and nothing being computed: the deferred
            // experts must find room now, or there is none at all.
            team_release(c, il, t, released);
            int before = 0, after = 0;
            for (int j = 0; j < nu; j++)
                before += st->ustate[j] == U_DEFERRED;
            if (retry_deferred(c, il, nu) < 0)
                return -1;
            for (int j = 0; j < nu; j++)
                after += st->ustate[j] == U_DEFERRED;
            if (after == before)
                return pt_errf(&c->err, "expert cache: layer %d: no slot can be freed for its experts", il);
        } else {
            pt_cpu_relax(); // (the slots come free as the others finish)
        }
    }
}

// The experts of a small batch computed by one team of threads (above).
static int stream_experts_team(petrel_context *c, int il, int B, int nu)
{
    pt_stream *st = c->stream;
    team t = {0};
    bool released[PT_PAR_EXPERT_MAX] = {0};
    assert(nu <= PT_PAR_EXPERT_MAX);
    int rc = 0;
    const double t0 = pt_now();
#pragma omp parallel
    {
        if (omp_get_thread_num() == 0) {
            rc = team_feed(c, il, B, nu, &t, released);
            if (rc < 0)
                atomic_store(&t.stop, 1);
        }
        // Everyone (thread 0 once all is published) drains the queue.
        for (int spins = 0;; spins++) {
            if (team_work(c, il, B, &t))
                continue;
            if (atomic_load(&t.stop) ||
                atomic_load_explicit(&t.n_done, memory_order_acquire) == nu)
                break;
            if (atomic_load_explicit(&t.tail, memory_order_acquire) == nu &&
                atomic_load_explicit(&t.head, memory_order_acquire) == nu && omp_get_thread_num() != 0)
                break; // all claimed: the rest is others' work
            if (spins % 1024 == 1023)
                sched_yield(); // (a loaded machine: let the thread we wait for run)
            else
                pt_cpu_relax();
        }
    }
    // Every claimed expert is computed (the region's end is a barrier):
    // release what is still pinned.
    team_release(c, il, &t, released);
    for (int q = atomic_load(&t.head); q < atomic_load(&t.tail); q++) // (published, never claimed: error path)
        pt_ecache_release(c->ecache, il, st->uniq[t.idx[q]]);
    c->prof.routed += pt_now() - t0;
    return rc;
}

// Releases the pins of experts that were never computed (error paths).
static void unpin_pending(petrel_context *c, int il, int nu)
{
    pt_stream *st = c->stream;
    for (int i = 0; i < nu; i++)
        if (st->ustate[i] == U_READY)
            pt_ecache_release(c->ecache, il, st->uniq[i]);
}

// Statistics of one MoE block over B rows with nu distinct experts: a
// multi-context step counts the fetches its rows share (in the expert
// cache owner's counters), a prefill chunk its tokens per expert visit.
static void count_visits(petrel_context *c, int il, int B, int nu)
{
    const uint64_t uses = (uint64_t)B * c->model->hp.n_expert_used;
    if (c->rowctx) {
        pt_multi_stats *ms = &pt_expert_root(c)->mst;
        ms->expert_uses += uses;
        ms->expert_visits += (uint64_t)nu;
        ms->bytes_shared += (uses - (uint64_t)nu) * pt_ecache_slot_bytes_for(&c->model->exp_src[il]);
    } else if (B > 1) {
        c->st.prefill_expert_visits += (uint64_t)nu;
        c->st.prefill_expert_rows += uses;
    }
}

// Routed experts + shared experts: s->xn -> s->tmp.
int pt_moe(petrel_context *c, int il, int B)
{
    const petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    const pt_layer *L = &m->layers[il];
    pt_scratch *s = &c->s;
    pt_stream *st = c->stream;
    const int n_used = (int)hp->n_expert_used, n_embd = (int)hp->n_embd;
    const pt_router_cfg rc = {
        .n_expert = (int)hp->n_expert, .n_used = n_used, .n_group = (int)hp->n_group,
        .topk_group = (int)hp->topk_group, .gating = (int)hp->gating, .norm = hp->norm_topk,
        .scale = hp->routed_scale,
    };

    double tp = pt_now();
    pt_gemm(&L->gate_inp, s->xn, B, s->rlogits);
    for (int b = 0; b < B; b++)
        pt_route(&rc, s->rlogits + (size_t)b * hp->n_expert, L->exp_bias, s->rids + (size_t)b * n_used,
                 s->rw + (size_t)b * n_used, s->rscratch);
    for (int b = 0; b < B; b++) { // each row's own observer (rows of several contexts: engine/batch.c)
        const petrel_context *rc = pt_row_ctx(c, b);
        if (rc->route_fn)
            rc->route_fn(rc->route_user, il, s->pos[b], s->rids + (size_t)b * n_used, s->rw + (size_t)b * n_used,
                         n_used);
    }
    pt_stream_trace(c, 'A', il, B, s->rids, n_used);

    // Distinct experts of the batch, ascending; heat for the usage file.
    int nu = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < n_used; k++) {
            const int e = s->rids[(size_t)b * n_used + k];
            if (st->upos[e] < 0) {
                st->upos[e] = 1;
                nu++;
            }
        }
    nu = 0;
    for (int e = 0; e < (int)hp->n_expert; e++)
        if (st->upos[e] >= 0) {
            st->upos[e] = (int16_t)nu;
            st->uniq[nu] = e;
            st->ucount[nu] = 0;
            st->ustate[nu] = U_DEFERRED;
            st->utries[nu] = 0;
            st->heat[(size_t)il * st->n_expert_max + e]++;
            nu++;
        }
    for (int i = 0; i < B * n_used; i++)
        st->ucount[st->upos[s->rids[i]]]++;
    pt_stream_note_actual(c, il, st->uniq, nu);
    count_visits(c, il, B, nu);
    c->prof.router += pt_now() - tp;

    // Pin what is resident or already loading first (so that no miss of
    // this batch can evict it), then start the reads of the rest, then the
    // next block's predictions.
    int rcode = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nu && rcode == 0; i++) {
            const bool present = pt_ecache_is_ready(c->ecache, il, st->uniq[i]) ||
                                 pt_ecache_is_loading(c->ecache, il, st->uniq[i]);
            if (present == (pass == 0))
                rcode = request_expert(c, il, i, PT_EC_DEMAND);
        }
    if (rcode == 0)
        pt_stream_prefetch_next(c, il, B);
    if (rcode == 0 && B > 1) {
        // a prefill chunk (engine/stream.h): the next block's reads queue
        // behind this block's, unless this block still waits for room (it
        // comes first)
        bool deferred = false;
        for (int i = 0; i < nu; i++)
            deferred |= st->ustate[i] == U_DEFERRED;
        if (!deferred)
            pt_stream_read_ahead(c, il, B);
    }

    // Shared experts compute while the reads are in flight.
    tp = pt_now();
    if (rcode == 0 && hp->n_expert_shared > 0)
        pt_ffn(c, &L->sh_gate, &L->sh_up, &L->sh_down, s->xn, B, st->sh_out);
    c->prof.shared += pt_now() - tp;
    if (rcode == 0) {
        const bool team = B <= PT_PAR_EXPERT_B && st->pscratch && c->n_threads > 1 && nu <= PT_PAR_EXPERT_MAX &&
                          !pt_moe_team_off();
        rcode = team ? stream_experts_team(c, il, B, nu) : stream_experts(c, il, B, nu);
    }
    if (rcode < 0)
        unpin_pending(c, il, nu);
    for (int i = 0; i < nu; i++)
        st->upos[st->uniq[i]] = -1;
    if (rcode < 0)
        return -1;

    // As llama.cpp's build_moe_ffn: each expert's output times its weight
    // (rounded), summed in selection order, then the shared experts added.
    // The order is recomputed from the router (s->rscratch held only the
    // last token's scores).
    assert(n_used <= 64);
    tp = pt_now();
    for (int b = 0; b < B; b++) {
        float *y = s->tmp + (size_t)b * n_embd;
        int32_t ids[64];
        float w[64];
        int slot[64];
        pt_route(&rc, s->rlogits + (size_t)b * hp->n_expert, L->exp_bias, ids, w, s->rscratch);
        pt_route_order(s->rscratch + hp->n_expert, s->rids + (size_t)b * n_used, n_used, slot);
        const float *rw = s->rw + (size_t)b * n_used;
        const float *eo = s->eo + (size_t)b * n_used * n_embd;
        for (int k = 0; k < n_used; k++) {
            const int j = slot[k];
            const float *e = eo + (size_t)j * n_embd;
            if (k == 0)
                for (int i = 0; i < n_embd; i++)
                    y[i] = e[i] * rw[j];
            else
                for (int i = 0; i < n_embd; i++)
                    y[i] = y[i] + e[i] * rw[j];
        }
        if (hp->n_expert_shared > 0) {
            const float *z = st->sh_out + (size_t)b * n_embd;
            for (int i = 0; i < n_embd; i++)
                y[i] += z[i];
        }
    }
    c->prof.combine += pt_now() - tp;
    return 0;
}

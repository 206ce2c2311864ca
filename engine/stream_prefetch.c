// engine/stream_prefetch.c — the lookahead predictor. After block il's
// attention the residual stream is already close to what block il+1 will
// route on, so block il+1's gate applied to it (normed with il+1's
// ffn_norm) predicts il+1's experts; reads start for the predicted experts
// that are not resident while block il's experts compute. Recall
// (predicted ∩ actual / actual) is recorded per block.
#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/stream.h"
#include "kernels/ops.h"
#include "router/router.h"

// Largest batch for which predictions are issued: a big batch's union
// covers most experts anyway and would only churn the cache.
enum { PREFETCH_MAX_BATCH = 4 };

// A decode step of several conversations (petrel_decode_multi: c->rowctx
// set) of up to PREFETCH_MAX_MULTI rows is predicted too: the union of its
// rows' best predictions (each row's prefetch_top, as for one token), so
// that the disk reads the next block's experts while this block's experts
// compute, but only where a block's fair share of slots holds the step's
// uses and the predictions together (B * (n_used + prefetch_top)). Below that
// the predictions are evicted before use: bench16 under a 3 GiB cap (24
// slots a block, 8 rows using ~50 experts of a block) read 44% more bytes
// per step with them and decoded no faster. PETREL_PREFETCH_MULTI=N sets
// the row limit (4: as other batches), N:any drops the room check (A/B).
enum { PREFETCH_MAX_MULTI = 8 };

static int multi_limit = -1;   // rows
static bool multi_any = false; // without the room check

static bool predict_step(const petrel_context *c, int il, int B)
{
    if (B <= PREFETCH_MAX_BATCH)
        return true;
    if (multi_limit < 0) {
        const char *e = getenv("PETREL_PREFETCH_MULTI");
        multi_limit = e && e[0] ? atoi(e) : PREFETCH_MAX_MULTI;
        multi_any = e && strstr(e, ":any");
        if (multi_limit < PREFETCH_MAX_BATCH)
            multi_limit = PREFETCH_MAX_BATCH;
    }
    if (!c->rowctx || B > multi_limit)
        return false;
    const int need = B * ((int)c->model->hp.n_expert_used + c->stream->prefetch_top);
    return multi_any || pt_ecache_slots(c->ecache, il) >= need;
}

// Trace line 'Q' (bench/bench_trace.c): the n_used + 4 (at most 16) best
// experts of token b's prediction for block nx, best first, with their
// selection scores (biased; groups that the group limit drops score -inf),
// so that a replay can judge cuts on the router's confidence. Written
// before the block's 'P' line; a reader that knows only 'A' and 'P' skips it.
static void trace_scores(petrel_context *c, int nx, int b, const float *sel, int ne, int n_used)
{
    FILE *f = c->stream->trace;
    uint8_t taken[1024] = {0};
    assert(ne <= 1024);
    const int nq = n_used + 4 < 16 ? n_used + 4 : 16;
    fprintf(f, "Q %d %d", nx, c->s.pos[b]);
    for (int k = 0; k < nq && k < ne; k++) {
        int best = -1;
        for (int x = 0; x < ne; x++)
            if (!taken[x] && (best < 0 || sel[x] > sel[best]))
                best = x;
        taken[best] = 1;
        fprintf(f, " %d %.9g", best, (double)sel[best]);
    }
    fputc('\n', f);
}

// Block nx's router logits for the B rows of the residual stream s->x
// (normed with nx's ffn_norm) -> st->plogits; returns nx's router settings.
static pt_router_cfg gate_logits(petrel_context *c, int nx, int B)
{
    pt_stream *st = c->stream;
    const pt_hparams *hp = &c->model->hp;
    const pt_layer *L = &c->model->layers[nx];
    const int n_embd = (int)hp->n_embd;
    for (int b = 0; b < B; b++)
        pt_rmsnorm(st->pxn + (size_t)b * n_embd, c->s.x + (size_t)b * n_embd, L->ffn_norm, n_embd, hp->rms_eps);
    pt_gemm(&L->gate_inp, st->pxn, B, st->plogits);
    return (pt_router_cfg){
        .n_expert = (int)hp->n_expert, .n_used = (int)hp->n_expert_used, .n_group = (int)hp->n_group,
        .topk_group = (int)hp->topk_group, .gating = (int)hp->gating, .norm = hp->norm_topk,
        .scale = hp->routed_scale,
    };
}

// Predicts block nx's experts from the residual stream s->x (normed with
// nx's ffn_norm) into st->pids (the union in pred), and offers the cache
// (pt_ecache_prefetch) each token's `top` best-scored predictions with the
// router's margin, the most confident first (an expert predicted for
// several tokens of the batch with its highest margin); the cache reads
// those whose estimated chance of use clears its bar (the confidence cut:
// a prediction near the router's decision boundary is used less than half
// the time on the trained model, one far above it four times in five), at
// most the block's share of slots, so that predictions do not evict each
// other. Reading a misprediction costs disk time (the bottleneck when
// streaming) and evicts an expert that may be used.
static void predict_block(petrel_context *c, int nx, int B, uint8_t *pred, int top)
{
    pt_stream *st = c->stream;
    const pt_hparams *hp = &c->model->hp;
    const pt_layer *L = &c->model->layers[nx];
    const int n_used = (int)hp->n_expert_used, ne = (int)hp->n_expert;
    assert(ne <= 1024 && n_used <= 64 && top <= n_used);
    const pt_router_cfg rc = gate_logits(c, nx, B);
    memset(pred, 0, (size_t)st->n_expert_max);
    memset(st->pwant, 0, (size_t)st->n_expert_max);
    const float *sel = c->s.rscratch + ne; // pt_route leaves the selection scores there
    float cm[1024];                        // (ne) highest margin of each candidate (pwant set)
    int cand[1024], n_cand = 0;            // (ne) candidates, distinct
    for (int b = 0; b < B; b++) {
        int32_t *ids = st->pids + (size_t)b * n_used;
        pt_route(&rc, st->plogits + (size_t)b * ne, L->exp_bias, ids, st->pw + (size_t)b * n_used, c->s.rscratch);
        if (st->trace)
            trace_scores(c, nx, b, sel, ne, n_used);
        // The token's predictions best first (the trace lists them so too)
        // and, after them, the best score left: the decision boundary.
        int slot[64];
        int32_t best[64];
        float sorted[65];
        pt_route_order(sel, ids, n_used, slot);
        for (int k = 0; k < n_used; k++) {
            best[k] = ids[slot[k]];
            sorted[k] = sel[best[k]];
            pred[best[k]] = 1;
        }
        sorted[n_used] = -INFINITY;
        for (int x = 0; x < ne; x++) {
            bool chosen = false;
            for (int k = 0; k < n_used; k++)
                chosen |= best[k] == x;
            if (!chosen && sel[x] > sorted[n_used])
                sorted[n_used] = sel[x];
        }
        for (int k = 0; k < top; k++) {
            const int x = best[k];
            const float m = pt_ecache_margin(sorted, n_used, k);
            if (!st->pwant[x]) {
                st->pwant[x] = 1;
                cm[x] = m;
                cand[n_cand++] = x;
            } else if (m > cm[x]) {
                cm[x] = m;
            }
        }
        if (st->trace)
            memcpy(ids, best, sizeof(int32_t) * (size_t)n_used);
    }
    pt_stream_trace(c, 'P', nx, B, st->pids, n_used);
    // Most confident first (lower id on a tie): the share may run out.
    for (int i = 1; i < n_cand; i++)
        for (int j = i; j > 0 && (cm[cand[j]] > cm[cand[j - 1]] || (cm[cand[j]] == cm[cand[j - 1]] && cand[j] < cand[j - 1])); j--) {
            const int t = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = t;
        }
    int budget = pt_ecache_slots(c->ecache, nx);
    pt_err e;
    for (int i = 0; i < n_cand && budget > 0; i++) {
        const int x = cand[i];
        const bool had = pt_ecache_is_ready(c->ecache, nx, x) || pt_ecache_is_loading(c->ecache, nx, x);
        int r = pt_ecache_prefetch(c->ecache, nx, x, cm[x], &e);
        if (r == PT_EC_NOROOM || r < 0)
            break;
        budget -= !had && r == PT_EC_LOADING;
    }
}

// The disk-bound bar. A prediction that is read and then not used costs
// its bytes; one that is used costs nothing its demand read would not
// have. While the disk keeps up the unused ones cost it only idle time, and
// the cache's own bar (PT_EC_PF_MIN: a chance of use of 1/4) decides; while
// the engine waits on reads for much of its time the disk is the
// bottleneck, every unused byte delays a step by its read time, and only
// the confident predictions are worth reading. So the bar rises with the
// share of the last window's decode time the engine waited on reads: the
// cache's own up to PF_BOUND_LO, PF_BOUND_MIN from PF_BOUND_HI on, linear
// between. bench16 Q2_K under a 3 GiB cap (random routing: the 1/4 bar
// read 17% of its bytes for predictions never used), 32 cold tokens, the
// engine waiting 60-76% of the time: at a disk throttled to 1.2 GB/s, bars
// 0.25 / 0.40 / 0.55 / 0.70 / 0.85 / 0.95 gave 4.86 / 4.90 / 5.10 / 5.65 /
// 5.99 / 6.07 tok/s (no prefetch 6.07; 0.85 kept the best hit rate, 0.5605
// against 0.5459 at 0.25); at the disk's own rate, which jumped between
// ~1.45 and ~2.45 GB/s whatever the queue depth, 0.70 and no prefetch
// matched or beat 0.25 in the same disk state (9.11-9.51 vs 8.81 tok/s at
// ~2.4 GB/s, 6.05-6.21 vs 5.38-5.44 at ~1.46). Placement only: no token
// depends on it (tests/test_stream.c holds the bar high, PETREL_PF_BOUND=max).
#define PF_BOUND_WINDOW 0.2 // seconds of decode per wait-share sample
#define PF_BOUND_LO 0.25    // wait share up to which the cache's own bar stands
#define PF_BOUND_HI 0.50    // ... from which PF_BOUND_MIN does
#define PF_BOUND_MIN 0.85f

// Called at every prediction; measures and moves the bar only when a
// window has passed (one clock read otherwise).
static void bound_bar(petrel_context *c)
{
    pt_stream *st = c->stream;
    const double now = pt_now();
    if (st->bw_t0 != 0 && now - st->bw_t0 < PF_BOUND_WINDOW)
        return;
    const petrel_model *m = c->model;
    double wait = 0;
    for (int il = 0; il < (int)pt_hp_n_blocks(&m->hp); il++)
        if (m->exp_src[il].n_expert > 0)
            wait += pt_ecache_lstats(c->ecache, il)->t_wait_s;
    if (st->pf_min_base < 0) // the cache's own bar, before this first moves it
        st->pf_min_base = pt_ecache_prefetch_min(c->ecache);
    if (st->bw_t0 != 0 && wait >= st->bw_wait0) // (a window's start; the statistics were reset)
        st->wait_share = (wait - st->bw_wait0) / (now - st->bw_t0);
    st->bw_t0 = now;
    st->bw_wait0 = wait;
    const double w = st->wait_share, base = st->pf_min_base;
    double bar = w <= PF_BOUND_LO ? base : w >= PF_BOUND_HI ? PF_BOUND_MIN
               : base + (PF_BOUND_MIN - base) * (w - PF_BOUND_LO) / (PF_BOUND_HI - PF_BOUND_LO);
    if (bar < base) // a cache bar set above the disk-bound one stays
        bar = base;
    if (st->bound_bar == 2) // PETREL_PF_BOUND=max (tests): held high
        bar = PF_BOUND_MIN;
    pt_ecache_set_prefetch_min(c->ecache, (float)bar);
}

void pt_stream_prefetch_next(petrel_context *c, int il, int B)
{
    pt_stream *st = c->stream;
    const petrel_model *m = c->model;
    if (!st->prefetch || !predict_step(c, il, B))
        return;
    if (st->bound_bar)
        bound_bar(c);
    // Each token's prefetch_top best predictions are offered to the cache;
    // the rest of the router's top-k too when the disk has kept up (no read
    // in flight but those of block il's own experts): the confidence cut
    // then decides on them. A disk with a backlog is the bottleneck, and
    // the lower-ranked predictions cost it time (bench16 streaming under
    // 3 GiB, before the cut: all 8 read 0.56 GB/token against 0.48 for the
    // best 5, 13% slower); a disk that keeps up loses nothing by them, and
    // they are hits (the trained model's 4th prediction is used 44% of the
    // time: +4-7 points of hit rate, bench/trace-replay.sh --trained).
    // (Steps of several conversations keep prefetch_top: their room check
    // counts on it.)
    int top = st->prefetch_top;
    if (top < (int)m->hp.n_expert_used && B <= PREFETCH_MAX_BATCH) {
        int own = 0;
        for (int x = 0; x < m->exp_src[il].n_expert; x++)
            own += pt_ecache_is_loading(c->ecache, il, x);
        if (pt_reader_inflight(st->reader) <= 3 * own)
            top = (int)m->hp.n_expert_used;
    }
    // Nearest block first: its reads are queued first and are the most
    // likely to be right. Only the nearest prediction counts for recall.
    for (int d = 1; d <= st->prefetch_depth; d++) {
        const int nx = il + d;
        if (nx >= (int)m->hp.n_layer)
            break;
        if (!m->layers[nx].moe)
            continue;
        uint8_t *pred = st->pred + (size_t)nx * st->n_expert_max;
        if (d == 1) {
            predict_block(c, nx, B, pred, top);
            st->has_pred[nx] = true;
        } else {
            predict_block(c, nx, B, st->pfar, top);
        }
    }
    // Fill (opt-in, PETREL_PREFETCH_FILL): when the disk is about to run
    // dry — fewer than fill_below experts' reads in flight once this block's
    // demands and the predictions above are queued — the next MoE block
    // beyond the prediction depth gets its fill_top best predictions read
    // too, so that the disk works while the CPU does. A deep queue (the
    // disk is the bottleneck) never triggers it, so it costs no bandwidth
    // then; what it costs is the cache slots of its mispredictions.
    if (st->fill_below > 0 && pt_reader_inflight(st->reader) < 3 * st->fill_below) {
        int nx = il + st->prefetch_depth + 1;
        while (nx < (int)m->hp.n_layer && !m->layers[nx].moe)
            nx++;
        if (nx < (int)m->hp.n_layer) {
            predict_block(c, nx, B, st->pfar, st->fill_top);
            st->fill_issued++;
        }
    }
}

// PETREL_PP_AHEAD=off: no prefill read-ahead (A/B).
static bool read_ahead_off(void)
{
    static int off = -1;
    return pt_env_off("PETREL_PP_AHEAD", &off);
}

// Why: a cold prefill under a cap reads every layer's experts, and until
// 2026-12-07 a layer's reads started only once its router had chosen, so
// the disk idled through each layer's attention and shared experts (bench16
// at 3 GiB: 1.2 s of read waits in a 9.1 s, 512-token prefill).
void pt_stream_read_ahead(petrel_context *c, int il, int B)
{
    pt_stream *st = c->stream;
    const petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    if (!st->prefetch || B <= PREFETCH_MAX_BATCH || c->rowctx || read_ahead_off())
        return;
    const int nx = il + 1;
    if (nx >= (int)hp->n_layer || !m->layers[nx].moe)
        return;
    const pt_layer *L = &m->layers[nx];
    const int n_used = (int)hp->n_expert_used, ne = (int)hp->n_expert;
    assert(ne <= 1024 && n_used <= 64);
    // Only chunks whose rows choose each expert twice on average: they use
    // most of a block's experts (all but ~e^-2 on random routing), so the
    // prediction, read without a confidence cut, is mostly right; a smaller
    // batch's mispredictions would cost the disk their bytes.
    if ((int64_t)B * n_used < 2 * (int64_t)ne)
        return;
    const pt_router_cfg rc = gate_logits(c, nx, B);
    int cnt[1024] = {0}, order[1024], n = 0;
    for (int b = 0; b < B; b++) {
        int32_t *ids = st->pids + (size_t)b * n_used;
        pt_route(&rc, st->plogits + (size_t)b * ne, L->exp_bias, ids, st->pw + (size_t)b * n_used, c->s.rscratch);
        for (int k = 0; k < n_used; k++)
            if (cnt[ids[k]]++ == 0)
                order[n++] = ids[k];
    }
    // most chosen first (lower id on a tie): the slots may run out
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && (cnt[order[j]] > cnt[order[j - 1]] ||
                                  (cnt[order[j]] == cnt[order[j - 1]] && order[j] < order[j - 1])); j--) {
            const int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    pt_err e = {{0}};
    for (int i = 0; i < n; i++) {
        if (pt_ecache_is_ready(c->ecache, nx, order[i]) || pt_ecache_is_loading(c->ecache, nx, order[i]))
            continue;
        const int r = pt_ecache_request(c->ecache, nx, order[i], PT_EC_AHEAD, &e);
        if (r == PT_EC_NOROOM || r < 0)
            break; // (a read that cannot be queued now is the demand's to retry)
        c->st.prefill_ahead_reads++;
    }
}

void pt_stream_note_actual(petrel_context *c, int il, const int32_t *uniq, int nu)
{
    pt_stream *st = c->stream;
    if (!st->has_pred[il])
        return;
    st->has_pred[il] = false;
    const uint8_t *pred = st->pred + (size_t)il * st->n_expert_max;
    pt_ecache_layer_stats *ls = pt_ecache_lstats(c->ecache, il);
    uint64_t np = 0, ok = 0;
    for (int x = 0; x < st->n_expert_max; x++)
        np += pred[x];
    for (int i = 0; i < nu; i++)
        ok += pred[uniq[i]];
    ls->predicted += np;
    ls->predicted_correct += ok;
    ls->actual += (uint64_t)nu;
}

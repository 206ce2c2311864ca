// engine/stream_prefetch.c — the lookahead predictor. After block il's
// attention the residual stream is already close to what block il+1 will
// route on, so block il+1's gate applied to it (normed with il+1's
// ffn_norm) predicts il+1's experts; reads start for the predicted experts
// that are not resident while block il's experts compute. Recall
// (predicted ∩ actual / actual) is recorded per block.
#include <stdlib.h>
#include <string.h>

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

// Predicts block nx's experts from the residual stream s->x (normed with
// nx's ffn_norm) into st->pids (the union in pred), and starts reads for
// the absent ones among each token's prefetch_top best-scored predictions
// (at most the block's share of slots, so that predictions do not evict
// each other). The lower-ranked predictions are the likely misses: reading
// them costs disk time (the bottleneck when streaming) and evicts experts
// that are used, for little gain (bench16 at 3 GiB: top 5 of 8 read 15%
// fewer bytes per token than all 8 and decoded 15% faster).
static void predict_block(petrel_context *c, int nx, int B, uint8_t *pred, int top)
{
    pt_stream *st = c->stream;
    const pt_hparams *hp = &c->model->hp;
    const pt_layer *L = &c->model->layers[nx];
    const int n_embd = (int)hp->n_embd, n_used = (int)hp->n_expert_used, ne = (int)hp->n_expert;
    const pt_router_cfg rc = {
        .n_expert = ne, .n_used = n_used, .n_group = (int)hp->n_group, .topk_group = (int)hp->topk_group,
        .gating = (int)hp->gating, .norm = hp->norm_topk, .scale = hp->routed_scale,
    };
    for (int b = 0; b < B; b++)
        pt_rmsnorm(st->pxn + (size_t)b * n_embd, c->s.x + (size_t)b * n_embd, L->ffn_norm, n_embd, hp->rms_eps);
    pt_gemm(&L->gate_inp, st->pxn, B, st->plogits);
    memset(pred, 0, (size_t)st->n_expert_max);
    memset(st->pwant, 0, (size_t)st->n_expert_max);
    const float *sel = c->s.rscratch + ne; // pt_route leaves the selection scores there
    for (int b = 0; b < B; b++) {
        const int32_t *ids = st->pids + (size_t)b * n_used;
        pt_route(&rc, st->plogits + (size_t)b * ne, L->exp_bias, st->pids + (size_t)b * n_used,
                 st->pw + (size_t)b * n_used, c->s.rscratch);
        for (int k = 0; k < n_used; k++) {
            pred[ids[k]] = 1;
            int above = 0; // predictions of this token ranked above this one
            for (int j = 0; j < n_used; j++)
                above += sel[ids[j]] > sel[ids[k]] || (sel[ids[j]] == sel[ids[k]] && ids[j] < ids[k]);
            if (above < top)
                st->pwant[ids[k]] = 1;
        }
        // The trace lists each token's predictions best first (what
        // prefetch_top reads is then a prefix; bench/bench_trace.c replays it).
        if (st->trace && n_used <= 64) {
            int slot[64];
            int32_t best[64];
            pt_route_order(sel, ids, n_used, slot);
            for (int k = 0; k < n_used; k++)
                best[k] = ids[slot[k]];
            memcpy(st->pids + (size_t)b * n_used, best, sizeof(int32_t) * (size_t)n_used);
        }
    }
    pt_stream_trace(c, 'P', nx, B, st->pids, n_used);
    int budget = pt_ecache_slots(c->ecache, nx);
    pt_err e;
    for (int x = 0; x < ne && budget > 0; x++) {
        if (!st->pwant[x] || pt_ecache_is_ready(c->ecache, nx, x) || pt_ecache_is_loading(c->ecache, nx, x))
            continue;
        int r = pt_ecache_request(c->ecache, nx, x, PT_EC_PREFETCH, &e);
        if (r == PT_EC_NOROOM || r < 0)
            break;
        budget--;
    }
}

void pt_stream_prefetch_next(petrel_context *c, int il, int B)
{
    pt_stream *st = c->stream;
    const petrel_model *m = c->model;
    if (!st->prefetch || !predict_step(c, il, B))
        return;
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
            predict_block(c, nx, B, pred, st->prefetch_top);
            st->has_pred[nx] = true;
        } else {
            predict_block(c, nx, B, st->pfar, st->prefetch_top);
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

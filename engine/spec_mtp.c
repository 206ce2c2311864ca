// engine/spec_mtp.c — the queue of MTP inputs and the drafts run from it
// (contract in engine/spec_mtp.h).
#include "engine/spec_mtp.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kernels/ops.h"

int pt_mtp_queue_init(pt_mtp_queue *q, petrel_context *c)
{
    const pt_hparams *hp = &c->model->hp;
    memset(q, 0, sizeof *q);
    q->cap = (int)c->n_batch;
    q->h = malloc(sizeof(float) * (size_t)q->cap * hp->n_embd);
    q->next = malloc(sizeof(petrel_token) * (size_t)q->cap);
    q->logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    q->pos0 = c->mtp_len;
    if (!q->h || !q->next || !q->logits) {
        pt_mtp_queue_free(q);
        return pt_errf(&c->err, "out of memory (MTP queue of %d rows)", (int)c->n_batch);
    }
    return 0;
}

void pt_mtp_queue_free(pt_mtp_queue *q)
{
    free(q->h);
    free(q->next);
    free(q->logits);
    memset(q, 0, sizeof *q);
}

// The MTP block's input for queue rows [r0, r0 + n) into s->x, their
// positions into s->pos: eh_proj(concat(enorm(embed(next)), hnorm(h))), the
// embedding zero at position 0 (as petrel_decode_mtp).
static void mtp_input(petrel_context *c, const pt_mtp_queue *q, int r0, int n)
{
    const pt_hparams *hp = &c->model->hp;
    const pt_layer *L = &c->model->layers[hp->n_layer];
    pt_scratch *s = &c->s;
    const int n_embd = (int)hp->n_embd;
    pt_embed(L->embed, q->next + r0, n, s->x);
    for (int j = 0; j < n; j++) {
        s->pos[j] = q->pos0 + r0 + j;
        float *e = s->x + (size_t)j * n_embd;
        float *cat = s->cat + (size_t)j * 2 * n_embd;
        if (s->pos[j] == 0)
            memset(e, 0, sizeof(float) * (size_t)n_embd);
        pt_rmsnorm(cat, e, L->enorm, n_embd, hp->rms_eps);
        pt_rmsnorm(cat + n_embd, q->h + (size_t)(r0 + j) * n_embd, L->hnorm, n_embd, hp->rms_eps);
    }
    pt_gemm(&L->eh_proj, s->cat, n, s->x);
}

// Interleaved-pair rotation at pos; must stay the same arithmetic as
// rope_apply in engine/forward.c (tests/test_spec_policy.c compares the
// caches this file writes with the whole block's, bit for bit).
static void rope_at(const petrel_model *m, float *x, int pos)
{
    const int half = (int)m->hp.qk_rope / 2;
    const float *cs = m->rope_cos + (size_t)pos * half;
    const float *sn = m->rope_sin + (size_t)pos * half;
    for (int i = 0; i < half; i++) {
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = fmaf(x0, cs[i], -(x1 * sn[i]));
        x[2 * i + 1] = fmaf(x0, sn[i], x1 * cs[i]);
    }
}

// KV entries only, for the n rows in s->x at s->pos: what the attention of
// engine/forward.c writes into the cache before it attends.
static void kv_only(petrel_context *c, int n)
{
    const petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    const int il = (int)hp->n_layer;
    const pt_layer *L = &m->layers[il];
    pt_scratch *s = &c->s;
    const int n_embd = (int)hp->n_embd, kvl = (int)hp->kv_lora_rank, rope = (int)hp->qk_rope;
    const int kvd = (int)c->kv_dim;
    for (int b = 0; b < n; b++)
        pt_rmsnorm(s->xn + (size_t)b * n_embd, s->x + (size_t)b * n_embd, L->attn_norm, n_embd, hp->rms_eps);
    pt_gemm(&L->kv_a, s->xn, n, s->kva);
    for (int b = 0; b < n; b++) {
        const float *kv = s->kva + (size_t)b * kvd;
        float *slot = c->kv[il] + (size_t)s->pos[b] * kvd;
        pt_rmsnorm(slot, kv, L->kv_a_norm, kvl, hp->rms_eps);
        memcpy(slot + kvl, kv + kvl, sizeof(float) * (size_t)rope);
        rope_at(m, slot + kvl, s->pos[b]);
    }
}

// Runs queue rows [r0, r0 + n) through the MTP block: KV entries only, or
// the whole block (needed for a draft, and for a block with an indexer).
static int run_rows(petrel_context *c, pt_mtp_queue *q, int r0, int n, bool whole)
{
    const int il = (int)c->model->hp.n_layer;
    assert(n > 0 && n <= q->cap && q->pos0 + r0 == c->mtp_len);
    omp_set_num_threads(c->n_threads);
    mtp_input(c, q, r0, n);
    if (whole || c->model->layers[il].has_idx) {
        if (pt_forward_block(c, il, n) < 0)
            return -1;
    } else {
        kv_only(c, n);
    }
    c->mtp_len = q->pos0 + r0 + n;
    return 0;
}

int pt_mtp_fill(petrel_context *c, pt_mtp_queue *q)
{
    if (q->n > 0 && run_rows(c, q, 0, q->n, false) < 0)
        return -1;
    q->pos0 += q->n;
    q->n = 0;
    return 0;
}

int pt_mtp_push(petrel_context *c, pt_mtp_queue *q, int bi, petrel_token next)
{
    assert(bi >= 0 && bi < c->last_n);
    const int n_embd = (int)c->model->hp.n_embd;
    const int32_t pos = c->last_pos[bi];
    if (q->n > 0 && pos < q->pos0 + q->n)
        q->n = pos > q->pos0 ? pos - q->pos0 : 0; // rolled back: rows from pos on are stale
    if (q->n == 0) {
        if (pos < c->mtp_len)
            c->mtp_len = pos; // overwritten from here on
        if (pos != c->mtp_len)
            return pt_errf(&c->err, "MTP position %d leaves a gap: its KV cache holds %d positions", pos,
                           c->mtp_len);
        q->pos0 = pos;
    } else if (pos != q->pos0 + q->n) {
        return pt_errf(&c->err, "MTP queue: position %d does not follow %d", pos, q->pos0 + q->n - 1);
    }
    if (q->n == q->cap) {
        if (pt_mtp_fill(c, q) < 0)
            return -1;
        q->pos0 = pos;
    }
    memcpy(q->h + (size_t)q->n * n_embd, c->hidden + (size_t)bi * n_embd, sizeof(float) * (size_t)n_embd);
    q->next[q->n++] = next;
    return 0;
}

int pt_mtp_draft(petrel_context *c, pt_mtp_queue *q, petrel_token *draft, double *t_full)
{
    assert(q->n > 0);
    const pt_hparams *hp = &c->model->hp;
    const pt_layer *L = &c->model->layers[hp->n_layer];
    const int n_embd = (int)hp->n_embd, nv = (int)hp->n_vocab;
    if (q->n > 1 && run_rows(c, q, 0, q->n - 1, false) < 0)
        return -1;
    double t0 = pt_now();
    if (run_rows(c, q, q->n - 1, 1, true) < 0)
        return -1;
    pt_scratch *s = &c->s;
    pt_rmsnorm(s->xn, s->x, L->head_norm, n_embd, hp->rms_eps);
    pt_gemm(L->head, s->xn, 1, q->logits);
    int b = 0;
    for (int i = 1; i < nv; i++)
        if (q->logits[i] > q->logits[b])
            b = i;
    *draft = b;
    *t_full = pt_now() - t0;
    q->pos0 += q->n;
    q->n = 0;
    return 0;
}

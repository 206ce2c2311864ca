// engine/batch.c — one decode step for several conversations at once
// (petrel_decode_multi): the rows of the step are the next tokens of n
// contexts. The trunk's matrix products and the MoE run once over all rows
// on the first context's scratch (so each distinct routed expert of the step
// is fetched and computed once for every row that chose it); attention reads
// and writes each row's own context's KV cache (c->rowctx, engine/context.h).
// Every kernel computes a row independently of the others (kernels/matmul.h)
// and the MoE combines each row in its router's order, so each context gets
// exactly the bits petrel_decode would give it alone.
#include <assert.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/stream.h"

// Checks a step's arguments; the message names the offending row. 0 or -1 + err.
static int check_step(petrel_context **ctxs, const petrel_token *tokens, int n, pt_err *err)
{
    if (n <= 0 || !ctxs || !tokens)
        return pt_errf(err, "petrel_decode_multi: empty batch");
    petrel_context *lead = ctxs[0];
    if (!lead)
        return pt_errf(err, "petrel_decode_multi: context 0 is NULL");
    const pt_hparams *hp = &lead->model->hp;
    if ((uint32_t)n > lead->n_batch)
        return pt_errf(err, "petrel_decode_multi: %d contexts exceed n_batch %u of context 0", n, lead->n_batch);
    for (int i = 0; i < n; i++) {
        const petrel_context *c = ctxs[i];
        if (!c)
            return pt_errf(err, "petrel_decode_multi: context %d is NULL", i);
        if (c->model != lead->model)
            return pt_errf(err, "petrel_decode_multi: context %d belongs to another model than context 0", i);
        if (hp->idx_n_head && c->sel_stride != lead->sel_stride)
            return pt_errf(err,
                           "petrel_decode_multi: context %d keeps %u indexer keys per query, context 0 %u "
                           "(give DSA contexts the same n_ctx)",
                           i, c->sel_stride, lead->sel_stride);
        for (int j = 0; j < i; j++)
            if (ctxs[j] == c)
                return pt_errf(err, "petrel_decode_multi: context %d appears twice (also at %d)", i, j);
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab)
            return pt_errf(err, "petrel_decode_multi: token id %d of context %d is out of range [0, %u)", tokens[i],
                           i, hp->n_vocab);
        if ((uint32_t)c->n_past >= c->n_ctx)
            return pt_errf(err, "petrel_decode_multi: context %d is full (%u positions)", i, c->n_ctx);
    }
    // Room for the results first, so that a failure leaves every context as it was.
    if (pt_ensure_rows(&lead->logits, &lead->logits_rows, n, (int)hp->n_vocab) < 0)
        return pt_errf(err, "out of memory (logits of %d contexts)", n);
    for (int i = 1; i < n; i++)
        if (pt_ensure_rows(&ctxs[i]->logits, &ctxs[i]->logits_rows, 1, (int)hp->n_vocab) < 0)
            return pt_errf(err, "out of memory (logits of context %d)", i);
    return 0;
}

// Hands row i's results to its context: hidden state, logits (row 0 of its
// last batch), token history and lengths, as petrel_decode of one token.
static void deliver(petrel_context *lead, petrel_context *c, int i, petrel_token tok, int32_t pos)
{
    const pt_hparams *hp = &lead->model->hp;
    const size_t n_embd = hp->n_embd, n_vocab = hp->n_vocab;
    (void)i;
    if (c != lead) {
        memcpy(c->hidden, lead->hidden + (size_t)i * n_embd, sizeof(float) * n_embd);
        memcpy(c->logits, lead->logits + (size_t)i * n_vocab, sizeof(float) * n_vocab);
    }
    c->logits_first = 0;
    c->logits_n = 1;
    c->tokens[pos] = tok;
    c->last_pos[0] = pos;
    c->last_n = 1;
    c->n_past = pos + 1;
    c->mtp_n = 0;
}

int petrel_decode_multi(petrel_context **ctxs, const petrel_token *tokens, int n, char *errbuf, size_t errlen)
{
    pt_err err = {{0}};
    if (check_step(ctxs, tokens, n, &err) < 0) {
        if (ctxs && n > 0 && ctxs[0])
            ctxs[0]->err = err;
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "%s", err.msg);
        return -1;
    }
    petrel_context *lead = ctxs[0];
    petrel_model *m = lead->model;
    const pt_hparams *hp = &m->hp;
    pt_scratch *s = &lead->s;
    lead->err.msg[0] = 0;
    omp_set_num_threads(lead->n_threads);
    const double t0 = pt_now();

    // Rows: context i's token at its next position. Writing there drops any
    // MTP entries past it, as petrel_decode does.
    for (int i = 0; i < n; i++) {
        lead->rowbuf[i] = ctxs[i];
        s->pos[i] = ctxs[i]->n_past;
        if (ctxs[i]->mtp_len > s->pos[i])
            ctxs[i]->mtp_len = s->pos[i];
    }
    lead->rowctx = lead->rowbuf;
    pt_embed(&m->tok_embd, tokens, n, s->x);
    int rc = 0;
    for (uint32_t il = 0; il < hp->n_layer && rc == 0; il++)
        rc = pt_forward_block(lead, (int)il, n);
    if (rc == 0)
        rc = pt_finish(lead, n, 0);
    lead->rowctx = NULL;
    if (rc < 0) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "%s", lead->err.msg);
        return -1;
    }

    for (int i = 0; i < n; i++)
        deliver(lead, ctxs[i], i, tokens[i], s->pos[i]);
    const double dt = pt_now() - t0;
    for (int i = 0; i < n; i++) {
        ctxs[i]->st.n_decode_tokens += 1;
        ctxs[i]->st.t_decode_s += dt;
    }
    pt_multi_stats *ms = &pt_expert_root(lead)->mst;
    ms->steps++;
    ms->rows += (uint64_t)n;
    if ((uint64_t)n > ms->max_rows)
        ms->max_rows = (uint64_t)n;
    ms->t_s += dt;
    return 0;
}

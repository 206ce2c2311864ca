// engine/context.c — contexts and the decode entry points of petrel.h.
#include <assert.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/stream.h"
#include "kernels/ops.h"

petrel_context_params petrel_context_default_params(void)
{
    petrel_context_params p = {0, 0};
    return p;
}

static float *falloc(uint64_t n) { return pt_alloc_aligned(n * sizeof(float) + 64); }

static void scratch_free(pt_scratch *s)
{
    void **f = (void **)s;
    for (size_t i = 0; i < sizeof *s / sizeof(void *); i++)
        pt_free_aligned(f[i]);
    memset(s, 0, sizeof *s);
}

static int scratch_alloc(pt_scratch *s, const pt_hparams *hp, uint64_t B, uint64_t n_ctx, int n_threads,
                         uint64_t sel_stride)
{
    const uint64_t H = hp->n_head, qd = hp->qk_nope + hp->qk_rope, kvl = hp->kv_lora_rank;
    uint64_t ff = hp->n_ff;
    if (hp->n_ff_exp * (hp->n_expert_shared ? hp->n_expert_shared : 1) > ff)
        ff = hp->n_ff_exp * (hp->n_expert_shared ? hp->n_expert_shared : 1);
    if (hp->n_ff_exp > ff)
        ff = hp->n_ff_exp;
    const uint64_t ne = hp->n_expert ? hp->n_expert : 1, nu = hp->n_expert_used ? hp->n_expert_used : 1;
    s->x = falloc(B * hp->n_embd);
    s->xn = falloc(B * hp->n_embd);
    s->tmp = falloc(B * hp->n_embd);
    s->qa = falloc(B * (hp->q_lora_rank ? hp->q_lora_rank : 1));
    s->q = falloc(B * H * qd);
    s->kva = falloc(B * (kvl + hp->qk_rope));
    s->qh = falloc(H * B * hp->qk_nope);
    s->qlat = falloc(H * B * kvl);
    s->olat = falloc(H * B * kvl);
    s->oh = falloc(H * B * hp->v_head);
    s->attn = falloc(B * H * hp->v_head);
    s->scores = falloc((uint64_t)n_threads * PT_ATTN_G * n_ctx);
    const uint64_t kvd = kvl + hp->qk_rope;
    s->qc = falloc((uint64_t)n_threads * PT_ATTN_G * kvd);
    s->kT = falloc((kvd - kvd / 64 * 64) * n_ctx + 1);
    s->vp = falloc((n_ctx + 15) / 16 * 16 * kvl);
    s->ff_a = falloc(B * ff);
    s->ff_b = falloc(B * ff);
    s->rlogits = falloc(B * ne);
    s->rscratch = falloc(2 * ne);
    s->rids = pt_alloc_aligned(B * nu * sizeof(int32_t));
    s->rw = falloc(B * nu);
    s->eo = falloc(B * nu * hp->n_embd);
    s->gx = falloc(B * hp->n_embd);
    s->gsel = pt_alloc_aligned(B * sizeof(int32_t));
    s->gk = pt_alloc_aligned(B * sizeof(int32_t));
    s->cat = falloc(B * 2 * hp->n_embd);
    s->pos = pt_alloc_aligned(B * sizeof(int32_t));
    const uint64_t hi = hp->idx_n_head ? hp->idx_n_head : 1, di = hp->idx_n_head ? hp->idx_head_dim : 1;
    const uint64_t ss = hp->idx_n_head ? sel_stride : 1;
    s->iq = falloc(B * hi * di);
    s->iw = falloc(B * hi);
    s->ikn = falloc(B * di);
    s->iscore = falloc(hp->idx_n_head ? n_ctx : 1);
    s->iheap = pt_alloc_aligned(ss * sizeof(int32_t));
    s->sel = pt_alloc_aligned(B * ss * sizeof(int32_t));
    s->nsel = pt_alloc_aligned(B * sizeof(int32_t));
    void **f = (void **)s;
    for (size_t i = 0; i < sizeof *s / sizeof(void *); i++)
        if (!f[i])
            return -1;
    return 0;
}

// Bytes a prefill chunk holds per token: the batch scratch (activations,
// routed-token lists, expert outputs, gathered rows), the final hidden row,
// the streaming loop's per-row buffers and the logits reserve the budget
// keeps for a row (engine/stream.c: two n_vocab rows).
static uint64_t chunk_row_bytes(const pt_hparams *hp)
{
    const uint64_t H = hp->n_head, qd = hp->qk_nope + hp->qk_rope, kvl = hp->kv_lora_rank, E = hp->n_embd;
    uint64_t ff = hp->n_ff;
    const uint64_t ffs = hp->n_ff_exp * (hp->n_expert_shared ? hp->n_expert_shared : 1);
    ff = ff > ffs ? ff : ffs;
    ff = ff > hp->n_ff_exp ? ff : hp->n_ff_exp;
    const uint64_t ne = hp->n_expert ? hp->n_expert : 1, nu = hp->n_expert_used ? hp->n_expert_used : 1;
    const uint64_t di = hp->idx_n_head ? hp->idx_n_head * hp->idx_head_dim + hp->idx_n_head + hp->idx_head_dim : 0;
    const uint64_t floats = 3 * E + (hp->q_lora_rank ? hp->q_lora_rank : 1) + H * qd + kvl + hp->qk_rope +
                            H * hp->qk_nope + 2 * H * kvl + 2 * H * hp->v_head + 2 * ff + ne + 2 * nu + nu * E + E +
                            2 * E + 3 + di + (hp->idx_n_head ? hp->idx_topk : 0) // scratch
                            + E                                                  // hidden
                            + 2 * E + ne + 2 * nu                                // stream: sh_out, pxn, plogits, pids, pw
                            + 2 * (uint64_t)hp->n_vocab;                         // logits reserve
    return floats * sizeof(float) + 2 * sizeof(void *);
}

// The prefill chunk size (n_batch) when the caller leaves it to Petrel:
// the largest chunk whose buffers (chunk_row_bytes per token) take at most
// a quarter of what the RAM budget leaves after the trunk, the KV cache and
// one expert per MoE layer, so that the expert cache keeps the rest; at
// most 512 when every expert fits the budget (more rows per expert visit
// gain little once experts are resident), at most 2048 when experts stream
// (each chunk reads a block's experts once: longer chunks read less per
// token); a multiple of 16 from 16 up, at least 1, at most n_ctx.
static uint32_t auto_n_batch(const petrel_model *m, uint32_t n_ctx, uint64_t kv_bytes)
{
    const pt_hparams *hp = &m->hp;
    const uint64_t budget = m->params.ram_budget ? m->params.ram_budget : pt_stream_default_budget();
    uint64_t experts = 0, one_each = 0;
    for (uint32_t il = 0; il < pt_hp_n_blocks(hp); il++) {
        const pt_ecache_layer_src *src = &m->exp_src[il];
        if (src->n_expert <= 0)
            continue;
        experts += (uint64_t)src->n_expert * pt_ecache_slot_bytes_for(src);
        one_each += pt_ecache_slot_bytes_for(src);
    }
    const uint64_t fixed = m->trunk_bytes + kv_bytes + one_each + (64u << 20); // (64 MiB: code, rings, stacks)
    const uint64_t left = budget > fixed ? budget - fixed : 0;
    const uint64_t cap = m->trunk_bytes + kv_bytes + experts + 512 * chunk_row_bytes(hp) <= budget ? 512 : 2048;
    uint64_t nb = left / 4 / chunk_row_bytes(hp);
    nb = nb > cap ? cap : nb;
    nb = nb >= 16 ? nb / 16 * 16 : (nb ? nb : 1);
    return (uint32_t)(nb < n_ctx ? nb : n_ctx);
}

// Creates a context of m; with base, one that shares base's expert cache and
// streaming state (n_batch capped at the owner's, whose stream scratch it uses).
static petrel_context *context_new(petrel_model *m, const petrel_context_params *params, petrel_context *base,
                                   char *errbuf, size_t errlen)
{
    pt_err err = {{0}};
    petrel_context_params p = params ? *params : petrel_context_default_params();
    const pt_hparams *hp = &m->hp;
    petrel_context *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->model = m;
    c->n_ctx = p.n_ctx ? p.n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    c->n_threads = m->params.n_threads > 0 ? m->params.n_threads : omp_get_num_procs();
    c->kv_dim = hp->kv_lora_rank + hp->qk_rope;
    const uint32_t n_blocks = pt_hp_n_blocks(hp);
    c->n_batch_auto = !p.n_batch && !base;
    c->n_batch = p.n_batch ? p.n_batch
                 : base    ? pt_expert_root(base)->n_batch
                           : auto_n_batch(m, c->n_ctx, (uint64_t)n_blocks * c->n_ctx * c->kv_dim * sizeof(float));
    if (c->n_batch > c->n_ctx)
        c->n_batch = c->n_ctx;
    if (base && c->n_batch > pt_expert_root(base)->n_batch)
        c->n_batch = pt_expert_root(base)->n_batch;
    if (pt_model_rope_prepare(m, (int)c->n_ctx) < 0) {
        pt_errf(&err, "out of memory (RoPE table)");
        goto fail;
    }
    c->kv = calloc(n_blocks, sizeof(float *));
    for (uint32_t il = 0; il < n_blocks; il++) {
        c->kv[il] = falloc((uint64_t)c->n_ctx * c->kv_dim);
        if (!c->kv[il]) {
            pt_errf(&err, "out of memory: KV cache of %u positions", c->n_ctx);
            goto fail;
        }
    }
    c->st.kv_bytes = (uint64_t)n_blocks * c->n_ctx * c->kv_dim * sizeof(float);
    // The DSA indexer's key cache, beside the latent one (engine/dsa.h).
    c->ik = calloc(n_blocks, sizeof(float *));
    c->sel_stride = hp->idx_topk < c->n_ctx ? hp->idx_topk : c->n_ctx;
    const char *dsa_env = getenv("PETREL_DSA");
    c->dsa_on = !(dsa_env && !strcmp(dsa_env, "off"));
    for (uint32_t il = 0; il < n_blocks; il++) {
        if (!m->layers[il].has_idx)
            continue;
        c->ik[il] = falloc((uint64_t)c->n_ctx * hp->idx_head_dim);
        if (!c->ik[il]) {
            pt_errf(&err, "out of memory: indexer key cache of %u positions", c->n_ctx);
            goto fail;
        }
        c->st.kv_bytes += (uint64_t)c->n_ctx * hp->idx_head_dim * sizeof(float);
    }
    c->tokens = calloc(c->n_ctx, sizeof(petrel_token));
    c->hidden = falloc((uint64_t)c->n_batch * hp->n_embd);
    c->last_pos = calloc(c->n_batch, sizeof(int32_t));
    c->rowbuf = calloc(c->n_batch, sizeof(petrel_context *));
    if (!c->tokens || !c->hidden || !c->last_pos || !c->rowbuf) {
        pt_errf(&err, "out of memory (context buffers)");
        goto fail;
    }
    if (scratch_alloc(&c->s, hp, c->n_batch, c->n_ctx, c->n_threads, c->sel_stride) < 0) {
        pt_errf(&err, "out of memory (scratch buffers for a batch of %u)", c->n_batch);
        goto fail;
    }

    if (base) { // the owner's expert cache and streaming state
        petrel_context *root = pt_expert_root(base);
        c->expert_owner = root;
        c->stream = root->stream;
        c->ecache = root->ecache;
        root->n_sharing++;
        return c;
    }
    // Expert streaming: RAM budget, reader, expert cache, hot-store (engine/stream.c).
    if (pt_stream_init(c, &err) < 0)
        goto fail;
    return c;
fail:
    if (errbuf && errlen)
        snprintf(errbuf, errlen, "%s", err.msg);
    petrel_context_free(c);
    return NULL;
}

petrel_context *petrel_context_new(petrel_model *m, const petrel_context_params *params, char *errbuf,
                                   size_t errlen)
{
    return context_new(m, params, NULL, errbuf, errlen);
}

petrel_context *petrel_context_new_shared(petrel_context *base, const petrel_context_params *params, char *errbuf,
                                          size_t errlen)
{
    assert(base);
    return context_new(base->model, params, base, errbuf, errlen);
}

void petrel_context_free(petrel_context *c)
{
    if (!c)
        return;
    assert(c->n_sharing == 0 && "free the contexts sharing this one's expert cache first");
    if (c->kv)
        for (uint32_t il = 0; il < pt_hp_n_blocks(&c->model->hp); il++)
            pt_free_aligned(c->kv[il]);
    free(c->kv);
    if (c->ik)
        for (uint32_t il = 0; il < pt_hp_n_blocks(&c->model->hp); il++)
            pt_free_aligned(c->ik[il]);
    free(c->ik);
    free(c->tokens);
    pt_free_aligned(c->hidden);
    free(c->last_pos);
    free(c->logits);
    free(c->mtp_logits);
    scratch_free(&c->s);
    free(c->rowbuf);
    if (c->expert_owner) {
        c->expert_owner->n_sharing--;
    } else {
        pt_stream_free(c);
        pt_ecache_free(c->ecache);
    }
    free(c);
}

uint32_t petrel_context_n_ctx(const petrel_context *c) { return c->n_ctx; }
uint32_t petrel_context_n_batch(const petrel_context *c) { return c->n_batch; }
const char *petrel_context_error(const petrel_context *c) { return c->err.msg; }
int32_t petrel_kv_len(const petrel_context *c) { return c->n_past; }
const petrel_token *petrel_kv_tokens(const petrel_context *c) { return c->tokens; }

void petrel_kv_truncate(petrel_context *c, int32_t n)
{
    if (n < 0)
        n = 0;
    if (n < c->n_past)
        c->n_past = n;
    if (n < c->mtp_len)
        c->mtp_len = n;
}

int pt_ensure_rows(float **buf, int *have, int rows, int n_vocab)
{
    if (*have >= rows)
        return 0;
    float *p = realloc(*buf, sizeof(float) * (size_t)rows * (size_t)n_vocab);
    if (!p)
        return -1;
    *buf = p;
    *have = rows;
    return 0;
}

// Final norm of s->x into c->hidden, then logits for rows [first, B).
int pt_finish(petrel_context *c, int B, int first)
{
    const petrel_model *m = c->model;
    const int n_embd = (int)m->hp.n_embd, n_vocab = (int)m->hp.n_vocab;
    const double t0 = pt_now();
    for (int b = 0; b < B; b++)
        pt_rmsnorm(c->hidden + (size_t)b * n_embd, c->s.x + (size_t)b * n_embd, m->output_norm, n_embd,
                   m->hp.rms_eps);
    int n_rows = B - first;
    if (pt_ensure_rows(&c->logits, &c->logits_rows, n_rows, n_vocab) < 0)
        return pt_errf(&c->err, "out of memory (logits for %d positions)", n_rows);
    pt_gemm(&m->output, c->hidden + (size_t)first * n_embd, n_rows, c->logits);
    c->logits_first = first;
    c->logits_n = n_rows;
    c->prof.head += pt_now() - t0;
    return 0;
}

int petrel_decode(petrel_context *c, const petrel_token *tokens, const int32_t *pos, int n, int logits_mode)
{
    petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    c->err.msg[0] = 0;
    if (n <= 0)
        return pt_errf(&c->err, "petrel_decode: empty batch");
    if ((uint32_t)n > c->n_batch)
        return pt_errf(&c->err, "petrel_decode: batch of %d tokens exceeds n_batch %u", n, c->n_batch);
    const int32_t p0 = pos ? pos[0] : c->n_past;
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab)
            return pt_errf(&c->err, "token id %d at batch index %d is out of range [0, %u)", tokens[i], i,
                           hp->n_vocab);
        int32_t p = pos ? pos[i] : p0 + i;
        if (p != p0 + i)
            return pt_errf(&c->err, "positions in a batch must be consecutive (index %d has %d, expected %d)",
                           i, p, p0 + i);
        if (p < 0 || (uint32_t)p >= c->n_ctx)
            return pt_errf(&c->err, "position %d is past the context length %u", p, c->n_ctx);
    }
    if (p0 > c->n_past)
        return pt_errf(&c->err, "position %d leaves a gap: the KV cache holds %d positions", p0, c->n_past);

    omp_set_num_threads(c->n_threads);
    double t0 = pt_now();
    pt_scratch *s = &c->s;
    for (int i = 0; i < n; i++)
        s->pos[i] = p0 + i;
    // Overwriting earlier positions drops everything after them.
    c->n_past = p0;
    if (c->mtp_len > p0)
        c->mtp_len = p0;
    pt_embed(&m->tok_embd, tokens, n, s->x);
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (pt_forward_block(c, (int)il, n) < 0)
            return -1;
    if (pt_finish(c, n, logits_mode == PETREL_LOGITS_ALL ? 0 : n - 1) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        c->tokens[p0 + i] = tokens[i];
        c->last_pos[i] = p0 + i;
    }
    c->last_n = n;
    c->n_past = p0 + n;
    c->mtp_n = 0;
    double dt = pt_now() - t0;
    if (n > 1) {
        c->st.n_prompt_tokens += (uint64_t)n;
        c->st.t_prompt_s += dt;
        c->st.prefill_chunks++;
        if ((uint64_t)n > c->st.prefill_chunk_max)
            c->st.prefill_chunk_max = (uint64_t)n;
    } else {
        c->st.n_decode_tokens += 1;
        c->st.t_decode_s += dt;
    }
    return 0;
}

const float *petrel_get_logits(petrel_context *c, int i)
{
    int r = i - c->logits_first;
    if (r < 0 || r >= c->logits_n)
        return NULL;
    return c->logits + (size_t)r * c->model->hp.n_vocab;
}

int petrel_decode_mtp(petrel_context *c, const int *batch_idx, const petrel_token *next, int n)
{
    petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    c->err.msg[0] = 0;
    if (hp->n_nextn == 0)
        return pt_errf(&c->err, "%s: the model has no MTP layer", m->path);
    if (n <= 0 || (uint32_t)n > c->n_batch)
        return pt_errf(&c->err, "petrel_decode_mtp: bad batch size %d", n);
    const int il = (int)hp->n_layer;
    const pt_layer *L = &m->layers[il];
    pt_scratch *s = &c->s;
    const int n_embd = (int)hp->n_embd;
    for (int j = 0; j < n; j++) {
        if (batch_idx[j] < 0 || batch_idx[j] >= c->last_n)
            return pt_errf(&c->err, "petrel_decode_mtp: batch index %d not in the last batch", batch_idx[j]);
        if (next[j] < 0 || (uint32_t)next[j] >= hp->n_vocab)
            return pt_errf(&c->err, "token id %d is out of range [0, %u)", next[j], hp->n_vocab);
        s->pos[j] = c->last_pos[batch_idx[j]];
        if (j > 0 && s->pos[j] != s->pos[0] + j)
            return pt_errf(&c->err, "petrel_decode_mtp: positions must be consecutive");
    }
    if (s->pos[0] > c->mtp_len)
        return pt_errf(&c->err, "MTP position %d leaves a gap: its KV cache holds %d positions", s->pos[0],
                       c->mtp_len);
    omp_set_num_threads(c->n_threads);

    // x = eh_proj(concat(enorm(embed(next)), hnorm(h))); the embedding is
    // zero at position 0 (vLLM's DeepSeek MTP semantics).
    pt_embed(L->embed, next, n, s->x);
    for (int j = 0; j < n; j++) {
        float *e = s->x + (size_t)j * n_embd;
        float *cat = s->cat + (size_t)j * 2 * n_embd;
        if (s->pos[j] == 0)
            memset(e, 0, sizeof(float) * (size_t)n_embd);
        pt_rmsnorm(cat, e, L->enorm, n_embd, hp->rms_eps);
        pt_rmsnorm(cat + n_embd, c->hidden + (size_t)batch_idx[j] * n_embd, L->hnorm, n_embd, hp->rms_eps);
    }
    pt_gemm(&L->eh_proj, s->cat, n, s->x);
    c->mtp_len = s->pos[0];
    if (pt_forward_block(c, il, n) < 0)
        return -1;
    c->mtp_len = s->pos[0] + n;
    for (int j = 0; j < n; j++)
        pt_rmsnorm(s->xn + (size_t)j * n_embd, s->x + (size_t)j * n_embd, L->head_norm, n_embd, hp->rms_eps);
    if (pt_ensure_rows(&c->mtp_logits, &c->mtp_rows, n, (int)hp->n_vocab) < 0)
        return pt_errf(&c->err, "out of memory (MTP logits for %d positions)", n);
    pt_gemm(L->head, s->xn, n, c->mtp_logits);
    c->mtp_n = n;
    return 0;
}

const float *petrel_get_mtp_logits(petrel_context *c, int j)
{
    if (j < 0 || j >= c->mtp_n)
        return NULL;
    return c->mtp_logits + (size_t)j * c->model->hp.n_vocab;
}

void petrel_set_route_observer(petrel_context *c, petrel_route_fn fn, void *user)
{
    c->route_fn = fn;
    c->route_user = user;
}

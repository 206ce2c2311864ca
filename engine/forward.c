// engine/forward.c — one DeepSeek-V3 block over a batch of tokens:
// MLA attention in the absorbed form over the latent KV cache (restricted
// to the DSA indexer's selection in GLM-5-style models), then the
// dense FFN or the MoE (router, shared experts, routed experts through the
// expert cache, combined in ascending expert id order).
#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/dsa.h"
#include "engine/stream.h"
#include "kernels/ops.h"

// Rows [r0, r0 + n) of W as a matrix of their own.
static pt_mat sub_rows(const pt_mat *W, int64_t r0, int64_t n)
{
    pt_mat s = *W;
    s.data = (const char *)W->data + (size_t)r0 * pt_row_bytes(W->type, (uint64_t)W->cols);
    s.rows = n;
    return s;
}

void pt_embed(const pt_mat *embd, const petrel_token *tokens, int B, float *out)
{
    const size_t rb = pt_row_bytes(embd->type, (uint64_t)embd->cols);
    for (int b = 0; b < B; b++)
        pt_dequantize_row(embd->type, (const char *)embd->data + (size_t)tokens[b] * rb,
                          out + (size_t)b * embd->cols, embd->cols);
}

// Interleaved-pair rotation of x (rope values) at position pos, fused as
// ggml's x86 build compiles rotate_pairs (bit for bit llama.cpp's rope).
static void rope_apply(const petrel_model *m, float *x, int pos)
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

// Does block il attend sparsely in this batch? Runs its DSA indexer when it
// has one (engine/dsa.h); a "shared" trunk block reuses the selection the
// last full block made for the same batch. The first trunk block and an MTP
// block start a new batch: no earlier selection is reused across them.
static bool dsa_select(petrel_context *c, int il, int B)
{
    const pt_hparams *hp = &c->model->hp;
    if (!hp->idx_n_head)
        return false;
    const bool mtp = il >= (int)hp->n_layer;
    if (il == 0 || mtp)
        c->sel_valid = false;
    if (c->model->layers[il].has_idx)
        pt_dsa_index(c, il, B);
    else if (mtp || !hp->idx_shared[il])
        return false; // an MTP block stored without its indexer attends densely
    if (!c->dsa_on || !c->sel_valid)
        return false;
    pt_dsa_report(c, il, B);
    return true;
}

// Dense attention items as matrix-matrix products (default), or pair by
// pair with PETREL_ATTN_BATCH=off (the same bits; for comparisons).
static bool attn_batched(void)
{
    static int off = -1;
    return !pt_env_off("PETREL_ATTN_BATCH", &off);
}

// MLA attention: s->xn (B, n_embd) -> s->tmp (B, n_embd). Writes this
// batch's latents into the layer's KV cache at s->pos first, so that every
// token attends to all positions <= its own, or (DSA) to the positions its
// indexer selection keeps. A query whose selection is every key (nsel -1:
// up to index_topk keys) takes the dense path, so that it equals dense
// attention bit for bit.
static void attention(petrel_context *c, int il, int B)
{
    const petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    const pt_layer *L = &m->layers[il];
    pt_scratch *s = &c->s;
    const int H = (int)hp->n_head, nope = (int)hp->qk_nope, rope = (int)hp->qk_rope;
    const int kvl = (int)hp->kv_lora_rank, vd = (int)hp->v_head, qd = nope + rope;
    const int kvd = (int)c->kv_dim;
    double tp = pt_now();

    if (hp->q_lora_rank > 0) {
        // q_a and kv_a read the same input: one quantisation, one region
        pt_gemm_pair(&L->q_a, &L->kv_a, s->xn, B, s->qa, s->kva);
        for (int b = 0; b < B; b++) {
            float *r = s->qa + (size_t)b * hp->q_lora_rank;
            pt_rmsnorm(r, r, L->q_a_norm, hp->q_lora_rank, hp->rms_eps);
        }
        pt_gemm(&L->q_b, s->qa, B, s->q);
    } else {
        pt_gemm_pair(&L->q, &L->kv_a, s->xn, B, s->q, s->kva);
    }
    const bool sparse = dsa_select(c, il, B);

    // (In a multi-context step each row writes and reads its own context's cache.)
    for (int b = 0; b < B; b++) {
        const float *kv = s->kva + (size_t)b * kvd;
        float *slot = pt_row_ctx(c, b)->kv[il] + (size_t)s->pos[b] * kvd;
        pt_rmsnorm(slot, kv, L->kv_a_norm, kvl, hp->rms_eps);
        memcpy(slot + kvl, kv + kvl, sizeof(float) * (size_t)rope);
        rope_apply(m, slot + kvl, s->pos[b]);
        for (int h = 0; h < H; h++)
            rope_apply(m, s->q + (size_t)b * H * qd + (size_t)h * qd + nope, s->pos[b]);
    }

    // Absorb k_b into the queries: qlat[h][b] = k_b[h] (kv_lora x nope) . q_nope[b][h].
    // One head per thread (the products inside run single-threaded; results
    // do not depend on that).
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        float *qh = s->qh + (size_t)h * B * nope;
        for (int b = 0; b < B; b++)
            memcpy(qh + (size_t)b * nope, s->q + (size_t)b * H * qd + (size_t)h * qd, sizeof(float) * (size_t)nope);
        pt_mat kb = sub_rows(&L->k_b, (int64_t)h * kvl, kvl);
        pt_gemm(&kb, qh, B, s->qlat + (size_t)h * B * kvl);
    }

    c->prof.attn_proj += pt_now() - tp;

    // Scores over the latent cache, softmax, weighted sum of latents, in
    // ggml's order (kernels/ops.h: llama.cpp's kq, kq_soft_max and kqv over
    // its F32 cache, bit for bit). Work items are (token, group of up to
    // PT_ATTN_G heads): a dense item of one context runs as matrix-matrix products over
    // the cache (pt_attn_scores, pt_attn_wsum: the same bits as one pair at
    // a time), a DSA-sparse one pair by pair over its kept keys. Each item
    // is computed whole by one thread: thread-count independent.
    const float scale = m->softmax_scale;
    const double t0 = pt_now(); // attention over the cached keys (engine/dsa.h: pt_dsa_times)
    assert(kvl + rope <= 4096);
    // The keys' tail past their last whole 64 values, transposed once for
    // every item of this call (one context's cache: not in a multi-context step).
    // (A multi-context step, each row over its own cache, runs pair by pair.)
    const bool batched = attn_batched() && !c->rowctx;
    const float *kT = NULL;
    int64_t ks = 0;
    if (batched) {
        const int nmax = s->pos[B - 1] + 1;
        if (kvd % 64 != 0) {
            pt_attn_key_tail(s->kT, c->n_ctx, c->kv[il], nmax, kvd, kvd);
            kT = s->kT;
        }
        ks = pt_attn_pack_v(s->vp, c->kv[il], nmax, kvl, kvd);
    }
    // Heads per item: all of a token's when the batch alone keeps the threads busy.
    const int G = B >= 2 * c->n_threads ? (H < PT_ATTN_G ? H : PT_ATTN_G) : (H < PT_ATTN_G / 2 ? H : PT_ATTN_G / 2);
    const int ng = (H + G - 1) / G;
#pragma omp parallel for schedule(dynamic, 1)
    for (int it = 0; it < B * ng; it++) {
        const int b = it / ng, h0 = (it % ng) * G, gn = H - h0 < G ? H - h0 : G;
        const int n = s->pos[b] + 1, tid = omp_get_thread_num();
        const petrel_context *rc = pt_row_ctx(c, b);
        const float *cache = rc->kv[il];
        assert(tid < rc->n_threads && n <= (int)rc->n_ctx);
        float *sc = rc->s.scores + (size_t)tid * PT_ATTN_G * rc->n_ctx;
        const int nk = sparse ? s->nsel[b] : -1;
        if (nk < 0 && batched) {
            // qc rows [q absorbed (kv_lora) | q rope], as the cache rows [c_kv | k_rope]
            float *qc = rc->s.qc + (size_t)tid * PT_ATTN_G * kvd;
            for (int g = 0; g < gn; g++) {
                memcpy(qc + (size_t)g * kvd, s->qlat + ((size_t)(h0 + g) * B + b) * kvl, sizeof(float) * (size_t)kvl);
                memcpy(qc + (size_t)g * kvd + kvl, s->q + (size_t)b * H * qd + (size_t)(h0 + g) * qd + nope,
                       sizeof(float) * (size_t)rope);
            }
            pt_attn_scores(sc, rc->n_ctx, qc, gn, kvd, cache, n, kvl + rope, kvd, kT, c->n_ctx, scale);
            for (int g = 0; g < gn; g++)
                pt_softmax_at(sc + (size_t)g * rc->n_ctx, NULL, n);
            pt_attn_wsum(s->olat + ((size_t)h0 * B + b) * kvl, (int64_t)B * kvl, sc, rc->n_ctx, gn, cache, kvd, s->vp,
                         ks, n, kvl);
            continue;
        }
        // The kept keys only, ascending (the others get -inf, exp 0).
        const int32_t *sel = nk < 0 ? NULL : s->sel + (size_t)b * c->sel_stride;
        const int nkeys = nk < 0 ? n : nk;
        for (int h = h0; h < h0 + gn; h++) {
            float qcat[4096]; // [q absorbed (kv_lora) | q rope], as the cache rows [c_kv | k_rope]
            memcpy(qcat, s->qlat + ((size_t)h * B + b) * kvl, sizeof(float) * (size_t)kvl);
            memcpy(qcat + kvl, s->q + (size_t)b * H * qd + (size_t)h * qd + nope, sizeof(float) * (size_t)rope);
            float *ol = s->olat + ((size_t)h * B + b) * kvl;
            for (int j = 0; j < nkeys; j++)
                sc[j] = pt_dot_f32_ggml(qcat, cache + (size_t)(sel ? sel[j] : j) * kvd, kvl + rope) * scale;
            pt_softmax_at(sc, sel, nkeys);
            pt_wsum_rows(ol, sc, sel, cache, nkeys, kvl, kvd);
        }
    }

    c->t_attn_s += pt_now() - t0;
    tp = pt_now();

    // Value up-projection per head (one head per thread), then the output projection.
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        float *oh = s->oh + (size_t)h * B * vd;
        pt_mat vb = sub_rows(&L->v_b, (int64_t)h * vd, vd);
        pt_gemm(&vb, s->olat + (size_t)h * B * kvl, B, oh);
        for (int b = 0; b < B; b++)
            memcpy(s->attn + (size_t)b * H * vd + (size_t)h * vd, oh + (size_t)b * vd, sizeof(float) * (size_t)vd);
    }
    pt_gemm(&L->o, s->attn, B, s->tmp);
    c->prof.attn_proj += pt_now() - tp;
}

int pt_forward_block(petrel_context *c, int il, int B)
{
    const petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    const pt_layer *L = &m->layers[il];
    pt_scratch *s = &c->s;
    const int n_embd = (int)hp->n_embd;

    for (int b = 0; b < B; b++)
        pt_rmsnorm(s->xn + (size_t)b * n_embd, s->x + (size_t)b * n_embd, L->attn_norm, n_embd, hp->rms_eps);
    attention(c, il, B);
    for (size_t i = 0; i < (size_t)B * n_embd; i++)
        s->x[i] += s->tmp[i];

    for (int b = 0; b < B; b++)
        pt_rmsnorm(s->xn + (size_t)b * n_embd, s->x + (size_t)b * n_embd, L->ffn_norm, n_embd, hp->rms_eps);
    if (L->moe) {
        if (pt_moe(c, il, B) < 0)
            return -1;
    } else {
        pt_stream_prefetch_next(c, il, B); // lookahead reads for a MoE block that follows (engine/stream.h)
        if (B > 1)
            pt_stream_read_ahead(c, il, B); // (a prefill chunk's: the same, engine/stream.h)
        const double t0 = pt_now();
        pt_ffn(c, &L->ffn_gate, &L->ffn_up, &L->ffn_down, s->xn, B, s->tmp);
        c->prof.dense += pt_now() - t0;
    }
    for (size_t i = 0; i < (size_t)B * n_embd; i++)
        s->x[i] += s->tmp[i];
    return 0;
}

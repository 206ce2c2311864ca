// engine/dsa.c — the DSA lightning indexer: keys, queries, index scores and
// the top-k selection of the keys each query's MLA attention keeps.
//
// For block il and a query at position p (x = the block's normed input, qr =
// the normed MLA query latent, R = qk_rope, d = idx_head_dim, H = idx_n_head):
//   k_s = RoPE(LayerNorm(W_k x_s; weight, bias, eps 1e-6))     cached per position
//   q_h = RoPE(W_qb qr)[h]                                      h = 0..H-1
//   w_h = (W_proj x)_h * d^-1/2 * H^-1/2
//   I(p, s) = sum_h w_h * ReLU(q_h . k_s)                       s = 0..p, fp32
// RoPE acts on the FIRST R dims of an indexer head ([rope | nope], unlike
// the MLA head), with the MLA table; pairs (2i, 2i+1) (GLM) or (i, i+R/2)
// (hp->idx_rope_neox, DeepSeek-V3.2). The query keeps the min(topk, p+1)
// keys of largest I; of equal scores the lower position wins.
#include "engine/dsa.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"
#include "kernels/ops.h"

#define IDX_LN_EPS 1e-6f
#define KEY_CHUNK 256 // keys scored per work item (all heads of one chunk stay in cache)

void pt_dsa_set_observer(petrel_context *c, pt_dsa_observer_fn fn, void *user)
{
    c->dsa_fn = fn;
    c->dsa_user = user;
}

void pt_dsa_set_enabled(petrel_context *c, bool on) { c->dsa_on = on; }

void pt_dsa_times(const petrel_context *c, double *t_index_s, double *t_attn_s)
{
    *t_index_s = c->t_idx_s;
    *t_attn_s = c->t_attn_s;
}

// RoPE on x[0 .. R) at position pos: adjacent pairs, or (i, i + R/2) pairs.
static void idx_rope(const petrel_model *m, float *x, int pos)
{
    const int half = (int)m->hp.qk_rope / 2;
    const float *cs = m->rope_cos + (size_t)pos * half;
    const float *sn = m->rope_sin + (size_t)pos * half;
    const int stride = m->hp.idx_rope_neox ? 1 : 2, off = m->hp.idx_rope_neox ? half : 1;
    for (int i = 0; i < half; i++) {
        float *a = x + (size_t)i * stride, *b = a + off;
        const float x0 = *a, x1 = *b;
        *a = x0 * cs[i] - x1 * sn[i];
        *b = x0 * sn[i] + x1 * cs[i];
    }
}

// LayerNorm of x (n values) in place: (x - mean) / sqrt(var + eps) * w + b,
// mean and (biased) variance accumulated in double.
static void layernorm(float *x, const float *w, const float *b, int n)
{
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++)
        var += ((double)x[i] - mean) * ((double)x[i] - mean);
    const float inv = (float)(1.0 / sqrt(var / n + (double)IDX_LN_EPS)), mf = (float)mean;
    for (int i = 0; i < n; i++)
        x[i] = (x[i] - mf) * inv * w[i] + b[i];
}

// Is key a better than key b? Higher score, then lower position.
static inline bool better(const float *sc, int32_t a, int32_t b)
{
    return sc[a] > sc[b] || (sc[a] == sc[b] && a < b);
}

// Sift-down in a min-heap (root = the worst kept key) of n positions.
static void sift_down(int32_t *h, int n, int i, const float *sc)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && better(sc, h[w], h[l]))
            w = l;
        if (r < n && better(sc, h[w], h[r]))
            w = r;
        if (w == i)
            return;
        int32_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

// The k best of keys 0..n-1 by sc (k < n) into out, ascending. heap: (k).
static void top_k(const float *sc, int n, int k, int32_t *heap, int32_t *out)
{
    for (int i = 0; i < k; i++)
        heap[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--)
        sift_down(heap, k, i, sc);
    for (int32_t s = k; s < n; s++)
        if (better(sc, s, heap[0])) {
            heap[0] = s;
            sift_down(heap, k, 0, sc);
        }
    memcpy(out, heap, sizeof(int32_t) * (size_t)k);
    qsort(out, (size_t)k, sizeof(int32_t), cmp_i32);
}

// Index scores of query b over keys 0..n-1 into sc. Parallel over chunks of
// keys; each key's score is computed whole by one thread in a fixed order,
// so the scores do not depend on the thread count.
static void score_keys(const petrel_context *c, const float *keys, const float *q, const float *w, int n, float *sc)
{
    const pt_hparams *hp = &c->model->hp;
    const int H = (int)hp->idx_n_head, d = (int)hp->idx_head_dim;
    const int n_chunks = (n + KEY_CHUNK - 1) / KEY_CHUNK;
#pragma omp parallel for schedule(static) if (n_chunks > 1)
    for (int ch = 0; ch < n_chunks; ch++) {
        const int s0 = ch * KEY_CHUNK, ns = n - s0 < KEY_CHUNK ? n - s0 : KEY_CHUNK;
        float dots[KEY_CHUNK];
        float *out = sc + s0;
        for (int j = 0; j < ns; j++)
            out[j] = 0;
        for (int h = 0; h < H; h++) {
            pt_dot_rows_f32(dots, q + (size_t)h * d, keys + (size_t)s0 * d, ns, d, d);
            const float wh = w[h];
            for (int j = 0; j < ns; j++)
                out[j] += dots[j] > 0 ? wh * dots[j] : 0.0f;
        }
    }
}

void pt_dsa_index(petrel_context *c, int il, int B)
{
    const petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    const pt_layer *L = &m->layers[il];
    pt_scratch *s = &c->s;
    assert(L->has_idx && c->ik[il]);
    const int H = (int)hp->idx_n_head, d = (int)hp->idx_head_dim;
    const int k = (int)c->sel_stride;
    double t0 = pt_now();

    // Keys of the batch into the cache.
    pt_gemm(&L->idx_k, s->xn, B, s->ikn);
    // (In a multi-context step, engine/batch.c, each row has its own context's key cache.)
    int32_t pmax = 0;
    for (int b = 0; b < B; b++) {
        float *key = pt_row_ctx(c, b)->ik[il] + (size_t)s->pos[b] * d;
        pmax = s->pos[b] > pmax ? s->pos[b] : pmax;
        memcpy(key, s->ikn + (size_t)b * d, sizeof(float) * (size_t)d);
        layernorm(key, L->idx_k_norm, L->idx_k_bias, d);
        idx_rope(m, key, s->pos[b]);
    }
    if (!c->dsa_on) { // dense: the key cache stays complete, nothing is selected
        c->sel_valid = false;
        c->t_idx_s += pt_now() - t0;
        return;
    }
    if (pmax + 1 <= k) { // every query keeps every key: no scores needed
        for (int b = 0; b < B; b++)
            s->nsel[b] = -1;
        c->sel_valid = true;
        c->t_idx_s += pt_now() - t0;
        return;
    }
    // Queries and head weights.
    pt_gemm(&L->idx_q_b, s->qa, B, s->iq);
    pt_gemm(&L->idx_proj, s->xn, B, s->iw);
    const float wscale = 1.0f / sqrtf((float)d) / sqrtf((float)H);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++)
            idx_rope(m, s->iq + ((size_t)b * H + h) * d, s->pos[b]);
        for (int h = 0; h < H; h++)
            s->iw[(size_t)b * H + h] *= wscale;
    }
    // Selection per query.
    for (int b = 0; b < B; b++) {
        const int n = s->pos[b] + 1;
        if (n <= k) {
            s->nsel[b] = -1;
            continue;
        }
        petrel_context *rc = pt_row_ctx(c, b);
        score_keys(c, rc->ik[il], s->iq + (size_t)b * H * d, s->iw + (size_t)b * H, n, rc->s.iscore);
        top_k(rc->s.iscore, n, k, s->iheap, s->sel + (size_t)b * k);
        s->nsel[b] = k;
    }
    c->sel_valid = true;
    c->t_idx_s += pt_now() - t0;
}

void pt_dsa_report(petrel_context *c, int il, int B)
{
    pt_scratch *s = &c->s;
    const int k = (int)c->sel_stride;
    int32_t *all = s->iheap; // free once the selections are made; (k) >= any dense count
    for (int b = 0; b < B; b++) {
        const petrel_context *rc = pt_row_ctx(c, b); // each row's own observer
        if (!rc->dsa_fn)
            continue;
        const int n = s->pos[b] + 1;
        if (s->nsel[b] >= 0) {
            rc->dsa_fn(rc->dsa_user, il, s->pos[b], s->sel + (size_t)b * k, s->nsel[b]);
            continue;
        }
        for (int t = 0; t < n; t++)
            all[t] = t;
        rc->dsa_fn(rc->dsa_user, il, s->pos[b], all, n);
    }
}

// engine/generate.c — prompt prefill and the generation loop, optionally
// with MTP speculative decoding.
//
// Speculation here is exact-match verification: the MTP block drafts the
// token after next; the next step decodes [current, draft] as one batch.
// The main model's logits for both positions are bit-identical to what two
// single steps give (the engine's batch invariance), the sampler consumes
// them position by position, and the draft is kept only if the sampled
// token equals it. So the output never depends on speculation.
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"

typedef struct gen_state {
    petrel_context *c;
    const petrel_gen_params *gp;
    petrel_token_fn fn;
    void *user;
    petrel_gen_result *res;
    petrel_token *hist;      // (n_prompt + n_predict + 2) tokens seen, for penalties
    int nh;
    petrel_token eos[8];
    int n_eos;
    double t0;
} gen_state;

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

static petrel_token pick(gen_state *g, const float *logits)
{
    const int nv = (int)g->c->model->hp.n_vocab;
    if (!g->gp->sampler)
        return argmax(logits, nv);
    return petrel_sampler_sample(g->gp->sampler, logits, g->hist, g->nh);
}

// Records a generated token and hands it on. Returns 1 when generation ends.
static int emit(gen_state *g, petrel_token t)
{
    if (!g->res->n_generated)
        g->res->ttft_s = pt_now() - g->t0;
    g->hist[g->nh++] = t;
    for (int e = 0; e < g->n_eos; e++)
        if (t == g->eos[e]) {
            g->res->stopped_eos = true;
            return 1;
        }
    g->res->n_generated++;
    if (g->fn && g->fn(g->user, t)) {
        g->res->stopped_cb = true;
        return 1;
    }
    return g->res->n_generated >= g->gp->n_predict;
}

// Draft for the position after `next`: from the external drafter, or from
// the MTP block on the last batch's entry bi and the token that follows it.
static int draft_after(gen_state *g, int bi, petrel_token next, petrel_token *draft)
{
    petrel_context *c = g->c;
    if (g->gp->draft_fn) {
        *draft = g->gp->draft_fn(g->gp->draft_user, g->hist, g->nh, (int32_t)g->nh);
        if (*draft < 0 || (uint32_t)*draft >= c->model->hp.n_vocab)
            *draft = 0;
        return 0;
    }
    if (petrel_decode_mtp(c, &bi, &next, 1) < 0)
        return -1;
    *draft = argmax(petrel_get_mtp_logits(c, 0), (int)c->model->hp.n_vocab);
    return 0;
}

// Common prefix of the KV cache and the prompt that can be kept: at least
// one prompt token is always recomputed (its logits start generation), and
// with speculation one more (the MTP block needs that hidden state).
static int reusable_prefix(const petrel_context *c, const petrel_token *prompt, int n, bool spec)
{
    int L = 0;
    while (L < c->n_past && L < n && c->tokens[L] == prompt[L])
        L++;
    if (L >= n)
        L = n - 1;
    if (spec && L > 0) {
        L--;
        if (c->mtp_len < L)
            L = c->mtp_len; // the MTP cache must cover the kept prefix
    }
    return L < 0 ? 0 : L;
}

int petrel_generate(petrel_context *c, const petrel_token *prompt, int n_prompt, const petrel_gen_params *gp,
                    petrel_token_fn on_token, void *user, petrel_gen_result *res)
{
    petrel_gen_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    if (n_prompt <= 0 || gp->n_predict <= 0)
        return pt_errf(&c->err, "petrel_generate: empty prompt or n_predict <= 0");
    if ((uint32_t)(n_prompt + gp->n_predict + 1) > c->n_ctx)
        return pt_errf(&c->err, "prompt (%d) + generation (%d) exceeds the context length %u", n_prompt,
                       gp->n_predict, c->n_ctx);
    const bool spec = gp->speculative && (gp->draft_fn || c->model->hp.n_nextn > 0);
    const bool use_mtp = spec && !gp->draft_fn;
    gen_state g = {.c = c, .gp = gp, .fn = on_token, .user = user, .res = res, .t0 = pt_now()};
    g.hist = malloc(sizeof(petrel_token) * (size_t)(n_prompt + gp->n_predict + 2));
    if (!g.hist)
        return pt_errf(&c->err, "out of memory");
    memcpy(g.hist, prompt, sizeof(petrel_token) * (size_t)n_prompt);
    g.nh = n_prompt;
    g.n_eos = gp->ignore_eos ? 0 : petrel_model_eos(c->model, g.eos, 8);
    res->n_prompt = n_prompt;

    int rc = -1;
    int *rows = NULL; // (n_batch) 0, 1, 2, ...: the batch rows the MTP prefill reads
    if (use_mtp) {
        rows = malloc(sizeof(int) * c->n_batch);
        if (!rows) {
            free(g.hist);
            return pt_errf(&c->err, "out of memory");
        }
        for (int i = 0; i < (int)c->n_batch; i++)
            rows[i] = i;
    }
    int start = gp->reuse_prefix ? reusable_prefix(c, prompt, n_prompt, use_mtp) : 0;
    petrel_kv_truncate(c, start);
    res->n_prefilled = n_prompt - start;

    // Prefill; with speculation also fill the MTP cache for every prompt
    // position whose next token is known.
    for (int done = start; done < n_prompt;) {
        int k = n_prompt - done < (int)c->n_batch ? n_prompt - done : (int)c->n_batch;
        if (petrel_decode(c, prompt + done, NULL, k, PETREL_LOGITS_LAST) < 0)
            goto out;
        if (use_mtp) {
            int m = done + k < n_prompt ? k : k - 1;
            if (m > 0 && petrel_decode_mtp(c, rows, prompt + done + 1, m) < 0)
                goto out;
        }
        done += k;
    }

    const int nv = (int)c->model->hp.n_vocab;
    petrel_token cur = pick(&g, petrel_get_logits(c, c->last_n - 1));
    if (emit(&g, cur)) {
        rc = 0;
        goto out;
    }
    petrel_token draft = -1;
    if (spec && draft_after(&g, c->last_n - 1, cur, &draft) < 0)
        goto out;
    for (;;) {
        if (!spec) {
            if (petrel_decode(c, &cur, NULL, 1, PETREL_LOGITS_LAST) < 0)
                goto out;
            cur = pick(&g, petrel_get_logits(c, 0));
            if (emit(&g, cur))
                break;
            continue;
        }
        // Verify [cur, draft] in one batch.
        petrel_token pair[2] = {cur, draft};
        const bool room = (uint32_t)(c->n_past + 2) <= c->n_ctx;
        if (petrel_decode(c, pair, NULL, room ? 2 : 1, PETREL_LOGITS_ALL) < 0)
            goto out;
        res->n_drafted += room;
        petrel_token y0 = pick(&g, petrel_get_logits(c, 0));
        if (emit(&g, y0))
            break;
        if (room && y0 == draft) {
            res->n_accepted++;
            petrel_token y1 = pick(&g, petrel_get_logits(c, 1));
            if (emit(&g, y1))
                break;
            if (use_mtp) {
                int bi[2] = {0, 1};
                petrel_token nx[2] = {draft, y1};
                if (petrel_decode_mtp(c, bi, nx, 2) < 0)
                    goto out;
                draft = argmax(petrel_get_mtp_logits(c, 1), nv);
            } else if (draft_after(&g, 1, y1, &draft) < 0) {
                goto out;
            }
            cur = y1;
        } else {
            // Rejected: position n+1 (the draft) is dropped by the next decode.
            if (room)
                petrel_kv_truncate(c, c->n_past - 1);
            if (draft_after(&g, 0, y0, &draft) < 0)
                goto out;
            cur = y0;
        }
    }
    rc = 0;
out:
    res->t_total_s = pt_now() - g.t0;
    free(rows);
    free(g.hist);
    return rc;
}

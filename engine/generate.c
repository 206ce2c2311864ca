// engine/generate.c — prompt prefill and the generation loop, optionally
// with MTP speculative decoding.
//
// Speculation here is exact-match verification: the MTP block drafts the
// token after next; the next step decodes [current, draft] as one batch.
// With PETREL_SPEC_ADAPTIVE (the default) engine/spec_policy.h decides step
// by step whether a verification or a plain step comes next.
// The main model's logits for both positions are bit-identical to what two
// single steps give (the engine's batch invariance), the sampler consumes
// them position by position, and the draft is kept only if the sampled
// token equals it. So the output never depends on speculation.
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/spec_mtp.h"
#include "engine/spec_policy.h"

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

// Expert bytes read and expert uses (distinct experts per batch) so far.
static void expert_counts(const petrel_context *c, double *bytes, double *uses)
{
    pt_ecache_stats es;
    pt_ecache_get_stats(c->ecache, &es);
    *bytes = (double)es.bytes_read;
    *uses = (double)(es.hits + es.misses);
}

// The draft for the position after the pending token: from the external
// drafter, or the MTP block over the queued rows. Timed and counted with
// the policy (a draft belongs to the cost of the verification it serves).
static int make_draft(gen_state *g, pt_mtp_queue *q, pt_spec_policy *pol, petrel_token *draft)
{
    petrel_context *c = g->c;
    double b0, u0, b1, u1, t = pt_now();
    expert_counts(c, &b0, &u0);
    if (g->gp->draft_fn) {
        *draft = g->gp->draft_fn(g->gp->draft_user, g->hist, g->nh, (int32_t)g->nh);
        if (*draft < 0 || (uint32_t)*draft >= c->model->hp.n_vocab)
            *draft = 0;
        t = pt_now() - t;
    } else if (pt_mtp_draft(c, q, draft, &t) < 0) {
        return -1;
    }
    expert_counts(c, &b1, &u1);
    pt_spec_note_draft(pol, t, b1 - b0);
    return 0;
}

// Copies the policy's counts and estimates into the context's statistics
// (printed by --stats).
static void policy_stats(petrel_context *c, const pt_spec_policy *p)
{
    petrel_stats *s = &c->st;
    s->spec_used = true;
    s->spec_mode = p->mode;
    s->spec_plain_steps += p->n_plain;
    s->spec_verify_steps += p->n_verify;
    s->spec_accepted += p->n_accepted;
    s->spec_probes += p->n_probe;
    s->spec_probe_hits += p->n_probe_hit;
    s->spec_switches += p->n_switch;
    s->spec_explore += p->n_explore;
    s->spec_acceptance = pt_spec_acceptance(p);
    s->spec_t_plain_s = p->k->t_plain.est;
    s->spec_t_verify_s = p->k->t_verify.est;
    s->spec_t_draft_s = p->k->t_draft.est;
    s->spec_bytes_plain = p->k->b_plain;
    s->spec_bytes_verify = p->k->b_verify + p->k->b_draft;
    s->spec_uses_plain = p->k->u_plain;
    s->spec_uses_verify = p->k->u_verify;
    s->spec_gain = p->gain;
    s->spec_on = p->on;
    s->spec_dormant = p->dormant;
    s->spec_from_prior = p->from_prior;
    s->spec_dormant_calls = p->k->dormant_calls;
    s->spec_dormant_gap = p->k->dormant_gap;
    s->spec_dormant_s = p->k->dormant_secs;
    s->spec_recheck_s = p->k->recheck_secs;
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
    const int mode = gp->spec_mode;
    if (mode != PETREL_SPEC_ADAPTIVE && mode != PETREL_SPEC_ALWAYS && mode != PETREL_SPEC_OFF)
        return pt_errf(&c->err, "petrel_generate: spec_mode %d is not a PETREL_SPEC_* value", mode);
    const bool spec = gp->speculative && mode != PETREL_SPEC_OFF && (gp->draft_fn || c->model->hp.n_nextn > 0);
    pt_spec_policy pol;
    pt_spec_policy_init_prior(&pol, spec ? mode : PETREL_SPEC_OFF, &c->spec_costs, &c->model->spec_prior);
    // A dormant call (engine/spec_policy.h) makes no draft: the MTP cache
    // is not kept filled (it ends where this call starts writing).
    bool use_mtp = spec && !gp->draft_fn && !pol.dormant;
    // ... and a live one after dormant ones does not re-prefill a long kept
    // prefix (a conversation) just to re-measure: it stays dormant.
    if (use_mtp && gp->reuse_prefix &&
        pt_spec_keep_dormant(&pol, reusable_prefix(c, prompt, n_prompt, false) -
                                       reusable_prefix(c, prompt, n_prompt, true)))
        use_mtp = false;
    gen_state g = {.c = c, .gp = gp, .fn = on_token, .user = user, .res = res, .t0 = pt_now()};
    g.hist = malloc(sizeof(petrel_token) * (size_t)(n_prompt + gp->n_predict + 2));
    if (!g.hist)
        return pt_errf(&c->err, "out of memory");
    memcpy(g.hist, prompt, sizeof(petrel_token) * (size_t)n_prompt);
    g.nh = n_prompt;
    g.n_eos = gp->ignore_eos ? 0 : petrel_model_eos(c->model, g.eos, 8);
    res->n_prompt = n_prompt;

    int rc = -1;
    pt_mtp_queue q = {0};
    int start = gp->reuse_prefix ? reusable_prefix(c, prompt, n_prompt, use_mtp) : 0;
    petrel_kv_truncate(c, start);
    res->n_prefilled = n_prompt - start;
    if (use_mtp && pt_mtp_queue_init(&q, c) < 0) {
        free(g.hist);
        return -1;
    }

    // Prefill; with speculation also queue the MTP input of every prompt
    // position whose next token is known (their KV entries are written
    // when the queue fills or a draft is made: engine/spec_mtp.h). The
    // queue's time is the call's MTP upkeep (pt_spec_note_upkeep).
    double upkeep = 0;
    for (int done = start; done < n_prompt;) {
        int k = n_prompt - done < (int)c->n_batch ? n_prompt - done : (int)c->n_batch;
        if (petrel_decode(c, prompt + done, NULL, k, PETREL_LOGITS_LAST) < 0)
            goto out;
        if (use_mtp) {
            const double t0 = pt_now();
            int m = done + k < n_prompt ? k : k - 1;
            for (int i = 0; i < m; i++)
                if (pt_mtp_push(c, &q, i, prompt[done + i + 1]) < 0)
                    goto out;
            upkeep += pt_now() - t0;
        }
        done += k;
    }

    petrel_token cur = pick(&g, petrel_get_logits(c, c->last_n - 1));
    if (emit(&g, cur)) {
        rc = 0;
        goto out;
    }
    if (use_mtp) {
        const double t0 = pt_now();
        if (pt_mtp_push(c, &q, c->last_n - 1, cur) < 0)
            goto out;
        upkeep += pt_now() - t0;
    }
    // Each step decodes the pending token cur at position n_past, as a plain
    // step or verified together with a draft for n_past + 1; the policy
    // picks which (engine/spec_policy.h). Either way the tokens are those of
    // plain decoding. The policy times each step from one decision to the
    // next, this loop's bookkeeping included.
    pt_spec_policy_wall(&pol);
    pt_spec_note_upkeep(&pol, upkeep);
    for (;;) {
        int kind = pt_spec_next(&pol);
        if (pol.dormant) // a live re-check that confirmed: no more MTP upkeep (its queued rows are dropped)
            use_mtp = false;
        const bool room = (uint32_t)(c->n_past + 2) <= c->n_ctx;
        if (kind == PT_STEP_VERIFY && (!room || res->n_generated + 1 >= gp->n_predict))
            kind = PT_STEP_PLAIN; // no room for the draft, or only one token still wanted
        petrel_token draft = -1;
        if (kind != PT_STEP_PLAIN && make_draft(&g, &q, &pol, &draft) < 0)
            goto out;
        double b0, u0, b1, u1, t = pt_now();
        expert_counts(c, &b0, &u0);
        if (kind != PT_STEP_VERIFY) {
            if (petrel_decode(c, &cur, NULL, 1, PETREL_LOGITS_LAST) < 0)
                goto out;
            t = pt_now() - t;
            expert_counts(c, &b1, &u1);
            pt_spec_note_plain(&pol, t, b1 - b0, u1 - u0);
            petrel_token y = pick(&g, petrel_get_logits(c, 0));
            if (kind == PT_STEP_PLAIN_PROBE)
                pt_spec_note_outcome(&pol, y == draft, true);
            if (emit(&g, y))
                break;
            if (use_mtp && pt_mtp_push(c, &q, 0, y) < 0)
                goto out;
            cur = y;
            continue;
        }
        // Verify [cur, draft] in one batch.
        petrel_token pair[2] = {cur, draft};
        if (petrel_decode(c, pair, NULL, 2, PETREL_LOGITS_ALL) < 0)
            goto out;
        t = pt_now() - t;
        expert_counts(c, &b1, &u1);
        pt_spec_note_verify(&pol, t, b1 - b0, u1 - u0);
        res->n_drafted++;
        petrel_token y0 = pick(&g, petrel_get_logits(c, 0));
        pt_spec_note_outcome(&pol, y0 == draft, false);
        if (emit(&g, y0))
            break;
        if (y0 == draft) {
            res->n_accepted++;
            petrel_token y1 = pick(&g, petrel_get_logits(c, 1));
            if (emit(&g, y1))
                break;
            if (use_mtp && (pt_mtp_push(c, &q, 0, draft) < 0 || pt_mtp_push(c, &q, 1, y1) < 0))
                goto out;
            cur = y1;
        } else {
            // Rejected: position n+1 (the draft) is dropped by the next decode.
            petrel_kv_truncate(c, c->n_past - 1);
            if (use_mtp && pt_mtp_push(c, &q, 0, y0) < 0)
                goto out;
            cur = y0;
        }
    }
    rc = 0;
out:
    // Leave the MTP cache covering what is known, so that a later call
    // with reuse_prefix keeps the prefix (reusable_prefix).
    if (rc == 0 && use_mtp && pt_mtp_fill(c, &q) < 0)
        rc = -1;
    res->t_total_s = pt_now() - g.t0;
    if (spec) {
        pt_spec_policy_done(&pol);
        policy_stats(c, &pol);
    }
    pt_mtp_queue_free(&q);
    free(g.hist);
    return rc;
}

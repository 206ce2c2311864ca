// tests/test_generate.c — generation: speculative decoding (MTP drafts and
// external drafts that are always / sometimes / never right) gives exactly
// the tokens of plain decoding, greedy and sampled; prefix reuse gives
// exactly the tokens of a fresh context while prefilling less.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "petrel.h"
#include "tests/testutil.h"

#define NGEN 24
static const petrel_token prompt[] = {7, 100, 42, 311, 5, 9, 260, 77};
#define NP ((int)(sizeof prompt / sizeof prompt[0]))

typedef struct oracle {
    const tu_tokens *ref; // the right answers
    int every;            // right only on positions where pos % every == 0 (1 = always)
    int calls;
} oracle;

static petrel_token oracle_draft(void *u, const petrel_token *toks, int n, int32_t pos)
{
    (void)toks;
    (void)n;
    oracle *o = u;
    o->calls++;
    int k = pos - NP;
    if (k < 0 || k >= o->ref->n)
        return 0;
    petrel_token right = o->ref->t[k];
    return (pos % o->every == 0) ? right : (right + 1) % 512;
}

static petrel_model *open_model(void)
{
    char *path = tu_tiny_model("q8_0");
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.experts_per_layer = 3; // force misses: placement must not matter
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "%s", err);
    free(path);
    return m;
}

static void gen(petrel_model *m, petrel_context *reuse, const petrel_token *p, int np, petrel_gen_params gp,
                tu_tokens *out, petrel_gen_result *res)
{
    char err[1024];
    petrel_context *c = reuse ? reuse : petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "%s", err);
    memset(out, 0, sizeof *out);
    cr_assert_eq(petrel_generate(c, p, np, &gp, tu_collect_token, out, res), 0, "%s", petrel_context_error(c));
    if (!reuse)
        petrel_context_free(c);
}

static void speculative_matches(petrel_sampler_params *sp)
{
    petrel_model *m = open_model();
    const int nv = petrel_model_n_vocab(m);
    petrel_gen_params gp = {.n_predict = NGEN, .ignore_eos = true};
    petrel_gen_result res;
    tu_tokens ref, got;

    gp.sampler = sp ? petrel_sampler_new(sp, nv) : NULL;
    gen(m, NULL, prompt, NP, gp, &ref, &res);
    cr_assert_eq(ref.n, NGEN);
    petrel_sampler_free(gp.sampler);

    // MTP drafts.
    gp.sampler = sp ? petrel_sampler_new(sp, nv) : NULL;
    gp.speculative = true;
    gp.spec_mode = PETREL_SPEC_ALWAYS; // verify every draft (the adaptive policy: tests/test_spec_policy.c)
    gen(m, NULL, prompt, NP, gp, &got, &res);
    tu_expect_same_tokens(&ref, &got, "MTP speculation");
    cr_expect(res.n_drafted > 0);
    petrel_sampler_free(gp.sampler);

    // External drafts: always right, right every other position, never right.
    const int every[] = {1, 2, 1000000};
    for (int i = 0; i < 3; i++) {
        oracle o = {.ref = &ref, .every = every[i]};
        gp.sampler = sp ? petrel_sampler_new(sp, nv) : NULL;
        gp.draft_fn = oracle_draft;
        gp.draft_user = &o;
        gen(m, NULL, prompt, NP, gp, &got, &res);
        tu_expect_same_tokens(&ref, &got, every[i] == 1 ? "always-right drafts" : "partly-right drafts");
        if (every[i] == 1)
            cr_expect(res.n_accepted >= res.n_drafted - 1 && res.n_accepted >= NGEN / 2 - 1,
                      "always-right drafts: %d of %d accepted", res.n_accepted, res.n_drafted);
        else if (every[i] == 2)
            cr_expect(res.n_accepted > 0 && res.n_accepted < res.n_drafted, "%d of %d accepted", res.n_accepted,
                      res.n_drafted);
        else
            cr_expect_eq(res.n_accepted, 0);
        petrel_sampler_free(gp.sampler);
    }
    petrel_model_close(m);
}

Test(generate, speculative_greedy_identical) { speculative_matches(NULL); }

Test(generate, speculative_sampled_identical)
{
    petrel_sampler_params sp = petrel_sampler_default_params();
    sp.temperature = 0.9f;
    sp.top_k = 50;
    sp.top_p = 0.95f;
    sp.frequency_penalty = 0.3f;
    sp.seed = 1234;
    speculative_matches(&sp);
}

Test(generate, prefix_reuse_identical)
{
    petrel_model *m = open_model();
    char err[1024];
    for (int spec = 0; spec < 2; spec++) {
        petrel_gen_params gp = {.n_predict = 8, .ignore_eos = true, .speculative = spec};
        petrel_gen_result res;
        tu_tokens first, fresh, reused;
        petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
        cr_assert(c, "%s", err);
        gen(m, c, prompt, NP, gp, &first, &res);
        // Follow-up prompt: the first prompt, the reply, and new tokens.
        petrel_token p2[64];
        int n2 = 0;
        for (int i = 0; i < NP; i++)
            p2[n2++] = prompt[i];
        for (int i = 0; i < first.n; i++)
            p2[n2++] = first.t[i];
        p2[n2++] = 33;
        p2[n2++] = 44;
        gp.reuse_prefix = true;
        gen(m, c, p2, n2, gp, &reused, &res);
        cr_expect_lt(res.n_prefilled, n2 - NP, "spec=%d: prefilled %d of %d", spec, res.n_prefilled, n2);
        gen(m, NULL, p2, n2, gp, &fresh, &res);
        cr_expect_eq(res.n_prefilled, n2);
        tu_expect_same_tokens(&fresh, &reused, spec ? "prefix reuse (speculative)" : "prefix reuse");
        petrel_context_free(c);
    }
    petrel_model_close(m);
}

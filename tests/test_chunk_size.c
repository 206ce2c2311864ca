// tests/test_chunk_size.c — the prefill chunk size (n_batch) chosen from the
// RAM budget when none is given: at most 512 when every expert fits the
// budget; under a tight budget smaller than under a looser one, a multiple
// of 16, and a prefill of a whole chunk (every position's logits) keeps the
// peak RSS within the budget; a given n_batch is kept as it is.
#include <criterion/criterion.h>
#include <stdlib.h>

#include "petrel.h"
#include "tests/testutil.h"

static petrel_model *open_with(const char *path, uint64_t budget)
{
    petrel_model_params mp = petrel_model_default_params();
    mp.no_usage = true;
    mp.ram_budget = budget;
    mp.n_threads = 2;
    char err[1024] = "";
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

static uint32_t chunk_for(const char *path, uint64_t budget, uint32_t given)
{
    petrel_model *m = open_with(path, budget);
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = given;
    char err[1024] = "";
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    cr_assert(c, "%s", err);
    const uint32_t nb = petrel_context_n_batch(c);
    petrel_context_free(c);
    petrel_model_close(m);
    return nb;
}

Test(chunk_size, from_the_budget)
{
    char *path = tu_synth_model("small");
    petrel_model *m = open_with(path, 0);
    const uint64_t trunk = petrel_model_trunk_bytes(m);
    petrel_model_close(m);
    // everything fits: the resident cap
    cr_assert_eq(chunk_for(path, 8ull << 30, 0), 512);
    cr_assert_eq(chunk_for(path, 8ull << 30, 7), 7, "a given n_batch is kept");
    const uint64_t tight = trunk + (160u << 20), loose = trunk + (400u << 20);
    const uint32_t a = chunk_for(path, tight, 0), b = chunk_for(path, loose, 0);
    cr_assert(a >= 16 && a % 16 == 0 && a < b, "tight budget: %u, looser: %u", a, b);
    free(path);
}

Test(chunk_size, a_whole_chunk_fits_the_budget)
{
    char *path = tu_synth_model("small");
    petrel_model *m0 = open_with(path, 0);
    const uint64_t budget = petrel_model_trunk_bytes(m0) + (160u << 20);
    petrel_model_close(m0);
    petrel_model *m = open_with(path, budget);
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 2048;
    char err[1024] = "";
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    cr_assert(c, "%s", err);
    const int nb = (int)petrel_context_n_batch(c);
    petrel_token *t = malloc(sizeof *t * (size_t)nb);
    for (int i = 0; i < nb; i++)
        t[i] = (petrel_token)((i * 7919 + 13) % petrel_model_n_vocab(m));
    cr_assert_eq(petrel_decode(c, t, NULL, nb, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    petrel_stats st;
    petrel_get_stats(c, &st);
    cr_assert(st.peak_rss_bytes <= budget, "chunk of %d: peak RSS %llu > budget %llu", nb,
              (unsigned long long)st.peak_rss_bytes, (unsigned long long)budget);
    free(t);
    petrel_context_free(c);
    petrel_model_close(m);
    free(path);
}

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

// The chunk a context gets under `budget`, or 0 when the budget is refused
// as too small (the context measures what the process already holds, and a
// sanitizer build holds more: the caller then moves the budget up).
static uint32_t chunk_try(const char *path, uint64_t budget, uint32_t given, char *err, size_t errsz)
{
    petrel_model *m = open_with(path, budget);
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = given;
    petrel_context *c = petrel_context_new(m, &cp, err, errsz);
    const uint32_t nb = c ? petrel_context_n_batch(c) : 0;
    petrel_context_free(c);
    petrel_model_close(m);
    return nb;
}

static uint32_t chunk_for(const char *path, uint64_t budget, uint32_t given)
{
    char err[1024] = "";
    const uint32_t nb = chunk_try(path, budget, given, err, sizeof err);
    cr_assert(nb, "%s", err);
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
    // the tightest of trunk + 160, 192, ... MiB that a context accepts, and
    // 240 MiB above it
    char err[1024] = "";
    uint64_t tight = trunk + (160u << 20);
    uint32_t a = 0;
    while (!(a = chunk_try(path, tight, 0, err, sizeof err)) && tight < trunk + (1ull << 30))
        tight += 32u << 20;
    cr_assert(a, "no budget up to trunk + 1 GiB accepted: %s", err);
    const uint64_t loose = tight + (240u << 20);
    const uint32_t b = chunk_for(path, loose, 0);
    cr_assert(a >= 16 && a % 16 == 0 && a <= b, "tight budget: %u, looser: %u", a, b);
#ifndef __SANITIZE_ADDRESS__
    cr_assert(a < b, "tight budget: %u, looser: %u", a, b);
#else
    // under ASan the process's own shadow and quarantine count in the RSS the
    // context measures, so the tightest accepted budget may already hold every
    // expert (chunk 512); the strict comparison is the plain build's
    cr_assert(a < b || (a == 512 && b == 512), "tight budget: %u, looser: %u", a, b);
#endif
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

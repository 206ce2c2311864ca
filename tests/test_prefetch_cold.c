// tests/test_prefetch_cold.c — the prefetch confidence cut's cold check
// (cache/ecache.c, cold_factor): once the recent demand uses are all hits on
// experts resident before they were predicted (the cache holds the working
// set), a prediction of an absent expert is not read however confident, and
// reads resume once uses need reads again. Against the margin tables alone,
// which would read each of these predictions (their bin's chance is at
// least its prior of 1/2 or 2/5, above the bar of 1/4); and the engine's
// second pass over the same tokens, every use a hit, reads nothing.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/ecache.h"
#include "engine/context.h"
#include "io/reader.h"
#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_ecache.h"

#define NE 4
#define SLICE 4096

typedef struct fx {
    tu_ecache_file file;
    pt_ecache_layer_src src[2];
} fx;

// Two MoE layers of NE experts, slices of SLICE bytes of zeros.
static void fx_open(fx *f)
{
    const uint64_t bytes[3] = {SLICE, SLICE, SLICE};
    uint64_t off = 0;
    for (int l = 0; l < 2; l++)
        off = tu_ecache_layer(&f->src[l], NE, off, bytes, 0);
    tu_ecache_file_open(&f->file, "pfcold", off, NULL, PT_IO_BUFFERED);
}

static void fx_close(fx *f) { tu_ecache_file_close(&f->file); }

// One decode step of layer l using expert e: demand, wait, release.
static void use(pt_ecache *c, int l, int e)
{
    const void *w[3];
    pt_err err;
    cr_assert_eq(pt_ecache_acquire(c, l, e, w, &err), 0, "%s", err.msg);
    pt_ecache_release(c, l, e);
}

static void drain(pt_ecache *c)
{
    pt_err err;
    int il, e;
    while (pt_ecache_wait(c, &il, &e, &err) > 0) {
    }
}

static bool resident(const pt_ecache *c, int l, int e) { return pt_ecache_is_ready(c, l, e) || pt_ecache_is_loading(c, l, e); }

Test(prefetch_cold, no_reads_while_the_cache_holds_the_working_set)
{
    fx f;
    fx_open(&f);
    pt_err err;
    // Two slots a layer; plain decayed counts (no next-aware victim bar:
    // the cold check alone decides).
    pt_ecache_cfg cfg = {.reader = f.file.rd, .path = f.file.path, .n_layers = 2, .layers = f.src,
                         .slots_per_layer = 2, .halflife = 32, .n_used = 1, .no_next = true};
    pt_ecache *c = pt_ecache_new(&cfg, &err);
    cr_assert(c, "%s", err.msg);

    // A fresh cache is cold: a confident prediction of an absent expert is read.
    cr_assert_eq(pt_ecache_prefetch(c, 0, 2, 0.4f, &err), PT_EC_LOADING, "cold cache: prediction not read");
    drain(c);
    use(c, 0, 2); // (used: the bin of +0.4 learns a use)

    // The working set {0, 1} of both layers, used for 100 steps: every use
    // after the first is a hit on a resident expert.
    for (int t = 0; t < 100; t++)
        for (int l = 0; l < 2; l++)
            use(c, l, t % 2);
    const pt_ecache_layer_stats *s0 = pt_ecache_lstats(c, 0);
    cr_assert_eq(s0->misses, 2, "layer 0: %llu misses (0 and 1 once; 2 was prefetched)", (unsigned long long)s0->misses);
    cr_assert(!resident(c, 0, 3) && !resident(c, 1, 3));

    // Confident predictions of absent experts are not read now.
    for (int l = 0; l < 2; l++) {
        const uint64_t reads = pt_ecache_lstats(c, l)->prefetch_reads;
        cr_assert_eq(pt_ecache_prefetch(c, l, 3, 0.4f, &err), PT_EC_SKIPPED, "layer %d: all-hit: read", l);
        cr_assert_eq(pt_ecache_lstats(c, l)->prefetch_reads, reads);
        cr_assert(!resident(c, l, 3));
    }
    // A prediction of a resident expert still counts (no read needed).
    cr_assert_eq(pt_ecache_prefetch(c, 0, 0, 0.4f, &err), PT_EC_READY);

    // Layer 1 now misses on every step (4 experts through 2 slots): within
    // a few such uses, layer 0's confident predictions are read again.
    bool read_again = false;
    for (int t = 0; t < 12 && !read_again; t++) {
        use(c, 1, 2 + t % 2);
        use(c, 1, t % 2);
        const int r = pt_ecache_prefetch(c, 0, 3, 0.4f, &err);
        cr_assert(r >= 0, "%s", err.msg);
        read_again = r == PT_EC_LOADING;
        drain(c);
    }
    cr_assert(read_again, "uses miss again, yet absent predictions stay unread");
    pt_ecache_free(c);
    fx_close(&f);
}

// The engine through the same check ("small" synthetic model, 40 expert
// slots per MoE layer of 64, prefetch depth 1): a pass of 8 tokens decoded
// one at a time, then the same 8 tokens again from position 0 (every
// expert the second pass uses is still resident). From the second pass's
// 5th token on, nothing is read; with the check off (cold bar 0) the same
// tokens do read predictions (so the scenario has absent predictions to
// refuse). Both second passes' logits equal the first pass's bit for bit.
// Returns the prefetch reads of tokens 5..8 of the second pass.
static uint64_t second_pass_reads(const char *path, double cold_bar)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.experts_per_layer = 40;
    mp.prefetch_depth = 1;
    mp.no_usage = true;
    mp.no_hot_store = true;
    mp.n_threads = 1;
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "open: %s", err);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "context: %s", err);
    pt_ecache_set_cold_bar(c->ecache, cold_bar);
    const int V = petrel_model_n_vocab(m), N = 8;
    float *ref = malloc(sizeof(float) * (size_t)V * N);
    petrel_token t[8];
    for (int i = 0; i < N; i++)
        t[i] = (petrel_token)((i * 7919 + 13) % V);
    uint64_t reads = 0;
    for (int pass = 0; pass < 2; pass++) {
        petrel_kv_truncate(c, 0);
        for (int i = 0; i < N; i++) {
            if (pass == 1 && i == 4)
                petrel_reset_stats(c);
            cr_assert_eq(petrel_decode(c, &t[i], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
            const float *l = petrel_get_logits(c, 0);
            if (pass == 0)
                memcpy(ref + (size_t)i * V, l, sizeof(float) * (size_t)V);
            else
                cr_assert(!memcmp(ref + (size_t)i * V, l, sizeof(float) * (size_t)V),
                          "cold bar %.2f: token %d's logits differ between the passes", cold_bar, i);
        }
    }
    petrel_stats s;
    petrel_get_stats(c, &s);
    cr_assert_eq(s.expert_misses, 0, "cold bar %.2f: %llu misses in the second pass", cold_bar,
                 (unsigned long long)s.expert_misses);
    reads = s.prefetch_reads;
    free(ref);
    petrel_context_free(c);
    petrel_model_close(m);
    return reads;
}

Test(prefetch_cold, engine_second_pass_reads_nothing)
{
    char *path = tu_synth_model("small");
    const uint64_t with = second_pass_reads(path, PT_EC_PF_COLD), without = second_pass_reads(path, 0);
    cr_log_info("second pass, tokens 5-8: %llu prefetch reads with the cold check, %llu without",
                (unsigned long long)with, (unsigned long long)without);
    cr_assert_eq(with, 0, "%llu prefetch reads with every use a hit", (unsigned long long)with);
    cr_assert(without > 0, "without the check the same tokens read nothing either: the test shows nothing");
    free(path);
}

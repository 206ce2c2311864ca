// tests/test_cache.c — the expert cache (cache/ecache.h) on a file of known
// bytes: slices at unaligned offsets come back exact; nothing pinned or
// still loading is evicted (NOROOM instead); the LRU bytes never exceed the
// global budget and a layer below its share takes slots from one above it;
// hot-store experts are never evicted; the usage file round-trips and picks
// the hottest experts.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/ecache.h"
#include "cache/usage.h"
#include "io/reader.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_ecache.h"

#define NE 4
static unsigned char byte_at(uint64_t pos) { return (unsigned char)((pos * 2654435761u) >> 11); }

typedef struct fx {
    tu_ecache_file file;
    pt_ecache_layer_src src[2];
} fx;

// Two MoE layers of NE experts; slices of 5000/6000/7000 bytes at odd offsets.
static void fx_open(fx *f, int io)
{
    const uint64_t bytes[3] = {5000, 6000, 7000};
    uint64_t off = 100;
    for (int l = 0; l < 2; l++)
        off = tu_ecache_layer(&f->src[l], NE, off, bytes, 12);
    tu_ecache_file_open(&f->file, "cache", off + 50, byte_at, (pt_io_mode)io);
}

static void fx_close(fx *f) { tu_ecache_file_close(&f->file); }

static pt_ecache *mk(fx *f, int slots, uint64_t budget, const int32_t *hot, int n_hot)
{
    pt_err err;
    pt_ecache_cfg cfg = {.reader = f->file.rd, .path = f->file.path, .n_layers = 2, .layers = f->src,
                         .slots_per_layer = slots, .budget_bytes = budget, .hot = hot, .n_hot = n_hot};
    pt_ecache *c = pt_ecache_new(&cfg, &err);
    cr_assert(c, "%s", err.msg);
    return c;
}

static void check_bytes(fx *f, int l, int e, const void *w[3]) { tu_ecache_check_slices(&f->src[l], l, e, w, byte_at); }

static void get(pt_ecache *c, fx *f, int l, int e)
{
    const void *w[3];
    pt_err err;
    cr_assert_eq(pt_ecache_acquire(c, l, e, w, &err), 0, "%s", err.msg);
    check_bytes(f, l, e, w);
    pt_ecache_release(c, l, e);
}

Test(cache, exact_bytes_every_backend)
{
    for (int io = PT_IO_URING; io <= PT_IO_BUFFERED; io++) {
        fx f;
        fx_open(&f, io);
        pt_ecache *c = mk(&f, 1, 0, NULL, 0);
        for (int l = 0; l < 2; l++)
            for (int e = 0; e < NE; e++)
                get(c, &f, l, e);
        pt_ecache_free(c);
        fx_close(&f);
    }
}

Test(cache, pinned_and_loading_are_never_evicted)
{
    fx f;
    fx_open(&f, PT_IO_URING);
    pt_ecache *c = mk(&f, 1, 0, NULL, 0);
    pt_err err;
    cr_assert_eq(pt_ecache_request(c, 0, 1, PT_EC_DEMAND, &err), PT_EC_LOADING);
    // the only slot is loading: no room for another expert
    cr_assert_eq(pt_ecache_request(c, 0, 2, PT_EC_DEMAND, &err), PT_EC_NOROOM);
    int l, e;
    cr_assert_eq(pt_ecache_wait(c, &l, &e, &err), 1);
    cr_assert(l == 0 && e == 1 && pt_ecache_is_ready(c, 0, 1));
    const void *w[3];
    pt_ecache_pin(c, 0, 1, w);
    check_bytes(&f, 0, 1, w);
    // pinned: still no room
    cr_assert_eq(pt_ecache_request(c, 0, 2, PT_EC_RETRY, &err), PT_EC_NOROOM);
    cr_assert_eq(pt_ecache_request(c, 0, 2, PT_EC_PREFETCH, &err), PT_EC_NOROOM);
    pt_ecache_release(c, 0, 1);
    cr_assert_eq(pt_ecache_request(c, 0, 2, PT_EC_RETRY, &err), PT_EC_LOADING);
    cr_assert(!pt_ecache_is_ready(c, 0, 1));
    cr_assert_eq(pt_ecache_wait(c, &l, &e, &err), 1);
    cr_assert_eq(pt_ecache_wait(c, &l, &e, &err), 0);
    pt_ecache_layer_stats *s = pt_ecache_lstats(c, 0);
    cr_assert_eq(s->misses, 2); // the retry is not counted again
    pt_ecache_free(c);
    fx_close(&f);
}

Test(cache, global_budget_is_shared_and_never_exceeded)
{
    fx f;
    fx_open(&f, PT_IO_POOL);
    const uint64_t sb = pt_ecache_slot_bytes_for(&f.src[0]);
    pt_ecache *c = mk(&f, 0, 3 * sb, NULL, 0); // share: 1 slot per layer
    cr_assert_eq(pt_ecache_slots(c, 0), 1);
    // layer 0 alone may use the whole budget
    for (int e = 0; e < 3; e++)
        get(c, &f, 0, e);
    cr_assert_eq(pt_ecache_bytes(c), 3 * sb);
    for (int e = 0; e < 3; e++)
        cr_assert(pt_ecache_is_ready(c, 0, e));
    // layer 1 (below its share) takes layer 0's least recently used slot
    get(c, &f, 1, 0);
    cr_assert_leq(pt_ecache_bytes(c), 3 * sb);
    cr_assert(!pt_ecache_is_ready(c, 0, 0) && pt_ecache_is_ready(c, 0, 1) && pt_ecache_is_ready(c, 0, 2));
    // layer 1 at its share evicts its own LRU from now on
    get(c, &f, 1, 1);
    cr_assert(!pt_ecache_is_ready(c, 1, 0) && pt_ecache_is_ready(c, 1, 1));
    cr_assert(pt_ecache_is_ready(c, 0, 1) && pt_ecache_is_ready(c, 0, 2));
    cr_assert_leq(pt_ecache_bytes(c), 3 * sb);
    pt_ecache_free(c);
    fx_close(&f);
}

Test(cache, hot_store_is_never_evicted)
{
    fx f;
    fx_open(&f, PT_IO_URING);
    const int32_t hot[2] = {0, 3};
    pt_ecache *c = mk(&f, 1, 0, hot, 1);
    get(c, &f, 0, 3);
    for (int round = 0; round < 2; round++)
        for (int e = 0; e < 3; e++)
            get(c, &f, 0, e);
    cr_assert(pt_ecache_is_ready(c, 0, 3));
    get(c, &f, 0, 3);
    pt_ecache_layer_stats *s = pt_ecache_lstats(c, 0);
    cr_assert_eq(s->hits_hot, 1);
    cr_assert_eq(pt_ecache_hot_bytes(c), pt_ecache_slot_bytes_for(&f.src[0]));
    pt_ecache_free(c);
    fx_close(&f);
}

Test(cache, usage_file_round_trip_and_hot_pick)
{
    char *dir = tu_tmpdir("usage");
    char path[512];
    snprintf(path, sizeof path, "%s/m.usage", dir);
    pt_ecache_layer_src src[2] = {{.n_expert = 4, .bytes = {4096, 4096, 4096}}, {.n_expert = 4, .bytes = {4096, 4096, 4096}}};
    uint64_t add[8] = {1, 0, 5, 0, 0, 9, 0, 2}, got[12]; // 12: the 3x4 load below
    pt_err err;
    cr_assert_eq(pt_usage_load(path, 2, 4, got), 0); // missing
    cr_assert_eq(pt_usage_merge_save(path, 2, 4, add, &err), 0, "%s", err.msg);
    cr_assert_eq(pt_usage_merge_save(path, 2, 4, add, &err), 0, "%s", err.msg);
    cr_assert_eq(pt_usage_load(path, 2, 4, got), 1);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(got[i], 2 * add[i]);
    cr_assert_eq(pt_usage_load(path, 3, 4, got), 0); // other shape: ignored
    int32_t hot[16];
    const uint64_t sb = pt_ecache_slot_bytes_for(&src[0]);
    uint64_t counts[8] = {2, 0, 10, 0, 0, 18, 0, 4};
    int n = pt_usage_pick_hot(counts, 2, 4, src, 2 * sb, hot);
    cr_assert_eq(n, 2);
    cr_assert(hot[0] == 1 && hot[1] == 1 && hot[2] == 0 && hot[3] == 2, "picked (%d,%d) (%d,%d)", hot[0], hot[1],
              hot[2], hot[3]);
    tu_rmrf(dir);
    free(dir);
}

// Next-aware eviction: experts used in the cycle 0 1 2 0 1 2 ... with two
// slots. Least recent (or least used) first misses every time (the victim
// is always the next one needed); the transitions 0->1, 1->2, 2->0 learned
// online keep the expert that follows the one just used, so after the first
// cycles every other step hits (the misses alternate with hits).
static int cycle_hits(fx *f, bool no_next)
{
    pt_err err;
    pt_ecache_cfg cfg = {.reader = f->file.rd, .path = f->file.path, .n_layers = 2, .layers = f->src,
                         .slots_per_layer = 2, .halflife = 1000, .n_used = 1, .no_next = no_next};
    pt_ecache *c = pt_ecache_new(&cfg, &err);
    cr_assert(c, "%s", err.msg);
    for (int i = 0; i < 30; i++) {
        const void *w[3];
        cr_assert_eq(pt_ecache_acquire(c, 0, i % 3, w, &err), 0, "%s", err.msg);
        check_bytes(f, 0, i % 3, w);
        pt_ecache_release(c, 0, i % 3);
    }
    const pt_ecache_layer_stats *s = pt_ecache_lstats(c, 0);
    cr_assert_eq(s->hits_lru + s->misses, 30);
    int hits = (int)s->hits_lru;
    pt_ecache_free(c);
    return hits;
}

Test(cache, next_aware_eviction_learns_transitions)
{
    fx f;
    fx_open(&f, PT_IO_BUFFERED);
    const int plain = cycle_hits(&f, true), aware = cycle_hits(&f, false);
    cr_assert_eq(plain, 0, "decayed uses alone: %d hits", plain);
    cr_assert(aware >= 12 && aware <= 15, "next-aware: %d hits of 30 (15 at most: a miss before every hit)", aware);
    fx_close(&f);
}

// The confidence cut (pt_ecache_prefetch): each step predicts a "good"
// expert far above the router's boundary (margin +0.4), which the step then
// uses, and a "bad" one below it (-0.3), which it never uses. A bin's
// chance is (used + 4 x prior) / (made + 4), prior 1/4 below the boundary:
// 0.25 before any outcome (read: the bar is 1/4), 1/5 once one bad
// prediction has been scored (at the open of the step after its own), so
// from the third step on no bad prediction starts a read, while every good
// one is read or already resident.
Test(cache, prefetch_confidence_cut_learns_from_outcomes)
{
    fx f;
    fx_open(&f, PT_IO_BUFFERED);
    pt_err err;
    pt_ecache_cfg cfg = {.reader = f.file.rd, .path = f.file.path, .n_layers = 2, .layers = f.src,
                         .slots_per_layer = 2, .halflife = 32, .n_used = 1};
    pt_ecache *c = pt_ecache_new(&cfg, &err);
    cr_assert(c, "%s", err.msg);
    int bad_reads = 0, bad_skipped = 0;
    for (int t = 0; t < 12; t++) {
        const int good = t % 2, bad = 2 + t % 2;
        const bool had = pt_ecache_is_ready(c, 0, bad) || pt_ecache_is_loading(c, 0, bad);
        int rg = pt_ecache_prefetch(c, 0, good, 0.4f, &err);
        int rb = pt_ecache_prefetch(c, 0, bad, -0.3f, &err);
        cr_assert(rg == PT_EC_READY || rg == PT_EC_LOADING, "step %d: good prediction not read (%d)", t, rg);
        cr_assert(rb >= 0, "%s", err.msg);
        if (!had && rb == PT_EC_LOADING) {
            bad_reads++;
            cr_assert(t < 2, "step %d: a bad prediction was read after its bin had an outcome", t);
        }
        bad_skipped += rb == PT_EC_SKIPPED;
        int il, e;
        while (pt_ecache_wait(c, &il, &e, &err) > 0) {
        }
        const uint64_t hp = pt_ecache_lstats(c, 0)->hits_prefetch;
        get(c, &f, 0, good);
        cr_assert_eq(pt_ecache_lstats(c, 0)->hits_prefetch, hp + (rg == PT_EC_LOADING), "step %d", t);
    }
    cr_assert(bad_reads >= 1 && bad_skipped >= 5, "bad: %d read, %d skipped", bad_reads, bad_skipped);
    pt_ecache_free(c);
    fx_close(&f);
}

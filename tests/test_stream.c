// tests/test_stream.c — the placement invariant of expert streaming: logits
// are bit-identical (memcmp) to the run with every expert cached, for every
// combination of cache budget (one expert per layer .. everything, slot and
// byte budgets), hot-store on/off, lookahead prefetch on/off and I/O backend
// (io_uring, pread pool, buffered), on tiny-dsv3 and on the "small"
// synthetic model; incremental decode and whole batches (whose next block's
// experts are read ahead with the prefetch on). Also: injected
// transient read faults leave the logits unchanged, persistent ones fail the
// decode with a message naming layer, expert, file and offset; the
// statistics add up; the usage file feeds the hot-store.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fault.h"
#include "engine/context.h"
#include "engine/stream.h"
#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_fault.h"

typedef struct cfg {
    int slots;             // experts_per_layer (0: byte budget)
    uint64_t cache;        // expert_cache bytes (0: all)
    bool hot;              // hot-store from the usage file
    int prefetch;          // 0: off, else blocks predicted ahead
    int io;                // PETREL_IO_*
    int threads;           // 0: 1
} cfg;

static char *usage_dir;

static char *small_model(void) { return tu_synth_model("small"); }

static petrel_model *open_model(const char *path, const cfg *k, const char *usage)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.experts_per_layer = k->slots;
    mp.expert_cache = k->cache;
    mp.no_prefetch = !k->prefetch;
    mp.prefetch_depth = k->prefetch;
    mp.io_mode = k->io;
    mp.no_hot_store = !k->hot;
    mp.pin_bytes = k->hot ? (64u << 20) : 0;
    mp.usage_path = usage;
    mp.no_usage = usage == NULL;
    mp.n_threads = k->threads > 0 ? k->threads : 1; // (1 mostly: keeps OpenMP from spinning on a busy box)
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "open: %s", err);
    return m;
}

// Tokens 0..n-1 of a fixed pseudo-random sequence.
static void tokens(petrel_token *t, int n, int vocab)
{
    uint64_t s = 99;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (petrel_token)((s >> 33) % (uint64_t)vocab);
    }
}

// Logits of n tokens: the first half as one batch, then one at a time.
static float *run(const char *path, const cfg *k, const char *usage, int n, petrel_stats *st_out)
{
    petrel_model *m = open_model(path, k, usage);
    char err[1024];
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "context: %s", err);
    const int V = petrel_model_n_vocab(m);
    petrel_token t[64];
    tokens(t, n, V);
    float *out = malloc(sizeof(float) * (size_t)V * (size_t)n);
    const int h = n / 2;
    cr_assert_eq(petrel_decode(c, t, NULL, h, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    for (int i = 0; i < h; i++)
        memcpy(out + (size_t)i * V, petrel_get_logits(c, i), sizeof(float) * (size_t)V);
    for (int i = h; i < n; i++) {
        cr_assert_eq(petrel_decode(c, &t[i], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
        memcpy(out + (size_t)i * V, petrel_get_logits(c, 0), sizeof(float) * (size_t)V);
    }
    if (st_out)
        petrel_get_stats(c, st_out);
    petrel_context_free(c);
    petrel_model_close(m);
    return out;
}

// Budget b of a grid (b < n_slots + n_caches) on top of k: slots[b] experts
// per layer for b < n_slots, else the byte budget caches[b - n_slots].
static cfg budget_at(cfg k, int b, const int *slots, int n_slots, const uint64_t *caches)
{
    if (b < n_slots)
        k.slots = slots[b];
    else
        k.cache = caches[b - n_slots];
    return k;
}

// The budgets of the grid with prefetch and two threads, under the
// environment setting name=value (an engine switch read at stream init):
// the logits must be want's (V per token), and predictions are read.
// Returns the runs.
static int grid_under_env(const char *path, int n, const uint64_t *caches, int n_caches, const int *slots,
                          int n_slots, const float *want, size_t V, const char *name, const char *value)
{
    petrel_stats st;
    setenv(name, value, 1);
    for (int b = 0; b < n_caches + n_slots; b++) {
        cfg k = budget_at((cfg){.prefetch = 1, .io = PETREL_IO_URING, .threads = 2}, b, slots, n_slots, caches);
        float *got = run(path, &k, NULL, n, &st);
        cr_assert(memcmp(got, want, sizeof(float) * V * (size_t)n) == 0,
                  "%s: logits differ with %s=%s (slots %d cache %llu)", path, name, value, k.slots,
                  (unsigned long long)k.cache);
        cr_assert(st.prefetch_actual > 0);
        free(got);
    }
    unsetenv(name);
    return n_caches + n_slots;
}

// Runs the grid of configurations against the all-cached reference.
static void check_grid(const char *path, int n, const uint64_t *caches, int n_caches, const int *slots, int n_slots)
{
    char usage[512];
    snprintf(usage, sizeof usage, "%s/usage", usage_dir);
    cfg ref = {.io = PETREL_IO_AUTO};
    petrel_stats st;
    // The reference run also records routing heat for the hot-store runs.
    float *want = run(path, &ref, usage, n, &st);
    cr_assert_eq(st.expert_misses > 0, 1);
    struct stat sb;
    cr_assert_eq(stat(usage, &sb), 0, "the usage file was not written");
    petrel_model *m = open_model(path, &ref, NULL);
    const size_t V = (size_t)petrel_model_n_vocab(m);
    // the first half, one batch, is read ahead when its rows choose each
    // expert twice on average (engine/stream.h)
    const bool ahead = (uint64_t)(n / 2) * m->hp.n_expert_used >= 2 * (uint64_t)m->hp.n_expert;
    petrel_model_close(m);
    const int ios[3] = {PETREL_IO_URING, PETREL_IO_POOL, PETREL_IO_BUFFERED};
    int runs = 0;
    for (int b = 0; b < n_caches + n_slots; b++)
        for (int hot = 0; hot < 2; hot++)
            for (int pf = 0; pf < 3; pf++)
                for (int io = 0; io < 3; io++) {
                    cfg k = budget_at((cfg){.hot = hot, .prefetch = pf, .io = ios[io]}, b, slots, n_slots, caches);
                    float *got = run(path, &k, hot ? usage : NULL, n, &st);
                    cr_assert(memcmp(got, want, sizeof(float) * V * (size_t)n) == 0,
                              "%s: logits differ (slots %d cache %llu hot %d prefetch %d io %d)", path, k.slots,
                              (unsigned long long)k.cache, hot, pf, k.io);
                    cr_assert_eq(st.io_mode, k.io);
                    if (hot)
                        cr_assert(st.hot_store_bytes > 0 && st.expert_hits_hot > 0,
                                  "hot-store unused (slots %d cache %llu)", k.slots, (unsigned long long)k.cache);
                    if (pf)
                        cr_assert(st.prefetch_actual > 0 && st.prefetch_correct <= st.prefetch_actual);
                    else
                        cr_assert_eq(st.prefetch_reads, 0);
                    // the next block's experts read ahead (prefetch on only)
                    if (pf && !hot && ahead)
                        cr_assert(st.prefill_ahead_reads > 0, "no read-ahead (slots %d cache %llu)", k.slots,
                                  (unsigned long long)k.cache);
                    else if (!pf || !ahead)
                        cr_assert_eq(st.prefill_ahead_reads, 0);
                    cr_assert_eq(st.expert_hits, st.expert_hits_lru + st.expert_hits_hot + st.expert_hits_prefetch);
                    free(got);
                    runs++;
                }
    // Two threads: ready experts of a token are computed side by side, in
    // groups that depend on when their reads finish.
    for (int b = 0; b < n_caches + n_slots; b++) {
        cfg k = budget_at((cfg){.hot = 1, .prefetch = 1, .io = PETREL_IO_URING, .threads = 2}, b, slots, n_slots,
                          caches);
        float *got = run(path, &k, usage, n, &st);
        cr_assert(memcmp(got, want, sizeof(float) * V * (size_t)n) == 0,
                  "%s: logits differ with 2 threads (slots %d cache %llu)", path, k.slots, (unsigned long long)k.cache);
        free(got);
        runs++;
    }
    // The fill prefetch (PETREL_PREFETCH_FILL, engine/stream_prefetch.c) with
    // a threshold it always meets: a second block ahead read at every block.
    runs += grid_under_env(path, n, caches, n_caches, slots, n_slots, want, V, "PETREL_PREFETCH_FILL", "1000:8");
    // The disk-bound prefetch bar (engine/stream_prefetch.c) held at its
    // height (only predictions with a chance of use of 0.85 or more read):
    // the same bits.
    runs += grid_under_env(path, n, caches, n_caches, slots, n_slots, want, V, "PETREL_PF_BOUND", "max");
    cr_log_info("%s: %d configurations bit-identical", path, runs);
    free(want);
}

static void setup(void) { usage_dir = tu_tmpdir("stream"); }
static void teardown(void)
{
    tu_rmrf(usage_dir);
    free(usage_dir);
}

TestSuite(stream, .init = setup, .fini = teardown);

Test(stream, tiny_placement_invariance)
{
    char *path = tu_tiny_model("f32");
    // tiny-dsv3 f32: 16 experts per layer; 1 slot, a byte budget of 4 per layer, all 16.
    petrel_model *m = open_model(path, &(cfg){0}, NULL);
    uint64_t sb = pt_ecache_slot_bytes_for(&m->exp_src[1]);
    petrel_model_close(m);
    const uint64_t caches[1] = {sb * 4 * 4}; // 4 blocks with experts (3 MoE + MTP) x 4
    const int slots[2] = {1, 16};
    check_grid(path, 16, caches, 1, slots, 2);
    free(path);
}

Test(stream, small_placement_invariance)
{
    char *path = small_model();
    petrel_model *m = open_model(path, &(cfg){0}, NULL);
    uint64_t sb = pt_ecache_slot_bytes_for(&m->exp_src[1]);
    petrel_model_close(m);
    const uint64_t caches[1] = {sb * 6 * 7};
    const int slots[2] = {1, 64};
    check_grid(path, 12, caches, 1, slots, 2);
    free(path);
}

// Fault injection (the site "read") into the reads of a live context.
static int decode_all(petrel_context *c, const petrel_token *t, int n, float *out, size_t V)
{
    for (int i = 0; i < n; i++) {
        if (petrel_decode(c, &t[i], NULL, 1, PETREL_LOGITS_LAST) < 0)
            return -1;
        if (out)
            memcpy(out + (size_t)i * V, petrel_get_logits(c, 0), sizeof(float) * V);
    }
    return 0;
}

Test(stream, injected_faults)
{
    char *path = tu_tiny_model("f32");
    const int n = 10;
    const int ios[3] = {PETREL_IO_URING, PETREL_IO_POOL, PETREL_IO_BUFFERED};
    cfg all = {.io = PETREL_IO_AUTO};
    petrel_model *m0 = open_model(path, &all, NULL);
    const size_t V = (size_t)petrel_model_n_vocab(m0);
    petrel_model_close(m0);
    petrel_token t[16];
    tokens(t, n, (int)V);
    float *want = calloc(V * n, sizeof(float)), *got = calloc(V * n, sizeof(float));
    {
        petrel_model *m = open_model(path, &all, NULL);
        petrel_context *c = petrel_context_new(m, NULL, NULL, 0);
        cr_assert_eq(decode_all(c, t, n, want, V), 0);
        petrel_context_free(c);
        petrel_model_close(m);
    }
    for (int io = 0; io < 3; io++) {
        cfg k = {.slots = 1, .prefetch = true, .io = ios[io]};
        // Transient: a few failed and short device reads are retried.
        petrel_model *m = open_model(path, &k, NULL);
        petrel_context *c = petrel_context_new(m, NULL, NULL, 0);
        tu_arm_read_faults(4, 2, 3);
        cr_assert_eq(decode_all(c, t, n, got, V), 0, "%s", petrel_context_error(c));
        cr_assert(memcmp(got, want, sizeof(float) * V * n) == 0, "io %d: logits differ under transient faults", k.io);
        cr_assert_gt(pt_fault_injected(), 0, "io %d: no fault was injected", k.io);
        // Persistent: the decode fails with a clear message, no crash.
        tu_arm_read_faults(1, 1u << 30, 0);
        petrel_kv_truncate(c, 0);
        int rc = decode_all(c, t, n, NULL, V);
        const char *msg = petrel_context_error(c);
        cr_assert_eq(rc, -1, "decode succeeded despite failing reads");
        cr_assert(strstr(msg, "layer ") && strstr(msg, "expert ") && strstr(msg, path) && strstr(msg, "offset") &&
                      strstr(msg, "Input/output error"),
                  "message: %s", msg);
        // Once the device is healthy again, the same context works and is exact.
        pt_fault_disarm();
        petrel_kv_truncate(c, 0);
        cr_assert_eq(decode_all(c, t, n, got, V), 0, "%s", petrel_context_error(c));
        cr_assert(memcmp(got, want, sizeof(float) * V * n) == 0, "io %d: logits differ after recovery", k.io);
        petrel_context_free(c);
        petrel_model_close(m);
    }
    free(want);
    free(got);
    free(path);
}

Test(stream, trace_and_layer_stats)
{
    char *path = tu_tiny_model("f32");
    cfg k = {.slots = 2, .prefetch = true};
    petrel_model *m = open_model(path, &k, NULL);
    petrel_context *c = petrel_context_new(m, NULL, NULL, 0);
    char tpath[512];
    snprintf(tpath, sizeof tpath, "%s/trace.txt", usage_dir);
    cr_assert_eq(petrel_trace_open(c, tpath, NULL, 0), 0);
    petrel_token t[8];
    tokens(t, 8, petrel_model_n_vocab(m));
    for (int i = 0; i < 8; i++)
        cr_assert_eq(petrel_decode(c, &t[i], NULL, 1, PETREL_LOGITS_LAST), 0);
    petrel_trace_close(c);
    // Per-layer counters add up to the totals; the dense layer 0 has none.
    petrel_layer_stats ls;
    cr_assert_eq(petrel_get_layer_stats(c, 0, &ls), -1);
    petrel_stats st;
    petrel_get_stats(c, &st);
    uint64_t uses = 0, actual = 0;
    for (int l = 1; l < 4; l++) {
        cr_assert_eq(petrel_get_layer_stats(c, l, &ls), 0);
        uses += ls.hits_lru + ls.hits_hot + ls.hits_prefetch + ls.misses;
        actual += ls.actual;
        cr_assert_leq(ls.predicted_correct, ls.actual);
    }
    cr_assert_eq(uses, 8 * 3 * 4); // 8 tokens x 3 MoE layers x top-4
    cr_assert_eq(uses, st.expert_hits + st.expert_misses);
    cr_assert_eq(actual, 8 * 3 * 4); // every MoE block gets predictions (block 1 from the dense block 0)
    // The trace: a header, 8 x 3 'A' lines with 4 ids, 8 x 3 'P' lines.
    size_t len;
    char *txt = tu_read(tpath, &len);
    cr_assert(txt && !strncmp(txt, "petrel-trace 1", 14));
    int na = 0, np = 0;
    for (char *p = txt; (p = strchr(p, '\n')); p++) {
        na += p[1] == 'A';
        np += p[1] == 'P';
    }
    cr_assert_eq(na, 24);
    cr_assert_eq(np, 24);
    free(txt);
    petrel_context_free(c);
    petrel_model_close(m);
    free(path);
}

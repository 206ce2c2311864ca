// tests/test_decode_multi.c — petrel_decode_multi gives every context exactly
// what petrel_decode gives it alone. The reference is each conversation run
// by itself (its own model and context, one token per petrel_decode call);
// the multi-context run prefills the same prompts into contexts sharing one
// expert cache and then steps them together, in changing subsets and orders,
// with small and large expert caches, on every kernel path the CPU has. The
// logits, the MTP logits after a step and the routed experts must be equal
// bit for bit, and the batched step must fetch fewer experts than its rows use.
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "petrel.h"
#include "tests/testutil.h"

#define NCONV 8  // conversations
#define NSTEP 6  // decode steps after the prompts
#define MAXP 16  // longest prompt

static const int plen[NCONV] = {1, 5, 11, 16, 3, 8, 13, 2}; // different lengths: different positions per row

static petrel_token prompt_tok(int conv, int t, int n_vocab) { return (petrel_token)((conv * 131 + t * 37 + 7) % n_vocab); }

// The token the MTP block is given after position p of conversation conv.
static petrel_token mtp_next(int conv, int p, int n_vocab) { return (petrel_token)((p * 11 + conv) % n_vocab); }

// Runs the MTP block over the n entries of c's last batch (positions p0..),
// as generation does, so that its KV cache has no gap.
static void mtp_fill(petrel_context *c, int conv, int p0, int n, int n_vocab)
{
    int idx[MAXP];
    petrel_token nx[MAXP];
    for (int j = 0; j < n; j++) {
        idx[j] = j;
        nx[j] = mtp_next(conv, p0 + j, n_vocab);
    }
    cr_assert_eq(petrel_decode_mtp(c, idx, nx, n), 0, "%s", petrel_context_error(c));
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static petrel_model *open_model(const char *path, int threads, int experts_per_layer)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = threads;
    mp.no_usage = true;
    mp.experts_per_layer = experts_per_layer;
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "open %s: %s", path, err);
    return m;
}

// Reference: conversation `conv` alone; logits after the prompt and after
// each of NSTEP greedy tokens (tok[s] = the token fed at step s), and the MTP
// logits of each step's position given the next token.
typedef struct ref {
    float *logits; // (NSTEP + 1, n_vocab)
    float *mtp;    // (NSTEP, n_vocab)
    petrel_token tok[NSTEP + 1];
} ref;

static void run_alone(const char *path, int conv, int n_vocab, ref *r)
{
    petrel_model *m = open_model(path, 2, 0);
    char err[1024];
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "%s", err);
    r->logits = malloc(sizeof(float) * (NSTEP + 1) * (size_t)n_vocab);
    r->mtp = malloc(sizeof(float) * NSTEP * (size_t)n_vocab);
    petrel_token p[MAXP];
    for (int t = 0; t < plen[conv]; t++)
        p[t] = prompt_tok(conv, t, n_vocab);
    // Token by token, as a server decodes (prefill batches are checked elsewhere).
    for (int t = 0; t < plen[conv]; t++) {
        cr_assert_eq(petrel_decode(c, &p[t], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
        mtp_fill(c, conv, t, 1, n_vocab);
    }
    for (int s = 0; s <= NSTEP; s++) {
        const float *lg = petrel_get_logits(c, 0);
        memcpy(r->logits + (size_t)s * n_vocab, lg, sizeof(float) * (size_t)n_vocab);
        r->tok[s] = (petrel_token)argmax(lg, n_vocab);
        if (s == NSTEP)
            break;
        cr_assert_eq(petrel_decode(c, &r->tok[s], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
        mtp_fill(c, conv, plen[conv] + s, 1, n_vocab);
        memcpy(r->mtp + (size_t)s * n_vocab, petrel_get_mtp_logits(c, 0), sizeof(float) * (size_t)n_vocab);
    }
    petrel_context_free(c);
    petrel_model_close(m);
}

// The multi-context run against the references: prompts prefilled one
// context at a time (the first as a batch, to mix in prefill), then NSTEP
// rounds in which every conversation advances once, through
// petrel_decode_multi calls over rotating subsets and orders.
static void run_multi(const char *path, int threads, int experts_per_layer, const ref *refs, int n_vocab)
{
    petrel_model *m = open_model(path, threads, experts_per_layer);
    char err[1024];
    petrel_context *c[NCONV];
    petrel_context_params cp = petrel_context_default_params();
    cp.n_batch = 16;
    c[0] = petrel_context_new(m, &cp, err, sizeof err);
    cr_assert(c[0], "%s", err);
    for (int i = 1; i < NCONV; i++) {
        c[i] = petrel_context_new_shared(c[0], &cp, err, sizeof err);
        cr_assert(c[i], "%s", err);
    }
    for (int i = 0; i < NCONV; i++) {
        petrel_token p[MAXP];
        for (int t = 0; t < plen[i]; t++)
            p[t] = prompt_tok(i, t, n_vocab);
        if (i == 0) {
            cr_assert_eq(petrel_decode(c[i], p, NULL, plen[i], PETREL_LOGITS_ALL), 0);
            mtp_fill(c[i], i, 0, plen[i], n_vocab);
        } else {
            for (int t = 0; t < plen[i]; t++) {
                cr_assert_eq(petrel_decode(c[i], &p[t], NULL, 1, PETREL_LOGITS_LAST), 0);
                mtp_fill(c[i], i, t, 1, n_vocab);
            }
            cr_assert(memcmp(petrel_get_logits(c[i], 0), refs[i].logits, sizeof(float) * (size_t)n_vocab) == 0,
                      "conversation %d: prompt logits differ", i);
        }
    }
    petrel_reset_stats(c[0]);
    for (int s = 0; s < NSTEP; s++) {
        // Round s: the conversations in a rotated order, in groups of
        // 2, 5 or 8 rows (s % 3; remainders of 1 and 3): steps of more
        // than 4 rows are also predicted ahead (engine/stream_prefetch.c).
        int order[NCONV];
        for (int i = 0; i < NCONV; i++)
            order[i] = (i + s) % NCONV;
        if (s % 2)
            for (int i = 0; i < NCONV / 2; i++) {
                int t = order[i];
                order[i] = order[NCONV - 1 - i];
                order[NCONV - 1 - i] = t;
            }
        const int g = 3 * (s % 3) + 2;
        for (int at = 0; at < NCONV; at += g) {
            const int n = NCONV - at < g ? NCONV - at : g;
            petrel_context *cs[NCONV];
            petrel_token tk[NCONV];
            for (int j = 0; j < n; j++) {
                cs[j] = c[order[at + j]];
                tk[j] = refs[order[at + j]].tok[s];
            }
            cr_assert_eq(petrel_decode_multi(cs, tk, n, err, sizeof err), 0, "step %d: %s", s, err);
            for (int j = 0; j < n; j++) {
                const int i = order[at + j];
                cr_assert_eq(petrel_kv_len(cs[j]), plen[i] + s + 1);
                cr_assert_eq(petrel_kv_tokens(cs[j])[plen[i] + s], tk[j]);
                cr_assert_null(petrel_get_logits(cs[j], 1));
                cr_assert(memcmp(petrel_get_logits(cs[j], 0), refs[i].logits + (size_t)(s + 1) * n_vocab,
                                 sizeof(float) * (size_t)n_vocab) == 0,
                          "%s threads %d slots %d: conversation %d step %d (row %d of %d): logits differ from "
                          "decoding it alone",
                          path, threads, experts_per_layer, i, s, j, n);
            }
            for (int j = 0; j < n; j++) {
                    const int i = order[at + j];
                    mtp_fill(cs[j], i, plen[i] + s, 1, n_vocab);
                    cr_assert(memcmp(petrel_get_mtp_logits(cs[j], 0), refs[i].mtp + (size_t)s * n_vocab,
                                     sizeof(float) * (size_t)n_vocab) == 0,
                              "conversation %d step %d: MTP logits differ", i, s);
                }
        }
    }
    // Statistics: every multi step counted, fetches shared (4 of 16 experts
    // per row: rows of one step share some in every block).
    petrel_stats st;
    petrel_get_stats(c[2], &st);
    cr_assert_gt(st.multi_steps, 0);
    cr_assert_eq(st.multi_rows, (uint64_t)NCONV * NSTEP);
    cr_assert_eq(st.multi_max_rows, NCONV);
    cr_assert_lt(st.multi_expert_visits, st.multi_expert_uses, "no expert fetch was shared");
    cr_assert_gt(st.multi_bytes_shared, 0);
    for (int i = NCONV - 1; i >= 0; i--)
        petrel_context_free(c[i]);
    petrel_model_close(m);
}

static void check_model(const char *type, bool all_paths)
{
    char *path = tu_tiny_model(type);
    petrel_model *m = open_model(path, 1, 0);
    const int n_vocab = petrel_model_n_vocab(m);
    cr_assert(petrel_model_has_mtp(m), "tiny-dsv3 has an MTP layer");
    petrel_model_close(m);
    ref refs[NCONV];
    for (int i = 0; i < NCONV; i++)
        run_alone(path, i, n_vocab, &refs[i]);
    run_multi(path, 2, 0, refs, n_vocab); // everything cached
    run_multi(path, 2, 4, refs, n_vocab); // 4 slots per layer: rows' experts stream through the cache
    run_multi(path, 1, 6, refs, n_vocab);
    if (all_paths) {
        const pt_kernel_path paths[] = {PT_PATH_SCALAR, PT_PATH_AVX2, PT_PATH_AVXVNNI, PT_PATH_AVX512};
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            if (!pt_kernel_path_supported(paths[p]))
                continue;
            pt_kernel_set_path(paths[p]);
            ref alt[NCONV];
            for (int i = 0; i < NCONV; i++)
                run_alone(path, i, n_vocab, &alt[i]);
            run_multi(path, 2, 0, alt, n_vocab);
            for (int i = 0; i < NCONV; i++) {
                free(alt[i].logits);
                free(alt[i].mtp);
            }
        }
        pt_kernel_set_path(PT_PATH_AUTO);
    }
    for (int i = 0; i < NCONV; i++) {
        free(refs[i].logits);
        free(refs[i].mtp);
    }
    free(path);
}

Test(decode_multi, f32_bit_identical) { check_model("f32", false); }
Test(decode_multi, default_q8_q4_every_kernel_path) { check_model("default", true); }
// Steps of 5-8 rows predicted ahead even where the cache is too small for
// it to pay (the prefetch then reads and evicts in the middle of steps).
Test(decode_multi, predicted_ahead_in_small_caches)
{
    setenv("PETREL_PREFETCH_MULTI", "8:any", 1);
    check_model("default", false);
}

Test(decode_multi, bad_arguments)
{
    char *path = tu_tiny_model("f32");
    petrel_model *m = open_model(path, 1, 0), *m2 = open_model(path, 1, 0);
    char err[1024];
    petrel_context *a = petrel_context_new(m, NULL, err, sizeof err);
    petrel_context *b = petrel_context_new_shared(a, NULL, err, sizeof err);
    petrel_context *o = petrel_context_new(m2, NULL, err, sizeof err);
    cr_assert(a && b && o);
    petrel_token t[2] = {1, 2};
    petrel_context *dup[2] = {a, a};
    cr_assert_eq(petrel_decode_multi(dup, t, 2, err, sizeof err), -1);
    cr_assert(strstr(err, "appears twice"), "%s", err);
    petrel_context *other[2] = {a, o};
    cr_assert_eq(petrel_decode_multi(other, t, 2, err, sizeof err), -1);
    cr_assert(strstr(err, "another model"), "%s", err);
    petrel_context *ok[2] = {a, b};
    petrel_token bad[2] = {1, 100000};
    cr_assert_eq(petrel_decode_multi(ok, bad, 2, err, sizeof err), -1);
    cr_assert(strstr(err, "context 1 is out of range") || strstr(err, "out of range"), "%s", err);
    cr_assert_eq(petrel_decode_multi(ok, t, 0, err, sizeof err), -1);
    cr_assert_eq(petrel_kv_len(a), 0, "a failed step must not advance a context");
    cr_assert_eq(petrel_kv_len(b), 0);
    cr_assert_eq(petrel_decode_multi(ok, t, 2, err, sizeof err), 0, "%s", err);
    cr_assert_eq(petrel_kv_len(a), 1);
    cr_assert_eq(petrel_kv_len(b), 1);
    petrel_context_free(b);
    petrel_context_free(a);
    petrel_context_free(o);
    petrel_model_close(m);
    petrel_model_close(m2);
    free(path);
}

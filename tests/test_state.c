// tests/test_state.c — context state save/load: continuing after a load
// gives bit-identical logits (trunk and MTP) to a context that never
// stopped; truncated, corrupted and foreign-model states are refused with a
// clear message; the write leaves no temporary file behind.
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "petrel.h"
#include "tests/testutil.h"

#define NP 23 // prompt before the save
#define NQ 9  // continuation after it

static petrel_model *open_model(const char *type)
{
    char err[1024];
    char *path = tu_tiny_model(type);
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 2;
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "open %s: %s", path, err);
    free(path);
    return m;
}

static petrel_context *new_ctx(petrel_model *m)
{
    char err[1024];
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 128;
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    cr_assert(c, "context: %s", err);
    return c;
}

static void tokens(petrel_token *p, petrel_token *q)
{
    for (int i = 0; i < NP; i++)
        p[i] = (petrel_token)((i * 37 + 11) % 500 + 2);
    for (int i = 0; i < NQ + 1; i++)
        q[i] = (petrel_token)((i * 53 + 7) % 500 + 2);
}

// Prefill P and run MTP over it (next tokens P[1..] then Q[0]).
static void phase1(petrel_context *c, const petrel_token *p, const petrel_token *q)
{
    cr_assert_eq(petrel_decode(c, p, NULL, NP, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
    int idx[NP];
    petrel_token nx[NP];
    for (int i = 0; i < NP; i++) {
        idx[i] = i;
        nx[i] = i + 1 < NP ? p[i + 1] : q[0];
    }
    cr_assert_eq(petrel_decode_mtp(c, idx, nx, NP), 0, "%s", petrel_context_error(c));
}

// Decode Q with all logits, then MTP over it; copy logits and MTP logits out.
static void phase2(petrel_context *c, const petrel_token *q, float *lg, float *mtp, int nv)
{
    cr_assert_eq(petrel_decode(c, q, NULL, NQ, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    for (int i = 0; i < NQ; i++)
        memcpy(lg + (size_t)i * nv, petrel_get_logits(c, i), sizeof(float) * (size_t)nv);
    int idx[NQ];
    for (int i = 0; i < NQ; i++)
        idx[i] = i;
    cr_assert_eq(petrel_decode_mtp(c, idx, q + 1, NQ), 0, "%s", petrel_context_error(c));
    for (int i = 0; i < NQ; i++)
        memcpy(mtp + (size_t)i * nv, petrel_get_mtp_logits(c, i), sizeof(float) * (size_t)nv);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(state, resume_is_bit_identical)
{
    petrel_model *m = open_model("q8_0");
    cr_assert(petrel_model_has_mtp(m));
    const int nv = petrel_model_n_vocab(m);
    petrel_token p[NP], q[NQ + 1];
    tokens(p, q);
    float *ref = malloc(sizeof(float) * NQ * nv), *ref_mtp = malloc(sizeof(float) * NQ * nv);
    float *got = malloc(sizeof(float) * NQ * nv), *got_mtp = malloc(sizeof(float) * NQ * nv);

    // Reference: one context that never stops.
    petrel_context *a = new_ctx(m);
    phase1(a, p, q);
    phase2(a, q, ref, ref_mtp, nv);
    petrel_context_free(a);

    // Save after phase 1, load into a fresh context, continue.
    char *dir = tu_tmpdir("state"), path[1024], err[1024];
    snprintf(path, sizeof path, "%s/conv.pkv", dir);
    petrel_context *b = new_ctx(m);
    phase1(b, p, q);
    cr_assert_eq(petrel_state_save(b, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(count_files(dir), 1, "a temporary file was left behind");
    petrel_context_free(b);

    petrel_context *c = new_ctx(m);
    // Some unrelated history that the load must replace.
    petrel_token junk[5] = {9, 8, 7, 6, 5};
    cr_assert_eq(petrel_decode(c, junk, NULL, 5, PETREL_LOGITS_LAST), 0);
    cr_assert_eq(petrel_state_load(c, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(petrel_kv_len(c), NP);
    cr_assert_eq(memcmp(petrel_kv_tokens(c), p, sizeof p), 0, "token history not restored");
    phase2(c, q, got, got_mtp, nv);
    cr_assert_eq(memcmp(got, ref, sizeof(float) * NQ * nv), 0, "logits after a load differ");
    cr_assert_eq(memcmp(got_mtp, ref_mtp, sizeof(float) * NQ * nv), 0, "MTP logits after a load differ");

    // The in-memory blob is the file's bytes, and lists the tokens.
    void *blob;
    size_t blen, flen;
    petrel_context *d = new_ctx(m);
    phase1(d, p, q);
    cr_assert_eq(petrel_state_save_mem(d, &blob, &blen, err, sizeof err), 0, "%s", err);
    void *file = tu_read(path, &flen);
    cr_assert(flen == blen && memcmp(file, blob, blen) == 0, "save_mem and save differ");
    petrel_token *tk;
    cr_assert_eq(petrel_state_tokens(blob, blen, &tk, err, sizeof err), NP, "%s", err);
    cr_assert_eq(memcmp(tk, p, sizeof p), 0);
    free(tk);
    free(blob);
    free(file);
    petrel_context_free(d);

    petrel_context_free(c);
    tu_rmrf(dir);
    free(dir);
    free(ref);
    free(ref_mtp);
    free(got);
    free(got_mtp);
    petrel_model_close(m);
}

// Writes len bytes of buf to path.
static void put(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

static void expect_refused(petrel_context *c, const char *path, const char *what)
{
    char err[1024] = "";
    cr_assert_eq(petrel_state_load(c, path, err, sizeof err), -1, "a %s state was accepted", what);
    cr_assert(strstr(err, what), "message for a %s state: '%s'", what, err);
    cr_assert(strstr(err, path), "message does not name the file: '%s'", err);
    cr_assert_eq(petrel_kv_len(c), 0);
}

Test(state, damaged_or_foreign_refused)
{
    petrel_model *m = open_model("q8_0");
    petrel_token p[NP], q[NQ + 1];
    tokens(p, q);
    petrel_context *c = new_ctx(m);
    phase1(c, p, q);
    char *dir = tu_tmpdir("state_bad"), good[1024], bad[1100], err[1024];
    snprintf(good, sizeof good, "%s/good.pkv", dir);
    snprintf(bad, sizeof bad, "%s/bad.pkv", dir);
    cr_assert_eq(petrel_state_save(c, good, err, sizeof err), 0, "%s", err);
    size_t len;
    unsigned char *b = tu_read(good, &len);
    cr_assert(len > 200);

    put(bad, b, len - 17);
    expect_refused(c, bad, "truncated");
    put(bad, b, 40);
    expect_refused(c, bad, "truncated");
    // Flip one byte in the middle of the compressed payload.
    b[len / 2 + 40] ^= 0x55;
    put(bad, b, len);
    expect_refused(c, bad, "corrupted");
    b[len / 2 + 40] ^= 0x55;
    // A header field (n_past) changed without fixing the header checksum.
    b[32] ^= 1;
    put(bad, b, len);
    expect_refused(c, bad, "corrupted");
    b[32] ^= 1;
    put(bad, "hello, not a state", 18);
    expect_refused(c, bad, "truncated");
    memset(b, 'x', 8);
    put(bad, b, len);
    cr_assert_eq(petrel_state_load(c, bad, err, sizeof err), -1);
    cr_assert(strstr(err, "not a Petrel state"), "%s", err);
    // The good file still loads.
    cr_assert_eq(petrel_state_load(c, good, err, sizeof err), 0, "%s", err);
    cr_assert_eq(petrel_kv_len(c), NP);

    // A state of the q8_0 model is refused by the f32 model.
    petrel_model *m2 = open_model("f32");
    petrel_context *c2 = new_ctx(m2);
    cr_assert_eq(petrel_state_load(c2, good, err, sizeof err), -1, "a state of another model was accepted");
    cr_assert(strstr(err, "another model"), "%s", err);
    petrel_context_free(c2);
    petrel_model_close(m2);

    // A missing file is a clear error too.
    snprintf(bad, sizeof bad, "%s/missing.pkv", dir);
    cr_assert_eq(petrel_state_load(c, bad, err, sizeof err), -1);
    cr_assert(strstr(err, "missing.pkv"), "%s", err);

    free(b);
    tu_rmrf(dir);
    free(dir);
    petrel_context_free(c);
    petrel_model_close(m);
}

Test(state, empty_context_round_trip)
{
    petrel_model *m = open_model("q8_0");
    petrel_context *c = new_ctx(m);
    void *blob;
    size_t len;
    char err[1024];
    cr_assert_eq(petrel_state_save_mem(c, &blob, &len, err, sizeof err), 0, "%s", err);
    cr_assert_eq(petrel_state_load_mem(c, blob, len, err, sizeof err), 0, "%s", err);
    cr_assert_eq(petrel_kv_len(c), 0);
    free(blob);
    petrel_context_free(c);
    petrel_model_close(m);
}

// tests/crash/crash_helper.c — the writers and checkers that tests/crash/run.sh
// kills and inspects (issue 15, crash safety).
//
//   crash_helper state-writer MODEL PATH   saves context states to PATH forever
//   crash_helper state-check MODEL PATH N1 N2
//   crash_helper state-load MODEL FILE...  every FILE loads (server kv dir)
//   crash_helper usage-writer PATH         merges +w into a usage file forever
//   crash_helper usage-check PATH K1 K2
//   crash_helper state-writer-inplace / usage-writer-inplace (same arguments)
//
// The -inplace writers are the harness's own check (run.sh --inplace): they
// overwrite the file in place in small slow pieces, as a writer without a
// temp name + rename would, and the checkers must catch the torn files.
//
// The writers call the real writers (petrel_state_save, pt_usage_merge_save)
// in a loop and print "saving X" before and "saved X" after each call, with
// stdout unbuffered, so the harness knows which two file contents a kill may
// legitimately leave: the last one saved, or the one being saved. The
// checkers exit 0 only when the file is one of those two and is whole:
//  - a state must load, hold a prefix of the writer's token sequence of the
//    expected length, and decode the next token to logits bit-identical to a
//    context that computed the same tokens itself (an independent reference:
//    no state file involved);
//  - a usage file must parse with pt_usage_load (which zeroes everything on
//    any defect) and hold K * w[i] for one K in {K1, K2} in every cell (a
//    torn or mixed file cannot).
// Exit status: 0 ok, 1 check failed (message on stderr), 2 usage / setup.
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/usage.h"
#include "petrel.h"

enum { N_CTX = 96, LEN_MIN = 4, LEN_SPAN = 60 };
enum { U_BLOCKS = 4, U_EXPERTS = 16 };

// The writer's token sequence (every id valid for any vocabulary >= 64).
static petrel_token seq_tok(int i, int32_t n_vocab) { return (petrel_token)((i * 7919 + 13) % (n_vocab - 3) + 3); }

// Length of the state saved by generation g >= 1: varies so that the files
// differ in size and a torn one cannot pass for a shorter valid one.
static int gen_len(long g) { return LEN_MIN + (int)((g * 37) % LEN_SPAN); }

// Usage weights: the writer adds w[i] per save.
static uint64_t usage_w(int i) { return (uint64_t)(i % 5) + 1; }

static petrel_model *open_model(const char *path)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 1;
    mp.no_usage = true; // the state cases must not also write MODEL.usage
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    if (!m) {
        fprintf(stderr, "crash_helper: %s\n", err);
        exit(2);
    }
    return m;
}

static petrel_context *new_ctx(petrel_model *m)
{
    char err[1024];
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = N_CTX;
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    if (!c) {
        fprintf(stderr, "crash_helper: %s\n", err);
        exit(2);
    }
    return c;
}

// Brings c to exactly seq[0..len) one token per decode (truncating first when
// it is longer), so every KV position is always computed the same way.
static void advance_to(petrel_context *c, int len, int32_t nv)
{
    if (petrel_kv_len(c) > len)
        petrel_kv_truncate(c, len);
    while (petrel_kv_len(c) < len) {
        petrel_token t = seq_tok(petrel_kv_len(c), nv);
        if (petrel_decode(c, &t, NULL, 1, PETREL_LOGITS_LAST) != 0) {
            fprintf(stderr, "crash_helper: decode: %s\n", petrel_context_error(c));
            exit(2);
        }
    }
}

// The broken writer of the -inplace modes: truncates path and writes buf in
// 16-byte pieces with a pause after each (a kill nearly always tears it).
static void write_inplace(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        exit(2);
    }
    const size_t piece = len / 64 > 16 ? len / 64 : 16;
    for (size_t off = 0; off < len; off += piece) {
        size_t k = len - off < piece ? len - off : piece;
        if (write(fd, (const char *)buf + off, k) != (ssize_t)k) {
            perror(path);
            exit(2);
        }
        usleep(5000);
    }
    close(fd);
}

// Saves generation after generation until killed.
static int state_writer(const char *model, const char *path, bool inplace)
{
    petrel_model *m = open_model(model);
    petrel_context *c = new_ctx(m);
    int32_t nv = petrel_model_n_vocab(m);
    char err[1024];
    for (long g = 1;; g++) {
        int len = gen_len(g);
        advance_to(c, len, nv);
        printf("saving %d\n", len);
        void *blob;
        size_t blen;
        if (inplace && petrel_state_save_mem(c, &blob, &blen, err, sizeof err) == 0) {
            write_inplace(path, blob, blen);
            free(blob);
        } else if (inplace || petrel_state_save(c, path, err, sizeof err) != 0) {
            fprintf(stderr, "crash_helper: %s\n", err);
            return 2;
        }
        printf("saved %d\n", len);
    }
}

// The file at path must be a whole state of length n1 or n2 (see top).
static int state_check(const char *model, const char *path, int n1, int n2)
{
    petrel_model *m = open_model(model);
    petrel_context *c = new_ctx(m), *ref = new_ctx(m);
    int32_t nv = petrel_model_n_vocab(m);
    char err[1024];
    int bad = 0;
    if (petrel_state_load(c, path, err, sizeof err) != 0) {
        fprintf(stderr, "state-check: %s does not load: %s\n", path, err);
        bad = 1;
        goto out;
    }
    int n = petrel_kv_len(c);
    const petrel_token *t = petrel_kv_tokens(c);
    if (n != n1 && n != n2) {
        fprintf(stderr, "state-check: %s holds %d tokens; only %d (saved) or %d (being saved) may be there\n", path, n,
                n1, n2);
        bad = 1;
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (t[i] != seq_tok(i, nv)) {
            fprintf(stderr, "state-check: %s: token %d is %d, the writer wrote %d\n", path, i, t[i], seq_tok(i, nv));
            bad = 1;
            goto out;
        }
    advance_to(ref, n, nv);
    petrel_token next = seq_tok(n, nv);
    if (petrel_decode(c, &next, NULL, 1, PETREL_LOGITS_LAST) != 0 ||
        petrel_decode(ref, &next, NULL, 1, PETREL_LOGITS_LAST) != 0) {
        fprintf(stderr, "state-check: decode after the load failed: %s\n", petrel_context_error(c));
        bad = 1;
        goto out;
    }
    if (memcmp(petrel_get_logits(c, 0), petrel_get_logits(ref, 0), sizeof(float) * (size_t)nv) != 0) {
        fprintf(stderr, "state-check: %s: logits after the load differ from a recomputed context\n", path);
        bad = 1;
    }
    printf("%d\n", n);
out:
    petrel_context_free(ref);
    petrel_context_free(c);
    petrel_model_close(m);
    return bad;
}

// Every file given must load into a context of the model.
static int state_load(const char *model, int n, char **files)
{
    petrel_model *m = open_model(model);
    char err[1024];
    int bad = 0;
    petrel_context_params cp = petrel_context_default_params();
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    if (!c) {
        fprintf(stderr, "crash_helper: %s\n", err);
        return 2;
    }
    for (int i = 0; i < n; i++)
        if (petrel_state_load(c, files[i], err, sizeof err) != 0) {
            fprintf(stderr, "state-load: %s\n", err);
            bad = 1;
        }
    petrel_context_free(c);
    petrel_model_close(m);
    return bad;
}

static int usage_writer(const char *path, bool inplace)
{
    uint64_t add[U_BLOCKS * U_EXPERTS];
    for (int i = 0; i < U_BLOCKS * U_EXPERTS; i++)
        add[i] = usage_w(i);
    for (long g = 1;; g++) {
        pt_err err = {{0}};
        printf("saving %ld\n", g);
        if (inplace) {
            uint64_t cur[U_BLOCKS * U_EXPERTS];
            pt_usage_load(path, U_BLOCKS, U_EXPERTS, cur);
            char text[4096];
            int len = snprintf(text, sizeof text, "petrel-usage 1 %d %d\n", U_BLOCKS, U_EXPERTS);
            for (int i = 0; i < U_BLOCKS * U_EXPERTS; i++)
                len += snprintf(text + len, sizeof text - (size_t)len, "%llu%c", (unsigned long long)(cur[i] + add[i]),
                                i % U_EXPERTS == U_EXPERTS - 1 ? '\n' : ' ');
            write_inplace(path, text, (size_t)len);
        } else if (pt_usage_merge_save(path, U_BLOCKS, U_EXPERTS, add, &err) != 0) {
            fprintf(stderr, "crash_helper: %s\n", err.msg);
            return 2;
        }
        printf("saved %ld\n", g);
    }
}

// The usage file must hold K * w[i] everywhere for K = k1 or k2; prints K.
static int usage_check(const char *path, long k1, long k2)
{
    uint64_t cnt[U_BLOCKS * U_EXPERTS];
    if (pt_usage_load(path, U_BLOCKS, U_EXPERTS, cnt) != 1) {
        fprintf(stderr, "usage-check: %s is missing, torn or malformed (its counts would be lost)\n", path);
        return 1;
    }
    uint64_t k = cnt[0] / usage_w(0);
    for (int i = 0; i < U_BLOCKS * U_EXPERTS; i++)
        if (cnt[i] != k * usage_w(i)) {
            fprintf(stderr, "usage-check: %s: cell %d holds %llu, not %llu x %llu: a mixed file\n", path, i,
                    (unsigned long long)cnt[i], (unsigned long long)k, (unsigned long long)usage_w(i));
            return 1;
        }
    if (k != (uint64_t)k1 && k != (uint64_t)k2) {
        fprintf(stderr, "usage-check: %s holds %llu merges; only %ld (saved) or %ld (being saved) may be there\n",
                path, (unsigned long long)k, k1, k2);
        return 1;
    }
    printf("%llu\n", (unsigned long long)k);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0); // each line reaches the harness before the next step
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "state-writer") && argc == 4)
        return state_writer(argv[2], argv[3], false);
    if (!strcmp(mode, "state-writer-inplace") && argc == 4)
        return state_writer(argv[2], argv[3], true);
    if (!strcmp(mode, "state-check") && argc == 6)
        return state_check(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    if (!strcmp(mode, "state-load") && argc >= 3)
        return state_load(argv[2], argc - 3, argv + 3);
    if (!strcmp(mode, "usage-writer") && argc == 3)
        return usage_writer(argv[2], false);
    if (!strcmp(mode, "usage-writer-inplace") && argc == 3)
        return usage_writer(argv[2], true);
    if (!strcmp(mode, "usage-check") && argc == 5)
        return usage_check(argv[2], atol(argv[3]), atol(argv[4]));
    fprintf(stderr, "usage: crash_helper state-writer MODEL PATH | state-check MODEL PATH N1 N2 | "
                    "state-load MODEL FILE... | usage-writer PATH | usage-check PATH K1 K2\n");
    return 2;
}

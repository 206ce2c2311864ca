// bench/bench_longctx.c — decode speed at long contexts with DSA and with
// the indexer off (dense MLA), for bench/longctx.sh.
//
// For each context length N it makes one context, fills positions 0..N-1 of
// every block's latent KV cache and indexer key cache with deterministic
// pseudo-random rows (the cost of decoding at position N does not depend on
// what the cached rows hold, and prefilling 16k tokens on a small box would
// take far longer than the measurement), warms the expert cache up, then
// decodes NGEN tokens at positions N.. with the indexer on and again, after
// truncating back to N, with it off (the two alternate token by token; the
// fastest token counts — the work per token is fixed, so on a shared machine
// the best time is the least disturbed one; the median is printed too).
// Prints one line per (N, mode):
//
//   LONGCTX ctx=N mode=dsa|dense tok_s=… ms_per_tok=… median_ms=… attn_ms=… indexer_ms=…
//
// attn_ms is the MLA attention per token and layer sum (indexer excluded),
// indexer_ms the indexer's scoring and selection per token; then
//
//   KVBYTES kv_bytes_per_token=… (latent + indexer keys, every block, f32)
//
// usage: bench_longctx -m MODEL [-c "1024 4096 16384"] [-n NGEN] [-t THREADS]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/dsa.h"
#include "petrel.h"

// Fills positions [0, n) of every cache of c with rows of N(0,1)-like values
// (sums of uniforms: cheap, deterministic) and marks them filled.
static void fill_caches(petrel_context *c, int n)
{
    const pt_hparams *hp = &c->model->hp;
    uint32_t x = 2463534242u;
    for (uint32_t il = 0; il < pt_hp_n_blocks(hp); il++) {
        float *caches[2] = {c->kv[il], c->ik[il]};
        const uint64_t dims[2] = {c->kv_dim, hp->idx_head_dim};
        for (int k = 0; k < 2; k++) {
            if (!caches[k])
                continue;
            for (uint64_t i = 0; i < (uint64_t)n * dims[k]; i++) {
                float s = 0;
                for (int j = 0; j < 3; j++) {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    s += (float)(x >> 8) / 16777216.0f - 0.5f;
                }
                caches[k][i] = 2.0f * s; // variance 1
            }
        }
    }
    for (int p = 0; p < n; p++)
        c->tokens[p] = (petrel_token)(p % hp->n_vocab);
    c->n_past = n;
    c->mtp_len = 0;
}

// Decodes one token at position n (after truncating back to n); returns
// seconds, and the indexer and attention seconds in *ti, *ta.
static double decode_one(petrel_context *c, int n, petrel_token tok, double *ti, double *ta)
{
    petrel_kv_truncate(c, n);
    double i0, a0, i1, a1;
    pt_dsa_times(c, &i0, &a0);
    double t0 = pt_now();
    if (petrel_decode(c, &tok, NULL, 1, PETREL_LOGITS_LAST) < 0) {
        fprintf(stderr, "bench_longctx: %s\n", petrel_context_error(c));
        exit(1);
    }
    double dt = pt_now() - t0;
    pt_dsa_times(c, &i1, &a1);
    *ti = i1 - i0;
    *ta = a1 - a0;
    return dt;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *model = NULL, *ctxs = "1024 4096 16384";
    int ngen = 8, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "-c") && i + 1 < argc)
            ctxs = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            ngen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_longctx -m MODEL [-c \"1024 4096 16384\"] [-n NGEN] [-t THREADS]\n");
            return 2;
        }
    }
    if (!model || ngen < 1 || ngen > 64) {
        fprintf(stderr, "bench_longctx: -m MODEL is required (and NGEN in 1..64)\n");
        return 2;
    }
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = threads;
    petrel_model *m = petrel_model_open(model, &mp, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_longctx: %s\n", err);
        return 1;
    }
    if (!m->hp.idx_n_head)
        fprintf(stderr, "bench_longctx: %s has no DSA indexer: both modes are dense\n", model);
    char *list = strdup(ctxs);
    for (char *tk = strtok(list, " ,"); tk; tk = strtok(NULL, " ,")) {
        const int n = atoi(tk);
        petrel_context_params cp = petrel_context_default_params();
        cp.n_ctx = (uint32_t)(n + 4);
        petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
        if (!c) {
            fprintf(stderr, "bench_longctx: context of %d: %s\n", n, err);
            return 1;
        }
        fill_caches(c, n);
        double ti, ta, t[2][64], sum_i[2] = {0}, sum_a[2] = {0};
        decode_one(c, n, 7, &ti, &ta); // warm-up: experts read, pages touched
        // The two modes alternate token by token at the same position, so
        // that a busy machine slows both alike; the best time counts.
        // Which mode goes first alternates too: the second run of a token
        // finds some of the same weights still in the CPU caches.
        for (int g = 0; g < ngen; g++)
            for (int r = 0; r < 2; r++) {
                const int mode = (r + g) % 2;
                pt_dsa_set_enabled(c, mode == 0);
                t[mode][g] = decode_one(c, n, (petrel_token)(11 + 31 * g), &ti, &ta);
                sum_i[mode] += ti;
                sum_a[mode] += ta;
            }
        for (int mode = 0; mode < 2; mode++) {
            qsort(t[mode], (size_t)ngen, sizeof(double), cmp_d);
            const double med = ngen % 2 ? t[mode][ngen / 2] : 0.5 * (t[mode][ngen / 2 - 1] + t[mode][ngen / 2]);
            printf("LONGCTX ctx=%d mode=%s tok_s=%.3f ms_per_tok=%.2f median_ms=%.2f attn_ms=%.2f indexer_ms=%.2f\n",
                   n, mode == 0 ? "dsa" : "dense", 1.0 / t[mode][0], 1e3 * t[mode][0], 1e3 * med,
                   1e3 * sum_a[mode] / ngen, 1e3 * sum_i[mode] / ngen);
            fflush(stdout);
        }
        petrel_context_free(c);
    }
    printf("KVBYTES kv_bytes_per_token=%llu\n", (unsigned long long)pt_hparams_kv_bytes_per_token(&m->hp, 4));
    free(list);
    petrel_model_close(m);
    return 0;
}

// bench/bench_throughput.c — the engine-side measurements of
// bench/throughput.sh, in one process per configuration (one model load):
//   --preload           read every expert into the cache first (resident runs)
//   --pp N              prefill of an N-token prompt (one chunk per n_batch),
//                       cold or warm as the cache is: PP line
//   --agg LIST          for each stream count k in LIST (e.g. 1,4,8): k
//                       conversations (contexts sharing one expert cache, each
//                       with its own 16-token prompt) decode --gen tokens each
//                       greedily, one petrel_decode_multi step for all k per
//                       token: AGG line with the aggregate tok/s, expert bytes
//                       read per step and distinct experts fetched per step
//   --decode N          one conversation decoding N tokens with petrel_decode
//                       after its prompt, then --warm more times over the same
//                       tokens (the prompt kept): a DECODE line each, with the
//                       loop's CPU time per token and the cache's misses;
//   --ab N              then N pairs of passes with the prefetch on / off
//                       (every expert cached: off = resident decode's path):
//                       DECODE_AB line with their medians
//   --cold-bar X        the prefetch cut's cold check (pt_ecache_set_cold_bar;
//                       0: off, the cut as before 2026-12-02 17:00, for A/B)
// The token ids are synthetic and deterministic: the figures are speed only.
//
// usage: bench_throughput -m MODEL [--ram SIZE] [-t N] [--preload] [--pp N] [--agg LIST]
//                         [--gen N] [--decode N] [--warm N] [--ab N] [--batch N] [--stats] [--cold-bar X]
// (--batch: the prefill chunk size; by default Petrel's, chosen from the RAM budget)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/lib/bench_util.h"
#include "common/util.h"
#include "engine/context.h"
#include "engine/stream.h"
#include "petrel.h"

#define PROMPT 16

static petrel_token tok_at(int stream, int t, int n_vocab) { return (petrel_token)((stream * 7919 + t * 104729 + 13) % n_vocab); }

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

// Prefill of n synthetic tokens from position 0 in n_batch chunks.
static int run_pp(petrel_context *c, int n)
{
    const int nv = petrel_model_n_vocab(c->model);
    petrel_token *t = malloc(sizeof *t * (size_t)n);
    for (int i = 0; i < n; i++)
        t[i] = tok_at(0, i, nv);
    petrel_kv_truncate(c, 0);
    petrel_reset_stats(c);
    const double t0 = pt_now();
    for (int d = 0; d < n;) {
        const int k = n - d < (int)c->n_batch ? n - d : (int)c->n_batch;
        if (petrel_decode(c, t + d, NULL, k, PETREL_LOGITS_LAST) < 0) {
            fprintf(stderr, "pp: %s\n", petrel_context_error(c));
            free(t);
            return -1;
        }
        d += k;
    }
    const double dt = pt_now() - t0;
    petrel_stats s;
    petrel_get_stats(c, &s);
    printf("PP tokens=%d tok_s=%.3f seconds=%.3f n_batch=%u chunk=%llu chunks=%llu experts_per_chunk=%.1f "
           "tokens_per_expert_visit=%.2f bytes_read=%llu routed_s=%.2f attn_s=%.2f attn_proj_s=%.2f io_wait_s=%.2f ahead_reads=%llu\n",
           n, n / dt, dt, petrel_context_n_batch(c), (unsigned long long)s.prefill_chunk_max, (unsigned long long)s.prefill_chunks,
           s.prefill_chunks ? (double)s.prefill_expert_visits / (double)s.prefill_chunks : 0.0,
           s.prefill_expert_visits ? (double)s.prefill_expert_rows / (double)s.prefill_expert_visits : 0.0,
           (unsigned long long)s.bytes_read, s.t_routed_s, s.t_attn_s, s.t_attn_proj_s, s.t_io_wait_s,
           (unsigned long long)s.prefill_ahead_reads);
    fflush(stdout);
    free(t);
    petrel_kv_truncate(c, 0);
    return 0;
}

// k conversations decoding gen tokens each, one multi-context step per token.
static int run_agg(petrel_context *base, int k, int gen)
{
    const int nv = petrel_model_n_vocab(base->model);
    char err[1024];
    petrel_context **cs = calloc((size_t)k, sizeof *cs);
    petrel_token *next = calloc((size_t)k, sizeof *next);
    // (the others need room for their prompt only: a shared context's scratch
    // is sized by its n_batch and is not part of the expert budget)
    petrel_context_params cp = {.n_ctx = base->n_ctx, .n_batch = PROMPT};
    int rc = 0;
    cs[0] = base;
    petrel_kv_truncate(base, 0);
    for (int i = 1; i < k && rc == 0; i++) {
        cs[i] = petrel_context_new_shared(base, &cp, err, sizeof err);
        if (!cs[i]) {
            fprintf(stderr, "agg: %s\n", err);
            rc = -1;
        }
    }
    for (int i = 0; i < k && rc == 0; i++) {
        petrel_token p[PROMPT];
        for (int t = 0; t < PROMPT; t++)
            p[t] = tok_at(i + 1, t, nv);
        if (petrel_decode(cs[i], p, NULL, PROMPT, PETREL_LOGITS_LAST) < 0) {
            fprintf(stderr, "agg prompt: %s\n", petrel_context_error(cs[i]));
            rc = -1;
            break;
        }
        next[i] = (petrel_token)argmax(petrel_get_logits(cs[i], PROMPT - 1), nv);
    }
    if (rc == 0) {
        petrel_reset_stats(base);
        const double t0 = pt_now();
        for (int s = 0; s < gen && rc == 0; s++) {
            if (petrel_decode_multi(cs, next, k, err, sizeof err) < 0) {
                fprintf(stderr, "agg: %s\n", err);
                rc = -1;
                break;
            }
            for (int i = 0; i < k; i++)
                next[i] = (petrel_token)argmax(petrel_get_logits(cs[i], 0), nv);
        }
        const double dt = pt_now() - t0;
        petrel_stats st;
        petrel_get_stats(base, &st);
        if (rc == 0)
            printf("AGG streams=%d tokens=%d tok_s=%.3f step_s=%.4f bytes_per_step=%.0f fetches_per_step=%.1f "
                   "uses_per_step=%.1f hit_rate=%.4f io_wait_s=%.2f\n",
                   k, gen, (double)k * gen / dt, dt / gen, (double)st.bytes_read / gen,
                   (double)st.multi_expert_visits / gen, (double)st.multi_expert_uses / gen,
                   st.expert_hits + st.expert_misses
                       ? (double)st.expert_hits / (double)(st.expert_hits + st.expert_misses)
                       : 0.0,
                   st.t_io_wait_s);
        fflush(stdout);
    }
    for (int i = k - 1; i >= 1; i--)
        petrel_context_free(cs[i]);
    petrel_kv_truncate(base, 0);
    free(cs);
    free(next);
    return rc;
}

// CPU seconds (user + system) of this process so far, every thread.
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

// One pass of n greedy tokens from the end of the kept prompt (first = the
// prompt's argmax): a DECODE line labelled tag; *tok_s, *cpu_s its speed and
// CPU seconds per token.
static int decode_pass(petrel_context *c, petrel_token first, int n, const char *tag, double *tok_s, double *cpu_s)
{
    const int nv = petrel_model_n_vocab(c->model);
    petrel_kv_truncate(c, PROMPT);
    petrel_token t = first;
    petrel_reset_stats(c);
    const double t0 = pt_now(), u0 = cpu_seconds();
    for (int i = 0; i < n; i++) {
        if (petrel_decode(c, &t, NULL, 1, PETREL_LOGITS_LAST) < 0)
            return fprintf(stderr, "decode: %s\n", petrel_context_error(c)), -1;
        t = (petrel_token)argmax(petrel_get_logits(c, 0), nv);
    }
    const double dt = pt_now() - t0, du = cpu_seconds() - u0;
    petrel_stats s;
    petrel_get_stats(c, &s);
    *tok_s = n / dt;
    *cpu_s = du / n;
    printf("DECODE %s tokens=%d tok_s=%.3f cpu_s_per_token=%.4f bytes_per_token=%.0f hit_rate=%.4f misses=%llu "
           "prefetch_reads=%llu prefetch_wasted_bytes=%llu io_wait_s=%.2f cache_bytes=%llu last_token=%d\n",
           tag, n, *tok_s, *cpu_s, (double)s.bytes_read / n,
           s.expert_hits + s.expert_misses ? (double)s.expert_hits / (double)(s.expert_hits + s.expert_misses) : 0.0,
           (unsigned long long)s.expert_misses, (unsigned long long)s.prefetch_reads,
           (unsigned long long)s.prefetch_wasted_bytes, s.t_io_wait_s, (unsigned long long)s.expert_cache_bytes, t);
    fflush(stdout);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One conversation decoding n tokens, warm+1 times over the same tokens.
// The 16-token prompt is prefilled once: later runs keep its KV entries and
// decode again from its end, so a warm run's expert working set is the n
// decode tokens' alone (re-prefilling the prompt would read the union of
// its 16 tokens' experts into the cache in between, ~2,200 experts of
// bench16's 3,456: more than a 6 GiB budget holds). Besides the wall time
// the line gives the CPU time of the loop (every thread, user + system):
// with every expert a hit it is the loop's compute alone, whatever the
// machine's load does to the wall clock.
// Then ab pairs of passes with the lookahead prefetch on and off in turn
// (on off, off on, ...: drift cancels): with every expert cached, "off" is
// resident decode's code path exactly (nothing is read), in the same
// process and minutes, so the DECODE_AB line's medians compare the
// streaming loop with resident decode under the same load.
static int run_decode(petrel_context *c, int n, int warm, int ab)
{
    const int nv = petrel_model_n_vocab(c->model);
    petrel_kv_truncate(c, 0);
    petrel_token p[PROMPT];
    for (int t = 0; t < PROMPT; t++)
        p[t] = tok_at(99, t, nv);
    if (petrel_decode(c, p, NULL, PROMPT, PETREL_LOGITS_LAST) < 0)
        return fprintf(stderr, "decode: %s\n", petrel_context_error(c)), -1;
    const petrel_token first = (petrel_token)argmax(petrel_get_logits(c, PROMPT - 1), nv);
    double ts, cs;
    for (int r = 0; r <= warm; r++) {
        char tag[32];
        snprintf(tag, sizeof tag, "run=%d", r);
        if (decode_pass(c, first, n, tag, &ts, &cs) < 0)
            return -1;
    }
    if (ab > 0) {
        pt_stream *st = c->stream;
        const bool was = st->prefetch;
        double *v = malloc(sizeof(double) * 4 * (size_t)ab); // tok_s on, off, cpu on, off
        for (int i = 0; i < 2 * ab; i++) {
            const bool on = (i % 2) == ((i / 2) % 2); // on off off on on off ...
            st->prefetch = was && on;
            if (decode_pass(c, first, n, on ? "ab=on" : "ab=off", &ts, &cs) < 0) {
                st->prefetch = was;
                free(v);
                return -1;
            }
            const int j = i / 2;
            v[(on ? 0 : 1) * ab + j] = ts;
            v[(on ? 2 : 3) * ab + j] = cs;
        }
        st->prefetch = was;
        const double ton = median(v, ab), toff = median(v + ab, ab), con = median(v + 2 * ab, ab),
                     coff = median(v + 3 * ab, ab);
        printf("DECODE_AB pairs=%d tok_s_on=%.3f tok_s_off=%.3f tok_s_ratio=%.3f cpu_s_on=%.4f cpu_s_off=%.4f "
               "cpu_ratio=%.3f\n",
               ab, ton, toff, toff > 0 ? ton / toff : 0.0, con, coff, con > 0 ? coff / con : 0.0);
        fflush(stdout);
        free(v);
    }
    petrel_kv_truncate(c, 0);
    return 0;
}

int main(int argc, char **argv)
{
    petrel_model_params mp = petrel_model_default_params();
    mp.no_usage = true; // runs do not feed each other through the usage file
    const char *model = NULL, *agg = NULL;
    int pp = 0, gen = 64, dec = 0, warm = 0, ab = 0, do_preload = 0, stats = 0, n_batch = 0;
    double cold_bar = -1; // (-1: the cache's default)
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v)
            model = argv[++i];
        else if (!strcmp(a, "--ram") && v)
            mp.ram_budget = (uint64_t)pt_parse_size(argv[++i]);
        else if (!strcmp(a, "-t") && v)
            mp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--preload"))
            do_preload = 1;
        else if (!strcmp(a, "--pp") && v)
            pp = atoi(argv[++i]);
        else if (!strcmp(a, "--agg") && v)
            agg = argv[++i];
        else if (!strcmp(a, "--gen") && v)
            gen = atoi(argv[++i]);
        else if (!strcmp(a, "--decode") && v)
            dec = atoi(argv[++i]);
        else if (!strcmp(a, "--warm") && v)
            warm = atoi(argv[++i]);
        else if (!strcmp(a, "--ab") && v)
            ab = atoi(argv[++i]);
        else if (!strcmp(a, "--batch") && v)
            n_batch = atoi(argv[++i]);
        else if (!strcmp(a, "--stats"))
            stats = 1;
        else if (!strcmp(a, "--cold-bar") && v && atof(v) >= 0 && atof(v) <= 1)
            cold_bar = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_throughput -m MODEL [--ram SIZE] [-t N] [--preload] [--pp N] [--agg LIST] "
                            "[--gen N] [--decode N] [--warm N] [--ab N] [--batch N] [--stats] [--cold-bar X]\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "bench_throughput: -m MODEL is required\n");
        return 2;
    }
    char err[1024];
    const double t0 = pt_now();
    petrel_model *m = petrel_model_open(model, &mp, err, sizeof err);
    if (!m)
        return fprintf(stderr, "%s\n", err), 1;
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = n_batch > 0 ? (uint32_t)n_batch : 0; // 0: the chunk size chosen from the RAM budget
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    if (!c)
        return fprintf(stderr, "%s\n", err), 1;
    fprintf(stderr, "bench_throughput: %s loaded in %.1fs\n", model, pt_now() - t0);
    if (cold_bar >= 0 && c->ecache)
        pt_ecache_set_cold_bar(c->ecache, cold_bar);
    int rc = 0;
    if (do_preload) {
        const double t1 = pt_now();
        rc = bench_preload(c);
        fprintf(stderr, "bench_throughput: preloaded every expert in %.1fs\n", pt_now() - t1);
    }
    if (rc == 0 && pp > 0)
        rc = run_pp(c, pp);
    for (const char *p = agg; rc == 0 && p && *p;) {
        rc = run_agg(c, atoi(p), gen);
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    if (rc == 0 && dec > 0)
        rc = run_decode(c, dec, warm, ab);
    if (stats)
        petrel_print_stats(c, stderr);
    petrel_context_free(c);
    petrel_model_close(m);
    return rc ? 1 : 0;
}

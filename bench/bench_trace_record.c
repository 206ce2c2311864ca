// bench/bench_trace_record.c — records a routing trace (petrel_trace_open)
// of a model reading a token sequence teacher-forced, one token per decode
// call as in generation, so that the trace holds the lookahead predictions
// ('P' lines, made only for batches of a few tokens) beside the routed
// experts ('A' lines). The sequence is cut into windows of the context
// length (the KV cache is cleared between windows; positions restart at 0).
//
// usage: bench_trace_record MODEL.gguf IDS TRACE [--ctx N] [--skip N] [--max-tokens N] [--threads N]
//   IDS          a file of token ids (any separators, e.g. `petrel tokenize` output)
//   --ctx N      window length (default: the model's training context)
//   --skip N     start at entry N of IDS
//   --max-tokens N  record at most N tokens
//   --threads N  compute threads (default 1: the routing is the same with any
//                count, and one thread is fastest for a small model on a busy machine)
//   --ram-budget B  Petrel's RAM budget in bytes (default: from MemAvailable; the
//                routing is the same under any budget, e.g. bench16 under 3 GiB)
// Prints one line: tokens=<n> windows=<n> seconds=<s>.
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "petrel.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Every integer of the file, in order; NULL + message when there is none.
static int32_t *read_ids(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_trace_record: %s: cannot open\n", path);
        return NULL;
    }
    int cap = 4096, k = 0, ch;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    long v = -1;
    while ((ch = fgetc(f)) != EOF || v >= 0) {
        if (ch != EOF && isdigit(ch)) {
            v = (v < 0 ? 0 : v * 10) + (ch - '0');
            continue;
        }
        if (v >= 0) {
            if (k == cap)
                ids = realloc(ids, sizeof(int32_t) * (size_t)(cap *= 2));
            ids[k++] = (int32_t)v;
            v = -1;
        }
        if (ch == EOF)
            break;
    }
    fclose(f);
    if (k == 0) {
        fprintf(stderr, "bench_trace_record: %s: no token ids\n", path);
        free(ids);
        return NULL;
    }
    *n = k;
    return ids;
}

int main(int argc, char **argv)
{
    const char *pos_args[3];
    int n_pos = 0, ctx = 0, skip = 0, max_tokens = 0, threads = 1;
    unsigned long long ram_budget = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ctx") && i + 1 < argc)
            ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip") && i + 1 < argc)
            skip = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-tokens") && i + 1 < argc)
            max_tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ram-budget") && i + 1 < argc)
            ram_budget = strtoull(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && n_pos < 3)
            pos_args[n_pos++] = argv[i];
        else
            n_pos = 99;
    }
    if (n_pos != 3) {
        fprintf(stderr, "usage: bench_trace_record MODEL.gguf IDS TRACE [--ctx N] [--skip N] [--max-tokens N] [--threads N] [--ram-budget B]\n");
        return 2;
    }
    int n_ids;
    int32_t *ids = read_ids(pos_args[1], &n_ids);
    if (!ids)
        return 1;
    if (skip >= n_ids) {
        fprintf(stderr, "bench_trace_record: %s: --skip %d is past its %d ids\n", pos_args[1], skip, n_ids);
        return 1;
    }
    int n = n_ids - skip;
    if (max_tokens > 0 && n > max_tokens)
        n = max_tokens;
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = threads;
    mp.ram_budget = ram_budget;
    mp.no_usage = true; // (the heat of this run must not leak into later ones)
    petrel_model *m = petrel_model_open(pos_args[0], &mp, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_trace_record: %s\n", err);
        return 1;
    }
    if (ctx <= 0)
        ctx = petrel_model_n_ctx_train(m);
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = (uint32_t)ctx;
    cp.n_batch = 1;
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    if (!c || petrel_trace_open(c, pos_args[2], err, sizeof err) < 0) {
        fprintf(stderr, "bench_trace_record: %s\n", err);
        return 1;
    }
    const double t0 = now_s();
    int windows = 0;
    for (int i = 0; i < n; i++) {
        if (i % ctx == 0) {
            petrel_kv_truncate(c, 0);
            windows++;
        }
        if (petrel_decode(c, ids + skip + i, NULL, 1, PETREL_LOGITS_LAST) != 0) {
            fprintf(stderr, "bench_trace_record: %s: token %d: %s\n", pos_args[0], skip + i, petrel_context_error(c));
            return 1;
        }
    }
    petrel_trace_close(c);
    printf("tokens=%d windows=%d seconds=%.2f\n", n, windows, now_s() - t0);
    petrel_context_free(c);
    petrel_model_close(m);
    free(ids);
    return 0;
}

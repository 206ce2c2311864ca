// cli/cmd_bench.c — `petrel bench`: prompt-processing and generation speed
// in the manner of llama-bench (pp N / tg N), with the expert-cache and
// memory figures of each run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cliutil.h"
#include "cli/commands.h"
#include "common/util.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: petrel bench -m MODEL [-p N] [-n N] [-r REPS] [--spec] [--spec-mode MODE]\n"
            "  -p N      prompt tokens for the prefill test (default 128; 0 skips it)\n"
            "  -n N      tokens for the generation test (default 32; 0 skips it)\n"
            "  -r REPS   repetitions, the figures are averaged (default 2)\n"
            "  -w N      warm-up repetitions first, not counted (default 0): fills the expert cache\n"
            "  --spec    generation with MTP speculative decoding (adaptive)\n"
            "  --spec-mode MODE  adaptive | always | off (implies --spec)\n"
            "Token ids are synthetic (deterministic); the numbers are speed only.\n%s",
            cli_model_opts_help);
}

typedef struct bench_row {
    double tok_s, hit, mb_per_tok, io_wait_s;
} bench_row;

static void fill_ids(petrel_token *ids, int n, int n_vocab, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        ids[i] = (petrel_token)(x % (uint32_t)n_vocab);
    }
}

static void row_from_stats(petrel_context *c, int tokens, double secs, bench_row *r)
{
    petrel_stats s;
    petrel_get_stats(c, &s);
    uint64_t uses = s.expert_hits + s.expert_misses;
    r->tok_s += secs > 0 ? tokens / secs : 0;
    r->hit += uses ? (double)s.expert_hits / (double)uses : 0;
    r->mb_per_tok += tokens ? (double)s.bytes_read / 1e6 / tokens : 0;
    r->io_wait_s += s.t_io_wait_s;
}

int cmd_bench(int argc, char **argv)
{
    cli_model_opts o;
    cli_model_opts_init(&o);
    int n_prompt = 128, n_gen = 32, reps = 2, spec = 0, warm = 0, spec_mode = PETREL_SPEC_ADAPTIVE;
    for (int i = 1; i < argc;) {
        int r = cli_model_opt(&o, argc, argv, &i);
        if (r == 0)
            r = cli_spec_opt("bench", &spec, &spec_mode, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (!strcmp(argv[i], "-p") && i + 1 < argc) {
            n_prompt = atoi(argv[i + 1]);
            i += 2;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            n_gen = atoi(argv[i + 1]);
            i += 2;
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            reps = atoi(argv[i + 1]);
            i += 2;
        } else if (!strcmp(argv[i], "-w") && i + 1 < argc) {
            warm = atoi(argv[i + 1]);
            i += 2;
        } else {
            usage();
            return 2;
        }
    }
    if (!o.model || n_prompt < 0 || n_gen < 0 || reps < 1 || warm < 0) {
        usage();
        return 2;
    }
    if (o.cp.n_ctx == 0)
        o.cp.n_ctx = (uint32_t)(n_prompt + n_gen + 8);
    petrel_model *m;
    petrel_context *c;
    double t0 = pt_now();
    if (cli_open(&o, &m, &c) < 0)
        return 1;
    fprintf(stderr, "model: %s, trunk %.2f GB in RAM, loaded in %.1fs\n", o.model,
            (double)petrel_model_trunk_bytes(m) / 1e9, pt_now() - t0);
    if (spec && !petrel_model_has_mtp(m)) { // e.g. Kimi-K2: nothing to draft with
        fprintf(stderr, "petrel bench: --spec: speculation unavailable, %s has no MTP layer; measuring without it\n",
                o.model);
        spec = 0;
    }
    const int nv = petrel_model_n_vocab(m);
    petrel_token *ids = malloc(sizeof *ids * (size_t)(n_prompt > 1 ? n_prompt : 1));
    bench_row pp = {0}, tg = {0};
    int rc = 1;
    for (int rep = -warm; rep < reps; rep++) {
        if (rep == 0)
            pp = tg = (bench_row){0};
        if (n_prompt > 0) {
            fill_ids(ids, n_prompt, nv, (uint32_t)(rep + warm) + 1);
            petrel_kv_truncate(c, 0);
            petrel_reset_stats(c);
            double t = pt_now();
            for (int done = 0; done < n_prompt;) {
                const int nb = (int)petrel_context_n_batch(c); // (--batch, or chosen from the RAM budget)
                int k = n_prompt - done < nb ? n_prompt - done : nb;
                if (petrel_decode(c, ids + done, NULL, k, PETREL_LOGITS_LAST) < 0)
                    goto fail;
                done += k;
            }
            row_from_stats(c, n_prompt, pt_now() - t, &pp);
        }
        if (n_gen > 0) {
            petrel_token first;
            fill_ids(&first, 1, nv, 1000u + (uint32_t)(rep + warm));
            petrel_kv_truncate(c, 0);
            petrel_reset_stats(c);
            petrel_gen_params gp = {.n_predict = n_gen, .ignore_eos = true, .speculative = spec,
                                    .spec_mode = spec_mode};
            petrel_gen_result res;
            if (petrel_generate(c, &first, 1, &gp, NULL, NULL, &res) < 0)
                goto fail;
            // Exclude the first token (one-token prefill) from the rate.
            double secs = res.t_total_s - res.ttft_s;
            row_from_stats(c, res.n_generated - 1, secs, &tg);
        }
    }
    printf("| test | tok/s | expert hit rate | MB read/token | I/O wait s |\n|---|---|---|---|---|\n");
    if (n_prompt > 0)
        printf("| pp%d | %.2f | %.1f%% | %.2f | %.2f |\n", n_prompt, pp.tok_s / reps, 100 * pp.hit / reps,
               pp.mb_per_tok / reps, pp.io_wait_s / reps);
    if (n_gen > 0)
        printf("| tg%d%s%s%s | %.2f | %.1f%% | %.2f | %.2f |\n", n_gen, spec ? " (spec " : "",
               spec ? petrel_spec_mode_name(spec_mode) : "", spec ? ")" : "", tg.tok_s / reps,
               100 * tg.hit / reps, tg.mb_per_tok / reps, tg.io_wait_s / reps);
    printf("resident memory %.1f MB (peak %.1f MB)\n", (double)pt_rss_bytes() / 1e6, (double)pt_peak_rss_bytes() / 1e6);
    cli_print_stream_stats(&o, c);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "petrel bench: %s\n", petrel_context_error(c));
out:
    free(ids);
    petrel_context_free(c);
    petrel_model_close(m);
    return rc;
}

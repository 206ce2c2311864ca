// cli/cmd_run.c — `petrel run`: prefill a prompt, generate N tokens,
// stream them, print speed / cache / memory figures at the end.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cliutil.h"
#include "cli/commands.h"
#include "cli/textio.h"
#include "common/util.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: petrel run -m MODEL (--ids 1,2,3 | -p TEXT) [-n N] [options]\n"
            "  -n N                 tokens to generate (default 32)\n"
            "  --print-ids          print the generated ids comma-separated on one line of stdout\n"
            "  --temp T --top-k K --top-p P --min-p P --repeat-penalty R --frequency-penalty F\n"
            "  --presence-penalty P --seed S   sampling (default greedy)\n"
            "  --ignore-eos         do not stop at end-of-sequence tokens\n%s",
            cli_model_opts_help);
}

static int parse_sampling(petrel_sampler_params *sp, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (*i + 1 >= argc)
        return 0;
    const char *v = argv[*i + 1];
    if (!strcmp(a, "--temp"))
        sp->temperature = strtof(v, NULL);
    else if (!strcmp(a, "--top-k"))
        sp->top_k = atoi(v);
    else if (!strcmp(a, "--top-p"))
        sp->top_p = strtof(v, NULL);
    else if (!strcmp(a, "--min-p"))
        sp->min_p = strtof(v, NULL);
    else if (!strcmp(a, "--repeat-penalty"))
        sp->repeat_penalty = strtof(v, NULL);
    else if (!strcmp(a, "--frequency-penalty"))
        sp->frequency_penalty = strtof(v, NULL);
    else if (!strcmp(a, "--presence-penalty"))
        sp->presence_penalty = strtof(v, NULL);
    else if (!strcmp(a, "--seed"))
        sp->seed = strtoull(v, NULL, 10);
    else
        return 0;
    *i += 2;
    return 1;
}

int cmd_run(int argc, char **argv)
{
    cli_model_opts o;
    cli_model_opts_init(&o);
    petrel_sampler_params sp = petrel_sampler_default_params();
    const char *ids_s = NULL, *prompt = NULL;
    int n_gen = 32, print_ids = 0, ignore_eos = 0;
    for (int i = 1; i < argc;) {
        int r = cli_model_opt(&o, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0 || parse_sampling(&sp, argc, argv, &i))
            continue;
        if (!strcmp(argv[i], "--ids") && i + 1 < argc) {
            ids_s = argv[i + 1];
            i += 2;
        } else if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prompt")) && i + 1 < argc) {
            prompt = argv[i + 1];
            i += 2;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            n_gen = atoi(argv[i + 1]);
            i += 2;
        } else if (!strcmp(argv[i], "--print-ids")) {
            print_ids = 1;
            i++;
        } else if (!strcmp(argv[i], "--ignore-eos")) {
            ignore_eos = 1;
            i++;
        } else {
            usage();
            return 2;
        }
    }
    if ((!ids_s && !prompt) || !o.model || n_gen < 0) {
        usage();
        return 2;
    }
    petrel_model *m;
    petrel_context *c;
    if (cli_open(&o, &m, &c) < 0)
        return 1;
    int rc = 1;
    cli_text *tx = NULL;
    petrel_token *ids = NULL;
    int n = 0;
    if (prompt || !print_ids) {
        char err[1024];
        tx = cli_text_open(m, err, sizeof err);
        if (!tx && prompt) {
            fprintf(stderr, "petrel run: %s\n", err);
            goto out;
        }
    }
    if (ids_s) {
        n = cli_parse_ids(ids_s, &ids);
        if (n <= 0) {
            fprintf(stderr, "petrel run: bad --ids '%s'\n", ids_s);
            goto out;
        }
    } else {
        n = cli_text_encode(tx, prompt, &ids);
        if (n <= 0) {
            fprintf(stderr, "petrel run: the prompt encodes to no tokens\n");
            goto out;
        }
    }
    const uint32_t n_ctx = petrel_context_n_ctx(c);
    if ((uint32_t)(n + n_gen) > n_ctx) {
        fprintf(stderr, "petrel run: prompt (%d) + generation (%d) exceeds the context length %u\n", n, n_gen,
                n_ctx);
        goto out;
    }
    petrel_token eos[8];
    int n_eos = ignore_eos ? 0 : petrel_model_eos(m, eos, 8);
    petrel_sampler *smp = petrel_sampler_new(&sp, petrel_model_n_vocab(m));
    petrel_token *hist = malloc(sizeof *hist * (size_t)(n + n_gen + 1));
    memcpy(hist, ids, sizeof *ids * (size_t)n);
    int nh = n;

    double t0 = pt_now();
    // Prefill in batches of the context's batch size.
    int done = 0;
    const int nb = 512;
    while (done < n) {
        int k = n - done < nb ? n - done : nb;
        if (petrel_decode(c, ids + done, NULL, k, PETREL_LOGITS_LAST) < 0) {
            fprintf(stderr, "petrel run: %s\n", petrel_context_error(c));
            goto out2;
        }
        done += k;
    }
    double ttft = 0;
    int n_out = 0;
    if (tx)
        cli_text_stream_begin(tx);
    for (int g = 0; g < n_gen; g++) {
        const float *lg = petrel_get_logits(c, g == 0 ? (n - 1 - (n - 1) / nb * nb) : 0);
        petrel_token t = petrel_sampler_sample(smp, lg, hist, nh);
        if (g == 0)
            ttft = pt_now() - t0;
        hist[nh++] = t;
        n_out++;
        bool stop = false;
        for (int e = 0; e < n_eos; e++)
            stop |= t == eos[e];
        if (print_ids) {
            printf("%s%d", g ? "," : "", t);
        } else if (tx && !stop) {
            cli_text_stream_token(tx, t, stdout);
        }
        fflush(stdout);
        if (stop || g + 1 == n_gen)
            break;
        if (petrel_decode(c, &t, NULL, 1, PETREL_LOGITS_LAST) < 0) {
            fprintf(stderr, "\npetrel run: %s\n", petrel_context_error(c));
            goto out2;
        }
    }
    if (tx && !print_ids)
        cli_text_stream_end(tx, stdout);
    printf("\n");
    fprintf(stderr, "\nTTFT: %.1f ms, %d prompt tokens, %d generated\n", ttft * 1e3, n, n_out);
    petrel_print_stats(c, stderr);
    rc = 0;
out2:
    petrel_sampler_free(smp);
    free(hist);
out:
    free(ids);
    cli_text_close(tx);
    petrel_context_free(c);
    petrel_model_close(m);
    return rc;
}

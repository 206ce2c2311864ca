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
            "  --ignore-eos         do not stop at end-of-sequence tokens\n"
            "  --spec               MTP speculative decoding (same output); adaptive: verifies drafts\n"
            "                       only while that is measured to be faster\n"
            "  --spec-mode MODE     adaptive (default with --spec) | always | off; implies --spec\n%s",
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

typedef struct run_out {
    cli_text *tx;
    int print_ids;
    int n;
} run_out;

static int on_token(void *user, petrel_token t)
{
    run_out *o = user;
    if (o->print_ids)
        printf("%s%d", o->n ? "," : "", t);
    else if (o->tx)
        cli_text_stream_token(o->tx, t, stdout);
    o->n++;
    fflush(stdout);
    return 0;
}

int cmd_run(int argc, char **argv)
{
    cli_model_opts o;
    cli_model_opts_init(&o);
    petrel_sampler_params sp = petrel_sampler_default_params();
    const char *ids_s = NULL, *prompt = NULL;
    int n_gen = 32, print_ids = 0, ignore_eos = 0, spec = 0, spec_mode = PETREL_SPEC_ADAPTIVE;
    for (int i = 1; i < argc;) {
        int r = cli_model_opt(&o, argc, argv, &i);
        if (r == 0)
            r = cli_spec_opt("run", &spec, &spec_mode, argc, argv, &i);
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
    if (spec && !petrel_model_has_mtp(m)) { // e.g. Kimi-K2: no MTP layer to draft with
        fprintf(stderr, "petrel run: --spec: speculation unavailable, %s has no MTP layer; decoding without it\n",
                o.model);
        spec = 0;
    }
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
    if ((uint32_t)(n + n_gen + 1) > n_ctx) {
        fprintf(stderr, "petrel run: prompt (%d) + generation (%d) exceeds the context length %u\n", n, n_gen,
                n_ctx);
        goto out;
    }
    petrel_sampler *smp = sp.temperature > 0 ? petrel_sampler_new(&sp, petrel_model_n_vocab(m)) : NULL;
    run_out ro = {.tx = tx, .print_ids = print_ids || !tx};
    petrel_gen_params gp = {.n_predict = n_gen, .speculative = spec, .spec_mode = spec_mode, .ignore_eos = ignore_eos,
                            .sampler = smp};
    petrel_gen_result res = {0};
    if (tx && !print_ids)
        cli_text_stream_begin(tx);
    if (n_gen > 0 && petrel_generate(c, ids, n, &gp, on_token, &ro, &res) < 0) {
        fprintf(stderr, "\npetrel run: %s\n", petrel_context_error(c));
        goto out2;
    }
    if (tx && !print_ids)
        cli_text_stream_end(tx, stdout);
    printf("\n");
    fprintf(stderr, "\nTTFT: %.1f ms, %d prompt tokens, %d generated%s\n", res.ttft_s * 1e3, n, res.n_generated,
            res.stopped_eos ? " (end of sequence)" : "");
    if (spec)
        fprintf(stderr, "speculative (MTP, %s): %d drafts verified, %d accepted (%.1f%%)\n",
                petrel_spec_mode_name(spec_mode), res.n_drafted, res.n_accepted,
                res.n_drafted ? 100.0 * res.n_accepted / res.n_drafted : 0.0);
    petrel_print_stats(c, stderr);
    cli_print_stream_stats(&o, c);
    rc = 0;
out2:
    petrel_sampler_free(smp);
out:
    free(ids);
    cli_text_close(tx);
    petrel_context_free(c);
    petrel_model_close(m);
    return rc;
}

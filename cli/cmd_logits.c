// cli/cmd_logits.c — `petrel logits`: raw float32 logits for token ids, the
// tool the golden checks use.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cliutil.h"
#include "cli/commands.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: petrel logits -m MODEL --ids 1,2,3 [--mtp] [--incremental] -o FILE\n"
            "Writes float32 little-endian logits for every position ([n, vocab]); with --mtp the\n"
            "MTP logits ([n-1, vocab]). --incremental feeds tokens one at a time (default: one batch).\n%s",
            cli_model_opts_help);
}

int cmd_logits(int argc, char **argv)
{
    cli_model_opts o;
    cli_model_opts_init(&o);
    const char *ids_s = NULL, *out_path = NULL;
    int mtp = 0, incremental = 0;
    for (int i = 1; i < argc;) {
        int r = cli_model_opt(&o, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (!strcmp(argv[i], "--ids") && i + 1 < argc) {
            ids_s = argv[i + 1];
            i += 2;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out_path = argv[i + 1];
            i += 2;
        } else if (!strcmp(argv[i], "--mtp")) {
            mtp = 1;
            i++;
        } else if (!strcmp(argv[i], "--incremental")) {
            incremental = 1;
            i++;
        } else {
            usage();
            return 2;
        }
    }
    if (!ids_s || !out_path || !o.model) {
        usage();
        return 2;
    }
    petrel_token *ids;
    int n = cli_parse_ids(ids_s, &ids);
    if (n <= 0) {
        fprintf(stderr, "petrel logits: bad --ids '%s'\n", ids_s);
        return 2;
    }
    if (mtp && n < 2) {
        fprintf(stderr, "petrel logits: --mtp needs at least 2 tokens\n");
        free(ids);
        return 2;
    }
    if (!incremental && o.cp.n_batch < (uint32_t)n)
        o.cp.n_batch = (uint32_t)n;
    petrel_model *m;
    petrel_context *c;
    if (cli_open(&o, &m, &c) < 0) {
        free(ids);
        return 1;
    }
    if (mtp && !petrel_model_has_mtp(m)) {
        fprintf(stderr, "petrel logits: %s has no MTP layer\n", o.model);
        goto fail;
    }
    const size_t nv = (size_t)petrel_model_n_vocab(m);
    const int rows = mtp ? n - 1 : n;
    float *out = malloc(sizeof(float) * nv * (size_t)rows);
    if (incremental) {
        for (int t = 0; t < n; t++) {
            if (petrel_decode(c, &ids[t], NULL, 1, PETREL_LOGITS_LAST) < 0)
                goto decode_fail;
            if (!mtp) {
                memcpy(out + (size_t)t * nv, petrel_get_logits(c, 0), sizeof(float) * nv);
            } else if (t + 1 < n) {
                int bi = 0;
                if (petrel_decode_mtp(c, &bi, &ids[t + 1], 1) < 0)
                    goto decode_fail;
                memcpy(out + (size_t)t * nv, petrel_get_mtp_logits(c, 0), sizeof(float) * nv);
            }
        }
    } else {
        if (petrel_decode(c, ids, NULL, n, PETREL_LOGITS_ALL) < 0)
            goto decode_fail;
        if (!mtp) {
            for (int t = 0; t < n; t++)
                memcpy(out + (size_t)t * nv, petrel_get_logits(c, t), sizeof(float) * nv);
        } else {
            int *bi = malloc(sizeof(int) * (size_t)rows);
            for (int t = 0; t < rows; t++)
                bi[t] = t;
            int rc = petrel_decode_mtp(c, bi, ids + 1, rows);
            free(bi);
            if (rc < 0)
                goto decode_fail;
            for (int t = 0; t < rows; t++)
                memcpy(out + (size_t)t * nv, petrel_get_mtp_logits(c, t), sizeof(float) * nv);
        }
    }
    FILE *f = fopen(out_path, "wb");
    if (!f || fwrite(out, sizeof(float) * nv, (size_t)rows, f) != (size_t)rows || fclose(f) != 0) {
        fprintf(stderr, "petrel logits: cannot write %s\n", out_path);
        free(out);
        goto fail;
    }
    free(out);
    free(ids);
    petrel_context_free(c);
    petrel_model_close(m);
    return 0;
decode_fail:
    fprintf(stderr, "petrel logits: %s\n", petrel_context_error(c));
fail:
    free(ids);
    petrel_context_free(c);
    petrel_model_close(m);
    return 1;
}

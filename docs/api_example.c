// docs/api_example.c — greedy generation from token ids with the C API.
// Build: cc api_example.c -I include -L build -lpetrel_core ... (see docs/api.md)
#include <stdio.h>
#include <stdlib.h>
#include "petrel.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    char err[1024];
    petrel_model *model = petrel_model_open(argv[1], NULL, err, sizeof err);
    if (!model) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    petrel_context *ctx = petrel_context_new(model, NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "context: %s\n", err);
        petrel_model_close(model);
        return 1;
    }
    petrel_sampler_params sp = petrel_sampler_default_params(); // greedy
    petrel_sampler *smp = petrel_sampler_new(&sp, petrel_model_n_vocab(model));

    petrel_token prompt[] = {1, 2, 3, 4};
    petrel_token history[64];
    int n = 4;
    for (int i = 0; i < n; i++)
        history[i] = prompt[i];

    // Prefill the prompt as one batch, then decode one token at a time.
    if (petrel_decode(ctx, prompt, NULL, n, PETREL_LOGITS_LAST) != 0)
        goto fail;
    const float *logits = petrel_get_logits(ctx, n - 1);
    for (int step = 0; step < 8; step++) {
        petrel_token next = petrel_sampler_sample(smp, logits, history, n);
        history[n++] = next;
        printf("%d%s", next, step < 7 ? "," : "\n");
        if (petrel_decode(ctx, &next, NULL, 1, PETREL_LOGITS_LAST) != 0)
            goto fail;
        logits = petrel_get_logits(ctx, 0);
    }
    petrel_print_stats(ctx, stderr);
    petrel_sampler_free(smp);
    petrel_context_free(ctx);
    petrel_model_close(model);
    return 0;
fail:
    fprintf(stderr, "decode: %s\n", petrel_context_error(ctx));
    petrel_sampler_free(smp);
    petrel_context_free(ctx);
    petrel_model_close(model);
    return 1;
}

// tests/test_kernels_model.c — the whole forward pass of tiny-dsv3 gives the
// same logits, bit for bit, on every kernel path the CPU supports (the
// numerics contract of docs/kernels.md, checked end to end): f32 weights and
// the default mix (q8_0 trunk, q4_0 experts).
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "petrel.h"
#include "tests/testutil.h"

static float *run(const char *model, const petrel_token *tok, int n, int *vocab)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 2;
    mp.no_usage = true;
    petrel_model *m = petrel_model_open(model, &mp, err, sizeof err);
    cr_assert(m, "open: %s", err);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "context: %s", err);
    *vocab = petrel_model_n_vocab(m);
    cr_assert_eq(petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    float *out = malloc(sizeof(float) * (size_t)n * (size_t)*vocab);
    for (int t = 0; t < n; t++)
        memcpy(out + (size_t)t * *vocab, petrel_get_logits(c, t), sizeof(float) * (size_t)*vocab);
    petrel_context_free(c);
    petrel_model_close(m);
    return out;
}

static void check_type(const char *type)
{
    char *model = tu_tiny_model(type);
    size_t n;
    int32_t *tok = tu_golden_i32("case2_tokens.i32.bin", &n);
    const pt_kernel_path paths[] = {PT_PATH_AVX2, PT_PATH_AVXVNNI, PT_PATH_AVX512};
    pt_kernel_set_path(PT_PATH_SCALAR);
    int vocab;
    float *ref = run(model, tok, (int)n, &vocab);
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (!pt_kernel_path_supported(paths[p])) {
            cr_log_info("kernel path %d not supported here: skipped", (int)paths[p]);
            continue;
        }
        pt_kernel_set_path(paths[p]);
        int v2;
        float *alt = run(model, tok, (int)n, &v2);
        cr_assert_eq(v2, vocab);
        cr_expect(memcmp(ref, alt, sizeof(float) * n * (size_t)vocab) == 0,
                  "%s model: logits on path %s differ from the scalar path", type, pt_kernel_path_name());
        free(alt);
    }
    pt_kernel_set_path(PT_PATH_AUTO);
    free(ref);
    free(tok);
    free(model);
}

Test(kernels_model, f32_paths_bit_identical) { check_type("f32"); }
Test(kernels_model, default_q8_q4_paths_bit_identical) { check_type("default"); }

// tests/test_llamacpp_q0.c — Q8_0 and Q4_0 products sum as ggml's x86
// kernels: on the files Petrel converts from tiny-dsv3 (--type q8_0 /
// q4_0), Petrel's logits equal llama.cpp's own on the same files
// (tests/fixtures/llamacpp/calibration/tiny-dsv3-petrel-<type>.case<K>.f32,
// README "Calibration"), bit for bit, every row of the 4 golden cases, on
// every kernel path this CPU has (scalar, AVX2, AVX-VNNI, AVX-512).
//
// The converted file must be the one llama.cpp ran: its sha256 is checked
// against the fixture manifest's calibration.petrel_files digest first.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "tests/llamacpp_cmp.h"
#include "tests/testutil/tu_kernel.h"
#include "tests/tu_sha256.h"

// manifest.json calibration.petrel_files.<type>.sha256 (reference data)
static const char *manifest_sha(const char *type)
{
    if (strcmp(type, "q8_0") == 0)
        return "225ae96046432f3b6cf80ab27a60c76a606fa65bb05db0f5067b1b1cefa42207";
    return "bb4113c01e93368c683ace56eded856b1496be2277e590fee2a0259fe76d49f7";
}

static void check_type(const char *type)
{
    char *path = tu_tiny_model(type);
    size_t len = 0;
    void *bytes = tu_read(path, &len);
    cr_assert(bytes, "%s: unreadable", path);
    char hex[65];
    tu_sha256_of(bytes, len, hex);
    free(bytes);
    cr_assert_str_eq(hex, manifest_sha(type), "%s: not the file llama.cpp's calibration logits are of", path);

    char label[32], err[1024];
    snprintf(label, sizeof label, "petrel-%s", type);
    petrel_model *m = lc_open(path, err, sizeof err);
    cr_assert(m, "%s: %s", path, err);
    for (size_t it = 0; tu_next_kernel_path(&it);) {
        for (int k = 0; k < 4; k++) {
            const int n = lc_case_len[k];
            char name[64];
            snprintf(name, sizeof name, "case%d_tokens.i32.bin", k);
            size_t nt;
            int32_t *tok = tu_golden_i32(name, &nt);
            cr_assert_eq((int)nt, n);
            float *ref = lc_fixture("calibration", label, k, "f32", (size_t)n * LC_VOCAB * sizeof(float));
            cr_assert(ref, "%s case %d: no llama.cpp logits in the fixtures", label, k);
            petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
            cr_assert(c, "%s", err);
            cr_assert_eq(petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
            for (int t = 0; t < n; t++) {
                const float d = lc_row_diff(petrel_get_logits(c, t), ref + (size_t)t * LC_VOCAB);
                cr_expect(d == 0.0f, "%s path %s case %d row %d: %g from llama.cpp's logits", type,
                          pt_kernel_path_name(), k, t, d);
            }
            petrel_context_free(c);
            free(ref);
            free(tok);
        }
    }
    petrel_model_close(m);
    free(path);
}

Test(llamacpp_q0, q8_0_logits_bit_identical, .timeout = 600) { check_type("q8_0"); }
Test(llamacpp_q0, q4_0_logits_bit_identical, .timeout = 600) { check_type("q4_0"); }

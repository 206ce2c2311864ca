// tests/testutil/tu_decode.c — see tu_decode.h.
#include "tests/testutil/tu_decode.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void hook_call(tu_decode_hook hook, void *user, bool mtp)
{
    if (hook)
        hook(user, mtp);
}

void tu_decode_case(petrel_context *c, const petrel_token *tok, int n, int vocab, bool incremental, float *logits,
                    float *mtp, tu_decode_hook hook, void *user)
{
    cr_assert(c && tok && n >= 1 && vocab >= 1 && logits);
    const size_t row = sizeof(float) * (size_t)vocab;
    if (incremental) {
        for (int t = 0; t < n; t++) {
            hook_call(hook, user, false);
            cr_assert_eq(petrel_decode(c, &tok[t], NULL, 1, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
            memcpy(logits + (size_t)t * vocab, petrel_get_logits(c, 0), row);
            if (t + 1 < n && mtp) {
                int bi = 0;
                hook_call(hook, user, true);
                cr_assert_eq(petrel_decode_mtp(c, &bi, &tok[t + 1], 1), 0, "%s", petrel_context_error(c));
                memcpy(mtp + (size_t)t * vocab, petrel_get_mtp_logits(c, 0), row);
            }
        }
        return;
    }
    hook_call(hook, user, false);
    cr_assert_eq(petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    for (int t = 0; t < n; t++)
        memcpy(logits + (size_t)t * vocab, petrel_get_logits(c, t), row);
    if (n > 1 && mtp) {
        int *bi = malloc(sizeof(int) * (size_t)(n - 1)); // draft t from batch row t
        cr_assert(bi);
        for (int t = 0; t < n - 1; t++)
            bi[t] = t;
        hook_call(hook, user, true);
        cr_assert_eq(petrel_decode_mtp(c, bi, tok + 1, n - 1), 0, "%s", petrel_context_error(c));
        for (int t = 0; t < n - 1; t++)
            memcpy(mtp + (size_t)t * vocab, petrel_get_mtp_logits(c, t), row);
        free(bi);
    }
}

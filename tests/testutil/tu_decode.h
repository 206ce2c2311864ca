// tests/testutil/tu_decode.h — running a golden case through a context the
// two ways the golden tests compare: one token per decode (each followed by
// the MTP decode of the next token) and one batch.
#ifndef PETREL_TESTS_TU_DECODE_H
#define PETREL_TESTS_TU_DECODE_H

#include <stdbool.h>

#include "petrel.h"

// Called before each decode of tu_decode_case: mtp false before a
// main-model decode, true before an MTP one (the tests point their route
// or selection recorders at the right record here).
typedef void (*tu_decode_hook)(void *user, bool mtp);

// Decodes the n tokens tok on c (empty) from position 0: incremental, one
// token per decode, each but the last followed by the MTP decode of the
// next token; else one batch, then one MTP decode of rows 0..n-2. Writes
// every position's logits to logits (n, vocab) and, when mtp is not NULL,
// the MTP logits of draft t (row t's hidden state, token t+1) to mtp
// (n-1, vocab). hook (NULL: none) runs before each decode. Aborts the test
// when a decode fails.
void tu_decode_case(petrel_context *c, const petrel_token *tok, int n, int vocab, bool incremental, float *logits,
                    float *mtp, tu_decode_hook hook, void *user);

#endif

// tests/testutil.h — helpers shared by the Criterion tests.
#ifndef PETREL_TESTS_TESTUTIL_H
#define PETREL_TESTS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "petrel.h"

// Path of a fixture under tests/fixtures/ (static buffer per call site is
// not needed: returns a malloc'ed string).
char *tu_fixture(const char *rel);
// A fresh empty temporary directory (malloc'ed path), removed by tu_rmrf.
char *tu_tmpdir(const char *tag);
void tu_rmrf(const char *path);
// Runs a shell command; returns its exit status (or -1). Output captured into
// *out (malloc'ed) when out != NULL.
int tu_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Reads a whole binary file; NULL if missing.
void *tu_read(const char *path, size_t *len);


// Path of tiny-dsv3 converted with `--type TYPE` (f32, q8_0, q4_0, or
// "default"), cached under the build directory; converted on first use
// (serialised across concurrent test processes with a lock file). Aborts the
// test on failure. Returns a malloc'ed path.
char *tu_tiny_model(const char *type);
// `petrel synth --preset PRESET` converted with default types, cached the
// same way (e.g. "tiny" with a tokenizer and chat template, "small").
char *tu_synth_model(const char *preset);
// Reads a float32 golden file of tiny-dsv3 (e.g. "case1_logits.f32.bin").
float *tu_golden_f32(const char *name, size_t *count);
int32_t *tu_golden_i32(const char *name, size_t *count);

// The tokens of one generation: tu_collect_token is the petrel_token_fn
// that appends to a tu_tokens (user); past TU_MAX_TOKENS it only counts.
#define TU_MAX_TOKENS 256
typedef struct tu_tokens {
    petrel_token t[TU_MAX_TOKENS];
    int n;
} tu_tokens;
int tu_collect_token(void *user, petrel_token t);
// Asserts that two generations gave the same tokens; what names the case.
void tu_expect_same_tokens(const tu_tokens *a, const tu_tokens *b, const char *what);

#endif

// tests/testutil.h — helpers shared by the Criterion tests.
#ifndef PETREL_TESTS_TESTUTIL_H
#define PETREL_TESTS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

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

#endif

// fuzz/fuzz_util.h — helpers shared by the libFuzzer targets (fuzz/*.c).
//
// Most Petrel parsers read a path (they pread, mmap or fopen it), so a
// target writes the fuzzer's bytes to a scratch file first. Each process
// gets its own scratch folder under $TMPDIR (or /tmp), made once; the file
// is rewritten in place per input, so there is no allocation per call.
#ifndef PETREL_FUZZ_UTIL_H
#define PETREL_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

// The scratch folder of this process ("/tmp/petrel-fuzz-<pid>"), created on
// first use and removed at exit.
const char *fz_dir(void);
// Writes data to fz_dir()/name (truncating it) and returns the path (a
// static buffer per name slot: valid until the next call with that slot).
// Aborts on an I/O error: that is the harness failing, not the parser.
const char *fz_write(const char *name, const uint8_t *data, size_t size);
// A path under the repository (PETREL_SOURCE_DIR), e.g. a fixture.
const char *fz_src(const char *rel);

#endif

// tests/testutil/tu_ecache.h — the fixture of the expert-cache tests: a
// temporary file of known bytes, the expert slices laid out in it, and a
// reader on it; each test picks its own byte pattern, sizes and backend.
#ifndef PETREL_TESTS_TU_ECACHE_H
#define PETREL_TESTS_TU_ECACHE_H

#include <stdint.h>

#include "cache/ecache.h"
#include "io/reader.h"

// The byte at file offset pos (the test's pattern, so a read can be
// checked against the offset it came from).
typedef unsigned char (*tu_byte_fn)(uint64_t pos);

typedef struct tu_ecache_file {
    char *dir, *path; // a fresh temporary directory and the file dir/m.bin in it
    pt_reader *rd;    // a reader on path
} tu_ecache_file;

// Lays one MoE layer of n_expert experts out from file offset off: the
// gate, up and down tensors one after the other, each n_expert slices of
// bytes[k] (stride 0: packed), gap bytes after each tensor. Zeroes *s
// first. Returns the offset after the last gap.
uint64_t tu_ecache_layer(pt_ecache_layer_src *s, int n_expert, uint64_t off, const uint64_t bytes[3], uint64_t gap);

// Creates tu_tmpdir(tag)/m.bin of size bytes, byte i = byte_at(i) (zeros
// when byte_at is NULL), and opens a reader on it with backend io. Aborts
// the test on failure. tu_ecache_file_close undoes it.
void tu_ecache_file_open(tu_ecache_file *f, const char *tag, uint64_t size, tu_byte_fn byte_at, pt_io_mode io);
// Closes the reader and removes the directory.
void tu_ecache_file_close(tu_ecache_file *f);

// Asserts that w[k] (what the cache gave for layer l's expert e, the three
// slices of s) hold the file's bytes at that expert's offsets under s's
// strides.
void tu_ecache_check_slices(const pt_ecache_layer_src *s, int l, int e, const void *const w[3], tu_byte_fn byte_at);

#endif

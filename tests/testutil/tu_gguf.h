// tests/testutil/tu_gguf.h — writing edited copies of a GGUF file: the
// tests that make variants of a model (other layouts, broken files, split
// parts) describe the new file with a gguf_writer and take the tensor bytes
// from the original.
#ifndef PETREL_TESTS_TU_GGUF_H
#define PETREL_TESTS_TU_GGUF_H

#include <stdint.h>

#include "format/gguf.h"

// Makes the bytes of tensor j of the new file, which has no source tensor
// (src_of[j] < 0, passed as src): writes size bytes at buf (zeroed).
typedef void (*tu_gguf_make_fn)(void *user, const gguf_file *g, int j, int src, void *buf, uint64_t size);

// Writes the file path that w describes (O_TRUNC): w's header, then each of
// w's n tensors j at its offset: the first gguf_writer_tensor_size(w, j)
// bytes of g's tensor src_of[j] when src_of[j] >= 0, else what make writes
// (zeros when make is NULL); src_of NULL stands for src_of[j] = j below g's
// tensor count and -1 from there. Then the file is extended to w's total
// size. Aborts the test on a read or write error.
void tu_gguf_write(const char *path, gguf_writer *w, const gguf_file *g, const int *src_of, int n,
                   tu_gguf_make_fn make, void *user);

#endif

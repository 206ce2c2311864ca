// io/io.h — reading byte ranges of the model file(s).
//
// The synchronous path: pread with retries on EINTR/EAGAIN and short reads.
// (The O_DIRECT io_uring reader, io/reader.h, builds on this contract.)
//
// Located offsets: a model may live in several files (llama.cpp's split
// GGUF, NAME-0000K-of-0000N.gguf). A byte position is then one u64 that
// carries the file's index in its top 16 bits and the offset in that file
// in the low 48 (256 TiB per file). For a single file (index 0) a located
// offset is the plain file offset, so code that never sees split files is
// unchanged. Alignment arithmetic (off % 4096) works on located offsets
// as on plain ones, and a range never crosses into another file's bits.
#ifndef PETREL_IO_IO_H
#define PETREL_IO_IO_H

#include <stdint.h>
#include "common/err.h"

#define PT_LOC_SHIFT 48
#define PT_LOC_MAX_FILES 65535u
static inline uint64_t pt_loc(uint32_t file, uint64_t off) { return ((uint64_t)file << PT_LOC_SHIFT) | off; }
static inline uint32_t pt_loc_file(uint64_t loc) { return (uint32_t)(loc >> PT_LOC_SHIFT); }
static inline uint64_t pt_loc_off(uint64_t loc) { return loc & (((uint64_t)1 << PT_LOC_SHIFT) - 1); }

// Reads exactly len bytes at off into buf; retries short reads and EINTR /
// EAGAIN. -1 + err naming path and offset on failure or end of file.
int pt_pread_full(int fd, const char *path, uint64_t off, void *buf, uint64_t len, pt_err *err);

#endif

// io/io.h — reading byte ranges of the model file.
//
// The synchronous path used for now: pread with retries on EINTR/EAGAIN
// and short reads. (The O_DIRECT io_uring machinery of the streaming issue
// builds on this contract.)
#ifndef PETREL_IO_IO_H
#define PETREL_IO_IO_H

#include <stdint.h>
#include "common/err.h"

// Reads exactly len bytes at off into buf; retries short reads and EINTR /
// EAGAIN. -1 + err naming path and offset on failure or end of file.
int pt_pread_full(int fd, const char *path, uint64_t off, void *buf, uint64_t len, pt_err *err);

#endif

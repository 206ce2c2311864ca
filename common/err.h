// common/err.h — the one error-report convention of Petrel.
//
// Functions that can fail on bad input take a `pt_err *` and return a
// negative value (or NULL); the message names the file and the field or
// tensor at fault, e.g. "model.gguf: tensor 'blk.3.attn_k_b.weight': shape
// {32,160,4} != expected {48,160,4}". Callers print err.msg as is.
#ifndef PETREL_COMMON_ERR_H
#define PETREL_COMMON_ERR_H

#include <stddef.h>

typedef struct pt_err {
    char msg[1024];
} pt_err;

// Formats a message into err (if err is non-NULL) and returns -1 so that
// callers can write `return pt_errf(err, "...", ...);`.
int pt_errf(pt_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

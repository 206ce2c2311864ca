// io/reader_int.h — internals shared by the reader core (io/reader.c) and
// its backends (io/reader_uring.c, io/reader_pool.c). Not a public header.
#ifndef PETREL_IO_READER_INT_H
#define PETREL_IO_READER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/io.h"
#include "io/reader.h"

// One read the caller asked for; split into device requests (chunks).
typedef struct rd_read {
    uint64_t tag;           // caller's tag
    uint64_t off, len;      // the bytes asked for
    int chunks_left;        // chunks not yet finished
    int err;                // errno of the first failed chunk (0 = fine)
    uint64_t err_off;       // file offset of that chunk
    bool used;
} rd_read;

// One device request: [foff, foff + len) into dst; at least `need` bytes
// must arrive (a range that runs past the end of the file stops early).
typedef struct rd_chunk {
    int read;               // index into reads
    uint64_t foff, len;     // aligned file range
    uint64_t need;          // bytes of the range that hold asked-for data
    unsigned char *dst;     // (len,) aligned destination
    uint64_t done;          // bytes already read
    uint64_t hwm;           // furthest byte (relative) any attempt reached
    int attempts;           // failed attempts (errors, unexpected EOF)
    int again;              // EAGAIN/EINTR resubmissions
    bool used;
} rd_chunk;

// A FIFO of ints (chunk or read indices).
typedef struct rd_fifo {
    int *v;                 // (cap,) ring
    int head, n, cap;
} rd_fifo;

int rd_fifo_push(rd_fifo *q, int x);
int rd_fifo_push_front(rd_fifo *q, int x);
int rd_fifo_pop(rd_fifo *q); // -1 when empty
void rd_fifo_free(rd_fifo *q);

typedef struct rd_backend {
    // Starts chunk id's remaining bytes: 0 started, 1 no room now, -1 error.
    int (*submit)(pt_reader *r, int id);
    // Makes started requests visible to the device.
    void (*flush)(pt_reader *r);
    // Next device completion: 1 with *id and *res (bytes or -errno), 0 none
    // (only when !block or nothing is in flight).
    int (*wait)(pt_reader *r, bool block, int *id, int64_t *res);
    void (*close)(pt_reader *r);
    // Optional: registers [base, base + len) for fixed-buffer reads (0), or
    // -1; len 0 unregisters.
    int (*reg)(pt_reader *r, void *base, uint64_t len);
} rd_backend;

struct pt_reader {
    char *path;             // = paths[0] (messages about the reader itself)
    int n_files;            // files a located offset (io/io.h) may name
    char **paths;           // (n_files,)
    int *fds;               // (n_files,) descriptors reads use
    int *fds_plain;         // (n_files,) ordinary descriptors (for hints, or == fds[i])
    bool direct;            // every fds[i] is O_DIRECT
    pt_io_mode mode;
    int qd;
    uint64_t max_request;
    const rd_backend *be;
    void *be_state;         // backend's own state
    rd_read *reads;         // (n_reads_cap,)
    int n_reads_cap;
    rd_chunk *chunks;       // (n_chunks_cap,)
    int n_chunks_cap;
    rd_fifo free_reads, free_chunks;
    rd_fifo pending;        // chunks waiting for room in the backend
    rd_fifo finished;       // reads ready to be returned
    int inflight_reads;     // submitted and not yet returned
    int dev_inflight;       // chunks handed to the backend
    double t_mark;          // when dev_inflight last changed (pt_now)
    bool registered;        // a fixed-buffer region is registered
    pt_reader_stats st;
};

// The descriptor and in-file offset of a located offset.
static inline int rd_fd(const pt_reader *r, uint64_t loc) { return r->fds[pt_loc_file(loc)]; }

int rd_uring_start(pt_reader *r, pt_err *err);
int rd_pool_start(pt_reader *r, int n_threads, pt_err *err);

#endif

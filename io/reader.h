// io/reader.h — asynchronous, completion-driven reads of byte ranges of the
// model file (routed-expert slices).
//
// Three backends chosen at run time:
//   PT_IO_URING     io_uring on an O_DIRECT descriptor, many reads in flight
//   PT_IO_POOL      a pool of threads doing pread on the O_DIRECT descriptor
//                   (the fallback when io_uring_queue_init fails)
//   PT_IO_BUFFERED  the pool on an ordinary descriptor: the page cache acts as
//                   a free second-level cache; WILLNEED hints are issued in
//                   pieces of at most 4 MiB (one larger hint loads only
//                   read_ahead_kb on this kernel)
// PT_IO_AUTO tries io_uring, then the pool. When the file system refuses
// O_DIRECT the ordinary descriptor is used instead (still asynchronous).
//
// Several files (a split model): offsets are located offsets (io/io.h),
// naming the file in their top bits; with one file they are plain offsets.
//
// Every read goes through its enclosing 4 KiB-aligned range: the caller
// gives a 4 KiB-aligned destination with room for pt_io_span(off, len)
// bytes and finds the bytes at dst + pt_io_head(off). Reads are split into
// device requests of at most max_request bytes.
//
// Completion-driven: submit any number of reads, then pt_reader_wait returns
// them one at a time in the order they finish. Short reads and -EAGAIN /
// -EINTR are resubmitted; other errors are retried a few times, then the
// read is reported failed (file, offset, strerror). A read is only reported
// (done or failed) when none of its device requests is still in flight, so
// its destination may be reused right away. Single-threaded use: one thread
// submits and waits.
#ifndef PETREL_IO_READER_H
#define PETREL_IO_READER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/util.h"

typedef enum pt_io_mode {
    PT_IO_AUTO = 0,
    PT_IO_URING = 1,
    PT_IO_POOL = 2,
    PT_IO_BUFFERED = 3,
} pt_io_mode;

typedef struct pt_reader_cfg {
    const char *path;       // file to read (when n_paths == 0)
    const char *const *paths; // (n_paths,) files of a split model: offsets given to
    int n_paths;            // pt_reader_submit are located (io/io.h), file i = paths[i]
    pt_io_mode mode;        // backend (AUTO: io_uring, else the pool)
    int queue_depth;        // device requests in flight; 0 = 32
    uint64_t max_request;   // bytes per device request (multiple of 4 KiB); 0 = 2 MiB
    int n_threads;          // pool threads; 0 = min(queue_depth, 16)
} pt_reader_cfg;

typedef struct pt_reader_stats {
    uint64_t reads;         // reads completed
    uint64_t requests;      // device requests completed
    uint64_t bytes;         // bytes transferred by the device (aligned ranges)
    uint64_t retries;       // requests resubmitted (short, EAGAIN, errors)
    uint64_t failures;      // reads reported failed
    double busy_s;          // time with at least one device request in flight
    double inflight_s;      // integral of device requests in flight over time
                            // (inflight_s / busy_s = mean queue depth while busy)
} pt_reader_stats;

typedef struct pt_reader pt_reader;

static inline uint64_t pt_io_head(uint64_t off) { return off % PT_ALIGN; }
static inline uint64_t pt_io_span(uint64_t off, uint64_t len)
{
    return pt_align_up(off + len, PT_ALIGN) - (off - off % PT_ALIGN);
}

// Opens path (or every one of paths) for reading with the configured
// backend. NULL + err when a file cannot be opened or no backend can be
// started. O_DIRECT is used only when every file takes it.
pt_reader *pt_reader_open(const pt_reader_cfg *cfg, pt_err *err);
// Waits for reads still in flight, then releases everything.
void pt_reader_close(pt_reader *r);

pt_io_mode pt_reader_mode(const pt_reader *r); // the backend in use (never AUTO)
bool pt_reader_direct(const pt_reader *r);     // O_DIRECT in use
const char *pt_io_mode_name(pt_io_mode m);
// Parses "auto", "uring", "pool", "buffered"; -1 if unknown.
int pt_io_mode_parse(const char *s);

// Starts reading len bytes at file offset off; dst is 4 KiB-aligned with
// room for pt_io_span(off, len) bytes. tag is returned by pt_reader_wait.
// -1 + err only when out of memory.
int pt_reader_submit(pt_reader *r, uint64_t tag, uint64_t off, uint64_t len, void *dst, pt_err *err);
// Waits for the next finished read: 1 with *tag set; 0 when nothing is in
// flight; -1 with *tag set and err naming file, offset and cause when that
// read failed after its retries.
int pt_reader_wait(pt_reader *r, uint64_t *tag, pt_err *err);
// Like pt_reader_wait but returns 0 at once when nothing has finished yet.
int pt_reader_poll(pt_reader *r, uint64_t *tag, pt_err *err);
int pt_reader_inflight(const pt_reader *r); // reads submitted and not yet returned

void pt_reader_get_stats(const pt_reader *r, pt_reader_stats *s);
// io_uring only: registers [base, base + len) (4 KiB-aligned, e.g. the
// expert cache's memory) so that reads into it use fixed buffers, whose
// pages the kernel pinned once, instead of pinning them at every read.
// 0 when registered; -1 when not (other backend, memlock limit): reads work
// the same either way. len 0 unregisters; call it before freeing the memory
// (no reads into it may be in flight).
int pt_reader_register(pt_reader *r, void *base, uint64_t len);
bool pt_reader_registered(const pt_reader *r);

#endif

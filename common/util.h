// common/util.h — small helpers used everywhere: aligned memory, clocks,
// resident-memory readings, durable file writes, progress reporting.
#ifndef PETREL_COMMON_UTIL_H
#define PETREL_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "common/err.h"

#define PT_ALIGN 4096u

// 4 KiB-aligned allocation (suitable for O_DIRECT); NULL on failure.
// Memory is pre-faulted (touched) so that no page faults happen later.
void *pt_alloc_aligned(size_t bytes);
// Like pt_alloc_aligned but not pre-faulted: for buffers that are filled
// right away anyway (expert slots: the read faults each page in once).
void *pt_alloc_aligned_lazy(size_t bytes);
void pt_free_aligned(void *p);

static inline uint64_t pt_align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

double pt_now(void);                 // monotonic seconds
uint64_t pt_rss_bytes(void);         // current resident set size
uint64_t pt_peak_rss_bytes(void);    // peak resident set size (VmHWM)
uint64_t pt_mem_available(void);     // MemAvailable from /proc/meminfo

// Whether environment variable `name` is "off" (an engine toggle for A/B
// and tests), read once into *cache (-1 before the first read).
bool pt_env_off(const char *name, int *cache);

// Parses sizes like "3G", "512M", "1.5GiB", "4096" into bytes; -1 on error.
int64_t pt_parse_size(const char *s);

// Reads a whole file into a NUL-terminated heap buffer; NULL + err on failure.
char *pt_read_file(const char *path, size_t *len, pt_err *err);

// Writes buf to path durably: writes "<path>.tmp.<pid>", fsyncs it, renames
// it over path and fsyncs the directory. Never leaves a partial file at path.
// After the rename, "<path>.tmp.<digits>" files over an hour old (left by
// writers killed mid-write) are removed.
int pt_write_file_atomic(const char *path, const void *buf, size_t len, pt_err *err);
// The same with the fault-injection site (common/fault.h) of its writes and
// fsync named (pt_write_file_atomic uses "atomic.write"); on any failure
// the temp file is removed and path keeps what it held.
int pt_write_file_atomic_at(const char *path, const void *buf, size_t len, const char *site, pt_err *err);

// fsync the directory containing path (after a rename or unlink).
int pt_fsync_dir_of(const char *path);

// Progress reporting: a bar on a terminal (stderr is a TTY), plain lines
// otherwise (at most one line per `plain_interval` seconds).
typedef struct pt_progress {
    const char *label;
    uint64_t total;      // units (bytes) expected
    uint64_t done;
    double t0, last;
    bool tty;
} pt_progress;
void pt_progress_begin(pt_progress *p, const char *label, uint64_t total);
void pt_progress_update(pt_progress *p, uint64_t done, const char *detail);
void pt_progress_end(pt_progress *p, const char *detail);

#endif

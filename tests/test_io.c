// tests/test_io.c — the asynchronous reader (io/reader.h) against plain
// memory: a file of known bytes (a position hash) is read back through every
// backend at unaligned offsets and lengths, with many reads in flight, with
// injected short reads and transient errors (bytes must still be exact), and
// with persistent errors and reads past the end of the file (a clear error
// naming file and offset, never a crash).
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/util.h"
#include "io/reader.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_fault.h"

#define FILE_BYTES (3u * 1024 * 1024 + 123) // deliberately not a multiple of 4 KiB

static unsigned char byte_at(uint64_t pos) { return (unsigned char)((pos * 2654435761u) >> 13); }

static char *make_file(char **dir)
{
    *dir = tu_tmpdir("io");
    cr_assert(*dir);
    char *path = malloc(strlen(*dir) + 16);
    sprintf(path, "%s/data.bin", *dir);
    unsigned char *buf = malloc(FILE_BYTES);
    for (uint64_t i = 0; i < FILE_BYTES; i++)
        buf[i] = byte_at(i);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(buf, 1, FILE_BYTES, f), FILE_BYTES);
    fclose(f);
    free(buf);
    return path;
}

typedef struct rq {
    uint64_t off, len;
    unsigned char *dst;
    int done;
} rq;

// Submits n reads at once, waits for all, checks every byte.
static void read_many(pt_reader *r, rq *q, int n)
{
    pt_err err = {{0}};
    for (int i = 0; i < n; i++) {
        q[i].dst = pt_alloc_aligned(pt_io_span(q[i].off, q[i].len));
        q[i].done = 0;
        cr_assert_eq(pt_reader_submit(r, (uint64_t)i, q[i].off, q[i].len, q[i].dst, &err), 0, "%s", err.msg);
    }
    for (int k = 0; k < n; k++) {
        uint64_t tag = 999;
        int rc = pt_reader_wait(r, &tag, &err);
        cr_assert_eq(rc, 1, "wait %d: rc %d: %s", k, rc, err.msg);
        cr_assert(tag < (uint64_t)n && !q[tag].done, "bad tag %llu", (unsigned long long)tag);
        q[tag].done = 1;
        const unsigned char *p = q[tag].dst + pt_io_head(q[tag].off);
        for (uint64_t j = 0; j < q[tag].len; j++)
            cr_assert_eq(p[j], byte_at(q[tag].off + j), "read %llu byte %llu", (unsigned long long)tag,
                         (unsigned long long)j);
    }
    uint64_t tag;
    cr_assert_eq(pt_reader_wait(r, &tag, &err), 0);
    for (int i = 0; i < n; i++)
        pt_free_aligned(q[i].dst);
}

static void fill_requests(rq *q, int n)
{
    uint64_t s = 12345;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t len = 1 + (s >> 33) % (700 * 1024);
        uint64_t off = (s >> 11) % (FILE_BYTES - len);
        if (i % 5 == 0)
            off -= off % 4096; // some aligned
        q[i].off = off;
        q[i].len = len;
    }
    q[0].off = FILE_BYTES - 1000; // ends exactly at the (unaligned) end of file
    q[0].len = 1000;
}

// Reads through backend mode; with faults, EIOs of completions 3 and 4 and
// every 4th completion short (tu_arm_read_faults).
static void check_mode(pt_io_mode mode, bool faults)
{
    char *dir, *path = make_file(&dir);
    pt_err err = {{0}};
    pt_reader_cfg cfg = {.path = path, .mode = mode, .queue_depth = 8, .max_request = 256 * 1024};
    pt_reader *r = pt_reader_open(&cfg, &err);
    cr_assert(r, "%s", err.msg);
    if (mode != PT_IO_AUTO)
        cr_assert_eq(pt_reader_mode(r), mode);
    if (faults)
        tu_arm_read_faults(3, 2, 4);
    enum { N = 40 };
    rq q[N];
    fill_requests(q, N);
    read_many(r, q, N);
    pt_reader_stats st;
    pt_reader_get_stats(r, &st);
    cr_assert_eq(st.reads, N);
    // queue-depth accounting: some time with requests in flight, never
    // more of them on average than the queue holds
    cr_assert(st.busy_s > 0 && st.inflight_s >= st.busy_s, "busy %g inflight %g", st.busy_s, st.inflight_s);
    cr_assert_leq(st.inflight_s / st.busy_s, 8.0 + 1e-9);
    if (faults) {
        cr_assert(pt_fault_injected() > 0 && st.retries > 0, "no retries happened under fault injection");
        pt_fault_disarm();
    }
    pt_reader_close(r);
    tu_rmrf(dir);
    free(dir);
    free(path);
}

Test(io, uring_reads_exact_bytes) { check_mode(PT_IO_URING, false); }
Test(io, pool_reads_exact_bytes) { check_mode(PT_IO_POOL, false); }
Test(io, buffered_reads_exact_bytes) { check_mode(PT_IO_BUFFERED, false); }

Test(io, short_reads_and_transient_errors_are_retried)
{
    check_mode(PT_IO_URING, true);
    check_mode(PT_IO_POOL, true);
    check_mode(PT_IO_BUFFERED, true);
}

Test(io, persistent_error_is_reported)
{
    char *dir, *path = make_file(&dir);
    pt_io_mode modes[3] = {PT_IO_URING, PT_IO_POOL, PT_IO_BUFFERED};
    for (int m = 0; m < 3; m++) {
        pt_err err = {{0}};
        pt_reader_cfg cfg = {.path = path, .mode = modes[m], .queue_depth = 4};
        pt_reader *r = pt_reader_open(&cfg, &err);
        cr_assert(r, "%s", err.msg);
        tu_arm_read_faults(1, 1000, 0);
        unsigned char *dst = pt_alloc_aligned(pt_io_span(5000, 9000));
        cr_assert_eq(pt_reader_submit(r, 7, 5000, 9000, dst, &err), 0);
        uint64_t tag = 0;
        cr_assert_eq(pt_reader_wait(r, &tag, &err), -1);
        cr_assert_eq(tag, 7);
        cr_assert(strstr(err.msg, path) && strstr(err.msg, "offset 5000") && strstr(err.msg, "Input/output error"),
                  "message: %s", err.msg);
        // A later good read on the same reader still works.
        pt_fault_disarm();
        rq q[3];
        fill_requests(q, 3);
        read_many(r, q, 3);
        pt_free_aligned(dst);
        pt_reader_close(r);
    }
    tu_rmrf(dir);
    free(dir);
    free(path);
}

Test(io, read_past_end_of_file_is_an_error)
{
    char *dir, *path = make_file(&dir);
    pt_err err = {{0}};
    pt_reader_cfg cfg = {.path = path, .mode = PT_IO_AUTO};
    pt_reader *r = pt_reader_open(&cfg, &err);
    cr_assert(r, "%s", err.msg);
    unsigned char *dst = pt_alloc_aligned(pt_io_span(FILE_BYTES - 100, 5000));
    cr_assert_eq(pt_reader_submit(r, 1, FILE_BYTES - 100, 5000, dst, &err), 0);
    uint64_t tag;
    cr_assert_eq(pt_reader_wait(r, &tag, &err), -1);
    cr_assert(strstr(err.msg, "end of file") && strstr(err.msg, path), "message: %s", err.msg);
    pt_free_aligned(dst);
    pt_reader_close(r);
    tu_rmrf(dir);
    free(dir);
    free(path);
}

// pt_reader_poll never blocks: right after a submit it may or may not find
// the read finished, and the read is returned exactly once either way.
Test(io, poll_returns_each_read_once_without_blocking)
{
    char *dir, *path = make_file(&dir);
    pt_err err = {{0}};
    pt_reader_cfg cfg = {.path = path, .mode = PT_IO_URING, .queue_depth = 4};
    pt_reader *r = pt_reader_open(&cfg, &err);
    cr_assert(r, "%s", err.msg);
    uint64_t tag;
    cr_assert_eq(pt_reader_poll(r, &tag, &err), 0); // nothing in flight
    unsigned char *dst = pt_alloc_aligned(pt_io_span(5000, 200000));
    cr_assert_eq(pt_reader_submit(r, 7, 5000, 200000, dst, &err), 0);
    int got = 0;
    for (int spin = 0; spin < 100000000 && !got; spin++) {
        int rc = pt_reader_poll(r, &tag, &err);
        cr_assert_geq(rc, 0, "%s", err.msg);
        if (rc == 1) {
            cr_assert_eq(tag, 7);
            got = 1;
        }
    }
    cr_assert(got, "the read never finished");
    cr_assert_eq(pt_reader_poll(r, &tag, &err), 0);
    cr_assert_eq(pt_reader_inflight(r), 0);
    for (uint64_t j = 0; j < 200000; j++)
        cr_assert_eq(dst[pt_io_head(5000) + j], byte_at(5000 + j));
    pt_free_aligned(dst);
    pt_reader_close(r);
    tu_rmrf(dir);
    free(dir);
    free(path);
}

// Reads into a registered region (fixed buffers) and across its edge are
// exact; the pool backend refuses registration and reads the same.
Test(io, registered_buffers_read_exact_bytes)
{
    char *dir, *path = make_file(&dir);
    for (int mode = PT_IO_URING; mode <= PT_IO_POOL; mode++) {
        pt_err err = {{0}};
        pt_reader_cfg cfg = {.path = path, .mode = (pt_io_mode)mode, .queue_depth = 8, .max_request = 256 * 1024};
        pt_reader *r = pt_reader_open(&cfg, &err);
        cr_assert(r, "%s", err.msg);
        const uint64_t len = 2u << 20;
        unsigned char *base = pt_alloc_aligned(len + (1u << 20));
        int rc = pt_reader_register(r, base, len);
        if (mode == PT_IO_POOL)
            cr_assert_eq(rc, -1);
        cr_assert_eq(pt_reader_registered(r), rc == 0);
        // one read inside the region, one that runs past its end
        const uint64_t off[2] = {4097, 1000000}, n[2] = {300000, 900000};
        unsigned char *dst[2] = {base + 8192, base + len - 4096 * 4};
        for (int i = 0; i < 2; i++)
            cr_assert_eq(pt_reader_submit(r, (uint64_t)i, off[i], n[i], dst[i], &err), 0, "%s", err.msg);
        for (int i = 0; i < 2; i++) {
            uint64_t tag;
            cr_assert_eq(pt_reader_wait(r, &tag, &err), 1, "%s", err.msg);
        }
        for (int i = 0; i < 2; i++)
            for (uint64_t j = 0; j < n[i]; j++)
                cr_assert_eq(dst[i][pt_io_head(off[i]) + j], byte_at(off[i] + j), "mode %d read %d byte %llu", mode,
                             i, (unsigned long long)j);
        cr_assert_eq(pt_reader_register(r, NULL, 0), mode == PT_IO_POOL ? -1 : 0);
        pt_reader_close(r);
        pt_free_aligned(base);
    }
    tu_rmrf(dir);
    free(dir);
    free(path);
}

Test(io, unknown_mode_names)
{
    cr_assert_eq(pt_io_mode_parse("uring"), PT_IO_URING);
    cr_assert_eq(pt_io_mode_parse("pool"), PT_IO_POOL);
    cr_assert_eq(pt_io_mode_parse("buffered"), PT_IO_BUFFERED);
    cr_assert_eq(pt_io_mode_parse("mmap"), -1);
}

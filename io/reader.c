// io/reader.c — the reader core: splitting reads into aligned device
// requests, resubmitting short / interrupted ones, retrying errors, fault
// injection, and returning whole reads in completion order. Backends live in
// reader_uring.c and reader_pool.c.
#include "io/reader.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fault.h"
#include "io/reader_int.h"

enum { MAX_ATTEMPTS = 4, MAX_AGAIN = 100000 };

// ---- FIFO -------------------------------------------------------------------

static int fifo_grow(rd_fifo *q)
{
    if (q->n < q->cap)
        return 0;
    int cap = q->cap ? 2 * q->cap : 64;
    int *v = malloc(sizeof(int) * (size_t)cap);
    if (!v)
        return -1;
    for (int i = 0; i < q->n; i++)
        v[i] = q->v[(q->head + i) % q->cap];
    free(q->v);
    q->v = v;
    q->head = 0;
    q->cap = cap;
    return 0;
}

int rd_fifo_push(rd_fifo *q, int x)
{
    if (fifo_grow(q) < 0)
        return -1;
    q->v[(q->head + q->n) % q->cap] = x;
    q->n++;
    return 0;
}

int rd_fifo_push_front(rd_fifo *q, int x)
{
    if (fifo_grow(q) < 0)
        return -1;
    q->head = (q->head + q->cap - 1) % q->cap;
    q->v[q->head] = x;
    q->n++;
    return 0;
}

int rd_fifo_pop(rd_fifo *q)
{
    if (q->n == 0)
        return -1;
    int x = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return x;
}

void rd_fifo_free(rd_fifo *q)
{
    free(q->v);
    memset(q, 0, sizeof *q);
}

// ---- names ------------------------------------------------------------------

const char *pt_io_mode_name(pt_io_mode m)
{
    switch (m) {
    case PT_IO_URING: return "io_uring";
    case PT_IO_POOL: return "pread-pool";
    case PT_IO_BUFFERED: return "buffered";
    default: return "auto";
    }
}

int pt_io_mode_parse(const char *s)
{
    if (!strcmp(s, "auto"))
        return PT_IO_AUTO;
    if (!strcmp(s, "uring") || !strcmp(s, "io_uring"))
        return PT_IO_URING;
    if (!strcmp(s, "pool") || !strcmp(s, "pread"))
        return PT_IO_POOL;
    if (!strcmp(s, "buffered"))
        return PT_IO_BUFFERED;
    return -1;
}

// ---- open / close -------------------------------------------------------------

// Opens file i plainly and, unless buffered, with O_DIRECT (kept in
// fds[i] only if every file takes it; see pt_reader_open).
static int open_file(pt_reader *r, int i, const char *path, bool want_direct, int *direct_fd, pt_err *err)
{
    r->paths[i] = strdup(path);
    r->fds_plain[i] = open(path, O_RDONLY | O_CLOEXEC);
    if (!r->paths[i] || r->fds_plain[i] < 0)
        return pt_errf(err, "%s: cannot open: %s", path, r->paths[i] ? strerror(errno) : "out of memory");
    r->fds[i] = r->fds_plain[i];
    *direct_fd = want_direct ? open(path, O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
    return 0;
}

pt_reader *pt_reader_open(const pt_reader_cfg *cfg, pt_err *err)
{
    assert(cfg && (cfg->path || cfg->n_paths > 0));
    const int nf = cfg->n_paths > 0 ? cfg->n_paths : 1;
    assert((unsigned)nf <= PT_LOC_MAX_FILES);
    pt_reader *r = calloc(1, sizeof *r);
    int *dfd = calloc((size_t)nf, sizeof *dfd);
    if (r) {
        r->paths = calloc((size_t)nf, sizeof *r->paths);
        r->fds = malloc(sizeof(int) * (size_t)nf);
        r->fds_plain = malloc(sizeof(int) * (size_t)nf);
    }
    if (!r || !dfd || !r->paths || !r->fds || !r->fds_plain) {
        pt_errf(err, "out of memory");
        free(dfd);
        if (r) {
            free(r->paths);
            free(r->fds);
            free(r->fds_plain);
            free(r);
        }
        return NULL;
    }
    for (int i = 0; i < nf; i++)
        r->fds[i] = r->fds_plain[i] = dfd[i] = -1;
    r->n_files = nf;
    r->qd = cfg->queue_depth > 0 ? cfg->queue_depth : 32;
    r->max_request = cfg->max_request ? pt_align_up(cfg->max_request, PT_ALIGN) : (2u << 20);
    bool direct = cfg->mode != PT_IO_BUFFERED;
    for (int i = 0; i < nf; i++) {
        if (open_file(r, i, cfg->n_paths > 0 ? cfg->paths[i] : cfg->path, direct, &dfd[i], err) < 0) {
            free(dfd);
            goto fail;
        }
        direct = direct && dfd[i] >= 0;
    }
    // All O_DIRECT or none: short-read resumption (on_completion) aligns by
    // one rule for every file.
    for (int i = 0; i < nf; i++) {
        if (direct)
            r->fds[i] = dfd[i];
        else if (dfd[i] >= 0)
            close(dfd[i]);
    }
    free(dfd);
    r->direct = direct;
    r->path = strdup(r->paths[0]);
    int n_threads = cfg->n_threads > 0 ? cfg->n_threads : (r->qd < 16 ? r->qd : 16);
    pt_err e2 = {{0}};
    if (cfg->mode == PT_IO_AUTO || cfg->mode == PT_IO_URING) {
        if (rd_uring_start(r, &e2) == 0) {
            r->mode = PT_IO_URING;
            return r;
        }
        if (cfg->mode == PT_IO_URING) {
            pt_errf(err, "%s", e2.msg);
            goto fail;
        }
    }
    if (rd_pool_start(r, n_threads, err) < 0)
        goto fail;
    r->mode = cfg->mode == PT_IO_BUFFERED ? PT_IO_BUFFERED : PT_IO_POOL;
    return r;
fail:
    pt_reader_close(r);
    return NULL;
}

void pt_reader_close(pt_reader *r)
{
    if (!r)
        return;
    if (r->be) {
        uint64_t tag;
        pt_err e;
        while (pt_reader_wait(r, &tag, &e) != 0) {
        }
        r->be->close(r);
    }
    for (int i = 0; i < r->n_files; i++) {
        if (r->fds[i] >= 0 && r->fds[i] != r->fds_plain[i])
            close(r->fds[i]);
        if (r->fds_plain[i] >= 0)
            close(r->fds_plain[i]);
        free(r->paths[i]);
    }
    free(r->paths);
    free(r->fds);
    free(r->fds_plain);
    free(r->reads);
    free(r->chunks);
    rd_fifo_free(&r->free_reads);
    rd_fifo_free(&r->free_chunks);
    rd_fifo_free(&r->pending);
    rd_fifo_free(&r->finished);
    free(r->path);
    free(r);
}

pt_io_mode pt_reader_mode(const pt_reader *r) { return r->mode; }
bool pt_reader_direct(const pt_reader *r) { return r->direct; }
int pt_reader_inflight(const pt_reader *r) { return r->inflight_reads; }
void pt_reader_get_stats(const pt_reader *r, pt_reader_stats *s) { *s = r->st; }
int pt_reader_register(pt_reader *r, void *base, uint64_t len)
{
    if (!r->be || !r->be->reg)
        return -1;
    int rc = r->be->reg(r, base, len);
    r->registered = rc == 0 && len > 0;
    return rc;
}

bool pt_reader_registered(const pt_reader *r) { return r->registered; }


// ---- submission -----------------------------------------------------------------

// Takes a free index of a grow-only table of records of `size` bytes
// (*arr, *cap entries, free indices in *free), doubling it (from `first`
// entries) when none is free. -1 when out of memory.
static int table_alloc(void **arr, size_t size, int *cap, rd_fifo *free_ids, int first)
{
    int id = rd_fifo_pop(free_ids);
    if (id >= 0)
        return id;
    int ncap = *cap ? 2 * *cap : first;
    unsigned char *v = realloc(*arr, size * (size_t)ncap);
    if (!v)
        return -1;
    memset(v + size * (size_t)*cap, 0, size * (size_t)(ncap - *cap));
    *arr = v;
    for (int i = ncap - 1; i > *cap; i--)
        if (rd_fifo_push(free_ids, i) < 0)
            return -1;
    id = *cap;
    *cap = ncap;
    return id;
}

static int alloc_read(pt_reader *r)
{
    void *t = r->reads;
    const int id = table_alloc(&t, sizeof *r->reads, &r->n_reads_cap, &r->free_reads, 64);
    r->reads = t;
    return id;
}

// Chunks may be reallocated: the pool threads never hold rd_chunk pointers
// across the lock (they copy what they need under it).
static int alloc_chunk(pt_reader *r)
{
    void *t = r->chunks;
    const int id = table_alloc(&t, sizeof *r->chunks, &r->n_chunks_cap, &r->free_chunks, 128);
    r->chunks = t;
    return id;
}

// Queue-depth accounting: called just before dev_inflight changes. The
// device's own completion times are not observable, so a request counts as
// in flight until it is reaped.
static void account(pt_reader *r)
{
    const double now = pt_now();
    if (r->dev_inflight > 0 && r->t_mark > 0) {
        r->st.busy_s += now - r->t_mark;
        r->st.inflight_s += (now - r->t_mark) * r->dev_inflight;
    }
    r->t_mark = now;
}

// Hands pending chunks to the backend while it has room.
static void pump(pt_reader *r)
{
    bool any = false;
    while (r->pending.n > 0 && r->dev_inflight < r->qd) {
        int id = r->pending.v[r->pending.head];
        int rc = r->be->submit(r, id);
        if (rc != 0)
            break;
        rd_fifo_pop(&r->pending);
        account(r);
        r->dev_inflight++;
        any = true;
    }
    if (any && r->be->flush)
        r->be->flush(r);
}

// Readahead hints for the page cache, in pieces of at most 4 MiB (off located).
static void hint_willneed(pt_reader *r, uint64_t off, uint64_t len)
{
    const uint64_t piece = 4u << 20;
    const int fd = r->fds_plain[pt_loc_file(off)];
    off = pt_loc_off(off);
    for (uint64_t o = 0; o < len; o += piece) {
        uint64_t n = len - o < piece ? len - o : piece;
        posix_fadvise(fd, (off_t)(off + o), (off_t)n, POSIX_FADV_WILLNEED);
    }
}

int pt_reader_submit(pt_reader *r, uint64_t tag, uint64_t off, uint64_t len, void *dst, pt_err *err)
{
    assert(((uintptr_t)dst % PT_ALIGN) == 0 && len > 0);
    if (pt_loc_file(off) >= (uint32_t)r->n_files || pt_loc_off(off) + len < pt_loc_off(off) ||
        pt_loc_off(off) + len > ((uint64_t)1 << PT_LOC_SHIFT))
        return pt_errf(err, "%s: read at located offset %#llx (+%llu) names no file of the %d open", r->path,
                       (unsigned long long)off, (unsigned long long)len, r->n_files);
    int rid = alloc_read(r);
    if (rid < 0)
        return pt_errf(err, "%s: out of memory queueing a read", r->path);
    rd_read *rd = &r->reads[rid];
    *rd = (rd_read){.tag = tag, .off = off, .len = len, .used = true};
    const uint64_t a0 = off - pt_io_head(off), a1 = pt_align_up(off + len, PT_ALIGN);
    if (r->mode == PT_IO_BUFFERED)
        hint_willneed(r, a0, a1 - a0);
    for (uint64_t f = a0; f < a1; f += r->max_request) {
        int cid = alloc_chunk(r);
        if (cid < 0)
            return pt_errf(err, "%s: out of memory queueing a read", r->path);
        rd_chunk *c = &r->chunks[cid];
        uint64_t n = a1 - f < r->max_request ? a1 - f : r->max_request;
        uint64_t need = off + len - f < n ? off + len - f : n;
        *c = (rd_chunk){.read = rid, .foff = f, .len = n, .need = need,
                        .dst = (unsigned char *)dst + (f - a0), .used = true};
        r->reads[rid].chunks_left++;
        if (rd_fifo_push(&r->pending, cid) < 0)
            return pt_errf(err, "%s: out of memory queueing a read", r->path);
    }
    r->inflight_reads++;
    pump(r);
    return 0;
}

// ---- completion -----------------------------------------------------------------

// How many bytes a "short" fault lets a completion of res > 0 bytes report.
// It still makes progress, as a real short transfer does (a completion of
// 0 bytes is end of file, and would count as an attempt): about half, and
// under O_DIRECT a whole number of blocks, at least one; a completion of one
// block or less is then left whole.
static int64_t short_keep(const pt_reader *r, int64_t res)
{
    assert(res > 0);
    if (!r->direct)
        return (int64_t)pt_fault_short_len((unsigned long)res);
    if (res <= (int64_t)PT_ALIGN)
        return res;
    const int64_t keep = res / 2 / PT_ALIGN * PT_ALIGN;
    return keep > 0 ? keep : (int64_t)PT_ALIGN;
}

// Applies the fault plan of the site "read" (common/fault.h; the tests arm
// it with pt_fault_arm, any petrel process with PETREL_FAULT) to one device
// completion of chunk c. A faulted completion scribbles over the bytes it no
// longer reports, as a real partial transfer may leave them, so a retry
// that failed to re-read them would give wrong data, not a lucky pass.
static int64_t inject(const pt_reader *r, const rd_chunk *c, int64_t res)
{
    const int fx = pt_fault("read");
    if (fx == 0)
        return res;
    if (res > 0) {
        const int64_t keep = fx == PT_FAULT_SHORT ? short_keep(r, res) : 0;
        memset(c->dst + c->done + keep, 0xA5, (size_t)(res - keep));
        return fx == PT_FAULT_SHORT ? keep : -fx;
    }
    return fx > 0 ? -fx : res;
}

static void chunk_finish(pt_reader *r, int cid, int errnum)
{
    rd_chunk *c = &r->chunks[cid];
    rd_read *rd = &r->reads[c->read];
    if (errnum && !rd->err) {
        rd->err = errnum;
        rd->err_off = c->foff + c->done;
    }
    c->used = false;
    rd_fifo_push(&r->free_chunks, cid);
    if (--rd->chunks_left == 0)
        rd_fifo_push(&r->finished, c->read);
    r->st.requests++;
}

// Handles one device completion: done, resubmit, retry or fail.
static void on_completion(pt_reader *r, int cid, int64_t res)
{
    rd_chunk *c = &r->chunks[cid];
    assert(c->used);
    account(r);
    r->dev_inflight--;
    res = inject(r, c, res);
    if (res == -EAGAIN || res == -EINTR) {
        if (++c->again > MAX_AGAIN) {
            chunk_finish(r, cid, (int)-res);
            return;
        }
        r->st.retries++;
        rd_fifo_push_front(&r->pending, cid);
        return;
    }
    if (res < 0) {
        if (++c->attempts >= MAX_ATTEMPTS) {
            chunk_finish(r, cid, (int)-res);
            return;
        }
        r->st.retries++;
        rd_fifo_push_front(&r->pending, cid);
        return;
    }
    // Data arrived (or end of file): finished once the asked-for bytes are
    // in; a short read is resubmitted for the rest (from an aligned position
    // for O_DIRECT). No progress past the furthest byte seen means the file
    // ends early: retried, then failed.
    r->st.bytes += (uint64_t)res;
    const uint64_t end = c->done + (uint64_t)res;
    if (end >= c->need) {
        chunk_finish(r, cid, 0);
        return;
    }
    if (end <= c->hwm && ++c->attempts >= MAX_ATTEMPTS) {
        chunk_finish(r, cid, -1);
        return;
    }
    if (end > c->hwm)
        c->hwm = end;
    c->done = r->direct ? end - end % PT_ALIGN : end;
    r->st.retries++;
    rd_fifo_push_front(&r->pending, cid);
}

// Returns a finished read, if any: 1 done, -1 failed, 0 none.
static int take_finished(pt_reader *r, uint64_t *tag, pt_err *err)
{
    int rid = rd_fifo_pop(&r->finished);
    if (rid < 0)
        return 0;
    rd_read *rd = &r->reads[rid];
    *tag = rd->tag;
    int e = rd->err;
    uint64_t off = rd->off, len = rd->len, eoff = rd->err_off;
    rd->used = false;
    rd_fifo_push(&r->free_reads, rid);
    r->inflight_reads--;
    if (!e) {
        r->st.reads++;
        return 1;
    }
    r->st.failures++;
    const char *path = r->paths[pt_loc_file(off)];
    off = pt_loc_off(off);
    eoff = pt_loc_off(eoff);
    if (e < 0)
        return pt_errf(err, "%s: read of %llu bytes at offset %llu: unexpected end of file (at %llu)", path,
                       (unsigned long long)len, (unsigned long long)off, (unsigned long long)eoff);
    return pt_errf(err, "%s: read of %llu bytes at offset %llu failed after %d attempts: %s (at offset %llu)",
                   path, (unsigned long long)len, (unsigned long long)off, MAX_ATTEMPTS, strerror(e),
                   (unsigned long long)eoff);
}

static int wait_common(pt_reader *r, bool block, uint64_t *tag, pt_err *err)
{
    for (;;) {
        int rc = take_finished(r, tag, err);
        if (rc != 0)
            return rc;
        if (r->inflight_reads == 0)
            return 0;
        pump(r);
        int cid;
        int64_t res;
        if (r->be->wait(r, block, &cid, &res) <= 0) {
            if (!block)
                return 0;
            continue;
        }
        on_completion(r, cid, res);
        pump(r);
    }
}

int pt_reader_wait(pt_reader *r, uint64_t *tag, pt_err *err) { return wait_common(r, true, tag, err); }
int pt_reader_poll(pt_reader *r, uint64_t *tag, pt_err *err) { return wait_common(r, false, tag, err); }

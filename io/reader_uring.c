// io/reader_uring.c — the io_uring backend of the reader: one ring, reads
// prepared straight into the callers' aligned buffers, completions reaped
// one at a time.
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

#include "io/reader_int.h"

// The ring, and the registered buffers: [reg_base, reg_base + reg_len) in
// pieces of REG_PIECE bytes (the kernel takes at most 1 GiB per buffer).
typedef struct uring_state {
    struct io_uring ring;
    unsigned char *reg_base;
    uint64_t reg_len;
} uring_state;

enum { REG_PIECE_SHIFT = 30 };

static struct io_uring *ring_of(pt_reader *r) { return &((uring_state *)r->be_state)->ring; }

// Index of the registered buffer holding all of [p, p + n), or -1.
static int fixed_index(const uring_state *u, const unsigned char *p, uint64_t n)
{
    if (!u->reg_base || p < u->reg_base || p + n > u->reg_base + u->reg_len)
        return -1;
    const uint64_t a = (uint64_t)(p - u->reg_base) >> REG_PIECE_SHIFT;
    const uint64_t b = (uint64_t)(p + n - 1 - u->reg_base) >> REG_PIECE_SHIFT;
    return a == b ? (int)a : -1;
}

static int uring_submit(pt_reader *r, int id)
{
    struct io_uring *ring = ring_of(r);
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        return 1;
    const rd_chunk *c = &r->chunks[id];
    unsigned char *dst = c->dst + c->done;
    const unsigned n = (unsigned)(c->len - c->done);
    const int bi = fixed_index(r->be_state, dst, n);
    const int fd = rd_fd(r, c->foff);
    const uint64_t off = pt_loc_off(c->foff) + c->done;
    if (bi >= 0) // pages pinned once at registration instead of at every read
        io_uring_prep_read_fixed(sqe, fd, dst, n, off, bi);
    else
        io_uring_prep_read(sqe, fd, dst, n, off);
    io_uring_sqe_set_data64(sqe, (uint64_t)id);
    return 0;
}

static void uring_flush(pt_reader *r)
{
    struct io_uring *ring = ring_of(r);
    // -EAGAIN/-EBUSY: the kernel is short of resources or the completion
    // queue is full; the prepared entries stay queued and go with the next
    // submit (wait calls submit again before blocking).
    int rc;
    do
        rc = io_uring_submit(ring);
    while (rc == -EINTR);
}

static int uring_wait(pt_reader *r, bool block, int *id, int64_t *res)
{
    struct io_uring *ring = ring_of(r);
    struct io_uring_cqe *cqe = NULL;
    int rc;
    if (io_uring_sq_ready(ring) > 0)
        uring_flush(r);
    if (r->dev_inflight == 0)
        return 0;
    do
        rc = block ? io_uring_wait_cqe(ring, &cqe) : io_uring_peek_cqe(ring, &cqe);
    while (rc == -EINTR);
    if (rc < 0 || !cqe)
        return 0;
    *id = (int)io_uring_cqe_get_data64(cqe);
    *res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return 1;
}

static int uring_reg(pt_reader *r, void *base, uint64_t len)
{
    uring_state *u = r->be_state;
    if (u->reg_base) {
        io_uring_unregister_buffers(&u->ring);
        u->reg_base = NULL;
        u->reg_len = 0;
    }
    if (!base || len == 0)
        return 0;
    const uint64_t piece = (uint64_t)1 << REG_PIECE_SHIFT;
    const unsigned n = (unsigned)((len + piece - 1) / piece);
    struct iovec *iov = calloc(n, sizeof *iov);
    if (!iov)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        iov[i].iov_base = (unsigned char *)base + (uint64_t)i * piece;
        iov[i].iov_len = len - (uint64_t)i * piece < piece ? len - (uint64_t)i * piece : piece;
    }
    // Fails without CAP_IPC_LOCK when the memlock limit is below len: the
    // reads then pin their pages one by one, as without registration.
    int rc = io_uring_register_buffers(&u->ring, iov, n);
    free(iov);
    if (rc < 0)
        return -1;
    u->reg_base = base;
    u->reg_len = len;
    return 0;
}

static void uring_close(pt_reader *r)
{
    io_uring_queue_exit(ring_of(r));
    free(r->be_state);
    r->be_state = NULL;
}

static const rd_backend uring_backend = {uring_submit, uring_flush, uring_wait, uring_close, uring_reg};

int rd_uring_start(pt_reader *r, pt_err *err)
{
    uring_state *u = calloc(1, sizeof *u);
    if (!u)
        return pt_errf(err, "out of memory");
    int rc = io_uring_queue_init((unsigned)r->qd, &u->ring, 0);
    if (rc < 0) {
        free(u);
        return pt_errf(err, "%s: io_uring_queue_init failed: %s", r->path, strerror(-rc));
    }
    r->be_state = u;
    r->be = &uring_backend;
    return 0;
}

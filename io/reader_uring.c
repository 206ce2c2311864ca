// io/reader_uring.c — the io_uring backend of the reader: one ring, reads
// prepared straight into the callers' aligned buffers, completions reaped
// one at a time.
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

#include "io/reader_int.h"

static struct io_uring *ring_of(pt_reader *r) { return r->be_state; }

static int uring_submit(pt_reader *r, int id)
{
    struct io_uring *ring = ring_of(r);
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        return 1;
    const rd_chunk *c = &r->chunks[id];
    io_uring_prep_read(sqe, r->fd, c->dst + c->done, (unsigned)(c->len - c->done), c->foff + c->done);
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

static void uring_close(pt_reader *r)
{
    io_uring_queue_exit(ring_of(r));
    free(r->be_state);
    r->be_state = NULL;
}

static const rd_backend uring_backend = {uring_submit, uring_flush, uring_wait, uring_close};

int rd_uring_start(pt_reader *r, pt_err *err)
{
    struct io_uring *ring = calloc(1, sizeof *ring);
    if (!ring)
        return pt_errf(err, "out of memory");
    int rc = io_uring_queue_init((unsigned)r->qd, ring, 0);
    if (rc < 0) {
        free(ring);
        return pt_errf(err, "%s: io_uring_queue_init failed: %s", r->path, strerror(-rc));
    }
    r->be_state = ring;
    r->be = &uring_backend;
    return 0;
}

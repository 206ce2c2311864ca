// io/reader_pool.c — the pread thread-pool backend of the reader (the
// fallback when io_uring is unavailable, and the engine of --io buffered).
// Workers take jobs from a FIFO and post (chunk id, result) pairs back; jobs
// carry copies of what they read so the core may reallocate its tables.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/reader_int.h"

typedef struct job {
    int id;                  // chunk id
    int fd;                  // descriptor of the chunk's file
    unsigned char *dst;      // destination of the remaining bytes
    uint64_t off, len;       // range still to read, in that file
    int64_t res;             // bytes read or -errno
} job;

typedef struct pool {
    pthread_t *threads;      // (n_threads,)
    int n_threads;
    pthread_mutex_t mu;
    pthread_cond_t job_cv, done_cv;
    job *jobs;               // (cap,) ring of queued jobs
    int jhead, jn;
    job *done;               // (cap,) ring of finished jobs
    int dhead, dn;
    int cap;                 // capacity of both rings (>= queue depth)
    bool stop;
} pool;

static void *worker(void *arg)
{
    pt_reader *r = arg;
    pool *p = r->be_state;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->jn == 0 && !p->stop)
            pthread_cond_wait(&p->job_cv, &p->mu);
        if (p->jn == 0 && p->stop)
            break;
        job j = p->jobs[p->jhead];
        p->jhead = (p->jhead + 1) % p->cap;
        p->jn--;
        pthread_mutex_unlock(&p->mu);
        ssize_t n = pread(j.fd, j.dst, j.len, (off_t)j.off);
        j.res = n < 0 ? -(int64_t)errno : (int64_t)n;
        pthread_mutex_lock(&p->mu);
        p->done[(p->dhead + p->dn) % p->cap] = j;
        p->dn++;
        pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int pool_submit(pt_reader *r, int id)
{
    pool *p = r->be_state;
    const rd_chunk *c = &r->chunks[id];
    job j = {id, rd_fd(r, c->foff), c->dst + c->done, pt_loc_off(c->foff) + c->done, c->len - c->done, 0};
    pthread_mutex_lock(&p->mu);
    if (p->jn + p->dn >= p->cap) {
        pthread_mutex_unlock(&p->mu);
        return 1;
    }
    p->jobs[(p->jhead + p->jn) % p->cap] = j;
    p->jn++;
    pthread_cond_signal(&p->job_cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static int pool_wait(pt_reader *r, bool block, int *id, int64_t *res)
{
    pool *p = r->be_state;
    if (r->dev_inflight == 0)
        return 0;
    pthread_mutex_lock(&p->mu);
    while (p->dn == 0 && block)
        pthread_cond_wait(&p->done_cv, &p->mu);
    int got = 0;
    if (p->dn > 0) {
        job j = p->done[p->dhead];
        p->dhead = (p->dhead + 1) % p->cap;
        p->dn--;
        *id = j.id;
        *res = j.res;
        got = 1;
    }
    pthread_mutex_unlock(&p->mu);
    return got;
}

static void pool_close(pt_reader *r)
{
    pool *p = r->be_state;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->job_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->job_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p->jobs);
    free(p->done);
    free(p);
    r->be_state = NULL;
}

static const rd_backend pool_backend = {pool_submit, NULL, pool_wait, pool_close, NULL};

int rd_pool_start(pt_reader *r, int n_threads, pt_err *err)
{
    pool *p = calloc(1, sizeof *p);
    if (!p)
        return pt_errf(err, "out of memory");
    p->cap = r->qd;
    p->jobs = calloc((size_t)p->cap, sizeof(job));
    p->done = calloc((size_t)p->cap, sizeof(job));
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->job_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    r->be_state = p;
    r->be = &pool_backend;
    if (!p->jobs || !p->done || !p->threads) {
        pool_close(r);
        r->be = NULL;
        return pt_errf(err, "out of memory");
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64u << 10);
    for (int i = 0; i < n_threads; i++) {
        int rc = pthread_create(&p->threads[p->n_threads], &at, worker, r);
        if (rc != 0) {
            pthread_attr_destroy(&at);
            pool_close(r);
            r->be = NULL;
            return pt_errf(err, "%s: cannot start I/O threads: %s", r->path, strerror(rc));
        }
        p->n_threads++;
    }
    pthread_attr_destroy(&at);
    return 0;
}

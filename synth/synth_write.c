// synth/synth_write.c — streams a synthetic checkpoint to disk.
//
// Per shard: the header is written first (all sizes are known from the
// plan), the F32 region (scale_inv + router bias, tiny) is kept in memory
// and written last at its offset, and the BF16 / FP8 data is made in
// batches of row blocks (OpenMP over row blocks) into one of two buffers
// while a writer thread writes the other (sequential writes; writeback is
// started early and written pages are dropped from the page cache so a
// 22 GB run does not fill memory). The shard is fsynced and renamed from
// its ".tmp" name; the index is written last.
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/util.h"
#include "synth/synth_plan.h"

#define BATCH_BYTES (32u << 20)     // bytes per generation batch (one buffer)
#define UNIT_BF16_BYTES (256u << 10) // target bytes of one BF16 work unit

// One work unit: rows [r0, r1) of a tensor, landing at `off` in the shard data.
typedef struct unit {
    const synth_tensor *t;  // the tensor
    uint64_t tseed;         // its seed
    uint64_t r0, r1;        // row range
    uint64_t off;           // data offset of the first byte
    float *scale;           // FP8: first scale_inv row for r0 (in the F32 region)
} unit;

// The writer thread: one job in flight.
typedef struct writer {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;                 // shard being written
    const uint8_t *buf;     // job
    size_t len;
    uint64_t off;           // file offset of the job
    int pending, quit;      // flags
    int err;                // errno of the first failure
    uint64_t synced;        // file bytes below which writeback was waited for
} writer;

static void drop_written(writer *w, uint64_t end)
{
    // Wait for older writeback, then drop those pages: bounded page cache.
    if (end > w->synced + 2 * (uint64_t)BATCH_BYTES) {
        uint64_t upto = end - 2 * (uint64_t)BATCH_BYTES;
        sync_file_range(w->fd, (off_t)w->synced, (off_t)(upto - w->synced),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        posix_fadvise(w->fd, (off_t)w->synced, (off_t)(upto - w->synced), POSIX_FADV_DONTNEED);
        w->synced = upto;
    }
}

static void *writer_main(void *arg)
{
    writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->pending && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->pending && w->quit)
            break;
        const uint8_t *p = w->buf;
        size_t left = w->len;
        uint64_t off = w->off;
        pthread_mutex_unlock(&w->mu);
        int e = 0;
        while (left > 0) {
            ssize_t n = pwrite(w->fd, p, left, (off_t)off);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                e = errno;
                break;
            }
            p += n;
            left -= (size_t)n;
            off += (uint64_t)n;
        }
        if (!e) {
            sync_file_range(w->fd, (off_t)w->off, (off_t)w->len, SYNC_FILE_RANGE_WRITE);
            drop_written(w, w->off + w->len);
        }
        pthread_mutex_lock(&w->mu);
        if (e && !w->err)
            w->err = e;
        w->pending = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

// Waits until no job is in flight; returns the writer's first errno (0 = ok).
static int writer_wait(writer *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->pending)
        pthread_cond_wait(&w->cv, &w->mu);
    int e = w->err;
    pthread_mutex_unlock(&w->mu);
    return e;
}

static int writer_submit(writer *w, const uint8_t *buf, size_t len, uint64_t off)
{
    int e = writer_wait(w);
    if (e)
        return e;
    pthread_mutex_lock(&w->mu);
    w->buf = buf;
    w->len = len;
    w->off = off;
    w->pending = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

typedef struct run_ctx {
    const synth_opts *o;
    const synth_preset *p;
    const synth_plan *pl;
    const synth_router *router;
    uint8_t *buf[2];        // (BATCH_BYTES,) x 2
    unit *units;            // (cap_units,)
    size_t cap_units;
    pt_progress prog;
    uint64_t done;          // data bytes made so far
    uint64_t file_bytes;    // bytes written incl. headers
} run_ctx;

static int push_unit(run_ctx *c, size_t *n, unit u)
{
    if (*n == c->cap_units) {
        size_t cap = c->cap_units ? c->cap_units * 2 : 4096;
        unit *nu = realloc(c->units, cap * sizeof *nu);
        if (!nu)
            return -1;
        c->units = nu;
        c->cap_units = cap;
    }
    c->units[(*n)++] = u;
    return 0;
}

// Makes units [0, n) into buf (unit bytes are contiguous from base_off).
static void make_batch(run_ctx *c, size_t n, uint8_t *buf, uint64_t base_off)
{
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < n; i++) {
        const unit *u = &c->units[i];
        synth_make_rows(u->t, u->tseed, c->router, u->r0, u->r1, buf + (u->off - base_off), u->scale);
    }
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

// Writes shard s under "<name>.tmp", then renames it.
static int write_shard(run_ctx *c, uint32_t s, pt_err *err)
{
    const synth_plan *pl = c->pl;
    char name[64], path[4096], tmp[4200];
    synth_shard_name(name, sizeof name, s, pl->n_shards);
    snprintf(path, sizeof path, "%s/%s", c->o->out_dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    size_t hlen = 0;
    char *hdr = synth_shard_header(pl, s, &hlen);
    if (!hdr)
        return pt_errf(err, "%s: out of memory for the header", path);
    const uint64_t data0 = 8 + hlen;
    // F32 region: the first tensors of the shard's data.
    uint64_t f32_end = 0;
    for (uint32_t i = 0; i < pl->n; i++)
        if (pl->order[i]->shard == s && pl->order[i]->dtype == ST_F32)
            f32_end = pl->order[i]->begin + pl->order[i]->bytes;
    uint8_t *f32 = calloc(1, f32_end ? f32_end : 1);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!f32 || fd < 0) {
        int e = errno;
        free(hdr);
        free(f32);
        if (fd >= 0)
            close(fd);
        return pt_errf(err, "%s: cannot create: %s", tmp, strerror(e));
    }
    uint8_t len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (uint8_t)((uint64_t)hlen >> (8 * k));
    int rc = write_all(fd, len8, 8, 0) | write_all(fd, hdr, hlen, 8);
    free(hdr);
    if (rc) {
        int e = errno;
        close(fd);
        free(f32);
        unlink(tmp);
        return pt_errf(err, "%s: write failed: %s", tmp, strerror(e));
    }

    writer w = {.fd = fd};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    w.synced = 0;
    pthread_create(&w.th, NULL, writer_main, &w);

    int which = 0, werr = 0;
    size_t nu = 0;
    uint64_t batch_off = f32_end, batch_len = 0;
    for (uint32_t i = 0; i <= pl->n && !werr; i++) {
        const synth_tensor *t = i < pl->n ? pl->order[i] : NULL;
        if (t && (t->shard != s || t->init == SI_SCALE))
            continue;
        // Row ranges of this tensor (FP8: 128-row blocks; BF16: ~256 KiB).
        uint64_t row_bytes = t ? t->cols * synth_dtype_size(t->dtype) : 0;
        uint64_t step = 1;
        if (t && t->init == SI_LINEAR)
            step = 128;
        else if (t && row_bytes < UNIT_BF16_BYTES)
            step = UNIT_BF16_BYTES / row_bytes;
        uint64_t tseed = t ? synth_seed_of(c->o->seed, t->key) : 0;
        float *scale = NULL;
        if (t && t->init == SI_LINEAR) {
            const synth_tensor *sc = t + 1; // its scale_inv follows it in the plan
            assert(sc->src == (int32_t)(t - pl->t) && sc->shard == s);
            scale = (float *)(f32 + sc->begin);
        }
        if (t && t->dtype == ST_F32) { // router bias: into the F32 region now
            synth_make_rows(t, tseed, c->router, 0, 1, f32 + t->begin, NULL);
            continue;
        }
        for (uint64_t r0 = 0; t ? r0 < t->rows : r0 == 0; r0 += t ? step : 1) {
            uint64_t r1 = t ? (r0 + step < t->rows ? r0 + step : t->rows) : 0;
            uint64_t ub = t ? (r1 - r0) * row_bytes : 0;
            assert(ub <= BATCH_BYTES);
            if (!t || batch_len + ub > BATCH_BYTES) { // flush the batch
                if (batch_len) {
                    make_batch(c, nu, c->buf[which], batch_off);
                    werr = writer_submit(&w, c->buf[which], batch_len, data0 + batch_off);
                    c->done += batch_len;
                    char detail[64];
                    snprintf(detail, sizeof detail, "shard %u/%u", s + 1, pl->n_shards);
                    if (!c->o->quiet)
                        pt_progress_update(&c->prog, c->done, detail);
                    which ^= 1;
                }
                batch_off += batch_len;
                batch_len = 0;
                nu = 0;
                if (!t || werr)
                    break;
            }
            unit u = {t, tseed, r0, r1, t->begin + r0 * row_bytes,
                      scale ? scale + (r0 / 128) * ((t->cols + 127) / 128) : NULL};
            assert(u.off == batch_off + batch_len);
            if (push_unit(c, &nu, u)) {
                werr = ENOMEM;
                break;
            }
            batch_len += ub;
        }
    }
    int e = writer_wait(&w);
    if (!werr)
        werr = e;
    pthread_mutex_lock(&w.mu);
    w.quit = 1;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(w.th, NULL);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    if (!werr && f32_end && write_all(fd, f32, f32_end, data0) != 0)
        werr = errno;
    free(f32);
    if (!werr && fsync(fd) != 0)
        werr = errno;
    if (close(fd) != 0 && !werr)
        werr = errno;
    if (werr) {
        unlink(tmp);
        return pt_errf(err, "%s: write failed: %s", tmp, strerror(werr));
    }
    if (rename(tmp, path) != 0) {
        int e2 = errno;
        unlink(tmp);
        return pt_errf(err, "%s: cannot rename to %s: %s", tmp, path, strerror(e2));
    }
    c->file_bytes += data0 + pl->shard_bytes[s];
    return 0;
}

static int write_text(const char *dir, const char *name, const char *text, pt_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!text)
        return pt_errf(err, "%s: out of memory", path);
    return pt_write_file_atomic(path, text, strlen(text), err);
}

static int make_dir(const char *dir, pt_err *err)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return pt_errf(err, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return pt_errf(err, "%s: cannot create directory: %s", buf, strerror(errno));
    return 0;
}

// Removes shards (and temporaries) of an earlier run in dir whose names are
// not this plan's: e.g. model-00001-of-000003 after switching presets.
static void remove_stale_shards(const char *dir, uint32_t n_shards)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char keep_suffix[32], path[4096];
    snprintf(keep_suffix, sizeof keep_suffix, "-of-%06u.safetensors", n_shards);
    while ((e = readdir(d)) != NULL) {
        unsigned k, n;
        int used = 0;
        if (sscanf(e->d_name, "model-%5u-of-%6u.safetensors%n", &k, &n, &used) != 2 || used < 33)
            continue;
        int ours = strcmp(e->d_name + 11, keep_suffix) == 0 && k >= 1 && k <= n_shards;
        if (!ours || e->d_name[used] != 0) { // other shard count, or a leftover .tmp
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

int synth_run(const synth_opts *o, synth_stats *stats, pt_err *err)
{
    assert(o && o->out_dir);
    double t0 = pt_now();
    synth_preset p;
    if (synth_resolve_preset(o, &p, err) < 0)
        return -1;
    if (make_dir(o->out_dir, err) < 0)
        return -1;
    // The index marks a complete checkpoint: remove a stale one first.
    char ipath[4096];
    snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", o->out_dir);
    if (unlink(ipath) == 0)
        pt_fsync_dir_of(ipath);

    synth_plan pl;
    if (synth_plan_build(&pl, &p, err) < 0)
        return -1;
    synth_router router;
    if (synth_router_init(&router, &p, o->seed) < 0) {
        synth_plan_free(&pl);
        return pt_errf(err, "synth: out of memory for the router");
    }
    remove_stale_shards(o->out_dir, pl.n_shards);
    if (o->threads > 0)
        omp_set_num_threads(o->threads);
    run_ctx c = {.o = o, .p = &p, .pl = &pl, .router = &router};
    c.buf[0] = pt_alloc_aligned(BATCH_BYTES);
    c.buf[1] = pt_alloc_aligned(BATCH_BYTES);
    int rc = 0;
    if (!c.buf[0] || !c.buf[1])
        rc = pt_errf(err, "synth: out of memory for buffers");
    if (!rc && !o->quiet) {
        fprintf(stderr, "synth: preset %s -> %s: %u tensors, %u shards, %.1f MB, seed %llu\n", p.name,
                o->out_dir, pl.n, pl.n_shards, (double)pl.total / 1e6, (unsigned long long)o->seed);
        pt_progress_begin(&c.prog, "synth", pl.total);
    }
    for (uint32_t s = 0; s < pl.n_shards && !rc; s++)
        rc = write_shard(&c, s, err);
    if (!rc && !o->quiet)
        pt_progress_end(&c.prog, "shards done");
    double t_shards = pt_now() - t0;
    if (!rc) {
        char *cfg = synth_config_json(&p);
        rc = write_text(o->out_dir, "config.json", cfg, err);
        free(cfg);
    }
    if (!rc)
        rc = synth_write_tokenizer(o->out_dir, p.vocab, p.max_pos, err);
    char *idx = rc ? NULL : synth_index_json(&pl);
    if (!rc)
        rc = write_text(o->out_dir, "model.safetensors.index.json", idx, err);
    free(idx);
    if (!rc)
        pt_fsync_dir_of(ipath);
    double secs = pt_now() - t0;
    if (!rc && !o->quiet)
        fprintf(stderr,
                "synth: wrote %s: %u shards, %u tensors, %.1f MB of tensors (%.1f MB on disk) in %.2f s "
                "(shards %.2f s, %.0f MB/s), peak RSS %.0f MB\n",
                o->out_dir, pl.n_shards, pl.n, (double)pl.total / 1e6, (double)c.file_bytes / 1e6, secs,
                t_shards, t_shards > 0 ? (double)c.file_bytes / 1e6 / t_shards : 0.0,
                (double)pt_peak_rss_bytes() / 1e6);
    if (stats) {
        stats->bytes = pl.total;
        stats->file_bytes = c.file_bytes;
        stats->shards = pl.n_shards;
        stats->tensors = pl.n;
        stats->seconds = secs;
    }
    pt_free_aligned(c.buf[0]);
    pt_free_aligned(c.buf[1]);
    free(c.units);
    synth_router_free(&router);
    synth_plan_free(&pl);
    return rc;
}

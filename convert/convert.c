// convert/convert.c — the shard-by-shard, resumable conversion driver.
#include "convert/convert.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fullio.h"
#include "common/util.h"
#include "convert/hfconfig.h"
#include "convert/hfindex.h"
#include "convert/journal.h"
#include "convert/plan.h"
#include "convert/tensorconv.h"
#include "convert/tokwrite.h"
#include "format/gguf.h"
#include "format/safetensors.h"

#define PATH_LEN 4096

typedef struct conv {
    const pt_convert_opts *o;
    char cfg_path[PATH_LEN], tok_json[PATH_LEN], tok_cfg[PATH_LEN];
    char tmp_path[PATH_LEN], journal_path[PATH_LEN];
    bool has_tok, has_tok_cfg;
    pt_hf_config cfg;
    pt_hf_index ix;
    pt_plan plan;
    bool plan_ok;
    st_file **shards;       // (n_shards,) opened lazily
    pt_journal j;
    bool j_open;
    int out_fd;
    uint32_t *order;        // (n_units,) unit indices grouped by weight shard
    uint32_t *first;        // (n_shards + 1,) start of each shard's group in order
    uint32_t *pending;      // (n_shards,) units still to write that read from the shard
    uint64_t in_bytes;      // bytes read from the checkpoint in this run
    uint64_t units_run, shards_run;
    pt_progress prog;
} conv;

static bool file_exists(const char *p) { return access(p, F_OK) == 0; }

static void shard_path(const conv *c, uint32_t s, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", c->o->in_dir, c->ix.shards[s]);
}

// Makes shard s present: runs --fetch-cmd when it is missing.
static int ensure_shard(conv *c, uint32_t s, const char *why, pt_err *err)
{
    char path[PATH_LEN];
    shard_path(c, s, path, sizeof path);
    if (file_exists(path))
        return 0;
    if (!c->o->fetch_cmd)
        return pt_errf(err, "%s: shard missing (it holds tensor '%s') and no --fetch-cmd given", path, why);
    // Build "cd 'DIR' && CMD" with {file} replaced by the shard's file name.
    char cmd[3 * PATH_LEN];
    size_t k = 0;
    k += (size_t)snprintf(cmd + k, sizeof cmd - k, "cd '");
    for (const char *d = c->o->in_dir; *d && k + 8 < sizeof cmd; d++)
        k += (size_t)snprintf(cmd + k, sizeof cmd - k, *d == '\'' ? "'\\''" : "%c", *d);
    k += (size_t)snprintf(cmd + k, sizeof cmd - k, "' && ");
    for (const char *q = c->o->fetch_cmd; *q && k + PATH_LEN < sizeof cmd;) {
        if (!strncmp(q, "{file}", 6)) {
            k += (size_t)snprintf(cmd + k, sizeof cmd - k, "%s", c->ix.shards[s]);
            q += 6;
        } else {
            cmd[k++] = *q++;
        }
    }
    cmd[k] = 0;
    fprintf(stderr, "petrel convert: fetching %s\n", c->ix.shards[s]);
    fflush(stderr);
    int st = system(cmd);
    if (st != 0)
        return pt_errf(err, "%s: --fetch-cmd failed (status %d): %s", path, st, cmd);
    if (!file_exists(path))
        return pt_errf(err, "%s: still missing after --fetch-cmd: %s", path, cmd);
    return 0;
}

static st_file *get_shard(conv *c, uint32_t s, const char *why, pt_err *err)
{
    if (c->shards[s])
        return c->shards[s];
    if (ensure_shard(c, s, why, err) < 0)
        return NULL;
    char path[PATH_LEN];
    shard_path(c, s, path, sizeof path);
    c->shards[s] = st_open(path, err);
    if (c->shards[s]) // read front to back: a larger readahead window
        posix_fadvise(c->shards[s]->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return c->shards[s];
}

static void close_shard(conv *c, uint32_t s)
{
    st_close(c->shards[s]);
    c->shards[s] = NULL;
}

// ---- set-up ---------------------------------------------------------------------

// Identity of a conversion for its journal: config.json, the index, the shard
// names, the tokenizer files and the type options.
static uint64_t source_hash(const conv *c)
{
    uint64_t h = PT_HASH_INIT;
    h = pt_hash_bytes(h, "petrel-layout-1", 15);
    h = pt_hash_file(h, c->cfg_path);
    h = pt_hash_file(h, c->ix.path);
    for (uint32_t s = 0; s < c->ix.n_shards; s++)
        h = pt_hash_bytes(h, c->ix.shards[s], strlen(c->ix.shards[s]) + 1);
    if (c->has_tok)
        h = pt_hash_file(h, c->tok_json);
    if (c->has_tok_cfg)
        h = pt_hash_file(h, c->tok_cfg);
    uint32_t types[2] = {c->o->expert_type, c->o->trunk_type};
    h = pt_hash_bytes(h, types, sizeof types);
    // rules only when given, so that journals of rule-less runs stay valid
    for (uint32_t k = 0; k < c->o->n_rules; k++) {
        uint32_t t = c->o->rules[k].type;
        h = pt_hash_bytes(h, c->o->rules[k].pattern, strlen(c->o->rules[k].pattern) + 1);
        h = pt_hash_bytes(h, &t, sizeof t);
    }
    return h;
}

static int build_plan(conv *c, bool omit_embed, bool omit_head, pt_err *err)
{
    if (c->plan_ok)
        pt_plan_free(&c->plan);
    c->plan_ok = false;
    pt_plan_opts po = {
        .expert_type = c->o->expert_type, .trunk_type = c->o->trunk_type,
        .rules = c->o->rules, .n_rules = c->o->n_rules,
        .tokenizer_json = c->has_tok ? c->tok_json : NULL, .tokenizer_config = c->has_tok_cfg ? c->tok_cfg : NULL,
        .omit_mtp_embed = omit_embed, .omit_mtp_head = omit_head,
    };
    if (pt_plan_build(&c->plan, &c->cfg, &c->ix, &po, err) < 0)
        return -1;
    c->plan_ok = true;
    return 0;
}

// Is `copy` byte-identical (dtype, shape, data) to `main`? Reads both in chunks.
static int same_tensor(conv *c, const char *main_name, const char *copy_name, bool *same, pt_err *err)
{
    *same = false;
    int64_t km = pt_hf_index_find(&c->ix, main_name), kc = pt_hf_index_find(&c->ix, copy_name);
    if (km < 0 || kc < 0)
        return 0;
    st_file *fm = get_shard(c, c->ix.shard_of[km], main_name, err);
    if (!fm)
        return -1;
    st_file *fc = get_shard(c, c->ix.shard_of[kc], copy_name, err);
    if (!fc)
        return -1;
    const st_tensor *tm = st_find(fm, main_name), *tc = st_find(fc, copy_name);
    if (!tm)
        return pt_errf(err, "%s: tensor '%s' is listed in the index for this shard but absent from it", fm->path,
                       main_name);
    if (!tc)
        return pt_errf(err, "%s: tensor '%s' is listed in the index for this shard but absent from it", fc->path,
                       copy_name);
    if (tm->dtype != tc->dtype || tm->n_dims != tc->n_dims || memcmp(tm->shape, tc->shape, sizeof tm->shape) != 0)
        return 0;
    uint64_t n = tm->end - tm->begin, chunk = 16u << 20;
    uint8_t *a = malloc(chunk), *b = malloc(chunk);
    if (!a || !b) {
        free(a);
        free(b);
        return pt_errf(err, "out of memory");
    }
    bool eq = true;
    for (uint64_t off = 0; off < n && eq; off += chunk) {
        uint64_t len = n - off < chunk ? n - off : chunk;
        if (pread(fm->fd, a, len, (off_t)(tm->begin + off)) != (ssize_t)len ||
            pread(fc->fd, b, len, (off_t)(tc->begin + off)) != (ssize_t)len) {
            free(a);
            free(b);
            return pt_errf(err, "%s: tensor '%s': read failed while comparing with '%s'", fc->path, copy_name,
                           main_name);
        }
        eq = memcmp(a, b, len) == 0;
    }
    c->in_bytes += 2 * n;
    free(a);
    free(b);
    *same = eq;
    return 0;
}

// The MTP embedding and head are omitted when byte-identical to the main ones.
static int decide_mtp(conv *c, bool *omit_embed, bool *omit_head, pt_err *err)
{
    *omit_embed = *omit_head = true;
    const pt_hparams *hp = &c->cfg.hp;
    for (uint32_t i = 0; i < hp->n_nextn; i++) {
        uint32_t L = hp->n_layer + i;
        char e[96], h[96];
        snprintf(e, sizeof e, "model.layers.%u.embed_tokens.weight", L);
        snprintf(h, sizeof h, "model.layers.%u.shared_head.head.weight", L);
        bool se = true, sh = true;
        if (pt_hf_index_find(&c->ix, e) >= 0 && same_tensor(c, "model.embed_tokens.weight", e, &se, err) < 0)
            return -1;
        if (pt_hf_index_find(&c->ix, h) >= 0 && same_tensor(c, "lm_head.weight", h, &sh, err) < 0)
            return -1;
        *omit_embed = *omit_embed && se;
        *omit_head = *omit_head && sh;
    }
    return 0;
}

// 1: <out> exists and is exactly what this command writes; 0: absent; -1: differs.
static int final_up_to_date(conv *c, pt_err *err)
{
    const char *out = c->o->out_path;
    if (!file_exists(out))
        return 0;
    gguf_file *g = gguf_open(out, err);
    if (!g)
        return pt_errf(err, "%s exists but is not a readable GGUF; use --force to overwrite it", out);
    char name[96];
    snprintf(name, sizeof name, "blk.%u.nextn.embed_tokens.weight", c->cfg.hp.n_layer);
    bool omit_e = gguf_find_tensor(g, name) == NULL;
    snprintf(name, sizeof name, "blk.%u.nextn.shared_head_head.weight", c->cfg.hp.n_layer);
    bool omit_h = gguf_find_tensor(g, name) == NULL;
    int rc = build_plan(c, omit_e, omit_h, err);
    uint64_t hlen = 0;
    void *h = rc == 0 ? gguf_writer_header(c->plan.w, &hlen) : NULL;
    void *cur = h ? malloc(hlen) : NULL;
    if (rc == 0 && (!h || !cur))
        rc = pt_errf(err, "out of memory");
    if (rc == 0) {
        bool same = g->file_size == c->plan.file_size && gguf_read(g, 0, cur, hlen, NULL) == 0 &&
                    memcmp(cur, h, hlen) == 0;
        rc = same ? 1 : pt_errf(err, "%s exists and differs from what this command would write; use --force to "
                                "overwrite it", out);
    }
    free(h);
    free(cur);
    gguf_close(g);
    return rc;
}

// Groups units by the shard of their weight and counts, per shard, the units
// still to write that read from it (weight or scale).
static int index_units(conv *c, pt_err *err)
{
    const pt_plan *p = &c->plan;
    uint32_t ns = c->ix.n_shards;
    free(c->order);
    free(c->first);
    free(c->pending);
    c->order = malloc((p->n_units ? p->n_units : 1) * sizeof *c->order);
    c->first = calloc(ns + 1, sizeof *c->first);
    c->pending = calloc(ns ? ns : 1, sizeof *c->pending);
    if (!c->order || !c->first || !c->pending)
        return pt_errf(err, "out of memory");
    for (uint32_t i = 0; i < p->n_units; i++)
        c->first[p->units[i].shard + 1]++;
    for (uint32_t s = 0; s < ns; s++)
        c->first[s + 1] += c->first[s];
    uint32_t *fill = calloc(ns ? ns : 1, sizeof *fill);
    if (!fill)
        return pt_errf(err, "out of memory");
    for (uint32_t i = 0; i < p->n_units; i++) {
        const pt_unit *u = &p->units[i];
        c->order[c->first[u->shard] + fill[u->shard]++] = i;
        if (c->j.done[u->shard])
            continue;
        c->pending[u->shard]++;
        if (u->scale_shard >= 0 && u->scale_shard != u->shard)
            c->pending[u->scale_shard]++;
    }
    free(fill);
    return 0;
}

// Checks every shard not yet done before anything is written: structure,
// dtypes and shapes against config.json; missing shards need --fetch-cmd.
// Returns the input bytes expected.
static int validate_upfront(conv *c, uint64_t *expect, pt_err *err)
{
    const pt_plan *p = &c->plan;
    *expect = 0;
    for (uint32_t s = 0; s < c->ix.n_shards; s++) {
        if (c->j.done[s] || c->first[s] == c->first[s + 1])
            continue;
        char path[PATH_LEN], name[160];
        shard_path(c, s, path, sizeof path);
        const pt_unit *u0 = &p->units[c->order[c->first[s]]];
        pt_plan_unit_name(p, u0, name, sizeof name);
        if (!file_exists(path)) {
            if (!c->o->fetch_cmd)
                return pt_errf(err, "%s: shard missing (it holds tensor '%s') and no --fetch-cmd given", path, name);
            *expect += c->ix.total_size / (c->ix.n_shards ? c->ix.n_shards : 1);
            continue;
        }
        st_file *f = get_shard(c, s, name, err);
        if (!f)
            return -1;
        for (uint32_t k = c->first[s]; k < c->first[s + 1]; k++) {
            const pt_unit *u = &p->units[c->order[k]];
            st_file *sf = NULL;
            if (u->scale_shard >= 0) {
                char sp[PATH_LEN];
                shard_path(c, (uint32_t)u->scale_shard, sp, sizeof sp);
                if (!file_exists(sp))
                    continue; // validated when fetched
                pt_plan_unit_name(p, u, name, sizeof name);
                if (!(sf = get_shard(c, (uint32_t)u->scale_shard, name, err)))
                    return -1;
            }
            pt_src_view v;
            if (pt_src_view_open(&v, p, u, f, sf, err) < 0)
                return -1;
            *expect += v.in_bytes;
            pt_src_view_free(&v);
        }
    }
    return 0;
}

// Opens <out>.partial (reusing it when resuming, creating it at full size
// otherwise) and writes the header, which is deterministic, every time.
static int open_output(conv *c, pt_err *err)
{
    const pt_plan *p = &c->plan;
    struct stat st;
    bool exists = stat(c->tmp_path, &st) == 0;
    if (exists && (uint64_t)st.st_size != p->file_size) {
        if (c->j.n_done > 0)
            return pt_errf(err, "%s: size %llu does not match the layout (%llu); use --force to start over",
                           c->tmp_path, (unsigned long long)st.st_size, (unsigned long long)p->file_size);
        exists = false;
    }
    if (!exists && c->j.n_done > 0)
        return pt_errf(err, "%s: missing although %s records finished shards; use --force to start over",
                       c->tmp_path, c->journal_path);
    c->out_fd = open(c->tmp_path, O_RDWR | O_CREAT | (exists ? 0 : O_TRUNC) | O_CLOEXEC, 0644);
    if (c->out_fd < 0)
        return pt_errf(err, "%s: cannot create: %s", c->tmp_path, strerror(errno));
    if (!exists) {
        // Reserve the space now, so that a full disk fails here and not hours in
        // (the reserved blocks read as zeros, like a sparse file's holes).
        if (fallocate(c->out_fd, 0, 0, (off_t)p->file_size) != 0) {
            if (errno == ENOSPC)
                return pt_errf(err, "%s: not enough disk space for the %.2f GB output", c->tmp_path,
                               (double)p->file_size / 1e9);
            if (ftruncate(c->out_fd, (off_t)p->file_size) != 0) // filesystem without fallocate
                return pt_errf(err, "%s: cannot size to %llu bytes: %s", c->tmp_path,
                               (unsigned long long)p->file_size, strerror(errno));
        }
    }
    uint64_t hlen;
    void *h = gguf_writer_header(p->w, &hlen);
    if (!h)
        return pt_errf(err, "out of memory");
    int w = pt_write_full(c->out_fd, h, (size_t)hlen, 0, "convert.write");
    free(h);
    if (w != 0)
        return pt_errf(err, "%s: header write failed: %s", c->tmp_path, strerror(errno));
    pt_fsync_dir_of(c->tmp_path);
    return 0;
}

// ---- the work ---------------------------------------------------------------------

// --delete-source: unlinks every shard that is recorded done and that no
// unfinished unit reads from (weight or scale), then fsyncs the directory.
static int delete_finished_shards(conv *c, pt_err *err)
{
    for (uint32_t s = 0; s < c->ix.n_shards; s++) {
        if (!c->j.done[s] || c->pending[s] != 0)
            continue;
        char path[PATH_LEN];
        shard_path(c, s, path, sizeof path);
        if (!file_exists(path))
            continue;
        close_shard(c, s);
        if (unlink(path) != 0)
            return pt_errf(err, "%s: --delete-source: unlink failed: %s", path, strerror(errno));
        pt_fsync_dir_of(path);
        fprintf(stderr, "petrel convert: deleted %s\n", c->ix.shards[s]);
    }
    return 0;
}

// Asks the kernel to start reading unit k's weight (async), so that the disk
// works on the next unit while the current one is converted.
static void prefetch_unit(conv *c, uint32_t s, uint32_t k)
{
    if (k >= c->first[s + 1] || !c->shards[s])
        return;
    char name[160];
    pt_plan_unit_name(&c->plan, &c->plan.units[c->order[k]], name, sizeof name);
    const st_tensor *t = st_find(c->shards[s], name);
    if (t)
        posix_fadvise(c->shards[s]->fd, (off_t)t->begin, (off_t)(t->end - t->begin), POSIX_FADV_WILLNEED);
}

// Converts every unit whose weight lives in shard s, makes the output durable,
// records the shard done, then (with --delete-source) deletes what is finished.
static int process_shard(conv *c, uint32_t s, pt_convbuf *buf, pt_err *err)
{
    const pt_plan *p = &c->plan;
    char name[160], detail[256];
    for (uint32_t k = c->first[s]; k < c->first[s + 1]; k++) {
        const pt_unit *u = &p->units[c->order[k]];
        pt_plan_unit_name(p, u, name, sizeof name);
        st_file *f = get_shard(c, s, name, err);
        if (!f)
            return -1;
        st_file *sf = u->scale_shard >= 0 ? get_shard(c, (uint32_t)u->scale_shard, name, err) : NULL;
        if (u->scale_shard >= 0 && !sf)
            return -1;
        pt_src_view v;
        if (pt_src_view_open(&v, p, u, f, sf, err) < 0)
            return -1;
        prefetch_unit(c, s, k + 1);
        int rc = pt_unit_convert(p, u, &v, c->out_fd, c->tmp_path, buf, err);
        c->in_bytes += v.in_bytes;
        pt_src_view_free(&v);
        if (rc < 0)
            return -1;
        if (c->prog.tty) // the bar has no byte counts of its own
            snprintf(detail, sizeof detail, "shard %u/%u, %.0f/%.0f MB", s + 1, c->ix.n_shards,
                     (double)(c->prog.done + v.in_bytes) / 1e6, (double)c->prog.total / 1e6);
        else
            snprintf(detail, sizeof detail, "shard %u/%u", s + 1, c->ix.n_shards);
        pt_progress_update(&c->prog, c->prog.done + v.in_bytes, detail);
        if (c->o->debug_stop_after_units && ++c->units_run == c->o->debug_stop_after_units)
            raise(SIGKILL);
    }
    // Durable before it is recorded, and recorded before any source is deleted.
    if (pt_sync_full(c->out_fd, true, "convert.sync") != 0)
        return pt_errf(err, "%s: fdatasync failed: %s", c->tmp_path, strerror(errno));
    if (pt_journal_mark_done(&c->j, s, c->ix.shards[s], err) < 0)
        return -1;
    // Written pages are clean now, the shard is read: leave the page cache to others.
    posix_fadvise(c->out_fd, 0, 0, POSIX_FADV_DONTNEED);
    if (c->shards[s])
        posix_fadvise(c->shards[s]->fd, 0, 0, POSIX_FADV_DONTNEED);
    if (c->o->debug_stop_after_shards && ++c->shards_run == c->o->debug_stop_after_shards)
        raise(SIGKILL);
    for (uint32_t k = c->first[s]; k < c->first[s + 1]; k++) {
        const pt_unit *u = &p->units[c->order[k]];
        c->pending[s]--;
        if (u->scale_shard >= 0 && u->scale_shard != (int32_t)s)
            c->pending[u->scale_shard]--;
    }
    if (c->o->delete_source)
        return delete_finished_shards(c, err);
    return 0;
}

// All shards done: fsync, rename <out>.partial to <out>, drop the journal.
static int finish(conv *c, pt_err *err)
{
    if (pt_sync_full(c->out_fd, false, "convert.sync") != 0)
        return pt_errf(err, "%s: fsync failed: %s", c->tmp_path, strerror(errno));
    close(c->out_fd);
    c->out_fd = -1;
    if (rename(c->tmp_path, c->o->out_path) != 0)
        return pt_errf(err, "%s: rename to %s failed: %s", c->tmp_path, c->o->out_path, strerror(errno));
    pt_fsync_dir_of(c->o->out_path);
    pt_journal_close(&c->j);
    c->j_open = false;
    unlink(c->journal_path);
    pt_fsync_dir_of(c->journal_path);
    return 0;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static void print_summary(conv *c, double secs, FILE *f)
{
    const pt_plan *p = &c->plan;
    double in_gb = (double)c->in_bytes / 1e9, out_gb = (double)p->file_size / 1e9;
    fprintf(f, "petrel convert: wrote %s\n", c->o->out_path);
    fprintf(f, "  tensors %u, trunk %.3f GB, experts %.3f GB (%llu routed experts of %llu bytes)\n", p->n_tensors,
            (double)p->trunk_bytes / 1e9, (double)p->expert_bytes / 1e9, (unsigned long long)p->n_routed_experts,
            (unsigned long long)p->bytes_per_expert);
    fprintf(f, "  input %.3f GB, output %.3f GB, %.1f s (in %.1f MB/s, out %.1f MB/s), peak RSS %.1f MB\n", in_gb,
            out_gb, secs, secs > 0 ? in_gb * 1e3 / secs : 0, secs > 0 ? out_gb * 1e3 / secs : 0,
            (double)pt_peak_rss_bytes() / 1e6);
    fprintf(f, "  type mix:");
    for (uint32_t t = 0; t < 32; t++)
        if (p->count_by_type[t])
            fprintf(f, " %s %u (%.3f GB)", pt_dtype_name((pt_dtype)t), p->count_by_type[t],
                    (double)p->bytes_by_type[t] / 1e9);
    fprintf(f, "\n");
    for (uint32_t k = 0; k < p->n_rules; k++)
        fprintf(f, "  type rule %s=%s: %u tensors\n", p->rules[k].pattern, pt_dtype_name(p->rules[k].type),
                p->rule_hits[k]);
    for (uint32_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i].fallback)
            pt_plan_print_fallback(p, i, f, "  ");
    double cpu = cpu_seconds();
    fprintf(f, "  CPU time %.1f s (user + system, all threads): %.1f MB of input per CPU-second\n", cpu,
            cpu > 0 ? in_gb * 1e3 / cpu : 0);
    fprintf(f, "SUMMARY in_bytes=%llu out_bytes=%llu seconds=%.3f cpu_seconds=%.3f peak_rss_bytes=%llu fallbacks=%u\n",
            (unsigned long long)c->in_bytes, (unsigned long long)p->file_size, secs, cpu,
            (unsigned long long)pt_peak_rss_bytes(), p->n_fallbacks);
}

static void report_notes(const conv *c)
{
    for (uint32_t i = 0; i < c->cfg.n_unimpl; i++)
        fprintf(stderr, "petrel convert: %s: not implemented: %s\n", c->cfg_path, c->cfg.unimpl[i]);
    for (uint32_t i = 0; i < c->cfg.n_unknown; i++)
        fprintf(stderr, "petrel convert: %s: unknown key ignored: %s\n", c->cfg_path, c->cfg.unknown[i]);
    if (c->plan.n_unused) {
        fprintf(stderr, "petrel convert: %llu checkpoint tensors are not used, e.g.:",
                (unsigned long long)c->plan.n_unused);
        for (uint64_t i = 0; i < c->plan.n_unused && i < 4; i++)
            fprintf(stderr, " %s", c->plan.unused_example[i]);
        fprintf(stderr, "\n");
    }
}

// The whole conversion: up-to-date check, journal (resume or start), layout,
// up-front validation, MTP de-duplication decision, shards, rename, summary.
static int run(conv *c, pt_err *err)
{
    const pt_convert_opts *o = c->o;
    double t0 = pt_now();
    snprintf(c->cfg_path, sizeof c->cfg_path, "%s/config.json", o->in_dir);
    snprintf(c->tmp_path, sizeof c->tmp_path, "%s.partial", o->out_path);
    snprintf(c->journal_path, sizeof c->journal_path, "%s.journal", o->out_path);
    // tokenizer.json or a tiktoken folder (Kimi-K2), from --tokenizer or in_dir
    int ft = pt_convert_find_tokenizer(o->in_dir, o->tokenizer, c->tok_json, sizeof c->tok_json, c->tok_cfg,
                                       sizeof c->tok_cfg, err);
    if (ft < 0)
        return -1;
    c->has_tok = ft > 0;
    c->has_tok_cfg = c->has_tok && c->tok_cfg[0];
    if (pt_hf_config_load(c->cfg_path, &c->cfg, err) < 0 || pt_hf_index_load(o->in_dir, &c->ix, err) < 0)
        return -1;
    c->shards = calloc(c->ix.n_shards ? c->ix.n_shards : 1, sizeof *c->shards);
    if (!c->shards)
        return pt_errf(err, "out of memory");
    if (o->threads > 0)
        omp_set_num_threads(o->threads);

    if (o->force) {
        unlink(c->journal_path);
        unlink(c->tmp_path);
    } else {
        int up = final_up_to_date(c, err);
        if (up < 0)
            return -1;
        if (up == 1) {
            unlink(c->journal_path);
            unlink(c->tmp_path);
            for (uint32_t s = 0; o->delete_source && s < c->ix.n_shards; s++) { // all durable in <out>
                char path[PATH_LEN];
                shard_path(c, s, path, sizeof path);
                if (file_exists(path) && unlink(path) == 0)
                    fprintf(stderr, "petrel convert: deleted %s\n", c->ix.shards[s]);
            }
            fprintf(o->summary, "petrel convert: %s is complete and up to date (use --force to redo)\n",
                    o->out_path);
            return 0;
        }
    }

    // Journal: resume or start. A plan with the default MTP decision lets the
    // inputs be validated before anything is created.
    uint64_t hash = source_hash(c);
    bool journal_existed = file_exists(c->journal_path);
    pt_journal probe = {0};
    bool resumed = false;
    if (journal_existed) {
        if (pt_journal_open(&c->j, c->journal_path, hash, c->ix.n_shards, &resumed, err) < 0)
            return -1;
        c->j_open = true;
    } else {
        c->j = probe;
        c->j.done = calloc(c->ix.n_shards ? c->ix.n_shards : 1, sizeof *c->j.done);
        c->j.fd = -1;
        c->j.omit_embed = c->j.omit_head = -1;
    }
    bool omit_e = c->j.omit_embed != 0, omit_h = c->j.omit_head != 0;
    uint64_t expect = 0;
    if (build_plan(c, omit_e, omit_h, err) < 0 || index_units(c, err) < 0 || validate_upfront(c, &expect, err) < 0)
        return -1;
    report_notes(c);
    if (!c->j_open) {
        free(c->j.done);
        if (pt_journal_open(&c->j, c->journal_path, hash, c->ix.n_shards, &resumed, err) < 0)
            return -1;
        c->j_open = true;
    }
    if (c->j.omit_embed < 0) {
        if (decide_mtp(c, &omit_e, &omit_h, err) < 0 || pt_journal_set_mtp(&c->j, omit_e, omit_h, err) < 0)
            return -1;
        if (build_plan(c, omit_e, omit_h, err) < 0 || index_units(c, err) < 0)
            return -1;
    }
    if (resumed)
        fprintf(stderr, "petrel convert: resuming: %u of %u shards already done\n", c->j.n_done, c->ix.n_shards);
    if (open_output(c, err) < 0)
        return -1;
    if (o->delete_source && delete_finished_shards(c, err) < 0) // finished in an earlier run
        return -1;

    pt_convbuf buf = {0};
    pt_progress_begin(&c->prog, "convert", expect ? expect : 1);
    int rc = 0;
    for (uint32_t s = 0; s < c->ix.n_shards && rc == 0; s++) {
        if (c->j.done[s])
            continue;
        rc = process_shard(c, s, &buf, err);
    }
    pt_convbuf_free(&buf);
    if (rc < 0)
        return -1;
    if (o->delete_source && delete_finished_shards(c, err) < 0)
        return -1;
    pt_progress_end(&c->prog, "");
    if (finish(c, err) < 0)
        return -1;
    print_summary(c, pt_now() - t0, o->summary);
    return 0;
}

int pt_convert_run(const pt_convert_opts *o, pt_err *err)
{
    conv c = {.o = o, .out_fd = -1};
    c.j.fd = -1;
    int rc = run(&c, err);
    if (c.out_fd >= 0)
        close(c.out_fd);
    // A failed run that finished no shard leaves nothing behind.
    if (rc < 0 && c.j_open && c.j.n_done == 0) {
        unlink(c.tmp_path);
        unlink(c.journal_path);
    }
    if (c.j_open)
        pt_journal_close(&c.j);
    else
        free(c.j.done);
    for (uint32_t s = 0; c.shards && s < c.ix.n_shards; s++)
        st_close(c.shards[s]);
    free(c.shards);
    free(c.order);
    free(c.first);
    free(c.pending);
    if (c.plan_ok)
        pt_plan_free(&c.plan);
    pt_hf_index_free(&c.ix);
    pt_hf_config_free(&c.cfg);
    return rc;
}

int pt_convert_plan(const char *path, const pt_convert_opts *o, FILE *out, pt_err *err)
{
    const pt_dtype expert_type = o->expert_type, trunk_type = o->trunk_type;
    char cfg_path[PATH_LEN + 32], tok[PATH_LEN + 32], tok_cfg[PATH_LEN + 32], dir[PATH_LEN];
    struct stat st;
    if (stat(path, &st) != 0)
        return pt_errf(err, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
    } else {
        snprintf(cfg_path, sizeof cfg_path, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dir, sizeof dir, ".");
    }
    int ft = pt_convert_find_tokenizer(S_ISDIR(st.st_mode) ? dir : NULL, o->tokenizer, tok, sizeof tok, tok_cfg,
                                       sizeof tok_cfg, err);
    if (ft < 0)
        return -1;
    pt_hf_config cfg;
    if (pt_hf_config_load(cfg_path, &cfg, err) < 0)
        return -1;
    pt_hf_index ix;
    char idx_path[PATH_LEN + 32];
    snprintf(idx_path, sizeof idx_path, "%s/model.safetensors.index.json", dir);
    bool have_ix = false;
    if (S_ISDIR(st.st_mode) && (file_exists(idx_path) || (snprintf(idx_path, sizeof idx_path, "%s/model.safetensors",
                                                                   dir), file_exists(idx_path)))) {
        if (pt_hf_index_load(dir, &ix, err) < 0) {
            pt_hf_config_free(&cfg);
            return -1;
        }
        have_ix = true;
    }
    bool has_tok = ft > 0;
    pt_plan_opts po = {
        .expert_type = expert_type, .trunk_type = trunk_type, .rules = o->rules, .n_rules = o->n_rules,
        .tokenizer_json = has_tok ? tok : NULL, .tokenizer_config = has_tok && tok_cfg[0] ? tok_cfg : NULL,
        .omit_mtp_embed = true, .omit_mtp_head = true,
    };
    pt_plan p;
    int rc = pt_plan_build(&p, &cfg, have_ix ? &ix : NULL, &po, err);
    if (rc == 0) {
        fprintf(out, "config: %s\n", cfg_path);
        fprintf(out, "types: experts %s, trunk %s\n", pt_dtype_name(expert_type), pt_dtype_name(trunk_type));
        pt_plan_print(&p, out);
        for (uint32_t i = 0; i < cfg.n_unimpl; i++)
            fprintf(stderr, "petrel convert: %s: not implemented: %s\n", cfg_path, cfg.unimpl[i]);
        pt_plan_free(&p);
    }
    if (have_ix)
        pt_hf_index_free(&ix);
    pt_hf_config_free(&cfg);
    return rc;
}

// server/kvstore.c — kept conversation states (see kvstore.h).
#include "server/kvstore.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

int srv_lcp(const petrel_token *a, int na, const petrel_token *b, int nb)
{
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

// File name hash of a token history; seeded with the model signature so
// that replicas of different models sharing a directory never write the
// same name for the same tokens.
static uint64_t tok_hash(uint64_t seed, const petrel_token *t, int n)
{
    uint64_t h = seed;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint32_t)t[i]) * 0x100000001b3ull;
    return h ^ (uint64_t)n;
}

static void drop_blob(srv_kvstore *s, srv_kv_entry *e)
{
    if (e->blob) {
        s->ram_used -= e->blob_len;
        free(e->blob);
        e->blob = NULL;
    }
}

// Removes entry i (and its file).
static void remove_entry(srv_kvstore *s, int i)
{
    srv_kv_entry *e = &s->e[i];
    drop_blob(s, e);
    if (e->path) {
        unlink(e->path);
        free(e->path);
    }
    free(e->tokens);
    s->e[i] = s->e[--s->n];
}

// Remembers a file that is not to be indexed again (unreadable, or another
// model's); the oldest name is forgotten beyond SRV_KV_SKIP.
static void skip_add(srv_kvstore *s, const char *path)
{
    char *p = strdup(path);
    if (!p)
        return;
    if (s->n_skip == SRV_KV_SKIP) {
        free(s->skip[0]);
        memmove(s->skip, s->skip + 1, sizeof *s->skip * (SRV_KV_SKIP - 1));
        s->n_skip--;
    }
    s->skip[s->n_skip++] = p;
}

static bool known(const srv_kvstore *s, const char *path)
{
    for (int i = 0; i < s->n; i++)
        if (s->e[i].path && !strcmp(s->e[i].path, path))
            return true;
    for (int i = 0; i < s->n_skip; i++)
        if (!strcmp(s->skip[i], path))
            return true;
    return false;
}

static int push(srv_kvstore *s, srv_kv_entry *e)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        srv_kv_entry *p = realloc(s->e, sizeof *p * (size_t)cap);
        if (!p)
            return -1;
        s->e = p;
        s->cap = cap;
    }
    s->e[s->n++] = *e;
    return 0;
}

void srv_kv_refresh(srv_kvstore *s)
{
    if (!s->dir)
        return;
    DIR *d = opendir(s->dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".pkv"))
            continue; // also skips the writers' "*.pkv.tmp.PID" files
        char path[4096], err[256];
        snprintf(path, sizeof path, "%s/%s", s->dir, de->d_name);
        if (known(s, path))
            continue;
        size_t len;
        pt_err pe = {{0}};
        char *buf = pt_read_file(path, &len, &pe);
        if (!buf)
            continue; // removed by another replica meanwhile
        // Another model's state (or another format version) in a shared
        // directory is never indexed, so never loaded, superseded or evicted.
        const bool ours = len >= SRV_KV_SIG && !memcmp(buf, s->sig, SRV_KV_SIG);
        petrel_token *t = NULL;
        int n = ours ? petrel_state_tokens(buf, len, &t, err, sizeof err) : -1;
        free(buf);
        if (n <= 0) {
            free(t);
            skip_add(s, path);
            continue;
        }
        srv_kv_entry e = {.tokens = t, .n = n, .path = strdup(path), .last_use = ++s->clock};
        if (push(s, &e) < 0) {
            free(t);
            free(e.path);
        }
    }
    closedir(d);
}

srv_kvstore *srv_kv_new(const char *dir, uint64_t ram_budget, int max_entries, petrel_context *c, char *err,
                        size_t errlen)
{
    assert(c);
    srv_kvstore *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    // The signature of this model's states: the head of what c writes now.
    void *blob = NULL;
    size_t blen = 0;
    if (petrel_state_save_mem(c, &blob, &blen, err, errlen) < 0 || blen < SRV_KV_SIG) {
        free(blob);
        free(s);
        return NULL;
    }
    memcpy(s->sig, blob, SRV_KV_SIG);
    free(blob);
    s->name_seed = 0xcbf29ce484222325ull;
    for (int i = 0; i < SRV_KV_SIG; i++)
        s->name_seed = (s->name_seed ^ s->sig[i]) * 0x100000001b3ull;
    s->ram_budget = ram_budget;
    s->max_entries = max_entries > 0 ? max_entries : 64;
    if (dir) {
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "%s: cannot create the KV directory: %s", dir, strerror(errno));
            free(s);
            return NULL;
        }
        s->dir = strdup(dir);
        srv_kv_refresh(s);
    }
    return s;
}

void srv_kv_free(srv_kvstore *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++) {
        free(s->e[i].blob);
        free(s->e[i].path);
        free(s->e[i].tokens);
    }
    for (int i = 0; i < s->n_skip; i++)
        free(s->skip[i]);
    free(s->e);
    free(s->dir);
    free(s);
}

int srv_kv_best(srv_kvstore *s, const petrel_token *ids, int n, int *lcp)
{
    int best = -1, bl = 0;
    for (int i = 0; i < s->n; i++) {
        int l = srv_lcp(s->e[i].tokens, s->e[i].n, ids, n);
        if (l > bl) {
            bl = l;
            best = i;
        }
    }
    *lcp = bl;
    return best;
}

int srv_kv_restore(srv_kvstore *s, int i, petrel_context *c, char *err, size_t errlen)
{
    assert(i >= 0 && i < s->n);
    srv_kv_entry *e = &s->e[i];
    e->last_use = ++s->clock;
    int rc;
    if (e->blob)
        rc = petrel_state_load_mem(c, e->blob, e->blob_len, err, errlen);
    else
        rc = petrel_state_load(c, e->path, err, errlen);
    if (rc < 0)
        remove_entry(s, i);
    return rc;
}

// Evicts RAM blobs (oldest first) beyond the budget and entries beyond the
// count limit. Blobs of entries without a file are dropped with the entry.
static void enforce(srv_kvstore *s)
{
    while (s->n > s->max_entries || s->ram_used > s->ram_budget) {
        int old = -1;
        for (int i = 0; i < s->n; i++) {
            if (s->n <= s->max_entries && !s->e[i].blob)
                continue;
            if (old < 0 || s->e[i].last_use < s->e[old].last_use)
                old = i;
        }
        if (old < 0)
            break;
        if (s->n <= s->max_entries && s->e[old].path)
            drop_blob(s, &s->e[old]);
        else
            remove_entry(s, old);
    }
}

int srv_kv_add(srv_kvstore *s, petrel_context *c, char *err, size_t errlen)
{
    const int n = petrel_kv_len(c);
    if (n <= 0)
        return 0;
    const petrel_token *t = petrel_kv_tokens(c);
    srv_kv_entry e = {.n = n, .last_use = ++s->clock};
    if (petrel_state_save_mem(c, &e.blob, &e.blob_len, err, errlen) < 0)
        return -1;
    e.tokens = malloc(sizeof *t * (size_t)n);
    if (!e.tokens) {
        free(e.blob);
        return -1;
    }
    memcpy(e.tokens, t, sizeof *t * (size_t)n);
    if (s->dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%016llx.pkv", s->dir, (unsigned long long)tok_hash(s->name_seed, t, n));
        pt_err pe = {{0}};
        if (pt_write_file_atomic(path, e.blob, e.blob_len, &pe) < 0)
            snprintf(err, errlen, "%s", pe.msg); // kept in RAM only
        else
            e.path = strdup(path);
    }
    // Entries that this state extends (or equals) are superseded; only now
    // that the new file is durable are their files removed, so a kill -9 at
    // any point leaves the conversation with a state on disk (the same
    // history has the same file name: that file is the new one, kept).
    for (int i = 0; i < s->n;) {
        srv_kv_entry *o = &s->e[i];
        if (o->n <= n && srv_lcp(o->tokens, o->n, t, n) == o->n) {
            if (o->path && e.path && !strcmp(o->path, e.path)) {
                free(o->path);
                o->path = NULL;
            }
            remove_entry(s, i);
        } else {
            i++;
        }
    }
    s->ram_used += e.blob_len;
    if (push(s, &e) < 0) {
        s->ram_used -= e.blob_len;
        free(e.blob);
        free(e.tokens);
        free(e.path);
        return -1;
    }
    enforce(s);
    return 0;
}

#include "cache/ecache.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "io/io.h"

// One slot holds one expert's three slices back to back, each 4 KiB aligned.
typedef struct slot {
    int expert;          // -1 when empty
    int pins;            // > 0: in use, not evictable
    uint64_t last_use;   // LRU clock
    unsigned char *mem;  // (slot_bytes,) aligned
} slot;

typedef struct layer_cache {
    pt_ecache_layer_src src;
    uint64_t part_off[3];   // offsets of the slices inside a slot
    uint64_t slot_bytes;
    int cap;                // slots allowed
    int n_slots;            // slots allocated so far (lazily, up to cap)
    slot *slots;            // (cap,)
    int *where;             // (n_expert,) slot index of expert or -1
} layer_cache;

struct pt_ecache {
    int fd;
    char *path;
    int n_layers;
    layer_cache *layers;    // (n_layers,)
    uint64_t clock;
    uint64_t bytes_alloc;
    pt_ecache_stats st;
};

pt_ecache *pt_ecache_new(const pt_ecache_cfg *cfg, pt_err *err)
{
    pt_ecache *c = calloc(1, sizeof *c);
    if (!c) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    c->fd = cfg->fd;
    c->path = strdup(cfg->path ? cfg->path : "?");
    c->n_layers = cfg->n_layers;
    c->layers = calloc((size_t)cfg->n_layers, sizeof *c->layers);
    int n_moe = 0;
    for (int il = 0; il < cfg->n_layers; il++)
        n_moe += cfg->layers[il].n_expert > 0;
    for (int il = 0; il < cfg->n_layers; il++) {
        layer_cache *L = &c->layers[il];
        L->src = cfg->layers[il];
        if (L->src.n_expert <= 0)
            continue;
        uint64_t o = 0;
        for (int k = 0; k < 3; k++) {
            L->part_off[k] = o;
            o += pt_align_up(L->src.bytes[k], PT_ALIGN);
        }
        L->slot_bytes = o;
        int cap = cfg->slots_per_layer;
        if (cap <= 0) {
            uint64_t per_layer = n_moe ? cfg->budget_bytes / (uint64_t)n_moe : 0;
            cap = (int)(per_layer / L->slot_bytes);
        }
        if (cap < 1)
            cap = 1;
        if (cap > L->src.n_expert)
            cap = L->src.n_expert;
        L->cap = cap;
        L->slots = calloc((size_t)cap, sizeof *L->slots);
        L->where = malloc(sizeof(int) * (size_t)L->src.n_expert);
        for (int e = 0; e < L->src.n_expert; e++)
            L->where[e] = -1;
    }
    return c;
}

void pt_ecache_free(pt_ecache *c)
{
    if (!c)
        return;
    for (int il = 0; il < c->n_layers; il++) {
        layer_cache *L = &c->layers[il];
        for (int s = 0; s < L->n_slots; s++)
            pt_free_aligned(L->slots[s].mem);
        free(L->slots);
        free(L->where);
    }
    free(c->layers);
    free(c->path);
    free(c);
}

// Picks a slot for a new expert: a fresh one while under capacity, else the
// least recently used unpinned one. -1 if all are pinned.
static int victim_slot(pt_ecache *c, layer_cache *L)
{
    if (L->n_slots < L->cap) {
        slot *s = &L->slots[L->n_slots];
        s->mem = pt_alloc_aligned(L->slot_bytes);
        if (!s->mem)
            return -1;
        c->bytes_alloc += L->slot_bytes;
        s->expert = -1;
        return L->n_slots++;
    }
    int best = -1;
    for (int i = 0; i < L->n_slots; i++) {
        if (L->slots[i].pins > 0)
            continue;
        if (best < 0 || L->slots[i].last_use < L->slots[best].last_use)
            best = i;
    }
    return best;
}

int pt_ecache_acquire(pt_ecache *c, int il, int e, const void *w[3], pt_err *err)
{
    assert(il >= 0 && il < c->n_layers);
    layer_cache *L = &c->layers[il];
    assert(e >= 0 && e < L->src.n_expert);
    int si = L->where[e];
    if (si >= 0) {
        c->st.hits++;
    } else {
        si = victim_slot(c, L);
        if (si < 0)
            return pt_errf(err, "expert cache: layer %d: no free slot for expert %d (all %d pinned)",
                           il, e, L->cap);
        slot *s = &L->slots[si];
        if (s->expert >= 0)
            L->where[s->expert] = -1;
        s->expert = -1;
        double t0 = pt_now();
        for (int k = 0; k < 3; k++) {
            uint64_t off = L->src.off[k] + (uint64_t)e * L->src.bytes[k];
            if (pt_pread_full(c->fd, c->path, off, s->mem + L->part_off[k], L->src.bytes[k], err) < 0) {
                char msg[sizeof err->msg];
                memcpy(msg, err->msg, sizeof msg);
                return pt_errf(err, "layer %d expert %d: %s", il, e, msg);
            }
        }
        c->st.t_read_s += pt_now() - t0;
        c->st.misses++;
        c->st.bytes_read += L->src.bytes[0] + L->src.bytes[1] + L->src.bytes[2];
        s->expert = e;
        L->where[e] = si;
    }
    slot *s = &L->slots[si];
    s->pins++;
    s->last_use = ++c->clock;
    for (int k = 0; k < 3; k++)
        w[k] = s->mem + L->part_off[k];
    return 0;
}

void pt_ecache_release(pt_ecache *c, int il, int e)
{
    layer_cache *L = &c->layers[il];
    int si = L->where[e];
    assert(si >= 0 && L->slots[si].pins > 0);
    L->slots[si].pins--;
}

void pt_ecache_get_stats(const pt_ecache *c, pt_ecache_stats *s) { *s = c->st; }
void pt_ecache_reset_stats(pt_ecache *c) { memset(&c->st, 0, sizeof c->st); }
uint64_t pt_ecache_bytes(const pt_ecache *c) { return c->bytes_alloc; }
int pt_ecache_slots(const pt_ecache *c, int il) { return c->layers[il].cap; }

// cache/ecache.c — the routed-expert cache (see ecache.h for the contract).
#include "cache/ecache.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/util.h"
#include "io/reader.h"

enum { S_EMPTY = 0, S_LOADING = 1, S_READY = 2 };

// One slot holds one expert's three slices, each at its aligned span.
typedef struct slot {
    int expert;          // -1 when empty
    int state;           // S_EMPTY / S_LOADING / S_READY
    int pins;            // > 0: in use, not evictable
    int reads_left;      // slice reads in flight
    int failed;          // a slice read failed
    bool hot;            // hot-store slot: never evicted
    bool prefetched;     // filled by prefetch and not used since
    char *errmsg;        // first slice-read failure of the load in flight (heap), or NULL
    uint64_t last_use;   // LRU clock
    unsigned char *mem;  // (slot_bytes,) aligned
} slot;

typedef struct layer_cache {
    pt_ecache_layer_src src;
    uint64_t slot_bytes;
    int quota;              // fair share of LRU slots (slot mode: the fixed count)
    int n_lru;              // LRU (non-hot) slots allocated
    int n_slots;            // slots allocated (LRU + hot)
    slot *slots;            // (n_expert,) at most one slot per expert
    int *where;             // (n_expert,) slot index of expert or -1
    bool *is_hot;           // (n_expert,) expert belongs to the hot-store
    uint64_t *freq;         // (n_expert,) demand uses (prior heat + this session)
    double *score;          // (n_expert,) decayed uses (halflife > 0), as of stamp
    uint64_t *stamp;        // (n_expert,) the layer's use count when score was last brought up to date
    uint64_t uses;          // demand uses of this layer so far (the decay's clock)
    // Token-to-token transitions (next-aware eviction, see worse()):
    float *trans;           // (n_expert, n_expert) [a][b]: steps using b right after a step using a
    float *from;            // (n_expert,) steps using a that had a next step
    uint8_t *cur, *prev;    // (n_expert,) experts of this step (so far) / of the step before
    int *cur_list;          // (n_expert,) the n_cur experts set in cur
    int n_cur;
    bool prev_small;        // the step before had at most 2 * n_used experts (counted in trans)
    bool released;          // an expert of this layer was released since its last demand
    // Prefetch confidence (pt_ecache_prefetch): the margins of the
    // predictions made for the layer's next step and for the step in
    // progress (NAN: not predicted), and per margin bin how many
    // predictions were made and how many of them were then used.
    float *pend, *pcur;     // (n_expert,)
    uint32_t cal_n[PT_EC_PF_BINS], cal_u[PT_EC_PF_BINS];
    double decay;           // log2 of the decay per use: -1 / (halflife * n_used)
    pt_ecache_layer_stats st;
} layer_cache;

struct pt_ecache {
    pt_reader *rd;
    char *path;
    int n_layers;
    layer_cache *layers;    // (n_layers,)
    bool slot_mode;
    bool lru_only;          // plain LRU victims (else least used, then least recent)
    bool decayed;           // uses count with an exponential decay (cfg halflife > 0)
    bool next_aware;        // eviction weighs the transitions from this step's experts
    int last_demand;        // layer of the last demand request (-1: none yet)
    float pf_min;           // prefetch admission: the least estimated chance of use read
    float pf_victim;        // ... and at least this times the victim's (when one must leave)
    float pf_pred;          // weight of a resident's prediction for the next step in its eviction rank
    double cold_bar;        // prefetch: below this share of cold uses, absent experts' chances shrink (0: off)
    double cold;            // share of the recent demand uses (all layers, exponential weights over
                            // ~PT_EC_PF_COLD_WINDOW) that needed a read: misses and prefetched experts
    int n_used;             // experts per token (cfg n_used, at least 1)
    uint64_t budget;        // LRU slot bytes allowed (budget mode)
    uint64_t lru_bytes;     // LRU slot bytes allocated
    uint64_t hot_bytes;     // hot slot bytes allocated
    uint64_t clock;
    int inflight;           // slots loading
    // Slot memory: one arena sized for every slot the cache may hold,
    // faulted in when the cache is created (so decoding never page-faults
    // and the kernel clears each page once, by all threads at once), carved
    // into slots; a slot given up by a layer goes to a free list that the
    // next new slot of the same size takes from.
    unsigned char *arena;   // (arena_bytes,) mmap'ed, or NULL
    uint64_t arena_bytes, arena_used;
    unsigned char **free_mem; // (n_free,) slot buffers given back (arena pieces may be
    uint64_t *free_size;      // (n_free,) their sizes          split and merged; heap ones never)
    int n_free, cap_free;
    uint64_t heap_bytes;      // slot memory taken from the heap (arena full or fragmented)
};

static int pf_bin(float m);
static double pf_chance(const layer_cache *L, float m);

// Faults every page of [p, p + n) in, the threads sharing the work.
static void prefault(unsigned char *p, uint64_t n)
{
    const int64_t pages = (int64_t)((n + 4095) / 4096);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < pages; i++)
        ((volatile unsigned char *)p)[i * 4096] = 0;
}

static bool in_arena(const pt_ecache *c, const unsigned char *p)
{
    return c->arena && p >= c->arena && p < c->arena + c->arena_bytes;
}

static void free_take(pt_ecache *c, int i)
{
    c->free_mem[i] = c->free_mem[c->n_free - 1];
    c->free_size[i] = c->free_size[c->n_free - 1];
    c->n_free--;
}

// Index of the smallest given-back arena buffer larger than n, or -1.
static int best_fit(const pt_ecache *c, uint64_t n)
{
    int best = -1;
    for (int i = 0; i < c->n_free; i++)
        if (c->free_size[i] > n && in_arena(c, c->free_mem[i]) && (best < 0 || c->free_size[i] < c->free_size[best]))
            best = i;
    return best;
}

static int cmp_ptr(const void *a, const void *b)
{
    const unsigned char *x = *(unsigned char *const *)a, *y = *(unsigned char *const *)b;
    return x < y ? -1 : x > y;
}

// Merges given-back arena buffers that touch into one (slot sizes differ
// per layer: without this, space a layer gives up in pieces of its size
// could never hold a larger slot of another layer).
static void coalesce(pt_ecache *c)
{
    if (c->n_free < 2)
        return;
    // Sort (address, size) pairs by address: sizes follow via a lookup.
    unsigned char **order = malloc(sizeof *order * (size_t)c->n_free);
    uint64_t *sz = malloc(sizeof *sz * (size_t)c->n_free);
    if (!order || !sz) {
        free(order);
        free(sz);
        return;
    }
    memcpy(order, c->free_mem, sizeof *order * (size_t)c->n_free);
    qsort(order, (size_t)c->n_free, sizeof *order, cmp_ptr);
    for (int i = 0; i < c->n_free; i++)
        for (int j = 0; j < c->n_free; j++)
            if (c->free_mem[j] == order[i]) {
                sz[i] = c->free_size[j];
                break;
            }
    int n = 0;
    for (int i = 0; i < c->n_free; i++) {
        if (n > 0 && in_arena(c, order[i]) && in_arena(c, c->free_mem[n - 1]) &&
            c->free_mem[n - 1] + c->free_size[n - 1] == order[i]) {
            c->free_size[n - 1] += sz[i];
            continue;
        }
        c->free_mem[n] = order[i];
        c->free_size[n++] = sz[i];
    }
    c->n_free = n;
    free(order);
    free(sz);
}

// A buffer for one slot of n bytes: a given-back one of that size, else
// the head of the smallest larger given-back arena buffer (the rest stays
// given back), else fresh arena space, else the same after merging
// neighbouring given-back buffers, else the heap (only when slot sizes
// differ and the arena is fragmented).
static unsigned char *slot_mem_get(pt_ecache *c, uint64_t n)
{
    for (int i = c->n_free - 1; i >= 0; i--)
        if (c->free_size[i] == n) {
            unsigned char *p = c->free_mem[i];
            free_take(c, i);
            return p;
        }
    for (int pass = 0; pass < 2; pass++) {
        int i = best_fit(c, n);
        if (i >= 0) {
            unsigned char *p = c->free_mem[i];
            c->free_mem[i] += n;
            c->free_size[i] -= n;
            return p;
        }
        if (pass == 0 && c->arena && c->arena_used + n <= c->arena_bytes) {
            unsigned char *p = c->arena + c->arena_used;
            c->arena_used += n;
            return p;
        }
        if (pass == 0)
            coalesce(c);
    }
    for (int i = c->n_free - 1; i >= 0; i--) // (an exact fit made by merging)
        if (c->free_size[i] == n) {
            unsigned char *p = c->free_mem[i];
            free_take(c, i);
            return p;
        }
    unsigned char *p = pt_alloc_aligned_lazy(n);
    if (p)
        c->heap_bytes += n;
    return p;
}

static void slot_mem_put(pt_ecache *c, unsigned char *p, uint64_t n)
{
    if (!p)
        return;
    if (c->n_free == c->cap_free) {
        int cap = c->cap_free ? 2 * c->cap_free : 16;
        unsigned char **m = realloc(c->free_mem, sizeof *m * (size_t)cap);
        if (m)
            c->free_mem = m;
        uint64_t *z = realloc(c->free_size, sizeof *z * (size_t)cap);
        if (z)
            c->free_size = z;
        if (!m || !z) {
            if (!in_arena(c, p))
                pt_free_aligned(p);
            return; // (arena space is simply not reused)
        }
        c->cap_free = cap;
    }
    c->free_mem[c->n_free] = p;
    c->free_size[c->n_free++] = n;
}

uint64_t pt_ecache_slot_bytes_for(const pt_ecache_layer_src *src)
{
    uint64_t o = 0;
    for (int k = 0; k < 3; k++)
        o += pt_align_up(src->bytes[k], PT_ALIGN) + PT_ALIGN;
    return o;
}

// Where slice k of expert e starts in its slot, and the bytes' offset in it.
static uint64_t part_off(const layer_cache *L, int k)
{
    uint64_t o = 0;
    for (int j = 0; j < k; j++)
        o += pt_align_up(L->src.bytes[j], PT_ALIGN) + PT_ALIGN;
    return o;
}

static uint64_t slice_off(const layer_cache *L, int e, int k)
{
    const uint64_t stride = L->src.stride[k] ? L->src.stride[k] : L->src.bytes[k];
    return L->src.off[k] + (uint64_t)e * stride;
}

pt_ecache *pt_ecache_new(const pt_ecache_cfg *cfg, pt_err *err)
{
    assert(cfg->reader && cfg->n_layers > 0);
    pt_ecache *c = calloc(1, sizeof *c);
    if (!c) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    c->rd = cfg->reader;
    c->path = strdup(cfg->path ? cfg->path : "?");
    c->n_layers = cfg->n_layers;
    c->slot_mode = cfg->slots_per_layer > 0;
    c->lru_only = cfg->lru_only;
    c->decayed = !cfg->lru_only && cfg->halflife > 0;
    c->next_aware = c->decayed && !cfg->no_next;
    c->last_demand = -1;
    c->pf_min = PT_EC_PF_MIN;
    c->pf_victim = PT_EC_PF_VICTIM;
    c->pf_pred = PT_EC_PF_PRED;
    c->cold = 1; // (an empty cache: every use needs a read)
    c->cold_bar = PT_EC_PF_COLD;
    c->n_used = cfg->n_used > 0 ? cfg->n_used : 1;
    c->budget = cfg->budget_bytes;
    c->layers = calloc((size_t)cfg->n_layers, sizeof *c->layers);
    if (!c->layers)
        goto oom;
    int n_moe = 0;
    uint64_t min_bytes = 0;
    for (int il = 0; il < cfg->n_layers; il++)
        if (cfg->layers[il].n_expert > 0) {
            n_moe++;
            min_bytes += pt_ecache_slot_bytes_for(&cfg->layers[il]);
        }
    if (!c->slot_mode && n_moe > 0 && c->budget < min_bytes) {
        pt_errf(err, "%s: expert cache budget of %.1f MB is below one expert per MoE layer (%.1f MB)", c->path,
                (double)c->budget / 1e6, (double)min_bytes / 1e6);
        pt_ecache_free(c);
        return NULL;
    }
    for (int il = 0; il < cfg->n_layers; il++) {
        layer_cache *L = &c->layers[il];
        L->src = cfg->layers[il];
        if (L->src.n_expert <= 0)
            continue;
        L->slot_bytes = pt_ecache_slot_bytes_for(&L->src);
        int q = cfg->slots_per_layer;
        if (!c->slot_mode) {
            uint64_t share = c->budget / (uint64_t)n_moe / L->slot_bytes;
            q = share > (uint64_t)L->src.n_expert ? L->src.n_expert : (int)share;
        }
        L->quota = q < 1 ? 1 : (q > L->src.n_expert ? L->src.n_expert : q);
        L->slots = calloc((size_t)L->src.n_expert, sizeof *L->slots);
        L->where = malloc(sizeof(int) * (size_t)L->src.n_expert);
        L->is_hot = calloc((size_t)L->src.n_expert, sizeof(bool));
        L->freq = calloc((size_t)L->src.n_expert, sizeof(uint64_t));
        L->score = calloc((size_t)L->src.n_expert, sizeof(double));
        L->stamp = calloc((size_t)L->src.n_expert, sizeof(uint64_t));
        if (!L->slots || !L->where || !L->is_hot || !L->freq || !L->score || !L->stamp)
            goto oom;
        {
            const size_t ne = (size_t)L->src.n_expert;
            L->cur = calloc(ne, 1);
            L->cur_list = calloc(ne, sizeof(int));
            L->pend = malloc(sizeof(float) * ne);
            L->pcur = malloc(sizeof(float) * ne);
            if (!L->cur || !L->cur_list || !L->pend || !L->pcur)
                goto oom;
            for (size_t x = 0; x < ne; x++)
                L->pend[x] = L->pcur[x] = NAN;
        }
        if (c->next_aware) {
            const size_t ne = (size_t)L->src.n_expert;
            L->trans = calloc(ne * ne, sizeof(float));
            L->from = calloc(ne, sizeof(float));
            L->prev = calloc(ne, 1);
            if (!L->trans || !L->from || !L->prev)
                goto oom;
        }
        if (c->decayed) {
            // Prior heat as the score an expert of that share of the uses
            // settles at: one use in `share` of the layer's uses, summed
            // over the decay (per uses of half-life): share * per / ln 2.
            // It decays like the session's own uses: it orders the first
            // few hundred tokens (what a hot-store pinned by heat gave,
            // without fixing the slots), then the session's uses take over
            // (a lasting prior from other text cost 1-1.5 points on the
            // trained model's routing and gained nothing on random routing).
            const double per = cfg->halflife * (cfg->n_used > 0 ? cfg->n_used : 1);
            L->decay = -1.0 / per;
            double tot = 0;
            if (cfg->heat)
                for (int e = 0; e < L->src.n_expert; e++)
                    tot += (double)cfg->heat[(size_t)il * (size_t)cfg->heat_stride + (size_t)e];
            for (int e = 0; e < L->src.n_expert && tot > 0; e++)
                L->score[e] = (double)cfg->heat[(size_t)il * (size_t)cfg->heat_stride + (size_t)e] / tot * per /
                              0.6931471805599453;
        }
        if (cfg->heat)
            for (int e = 0; e < L->src.n_expert; e++)
                L->freq[e] = cfg->heat[(size_t)il * (size_t)cfg->heat_stride + (size_t)e];
        for (int e = 0; e < L->src.n_expert; e++)
            L->where[e] = -1;
    }
    uint64_t arena = 0;
    for (int i = 0; i < cfg->n_hot; i++) {
        int il = cfg->hot[2 * i], e = cfg->hot[2 * i + 1];
        if (il >= 0 && il < c->n_layers && e >= 0 && e < c->layers[il].src.n_expert && !c->layers[il].is_hot[e]) {
            c->layers[il].is_hot[e] = true;
            arena += c->layers[il].slot_bytes;
        }
    }
    if (c->slot_mode) {
        for (int il = 0; il < c->n_layers; il++)
            arena += (uint64_t)c->layers[il].quota * c->layers[il].slot_bytes;
    } else {
        uint64_t all = 0; // (never more than every expert)
        for (int il = 0; il < c->n_layers; il++)
            all += (uint64_t)c->layers[il].src.n_expert * c->layers[il].slot_bytes;
        arena += c->budget < all ? c->budget : all;
    }
    if (arena > 0) {
        void *p = mmap(NULL, arena, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            pt_errf(err, "%s: cannot map %.1f MB for the expert cache: %s", c->path, (double)arena / 1e6,
                    strerror(errno));
            pt_ecache_free(c);
            return NULL;
        }
        madvise(p, arena, MADV_HUGEPAGE); // (fewer faults and TLB misses where THP is on)
        c->arena = p;
        c->arena_bytes = arena;
        prefault(c->arena, arena);
        pt_reader_register(c->rd, c->arena, arena); // (reads work the same when it fails)
    }
    return c;
oom:
    pt_errf(err, "out of memory");
    pt_ecache_free(c);
    return NULL;
}

void pt_ecache_free(pt_ecache *c)
{
    if (!c)
        return;
    pt_err e;
    int il, ex;
    while (c->inflight > 0 && pt_ecache_wait(c, &il, &ex, &e) != 0) {
    }
    for (int l = 0; l < c->n_layers; l++) {
        layer_cache *L = &c->layers[l];
        for (int s = 0; s < L->n_slots; s++)
            if (!in_arena(c, L->slots[s].mem))
                pt_free_aligned(L->slots[s].mem);
        free(L->slots);
        free(L->where);
        free(L->is_hot);
        free(L->freq);
        free(L->score);
        free(L->stamp);
        free(L->trans);
        free(L->from);
        free(L->cur);
        free(L->prev);
        free(L->cur_list);
        free(L->pend);
        free(L->pcur);
    }
    free(c->layers);
    free(c->path);
    for (int i = 0; i < c->n_free; i++)
        if (!in_arena(c, c->free_mem[i]))
            pt_free_aligned(c->free_mem[i]);
    free(c->free_mem);
    free(c->free_size);
    if (c->arena) {
        if (pt_reader_registered(c->rd))
            pt_reader_register(c->rd, NULL, 0);
        munmap(c->arena, c->arena_bytes);
    }
    free(c);
}

static bool evictable(const slot *s) { return s->state == S_READY && s->pins == 0 && !s->hot; }

// Expert e's decayed use count now (the prior heat included).
static double score_now(const layer_cache *L, int e)
{
    return L->score[e] * exp2(L->decay * (double)(L->uses - L->stamp[e]));
}

// Next-aware eviction: the estimated number of this layer's next steps'
// experts... precisely, the chance that the step after the one in progress
// uses expert x, summed over the experts a of the step in progress so far
// (the current token's already-known selection; before the layer's step,
// at prefetch time, the previous token's): P(x | a) from the transitions
// counted this session, (steps a -> x + NEXT_PRIOR * n_used / n_expert) /
// (steps with a + NEXT_PRIOR). Routing of a trained model repeats little
// from one token to the next (18% on the trained fixture), but which
// experts follow which is learnable online: on bench/trace-replay.sh
// --trained it adds ~2 points over decayed use counts alone.
enum { NEXT_PRIOR = 1 };
#define NEXT_USE_WEIGHT 0.05 // weight of a decayed use against one unit of next-step chance

static double next_chance(const layer_cache *L, int x, int n_used)
{
    const int ne = L->src.n_expert;
    const double base = (double)NEXT_PRIOR * (double)n_used / (double)ne;
    double p = 0;
    for (int i = 0; i < L->n_cur; i++) {
        const int a = L->cur_list[i];
        p += ((double)L->trans[(size_t)a * (size_t)ne + (size_t)x] + base) / ((double)L->from[a] + NEXT_PRIOR);
    }
    return p;
}

// The chance that the resident of slot s is used by the layer's next step,
// as next-aware eviction estimates it: the mean over the experts of the
// step before of P(s's expert | that expert); an expert held but not used
// yet after a prefetch is taken at its prediction's chance when higher.
static double pf_victim_chance(const pt_ecache *c, const layer_cache *L, const slot *s)
{
    double v = L->n_cur > 0 ? next_chance(L, s->expert, c->n_used) / (double)L->n_cur : 0;
    if (!isnan(L->pend[s->expert])) {
        const double q = pf_chance(L, L->pend[s->expert]);
        v = q > v ? q : v;
    }
    return v;
}

// A resident predicted for the layer's next step (pt_ecache_prefetch, before
// that step): its prediction's chance of use, in next_chance's units (a sum
// over the n_cur experts of the step before), times pf_pred; else 0. So
// that the reads of weaker predictions do not evict stronger ones.
static double pred_bonus(const pt_ecache *c, const layer_cache *L, int x)
{
    if (c->pf_pred <= 0 || isnan(L->pend[x]))
        return 0;
    return c->pf_pred * pf_chance(L, L->pend[x]) * (double)(L->n_cur > 0 ? L->n_cur : 1);
}

// Whether slot a is a better victim than slot b: the least used expert
// (routing heat), the least recently used among equals; plain LRU in
// lru_only mode. A prefetched expert not used yet counts as used once less.
// With a half-life, uses count less the older they are (recency and
// frequency together: a long half-life is LFU, a short one LRU); with
// next-aware eviction, the chance that the next step uses the expert comes
// first (next_chance) and the decayed uses count NEXT_USE_WEIGHT each.
static bool worse(const pt_ecache *c, const layer_cache *L, const slot *a, const slot *b)
{
    if (c->next_aware && L->n_cur <= 2 * c->n_used) { // (not for prefill-sized batches: cost, noise)
        const double sa = next_chance(L, a->expert, c->n_used) + pred_bonus(c, L, a->expert) +
                          NEXT_USE_WEIGHT * (score_now(L, a->expert) + !a->prefetched),
                     sb = next_chance(L, b->expert, c->n_used) + pred_bonus(c, L, b->expert) +
                          NEXT_USE_WEIGHT * (score_now(L, b->expert) + !b->prefetched);
        if (sa != sb)
            return sa < sb;
    } else if (c->decayed) {
        const double sa = score_now(L, a->expert) + !a->prefetched, sb = score_now(L, b->expert) + !b->prefetched;
        if (sa != sb)
            return sa < sb;
    } else if (!c->lru_only) {
        uint64_t fa = L->freq[a->expert] + !a->prefetched, fb = L->freq[b->expert] + !b->prefetched;
        if (fa != fb)
            return fa < fb;
    }
    return a->last_use < b->last_use;
}

// The evictable slot of layer L to give up first, or -1.
static int lru_slot(const pt_ecache *c, const layer_cache *L)
{
    int best = -1;
    for (int i = 0; i < L->n_slots; i++)
        if (evictable(&L->slots[i]) && (best < 0 || worse(c, L, &L->slots[i], &L->slots[best])))
            best = i;
    return best;
}

// Drops the expert held by slot si of L (accounting for wasted prefetch).
static void evict(layer_cache *L, int si)
{
    slot *s = &L->slots[si];
    if (s->expert >= 0) {
        L->where[s->expert] = -1;
        if (s->prefetched)
            L->st.prefetch_wasted_bytes += L->src.bytes[0] + L->src.bytes[1] + L->src.bytes[2];
    }
    s->expert = -1;
    s->state = S_EMPTY;
    s->prefetched = false;
}

// Gives up slot si of layer L entirely, keeping the slot array dense. Its
// memory goes to the free list, for the next new slot of the same size:
// freeing and allocating 3-20 MB buffers over and over would cost a page
// fault and a page clear per 4 KiB each time (a third of the CPU time when
// layers trade slots all the time).
static void drop_slot(pt_ecache *c, layer_cache *L, int si)
{
    evict(L, si);
    slot_mem_put(c, L->slots[si].mem, L->slot_bytes);
    c->lru_bytes -= L->slot_bytes;
    L->n_lru--;
    int last = --L->n_slots;
    if (si != last) {
        L->slots[si] = L->slots[last];
        if (L->slots[si].expert >= 0)
            L->where[L->slots[si].expert] = si;
    }
    memset(&L->slots[last], 0, sizeof L->slots[last]);
}

static int new_slot(pt_ecache *c, layer_cache *L, bool hot)
{
    slot *s = &L->slots[L->n_slots];
    memset(s, 0, sizeof *s);
    s->mem = slot_mem_get(c, L->slot_bytes);
    if (!s->mem)
        return -1;
    s->expert = -1;
    s->hot = hot;
    if (hot) {
        c->hot_bytes += L->slot_bytes;
    } else {
        c->lru_bytes += L->slot_bytes;
        L->n_lru++;
    }
    return L->n_slots++;
}

// Finds a slot for a new expert of layer il (see the header for the
// policy). -1 when none can be had now.
static int find_slot(pt_ecache *c, int il, bool hot, bool prefetch)
{
    layer_cache *L = &c->layers[il];
    for (int i = 0; i < L->n_slots; i++) // emptied by a failed read
        if (L->slots[i].state == S_EMPTY && L->slots[i].hot == hot)
            return i;
    if (hot)
        return new_slot(c, L, true);
    if (c->slot_mode) {
        if (L->n_lru < L->quota)
            return new_slot(c, L, false);
        int si = lru_slot(c, L);
        if (si >= 0)
            evict(L, si);
        return si;
    }
    if (c->lru_bytes + L->slot_bytes <= c->budget)
        return new_slot(c, L, false);
    int si = lru_slot(c, L);
    if (si >= 0 && (L->n_lru >= L->quota || prefetch)) {
        evict(L, si);
        return si;
    }
    if (prefetch)
        return -1;
    // Below its share: take the LRU slot of the layer furthest above its
    // own, again while this layer's slot does not fit (another layer's
    // slots may be smaller). Ends: with every layer at or below its share
    // the slots fit the budget (quota = budget / MoE layers / slot bytes).
    for (;;) {
        int donor = -1, excess = 0;
        for (int j = 0; j < c->n_layers; j++) {
            layer_cache *D = &c->layers[j];
            if (j == il || D->src.n_expert <= 0 || D->n_lru - D->quota <= excess || lru_slot(c, D) < 0)
                continue;
            donor = j;
            excess = D->n_lru - D->quota;
        }
        if (donor < 0)
            break;
        layer_cache *D = &c->layers[donor];
        drop_slot(c, D, lru_slot(c, D));
        if (c->lru_bytes + L->slot_bytes <= c->budget)
            return new_slot(c, L, false);
    }
    if (si >= 0) {
        evict(L, si);
        return si;
    }
    // Every slot of this layer is in use and no layer is above its share:
    // take a slot from the layer holding the most (a token may need more
    // experts of one layer than its share while the others hold fewer; a
    // refusal here would stall the engine for good).
    int donor = -1;
    for (int j = 0; j < c->n_layers; j++) {
        layer_cache *D = &c->layers[j];
        if (j != il && D->src.n_expert > 0 && lru_slot(c, D) >= 0 && (donor < 0 || D->n_lru > c->layers[donor].n_lru))
            donor = j;
    }
    if (donor >= 0) {
        layer_cache *D = &c->layers[donor];
        drop_slot(c, D, lru_slot(c, D));
        if (c->lru_bytes + L->slot_bytes <= c->budget)
            return new_slot(c, L, false);
    }
    return -1;
}

static int start_read(pt_ecache *c, int il, int e, int si, pt_err *err)
{
    layer_cache *L = &c->layers[il];
    slot *s = &L->slots[si];
    s->expert = e;
    s->state = S_LOADING;
    s->reads_left = 3;
    s->failed = 0;
    L->where[e] = si;
    c->inflight++;
    for (int k = 0; k < 3; k++) {
        uint64_t tag = ((uint64_t)il << 40) | ((uint64_t)e << 8) | (uint64_t)k;
        if (pt_reader_submit(c->rd, tag, slice_off(L, e, k), L->src.bytes[k], s->mem + part_off(L, k), err) < 0)
            return -1; // out of memory: the engine stops; the slot stays loading
    }
    L->st.bytes_read += L->src.bytes[0] + L->src.bytes[1] + L->src.bytes[2];
    return 0;
}

static int pf_bin(float m)
{
    const float b = floorf((m - PT_EC_PF_LO) / PT_EC_PF_W);
    return b < 0 ? 0 : b >= PT_EC_PF_BINS - 1 ? PT_EC_PF_BINS - 1 : (int)b;
}

// Opens layer L's next step: the finished step's transitions from the one
// before are counted (next-aware eviction), the predictions made for it
// are scored against its experts (prefetch confidence), and those made
// since for the step now opening become the step in progress's.
static void open_step(pt_ecache *c, layer_cache *L)
{
    const size_t ne = (size_t)L->src.n_expert;
    // (a batch's union says little about one token's experts)
    const bool small = L->n_cur <= 2 * c->n_used;
    if (c->next_aware) {
        const bool fold = small && L->prev_small;
        for (size_t x = 0; x < ne && fold; x++)
            if (L->prev[x]) {
                L->from[x] += 1;
                for (size_t y = 0; y < ne; y++)
                    L->trans[x * ne + y] += L->cur[y];
            }
        memcpy(L->prev, L->cur, ne);
    }
    L->prev_small = small;
    for (size_t x = 0; x < ne; x++) {
        if (!isnan(L->pcur[x]) && L->n_cur > 0) {
            const int b = pf_bin(L->pcur[x]);
            if (L->cal_n[b] >= PT_EC_PF_WINDOW) { // (halved: recent predictions weigh more)
                L->cal_n[b] /= 2;
                L->cal_u[b] /= 2;
            }
            L->cal_n[b]++;
            L->cal_u[b] += L->cur[x];
        }
        L->pcur[x] = L->pend[x];
        L->pend[x] = NAN;
    }
    memset(L->cur, 0, ne);
    L->n_cur = 0;
}

// The estimated chance that a prediction of margin m is used by its step:
// the share used of this layer's earlier predictions in m's bin, from a
// prior of PT_EC_PF_PRIOR predictions at 1/2 (m >= 0: among the router's
// choice) or 1/4 (m < 0).
static double pf_chance(const layer_cache *L, float m)
{
    const int b = pf_bin(m);
    const double p0 = m >= 0 ? 0.5 : 0.25;
    return ((double)L->cal_u[b] + PT_EC_PF_PRIOR * p0) / ((double)L->cal_n[b] + PT_EC_PF_PRIOR);
}

// Counts a demand use into the recent share of uses that needed a read
// (cold: a miss, or an expert a prefetch brought in).
static void note_use(pt_ecache *c, bool cold)
{
    c->cold += ((cold ? 1.0 : 0.0) - c->cold) / PT_EC_PF_COLD_WINDOW;
}

// The correction to a margin table's chance for a prediction of an absent
// expert: 1 while at least cold_bar (PT_EC_PF_COLD) of the recent uses needed a read,
// falling in proportion below that. The tables pool predictions of resident
// and absent experts; while the cache streams, absent predictions are used
// about as the tables say. Once the cache holds the working set (the uses
// are all hits on experts resident before they were predicted), the absent
// predictions are the mispredictions, used by no step, and each read costs
// I/O, CPU and a victim for nothing: bench16 at 6 GiB, the second pass over
// 8 tokens, every use a hit, read 17 predicted experts (~60 MB) a token
// before this check. Pooled over the layers, the share falls within a
// token of the working set being held (bench16: 216 uses a token: 7 reads
// in that pass, all in its first token). On the trained model's routing
// (bench/trace-replay.sh --trained, 12.5-50% of the experts cached) the
// share never fell below PT_EC_PF_COLD: the replay's figures are unchanged.
static double cold_factor(const pt_ecache *c)
{
    if (c->cold_bar <= 0 || c->cold >= c->cold_bar)
        return 1;
    return c->cold / c->cold_bar;
}

int pt_ecache_request(pt_ecache *c, int il, int e, int kind, pt_err *err)
{
    assert(il >= 0 && il < c->n_layers);
    layer_cache *L = &c->layers[il];
    assert(e >= 0 && e < L->src.n_expert);
    if (kind == PT_EC_DEMAND) {
        // A demand after another layer's, or after a release in this layer,
        // opens this layer's next step.
        if (c->last_demand != il || L->released)
            open_step(c, L);
        c->last_demand = il;
        L->released = false;
        if (!L->cur[e]) {
            L->cur[e] = 1;
            L->cur_list[L->n_cur++] = e;
        }
    }
    if (kind == PT_EC_DEMAND) {
        L->freq[e]++;
        if (c->decayed) {
            L->uses++;
            L->score[e] = score_now(L, e) + 1;
            L->stamp[e] = L->uses;
        }
    }
    int si = L->where[e];
    if (si >= 0) {
        slot *s = &L->slots[si];
        if (kind == PT_EC_DEMAND) {
            note_use(c, s->prefetched || s->state != S_READY);
            if (s->prefetched)
                L->st.hits_prefetch++;
            else if (s->hot)
                L->st.hits_hot++;
            else if (s->state == S_READY)
                L->st.hits_lru++;
            else
                L->st.misses++;
        }
        if (kind != PT_EC_PREFETCH && kind != PT_EC_AHEAD) {
            s->prefetched = false;
            s->last_use = ++c->clock;
        }
        return s->state == S_READY ? PT_EC_READY : PT_EC_LOADING;
    }
    if (kind == PT_EC_DEMAND) {
        note_use(c, true);
        L->st.misses++;
    }
    si = find_slot(c, il, L->is_hot[e], kind == PT_EC_PREFETCH);
    if (si < 0)
        return PT_EC_NOROOM;
    if (start_read(c, il, e, si, err) < 0)
        return -1;
    slot *s = &L->slots[si];
    s->last_use = ++c->clock;
    s->prefetched = kind == PT_EC_PREFETCH || kind == PT_EC_AHEAD;
    if (s->prefetched)
        L->st.prefetch_reads++;
    return PT_EC_LOADING;
}

int pt_ecache_prefetch(pt_ecache *c, int il, int e, float margin, pt_err *err)
{
    assert(il >= 0 && il < c->n_layers);
    layer_cache *L = &c->layers[il];
    assert(e >= 0 && e < L->src.n_expert && !isnan(margin));
    if (isnan(L->pend[e]) || margin > L->pend[e])
        L->pend[e] = margin;
    if (L->where[e] >= 0)
        return pt_ecache_request(c, il, e, PT_EC_PREFETCH, err);
    const double p = pf_chance(L, margin) * cold_factor(c);
    if (p < c->pf_min)
        return PT_EC_SKIPPED;
    const bool room = c->slot_mode ? L->n_lru < L->quota : c->lru_bytes + L->slot_bytes <= c->budget;
    if (!room && c->next_aware && c->pf_victim > 0) {
        const int si = lru_slot(c, L);
        if (si >= 0 && p < c->pf_victim * pf_victim_chance(c, L, &L->slots[si]))
            return PT_EC_SKIPPED;
    }
    return pt_ecache_request(c, il, e, PT_EC_PREFETCH, err);
}

void pt_ecache_set_prefetch_bar(pt_ecache *c, float min_chance, float victim_factor, float pred_weight)
{
    c->pf_min = min_chance;
    c->pf_victim = victim_factor;
    c->pf_pred = pred_weight;
}

float pt_ecache_prefetch_min(const pt_ecache *c)
{
    return c->pf_min;
}

void pt_ecache_set_prefetch_min(pt_ecache *c, float min_chance)
{
    assert(min_chance >= 0 && min_chance <= 1);
    c->pf_min = min_chance;
}

void pt_ecache_set_cold_bar(pt_ecache *c, double share)
{
    assert(share >= 0 && share <= 1);
    c->cold_bar = share;
}

void pt_ecache_pin(pt_ecache *c, int il, int e, const void *w[3])
{
    layer_cache *L = &c->layers[il];
    int si = L->where[e];
    assert(si >= 0 && L->slots[si].state == S_READY);
    slot *s = &L->slots[si];
    s->pins++;
    s->last_use = ++c->clock;
    for (int k = 0; k < 3; k++)
        w[k] = s->mem + part_off(L, k) + pt_io_head(slice_off(L, e, k));
}

void pt_ecache_release(pt_ecache *c, int il, int e)
{
    layer_cache *L = &c->layers[il];
    int si = L->where[e];
    assert(si >= 0 && L->slots[si].pins > 0);
    L->slots[si].pins--;
    L->released = true;
}

bool pt_ecache_is_ready(const pt_ecache *c, int il, int e)
{
    const layer_cache *L = &c->layers[il];
    return L->where[e] >= 0 && L->slots[L->where[e]].state == S_READY;
}

bool pt_ecache_is_loading(const pt_ecache *c, int il, int e)
{
    const layer_cache *L = &c->layers[il];
    return L->where[e] >= 0 && L->slots[L->where[e]].state == S_LOADING;
}

static int next_done(pt_ecache *c, bool block, int *il, int *e, pt_err *err)
{
    for (;;) {
        uint64_t tag = 0;
        pt_err rerr = {{0}};
        int rc = block ? pt_reader_wait(c->rd, &tag, &rerr) : pt_reader_poll(c->rd, &tag, &rerr);
        if (rc == 0)
            return 0;
        const int l = (int)(tag >> 40), x = (int)((tag >> 8) & 0xffffffff), k = (int)(tag & 0xff);
        layer_cache *L = &c->layers[l];
        int si = L->where[x];
        assert(si >= 0 && L->slots[si].state == S_LOADING);
        slot *s = &L->slots[si];
        if (rc < 0 && !s->failed) {
            s->failed = 1;
            pt_err m;
            pt_errf(&m, "layer %d expert %d (%s slice): %s", l, x, k == 0 ? "gate" : k == 1 ? "up" : "down",
                    rerr.msg);
            s->errmsg = strdup(m.msg);
        }
        if (--s->reads_left > 0)
            continue;
        c->inflight--;
        *il = l;
        *e = x;
        if (s->failed) {
            pt_errf(err, "%s", s->errmsg ? s->errmsg : "read failed");
            free(s->errmsg);
            s->errmsg = NULL;
            evict(L, si);
            return -1;
        }
        s->state = S_READY;
        return 1;
    }
}

int pt_ecache_wait(pt_ecache *c, int *il, int *e, pt_err *err) { return next_done(c, true, il, e, err); }
int pt_ecache_poll(pt_ecache *c, int *il, int *e, pt_err *err) { return next_done(c, false, il, e, err); }

int pt_ecache_acquire(pt_ecache *c, int il, int e, const void *w[3], pt_err *err)
{
    int rc = pt_ecache_request(c, il, e, PT_EC_DEMAND, err);
    while (rc != PT_EC_READY) {
        if (rc < 0)
            return -1;
        int wl, we;
        double t0 = pt_now();
        int wr = pt_ecache_wait(c, &wl, &we, err);
        c->layers[il].st.t_wait_s += pt_now() - t0;
        if (wr < 0 && wl == il && we == e)
            return -1;
        if (wr == 0 && rc == PT_EC_NOROOM)
            return pt_errf(err, "expert cache: layer %d: no free slot for expert %d (all %d in use)", il, e,
                           c->layers[il].n_slots);
        rc = pt_ecache_request(c, il, e, PT_EC_RETRY, err);
    }
    pt_ecache_pin(c, il, e, w);
    return 0;
}

void pt_ecache_get_stats(const pt_ecache *c, pt_ecache_stats *s)
{
    memset(s, 0, sizeof *s);
    for (int il = 0; il < c->n_layers; il++) {
        const pt_ecache_layer_stats *l = &c->layers[il].st;
        s->hits += l->hits_lru + l->hits_hot + l->hits_prefetch;
        s->misses += l->misses;
        s->bytes_read += l->bytes_read;
        s->t_read_s += l->t_wait_s;
    }
}

void pt_ecache_reset_stats(pt_ecache *c)
{
    for (int il = 0; il < c->n_layers; il++)
        memset(&c->layers[il].st, 0, sizeof c->layers[il].st);
}

pt_ecache_layer_stats *pt_ecache_lstats(pt_ecache *c, int il) { return &c->layers[il].st; }
uint64_t pt_ecache_bytes(const pt_ecache *c) { return c->lru_bytes + c->hot_bytes; }
uint64_t pt_ecache_hot_bytes(const pt_ecache *c) { return c->hot_bytes; }
uint64_t pt_ecache_heap_bytes(const pt_ecache *c) { return c->heap_bytes; }
int pt_ecache_slots(const pt_ecache *c, int il) { return c->layers[il].quota; }
uint64_t pt_ecache_slot_bytes(const pt_ecache *c, int il) { return c->layers[il].slot_bytes; }

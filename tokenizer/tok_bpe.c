// tokenizer/tok_bpe.c — the BPE merge loop over one pre-token, with a cache
// of recent pre-tokens.
//
// Symbols start as single bytes (byte-level tokenizers) or single UTF-8
// characters; the adjacent pair with the lowest merge rank is merged
// (leftmost first on ties, as Hugging Face's priority queue does) until no
// pair has a rank. Short words use a linear scan over cached pair ranks,
// long ones a binary heap with lazy invalidation.
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_KEY 255
#define SMALL_WORD 48

typedef struct sym {
    int32_t id;            // current token id
    int32_t prev, next;    // neighbours in the live list, -1 at the ends
    int32_t rank;          // rank of the pair (this, next); INT32_MAX if none
    int32_t out;           // id the pair (this, next) merges into
} sym;

static void pair_rank(const pt_tokenizer *t, sym *s, int32_t i)
{
    int32_t j = s[i].next;
    if (j < 0 || !tok_pairmap_get(&t->merges, s[i].id, s[j].id, &s[i].rank, &s[i].out))
        s[i].rank = INT32_MAX;
}

// Merges s[i] with its successor; returns nothing, updates neighbours.
static void merge_at(sym *s, int32_t i)
{
    int32_t j = s[i].next;
    s[i].id = s[i].out;
    s[i].next = s[j].next;
    if (s[j].next >= 0)
        s[s[j].next].prev = i;
    s[j].id = -1; // dead
}

static void bpe_small(const pt_tokenizer *t, sym *s, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        pair_rank(t, s, i);
    for (;;) {
        int32_t best = -1, br = INT32_MAX;
        for (int32_t i = 0; i >= 0; i = s[i].next)
            if (s[i].rank < br) {
                br = s[i].rank;
                best = i;
            }
        if (best < 0)
            return;
        merge_at(s, best);
        pair_rank(t, s, best);
        if (s[best].prev >= 0)
            pair_rank(t, s, s[best].prev);
    }
}

// Heap of (rank, pos) packed into one u64: rank high, pos low (min-heap).
typedef struct heap {
    uint64_t *v;
    size_t n;
} heap;

static void heap_push(heap *h, uint64_t x)
{
    size_t i = h->n++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h->v[p] <= x)
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
}

static uint64_t heap_pop(heap *h)
{
    uint64_t top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1] < h->v[c])
            c++;
        if (h->v[c] >= x)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = x;
    return top;
}

static void bpe_large(const pt_tokenizer *t, sym *s, int32_t n)
{
    heap h = {malloc((size_t)n * 3 * sizeof(uint64_t)), 0};
    size_t hcap = (size_t)n * 3;
    assert(h.v);
    for (int32_t i = 0; i < n; i++) {
        pair_rank(t, s, i);
        if (s[i].rank != INT32_MAX)
            heap_push(&h, (uint64_t)s[i].rank << 32 | (uint32_t)i);
    }
    while (h.n) {
        uint64_t e = heap_pop(&h);
        int32_t i = (int32_t)(uint32_t)e, r = (int32_t)(e >> 32);
        if (s[i].id < 0 || s[i].rank != r || s[i].next < 0)
            continue; // stale entry
        merge_at(s, i);
        int32_t p = s[i].prev;
        if (h.n + 2 > hcap) {
            hcap *= 2;
            h.v = realloc(h.v, hcap * sizeof(uint64_t));
            assert(h.v);
        }
        pair_rank(t, s, i);
        if (s[i].rank != INT32_MAX)
            heap_push(&h, (uint64_t)s[i].rank << 32 | (uint32_t)i);
        if (p >= 0) {
            pair_rank(t, s, p);
            if (s[p].rank != INT32_MAX)
                heap_push(&h, (uint64_t)s[p].rank << 32 | (uint32_t)p);
        }
    }
    free(h.v);
}

// Initial symbols of a word; returns their count (may include unk handling).
static int32_t init_symbols(const pt_tokenizer *t, const char *w, size_t len, sym *s)
{
    int32_t n = 0;
    const uint8_t *u = (const uint8_t *)w;
    if (t->byte_level) {
        for (size_t i = 0; i < len; i++) {
            int32_t id = t->byte_id[u[i]];
            if (id < 0)
                id = t->unk_id;
            if (id < 0)
                continue;
            s[n++].id = id;
        }
    } else {
        size_t i = 0;
        bool last_unk = false;
        while (i < len) {
            uint32_t cp;
            int l = tok_utf8_dec(u + i, len - i, &cp);
            if (l <= 0)
                l = 1;
            int32_t id = tok_strmap_get(&t->strs, w + i, (uint32_t)l);
            if (id >= 0) {
                s[n++].id = id;
                last_unk = false;
            } else if (t->byte_fallback && t->fb_id[u[i]] >= 0) {
                for (int k = 0; k < l; k++)
                    if (t->fb_id[u[i + k]] >= 0)
                        s[n++].id = t->fb_id[u[i + k]];
                last_unk = false;
            } else if (t->unk_id >= 0) {
                if (!(t->fuse_unk && last_unk))
                    s[n++].id = t->unk_id;
                last_unk = true;
            }
            i += (size_t)l;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        s[i].prev = i - 1;
        s[i].next = i + 1 < n ? i + 1 : -1;
    }
    return n;
}

static bool cache_get(tok_cache *c, const char *w, size_t len, uint64_t h, tok_ids *out)
{
    uint32_t mask = c->cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (!c->hash[i])
            return false;
        if (c->hash[i] == h && c->klen[i] == len && !memcmp(c->kbuf + c->koff[i], w, len)) {
            for (uint32_t k = 0; k < c->ni[i]; k++)
                tok_ids_push(out, c->ibuf[c->ioff[i] + k]);
            return true;
        }
    }
}

static void cache_put(tok_cache *c, const char *w, size_t len, uint64_t h, const int32_t *ids, size_t n)
{
    if (c->n * 2 >= c->cap || c->kused + len > c->kcap || c->iused + n > c->icap) {
        memset(c->hash, 0, c->cap * sizeof *c->hash); // full: start over
        c->n = 0;
        c->kused = c->iused = 0;
        if (len > c->kcap || n > c->icap)
            return;
    }
    uint32_t mask = c->cap - 1, i = (uint32_t)h & mask;
    while (c->hash[i])
        i = (i + 1) & mask;
    c->hash[i] = h;
    c->koff[i] = (uint32_t)c->kused;
    c->klen[i] = (uint16_t)len;
    c->ioff[i] = (uint32_t)c->iused;
    c->ni[i] = (uint16_t)n;
    memcpy(c->kbuf + c->kused, w, len);
    memcpy(c->ibuf + c->iused, ids, n * sizeof *ids);
    c->kused += len;
    c->iused += n;
    c->n++;
}

tok_cache *tok_cache_new(void)
{
    tok_cache *c = calloc(1, sizeof *c);
    assert(c);
    pthread_mutex_init(&c->mu, NULL);
    c->cap = CACHE_SLOTS;
    c->hash = calloc(c->cap, sizeof *c->hash);
    c->koff = malloc(c->cap * sizeof *c->koff);
    c->ioff = malloc(c->cap * sizeof *c->ioff);
    c->klen = malloc(c->cap * sizeof *c->klen);
    c->ni = malloc(c->cap * sizeof *c->ni);
    c->kcap = 4u << 20;
    c->icap = 1u << 20;
    c->kbuf = malloc(c->kcap);
    c->ibuf = malloc(c->icap * sizeof *c->ibuf);
    assert(c->hash && c->koff && c->ioff && c->klen && c->ni && c->kbuf && c->ibuf);
    return c;
}

void tok_cache_free(tok_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->hash);
    free(c->koff);
    free(c->ioff);
    free(c->klen);
    free(c->ni);
    free(c->kbuf);
    free(c->ibuf);
    free(c);
}

// Encodes one pre-token and appends its ids to out. Uses the cache for
// words up to CACHE_MAX_KEY bytes when it is not busy in another thread.
void tok_bpe_word(const pt_tokenizer *t, const char *w, size_t len, tok_ids *out)
{
    if (!len)
        return;
    if (t->ignore_merges) {
        int32_t id = t->byte_level ? tok_strmap_get(&t->raw, w, (uint32_t)len)
                                   : tok_strmap_get(&t->strs, w, (uint32_t)len);
        if (id >= 0 && !(t->attr[id] & TOK_ATTR_ADDED)) {
            tok_ids_push(out, id);
            return;
        }
    }
    if (len == 1 && t->byte_level) {
        int32_t id = t->byte_id[(uint8_t)w[0]];
        if (id < 0)
            id = t->unk_id;
        if (id >= 0)
            tok_ids_push(out, id);
        return;
    }
    tok_cache *c = t->cache;
    uint64_t h = 0;
    bool use_cache = c && len <= CACHE_MAX_KEY;
    if (use_cache) {
        h = tok_hash(w, len) | 1;
        if (pthread_mutex_trylock(&c->mu))
            use_cache = false;
        else {
            bool hit = cache_get(c, w, len, h, out);
            pthread_mutex_unlock(&c->mu);
            if (hit)
                return;
        }
    }
    sym stack_syms[64];
    sym *s = len <= 64 ? stack_syms : malloc(len * sizeof *s);
    assert(s);
    int32_t n = init_symbols(t, w, len, s);
    if (n > 1) {
        if (n <= SMALL_WORD)
            bpe_small(t, s, n);
        else
            bpe_large(t, s, n);
    }
    size_t first = out->n;
    for (int32_t i = 0; n > 0 && i >= 0; i = s[i].next)
        tok_ids_push(out, s[i].id);
    // A word without ids (none of its bytes in the vocabulary) is not kept:
    // out->v may still be NULL then.
    if (use_cache && out->n > first && !pthread_mutex_trylock(&c->mu)) {
        cache_put(c, w, len, h, out->v + first, out->n - first);
        pthread_mutex_unlock(&c->mu);
    }
    if (s != stack_syms)
        free(s);
}

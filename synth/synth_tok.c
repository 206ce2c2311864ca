// synth/synth_tok.c — the byte-level BPE tokenizer of synthetic models.
//
// Ids: 0 <｜begin▁of▁sentence｜>, 1 <｜end▁of▁sentence｜>, 2 <｜▁pad▁｜> (as in
// DeepSeek-V3: in the BPE vocab and in added_tokens), 3..258 the 256 bytes
// in GPT-2 byte-to-unicode order, then one token per merge, then the 15
// DeepSeek-V3 chat/tool/FIM added tokens at the top (<｜User｜>,
// <｜Assistant｜>, ...). Total = vocab_size exactly.
//
// Merges come from BPE training (most frequent adjacent pair first, ties to
// the smaller pair of ids) on the built-in text (synth_corpus.c), split by
// DeepSeek-V3's own pre-tokenizer regexes, each piece weighted x1000, plus a
// deterministic pseudo-text: 80,000 distinct pseudo-words from an order-2
// letter model of that text (Zipf-weighted) and the numbers 0..999, so that
// even 32k-vocab tokenizers have real merges. A merge whose result string
// already is a token is skipped (never listed), so merge i makes id 259 + i.
// The training data does not depend on vocab_size: a smaller tokenizer's
// merges are a prefix of a larger one's.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <assert.h>
#include <json-c/json.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/util.h"
#include "synth/synth_int.h"

#define N_HEAD_SPECIAL 3
#define FIRST_MERGE_ID (N_HEAD_SPECIAL + 256)
#define REAL_WEIGHT 1000
#define N_PSEUDO_WORDS 80000

static const char *const HEAD_SPECIAL[N_HEAD_SPECIAL] = {
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"};

// Tail added tokens: content, special (as in DeepSeek-V3's tokenizer.json).
static const struct { const char *s; int special; } TAIL[] = {
    {"<｜fim▁hole｜>", 0},          {"<｜fim▁begin｜>", 0},          {"<｜fim▁end｜>", 0},
    {"<｜User｜>", 0},              {"<｜Assistant｜>", 0},          {"<|EOT|>", 1},
    {"<｜tool▁calls▁begin｜>", 0},  {"<｜tool▁calls▁end｜>", 0},     {"<｜tool▁call▁begin｜>", 0},
    {"<｜tool▁call▁end｜>", 0},     {"<｜tool▁outputs▁begin｜>", 0}, {"<｜tool▁outputs▁end｜>", 0},
    {"<｜tool▁output▁begin｜>", 0}, {"<｜tool▁output▁end｜>", 0},    {"<｜tool▁sep｜>", 0},
};
#define N_TAIL ((uint32_t)(sizeof TAIL / sizeof TAIL[0]))

// ---- small containers ---------------------------------------------------------

typedef struct arena {
    uint8_t *p;
    size_t len, cap;
} arena;

static int64_t arena_put(arena *a, const void *src, size_t n)
{
    if (a->len + n > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1 << 16;
        while (cap < a->len + n)
            cap *= 2;
        uint8_t *p = realloc(a->p, cap);
        if (!p)
            return -1;
        a->p = p;
        a->cap = cap;
    }
    memcpy(a->p + a->len, src, n);
    a->len += n;
    return (int64_t)(a->len - n);
}

// String -> index map over arena-held keys (open addressing).
typedef struct smap {
    arena *ar;
    uint32_t mask;
    int32_t *slot;      // (mask + 1,) entry index or -1
    uint64_t *off;      // (cap,) key offsets in ar
    uint32_t *len;      // (cap,) key lengths
    uint32_t n, cap;
} smap;

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return synth_mix(h);
}

static int smap_init(smap *m, arena *ar, uint32_t cap_pow2)
{
    memset(m, 0, sizeof *m);
    m->ar = ar;
    m->mask = cap_pow2 - 1;
    m->slot = malloc(cap_pow2 * sizeof *m->slot);
    if (!m->slot)
        return -1;
    memset(m->slot, 0xFF, cap_pow2 * sizeof *m->slot);
    return 0;
}

static void smap_free(smap *m)
{
    free(m->slot);
    free(m->off);
    free(m->len);
}

static int smap_grow(smap *m)
{
    uint32_t cap = (m->mask + 1) * 2;
    int32_t *slot = malloc(cap * sizeof *slot);
    if (!slot)
        return -1;
    memset(slot, 0xFF, cap * sizeof *slot);
    for (uint32_t i = 0; i < m->n; i++) {
        uint64_t h = hash_bytes(m->ar->p + m->off[i], m->len[i]);
        uint32_t s = (uint32_t)h & (cap - 1);
        while (slot[s] >= 0)
            s = (s + 1) & (cap - 1);
        slot[s] = (int32_t)i;
    }
    free(m->slot);
    m->slot = slot;
    m->mask = cap - 1;
    return 0;
}

// Finds key; when absent and add is set, inserts a copy. Returns the entry
// index, -1 when absent (add == 0), -2 on out of memory. *added tells.
static int32_t smap_get(smap *m, const uint8_t *key, uint32_t n, int add, int *added)
{
    if (added)
        *added = 0;
    uint64_t h = hash_bytes(key, n);
    uint32_t s = (uint32_t)h & m->mask;
    while (m->slot[s] >= 0) {
        int32_t e = m->slot[s];
        if (m->len[e] == n && memcmp(m->ar->p + m->off[e], key, n) == 0)
            return e;
        s = (s + 1) & m->mask;
    }
    if (!add)
        return -1;
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 4096;
        uint64_t *off = realloc(m->off, cap * sizeof *off);
        if (!off)
            return -2;
        m->off = off;
        uint32_t *len = realloc(m->len, cap * sizeof *len);
        if (!len)
            return -2;
        m->len = len;
        m->cap = cap;
    }
    int64_t o = arena_put(m->ar, key, n);
    if (o < 0)
        return -2;
    m->off[m->n] = (uint64_t)o;
    m->len[m->n] = n;
    m->slot[s] = (int32_t)m->n;
    m->n++;
    if (added)
        *added = 1;
    if (m->n * 2 > m->mask + 1 && smap_grow(m) < 0)
        return -2;
    return (int32_t)(m->n - 1);
}

// ---- GPT-2 byte <-> unicode -----------------------------------------------------

static int byte_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

// order[k] = the byte whose token id is 3 + k; cp[b] = its code point.
static void byte_tables(uint8_t order[256], uint32_t cp[256])
{
    int k = 0, extra = 0;
    for (int b = 0; b < 256; b++)
        if (byte_printable(b)) {
            order[k++] = (uint8_t)b;
            cp[b] = (uint32_t)b;
        }
    for (int b = 0; b < 256; b++)
        if (!byte_printable(b)) {
            order[k++] = (uint8_t)b;
            cp[b] = 256u + (uint32_t)extra++;
        }
}

static void put_utf8(FILE *f, uint32_t c)
{
    if (c < 0x80)
        fputc((int)c, f);
    else if (c < 0x800) {
        fputc((int)(0xC0 | (c >> 6)), f);
        fputc((int)(0x80 | (c & 0x3F)), f);
    } else {
        fputc((int)(0xE0 | (c >> 12)), f);
        fputc((int)(0x80 | ((c >> 6) & 0x3F)), f);
        fputc((int)(0x80 | (c & 0x3F)), f);
    }
}

// A token's raw bytes as a JSON string in byte-level unicode.
static void put_bytelevel(FILE *f, const uint8_t *p, size_t n, const uint32_t cp[256])
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[p[i]];
        if (c == '"' || c == '\\')
            fputc('\\', f);
        put_utf8(f, c);
    }
    fputc('"', f);
}

// ---- pre-tokenization with DeepSeek-V3's regexes ---------------------------------

typedef struct span {
    uint32_t off, len;
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
} spans;

static int spans_push(spans *s, uint32_t off, uint32_t len)
{
    if (len == 0)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        span *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (span){off, len};
    return 0;
}

// Splits every span of `in` by the regex, keeping matches and gaps
// ("Isolated" behaviour), into `out`.
static int split_isolated(const char *text, const spans *in, pcre2_code *re, spans *out)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return -1;
    for (size_t i = 0; i < in->n; i++) {
        const PCRE2_SPTR subj = (PCRE2_SPTR)(text + in->v[i].off);
        const size_t n = in->v[i].len;
        size_t pos = 0, start = 0;
        while (start <= n) {
            int rc = pcre2_match(re, subj, n, start, 0, md, NULL);
            if (rc < 0)
                break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t s = ov[0], e = ov[1];
            if (spans_push(out, in->v[i].off + (uint32_t)pos, (uint32_t)(s - pos)) ||
                spans_push(out, in->v[i].off + (uint32_t)s, (uint32_t)(e - s))) {
                pcre2_match_data_free(md);
                return -1;
            }
            pos = e;
            start = e > s ? e : e + 1;
        }
        if (pos < n && spans_push(out, in->v[i].off + (uint32_t)pos, (uint32_t)(n - pos))) {
            pcre2_match_data_free(md);
            return -1;
        }
    }
    pcre2_match_data_free(md);
    return 0;
}

// Pre-tokenizes text with the Split regexes of synth_pretokenizer_json.
static int pretokenize(const char *text, spans *out, pt_err *err)
{
    json_object *root = json_tokener_parse(synth_pretokenizer_json), *list = NULL;
    if (!root || !json_object_object_get_ex(root, "pretokenizers", &list))
        return pt_errf(err, "synth: built-in pre_tokenizer JSON is malformed");
    spans cur = {0}, nxt = {0};
    int rc = spans_push(&cur, 0, (uint32_t)strlen(text));
    for (size_t k = 0; k < json_object_array_length(list) && !rc; k++) {
        json_object *pt = json_object_array_get_idx(list, k), *pat, *re;
        if (!json_object_object_get_ex(pt, "pattern", &pat) || !json_object_object_get_ex(pat, "Regex", &re))
            continue; // the ByteLevel step
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)json_object_get_string(re), PCRE2_ZERO_TERMINATED,
                                         PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
        if (!code) {
            rc = pt_errf(err, "synth: pre_tokenizer regex %zu does not compile (at %zu)", k, (size_t)eo);
            break;
        }
        nxt.n = 0;
        if (split_isolated(text, &cur, code, &nxt) < 0)
            rc = pt_errf(err, "synth: out of memory pre-tokenizing");
        pcre2_code_free(code);
        spans t = cur;
        cur = nxt;
        nxt = t;
    }
    json_object_put(root);
    free(nxt.v);
    if (rc) {
        free(cur.v);
        return -1;
    }
    *out = cur;
    return 0;
}

// ---- training data ------------------------------------------------------------

typedef struct word {
    int32_t *sym;       // (len,) token ids
    uint32_t len;
    int64_t count;      // weight
    int32_t last;       // last merge that touched it
} word;

typedef struct corpus {
    arena ar;
    smap map;           // piece bytes -> word index
    word *w;            // (n,)
    uint32_t n, cap;
} corpus;

static int corpus_add(corpus *c, const uint8_t *p, uint32_t n, int64_t count, int unique_only)
{
    int added;
    int32_t e = smap_get(&c->map, p, n, 1, &added);
    if (e == -2)
        return -1;
    if (!added) {
        if (!unique_only)
            c->w[e].count += count;
        return 0;
    }
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 4096;
        word *w = realloc(c->w, cap * sizeof *w);
        if (!w)
            return -1;
        c->w = w;
        c->cap = cap;
    }
    assert((uint32_t)e == c->n);
    c->w[c->n++] = (word){NULL, n, count, -1};
    return 1;
}

// Deterministic PRNG for the pseudo-text.
static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    return synth_mix(*s);
}

#define MK_A 28 // alphabet: 0 = start, 1..26 = a..z, 27 = end

// Order-2 letter model of the lowercase ASCII words of the built-in text.
static void train_letters(const char *text, const spans *sp, uint32_t (*cnt)[MK_A][MK_A])
{
    for (size_t i = 0; i < sp->n; i++) {
        const char *p = text + sp->v[i].off;
        uint32_t n = sp->v[i].len, k = 0;
        if (n && p[0] == ' ')
            k = 1;
        int ok = n - k >= 2;
        for (uint32_t j = k; j < n && ok; j++)
            ok = (p[j] >= 'a' && p[j] <= 'z') || (p[j] >= 'A' && p[j] <= 'Z');
        if (!ok)
            continue;
        int a = 0, b = 0;
        for (uint32_t j = k; j <= n; j++) {
            int c = j == n ? 27 : ((p[j] | 0x20) - 'a' + 1);
            cnt[a][b][c]++;
            a = b;
            b = c;
        }
    }
}

// One pseudo-word (NUL-terminated in buf, >= 2 letters), or 0 letters.
static size_t pseudo_word(uint64_t *rs, const uint32_t (*cnt)[MK_A][MK_A], char *buf, size_t cap)
{
    size_t n = 0;
    uint64_t r = rng_next(rs);
    if (r % 100 < 85)
        buf[n++] = ' ';
    int cap_first = (r >> 8) % 100 < 15;
    size_t k0 = n;
    int a = 0, b = 0;
    while (n + 2 < cap) {
        uint32_t tot = 0;
        for (int c = 1; c < MK_A; c++)
            tot += cnt[a][b][c];
        if (tot == 0)
            break;
        uint32_t x = (uint32_t)(rng_next(rs) % tot);
        int c = 1;
        for (; c < MK_A - 1 && x >= cnt[a][b][c]; c++)
            x -= cnt[a][b][c];
        if (c == 27)
            break;
        buf[n++] = (char)('a' + c - 1);
        a = b;
        b = c;
        if (n - k0 >= 14)
            break;
    }
    buf[n] = 0;
    if (n - k0 < 2)
        return 0;
    if (cap_first)
        buf[k0] = (char)(buf[k0] - 32);
    return n;
}

static int build_corpus(corpus *c, pt_err *err)
{
    memset(c, 0, sizeof *c);
    if (smap_init(&c->map, &c->ar, 1 << 17) < 0)
        return pt_errf(err, "synth: out of memory (tokenizer corpus)");
    spans sp = {0};
    if (pretokenize(synth_corpus_text, &sp, err) < 0)
        return -1;
    for (size_t i = 0; i < sp.n; i++)
        if (corpus_add(c, (const uint8_t *)synth_corpus_text + sp.v[i].off, sp.v[i].len, REAL_WEIGHT, 0) < 0)
            goto oom;
    // numbers 0..999 (the pre-tokenizer isolates runs of up to 3 digits)
    for (int v = 0; v < 1000; v++) {
        char b[8];
        int n = snprintf(b, sizeof b, "%d", v);
        if (corpus_add(c, (const uint8_t *)b, (uint32_t)n, 1 + 3000 / (v + 1), 0) < 0)
            goto oom;
    }
    static uint32_t cnt[MK_A][MK_A][MK_A];
    memset(cnt, 0, sizeof cnt);
    train_letters(synth_corpus_text, &sp, cnt);
    free(sp.v);
    uint64_t rs = 0x5EED5EED1234ull;
    char buf[32];
    uint32_t made = 0;
    for (uint32_t tries = 0; made < N_PSEUDO_WORDS && tries < 40u * N_PSEUDO_WORDS; tries++) {
        size_t n = pseudo_word(&rs, (const uint32_t(*)[MK_A][MK_A])cnt, buf, sizeof buf);
        if (!n)
            continue;
        // Zipf-like weights: early words are frequent.
        int64_t w = 1 + (int64_t)(2000.0 / (1.0 + made * 0.05));
        int rc = corpus_add(c, (const uint8_t *)buf, (uint32_t)n, w, 1);
        if (rc < 0)
            goto oom;
        made += (uint32_t)rc;
    }
    return 0;
oom:
    free(sp.v);
    return pt_errf(err, "synth: out of memory (tokenizer corpus)");
}

static void corpus_free(corpus *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        free(c->w[i].sym);
    free(c->w);
    smap_free(&c->map);
    free(c->ar.p);
}

// ---- BPE training -------------------------------------------------------------

typedef struct pair {
    int32_t a, b;       // token ids
    int64_t count;      // weighted occurrences
    int32_t *words;     // (nw,) words containing it (may repeat, may be stale)
    uint32_t nw, capw;
    uint8_t banned;     // merge result already a token
    uint8_t dirty;      // count changed since last heap push
} pair;

typedef struct hentry {
    int64_t count;
    int32_t a, b;
    int32_t pair;
} hentry;

typedef struct trainer {
    pair *p;            // (np,)
    uint32_t np, capp;
    uint32_t pmask;
    int32_t *pslot;     // (pmask + 1,) pair index or -1
    hentry *h;          // heap
    size_t nh, caph;
    int32_t *dirty;     // (ndirty,)
    size_t ndirty, capd;
} trainer;

static int hbetter(const hentry *x, const hentry *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    if (x->a != y->a)
        return x->a < y->a;
    return x->b < y->b;
}

static int heap_push(trainer *t, int32_t pi)
{
    if (t->nh == t->caph) {
        size_t cap = t->caph ? t->caph * 2 : 1 << 16;
        hentry *h = realloc(t->h, cap * sizeof *h);
        if (!h)
            return -1;
        t->h = h;
        t->caph = cap;
    }
    hentry e = {t->p[pi].count, t->p[pi].a, t->p[pi].b, pi};
    size_t i = t->nh++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!hbetter(&e, &t->h[up]))
            break;
        t->h[i] = t->h[up];
        i = up;
    }
    t->h[i] = e;
    return 0;
}

static hentry heap_pop(trainer *t)
{
    hentry top = t->h[0], last = t->h[--t->nh];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const hentry *best = &last;
        if (l < t->nh && hbetter(&t->h[l], best)) {
            m = l;
            best = &t->h[l];
        }
        if (r < t->nh && hbetter(&t->h[r], best))
            m = r;
        if (m == i)
            break;
        t->h[i] = t->h[m];
        i = m;
    }
    if (t->nh)
        t->h[i] = last;
    return top;
}

static int32_t pair_get(trainer *t, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t s = (uint32_t)synth_mix(key) & t->pmask;
    while (t->pslot[s] >= 0) {
        int32_t i = t->pslot[s];
        if (t->p[i].a == a && t->p[i].b == b)
            return i;
        s = (s + 1) & t->pmask;
    }
    if (t->np == t->capp) {
        uint32_t cap = t->capp ? t->capp * 2 : 1 << 16;
        pair *p = realloc(t->p, cap * sizeof *p);
        if (!p)
            return -1;
        t->p = p;
        t->capp = cap;
    }
    t->p[t->np] = (pair){a, b, 0, NULL, 0, 0, 0, 0};
    t->pslot[s] = (int32_t)t->np;
    t->np++;
    if (t->np * 2 > t->pmask + 1) { // grow the table
        uint32_t cap = (t->pmask + 1) * 2;
        int32_t *slot = malloc(cap * sizeof *slot);
        if (!slot)
            return -1;
        memset(slot, 0xFF, cap * sizeof *slot);
        for (uint32_t i = 0; i < t->np; i++) {
            uint64_t k = ((uint64_t)(uint32_t)t->p[i].a << 32) | (uint32_t)t->p[i].b;
            uint32_t q = (uint32_t)synth_mix(k) & (cap - 1);
            while (slot[q] >= 0)
                q = (q + 1) & (cap - 1);
            slot[q] = (int32_t)i;
        }
        free(t->pslot);
        t->pslot = slot;
        t->pmask = cap - 1;
    }
    return (int32_t)(t->np - 1);
}

// Adds delta to pair (a, b); when w >= 0 records word w as containing it.
static int pair_add(trainer *t, int32_t a, int32_t b, int64_t delta, int32_t w)
{
    int32_t i = pair_get(t, a, b);
    if (i < 0)
        return -1;
    pair *p = &t->p[i];
    p->count += delta;
    if (w >= 0 && (p->nw == 0 || p->words[p->nw - 1] != w)) {
        if (p->nw == p->capw) {
            uint32_t cap = p->capw ? p->capw * 2 : 4;
            int32_t *v = realloc(p->words, cap * sizeof *v);
            if (!v)
                return -1;
            p->words = v;
            p->capw = cap;
        }
        p->words[p->nw++] = w;
    }
    if (!p->dirty) {
        p->dirty = 1;
        if (t->ndirty == t->capd) {
            size_t cap = t->capd ? t->capd * 2 : 4096;
            int32_t *d = realloc(t->dirty, cap * sizeof *d);
            if (!d)
                return -1;
            t->dirty = d;
            t->capd = cap;
        }
        t->dirty[t->ndirty++] = i;
    }
    return 0;
}

static int flush_dirty(trainer *t)
{
    for (size_t k = 0; k < t->ndirty; k++) {
        pair *p = &t->p[t->dirty[k]];
        p->dirty = 0;
        if (p->count > 0 && !p->banned && heap_push(t, t->dirty[k]) < 0)
            return -1;
    }
    t->ndirty = 0;
    return 0;
}

static void trainer_free(trainer *t)
{
    for (uint32_t i = 0; i < t->np; i++)
        free(t->p[i].words);
    free(t->p);
    free(t->pslot);
    free(t->h);
    free(t->dirty);
}

// Tokens: raw bytes of every id (specials have none), and a string set.
typedef struct vocab {
    arena ar;
    smap set;           // raw bytes -> entry (entry i == id FIRST_MERGE_ID - 256 + i ... see tok_*)
    uint64_t *off;      // (n_ids,) offsets in ar
    uint32_t *len;      // (n_ids,)
    uint32_t n_ids;     // ids assigned so far (incl. specials and bytes)
    int32_t (*merge)[2];// (n_merges,) pairs of ids
    uint32_t n_merges;
} vocab;

static int vocab_add(vocab *v, const uint8_t *p, uint32_t n)
{
    int added;
    int32_t e = smap_get(&v->set, p, n, 1, &added);
    if (e < 0)
        return -1;
    v->off[v->n_ids] = v->set.off[e];
    v->len[v->n_ids] = n;
    v->n_ids++;
    return 0;
}

// Trains merges until v has n_model ids. 0 or -1 + err.
static int train(vocab *v, uint32_t n_model, pt_err *err)
{
    corpus c;
    if (build_corpus(&c, err) < 0) {
        corpus_free(&c);
        return -1;
    }
    uint8_t order[256];
    uint32_t cp[256];
    byte_tables(order, cp);
    int32_t id_of_byte[256];
    for (int k = 0; k < 256; k++)
        id_of_byte[order[k]] = N_HEAD_SPECIAL + k;
    trainer t = {0};
    t.pmask = (1u << 20) - 1;
    t.pslot = malloc((t.pmask + 1) * sizeof *t.pslot);
    int rc = t.pslot ? 0 : -1;
    if (t.pslot)
        memset(t.pslot, 0xFF, (t.pmask + 1) * sizeof *t.pslot);
    for (uint32_t i = 0; i < c.n && !rc; i++) {
        word *w = &c.w[i];
        const uint8_t *p = c.ar.p + c.map.off[i];
        w->sym = malloc(w->len * sizeof *w->sym);
        if (!w->sym) {
            rc = -1;
            break;
        }
        for (uint32_t j = 0; j < w->len; j++)
            w->sym[j] = id_of_byte[p[j]];
        for (uint32_t j = 0; j + 1 < w->len && !rc; j++)
            rc = pair_add(&t, w->sym[j], w->sym[j + 1], w->count, (int32_t)i);
    }
    if (!rc)
        rc = flush_dirty(&t);
    uint8_t *tmp = NULL;
    size_t tmpcap = 0;
    while (!rc && v->n_ids < n_model && t.nh > 0) {
        hentry e = heap_pop(&t);
        pair *pp = &t.p[e.pair];
        if (pp->banned || pp->count != e.count || pp->count <= 0)
            continue;
        const int32_t a = pp->a, b = pp->b;
        size_t na = v->len[a], nb = v->len[b];
        if (na + nb > tmpcap) {
            tmpcap = (na + nb) * 2;
            uint8_t *q = realloc(tmp, tmpcap);
            if (!q) {
                rc = -1;
                break;
            }
            tmp = q;
        }
        memcpy(tmp, v->ar.p + v->off[a], na);
        memcpy(tmp + na, v->ar.p + v->off[b], nb);
        if (smap_get(&v->set, tmp, (uint32_t)(na + nb), 0, NULL) >= 0) {
            pp->banned = 1; // same string as an existing token: skip the merge
            continue;
        }
        const int32_t nid = (int32_t)v->n_ids;
        const int32_t mno = (int32_t)v->n_merges;
        if (vocab_add(v, tmp, (uint32_t)(na + nb)) < 0) {
            rc = -1;
            break;
        }
        v->merge[v->n_merges][0] = a;
        v->merge[v->n_merges][1] = b;
        v->n_merges++;
        // Rewrite every word holding the pair. (pp may move: use indices.)
        const int32_t pi = e.pair;
        for (uint32_t k = 0; k < t.p[pi].nw && !rc; k++) {
            word *w = &c.w[t.p[pi].words[k]];
            const int32_t wi = t.p[pi].words[k];
            if (w->last == mno)
                continue;
            w->last = mno;
            int has = 0;
            for (uint32_t j = 0; j + 1 < w->len && !has; j++)
                has = w->sym[j] == a && w->sym[j + 1] == b;
            if (!has)
                continue;
            for (uint32_t j = 0; j + 1 < w->len && !rc; j++)
                rc = pair_add(&t, w->sym[j], w->sym[j + 1], -w->count, -1);
            uint32_t o = 0;
            for (uint32_t j = 0; j < w->len; j++) {
                if (j + 1 < w->len && w->sym[j] == a && w->sym[j + 1] == b) {
                    w->sym[o++] = nid;
                    j++;
                } else
                    w->sym[o++] = w->sym[j];
            }
            w->len = o;
            for (uint32_t j = 0; j + 1 < w->len && !rc; j++) {
                int fresh = w->sym[j] == nid || w->sym[j + 1] == nid;
                rc = pair_add(&t, w->sym[j], w->sym[j + 1], w->count, fresh ? wi : -1);
            }
        }
        if (!rc)
            rc = flush_dirty(&t);
    }
    free(tmp);
    trainer_free(&t);
    corpus_free(&c);
    if (rc)
        return pt_errf(err, "synth: out of memory training the tokenizer");
    // Fallback (not reached by the built-in presets): deterministic merges
    // of a recent token with a letter.
    for (int32_t a = FIRST_MERGE_ID; v->n_ids < n_model && a < (int32_t)v->n_ids; a++) {
        for (int l = 'a'; l <= 'z' && v->n_ids < n_model; l++) {
            int32_t b = id_of_byte[l];
            uint8_t buf[512];
            size_t na = v->len[a];
            if (na + 1 > sizeof buf)
                continue;
            memcpy(buf, v->ar.p + v->off[a], na);
            buf[na] = (uint8_t)l;
            if (smap_get(&v->set, buf, (uint32_t)na + 1, 0, NULL) >= 0)
                continue;
            if (vocab_add(v, buf, (uint32_t)na + 1) < 0)
                return pt_errf(err, "synth: out of memory training the tokenizer");
            v->merge[v->n_merges][0] = a;
            v->merge[v->n_merges][1] = b;
            v->n_merges++;
        }
    }
    if (v->n_ids < n_model)
        return pt_errf(err, "synth: cannot make %u tokenizer ids", n_model);
    return 0;
}

// ---- output -------------------------------------------------------------------

static void put_added(FILE *f, uint32_t id, const char *s, int special, int normalized, int last)
{
    fprintf(f,
            "    {\n      \"id\": %u,\n      \"content\": \"%s\",\n      \"single_word\": false,\n"
            "      \"lstrip\": false,\n      \"rstrip\": false,\n      \"normalized\": %s,\n"
            "      \"special\": %s\n    }%s\n",
            id, s, normalized ? "true" : "false", special ? "true" : "false", last ? "" : ",");
}

static int write_tokenizer_json(const char *path, const vocab *v, uint32_t vocab_size, pt_err *err)
{
    uint8_t order[256];
    uint32_t cp[256];
    byte_tables(order, cp);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return pt_errf(err, "%s: out of memory", path);
    const uint32_t tail0 = vocab_size - N_TAIL;
    fprintf(f, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [\n");
    for (uint32_t i = 0; i < N_HEAD_SPECIAL; i++)
        put_added(f, i, HEAD_SPECIAL[i], 1, 0, 0);
    for (uint32_t i = 0; i < N_TAIL; i++)
        put_added(f, tail0 + i, TAIL[i].s, TAIL[i].special, 1, i + 1 == N_TAIL);
    fprintf(f, "  ],\n  \"normalizer\": {\n    \"type\": \"Sequence\",\n    \"normalizers\": []\n  },\n");
    fprintf(f, "  \"pre_tokenizer\": %s,\n", synth_pretokenizer_json);
    fprintf(f, "  \"post_processor\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": true,\n"
               "    \"trim_offsets\": false,\n    \"use_regex\": true\n  },\n");
    fprintf(f, "  \"decoder\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": true,\n"
               "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n");
    fprintf(f, "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
               "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
               "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"vocab\": {\n");
    for (uint32_t id = 0; id < tail0; id++) {
        fputs("      ", f);
        if (id < N_HEAD_SPECIAL)
            fprintf(f, "\"%s\"", HEAD_SPECIAL[id]);
        else
            put_bytelevel(f, v->ar.p + v->off[id], v->len[id], cp);
        fprintf(f, ": %u%s\n", id, id + 1 < tail0 ? "," : "");
    }
    fprintf(f, "    },\n    \"merges\": [\n");
    for (uint32_t m = 0; m < v->n_merges; m++) {
        int32_t a = v->merge[m][0], b = v->merge[m][1];
        // "A B" in byte-level unicode (a space never occurs inside a token)
        fputs("      \"", f);
        for (int side = 0; side < 2; side++) {
            int32_t id = side ? b : a;
            for (uint32_t j = 0; j < v->len[id]; j++) {
                uint32_t c = cp[v->ar.p[v->off[id] + j]];
                if (c == '"' || c == '\\')
                    fputc('\\', f);
                put_utf8(f, c);
            }
            if (!side)
                fputc(' ', f);
        }
        fprintf(f, "\"%s\n", m + 1 < v->n_merges ? "," : "");
    }
    fprintf(f, "    ]\n  }\n}\n");
    if (fclose(f) != 0) {
        free(buf);
        return pt_errf(err, "%s: out of memory", path);
    }
    int rc = pt_write_file_atomic(path, buf, len, err);
    free(buf);
    return rc;
}

static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static int write_tokenizer_config(const char *path, uint32_t max_pos, pt_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return pt_errf(err, "%s: out of memory", path);
    const char *tok_fmt = "  \"%s\": {\n    \"__type\": \"AddedToken\",\n    \"content\": \"%s\",\n"
                          "    \"lstrip\": false,\n    \"normalized\": true,\n    \"rstrip\": false,\n"
                          "    \"single_word\": false\n  },\n";
    fprintf(f, "{\n  \"add_bos_token\": true,\n  \"add_eos_token\": false,\n");
    fprintf(f, tok_fmt, "bos_token", HEAD_SPECIAL[0]);
    fprintf(f, "  \"clean_up_tokenization_spaces\": false,\n");
    fprintf(f, tok_fmt, "eos_token", HEAD_SPECIAL[1]);
    fprintf(f, "  \"legacy\": true,\n  \"model_max_length\": %u,\n", max_pos);
    fprintf(f, tok_fmt, "pad_token", HEAD_SPECIAL[1]);
    fprintf(f, "  \"sp_model_kwargs\": {},\n  \"unk_token\": null,\n");
    fprintf(f, "  \"tokenizer_class\": \"LlamaTokenizerFast\",\n  \"chat_template\": ");
    put_json_string(f, synth_chat_template);
    fprintf(f, "\n}\n");
    if (fclose(f) != 0) {
        free(buf);
        return pt_errf(err, "%s: out of memory", path);
    }
    int rc = pt_write_file_atomic(path, buf, len, err);
    free(buf);
    return rc;
}

int synth_write_tokenizer(const char *dir, uint32_t vocab_size, uint32_t max_pos, pt_err *err)
{
    if (vocab_size < FIRST_MERGE_ID + N_TAIL)
        return pt_errf(err, "synth: vocab_size %u is below the %u ids of specials and bytes", vocab_size,
                       FIRST_MERGE_ID + N_TAIL);
    const uint32_t n_model = vocab_size - N_TAIL; // ids in the BPE vocab
    vocab v = {0};
    v.off = calloc(n_model, sizeof *v.off);
    v.len = calloc(n_model, sizeof *v.len);
    v.merge = calloc(n_model, sizeof *v.merge);
    int rc = (v.off && v.len && v.merge && smap_init(&v.set, &v.ar, 1 << 17) == 0) ? 0 : -1;
    if (rc)
        rc = pt_errf(err, "synth: out of memory (tokenizer)");
    v.n_ids = N_HEAD_SPECIAL; // specials have no bytes
    uint8_t order[256];
    uint32_t cp[256];
    byte_tables(order, cp);
    for (int k = 0; k < 256 && !rc; k++)
        if (vocab_add(&v, &order[k], 1) < 0)
            rc = pt_errf(err, "synth: out of memory (tokenizer)");
    if (!rc)
        rc = train(&v, n_model, err);
    char path[4096];
    if (!rc) {
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        rc = write_tokenizer_json(path, &v, vocab_size, err);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        rc = write_tokenizer_config(path, max_pos, err);
    }
    free(v.off);
    free(v.len);
    free(v.merge);
    if (v.set.slot)
        smap_free(&v.set);
    free(v.ar.p);
    return rc;
}

// bench/bench_trace.c — replays a routing trace (petrel_trace_open /
// --trace, bench_trace_record) against expert-cache policies at the same
// capacity and prints their hit rates side by side:
//   lru            per-layer LRU
//   lfu            per-layer LFU (use counts since the start, ties to LRU)
//   hot+lru        a hot-store pinned by heat (usage file, or the trace's own
//                  counts: an oracle) plus per-layer LRU in the rest
//   lru+prefetch   LRU that also inserts the lookahead predictions ('P'
//                  lines) before each step; a predicted expert that is then
//                  used counts as a hit, as in the engine's "prefetched" tier
//   hot+lru+prefetch  both
//   hot+lfu(+prefetch) the hot-store with least-used-first eviction (ties to
//                  LRU) in the rest
//   petrel(...)    the engine's own expert cache (cache/ecache.c) driven as
//                  engine/moe.c and engine/stream_prefetch.c drive it, with
//                  the hot-store (none unless --pin-frac) sized by
//                  cache/hotstore.c and picked by cache/usage.c from prior
//                  heat: "cold" = a first session (no usage file: session
//                  uses only), "warm" = heat from --usage / --heat-trace (an
//                  earlier session on other text) as the eviction order's
//                  prior; "+pf" with lookahead prefetch.
//                  Reads go to a small scratch file; the whole budget is
//                  the same bytes as the other policies' slots.
//   static-oracle  the most used experts of each layer over the counted
//                  uses, fixed from the start: the ceiling of frequency-based
//                  policies (it knows the future's counts, not its order)
//   belady         Belady's optimal replacement (furthest next use) per layer
//   belady-step    the same choice, but a token's experts in a layer are
//                  resident together (never evicted for each other), as
//                  the engine needs them: the bound for the engine's model
// A "use" is one routed expert of one token in one layer (lines 'A').
// Also printed: the token-to-token repeat rate (share of a token's experts
// in a layer that the previous token of the same window used there too),
// the recall of the one-layer-ahead predictions (all of them, and the
// prefetch_top best that the engine reads), and the prefetch's wasted bytes
// (read, then evicted unused) in the petrel replay.
//
// usage: bench_trace TRACE (--slots N | --bytes B | --frac F) [--hot-frac F] [--usage FILE]
//                    [--heat-trace TRACE2] [--count-from POS]
//   --count-from POS  simulate everything but count only uses at positions
//                 >= POS (e.g. the decode after a prompt that warmed the cache)
//   --slots N    expert slots per MoE layer; --bytes B: total slot bytes
//                (divided evenly over the layers in the trace); --frac F:
//                that share of each layer's routed experts
//   --hot-frac F share of the capacity pinned in hot+lru (default 0.5)
//   --heat-trace TRACE2  prior heat from another trace's uses (what the
//                usage file holds after that session)
//   --halflife H the petrel replay's half-life of expert uses in tokens
//                (default: the engine's, PT_EC_HALFLIFE; 0 = plain counts)
//   --pin-frac F the petrel replay's hot-store share of the budget, as
//                petrel_model_params.pin_bytes (default: the engine's automatic one)
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/ecache.h"
#include "cache/hotstore.h"
#include "cache/usage.h"
#include "io/reader.h"

typedef struct step {
    int layer, pos;
    char kind;          // 'A' actual, 'P' prediction
    int n;
    int32_t ids[16];
    int nq;             // 'P' steps of traces with 'Q' lines: the best experts by
    int32_t qids[16];   // selection score, best first, and those scores
    float q[16];
} step;

typedef struct trace {
    int n_blocks, n_expert, n_used;
    uint64_t slot_bytes;
    bool best_first;    // 'P' lines list each token's predictions best first
    int prefetch_top;   // predictions per token the engine read (0: unknown, all)
    bool has_q;         // 'P' steps carry their 'Q' line (the router's scores)
    step *s;            // (n,) in file order
    int n, cap;
} trace;

static int load(const char *path, trace *t)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_trace: cannot open %s\n", path);
        return -1;
    }
    unsigned long long sb;
    if (fscanf(f, "petrel-trace 1 blocks %d experts %d used %d slot_bytes %llu", &t->n_blocks, &t->n_expert,
               &t->n_used, &sb) != 4) {
        fprintf(stderr, "bench_trace: %s: not a petrel trace\n", path);
        fclose(f);
        return -1;
    }
    t->slot_bytes = sb;
    char line[1024];
    step q = {0}; // the last 'Q' line, for the 'P' line of its layer and position that follows
    q.layer = -1;
    if (fgets(line, sizeof line, f)) { // (the rest of the header line)
        t->best_first = strstr(line, "p_order best_first") != NULL;
        const char *pt = strstr(line, "prefetch_top ");
        t->prefetch_top = pt ? atoi(pt + 13) : 0;
    }
    while (fgets(line, sizeof line, f)) {
        step st = {0};
        char *p = line;
        if (line[0] == 'Q') {
            memset(&q, 0, sizeof q);
            q.layer = (int)strtol(p + 1, &p, 10);
            q.pos = (int)strtol(p, &p, 10);
            char *end;
            while (q.nq < 16) {
                long v = strtol(p, &end, 10);
                if (end == p)
                    break;
                float sc = strtof(end, &p);
                if (p == end || v < 0 || v >= t->n_expert)
                    break;
                q.qids[q.nq] = (int32_t)v;
                q.q[q.nq++] = sc;
            }
            continue;
        }
        if (line[0] != 'A' && line[0] != 'P')
            continue;
        st.kind = line[0];
        p++;
        st.layer = (int)strtol(p, &p, 10);
        st.pos = (int)strtol(p, &p, 10);
        char *end;
        for (;;) {
            long v = strtol(p, &end, 10);
            if (end == p || st.n >= 16)
                break;
            st.ids[st.n++] = (int32_t)v;
            p = end;
        }
        bool bad = st.layer < 0 || st.layer >= t->n_blocks || st.n == 0;
        for (int k = 0; k < st.n; k++)
            bad |= st.ids[k] < 0 || st.ids[k] >= t->n_expert;
        if (bad) {
            fprintf(stderr, "bench_trace: %s: entry %d: layer or expert id out of range (blocks %d, experts %d)\n",
                    path, t->n + 1, t->n_blocks, t->n_expert);
            fclose(f);
            return -1;
        }
        if (st.kind == 'P' && q.layer == st.layer && q.pos == st.pos && q.nq > st.n) {
            st.nq = q.nq;
            memcpy(st.qids, q.qids, sizeof q.qids);
            memcpy(st.q, q.q, sizeof q.q);
            t->has_q = true;
        }
        q.layer = -1;
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 1024;
            t->s = realloc(t->s, sizeof *t->s * (size_t)t->cap);
        }
        t->s[t->n++] = st;
    }
    fclose(f);
    return 0;
}

// A per-layer cache of experts with a policy-specific victim choice.
typedef struct lcache {
    int cap;
    int n;
    int32_t *ids;       // (cap,)
    uint64_t *last;     // (cap,) last use clock
    uint64_t *freq;     // (n_expert,) uses so far (LFU)
    uint8_t *pinned;    // (n_expert,) hot-store (never cached here)
    uint64_t guard;     // entries used at or after this clock are in use (not evictable)
    int guard_pos;      // position the guard window belongs to
} lcache;

// POL_BELADY_STEP: Belady's choice (the furthest next use; freq holds each
// expert's next use) under the engine's constraint that a token's experts
// are resident together: the experts of the step being served are never
// the victim. Classic Belady (run_belady) may evict an expert of the same
// token right after its use, which no engine that reads a token's experts
// before computing them can do; at a capacity of top-k slots that alone
// is worth a lot.
enum { POL_LRU, POL_LFU, POL_BELADY_STEP };

static int find(const lcache *c, int e)
{
    for (int i = 0; i < c->n; i++)
        if (c->ids[i] == e)
            return i;
    return -1;
}

// Inserts (or touches) e; like the engine, entries used in the current step
// (prefetched for it or already served) are pinned and never the victim:
// when every entry is, e is computed without being kept.
static void insert(lcache *c, int e, uint64_t clock, int pol)
{
    if (c->cap <= 0)
        return;
    int i = find(c, e);
    if (i >= 0) {
        c->last[i] = clock;
        return;
    }
    if (c->n < c->cap) {
        i = c->n++;
    } else {
        i = -1;
        for (int j = 0; j < c->n; j++) {
            if (c->last[j] >= c->guard)
                continue;
            if (i < 0) {
                i = j;
                continue;
            }
            bool better;
            if (pol == POL_BELADY_STEP)
                better = c->freq[c->ids[j]] > c->freq[c->ids[i]] ||
                         (c->freq[c->ids[j]] == c->freq[c->ids[i]] && c->last[j] < c->last[i]);
            else if (pol == POL_LFU)
                better = c->freq[c->ids[j]] < c->freq[c->ids[i]] ||
                         (c->freq[c->ids[j]] == c->freq[c->ids[i]] && c->last[j] < c->last[i]);
            else
                better = c->last[j] < c->last[i];
            if (better)
                i = j;
        }
        if (i < 0)
            return;
    }
    c->ids[i] = e;
    c->last[i] = clock;
}

typedef struct sim {
    lcache *l;          // (n_blocks,)
    uint64_t hits, uses, clock;
} sim;

static void sim_init(sim *s, const trace *t, int cap, const uint8_t *pinned)
{
    memset(s, 0, sizeof *s);
    s->l = calloc((size_t)t->n_blocks, sizeof *s->l);
    for (int b = 0; b < t->n_blocks; b++) {
        lcache *c = &s->l[b];
        int np = 0;
        c->pinned = calloc((size_t)t->n_expert, 1);
        if (pinned)
            for (int e = 0; e < t->n_expert; e++)
                np += c->pinned[e] = pinned[(size_t)b * t->n_expert + e];
        c->cap = cap;
        c->ids = calloc((size_t)cap + 1, sizeof(int32_t));
        c->last = calloc((size_t)cap + 1, sizeof(uint64_t));
        c->freq = calloc((size_t)t->n_expert, sizeof(uint64_t));
        c->guard_pos = -1;
    }
}

static void sim_free(sim *s, const trace *t)
{
    for (int b = 0; b < t->n_blocks; b++) {
        free(s->l[b].ids);
        free(s->l[b].last);
        free(s->l[b].freq);
        free(s->l[b].pinned);
    }
    free(s->l);
}

// Replays the trace; prefetch: apply 'P' lines (inserts without a use).
static int count_from;
static double halflife = PT_EC_HALFLIFE; // the petrel replay's (--halflife)
static double pin_frac = -1;             // --pin-frac: hot-store share of the budget (< 0: the engine's, none)

static double run_policy(const trace *t, int cap, const uint8_t *pinned, int pol, bool prefetch)
{
    sim s;
    sim_init(&s, t, cap, pinned);
    uint64_t *next = NULL; // (n, 16) POL_BELADY_STEP: trace index of each use's next use in its layer
    if (pol == POL_BELADY_STEP) {
        next = malloc(sizeof(uint64_t) * 16 * (size_t)t->n);
        uint64_t *seen = malloc(sizeof(uint64_t) * (size_t)t->n_blocks * (size_t)t->n_expert);
        for (size_t x = 0; x < (size_t)t->n_blocks * (size_t)t->n_expert; x++)
            seen[x] = UINT64_MAX; // never again
        for (int i = t->n - 1; i >= 0; i--)
            if (t->s[i].kind == 'A')
                for (int k = 0; k < t->s[i].n; k++) {
                    uint64_t *sx = &seen[(size_t)t->s[i].layer * t->n_expert + t->s[i].ids[k]];
                    next[(size_t)i * 16 + k] = *sx;
                    *sx = (uint64_t)i;
                }
        free(seen);
    }
    for (int i = 0; i < t->n; i++) {
        const step *st = &t->s[i];
        lcache *c = &s.l[st->layer];
        if (next && st->kind == 'A')
            for (int k = 0; k < st->n; k++)
                c->freq[st->ids[k]] = next[(size_t)i * 16 + k];
        if (st->kind == 'P' || c->guard_pos != st->pos) { // a new step of this layer
            c->guard = s.clock + 1;
            c->guard_pos = st->pos;
        }
        if (st->kind == 'P') {
            if (prefetch)
                for (int k = 0; k < st->n; k++)
                    if (!c->pinned[st->ids[k]])
                        insert(c, st->ids[k], ++s.clock, pol);
            continue;
        }
        // hits first (they are pinned for the step), then the misses
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < st->n; k++) {
                const int e = st->ids[k];
                const bool hit = c->pinned[e] || find(c, e) >= 0;
                if (hit != (pass == 0))
                    continue;
                const bool counted = st->pos >= count_from;
                s.uses += counted;
                c->freq[e] += pol != POL_BELADY_STEP;
                s.hits += counted && hit;
                if (!c->pinned[e])
                    insert(c, e, ++s.clock, pol);
            }
    }
    double r = s.uses ? (double)s.hits / (double)s.uses : 0;
    free(next);
    sim_free(&s, t);
    return r;
}

// The best fixed set in hindsight: the cap most used experts of each layer
// over the counted uses, resident from the start and never changed. The
// ceiling of any policy that keeps experts by how often they are used
// (LFU, the hot-store) when routing is independent from token to token.
static double run_static_oracle(const trace *t, int cap)
{
    uint64_t *cnt = calloc((size_t)t->n_blocks * t->n_expert, sizeof(uint64_t));
    uint8_t *in = calloc((size_t)t->n_blocks * t->n_expert, 1);
    for (int i = 0; i < t->n; i++)
        if (t->s[i].kind == 'A' && t->s[i].pos >= count_from)
            for (int k = 0; k < t->s[i].n; k++)
                cnt[(size_t)t->s[i].layer * t->n_expert + t->s[i].ids[k]]++;
    for (int b = 0; b < t->n_blocks; b++)
        for (int j = 0; j < cap && j < t->n_expert; j++) {
            int best = -1;
            for (int e = 0; e < t->n_expert; e++) {
                size_t x = (size_t)b * t->n_expert + e;
                if (!in[x] && (best < 0 || cnt[x] > cnt[(size_t)b * t->n_expert + best]))
                    best = e;
            }
            in[(size_t)b * t->n_expert + best] = 1;
        }
    uint64_t hits = 0, uses = 0;
    for (int i = 0; i < t->n; i++)
        if (t->s[i].kind == 'A' && t->s[i].pos >= count_from)
            for (int k = 0; k < t->s[i].n; k++) {
                uses++;
                hits += in[(size_t)t->s[i].layer * t->n_expert + t->s[i].ids[k]];
            }
    free(cnt);
    free(in);
    return uses ? (double)hits / (double)uses : 0;
}

// Belady's optimal policy per layer over the sequence of uses.
static double run_belady(const trace *t, int cap)
{
    uint64_t hits = 0, uses = 0;
    for (int b = 0; b < t->n_blocks; b++) {
        int n = 0;
        for (int i = 0; i < t->n; i++)
            if (t->s[i].kind == 'A' && t->s[i].layer == b)
                n += t->s[i].n;
        if (n == 0)
            continue;
        int32_t *seq = malloc(sizeof(int32_t) * (size_t)n);
        uint8_t *cnt = malloc((size_t)n);
        int *next = malloc(sizeof(int) * (size_t)n);
        int k = 0;
        for (int i = 0; i < t->n; i++)
            if (t->s[i].kind == 'A' && t->s[i].layer == b)
                for (int j = 0; j < t->s[i].n; j++) {
                    cnt[k] = t->s[i].pos >= count_from;
                    seq[k++] = t->s[i].ids[j];
                }
        int *seen = malloc(sizeof(int) * (size_t)t->n_expert);
        for (int e = 0; e < t->n_expert; e++)
            seen[e] = n; // "never again"
        for (int i = n - 1; i >= 0; i--) {
            next[i] = seen[seq[i]];
            seen[seq[i]] = i;
        }
        int *res = malloc(sizeof(int) * (size_t)(cap + 1)), *resnext = malloc(sizeof(int) * (size_t)(cap + 1));
        int nr = 0;
        for (int i = 0; i < n; i++) {
            uses += cnt[i];
            int at = -1;
            for (int j = 0; j < nr; j++)
                if (res[j] == seq[i])
                    at = j;
            if (at >= 0) {
                hits += cnt[i];
                resnext[at] = next[i];
                continue;
            }
            if (cap <= 0)
                continue;
            if (nr < cap) {
                res[nr] = seq[i];
                resnext[nr++] = next[i];
                continue;
            }
            int v = 0;
            for (int j = 1; j < nr; j++)
                if (resnext[j] > resnext[v])
                    v = j;
            res[v] = seq[i]; // always admitted: the engine must hold an expert to compute it
            resnext[v] = next[i];
        }
        free(seq);
        free(cnt);
        free(next);
        free(seen);
        free(res);
        free(resnext);
    }
    return uses ? (double)hits / (double)uses : 0;
}

static int pf_cands = -1;                 // --pf-cands: candidates per token by score (-1: all the
                                          // router's top-k, as the engine offers them when the disk
                                          // keeps up, which the replay models; 0: the reads of traces
                                          // without 'Q' lines, prefetch_top ascending)
static float pf_min = PT_EC_PF_MIN, pf_victim = PT_EC_PF_VICTIM, pf_pred = PT_EC_PF_PRED; // --pf-min, --pf-victim, --pf-pred

// Candidates per token of the confidence-cut prefetch (0: the old reads).
static int cands_of(const trace *t)
{
    if (!t->has_q || pf_cands == 0)
        return 0;
    const int n = pf_cands < 0 ? t->n_used : pf_cands;
    return n > 16 ? 16 : n;
}

// Belady-step with the engine's prefetch candidates: the same 'P' lines
// (the prefetch_top best, as petrel_prefetch reads) may be admitted before
// their layer's step, and a use is a hit when its expert is resident then,
// as the engine counts a prefetched expert. Offline choice for both: the
// furthest next use leaves first; a candidate is admitted only when its
// next use is sooner than the furthest resident's (a prefetch the oracle
// would waste is not made); a token's experts of a layer stay resident
// together. The bound to hold "petrel +pf" against (plain Belady never
// prefetches, so a prefetching policy can exceed it). *reads: experts read
// (demand misses + admitted candidates) over the counted positions.
static double run_belady_pf(const trace *t, int cap, uint64_t *reads)
{
    const size_t ne = (size_t)t->n_expert, nb = (size_t)t->n_blocks;
    uint64_t *next = malloc(sizeof(uint64_t) * 16 * (size_t)t->n); // next 'A' use after entry i
    uint64_t *qnext = malloc(sizeof(uint64_t) * 16 * (size_t)t->n); // ... of each 'Q' candidate
    uint64_t *seen = malloc(sizeof(uint64_t) * nb * ne);
    for (size_t x = 0; x < nb * ne; x++)
        seen[x] = UINT64_MAX;
    for (int i = t->n - 1; i >= 0; i--) {
        const step *st = &t->s[i];
        for (int k = 0; k < st->n; k++)
            next[(size_t)i * 16 + k] = seen[(size_t)st->layer * ne + st->ids[k]];
        for (int k = 0; k < st->nq; k++)
            qnext[(size_t)i * 16 + k] = seen[(size_t)st->layer * ne + st->qids[k]];
        if (st->kind == 'A')
            for (int k = 0; k < st->n; k++)
                seen[(size_t)st->layer * ne + st->ids[k]] = (uint64_t)i;
    }
    uint64_t *nu = malloc(sizeof(uint64_t) * nb * ne); // resident: its next use; else 0
    uint8_t *in = calloc(nb * ne, 1);
    int *n_in = calloc(nb, sizeof(int));
    uint64_t hits = 0, uses = 0;
    *reads = 0;
    for (int i = 0; i < t->n; i++) {
        const step *st = &t->s[i];
        const size_t base = (size_t)st->layer * ne;
        const bool counted = st->pos >= count_from;
        if (st->kind == 'P') {
            const int nc = cands_of(t) < st->nq ? cands_of(t) : st->nq;
            const int top = nc > 0 ? nc : t->best_first && t->prefetch_top > 0 && t->prefetch_top < st->n ? t->prefetch_top : st->n;
            for (int k = 0; k < top && cap > 0; k++) {
                const int e = nc > 0 ? st->qids[k] : st->ids[k];
                const uint64_t n_e = nc > 0 ? qnext[(size_t)i * 16 + k] : next[(size_t)i * 16 + k];
                if (in[base + e] || n_e == UINT64_MAX)
                    continue;
                if (n_in[st->layer] >= cap) {
                    int v = -1;
                    for (size_t x = 0; x < ne; x++)
                        if (in[base + x] && (v < 0 || nu[base + x] > nu[base + (size_t)v]))
                            v = (int)x;
                    if (nu[base + (size_t)v] <= n_e)
                        continue;
                    in[base + (size_t)v] = 0;
                    n_in[st->layer]--;
                }
                in[base + e] = 1;
                nu[base + e] = n_e;
                n_in[st->layer]++;
                *reads += counted;
            }
            continue;
        }
        uint8_t cur[1024] = {0};
        for (int k = 0; k < st->n; k++)
            cur[st->ids[k]] = 1;
        for (int k = 0; k < st->n; k++) {
            const int e = st->ids[k];
            uses += counted;
            if (in[base + e]) {
                hits += counted;
            } else {
                if (cap <= 0)
                    continue;
                *reads += counted;
                if (n_in[st->layer] >= cap) {
                    int v = -1;
                    for (size_t x = 0; x < ne; x++)
                        if (in[base + x] && !cur[x] && (v < 0 || nu[base + x] > nu[base + (size_t)v]))
                            v = (int)x;
                    if (v < 0)
                        continue; // (a token routing to more experts than the capacity)
                    in[base + (size_t)v] = 0;
                    n_in[st->layer]--;
                }
                in[base + e] = 1;
                n_in[st->layer]++;
            }
            nu[base + e] = next[(size_t)i * 16 + k];
        }
    }
    free(next);
    free(qnext);
    free(seen);
    free(nu);
    free(in);
    free(n_in);
    return uses ? (double)hits / (double)uses : 0;
}

// ---- the engine's own cache -------------------------------------------------

enum { FAKE_SLICE = 64 }; // bytes of each scratch-file slice (the cache's logic never looks at them)

typedef struct pstats {
    uint64_t uses, hits, hits_hot, hits_prefetch;
    uint64_t prefetch_reads, wasted;   // prefetch reads; of them evicted unused (counted positions)
    uint64_t reads;                    // expert reads, demand + prefetch (counted positions)
    int n_hot;                         // hot-store experts
} pstats;

static void pst_sum(pt_ecache *ec, const trace *t, uint64_t v[5])
{
    memset(v, 0, sizeof(uint64_t) * 5);
    for (int b = 0; b < t->n_blocks; b++) {
        const pt_ecache_layer_stats *l = pt_ecache_lstats(ec, b);
        v[0] += l->hits_lru + l->hits_hot + l->hits_prefetch + l->misses;
        v[1] += l->hits_lru + l->hits_hot + l->hits_prefetch;
        v[2] += l->hits_hot;
        v[3] += l->hits_prefetch;
        v[4] += l->bytes_read / (3 * FAKE_SLICE);
    }
}

// Waits for every read in flight (the replay models a disk that keeps up:
// what the engine has asked for is there before the next step).
static int drain(pt_ecache *ec, pt_err *err)
{
    int wl, we, rc;
    while ((rc = pt_ecache_wait(ec, &wl, &we, err)) != 0)
        if (rc < 0)
            return -1;
    return 0;
}

// One token's step of layer il as engine/moe.c runs it: requests for the
// present experts first (pinned so that the misses cannot evict them),
// then the absent ones; NOROOM requests retried as reads finish; every
// expert pinned while "computed", then released.
static int petrel_step(pt_ecache *ec, const step *st, pt_err *err)
{
    int u[16], nu = 0, state[16]; // 0 deferred, 1 loading, 2 ready and pinned
    for (int k = 0; k < st->n; k++) { // distinct, ascending (as the engine's batch union)
        int j = nu;
        bool dup = false;
        for (int i = 0; i < nu; i++)
            dup |= u[i] == st->ids[k];
        if (dup)
            continue;
        while (j > 0 && u[j - 1] > st->ids[k]) {
            u[j] = u[j - 1];
            j--;
        }
        u[j] = st->ids[k];
        nu++;
    }
    const int il = st->layer;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nu; i++) {
            const bool present = pt_ecache_is_ready(ec, il, u[i]) || pt_ecache_is_loading(ec, il, u[i]);
            if (present != (pass == 0))
                continue;
            int r = pt_ecache_request(ec, il, u[i], PT_EC_DEMAND, err);
            if (r < 0)
                return -1;
            state[i] = r == PT_EC_READY ? 2 : r == PT_EC_LOADING ? 1 : 0;
            if (r == PT_EC_READY) {
                const void *w[3];
                pt_ecache_pin(ec, il, u[i], w);
            }
        }
    for (;;) {
        int left = 0;
        for (int i = 0; i < nu; i++)
            left += state[i] != 2;
        if (!left)
            break;
        int wl, we;
        int rc = pt_ecache_wait(ec, &wl, &we, err);
        if (rc < 0)
            return -1;
        bool progress = rc > 0;
        for (int i = 0; i < nu; i++) {
            if (state[i] == 1 && pt_ecache_is_ready(ec, il, u[i])) {
                const void *w[3];
                pt_ecache_pin(ec, il, u[i], w);
                state[i] = 2;
            } else if (state[i] == 0) {
                int r = pt_ecache_request(ec, il, u[i], PT_EC_RETRY, err);
                if (r < 0)
                    return -1;
                if (r != PT_EC_NOROOM) {
                    progress = true;
                    state[i] = r == PT_EC_READY ? 2 : 1;
                    if (r == PT_EC_READY) {
                        const void *w[3];
                        pt_ecache_pin(ec, il, u[i], w);
                    }
                }
            }
        }
        if (!progress)
            return pt_errf(err, "layer %d: no slot can be freed for its experts", il);
    }
    for (int i = 0; i < nu; i++)
        pt_ecache_release(ec, il, u[i]);
    return drain(ec, err);
}

// The lookahead reads of engine/stream_prefetch.c for a 'P' line: the
// prefetch_top best predictions (all of them in traces without the order),
// absent ones only, ascending, at most the layer's share of slots, until
// the cache has no room.
static int petrel_prefetch(pt_ecache *ec, const trace *t, const step *st, pt_err *err)
{
    const int nc = cands_of(t);
    if (nc > 0 && st->nq > t->n_used) {
        // engine/stream_prefetch.c: best first, each with its margin, at
        // most the layer's share of new reads
        int budget = pt_ecache_slots(ec, st->layer);
        for (int k = 0; k < nc && k < st->nq && budget > 0; k++) {
            const int x = st->qids[k];
            const bool had = pt_ecache_is_ready(ec, st->layer, x) || pt_ecache_is_loading(ec, st->layer, x);
            int r = pt_ecache_prefetch(ec, st->layer, x, pt_ecache_margin(st->q, t->n_used, k), err);
            if (r < 0)
                return -1;
            if (r == PT_EC_NOROOM)
                break;
            budget -= !had && r == PT_EC_LOADING;
        }
        return drain(ec, err);
    }
    uint8_t want[1024] = {0};
    const int top = t->best_first && t->prefetch_top > 0 && t->prefetch_top < st->n ? t->prefetch_top : st->n;
    for (int k = 0; k < top; k++)
        want[st->ids[k]] = 1;
    int budget = pt_ecache_slots(ec, st->layer);
    for (int x = 0; x < t->n_expert && budget > 0; x++) {
        if (!want[x] || pt_ecache_is_ready(ec, st->layer, x) || pt_ecache_is_loading(ec, st->layer, x))
            continue;
        int r = pt_ecache_request(ec, st->layer, x, PT_EC_PREFETCH, err);
        if (r < 0)
            return -1;
        if (r == PT_EC_NOROOM)
            break;
        budget--;
    }
    return drain(ec, err);
}

// Replays the trace through cache/ecache.c at slots expert slots per used
// layer in all (hot-store included), prior heat (NULL: none), with or
// without prefetch. 0, or -1 with a message.
static int run_petrel(const trace *t, const uint8_t *used_layer, long slots, const uint64_t *heat, bool prefetch,
                      pstats *o)
{
    memset(o, 0, sizeof *o);
    if (t->n_expert > 1024)
        return fprintf(stderr, "bench_trace: more than 1024 experts per layer\n"), -1;
    char path[] = "/tmp/bench_trace_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return fprintf(stderr, "bench_trace: cannot create a scratch file in /tmp\n"), -1;
    const uint64_t fsize = (uint64_t)t->n_blocks * 3 * (uint64_t)t->n_expert * FAKE_SLICE + PT_ALIGN;
    int rc = ftruncate(fd, (off_t)fsize);
    close(fd);
    pt_ecache_layer_src *src = calloc((size_t)t->n_blocks, sizeof *src);
    int n_moe = 0;
    uint64_t slot_b = 0;
    for (int b = 0; b < t->n_blocks; b++) {
        if (!used_layer[b])
            continue;
        src[b].n_expert = t->n_expert;
        for (int k = 0; k < 3; k++) {
            src[b].off[k] = ((uint64_t)b * 3 + (uint64_t)k) * (uint64_t)t->n_expert * FAKE_SLICE;
            src[b].bytes[k] = FAKE_SLICE;
        }
        slot_b = pt_ecache_slot_bytes_for(&src[b]);
        n_moe++;
    }
    // The budget and the hot-store as engine/stream.c sets them up.
    const uint64_t eb = (uint64_t)slots * (uint64_t)n_moe * slot_b, min_lru = (uint64_t)n_moe * slot_b;
    const uint64_t pin_bytes = pin_frac > 0 ? (uint64_t)(pin_frac * (double)eb) : 0;
    const uint64_t pin = heat ? pt_hot_store_bytes(eb, pin_bytes, min_lru, n_moe, t->n_used, 1) : 0;
    int32_t *hot = calloc((size_t)t->n_blocks * (size_t)t->n_expert * 2, sizeof(int32_t));
    int n_hot = pin && heat ? pt_usage_pick_hot(heat, t->n_blocks, t->n_expert, src, pin, hot) : 0;
    uint64_t budget = eb - (uint64_t)n_hot * slot_b;
    if (budget < min_lru)
        budget = min_lru;
    pt_err err = {{0}};
    pt_reader_cfg rcfg = {.path = path, .mode = PT_IO_BUFFERED, .queue_depth = 8, .n_threads = 1};
    pt_reader *rd = rc == 0 ? pt_reader_open(&rcfg, &err) : NULL;
    pt_ecache *ec = NULL;
    if (rd) {
        pt_ecache_cfg cfg = {.reader = rd, .path = path, .n_layers = t->n_blocks, .layers = src,
                             .budget_bytes = budget, .hot = hot, .n_hot = n_hot, .heat = heat,
                             .heat_stride = t->n_expert, .halflife = halflife, .n_used = t->n_used};
        ec = pt_ecache_new(&cfg, &err);
        if (ec)
            pt_ecache_set_prefetch_bar(ec, pf_min, pf_victim, pf_pred);
    }
    o->n_hot = n_hot;
    rc = ec ? 0 : -1;
    for (int i = 0; i < t->n && rc == 0; i++) {
        const step *st = &t->s[i];
        if (st->kind == 'P') {
            if (prefetch)
                rc = petrel_prefetch(ec, t, st, &err);
            continue;
        }
        uint64_t a[5], b[5], w0 = 0, w1 = 0;
        pst_sum(ec, t, a);
        for (int l = 0; l < t->n_blocks; l++)
            w0 += pt_ecache_lstats(ec, l)->prefetch_wasted_bytes;
        rc = petrel_step(ec, st, &err);
        pst_sum(ec, t, b);
        for (int l = 0; l < t->n_blocks; l++)
            w1 += pt_ecache_lstats(ec, l)->prefetch_wasted_bytes;
        if (st->pos >= count_from) {
            o->uses += b[0] - a[0];
            o->hits += b[1] - a[1];
            o->hits_hot += b[2] - a[2];
            o->hits_prefetch += b[3] - a[3];
            o->wasted += (w1 - w0) / (3 * FAKE_SLICE);
        }
    }
    if (ec) {
        uint64_t pr = 0, reads = 0;
        for (int l = 0; l < t->n_blocks; l++) {
            pr += pt_ecache_lstats(ec, l)->prefetch_reads;
            reads += pt_ecache_lstats(ec, l)->bytes_read / (3 * FAKE_SLICE);
        }
        o->prefetch_reads = pr;
        o->reads = reads;
    }
    if (rc < 0)
        fprintf(stderr, "bench_trace: petrel replay: %s\n", err.msg);
    pt_ecache_free(ec);
    pt_reader_close(rd);
    unlink(path);
    free(hot);
    free(src);
    return rc;
}

// ---- locality -----------------------------------------------------------------

typedef struct locality {
    double repeat;      // share of a token's experts (per layer) the previous token used too
    double recall;      // one-layer-ahead predictions: predicted ∩ actual / actual
    double recall_read; // ... counting only the predictions the engine reads (prefetch_top best)
    double precision_read; // read predictions that were then used
} locality;

static locality measure_locality(const trace *t)
{
    int32_t *last = calloc((size_t)t->n_blocks * 16, sizeof(int32_t));
    int *last_pos = malloc(sizeof(int) * (size_t)t->n_blocks), *last_n = calloc((size_t)t->n_blocks, sizeof(int));
    const step **pred = calloc((size_t)t->n_blocks, sizeof *pred);
    for (int b = 0; b < t->n_blocks; b++)
        last_pos[b] = -2;
    uint64_t rep = 0, rep_n = 0, ok = 0, ok_read = 0, act = 0, n_read = 0;
    for (int i = 0; i < t->n; i++) {
        const step *st = &t->s[i];
        const int l = st->layer;
        if (st->kind == 'P') {
            pred[l] = st;
            continue;
        }
        const bool counted = st->pos >= count_from;
        if (last_pos[l] == st->pos - 1 && counted) {
            for (int k = 0; k < st->n; k++)
                for (int j = 0; j < last_n[l]; j++)
                    rep += last[l * 16 + j] == st->ids[k];
            rep_n += (uint64_t)st->n;
        }
        if (pred[l] && pred[l]->pos == st->pos && counted) {
            const step *p = pred[l];
            const int top = t->best_first && t->prefetch_top > 0 && t->prefetch_top < p->n ? t->prefetch_top : p->n;
            for (int k = 0; k < st->n; k++)
                for (int j = 0; j < p->n; j++)
                    if (p->ids[j] == st->ids[k]) {
                        ok++;
                        ok_read += j < top;
                    }
            act += (uint64_t)st->n;
            n_read += (uint64_t)top;
        }
        pred[l] = NULL;
        memcpy(last + l * 16, st->ids, sizeof(int32_t) * (size_t)st->n);
        last_n[l] = st->n;
        last_pos[l] = st->pos;
    }
    locality r = {
        .repeat = rep_n ? (double)rep / (double)rep_n : 0,
        .recall = act ? (double)ok / (double)act : 0,
        .recall_read = act ? (double)ok_read / (double)act : 0,
        .precision_read = n_read ? (double)ok_read / (double)n_read : 0,
    };
    free(last);
    free(last_pos);
    free(last_n);
    free(pred);
    return r;
}

// Per-(block, expert) use counts of a trace's 'A' lines (what the engine's
// usage file adds for that session: one per distinct expert per token).
static int heat_from_trace(const char *path, const trace *t, uint64_t *heat)
{
    trace h = {0};
    if (load(path, &h) < 0)
        return -1;
    if (h.n_blocks != t->n_blocks || h.n_expert != t->n_expert) {
        fprintf(stderr, "bench_trace: %s: %d blocks x %d experts, the trace has %d x %d\n", path, h.n_blocks,
                h.n_expert, t->n_blocks, t->n_expert);
        free(h.s);
        return -1;
    }
    for (int i = 0; i < h.n; i++)
        if (h.s[i].kind == 'A')
            for (int k = 0; k < h.s[i].n; k++)
                heat[(size_t)h.s[i].layer * h.n_expert + h.s[i].ids[k]]++;
    free(h.s);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *usage = NULL, *heat_trace = NULL;
    long slots = 0;
    double frac = 0;
    unsigned long long bytes = 0;
    double hot_frac = 0.5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--slots") && i + 1 < argc)
            slots = atol(argv[++i]);
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--frac") && i + 1 < argc)
            frac = atof(argv[++i]);
        else if (!strcmp(argv[i], "--hot-frac") && i + 1 < argc)
            hot_frac = atof(argv[++i]);
        else if (!strcmp(argv[i], "--usage") && i + 1 < argc)
            usage = argv[++i];
        else if (!strcmp(argv[i], "--heat-trace") && i + 1 < argc)
            heat_trace = argv[++i];
        else if (!strcmp(argv[i], "--count-from") && i + 1 < argc)
            count_from = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--halflife") && i + 1 < argc)
            halflife = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pin-frac") && i + 1 < argc)
            pin_frac = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pf-cands") && i + 1 < argc)
            pf_cands = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pf-min") && i + 1 < argc)
            pf_min = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--pf-victim") && i + 1 < argc)
            pf_victim = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--pf-pred") && i + 1 < argc)
            pf_pred = (float)atof(argv[++i]);
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_trace TRACE (--slots N | --bytes B | --frac F) [--hot-frac F] [--usage FILE] "
                            "[--heat-trace TRACE2] [--count-from POS] [--halflife H] [--pin-frac F]\n");
            return 2;
        }
    }
    trace t = {0};
    if (!path || load(path, &t) < 0)
        return 2;
    int n_layers = 0;
    uint8_t *used_layer = calloc((size_t)t.n_blocks, 1);
    uint64_t *counts = calloc((size_t)t.n_blocks * t.n_expert, sizeof(uint64_t));
    for (int i = 0; i < t.n; i++)
        if (t.s[i].kind == 'A') {
            if (!used_layer[t.s[i].layer]) {
                used_layer[t.s[i].layer] = 1;
                n_layers++;
            }
            for (int k = 0; k < t.s[i].n; k++)
                counts[(size_t)t.s[i].layer * t.n_expert + t.s[i].ids[k]]++;
        }
    if (bytes && !slots && n_layers)
        slots = (long)(bytes / t.slot_bytes / (uint64_t)n_layers);
    if (frac > 0 && !slots)
        slots = (long)(frac * t.n_expert + 0.5);
    if (slots <= 0) {
        fprintf(stderr, "bench_trace: capacity below one expert per layer (give --slots, --bytes or --frac)\n");
        return 2;
    }
    const char *heat_src = "trace (oracle)";
    if (usage) {
        FILE *f = fopen(usage, "r");
        int ver, nb, ne;
        if (f && fscanf(f, "petrel-usage %d %d %d", &ver, &nb, &ne) == 3 && nb == t.n_blocks && ne == t.n_expert) {
            for (size_t i = 0; i < (size_t)nb * ne; i++) {
                unsigned long long v = 0;
                if (fscanf(f, "%llu", &v) != 1)
                    break;
                counts[i] = v;
            }
            heat_src = usage;
        }
        if (f)
            fclose(f);
        if (heat_src != usage) {
            fprintf(stderr, "bench_trace: %s: not a usage file of %d blocks x %d experts\n", usage, t.n_blocks,
                    t.n_expert);
            return 2;
        }
    }
    uint64_t *prior = NULL; // heat of an earlier session for the petrel replay
    if (heat_trace) {
        prior = calloc((size_t)t.n_blocks * t.n_expert, sizeof(uint64_t));
        if (heat_from_trace(heat_trace, &t, prior) < 0)
            return 2;
        memcpy(counts, prior, sizeof(uint64_t) * (size_t)t.n_blocks * t.n_expert);
        heat_src = heat_trace;
    } else if (usage) {
        prior = malloc(sizeof(uint64_t) * (size_t)t.n_blocks * t.n_expert);
        memcpy(prior, counts, sizeof(uint64_t) * (size_t)t.n_blocks * t.n_expert);
    }
    // Hot-store: the hottest experts over all layers, hot_frac of the
    // capacity; each layer's LRU keeps the rest of the (even) split.
    const long total = slots * n_layers;
    long n_hot = (long)(hot_frac * (double)total);
    long lru_cap = (total - n_hot) / (n_layers ? n_layers : 1);
    uint8_t *pinned = calloc((size_t)t.n_blocks * t.n_expert, 1);
    for (long h = 0; h < n_hot; h++) {
        size_t best = 0;
        uint64_t bc = 0;
        for (size_t i = 0; i < (size_t)t.n_blocks * t.n_expert; i++)
            if (!pinned[i] && used_layer[i / t.n_expert] && counts[i] > bc) {
                bc = counts[i];
                best = i;
            }
        if (bc == 0)
            break;
        pinned[best] = 1;
    }
    double lru = run_policy(&t, (int)slots, NULL, POL_LRU, false);
    double lfu = run_policy(&t, (int)slots, NULL, POL_LFU, false);
    double hot = run_policy(&t, (int)lru_cap, pinned, POL_LRU, false);
    double pf = run_policy(&t, (int)slots, NULL, POL_LRU, true);
    double hotpf = run_policy(&t, (int)lru_cap, pinned, POL_LRU, true);
    double hotlfu = run_policy(&t, (int)lru_cap, pinned, POL_LFU, false);
    double hotlfupf = run_policy(&t, (int)lru_cap, pinned, POL_LFU, true);
    double bel = run_belady(&t, (int)slots);
    double bels = run_policy(&t, (int)slots, NULL, POL_BELADY_STEP, false);
    double so = run_static_oracle(&t, (int)slots);
    uint64_t belpf_reads = 0;
    double belpf = t.n_expert <= 1024 ? run_belady_pf(&t, (int)slots, &belpf_reads) : 0;
    pstats pc, pcp, pw = {0}, pwp = {0};
    if (run_petrel(&t, used_layer, slots, NULL, false, &pc) < 0 || run_petrel(&t, used_layer, slots, NULL, true, &pcp) < 0)
        return 1;
    if (prior && (run_petrel(&t, used_layer, slots, prior, false, &pw) < 0 ||
                  run_petrel(&t, used_layer, slots, prior, true, &pwp) < 0))
        return 1;
#define RATE(p) ((p).uses ? (double)(p).hits / (double)(p).uses : 0)
    const locality loc = measure_locality(&t);
    int tokens = 0; // counted tokens (A lines of the first used layer)
    int first = 0;
    while (first < t.n_blocks && !used_layer[first])
        first++;
    for (int i = 0; i < t.n; i++)
        tokens += t.s[i].kind == 'A' && t.s[i].layer == first && t.s[i].pos >= count_from;
    printf("trace %s: %d layers used, %d experts, top-%d, %d tokens counted, capacity %ld slots per layer "
           "(%.1f%% of the routed experts, %.3f GB in all); hot+lru: %ld pinned (heat from %s)\n",
           path, n_layers, t.n_expert, t.n_used, tokens, slots, 100.0 * (double)slots / t.n_expert,
           (double)total * (double)t.slot_bytes / 1e9, n_hot, heat_src);
    printf("%-22s %8s %8s\n", "policy", "hit rate", "/belady");
#define ROW(name, r) printf("%-22s %7.1f%% %8.3f\n", name, 100 * (r), bel > 0 ? (r) / bel : 0)
    ROW("lru", lru);
    ROW("lfu", lfu);
    ROW("hot+lru", hot);
    ROW("lru+prefetch", pf);
    ROW("hot+lru+prefetch", hotpf);
    ROW("hot+lfu", hotlfu);
    ROW("hot+lfu+prefetch", hotlfupf);
    ROW("petrel cold", RATE(pc));
    ROW("petrel cold+pf", RATE(pcp));
    if (prior) {
        ROW("petrel warm", RATE(pw));
        ROW("petrel warm+pf", RATE(pwp));
    }
    ROW("static-oracle", so);
    ROW("belady", bel);
    ROW("belady-step", bels);
    ROW("belady-step+pf", belpf);
    const pstats *pp = prior ? &pwp : &pcp; // the engine's default run: prefetch on
    const double wasted_frac = pp->prefetch_reads ? (double)pp->wasted / (double)pp->prefetch_reads : 0;
    const double wasted_mb_tok = tokens ? (double)pp->wasted * (double)t.slot_bytes / 1e6 / tokens : 0;
    const double read_mb_tok = tokens ? (double)pp->reads * (double)t.slot_bytes / 1e6 / tokens : 0;
    printf("petrel %s: hot-store %d experts (%.1f%% of the capacity); prefetch: %llu reads, %llu evicted unused "
           "(%.1f%%), %.3f MB wasted and %.3f MB read per token\n",
           prior ? "warm" : "cold", pp->n_hot, 100.0 * pp->n_hot / (double)total, (unsigned long long)pp->prefetch_reads,
           (unsigned long long)pp->wasted, 100 * wasted_frac, wasted_mb_tok, read_mb_tok);
    const double uses_all = pp->uses ? (double)pp->uses : 1;
    printf("expert reads per use (bytes read / bytes used): belady %.3f, belady-step+pf %.3f, petrel %s+pf %.3f\n",
           1 - bel, (double)belpf_reads / uses_all, prior ? "warm" : "cold", (double)pp->reads / uses_all);
    printf("locality: token-to-token repeat %.1f%%; one-layer-ahead recall %.1f%% (of the %s read: recall %.1f%%, "
           "precision %.1f%%)\n",
           100 * loc.repeat, 100 * loc.recall, t.best_first ? "best predictions" : "predictions",
           100 * loc.recall_read, 100 * loc.precision_read);
    printf("RESULT slots=%ld lru=%.4f lfu=%.4f hot_lru=%.4f lru_prefetch=%.4f hot_lru_prefetch=%.4f hot_lfu=%.4f "
           "hot_lfu_prefetch=%.4f static_oracle=%.4f belady=%.4f petrel_cold=%.4f petrel_cold_pf=%.4f",
           slots, lru, lfu, hot, pf, hotpf, hotlfu, hotlfupf, so, bel, RATE(pc), RATE(pcp));
    if (prior)
        printf(" petrel_warm=%.4f petrel_warm_pf=%.4f", RATE(pw), RATE(pwp));
    printf(" belady_pf=%.4f belady_pf_reads=%.4f petrel_pf_reads=%.4f petrel_pf_vs_belady_pf=%.4f", belpf,
           (double)belpf_reads / uses_all, (double)pp->reads / uses_all,
           belpf > 0 ? (prior ? RATE(pwp) : RATE(pcp)) / belpf : 0);
    printf(" belady_step=%.4f petrel_vs_belady=%.4f petrel_vs_belady_step=%.4f repeat=%.4f recall=%.4f recall_read=%.4f prefetch_wasted_frac=%.4f "
           "prefetch_wasted_mb_per_tok=%.4f\n",
           bels, bel > 0 ? (prior ? RATE(pw) : RATE(pc)) / bel : 0, bels > 0 ? (prior ? RATE(pw) : RATE(pc)) / bels : 0,
           loc.repeat, loc.recall, loc.recall_read, wasted_frac,
           wasted_mb_tok);
    free(prior);
    free(pinned);
    free(counts);
    free(used_layer);
    free(t.s);
    return 0;
}

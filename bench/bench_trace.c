// bench/bench_trace.c — replays a routing trace (petrel_trace_open /
// --trace) against expert-cache policies at the same capacity and prints
// their hit rates side by side:
//   lru            per-layer LRU
//   lfu            per-layer LFU (use counts since the start, ties to LRU)
//   hot+lru        a hot-store pinned by heat (usage file, or the trace's own
//                  counts: an oracle) plus per-layer LRU in the rest
//   lru+prefetch   LRU that also inserts the lookahead predictions ('P'
//                  lines) before each step; a predicted expert that is then
//                  used counts as a hit, as in the engine's "prefetched" tier
//   hot+lru+prefetch  both
//   hot+lfu(+prefetch) the hot-store with least-used-first eviction (ties to
//                  LRU) in the rest: the engine's default policy
//   static-oracle  the most used experts of each layer over the counted
//                  uses, fixed from the start: the ceiling of frequency-based
//                  policies (it knows the future's counts, not its order)
//   belady         Belady's optimal replacement (furthest next use) per layer
// A "use" is one routed expert of one token in one layer (lines 'A').
//
// usage: bench_trace TRACE (--slots N | --bytes B) [--hot-frac F] [--usage FILE] [--count-from POS]
//   --count-from POS  simulate everything but count only uses at positions
//                 >= POS (e.g. the decode after a prompt that warmed the cache)
//   --slots N    expert slots per MoE layer; --bytes B: total slot bytes
//                (divided evenly over the layers in the trace)
//   --hot-frac F share of the capacity pinned in hot+lru (default 0.5)
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct step {
    int layer, pos;
    char kind;          // 'A' actual, 'P' prediction
    int n;
    int32_t ids[16];
} step;

typedef struct trace {
    int n_blocks, n_expert, n_used;
    uint64_t slot_bytes;
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
    while (fgets(line, sizeof line, f)) {
        step st = {0};
        char *p = line;
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

enum { POL_LRU, POL_LFU };

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
            if (pol == POL_LFU)
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

static double run_policy(const trace *t, int cap, const uint8_t *pinned, int pol, bool prefetch)
{
    sim s;
    sim_init(&s, t, cap, pinned);
    for (int i = 0; i < t->n; i++) {
        const step *st = &t->s[i];
        lcache *c = &s.l[st->layer];
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
                c->freq[e]++;
                s.hits += counted && hit;
                if (!c->pinned[e])
                    insert(c, e, ++s.clock, pol);
            }
    }
    double r = s.uses ? (double)s.hits / (double)s.uses : 0;
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

int main(int argc, char **argv)
{
    const char *path = NULL, *usage = NULL;
    long slots = 0;
    unsigned long long bytes = 0;
    double hot_frac = 0.5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--slots") && i + 1 < argc)
            slots = atol(argv[++i]);
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--hot-frac") && i + 1 < argc)
            hot_frac = atof(argv[++i]);
        else if (!strcmp(argv[i], "--usage") && i + 1 < argc)
            usage = argv[++i];
        else if (!strcmp(argv[i], "--count-from") && i + 1 < argc)
            count_from = atoi(argv[++i]);
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_trace TRACE (--slots N | --bytes B) [--hot-frac F] [--usage FILE] [--count-from POS]\n");
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
    if (slots <= 0) {
        fprintf(stderr, "bench_trace: capacity below one expert per layer (give --slots or --bytes)\n");
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
    double so = run_static_oracle(&t, (int)slots);
    printf("trace %s: %d layers used, %d experts, top-%d, capacity %ld slots per layer (%.2f GB in all); "
           "hot-store %ld slots (heat from %s)\n",
           path, n_layers, t.n_expert, t.n_used, slots, (double)total * (double)t.slot_bytes / 1e9, n_hot,
           heat_src);
    printf("%-18s %8s\n", "policy", "hit rate");
    printf("%-18s %7.1f%%\n", "lru", 100 * lru);
    printf("%-18s %7.1f%%\n", "lfu", 100 * lfu);
    printf("%-18s %7.1f%%\n", "hot+lru", 100 * hot);
    printf("%-18s %7.1f%%\n", "lru+prefetch", 100 * pf);
    printf("%-18s %7.1f%%\n", "hot+lru+prefetch", 100 * hotpf);
    printf("%-18s %7.1f%%\n", "hot+lfu", 100 * hotlfu);
    printf("%-18s %7.1f%%\n", "hot+lfu+prefetch", 100 * hotlfupf);
    printf("%-18s %7.1f%%\n", "static-oracle", 100 * so);
    printf("%-18s %7.1f%%\n", "belady", 100 * bel);
    printf("RESULT slots=%ld lru=%.4f lfu=%.4f hot_lru=%.4f lru_prefetch=%.4f hot_lru_prefetch=%.4f hot_lfu=%.4f "
           "hot_lfu_prefetch=%.4f static_oracle=%.4f belady=%.4f\n",
           slots, lru, lfu, hot, pf, hotpf, hotlfu, hotlfupf, so, bel);
    free(pinned);
    free(counts);
    free(used_layer);
    free(t.s);
    return 0;
}

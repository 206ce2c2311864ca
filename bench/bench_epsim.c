// bench/bench_epsim.c — expert parallelism on paper: replays a routing trace
// (petrel bench --trace, format in bench/bench_trace.c) as if the routed
// experts of every MoE layer were sharded over R ranks, each rank holding a
// copy of the trunk and running the trunk for its own tokens (token t of a
// layer lives on rank t mod R). Per token and MoE layer the token's hidden
// state is sent to every other rank that owns one of its routed experts
// (dispatch) and one partial sum comes back from each (combine: a rank adds
// its experts' weighted outputs before sending), so
//   bytes = |owners(experts) \ {home}| * hidden * (dispatch_bytes + combine_bytes).
// Placements: round-robin (expert e on rank e mod R) and by heat (experts
// sorted by their use counts in the training part of the trace, each given
// to the least loaded rank that has room: balanced compute, the same
// E/R experts per rank), and by heat with replication: as by heat, plus
// the rep hottest experts of the layer copied on every rank (DeepSeek's
// "redundant experts"; --replicate, default a quarter of E/R more per rank),
// so a token never leaves its rank for them. The comparison is one machine streaming the experts
// it lacks from local NVMe: a per-layer LRU of cache_frac * E experts over
// the same trace, each miss reading slot_bytes.
// Break-even: EP's network time per token, bytes / bandwidth plus two
// all-to-all latencies per MoE layer, equals the NVMe time per token, misses
// * slot_bytes / nvme bandwidth; above that bandwidth EP is faster.
//
// usage: bench_epsim TRACE [--ranks 2,4,8] [--hidden N] [--dispatch-bytes B]
//          [--combine-bytes B] [--layers N] [--slot-bytes B] [--nvme-gbs G]
//          [--cache-frac F] [--latency-us U] [--train-frac F]
//   --hidden N        model width (default 7168, DeepSeek-V3)
//   --dispatch-bytes / --combine-bytes  bytes per activation element sent
//                     each way (default 2 / 2: bf16; DeepEP sends fp8 out, 1)
//   --layers N        MoE layers of the model projected to (default: the
//                     trace's); per-token figures are the trace's per-layer
//                     mean times N
//   --slot-bytes B    bytes of one routed expert (default: the trace's)
//   --nvme-gbs G      local NVMe read bandwidth, GB/s (default 7)
//   --cache-frac F    share of each layer's experts one machine keeps in RAM
//                     for local streaming (default 0.25)
//   --latency-us U    latency of one all-to-all (default 10)
//   --replicate N     hottest experts per layer copied on every rank in the
//                     heat+rep placement (default: ceil(E/R/4))
//   --batch N         tokens per step for local streaming (default 1, decode
//                     of one sequence): an expert read once serves the step's
//                     tokens; EP's bytes per token do not shrink with it
//   --train-frac F    heat counted on the first F of each layer's tokens,
//                     everything measured on the rest (default 0.5; 0: heat
//                     and measurement on the whole trace, an oracle)
// Output: a per-layer table (MB per token for each rank count and
// placement), a summary line per rank count and placement, then one line per
// rank count: RESULT ranks=R placement=P bytes_per_token_mb=X
// break_even_gbps=Y for the placement with fewer bytes (Gbit/s; "inf" when
// the latencies alone exceed the NVMe time).
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_USED 16
#define MAX_RANKS 64

typedef struct ev {
    int layer;
    int n;
    int32_t ids[MAX_USED]; // (n) routed experts of one token
} ev;

typedef struct trace {
    int n_blocks, n_expert, n_used;
    uint64_t slot_bytes;
    ev *e;                 // (n, cap) 'A' lines in file order
    int n, cap;
} trace;

typedef struct opts {
    int ranks[8], n_ranks;
    double hidden, dispatch_b, combine_b, slot_bytes, nvme_gbs, cache_frac, latency_us, train_frac;
    int layers;
    int replicate;         // -1: ceil(E/R/4)
    int batch;             // tokens per step of the local streaming baseline
} opts;

enum { PL_RR, PL_HEAT, PL_REP, N_PL };
static const char *pl_name[N_PL] = {"round-robin", "heat", "heat+rep"};

static int load(const char *path, trace *t)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_epsim: cannot open %s\n", path);
        return -1;
    }
    unsigned long long sb;
    if (fscanf(f, "petrel-trace 1 blocks %d experts %d used %d slot_bytes %llu", &t->n_blocks, &t->n_expert,
               &t->n_used, &sb) != 4 || t->n_expert <= 0 || t->n_blocks <= 0) {
        fprintf(stderr, "bench_epsim: %s: not a petrel trace\n", path);
        fclose(f);
        return -1;
    }
    t->slot_bytes = sb;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (line[0] != 'A') // predictions ('P') do not move data here
            continue;
        ev e = {0};
        char *p = line + 1, *end;
        e.layer = (int)strtol(p, &p, 10);
        strtol(p, &p, 10); // position: the home rank is the token's ordinal
        for (;;) {
            long v = strtol(p, &end, 10);
            if (end == p || e.n >= MAX_USED)
                break;
            if (v < 0 || v >= t->n_expert) {
                fprintf(stderr, "bench_epsim: %s: expert %ld out of range\n", path, v);
                fclose(f);
                return -1;
            }
            e.ids[e.n++] = (int32_t)v;
            p = end;
        }
        if (e.layer < 0 || e.layer >= t->n_blocks || e.n == 0)
            continue;
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 4096;
            t->e = realloc(t->e, sizeof *t->e * (size_t)t->cap);
            assert(t->e);
        }
        t->e[t->n++] = e;
    }
    fclose(f);
    return 0;
}

// Expert -> rank for one layer (-1: a copy on every rank). heat (n_expert)
// are the training counts; rep the experts replicated in PL_REP.
static void place(int n_expert, int R, const uint64_t *heat, int pl, int rep, int *owner)
{
    if (pl == PL_RR) {
        for (int e = 0; e < n_expert; e++)
            owner[e] = e % R;
        return;
    }
    int *order = malloc(sizeof *order * (size_t)n_expert);
    for (int e = 0; e < n_expert; e++)
        order[e] = e;
    // Hottest first (insertion sort: E is a few hundred at most).
    for (int i = 1; i < n_expert; i++)
        for (int j = i; j > 0 && heat[order[j]] > heat[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    const int room = (n_expert + R - 1) / R;
    uint64_t load[MAX_RANKS] = {0};
    int count[MAX_RANKS] = {0};
    for (int i = 0; i < n_expert; i++) {
        int best = -1;
        for (int r = 0; r < R; r++)
            if (count[r] < room && (best < 0 || load[r] < load[best]))
                best = r;
        owner[order[i]] = best;
        load[best] += heat[order[i]];
        count[best]++;
    }
    // The hottest keep their shard home and get a copy everywhere.
    for (int i = 0; pl == PL_REP && i < rep && i < n_expert; i++)
        owner[order[i]] = -1;
    free(order);
}

// Per-layer figures of one rank count and placement over the measured tokens.
typedef struct layer_stat {
    double remote_ranks;   // mean other ranks a token is sent to
    double imbalance;      // max rank expert-uses / mean
} layer_stat;

// LRU over one layer's measured tokens, warmed on the training part: the
// mean misses per measured token. Tokens go in steps of `batch` (a prefill
// or batched decode step reads each needed expert once for all its tokens).
static double lru_misses(const trace *t, int layer, int first, int cap, int batch)
{
    const int E = t->n_expert;
    int32_t *slot = malloc(sizeof *slot * (size_t)cap);
    uint64_t *last = malloc(sizeof *last * (size_t)cap);
    uint8_t *need = calloc((size_t)E, 1);
    int n = 0, tok = 0, in_step = 0, step_counts = 0;
    uint64_t clock = 0, miss = 0, measured = 0;
    for (int i = 0; i <= t->n; i++) {
        const ev *e = i < t->n ? &t->e[i] : NULL;
        if (e && e->layer != layer)
            continue;
        if (e) {
            if (in_step == 0)
                step_counts = tok >= first;
            measured += (uint64_t)(tok++ >= first);
            for (int k = 0; k < e->n; k++)
                need[e->ids[k]] = 1;
            if (++in_step < batch)
                continue;
        }
        if (in_step == 0)
            break;
        // End of a step: each needed expert once.
        for (int x = 0; x < E; x++) {
            if (!need[x])
                continue;
            need[x] = 0;
            clock++;
            int j = 0;
            while (j < n && slot[j] != x)
                j++;
            if (j < n) {
                last[j] = clock;
                continue;
            }
            miss += (uint64_t)step_counts;
            if (n < cap) {
                j = n++;
            } else {
                j = 0;
                for (int q = 1; q < n; q++)
                    if (last[q] < last[j])
                        j = q;
            }
            slot[j] = x;
            last[j] = clock;
        }
        in_step = 0;
    }
    free(slot);
    free(last);
    free(need);
    return measured ? (double)miss / (double)measured : 0;
}

// One layer's measured tokens under a placement (owner, -1 = replicated):
// the mean number of other ranks each token is sent to (its home is token
// ordinal mod R), and the busiest rank's expert uses over the mean.
static layer_stat sim_layer(const trace *t, int layer, int first, int R, const int *owner)
{
    uint64_t uses[MAX_RANKS] = {0}, remote = 0, measured = 0;
    int tok = 0;
    for (int i = 0; i < t->n; i++) {
        const ev *e = &t->e[i];
        if (e->layer != layer)
            continue;
        const int home = tok % R;
        if (tok++ < first)
            continue;
        measured++;
        uint64_t hit = 0; // bit r: rank r computes one of the token's experts
        for (int k = 0; k < e->n; k++) {
            const int r = owner[e->ids[k]] < 0 ? home : owner[e->ids[k]];
            hit |= 1ull << r;
            uses[r]++;
        }
        hit &= ~(1ull << home);
        remote += (uint64_t)__builtin_popcountll(hit);
    }
    layer_stat s = {0};
    if (!measured)
        return s;
    s.remote_ranks = (double)remote / (double)measured;
    uint64_t mx = 0, sum = 0;
    for (int r = 0; r < R; r++) {
        sum += uses[r];
        if (uses[r] > mx)
            mx = uses[r];
    }
    s.imbalance = sum ? (double)mx * R / (double)sum : 0;
    return s;
}

static int parse_ranks(const char *s, opts *o)
{
    o->n_ranks = 0;
    while (*s && o->n_ranks < 8) {
        char *end;
        long r = strtol(s, &end, 10);
        if (end == s || r < 2 || r > MAX_RANKS)
            return -1;
        o->ranks[o->n_ranks++] = (int)r;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return o->n_ranks ? 0 : -1;
}

int main(int argc, char **argv)
{
    opts o = {.ranks = {2, 4, 8}, .n_ranks = 3, .hidden = 7168, .dispatch_b = 2, .combine_b = 2,
              .nvme_gbs = 7, .cache_frac = 0.25, .latency_us = 10, .train_frac = 0.5,
              .replicate = -1, .batch = 1};
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "--ranks") && v) {
            if (parse_ranks(v, &o) < 0) {
                fprintf(stderr, "bench_epsim: --ranks wants a list of counts in [2, %d], e.g. 2,4,8\n", MAX_RANKS);
                return 2;
            }
        } else if (!strcmp(a, "--hidden") && v)
            o.hidden = atof(v);
        else if (!strcmp(a, "--dispatch-bytes") && v)
            o.dispatch_b = atof(v);
        else if (!strcmp(a, "--combine-bytes") && v)
            o.combine_b = atof(v);
        else if (!strcmp(a, "--layers") && v)
            o.layers = atoi(v);
        else if (!strcmp(a, "--slot-bytes") && v)
            o.slot_bytes = atof(v);
        else if (!strcmp(a, "--nvme-gbs") && v)
            o.nvme_gbs = atof(v);
        else if (!strcmp(a, "--cache-frac") && v)
            o.cache_frac = atof(v);
        else if (!strcmp(a, "--latency-us") && v)
            o.latency_us = atof(v);
        else if (!strcmp(a, "--batch") && v)
            o.batch = atoi(v);
        else if (!strcmp(a, "--replicate") && v)
            o.replicate = atoi(v);
        else if (!strcmp(a, "--train-frac") && v)
            o.train_frac = atof(v);
        else if (a[0] != '-' && !path) {
            path = a;
            used = 0;
        } else {
            fprintf(stderr, "usage: bench_epsim TRACE [--ranks 2,4,8] [--hidden N] [--dispatch-bytes B] "
                            "[--combine-bytes B] [--layers N] [--slot-bytes B] [--nvme-gbs G] [--cache-frac F] "
                            "[--latency-us U] [--replicate N] [--batch N] [--train-frac F]\n");
            return 2;
        }
        i += used;
    }
    if (!path || !(o.train_frac >= 0 && o.train_frac < 1) || !(o.cache_frac >= 0 && o.cache_frac <= 1) ||
        o.hidden <= 0 || o.nvme_gbs <= 0 || o.batch < 1) {
        fprintf(stderr, "bench_epsim: a trace, --train-frac in [0, 1), --cache-frac in [0, 1], positive "
                        "--hidden and --nvme-gbs and --batch >= 1 are needed\n");
        return 2;
    }
    trace t = {0};
    if (load(path, &t) < 0)
        return 1;
    for (int r = 0; r < o.n_ranks; r++)
        if (o.ranks[r] > t.n_expert) {
            fprintf(stderr, "bench_epsim: %d ranks for %d experts per layer\n", o.ranks[r], t.n_expert);
            return 2;
        }
    if (o.slot_bytes <= 0)
        o.slot_bytes = (double)t.slot_bytes;
    // MoE layers present in the trace, their token counts and training heat.
    const int E = t.n_expert, NB = t.n_blocks;
    int *ntok = calloc((size_t)NB, sizeof *ntok);
    uint64_t *heat = calloc((size_t)NB * (size_t)E, sizeof *heat);
    for (int i = 0; i < t.n; i++)
        ntok[t.e[i].layer]++;
    int *first = calloc((size_t)NB, sizeof *first);
    int n_moe = 0;
    for (int l = 0; l < NB; l++) {
        first[l] = (int)(ntok[l] * o.train_frac);
        n_moe += ntok[l] > 0;
    }
    if (!n_moe) {
        fprintf(stderr, "bench_epsim: %s has no routed tokens\n", path);
        return 1;
    }
    {
        int *seen = calloc((size_t)NB, sizeof *seen);
        for (int i = 0; i < t.n; i++) {
            const ev *e = &t.e[i];
            const int in_train = o.train_frac > 0 ? seen[e->layer] < first[e->layer] : 1;
            seen[e->layer]++;
            if (in_train)
                for (int k = 0; k < e->n; k++)
                    heat[(size_t)e->layer * E + e->ids[k]]++;
        }
        free(seen);
    }
    const int L = o.layers > 0 ? o.layers : n_moe;
    const double scale = (double)L / n_moe; // per-layer mean -> the model's layers
    const double vec = o.hidden * (o.dispatch_b + o.combine_b);
    printf("# trace %s: %d MoE layers, %d experts top-%d, %d tokens per layer; heat from the first %.0f%%\n", path,
           n_moe, E, t.n_used, t.n / n_moe, o.train_frac * 100);
    printf("# projected: %d MoE layers, hidden %.0f, %.0f+%.0f bytes/element, expert %.2f MB, NVMe %.1f GB/s, "
           "RAM cache %.0f%% of experts, all-to-all latency %.0f us, %d tokens per step\n",
           L, o.hidden, o.dispatch_b, o.combine_b, o.slot_bytes / 1e6, o.nvme_gbs, o.cache_frac * 100, o.latency_us,
           o.batch);
    // Local streaming baseline.
    double miss_tok = 0;
    for (int l = 0; l < NB; l++)
        if (ntok[l]) {
            int cap = (int)lround(o.cache_frac * E);
            miss_tok += cap > 0 ? lru_misses(&t, l, first[l], cap, o.batch) : (double)t.n_used / o.batch;
        }
    miss_tok *= scale;
    const double nvme_bytes = miss_tok * o.slot_bytes, t_nvme = nvme_bytes / (o.nvme_gbs * 1e9);
    printf("local NVMe streaming: %.2f expert misses/token, %.1f MB/token, %.2f ms/token of reads; "
           "EP latency floor %.2f ms/token\n",
           miss_tok, nvme_bytes / 1e6, t_nvme * 1e3, 2.0 * L * o.latency_us * 1e-3);
    // Per-layer table.
    printf("layer");
    for (int r = 0; r < o.n_ranks; r++)
        for (int p = 0; p < N_PL; p++)
            printf(" | R=%d %s MB", o.ranks[r], pl_name[p]);
    printf("\n");
    int *owner = malloc(sizeof *owner * (size_t)E);
    double tot[8][N_PL] = {{0}}, imb[8][N_PL] = {{0}};
    int rep[8];
    for (int r = 0; r < o.n_ranks; r++)
        rep[r] = o.replicate >= 0 ? o.replicate : (E + 4 * o.ranks[r] - 1) / (4 * o.ranks[r]);
    for (int l = 0; l < NB; l++) {
        if (!ntok[l])
            continue;
        printf("%5d", l);
        for (int r = 0; r < o.n_ranks; r++)
            for (int p = 0; p < N_PL; p++) {
                place(E, o.ranks[r], heat + (size_t)l * E, p, rep[r], owner);
                layer_stat s = sim_layer(&t, l, first[l], o.ranks[r], owner);
                const double mb = s.remote_ranks * vec / 1e6;
                tot[r][p] += mb;
                imb[r][p] += s.imbalance / n_moe;
                printf(" | %*.4f", (int)strlen(pl_name[p]) + 8, mb);
            }
        printf("\n");
    }
    const double lat_s = 2.0 * L * o.latency_us * 1e-6;
    double res_mb[8], res_gbps[8];
    int res_p[8];
    for (int r = 0; r < o.n_ranks; r++) {
        for (int p = 0; p < N_PL; p++) {
            const double mb = tot[r][p] * scale;
            const double gbps = t_nvme > lat_s ? mb * 1e6 * 8 / (t_nvme - lat_s) / 1e9 : INFINITY;
            // Network time per token at two common link speeds, for scale.
            const double ms10 = (mb * 8e6 / 10e9 + lat_s) * 1e3, ms100 = (mb * 8e6 / 100e9 + lat_s) * 1e3;
            printf("ranks=%d placement=%s: %.3f MB/token (%.4f MB per token per layer), compute imbalance "
                   "max/mean %.2f, %d experts per rank, network %.2f ms/token at 10 Gbit/s, %.2f at 100, "
                   "break-even %.3f Gbit/s\n",
                   o.ranks[r], pl_name[p], mb, mb / L, imb[r][p], (E + o.ranks[r] - 1) / o.ranks[r] + (p == PL_REP) * rep[r],
                   ms10, ms100, gbps);
            if (p == 0 || mb < res_mb[r]) {
                res_mb[r] = mb;
                res_gbps[r] = gbps;
                res_p[r] = p;
            }
        }
    }
    for (int r = 0; r < o.n_ranks; r++) {
        if (isinf(res_gbps[r]))
            printf("RESULT ranks=%d placement=%s bytes_per_token_mb=%.3f break_even_gbps=inf\n", o.ranks[r],
                   pl_name[res_p[r]], res_mb[r]);
        else
            printf("RESULT ranks=%d placement=%s bytes_per_token_mb=%.3f break_even_gbps=%.3f\n", o.ranks[r],
                   pl_name[res_p[r]], res_mb[r], res_gbps[r]);
    }
    free(owner);
    free(first);
    free(heat);
    free(ntok);
    free(t.e);
    return 0;
}

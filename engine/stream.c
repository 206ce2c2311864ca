// engine/stream.c — setting up expert streaming for a context: the RAM
// budget (what is left for experts once the trunk, KV cache and buffers are
// resident), the reader, the hot-store chosen from the usage file, and the
// usage file written back at close.
#include "engine/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/hotstore.h"
#include "cache/usage.h"
#include "common/util.h"

#define MiB (1024.0 * 1024.0)
#define GiB (1024.0 * 1024.0 * 1024.0)

// Memory limit of this process's cgroup (v1 memory controller or v2), or 0.
static uint64_t cgroup_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return 0;
    char line[1024], path[1100];
    uint64_t lim = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *p = strstr(line, ":memory:");
        const char *fmt = NULL;
        if (p) {
            p += 8;
            fmt = "/sys/fs/cgroup/memory%s/memory.limit_in_bytes";
        } else if (!strncmp(line, "0::", 3)) {
            p = line + 3;
            fmt = "/sys/fs/cgroup%s/memory.max";
        } else {
            continue;
        }
        snprintf(path, sizeof path, fmt, p);
        FILE *g = fopen(path, "r");
        unsigned long long v;
        if (g && fscanf(g, "%llu", &v) == 1 && v > 0 && (lim == 0 || v < lim))
            lim = v;
        if (g)
            fclose(g);
    }
    fclose(f);
    return lim;
}

// The default budget: MemAvailable (or the cgroup limit, if lower) less a
// safety margin of a tenth (at least 256 MiB).
static uint64_t default_budget(void)
{
    uint64_t avail = pt_mem_available();
    uint64_t cg = cgroup_limit();
    if (cg && cg < avail)
        avail = cg;
    uint64_t margin = avail / 10 > (256u << 20) ? avail / 10 : (256u << 20);
    return avail > margin ? avail - margin : avail / 2;
}

uint64_t pt_stream_default_budget(void) { return default_budget(); }

int pt_stream_check_trunk(const petrel_model *m, pt_err *err)
{
    uint64_t b = m->params.ram_budget, trunk_bytes = 0;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++)
        if (!strstr(m->gguf->tensors[i].name, "_exps."))
            trunk_bytes += pt_align_up(m->gguf->tensors[i].size, PT_ALIGN);
    if (b && trunk_bytes > b)
        return pt_errf(err,
                       "%s: the trunk alone needs %.2f GiB of RAM, more than the RAM budget of %.2f GiB "
                       "(--ram); Petrel keeps the trunk resident and streams only routed experts",
                       m->path, (double)trunk_bytes / GiB, (double)b / GiB);
    return 0;
}

static int alloc_buffers(petrel_context *c, pt_stream *st)
{
    const pt_hparams *hp = &c->model->hp;
    const uint32_t nb = pt_hp_n_blocks(hp);
    const size_t ne = (size_t)st->n_expert_max, B = c->n_batch, nu = hp->n_expert_used ? hp->n_expert_used : 1;
    st->heat = calloc(nb * ne, sizeof(uint64_t));
    st->heat_old = calloc(nb * ne, sizeof(uint64_t));
    st->sh_out = pt_alloc_aligned(B * hp->n_embd * sizeof(float));
    st->prows = B > PT_PAR_EXPERT_B ? (B < PT_PAR_BIG_B ? (int)B : PT_PAR_BIG_B) : PT_PAR_EXPERT_B;
    st->side_rows = st->prows;
    const char *sr = getenv("PETREL_PP_SIDE_ROWS"); // tests and A/B: fewer rows side by side
    if (sr && atoi(sr) >= 1 && atoi(sr) < st->side_rows)
        st->side_rows = atoi(sr);
    st->pscratch = pt_alloc_aligned((size_t)c->n_threads *
                                    ((size_t)st->prows * (hp->n_embd + 2 * hp->n_ff_exp) + 2 * (size_t)st->prows) *
                                    sizeof(float));
    st->ucount = calloc(ne, sizeof(int32_t));
    st->uniq = calloc(ne, sizeof(int32_t));
    st->ustate = calloc(ne, 1);
    st->utries = calloc(ne, 1);
    st->upos = malloc(ne * sizeof(int16_t));
    st->pxn = pt_alloc_aligned(B * hp->n_embd * sizeof(float));
    st->plogits = pt_alloc_aligned(B * ne * sizeof(float));
    st->pids = calloc(B * nu, sizeof(int32_t));
    st->pw = calloc(B * nu, sizeof(float));
    st->pred = calloc(nb * ne, 1);
    st->pfar = calloc(ne, 1);
    st->pwant = calloc(ne, 1);
    st->has_pred = calloc(nb, sizeof(bool));
    if (!st->heat || !st->heat_old || !st->sh_out || !st->pscratch || !st->uniq || !st->ustate || !st->utries || !st->upos ||
        !st->ucount ||
        !st->pxn || !st->plogits || !st->pids || !st->pw || !st->pred || !st->pfar || !st->pwant || !st->has_pred)
        return -1;
    for (size_t i = 0; i < ne; i++)
        st->upos[i] = -1;
    return 0;
}

int pt_stream_init(petrel_context *c, pt_err *err)
{
    petrel_model *m = c->model;
    const petrel_model_params *P = &m->params;
    const pt_hparams *hp = &m->hp;
    const int nb = (int)pt_hp_n_blocks(hp);
    pt_stream *st = calloc(1, sizeof *st);
    if (!st)
        return pt_errf(err, "out of memory");
    c->stream = st;
    int n_moe = 0;
    uint64_t total = 0, min_lru = 0;
    for (int il = 0; il < nb; il++) {
        const pt_ecache_layer_src *src = &m->exp_src[il];
        if (src->n_expert > st->n_expert_max)
            st->n_expert_max = src->n_expert;
        if (src->n_expert <= 0)
            continue;
        n_moe++;
        uint64_t sb = pt_ecache_slot_bytes_for(src);
        total += (uint64_t)src->n_expert * sb;
        min_lru += sb;
    }
    if (st->n_expert_max == 0)
        st->n_expert_max = 1;
    if (alloc_buffers(c, st) < 0)
        return pt_errf(err, "out of memory (expert streaming buffers)");
    st->prefetch = !P->no_prefetch;
    st->prefetch_depth = P->prefetch_depth > 0 ? P->prefetch_depth : 1;
    {
        const int nu = (int)hp->n_expert_used;
        st->prefetch_top = P->prefetch_top > 0 ? (P->prefetch_top < nu ? P->prefetch_top : nu) : (5 * nu + 7) / 8;
        // PETREL_PF_BOUND=0 | max (engine/stream_prefetch.c): keep the cache's
        // bar while disk-bound | hold it at its disk-bound height.
        const char *bound = getenv("PETREL_PF_BOUND");
        st->bound_bar = bound && bound[0] == '0' ? 0 : bound && !strcmp(bound, "max") ? 2 : 1;
        st->pf_min_base = -1;
        // PETREL_PREFETCH_FILL=N[:K] (engine/stream_prefetch.c): off unless set.
        const char *fill = getenv("PETREL_PREFETCH_FILL");
        if (fill && fill[0]) {
            char *end = NULL;
            st->fill_below = (int)strtol(fill, &end, 10);
            st->fill_top = end && *end == ':' ? (int)strtol(end + 1, NULL, 10) : st->prefetch_top;
            if (st->fill_below < 0)
                st->fill_below = 0;
            if (st->fill_top < 1 || st->fill_top > nu)
                st->fill_top = st->fill_top < 1 ? 1 : nu;
        }
    }

    // Routing heat from earlier sessions.
    bool have_heat = false;
    if (!P->no_usage) {
        if (P->usage_path && P->usage_path[0]) {
            st->usage_path = strdup(P->usage_path);
        } else if (!P->usage_path) {
            st->usage_path = malloc(strlen(m->path) + 8);
            if (st->usage_path)
                sprintf(st->usage_path, "%s.usage", m->path);
        }
        if (st->usage_path)
            have_heat = pt_usage_load(st->usage_path, nb, st->n_expert_max, st->heat_old) > 0;
    }

    // The reader: every file of the model (a split GGUF has several; the
    // experts' located offsets name theirs).
    const char *paths[64];
    const char **pv = m->gguf->n_parts <= 64 ? paths : malloc(sizeof(char *) * m->gguf->n_parts);
    if (!pv)
        return pt_errf(err, "out of memory");
    for (uint32_t i = 0; i < m->gguf->n_parts; i++)
        pv[i] = m->gguf->parts[i].path;
    pt_reader_cfg rc = {.paths = pv, .n_paths = (int)m->gguf->n_parts, .mode = (pt_io_mode)P->io_mode,
                        .queue_depth = P->io_queue_depth};
    st->reader = pt_reader_open(&rc, err);
    if (pv != paths)
        free(pv);
    if (!st->reader)
        return -1;

    // The budget: everything resident now (trunk, KV cache, scratch, code)
    // plus a reserve for what grows later (logits, rings, stacks) comes
    // first; experts get the rest.
    st->budget = P->ram_budget ? P->ram_budget : default_budget();
    const uint64_t rss = pt_rss_bytes();
    // What grows after this point: logits (and MTP logits) of a whole
    // batch at worst, I/O rings and thread stacks, the trace and usage buffers.
    const uint64_t reserve = (8u << 20) + 2 * (uint64_t)c->n_batch * hp->n_vocab * sizeof(float);
    uint64_t eb;
    if (P->experts_per_layer > 0) {
        eb = 0;
    } else {
        if (st->budget < rss + reserve + min_lru)
            return pt_errf(err,
                           "%s: the RAM budget of %.2f GiB is too small: trunk %.2f GiB, KV cache %.2f GiB "
                           "and buffers already hold %.2f GiB resident, and streaming needs at least "
                           "%.1f MiB more (one expert per MoE layer plus %.1f MiB of I/O reserve)",
                           m->path, (double)st->budget / GiB, (double)m->trunk_bytes / GiB,
                           (double)c->st.kv_bytes / GiB, (double)rss / GiB, (double)(min_lru + reserve) / MiB,
                           (double)reserve / MiB);
        eb = st->budget - rss - reserve;
        if (P->expert_cache && P->expert_cache < eb)
            eb = P->expert_cache;
        if (eb > total)
            eb = total;
        if (eb < min_lru)
            eb = min_lru;
    }

    // Hot-store: only of an explicit size (the heat seeds the eviction order instead).
    uint64_t pin = 0;
    if (!P->no_hot_store) {
        if (P->experts_per_layer <= 0) // (cache/hotstore.c: only when asked, less a reserve)
            pin = pt_hot_store_bytes(eb, P->pin_bytes, min_lru, n_moe, (int)hp->n_expert_used, st->prefetch_depth);
        else
            pin = P->pin_bytes;
    }
    int32_t *hot = NULL;
    int n_hot = 0;
    uint64_t hot_bytes = 0;
    if (pin > 0 && have_heat) {
        hot = malloc(sizeof(int32_t) * 2 * (size_t)nb * (size_t)st->n_expert_max);
        if (hot) {
            n_hot = pt_usage_pick_hot(st->heat_old, nb, st->n_expert_max, m->exp_src, pin, hot);
            for (int i = 0; i < n_hot; i++)
                hot_bytes += pt_ecache_slot_bytes_for(&m->exp_src[hot[2 * i]]);
        }
    }
    st->expert_budget = eb > hot_bytes ? eb - hot_bytes : 0;
    if (P->experts_per_layer <= 0 && st->expert_budget < min_lru)
        st->expert_budget = min_lru;
    pt_ecache_cfg ec = {
        .reader = st->reader, .path = m->path, .n_layers = nb, .layers = m->exp_src,
        .slots_per_layer = P->experts_per_layer, .budget_bytes = st->expert_budget, .hot = hot, .n_hot = n_hot,
        .heat = have_heat ? st->heat_old : NULL, .heat_stride = st->n_expert_max, .lru_only = P->cache_lru,
        .halflife = PT_EC_HALFLIFE, .n_used = (int)hp->n_expert_used,
    };
    c->ecache = pt_ecache_new(&ec, err);
    free(hot);
    if (!c->ecache)
        return -1;
    if (P->verbose)
        fprintf(stderr,
                "petrel: RAM budget %.2f GiB: %.2f GiB resident (trunk %.2f, KV %.2f), experts %.2f GiB LRU "
                "+ %.2f GiB hot-store (%d pinned), I/O %s%s%s, prefetch %s%s\n",
                (double)st->budget / GiB, (double)rss / GiB, (double)m->trunk_bytes / GiB,
                (double)c->st.kv_bytes / GiB, (double)st->expert_budget / GiB, (double)hot_bytes / GiB, n_hot,
                pt_io_mode_name(pt_reader_mode(st->reader)), pt_reader_direct(st->reader) ? " O_DIRECT" : "",
                pt_reader_registered(st->reader) ? " (registered buffers)" : "",
                st->prefetch ? "on" : "off", st->prefetch && st->fill_below > 0 ? " (+ fill)" : "");
    return 0;
}

void pt_stream_free(petrel_context *c)
{
    pt_stream *st = c->stream;
    if (!st)
        return;
    petrel_trace_close(c);
    pt_ecache_free(c->ecache); // waits for reads in flight before their slots go
    c->ecache = NULL;
    if (st->usage_path && st->heat) {
        const int nb = (int)pt_hp_n_blocks(&c->model->hp);
        uint64_t any = 0;
        for (size_t i = 0; i < (size_t)nb * (size_t)st->n_expert_max; i++)
            any |= st->heat[i];
        pt_err e;
        if (any && pt_usage_merge_save(st->usage_path, nb, st->n_expert_max, st->heat, &e) < 0 &&
            c->model->params.verbose)
            fprintf(stderr, "petrel: usage not recorded: %s\n", e.msg);
    }
    pt_reader_close(st->reader);
    free(st->usage_path);
    free(st->heat);
    free(st->heat_old);
    pt_free_aligned(st->sh_out);
    pt_free_aligned(st->pscratch);
    free(st->uniq);
    free(st->ustate);
    free(st->utries);
    free(st->upos);
    free(st->ucount);
    pt_free_aligned(st->pxn);
    pt_free_aligned(st->plogits);
    free(st->pids);
    free(st->pw);
    free(st->pred);
    free(st->pfar);
    free(st->pwant);
    free(st->has_pred);
    free(st);
    c->stream = NULL;
}

// ---- trace ------------------------------------------------------------------------

int petrel_trace_open(petrel_context *c, const char *path, char *errbuf, size_t errlen)
{
    pt_stream *st = c->stream;
    petrel_trace_close(c);
    st->trace = fopen(path, "w");
    if (!st->trace) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "%s: cannot create trace file", path);
        return -1;
    }
    const pt_hparams *hp = &c->model->hp;
    const int nb = (int)pt_hp_n_blocks(hp);
    uint64_t sb = 0;
    for (int il = 0; il < nb && !sb; il++)
        if (c->model->exp_src[il].n_expert > 0)
            sb = pt_ecache_slot_bytes_for(&c->model->exp_src[il]);
    // ("p_order best_first": each 'P' line lists a token's predictions best first)
    fprintf(st->trace, "petrel-trace 1 blocks %d experts %d used %u slot_bytes %llu p_order best_first prefetch_top %d\n",
            nb, st->n_expert_max, hp->n_expert_used, (unsigned long long)sb, st->prefetch_top);
    return 0;
}

void petrel_trace_close(petrel_context *c)
{
    pt_stream *st = c->stream;
    if (st && st->trace) {
        fclose(st->trace);
        st->trace = NULL;
    }
}

void pt_stream_trace(petrel_context *c, char kind, int il, int B, const int32_t *ids, int n_used)
{
    FILE *f = c->stream->trace;
    if (!f)
        return;
    for (int b = 0; b < B; b++) {
        fprintf(f, "%c %d %d", kind, il, c->s.pos[b]);
        for (int k = 0; k < n_used; k++)
            fprintf(f, " %d", ids[(size_t)b * n_used + k]);
        fputc('\n', f);
    }
}

int pt_stream_preload(petrel_context *c, pt_err *err)
{
    const petrel_model *m = c->model;
    const int nb = (int)pt_hp_n_blocks(&m->hp);
    for (int il = 0; il < nb; il++)
        for (int e = 0; e < m->exp_src[il].n_expert; e++) {
            const void *w[3];
            if (pt_ecache_acquire(c->ecache, il, e, w, err) < 0)
                return -1;
            pt_ecache_release(c->ecache, il, e);
        }
    return 0;
}

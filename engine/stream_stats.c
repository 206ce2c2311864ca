// engine/stream_stats.c — expert-streaming statistics through the API
// (petrel_stats fields, per-layer counters) and the --stats table.
#include <stdio.h>
#include <string.h>

#include "engine/stream.h"

// Fills the streaming fields of a petrel_stats (called by petrel_get_stats).
void pt_stream_fill_stats(const petrel_context *c, petrel_stats *out)
{
    const pt_stream *st = c->stream;
    if (!st || !c->ecache)
        return;
    const int nb = (int)pt_hp_n_blocks(&c->model->hp);
    out->expert_hits = out->expert_hits_hot = out->expert_hits_prefetch = out->expert_hits_lru = 0;
    out->expert_misses = out->bytes_read = 0;
    out->prefetch_predicted = out->prefetch_correct = out->prefetch_wasted_bytes = 0;
    out->prefetch_actual = out->prefetch_reads = 0;
    out->t_io_wait_s = 0;
    for (int il = 0; il < nb; il++) {
        const pt_ecache_layer_stats *l = pt_ecache_lstats(c->ecache, il);
        out->expert_hits_lru += l->hits_lru;
        out->expert_hits_hot += l->hits_hot;
        out->expert_hits_prefetch += l->hits_prefetch;
        out->expert_misses += l->misses;
        out->bytes_read += l->bytes_read;
        out->prefetch_predicted += l->predicted;
        out->prefetch_correct += l->predicted_correct;
        out->prefetch_actual += l->actual;
        out->prefetch_reads += l->prefetch_reads;
        out->prefetch_wasted_bytes += l->prefetch_wasted_bytes;
        out->t_io_wait_s += l->t_wait_s;
    }
    out->expert_hits = out->expert_hits_lru + out->expert_hits_hot + out->expert_hits_prefetch;
    out->expert_cache_bytes = pt_ecache_bytes(c->ecache);
    out->hot_store_bytes = pt_ecache_hot_bytes(c->ecache);
    out->ram_budget = st->budget;
    pt_reader_stats rs;
    pt_reader_get_stats(st->reader, &rs);
    out->t_io_busy_s = rs.busy_s - st->rbase.busy_s;
    out->io_mean_queue_depth = out->t_io_busy_s > 0 ? (rs.inflight_s - st->rbase.inflight_s) / out->t_io_busy_s : 0;
    out->io_mode = (int)pt_reader_mode(st->reader);
}

void pt_stream_reset_stats(petrel_context *c)
{
    if (c->ecache)
        pt_ecache_reset_stats(c->ecache);
    if (c->stream) {
        pt_reader_get_stats(c->stream->reader, &c->stream->rbase);
    }
}

int petrel_get_layer_stats(const petrel_context *c, int layer, petrel_layer_stats *out)
{
    memset(out, 0, sizeof *out);
    const int nb = (int)pt_hp_n_blocks(&c->model->hp);
    if (layer < 0 || layer >= nb || !c->ecache || c->model->exp_src[layer].n_expert <= 0)
        return -1;
    const pt_ecache_layer_stats *l = pt_ecache_lstats(c->ecache, layer);
    out->hits_lru = l->hits_lru;
    out->hits_hot = l->hits_hot;
    out->hits_prefetch = l->hits_prefetch;
    out->misses = l->misses;
    out->bytes_read = l->bytes_read;
    out->prefetch_reads = l->prefetch_reads;
    out->prefetch_wasted_bytes = l->prefetch_wasted_bytes;
    out->predicted = l->predicted;
    out->predicted_correct = l->predicted_correct;
    out->actual = l->actual;
    out->t_io_wait_s = l->t_wait_s;
    return 0;
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

void petrel_print_stream_stats(const petrel_context *c, void *file)
{
    FILE *f = file;
    const int nb = (int)pt_hp_n_blocks(&c->model->hp);
    fprintf(f, "%-6s %8s %7s %7s %7s %7s %9s %8s %8s %9s\n", "layer", "uses", "lru%", "hot%", "pref%", "miss%",
            "MB read", "recall%", "wasteMB", "stall s");
    for (int il = 0; il < nb; il++) {
        petrel_layer_stats l;
        if (petrel_get_layer_stats(c, il, &l) < 0)
            continue;
        uint64_t uses = l.hits_lru + l.hits_hot + l.hits_prefetch + l.misses;
        fprintf(f, "%-6d %8llu %7.1f %7.1f %7.1f %7.1f %9.1f %8.1f %8.1f %9.3f\n", il, (unsigned long long)uses,
                pct(l.hits_lru, uses), pct(l.hits_hot, uses), pct(l.hits_prefetch, uses), pct(l.misses, uses),
                (double)l.bytes_read / 1e6, pct(l.predicted_correct, l.actual),
                (double)l.prefetch_wasted_bytes / 1e6, l.t_io_wait_s);
    }
    petrel_stats s;
    petrel_get_stats(c, &s);
    const uint64_t uses = s.expert_hits + s.expert_misses;
    const double t_all = s.t_prompt_s + s.t_decode_s;
    fprintf(f,
            "total: %llu uses: LRU %.1f%%, hot-store %.1f%%, prefetched %.1f%%, missed %.1f%%; %.1f MB read "
            "(%.2f GB/s while reading, %s, %.1f requests in flight on average)\n",
            (unsigned long long)uses, pct(s.expert_hits_lru, uses), pct(s.expert_hits_hot, uses),
            pct(s.expert_hits_prefetch, uses), pct(s.expert_misses, uses), (double)s.bytes_read / 1e6,
            s.t_io_busy_s > 0 ? (double)s.bytes_read / 1e9 / s.t_io_busy_s : 0.0,
            pt_io_mode_name((pt_io_mode)s.io_mode), s.io_mean_queue_depth);
    fprintf(f,
            "time: %.2fs, stalled on I/O %.2fs (%.1f%%), computing %.2fs; prefetch recall %.1f%% "
            "(%llu reads, %.1f MB wasted)\n",
            t_all, s.t_io_wait_s, pct((uint64_t)(s.t_io_wait_s * 1e6), (uint64_t)(t_all * 1e6)),
            t_all - s.t_io_wait_s, pct(s.prefetch_correct, s.prefetch_actual), (unsigned long long)s.prefetch_reads,
            (double)s.prefetch_wasted_bytes / 1e6);
    fprintf(f, "memory: budget %.2f GiB, peak resident %.2f GiB, expert cache %.2f GiB (hot-store %.2f GiB)\n",
            (double)s.ram_budget / (1 << 30), (double)s.peak_rss_bytes / (1 << 30),
            (double)s.expert_cache_bytes / (1 << 30), (double)s.hot_store_bytes / (1 << 30));
}

// engine/stats.c — statistics gathering and the printed summary.
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/spec_policy.h"
#include "engine/stream.h"

void petrel_get_stats(const petrel_context *c, petrel_stats *out)
{
    *out = c->st;
    pt_ecache_stats es;
    pt_ecache_get_stats(c->ecache, &es);
    out->expert_hits = es.hits;
    out->expert_misses = es.misses;
    out->bytes_read = es.bytes_read;
    out->t_io_wait_s = es.t_read_s;
    out->rss_bytes = pt_rss_bytes();
    out->peak_rss_bytes = pt_peak_rss_bytes();
    out->trunk_bytes = c->model->trunk_bytes;
    out->expert_cache_bytes = pt_ecache_bytes(c->ecache);
    pt_stream_fill_stats(c, out); // tiers, prefetch, I/O time (engine/stream_stats.c)
    const pt_multi_stats *ms = &(c->expert_owner ? c->expert_owner : c)->mst; // shared by the cache's contexts
    out->multi_steps = ms->steps;
    out->multi_rows = ms->rows;
    out->multi_max_rows = ms->max_rows;
    out->multi_expert_uses = ms->expert_uses;
    out->multi_expert_visits = ms->expert_visits;
    out->multi_bytes_shared = ms->bytes_shared;
    out->t_multi_s = ms->t_s;
    out->t_attn_proj_s = c->prof.attn_proj;
    out->t_attn_s = c->t_attn_s - c->prof.attn_base;
    out->t_router_s = c->prof.router;
    out->t_shared_s = c->prof.shared;
    out->t_routed_s = c->prof.routed;
    out->t_combine_s = c->prof.combine;
    out->t_dense_s = c->prof.dense;
    out->t_head_s = c->prof.head;
}

void petrel_reset_stats(petrel_context *c)
{
    uint64_t kv = c->st.kv_bytes;
    memset(&c->st, 0, sizeof c->st);
    c->st.kv_bytes = kv;
    memset(&c->mst, 0, sizeof c->mst);
    memset(&c->prof, 0, sizeof c->prof);
    c->prof.attn_base = c->t_attn_s; // (c->t_attn_s itself keeps counting: pt_dsa_times)
    if (c->expert_owner) // (the shared cache's counters are reset too, below)
        memset(&c->expert_owner->mst, 0, sizeof c->expert_owner->mst);
    pt_stream_reset_stats(c);
}

void petrel_print_stats(const petrel_context *c, void *file)
{
    FILE *f = file;
    petrel_stats s;
    petrel_get_stats(c, &s);
    const uint64_t uses = s.expert_hits + s.expert_misses;
    const uint64_t toks = s.n_prompt_tokens + s.n_decode_tokens;
    fprintf(f, "prompt: %llu tokens in %.2fs (%.2f tok/s)\n", (unsigned long long)s.n_prompt_tokens,
            s.t_prompt_s, s.t_prompt_s > 0 ? (double)s.n_prompt_tokens / s.t_prompt_s : 0.0);
    fprintf(f, "generation: %llu tokens in %.2fs (%.2f tok/s)\n", (unsigned long long)s.n_decode_tokens,
            s.t_decode_s, s.t_decode_s > 0 ? (double)s.n_decode_tokens / s.t_decode_s : 0.0);
    fprintf(f, "experts: %llu uses, hit rate %.1f%% (hot %llu, prefetched %llu), %llu misses, "
               "%.1f MB read (%.2f MB/token), I/O wait %.2fs\n",
            (unsigned long long)uses, uses ? 100.0 * (double)s.expert_hits / (double)uses : 0.0,
            (unsigned long long)s.expert_hits_hot, (unsigned long long)s.expert_hits_prefetch,
            (unsigned long long)s.expert_misses, (double)s.bytes_read / 1e6,
            toks ? (double)s.bytes_read / 1e6 / (double)toks : 0.0, s.t_io_wait_s);
    fprintf(f, "memory: resident %.1f MB (peak %.1f MB): trunk %.1f MB, expert cache %.1f MB, KV cache %.1f MB\n",
            (double)s.rss_bytes / 1e6, (double)s.peak_rss_bytes / 1e6, (double)s.trunk_bytes / 1e6,
            (double)s.expert_cache_bytes / 1e6, (double)s.kv_bytes / 1e6);
    pt_spec_print_stats(&s, f); // engine/spec_stats.c
    if (s.prefill_chunks)
        fprintf(f, "prefill: chunk size %u (%s), %llu chunks (largest %llu tokens), %.1f experts visited per chunk, "
                   "%.2f tokens per expert visit, %llu experts read ahead\n",
                c->n_batch, c->n_batch_auto ? "from the RAM budget" : "given",
                (unsigned long long)s.prefill_chunks, (unsigned long long)s.prefill_chunk_max,
                (double)s.prefill_expert_visits / (double)s.prefill_chunks,
                s.prefill_expert_visits ? (double)s.prefill_expert_rows / (double)s.prefill_expert_visits : 0.0,
                (unsigned long long)s.prefill_ahead_reads);
    fprintf(f, "compute: attention products %.2fs, attention %.2fs, router %.2fs, shared experts %.2fs, routed "
               "experts %.2fs, combine %.2fs, dense FFN %.2fs, head %.2fs\n",
            s.t_attn_proj_s, s.t_attn_s, s.t_router_s, s.t_shared_s, s.t_routed_s, s.t_combine_s, s.t_dense_s,
            s.t_head_s);
    if (s.multi_steps)
        fprintf(f, "batched decode: %llu steps, %.2f contexts per step (max %llu), %.2f tok/s aggregate, expert "
                   "fetches %llu of %llu uses (%llu avoided, %.1f MB shared)\n",
                (unsigned long long)s.multi_steps, (double)s.multi_rows / (double)s.multi_steps,
                (unsigned long long)s.multi_max_rows, s.t_multi_s > 0 ? (double)s.multi_rows / s.t_multi_s : 0.0,
                (unsigned long long)s.multi_expert_visits, (unsigned long long)s.multi_expert_uses,
                (unsigned long long)(s.multi_expert_uses - s.multi_expert_visits), (double)s.multi_bytes_shared / 1e6);
}

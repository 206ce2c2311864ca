// bench/bench_stream.c — one streaming-decode measurement for
// bench/stream.sh: opens a model under a RAM budget, prefills a fixed
// prompt, decodes N tokens greedily, and prints one STREAM line with the
// decode-phase figures (statistics are reset after the prefill), plus the
// --stats table on stderr. --preload reads every expert first (the
// "everything resident" speed); --trace records the routing of prompt and
// decode (the prompt occupies positions 0..15: replay with --count-from 16).
// --warmup N decodes N tokens after the prompt before the timed ones (their
// figures not counted), as llama-bench's warm-up generation of one token
// (bench/quants.sh's resident comparison).
//
// usage: bench_stream -m MODEL [--ram SIZE] [--io MODE] [--pin SIZE] [--no-prefetch]
//                     [--no-hot] [--lru] [--usage FILE] [-n N] [-t THREADS] [--trace FILE] [--preload]
//                     [--warmup N]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/lib/bench_util.h"
#include "common/util.h"
#include "engine/context.h"
#include "engine/stream.h"
#include "io/reader.h"
#include "petrel.h"

int main(int argc, char **argv)
{
    petrel_model_params mp = petrel_model_default_params();
    const char *model = NULL, *trace = NULL;
    int n_gen = 64, do_preload = 0, n_warm = 0;
    mp.verbose = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v)
            model = argv[++i];
        else if (!strcmp(a, "--ram") && v)
            mp.ram_budget = (uint64_t)pt_parse_size(argv[++i]);
        else if (!strcmp(a, "--io") && v)
            mp.io_mode = pt_io_mode_parse(argv[++i]);
        else if (!strcmp(a, "--pin") && v)
            mp.pin_bytes = (uint64_t)pt_parse_size(argv[++i]);
        else if (!strcmp(a, "--no-prefetch"))
            mp.no_prefetch = true;
        else if (!strcmp(a, "--prefetch-depth") && v)
            mp.prefetch_depth = atoi(argv[++i]);
        else if (!strcmp(a, "--prefetch-top") && v)
            mp.prefetch_top = atoi(argv[++i]);
        else if (!strcmp(a, "--qd") && v)
            mp.io_queue_depth = atoi(argv[++i]);
        else if (!strcmp(a, "--no-hot"))
            mp.no_hot_store = true;
        else if (!strcmp(a, "--lru"))
            mp.cache_lru = true;
        else if (!strcmp(a, "--usage") && v)
            mp.usage_path = argv[++i];
        else if (!strcmp(a, "-n") && v)
            n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && v)
            mp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--trace") && v)
            trace = argv[++i];
        else if (!strcmp(a, "--preload"))
            do_preload = 1;
        else if (!strcmp(a, "--warmup") && v)
            n_warm = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_stream -m MODEL [--ram SIZE] [--io MODE] [--pin SIZE] [--no-prefetch] "
                            "[--no-hot] [--lru] [--usage FILE] [-n N] [-t THREADS] [--trace FILE] [--preload] [--warmup N]\n");
            return 2;
        }
    }
    if (!model || mp.io_mode < 0 || n_warm < 0 || n_warm > 64)
        return 2;
    char err[1024];
    petrel_model *m = petrel_model_open(model, &mp, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_stream: %s\n", err);
        return 1;
    }
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = 256 + (uint32_t)n_warm;
    cp.n_batch = 64;
    petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
    if (!c) {
        fprintf(stderr, "bench_stream: %s\n", err);
        return 1;
    }
    if (do_preload && bench_preload(c) < 0)
        return 1;
    // A fixed prompt of 16 tokens.
    const int V = petrel_model_n_vocab(m);
    petrel_token prompt[16];
    for (int i = 0; i < 16; i++)
        prompt[i] = (petrel_token)((1000 + 7919 * i) % V);
    if (trace && petrel_trace_open(c, trace, err, sizeof err) < 0) {
        fprintf(stderr, "bench_stream: %s\n", err);
        return 1;
    }
    if (petrel_decode(c, prompt, NULL, 16, PETREL_LOGITS_LAST) < 0) {
        fprintf(stderr, "bench_stream: %s\n", petrel_context_error(c));
        return 1;
    }
    petrel_sampler_params sp = petrel_sampler_default_params();
    petrel_sampler *smp = petrel_sampler_new(&sp, V);
    petrel_token tok = petrel_sampler_sample(smp, petrel_get_logits(c, 15), NULL, 0);
    for (int i = 0; i < n_warm; i++) {
        if (petrel_decode(c, &tok, NULL, 1, PETREL_LOGITS_LAST) < 0) {
            fprintf(stderr, "bench_stream: %s\n", petrel_context_error(c));
            return 1;
        }
        tok = petrel_sampler_sample(smp, petrel_get_logits(c, 0), NULL, 0);
    }
    petrel_reset_stats(c);
    double t0 = pt_now();
    for (int i = 0; i < n_gen; i++) {
        if (petrel_decode(c, &tok, NULL, 1, PETREL_LOGITS_LAST) < 0) {
            fprintf(stderr, "bench_stream: %s\n", petrel_context_error(c));
            return 1;
        }
        tok = petrel_sampler_sample(smp, petrel_get_logits(c, 0), NULL, 0);
    }
    double dt = pt_now() - t0;
    petrel_trace_close(c);
    petrel_stats s;
    petrel_get_stats(c, &s);
    petrel_print_stream_stats(c, stderr);
    const double uses = (double)(s.expert_hits + s.expert_misses);
    uint64_t slot_bytes = 0, slice_bytes = 0;
    int n_moe = 0;
    for (int il = 0; il < (int)pt_hp_n_blocks(&m->hp); il++)
        if (m->exp_src[il].n_expert > 0) {
            slot_bytes = pt_ecache_slot_bytes_for(&m->exp_src[il]);
            slice_bytes = m->exp_src[il].bytes[0];
            n_moe++;
        }
    printf("STREAM tok_s=%.4f hit_rate=%.4f hit_lru=%.4f hit_hot=%.4f hit_prefetch=%.4f gb_per_token=%.4f "
           "read_gbs=%.4f stall_s=%.3f compute_s=%.3f decode_s=%.3f peak_rss_gib=%.3f budget_gib=%.3f "
           "cache_bytes=%llu slot_bytes=%llu slice_bytes=%llu moe_blocks=%d recall=%.4f wasted_gb=%.4f io=%s qd=%.2f "
           "io_busy_frac=%.3f fills=%llu\n",
           n_gen / dt, uses ? (double)(s.expert_hits_lru + s.expert_hits_hot) / uses : 0,
           uses ? (double)s.expert_hits_lru / uses : 0, uses ? (double)s.expert_hits_hot / uses : 0,
           uses ? (double)s.expert_hits_prefetch / uses : 0, (double)s.bytes_read / 1e9 / n_gen,
           s.t_io_busy_s > 0 ? (double)s.bytes_read / 1e9 / s.t_io_busy_s : 0, s.t_io_wait_s, dt - s.t_io_wait_s,
           dt, (double)s.peak_rss_bytes / (1u << 30), (double)s.ram_budget / (1u << 30),
           (unsigned long long)s.expert_cache_bytes, (unsigned long long)slot_bytes, (unsigned long long)slice_bytes, n_moe,
           s.prefetch_actual ? (double)s.prefetch_correct / (double)s.prefetch_actual : 0,
           (double)s.prefetch_wasted_bytes / 1e9, pt_io_mode_name((pt_io_mode)s.io_mode),
           s.io_mean_queue_depth, dt > 0 ? s.t_io_busy_s / dt : 0, (unsigned long long)c->stream->fill_issued);
    petrel_sampler_free(smp);
    petrel_context_free(c);
    petrel_model_close(m);
    return 0;
}

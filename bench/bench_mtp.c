// bench/bench_mtp.c — speculative decoding measurements for bench/mtp.sh:
// decode speed without speculation (off), verifying every draft (always)
// and with the adaptive policy (engine/spec_policy.h), on one model under
// one memory setting, with the MTP layer's drafts or with a bench-only
// controlled-acceptance drafter.
//
// The controlled drafter (--p LIST): a reference run without speculation
// first gives the non-speculative continuation of each prompt; a later
// run's draft for position pos is that continuation's token with
// probability p (a fixed hash of pos, the prompt and the repetition, so
// every mode of one repetition sees the same drafts), else another token.
// Each repetition draws a new pattern: with one pattern for all of them
// (until 2026-12-07) the 32 positions of bench16's one prompt gave always
// 14 right drafts of 16 at p = 0.75 and 15 of 15 at p = 0.9, in every
// repetition, and the adaptive policy, which verifies other positions
// after a plain step, was judged against that luck rather than against p.
//
// Measurement under noise: the reference run (not counted) also warms the
// caches; a run keeps the KV cache of a prompt that the context already
// holds (reuse_prefix: one prompt, as on bench16, is prefilled once, which
// saves minutes under a memory cap; decode figures start after the
// prefill either way). Then every repetition runs one job per (drafter,
// mode) — the off job, which does not depend on the drafter, once per
// drafter when there are several (a block per drafter: its off, always and
// adaptive jobs) — interleaved prompt by prompt: for each prompt every job
// generates it, in an order shuffled afresh for each (repetition, prompt)
// (a fixed seed; blocks in a shuffled order, jobs shuffled within their
// block), so that drift of the machine's load or of the cache state falls
// on every mode alike, within seconds rather than a job's length. Without
// --fresh all jobs share one context, and so one expert cache and the
// adaptive policy's remembered step costs
// (engine/spec_policy.h), as a long-lived server would; with --fresh every
// job gets a new context at the start of each repetition, which then
// serves it for all the prompts: a cold expert cache and a policy that
// knows nothing yet.
//
// Prints one line per (drafter, mode): medians over the repetitions (off:
// over all its jobs) of decode-phase figures summed over the prompts, and
// the spread of tok/s:
//   MTP draft=mtp|p0.50 mode=off|always|adaptive tok_s=… tok_s_lo=… tok_s_hi=…
//     tok_s_cpu=… tok_s_cpu_lo=… tok_s_cpu_hi=…
//     runs=… accept=… verifs=… plain=… probes=… switches=… explore=…
//     mb_read_per_tok=… experts_per_tok=… mb_used_per_tok=… identical=1
//     [vs_off=… vs_off_cpu=… vs_always=… vs_always_cpu=…]
// and with --aa (one drafter) a line mode=off_aa: an A/A control, a second
// off job in every repetition, interleaved like the others and paired with
// the first: its vs_off is what identical work measures as, the
// resolution against which adaptive's vs_off (dormant: off's work) is
// judged.
// (lo / hi: the lowest and highest of the jobs; tok_s_cpu: tokens per
// second of the process's CPU time, all threads (CLOCK_PROCESS_CPUTIME_ID):
// what the work costs, where wall time also counts a loaded machine's
// preemptions, and I/O waits, so it means something only for resident
// runs; accept: accepted / verified drafts; mb_read: expert bytes read from
// the file; experts / mb_used: distinct experts computed per token and
// their bytes, read or not), and exits 3 if any run's tokens differ from
// the reference's. vs_off / vs_always (always and adaptive lines): the
// median over repetitions of this mode's tok/s over the same repetition's
// off job (of its block; without blocks all off jobs pooled) and always
// job: paired, so that load drifting between repetitions cancels.
//
// usage: bench_mtp -m MODEL [--ram SIZE] [--experts-per-layer N] [--usage FILE | --no-usage]
//                  [--preload] [--fresh] [-t T] [-n N] [--ids-file FILE] [--prompt-len L]
//                  [--prompts K] [--reps R] [--temp T] [--seed S] [--p LIST] [--modes LIST] [--aa]
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/stream.h"
#include "petrel.h"

#define MAX_P 16
#define MAX_REPS 31
#define MAX_PROMPTS 16
#define NSLOT 4 // figure slots per drafter: the three modes and the A/A control (--aa)

// Seconds of CPU time the process has used, all threads.
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Reads every expert into the cache (pt_stream_preload), saying why not.
static int preload(petrel_context *c)
{
    pt_err err;
    if (pt_stream_preload(c, &err) == 0)
        return 0;
    fprintf(stderr, "bench_mtp: preload: %s\n", err.msg);
    return -1;
}

// All integers in a text file (ids separated by anything else); malloc'ed.
static int read_ids(const char *path, petrel_token **out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = 0, cap = 4096;
    petrel_token *v = malloc(sizeof *v * (size_t)cap);
    int ch, cur = -1;
    while (v && (ch = fgetc(f)) != EOF) {
        if (ch >= '0' && ch <= '9') {
            cur = (cur < 0 ? 0 : cur * 10) + (ch - '0');
            continue;
        }
        if (cur >= 0) {
            if (n == cap) {
                cap *= 2;
                petrel_token *nv = realloc(v, sizeof *v * (size_t)cap);
                if (!nv) {
                    free(v);
                    v = NULL;
                    break;
                }
                v = nv;
            }
            v[n++] = cur;
            cur = -1;
        }
    }
    if (v && cur >= 0 && n < cap)
        v[n++] = cur;
    fclose(f);
    *out = v;
    return v ? n : -1;
}

typedef struct drafter {
    const petrel_token *ref; // (n_ref) the off run's continuation of this prompt
    int n_ref;
    int n_prompt;
    double p;
    uint32_t salt;
    int n_vocab;
} drafter;

static petrel_token controlled_draft(void *u, const petrel_token *toks, int n, int32_t pos)
{
    (void)toks;
    (void)n;
    const drafter *d = u;
    int k = pos - d->n_prompt;
    if (k < 0 || k >= d->n_ref)
        return 0;
    uint32_t h = ((uint32_t)pos * 2654435761u) ^ (d->salt * 40503u);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    bool right = (double)(h & 0xffffff) / 16777216.0 < d->p;
    return right ? d->ref[k] : (d->ref[k] + 1 + (petrel_token)(h >> 24)) % d->n_vocab;
}

// Decode-phase accounting: the first token's callback marks the end of the
// prefill.
typedef struct run_acc {
    petrel_context *c;
    petrel_token *toks; // (cap) tokens generated
    int n, cap;
    double t_first, cpu_first;
    pt_ecache_stats first;
} run_acc;

static int on_tok(void *u, petrel_token t)
{
    run_acc *a = u;
    if (a->n == 0) {
        a->t_first = pt_now();
        a->cpu_first = cpu_now();
        pt_ecache_get_stats(a->c->ecache, &a->first);
    }
    if (a->n < a->cap)
        a->toks[a->n] = t;
    a->n++;
    return 0;
}

typedef struct figures {
    double toks, secs, cpu_secs, bytes, uses;
    int drafted, accepted;
    uint64_t verifs, plain, probes, switches, explore;
} figures;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One prompt (index k) generated in one mode with one drafter (repetition
// rep's pattern of right drafts) on context c, its decode-phase figures
// added to *F (NULL: not counted). ref holds the reference tokens (n_gen
// per prompt); record: this run writes them.
// Returns 0, 1 if the tokens differ from ref, -1 on an error (said).
typedef struct job_cfg {
    const petrel_token *all;
    int stride, prompt_len, n_prompts, n_gen, n_vocab;
    double temp;
    uint64_t seed;
} job_cfg;

static int run_prompt(petrel_context *c, const job_cfg *J, int k, int rep, int mode, double p, petrel_token *ref,
                      bool record, petrel_token *got, figures *F)
{
    assert(k >= 0 && k < J->n_prompts);
    const petrel_token *prompt = J->all + (size_t)k * J->stride;
    drafter d = {.ref = ref + (size_t)k * J->n_gen, .n_ref = J->n_gen, .n_prompt = J->prompt_len, .p = p,
                 .salt = (uint32_t)k + 7919u * (uint32_t)rep, .n_vocab = J->n_vocab};
    petrel_sampler_params sp = petrel_sampler_default_params();
    sp.temperature = (float)J->temp;
    sp.seed = J->seed + (uint64_t)k;
    petrel_sampler *smp = J->temp > 0 ? petrel_sampler_new(&sp, J->n_vocab) : NULL;
    petrel_gen_params gp = {.n_predict = J->n_gen,
                            .ignore_eos = true,
                            .speculative = mode != PETREL_SPEC_OFF,
                            .spec_mode = mode,
                            .sampler = smp,
                            .draft_fn = p >= 0 ? controlled_draft : NULL,
                            .draft_user = &d,
                            .reuse_prefix = true};
    run_acc acc = {.c = c, .toks = got, .cap = J->n_gen};
    petrel_reset_stats(c);
    petrel_gen_result res;
    if (petrel_generate(c, prompt, J->prompt_len, &gp, on_tok, &acc, &res) < 0) {
        fprintf(stderr, "bench_mtp: %s\n", petrel_context_error(c));
        petrel_sampler_free(smp);
        return -1;
    }
    petrel_sampler_free(smp);
    const double t_end = pt_now(), cpu_end = cpu_now();
    int differ = 0;
    if (record)
        memcpy(ref + (size_t)k * J->n_gen, got, sizeof *got * (size_t)J->n_gen);
    else if (acc.n != J->n_gen || memcmp(ref + (size_t)k * J->n_gen, got, sizeof *got * (size_t)J->n_gen) != 0) {
        differ = 1;
        fprintf(stderr, "bench_mtp: prompt %d, mode %s, p %.2f: tokens differ from the reference's\n", k,
                petrel_spec_mode_name(mode), p);
    }
    if (!F)
        return differ;
    pt_ecache_stats es;
    pt_ecache_get_stats(c->ecache, &es);
    petrel_stats st;
    petrel_get_stats(c, &st);
    F->toks += acc.n - 1;
    F->secs += t_end - acc.t_first;
    F->cpu_secs += cpu_end - acc.cpu_first;
    F->bytes += (double)(es.bytes_read - acc.first.bytes_read);
    F->uses += (double)(es.hits + es.misses - acc.first.hits - acc.first.misses);
    F->drafted += res.n_drafted;
    F->accepted += res.n_accepted;
    F->verifs += st.spec_verify_steps;
    F->plain += st.spec_used ? st.spec_plain_steps : (uint64_t)(acc.n - 1);
    F->probes += st.spec_probes;
    F->switches += st.spec_switches;
    F->explore += st.spec_explore;
    return differ;
}

// Every prompt in one mode (the reference run and the single-job passes).
static int run_job(petrel_context *c, const job_cfg *J, int mode, double p, petrel_token *ref, bool record,
                   petrel_token *got, figures *F)
{
    int differ = 0;
    for (int k = 0; k < J->n_prompts; k++) {
        int rc = run_prompt(c, J, k, 0, mode, p, ref, record, got, F);
        if (rc < 0)
            return -1;
        differ |= rc;
    }
    return differ;
}

// A context for the model, preloaded when asked; NULL after saying why.
static petrel_context *new_ctx(petrel_model *m, const petrel_context_params *cp, int do_preload)
{
    char err[1024];
    petrel_context *c = petrel_context_new(m, cp, err, sizeof err);
    if (!c) {
        fprintf(stderr, "bench_mtp: %s\n", err);
        return NULL;
    }
    if (do_preload && preload(c) < 0) {
        petrel_context_free(c);
        return NULL;
    }
    return c;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

// Fisher-Yates over v[0..n).
static void shuffle(int *v, int n, uint64_t *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(lcg(rng) % (uint64_t)(i + 1)), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

int main(int argc, char **argv)
{
    petrel_model_params mp = petrel_model_default_params();
    const char *model = NULL, *ids_file = NULL, *plist = NULL, *mlist = "off,always,adaptive";
    int n_gen = 64, do_preload = 0, fresh = 0, prompt_len = 64, n_prompts = 1, reps = 3, aa = 0;
    double temp = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v)
            model = argv[++i];
        else if (!strcmp(a, "--ram") && v)
            mp.ram_budget = (uint64_t)pt_parse_size(argv[++i]);
        else if (!strcmp(a, "--experts-per-layer") && v)
            mp.experts_per_layer = atoi(argv[++i]);
        else if (!strcmp(a, "--usage") && v)
            mp.usage_path = argv[++i];
        else if (!strcmp(a, "--no-usage"))
            mp.no_usage = true;
        else if (!strcmp(a, "--preload"))
            do_preload = 1;
        else if (!strcmp(a, "--fresh"))
            fresh = 1;
        else if (!strcmp(a, "--aa"))
            aa = 1;
        else if (!strcmp(a, "-t") && v)
            mp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "-n") && v)
            n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "--ids-file") && v)
            ids_file = argv[++i];
        else if (!strcmp(a, "--prompt-len") && v)
            prompt_len = atoi(argv[++i]);
        else if (!strcmp(a, "--prompts") && v)
            n_prompts = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && v)
            reps = atoi(argv[++i]);
        else if (!strcmp(a, "--temp") && v)
            temp = atof(argv[++i]);
        else if (!strcmp(a, "--seed") && v)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--p") && v)
            plist = argv[++i];
        else if (!strcmp(a, "--modes") && v)
            mlist = argv[++i];
        else {
            fprintf(stderr, "usage: bench_mtp -m MODEL [--ram SIZE] [--experts-per-layer N] [--usage FILE | "
                            "--no-usage] [--preload] [--fresh] [-t T] [-n N] [--ids-file FILE] [--prompt-len L] "
                            "[--prompts K] [--reps R] [--temp T] [--seed S] [--p LIST] [--modes LIST] [--aa]\n");
            return 2;
        }
    }
    if (!model || n_gen < 2 || prompt_len < 2 || n_prompts < 1 || n_prompts > MAX_PROMPTS || reps < 1 ||
        reps > MAX_REPS) {
        fprintf(stderr, "bench_mtp: need -m MODEL, -n >= 2, --prompt-len >= 2, 1..%d prompts, 1..%d reps\n",
                MAX_PROMPTS, MAX_REPS);
        return 2;
    }
    // Drafters: -1 = the MTP layer, else the controlled ones.
    double ps[MAX_P];
    int n_p = 0;
    if (plist) {
        for (const char *s = plist; *s && n_p < MAX_P;) {
            char *end;
            ps[n_p++] = strtod(s, &end);
            if (end == s || ps[n_p - 1] < 0 || ps[n_p - 1] > 1) {
                fprintf(stderr, "bench_mtp: --p '%s': expected probabilities in [0, 1], comma-separated\n", plist);
                return 2;
            }
            s = *end == ',' ? end + 1 : end;
        }
    } else {
        ps[n_p++] = -1;
    }
    int modes[3], n_modes = 0;
    for (const char *s = mlist; *s && n_modes < 3;) {
        char name[16];
        size_t k = strcspn(s, ",");
        snprintf(name, sizeof name, "%.*s", (int)(k < 15 ? k : 15), s);
        modes[n_modes] = petrel_spec_mode_parse(name);
        if (modes[n_modes] < 0) {
            fprintf(stderr, "bench_mtp: --modes '%s': expected off, always, adaptive\n", mlist);
            return 2;
        }
        n_modes++;
        s += k + (s[k] == ',');
    }
    bool have_off = false;
    for (int mi = 0; mi < n_modes; mi++)
        have_off |= modes[mi] == PETREL_SPEC_OFF;
    if (aa && (!have_off || n_p > 1)) {
        fprintf(stderr, "bench_mtp: --aa needs the off mode in --modes and one drafter\n");
        return 2;
    }
// The mode of slot mi: the A/A control (mi == n_modes) is an off job.
#define MODE_OF(mi) ((mi) < n_modes ? modes[mi] : PETREL_SPEC_OFF)

    char err[1024];
    petrel_model *m = petrel_model_open(model, &mp, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_mtp: %s\n", err);
        return 1;
    }
    const int V = petrel_model_n_vocab(m);
    if (ps[0] < 0 && !petrel_model_has_mtp(m)) {
        fprintf(stderr, "bench_mtp: %s has no MTP layer: use --p for controlled drafts\n", model);
        return 1;
    }
    // Prompts: spread over the ids file, or synthetic.
    petrel_token *all = NULL;
    int n_all = 0;
    if (ids_file) {
        n_all = read_ids(ids_file, &all);
        if (n_all < prompt_len) {
            fprintf(stderr, "bench_mtp: %s: %d ids, fewer than --prompt-len %d\n", ids_file, n_all, prompt_len);
            return 1;
        }
        for (int i = 0; i < n_all; i++)
            if (all[i] >= V) {
                fprintf(stderr, "bench_mtp: %s: id %d at index %d is past the vocabulary (%d)\n", ids_file, all[i], i,
                        V);
                return 1;
            }
    } else {
        n_all = prompt_len * n_prompts;
        all = malloc(sizeof *all * (size_t)n_all);
        for (int i = 0; i < n_all; i++)
            all[i] = (petrel_token)((1000u + 7919u * (uint32_t)i) % (uint32_t)V);
    }
    const job_cfg J = {.all = all,
                       .stride = n_prompts > 1 ? (n_all - prompt_len) / (n_prompts - 1) : 0,
                       .prompt_len = prompt_len,
                       .n_prompts = n_prompts,
                       .n_gen = n_gen,
                       .n_vocab = V,
                       .temp = temp,
                       .seed = seed};

    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = (uint32_t)(prompt_len + n_gen + 8);
    cp.n_batch = 64;
    petrel_context *c = new_ctx(m, &cp, do_preload);
    if (!c)
        return 1;

    petrel_token *ref = calloc((size_t)n_prompts * (size_t)n_gen, sizeof *ref); // reference tokens per prompt
    petrel_token *got = malloc(sizeof *got * (size_t)n_gen);
    // The reference run: tokens without speculation, and the caches warm.
    if (run_job(c, &J, PETREL_SPEC_OFF, -1, ref, true, got, NULL) < 0)
        return 1;

    // Jobs of one repetition: (drafter, mode) pairs, off once (once per
    // drafter with blocks: at most 3 * MAX_P jobs). With several drafters and an off mode the jobs run in blocks, one
    // per drafter: its always and adaptive jobs and an off job of their
    // own, in a shuffled order, the blocks in a shuffled order too; each
    // job is then paired with the off and always jobs of its block, run
    // within ~3 jobs of it. Before 2026-12-07 the 14 jobs of a repetition
    // (two off) ran in one shuffled order and were paired across it: under
    // the 3 GiB cap, where a job's speed follows the disk's (1.4-1.9 GB/s,
    // drifting within a minute), dormant adaptive jobs, which do exactly
    // what off does, came out 5-25% off their repetition's off jobs.
    typedef struct job {
        int pi, mi; // drafter (0 for off: its figures do not depend on it), mode
        int blk;    // block (blocked: the drafter, for off the block it serves)
    } job;
    job jobs[3 * MAX_P + 3];
    int n_jobs = 0, n_off_jobs = 0;
    bool blocked = false;
    for (int mi = 0; mi < n_modes; mi++)
        blocked |= modes[mi] == PETREL_SPEC_OFF && n_p > 1;
    for (int mi = 0; mi < n_modes; mi++) {
        if (modes[mi] == PETREL_SPEC_OFF) {
            n_off_jobs = blocked ? n_p : 1;
            for (int r = 0; r < n_off_jobs; r++)
                jobs[n_jobs++] = (job){0, mi, r};
            continue;
        }
        for (int pi = 0; pi < n_p; pi++)
            jobs[n_jobs++] = (job){pi, mi, pi};
    }
    if (aa) // a second off job, paired with the first like the others
        jobs[n_jobs++] = (job){0, n_modes, 0};
    // figures per (drafter, mode, sample): sample = rep, or rep * n_off_jobs + j for off
    const int max_samples = MAX_P * MAX_REPS;
    figures *fig = calloc((size_t)n_p * NSLOT * (size_t)max_samples, sizeof *fig);
    int *n_samples = calloc((size_t)n_p * NSLOT, sizeof *n_samples);
    int identical = 1;
    uint64_t rng = 0x5eedULL;
    // With --fresh, each job's context of this repetition (the shared one otherwise).
    petrel_context *jc[3 * MAX_P + 3] = {0};
    for (int rep = 0; rep < reps; rep++) {
        figures *F[3 * MAX_P + 3]; // this repetition's figures of jobs[ji]
        for (int ji = 0; ji < n_jobs; ji++) {
            const int slot = jobs[ji].pi * NSLOT + jobs[ji].mi;
            F[ji] = &fig[slot * max_samples + n_samples[slot]++];
            if (fresh) {
                petrel_context_free(jc[ji]);
                if (!(jc[ji] = new_ctx(m, &cp, do_preload)))
                    return 1;
            }
        }
        for (int k = 0; k < n_prompts; k++) {
            // the run order: blocks shuffled, jobs shuffled within each
            // (unblocked: one block of every job)
            int order[3 * MAX_P + 3], n_order = 0;
            int border[MAX_P];
            const int n_blk = blocked ? n_p : 1;
            for (int b = 0; b < n_blk; b++)
                border[b] = b;
            shuffle(border, n_blk, &rng);
            for (int bi = 0; bi < n_blk; bi++) {
                const int first = n_order;
                for (int ji = 0; ji < n_jobs; ji++)
                    if (!blocked || jobs[ji].blk == border[bi])
                        order[n_order++] = ji;
                shuffle(order + first, n_order - first, &rng);
            }
            assert(n_order == n_jobs);
            for (int oi = 0; oi < n_jobs; oi++) {
                const int ji = order[oi], pi = jobs[ji].pi, mode = MODE_OF(jobs[ji].mi);
                int rc = run_prompt(fresh ? jc[ji] : c, &J, k, rep, mode, mode == PETREL_SPEC_OFF ? -1 : ps[pi], ref,
                                    false, got, F[ji]);
                if (rc < 0)
                    return 1;
                if (rc > 0)
                    identical = 0;
            }
        }
    }

    // Bytes of one expert (the first MoE block's slot), for mb_used.
    double expert_bytes = 0;
    for (int il = 0; il < (int)pt_hp_n_blocks(&m->hp) && expert_bytes == 0; il++)
        if (m->exp_src[il].n_expert > 0)
            expert_bytes = (double)pt_ecache_slot_bytes_for(&m->exp_src[il]);
    for (int pi = 0; pi < n_p; pi++)
        for (int mi = 0; mi < n_modes + aa; mi++) {
            // off (and the A/A job) was measured for drafter 0 only: it does not depend on the drafter
            if (mi == n_modes && pi > 0)
                continue;
            const int slot = (MODE_OF(mi) == PETREL_SPEC_OFF ? 0 : pi) * NSLOT + mi;
            const int ns = n_samples[slot];
            double v[9][MAX_P * MAX_REPS];
            for (int r = 0; r < ns; r++) {
                const figures *F = &fig[slot * max_samples + r];
                v[0][r] = F->secs > 0 ? F->toks / F->secs : 0;
                v[1][r] = F->drafted ? (double)F->accepted / F->drafted : 0;
                v[2][r] = F->toks > 0 ? F->bytes / 1e6 / F->toks : 0;
                v[3][r] = F->toks > 0 ? F->uses / F->toks : 0;
                v[4][r] = (double)F->verifs;
                v[5][r] = (double)F->plain;
                v[6][r] = (double)F->probes;
                v[7][r] = (double)F->explore;
                v[8][r] = F->cpu_secs > 0 ? F->toks / F->cpu_secs : 0;
            }
            char dname[16];
            if (ps[pi] < 0)
                snprintf(dname, sizeof dname, "mtp");
            else
                snprintf(dname, sizeof dname, "p%.2f", ps[pi]);
            double sw = 0, lo = v[0][0], hi = v[0][0], clo = v[8][0], chi = v[8][0];
            for (int r = 0; r < ns; r++) {
                sw += (double)fig[slot * max_samples + r].switches;
                lo = v[0][r] < lo ? v[0][r] : lo;
                hi = v[0][r] > hi ? v[0][r] : hi;
                clo = v[8][r] < clo ? v[8][r] : clo;
                chi = v[8][r] > chi ? v[8][r] : chi;
            }
            double upt = median(v[3], ns);
            // Paired figures: per repetition, this job's tok/s over the
            // same repetition's off (blocked: its block's) and always jobs,
            // the median over repetitions: load that drifts between
            // repetitions cancels (each repetition's jobs ran within
            // seconds of each other, interleaved).
            char paired[160] = "";
            if (MODE_OF(mi) != PETREL_SPEC_OFF || mi == n_modes) {
                double ro[MAX_REPS], ra[MAX_REPS], roc[MAX_REPS], rac[MAX_REPS];
                int no = 0, na = 0;
                for (int r = 0; r < ns && r < reps; r++) {
                    const figures *F = &fig[slot * max_samples + r];
                    double ot = 0, os = 0, oc = 0;
                    const int j0 = blocked ? pi : 0, j1 = blocked ? pi + 1 : n_off_jobs; // (blocked: its block's)
                    for (int oi = 0; oi < n_modes; oi++)
                        if (modes[oi] == PETREL_SPEC_OFF)
                            for (int j = j0; j < j1; j++) {
                                const figures *O = &fig[oi * max_samples + r * n_off_jobs + j];
                                ot += O->toks, os += O->secs, oc += O->cpu_secs;
                            }
                    if (ot > 0 && os > 0 && oc > 0 && F->secs > 0 && F->cpu_secs > 0) {
                        ro[no] = (F->toks / F->secs) / (ot / os);
                        roc[no++] = (F->toks / F->cpu_secs) / (ot / oc);
                    }
                    for (int ai = 0; ai < n_modes; ai++)
                        if (modes[ai] == PETREL_SPEC_ALWAYS && ai != mi) {
                            const figures *A = &fig[(pi * NSLOT + ai) * max_samples + r];
                            if (A->secs > 0 && A->cpu_secs > 0 && F->secs > 0 && F->cpu_secs > 0) {
                                ra[na] = (F->toks / F->secs) / (A->toks / A->secs);
                                rac[na++] = (F->toks / F->cpu_secs) / (A->toks / A->cpu_secs);
                            }
                        }
                }
                int len = 0;
                if (no)
                    len += snprintf(paired + len, sizeof paired - (size_t)len, " vs_off=%.4f vs_off_cpu=%.4f",
                                    median(ro, no), median(roc, no));
                if (na)
                    snprintf(paired + len, sizeof paired - (size_t)len, " vs_always=%.4f vs_always_cpu=%.4f",
                             median(ra, na), median(rac, na));
            }
            printf("MTP draft=%s mode=%s tok_s=%.3f tok_s_lo=%.3f tok_s_hi=%.3f tok_s_cpu=%.3f tok_s_cpu_lo=%.3f "
                   "tok_s_cpu_hi=%.3f runs=%d accept=%.4f verifs=%.0f plain=%.0f probes=%.0f switches=%.1f "
                   "explore=%.0f mb_read_per_tok=%.3f experts_per_tok=%.2f mb_used_per_tok=%.3f identical=%d%s\n",
                   dname, mi == n_modes ? "off_aa" : petrel_spec_mode_name(modes[mi]), median(v[0], ns), lo, hi, median(v[8], ns), clo, chi, ns,
                   median(v[1], ns),
                   median(v[4], ns), median(v[5], ns), median(v[6], ns), sw / ns, median(v[7], ns),
                   median(v[2], ns), upt, upt * expert_bytes / 1e6, identical, paired);
        }
    petrel_print_stats(c, stderr);
    for (int ji = 0; ji < n_jobs; ji++)
        petrel_context_free(jc[ji]);
    free(fig);
    free(n_samples);
    free(ref);
    free(got);
    free(all);
    petrel_context_free(c);
    petrel_model_close(m);
    return identical ? 0 : 3;
}

// bench/bench_quality.c — quantisation quality of converted models.
//
// Two modes:
//   bench_quality GOLDEN_DIR MODEL.gguf
//       against the reference golden logits of tiny-dsv3 (caseK_*.bin):
//       argmax=<fraction> kl_mean=<nats> kl_max=<nats> positions=<n>
//   bench_quality --ref REF.gguf --ids IDS [--ctx N] [--max-tokens N] [--threads N] [--flips] MODEL.gguf...
//       teacher-forced on a token sequence (IDS: a file of token ids, any
//       separators, e.g. `petrel tokenize` output), cut into windows of N
//       tokens (default: the model's training context), each decoded as one
//       batch with every position's logits. Per MODEL, against REF (the f32
//       conversion): one line
//       model=<path> top1=<agreement> kl_mean=<nats> kl_max=<nats> ppl=<ppl> ref_ppl=<ppl> positions=<n>
//             top1_clear=<agreement> clear_positions=<n> top1_se=<se> route_diff=<fraction>
//             flips=<n> flips_route=<n> flips_route_prefix=<n>
//       top1: the argmax equals REF's (ties broken alike: the lowest id, as
//       llama-perplexity's "Same top p"); top1_se: its binomial standard
//       error sqrt(p (1 - p) / n) (positions of a window are not independent:
//       a guide, not a bound); KL(REF || MODEL) per position;
//       top1_clear: the same over the clear_positions where REF's top-1
//       leads its second choice by more than 0.1 nats (log-probability);
//       perplexity of the next token over positions that have one.
//       Routing against REF (the routed experts each MoE block selects):
//       route_diff=<fraction of positions whose own selection differs from
//       REF's in some block> flips=<positions whose top-1 differs>
//       flips_route=<of them, with a differing selection at that position>
//       flips_route_prefix=<... at that or an earlier position of the window,
//       which reaches it through attention>.
//       --flips: one line per flipped position on stderr (REF's margin, the
//       model's choice, whether its routing differed).
#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "petrel.h"

static void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    void *p = malloc((size_t)len + 1);
    if (fread(p, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
    ((char *)p)[len] = 0;
    *n = (size_t)len;
    return p;
}

// log-softmax of v (n) into out.
static void log_softmax(const float *v, double *out, int n)
{
    double mx = v[0];
    for (int i = 1; i < n; i++)
        mx = v[i] > mx ? v[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp(v[i] - mx);
    double ls = log(s) + mx;
    for (int i = 0; i < n; i++)
        out[i] = v[i] - ls;
}

static int argmax(const double *v, int n)
{
    int a = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[a])
            a = i;
    return a;
}

// The largest entry of v (n) other than v[skip].
static double second_of(const double *v, int n, int skip)
{
    double s = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != skip && v[i] > s)
            s = v[i];
    return s;
}

// KL(p || q) of two log-distributions over n entries.
static double kl_div(const double *lp, const double *lq, int n)
{
    double kl = 0;
    for (int i = 0; i < n; i++)
        kl += exp(lp[i]) * (lp[i] - lq[i]);
    return kl;
}

static int golden_mode(const char *dir, const char *model)
{
    char err[1024];
    petrel_model *m = petrel_model_open(model, NULL, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const int nv = petrel_model_n_vocab(m);
    double *lp = malloc(sizeof(double) * (size_t)nv), *lq = malloc(sizeof(double) * (size_t)nv);
    int agree = 0, total = 0;
    double kl_sum = 0, kl_max = 0;
    for (int k = 0;; k++) {
        char path[2048];
        size_t nb;
        snprintf(path, sizeof path, "%s/case%d_tokens.i32.bin", dir, k);
        int32_t *tok = read_all(path, &nb);
        if (!tok)
            break;
        int n = (int)(nb / 4);
        snprintf(path, sizeof path, "%s/case%d_logits.f32.bin", dir, k);
        float *g = read_all(path, &nb);
        if (!g || nb != (size_t)n * nv * 4) {
            fprintf(stderr, "%s: missing or wrong size\n", path);
            return 1;
        }
        petrel_context_params cp = petrel_context_default_params();
        cp.n_batch = (uint32_t)n;
        petrel_context *c = petrel_context_new(m, &cp, err, sizeof err);
        if (!c || petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL) != 0) {
            fprintf(stderr, "decode failed: %s\n", c ? petrel_context_error(c) : err);
            return 1;
        }
        for (int t = 0; t < n; t++) {
            log_softmax(g + (size_t)t * nv, lp, nv);
            log_softmax(petrel_get_logits(c, t), lq, nv);
            double kl = kl_div(lp, lq, nv);
            kl_sum += kl;
            kl_max = kl > kl_max ? kl : kl_max;
            agree += argmax(lp, nv) == argmax(lq, nv);
            total++;
        }
        petrel_context_free(c);
        free(tok);
        free(g);
    }
    printf("argmax=%.4f kl_mean=%.6f kl_max=%.6f positions=%d\n", total ? (double)agree / total : 0,
           total ? kl_sum / total : 0, kl_max, total);
    free(lp);
    free(lq);
    petrel_model_close(m);
    return total ? 0 : 1;
}

// Every integer in the file at path, in order (any separators): *n of them,
// malloc'ed; NULL + message when the file cannot be read or holds none.
static int32_t *read_ids(const char *path, int *n)
{
    size_t len;
    char *txt = read_all(path, &len);
    if (!txt) {
        fprintf(stderr, "bench_quality: %s: cannot read\n", path);
        return NULL;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (len / 2 + 1));
    int k = 0;
    for (char *p = txt; *p;) {
        if (!isdigit((unsigned char)*p)) {
            p++;
            continue;
        }
        ids[k++] = (int32_t)strtol(p, &p, 10);
    }
    free(txt);
    if (k == 0) {
        fprintf(stderr, "bench_quality: %s: no token ids\n", path);
        free(ids);
        return NULL;
    }
    *n = k;
    return ids;
}

// Routed experts selected in one window: sel[(layer * ctx + pos) * QR_K + i],
// n[layer * ctx + pos] of them (ascending ids, as the observer gets them).
#define QR_LAYERS 64
#define QR_K 16
typedef struct qroutes {
    int ctx;
    int32_t *sel; // [QR_LAYERS][ctx][QR_K]
    int8_t *n;    // [QR_LAYERS][ctx]; 0: the block did not route that position
} qroutes;

static void qroutes_init(qroutes *r, int ctx)
{
    r->ctx = ctx;
    r->sel = calloc((size_t)QR_LAYERS * (size_t)ctx * QR_K, sizeof(int32_t));
    r->n = calloc((size_t)QR_LAYERS * (size_t)ctx, 1);
    assert(r->sel && r->n);
}

static void qroutes_observe(void *user, int layer, int32_t pos, const int32_t *experts, const float *weights, int n)
{
    (void)weights;
    qroutes *r = user;
    if (layer < 0 || layer >= QR_LAYERS || pos < 0 || pos >= r->ctx || n > QR_K)
        return;
    const size_t at = (size_t)layer * (size_t)r->ctx + (size_t)pos;
    r->n[at] = (int8_t)n;
    memcpy(r->sel + at * QR_K, experts, sizeof(int32_t) * (size_t)n);
}

// True when position pos was routed differently by a and b in some block.
static bool qroutes_differ(const qroutes *a, const qroutes *b, int pos)
{
    assert(a->ctx == b->ctx && pos >= 0 && pos < a->ctx);
    for (int l = 0; l < QR_LAYERS; l++) {
        const size_t at = (size_t)l * (size_t)a->ctx + (size_t)pos;
        if (a->n[at] != b->n[at] || memcmp(a->sel + at * QR_K, b->sel + at * QR_K, sizeof(int32_t) * (size_t)a->n[at]))
            return true;
    }
    return false;
}

static void qroutes_clear(qroutes *r)
{
    memset(r->n, 0, (size_t)QR_LAYERS * (size_t)r->ctx);
}

// Accumulated comparison of one model with the reference.
typedef struct qacc {
    const char *path;
    petrel_model *m;
    petrel_context *c;
    long agree, positions, nll_n;
    long clear, clear_agree; // positions where REF's top-1 leads its top-2 by > 0.1 nats; of them agreeing
    double kl_sum, kl_max, nll; // nll: -sum log q(next token)
    long route_diff, flips, flips_route, flips_route_prefix;
    qroutes routes;
} qacc;

// Decodes window tok[0..n) in ctx as one batch (all logits) after clearing its cache.
static int decode_window(petrel_context *c, const int32_t *tok, int n, const char *path)
{
    petrel_kv_truncate(c, 0);
    if (petrel_decode(c, tok, NULL, n, PETREL_LOGITS_ALL) != 0) {
        fprintf(stderr, "bench_quality: %s: decode failed: %s\n", path, petrel_context_error(c));
        return -1;
    }
    return 0;
}

static int ref_mode(int argc, char **argv)
{
    const char *ref = NULL, *ids_path = NULL;
    int ctx = 0, max_tokens = 0, threads = 0;
    bool show_flips = false;
    const char *models[64];
    int n_models = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ref") && i + 1 < argc)
            ref = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
            ids_path = argv[++i];
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc)
            ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-tokens") && i + 1 < argc)
            max_tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--flips"))
            show_flips = true;
        else if (argv[i][0] != '-' && n_models < 64)
            models[n_models++] = argv[i];
        else {
            fprintf(stderr, "bench_quality: unknown or incomplete option %s\n", argv[i]);
            return 2;
        }
    }
    if (!ref || !ids_path || n_models == 0) {
        fprintf(stderr, "usage: bench_quality --ref REF.gguf --ids IDS [--ctx N] [--max-tokens N] [--threads N] [--flips] MODEL.gguf...\n");
        return 2;
    }
    int n_ids;
    int32_t *ids = read_ids(ids_path, &n_ids);
    if (!ids)
        return 1;
    if (max_tokens > 0 && n_ids > max_tokens)
        n_ids = max_tokens;
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.no_usage = true;
    mp.n_threads = threads;
    petrel_model *rm = petrel_model_open(ref, &mp, err, sizeof err);
    if (!rm) {
        fprintf(stderr, "bench_quality: %s\n", err);
        return 1;
    }
    const int nv = petrel_model_n_vocab(rm);
    if (ctx <= 0)
        ctx = petrel_model_n_ctx_train(rm);
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= nv) {
            fprintf(stderr, "bench_quality: %s: token id %d (entry %d) is outside the vocabulary of %d\n", ids_path,
                    ids[i], i, nv);
            return 1;
        }
    petrel_context_params cp = petrel_context_default_params();
    cp.n_ctx = (uint32_t)ctx;
    cp.n_batch = (uint32_t)ctx;
    petrel_context *rc = petrel_context_new(rm, &cp, err, sizeof err);
    if (!rc) {
        fprintf(stderr, "bench_quality: %s: %s\n", ref, err);
        return 1;
    }
    qroutes ref_routes;
    qroutes_init(&ref_routes, ctx);
    petrel_set_route_observer(rc, qroutes_observe, &ref_routes);
    qacc *q = calloc((size_t)n_models, sizeof *q);
    for (int j = 0; j < n_models; j++) {
        q[j].path = models[j];
        q[j].m = petrel_model_open(models[j], &mp, err, sizeof err);
        if (!q[j].m || petrel_model_n_vocab(q[j].m) != nv) {
            fprintf(stderr, "bench_quality: %s: %s\n", models[j], q[j].m ? "vocabulary differs from the reference" : err);
            return 1;
        }
        q[j].c = petrel_context_new(q[j].m, &cp, err, sizeof err);
        if (!q[j].c) {
            fprintf(stderr, "bench_quality: %s: %s\n", models[j], err);
            return 1;
        }
        qroutes_init(&q[j].routes, ctx);
        petrel_set_route_observer(q[j].c, qroutes_observe, &q[j].routes);
    }
    double *lp = malloc(sizeof(double) * (size_t)nv * (size_t)ctx), *lq = malloc(sizeof(double) * (size_t)nv);
    double ref_nll = 0;
    long ref_n = 0;
    for (int w0 = 0; w0 < n_ids; w0 += ctx) {
        const int n = n_ids - w0 < ctx ? n_ids - w0 : ctx;
        qroutes_clear(&ref_routes);
        if (decode_window(rc, ids + w0, n, ref) < 0)
            return 1;
        for (int t = 0; t < n; t++) {
            log_softmax(petrel_get_logits(rc, t), lp + (size_t)t * nv, nv);
            if (t + 1 < n) {
                ref_nll -= lp[(size_t)t * nv + ids[w0 + t + 1]];
                ref_n++;
            }
        }
        for (int j = 0; j < n_models; j++) {
            qroutes_clear(&q[j].routes);
            if (decode_window(q[j].c, ids + w0, n, q[j].path) < 0)
                return 1;
            bool prefix_differs = false;
            for (int t = 0; t < n; t++) {
                const bool differs = qroutes_differ(&ref_routes, &q[j].routes, t);
                prefix_differs |= differs;
                q[j].route_diff += differs;
                const double *p = lp + (size_t)t * nv;
                log_softmax(petrel_get_logits(q[j].c, t), lq, nv);
                const double kl = kl_div(p, lq, nv);
                q[j].kl_sum += kl;
                q[j].kl_max = kl > q[j].kl_max ? kl : q[j].kl_max;
                const int ap = argmax(p, nv);
                const bool same = ap == argmax(lq, nv);
                q[j].agree += same;
                q[j].flips += !same;
                q[j].flips_route += !same && differs;
                q[j].flips_route_prefix += !same && prefix_differs;
                if (!same && show_flips) {
                    const int aq = argmax(lq, nv);
                    fprintf(stderr,
                            "flip model=%s pos=%d ref_top1=%d ref_top2_margin=%.5f model_top1=%d ref_lp_of_model_top1=%.5f "
                            "model_margin=%.5f route_differs=%d prefix_differs=%d\n",
                            q[j].path, w0 + t, ap, p[ap] - second_of(p, nv, ap), aq, p[aq] - p[ap], lq[aq] - lq[ap],
                            differs, prefix_differs);
                }
                if (p[ap] - second_of(p, nv, ap) > 0.1) {
                    q[j].clear++;
                    q[j].clear_agree += same;
                }
                q[j].positions++;
                if (t + 1 < n) {
                    q[j].nll -= lq[ids[w0 + t + 1]];
                    q[j].nll_n++;
                }
            }
        }
    }
    for (int j = 0; j < n_models; j++) {
        assert(q[j].positions > 0);
        const double top1 = (double)q[j].agree / (double)q[j].positions;
        printf("model=%s top1=%.4f kl_mean=%.6f kl_max=%.6f ppl=%.4f ref_ppl=%.4f positions=%ld top1_clear=%.4f "
               "clear_positions=%ld top1_se=%.4f route_diff=%.4f flips=%ld flips_route=%ld flips_route_prefix=%ld\n",
               q[j].path, top1, q[j].kl_sum / (double)q[j].positions, q[j].kl_max,
               exp(q[j].nll / (double)(q[j].nll_n ? q[j].nll_n : 1)), exp(ref_nll / (double)(ref_n ? ref_n : 1)),
               q[j].positions, q[j].clear ? (double)q[j].clear_agree / (double)q[j].clear : 0, q[j].clear,
               sqrt(top1 * (1 - top1) / (double)q[j].positions), (double)q[j].route_diff / (double)q[j].positions, q[j].flips, q[j].flips_route, q[j].flips_route_prefix);
        petrel_context_free(q[j].c);
        free(q[j].routes.sel);
        free(q[j].routes.n);
        petrel_model_close(q[j].m);
    }
    free(q);
    free(lp);
    free(lq);
    free(ids);
    free(ref_routes.sel);
    free(ref_routes.n);
    petrel_context_free(rc);
    petrel_model_close(rm);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && argv[1][0] != '-')
        return golden_mode(argv[1], argv[2]);
    return ref_mode(argc, argv);
}

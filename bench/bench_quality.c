// bench/bench_quality.c — quantisation quality against the reference
// golden logits of tiny-dsv3: argmax agreement and per-position KL
// divergence KL(golden || model) for a converted model.
//
// usage: bench_quality GOLDEN_DIR MODEL.gguf  -> prints one line
//   argmax=<fraction> kl_mean=<nats> kl_max=<nats> positions=<n>
#include <math.h>
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
    void *p = malloc((size_t)len);
    if (fread(p, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
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

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s GOLDEN_DIR MODEL.gguf\n", argv[0]);
        return 2;
    }
    char err[1024];
    petrel_model *m = petrel_model_open(argv[2], NULL, err, sizeof err);
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
        snprintf(path, sizeof path, "%s/case%d_tokens.i32.bin", argv[1], k);
        int32_t *tok = read_all(path, &nb);
        if (!tok)
            break;
        int n = (int)(nb / 4);
        snprintf(path, sizeof path, "%s/case%d_logits.f32.bin", argv[1], k);
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
            const float *q = petrel_get_logits(c, t);
            const float *p = g + (size_t)t * nv;
            log_softmax(p, lp, nv);
            log_softmax(q, lq, nv);
            double kl = 0;
            int ap = 0, aq = 0;
            for (int i = 0; i < nv; i++) {
                kl += exp(lp[i]) * (lp[i] - lq[i]);
                if (p[i] > p[ap])
                    ap = i;
                if (q[i] > q[aq])
                    aq = i;
            }
            kl_sum += kl;
            kl_max = kl > kl_max ? kl : kl_max;
            agree += ap == aq;
            total++;
        }
        petrel_context_free(c);
        free(tok);
        free(g);
    }
    printf("argmax=%.4f kl_mean=%.6f kl_max=%.6f positions=%d\n", total ? (double)agree / total : 0,
           total ? kl_sum / total : 0, kl_max, total);
    petrel_model_close(m);
    return total ? 0 : 1;
}

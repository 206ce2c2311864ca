// engine/sampler.c — the sampler chain: penalties, then greedy or
// temperature -> top-k -> top-p -> min-p -> a seeded draw.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "petrel.h"

struct petrel_sampler {
    petrel_sampler_params p;
    int32_t n_vocab;
    uint64_t rng;          // splitmix64 state
    float *work;           // (n_vocab) penalised logits
    int32_t *idx;          // (n_vocab) candidate ids
    int32_t *count;        // (n_vocab) occurrences in the history window
};

petrel_sampler_params petrel_sampler_default_params(void)
{
    petrel_sampler_params p = {
        .temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f,
        .repeat_last_n = 64, .frequency_penalty = 0.0f, .presence_penalty = 0.0f, .seed = 0,
    };
    return p;
}

petrel_sampler *petrel_sampler_new(const petrel_sampler_params *p, int32_t n_vocab)
{
    petrel_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->p = p ? *p : petrel_sampler_default_params();
    s->n_vocab = n_vocab;
    s->rng = s->p.seed;
    s->work = malloc(sizeof(float) * (size_t)n_vocab);
    s->idx = malloc(sizeof(int32_t) * (size_t)n_vocab);
    s->count = calloc((size_t)n_vocab, sizeof(int32_t));
    if (!s->work || !s->idx || !s->count) {
        petrel_sampler_free(s);
        return NULL;
    }
    return s;
}

void petrel_sampler_free(petrel_sampler *s)
{
    if (!s)
        return;
    free(s->work);
    free(s->idx);
    free(s->count);
    free(s);
}

void petrel_sampler_reset(petrel_sampler *s, uint64_t seed)
{
    s->rng = seed;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const float *g_sort_logits;
static int by_logit_desc(const void *a, const void *b)
{
    float x = g_sort_logits[*(const int32_t *)a], y = g_sort_logits[*(const int32_t *)b];
    if (x != y)
        return x < y ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

petrel_token petrel_sampler_sample(petrel_sampler *s, const float *logits, const petrel_token *history,
                                   int n_history)
{
    const int32_t nv = s->n_vocab;
    float *w = s->work;
    memcpy(w, logits, sizeof(float) * (size_t)nv);

    // Penalties over the recent history (repeat: last n; OpenAI: all of it).
    const petrel_sampler_params *p = &s->p;
    if (history && n_history > 0 &&
        (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f)) {
        int from = 0;
        if (p->repeat_penalty != 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f &&
            p->repeat_last_n > 0 && n_history > p->repeat_last_n)
            from = n_history - p->repeat_last_n;
        for (int i = from; i < n_history; i++)
            if (history[i] >= 0 && history[i] < nv)
                s->count[history[i]]++;
        for (int i = from; i < n_history; i++) {
            int32_t t = history[i];
            if (t < 0 || t >= nv || s->count[t] == 0)
                continue;
            float v = w[t];
            if (p->repeat_penalty != 1.0f)
                v = v > 0 ? v / p->repeat_penalty : v * p->repeat_penalty;
            v -= (float)s->count[t] * p->frequency_penalty + p->presence_penalty;
            w[t] = v;
            s->count[t] = 0; // apply once per distinct token
        }
    }

    if (p->temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < nv; i++)
            if (w[i] > w[best])
                best = i;
        return best;
    }

    int32_t n = nv;
    for (int32_t i = 0; i < nv; i++)
        s->idx[i] = i;
    g_sort_logits = w;
    qsort(s->idx, (size_t)nv, sizeof(int32_t), by_logit_desc);
    if (p->top_k > 0 && p->top_k < n)
        n = p->top_k;
    // Softmax over the candidates with temperature.
    const float mx = w[s->idx[0]];
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        float e = expf((w[s->idx[i]] - mx) / p->temperature);
        w[s->idx[i]] = e; // reuse as probability mass
        sum += e;
    }
    if (p->top_p < 1.0f) {
        double acc = 0;
        for (int32_t i = 0; i < n; i++) {
            acc += w[s->idx[i]] / sum;
            if (acc >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        const float thr = w[s->idx[0]] * p->min_p;
        int32_t k = 1;
        while (k < n && w[s->idx[k]] >= thr)
            k++;
        n = k;
    }
    double total = 0;
    for (int32_t i = 0; i < n; i++)
        total += w[s->idx[i]];
    double r = (double)(splitmix64(&s->rng) >> 11) * (1.0 / 9007199254740992.0) * total;
    double acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += w[s->idx[i]];
        if (r < acc)
            return s->idx[i];
    }
    return s->idx[n - 1];
}

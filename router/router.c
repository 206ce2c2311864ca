#include "router/router.h"

#include <assert.h>
#include <math.h>
#include <string.h>

// Index of the largest value among v[0..n) not yet taken; lower index wins ties.
static int argmax_free(const float *v, const unsigned char *taken, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (taken[i])
            continue;
        if (best < 0 || v[i] > v[best])
            best = i;
    }
    return best;
}

void pt_route(const pt_router_cfg *cfg, const float *logits, const float *bias, int32_t *ids,
              float *weights, float *scratch)
{
    const int n = cfg->n_expert;
    assert(n > 0 && cfg->n_used > 0 && cfg->n_used <= n);
    assert(cfg->n_group >= 1 && n % cfg->n_group == 0);
    float *scores = scratch;       // (n) unbiased
    float *sel = scratch + n;      // (n) biased, -inf where masked

    if (cfg->gating == 1) {
        float mx = logits[0];
        for (int i = 1; i < n; i++)
            mx = logits[i] > mx ? logits[i] : mx;
        float sum = 0;
        for (int i = 0; i < n; i++) {
            scores[i] = expf(logits[i] - mx);
            sum += scores[i];
        }
        for (int i = 0; i < n; i++)
            scores[i] /= sum;
    } else {
        for (int i = 0; i < n; i++)
            scores[i] = 1.0f / (1.0f + expf(-logits[i]));
    }
    for (int i = 0; i < n; i++)
        sel[i] = bias ? scores[i] + bias[i] : scores[i];

    unsigned char taken[1024];
    assert(n <= 1024);
    if (cfg->n_group > 1 && cfg->topk_group < cfg->n_group) {
        const int gs = n / cfg->n_group;
        float gscore[256];
        assert(cfg->n_group <= 256);
        for (int g = 0; g < cfg->n_group; g++) {
            const float *v = sel + g * gs;
            if (bias) { // sum of the top-2 biased scores
                float a = -INFINITY, b = -INFINITY;
                for (int i = 0; i < gs; i++) {
                    if (v[i] > a) {
                        b = a;
                        a = v[i];
                    } else if (v[i] > b) {
                        b = v[i];
                    }
                }
                gscore[g] = gs > 1 ? a + b : a;
            } else { // max
                float a = -INFINITY;
                for (int i = 0; i < gs; i++)
                    a = v[i] > a ? v[i] : a;
                gscore[g] = a;
            }
        }
        unsigned char gkeep[256];
        memset(taken, 0, (size_t)cfg->n_group);
        memset(gkeep, 0, sizeof gkeep);
        for (int k = 0; k < cfg->topk_group; k++) {
            int g = argmax_free(gscore, taken, cfg->n_group);
            taken[g] = 1;
            gkeep[g] = 1;
        }
        for (int g = 0; g < cfg->n_group; g++)
            if (!gkeep[g])
                for (int i = 0; i < gs; i++)
                    sel[g * gs + i] = -INFINITY;
    }

    memset(taken, 0, (size_t)n);
    for (int k = 0; k < cfg->n_used; k++) {
        int e = argmax_free(sel, taken, n);
        taken[e] = 1;
    }
    int k = 0;
    for (int e = 0; e < n; e++)
        if (taken[e])
            ids[k++] = e;
    assert(k == cfg->n_used);

    // Weights from unbiased scores; the sum is taken in ascending-id order.
    float sum = 0;
    for (int i = 0; i < k; i++) {
        weights[i] = scores[ids[i]];
        sum += weights[i];
    }
    for (int i = 0; i < k; i++) {
        if (cfg->norm)
            weights[i] /= sum;
        weights[i] *= cfg->scale;
    }
}

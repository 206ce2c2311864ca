#include "router/router.h"
#include "kernels/ops.h"

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

    if (cfg->gating == 1) { // ggml_soft_max, as llama.cpp (kernels/ops.h)
        memcpy(scores, logits, sizeof(float) * (size_t)n);
        pt_softmax(scores, n);
    } else { // ggml's sigmoid: 1 / (1 + expf(-x)) with libm's expf
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

    // The chosen experts in selection order (best first), which is the
    // order llama.cpp sums their weights in.
    int32_t order[1024];
    memset(taken, 0, (size_t)n);
    for (int k = 0; k < cfg->n_used; k++) {
        int e = argmax_free(sel, taken, n);
        taken[e] = 1;
        order[k] = e;
    }
    int k = 0;
    for (int e = 0; e < n; e++)
        if (taken[e])
            ids[k++] = e;
    assert(k == cfg->n_used);

    // Weights from unbiased scores, as llama.cpp's build_moe_ffn: the sum
    // (ggml_sum_rows: double, in selection order) clamped at 2^-14, each
    // weight divided by it, then times the scale.
    double dsum = 0;
    for (int i = 0; i < k; i++)
        dsum += (double)scores[order[i]];
    float sum = (float)dsum;
    sum = sum > 0x1p-14f ? sum : 0x1p-14f;
    for (int i = 0; i < k; i++) {
        weights[i] = scores[ids[i]];
        if (cfg->norm)
            weights[i] /= sum;
        if (cfg->scale != 1.0f)
            weights[i] *= cfg->scale;
    }
}

// Puts the n_used slots of ids (ascending) in selection order: descending
// selection score (the biased one pt_route chose by), lower id first on a
// tie, as pt_route picked them. sel: the scores pt_route leaves in
// scratch + n_expert.
void pt_route_order(const float *sel, const int32_t *ids, int n_used, int *slot)
{
    for (int i = 0; i < n_used; i++)
        slot[i] = i;
    for (int i = 1; i < n_used; i++)
        for (int j = i; j > 0; j--) {
            const float a = sel[ids[slot[j - 1]]], b = sel[ids[slot[j]]];
            if (!(b > a))
                break;
            const int t = slot[j];
            slot[j] = slot[j - 1];
            slot[j - 1] = t;
        }
}

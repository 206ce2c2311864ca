// router/router.h — DeepSeek-V3 expert selection (noaux_tc).
//
// scores = sigmoid(logits) (or softmax when gating == 1); selection uses
// scores + bias; with n_group > 1 a group's score is the sum of its top-2
// biased scores, the best topk_group groups are kept, and the top n_used
// experts among them are chosen. Weights are the unbiased scores of the
// chosen experts, normalised to sum 1 when norm, times scale.
#ifndef PETREL_ROUTER_ROUTER_H
#define PETREL_ROUTER_ROUTER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pt_router_cfg {
    int n_expert;        // routed experts
    int n_used;          // experts per token
    int n_group;         // 1 = no group limit
    int topk_group;      // groups kept
    int gating;          // 1 softmax, 2 sigmoid
    bool norm;           // normalise selected weights
    float scale;         // routed_scaling_factor
} pt_router_cfg;

// logits (n_expert) -> ids (n_used) sorted ascending, weights (n_used) in the
// same order. bias (n_expert) may be NULL. scratch: 2 * n_expert floats.
// Ties break towards the lower expert id (as torch.topk on CPU does for
// equal values in practice), so the choice is deterministic.
void pt_route(const pt_router_cfg *cfg, const float *logits, const float *bias, int32_t *ids,
              float *weights, float *scratch);
// slot (n_used) = the slots of ids in selection order (best first, as
// pt_route picked them), from the selection scores pt_route leaves in
// scratch + n_expert: llama.cpp adds the experts' outputs in that order.
void pt_route_order(const float *sel, const int32_t *ids, int n_used, int *slot);

#endif

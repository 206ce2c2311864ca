// engine/dsa.h — DeepSeek Sparse Attention (DSA): the lightning indexer that
// chooses, for every query, the index_topk keys its MLA attention sees
// (GLM-5 / GLM-5.1 / GLM-5.2, DeepSeek-V3.2). docs/architecture.md, "DSA".
#ifndef PETREL_ENGINE_DSA_H
#define PETREL_ENGINE_DSA_H

#include <stdbool.h>
#include <stdint.h>

#include "petrel.h"

// Observer of the selections: block `layer`, query position `pos`, the n
// kept key positions in ascending order. Called for every block whose
// attention is sparse in the batch (a shared block reports the set it
// reuses), while the batch is computed.
typedef void (*pt_dsa_observer_fn)(void *user, int layer, int32_t pos, const int32_t *keys, int n);
void pt_dsa_set_observer(petrel_context *c, pt_dsa_observer_fn fn, void *user);

// Turns the indexer off (dense MLA over every cached key, as a model without
// DSA) or back on. The indexer key cache is still written while off, so a
// context can switch at any position. The environment variable PETREL_DSA=off
// sets it at context creation (benchmarks, comparisons).
void pt_dsa_set_enabled(petrel_context *c, bool on);

// Seconds spent in the indexer (scoring and selection) and in the rest of
// attention since the context was made (bench/longctx.sh).
void pt_dsa_times(const petrel_context *c, double *t_index_s, double *t_attn_s);

// Block il's indexer on the batch (s->xn, s->qa normed, positions s->pos):
// writes the batch's keys into c->ik[il] at their positions, then for each
// query b at position p keeps the min(index_topk, p+1) best keys of 0..p:
// s->nsel[b] = -1 when that is every key (dense), else the count, with the
// positions ascending in s->sel[b * sel_stride ...]. Ties: lower position first.
// With the indexer off only the keys are written (c->sel_valid false).
void pt_dsa_index(petrel_context *c, int il, int B);

// Reports the batch's selections of block il to the observer, if any.
void pt_dsa_report(petrel_context *c, int il, int B);

#endif

// engine/moe.c — the FFN sub-block: SwiGLU FFNs and the MoE (router,
// routed experts through the expert cache, shared experts). Routed outputs
// are combined in the router's selection order (ascending expert id), so the
// order in which experts become available never changes a bit.
#include <string.h>

#include "engine/context.h"
#include "kernels/ops.h"
#include "router/router.h"

// SwiGLU FFN with matrices gate/up (n_ff, n_embd), down (n_embd, n_ff):
// X (B, n_embd) -> Y (B, n_embd).
void pt_ffn(petrel_context *c, const pt_mat *gate, const pt_mat *up, const pt_mat *down,
                const float *X, int B, float *Y)
{
    pt_scratch *s = &c->s;
    const int64_t nff = gate->rows;
    pt_gemm(gate, X, B, s->ff_a);
    pt_gemm(up, X, B, s->ff_b);
    pt_swiglu(s->ff_a, s->ff_a, s->ff_b, nff * B);
    pt_gemm(down, s->ff_a, B, Y);
}

// Routed experts + shared experts: s->xn -> s->tmp.
int pt_moe(petrel_context *c, int il, int B)
{
    const petrel_model *m = c->model;
    const pt_hparams *hp = &m->hp;
    const pt_layer *L = &m->layers[il];
    pt_scratch *s = &c->s;
    const int n_used = (int)hp->n_expert_used, n_embd = (int)hp->n_embd;
    const pt_router_cfg rc = {
        .n_expert = (int)hp->n_expert, .n_used = n_used, .n_group = (int)hp->n_group,
        .topk_group = (int)hp->topk_group, .gating = (int)hp->gating, .norm = hp->norm_topk,
        .scale = hp->routed_scale,
    };

    pt_gemm(&L->gate_inp, s->xn, B, s->rlogits);
    for (int b = 0; b < B; b++)
        pt_route(&rc, s->rlogits + (size_t)b * hp->n_expert, L->exp_bias, s->rids + (size_t)b * n_used,
                 s->rw + (size_t)b * n_used, s->rscratch);
    if (c->route_fn)
        for (int b = 0; b < B; b++)
            c->route_fn(c->route_user, il, s->pos[b], s->rids + (size_t)b * n_used, s->rw + (size_t)b * n_used,
                        n_used);

    // Each distinct expert of the batch is fetched once (batch union) and
    // applied to all tokens that chose it; experts go in ascending id order.
    for (int e = 0; e < (int)hp->n_expert; e++) {
        int ng = 0;
        for (int b = 0; b < B; b++)
            for (int k = 0; k < n_used; k++)
                if (s->rids[(size_t)b * n_used + k] == e) {
                    memcpy(s->gx + (size_t)ng * n_embd, s->xn + (size_t)b * n_embd,
                           sizeof(float) * (size_t)n_embd);
                    s->gsel[ng] = b;
                    s->gk[ng] = k;
                    ng++;
                }
        if (ng == 0)
            continue;
        const void *w[3];
        if (pt_ecache_acquire(c->ecache, il, e, w, &c->err) < 0)
            return -1;
        pt_mat g = {w[0], L->exps_type[0], hp->n_ff_exp, hp->n_embd};
        pt_mat u = {w[1], L->exps_type[1], hp->n_ff_exp, hp->n_embd};
        pt_mat d = {w[2], L->exps_type[2], hp->n_embd, hp->n_ff_exp};
        pt_ffn(c, &g, &u, &d, s->gx, ng, s->gx);
        pt_ecache_release(c->ecache, il, e);
        for (int r = 0; r < ng; r++)
            memcpy(s->eo + ((size_t)s->gsel[r] * n_used + s->gk[r]) * n_embd, s->gx + (size_t)r * n_embd,
                   sizeof(float) * (size_t)n_embd);
    }

    // Shared experts (always), into ff scratch-free buffer: reuse s->gx.
    if (hp->n_expert_shared > 0)
        pt_ffn(c, &L->sh_gate, &L->sh_up, &L->sh_down, s->xn, B, s->gx);
    for (int b = 0; b < B; b++) {
        float *y = s->tmp + (size_t)b * n_embd;
        memset(y, 0, sizeof(float) * (size_t)n_embd);
        for (int k = 0; k < n_used; k++)
            pt_axpy(y, s->rw[(size_t)b * n_used + k], s->eo + ((size_t)b * n_used + k) * n_embd, n_embd);
        if (hp->n_expert_shared > 0) {
            const float *z = s->gx + (size_t)b * n_embd;
            for (int i = 0; i < n_embd; i++)
                y[i] += z[i];
        }
    }
    return 0;
}


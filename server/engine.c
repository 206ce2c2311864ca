// server/engine.c — prompt rendering and the generation loop with prefix
// reuse (see engine.h).
#include "server/engine.h"

#include "server/seq.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/model.h"
#include "format/gguf.h"
#include "template/template.h"

srv_engine *srv_engine_open(const char *model, const petrel_model_params *mp, const petrel_context_params *cp,
                            const char *kv_dir, uint64_t kv_ram, char *err, size_t errlen)
{
    srv_engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->m = petrel_model_open(model, mp, err, errlen);
    if (!e->m)
        goto fail;
    e->cp = cp ? *cp : petrel_context_default_params();
    e->c = petrel_context_new(e->m, &e->cp, err, errlen);
    if (!e->c)
        goto fail;
    e->slots[0] = e->c;
    e->n_slots = 1;
    pt_err pe = {{0}};
    gguf_file *g = gguf_open(model, &pe);
    if (g) {
        e->tok = pt_tokenizer_from_gguf(g, &pe); // NULL: token ids only
        gguf_close(g);
    }
    e->n_eos = petrel_model_eos(e->m, e->eos, 8);
    if (e->tok) {
        int32_t t = pt_tokenizer_eos(e->tok);
        if (t >= 0 && e->n_eos < 16)
            e->eos[e->n_eos++] = t;
    }
    if (kv_dir || kv_ram) {
        e->kv = srv_kv_new(kv_dir, kv_ram, 64, e->c, err, errlen);
        if (!e->kv)
            goto fail;
    }
    const char *b = strrchr(model, '/');
    e->model_id = strdup(b ? b + 1 : model);
    size_t l = strlen(e->model_id);
    if (l > 5 && !strcmp(e->model_id + l - 5, ".gguf"))
        e->model_id[l - 5] = 0;
    return e;
fail:
    srv_engine_close(e);
    return NULL;
}

void srv_engine_close(srv_engine *e)
{
    if (!e)
        return;
    srv_kv_free(e->kv);
    if (e->tok)
        pt_tokenizer_free(e->tok);
    for (int i = 1; i < e->n_slots; i++)
        petrel_context_free(e->slots[i]);
    petrel_context_free(e->c);
    petrel_model_close(e->m);
    free(e->model_id);
    free(e);
}

int srv_engine_set_slots(srv_engine *e, int n, char *err, size_t errlen)
{
    assert(n >= 1 && n <= SRV_MAX_SLOTS);
    while (e->n_slots < n) {
        // Slots share slot 0's expert cache: a decode step over several of
        // them fetches each routed expert once (petrel_decode_multi).
        petrel_context *c = petrel_context_new_shared(e->c, &e->cp, err, errlen);
        if (!c)
            return -1;
        e->slots[e->n_slots++] = c;
    }
    return 0;
}

int srv_engine_batch(const srv_engine *e)
{
    uint32_t nb = petrel_context_n_batch(e->c), nc = petrel_context_n_ctx(e->c); // (--batch or from the RAM budget)
    return (int)(nb < nc ? nb : nc);
}

uint64_t srv_engine_expert_bytes(const srv_engine *e, int il)
{
    const petrel_model *m = e->m;
    if (il < 0 || il >= (int)pt_hp_n_blocks(&m->hp) || m->exp_src[il].n_expert <= 0)
        return 0;
    const pt_ecache_layer_src *s = &m->exp_src[il];
    return s->bytes[0] + s->bytes[1] + s->bytes[2];
}

int srv_encode(srv_engine *e, const char *text, petrel_token **ids, char *err, size_t errlen)
{
    if (!e->tok) {
        snprintf(err, errlen, "the model has no tokenizer: send token ids");
        return -1;
    }
    pt_err pe = {{0}};
    int32_t *out = NULL;
    int64_t n = pt_tokenizer_encode(e->tok, text, strlen(text), true, false, &out, &pe);
    if (n < 0) {
        snprintf(err, errlen, "%s", pe.msg);
        return -1;
    }
    *ids = out;
    return (int)n;
}

int srv_render_chat(srv_engine *e, json_object *messages, json_object *tools, petrel_token **ids, char *err,
                    size_t errlen)
{
    if (!e->tok) {
        snprintf(err, errlen, "the model has no tokenizer: chat is unavailable, use /v1/completions with token ids");
        return -1;
    }
    const char *tmpl = pt_tokenizer_chat_template(e->tok);
    if (!tmpl) {
        snprintf(err, errlen, "the model has no chat template");
        return -1;
    }
    pt_err pe = {{0}};
    char *prompt = NULL;
    json_object *extra = NULL;
    if (tools) {
        extra = json_object_new_object();
        json_object_object_add(extra, "tools", json_object_get(tools));
    }
    int rc = pt_chat_render(tmpl, messages, true, pt_tokenizer_bos_str(e->tok), pt_tokenizer_eos_str(e->tok), extra,
                            &prompt, NULL, &pe);
    if (extra)
        json_object_put(extra);
    if (rc < 0) {
        snprintf(err, errlen, "%s", pe.msg);
        return -1;
    }
    int n = srv_encode(e, prompt, ids, err, errlen);
    free(prompt);
    return n;
}

void srv_gen_result_free(srv_gen_result *r)
{
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

int srv_generate(srv_engine *e, const srv_gen_params *p, srv_piece_fn piece, void *user, atomic_bool *cancel,
                 srv_gen_result *r)
{
    srv_seq s;
    if (srv_seq_begin(&s, e, e->c, p, SRV_REUSE_ALL, piece, user, cancel, r) == 0) {
        while (s.phase == SRV_SEQ_PREFILL)
            srv_seq_prefill(&s, srv_engine_batch(e) < SRV_PREFILL_CHUNK ? srv_engine_batch(e) : SRV_PREFILL_CHUNK);
        while (s.phase == SRV_SEQ_DECODE) {
            if (petrel_decode(s.c, &s.next, NULL, 1, PETREL_LOGITS_LAST) < 0)
                srv_seq_fail(&s, petrel_context_error(s.c));
            else
                srv_seq_step(&s, petrel_get_logits(s.c, 0));
        }
    }
    return srv_seq_end(&s, true);
}

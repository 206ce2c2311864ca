// server/engine.c — prompt rendering and the generation loop with prefix
// reuse (see engine.h).
#include "server/engine.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
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
    e->c = petrel_context_new(e->m, cp, err, errlen);
    if (!e->c)
        goto fail;
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
    petrel_context_free(e->c);
    petrel_model_close(e->m);
    free(e->model_id);
    free(e);
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

static bool is_eos(const srv_engine *e, petrel_token t)
{
    for (int i = 0; i < e->n_eos; i++)
        if (e->eos[i] == t)
            return true;
    return e->tok && pt_tokenizer_is_eog(e->tok, t);
}

// Puts the context at the longest reusable prefix of the prompt (live
// context or a kept state), keeping at least one prompt token to compute.
// Returns the number of positions kept.
static int restore_prefix(srv_engine *e, const petrel_token *ids, int n)
{
    petrel_context *c = e->c;
    int live = srv_lcp(petrel_kv_tokens(c), petrel_kv_len(c), ids, n);
    int kept = 0, bi = -1;
    if (e->kv) {
        srv_kv_refresh(e->kv); // states other replicas wrote to a shared --kv-dir
        bi = srv_kv_best(e->kv, ids, n, &kept);
    }
    int use = live;
    // A kept state can fail to load (damaged, or its file removed by another
    // replica sharing the directory): it is dropped and the next best tried.
    for (int tries = 0; bi >= 0 && kept > use && tries < 4; tries++) {
        char err[512];
        if (srv_kv_restore(e->kv, bi, c, err, sizeof err) == 0) {
            use = srv_lcp(petrel_kv_tokens(c), petrel_kv_len(c), ids, n);
            break;
        }
        use = 0; // the context is empty after a failed load
        bi = srv_kv_best(e->kv, ids, n, &kept);
    }
    if (use > n - 1)
        use = n - 1;
    petrel_kv_truncate(c, use);
    return use;
}

// Text accumulation with stop strings: text[0..emitted) has been passed on;
// the rest is held while it could still become a stop string.
typedef struct gen_text {
    char *buf;
    size_t len, cap, emitted;
} gen_text;

static int text_add(gen_text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *p = realloc(t->buf, cap);
        if (!p)
            return -1;
        t->buf = p;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = 0;
    return 0;
}

// Finds the earliest stop string in the unemitted part (searching from a
// little before it); returns its offset or -1. *safe gets how far text may
// be emitted: up to the longest tail that is a prefix of some stop string.
static long find_stop(const gen_text *t, const srv_gen_params *p, size_t *safe)
{
    long found = -1;
    size_t maxl = 0;
    for (int i = 0; i < p->n_stop; i++) {
        size_t l = strlen(p->stop[i]);
        if (l > maxl)
            maxl = l;
    }
    size_t from = t->emitted > maxl ? t->emitted - maxl : 0;
    for (int i = 0; i < p->n_stop; i++) {
        size_t l = strlen(p->stop[i]);
        if (!l)
            continue;
        const char *h = memmem(t->buf + from, t->len - from, p->stop[i], l);
        if (h && (found < 0 || h - t->buf < found))
            found = h - t->buf;
    }
    size_t keep = 0;
    for (int i = 0; i < p->n_stop; i++) {
        size_t l = strlen(p->stop[i]);
        for (size_t k = l ? l - 1 : 0; k > keep; k--)
            if (k <= t->len && !memcmp(t->buf + t->len - k, p->stop[i], k)) {
                keep = k;
                break;
            }
    }
    *safe = t->len - keep;
    if (*safe < t->emitted)
        *safe = t->emitted;
    return found;
}

// Log-probabilities of the sampled token and the top k alternatives, in
// the chat format {token, logprob, bytes, top_logprobs: [...]}.
static json_object *token_entry(const srv_engine *e, petrel_token t, double lp)
{
    json_object *o = json_object_new_object();
    size_t len = 0;
    const char *s = e->tok ? pt_tokenizer_piece(e->tok, t, &len) : NULL;
    char idbuf[32];
    if (!s) {
        len = (size_t)snprintf(idbuf, sizeof idbuf, "token_id:%d", t);
        s = idbuf;
    }
    char *u = pt_utf8_lossy(s, len, NULL);
    json_object_object_add(o, "token", json_object_new_string(u));
    free(u);
    json_object_object_add(o, "logprob", json_object_new_double(lp));
    json_object *b = json_object_new_array();
    for (size_t i = 0; i < len; i++)
        json_object_array_add(b, json_object_new_int((unsigned char)s[i]));
    json_object_object_add(o, "bytes", b);
    return o;
}

static json_object *logprobs_of(const srv_engine *e, const float *logits, petrel_token t, int k)
{
    const int nv = petrel_model_n_vocab(e->m);
    float mx = -INFINITY;
    for (int i = 0; i < nv; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0;
    for (int i = 0; i < nv; i++)
        sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    json_object *o = token_entry(e, t, logits[t] - lse);
    json_object *top = json_object_new_array();
    int taken[20];
    for (int j = 0; j < k && j < 20; j++) {
        int best = -1;
        for (int i = 0; i < nv; i++) {
            bool used = false;
            for (int q = 0; q < j; q++)
                used |= taken[q] == i;
            if (!used && (best < 0 || logits[i] > logits[best]))
                best = i;
        }
        taken[j] = best;
        json_object_array_add(top, token_entry(e, best, logits[best] - lse));
    }
    json_object_object_add(o, "top_logprobs", top);
    return o;
}

int srv_generate(srv_engine *e, const srv_gen_params *p, srv_piece_fn piece, void *user, atomic_bool *cancel,
                 srv_gen_result *r)
{
    assert(p->n_prompt > 0);
    memset(r, 0, sizeof *r);
    petrel_context *c = e->c;
    const uint32_t n_ctx = petrel_context_n_ctx(c);
    if ((uint32_t)p->n_prompt >= n_ctx) {
        snprintf(r->err, sizeof r->err, "the prompt has %d tokens; the context holds %u", p->n_prompt, n_ctx);
        r->finish = "error";
        return -1;
    }
    int max_tokens = p->max_tokens;
    if (max_tokens > (int)n_ctx - p->n_prompt)
        max_tokens = (int)n_ctx - p->n_prompt;
    double t0 = pt_now();
    int keep = restore_prefix(e, p->prompt, p->n_prompt);
    r->n_cached = keep;
    r->n_prefilled = p->n_prompt - keep;
    const int nb = 256;
    int done = keep, last_rows = 0;
    while (done < p->n_prompt) {
        if (cancel && atomic_load(cancel)) {
            r->finish = "cancelled";
            return 0;
        }
        int k = p->n_prompt - done < nb ? p->n_prompt - done : nb;
        if (petrel_decode(c, p->prompt + done, NULL, k, PETREL_LOGITS_LAST) < 0) {
            snprintf(r->err, sizeof r->err, "%s", petrel_context_error(c));
            r->finish = "error";
            petrel_kv_truncate(c, 0);
            return -1;
        }
        done += k;
        last_rows = k;
    }
    petrel_sampler *smp = petrel_sampler_new(&p->sp, petrel_model_n_vocab(e->m));
    petrel_token *hist = malloc(sizeof *hist * (size_t)(p->n_prompt + max_tokens + 1));
    r->ids = malloc(sizeof *r->ids * (size_t)(max_tokens + 1));
    memcpy(hist, p->prompt, sizeof *hist * (size_t)p->n_prompt);
    int nh = p->n_prompt;
    pt_detok dt;
    if (e->tok)
        pt_detok_init(&dt, e->tok, true);
    gen_text tx = {0};
    text_add(&tx, "", 0);
    const char *finish = "length";
    int rc = 0;
    double t1 = 0;
    const float *lg = petrel_get_logits(c, last_rows - 1);
    for (int g = 0; g < max_tokens; g++) {
        if (cancel && atomic_load(cancel)) {
            finish = "cancelled";
            break;
        }
        petrel_token t = petrel_sampler_sample(smp, lg, hist, nh);
        if (g == 0) {
            t1 = pt_now();
            r->ttft_s = t1 - t0;
        }
        if (!p->ignore_eos && is_eos(e, t)) {
            finish = "stop";
            break;
        }
        hist[nh++] = t;
        r->ids[r->n_gen++] = t;
        json_object *lp = p->top_logprobs >= 0 ? logprobs_of(e, lg, t, p->top_logprobs) : NULL;
        size_t len = 0;
        const char *s = e->tok ? pt_detok_push(&dt, t, &len) : "";
        text_add(&tx, s, len);
        bool last = g + 1 == max_tokens;
        if (last && e->tok) {
            s = pt_detok_flush(&dt, &len);
            text_add(&tx, s, len);
        }
        size_t safe;
        long at = find_stop(&tx, p, &safe);
        if (at >= 0) {
            tx.len = (size_t)at;
            tx.buf[tx.len] = 0;
            safe = tx.len;
        }
        if (last)
            safe = tx.len;
        bool go = piece ? piece(user, tx.buf + tx.emitted, safe - tx.emitted, t, lp) : true;
        if (lp)
            json_object_put(lp);
        tx.emitted = safe;
        if (at >= 0) {
            finish = "stop";
            break;
        }
        if (!go) {
            finish = "cancelled";
            break;
        }
        if (last)
            break;
        if (petrel_decode(c, &t, NULL, 1, PETREL_LOGITS_LAST) < 0) {
            snprintf(r->err, sizeof r->err, "%s", petrel_context_error(c));
            finish = "error";
            rc = -1;
            break;
        }
        lg = petrel_get_logits(c, 0);
    }
    // Whatever is still held back (a partial stop string that never
    // completed, an unfinished character) is final now.
    if (rc == 0 && strcmp(finish, "cancelled")) {
        if (e->tok) {
            size_t len;
            const char *s = pt_detok_flush(&dt, &len);
            text_add(&tx, s, len);
        }
        if (tx.emitted < tx.len && piece)
            piece(user, tx.buf + tx.emitted, tx.len - tx.emitted, -1, NULL);
        tx.emitted = tx.len;
    }
    if (t1 > 0)
        r->t_decode_s = pt_now() - t1;
    r->finish = finish;
    r->text = tx.buf;
    r->text_len = tx.len;
    if (e->tok)
        pt_detok_free(&dt);
    petrel_sampler_free(smp);
    free(hist);
    if (rc == 0 && e->kv) {
        char err[512] = "";
        if (srv_kv_add(e->kv, c, err, sizeof err) < 0 || err[0])
            fprintf(stderr, "petrel serve: keeping the conversation state: %s\n", err);
    }
    return rc;
}

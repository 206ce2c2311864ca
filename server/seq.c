// server/seq.c — one generating sequence, step by step (see seq.h).
#include "server/seq.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static bool is_eos(const srv_engine *e, petrel_token t)
{
    for (int i = 0; i < e->n_eos; i++)
        if (e->eos[i] == t)
            return true;
    return e->tok && pt_tokenizer_is_eog(e->tok, t);
}

// Puts c at the longest reusable prefix of the prompt (its live cache, and
// with SRV_REUSE_ALL a kept state), keeping at least one prompt token to
// compute. Returns the number of positions kept.
static int restore_prefix(srv_engine *e, petrel_context *c, const petrel_token *ids, int n, int reuse)
{
    int use = reuse == SRV_REUSE_NONE ? 0 : srv_lcp(petrel_kv_tokens(c), petrel_kv_len(c), ids, n);
    if (reuse == SRV_REUSE_ALL && e->kv) {
        int kept = 0;
        srv_kv_refresh(e->kv); // states other replicas wrote to a shared --kv-dir
        int bi = srv_kv_best(e->kv, ids, n, &kept);
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
    }
    if (use > n - 1)
        use = n - 1;
    petrel_kv_truncate(c, use);
    return use;
}

static int text_add(srv_text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *p = realloc(t->buf, cap);
        if (!p)
            return -1;
        t->buf = p;
        t->cap = cap;
    }
    if (n)
        memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = 0;
    return 0;
}

// Finds the earliest stop string in the unemitted part (searching from a
// little before it); returns its offset or -1. *safe gets how far text may
// be emitted: up to the longest tail that is a prefix of some stop string.
static long find_stop(const srv_text *t, const srv_gen_params *p, size_t *safe)
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

static void to_done(srv_seq *s, const char *finish)
{
    s->phase = SRV_SEQ_DONE;
    s->r->finish = finish;
}

int srv_seq_begin(srv_seq *s, srv_engine *e, petrel_context *c, const srv_gen_params *p, int reuse,
                  srv_piece_fn piece, void *user, atomic_bool *cancel, srv_gen_result *r)
{
    assert(p->n_prompt > 0 && p->max_tokens > 0);
    memset(s, 0, sizeof *s);
    memset(r, 0, sizeof *r);
    s->e = e;
    s->c = c;
    s->p = *p;
    s->piece = piece;
    s->user = user;
    s->cancel = cancel;
    s->r = r;
    s->t0 = pt_now();
    const uint32_t n_ctx = petrel_context_n_ctx(c);
    if ((uint32_t)p->n_prompt >= n_ctx) {
        snprintf(r->err, sizeof r->err, "the prompt has %d tokens; the context holds %u", p->n_prompt, n_ctx);
        s->rc = -1;
        to_done(s, "error");
        return -1;
    }
    s->max_tokens = p->max_tokens;
    if (s->max_tokens > (int)n_ctx - p->n_prompt)
        s->max_tokens = (int)n_ctx - p->n_prompt;
    s->done = restore_prefix(e, c, p->prompt, p->n_prompt, reuse);
    r->n_cached = s->done;
    r->n_prefilled = p->n_prompt - s->done;
    s->smp = petrel_sampler_new(&p->sp, petrel_model_n_vocab(e->m));
    s->hist = malloc(sizeof *s->hist * (size_t)(p->n_prompt + s->max_tokens + 1));
    r->ids = malloc(sizeof *r->ids * (size_t)(s->max_tokens + 1));
    if (!s->smp || !s->hist || !r->ids || text_add(&s->tx, "", 0) < 0) {
        snprintf(r->err, sizeof r->err, "out of memory");
        s->rc = -1;
        to_done(s, "error");
        return -1;
    }
    memcpy(s->hist, p->prompt, sizeof *s->hist * (size_t)p->n_prompt);
    s->nh = p->n_prompt;
    if (e->tok) {
        pt_detok_init(&s->dt, e->tok, true);
        s->has_dt = true;
    }
    s->phase = s->done < p->n_prompt - 1 ? SRV_SEQ_PREFILL : SRV_SEQ_DECODE;
    s->next = p->prompt[p->n_prompt - 1];
    return 0;
}

int srv_seq_prefill(srv_seq *s, int chunk)
{
    assert(s->phase == SRV_SEQ_PREFILL && chunk > 0);
    if (s->cancel && atomic_load(s->cancel)) {
        to_done(s, "cancelled");
        return 0;
    }
    const int upto = s->p.n_prompt - 1; // the last prompt token is decoded as a step
    int k = upto - s->done < chunk ? upto - s->done : chunk;
    if (petrel_decode(s->c, s->p.prompt + s->done, NULL, k, PETREL_LOGITS_LAST) < 0) {
        srv_seq_fail(s, petrel_context_error(s->c));
        return -1;
    }
    s->done += k;
    if (s->done == upto)
        s->phase = SRV_SEQ_DECODE;
    return k;
}

void srv_seq_fail(srv_seq *s, const char *msg)
{
    snprintf(s->r->err, sizeof s->r->err, "%s", msg);
    s->rc = -1;
    to_done(s, "error");
    petrel_kv_truncate(s->c, 0); // nothing half-computed is kept or reused
}

bool srv_seq_step(srv_seq *s, const float *lg)
{
    assert(s->phase == SRV_SEQ_DECODE && lg);
    srv_gen_result *r = s->r;
    const srv_gen_params *p = &s->p;
    srv_engine *e = s->e;
    if (s->cancel && atomic_load(s->cancel)) {
        to_done(s, "cancelled");
        return false;
    }
    petrel_token t = petrel_sampler_sample(s->smp, lg, s->hist, s->nh);
    if (r->n_gen == 0) {
        s->t1 = pt_now();
        r->ttft_s = s->t1 - s->t0;
    }
    if (!p->ignore_eos && is_eos(e, t)) {
        to_done(s, "stop");
        return false;
    }
    s->hist[s->nh++] = t;
    r->ids[r->n_gen++] = t;
    json_object *lp = p->top_logprobs >= 0 ? logprobs_of(e, lg, t, p->top_logprobs) : NULL;
    srv_text *tx = &s->tx;
    size_t len = 0;
    const char *str = s->has_dt ? pt_detok_push(&s->dt, t, &len) : "";
    text_add(tx, str, len);
    const bool last = r->n_gen == s->max_tokens;
    if (last && s->has_dt) {
        str = pt_detok_flush(&s->dt, &len);
        text_add(tx, str, len);
    }
    size_t safe;
    long at = find_stop(tx, p, &safe);
    if (at >= 0) {
        tx->len = (size_t)at;
        tx->buf[tx->len] = 0;
        safe = tx->len;
    }
    if (last)
        safe = tx->len;
    bool go = s->piece ? s->piece(s->user, tx->buf + tx->emitted, safe - tx->emitted, t, lp) : true;
    if (lp)
        json_object_put(lp);
    tx->emitted = safe;
    if (at >= 0) {
        to_done(s, "stop");
        return false;
    }
    if (!go) {
        to_done(s, "cancelled");
        return false;
    }
    if (last) {
        to_done(s, "length");
        return false;
    }
    s->next = t;
    return true;
}

int srv_seq_end(srv_seq *s, bool keep)
{
    assert(s->phase == SRV_SEQ_DONE);
    srv_gen_result *r = s->r;
    srv_engine *e = s->e;
    // Whatever is still held back (a partial stop string that never
    // completed, an unfinished character) is final now.
    if (s->rc == 0 && strcmp(r->finish, "cancelled") && s->tx.buf) {
        if (s->has_dt) {
            size_t len;
            const char *str = pt_detok_flush(&s->dt, &len);
            text_add(&s->tx, str, len);
        }
        if (s->tx.emitted < s->tx.len && s->piece)
            s->piece(s->user, s->tx.buf + s->tx.emitted, s->tx.len - s->tx.emitted, -1, NULL);
        s->tx.emitted = s->tx.len;
    }
    if (s->t1 > 0)
        r->t_decode_s = pt_now() - s->t1;
    r->text = s->tx.buf;
    r->text_len = s->tx.len;
    s->tx.buf = NULL;
    if (s->has_dt)
        pt_detok_free(&s->dt);
    s->has_dt = false;
    petrel_sampler_free(s->smp);
    free(s->hist);
    s->smp = NULL;
    s->hist = NULL;
    if (keep && s->rc == 0 && e->kv && petrel_kv_len(s->c) > 0) {
        char err[512] = "";
        if (srv_kv_add(e->kv, s->c, err, sizeof err) < 0 || err[0])
            fprintf(stderr, "petrel serve: keeping the conversation state: %s\n", err);
    }
    return s->rc;
}

// server/api.c — OpenAI request parsing and response objects (see api.h).
#include "server/api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

#define BAD(p, ...) (snprintf(msg, msglen, __VA_ARGS__), *param = (p), 400)

static bool is_num(json_object *o) { return json_object_is_type(o, json_type_double) || json_object_is_type(o, json_type_int); }

// Reads an optional number field within [lo, hi]; 0 ok, 400 on a bad type/value.
static int get_num(json_object *req, const char *key, double lo, double hi, double *out, char *msg, size_t msglen,
                   const char **param)
{
    json_object *v;
    if (!json_object_object_get_ex(req, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!is_num(v))
        return BAD(key, "'%s' must be a number", key);
    double d = json_object_get_double(v);
    if (!(d >= lo && d <= hi))
        return BAD(key, "'%s' must be between %g and %g", key, lo, hi);
    *out = d;
    return 0;
}

static int get_int(json_object *req, const char *key, long lo, long hi, long *out, char *msg, size_t msglen,
                   const char **param)
{
    json_object *v;
    if (!json_object_object_get_ex(req, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!json_object_is_type(v, json_type_int))
        return BAD(key, "'%s' must be an integer", key);
    int64_t d = json_object_get_int64(v);
    if (d < lo || d > hi)
        return BAD(key, "'%s' must be between %ld and %ld", key, lo, hi);
    *out = (long)d;
    return 0;
}

static int get_bool(json_object *req, const char *key, bool *out, char *msg, size_t msglen, const char **param)
{
    json_object *v;
    if (!json_object_object_get_ex(req, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!json_object_is_type(v, json_type_boolean))
        return BAD(key, "'%s' must be a boolean", key);
    *out = json_object_get_boolean(v);
    return 0;
}

// Messages: a non-empty array of {role: string, content: string | null |
// [{type: "text", text}]}; array contents are joined into a string in the
// copy handed to the template.
static int parse_messages(json_object *req, json_object **out, char *msg, size_t msglen, const char **param)
{
    json_object *ms;
    if (!json_object_object_get_ex(req, "messages", &ms))
        return BAD("messages", "'messages' is required");
    if (!json_object_is_type(ms, json_type_array) || json_object_array_length(ms) == 0)
        return BAD("messages", "'messages' must be a non-empty array");
    json_object *copy = json_object_new_array();
    for (size_t i = 0; i < json_object_array_length(ms); i++) {
        json_object *m = json_object_array_get_idx(ms, i), *role, *content;
        if (!json_object_is_type(m, json_type_object) || !json_object_object_get_ex(m, "role", &role) ||
            !json_object_is_type(role, json_type_string)) {
            json_object_put(copy);
            return BAD("messages", "messages[%zu] must be an object with a string 'role'", i);
        }
        json_object *mc = NULL;
        json_object_deep_copy(m, &mc, NULL);
        if (json_object_object_get_ex(m, "content", &content) && json_object_is_type(content, json_type_array)) {
            size_t cap = 1, len = 0;
            for (size_t k = 0; k < json_object_array_length(content); k++) {
                json_object *part = json_object_array_get_idx(content, k), *tx;
                if (!json_object_object_get_ex(part, "text", &tx) || !json_object_is_type(tx, json_type_string)) {
                    json_object_put(mc);
                    json_object_put(copy);
                    return BAD("messages", "messages[%zu].content[%zu] must be a text part", i, k);
                }
                cap += (size_t)json_object_get_string_len(tx);
            }
            char *s = malloc(cap);
            for (size_t k = 0; k < json_object_array_length(content); k++) {
                json_object *tx;
                json_object_object_get_ex(json_object_array_get_idx(content, k), "text", &tx);
                size_t l = (size_t)json_object_get_string_len(tx);
                memcpy(s + len, json_object_get_string(tx), l);
                len += l;
            }
            s[len] = 0;
            json_object_object_add(mc, "content", json_object_new_string_len(s, (int)len));
            free(s);
        } else if (json_object_object_get_ex(m, "content", &content) &&
                   !json_object_is_type(content, json_type_string) && !json_object_is_type(content, json_type_null)) {
            json_object_put(mc);
            json_object_put(copy);
            return BAD("messages", "messages[%zu].content must be a string or an array of text parts", i);
        }
        json_object_array_add(copy, mc);
    }
    *out = copy;
    return 0;
}

// A token-id array: every element an integer in [0, n_vocab).
static int ids_of(json_object *a, int n_vocab, petrel_token **ids, char *msg, size_t msglen, const char **param)
{
    size_t n = json_object_array_length(a);
    petrel_token *t = malloc(sizeof *t * (n + 1));
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        int64_t x = json_object_get_int64(v);
        if (!json_object_is_type(v, json_type_int) || x < 0 || x >= n_vocab) {
            free(t);
            snprintf(msg, msglen, "prompt[%zu] is not a token id in [0, %d)", i, n_vocab);
            *param = "prompt";
            return -1;
        }
        t[i] = (petrel_token)x;
    }
    *ids = t;
    return (int)n;
}

static int parse_prompt(srv_engine *e, json_object *req, srv_job *j, char *msg, size_t msglen, const char **param)
{
    json_object *p;
    if (!json_object_object_get_ex(req, "prompt", &p))
        return BAD("prompt", "'prompt' is required");
    const int nv = petrel_model_n_vocab(e->m);
    if (json_object_is_type(p, json_type_array) && json_object_array_length(p) == 1) {
        json_object *x = json_object_array_get_idx(p, 0);
        if (json_object_is_type(x, json_type_string) || json_object_is_type(x, json_type_array))
            p = x; // a batch of one prompt
    }
    int n;
    if (json_object_is_type(p, json_type_string)) {
        n = srv_encode(e, json_object_get_string(p), &j->prompt, msg, msglen);
        if (n < 0) {
            *param = "prompt";
            return 400;
        }
    } else if (json_object_is_type(p, json_type_array)) {
        if (json_object_array_length(p) > 1 && !json_object_is_type(json_object_array_get_idx(p, 0), json_type_int))
            return BAD("prompt", "batches of several prompts are not supported");
        n = ids_of(p, nv, &j->prompt, msg, msglen, param);
        if (n < 0)
            return 400;
    } else {
        return BAD("prompt", "'prompt' must be a string or an array of token ids");
    }
    if (n == 0)
        return BAD("prompt", "the prompt is empty");
    j->gp.n_prompt = n;
    return 0;
}

static int parse_stop(json_object *req, srv_job *j, char *msg, size_t msglen, const char **param)
{
    json_object *s;
    if (!json_object_object_get_ex(req, "stop", &s) || json_object_is_type(s, json_type_null))
        return 0;
    if (json_object_is_type(s, json_type_string)) {
        j->stop[j->gp.n_stop++] = strdup(json_object_get_string(s));
        return 0;
    }
    if (!json_object_is_type(s, json_type_array))
        return BAD("stop", "'stop' must be a string or an array of strings");
    if (json_object_array_length(s) > SRV_MAX_STOP)
        return BAD("stop", "at most %d stop sequences", SRV_MAX_STOP);
    for (size_t i = 0; i < json_object_array_length(s); i++) {
        json_object *x = json_object_array_get_idx(s, i);
        if (!json_object_is_type(x, json_type_string))
            return BAD("stop", "stop[%zu] must be a string", i);
        j->stop[j->gp.n_stop++] = strdup(json_object_get_string(x));
    }
    return 0;
}

static bool model_matches(const srv_engine *e, const char *name)
{
    if (!strcmp(name, e->model_id))
        return true;
    const char *path = petrel_model_path(e->m), *b = strrchr(path, '/');
    return !strcmp(name, path) || !strcmp(name, b ? b + 1 : path);
}

static int parse_body(srv_engine *e, int kind, json_object *req, srv_job *j, char *msg, size_t msglen,
                      const char **param)
{
    int rc;
    json_object *v;
    if (json_object_object_get_ex(req, "model", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_string))
            return BAD("model", "'model' must be a string");
        if (!model_matches(e, json_object_get_string(v))) {
            snprintf(msg, msglen, "The model '%s' does not exist (this server serves '%s')", json_object_get_string(v),
                     e->model_id);
            *param = "model";
            return 404;
        }
    }
    // n choices run as n parallel sequences at once (they share the prompt's KV).
    const long max_n = e->n_slots < SRV_MAX_N ? e->n_slots : SRV_MAX_N;
    long n = 1;
    if ((rc = get_int(req, "n", 1, SRV_MAX_N, &n, msg, msglen, param)))
        return rc;
    if (n > max_n)
        return BAD("n", "'n' is %ld: this server runs at most %ld sequences at once (--parallel)", n, max_n);
    j->n = (int)n;
    long max_tokens = kind == SRV_CHAT ? 1 << 30 : 16;
    if ((rc = get_int(req, "max_tokens", 1, 1 << 30, &max_tokens, msg, msglen, param)) ||
        (rc = get_int(req, "max_completion_tokens", 1, 1 << 30, &max_tokens, msg, msglen, param)))
        return rc;
    j->gp.max_tokens = (int)max_tokens;
    petrel_sampler_params *sp = &j->gp.sp;
    *sp = petrel_sampler_default_params();
    double temp = 1.0, top_p = 1.0, pp = 0, fp = 0;
    long seed = -1;
    if ((rc = get_num(req, "temperature", 0, 2, &temp, msg, msglen, param)) ||
        (rc = get_num(req, "top_p", 0, 1, &top_p, msg, msglen, param)) ||
        (rc = get_num(req, "presence_penalty", -2, 2, &pp, msg, msglen, param)) ||
        (rc = get_num(req, "frequency_penalty", -2, 2, &fp, msg, msglen, param)) ||
        (rc = get_int(req, "seed", INT64_MIN + 1, INT64_MAX, &seed, msg, msglen, param)))
        return rc;
    sp->temperature = (float)temp;
    sp->top_p = (float)top_p;
    sp->presence_penalty = (float)pp;
    sp->frequency_penalty = (float)fp;
    sp->seed = seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)j;
    if ((rc = get_bool(req, "stream", &j->stream, msg, msglen, param)) ||
        (rc = get_bool(req, "return_token_ids", &j->return_ids, msg, msglen, param)) ||
        (rc = get_bool(req, "ignore_eos", &j->gp.ignore_eos, msg, msglen, param)))
        return rc;
    if (json_object_object_get_ex(req, "stream_options", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_object))
            return BAD("stream_options", "'stream_options' must be an object");
        if ((rc = get_bool(v, "include_usage", &j->include_usage, msg, msglen, param)))
            return rc;
    }
    // logprobs: a boolean (+ top_logprobs) for chat, an integer for completions.
    long top = 0;
    if (kind == SRV_CHAT) {
        bool lp = false;
        if ((rc = get_bool(req, "logprobs", &lp, msg, msglen, param)) ||
            (rc = get_int(req, "top_logprobs", 0, 20, &top, msg, msglen, param)))
            return rc;
        j->gp.top_logprobs = lp ? (int)top : -1;
    } else {
        top = -1;
        if ((rc = get_int(req, "logprobs", 0, 5, &top, msg, msglen, param)))
            return rc;
        j->gp.top_logprobs = (int)top;
    }
    if ((rc = parse_stop(req, j, msg, msglen, param)))
        return rc;
    for (int i = 0; i < j->gp.n_stop; i++)
        j->gp.stop[i] = j->stop[i];
    if (kind == SRV_CHAT) {
        json_object *ms = NULL;
        if ((rc = parse_messages(req, &ms, msg, msglen, param)))
            return rc;
        json_object *tools = NULL;
        if (json_object_object_get_ex(req, "tools", &tools) && json_object_is_type(tools, json_type_null))
            tools = NULL;
        if (tools && !json_object_is_type(tools, json_type_array)) {
            json_object_put(ms);
            return BAD("tools", "'tools' must be an array");
        }
        int np = srv_render_chat(e, ms, tools, &j->prompt, msg, msglen);
        json_object_put(ms);
        if (np < 0) {
            *param = "messages";
            return 400;
        }
        if (np == 0)
            return BAD("messages", "the conversation renders to no tokens");
        j->gp.n_prompt = np;
    } else if ((rc = parse_prompt(e, req, j, msg, msglen, param))) {
        return rc;
    }
    j->gp.prompt = j->prompt;
    const uint32_t n_ctx = petrel_context_n_ctx(e->c);
    if ((uint32_t)j->gp.n_prompt >= n_ctx)
        return BAD(kind == SRV_CHAT ? "messages" : "prompt",
                   "the prompt has %d tokens; the context holds %u (start the server with a larger -c)", j->gp.n_prompt,
                   n_ctx);
    return 200;
}

int srv_parse_request(srv_engine *e, int kind, const char *body, size_t len, srv_job *j, char *msg, size_t msglen,
                      const char **param)
{
    *param = NULL;
    json_tokener *tk = json_tokener_new();
    json_object *req = json_tokener_parse_ex(tk, body, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tk);
    size_t used = tk->char_offset;
    json_tokener_free(tk);
    if (!req || jerr != json_tokener_success || used != len) {
        if (req)
            json_object_put(req);
        snprintf(msg, msglen, "the request body is not valid JSON: %s",
                 jerr == json_tokener_continue  ? "unexpected end of input"
                 : jerr != json_tokener_success ? json_tokener_error_desc(jerr)
                                                : "trailing characters after the value");
        return 400;
    }
    if (!json_object_is_type(req, json_type_object)) {
        json_object_put(req);
        snprintf(msg, msglen, "the request body must be a JSON object");
        return 400;
    }
    j->kind = kind;
    j->model_id = e->model_id;
    int rc = parse_body(e, kind, req, j, msg, msglen, param);
    json_object_put(req);
    return rc;
}

json_object *srv_error_json(int status, const char *msg, const char *param)
{
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    const char *code = status == 401   ? "invalid_api_key"
                       : status == 404 ? "model_not_found"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "queue_full"
                                       : NULL;
    // Messages quote request fields (a model name, a stop string): bytes that
    // are not UTF-8 become U+FFFD, so the answer is always valid JSON text.
    size_t ml = 0;
    char *safe = pt_utf8_lossy(msg, strlen(msg), &ml);
    json_object *e = json_object_new_object();
    json_object_object_add(e, "message", safe ? json_object_new_string_len(safe, (int)ml) : json_object_new_string(msg));
    free(safe);
    json_object_object_add(e, "type", json_object_new_string(type));
    json_object_object_add(e, "param", param ? json_object_new_string(param) : NULL);
    json_object_object_add(e, "code", code ? json_object_new_string(code) : NULL);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "error", e);
    return o;
}

static json_object *head(const srv_job *j, const char *object)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(j->id));
    json_object_object_add(o, "object", json_object_new_string(object));
    json_object_object_add(o, "created", json_object_new_int64(j->created));
    json_object_object_add(o, "model", json_object_new_string(j->model_id));
    json_object_object_add(o, "system_fingerprint", json_object_new_string("petrel"));
    return o;
}

// Completions-style logprobs {tokens, token_logprobs, top_logprobs, text_offset}
// from chat-style entries.
static json_object *completion_logprobs(json_object *entries)
{
    json_object *o = json_object_new_object(), *toks = json_object_new_array(), *lps = json_object_new_array(),
                *tops = json_object_new_array(), *offs = json_object_new_array();
    int64_t off = 0;
    for (size_t i = 0; i < json_object_array_length(entries); i++) {
        json_object *e = json_object_array_get_idx(entries, i), *t, *lp, *top;
        json_object_object_get_ex(e, "token", &t);
        json_object_object_get_ex(e, "logprob", &lp);
        json_object_array_add(toks, json_object_get(t));
        json_object_array_add(lps, json_object_get(lp));
        json_object_array_add(offs, json_object_new_int64(off));
        off += json_object_get_string_len(t);
        json_object *d = json_object_new_object();
        if (json_object_object_get_ex(e, "top_logprobs", &top))
            for (size_t k = 0; k < json_object_array_length(top); k++) {
                json_object *a = json_object_array_get_idx(top, k), *at, *al;
                json_object_object_get_ex(a, "token", &at);
                json_object_object_get_ex(a, "logprob", &al);
                json_object_object_add(d, json_object_get_string(at), json_object_get(al));
            }
        json_object_array_add(tops, d);
    }
    json_object_object_add(o, "tokens", toks);
    json_object_object_add(o, "token_logprobs", lps);
    json_object_object_add(o, "top_logprobs", tops);
    json_object_object_add(o, "text_offset", offs);
    return o;
}

json_object *srv_chunk(const srv_job *j, int index, const char *text, size_t len, bool role, json_object *lp,
                       const char *finish)
{
    const bool chat = j->kind == SRV_CHAT;
    json_object *o = head(j, chat ? "chat.completion.chunk" : "text_completion");
    json_object *ch = json_object_new_object();
    json_object_object_add(ch, "index", json_object_new_int(index));
    json_object *lpo = NULL;
    if (lp) {
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, json_object_get(lp));
        if (chat) {
            lpo = json_object_new_object();
            json_object_object_add(lpo, "content", arr);
        } else {
            lpo = completion_logprobs(arr);
            json_object_put(arr);
        }
    }
    if (chat) {
        json_object *d = json_object_new_object();
        if (role)
            json_object_object_add(d, "role", json_object_new_string("assistant"));
        if (len || role)
            json_object_object_add(d, "content", json_object_new_string_len(text, (int)len));
        json_object_object_add(ch, "delta", d);
    } else {
        json_object_object_add(ch, "text", json_object_new_string_len(text, (int)len));
    }
    json_object_object_add(ch, "logprobs", lpo);
    json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
    json_object *arr = json_object_new_array();
    json_object_array_add(arr, ch);
    json_object_object_add(o, "choices", arr);
    return o;
}

// Completion tokens are summed over the n choices (as OpenAI does); the
// prompt counts once.
static json_object *usage(const srv_job *j)
{
    int gen = 0;
    for (int i = 0; i < j->n; i++)
        gen += srv_job_cresult(j, i)->n_gen;
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int(j->gp.n_prompt));
    json_object_object_add(u, "completion_tokens", json_object_new_int(gen));
    json_object_object_add(u, "total_tokens", json_object_new_int(j->gp.n_prompt + gen));
    json_object *d = json_object_new_object();
    json_object_object_add(d, "cached_tokens", json_object_new_int(j->res.n_cached));
    json_object_object_add(u, "prompt_tokens_details", d);
    return u;
}

// Non-standard timings (as llama.cpp's server): what the prefix reuse saved.
static json_object *timings(const srv_job *j)
{
    json_object *t = json_object_new_object();
    json_object_object_add(t, "prefill_tokens", json_object_new_int(j->res.n_prefilled));
    json_object_object_add(t, "cached_tokens", json_object_new_int(j->res.n_cached));
    json_object_object_add(t, "ttft_ms", json_object_new_double(j->res.ttft_s * 1e3));
    double tps = j->res.t_decode_s > 0 && j->res.n_gen > 1 ? (j->res.n_gen - 1) / j->res.t_decode_s : 0;
    json_object_object_add(t, "decode_tok_s", json_object_new_double(tps));
    return t;
}

json_object *srv_usage_chunk(const srv_job *j)
{
    json_object *o = head(j, j->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_object_add(o, "choices", json_object_new_array());
    json_object_object_add(o, "usage", usage(j));
    json_object_object_add(o, "timings", timings(j));
    return o;
}

// Choice i of a finished job: its text (message for chat), logprobs,
// finish reason and (return_token_ids) ids.
static json_object *choice(const srv_job *j, int i)
{
    const bool chat = j->kind == SRV_CHAT;
    const srv_gen_result *r = srv_job_cresult(j, i);
    json_object *ch = json_object_new_object();
    json_object_object_add(ch, "index", json_object_new_int(i));
    const char *text = r->text ? r->text : "";
    if (chat) {
        json_object *m = json_object_new_object();
        json_object_object_add(m, "role", json_object_new_string("assistant"));
        json_object_object_add(m, "content", json_object_new_string_len(text, (int)r->text_len));
        json_object_object_add(m, "refusal", NULL);
        json_object_object_add(ch, "message", m);
    } else {
        json_object_object_add(ch, "text", json_object_new_string_len(text, (int)r->text_len));
    }
    json_object *lpo = NULL;
    if (j->lp[i]) {
        if (chat) {
            lpo = json_object_new_object();
            json_object_object_add(lpo, "content", json_object_get(j->lp[i]));
        } else {
            lpo = completion_logprobs(j->lp[i]);
        }
    }
    json_object_object_add(ch, "logprobs", lpo);
    json_object_object_add(ch, "finish_reason", json_object_new_string(r->finish ? r->finish : "stop"));
    if (j->return_ids) {
        json_object *ids = json_object_new_array();
        for (int k = 0; k < r->n_gen; k++)
            json_object_array_add(ids, json_object_new_int(r->ids[k]));
        json_object_object_add(ch, "token_ids", ids);
    }
    return ch;
}

json_object *srv_response(const srv_job *j)
{
    json_object *o = head(j, j->kind == SRV_CHAT ? "chat.completion" : "text_completion");
    json_object *arr = json_object_new_array();
    for (int i = 0; i < j->n; i++)
        json_object_array_add(arr, choice(j, i));
    json_object_object_add(o, "choices", arr);
    json_object_object_add(o, "usage", usage(j));
    json_object_object_add(o, "timings", timings(j));
    return o;
}

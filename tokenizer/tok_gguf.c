// tokenizer/tok_gguf.c — storing the tokenizer in GGUF metadata and loading
// it back.
//
// Written keys (llama.cpp conventions plus one Petrel key; a tiktoken
// tokenizer writes petrel.tokenizer.tiktoken_pattern instead of the json):
//   tokenizer.ggml.model        "gpt2" (byte-level BPE)
//   tokenizer.ggml.pre          "deepseek-v3", "llama-bpe", "qwen2", "gpt-2"
//                               when the pre-tokenizer regexes match those,
//                               else "default"
//   tokenizer.ggml.tokens       (n_vocab,) strings in id order ("[PADn]" for holes)
//   tokenizer.ggml.token_type   (n_vocab,) i32: 1 normal, 3 control (special
//                               added), 4 user-defined (other added), 5 unused
//   tokenizer.ggml.merges       (n_merges,) "a b"
//   tokenizer.ggml.bos_token_id / eos_token_id (u32, from tokenizer_config.json)
//   tokenizer.ggml.add_bos_token (bool, when the config says)
//   tokenizer.chat_template     (string)
//   petrel.tokenizer.json       the tokenizer.json text, reloaded as is
//   tokenizer.ggml.eot_token_id (tiktoken: <|im_end|>; read back as an
//                               end-of-generation id, also from llama.cpp's files)
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

// Pre-tokenizer regexes of known families (as in their tokenizer.json).
static const char *const DSV3_RE[] = {
    "\\p{N}{1,3}",
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};
static const char LLAMA3_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Collects the Split regexes of a pre_tokenizer (in order) and whether a
// ByteLevel step uses the GPT-2 regex.
static void collect_regexes(json_object *p, const char **re, int *n, bool *gpt2)
{
    json_object *v;
    if (!p || !json_object_object_get_ex(p, "type", &v))
        return;
    const char *type = json_object_get_string(v);
    if (!strcmp(type, "Sequence") && json_object_object_get_ex(p, "pretokenizers", &v)) {
        for (size_t i = 0; i < json_object_array_length(v); i++)
            collect_regexes(json_object_array_get_idx(v, i), re, n, gpt2);
    } else if (!strcmp(type, "Split") && json_object_object_get_ex(p, "pattern", &v)) {
        json_object *r;
        if (json_object_object_get_ex(v, "Regex", &r) && *n < 8)
            re[(*n)++] = json_object_get_string(r);
    } else if (!strcmp(type, "ByteLevel")) {
        json_object *u;
        if (!json_object_object_get_ex(p, "use_regex", &u) || json_object_get_boolean(u))
            *gpt2 = true;
    }
}

static const char *detect_pre(json_object *root)
{
    json_object *p;
    if (!json_object_object_get_ex(root, "pre_tokenizer", &p))
        return "default";
    const char *re[8];
    int n = 0;
    bool gpt2 = false;
    collect_regexes(p, re, &n, &gpt2);
    if (n == 3 && !gpt2 && !strcmp(re[0], DSV3_RE[0]) && !strcmp(re[1], DSV3_RE[1]) && !strcmp(re[2], DSV3_RE[2]))
        return "deepseek-v3";
    if (n == 1 && !gpt2 && !strcmp(re[0], LLAMA3_RE))
        return "llama-bpe";
    if (n == 1 && !gpt2 && !strcmp(re[0], QWEN2_RE))
        return "qwen2";
    if (n == 0 && gpt2)
        return "gpt-2";
    return "default";
}

int pt_tokenizer_write_gguf(const char *json_path, const char *config_path, gguf_writer *w, pt_err *err)
{
    return pt_tokenizer_write_gguf_ex(json_path, config_path, true, w, err);
}

// The folder of a tiktoken source given as the folder itself or as its
// tiktoken.model; NULL (nothing allocated) for anything else.
static char *tiktoken_dir_of(const char *path)
{
    struct stat st;
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        return pt_tokenizer_is_tiktoken_dir(path) ? strdup(path) : NULL;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, "tiktoken.model"))
        return NULL;
    return base == path ? strdup(".") : strndup(path, (size_t)(base - path - 1));
}

// A tiktoken tokenizer as llama.cpp's converter writes Kimi-K2's: byte-level
// tokens in id order, control types for the specials, the merges derived
// from the ranks, pre "kimi-k2" (for Kimi's pattern; "llama-bpe" for
// cl100k's, which is that regex), plus petrel.tokenizer.tiktoken_pattern
// (the pattern as written) from which Petrel reloads it exactly.
// n_vocab > 0: the token list has exactly the model's n_vocab entries
// ([PADn] up to it, ids past it left out), as llama.cpp's converter writes
// Kimi-K2's (its special block may run past the embedding).
static int write_tiktoken(const char *dir, uint32_t n_vocab, gguf_writer *w, pt_err *err)
{
    pt_tokenizer *t = pt_tokenizer_load_tiktoken(dir, err);
    if (!t)
        return -1;
    int32_t n = n_vocab ? (int32_t)n_vocab : t->n_vocab;
    const char **toks = calloc((size_t)n, sizeof *toks);
    char **pads = calloc((size_t)n, sizeof *pads);
    int32_t *types = calloc((size_t)n, sizeof *types);
    assert(toks && pads && types);
    for (int32_t i = 0; i < n; i++) {
        if (i >= t->n_vocab || !t->tok_str[i]) {
            char b[32];
            snprintf(b, sizeof b, "[PAD%d]", i);
            toks[i] = pads[i] = strdup(b);
            types[i] = 5;
            continue;
        }
        toks[i] = t->tok_str[i];
        types[i] = (t->attr[i] & TOK_ATTR_SPECIAL) ? 3 : 1;
    }
    char **merges;
    int32_t nm = tok_tiktoken_merges(t, &merges);
    const char *pre = !strcmp(t->tiktoken_pat, tok_kimi_pattern) ? "kimi-k2"
                      : !strcmp(t->tiktoken_pat, LLAMA3_RE)       ? "llama-bpe"
                                                                  : "default";
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", pre);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)nm);
    if (t->bos_id >= 0 && t->bos_id < n)
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos_id);
    if (t->eos_id >= 0 && t->eos_id < n)
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos_id);
    if (t->chat_template)
        gguf_w_str(w, "tokenizer.chat_template", t->chat_template);
    gguf_w_str(w, "petrel.tokenizer.tiktoken_pattern", t->tiktoken_pat);
    for (int i = 0; i < t->n_eog; i++) // <|im_end|>: the end of a chat turn
        if (t->eog[i] < n && t->eog[i] != t->eos_id) {
            gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)t->eog[i]);
            break;
        }
    for (int32_t i = 0; i < nm; i++)
        free(merges[i]);
    free(merges);
    for (int32_t i = 0; i < n; i++)
        free(pads[i]);
    free(pads);
    free(toks);
    free(types);
    pt_tokenizer_free(t);
    return 0;
}

int pt_tokenizer_write_gguf_n(const char *path, const char *config_path, uint32_t n_vocab, gguf_writer *w,
                              pt_err *err)
{
    char *tdir = tiktoken_dir_of(path);
    if (!tdir)
        return pt_tokenizer_write_gguf_ex(path, config_path, true, w, err);
    int rc = write_tiktoken(tdir, n_vocab, w, err); // the folder's own tokenizer_config.json is read by the loader
    free(tdir);
    return rc;
}

int pt_tokenizer_write_gguf_ex(const char *json_path, const char *config_path, bool embed_json, gguf_writer *w,
                               pt_err *err)
{
    char *tdir = tiktoken_dir_of(json_path);
    if (tdir) {
        int rc = write_tiktoken(tdir, 0, w, err);
        free(tdir);
        return rc;
    }
    size_t len;
    char *text = pt_read_file(json_path, &len, err);
    if (!text)
        return -1;
    if (strlen(text) != len) {
        free(text);
        return pt_errf(err, "%s: contains NUL bytes", json_path);
    }
    pt_tokenizer *t = pt_tokenizer_from_json(text, len, json_path, err);
    if (!t) {
        free(text);
        return -1;
    }
    if (config_path && pt_tokenizer_load_config(t, config_path, err) < 0) {
        pt_tokenizer_free(t);
        free(text);
        return -1;
    }
    json_object *root = json_tokener_parse(text);
    const char *pre = root ? detect_pre(root) : "default";

    int32_t n = t->n_vocab;
    const char **toks = calloc((size_t)n, sizeof *toks);
    char **pads = calloc((size_t)n, sizeof *pads);
    int32_t *types = calloc((size_t)n, sizeof *types);
    assert(toks && pads && types);
    for (int32_t i = 0; i < n; i++) {
        if (!t->tok_str[i]) {
            char b[32];
            snprintf(b, sizeof b, "[PAD%d]", i);
            pads[i] = strdup(b);
            toks[i] = pads[i];
            types[i] = 5;
            continue;
        }
        toks[i] = t->tok_str[i];
        types[i] = (t->attr[i] & TOK_ATTR_SPECIAL) ? 3 : (t->attr[i] & TOK_ATTR_ADDED) ? 4 : 1;
    }
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", pre);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)t->merge_str, (uint64_t)t->n_merges);
    if (t->bos_id >= 0)
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos_id);
    if (t->eos_id >= 0)
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos_id);
    if (config_path) {
        json_object *cfg = json_object_from_file(config_path), *v;
        if (cfg && json_object_object_get_ex(cfg, "add_bos_token", &v) && json_object_is_type(v, json_type_boolean))
            gguf_w_bool(w, "tokenizer.ggml.add_bos_token", json_object_get_boolean(v));
        json_object_put(cfg);
    }
    if (t->chat_template)
        gguf_w_str(w, "tokenizer.chat_template", t->chat_template);
    if (embed_json)
        gguf_w_str(w, "petrel.tokenizer.json", text);
    for (int32_t i = 0; i < n; i++)
        free(pads[i]);
    free(pads);
    free(toks);
    free(types);
    json_object_put(root);
    pt_tokenizer_free(t);
    free(text);
    return 0;
}

// ---- reading -------------------------------------------------------------------

static json_object *split_step(const char *re)
{
    json_object *s = json_object_new_object(), *p = json_object_new_object();
    json_object_object_add(s, "type", json_object_new_string("Split"));
    json_object_object_add(p, "Regex", json_object_new_string(re));
    json_object_object_add(s, "pattern", p);
    json_object_object_add(s, "behavior", json_object_new_string("Isolated"));
    json_object_object_add(s, "invert", json_object_new_boolean(false));
    return s;
}

static json_object *bytelevel(bool use_regex)
{
    json_object *b = json_object_new_object();
    json_object_object_add(b, "type", json_object_new_string("ByteLevel"));
    json_object_object_add(b, "add_prefix_space", json_object_new_boolean(false));
    json_object_object_add(b, "use_regex", json_object_new_boolean(use_regex));
    return b;
}

// Pre-tokenizer for a tokenizer.ggml.pre name: DeepSeek-V3's three splits,
// Qwen2's or GPT-2's regex, and Llama-3's regex for everything else.
static json_object *pretok_for(const char *pre)
{
    json_object *seq = json_object_new_object(), *arr = json_object_new_array();
    json_object_object_add(seq, "type", json_object_new_string("Sequence"));
    bool gpt2 = pre && (!strcmp(pre, "gpt-2") || !strcmp(pre, "gpt2"));
    if (pre && (!strcmp(pre, "deepseek-v3") || !strcmp(pre, "deepseek-r1")))
        for (int i = 0; i < 3; i++)
            json_object_array_add(arr, split_step(DSV3_RE[i]));
    else if (pre && !strcmp(pre, "qwen2"))
        json_object_array_add(arr, split_step(QWEN2_RE));
    else if (!gpt2)
        json_object_array_add(arr, split_step(LLAMA3_RE));
    json_object_array_add(arr, bytelevel(gpt2));
    json_object_object_add(seq, "pretokenizers", arr);
    return seq;
}

static const gguf_kv *get_arr(const gguf_file *g, const char *key, uint32_t et)
{
    const gguf_kv *kv = gguf_get(g, key);
    return kv && kv->type == GGUF_ARRAY && kv->arr_type == et ? kv : NULL;
}

// Rebuilds tokenizer.json text from llama.cpp-style gpt2 metadata.
static char *json_from_ggml(const gguf_file *g, pt_err *err)
{
    const gguf_kv *toks = get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
    const gguf_kv *merges = get_arr(g, "tokenizer.ggml.merges", GGUF_STRING);
    const gguf_kv *types = get_arr(g, "tokenizer.ggml.token_type", GGUF_INT32);
    if (!toks) {
        pt_errf(err, "%s: key 'tokenizer.ggml.tokens': missing or not a string array", g->path);
        return NULL;
    }
    if (!merges) {
        pt_errf(err, "%s: key 'tokenizer.ggml.merges': missing or not a string array", g->path);
        return NULL;
    }
    if (types && types->n != toks->n) {
        pt_errf(err, "%s: key 'tokenizer.ggml.token_type': %llu entries for %llu tokens", g->path,
                (unsigned long long)types->n, (unsigned long long)toks->n);
        return NULL;
    }
    const gguf_str *ts = toks->arr, *ms = merges->arr;
    const int32_t *ty = types ? types->arr : NULL;
    const gguf_kv *prekv = gguf_get(g, "tokenizer.ggml.pre");
    const char *pre = prekv && prekv->type == GGUF_STRING ? prekv->str.s : NULL;
    json_object *root = json_object_new_object(), *model = json_object_new_object();
    json_object *vocab = json_object_new_object(), *marr = json_object_new_array_ext((int)merges->n);
    json_object *added = json_object_new_array();
    for (uint64_t i = 0; i < toks->n; i++) {
        int32_t tt = ty ? ty[i] : 1;
        if (tt == 5)
            continue; // unused / padding hole
        json_object_object_add(vocab, ts[i].s, json_object_new_int((int32_t)i));
        if (tt == 3 || tt == 4) {
            json_object *a = json_object_new_object();
            json_object_object_add(a, "id", json_object_new_int((int32_t)i));
            json_object_object_add(a, "content", json_object_new_string(ts[i].s));
            json_object_object_add(a, "special", json_object_new_boolean(tt == 3));
            json_object_object_add(a, "normalized", json_object_new_boolean(tt != 3));
            json_object_array_add(added, a);
        }
    }
    for (uint64_t i = 0; i < merges->n; i++)
        json_object_array_add(marr, json_object_new_string(ms[i].s));
    json_object_object_add(model, "type", json_object_new_string("BPE"));
    json_object_object_add(model, "vocab", vocab);
    json_object_object_add(model, "merges", marr);
    json_object_object_add(root, "model", model);
    json_object_object_add(root, "added_tokens", added);
    json_object_object_add(root, "pre_tokenizer", pretok_for(pre));
    json_object *dec = json_object_new_object();
    json_object_object_add(dec, "type", json_object_new_string("ByteLevel"));
    json_object_object_add(root, "decoder", dec);
    char *text = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
    return text;
}

pt_tokenizer *pt_tokenizer_from_gguf(const gguf_file *g, pt_err *err)
{
    assert(g);
    const gguf_kv *js = gguf_get(g, "petrel.tokenizer.json");
    const gguf_kv *tp = gguf_get(g, "petrel.tokenizer.tiktoken_pattern");
    const gguf_kv *prekv = gguf_get(g, "tokenizer.ggml.pre");
    char name[1200];
    pt_tokenizer *t;
    bool kimi = prekv && prekv->type == GGUF_STRING && !strcmp(prekv->str.s, "kimi-k2");
    if ((tp && tp->type == GGUF_STRING) || (kimi && !js)) {
        // tiktoken: ranks are the ids of the normal tokens (llama.cpp writes
        // Kimi-K2's that way), so tiktoken's merge rule is rebuilt exactly
        const gguf_kv *toks = get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
        const gguf_kv *types = get_arr(g, "tokenizer.ggml.token_type", GGUF_INT32);
        if (!toks) {
            pt_errf(err, "%s: key 'tokenizer.ggml.tokens': missing or not a string array", g->path);
            return NULL;
        }
        if (types && types->n != toks->n) {
            pt_errf(err, "%s: key 'tokenizer.ggml.token_type': %llu entries for %llu tokens", g->path,
                    (unsigned long long)types->n, (unsigned long long)toks->n);
            return NULL;
        }
        snprintf(name, sizeof name, "%s: tokenizer.ggml.* (tiktoken)", g->path);
        t = tok_tiktoken_from_tokens(name, toks->arr, types ? types->arr : NULL, toks->n,
                                     tp && tp->type == GGUF_STRING ? tp->str.s : tok_kimi_pattern, err);
    } else if (js && js->type == GGUF_STRING) {
        snprintf(name, sizeof name, "%s: petrel.tokenizer.json", g->path);
        t = pt_tokenizer_from_json(js->str.s, js->str.len, name, err);
    } else {
        const gguf_kv *m = gguf_get(g, "tokenizer.ggml.model");
        if (!m || m->type != GGUF_STRING) {
            pt_errf(err, "%s: no tokenizer (key 'tokenizer.ggml.model' missing): text commands are unavailable, "
                         "use token ids", g->path);
            return NULL;
        }
        if (strcmp(m->str.s, "gpt2")) {
            pt_errf(err, "%s: tokenizer.ggml.model '%s': text commands are unavailable for this tokenizer type "
                         "(Petrel supports byte-level BPE, 'gpt2'); use token ids", g->path, m->str.s);
            return NULL;
        }
        char *text = json_from_ggml(g, err);
        if (!text)
            return NULL;
        snprintf(name, sizeof name, "%s: tokenizer.ggml.*", g->path);
        t = pt_tokenizer_from_json(text, strlen(text), name, err);
        free(text);
    }
    if (!t)
        return NULL;
    const gguf_kv *kv;
    if ((kv = gguf_get(g, "tokenizer.ggml.bos_token_id")) && kv->type == GGUF_UINT32 &&
        (int64_t)kv->v.u32 < t->n_vocab) {
        t->bos_id = (int32_t)kv->v.u32;
        t->bos_str = strdup(t->tok_str[t->bos_id] ? t->tok_str[t->bos_id] : "");
    }
    if ((kv = gguf_get(g, "tokenizer.ggml.eos_token_id")) && kv->type == GGUF_UINT32 &&
        (int64_t)kv->v.u32 < t->n_vocab) {
        t->eos_id = (int32_t)kv->v.u32;
        t->eos_str = strdup(t->tok_str[t->eos_id] ? t->tok_str[t->eos_id] : "");
    }
    if ((kv = gguf_get(g, "tokenizer.chat_template")) && kv->type == GGUF_STRING)
        t->chat_template = strdup(kv->str.s);
    // llama.cpp's end-of-turn token (e.g. Kimi's <|im_end|>) ends generation too
    if ((kv = gguf_get(g, "tokenizer.ggml.eot_token_id")) && kv->type == GGUF_UINT32 &&
        (int64_t)kv->v.u32 < t->n_vocab)
        pt_tokenizer_add_eog(t, (int32_t)kv->v.u32);
    return t;
}

pt_tokenizer *pt_tokenizer_open(const char *model_gguf, const char *tokenizer_json, pt_err *err)
{
    assert(!!model_gguf != !!tokenizer_json);
    if (model_gguf) {
        gguf_file *g = gguf_open(model_gguf, err);
        if (!g)
            return NULL;
        pt_tokenizer *t = pt_tokenizer_from_gguf(g, err);
        gguf_close(g);
        return t;
    }
    // a folder: tiktoken (tiktoken.model) or a tokenizer.json inside it
    struct stat st;
    char *inside = NULL;
    if (!stat(tokenizer_json, &st) && S_ISDIR(st.st_mode)) {
        if (pt_tokenizer_is_tiktoken_dir(tokenizer_json))
            return pt_tokenizer_load_tiktoken(tokenizer_json, err);
        inside = malloc(strlen(tokenizer_json) + 32);
        assert(inside);
        sprintf(inside, "%s/tokenizer.json", tokenizer_json);
        tokenizer_json = inside;
    } else {
        const char *base = strrchr(tokenizer_json, '/');
        base = base ? base + 1 : tokenizer_json;
        if (!strcmp(base, "tiktoken.model")) {
            char *dir = strndup(tokenizer_json, (size_t)(base - tokenizer_json));
            pt_tokenizer *t = pt_tokenizer_load_tiktoken(*dir ? dir : ".", err);
            free(dir);
            return t;
        }
    }
    pt_tokenizer *t = pt_tokenizer_load(tokenizer_json, err);
    if (!t) {
        free(inside);
        return NULL;
    }
    // tokenizer_config.json next to it, when there is one
    size_t n = strlen(tokenizer_json);
    char *cfg = malloc(n + 32);
    assert(cfg);
    memcpy(cfg, tokenizer_json, n + 1);
    char *slash = strrchr(cfg, '/');
    strcpy(slash ? slash + 1 : cfg, "tokenizer_config.json");
    FILE *f = fopen(cfg, "rb");
    if (f) {
        fclose(f);
        if (pt_tokenizer_load_config(t, cfg, err) < 0) {
            free(cfg);
            free(inside);
            pt_tokenizer_free(t);
            return NULL;
        }
    }
    free(cfg);
    free(inside);
    return t;
}

// tokenizer/tok_load.c — builds a pt_tokenizer from tokenizer.json text.
//
// Supported components (anything else is an error naming the field):
//   model          BPE (vocab, merges "a b" or ["a","b"], ignore_merges,
//                  byte_fallback, unk_token, fuse_unk)
//   added_tokens   special / non-special; lstrip, rstrip, normalized,
//                  single_word
//   normalizer     null, Sequence, NFC, NFD, NFKC, NFKD, Lowercase,
//                  Replace (String pattern), Prepend
//   pre_tokenizer  null, Sequence, Split (Regex / String; all behaviours;
//                  invert), ByteLevel (add_prefix_space, use_regex),
//                  Digits, Whitespace, WhitespaceSplit
//   post_processor null, ByteLevel, TemplateProcessing, Bert/Roberta,
//                  Sequence
//   decoder        null, ByteLevel, ByteFallback, Fuse, Replace, Sequence
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static bool jbool(json_object *o, const char *key, bool def)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return def;
    return json_object_get_boolean(v);
}

static json_object *jget(json_object *o, const char *key)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return v;
}

// ---- node heads ----------------------------------------------------------------------

// Parses one normalizer / pre-tokenizer / post-processor node n at the
// field path field (for error messages); 0 or -1 with err set.
typedef int (*tok_node_fn)(pt_tokenizer *t, json_object *n, const char *field, pt_err *err);

// The part every node parser shares: a null node (n NULL) is nothing (0);
// a node without a string "type" is an error naming field.type (-1); a
// "Sequence" node has its array n[key] (an error naming field.key when it
// is missing or not an array) parsed element by element with parse, in
// order, each at the field path field.key[i] (0, or -1 at the first
// failure). Returns 1 with *type set when the caller parses n by its type.
static int node_head(pt_tokenizer *t, json_object *n, const char *field, const char *key, tok_node_fn parse,
                     const char **type, pt_err *err)
{
    if (!n)
        return 0;
    *type = jstr(n, "type");
    if (!*type)
        return pt_errf(err, "%s: field '%s.type': missing", t->name, field);
    if (strcmp(*type, "Sequence"))
        return 1;
    json_object *arr = jget(n, key);
    if (!arr || !json_object_is_type(arr, json_type_array))
        return pt_errf(err, "%s: field '%s.%s': missing or not an array", t->name, field, key);
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s.%s[%zu]", field, key, i);
        if (parse(t, json_object_array_get_idx(arr, i), sub, err) < 0)
            return -1;
    }
    return 0;
}

// ---- normalizer ----------------------------------------------------------------

static int parse_normalizer(pt_tokenizer *t, json_object *n, const char *field, pt_err *err)
{
    const char *type;
    const int head = node_head(t, n, field, "normalizers", parse_normalizer, &type, err);
    if (head <= 0)
        return head;
    tok_norm nm = {0};
    if (!strcmp(type, "NFC")) nm.kind = NORM_NFC;
    else if (!strcmp(type, "NFD")) nm.kind = NORM_NFD;
    else if (!strcmp(type, "NFKC")) nm.kind = NORM_NFKC;
    else if (!strcmp(type, "NFKD")) nm.kind = NORM_NFKD;
    else if (!strcmp(type, "Lowercase")) nm.kind = NORM_LOWER;
    else if (!strcmp(type, "Prepend")) {
        nm.kind = NORM_PREPEND;
        const char *p = jstr(n, "prepend");
        if (!p)
            return pt_errf(err, "%s: field '%s.prepend': missing", t->name, field);
        nm.rep = strdup(p);
    } else if (!strcmp(type, "Replace")) {
        nm.kind = NORM_REPLACE;
        const char *pat = jstr(jget(n, "pattern"), "String"), *rep = jstr(n, "content");
        if (!pat || !rep || !*pat)
            return pt_errf(err, "%s: field '%s': only Replace with a non-empty String pattern and a content is supported",
                           t->name, field);
        nm.pat = strdup(pat);
        nm.rep = strdup(rep);
    } else
        return pt_errf(err, "%s: field '%s.type': unsupported normalizer '%s'", t->name, field, type);
    t->norm = realloc(t->norm, (size_t)(t->n_norm + 1) * sizeof *t->norm);
    assert(t->norm);
    t->norm[t->n_norm++] = nm;
    return 0;
}

// ---- pre-tokenizer ---------------------------------------------------------------

static int add_pre(pt_tokenizer *t, tok_pre p, const char *field, pt_err *err)
{
    if (t->n_pre == TOK_MAX_PRE)
        return pt_errf(err, "%s: field '%s': more than %d pre-tokenizer steps", t->name, field, TOK_MAX_PRE);
    t->pre[t->n_pre++] = p;
    return 0;
}

static int add_split_regex(pt_tokenizer *t, const char *re, bool literal, int beh, bool invert,
                           const char *field, pt_err *err)
{
    char where[512];
    snprintf(where, sizeof where, "%s: field '%s'", t->name, field);
    tok_pre p = {.kind = PRE_SPLIT, .behavior = beh, .invert = invert};
    p.re = tok_regex_compile(re, literal, where, err);
    if (!p.re)
        return -1;
    return add_pre(t, p, field, err);
}

static int parse_pretok(pt_tokenizer *t, json_object *n, const char *field, pt_err *err)
{
    const char *type;
    const int head = node_head(t, n, field, "pretokenizers", parse_pretok, &type, err);
    if (head <= 0)
        return head;
    if (!strcmp(type, "Split")) {
        json_object *pat = jget(n, "pattern");
        const char *re = jstr(pat, "Regex"), *lit = jstr(pat, "String");
        if (!re && !lit)
            return pt_errf(err, "%s: field '%s.pattern': expected {\"Regex\": ...} or {\"String\": ...}",
                           t->name, field);
        const char *b = jstr(n, "behavior");
        int beh;
        if (!b)
            return pt_errf(err, "%s: field '%s.behavior': missing", t->name, field);
        if (!strcmp(b, "Removed")) beh = BEH_REMOVED;
        else if (!strcmp(b, "Isolated")) beh = BEH_ISOLATED;
        else if (!strcmp(b, "MergedWithPrevious")) beh = BEH_MERGED_PREV;
        else if (!strcmp(b, "MergedWithNext")) beh = BEH_MERGED_NEXT;
        else if (!strcmp(b, "Contiguous")) beh = BEH_CONTIGUOUS;
        else
            return pt_errf(err, "%s: field '%s.behavior': unknown behavior '%s'", t->name, field, b);
        char sub[300];
        snprintf(sub, sizeof sub, "%s.pattern", field);
        return add_split_regex(t, re ? re : lit, !re, beh, jbool(n, "invert", false), sub, err);
    }
    if (!strcmp(type, "ByteLevel")) {
        tok_pre p = {.kind = PRE_BYTELEVEL, .add_prefix_space = jbool(n, "add_prefix_space", true)};
        if (jbool(n, "use_regex", true)) {
            char where[512];
            snprintf(where, sizeof where, "%s: field '%s'", t->name, field);
            p.re = tok_regex_compile(GPT2_REGEX, false, where, err);
            if (!p.re)
                return -1;
        }
        t->byte_level = true;
        return add_pre(t, p, field, err);
    }
    if (!strcmp(type, "Digits"))
        return add_split_regex(t, jbool(n, "individual_digits", false) ? "\\p{N}" : "\\p{N}+", false,
                               BEH_ISOLATED, false, field, err);
    if (!strcmp(type, "Whitespace"))
        return add_split_regex(t, "\\w+|[^\\w\\s]+", false, BEH_REMOVED, true, field, err);
    if (!strcmp(type, "WhitespaceSplit"))
        return add_split_regex(t, "\\s+", false, BEH_REMOVED, false, field, err);
    return pt_errf(err, "%s: field '%s.type': unsupported pre-tokenizer '%s'", t->name, field, type);
}

// ---- post-processor ----------------------------------------------------------------

static void post_push(int32_t **v, int *n, int32_t id)
{
    *v = realloc(*v, (size_t)(*n + 1) * sizeof **v);
    assert(*v);
    (*v)[(*n)++] = id;
}

static int parse_post(pt_tokenizer *t, json_object *n, const char *field, pt_err *err)
{
    const char *type;
    const int head = node_head(t, n, field, "processors", parse_post, &type, err);
    if (head <= 0)
        return head;
    if (!strcmp(type, "ByteLevel"))
        return 0; // offsets only
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        json_object *cls = jget(n, "cls"), *sep = jget(n, "sep");
        if (!cls || !sep || json_object_array_length(cls) < 2 || json_object_array_length(sep) < 2)
            return pt_errf(err, "%s: field '%s': cls/sep missing", t->name, field);
        post_push(&t->post.pre, &t->post.n_pre, json_object_get_int(json_object_array_get_idx(cls, 1)));
        post_push(&t->post.post, &t->post.n_post, json_object_get_int(json_object_array_get_idx(sep, 1)));
        return 0;
    }
    if (!strcmp(type, "TemplateProcessing")) {
        json_object *single = jget(n, "single"), *sp = jget(n, "special_tokens");
        if (!single || !json_object_is_type(single, json_type_array))
            return pt_errf(err, "%s: field '%s.single': missing or not an array", t->name, field);
        bool after = false;
        for (size_t i = 0; i < json_object_array_length(single); i++) {
            json_object *e = json_object_array_get_idx(single, i), *st;
            if (jget(e, "Sequence")) {
                after = true;
                continue;
            }
            if (!(st = jget(e, "SpecialToken")) || !jstr(st, "id"))
                return pt_errf(err, "%s: field '%s.single[%zu]': expected Sequence or SpecialToken", t->name,
                               field, i);
            const char *name = jstr(st, "id");
            json_object *ids = jget(jget(sp, name), "ids");
            if (!ids || !json_object_is_type(ids, json_type_array))
                return pt_errf(err, "%s: field '%s.special_tokens[\"%s\"].ids': missing", t->name, field, name);
            for (size_t k = 0; k < json_object_array_length(ids); k++) {
                int32_t id = json_object_get_int(json_object_array_get_idx(ids, k));
                if (after)
                    post_push(&t->post.post, &t->post.n_post, id);
                else
                    post_push(&t->post.pre, &t->post.n_pre, id);
            }
        }
        return 0;
    }
    return pt_errf(err, "%s: field '%s.type': unsupported post-processor '%s'", t->name, field, type);
}

// ---- model ------------------------------------------------------------------------------

static int parse_model(pt_tokenizer *t, json_object *m, json_object *added, pt_err *err)
{
    if (!m)
        return pt_errf(err, "%s: field 'model': missing", t->name);
    const char *type = jstr(m, "type");
    json_object *vocab = jget(m, "vocab"), *merges = jget(m, "merges");
    if (type && strcmp(type, "BPE"))
        return pt_errf(err, "%s: field 'model.type': unsupported model '%s' (only BPE)", t->name, type);
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return pt_errf(err, "%s: field 'model.vocab': missing or not an object", t->name);
    if (!merges || !json_object_is_type(merges, json_type_array))
        return pt_errf(err, "%s: field 'model.merges': missing or not an array", t->name);
    // an empty prefix / suffix means none (Qwen3's and many others' files say "")
    const char *csp = jstr(m, "continuing_subword_prefix"), *eow = jstr(m, "end_of_word_suffix");
    if ((csp && *csp) || (eow && *eow))
        return pt_errf(err, "%s: field 'model.continuing_subword_prefix': subword prefixes/suffixes are not supported",
                       t->name);
    t->ignore_merges = jbool(m, "ignore_merges", false);
    t->byte_fallback = jbool(m, "byte_fallback", false);
    t->fuse_unk = jbool(m, "fuse_unk", false);

    // ids: max over vocab and added tokens
    int64_t maxid = -1;
    json_object_object_foreach(vocab, k, v) {
        (void)k;
        int64_t id = json_object_get_int64(v);
        if (!json_object_is_type(v, json_type_int) || id < 0 || id > 0x7fffffff)
            return pt_errf(err, "%s: field 'model.vocab[\"%s\"]': id is not a non-negative integer", t->name, k);
        if (id > maxid)
            maxid = id;
    }
    size_t n_added = added ? json_object_array_length(added) : 0;
    for (size_t i = 0; i < n_added; i++) {
        json_object *a = json_object_array_get_idx(added, i), *idv = jget(a, "id");
        if (!idv || !json_object_is_type(idv, json_type_int) || json_object_get_int64(idv) < 0 ||
            json_object_get_int64(idv) > 0x7fffffff || !jstr(a, "content"))
            return pt_errf(err, "%s: field 'added_tokens[%zu]': needs an integer 'id' and a string 'content'",
                           t->name, i);
        if (json_object_get_int64(idv) > maxid)
            maxid = json_object_get_int64(idv);
    }
    t->n_vocab = (int32_t)(maxid + 1);
    t->tok_str = calloc((size_t)t->n_vocab + 1, sizeof *t->tok_str);
    t->attr = calloc((size_t)t->n_vocab + 1, 1);
    assert(t->tok_str && t->attr);
    for (int32_t i = 0; i < t->n_vocab; i++)
        t->attr[i] = TOK_ATTR_HOLE;
    tok_strmap_init(&t->strs, (uint32_t)json_object_object_length(vocab) + (uint32_t)n_added);
    json_object_object_foreach(vocab, k2, v2) {
        int32_t id = json_object_get_int(v2);
        if (t->tok_str[id]) {
            free(t->tok_str[id]); // duplicate id: the later key wins, as in HF's reverse map
        }
        t->tok_str[id] = strdup(k2);
        t->attr[id] = TOK_ATTR_NORMAL;
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->tok_str[id])
            tok_strmap_put(&t->strs, t->tok_str[id], (uint32_t)strlen(t->tok_str[id]), id);

    // byte symbols
    for (int b = 0; b < 256; b++) {
        char u[8];
        int l = tok_utf8_enc(tok_byte_to_cp[b], u);
        t->byte_id[b] = tok_strmap_get(&t->strs, u, (uint32_t)l);
        snprintf(u, sizeof u, "<0x%02X>", b);
        t->fb_id[b] = tok_strmap_get(&t->strs, u, 6);
    }
    const char *unk = jstr(m, "unk_token");
    t->unk_id = unk ? tok_strmap_get(&t->strs, unk, (uint32_t)strlen(unk)) : -1;

    // merges
    size_t nm = json_object_array_length(merges);
    tok_pairmap_init(&t->merges, (uint32_t)nm);
    t->merge_str = calloc(nm + 1, sizeof *t->merge_str);
    assert(t->merge_str);
    char *cat = NULL;
    size_t catcap = 0;
    for (size_t r = 0; r < nm; r++) {
        json_object *e = json_object_array_get_idx(merges, r);
        const char *a, *b;
        size_t la, lb;
        char *line = NULL;
        if (json_object_is_type(e, json_type_string)) {
            const char *s = json_object_get_string(e), *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return free(cat), pt_errf(err, "%s: field 'model.merges[%zu]': '%s' is not \"a b\"", t->name, r, s);
            a = s;
            la = (size_t)(sp - s);
            b = sp + 1;
            lb = strlen(b);
            line = strdup(s);
        } else if (json_object_is_type(e, json_type_array) && json_object_array_length(e) == 2 &&
                   json_object_is_type(json_object_array_get_idx(e, 0), json_type_string) &&
                   json_object_is_type(json_object_array_get_idx(e, 1), json_type_string)) {
            a = json_object_get_string(json_object_array_get_idx(e, 0));
            b = json_object_get_string(json_object_array_get_idx(e, 1));
            la = strlen(a);
            lb = strlen(b);
            line = malloc(la + lb + 2);
            assert(line);
            memcpy(line, a, la);
            line[la] = ' ';
            memcpy(line + la + 1, b, lb + 1);
        } else
            return free(cat), pt_errf(err, "%s: field 'model.merges[%zu]': expected \"a b\" or [\"a\", \"b\"]",
                                      t->name, r);
        t->merge_str[r] = line;
        t->n_merges = (int32_t)r + 1;
        if (la + lb + 1 > catcap) {
            catcap = (la + lb + 1) * 2;
            cat = realloc(cat, catcap);
            assert(cat);
        }
        memcpy(cat, a, la);
        memcpy(cat + la, b, lb);
        int32_t ia = tok_strmap_get(&t->strs, a, (uint32_t)la), ib = tok_strmap_get(&t->strs, b, (uint32_t)lb);
        int32_t io = tok_strmap_get(&t->strs, cat, (uint32_t)(la + lb));
        if (ia < 0 || ib < 0 || io < 0) {
            free(cat);
            return pt_errf(err, "%s: field 'model.merges[%zu]': '%s' uses a token missing from model.vocab",
                           t->name, r, line);
        }
        tok_pairmap_put(&t->merges, ia, ib, (int32_t)r, io);
    }
    free(cat);
    return 0;
}

// Added tokens: flags, strings, attributes; content registered in t->strs.
static int parse_added(pt_tokenizer *t, json_object *added, pt_err *err)
{
    size_t n = added ? json_object_array_length(added) : 0;
    t->added = calloc(n + 1, sizeof *t->added);
    assert(t->added);
    for (size_t i = 0; i < n; i++) {
        json_object *a = json_object_array_get_idx(added, i);
        tok_added *d = &t->added[t->n_added++];
        d->id = json_object_get_int(jget(a, "id"));
        d->content = strdup(jstr(a, "content"));
        d->len = (uint32_t)strlen(d->content);
        d->special = jbool(a, "special", false);
        d->lstrip = jbool(a, "lstrip", false);
        d->rstrip = jbool(a, "rstrip", false);
        d->normalized = jbool(a, "normalized", !d->special);
        d->single_word = jbool(a, "single_word", false);
        if (!d->len)
            return pt_errf(err, "%s: field 'added_tokens[%zu].content': empty", t->name, i);
        if (!t->tok_str[d->id] || strcmp(t->tok_str[d->id], d->content)) {
            // the old string may be a key of t->strs: retire it, freed with t
            if (t->tok_str[d->id]) {
                t->retired = realloc(t->retired, (size_t)(t->n_retired + 1) * sizeof *t->retired);
                assert(t->retired);
                t->retired[t->n_retired++] = t->tok_str[d->id];
            }
            t->tok_str[d->id] = strdup(d->content);
        }
        t->attr[d->id] = TOK_ATTR_ADDED | (d->special ? TOK_ATTR_SPECIAL : 0);
        if (d->normalized && t->n_norm)
            t->has_norm_tokens = true;
    }
    for (int i = 0; i < t->n_added; i++)
        tok_strmap_put(&t->strs, t->tok_str[t->added[i].id], (uint32_t)strlen(t->tok_str[t->added[i].id]),
                       t->added[i].id);
    tok_trie_build(&t->trie_raw, t, false);
    tok_trie_build(&t->trie_norm, t, true);
    return 0;
}

// Raw-byte form of every vocab token (byte-level + ignore_merges only).
static void build_raw_map(pt_tokenizer *t)
{
    tok_strmap_init(&t->raw, (uint32_t)t->n_vocab);
    t->raw_str = calloc((size_t)t->n_vocab + 1, sizeof *t->raw_str);
    assert(t->raw_str);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->attr[id] != TOK_ATTR_NORMAL)
            continue;
        char *raw;
        size_t rl;
        if (tok_bytelevel_unmap(t->tok_str[id], &raw, &rl)) {
            t->raw_str[id] = raw;
            tok_strmap_put(&t->raw, raw, (uint32_t)rl, id);
        }
    }
}

pt_tokenizer *pt_tokenizer_from_json(const char *json, size_t len, const char *name, pt_err *err)
{
    assert(json && name);
    json_tokener *tk = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
    json_object *root = json_tokener_parse_ex(tk, json, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tk);
    size_t off = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    if (!root || je != json_tokener_success) {
        if (root)
            json_object_put(root);
        pt_errf(err, "%s: malformed JSON at byte %zu: %s", name, off,
                je == json_tokener_continue ? "unexpected end of input" : json_tokener_error_desc(je));
        return NULL;
    }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        pt_errf(err, "%s: top level is not a JSON object", name);
        return NULL;
    }
    pt_tokenizer *t = calloc(1, sizeof *t);
    assert(t);
    t->name = strdup(name);
    t->bos_id = t->eos_id = -1;
    json_object *added = jget(root, "added_tokens");
    if (added && !json_object_is_type(added, json_type_array)) {
        pt_errf(err, "%s: field 'added_tokens': not an array", name);
        goto fail;
    }
    if (parse_normalizer(t, jget(root, "normalizer"), "normalizer", err) < 0 ||
        parse_pretok(t, jget(root, "pre_tokenizer"), "pre_tokenizer", err) < 0 ||
        parse_model(t, jget(root, "model"), added, err) < 0 || parse_added(t, added, err) < 0 ||
        parse_post(t, jget(root, "post_processor"), "post_processor", err) < 0 ||
        tok_build_pieces(t, jget(root, "decoder"), err) < 0)
        goto fail;
    if (t->byte_level) {
        // bytes without a symbol are dropped (or unk), as HF does
        if (t->ignore_merges)
            build_raw_map(t);
    }
    t->cache = tok_cache_new();
    json_object_put(root);
    return t;
fail:
    json_object_put(root);
    pt_tokenizer_free(t);
    return NULL;
}

pt_tokenizer *pt_tokenizer_load(const char *path, pt_err *err)
{
    size_t len;
    char *text = pt_read_file(path, &len, err);
    if (!text)
        return NULL;
    pt_tokenizer *t = pt_tokenizer_from_json(text, len, path, err);
    free(text);
    return t;
}

void pt_tokenizer_free(pt_tokenizer *t)
{
    if (!t)
        return;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->tok_str)
            free(t->tok_str[i]);
        if (t->piece)
            free(t->piece[i]);
        if (t->raw_str)
            free(t->raw_str[i]);
    }
    free(t->tok_str);
    for (int i = 0; i < t->n_retired; i++)
        free(t->retired[i]);
    free(t->retired);
    free(t->piece);
    free(t->raw_str);
    free(t->piece_len);
    free(t->attr);
    tok_strmap_free(&t->strs);
    tok_strmap_free(&t->raw);
    tok_pairmap_free(&t->merges);
    for (int32_t i = 0; i < t->n_merges; i++)
        free(t->merge_str[i]);
    free(t->merge_str);
    for (int i = 0; i < t->n_added; i++)
        free(t->added[i].content);
    free(t->added);
    tok_trie_free(&t->trie_raw);
    tok_trie_free(&t->trie_norm);
    for (int i = 0; i < t->n_norm; i++) {
        free(t->norm[i].pat);
        free(t->norm[i].rep);
    }
    free(t->norm);
    for (int i = 0; i < t->n_pre; i++)
        if (t->pre[i].re)
            pcre2_code_free(t->pre[i].re);
    free(t->post.pre);
    free(t->post.post);
    free(t->bos_str);
    free(t->eos_str);
    free(t->chat_template);
    free(t->eog);
    free(t->tiktoken_pat);
    tok_cache_free(t->cache);
    free(t->name);
    free(t);
}

// ---- tokenizer_config.json --------------------------------------------------------

// bos_token / eos_token: a string or an AddedToken object with "content".
static const char *token_field(json_object *cfg, const char *key)
{
    json_object *v = jget(cfg, key);
    if (!v)
        return NULL;
    if (json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return jstr(v, "content");
}

int pt_tokenizer_load_config(pt_tokenizer *t, const char *path, pt_err *err)
{
    size_t len;
    char *text = pt_read_file(path, &len, err);
    if (!text)
        return -1;
    json_tokener *tk = json_tokener_new();
    json_object *cfg = json_tokener_parse_ex(tk, text, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tk);
    size_t off = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    free(text);
    if (!cfg || je != json_tokener_success || !json_object_is_type(cfg, json_type_object)) {
        if (cfg)
            json_object_put(cfg);
        return pt_errf(err, "%s: malformed JSON at byte %zu", path, off);
    }
    const char *bos = token_field(cfg, "bos_token"), *eos = token_field(cfg, "eos_token");
    if (bos) {
        free(t->bos_str);
        t->bos_str = strdup(bos);
        t->bos_id = pt_tokenizer_token_id(t, bos);
    }
    if (eos) {
        free(t->eos_str);
        t->eos_str = strdup(eos);
        t->eos_id = pt_tokenizer_token_id(t, eos);
    }
    json_object *ct = jget(cfg, "chat_template");
    const char *tmpl = NULL;
    if (ct && json_object_is_type(ct, json_type_string))
        tmpl = json_object_get_string(ct);
    else if (ct && json_object_is_type(ct, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(ct); i++) {
            json_object *e = json_object_array_get_idx(ct, i);
            const char *nm = jstr(e, "name");
            if (!tmpl || (nm && !strcmp(nm, "default")))
                tmpl = jstr(e, "template");
        }
    }
    if (tmpl) {
        free(t->chat_template);
        t->chat_template = strdup(tmpl);
    }
    json_object_put(cfg);
    return 0;
}

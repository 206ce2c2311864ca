// tokenizer/tok_tiktoken.c — the tiktoken tokenizer kind (Kimi-K2; OpenAI's
// encodings): a rank file, special tokens and a pre-tokenizer pattern.
//
// A tiktoken folder holds
//   tiktoken.model          one "<base64 of the token's bytes> <rank>" per line;
//                           the rank is the token id
//   tokenizer_config.json   added_tokens_decoder {"id": {"content": ...}},
//                           bos/eos tokens, the chat template
//   pat_str.txt (optional)  the pattern in tiktoken's own (Rust) syntax;
//                           without it the folder is Kimi's and Kimi's
//                           pattern applies
//   chat_template.jinja (optional) used when the config has no template
// A special <|im_end|> is an end-of-generation id besides the eos.
// Special ids: those listed in added_tokens_decoder; in Kimi's folder (its
// pattern: no pat_str.txt, or Kimi's pattern in it) also, as
// tokenization_kimi.py, the 256 + 2 ids right after the rank table,
// unlisted ones named "<|reserved_token_N|>".
// Kimi's encode cuts the text before anything else into pieces of at most
// 400,000 characters and no more than 25,000 consecutive (non-)whitespace
// characters (its _split_whitespaces_or_nonwhitespaces), each encoded on
// its own; a tokenizer with Kimi's pattern does the same (tok_encode.c).
//
// The result is an ordinary pt_tokenizer, so encode/decode/streaming are
// shared: byte-level, one regex split keeping the matches only, and
// tiktoken's merge rule expressed as a pair table. tiktoken merges the adjacent pair whose
// concatenated bytes have the lowest rank (leftmost on ties) — so every
// split (a, b) of every token c with a and b tokens is a pair of rank
// rank(c); and a piece that is itself a token is that token (tiktoken's
// first lookup), which is HF's ignore_merges.
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

#define KIMI_RESERVED 258 // 256 reserved + 2, right after the last rank

// ---- base64 ------------------------------------------------------------------

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Decodes standard base64 (padding optional) of n chars into out (room for
// n * 3 / 4 + 3 bytes). Returns the byte count or -1 on a bad character.
static long b64_decode(const char *s, size_t n, unsigned char *out)
{
    while (n && s[n - 1] == '=')
        n--;
    long o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return o;
}

// ---- building the tokenizer ----------------------------------------------------

// GPT-2 byte-level spelling of raw bytes (the tokenizer.ggml.tokens form).
static char *bytelevel_str(const char *b, size_t n)
{
    char *s = malloc(n * 2 + 1), *o = s;
    assert(s);
    for (size_t i = 0; i < n; i++)
        o += tok_utf8_enc(tok_byte_to_cp[(uint8_t)b[i]], o);
    *o = 0;
    return s;
}

enum { TIK_HOLE = 0, TIK_RANK = 1, TIK_SPECIAL = 2 };

// Builds the tokenizer from n ids: kind[i] (TIK_*) and bytes[i] (len[i];
// for a special, its name). Takes ownership of every bytes[i] and of the
// arrays. NULL + err when the pattern does not compile.
static pt_tokenizer *tik_build(const char *name, int32_t n, char **bytes, uint32_t *len, uint8_t *kind,
                               const char *pattern, pt_err *err)
{
    pt_tokenizer *t = calloc(1, sizeof *t);
    assert(t);
    t->name = strdup(name);
    t->bos_id = t->eos_id = t->unk_id = -1;
    t->n_vocab = n;
    t->byte_level = t->ignore_merges = true;
    t->tiktoken_pat = strdup(pattern);
    t->kimi_chunks = !strcmp(pattern, tok_kimi_pattern);
    t->tok_str = calloc((size_t)n + 1, sizeof *t->tok_str);
    t->attr = calloc((size_t)n + 1, 1);
    t->piece = bytes;
    t->piece_len = len;
    assert(t->tok_str && t->attr);
    int32_t n_special = 0;
    for (int32_t i = 0; i < n; i++)
        n_special += kind[i] == TIK_SPECIAL;
    tok_strmap_init(&t->strs, (uint32_t)n);
    tok_strmap_init(&t->raw, (uint32_t)n);
    t->added = calloc((size_t)n_special + 1, sizeof *t->added);
    assert(t->added);
    for (int32_t i = 0; i < n; i++) {
        if (!bytes[i]) {
            bytes[i] = strdup("");
            len[i] = 0;
        }
        if (kind[i] == TIK_HOLE) {
            t->attr[i] = TOK_ATTR_HOLE;
            continue;
        }
        if (kind[i] == TIK_SPECIAL) {
            t->tok_str[i] = strdup(bytes[i]);
            t->attr[i] = TOK_ATTR_ADDED | TOK_ATTR_SPECIAL;
            tok_added *a = &t->added[t->n_added++];
            a->id = i;
            a->content = strdup(bytes[i]);
            a->len = len[i];
            a->special = true;
        } else {
            t->tok_str[i] = bytelevel_str(bytes[i], len[i]);
            tok_strmap_put(&t->raw, bytes[i], len[i], i);
        }
        tok_strmap_put(&t->strs, t->tok_str[i], (uint32_t)strlen(t->tok_str[i]), i);
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = tok_strmap_get(&t->raw, &c, 1);
        t->fb_id[b] = -1;
    }
    // every split of every ranked token into two ranked tokens
    uint32_t n_pairs = 0;
    for (int32_t i = 0; i < n; i++)
        if (kind[i] == TIK_RANK && len[i] > 1)
            n_pairs += len[i] - 1;
    tok_pairmap_init(&t->merges, n_pairs);
    for (int32_t c = 0; c < n; c++) {
        if (kind[c] != TIK_RANK)
            continue;
        for (uint32_t k = 1; k < len[c]; k++) {
            int32_t a = tok_strmap_get(&t->raw, bytes[c], k);
            int32_t b = a < 0 ? -1 : tok_strmap_get(&t->raw, bytes[c] + k, len[c] - k);
            if (a >= 0 && b >= 0)
                tok_pairmap_put(&t->merges, a, b, c, c);
        }
    }
    tok_trie_build(&t->trie_raw, t, false);
    tok_trie_build(&t->trie_norm, t, true);
    free(kind);
    // Kimi's chat turns end with <|im_end|> (its generation_config's stop
    // token), as well as the eos [EOS]: both end a generated reply
    int32_t im_end = tok_strmap_get(&t->strs, "<|im_end|>", 10);
    if (im_end >= 0 && (t->attr[im_end] & TOK_ATTR_SPECIAL))
        pt_tokenizer_add_eog(t, im_end);
    char where[1100];
    snprintf(where, sizeof where, "%s", name);
    // only the pattern's matches are encoded (tiktoken's find_iter); text
    // no match covers is dropped, as tiktoken drops it: Removed + invert
    tok_pre p = {.kind = PRE_SPLIT, .behavior = BEH_REMOVED, .invert = true};
    p.re = tok_tiktoken_compile(pattern, where, err);
    if (!p.re) {
        pt_tokenizer_free(t);
        return NULL;
    }
    t->pre[t->n_pre++] = p;
    t->cache = tok_cache_new();
    return t;
}

// ---- the folder ----------------------------------------------------------------

static bool is_file(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

static char *join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    assert(p);
    snprintf(p, n, "%s/%s", dir, file);
    return p;
}

// Parses the rank file into per-rank bytes; *n_ranks = max rank + 1 and
// *n_lines the number of entries (tokenization_kimi's num_base_tokens).
static int read_ranks(const char *path, char ***bytes, uint32_t **len, int32_t *n_ranks, int32_t *n_lines,
                      pt_err *err)
{
    size_t size;
    char *text = pt_read_file(path, &size, err);
    if (!text)
        return -1;
    int32_t cap = 1024, maxr = -1, lines = 0;
    char **b = calloc((size_t)cap, sizeof *b);
    uint32_t *l = calloc((size_t)cap, sizeof *l);
    assert(b && l);
    unsigned char tmp[1024];
    long lineno = 0;
    for (char *p = text, *end = text + size; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        lineno++;
        char *q = le;
        if (q > p && q[-1] == '\r')
            q--;
        if (q == p) { // blank line
            p = le + 1;
            continue;
        }
        char *sp = memchr(p, ' ', (size_t)(q - p));
        char *rend = NULL;
        long rank = sp ? strtol(sp + 1, &rend, 10) : -1;
        long nb = -1;
        if (sp && rend == q && rank >= 0 && rank < 0x7fffff00 && (size_t)(sp - p) * 3 / 4 + 3 <= sizeof tmp)
            nb = b64_decode(p, (size_t)(sp - p), tmp);
        if (nb <= 0) {
            for (int32_t i = 0; i < cap; i++)
                free(b[i]);
            free(b), free(l), free(text);
            return pt_errf(err, "%s: line %ld: expected \"<base64 token> <rank>\"", path, lineno);
        }
        // Ranks are dense (0..lines-1), so one past the file's byte count is
        // corrupt: without this a 1 KB file could ask for a 16 GB table
        // (found by fuzz/fuzz_tiktoken.c).
        if ((size_t)rank >= size) {
            for (int32_t i = 0; i < cap; i++)
                free(b[i]);
            free(b), free(l), free(text);
            return pt_errf(err, "%s: line %ld: rank %ld is more than a %zu-byte file has lines", path, lineno, rank,
                           size);
        }
        if (rank >= cap) {
            int64_t nc = cap;
            while (rank >= nc)
                nc *= 2;
            if (nc > INT32_MAX)
                nc = INT32_MAX; // rank < 0x7fffff00 still fits
            b = realloc(b, (size_t)nc * sizeof *b);
            l = realloc(l, (size_t)nc * sizeof *l);
            assert(b && l);
            memset(b + cap, 0, (size_t)(nc - cap) * sizeof *b);
            memset(l + cap, 0, (size_t)(nc - cap) * sizeof *l);
            cap = (int32_t)nc;
        }
        if (b[rank]) {
            for (int32_t i = 0; i < cap; i++)
                free(b[i]);
            free(b), free(l), free(text);
            return pt_errf(err, "%s: line %ld: rank %ld appears twice", path, lineno, rank);
        }
        b[rank] = malloc((size_t)nb + 1);
        assert(b[rank]);
        memcpy(b[rank], tmp, (size_t)nb);
        b[rank][nb] = 0;
        l[rank] = (uint32_t)nb;
        if (rank > maxr)
            maxr = (int32_t)rank;
        lines++;
        p = le + 1;
    }
    free(text);
    if (maxr < 0) {
        free(b), free(l);
        return pt_errf(err, "%s: no tokens", path);
    }
    *bytes = b;
    *len = l;
    *n_ranks = maxr + 1;
    *n_lines = lines;
    return 0;
}

static json_object *read_json(const char *path, pt_err *err)
{
    size_t n;
    char *text = pt_read_file(path, &n, err);
    if (!text)
        return NULL;
    json_tokener *tk = json_tokener_new();
    json_object *o = json_tokener_parse_ex(tk, text, (int)n);
    bool ok = json_tokener_get_error(tk) == json_tokener_success && o && json_object_is_type(o, json_type_object);
    size_t off = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    free(text);
    if (!ok) {
        json_object_put(o);
        pt_errf(err, "%s: malformed JSON at byte %zu", path, off);
        return NULL;
    }
    return o;
}

// The pattern from pat_str.txt (one trailing newline dropped), or Kimi's.
static char *read_pattern(const char *dir, pt_err *err)
{
    char *p = join(dir, "pat_str.txt");
    if (!is_file(p)) {
        free(p);
        return strdup(tok_kimi_pattern);
    }
    size_t n;
    char *s = pt_read_file(p, &n, err);
    free(p);
    if (!s)
        return NULL;
    if (n && s[n - 1] == '\n')
        s[--n] = 0;
    if (n && s[n - 1] == '\r')
        s[--n] = 0;
    return s;
}

pt_tokenizer *pt_tokenizer_load_tiktoken(const char *dir, pt_err *err)
{
    assert(dir);
    char *model = join(dir, "tiktoken.model"), *cfg_path = join(dir, "tokenizer_config.json");
    pt_tokenizer *t = NULL;
    char **bytes = NULL;
    uint32_t *len = NULL;
    int32_t n_ranks = 0, n_lines = 0;
    int64_t n_alloc = 0; // entries of bytes[] to free on failure
    json_object *cfg = NULL;
    char *pattern = NULL;
    if (read_ranks(model, &bytes, &len, &n_ranks, &n_lines, err) < 0)
        goto out;
    n_alloc = n_ranks;
    if (!(cfg = read_json(cfg_path, err)) || !(pattern = read_pattern(dir, err)))
        goto bad;
    // ids: the ranks, the reserved block after the last rank, listed extras
    json_object *dec = NULL;
    json_object_object_get_ex(cfg, "added_tokens_decoder", &dec);
    if (dec && !json_object_is_type(dec, json_type_object))
        dec = NULL;
    // Kimi's folder (no pat_str.txt) has the reserved block; another
    // tiktoken encoding has exactly the special tokens it lists
    int reserved = strcmp(pattern, tok_kimi_pattern) ? 0 : KIMI_RESERVED;
    int64_t n = n_ranks > n_lines + reserved ? n_ranks : n_lines + reserved;
    if (dec) {
        json_object_object_foreach(dec, k, v) {
            (void)v;
            char *e;
            long id = strtol(k, &e, 10);
            if (*e || id < 0 || id > 0x7ffffff0) {
                pt_errf(err, "%s: field 'added_tokens_decoder[\"%s\"]': not a token id", cfg_path, k);
                goto bad;
            }
            if (id + 1 > n)
                n = id + 1;
        }
    }
    bytes = realloc(bytes, (size_t)n * sizeof *bytes);
    len = realloc(len, (size_t)n * sizeof *len);
    uint8_t *kind = calloc((size_t)n, 1);
    assert(bytes && len && kind);
    for (int64_t i = n_ranks; i < n; i++)
        bytes[i] = NULL, len[i] = 0;
    n_alloc = n;
    for (int32_t i = 0; i < n_ranks; i++)
        kind[i] = bytes[i] ? TIK_RANK : TIK_HOLE;
    for (int64_t i = n_lines; i < n_lines + reserved; i++) {
        if (kind[i] == TIK_RANK)
            continue; // a rank table with holes: ranks win
        char name[48];
        snprintf(name, sizeof name, "<|reserved_token_%lld|>", (long long)i);
        bytes[i] = strdup(name);
        kind[i] = TIK_SPECIAL;
    }
    if (dec) {
        json_object_object_foreach(dec, k, v) {
            long id = strtol(k, NULL, 10);
            json_object *c;
            if (!json_object_object_get_ex(v, "content", &c) || !json_object_is_type(c, json_type_string) ||
                !json_object_get_string_len(c)) {
                pt_errf(err, "%s: field 'added_tokens_decoder[\"%s\"].content': missing or empty", cfg_path, k);
                free(kind);
                goto bad;
            }
            if (kind[id] == TIK_RANK) {
                pt_errf(err, "%s: field 'added_tokens_decoder[\"%s\"]': id %ld is a rank of %s", cfg_path, k, id,
                        model);
                free(kind);
                goto bad;
            }
            free(bytes[id]);
            bytes[id] = strdup(json_object_get_string(c));
            kind[id] = TIK_SPECIAL;
        }
    }
    for (int64_t i = 0; i < n; i++)
        if (bytes[i] && kind[i] == TIK_SPECIAL)
            len[i] = (uint32_t)strlen(bytes[i]);
    t = tik_build(model, (int32_t)n, bytes, len, kind, pattern, err);
    bytes = NULL;
    if (!t)
        goto out;
    if (pt_tokenizer_load_config(t, cfg_path, err) < 0) {
        pt_tokenizer_free(t);
        t = NULL;
        goto out;
    }
    if (!t->chat_template) {
        char *jp = join(dir, "chat_template.jinja");
        size_t jn;
        if (is_file(jp) && !(t->chat_template = pt_read_file(jp, &jn, err))) {
            pt_tokenizer_free(t);
            t = NULL;
        }
        free(jp);
    }
    goto out;
bad:
    for (int64_t i = 0; i < n_alloc; i++)
        free(bytes[i]);
    free(bytes), free(len);
out:
    json_object_put(cfg);
    free(pattern);
    free(model);
    free(cfg_path);
    return t;
}

bool pt_tokenizer_is_tiktoken_dir(const char *dir)
{
    char *p = join(dir, "tiktoken.model");
    bool r = is_file(p);
    free(p);
    return r;
}

// ---- GGUF ------------------------------------------------------------------------

pt_tokenizer *tok_tiktoken_from_tokens(const char *name, const gguf_str *toks, const int32_t *types, uint64_t n,
                                       const char *pattern, pt_err *err)
{
    char **bytes = calloc(n + 1, sizeof *bytes);
    uint32_t *len = calloc(n + 1, sizeof *len);
    uint8_t *kind = calloc(n + 1, 1);
    assert(bytes && len && kind);
    for (uint64_t i = 0; i < n; i++) {
        int32_t ty = types ? types[i] : 1;
        if (ty == 5)
            continue; // unused ("[PADn]")
        if (ty == 3 || ty == 4) {
            bytes[i] = strdup(toks[i].s);
            len[i] = (uint32_t)strlen(bytes[i]);
            kind[i] = TIK_SPECIAL;
            continue;
        }
        size_t rl;
        if (!tok_bytelevel_unmap(toks[i].s, &bytes[i], &rl)) {
            for (uint64_t k = 0; k < n; k++)
                free(bytes[k]);
            free(bytes), free(len), free(kind);
            pt_errf(err, "%s: token %llu '%s' is not in the byte-level alphabet", name, (unsigned long long)i,
                    toks[i].s);
            return NULL;
        }
        len[i] = (uint32_t)rl;
        kind[i] = TIK_RANK;
    }
    return tik_build(name, (int32_t)n, bytes, len, kind, pattern, err);
}

// tiktoken's merge rule restricted to ranks below max_rank, over one
// token's bytes; returns the number of parts left and their ids in part.
static int bpe_below(const pt_tokenizer *t, const char *b, uint32_t n, int32_t max_rank, int32_t *part)
{
    int m = 0;
    for (uint32_t i = 0; i < n; i++)
        part[m++] = t->byte_id[(uint8_t)b[i]];
    for (;;) {
        int best = -1;
        int32_t br = max_rank, bo = -1;
        for (int i = 0; i + 1 < m; i++) {
            int32_t r, o;
            if (part[i] >= 0 && part[i + 1] >= 0 && tok_pairmap_get(&t->merges, part[i], part[i + 1], &r, &o) &&
                r < br) {
                br = r;
                bo = o;
                best = i;
            }
        }
        if (best < 0)
            return m;
        part[best] = bo;
        memmove(part + best + 1, part + best + 2, (size_t)(m - best - 2) * sizeof *part);
        m--;
    }
}

int32_t tok_tiktoken_merges(const pt_tokenizer *t, char ***out)
{
    assert(t->tiktoken_pat);
    char **m = calloc((size_t)t->n_vocab + 1, sizeof *m);
    int32_t nm = 0, cap = 0;
    int32_t *part = NULL;
    assert(m);
    for (int32_t c = 0; c < t->n_vocab; c++) {
        if (t->attr[c] != TOK_ATTR_NORMAL || t->piece_len[c] < 2)
            continue;
        if ((int32_t)t->piece_len[c] > cap) {
            cap = (int32_t)t->piece_len[c] * 2;
            part = realloc(part, (size_t)cap * sizeof *part);
            assert(part);
        }
        if (bpe_below(t, t->piece[c], t->piece_len[c], c, part) != 2 || part[0] < 0 || part[1] < 0)
            continue;
        const char *a = t->tok_str[part[0]], *b = t->tok_str[part[1]];
        size_t la = strlen(a), lb = strlen(b);
        char *s = malloc(la + lb + 2);
        assert(s);
        memcpy(s, a, la);
        s[la] = ' ';
        memcpy(s + la + 1, b, lb + 1);
        m[nm++] = s;
    }
    free(part);
    *out = m;
    return nm;
}

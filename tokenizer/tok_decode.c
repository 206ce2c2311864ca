// tokenizer/tok_decode.c — ids -> text: per-token decoded pieces (the
// decoder applied to each token once at load time), UTF-8 repair as Rust's
// from_utf8_lossy, the streaming detokeniser and small accessors.
//
// Every supported decoder (ByteLevel, ByteFallback, Fuse, Replace) works
// token by token, so decode(ids) == lossy(concat(piece(id))).
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEC_BYTELEVEL, DEC_BYTEFALLBACK, DEC_FUSE, DEC_REPLACE };
typedef struct dec_step {
    int kind;
    const char *pat, *rep; // DEC_REPLACE (borrowed from the JSON)
} dec_step;

bool tok_bytelevel_unmap(const char *s, char **out, size_t *len)
{
    size_t n = strlen(s), o = 0;
    char *r = malloc(n + 1);
    assert(r);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &cp);
        int b = l > 0 ? tok_cp_to_byte(cp) : -1;
        if (b < 0) {
            free(r);
            return false;
        }
        r[o++] = (char)b;
        i += (size_t)l;
    }
    r[o] = 0;
    *out = r;
    *len = o;
    return true;
}

static int parse_decoder(const pt_tokenizer *t, json_object *d, const char *field, dec_step *st, int *n,
                         pt_err *err)
{
    if (!d || json_object_is_type(d, json_type_null))
        return 0;
    json_object *v;
    const char *type = json_object_object_get_ex(d, "type", &v) ? json_object_get_string(v) : NULL;
    if (!type)
        return pt_errf(err, "%s: field '%s.type': missing", t->name, field);
    if (!strcmp(type, "Sequence")) {
        json_object *arr;
        if (!json_object_object_get_ex(d, "decoders", &arr) || !json_object_is_type(arr, json_type_array))
            return pt_errf(err, "%s: field '%s.decoders': missing or not an array", t->name, field);
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.decoders[%zu]", field, i);
            if (parse_decoder(t, json_object_array_get_idx(arr, i), sub, st, n, err) < 0)
                return -1;
        }
        return 0;
    }
    if (*n == 16)
        return pt_errf(err, "%s: field '%s': too many decoder steps", t->name, field);
    dec_step s = {0};
    if (!strcmp(type, "ByteLevel")) s.kind = DEC_BYTELEVEL;
    else if (!strcmp(type, "ByteFallback")) s.kind = DEC_BYTEFALLBACK;
    else if (!strcmp(type, "Fuse")) s.kind = DEC_FUSE;
    else if (!strcmp(type, "Replace")) {
        json_object *p, *c, *sv;
        s.kind = DEC_REPLACE;
        if (!json_object_object_get_ex(d, "pattern", &p) || !json_object_object_get_ex(p, "String", &sv) ||
            !json_object_object_get_ex(d, "content", &c) || !json_object_get_string_len(sv))
            return pt_errf(err, "%s: field '%s': only Replace with a String pattern is supported", t->name, field);
        s.pat = json_object_get_string(sv);
        s.rep = json_object_get_string(c);
    } else
        return pt_errf(err, "%s: field '%s.type': unsupported decoder '%s'", t->name, field, type);
    st[(*n)++] = s;
    return 0;
}

// Replaces every occurrence of pat in *s (length *len) by rep.
static void replace_all(char **s, size_t *len, const char *pat, const char *rep)
{
    size_t lp = strlen(pat), lr = strlen(rep), cap = *len * (lr > lp ? lr / lp + 1 : 1) + 1, o = 0;
    char *r = malloc(cap + lr);
    assert(r);
    for (size_t i = 0; i < *len;) {
        if (i + lp <= *len && !memcmp(*s + i, pat, lp)) {
            memcpy(r + o, rep, lr);
            o += lr;
            i += lp;
        } else
            r[o++] = (*s)[i++];
    }
    r[o] = 0;
    free(*s);
    *s = r;
    *len = o;
}

int tok_build_pieces(pt_tokenizer *t, void *decoder_json, pt_err *err)
{
    dec_step st[16];
    int n = 0;
    if (parse_decoder(t, decoder_json, "decoder", st, &n, err) < 0)
        return -1;
    t->piece = calloc((size_t)t->n_vocab + 1, sizeof *t->piece);
    t->piece_len = calloc((size_t)t->n_vocab + 1, sizeof *t->piece_len);
    assert(t->piece && t->piece_len);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!t->tok_str[id]) {
            t->piece[id] = strdup("");
            continue;
        }
        size_t len = strlen(t->tok_str[id]);
        char *s = strdup(t->tok_str[id]);
        for (int k = 0; k < n; k++) {
            if (st[k].kind == DEC_REPLACE)
                replace_all(&s, &len, st[k].pat, st[k].rep);
            else if (st[k].kind == DEC_BYTEFALLBACK) {
                unsigned b;
                char tail;
                if (len == 6 && sscanf(s, "<0x%2X%c", &b, &tail) == 2 && tail == '>') {
                    s[0] = (char)b;
                    s[1] = 0;
                    len = 1;
                }
            } else if (st[k].kind == DEC_BYTELEVEL) {
                char *raw;
                size_t rl;
                if (tok_bytelevel_unmap(s, &raw, &rl)) {
                    free(s);
                    s = raw;
                    len = rl;
                }
            }
        }
        t->piece[id] = s;
        t->piece_len[id] = (uint32_t)len;
    }
    return 0;
}

// ---- UTF-8 repair ----------------------------------------------------------

// One step of UTF-8 validation at s (n > 0 bytes): the length of a valid
// character, or minus the length of the maximal invalid subpart; *trunc is
// set when that subpart is a valid prefix cut off by the end of input.
static int utf8_step(const uint8_t *s, size_t n, bool *trunc)
{
    *trunc = false;
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    int L;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        L = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        L = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        L = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return -1;
    for (int i = 1; i < L; i++) {
        if ((size_t)i >= n) {
            *trunc = true;
            return -i;
        }
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (s[i] < l || s[i] > h)
            return -i;
    }
    return L;
}

static size_t lossy_append(tok_buf *b, const uint8_t *s, size_t n, bool final)
{
    size_t i = 0, run = 0; // run: start of pending valid bytes
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        bool trunc;
        int r = utf8_step(s + i, n - i, &trunc);
        if (r > 0) {
            i += (size_t)r;
            continue;
        }
        tok_buf_put(b, s + run, i - run);
        if (trunc && !final)
            return i;
        tok_buf_put(b, "\xEF\xBF\xBD", 3);
        i += (size_t)-r;
        run = i;
    }
    tok_buf_put(b, s + run, i - run);
    return n;
}

char *pt_utf8_lossy(const char *s, size_t len, size_t *out_len)
{
    tok_buf b = {0};
    tok_buf_put(&b, "", 0);
    lossy_append(&b, (const uint8_t *)s, len, true);
    if (out_len)
        *out_len = b.n;
    return b.p;
}

char *pt_tokenizer_decode(const pt_tokenizer *t, const int32_t *ids, size_t n, bool skip_special, size_t *len)
{
    tok_buf raw = {0};
    tok_buf_put(&raw, "", 0);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab || (skip_special && (t->attr[id] & TOK_ATTR_SPECIAL)))
            continue;
        tok_buf_put(&raw, t->piece[id], t->piece_len[id]);
    }
    char *r = pt_utf8_lossy(raw.p, raw.n, len);
    free(raw.p);
    return r;
}

// ---- streaming -------------------------------------------------------------------

void pt_detok_init(pt_detok *d, const pt_tokenizer *t, bool skip_special)
{
    memset(d, 0, sizeof *d);
    d->t = t;
    d->skip_special = skip_special;
}

static const char *detok_emit(pt_detok *d, const char *piece, size_t plen, bool final, size_t *len)
{
    tok_buf in = {0}, out = {0};
    tok_buf_put(&out, "", 0);
    tok_buf_put(&in, d->pend, (size_t)d->npend);
    tok_buf_put(&in, piece, plen);
    size_t used = lossy_append(&out, (const uint8_t *)in.p, in.n, final);
    d->npend = (int)(in.n - used);
    assert(d->npend <= 3);
    memcpy(d->pend, in.p + used, (size_t)d->npend);
    free(in.p);
    free(d->buf);
    d->buf = out.p;
    d->cap = out.cap;
    if (len)
        *len = out.n;
    return d->buf;
}

const char *pt_detok_push(pt_detok *d, int32_t id, size_t *len)
{
    const pt_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_vocab || (d->skip_special && (t->attr[id] & TOK_ATTR_SPECIAL)))
        return detok_emit(d, "", 0, false, len);
    return detok_emit(d, t->piece[id], t->piece_len[id], false, len);
}

const char *pt_detok_flush(pt_detok *d, size_t *len)
{
    return detok_emit(d, "", 0, true, len);
}

void pt_detok_free(pt_detok *d)
{
    free(d->buf);
    d->buf = NULL;
}

// ---- accessors -----------------------------------------------------------------------

const char *pt_tokenizer_piece(const pt_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    if (len)
        *len = t->piece_len[id];
    return t->piece[id];
}

const char *pt_tokenizer_token_str(const pt_tokenizer *t, int32_t id)
{
    return id < 0 || id >= t->n_vocab ? NULL : t->tok_str[id];
}

int32_t pt_tokenizer_token_id(const pt_tokenizer *t, const char *str)
{
    return tok_strmap_get(&t->strs, str, (uint32_t)strlen(str));
}

int32_t pt_tokenizer_vocab_size(const pt_tokenizer *t) { return t->n_vocab; }

bool pt_tokenizer_is_special(const pt_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->attr[id] & TOK_ATTR_SPECIAL);
}

int32_t pt_tokenizer_bos(const pt_tokenizer *t) { return t->bos_id; }
int32_t pt_tokenizer_eos(const pt_tokenizer *t) { return t->eos_id; }

bool pt_tokenizer_is_eog(const pt_tokenizer *t, int32_t id)
{
    if (id < 0)
        return false;
    if (id == t->eos_id)
        return true;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return true;
    return false;
}

void pt_tokenizer_add_eog(pt_tokenizer *t, int32_t id)
{
    if (pt_tokenizer_is_eog(t, id))
        return;
    t->eog = realloc(t->eog, (size_t)(t->n_eog + 1) * sizeof *t->eog);
    assert(t->eog);
    t->eog[t->n_eog++] = id;
}

const char *pt_tokenizer_bos_str(const pt_tokenizer *t) { return t->bos_str ? t->bos_str : ""; }
const char *pt_tokenizer_eos_str(const pt_tokenizer *t) { return t->eos_str ? t->eos_str : ""; }
const char *pt_tokenizer_chat_template(const pt_tokenizer *t) { return t->chat_template; }

// tokenizer/tok_encode.c — text -> ids, in Hugging Face's order:
//   1. added tokens with normalized=false are split out of the raw text
//      (leftmost-longest, lstrip/rstrip/single_word as HF's find_matches);
//   2. each remaining part is normalized, then added tokens with
//      normalized=true are split out of it;
//   3. each remaining part goes through the pre-tokenizer steps (regex
//      splits with their behaviours, ByteLevel) and every resulting
//      pre-token through BPE;
//   4. with add_special_tokens, the post-processor's ids wrap the result.
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

// ---- added-token trie ----------------------------------------------------------

static int32_t trie_node(tok_trie *tr, uint8_t byte)
{
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? tr->cap * 2 : 256;
        tr->node = realloc(tr->node, (size_t)tr->cap * sizeof *tr->node);
        assert(tr->node);
    }
    tr->node[tr->n] = (tok_trie_node){.child = -1, .sibling = -1, .added = -1, .byte = byte};
    return tr->n++;
}

static int32_t trie_child(const tok_trie *tr, int32_t node, uint8_t byte)
{
    for (int32_t c = tr->node[node].child; c >= 0; c = tr->node[c].sibling)
        if (tr->node[c].byte == byte)
            return c;
    return -1;
}

static char *normalize(const pt_tokenizer *t, const char *s, size_t n, size_t *out_len);

void tok_trie_build(tok_trie *tr, const pt_tokenizer *t, bool normalized)
{
    memset(tr, 0, sizeof *tr);
    trie_node(tr, 0);
    for (int i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        if (a->normalized != normalized)
            continue;
        size_t len = a->len;
        char *content = normalized && t->n_norm ? normalize(t, a->content, a->len, &len) : a->content;
        int32_t node = 0;
        for (size_t k = 0; k < len; k++) {
            uint8_t b = (uint8_t)content[k];
            int32_t c = trie_child(tr, node, b);
            if (c < 0) {
                c = trie_node(tr, b);
                tr->node[c].sibling = tr->node[node].child;
                tr->node[node].child = c;
            }
            node = c;
        }
        if (len) {
            tr->node[node].added = i;
            tr->first[(uint8_t)content[0]] = 1;
        }
        if (content != a->content)
            free(content);
    }
}

void tok_trie_free(tok_trie *tr)
{
    free(tr->node);
    memset(tr, 0, sizeof *tr);
}

// Leftmost-longest match at or after `from`; returns its start or -1.
static int64_t trie_find(const tok_trie *tr, const pt_tokenizer *t, const uint8_t *s, size_t from, size_t n,
                         bool parse_special, size_t *mlen, int *aidx)
{
    if (tr->n <= 1)
        return -1;
    for (size_t i = from; i < n; i++) {
        if (!tr->first[s[i]])
            continue;
        int32_t node = 0;
        size_t best = 0;
        int ba = -1;
        for (size_t j = i; j < n; j++) {
            node = trie_child(tr, node, s[j]);
            if (node < 0)
                break;
            int a = tr->node[node].added;
            if (a >= 0 && (parse_special || !t->added[a].special)) {
                best = j - i + 1;
                ba = a;
            }
        }
        if (best) {
            *mlen = best;
            *aidx = ba;
            return (int64_t)i;
        }
    }
    return -1;
}

// Unicode White_Space (Rust char::is_whitespace).
static bool is_ws(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

static bool is_word_char(uint32_t c)
{
    if (c == '_')
        return true;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

// The code point ending at s[end) (0 if invalid) and its start.
static uint32_t cp_before(const uint8_t *s, size_t lo, size_t end, size_t *start)
{
    size_t k = end;
    while (k > lo && end - k < 4) {
        k--;
        if ((s[k] & 0xC0) != 0x80)
            break;
    }
    uint32_t cp = 0;
    if (tok_utf8_dec(s + k, end - k, &cp) != (int)(end - k))
        cp = 0, k = end - 1;
    *start = k;
    return cp;
}

typedef struct seg {
    size_t s, e;           // byte range in the text
    int32_t id;            // added token id, -1 for plain text
} seg;

typedef struct segs {
    seg *v;
    size_t n, cap;
} segs;

static void seg_push(segs *a, size_t s, size_t e, int32_t id)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        assert(a->v);
    }
    a->v[a->n++] = (seg){s, e, id};
}

// Splits s[0..n) into plain parts and added tokens (HF find_matches).
static void split_added(const pt_tokenizer *t, const tok_trie *tr, const char *text, size_t n, bool parse_special,
                        segs *out)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t start_off = 0, pos = 0;
    out->n = 0;
    while (pos < n) {
        size_t ml;
        int ai;
        int64_t ms = trie_find(tr, t, s, pos, n, parse_special, &ml, &ai);
        if (ms < 0)
            break;
        const tok_added *a = &t->added[ai];
        size_t st = (size_t)ms, stop = st + ml;
        pos = stop;
        if (a->single_word) {
            size_t k;
            uint32_t c;
            bool ok = true;
            if (st > 0 && is_word_char(cp_before(s, 0, st, &k)))
                ok = false;
            if (stop < n && tok_utf8_dec(s + stop, n - stop, &c) > 0 && is_word_char(c))
                ok = false;
            if (!ok)
                continue;
        }
        if (a->lstrip) {
            while (st > start_off) {
                size_t k;
                uint32_t c = cp_before(s, start_off, st, &k);
                if (!is_ws(c))
                    break;
                st = k;
            }
        }
        if (a->rstrip) {
            uint32_t c;
            int l;
            while (stop < n && (l = tok_utf8_dec(s + stop, n - stop, &c)) > 0 && is_ws(c))
                stop += (size_t)l;
            pos = stop;
        }
        if (start_off < st)
            seg_push(out, start_off, st, -1);
        seg_push(out, st, stop, a->id);
        start_off = stop;
    }
    if (start_off < n)
        seg_push(out, start_off, n, -1);
}

// ---- normalizer ----------------------------------------------------------------------

// Applies one utf8proc normalization; NULL if s is not valid UTF-8.
static char *u8p(const char *s, size_t n, int options, size_t *out_len)
{
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | options));
    if (r < 0)
        return NULL;
    *out_len = (size_t)r;
    return (char *)dst;
}

static char *lowercase(const char *s, size_t n, size_t *out_len)
{
    char *r = malloc(n * 2 + 8); // lowercase mappings grow at most x1.5 in UTF-8
    size_t o = 0;
    assert(r);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &cp);
        if (l <= 0) {
            r[o++] = s[i++];
            continue;
        }
        o += (size_t)tok_utf8_enc((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), r + o);
        i += (size_t)l;
    }
    *out_len = o;
    return r;
}

// Runs the normalizer steps over s[0..n); returns a malloc'ed result. Text
// that is not valid UTF-8 skips the Unicode normalization forms (HF cannot
// take such input at all; Petrel encodes it byte-level unchanged).
static char *normalize(const pt_tokenizer *t, const char *s, size_t n, size_t *out_len)
{
    char *cur = malloc(n + 1);
    assert(cur);
    memcpy(cur, s, n);
    cur[n] = 0;
    size_t len = n;
    for (int i = 0; i < t->n_norm; i++) {
        const tok_norm *nm = &t->norm[i];
        char *nx = NULL;
        size_t nl = 0;
        switch (nm->kind) {
        case NORM_NFC: nx = u8p(cur, len, UTF8PROC_COMPOSE, &nl); break;
        case NORM_NFD: nx = u8p(cur, len, UTF8PROC_DECOMPOSE, &nl); break;
        case NORM_NFKC: nx = u8p(cur, len, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, &nl); break;
        case NORM_NFKD: nx = u8p(cur, len, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, &nl); break;
        case NORM_LOWER: nx = lowercase(cur, len, &nl); break;
        case NORM_PREPEND:
            if (len) {
                size_t pl = strlen(nm->rep);
                nx = malloc(pl + len + 1);
                assert(nx);
                memcpy(nx, nm->rep, pl);
                memcpy(nx + pl, cur, len);
                nl = pl + len;
                nx[nl] = 0;
            }
            break;
        case NORM_REPLACE: {
            size_t lp = strlen(nm->pat), lr = strlen(nm->rep), o = 0;
            nx = malloc(len * (lr / lp + 1) + 1);
            assert(nx);
            for (size_t k = 0; k < len;) {
                if (k + lp <= len && !memcmp(cur + k, nm->pat, lp)) {
                    memcpy(nx + o, nm->rep, lr);
                    o += lr;
                    k += lp;
                } else
                    nx[o++] = cur[k++];
            }
            nl = o;
            nx[nl] = 0;
            break;
        }
        }
        if (nx) {
            free(cur);
            cur = nx;
            len = nl;
        }
    }
    *out_len = len;
    return cur;
}

// ---- pre-tokenizer ----------------------------------------------------------------------

typedef struct span {
    size_t s, e;
    bool match;
} span;

typedef struct enc_ctx {
    const pt_tokenizer *t;
    tok_ids *out;
    pcre2_match_data *md[TOK_MAX_PRE];
    span *sp[TOK_MAX_PRE]; // per-depth scratch
    size_t spcap[TOK_MAX_PRE];
} enc_ctx;

static void pretok(enc_ctx *c, int depth, const char *s, size_t n);

// Next match of re in s[0..n) at or after pos; false when none.
static bool next_match(pcre2_code *re, pcre2_match_data *md, const char *s, size_t n, size_t pos, size_t *ms,
                       size_t *me)
{
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_JIT, md, NULL);
    if (rc < 0)
        return false; // no match (or a resource limit: the rest stays one piece)
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return true;
}

static size_t char_len_at(const char *s, size_t n, size_t i)
{
    uint32_t cp;
    int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &cp);
    return l > 0 ? (size_t)l : 1;
}

// Where the search resumes after the match [ms, me) of s (n bytes): at
// me, or one character on after an empty match; false when an empty match
// is at the end of s (nothing left to search).
static inline bool resume_at(const char *s, size_t n, size_t ms, size_t me, size_t *pos)
{
    if (me != ms) {
        *pos = me;
        return true;
    }
    if (me >= n)
        return false;
    *pos = me + char_len_at(s, n, me);
    return true;
}

// Isolated split: every match and every gap is its own piece (streamed).
static void split_isolated(enc_ctx *c, int depth, pcre2_code *re, const char *s, size_t n)
{
    pcre2_match_data *md = c->md[depth];
    size_t pos = 0, prev = 0, ms, me;
    while (pos <= n && next_match(re, md, s, n, pos, &ms, &me)) {
        if (ms > prev)
            pretok(c, depth + 1, s + prev, ms - prev);
        if (me > ms)
            pretok(c, depth + 1, s + ms, me - ms);
        prev = me;
        if (!resume_at(s, n, ms, me, &pos))
            break;
    }
    if (prev < n)
        pretok(c, depth + 1, s + prev, n - prev);
}

static void span_push(enc_ctx *c, int depth, size_t *k, size_t s, size_t e, bool m)
{
    if (*k == c->spcap[depth]) {
        c->spcap[depth] = c->spcap[depth] ? c->spcap[depth] * 2 : 64;
        c->sp[depth] = realloc(c->sp[depth], c->spcap[depth] * sizeof(span));
        assert(c->sp[depth]);
    }
    c->sp[depth][(*k)++] = (span){s, e, m};
}

// Other behaviours: collect (range, is_match), combine as HF's
// NormalizedString::split, then recurse into the kept non-empty pieces.
static void split_general(enc_ctx *c, int depth, const tok_pre *p, const char *s, size_t n)
{
    size_t k = 0, pos = 0, prev = 0, ms, me;
    pcre2_match_data *md = c->md[depth];
    while (pos <= n && next_match(p->re, md, s, n, pos, &ms, &me)) {
        if (ms > prev)
            span_push(c, depth, &k, prev, ms, false);
        span_push(c, depth, &k, ms, me, true);
        prev = me;
        if (!resume_at(s, n, ms, me, &pos))
            break;
    }
    if (prev < n)
        span_push(c, depth, &k, prev, n, false);
    span *v = c->sp[depth];
    if (p->invert)
        for (size_t i = 0; i < k; i++)
            v[i].match = !v[i].match;
    // combine in place: out[j] = (range, remove)
    size_t j = 0;
    bool prev_match = false;
    if (p->behavior == BEH_MERGED_NEXT) {
        // walk backwards, extending the last pushed (which is the next piece) leftwards
        size_t w = k; // write from the end
        for (size_t i = k; i-- > 0;) {
            bool m = v[i].match;
            if (m && !prev_match && w < k)
                v[w].s = v[i].s;
            else
                v[--w] = (span){v[i].s, v[i].e, false};
            prev_match = m;
        }
        for (size_t i = w; i < k; i++)
            v[j++] = v[i];
    } else {
        for (size_t i = 0; i < k; i++) {
            bool m = v[i].match;
            span x = v[i];
            switch (p->behavior) {
            case BEH_REMOVED:
                x.match = m; // match => removed
                v[j++] = x;
                break;
            case BEH_ISOLATED:
                x.match = false;
                v[j++] = x;
                break;
            case BEH_CONTIGUOUS:
                if (j && m == prev_match)
                    v[j - 1].e = x.e;
                else {
                    x.match = false;
                    v[j++] = x;
                }
                break;
            case BEH_MERGED_PREV:
                if (j && m && !prev_match)
                    v[j - 1].e = x.e;
                else {
                    x.match = false;
                    v[j++] = x;
                }
                break;
            }
            prev_match = m;
        }
    }
    // recursion may reuse deeper scratch only, so v stays valid; copy the
    // count first because pretok can grow other depths' arrays
    for (size_t i = 0; i < j; i++) {
        span x = c->sp[depth][i];
        if (!x.match && x.e > x.s)
            pretok(c, depth + 1, s + x.s, x.e - x.s);
    }
}

static void pretok(enc_ctx *c, int depth, const char *s, size_t n)
{
    if (!n)
        return;
    const pt_tokenizer *t = c->t;
    if (depth == t->n_pre) {
        tok_bpe_word(t, s, n, c->out);
        return;
    }
    const tok_pre *p = &t->pre[depth];
    if (!c->md[depth])
        c->md[depth] = pcre2_match_data_create(4, NULL);
    if (p->kind == PRE_BYTELEVEL) {
        char *tmp = NULL;
        if (p->add_prefix_space && s[0] != ' ') {
            tmp = malloc(n + 1);
            assert(tmp);
            tmp[0] = ' ';
            memcpy(tmp + 1, s, n);
            s = tmp;
            n++;
        }
        if (p->re)
            split_isolated(c, depth, p->re, s, n);
        else
            pretok(c, depth + 1, s, n);
        free(tmp);
        return;
    }
    if (p->behavior == BEH_ISOLATED)
        split_isolated(c, depth, p->re, s, n);
    else
        split_general(c, depth, p, s, n);
}

// ---- encode ------------------------------------------------------------------------------

// One plain part of the raw text: normalize, split normalized added tokens,
// pre-tokenize and BPE the rest.
static void encode_plain(enc_ctx *c, const char *s, size_t n, bool parse_special, segs *tmp)
{
    const pt_tokenizer *t = c->t;
    char *norm = NULL;
    if (t->n_norm) {
        norm = normalize(t, s, n, &n);
        s = norm;
    }
    if (t->trie_norm.n > 1) {
        split_added(t, &t->trie_norm, s, n, parse_special, tmp);
        for (size_t i = 0; i < tmp->n; i++) {
            if (tmp->v[i].id >= 0)
                tok_ids_push(c->out, tmp->v[i].id);
            else
                pretok(c, 0, s + tmp->v[i].s, tmp->v[i].e - tmp->v[i].s);
        }
    } else
        pretok(c, 0, s, n);
    free(norm);
}

// Added tokens split out of text[0..len), the rest encoded as plain text.
static void encode_part(enc_ctx *c, const char *text, size_t len, bool parse_special, segs *outer, segs *inner)
{
    const pt_tokenizer *t = c->t;
    outer->n = 0;
    split_added(t, &t->trie_raw, text, len, parse_special, outer);
    for (size_t i = 0; i < outer->n; i++) {
        if (outer->v[i].id >= 0)
            tok_ids_push(c->out, outer->v[i].id);
        else
            encode_plain(c, text + outer->v[i].s, outer->v[i].e - outer->v[i].s, parse_special, inner);
    }
}

// Python's str.isspace: White_Space plus U+001C..U+001F (bidi class B/S).
static bool py_isspace(uint32_t c) { return is_ws(c) || (c >= 0x1C && c <= 0x1F); }

#define KIMI_MAX_CHARS 400000 // TIKTOKEN_MAX_ENCODE_CHARS
#define KIMI_MAX_RUN 25000    // MAX_NO_WHITESPACES_CHARS

// Kimi's encode: the text in windows of KIMI_MAX_CHARS characters, each cut
// where a run of whitespace or of non-whitespace characters grows past
// KIMI_MAX_RUN (the run goes on in the next piece); every piece is encoded
// separately. An invalid UTF-8 byte counts as one non-space character.
static void encode_kimi(enc_ctx *c, const char *text, size_t len, bool parse_special, segs *outer, segs *inner)
{
    const uint8_t *u = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        size_t win_end = i, nch = 0;
        while (win_end < len && nch < KIMI_MAX_CHARS) {
            uint32_t cp;
            int l = tok_utf8_dec(u + win_end, len - win_end, &cp);
            win_end += l > 0 ? (size_t)l : 1;
            nch++;
        }
        size_t start = i, run = 0;
        bool run_space = false;
        for (size_t k = i; k < win_end;) {
            uint32_t cp = 0;
            int l = tok_utf8_dec(u + k, win_end - k, &cp);
            bool sp = l > 0 && py_isspace(cp);
            if (k == i)
                run_space = sp;
            if (sp != run_space) {
                run = 1;
                run_space = sp;
            } else if (++run > KIMI_MAX_RUN) {
                encode_part(c, text + start, k - start, parse_special, outer, inner);
                start = k;
                run = 1;
            }
            k += l > 0 ? (size_t)l : 1;
        }
        encode_part(c, text + start, win_end - start, parse_special, outer, inner);
        i = win_end;
    }
}

int64_t pt_tokenizer_encode(const pt_tokenizer *t, const char *text, size_t len, bool parse_special,
                            bool add_special_tokens, int32_t **ids, pt_err *err)
{
    (void)err;
    assert(t && ids && (text || !len));
    tok_ids out = {0};
    enc_ctx c = {.t = t, .out = &out};
    segs outer = {0}, inner = {0};
    if (add_special_tokens)
        for (int i = 0; i < t->post.n_pre; i++)
            tok_ids_push(&out, t->post.pre[i]);
    if (len && t->kimi_chunks)
        encode_kimi(&c, text, len, parse_special, &outer, &inner);
    else if (len)
        encode_part(&c, text, len, parse_special, &outer, &inner);
    if (add_special_tokens)
        for (int i = 0; i < t->post.n_post; i++)
            tok_ids_push(&out, t->post.post[i]);
    for (int i = 0; i < TOK_MAX_PRE; i++) {
        if (c.md[i])
            pcre2_match_data_free(c.md[i]);
        free(c.sp[i]);
    }
    free(outer.v);
    free(inner.v);
    *ids = out.v;
    return (int64_t)out.n;
}

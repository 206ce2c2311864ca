// tokenizer/tok_util.c — hash maps, UTF-8 helpers, the GPT-2 byte mapping
// and the Oniguruma -> PCRE2 regex translation used by the tokenizer.
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// GPT-2 bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// rest to U+0100.. in byte order.
const uint16_t tok_byte_to_cp[256] = {
    0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107, 0x108, 0x109, 0x10A, 0x10B, 0x10C, 0x10D, 0x10E, 0x10F,
    0x110, 0x111, 0x112, 0x113, 0x114, 0x115, 0x116, 0x117, 0x118, 0x119, 0x11A, 0x11B, 0x11C, 0x11D, 0x11E, 0x11F,
    0x120, 0x021, 0x022, 0x023, 0x024, 0x025, 0x026, 0x027, 0x028, 0x029, 0x02A, 0x02B, 0x02C, 0x02D, 0x02E, 0x02F,
    0x030, 0x031, 0x032, 0x033, 0x034, 0x035, 0x036, 0x037, 0x038, 0x039, 0x03A, 0x03B, 0x03C, 0x03D, 0x03E, 0x03F,
    0x040, 0x041, 0x042, 0x043, 0x044, 0x045, 0x046, 0x047, 0x048, 0x049, 0x04A, 0x04B, 0x04C, 0x04D, 0x04E, 0x04F,
    0x050, 0x051, 0x052, 0x053, 0x054, 0x055, 0x056, 0x057, 0x058, 0x059, 0x05A, 0x05B, 0x05C, 0x05D, 0x05E, 0x05F,
    0x060, 0x061, 0x062, 0x063, 0x064, 0x065, 0x066, 0x067, 0x068, 0x069, 0x06A, 0x06B, 0x06C, 0x06D, 0x06E, 0x06F,
    0x070, 0x071, 0x072, 0x073, 0x074, 0x075, 0x076, 0x077, 0x078, 0x079, 0x07A, 0x07B, 0x07C, 0x07D, 0x07E, 0x121,
    0x122, 0x123, 0x124, 0x125, 0x126, 0x127, 0x128, 0x129, 0x12A, 0x12B, 0x12C, 0x12D, 0x12E, 0x12F, 0x130, 0x131,
    0x132, 0x133, 0x134, 0x135, 0x136, 0x137, 0x138, 0x139, 0x13A, 0x13B, 0x13C, 0x13D, 0x13E, 0x13F, 0x140, 0x141,
    0x142, 0x0A1, 0x0A2, 0x0A3, 0x0A4, 0x0A5, 0x0A6, 0x0A7, 0x0A8, 0x0A9, 0x0AA, 0x0AB, 0x0AC, 0x143, 0x0AE, 0x0AF,
    0x0B0, 0x0B1, 0x0B2, 0x0B3, 0x0B4, 0x0B5, 0x0B6, 0x0B7, 0x0B8, 0x0B9, 0x0BA, 0x0BB, 0x0BC, 0x0BD, 0x0BE, 0x0BF,
    0x0C0, 0x0C1, 0x0C2, 0x0C3, 0x0C4, 0x0C5, 0x0C6, 0x0C7, 0x0C8, 0x0C9, 0x0CA, 0x0CB, 0x0CC, 0x0CD, 0x0CE, 0x0CF,
    0x0D0, 0x0D1, 0x0D2, 0x0D3, 0x0D4, 0x0D5, 0x0D6, 0x0D7, 0x0D8, 0x0D9, 0x0DA, 0x0DB, 0x0DC, 0x0DD, 0x0DE, 0x0DF,
    0x0E0, 0x0E1, 0x0E2, 0x0E3, 0x0E4, 0x0E5, 0x0E6, 0x0E7, 0x0E8, 0x0E9, 0x0EA, 0x0EB, 0x0EC, 0x0ED, 0x0EE, 0x0EF,
    0x0F0, 0x0F1, 0x0F2, 0x0F3, 0x0F4, 0x0F5, 0x0F6, 0x0F7, 0x0F8, 0x0F9, 0x0FA, 0x0FB, 0x0FC, 0x0FD, 0x0FE, 0x0FF,
};

int tok_cp_to_byte(uint32_t cp)
{
    static int16_t inv[324];
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        int16_t tmp[324];
        for (int i = 0; i < 324; i++)
            tmp[i] = -1;
        for (int b = 0; b < 256; b++)
            tmp[tok_byte_to_cp[b]] = (int16_t)b;
        memcpy(inv, tmp, sizeof inv);
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return cp < 324 ? inv[cp] : -1;
}

int tok_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp)
{
    if (!n)
        return 0;
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if ((size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

int tok_utf8_enc(uint32_t cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

void tok_ids_push(tok_ids *a, int32_t id)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 256;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        assert(a->v);
    }
    a->v[a->n++] = id;
}

void tok_buf_put(tok_buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert(b->p);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tok_buf_str(tok_buf *b, const char *s) { tok_buf_put(b, s, strlen(s)); }

// ---- hashing / maps ----------------------------------------------------------

// FNV-1a over 8-byte words then a final mix: fast enough for short keys.
uint64_t tok_hash(const void *p, size_t len)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    return h;
}

static uint32_t pow2_at_least(uint32_t n)
{
    uint32_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

void tok_strmap_init(tok_strmap *m, uint32_t expect)
{
    m->cap = pow2_at_least(expect * 2 + 2);
    m->n = 0;
    m->key = calloc(m->cap, sizeof *m->key);
    m->klen = calloc(m->cap, sizeof *m->klen);
    m->val = calloc(m->cap, sizeof *m->val);
    assert(m->key && m->klen && m->val);
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->key);
    free(m->klen);
    free(m->val);
    memset(m, 0, sizeof *m);
}

static void strmap_grow(tok_strmap *m)
{
    tok_strmap nm;
    tok_strmap_init(&nm, m->cap);
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->key[i])
            tok_strmap_put(&nm, m->key[i], m->klen[i], m->val[i]);
    tok_strmap_free(m);
    *m = nm;
}

void tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val)
{
    if (!m->cap)
        tok_strmap_init(m, 16);
    if ((m->n + 1) * 2 > m->cap)
        strmap_grow(m);
    uint32_t mask = m->cap - 1, i = (uint32_t)tok_hash(key, len) & mask;
    while (m->key[i]) {
        if (m->klen[i] == len && !memcmp(m->key[i], key, len)) {
            m->val[i] = val;
            return;
        }
        i = (i + 1) & mask;
    }
    m->key[i] = key;
    m->klen[i] = len;
    m->val[i] = val;
    m->n++;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, uint32_t len)
{
    if (!m->cap)
        return -1;
    uint32_t mask = m->cap - 1, i = (uint32_t)tok_hash(key, len) & mask;
    while (m->key[i]) {
        if (m->klen[i] == len && !memcmp(m->key[i], key, len))
            return m->val[i];
        i = (i + 1) & mask;
    }
    return -1;
}

void tok_pairmap_init(tok_pairmap *m, uint32_t expect)
{
    m->cap = pow2_at_least(expect * 2 + 2);
    m->n = 0;
    m->slot = calloc(m->cap, sizeof *m->slot);
    assert(m->slot);
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}

void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t out)
{
    if ((m->n + 1) * 2 > m->cap) {
        tok_pairmap nm;
        tok_pairmap_init(&nm, m->cap);
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->slot[i].key) {
                uint64_t k = m->slot[i].key - 1;
                tok_pairmap_put(&nm, (int32_t)(k >> 32), (int32_t)(uint32_t)k, m->slot[i].rank, m->slot[i].out);
            }
        tok_pairmap_free(m);
        *m = nm;
    }
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t mask = m->cap - 1, i = (uint32_t)(h >> 32) & mask;
    while (m->slot[i].key) {
        if (m->slot[i].key == k)
            return;
        i = (i + 1) & mask;
    }
    m->slot[i] = (tok_pair_slot){k, rank, out};
    m->n++;
}

// ---- regex ---------------------------------------------------------------------

// Oniguruma (Ruby syntax, UTF-8) and PCRE2 (UTF + UCP) agree on \p{..},
// lookarounds, possessive and atomic groups. They differ on: \s (Onig has
// the Unicode White_Space set, which includes U+0085; PCRE2's lacks it),
// \w (Onig: letters, marks, decimal numbers, connector punctuation; PCRE2
// 10.42: letters, numbers, underscore) and \h (Onig: hex digit). Those are
// rewritten; everything else passes through.
static char *translate_onig(const char *pat)
{
    tok_buf b = {0};
    bool in_class = false;
    int depth = 0;
    tok_buf_put(&b, "", 0);
    for (const char *p = pat; *p; p++) {
        if (*p == '\\' && (p[1] == 'p' || p[1] == 'P')) {
            // \p{X} / \pX / \P{X} / \p{^X}: add the code points Unicode
            // 15.0-16.0 gave to general category X (tok_unicode.c)
            bool neg = p[1] == 'P';
            const char *name = p + 2, *end = name + 1;
            if (*name == '{') {
                name++;
                end = strchr(name, '}');
                if (!end) {
                    tok_buf_put(&b, p, strlen(p));
                    break;
                }
            }
            size_t used = (size_t)(end - p) + (p[2] == '{');
            if (*name == '^') {
                neg = !neg;
                name++;
            }
            const char *extra = *name ? tok_unicode_extra(name, (size_t)(end - name)) : NULL;
            if (!extra || (neg && in_class)) {
                tok_buf_put(&b, p, used);
            } else {
                char cls[64];
                snprintf(cls, sizeof cls, "\\p{%.*s}", (int)(end - name), name);
                if (!in_class)
                    tok_buf_put(&b, neg ? "[^" : "[", neg ? 2 : 1);
                tok_buf_put(&b, cls, strlen(cls));
                tok_buf_put(&b, extra, strlen(extra));
                if (!in_class)
                    tok_buf_put(&b, "]", 1);
            }
            p += used - 1;
            continue;
        }
        if (*p == '\\' && p[1]) {
            char c = p[1];
            const char *rep = NULL;
            if (c == 's')
                rep = in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
            else if (c == 'S' && !in_class)
                rep = "[^\\s\\x{85}]";
            else if (c == 'w')
                rep = in_class ? "\\p{L}\\p{M}\\p{Nd}\\p{Pc}" : "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]";
            else if (c == 'W' && !in_class)
                rep = "[^\\p{L}\\p{M}\\p{Nd}\\p{Pc}]";
            else if (c == 'h')
                rep = in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
            if (rep)
                tok_buf_put(&b, rep, strlen(rep));
            else
                tok_buf_put(&b, p, 2);
            p++;
            continue;
        }
        if (*p == '[') {
            if (in_class)
                depth++;
            in_class = true;
            tok_buf_put(&b, p, 1);
            // a ']' right after '[' or '[^' is literal
            if (p[1] == '^') {
                tok_buf_put(&b, p + 1, 1);
                p++;
            }
            if (p[1] == ']') {
                tok_buf_put(&b, "\\]", 2);
                p++;
            }
            continue;
        }
        if (*p == ']' && in_class) {
            if (depth)
                depth--;
            else
                in_class = false;
        }
        tok_buf_put(&b, p, 1);
    }
    return b.p;
}

pcre2_code *tok_regex_compile(const char *pattern, bool literal, const char *where, pt_err *err)
{
    char *pat;
    if (literal) { // escape ASCII punctuation; other bytes stand for themselves
        tok_buf b = {0};
        tok_buf_put(&b, "", 0);
        for (const char *p = pattern; *p; p++) {
            unsigned char c = (unsigned char)*p;
            if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
                tok_buf_put(&b, "\\", 1);
            tok_buf_put(&b, p, 1);
        }
        pat = b.p;
    } else
        pat = translate_onig(pattern);
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    int ecode;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, opts, &ecode, &eoff, NULL);
    if (!re) {
        char msg[256];
        pcre2_get_error_message(ecode, (PCRE2_UCHAR *)msg, sizeof msg);
        pt_errf(err, "%s: regex '%s' at offset %zu: %s", where, pattern, (size_t)eoff, msg);
        free(pat);
        return NULL;
    }
    free(pat);
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); // falls back to the interpreter if JIT is unavailable
    return re;
}

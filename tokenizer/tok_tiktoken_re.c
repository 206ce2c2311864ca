// tokenizer/tok_tiktoken_re.c — tiktoken's pre-tokenizer patterns (written
// for Rust's regex / fancy-regex) translated into PCRE2 patterns that match
// exactly the same pieces.
//
// Where the two dialects differ and what the translation does:
//   \s, \S     Rust: Unicode White_Space (includes U+0085, excludes U+180E
//              and U+FEFF). PCRE2's \s with UCP adds U+180E, so both are
//              spelled out as an explicit class.
//   \p{Name}   Rust: a bare script name is the Script property. PCRE2 >=
//              10.40: a bare script name is Script_Extensions (U+3001 "、"
//              would count as Han). Script names become \p{sc:Name}.
//   $          Rust: end of text only. PCRE2: also before a final "\n".
//              Becomes \z.
//   .          Rust: anything but "\n". Becomes [^\n] (PCRE2's newline
//              convention is a build option). Inline (?m) / (?s) are refused.
//   \w, \b     Rust: Alphabetic + M + Nd + Pc + Join_Control. PCRE2: L, N
//              and '_'. Spelled out (\b, \B as lookarounds on that class);
//              \d, \D as \p{Nd}, \P{Nd}.
//   [A&&B]     Class intersection (Rust only): becomes (?:(?=B)A), each
//              operand translated as a class of its own; [^A&&B] becomes
//              (?:(?!(?=B)A)(?s:.)).
//   [a[b]]     Nested classes (union): a non-negated nested class is
//              inlined; a negated one becomes an alternative.
// Possessive quantifiers, (?i:...), lookahead and \p{general category} mean
// the same in both and are copied.
#include "tokenizer/tok_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Kimi-K2's pattern as its tokenization_kimi.py writes it (fancy-regex).
const char tok_kimi_pattern[] =
    "[\\p{Han}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

const char *pt_tiktoken_kimi_pattern(void) { return tok_kimi_pattern; }

// Rust's \w (Unicode: Alphabetic, marks, decimal digits, connector
// punctuation, Join_Control), as the body of a PCRE2 class; PCRE2's own \w
// is letters, all numbers and '_'.
#define WORD_BODY "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"

// Rust's White_Space, as the body of a PCRE2 class.
#define WS_BODY "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

typedef struct tr_ctx {
    const char *pat;       // whole pattern (for messages)
    const char *p;         // read position
    char msg[160];         // first error
} tr_ctx;

static bool tr_fail(tr_ctx *c, const char *what)
{
    if (!c->msg[0])
        snprintf(c->msg, sizeof c->msg, "%s at offset %zu", what, (size_t)(c->p - c->pat));
    return false;
}

static bool is_gencat(const char *name, size_t n)
{
    static const char *const gc[] = {"L",  "Lu", "Ll", "Lt", "Lm", "Lo", "LC", "L&", "M",  "Mn", "Mc", "Me", "N",
                                     "Nd", "Nl", "No", "P",  "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S",  "Sm",
                                     "Sc", "Sk", "So", "Z",  "Zs", "Zl", "Zp", "C",  "Cc", "Cf", "Cs", "Co", "Cn"};
    for (size_t i = 0; i < sizeof gc / sizeof *gc; i++)
        if (strlen(gc[i]) == n && !memcmp(gc[i], name, n))
            return true;
    return false;
}

// True when PCRE2 knows `name` as a script (so \p{sc:name} compiles).
static bool is_script(const char *name, size_t n)
{
    char pat[96];
    if (n > 64)
        return false;
    snprintf(pat, sizeof pat, "\\p{sc:%.*s}", (int)n, name);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!re)
        return false;
    pcre2_code_free(re);
    return true;
}

// Translates the escape at c->p (which points at the backslash) into out.
// in_class: inside [...], where \s contributes class items.
static bool tr_escape(tr_ctx *c, tok_buf *out, bool in_class)
{
    const char *p = c->p;
    assert(*p == '\\');
    char e = p[1];
    if (!e)
        return tr_fail(c, "trailing backslash");
    if (e == 's' || e == 'S') {
        if (in_class && e == 'S')
            return tr_fail(c, "\\S inside a character class is not supported");
        tok_buf_str(out, in_class ? WS_BODY : e == 's' ? "[" WS_BODY "]" : "[^" WS_BODY "]");
        c->p = p + 2;
        return true;
    }
    if (e == 'w' || e == 'W') {
        if (in_class && e == 'W')
            return tr_fail(c, "\\W inside a character class is not supported");
        tok_buf_str(out, in_class ? WORD_BODY : e == 'w' ? "[" WORD_BODY "]" : "[^" WORD_BODY "]");
        c->p = p + 2;
        return true;
    }
    if (e == 'd' || e == 'D') { // \p{Nd} in both; spelled out so no option can change it
        tok_buf_str(out, e == 'd' ? "\\p{Nd}" : "\\P{Nd}");
        c->p = p + 2;
        return true;
    }
    if (!in_class && (e == 'b' || e == 'B')) { // word boundary by Rust's \w
        tok_buf_str(out, e == 'b' ? "(?:(?<=[" WORD_BODY "])(?![" WORD_BODY "])|(?<![" WORD_BODY "])(?=[" WORD_BODY "]))"
                             : "(?:(?<=[" WORD_BODY "])(?=[" WORD_BODY "])|(?<![" WORD_BODY "])(?![" WORD_BODY "]))");
        c->p = p + 2;
        return true;
    }
    if ((e == 'p' || e == 'P') && p[2] == '{') {
        const char *end = strchr(p + 3, '}');
        if (!end)
            return tr_fail(c, "unterminated \\p{");
        const char *name = p + 3;
        size_t n = (size_t)(end - name);
        bool neg = false;
        if (n && *name == '^') { // \p{^X} = \P{X}
            neg = true;
            name++;
            n--;
        }
        char head[4] = {'\\', (char)((e == 'P') != neg ? 'P' : 'p'), '{', 0};
        tok_buf_str(out, head);
        if (!is_gencat(name, n) && !memchr(name, '=', n) && !memchr(name, ':', n) && is_script(name, n))
            tok_buf_str(out, "sc:");
        tok_buf_put(out, name, n);
        tok_buf_str(out, "}");
        c->p = end + 1;
        return true;
    }
    // anything else means the same in PCRE2: copy the escape and its letter
    // (a following {..} or hex digits are copied as ordinary text)
    tok_buf_put(out, p, 2);
    c->p = p + 2;
    return true;
}

static bool tr_class(tr_ctx *c, tok_buf *out);

// One operand of a class: items up to "&&" or the closing "]". Writes a
// standalone, positive PCRE2 atom into out (the class applies negation).
static bool tr_operand(tr_ctx *c, tok_buf *out)
{
    tok_buf items = {0}, alts = {0};
    tok_buf_put(&items, "", 0);
    tok_buf_put(&alts, "", 0);
    int n_alt = 0;
    while (*c->p && *c->p != ']' && !(c->p[0] == '&' && c->p[1] == '&')) {
        if (*c->p == '[' && c->p[1] == ':') {
            free(items.p), free(alts.p);
            return tr_fail(c, "POSIX classes are not supported");
        } else if (*c->p == '[') {
            // nested class: inline when positive, else an alternative
            bool neg = c->p[1] == '^';
            tok_buf sub = {0};
            if (!tr_class(c, &sub)) {
                free(items.p), free(alts.p), free(sub.p);
                return false;
            }
            if (!neg && sub.n >= 2 && sub.p[0] == '[' && sub.p[sub.n - 1] == ']')
                tok_buf_put(&items, sub.p + 1, sub.n - 2);
            else {
                tok_buf_str(&alts, "|");
                tok_buf_put(&alts, sub.p, sub.n);
                n_alt++;
            }
            free(sub.p);
        } else if (*c->p == '\\') {
            if (!tr_escape(c, &items, true)) {
                free(items.p), free(alts.p);
                return false;
            }
        } else {
            tok_buf_put(&items, c->p, 1);
            c->p++;
        }
    }
    if (!n_alt) {
        tok_buf_str(out, "[");
        tok_buf_put(out, items.p, items.n);
        tok_buf_str(out, "]");
    } else {
        tok_buf_str(out, "(?:");
        if (items.n) {
            tok_buf_str(out, "[");
            tok_buf_put(out, items.p, items.n);
            tok_buf_str(out, "]");
        }
        tok_buf_put(out, alts.p + (items.n ? 0 : 1), alts.n - (items.n ? 0 : 1));
        tok_buf_str(out, ")");
    }
    free(items.p);
    free(alts.p);
    return true;
}

// A whole class at c->p ('['), intersections included; writes one atom.
static bool tr_class(tr_ctx *c, tok_buf *out)
{
    assert(*c->p == '[');
    c->p++;
    bool neg = false;
    if (*c->p == '^') {
        neg = true;
        c->p++;
    }
    tok_buf ops[8];
    int n_ops = 0;
    for (;;) {
        if (n_ops == 8)
            return tr_fail(c, "more than 8 intersected operands");
        ops[n_ops] = (tok_buf){0};
        tok_buf_put(&ops[n_ops], "", 0);
        // each operand is a positive atom; the class's own negation is
        // applied to the whole intersection below
        bool ok = tr_operand(c, &ops[n_ops]);
        n_ops++;
        if (!ok) {
            for (int i = 0; i < n_ops; i++)
                free(ops[i].p);
            return false;
        }
        if (c->p[0] == '&' && c->p[1] == '&') {
            c->p += 2;
            continue;
        }
        break;
    }
    if (*c->p != ']') {
        for (int i = 0; i < n_ops; i++)
            free(ops[i].p);
        return tr_fail(c, "unterminated character class");
    }
    c->p++;
    if (n_ops == 1) {
        // a plain class: put the negation back inside the brackets
        tok_buf *o = &ops[0];
        if (neg && o->p[0] == '[' && o->p[1] != '^') {
            tok_buf_str(out, "[^");
            tok_buf_put(out, o->p + 1, o->n - 1);
        } else if (neg) {
            tok_buf_str(out, "(?:(?!");
            tok_buf_put(out, o->p, o->n);
            tok_buf_str(out, ")(?s:.))");
        } else
            tok_buf_put(out, o->p, o->n);
        free(o->p);
        return true;
    }
    // A && B && ...: every later operand is a lookahead before the first
    tok_buf_str(out, neg ? "(?:(?!" : "(?:");
    for (int i = 1; i < n_ops; i++) {
        tok_buf_str(out, "(?=");
        tok_buf_put(out, ops[i].p, ops[i].n);
        tok_buf_str(out, ")");
    }
    tok_buf_put(out, ops[0].p, ops[0].n);
    tok_buf_str(out, neg ? ")(?s:.))" : ")");
    for (int i = 0; i < n_ops; i++)
        free(ops[i].p);
    return true;
}

char *tok_tiktoken_translate(const char *pattern, char *msg, size_t msg_len)
{
    assert(pattern);
    tr_ctx c = {.pat = pattern, .p = pattern};
    tok_buf out = {0};
    tok_buf_put(&out, "", 0);
    bool ok = true;
    while (ok && *c.p) {
        char ch = *c.p;
        if (ch == '\\')
            ok = tr_escape(&c, &out, false);
        else if (ch == '[')
            ok = tr_class(&c, &out);
        else if (ch == '(' && c.p[1] == '?' && strchr("imsxU-", c.p[2])) {
            // inline flags: m and s would change what $ and . were translated to
            const char *f = c.p + 2;
            while (*f && strchr("imsxU-", *f))
                f++;
            if ((*f == ':' || *f == ')') && (memchr(c.p + 2, 'm', (size_t)(f - c.p - 2)) ||
                                             memchr(c.p + 2, 's', (size_t)(f - c.p - 2)))) {
                c.msg[0] = 0;
                ok = tr_fail(&c, "inline flags m / s are not supported");
                break;
            }
            tok_buf_put(&out, c.p, (size_t)(f - c.p));
            c.p = f;
        } else if (ch == '$') {
            tok_buf_str(&out, "\\z");
            c.p++;
        } else if (ch == '.') {
            tok_buf_str(&out, "[^\\n]");
            c.p++;
        } else {
            tok_buf_put(&out, c.p, 1);
            c.p++;
        }
    }
    if (!ok) {
        if (msg && msg_len)
            snprintf(msg, msg_len, "%s", c.msg);
        free(out.p);
        return NULL;
    }
    return out.p;
}

pcre2_code *tok_tiktoken_compile(const char *pattern, const char *where, pt_err *err)
{
    char msg[200] = {0};
    char *pat = tok_tiktoken_translate(pattern, msg, sizeof msg);
    if (!pat) {
        pt_errf(err, "%s: pre-tokenizer pattern '%s': %s", where, pattern, msg);
        return NULL;
    }
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    if (!re) {
        char em[256];
        pcre2_get_error_message(ec, (PCRE2_UCHAR *)em, sizeof em);
        pt_errf(err, "%s: pre-tokenizer pattern '%s' (as PCRE2 '%s') at offset %zu: %s", where, pattern, pat,
                (size_t)eo, em);
        free(pat);
        return NULL;
    }
    free(pat);
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

int64_t pt_tiktoken_split(const char *pattern, const char *text, size_t len, size_t **spans, pt_err *err)
{
    assert(spans && (text || !len));
    pcre2_code *re = tok_tiktoken_compile(pattern ? pattern : tok_kimi_pattern, "pt_tiktoken_split", err);
    if (!re)
        return -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    size_t n = 0, cap = 16, pos = 0;
    size_t *v = malloc(cap * 2 * sizeof *v);
    assert(md && v);
    while (pos <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)(text ? text : ""), len, pos, 0, md, NULL);
        if (rc < 0)
            break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (n == cap) {
            cap *= 2;
            v = realloc(v, cap * 2 * sizeof *v);
            assert(v);
        }
        v[2 * n] = ov[0];
        v[2 * n + 1] = ov[1];
        n++;
        pos = ov[1] > ov[0] ? ov[1] : ov[1] + 1; // an empty match moves on (none of the patterns has one)
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    *spans = v;
    return (int64_t)n;
}

// template/jinja_parse.c — arena, lexer and parser of the Jinja subset.
//
// The lexer applies Jinja's whitespace rules as transformers configures them:
// `{%-` / `-%}` (and the same on `{{ }}` / `{# #}`) strip all whitespace on
// that side; trim_blocks drops the first newline after a block or comment
// tag; lstrip_blocks drops spaces and tabs between the start of a line and a
// block or comment tag (`{%+` disables it). The parser is recursive descent
// with Jinja2's operator precedence.
#include "template/jinja_internal.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- arena -------------------------------------------------------------------

typedef struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} jchunk;

void *ja_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    jchunk *c = a->head;
    if (!c || c->used + n > c->cap) {
        size_t cap = n > 60000 ? n : 60000;
        c = malloc(sizeof *c + cap);
        assert(c);
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *ja_strndup(jarena *a, const char *s, size_t n)
{
    char *p = ja_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void ja_free(jarena *a)
{
    for (jchunk *c = a->head, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    a->head = NULL;
}

// ---- tokens ------------------------------------------------------------------

enum {
    T_EOF, T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STR, T_INT, T_FLOAT, T_OP,
};

typedef struct tok {
    int type;
    int op;                // T_OP: operator code (see jinja ops below)
    const char *s;         // T_NAME / T_STR / T_TEXT: text (arena, NUL-terminated)
    size_t n;
    int64_t i;
    double f;
    int line;
} tok;

// operator codes shared with the evaluator (jinja_eval.c uses the same chars)
#define OP2(a, b) ((a) << 8 | (b))

typedef struct lexer {
    const char *src;
    size_t pos, len;
    int line;
    jarena *A;
    tok *v;
    size_t n, cap;
    pt_err *err;
    bool failed;
} lexer;

void jinja_vfail(pt_err *err, bool *failed, int line, const char *fmt, va_list ap)
{
    assert(failed && fmt);
    if (!*failed) {
        char m[800];
        vsnprintf(m, sizeof m, fmt, ap);
        pt_errf(err, "chat template line %d: %s", line, m);
    }
    *failed = true;
}

static int lex_fail(lexer *L, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jinja_vfail(L->err, &L->failed, line, fmt, ap);
    va_end(ap);
    return -1;
}

static void push(lexer *L, tok t)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? L->cap * 2 : 256;
        L->v = realloc(L->v, L->cap * sizeof *L->v);
        assert(L->v);
    }
    L->v[L->n++] = t;
}

static int count_nl(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

static int utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Lexes code inside {{ }} or {% %} starting at L->pos; stops after the
// closing delimiter. *dash_end is set when it was "-}}" / "-%}".
static int lex_code(lexer *L, char close, bool *dash_end)
{
    const char *s = L->src;
    int depth = 0; // open ( [ {: a "}}" inside a dict literal does not close the tag
    for (;;) {
        while (L->pos < L->len && is_ws(s[L->pos])) {
            if (s[L->pos] == '\n')
                L->line++;
            L->pos++;
        }
        if (L->pos >= L->len)
            return lex_fail(L, L->line, "unterminated tag (missing '%c}')", close);
        size_t p = L->pos;
        char c = s[p];
        if (depth <= 0 && c == '-' && p + 2 < L->len && s[p + 1] == close && s[p + 2] == '}') {
            *dash_end = true;
            L->pos = p + 3;
            return 0;
        }
        if (depth <= 0 && c == close && p + 1 < L->len && s[p + 1] == '}') {
            *dash_end = false;
            L->pos = p + 2;
            return 0;
        }
        tok t = {.line = L->line};
        if (c == '\'' || c == '"') {
            // string literal with Python escapes
            char *buf = ja_alloc(L->A, L->len - p + 1);
            size_t o = 0, i = p + 1;
            while (i < L->len && s[i] != c) {
                if (s[i] == '\\' && i + 1 < L->len) {
                    char e = s[++i];
                    switch (e) {
                    case 'n': buf[o++] = '\n'; break;
                    case 't': buf[o++] = '\t'; break;
                    case 'r': buf[o++] = '\r'; break;
                    case '0': buf[o++] = '\0'; break;
                    case '\\': case '\'': case '"': buf[o++] = e; break;
                    case 'u': case 'U': case 'x': { // \xXX, \uXXXX, \UXXXXXXXX
                        int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                        uint32_t cp = 0;
                        int k = 0;
                        for (; k < nd && i + 1 < L->len; k++) {
                            char h = s[i + 1];
                            int d = h >= '0' && h <= '9' ? h - '0' : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10 : -1;
                            if (d < 0)
                                break;
                            cp = cp << 4 | (uint32_t)d;
                            i++;
                        }
                        if (k < nd || cp > 0x10FFFF)
                            return lex_fail(L, t.line, "bad \\%c escape in string literal", e);
                        o += (size_t)utf8_put(cp, buf + o);
                        break;
                    }
                    default: buf[o++] = '\\'; buf[o++] = e; break;
                    }
                    i++;
                } else {
                    if (s[i] == '\n')
                        L->line++;
                    buf[o++] = s[i++];
                }
            }
            if (i >= L->len)
                return lex_fail(L, t.line, "unterminated string literal");
            buf[o] = 0;
            t.type = T_STR;
            t.s = buf;
            t.n = o;
            L->pos = i + 1;
        } else if (c >= '0' && c <= '9') {
            size_t i = p;
            while (i < L->len && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                i++;
            bool fl = i + 1 < L->len && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9';
            if (fl) {
                i++;
                while (i < L->len && s[i] >= '0' && s[i] <= '9')
                    i++;
            }
            if (i + 1 < L->len && (s[i] == 'e' || s[i] == 'E')) { // exponent
                size_t j = i + 1;
                if (j < L->len && (s[j] == '+' || s[j] == '-'))
                    j++;
                if (j < L->len && s[j] >= '0' && s[j] <= '9') {
                    while (j < L->len && s[j] >= '0' && s[j] <= '9')
                        j++;
                    i = j;
                    fl = true;
                }
            }
            char num[64];
            size_t k = 0;
            for (size_t j = p; j < i && k < 63; j++)
                if (s[j] != '_')
                    num[k++] = s[j];
            num[k] = 0;
            t.type = fl ? T_FLOAT : T_INT;
            if (fl)
                t.f = strtod(num, NULL);
            else
                t.i = strtoll(num, NULL, 10);
            L->pos = i;
        } else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            size_t i = p;
            while (i < L->len && (s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                                  (s[i] >= '0' && s[i] <= '9')))
                i++;
            t.type = T_NAME;
            t.s = ja_strndup(L->A, s + p, i - p);
            t.n = i - p;
            L->pos = i;
        } else {
            static const char *two[] = {"**", "//", "==", "!=", "<=", ">="};
            t.type = T_OP;
            t.op = c;
            L->pos = p + 1;
            for (int k = 0; k < 6; k++)
                if (p + 1 < L->len && s[p] == two[k][0] && s[p + 1] == two[k][1]) {
                    t.op = OP2(two[k][0], two[k][1]);
                    L->pos = p + 2;
                }
            if (!strchr("+-*/%~=<>.,:|()[]{}!", c))
                return lex_fail(L, t.line, "unexpected character '%c'", c);
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if (c == ')' || c == ']' || c == '}')
                depth--;
        }
        push(L, t);
    }
}

static void push_text(lexer *L, const char *s, size_t n, int line)
{
    if (!n)
        return;
    tok t = {.type = T_TEXT, .s = ja_strndup(L->A, s, n), .n = n, .line = line};
    push(L, t);
}

static int lex(lexer *L)
{
    const char *s = L->src;
    bool strip_next = false, trim_nl = false;
    while (L->pos <= L->len && !L->failed) {
        size_t start = L->pos;
        if (strip_next)
            while (start < L->len && is_ws(s[start]))
                start++;
        else if (trim_nl) {
            if (start < L->len && s[start] == '\n')
                start++;
            else if (start + 1 < L->len && s[start] == '\r' && s[start + 1] == '\n')
                start += 2;
        }
        L->line += count_nl(s + L->pos, start - L->pos);
        // next tag
        size_t k = start;
        while (k + 1 < L->len && !(s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')))
            k++;
        if (k + 1 >= L->len)
            k = L->len;
        size_t tend = k; // text is [start, tend)
        if (k < L->len) {
            char kind = s[k + 1], mod = k + 2 < L->len ? s[k + 2] : 0;
            if (mod == '-') {
                while (tend > start && is_ws(s[tend - 1]))
                    tend--;
            } else if ((kind == '%' || kind == '#') && mod != '+') {
                size_t l = tend;
                while (l > start && (s[l - 1] == ' ' || s[l - 1] == '\t'))
                    l--;
                if ((l == start && (start == 0 || s[start - 1] == '\n')) || (l > start && s[l - 1] == '\n'))
                    tend = l;
            }
        }
        push_text(L, s + start, tend - start, L->line);
        L->line += count_nl(s + start, k - start);
        if (k >= L->len)
            break;
        char kind = s[k + 1];
        size_t body = k + 2 + (k + 2 < L->len && (s[k + 2] == '-' || s[k + 2] == '+'));
        if (kind == '#') {
            const char *e = strstr(s + body, "#}");
            if (!e)
                return lex_fail(L, L->line, "unterminated comment");
            strip_next = e > s + body && e[-1] == '-';
            trim_nl = !strip_next;
            L->line += count_nl(s + k, (size_t)(e - (s + k)));
            L->pos = (size_t)(e - s) + 2;
            continue;
        }
        size_t first = L->n;
        push(L, (tok){.type = kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, .line = L->line});
        L->pos = body;
        bool dash = false;
        if (lex_code(L, kind == '{' ? '}' : '%', &dash) < 0)
            return -1;
        push(L, (tok){.type = kind == '{' ? T_VAR_END : T_BLOCK_END, .line = L->line});
        strip_next = dash;
        trim_nl = kind == '%' && !dash;
        // {% raw %} ... {% endraw %}: the content is text
        if (kind == '%' && L->n == first + 3 && L->v[first + 1].type == T_NAME && !strcmp(L->v[first + 1].s, "raw")) {
            L->n = first;
            const char *p = s + L->pos, *e = NULL;
            for (const char *q = strstr(p, "{%"); q; q = strstr(q + 2, "{%")) {
                const char *r = q + 2;
                if (*r == '-' || *r == '+')
                    r++;
                while (is_ws(*r))
                    r++;
                if (!strncmp(r, "endraw", 6)) {
                    e = q;
                    break;
                }
            }
            if (!e)
                return lex_fail(L, L->line, "missing {%% endraw %%}");
            size_t rs = L->pos, re = (size_t)(e - s);
            if (dash)
                while (rs < re && is_ws(s[rs]))
                    rs++;
            else if (rs < re && s[rs] == '\n')
                rs++;
            if (e[2] == '-')
                while (re > rs && is_ws(s[re - 1]))
                    re--;
            push_text(L, s + rs, re - rs, L->line);
            L->line += count_nl(s + L->pos, (size_t)(e - (s + L->pos)));
            const char *close = strstr(e, "%}");
            if (!close)
                return lex_fail(L, L->line, "unterminated endraw tag");
            strip_next = close[-1] == '-';
            trim_nl = !strip_next;
            L->pos = (size_t)(close - s) + 2;
        }
    }
    push(L, (tok){.type = T_EOF, .line = L->line});
    return L->failed ? -1 : 0;
}

// ---- parser ------------------------------------------------------------------

typedef struct parser {
    tok *v;
    size_t n, pos;
    jarena *A;
    pt_err *err;
    bool failed;
} parser;

static tok *cur(parser *P) { return &P->v[P->pos]; }

static jnode *fail(parser *P, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jinja_vfail(P->err, &P->failed, line, fmt, ap);
    va_end(ap);
    return NULL;
}

static const char *tok_desc(const tok *t)
{
    static _Thread_local char b[64];
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_TEXT: return "text";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_END: return "'%}'";
    case T_VAR_BEGIN: return "'{{'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_NAME: snprintf(b, sizeof b, "'%.40s'", t->s); return b;
    case T_STR: return "a string";
    case T_INT: case T_FLOAT: return "a number";
    default:
        if (t->op > 255)
            snprintf(b, sizeof b, "'%c%c'", t->op >> 8, t->op & 255);
        else
            snprintf(b, sizeof b, "'%c'", t->op);
        return b;
    }
}

static bool is_op(parser *P, int op) { return cur(P)->type == T_OP && cur(P)->op == op; }
static bool is_name(parser *P, const char *nm) { return cur(P)->type == T_NAME && !strcmp(cur(P)->s, nm); }

static bool accept_op(parser *P, int op)
{
    if (is_op(P, op)) {
        P->pos++;
        return true;
    }
    return false;
}

static bool accept_name(parser *P, const char *nm)
{
    if (is_name(P, nm)) {
        P->pos++;
        return true;
    }
    return false;
}

static bool expect_op(parser *P, int op)
{
    if (accept_op(P, op))
        return true;
    char want[8];
    if (op > 255)
        snprintf(want, sizeof want, "%c%c", op >> 8, op & 255);
    else
        snprintf(want, sizeof want, "%c", op);
    fail(P, cur(P)->line, "expected '%s', got %s", want, tok_desc(cur(P)));
    return false;
}

static jnode *node(parser *P, int kind, int line)
{
    jnode *n = ja_alloc(P->A, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

// Growable node-pointer list in the arena (copied on growth).
typedef struct nlist {
    jnode **v;
    const char **kw;
    int n, cap;
} nlist;

static void nl_push(parser *P, nlist *l, jnode *x, const char *kw)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        jnode **v = ja_alloc(P->A, (size_t)cap * sizeof *v);
        const char **k = ja_alloc(P->A, (size_t)cap * sizeof *k);
        if (l->n) {
            memcpy(v, l->v, (size_t)l->n * sizeof *v);
            memcpy(k, l->kw, (size_t)l->n * sizeof *k);
        }
        l->v = v;
        l->kw = k;
        l->cap = cap;
    }
    l->v[l->n] = x;
    l->kw[l->n++] = kw;
}

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P);
static jnode *parse_primary(parser *P);

// Call arguments after '(' up to ')': positional and name=value.
static void parse_args(parser *P, jnode *n)
{
    nlist l = {0};
    bool any_kw = false;
    while (!P->failed && !is_op(P, ')')) {
        const char *kw = NULL;
        if (cur(P)->type == T_NAME && P->v[P->pos + 1].type == T_OP && P->v[P->pos + 1].op == '=') {
            kw = cur(P)->s;
            P->pos += 2;
            any_kw = true;
        }
        jnode *a = parse_expr(P);
        if (!a)
            return;
        nl_push(P, &l, a, kw);
        if (!accept_op(P, ','))
            break;
    }
    expect_op(P, ')');
    n->args = l.v;
    n->kw = any_kw ? l.kw : NULL;
    n->nargs = l.n;
}

static jnode *lit(parser *P, int line, jv v)
{
    jnode *n = node(P, N_LIT, line);
    n->lit = v;
    return n;
}

static jnode *parse_primary(parser *P)
{
    tok *t = cur(P);
    int line = t->line;
    switch (t->type) {
    case T_STR: {
        // adjacent literals concatenate
        size_t total = 0, k = P->pos;
        while (P->v[k].type == T_STR)
            total += P->v[k++].n;
        jstr *s = ja_alloc(P->A, sizeof *s + total + 1);
        while (cur(P)->type == T_STR) {
            memcpy(s->s + s->n, cur(P)->s, cur(P)->n);
            s->n += cur(P)->n;
            P->pos++;
        }
        return lit(P, line, (jv){.t = JV_STR, .s = s});
    }
    case T_INT:
        P->pos++;
        return lit(P, line, (jv){.t = JV_INT, .i = t->i});
    case T_FLOAT:
        P->pos++;
        return lit(P, line, (jv){.t = JV_FLOAT, .f = t->f});
    case T_NAME: {
        P->pos++;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            return lit(P, line, (jv){.t = JV_BOOL, .b = true});
        if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            return lit(P, line, (jv){.t = JV_BOOL, .b = false});
        if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            return lit(P, line, (jv){.t = JV_NONE});
        jnode *n = node(P, N_NAME, line);
        n->name = t->s;
        return n;
    }
    case T_OP:
        if (t->op == '(') {
            P->pos++;
            if (accept_op(P, ')'))
                return node(P, N_LIST, line); // empty tuple
            jnode *e = parse_expr(P);
            if (!e)
                return NULL;
            if (is_op(P, ',')) { // tuple -> list
                nlist l = {0};
                nl_push(P, &l, e, NULL);
                while (accept_op(P, ',') && !is_op(P, ')')) {
                    jnode *x = parse_expr(P);
                    if (!x)
                        return NULL;
                    nl_push(P, &l, x, NULL);
                }
                e = node(P, N_LIST, line);
                e->args = l.v;
                e->nargs = l.n;
            }
            return expect_op(P, ')') ? e : NULL;
        }
        if (t->op == '[') {
            P->pos++;
            jnode *n = node(P, N_LIST, line);
            nlist l = {0};
            while (!P->failed && !is_op(P, ']')) {
                jnode *x = parse_expr(P);
                if (!x)
                    return NULL;
                nl_push(P, &l, x, NULL);
                if (!accept_op(P, ','))
                    break;
            }
            n->args = l.v;
            n->nargs = l.n;
            return expect_op(P, ']') ? n : NULL;
        }
        if (t->op == '{') {
            P->pos++;
            jnode *n = node(P, N_DICT, line);
            nlist l = {0};
            while (!P->failed && !is_op(P, '}')) {
                jnode *k = parse_expr(P);
                if (!k || !expect_op(P, ':'))
                    return NULL;
                jnode *v = parse_expr(P);
                if (!v)
                    return NULL;
                nl_push(P, &l, k, NULL);
                nl_push(P, &l, v, NULL);
                if (!accept_op(P, ','))
                    break;
            }
            n->args = l.v;
            n->nargs = l.n;
            return expect_op(P, '}') ? n : NULL;
        }
        break;
    default:
        break;
    }
    return fail(P, line, "unexpected %s in expression", tok_desc(t));
}

static jnode *parse_postfix(parser *P, jnode *n)
{
    while (n && !P->failed) {
        int line = cur(P)->line;
        if (accept_op(P, '.')) {
            if (cur(P)->type != T_NAME && cur(P)->type != T_INT)
                return fail(P, line, "expected an attribute name after '.'");
            jnode *a = node(P, N_ATTR, line);
            a->a = n;
            if (cur(P)->type == T_INT) { // x.0 -> x[0]
                a->kind = N_INDEX;
                a->b = lit(P, line, (jv){.t = JV_INT, .i = cur(P)->i});
            } else
                a->name = cur(P)->s;
            P->pos++;
            n = a;
        } else if (accept_op(P, '[')) {
            jnode *lo = NULL, *hi = NULL, *st = NULL;
            bool slice = false;
            if (!is_op(P, ':'))
                lo = parse_expr(P);
            if (accept_op(P, ':')) {
                slice = true;
                if (!is_op(P, ']') && !is_op(P, ':'))
                    hi = parse_expr(P);
                if (accept_op(P, ':') && !is_op(P, ']'))
                    st = parse_expr(P);
            }
            if (!expect_op(P, ']'))
                return NULL;
            jnode *x = node(P, slice ? N_SLICE : N_INDEX, line);
            x->a = n;
            if (slice) {
                x->args = ja_alloc(P->A, 3 * sizeof *x->args);
                x->args[0] = lo;
                x->args[1] = hi;
                x->args[2] = st;
                x->nargs = 3;
            } else
                x->b = lo;
            n = x;
        } else if (accept_op(P, '(')) {
            jnode *c = node(P, N_CALL, line);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else
            break;
    }
    return n;
}

static jnode *parse_filters(parser *P, jnode *n)
{
    while (n && !P->failed) {
        int line = cur(P)->line;
        if (accept_op(P, '|')) {
            if (cur(P)->type != T_NAME)
                return fail(P, line, "expected a filter name after '|'");
            jnode *f = node(P, N_FILTER, line);
            f->name = cur(P)->s;
            P->pos++;
            f->a = n;
            if (accept_op(P, '('))
                parse_args(P, f);
            n = f;
        } else if (accept_name(P, "is")) {
            jnode *t = node(P, N_TEST, line);
            t->op = accept_name(P, "not");
            if (cur(P)->type != T_NAME)
                return fail(P, line, "expected a test name after 'is'");
            t->name = cur(P)->s;
            P->pos++;
            t->a = n;
            if (accept_op(P, '('))
                parse_args(P, t);
            else {
                tok *c = cur(P);
                bool arg = c->type == T_STR || c->type == T_INT || c->type == T_FLOAT ||
                           (c->type == T_OP && (c->op == '(' || c->op == '[' || c->op == '{')) ||
                           (c->type == T_NAME && strcmp(c->s, "else") && strcmp(c->s, "or") &&
                            strcmp(c->s, "and") && strcmp(c->s, "if") && strcmp(c->s, "is") &&
                            strcmp(c->s, "in") && strcmp(c->s, "not"));
                if (arg) {
                    jnode *x = parse_postfix(P, parse_primary(P));
                    if (!x)
                        return NULL;
                    t->args = ja_alloc(P->A, sizeof *t->args);
                    t->args[0] = x;
                    t->nargs = 1;
                }
            }
            n = t;
        } else
            break;
    }
    return n;
}

static jnode *parse_unary(parser *P)
{
    int line = cur(P)->line;
    if (accept_op(P, '-')) {
        jnode *n = node(P, N_UNARY, line);
        n->op = '-';
        n->a = parse_unary(P);
        return n->a ? n : NULL;
    }
    if (accept_op(P, '+'))
        return parse_unary(P);
    return parse_filters(P, parse_postfix(P, parse_primary(P)));
}

static jnode *binary(parser *P, int op, int line, jnode *a, jnode *b)
{
    if (!a || !b)
        return NULL;
    jnode *n = node(P, N_BINARY, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *P)
{
    jnode *a = parse_unary(P);
    while (a && is_op(P, OP2('*', '*'))) {
        int line = cur(P)->line;
        P->pos++;
        a = binary(P, OP2('*', '*'), line, a, parse_unary(P));
    }
    return a;
}

static jnode *parse_math2(parser *P)
{
    jnode *a = parse_pow(P);
    while (a && (is_op(P, '*') || is_op(P, '/') || is_op(P, OP2('/', '/')) || is_op(P, '%'))) {
        int op = cur(P)->op, line = cur(P)->line;
        P->pos++;
        a = binary(P, op, line, a, parse_pow(P));
    }
    return a;
}

static jnode *parse_concat(parser *P)
{
    jnode *a = parse_math2(P);
    while (a && is_op(P, '~')) {
        int line = cur(P)->line;
        P->pos++;
        a = binary(P, '~', line, a, parse_math2(P));
    }
    return a;
}

static jnode *parse_math1(parser *P)
{
    jnode *a = parse_concat(P);
    while (a && (is_op(P, '+') || is_op(P, '-'))) {
        int op = cur(P)->op, line = cur(P)->line;
        P->pos++;
        a = binary(P, op, line, a, parse_concat(P));
    }
    return a;
}

static jnode *parse_compare(parser *P)
{
    jnode *a = parse_math1(P);
    while (a && !P->failed) {
        int line = cur(P)->line;
        tok *t = cur(P);
        if (t->type == T_OP && (t->op == OP2('=', '=') || t->op == OP2('!', '=') || t->op == '<' ||
                                t->op == '>' || t->op == OP2('<', '=') || t->op == OP2('>', '='))) {
            P->pos++;
            a = binary(P, t->op, line, a, parse_math1(P));
        } else if (accept_name(P, "in"))
            a = binary(P, 'i', line, a, parse_math1(P));
        else if (is_name(P, "not") && P->v[P->pos + 1].type == T_NAME && !strcmp(P->v[P->pos + 1].s, "in")) {
            P->pos += 2;
            a = binary(P, 'I', line, a, parse_math1(P));
        } else
            break;
    }
    return a;
}

static jnode *parse_not(parser *P)
{
    int line = cur(P)->line;
    if (accept_name(P, "not")) {
        jnode *n = node(P, N_NOT, line);
        n->a = parse_not(P);
        return n->a ? n : NULL;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P)
{
    jnode *a = parse_not(P);
    while (a && is_name(P, "and")) {
        jnode *n = node(P, N_AND, cur(P)->line);
        P->pos++;
        n->a = a;
        n->b = parse_not(P);
        a = n->b ? n : NULL;
    }
    return a;
}

static jnode *parse_or(parser *P)
{
    jnode *a = parse_and(P);
    while (a && is_name(P, "or")) {
        jnode *n = node(P, N_OR, cur(P)->line);
        P->pos++;
        n->a = a;
        n->b = parse_and(P);
        a = n->b ? n : NULL;
    }
    return a;
}

static jnode *parse_expr(parser *P)
{
    jnode *a = parse_or(P);
    while (a && is_name(P, "if")) {
        jnode *n = node(P, N_COND, cur(P)->line);
        P->pos++;
        n->b = a;            // value if true
        n->a = parse_or(P);  // condition
        if (!n->a)
            return NULL;
        if (accept_name(P, "else")) {
            n->c = parse_expr(P);
            if (!n->c)
                return NULL;
        }
        a = n;
    }
    return a;
}

// ---- statements ------------------------------------------------------------------

static bool expect_block_end(parser *P)
{
    if (cur(P)->type == T_BLOCK_END) {
        P->pos++;
        return true;
    }
    fail(P, cur(P)->line, "expected '%%}', got %s", tok_desc(cur(P)));
    return false;
}

static jnode *parse_stmt(parser *P);

// Parses statements until a block tag whose keyword is one of ends; the
// keyword is consumed and returned in *which (NULL at end of template).
static jnode **parse_body(parser *P, const char *const *ends, int *n, const char **which)
{
    nlist l = {0};
    *which = NULL;
    while (!P->failed) {
        tok *t = cur(P);
        if (t->type == T_EOF)
            break;
        if (t->type == T_BLOCK_BEGIN && P->v[P->pos + 1].type == T_NAME) {
            const char *kw = P->v[P->pos + 1].s;
            bool end = false;
            for (int i = 0; ends && ends[i]; i++)
                if (!strcmp(kw, ends[i]))
                    end = true;
            if (end) {
                P->pos += 2;
                *which = kw;
                break;
            }
        }
        jnode *s = parse_stmt(P);
        if (s)
            nl_push(P, &l, s, NULL);
    }
    *n = l.n;
    return l.v;
}

static jnode *parse_if(parser *P, int line)
{
    jnode *n = node(P, N_IF, line);
    n->a = parse_expr(P);
    if (!n->a || !expect_block_end(P))
        return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *w;
    n->body = parse_body(P, ends, &n->nbody, &w);
    if (P->failed)
        return NULL;
    if (!w)
        return fail(P, line, "'if' without 'endif'");
    if (!strcmp(w, "elif")) {
        jnode *e = parse_if(P, cur(P)->line);
        if (!e)
            return NULL;
        n->els = ja_alloc(P->A, sizeof *n->els);
        n->els[0] = e;
        n->nels = 1;
        return n;
    }
    if (!strcmp(w, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        if (!expect_block_end(P))
            return NULL;
        n->els = parse_body(P, ends2, &n->nels, &w);
        if (!w)
            return fail(P, line, "'if' without 'endif'");
    }
    return expect_block_end(P) ? n : NULL;
}

static jnode *parse_for(parser *P, int line)
{
    jnode *n = node(P, N_FOR, line);
    nlist names = {0};
    do {
        if (cur(P)->type != T_NAME)
            return fail(P, line, "expected a loop variable name");
        nl_push(P, &names, (jnode *)cur(P)->s, NULL);
        P->pos++;
    } while (accept_op(P, ','));
    n->targets = (const char **)names.v;
    n->ntargets = names.n;
    if (!accept_name(P, "in"))
        return fail(P, line, "expected 'in' in for loop");
    n->a = parse_or(P);
    if (!n->a)
        return NULL;
    if (accept_name(P, "if") && !(n->b = parse_or(P)))
        return NULL;
    accept_name(P, "recursive");
    if (!expect_block_end(P))
        return NULL;
    static const char *const ends[] = {"else", "endfor", NULL};
    const char *w;
    n->body = parse_body(P, ends, &n->nbody, &w);
    if (!w)
        return fail(P, line, "'for' without 'endfor'");
    if (!strcmp(w, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        if (!expect_block_end(P))
            return NULL;
        n->els = parse_body(P, ends2, &n->nels, &w);
        if (!w)
            return fail(P, line, "'for' without 'endfor'");
    }
    return expect_block_end(P) ? n : NULL;
}

static jnode *parse_set(parser *P, int line)
{
    jnode *n = node(P, N_SET, line);
    nlist names = {0};
    do {
        if (cur(P)->type != T_NAME)
            return fail(P, line, "expected a variable name after 'set'");
        nl_push(P, &names, (jnode *)cur(P)->s, NULL);
        P->pos++;
        if (names.n == 1 && accept_op(P, '.')) { // ns.attr
            if (cur(P)->type != T_NAME)
                return fail(P, line, "expected an attribute name");
            n->name = cur(P)->s;
            P->pos++;
            break;
        }
    } while (accept_op(P, ','));
    n->targets = (const char **)names.v;
    n->ntargets = names.n;
    if (accept_op(P, '=')) {
        n->a = parse_expr(P);
        if (!n->a)
            return NULL;
        if (is_op(P, ',')) { // a, b = x, y
            jnode *l = node(P, N_LIST, line);
            nlist items = {0};
            nl_push(P, &items, n->a, NULL);
            while (accept_op(P, ','))
                nl_push(P, &items, parse_expr(P), NULL);
            l->args = items.v;
            l->nargs = items.n;
            n->a = l;
        }
        return expect_block_end(P) ? n : NULL;
    }
    if (!expect_block_end(P))
        return NULL;
    n->kind = N_SET_BLOCK;
    static const char *const ends[] = {"endset", NULL};
    const char *w;
    n->body = parse_body(P, ends, &n->nbody, &w);
    if (!w)
        return fail(P, line, "'set' block without 'endset'");
    return expect_block_end(P) ? n : NULL;
}

static jnode *parse_macro(parser *P, int line)
{
    jnode *n = node(P, N_MACRO, line);
    if (cur(P)->type != T_NAME)
        return fail(P, line, "expected a macro name");
    n->name = cur(P)->s;
    P->pos++;
    if (!expect_op(P, '('))
        return NULL;
    nlist params = {0}, defs = {0};
    while (!P->failed && !is_op(P, ')')) {
        if (cur(P)->type != T_NAME)
            return fail(P, line, "expected a parameter name");
        nl_push(P, &params, (jnode *)cur(P)->s, NULL);
        P->pos++;
        jnode *d = NULL;
        if (accept_op(P, '=') && !(d = parse_expr(P)))
            return NULL;
        nl_push(P, &defs, d, NULL);
        if (!accept_op(P, ','))
            break;
    }
    if (!expect_op(P, ')') || !expect_block_end(P))
        return NULL;
    n->targets = (const char **)params.v;
    n->ntargets = params.n;
    n->args = defs.v;
    n->nargs = defs.n;
    static const char *const ends[] = {"endmacro", NULL};
    const char *w;
    n->body = parse_body(P, ends, &n->nbody, &w);
    if (!w)
        return fail(P, line, "'macro' without 'endmacro'");
    if (cur(P)->type == T_NAME) // {% endmacro name %}
        P->pos++;
    return expect_block_end(P) ? n : NULL;
}

static jnode *parse_stmt(parser *P)
{
    tok *t = cur(P);
    int line = t->line;
    if (t->type == T_TEXT) {
        P->pos++;
        jnode *n = node(P, N_TEXT, line);
        jstr *s = ja_alloc(P->A, sizeof *s + t->n + 1);
        memcpy(s->s, t->s, t->n);
        s->n = t->n;
        n->lit = (jv){.t = JV_STR, .s = s};
        return n;
    }
    if (t->type == T_VAR_BEGIN) {
        P->pos++;
        jnode *n = node(P, N_OUTPUT, line);
        n->a = parse_expr(P);
        if (!n->a)
            return NULL;
        if (cur(P)->type != T_VAR_END)
            return fail(P, cur(P)->line, "expected '}}', got %s", tok_desc(cur(P)));
        P->pos++;
        return n;
    }
    if (t->type != T_BLOCK_BEGIN)
        return fail(P, line, "unexpected %s", tok_desc(t));
    P->pos++;
    t = cur(P);
    if (t->type != T_NAME)
        return fail(P, line, "expected a tag name after '{%%'");
    P->pos++;
    const char *kw = t->s;
    if (!strcmp(kw, "if"))
        return parse_if(P, line);
    if (!strcmp(kw, "for"))
        return parse_for(P, line);
    if (!strcmp(kw, "set"))
        return parse_set(P, line);
    if (!strcmp(kw, "macro"))
        return parse_macro(P, line);
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        jnode *n = node(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE, line);
        return expect_block_end(P) ? n : NULL;
    }
    if (!strcmp(kw, "generation")) { // transformers' assistant-mask marker: no output of its own
        jnode *n = node(P, N_BLOCKWRAP, line);
        static const char *const ends[] = {"endgeneration", NULL};
        const char *w;
        if (!expect_block_end(P))
            return NULL;
        n->body = parse_body(P, ends, &n->nbody, &w);
        if (!w)
            return fail(P, line, "'generation' without 'endgeneration'");
        return expect_block_end(P) ? n : NULL;
    }
    return fail(P, line, "unknown or unsupported tag '%s'", kw);
}

pt_template *jinja_parse(const char *src, pt_err *err)
{
    pt_template *T = calloc(1, sizeof *T);
    assert(T);
    lexer L = {.src = src, .len = strlen(src), .line = 1, .A = &T->arena, .err = err};
    if (lex(&L) < 0) {
        free(L.v);
        pt_template_free(T);
        return NULL;
    }
    parser P = {.v = L.v, .n = L.n, .A = &T->arena, .err = err};
    const char *w;
    T->body = parse_body(&P, NULL, &T->nbody, &w);
    if (!P.failed && cur(&P)->type != T_EOF)
        fail(&P, cur(&P)->line, "unexpected %s", tok_desc(cur(&P)));
    free(L.v);
    if (P.failed) {
        pt_template_free(T);
        return NULL;
    }
    return T;
}

void pt_template_free(pt_template *t)
{
    if (!t)
        return;
    ja_free(&t->arena);
    free(t);
}

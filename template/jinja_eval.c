// template/jinja_eval.c — executes a parsed template: statements,
// expressions, filters, tests, methods of str/dict/list, loop variables,
// macros and the globals transformers provides.
//
// Lenient where Jinja would raise on an Undefined (attribute of undefined
// is undefined, iterating undefined/none yields nothing); errors otherwise
// stop rendering with "chat template line N: ...".
#include "template/jinja_value.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OP2(a, b) ((a) << 8 | (b))
#define MAX_DEPTH 200

typedef struct scope {
    jdict *vars;
    struct scope *parent;
} scope;

typedef struct R {
    jarena *A;
    jobuf *out;
    pt_err *err;
    bool failed;
    int ctl;               // 1 break, 2 continue pending
    scope *global;
    int depth;
} R;

static const jv UNDEF = {.t = JV_UNDEF};
static const jv NONE = {.t = JV_NONE};

static jv rfail(R *r, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jinja_vfail(r->err, &r->failed, line, fmt, ap);
    va_end(ap);
    return UNDEF;
}

static jv B(bool b) { return (jv){.t = JV_BOOL, .b = b}; }
static jv I(int64_t i) { return (jv){.t = JV_INT, .i = i}; }

static jv *lookup(scope *s, const char *name)
{
    size_t n = strlen(name);
    for (; s; s = s->parent) {
        jv *v = jd_get(s->vars, name, n);
        if (v)
            return v;
    }
    return NULL;
}

static void setvar(R *r, scope *s, const char *name, jv v) { jd_set(r->A, s->vars, name, strlen(name), v); }

static jstr *to_str(R *r, jv v)
{
    if (v.t == JV_STR)
        return v.s;
    jobuf b = {0};
    jo_put(&b, "", 0);
    jv_write(&b, v, false);
    jv s = jv_strn(r->A, b.p, b.n);
    free(b.p);
    return s.s;
}

// ---- UTF-8 / string helpers ---------------------------------------------------

static int u8len(unsigned char c) { return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1; }

static size_t u8count(const jstr *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i += (size_t)u8len((unsigned char)s->s[i]))
        n++;
    return n;
}

// Python str.isspace for the code point starting at s (length *l).
static bool u8space(const char *s, size_t n, int *l)
{
    unsigned char c = (unsigned char)s[0];
    *l = u8len(c);
    if ((size_t)*l > n)
        *l = 1;
    if (c < 0x80)
        return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f);
    uint32_t cp = c & (0xFF >> (*l + 1));
    for (int k = 1; k < *l; k++)
        cp = cp << 6 | ((unsigned char)s[k] & 0x3F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static bool in_chars(const char *s, int l, const jstr *chars)
{
    for (size_t i = 0; i + (size_t)l <= chars->n; i += (size_t)u8len((unsigned char)chars->s[i]))
        if (u8len((unsigned char)chars->s[i]) == l && !memcmp(chars->s + i, s, (size_t)l))
            return true;
    return false;
}

// strip/lstrip/rstrip with optional chars (NULL = whitespace).
static jv strip(R *r, const jstr *s, const jstr *chars, bool left, bool right)
{
    size_t a = 0, b = s->n;
    int l;
    while (left && a < b) {
        bool hit = chars ? (l = u8len((unsigned char)s->s[a]), in_chars(s->s + a, l, chars))
                         : u8space(s->s + a, b - a, &l);
        if (!hit)
            break;
        a += (size_t)l;
    }
    while (right && b > a) {
        size_t k = b - 1;
        while (k > a && ((unsigned char)s->s[k] & 0xC0) == 0x80)
            k--;
        bool hit = chars ? in_chars(s->s + k, (int)(b - k), chars) : u8space(s->s + k, b - k, &l);
        if (!hit)
            break;
        b = k;
    }
    return jv_strn(r->A, s->s + a, b - a);
}

static const char *memmem_(const char *h, size_t hn, const char *n, size_t nn)
{
    if (!nn)
        return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn))
            return h + i;
    return NULL;
}

static jv replace(R *r, const jstr *s, const jstr *a, const jstr *b, int64_t count)
{
    jobuf o = {0};
    jo_put(&o, "", 0);
    size_t i = 0;
    int64_t done = 0;
    if (!a->n) { // Python inserts between characters
        for (; i < s->n && (count < 0 || done < count); done++) {
            jo_put(&o, b->s, b->n);
            int l = u8len((unsigned char)s->s[i]);
            jo_put(&o, s->s + i, (size_t)l);
            i += (size_t)l;
        }
        if (i >= s->n && (count < 0 || done < count))
            jo_put(&o, b->s, b->n);
    } else
        while (i < s->n) {
            const char *h = count >= 0 && done >= count ? NULL : memmem_(s->s + i, s->n - i, a->s, a->n);
            if (!h)
                break;
            jo_put(&o, s->s + i, (size_t)(h - (s->s + i)));
            jo_put(&o, b->s, b->n);
            i = (size_t)(h - s->s) + a->n;
            done++;
        }
    jo_put(&o, s->s + i, s->n - i);
    jv v = jv_strn(r->A, o.p, o.n);
    free(o.p);
    return v;
}

static jv split(R *r, const jstr *s, const jstr *sep, int64_t maxsplit)
{
    jv l = jv_list(r->A);
    if (!sep) {
        size_t i = 0;
        int ln;
        int64_t k = 0;
        for (;;) {
            while (i < s->n && u8space(s->s + i, s->n - i, &ln))
                i += (size_t)ln;
            if (i >= s->n)
                break;
            size_t st = i;
            if (maxsplit >= 0 && k >= maxsplit) {
                // rest, with trailing whitespace removed
                size_t e = s->n;
                while (e > st && u8space(s->s + e - 1, 1, &ln))
                    e--;
                jl_push(r->A, l.l, jv_strn(r->A, s->s + st, e - st));
                break;
            }
            while (i < s->n && !u8space(s->s + i, s->n - i, &ln))
                i += (size_t)u8len((unsigned char)s->s[i]);
            jl_push(r->A, l.l, jv_strn(r->A, s->s + st, i - st));
            k++;
        }
        return l;
    }
    size_t i = 0;
    int64_t k = 0;
    for (;;) {
        const char *h = maxsplit >= 0 && k >= maxsplit ? NULL : memmem_(s->s + i, s->n - i, sep->s, sep->n);
        if (!h || !sep->n)
            break;
        jl_push(r->A, l.l, jv_strn(r->A, s->s + i, (size_t)(h - (s->s + i))));
        i = (size_t)(h - s->s) + sep->n;
        k++;
    }
    jl_push(r->A, l.l, jv_strn(r->A, s->s + i, s->n - i));
    return l;
}

static jv casefn(R *r, const jstr *s, int mode) // 0 lower, 1 upper, 2 title, 3 capitalize
{
    jv v = jv_strn(r->A, s->s, s->n);
    bool start = true;
    for (size_t i = 0; i < v.s->n; i++) {
        char c = v.s->s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        bool up = mode == 1 || ((mode == 2 || mode == 3) && start);
        if (mode == 3 && !start)
            up = false;
        if (alpha)
            v.s->s[i] = up ? (char)(c >= 'a' && c <= 'z' ? c - 32 : c) : (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        if (mode == 2)
            start = !alpha;
        else if (mode == 3)
            start = false;
    }
    return v;
}

// Iterable view of a value as a list (dict -> keys, string -> chars).
static jlist *as_list(R *r, jv v)
{
    if (v.t == JV_LIST)
        return v.l;
    jlist *l = ja_alloc(r->A, sizeof *l);
    if (v.t == JV_DICT)
        for (size_t i = 0; i < v.d->n; i++)
            jl_push(r->A, l, (jv){.t = JV_STR, .s = v.d->k[i]});
    else if (v.t == JV_STR)
        for (size_t i = 0; i < v.s->n; i += (size_t)u8len((unsigned char)v.s->s[i]))
            jl_push(r->A, l, jv_strn(r->A, v.s->s + i, (size_t)u8len((unsigned char)v.s->s[i])));
    return l;
}

static jv items(R *r, jdict *d)
{
    jv l = jv_list(r->A);
    for (size_t i = 0; i < d->n; i++) {
        jv p = jv_list(r->A);
        jl_push(r->A, p.l, (jv){.t = JV_STR, .s = d->k[i]});
        jl_push(r->A, p.l, d->v[i]);
        jl_push(r->A, l.l, p);
    }
    return l;
}

static int64_t length(R *r, jv v)
{
    switch (v.t) {
    case JV_STR: return (int64_t)u8count(v.s);
    case JV_LIST: return (int64_t)v.l->n;
    case JV_DICT: return (int64_t)v.d->n;
    default: (void)r; return 0;
    }
}

// ---- evaluation ---------------------------------------------------------------

typedef struct args {
    int n;
    jv *v;
    const char **kw;       // (n,) NULL for positional
} args;

static jv eval(R *r, scope *s, const jnode *n);
static void exec_body(R *r, scope *s, jnode *const *body, int n);

static args eval_args(R *r, scope *s, const jnode *n)
{
    args a = {.n = n->nargs, .v = ja_alloc(r->A, (size_t)(n->nargs + 1) * sizeof(jv)), .kw = n->kw};
    for (int i = 0; i < n->nargs; i++)
        a.v[i] = eval(r, s, n->args[i]);
    return a;
}

// Argument by keyword or position (positional index counts positionals only).
static jv arg(const args *a, int pos, const char *kw, jv def)
{
    int p = 0;
    for (int i = 0; i < a->n; i++) {
        const char *k = a->kw ? a->kw[i] : NULL;
        if (k) {
            if (kw && !strcmp(k, kw))
                return a->v[i];
        } else if (p++ == pos)
            return a->v[i];
    }
    return def;
}

static bool need_str(R *r, int line, jv v, const char *what)
{
    if (v.t == JV_STR)
        return true;
    rfail(r, line, "%s expects a string, got %s", what, jv_type_name(v));
    return false;
}

static jv call_macro(R *r, const jnode *m, const args *a, int line)
{
    if (++r->depth > MAX_DEPTH)
        return rfail(r, line, "macro recursion too deep");
    scope ms = {.vars = jv_dict(r->A).d, .parent = r->global};
    int p = 0;
    for (int i = 0; i < m->ntargets; i++) {
        jv v = UNDEF;
        // positional
        int seen = 0;
        for (int k = 0; k < a->n; k++)
            if (!(a->kw && a->kw[k]) && seen++ == p) {
                v = a->v[k];
                break;
            }
        p++;
        for (int k = 0; a->kw && k < a->n; k++)
            if (a->kw[k] && !strcmp(a->kw[k], m->targets[i]))
                v = a->v[k];
        if (v.t == JV_UNDEF && m->args[i])
            v = eval(r, &ms, m->args[i]);
        setvar(r, &ms, m->targets[i], v);
    }
    jobuf *saved = r->out, o = {0};
    jo_put(&o, "", 0);
    r->out = &o;
    exec_body(r, &ms, m->body, m->nbody);
    r->out = saved;
    r->ctl = 0;
    jv res = jv_strn(r->A, o.p, o.n);
    free(o.p);
    r->depth--;
    return res;
}


// Python "fmt % args": %s %r %d %i %f (with an optional .precision) and %%.
static jv percent_format(R *r, const jstr *fmt, jv args, int line)
{
    jlist one = {.n = 1, .cap = 1, .v = &args};
    jlist *av = args.t == JV_LIST ? args.l : &one;
    size_t k = 0;
    jobuf o = {0};
    jo_put(&o, "", 0);
    for (size_t i = 0; i < fmt->n; i++) {
        if (fmt->s[i] != '%' || i + 1 >= fmt->n) {
            jo_put(&o, fmt->s + i, 1);
            continue;
        }
        int prec = -1;
        size_t j = i + 1;
        if (fmt->s[j] == '.') {
            prec = 0;
            for (j++; j < fmt->n && fmt->s[j] >= '0' && fmt->s[j] <= '9'; j++)
                prec = prec * 10 + (fmt->s[j] - '0');
        }
        char c = j < fmt->n ? fmt->s[j] : 0;
        if (c == '%') {
            jo_puts(&o, "%");
        } else if (c == 's' || c == 'r' || c == 'd' || c == 'i' || c == 'f') {
            if (k >= av->n) {
                free(o.p);
                return rfail(r, line, "not enough arguments for format string");
            }
            jv a = av->v[k++];
            char buf[64];
            if (c == 'd' || c == 'i')
                snprintf(buf, sizeof buf, "%lld", (long long)(a.t == JV_FLOAT ? (int64_t)a.f : a.t == JV_BOOL ? a.b : a.i)),
                    jo_puts(&o, buf);
            else if (c == 'f')
                snprintf(buf, sizeof buf, "%.*f", prec < 0 ? 6 : prec, a.t == JV_FLOAT ? a.f : (double)a.i),
                    jo_puts(&o, buf);
            else
                jv_write(&o, a, c == 'r');
        } else {
            free(o.p);
            return rfail(r, line, "unsupported format directive '%%%c'", c ? c : ' ');
        }
        i = j;
    }
    jv v = jv_strn(r->A, o.p, o.n);
    free(o.p);
    return v;
}

// Python str.format: {} / {0} / {name} fields (no format specs), {{ and }}.
static jv brace_format(R *r, const jstr *fmt, const args *a, int line)
{
    jobuf o = {0};
    jo_put(&o, "", 0);
    int auto_i = 0;
    for (size_t i = 0; i < fmt->n; i++) {
        char c = fmt->s[i];
        if ((c == '{' || c == '}') && i + 1 < fmt->n && fmt->s[i + 1] == c) {
            jo_put(&o, &c, 1);
            i++;
            continue;
        }
        if (c != '{') {
            jo_put(&o, &c, 1);
            continue;
        }
        const char *e = memchr(fmt->s + i, '}', fmt->n - i);
        if (!e) {
            free(o.p);
            return rfail(r, line, "unmatched '{' in format string");
        }
        size_t nl = (size_t)(e - (fmt->s + i + 1));
        const char *name = fmt->s + i + 1;
        jv v = UNDEF;
        if (!nl)
            v = arg(a, auto_i++, NULL, UNDEF);
        else if (name[0] >= '0' && name[0] <= '9')
            v = arg(a, atoi(name), NULL, UNDEF);
        else {
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)nl, name);
            v = arg(a, 1 << 30, key, UNDEF);
        }
        jv_write(&o, v, false);
        i = (size_t)(e - fmt->s);
    }
    jv v = jv_strn(r->A, o.p, o.n);
    free(o.p);
    return v;
}

static jv call_builtin(R *r, const char *name, const args *a, int line)
{
    if (!strcmp(name, "range")) {
        int64_t lo = 0, hi, st = 1;
        int np = 0;
        for (int i = 0; i < a->n; i++)
            np += !(a->kw && a->kw[i]);
        if (np == 1)
            hi = arg(a, 0, NULL, I(0)).i;
        else {
            lo = arg(a, 0, NULL, I(0)).i;
            hi = arg(a, 1, NULL, I(0)).i;
            st = arg(a, 2, NULL, I(1)).i;
        }
        if (!st)
            return rfail(r, line, "range() step must not be zero");
        jv l = jv_list(r->A);
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
            if (l.l->n > 1000000)
                return rfail(r, line, "range() too long");
            jl_push(r->A, l.l, I(i));
        }
        return l;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jv d = jv_dict(r->A);
        d.d->ns = name[0] == 'n';
        for (int i = 0; i < a->n; i++) {
            if (a->kw && a->kw[i])
                jd_set(r->A, d.d, a->kw[i], strlen(a->kw[i]), a->v[i]);
            else if (a->v[i].t == JV_DICT)
                for (size_t k = 0; k < a->v[i].d->n; k++)
                    jd_set(r->A, d.d, a->v[i].d->k[k]->s, a->v[i].d->k[k]->n, a->v[i].d->v[k]);
        }
        return d;
    }
    if (!strcmp(name, "raise_exception")) {
        jv m = arg(a, 0, NULL, UNDEF);
        return rfail(r, line, "template raised an exception: %s", m.t == JV_STR ? m.s->s : "(no message)");
    }
    if (!strcmp(name, "strftime_now")) {
        jv f = arg(a, 0, NULL, UNDEF);
        if (!need_str(r, line, f, "strftime_now"))
            return UNDEF;
        char buf[256];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t k = strftime(buf, sizeof buf, f.s->s, &tm);
        return jv_strn(r->A, buf, k);
    }
    return rfail(r, line, "unknown function '%s'", name);
}

// obj.name(args) for strings, dicts, lists and the loop object.
static jv call_method(R *r, jv o, const char *m, const args *a, int line)
{
    if (o.t == JV_STR) {
        const jstr *s = o.s;
        jv x = arg(a, 0, NULL, UNDEF);
        if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
            bool end = m[0] == 'e';
            jlist *cands = x.t == JV_LIST ? x.l : NULL;
            size_t nc = cands ? cands->n : 1;
            for (size_t i = 0; i < nc; i++) {
                jv c = cands ? cands->v[i] : x;
                if (!need_str(r, line, c, m))
                    return UNDEF;
                if (c.s->n <= s->n && !memcmp(s->s + (end ? s->n - c.s->n : 0), c.s->s, c.s->n))
                    return B(true);
            }
            return B(false);
        }
        if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
            jv c = arg(a, 0, "chars", NONE);
            return strip(r, s, c.t == JV_STR ? c.s : NULL, m[0] != 'r', m[0] != 'l');
        }
        if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
            jv sep = arg(a, 0, "sep", NONE), mx = arg(a, 1, "maxsplit", I(-1));
            if (m[0] == 'r' && mx.i >= 0 && sep.t == JV_STR) { // rsplit with a limit
                jv all = split(r, s, sep.s, -1);
                int64_t keep = (int64_t)all.l->n - mx.i;
                if (keep <= 1)
                    return all;
                jv l = jv_list(r->A);
                jobuf b = {0};
                jo_put(&b, "", 0);
                for (int64_t i = 0; i < keep; i++) {
                    if (i)
                        jo_put(&b, sep.s->s, sep.s->n);
                    jo_put(&b, all.l->v[i].s->s, all.l->v[i].s->n);
                }
                jl_push(r->A, l.l, jv_strn(r->A, b.p, b.n));
                free(b.p);
                for (size_t i = (size_t)keep; i < all.l->n; i++)
                    jl_push(r->A, l.l, all.l->v[i]);
                return l;
            }
            return split(r, s, sep.t == JV_STR ? sep.s : NULL, mx.t == JV_INT ? mx.i : -1);
        }
        if (!strcmp(m, "splitlines")) {
            jv l = jv_list(r->A);
            size_t st = 0;
            for (size_t i = 0; i < s->n; i++)
                if (s->s[i] == '\n' || s->s[i] == '\r') {
                    jl_push(r->A, l.l, jv_strn(r->A, s->s + st, i - st));
                    if (s->s[i] == '\r' && i + 1 < s->n && s->s[i + 1] == '\n')
                        i++;
                    st = i + 1;
                }
            if (st < s->n)
                jl_push(r->A, l.l, jv_strn(r->A, s->s + st, s->n - st));
            return l;
        }
        if (!strcmp(m, "lower")) return casefn(r, s, 0);
        if (!strcmp(m, "upper")) return casefn(r, s, 1);
        if (!strcmp(m, "title")) return casefn(r, s, 2);
        if (!strcmp(m, "capitalize")) return casefn(r, s, 3);
        if (!strcmp(m, "replace")) {
            jv b = arg(a, 1, NULL, UNDEF), c = arg(a, 2, "count", I(-1));
            if (!need_str(r, line, x, "replace") || !need_str(r, line, b, "replace"))
                return UNDEF;
            return replace(r, s, x.s, b.s, c.t == JV_INT ? c.i : -1);
        }
        if (!strcmp(m, "find") || !strcmp(m, "count") || !strcmp(m, "index")) {
            if (!need_str(r, line, x, m))
                return UNDEF;
            if (m[0] == 'c') {
                int64_t k = 0;
                for (const char *h = s->s; x.s->n && (h = memmem_(h, s->n - (size_t)(h - s->s), x.s->s, x.s->n));
                     h += x.s->n)
                    k++;
                return I(k);
            }
            const char *h = memmem_(s->s, s->n, x.s->s, x.s->n);
            if (!h && m[0] == 'i')
                return rfail(r, line, "substring not found");
            if (!h)
                return I(-1);
            int64_t ci = 0;
            for (const char *q = s->s; q < h; q += u8len((unsigned char)*q))
                ci++;
            return I(ci);
        }
        if (!strcmp(m, "join")) {
            jlist *l = as_list(r, x);
            jobuf b = {0};
            jo_put(&b, "", 0);
            for (size_t i = 0; i < l->n; i++) {
                if (i)
                    jo_put(&b, s->s, s->n);
                jstr *e = to_str(r, l->v[i]);
                jo_put(&b, e->s, e->n);
            }
            jv v = jv_strn(r->A, b.p, b.n);
            free(b.p);
            return v;
        }
        if (!strcmp(m, "format"))
            return brace_format(r, s, a, line);
        if (!strcmp(m, "isdigit") || !strcmp(m, "isalpha") || !strcmp(m, "isspace")) {
            if (!s->n)
                return B(false);
            for (size_t i = 0; i < s->n; i++) {
                char c = s->s[i];
                bool ok = m[2] == 'd' ? (c >= '0' && c <= '9')
                        : m[2] == 'a' ? ((c | 32) >= 'a' && (c | 32) <= 'z')
                                      : (c == ' ' || (c >= 9 && c <= 13));
                if (!ok)
                    return B(false);
            }
            return B(true);
        }
        return rfail(r, line, "unknown string method '%s'", m);
    }
    if (o.t == JV_DICT) {
        if (!strcmp(m, "items"))
            return items(r, o.d);
        if (!strcmp(m, "keys") || !strcmp(m, "values")) {
            jv l = jv_list(r->A);
            for (size_t i = 0; i < o.d->n; i++)
                jl_push(r->A, l.l, m[0] == 'k' ? (jv){.t = JV_STR, .s = o.d->k[i]} : o.d->v[i]);
            return l;
        }
        if (!strcmp(m, "get")) {
            jv k = arg(a, 0, NULL, UNDEF);
            jv *v = k.t == JV_STR ? jd_get(o.d, k.s->s, k.s->n) : NULL;
            return v ? *v : arg(a, 1, "default", NONE);
        }
        if (!strcmp(m, "cycle") && jd_get(o.d, "index0", 6)) {
            int64_t i = jd_get(o.d, "index0", 6)->i;
            return a->n ? a->v[i % a->n] : UNDEF;
        }
        jv *f = jd_get(o.d, m, strlen(m));
        if (f && f->t == JV_FUNC)
            return f->fn->macro ? call_macro(r, f->fn->macro, a, line) : call_builtin(r, f->fn->builtin, a, line);
        return rfail(r, line, "unknown dict method '%s'", m);
    }
    if (o.t == JV_LIST) {
        if (!strcmp(m, "append")) {
            jl_push(r->A, o.l, arg(a, 0, NULL, NONE));
            return NONE;
        }
        if (!strcmp(m, "pop")) {
            if (!o.l->n)
                return rfail(r, line, "pop from empty list");
            jv i = arg(a, 0, NULL, I(-1));
            int64_t k = i.i < 0 ? (int64_t)o.l->n + i.i : i.i;
            if (k < 0 || k >= (int64_t)o.l->n)
                return rfail(r, line, "pop index out of range");
            jv v = o.l->v[k];
            memmove(o.l->v + k, o.l->v + k + 1, (o.l->n - (size_t)k - 1) * sizeof(jv));
            o.l->n--;
            return v;
        }
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            jv x = arg(a, 0, NULL, UNDEF);
            int64_t c = 0;
            for (size_t i = 0; i < o.l->n; i++)
                if (jv_eq(o.l->v[i], x)) {
                    if (m[0] == 'i')
                        return I((int64_t)i);
                    c++;
                }
            return m[0] == 'i' ? rfail(r, line, "value not in list") : I(c);
        }
        return rfail(r, line, "unknown list method '%s'", m);
    }
    return rfail(r, line, "cannot call method '%s' on %s", m, jv_type_name(o));
}

static jv getattr(R *r, jv o, const char *name)
{
    (void)r;
    if (o.t == JV_DICT) {
        jv *v = jd_get(o.d, name, strlen(name));
        return v ? *v : UNDEF;
    }
    return UNDEF;
}

static jv getindex(R *r, jv o, jv k, int line)
{
    if (o.t == JV_DICT) {
        if (k.t != JV_STR) {
            if (k.t == JV_INT) { // keys are strings; try the decimal form
                char b[32];
                snprintf(b, sizeof b, "%lld", (long long)k.i);
                jv *v = jd_get(o.d, b, strlen(b));
                return v ? *v : UNDEF;
            }
            return UNDEF;
        }
        jv *v = jd_get(o.d, k.s->s, k.s->n);
        return v ? *v : UNDEF;
    }
    if (o.t == JV_LIST || o.t == JV_STR) {
        if (k.t != JV_INT && k.t != JV_BOOL)
            return k.t == JV_STR && o.t == JV_LIST ? UNDEF : rfail(r, line, "index must be an integer");
        jlist *l = as_list(r, o);
        int64_t i = k.t == JV_BOOL ? k.b : k.i;
        if (i < 0)
            i += (int64_t)l->n;
        if (i < 0 || i >= (int64_t)l->n)
            return UNDEF;
        return l->v[i];
    }
    return UNDEF;
}

static jv slice(R *r, jv o, jv lo, jv hi, jv st, int line)
{
    if (o.t != JV_LIST && o.t != JV_STR)
        return o.t == JV_UNDEF ? UNDEF : rfail(r, line, "cannot slice %s", jv_type_name(o));
    jlist *l = as_list(r, o);
    int64_t n = (int64_t)l->n, step = st.t == JV_INT ? st.i : 1;
    if (!step)
        return rfail(r, line, "slice step cannot be zero");
    int64_t a, b;
    if (step > 0) {
        a = lo.t == JV_INT ? lo.i : 0;
        b = hi.t == JV_INT ? hi.i : n;
        if (a < 0) a += n;
        if (b < 0) b += n;
        if (a < 0) a = 0;
        if (b > n) b = n;
    } else {
        a = lo.t == JV_INT ? lo.i : n - 1;
        b = hi.t == JV_INT ? hi.i : -n - 1;
        if (a < 0) a += n;
        if (b < -1 && hi.t == JV_INT) b += n;
        if (hi.t != JV_INT) b = -1;
        if (a >= n) a = n - 1;
        if (b < -1) b = -1;
    }
    jv res = jv_list(r->A);
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
        jl_push(r->A, res.l, l->v[i]);
    if (o.t == JV_STR) {
        jobuf bb = {0};
        jo_put(&bb, "", 0);
        for (size_t i = 0; i < res.l->n; i++)
            jo_put(&bb, res.l->v[i].s->s, res.l->v[i].s->n);
        jv s = jv_strn(r->A, bb.p, bb.n);
        free(bb.p);
        return s;
    }
    return res;
}

static bool contains(jv hay, jv x)
{
    if (hay.t == JV_STR)
        return x.t == JV_STR && memmem_(hay.s->s, hay.s->n, x.s->s, x.s->n);
    if (hay.t == JV_LIST) {
        for (size_t i = 0; i < hay.l->n; i++)
            if (jv_eq(hay.l->v[i], x))
                return true;
        return false;
    }
    if (hay.t == JV_DICT)
        return x.t == JV_STR && jd_get(hay.d, x.s->s, x.s->n);
    return false;
}

static jv concat(R *r, const jstr *x, const jstr *y)
{
    jstr *v = ja_alloc(r->A, sizeof *v + x->n + y->n + 1);
    memcpy(v->s, x->s, x->n);
    memcpy(v->s + x->n, y->s, y->n);
    v->n = x->n + y->n;
    return (jv){.t = JV_STR, .s = v};
}

static jv arith(R *r, int op, jv a, jv b, int line)
{
    if (op == '~') {
        jstr *x = to_str(r, a.t == JV_UNDEF ? jv_cstr(r->A, "") : a);
        jstr *y = to_str(r, b.t == JV_UNDEF ? jv_cstr(r->A, "") : b);
        return concat(r, x, y);
    }
    if (op == '+' && a.t == JV_STR && b.t == JV_STR) {
        return concat(r, a.s, b.s);
    }
    if (op == '+' && a.t == JV_LIST && b.t == JV_LIST) {
        jv l = jv_list(r->A);
        for (size_t i = 0; i < a.l->n; i++)
            jl_push(r->A, l.l, a.l->v[i]);
        for (size_t i = 0; i < b.l->n; i++)
            jl_push(r->A, l.l, b.l->v[i]);
        return l;
    }
    if (op == '*' && ((a.t == JV_STR && b.t == JV_INT) || (a.t == JV_INT && b.t == JV_STR))) {
        jv s = a.t == JV_STR ? a : b;
        int64_t k = a.t == JV_INT ? a.i : b.i;
        jobuf o = {0};
        jo_put(&o, "", 0);
        for (int64_t i = 0; i < k && o.n < (64u << 20); i++)
            jo_put(&o, s.s->s, s.s->n);
        jv v = jv_strn(r->A, o.p, o.n);
        free(o.p);
        return v;
    }
    if (op == '%' && a.t == JV_STR)
        return percent_format(r, a.s, b, line);
    bool ia = a.t == JV_INT || a.t == JV_BOOL, ib = b.t == JV_INT || b.t == JV_BOOL;
    if (!(ia || a.t == JV_FLOAT) || !(ib || b.t == JV_FLOAT))
        return rfail(r, line, "unsupported operand types for '%c%c': %s and %s", op > 255 ? op >> 8 : op,
                     op > 255 ? op & 255 : ' ', jv_type_name(a), jv_type_name(b));
    int64_t x = a.t == JV_BOOL ? a.b : a.i, y = b.t == JV_BOOL ? b.b : b.i;
    double fx = a.t == JV_FLOAT ? a.f : (double)x, fy = b.t == JV_FLOAT ? b.f : (double)y;
    bool ints = ia && ib;
    switch (op) {
    case '+': return ints ? I(x + y) : (jv){.t = JV_FLOAT, .f = fx + fy};
    case '-': return ints ? I(x - y) : (jv){.t = JV_FLOAT, .f = fx - fy};
    case '*': return ints ? I(x * y) : (jv){.t = JV_FLOAT, .f = fx * fy};
    case '/':
        if (fy == 0)
            return rfail(r, line, "division by zero");
        return (jv){.t = JV_FLOAT, .f = fx / fy};
    case OP2('/', '/'):
    case '%':
        if (fy == 0)
            return rfail(r, line, "division by zero");
        if (ints) {
            int64_t q = x / y, m = x % y;
            if (m && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            return I(op == '%' ? m : q);
        }
        if (op == '%') {
            double m = fmod(fx, fy);
            if (m && ((m < 0) != (fy < 0)))
                m += fy;
            return (jv){.t = JV_FLOAT, .f = m};
        }
        return (jv){.t = JV_FLOAT, .f = floor(fx / fy)};
    case OP2('*', '*'):
        if (ints && y >= 0) {
            int64_t p = 1;
            for (int64_t i = 0; i < y; i++)
                p *= x;
            return I(p);
        }
        return (jv){.t = JV_FLOAT, .f = pow(fx, fy)};
    }
    return rfail(r, line, "unknown operator");
}

static jv apply_filter(R *r, const char *f, jv v, const args *a, int line);
static bool apply_test(R *r, const char *t, jv v, const args *a, int line);

static jv eval(R *r, scope *s, const jnode *n)
{
    if (r->failed)
        return UNDEF;
    switch (n->kind) {
    case N_LIT:
        return n->lit;
    case N_NAME: {
        jv *v = lookup(s, n->name);
        if (v)
            return *v;
        static const char *const builtins[] = {"range", "namespace", "dict", "raise_exception", "strftime_now",
                                               NULL};
        for (int i = 0; builtins[i]; i++)
            if (!strcmp(n->name, builtins[i])) {
                jfunc *fn = ja_alloc(r->A, sizeof *fn);
                fn->builtin = builtins[i];
                return (jv){.t = JV_FUNC, .fn = fn};
            }
        return UNDEF;
    }
    case N_ATTR:
        return getattr(r, eval(r, s, n->a), n->name);
    case N_INDEX:
        return getindex(r, eval(r, s, n->a), eval(r, s, n->b), n->line);
    case N_SLICE: {
        jv o = eval(r, s, n->a);
        jv lo = n->args[0] ? eval(r, s, n->args[0]) : NONE, hi = n->args[1] ? eval(r, s, n->args[1]) : NONE;
        jv st = n->args[2] ? eval(r, s, n->args[2]) : NONE;
        return slice(r, o, lo, hi, st, n->line);
    }
    case N_CALL: {
        args a = eval_args(r, s, n);
        if (n->a->kind == N_ATTR) {
            jv o = eval(r, s, n->a->a);
            if (r->failed)
                return UNDEF;
            return call_method(r, o, n->a->name, &a, n->line);
        }
        jv f = eval(r, s, n->a);
        if (r->failed)
            return UNDEF;
        if (f.t != JV_FUNC)
            return rfail(r, n->line, "%s is not callable (%s)", n->a->kind == N_NAME ? n->a->name : "value",
                         jv_type_name(f));
        return f.fn->macro ? call_macro(r, f.fn->macro, &a, n->line) : call_builtin(r, f.fn->builtin, &a, n->line);
    }
    case N_FILTER: {
        jv v = eval(r, s, n->a);
        args a = eval_args(r, s, n);
        return r->failed ? UNDEF : apply_filter(r, n->name, v, &a, n->line);
    }
    case N_TEST: {
        jv v = eval(r, s, n->a);
        args a = eval_args(r, s, n);
        bool b = apply_test(r, n->name, v, &a, n->line);
        return B(n->op ? !b : b);
    }
    case N_UNARY: {
        jv v = eval(r, s, n->a);
        if (v.t == JV_INT) return I(-v.i);
        if (v.t == JV_FLOAT) return (jv){.t = JV_FLOAT, .f = -v.f};
        if (v.t == JV_BOOL) return I(-(int64_t)v.b);
        return rfail(r, n->line, "bad operand for unary '-': %s", jv_type_name(v));
    }
    case N_NOT:
        return B(!jv_truthy(eval(r, s, n->a)));
    case N_AND: {
        jv a = eval(r, s, n->a);
        return jv_truthy(a) ? eval(r, s, n->b) : a;
    }
    case N_OR: {
        jv a = eval(r, s, n->a);
        return jv_truthy(a) ? a : eval(r, s, n->b);
    }
    case N_COND:
        if (jv_truthy(eval(r, s, n->a)))
            return eval(r, s, n->b);
        return n->c ? eval(r, s, n->c) : UNDEF;
    case N_LIST: {
        jv l = jv_list(r->A);
        for (int i = 0; i < n->nargs; i++)
            jl_push(r->A, l.l, eval(r, s, n->args[i]));
        return l;
    }
    case N_DICT: {
        jv d = jv_dict(r->A);
        for (int i = 0; i + 1 < n->nargs; i += 2) {
            jstr *k = to_str(r, eval(r, s, n->args[i]));
            jd_set(r->A, d.d, k->s, k->n, eval(r, s, n->args[i + 1]));
        }
        return d;
    }
    case N_BINARY: {
        jv a = eval(r, s, n->a), b = eval(r, s, n->b);
        if (r->failed)
            return UNDEF;
        bool ok = true;
        switch (n->op) {
        case OP2('=', '='): return B(jv_eq(a, b));
        case OP2('!', '='): return B(!jv_eq(a, b));
        case 'i': return B(contains(b, a));
        case 'I': return B(!contains(b, a));
        case '<': case '>': case OP2('<', '='): case OP2('>', '='): {
            int c = jv_cmp(a, b, &ok);
            if (!ok)
                return rfail(r, n->line, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
            return B(n->op == '<' ? c < 0 : n->op == '>' ? c > 0 : n->op == OP2('<', '=') ? c <= 0 : c >= 0);
        }
        default:
            return arith(r, n->op, a, b, n->line);
        }
    }
    }
    return rfail(r, n->line, "statement used as expression");
}

// ---- filters and tests ----------------------------------------------------------

static int cmp_for_sort(R *r, jv x, jv y, const char *attr)
{
    if (attr) {
        x = getattr(r, x, attr);
        y = getattr(r, y, attr);
    }
    bool ok;
    return jv_cmp(x, y, &ok);
}

static bool apply_test(R *r, const char *t, jv v, const args *a, int line)
{
    jv x = arg(a, 0, NULL, UNDEF);
    if (!strcmp(t, "defined")) return v.t != JV_UNDEF;
    if (!strcmp(t, "undefined")) return v.t == JV_UNDEF;
    if (!strcmp(t, "none")) return v.t == JV_NONE;
    if (!strcmp(t, "string")) return v.t == JV_STR;
    if (!strcmp(t, "number")) return v.t == JV_INT || v.t == JV_FLOAT;
    if (!strcmp(t, "integer")) return v.t == JV_INT;
    if (!strcmp(t, "float")) return v.t == JV_FLOAT;
    if (!strcmp(t, "boolean")) return v.t == JV_BOOL;
    if (!strcmp(t, "true")) return v.t == JV_BOOL && v.b;
    if (!strcmp(t, "false")) return v.t == JV_BOOL && !v.b;
    if (!strcmp(t, "mapping")) return v.t == JV_DICT;
    if (!strcmp(t, "iterable")) return v.t == JV_LIST || v.t == JV_DICT || v.t == JV_STR;
    if (!strcmp(t, "sequence")) return v.t == JV_LIST || v.t == JV_DICT || v.t == JV_STR;
    if (!strcmp(t, "callable")) return v.t == JV_FUNC;
    if (!strcmp(t, "even")) return v.t == JV_INT && v.i % 2 == 0;
    if (!strcmp(t, "odd")) return v.t == JV_INT && v.i % 2 != 0;
    if (!strcmp(t, "divisibleby")) return v.t == JV_INT && x.t == JV_INT && x.i && v.i % x.i == 0;
    if (!strcmp(t, "eq") || !strcmp(t, "equalto") || !strcmp(t, "==") || !strcmp(t, "sameas")) return jv_eq(v, x);
    if (!strcmp(t, "ne") || !strcmp(t, "!=")) return !jv_eq(v, x);
    if (!strcmp(t, "in")) return contains(x, v);
    if (!strcmp(t, "lt") || !strcmp(t, "gt") || !strcmp(t, "le") || !strcmp(t, "ge") || !strcmp(t, "lessthan") ||
        !strcmp(t, "greaterthan")) {
        bool ok;
        int c = jv_cmp(v, x, &ok);
        if (!ok)
            return false;
        if (t[0] == 'l')
            return t[1] == 'e' && t[2] == 0 ? c <= 0 : c < 0;
        return t[1] == 'e' && t[2] == 0 ? c >= 0 : c > 0;
    }
    if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
        if (v.t != JV_STR)
            return false;
        for (size_t i = 0; i < v.s->n; i++)
            if (t[0] == 'l' ? (v.s->s[i] >= 'A' && v.s->s[i] <= 'Z') : (v.s->s[i] >= 'a' && v.s->s[i] <= 'z'))
                return false;
        return true;
    }
    rfail(r, line, "unknown test '%s'", t);
    return false;
}

static jv apply_filter(R *r, const char *f, jv v, const args *a, int line)
{
    jv x = arg(a, 0, NULL, UNDEF);
    if (!strcmp(f, "safe") || (!strcmp(f, "list") && v.t == JV_LIST))
        return v;
    if (!strcmp(f, "string"))
        return v.t == JV_UNDEF ? jv_cstr(r->A, "") : (jv){.t = JV_STR, .s = to_str(r, v)};
    if (!strcmp(f, "trim")) {
        if (!need_str(r, line, v, "trim"))
            return UNDEF;
        jv c = arg(a, 0, "chars", NONE);
        return strip(r, v.s, c.t == JV_STR ? c.s : NULL, true, true);
    }
    if (!strcmp(f, "length") || !strcmp(f, "count"))
        return I(length(r, v));
    if (!strcmp(f, "lower") || !strcmp(f, "upper") || !strcmp(f, "title") || !strcmp(f, "capitalize")) {
        jstr *s = to_str(r, v);
        return casefn(r, s, f[0] == 'l' ? 0 : f[0] == 'u' ? 1 : f[0] == 't' ? 2 : 3);
    }
    if (!strcmp(f, "replace")) {
        jv b = arg(a, 1, NULL, UNDEF), c = arg(a, 2, "count", I(-1));
        jstr *s = to_str(r, v);
        if (!need_str(r, line, x, "replace") || !need_str(r, line, b, "replace"))
            return UNDEF;
        return replace(r, s, x.s, b.s, c.t == JV_INT ? c.i : -1);
    }
    if (!strcmp(f, "items"))
        return v.t == JV_DICT ? items(r, v.d) : jv_list(r->A);
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        jv bl = arg(a, 1, "boolean", B(false));
        if (v.t == JV_UNDEF || (jv_truthy(bl) && !jv_truthy(v)))
            return x.t == JV_UNDEF ? jv_cstr(r->A, "") : x;
        return v;
    }
    if (!strcmp(f, "join")) {
        jv sep = arg(a, 0, "d", jv_cstr(r->A, "")), at = arg(a, 1, "attribute", UNDEF);
        jlist *l = as_list(r, v);
        jobuf b = {0};
        jo_put(&b, "", 0);
        jstr *ss = to_str(r, sep);
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jo_put(&b, ss->s, ss->n);
            jv e = at.t == JV_STR ? getattr(r, l->v[i], at.s->s) : l->v[i];
            jstr *es = to_str(r, e);
            jo_put(&b, es->s, es->n);
        }
        jv res = jv_strn(r->A, b.p, b.n);
        free(b.p);
        return res;
    }
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        jlist *l = as_list(r, v);
        return l->n ? l->v[f[0] == 'f' ? 0 : l->n - 1] : UNDEF;
    }
    if (!strcmp(f, "list"))
        return (jv){.t = JV_LIST, .l = as_list(r, v)};
    if (!strcmp(f, "reverse")) {
        if (v.t == JV_STR) {
            jv sl = slice(r, v, NONE, NONE, I(-1), line);
            return sl;
        }
        jlist *l = as_list(r, v);
        jv o = jv_list(r->A);
        for (size_t i = l->n; i-- > 0;)
            jl_push(r->A, o.l, l->v[i]);
        return o;
    }
    if (!strcmp(f, "sort") || !strcmp(f, "dictsort")) {
        bool dictsort = f[0] == 'd';
        jlist *l = dictsort && v.t == JV_DICT ? items(r, v.d).l : as_list(r, v);
        jv rev = arg(a, dictsort ? 2 : 0, "reverse", B(false)), at = arg(a, 2, "attribute", UNDEF);
        jv o = jv_list(r->A);
        for (size_t i = 0; i < l->n; i++)
            jl_push(r->A, o.l, l->v[i]);
        for (size_t i = 1; i < o.l->n; i++) // stable insertion sort
            for (size_t j = i; j > 0; j--) {
                jv p = o.l->v[j - 1], q = o.l->v[j];
                int c = dictsort ? cmp_for_sort(r, p.l->v[0], q.l->v[0], NULL)
                                 : cmp_for_sort(r, p, q, at.t == JV_STR ? at.s->s : NULL);
                if (jv_truthy(rev) ? c < 0 : c > 0) {
                    o.l->v[j - 1] = q;
                    o.l->v[j] = p;
                } else
                    break;
            }
        return o;
    }
    if (!strcmp(f, "unique")) {
        jlist *l = as_list(r, v);
        jv o = jv_list(r->A);
        for (size_t i = 0; i < l->n; i++)
            if (!contains(o, l->v[i]))
                jl_push(r->A, o.l, l->v[i]);
        return o;
    }
    if (!strcmp(f, "int")) {
        if (v.t == JV_INT) return v;
        if (v.t == JV_FLOAT) return I((int64_t)v.f);
        if (v.t == JV_BOOL) return I(v.b);
        if (v.t == JV_STR) {
            char *e;
            long long k = strtoll(v.s->s, &e, 10);
            return *e && e == v.s->s ? arg(a, 0, "default", I(0)) : I(k);
        }
        return arg(a, 0, "default", I(0));
    }
    if (!strcmp(f, "float")) {
        if (v.t == JV_FLOAT) return v;
        if (v.t == JV_INT) return (jv){.t = JV_FLOAT, .f = (double)v.i};
        if (v.t == JV_STR) return (jv){.t = JV_FLOAT, .f = strtod(v.s->s, NULL)};
        return (jv){.t = JV_FLOAT, .f = 0};
    }
    if (!strcmp(f, "abs")) {
        if (v.t == JV_INT) return I(v.i < 0 ? -v.i : v.i);
        if (v.t == JV_FLOAT) return (jv){.t = JV_FLOAT, .f = fabs(v.f)};
        return rfail(r, line, "abs of %s", jv_type_name(v));
    }
    if (!strcmp(f, "round")) {
        jv p = arg(a, 0, "precision", I(0));
        double d = v.t == JV_INT ? (double)v.i : v.f, m = pow(10, (double)p.i);
        return (jv){.t = JV_FLOAT, .f = round(d * m) / m};
    }
    if (!strcmp(f, "sum") || !strcmp(f, "min") || !strcmp(f, "max")) {
        jlist *l = as_list(r, v);
        if (f[1] == 'u') {
            jv acc = arg(a, 1, "start", I(0));
            for (size_t i = 0; i < l->n; i++)
                acc = arith(r, '+', acc, l->v[i], line);
            return acc;
        }
        if (!l->n)
            return UNDEF;
        jv best = l->v[0];
        for (size_t i = 1; i < l->n; i++) {
            bool ok;
            int c = jv_cmp(l->v[i], best, &ok);
            if (ok && (f[1] == 'i' ? c < 0 : c > 0))
                best = l->v[i];
        }
        return best;
    }
    if (!strcmp(f, "map") || !strcmp(f, "selectattr") || !strcmp(f, "rejectattr") || !strcmp(f, "select") ||
        !strcmp(f, "reject")) {
        jlist *l = as_list(r, v);
        jv o = jv_list(r->A);
        if (f[0] == 'm') {
            jv at = arg(a, 99, "attribute", UNDEF), def = arg(a, 99, "default", UNDEF);
            for (size_t i = 0; i < l->n; i++) {
                if (at.t == JV_STR) {
                    jv e = getattr(r, l->v[i], at.s->s);
                    jl_push(r->A, o.l, e.t == JV_UNDEF ? def : e);
                } else if (x.t == JV_STR) {
                    args sub = {.n = a->n - 1, .v = a->v + 1, .kw = a->kw ? a->kw + 1 : NULL};
                    jl_push(r->A, o.l, apply_filter(r, x.s->s, l->v[i], &sub, line));
                } else
                    return rfail(r, line, "map needs a filter name or attribute=");
            }
            return o;
        }
        bool attr = strstr(f, "attr") != NULL, keep = f[0] == 's';
        int ti = attr ? 1 : 0;
        jv tn = arg(a, ti, NULL, UNDEF);
        for (size_t i = 0; i < l->n; i++) {
            jv e = l->v[i];
            if (attr) {
                if (!need_str(r, line, x, f))
                    return UNDEF;
                e = getattr(r, e, x.s->s);
            }
            bool t;
            if (tn.t == JV_STR) {
                args sub = {.n = a->n - ti - 1 > 0 ? a->n - ti - 1 : 0, .v = a->v + ti + 1};
                t = apply_test(r, tn.s->s, e, &sub, line);
            } else
                t = jv_truthy(e);
            if (t == keep)
                jl_push(r->A, o.l, l->v[i]);
        }
        return o;
    }
    if (!strcmp(f, "tojson")) {
        json_opts o = {.indent = -1, .item_sep = ", ", .key_sep = ": ", .ensure_ascii = false};
        jv ind = arg(a, 0, "indent", NONE), sep = arg(a, 99, "separators", NONE);
        jv ea = arg(a, 99, "ensure_ascii", B(false)), sk = arg(a, 99, "sort_keys", B(false));
        if (ind.t == JV_INT) {
            o.indent = (int)ind.i;
            o.item_sep = ",";
        }
        if (sep.t == JV_LIST && sep.l->n == 2 && sep.l->v[0].t == JV_STR && sep.l->v[1].t == JV_STR) {
            o.item_sep = sep.l->v[0].s->s;
            o.key_sep = sep.l->v[1].s->s;
        }
        o.ensure_ascii = jv_truthy(ea);
        o.sort_keys = jv_truthy(sk);
        jobuf b = {0};
        jo_put(&b, "", 0);
        jv_json(&b, v, &o, 0);
        jv res = jv_strn(r->A, b.p, b.n);
        free(b.p);
        return res;
    }
    if (!strcmp(f, "format")) { // "%s-%s" | format(a, b)
        if (!need_str(r, line, v, "format"))
            return UNDEF;
        jv l = jv_list(r->A);
        for (int i = 0; i < a->n; i++)
            jl_push(r->A, l.l, a->v[i]);
        return percent_format(r, v.s, l, line);
    }
    if (!strcmp(f, "indent")) {
        jstr *s = to_str(r, v);
        jv w = arg(a, 0, "width", I(4)), first = arg(a, 1, "first", B(false)), blank = arg(a, 2, "blank", B(false));
        char pad[64] = {0};
        int wn = w.t == JV_INT && w.i < 63 ? (int)w.i : 4;
        if (w.t == JV_STR)
            snprintf(pad, sizeof pad, "%s", w.s->s);
        else
            memset(pad, ' ', (size_t)wn);
        jobuf b = {0};
        jo_put(&b, "", 0);
        bool at_start = true, firstline = true;
        for (size_t i = 0; i < s->n; i++) {
            if (at_start) {
                bool empty = s->s[i] == '\n';
                if ((!firstline || jv_truthy(first)) && (!empty || jv_truthy(blank)))
                    jo_puts(&b, pad);
                at_start = false;
            }
            jo_put(&b, s->s + i, 1);
            if (s->s[i] == '\n') {
                at_start = true;
                firstline = false;
            }
        }
        jv res = jv_strn(r->A, b.p, b.n);
        free(b.p);
        return res;
    }
    if (!strcmp(f, "e") || !strcmp(f, "escape")) {
        jstr *s = to_str(r, v);
        jobuf b = {0};
        jo_put(&b, "", 0);
        for (size_t i = 0; i < s->n; i++) {
            const char *rep = s->s[i] == '&' ? "&amp;" : s->s[i] == '<' ? "&lt;" : s->s[i] == '>' ? "&gt;"
                            : s->s[i] == '"' ? "&#34;" : s->s[i] == '\'' ? "&#39;" : NULL;
            if (rep)
                jo_puts(&b, rep);
            else
                jo_put(&b, s->s + i, 1);
        }
        jv res = jv_strn(r->A, b.p, b.n);
        free(b.p);
        return res;
    }
    return rfail(r, line, "unknown filter '%s'", f);
}

// ---- statements -------------------------------------------------------------------

static void assign(R *r, scope *s, const jnode *n, const char *const *targets, int nt, jv v)
{
    if (nt == 1) {
        setvar(r, s, targets[0], v);
        return;
    }
    jlist *l = as_list(r, v);
    if ((int)l->n != nt) {
        rfail(r, n->line, "cannot unpack %zu values into %d names", l->n, nt);
        return;
    }
    for (int i = 0; i < nt; i++)
        setvar(r, s, targets[i], l->v[i]);
}

static void exec_for(R *r, scope *s, const jnode *n)
{
    jv it = eval(r, s, n->a);
    if (r->failed)
        return;
    jlist *src = it.t == JV_DICT ? as_list(r, it) : it.t == JV_LIST ? it.l : it.t == JV_STR ? as_list(r, it) : NULL;
    if (!src && it.t != JV_UNDEF && it.t != JV_NONE) {
        rfail(r, n->line, "cannot iterate over %s", jv_type_name(it));
        return;
    }
    scope ls = {.vars = jv_dict(r->A).d, .parent = s};
    // the loop filter sees the loop variables; filtered items first
    jlist *items_ = ja_alloc(r->A, sizeof *items_);
    for (size_t i = 0; src && i < src->n; i++) {
        if (n->b) {
            assign(r, &ls, n, n->targets, n->ntargets, src->v[i]);
            if (!jv_truthy(eval(r, &ls, n->b)))
                continue;
        }
        jl_push(r->A, items_, src->v[i]);
    }
    if (!items_->n) {
        exec_body(r, s, n->els, n->nels);
        return;
    }
    jv loop = jv_dict(r->A);
    size_t len = items_->n;
    for (size_t i = 0; i < len && !r->failed; i++) {
        jdict *d = loop.d;
        jd_set(r->A, d, "index", 5, I((int64_t)i + 1));
        jd_set(r->A, d, "index0", 6, I((int64_t)i));
        jd_set(r->A, d, "revindex", 8, I((int64_t)(len - i)));
        jd_set(r->A, d, "revindex0", 9, I((int64_t)(len - i - 1)));
        jd_set(r->A, d, "first", 5, B(i == 0));
        jd_set(r->A, d, "last", 4, B(i + 1 == len));
        jd_set(r->A, d, "length", 6, I((int64_t)len));
        jd_set(r->A, d, "previtem", 8, i ? items_->v[i - 1] : UNDEF);
        jd_set(r->A, d, "nextitem", 8, i + 1 < len ? items_->v[i + 1] : UNDEF);
        // assignments in a loop body are cleared at the end of each iteration
        scope it = {.vars = jv_dict(r->A).d, .parent = s};
        setvar(r, &it, "loop", loop);
        assign(r, &it, n, n->targets, n->ntargets, items_->v[i]);
        exec_body(r, &it, n->body, n->nbody);
        if (r->ctl == 1) {
            r->ctl = 0;
            break;
        }
        r->ctl = 0;
    }
}

static void exec_stmt(R *r, scope *s, const jnode *n)
{
    switch (n->kind) {
    case N_TEXT:
        jo_put(r->out, n->lit.s->s, n->lit.s->n);
        return;
    case N_OUTPUT: {
        jv v = eval(r, s, n->a);
        if (!r->failed)
            jv_write(r->out, v, false);
        return;
    }
    case N_IF:
        if (jv_truthy(eval(r, s, n->a)))
            exec_body(r, s, n->body, n->nbody);
        else
            exec_body(r, s, n->els, n->nels);
        return;
    case N_FOR:
        exec_for(r, s, n);
        return;
    case N_SET: {
        jv v = eval(r, s, n->a);
        if (r->failed)
            return;
        if (n->name) { // ns.attr = v
            jv *o = lookup(s, n->targets[0]);
            if (!o || o->t != JV_DICT || !o->d->ns) {
                rfail(r, n->line, "cannot assign attribute '%s' on '%s' (not a namespace)", n->name, n->targets[0]);
                return;
            }
            jd_set(r->A, o->d, n->name, strlen(n->name), v);
            return;
        }
        assign(r, s, n, n->targets, n->ntargets, v);
        return;
    }
    case N_SET_BLOCK: {
        jobuf *saved = r->out, o = {0};
        jo_put(&o, "", 0);
        r->out = &o;
        exec_body(r, s, n->body, n->nbody);
        r->out = saved;
        setvar(r, s, n->targets[0], jv_strn(r->A, o.p, o.n));
        free(o.p);
        return;
    }
    case N_MACRO: {
        jfunc *fn = ja_alloc(r->A, sizeof *fn);
        fn->macro = n;
        setvar(r, s, n->name, (jv){.t = JV_FUNC, .fn = fn});
        return;
    }
    case N_BREAK:
        r->ctl = 1;
        return;
    case N_CONTINUE:
        r->ctl = 2;
        return;
    case N_BLOCKWRAP:
        exec_body(r, s, n->body, n->nbody);
        return;
    default:
        rfail(r, n->line, "expression used as statement");
    }
}

static void exec_body(R *r, scope *s, jnode *const *body, int n)
{
    for (int i = 0; i < n && !r->failed && !r->ctl; i++)
        exec_stmt(r, s, body[i]);
}

int pt_template_render(const pt_template *t, json_object *ctx, char **out, size_t *out_len, pt_err *err)
{
    jarena A = {0};
    jobuf o = {0};
    jo_put(&o, "", 0);
    scope g = {.vars = jv_dict(&A).d};
    R r = {.A = &A, .out = &o, .err = err, .global = &g};
    if (ctx && json_object_is_type(ctx, json_type_object)) {
        json_object_object_foreach(ctx, k, v) setvar(&r, &g, k, jv_from_json(&A, v));
    }
    exec_body(&r, &g, t->body, t->nbody);
    ja_free(&A);
    if (r.failed) {
        free(o.p);
        return -1;
    }
    *out = o.p;
    if (out_len)
        *out_len = o.n;
    return 0;
}

int pt_chat_render(const char *template_src, json_object *messages, bool add_generation_prompt, const char *bos,
                   const char *eos, json_object *extra_ctx, char **out, size_t *out_len, pt_err *err)
{
    pt_template *t = pt_template_parse(template_src, err);
    if (!t)
        return -1;
    json_object *ctx = json_object_new_object();
    json_object_object_add(ctx, "messages", json_object_get(messages));
    json_object_object_add(ctx, "add_generation_prompt", json_object_new_boolean(add_generation_prompt));
    json_object_object_add(ctx, "bos_token", json_object_new_string(bos ? bos : ""));
    json_object_object_add(ctx, "eos_token", json_object_new_string(eos ? eos : ""));
    json_object_object_add(ctx, "pad_token", json_object_new_string(eos ? eos : ""));
    json_object_object_add(ctx, "unk_token", json_object_new_string(""));
    if (extra_ctx && json_object_is_type(extra_ctx, json_type_object)) {
        json_object_object_foreach(extra_ctx, k, v) json_object_object_add(ctx, k, json_object_get(v));
    }
    int rc = pt_template_render(t, ctx, out, out_len, err);
    json_object_put(ctx);
    pt_template_free(t);
    return rc;
}

pt_template *pt_template_parse(const char *src, pt_err *err)
{
    return jinja_parse(src, err);
}

// template/jinja_value.c — Jinja values: construction, json-c conversion,
// Python-style str()/repr(), json.dumps, truthiness, equality and ordering.
#include "template/jinja_value.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jo_put(jobuf *b, const void *s, size_t n)
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

void jo_puts(jobuf *b, const char *s) { jo_put(b, s, strlen(s)); }

jv jv_strn(jarena *A, const char *s, size_t n)
{
    jstr *x = ja_alloc(A, sizeof *x + n + 1);
    memcpy(x->s, s, n);
    x->n = n;
    return (jv){.t = JV_STR, .s = x};
}

jv jv_cstr(jarena *A, const char *s) { return jv_strn(A, s, strlen(s)); }

jv jv_list(jarena *A)
{
    jv v = {.t = JV_LIST, .l = ja_alloc(A, sizeof(jlist))};
    return v;
}

jv jv_dict(jarena *A)
{
    jv v = {.t = JV_DICT, .d = ja_alloc(A, sizeof(jdict))};
    return v;
}

void jl_push(jarena *A, jlist *l, jv x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jv *v = ja_alloc(A, cap * sizeof *v);
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

jv *jd_get(const jdict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i]->n == n && !memcmp(d->k[i]->s, k, n))
            return &d->v[i];
    return NULL;
}

void jd_set(jarena *A, jdict *d, const char *k, size_t n, jv x)
{
    jv *p = jd_get(d, k, n);
    if (p) {
        *p = x;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jstr **nk = ja_alloc(A, cap * sizeof *nk);
        jv *nv = ja_alloc(A, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = jv_strn(A, k, n).s;
    d->v[d->n++] = x;
}

jv jv_from_json(jarena *A, json_object *o)
{
    switch (json_object_get_type(o)) {
    case json_type_null: return (jv){.t = JV_NONE};
    case json_type_boolean: return (jv){.t = JV_BOOL, .b = json_object_get_boolean(o)};
    case json_type_int: return (jv){.t = JV_INT, .i = json_object_get_int64(o)};
    case json_type_double: return (jv){.t = JV_FLOAT, .f = json_object_get_double(o)};
    case json_type_string: return jv_strn(A, json_object_get_string(o), (size_t)json_object_get_string_len(o));
    case json_type_array: {
        jv l = jv_list(A);
        for (size_t i = 0; i < json_object_array_length(o); i++)
            jl_push(A, l.l, jv_from_json(A, json_object_array_get_idx(o, i)));
        return l;
    }
    case json_type_object: {
        jv d = jv_dict(A);
        json_object_object_foreach(o, k, v) jd_set(A, d.d, k, strlen(k), jv_from_json(A, v));
        return d;
    }
    }
    return (jv){.t = JV_UNDEF};
}

bool jv_truthy(jv v)
{
    switch (v.t) {
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s->n > 0;
    case JV_LIST: return v.l->n > 0;
    case JV_DICT: return v.d->n > 0;
    case JV_FUNC: return true;
    default: return false;
    }
}

// Python repr(float): shortest round-trip digits, fixed notation for
// exponents in [-4, 16), else d.ddde+XX.
void py_float(jobuf *b, double d)
{
    if (isnan(d)) { jo_puts(b, "nan"); return; }
    if (isinf(d)) { jo_puts(b, d < 0 ? "-inf" : "inf"); return; }
    char buf[64];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    char dig[32];
    int nd = 0, e;
    const char *s = buf;
    bool neg = *s == '-';
    if (neg)
        s++;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            dig[nd++] = *s;
    e = atoi(s + 1);
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    dig[nd] = 0;
    if (neg)
        jo_puts(b, "-");
    if (e >= -4 && e < 16) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++)
                jo_put(b, i < nd ? &dig[i] : "0", 1);
            jo_puts(b, ".");
            if (nd > e + 1)
                jo_put(b, dig + e + 1, (size_t)(nd - e - 1));
            else
                jo_puts(b, "0");
        } else {
            jo_puts(b, "0.");
            for (int i = 0; i < -e - 1; i++)
                jo_puts(b, "0");
            jo_put(b, dig, (size_t)nd);
        }
    } else {
        jo_put(b, dig, 1);
        if (nd > 1) {
            jo_puts(b, ".");
            jo_put(b, dig + 1, (size_t)(nd - 1));
        }
        snprintf(buf, sizeof buf, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        jo_puts(b, buf);
    }
}

static void py_repr_str(jobuf *b, const jstr *s)
{
    bool sq = memchr(s->s, '\'', s->n) != NULL, dq = memchr(s->s, '"', s->n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    jo_put(b, &q, 1);
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->s[i];
        char e[8];
        if (c == '\\') jo_puts(b, "\\\\");
        else if (c == (unsigned char)q) { jo_puts(b, "\\"); jo_put(b, &q, 1); }
        else if (c == '\n') jo_puts(b, "\\n");
        else if (c == '\r') jo_puts(b, "\\r");
        else if (c == '\t') jo_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) { snprintf(e, sizeof e, "\\x%02x", c); jo_puts(b, e); }
        else jo_put(b, &s->s[i], 1);
    }
    jo_put(b, &q, 1);
}

void jv_write(jobuf *b, jv v, bool repr)
{
    char buf[32];
    switch (v.t) {
    case JV_UNDEF: break;
    case JV_NONE: jo_puts(b, "None"); break;
    case JV_BOOL: jo_puts(b, v.b ? "True" : "False"); break;
    case JV_INT: snprintf(buf, sizeof buf, "%lld", (long long)v.i); jo_puts(b, buf); break;
    case JV_FLOAT: py_float(b, v.f); break;
    case JV_STR:
        if (repr)
            py_repr_str(b, v.s);
        else
            jo_put(b, v.s->s, v.s->n);
        break;
    case JV_LIST:
        jo_puts(b, "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                jo_puts(b, ", ");
            jv_write(b, v.l->v[i], true);
        }
        jo_puts(b, "]");
        break;
    case JV_DICT:
        jo_puts(b, v.d->ns ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.d->n; i++) {
            if (i)
                jo_puts(b, ", ");
            py_repr_str(b, v.d->k[i]);
            jo_puts(b, ": ");
            jv_write(b, v.d->v[i], true);
        }
        jo_puts(b, v.d->ns ? "}>" : "}");
        break;
    case JV_FUNC: jo_puts(b, "<function>"); break;
    }
}

static void json_str(jobuf *b, const char *s, size_t n, bool ascii)
{
    jo_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[16];
        switch (c) {
        case '"': jo_puts(b, "\\\""); break;
        case '\\': jo_puts(b, "\\\\"); break;
        case '\n': jo_puts(b, "\\n"); break;
        case '\r': jo_puts(b, "\\r"); break;
        case '\t': jo_puts(b, "\\t"); break;
        case '\b': jo_puts(b, "\\b"); break;
        case '\f': jo_puts(b, "\\f"); break;
        default:
            if (c < 0x20) {
                snprintf(e, sizeof e, "\\u%04x", c);
                jo_puts(b, e);
            } else if (c >= 0x80 && ascii) {
                uint32_t cp = 0;
                int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
                cp = len == 1 ? c : c & (0xFF >> (len + 1));
                for (int k = 1; k < len && i + (size_t)k < n; k++)
                    cp = cp << 6 | ((unsigned char)s[i + (size_t)k] & 0x3F);
                i += (size_t)len - 1;
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
                } else
                    snprintf(e, sizeof e, "\\u%04x", cp);
                jo_puts(b, e);
            } else
                jo_put(b, &s[i], 1);
        }
    }
    jo_puts(b, "\"");
}

static void newline_indent(jobuf *b, int indent, int level)
{
    jo_puts(b, "\n");
    for (int i = 0; i < indent * level; i++)
        jo_puts(b, " ");
}

void jv_json(jobuf *b, jv v, const json_opts *o, int level)
{
    char buf[32];
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: jo_puts(b, "null"); break;
    case JV_BOOL: jo_puts(b, v.b ? "true" : "false"); break;
    case JV_INT: snprintf(buf, sizeof buf, "%lld", (long long)v.i); jo_puts(b, buf); break;
    case JV_FLOAT:
        if (isnan(v.f)) jo_puts(b, "NaN");
        else if (isinf(v.f)) jo_puts(b, v.f < 0 ? "-Infinity" : "Infinity");
        else py_float(b, v.f);
        break;
    case JV_STR: json_str(b, v.s->s, v.s->n, o->ensure_ascii); break;
    case JV_FUNC: jo_puts(b, "null"); break;
    case JV_LIST:
        if (!v.l->n) { jo_puts(b, "[]"); break; }
        jo_puts(b, "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                jo_puts(b, o->item_sep);
            if (o->indent >= 0)
                newline_indent(b, o->indent, level + 1);
            jv_json(b, v.l->v[i], o, level + 1);
        }
        if (o->indent >= 0)
            newline_indent(b, o->indent, level);
        jo_puts(b, "]");
        break;
    case JV_DICT: {
        if (!v.d->n) { jo_puts(b, "{}"); break; }
        size_t n = v.d->n, *ord = malloc(n * sizeof *ord);
        assert(ord);
        for (size_t i = 0; i < n; i++)
            ord[i] = i;
        if (o->sort_keys) // insertion sort by key bytes
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0; j--) {
                    const jstr *x = v.d->k[ord[j - 1]], *y = v.d->k[ord[j]];
                    size_t m = x->n < y->n ? x->n : y->n;
                    int c = memcmp(x->s, y->s, m);
                    if (c > 0 || (!c && x->n > y->n)) {
                        size_t t = ord[j];
                        ord[j] = ord[j - 1];
                        ord[j - 1] = t;
                    } else
                        break;
                }
        jo_puts(b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i)
                jo_puts(b, o->item_sep);
            if (o->indent >= 0)
                newline_indent(b, o->indent, level + 1);
            json_str(b, v.d->k[ord[i]]->s, v.d->k[ord[i]]->n, o->ensure_ascii);
            jo_puts(b, o->key_sep);
            jv_json(b, v.d->v[ord[i]], o, level + 1);
        }
        free(ord);
        if (o->indent >= 0)
            newline_indent(b, o->indent, level);
        jo_puts(b, "}");
        break;
    }
    }
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num(jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : v.b; }

bool jv_eq(jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_INT && b.t == JV_INT)
            return a.i == b.i;
        return num(a) == num(b);
    }
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.s->n == b.s->n && !memcmp(a.s->s, b.s->s, a.s->n);
    case JV_LIST:
        if (a.l->n != b.l->n)
            return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_eq(a.l->v[i], b.l->v[i]))
                return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n)
            return false;
        for (size_t i = 0; i < a.d->n; i++) {
            jv *o = jd_get(b.d, a.d->k[i]->s, a.d->k[i]->n);
            if (!o || !jv_eq(a.d->v[i], *o))
                return false;
        }
        return true;
    case JV_FUNC: return a.fn == b.fn;
    default: return false;
    }
}

int jv_cmp(jv a, jv b, bool *ok)
{
    *ok = true;
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t m = a.s->n < b.s->n ? a.s->n : b.s->n;
        int c = memcmp(a.s->s, b.s->s, m);
        return c ? (c < 0 ? -1 : 1) : (a.s->n < b.s->n ? -1 : a.s->n > b.s->n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            int c = jv_cmp(a.l->v[i], b.l->v[i], ok);
            if (!*ok || c)
                return c;
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    *ok = false;
    return 0;
}

const char *jv_type_name(jv v)
{
    static const char *n[] = {"undefined", "none", "bool", "int", "float", "string", "list", "dict", "function"};
    return n[v.t];
}

// template/jinja_value.h — value helpers shared by the evaluator
// (private to template/*.c).
#ifndef PETREL_TEMPLATE_JINJA_VALUE_H
#define PETREL_TEMPLATE_JINJA_VALUE_H

#include "template/jinja_internal.h"

// Growable output byte buffer (malloc'ed, always NUL-terminated).
typedef struct jobuf {
    char *p;
    size_t n, cap;
} jobuf;
void jo_put(jobuf *b, const void *s, size_t n);
void jo_puts(jobuf *b, const char *s);

jv jv_strn(jarena *A, const char *s, size_t n);
jv jv_cstr(jarena *A, const char *s);
jv jv_list(jarena *A);
jv jv_dict(jarena *A);
void jl_push(jarena *A, jlist *l, jv x);
jv *jd_get(const jdict *d, const char *k, size_t n);       // NULL if absent
void jd_set(jarena *A, jdict *d, const char *k, size_t n, jv x);
jv jv_from_json(jarena *A, json_object *o);

bool jv_truthy(jv v);
bool jv_eq(jv a, jv b);
// Ordering for <, sort, min/max; *ok false when the types do not compare.
int jv_cmp(jv a, jv b, bool *ok);
const char *jv_type_name(jv v);

// Python str() (repr=false) or repr() (repr=true; strings quoted).
void jv_write(jobuf *b, jv v, bool repr);
void py_float(jobuf *b, double d);

// Python json.dumps options as transformers' tojson passes them.
typedef struct json_opts {
    int indent;            // -1: none
    const char *item_sep;  // ", " (or "," with indent)
    const char *key_sep;   // ": "
    bool ensure_ascii, sort_keys;
} json_opts;
void jv_json(jobuf *b, jv v, const json_opts *o, int level);

#endif

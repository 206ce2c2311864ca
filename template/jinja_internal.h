// template/jinja_internal.h — values, AST and arena of the Jinja-subset
// interpreter (private to template/*.c).
#ifndef PETREL_TEMPLATE_JINJA_INTERNAL_H
#define PETREL_TEMPLATE_JINJA_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "common/err.h"
#include "template/template.h"

// ---- arena: everything of one parse or one render is freed at once --------
typedef struct jarena {
    struct jchunk *head;
} jarena;
void *ja_alloc(jarena *a, size_t n);   // zeroed, 16-byte aligned
char *ja_strndup(jarena *a, const char *s, size_t n);
void ja_free(jarena *a);

// ---- values ----------------------------------------------------------------
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC } jv_type;

typedef struct jstr {
    size_t n;              // bytes
    char s[];              // n bytes + NUL
} jstr;

struct jv;
typedef struct jlist {
    size_t n, cap;
    struct jv *v;          // (cap,)
} jlist;

typedef struct jdict {
    size_t n, cap;
    jstr **k;              // (cap,) keys, insertion order
    struct jv *v;          // (cap,)
    bool ns;               // a namespace() object (attributes assignable)
} jdict;

struct jnode;
typedef struct jfunc {
    const struct jnode *macro; // a {% macro %}; NULL for builtins
    const char *builtin;       // "range", "namespace", "dict", "raise_exception", "strftime_now"
} jfunc;

typedef struct jv {
    uint8_t t;             // jv_type
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;
        jfunc *fn;
    };
} jv;

// ---- AST ---------------------------------------------------------------------
enum {
    // expressions
    N_LIT, N_NAME, N_ATTR, N_INDEX, N_SLICE, N_CALL, N_FILTER, N_TEST, N_UNARY, N_BINARY, N_AND, N_OR,
    N_NOT, N_COND, N_LIST, N_DICT,
    // statements
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_BLOCK, N_MACRO, N_BREAK, N_CONTINUE, N_BLOCKWRAP,
};

typedef struct jnode {
    int kind;
    int line;              // template line (1-based) for messages
    int op;                // N_UNARY / N_BINARY operator (a token code); N_TEST: negated
    jv lit;                // N_LIT, N_TEXT (string)
    const char *name;      // N_NAME, N_ATTR, N_FILTER, N_TEST, N_MACRO, N_SET attr
    struct jnode *a, *b, *c; // operands; N_IF/N_COND: a=cond; N_FOR: a=iter, b=filter cond
    struct jnode **args;   // (nargs,) call/filter/test args; list items; dict k,v pairs
    const char **kw;       // (nargs,) keyword names (NULL entries for positional); NULL if none
    int nargs;
    struct jnode **body;   // (nbody,) statement body
    int nbody;
    struct jnode **els;    // (nels,) else / elif chain
    int nels;
    const char **targets;  // (ntargets,) for / set names; N_MACRO: parameter names
    int ntargets;
} jnode;

struct pt_template {
    jarena arena;
    jnode **body;          // (nbody,) top-level statements
    int nbody;
};

// Records the first error of a parse or a render: while *failed is false,
// sets err to "chat template line LINE: " and the message fmt / ap; then
// sets *failed, so later errors (consequences of the first) are dropped
// (jinja_parse.c).
void jinja_vfail(pt_err *err, bool *failed, int line, const char *fmt, va_list ap);

// Parses src into a template (jinja_parse.c).
pt_template *jinja_parse(const char *src, pt_err *err);

#endif

// cli/cmd_tokenize.c — `petrel tokenize`: text -> token ids.
//
//   petrel tokenize (-m MODEL.gguf | --tokenizer (tokenizer.json | DIR)) [--no-special]
//                   [--add-special] (TEXT | - | --jsonl FILE)
// DIR: a folder holding tokenizer.json, or a tiktoken folder (tiktoken.model
// + tokenizer_config.json [+ pat_str.txt]).
// TEXT: ids comma-separated on one line ("-" reads raw bytes from stdin).
// --jsonl FILE: the "text" field of every line, one JSON array per line.
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/util.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: petrel tokenize (-m MODEL.gguf | --tokenizer (tokenizer.json | DIR)) [--no-special] [--add-special]\n"
               "                       (TEXT | - | --jsonl FILE)\n"
               "  DIR            a folder with tokenizer.json, or a tiktoken folder (tiktoken.model,\n"
               "                 tokenizer_config.json, optional pat_str.txt; Kimi-K2's pattern without it)\n"
               "  TEXT           text to encode; '-' reads raw bytes from stdin ('-- TEXT' if it starts with '-')\n"
               "  --jsonl FILE   encode the \"text\" field of every line; one JSON array of ids per line\n"
               "  --no-special   special-token text is plain text (HF split_special_tokens)\n"
               "  --add-special  apply the post-processor (e.g. a BOS from TemplateProcessing)\n");
}

// Reads all of stdin; NULL on error.
static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (n == cap)
            b = realloc(b, cap *= 2);
        size_t r = fread(b + n, 1, cap - n, stdin);
        n += r;
        if (r == 0)
            break;
    }
    if (ferror(stdin)) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

static int encode_jsonl(const pt_tokenizer *t, const char *path, bool special, bool add)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "petrel tokenize: %s: cannot open\n", path);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    int rc = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (n == 1 && line[0] == '\n')
            continue;
        json_tokener *tk = json_tokener_new();
        json_object *o = json_tokener_parse_ex(tk, line, (int)n), *tx;
        json_tokener_free(tk);
        if (!o || !json_object_object_get_ex(o, "text", &tx) || !json_object_is_type(tx, json_type_string)) {
            fprintf(stderr, "petrel tokenize: %s:%ld: not a JSON object with a string \"text\"\n", path, lineno);
            json_object_put(o);
            rc = 1;
            break;
        }
        int32_t *ids;
        pt_err err = {{0}};
        int64_t k = pt_tokenizer_encode(t, json_object_get_string(tx), (size_t)json_object_get_string_len(tx), special,
                                        add, &ids, &err);
        json_object_put(o);
        if (k < 0) {
            fprintf(stderr, "petrel tokenize: %s:%ld: %s\n", path, lineno, err.msg);
            rc = 1;
            break;
        }
        putchar('[');
        for (int64_t i = 0; i < k; i++)
            printf(i ? ",%d" : "%d", ids[i]);
        fputs("]\n", stdout);
        free(ids);
    }
    free(line);
    fclose(f);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *tokfile = NULL, *jsonl = NULL, *text = NULL;
    bool special = true, add = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(a, "--tokenizer") && i + 1 < argc)
            tokfile = argv[++i];
        else if (!strcmp(a, "--jsonl") && i + 1 < argc)
            jsonl = argv[++i];
        else if (!strcmp(a, "--no-special"))
            special = false;
        else if (!strcmp(a, "--add-special"))
            add = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!text && (a[0] != '-' || !strcmp(a, "-") || !strcmp(a, "--")))
            text = !strcmp(a, "--") && i + 1 < argc ? argv[++i] : a;
        else {
            fprintf(stderr, "petrel tokenize: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!!model == !!tokfile || !!jsonl == !!text) {
        usage(stderr);
        return 2;
    }
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_open(model, tokfile, &err);
    if (!t) {
        fprintf(stderr, "petrel tokenize: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (jsonl)
        rc = encode_jsonl(t, jsonl, special, add);
    else {
        size_t len;
        char *buf = NULL;
        if (!strcmp(text, "-")) {
            buf = read_stdin(&len);
            if (!buf) {
                fprintf(stderr, "petrel tokenize: cannot read stdin\n");
                pt_tokenizer_free(t);
                return 1;
            }
            text = buf;
        } else
            len = strlen(text);
        int32_t *ids;
        int64_t k = pt_tokenizer_encode(t, text, len, special, add, &ids, &err);
        if (k < 0) {
            fprintf(stderr, "petrel tokenize: %s\n", err.msg);
            rc = 1;
        } else {
            for (int64_t i = 0; i < k; i++)
                printf(i ? ",%d" : "%d", ids[i]);
            putchar('\n');
        }
        free(ids);
        free(buf);
    }
    pt_tokenizer_free(t);
    return rc;
}

// cli/cmd_detokenize.c — `petrel detokenize`: token ids -> text.
//
//   petrel detokenize (-m MODEL.gguf | --tokenizer (tokenizer.json | DIR))
//                     [--skip-special] (IDS | -)
// IDS: integers separated by commas, spaces or brackets ("1,2,3", "[1, 2]");
// "-" reads them from stdin. Prints the decoded text exactly (invalid UTF-8
// replaced by U+FFFD as Hugging Face does), plus a newline on a terminal.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: petrel detokenize (-m MODEL.gguf | --tokenizer (tokenizer.json | DIR)) [--skip-special] (IDS | -)\n"
               "  IDS             e.g. 1,2,3 or \"[1, 2, 3]\"; '-' reads them from stdin\n"
               "  --skip-special  leave out special tokens\n");
}

// Parses integers separated by anything but digits and '-'; -1 on a bad id.
static long parse_ids(const char *s, int32_t **out)
{
    size_t n = 0, cap = 64;
    int32_t *v = malloc(cap * sizeof *v);
    while (*s) {
        if ((*s >= '0' && *s <= '9') || *s == '-') {
            char *e;
            long long x = strtoll(s, &e, 10);
            if (e == s || x < 0 || x > 0x7fffffff) {
                free(v);
                return -1;
            }
            if (n == cap)
                v = realloc(v, (cap *= 2) * sizeof *v);
            v[n++] = (int32_t)x;
            s = e;
        } else if (*s == ',' || *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '[' || *s == ']')
            s++;
        else {
            free(v);
            return -1;
        }
    }
    *out = v;
    return (long)n;
}

int cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL, *tokfile = NULL, *idstr = NULL;
    bool skip = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(a, "--tokenizer") && i + 1 < argc)
            tokfile = argv[++i];
        else if (!strcmp(a, "--skip-special"))
            skip = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!idstr)
            idstr = a;
        else {
            fprintf(stderr, "petrel detokenize: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!!model == !!tokfile || !idstr) {
        usage(stderr);
        return 2;
    }
    char *buf = NULL;
    if (!strcmp(idstr, "-")) {
        size_t cap = 1 << 16, n = 0, r;
        buf = malloc(cap + 1);
        while ((r = fread(buf + n, 1, cap - n, stdin)) > 0)
            if ((n += r) == cap)
                buf = realloc(buf, (cap *= 2) + 1);
        buf[n] = 0;
        idstr = buf;
    }
    int32_t *ids;
    long n = parse_ids(idstr, &ids);
    free(buf);
    if (n < 0) {
        fprintf(stderr, "petrel detokenize: cannot parse token ids (expected e.g. 1,2,3)\n");
        return 2;
    }
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_open(model, tokfile, &err);
    if (!t) {
        fprintf(stderr, "petrel detokenize: %s\n", err.msg);
        free(ids);
        return 1;
    }
    for (long i = 0; i < n; i++)
        if (ids[i] >= pt_tokenizer_vocab_size(t)) {
            fprintf(stderr, "petrel detokenize: token id %d out of range (vocabulary size %d)\n", ids[i],
                    pt_tokenizer_vocab_size(t));
            free(ids);
            pt_tokenizer_free(t);
            return 1;
        }
    size_t len;
    char *text = pt_tokenizer_decode(t, ids, (size_t)n, skip, &len);
    fwrite(text, 1, len, stdout);
    if (isatty(STDOUT_FILENO))
        putchar('\n');
    free(text);
    free(ids);
    pt_tokenizer_free(t);
    return 0;
}

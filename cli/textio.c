#include "cli/textio.h"

#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"

cli_text *cli_text_open(const petrel_model *m, char *errbuf, size_t errlen)
{
    pt_err err = {{0}};
    gguf_file *g = gguf_open(petrel_model_path(m), &err);
    if (!g) {
        snprintf(errbuf, errlen, "%s", err.msg);
        return NULL;
    }
    pt_tokenizer *tok = pt_tokenizer_from_gguf(g, &err);
    gguf_close(g);
    if (!tok) {
        snprintf(errbuf, errlen, "%s", err.msg);
        return NULL;
    }
    cli_text *t = calloc(1, sizeof *t);
    t->tok = tok;
    pt_detok_init(&t->detok, tok, true);
    return t;
}

void cli_text_close(cli_text *t)
{
    if (!t)
        return;
    pt_detok_free(&t->detok);
    pt_tokenizer_free(t->tok);
    free(t);
}

int cli_text_encode(cli_text *t, const char *text, petrel_token **ids)
{
    pt_err err = {{0}};
    int32_t *out = NULL;
    int64_t n = pt_tokenizer_encode(t->tok, text, strlen(text), true, false, &out, &err);
    if (n < 0) {
        fprintf(stderr, "petrel: %s\n", err.msg);
        return -1;
    }
    *ids = out;
    return (int)n;
}

void cli_text_stream_begin(cli_text *t)
{
    pt_detok_free(&t->detok);
    pt_detok_init(&t->detok, t->tok, true);
}

void cli_text_stream_token(cli_text *t, petrel_token id, FILE *out)
{
    size_t len;
    const char *s = pt_detok_push(&t->detok, id, &len);
    if (len)
        fwrite(s, 1, len, out);
}

void cli_text_stream_end(cli_text *t, FILE *out)
{
    size_t len;
    const char *s = pt_detok_flush(&t->detok, &len);
    if (len)
        fwrite(s, 1, len, out);
}

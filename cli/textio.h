// cli/textio.h — text in and out for the engine commands: the model's
// tokenizer (from its GGUF) for prompts, streaming detokenisation.
#ifndef PETREL_CLI_TEXTIO_H
#define PETREL_CLI_TEXTIO_H

#include <stdio.h>
#include "petrel.h"
#include "tokenizer/tokenizer.h"

typedef struct cli_text {
    pt_tokenizer *tok;
    pt_detok detok;
} cli_text;

// Loads the tokenizer stored in the model's GGUF. NULL + a message saying
// that text commands are unavailable (e.g. a tokenizer type Petrel does not
// implement; token-id commands still work).
cli_text *cli_text_open(const petrel_model *m, char *err, size_t errlen);
void cli_text_close(cli_text *t);
// Encodes a prompt (special tokens parsed); returns the count, ids malloc'ed.
int cli_text_encode(cli_text *t, const char *text, petrel_token **ids);
void cli_text_stream_begin(cli_text *t);
void cli_text_stream_token(cli_text *t, petrel_token id, FILE *out);
void cli_text_stream_end(cli_text *t, FILE *out);

#endif

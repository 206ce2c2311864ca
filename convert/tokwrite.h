// convert/tokwrite.h — the tokenizer part of the converter's GGUF metadata.
#ifndef PETREL_CONVERT_TOKWRITE_H
#define PETREL_CONVERT_TOKWRITE_H

#include <stdint.h>
#include "common/err.h"
#include "format/gguf.h"

// Writes the tokenizer of tokenizer.json (+ tokenizer_config.json, may be
// NULL), or of a tiktoken folder given as its tiktoken.model, into w.
// bos/eos (-1 if unknown) come from config.json and are used only when the
// tokenizer files do not define them; n_vocab (config.json's vocab_size)
// sizes a tiktoken token list. -1 + err naming the file.
int pt_convert_write_tokenizer(const char *tokenizer_json, const char *tokenizer_config, int32_t bos, int32_t eos,
                               uint32_t n_vocab, gguf_writer *w, pt_err *err);

#endif

// convert/tokwrite.h — the tokenizer part of the converter's GGUF metadata.
#ifndef PETREL_CONVERT_TOKWRITE_H
#define PETREL_CONVERT_TOKWRITE_H

#include <stdbool.h>
#include <stddef.h>
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

// Where the converter takes the tokenizer from: `tokenizer` (--tokenizer: a
// tokenizer.json, a tiktoken.model, or a folder holding either; a tiktoken
// folder is Kimi-K2's kind) or, when NULL, the checkpoint folder `dir`
// (tokenizer.json preferred). json gets the path to pass to
// pt_convert_write_tokenizer, cfg the tokenizer_config.json beside it (""
// if none). Returns 1 when found, 0 when `dir` has none (or dir is NULL),
// -1 + err naming the --tokenizer path when it holds no tokenizer.
int pt_convert_find_tokenizer(const char *dir, const char *tokenizer, char *json, size_t jn, char *cfg, size_t cn,
                              pt_err *err);

#endif

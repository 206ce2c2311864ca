// tokenizer/tokenizer.h — Hugging Face `tokenizers`-compatible BPE tokenizer.
//
// Loads a tokenizer.json (BPE model, added tokens, normalizer, pre-tokenizer,
// post-processor, decoder) and encodes text into exactly the ids the Rust
// library produces; decodes ids back to text; streams detokenised text for
// generation. The same pipeline is stored in and reloaded from a GGUF
// (`petrel.tokenizer.json`), with a fallback for foreign GPT-2-style GGUFs.
//
// Thread safety: a loaded pt_tokenizer is read-only except for its internal
// pre-token cache, which is guarded (concurrent encodes are safe).
#ifndef PETREL_TOKENIZER_TOKENIZER_H
#define PETREL_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "format/gguf.h"

typedef struct pt_tokenizer pt_tokenizer;

// Loads tokenizer.json from a path. NULL + err (naming the file and the
// field) on a missing file, malformed JSON or an unsupported component.
pt_tokenizer *pt_tokenizer_load(const char *tokenizer_json_path, pt_err *err);
// Same from JSON text in memory; `name` is used in error messages.
pt_tokenizer *pt_tokenizer_from_json(const char *json, size_t len, const char *name, pt_err *err);
// Reads bos/eos tokens and the chat template from a tokenizer_config.json
// (bos_token / eos_token as strings or AddedToken objects; chat_template as
// a string or a list of {name, template}, "default" preferred).
int pt_tokenizer_load_config(pt_tokenizer *t, const char *config_path, pt_err *err);
// Reloads from a GGUF: from `petrel.tokenizer.json` when present; otherwise
// for tokenizer.ggml.model == "gpt2" rebuilds from tokens/merges/token_type
// and a pre-tokenizer chosen by tokenizer.ggml.pre. Other models: NULL with
// a message saying text commands are unavailable for that tokenizer type.
pt_tokenizer *pt_tokenizer_from_gguf(const gguf_file *g, pt_err *err);
void pt_tokenizer_free(pt_tokenizer *t);
// Loads a tiktoken folder (tokenizer/tok_tiktoken.c): tiktoken.model (the
// rank file), tokenizer_config.json (special tokens in
// added_tokens_decoder, bos/eos, chat template), an optional pat_str.txt
// (the pre-tokenizer pattern in tiktoken's Rust syntax; Kimi-K2's pattern
// when absent) and an optional chat_template.jinja. NULL + err naming the
// file and line / field.
pt_tokenizer *pt_tokenizer_load_tiktoken(const char *dir, pt_err *err);
// Kimi-K2's pre-tokenizer pattern as its tokenization_kimi.py writes it
// (Rust syntax), the one a folder without pat_str.txt uses.
const char *pt_tiktoken_kimi_pattern(void);
// True when dir holds a tiktoken.model.
bool pt_tokenizer_is_tiktoken_dir(const char *dir);
// The pieces a tiktoken pattern (Rust syntax; NULL = Kimi-K2's) cuts text
// into, as tiktoken's find_iter does: *spans gets 2 offsets (start, end)
// per piece (malloc'ed). Returns the piece count, or -1 + err when the
// pattern cannot be translated.
int64_t pt_tiktoken_split(const char *pattern, const char *text, size_t len, size_t **spans, pt_err *err);
// Opens from exactly one of: a model GGUF, or a tokenizer.json (plus the
// tokenizer_config.json beside it, if present), or a folder holding either
// a tiktoken.model (see pt_tokenizer_load_tiktoken) or a tokenizer.json.
// For the CLI and the server.
pt_tokenizer *pt_tokenizer_open(const char *model_gguf, const char *tokenizer_json, pt_err *err);

// Writes the tokenizer into GGUF metadata (the converter calls this):
// tokenizer.ggml.{model,pre,tokens,token_type,merges,bos_token_id,
// eos_token_id}, tokenizer.chat_template and petrel.tokenizer.json.
// tokenizer_config_path may be NULL.
int pt_tokenizer_write_gguf(const char *tokenizer_json_path, const char *tokenizer_config_path,
                            gguf_writer *w, pt_err *err);
// Same, for the converter: path may also be a tiktoken folder or its
// tiktoken.model (written as llama.cpp writes Kimi-K2's, see
// docs/tokenizer.md); n_vocab (the model's vocabulary, 0 = the
// tokenizer's) sets the length of a tiktoken token list, padded with
// [PADn] or cut, as llama.cpp's converter does.
int pt_tokenizer_write_gguf_n(const char *path, const char *tokenizer_config_path, uint32_t n_vocab,
                              gguf_writer *w, pt_err *err);
// Same; embed_json=false leaves out petrel.tokenizer.json (llama.cpp-style
// metadata only, as a foreign GGUF would have it).
int pt_tokenizer_write_gguf_ex(const char *tokenizer_json_path, const char *tokenizer_config_path, bool embed_json,
                               gguf_writer *w, pt_err *err);

// Encodes len bytes of text (any bytes; invalid UTF-8 is encoded byte-level,
// see docs/tokenizer.md). parse_special: special=true added tokens in the
// text are matched (HF default); false treats them as plain text
// (non-special added tokens are still matched). add_special_tokens: apply
// the post-processor (e.g. a BOS from TemplateProcessing). Returns the number
// of ids and a malloc'ed array in *ids (NULL when 0), or -1 + err.
int64_t pt_tokenizer_encode(const pt_tokenizer *t, const char *text, size_t len, bool parse_special,
                            bool add_special_tokens, int32_t **ids, pt_err *err);

// Decodes ids into text exactly as HF decode(ids, skip_special_tokens):
// the token bytes concatenated, invalid UTF-8 replaced by U+FFFD. Returns a
// malloc'ed NUL-terminated string; *len (optional) gets its byte length.
// Ids out of range are skipped.
char *pt_tokenizer_decode(const pt_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                          size_t *len);
// The raw bytes one token stands for (after the decoder, before UTF-8
// repair); NULL for an id out of range. Not NUL-terminated in general.
const char *pt_tokenizer_piece(const pt_tokenizer *t, int32_t id, size_t *len);
// The token's string as in the vocabulary (e.g. "Ġhello"); NULL if unknown.
const char *pt_tokenizer_token_str(const pt_tokenizer *t, int32_t id);
// Id of a vocabulary / added-token string, or -1.
int32_t pt_tokenizer_token_id(const pt_tokenizer *t, const char *str);

int32_t pt_tokenizer_vocab_size(const pt_tokenizer *t);   // max id + 1
bool pt_tokenizer_is_special(const pt_tokenizer *t, int32_t id); // special added token
int32_t pt_tokenizer_bos(const pt_tokenizer *t);          // -1 if none
int32_t pt_tokenizer_eos(const pt_tokenizer *t);          // -1 if none
// End-of-generation: the eos id or any extra stop id registered.
bool pt_tokenizer_is_eog(const pt_tokenizer *t, int32_t id);
void pt_tokenizer_add_eog(pt_tokenizer *t, int32_t id);
const char *pt_tokenizer_bos_str(const pt_tokenizer *t);  // "" if none
const char *pt_tokenizer_eos_str(const pt_tokenizer *t);  // "" if none
const char *pt_tokenizer_chat_template(const pt_tokenizer *t); // NULL if none

// ---- streaming detokeniser ------------------------------------------------
// Feed ids one by one; each push returns the text that became complete UTF-8
// (possibly empty), never half a character. A byte sequence that can never
// become valid UTF-8 is emitted as U+FFFD, like pt_tokenizer_decode.
typedef struct pt_detok {
    const pt_tokenizer *t;
    bool skip_special;
    unsigned char pend[4]; // (npend,) bytes of an unfinished UTF-8 character
    int npend;
    char *buf;             // (cap,) output of the last push / flush
    size_t cap;
} pt_detok;

void pt_detok_init(pt_detok *d, const pt_tokenizer *t, bool skip_special);
// Returns a NUL-terminated string valid until the next call; *len its bytes.
const char *pt_detok_push(pt_detok *d, int32_t id, size_t *len);
// Emits what is left (an unfinished character becomes U+FFFD) and resets.
const char *pt_detok_flush(pt_detok *d, size_t *len);
void pt_detok_free(pt_detok *d);

// UTF-8 repair as Rust's String::from_utf8_lossy: each maximal invalid
// subpart becomes U+FFFD. Returns a malloc'ed NUL-terminated string.
char *pt_utf8_lossy(const char *s, size_t len, size_t *out_len);

#endif

// convert/tokwrite.c — tokenizer metadata for the converter: tokenizer/
// writes tokenizer.ggml.* (vocabulary, merges, token types, pre-tokenizer
// name, special ids), tokenizer.chat_template and petrel.tokenizer.json;
// bos/eos from config.json fill in what the tokenizer files leave undefined.
// A tiktoken folder (Kimi-K2: tiktoken.model + tokenizer_config.json) is
// written with exactly the model's vocabulary size of tokens.
#include "convert/tokwrite.h"

#include "tokenizer/tokenizer.h"

int pt_convert_write_tokenizer(const char *tokenizer_json, const char *tokenizer_config, int32_t bos, int32_t eos,
                               uint32_t n_vocab, gguf_writer *w, pt_err *err)
{
    if (pt_tokenizer_write_gguf_n(tokenizer_json, tokenizer_config, n_vocab, w, err) < 0)
        return -1;
    if (bos >= 0 && !gguf_writer_has_key(w, "tokenizer.ggml.bos_token_id"))
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0 && !gguf_writer_has_key(w, "tokenizer.ggml.eos_token_id"))
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    return 0;
}

// convert/tokwrite.c — tokenizer metadata for the converter: tokenizer/
// writes tokenizer.ggml.* (vocabulary, merges, token types, pre-tokenizer
// name, special ids), tokenizer.chat_template and petrel.tokenizer.json;
// bos/eos from config.json fill in what the tokenizer files leave undefined.
// A tiktoken folder (Kimi-K2: tiktoken.model + tokenizer_config.json) is
// written with exactly the model's vocabulary size of tokens.
#include "convert/tokwrite.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/tokenizer.h"

static bool is_file(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

// Fills json/cfg from a folder: tokenizer.json, else tiktoken.model; the
// tokenizer_config.json beside it when there is one. False if neither.
static bool from_folder(const char *dir, char *json, size_t jn, char *cfg, size_t cn)
{
    snprintf(json, jn, "%s/tokenizer.json", dir);
    if (!is_file(json))
        snprintf(json, jn, "%s/tiktoken.model", dir);
    if (!is_file(json))
        return false;
    snprintf(cfg, cn, "%s/tokenizer_config.json", dir);
    if (!is_file(cfg))
        cfg[0] = 0;
    return true;
}

int pt_convert_find_tokenizer(const char *dir, const char *tokenizer, char *json, size_t jn, char *cfg, size_t cn,
                              pt_err *err)
{
    json[0] = cfg[0] = 0;
    if (!tokenizer)
        return dir && from_folder(dir, json, jn, cfg, cn) ? 1 : 0;
    struct stat st;
    if (stat(tokenizer, &st) < 0)
        return pt_errf(err, "--tokenizer %s: no such file or folder", tokenizer);
    if (S_ISDIR(st.st_mode)) {
        if (!from_folder(tokenizer, json, jn, cfg, cn))
            return pt_errf(err, "--tokenizer %s: the folder holds neither tokenizer.json nor tiktoken.model", tokenizer);
        return 1;
    }
    // a file: tokenizer.json or tiktoken.model, its tokenizer_config.json beside it
    snprintf(json, jn, "%s", tokenizer);
    const char *slash = strrchr(tokenizer, '/');
    if (slash)
        snprintf(cfg, cn, "%.*s/tokenizer_config.json", (int)(slash - tokenizer), tokenizer);
    else
        snprintf(cfg, cn, "tokenizer_config.json");
    if (!is_file(cfg))
        cfg[0] = 0;
    return 1;
}

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

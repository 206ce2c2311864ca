// convert/tokwrite.c — tokenizer metadata for the converter.
//
// TODO: call tokenizer/'s pt_tokenizer_write_gguf (vocabulary, merges,
// pre-tokenizer as tokenizer.ggml.*) once it is implemented. Until then the
// raw tokenizer.json text is stored under `petrel.tokenizer.json` (which
// pt_tokenizer_from_gguf reads) and the chat template under
// `tokenizer.chat_template`.
#include "convert/tokwrite.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int pt_convert_write_tokenizer(const char *tokenizer_json, const char *tokenizer_config, int32_t bos, int32_t eos,
                               gguf_writer *w, pt_err *err)
{
    size_t len;
    char *text = pt_read_file(tokenizer_json, &len, err);
    if (!text)
        return -1;
    if (strlen(text) != len) {
        free(text);
        return pt_errf(err, "%s: contains NUL bytes", tokenizer_json);
    }
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "petrel.tokenizer.json", text);
    free(text);
    if (bos >= 0)
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0)
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (!tokenizer_config)
        return 0;
    json_object *root = json_object_from_file(tokenizer_config);
    if (!root)
        return pt_errf(err, "%s: malformed JSON", tokenizer_config);
    json_object *ct;
    if (json_object_object_get_ex(root, "chat_template", &ct) && json_object_is_type(ct, json_type_string))
        gguf_w_str(w, "tokenizer.chat_template", json_object_get_string(ct));
    json_object_put(root);
    return 0;
}

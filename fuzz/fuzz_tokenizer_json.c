// fuzz/fuzz_tokenizer_json.c — tokenizer.json text on arbitrary bytes
// (model, added tokens, normalizer, pre-tokenizer, post-processor,
// decoder); a tokenizer that loads then encodes and decodes a short text.
#include <stdlib.h>

#include "fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_err err = {0};
    pt_tokenizer *t = pt_tokenizer_from_json((const char *)data, size, "fuzz tokenizer.json", &err);
    if (!t)
        return 0;
    static const char text[] = "Hi <|x|> \xe4\xbd\xa0\xe5\xa5\xbd 12345 \xff\xfe!!";
    int32_t *ids = NULL;
    int64_t n = pt_tokenizer_encode(t, text, sizeof text - 1, true, true, &ids, &err);
    if (n > 0) {
        free(pt_tokenizer_decode(t, ids, (size_t)n, false, NULL));
        free(pt_tokenizer_decode(t, ids, (size_t)n, true, NULL));
    }
    free(ids);
    pt_tokenizer_free(t);
    return 0;
}

// fuzz/fuzz_tok_encode.c — encoding and decoding arbitrary bytes with real
// tokenizers: DeepSeek-V3's tokenizer.json and cl100k's tiktoken folder
// (loaded once). The first byte chooses: bit 0 the tokenizer, bit 1
// parse_special, bit 2 add_special_tokens, bit 3 whether the rest is text to
// encode (then decoded back and streamed) or int32 ids to decode and stream
// (ids out of range included).
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

static pt_tokenizer *g_tok[2];

static void stream(const pt_tokenizer *t, const int32_t *ids, size_t n, bool skip)
{
    pt_detok d;
    size_t len;
    pt_detok_init(&d, t, skip);
    for (size_t i = 0; i < n; i++)
        (void)pt_detok_push(&d, ids[i], &len);
    (void)pt_detok_flush(&d, &len);
    pt_detok_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_err err = {0};
    if (!g_tok[0]) {
        g_tok[0] = pt_tokenizer_load(fz_src("tests/fixtures/tokenizer/deepseek_v3/tokenizer.json"), &err);
        g_tok[1] = pt_tokenizer_load_tiktoken(fz_src("tests/fixtures/tokenizer/tiktoken/cl100k"), &err);
        if (!g_tok[0] || !g_tok[1])
            abort();
    }
    if (size < 1)
        return 0;
    const uint8_t mode = data[0];
    const pt_tokenizer *t = g_tok[mode & 1];
    data++;
    size--;
    if (mode & 8) {
        size_t n = size / 4;
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        memcpy(ids, data, n * 4);
        size_t len = 0;
        free(pt_tokenizer_decode(t, ids, n, (mode & 2) != 0, &len));
        stream(t, ids, n, (mode & 2) != 0);
        for (size_t i = 0; i < n; i++) {
            (void)pt_tokenizer_piece(t, ids[i], &len);
            (void)pt_tokenizer_token_str(t, ids[i]);
            (void)pt_tokenizer_is_special(t, ids[i]);
        }
        free(ids);
        return 0;
    }
    int32_t *ids = NULL;
    int64_t n = pt_tokenizer_encode(t, (const char *)data, size, (mode & 2) != 0, (mode & 4) != 0, &ids, &err);
    if (n > 0) {
        free(pt_tokenizer_decode(t, ids, (size_t)n, false, NULL));
        stream(t, ids, (size_t)n, true);
    }
    free(ids);
    size_t out = 0;
    free(pt_utf8_lossy((const char *)data, size, &out));
    return 0;
}

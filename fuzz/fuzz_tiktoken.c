// fuzz/fuzz_tiktoken.c — a tiktoken.model rank file on arbitrary bytes
// (base64 token, space, rank per line), loaded as a tiktoken folder with
// cl100k's tokenizer_config.json and pattern; a model that loads then
// encodes and decodes a short text.
#include <stdlib.h>

#include "common/util.h"
#include "fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

static void copy_fixture(const char *rel, const char *name)
{
    size_t len = 0;
    pt_err err = {0};
    char *buf = pt_read_file(fz_src(rel), &len, &err);
    if (!buf)
        abort();
    (void)fz_write(name, (const uint8_t *)buf, len);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        copy_fixture("tests/fixtures/tokenizer/tiktoken/cl100k/tokenizer_config.json", "tokenizer_config.json");
        copy_fixture("tests/fixtures/tokenizer/tiktoken/cl100k/pat_str.txt", "pat_str.txt");
        init = 1;
    }
    (void)fz_write("tiktoken.model", data, size);
    pt_err err = {0};
    pt_tokenizer *t = pt_tokenizer_load_tiktoken(fz_dir(), &err);
    if (!t)
        return 0;
    static const char text[] = "Hello, world! \xe4\xbd\xa0\xe5\xa5\xbd 2024 \xff";
    int32_t *ids = NULL;
    int64_t n = pt_tokenizer_encode(t, text, sizeof text - 1, true, false, &ids, &err);
    if (n > 0)
        free(pt_tokenizer_decode(t, ids, (size_t)n, false, NULL));
    free(ids);
    pt_tokenizer_free(t);
    return 0;
}

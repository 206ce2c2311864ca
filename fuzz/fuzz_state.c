// fuzz/fuzz_state.c — saved-state blobs (engine/state.c) on arbitrary bytes
// through petrel_state_tokens, the reader the server uses to index kept
// states without a model. The header carries a hash of itself, which random
// bytes almost never match; so when the input starts with the magic, the
// target writes the right header hash (the format's FNV-style hash over
// 4-byte words, as state.c defines it) before parsing, letting mutations of
// the sizes and the zstd frame reach the decoder. Other inputs go as given.
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "petrel.h"

enum { HDR = 80, HASH_AT = 72 };

static uint64_t fnv_words(const unsigned char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, b + i, 4);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    if (size >= HDR && memcmp(buf, "PETRELKV", 8) == 0) {
        uint64_t h = fnv_words(buf, HASH_AT);
        memcpy(buf + HASH_AT, &h, 8);
    }
    petrel_token *tok = NULL;
    char err[256];
    if (petrel_state_tokens(buf, size, &tok, err, sizeof err) >= 0)
        free(tok);
    free(buf);
    return 0;
}

// fuzz/fuzz_state.c — saved-state blobs (engine/state.c) on arbitrary bytes
// through petrel_state_tokens, the reader the server uses to index kept
// states without a model. The header carries a hash of itself, which random
// bytes almost never match; so when the input starts with the magic, the
// target seals the header with engine/state.c's own pt_state_seal_header
// (the code petrel_state_save_mem uses) before parsing, letting mutations of
// the sizes and the zstd frame reach the decoder. Other inputs go as given.
#include <stdlib.h>
#include <string.h>

#include "engine/state.h"
#include "fuzz/fuzz_util.h"
#include "petrel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    if (size >= PT_STATE_HEADER_BYTES && memcmp(buf, "PETRELKV", 8) == 0)
        pt_state_seal_header(buf, size);
    petrel_token *tok = NULL;
    char err[256];
    if (petrel_state_tokens(buf, size, &tok, err, sizeof err) >= 0)
        free(tok);
    free(buf);
    return 0;
}

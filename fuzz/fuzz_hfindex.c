// fuzz/fuzz_hfindex.c — model.safetensors.index.json on arbitrary bytes
// (weight_map, metadata.total_size), then lookups of every name it holds.
#include <stdlib.h>

#include "convert/hfindex.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)fz_write("model.safetensors.index.json", data, size);
    pt_hf_index ix = {0};
    pt_err err = {0};
    if (pt_hf_index_load(fz_dir(), &ix, &err) == 0) {
        for (uint64_t i = 0; i < ix.n_names; i++)
            if (pt_hf_index_find(&ix, ix.names[i]) < 0)
                abort(); // a loaded name must be found again
        (void)pt_hf_index_find(&ix, "model.embed_tokens.weight");
        pt_hf_index_free(&ix);
    }
    return 0;
}

// fuzz/fuzz_usage.c — usage files (cache/usage.c) on arbitrary bytes, read
// with a fixed shape, then merged and rewritten as the engine does when a
// context closes, then read back.
#include <stdlib.h>
#include <string.h>

#include "cache/usage.h"
#include "fuzz/fuzz_util.h"

enum { NB = 3, NE = 8 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_write("m.gguf.usage", data, size);
    uint64_t counts[NB * NE], add[NB * NE];
    (void)pt_usage_load(path, NB, NE, counts);
    for (int i = 0; i < NB * NE; i++)
        add[i] = (uint64_t)i;
    pt_err err = {0};
    if (pt_usage_merge_save(path, NB, NE, add, &err) == 0) {
        uint64_t again[NB * NE];
        if (pt_usage_load(path, NB, NE, again) != 1)
            abort(); // what was just written must read back
    }
    return 0;
}

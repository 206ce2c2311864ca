// fuzz/fuzz_gguf_split.c — a split GGUF (gguf-split's two parts) from
// arbitrary bytes: the first 4 bytes choose where the input is cut, the two
// halves are written as s-00001-of-00002.gguf and s-00002-of-00002.gguf and
// part 1 is opened, which opens, checks and merges both.
#include <string.h>

#include "format/gguf.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t cut;
    memcpy(&cut, data, 4);
    data += 4;
    size -= 4;
    cut = size ? cut % (uint32_t)(size + 1) : 0;
    const char *p1 = fz_write("s-00001-of-00002.gguf", data, cut);
    (void)fz_write("s-00002-of-00002.gguf", data + cut, size - cut);
    pt_err err = {0};
    gguf_file *g = gguf_open(p1, &err);
    if (!g)
        return 0;
    unsigned char buf[64];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        (void)gguf_read(g, t->offset, buf, t->size < sizeof buf ? t->size : sizeof buf, &err);
    }
    gguf_close(g);
    return 0;
}

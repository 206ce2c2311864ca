// fuzz/fuzz_safetensors.c — a safetensors file on arbitrary bytes: header
// length, the JSON header, dtypes, shapes and byte ranges; every small
// tensor of a file that opens is then read raw and as float32.
#include <stdlib.h>

#include "format/safetensors.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_write("m.safetensors", data, size);
    pt_err err = {0};
    st_file *f = st_open(path, &err);
    if (!f)
        return 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const st_tensor *t = &f->tensors[i];
        if (st_find(f, t->name) == NULL)
            abort();
        uint64_t bytes = t->end - t->begin, n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n *= t->shape[d];
        if (bytes > (1u << 20) || n > (1u << 18))
            continue; // the open validated them; big ones add nothing here
        void *raw = malloc(bytes ? bytes : 1);
        float *y = malloc((n ? n : 1) * sizeof *y);
        (void)st_read(f, t, raw, &err);
        (void)st_read_f32(f, t, y, &err);
        free(raw);
        free(y);
    }
    st_close(f);
    return 0;
}

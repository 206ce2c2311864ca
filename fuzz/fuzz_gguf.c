// fuzz/fuzz_gguf.c — the GGUF reader on arbitrary bytes: header, metadata
// records, tensor infos, then what a loader does with an opened file (typed
// getters, tensor lookups, bounded reads, the hyperparameters and the
// tensor list they imply, the tokenizer rebuilt from tokenizer.ggml.*
// metadata).
#include <stdlib.h>

#include "format/gguf.h"
#include "format/hparams.h"
#include "format/tensors.h"
#include "fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_write("m.gguf", data, size);
    pt_err err = {0};
    gguf_file *g = gguf_open(path, &err);
    if (!g)
        return 0;
    uint32_t u;
    float f;
    bool b;
    (void)gguf_get_u32(g, "deepseek2.block_count", &u, &err);
    (void)gguf_get_f32(g, "deepseek2.rope.freq_base", &f, &err);
    (void)gguf_get_bool(g, "deepseek2.expert_weights_norm", &b, &err);
    (void)gguf_get_str(g, "general.architecture", &err);
    unsigned char buf[256];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (gguf_find_tensor(g, t->name) == NULL)
            abort(); // a tensor the table lists must be found by its name
        (void)gguf_type_name(t->type);
        uint64_t n = t->size < sizeof buf ? t->size : sizeof buf;
        (void)gguf_read(g, t->offset, buf, n, &err);
    }
    pt_hparams hp;
    if (pt_hparams_from_gguf(g, &hp, &err) == 0) {
        pt_tensor_spec *specs = NULL;
        if (pt_tensor_specs(&hp, &specs) >= 0)
            free(specs);
    }
    pt_tokenizer *tok = pt_tokenizer_from_gguf(g, &err);
    if (tok) {
        int32_t *ids = NULL;
        int64_t n = pt_tokenizer_encode(tok, "Hello world 123", 15, true, true, &ids, &err);
        if (n > 0)
            free(pt_tokenizer_decode(tok, ids, (size_t)n, false, NULL));
        free(ids);
        pt_tokenizer_free(tok);
    }
    gguf_close(g);
    return 0;
}

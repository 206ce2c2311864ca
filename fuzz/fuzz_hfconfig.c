// fuzz/fuzz_hfconfig.c — a Hugging Face config.json on arbitrary bytes.
#include "convert/hfconfig.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_write("config.json", data, size);
    pt_hf_config cfg;
    pt_err err = {0};
    if (pt_hf_config_load(path, &cfg, &err) == 0)
        pt_hf_config_free(&cfg);
    return 0;
}

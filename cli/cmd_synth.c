// cli/cmd_synth.c — `petrel synth --preset NAME -o DIR [--seed N]`.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/commands.h"
#include "synth/synth.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: petrel synth --preset NAME -o DIR [--seed N] [--layers N] [--experts N] [--threads N] "
               "[--quiet]\n"
               "Writes a deterministic random DeepSeek-V3 checkpoint (Hugging Face FP8 layout, with a\n"
               "byte-level BPE tokenizer) for demos, tests and benchmarks. Its text output is meaningless.\n"
               "presets:\n");
    for (int i = 0; i < synth_n_presets(); i++)
        fprintf(f, "  %-8s %s\n", synth_preset_at(i)->name, synth_preset_at(i)->about);
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (!s || !*s || *s == '-')
        return -1;
    *v = strtoull(s, &end, 0);
    return *end ? -1 : 0;
}

int cmd_synth(int argc, char **argv)
{
    synth_opts o = {0};
    o.seed = 1234;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o.quiet = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "petrel synth: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--preset"))
            o.preset = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            o.out_dir = v;
        else if (!strcmp(a, "--seed") && parse_u64(v, &n) == 0)
            o.seed = n;
        else if (!strcmp(a, "--layers") && parse_u64(v, &n) == 0 && n > 0 && n < 1000)
            o.layers = (uint32_t)n;
        else if (!strcmp(a, "--experts") && parse_u64(v, &n) == 0 && n > 0 && n <= 4096)
            o.experts = (uint32_t)n;
        else if (!strcmp(a, "--threads") && parse_u64(v, &n) == 0 && n > 0 && n < 1024)
            o.threads = (int)n;
        else {
            fprintf(stderr, "petrel synth: bad option or value: %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
    }
    if (!o.preset || !o.out_dir) {
        usage(stderr);
        return 2;
    }
    pt_err err = {{0}};
    if (synth_run(&o, NULL, &err) < 0) {
        fprintf(stderr, "petrel synth: %s\n", err.msg);
        return 1;
    }
    return 0;
}

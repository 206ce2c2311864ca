// cli/main.c — `petrel COMMAND [options]`: dispatches to cli/cmd_*.c.
#include <stdio.h>
#include <string.h>
#include "cli/commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"convert", cmd_convert, "convert a Hugging Face checkpoint to GGUF"},
    {"inspect", cmd_inspect, "show a GGUF's metadata, tensors and expert layout"},
    {"synth", cmd_synth, "write a synthetic checkpoint (presets: tiny, bench16)"},
    {"run", cmd_run, "generate from a prompt or token ids"},
    {"chat", cmd_chat, "interactive chat"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
    {"bench", cmd_bench, "measure prompt and generation speed"},
    {"logits", cmd_logits, "write raw logits for token ids (checks)"},
    {"tokenize", cmd_tokenize, "text -> token ids"},
    {"detokenize", cmd_detokenize, "token ids -> text"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: petrel COMMAND [options]   (petrel COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "petrel: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

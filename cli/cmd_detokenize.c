// cli/cmd_detokenize.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_detokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel detokenize: not implemented yet\n");
    return 1;
}

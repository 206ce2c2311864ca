// cli/cmd_tokenize.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel tokenize: not implemented yet\n");
    return 1;
}

// cli/cmd_inspect.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_inspect(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel inspect: not implemented yet\n");
    return 1;
}

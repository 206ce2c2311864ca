// cli/cmd_serve.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel serve: not implemented yet\n");
    return 1;
}

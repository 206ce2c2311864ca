// cli/cmd_run.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel run: not implemented yet\n");
    return 1;
}

// cli/cmd_bench.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel bench: not implemented yet\n");
    return 1;
}

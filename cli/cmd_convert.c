// cli/cmd_convert.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_convert(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel convert: not implemented yet\n");
    return 1;
}

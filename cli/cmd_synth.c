// cli/cmd_synth.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_synth(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel synth: not implemented yet\n");
    return 1;
}

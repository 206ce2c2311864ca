// cli/cmd_logits.c — placeholder until the owning issue lands.
#include <stdio.h>
#include "cli/commands.h"

int cmd_logits(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "petrel logits: not implemented yet\n");
    return 1;
}

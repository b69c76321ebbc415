/* gitcd log: under construction in this tree; replaced by its owner. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_log(int argc, char **argv)
{
        (void)argc;
        (void)argv;
        fprintf(stderr, "gitcd: log is not built yet\n");
        return EXIT_FAIL;
}

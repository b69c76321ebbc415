/* gitcd etcd: under construction in this tree; replaced by its owner. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_etcd(int argc, char **argv)
{
        (void)argc;
        (void)argv;
        fprintf(stderr, "gitcd: etcd is not built yet\n");
        return EXIT_FAIL;
}

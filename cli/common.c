/*
 * Helpers shared by the subcommands: where the state lives, and whether
 * to colour output.
 */
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

char *cli_state_path(const char *flag_value)
{
        if (!isempty(flag_value))
                return xstrdup(flag_value);
        const char *dir = getenv("GITCD_STATE_DIR");
        if (!isempty(dir))
                return path_join(dir, "state.db");
        return xstrdup("./.gitcd/state.db");
}

bool cli_color(void)
{
        const char *nc = getenv("NO_COLOR");
        return isatty(STDOUT_FILENO) && isempty(nc);
}

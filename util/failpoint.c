/*
 * Failpoints; see util/failpoint.h.
 */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/failpoint.h"
#include "util/macro.h"

void failpoint(const char *name)
{
        const char *want = getenv("GITCD_FAILPOINT");
        if (!want || !streq(want, name))
                return;
        fprintf(stderr, "gitcd: failpoint %s: killing this process\n", name);
        fflush(NULL);
        kill(getpid(), SIGKILL);
        _exit(137);
}

/*
 * S3 destinations: not built yet; opening one is refused with a clear message.
 */
#include <errno.h>

#include "snapshots/dest-internal.h"

int dest_s3_new(const s3_location *loc, const char *prefix, s3_credentials *creds,
                snapshot_dest **ret, char **ret_error)
{
        return dest_fail(ret_error, -EOPNOTSUPP, "S3 snapshot destinations are not supported yet");
}

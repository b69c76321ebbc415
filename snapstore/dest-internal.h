/*
 * Shared between the destination seam (destination.c) and its implementations
 * (dest-local.c, dest-s3.c); not for other callers.
 */
#pragma once

#include "snapstore/destination.h"
#include "snapstore/s3.h"

/* A destination storing keys as files under folder (created on the first put). */
snapshot_dest *dest_local_new(const char *folder);

/*
 * A destination over an S3 bucket; keys go under prefix (may be NULL or "").
 * creds are copied; tuning may be NULL.
 */
int dest_s3_new(const s3_location *loc, const char *prefix, const s3_config *tuning,
                s3_credentials *creds, snapshot_dest **ret, char **ret_error);

/*
 * A destination in PersistentVolumeClaim claim, keys under folder in it
 * (NULL or "": its root), reached through writer (copied; started on the
 * first operation, stopped when the destination is freed).
 */
int dest_pvc_new(const char *claim, const char *folder, const pvc_writer *writer,
                 snapshot_dest **ret, char **ret_error);

/*
 * Make a finished download durable: fsync fd, close it, rename part to path,
 * fsync the folder. fd is closed in every case; part is removed on failure.
 */
int dest_commit_part(int fd, const char *part, const char *path);

/* Set *ret_error (when ret_error is not NULL) to a formatted message. Returns r. */
int dest_fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
/* Also a macro, so that the static analyzer (which does not follow variadic calls)
 * sees r come back. */
#define dest_fail(ret_error, r, ...)                                                               \
        ({                                                                                         \
                int dest_fail_r_ = (r);                                                            \
                (dest_fail)((ret_error), dest_fail_r_, __VA_ARGS__);                               \
                dest_fail_r_;                                                                      \
        })

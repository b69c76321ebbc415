/*
 * An in-process reader and checker of etcd's snapshot file, a bbolt
 * database: what `etcdutl snapshot status` proves about a file, and the
 * figures it prints, without starting etcd's tool.
 *
 * The file is outside input (a snapshot may come back from a remote
 * store): every length and offset is checked against the file, and a file
 * that is not a sound bbolt database is refused with a message naming what
 * is wrong and where (the page id).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "snapstore/tool.h"

/* Nested buckets and branch levels together; real files use a handful. */
#define BBOLT_MAX_DEPTH 64

/*
 * Check the len bytes at data as etcd's snapshot file and compute what
 * `etcdutl snapshot status` reports (hash, revision, totalKey, totalSize,
 * computed exactly as etcd computes them). Checked: the meta pages (magic,
 * version, page size, checksum; the valid one with the highest txid is
 * used, as bbolt does), every page reachable from the root bucket exactly
 * once, within the high-water mark and the file, never also free, of the
 * type its place asks for; keys in order within each page and across a
 * branch's children; nested and inline buckets walked; the freelist read
 * when the file has one and every page below the high-water mark either
 * reachable or free. Bytes past the high-water mark (etcd's sha256
 * trailer) are not read.
 * 0 and *ret filled; -EBADMSG with *ret_error (newly allocated) when the
 * file is refused.
 */
int bbolt_check(const uint8_t *data, size_t len, snapshot_status *ret, char **ret_error);

/*
 * bbolt_check() of a file, mapped once. -EBADMSG as above; -errno with
 * *ret_error when the file cannot be read.
 */
int bbolt_check_file(const char *path, snapshot_status *ret, char **ret_error);

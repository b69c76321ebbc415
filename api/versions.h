/*
 * The etcd version policy: which versions gitcd runs and which moves between
 * them etcd supports, kept as data in one table (api/versions.c). Pure.
 *
 *   patch upgrade (3.5.16 → 3.5.30)        allowed
 *   patch downgrade (3.5.30 → 3.5.16)      allowed: one minor keeps one data format
 *   one minor up (3.4 → 3.5)               allowed from the minimum patch the table
 *                                          names (3.5.26+ before 3.6)
 *   a skipped minor (3.4 → 3.6)            refused
 *   a minor down (3.6 → 3.5, 3.5 → 3.4)    refused, except the rollback of an
 *                                          upgrade that has not finished (some
 *                                          member still runs the version asked for)
 *   another major                          refused
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api/model.h"

typedef enum version_move {
        VERSION_SAME,
        VERSION_PATCH_UPGRADE,
        VERSION_PATCH_DOWNGRADE,
        VERSION_MINOR_UPGRADE,
        VERSION_ROLLBACK, /* back to what some members still run: an unfinished upgrade */
        VERSION_REFUSED,
} version_move;

const char *version_move_name(version_move m); /* "patch upgrade", ... */

/* True when gitcd runs this etcd minor at all (3.4, 3.5, 3.6). */
bool version_supported(const semver *v);
/* "3.4, 3.5 and 3.6": for messages. Static storage. */
const char *version_supported_list(void);

/*
 * Whether etcd's restore tool of version v (etcdutl; etcdctl for 3.4) takes
 * --bump-revision and --mark-compacted: from 3.4.27, 3.5.10 and every 3.6.
 * When not, *ret_first (when not NULL; heap) is the first patch of v's
 * minor that does ("3.4.27"); NULL for a minor gitcd does not run.
 */
bool version_has_restore_bump(const semver *v, char **ret_first);

/*
 * The move from `from` to `to`. `running` are the versions the members were
 * last started with (n may be 0): a move back to one of them while the
 * cluster is between versions is a rollback; every one of them must also be
 * allowed to move to `to` (a half-finished 3.4 → 3.5 upgrade cannot go on to
 * 3.6). On VERSION_REFUSED *ret_reason (heap) says why and what to do
 * instead; it is NULL otherwise.
 */
version_move version_check_move(const semver *from, const semver *to, const semver *running,
                                size_t n_running, char **ret_reason);

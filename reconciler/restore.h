/*
 * Creating a cluster from a snapshot (`spec.bootstrap.restore`): fetch and
 * check the snapshot the spec names, then have the target restore it into
 * the seed member's data before the seed first starts. The other members
 * join the restored seed as learners, as for any new cluster.
 *
 * The checks all run before anything is created, and a snapshot that fails
 * one is refused with the reason: missing, damaged (size or SHA-256 against
 * what was recorded, etcd's sha256 trailer, etcd's own tool), taken from a
 * newer etcd than the spec's version, larger than spec.storage.size, or a
 * source this target cannot read.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "reconciler/bump.h"
#include "state/state.h"
#include "targets/target.h"

typedef struct restore_prep {
        char *work;     /* gitcd's temporary folder for it (removed by restore_prep_free) */
        char *snapshot; /* the checked, uncompressed snapshot file in work */
        char *tool;     /* etcd's tool for the spec's version (etcdutl; etcdctl for 3.4) */
        char *source;   /* where it came from, for messages and the audit log */
        int64_t revision;
        int64_t keys;
        int64_t size; /* bytes of the uncompressed snapshot */
        /* The store's record of it, when there is one: its cluster and when it was taken. */
        char *from_cluster;
        int64_t taken_ms;
} restore_prep;

void restore_prep_free(restore_prep *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(restore_prep *, restore_prep_free);

/*
 * etcd's tool that restores a snapshot for c's version (etcdutl; etcdctl
 * for 3.4): under etcd_dir (NULL: the default lookup), else on PATH
 * (snapshot_etcd_tool). 0 with *ret_tool; else -errno (-ENOENT: none
 * found) with *ret_error saying what is missing and where to put it.
 */
int restore_find_tool(const etcd_cluster *c, const char *etcd_dir, char **ret_tool,
                      char **ret_error);

/*
 * Fetch spec.bootstrap.restore.source into a temporary folder under the
 * state store's folder and check it. The SHA-256 and size are checked
 * against the store's snapshot record of that location when there is one
 * (else against the SHA-256 the destination keeps with the object), and
 * so is the etcd version it was taken from. etcd_dir: where etcd's tools
 * are by version (NULL: the default lookup).
 *
 * 0 with *ret; else -errno with *ret_error, and *ret_refused true when the
 * snapshot itself is refused (missing -ENOENT, damaged -EBADMSG, too large
 * -EFBIG, from a newer etcd -EPROTO, a source the target cannot read
 * -EOPNOTSUPP): trying again cannot help until a person acts. Otherwise
 * (storage unreachable, no tool) it may be tried again.
 */
int restore_prepare(state_db *db, target *t, const etcd_cluster *c, const char *etcd_dir,
                    restore_prep **ret, bool *ret_refused, char **ret_error);

/*
 * Is this member's data to be restored before it starts? Only when the
 * spec asks for a restore, the target holds no data for the member (a
 * member that has data, a restore done before a crash or a member that
 * already ran, is never restored over), and the member is either
 *  - the seed of a cluster that never formed (no cluster ID recorded), or
 *  - a member of the static initial cluster that never joined (every one
 *    is restored from the same snapshot; one that was not when the others
 *    formed the cluster must still be: started empty it would be taken in
 *    at the snapshot's raft index without the snapshot's keys).
 */
bool restore_due(target *t, const etcd_cluster *c, const state_member *rec, bool bootstrapped);

/*
 * Restore prep into member idx of plan p through the target, its revision
 * raised by bump (0: none; --bump-revision with --mark-compacted);
 * -errno with *ret_error.
 */
int restore_into(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                 const restore_prep *prep, int64_t bump, char **ret_error);

/*
 * The bump of a restore of a snapshot at snapshot_revision, taken at
 * taken_ms (0: not known) from cluster from_cluster (NULL: not known): as
 * want asks (asked_by names who asked), auto sized from the store's
 * snapshot records of from_cluster and seen_revision, the highest revision
 * gitcd saw that cluster at (0: none); see reconciler/bump.h. Release *ret
 * with bump_decision_release().
 */
void restore_bump(state_db *db, const revision_bump *want, const char *asked_by,
                  const char *from_cluster, int64_t snapshot_revision, int64_t taken_ms,
                  int64_t seen_revision, int64_t now_ms, bump_decision *ret);

/* Who asked for the bump of a bootstrap restore, for the sizing text. */
const char *restore_bump_asker(const etcd_cluster *c);

/*
 * The one check before a member starts on data gitcd did not just restore:
 * when the cluster's newest restore (state/restores.h) was for this member
 * and the member has not run since (not initialized), its data, if it has
 * any, must hold at least the revision the restore left (snapshot revision
 * plus bump): less is data from before the restore (a machine back with an
 * old data folder, a folder put back by hand, data set aside moved back).
 * Read with the target's data_revision. 0: it may start; -ESTALE with
 * *ret_error saying why it is refused; other -errno: could not tell (the
 * member is not started either; tried again).
 */
int restore_check_data(state_db *db, target *t, const etcd_cluster *c, const char *cluster,
                       const state_member *rec, const char *etcd_dir, char **ret_error);

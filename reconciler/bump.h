/*
 * The revision bump of a restore, decided once per restore (pure).
 *
 * A snapshot restored into a cluster goes back to the snapshot's revision.
 * Every client that saw a later revision (a Kubernetes API server's
 * watchers and informers above all) then waits for revisions that never
 * come, or sees revisions reused for other data. etcd's restore tool
 * (from 3.4.27 and 3.5.10) raises the restored revision by N and marks
 * every revision up to the new one compacted (--bump-revision N
 * --mark-compacted): a watch or a read at an older revision then fails with
 * "required revision has been compacted", which makes a Kubernetes
 * informer list again. N must exceed the revisions the cluster made after
 * the snapshot was taken; more costs nothing (revisions are 64-bit).
 *
 * A number of revisions is used as written (0: no bump; the sizing text
 * says when gitcd knows of revisions past the snapshot that it does not
 * cover). `auto` sizes it:
 *
 *   estimate = the larger of
 *       rate × age   the revision rate between the two newest succeeded
 *                    snapshots of the cluster the snapshot came from
 *                    (their recorded revisions and times) times the time
 *                    since the restored snapshot was taken: the writes the
 *                    cluster may have made after it;
 *       known − snap the highest revision gitcd knows that cluster
 *                    reached (a member's Status while quorum was lost, its
 *                    snapshots, the revision its newest restore started
 *                    at: a second restore from an older snapshot must go
 *                    past the first one's bump) minus the snapshot's;
 *   bump = max(BUMP_AUTO_FLOOR, BUMP_AUTO_SAFETY × estimate), at most
 *          GITCD_MAX_REVISION_BUMP.
 *
 * The floor is etcd's own recommendation: its disaster recovery guide
 * ("Restoring with revision bump", etcd.io/docs/v3.5/op-guide/recovery/)
 * bumps by 1,000,000,000, which covers a week-old snapshot at under 1,500
 * writes a second. The estimate only raises it: for an older snapshot or a
 * busier cluster. The factor covers a rate averaged over hours that hides
 * bursts, and writes gitcd never saw.
 */
#pragma once

#include <stdint.h>

#include "api/model.h"

#define BUMP_AUTO_FLOOR  INT64_C(1000000000)
#define BUMP_AUTO_SAFETY 10

typedef struct bump_inputs {
        revision_bump want;   /* the bump asked for: FIXED (as is) or AUTO */
        const char *asked_by; /* who asked, for the sizing text ("spec.bootstrap.restore...") */
        int64_t snapshot_revision; /* the restored snapshot's revision */
        int64_t snapshot_ms;       /* when it was taken (wall ms); 0: not known */
        int64_t now_ms;
        /* The two newest succeeded snapshots of its cluster (revision, wall ms); 0: fewer. */
        int64_t newer_revision, newer_ms;
        int64_t older_revision, older_ms;
        int64_t seen_revision; /* the highest revision gitcd knows that cluster reached; 0: none */
} bump_inputs;

typedef struct bump_decision {
        int64_t amount; /* revisions to add; 0: none */
        char *sizing;   /* how it was decided, for the restore record, audit and status */
} bump_decision;

/* Fill *out (its sizing newly allocated: bump_decision_release). */
void bump_decide(const bump_inputs *in, bump_decision *out);
void bump_decision_release(bump_decision *d);

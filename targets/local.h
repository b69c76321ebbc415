/*
 * The local target: every etcd member is a supervised process on this
 * host, listening on 127.0.0.1. It is the embedded default that demos,
 * development and gitcd's end-to-end tests use.
 *
 * On disk, under opts.state_dir:
 *
 *   ports.lock                  serializes port allocation between processes
 *   clusters/<namespace>/<cluster>/
 *       objects/<kind>-<name>.json  rendered shared objects (for inspection)
 *       pki/ca.crt, ca.key      the cluster CA (tls.provider auto)
 *       .removed/<member>-<t>/  data kept by remove_member(keep_data)
 *       <member>/
 *           member.json         ports, command, version, bookkeeping
 *           pid                 the running process (written atomically)
 *           etcd.log            stdout and stderr, appended
 *           data/               etcd's --data-dir
 *           data/gitcd-member   the data identity marker (TARGET_DATA_MARKER),
 *                               written before the first start
 *           tls/                client/ peer/ operator/ certificate folders
 *
 * Members run detached (own session, stdin /dev/null), so they outlive
 * gitcd; a new local target adopts them through their pid files and
 * /proc/<pid>/cmdline (or, without a pid file, the process whose command
 * line is the recorded one). A member whose pid file names a dead process
 * died while no gitcd ran: it is CRASHED and restarted by the next tick().
 * Without a pid file it was stopped and stays so until ensure_member: this
 * target keeps no "stopped" flag on disk; whether a member should run is
 * its record in state/ (dormant), and the reconciler starts it.
 *
 * Member states: ABSENT no member.json, or planned and never run (no
 * data); STOPPED data kept, not running (stopped on purpose, or found so);
 * STARTING running, /health not OK yet ("no leader" when etcd has no
 * quorum); READY running and GET <client URL>/health says true (with the
 * operator certificate under tls/operator/ when TLS is on); CRASHED /
 * CRASH_LOOP exited on its own, restart pending. The status reports the
 * marker's id as the data identity; a wiped data directory reports none,
 * which the reconciler calls data loss for a member that ran before
 * (membership_check_identity); tick() never restarts a member whose
 * marker is gone.
 *
 * Restarts follow a kubelet's restartPolicy Always: after an exit nobody
 * asked for, the member restarts after backoff_base_ms (1 s), doubling on
 * every further exit up to backoff_max_ms (30 s); the delay goes back to
 * the base once a run lasted 60 s after it was first seen ready (or 60 s
 * in all when nobody looked). Five or more unexpected exits within five
 * minutes report MEMBER_CRASH_LOOP (it is still restarted with backoff;
 * replacing it is the reconciler's decision).
 */
#pragma once

#include "targets/target.h"

typedef struct local_target_opts {
        const char *state_dir; /* required */
        /*
         * Binaries by version: <etcd_dir>/<version>/etcd. NULL: $GITCD_ETCD_DIR,
         * then ~/.cache/gitcd/etcd, then the `etcd` on PATH when its --version matches.
         */
        const char *etcd_dir;
        int health_timeout_ms; /* per /health request; 0: 2000 */
        int backoff_base_ms;   /* first restart delay; 0: 1000 */
        int backoff_max_ms;    /* cap; 0: 30000 */
        int stop_timeout_ms;   /* SIGTERM grace before SIGKILL; 0: 10000 */
} local_target_opts;

/*
 * Behaviour of the operations (targets/target.h) specific to this target:
 *   place_member    allocates client, peer and metrics ports on 127.0.0.1 (from
 *                  20000-31999, not recorded for any other member, bindable now)
 *                  and records them in member.json at once; https when the
 *                  cluster's TLS surface is on (metrics stay http).
 *   ensure_shared  with tls.provider auto, issues the cluster CA and each
 *                  planned member's certificates (targets/local-tls.h); writes
 *                  the rendered shared objects to objects/ and prunes stale ones.
 *   ensure_member  -ENOENT when no etcd binary of the version is found;
 *                  -ESTALE when the plan entry carries a data identity and
 *                  the marker is gone or holds another: it must be replaced,
 *                  not restarted. Writes the marker when there is none.
 *                  During a crash backoff with an unchanged command it leaves
 *                  the restart to tick().
 *   remove_member  keep_data moves data/ to <cluster>/.removed/<member>-<epoch ms>/
 *                  before the member directory is deleted.
 *   list_members   a NULL-terminated, sorted array; free each name and the array.
 *   wait_event     also returns 1 when a crashed member's restart falls due.
 *   client_tls     the operator/ folder of the first member (in name order)
 *                  that has one.
 */

/* What the local target can do beyond every target (TARGET_CAP_*): nothing more. */
#define LOCAL_TARGET_CAPS TARGET_CAP_PEER_SELF_SIGNED

/* -EINVAL without state_dir; -errno when the state directory cannot be created. */
int local_target_new(const local_target_opts *opts, target **ret);

/* The etcd process of a member, 0 when it does not run (tests, diagnostics). */
pid_t local_target_member_pid(target *t, const char *ns, const char *cluster, const char *member);

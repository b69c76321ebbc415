/*
 * A target is where members run: an operation table, in the style of
 * Redis's rio. The reconciler calls these operations and never knows
 * which target it drives. Two implementations: targets/local.c (etcd
 * processes on this host: the embedded default) and
 * targets/kubernetes.c (Pods and PVCs through a kube-apiserver). Both
 * consume the same rendered objects (render/render.h): the local target
 * runs the member Pod's etcd container command as a process.
 *
 * Every operation is idempotent: calling it twice has the effect of
 * calling it once. Operations return 0 or a negative errno and leave a
 * human message in target_last_error().
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "render/render.h"
#include "api/model.h"

typedef enum member_runtime_state {
        MEMBER_ABSENT,     /* nothing: no process and no data */
        MEMBER_STOPPED,    /* data kept, not running (paused / dormant / stopped on purpose) */
        MEMBER_STARTING,   /* running, not healthy yet */
        MEMBER_READY,      /* running and answering health checks */
        MEMBER_CRASHED,    /* exited on its own; the target restarts it with backoff */
        MEMBER_CRASH_LOOP, /* restarted too often in a short window */
        MEMBER_DATA_LOST,  /* it ran before but its data is gone or unusable */
} member_runtime_state;

const char *member_runtime_state_name(member_runtime_state s); /* "absent", "ready", ... */

typedef struct target_member_status {
        member_runtime_state state;
        int restarts;           /* restarts since the member was (re)created */
        int64_t state_since_ms; /* monotonic time the state was entered, when known */
        /* member_plan.config_hash it was last started with; NULL when unknown. */
        char *config_hash;
        /*
         * The identity of the data the target holds for the member now (the
         * PVC's UID, the id in the data directory's marker file); NULL when it
         * holds none. The target only reports it: whether the member lost its
         * data is the reconciler's call (membership_check_identity()).
         */
        char *data_identity;
        char *detail; /* short human explanation ("exit status 2", "data dir missing") */
} target_member_status;

void target_member_status_release(target_member_status *s);

/*
 * The data identity marker a target writes into a member's data directory
 * (targets without a volume of their own: local, hosts): "member=<name>\n"
 * and "id=<32 random hex digits>\n". A wiped directory loses it.
 */
#define TARGET_DATA_MARKER "gitcd-member"
/* The text of a new marker for member; NULL when no random bytes could be had. */
char *target_data_marker_new(const char *member);
/* The id in a marker's text when it names member, else NULL. Newly allocated. */
char *target_data_marker_id(const char *text, const char *member);

typedef struct target target;
struct receiver_peer;

/* One TLS leaf certificate gitcd issued (tls.provider auto), as the target holds it. */
typedef struct target_cert {
        char *member;         /* the member whose folder holds it; NULL: shared by every member */
        char *surface;        /* "client", "peer", "operator" (render/layout.h), TARGET_CERT_CA */
        int64_t not_after_ms; /* wall clock, ms since the epoch */
        char *serial;         /* upper-case hex */
        bool imported;        /* the CA: taken over (pki_ca_imported), never rotated by gitcd */
} target_cert;

/* The surface of the cluster CA itself in a certificate list (member NULL): not a leaf. */
#define TARGET_CERT_CA "ca"

void target_certs_free(target_cert *v, size_t n);
/*
 * Append the cluster CA of tls.provider auto, kept in pki_dir (pki/auto.h),
 * to the list *v of *n certificates (grown with xrealloc) as TARGET_CERT_CA;
 * nothing when it cannot be read (not created yet).
 */
void target_certs_add_ca(target_cert **v, size_t *n, const char *pki_dir);

/*
 * What a target can do beyond the operations every target has; the
 * reconciler asks these instead of branching on the target's name.
 */
enum {
        /* Mount TLS material from Kubernetes Secrets (tls.provider secrets, cert-manager). */
        TARGET_CAP_TLS_FROM_SECRETS = 1u << 0,
        /*
         * Run members on the machines of spec.hosts, and nowhere else: the
         * target takes in only clusters with spec.hosts, and no other
         * target takes those (spec_refuse_for_target).
         */
        TARGET_CAP_HOSTS_INVENTORY = 1u << 1,
        /*
         * storage.medium Memory is a volume that lives and dies with the
         * member's running process (a Kubernetes emptyDir): nothing can be
         * put there before the member starts, so spec.bootstrap.restore is
         * refused with it (reconciler/restore.c).
         */
        TARGET_CAP_MEMORY_MEDIUM = 1u << 2,
        /*
         * Members run as container images of spec.repository (the
         * Kubernetes target): the operator's policy.images applies. (The
         * hosts target's staticPod machines run images too; the intake asks
         * the spec's machines for that.)
         */
        TARGET_CAP_CONTAINER_IMAGES = 1u << 3,
        /*
         * Writes snapshot locations in PersistentVolumeClaims through a
         * writer Pod (the Kubernetes target): writer_start and writer_stop
         * are there exactly when this bit is, and a pvc snapshot
         * destination or restore source is taken in only with it
         * (spec_refuse_for_target).
         */
        TARGET_CAP_PVC_WRITER = 1u << 4,
        /*
         * Runs each cluster on the API server of its kubeconfig context
         * (spec.kubernetes.context, else the source's, else the target's
         * own): a cluster that names a context is taken in only with it
         * (intake/intake.c), and only when the kubeconfig has that context.
         */
        TARGET_CAP_KUBE_CONTEXTS = 1u << 5,
        /*
         * Members speak https to each other with the certificates etcd
         * makes for itself (spec.tls.peer.selfSigned, --peer-auto-tls): the
         * target plans https peer URLs from render_peer_scheme(). A cluster
         * asking for it is taken in only with this bit
         * (spec_refuse_peer_self_signed).
         */
        TARGET_CAP_PEER_SELF_SIGNED = 1u << 6,
};

/*
 * What a target needs to restore a snapshot into a member's data
 * (spec.bootstrap.restore, disaster recovery from a snapshot).
 */
typedef struct target_restore {
        const char *snapshot; /* a checked, uncompressed snapshot file on the gitcd host */
        const char *tool;     /* etcd's restore tool for the cluster's version, on the gitcd host */
        /*
         * Revisions the restore adds to the snapshot's, every one up to the
         * new revision marked compacted (--bump-revision, --mark-compacted);
         * 0: none. Every member restored from one snapshot for one cluster
         * gets the same (the reconciler decides it once, reconciler/bump.h).
         */
        int64_t bump_revision;
} target_restore;

/*
 * The --initial-cluster a member's data is restored with: a member of a
 * static initial cluster (state "new", more members than itself) is
 * restored as one of them, every one from the same snapshot, so they form
 * one cluster; any other member alone (NULL), as a seed others join.
 */
const char *target_restore_initial_cluster(const member_plan *mp);

/*
 * The revision of the etcd database file db on gitcd's host with etcd's tool
 * (`tool snapshot status`), for data_revision: 0, -EBADMSG when the tool
 * cannot read it; the target's error says which file.
 */
int target_db_revision(target *t, const char *member, const char *tool, const char *db,
                       int64_t *ret_revision);

/*
 * Restore rs with etcd's tool into dir, a folder on the gitcd host, as
 * member idx of p (its name, peer URL, the cluster token and
 * target_restore_initial_cluster). dir is emptied first and removed again
 * when the tool fails; other threads' operations go on while it works.
 * 0, or the target's error naming the member.
 */
int target_restore_into(target *t, const membership_plan *p, size_t idx, const target_restore *rs,
                        const char *dir);

/*
 * Adoption of a cluster that already runs where a target would place its
 * members (docs/hosts.md, "Adopting a running cluster"): what the target
 * found and what taking it over does with each member. The steps are the
 * reconciler's (reconciler/adopt.c: markers, records, then one member at a
 * time onto gitcd's own files); the target says what runs and whether it
 * may be taken over (target_adopt_ops).
 */
typedef struct adopt_step {
        size_t machine;     /* where it runs: its index in spec.hosts.machines */
        char *where;        /* that machine's address, for messages and the audit */
        char *member;       /* gitcd's name for it, "<cluster>-<ordinal>", recorded */
        char *running_name; /* its name in etcd now; member's once it ran on gitcd's file */
        int ordinal;        /* see hosts_adopt_ordinals() */
        uint64_t id;        /* its etcd member ID, kept */
        char *peer_url;
        char *client_url;
        bool restart;        /* moved onto gitcd's rendered file: one restart */
        char *replaces;      /* the file that runs it and gitcd retires first, or NULL */
        const char *retired; /* what retiring does to that file: "removed", "disabled" */
} adopt_step;

typedef struct adopt_plan {
        uint64_t cluster_id;
        /* as the first machine's member was started with; a renamed member's entry
           (its old name and peer URL) under its new name */
        char *initial_cluster;
        adopt_step *steps; /* one per member, in machine order */
        size_t n;
} adopt_plan;

void adopt_plan_release(adopt_plan *p);

/*
 * The optional operations of a target that can take over a cluster already
 * running where it would place the members (the hosts target). Each
 * returns 0 or a negative errno with the target's error, as every
 * operation; the locked wrapper forwards them under the cluster's lock.
 */
typedef struct target_adopt_ops {
        /*
         * What runs where c's members would go and whether gitcd may take it
         * over, read from there and from etcd, changing nothing there: 0
         * when nothing runs (bootstrap as usual); 1 with *ret filled when it
         * may be adopted (member IDs and data kept); -EPERM when it must be
         * refused, with the reason in *ret_why (for a person: what runs
         * and what to change); another -errno when a place or etcd could
         * not be read (never bootstrap then). When the members run with
         * TLS, the CA they trust is made the cluster's auto CA on gitcd's
         * host first (the only write; the same CA when asked again), so
         * that gitcd's client certificate comes from it.
         */
        int (*survey)(target *t, const etcd_cluster *c, adopt_plan *ret, char **ret_why);
        /*
         * Write the data identity marker of s's member where it runs, unless
         * one is there; the marker's id in *ret_identity. -EEXIST when the
         * marker names another member.
         */
        int (*claim)(target *t, const etcd_cluster *c, const adopt_step *s, char **ret_identity);
        /*
         * Retire s->replaces (s->retired says how), so that what ran s's
         * member before gitcd stops; the caller then waits until the member
         * stopped answering.
         */
        int (*retire)(target *t, const etcd_cluster *c, const adopt_step *s);
        /* 1 when etcd at client_url answers its health check healthy, else 0. */
        int (*member_healthy)(target *t, const etcd_cluster *c, const char *client_url);
} target_adopt_ops;

/*
 * The takeover of a cluster another operator runs (spec.adopt: a
 * migration, reconciler/takeover.h): what the target found of the old
 * operator's objects. The move itself is membership steps through etcd
 * (gitcd's members added, the old ones removed); the target only finds the
 * old cluster, judges what would collide, and points the old client
 * Service at gitcd's members.
 */
typedef struct takeover_survey {
        char *source;    /* "coreos default/example": the operator and its resource */
        char *endpoints; /* the old members' client URLs, comma separated */
        char **objects;  /* "Pod default/example-abc", ...: left for the user (NULL-ended) */
        size_t n_objects;
        char *service; /* the old client Service's name; NULL when there is none */
} takeover_survey;

void takeover_survey_release(takeover_survey *s);

typedef struct target_takeover_ops {
        /*
         * Find the old cluster c->adopt names, reading only: 0 with *ret
         * filled; -EPERM when gitcd must not take it over now, why in
         * *ret_why (for a person: what is wrong and what to do: the old
         * operator still acts on it, gitcd's names or labels would collide
         * with its objects, none of its members runs); another -errno when
         * the API could not be read.
         */
        int (*survey)(target *t, const etcd_cluster *c, takeover_survey *ret, char **ret_why);
        /*
         * Make the old client Service `service` select gitcd's voters
         * instead of the old members, so its clients follow the move: 1
         * when changed, with its selector before (JSON) in *ret_before and
         * the same kept on it as the annotation gitcd.io/selector-before;
         * 0 when it selects them already; -ENOENT when it is gone.
         */
        int (*point_service)(target *t, const etcd_cluster *c, const char *service,
                             char **ret_before);
} target_takeover_ops;

/*
 * The optional operations a target has for an incident bundle (gitcd debug
 * bundle, cli/bundle.c): what the places members run on say about them,
 * read only, each bounded in bytes and in time. Each returns 0 or a
 * negative errno with the target's error, as every operation; the locked
 * wrapper forwards them under the cluster's lock.
 */
typedef struct target_debug_ops {
        /*
         * The member's last log lines, at most max_bytes of them (the newest
         * kept, cut at a line start), into *ret_text (allocated, NUL-ended),
         * and where they were read into *ret_source ("journalctl -u UNIT on
         * 10.0.0.1", the file's path). -ENOENT when the target keeps no log
         * of the member (never started, or removed). Never blocks longer
         * than the target's own command deadline.
         */
        int (*member_logs)(target *t, const etcd_cluster *c, const char *member, size_t max_bytes,
                           char **ret_text, char **ret_source);
        /*
         * What the machine the member runs on says about itself, as text for
         * a person (at most max_bytes): the kernel's lines about disk errors
         * where readable and the machine's clock against gitcd's host.
         * -ENOENT when the member has no machine of its own. May be NULL.
         */
        int (*machine_facts)(target *t, const etcd_cluster *c, const char *member, size_t max_bytes,
                             char **ret_text);
} target_debug_ops;

struct state_preflight_list;

/*
 * The optional operations of a target whose members run on machines of
 * their own that it can measure (the hosts target's preflight,
 * docs/hosts.md): it measures, the caller records (state/preflights.h).
 * Returns 0 or a negative errno with the target's error, as every
 * operation; the locked wrapper forwards it under the cluster's lock.
 */
typedef struct target_machine_ops {
        /*
         * The preflights of c's machines: known is the last one the state
         * store holds of each (NULL: none), so that a verdict outlives a
         * restart of gitcd; each machine holding a member whose last
         * preflight is older than the target's interval at now_ms is
         * measured again (at most the preflight's bound each), and every
         * preflight made since the last call for c (placement's included,
         * and a placement's member on the machine it chose) is handed out
         * in *ret, once, to be recorded. Free machines are measured only
         * before a member is placed on them. 1 when the preflight is on
         * (what is handed out may be nothing), 0 with nothing when it is
         * off; a machine that does not answer is skipped.
         */
        int (*preflights)(target *t, const etcd_cluster *c,
                          const struct state_preflight_list *known, int64_t now_ms,
                          struct state_preflight_list *ret);
} target_machine_ops;

/*
 * The last max_bytes of text (cut at the first line start after the cut)
 * as a new string: the tail of a log, kept whole when it fits.
 */
char *target_text_tail(const char *text, size_t len, size_t max_bytes);

typedef struct target_ops {
        const char *name; /* "local", "kubernetes": for messages only */
        unsigned caps;    /* TARGET_CAP_* */

        /*
         * Place a new member: fill the target-specific fields of its plan
         * entry, its
         * advertised and listen URLs, data_dir and tls_dir. mp->name and
         * mp->ordinal are set by the caller. The local target allocates
         * 127.0.0.1 ports and records them, so the same member always gets
         * the same ports back (also after a gitcd restart). For a member
         * gitcd has a record of, mp->peer_url, mp->client_url and
         * mp->data_identity come in as recorded (NULL for a new member):
         * where it was, and whether it ever ran; the target may replace
         * the URLs. A member that ran before is never placed anew
         * somewhere else (it would start there without its data).
         */
        int (*place_member)(target *t, const etcd_cluster *c, member_plan *mp);

        /* Create or update the cluster-wide objects (Services, PDB, TLS material). */
        int (*ensure_shared)(target *t, const etcd_cluster *c, const membership_plan *p);

        /*
         * Make member idx of the plan run: create its volume and start it
         * (or leave it running when it already runs with the same command).
         * A member running an older command is stopped first, and every
         * stop sends SIGTERM and leaves etcd time before anything harder
         * (10 s or more by every target's default): a leader hands its
         * leadership over inside that graceful stop, and decide() rule 13
         * restarts the leader without moving leadership first.
         */
        int (*ensure_member)(target *t, const etcd_cluster *c, const membership_plan *p,
                             size_t idx);

        /*
         * ensure_member for every member of the plan, as one operation: a
         * new cluster's static bootstrap. The target prepares the members
         * side by side (each on its own machine), then starts every member
         * it could prepare at once, so that the members of a static initial
         * cluster start close together; it does not wait for their health.
         * ret_results (p->n entries) gets each member's ensure_member
         * result. 0 when every member is started, else the first failed
         * member's error, with a message naming every member that failed
         * (and its machine); the others are started all the same, as a
         * retry of ensure_member for the failed ones finishes it. NULL: the
         * caller calls ensure_member for each member in turn.
         */
        int (*ensure_members)(target *t, const etcd_cluster *c, const membership_plan *p,
                              int *ret_results);

        /* Stop a member, keeping its data (pause, dormant member). */
        int (*stop_member)(target *t, const etcd_cluster *c, const char *member);

        /* Stop a member and delete it; its data goes too unless keep_data. */
        int (*remove_member)(target *t, const etcd_cluster *c, const char *member, bool keep_data);

        /*
         * Delete what remove_member(keep_data) kept of member: its data set
         * aside (a disaster recovery keeps the lost members' data until the
         * cluster is healthy again). 0 also when nothing is kept. May be
         * NULL: kept data stays until a person removes it.
         */
        int (*drop_kept_data)(target *t, const etcd_cluster *c, const char *member);

        /* Report one member's runtime state. Unknown members are MEMBER_ABSENT. */
        int (*member_status)(target *t, const etcd_cluster *c, const char *member,
                             target_member_status *ret_status);

        /* Names of every member the target holds for the cluster (running or not). */
        int (*list_members)(target *t, const char *namespace_, const char *cluster,
                            char ***ret_names, size_t *ret_n);

        /*
         * Housekeeping: restart crashed members whose backoff elapsed, reap
         * exits. Called on every reconciler pass and after wait_event.
         */
        int (*tick)(target *t);

        /*
         * Block until something changes (a member process exits, ...),
         * timeout_ms passes or target_wake() is called. Returns 1 when an
         * event arrived, 0 on timeout or a wake.
         */
        int (*wait_event)(target *t, int timeout_ms);

        /*
         * The clusters ("namespace/name") that had a member event since the
         * last call (an exit, a restart that is due), so that only those are
         * looked at before their next observation. The caller frees the
         * strings and the array. May be NULL: every cluster is looked at
         * after an event.
         */
        int (*take_events)(target *t, char ***ret_clusters, size_t *ret_n);

        /*
         * gitcd's own client identity for a cluster with client TLS: paths
         * of the CA, certificate and key files to dial members with, on the
         * host gitcd runs on. All three NULL (and 0) when the cluster has no
         * client TLS or no identity was issued yet. The caller frees the
         * strings. Required: only the target knows where its members'
         * material is.
         */
        int (*client_tls)(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                          char **ret_key);

        /*
         * tls.provider auto: the leaf certificates the target holds for the
         * planned members (none when the cluster has no TLS, or the target
         * leaves TLS to others: then NULL and 0). May be NULL: no certificates.
         */
        int (*tls_certificates)(target *t, const etcd_cluster *c, const membership_plan *p,
                                target_cert **ret_certs, size_t *ret_n);

        /*
         * tls.provider auto: reissue, from the unchanged cluster CA, the leaves
         * of `member` (NULL: the ones every member shares) that are expired or
         * within tls.auto.renewBefore at now_ms, and deliver them where the
         * member reads them, each folder replaced whole. No restart: etcd
         * loads its leaf files again for every new connection. Returns the
         * number reissued (0: nothing was due). May be NULL when tls_certificates is.
         */
        int (*renew_tls)(target *t, const etcd_cluster *c, const membership_plan *p,
                         const char *member, int64_t now_ms);

        /*
         * Restore a snapshot into the data of member idx of the plan (placed,
         * never started), so that it starts as a new cluster of one (new
         * cluster ID: its name, peer URL and the plan's cluster token)
         * holding the snapshot's keys. Both ways gitcd makes a cluster from a
         * snapshot use it: spec.bootstrap.restore (the seed of a cluster that
         * never formed) and a disaster recovery from a snapshot (a new seed
         * replacing a cluster that lost quorum). rs->snapshot is an
         * uncompressed file on gitcd's host, already checked
         * (snapstore/restore.h); rs->tool is etcd's restore tool for the
         * cluster's version. All or nothing: a failure or a crash midway
         * leaves the member without data, so it can be tried again. -EEXIST
         * when the member has data already (or runs): it is never restored
         * over, and a caller resuming after a crash takes that as restored
         * earlier. NULL: the target cannot restore, and the reconciler
         * refuses spec.bootstrap.restore and recoveries from a snapshot
         * with its name.
         */
        int (*restore_member)(target *t, const etcd_cluster *c, const membership_plan *p,
                              size_t idx, const target_restore *rs);

        /*
         * The store revision of the data the target holds for member, as
         * etcd's own tool reads it (`tool snapshot status` on the member's
         * member/snap/db, run on gitcd's host: tool is etcdutl, etcdctl for
         * 3.4, of the cluster's version), for a member that is not running
         * (its database is being written while it runs). Asked before a
         * member that a restore was for starts on data gitcd did not just
         * restore (reconciler/restore.h, restore_check_data): data from
         * before the restore has a lower revision than the restore left.
         * 0 with *ret_revision; -ENOENT when the member holds no data (no
         * database); -EBUSY when it runs; -EBADMSG when the tool cannot read
         * the database. Reads only: the member's data is never changed.
         * NULL: the target cannot tell, and such a member is refused a start.
         */
        int (*data_revision)(target *t, const etcd_cluster *c, const char *member, const char *tool,
                             int64_t *ret_revision);

        /*
         * Secrets gitcd itself reads for a cluster (the S3 credentials of
         * spec.snapshots.destination.s3.credentialsSecretRef): write the
         * keys of Secret `name` in the cluster's namespace into a folder on
         * gitcd's host, one file per key with its decoded value (mode 0600,
         * the folder 0700 and replaced whole, so a key removed from the
         * Secret goes), the layout of a Secret mounted in a Pod, and return
         * the folder's path (the caller frees it). -ENOENT when there is no
         * such Secret, -EACCES when gitcd may not read it. NULL: the target
         * has no Secrets; a Secret reference then names a folder a person
         * made on gitcd's host (snapstore/destination.h).
         */
        int (*secret_folder)(target *t, const etcd_cluster *c, const char *name, char **ret_dir);

        /*
         * The writer of a snapshot location in a PersistentVolumeClaim
         * (spec.snapshots.destination.pvc, a pvc restore source; see
         * snapstore/destination.h, pvc_writer): start a Pod gitcd owns that
         * mounts the cluster namespace's claim `claim` (never created,
         * resized or deleted) at `folder` ("" for its root) and serves it
         * with `gitcd snapshot receive --store-dir`, wait until it is Ready,
         * and fill *ret_peer, whose strings *ret_handle owns. One writer per
         * cluster at a time: -EAGAIN, at once and with nothing done, while
         * another one of the cluster is in use (by this process or another
         * sharing the state folder; the message names it); the caller may
         * try again. Writers of the cluster a killed gitcd left are deleted
         * first, by label. writer_stop deletes the Pod and its Secret and
         * frees the handle (and with it the cluster's turn).
         * Both there exactly when caps has TARGET_CAP_PVC_WRITER (else NULL:
         * the target has no PersistentVolumeClaims, and pvc locations are
         * refused at intake).
         */
        int (*writer_start)(target *t, const etcd_cluster *c, const char *claim, const char *folder,
                            void **ret_handle, struct receiver_peer *ret_peer);
        int (*writer_stop)(target *t, const etcd_cluster *c, void *handle);

        /*
         * The message of the calling thread's last failed operation, for a
         * target shared by threads (targets/locked.h). NULL: t->last_error.
         */
        const char *(*last_error)(const target *t);

        /*
         * Adoption of a cluster already running where the members would go;
         * NULL: the target never adopts (a cluster with no records is
         * bootstrapped).
         */
        const target_adopt_ops *adopt;

        /* What the places members run on say about them, for an incident bundle; NULL: nothing. */
        const target_debug_ops *debug;

        /* The preflights of the machines members run on; NULL: the target measures none. */
        const target_machine_ops *machines;
        /* Taking over a cluster another operator runs (spec.adopt); NULL: refused. */
        const target_takeover_ops *takeover;

        void (*free)(target *t);
} target_ops;

struct target {
        const target_ops *ops;
        char *last_error;
};

const char *target_last_error(const target *t);
/* A name a target may use as one path component: not empty, no '/', not starting with '.'. */
bool target_name_is_component(const char *s);
/* Set the message (printf-style) and return err, for `return target_fail(t, -EIO, ...)`. */
int target_fail(target *t, int err, const char *fmt, ...) _printf_(3, 4);
/* Also a macro, so that the static analyzer (which does not follow variadic calls)
 * sees err come back. */
#define target_fail(t, err, ...)                                                                   \
        ({                                                                                         \
                int target_fail_err_ = (err);                                                      \
                (target_fail)((t), target_fail_err_, __VA_ARGS__);                                 \
                target_fail_err_;                                                                  \
        })
void target_free(target *t);

/*
 * Whether the target holds a member of that name (placed, running or not),
 * by its list_members; false when it cannot list them.
 */
bool target_holds_member(target *t, const etcd_cluster *c, const char *name);

/* A target's state folder made (0700) when missing, and its absolute path (allocated). */
int target_state_dir(const char *dir, char **ret_abs);

/*
 * The clusters ("ns/name") a target saw an event for and take_events has
 * not handed out yet, each once: what a target with events keeps between
 * its watch (or process exits) and take_events.
 */
typedef struct target_event_set {
        char **ids;
        size_t n;
} target_event_set;

/* Add id (taken over; freed when already there). */
void target_event_set_add(target_event_set *s, char *id);
/* Hand the ids over (as take_events does) and start empty again. */
void target_event_set_take(target_event_set *s, char ***ret_ids, size_t *ret_n);
void target_event_set_release(target_event_set *s);

/*
 * Ends the wait_event in progress, or the next one to start, at once: for
 * the daemon, when a push asks for a fetch. One wake is pending at most,
 * taken by the first wait it ends. Async-signal-safe (a lock-free atomic),
 * so a signal handler may call it.
 */
void target_wake(void);
/* For wait_event: whether a wake is pending (target_wake_take() also clears it). */
bool target_wake_pending(void);
bool target_wake_take(void);
/*
 * For a thread a target starts to wait for events on its behalf (the
 * watches of targets/kubernetes-servers.c): from now on, this thread's
 * waits neither end on a wake nor take it, which stays for the wait the
 * daemon asked for.
 */
void target_wake_ignore(void);
/*
 * Sleep up to ms, ending early on a wake, which it takes: 1 when a wake
 * ended it, else 0. A wait_event calls it outside the shared lock
 * (target_blocking_begin).
 */
int target_sleep(int64_t ms);

/*
 * gitcd's own client identity toward a cluster: the target's client_tls
 * operation when the cluster has client TLS (render_client_tls), else all
 * three NULL. The one place that asks; the caller frees the strings.
 */
int target_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                      char **ret_key);
DEFINE_TRIVIAL_CLEANUP_FUNC(target *, target_free);

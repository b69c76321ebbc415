/*
 * The state store: gitcd's memory, one SQLite database.
 *
 * It records the source revisions seen, each cluster's desired spec, the
 * target the reconciler has latched, cluster IDs, phases and conditions,
 * members, applied objects, an operations journal (an intent written before
 * every membership or object change, so a restart can see what was in
 * flight) and an append-only audit log. This module is the only one that
 * speaks SQL; callers use the typed records and functions below.
 *
 * Clusters are named "namespace/name". Times are wall-clock milliseconds
 * since the epoch, always passed in by the caller (the clock is injected).
 *
 * Errors: every function that can fail returns 0 (or a count) or a negative
 * errno, and leaves a human message (with the database path and what was
 * being done, never a secret) for state_last_error(). Common ones:
 *   -ENOENT   no database (read-only open) or no such record
 *   -EBUSY    another process held the lock past the busy timeout (5 s)
 *   -ENOSPC   the disk is full (nothing of the failed transaction is kept)
 *   -EFBIG    a file-size limit was hit (same guarantee)
 *   -EBADMSG  the file is not a gitcd database, or it is corrupt
 *   -EROFS    the database or its folder is read-only
 *   -EACCES   permission denied
 *   -EPROTO   the schema is newer than this gitcd, or older in read-only mode
 *
 * Every write runs in a transaction. Callers that need several writes to
 * be atomic (e.g. a journal row and an audit event) wrap them in
 * state_begin() / state_commit(); without that, each call commits alone.
 *
 * A state_db belongs to one thread at a time and must not be used across
 * fork(); open one per process. Any number of processes may open the same
 * file: readers see the last commit and never block the writer (WAL).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct state_db state_db;

typedef enum state_open_mode {
        STATE_OPEN_READ_WRITE, /* creates the file and its parent folder; migrates */
        STATE_OPEN_READ_ONLY,  /* for log/status: creates nothing; -ENOENT when missing */
} state_open_mode;

/* The schema version this gitcd writes (PRAGMA user_version). */
int state_schema_version(void);

/* Open (and in read-write mode create and migrate) the database at path. */
int state_open(const char *path, state_open_mode mode, state_db **ret_db);
/*
 * Read-write open that migrates only up to `version` (1..state_schema_version()).
 * For tests of migrations from earlier schema versions.
 */
int state_open_at_version(const char *path, int version, state_db **ret_db);
void state_close(state_db *db); /* state_close(NULL) is a no-op */
/*
 * Mark this process as a short-lived command (every `gitcd` command but
 * `run`). Its read-write opens then skip PRAGMA quick_check, which reads the
 * whole file (a damaged page still fails, as "corrupt", when it is read;
 * read-only opens, `gitcd log` and `gitcd status` among them, and the daemon
 * still check at open), and its closes leave the WAL to the next opener instead
 * of checkpointing it into the main file (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE:
 * what was committed is already durable in the WAL, and the next commit
 * appends to it instead of restarting it); a close that leaves 64 pages or
 * more checkpoints and empties it, since an opener with no daemon running
 * reads the whole WAL. Set once, before the first open.
 */
void state_set_short_lived(bool on);
const char *state_path(const state_db *db);

/*
 * What this process asked of its state databases since it started, every
 * connection counted (for benchmarks and for tests of what a pass writes):
 * statements run, of those prepared afresh (not from a connection's cache),
 * write transactions (an outermost state_begin() on a read-write handle, or
 * one write statement outside a transaction), of those the ones that changed
 * a row (each costs SQLite a WAL append and an fsync at commit), and the rows
 * changed.
 */
typedef struct state_counters {
        uint64_t statements;
        uint64_t prepared;
        uint64_t transactions;
        uint64_t writes;
        uint64_t changes;
} state_counters;
void state_counters_get(state_counters *ret);

/*
 * The message for the last failed call on this thread ("" if none). It names
 * the database and the operation and is safe to show to a user.
 */
const char *state_last_error(void);

/*
 * Group writes in one transaction (nestable; the outermost commit is
 * durable). On a read-only handle, state_begin() takes a snapshot so that
 * several reads see the same commit.
 */
int state_begin(state_db *db);
int state_commit(state_db *db);
int state_rollback(state_db *db);

/* PRAGMA integrity_check: 0, or -EBADMSG with the first problem in the message. */
int state_check_integrity(state_db *db);

/* ---- source revisions ---------------------------------------------------- */

typedef struct state_revision {
        char *repository; /* URL or path of the source */
        char *ref;        /* "refs/heads/main" */
        char *commit;     /* 40 (or 64) hex digits */
        char *author_name;
        char *author_email;
        char *committer; /* "Name <email>" */
        int64_t commit_time_ms;
        char *message;
        int64_t fetched_ms;
        bool signature_verified;
        char *signature_key; /* fingerprint of the key that verified it, or NULL */
} state_revision;

/* Record a revision (again: updates fetched_ms and signature fields). */
int state_revision_record(state_db *db, const state_revision *rev);
/* Look a revision up by commit id or a unique prefix (>= 4 hex digits). -ENOENT, -EINVAL. */
int state_revision_get(state_db *db, const char *commit_prefix, state_revision **ret_rev);
/* The newest fetched revision of repository/ref; -ENOENT when none. */
int state_revision_latest(state_db *db, const char *repository, const char *ref,
                          state_revision **ret_rev);
void state_revision_free(state_revision *rev);

/* ---- clusters and conditions --------------------------------------------- */

typedef struct state_condition {
        char *type;   /* "Available", "Progressing", "Degraded" */
        char *status; /* "True", "False", "Unknown" */
        char *reason;
        char *message;
        int64_t last_transition_ms;
} state_condition;

typedef struct state_cluster {
        char *name; /* "namespace/name" */
        int64_t created_ms;
        int64_t updated_ms;
        /* desired: what Git says */
        char *desired_json; /* normalized JSON */
        char *desired_hash;
        char *desired_commit;
        int64_t desired_ms;
        int desired_replicas; /* from desired_json spec.replicas; -1 if absent */
        char *desired_version;
        /* latched spec: what the reconciler is working towards */
        char *observed_json;
        char *observed_hash;
        int64_t progress_deadline_ms; /* 0 = none */
        /*
         * Terminal: the latched spec was given up on ("DeadlineExceeded",
         * "BootstrapFailed"), until a new spec is latched. NULL otherwise.
         */
        char *terminal_reason;
        char *terminal_message;
        /* what the reconciler saw */
        char *cluster_id; /* 16 hex digits, or NULL before bootstrap */
        char *phase;      /* "Pending", "Bootstrapping", "Running", "Paused", ... */
        char *version;    /* running etcd version, or NULL */
        char *leader;     /* name of the member that leads, as last observed, or NULL */
        state_condition *conditions;
        size_t n_conditions;
} state_cluster;

/* The spec gitcd works toward: the latched one, else the desired one; NULL when neither. */
const char *state_cluster_spec_json(const state_cluster *sc);

typedef struct state_cluster_list {
        state_cluster **items;
        size_t n;
} state_cluster_list;

/*
 * Record the desired spec from Git. Creates the cluster on first sight.
 * hash may be NULL: the store then uses sha256 of json. Returns 1 when the
 * desired spec changed, 0 when it was already the same. -EINVAL for a name
 * that is not "namespace/name" or json that is not an object.
 */
int state_cluster_set_desired(state_db *db, const char *cluster, const char *json, const char *hash,
                              const char *commit, int64_t now_ms);
/*
 * Record where the cluster's members run: the name of the target that takes
 * its spec in ("local", "kubernetes", "hosts"), for commands that act on a
 * recorded cluster outside `gitcd run` (gitcd snapshot save). Unchanged
 * writes nothing. -ENOENT for no cluster.
 */
int state_cluster_set_target(state_db *db, const char *cluster, const char *target);
/* The recorded target's name (NULL when none was recorded, *ret NULL). -ENOENT. */
int state_cluster_target(state_db *db, const char *cluster, char **ret);
/*
 * The TLS surfaces the cluster is being switched off on, the journal of
 * reconciler/tlsswitch.c ("client", "peer" or "client,peer"; *ret NULL:
 * none). Setting NULL ends the switch.
 */
int state_cluster_tls_off(state_db *db, const char *cluster, char **ret);
int state_cluster_set_tls_off(state_db *db, const char *cluster, const char *surfaces);
/*
 * Latch the target (observed spec) with its progress deadline (0 = none).
 * json NULL with a hash: the latched spec stays and only its deadline is set,
 * when hash is the latched one's (-ENOENT otherwise). -ENOENT.
 */
int state_cluster_latch(state_db *db, const char *cluster, const char *json, const char *hash,
                        int64_t deadline_ms, int64_t now_ms);
/* Record the etcd cluster ID (16 hex digits). -EINVAL, -ENOENT. */
int state_cluster_set_id(state_db *db, const char *cluster, const char *cluster_id, int64_t now_ms);
/* Record the phase; an unchanged one writes nothing. -ENOENT. */
int state_cluster_set_phase(state_db *db, const char *cluster, const char *phase, int64_t now_ms);
int state_cluster_set_version(state_db *db, const char *cluster, const char *version,
                              int64_t now_ms);
/* Record (reason non-NULL) or clear (NULL, NULL) the terminal state. -EINVAL, -ENOENT. */
int state_cluster_set_terminal(state_db *db, const char *cluster, const char *reason,
                               const char *message, int64_t now_ms);
/* Record the member that leads (NULL: none known). -ENOENT. */
int state_cluster_set_leader(state_db *db, const char *cluster, const char *member, int64_t now_ms);
/*
 * Set a condition. lastTransitionTime becomes now_ms only when the status
 * changes (or the condition is new); reason and message always update; a
 * condition that is already so writes nothing (no write transaction).
 * Returns 1 when the status changed, 0 otherwise. -ENOENT for no cluster.
 */
int state_cluster_set_condition(state_db *db, const char *cluster, const char *type,
                                const char *status, const char *reason, const char *message,
                                int64_t now_ms);
/* Forget a cluster and everything recorded about it except the audit log. */
int state_cluster_delete(state_db *db, const char *cluster);
int state_cluster_get(state_db *db, const char *cluster, state_cluster **ret_cluster);
/*
 * state_cluster_get() without the specs' texts (desired_json and
 * observed_json NULL, desired_replicas -1, desired_version NULL): a
 * reconciler pass whose latched spec is current needs only the hashes, and
 * reading and copying the texts (with two fields read out of the desired
 * one) was most of what reading a cluster cost. state_cluster_get_specs()
 * fills the texts in, with the hashes they go with, when they are needed.
 */
int state_cluster_get_brief(state_db *db, const char *cluster, state_cluster **ret_cluster);
int state_cluster_get_specs(state_db *db, state_cluster *c);
/*
 * The hash of the spec in force (the latched one, else the desired one;
 * NULL when neither), without reading the rest: to tell cheaply whether
 * it changed since it was last looked at. -ENOENT.
 */
int state_cluster_spec_hash(state_db *db, const char *cluster, char **ret_hash);
/* Every cluster, sorted by name, with conditions. */
int state_cluster_list_all(state_db *db, state_cluster_list *ret_list);
void state_cluster_free(state_cluster *c);
void state_cluster_list_release(state_cluster_list *l);
/* "namespace/name" with both parts non-empty DNS-ish names. */
bool state_cluster_name_valid(const char *cluster);
/* 16 lowercase hex digits (an etcd cluster or member ID). */
bool state_hex16_valid(const char *s);
/* A commit id or a prefix of one, as the store is asked for them: 4 to 64 hex digits, any case. */
bool state_commit_prefix_valid(const char *s);

/* ---- members ------------------------------------------------------------- */

typedef struct state_member {
        char *cluster;
        char *name; /* "main-0" */
        int ordinal;
        char *member_id; /* 16 hex digits once etcd assigned it, else NULL */
        char *peer_url;
        char *client_url;
        bool learner;
        char *version;
        bool seed;
        bool dormant;     /* stopped on purpose (pause): kept with its data */
        bool initialized; /* has started once and joined etcd (listed with its name) */
        char *state;      /* last observed: absent|starting|ready|crashed|data-lost, or unknown */
        /*
         * While state is "unknown" (the target could not report the member:
         * its machine does not answer): the state last observed, when it
         * was last observed (0 when gitcd never saw it), and why it is
         * unknown now (the target's error, naming the machine).
         */
        char *seen_state;
        int64_t seen_ms;
        char *unreachable;
        char *initial_cluster;       /* --initial-cluster it was created with */
        char *initial_cluster_state; /* "new" (seed) | "existing"; NULL: existing */
        char *config_hash;           /* member_plan.config_hash it was last started with, or NULL */
        /*
         * The data identity the target reported once the member joined etcd
         * (a PVC UID, the id in a data directory's marker file); NULL until
         * then. A target later reporting another one, or none, lost its data.
         */
        char *data_identity;
        char *runtime_json; /* a JSON object: only what an older gitcd kept there ("command") */
        int64_t created_ms;
        int64_t removed_ms; /* 0 while a member */
} state_member;

typedef struct state_member_list {
        state_member **items;
        size_t n;
} state_member_list;

/*
 * Insert or update the member (cluster, name). created_ms is kept from the
 * first write (now_ms then); removed_ms is written as given.
 * -EINVAL (bad member_id or runtime_json), -ENOENT (no cluster).
 */
int state_member_put(state_db *db, const state_member *m, int64_t now_ms);
int state_member_mark_removed(state_db *db, const char *cluster, const char *name, int64_t now_ms);
int state_member_get(state_db *db, const char *cluster, const char *name,
                     state_member **ret_member);
/* Members by ordinal; removed ones only with include_removed. */
int state_member_list_for(state_db *db, const char *cluster, bool include_removed,
                          state_member_list *ret_list);
void state_member_free(state_member *m);
void state_member_list_release(state_member_list *l);

/* ---- certificates (tls.provider auto) ------------------------------------ */

typedef struct state_cert {
        char *member;  /* "" for a certificate every member shares */
        char *surface; /* "client", "peer", "operator" */
        int64_t not_after_ms;
        char *serial; /* upper-case hex */
} state_cert;

typedef struct state_cert_list {
        state_cert **items;
        size_t n;
} state_cert_list;

/*
 * Make the cluster's recorded certificates exactly v[0..n) (the serial
 * says whether one changed). Returns 1 when something changed, 0 when the
 * records were already these, -ENOENT for an unknown cluster, or -errno.
 */
int state_certs_replace(state_db *db, const char *cluster, const state_cert *v, size_t n);
/* The recorded certificates, by member then surface. */
int state_certs_list(state_db *db, const char *cluster, state_cert_list *ret_list);
void state_cert_list_release(state_cert_list *l);

/* ---- applied objects ----------------------------------------------------- */

typedef struct state_object {
        char *cluster;
        char *kind;
        char *namespace_;
        char *name;
        char *hash; /* content hash of what was applied */
        char *commit;
        int64_t applied_ms;
} state_object;

typedef struct state_object_list {
        state_object **items;
        size_t n;
} state_object_list;

int state_object_record(state_db *db, const state_object *o);
/* -ENOENT when it was not recorded. */
int state_object_forget(state_db *db, const char *cluster, const char *kind, const char *namespace_,
                        const char *name);
int state_object_list_for(state_db *db, const char *cluster, state_object_list *ret_list);
void state_object_free(state_object *o);
void state_object_list_release(state_object_list *l);

/* ---- operations journal -------------------------------------------------- */

typedef enum state_op_state {
        STATE_OP_PENDING,
        STATE_OP_DONE,
        STATE_OP_FAILED,
        STATE_OP_ABANDONED,
} state_op_state;

const char *state_op_state_to_string(state_op_state s);

typedef struct state_op {
        int64_t id;
        char *cluster;
        char *kind;    /* "member.add-learner", "object.apply", ... */
        char *subject; /* "main-3" */
        char *payload_json;
        state_op_state state;
        int64_t started_ms;
        int64_t finished_ms; /* 0 while pending */
        char *error;
} state_op;

typedef struct state_op_list {
        state_op **items;
        size_t n;
} state_op_list;

/* Write the intent (state pending) and return its id. payload_json may be NULL. */
int state_op_begin(state_db *db, const char *cluster, const char *kind, const char *subject,
                   const char *payload_json, int64_t now_ms, int64_t *ret_id);
/*
 * pending -> done | failed | abandoned (error may be NULL). -ENOENT for no
 * such operation, -EALREADY when it is no longer pending, -EINVAL for
 * STATE_OP_PENDING.
 */
int state_op_finish(state_db *db, int64_t id, state_op_state to, const char *error, int64_t now_ms);
int state_op_get(state_db *db, int64_t id, state_op **ret_op);
/* Pending operations (oldest first); cluster NULL = every cluster. */
int state_op_list_pending(state_db *db, const char *cluster, state_op_list *ret_list);
/* Mark every pending operation of a cluster (NULL = all) abandoned; returns the count. */
int state_op_abandon_pending(state_db *db, const char *cluster, const char *why, int64_t now_ms);
void state_op_free(state_op *op);
void state_op_list_release(state_op_list *l);

/* ---- audit log ----------------------------------------------------------- */

typedef struct state_audit_event {
        int64_t id; /* set by the store */
        int64_t time_ms;
        char *cluster;
        char *commit;
        char *author; /* "Name <email>" of the commit's author */
        char *action; /* "member.add-learner", "spec.rejected", "deadline.exceeded", ... */
        char *reason;
        char *before_json; /* a JSON value (summary), or NULL */
        char *after_json;
        char *outcome; /* "success", "failure", "rejected", ... */
        int64_t duration_ms;
} state_audit_event;

typedef struct state_audit_list {
        state_audit_event **items;
        size_t n;
} state_audit_list;

/*
 * Append an event (the log is append-only: the database refuses UPDATE and
 * DELETE outside state_audit_prune()). before/after must be JSON (or NULL);
 * values of keys that look secret (password, token, secret, credential,
 * *key) and every PEM private key block in any field are replaced by
 * "[redacted]", and control characters in the text fields are escaped
 * (util/escape.h), before storing: what a commit holds never stops an event
 * from being written. -EINVAL for invalid JSON or a missing action. Every
 * failure is also counted in the database apart from the audit table
 * (state_audit_failures_get()) and in the process
 * (state_audit_failures_in_process()). ret_id may be NULL.
 */
int state_audit_append(state_db *db, const state_audit_event *ev, int64_t *ret_id);

typedef struct state_audit_failures {
        int64_t count;     /* appends that failed, ever; 0 = none */
        int64_t last_ms;   /* when the last one failed */
        char *last_action; /* the action of the event lost last */
        char *last_error;  /* why */
} state_audit_failures;

/* The failed appends recorded in db (count 0 when there were none). */
int state_audit_failures_get(state_db *db, state_audit_failures *ret);
void state_audit_failures_release(state_audit_failures *f);
/* Appends that failed in this process so far, on any database. */
unsigned state_audit_failures_in_process(void);

typedef struct state_audit_filter {
        const char *cluster;       /* exact "ns/name", or NULL */
        int64_t since_ms;          /* 0 = all */
        const char *commit_prefix; /* >= 4 hex digits, or NULL */
        const char *action;        /* exact, or NULL */
        size_t limit;              /* 0 = no limit */
        int64_t after_id;          /* only events appended after the one with this id; 0 = all */
} state_audit_filter;

/* Events matching filter, newest first. -EINVAL for a bad commit prefix. */
int state_audit_query(state_db *db, const state_audit_filter *filter, state_audit_list *ret_list);
/*
 * Retention: delete events older than now_ms - max_age_ms (max_age_ms 0 =
 * no age limit), then the oldest beyond max_rows (0 = no row limit).
 * Returns the number deleted.
 */
int state_audit_prune(state_db *db, int64_t max_age_ms, size_t max_rows, int64_t now_ms);
void state_audit_event_free(state_audit_event *ev);
void state_audit_list_release(state_audit_list *l);

/*
 * The scrubbing applied by state_audit_append, exposed for callers that
 * want to show a summary elsewhere: returns newly allocated compact JSON,
 * or NULL when json is not valid JSON.
 */
char *state_scrub_json(const char *json);
/* True for a key name that looks like it holds a secret. */
bool state_key_looks_secret(const char *key);
/* True when text holds a PEM private key block. */
bool state_text_has_private_key(const char *text);
/* A copy of text with every PEM private key block replaced by "[redacted]"; NULL for NULL. */
char *state_redact_private_keys(const char *text);

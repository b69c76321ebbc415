/*
 * The schema of the state database, as numbered migrations.
 *
 * Migration i takes PRAGMA user_version from i to i + 1. db.c applies each
 * one in its own transaction together with the version bump, so a database
 * is always exactly at one version. Migrations are append-only: a released
 * step is never edited; a change to the schema is a new step at the end
 * (tests/state/test-migrations.c opens a database created at every earlier
 * version). docs/state.md describes the tables for people using sqlite3.
 *
 * The audit log is append-only by trigger: UPDATE always fails, and DELETE
 * fails unless the row's id is covered by a row in audit_retention, which
 * state_audit_prune() inserts and removes inside its own transaction (so a
 * grant is never visible to anyone else). ids come from AUTOINCREMENT and
 * are never reused, so "oldest" is "lowest id".
 */
#include "state/internal.h"

/* The columns of the snapshots table as migration 9 made it (copied by migration 15). */
#define SNAPSHOTS_V9_COLUMNS                                                                       \
        "id, cluster, trigger, slot_ms, started_ms, finished_ms, result, error, member, "          \
        "revision, size, db_size, sha256, compression, etcd_version, destination, key, "           \
        "location, duration_ms, expired_ms, deleted_ms, delete_error"

const char *const state_migrations[] = {
    /* 1: revisions, clusters, conditions, members */
    "PRAGMA application_id = 1734964323;\n" /* 0x67697463 "gitc" */
    "CREATE TABLE revisions (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  repository TEXT NOT NULL,\n"
    "  ref TEXT NOT NULL,\n"
    "  commit_id TEXT NOT NULL,\n"
    "  author_name TEXT,\n"
    "  author_email TEXT,\n"
    "  committer TEXT,\n"
    "  commit_time_ms INTEGER,\n"
    "  message TEXT,\n"
    "  fetched_ms INTEGER NOT NULL,\n"
    "  signature_verified INTEGER NOT NULL DEFAULT 0,\n"
    "  signature_key TEXT,\n"
    "  UNIQUE (repository, ref, commit_id)\n"
    ");\n"
    "CREATE INDEX revisions_commit ON revisions (commit_id);\n"
    "CREATE TABLE clusters (\n"
    "  name TEXT PRIMARY KEY,\n"
    "  created_ms INTEGER NOT NULL,\n"
    "  updated_ms INTEGER NOT NULL,\n"
    "  desired_json TEXT,\n"
    "  desired_hash TEXT,\n"
    "  desired_commit TEXT,\n"
    "  desired_ms INTEGER,\n"
    "  observed_json TEXT,\n"
    "  observed_hash TEXT,\n"
    "  progress_deadline_ms INTEGER,\n"
    "  cluster_id TEXT CHECK (cluster_id IS NULL OR (length(cluster_id) = 16\n"
    "                         AND cluster_id NOT GLOB '*[^0-9a-f]*')),\n"
    "  phase TEXT,\n"
    "  version TEXT\n"
    ");\n"
    "CREATE TABLE conditions (\n"
    "  cluster TEXT NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,\n"
    "  type TEXT NOT NULL,\n"
    "  status TEXT NOT NULL CHECK (status IN ('True', 'False', 'Unknown')),\n"
    "  reason TEXT,\n"
    "  message TEXT,\n"
    "  last_transition_ms INTEGER NOT NULL,\n"
    "  PRIMARY KEY (cluster, type)\n"
    ");\n"
    "CREATE TABLE members (\n"
    "  cluster TEXT NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,\n"
    "  name TEXT NOT NULL,\n"
    "  ordinal INTEGER NOT NULL,\n"
    "  member_id TEXT CHECK (member_id IS NULL OR (length(member_id) = 16\n"
    "                        AND member_id NOT GLOB '*[^0-9a-f]*')),\n"
    "  peer_url TEXT,\n"
    "  client_url TEXT,\n"
    "  learner INTEGER NOT NULL DEFAULT 0,\n"
    "  version TEXT,\n"
    "  seed INTEGER NOT NULL DEFAULT 0,\n"
    "  dormant INTEGER NOT NULL DEFAULT 0,\n"
    "  state TEXT,\n"
    "  runtime TEXT CHECK (runtime IS NULL OR json_valid(runtime)),\n"
    "  created_ms INTEGER NOT NULL,\n"
    "  removed_ms INTEGER,\n"
    "  PRIMARY KEY (cluster, name)\n"
    ");\n",

    /* 2: the operations journal and the append-only audit log */
    "CREATE TABLE operations (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  kind TEXT NOT NULL,\n"
    "  subject TEXT,\n"
    "  payload TEXT CHECK (payload IS NULL OR json_valid(payload)),\n"
    "  state TEXT NOT NULL DEFAULT 'pending'\n"
    "        CHECK (state IN ('pending', 'done', 'failed', 'abandoned')),\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER,\n"
    "  error TEXT\n"
    ");\n"
    "CREATE INDEX operations_pending ON operations (cluster) WHERE state = 'pending';\n"
    "CREATE TRIGGER operations_final BEFORE UPDATE ON operations\n"
    "  WHEN OLD.state <> 'pending'\n"
    "  BEGIN SELECT RAISE(ABORT, 'operation already finished'); END;\n"
    "CREATE TABLE audit (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  time_ms INTEGER NOT NULL,\n"
    "  cluster TEXT,\n"
    "  commit_id TEXT,\n"
    "  author TEXT,\n"
    "  action TEXT NOT NULL,\n"
    "  reason TEXT,\n"
    "  before TEXT CHECK (before IS NULL OR json_valid(before)),\n"
    "  after TEXT CHECK (after IS NULL OR json_valid(after)),\n"
    "  outcome TEXT,\n"
    "  duration_ms INTEGER\n"
    ");\n"
    "CREATE INDEX audit_time ON audit (time_ms);\n"
    "CREATE INDEX audit_cluster ON audit (cluster, id);\n"
    "CREATE INDEX audit_commit ON audit (commit_id);\n"
    "CREATE TABLE audit_retention (upto INTEGER NOT NULL);\n"
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit\n"
    "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;\n"
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit\n"
    "  WHEN NOT EXISTS (SELECT 1 FROM audit_retention WHERE OLD.id <= upto)\n"
    "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;\n",

    /* 3: applied objects (the inventory used for pruning) */
    "CREATE TABLE objects (\n"
    "  cluster TEXT NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,\n"
    "  kind TEXT NOT NULL,\n"
    "  namespace TEXT NOT NULL DEFAULT '',\n"
    "  name TEXT NOT NULL,\n"
    "  hash TEXT NOT NULL,\n"
    "  commit_id TEXT,\n"
    "  applied_ms INTEGER NOT NULL,\n"
    "  PRIMARY KEY (cluster, kind, namespace, name)\n"
    ");\n"
    "CREATE INDEX audit_action ON audit (action, id);\n",

    /* 4: the member that leads, as the reconciler last saw it */
    "ALTER TABLE clusters ADD COLUMN leader TEXT;\n",

    /* 5: audit events that could not be written (one row: a count and the last one),
     * kept apart from the audit table so that a broken append still leaves a trace */
    "CREATE TABLE audit_failures (\n"
    "  id INTEGER PRIMARY KEY CHECK (id = 1),\n"
    "  count INTEGER NOT NULL,\n"
    "  last_ms INTEGER NOT NULL,\n"
    "  last_action TEXT,\n"
    "  last_error TEXT\n"
    ");\n",

    /*
     * 6: a terminal state stored as such (the reason the latched spec was
     * given up on), instead of recovered from the Progressing condition;
     * a cluster already terminal keeps its state across the upgrade.
     */
    "ALTER TABLE clusters ADD COLUMN terminal_reason TEXT;\n"
    "ALTER TABLE clusters ADD COLUMN terminal_message TEXT;\n"
    "UPDATE clusters SET\n"
    "  terminal_reason = (SELECT reason FROM conditions c WHERE c.cluster = clusters.name\n"
    "    AND c.type = 'Progressing' AND c.status = 'False'\n"
    "    AND c.reason IN ('DeadlineExceeded', 'BootstrapFailed')),\n"
    "  terminal_message = (SELECT message FROM conditions c WHERE c.cluster = clusters.name\n"
    "    AND c.type = 'Progressing' AND c.status = 'False'\n"
    "    AND c.reason IN ('DeadlineExceeded', 'BootstrapFailed'))\n"
    "WHERE progress_deadline_ms > 0;\n",

    /*
     * 7: the member record in real columns: the initial cluster and state a
     * member was created with, the config hash it was last started with,
     * and whether it has joined etcd. They move out of the runtime JSON,
     * which keeps only what an older gitcd wrote there (its command line).
     */
    "ALTER TABLE members ADD COLUMN initial_cluster TEXT;\n"
    "ALTER TABLE members ADD COLUMN initial_cluster_state TEXT\n"
    "  CHECK (initial_cluster_state IS NULL OR initial_cluster_state IN ('new', 'existing'));\n"
    "ALTER TABLE members ADD COLUMN config_hash TEXT;\n"
    "ALTER TABLE members ADD COLUMN initialized INTEGER NOT NULL DEFAULT 0;\n"
    "UPDATE members SET\n"
    "  initial_cluster = json_extract(runtime, '$.initial_cluster'),\n"
    "  initial_cluster_state = CASE json_extract(runtime, '$.initial_cluster_state')\n"
    "    WHEN 'new' THEN 'new' WHEN 'existing' THEN 'existing' END,\n"
    "  config_hash = json_extract(runtime, '$.config_hash'),\n"
    "  runtime = json_remove(runtime, '$.initial_cluster', '$.initial_cluster_state',\n"
    "                        '$.config_hash')\n"
    "WHERE runtime IS NOT NULL AND json_valid(runtime);\n"
    "UPDATE members SET initialized = 1 WHERE member_id IS NOT NULL AND state IN\n"
    "  ('starting', 'ready', 'stopped', 'crashed', 'crash-loop', 'data-lost');\n",

    /* 8: the queue of outgoing notifications (notify-queue.c) */
    "CREATE TABLE notifications (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  webhook TEXT NOT NULL,\n"
    "  url TEXT NOT NULL,\n"
    "  event TEXT NOT NULL,\n"
    "  cluster TEXT,\n"
    "  severity TEXT NOT NULL,\n"
    "  payload TEXT NOT NULL,\n"
    "  created_ms INTEGER NOT NULL,\n"
    "  expires_ms INTEGER NOT NULL,\n"
    "  next_attempt_ms INTEGER NOT NULL,\n"
    "  attempts INTEGER NOT NULL DEFAULT 0,\n"
    "  last_error TEXT,\n"
    "  delivered_ms INTEGER,\n"
    "  expired_ms INTEGER\n"
    ");\n"
    "CREATE INDEX notifications_pending ON notifications (next_attempt_ms)\n"
    "  WHERE delivered_ms IS NULL AND expired_ms IS NULL;\n",

    /* 9: snapshot records (state/snapshots.c); not tied to clusters: backups outlive them */
    "CREATE TABLE snapshots (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  trigger TEXT NOT NULL CHECK (trigger IN ('manual', 'schedule')),\n"
    "  slot_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER,\n"
    "  result TEXT NOT NULL CHECK (result IN ('running', 'succeeded', 'failed')),\n"
    "  error TEXT,\n"
    "  member TEXT,\n"
    "  revision INTEGER,\n"
    "  size INTEGER,\n"
    "  db_size INTEGER,\n"
    "  sha256 TEXT,\n"
    "  compression TEXT,\n"
    "  etcd_version TEXT,\n"
    "  destination TEXT,\n"
    "  key TEXT,\n"
    "  location TEXT,\n"
    "  duration_ms INTEGER,\n"
    "  expired_ms INTEGER,\n"
    "  deleted_ms INTEGER,\n"
    "  delete_error TEXT,\n"
    "  CHECK (result <> 'succeeded' OR (key IS NOT NULL AND length(sha256) = 64))\n"
    ");\n"
    "CREATE INDEX snapshots_cluster ON snapshots (cluster, started_ms);\n"
    "CREATE TRIGGER snapshots_final BEFORE UPDATE OF result ON snapshots\n"
    "  WHEN OLD.result <> 'running'\n"
    "  BEGIN SELECT RAISE(ABORT, 'snapshot record already finished'); END;\n",

    /*
     * 10: the leaf certificates gitcd issued (tls.provider auto), as the
     * reconciler last observed them, for `gitcd status`. member '' is a
     * certificate every member shares (a Kubernetes Secret).
     */
    "CREATE TABLE certificates (\n"
    "  cluster TEXT NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,\n"
    "  member TEXT NOT NULL,\n"
    "  surface TEXT NOT NULL,\n"
    "  not_after_ms INTEGER NOT NULL,\n"
    "  serial TEXT NOT NULL,\n"
    "  PRIMARY KEY (cluster, member, surface)\n"
    ");\n",

    /*
     * 11: a member's data identity (a PVC UID, the id in its data
     * directory's marker), recorded once it joined etcd; targets report the
     * one they observe and the reconciler compares. Members recorded before
     * get theirs at the next observation.
     */
    "ALTER TABLE members ADD COLUMN data_identity TEXT;\n",
    /*
     * 12: maintenance runs (state/maintenance.c): one row per defragmentation
     * run, journaling the members done so far so a restart resumes it.
     */
    "CREATE TABLE maintenance_runs (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  trigger TEXT NOT NULL\n"
    "    CHECK (trigger IN ('schedule', 'free-space', 'quota', 'nospace')),\n"
    "  slot_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER,\n"
    "  result TEXT NOT NULL CHECK (result IN ('running', 'succeeded', 'failed')),\n"
    "  error TEXT,\n"
    "  members_done TEXT NOT NULL DEFAULT '',\n"
    "  leader TEXT,\n"
    "  compact_revision INTEGER NOT NULL DEFAULT 0,\n"
    "  disarmed INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "CREATE INDEX maintenance_runs_cluster ON maintenance_runs (cluster, started_ms);\n"
    "CREATE TRIGGER maintenance_runs_final BEFORE UPDATE ON maintenance_runs\n"
    "  WHEN OLD.result <> 'running'\n"
    "  BEGIN SELECT RAISE(ABORT, 'maintenance run already finished'); END;\n",
    /*
     * 13: disaster recoveries (state/recovery.c): one running per cluster, a
     * spec token consumed once.
     */
    "CREATE TABLE recoveries (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  source_kind TEXT NOT NULL CHECK (source_kind IN ('member', 'snapshot')),\n"
    "  source TEXT NOT NULL,\n"
    "  token TEXT,\n"
    "  requested_by TEXT,\n"
    "  commit_id TEXT,\n"
    "  requested_ms INTEGER NOT NULL,\n"
    "  phase TEXT NOT NULL,\n"
    "  seed TEXT,\n"
    "  aside TEXT,\n"
    "  revision INTEGER NOT NULL DEFAULT 0,\n"
    "  raft_index INTEGER NOT NULL DEFAULT 0,\n"
    "  result TEXT NOT NULL CHECK (result IN ('running', 'succeeded', 'refused', 'failed')),\n"
    "  error TEXT,\n"
    "  finished_ms INTEGER,\n"
    "  cleaned_ms INTEGER\n"
    ");\n"
    "CREATE UNIQUE INDEX recoveries_running ON recoveries (cluster) WHERE result = 'running';\n"
    "CREATE UNIQUE INDEX recoveries_token ON recoveries (cluster, token) WHERE token IS NOT NULL;\n"
    "CREATE TABLE recovery_assessments (\n"
    "  cluster TEXT PRIMARY KEY,\n"
    "  observed_ms INTEGER NOT NULL,\n"
    "  json TEXT NOT NULL\n"
    ");\n",
    /*
     * 14: CA rotations (state/carotate.c): one row per rotateCA token, the
     * running one holding its phase and the members done in it.
     */
    "CREATE TABLE ca_rotations (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  token TEXT NOT NULL,\n"
    "  phase INTEGER NOT NULL CHECK (phase BETWEEN 0 AND 3),\n"
    "  members_done TEXT NOT NULL DEFAULT '',\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  phase_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  result TEXT NOT NULL CHECK (result IN ('running', 'succeeded', 'skipped'))\n"
    ");\n"
    "CREATE UNIQUE INDEX ca_rotations_token ON ca_rotations (cluster, token);\n"
    "CREATE UNIQUE INDEX ca_rotations_running ON ca_rotations (cluster) WHERE result = "
    "'running';\n",
    /*
     * 15: declared one-off snapshots (cozystack EtcdSnapshot, improbable
     * EtcdBackup; state/snapshots.c): a request per document version, taken
     * at most once (snapshot_id, set in the transaction that begins the
     * record); snapshot records gain the trigger 'declared' and the document
     * that asked (declared_by), so the snapshots table is rebuilt with the
     * wider CHECK.
     */
    "CREATE TABLE snapshots_v15 (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  trigger TEXT NOT NULL CHECK (trigger IN ('manual', 'schedule', 'declared')),\n"
    "  slot_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER,\n"
    "  result TEXT NOT NULL CHECK (result IN ('running', 'succeeded', 'failed')),\n"
    "  error TEXT,\n"
    "  member TEXT,\n"
    "  revision INTEGER,\n"
    "  size INTEGER,\n"
    "  db_size INTEGER,\n"
    "  sha256 TEXT,\n"
    "  compression TEXT,\n"
    "  etcd_version TEXT,\n"
    "  destination TEXT,\n"
    "  key TEXT,\n"
    "  location TEXT,\n"
    "  duration_ms INTEGER,\n"
    "  expired_ms INTEGER,\n"
    "  deleted_ms INTEGER,\n"
    "  delete_error TEXT,\n"
    "  declared_by TEXT,\n"
    "  CHECK (result <> 'succeeded' OR (key IS NOT NULL AND length(sha256) = 64))\n"
    ");\n"
    "INSERT INTO snapshots_v15 (" SNAPSHOTS_V9_COLUMNS ")\n"
    "  SELECT " SNAPSHOTS_V9_COLUMNS " FROM snapshots;\n"
    "DROP TABLE snapshots;\n"
    "ALTER TABLE snapshots_v15 RENAME TO snapshots;\n"
    "CREATE INDEX snapshots_cluster ON snapshots (cluster, started_ms);\n"
    "CREATE TRIGGER snapshots_final BEFORE UPDATE OF result ON snapshots\n"
    "  WHEN OLD.result <> 'running'\n"
    "  BEGIN SELECT RAISE(ABORT, 'snapshot record already finished'); END;\n"
    "CREATE TABLE snapshot_requests (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  object TEXT NOT NULL,\n"
    "  identity TEXT NOT NULL,\n"
    "  destination_json TEXT,\n"
    "  seen_ms INTEGER NOT NULL,\n"
    "  withdrawn_ms INTEGER,\n"
    "  snapshot_id INTEGER,\n"
    "  UNIQUE (cluster, object, identity)\n"
    ");\n"
    "CREATE INDEX snapshot_requests_pending ON snapshot_requests (cluster, id)\n"
    "  WHERE snapshot_id IS NULL AND withdrawn_ms IS NULL;\n",
    /*
     * 16: the target a cluster's members run on ("local", "kubernetes",
     * "hosts"), recorded when its spec is taken in, so that commands acting
     * on a recorded cluster (gitcd snapshot save) open the same target.
     */
    "ALTER TABLE clusters ADD COLUMN target TEXT;\n",
    /*
     * 17: the TLS surfaces a running cluster is being switched off on
     * ("client", "peer", "client,peer"; reconciler/tlsswitch.c): its members
     * keep their certificates until every one of them moved to plain http.
     */
    "ALTER TABLE clusters ADD COLUMN tls_off TEXT;\n",
    /*
     * 18: restore drills (snapshots/drill.c): one row per drill of a
     * snapshot, written running before anything is fetched and finished
     * once, never deleted (the metrics count them); and the keys a
     * snapshot's member held at its revision, what a drill compares with
     * once the live cluster compacted that revision away.
     */
    "ALTER TABLE snapshots ADD COLUMN key_count INTEGER;\n"
    "CREATE TABLE snapshot_drills (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  snapshot_id INTEGER NOT NULL,\n"
    "  cluster TEXT NOT NULL,\n"
    "  trigger TEXT NOT NULL CHECK (trigger IN ('snapshot', 'schedule', 'manual')),\n"
    "  slot_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER,\n"
    "  result TEXT NOT NULL\n"
    "    CHECK (result IN ('running', 'verified', 'verify-failed', 'unverified')),\n"
    "  method TEXT,\n"
    "  message TEXT,\n"
    "  revision INTEGER,\n"
    "  key_count INTEGER,\n"
    "  restore_ms INTEGER,\n"
    "  duration_ms INTEGER\n"
    ");\n"
    "CREATE INDEX snapshot_drills_snapshot ON snapshot_drills (snapshot_id, id);\n"
    "CREATE INDEX snapshot_drills_cluster ON snapshot_drills (cluster, id);\n"
    "CREATE TRIGGER snapshot_drills_final BEFORE UPDATE ON snapshot_drills\n"
    "  WHEN OLD.result <> 'running'\n"
    "  BEGIN SELECT RAISE(ABORT, 'drill record already finished'); END;\n",
    /*
     * 19: the intake's verdicts (state/verdicts.h): clusters a source defines
     * that the operator's policy refuses, or whose change waits for
     * approvals; a row per source and cluster, gone once it is taken in.
     */
    "CREATE TABLE intake_verdicts (\n"
    "  source TEXT NOT NULL,\n"
    "  cluster TEXT NOT NULL,\n"
    "  verdict TEXT NOT NULL CHECK (verdict IN ('refused', 'held')),\n"
    "  message TEXT NOT NULL,\n"
    "  commit_id TEXT,\n"
    "  time_ms INTEGER NOT NULL,\n"
    "  PRIMARY KEY (source, cluster)\n"
    ");\n",
    /*
     * 20: the restores of a snapshot into a cluster (state/restores.c):
     * spec.bootstrap.restore and recoveries from a snapshot, each with the
     * revision bump it was made with (decided once, before the first member
     * is restored, so every member gets the same) and the revision the
     * restored data starts at, which a member that the restore was for must
     * hold before it starts; and the bump a recovery was asked for
     * (`gitcd recover --bump-revision`, spec.recovery.bumpRevision).
     */
    "CREATE TABLE restores (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL REFERENCES clusters (name) ON DELETE CASCADE,\n"
    "  origin TEXT NOT NULL CHECK (origin IN ('bootstrap', 'recovery')),\n"
    "  recovery_id INTEGER,\n"
    "  source TEXT NOT NULL,\n"
    "  snapshot_revision INTEGER NOT NULL,\n"
    "  bump INTEGER NOT NULL DEFAULT 0 CHECK (bump >= 0),\n"
    "  sizing TEXT,\n"
    "  revision INTEGER NOT NULL,\n"
    "  members TEXT NOT NULL,\n"
    "  recorded_ms INTEGER NOT NULL,\n"
    "  CHECK ((origin = 'recovery') = (recovery_id IS NOT NULL))\n"
    ");\n"
    "CREATE UNIQUE INDEX restores_bootstrap ON restores (cluster) WHERE origin = 'bootstrap';\n"
    "CREATE UNIQUE INDEX restores_recovery ON restores (recovery_id) WHERE recovery_id IS NOT "
    "NULL;\n"
    "CREATE INDEX restores_cluster ON restores (cluster, id);\n"
    "ALTER TABLE recoveries ADD COLUMN bump_revision TEXT;\n",
    /*
     * 21: the commit a queued commit status is about: its URL is built again
     * from the configuration in force when it is sent (ops/notify.c), never
     * taken from the row, so a forge API moved elsewhere gets no retries.
     */
    "ALTER TABLE notifications ADD COLUMN commit_id TEXT;\n",
    /*
     * 22: the proof that a cluster's members hold the same data
     * (state/consistency.c): the last cross-member check of each cluster
     * and the freeze a disagreement (or etcd's CORRUPT alarm) puts on it;
     * and the repairs a person asked for (`gitcd repair`, spec.repair),
     * one running per cluster, a spec token consumed once.
     */
    "CREATE TABLE consistency (\n"
    "  cluster TEXT PRIMARY KEY,\n"
    "  checked_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  revision INTEGER NOT NULL DEFAULT 0,\n"
    "  compact_revision INTEGER NOT NULL DEFAULT 0,\n"
    "  verdict TEXT,\n"
    "  hashes TEXT,\n"
    "  minority TEXT,\n"
    "  duration_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  attempt_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  attempt_error TEXT,\n"
    "  due INTEGER NOT NULL DEFAULT 0,\n"
    "  frozen_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  frozen_cause TEXT,\n"
    "  frozen_message TEXT,\n"
    "  held TEXT,\n"
    "  lifted_ms INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "CREATE TABLE repairs (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  cluster TEXT NOT NULL,\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('replace', 'recheck')),\n"
    "  member TEXT,\n"
    "  token TEXT,\n"
    "  requested_by TEXT,\n"
    "  commit_id TEXT,\n"
    "  requested_ms INTEGER NOT NULL,\n"
    "  phase TEXT NOT NULL,\n"
    "  replacement TEXT,\n"
    "  result TEXT NOT NULL CHECK (result IN ('running', 'succeeded', 'refused', 'failed')),\n"
    "  error TEXT,\n"
    "  finished_ms INTEGER\n"
    ");\n"
    "CREATE UNIQUE INDEX repairs_running ON repairs (cluster) WHERE result = 'running';\n"
    "CREATE UNIQUE INDEX repairs_token ON repairs (cluster, token) WHERE token IS NOT NULL;\n",
    /*
     * The holds on a cluster's steps (state/holds.h, reconciler/hold.h): a
     * suspension a person asked for (`gitcd suspend`), the held state last
     * audited (once per change, not every pass), and the maintenance
     * override tokens spent, each acted on once per cluster.
     */
    "CREATE TABLE holds (\n"
    "  cluster TEXT PRIMARY KEY,\n"
    "  suspended_by TEXT,\n"
    "  suspended_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  suspend_reason TEXT,\n"
    "  held TEXT,\n"
    "  held_ms INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "CREATE TABLE override_tokens (\n"
    "  cluster TEXT NOT NULL,\n"
    "  token TEXT NOT NULL,\n"
    "  spent_ms INTEGER NOT NULL,\n"
    "  commit_id TEXT,\n"
    "  PRIMARY KEY (cluster, token)\n"
    ");\n",
    /*
     * A member whose machine does not answer is "unknown": what was last
     * observed of it, and when, is kept beside it (gitcd status).
     */
    "ALTER TABLE members ADD COLUMN seen_state TEXT;\n"
    "ALTER TABLE members ADD COLUMN seen_ms INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE members ADD COLUMN unreachable TEXT;\n",
    /*
     * The hosts target's last preflight of each machine of a cluster
     * (state/preflights.h, targets/hosts-preflight.h): what was measured
     * (fdatasync latency on the data directory's file system, free space
     * against the backend quota, clock offset within its bound, kernel and
     * file system type), the member it held then, and the verdict, one row
     * per machine, replaced at each preflight; `gitcd status` and `plan --target hosts` read it.
     */
    "CREATE TABLE machine_preflights (\n"
    "  cluster TEXT NOT NULL,\n"
    "  machine TEXT NOT NULL,\n"
    "  member TEXT,\n"
    "  time_ms INTEGER NOT NULL,\n"
    "  verdict TEXT NOT NULL CHECK (verdict IN ('passed', 'failed', 'unmeasured')),\n"
    "  reason TEXT,\n"
    "  kernel TEXT,\n"
    "  fstype TEXT,\n"
    "  free_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  quota_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  n_sync INTEGER NOT NULL DEFAULT 0,\n"
    "  sync_p50_us INTEGER NOT NULL DEFAULT 0,\n"
    "  sync_p99_us INTEGER NOT NULL DEFAULT 0,\n"
    "  sync_max_us INTEGER NOT NULL DEFAULT 0,\n"
    "  offset_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  offset_bound_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY (cluster, machine)\n"
    ");\n",
    /*
     * The takeover of a cluster another operator ran (spec.adopt,
     * state/takeovers.h): its old members, cluster ID and objects.
     */
    "CREATE TABLE takeovers (\n"
    "  cluster TEXT PRIMARY KEY,\n"
    "  source TEXT NOT NULL,\n"
    "  cluster_id TEXT NOT NULL,\n"
    "  members TEXT NOT NULL,\n"
    "  objects TEXT NOT NULL,\n"
    "  service TEXT,\n"
    "  service_selector_before TEXT,\n"
    "  started_ms INTEGER NOT NULL,\n"
    "  finished_ms INTEGER NOT NULL DEFAULT 0\n"
    ");\n",
    /*
     * The peer round-trip time a machine's preflight measured to the other
     * machines' etcd peer ports (targets/hosts-rtt.h), and the heartbeat
     * and election timeouts derived from it and in force for a cluster
     * (reconciler/timeouts.h), kept so that they change only when the
     * measurement moves by more than a factor of two.
     */
    "ALTER TABLE machine_preflights ADD COLUMN rtt_samples INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE machine_preflights ADD COLUMN rtt_peers INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE machine_preflights ADD COLUMN rtt_failed INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE machine_preflights ADD COLUMN rtt_slowest_us INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE machine_preflights ADD COLUMN rtt_max_us INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE TABLE derived_timeouts (\n"
    "  cluster TEXT PRIMARY KEY,\n"
    "  heartbeat_ms INTEGER NOT NULL,\n"
    "  election_ms INTEGER NOT NULL,\n"
    "  rtt_us INTEGER NOT NULL,\n"
    "  time_ms INTEGER NOT NULL\n"
    ");\n",
};

const int state_n_migrations = (int)ARRAY_SIZE(state_migrations);

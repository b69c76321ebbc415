/*
 * Typed records of the state store: source revisions, clusters with their
 * desired spec, latched spec and conditions, members and applied objects.
 *
 * The rule that matters here is the one for conditions: lastTransitionTime
 * moves only when a condition's status changes, however often the
 * reconciler re-asserts it with a new reason or message. It is enforced in
 * state_cluster_set_condition (read the old status and write in one
 * transaction), not left to callers. Each write is its own transaction
 * unless the caller holds one (state_begin).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "state/internal.h"
#include "util/hash.h"
#include "util/xalloc.h"

/* ---- validation ---- */

static bool name_part_valid(const char *s, size_t n)
{
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (!(islower(c) || isdigit(c) || c == '-' || c == '.'))
                        return false;
        }
        return true;
}

bool state_cluster_name_valid(const char *cluster)
{
        if (isempty(cluster))
                return false;
        const char *slash = strchr(cluster, '/');
        if (!slash || strchr(slash + 1, '/'))
                return false;
        return name_part_valid(cluster, (size_t)(slash - cluster)) &&
               name_part_valid(slash + 1, strlen(slash + 1));
}

const char *state_cluster_spec_json(const state_cluster *sc)
{
        assert(sc);
        return sc->observed_json ? sc->observed_json : sc->desired_json;
}

bool state_hex16_valid(const char *s)
{
        if (!s || strlen(s) != 16)
                return false;
        for (int i = 0; i < 16; i++)
                if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
                        return false;
        return true;
}

int db_check_cluster_name(state_db *db, const char *cluster, const char *what)
{
        if (!state_cluster_name_valid(cluster))
                return db_fail(db, -EINVAL, what,
                               "cluster names are \"namespace/name\" (lowercase letters, digits, "
                               "'-' and '.'), not \"%s\"",
                               cluster ? cluster : "");
        return 0;
}

static bool json_object_text(const char *s)
{
        if (!s)
                return false;
        json_t *j = json_loads(s, 0, NULL);
        bool ok = j && json_is_object(j);
        json_decref(j);
        return ok;
}

int db_cluster_exists(state_db *db, const char *cluster, const char *what)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, "SELECT 1 FROM clusters WHERE name = ?", &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no cluster %s", cluster);
        return 0;
}

/* ---- revisions ---- */

#define REVISION_COLUMNS                                                                           \
        "repository, ref, commit_id, author_name, author_email, committer, commit_time_ms, "       \
        "message, fetched_ms, signature_verified, signature_key"

int state_revision_record(state_db *db, const state_revision *rev)
{
        const char *what = "recording a revision";
        if (!rev || isempty(rev->repository) || isempty(rev->ref) || isempty(rev->commit))
                return db_fail(db, -EINVAL, what, "a revision needs a repository, ref and commit");
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO revisions (" REVISION_COLUMNS ") "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                   "ON CONFLICT (repository, ref, commit_id) DO UPDATE SET "
                   "fetched_ms = excluded.fetched_ms, "
                   "signature_verified = excluded.signature_verified, "
                   "signature_key = excluded.signature_key",
                   "ssssssisibs", rev->repository, rev->ref, rev->commit, rev->author_name,
                   rev->author_email, rev->committer, rev->commit_time_ms, rev->message,
                   rev->fetched_ms, (int)rev->signature_verified, rev->signature_key);
        return db_end(db, r < 0 ? r : 0);
}

static state_revision *revision_from_row(sqlite3_stmt *st)
{
        state_revision *rev = XNEW(state_revision);
        rev->repository = db_col_text(st, 0);
        rev->ref = db_col_text(st, 1);
        rev->commit = db_col_text(st, 2);
        rev->author_name = db_col_text(st, 3);
        rev->author_email = db_col_text(st, 4);
        rev->committer = db_col_text(st, 5);
        rev->commit_time_ms = sqlite3_column_int64(st, 6);
        rev->message = db_col_text(st, 7);
        rev->fetched_ms = sqlite3_column_int64(st, 8);
        rev->signature_verified = sqlite3_column_int(st, 9) != 0;
        rev->signature_key = db_col_text(st, 10);
        return rev;
}

bool state_commit_prefix_valid(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n < 4 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char)s[i]))
                        return false;
        return true;
}

int state_revision_get(state_db *db, const char *commit_prefix, state_revision **ret_rev)
{
        const char *what = "looking up a revision";
        if (!state_commit_prefix_valid(commit_prefix))
                return db_fail(db, -EINVAL, what, "a commit is at least 4 hex digits");
        _cleanup_free_ char *lower = xstrdup(commit_prefix);
        for (char *p = lower; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT " REVISION_COLUMNS " FROM revisions "
                           "WHERE substr(commit_id, 1, length(?1)) = ?1 "
                           "ORDER BY fetched_ms DESC",
                           &st, "s", lower);
        if (r < 0)
                return r;
        state_revision *found = NULL;
        while ((r = db_step(db, st, what)) > 0) {
                if (found && !streq(found->commit, (const char *)sqlite3_column_text(st, 2))) {
                        state_revision_free(found);
                        return db_fail(db, -EINVAL, what, "commit %s is ambiguous", lower);
                }
                if (!found)
                        found = revision_from_row(st);
        }
        if (r < 0) {
                state_revision_free(found);
                return r;
        }
        if (!found)
                return db_fail(db, -ENOENT, what, "no revision %s", lower);
        *ret_rev = found;
        return 0;
}

int state_revision_latest(state_db *db, const char *repository, const char *ref,
                          state_revision **ret_rev)
{
        const char *what = "looking up the latest revision";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT " REVISION_COLUMNS " FROM revisions "
                             "WHERE repository = ? AND ref = ? ORDER BY fetched_ms DESC, id DESC "
                             "LIMIT 1",
                             &st, "ss", repository, ref);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no revision of %s %s", repository, ref);
        *ret_rev = revision_from_row(st);
        return 0;
}

void state_revision_free(state_revision *rev)
{
        if (!rev)
                return;
        free(rev->repository);
        free(rev->ref);
        free(rev->commit);
        free(rev->author_name);
        free(rev->author_email);
        free(rev->committer);
        free(rev->message);
        free(rev->signature_key);
        free(rev);
}

/* ---- clusters ---- */

int state_cluster_set_desired(state_db *db, const char *cluster, const char *json, const char *hash,
                              const char *commit, int64_t now_ms)
{
        const char *what = "recording the desired spec";
        int r = db_check_cluster_name(db, cluster, what);
        if (r < 0)
                return r;
        if (!json_object_text(json))
                return db_fail(db, -EINVAL, what, "the desired spec of %s is not a JSON object",
                               cluster);
        _cleanup_free_ char *computed = hash ? NULL : hash_sha256_hex_new(json, strlen(json));
        if (!hash)
                hash = computed;
        r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what,
                         "SELECT desired_hash, desired_commit FROM clusters WHERE name = ?", &st,
                         "s", cluster);
        bool changed = true;
        if (r > 0) {
                const char *old_hash = (const char *)sqlite3_column_text(st, 0);
                const char *old_commit = (const char *)sqlite3_column_text(st, 1);
                changed = !streq_ptr(old_hash, hash);
                if (!changed && streq_ptr(old_commit, commit))
                        return db_end(db, 0);
        }
        if (r >= 0)
                r = db_run(db, what,
                           "INSERT INTO clusters (name, created_ms, updated_ms, desired_json, "
                           "desired_hash, desired_commit, desired_ms) "
                           "VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?2) "
                           "ON CONFLICT (name) DO UPDATE SET updated_ms = ?2, "
                           "desired_json = ?3, desired_hash = ?4, desired_commit = ?5, "
                           "desired_ms = CASE WHEN desired_hash IS ?4 THEN desired_ms ELSE ?2 END",
                           "sisss", cluster, now_ms, json, hash, commit);
        return db_end(db, r < 0 ? r : changed ? 1 : 0);
}

/* Update one cluster row; -ENOENT when there is none. */
static int cluster_update(state_db *db, const char *what, const char *cluster, int changes)
{
        if (changes < 0)
                return changes;
        if (changes == 0)
                return db_fail(db, -ENOENT, what, "no cluster %s", cluster);
        return 0;
}

/* One text column of a cluster row (sql selects it by name); -ENOENT when there is none. */
static int cluster_text(state_db *db, const char *what, const char *sql, const char *cluster,
                        char **ret)
{
        *ret = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, sql, &st, "s", cluster);
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no cluster %s", cluster);
        if (r < 0)
                return r;
        *ret = db_col_text(st, 0);
        return 0;
}

int state_cluster_target(state_db *db, const char *cluster, char **ret)
{
        return cluster_text(db, "reading the cluster's target",
                            "SELECT target FROM clusters WHERE name = ?", cluster, ret);
}

int state_cluster_set_target(state_db *db, const char *cluster, const char *target)
{
        const char *what = "recording the cluster's target";
        _cleanup_free_ char *old = NULL;
        int r = state_cluster_target(db, cluster, &old);
        if (r < 0 || streq_ptr(old, target))
                return r;
        r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "UPDATE clusters SET target = ? WHERE name = ?", "ss", target,
                   cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_tls_off(state_db *db, const char *cluster, char **ret)
{
        return cluster_text(db, "reading the TLS switch-off journal",
                            "SELECT tls_off FROM clusters WHERE name = ?", cluster, ret);
}

int state_cluster_set_tls_off(state_db *db, const char *cluster, const char *surfaces)
{
        const char *what = "recording the TLS switch-off journal";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "UPDATE clusters SET tls_off = ? WHERE name = ?", "ss", surfaces,
                   cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_latch(state_db *db, const char *cluster, const char *json, const char *hash,
                        int64_t deadline_ms, int64_t now_ms)
{
        const char *what = "latching the target";
        if (!json && hash) {
                /* the latched spec stays: only its deadline (a pass that read the row brief) */
                int r = state_begin(db);
                if (r < 0)
                        return r;
                r = db_run(db, what,
                           "UPDATE clusters SET progress_deadline_ms = ?, updated_ms = ? "
                           "WHERE name = ? AND observed_hash IS ?",
                           "iiss", deadline_ms, now_ms, cluster, hash);
                return db_end(db, cluster_update(db, what, cluster, r));
        }
        if (!json_object_text(json))
                return db_fail(db, -EINVAL, what, "the target of %s is not a JSON object",
                               cluster ? cluster : "");
        _cleanup_free_ char *computed = hash ? NULL : hash_sha256_hex_new(json, strlen(json));
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE clusters SET observed_json = ?, observed_hash = ?, "
                   "progress_deadline_ms = ?, updated_ms = ? WHERE name = ?",
                   "ssiis", json, hash ? hash : computed, deadline_ms, now_ms, cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_set_id(state_db *db, const char *cluster, const char *cluster_id, int64_t now_ms)
{
        const char *what = "recording the cluster ID";
        if (cluster_id && !state_hex16_valid(cluster_id))
                return db_fail(db, -EINVAL, what,
                               "an etcd cluster ID is 16 lowercase hex digits, not \"%s\"",
                               cluster_id);
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "UPDATE clusters SET cluster_id = ?, updated_ms = ? WHERE name = ?",
                   "sis", cluster_id, now_ms, cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_set_phase(state_db *db, const char *cluster, const char *phase, int64_t now_ms)
{
        const char *what = "recording the phase";
        {
                /* Unchanged (most passes): nothing to write. */
                _cleanup_stmt_ sqlite3_stmt *cur = NULL;
                int k = db_query_row(db, what, "SELECT phase FROM clusters WHERE name = ?", &cur,
                                     "s", cluster);
                if (k < 0)
                        return k;
                if (k > 0 && streq_ptr((const char *)sqlite3_column_text(cur, 0), phase))
                        return 0;
        }
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "UPDATE clusters SET phase = ?, updated_ms = ? WHERE name = ?", "sis",
                   phase, now_ms, cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_set_leader(state_db *db, const char *cluster, const char *member, int64_t now_ms)
{
        const char *what = "recording the leader";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "UPDATE clusters SET leader = ?, updated_ms = ? WHERE name = ?", "sis",
                   member, now_ms, cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_set_terminal(state_db *db, const char *cluster, const char *reason,
                               const char *message, int64_t now_ms)
{
        const char *what = "recording the terminal state";
        if (!reason && message)
                return db_fail(db, -EINVAL, what, "a terminal message needs a reason");
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE clusters SET terminal_reason = ?, terminal_message = ?, updated_ms = ? "
                   "WHERE name = ?",
                   "ssis", reason, message, now_ms, cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_set_version(state_db *db, const char *cluster, const char *version,
                              int64_t now_ms)
{
        const char *what = "recording the version";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "UPDATE clusters SET version = ?, updated_ms = ? WHERE name = ?",
                   "sis", version, now_ms, cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

int state_cluster_set_condition(state_db *db, const char *cluster, const char *type,
                                const char *status, const char *reason, const char *message,
                                int64_t now_ms)
{
        const char *what = "setting a condition";
        if (isempty(type))
                return db_fail(db, -EINVAL, what, "a condition needs a type");
        if (!status ||
            !(streq(status, "True") || streq(status, "False") || streq(status, "Unknown")))
                return db_fail(db, -EINVAL, what,
                               "a condition's status is True, False or Unknown, not \"%s\"",
                               status ? status : "");
        /* Most passes change nothing: read first, and write only what differs. */
        {
                _cleanup_stmt_ sqlite3_stmt *cur = NULL;
                int k = db_query_row(db, what,
                                     "SELECT status, reason, message FROM conditions "
                                     "WHERE cluster = ? AND type = ?",
                                     &cur, "ss", cluster, type);
                if (k < 0)
                        return k;
                if (k > 0 && streq_ptr((const char *)sqlite3_column_text(cur, 0), status) &&
                    streq_ptr((const char *)sqlite3_column_text(cur, 1), reason) &&
                    streq_ptr((const char *)sqlite3_column_text(cur, 2), message))
                        return 0;
        }
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_cluster_exists(db, cluster, what);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (r >= 0)
                r = db_query_row(db, what,
                                 "SELECT status FROM conditions WHERE cluster = ? AND type = ?",
                                 &st, "ss", cluster, type);
        bool changed =
            r == 0 || (r > 0 && !streq_ptr((const char *)sqlite3_column_text(st, 0), status));
        if (r >= 0)
                r = db_run(db, what,
                           "INSERT INTO conditions (cluster, type, status, reason, message, "
                           "last_transition_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                           "ON CONFLICT (cluster, type) DO UPDATE SET "
                           "last_transition_ms = CASE WHEN status IS ?3 "
                           "THEN last_transition_ms ELSE ?6 END, "
                           "status = ?3, reason = ?4, message = ?5",
                           "sssssi", cluster, type, status, reason, message, now_ms);
        return db_end(db, r < 0 ? r : changed ? 1 : 0);
}

int state_cluster_delete(state_db *db, const char *cluster)
{
        const char *what = "deleting a cluster";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "DELETE FROM operations WHERE cluster = ?", "s", cluster);
        /* a takeover record belongs to the cluster it took over: a new one of the name starts anew */
        if (r >= 0)
                r = db_run(db, what, "DELETE FROM takeovers WHERE cluster = ?", "s", cluster);
        if (r >= 0)
                r = db_run(db, what, "DELETE FROM clusters WHERE name = ?", "s", cluster);
        return db_end(db, cluster_update(db, what, cluster, r));
}

#define CLUSTER_COLUMNS                                                                            \
        "name, created_ms, updated_ms, desired_json, desired_hash, desired_commit, desired_ms, "   \
        "observed_json, observed_hash, progress_deadline_ms, cluster_id, phase, version, leader, " \
        "terminal_reason, terminal_message, "                                                      \
        "CASE WHEN json_valid(desired_json) THEN json_extract(desired_json, '$.spec.replicas') "   \
        "END, "                                                                                    \
        "CASE WHEN json_valid(desired_json) AND json_type(desired_json, '$.spec.version') = "      \
        "'text' THEN json_extract(desired_json, '$.spec.version') END"

static state_cluster *cluster_from_row(sqlite3_stmt *st)
{
        state_cluster *c = XNEW(state_cluster);
        c->name = db_col_text(st, 0);
        c->created_ms = sqlite3_column_int64(st, 1);
        c->updated_ms = sqlite3_column_int64(st, 2);
        c->desired_json = db_col_text(st, 3);
        c->desired_hash = db_col_text(st, 4);
        c->desired_commit = db_col_text(st, 5);
        c->desired_ms = sqlite3_column_int64(st, 6);
        c->observed_json = db_col_text(st, 7);
        c->observed_hash = db_col_text(st, 8);
        c->progress_deadline_ms = sqlite3_column_int64(st, 9);
        c->cluster_id = db_col_text(st, 10);
        c->phase = db_col_text(st, 11);
        c->version = db_col_text(st, 12);
        c->leader = db_col_text(st, 13);
        c->terminal_reason = db_col_text(st, 14);
        c->terminal_message = db_col_text(st, 15);
        /* spec.replicas and spec.version of the desired spec, read by SQLite (every pass
         * reads the cluster: a whole JSON tree for two fields cost more than the query) */
        c->desired_replicas =
            sqlite3_column_type(st, 16) == SQLITE_INTEGER ? (int)sqlite3_column_int64(st, 16) : -1;
        c->desired_version = db_col_text(st, 17);
        return c;
}

static int cluster_load_conditions(state_db *db, state_cluster *c)
{
        const char *what = "reading conditions";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT type, status, reason, message, last_transition_ms "
                           "FROM conditions WHERE cluster = ? ORDER BY type",
                           &st, "s", c->name);
        if (r < 0)
                return r;
        size_t alloc = 0;
        while ((r = db_step(db, st, what)) > 0) {
                c->conditions =
                    xgrow(c->conditions, &alloc, c->n_conditions + 1, sizeof(state_condition));
                state_condition *k = &c->conditions[c->n_conditions++];
                k->type = db_col_text(st, 0);
                k->status = db_col_text(st, 1);
                k->reason = db_col_text(st, 2);
                k->message = db_col_text(st, 3);
                k->last_transition_ms = sqlite3_column_int64(st, 4);
        }
        return r;
}

/* The same columns without the two specs' texts and what is read out of the desired one. */
#define CLUSTER_BRIEF_COLUMNS                                                                      \
        "name, created_ms, updated_ms, NULL, desired_hash, desired_commit, desired_ms, NULL, "     \
        "observed_hash, progress_deadline_ms, cluster_id, phase, version, leader, "                \
        "terminal_reason, terminal_message, NULL, NULL"

static int cluster_get(state_db *db, const char *cluster, const char *sql,
                       state_cluster **ret_cluster)
{
        const char *what = "reading a cluster";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, sql, &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no cluster %s", cluster ? cluster : "");
        state_cluster *c = cluster_from_row(st);
        r = cluster_load_conditions(db, c);
        if (r < 0) {
                state_cluster_free(c);
                return r;
        }
        *ret_cluster = c;
        return 0;
}

int state_cluster_get(state_db *db, const char *cluster, state_cluster **ret_cluster)
{
        return cluster_get(db, cluster, "SELECT " CLUSTER_COLUMNS " FROM clusters WHERE name = ?",
                           ret_cluster);
}

int state_cluster_get_brief(state_db *db, const char *cluster, state_cluster **ret_cluster)
{
        return cluster_get(db, cluster,
                           "SELECT " CLUSTER_BRIEF_COLUMNS " FROM clusters WHERE name = ?",
                           ret_cluster);
}

int state_cluster_get_specs(state_db *db, state_cluster *c)
{
        const char *what = "reading a cluster's specs";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT desired_json, desired_hash, observed_json, observed_hash "
                             "FROM clusters WHERE name = ?",
                             &st, "s", c->name);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no cluster %s", c->name);
        /* texts and hashes read together: a writer in between cannot pair them wrongly */
        str_assign(&c->desired_json, db_col_text(st, 0));
        str_assign(&c->desired_hash, db_col_text(st, 1));
        str_assign(&c->observed_json, db_col_text(st, 2));
        str_assign(&c->observed_hash, db_col_text(st, 3));
        return 0;
}

int state_cluster_spec_hash(state_db *db, const char *cluster, char **ret_hash)
{
        const char *what = "reading a cluster";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT coalesce(observed_hash, desired_hash) FROM clusters "
                             "WHERE name = ?",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no cluster %s", cluster ? cluster : "");
        *ret_hash = db_col_text(st, 0);
        return 0;
}

int state_cluster_list_all(state_db *db, state_cluster_list *ret_list)
{
        const char *what = "listing clusters";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what, "SELECT " CLUSTER_COLUMNS " FROM clusters ORDER BY name", &st,
                           NULL);
        if (r < 0)
                return r;
        state_cluster_list l = {0};
        size_t alloc = 0;
        while ((r = db_step(db, st, what)) > 0) {
                l.items = xgrow(l.items, &alloc, l.n + 1, sizeof(*l.items));
                l.items[l.n++] = cluster_from_row(st);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                r = cluster_load_conditions(db, l.items[i]);
        if (r < 0) {
                state_cluster_list_release(&l);
                return r;
        }
        *ret_list = l;
        return 0;
}

void state_cluster_free(state_cluster *c)
{
        if (!c)
                return;
        free(c->name);
        free(c->desired_json);
        free(c->desired_hash);
        free(c->desired_commit);
        free(c->desired_version);
        free(c->observed_json);
        free(c->observed_hash);
        free(c->cluster_id);
        free(c->phase);
        free(c->version);
        free(c->leader);
        free(c->terminal_reason);
        free(c->terminal_message);
        for (size_t i = 0; i < c->n_conditions; i++) {
                free(c->conditions[i].type);
                free(c->conditions[i].status);
                free(c->conditions[i].reason);
                free(c->conditions[i].message);
        }
        free(c->conditions);
        free(c);
}

DEFINE_STATE_LIST_RELEASE(state_cluster_list, state_cluster_free)

/* ---- members ---- */

int state_member_put(state_db *db, const state_member *m, int64_t now_ms)
{
        const char *what = "recording a member";
        if (!m || isempty(m->name))
                return db_fail(db, -EINVAL, what, "a member needs a name");
        if (m->member_id && !state_hex16_valid(m->member_id))
                return db_fail(db, -EINVAL, what,
                               "an etcd member ID is 16 lowercase hex digits, not \"%s\"",
                               m->member_id);
        if (m->runtime_json && !json_object_text(m->runtime_json))
                return db_fail(db, -EINVAL, what, "the runtime of member %s is not a JSON object",
                               m->name);
        if (m->initial_cluster_state && !streq(m->initial_cluster_state, "new") &&
            !streq(m->initial_cluster_state, "existing"))
                return db_fail(db, -EINVAL, what,
                               "the initial cluster state of member %s is \"new\" or "
                               "\"existing\", not \"%s\"",
                               m->name, m->initial_cluster_state);
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_cluster_exists(db, m->cluster, what);
        if (r >= 0)
                r = db_run(db, what,
                           "INSERT INTO members (cluster, name, ordinal, member_id, peer_url, "
                           "client_url, learner, version, seed, dormant, state, runtime, "
                           "created_ms, removed_ms, initialized, initial_cluster, "
                           "initial_cluster_state, config_hash, data_identity, seen_state, "
                           "seen_ms, unreachable) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                           "NULLIF(?14, 0), ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22) "
                           "ON CONFLICT (cluster, name) DO UPDATE SET ordinal = ?3, "
                           "member_id = ?4, peer_url = ?5, client_url = ?6, learner = ?7, "
                           "version = ?8, seed = ?9, dormant = ?10, state = ?11, runtime = ?12, "
                           "removed_ms = NULLIF(?14, 0), initialized = ?15, "
                           "initial_cluster = ?16, initial_cluster_state = ?17, "
                           "config_hash = ?18, data_identity = ?19, seen_state = ?20, "
                           "seen_ms = ?21, unreachable = ?22",
                           "ssdsssbsbbssiibsssssis", m->cluster, m->name, m->ordinal, m->member_id,
                           m->peer_url, m->client_url, (int)m->learner, m->version, (int)m->seed,
                           (int)m->dormant, m->state, m->runtime_json,
                           m->created_ms ? m->created_ms : now_ms, m->removed_ms,
                           (int)m->initialized, m->initial_cluster, m->initial_cluster_state,
                           m->config_hash, m->data_identity, m->seen_state, m->seen_ms,
                           m->unreachable);
        return db_end(db, r < 0 ? r : 0);
}

int state_member_mark_removed(state_db *db, const char *cluster, const char *name, int64_t now_ms)
{
        const char *what = "marking a member removed";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE members SET removed_ms = ? WHERE cluster = ? AND name = ? "
                   "AND removed_ms IS NULL",
                   "iss", now_ms, cluster, name);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no current member %s in %s", name, cluster);
        return db_end(db, r < 0 ? r : 0);
}

#define MEMBER_COLUMNS                                                                             \
        "cluster, name, ordinal, member_id, peer_url, client_url, learner, version, seed, "        \
        "dormant, state, runtime, created_ms, removed_ms, initialized, initial_cluster, "          \
        "initial_cluster_state, config_hash, data_identity, seen_state, seen_ms, unreachable"

static state_member *member_from_row(sqlite3_stmt *st)
{
        state_member *m = XNEW(state_member);
        m->cluster = db_col_text(st, 0);
        m->name = db_col_text(st, 1);
        m->ordinal = sqlite3_column_int(st, 2);
        m->member_id = db_col_text(st, 3);
        m->peer_url = db_col_text(st, 4);
        m->client_url = db_col_text(st, 5);
        m->learner = sqlite3_column_int(st, 6) != 0;
        m->version = db_col_text(st, 7);
        m->seed = sqlite3_column_int(st, 8) != 0;
        m->dormant = sqlite3_column_int(st, 9) != 0;
        m->state = db_col_text(st, 10);
        m->runtime_json = db_col_text(st, 11);
        m->created_ms = sqlite3_column_int64(st, 12);
        m->removed_ms = sqlite3_column_int64(st, 13);
        m->initialized = sqlite3_column_int(st, 14) != 0;
        m->initial_cluster = db_col_text(st, 15);
        m->initial_cluster_state = db_col_text(st, 16);
        m->config_hash = db_col_text(st, 17);
        m->data_identity = db_col_text(st, 18);
        m->seen_state = db_col_text(st, 19);
        m->seen_ms = sqlite3_column_int64(st, 20);
        m->unreachable = db_col_text(st, 21);
        return m;
}

int state_member_get(state_db *db, const char *cluster, const char *name, state_member **ret_member)
{
        const char *what = "reading a member";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(
            db, what, "SELECT " MEMBER_COLUMNS " FROM members WHERE cluster = ? AND name = ?", &st,
            "ss", cluster, name);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no member %s in %s", name ? name : "",
                               cluster ? cluster : "");
        *ret_member = member_from_row(st);
        return 0;
}

int state_member_list_for(state_db *db, const char *cluster, bool include_removed,
                          state_member_list *ret_list)
{
        const char *what = "listing members";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT " MEMBER_COLUMNS " FROM members WHERE cluster = ? "
                           "AND (? OR removed_ms IS NULL) ORDER BY ordinal, name",
                           &st, "sb", cluster, (int)include_removed);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_member_list, member_from_row,
                          state_member_list_release, ret_list);
}

void state_member_free(state_member *m)
{
        if (!m)
                return;
        free(m->cluster);
        free(m->name);
        free(m->member_id);
        free(m->peer_url);
        free(m->client_url);
        free(m->version);
        free(m->state);
        free(m->initial_cluster);
        free(m->initial_cluster_state);
        free(m->config_hash);
        free(m->data_identity);
        free(m->seen_state);
        free(m->unreachable);
        free(m->runtime_json);
        free(m);
}

DEFINE_STATE_LIST_RELEASE(state_member_list, state_member_free)

/* ---- applied objects ---- */

int state_object_record(state_db *db, const state_object *o)
{
        const char *what = "recording an applied object";
        if (!o || isempty(o->kind) || isempty(o->name) || isempty(o->hash))
                return db_fail(db, -EINVAL, what, "an object needs a kind, name and hash");
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_cluster_exists(db, o->cluster, what);
        if (r >= 0)
                r = db_run(db, what,
                           "INSERT INTO objects (cluster, kind, namespace, name, hash, commit_id, "
                           "applied_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                           "ON CONFLICT (cluster, kind, namespace, name) DO UPDATE SET "
                           "hash = ?5, commit_id = ?6, applied_ms = ?7",
                           "ssssssi", o->cluster, o->kind, o->namespace_ ? o->namespace_ : "",
                           o->name, o->hash, o->commit, o->applied_ms);
        return db_end(db, r < 0 ? r : 0);
}

int state_object_forget(state_db *db, const char *cluster, const char *kind, const char *namespace_,
                        const char *name)
{
        const char *what = "forgetting an applied object";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "DELETE FROM objects WHERE cluster = ? AND kind = ? AND namespace = ? "
                   "AND name = ?",
                   "ssss", cluster, kind, namespace_ ? namespace_ : "", name);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no %s %s recorded for %s", kind ? kind : "",
                            name ? name : "", cluster ? cluster : "");
        return db_end(db, r < 0 ? r : 0);
}

int state_object_list_for(state_db *db, const char *cluster, state_object_list *ret_list)
{
        const char *what = "listing applied objects";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT cluster, kind, namespace, name, hash, commit_id, applied_ms "
                           "FROM objects WHERE cluster = ? ORDER BY kind, namespace, name",
                           &st, "s", cluster);
        if (r < 0)
                return r;
        state_object_list l = {0};
        size_t alloc = 0;
        while ((r = db_step(db, st, what)) > 0) {
                state_object *o = XNEW(state_object);
                o->cluster = db_col_text(st, 0);
                o->kind = db_col_text(st, 1);
                o->namespace_ = db_col_text(st, 2);
                o->name = db_col_text(st, 3);
                o->hash = db_col_text(st, 4);
                o->commit = db_col_text(st, 5);
                o->applied_ms = sqlite3_column_int64(st, 6);
                l.items = xgrow(l.items, &alloc, l.n + 1, sizeof(*l.items));
                l.items[l.n++] = o;
        }
        if (r < 0) {
                state_object_list_release(&l);
                return r;
        }
        *ret_list = l;
        return 0;
}

void state_object_free(state_object *o)
{
        if (!o)
                return;
        free(o->cluster);
        free(o->kind);
        free(o->namespace_);
        free(o->name);
        free(o->hash);
        free(o->commit);
        free(o);
}

DEFINE_STATE_LIST_RELEASE(state_object_list, state_object_free)

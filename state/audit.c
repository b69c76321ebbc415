/*
 * The audit log: who changed what, when, why, and what came of it.
 *
 * Append-only, enforced by the database itself (triggers in schema.c): an
 * UPDATE always fails, and a DELETE fails unless state_audit_prune() has
 * granted it inside its own transaction. Nothing secret may enter: before
 * and after summaries must be JSON, and the value of every key that looks
 * secret (password, token, secret, credential, a name ending in "key") is
 * replaced by "[redacted]" at any depth; an event holding a PEM private key
 * block anywhere is refused outright, so a caller's mistake fails loudly
 * instead of leaking quietly.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "state/internal.h"
#include "util/xalloc.h"

#define REDACTED "[redacted]"

bool state_key_looks_secret(const char *key)
{
        static const char *const words[] = {"password", "passwd",  "passphrase",
                                            "token",    "secret",  "credential",
                                            "apikey",   "api_key", "private"};
        if (isempty(key))
                return false;
        _cleanup_free_ char *lower = xstrdup(key);
        for (char *p = lower; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (strstr(lower, words[i]))
                        return true;
        size_t n = strlen(lower);
        return n >= 3 && streq(lower + n - 3, "key");
}

bool state_text_has_private_key(const char *text)
{
        for (const char *p = text ? strstr(text, "-----BEGIN ") : NULL; p;
             p = strstr(p + 1, "-----BEGIN ")) {
                const char *end = strstr(p + 11, "-----");
                if (!end)
                        return false;
                size_t n = (size_t)(end - p);
                const char *k = memmem(p, n, "PRIVATE KEY", 11);
                if (k)
                        return true;
        }
        return false;
}

static void scrub(json_t *j)
{
        if (json_is_object(j)) {
                const char *key;
                json_t *value;
                json_object_foreach(j, key, value)
                {
                        if (state_key_looks_secret(key) && !json_is_null(value))
                                json_object_set_new(j, key, json_string(REDACTED));
                        else
                                scrub(value);
                }
        } else if (json_is_array(j)) {
                size_t i;
                json_t *value;
                json_array_foreach(j, i, value) scrub(value);
        }
}

char *state_scrub_json(const char *json)
{
        if (!json)
                return NULL;
        json_t *j = json_loads(json, JSON_DECODE_ANY, NULL);
        if (!j)
                return NULL;
        scrub(j);
        char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        json_decref(j);
        return s;
}

int state_audit_append(state_db *db, const state_audit_event *ev, int64_t *ret_id)
{
        const char *what = "writing an audit event";
        if (!ev || isempty(ev->action))
                return db_fail(db, -EINVAL, what, "an audit event needs an action");
        const char *texts[] = {ev->cluster, ev->commit,  ev->author,      ev->action,
                               ev->reason,  ev->outcome, ev->before_json, ev->after_json};
        for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
                if (state_text_has_private_key(texts[i]))
                        return db_fail(db, -EPERM, what,
                                       "refusing to store a private key in the audit log "
                                       "(action %s)",
                                       ev->action);
        _cleanup_free_ char *before = NULL;
        _cleanup_free_ char *after = NULL;
        if (ev->before_json && !(before = state_scrub_json(ev->before_json)))
                return db_fail(db, -EINVAL, what, "the 'before' of %s is not JSON", ev->action);
        if (ev->after_json && !(after = state_scrub_json(ev->after_json)))
                return db_fail(db, -EINVAL, what, "the 'after' of %s is not JSON", ev->action);
        if (state_text_has_private_key(before) || state_text_has_private_key(after))
                return db_fail(db, -EPERM, what,
                               "refusing to store a private key in the audit log (action %s)",
                               ev->action);
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO audit (time_ms, cluster, commit_id, author, action, reason, "
                   "before, after, outcome, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "issssssssi", ev->time_ms, ev->cluster, ev->commit, ev->author, ev->action,
                   ev->reason, before, after, ev->outcome, ev->duration_ms);
        int64_t id = sqlite3_last_insert_rowid(db->sql);
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

static bool commit_prefix_valid(const char *s)
{
        size_t n = strlen(s);
        if (n < 4 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char)s[i]))
                        return false;
        return true;
}

int state_audit_query(state_db *db, const state_audit_filter *filter, state_audit_list *ret_list)
{
        const char *what = "reading the audit log";
        static const state_audit_filter none = {0};
        if (!filter)
                filter = &none;
        _cleanup_free_ char *prefix = NULL;
        if (filter->commit_prefix) {
                if (!commit_prefix_valid(filter->commit_prefix))
                        return db_fail(db, -EINVAL, what,
                                       "a commit is given as at least 4 hex digits, not \"%s\"",
                                       filter->commit_prefix);
                prefix = xstrdup(filter->commit_prefix);
                for (char *p = prefix; *p; p++)
                        *p = (char)tolower((unsigned char)*p);
        }
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT id, time_ms, cluster, commit_id, author, action, reason, "
                           "before, after, outcome, duration_ms FROM audit "
                           "WHERE (?1 IS NULL OR cluster = ?1) AND time_ms >= ?2 "
                           "AND (?3 IS NULL OR substr(commit_id, 1, length(?3)) = ?3) "
                           "AND (?4 IS NULL OR action = ?4) "
                           "ORDER BY time_ms DESC, id DESC LIMIT ?5",
                           &st, "sissi", filter->cluster, filter->since_ms, prefix, filter->action,
                           filter->limit ? (int64_t)filter->limit : (int64_t)-1);
        if (r < 0)
                return r;
        state_audit_list l = {0};
        size_t alloc = 0;
        while ((r = db_step(db, st, what)) > 0) {
                state_audit_event *ev = XNEW(state_audit_event);
                ev->id = sqlite3_column_int64(st, 0);
                ev->time_ms = sqlite3_column_int64(st, 1);
                ev->cluster = db_col_text(st, 2);
                ev->commit = db_col_text(st, 3);
                ev->author = db_col_text(st, 4);
                ev->action = db_col_text(st, 5);
                ev->reason = db_col_text(st, 6);
                ev->before_json = db_col_text(st, 7);
                ev->after_json = db_col_text(st, 8);
                ev->outcome = db_col_text(st, 9);
                ev->duration_ms = sqlite3_column_int64(st, 10);
                l.items = xgrow(l.items, &alloc, l.n + 1, sizeof(*l.items));
                l.items[l.n++] = ev;
        }
        if (r < 0) {
                state_audit_list_release(&l);
                return r;
        }
        *ret_list = l;
        return 0;
}

/* Run delete_sql (a constant) under the retention grant grant_sql inserts; returns the count. */
static int prune_granted(state_db *db, const char *grant_sql, const char *delete_sql, int64_t arg)
{
        const char *what = "pruning the audit log";
        int r = db_run(db, what, grant_sql, "i", arg);
        if (r < 0)
                return r;
        int deleted = db_run(db, what, delete_sql, "i", arg);
        if (deleted < 0)
                return deleted;
        r = db_run(db, what, "DELETE FROM audit_retention", NULL);
        return r < 0 ? r : deleted;
}

int state_audit_prune(state_db *db, int64_t max_age_ms, size_t max_rows, int64_t now_ms)
{
        int r = state_begin(db);
        if (r < 0)
                return r;
        int total = 0;
        if (max_age_ms > 0) {
                r = prune_granted(db,
                                  "INSERT INTO audit_retention (upto) "
                                  "SELECT coalesce(max(id), 0) FROM audit WHERE time_ms < ?",
                                  "DELETE FROM audit WHERE time_ms < ?", now_ms - max_age_ms);
                if (r > 0)
                        total += r;
        }
        if (r >= 0 && max_rows > 0) {
                r = prune_granted(db,
                                  "INSERT INTO audit_retention (upto) SELECT coalesce(("
                                  "SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?), 0)",
                                  "DELETE FROM audit WHERE id <= coalesce(("
                                  "SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?), 0)",
                                  (int64_t)max_rows);
                if (r > 0)
                        total += r;
        }
        return db_end(db, r < 0 ? r : total);
}

void state_audit_event_free(state_audit_event *ev)
{
        if (!ev)
                return;
        free(ev->cluster);
        free(ev->commit);
        free(ev->author);
        free(ev->action);
        free(ev->reason);
        free(ev->before_json);
        free(ev->after_json);
        free(ev->outcome);
        free(ev);
}

DEFINE_STATE_LIST_RELEASE(state_audit_list, state_audit_event_free)

/*
 * The notification queue (see notify-queue.h).
 *
 * A row is pending while both delivered_ms and expired_ms are NULL; the
 * partial index on next_attempt_ms makes "what is due" cheap however many
 * delivered rows accumulate. Every update is guarded by "still pending", so
 * two senders (a restart racing an old process) never deliver a row twice
 * into the table's record, and an outcome recorded for a row another
 * sender finished is -ENOENT.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "state/internal.h"
#include "state/notify-queue.h"
#include "util/xalloc.h"

#define PENDING "delivered_ms IS NULL AND expired_ms IS NULL"

int state_notify_enqueue(state_db *db, const state_notification *n, int64_t *ret_id)
{
        assert(n->webhook && n->url && n->event && n->severity && n->payload);
        int k = db_run(db, "queue a notification",
                       "INSERT INTO notifications (webhook, url, event, cluster, severity, "
                       "payload, created_ms, expires_ms, next_attempt_ms, commit_id) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       "ssssssiiis", n->webhook, n->url, n->event, n->cluster, n->severity,
                       n->payload, n->created_ms, n->expires_ms, n->next_attempt_ms, n->commit);
        if (k < 0)
                return k;
        if (ret_id)
                *ret_id = sqlite3_last_insert_rowid(db->sql);
        return 0;
}

DEFINE_STATE_LIST_RELEASE(state_notification_list, state_notification_free)

void state_notification_free(state_notification *n)
{
        if (!n)
                return;
        free(n->webhook);
        free(n->url);
        free(n->commit);
        free(n->event);
        free(n->cluster);
        free(n->severity);
        free(n->payload);
        free(n->last_error);
        free(n);
}

int state_notify_due(state_db *db, int64_t now_ms, size_t limit, state_notification_list *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int k =
            db_prepare(db, "read due notifications",
                       "SELECT id, webhook, url, event, cluster, severity, payload, "
                       "created_ms, expires_ms, next_attempt_ms, attempts, last_error, "
                       "commit_id FROM notifications WHERE " PENDING " AND next_attempt_ms <= ? "
                       "ORDER BY next_attempt_ms, id LIMIT ?",
                       &st, "ii", now_ms, (int64_t)limit);
        if (k < 0)
                return k;
        state_notification_list l = {0};
        while ((k = db_step(db, st, "read due notifications")) > 0) {
                state_notification *n = XNEW(state_notification);
                n->id = sqlite3_column_int64(st, 0);
                n->webhook = db_col_text(st, 1);
                n->url = db_col_text(st, 2);
                n->event = db_col_text(st, 3);
                n->cluster = db_col_text(st, 4);
                n->severity = db_col_text(st, 5);
                n->payload = db_col_text(st, 6);
                n->created_ms = sqlite3_column_int64(st, 7);
                n->expires_ms = sqlite3_column_int64(st, 8);
                n->next_attempt_ms = sqlite3_column_int64(st, 9);
                n->attempts = sqlite3_column_int(st, 10);
                n->last_error = db_col_text(st, 11);
                n->commit = db_col_text(st, 12);
                l.items = xrealloc(l.items, (l.n + 1) * sizeof(*l.items));
                l.items[l.n++] = n;
        }
        if (k < 0) {
                state_notification_list_release(&l);
                return k;
        }
        *ret = l;
        return 0;
}

int state_notify_next_due(state_db *db, int64_t *ret_ms)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int k =
            db_prepare(db, "read the next notification",
                       "SELECT min(next_attempt_ms) FROM notifications WHERE " PENDING, &st, "");
        if (k < 0)
                return k;
        k = db_step(db, st, "read the next notification");
        if (k < 0)
                return k;
        if (k == 0 || sqlite3_column_type(st, 0) == SQLITE_NULL)
                return -ENOENT;
        *ret_ms = sqlite3_column_int64(st, 0);
        return 0;
}

static int changed_one(int k)
{
        return k < 0 ? k : k == 0 ? -ENOENT : 0;
}

int state_notify_delivered(state_db *db, int64_t id, int64_t now_ms)
{
        return changed_one(db_run(db, "record a delivery",
                                  "UPDATE notifications SET delivered_ms = ?, attempts = attempts "
                                  "+ 1, last_error = NULL WHERE id = ? AND " PENDING,
                                  "ii", now_ms, id));
}

int state_notify_retry(state_db *db, int64_t id, int64_t next_attempt_ms, const char *error)
{
        return changed_one(db_run(db, "record a failed delivery",
                                  "UPDATE notifications SET next_attempt_ms = ?, attempts = "
                                  "attempts + 1, last_error = ? WHERE id = ? AND " PENDING,
                                  "isi", next_attempt_ms, error, id));
}

int state_notify_expire(state_db *db, int64_t id, int64_t now_ms, const char *error)
{
        return changed_one(db_run(db, "expire a notification",
                                  "UPDATE notifications SET expired_ms = ?, last_error = "
                                  "coalesce(?, last_error) WHERE id = ? AND " PENDING,
                                  "isi", now_ms, error, id));
}

int state_notify_prune(state_db *db, int64_t before_ms)
{
        return db_run(db, "forget old notifications",
                      "DELETE FROM notifications WHERE coalesce(delivered_ms, expired_ms) < ?", "i",
                      before_ms);
}

int state_notify_pending(state_db *db, int64_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int k = db_prepare(db, "count pending notifications",
                           "SELECT count(*) FROM notifications WHERE " PENDING, &st, "");
        if (k < 0)
                return k;
        k = db_step(db, st, "count pending notifications");
        if (k < 0)
                return k;
        *ret_n = k > 0 ? sqlite3_column_int64(st, 0) : 0;
        return 0;
}

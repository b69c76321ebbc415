/*
 * The queue of outgoing notifications (webhooks), kept in the state store
 * so nothing is lost across a restart: a row stays pending until it is
 * delivered or expires. Rows are written by the daemon's loop and taken by
 * the sender thread, each through its own connection.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "state/state.h"

typedef struct state_notification {
        int64_t id;
        char *webhook;  /* the webhook's name in the daemon's configuration */
        char *url;      /* where it was bound when queued (a record: sending asks the
                         * configuration in force, ops/notify.c) */
        char *commit;   /* a commit status: the commit it is about; NULL for a webhook */
        char *event;    /* "cluster.converged", ... */
        char *cluster;  /* "ns/name", or NULL */
        char *severity; /* "info", "warning", "critical" */
        char *payload;  /* the request body, final (never holds a secret) */
        int64_t created_ms;
        int64_t expires_ms;
        int64_t next_attempt_ms;
        int attempts;
        char *last_error;
} state_notification;

typedef struct state_notification_list {
        state_notification **items;
        size_t n;
} state_notification_list;

/* Queue a notification (id, attempts and last_error are ignored). */
int state_notify_enqueue(state_db *db, const state_notification *n, int64_t *ret_id);
/* Pending notifications whose next attempt is due at now_ms, oldest first, at most limit. */
int state_notify_due(state_db *db, int64_t now_ms, size_t limit, state_notification_list *ret);
/* When the next pending notification is due; -ENOENT when none is pending. */
int state_notify_next_due(state_db *db, int64_t *ret_ms);
/* Outcomes of an attempt. -ENOENT when the row is not pending. */
int state_notify_delivered(state_db *db, int64_t id, int64_t now_ms);
int state_notify_retry(state_db *db, int64_t id, int64_t next_attempt_ms, const char *error);
int state_notify_expire(state_db *db, int64_t id, int64_t now_ms, const char *error);
/* Forget rows delivered or expired before before_ms; how many went, or -errno. */
int state_notify_prune(state_db *db, int64_t before_ms);
/* How many are pending (neither delivered nor expired). */
int state_notify_pending(state_db *db, int64_t *ret_n);

void state_notification_free(state_notification *n);
void state_notification_list_release(state_notification_list *l);

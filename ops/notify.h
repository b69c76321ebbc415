/*
 * Notifications: events of the daemon (a cluster converged, failed, is
 * blocked; two sources define one cluster) sent to the webhooks of the
 * daemon's configuration, as a generic JSON payload signed with HMAC-SHA256
 * or as a Slack-compatible message, filtered by severity and cluster.
 *
 * ops_notify() only writes the queue (state/notify-queue.h) and wakes the
 * sender, a thread with its own connection to the state store that posts
 * with libcurl and retries with backoff: reconciliation never waits for a
 * receiver. What is queued survives a restart until delivered or expired.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ops/config.h"
#include "state/state.h"

typedef struct ops_notifier ops_notifier;

typedef struct ops_event {
        ops_severity severity;
        const char *event;   /* "cluster.converged", "cluster.failed", ... */
        const char *cluster; /* "ns/name", or NULL */
        const char *message; /* for people; never a secret */
        const char *commit;  /* the revision it concerns, or NULL */
        const char *bundle; /* the incident bundle taken for it (a path on gitcd's host), or NULL */
} ops_event;

/* The HTTP header carrying "sha256=<hex HMAC-SHA256 of the body>". */
#define OPS_SIGNATURE_HEADER "X-Gitcd-Signature-256"

/*
 * Start the sender for the state store at state_path with cfg's webhooks
 * (copied). Pending notifications from an earlier run are sent too.
 */
int ops_notifier_start(const char *state_path, const ops_config *cfg, ops_notifier **ret);
/* New webhooks after SIGHUP (copied); pending rows of removed webhooks expire. */
void ops_notifier_configure(ops_notifier *n, const ops_config *cfg);
/*
 * Queue ev for every webhook whose filters take it, through db (the
 * caller's connection), and wake the sender. Returns how many were queued,
 * or -errno from the state store.
 */
int ops_notify(ops_notifier *n, state_db *db, const ops_event *ev);
typedef enum ops_commit_state {
        OPS_COMMIT_APPLIED = 0, /* github/gitea "success", gitlab "success" */
        OPS_COMMIT_FAILED,      /* "failure" / "failed" */
        OPS_COMMIT_PENDING,     /* "pending" / "running" */
} ops_commit_state;

/*
 * Queue a commit status for a cluster's result on the commit it was
 * reconciled to, when `source` has commitStatus in the configuration (the
 * status is named "<context>/<ns/name>"). The API token is read when
 * sending, never stored. Returns how many were queued (0 or 1), or -errno.
 */
int ops_notify_commit_status(ops_notifier *n, state_db *db, const char *source_name,
                             const char *commit, const char *cluster, ops_commit_state state,
                             const char *description);
/* Whether cfg asks for any webhook or commit status (a sender is needed). */
bool ops_config_has_notifications(const ops_config *cfg);

/* Stop the sender (an attempt in flight is cut short); NULL is a no-op. */
void ops_notifier_stop(ops_notifier *n);

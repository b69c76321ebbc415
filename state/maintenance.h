/*
 * Maintenance run records in the state store: every defragmentation run
 * gitcd started (on schedule, on a threshold, or to clear a NOSPACE alarm)
 * and how far it got.
 *
 * A record is the run's journal. It is written "running" before the first
 * member is touched; each member is appended to members_done once it was
 * defragmented and found healthy again, the leader it moved leadership
 * away from and the revision it compacted to are written before the next
 * step, and the record is finished as "succeeded" or "failed". A gitcd
 * that stops in the middle finds the running record and carries on with
 * the members not done yet (a member interrupted mid-defragmentation is
 * simply defragmented again: the operation is idempotent). A finished
 * record never changes again (a trigger refuses it).
 *
 * Errors and the last-error message follow state/state.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"

typedef struct state_maint_run {
        int64_t id;
        char *cluster;   /* "namespace/name" */
        char *trigger;   /* "schedule", "free-space", "quota" or "nospace" */
        int64_t slot_ms; /* schedule: the cron time the run is for; else 0 */
        int64_t started_ms;
        int64_t finished_ms;      /* 0 while running */
        char *result;             /* "running", "succeeded" or "failed" */
        char *error;              /* why it failed, or NULL */
        char *members_done;       /* comma-separated member names, in the order done; "" for none */
        char *leader;             /* the member leadership was moved away from, or NULL */
        int64_t compact_revision; /* the revision gitcd compacted to (nospace); 0: none */
        bool disarmed;            /* the NOSPACE alarm was disarmed */
} state_maint_run;

typedef struct state_maint_run_list {
        state_maint_run **items;
        size_t n;
} state_maint_run_list;

/* Write a running record. -EINVAL for a bad cluster name or trigger. */
int state_maint_run_begin(state_db *db, const char *cluster, const char *trigger, int64_t slot_ms,
                          int64_t now_ms, int64_t *ret_id);
/* Append member to members_done. -ENOENT, -EALREADY when the run is finished. */
int state_maint_run_member_done(state_db *db, int64_t id, const char *member);
/* Record the member leadership was moved away from. -ENOENT, -EALREADY. */
int state_maint_run_set_leader(state_db *db, int64_t id, const char *member);
/* Record the revision compacted to. -ENOENT, -EALREADY. */
int state_maint_run_set_compacted(state_db *db, int64_t id, int64_t revision);
/* Record that the NOSPACE alarm was disarmed. -ENOENT, -EALREADY. */
int state_maint_run_set_disarmed(state_db *db, int64_t id);
/* running -> succeeded (error NULL) or failed (error set). -ENOENT, -EALREADY. */
int state_maint_run_finish(state_db *db, int64_t id, const char *error, int64_t now_ms);
/* Records of cluster (NULL: every cluster), newest first; at most limit (0: all). */
int state_maint_run_list_for(state_db *db, const char *cluster, size_t limit,
                             state_maint_run_list *ret_list);
/* True when member is in the run's members_done. */
bool state_maint_run_has_done(const state_maint_run *run, const char *member);
void state_maint_run_free(state_maint_run *r);
void state_maint_run_list_release(state_maint_run_list *l);

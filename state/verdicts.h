/*
 * The intake's verdicts on clusters a source defines but gitcd does not
 * take in as they are (intake/intake.h): refused by the operator's policy,
 * or a change held until enough trusted signers approved it. One row per
 * source and cluster, replaced at each revision the source's driver takes
 * in and removed once the cluster is taken in again, so `gitcd status`
 * shows why a cluster is not what its commit says, including a cluster
 * that was never accepted (it has no clusters row). The commit and message
 * of a row also say whether a verdict is new: the driver audits a verdict
 * once per head, not at every restart.
 */
#pragma once

#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_verdict {
        char *source;  /* the source's name ("default" for the flags' source) */
        char *cluster; /* "namespace/name" */
        char *verdict; /* "refused", "held" */
        char *message; /* why, one line */
        char *commit;  /* the revision it was given for; NULL: a plain directory */
        int64_t time_ms;
} state_verdict;

typedef struct state_verdict_list {
        state_verdict **items;
        size_t n;
} state_verdict_list;

/*
 * Record a cluster's verdict for source. Returns 1 when it is new or
 * differs from the one recorded (verdict, message or commit: audit it), 0
 * when that very verdict was recorded already, or -errno.
 */
int state_verdict_set(state_db *db, const char *source, const char *cluster, const char *verdict,
                      const char *message, const char *commit, int64_t now_ms);
/* Forget source's verdict on a cluster (taken in, or gone). 0 or -errno. */
int state_verdict_clear(state_db *db, const char *source, const char *cluster);
/* Forget every verdict of source on a cluster not among keep[0..n). 0 or -errno. */
int state_verdict_retain(state_db *db, const char *source, const char *const *keep, size_t n);
/* Every verdict (cluster NULL), or those on one cluster, by cluster and source. */
int state_verdict_list_get(state_db *db, const char *cluster, state_verdict_list *ret);
void state_verdict_free(state_verdict *v);
void state_verdict_list_release(state_verdict_list *l);

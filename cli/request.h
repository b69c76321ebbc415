/*
 * A request recorded in the state and seen through: what `gitcd recover`
 * and `gitcd repair` share. Each records its request (a recovery, a
 * repair) for one cluster; then either another gitcd holds the state and
 * carries it out, and the command waits for the record's result, or the
 * command takes the state's lock and runs the reconciler's passes for the
 * cluster itself, until the request ended and the cluster converged.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cli/runner.h"
#include "ops/config.h"
#include "state/state.h"

/* What differs between the commands that record a request. */
typedef struct request_kind {
        const char *prog; /* "gitcd repair": the start of every message */
        const char *noun; /* "repair": "repair 7 still running", "carries the repair out" */
        /* "did not ... in time" before the request finished: "finish its repair" */
        const char *undone;
        /* A pass blocked (not frozen) after the request finished fails the command. */
        bool blocked_fails;
        /* Record id of cluster: 1 still running, 0 finished (printed, *ret_ok set), -errno. */
        int (*report)(state_db *db, const char *cluster, int64_t id, bool *ret_ok);
} request_kind;

/* The state and the cluster's target a request command works with. */
typedef struct request_ctx {
        ops_config *file; /* the daemon's configuration file, or NULL */
        char *path;       /* the state database */
        state_db *db;
        ops_config target; /* the cluster's target; its strings point into f and file */
} request_ctx;

/*
 * Refuse an unknown --target, read the daemon's configuration (config, or
 * the default file), open the state read-write and find the target
 * cluster runs on, before anything is recorded. EXIT_OK, else the exit
 * status (EXIT_USAGE for the unknown target, EXIT_FAIL) with why printed;
 * request_close() in any case.
 */
int request_open(const request_kind *k, const char *config, const runner_flags *f,
                 const char *cluster, request_ctx *ret);
void request_close(request_ctx *ctx);

/* The message for a request that could not be recorded (r from the recorder). */
void request_record_failed(const request_kind *k, int r);

/* --timeout D: 0, or -EINVAL with the message printed. */
int request_parse_timeout(const request_kind *k, const char *arg, int64_t *ret_ms);

/*
 * See request id of cluster through (see above) for at most timeout_ms.
 * EXIT_OK when it succeeded (and the cluster converged, when this command
 * did the work), else EXIT_FAIL; says what happened.
 */
int request_see_through(const request_kind *k, request_ctx *ctx, const char *cluster, int64_t id,
                        int64_t timeout_ms);

/*
 * The loop `gitcd recover` and `gitcd repair` share once their request is
 * recorded (cli/request.h). The state's lock decides who does the work: a
 * `gitcd run` that holds it carries the request out, and this command only
 * polls the record; when nobody holds it, this command holds it while it
 * runs the reconciler's passes for the one cluster on the cluster's own
 * target, printing each new pass message, until the record says the
 * request ended and a pass converged. Only the record's printing and a
 * few words differ between the commands (request_kind).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/request.h"
#include "reconciler/reconcile.h"
#include "targets/registry.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

int request_open(const request_kind *k, const char *config, const runner_flags *f,
                 const char *cluster, request_ctx *ret)
{
        *ret = (request_ctx){0};
        if (f->target && !target_kind_find(f->target)) {
                runner_unknown_target(k->prog, f->target);
                return EXIT_USAGE;
        }
        if (cli_daemon_config(config, OPS_CONFIG_DEFAULT_PATH, f->state != NULL, k->prog,
                              &ret->file) < 0)
                return EXIT_FAIL;
        ret->path = cli_state_path(f->state, ret->file);
        if (state_open(ret->path, STATE_OPEN_READ_WRITE, &ret->db) < 0) {
                fprintf(stderr, "%s: %s\n", k->prog, state_last_error());
                return EXIT_FAIL;
        }
        /* The target it would drive, checked before anything is recorded. */
        if (runner_cluster_target(ret->db, cluster, f, ret->file, k->prog, &ret->target) < 0)
                return EXIT_FAIL;
        return EXIT_OK;
}

void request_close(request_ctx *ctx)
{
        if (ctx->db)
                state_close(ctx->db);
        free(ctx->path);
        ops_config_free(ctx->file);
        *ctx = (request_ctx){0};
}

void request_record_failed(const request_kind *k, int r)
{
        fprintf(stderr, "%s: %s\n", k->prog,
                r == -ENOENT ? "no such cluster in the state store" : state_last_error());
}

/* Another gitcd holds the state and carries the request out: wait for the record. */
static int wait_for_other(const request_kind *k, state_db *db, const char *cluster, int64_t id,
                          int64_t deadline)
{
        bool ok = false;
        for (;;) {
                int r = k->report(db, cluster, id, &ok);
                if (r < 0) {
                        fprintf(stderr, "%s: %s\n", k->prog, state_last_error());
                        return EXIT_FAIL;
                }
                if (r == 0)
                        return ok ? EXIT_OK : EXIT_FAIL;
                if (now_mono_ms() > deadline) {
                        fprintf(stderr, "%s: %s %lld still running; see gitcd status\n", k->prog,
                                k->noun, (long long)id);
                        return EXIT_FAIL;
                }
                msleep(500);
        }
}

/* Where one pass leaves the request: -1 going on, else the command's exit status. */
static int after_pass(const request_kind *k, const request_ctx *ctx, const char *cluster,
                      int64_t id, const pass_result *res, bool *finished)
{
        if (!*finished) {
                bool ok = false;
                int r = k->report(ctx->db, cluster, id, &ok);
                if (r < 0)
                        return EXIT_FAIL;
                *finished = r == 0;
                if (*finished && !ok)
                        return EXIT_FAIL;
        }
        if (*finished && res->outcome == PASS_CONVERGED) {
                printf("%s: converged\n", cluster);
                return EXIT_OK;
        }
        if (res->outcome == PASS_FAILED ||
            (k->blocked_fails && *finished && res->outcome == PASS_BLOCKED && !res->frozen)) {
                fprintf(stderr, "%s: %s: %s\n", k->prog, cluster, res->message);
                return EXIT_FAIL;
        }
        return -1;
}

/* Nobody holds the state: run the reconciler's passes for the cluster here. */
static int drive(const request_kind *k, const request_ctx *ctx, const char *state_dir,
                 const char *cluster, int64_t id, int64_t deadline)
{
        _cleanup_(target_freep) target *t = NULL;
        if (runner_open_target(&ctx->target, state_dir, &t) < 0)
                return EXIT_FAIL;
        reconciler_opts o = {.db = ctx->db, .target = t, .state_dir = state_dir};
        _cleanup_(reconciler_freep) reconciler *rc = NULL;
        if (reconciler_new(&o, &rc) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *last = NULL;
        bool finished = false;
        while (now_mono_ms() <= deadline) {
                _cleanup_(pass_result_release) pass_result res = {0};
                if (reconciler_pass(rc, cluster, &res) < 0) {
                        fprintf(stderr, "%s: %s\n", k->prog, state_last_error());
                        return EXIT_FAIL;
                }
                if (!streq_ptr(last, res.message)) {
                        printf("%s: %s\n", cluster, res.message);
                        fflush(stdout);
                        free(last);
                        last = xstrdup(res.message);
                }
                int status = after_pass(k, ctx, cluster, id, &res, &finished);
                if (status >= 0)
                        return status;
                if (res.outcome != PASS_PROGRESSED)
                        (void)t->ops->wait_event(t, res.poll_ms > 0 ? MIN(res.poll_ms, 1000) : 200);
        }
        fprintf(stderr, "%s: %s did not %s in time; see gitcd status\n", k->prog, cluster,
                finished ? "converge" : k->undone);
        return EXIT_FAIL;
}

int request_see_through(const request_kind *k, request_ctx *ctx, const char *cluster, int64_t id,
                        int64_t timeout_ms)
{
        _cleanup_free_ char *state_dir = runner_state_dir(ctx->path);
        _cleanup_free_ char *lock = path_join(state_dir, RUNNER_LOCK_FILE);
        int lock_fd = -1;
        pid_t holder = 0;
        int64_t deadline = now_mono_ms() + timeout_ms;
        int r = lock_file_try(lock, &lock_fd, &holder);
        if (r == -EAGAIN) {
                printf("another gitcd (pid %ld) holds %s; it carries the %s out\n", (long)holder,
                       state_dir, k->noun);
                return wait_for_other(k, ctx->db, cluster, id, deadline);
        }
        if (r < 0) {
                fprintf(stderr, "%s: cannot lock %s: %s\n", k->prog, lock, strerror(-r));
                return EXIT_FAIL;
        }
        int status = drive(k, ctx, state_dir, cluster, id, deadline);
        close(lock_fd);
        return status;
}

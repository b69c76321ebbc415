/*
 * The fixture the fake-world reconciler tests share: a temporary folder,
 * a state store in it, a fake world (tests/fake/fake.h), its target and a
 * reconciler over them on the world's clock. A test offers spec YAML and
 * runs passes until the cluster converged; a waiting pass advances the
 * world's clock by the poll time the reconciler asked for.
 *
 * fx_open/fx_close are what a gitcd start and exit do to this process's
 * handles (the world keeps running), so a test can "restart" gitcd, or
 * kill it at a failpoint in a forked child (fx_run_until_killed).
 *
 * What differs between test files is in fx_config: the temporary folder's
 * name, the cluster, a stand-in for etcd's tool (which also sets
 * reconciler_opts.etcd_dir), and a hook run before the first fx_open for
 * the world's settings and the file's own data (fx.data).
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reconciler/reconcile.h"
#include "state/state.h"
#include "tests/fake/fake.h"
#include "util/macro.h"

#define FX_CLUSTER    "default/demo" /* the cluster unless fx_config.cluster says otherwise */
#define FX_MAX_PASSES 400            /* what fx_converge allows */

typedef struct fx fx;

typedef struct fx_config {
        const char *name;    /* the temporary folder is /tmp/gitcd-<name>-XXXXXX */
        const char *cluster; /* "namespace/name"; NULL: FX_CLUSTER */
        /*
         * Non-NULL: this script stands in for etcd's tool, as
         * <dir>/etcd/3.5.16/etcdutl, and reconcilers get etcd_dir <dir>/etcd.
         */
        const char *etcdutl;
        /* true: reconcilers get state_dir <dir>/state (etcd auth keeps its files there). */
        bool state_dir;
        /* Before the first fx_open: world settings, files, f->data. */
        void (*prepare)(fx *f);
        /* Set: reconcilers read members' /metrics through it (reconciler_opts.member_metrics). */
        int (*member_metrics)(void *userdata, const char *client_url, char **ret_text,
                              char **ret_error);
        /* At teardown, after fx_close and before the folder is removed: frees f->data. */
        void (*release)(fx *f);
} fx_config;

struct fx {
        const fx_config *config;
        const char *cluster;
        char *dir;       /* the temporary folder, removed at teardown */
        char *db_path;   /* <dir>/state.db */
        char *etcd_dir;  /* NULL unless config->etcdutl */
        char *state_dir; /* NULL unless config->state_dir */
        fake_world *w;
        state_db *db;
        target *t;
        reconciler *r;
        void *data;       /* the test file's own (config->prepare/release) */
        pass_result last; /* what fx_pass returned last: its message is held here */
};

/* cmocka setup and teardown: *state becomes an open fixture, and is freed. */
int fx_setup(void **state, const fx_config *config);
int fx_teardown(void **state);

void fx_open(fx *f);
void fx_close(fx *f);

/*
 * Offer the cluster's spec: apiVersion, kind and metadata for the cluster,
 * then "spec:" and the lines fmt makes. origin NULL: none.
 */
void fx_offer(fx *f, const reconcile_origin *origin, const char *fmt, ...) _printf_(3, 4);

/*
 * One pass; a pass that waits (or is blocked) advances the clock by what it
 * asked for. The result's message is the fixture's: valid until the next
 * fx_pass (fx_converge*) or the teardown.
 */
pass_result fx_pass(fx *f);
/* Advance the clock by what a pass asked for (200 ms when it named no time). */
void fx_wait(fx *f, const pass_result *res);
/* Pass until converged or failed, at most max_passes; *ret (may be NULL) gets the last result. */
pass_outcome fx_converge_n(fx *f, int max_passes, pass_result *ret);
/* Pass until converged (asserted, within FX_MAX_PASSES); ret may be NULL. */
void fx_converge(fx *f, pass_result *ret);

/*
 * In a forked child that the failpoint kills (SIGKILL, asserted), run passes
 * as a gitcd start; then open the fixture again on what it left.
 */
void fx_run_until_killed(fx *f, const char *failpoint);

/* Audit records of the cluster with this action (by this author; NULL: anyone's). */
int fx_audit_count(fx *f, const char *action);
int fx_audit_count_by(fx *f, const char *action, const char *author);
/* No operation of the cluster is left pending. */
void fx_assert_no_pending_ops(fx *f);
/* Process starts of every member the target holds, restarts included. */
int fx_total_starts(fx *f);

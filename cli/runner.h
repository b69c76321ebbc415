/*
 * What `gitcd apply`, `gitcd run` and `gitcd plan` share on the command
 * line: the source flags, the state path, the target, and opening all of
 * them in the right order.
 */
#pragma once

#include <getopt.h>
#include <stdbool.h>

#include "ops/config.h"
#include "reconciler/driver.h"
#include "sources/source.h"
#include "state/state.h"
#include "targets/registry.h"
#include "targets/target.h"
#include "util/strmap.h"

typedef struct runner_flags {
        source_opts src;
        const char *state;          /* --state */
        const char *target;         /* --target: a kind's name (targets/registry.h) */
        const char *kubeconfig;     /* --kubeconfig (kubernetes target) */
        const char *kube_context;   /* --context */
        const char *cluster_domain; /* --cluster-domain (default cluster.local) */
        const char *snapshot_image; /* --snapshot-image (default gitcd:<version>) */
        const char *etcd_dir;       /* --etcd-dir */
        const char *cache_dir;      /* --cache-dir */
        ops_hosts hosts;            /* --hosts-* (hosts target) */
        const char *hosts_ports;    /* --hosts-ports CLIENT,PEER,METRICS */
        bool prune;
        /* apply, plan: --config, the file whose policy applies (run reads all of it) */
        const char *config;
        /* gitcd run only */
        const char *listen;            /* --listen host:port */
        const char *listen_token_file; /* --listen-token-file */
        const char *listen_tls_cert;   /* --tls-cert */
        const char *listen_tls_key;    /* --tls-key */
        int64_t observe_interval_ms;   /* --observe-interval; 0: unset */
        int workers;                   /* --workers; 0: unset */
} runner_flags;

/* getopt_long option ids shared by the commands (values above 1000). */
enum {
        RUNNER_OPT_SOURCE = 1001,
        RUNNER_OPT_REF,
        RUNNER_OPT_PATH,
        RUNNER_OPT_STATE,
        RUNNER_OPT_TARGET,
        RUNNER_OPT_ETCD_DIR,
        RUNNER_OPT_CACHE_DIR,
        RUNNER_OPT_SSH_KEY,
        RUNNER_OPT_SSH_PASSPHRASE_FILE,
        RUNNER_OPT_SSH_PASSPHRASE_ENV,
        RUNNER_OPT_SSH_AGENT,
        RUNNER_OPT_KNOWN_HOSTS,
        RUNNER_OPT_HTTPS_CA,
        RUNNER_OPT_TOKEN_FILE,
        RUNNER_OPT_TOKEN_ENV,
        RUNNER_OPT_USERNAME,
        RUNNER_OPT_VERIFY,
        RUNNER_OPT_ALLOWED_SIGNERS,
        RUNNER_OPT_PRUNE,
        RUNNER_OPT_KUBECONFIG,
        RUNNER_OPT_CONTEXT,
        RUNNER_OPT_CLUSTER_DOMAIN,
        RUNNER_OPT_SNAPSHOT_IMAGE,
        RUNNER_OPT_ALLOW_ROLLBACK,
        RUNNER_OPT_HOSTS_SSH_KEY,
        RUNNER_OPT_HOSTS_PASSPHRASE_FILE,
        RUNNER_OPT_HOSTS_KNOWN_HOSTS,
        RUNNER_OPT_HOSTS_PORTS,
        RUNNER_OPT_LAST,
};

/*
 * The long options above: the getopt table of runner_options(), and the
 * order cli/options.c matches the rows of CLI_RUNNER_ROWS in.
 */
extern const struct option runner_long_options[];
extern const size_t runner_n_long_options;

/*
 * A getopt_long table: the command's own options, then the shared ones,
 * then the terminating zero entry. Newly allocated; free() it.
 */
struct option *runner_options(const struct option *own, size_t n_own);

/*
 * Print "<prog>: unknown target 'NAME' (available: ...)", the kinds of
 * targets/registry.h.
 */
void runner_unknown_target(const char *prog, const char *name);

/* The column the help of the shared options starts at (cli/options.h's width + 2). */
#define RUNNER_HELP_COLUMN 27

/* The help of --target: the kinds of targets/registry.h, lines separated by \n. */
const char *runner_target_help(void);

/* Whether f has --target or a target's setting (CLI_TARGET_HIDDEN_ROWS). */
bool runner_target_given(const runner_flags *f);

/* Handle one shared option; false when opt is not one of them. */
bool runner_flag(runner_flags *f, int opt, const char *arg);

/* The folder of the state database at db_path (absolute when it exists). Newly allocated. */
char *runner_state_dir(const char *db_path);

/*
 * The target recorded cluster ("namespace/name") runs on and its settings,
 * for commands acting on a recorded cluster (gitcd snapshot save, gitcd
 * etcd --cluster, gitcd recover): f->target when given, else the one the
 * state store recorded when gitcd took the spec in, else the `target:` of
 * the daemon's configuration file (file, NULL when none was read), else
 * local. A --target that contradicts the record, and another target's
 * options on the command line, are refused. The settings are f's, and the
 * file's where f gives none (a kind reads only its own when it is opened,
 * so the file's settings of other kinds are not used). Opens nothing:
 * *ret's strings point into f and file. prog prefixes the messages it
 * prints.
 */
int runner_cluster_target(state_db *db, const char *cluster, const runner_flags *f,
                          const ops_config *file, const char *prog, ops_config *ret);

/* The target of c->target (local when NULL) over state_dir, with c's settings. Prints why. */
int runner_open_target(const ops_config *c, const char *state_dir, target **ret);

/* runner_cluster_target(), then runner_open_target(). */
int runner_open_cluster_target(state_db *db, const char *cluster, const runner_flags *f,
                               const ops_config *file, const char *state_dir, const char *prog,
                               target **ret);

/* --etcd-dir, else the daemon configuration file's etcdDir (file may be NULL), else NULL. */
const char *runner_etcd_dir(const runner_flags *f, const ops_config *file);

/* The lock file apply and run hold in the state directory (see runner_open). */
#define RUNNER_LOCK_FILE "gitcd.lock"

/* One source of the daemon, with its own driver. */
/* Kubeconfig files of their own the sources of one configuration may name. */
#define RUNNER_KUBECONFIGS_MAX 16

typedef struct runner_source {
        struct runner *owner;
        const ops_source *conf;
        source *src;
        driver *drv;
        target *target;           /* borrowed from the runner */
        int64_t interval_ms;      /* how often run polls it */
        int64_t next_sync_ms;     /* monotonic; 0: at once */
        int64_t fetch_started_ms; /* monotonic; 0: no fetch in flight (run) */
        bool pushed;              /* run: the fetch due or in flight was asked for by a push */
        bool fetch_again;         /* run: a push came during that fetch: fetch again after it */
        bool synced;              /* a revision was taken in */
        char **defines;           /* clusters its current revision defines */
        size_t n_defines;
        char **pending; /* while driver_sync runs */
        size_t n_pending;
        /* The spec hash each cluster's client identity was published for (pass_done). */
        strmap tls_for;
        char **tls_hash; /* by tls_for's index */
        size_t alloc_tls_hash;
        /*
         * Its kubeconfig contexts for the intake (a kind with
         * TARGET_CAP_KUBE_CONTEXTS): its context, where it was written, and
         * the check of the kubeconfig its target reads (kubeconfig, borrowed).
         */
        intake_kube kube;
        const target_kind *kind;
        const char *kubeconfig;
} runner_source;

typedef struct runner {
        int lock_fd; /* holds RUNNER_LOCK_FILE; -1 when closed */
        state_db *db;
        /*
         * One per kind (targets/registry.h, by index), opened when a source
         * needs it; after those, one per other kubeconfig file a source of
         * a kind with TARGET_CAP_KUBE_CONTEXTS names (kubeconfigs[i - kinds]).
         */
        target *targets[TARGET_KIND_COUNT + RUNNER_KUBECONFIGS_MAX];
        char *kubeconfigs[RUNNER_KUBECONFIGS_MAX];
        runner_source *sources;
        size_t n_sources;
        /* The first source's, for the commands that take one (apply). */
        target *target;
        source *src;
        driver *drv;
        char *state_path;
        char *state_dir;
        ops_config *own_cfg; /* built from flags by runner_open */
        char **conflicts;    /* clusters defined by two sources, reported once */
        size_t n_conflicts;
        char *target_key; /* the target settings in force, to see whether a reload keeps them */
        /* Sources and drivers a reload replaced while their passes were in flight. */
        struct runner_retired *retired;
        size_t n_retired;
} runner;

/*
 * The daemon's settings: the configuration file (when `config` is not NULL)
 * with the flags on top. A --source on the command line replaces the file's
 * sources with that one; other source flags amend the file's source when it
 * has exactly one. Problems in the file are diagnostics; a bad combination
 * of flags is printed. -EINVAL on either.
 */
int runner_settings(const runner_flags *f, const char *config, int64_t interval_ms,
                    ops_config **ret, diag_list *diags);

/*
 * The operator's policy for gitcd apply and plan (prog prefixes messages):
 * read from f->config, else /etc/gitcd/gitcd.yaml when it exists (its
 * source whose url is --source, else its top-level policy), else gitcd's
 * built-in one. A file that cannot be read or is invalid is printed and
 * fails (-errno): a policy is never skipped.
 */
int runner_policy(const runner_flags *f, const char *prog, policy **ret);

/*
 * Take the exclusive lock on the state directory, then open the state
 * store, the target, the source and the driver, with the policy of
 * runner_policy(). Prints a clear error and
 * returns -errno on failure: -EAGAIN when another gitcd holds the lock
 * ("another gitcd (pid N) holds DIR").
 */
int runner_open(const runner_flags *f, driver_progress_fn progress, void *userdata, runner *ret);
/* The same from settings (runner_settings), which must outlive the runner. */
int runner_open_config(const ops_config *cfg, driver_progress_fn progress, void *userdata,
                       runner *ret);
/*
 * Close and open again everything but the lock (gitcd run on SIGHUP, with
 * the settings just read), so no other process can slip in between. The
 * state path stays the one opened first. On failure everything but the
 * lock is closed: open again (with other settings) or runner_close().
 */
int runner_reopen(const ops_config *cfg, driver_progress_fn progress, void *userdata, runner *r);

/*
 * Reload with passes in flight (gitcd run, SIGHUP): when the new settings
 * keep the target settings as they are, the targets stay and the old
 * sources and drivers are retired instead of waited for: they start no
 * new pass, their passes in flight run to their end on the settings they
 * started with, and a cluster such a pass holds gets no pass from the new
 * drivers until it ends. Returns the passes still in flight in retired
 * drivers, after freeing the retired ones that have none.
 */
int runner_retired_reap(runner *r);
/* SIGTERM: wait up to timeout_ms for the retired passes; the number still in flight. */
int runner_retired_quiesce(runner *r, int timeout_ms);
/*
 * driver_sync() for source i, keeping track of which clusters each source
 * defines (the conflicts between sources). Returns what driver_sync does.
 */
int runner_sync(runner *r, size_t i, diag_list *diags);
/* The source that defines a cluster (the only one when there is one), or NULL. */
const runner_source *runner_source_for(const runner *r, const char *cluster);
/* Close everything and release the lock. */
void runner_close(runner *r);

/*
 * What `gitcd apply`, `gitcd run` and `gitcd plan` share on the command
 * line: the source flags, the state path, the target, and opening all of
 * them in the right order.
 */
#pragma once

#include <getopt.h>
#include <stdbool.h>

#include "reconciler/driver.h"
#include "sources/source.h"
#include "state/state.h"
#include "targets/target.h"

typedef struct runner_flags {
        source_opts src;
        const char *state;          /* --state */
        const char *target;         /* --target: "local" (default) or "kubernetes" */
        const char *kubeconfig;     /* --kubeconfig (kubernetes target) */
        const char *kube_context;   /* --context */
        const char *cluster_domain; /* --cluster-domain (default cluster.local) */
        const char *etcd_dir;       /* --etcd-dir */
        const char *cache_dir;      /* --cache-dir */
        bool prune;
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
        RUNNER_OPT_ALLOW_ROLLBACK,
        RUNNER_OPT_LAST,
};

/* The long options above, to be copied into a command's option table. */
extern const struct option runner_long_options[];
extern const size_t runner_n_long_options;

/*
 * A getopt_long table: the command's own options, then the shared ones,
 * then the terminating zero entry. Newly allocated; free() it.
 */
struct option *runner_options(const struct option *own, size_t n_own);

/* The help text for the shared options. */
extern const char runner_options_help[];

/* Handle one shared option; false when opt is not one of them. */
bool runner_flag(runner_flags *f, int opt, const char *arg);

/* The lock file apply and run hold in the state directory (see runner_open). */
#define RUNNER_LOCK_FILE "gitcd.lock"

typedef struct runner {
        int lock_fd; /* holds RUNNER_LOCK_FILE; -1 when closed */
        state_db *db;
        target *target;
        source *src;
        driver *drv;
        char *state_path;
        char *state_dir;
} runner;

/*
 * Take the exclusive lock on the state directory, then open the state
 * store, the target, the source and the driver. Prints a clear error and
 * returns -errno on failure: -EAGAIN when another gitcd holds the lock
 * ("another gitcd (pid N) holds DIR").
 */
int runner_open(const runner_flags *f, driver_progress_fn progress, void *userdata, runner *ret);
/*
 * Close and open again everything but the lock (gitcd run on SIGHUP), so no
 * other process can slip in between. On failure r is closed, lock included.
 */
int runner_reopen(const runner_flags *f, driver_progress_fn progress, void *userdata, runner *r);
/* Close everything and release the lock. */
void runner_close(runner *r);

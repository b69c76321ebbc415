/*
 * Shared set-up for the commands that reconcile: flags, then the lock on
 * the state directory, state store, target, source and driver, each failure
 * reported once with what to do.
 */
#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/runner.h"
#include "kube/kubeconfig.h"
#include "targets/kubernetes.h"
#include "targets/local.h"
#include "util/fs.h"
#include "util/xalloc.h"

const struct option runner_long_options[] = {
    {"source", required_argument, NULL, RUNNER_OPT_SOURCE},
    {"ref", required_argument, NULL, RUNNER_OPT_REF},
    {"path", required_argument, NULL, RUNNER_OPT_PATH},
    {"state", required_argument, NULL, RUNNER_OPT_STATE},
    {"target", required_argument, NULL, RUNNER_OPT_TARGET},
    {"etcd-dir", required_argument, NULL, RUNNER_OPT_ETCD_DIR},
    {"cache-dir", required_argument, NULL, RUNNER_OPT_CACHE_DIR},
    {"ssh-key", required_argument, NULL, RUNNER_OPT_SSH_KEY},
    {"ssh-passphrase-file", required_argument, NULL, RUNNER_OPT_SSH_PASSPHRASE_FILE},
    {"ssh-passphrase-env", required_argument, NULL, RUNNER_OPT_SSH_PASSPHRASE_ENV},
    {"ssh-agent", no_argument, NULL, RUNNER_OPT_SSH_AGENT},
    {"known-hosts", required_argument, NULL, RUNNER_OPT_KNOWN_HOSTS},
    {"https-ca", required_argument, NULL, RUNNER_OPT_HTTPS_CA},
    {"token-file", required_argument, NULL, RUNNER_OPT_TOKEN_FILE},
    {"token-env", required_argument, NULL, RUNNER_OPT_TOKEN_ENV},
    {"username", required_argument, NULL, RUNNER_OPT_USERNAME},
    {"verify-signatures", no_argument, NULL, RUNNER_OPT_VERIFY},
    {"allowed-signers", required_argument, NULL, RUNNER_OPT_ALLOWED_SIGNERS},
    {"allow-rollback", no_argument, NULL, RUNNER_OPT_ALLOW_ROLLBACK},
    {"prune", no_argument, NULL, RUNNER_OPT_PRUNE},
    {"kubeconfig", required_argument, NULL, RUNNER_OPT_KUBECONFIG},
    {"context", required_argument, NULL, RUNNER_OPT_CONTEXT},
    {"cluster-domain", required_argument, NULL, RUNNER_OPT_CLUSTER_DOMAIN},
};
const size_t runner_n_long_options = sizeof(runner_long_options) / sizeof(runner_long_options[0]);

const char runner_options_help[] =
    "Source:\n"
    "  --source SRC             a directory, a repository path, file://, ssh://,\n"
    "                           git@host:path or https:// URL (required)\n"
    "  --ref REF                branch, tag or commit id (default: the remote's HEAD)\n"
    "  --path DIR               folder inside the repository\n"
    "  --cache-dir DIR          where bare mirrors live (default: <state dir>/cache)\n"
    "  --ssh-key FILE           SSH private key; passphrase from --ssh-passphrase-file FILE\n"
    "                           or --ssh-passphrase-env VAR, or --ssh-agent\n"
    "  --known-hosts FILE       host keys, checked strictly (default: ~/.ssh/known_hosts)\n"
    "  --https-ca FILE          CA bundle for https:// sources\n"
    "  --token-file FILE        token or password for https://, or --token-env VAR;\n"
    "                           --username NAME\n"
    "  --verify-signatures      apply only commits signed by a key in --allowed-signers FILE\n"
    "  --allow-rollback         accept a head that does not descend from the last commit\n"
    "                           applied from the ref (refused by default; see\n"
    "                           docs/security.md)\n"
    "State and target:\n"
    "  --state PATH             state database (default: $GITCD_STATE_DIR/state.db or\n"
    "                           ./.gitcd/state.db); members of the local target live beside it\n"
    "  --target TARGET          where members run: local (the default), etcd processes\n"
    "                           on this host; or kubernetes, Pods through an API server\n"
    "  --kubeconfig FILE        kubernetes target: the kubeconfig (default: in-cluster\n"
    "                           configuration inside a Pod, else $KUBECONFIG or ~/.kube/config)\n"
    "  --context NAME           kubernetes target: the kubeconfig context (default: current)\n"
    "  --cluster-domain DOMAIN  kubernetes target: the DNS domain of Services\n"
    "                           (default: cluster.local)\n"
    "  --etcd-dir DIR           etcd binaries as DIR/<version>/etcd (default: $GITCD_ETCD_DIR,\n"
    "                           then ~/.cache/gitcd/etcd, then etcd on PATH)\n"
    "  --prune                  stop the members of clusters removed from the source\n"
    "                           (their data is kept)\n";

struct option *runner_options(const struct option *own, size_t n_own)
{
        struct option *o = xcalloc(n_own + runner_n_long_options + 1, sizeof(struct option));
        memcpy(o, own, n_own * sizeof(struct option));
        memcpy(o + n_own, runner_long_options, runner_n_long_options * sizeof(struct option));
        return o;
}

bool runner_flag(runner_flags *f, int opt, const char *arg)
{
        switch (opt) {
        case RUNNER_OPT_SOURCE:
                f->src.url_or_path = arg;
                return true;
        case RUNNER_OPT_REF:
                f->src.ref = arg;
                return true;
        case RUNNER_OPT_PATH:
                f->src.subpath = arg;
                return true;
        case RUNNER_OPT_STATE:
                f->state = arg;
                return true;
        case RUNNER_OPT_TARGET:
                f->target = arg;
                return true;
        case RUNNER_OPT_ETCD_DIR:
                f->etcd_dir = arg;
                return true;
        case RUNNER_OPT_CACHE_DIR:
                f->cache_dir = arg;
                return true;
        case RUNNER_OPT_SSH_KEY:
                f->src.ssh_key_path = arg;
                return true;
        case RUNNER_OPT_SSH_PASSPHRASE_FILE:
                f->src.ssh_key_passphrase_file = arg;
                return true;
        case RUNNER_OPT_SSH_PASSPHRASE_ENV:
                f->src.ssh_key_passphrase_env = arg;
                return true;
        case RUNNER_OPT_SSH_AGENT:
                f->src.use_ssh_agent = true;
                return true;
        case RUNNER_OPT_KNOWN_HOSTS:
                f->src.known_hosts_path = arg;
                return true;
        case RUNNER_OPT_HTTPS_CA:
                f->src.https_ca_file = arg;
                return true;
        case RUNNER_OPT_TOKEN_FILE:
                f->src.https_token_file = arg;
                return true;
        case RUNNER_OPT_TOKEN_ENV:
                f->src.https_token_env = arg;
                return true;
        case RUNNER_OPT_USERNAME:
                f->src.https_username = arg;
                return true;
        case RUNNER_OPT_VERIFY:
                f->src.verify_signatures = true;
                return true;
        case RUNNER_OPT_ALLOWED_SIGNERS:
                f->src.allowed_signers_path = arg;
                return true;
        case RUNNER_OPT_ALLOW_ROLLBACK:
                f->src.allow_rollback = true;
                return true;
        case RUNNER_OPT_PRUNE:
                f->prune = true;
                return true;
        case RUNNER_OPT_KUBECONFIG:
                f->kubeconfig = arg;
                return true;
        case RUNNER_OPT_CONTEXT:
                f->kube_context = arg;
                return true;
        case RUNNER_OPT_CLUSTER_DOMAIN:
                f->cluster_domain = arg;
                return true;
        default:
                return false;
        }
}

static char *default_known_hosts(void)
{
        const char *home = getenv("HOME");
        return home ? xasprintf("%s/.ssh/known_hosts", home) : NULL;
}

static int open_local(const runner_flags *f, const char *state_dir, target **ret)
{
        local_target_opts lo = {.state_dir = state_dir, .etcd_dir = f->etcd_dir};
        int k = local_target_new(&lo, ret);
        if (k < 0)
                fprintf(stderr, "gitcd: cannot set up the local target in %s: %s\n", state_dir,
                        strerror(-k));
        return k;
}

/*
 * The kubernetes target: --kubeconfig (and --context), else the in-cluster
 * configuration inside a Pod, else $KUBECONFIG or ~/.kube/config.
 */
static int open_kubernetes(const runner_flags *f, const char *state_dir, target **ret)
{
        kube_config *cfg = NULL;
        char *err = NULL;
        int k = kube_config_resolve(f->kubeconfig, f->kube_context, &cfg, &err);
        if (k < 0) {
                fprintf(stderr, "gitcd: cannot load the Kubernetes configuration: %s\n",
                        err ? err : strerror(-k));
                free(err);
                return k;
        }
        if (cfg->insecure_skip_tls_verify)
                fprintf(stderr,
                        "gitcd: warning: insecure-skip-tls-verify is set for %s (%s): the "
                        "API server's certificate is not checked\n",
                        cfg->server, cfg->source);
        kubernetes_target_opts ko = {
            .config = cfg, .state_dir = state_dir, .cluster_domain = f->cluster_domain};
        k = kubernetes_target_new(&ko, ret);
        if (k < 0)
                fprintf(stderr, "gitcd: cannot set up the kubernetes target for %s: %s\n",
                        cfg->server, strerror(-k));
        kube_config_free(cfg);
        return k;
}

static int check_flags(const runner_flags *f)
{
        if (isempty(f->src.url_or_path)) {
                fprintf(stderr, "gitcd: --source is required\n");
                return -EINVAL;
        }
        if (f->target && !streq(f->target, "local") && !streq(f->target, "kubernetes")) {
                fprintf(stderr, "gitcd: unknown target '%s' (available: local, kubernetes)\n",
                        f->target);
                return -EINVAL;
        }
        bool kube = f->target && streq(f->target, "kubernetes");
        if (!kube && (f->kubeconfig || f->kube_context || f->cluster_domain)) {
                fprintf(stderr, "gitcd: --kubeconfig, --context and --cluster-domain need "
                                "--target kubernetes\n");
                return -EINVAL;
        }
        if (f->src.verify_signatures && isempty(f->src.allowed_signers_path)) {
                fprintf(stderr, "gitcd: --verify-signatures needs --allowed-signers FILE\n");
                return -EINVAL;
        }
        return 0;
}

/*
 * One writer per state directory: apply and run hold an exclusive lock on
 * <state dir>/gitcd.lock for as long as they run, since two reconcilers on
 * one state would take turns undoing each other's steps (and, on the local
 * target, share the members' folders). plan, status and log never take it.
 */
static int lock_state(runner *r)
{
        int k = mkdir_p(r->state_dir, 0750);
        if (k < 0) {
                fprintf(stderr, "gitcd: cannot create the state folder %s: %s\n", r->state_dir,
                        strerror(-k));
                return k;
        }
        _cleanup_free_ char *path = path_join(r->state_dir, RUNNER_LOCK_FILE);
        pid_t holder = 0;
        k = lock_file_try(path, &r->lock_fd, &holder);
        if (k == -EAGAIN) {
                if (holder > 0)
                        fprintf(stderr,
                                "gitcd: another gitcd (pid %ld) holds %s; stop it first, "
                                "or use another --state\n",
                                (long)holder, r->state_dir);
                else
                        fprintf(stderr,
                                "gitcd: another gitcd holds %s (lock %s); stop it first, "
                                "or use another --state\n",
                                r->state_dir, path);
        } else if (k < 0) {
                fprintf(stderr, "gitcd: cannot lock %s: %s\n", path, strerror(-k));
        }
        return k;
}

/* Everything but the lock: the state store, the target, the source and the driver. */
static int open_parts(const runner_flags *f, driver_progress_fn progress, void *userdata, runner *r)
{
        bool kube = f->target && streq(f->target, "kubernetes");
        int k = state_open(r->state_path, STATE_OPEN_READ_WRITE, &r->db);
        if (k < 0) {
                fprintf(stderr, "gitcd: %s\n", state_last_error());
                return k;
        }
        k = kube ? open_kubernetes(f, r->state_dir, &r->target)
                 : open_local(f, r->state_dir, &r->target);
        if (k < 0)
                return k;
        source_opts so = f->src;
        _cleanup_free_ char *cache =
            f->cache_dir ? xstrdup(f->cache_dir) : path_join(r->state_dir, "cache");
        so.cache_dir = cache;
        _cleanup_free_ char *kh = NULL;
        if (!so.known_hosts_path) {
                kh = default_known_hosts();
                so.known_hosts_path = kh;
        }
        char *err = NULL;
        k = source_open(&so, &r->src, &err);
        if (k < 0) {
                fprintf(stderr, "gitcd: %s\n", err ? err : strerror(-k));
                free(err);
                return k;
        }
        driver_opts dopts = {.db = r->db,
                             .target = r->target,
                             .src = r->src,
                             .prune = f->prune,
                             .progress = progress,
                             .userdata = userdata};
        k = driver_new(&dopts, &r->drv);
        if (k < 0) {
                fprintf(stderr, "gitcd: %s\n", strerror(-k));
                return k;
        }
        return 0;
}

static void close_parts(runner *r)
{
        driver_free(r->drv);
        source_free(r->src);
        target_free(r->target);
        state_close(r->db);
        r->drv = NULL;
        r->src = NULL;
        r->target = NULL;
        r->db = NULL;
}

int runner_open(const runner_flags *f, driver_progress_fn progress, void *userdata, runner *r)
{
        memset(r, 0, sizeof(*r));
        r->lock_fd = -1;
        int k = check_flags(f);
        if (k < 0)
                return k;
        r->state_path = cli_state_path(f->state);
        _cleanup_free_ char *copy = xstrdup(r->state_path);
        r->state_dir = xstrdup(dirname(copy));
        k = lock_state(r);
        if (k < 0) {
                runner_close(r);
                return k;
        }
        /* Members run with their own working directory: give them absolute paths. */
        char *abs = realpath(r->state_dir, NULL);
        if (abs) {
                free(r->state_dir);
                r->state_dir = abs;
        }
        k = open_parts(f, progress, userdata, r);
        if (k < 0)
                runner_close(r);
        return k;
}

int runner_reopen(const runner_flags *f, driver_progress_fn progress, void *userdata, runner *r)
{
        assert(r->lock_fd >= 0);
        close_parts(r);
        int k = open_parts(f, progress, userdata, r);
        if (k < 0)
                runner_close(r);
        return k;
}

void runner_close(runner *r)
{
        close_parts(r);
        if (r->lock_fd >= 0)
                close(r->lock_fd);
        free(r->state_path);
        free(r->state_dir);
        memset(r, 0, sizeof(*r));
        r->lock_fd = -1;
}

/*
 * Shared set-up for the commands that reconcile: flags (and for the daemon
 * its configuration file), then the lock on the state directory, state
 * store, targets, sources and their drivers, each failure reported once with
 * what to do.
 *
 * Several sources feed one state store, each through a driver of its own.
 * Which source may act on a cluster is decided here (driver_claim_fn): the
 * one whose revision defines it. A cluster two sources define is a
 * conflict: reported once, and neither source acts on it until one of them
 * stops defining it (a new revision, or SIGHUP). No source orphans a
 * cluster another source defines, nor anything before every source has
 * been read once.
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
#include "api/spec.h"
#include "kube/kubeconfig.h"
#include "ops/metrics.h"
#include "targets/locked.h"
#include "targets/registry.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
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
    {"snapshot-image", required_argument, NULL, RUNNER_OPT_SNAPSHOT_IMAGE},
    {"hosts-ssh-key", required_argument, NULL, RUNNER_OPT_HOSTS_SSH_KEY},
    {"hosts-passphrase-file", required_argument, NULL, RUNNER_OPT_HOSTS_PASSPHRASE_FILE},
    {"hosts-known-hosts", required_argument, NULL, RUNNER_OPT_HOSTS_KNOWN_HOSTS},
    {"hosts-ports", required_argument, NULL, RUNNER_OPT_HOSTS_PORTS},
};
const size_t runner_n_long_options = sizeof(runner_long_options) / sizeof(runner_long_options[0]);

/*
 * Words of text after col columns, wrapped at 80: a continuation line
 * starts after "\n", its indent of indent columns left to the printer.
 */
static void sb_wrap(strbuf *sb, const char *text, size_t col, size_t indent)
{
        for (const char *p = text; *p;) {
                size_t len = strcspn(p, " ");
                if (col > indent && col + 1 + len > 80) {
                        sb_appendc(sb, '\n');
                        col = indent;
                } else if (p != text) {
                        sb_appendc(sb, ' ');
                        col++;
                }
                sb_printf(sb, "%.*s", (int)len, p);
                col += len;
                p += len;
                p += *p == ' ';
        }
}

/* "where members run: ...": every kind of targets/registry.h, the default first. */
static char *target_kinds_text(void)
{
        strbuf what = STRBUF_INIT;
        sb_printf(&what, "where members run:");
        for (size_t i = 0; i < TARGET_KIND_COUNT; i++) {
                const target_kind *k = &target_kinds[i];
                sb_printf(&what, " %s%s%s, %s%s", i + 1 == TARGET_KIND_COUNT && i > 0 ? "or " : "",
                          k->name, k == target_kind_default() ? " (the default)" : "", k->summary,
                          i + 1 < TARGET_KIND_COUNT ? ";" : "");
        }
        return sb_detach(&what);
}

const char *runner_target_help(void)
{
        static char *help;
        if (help)
                return help;
        _cleanup_free_ char *what = target_kinds_text();
        strbuf sb = STRBUF_INIT;
        sb_wrap(&sb, what, RUNNER_HELP_COLUMN, RUNNER_HELP_COLUMN);
        help = sb_detach(&sb);
        return help;
}

struct option *runner_options(const struct option *own, size_t n_own)
{
        struct option *o = xcalloc(n_own + runner_n_long_options + 1, sizeof(struct option));
        memcpy(o, own, n_own * sizeof(struct option));
        memcpy(o + n_own, runner_long_options, runner_n_long_options * sizeof(struct option));
        return o;
}

bool runner_target_given(const runner_flags *f)
{
        return f->target || f->kubeconfig || f->kube_context || f->cluster_domain ||
               f->snapshot_image || f->hosts.ssh_key || f->hosts.passphrase_file ||
               f->hosts.known_hosts || f->hosts_ports;
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
        case RUNNER_OPT_SNAPSHOT_IMAGE:
                f->snapshot_image = arg;
                return true;
        case RUNNER_OPT_HOSTS_SSH_KEY:
                f->hosts.ssh_key = arg;
                return true;
        case RUNNER_OPT_HOSTS_PASSPHRASE_FILE:
                f->hosts.passphrase_file = arg;
                return true;
        case RUNNER_OPT_HOSTS_KNOWN_HOSTS:
                f->hosts.known_hosts = arg;
                return true;
        case RUNNER_OPT_HOSTS_PORTS:
                f->hosts_ports = arg;
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

/* A warning of a target being opened, for the person at the terminal. */
static void warn_stderr(void *userdata, const char *message)
{
        (void)userdata;
        fprintf(stderr, "gitcd: warning: %s\n", message);
}

/* What a target is opened with, from the settings of c (strings borrowed from c). */
static target_settings settings_of(const ops_config *c, const char *state_dir)
{
        return (target_settings){.state_dir = state_dir,
                                 .etcd_dir = c->etcd_dir,
                                 .kubeconfig = c->kubeconfig,
                                 .kube_context = c->kube_context,
                                 .cluster_domain = c->cluster_domain,
                                 .snapshot_image = c->snapshot_image,
                                 .ssh_key = c->hosts.ssh_key,
                                 .ssh_passphrase_file = c->hosts.passphrase_file,
                                 .known_hosts = c->hosts.known_hosts,
                                 .client_port = c->hosts.client_port,
                                 .peer_port = c->hosts.peer_port,
                                 .metrics_port = c->hosts.metrics_port,
                                 .preflight = c->hosts.preflight,
                                 .preflight_sync_p99_ms = c->hosts.preflight_sync_p99_ms,
                                 .preflight_clock_offset_ms = c->hosts.preflight_clock_offset_ms,
                                 .preflight_interval_ms = c->hosts.preflight_interval_ms,
                                 .warn = warn_stderr};
}

/* Open a target of kind with c's settings over state_dir; prints why not. */
static int open_kind(const target_kind *kind, const ops_config *c, const char *state_dir,
                     target **ret)
{
        target_settings s = settings_of(c, state_dir);
        _cleanup_free_ char *err = NULL;
        int k = kind->open(&s, ret, &err);
        if (k < 0)
                fprintf(stderr, "gitcd: %s\n", err ? err : strerror(-k));
        return k;
}

void runner_unknown_target(const char *prog, const char *name)
{
        _cleanup_free_ char *names = target_kind_names(", ", ", ");
        fprintf(stderr, "%s: unknown target '%s' (available: %s)\n", prog, name, names);
}

/* --hosts-ports CLIENT,PEER,METRICS into h. */
static int hosts_ports(const char *arg, ops_hosts *h)
{
        int v[3];
        char tail;
        if (sscanf(arg, "%d,%d,%d%c", &v[0], &v[1], &v[2], &tail) != 3 || v[0] < 1 ||
            v[0] > 65535 || v[1] < 1 || v[1] > 65535 || v[2] < 1 || v[2] > 65535) {
                fprintf(stderr,
                        "gitcd: --hosts-ports takes three port numbers: CLIENT,PEER,METRICS "
                        "(e.g. 2379,2380,2381), not '%s'\n",
                        arg);
                return -EINVAL;
        }
        h->client_port = v[0];
        h->peer_port = v[1];
        h->metrics_port = v[2];
        return 0;
}

static const char *source_target(const ops_config *c, const ops_source *s)
{
        return s->target ? s->target : c->target ? c->target : target_kind_default()->name;
}

/* A secret file the settings name must be gitcd's own (util/fs.h); NULL passes. */
static int check_secret(const char *path, const char *what)
{
        if (!path)
                return 0;
        _cleanup_free_ char *err = NULL;
        int k = secret_file_check(path, what, &err);
        if (k < 0)
                fprintf(stderr, "gitcd: %s\n", err);
        return k;
}

/*
 * The files of notifications, which are read only when one is sent, are
 * checked when the settings are read: a daemon does not start (and a
 * SIGHUP keeps the settings in force) with a secret others can read. The
 * sources, the hosts target and the endpoints check their own when they
 * are opened.
 */
static int check_secret_files(const ops_config *c)
{
        for (size_t i = 0; i < c->n_webhooks; i++) {
                int k = check_secret(c->webhooks[i].secret_file, "secret file");
                if (k < 0)
                        return k;
        }
        for (size_t i = 0; i < c->n_sources; i++) {
                const ops_commit_status *cs = &c->sources[i].status;
                int k =
                    cs->forge != OPS_FORGE_NONE ? check_secret(cs->token_file, "token file") : 0;
                if (k < 0)
                        return k;
        }
        return 0;
}

static int check_settings(const ops_config *c)
{
        if (c->n_sources == 0) {
                if (c->file)
                        fprintf(stderr,
                                "gitcd: %s names no sources (sources:), and no --source was "
                                "given\n",
                                c->file);
                else
                        fprintf(stderr, "gitcd: --source is required\n");
                return -EINVAL;
        }
        if (c->target && !target_kind_find(c->target)) {
                runner_unknown_target("gitcd", c->target);
                return -EINVAL;
        }
        bool used[TARGET_KIND_COUNT] = {false};
        for (size_t i = 0; i < c->n_sources; i++) {
                const ops_source *s = &c->sources[i];
                const target_kind *kind = target_kind_find(source_target(c, s));
                if (kind)
                        used[target_kind_index(kind)] = true;
                if (isempty(s->src.url_or_path)) {
                        fprintf(stderr, "gitcd: source %s has no url\n", s->name);
                        return -EINVAL;
                }
                if ((s->kubeconfig || s->kube_context) && kind &&
                    !(kind->caps & TARGET_CAP_KUBE_CONTEXTS)) {
                        fprintf(stderr,
                                "gitcd: %s:%d:%d: source %s: kubernetes (kubeconfig, context) "
                                "needs target kubernetes, and its target is %s\n",
                                c->file ? c->file : "configuration", s->kube_context_line,
                                s->kube_context_col, s->name, kind->name);
                        return -EINVAL;
                }
                if (s->src.verify_signatures && isempty(s->src.allowed_signers_path)) {
                        fprintf(stderr,
                                "gitcd: --verify-signatures needs --allowed-signers FILE\n");
                        return -EINVAL;
                }
                const policy_at *at = NULL;
                if (s->policy && policy_wants_approvals(s->policy, &at) &&
                    !s->src.verify_signatures) {
                        fprintf(stderr,
                                "gitcd: %s:%d:%d: policy.approvals: approvals are counted in "
                                "trusted commit signatures; source %s needs "
                                "--verify-signatures --allowed-signers FILE\n",
                                at->file, at->line, at->col, s->name);
                        return -EINVAL;
                }
        }
        /* A kind no source uses would ignore its settings: refused. */
        target_settings given = settings_of(c, NULL);
        for (size_t i = 0; i < TARGET_KIND_COUNT; i++) {
                const target_kind *kind = &target_kinds[i];
                if (!used[i] && kind->settings_given && kind->settings_given(&given)) {
                        fprintf(stderr, "gitcd: %s need --target %s\n", kind->options, kind->name);
                        return -EINVAL;
                }
        }
        const ops_hosts *h = &c->hosts;
        if (h->passphrase_file && !h->ssh_key) {
                fprintf(stderr, "gitcd: --hosts-passphrase-file needs --hosts-ssh-key\n");
                return -EINVAL;
        }
        return check_secret_files(c);
}

/* Whether any source flag other than --source was given. */
static bool source_flags_given(const source_opts *o)
{
        return o->ref || o->subpath || o->ssh_key_path || o->ssh_key_passphrase_file ||
               o->ssh_key_passphrase_env || o->use_ssh_agent || o->known_hosts_path ||
               o->https_ca_file || o->https_token_file || o->https_token_env || o->https_username ||
               o->verify_signatures || o->allowed_signers_path || o->allow_rollback;
}

/* Flags given on the command line amend a source of the file. */
static void amend_source(source_opts *dst, const source_opts *o)
{
#define AMEND(field)                                                                               \
        if (o->field)                                                                              \
        dst->field = o->field
        AMEND(ref);
        AMEND(subpath);
        AMEND(ssh_key_path);
        AMEND(ssh_key_passphrase_file);
        AMEND(ssh_key_passphrase_env);
        AMEND(use_ssh_agent);
        AMEND(known_hosts_path);
        AMEND(https_ca_file);
        AMEND(https_token_file);
        AMEND(https_token_env);
        AMEND(https_username);
        AMEND(verify_signatures);
        AMEND(allowed_signers_path);
        AMEND(allow_rollback);
#undef AMEND
}

int runner_settings(const runner_flags *f, const char *config, int64_t interval_ms,
                    ops_config **ret, diag_list *diags)
{
        _cleanup_(ops_config_freep) ops_config *c = NULL;
        if (config) {
                int k = ops_config_load(config, &c, diags);
                if (k < 0)
                        return k;
        } else {
                c = ops_config_new();
        }
        if (f->src.url_or_path) {
                /* The file's policy for that url, if it names the source; else its top-level one. */
                const policy *pol = ops_config_policy_for(c, f->src.url_or_path);
                free(c->sources);
                c->sources = XNEW(ops_source);
                c->n_sources = 1;
                c->sources[0].name = "default";
                c->sources[0].src = f->src;
                c->sources[0].policy = pol;
        } else if (source_flags_given(&f->src)) {
                if (c->n_sources != 1) {
                        fprintf(stderr, "gitcd: source flags such as --ref need --source when "
                                        "the configuration has several sources\n");
                        return -EINVAL;
                }
                amend_source(&c->sources[0].src, &f->src);
        }
        if (f->state)
                c->state = f->state;
        if (f->target)
                c->target = f->target;
        if (f->kubeconfig)
                c->kubeconfig = f->kubeconfig;
        if (f->kube_context)
                c->kube_context = f->kube_context;
        if (f->cluster_domain)
                c->cluster_domain = f->cluster_domain;
        if (f->snapshot_image)
                c->snapshot_image = f->snapshot_image;
        if (f->hosts.ssh_key)
                c->hosts.ssh_key = f->hosts.ssh_key;
        if (f->hosts.passphrase_file)
                c->hosts.passphrase_file = f->hosts.passphrase_file;
        if (f->hosts.known_hosts)
                c->hosts.known_hosts = f->hosts.known_hosts;
        if (f->hosts_ports && hosts_ports(f->hosts_ports, &c->hosts) < 0)
                return -EINVAL;
        if (f->etcd_dir)
                c->etcd_dir = f->etcd_dir;
        if (f->cache_dir)
                c->cache_dir = f->cache_dir;
        if (f->prune)
                c->prune = true;
        if (interval_ms > 0)
                c->interval_ms = interval_ms;
        if (f->observe_interval_ms > 0)
                c->observe_interval_ms = f->observe_interval_ms;
        if (f->workers > 0)
                c->workers = f->workers;
        if (f->listen)
                c->listen = f->listen;
        if (f->listen_token_file)
                c->token_file = f->listen_token_file;
        if (f->listen_tls_cert)
                c->tls_cert_file = f->listen_tls_cert;
        if (f->listen_tls_key)
                c->tls_key_file = f->listen_tls_key;
        if (!c->tls_cert_file != !c->tls_key_file) {
                fprintf(stderr, "gitcd: --tls-cert and --tls-key go together\n");
                return -EINVAL;
        }
        if (c->interval_ms <= 0)
                c->interval_ms = 30 * 1000;
        for (size_t i = 0; i < c->n_sources; i++)
                if (c->sources[i].interval_ms <= 0)
                        c->sources[i].interval_ms = c->interval_ms;
        int k = check_settings(c);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(c);
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

static bool list_has(char *const *l, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (streq(l[i], s))
                        return true;
        return false;
}

static void list_add(char ***l, size_t *n, const char *s)
{
        *l = xrealloc(*l, (*n + 1) * sizeof(char *));
        (*l)[(*n)++] = xstrdup(s);
}

static void list_free(char ***l, size_t *n)
{
        for (size_t i = 0; i < *n; i++)
                free((*l)[i]);
        free(*l);
        *l = NULL;
        *n = 0;
}

/* Another source than `self` defines the cluster. */
static const runner_source *other_definer(const runner *r, size_t self, const char *cluster)
{
        for (size_t i = 0; i < r->n_sources; i++)
                if (i != self && list_has(r->sources[i].defines, r->sources[i].n_defines, cluster))
                        return &r->sources[i];
        return NULL;
}

static void report_conflict(runner *r, const char *cluster, const runner_source *a,
                            const runner_source *b)
{
        if (list_has(r->conflicts, r->n_conflicts, cluster))
                return;
        list_add(&r->conflicts, &r->n_conflicts, cluster);
        log_error("%s: defined by two sources, %s and %s; refused until only one defines it",
                  cluster, a->conf->name, b->conf->name);
        _cleanup_free_ char *why =
            xasprintf("defined by sources %s and %s", a->conf->name, b->conf->name);
        state_audit_event ev = {.time_ms = now_wall_ms(),
                                .cluster = (char *)cluster,
                                .action = "cluster.conflict",
                                .reason = why,
                                .outcome = "rejected"};
        (void)state_audit_append(r->db, &ev, NULL);
}

/* Sources and drivers a reload retired with passes in flight (runner_retired_reap). */
typedef struct runner_retired {
        runner_source *sources;
        size_t n_sources;
        state_db *db;
} runner_retired;

/* A retired driver's pass holds the cluster: no new driver passes it until that ends. */
static bool retired_busy(const runner *r, const char *cluster)
{
        for (size_t i = 0; i < r->n_retired; i++)
                for (size_t j = 0; j < r->retired[i].n_sources; j++)
                        if (driver_cluster_busy(r->retired[i].sources[j].drv, cluster))
                                return true;
        return false;
}

static bool claim(const char *cluster, driver_claim what, void *userdata)
{
        runner_source *self = userdata;
        runner *r = self->owner;
        if (what == DRIVER_CLAIM_PASS && retired_busy(r, cluster))
                return false;
        size_t index = (size_t)(self - r->sources);
        const runner_source *other = other_definer(r, index, cluster);
        switch (what) {
        case DRIVER_CLAIM_DEFINE:
                list_add(&self->pending, &self->n_pending, cluster);
                if (other)
                        report_conflict(r, cluster, other, self);
                return !other;
        case DRIVER_CLAIM_PASS:
                if (other)
                        report_conflict(r, cluster, self, other);
                return !other;
        case DRIVER_CLAIM_ORPHAN:
                for (size_t i = 0; i < r->n_sources; i++)
                        if (!r->sources[i].synced && i != index)
                                return false;
                return !other;
        }
        return false;
}

/*
 * After each pass: count it, and publish gitcd's client identity toward the
 * cluster for the metrics collector (which runs on another thread and must
 * not touch the target), resolved from the spec the reconciler latched:
 * again only when that spec changed (most passes change nothing, and
 * parsing the spec cost more than the pass itself).
 */
static void pass_done(const char *cluster, const pass_result *res, int64_t duration_ms,
                      void *userdata)
{
        runner_source *rs = userdata;
        ops_metrics_pass(cluster, res, duration_ms);
        _cleanup_free_ char *hash = NULL;
        if (state_cluster_spec_hash(rs->owner->db, cluster, &hash) < 0)
                return;
        size_t slot = 0;
        bool seen = strmap_get(&rs->tls_for, cluster, &slot);
        if (seen && hash && streq_ptr(rs->tls_hash[slot], hash))
                return;
        state_cluster *sc = NULL;
        if (state_cluster_get(rs->owner->db, cluster, &sc) < 0)
                return;
        etcd_cluster *c = spec_from_json_text(state_cluster_spec_json(sc), cluster);
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (c && target_client_tls(rs->target, c, &ca, &cert, &key) >= 0) {
                ops_metrics_set_client_tls(cluster, ca, cert, key);
                if (!seen) {
                        slot = rs->tls_for.n;
                        (void)strmap_put(&rs->tls_for, cluster, slot);
                        rs->tls_hash =
                            xgrow(rs->tls_hash, &rs->alloc_tls_hash, slot + 1, sizeof(char *));
                        rs->tls_hash[slot] = NULL;
                }
                free(rs->tls_hash[slot]);
                rs->tls_hash[slot] = TAKE_PTR(hash);
        }
        etcd_cluster_free(c);
        state_cluster_free(sc);
}

int runner_open_target(const ops_config *c, const char *state_dir, target **ret)
{
        const target_kind *kind = target_kind_or_default(c->target);
        if (!kind) {
                runner_unknown_target("gitcd", c->target);
                return -EINVAL;
        }
        return open_kind(kind, c, state_dir, ret);
}

static const char *or_empty(const char *s)
{
        return s ? s : "";
}

/* What the targets are opened with: a reload that keeps it may keep the targets. */
static char *target_key(const ops_config *c)
{
        const ops_hosts *h = &c->hosts;
        strbuf files = STRBUF_INIT;
        for (size_t i = 0; i < c->n_sources; i++)
                sb_printf(&files, "\n%s", or_empty(c->sources[i].kubeconfig));
        _cleanup_free_ char *f = sb_detach(&files);
        return xasprintf("%s%s\n%s\n%s\n%s\n%s\n%s\n%s\n%d %d %d %d", f, or_empty(c->etcd_dir),
                         or_empty(c->kubeconfig), or_empty(c->kube_context),
                         or_empty(c->cluster_domain), or_empty(h->ssh_key),
                         or_empty(h->passphrase_file), or_empty(h->known_hosts), h->client_port,
                         h->peer_port, h->metrics_port, c->workers > 1);
}

static void sources_free(runner_source *sources, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                runner_source *rs = &sources[i];
                driver_free(rs->drv);
                source_free(rs->src);
                list_free(&rs->defines, &rs->n_defines);
                list_free(&rs->pending, &rs->n_pending);
                for (size_t j = 0; j < rs->tls_for.n; j++)
                        free(rs->tls_hash[j]);
                free(rs->tls_hash);
                strmap_release(&rs->tls_for);
        }
        free(sources);
}

static void retired_free(runner_retired *rt)
{
        sources_free(rt->sources, rt->n_sources);
        state_close(rt->db);
}

int runner_retired_reap(runner *r)
{
        int left = 0;
        for (size_t i = 0; i < r->n_retired;) {
                int n = 0;
                for (size_t j = 0; j < r->retired[i].n_sources; j++)
                        n += driver_quiesce(r->retired[i].sources[j].drv, 0);
                if (n > 0) {
                        left += n;
                        i++;
                        continue;
                }
                retired_free(&r->retired[i]);
                r->retired[i] = r->retired[--r->n_retired];
        }
        if (r->n_retired == 0) {
                free(r->retired);
                r->retired = NULL;
        }
        return left;
}

int runner_retired_quiesce(runner *r, int timeout_ms)
{
        int64_t end = now_mono_ms() + timeout_ms;
        int left = 0;
        for (size_t i = 0; i < r->n_retired; i++)
                for (size_t j = 0; j < r->retired[i].n_sources; j++)
                        left += driver_quiesce(r->retired[i].sources[j].drv,
                                               (int)MAX(end - now_mono_ms(), 0));
        return left;
}

/* Whether the kubeconfig of a source's kind (userdata) has context (intake_kube.check). */
static int kube_check(void *userdata, const char *context, char **ret_error)
{
        runner_source *rs = userdata;
        target_settings s = {.kubeconfig = rs->kubeconfig};
        return rs->kind->check_context(&s, context, ret_error);
}

/*
 * The slot of the target of source s: its kind's, or, for a source that
 * names a kubeconfig file other than the configuration's, that file's.
 * NULL when there are more such files than slots.
 */
static target **target_slot(runner *r, const ops_config *c, const ops_source *s,
                            const target_kind *kind)
{
        if (!(kind->caps & TARGET_CAP_KUBE_CONTEXTS) || !s->kubeconfig ||
            streq_ptr(s->kubeconfig, c->kubeconfig))
                return &r->targets[target_kind_index(kind)];
        for (size_t j = 0; j < RUNNER_KUBECONFIGS_MAX; j++) {
                if (!r->kubeconfigs[j])
                        r->kubeconfigs[j] = xstrdup(s->kubeconfig);
                if (streq(r->kubeconfigs[j], s->kubeconfig))
                        return &r->targets[TARGET_KIND_COUNT + j];
        }
        return NULL;
}

/* Everything but the lock: the state store, the targets, the sources and their drivers. */
static int open_parts(const ops_config *c, driver_progress_fn progress, void *userdata, runner *r)
{
        int k = state_open(r->state_path, STATE_OPEN_READ_WRITE, &r->db);
        if (k < 0) {
                fprintf(stderr, "gitcd: %s\n", state_last_error());
                return k;
        }
        r->sources = xcalloc(c->n_sources, sizeof(runner_source));
        r->n_sources = c->n_sources;
        for (size_t i = 0; i < c->n_sources; i++) {
                runner_source *rs = &r->sources[i];
                rs->conf = &c->sources[i];
                rs->interval_ms = rs->conf->interval_ms > 0 ? rs->conf->interval_ms : 30000;
                const target_kind *kind = target_kind_find(source_target(c, rs->conf));
                assert(kind); /* check_settings() */
                target **t = target_slot(r, c, rs->conf, kind);
                if (!t) {
                        fprintf(stderr, "gitcd: the sources name more than %d kubeconfig files\n",
                                RUNNER_KUBECONFIGS_MAX);
                        return -E2BIG;
                }
                if (!*t) {
                        ops_config own = *c;
                        if (rs->conf->kubeconfig && kind->caps & TARGET_CAP_KUBE_CONTEXTS)
                                own.kubeconfig = rs->conf->kubeconfig;
                        k = open_kind(kind, &own, r->state_dir, t);
                        if (k < 0)
                                return k;
                        /* Worker threads share it (reconciler/driver.h). */
                        if (c->workers > 1)
                                (void)target_locked_new(*t, t);
                }
                rs->target = *t;
                rs->kind = kind;
                if (kind->check_context) {
                        rs->kubeconfig =
                            rs->conf->kubeconfig ? rs->conf->kubeconfig : c->kubeconfig;
                        rs->kube = (intake_kube){.context = rs->conf->kube_context,
                                                 .file = c->file,
                                                 .line = rs->conf->kube_context_line,
                                                 .col = rs->conf->kube_context_col,
                                                 .check = kube_check,
                                                 .userdata = rs};
                }
                source_opts so = rs->conf->src;
                _cleanup_free_ char *cache =
                    c->cache_dir ? xstrdup(c->cache_dir) : path_join(r->state_dir, "cache");
                so.cache_dir = cache;
                _cleanup_free_ char *kh = NULL;
                if (!so.known_hosts_path) {
                        kh = default_known_hosts();
                        so.known_hosts_path = kh;
                }
                char *err = NULL;
                k = source_open(&so, &rs->src, &err);
                if (k < 0) {
                        if (c->n_sources > 1)
                                fprintf(stderr, "gitcd: source %s: %s\n", rs->conf->name,
                                        err ? err : strerror(-k));
                        else
                                fprintf(stderr, "gitcd: %s\n", err ? err : strerror(-k));
                        free(err);
                        return k;
                }
                rs->owner = r;
                driver_opts dopts = {.db = r->db,
                                     .target = rs->target,
                                     .src = rs->src,
                                     .prune = c->prune,
                                     .state_dir = r->state_dir,
                                     .etcd_dir = c->etcd_dir,
                                     .progress = progress,
                                     .userdata = userdata,
                                     .pass_done = pass_done,
                                     .pass_done_userdata = rs,
                                     /* one source: no conflicts, but a reload's retired passes */
                                     .claim = claim,
                                     .claim_userdata = rs,
                                     .idle_interval_ms = c->observe_interval_ms,
                                     .workers = c->workers,
                                     .policy = rs->conf->policy,
                                     .kube = kind->check_context ? &rs->kube : NULL,
                                     .source_name = rs->conf->name};
                k = driver_new(&dopts, &rs->drv);
                if (k < 0) {
                        fprintf(stderr, "gitcd: %s\n", strerror(-k));
                        return k;
                }
        }
        _cleanup_free_ const char **names = xcalloc(c->n_sources, sizeof(char *));
        for (size_t i = 0; i < c->n_sources; i++)
                names[i] = c->sources[i].name;
        ops_metrics_set_sources(names, c->n_sources);
        r->target = r->sources[0].target;
        r->src = r->sources[0].src;
        r->drv = r->sources[0].drv;
        str_assign(&r->target_key, target_key(c));
        return 0;
}

static void close_parts(runner *r)
{
        /* Retired passes use the targets: they end first (driver_free waits for them). */
        for (size_t i = 0; i < r->n_retired; i++)
                retired_free(&r->retired[i]);
        free(r->retired);
        r->retired = NULL;
        r->n_retired = 0;
        sources_free(r->sources, r->n_sources);
        r->sources = NULL;
        r->n_sources = 0;
        for (size_t i = 0; i < ARRAY_SIZE(r->targets); i++) {
                target_free(r->targets[i]);
                r->targets[i] = NULL;
        }
        for (size_t i = 0; i < ARRAY_SIZE(r->kubeconfigs); i++) {
                free(r->kubeconfigs[i]);
                r->kubeconfigs[i] = NULL;
        }
        list_free(&r->conflicts, &r->n_conflicts);
        state_close(r->db);
        r->drv = NULL;
        r->src = NULL;
        r->target = NULL;
        r->db = NULL;
}

int runner_sync(runner *r, size_t i, diag_list *diags)
{
        assert(i < r->n_sources);
        runner_source *rs = &r->sources[i];
        list_free(&rs->pending, &rs->n_pending);
        int k = driver_sync(rs->drv, diags);
        if (k == 1 || k == -EINVAL) {
                list_free(&rs->defines, &rs->n_defines);
                rs->defines = TAKE_PTR(rs->pending);
                rs->n_defines = rs->n_pending;
                rs->n_pending = 0;
                rs->synced = true;
                /* A conflict no source has any more is reported again if it comes back. */
                for (size_t j = 0; j < r->n_conflicts;) {
                        const char *cl = r->conflicts[j];
                        size_t n = 0;
                        for (size_t s = 0; s < r->n_sources; s++)
                                n += list_has(r->sources[s].defines, r->sources[s].n_defines, cl);
                        if (n < 2) {
                                free(r->conflicts[j]);
                                r->conflicts[j] = r->conflicts[--r->n_conflicts];
                        } else {
                                j++;
                        }
                }
        } else if (k == 0) {
                rs->synced = true;
        }
        list_free(&rs->pending, &rs->n_pending);
        return k;
}

const runner_source *runner_source_for(const runner *r, const char *cluster)
{
        if (r->n_sources == 1)
                return &r->sources[0];
        for (size_t i = 0; i < r->n_sources; i++)
                if (list_has(r->sources[i].defines, r->sources[i].n_defines, cluster))
                        return &r->sources[i];
        return NULL;
}

int runner_open_config(const ops_config *c, driver_progress_fn progress, void *userdata, runner *r)
{
        memset(r, 0, sizeof(*r));
        r->lock_fd = -1;
        int k = check_settings(c);
        if (k < 0)
                return k;
        r->state_path = cli_state_path(NULL, c);
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
        k = open_parts(c, progress, userdata, r);
        if (k < 0)
                runner_close(r);
        return k;
}

int runner_policy(const runner_flags *f, const char *prog, policy **ret)
{
        const char *path = cli_config_path(f->config, OPS_CONFIG_DEFAULT_PATH);
        if (!path) {
                *ret = policy_builtin();
                return 0;
        }
        ops_config *c = NULL;
        diag_list diags = DIAG_LIST_INIT;
        int k = ops_config_load(path, &c, &diags);
        diag_sort(&diags);
        diag_print(&diags, stderr);
        diag_list_release(&diags);
        if (k < 0) {
                fprintf(stderr,
                        "%s: the policy in %s cannot be used: fix the file, or name another with "
                        "--config FILE (a policy is never skipped)\n",
                        prog, path);
                return k;
        }
        *ret = policy_copy(ops_config_policy_for(c, f->src.url_or_path));
        ops_config_free(c);
        return 0;
}

int runner_open(const runner_flags *f, driver_progress_fn progress, void *userdata, runner *r)
{
        ops_config *c = NULL;
        diag_list diags = DIAG_LIST_INIT;
        _cleanup_(policy_freep) policy *pol = NULL;
        int k = runner_policy(f, "gitcd apply", &pol);
        if (k >= 0)
                k = runner_settings(f, NULL, 0, &c, &diags);
        diag_list_release(&diags);
        if (k >= 0) {
                ops_config_set_policy(c, pol);
                k = check_settings(c);
                if (k < 0) {
                        ops_config_free(c);
                        c = NULL;
                }
        }
        if (k < 0) {
                memset(r, 0, sizeof(*r));
                r->lock_fd = -1;
                return k;
        }
        k = runner_open_config(c, progress, userdata, r);
        if (k < 0) {
                ops_config_free(c);
                return k;
        }
        r->own_cfg = c;
        return 0;
}

int runner_reopen(const ops_config *c, driver_progress_fn progress, void *userdata, runner *r)
{
        assert(r->lock_fd >= 0);
        int in_flight = 0;
        for (size_t i = 0; i < r->n_sources; i++)
                in_flight += driver_quiesce(r->sources[i].drv, 0);
        _cleanup_free_ char *key = target_key(c);
        if (in_flight > 0 && streq_ptr(key, r->target_key)) {
                /* Retire the sources and drivers; keep the targets their passes use. */
                log_info("reload: %d pass(es) in flight end on the previous settings", in_flight);
                r->retired = xrealloc(r->retired, (r->n_retired + 1) * sizeof(runner_retired));
                r->retired[r->n_retired++] =
                    (runner_retired){.sources = r->sources, .n_sources = r->n_sources, .db = r->db};
                r->sources = NULL;
                r->n_sources = 0;
                r->db = NULL;
                r->drv = NULL;
                r->src = NULL;
                r->target = NULL;
                int k = open_parts(c, progress, userdata, r);
                if (k < 0)
                        close_parts(r);
                return k;
        }
        close_parts(r);
        int k = open_parts(c, progress, userdata, r);
        if (k < 0)
                close_parts(r);
        return k;
}

void runner_close(runner *r)
{
        close_parts(r);
        if (r->lock_fd >= 0)
                close(r->lock_fd);
        free(r->state_path);
        free(r->state_dir);
        ops_config_free(r->own_cfg);
        free(r->target_key);
        memset(r, 0, sizeof(*r));
        r->lock_fd = -1;
}

char *runner_state_dir(const char *db_path)
{
        _cleanup_free_ char *copy = xstrdup(db_path);
        char *abs = realpath(dirname(copy), NULL);
        if (abs)
                return abs;
        copy = xstrdup(db_path);
        return xstrdup(dirname(copy));
}

const char *runner_etcd_dir(const runner_flags *f, const ops_config *file)
{
        return f->etcd_dir ? f->etcd_dir : file ? file->etcd_dir : NULL;
}

/*
 * The target the cluster runs on: --target when given, else the one the
 * state store recorded, else the daemon file's `target:`, else local
 * (clusters recorded before the store kept it). A --target that
 * contradicts the record is refused: the command would run without the
 * cluster's client identity or credentials Secret. Another target's
 * options are refused when the command line gives them, and ignored when
 * the daemon's file does: one file holds the settings of every target its
 * sources use.
 */
int runner_cluster_target(state_db *db, const char *cluster, const runner_flags *f,
                          const ops_config *file, const char *prog, ops_config *ret)
{
        _cleanup_free_ char *recorded = NULL;
        if (state_cluster_target(db, cluster, &recorded) < 0) {
                fprintf(stderr, "%s: %s\n", prog, state_last_error());
                return -ENOENT;
        }
        if (recorded && !target_kind_find(recorded)) {
                fprintf(stderr,
                        "%s: %s runs on the target '%s', which this command "
                        "cannot open\n",
                        prog, cluster, recorded);
                return -EINVAL;
        }
        if (f->target && recorded && !streq(f->target, recorded)) {
                fprintf(stderr,
                        "%s: %s runs on the %s target (recorded when gitcd took its "
                        "spec in), not on --target %s\n",
                        prog, cluster, recorded, f->target);
                return -EINVAL;
        }
        const char *name = f->target              ? f->target
                           : recorded             ? recorded
                           : file && file->target ? file->target
                                                  : target_kind_default()->name;
        const target_kind *kind = target_kind_find(name);
        if (!kind) {
                runner_unknown_target(prog, name);
                return -EINVAL;
        }
        /* The command line's settings; the file's where it gives none, as for gitcd run. */
        ops_config c = {.target = kind->name,
                        .kubeconfig = f->kubeconfig,
                        .kube_context = f->kube_context,
                        .cluster_domain = f->cluster_domain,
                        .snapshot_image = f->snapshot_image,
                        .etcd_dir = runner_etcd_dir(f, file),
                        .hosts = f->hosts};
        /* Another kind's options on the command line: refused (--hosts-ports is parsed below). */
        target_settings given = settings_of(&c, NULL);
        given.client_port = f->hosts_ports ? 1 : 0;
        for (size_t i = 0; i < TARGET_KIND_COUNT; i++) {
                const target_kind *other = &target_kinds[i];
                if (other != kind && other->settings_given && other->settings_given(&given)) {
                        fprintf(stderr, "%s: %s runs on the %s target: %s are for the %s target\n",
                                prog, cluster, kind->name, other->options, other->name);
                        return -EINVAL;
                }
        }
        if (f->hosts_ports && hosts_ports(f->hosts_ports, &c.hosts) < 0)
                return -EINVAL;
        /*
         * Each kind reads only its own settings when it is opened, so the
         * file's settings of other kinds are never used.
         */
        if (file) {
                c.kubeconfig = c.kubeconfig ? c.kubeconfig : file->kubeconfig;
                c.kube_context = c.kube_context ? c.kube_context : file->kube_context;
                c.cluster_domain = c.cluster_domain ? c.cluster_domain : file->cluster_domain;
                c.snapshot_image = c.snapshot_image ? c.snapshot_image : file->snapshot_image;
                const ops_hosts *h = &file->hosts;
                c.hosts.ssh_key = c.hosts.ssh_key ? c.hosts.ssh_key : h->ssh_key;
                c.hosts.passphrase_file =
                    c.hosts.passphrase_file ? c.hosts.passphrase_file : h->passphrase_file;
                c.hosts.known_hosts = c.hosts.known_hosts ? c.hosts.known_hosts : h->known_hosts;
                c.hosts.preflight = h->preflight;
                c.hosts.preflight_sync_p99_ms = h->preflight_sync_p99_ms;
                c.hosts.preflight_clock_offset_ms = h->preflight_clock_offset_ms;
                c.hosts.preflight_interval_ms = h->preflight_interval_ms;
                if (!f->hosts_ports) {
                        c.hosts.client_port = h->client_port;
                        c.hosts.peer_port = h->peer_port;
                        c.hosts.metrics_port = h->metrics_port;
                }
        }
        *ret = c;
        return 0;
}

int runner_open_cluster_target(state_db *db, const char *cluster, const runner_flags *f,
                               const ops_config *file, const char *state_dir, const char *prog,
                               target **ret)
{
        ops_config c;
        int k = runner_cluster_target(db, cluster, f, file, prog, &c);
        if (k < 0)
                return k;
        return runner_open_target(&c, state_dir, ret);
}

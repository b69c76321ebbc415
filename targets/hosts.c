/*
 * The hosts target (see hosts.h): members on the machines of spec.hosts,
 * driven over SSH (targets/ssh.c).
 *
 * Design: the machines themselves hold the target-specific facts about
 * members, so no placement is recorded on the gitcd side (only the TLS CA
 * and leaves, below). Which machine holds a member is
 * the data identity marker in the machine's data directory (written when
 * the member is placed: it claims the machine); whether it should run is
 * the presence of its unit file or manifest; which configuration it runs
 * is the config hash written into that file. One probe (one SSH command)
 * reads all three; every operation starts from a probe (kept for the rest
 * of the reconciler pass, see probe()), so the target is level-based like
 * the reconciler and survives a gitcd restart unchanged.
 *
 * A member whose file exists but whose marker is gone lost its data disk:
 * it is reported MEMBER_DATA_LOST and ensure_member refuses to start it
 * empty (-ESTALE), so the reconciler replaces it. A machine that does not
 * answer is never guessed about: when the member's machine cannot be
 * probed, status and list fail with the transport's error instead of
 * reporting "absent" (which would make the reconciler create it again).
 *
 * An SSH user other than root runs every command through `sudo -n` (never
 * prompting: a sudo that wants a password is a clear error) and writes
 * files through it (see upload()).
 *
 * TLS (tls.provider auto): pki/auto.c issues the CA and the leaves on the
 * gitcd host, under <state dir>/hosts/<namespace>/<name>/ in the local
 * target's layout (local-tls.c); each member's client/ and peer/ folders
 * are copied into its tls_dir on its machine (files 0600, folders 0700)
 * before the file that starts it is written, and again when renew_tls
 * reissues them. gitcd's own client identity (operator/) never leaves the
 * gitcd host.
 *
 * A snapshot restore (restore_member) runs etcd's tool on the gitcd host,
 * as the local target does, and sends the restored files to the machine:
 * the machines need no etcd tool of their own, and the snapshot that
 * travels is the one gitcd checked. See hosts_restore_member().
 *
 * Adoption of a cluster already running on the machines: the reads and
 * writes are here (hosts_adopt_*), the rules in hosts-adopt.c, the adopt
 * operations over them in hosts-adopt-ops.c, the steps in
 * reconciler/adopt.c. When ensure_member writes a static Pod manifest, a
 * kubeadm etcd.yaml running the same dataDir goes first; when it writes a
 * unit, an active etcd.service running the same dataDir is disabled and
 * stopped first (an adoption that stopped half-way is finished by the
 * reconciler's rolling restart). A foreign etcd.service runs when systemd
 * says it is active (the file alone is an installed package); the probe
 * asks, so a member still run by it reports a configuration of none of
 * gitcd's.
 *
 * Threads (targets/locked.h): every SSH step (ssh_step) runs with the
 * wrapper's shared lock let go, on a connection the pool lends to one
 * thread at a time (a libssh2 session is never used by two threads at
 * once); the probe cache and the error message are touched only with the
 * lock held. So clusters on other machines go on while one machine is
 * slow or does not answer; clusters that share that machine wait for it,
 * each step for at most its deadline.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "api/spec.h"
#include "pki/pki.h"
#include "render/layout.h"
#include "render/render.h"
#include "targets/health.h"
#include "targets/hosts-adopt.h"
#include "targets/hosts.h"
#include "targets/locked.h"
#include "targets/local-tls.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define HASH_PREFIX HOSTS_HASH_PREFIX
/* A static Pod whose manifest is younger than this is checked to run it (member_status). */
#define RESTART_CHECK_S 300
#define NAME_PREFIX     HOSTS_MEMBER_PREFIX
#define PROBE_MAX       (64u * 1024u)

typedef struct hosts_target {
        target base; /* first: target * converts to hosts_target * */
        hosts_target_opts o;
        char *systemctl;
        char *state_dir; /* o.state_dir, owned */
        ssh_pool *pool;
        /*
         * A copy of each cluster an operation was called with:
         * list_members gets only the cluster's name and needs its machines.
         */
        etcd_cluster **seen;
        size_t n_seen, alloc_seen;
        /* This pass's probes (see probe()); cleared by tick. */
        struct probe_cache *cache;
        size_t n_cache, alloc_cache;
} hosts_target;

/* What one probe of a machine found for a cluster. */
typedef struct machine_view {
        int error;            /* 0, or why the machine could not be probed */
        char *claimed_by;     /* the member named by the marker, NULL without marker */
        char *identity;       /* the marker's id: the member's data identity */
        bool has_data;        /* <dataDir>/member exists (etcd wrote its data) */
        char *file_member;    /* the member named by the unit file or manifest, NULL without */
        char *file_hash;      /* the config hash written in it */
        int64_t file_age_s;   /* seconds since the file was written, by the machine's clock */
        int64_t file_mtime_s; /* when it was written (the machine's clock, Unix seconds) */
        bool foreign_file;    /* kubeadm's etcd.yaml is in the manifest folder, or
                                 systemd says the unit etcd.service is active */
} machine_view;

/* One probe's answer, kept for the rest of the pass. */
typedef struct probe_cache {
        char *machine; /* "address:port" */
        char *command; /* the probe command: names the cluster's paths */
        char *out;     /* what it printed */
} probe_cache;

static hosts_target *HT(target *t)
{
        return (hosts_target *)t;
}

/* Remember c's machines for list_members (a copy through the normalized form). */
static void remember(hosts_target *ht, const etcd_cluster *c)
{
        size_t i;
        for (i = 0; i < ht->n_seen; i++)
                if (streq(ht->seen[i]->namespace_, c->namespace_) &&
                    streq(ht->seen[i]->name, c->name))
                        break;
        if (i < ht->n_seen) {
                _cleanup_free_ char *a = spec_hash(ht->seen[i]), *b = spec_hash(c);
                if (streq(a, b))
                        return;
        }
        etcd_cluster *copy = spec_dup(c, "hosts target");
        if (!copy)
                return; /* cannot happen for a validated spec; list_members then reports it */
        if (i < ht->n_seen) {
                etcd_cluster_free(ht->seen[i]);
                ht->seen[i] = copy;
                return;
        }
        ht->seen = xgrow(ht->seen, &ht->alloc_seen, ht->n_seen + 1, sizeof(*ht->seen));
        ht->seen[ht->n_seen++] = copy;
}

static void view_release(machine_view *v)
{
        free(v->claimed_by);
        free(v->identity);
        free(v->file_member);
        free(v->file_hash);
        memset(v, 0, sizeof(*v));
}

static char *marker_path(const host_spec *h)
{
        return xasprintf("%s/" TARGET_DATA_MARKER, h->data_dir);
}

/* The unit file or manifest of the cluster's member on machine h. */
static char *member_file(const etcd_cluster *c, const host_spec *h)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return xasprintf("%s/etcd-%s-%s.yaml", h->manifest_dir, c->namespace_, c->name);
        return xasprintf("%s/etcd-%s-%s.service", h->unit_dir, c->namespace_, c->name);
}

static char *unit_name(const etcd_cluster *c)
{
        return xasprintf("etcd-%s-%s.service", c->namespace_, c->name);
}

char *hosts_command(const host_spec *h, const char *cmd)
{
        if (streq(h->ssh_user, "root"))
                return xstrdup(cmd);
        _cleanup_free_ char *q = ssh_quote(cmd);
        return xasprintf("sudo -n sh -c %s", q);
}

char *hosts_install_command(const host_spec *h, const char *path, mode_t mode)
{
        const char *slash = strrchr(path, '/');
        assert(slash);
        _cleanup_free_ char *dir = xstrndup(path, (size_t)(slash - path));
        /* mktemp creates it exclusively (O_EXCL, mode 0600) under a name nobody can guess */
        _cleanup_free_ char *tmpl = xasprintf("%s/.%s.gitcd-XXXXXXXXXX", dir, slash + 1);
        _cleanup_free_ char *qt = ssh_quote(tmpl), *qp = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf(
            "umask 077 && t=$(mktemp %s) && { cat > \"$t\" && chmod %04o \"$t\" && sync \"$t\" "
            "&& mv -f -- \"$t\" %s || { rm -f -- \"$t\"; exit 1; }; }",
            qt, (unsigned)(mode & 07777), qp);
        return hosts_command(h, cmd);
}

/*
 * One SSH step on machine h, on the connection the pool lends this thread:
 * a command (cmd, with in on its standard input) or, with path, an SFTP
 * upload of in. Runs with the target's shared lock let go
 * (targets/locked.h): it touches nothing of the target's but the pool,
 * which has its own lock, so a slow or unreachable machine holds up only
 * the callers that want that machine. *ret_error: the transport's message
 * when the result is negative.
 */
static int ssh_step(hosts_target *ht, const host_spec *h, const char *cmd, const char *path,
                    const void *in, size_t in_len, mode_t mode, int *ret_status, char **ret_out,
                    char **ret_stderr, char **ret_error)
{
        ssh_conn *c = NULL;
        target_blocking_begin();
        int k = ssh_pool_get(ht->pool, h->address, h->ssh_port, h->ssh_user, &c, ret_error);
        if (k >= 0) {
                k = path ? ssh_upload(c, path, in, in_len, mode)
                         : ssh_exec(c, cmd, in, in_len, ret_status, ret_out, ret_stderr);
                if (k < 0)
                        *ret_error = xstrdup(ssh_last_error(c));
                ssh_pool_put(ht->pool, c);
        }
        target_blocking_end();
        return k;
}

/* Its text without trailing blanks (the newline sudo or the command ended with). */
static char *message_of(const char *err)
{
        size_t n = err ? strlen(err) : 0;
        while (n > 0 && strchr(" \t\r\n", err[n - 1]))
                n--;
        return n ? xstrndup(err, n) : xstrdup("no message");
}

/*
 * A failed command's message. Through sudo a non-zero exit is the
 * command's or sudo's own refusal, and sudo's stderr cannot tell which:
 * sudo writes warnings on every run ("sudo: unable to resolve host ...",
 * on a machine whose own name does not resolve) and its messages are
 * translated. So the machine is asked once more, `sudo -n sh -c true`
 * (the same form, nothing to fail but sudo): when that fails too, sudo
 * refused (its message says why: no password-less sudo, or no sudo at
 * all); else the command failed, with its own message.
 */
static int command_failed(hosts_target *ht, const host_spec *h, const char *cmd, int status,
                          const char *err)
{
        _cleanup_free_ char *msg = message_of(err);
        if (!streq(h->ssh_user, "root")) {
                _cleanup_free_ char *serr = NULL, *transport = NULL;
                int sstatus = -1;
                int k = ssh_step(ht, h, "sudo -n sh -c true", NULL, NULL, 0, 0, &sstatus, NULL,
                                 &serr, &transport);
                if (k >= 0 && sstatus != 0) {
                        _cleanup_free_ char *why = message_of(serr);
                        return target_fail(&ht->base, -EACCES,
                                           "%s: `sudo -n` refused for user %s (%s); gitcd needs "
                                           "password-less sudo there (docs/hosts.md)",
                                           h->address, h->ssh_user, why);
                }
        }
        return target_fail(&ht->base, -EIO, "%s: `%s` failed (exit %d): %s", h->address, cmd,
                           status, msg);
}

static char *machine_key(const host_spec *h)
{
        return xasprintf("%s:%d", h->address, h->ssh_port);
}

/* Forget the probes of machine h (NULL: of every machine). */
static void forget_probes(hosts_target *ht, const host_spec *h)
{
        _cleanup_free_ char *key = h ? machine_key(h) : NULL;
        size_t kept = 0;
        for (size_t i = 0; i < ht->n_cache; i++) {
                probe_cache *e = &ht->cache[i];
                if (key && !streq(e->machine, key)) {
                        ht->cache[kept++] = *e;
                        continue;
                }
                free(e->machine);
                free(e->command);
                free(e->out);
        }
        ht->n_cache = kept;
}

/*
 * Run a command (through `sudo -n` when the SSH user is not root); a
 * non-zero exit is -EIO with its stderr. Anything but a probe may change
 * the machine: its cached probes go.
 */
static int exec_cmd(hosts_target *ht, const host_spec *h, const char *cmd, const void *in,
                    size_t in_len, char **ret_out);

static int run_input(hosts_target *ht, const host_spec *h, const char *cmd, const void *in,
                     size_t in_len, char **ret_out)
{
        forget_probes(ht, h);
        return exec_cmd(ht, h, cmd, in, in_len, ret_out);
}

static int exec_cmd(hosts_target *ht, const host_spec *h, const char *cmd, const void *in,
                    size_t in_len, char **ret_out)
{
        _cleanup_free_ char *out = NULL, *err = NULL, *transport = NULL;
        _cleanup_free_ char *full = hosts_command(h, cmd);
        int status = -1;
        int k = ssh_step(ht, h, full, NULL, in, in_len, 0, &status, &out, &err, &transport);
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, transport);
        if (status != 0)
                return command_failed(ht, h, cmd, status, err);
        if (ret_out)
                *ret_out = TAKE_PTR(out);
        return 0;
}

static int run(hosts_target *ht, const host_spec *h, const char *cmd, char **ret_out)
{
        return run_input(ht, h, cmd, NULL, 0, ret_out);
}

/*
 * Write a file on machine h atomically. As root through SFTP
 * (ssh_upload); as another user SFTP cannot write the machine's folders,
 * so the content goes on the standard input of `sudo -n sh -c` that
 * writes a temporary file under umask 077, sets the mode, fsyncs and
 * renames it (hosts_install_command): the same guarantees.
 */
static int upload(hosts_target *ht, const host_spec *h, const char *path, const void *data,
                  size_t len, mode_t mode)
{
        forget_probes(ht, h);
        _cleanup_free_ char *transport = NULL;
        if (streq(h->ssh_user, "root")) {
                int k = ssh_step(ht, h, NULL, path, data, len, mode, NULL, NULL, NULL, &transport);
                if (k < 0)
                        return target_fail(&ht->base, k, "%s: %s", h->address, transport);
                return 0;
        }
        _cleanup_free_ char *cmd = hosts_install_command(h, path, mode);
        _cleanup_free_ char *err = NULL;
        int status = -1;
        int k = ssh_step(ht, h, cmd, NULL, data, len, mode, &status, NULL, &err, &transport);
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, transport);
        if (status != 0)
                return command_failed(ht, h, "writing", status, err);
        return 0;
}

static char *line_value(const char *text, const char *prefix)
{
        size_t n = strlen(prefix);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (strneq(p, prefix, n)) {
                        const char *end = strchr(p + n, '\n');
                        return xstrndup(p + n, end ? (size_t)(end - p - n) : strlen(p + n));
                }
        }
        return NULL;
}

/*
 * One SSH command reads the marker, whether etcd data exists, and the
 * header lines of the member file. A reconciler pass asks about the same
 * machines many times (every membership plan places every member again):
 * the answer is kept until the next pass (tick) or until gitcd changes
 * something on that machine, so a pass costs one probe per machine and
 * cluster, not one per question. What others change on a machine (a wiped
 * disk) is seen at the next pass.
 */
static char *foreign_file(const host_spec *h);
static char *foreign_active_test(hosts_target *ht, const host_spec *h, const char *quoted);
static char *kubeadm_manifest(const host_spec *h);

static int probe(hosts_target *ht, const etcd_cluster *c, const host_spec *h, machine_view *v)
{
        _cleanup_free_ char *marker = marker_path(h), *file = member_file(c, h);
        _cleanup_free_ char *qm = ssh_quote(marker), *qf = ssh_quote(file);
        _cleanup_free_ char *member_dir = xasprintf("%s/member", h->data_dir);
        _cleanup_free_ char *qd = ssh_quote(member_dir);
        _cleanup_free_ char *foreign = foreign_file(h), *qk = ssh_quote(foreign);
        _cleanup_free_ char *active = foreign_active_test(ht, h, qk);
        _cleanup_free_ char *kubeadm_test = xasprintf("if %s; then echo foreign=yes; fi; ", active);
        _cleanup_free_ char *cmd = xasprintf(
            "if [ -f %s ]; then sed -n 's/^member=/marker=/p; s/^id=/marker-id=/p' %s; fi; "
            "if [ -d %s ]; then echo data=yes; fi; %s"
            "if [ -f %s ]; then echo mtime=$(stat -c %%Y %s) now=$(date +%%s); head -n 3 %s; fi",
            qm, qm, qd, kubeadm_test, qf, qf, qf);
        _cleanup_free_ char *out = NULL;
        _cleanup_free_ char *key = machine_key(h);
        memset(v, 0, sizeof(*v));
        for (size_t i = 0; i < ht->n_cache && !out; i++)
                if (streq(ht->cache[i].machine, key) && streq(ht->cache[i].command, cmd))
                        out = xstrdup(ht->cache[i].out);
        if (!out) {
                int k = exec_cmd(ht, h, cmd, NULL, 0, &out);
                if (k < 0) {
                        v->error = k;
                        return k;
                }
                ht->cache = xgrow(ht->cache, &ht->alloc_cache, ht->n_cache + 1, sizeof(*ht->cache));
                ht->cache[ht->n_cache++] = (probe_cache){
                    .machine = xstrdup(key), .command = xstrdup(cmd), .out = xstrdup(out)};
        }
        v->claimed_by = line_value(out, "marker=");
        v->identity = line_value(out, "marker-id=");
        _cleanup_free_ char *data = line_value(out, "data=");
        v->has_data = data != NULL;
        _cleanup_free_ char *foreign_yes = line_value(out, "foreign=");
        v->foreign_file = foreign_yes != NULL;
        v->file_member = line_value(out, NAME_PREFIX);
        v->file_hash = line_value(out, HASH_PREFIX);
        long long mtime = 0, now = 0;
        _cleanup_free_ char *times = line_value(out, "mtime=");
        if (times && sscanf(times, "%lld now=%lld", &mtime, &now) == 2 && mtime > 0) {
                v->file_mtime_s = mtime;
                v->file_age_s = now - mtime;
        }
        return 0;
}

/* The machine advertising the host part of url ("http://10.0.0.11:2380"), or -1. */
static int machine_of_url(const etcd_cluster *c, const char *url)
{
        const char *p = url ? strstr(url, "://") : NULL;
        if (!p)
                return -1;
        p += 3;
        const char *end = strrchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        for (size_t i = 0; i < c->hosts.n; i++)
                if (strlen(c->hosts.items[i].advertise_address) == n &&
                    strneq(c->hosts.items[i].advertise_address, p, n))
                        return (int)i;
        return -1;
}

/*
 * Find the machine holding member `name` (by marker or by its file). 0
 * with *ret_idx -1 when no machine holds it and every machine answered;
 * the error of an unreachable machine when it is not found elsewhere.
 */
static int locate(hosts_target *ht, const etcd_cluster *c, const char *name, int *ret_idx,
                  machine_view *ret_view)
{
        int unreachable = 0;
        for (size_t i = 0; i < c->hosts.n; i++) {
                machine_view v;
                if (probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        unreachable = v.error;
                        continue;
                }
                if (streq_ptr(v.claimed_by, name) || streq_ptr(v.file_member, name)) {
                        *ret_idx = (int)i;
                        *ret_view = v;
                        return 0;
                }
                view_release(&v);
        }
        *ret_idx = -1;
        return unreachable;
}

static int write_marker(hosts_target *ht, const host_spec *h, const char *name)
{
        _cleanup_free_ char *text = target_data_marker_new(name);
        if (!text)
                return target_fail(&ht->base, -EIO, "no random bytes for a data identity");
        _cleanup_free_ char *qd = ssh_quote(h->data_dir);
        _cleanup_free_ char *mk = xasprintf("mkdir -p -m 0700 -- %s", qd);
        int k = run(ht, h, mk, NULL);
        if (k < 0)
                return k;
        _cleanup_free_ char *path = marker_path(h);
        return upload(ht, h, path, text, strlen(text), 0600);
}

char **hosts_machine_effects(const etcd_cluster *c, size_t i)
{
        assert(i < c->hosts.n);
        const host_spec *h = &c->hosts.items[i];
        char **l = xcalloc(8, sizeof(char *));
        size_t n = 0;
        _cleanup_free_ char *file = member_file(c, h), *marker = marker_path(h);
        _cleanup_free_ char *unit = unit_name(c);
        /* paths and names are validated free of shell characters: shown unquoted */
        const char *via = streq(h->ssh_user, "root") ? "" : ", through sudo -n";
        l[n++] = xasprintf("ssh %s@%s port %d (host key checked against known_hosts)", h->ssh_user,
                           h->address, h->ssh_port);
        l[n++] = xasprintf("mkdir -p -m 0700 %s, then write %s (0600)%s: the data identity "
                           "marker, when the member is placed",
                           h->data_dir, marker,
                           streq(h->ssh_user, "root") ? "" : " (both through sudo -n)");
        if (c->tls.provider == TLS_PROVIDER_AUTO && (render_client_tls(c) || render_peer_tls(c)))
                l[n++] =
                    xasprintf("write the member's leaves into %s/%s (tls.crt, tls.key, ca.crt; "
                              "0600 in folders 0700%s), before it starts and when renewed",
                              h->tls_dir,
                              render_client_tls(c) && render_peer_tls(c) ? "{client,peer}"
                              : render_client_tls(c)                     ? "client"
                                                                         : "peer",
                              via);
        if (h->mode == HOST_MODE_STATIC_POD) {
                l[n++] = xasprintf("write %s (0600%s): the member's static Pod, run by kubelet; "
                                   "rewritten when its configuration changes",
                                   file, via);
        } else {
                l[n++] = xasprintf("write %s (0644%s): the member's unit, ExecStart=%s; rewritten "
                                   "when its configuration changes",
                                   file, via, h->etcd_binary);
                l[n++] = xasprintf("systemctl daemon-reload && systemctl enable %s && systemctl "
                                   "restart %s (after each rewrite%s)",
                                   unit, unit, via);
        }
        return l;
}

static bool auto_tls(const etcd_cluster *c);

char *hosts_machine_adoption(const etcd_cluster *c, size_t i)
{
        assert(i < c->hosts.n);
        const host_spec *h = &c->hosts.items[i];
        _cleanup_free_ char *own = member_file(c, h);
        if (h->mode == HOST_MODE_SYSTEMD)
                return xasprintf(
                    "before creating anything, apply reads %s and, when systemd says it is "
                    "active, the unit " HOSTS_FOREIGN_UNIT " as `systemctl cat` shows it, "
                    "wherever it lies, with its drop-ins (ExecStart=, Environment= and the "
                    "EnvironmentFile= files it names, read over SSH; etcd's flags and its "
                    "ETCD_* variables); if etcd already runs from one of them, apply adopts "
                    "that cluster instead of bootstrapping: %sit imports the member etcd lists "
                    "with its peer URL on this machine's advertiseAddress %s, whatever its "
                    "--name, with its etcd member ID, as %s-%zu (the machine's position; a "
                    "member already named %s-<n> keeps that name), writes the marker into its "
                    "running data dir (which must be %s), and, one member at a time with every "
                    "member healthy, runs systemctl disable --now " HOSTS_FOREIGN_UNIT "%s (the "
                    "file stays), waits until that etcd stopped, and starts the unit below "
                    "(one restart, which renames a member named otherwise in etcd, keeping its "
                    "ID and data; no restart for gitcd's own unit with the same configuration), "
                    "or it refuses and changes nothing (docs/hosts.md, \"Adopting a running "
                    "cluster\")",
                    own,
                    auto_tls(c) ? "with TLS, it first imports the CA the running etcd trusts "
                                  "(--trusted-ca-file, and the ca.key beside it) as the "
                                  "cluster's CA; "
                                : "",
                    h->advertise_address, c->name, i, c->name, h->data_dir,
                    streq(h->ssh_user, "root") ? "" : " (through sudo -n)");
        return xasprintf(
            "before creating anything, apply reads %s/" HOSTS_KUBEADM_MANIFEST " (kubeadm) and %s; "
            "if etcd already runs from one of them, apply adopts that cluster instead of "
            "bootstrapping: %sit imports the member etcd lists with its peer URL on this machine's "
            "advertiseAddress %s, whatever its --name, with its etcd member ID, as %s-%zu (the "
            "machine's position; a "
            "member already named %s-<n> keeps that name), writes the marker into its running "
            "data dir (which must be %s), and, one member at a time with every member healthy, "
            "replaces " HOSTS_KUBEADM_MANIFEST " by the manifest below (one restart, which renames "
            "a member named otherwise, such as kubeadm's node name, in etcd, keeping its ID and "
            "data; no restart for gitcd's own file with the same configuration), or it refuses "
            "and changes nothing (docs/hosts.md, \"Adopting a running cluster\")",
            h->manifest_dir, own,
            auto_tls(c) ? "with TLS, it first imports the CA the running etcd trusts "
                          "(--trusted-ca-file, and the ca.key beside it) as the cluster's CA; "
                        : "",
            h->advertise_address, c->name, i, c->name, h->data_dir);
}

const target_plan_ops hosts_plan_ops = {
    .machine_effects = hosts_machine_effects,
    .machine_adoption = hosts_machine_adoption,
};

/* ---- TLS (tls.provider auto) --------------------------------------------- */

static bool auto_tls(const etcd_cluster *c)
{
        return c->tls.provider == TLS_PROVIDER_AUTO && (render_client_tls(c) || render_peer_tls(c));
}

/*
 * Where the gitcd host keeps a cluster's TLS material: the CA in pki/ and
 * each member's leaves in <member>/tls/ (the local target's layout, so
 * local-tls.c and pki/auto.c serve both). Only the client/ and peer/
 * folders travel to the machines; operator/ is gitcd's own identity.
 */
static int tls_home(hosts_target *ht, const etcd_cluster *c, char **ret)
{
        if (!ht->o.state_dir)
                return target_fail(&ht->base, -EOPNOTSUPP,
                                   "cluster %s/%s: TLS needs a state folder for the cluster CA",
                                   c->namespace_, c->name);
        if (!target_name_is_component(c->namespace_) || !target_name_is_component(c->name))
                return target_fail(&ht->base, -EINVAL, "invalid cluster name \"%s/%s\"",
                                   c->namespace_, c->name);
        char *dir = xasprintf("%s/hosts/%s/%s", ht->o.state_dir, c->namespace_, c->name);
        int k = mkdir_p(dir, 0700);
        if (k < 0) {
                free(dir);
                return target_fail(&ht->base, k, "cannot create the TLS folder of %s/%s: %s",
                                   c->namespace_, c->name, strerror(-k));
        }
        *ret = dir;
        return 0;
}

/* The plan with each member's tls_dir on the gitcd host (for local-tls.c). */
static membership_plan *local_plan(const etcd_cluster *c, const membership_plan *p,
                                   const char *home)
{
        membership_plan *lp = membership_plan_new(c);
        for (size_t i = 0; i < p->n; i++) {
                const member_plan *mp = &p->members[i];
                member_plan *m = membership_plan_add(lp);
                m->name = xstrdup_null(mp->name);
                m->ordinal = mp->ordinal;
                m->client_url = xstrdup_null(mp->client_url);
                m->peer_url = xstrdup_null(mp->peer_url);
                m->tls_dir = mp->name && target_name_is_component(mp->name)
                                 ? xasprintf("%s/%s/tls", home, mp->name)
                                 : NULL;
        }
        return lp;
}

/* Issue (or with renew, reissue what is due) the leaves on the gitcd host. */
static int tls_issue(hosts_target *ht, const etcd_cluster *c, const membership_plan *p,
                     const char *only, bool renew, int64_t now_ms)
{
        _cleanup_free_ char *home = NULL, *err = NULL;
        int k = tls_home(ht, c, &home);
        if (k < 0)
                return k;
        _cleanup_(membership_plan_freep) membership_plan *lp = local_plan(c, p, home);
        k = local_tls_ensure(home, c, lp, only, renew, now_ms, &err);
        if (k < 0)
                return target_fail(&ht->base, k, "cluster %s/%s: %s", c->namespace_, c->name,
                                   err ? err : "TLS material cannot be issued");
        return k;
}

/*
 * Copy member mp's client/ and peer/ folders (and ca-bundle/ when used)
 * into its tls_dir on machine h: each file mode 0600 in folders mode 0700,
 * each written atomically.
 */
static int tls_upload(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                      const member_plan *mp)
{
        _cleanup_free_ char *home = NULL;
        int k = tls_home(ht, c, &home);
        if (k < 0)
                return k;
        static const char *const subs[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER,
                                           TLS_SUBDIR_CA_BUNDLE};
        static const char *const files[] = {"tls.crt", "tls.key", "ca.crt"};
        for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
                _cleanup_free_ char *from = xasprintf("%s/%s/tls/%s", home, mp->name, subs[i]);
                if (!path_exists(from))
                        continue;
                _cleanup_free_ char *to = xasprintf("%s/%s", mp->tls_dir, subs[i]);
                _cleanup_free_ char *qt = ssh_quote(to);
                _cleanup_free_ char *mk = xasprintf("mkdir -p -m 0700 -- %s", qt);
                if ((k = run(ht, h, mk, NULL)) < 0)
                        return k;
                for (size_t j = 0; j < ARRAY_SIZE(files); j++) {
                        _cleanup_free_ char *src = path_join(from, files[j]);
                        _cleanup_free_ char *data = NULL;
                        size_t len = 0;
                        if (!path_exists(src))
                                continue;
                        k = read_file(src, 1 << 20, &data, &len);
                        if (k < 0)
                                return target_fail(&ht->base, k, "cannot read %s: %s", src,
                                                   strerror(-k));
                        _cleanup_free_ char *dst = path_join(to, files[j]);
                        k = upload(ht, h, dst, data, len, 0600);
                        explicit_bzero(data, len);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

/* gitcd's client identity: the first member folder with an operator/ leaf. */
static int tls_client_files(hosts_target *ht, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                            char **ret_key)
{
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!ht->o.state_dir || !target_name_is_component(c->namespace_) ||
            !target_name_is_component(c->name))
                return 0;
        _cleanup_free_ char *home =
            xasprintf("%s/hosts/%s/%s", ht->o.state_dir, c->namespace_, c->name);
        DIR *d = opendir(home);
        if (!d)
                return 0;
        char *best = NULL;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || streq(de->d_name, "pki"))
                        continue;
                _cleanup_free_ char *cert =
                    xasprintf("%s/%s/tls/" TLS_SUBDIR_OPERATOR "/tls.crt", home, de->d_name);
                if (path_exists(cert) && (!best || strcmp(de->d_name, best) < 0))
                        str_assign(&best, xstrdup(de->d_name));
        }
        closedir(d);
        if (!best)
                return 0;
        _cleanup_free_ char *op = xasprintf("%s/%s/tls/" TLS_SUBDIR_OPERATOR, home, best);
        free(best);
        *ret_ca = path_join(op, "ca.crt");
        *ret_cert = path_join(op, "tls.crt");
        *ret_key = path_join(op, "tls.key");
        return 0;
}

/*
 * The machines' paths and addresses as intake checks them (api/spec.h),
 * checked again before anything runs on a machine: a caller that skipped
 * intake still never gets rm -rf of a system folder, nor a mount of one.
 * Every operation that writes on a machine asks it first (place, ensure,
 * remove, restore, drop_kept_data).
 * -EINVAL with the target's error set.
 */
static int check_machines(hosts_target *ht, const etcd_cluster *c)
{
        for (size_t i = 0; i < c->hosts.n; i++) {
                const host_spec *h = &c->hosts.items[i];
                static const char *const names[] = {"dataDir", "tlsDir", "unitDir", "manifestDir",
                                                    "etcdBinary"};
                const char *values[] = {h->data_dir, h->tls_dir, h->unit_dir, h->manifest_dir,
                                        h->etcd_binary};
                const spec_path_kind kinds[] = {SPEC_PATH_OWNED, SPEC_PATH_OWNED, SPEC_PATH_FOLDER,
                                                SPEC_PATH_FOLDER, SPEC_PATH_FILE};
                if (!host_address_valid(h->address) ||
                    !advertise_address_valid(h->advertise_address))
                        return target_fail(&ht->base, -EINVAL,
                                           "cluster %s/%s: machine %zu: the address is not a "
                                           "host name or IP address",
                                           c->namespace_, c->name, i);
                for (size_t j = 0; j < ARRAY_SIZE(names); j++) {
                        _cleanup_free_ char *why = NULL;
                        if (values[j] && spec_path_check(values[j], kinds[j], &why) < 0)
                                return target_fail(&ht->base, -EINVAL,
                                                   "cluster %s/%s: %s: %s \"%s\" %s; nothing "
                                                   "is done on the machine",
                                                   c->namespace_, c->name, h->address, names[j],
                                                   values[j], why);
                }
        }
        return 0;
}

static int hosts_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        if (!c->hosts.set || c->hosts.n == 0)
                return target_fail(t, -EINVAL, "cluster %s/%s has no spec.hosts", c->namespace_,
                                   c->name);
        if (check_machines(ht, c) < 0)
                return -EINVAL;
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");

        /* a recorded member: the machine its recorded peer URL names, when still listed */
        int idx = machine_of_url(c, mp->peer_url);
        if (idx < 0) {
                machine_view v;
                int k = locate(ht, c, mp->name, &idx, &v);
                if (idx >= 0)
                        view_release(&v);
                (void)k; /* an unreachable machine cannot be claimed: look for a free one */
        }
        if (idx < 0 && mp->data_identity && mp->peer_url) {
                /*
                 * It ran before, on a machine spec.hosts no longer lists, and no
                 * listed machine holds it: it is not placed anew (it would claim a
                 * free machine without its data). Its plan keeps the recorded
                 * URLs, status reports it "on no machine", and the reconciler
                 * replaces it (a recovery sets it aside with nothing to move).
                 */
                str_assign(&mp->listen_client_url, xstrdup_null(mp->client_url));
                str_assign(&mp->listen_peer_url, xstrdup(mp->peer_url));
                log_debug("hosts target: member %s is on no machine of spec.hosts (it ran on %s)",
                          mp->name, mp->peer_url);
                return 0;
        }
        _cleanup_free_ char *why_not = NULL; /* the machines that could not be asked */
        size_t asked = 0;
        int not_asked = 0; /* why the last machine that could not be asked could not */
        for (size_t i = 0; idx < 0 && i < c->hosts.n; i++) {
                machine_view v;
                if (probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        char *more = xasprintf("%s%s%s", why_not ? why_not : "",
                                               why_not ? "; " : "", target_last_error(t));
                        str_assign(&why_not, more);
                        not_asked = v.error;
                        continue;
                }
                asked++;
                bool free_machine = !v.claimed_by && !v.file_member;
                view_release(&v);
                if (!free_machine)
                        continue;
                int k = write_marker(ht, &c->hosts.items[i], mp->name);
                if (k < 0)
                        return k;
                idx = (int)i;
                log_debug("hosts target: member %s placed on %s", mp->name,
                          c->hosts.items[i].address);
        }
        if (idx < 0 && asked == 0)
                return target_fail(t, not_asked,
                                   "no machine in spec.hosts.machines could be asked for a place "
                                   "for member %s (%s)",
                                   mp->name, why_not);
        if (idx < 0 && why_not)
                return target_fail(t, -ENOSPC,
                                   "no free machine for member %s in spec.hosts.machines: every "
                                   "reachable machine holds a member of %s/%s, and some could not "
                                   "be asked (%s)",
                                   mp->name, c->namespace_, c->name, why_not);
        if (idx < 0)
                return target_fail(t, -ENOSPC,
                                   "no free machine for member %s in spec.hosts.machines (every "
                                   "machine holds a member of %s/%s)",
                                   mp->name, c->namespace_, c->name);

        const host_spec *h = &c->hosts.items[idx];
        int cp = ht->o.client_port, pp = ht->o.peer_port, mport = ht->o.metrics_port;
        const char *cs = render_client_tls(c) ? "https" : "http";
        const char *ps = render_peer_tls(c) ? "https" : "http";
        str_assign(&mp->client_url, xasprintf("%s://%s:%d", cs, h->advertise_address, cp));
        str_assign(&mp->peer_url, xasprintf("%s://%s:%d", ps, h->advertise_address, pp));
        str_assign(&mp->listen_client_url, xstrdup(mp->client_url));
        str_assign(&mp->listen_peer_url, xstrdup(mp->peer_url));
        str_assign(&mp->listen_metrics_url, xasprintf("http://%s:%d", h->advertise_address, mport));
        str_assign(&mp->data_dir, xstrdup(h->data_dir));
        str_assign(&mp->tls_dir, xstrdup(h->tls_dir));
        if (auto_tls(c)) {
                /* the CA members trust: its change restarts them (config hash) */
                _cleanup_free_ char *home = NULL, *err = NULL;
                char *version = NULL;
                int k = tls_home(ht, c, &home);
                if (k < 0)
                        return k;
                k = local_tls_version(home, c, &version, &err);
                if (k < 0)
                        return target_fail(t, k, "%s", err ? err : "no cluster CA");
                str_assign(&mp->tls_version, version);
        }
        return 0;
}

static int hosts_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        hosts_target *ht = HT(t);
        if (!render_client_tls(c) && !render_peer_tls(c))
                return 0;
        if (c->tls.provider != TLS_PROVIDER_AUTO)
                return target_fail(t, -EOPNOTSUPP,
                                   "cluster %s/%s: tls.provider %s needs Kubernetes; on the hosts "
                                   "target use tls.provider auto",
                                   c->namespace_, c->name, tls_provider_name(c->tls.provider));
        /* issued on the gitcd host; each member's folders travel with its start */
        int k = tls_issue(ht, c, p, NULL, false, now_wall_ms());
        return k < 0 ? k : 0;
}

/* The systemd unit of member mp running argv (targets/hosts-unit.c writes it). */
static int unit_text(const etcd_cluster *c, const member_plan *mp, char *const *argv,
                     char **ret_text, char **ret_why)
{
        _cleanup_free_ char *cluster = xasprintf("%s/%s", c->namespace_, c->name);
        hosts_unit_meta m = {
            .member = mp->name, .config_hash = mp->config_hash, .cluster = cluster};
        return hosts_unit_render(&m, argv, ret_text, ret_why);
}

static bool has_control(const char *s)
{
        for (const char *p = s ? s : ""; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                        return true;
        return false;
}

/*
 * A kubelet static Pod, written as JSON (valid YAML) after the two header
 * comments; jansson escapes every string. A value with a control character
 * is refused all the same (-EINVAL, *ret_why): intake refuses them, and the
 * header comments end at a newline.
 */
static int manifest_text(const etcd_cluster *c, const member_plan *mp, char *const *argv,
                         char **ret_text, char **ret_why)
{
        bool bad = has_control(mp->name) || has_control(mp->config_hash) || has_control(c->name) ||
                   has_control(c->repository) || has_control(c->version) ||
                   has_control(mp->data_dir) || has_control(mp->tls_dir);
        for (size_t i = 0; argv[i]; i++)
                bad = bad || has_control(argv[i]);
        if (bad) {
                *ret_why = xstrdup("a value of the manifest holds a control character");
                return -EINVAL;
        }
        json_t *cmd = json_array();
        for (size_t i = 0; argv[i]; i++)
                json_array_append_new(cmd, json_string(argv[i]));
        _cleanup_free_ char *image = xasprintf("%s:v%s", c->repository, c->version);
        json_t *pod = json_pack(
            "{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s,s:s}},s:{s:b,s:s,s:[{s:s,s:s,s:o,s:[{s:s,s:s}]}],"
            "s:[{s:s,s:{s:s,s:s}}]}}",
            "apiVersion", "v1", "kind", "Pod", "metadata", "name", mp->name, "namespace",
            "kube-system", "labels", "app.kubernetes.io/name", "etcd", "app.kubernetes.io/instance",
            c->name, "app.kubernetes.io/managed-by", "gitcd", "spec", "hostNetwork", 1,
            "priorityClassName", "system-node-critical", "containers", "name", "etcd", "image",
            image, "command", cmd, "volumeMounts", "name", "data", "mountPath", mp->data_dir,
            "volumes", "name", "data", "hostPath", "path", mp->data_dir, "type",
            "DirectoryOrCreate");
        assert(pod);
        if (auto_tls(c) && mp->tls_dir) {
                json_t *spec = json_object_get(pod, "spec");
                json_t *ctr = json_array_get(json_object_get(spec, "containers"), 0);
                json_array_append_new(json_object_get(ctr, "volumeMounts"),
                                      json_pack("{s:s,s:s,s:b}", "name", "tls", "mountPath",
                                                mp->tls_dir, "readOnly", 1));
                json_array_append_new(json_object_get(spec, "volumes"),
                                      json_pack("{s:s,s:{s:s,s:s}}", "name", "tls", "hostPath",
                                                "path", mp->tls_dir, "type", "Directory"));
        }
        _cleanup_free_ char *body = json_dumps(pod, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(pod);
        *ret_text = xasprintf(NAME_PREFIX "%s\n" HASH_PREFIX "%s\n%s\n", mp->name,
                              mp->config_hash ? mp->config_hash : "", body);
        return 0;
}

/*
 * Wait until the etcd a removed static Pod, or the unit etcd.service that
 * was disabled, ran no longer listens on its client and peer ports: the
 * kubelet stops a Pod on its own schedule, and a data directory must not
 * move (or go) under a running etcd, nor a new member start beside it.
 * gitcd's own units are stopped by `disable --now`, which returns once
 * they stopped: no wait then (foreign false).
 */
static int wait_stopped(hosts_target *ht, const host_spec *h, const char *member, bool foreign)
{
        if (h->mode != HOST_MODE_STATIC_POD && !foreign)
                return 0;
        int64_t until = now_mono_ms() + ht->o.stop_timeout_ms;
        bool up;
        target_blocking_begin();
        while ((up = target_port_accepts(h->advertise_address, ht->o.client_port, 1000) ||
                     target_port_accepts(h->advertise_address, ht->o.peer_port, 1000)) &&
               now_mono_ms() < until)
                msleep(250);
        target_blocking_end();
        if (up)
                return target_fail(&ht->base, -EBUSY,
                                   "%s: etcd still listens on %s:%d or :%d %d s after %s of %s "
                                   "was %s; its data is moved once it stopped",
                                   h->address, h->advertise_address, ht->o.client_port,
                                   ht->o.peer_port, ht->o.stop_timeout_ms / 1000,
                                   h->mode == HOST_MODE_STATIC_POD ? "the manifest"
                                                                   : "the unit " HOSTS_FOREIGN_UNIT,
                                   member,
                                   h->mode == HOST_MODE_STATIC_POD ? "removed" : "disabled");
        return 0;
}

static int read_foreign(hosts_target *ht, const host_spec *h, hosts_running **ret, char **ret_why);
static int disable_foreign_unit(hosts_target *ht, const host_spec *h, const char *member);

/*
 * Before gitcd's manifest replaces a member adopted from kubeadm's
 * etcd.yaml (adoption stopped half-way, reconciler/adopt.c): remove that
 * etcd.yaml when it runs this machine's dataDir, so kubelet does not run
 * two etcds on one data directory and its ports. A manifest for other data
 * is left alone. 1 when it was removed.
 */
static int retire_kubeadm(hosts_target *ht, const host_spec *h)
{
        _cleanup_free_ char *path = kubeadm_manifest(h), *qp = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf("if [ -f %s ]; then head -c 1048577 %s; fi", qp, qp);
        _cleanup_free_ char *out = NULL;
        int k = exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0 || isempty(out))
                return k;
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        bool ours = hosts_running_parse_manifest(path, out, strlen(out), &r, &d) == 0 &&
                    streq(r.data_dir, h->data_dir);
        hosts_running_release(&r);
        diag_list_release(&d);
        if (!ours)
                return 0;
        log_info("hosts target: %s: removing %s, which runs the data of the member gitcd starts",
                 h->address, path);
        _cleanup_free_ char *rm = xasprintf("rm -f -- %s", qp);
        k = run(ht, h, rm, NULL);
        return k < 0 ? k : 1;
}

/*
 * Before gitcd's unit starts a member on machine h: when the active unit
 * etcd.service runs this machine's dataDir (an adopted member not moved
 * yet, reconciler/adopt.c), disable and stop it and wait until its etcd
 * stopped, so systemd does not run two etcds on one data directory and its
 * ports. An etcd.service for other data, or one that cannot be read, is
 * left alone.
 */
static int retire_foreign_unit(hosts_target *ht, const host_spec *h, const char *member)
{
        hosts_running *r = NULL;
        _cleanup_free_ char *why = NULL;
        int k = read_foreign(ht, h, &r, &why);
        if (k == -EPERM) {
                log_warn("hosts target: %s: %s", h->address, why);
                return 0;
        }
        if (k < 0 || !r)
                return k;
        bool ours = streq(r->data_dir, h->data_dir);
        hosts_running_release(r);
        free(r);
        if (!ours)
                return 0;
        log_info("hosts target: %s: disabling " HOSTS_FOREIGN_UNIT
                 ", which runs the data of the member gitcd starts",
                 h->address);
        return disable_foreign_unit(ht, h, member);
}

/*
 * The machine member mp was placed on (its peer URL's host), probed: -EBUSY
 * when another member claims it. *ret_view is the probe (release it).
 */
static int member_machine(hosts_target *ht, const etcd_cluster *c, const member_plan *mp,
                          const host_spec **ret_h, machine_view *ret_view)
{
        int m = machine_of_url(c, mp->peer_url);
        if (m < 0)
                return target_fail(&ht->base, -EINVAL,
                                   "member %s: its peer URL %s is on no machine", mp->name,
                                   mp->peer_url ? mp->peer_url : "(none)");
        const host_spec *h = &c->hosts.items[m];
        int k = probe(ht, c, h, ret_view);
        if (k < 0)
                return k;
        if (ret_view->claimed_by && !streq(ret_view->claimed_by, mp->name))
                return target_fail(&ht->base, -EBUSY, "%s holds member %s of %s/%s, not %s",
                                   h->address, ret_view->claimed_by, c->namespace_, c->name,
                                   mp->name);
        *ret_h = h;
        return 0;
}

/*
 * systemd mode runs the machine's own etcd binary, so it must be the
 * version the spec names: a unit on another version would run another etcd
 * than the one gitcd reconciles (its flags are rendered for spec.version),
 * and a rolling upgrade would restart a member onto the old binary. Asked
 * of the binary itself (`etcd --version`) before each unit is written.
 */
static int check_binary_version(hosts_target *ht, const etcd_cluster *c, const host_spec *h)
{
        _cleanup_free_ char *q = ssh_quote(h->etcd_binary);
        _cleanup_free_ char *cmd = xasprintf("%s --version", q);
        _cleanup_free_ char *out = NULL;
        int k = exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0)
                return k;
        _cleanup_free_ char *v = line_value(out, "etcd Version: ");
        if (v && streq(v, c->version))
                return 0;
        return target_fail(&ht->base, -EINVAL,
                           "%s: etcdBinary %s is etcd %s, not %s (spec.version); install etcd %s "
                           "there and point etcdBinary at it",
                           h->address, h->etcd_binary, v ? v : "of a version it does not say",
                           c->version, c->version);
}

static int hosts_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p,
                               size_t idx)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        int k = check_machines(ht, c);
        if (k < 0)
                return k;
        if (idx >= p->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        const host_spec *h = NULL;
        _cleanup_(view_release) machine_view v = {0};
        k = member_machine(ht, c, mp, &h, &v);
        if (k < 0)
                return k;
        if (!v.claimed_by && v.file_member)
                return target_fail(t, -ESTALE,
                                   "member %s: the data identity marker on %s is gone (a wiped "
                                   "data disk); it cannot rejoin with the same identity and must "
                                   "be replaced",
                                   mp->name, h->address);
        if (mp->data_identity && v.claimed_by && !streq_ptr(v.identity, mp->data_identity))
                return target_fail(t, -ESTALE,
                                   "member %s: the data on %s is not the data it ran with; it "
                                   "must be replaced",
                                   mp->name, h->address);
        /* the file that starts it, before anything is written to the machine */
        bool pod = h->mode == HOST_MODE_STATIC_POD;
        _cleanup_(strv_freep) char **argv = render_member_command(c, p, idx);
        if (!argv || !argv[0])
                return target_fail(t, -EINVAL, "member %s: no command rendered", mp->name);
        if (!pod)
                str_assign(&argv[0], xstrdup(h->etcd_binary));
        _cleanup_free_ char *text = NULL, *why = NULL;
        k = pod ? manifest_text(c, mp, argv, &text, &why) : unit_text(c, mp, argv, &text, &why);
        if (k < 0)
                return target_fail(t, k, "member %s: refusing to write %s to %s: %s", mp->name,
                                   pod ? "the manifest" : "the unit", h->address, why);
        if (!v.claimed_by && (k = write_marker(ht, h, mp->name)) < 0)
                return k;

        _cleanup_free_ char *unit = unit_name(c);
        _cleanup_free_ char *qu = ssh_quote(unit);
        if (v.file_member && streq_ptr(v.file_hash, mp->config_hash)) {
                if (pod)
                        return 0; /* kubelet keeps it running */
                _cleanup_free_ char *cmd = xasprintf("%s is-active --quiet %s || %s start %s",
                                                     ht->systemctl, qu, ht->systemctl, qu);
                return run(ht, h, cmd, NULL);
        }

        if (!pod && (k = check_binary_version(ht, c, h)) < 0)
                return k;
        if (auto_tls(c)) {
                /* the member's leaves first: the file that starts it names them */
                if ((k = tls_issue(ht, c, p, mp->name, false, now_wall_ms())) < 0)
                        return k;
                if ((k = tls_upload(ht, c, h, mp)) < 0)
                        return k;
        }
        if (pod && (k = retire_kubeadm(ht, h)) < 0)
                return k;
        if (pod && k > 0 && (k = wait_stopped(ht, h, mp->name, false)) < 0)
                return k;
        if (!pod && (k = retire_foreign_unit(ht, h, mp->name)) < 0)
                return k;
        _cleanup_free_ char *path = member_file(c, h);
        k = upload(ht, h, path, text, strlen(text), pod ? 0600 : 0644);
        if (k < 0)
                return k;
        log_debug("hosts target: wrote %s on %s for member %s", path, h->address, mp->name);
        if (pod)
                return 0;
        /* one remote command, so the restart happens even if gitcd stops half-way */
        _cleanup_free_ char *cmd = xasprintf("%s daemon-reload && %s enable %s && %s restart %s",
                                             ht->systemctl, ht->systemctl, qu, ht->systemctl, qu);
        return run(ht, h, cmd, NULL);
}

/* Stop the member on machine h: remove its file (after stopping the unit). */
static int stop_on(hosts_target *ht, const etcd_cluster *c, const host_spec *h)
{
        _cleanup_free_ char *path = member_file(c, h), *unit = unit_name(c);
        _cleanup_free_ char *qp = ssh_quote(path), *qu = ssh_quote(unit);
        _cleanup_free_ char *cmd = NULL;
        if (h->mode == HOST_MODE_STATIC_POD)
                cmd = xasprintf("rm -f -- %s", qp);
        else
                cmd = xasprintf("if [ -f %s ]; then %s disable --now %s && rm -f -- %s && "
                                "%s daemon-reload; fi",
                                qp, ht->systemctl, qu, qp, ht->systemctl);
        return run(ht, h, cmd, NULL);
}

static int hosts_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        _cleanup_(view_release) machine_view v = {0};
        int idx;
        int k = locate(ht, c, member, &idx, &v);
        if (idx < 0)
                return k; /* not found: 0, or the error of a machine that did not answer */
        if (!v.file_member)
                return 0;
        return stop_on(ht, c, &c->hosts.items[idx]);
}

static int hosts_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        int k = check_machines(ht, c);
        if (k < 0)
                return k;
        _cleanup_(view_release) machine_view v = {0};
        int idx;
        k = locate(ht, c, member, &idx, &v);
        if (idx < 0)
                return k;
        const host_spec *h = &c->hosts.items[idx];
        if ((k = stop_on(ht, c, h)) < 0 || (k = wait_stopped(ht, h, member, false)) < 0)
                return k;
        _cleanup_free_ char *qd = ssh_quote(h->data_dir);
        _cleanup_free_ char *cmd = NULL;
        if (keep_data) {
                /* set aside beside it, marker and all: the machine is free for a new member */
                _cleanup_free_ char *aside =
                    xasprintf("%s.removed-%s-%lld", h->data_dir, member, (long long)now_wall_ms());
                _cleanup_free_ char *qa = ssh_quote(aside);
                cmd = xasprintf("if [ -e %s ]; then mv -- %s %s && sync %s; fi", qd, qd, qa, qa);
        } else {
                cmd = xasprintf("rm -rf -- %s", qd);
        }
        return run(ht, h, cmd, NULL);
}

/*
 * Delete what remove_member(keep_data) set aside for member: the folders
 * <dataDir>.removed-<member>-<ms> beside each machine's data directory
 * (any machine: the marker that said which one went with the data). Only
 * "<member>-<digits>" matches, so demo-1 never takes demo-10's data. Every
 * machine must answer: the first that does not stops it, to be tried again.
 */
static int hosts_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        if (check_machines(ht, c) < 0)
                return -EINVAL;
        for (size_t i = 0; i < c->hosts.n; i++) {
                const host_spec *h = &c->hosts.items[i];
                _cleanup_free_ char *prefix = xasprintf("%s.removed-%s-", h->data_dir, member);
                _cleanup_free_ char *qp = ssh_quote(prefix);
                _cleanup_free_ char *cmd = xasprintf(
                    "p=%s; for d in \"$p\"*; do [ -d \"$d\" ] || continue; "
                    "case \"${d#\"$p\"}\" in ''|*[!0-9]*) ;; *) rm -rf -- \"$d\" || exit 1 ;; "
                    "esac; done",
                    qp);
                int k = run(ht, h, cmd, NULL);
                if (k < 0)
                        return k;
        }
        return 0;
}

struct body {
        strbuf sb;
        size_t cap;
};

static size_t collect_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct body *b = userdata;
        size_t n = size * nmemb;
        if (b->sb.len + n > b->cap)
                return 0;
        sb_append_len(&b->sb, ptr, n);
        return n;
}

/* GET <client URL><path> from etcd itself, with gitcd's client identity; at most cap bytes. */
static CURLcode member_get(hosts_target *ht, const etcd_cluster *c, const char *client_url,
                           const char *path, struct body *b)
{
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (render_client_tls(c))
                (void)tls_client_files(ht, c, &ca, &cert, &key);
        _cleanup_free_ char *url = xasprintf("%s%s", client_url, path);
        /* A member is asked directly, never through a proxy (util/http.h). */
        http_opts ho = {.proxy = HTTP_PROXY_NONE,
                        .timeout_ms = ht->o.health_timeout_ms,
                        .connect_timeout_ms = ht->o.health_timeout_ms};
        if (ca)
                ho.tls = (http_tls){.ca_file = ca, .cert_file = cert, .key_file = key};
        CURL *h = http_handle_new(&ho);
        if (!h)
                return CURLE_OUT_OF_MEMORY;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
        CURLcode cr = target_health_perform(h, url, &b->sb);
        curl_easy_cleanup(h);
        return cr;
}

/*
 * GET <client URL>/health from etcd itself: 1 healthy, 0 not (detail says
 * why). NOSPACE and CORRUPT are excluded, as on the local target
 * (TARGET_HEALTH_PATH).
 */
static int health(hosts_target *ht, const etcd_cluster *c, const char *client_url,
                  char **ret_detail)
{
        struct body b = {.sb = STRBUF_INIT, .cap = 65536};
        CURLcode cr = member_get(ht, c, client_url, TARGET_HEALTH_PATH, &b);
        int ok = 0;
        if (cr != CURLE_OK) {
                *ret_detail = xasprintf("not answering yet (%s)", curl_easy_strerror(cr));
        } else {
                json_t *o = json_loadb(sb_str(&b.sb), b.sb.len, 0, NULL);
                json_t *hv = json_object_get(o, "health");
                ok = (json_is_string(hv) && streq(json_string_value(hv), "true")) ||
                     json_is_true(hv);
                *ret_detail = xstrdup(ok ? "healthy" : "no leader or unhealthy");
                json_decref(o);
        }
        sb_release(&b.sb);
        return ok;
}

/*
 * When the etcd answering at client_url started (Unix seconds, the
 * machine's clock), from process_start_time_seconds of its /metrics; -1
 * when it cannot be told.
 */
static double process_started(hosts_target *ht, const etcd_cluster *c, const char *client_url)
{
        struct body b = {.sb = STRBUF_INIT, .cap = 8u << 20};
        double t = -1;
        if (member_get(ht, c, client_url, "/metrics", &b) == CURLE_OK) {
                static const char key[] = "\nprocess_start_time_seconds ";
                const char *p = strstr(sb_str(&b.sb), key);
                char *end = NULL;
                double v = p ? strtod(p + strlen(key), &end) : 0;
                if (p && end != p + strlen(key) && v > 0)
                        t = v;
        }
        sb_release(&b.sb);
        return t;
}

static int hosts_member_status(target *t, const etcd_cluster *c, const char *member,
                               target_member_status *ret_status)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        _cleanup_(view_release) machine_view v = {0};
        int idx;
        int k = locate(ht, c, member, &idx, &v);
        if (k < 0)
                return k;
        if (idx < 0) {
                *ret_status = (target_member_status){.state = MEMBER_ABSENT,
                                                     .detail = xstrdup("on no machine")};
                return 0;
        }
        const host_spec *h = &c->hosts.items[idx];
        member_runtime_state state;
        char *detail = NULL;
        const char *running_hash = NULL;
        if (!v.claimed_by) {
                state = MEMBER_DATA_LOST;
                detail = xasprintf("%s: the data identity marker in %s is gone (wiped data disk)",
                                   h->address, h->data_dir);
        } else if (!v.file_member && v.foreign_file && v.has_data) {
                /* adopted, not moved yet (reconciler/adopt.c stopped half-way): kubeadm's
                 * etcd.yaml or the unit etcd.service runs it; a configuration hash of none
                 * of gitcd's makes the rolling restart move it, one member at a time */
                _cleanup_free_ char *url =
                    xasprintf("%s://%s:%d", render_client_tls(c) ? "https" : "http",
                              h->advertise_address, ht->o.client_port);
                _cleanup_free_ char *why = NULL;
                state = health(ht, c, url, &why) ? MEMBER_READY : MEMBER_STARTING;
                bool pod = h->mode == HOST_MODE_STATIC_POD;
                detail = xasprintf("%s: run by %s: %s", h->address,
                                   pod ? HOSTS_KUBEADM_MANIFEST : HOSTS_FOREIGN_UNIT, why);
                running_hash = pod ? "kubeadm" : HOSTS_FOREIGN_UNIT;
        } else if (!v.file_member) {
                state = v.has_data ? MEMBER_STOPPED : MEMBER_ABSENT;
                detail = xasprintf("%s: %s", h->address,
                                   v.has_data ? "stopped, data kept" : "placed, not started");
        } else {
                _cleanup_free_ char *url =
                    xasprintf("%s://%s:%d", render_client_tls(c) ? "https" : "http",
                              h->advertise_address, ht->o.client_port);
                _cleanup_free_ char *why = NULL;
                state = health(ht, c, url, &why) ? MEMBER_READY : MEMBER_STARTING;
                /* a kubelet restarts a static Pod onto a changed manifest when it next looks
                 * (every 20 s): until then the etcd answering is the one from before */
                if (state == MEMBER_READY && h->mode == HOST_MODE_STATIC_POD &&
                    v.file_mtime_s > 0 && v.file_age_s < RESTART_CHECK_S) {
                        double started = process_started(ht, c, url);
                        /* the start time is the boot time (whole seconds) plus the
                         * process's age: up to a second early; the file's, truncated.
                         * Not read (a slow or refused /metrics): not known to have
                         * restarted, so not ready either */
                        if (started < 0) {
                                state = MEMBER_STARTING;
                                str_assign(&why, xstrdup("answers, but its start time could not "
                                                         "be read (/metrics): not known yet "
                                                         "whether the kubelet restarted it onto "
                                                         "the manifest"));
                        } else if (started < (double)v.file_mtime_s - 1) {
                                state = MEMBER_STARTING;
                                str_assign(&why, xstrdup("still the etcd started before its "
                                                         "manifest changed: the kubelet has not "
                                                         "restarted it yet"));
                        }
                }
                detail = xasprintf("%s: %s", h->address, why);
        }
        *ret_status = (target_member_status){
            .state = state,
            .config_hash = state == MEMBER_READY || state == MEMBER_STARTING
                               ? xstrdup_null(running_hash ? running_hash : v.file_hash)
                               : NULL,
            .data_identity = v.claimed_by ? xstrdup_null(v.identity) : NULL,
            .detail = detail,
        };
        return 0;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_name(char ***names, size_t *n, size_t *alloc, const char *name)
{
        for (size_t i = 0; i < *n; i++)
                if (streq((*names)[i], name))
                        return;
        *names = xgrow(*names, alloc, *n + 2, sizeof(char *));
        (*names)[(*n)++] = xstrdup(name);
        (*names)[*n] = NULL;
}

static int hosts_list_members(target *t, const char *namespace_, const char *cluster,
                              char ***ret_names, size_t *ret_n)
{
        hosts_target *ht = HT(t);
        const etcd_cluster *c = NULL;
        for (size_t i = 0; i < ht->n_seen && !c; i++)
                if (streq(ht->seen[i]->namespace_, namespace_) && streq(ht->seen[i]->name, cluster))
                        c = ht->seen[i];
        if (!c)
                return target_fail(t, -ENOENT,
                                   "the machines of %s/%s are not known yet (no operation on the "
                                   "cluster so far)",
                                   namespace_, cluster);
        char **names = xcalloc(1, sizeof(char *));
        size_t n = 0, alloc = 1;
        int k = 0;
        for (size_t i = 0; i < c->hosts.n; i++) {
                machine_view v;
                if (probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        k = v.error;
                        break;
                }
                if (v.claimed_by)
                        add_name(&names, &n, &alloc, v.claimed_by);
                if (v.file_member)
                        add_name(&names, &n, &alloc, v.file_member);
                view_release(&v);
        }
        if (k < 0) {
                strv_free(names);
                return k; /* never a partial list: a missing name means "delete" to the caller */
        }
        qsort(names, n, sizeof(char *), cmp_str);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

static int hosts_tick(target *t)
{
        forget_probes(HT(t), NULL);
        ssh_pool_new_pass(HT(t)->pool);
        return 0;
}

static int hosts_wait_event(target *t, int timeout_ms)
{
        (void)t;
        /* no events from remote machines: the reconciler polls */
        if (timeout_ms > 0) {
                target_blocking_begin(); /* nothing shared is used: let others in */
                msleep(timeout_ms);
                target_blocking_end();
        }
        return 0;
}

static int hosts_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                            char **ret_key)
{
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!render_client_tls(c))
                return 0;
        return tls_client_files(HT(t), c, ret_ca, ret_cert, ret_key);
}

static int hosts_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                                  target_cert **ret_certs, size_t *ret_n)
{
        hosts_target *ht = HT(t);
        *ret_certs = NULL;
        *ret_n = 0;
        if (!auto_tls(c) || !ht->o.state_dir)
                return 0;
        _cleanup_free_ char *home = NULL;
        int k = tls_home(ht, c, &home);
        if (k < 0)
                return k;
        _cleanup_(membership_plan_freep) membership_plan *lp = local_plan(c, p, home);
        return local_tls_certificates(home, c, lp, ret_certs, ret_n);
}

/*
 * Renewal: reissue the member's due leaves on the gitcd host, then copy its
 * folders to its machine. No restart: etcd reads its leaf files again for
 * every new connection.
 */
static int hosts_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                           const char *member, int64_t now_ms)
{
        hosts_target *ht = HT(t);
        if (!member || !auto_tls(c))
                return 0; /* every leaf lives in a member's folder */
        if (c->hosts.set)
                remember(ht, c);
        int issued = tls_issue(ht, c, p, member, true, now_ms);
        if (issued <= 0)
                return issued;
        for (size_t i = 0; i < p->n; i++) {
                const member_plan *mp = &p->members[i];
                if (!streq_ptr(mp->name, member))
                        continue;
                int m = machine_of_url(c, mp->peer_url);
                if (m < 0)
                        return target_fail(t, -EINVAL,
                                           "member %s: its peer URL %s is on no "
                                           "machine",
                                           mp->name, mp->peer_url ? mp->peer_url : "(none)");
                int k = tls_upload(ht, c, &c->hosts.items[m], mp);
                if (k < 0)
                        return k;
        }
        return issued;
}

static void hosts_free(target *t)
{
        hosts_target *ht = HT(t);
        forget_probes(ht, NULL);
        free(ht->cache);
        ssh_pool_free(ht->pool);
        free(ht->systemctl);
        free(ht->state_dir);
        for (size_t i = 0; i < ht->n_seen; i++)
                etcd_cluster_free(ht->seen[i]);
        free(ht->seen);
        free(ht);
}

/* ---- adoption (reconciler/adopt.c) ------------------------------------- */

static char *kubeadm_manifest(const host_spec *h)
{
        return xasprintf("%s/" HOSTS_KUBEADM_MANIFEST, h->manifest_dir);
}

/*
 * What a foreign etcd runs from: kubeadm's etcd.yaml, or the unit
 * etcd.service wherever systemd keeps it (a distribution's package puts it
 * in /lib/systemd/system, an operator in /etc/systemd/system, either with
 * drop-ins beside it), read as `systemctl cat` shows it: the unit's file
 * and then its drop-ins, each after a "# PATH" line, which the unit
 * reader takes in that order as systemd does.
 */
static char *foreign_file(const host_spec *h)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return kubeadm_manifest(h);
        return xstrdup("systemctl cat " HOSTS_FOREIGN_UNIT);
}

/* The command that prints the foreign configuration (quoted: foreign_file, quoted). */
static char *foreign_read(hosts_target *ht, const host_spec *h, const char *quoted)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return xasprintf("head -c 1048577 %s", quoted);
        return xasprintf("%s cat " HOSTS_FOREIGN_UNIT " | head -c 1048577", ht->systemctl);
}

static int read_machine_file(hosts_target *ht, const host_spec *h, const char *path, bool optional,
                             char **ret, char **ret_why);

static char *diags_text(const diag_list *d)
{
        strbuf sb = STRBUF_INIT;
        for (size_t j = 0; j < d->n; j++) {
                if (d->items[j].line > 0)
                        sb_printf(&sb, "%sline %d: %s", j ? "; " : "", d->items[j].line,
                                  d->items[j].message);
                else
                        sb_printf(&sb, "%s%s", j ? "; " : "", d->items[j].message);
        }
        return sb_detach(&sb);
}

/*
 * What the file at path (body: its text) runs on machine h: a static Pod
 * manifest, or a unit with the environment files it names, read over the
 * same connection. unit is the unit's name and hostname the machine's
 * (for the unit's specifiers). -EPERM with the reason in *ret_why when it
 * cannot be read.
 */
static int parse_running(hosts_target *ht, const host_spec *h, const char *path, const char *unit,
                         const char *hostname, const char *body, hosts_running **ret,
                         char **ret_why)
{
        _cleanup_free_ char *origin = xasprintf("%s:%s", h->address, path);
        diag_list d = DIAG_LIST_INIT;
        hosts_running *r = XNEW(hosts_running);
        int k;
        if (h->mode == HOST_MODE_STATIC_POD) {
                k = hosts_running_parse_manifest(origin, body, strlen(body), r, &d);
        } else {
                hosts_unit u = {0};
                hosts_unit_context ctx = {.unit_name = unit, .hostname = hostname};
                char **env = NULL;
                size_t n_env = 0;
                k = hosts_unit_parse(origin, body, strlen(body), &ctx, &u, &d);
                for (size_t j = 0; k >= 0 && j < u.n_env_files; j++) {
                        _cleanup_free_ char *text = NULL, *why = NULL;
                        k = read_machine_file(ht, h, u.env_files[j], u.env_file_optional[j], &text,
                                              &why);
                        if (k == -EPERM) {
                                diag_add(&d, DIAG_ERROR, origin, 0, 0,
                                         "its EnvironmentFile=%s does not exist (systemd does "
                                         "not start the unit without it)",
                                         u.env_files[j]);
                                break;
                        }
                        if (k < 0) {
                                hosts_unit_release(&u);
                                strv_free(env);
                                diag_list_release(&d);
                                free(r);
                                return k; /* the transport's error */
                        }
                        _cleanup_free_ char *eorigin =
                            xasprintf("%s:%s", h->address, u.env_files[j]);
                        k = hosts_env_file_parse(eorigin, text, strlen(text), &env, &n_env, &d);
                        explicit_bzero(text, strlen(text));
                }
                if (k >= 0)
                        k = hosts_running_from_unit(origin, &u, env, n_env, r, &d);
                hosts_unit_release(&u);
                strv_free(env);
        }
        if (k < 0) {
                _cleanup_free_ char *text = diags_text(&d);
                *ret_why = xasprintf("%s: cannot read the etcd it runs from %s: %s", h->address,
                                     path, d.n ? text : strerror(-k));
                diag_list_release(&d);
                free(r);
                return -EPERM;
        }
        diag_list_release(&d);
        str_assign(&r->file, xstrdup(path));
        *ret = r;
        return 0;
}

/*
 * The shell test that the foreign file runs: kubelet runs every manifest
 * of its folder; a unit runs when systemd says it is active.
 */
static char *foreign_active_test(hosts_target *ht, const host_spec *h, const char *quoted)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return xasprintf("[ -f %s ]", quoted);
        return xasprintf("%s is-active --quiet " HOSTS_FOREIGN_UNIT, ht->systemctl);
}

/* What the foreign file of machine h runs, when it runs; *ret NULL when nothing. */
static int read_foreign(hosts_target *ht, const host_spec *h, hosts_running **ret, char **ret_why)
{
        *ret = NULL;
        _cleanup_free_ char *path = foreign_file(h), *qp = ssh_quote(path);
        _cleanup_free_ char *test = foreign_active_test(ht, h, qp);
        _cleanup_free_ char *read = foreign_read(ht, h, qp);
        _cleanup_free_ char *cmd = xasprintf("if %s; then uname -n; %s; fi", test, read);
        _cleanup_free_ char *out = NULL;
        int k = exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0 || isempty(out) || !strchr(out, '\n'))
                return k;
        char *nl = strchr(out, '\n');
        *nl = 0;
        return parse_running(ht, h, path, HOSTS_FOREIGN_UNIT, out, nl + 1, ret, ret_why);
}

/* `systemctl disable --now etcd.service` on machine h, then wait until its etcd stopped. */
static int disable_foreign_unit(hosts_target *ht, const host_spec *h, const char *member)
{
        _cleanup_free_ char *cmd = xasprintf("%s disable --now " HOSTS_FOREIGN_UNIT, ht->systemctl);
        int k = run(ht, h, cmd, NULL);
        if (k < 0)
                return k;
        return wait_stopped(ht, h, member, true);
}

int hosts_adopt_read(target *t, const etcd_cluster *c, size_t i, hosts_running **ret,
                     char **ret_why)
{
        hosts_target *ht = HT(t);
        assert(i < c->hosts.n);
        const host_spec *h = &c->hosts.items[i];
        *ret = NULL;
        *ret_why = NULL;
        _cleanup_free_ char *own = member_file(c, h), *foreign = foreign_file(h);
        _cleanup_free_ char *qo = ssh_quote(own), *qf = ssh_quote(foreign);
        _cleanup_free_ char *test = foreign_active_test(ht, h, qf);
        _cleanup_free_ char *read = foreign_read(ht, h, qf);
        _cleanup_free_ char *cmd = xasprintf("if [ -f %s ]; then echo own; uname -n; head -c "
                                             "1048577 %s; elif %s; then echo foreign; uname -n; "
                                             "%s; fi",
                                             qo, qo, test, read);
        _cleanup_free_ char *out = NULL;
        int k = exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0)
                return k;
        char *host = out ? strchr(out, '\n') : NULL;
        char *body = host ? strchr(host + 1, '\n') : NULL;
        if (!body)
                return 0;
        bool is_own = strneq(out, "own\n", 4);
        *body++ = 0;
        _cleanup_free_ char *unit = unit_name(c);
        hosts_running *r = NULL;
        k = parse_running(ht, h, is_own ? own : foreign, is_own ? unit : HOSTS_FOREIGN_UNIT,
                          host + 1, body, &r, ret_why);
        if (k < 0)
                return k;
        r->gitcd_file = is_own;
        if (is_own)
                r->config_hash = line_value(body, HASH_PREFIX);
        *ret = r;
        return 0;
}

int hosts_adopt_claim(target *t, const etcd_cluster *c, size_t i, const char *member,
                      char **ret_identity)
{
        hosts_target *ht = HT(t);
        const host_spec *h = &c->hosts.items[i];
        *ret_identity = NULL;
        for (int round = 0; round < 2; round++) {
                _cleanup_(view_release) machine_view v = {0};
                int k = probe(ht, c, h, &v);
                if (k < 0)
                        return k;
                if (v.claimed_by && !streq(v.claimed_by, member))
                        return target_fail(t, -EEXIST, "%s: the data directory %s belongs to %s",
                                           h->address, h->data_dir, v.claimed_by);
                if (v.claimed_by && v.identity) {
                        *ret_identity = TAKE_PTR(v.identity);
                        return 0;
                }
                if (round == 0 && (k = write_marker(ht, h, member)) < 0)
                        return k;
        }
        return target_fail(t, -EIO, "%s: the marker written in %s does not read back", h->address,
                           h->data_dir);
}

int hosts_adopt_retire(target *t, const etcd_cluster *c, size_t i, const char *member)
{
        const host_spec *h = &c->hosts.items[i];
        if (h->mode == HOST_MODE_SYSTEMD)
                return disable_foreign_unit(HT(t), h, member);
        _cleanup_free_ char *path = kubeadm_manifest(h), *qp = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf("rm -f -- %s", qp);
        return run(HT(t), h, cmd, NULL);
}

/*
 * A file of machine h: its first 1 MiB and one byte, so that a reader with
 * a 1 MiB limit sees a longer file is longer rather than reading it cut
 * short. A file that does not exist is a
 * refusal with the reason in *ret_why (-EPERM), or with optional reads as
 * ""; a machine that cannot be reached, or a command that fails, fails as
 * any SSH step does.
 */
static int read_machine_file(hosts_target *ht, const host_spec *h, const char *path, bool optional,
                             char **ret, char **ret_why)
{
        _cleanup_free_ char *q = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf(
            "if [ -f %s ]; then echo file; head -c 1048577 -- %s; else echo none; fi", q, q);
        _cleanup_free_ char *out = NULL;
        int k = exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0)
                return k;
        if (out && strneq(out, "file\n", 5)) {
                *ret = xstrdup(out + 5);
                explicit_bzero(out, strlen(out));
                return 0;
        }
        if (!optional) {
                *ret_why = xasprintf("%s: %s does not exist", h->address, path);
                return -EPERM;
        }
        *ret = xstrdup("");
        return 0;
}

/* The first URL of a comma-separated list (newly allocated). */
static char *first_url(const char *urls)
{
        return urls ? xstrndup(urls, strcspn(urls, ",")) : NULL;
}

/* What the machines' CA is: read and checked by hosts_adopt_import_ca(). */
typedef struct machines_ca {
        char *fingerprint; /* of the trusted CA file (pki_bundle_fingerprint) */
        pki_cert *cert;
        pki_key *key; /* NULL when no machine holds it */
} machines_ca;

static void machines_ca_release(machines_ca *m)
{
        free(m->fingerprint);
        pki_cert_free(m->cert);
        pki_key_free(m->key);
}

/* Read machine i's CA files into m, or refuse when they are not m's. */
static int read_machine_ca(hosts_target *ht, const etcd_cluster *c, size_t i,
                           const hosts_running *r, machines_ca *m, char **ret_why)
{
        const host_spec *h = &c->hosts.items[i];
        const char *files[] = {r->trusted_ca_file, r->peer_trusted_ca_file};
        for (size_t j = 0; j < ARRAY_SIZE(files); j++) {
                if (j == 1 && streq(files[0], files[1]))
                        continue;
                _cleanup_free_ char *pem = NULL, *fp = NULL;
                int k = read_machine_file(ht, h, files[j], false, &pem, ret_why);
                if (k < 0)
                        return k;
                _cleanup_free_ char *what = xasprintf("%s:%s", h->address, files[j]);
                pki_cert *crt = NULL;
                if (pki_bundle_fingerprint(pem, strlen(pem), &fp) < 0 ||
                    pki_cert_from_pem(pem, strlen(pem), what, &crt) < 0) {
                        *ret_why =
                            xasprintf("%s: %s holds no PEM CA certificate", h->address, files[j]);
                        return -EPERM;
                }
                if (!m->fingerprint) {
                        m->fingerprint = TAKE_PTR(fp);
                        m->cert = crt;
                        continue;
                }
                pki_cert_free(crt);
                if (!streq(m->fingerprint, fp)) {
                        *ret_why = xasprintf(
                            "%s: etcd trusts the CA in %s, which is not the CA the other "
                            "members trust; every member must trust one CA (kubeadm's etcd CA) "
                            "on both surfaces to be adopted",
                            h->address, files[j]);
                        return -EPERM;
                }
        }
        _cleanup_free_ char *key_file = hosts_running_ca_key_file(r);
        assert(key_file); /* hosts_adopt_check_tls() refused otherwise */
        _cleanup_free_ char *pem = NULL;
        int k = read_machine_file(ht, h, key_file, true, &pem, ret_why);
        if (k < 0)
                return k;
        if (!*pem)
                return 0;
        _cleanup_free_ char *what = xasprintf("%s:%s", h->address, key_file);
        pki_key *key = NULL;
        k = pki_key_from_pem(pem, strlen(pem), what, &key);
        explicit_bzero(pem, strlen(pem));
        if (k < 0 || !pki_key_matches(key, m->cert)) {
                pki_key_free(key);
                *ret_why = xasprintf("%s: %s is not the key of the CA certificate %s", h->address,
                                     key_file, r->trusted_ca_file);
                return -EPERM;
        }
        if (m->key)
                pki_key_free(key);
        else
                m->key = key;
        return 0;
}

int hosts_adopt_import_ca(target *t, const etcd_cluster *c, hosts_running *const *running,
                          char **ret_why)
{
        hosts_target *ht = HT(t);
        *ret_why = NULL;
        _cleanup_(machines_ca_release) machines_ca m = {0};
        int k;
        for (size_t i = 0; i < c->hosts.n; i++)
                if (running[i] && (k = read_machine_ca(ht, c, i, running[i], &m, ret_why)) < 0)
                        return k;
        if (!m.cert)
                return 0;
        if (!pki_cert_is_ca(m.cert)) {
                *ret_why = xstrdup("the certificate the members trust (--trusted-ca-file) is "
                                   "not a CA certificate");
                return -EPERM;
        }
        _cleanup_free_ char *home = NULL;
        if ((k = tls_home(ht, c, &home)) < 0)
                return k;
        _cleanup_free_ char *pki = path_join(home, "pki");
        _cleanup_free_ char *crt = path_join(pki, "ca.crt");
        _cleanup_free_ char *have = NULL, *have_fp = NULL;
        size_t len = 0;
        if (path_exists(crt)) {
                if ((k = read_file(crt, 1 << 20, &have, &len)) < 0)
                        return target_fail(t, k, "cannot read %s: %s", crt, strerror(-k));
                if (pki_bundle_fingerprint(have, len, &have_fp) < 0 ||
                    !streq(have_fp, m.fingerprint)) {
                        *ret_why = xasprintf(
                            "gitcd already keeps a CA for %s/%s in %s, and it is not the CA "
                            "the running members trust; remove that folder to import theirs",
                            c->namespace_, c->name, pki);
                        return -EPERM;
                }
        } else {
                if (!m.key) {
                        *ret_why = xasprintf("no machine holds the key of the etcd CA (the file "
                                             "beside --trusted-ca-file, .key for .crt); gitcd "
                                             "needs it to issue the members' and its own "
                                             "certificates");
                        return -EPERM;
                }
                if ((k = pki_ca_import(pki, m.cert, m.key)) < 0)
                        return target_fail(t, k, "cluster %s/%s: cannot import the CA: %s",
                                           c->namespace_, c->name, pki_last_error());
                log_info("%s/%s: imported the running members' etcd CA into %s", c->namespace_,
                         c->name, pki);
        }
        /* gitcd's client identity (and the members' leaves, under the names adopted) */
        _cleanup_free_ int *ord = xcalloc(c->hosts.n + 1, sizeof(int));
        if ((k = hosts_adopt_ordinals(c, running, ord, ret_why)) < 0)
                return k;
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_new(c);
        for (size_t i = 0; i < c->hosts.n; i++) {
                if (!running[i])
                        continue;
                member_plan *mp = membership_plan_add(p);
                mp->name = render_member_name(c, ord[i]);
                mp->ordinal = ord[i];
                mp->client_url = first_url(running[i]->advertise_client_urls);
                mp->peer_url = first_url(running[i]->initial_advertise_peer_urls);
        }
        k = tls_issue(ht, c, p, NULL, false, now_wall_ms());
        return k < 0 ? k : 1;
}

int hosts_member_healthy(target *t, const etcd_cluster *c, const char *client_url)
{
        _cleanup_free_ char *why = NULL;
        return health(HT(t), c, client_url, &why);
}

int hosts_target_peer_port(const target *t)
{
        return ((const hosts_target *)t)->o.peer_port;
}

/* The files and folders under dir, relative to it (folders before what they hold). */
/*
 * Send one local file to path on machine h atomically (upload()), mapped
 * from disk rather than read into memory: a snapshot of gigabytes costs
 * page cache, not gitcd's heap.
 */
static int upload_file(hosts_target *ht, const host_spec *h, const char *local, const char *path)
{
        _cleanup_close_ int fd = open(local, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return target_fail(&ht->base, -errno, "cannot open %s: %s", local, strerror(errno));
        struct stat st;
        if (fstat(fd, &st) < 0)
                return target_fail(&ht->base, -errno, "cannot stat %s: %s", local, strerror(errno));
        size_t len = (size_t)st.st_size;
        void *data = NULL;
        if (len > 0) {
                data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
                if (data == MAP_FAILED)
                        return target_fail(&ht->base, -errno, "cannot map %s: %s", local,
                                           strerror(errno));
                (void)madvise(data, len, MADV_SEQUENTIAL);
        }
        int k = upload(ht, h, path, data, len, 0600);
        if (data)
                (void)munmap(data, len);
        return k;
}

/*
 * spec.bootstrap.restore, and a disaster recovery from a snapshot, on a
 * machine. etcd's tool (rs->tool, the gitcd host's, as for the local
 * target) restores into <state>/hosts/<ns>/<name>/restore-<member>/ on the
 * gitcd host; its files go to <data_dir>/member.restore/ on the machine,
 * each written atomically, and one command renames that folder to
 * <data_dir>/member/ and syncs. All or nothing: a failure or a crash
 * midway leaves member.restore/ (removed by the next try) and no member/,
 * so the member is not seen to have data and is restored again, never
 * started empty. A machine whose member/ holds a write-ahead log (etcd's
 * data), or running the member, is never restored over (-EEXIST); a
 * member/ without one is no data (what an etcd that was starting left) and
 * is replaced by the restored one.
 */
static int hosts_restore_member(target *t, const etcd_cluster *c, const membership_plan *p,
                                size_t idx, const target_restore *rs)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        if (idx >= p->n || !p->members[idx].name || !p->members[idx].peer_url)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        if (check_machines(ht, c) < 0)
                return -EINVAL;
        const member_plan *mp = &p->members[idx];
        if (!target_name_is_component(mp->name))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", mp->name);
        const host_spec *h = NULL;
        _cleanup_(view_release) machine_view v = {0};
        int k = member_machine(ht, c, mp, &h, &v);
        if (k < 0)
                return k;
        _cleanup_free_ char *stage = xasprintf("%s/member.restore", h->data_dir);
        _cleanup_free_ char *final = xasprintf("%s/member", h->data_dir);
        _cleanup_free_ char *qs = ssh_quote(stage), *qf = ssh_quote(final);
        /* etcd's data is its write-ahead log: a member/ without one holds nothing etcd uses */
        _cleanup_free_ char *has_wal = xasprintf("ls -- %s/wal/*.wal >/dev/null 2>&1", qf);
        bool wal = false;
        if (v.has_data && !v.file_member) {
                _cleanup_free_ char *cmd = xasprintf("if %s; then echo wal; fi", has_wal);
                _cleanup_free_ char *out = NULL;
                if ((k = exec_cmd(ht, h, cmd, NULL, 0, &out)) < 0)
                        return k;
                wal = out && strneq(out, "wal", 3);
        }
        if (wal || v.file_member)
                return target_fail(t, -EEXIST,
                                   "member %s has data already on %s; a snapshot is never "
                                   "restored over it",
                                   mp->name, h->address);
        if (!v.claimed_by && (k = write_marker(ht, h, mp->name)) < 0)
                return k;

        _cleanup_free_ char *home = NULL;
        if ((k = tls_home(ht, c, &home)) < 0)
                return k;
        _cleanup_free_ char *local = xasprintf("%s/restore-%s", home, mp->name);
        if ((k = target_restore_into(t, p, idx, rs, local)) < 0)
                return k;

        _cleanup_free_ char *src = path_join(local, "member");
        _cleanup_(path_list_release) path_list files = {0}, dirs = {0};
        k = list_tree(src, &files, &dirs);
        if (k < 0)
                (void)target_fail(t, k, "member %s: cannot read the restored data in %s: %s",
                                  mp->name, src, strerror(-k));
        if (k >= 0) {
                _cleanup_(sb_release) strbuf cmd = STRBUF_INIT;
                sb_printf(&cmd, "rm -rf -- %s && mkdir -m 0700 -- %s", qs, qs);
                for (size_t i = 0; i < dirs.n; i++) {
                        _cleanup_free_ char *d = path_join(stage, dirs.paths[i]);
                        _cleanup_free_ char *qd = ssh_quote(d);
                        sb_printf(&cmd, " && mkdir -m 0700 -- %s", qd);
                }
                k = run(ht, h, sb_str(&cmd), NULL);
        }
        for (size_t i = 0; k >= 0 && i < files.n; i++) {
                _cleanup_free_ char *from = path_join(src, files.paths[i]);
                _cleanup_free_ char *to = path_join(stage, files.paths[i]);
                k = upload_file(ht, h, from, to);
        }
        (void)rm_rf(local);
        if (k < 0)
                return k;
        /*
         * member/ may not exist: its absence is what says "not restored yet".
         * A member/ without a write-ahead log is what an etcd that was
         * starting left behind (it creates member/snap/db before it finds it
         * cannot start, and kubelet or systemd may start it once more after
         * its file is gone): no data, removed, so the snapshot goes in.
         */
        _cleanup_free_ char *qdd = ssh_quote(h->data_dir);
        _cleanup_free_ char *cmd = xasprintf("if [ -e %s ] && ! %s; then rm -rf -- %s; fi; "
                                             "[ ! -e %s ] && mv -- %s %s && sync %s",
                                             qf, has_wal, qf, qf, qs, qf, qdd);
        if ((k = run(ht, h, cmd, NULL)) < 0)
                return k;
        log_debug("hosts target: restored member %s on %s from %s", mp->name, h->address,
                  rs->snapshot);
        return 0;
}

/*
 * Copy the file at path on machine h into fd as `cat` prints it (through
 * sudo for a user other than root), at most max bytes: a stall times out,
 * a large file does not.
 */
static int fetch_file(hosts_target *ht, const host_spec *h, const char *path, int fd, uint64_t max)
{
        _cleanup_free_ char *q = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf("cat -- %s", q);
        _cleanup_free_ char *full = hosts_command(h, cmd);
        _cleanup_free_ char *transport = NULL, *err = NULL;
        ssh_conn *conn = NULL;
        int status = -1;
        target_blocking_begin();
        int k = ssh_pool_get(ht->pool, h->address, h->ssh_port, h->ssh_user, &conn, &transport);
        if (k >= 0) {
                k = ssh_exec_to_fd(conn, full, fd, max, &status, &err);
                if (k < 0)
                        transport = xstrdup(ssh_last_error(conn));
                ssh_pool_put(ht->pool, conn);
        }
        target_blocking_end();
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, transport);
        if (status != 0)
                return command_failed(ht, h, cmd, status, err);
        return 0;
}

/*
 * The revision of a stopped member's data on its machine: member/snap/db
 * is copied over SSH into <state>/hosts/<ns>/<name>/revision-<member>.db on
 * gitcd's host (the machines need no etcd tool, as for restores), read
 * there with etcd's tool and deleted. A member/ without a write-ahead log
 * holds no data (what an etcd that could not start left), as for restores.
 */
static int hosts_data_revision(target *t, const etcd_cluster *c, const char *member,
                               const char *tool, int64_t *ret_revision)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        _cleanup_(view_release) machine_view v = {0};
        int idx = -1;
        int k = locate(ht, c, member, &idx, &v);
        if (k < 0)
                return k;
        if (idx < 0)
                return target_fail(t, -ENOENT, "member %s is on no machine of spec.hosts", member);
        const host_spec *h = &c->hosts.items[idx];
        if (v.file_member || v.foreign_file)
                return target_fail(t, -EBUSY, "%s: member %s runs there: its data is being written",
                                   h->address, member);
        _cleanup_free_ char *wal = xasprintf("%s/member/wal", h->data_dir);
        _cleanup_free_ char *db = xasprintf("%s/member/snap/db", h->data_dir);
        _cleanup_free_ char *qw = ssh_quote(wal), *qd = ssh_quote(db);
        _cleanup_free_ char *test =
            xasprintf("if ls -- %s/*.wal >/dev/null 2>&1 && [ -f %s ]; then echo data; fi", qw, qd);
        _cleanup_free_ char *out = NULL;
        if (v.has_data && (k = exec_cmd(ht, h, test, NULL, 0, &out)) < 0)
                return k;
        if (!out || !strneq(out, "data", 4))
                return target_fail(t, -ENOENT,
                                   "%s: member %s holds no data (no %s with a "
                                   "write-ahead log beside it)",
                                   h->address, member, db);
        _cleanup_free_ char *home = NULL;
        if ((k = tls_home(ht, c, &home)) < 0)
                return k;
        _cleanup_free_ char *copy = xasprintf("%s/revision-%s.db", home, member);
        _cleanup_close_ int fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return target_fail(t, -errno, "cannot create %s: %s", copy, strerror(errno));
        k = fetch_file(ht, h, db, fd, UINT64_C(64) << 30);
        if (k >= 0)
                k = target_db_revision(t, member, tool, copy, ret_revision);
        (void)unlink(copy);
        return k;
}

static const target_ops hosts_ops = {
    .name = "hosts",
    .caps = HOSTS_TARGET_CAPS,
    .place_member = hosts_place_member,
    .ensure_shared = hosts_ensure_shared,
    .ensure_member = hosts_ensure_member,
    .stop_member = hosts_stop_member,
    .remove_member = hosts_remove_member,
    .drop_kept_data = hosts_drop_kept_data,
    .member_status = hosts_member_status,
    .list_members = hosts_list_members,
    .tick = hosts_tick,
    .wait_event = hosts_wait_event,
    .client_tls = hosts_client_tls,
    .tls_certificates = hosts_tls_certificates,
    .renew_tls = hosts_renew_tls,
    .restore_member = hosts_restore_member,
    .data_revision = hosts_data_revision,
    .adopt = &hosts_adopt_ops,
    .free = hosts_free,
};

int hosts_target_new(const hosts_target_opts *opts, target **ret)
{
        if (!opts || !opts->ssh.known_hosts)
                return -EINVAL;
        hosts_target *ht = XNEW(hosts_target);
        ht->base.ops = &hosts_ops;
        ht->o = *opts;
        ht->systemctl = xstrdup(opts->systemctl ? opts->systemctl : "systemctl");
        ht->o.state_dir = ht->state_dir = xstrdup_null(opts->state_dir);
        if (!ht->o.client_port)
                ht->o.client_port = 2379;
        if (!ht->o.peer_port)
                ht->o.peer_port = 2380;
        if (!ht->o.metrics_port)
                ht->o.metrics_port = 2381;
        if (!ht->o.health_timeout_ms)
                ht->o.health_timeout_ms = 2000;
        if (!ht->o.stop_timeout_ms)
                ht->o.stop_timeout_ms = 60000;
        ht->pool = ssh_pool_new(&opts->ssh);
        *ret = &ht->base;
        return 0;
}

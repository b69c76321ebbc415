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
 * of the reconciler pass, see ht_probe()), so the target is level-based like
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
 * files through it (see ht_upload(), hosts-commands.c).
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
 * Starting without waiting: the unit is Type=notify, and etcd says
 * READY=1 only once it serves, which a member of a new static cluster
 * does only once a quorum of its peers runs. A `systemctl start` or
 * `restart` that waited for it would hold the first member's start until
 * the others were started, which happens only after it returns (a
 * bootstrap then took the SSH command's whole deadline per member). So
 * every start and restart is queued with --no-block, and the reconciler
 * waits on etcd's health (as it does on every target). A stop is never
 * queued: `systemctl disable --now` returns once the process is gone,
 * which remove_member relies on before it moves or deletes the data (a
 * pending start job is cancelled by it, not waited for).
 *
 * Reloading systemd: a `daemon-reload` is the slowest part of a start
 * (systemd reruns its generators and reloads every unit: 0.2 to 0.4 s on
 * a loaded machine, more when machines share cores), and `enable`
 * without --no-reload does a second one. So a unit is enabled with
 * --no-reload (the symlink, as Debian's packaging makes it) and reloaded
 * once: before the restart when its file was rewritten (the unit systemd
 * holds is the old one), and for a file that was not on the machine
 * when it was probed (a new member) only when systemd says it is needed:
 * systemd loads a unit it does not hold from its file when asked for it,
 * so a new unit shows LoadState=loaded and NeedDaemonReload=no and
 * starts as written; any other answer (an older systemd that keeps a
 * unit it once did not find, a unit still loaded from a file removed by
 * hand) reloads.
 *
 * Threads (targets/locked.h): every SSH step (ssh_step) runs with the
 * wrapper's shared lock let go, on a connection the pool lends to one
 * thread at a time (a libssh2 session is never used by two threads at
 * once); the probe cache and the error message are touched only with the
 * lock held. So clusters on other machines go on while one machine is
 * slow or does not answer; clusters that share that machine wait for it,
 * each step for at most its deadline. Within one operation, work on
 * several machines may run side by side on threads that continue it
 * under the same locks (ht_each, hosts-parallel.c): a static bootstrap's
 * members (ensure_members), the machines' reads before a placement.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "api/domains.h"
#include "api/spec.h"
#include "targets/locked.h"
#include "targets/local-tls.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

#define PROBE_MAX (64u * 1024u)

/* Remember c's machines for list_members (a copy through the normalized form). */
void ht_remember(hosts_target *ht, const etcd_cluster *c)
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

void ht_view_release(machine_view *v)
{
        free(v->claimed_by);
        free(v->identity);
        free(v->file_member);
        free(v->file_hash);
        memset(v, 0, sizeof(*v));
}

/* The unit file or manifest of the cluster's member on machine h. */
char *ht_member_file(const etcd_cluster *c, const host_spec *h)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return xasprintf("%s/etcd-%s-%s.yaml", h->manifest_dir, c->namespace_, c->name);
        return xasprintf("%s/etcd-%s-%s.service", h->unit_dir, c->namespace_, c->name);
}

char *ht_line_value(const char *text, const char *prefix)
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

/* The probe's one command for c's member on machine h. */
static char *probe_command(hosts_target *ht, const etcd_cluster *c, const host_spec *h)
{
        _cleanup_free_ char *marker = marker_path(h), *file = ht_member_file(c, h);
        _cleanup_free_ char *qm = ssh_quote(marker), *qf = ssh_quote(file);
        _cleanup_free_ char *member_dir = xasprintf("%s/member", h->data_dir);
        _cleanup_free_ char *qd = ssh_quote(member_dir);
        _cleanup_free_ char *foreign = ht_foreign_file(h), *qk = ssh_quote(foreign);
        _cleanup_free_ char *active = ht_foreign_active_test(ht, h, qk);
        _cleanup_free_ char *kubeadm_test = xasprintf("if %s; then echo foreign=yes; fi; ", active);
        _cleanup_free_ char *cmd = xasprintf(
            "if [ -f %s ]; then sed -n 's/^member=/marker=/p; s/^id=/marker-id=/p' %s; fi; "
            "if [ -d %s ]; then echo data=yes; fi; %s"
            "if [ -f %s ]; then echo mtime=$(stat -c %%Y %s) now=$(date +%%s); head -n 3 %s; fi",
            qm, qm, qd, kubeadm_test, qf, qf, qf);
        return TAKE_PTR(cmd);
}

/* The probe kept this pass for machine h's command cmd, NULL when there is none. */
static const char *probe_cached(hosts_target *ht, const host_spec *h, const char *cmd)
{
        _cleanup_free_ char *key = machine_key(h);
        for (size_t i = 0; i < ht->n_cache; i++)
                if (streq(ht->cache[i].machine, key) && streq(ht->cache[i].command, cmd))
                        return ht->cache[i].out;
        return NULL;
}

int ht_probe(hosts_target *ht, const etcd_cluster *c, const host_spec *h, machine_view *v)
{
        _cleanup_free_ char *cmd = probe_command(ht, c, h);
        _cleanup_free_ char *key = machine_key(h);
        memset(v, 0, sizeof(*v));
        _cleanup_free_ char *out = xstrdup_null(probe_cached(ht, h, cmd));
        if (!out) {
                int k = ht_exec_cmd(ht, h, cmd, NULL, 0, &out);
                if (k < 0) {
                        v->error = k;
                        return k;
                }
                ht->cache = xgrow(ht->cache, &ht->alloc_cache, ht->n_cache + 1, sizeof(*ht->cache));
                ht->cache[ht->n_cache++] = (probe_cache){
                    .machine = xstrdup(key), .command = xstrdup(cmd), .out = xstrdup(out)};
        }
        v->claimed_by = ht_line_value(out, "marker=");
        v->identity = ht_line_value(out, "marker-id=");
        _cleanup_free_ char *data = ht_line_value(out, "data=");
        v->has_data = data != NULL;
        _cleanup_free_ char *foreign_yes = ht_line_value(out, "foreign=");
        v->foreign_file = foreign_yes != NULL;
        v->file_member = ht_line_value(out, NAME_PREFIX);
        v->file_hash = ht_line_value(out, HASH_PREFIX);
        long long mtime = 0, now = 0;
        _cleanup_free_ char *times = ht_line_value(out, "mtime=");
        if (times && sscanf(times, "%lld now=%lld", &mtime, &now) == 2 && mtime > 0) {
                v->file_mtime_s = mtime;
                v->file_age_s = now - mtime;
        }
        return 0;
}

/* The machine advertising the host part of url ("http://10.0.0.11:2380"), or -1. */
int ht_machine_of_url(const etcd_cluster *c, const char *url)
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

static void probe_one(hosts_target *ht, void *arg, size_t i)
{
        const etcd_cluster *c = arg;
        machine_view v;
        if (ht_probe(ht, c, &c->hosts.items[i], &v) >= 0)
                ht_view_release(&v);
}

void ht_probe_all(hosts_target *ht, const etcd_cluster *c)
{
        size_t missing = 0;
        for (size_t i = 0; i < c->hosts.n; i++) {
                _cleanup_free_ char *cmd = probe_command(ht, c, &c->hosts.items[i]);
                missing += probe_cached(ht, &c->hosts.items[i], cmd) == NULL;
        }
        if (missing > 1)
                ht_each(ht, c->hosts.n, true, probe_one, (void *)c);
}

/*
 * Find the machine holding member `name` (by marker or by its file). 0
 * with *ret_idx -1 when no machine holds it and every machine answered;
 * the error of an unreachable machine when it is not found elsewhere.
 */
int ht_locate(hosts_target *ht, const etcd_cluster *c, const char *name, int *ret_idx,
              machine_view *ret_view)
{
        int unreachable = 0;
        ht_probe_all(ht, c);
        for (size_t i = 0; i < c->hosts.n; i++) {
                machine_view v;
                if (ht_probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        unreachable = v.error;
                        continue;
                }
                if (streq_ptr(v.claimed_by, name) || streq_ptr(v.file_member, name)) {
                        *ret_idx = (int)i;
                        *ret_view = v;
                        return 0;
                }
                ht_view_release(&v);
        }
        *ret_idx = -1;
        return unreachable;
}

const target_plan_ops hosts_plan_ops = {
    .machine_effects = hosts_machine_effects,
    .machine_adoption = hosts_machine_adoption,
};

/*
 * The machines' paths and addresses as intake checks them (api/spec.h),
 * checked again before anything runs on a machine: a caller that skipped
 * intake still never gets rm -rf of a system folder, nor a mount of one.
 * Every operation that writes on a machine asks it first (place, ensure,
 * remove, restore, drop_kept_data).
 * -EINVAL with the target's error set.
 */
int ht_check_machines(hosts_target *ht, const etcd_cluster *c)
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

/*
 * Keep machine h's probe for the rest of the pass as it reads after the
 * marker text was written there: the probe from before (the machine was
 * free) with the marker's lines as the probe's sed prints them. The next
 * placement and the start read the machine from it instead of asking
 * again (a round trip each, the placements one after another).
 */
static void probe_claimed(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                          const char *before, const char *marker)
{
        _cleanup_free_ char *cmd = probe_command(ht, c, h);
        if (!before || probe_cached(ht, h, cmd))
                return;
        strbuf sb = STRBUF_INIT;
        for (const char *p = marker; p && *p;) {
                const char *end = strchr(p, '\n');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len > 7 && strneq(p, "member=", 7))
                        sb_printf(&sb, "marker=%.*s\n", (int)(len - 7), p + 7);
                else if (len > 3 && strneq(p, "id=", 3))
                        sb_printf(&sb, "marker-id=%.*s\n", (int)(len - 3), p + 3);
                p = end ? end + 1 : NULL;
        }
        sb_append(&sb, before);
        ht->cache = xgrow(ht->cache, &ht->alloc_cache, ht->n_cache + 1, sizeof(*ht->cache));
        ht->cache[ht->n_cache++] = (probe_cache){
            .machine = machine_key(h), .command = TAKE_PTR(cmd), .out = sb_detach(&sb)};
}

/* Member name takes free machine h: its marker written, its preflight told where it went. */
static int claim(hosts_target *ht, const etcd_cluster *c, const host_spec *h, const char *name)
{
        _cleanup_free_ char *cmd = probe_command(ht, c, h);
        _cleanup_free_ char *before = xstrdup_null(probe_cached(ht, h, cmd));
        _cleanup_free_ char *marker = NULL;
        int k = ht_write_marker(ht, h, name, &marker);
        if (k < 0)
                return k;
        probe_claimed(ht, c, h, before, marker);
        ht_preflight_placed(ht, c, h, name);
        log_debug("hosts target: member %s placed on %s", name, h->address);
        return 0;
}

static int hosts_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                ht_remember(ht, c);
        if (!c->hosts.set || c->hosts.n == 0)
                return target_fail(t, -EINVAL, "cluster %s/%s has no spec.hosts", c->namespace_,
                                   c->name);
        if (ht_check_machines(ht, c) < 0)
                return -EINVAL;
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");

        /* a recorded member: the machine its recorded peer URL names, when still listed */
        int idx = ht_machine_of_url(c, mp->peer_url);
        if (idx < 0) {
                machine_view v;
                int k = ht_locate(ht, c, mp->name, &idx, &v);
                if (idx >= 0)
                        ht_view_release(&v);
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
        /* the machines that could not be asked; the free ones that failed their preflight */
        _cleanup_free_ char *why_not = NULL, *refused = NULL;
        size_t asked = 0;
        int not_asked = 0; /* why the last machine that could not be asked could not */
        /*
         * Without failure domains, the first free machine in list order. With
         * them every machine is asked, and the free one that spreads the
         * members best over the domains is taken (api/domains.h).
         */
        bool placing = idx < 0, spread = hosts_have_domains(&c->hosts);
        _cleanup_free_ bool *taken = xcalloc(c->hosts.n, sizeof(bool));
        _cleanup_free_ bool *candidate = xcalloc(c->hosts.n, sizeof(bool));
        for (size_t i = 0; idx < 0 && i < c->hosts.n; i++) {
                machine_view v;
                if (ht_probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        char *more = xasprintf("%s%s%s", why_not ? why_not : "",
                                               why_not ? "; " : "", target_last_error(t));
                        str_assign(&why_not, more);
                        not_asked = v.error;
                        continue;
                }
                asked++;
                bool free_machine = !v.claimed_by && !v.file_member;
                ht_view_release(&v);
                taken[i] = !free_machine;
                candidate[i] =
                    free_machine && !ht_preflight_refuses(ht, c, &c->hosts.items[i], &refused);
                if (!candidate[i] || spread)
                        continue;
                idx = (int)i;
        }
        if (placing && spread)
                idx = domains_pick(&c->hosts, taken, candidate);
        int claimed = placing && idx >= 0 ? claim(ht, c, &c->hosts.items[idx], mp->name) : 0;
        if (claimed < 0)
                return claimed;
        if (idx < 0 && refused)
                return ht_preflight_wait(ht, mp->name, refused, why_not);
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
                int k = ht_tls_home(ht, c, &home);
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
        int k = ht_tls_issue(ht, c, p, NULL, false, now_wall_ms());
        return k < 0 ? k : 0;
}

/*
 * The machine member mp was placed on (its peer URL's host), probed: -EBUSY
 * when another member claims it. *ret_view is the probe (release it).
 */
int ht_member_machine(hosts_target *ht, const etcd_cluster *c, const member_plan *mp,
                      const host_spec **ret_h, machine_view *ret_view)
{
        int m = ht_machine_of_url(c, mp->peer_url);
        if (m < 0)
                return target_fail(&ht->base, -EINVAL,
                                   "member %s: its peer URL %s is on no machine", mp->name,
                                   mp->peer_url ? mp->peer_url : "(none)");
        const host_spec *h = &c->hosts.items[m];
        int k = ht_probe(ht, c, h, ret_view);
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
        int k = ht_exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0)
                return k;
        _cleanup_free_ char *v = ht_line_value(out, "etcd Version: ");
        if (v && streq(v, c->version))
                return 0;
        return target_fail(&ht->base, -EINVAL,
                           "%s: etcdBinary %s is etcd %s, not %s (spec.version); install etcd %s "
                           "there and point etcdBinary at it",
                           h->address, h->etcd_binary, v ? v : "of a version it does not say",
                           c->version, c->version);
}

/*
 * The command that starts the unit qu (quoted) after its file was written:
 * enabled without systemd's implicit reload, reloaded once, restarted
 * without waiting. fresh: the file was not on the machine before (see
 * "Reloading systemd" above): reloaded only when systemd says so.
 */
static char *start_command(hosts_target *ht, const char *qu, bool fresh)
{
        const char *sc = ht->systemctl;
        if (!fresh)
                return xasprintf("%s enable --no-reload %s && %s daemon-reload && %s restart "
                                 "--no-block %s",
                                 sc, qu, sc, sc, qu);
        return xasprintf("{ [ \"$(%s show --property=LoadState --property=NeedDaemonReload %s | "
                         "grep -cx -e LoadState=loaded -e NeedDaemonReload=no)\" = 2 ] || %s "
                         "daemon-reload; } && %s enable --no-reload %s && %s restart --no-block %s",
                         sc, qu, sc, sc, qu, sc, qu);
}

/*
 * Everything ensure_member does for member idx of p but the start itself:
 * the probe, the checks, the binary's version, the TLS leaves and the file
 * that starts it. *ret_h is its
 * machine; *ret_start the command that starts it there, NULL when nothing
 * is left to start (a manifest: kubelet starts it). The caller has
 * remembered c and checked its machines.
 */
static int ensure_prepare(hosts_target *ht, const etcd_cluster *c, const membership_plan *p,
                          size_t idx, const host_spec **ret_h, char **ret_start)
{
        target *t = &ht->base;
        int k;
        if (idx >= p->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        const host_spec *h = NULL;
        _cleanup_(ht_view_release) machine_view v = {0};
        k = ht_member_machine(ht, c, mp, &h, &v);
        if (k < 0)
                return k;
        if (!v.claimed_by && v.file_member)
                return target_fail(t, -ESTALE,
                                   "member %s: the data identity marker on %s is gone (a wiped "
                                   "data disk); it cannot rejoin with the same identity and must "
                                   "be replaced",
                                   mp->name, h->address);
        if (mp->data_identity && !v.claimed_by)
                return target_fail(t, -ESTALE,
                                   "member %s: %s holds no data identity marker, but the member "
                                   "ran with data before (a wiped data disk, or another machine); "
                                   "it cannot rejoin empty and must be replaced",
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
        k = pod ? ht_manifest_text(c, mp, argv, &text, &why)
                : ht_unit_text(c, mp, argv, &text, &why);
        if (k < 0)
                return target_fail(t, k, "member %s: refusing to write %s to %s: %s", mp->name,
                                   pod ? "the manifest" : "the unit", h->address, why);
        if (!v.claimed_by && (k = ht_write_marker(ht, h, mp->name, NULL)) < 0)
                return k;

        _cleanup_free_ char *unit = unit_name(c);
        _cleanup_free_ char *qu = ssh_quote(unit);
        *ret_h = h;
        if (v.file_member && streq_ptr(v.file_hash, mp->config_hash)) {
                if (!pod) /* else kubelet keeps it running */
                        *ret_start = xasprintf("%s is-active --quiet %s || %s start --no-block %s",
                                               ht->systemctl, qu, ht->systemctl, qu);
                return 0;
        }

        if (!pod && (k = check_binary_version(ht, c, h)) < 0)
                return k;
        if (auto_tls(c)) {
                /* the member's leaves first: the file that starts it names them */
                if ((k = ht_tls_issue(ht, c, p, mp->name, false, now_wall_ms())) < 0)
                        return k;
                if ((k = ht_tls_upload(ht, c, h, mp)) < 0)
                        return k;
        }
        if (pod && (k = ht_retire_kubeadm(ht, h)) < 0)
                return k;
        if (pod && k > 0 && (k = ht_wait_stopped(ht, h, mp->name, false)) < 0)
                return k;
        if (!pod && (k = ht_retire_foreign_unit(ht, h, mp->name)) < 0)
                return k;
        _cleanup_free_ char *path = ht_member_file(c, h);
        k = ht_upload(ht, h, path, text, strlen(text), pod ? 0600 : 0644);
        if (k < 0)
                return k;
        log_debug("hosts target: wrote %s on %s for member %s", path, h->address, mp->name);
        if (pod)
                return 0;
        /*
         * One remote command after the file is written, so the restart
         * happens even if gitcd stops half-way (a running member's file
         * with the new hash would otherwise be taken for running it);
         * queued, not waited on (see "Starting without waiting" above).
         */
        *ret_start = start_command(ht, qu, v.file_member == NULL);
        return 0;
}

static int hosts_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p,
                               size_t idx)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                ht_remember(ht, c);
        int k = ht_check_machines(ht, c);
        if (k < 0)
                return k;
        const host_spec *h = NULL;
        _cleanup_free_ char *start = NULL;
        if ((k = ensure_prepare(ht, c, p, idx, &h, &start)) < 0)
                return k;
        return start ? run(ht, h, start, NULL) : 0;
}

/*
 * A static bootstrap's members (ensure_members): each member prepared on
 * its own thread (ensure_prepare: its machine's connection and probe, the
 * binary's version, the TLS leaves, the upload), then every member that
 * was prepared started at once, one command per machine (enable, a
 * daemon-reload when needed, restart --no-block: the same command
 * ensure_member runs), again
 * side by side (ht_each, hosts-parallel.c). The members of a static initial
 * cluster wait for each other anyway; what this saves is each machine's
 * round trips added one after another. Members of one plan on one machine
 * (which placement never makes) are prepared one after another.
 */
typedef struct boot_member {
        int result;
        char *error; /* the message of a failure, naming the machine */
        const host_spec *h;
        char *start; /* the start command, NULL: nothing to start */
} boot_member;

typedef struct boot {
        const etcd_cluster *c;
        const membership_plan *p;
        boot_member *m;
} boot;

static void boot_prepare(hosts_target *ht, void *arg, size_t i)
{
        boot *b = arg;
        boot_member *m = &b->m[i];
        m->result = ensure_prepare(ht, b->c, b->p, i, &m->h, &m->start);
        if (m->result < 0)
                m->error = xstrdup(target_last_error(&ht->base));
}

static void boot_start(hosts_target *ht, void *arg, size_t i)
{
        boot_member *m = &((boot *)arg)->m[i];
        if (m->result < 0 || !m->start)
                return;
        m->result = run(ht, m->h, m->start, NULL);
        if (m->result < 0)
                m->error = xstrdup(target_last_error(&ht->base));
}

/* Whether two members of p advertise the same machine (or one advertises none known). */
static bool plan_shares_machines(const etcd_cluster *c, const membership_plan *p)
{
        for (size_t i = 0; i < p->n; i++) {
                int a = ht_machine_of_url(c, p->members[i].peer_url);
                if (a < 0)
                        return true;
                for (size_t j = 0; j < i; j++)
                        if (ht_machine_of_url(c, p->members[j].peer_url) == a)
                                return true;
        }
        return false;
}

static int hosts_ensure_members(target *t, const etcd_cluster *c, const membership_plan *p,
                                int *ret_results)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                ht_remember(ht, c);
        int k = ht_check_machines(ht, c);
        if (k < 0) {
                for (size_t i = 0; i < p->n; i++)
                        ret_results[i] = k;
                return k;
        }
        _cleanup_free_ boot_member *m = xcalloc(p->n ? p->n : 1, sizeof(*m));
        boot b = {.c = c, .p = p, .m = m};
        bool side_by_side = !plan_shares_machines(c, p);
        ht_each(ht, p->n, side_by_side, boot_prepare, &b);
        ht_each(ht, p->n, side_by_side, boot_start, &b);
        int first = 0;
        _cleanup_free_ char *why = NULL;
        for (size_t i = 0; i < p->n; i++) {
                ret_results[i] = m[i].result;
                if (m[i].result < 0) {
                        char *more =
                            xasprintf("%s%smember %s: %s", why ? why : "", why ? "; " : "",
                                      p->members[i].name, m[i].error ? m[i].error : "failed");
                        str_assign(&why, more);
                        first = first ? first : m[i].result;
                }
                free(m[i].error);
                free(m[i].start);
        }
        if (first < 0)
                return target_fail(t, first, "%s", why);
        log_debug("hosts target: %zu members of %s/%s started %s", p->n, c->namespace_, c->name,
                  side_by_side ? "side by side" : "one after another");
        return 0;
}

/* Stop the member on machine h: remove its file (after stopping the unit). */
static int stop_on(hosts_target *ht, const etcd_cluster *c, const host_spec *h)
{
        _cleanup_free_ char *path = ht_member_file(c, h), *unit = unit_name(c);
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
                ht_remember(ht, c);
        _cleanup_(ht_view_release) machine_view v = {0};
        int idx;
        int k = ht_locate(ht, c, member, &idx, &v);
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
                ht_remember(ht, c);
        int k = ht_check_machines(ht, c);
        if (k < 0)
                return k;
        _cleanup_(ht_view_release) machine_view v = {0};
        int idx;
        k = ht_locate(ht, c, member, &idx, &v);
        if (idx < 0)
                return k;
        const host_spec *h = &c->hosts.items[idx];
        if ((k = stop_on(ht, c, h)) < 0 || (k = ht_wait_stopped(ht, h, member, false)) < 0)
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
                ht_remember(ht, c);
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        if (ht_check_machines(ht, c) < 0)
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
        ht_probe_all(ht, c);
        for (size_t i = 0; i < c->hosts.n; i++) {
                machine_view v;
                if (ht_probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        k = v.error;
                        break;
                }
                if (v.claimed_by)
                        add_name(&names, &n, &alloc, v.claimed_by);
                if (v.file_member)
                        add_name(&names, &n, &alloc, v.file_member);
                ht_view_release(&v);
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
        ht_forget_probes(HT(t), NULL);
        ssh_pool_new_pass(HT(t)->pool);
        return 0;
}

static int hosts_wait_event(target *t, int timeout_ms)
{
        (void)t;
        /* No events from remote machines: the reconciler polls. Nothing
         * shared is used while it sleeps (target_sleep lets others in). */
        if (timeout_ms > 0) {
                target_blocking_begin();
                (void)target_sleep(timeout_ms);
                target_blocking_end();
        }
        return 0;
}

static void hosts_free(target *t)
{
        hosts_target *ht = HT(t);
        ht_forget_probes(ht, NULL);
        free(ht->cache);
        ht_preflights_free(ht);
        ssh_pool_free(ht->pool);
        free(ht->systemctl);
        free(ht->state_dir);
        for (size_t i = 0; i < ht->n_seen; i++)
                etcd_cluster_free(ht->seen[i]);
        free(ht->seen);
        free(ht);
}

int hosts_target_peer_port(const target *t)
{
        return ((const hosts_target *)t)->o.peer_port;
}

static const target_ops hosts_ops = {
    .name = "hosts",
    .caps = HOSTS_TARGET_CAPS,
    .place_member = hosts_place_member,
    .ensure_shared = hosts_ensure_shared,
    .ensure_member = hosts_ensure_member,
    .ensure_members = hosts_ensure_members,
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
    .debug = &hosts_debug_ops,
    .machines = &hosts_machine_ops,
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

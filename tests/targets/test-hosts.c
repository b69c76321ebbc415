/*
 * The hosts target (targets/hosts.c) against three real sshd machines on
 * 127.0.0.2-4 (tests/harness/sshd.h) with real etcd 3.5.16 members. The
 * host agent (tests/harness/hostagent.h) is a simulator: it plays systemd
 * for the unit directories and kubelet for the manifest directories,
 * because neither can run here; SSH, the files gitcd writes, and etcd are
 * real, and health is read from etcd.
 *
 * Covered: the target contract (as tests/targets/test-conformance.c checks
 * it for the other targets) in systemd and staticPod mode; three members
 * bootstrapped across three machines; a static bootstrap's three members
 * prepared side by side (their `etcd --version` calls meet at a
 * rendezvous one at a time would never reach) and started together, and
 * one machine's refusal naming it while the other two start; a
 * bootstrap's placement and start reading no machine again after its
 * claim, and systemd reloaded once per start at most (only when it asks,
 * for a new unit); a wiped data disk reported as data loss and never
 * restarted empty; a machine that does not answer never
 * reported "absent" while the others go on; a machine with a wrong host
 * key refused with nothing written on it; a member removed with its data
 * kept (set aside beside the data directory, the machine free) and that
 * data deleted later by drop_kept_data, and no other member's; a static
 * Pod not ready on a changed manifest until it runs it, and its data moved
 * only once its etcd stopped (the simulated kubelet acts on a changed or
 * removed manifest a second later); a distribution's etcd.service left
 * alone when it runs other data, and disabled before gitcd's unit starts
 * a member whose data it runs (reported until then as run by it); a
 * cluster that skipped intake (a home folder as dataDir, a newline in a
 * flag value) refused by the target itself with nothing written; a free
 * machine whose disk fails the preflight not placed on, its verdict reused
 * within the interval, and the machines holding members measured again
 * once it passed (see test_preflight_refuses_slow_machine for how a disk
 * is slow); the peer RTT a preflight measures over SSH from a member's
 * machine to the others' peer ports, and the timeouts derived from it in
 * the unit written (see test_peer_rtt_in_unit for how a link is slow).
 * With a
 * user other than root
 * (`ssh.user`), on the machine's real sudo and the accounts scripts/setup
 * creates: the same contract through `sudo -n` as gitcd-test,
 * tls.provider auto leaves and a snapshot restore, the files root's with
 * their documented modes; gitcd-nosudo (no sudo rights)
 * refused with sudo's reason and nothing written; sudo's warnings on a
 * machine whose own name does not resolve not taken for a refusal. Those
 * cases skip where the accounts do not exist.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/spec.h"
#include "render/render.h"
#include "targets/health.h"
#include "state/preflights.h"
#include "reconciler/timeouts.h"
#include "targets/hosts-preflight.h"
#include "targets/hosts-rtt.h"
#include "targets/hosts.h"
#include "targets/locked.h"
#include "tests/harness/harness.h"
#include "tests/harness/hostagent.h"
#include "tests/harness/sshd.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MACHINES 3

static sshd_lab *lab;
static hostagent *agent;
static char *etcd_bin, *systemctl, *systemctl_log;
static int client_port, peer_port, metrics_port;
static char *state_dir; /* the gitcd host's side: cluster CAs */

static char *machine_path(size_t i, const char *path)
{
        return xasprintf("%s%s", lab->machines[i].root, path);
}

/* user: spec.hosts.ssh.user of every machine, NULL for the default (root). */
static etcd_cluster *load_cluster_as(const char *name, const char *mode, int replicas,
                                     const char *extra, const char *user)
{
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb,
                  "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: %s\n"
                  "spec:\n  replicas: %d\n  version: \"3.5.16\"\n  hosts:\n    mode: %s\n"
                  "    machines:\n",
                  name, replicas, mode);
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *data = machine_path(i, "/var/lib/etcd");
                _cleanup_free_ char *units = machine_path(i, "/etc/systemd/system");
                _cleanup_free_ char *pods = machine_path(i, "/etc/kubernetes/manifests");
                sb_printf(&sb,
                          "    - address: %s\n      ssh: {port: %d%s%s}\n      dataDir: %s/%s\n",
                          lab->machines[i].address, lab->machines[i].port, user ? ", user: " : "",
                          user ? user : "", data, name);
                if (streq(mode, "systemd"))
                        sb_printf(&sb, "      unitDir: %s\n      etcdBinary: %s\n", units,
                                  etcd_bin);
                else
                        sb_printf(&sb, "      manifestDir: %s\n", pods);
                if (extra) {
                        _cleanup_free_ char *tls = machine_path(i, "/etc/etcd");
                        sb_printf(&sb, "      tlsDir: %s/%s/pki\n", tls, name);
                }
        }
        if (extra)
                sb_append(&sb, extra);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        int r = spec_load_buffer("hosts.yaml", sb.buf, sb.len, &set, &diags);
        if (r < 0)
                diag_print(&diags, stderr);
        assert_int_equal(r, 0);
        etcd_cluster *c = set.items[0];
        set.n = 0;
        cluster_set_release(&set);
        diag_list_release(&diags);
        sb_release(&sb);
        return c;
}

static etcd_cluster *load_cluster_with(const char *name, const char *mode, int replicas,
                                       const char *extra)
{
        return load_cluster_as(name, mode, replicas, extra, NULL);
}

static etcd_cluster *load_cluster(const char *name, const char *mode, int replicas)
{
        return load_cluster_with(name, mode, replicas, NULL);
}

/* connect_timeout_ms: how long a step waits for a machine's SSH greeting and login. */
static target *new_target_timeout(const char *known_hosts, const char *systemctl_path,
                                  int connect_timeout_ms)
{
        hosts_target_opts o = {
            .ssh = {.known_hosts = known_hosts ? known_hosts : lab->known_hosts,
                    .key_file = lab->client_key,
                    .connect_timeout_ms = connect_timeout_ms,
                    .command_timeout_ms = 20000},
            .systemctl = systemctl_path ? systemctl_path : systemctl,
            .client_port = client_port,
            .peer_port = peer_port,
            .metrics_port = metrics_port,
            .health_timeout_ms = 1000,
            .state_dir = state_dir,
        };
        target *t = NULL;
        assert_int_equal(hosts_target_new(&o, &t), 0);
        return t;
}

static target *new_target_with(const char *known_hosts, const char *systemctl_path)
{
        return new_target_timeout(known_hosts, systemctl_path, 5000);
}

static target *new_target(const char *known_hosts)
{
        return new_target_with(known_hosts, NULL);
}

/* A plan of n members started together ("new"), each placed by the target. */
static membership_plan *plan_new(target *t, const etcd_cluster *c, size_t n)
{
        membership_plan *p = membership_plan_new(c);
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < n; i++) {
                member_plan *mp = membership_plan_add(p);
                mp->name = render_member_name(c, (int)i);
                mp->ordinal = (int)i;
                if (t->ops->place_member(t, c, mp) < 0)
                        fail_msg("place %s: %s", mp->name, target_last_error(t));
                sb_printf(&ic, "%s%s=%s", i ? "," : "", mp->name, mp->peer_url);
        }
        for (size_t i = 0; i < n; i++) {
                p->members[i].initial_cluster = xstrdup(sb_str(&ic));
                p->members[i].initial_cluster_state = xstrdup("new");
                p->members[i].config_hash = render_member_config_hash(c, p, i);
        }
        sb_release(&ic);
        return p;
}

static target_member_status status(target *t, const etcd_cluster *c, const char *name)
{
        target_member_status s = {0};
        if (t->ops->member_status(t, c, name, &s) < 0)
                fail_msg("status %s: %s", name, target_last_error(t));
        return s;
}

static void wait_ready(target *t, const etcd_cluster *c, const char *name)
{
        _cleanup_free_ char *last = NULL;
        for (int i = 0; i < 600; i++) {
                target_member_status s = status(t, c, name);
                bool ready = s.state == MEMBER_READY;
                str_assign(&last, xstrdup_null(s.detail));
                target_member_status_release(&s);
                if (ready)
                        return;
                msleep(100);
        }
        fail_msg("member %s never became ready (%s)", name, last ? last : "no detail");
}

static bool listed(target *t, const etcd_cluster *c, const char *name)
{
        char **names = NULL;
        size_t n = 0;
        if (t->ops->list_members(t, c->namespace_, c->name, &names, &n) < 0)
                fail_msg("list: %s", target_last_error(t));
        bool found = false;
        for (size_t i = 0; i < n; i++) {
                found = found || streq(names[i], name);
                free(names[i]);
        }
        free(names);
        return found;
}

/* How many systemctl calls (one line each: its arguments) began with verb. */
static size_t systemctl_calls(const char *verb)
{
        _cleanup_free_ char *log = NULL;
        size_t len, n = 0;
        if (read_file(systemctl_log, 1 << 20, &log, &len) < 0)
                return 0;
        size_t k = strlen(verb);
        for (const char *p = log; p && *p;) {
                if (strneq(p, verb, k) && (p[k] == ' ' || p[k] == '\n' || !p[k]))
                        n++;
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
        return n;
}

/* The machine holding path (under its root prefix). */
static size_t machine_of_path(const char *path)
{
        for (size_t i = 0; i < MACHINES; i++)
                if (strneq(path, lab->machines[i].root, strlen(lab->machines[i].root)))
                        return i;
        fail_msg("%s is on no machine", path);
        return 0;
}

/* path exists, owned by root, with these permission bits. */
static void assert_root_file(const char *path, mode_t mode)
{
        struct stat st;
        if (stat(path, &st) < 0)
                fail_msg("%s: %s", path, strerror(errno));
        if (st.st_uid != 0 || st.st_gid != 0 || (st.st_mode & 07777) != mode)
                fail_msg("%s: owner %u:%u mode %04o, want 0:0 mode %04o", path, (unsigned)st.st_uid,
                         (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777), (unsigned)mode);
}

/* user: the SSH user (NULL: root); every other user goes through `sudo -n`. */
static void contract(const char *mode, const char *name, const char *user)
{
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster_as(name, mode, 1, NULL, user);

        /* An unknown member is absent. */
        target_member_status s = status(t, c, "nobody-7");
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);

        /* Placing is stable: the marker on the machine claims it. */
        membership_plan *p = plan_new(t, c, 1);
        const member_plan *mp = &p->members[0];
        member_plan again = {.name = xstrdup(mp->name), .ordinal = 0};
        assert_int_equal(t->ops->place_member(t, c, &again), 0);
        assert_string_equal(again.peer_url, mp->peer_url);
        assert_string_equal(again.client_url, mp->client_url);
        assert_string_equal(again.data_dir, mp->data_dir);
        member_plan_release(&again);
        _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", mp->data_dir);
        assert_root_file(marker, 0600);
        assert_root_file(mp->data_dir, 0700);

        /* A member that ran (its data identity recorded) on a machine spec.hosts no longer
         * lists is placed nowhere: no free machine is claimed for it, where it would start
         * without its data; its plan keeps the recorded URLs. */
        _cleanup_free_ char *gone_name = xasprintf("%s-9", name);
        member_plan gone = {.name = xstrdup(gone_name),
                            .ordinal = 9,
                            .peer_url = xstrdup("http://10.255.0.1:2380"),
                            .client_url = xstrdup("http://10.255.0.1:2379"),
                            .data_identity = xstrdup("00112233445566778899aabbccddeeff")};
        assert_int_equal(t->ops->place_member(t, c, &gone), 0);
        assert_string_equal(gone.peer_url, "http://10.255.0.1:2380");
        assert_null(gone.data_dir);
        member_plan_release(&gone);
        s = status(t, c, gone_name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        assert_non_null(strstr(s.detail, "on no machine"));
        target_member_status_release(&s);

        /* Twice is once: the second ensure restarts nothing. */
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        size_t restarts = systemctl_calls("restart");
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        assert_int_equal(systemctl_calls("restart"), restarts);
        /* the unit or manifest: root's, with the documented mode */
        size_t on = machine_of_path(mp->data_dir);
        _cleanup_free_ char *file = streq(mode, "systemd")
                                        ? xasprintf("%s/etc/systemd/system/etcd-%s-%s.service",
                                                    lab->machines[on].root, c->namespace_, c->name)
                                        : xasprintf("%s/etc/kubernetes/manifests/etcd-%s-%s.yaml",
                                                    lab->machines[on].root, c->namespace_, c->name);
        assert_root_file(file, streq(mode, "systemd") ? 0644 : 0600);
        wait_ready(t, c, mp->name);
        s = status(t, c, mp->name);
        assert_string_equal(s.config_hash, mp->config_hash);
        target_member_status_release(&s);
        assert_true(listed(t, c, mp->name));

        char *ca = (char *)1, *cert = (char *)1, *key = (char *)1;
        assert_int_equal(t->ops->client_tls(t, c, &ca, &cert, &key), 0);
        assert_null(ca);
        assert_null(cert);
        assert_null(key);

        /* Stopped: not running, data and place kept; twice is once. */
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        s = status(t, c, mp->name);
        assert_int_equal(s.state, MEMBER_STOPPED);
        target_member_status_release(&s);
        assert_true(listed(t, c, mp->name));

        /* Removed: absent, not listed, its data gone; twice is once; unknown is fine. */
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        assert_int_equal(t->ops->stop_member(t, c, "nobody-7"), 0);
        s = status(t, c, mp->name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);
        assert_false(listed(t, c, mp->name));
        assert_false(path_exists(mp->data_dir));
        assert_false(path_exists(file));

        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

static void test_contract_systemd(void **state)
{
        (void)state;
        contract("systemd", "sysd", NULL);
        assert_true(systemctl_calls("daemon-reload") > 0);
}

static void test_contract_static_pod(void **state)
{
        (void)state;
        contract("staticPod", "pods", NULL);
}

/*
 * A user other than root, through the machine's real sudo: the accounts
 * scripts/setup creates (gitcd-test with password-less sudo, gitcd-nosudo
 * with none). Skipped where they do not exist.
 */
#define SUDO_USER   "gitcd-test"
#define NOSUDO_USER "gitcd-nosudo"

static bool have_test_accounts(void)
{
        if (access("/usr/bin/sudo", X_OK) < 0 || !getpwnam(SUDO_USER) || !getpwnam(NOSUDO_USER)) {
                fprintf(stderr,
                        "skipped: no sudo or no accounts %s and %s (./scripts/setup "
                        "creates them, as root)\n",
                        SUDO_USER, NOSUDO_USER);
                return false;
        }
        /* sshd reads the lab's authorized_keys as that user: every folder above the lab
         * must let others through (a TMPDIR in a private folder does not) */
        _cleanup_free_ char *dir = xstrdup(lab->dir);
        for (char *slash; (slash = strrchr(dir, '/')) && slash != dir;) {
                *slash = '\0';
                struct stat st;
                if (stat(dir, &st) < 0 || !(st.st_mode & S_IXOTH)) {
                        fprintf(stderr, "skipped: other users cannot reach %s, below %s\n",
                                lab->dir, dir);
                        return false;
                }
        }
        return true;
}

/* Whether machine i's sshd let user in with the lab's key. */
static bool logged_in_as(size_t i, const char *user)
{
        _cleanup_free_ char *path = xasprintf("%s/sshd.log", lab->machines[i].dir);
        _cleanup_free_ char *log = NULL, *want = xasprintf("Accepted publickey for %s ", user);
        size_t len;
        return read_file(path, 1 << 24, &log, &len) == 0 && strstr(log, want);
}

static void test_contract_through_sudo(void **state)
{
        (void)state;
        if (!have_test_accounts())
                skip();
        contract("systemd", "viasudo", SUDO_USER);
        assert_true(logged_in_as(0, SUDO_USER));
        contract("staticPod", "podsudo", SUDO_USER);
}

/* tls.provider auto through sudo: the leaves root's, keys 0600 in folders 0700. */
static void test_tls_through_sudo(void **state)
{
        (void)state;
        if (!have_test_accounts())
                skip();
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster_as("tlssudo", "staticPod", 1,
                                          "  tls:\n    provider: auto\n    client: {enabled: "
                                          "true}\n    peer: {enabled: true}\n",
                                          SUDO_USER);
        membership_plan *p = plan_new(t, c, 1);
        const member_plan *mp = &p->members[0];
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        static const char *const dirs[] = {"client", "peer"};
        static const char *const files[] = {"tls.crt", "tls.key", "ca.crt"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                _cleanup_free_ char *d = xasprintf("%s/%s", mp->tls_dir, dirs[i]);
                assert_root_file(d, 0700);
                for (size_t j = 0; j < ARRAY_SIZE(files); j++) {
                        _cleanup_free_ char *f = xasprintf("%s/%s", d, files[j]);
                        assert_root_file(f, 0600);
                }
        }
        wait_ready(t, c, mp->name); /* etcd runs on what sudo wrote */
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        assert_false(path_exists(mp->data_dir));
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

/* etcdctl of 3.5.16 with these arguments; its exit status. */
static int etcdctl(const char *fmt, ...) _printf_(1, 2);
static int etcdctl(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *args = xvasprintf(fmt, ap);
        va_end(ap);
        _cleanup_free_ char *bin = harness_etcd_path("3.5.16", "etcdctl");
        _cleanup_free_ char *cmd = xasprintf("ETCDCTL_API=3 '%s' %s", bin, args);
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * A snapshot restored through sudo (the restored files go to the machine
 * as root's, 0600 in folders 0700) and a member started on it with the
 * snapshot's data.
 */
static void test_restore_through_sudo(void **state)
{
        (void)state;
        if (!have_test_accounts())
                skip();
        /* a snapshot of a member holding one key */
        target *t = new_target(NULL);
        etcd_cluster *src = load_cluster_as("snapsrc", "systemd", 1, NULL, SUDO_USER);
        membership_plan *p = plan_new(t, src, 1);
        assert_int_equal(t->ops->ensure_member(t, src, p, 0), 0);
        wait_ready(t, src, p->members[0].name);
        _cleanup_free_ char *snap = xasprintf("%s/snapsrc.db", lab->dir);
        assert_int_equal(etcdctl("--endpoints %s put restored-key through-sudo >/dev/null",
                                 p->members[0].client_url),
                         0);
        assert_int_equal(etcdctl("--endpoints %s snapshot save '%s' >/dev/null 2>&1",
                                 p->members[0].client_url, snap),
                         0);
        assert_int_equal(t->ops->remove_member(t, src, p->members[0].name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(src);

        /* restored into another cluster's member, through sudo */
        etcd_cluster *c = load_cluster_as("snapdst", "systemd", 1, NULL, SUDO_USER);
        p = plan_new(t, c, 1);
        const member_plan *mp = &p->members[0];
        _cleanup_free_ char *tool = harness_etcd_path("3.5.16", "etcdutl");
        target_restore rs = {.snapshot = snap, .tool = tool};
        assert_int_equal(t->ops->restore_member(t, c, p, 0, &rs), 0);
        _cleanup_free_ char *member = xasprintf("%s/member", mp->data_dir);
        _cleanup_free_ char *snapdir = xasprintf("%s/snap", member);
        _cleanup_free_ char *db = xasprintf("%s/db", snapdir);
        assert_root_file(member, 0700);
        assert_root_file(snapdir, 0700);
        assert_root_file(db, 0600);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        wait_ready(t, c, mp->name);
        assert_int_equal(etcdctl("--endpoints %s get restored-key --print-value-only | "
                                 "grep -qx through-sudo",
                                 mp->client_url),
                         0);
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

static void test_no_sudo_refused(void **state)
{
        (void)state;
        if (!have_test_accounts())
                skip();
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster_as("nosudo", "systemd", 1, NULL, NOSUDO_USER);
        member_plan mp = {.name = render_member_name(c, 0), .ordinal = 0};
        _cleanup_free_ char *want = xasprintf("`sudo -n` refused for user %s", NOSUDO_USER);

        /* placing asks every machine, and says why none could be asked */
        assert_int_equal(t->ops->place_member(t, c, &mp), -EACCES);
        assert_non_null(strstr(target_last_error(t), "no machine in spec.hosts.machines could "
                                                     "be asked"));
        assert_non_null(strstr(target_last_error(t), want));
        assert_non_null(strstr(target_last_error(t), "needs password-less sudo"));
        /* the member is not taken for absent */
        target_member_status s = {0};
        assert_int_equal(t->ops->member_status(t, c, mp.name, &s), -EACCES);
        assert_non_null(strstr(target_last_error(t), want));
        assert_true(logged_in_as(0, NOSUDO_USER)); /* SSH let it in: sudo refused */

        /* nothing written on any machine */
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *unit =
                    machine_path(i, "/etc/systemd/system/etcd-default-nosudo.service");
                assert_false(path_exists(c->hosts.items[i].data_dir));
                assert_false(path_exists(unit));
        }
        member_plan_release(&mp);
        etcd_cluster_free(c);
        target_free(t);
}

/* systemd mode: a unit is never written for an etcd binary of another version than the spec's */
static void test_binary_of_another_version(void **state)
{
        (void)state;
        char *real = etcd_bin;
        _cleanup_free_ char *fake = xasprintf("%s/etcd-3.5.15", lab->dir);
        static const char script[] = "#!/bin/sh\necho 'etcd Version: 3.5.15'\necho 'Git SHA: 0'\n";
        assert_int_equal(write_file_atomic(fake, script, strlen(script), 0755), 0);
        etcd_bin = fake;
        etcd_cluster *c = load_cluster("olde", "systemd", 1);
        etcd_bin = real;
        target *t = new_target(NULL);
        membership_plan *p = plan_new(t, c, 1);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), -EINVAL);
        if (!strstr(target_last_error(t), "is etcd 3.5.15, not 3.5.16 (spec.version)"))
                fail_msg("no word of the binary's version: %s", target_last_error(t));
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *unit =
                    machine_path(i, "/etc/systemd/system/etcd-default-olde.service");
                assert_false(path_exists(unit));
        }
        assert_int_equal(t->ops->remove_member(t, c, p->members[0].name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

/*
 * A caller that hands the target a cluster intake would have refused:
 * the target refuses it too, before anything is written or run on a
 * machine (no data directory, marker, unit or systemctl call; the line a
 * newline in a flag value would have added never runs).
 */
static void test_bypassed_intake_refused(void **state)
{
        (void)state;
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster("bypass", "systemd", 1);
        _cleanup_free_ char *ran = machine_path(0, "/injected");
        _cleanup_free_ char *calls_before = NULL;
        size_t len = 0;
        (void)read_file(systemctl_log, 1 << 20, &calls_before, &len);
        if (calls_before && strstr(calls_before, "bypass"))
                fail_msg("systemctl log names the cluster already:\n%s", calls_before);

        /*
         * a home folder as every machine's dataDir (the machines are this
         * host: one that does not exist, so a regression costs no data)
         */
        const char *home = "/home/gitcd-test-no-such-user";
        assert_false(path_exists(home));
        char *saved[MACHINES];
        for (size_t i = 0; i < MACHINES; i++) {
                saved[i] = c->hosts.items[i].data_dir;
                c->hosts.items[i].data_dir = xstrdup(home);
        }
        member_plan mp = {.name = render_member_name(c, 0), .ordinal = 0};
        assert_int_equal(t->ops->place_member(t, c, &mp), -EINVAL);
        if (!strstr(target_last_error(t), "is a home folder"))
                fail_msg("no word of the home folder: %s", target_last_error(t));
        assert_int_equal(t->ops->remove_member(t, c, mp.name, false), -EINVAL);
        assert_false(path_exists(home));
        for (size_t i = 0; i < MACHINES; i++) {
                free(c->hosts.items[i].data_dir);
                c->hosts.items[i].data_dir = saved[i];
        }
        member_plan_release(&mp);

        /* a newline in a flag value: the unit is never written */
        _cleanup_free_ char *evil = xasprintf("info\nExecStartPre=/bin/sh -c 'touch %s'", ran);
        kv_set(&c->options.extra_flags, "log-level", evil);
        membership_plan *p = plan_new(t, c, 1);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), -EINVAL);
        if (!strstr(target_last_error(t), "refusing to write the unit"))
                fail_msg("no word of the refusal: %s", target_last_error(t));
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *unit =
                    machine_path(i, "/etc/systemd/system/etcd-default-bypass.service");
                assert_false(path_exists(unit)); /* placed at most, never started */
        }
        assert_false(path_exists(ran));
        _cleanup_free_ char *calls = NULL;
        (void)read_file(systemctl_log, 1 << 20, &calls, &len);
        const char *since = calls ? calls + (calls_before ? strlen(calls_before) : 0) : "";
        if (strstr(since, "bypass"))
                fail_msg("systemctl was asked about the refused member:\n%s", since);
        assert_int_equal(t->ops->remove_member(t, c, p->members[0].name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

/* The preflight of machine `machine` in l (NULL when none was handed out). */
static const state_preflight *preflight_of(const state_preflight_list *l, size_t machine)
{
        _cleanup_free_ char *key =
            xasprintf("%s:%d", lab->machines[machine].address, lab->machines[machine].port);
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->items[i]->machine, key))
                        return l->items[i];
        return NULL;
}

/*
 * The preflight before placement, and of the machines holding members
 * after: machine 0's disk is slow, machines 1 and 2's fast. How: the
 * target's dd on the machines is a wrapper the test writes (the test's
 * machines are slow or fast, not gitcd's code; a loop device or dm-delay
 * cannot be made here). Into the data directories listed in a file of the
 * test's (read by the shell itself: no process more per write) it sleeps
 * 500 ms before each synchronous write; into the others' it writes the
 * same block synchronously to a file on tmpfs (/dev/shm, one process as
 * the baseline's), since this loaded test machine's own disk shows an
 * fdatasync p99 of 90 to 180 ms and would fail every machine. The
 * threshold is 250 ms: under a load of 20 the wrapper's own start-up
 * alone shows a p99 of up to about 100 ms on the fast machines.
 * Machine 0 is measured once (its verdict stands for the interval for the
 * next placements), then the machine operation hands out the three
 * preflights with the members placed; machine 1's disk turns slow and,
 * one interval on (the caller's clock), it is measured again and fails
 * with its member named, machine 0 (free) is not measured; it recovers
 * one interval later. About 30 s: machine 1 measured slow and machine 0
 * once (the 10 s sampling budget each), the fast ones about 1 s each.
 */
static void test_preflight_refuses_slow_machine(void **state)
{
        (void)state;
        _cleanup_free_ char *slow_dir = machine_path(0, "/var/lib/etcd/slow");
        _cleanup_free_ char *dir1 = machine_path(1, "/var/lib/etcd/slow");
        _cleanup_free_ char *dd = xasprintf("%s/slow-dd", lab->dir);
        _cleanup_free_ char *list = xasprintf("%s/slow-dirs", lab->dir);
        _cleanup_free_ char *shm = xasprintf("/dev/shm/gitcd-test-preflight-%d", (int)getpid());
        _cleanup_free_ char *wrapper =
            xasprintf("#!/bin/sh\ncase \"$*\" in\n"
                      "*oflag=dsync*) while read -r d; do case \"$*\" in *\"of=$d/\"*) sleep 0.5; "
                      "exec dd \"$@\";; esac; done < '%s'\n"
                      "  exec dd if=/dev/zero of='%s' bs=8k count=1 oflag=dsync;;\n"
                      "esac\nexec dd \"$@\"\n",
                      list, shm);
        assert_int_equal(write_file_atomic(dd, wrapper, strlen(wrapper), 0755), 0);
        _cleanup_free_ char *slow0 = xasprintf("%s\n", slow_dir);
        assert_int_equal(write_file_atomic(list, slow0, strlen(slow0), 0644), 0);
        hosts_target_opts o = {
            .ssh = {.known_hosts = lab->known_hosts,
                    .key_file = lab->client_key,
                    .connect_timeout_ms = 5000,
                    .command_timeout_ms = 20000},
            .systemctl = systemctl,
            .client_port = client_port,
            .peer_port = peer_port,
            .metrics_port = metrics_port,
            .health_timeout_ms = 1000,
            .state_dir = state_dir,
            .preflight = true,
            .preflight_dd = dd,
            .preflight_sync_p99_max_us = 250000,
        };
        target *t = NULL;
        assert_int_equal(hosts_target_new(&o, &t), 0);
        assert_non_null(t->ops->machines);
        etcd_cluster *c = load_cluster("slow", "systemd", 3);
        membership_plan *p = membership_plan_new(c);
        const char *want[] = {lab->machines[1].address, lab->machines[2].address};
        for (size_t i = 0; i < 2; i++) {
                member_plan *mp = membership_plan_add(p);
                mp->name = render_member_name(c, (int)i);
                if (t->ops->place_member(t, c, mp) < 0)
                        fail_msg("place %s: %s", mp->name, target_last_error(t));
                /* machine 0 comes first in the list and is free, but refused */
                assert_non_null(strstr(mp->peer_url, want[i]));
        }
        /* only machine 0 is left: the step waits, saying the measured latency */
        member_plan *mp = membership_plan_add(p);
        mp->name = render_member_name(c, 2);
        assert_int_equal(t->ops->place_member(t, c, mp), -EAGAIN);
        const char *err = target_last_error(t);
        assert_non_null(strstr(err, lab->machines[0].address));
        assert_non_null(strstr(err, "fdatasync p99 "));
        assert_non_null(strstr(err, "> 250.0 ms"));
        _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", slow_dir);
        assert_false(path_exists(marker)); /* nothing claimed machine 0 */

        /* handed out to be recorded, once: machine 0 refused, 1 and 2 with their members */
        int64_t now = now_wall_ms();
        state_preflight_list l = {0};
        assert_int_equal(t->ops->machines->preflights(t, c, NULL, now, &l), 1);
        assert_int_equal(l.n, 3);
        assert_string_equal(preflight_of(&l, 0)->verdict, "failed");
        assert_null(preflight_of(&l, 0)->member);
        assert_true(preflight_of(&l, 0)->sync_p99_us > 250000);
        assert_string_equal(preflight_of(&l, 1)->verdict, "passed");
        assert_string_equal(preflight_of(&l, 1)->member, "slow-0");
        assert_string_equal(preflight_of(&l, 2)->member, "slow-1");
        assert_true(preflight_of(&l, 2)->n_sync > 0);
        assert_non_null(preflight_of(&l, 2)->fstype);
        state_preflight_list_release(&l);
        assert_int_equal(t->ops->machines->preflights(t, c, NULL, now, &l), 1);
        assert_int_equal(l.n, 0); /* nothing new, nothing due */
        state_preflight_list_release(&l);

        /* machine 1's disk turns slow: one interval on, the members' machines are measured */
        _cleanup_free_ char *slow01 = xasprintf("%s\n%s\n", slow_dir, dir1);
        assert_int_equal(write_file_atomic(list, slow01, strlen(slow01), 0644), 0);
        now += PREFLIGHT_INTERVAL_MS;
        assert_int_equal(t->ops->machines->preflights(t, c, NULL, now, &l), 1);
        assert_int_equal(l.n, 2);
        assert_null(preflight_of(&l, 0)); /* free: not measured */
        assert_string_equal(preflight_of(&l, 1)->verdict, "failed");
        assert_string_equal(preflight_of(&l, 1)->member, "slow-0");
        assert_non_null(strstr(preflight_of(&l, 1)->reason, "> 250.0 ms"));
        assert_int_equal(preflight_of(&l, 1)->time_ms, now);
        assert_string_equal(preflight_of(&l, 2)->verdict, "passed");
        state_preflight_list_release(&l);

        /* and recovers */
        assert_int_equal(write_file_atomic(list, slow0, strlen(slow0), 0644), 0);
        now += PREFLIGHT_INTERVAL_MS;
        assert_int_equal(t->ops->machines->preflights(t, c, NULL, now, &l), 1);
        assert_int_equal(l.n, 2);
        assert_string_equal(preflight_of(&l, 1)->verdict, "passed");
        state_preflight_list_release(&l);
        (void)unlink(shm);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

/*
 * The peer RTT a preflight measures, over SSH on the real sshd machines:
 * one member placed on machine 0, whose preflight times connects to
 * machines 1 and 2's peer ports. How a link is slow: the target's connect
 * command is a wrapper the test writes (loopback has no latency to show):
 * to machine 2's address it sleeps 300 ms and answers as connected; to
 * the others it connects with bash's /dev/tcp, where no etcd listens yet
 * (not reached). The disk is the fast tmpfs of
 * test_preflight_refuses_slow_machine's wrapper, so the disk passes.
 * Then the timeouts derived from the measurement (reconciler/timeouts.h,
 * as the reconciler puts them into the spec it renders) appear in the
 * unit written on the machine, and the member runs with them. About 5 s.
 */
static void test_peer_rtt_in_unit(void **state)
{
        (void)state;
        _cleanup_free_ char *dd = xasprintf("%s/rtt-dd", lab->dir);
        _cleanup_free_ char *shm = xasprintf("/dev/shm/gitcd-test-rtt-%d", (int)getpid());
        _cleanup_free_ char *ddw =
            xasprintf("#!/bin/sh\ncase \"$*\" in\n*oflag=dsync*) exec dd if=/dev/zero of='%s' "
                      "bs=8k count=1 oflag=dsync;;\nesac\nexec dd \"$@\"\n",
                      shm);
        assert_int_equal(write_file_atomic(dd, ddw, strlen(ddw), 0755), 0);
        _cleanup_free_ char *connect = xasprintf("%s/rtt-connect", lab->dir);
        _cleanup_free_ char *cw =
            xasprintf("#!/bin/bash\nif [ \"$1\" = '%s' ]; then sleep 0.3; exit 0; fi\n"
                      "exec 3<>\"/dev/tcp/$1/$2\"\n",
                      lab->machines[2].address);
        assert_int_equal(write_file_atomic(connect, cw, strlen(cw), 0755), 0);
        hosts_target_opts o = {
            .ssh = {.known_hosts = lab->known_hosts,
                    .key_file = lab->client_key,
                    .connect_timeout_ms = 5000,
                    .command_timeout_ms = 20000},
            .systemctl = systemctl,
            .client_port = client_port,
            .peer_port = peer_port,
            .metrics_port = metrics_port,
            .health_timeout_ms = 1000,
            .state_dir = state_dir,
            .preflight = true,
            .preflight_dd = dd,
            .preflight_rtt_connect = connect,
            .preflight_sync_p99_max_us = 250000,
        };
        target *t = NULL;
        assert_int_equal(hosts_target_new(&o, &t), 0);
        etcd_cluster *c = load_cluster("rtt", "systemd", 1);
        membership_plan *p = plan_new(t, c, 1);
        assert_non_null(strstr(p->members[0].peer_url, lab->machines[0].address));
        state_preflight_list l = {0};
        assert_int_equal(t->ops->machines->preflights(t, c, NULL, now_wall_ms(), &l), 1);
        const state_preflight *m0 = preflight_of(&l, 0);
        assert_non_null(m0);
        if (!streq(m0->verdict, "passed"))
                fail_msg("machine 0: %s", m0->reason ? m0->reason : m0->verdict);
        assert_int_equal(m0->rtt_peers, 1);  /* machine 2, through the wrapper */
        assert_int_equal(m0->rtt_failed, 1); /* machine 1: nothing listens there */
        assert_int_equal(m0->rtt_samples, RTT_SAMPLES);
        assert_true(m0->rtt_slowest_us >= 300000 && m0->rtt_slowest_us <= m0->rtt_max_us);
        int hb, el;
        timeouts_derive(m0->rtt_slowest_us, &hb, &el);
        assert_true(hb >= 300 && el == 10 * hb);
        state_preflight_list_release(&l);

        /* the derived timeouts in the unit written, and the member runs with them */
        c->options.heartbeat_interval_ms = hb;
        c->options.election_timeout_ms = el;
        free(p->members[0].config_hash);
        p->members[0].config_hash = render_member_config_hash(c, p, 0);
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        _cleanup_free_ char *file = xasprintf("%s/etc/systemd/system/etcd-%s-%s.service",
                                              lab->machines[0].root, c->namespace_, c->name);
        char *unit = NULL;
        size_t len = 0;
        assert_int_equal(read_file(file, 1 << 20, &unit, &len), 0);
        _cleanup_free_ char *want_hb = xasprintf("--heartbeat-interval=%d", hb);
        _cleanup_free_ char *want_el = xasprintf("--election-timeout=%d", el);
        if (!strstr(unit, want_hb) || !strstr(unit, want_el))
                fail_msg("the unit lacks %s %s:\n%s", want_hb, want_el, unit);
        free(unit);
        wait_ready(t, c, p->members[0].name);
        assert_int_equal(t->ops->remove_member(t, c, p->members[0].name, false), 0);
        (void)unlink(shm);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

static void test_three_machines(void **state)
{
        (void)state;
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster("trio", "systemd", 3);
        membership_plan *p = plan_new(t, c, 3);

        /* one member per machine */
        for (size_t i = 0; i < 3; i++)
                for (size_t j = 0; j < i; j++)
                        assert_string_not_equal(p->members[i].peer_url, p->members[j].peer_url);
        /* one after the other, as a bootstrap does: each start is queued (--no-block);
         * the agent's systemctl, like systemd's, would hold a blocking start of this
         * Type=notify unit until READY=1, which needs the members started after it */
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->ensure_member(t, c, p, i), 0);
        for (size_t i = 0; i < 3; i++)
                wait_ready(t, c, p->members[i].name);

        /* machine 2 stops answering: its member is not "absent", the others go on */
        size_t down = (size_t)-1;
        for (size_t i = 0; i < MACHINES; i++)
                if (strstr(p->members[2].peer_url, lab->machines[i].address))
                        down = i;
        assert_true(down < MACHINES);
        assert_int_equal(sshd_machine_stop(lab, down), 0);
        assert_int_equal(t->ops->tick(t), 0);
        target_member_status s = {0};
        assert_true(t->ops->member_status(t, c, p->members[2].name, &s) < 0);
        char **names = NULL;
        size_t n = 0;
        assert_true(t->ops->list_members(t, c->namespace_, c->name, &names, &n) < 0);
        s = status(t, c, p->members[0].name);
        assert_int_equal(s.state, MEMBER_READY); /* quorum kept: 2 of 3 */
        target_member_status_release(&s);
        assert_int_equal(sshd_machine_start(lab, down), 0);
        assert_int_equal(t->ops->tick(t), 0);
        wait_ready(t, c, p->members[2].name);

        /* member 1's data disk is replaced: data lost, never restarted empty */
        const char *dir = p->members[1].data_dir;
        _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", dir);
        assert_int_equal(rm_rf(dir), 0);
        assert_int_equal(t->ops->tick(t), 0); /* seen from the next pass on */
        s = status(t, c, p->members[1].name);
        assert_int_equal(s.state, MEMBER_DATA_LOST);
        target_member_status_release(&s);
        assert_int_equal(t->ops->ensure_member(t, c, p, 1), -ESTALE);
        assert_false(path_exists(marker));

        /* member 0 removed with its data kept (a disaster recovery's "aside"): the data
         * moves beside the data directory, the machine is free, and drop_kept_data deletes it */
        const char *dir0 = p->members[0].data_dir;
        assert_int_equal(t->ops->remove_member(t, c, p->members[0].name, true), 0);
        assert_false(path_exists(dir0));
        assert_false(listed(t, c, p->members[0].name));
        _cleanup_free_ char *parent = xstrdup(dir0);
        *strrchr(parent, '/') = 0;
        _cleanup_free_ char *aside_prefix =
            xasprintf("%s.removed-%s-", strrchr(dir0, '/') + 1, p->members[0].name);
        /* a folder of another member whose name starts alike is left alone */
        _cleanup_free_ char *other = xasprintf("%s.removed-%s0-5", dir0, p->members[0].name);
        assert_int_equal(mkdir_p(other, 0700), 0);
        size_t aside = 0;
        DIR *d = opendir(parent);
        for (struct dirent *e; d && (e = readdir(d));)
                if (strncmp(e->d_name, aside_prefix, strlen(aside_prefix)) == 0) {
                        _cleanup_free_ char *m = xasprintf("%s/%s/gitcd-member", parent, e->d_name);
                        assert_true(path_exists(m)); /* the marker went with the data */
                        aside++;
                }
        closedir(d);
        assert_int_equal(aside, 1);
        assert_int_equal(t->ops->drop_kept_data(t, c, p->members[0].name), 0);
        assert_int_equal(t->ops->drop_kept_data(t, c, p->members[0].name), 0);
        aside = 0;
        d = opendir(parent);
        for (struct dirent *e; d && (e = readdir(d));)
                aside += strncmp(e->d_name, aside_prefix, strlen(aside_prefix)) == 0;
        closedir(d);
        assert_int_equal(aside, 0);
        assert_true(path_exists(other));
        assert_int_equal(rm_rf(other), 0);

        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->remove_member(t, c, p->members[i].name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

/* The member of p on machine i; NULL when none is. */
static const member_plan *member_on(const membership_plan *p, size_t i)
{
        _cleanup_free_ char *host = xasprintf("//%s:", lab->machines[i].address);
        for (size_t j = 0; j < p->n; j++)
                if (strstr(p->members[j].peer_url, host))
                        return &p->members[j];
        return NULL;
}

/*
 * A static bootstrap's members are prepared side by side (ensure_members,
 * through the locked wrapper as gitcd runs it): each machine's `etcd
 * --version` waits at a rendezvous until every machine expected there was
 * asked (for up to 60 s), so members prepared one after another would
 * never get past the first (its SSH command's deadline ends it). Then one
 * machine's binary is of another version: the other two members start all
 * the same, that one is refused with its own result, and the message names
 * the member and its machine.
 */
static void test_bootstrap_side_by_side(void **state)
{
        (void)state;
        _cleanup_free_ char *meet = xasprintf("%s/rendezvous", lab->dir);
        _cleanup_free_ char *count = xasprintf("%s/rendezvous-count", lab->dir);
        _cleanup_free_ char *odd = xasprintf("%s/odd-machine", lab->dir);
        _cleanup_free_ char *path = xasprintf("%s/etcd-rendezvous", lab->dir);
        _cleanup_free_ char *script =
            xasprintf("#!/bin/sh\n"
                      "if [ \"$1\" = --version ]; then\n"
                      "  set -- $SSH_CONNECTION\n"
                      "  if [ \"$3\" = \"$(cat '%s' 2>/dev/null)\" ]; then\n"
                      "    echo 'etcd Version: 3.5.15'; exit 0\n"
                      "  fi\n"
                      "  mkdir -p '%s' && : > '%s'/\"$3\" || exit 1\n"
                      "  i=0\n"
                      "  while [ \"$(ls '%s' | wc -l)\" -lt \"$(cat '%s')\" ]; do\n"
                      "    i=$((i + 1)); [ $i -le 600 ] || exit 1; sleep 0.1\n"
                      "  done\n"
                      "  set -- --version\n"
                      "fi\n"
                      "exec '%s' \"$@\"\n",
                      odd, meet, meet, meet, count, etcd_bin);
        assert_int_equal(write_file_atomic(path, script, strlen(script), 0755), 0);
        char *real = etcd_bin;
        etcd_bin = path;
        etcd_cluster *c = load_cluster("sbs", "systemd", 3);
        etcd_cluster *c2 = load_cluster("sbsodd", "systemd", 3);
        etcd_bin = real;
        target *inner = new_target(NULL), *t = NULL;
        assert_int_equal(target_locked_new(inner, &t), 0);
        assert_non_null(t->ops->ensure_members);

        /* all three meet: each waits for the other two */
        assert_int_equal(write_file_atomic(count, "3\n", 2, 0644), 0);
        membership_plan *p = plan_new(t, c, 3);
        int results[3] = {-1, -1, -1};
        if (t->ops->ensure_members(t, c, p, results) < 0)
                fail_msg("ensure_members: %s", target_last_error(t));
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(results[i], 0);
        for (size_t i = 0; i < 3; i++)
                wait_ready(t, c, p->members[i].name);
        /* again: nothing to prepare, every member runs (the files' hashes match) */
        assert_int_equal(t->ops->ensure_members(t, c, p, results), 0);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->remove_member(t, c, p->members[i].name, false), 0);
        membership_plan_free(p);

        /* machine 1 has etcd 3.5.15: the other two meet, start and form a quorum */
        assert_int_equal(rm_rf(meet), 0);
        assert_int_equal(write_file_atomic(count, "2\n", 2, 0644), 0);
        assert_int_equal(write_file_atomic(odd, lab->machines[1].address,
                                           strlen(lab->machines[1].address), 0644),
                         0);
        assert_int_equal(t->ops->tick(t), 0);
        p = plan_new(t, c2, 3);
        const member_plan *bad = member_on(p, 1);
        assert_non_null(bad);
        assert_int_equal(t->ops->ensure_members(t, c2, p, results), -EINVAL);
        const char *msg = target_last_error(t);
        _cleanup_free_ char *named = xasprintf("member %s: ", bad->name);
        if (!strstr(msg, named) || !strstr(msg, lab->machines[1].address) ||
            !strstr(msg, "is etcd 3.5.15"))
                fail_msg("the failure does not name the member and its machine: %s", msg);
        for (size_t i = 0; i < 3; i++) {
                bool is_bad = &p->members[i] == bad;
                assert_int_equal(results[i], is_bad ? -EINVAL : 0);
                if (!is_bad)
                        wait_ready(t, c2, p->members[i].name);
        }
        _cleanup_free_ char *unit =
            machine_path(1, "/etc/systemd/system/etcd-default-sbsodd.service");
        assert_false(path_exists(unit));
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->remove_member(t, c2, p->members[i].name, false), 0);
        membership_plan_free(p);
        assert_int_equal(unlink(odd), 0);
        etcd_cluster_free(c);
        etcd_cluster_free(c2);
        target_free(t);
}

/* How many lines of the simulated systemctl's log begin with prefix. */
static size_t systemctl_lines(const char *prefix)
{
        _cleanup_free_ char *log = NULL;
        size_t len, n = 0;
        if (read_file(systemctl_log, 1 << 20, &log, &len) < 0)
                return 0;
        for (const char *p = log; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                n += strneq(p, prefix, strlen(prefix));
        return n;
}

/*
 * A bootstrap asks each machine for its state once: placing three members
 * and starting them reads no machine again after its marker was written
 * (the claimed machine's probe is kept for the pass; each machine's `sed`
 * logs the probes that read a marker). Each new unit is enabled without
 * systemd's implicit reload and reloaded only when `systemctl show` asks
 * for it (this simulated systemctl answers nothing: reloaded); a rewritten
 * unit is always reloaded before its restart, once.
 */
static void test_bootstrap_reads_each_machine_once(void **state)
{
        (void)state;
        _cleanup_free_ char *log = xasprintf("%s/marker-reads", lab->dir);
        char *seds[MACHINES];
        for (size_t i = 0; i < MACHINES; i++) {
                seds[i] = xasprintf("%s/bin/sed", lab->machines[i].dir);
                _cleanup_free_ char *script = xasprintf("#!/bin/sh\n"
                                                        "case \"$*\" in *marker=*) echo %zu >> "
                                                        "'%s' ;; esac\n"
                                                        "exec /bin/sed \"$@\"\n",
                                                        i, log);
                assert_int_equal(write_file_atomic(seds[i], script, strlen(script), 0755), 0);
        }
        etcd_cluster *c = load_cluster("once", "systemd", 3);
        target *inner = new_target(NULL), *t = NULL;
        assert_int_equal(target_locked_new(inner, &t), 0);
        assert_int_equal(t->ops->tick(t), 0);
        size_t shows = systemctl_lines("show --property=LoadState --property=NeedDaemonReload ");
        size_t enables = systemctl_lines("enable "), quiet = systemctl_lines("enable --no-reload ");
        size_t reloads = systemctl_calls("daemon-reload");

        membership_plan *p = plan_new(t, c, 3);
        int results[3] = {-1, -1, -1};
        if (t->ops->ensure_members(t, c, p, results) < 0)
                fail_msg("ensure_members: %s", target_last_error(t));
        _cleanup_free_ char *reads = NULL;
        size_t len = 0;
        if (read_file(log, 1 << 20, &reads, &len) == 0 && len > 0)
                fail_msg("machines read again after their claim (machine per line):\n%s", reads);
        assert_int_equal(
            systemctl_lines("show --property=LoadState --property=NeedDaemonReload ") - shows, 3);
        assert_int_equal(systemctl_lines("enable ") - enables, 3);
        assert_int_equal(systemctl_lines("enable --no-reload ") - quiet, 3);
        assert_int_equal(systemctl_calls("daemon-reload") - reloads, 3);

        /* member 0's unit rewritten (another configuration): reloaded, unasked, once */
        assert_int_equal(t->ops->tick(t), 0);
        shows = systemctl_lines("show --property=LoadState --property=NeedDaemonReload ");
        reloads = systemctl_calls("daemon-reload");
        str_assign(&p->members[0].config_hash, xstrdup("rewritten"));
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        assert_int_equal(systemctl_calls("daemon-reload") - reloads, 1);
        assert_int_equal(systemctl_lines("show --property=LoadState --property=NeedDaemonReload "),
                         shows);
        assert_int_equal(systemctl_lines("enable ") - enables, 4);
        assert_int_equal(systemctl_lines("enable --no-reload ") - quiet, 4);

        for (size_t i = 0; i < MACHINES; i++) {
                assert_int_equal(unlink(seds[i]), 0);
                free(seds[i]);
        }
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->remove_member(t, c, p->members[i].name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

static void test_wrong_host_key(void **state)
{
        (void)state;
        _cleanup_free_ char *kh = sshd_lab_known_hosts_with_wrong_key(lab, 0);
        target *t = new_target(kh);
        etcd_cluster *c = load_cluster("keyed", "systemd", 1);
        member_plan mp = {.name = render_member_name(c, 0), .ordinal = 0};

        /* machine 0 is refused: the member goes to machine 1, nothing is written on 0 */
        assert_int_equal(t->ops->place_member(t, c, &mp), 0);
        assert_non_null(strstr(mp.peer_url, lab->machines[1].address));
        assert_false(path_exists(c->hosts.items[0].data_dir));
        assert_true(path_exists(c->hosts.items[1].data_dir));
        /* the member is found on machine 1 although machine 0 is still refused */
        assert_int_equal(t->ops->remove_member(t, c, mp.name, false), 0);
        assert_false(path_exists(c->hosts.items[1].data_dir));
        assert_false(path_exists(c->hosts.items[0].data_dir));
        member_plan_release(&mp);
        etcd_cluster_free(c);
        target_free(t);
}

/*
 * A machine that takes TCP connections and never speaks SSH: a step on it
 * waits until its deadline passes or the machine goes away
 * (silent_machine_release()).
 */
typedef struct silent {
        int listener;
        int conn; /* the step's connection, once it arrived; -1 before */
        int port;
} silent;

static void silent_machine(silent *m)
{
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t len = sizeof(a);
        m->conn = -1;
        m->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(m->listener >= 0);
        inet_pton(AF_INET, "127.0.0.9", &a.sin_addr);
        assert_int_equal(bind(m->listener, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(m->listener, 16), 0);
        assert_int_equal(getsockname(m->listener, (struct sockaddr *)&a, &len), 0);
        m->port = ntohs(a.sin_port);
}

/* Wait (a minute at most) until a step connected to the silent machine, and hold its connection. */
static void silent_machine_wait_connected(silent *m)
{
        struct pollfd p = {.fd = m->listener, .events = POLLIN};
        if (poll(&p, 1, 60000) != 1)
                fail_msg("no step connected to the silent machine within a minute");
        m->conn = accept4(m->listener, NULL, NULL, SOCK_CLOEXEC);
        assert_true(m->conn >= 0);
}

/* The machine goes away: the step on it fails at once (its connection closed, no listener). */
static void silent_machine_release(silent *m)
{
        if (m->conn >= 0)
                close(m->conn);
        close(m->listener);
        m->conn = m->listener = -1;
}

typedef struct stuck_op {
        target *t;
        const etcd_cluster *c;
        atomic_bool done;
} stuck_op;

static void *stuck_main(void *arg)
{
        stuck_op *s = arg;
        member_plan mp = {.name = render_member_name(s->c, 0), .ordinal = 0};
        (void)s->t->ops->place_member(s->t, s->c, &mp); /* fails once the machine went away */
        atomic_store(&s->done, true);
        member_plan_release(&mp);
        return NULL;
}

/*
 * Through the wrapper gitcd run uses (targets/locked.h): while one
 * cluster's machine does not answer (its step waits on it, with a connect
 * deadline longer than this test takes), another cluster on another
 * machine is placed, started and reported on. The silent machine then
 * goes away and the waiting step ends.
 */
static void test_silent_machine_holds_up_no_other(void **state)
{
        (void)state;
        silent m;
        silent_machine(&m);
        target *t = NULL;
        assert_int_equal(target_locked_new(new_target_timeout(NULL, NULL, 600000), &t), 0);
        _cleanup_free_ char *text =
            xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: stuck\n"
                      "spec:\n  replicas: 1\n  version: \"3.5.16\"\n  hosts:\n    mode: systemd\n"
                      "    machines:\n    - address: 127.0.0.9\n      ssh: {port: %d}\n",
                      m.port);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("stuck.yaml", text, strlen(text), &set, &diags), 0);
        /* static: a failed assertion below leaves the thread running, never on a dead frame */
        static stuck_op s;
        s = (stuck_op){.t = t, .c = set.items[0]};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, stuck_main, &s), 0);
        silent_machine_wait_connected(&m); /* the step waits on the silent machine */

        etcd_cluster *c = load_cluster("free", "systemd", 1);
        membership_plan *p = plan_new(t, c, 1);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        target_member_status st = status(t, c, p->members[0].name);
        assert_int_not_equal(st.state, MEMBER_ABSENT);
        target_member_status_release(&st);
        /* All that while the other cluster's step was still waiting on its machine. */
        bool done = atomic_load(&s.done);
        silent_machine_release(&m);
        pthread_join(th, NULL);
        assert_int_equal(t->ops->remove_member(t, c, p->members[0].name, false), 0);
        assert_false(done);

        membership_plan_free(p);
        etcd_cluster_free(c);
        cluster_set_release(&set);
        diag_list_release(&diags);
        target_free(t);
}

/*
 * tls.provider auto on both surfaces: leaves issued on the gitcd host by
 * pki/auto.c, copied to the machine (mode 0600) before the static Pod is
 * written; the member answers over https to gitcd's own client identity;
 * a renewal reissues the leaves and copies them again, without a restart.
 */
static void test_tls_static_pod(void **state)
{
        (void)state;
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster_with("secure", "staticPod", 1,
                                            "  tls:\n    provider: auto\n    client: {enabled: "
                                            "true}\n    peer: {enabled: true}\n");
        membership_plan *p = plan_new(t, c, 1);
        const member_plan *mp = &p->members[0];
        assert_true(strneq(mp->client_url, "https://", 8));
        assert_non_null(mp->tls_version);
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        wait_ready(t, c, mp->name); /* health over https with gitcd's client certificate */

        /* on the machine: the member's leaves, keys readable by root only */
        static const char *const files[] = {"client/tls.crt", "client/tls.key", "client/ca.crt",
                                            "peer/tls.crt",   "peer/tls.key",   "peer/ca.crt"};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_free_ char *f = xasprintf("%s/%s", mp->tls_dir, files[i]);
                struct stat st;
                if (stat(f, &st) < 0)
                        fail_msg("%s was not copied to the machine", f);
                assert_int_equal(st.st_mode & 07777, 0600);
        }
        _cleanup_free_ char *op = xasprintf("%s/operator", mp->tls_dir);
        assert_false(path_exists(op)); /* gitcd's identity stays on the gitcd host */

        /* gitcd's own client identity, on the gitcd host */
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        assert_int_equal(target_client_tls(t, c, &ca, &cert, &key), 0);
        assert_non_null(cert);
        assert_true(strneq(cert, state_dir, strlen(state_dir)));
        assert_true(path_exists(cert) && path_exists(key) && path_exists(ca));

        target_cert *certs = NULL;
        size_t n = 0;
        assert_int_equal(t->ops->tls_certificates(t, c, p, &certs, &n), 0);
        assert_int_equal(n, 4); /* client, peer, operator, and the cluster CA */
        assert_string_equal(certs[3].surface, TARGET_CERT_CA);
        assert_null(certs[3].member);
        assert_true(certs[3].not_after_ms > now_wall_ms() + 3000LL * 24 * 3600 * 1000);
        target_certs_free(certs, n);

        /* renewal long before expiry: nothing due */
        assert_int_equal(t->ops->renew_tls(t, c, p, mp->name, now_wall_ms()), 0);
        /* near expiry: reissued and copied again, the member keeps running */
        _cleanup_free_ char *crt = xasprintf("%s/client/tls.crt", mp->tls_dir);
        _cleanup_free_ char *before = NULL, *after = NULL;
        size_t len;
        assert_int_equal(read_file(crt, 1 << 20, &before, &len), 0);
        int64_t late = now_wall_ms() + 89LL * 24 * 3600 * 1000;
        assert_true(t->ops->renew_tls(t, c, p, mp->name, late) > 0);
        assert_int_equal(read_file(crt, 1 << 20, &after, &len), 0);
        assert_string_not_equal(before, after);
        assert_int_equal(t->ops->tick(t), 0);
        wait_ready(t, c, mp->name);

        /* a changed manifest: until the kubelet restarted the Pod onto it (a moment
         * later), the etcd answering is the old one and the member is not ready on the
         * new configuration */
        msleep(2100); /* the file's time (whole seconds) well after the process's start */
        member_plan *mw = &p->members[0];
        str_assign(&mw->initial_cluster_state, xstrdup("existing"));
        _cleanup_free_ char *old_hash = mw->config_hash;
        mw->config_hash = render_member_config_hash(c, p, 0);
        assert_string_not_equal(old_hash, mw->config_hash);
        /* the window, however slow this machine is; nothing in it may fail before the
         * agent goes on, or the member would outlive this test on the ports of the next */
        hostagent_hold(agent, true);
        int ensured = t->ops->ensure_member(t, c, p, 0);
        int ticked = ensured < 0 ? 0 : t->ops->tick(t);
        target_member_status s = {0};
        int got = ensured < 0 ? 0 : t->ops->member_status(t, c, mp->name, &s);
        _cleanup_free_ char *error = xstrdup_null(target_last_error(t));
        hostagent_hold(agent, false);
        if (ensured < 0 || ticked < 0 || got < 0)
                fail_msg("ensure %d, tick %d, status %d: %s", ensured, ticked, got,
                         error ? error : "no message");
        assert_int_equal(s.state, MEMBER_STARTING);
        assert_non_null(strstr(s.detail, "kubelet has not restarted it"));
        target_member_status_release(&s);
        wait_ready(t, c, mp->name);
        s = status(t, c, mp->name);
        assert_string_equal(s.config_hash, mw->config_hash);
        target_member_status_release(&s);

        /* removed with its data kept: the kubelet stops the Pod a moment after its
         * manifest went, and the data moves only once etcd is gone */
        const char *addr = lab->machines[0].address;
        for (size_t i = 0; i < MACHINES; i++)
                if (strstr(mp->peer_url, lab->machines[i].address))
                        addr = lab->machines[i].address;
        assert_true(target_port_accepts(addr, client_port, 1000));
        assert_int_equal(t->ops->remove_member(t, c, mp->name, true), 0);
        assert_false(target_port_accepts(addr, client_port, 1000));
        assert_false(target_port_accepts(addr, peer_port, 1000));
        assert_false(path_exists(mp->data_dir));
        assert_int_equal(t->ops->drop_kept_data(t, c, mp->name), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

/*
 * etcd.service on the member's machine (systemd's unit name for a
 * distribution's etcd; the recorder systemctl says every unit is active):
 * one for other data is left alone when gitcd writes its unit; one for the
 * member's dataDir makes the member "run by etcd.service" (a configuration
 * of none of gitcd's, so the rolling restart moves it), and gitcd disables
 * it before its own unit starts the member.
 */
static void test_foreign_unit(void **state)
{
        (void)state;
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster("forn", "systemd", 1);
        membership_plan *p = plan_new(t, c, 1);
        const member_plan *mp = &p->members[0];
        size_t m = 0;
        for (size_t i = 0; i < MACHINES; i++)
                if (strstr(mp->peer_url, lab->machines[i].address))
                        m = i;
        _cleanup_free_ char *units = machine_path(m, "/etc/systemd/system");
        _cleanup_free_ char *unit_path = xasprintf("%s/etcd.service", units);
        _cleanup_free_ char *env_path = machine_path(m, "/etc/etcd.env");
        _cleanup_free_ char *unit = xasprintf(
            "[Service]\nEnvironmentFile=%s\nExecStart=/bin/sleep $DAEMON_ARGS\n", env_path);
        const char *other = "ETCD_DATA_DIR=/var/lib/etcd/other\nDAEMON_ARGS=600\n";
        assert_int_equal(write_file_atomic(env_path, other, strlen(other), 0644), 0);
        assert_int_equal(write_file_atomic(unit_path, unit, strlen(unit), 0644), 0);

        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        wait_ready(t, c, mp->name);
        assert_int_equal(systemctl_calls("disable --now etcd.service"), 0);

        /* the member stopped by gitcd, then etcd.service pointed at its data */
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        _cleanup_free_ char *ours = xasprintf("ETCD_DATA_DIR=%s\nDAEMON_ARGS=600\n", mp->data_dir);
        assert_int_equal(write_file_atomic(env_path, ours, strlen(ours), 0644), 0);
        assert_int_equal(t->ops->tick(t), 0);
        target_member_status s = status(t, c, mp->name);
        assert_string_equal(s.config_hash, "etcd.service");
        assert_non_null(strstr(s.detail, "run by etcd.service"));
        target_member_status_release(&s);

        size_t restarts = systemctl_calls("restart --no-block etcd-default-forn.service");
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        assert_int_equal(systemctl_calls("disable --now etcd.service"), 1);
        assert_int_equal(systemctl_calls("restart --no-block etcd-default-forn.service"),
                         restarts + 1);
        wait_ready(t, c, mp->name);
        s = status(t, c, mp->name);
        assert_string_equal(s.config_hash, mp->config_hash);
        target_member_status_release(&s);

        assert_int_equal(unlink(unit_path), 0);
        assert_int_equal(unlink(env_path), 0);
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

static int setup(void **state)
{
        (void)state;
        if (!sshd_available() || !harness_have_etcd("3.5.16")) {
                fprintf(stderr, "sshd or etcd 3.5.16 is not installed\n");
                exit(77);
        }
        signal(SIGPIPE, SIG_IGN);
        if (sshd_lab_start(MACHINES, &lab) < 0)
                return -1;
        etcd_bin = harness_etcd_path("3.5.16", "etcd");
        state_dir = xasprintf("%s/gitcd-state", lab->dir);
        client_port = harness_free_port();
        peer_port = harness_free_port();
        metrics_port = harness_free_port();
        systemctl = xasprintf("%s/systemctl", lab->dir);
        systemctl_log = xasprintf("%s/systemctl.log", lab->dir);
        /* one script for the three machines: each call acts on its own machine's units */
        if (hostagent_write_systemctl(systemctl, NULL, systemctl_log) < 0)
                return -1;
        const char *dirs[2 * MACHINES + 1] = {0};
        char *owned[2 * MACHINES];
        for (size_t i = 0; i < MACHINES; i++) {
                owned[2 * i] = machine_path(i, "/etc/systemd/system");
                owned[2 * i + 1] = machine_path(i, "/etc/kubernetes/manifests");
                (void)mkdir_p(owned[2 * i], 0755);
                (void)mkdir_p(owned[2 * i + 1], 0755);
                dirs[2 * i] = owned[2 * i];
                dirs[2 * i + 1] = owned[2 * i + 1];
        }
        int k = hostagent_start(dirs, etcd_bin, lab->dir, &agent);
        for (size_t i = 0; i < 2 * MACHINES; i++)
                free(owned[i]);
        return k < 0 ? -1 : 0;
}

static int teardown(void **state)
{
        (void)state;
        hostagent_free(agent);
        sshd_lab_free(lab);
        free(etcd_bin);
        free(systemctl);
        free(systemctl_log);
        free(state_dir);
        return 0;
}

/*
 * On a machine whose own name does not resolve, sudo warns on every
 * command ("sudo: unable to resolve host ..."), and works. A command that
 * fails there is reported with its own message, not as sudo refusing.
 */
static void test_sudo_warning_is_no_refusal(void **state)
{
        (void)state;
        if (!have_test_accounts())
                skip();
        const char *name = "gitcd-machine.invalid"; /* RFC 6761: never resolves */
        int64_t started = now_mono_ms();
        struct addrinfo *ai = NULL;
        if (getaddrinfo(name, NULL, NULL, &ai) == 0) {
                freeaddrinfo(ai);
                fprintf(stderr, "skipped: %s resolves here\n", name);
                skip();
        }
        if (now_mono_ms() - started > 1000) {
                fprintf(stderr, "skipped: looking %s up takes over a second here\n", name);
                skip();
        }
        int k = sshd_machine_set_hostname(lab, 0, name);
        if (k == -EPERM) {
                fprintf(stderr, "skipped: no UTS namespace for a machine's own host name\n");
                skip();
        }
        assert_int_equal(k, 0);

        /* systemd's own refusal on that machine */
        _cleanup_free_ char *failing = xasprintf("%s/systemctl-failing", lab->dir);
        const char *script =
            "#!/bin/sh\necho \"Failed to $1: Unit etcd.service not found.\" >&2\nexit 5\n";
        assert_int_equal(write_file_atomic(failing, script, strlen(script), 0755), 0);
        target *t = new_target_with(NULL, failing);
        etcd_cluster *c = load_cluster_as("warned", "systemd", 1, NULL, SUDO_USER);
        membership_plan *p = plan_new(t, c, 1); /* placed through sudo, warnings and all */
        const member_plan *mp = &p->members[0];
        assert_non_null(strstr(mp->peer_url, lab->machines[0].address));
        _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", mp->data_dir);
        assert_root_file(marker, 0600);

        assert_int_equal(t->ops->ensure_member(t, c, p, 0), -EIO);
        const char *err = target_last_error(t);
        assert_non_null(strstr(err, "failed (exit 5)"));
        assert_non_null(strstr(err, "Unit etcd.service not found."));
        assert_null(strstr(err, "refused"));

        target *ok = new_target(NULL);
        assert_int_equal(ok->ops->remove_member(ok, c, mp->name, false), 0);
        assert_false(path_exists(mp->data_dir));
        target_free(ok);
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
        assert_int_equal(sshd_machine_set_hostname(lab, 0, NULL), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_contract_systemd),
            cmocka_unit_test(test_contract_static_pod),
            cmocka_unit_test(test_contract_through_sudo),
            cmocka_unit_test(test_tls_through_sudo),
            cmocka_unit_test(test_restore_through_sudo),
            cmocka_unit_test(test_no_sudo_refused),
            cmocka_unit_test(test_sudo_warning_is_no_refusal),
            cmocka_unit_test(test_binary_of_another_version),
            cmocka_unit_test(test_bypassed_intake_refused),
            cmocka_unit_test(test_three_machines),
            cmocka_unit_test(test_bootstrap_side_by_side),
            cmocka_unit_test(test_bootstrap_reads_each_machine_once),
            cmocka_unit_test(test_preflight_refuses_slow_machine),
            cmocka_unit_test(test_peer_rtt_in_unit),
            cmocka_unit_test(test_wrong_host_key),
            cmocka_unit_test(test_tls_static_pod),
            cmocka_unit_test(test_silent_machine_holds_up_no_other),
            cmocka_unit_test(test_foreign_unit),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

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
 * bootstrapped across three machines; a wiped data disk reported as data
 * loss and never restarted empty; a machine that does not answer never
 * reported "absent" while the others go on; a machine with a wrong host
 * key refused with nothing written on it; a member removed with its data
 * kept (set aside beside the data directory, the machine free) and that
 * data deleted later by drop_kept_data, and no other member's; a static
 * Pod not ready on a changed manifest until it runs it, and its data moved
 * only once its etcd stopped (the simulated kubelet acts on a changed or
 * removed manifest a second later); a distribution's etcd.service left
 * alone when it runs other data, and disabled before gitcd's unit starts
 * a member whose data it runs (reported until then as run by it).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "api/spec.h"
#include "render/render.h"
#include "targets/health.h"
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

static etcd_cluster *load_cluster_with(const char *name, const char *mode, int replicas,
                                       const char *extra)
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
                sb_printf(&sb, "    - address: %s\n      ssh: {port: %d}\n      dataDir: %s/%s\n",
                          lab->machines[i].address, lab->machines[i].port, data, name);
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

static etcd_cluster *load_cluster(const char *name, const char *mode, int replicas)
{
        return load_cluster_with(name, mode, replicas, NULL);
}

static target *new_target(const char *known_hosts)
{
        hosts_target_opts o = {
            .ssh = {.known_hosts = known_hosts ? known_hosts : lab->known_hosts,
                    .key_file = lab->client_key,
                    .connect_timeout_ms = 5000,
                    .command_timeout_ms = 20000},
            .systemctl = systemctl,
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

static size_t systemctl_calls(const char *word)
{
        _cleanup_free_ char *log = NULL;
        size_t len, n = 0;
        if (read_file(systemctl_log, 1 << 20, &log, &len) < 0)
                return 0;
        for (const char *p = log; (p = strstr(p, word)); p++)
                n++;
        return n;
}

static void contract(const char *mode, const char *name)
{
        target *t = new_target(NULL);
        etcd_cluster *c = load_cluster(name, mode, 1);

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
        assert_true(path_exists(marker));

        /* Twice is once: the second ensure restarts nothing. */
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        size_t restarts = systemctl_calls(" restart ");
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        assert_int_equal(systemctl_calls(" restart "), restarts);
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

        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(t);
}

static void test_contract_systemd(void **state)
{
        (void)state;
        contract("systemd", "sysd");
        assert_true(systemctl_calls("daemon-reload") > 0);
}

static void test_contract_static_pod(void **state)
{
        (void)state;
        contract("staticPod", "pods");
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

/* A machine that takes TCP connections and never speaks SSH: every step waits out its deadline. */
static int silent_machine(int *ret_port)
{
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        inet_pton(AF_INET, "127.0.0.9", &a.sin_addr);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 16), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

typedef struct stuck_op {
        target *t;
        const etcd_cluster *c;
        atomic_bool started, done;
} stuck_op;

static void *stuck_main(void *arg)
{
        stuck_op *s = arg;
        member_plan mp = {.name = render_member_name(s->c, 0), .ordinal = 0};
        atomic_store(&s->started, true);
        (void)s->t->ops->place_member(s->t, s->c, &mp); /* fails once the deadline passes */
        atomic_store(&s->done, true);
        member_plan_release(&mp);
        return NULL;
}

/*
 * Through the wrapper gitcd run uses (targets/locked.h): while one
 * cluster's machine does not answer (its step waits out the 5 s connect
 * deadline), another cluster on another machine is placed, started and
 * reported on.
 */
static void test_silent_machine_holds_up_no_other(void **state)
{
        (void)state;
        int port;
        int fd = silent_machine(&port);
        target *t = NULL;
        assert_int_equal(target_locked_new(new_target(NULL), &t), 0);
        _cleanup_free_ char *text =
            xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: stuck\n"
                      "spec:\n  replicas: 1\n  version: \"3.5.16\"\n  hosts:\n    mode: systemd\n"
                      "    machines:\n    - address: 127.0.0.9\n      ssh: {port: %d}\n",
                      port);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("stuck.yaml", text, strlen(text), &set, &diags), 0);
        stuck_op s = {.t = t, .c = set.items[0]};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, stuck_main, &s), 0);
        while (!atomic_load(&s.started))
                msleep(10);
        msleep(300); /* let it reach the silent machine */

        etcd_cluster *c = load_cluster("free", "systemd", 1);
        membership_plan *p = plan_new(t, c, 1);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        target_member_status st = status(t, c, p->members[0].name);
        assert_int_not_equal(st.state, MEMBER_ABSENT);
        target_member_status_release(&st);
        /* All that while the other cluster's step was still waiting on its machine. */
        assert_false(atomic_load(&s.done));

        assert_int_equal(t->ops->remove_member(t, c, p->members[0].name, false), 0);
        pthread_join(th, NULL);
        membership_plan_free(p);
        etcd_cluster_free(c);
        cluster_set_release(&set);
        diag_list_release(&diags);
        target_free(t);
        close(fd);
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
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        assert_int_equal(t->ops->tick(t), 0);
        target_member_status s = status(t, c, mp->name);
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

        size_t restarts = systemctl_calls("restart etcd-default-forn.service");
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        assert_int_equal(systemctl_calls("disable --now etcd.service"), 1);
        assert_int_equal(systemctl_calls("restart etcd-default-forn.service"), restarts + 1);
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
        _cleanup_free_ char *script = xasprintf("#!/bin/sh\necho \"$*\" >> '%s'\n", systemctl_log);
        if (write_file_atomic(systemctl, script, strlen(script), 0755) < 0)
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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_contract_systemd),
            cmocka_unit_test(test_contract_static_pod),
            cmocka_unit_test(test_three_machines),
            cmocka_unit_test(test_wrong_host_key),
            cmocka_unit_test(test_tls_static_pod),
            cmocka_unit_test(test_silent_machine_holds_up_no_other),
            cmocka_unit_test(test_foreign_unit),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

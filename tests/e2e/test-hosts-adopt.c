/*
 * Adoption on the hosts target, end to end: three real sshd "machines"
 * (and a fourth, free one) with the host agent playing kubelet, a 3-member
 * etcd 3.5.16 cluster started by hand the way kubeadm runs stacked etcd (a
 * static Pod manifest etcd.yaml on each machine, kubeadm-style flags, each
 * member named after its node: node-a, node-b, node-c), and a writer
 * running all along. A spec that does not match it (1 replica) is refused
 * and nothing is written on the machines. `gitcd plan --target hosts`
 * says adoption is decided at apply and what happens to the names; `gitcd
 * apply --target hosts` adopts instead of bootstrapping, killed once after
 * moving the first member (the next apply finishes the move of the others,
 * found by their peer URLs while they still carry their node names): the
 * member IDs and the cluster ID stay, each member is listed under gitcd's
 * name for its machine (kube-0 for node-a's machine, ...), no acknowledged
 * write is lost, each data directory gets gitcd's marker, each member
 * moves from etcd.yaml onto gitcd's manifest, the audit log has
 * cluster.adopt and member.adopt (with the name each had); then a scale to
 * 4 works on the adopted cluster.
 *
 * The same for systemd (a lab of its own, three machines): each member
 * started by hand from /etc/systemd/system/etcd.service the way kubespray
 * and Debian write it (EnvironmentFile=/etc/etcd.env with ETCD_* variables,
 * an optional EnvironmentFile= that does not exist, ExecStart=etcd
 * $DAEMON_ARGS), the host agent playing systemd and its systemctl on the
 * machines' PATH; adopted under a writer, killed after the first move and
 * finished by the next apply (the members still run by etcd.service are
 * moved by the rolling restart): IDs and cluster ID kept, gitcd's names,
 * `systemctl disable --now etcd.service` on each machine, whose unit file
 * stays, gitcd's unit running each member; then, with gitcd's state store
 * lost, the cluster on gitcd's own units is adopted again without a
 * restart; no acknowledged write lost.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/e2e/hosts-lab.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MACHINES 4
#define VERSION  "3.5.16"
#define CL       "kube"

static hosts_lab *L;

/* kubeadm names each member after its node */
static const char *const node_name[] = {"node-a", "node-b", "node-c"};

static char *url(size_t i, int port)
{
        return xasprintf("http://%s:%d", L->ssh->machines[i].address, port);
}

/* kubeadm's etcd.yaml for member i of 3, as JSON (the host agent reads JSON; kubelet YAML). */
static void write_kubeadm_manifest(size_t i)
{
        strbuf ic = STRBUF_INIT;
        for (size_t j = 0; j < 3; j++) {
                _cleanup_free_ char *p = url(j, L->peer_port);
                sb_printf(&ic, "%s%s=%s", j ? "," : "", node_name[j], p);
        }
        _cleanup_free_ char *c = url(i, L->client_port), *p = url(i, L->peer_port);
        _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
        _cleanup_free_ char *text = xasprintf(
            "# written by hand, as kubeadm does\n"
            "{\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n"
            " \"metadata\": {\"name\": \"etcd\", \"namespace\": \"kube-system\"},\n"
            " \"spec\": {\"hostNetwork\": true, \"containers\": [{\"name\": \"etcd\",\n"
            "  \"image\": \"registry.k8s.io/etcd:" VERSION "-0\", \"command\": [\"etcd\",\n"
            "   \"--name=%s\", \"--data-dir=%s\",\n"
            "   \"--listen-client-urls=%s\", \"--advertise-client-urls=%s\",\n"
            "   \"--listen-peer-urls=%s\", \"--initial-advertise-peer-urls=%s\",\n"
            "   \"--initial-cluster=%s\", \"--initial-cluster-state=new\",\n"
            "   \"--initial-cluster-token=kubeadm\", \"--snapshot-count=10000\"]}]}}\n",
            node_name[i], data, c, c, p, p, sb_str(&ic));
        sb_release(&ic);
        _cleanup_free_ char *dir = hosts_lab_manifests(L, i);
        _cleanup_free_ char *path = xasprintf("%s/etcd.yaml", dir);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
}

/* The member list of the hand-started cluster once all three have started. */
static etcd_members *wait_started(const char *endpoints)
{
        etcd_client_opts o = {
            .endpoints = endpoints, .call_timeout_ms = 3000, .dial_timeout_ms = 500};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        for (int tries = 0; tries < 300; tries++) {
                etcd_members *l = NULL;
                if (etcd_member_list(c, &l) == 0) {
                        size_t started = 0;
                        for (size_t i = 0; i < l->n; i++)
                                started += !isempty(l->members[i].name);
                        if (l->n == 3 && started == 3) {
                                etcd_client_free(c);
                                return l;
                        }
                        etcd_members_free(l);
                }
                usleep(200 * 1000);
        }
        etcd_client_free(c);
        fail_msg("the hand-started cluster did not form");
        return NULL;
}

static void test_adopt(void **state)
{
        (void)state;
        L = hosts_lab_start(MACHINES, VERSION);
        assert_non_null(L);
        e2e *e = e2e_new();
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < 3; i++) {
                write_kubeadm_manifest(i);
                _cleanup_free_ char *c = url(i, L->client_port);
                sb_printf(&eps, "%s%s", i ? "," : "", c);
        }
        etcd_members *before = wait_started(sb_str(&eps));
        harness_writer *w = harness_writer_start(&(harness_writer_opts){.endpoints = sb_str(&eps)});

        /* a spec that does not match what runs: refused, nothing written */
        e2e *other = e2e_new();
        hosts_lab_write_cluster(L, other, CL, VERSION, 1, 0, MACHINES);
        _cleanup_free_ char *rout = NULL, *rerr = NULL;
        assert_int_not_equal(
            hosts_lab_cmd(L, other, "apply", NULL, &rout, &rerr, "--timeout", "20s"), 0);
        if (!strstr(rerr, "adoption refused") || !strstr(rerr, "has 3 members, the spec 1"))
                fail_msg("no refusal:\n%s%s", rout, rerr);
        assert_int_equal(e2e_audit_count(other, CL, "member.bootstrap"), 0);
        /* refused again (as `gitcd run` retries): the same refusal is audited once */
        free(rout), free(rerr), rout = rerr = NULL;
        assert_int_not_equal(
            hosts_lab_cmd(L, other, "apply", NULL, &rout, &rerr, "--timeout", "20s"), 0);
        assert_non_null(strstr(rerr, "adoption refused"));
        assert_int_equal(e2e_audit_count(other, CL, "cluster.adopt"), 1);
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
                _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", data);
                assert_false(path_exists(marker));
                _cleanup_free_ char *dir = hosts_lab_manifests(L, i);
                _cleanup_free_ char *old = xasprintf("%s/etcd.yaml", dir);
                assert_true(path_exists(old) == (i < 3));
        }
        e2e_free(other);

        /* the cluster lists all four machines; three run it */
        hosts_lab_write_cluster(L, e, CL, VERSION, 3, 0, MACHINES);
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(hosts_lab_cmd(L, e, "plan", NULL, &out, &err, NULL, NULL), 0);
        if (!strstr(out, "adopt") || !strstr(out, "whatever its --name") ||
            !strstr(out, "as " CL "-1 (the machine's position"))
                fail_msg("plan says nothing of adoption and names:\n%s", out);
        free(out), free(err), out = err = NULL;

        /* killed after the first member moved: the next apply finishes the others */
        assert_int_equal(hosts_lab_cmd_failpoint(L, e, "adopt.after-first-move", "apply", NULL,
                                                 &out, &err, "--timeout", "150s"),
                         128 + SIGKILL);
        free(out), free(err), out = err = NULL;
        hosts_lab_apply_ok(L, e, "150s");

        /* adopted: the same members, IDs and cluster, nothing bootstrapped */
        etcd_members *after = e2e_members(e, CL);
        hosts_lab_assert_adopted(e, CL, before, after, node_name);
        etcd_members_free(after);
        _cleanup_free_ char *log = NULL;
        assert_int_equal(e2e_run(e, &log, "log", "-o", "json", "--cluster", "default/" CL,
                                 "--action", "member.adopt", NULL),
                         0);
        if (!strstr(log, "renamed_from"))
                fail_msg("no renamed_from in the audit log:\n%s", log);
        for (size_t i = 0; i < 3; i++)
                if (!strstr(log, node_name[i]))
                        fail_msg("no %s in the audit log:\n%s", node_name[i], log);
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
                _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", data);
                assert_true(path_exists(marker));
                _cleanup_free_ char *dir = hosts_lab_manifests(L, i);
                _cleanup_free_ char *old = xasprintf("%s/etcd.yaml", dir);
                _cleanup_free_ char *own = xasprintf("%s/etcd-default-" CL ".yaml", dir);
                assert_false(path_exists(old));
                assert_true(path_exists(own));
        }

        /* the adopted cluster is gitcd's like any other: scale to 4 onto the free machine */
        hosts_lab_write_cluster(L, e, CL, VERSION, 4, 0, MACHINES);
        hosts_lab_apply_ok(L, e, "90s");
        after = e2e_members(e, CL);
        assert_int_equal(after->n, 4);
        for (size_t i = 0; i < 3; i++) {
                char name[16];
                snprintf(name, sizeof(name), CL "-%zu", i);
                assert_int_equal(hosts_lab_member_id(after, name),
                                 hosts_lab_member_id(before, node_name[i]));
        }
        etcd_members_free(after);
        e2e_writer_check(w, e, CL, 10);
        harness_writer_free(w);
        etcd_members_free(before);
        sb_release(&eps);
        e2e_free(e);
}

/*
 * Machine i's etcd.service and /etc/etcd.env (under its root), kubespray's
 * and Debian's layout: every flag an ETCD_* variable of the file, but one
 * in $DAEMON_ARGS on the command line.
 */
static void write_etcd_service(size_t i)
{
        strbuf ic = STRBUF_INIT;
        for (size_t j = 0; j < 3; j++) {
                _cleanup_free_ char *p = url(j, L->peer_port);
                sb_printf(&ic, "%s%s=%s", j ? "," : "", node_name[j], p);
        }
        _cleanup_free_ char *c = url(i, L->client_port), *p = url(i, L->peer_port);
        _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
        _cleanup_free_ char *env_file = hosts_lab_path(L, i, "/etc/etcd.env");
        _cleanup_free_ char *missing = hosts_lab_path(L, i, "/etc/default/etcd");
        _cleanup_free_ char *env = xasprintf("# Environment file for etcd v" VERSION "\n"
                                             "ETCD_NAME=%s\n"
                                             "ETCD_DATA_DIR=%s\n"
                                             "ETCD_ADVERTISE_CLIENT_URLS=%s\n"
                                             "ETCD_LISTEN_CLIENT_URLS=%s\n"
                                             "ETCD_LISTEN_PEER_URLS=%s\n"
                                             "ETCD_INITIAL_CLUSTER=%s\n"
                                             "ETCD_INITIAL_CLUSTER_STATE=new\n"
                                             "ETCD_INITIAL_CLUSTER_TOKEN=systemd\n"
                                             "DAEMON_ARGS=\"--initial-advertise-peer-urls %s\"\n",
                                             node_name[i], data, c, c, p, sb_str(&ic), p);
        sb_release(&ic);
        assert_int_equal(write_file_atomic(env_file, env, strlen(env), 0644), 0);
        _cleanup_free_ char *etcd_bin = harness_etcd_path(VERSION, "etcd");
        _cleanup_free_ char *unit = xasprintf("[Unit]\n"
                                              "Description=etcd\n"
                                              "After=network.target\n"
                                              "\n"
                                              "[Service]\n"
                                              "Type=notify\n"
                                              "User=root\n"
                                              "Environment=ETCD_NAME=overridden-by-the-file\n"
                                              "EnvironmentFile=%s\n"
                                              "EnvironmentFile=-%s\n"
                                              "ExecStart=%s $DAEMON_ARGS\n"
                                              "Restart=always\n"
                                              "\n"
                                              "[Install]\n"
                                              "WantedBy=multi-user.target\n",
                                              env_file, missing, etcd_bin);
        _cleanup_free_ char *dir = hosts_lab_units(L, i);
        _cleanup_free_ char *path = xasprintf("%s/etcd.service", dir);
        assert_int_equal(write_file_atomic(path, unit, strlen(unit), 0644), 0);
}

/* How many times machine i's systemctl restarted a unit. */
static size_t systemctl_restarts(size_t i)
{
        _cleanup_free_ char *path = hosts_lab_systemctl_log(L, i), *log = NULL;
        size_t len = 0, n = 0;
        assert_int_equal(read_file(path, 1 << 20, &log, &len), 0);
        for (const char *p = log; (p = strstr(p, "restart ")); p++)
                n++;
        return n;
}

static void test_adopt_systemd(void **state)
{
        (void)state;
        L = hosts_lab_start(3, VERSION);
        assert_non_null(L);
        e2e *e = e2e_new();
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < 3; i++) {
                write_etcd_service(i);
                _cleanup_free_ char *c = url(i, L->client_port);
                sb_printf(&eps, "%s%s", i ? "," : "", c);
        }
        etcd_members *before = wait_started(sb_str(&eps));
        harness_writer *w = harness_writer_start(&(harness_writer_opts){.endpoints = sb_str(&eps)});

        hosts_lab_write_cluster_systemd(L, e, CL, VERSION, 3, 0, 3);
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(hosts_lab_cmd(L, e, "plan", NULL, &out, &err, NULL, NULL), 0);
        if (!strstr(out, "systemctl disable --now etcd.service") || strstr(out, "not supported"))
                fail_msg("plan does not say how systemd's etcd is adopted:\n%s", out);
        free(out), free(err), out = err = NULL;

        assert_int_equal(hosts_lab_cmd_failpoint(L, e, "adopt.after-first-move", "apply", NULL,
                                                 &out, &err, "--timeout", "120s"),
                         128 + SIGKILL);
        free(out), free(err), out = err = NULL;
        hosts_lab_apply_ok(L, e, "120s");

        etcd_members *after = e2e_members(e, CL);
        hosts_lab_assert_adopted(e, CL, before, after, node_name);
        etcd_members_free(after);
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
                _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", data);
                assert_true(path_exists(marker));
                _cleanup_free_ char *dir = hosts_lab_units(L, i);
                _cleanup_free_ char *old = xasprintf("%s/etcd.service", dir);
                _cleanup_free_ char *own = xasprintf("%s/etcd-default-" CL ".service", dir);
                assert_true(path_exists(old)); /* disabled, not removed: it is the package's */
                assert_true(path_exists(own));
                _cleanup_free_ char *log_path = hosts_lab_systemctl_log(L, i), *log = NULL;
                size_t len = 0;
                assert_int_equal(read_file(log_path, 1 << 20, &log, &len), 0);
                if (!strstr(log, "disable --now etcd.service") ||
                    !strstr(log, "restart --no-block etcd-default-" CL ".service"))
                        fail_msg("machine %zu: no move in systemctl's calls:\n%s", i, log);
        }

        /* the state store lost: gitcd's own units are taken over as they run, no restart */
        size_t restarts[3];
        for (size_t i = 0; i < 3; i++)
                restarts[i] = systemctl_restarts(i);
        e2e *fresh = e2e_new();
        hosts_lab_write_cluster_systemd(L, fresh, CL, VERSION, 3, 0, 3);
        hosts_lab_apply_ok(L, fresh, "60s");
        assert_int_equal(e2e_audit_count(fresh, CL, "member.adopt"), 3);
        assert_int_equal(e2e_audit_count(fresh, CL, "member.bootstrap"), 0);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(systemctl_restarts(i), restarts[i]);
        after = e2e_members(fresh, CL);
        assert_int_equal(after->cluster_id, before->cluster_id);
        assert_int_equal(hosts_lab_member_id(after, CL "-0"),
                         hosts_lab_member_id(before, node_name[0]));
        etcd_members_free(after);
        e2e_free(fresh);

        e2e_writer_check(w, e, CL, 10);
        harness_writer_free(w);
        etcd_members_free(before);
        sb_release(&eps);
        e2e_free(e);
}

static int teardown(void **state)
{
        (void)state;
        hosts_lab_free(L);
        L = NULL;
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_adopt, teardown),
            cmocka_unit_test_teardown(test_adopt_systemd, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

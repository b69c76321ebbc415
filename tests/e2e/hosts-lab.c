/*
 * The hosts target's end-to-end set-up (see hosts-lab.h), shared by
 * test-hosts.c and test-hosts-adopt.c.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/hosts-lab.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

hosts_lab *hosts_lab_start(size_t n, const char *version)
{
        if (!sshd_available() || !e2e_have_version(version)) {
                fprintf(stderr, "sshd or etcd %s is not installed\n", version);
                exit(77);
        }
        signal(SIGPIPE, SIG_IGN);
        hosts_lab *l = XNEW(hosts_lab);
        if (sshd_lab_start(n, &l->ssh) < 0) {
                free(l);
                return NULL;
        }
        l->client_port = harness_free_port();
        l->peer_port = harness_free_port();
        l->metrics_port = harness_free_port();
        l->ports = xasprintf("%d,%d,%d", l->client_port, l->peer_port, l->metrics_port);
        /*
         * The machines' "system" folders are under their roots, inside the
         * lab's folder; their etcd (systemd) is the test cache's, of any
         * version; snapshot files the specs name on the gitcd host go in
         * the lab's snapshots/.
         */
        l->config = path_join(l->ssh->dir, "gitcd.yaml");
        l->snapshots = path_join(l->ssh->dir, "snapshots");
        _cleanup_free_ char *etcd = harness_etcd_path(version, "etcd");
        _cleanup_free_ char *suffix = xasprintf("/%s/etcd", version);
        size_t cut = strlen(etcd) - strlen(suffix);
        assert_string_equal(etcd + cut, suffix);
        l->etcd_binaries = xasprintf("%.*s/*/etcd", (int)cut, etcd);
        _cleanup_free_ char *policy = xasprintf(
            "policy:\n  hosts:\n    dataRoot: %s\n    tlsRoot: %s\n"
            "    unitRoot: %s\n    manifestRoot: %s\n"
            "    etcdBinaries: [\"%s\"]\n  localSnapshotRoots: [%s]\n",
            l->ssh->dir, l->ssh->dir, l->ssh->dir, l->ssh->dir, l->etcd_binaries, l->snapshots);
        if (write_file_atomic(l->config, policy, strlen(policy), 0644) < 0) {
                hosts_lab_free(l);
                return NULL;
        }
        _cleanup_free_ char *etcd_bin = harness_etcd_path(version, "etcd");
        const char **dirs = xcalloc(2 * n + 1, sizeof(char *));
        int k = 0;
        for (size_t i = 0; i < n; i++) {
                char *d = hosts_lab_manifests(l, i), *u = hosts_lab_units(l, i);
                (void)mkdir_p(d, 0755);
                (void)mkdir_p(u, 0755);
                dirs[2 * i] = d;
                dirs[2 * i + 1] = u;
                /* the machine's systemctl, in step with the agent playing systemd */
                _cleanup_free_ char *sc = xasprintf("%s/bin/systemctl", l->ssh->machines[i].dir);
                _cleanup_free_ char *log = hosts_lab_systemctl_log(l, i);
                if (k == 0)
                        k = hostagent_write_systemctl(sc, u, log);
        }
        if (k == 0)
                k = hostagent_start(dirs, etcd_bin, l->ssh->dir, &l->agent);
        for (size_t i = 0; i < 2 * n; i++)
                free((char *)dirs[i]);
        free(dirs);
        if (k < 0) {
                hosts_lab_free(l);
                return NULL;
        }
        return l;
}

void hosts_lab_free(hosts_lab *l)
{
        if (!l)
                return;
        hostagent_free(l->agent);
        sshd_lab_free(l->ssh);
        free(l->ports);
        free(l->config);
        free(l->snapshots);
        free(l->etcd_binaries);
        free(l);
}

char *hosts_lab_path(const hosts_lab *l, size_t i, const char *path)
{
        return xasprintf("%s%s", l->ssh->machines[i].root, path);
}

char *hosts_lab_manifests(const hosts_lab *l, size_t i)
{
        return hosts_lab_path(l, i, "/etc/kubernetes/manifests");
}

char *hosts_lab_units(const hosts_lab *l, size_t i)
{
        return hosts_lab_path(l, i, "/etc/systemd/system");
}

char *hosts_lab_systemctl_log(const hosts_lab *l, size_t i)
{
        return xasprintf("%s/systemctl.log", l->ssh->machines[i].dir);
}

char *hosts_lab_data_dir(const hosts_lab *l, size_t i, const char *cluster)
{
        _cleanup_free_ char *p = xasprintf("/var/lib/etcd/%s", cluster);
        return hosts_lab_path(l, i, p);
}

static void write_cluster_on(const hosts_lab *l, e2e *e, const char *name, const char *version,
                             int replicas, const size_t *machines, size_t n, const char *tls,
                             const char *extra, bool systemd)
{
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb,
                  "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: %s\n"
                  "spec:\n  replicas: %d\n  version: \"%s\"\n",
                  name, replicas, version);
        if (tls)
                sb_printf(&sb, "  tls:\n    provider: auto\n%s", tls);
        if (extra)
                sb_append(&sb, extra);
        sb_printf(&sb, "  hosts:\n    mode: %s\n    machines:\n",
                  systemd ? "systemd" : "staticPod");
        _cleanup_free_ char *etcd_bin = harness_etcd_path(version, "etcd");
        for (size_t j = 0; j < n; j++) {
                size_t i = machines[j];
                _cleanup_free_ char *data = hosts_lab_data_dir(l, i, name);
                _cleanup_free_ char *pods = hosts_lab_manifests(l, i);
                _cleanup_free_ char *units = hosts_lab_units(l, i);
                sb_printf(&sb, "    - address: %s\n      ssh: {port: %d}\n      dataDir: %s\n",
                          l->ssh->machines[i].address, l->ssh->machines[i].port, data);
                if (systemd)
                        sb_printf(&sb, "      unitDir: %s\n      etcdBinary: %s\n", units,
                                  etcd_bin);
                else
                        sb_printf(&sb, "      manifestDir: %s\n", pods);
                /* also without TLS: the default (/etc/etcd/...) would be outside the
                 * machine's root, shared by every machine of the lab */
                _cleanup_free_ char *rel = xasprintf("/etc/etcd/default-%s/pki", name);
                _cleanup_free_ char *dir = hosts_lab_path(l, i, rel);
                sb_printf(&sb, "      tlsDir: %s\n", dir);
        }
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, sb_str(&sb));
        sb_release(&sb);
}

static void write_cluster(const hosts_lab *l, e2e *e, const char *name, const char *version,
                          int replicas, size_t first, size_t n, const char *tls, bool systemd)
{
        size_t *machines = xcalloc(n ? n : 1, sizeof(size_t));
        for (size_t j = 0; j < n; j++)
                machines[j] = first + j;
        write_cluster_on(l, e, name, version, replicas, machines, n, tls, NULL, systemd);
        free(machines);
}

void hosts_lab_write_cluster_on(const hosts_lab *l, e2e *e, const char *name, const char *version,
                                int replicas, const size_t *machines, size_t n, const char *extra)
{
        write_cluster_on(l, e, name, version, replicas, machines, n, NULL, extra, false);
}

void hosts_lab_write_cluster(const hosts_lab *l, e2e *e, const char *name, const char *version,
                             int replicas, size_t first, size_t n)
{
        write_cluster(l, e, name, version, replicas, first, n, NULL, false);
}

void hosts_lab_write_cluster_systemd(const hosts_lab *l, e2e *e, const char *name,
                                     const char *version, int replicas, size_t first, size_t n)
{
        write_cluster(l, e, name, version, replicas, first, n, NULL, true);
}

void hosts_lab_write_cluster_tls(const hosts_lab *l, e2e *e, const char *name, const char *version,
                                 int replicas, size_t first, size_t n)
{
        write_cluster(l, e, name, version, replicas, first, n,
                      "    client: {enabled: true}\n    peer: {enabled: true}\n", false);
}

void hosts_lab_write_cluster_tls_allow_plain(const hosts_lab *l, e2e *e, const char *name,
                                             const char *version, int replicas, size_t first,
                                             size_t n)
{
        write_cluster(l, e, name, version, replicas, first, n,
                      "    client: {enabled: true, allowPlainHTTP: true}\n"
                      "    peer: {enabled: true}\n",
                      false);
}

int hosts_lab_cmd(const hosts_lab *l, e2e *e, const char *cmd, const char *known_hosts,
                  char **ret_out, char **ret_err, const char *extra1, const char *extra2)
{
        return hosts_lab_cmd_failpoint(l, e, NULL, cmd, known_hosts, ret_out, ret_err, extra1,
                                       extra2);
}

int hosts_lab_cmd_failpoint(const hosts_lab *l, e2e *e, const char *failpoint, const char *cmd,
                            const char *known_hosts, char **ret_out, char **ret_err,
                            const char *extra1, const char *extra2)
{
        bool policy = streq(cmd, "apply") || streq(cmd, "plan") || streq(cmd, "run");
        const char *args[] = {cmd,
                              "--source",
                              e->source,
                              "--target",
                              "hosts",
                              "--hosts-ssh-key",
                              l->ssh->client_key,
                              "--hosts-known-hosts",
                              known_hosts ? known_hosts : l->ssh->known_hosts,
                              "--hosts-ports",
                              l->ports,
                              policy ? "--config" : extra1,
                              policy ? l->config : extra2,
                              policy ? extra1 : NULL,
                              policy ? extra2 : NULL,
                              NULL};
        return e2e_runv_failpoint(e, failpoint, ret_out, ret_err, args);
}

void hosts_lab_apply_ok(const hosts_lab *l, e2e *e, const char *timeout)
{
        _cleanup_free_ char *out = NULL, *err = NULL;
        int k = hosts_lab_cmd(l, e, "apply", NULL, &out, &err, "--timeout", timeout);
        if (k != 0) {
                _cleanup_free_ char *st = NULL;
                e2e_run(e, &st, "status", "-o", "json", NULL);
                fprintf(stderr, "gitcd apply --target hosts exited %d:\n%s\nstatus:\n%s\n", k, err,
                        st);
                fail_msg("gitcd apply --target hosts exited %d", k);
        }
}

uint64_t hosts_lab_member_id(const etcd_members *l, const char *name)
{
        for (size_t i = 0; i < l->n; i++)
                if (streq_ptr(l->members[i].name, name))
                        return l->members[i].id;
        strbuf seen = STRBUF_INIT;
        for (size_t i = 0; i < l->n; i++)
                sb_printf(&seen, " %s=%016llx", l->members[i].name ? l->members[i].name : "(none)",
                          (unsigned long long)l->members[i].id);
        fail_msg("no member %s; etcd lists%s", name, sb_str(&seen));
        sb_release(&seen);
        return 0;
}

void hosts_lab_assert_adopted(e2e *e, const char *cluster, const etcd_members *before,
                              const etcd_members *after, const char *const *node_names)
{
        assert_int_equal(after->n, 3);
        assert_int_equal(after->cluster_id, before->cluster_id);
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("%s-%zu", cluster, i);
                assert_int_equal(hosts_lab_member_id(after, name),
                                 hosts_lab_member_id(before, node_names[i]));
        }
        assert_int_equal(e2e_audit_count(e, cluster, "cluster.adopt"), 1);
        assert_int_equal(e2e_audit_count(e, cluster, "member.adopt"), 3);
        assert_int_equal(e2e_audit_count(e, cluster, "member.bootstrap"), 0);
}

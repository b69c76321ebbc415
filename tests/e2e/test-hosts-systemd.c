/*
 * The hosts target in systemd mode on real systemd: three machines booted
 * by systemd-nspawn from a Debian bookworm root file system
 * (tests/harness/nspawn.h: systemd 252 as PID 1, OpenSSH's sshd, the
 * cache's etcd 3.5.16 at /usr/local/bin/etcd, private addresses in the
 * test's own network namespace). Nothing is simulated: gitcd's unit is
 * Type=notify, and systemd's own `systemctl start`/`restart` blocks until
 * etcd says READY=1, which a member of a new cluster says only once a
 * quorum runs; gitcd must not wait there (docs/hosts.md, "Starting
 * members on systemd").
 *
 * `gitcd apply --target hosts` bootstraps 3 members, one per machine: it
 * succeeds with no SSH command that ran out of its deadline, well within
 * that deadline in all (a start that waited for READY=1 held the first
 * member for the whole 60 s), `gitcd status` counts 3 ready, systemd says
 * each unit is an active Type=notify unit, and a write is kept and read
 * back through every member. A second apply changes nothing. A changed
 * flag (spec.options.snapshotCount) rewrites every unit: systemd holds
 * the new one (NeedDaemonReload=no, its ExecStart) and each member's
 * process runs with the flag. Skipped (77)
 * without root, systemd-nspawn or the root file system scripts/setup
 * caches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/harness/nspawn.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MACHINES 3
#define VERSION  "3.5.16"
#define CLUSTER  "sd"
#define UNIT     "etcd-default-" CLUSTER ".service"

/* gitcd's SSH command deadline: a start that waited for READY=1 took it all */
#define SSH_DEADLINE_MS 60000

static nspawn_lab *L;

static int setup(void **state)
{
        (void)state;
        _cleanup_free_ char *why = NULL;
        if (!nspawn_available(&why) || !e2e_have_version(VERSION)) {
                fprintf(stderr, "skipped: %s\n", why ? why : "etcd " VERSION " is not installed");
                exit(77);
        }
        _cleanup_free_ char *etcd = harness_etcd_path(VERSION, "etcd");
        int64_t t0 = now_mono_ms();
        if (nspawn_lab_start(MACHINES, etcd, 180000, &L) < 0)
                return -1;
        printf("# %d machines booted in %.1f s\n", MACHINES, (now_mono_ms() - t0) / 1000.0);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        nspawn_lab_free(L);
        return 0;
}

/*
 * A 3-member cluster in systemd mode, one member per machine, every path the
 * default; snapshot_count > 0 sets spec.options.snapshotCount.
 */
static void write_cluster(e2e *e, int snapshot_count)
{
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb,
                  "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: " CLUSTER
                  "\nspec:\n  replicas: %d\n  version: \"" VERSION "\"\n",
                  MACHINES);
        if (snapshot_count > 0)
                sb_printf(&sb, "  options:\n    snapshotCount: %d\n", snapshot_count);
        sb_printf(&sb, "  hosts:\n    mode: systemd\n    machines:\n");
        for (size_t i = 0; i < MACHINES; i++)
                sb_printf(&sb, "    - address: %s\n", L->machines[i].address);
        e2e_write_file(e, CLUSTER ".yaml", sb_str(&sb));
        sb_release(&sb);
}

static int hosts_cmd(e2e *e, const char *cmd, char **ret_out, char **ret_err, const char *extra1,
                     const char *extra2)
{
        const char *args[] = {cmd,
                              "--source",
                              e->source,
                              "--target",
                              "hosts",
                              "--hosts-ssh-key",
                              L->client_key,
                              "--hosts-known-hosts",
                              L->known_hosts,
                              extra1,
                              extra2,
                              NULL};
        return e2e_runv(e, ret_out, ret_err, args);
}

static void test_bootstrap_on_systemd(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        write_cluster(e, 0);

        int64_t t0 = now_mono_ms();
        _cleanup_free_ char *out = NULL, *err = NULL;
        int rc = hosts_cmd(e, "apply", &out, &err, "--timeout", "180s");
        int64_t took = now_mono_ms() - t0;
        printf("# gitcd apply (bootstrap of %d members on real systemd): %.2f s\n", MACHINES,
               took / 1000.0);
        if (rc != 0)
                fail_msg("apply exited %d\nstdout:\n%s\nstderr:\n%s", rc, out, err);
        if (strstr(err, "did not finish within") || strstr(out, "did not finish within"))
                fail_msg("an SSH command ran out of its deadline:\n%s\n%s", out, err);
        if (took >= SSH_DEADLINE_MS)
                fail_msg("the bootstrap took %.1f s, past one SSH command's deadline: a start "
                         "waited for readiness",
                         took / 1000.0);
        assert_true(e2e_wait_ready(e, CLUSTER, MACHINES, 120));

        /* systemd itself runs each member: an active Type=notify unit (READY=1 came) */
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *st = NULL;
                assert_int_equal(
                    nspawn_ssh(L, i, "systemctl show -p ActiveState -p Type " UNIT, &st), 0);
                if (!strstr(st, "ActiveState=active") || !strstr(st, "Type=notify"))
                        fail_msg("machine %zu: %s", i, st);
        }

        /* a write is kept, and every member serves it */
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < MACHINES; i++)
                sb_printf(&eps, "%shttp://%s:2379", i ? "," : "", L->machines[i].address);
        etcd_client_opts o = {
            .endpoints = sb_str(&eps), .call_timeout_ms = 5000, .dial_timeout_ms = 2000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        _cleanup_free_ char *why = NULL;
        if (!e2e_put_retry(c, "systemd/kept", &why))
                fail_msg("put: %s", why);
        etcd_client_free(c);
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *one = xasprintf("http://%s:2379", L->machines[i].address);
                etcd_client_opts oi = {
                    .endpoints = one, .call_timeout_ms = 5000, .dial_timeout_ms = 2000};
                assert_int_equal(etcd_client_new(&oi, &c), 0);
                etcd_kv_list *kv = NULL;
                assert_int_equal(etcd_get(c, "systemd/kept", false, &kv), 0);
                assert_int_equal(kv->n, 1);
                assert_string_equal(kv->kvs[0].value, "v");
                etcd_kv_list_free(kv);
                etcd_client_free(c);
        }
        sb_release(&eps);

        /* the same spec again: nothing to do, no unit restarted */
        _cleanup_free_ char *before = NULL, *after = NULL;
        assert_int_equal(nspawn_ssh(L, 0, "systemctl show -p MainPID " UNIT, &before), 0);
        _cleanup_free_ char *out2 = NULL, *err2 = NULL;
        rc = hosts_cmd(e, "apply", &out2, &err2, "--timeout", "120s");
        if (rc != 0)
                fail_msg("second apply exited %d\n%s\n%s", rc, out2, err2);
        assert_int_equal(nspawn_ssh(L, 0, "systemctl show -p MainPID " UNIT, &after), 0);
        assert_string_equal(before, after);

        /* a changed flag rewrites each unit: systemd reloaded, each member restarted onto it */
        write_cluster(e, 12345);
        _cleanup_free_ char *out3 = NULL, *err3 = NULL;
        rc = hosts_cmd(e, "apply", &out3, &err3, "--timeout", "180s");
        if (rc != 0)
                fail_msg("apply of the changed flag exited %d\n%s\n%s", rc, out3, err3);
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *st = NULL;
                assert_int_equal(nspawn_ssh(L, i,
                                            "systemctl show -p NeedDaemonReload -p ExecStart " UNIT
                                            "; xargs -0 < /proc/$(systemctl show -p MainPID "
                                            "--value " UNIT ")/cmdline",
                                            &st),
                                 0);
                /* once in the ExecStart systemd holds, once in the running process's command */
                size_t seen = 0;
                for (const char *p = st; (p = strstr(p, "--snapshot-count=12345")); p++)
                        seen++;
                if (!strstr(st, "NeedDaemonReload=no") || seen != 2)
                        fail_msg("machine %zu does not run the rewritten unit:\n%s", i, st);
        }
        assert_true(e2e_wait_ready(e, CLUSTER, MACHINES, 120));
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bootstrap_on_systemd),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * Leaf certificate renewal end to end (tls.provider auto, local target,
 * real etcd): certificates that live 40 s and are renewed 30 s before
 * they expire, so a renewal comes every ~10 s and each one is done with
 * 30 s to spare (a pass with the daemon's 1 s interval takes a second or
 * two, also on a loaded machine).
 *
 * What a user would notice, and what is asserted:
 *  - across three renewals of every member (one on 3.4), `openssl s_client` shows a new
 *    serial on every member's client port, while the member's process is
 *    the same one (a file swap is enough with the CA unchanged: etcd
 *    loads its leaf files again for each new connection; measured here on
 *    3.4 and 3.5);
 *  - a writer putting keys the whole time never needs more than one retry,
 *    and every acknowledged write is there at the end;
 *  - gitcd started after every certificate expired (members killed, so
 *    nothing holds an old connection) renews them first and the cluster
 *    comes back.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MEMBERS  3
#define RENEWALS 3
/* tls.auto.validity and renewBefore of every cluster here, in seconds. */
#define VALIDITY_S     40
#define RENEW_BEFORE_S 30

static void write_tls_cluster(e2e *e, const char *name, const char *version)
{
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "spec:\n"
                                              "  replicas: %d\n"
                                              "  version: \"%s\"\n"
                                              "  progressDeadlineSeconds: 300\n"
                                              "  tls:\n"
                                              "    provider: auto\n"
                                              "    client:\n"
                                              "      enabled: true\n"
                                              "    peer:\n"
                                              "      enabled: true\n"
                                              "    auto:\n"
                                              "      validity: %ds\n"
                                              "      renewBefore: %ds\n",
                                              name, MEMBERS, version, VALIDITY_S, RENEW_BEFORE_S);
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, text);
}

/* The client URLs of the members, in member order. */
static size_t member_urls(e2e *e, const char *name, char *urls[MEMBERS])
{
        _cleanup_free_ char *eps = e2e_endpoints(e, name);
        size_t n = 0;
        char *save = NULL;
        for (char *u = strtok_r(eps, ",", &save); u && n < MEMBERS; u = strtok_r(NULL, ",", &save))
                urls[n++] = xstrdup(u);
        return n;
}

static void renewals_under_writer(const char *version, int renewals)
{
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        const char *name = "rot";
        write_tls_cluster(e, name, version);
        pid_t d = e2e_start_daemon(e, NULL);
        assert_true(e2e_wait_ready(e, name, MEMBERS, 180));

        char *urls[MEMBERS] = {0};
        assert_int_equal(member_urls(e, name, urls), MEMBERS);
        char *members[MEMBERS];
        pid_t pids[MEMBERS];
        for (int i = 0; i < MEMBERS; i++) {
                members[i] = xasprintf("%s-%d", name, i);
                pids[i] = e2e_member_pid(e, name, members[i]);
                assert_true(pids[i] > 0);
        }
        e2e_tls_files f = e2e_operator_files(e, name, members[0]);
        etcd_client *c = e2e_tls_client(e, name, &f);

        /* Serials seen per member, in order; a renewal is a change of serial. */
        char *last[MEMBERS] = {0};
        int changes[MEMBERS] = {0};
        int acked = 0;
        _cleanup_free_ char *error = NULL;
        int64_t end = now_mono_ms() + 240 * 1000, next_probe = 0;
        bool done = false;
        while (!done && now_mono_ms() < end) {
                _cleanup_free_ char *key = xasprintf("/w/%06d", acked);
                if (!e2e_put_retry(c, key, &error))
                        fail_msg("write %d failed twice: %s", acked, error);
                acked++;
                if (now_mono_ms() < next_probe)
                        continue;
                next_probe = now_mono_ms() + 1000;
                done = true;
                for (int i = 0; i < MEMBERS; i++) {
                        char *s = e2e_served_serial(urls[i], f.ca);
                        if (s && last[i] && !streq(s, last[i]))
                                changes[i]++;
                        if (s) {
                                free(last[i]);
                                last[i] = s;
                        }
                        if (changes[i] < renewals)
                                done = false;
                }
        }
        for (int i = 0; i < MEMBERS; i++)
                if (changes[i] < renewals)
                        fail_msg("%s: %d new serials seen on %s, %d wanted", version, changes[i],
                                 members[i], renewals);

        /* No member was restarted for it: the same processes served every serial. */
        for (int i = 0; i < MEMBERS; i++)
                assert_int_equal(e2e_member_pid(e, name, members[i]), pids[i]);

        /* Every acknowledged write is there. */
        etcd_kv_list *l = NULL;
        if (etcd_get(c, "/w/", true, &l) < 0)
                fail_msg("read back: %s", etcd_client_last_error(c));
        assert_int_equal((int)l->n, acked);
        etcd_kv_list_free(l);
        etcd_client_free(c);

        assert_true(e2e_audit_count(e, name, "tls.renew") >= MEMBERS * renewals);
        /* `gitcd status` lists every leaf with its expiry: client, peer, operator per member;
         * and the cluster CA. */
        json_t *st = e2e_status(e, name);
        json_t *certs = json_object_get(st, "certificates");
        assert_int_equal(json_array_size(certs), MEMBERS * 3 + 1);
        assert_non_null(json_string_value(json_object_get(json_array_get(certs, 0), "not_after")));
        json_decref(st);
        assert_true(e2e_audit_count(e, name, "tls.renewal-due") >= 1);

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        for (int i = 0; i < MEMBERS; i++) {
                free(urls[i]);
                free(last[i]);
                free(members[i]);
        }
        e2e_tls_files_release(&f);
        e2e_free(e);
}

static void test_renewals_3_5(void **state)
{
        (void)state;
        renewals_under_writer("3.5.16", RENEWALS);
}

static void test_renewals_3_4(void **state)
{
        (void)state;
        /* One renewal on 3.4: the same code path, and the suite's time is tight. */
        renewals_under_writer("3.4.23", 1);
}

/* The CertificatesExpiring condition of the cluster, from `gitcd status -o json`. */
static char *cert_condition_reason(e2e *e, const char *name)
{
        json_t *st = e2e_status(e, name);
        char *reason = NULL;
        size_t i;
        json_t *cond;
        json_array_foreach(json_object_get(st, "conditions"), i, cond)
        {
                if (streq(json_string_value(json_object_get(cond, "type")) ?: "",
                          "CertificatesExpiring"))
                        reason = xstrdup(json_string_value(json_object_get(cond, "reason")) ?: "");
        }
        json_decref(st);
        return reason;
}

/*
 * gitcd stopped, members killed, every certificate expired: started again,
 * gitcd renews them before anything else and the cluster comes back.
 */
static void test_start_after_expiry(void **state)
{
        (void)state;
        const char *version = "3.5.16";
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        const char *name = "exp";
        write_tls_cluster(e, name, version);
        pid_t d = e2e_start_daemon(e, NULL);
        assert_true(e2e_wait_ready(e, name, MEMBERS, 180));
        e2e_tls_files f = e2e_operator_files(e, name, "exp-0");
        etcd_client *c = e2e_tls_client(e, name, &f);
        assert_int_equal(etcd_put(c, "/before", "1", 1, NULL), 0);
        etcd_client_free(c);

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        e2e_kill_members(e);
        /* Every leaf lives VALIDITY_S and the last renewal was at most that long ago. */
        sleep(VALIDITY_S + 2);

        /* The status recorded before the stop says Running: wait for etcd itself. */
        d = e2e_start_daemon(e, NULL);
        int64_t end = now_mono_ms() + 180 * 1000;
        etcd_kv_list *l = NULL;
        _cleanup_free_ char *error = NULL;
        while (!l && now_mono_ms() < end) {
                c = e2e_tls_client(e, name, &f);
                if (etcd_get(c, "/before", false, &l) < 0) {
                        free(error);
                        error = xstrdup(etcd_client_last_error(c));
                        l = NULL;
                        usleep(500 * 1000);
                }
                etcd_client_free(c);
        }
        if (!l)
                fail_msg("no read after recovery: %s", error);
        assert_int_equal((int)l->n, 1);
        etcd_kv_list_free(l);
        assert_true(e2e_wait_ready(e, name, MEMBERS, 120));

        /* The expired leaves were renewed as such, and said so. */
        assert_true(e2e_audit_count(e, name, "tls.renew") >= MEMBERS);
        _cleanup_free_ char *log = xasprintf("%s/daemon.log", e->root);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(log, 1 << 24, &text, &len), 0);
        assert_non_null(strstr(text, "expired"));
        _cleanup_free_ char *reason = cert_condition_reason(e, name);
        assert_non_null(reason);

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        e2e_tls_files_release(&f);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_renewals_3_5),
            cmocka_unit_test(test_renewals_3_4),
            cmocka_unit_test(test_start_after_expiry),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

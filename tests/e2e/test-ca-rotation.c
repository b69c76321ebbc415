/*
 * CA rotation end to end (tls.provider auto, local target; etcd 3.5.16, or
 * the version given as the first argument: e2e-ca-rotation-3.4 runs it on
 * 3.4.23): three members under a writer, a tls.auto.rotateCA token
 * committed, gitcd killed with SIGKILL once the rotation is past its first
 * phase and started again.
 *
 * What a user would notice, and what is asserted: the rotation finishes
 * (its three phases audited), the writer never needs more than one retry
 * and every acknowledged write is there, each member's client port now
 * serves a certificate that the new CA verifies and the old CA does not,
 * and the old CA's folder (its key) is gone.
 */
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
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MEMBERS 3

static const char *version = "3.5.16";

static void write_cluster(e2e *e, const char *name, const char *token)
{
        _cleanup_free_ char *rot = token ? xasprintf("      rotateCA: \"%s\"\n", token) : NULL;
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
                                              "      validityDays: 90\n"
                                              "%s",
                                              name, MEMBERS, version, rot ? rot : "");
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, text);
}

/* The audit log's tls.ca-rotate events, as `gitcd log -o json` prints them. */
static char *rotation_log(e2e *e, const char *name)
{
        _cleanup_free_ char *id = xasprintf("default/%s", name);
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "log", "-o", "json", "--cluster", id, "--action",
                                 "tls.ca-rotate", NULL),
                         0);
        return out;
}

/*
 * Does openssl accept the chain a member's client port presents with ca as
 * the only anchor? (With gitcd's client identity: members ask for one.)
 */
static bool served_chain_verifies(const char *url, const char *ca, const e2e_tls_files *f)
{
        const char *hostport = strstr(url, "://");
        hostport = hostport ? hostport + 3 : url;
        _cleanup_free_ char *cmd =
            xasprintf("openssl s_client -connect %s -CAfile %s -cert %s -key %s "
                      "-verify_return_error </dev/null >/dev/null 2>&1",
                      hostport, ca, f->crt, f->key);
        int st = system(cmd);
        return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_rotation_under_writer(void **state)
{
        (void)state;
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        const char *name = "car";
        write_cluster(e, name, NULL);
        pid_t d = e2e_start_daemon(e, NULL);
        assert_true(e2e_wait_ready(e, name, MEMBERS, 180));

        /* The CA every member trusts now, kept to show it no longer verifies. */
        _cleanup_free_ char *cdir = xasprintf("%s/clusters/default/%s", e->state_dir, name);
        _cleanup_free_ char *ca_path = path_join(cdir, "pki/ca.crt");
        _cleanup_free_ char *old_ca = path_join(e->root, "old-ca.crt");
        _cleanup_free_ char *pem = NULL;
        size_t len = 0;
        assert_int_equal(read_file(ca_path, 1 << 20, &pem, &len), 0);
        assert_int_equal(write_file_atomic(old_ca, pem, len, 0644), 0);

        _cleanup_free_ char *eps = e2e_endpoints(e, name);
        char *urls[MEMBERS] = {0};
        char *save = NULL;
        size_t n = 0;
        for (char *u = strtok_r(eps, ",", &save); u && n < MEMBERS; u = strtok_r(NULL, ",", &save))
                urls[n++] = u;
        assert_int_equal(n, MEMBERS);
        _cleanup_free_ char *member0 = xasprintf("%s-0", name);
        e2e_tls_files f = e2e_operator_files(e, name, member0);
        for (size_t i = 0; i < n; i++)
                assert_true(served_chain_verifies(urls[i], old_ca, &f));
        etcd_client *c = e2e_tls_client(e, name, &f);

        write_cluster(e, name, "rotate-1");
        int acked = 0;
        bool killed = false, finished = false;
        _cleanup_free_ char *error = NULL;
        int64_t end = now_mono_ms() + 240 * 1000, next_look = 0;
        while (!finished && now_mono_ms() < end) {
                _cleanup_free_ char *key = xasprintf("/w/%06d", acked);
                if (!e2e_put_retry(c, key, &error))
                        fail_msg("write %d failed twice: %s", acked, error);
                acked++;
                if (now_mono_ms() < next_look)
                        continue;
                /* often: phase 2 is one pass, phase 3 three restarts of about a second */
                next_look = now_mono_ms() + 250;
                _cleanup_free_ char *log = rotation_log(e, name);
                if (!killed && strstr(log, "phase 2 (reissue from new CA): started")) {
                        /* Mid-rotation: the old CA is retiring, the new one signs. */
                        kill(d, SIGKILL);
                        waitpid(d, NULL, 0);
                        killed = true;
                        /* `gitcd status` shows the phase the rotation stopped in. */
                        json_t *st = e2e_status(e, name);
                        json_t *rot = json_object_get(st, "ca_rotation");
                        assert_string_equal(json_string_value(json_object_get(rot, "token")),
                                            "rotate-1");
                        assert_true(json_integer_value(json_object_get(rot, "phase")) >= 2);
                        json_decref(st);
                        d = e2e_start_daemon(e, NULL);
                }
                finished = strstr(log, "phase 3 (drop old CA): done") != NULL;
        }
        if (!finished)
                fail_msg("the CA rotation did not finish (killed: %d)", killed);
        assert_true(killed);

        json_t *st = e2e_status(e, name);
        assert_true(json_is_null(json_object_get(st, "ca_rotation")));
        json_decref(st);

        /* Every acknowledged write is there. */
        etcd_kv_list *l = NULL;
        if (etcd_get(c, "/w/", true, &l) < 0)
                fail_msg("read back: %s", etcd_client_last_error(c));
        assert_int_equal((int)l->n, acked);
        etcd_kv_list_free(l);
        etcd_client_free(c);

        /* Every member serves a leaf of the new CA; the old CA verifies none. */
        for (size_t i = 0; i < n; i++) {
                assert_true(served_chain_verifies(urls[i], ca_path, &f));
                assert_false(served_chain_verifies(urls[i], old_ca, &f));
        }
        _cleanup_free_ char *old_dir = path_join(cdir, "pki-old");
        _cleanup_free_ char *next_dir = path_join(cdir, "pki-next");
        assert_false(path_exists(old_dir));
        assert_false(path_exists(next_dir));
        /* One rotation per token: the same spec read again after the restart did not start
         * another (one "phase 1 ... started"). */
        _cleanup_free_ char *log = rotation_log(e, name);
        const char *p = strstr(log, "phase 1 (trust old+new CA): started");
        assert_non_null(p);
        assert_null(strstr(p + 1, "phase 1 (trust old+new CA): started"));

        /* `gitcd etcd --cluster` finds gitcd's client certificate of the new CA by itself */
        _cleanup_free_ char *id = xasprintf("default/%s", name);
        _cleanup_free_ char *got = NULL;
        assert_int_equal(e2e_run(e, &got, "etcd", "--cluster", id, "member", "list", NULL), 0);
        assert_non_null(strstr(got, "https://"));

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        e2e_tls_files_release(&f);
        e2e_free(e);
}

int main(int argc, char **argv)
{
        if (argc > 1)
                version = argv[1];
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_rotation_under_writer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The daemon's configuration file through the real binary: two sources
 * feeding one state, a cluster both define refused for that cluster only,
 * file:line:col errors, flags over the file, and SIGHUP: a bad file (or
 * one naming a source that cannot be opened) keeps the settings in force,
 * a good one takes a new source in without a restart. Token and key files
 * other users can read are refused at start with the chmod to run.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/ops/ops-test.h"
#include "util/xalloc.h"

static void test_bad_file(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml",
                                                  "sources:\n"
                                                  "  - name: a\n"
                                                  "    url: /nowhere\n"
                                                  "    credentials:\n"
                                                  "      token: hunter2\n"
                                                  "  - name: b\n"
                                                  "    interval: soon\n"
                                                  "listen: {address: 127.0.0.1:1, tlsCert: c}\n"
                                                  "observeInterval: 10ms\n"
                                                  "workers: 0\n");
        char *err = NULL;
        const char *args[] = {"run", "--config", cfg, NULL};
        assert_int_equal(e2e_runv(e, NULL, &err, args), 1);
        _cleanup_free_ char *l5 = xasprintf("%s:5:7: error: token: secrets are not kept", cfg);
        _cleanup_free_ char *l6 = xasprintf("%s:6:5: error: source b needs a url", cfg);
        _cleanup_free_ char *l7 = xasprintf("%s:7:15: error: interval must be a duration", cfg);
        _cleanup_free_ char *l8 = xasprintf("%s:8:9: error: listen: tlsCert and tlsKey", cfg);
        assert_non_null(strstr(err, l5));
        assert_non_null(strstr(err, l6));
        assert_non_null(strstr(err, l7));
        assert_non_null(strstr(err, l7));
        assert_non_null(strstr(err, l8));
        _cleanup_free_ char *l9 =
            xasprintf("%s:9:18: error: observeInterval must be a duration of at least 1s", cfg);
        _cleanup_free_ char *l10 =
            xasprintf("%s:10:10: error: workers must be a whole number from 1 to 256", cfg);
        assert_non_null(strstr(err, l9));
        assert_non_null(strstr(err, l10));
        assert_null(strstr(err, "hunter2"));
        free(err);
        e2e_free(e);
}

/* The hosts target's settings: the hosts: block, its flags, and their refusals. */
static void test_hosts_settings(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml",
                                                  "target: hosts\n"
                                                  "hosts:\n"
                                                  "  clientPort: 70000\n"
                                                  "  knownHost: /etc/x\n"
                                                  "  preflight: maybe\n"
                                                  "  preflightSyncP99: 0ms\n"
                                                  "  preflightInterval: 5s\n"
                                                  "sources:\n"
                                                  "  - name: a\n"
                                                  "    url: /nowhere\n"
                                                  "    target: moon\n");
        char *err = NULL;
        const char *args[] = {"run", "--config", cfg, NULL};
        assert_int_equal(e2e_runv(e, NULL, &err, args), 1);
        _cleanup_free_ char *l3 = xasprintf("%s:3:15: error: clientPort must be a port", cfg);
        _cleanup_free_ char *l4 = xasprintf("%s:4:3: error: unknown key 'knownHost' in hosts", cfg);
        _cleanup_free_ char *l5 = xasprintf("%s:5:14: error: preflight must be", cfg);
        _cleanup_free_ char *l6 =
            xasprintf("%s:6:21: error: preflightSyncP99 must be a duration of at least 1ms", cfg);
        _cleanup_free_ char *l7 =
            xasprintf("%s:7:22: error: preflightInterval must be a duration of at least 10s", cfg);
        _cleanup_free_ char *l8 = xasprintf(
            "%s:11:13: error: unknown target 'moon' (available: local, kubernetes, hosts)", cfg);
        assert_non_null(strstr(err, l5));
        assert_non_null(strstr(err, l6));
        assert_non_null(strstr(err, l7));
        assert_non_null(strstr(err, l3));
        assert_non_null(strstr(err, l4));
        assert_non_null(strstr(err, l8));
        free(err);

        /* --hosts-* flags belong to --target hosts */
        err = NULL;
        const char *a2[] = {"apply", "--source", e->source, "--hosts-ssh-key", "/k", NULL};
        assert_int_not_equal(e2e_runv(e, NULL, &err, a2), 0);
        assert_non_null(strstr(err, "need --target hosts"));
        free(err);
        err = NULL;
        const char *a3[] = {"apply", "--source",      e->source, "--target",
                            "hosts", "--hosts-ports", "1,2",     NULL};
        assert_int_not_equal(e2e_runv(e, NULL, &err, a3), 0);
        assert_non_null(strstr(err, "--hosts-ports takes three port numbers"));
        free(err);
        /* host keys are never trusted on first use: no known_hosts file, no target */
        err = NULL;
        const char *a4[] = {"apply",
                            "--source",
                            e->source,
                            "--target",
                            "hosts",
                            "--hosts-known-hosts",
                            "/nonexistent/known_hosts",
                            NULL};
        assert_int_not_equal(e2e_runv(e, NULL, &err, a4), 0);
        assert_non_null(strstr(err, "no known_hosts file /nonexistent/known_hosts"));
        free(err);
        e2e_free(e);
}

/*
 * A source's kubernetes: (its API server) belongs to a source of the
 * Kubernetes target: on another, the daemon does not start and says where.
 */
static void test_source_kubernetes(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml",
                                                  "sources:\n"
                                                  "  - name: a\n"
                                                  "    url: /nowhere\n"
                                                  "    target: local\n"
                                                  "    kubernetes:\n"
                                                  "      context: east\n");
        char *err = NULL;
        const char *args[] = {"run", "--config", cfg, NULL};
        assert_int_equal(e2e_runv(e, NULL, &err, args), 1);
        _cleanup_free_ char *want = xasprintf(
            "%s:6:16: source a: kubernetes (kubeconfig, context) needs target kubernetes, and "
            "its target is local",
            cfg);
        if (!strstr(err, want))
                fail_msg("want %s in:\n%s", want, err);
        free(err);
        e2e_free(e);
}

/* kubernetes.snapshotImage is read; --snapshot-image belongs to --target kubernetes. */
static void test_snapshot_image(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml",
                                                  "kubernetes:\n"
                                                  "  snapshotImage: registry.example/gitcd:1\n"
                                                  "  snapshotImages: x\n"
                                                  "sources:\n"
                                                  "  - name: a\n"
                                                  "    url: /nowhere\n");
        char *err = NULL;
        const char *args[] = {"run", "--config", cfg, NULL};
        assert_int_equal(e2e_runv(e, NULL, &err, args), 1);
        _cleanup_free_ char *l3 =
            xasprintf("%s:3:3: error: unknown key 'snapshotImages' in kubernetes", cfg);
        assert_non_null(strstr(err, l3));
        assert_null(strstr(err, "'snapshotImage'"));
        free(err);
        err = NULL;
        const char *a2[] = {"apply", "--source", e->source, "--snapshot-image", "i", NULL};
        assert_int_not_equal(e2e_runv(e, NULL, &err, a2), 0);
        assert_non_null(strstr(err, "--snapshot-image need --target kubernetes"));
        free(err);
        e2e_free(e);
}

static void test_two_sources(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        free(ops_test_write_cluster(e, "one/alpha.yaml", "alpha", 1));
        free(ops_test_write_cluster(e, "one/shared.yaml", "shared", 1));
        free(ops_test_write_cluster(e, "two/beta.yaml", "beta", 1));
        free(ops_test_write_cluster(e, "two/shared.yaml", "shared", 1));
        free(ops_test_write_cluster(e, "three/gamma.yaml", "gamma", 1));
        _cleanup_free_ char *text = xasprintf("interval: 1s\n"
                                              "log: {level: info}\n"
                                              "sources:\n"
                                              "  - name: one\n"
                                              "    url: %s/one\n"
                                              "  - name: two\n"
                                              "    url: %s/two\n",
                                              e->root, e->root);
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml", text);
        const char *args[] = {"run", "--config", cfg, NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        assert_true(e2e_wait_ready(e, "beta", 1, 60));
        assert_true(ops_test_wait_log(e, "daemon.log",
                                      "default/shared: defined by two sources, one and two", 30));
        /* The conflict is refused for that cluster only: no member was started for it. */
        assert_true(e2e_member_pid(e, "alpha", "alpha-0") > 0);
        assert_int_equal(e2e_member_pid(e, "shared", "shared-0"), 0);
        assert_int_equal(e2e_audit_count(e, "shared", "cluster.conflict"), 1);
        /* Neither source orphans the other's clusters. */
        assert_int_equal(e2e_audit_count(e, "alpha", "cluster.orphaned"), 0);
        assert_int_equal(e2e_audit_count(e, "beta", "cluster.orphaned"), 0);

        /* SIGHUP with a broken file: reported, the settings in force stay. */
        _cleanup_free_ char *bad = xasprintf("%ssources: [\n", text);
        free(ops_test_write(e, "gitcd.yaml", bad));
        assert_int_equal(kill(d, SIGHUP), 0);
        assert_true(ops_test_wait_log(
            e, "daemon.log", "is invalid; the configuration in force stays unchanged", 30));
        _cleanup_free_ char *where = xasprintf("%s:", cfg);
        _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
        assert_non_null(strstr(log, where));
        assert_int_equal(waitpid(d, NULL, WNOHANG), 0);

        /* A valid file whose new source cannot be opened: the settings in force stay. */
        _cleanup_free_ char *unopenable =
            xasprintf("%s  - name: gone\n    url: %s/does-not-exist\n", text, e->root);
        free(ops_test_write(e, "gitcd.yaml", unopenable));
        assert_int_equal(kill(d, SIGHUP), 0);
        assert_true(ops_test_wait_log(e, "daemon.log", "cannot be put in force", 30));
        assert_int_equal(waitpid(d, NULL, WNOHANG), 0);
        assert_true(e2e_wait_ready(e, "alpha", 1, 30));

        /* A good file with a third source: taken in without a restart. */
        _cleanup_free_ char *good =
            xasprintf("%s  - name: three\n    url: %s/three\n", text, e->root);
        free(ops_test_write(e, "gitcd.yaml", good));
        assert_int_equal(kill(d, SIGHUP), 0);
        assert_true(e2e_wait_ready(e, "gamma", 1, 60));
        assert_true(e2e_wait_ready(e, "alpha", 1, 10));

        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

/* --source on the command line replaces the file's sources; --state wins over the file's. */
static void test_flags_override(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        _cleanup_free_ char *text = xasprintf("state: /nonexistent/dir/state.db\n"
                                              "sources:\n"
                                              "  - name: elsewhere\n"
                                              "    url: /nonexistent/source\n");
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml", text);
        _cleanup_free_ char *st = xasprintf("%s/state.db", e->state_dir);
        const char *args[] = {
            "run", "--config",           cfg,  "--source",  e->source, "--state", st, "--interval",
            "1s",  "--observe-interval", "5s", "--workers", "2",       NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

/*
 * A token or key file that other users can read (0644) is refused when
 * gitcd run starts, naming the file and the chmod that fixes it; with
 * 0600 the same settings start.
 */
static void test_secret_file_modes(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        _cleanup_free_ char *tok = ops_test_write(e, "listen.token", "tok-never-printed\n");
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", harness_free_port());
        const char *args[] = {
            "run", "--source", e->source, "--listen", listen, "--listen-token-file", tok, NULL};
        char *err = NULL;
        assert_int_equal(e2e_runv(e, NULL, &err, args), 1);
        char *want =
            xasprintf("the token file %s can be read or changed by other users (mode 0644): run "
                      "`chmod 600 '%s'`",
                      tok, tok);
        if (!strstr(err, want))
                fail_msg("unexpected output: %s", err);
        assert_null(strstr(err, "tok-never-printed"));
        free(err);

        /* a source's HTTPS token file */
        char *text = xasprintf("sources:\n"
                               "  - name: a\n"
                               "    url: https://git.example.org/a.git\n"
                               "    credentials:\n"
                               "      tokenFile: %s\n",
                               tok);
        char *cfg = ops_test_write(e, "gitcd.yaml", text);
        const char *args2[] = {"run", "--config", cfg, NULL};
        assert_int_equal(e2e_runv(e, NULL, &err, args2), 1);
        if (!strstr(err, "chmod 600") || !strstr(err, tok))
                fail_msg("unexpected output: %s", err);
        free(err);

        /* a webhook's secret file, read only when a notification is sent: checked at start */
        _cleanup_free_ char *secret = ops_test_write(e, "hook.secret", "hmac-never-printed\n");
        free(text);
        text = xasprintf("sources:\n"
                         "  - name: a\n"
                         "    url: %s\n"
                         "notifications:\n"
                         "  webhooks:\n"
                         "    - name: hook\n"
                         "      url: https://hooks.example.org/in\n"
                         "      secretFile: %s\n",
                         e->source, secret);
        free(cfg);
        cfg = ops_test_write(e, "gitcd.yaml", text);
        const char *args3[] = {"run", "--config", cfg, NULL};
        assert_int_equal(e2e_runv(e, NULL, &err, args3), 1);
        free(want);
        want = xasprintf("the secret file %s can be read or changed by other users (mode 0644)",
                         secret);
        if (!strstr(err, want) || strstr(err, "hmac-never-printed"))
                fail_msg("unexpected output: %s", err);
        free(err);

        /* 0600: the daemon starts and serves with that token */
        assert_int_equal(chmod(tok, 0600), 0);
        pid_t d = e2e_start(e, args, "daemon.log");
        assert_true(ops_test_wait_log(e, "daemon.log", "with a bearer token", 60));
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        free(want);
        free(text);
        free(cfg);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bad_file),          cmocka_unit_test(test_hosts_settings),
            cmocka_unit_test(test_snapshot_image),    cmocka_unit_test(test_flags_override),
            cmocka_unit_test(test_two_sources),       cmocka_unit_test(test_secret_file_modes),
            cmocka_unit_test(test_source_kubernetes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

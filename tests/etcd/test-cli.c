/*
 * `gitcd etcd ...` as a user runs it: the built gitcd executable
 * ($GITCD_BIN) against a one-member etcd 3.5 cluster. Checks what a person
 * or a script sees: JSON that parses, etcdctl-like text, exit statuses
 * (0, 1 for a failed call, 64 for bad usage) and error messages that name
 * the problem without ever showing the password. A cluster recorded in a
 * state store is reached with only the daemon's configuration file given
 * (`etcd --cluster` and `snapshot save --config`).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/spec.h"
#include "state/state.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static harness_cluster *cluster;
static const char *gitcd_bin;
static char *tmp;

struct run {
        int status;
        char *out;
        char *err;
};

static void run_release(struct run *r)
{
        free(r->out);
        free(r->err);
}

/* Run gitcd with the given arguments (NULL-terminated), capturing both streams. */
static struct run run_gitcd(const char *first, ...)
{
        const char *argv[32] = {gitcd_bin, first};
        size_t n = 2;
        va_list ap;
        va_start(ap, first);
        const char *a;
        while ((a = va_arg(ap, const char *)) && n < ARRAY_SIZE(argv) - 1)
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;

        char *out_path = xasprintf("%s/out", tmp), *err_path = xasprintf("%s/err", tmp);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (o < 0 || e < 0)
                        _exit(127);
                dup2(o, 1);
                dup2(e, 2);
                execv(gitcd_bin, (char **)argv);
                _exit(127);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        struct run r = {.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128};
        size_t len;
        assert_int_equal(read_file(out_path, 1 << 24, &r.out, &len), 0);
        assert_int_equal(read_file(err_path, 1 << 24, &r.err, &len), 0);
        free(out_path);
        free(err_path);
        return r;
}

static int setup(void **state)
{
        gitcd_bin = getenv("GITCD_BIN");
        if (isempty(gitcd_bin))
                return -1;
        harness_opts o = {.version = "3.5.16", .members = 1};
        if (harness_cluster_start(&o, &cluster) < 0)
                return -1;
        tmp = harness_tmpdir("etcd-cli");
        return 0;
}

static int teardown(void **state)
{
        harness_cluster_free(cluster);
        free(tmp);
        return 0;
}

static void test_member_list_json(void **state)
{
        /* the member publishes its client URLs through raft just after start-up */
        struct run r;
        int64_t until = now_mono_ms() + 20000;
        for (;;) {
                r = run_gitcd("etcd", "member", "list", "-o", "json", "--endpoints",
                              cluster->endpoints, NULL);
                assert_int_equal(r.status, 0);
                if (!strstr(r.out, "\"clientURLs\": []") || now_mono_ms() > until)
                        break;
                run_release(&r);
                usleep(100 * 1000);
        }
        json_error_t jerr;
        json_t *j = json_loads(r.out, 0, &jerr);
        assert_non_null(j);
        json_t *members = json_object_get(j, "members");
        assert_int_equal(json_array_size(members), 1);
        json_t *m = json_array_get(members, 0);
        assert_string_equal(json_string_value(json_object_get(m, "name")), "m0");
        const char *id = json_string_value(json_object_get(m, "id"));
        assert_non_null(id);
        assert_true(strspn(id, "0123456789abcdef") == strlen(id));
        assert_false(json_is_true(json_object_get(m, "isLearner")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(m, "clientURLs"), 0)),
                            cluster->members[0].client_url);
        json_decref(j);
        run_release(&r);

        /* the table names the same member */
        r = run_gitcd("etcd", "--endpoints", cluster->endpoints, "member", "list", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "IS LEARNER"));
        assert_non_null(strstr(r.out, cluster->members[0].peer_url));
        run_release(&r);
}

static void test_put_get(void **state)
{
        struct run r = run_gitcd("etcd", "--endpoints", cluster->endpoints, "put", "/cli/k",
                                 "hello world", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "OK\n");
        run_release(&r);

        r = run_gitcd("etcd", "get", "/cli/k", "--endpoints", cluster->endpoints, NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "/cli/k\nhello world\n");
        run_release(&r);

        r = run_gitcd("etcd", "get", "/cli/", "--prefix", "-o", "json", "--endpoints",
                      cluster->endpoints, NULL);
        assert_int_equal(r.status, 0);
        json_t *j = json_loads(r.out, 0, NULL);
        assert_non_null(j);
        json_t *first = json_array_get(json_object_get(j, "kvs"), 0);
        assert_string_equal(json_string_value(json_object_get(first, "value")), "hello world");
        json_decref(j);
        run_release(&r);
}

static void test_status(void **state)
{
        struct run r =
            run_gitcd("etcd", "status", "-o", "json", "--endpoints", cluster->endpoints, NULL);
        assert_int_equal(r.status, 0);
        json_t *j = json_loads(r.out, 0, NULL);
        assert_non_null(j);
        json_t *s = json_array_get(j, 0);
        assert_string_equal(json_string_value(json_object_get(s, "version")), "3.5.16");
        assert_true(json_is_true(json_object_get(s, "isLeader")));
        assert_true(json_integer_value(json_object_get(s, "dbSize")) > 0);
        json_decref(j);
        run_release(&r);
}

static void test_snapshot_save(void **state)
{
        char *path = xasprintf("%s/cli-snap.db", tmp);
        struct run r =
            run_gitcd("etcd", "snapshot", "save", path, "--endpoints", cluster->endpoints, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "sha256 verified"));
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_true(st.st_size > 0);
        run_release(&r);
        char *cmd =
            xasprintf("'%s' snapshot status '%s' >/dev/null 2>&1", cluster->etcdutl_bin, path);
        assert_int_equal(system(cmd), 0);
        free(cmd);
        free(path);
}

static void test_errors(void **state)
{
        char *dead = xasprintf("http://127.0.0.1:%d", harness_free_port());
        struct run r = run_gitcd("etcd", "--endpoints", dead, "--timeout", "2s", "--user",
                                 "root:top-secret-pw", "member", "list", NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "cannot connect"));
        assert_non_null(strstr(r.err, dead));
        assert_null(strstr(r.err, "top-secret-pw"));
        assert_null(strstr(r.out, "top-secret-pw"));
        run_release(&r);
        free(dead);

        /* an etcd error: exit 1 with etcd's reason */
        r = run_gitcd("etcd", "--endpoints", cluster->endpoints, "member", "remove",
                      "abcdef0123456789", NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "member not found"));
        run_release(&r);

        /* bad usage: 64, and nothing is done */
        r = run_gitcd("etcd", "--endpoints", cluster->endpoints, "member", "remove", "not-hex",
                      NULL);
        assert_int_equal(r.status, 64);
        assert_non_null(strstr(r.err, "not a member ID"));
        run_release(&r);
        r = run_gitcd("etcd", "frobnicate", NULL);
        assert_int_equal(r.status, 64);
        run_release(&r);
        r = run_gitcd("etcd", "member", "add", "m9", NULL);
        assert_int_equal(r.status, 64);
        assert_non_null(strstr(r.err, "--peer-urls"));
        run_release(&r);
        r = run_gitcd("etcd", "-o", "yaml", "status", NULL);
        assert_int_equal(r.status, 64);
        run_release(&r);
        r = run_gitcd("etcd", "--user", "root", "status", NULL);
        assert_int_equal(r.status, 64);
        assert_non_null(strstr(r.err, "GITCD_ETCD_PASSWORD"));
        run_release(&r);

        /* --cluster takes what gitcd recorded, never beside explicit connection flags */
        r = run_gitcd("etcd", "--cluster", "default/x", "--endpoints", cluster->endpoints, "status",
                      NULL);
        assert_int_equal(r.status, 64);
        assert_non_null(strstr(r.err, "not with --endpoints"));
        run_release(&r);
        r = run_gitcd("etcd", "--target", "local", "status", NULL);
        assert_int_equal(r.status, 64);
        assert_non_null(strstr(r.err, "go with --cluster"));
        run_release(&r);
        char *empty = xasprintf("/tmp/gitcd-cli-state-%d", (int)getpid());
        char *db = xasprintf("%s/state.db", empty);
        assert_int_equal(mkdir_p(empty, 0700), 0);
        r = run_gitcd("etcd", "--cluster", "default/nowhere", "--state", db, "status", NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "nothing has been applied"));
        run_release(&r);
        (void)rm_rf(empty);
        free(db);
        free(empty);

        r = run_gitcd("etcd", "--help", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "move-leader"));
        run_release(&r);
}

/*
 * default/rec recorded on the local target with the harness's member, in a
 * state store only the daemon's configuration file names; the file's path.
 */
static char *record_with_config(void)
{
        const char *yaml = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                           "metadata:\n  name: rec\nspec:\n  replicas: 1\n"
                           "  version: \"3.5.16\"\n";
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("rec.yaml", yaml, strlen(yaml), &set, &d), 0);
        json_t *j = spec_to_json(set.items[0]);
        _cleanup_free_ char *json = json_dumps(j, JSON_COMPACT);
        _cleanup_free_ char *db_path = xasprintf("%s/daemon/state.db", tmp);
        state_db *db = NULL;
        assert_int_equal(state_open(db_path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_true(state_cluster_set_desired(db, "default/rec", json, NULL, NULL, 1000) >= 0);
        assert_int_equal(state_cluster_set_target(db, "default/rec", "local"), 0);
        state_member m = {.cluster = "default/rec",
                          .name = "rec-0",
                          .client_url = cluster->members[0].client_url,
                          .peer_url = cluster->members[0].peer_url};
        assert_int_equal(state_member_put(db, &m, 1000), 0);
        state_close(db);
        json_decref(j);
        cluster_set_release(&set);
        diag_list_release(&d);

        /* etcd's tool only through the file's etcdDir (a link to the real folder) */
        _cleanup_free_ char *etcd_dir = xasprintf("%s/etcd-of-the-file", tmp);
        _cleanup_free_ char *real = harness_etcd_dir();
        assert_int_equal(symlink(real, etcd_dir), 0);
        char *cfg = xasprintf("%s/gitcd.yaml", tmp);
        _cleanup_free_ char *text = xasprintf("state: %s\n"
                                              "etcdDir: %s\n"
                                              "kubernetes:\n"
                                              "  kubeconfig: /nonexistent/kubeconfig\n"
                                              "sources:\n"
                                              "  - name: platform\n"
                                              "    url: /srv/git/platform.git\n",
                                              db_path, etcd_dir);
        assert_int_equal(write_file_atomic(cfg, text, strlen(text), 0600), 0);
        return cfg;
}

static void test_recorded_cluster_from_config(void **state)
{
        _cleanup_free_ char *cfg = record_with_config();
        _cleanup_free_ char *home = xstrdup(getenv("HOME") ? getenv("HOME") : "/");
        _cleanup_free_ char *etcd_dir =
            getenv("GITCD_ETCD_DIR") ? xstrdup(getenv("GITCD_ETCD_DIR")) : NULL;
        /* neither $GITCD_STATE_DIR nor the default folders hold anything for gitcd */
        unsetenv("GITCD_STATE_DIR");
        setenv("HOME", tmp, 1);
        setenv("GITCD_ETCD_DIR", "/nonexistent", 1);

        struct run r = run_gitcd("etcd", "--cluster", "default/rec", "--config", cfg, "-o", "json",
                                 "member", "list", NULL);
        if (r.status != 0)
                fail_msg("etcd --cluster --config: exit %d: %s", r.status, r.err);
        json_t *j = json_loads(r.out, 0, NULL);
        assert_non_null(j);
        assert_int_equal(json_array_size(json_object_get(j, "members")), 1);
        json_decref(j);
        run_release(&r);

        _cleanup_free_ char *to = xasprintf("%s/saved", tmp);
        r = run_gitcd("snapshot", "save", "default/rec", "--to", to, "--config", cfg, NULL);
        if (r.status != 0)
                fail_msg("snapshot save --config: exit %d: %s", r.status, r.err);
        assert_non_null(strstr(r.out, "snapshot 1 of default/rec"));
        assert_non_null(strstr(r.out, "stored at"));
        assert_non_null(strstr(r.out, to));
        run_release(&r);
        r = run_gitcd("snapshot", "list", "--config", cfg, "default/rec", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "succeeded"));
        run_release(&r);

        setenv("HOME", home, 1);
        if (etcd_dir)
                setenv("GITCD_ETCD_DIR", etcd_dir, 1);
        else
                unsetenv("GITCD_ETCD_DIR");
}

int main(void)
{
        if (!harness_have_etcd("3.5.16")) {
                fprintf(stderr, "etcd 3.5.16 is not installed\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_member_list_json),
            cmocka_unit_test(test_put_get),
            cmocka_unit_test(test_status),
            cmocka_unit_test(test_snapshot_save),
            cmocka_unit_test(test_errors),
            cmocka_unit_test(test_recorded_cluster_from_config),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

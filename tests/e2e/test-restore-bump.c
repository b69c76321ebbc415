/*
 * Restores that Kubernetes can follow, end to end through the real binary
 * on the local target with real etcd:
 *
 *  1. etcd 3.5.16, spec.role kubernetes-control-plane, one member: keys, a
 *     snapshot with `gitcd snapshot save`, 500 writes more (revision R);
 *     the member's data lost; `gitcd recover --from-snapshot` restores
 *     with the default bump (auto: 1,000,000,000), recorded in `gitcd
 *     status`. A watch started afterwards at revision R (what an informer
 *     that saw R asks for) ends with etcd's "required revision has been
 *     compacted" instead of waiting for revisions that never come, a read
 *     at R is refused the same way, and the store revision is the
 *     snapshot's plus the bump;
 *  2. the same cluster losing its data again, gitcd killed once the new
 *     seed is recorded and before it is restored, and the member's old
 *     data folder (from before the first restore) put back by hand where
 *     the seed's data goes: the recovery fails naming that revision and
 *     the restore's, no etcd starts on it; the folder moved away, the
 *     recovery asked again succeeds;
 *  3. etcd 3.4.23, whose etcdctl cannot bump (the real tools are asked:
 *     3.4.23's restore has no --bump-revision, 3.5.16's etcdutl has):
 *     `gitcd recover --bump-revision` is refused before anything is
 *     recorded, naming 3.4.27.
 *
 * Every wait has a generous deadline; the watch is given a minute to end
 * and fails the test if it is still waiting then.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NAME "api"

static void write_cluster(e2e *e, const char *name, const char *version, const char *role)
{
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "spec:\n"
                                              "  replicas: 1\n"
                                              "  version: \"%s\"\n"
                                              "  role: %s\n",
                                              name, version, role);
        e2e_write_file(e, file, text);
}

/*
 * Run argv (an etcd tool) with output in one file, for at most timeout_s:
 * its exit status, or -1 when it was still running then (killed).
 */
static int run_tool(const char *const *argv, int timeout_s, char **ret_output)
{
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-e2e-tool");
        _cleanup_free_ char *path = path_join(dir, "out");
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(126);
                setenv("ETCDCTL_API", "3", 1);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        int status = 0, r = 0;
        int64_t deadline = now_mono_ms() + (int64_t)timeout_s * 1000;
        while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_mono_ms() < deadline)
                msleep(100);
        if (r == 0) {
                kill(pid, SIGKILL);
                (void)waitpid(pid, &status, 0);
        }
        size_t len = 0;
        if (read_file(path, 1 << 20, ret_output, &len) < 0)
                *ret_output = xstrdup("");
        (void)rm_rf(dir);
        if (r == 0)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* `gitcd snapshot save` into <root>/backups; the record's id and revision. */
static int64_t save_snapshot(e2e *e, const char *name, int64_t *ret_revision)
{
        _cleanup_free_ char *folder = path_join(e->root, "backups");
        _cleanup_free_ char *id = xasprintf("default/%s", name);
        char *out = NULL, *err = NULL;
        const char *const args[] = {"snapshot", "save", id, "--to", folder, NULL};
        int k = e2e_runv(e, &out, &err, args);
        if (k != 0)
                fail_msg("snapshot save exited %d: %s%s", k, out, err);
        free(out);
        free(err);
        out = NULL;
        assert_int_equal(e2e_run(e, &out, "snapshot", "list", id, "-o", "json", NULL), 0);
        json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        free(out);
        assert_non_null(j);
        int64_t snap = json_integer_value(json_object_get(j, "id"));
        *ret_revision = json_integer_value(json_object_get(j, "revision"));
        json_decref(j);
        assert_true(snap > 0 && *ret_revision > 0);
        return snap;
}

/* n puts of k/<i>; the revision of the last. */
static int64_t put_keys(e2e *e, const char *name, int from, int n)
{
        etcd_client *c = e2e_client(e, name);
        int64_t rev = 0;
        for (int i = from; i < from + n; i++) {
                char key[32];
                snprintf(key, sizeof(key), "k/%06d", i);
                if (etcd_put(c, key, "v", 1, &rev) < 0)
                        fail_msg("put %s: %s", key, etcd_client_last_error(c));
        }
        etcd_client_free(c);
        return rev;
}

/* The member's data gone (its process killed); the folder is moved to keep, when not NULL. */
static void lose_data(e2e *e, const char *name, const char *member, const char *keep)
{
        pid_t pid = e2e_member_pid(e, name, member);
        if (pid > 0)
                kill(pid, SIGKILL);
        for (int i = 0; i < 100 && pid > 0 && kill(pid, 0) == 0; i++)
                msleep(20);
        _cleanup_free_ char *dir = e2e_member_dir(e, name, member);
        _cleanup_free_ char *data = path_join(dir, "data");
        if (keep)
                assert_int_equal(rename(data, keep), 0);
        else
                assert_int_equal(rm_rf(data), 0);
}

static json_t *newest(json_t *status, const char *key)
{
        return json_array_get(json_object_get(status, key), 0);
}

static char *tool(const char *version, const char *binary)
{
        char *path = harness_etcd_path(version, binary);
        assert_non_null(path);
        return path;
}

/* A watch, and a read, from revision seen: compacted, at once, not a wait. */
static void assert_compacted_at(e2e *e, int64_t seen)
{
        int k;
        _cleanup_free_ char *eps = e2e_endpoints(e, NAME);
        _cleanup_free_ char *etcdctl = tool("3.5.16", "etcdctl");
        _cleanup_free_ char *ep = xasprintf("--endpoints=%s", eps);
        _cleanup_free_ char *rev = xasprintf("--rev=%lld", (long long)seen);
        const char *const watch[] = {etcdctl, ep, "watch", rev, "--prefix", "k/", NULL};
        char *said = NULL;
        k = run_tool(watch, 60, &said);
        if (k == -1)
                fail_msg("the watch at revision %lld still waits after a minute:\n%s",
                         (long long)seen, said);
        if (k == 0 || !strstr(said, "required revision has been compacted"))
                fail_msg("the watch at revision %lld ended with %d:\n%s", (long long)seen, k, said);
        free(said);
        const char *const get[] = {etcdctl, ep, "get", rev, "k/000001", NULL};
        k = run_tool(get, 60, &said);
        if (k <= 0 || !strstr(said, "required revision has been compacted"))
                fail_msg("a read at revision %lld gave %d:\n%s", (long long)seen, k, said);
        free(said);
}

static void test_watch_after_bumped_recovery(void **unused)
{
        (void)unused;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        write_cluster(e, NAME, "3.5.16", "kubernetes-control-plane");
        assert_int_equal(e2e_apply(e, NULL, 90), 0);
        put_keys(e, NAME, 0, 20);
        int64_t snap_rev = 0;
        int64_t snap = save_snapshot(e, NAME, &snap_rev);
        /* what a Kubernetes API server's watchers saw before the data was lost */
        int64_t seen = put_keys(e, NAME, 20, 500);
        assert_true(seen >= snap_rev + 500);
        _cleanup_free_ char *old_data = path_join(e->root, "api-0-data-before");
        lose_data(e, NAME, "api-0", old_data);

        _cleanup_free_ char *id = xasprintf("%lld", (long long)snap);
        const char *const rec[] = {
            "recover", "default/" NAME, "--from-snapshot", id, "--timeout", "120s", NULL};
        char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, rec);
        if (k != 0)
                fail_msg("gitcd recover exited %d:\n%s\n%s", k, out, err);
        assert_non_null(strstr(out, "bumped by 1000000000"));
        free(out);
        free(err);

        /* recorded: the default bump of the role, sized auto */
        json_t *st = e2e_status(e, NAME);
        json_t *r = newest(st, "restores");
        assert_non_null(r);
        assert_string_equal(json_string_value(json_object_get(r, "origin")), "recovery");
        int64_t bump = json_integer_value(json_object_get(r, "bump"));
        assert_int_equal(bump, 1000000000);
        assert_int_equal(json_integer_value(json_object_get(r, "snapshot_revision")), snap_rev);
        assert_int_equal(json_integer_value(json_object_get(r, "revision")), snap_rev + bump);
        assert_non_null(strstr(json_string_value(json_object_get(r, "sizing")),
                               "the default of spec.role kubernetes-control-plane"));
        json_decref(st);
        out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", "default/" NAME, NULL), 0);
        if (!strstr(out, "Restores:") || !strstr(out, "1000000000"))
                fail_msg("gitcd status shows no restore:\n%s", out);
        free(out);

        /* a watch from the revision the watchers had: compacted, at once, not a wait */
        assert_compacted_at(e, seen);

        /* the store goes on from the bumped revision, with the snapshot's keys */
        etcd_client *c = e2e_client(e, NAME);
        int64_t now_rev = 0;
        assert_int_equal(etcd_put(c, "after", "1", 1, &now_rev), 0);
        assert_true(now_rev > snap_rev + bump);
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, "k/", true, &l), 0);
        assert_int_equal(l->n, 20);
        etcd_kv_list_free(l);
        etcd_client_free(c);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.restored"), 1);

        /*
         * 2. The data lost again; gitcd killed once the new seed is recorded,
         * before it is restored; the member's folder from before the first
         * restore put back by hand where the seed's data goes.
         */
        lose_data(e, NAME, "api-1", NULL);
        const char *const rec2[] = {
            "recover", "default/" NAME, "--from-snapshot", id, "--timeout", "120s", NULL};
        k = e2e_runv_failpoint(e, "recovery.seed.before-restore", NULL, NULL, rec2);
        /* its revision is past the snapshot's: only the bump tells it from restored data */
        assert_int_equal(k, 128 + SIGKILL);
        _cleanup_free_ char *seed_dir = e2e_member_dir(e, NAME, "api-2");
        _cleanup_free_ char *seed_data = path_join(seed_dir, "data");
        assert_int_equal(mkdir_p(seed_dir, 0700), 0);
        (void)rm_rf(seed_data);
        assert_int_equal(rename(old_data, seed_data), 0);
        assert_int_not_equal(e2e_apply(e, NULL, 30), 0);
        st = e2e_status(e, NAME);
        r = newest(st, "recoveries");
        assert_string_equal(json_string_value(json_object_get(r, "result")), "failed");
        /* the database of a killed etcd may lag its write-ahead log: at most what was seen */
        const char *why = json_string_value(json_object_get(r, "error"));
        long long at = 0;
        const char *p = why ? strstr(why, "member api-2 holds data at revision ") : NULL;
        if (!p || sscanf(p, "member api-2 holds data at revision %lld", &at) != 1 ||
            !strstr(why, "older than the restore it was made for") || at <= snap_rev || at > seen)
                fail_msg("the recovery failed for another reason: %s", why);
        json_decref(st);
        assert_int_equal(e2e_member_pid(e, NAME, "api-2"), 0);
        assert_true(e2e_audit_count(e, NAME, "member.refused") >= 1);

        /* moved away by the person: asked again, the recovery succeeds */
        assert_int_equal(rm_rf(seed_data), 0);
        out = err = NULL;
        k = e2e_runv(e, &out, &err, rec);
        if (k != 0)
                fail_msg("gitcd recover (again) exited %d:\n%s\n%s", k, out, err);
        free(out);
        free(err);
        c = e2e_client(e, NAME);
        assert_int_equal(etcd_get(c, "k/", true, &l), 0);
        assert_int_equal(l->n, 20);
        assert_true(l->revision > snap_rev + bump);
        etcd_kv_list_free(l);
        etcd_client_free(c);
        e2e_free(e);
}

static void test_34_cannot_bump(void **unused)
{
        (void)unused;
        if (!e2e_have_version("3.4.23") || !e2e_have_version("3.5.16"))
                skip();
        /* the rule in api/versions.c agrees with the real tools */
        char *said = NULL;
        _cleanup_free_ char *ctl34 = tool("3.4.23", "etcdctl");
        const char *const help34[] = {ctl34, "snapshot", "restore", "--help", NULL};
        assert_int_equal(run_tool(help34, 60, &said), 0);
        assert_non_null(strstr(said, "--initial-cluster-token"));
        assert_null(strstr(said, "bump-revision"));
        free(said);
        _cleanup_free_ char *utl35 = tool("3.5.16", "etcdutl");
        const char *const help35[] = {utl35, "snapshot", "restore", "--help", NULL};
        assert_int_equal(run_tool(help35, 60, &said), 0);
        assert_non_null(strstr(said, "--bump-revision"));
        assert_non_null(strstr(said, "--mark-compacted"));
        free(said);

        e2e *e = e2e_new();
        write_cluster(e, "old", "3.4.23", "general");
        assert_int_equal(e2e_apply(e, NULL, 90), 0);
        put_keys(e, "old", 0, 10);
        int64_t snap_rev = 0;
        int64_t snap = save_snapshot(e, "old", &snap_rev);
        lose_data(e, "old", "old-0", NULL);
        _cleanup_free_ char *id = xasprintf("%lld", (long long)snap);
        const char *const rec[] = {"recover",         "default/old", "--from-snapshot", id,
                                   "--bump-revision", "1000",        "--no-wait",       NULL};
        char *out = NULL, *err = NULL;
        assert_int_equal(e2e_runv(e, &out, &err, rec), 1);
        if (!strstr(err, "etcd 3.4.23 cannot bump the revision of a restore") ||
            !strstr(err, "3.4.27"))
                fail_msg("gitcd recover said:\n%s%s", out, err);
        free(out);
        free(err);
        /* nothing recorded */
        json_t *st = e2e_status(e, "old");
        assert_int_equal(json_array_size(json_object_get(st, "recoveries")), 0);
        json_decref(st);

        /* written in the spec: refused at the field, the cluster left as it is */
        e2e_write_file(e, "old.yaml",
                       "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                       "  name: old\nspec:\n  replicas: 1\n  version: \"3.4.23\"\n"
                       "  recovery:\n    from: {snapshot: 1}\n    token: t1\n"
                       "    bumpRevision: auto\n");
        out = err = NULL;
        const char *const apply[] = {"apply", "--source", e->source, "--timeout", "20s", NULL};
        assert_int_not_equal(e2e_runv(e, &out, &err, apply), 0);
        if (!strstr(err, "old.yaml:11:19: error: spec.recovery.bumpRevision: etcd 3.4.23 cannot "
                         "bump the revision of a restore"))
                fail_msg("gitcd apply said:\n%s%s", out, err);
        free(out);
        free(err);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_watch_after_bumped_recovery),
            cmocka_unit_test(test_34_cannot_bump),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

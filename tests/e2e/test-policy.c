/*
 * The operator's policy end to end, with the real gitcd binary, a real Git
 * repository whose commits the real git signs with keys the real
 * ssh-keygen made, real SQLite and real etcd on the local target.
 *
 * The policy allows the namespace default only, snapshot folders on the
 * gitcd host under root/snaps only, and needs two distinct trusted signers
 * for a scale-down. A commit that defines a cluster in another namespace
 * gets that cluster refused, alone: the policy's line (gitcd.yaml:L:C) in
 * apply's errors and in plan, an audit event, a verdict in status; so is a
 * cluster whose snapshots would go to a folder outside root/snaps; the
 * revision's other clusters are created. A commit
 * signed by alice that scales a 3-member cluster down to 1 is held (its
 * members stay, plan and status say "waiting for 1 more approval
 * (scaleDown needs 2 distinct signers, has 1: alice@example.org)",
 * audited once for that head however often apply runs), while the same
 * commit's change to another cluster is applied; bob's empty signed commit
 * on top approves it and the next apply scales the cluster down. The
 * removal of a cluster under clusterDeletion is held the same way: the
 * cluster stays managed, not orphaned, until the second signer.
 *
 * A recovery approved end to end, under `recovery: 2`: a 3-member cluster
 * under a writer loses quorum (two members' processes killed and their
 * data deleted); alice's commit asks for spec.recovery from the survivor
 * and, in the same commit, scales another cluster of the source up. The
 * recovery is held (plan, status "waiting for 1 more approval (recovery
 * needs 2 ...)", spec.held audited once) and nothing is recovered, while
 * `gitcd run` scales the other cluster up; bob's empty signed commit on
 * top lets `gitcd apply` carry the recovery out: three voters again, the
 * survivor's member ID kept, every acknowledged write it held kept.
 *
 * And the daemon: `gitcd run --config` refuses a cluster outside the
 * policy's namespaces, and takes it in once the file allows it and SIGHUP
 * reads it again.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define VERSION "3.5.16"

static char *keys, *allowed, *config;

#define assert_contains(s, sub)                                                                    \
        do {                                                                                       \
                if (!strstr((s), (sub)))                                                           \
                        fail_msg("expected \"%s\" in:\n%s", (sub), (s));                           \
        } while (0)

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *cmd = xvasprintf(fmt, ap);
        va_end(ap);
        int st = system(cmd);
        return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Commit the source folder as it is (or nothing), signed with key. */
static void commit(e2e *e, const char *key, const char *message)
{
        assert_int_equal(sh("cd '%s' && git add -A && git -c gpg.format=ssh -c "
                            "user.signingkey='%s/%s' commit -q --allow-empty -S -m '%s'",
                            e->source, keys, key, message),
                         0);
}

static const char *cluster_yaml(const char *ns, const char *name, int replicas,
                                const char *extra_metadata)
{
        static char buf[512];
        snprintf(buf, sizeof(buf),
                 "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: %s\n"
                 "  namespace: %s\n%sspec:\n  replicas: %d\n  version: \"" VERSION "\"\n",
                 name, ns, extra_metadata ? extra_metadata : "", replicas);
        return buf;
}

/* gitcd <cmd> --source S --config <policy> --verify-signatures ...; exit status, stderr. */
static int gitcd(e2e *e, const char *cmd, char **ret_out, char **ret_err)
{
        const char *args[] = {cmd,
                              "--source",
                              e->source,
                              "--config",
                              config,
                              "--verify-signatures",
                              "--allowed-signers",
                              allowed,
                              streq(cmd, "apply") ? "--timeout" : NULL,
                              "180s",
                              NULL};
        return e2e_runv(e, ret_out, ret_err, args);
}

/* Events of action on cluster ("ns/name") in the audit log. */
static int audited(e2e *e, const char *cluster, const char *action)
{
        _cleanup_free_ char *out = NULL;
        assert_int_equal(
            e2e_run(e, &out, "log", "-o", "json", "--cluster", cluster, "--action", action, NULL),
            0);
        int n = 0;
        for (const char *p = out; (p = strchr(p, '\n')); p++)
                n++;
        return n;
}

/* The verdict `gitcd status -o json` shows for cluster ("ns/name"), or NULL. */
static char *verdict(e2e *e, const char *cluster)
{
        _cleanup_free_ char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", "-o", "json", cluster, NULL), 0);
        json_t *j = json_loads(out, 0, NULL);
        assert_non_null(j);
        json_t *v = json_array_get(json_object_get(j, "intake"), 0);
        char *text = v ? xasprintf("%s: %s", json_string_value(json_object_get(v, "verdict")),
                                   json_string_value(json_object_get(v, "message")))
                       : NULL;
        json_decref(j);
        return text;
}

/* keys/alice, keys/bob and keys/allowed_signers listing both, under root. */
static void make_signers(e2e *e)
{
        keys = path_join(e->root, "keys");
        allowed = path_join(keys, "allowed_signers");
        config = path_join(e->root, "gitcd.yaml");
        assert_int_equal(mkdir_p(keys, 0700), 0);
        assert_int_equal(sh("ssh-keygen -q -t ed25519 -N '' -f '%s/alice' && "
                            "ssh-keygen -q -t ed25519 -N '' -f '%s/bob' && "
                            "{ printf 'alice@example.org '; cat '%s/alice.pub'; "
                            "printf 'bob@example.org '; cat '%s/bob.pub'; } > '%s'",
                            keys, keys, keys, keys, allowed),
                         0);
}

static void free_signers(void)
{
        free(keys), free(allowed), free(config);
        keys = allowed = config = NULL;
}

static int setup(void **state)
{
        (void)state;
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        setenv("GIT_AUTHOR_NAME", "Alice", 1);
        setenv("GIT_AUTHOR_EMAIL", "alice@example.org", 1);
        setenv("GIT_COMMITTER_NAME", "Alice", 1);
        setenv("GIT_COMMITTER_EMAIL", "alice@example.org", 1);
        return 0;
}

/* bob approves on top: the signature covers the commit below */
static void approve_scale_down(e2e *e)
{
        char *out = NULL, *err = NULL;
        commit(e, "bob", "approve the scale-down of default/big");
        assert_int_equal(gitcd(e, "plan", &out, &err), 0);
        assert_contains(out, "~ update default/big");
        free(out), free(err), out = err = NULL;
        int k = gitcd(e, "apply", &out, &err);
        if (k != 0)
                fail_msg("apply exited %d:\n%s", k, err);
        free(out), free(err), out = err = NULL;
        assert_true(e2e_wait_ready(e, "big", 1, 60));
        etcd_members *m = e2e_members(e, "big");
        assert_int_equal(m->n, 1);
        etcd_members_free(m);
        assert_null(verdict(e, "default/big"));
        assert_int_equal(audited(e, "default/big", "spec.held"), 1);
}

/* alice removes keep: held too (it stays managed, not orphaned) until bob approves */
static void remove_keep_held(e2e *e)
{
        char *out = NULL, *err = NULL;
        _cleanup_free_ char *keep = path_join(e->source, "keep.yaml");
        assert_int_equal(unlink(keep), 0);
        commit(e, "alice", "remove keep");
        assert_int_equal(gitcd(e, "plan", &out, &err), 0);
        assert_contains(out, "? held default/keep");
        assert_contains(out, "removed from the source, waiting for 1 more approval "
                             "(clusterDeletion needs 2 distinct signers, has 1: "
                             "alice@example.org)");
        free(out), free(err), out = err = NULL;
        assert_int_equal(gitcd(e, "apply", &out, &err), 1);
        assert_contains(err, "default/keep: warning: removed from the source; held: waiting for "
                             "1 more approval");
        free(out), free(err), out = err = NULL;
        json_t *st = e2e_status(e, "keep");
        assert_string_equal(json_string_value(json_object_get(st, "phase")), "Running");
        json_decref(st);
        char *v = verdict(e, "default/keep");
        assert_non_null(v);
        assert_contains(v, "held: removal waiting for 1 more approval (clusterDeletion");
        assert_int_equal(audited(e, "default/keep", "cluster.orphaned"), 0);
        commit(e, "bob", "approve the removal of default/keep");
        assert_int_equal(gitcd(e, "apply", &out, &err), 0);
        free(out), free(err), out = err = NULL;
        st = e2e_status(e, "keep");
        assert_string_equal(json_string_value(json_object_get(st, "phase")), "Orphaned");
        json_decref(st);
        assert_int_equal(audited(e, "default/keep", "cluster.orphaned"), 1);
        assert_null(verdict(e, "default/keep"));
        free(v), v = NULL;
}

static void test_policy(void **state)
{
        (void)state;
        if (!e2e_have_version(VERSION))
                skip();
        e2e *e = e2e_new();
        make_signers(e);
        _cleanup_free_ char *policy =
            xasprintf("policy:\n"
                      "  namespaces: [default]\n"
                      "  localSnapshotRoots: [%s/snaps]\n"
                      "  approvals:\n"
                      "    scaleDown: 2\n"
                      "    clusterDeletion: 2\n"
                      "sources:\n"
                      "  - name: clusters\n"
                      "    url: %s\n"
                      "    signatures: {verify: true, allowedSigners: %s}\n",
                      e->root, e->source, allowed);
        assert_int_equal(write_file_atomic(config, policy, strlen(policy), 0644), 0);

        /* A cluster outside the namespaces: refused alone. */
        e2e_write_file(e, "keep.yaml", cluster_yaml("default", "keep", 1, NULL));
        e2e_write_file(e, "big.yaml", cluster_yaml("default", "big", 3, NULL));
        e2e_write_file(e, "out.yaml", cluster_yaml("prod", "out", 1, NULL));
        /* snapshots on the gitcd host, outside the policy's root */
        _cleanup_free_ char *far_yaml = xasprintf("%s  snapshots:\n    schedule: \"0 0 1 1 *\"\n"
                                                  "    destination:\n      local:\n"
                                                  "        path: %s/elsewhere\n",
                                                  cluster_yaml("default", "far", 1, NULL), e->root);
        e2e_write_file(e, "far.yaml", far_yaml);
        assert_int_equal(sh("cd '%s' && git init -q -b main", e->source), 0);
        commit(e, "alice", "four clusters");

        char *out = NULL, *err = NULL;
        assert_int_equal(gitcd(e, "apply", &out, &err), 1);
        assert_contains(err, "gitcd.yaml:2:3: error: policy.namespaces: prod/out (out.yaml:5:14) "
                             "is in namespace prod, which this source may not define (allowed: "
                             "default); the cluster is not taken in");
        _cleanup_free_ char *far_line = xasprintf(
            "gitcd.yaml:3:3: error: policy.localSnapshotRoots: default/far (far.yaml:13:15) "
            "writes snapshots to %s/elsewhere on the gitcd host, which is not in "
            "%s/snaps; the cluster is not taken in",
            e->root, e->root);
        assert_contains(err, far_line);
        free(out), free(err), out = err = NULL;
        assert_true(e2e_wait_ready(e, "keep", 1, 60));
        assert_true(e2e_wait_ready(e, "big", 3, 60));
        assert_int_equal(audited(e, "prod/out", "spec.refused"), 1);
        assert_int_equal(audited(e, "default/far", "spec.refused"), 1);
        _cleanup_free_ char *elsewhere = path_join(e->root, "elsewhere");
        assert_false(path_exists(elsewhere));
        _cleanup_free_ char *v = verdict(e, "prod/out");
        assert_non_null(v);
        assert_contains(v, "refused: ");
        assert_contains(v, "/gitcd.yaml:2:3: error: policy.namespaces: prod/out");
        assert_int_equal(gitcd(e, "plan", &out, &err), 1);
        assert_contains(out, "! rejected prod/out\n    ");
        assert_contains(out, "/gitcd.yaml:2:3: error: policy.namespaces: prod/out (out.yaml:5:14)");
        assert_contains(out, "! rejected default/far\n    ");
        assert_contains(out, far_line);
        free(out), free(err), out = err = NULL;

        /*
         * One commit by alice: big scales down (needs two signers), keep gets a
         * label (needs none), out.yaml and far.yaml go.
         */
        e2e_write_file(e, "big.yaml", cluster_yaml("default", "big", 1, NULL));
        e2e_write_file(e, "keep.yaml", cluster_yaml("default", "keep", 1, "  labels: {team: a}\n"));
        _cleanup_free_ char *gone = path_join(e->source, "out.yaml");
        assert_int_equal(unlink(gone), 0);
        _cleanup_free_ char *far_file = path_join(e->source, "far.yaml");
        assert_int_equal(unlink(far_file), 0);
        commit(e, "alice", "scale big down");
        static const char *const held = "waiting for 1 more approval (scaleDown needs 2 distinct "
                                        "signers, has 1: alice@example.org)";

        assert_int_equal(gitcd(e, "plan", &out, &err), 0);
        assert_contains(out, "? held default/big");
        assert_contains(out, held);
        assert_contains(out, "~ update default/keep");
        assert_contains(out, "1 held waiting for approvals");
        free(out), free(err), out = err = NULL;

        for (int round = 0; round < 2; round++) {
                assert_int_equal(gitcd(e, "apply", &out, &err), 1);
                assert_contains(err, "big.yaml:4:9: warning: default/big: held: ");
                assert_contains(err, held);
                assert_contains(err, "1 change held waiting for approvals");
                free(out), free(err), out = err = NULL;
        }
        /* audited once for this head, however often apply ran */
        assert_int_equal(audited(e, "default/big", "spec.held"), 1);
        etcd_members *m = e2e_members(e, "big");
        assert_int_equal(m->n, 3);
        etcd_members_free(m);
        free(v);
        v = verdict(e, "default/big");
        assert_non_null(v);
        assert_contains(v, "held: ");
        assert_contains(v, held);
        /* the same commit's other change was taken in */
        assert_int_equal(audited(e, "default/keep", "spec.accepted"), 2);
        free(v);
        v = verdict(e, "default/keep");
        assert_null(v);
        /* out.yaml left the source: out was never taken in, and its verdict went with it */
        assert_int_not_equal(e2e_run(e, &out, "status", "prod/out", NULL), 0);
        free(out), out = NULL;

        approve_scale_down(e);

        free(v), v = NULL;
        remove_keep_held(e);

        free_signers();
        e2e_free(e);
}

/* The member's data is gone for good: its process killed, its data folder deleted. */
static void destroy(e2e *e, const char *name, const char *member)
{
        pid_t pid = e2e_member_pid(e, name, member);
        if (pid > 0)
                kill(pid, SIGKILL);
        for (int i = 0; i < 250 && pid > 0 && kill(pid, 0) == 0; i++)
                usleep(20 * 1000);
        _cleanup_free_ char *dir = e2e_member_dir(e, name, member);
        _cleanup_free_ char *data = path_join(dir, "data");
        assert_int_equal(rm_rf(data), 0);
}

static uint64_t member_id(e2e *e, const char *name, const char *member)
{
        etcd_members *l = e2e_members(e, name);
        uint64_t id = 0;
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->members[i].name, member))
                        id = l->members[i].id;
        etcd_members_free(l);
        return id;
}

/* demo waits on its accepted spec: quorum lost, nothing recovered */
static void assert_quorum_lost_unrecovered(e2e *e)
{
        bool lost = false;
        for (int i = 0; i < 300 && !lost; i++) {
                json_t *st = e2e_status(e, "demo");
                lost = streq_ptr(json_string_value(json_object_get(st, "phase")), "QuorumLost");
                assert_int_equal(json_array_size(json_object_get(st, "recoveries")), 0);
                json_decref(st);
                if (!lost)
                        usleep(100 * 1000);
        }
        assert_true(lost);
}

static void test_recovery_approved(void **state)
{
        (void)state;
        if (!e2e_have_version(VERSION))
                skip();
        e2e *e = e2e_new();
        make_signers(e);
        _cleanup_free_ char *policy =
            xasprintf("policy:\n"
                      "  approvals:\n"
                      "    recovery: 2\n"
                      "sources:\n"
                      "  - name: clusters\n"
                      "    url: %s\n"
                      "    signatures: {verify: true, allowedSigners: %s}\n",
                      e->source, allowed);
        assert_int_equal(write_file_atomic(config, policy, strlen(policy), 0644), 0);

        /* demo (3 members) and other (1), both created from alice's commit: no approvals */
        e2e_write_file(e, "demo.yaml", cluster_yaml("default", "demo", 3, NULL));
        e2e_write_file(e, "other.yaml", cluster_yaml("default", "other", 1, NULL));
        assert_int_equal(sh("cd '%s' && git init -q -b main", e->source), 0);
        commit(e, "alice", "two clusters");
        char *out = NULL, *err = NULL;
        int k = gitcd(e, "apply", &out, &err);
        if (k != 0)
                fail_msg("apply exited %d:\n%s", k, err);
        free(out), free(err), out = err = NULL;
        e2e_assert_voters(e, "demo", 3);
        uint64_t id0 = member_id(e, "demo", "demo-0");
        assert_true(id0 != 0);

        /* demo loses quorum under a writer: two members' data deleted for good */
        _cleanup_free_ char *eps = e2e_endpoints(e, "demo");
        harness_writer *w = harness_writer_start(&(harness_writer_opts){
            .endpoints = eps, .max = 100000, .interval_ms = 5, .call_timeout_ms = 2000});
        harness_writer_wait(w, 50);
        destroy(e, "demo", "demo-1");
        destroy(e, "demo", "demo-2");
        int acked_at_loss = w->acked;

        /* alice asks for the recovery from the survivor, and scales other up, in one commit */
        static const char recovery[] = "  recovery:\n    from: {member: demo-0}\n"
                                       "    token: incident-1\n";
        _cleanup_free_ char *demo =
            xasprintf("%s%s", cluster_yaml("default", "demo", 3, NULL), recovery);
        e2e_write_file(e, "demo.yaml", demo);
        e2e_write_file(e, "other.yaml", cluster_yaml("default", "other", 3, NULL));
        commit(e, "alice", "recover default/demo from demo-0; scale default/other up");
        static const char held[] = "waiting for 1 more approval (recovery needs 2 distinct "
                                   "signers, has 1: alice@example.org)";
        assert_int_equal(gitcd(e, "plan", &out, &err), 0);
        assert_contains(out, "? held default/demo");
        assert_contains(out, held);
        assert_contains(out, "~ update default/other");
        assert_contains(out, "1 held waiting for approvals");
        free(out), free(err), out = err = NULL;

        /* gitcd run holds the recovery and reconciles the other cluster meanwhile */
        const char *const daemon_args[] = {"--config",          config,  "--verify-signatures",
                                           "--allowed-signers", allowed, NULL};
        pid_t d = e2e_start_daemon(e, daemon_args);
        if (!e2e_wait_ready(e, "other", 3, 180)) {
                _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
                fail_msg("other was not scaled up while demo's recovery was held:\n%s", log);
        }
        _cleanup_free_ char *v = NULL;
        for (int i = 0; i < 300 && !v; i++) {
                v = verdict(e, "default/demo");
                if (!v)
                        usleep(100 * 1000);
        }
        assert_non_null(v);
        assert_contains(v, "held: ");
        assert_contains(v, held);
        assert_int_equal(audited(e, "default/demo", "spec.held"), 1);
        /* demo waits on its accepted spec: quorum lost, nothing recovered */
        assert_quorum_lost_unrecovered(e);
        assert_int_equal(e2e_audit_count(e, "demo", "recovery.started"), 0);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        /* held once for this head, however often it was read */
        assert_int_equal(audited(e, "default/demo", "spec.held"), 1);

        /* bob approves on top: apply carries the recovery out */
        commit(e, "bob", "approve the recovery of default/demo");
        assert_int_equal(gitcd(e, "plan", &out, &err), 0);
        assert_contains(out, "~ update default/demo");
        free(out), free(err), out = err = NULL;
        k = gitcd(e, "apply", &out, &err);
        if (k != 0)
                fail_msg("apply exited %d:\n%s", k, err);
        free(out), free(err), out = err = NULL;
        harness_writer_stop(w);
        e2e_assert_voters(e, "demo", 3);
        assert_int_equal(member_id(e, "demo", "demo-0"), id0);
        json_t *st = e2e_status(e, "demo");
        json_t *r = json_array_get(json_object_get(st, "recoveries"), 0);
        assert_non_null(r);
        assert_string_equal(json_string_value(json_object_get(r, "result")), "succeeded");
        int64_t rev = json_integer_value(json_object_get(r, "revision"));
        json_decref(st);
        int kept = e2e_writer_kept(w, e, "demo", rev);
        assert_true(kept >= 50 && kept <= acked_at_loss);
        assert_int_equal(e2e_audit_count(e, "demo", "recovery.succeeded"), 1);
        assert_null(verdict(e, "default/demo"));
        assert_int_equal(audited(e, "default/demo", "spec.held"), 1);
        e2e_assert_voters(e, "other", 3);

        harness_writer_free(w);
        free_signers();
        e2e_free(e);
}

static void test_reload(void **state)
{
        (void)state;
        if (!e2e_have_version(VERSION))
                skip();
        e2e *e = e2e_new();
        _cleanup_free_ char *cfg = path_join(e->root, "gitcd.yaml");
        static const char narrow[] = "policy:\n  namespaces: [default]\n";
        assert_int_equal(write_file_atomic(cfg, narrow, strlen(narrow), 0644), 0);
        e2e_write_file(e, "a.yaml", cluster_yaml("default", "a", 1, NULL));
        e2e_write_file(e, "b.yaml", cluster_yaml("prod", "b", 1, NULL));
        const char *const args[] = {"--config", cfg, NULL};
        pid_t d = e2e_start_daemon(e, args);
        assert_true(e2e_wait_ready(e, "a", 1, 60));
        /* refused: a verdict, no cluster */
        char *v = NULL;
        for (int i = 0; i < 300 && !v; i++) {
                _cleanup_free_ char *out = NULL;
                if (e2e_run(e, &out, "status", "-o", "json", "prod/b", NULL) == 0 &&
                    strstr(out, "\"refused\""))
                        v = xstrdup(out);
                else
                        usleep(100 * 1000);
        }
        assert_non_null(v);
        assert_contains(v, "policy.namespaces: prod/b");
        free(v);

        /* the operator widens the policy: SIGHUP takes the cluster in */
        static const char wide[] = "policy:\n  namespaces: [default, prod]\n";
        assert_int_equal(write_file_atomic(cfg, wide, strlen(wide), 0644), 0);
        assert_int_equal(kill(d, SIGHUP), 0);
        bool ready = false;
        for (int i = 0; i < 600 && !ready; i++) {
                _cleanup_free_ char *out = NULL;
                ready = e2e_run(e, &out, "status", "-o", "json", "prod/b", NULL) == 0 &&
                        strstr(out, "\"phase\":\"Running\"") && strstr(out, "\"intake\":[]");
                if (!ready)
                        usleep(100 * 1000);
        }
        assert_true(ready);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_policy),
            cmocka_unit_test(test_recovery_approved),
            cmocka_unit_test(test_reload),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}

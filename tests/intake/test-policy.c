/*
 * The operator's policy (intake/policy.h) as pure functions: the parser
 * over configuration files (every bad line at file:line:col, keys
 * inherited by a source's policy), patterns, containment of machine paths
 * component by component, the judgement of a cluster with the policy's
 * line in each message, and the kinds of change that need approvals.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/spec.h"
#include "intake/policy.h"
#include "ops/config.h"
#include "util/xalloc.h"

/* Load a configuration file's text; its diagnostics joined by newlines in *ret_diags. */
static int load(const char *text, ops_config **ret, char **ret_diags)
{
        diag_list d = DIAG_LIST_INIT;
        int r = ops_config_load_buffer("gitcd.yaml", text, strlen(text), ret, &d);
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < d.n; i++) {
                _cleanup_free_ char *line = diag_format(&d.items[i]);
                sb_printf(&sb, "%s\n", line);
        }
        *ret_diags = sb_detach(&sb);
        diag_list_release(&d);
        return r;
}

static void expect_error(const char *text, const char *where_and_what)
{
        ops_config *c = NULL;
        _cleanup_free_ char *diags = NULL;
        assert_int_equal(load(text, &c, &diags), -EINVAL);
        assert_null(c);
        if (!strstr(diags, where_and_what))
                fail_msg("expected \"%s\" in:\n%s", where_and_what, diags);
}

static etcd_cluster *cluster(const char *yaml)
{
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        int r = spec_load_buffer("c.yaml", yaml, strlen(yaml), &set, &d);
        if (r < 0) {
                diag_print(&d, stderr);
                fail_msg("the test's cluster is invalid");
        }
        assert_int_equal(set.n, 1);
        etcd_cluster *c = set.items[0];
        free(set.items);
        diag_list_release(&d);
        return c;
}

static void test_globs(void **state)
{
        (void)state;
        assert_true(policy_glob("*", "prod"));
        assert_true(policy_glob("team-*", "team-a"));
        assert_true(policy_glob("team-*", "team-"));
        assert_false(policy_glob("team-*", "team"));
        assert_false(policy_glob("team-*", "xteam-a"));
        assert_true(policy_glob("*-db", "orders-db"));
        assert_true(policy_glob("a*b*c", "aXXbYYc"));
        assert_false(policy_glob("a*b*c", "aXXbYY"));
        assert_true(policy_glob("10.0.1.*", "10.0.1.17"));
        assert_false(policy_glob("10.0.1.*", "10.0.10.17"));
        /* a star never crosses '/' */
        assert_true(policy_glob("registry.example.com/*", "registry.example.com/etcd"));
        assert_false(policy_glob("registry.example.com/*", "registry.example.com/a/etcd"));
        assert_false(policy_glob("*", "a/b"));
        assert_true(policy_glob("*/etcd", "quay.io/etcd"));
        /* nothing else is special */
        assert_false(policy_glob("prod.", "prodx"));
        assert_false(policy_glob("p?od", "prod"));
        assert_true(policy_glob("p?od", "p?od"));
        assert_true(policy_glob("quay.io/coreos/etcd", "quay.io/coreos/etcd"));
        assert_false(policy_glob("quay.io/coreos/etcd", "quay.io/coreos/etcd2"));
}

static void test_containment(void **state)
{
        (void)state;
        const char *root = "/var/lib/etcd";
        assert_int_equal(policy_path_within(root, "/var/lib/etcd/prod-main", true), 1);
        assert_int_equal(policy_path_within(root, "/var/lib/etcd/a/b/c", true), 1);
        /* component by component, never a string prefix */
        assert_int_equal(policy_path_within(root, "/var/lib/etcd2", false), 0);
        assert_int_equal(policy_path_within(root, "/var/lib/etcd2/x", true), 0);
        assert_int_equal(policy_path_within(root, "/var/lib", false), 0);
        assert_int_equal(policy_path_within(root, "/etc", false), 0);
        /* the root itself: only when not strict */
        assert_int_equal(policy_path_within(root, "/var/lib/etcd", true), 0);
        assert_int_equal(policy_path_within(root, "/var/lib/etcd", false), 1);
        assert_int_equal(policy_path_within(root, "/var/lib/etcd/", false), 1);
        /* never through . or .., wherever they stand */
        assert_int_equal(policy_path_within(root, "/var/lib/etcd/../../../etc", true), -EINVAL);
        assert_int_equal(policy_path_within(root, "/var/lib/etcd/x/..", true), -EINVAL);
        assert_int_equal(policy_path_within(root, "/var/lib/etcd/./x", true), -EINVAL);
        assert_int_equal(policy_path_within(root, "/srv/../var/lib/etcd/x", true), -EINVAL);
        assert_int_equal(policy_path_within(root, "var/lib/etcd/x", true), -EINVAL);
        assert_int_equal(policy_path_within(root, NULL, true), -EINVAL);
        /* a name that merely starts with dots is a name */
        assert_int_equal(policy_path_within(root, "/var/lib/etcd/..x", true), 1);
}

static void test_builtin(void **state)
{
        (void)state;
        _cleanup_(policy_freep) policy *p = policy_builtin();
        assert_string_equal(p->data_root.path, "/var/lib/etcd");
        assert_string_equal(p->tls_root.path, "/etc/etcd");
        assert_string_equal(p->unit_root.path, "/etc/systemd/system");
        assert_string_equal(p->manifest_root.path, "/etc/kubernetes/manifests");
        assert_true(policy_list_matches(&p->images, GITCD_DEFAULT_REPOSITORY));
        assert_false(policy_list_matches(&p->images, "registry.example.com/etcd"));
        assert_int_equal(p->etcd_flags.n, 0);
        assert_false(policy_wants_approvals(p, NULL));
        assert_string_equal(p->data_root.at.file, POLICY_BUILTIN);
        /* etcd where its release tarball, Debian's package and a side-by-side upgrade put it */
        assert_true(policy_list_matches(&p->etcd_binaries, "/usr/local/bin/etcd"));
        assert_true(policy_list_matches(&p->etcd_binaries, "/usr/bin/etcd"));
        assert_true(policy_list_matches(&p->etcd_binaries, "/opt/etcd/3.5.17/etcd"));
        assert_false(policy_list_matches(&p->etcd_binaries, "/opt/etcd/3.5.17/bin/etcd"));
        assert_false(policy_list_matches(&p->etcd_binaries, "/bin/sh"));
        assert_false(policy_list_matches(&p->etcd_binaries, "/usr/local/bin/etcdctl"));
        assert_int_equal(p->local_roots.n, 1);
        assert_string_equal(p->local_roots.items[0], "/var/lib/gitcd/snapshots");
        assert_string_equal(p->local_roots.at.file, POLICY_BUILTIN);
        /* without a file, a configuration has the built-in policy too */
        ops_config *c = ops_config_new();
        assert_non_null(c->policy);
        assert_string_equal(c->policy->data_root.path, "/var/lib/etcd");
        ops_config_free(c);
}

static void test_parse_and_inherit(void **state)
{
        (void)state;
        const char *text = "policy:\n"
                           "  namespaces: [team-a, \"team-b-*\"]\n"
                           "  targets: [hosts]\n"
                           "  hosts:\n"
                           "    machines: [\"10.0.1.*\"]\n"
                           "    dataRoot: /srv/etcd\n"
                           "  etcdFlags: [enable-pprof]\n"
                           "  approvals:\n"
                           "    recovery: 2\n"
                           "sources:\n"
                           "  - name: one\n"
                           "    url: /srv/one\n"
                           "    signatures: {verify: true, allowedSigners: /etc/gitcd/signers}\n"
                           "  - name: two\n"
                           "    url: /srv/two\n"
                           "    signatures: {verify: true, allowedSigners: /etc/gitcd/signers}\n"
                           "    policy:\n"
                           "      namespaces: [shared]\n"
                           "      approvals: {scaleDown: 3}\n";
        ops_config *c = NULL;
        _cleanup_free_ char *diags = NULL;
        assert_int_equal(load(text, &c, &diags), 0);
        const policy *top = c->policy;
        assert_int_equal(top->namespaces.n, 2);
        assert_string_equal(top->namespaces.items[1], "team-b-*");
        assert_string_equal(top->namespaces.at.file, "gitcd.yaml");
        assert_int_equal(top->namespaces.at.line, 2);
        assert_int_equal(top->namespaces.at.col, 3);
        assert_string_equal(top->data_root.path, "/srv/etcd");
        assert_int_equal(top->data_root.at.line, 6);
        /* what the file leaves out stays built in */
        assert_string_equal(top->tls_root.path, "/etc/etcd");
        assert_string_equal(top->tls_root.at.file, POLICY_BUILTIN);
        assert_int_equal(top->approvals[POLICY_CHANGE_RECOVERY].signers, 2);
        /* source one: the top-level policy */
        assert_ptr_equal(c->sources[0].policy, top);
        /* source two: its keys over the top-level ones, a list replacing the list */
        const policy *two = c->sources[1].policy;
        assert_int_equal(two->namespaces.n, 1);
        assert_string_equal(two->namespaces.items[0], "shared");
        assert_int_equal(two->namespaces.at.line, 18);
        assert_string_equal(two->data_root.path, "/srv/etcd");
        assert_string_equal(two->targets.items[0], "hosts");
        assert_int_equal(two->approvals[POLICY_CHANGE_RECOVERY].signers, 2);
        assert_int_equal(two->approvals[POLICY_CHANGE_SCALE_DOWN].signers, 3);
        /* a source named on the command line takes the policy of the file's source with its url */
        assert_ptr_equal(ops_config_policy_for(c, "/srv/two"), two);
        assert_ptr_equal(ops_config_policy_for(c, "/srv/other"), top);
        _cleanup_(policy_freep) policy *copy = policy_copy(two);
        assert_string_equal(copy->namespaces.items[0], "shared");
        assert_int_equal(copy->approvals[POLICY_CHANGE_SCALE_DOWN].at.line, 19);
        ops_config_free(c);

        /* a file with only a policy is valid (gitcd apply and plan) */
        free(diags);
        diags = NULL;
        assert_int_equal(load("policy:\n  namespaces: [a]\n", &c, &diags), 0);
        assert_int_equal(c->n_sources, 0);
        ops_config_free(c);
}

static void test_bad_lines(void **state)
{
        (void)state;
        expect_error("policy: [a]\n", "gitcd.yaml:1:9: error: policy must be a mapping");
        expect_error("policy:\n  namespace: [a]\n",
                     "gitcd.yaml:2:3: error: unknown key 'namespace' in policy");
        expect_error("policy:\n  namespaces: prod\n",
                     "gitcd.yaml:2:15: error: policy.namespaces must be a sequence");
        expect_error("policy:\n  namespaces: [\"a b\"]\n",
                     "gitcd.yaml:2:16: error: policy.namespaces: \"a b\" contains a space");
        expect_error("policy:\n  namespaces: [a/b]\n",
                     "gitcd.yaml:2:16: error: policy.namespaces: \"a/b\" has a '/'");
        expect_error("policy:\n  clusters: [main]\n",
                     "gitcd.yaml:2:14: error: policy.clusters: \"main\" is not NAMESPACE/NAME");
        expect_error("policy:\n  targets: [local, cloud]\n",
                     "gitcd.yaml:2:20: error: policy.targets: unknown target 'cloud'");
        expect_error("policy:\n  images: [\"quay.io/coreos/etcd@sha256:ab\"]\n",
                     "gitcd.yaml:2:12: error: policy.images: \"quay.io/coreos/etcd@sha256:ab\" is "
                     "not an image repository");
        expect_error("policy:\n  etcdFlags: [--enable-pprof]\n",
                     "gitcd.yaml:2:15: error: policy.etcdFlags: \"--enable-pprof\"");
        expect_error("policy:\n  hosts:\n    dataRoot: var/lib/etcd\n",
                     "gitcd.yaml:3:15: error: policy.hosts.dataRoot: \"var/lib/etcd\" is not an "
                     "absolute, normalized path");
        expect_error("policy:\n  hosts:\n    dataRoot: /var/lib/etcd/../..\n",
                     "gitcd.yaml:3:15: error: policy.hosts.dataRoot");
        expect_error("policy:\n  hosts:\n    tlsRoot: /etc\n",
                     "gitcd.yaml:3:14: error: policy.hosts.tlsRoot: \"/etc\" is a system folder");
        expect_error("policy:\n  hosts:\n    dataRoot: /\n",
                     "gitcd.yaml:3:15: error: policy.hosts.dataRoot: \"/\" is the whole machine");
        expect_error("policy:\n  hosts:\n    root: /srv\n",
                     "gitcd.yaml:3:5: error: unknown key 'root' in policy.hosts");
        expect_error("policy:\n  hosts:\n    etcdBinaries: [etcd]\n",
                     "gitcd.yaml:3:20: error: policy.hosts.etcdBinaries: \"etcd\" is not an "
                     "absolute, normalized path of a file (it must be an absolute path)");
        expect_error("policy:\n  hosts:\n    etcdBinaries: [/opt/etcd/../../bin/sh]\n",
                     "gitcd.yaml:3:20: error: policy.hosts.etcdBinaries: "
                     "\"/opt/etcd/../../bin/sh\" is not an absolute, normalized path");
        expect_error("policy:\n  hosts:\n    etcdBinaries: [\"/usr/bin/*\"]\n",
                     "gitcd.yaml:3:20: error: policy.hosts.etcdBinaries: \"/usr/bin/*\" allows "
                     "any program in its folder, which gitcd would run as root");
        expect_error("policy:\n  hosts:\n    etcdBinaries: /usr/bin/etcd\n",
                     "gitcd.yaml:3:19: error: policy.hosts.etcdBinaries must be a sequence of "
                     "patterns");
        expect_error("policy:\n  localSnapshotRoots: /srv/backups\n",
                     "gitcd.yaml:2:23: error: policy.localSnapshotRoots must be a sequence of "
                     "folders");
        expect_error("policy:\n  localSnapshotRoots: [/var/lib]\n",
                     "gitcd.yaml:2:24: error: policy.localSnapshotRoots: \"/var/lib\" is a system "
                     "folder");
        expect_error("policy:\n  localSnapshotRoots: [backups]\n",
                     "gitcd.yaml:2:24: error: policy.localSnapshotRoots: \"backups\" is not an "
                     "absolute, normalized path");
        expect_error("policy:\n  localSnapshotRoots: [\"/srv/*\"]\n",
                     "gitcd.yaml:2:24: error: policy.localSnapshotRoots: \"/srv/*\": a root is a "
                     "folder, not a pattern");
        expect_error("policy:\n  approvals:\n    recovery: two\n",
                     "gitcd.yaml:3:15: error: policy.approvals.recovery: the number of distinct");
        expect_error("policy:\n  approvals:\n    recovery: 17\n",
                     "gitcd.yaml:3:15: error: policy.approvals.recovery");
        expect_error("policy:\n  approvals:\n    deletion: 2\n",
                     "gitcd.yaml:3:5: error: unknown change kind 'deletion'");
        /* approvals need verified signatures: at the approvals key, naming the source */
        expect_error("policy:\n  approvals:\n    scaleDown: 2\nsources:\n"
                     "  - {name: plain, url: /srv/plain}\n",
                     "gitcd.yaml:3:5: error: policy.approvals: source plain does not verify "
                     "signatures");
        /* every problem, not just the first */
        ops_config *c = NULL;
        _cleanup_free_ char *diags = NULL;
        assert_int_equal(
            load("policy:\n  namespaces: [\"\"]\n  hosts: {dataRoot: /usr}\n", &c, &diags),
            -EINVAL);
        assert_non_null(strstr(diags, "gitcd.yaml:2:16:"));
        assert_non_null(strstr(diags, "gitcd.yaml:3:21:"));
}

#define HOSTS_CLUSTER(extra)                                                                       \
        "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"                                       \
        "metadata: {name: main, namespace: prod}\n"                                                \
        "spec:\n  replicas: 2\n  version: \"3.5.16\"\n" extra "  hosts:\n    mode: staticPod\n"    \
        "    machines:\n"                                                                          \
        "    - address: 10.0.1.5\n"                                                                \
        "      dataDir: /var/lib/etcd/prod-main\n"                                                 \
        "    - address: 10.9.9.9\n"                                                                \
        "      dataDir: /var/lib/etcd2/prod-main\n"                                                \
        "      tlsDir: /etc/etcd-other\n"

static bool has(const diag_list *d, const char *text)
{
        for (size_t i = 0; i < d->n; i++) {
                _cleanup_free_ char *line = diag_format(&d->items[i]);
                if (strstr(line, text))
                        return true;
        }
        return false;
}

static void test_check(void **state)
{
        (void)state;
        const char *text = "policy:\n"
                           "  namespaces: [team-*]\n"
                           "  clusters: [\"*/main\", \"*/orders\"]\n"
                           "  targets: [local, kubernetes]\n"
                           "  hosts:\n"
                           "    machines: [10.0.1.*]\n";
        ops_config *cfg = NULL;
        _cleanup_free_ char *diags = NULL;
        assert_int_equal(load(text, &cfg, &diags), 0);
        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
            cluster(HOSTS_CLUSTER("  repository: registry.example.com/etcd\n"
                                  "  options:\n    extraFlags:\n"
                                  "      experimental-enable-distributed-tracing: \"true\"\n"));
        diag_list d = DIAG_LIST_INIT;
        size_t n = policy_check(cfg->policy, c, "hosts", true, false, false, &d);
        if (n != 7) {
                diag_print(&d, stderr);
                fail_msg("%zu refusals, not 7", n);
        }
        /* each at the policy's line, naming the spec's */
        assert_true(has(&d, "gitcd.yaml:2:3: error: policy.namespaces: prod/main (c.yaml:3:35) "
                            "is in namespace prod, which this source may not define (allowed: "
                            "team-*); the cluster is not taken in"));
        assert_true(has(&d, "gitcd.yaml:4:3: error: policy.targets: prod/main"));
        assert_true(has(&d, "gitcd.yaml:6:5: error: policy.hosts.machines: prod/main (c.yaml:16:"));
        assert_true(has(&d, "places a member on 10.9.9.9, a machine this source may not use"));
        assert_true(
            has(&d, "(built-in policy): error: policy.hosts.dataRoot: prod/main (c.yaml:17:"));
        assert_true(has(&d, "has dataDir /var/lib/etcd2/prod-main on 10.9.9.9, which is not in "
                            "/var/lib/etcd"));
        assert_true(has(&d, "policy.hosts.tlsRoot"));
        assert_true(has(&d, "has tlsDir /etc/etcd-other on 10.9.9.9, which is not in /etc/etcd"));
        /* the staticPod machines run the image */
        assert_true(has(&d, "policy.images: prod/main (c.yaml:7:15) runs the image repository "
                            "registry.example.com/etcd"));
        assert_true(has(&d, "policy.etcdFlags"));
        /* the cluster "main" matches clusters: no refusal for it */
        assert_false(has(&d, "policy.clusters"));
        diag_list_release(&d);

        /* an existing cluster is "not changed"; on another target the hosts rules do not apply */
        n = policy_check(cfg->policy, c, "kubernetes", false, true, true, &d);
        assert_int_equal(n, 3); /* namespace, image, flag */
        assert_true(has(&d, "the cluster is not changed (its last accepted spec stays in force)"));
        diag_list_release(&d);
        ops_config_free(cfg);
}

static void test_check_allowed(void **state)
{
        (void)state;
        const char *text = "policy:\n"
                           "  namespaces: [prod]\n"
                           "  images: [\"registry.example.com/*\"]\n"
                           "  etcdFlags: [experimental-enable-distributed-tracing]\n"
                           "  hosts:\n"
                           "    machines: [\"10.*\"]\n"
                           "    dataRoot: /var/lib\n";
        ops_config *cfg = NULL;
        _cleanup_free_ char *diags = NULL;
        /* /var/lib is a system folder: never a root */
        assert_int_equal(load(text, &cfg, &diags), -EINVAL);
        assert_non_null(strstr(diags, "gitcd.yaml:7:15: error: policy.hosts.dataRoot"));
        const char *ok = "policy:\n"
                         "  namespaces: [prod]\n"
                         "  images: [\"registry.example.com/*\"]\n"
                         "  etcdFlags: [experimental-enable-distributed-tracing]\n"
                         "  hosts:\n"
                         "    machines: [\"10.*\"]\n"
                         "    dataRoot: /var/lib/etcd\n"
                         "    tlsRoot: /etc/etcd\n";
        free(diags), diags = NULL;
        assert_int_equal(load(ok, &cfg, &diags), 0);
        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
            cluster("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                    "metadata: {name: main, namespace: prod}\n"
                    "spec:\n  replicas: 1\n  version: \"3.5.16\"\n"
                    "  repository: registry.example.com/etcd\n"
                    "  options:\n    extraFlags:\n"
                    "      EXPERIMENTAL_ENABLE_DISTRIBUTED_TRACING: \"true\"\n"
                    "  hosts:\n    mode: systemd\n    machines:\n    - address: 10.0.1.5\n");
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(policy_check(cfg->policy, c, "hosts", true, false, false, &d), 0);
        diag_list_release(&d);
        ops_config_free(cfg);
}

/* The etcd binary of a systemd machine: the program gitcd runs there as root. */
static void test_check_binary(void **state)
{
        (void)state;
        _cleanup_(policy_freep) policy *builtin = policy_builtin();
        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
            cluster("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                    "metadata: {name: main, namespace: prod}\n"
                    "spec:\n  replicas: 3\n  version: \"3.5.16\"\n"
                    "  hosts:\n    mode: systemd\n    etcdBinary: /bin/sh\n    machines:\n"
                    "    - address: 10.0.1.5\n"
                    "    - address: 10.0.1.6\n      etcdBinary: /opt/etcd/3.5.16/etcd\n"
                    "    - address: 10.0.1.7\n      etcdBinary: /usr/bin/python3\n");
        diag_list d = DIAG_LIST_INIT;
        size_t n = policy_check(builtin, c, "hosts", true, false, false, &d);
        if (n != 2) {
                diag_print(&d, stderr);
                fail_msg("%zu refusals, not 2", n);
        }
        /* at the hosts-level key for the machine that inherits it, at its own key for the other */
        assert_true(has(&d, "(built-in policy): error: policy.hosts.etcdBinaries: prod/main "
                            "(c.yaml:9:17) runs /bin/sh as etcd on 10.0.1.5, a program this source "
                            "may not run there (allowed: /usr/bin/etcd, /usr/local/bin/etcd, "
                            "/opt/etcd/*/etcd); the cluster is not taken in"));
        assert_true(has(&d, "policy.hosts.etcdBinaries: prod/main (c.yaml:15:19) runs "
                            "/usr/bin/python3 as etcd on 10.0.1.7"));
        assert_false(has(&d, "10.0.1.6"));
        diag_list_release(&d);
        /* not on another target: the hosts rules do not apply there */
        assert_int_equal(policy_check(builtin, c, "local", false, false, false, &d), 0);

        /* the operator's own list, at its line */
        ops_config *cfg = NULL;
        _cleanup_free_ char *diags = NULL;
        assert_int_equal(
            load("policy:\n  hosts:\n    etcdBinaries: [\"/srv/etcd-*/etcd\"]\n", &cfg, &diags), 0);
        _cleanup_(etcd_cluster_freep) etcd_cluster *ok =
            cluster("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                    "metadata: {name: main, namespace: prod}\n"
                    "spec:\n  replicas: 1\n  version: \"3.5.16\"\n"
                    "  hosts:\n    mode: systemd\n    etcdBinary: /srv/etcd-3.5.16/etcd\n"
                    "    machines:\n    - address: 10.0.1.5\n");
        assert_int_equal(policy_check(cfg->policy, ok, "hosts", true, false, false, &d), 0);
        /* the default binary is no longer allowed by a list that does not name it */
        _cleanup_(etcd_cluster_freep) etcd_cluster *dflt =
            cluster("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                    "metadata: {name: main, namespace: prod}\n"
                    "spec:\n  replicas: 1\n  version: \"3.5.16\"\n"
                    "  hosts:\n    mode: systemd\n    machines:\n    - address: 10.0.1.5\n");
        assert_int_equal(policy_check(cfg->policy, dflt, "hosts", true, false, true, &d), 1);
        assert_true(has(&d, "gitcd.yaml:3:5: error: policy.hosts.etcdBinaries: prod/main "
                            "(c.yaml:10:7) runs /usr/local/bin/etcd as etcd on 10.0.1.5"));
        assert_true(has(&d, "(allowed: /srv/etcd-*/etcd); the cluster is not changed"));
        diag_list_release(&d);
        ops_config_free(cfg);
}

/* Folders and files on the gitcd host a spec names: in the local roots, on every target. */
static void test_check_local(void **state)
{
        (void)state;
        _cleanup_(policy_freep) policy *builtin = policy_builtin();
        static const char head[] = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                   "metadata: {name: main, namespace: prod}\n"
                                   "spec:\n  replicas: 1\n  version: \"3.5.16\"\n";
        diag_list d = DIAG_LIST_INIT;

        /* inside the root, and the root itself, for a folder of snapshots */
        const char *const good[] = {
            "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n      local: {path: "
            "/var/lib/gitcd/snapshots/prod}\n",
            "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n      local: {path: "
            "/var/lib/gitcd/snapshots}\n",
            "  bootstrap:\n    restore:\n      source:\n"
            "        local: {path: /var/lib/gitcd/snapshots/prod/main.db}\n",
        };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
                _cleanup_free_ char *y = xasprintf("%s%s", head, good[i]);
                _cleanup_(etcd_cluster_freep) etcd_cluster *c = cluster(y);
                size_t n = policy_check(builtin, c, "local", false, false, false, &d);
                if (n != 0) {
                        diag_print(&d, stderr);
                        fail_msg("good[%zu] refused", i);
                }
        }

        /* outside: refused at the spec's line, whatever the target */
        _cleanup_free_ char *y =
            xasprintf("%s  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n"
                      "      local: {path: /srv/team-b}\n"
                      "  bootstrap:\n    restore:\n      source:\n"
                      "        local: {path: /var/lib/gitcd/state.db}\n",
                      head);
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = cluster(y);
        for (int k = 0; k < 3; k++) {
                const char *target = k == 0 ? "local" : k == 1 ? "kubernetes" : "hosts";
                size_t n = policy_check(builtin, c, target, k == 2, k == 1, false, &d);
                if (n != 2) {
                        diag_print(&d, stderr);
                        fail_msg("%zu refusals on %s, not 2", n, target);
                }
                assert_true(has(&d, "(built-in policy): error: policy.localSnapshotRoots: "
                                    "prod/main (c.yaml:10:21) writes snapshots to /srv/team-b on "
                                    "the gitcd host, which is not in /var/lib/gitcd/snapshots; "
                                    "the cluster is not taken in"));
                assert_true(has(&d, "policy.localSnapshotRoots: prod/main (c.yaml:14:23) restores "
                                    "from /var/lib/gitcd/state.db on the gitcd host, which is not "
                                    "in /var/lib/gitcd/snapshots"));
                diag_list_release(&d);
        }

        /* component by component; a file is never the root itself */
        const char *const bad[] = {
            "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n      local: {path: "
            "/var/lib/gitcd/snapshots2}\n",
            "  bootstrap:\n    restore:\n      source:\n"
            "        local: {path: /var/lib/gitcd/snapshots}\n",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_free_ char *text = xasprintf("%s%s", head, bad[i]);
                _cleanup_(etcd_cluster_freep) etcd_cluster *b = cluster(text);
                assert_int_equal(policy_check(builtin, b, "local", false, false, false, &d), 1);
                assert_true(has(&d, "policy.localSnapshotRoots"));
                diag_list_release(&d);
        }

        /* a snapshot document beside the cluster: refused at its own line */
        _cleanup_free_ char *with_doc =
            xasprintf("apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\n"
                      "metadata: {name: main, namespace: prod}\n"
                      "spec:\n  replicas: 1\n  version: \"3.5.16\"\n"
                      "---\n"
                      "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                      "metadata: {name: before, namespace: prod}\n"
                      "spec:\n  clusterRef: {name: main}\n"
                      "  destination:\n    local: {path: /srv/elsewhere}\n");
        _cleanup_(etcd_cluster_freep) etcd_cluster *doc = cluster(with_doc);
        assert_int_equal(doc->n_declared, 1);
        assert_int_equal(policy_check(builtin, doc, "local", false, false, false, &d), 1);
        assert_true(has(&d, "(built-in policy): error: policy.localSnapshotRoots: prod/main "
                            "(EtcdSnapshot prod/before, c.yaml:"));
        assert_true(has(&d, "writes a snapshot to /srv/elsewhere on the gitcd host, which is not "
                            "in /var/lib/gitcd/snapshots; the cluster is not taken in"));
        diag_list_release(&d);

        /* the operator's roots: several, per source */
        const char *text = "policy:\n"
                           "  localSnapshotRoots: [/srv/backups, /var/lib/gitcd/snapshots]\n"
                           "sources:\n"
                           "  - name: team-b\n"
                           "    url: /srv/b\n"
                           "    policy:\n"
                           "      localSnapshotRoots: [/srv/backups/team-b]\n";
        ops_config *cfg = NULL;
        _cleanup_free_ char *diags = NULL;
        assert_int_equal(load(text, &cfg, &diags), 0);
        _cleanup_free_ char *a_text =
            xasprintf("%s  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n"
                      "      local: {path: /srv/backups/team-a}\n",
                      head);
        _cleanup_(etcd_cluster_freep) etcd_cluster *a = cluster(a_text);
        assert_int_equal(policy_check(cfg->policy, a, "local", false, false, false, &d), 0);
        assert_int_equal(policy_check(cfg->sources[0].policy, a, "local", false, false, false, &d),
                         1);
        assert_true(has(&d, "gitcd.yaml:7:7: error: policy.localSnapshotRoots: prod/main "
                            "(c.yaml:10:21) writes snapshots to /srv/backups/team-a on the gitcd "
                            "host, which is not in /srv/backups/team-b"));
        diag_list_release(&d);
        assert_int_equal(policy_check(cfg->policy, c, "local", false, false, false, &d), 2);
        assert_true(has(&d, "gitcd.yaml:2:3: error: policy.localSnapshotRoots: prod/main "
                            "(c.yaml:10:21) writes snapshots to /srv/team-b on the gitcd host, "
                            "which is not in any of /srv/backups, /var/lib/gitcd/snapshots"));
        diag_list_release(&d);
        ops_config_free(cfg);
}

static void test_changes(void **state)
{
        (void)state;
        const char *base = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                           "metadata: {name: main}\nspec:\n  replicas: 3\n  version: \"3.5.16\"\n";
        _cleanup_(etcd_cluster_freep) etcd_cluster *prev = cluster(base);
        _cleanup_(etcd_cluster_freep) etcd_cluster *same = cluster(base);
        assert_int_equal(policy_changes(NULL, prev), 0); /* a creation */
        assert_int_equal(policy_changes(prev, same), 0);
        assert_int_equal(policy_changes(prev, NULL), 1u << POLICY_CHANGE_DELETION);
        _cleanup_(etcd_cluster_freep) etcd_cluster *down =
            cluster("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                    "metadata: {name: main}\nspec:\n  replicas: 1\n  version: \"3.6.0\"\n"
                    "  recovery: {from: {member: main-0}, token: \"1\"}\n");
        unsigned k = policy_changes(prev, down);
        assert_true(k & (1u << POLICY_CHANGE_SCALE_DOWN));
        assert_true(k & (1u << POLICY_CHANGE_MINOR_UPGRADE));
        assert_true(k & (1u << POLICY_CHANGE_RECOVERY));
        assert_false(k & (1u << POLICY_CHANGE_AUTH_OFF));
        /* the same recovery again is no new recovery */
        assert_false(policy_changes(down, down) & (1u << POLICY_CHANGE_RECOVERY));
        /* a patch is no minor upgrade */
        _cleanup_(etcd_cluster_freep) etcd_cluster *patch =
            cluster("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                    "metadata: {name: main}\nspec:\n  replicas: 3\n  version: \"3.5.17\"\n");
        assert_int_equal(policy_changes(prev, patch), 0);

        ops_config *cfg = NULL;
        _cleanup_free_ char *diags = NULL;
        assert_int_equal(
            load("policy:\n  approvals: {scaleDown: 2, recovery: 3, minorUpgrade: 3}\n"
                 "sources: [{name: s, url: /x, signatures: {verify: true, allowedSigners: /f}}]\n",
                 &cfg, &diags),
            0);
        unsigned kinds = 0;
        assert_int_equal(policy_signers_needed(cfg->policy, k, &kinds), 3);
        assert_int_equal(kinds,
                         (1u << POLICY_CHANGE_RECOVERY) | (1u << POLICY_CHANGE_MINOR_UPGRADE));
        assert_int_equal(policy_signers_needed(cfg->policy, 1u << POLICY_CHANGE_SCALE_DOWN, NULL),
                         2);
        assert_int_equal(policy_signers_needed(cfg->policy, 1u << POLICY_CHANGE_AUTH_OFF, NULL), 0);
        assert_string_equal(policy_change_name(POLICY_CHANGE_DELETION), "clusterDeletion");
        ops_config_free(cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_globs),         cmocka_unit_test(test_containment),
            cmocka_unit_test(test_builtin),       cmocka_unit_test(test_parse_and_inherit),
            cmocka_unit_test(test_bad_lines),     cmocka_unit_test(test_check),
            cmocka_unit_test(test_check_allowed), cmocka_unit_test(test_check_binary),
            cmocka_unit_test(test_check_local),   cmocka_unit_test(test_changes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

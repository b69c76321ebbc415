/*
 * Unit tests for render/: hand-built models and plans in, Kubernetes
 * objects and etcd command lines out. Each test states a behaviour an
 * operator would notice in the rendered manifests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "render-fixture.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static char *dump(const json_t *v)
{
        return json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
}

/* argv as one space-separated string, for readable exact comparisons. */
static char *command_line(const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        char **argv = render_member_command(c, p, idx);
        assert_non_null(argv);
        strbuf sb = STRBUF_INIT;
        for (char **a = argv; *a; a++) {
                if (a != argv)
                        sb_appendc(&sb, ' ');
                sb_append(&sb, *a);
        }
        strv_free(argv);
        return sb_detach(&sb);
}

static bool has_arg(const etcd_cluster *c, const membership_plan *p, size_t idx, const char *arg)
{
        char **argv = render_member_command(c, p, idx);
        bool found = false;
        for (char **a = argv; *a; a++)
                found = found || streq(*a, arg);
        strv_free(argv);
        return found;
}

static void test_steady_plan(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        assert_int_equal(p->n, 3);
        assert_string_equal(p->cluster_token, "prod-db");
        assert_string_equal(p->members[0].name, "db-0");
        assert_string_equal(p->members[2].name, "db-2");
        assert_int_equal(p->members[2].ordinal, 2);
        assert_false(p->members[1].learner);
        assert_string_equal(p->members[1].peer_url,
                            "http://db-1.db-headless.prod.svc.cluster.local:2380");
        assert_string_equal(p->members[1].client_url,
                            "http://db-1.db-headless.prod.svc.cluster.local:2379");
        assert_string_equal(p->members[0].listen_client_url, "http://0.0.0.0:2379");
        assert_string_equal(p->members[0].listen_metrics_url, "http://0.0.0.0:2381");
        assert_string_equal(p->members[0].initial_cluster_state, "new");
        assert_string_equal(p->members[0].initial_cluster,
                            "db-0=http://db-0.db-headless.prod.svc.cluster.local:2380");
        assert_string_equal(p->members[2].initial_cluster_state, "existing");
        assert_string_equal(p->members[2].initial_cluster,
                            "db-0=http://db-0.db-headless.prod.svc.cluster.local:2380,"
                            "db-1=http://db-1.db-headless.prod.svc.cluster.local:2380,"
                            "db-2=http://db-2.db-headless.prod.svc.cluster.local:2380");
        assert_string_equal(p->members[0].data_dir, "/var/lib/etcd/data");
        assert_string_equal(p->members[0].tls_dir, "/etc/etcd/tls");

        /* A custom domain and TLS switch every URL that crosses the network. */
        c->tls.provider = TLS_PROVIDER_AUTO;
        c->tls.client.enabled = true;
        c->tls.peer.enabled = true;
        _cleanup_(membership_plan_freep) membership_plan *q =
            membership_plan_steady(c, "corp.example");
        assert_string_equal(q->members[0].peer_url,
                            "https://db-0.db-headless.prod.svc.corp.example:2380");
        assert_string_equal(q->members[0].listen_client_url, "https://0.0.0.0:2379");
        assert_string_equal(q->members[0].listen_metrics_url, "http://0.0.0.0:2381");

        _cleanup_free_ char *h = render_headless_service_name(c);
        _cleanup_free_ char *s = render_client_service_name(c);
        _cleanup_free_ char *m = render_member_name(c, 7);
        assert_string_equal(h, "db-headless");
        assert_string_equal(s, "db");
        assert_string_equal(m, "db-7");
}

static void test_command_base(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        _cleanup_free_ char *cmd = command_line(c, p, 1);
        assert_string_equal(
            cmd, "etcd --name=db-1 --data-dir=/var/lib/etcd/data"
                 " --listen-client-urls=http://0.0.0.0:2379"
                 " --advertise-client-urls=http://db-1.db-headless.prod.svc.cluster.local:2379"
                 " --listen-peer-urls=http://0.0.0.0:2380"
                 " --initial-advertise-peer-urls="
                 "http://db-1.db-headless.prod.svc.cluster.local:2380"
                 " --listen-metrics-urls=http://0.0.0.0:2381"
                 " --initial-cluster=db-0=http://db-0.db-headless.prod.svc.cluster.local:2380,"
                 "db-1=http://db-1.db-headless.prod.svc.cluster.local:2380"
                 " --initial-cluster-state=existing --initial-cluster-token=prod-db"
                 " --experimental-initial-corrupt-check=true"
                 " --experimental-corrupt-check-time=4h"
                 " --experimental-compact-hash-check-enabled=true"
                 " --experimental-stop-grpc-service-on-defrag=true");
        assert_null(render_member_command(c, p, 3));
}

static void test_command_options(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 1);
        c->options.quota_backend = xstrdup("4Gi");
        c->options.quota_backend_bytes = 4LL << 30;
        c->options.auto_compaction_mode = xstrdup("periodic");
        c->options.auto_compaction_retention = xstrdup("1h");
        c->options.snapshot_count = 50000;
        c->options.heartbeat_interval_ms = 250;
        c->options.election_timeout_ms = 2500;
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        assert_true(has_arg(c, p, 0, "--quota-backend-bytes=4294967296"));
        assert_true(has_arg(c, p, 0, "--auto-compaction-mode=periodic"));
        assert_true(has_arg(c, p, 0, "--auto-compaction-retention=1h"));
        assert_true(has_arg(c, p, 0, "--snapshot-count=50000"));
        assert_true(has_arg(c, p, 0, "--heartbeat-interval=250"));
        assert_true(has_arg(c, p, 0, "--election-timeout=2500"));
        /* The documented order: options after the token, in this sequence. */
        _cleanup_free_ char *cmd = command_line(c, p, 0);
        const char *tail = strstr(cmd, " --initial-cluster-token=prod-db ");
        assert_non_null(tail);
        assert_string_equal(tail, " --initial-cluster-token=prod-db"
                                  " --quota-backend-bytes=4294967296"
                                  " --auto-compaction-mode=periodic"
                                  " --auto-compaction-retention=1h --snapshot-count=50000"
                                  " --heartbeat-interval=250 --election-timeout=2500"
                                  " --experimental-initial-corrupt-check=true"
                                  " --experimental-corrupt-check-time=4h"
                                  " --experimental-compact-hash-check-enabled=true"
                                  " --experimental-stop-grpc-service-on-defrag=true");

        /* Unset options leave etcd's defaults alone: no flag at all. */
        _cleanup_(etcd_cluster_freep) etcd_cluster *bare = fixture_cluster("db", 1);
        _cleanup_free_ char *bare_cmd = command_line(bare, p, 0);
        assert_null(strstr(bare_cmd, "quota"));
        assert_null(strstr(bare_cmd, "compaction"));
        assert_null(strstr(bare_cmd, "snapshot-count"));
        assert_null(strstr(bare_cmd, "heartbeat"));
        assert_null(strstr(bare_cmd, "election"));
        assert_null(strstr(bare_cmd, "cert"));
}

/* The flags of etcd's own corruption checks, as each minor spells them (render/command.c). */
static char *consistency_tail(const char *version, semver v, bool on, int64_t every_ms)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 1);
        free(c->version);
        c->version = xstrdup(version);
        c->ver = v;
        c->consistency.etcd_checks = on;
        if (every_ms)
                c->consistency.etcd_check_interval_ms = every_ms;
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        _cleanup_free_ char *cmd = command_line(c, p, 0);
        const char *tail = strstr(cmd, " --initial-cluster-token=prod-db");
        assert_non_null(tail);
        return xstrdup(tail + strlen(" --initial-cluster-token=prod-db"));
}

static void test_command_consistency(void **state)
{
        struct {
                const char *version;
                semver v;
                const char *tail;
                const char *off; /* the checks turned off: what stays */
        } cases[] = {
            {"3.4.23",
             {3, 4, 23},
             " --experimental-initial-corrupt-check=true --experimental-corrupt-check-time=4h"},
            /* etcd added the compaction hash check in 3.5.5 */
            {"3.5.4",
             {3, 5, 4},
             " --experimental-initial-corrupt-check=true --experimental-corrupt-check-time=4h"},
            {"3.5.5",
             {3, 5, 5},
             " --experimental-initial-corrupt-check=true --experimental-corrupt-check-time=4h"
             " --experimental-compact-hash-check-enabled=true"},
            {"3.5.30",
             {3, 5, 30},
             " --experimental-initial-corrupt-check=true --experimental-corrupt-check-time=4h"
             " --experimental-compact-hash-check-enabled=true"
             " --experimental-stop-grpc-service-on-defrag=true",
             " --experimental-stop-grpc-service-on-defrag=true"},
            /* 3.6: feature gates, and the periodic check's flag without "experimental" */
            {"3.6.4",
             {3, 6, 4},
             " --feature-gates=InitialCorruptCheck=true,CompactHashCheck=true,"
             "StopGRPCServiceOnDefrag=true"
             " --corrupt-check-time=4h",
             " --feature-gates=StopGRPCServiceOnDefrag=true"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *tail = consistency_tail(cases[i].version, cases[i].v, true, 0);
                assert_string_equal(tail, cases[i].tail);
                /* turned off (with a reason, in the spec): no check flag, on every minor */
                _cleanup_free_ char *off = consistency_tail(cases[i].version, cases[i].v, false, 0);
                assert_string_equal(off, cases[i].off ? cases[i].off : "");
        }
        /* spec.consistency.etcdCheckInterval, as a Go duration etcd parses */
        _cleanup_free_ char *every = consistency_tail("3.5.16", (semver){3, 5, 16}, true, 90000);
        assert_non_null(strstr(every, " --experimental-corrupt-check-time=90s"));
        _cleanup_free_ char *every6 = consistency_tail("3.6.4", (semver){3, 6, 4}, true, 1800000);
        assert_non_null(strstr(every6, " --corrupt-check-time=30m"));

        /* 3.6: the spec's own gates join gitcd's in one --feature-gates */
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        free(c->version);
        c->version = xstrdup("3.6.4");
        c->ver = (semver){3, 6, 4};
        kv_set(&c->options.extra_flags, "feature-gates", "StopGRPCServiceOnDefrag=true");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        _cleanup_free_ char *cmd = command_line(c, p, 0);
        assert_non_null(strstr(cmd, " --feature-gates=InitialCorruptCheck=true,CompactHashCheck="
                                    "true,StopGRPCServiceOnDefrag=true"));
        const char *first = strstr(cmd, "--feature-gates");
        assert_null(strstr(first + 1, "--feature-gates"));
        /* with etcd's checks off, the spec's gates stand alone */
        c->consistency.etcd_checks = false;
        _cleanup_free_ char *off = command_line(c, p, 0);
        assert_non_null(strstr(off, " --feature-gates=StopGRPCServiceOnDefrag=true"));
        assert_null(strstr(off, "InitialCorruptCheck"));
}

/*
 * --experimental-stop-grpc-service-on-defrag: on every version api/flags.c's
 * table says has it (3.5.14 on; a feature gate in 3.6), on none before, and
 * the spec's own value stands when its extraFlags set one.
 */
static char *defrag_command(const char *version, semver v, const char *flag, const char *value)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        free(c->version);
        c->version = xstrdup(version);
        c->ver = v;
        if (flag)
                kv_set(&c->options.extra_flags, flag, value);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        return command_line(c, p, 0);
}

static size_t count_of(const char *s, const char *word)
{
        size_t n = 0;
        for (const char *p = strstr(s, word); p; p = strstr(p + 1, word))
                n++;
        return n;
}

static void test_command_defrag_stops_grpc(void **state)
{
        struct {
                const char *version;
                semver v;
                const char *want; /* NULL: no such flag or gate at all */
        } cases[] = {
            {"3.4.23", {3, 4, 23}, NULL},
            {"3.5.0", {3, 5, 0}, NULL},
            {"3.5.13", {3, 5, 13}, NULL},
            {"3.5.14", {3, 5, 14}, " --experimental-stop-grpc-service-on-defrag=true"},
            {"3.5.16", {3, 5, 16}, " --experimental-stop-grpc-service-on-defrag=true"},
            {"3.5.30", {3, 5, 30}, " --experimental-stop-grpc-service-on-defrag=true"},
            {"3.6.0", {3, 6, 0}, ",StopGRPCServiceOnDefrag=true "},
            {"0.0.0", {0, 0, 0}, NULL},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *cmd = defrag_command(cases[i].version, cases[i].v, NULL, NULL);
                if (!cases[i].want) {
                        assert_null(strstr(cmd, "stop-grpc-service-on-defrag"));
                        assert_null(strstr(cmd, "StopGRPCServiceOnDefrag"));
                        continue;
                }
                assert_non_null(strstr(cmd, cases[i].want));
                /* the experimental flag is not repeated on 3.6, where the gate says it */
                if (cases[i].v.minor == 6)
                        assert_null(strstr(cmd, "stop-grpc-service-on-defrag"));
        }

        /* the spec's own value is the one etcd gets, once */
        _cleanup_free_ char *off = defrag_command(
            "3.5.30", (semver){3, 5, 30}, "experimental-stop-grpc-service-on-defrag", "false");
        assert_non_null(strstr(off, " --experimental-stop-grpc-service-on-defrag=false"));
        assert_int_equal(count_of(off, "stop-grpc-service-on-defrag"), 1);
        _cleanup_free_ char *gate = defrag_command("3.6.4", (semver){3, 6, 4}, "feature-gates",
                                                   "StopGRPCServiceOnDefrag=false");
        assert_non_null(strstr(gate, ",StopGRPCServiceOnDefrag=false"));
        assert_int_equal(count_of(gate, "StopGRPCServiceOnDefrag"), 1);
        assert_int_equal(count_of(gate, "--feature-gates"), 1);
}

static void test_command_tls(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        c->tls.provider = TLS_PROVIDER_SECRETS;
        c->tls.client.enabled = true;
        c->tls.client.secret = xstrdup("db-server");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        _cleanup_free_ char *client_only = command_line(c, p, 0);
        assert_non_null(strstr(client_only, " --cert-file=/etc/etcd/tls/client/tls.crt"
                                            " --key-file=/etc/etcd/tls/client/tls.key"
                                            " --trusted-ca-file=/etc/etcd/tls/client/ca.crt"
                                            " --client-cert-auth=true"));
        assert_null(strstr(client_only, "--peer-"));
        assert_non_null(strstr(client_only, "--listen-client-urls=https://0.0.0.0:2379"));
        assert_non_null(strstr(client_only, "--listen-peer-urls=http://0.0.0.0:2380"));

        c->tls.peer.enabled = true;
        c->tls.peer.secret = xstrdup("db-peer");
        _cleanup_(membership_plan_freep) membership_plan *q = membership_plan_steady(c, NULL);
        _cleanup_free_ char *both = command_line(c, q, 0);
        assert_non_null(strstr(both, " --client-cert-auth=true"
                                     " --peer-cert-file=/etc/etcd/tls/peer/tls.crt"
                                     " --peer-key-file=/etc/etcd/tls/peer/tls.key"
                                     " --peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt"
                                     " --peer-client-cert-auth=true"));

        /* tls.client.allowPlainHTTP: plain http beside https on the client port. */
        c->tls.client.allow_plain = true;
        _cleanup_(membership_plan_freep) membership_plan *pl = membership_plan_steady(c, NULL);
        assert_true(
            has_arg(c, pl, 0, "--listen-client-urls=http://0.0.0.0:2379,https://0.0.0.0:2379"));
        c->tls.client.allow_plain = false;

        /* A CA bundle replaces both surfaces' trusted CA. */
        c->tls.ca_bundle_secret = xstrdup("corp-ca");
        assert_true(has_arg(c, q, 0, "--trusted-ca-file=/etc/etcd/tls/ca-bundle/ca.crt"));
        assert_true(has_arg(c, q, 0, "--peer-trusted-ca-file=/etc/etcd/tls/ca-bundle/ca.crt"));

        /* Provider none ignores stray surface switches. */
        c->tls.provider = TLS_PROVIDER_NONE;
        assert_false(has_arg(c, q, 0, "--client-cert-auth=true"));
}

/*
 * spec.tls.peer.selfSigned: https peer URLs and --peer-auto-tls, no peer
 * certificate files; the client surface keeps its own settings.
 */
static void test_command_peer_self_signed(void **state)
{
        (void)state;
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        c->tls.peer.self_signed = true;
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        _cleanup_free_ char *line = command_line(c, p, 0);
        assert_non_null(strstr(line, " --peer-auto-tls=true"));
        assert_null(strstr(line, "--peer-cert-file"));
        assert_null(strstr(line, "--peer-client-cert-auth"));
        assert_null(strstr(line, "--cert-file"));
        assert_non_null(strstr(line, "--listen-peer-urls=https://0.0.0.0:2380"));
        assert_non_null(strstr(line, "--listen-client-urls=http://0.0.0.0:2379"));
        assert_non_null(strstr(p->members[0].peer_url, "https://"));
        assert_non_null(strstr(p->members[2].initial_cluster, "=https://"));
        assert_null(strstr(p->members[2].initial_cluster, "=http://"));
        assert_string_equal(render_peer_scheme(c), "https");

        /* with client TLS from a provider whose peer surface is off */
        c->tls.provider = TLS_PROVIDER_AUTO;
        c->tls.client.enabled = true;
        _cleanup_(membership_plan_freep) membership_plan *q = membership_plan_steady(c, NULL);
        assert_true(has_arg(c, q, 0, "--peer-auto-tls=true"));
        assert_true(has_arg(c, q, 0, "--client-cert-auth=true"));
        assert_true(has_arg(c, q, 0, "--listen-peer-urls=https://0.0.0.0:2380"));
        assert_false(has_arg(c, q, 0, "--peer-client-cert-auth=true"));

        /* without it: plain http peers, no flag */
        c->tls.peer.self_signed = false;
        assert_string_equal(render_peer_scheme(c), "http");
        _cleanup_(membership_plan_freep) membership_plan *r = membership_plan_steady(c, NULL);
        assert_false(has_arg(c, r, 0, "--peer-auto-tls=true"));
}

static void test_command_extra_flags(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 1);
        kv_set(&c->options.extra_flags, "max-txn-ops", "512");
        kv_set(&c->options.extra_flags, "enable-pprof", "");
        kv_set(&c->options.extra_flags, "log-level", "warn");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        _cleanup_free_ char *cmd = command_line(c, p, 0);
        const char *tail = strstr(cmd, " --enable-pprof");
        assert_non_null(tail);
        /* Sorted by name, last, after every flag gitcd owns. */
        assert_string_equal(tail, " --enable-pprof --log-level=warn --max-txn-ops=512");
}

static void test_pod_command_is_render_command(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        c->tls.provider = TLS_PROVIDER_AUTO;
        c->tls.client.enabled = c->tls.peer.enabled = true;
        kv_set(&c->options.extra_flags, "log-level", "warn");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        for (size_t i = 0; i < p->n; i++) {
                json_t *pod = render_member_pod(c, p, i);
                json_t *cmd = jget(pod, "spec.containers.0.command");
                char **argv = render_member_command(c, p, i);
                size_t n = 0;
                for (; argv[n]; n++)
                        assert_string_equal(json_string_value(json_array_get(cmd, n)), argv[n]);
                assert_int_equal(n, json_array_size(cmd));
                strv_free(argv);
                json_decref(pod);
        }
}

static json_int_t pdb_max_unavailable(int replicas)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", replicas);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *objs = render_shared_objects(c, p);
        json_t *pdb = find_object(objs, "PodDisruptionBudget", "db");
        json_int_t v = pdb ? json_integer_value(jget(pdb, "spec.maxUnavailable")) : -1;
        if (pdb) {
                assert_string_equal(jstr(pdb, "apiVersion"), "policy/v1");
                json_t *ml = jget(pdb, "spec.selector.matchLabels");
                assert_string_equal(json_string_value(json_object_get(ml, LABEL_ROLE)), "voter");
        }
        json_decref(objs);
        return v;
}

static void test_pdb(void **state)
{
        assert_int_equal(pdb_max_unavailable(1), 0);
        assert_int_equal(pdb_max_unavailable(3), 1);
        assert_int_equal(pdb_max_unavailable(5), 2);
        assert_int_equal(pdb_max_unavailable(7), 3);
        assert_int_equal(pdb_max_unavailable(0), -1); /* paused: no budget */

        /* Learners do not count: 3 voters and a learner tolerate one voter down. */
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 4);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        p->members[3].learner = true;
        json_t *objs = render_shared_objects(c, p);
        assert_int_equal(json_integer_value(jget(find_object(objs, "PodDisruptionBudget", NULL),
                                                 "spec.maxUnavailable")),
                         1);
        json_decref(objs);
}

static void test_affinity(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *pod = render_member_pod(c, p, 0);
        json_t *term = jget(
            pod, "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.0");
        assert_non_null(term);
        assert_int_equal(json_integer_value(jget(term, "weight")), 100);
        assert_string_equal(jstr(term, "podAffinityTerm.topologyKey"), "kubernetes.io/hostname");
        json_t *ml = jget(term, "podAffinityTerm.labelSelector.matchLabels");
        assert_string_equal(json_string_value(json_object_get(ml, LABEL_CLUSTER)), "db");
        assert_null(jget(
            pod, "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"));
        json_decref(pod);

        /* A user affinity replaces the default entirely. */
        c->affinity =
            json_pack("{s:{s:{s:[{s:[{s:s, s:s, s:[s]}]}]}}}", "nodeAffinity",
                      "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
                      "matchExpressions", "key", "disk", "operator", "In", "values", "ssd");
        pod = render_member_pod(c, p, 0);
        assert_null(jget(pod, "spec.affinity.podAntiAffinity"));
        assert_true(json_equal(jget(pod, "spec.affinity"), c->affinity));
        json_decref(pod);
}

static void test_memory_medium(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        c->storage.medium = MEDIUM_MEMORY;
        free(c->storage.size);
        c->storage.size = xstrdup("512Mi");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        assert_null(render_member_pvc(c, p, 0));
        json_t *objs = render_cluster(c, p);
        assert_int_equal(count_kind(objs, "PersistentVolumeClaim"), 0);
        assert_int_equal(count_kind(objs, "Pod"), 3);
        json_t *pod = find_object(objs, "Pod", "db-1");
        json_t *vol = jget(pod, "spec.volumes.0");
        assert_string_equal(jstr(vol, "name"), "data");
        assert_string_equal(jstr(vol, "emptyDir.medium"), "Memory");
        assert_string_equal(jstr(vol, "emptyDir.sizeLimit"), "512Mi");
        assert_null(jget(vol, "persistentVolumeClaim"));
        json_decref(objs);
}

static void test_disk_pvc(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *pvc = render_member_pvc(c, p, 2);
        assert_string_equal(jstr(pvc, "metadata.name"), "data-db-2");
        assert_string_equal(jstr(pvc, "spec.accessModes.0"), "ReadWriteOnce");
        assert_string_equal(jstr(pvc, "spec.resources.requests.storage"), "10Gi");
        assert_null(jget(pvc, "spec.storageClassName"));
        json_decref(pvc);
        c->storage.storage_class = xstrdup("fast-ssd");
        pvc = render_member_pvc(c, p, 2);
        assert_string_equal(jstr(pvc, "spec.storageClassName"), "fast-ssd");
        json_decref(pvc);

        json_t *pod = render_member_pod(c, p, 2);
        assert_string_equal(jstr(pod, "spec.volumes.0.persistentVolumeClaim.claimName"),
                            "data-db-2");
        assert_string_equal(jstr(pod, "spec.containers.0.volumeMounts.0.mountPath"),
                            "/var/lib/etcd");
        json_decref(pod);
}

static const char *gomaxprocs(json_t *limit)
{
        static char buf[32];
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 1);
        if (limit)
                c->resources = json_pack("{s:{s:o}}", "limits", "cpu", limit);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *pod = render_member_pod(c, p, 0);
        json_t *env = jget(pod, "spec.containers.0.env");
        const char *v = NULL;
        if (env) {
                assert_string_equal(jstr(env, "0.name"), "GOMAXPROCS");
                snprintf(buf, sizeof(buf), "%s", jstr(env, "0.value"));
                v = buf;
                assert_true(json_equal(jget(pod, "spec.containers.0.resources"), c->resources));
        }
        json_decref(pod);
        return v;
}

static void test_gomaxprocs(void **state)
{
        assert_string_equal(gomaxprocs(json_string("1500m")), "2");
        assert_string_equal(gomaxprocs(json_string("1000m")), "1");
        assert_string_equal(gomaxprocs(json_string("250m")), "1");
        assert_string_equal(gomaxprocs(json_string("4")), "4");
        assert_string_equal(gomaxprocs(json_string("2.5")), "3");
        assert_string_equal(gomaxprocs(json_integer(2)), "2");
        assert_string_equal(gomaxprocs(json_real(0.5)), "1");
        assert_null(gomaxprocs(NULL));
}

static void test_labels_merge(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        kv_set(&c->additional_labels, "team", "storage");
        kv_set(&c->additional_labels, LABEL_CLUSTER, "hijack");
        kv_set(&c->additional_labels, "app.kubernetes.io/name", "not-etcd");
        kv_set(&c->additional_labels, LABEL_ROLE, "learner");
        kv_set(&c->additional_annotations, "owner", "alice");
        kv_set(&c->pod_labels, "team", "pods-team");
        kv_set(&c->pod_annotations, "prometheus.io/scrape", "true");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *objs = render_cluster(c, p);
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                json_t *labels = jget(o, "metadata.labels");
                const char *kind = jstr(o, "kind");
                assert_string_equal(json_string_value(json_object_get(labels, LABEL_CLUSTER)),
                                    "db");
                assert_string_equal(
                    json_string_value(json_object_get(labels, "app.kubernetes.io/name")), "etcd");
                assert_string_equal(
                    json_string_value(json_object_get(labels, "app.kubernetes.io/managed-by")),
                    "gitcd");
                assert_string_equal(
                    json_string_value(json_object_get(labels, "app.kubernetes.io/instance")), "db");
                assert_string_equal(
                    json_string_value(json_object_get(labels, "app.kubernetes.io/version")),
                    "3.5.16");
                assert_non_null(json_object_get(labels, "app.kubernetes.io/component"));
                assert_string_equal(
                    json_string_value(json_object_get(jget(o, "metadata.annotations"), "owner")),
                    "alice");
                bool pod = streq(kind, "Pod");
                assert_string_equal(json_string_value(json_object_get(labels, "team")),
                                    pod ? "pods-team" : "storage");
                assert_int_equal(json_object_get(jget(o, "metadata.annotations"),
                                                 "prometheus.io/scrape") != NULL,
                                 pod);
                bool member = pod || streq(kind, "PersistentVolumeClaim");
                /* Only member objects have a role; gitcd's value wins over the user's. */
                if (member)
                        assert_string_equal(json_string_value(json_object_get(labels, LABEL_ROLE)),
                                            "voter");
                else
                        assert_null(json_object_get(labels, LABEL_ROLE));
        }
        json_decref(objs);
}

static void test_learner_role(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        member_plan *m = membership_plan_add(p);
        m->name = render_member_name(c, 5);
        m->ordinal = 5;
        m->learner = true;
        m->peer_url = xstrdup("http://db-5.db-headless.prod.svc.cluster.local:2380");
        m->initial_cluster_state = xstrdup("existing");
        json_t *pod = render_member_pod(c, p, 3);
        json_t *pvc = render_member_pvc(c, p, 3);
        assert_string_equal(jstr(pod, "metadata.name"), "db-5");
        assert_string_equal(
            json_string_value(json_object_get(jget(pod, "metadata.labels"), LABEL_ROLE)),
            "learner");
        assert_string_equal(
            json_string_value(json_object_get(jget(pod, "metadata.labels"), LABEL_MEMBER)), "db-5");
        assert_string_equal(
            json_string_value(json_object_get(jget(pvc, "metadata.labels"), LABEL_ROLE)),
            "learner");
        json_decref(pod);
        json_decref(pvc);

        /* The client Service only sends traffic to voters; the headless one to everyone. */
        json_t *shared = render_shared_objects(c, p);
        json_t *client = find_object(shared, "Service", "db");
        json_t *headless = find_object(shared, "Service", "db-headless");
        assert_string_equal(
            json_string_value(json_object_get(jget(client, "spec.selector"), LABEL_ROLE)), "voter");
        assert_null(json_object_get(jget(headless, "spec.selector"), LABEL_ROLE));
        assert_true(json_is_true(jget(headless, "spec.publishNotReadyAddresses")));
        assert_string_equal(jstr(headless, "spec.clusterIP"), "None");
        json_decref(shared);
}

static void test_readiness_probe(void **state)
{
        static const struct {
                semver v;
                const char *path;
        } cases[] = {
            {{3, 4, 23}, "/health"}, {{3, 5, 10}, "/health"}, {{3, 5, 11}, "/readyz"},
            {{3, 5, 16}, "/readyz"}, {{3, 6, 0}, "/readyz"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 1);
                c->ver = cases[i].v;
                _cleanup_(membership_plan_freep) membership_plan *p =
                    membership_plan_steady(c, NULL);
                json_t *pod = render_member_pod(c, p, 0);
                json_t *probe = jget(pod, "spec.containers.0.readinessProbe");
                assert_string_equal(jstr(probe, "httpGet.path"), cases[i].path);
                assert_int_equal(json_integer_value(jget(probe, "httpGet.port")), 2381);
                assert_null(jget(pod, "spec.containers.0.livenessProbe"));
                json_decref(pod);
        }
}

static void test_pod_shape(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        free(c->version);
        c->version = xstrdup("3.4.23");
        c->ver = (semver){3, 4, 23};
        free(c->repository);
        c->repository = xstrdup("registry.k8s.io/etcd");
        c->node_selector = json_pack("{s:s}", "disktype", "ssd");
        c->tolerations = json_pack("[{s:s, s:s, s:s}]", "key", "dedicated", "operator", "Exists",
                                   "effect", "NoSchedule");
        c->topology_spread_constraints =
            json_pack("[{s:i, s:s, s:s}]", "maxSkew", 1, "topologyKey",
                      "topology.kubernetes.io/zone", "whenUnsatisfiable", "DoNotSchedule");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *pod = render_member_pod(c, p, 1);
        assert_string_equal(jstr(pod, "spec.containers.0.image"), "registry.k8s.io/etcd:v3.4.23");
        assert_string_equal(jstr(pod, "spec.hostname"), "db-1");
        assert_string_equal(jstr(pod, "spec.subdomain"), "db-headless");
        assert_string_equal(jstr(pod, "spec.restartPolicy"), "Always");
        assert_int_equal(json_integer_value(jget(pod, "spec.terminationGracePeriodSeconds")), 60);
        assert_true(json_equal(jget(pod, "spec.nodeSelector"), c->node_selector));
        assert_true(json_equal(jget(pod, "spec.tolerations"), c->tolerations));
        assert_true(json_equal(jget(pod, "spec.topologySpreadConstraints"),
                               c->topology_spread_constraints));
        assert_null(jget(pod, "spec.containers.0.env"));
        json_decref(pod);
}

static void test_paused(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 0);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        assert_int_equal(p->n, 1); /* the dormant member */
        json_t *objs = render_cluster(c, p);
        assert_int_equal(json_array_size(objs), 3);
        assert_non_null(find_object(objs, "Service", "db-headless"));
        assert_non_null(find_object(objs, "Service", "db"));
        assert_non_null(find_object(objs, "PersistentVolumeClaim", "data-db-0"));
        assert_int_equal(count_kind(objs, "Pod"), 0);
        assert_int_equal(count_kind(objs, "PodDisruptionBudget"), 0);
        json_decref(objs);
}

static json_t *volume_named(json_t *pod, const char *name)
{
        size_t i;
        json_t *v;
        json_array_foreach(jget(pod, "spec.volumes"), i,
                           v) if (streq(jstr(v, "name"), name)) return v;
        return NULL;
}

static bool array_has(json_t *arr, const char *s)
{
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) if (streq(json_string_value(v), s)) return true;
        return false;
}

static void test_tls_cert_manager(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        c->tls.provider = TLS_PROVIDER_CERT_MANAGER;
        c->tls.client.enabled = c->tls.peer.enabled = true;
        c->tls.client.issuer.name = xstrdup("etcd-ca");
        c->tls.peer.issuer.name = xstrdup("etcd-peer-ca");
        c->tls.peer.issuer.kind = xstrdup("ClusterIssuer");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *objs = render_cluster(c, p);
        assert_int_equal(count_kind(objs, "Certificate"), 3);

        json_t *client = find_object(objs, "Certificate", "db-client");
        assert_string_equal(jstr(client, "apiVersion"), "cert-manager.io/v1");
        assert_string_equal(jstr(client, "spec.secretName"), "db-client-tls");
        assert_string_equal(jstr(client, "spec.issuerRef.name"), "etcd-ca");
        assert_string_equal(jstr(client, "spec.issuerRef.kind"), "Issuer");
        assert_string_equal(jstr(client, "spec.issuerRef.group"), "cert-manager.io");
        json_t *dns = jget(client, "spec.dnsNames");
        assert_true(array_has(dns, "db"));
        assert_true(array_has(dns, "db.prod"));
        assert_true(array_has(dns, "db.prod.svc"));
        assert_true(array_has(dns, "db.prod.svc.cluster.local"));
        assert_true(array_has(dns, "db-0.db-headless.prod.svc.cluster.local"));
        assert_true(array_has(dns, "db-2.db-headless.prod.svc.cluster.local"));
        assert_true(array_has(dns, "*.db-headless.prod.svc.cluster.local"));
        assert_true(array_has(dns, "localhost"));
        assert_true(array_has(jget(client, "spec.ipAddresses"), "127.0.0.1"));

        json_t *peer = find_object(objs, "Certificate", "db-peer");
        assert_string_equal(jstr(peer, "spec.secretName"), "db-peer-tls");
        assert_string_equal(jstr(peer, "spec.issuerRef.kind"), "ClusterIssuer");
        assert_true(array_has(jget(peer, "spec.dnsNames"), "*.db-headless.prod.svc.cluster.local"));

        json_t *op = find_object(objs, "Certificate", "db-operator");
        assert_string_equal(jstr(op, "spec.commonName"), "root");
        assert_string_equal(jstr(op, "spec.issuerRef.name"), "etcd-ca"); /* client issuer */
        assert_true(array_has(jget(op, "spec.usages"), "client auth"));
        assert_false(array_has(jget(op, "spec.usages"), "server auth"));

        json_t *pod = find_object(objs, "Pod", "db-0");
        assert_string_equal(jstr(volume_named(pod, "client-tls"), "secret.secretName"),
                            "db-client-tls");
        assert_string_equal(jstr(volume_named(pod, "peer-tls"), "secret.secretName"),
                            "db-peer-tls");
        assert_string_equal(jstr(volume_named(pod, "operator-tls"), "secret.secretName"),
                            "db-operator-tls");
        size_t i;
        json_t *mnt;
        json_array_foreach(jget(pod, "spec.containers.0.volumeMounts"), i, mnt)
        {
                if (strstr(jstr(mnt, "name"), "-tls")) {
                        assert_true(json_is_true(jget(mnt, "readOnly")));
                        assert_true(strneq(jstr(mnt, "mountPath"), "/etc/etcd/tls/", 14));
                }
        }
        json_decref(objs);
}

static void test_tls_secrets_and_auto(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
        c->tls.provider = TLS_PROVIDER_SECRETS;
        c->tls.client.enabled = c->tls.peer.enabled = true;
        c->tls.client.secret = xstrdup("my-server");
        c->tls.peer.secret = xstrdup("my-peer");
        c->tls.operator_client_secret = xstrdup("my-operator");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *objs = render_cluster(c, p);
        assert_int_equal(count_kind(objs, "Certificate"), 0);
        assert_int_equal(count_kind(objs, "Secret"), 0);
        json_t *pod = find_object(objs, "Pod", "db-1");
        assert_string_equal(jstr(volume_named(pod, "client-tls"), "secret.secretName"),
                            "my-server");
        assert_string_equal(jstr(volume_named(pod, "peer-tls"), "secret.secretName"), "my-peer");
        assert_string_equal(jstr(volume_named(pod, "operator-tls"), "secret.secretName"),
                            "my-operator");
        json_decref(objs);

        /* auto: gitcd's own Secrets are referenced, never rendered (keys are not pure output). */
        c->tls.provider = TLS_PROVIDER_AUTO;
        objs = render_cluster(c, p);
        assert_int_equal(count_kind(objs, "Certificate"), 0);
        assert_int_equal(count_kind(objs, "Secret"), 0);
        pod = find_object(objs, "Pod", "db-1");
        assert_string_equal(jstr(volume_named(pod, "client-tls"), "secret.secretName"),
                            "db-client-tls");
        assert_string_equal(jstr(volume_named(pod, "peer-tls"), "secret.secretName"),
                            "db-peer-tls");
        assert_string_equal(jstr(volume_named(pod, "operator-tls"), "secret.secretName"),
                            "db-operator-tls");
        assert_null(volume_named(pod, "ca-bundle-tls"));
        json_decref(objs);

        /* Peer-only TLS mounts only the peer folder. */
        c->tls.client.enabled = false;
        objs = render_cluster(c, p);
        pod = find_object(objs, "Pod", "db-1");
        assert_null(volume_named(pod, "client-tls"));
        assert_null(volume_named(pod, "operator-tls"));
        assert_non_null(volume_named(pod, "peer-tls"));
        json_decref(objs);
}

static char *render_dump(const etcd_cluster *c)
{
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *objs = render_cluster(c, p);
        char *s = dump(objs);
        json_decref(objs);
        return s;
}

static void test_determinism(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *a = fixture_cluster("db", 5);
        a->tls.provider = TLS_PROVIDER_CERT_MANAGER;
        a->tls.client.enabled = a->tls.peer.enabled = true;
        a->tls.client.issuer.name = xstrdup("ca");
        a->tls.peer.issuer.name = xstrdup("ca");
        a->resources = json_pack("{s:{s:s}}", "limits", "cpu", "2");
        kv_set(&a->additional_labels, "b", "2");
        kv_set(&a->additional_labels, "a", "1");
        kv_set(&a->options.extra_flags, "max-txn-ops", "512");
        kv_set(&a->options.extra_flags, "log-level", "warn");

        _cleanup_free_ char *first = render_dump(a);
        _cleanup_free_ char *second = render_dump(a);
        assert_string_equal(first, second);

        /* The same spec written in another order renders the same bytes. */
        _cleanup_(etcd_cluster_freep) etcd_cluster *b = fixture_cluster("db", 5);
        b->tls.provider = TLS_PROVIDER_CERT_MANAGER;
        b->tls.client.enabled = b->tls.peer.enabled = true;
        b->tls.client.issuer.name = xstrdup("ca");
        b->tls.peer.issuer.name = xstrdup("ca");
        b->resources = json_pack("{s:{s:s}}", "limits", "cpu", "2");
        kv_set(&b->additional_labels, "a", "1");
        kv_set(&b->additional_labels, "b", "2");
        kv_set(&b->options.extra_flags, "log-level", "warn");
        kv_set(&b->options.extra_flags, "max-txn-ops", "512");
        _cleanup_free_ char *third = render_dump(b);
        assert_string_equal(first, third);
}

static void test_render_cluster_order(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 2);
        c->tls.provider = TLS_PROVIDER_CERT_MANAGER;
        c->tls.client.enabled = true;
        c->tls.client.issuer.name = xstrdup("ca");
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        json_t *objs = render_cluster(c, p);
        static const char *const want[][2] = {
            {"Service", "db-headless"},
            {"Service", "db"},
            {"PodDisruptionBudget", "db"},
            {"Certificate", "db-client"},
            {"Certificate", "db-operator"},
            {"PersistentVolumeClaim", "data-db-0"},
            {"Pod", "db-0"},
            {"PersistentVolumeClaim", "data-db-1"},
            {"Pod", "db-1"},
        };
        assert_int_equal(json_array_size(objs), ARRAY_SIZE(want));
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                assert_string_equal(jstr(json_array_get(objs, i), "kind"), want[i][0]);
                assert_string_equal(jstr(json_array_get(objs, i), "metadata.name"), want[i][1]);
                assert_string_equal(jstr(json_array_get(objs, i), "metadata.namespace"), "prod");
        }
        json_decref(objs);
}

/* A plan as the local target builds it: loopback ports and host folders flow through. */
static void test_local_style_plan(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 1);
        c->tls.provider = TLS_PROVIDER_AUTO;
        c->tls.client.enabled = true;
        _cleanup_(membership_plan_freep) membership_plan *p = XNEW(membership_plan);
        p->cluster_token = xstrdup("prod-db");
        member_plan *m = membership_plan_add(p);
        m->name = xstrdup("db-0");
        m->client_url = xstrdup("https://127.0.0.1:41001");
        m->peer_url = xstrdup("http://127.0.0.1:41002");
        m->listen_client_url = xstrdup("https://127.0.0.1:41001");
        m->listen_peer_url = xstrdup("http://127.0.0.1:41002");
        m->listen_metrics_url = xstrdup("http://127.0.0.1:41003");
        m->initial_cluster = xstrdup("db-0=http://127.0.0.1:41002");
        m->initial_cluster_state = xstrdup("new");
        m->data_dir = xstrdup("/srv/gitcd/prod/db/db-0/data");
        m->tls_dir = xstrdup("/srv/gitcd/prod/db/db-0/tls");
        assert_true(has_arg(c, p, 0, "--listen-metrics-urls=http://127.0.0.1:41003"));
        assert_true(has_arg(c, p, 0, "--data-dir=/srv/gitcd/prod/db/db-0/data"));
        assert_true(has_arg(c, p, 0, "--cert-file=/srv/gitcd/prod/db/db-0/tls/client/tls.crt"));
        assert_true(
            has_arg(c, p, 0, "--trusted-ca-file=/srv/gitcd/prod/db/db-0/tls/client/ca.crt"));
        json_t *pod = render_member_pod(c, p, 0);
        assert_int_equal(
            json_integer_value(jget(pod, "spec.containers.0.readinessProbe.httpGet.port")), 41003);
        assert_int_equal(json_integer_value(jget(pod, "spec.containers.0.ports.0.containerPort")),
                         41001);
        assert_string_equal(jstr(pod, "spec.containers.0.volumeMounts.0.mountPath"),
                            "/srv/gitcd/prod/db/db-0");
        assert_string_equal(jstr(pod, "spec.containers.0.volumeMounts.1.mountPath"),
                            "/srv/gitcd/prod/db/db-0/tls/client");
        json_decref(pod);
        /* Loopback addresses become IP SANs, not DNS names. */
        c->tls.provider = TLS_PROVIDER_CERT_MANAGER;
        c->tls.client.issuer.name = xstrdup("ca");
        json_t *shared = render_shared_objects(c, p);
        json_t *cert = find_object(shared, "Certificate", "db-client");
        assert_int_equal(json_array_size(jget(cert, "spec.ipAddresses")), 1);
        assert_string_equal(jstr(cert, "spec.ipAddresses.0"), "127.0.0.1");
        assert_false(array_has(jget(cert, "spec.dnsNames"), "127.0.0.1"));
        json_decref(shared);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_steady_plan),
            cmocka_unit_test(test_command_base),
            cmocka_unit_test(test_command_options),
            cmocka_unit_test(test_command_consistency),
            cmocka_unit_test(test_command_defrag_stops_grpc),
            cmocka_unit_test(test_command_peer_self_signed),
            cmocka_unit_test(test_command_tls),
            cmocka_unit_test(test_command_extra_flags),
            cmocka_unit_test(test_pod_command_is_render_command),
            cmocka_unit_test(test_pdb),
            cmocka_unit_test(test_affinity),
            cmocka_unit_test(test_memory_medium),
            cmocka_unit_test(test_disk_pvc),
            cmocka_unit_test(test_gomaxprocs),
            cmocka_unit_test(test_labels_merge),
            cmocka_unit_test(test_learner_role),
            cmocka_unit_test(test_readiness_probe),
            cmocka_unit_test(test_pod_shape),
            cmocka_unit_test(test_paused),
            cmocka_unit_test(test_tls_cert_manager),
            cmocka_unit_test(test_tls_secrets_and_auto),
            cmocka_unit_test(test_determinism),
            cmocka_unit_test(test_render_cluster_order),
            cmocka_unit_test(test_local_style_plan),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

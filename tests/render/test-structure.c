/*
 * Every object render produces is a well-formed Kubernetes object, for a
 * matrix of hand-built clusters: sizes (paused, 1, 3, 5 and a learner),
 * both storage media, every TLS provider and surface combination, user
 * metadata and flags. The checker itself is tested on broken objects so a
 * lenient checker cannot hide a broken renderer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "k8s-check.h"
#include "render-fixture.h"
#include "util/macro.h"

static void assert_clean(json_t *objs, const char *what)
{
        strbuf errs = STRBUF_INIT;
        k8s_check_set(objs, &errs);
        if (errs.len > 0)
                print_error("%s:\n%s", what, sb_str(&errs));
        assert_int_equal(errs.len, 0);
        sb_release(&errs);
}

static etcd_cluster *matrix_cluster(int replicas, storage_medium medium, tls_provider provider,
                                    bool client, bool peer)
{
        etcd_cluster *c = fixture_cluster("etcd-main", replicas);
        c->storage.medium = medium;
        c->tls.provider = provider;
        c->tls.client.enabled = client;
        c->tls.peer.enabled = peer;
        if (provider == TLS_PROVIDER_SECRETS) {
                c->tls.client.secret = xstrdup("main-server");
                c->tls.peer.secret = xstrdup("main-peer");
                c->tls.operator_client_secret = xstrdup("main-operator");
        }
        if (provider == TLS_PROVIDER_CERT_MANAGER) {
                c->tls.client.issuer.name = xstrdup("etcd-ca");
                c->tls.peer.issuer.name = xstrdup("etcd-ca");
                c->tls.peer.issuer.kind = xstrdup("ClusterIssuer");
        }
        c->resources = json_pack("{s:{s:s, s:s}, s:{s:s}}", "limits", "cpu", "750m", "memory",
                                 "2Gi", "requests", "cpu", "250m");
        kv_set(&c->additional_labels, "team", "storage");
        kv_set(&c->additional_labels, "example.com/tier", "gold");
        kv_set(&c->additional_annotations, "example.com/owner", "platform team <ops@example.com>");
        kv_set(&c->pod_annotations, "prometheus.io/port", "2381");
        kv_set(&c->options.extra_flags, "max-txn-ops", "256");
        c->options.snapshot_count = 10000;
        return c;
}

static void test_matrix(void **state)
{
        static const int sizes[] = {0, 1, 3, 5};
        static const tls_provider providers[] = {TLS_PROVIDER_NONE, TLS_PROVIDER_AUTO,
                                                 TLS_PROVIDER_SECRETS, TLS_PROVIDER_CERT_MANAGER};
        size_t combos = 0;
        for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
                for (int medium = 0; medium < 2; medium++)
                        for (size_t pv = 0; pv < ARRAY_SIZE(providers); pv++)
                                for (int surfaces = 0; surfaces < 4; surfaces++) {
                                        if (sizes[s] == 0 && medium == MEDIUM_MEMORY)
                                                continue; /* rejected by validation */
                                        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
                                            matrix_cluster(sizes[s], (storage_medium)medium,
                                                           providers[pv], surfaces & 1,
                                                           surfaces & 2);
                                        _cleanup_(membership_plan_freep) membership_plan *p =
                                            membership_plan_steady(c, "k8s.example.org");
                                        json_t *objs = render_cluster(c, p);
                                        char what[128];
                                        snprintf(what, sizeof(what),
                                                 "replicas %d, medium %d, tls %d/%d", sizes[s],
                                                 medium, (int)providers[pv], surfaces);
                                        assert_clean(objs, what);
                                        json_decref(objs);
                                        combos++;
                                }
        assert_true(combos > 100);
}

static void test_learner_cluster(void **state)
{
        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
            matrix_cluster(3, MEDIUM_DISK, TLS_PROVIDER_CERT_MANAGER, true, true);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_steady(c, NULL);
        member_plan *m = membership_plan_add(p);
        m->name = render_member_name(c, 3);
        m->ordinal = 3;
        m->learner = true;
        m->peer_url = xstrdup("https://etcd-main-3.etcd-main-headless.prod.svc.cluster.local:2380");
        m->client_url =
            xstrdup("https://etcd-main-3.etcd-main-headless.prod.svc.cluster.local:2379");
        m->initial_cluster_state = xstrdup("existing");
        json_t *objs = render_cluster(c, p);
        assert_clean(objs, "3 voters and a learner");
        assert_int_equal(count_kind(objs, "Pod"), 4);
        json_decref(objs);
}

/* The checker must notice what a broken renderer would produce. */
static void test_checker_catches(void **state)
{
        static const char *const breakages[] = {
            "image", "command", "claim", "selector", "label", "namespace", "storage", "pdb",
        };
        for (size_t b = 0; b < ARRAY_SIZE(breakages); b++) {
                _cleanup_(etcd_cluster_freep) etcd_cluster *c = fixture_cluster("db", 3);
                _cleanup_(membership_plan_freep) membership_plan *p =
                    membership_plan_steady(c, NULL);
                json_t *objs = render_cluster(c, p);
                json_t *pod = find_object(objs, "Pod", "db-1");
                json_t *pvc = find_object(objs, "PersistentVolumeClaim", "data-db-1");
                json_t *ctr = jget(pod, "spec.containers.0");
                const char *what = breakages[b];
                if (streq(what, "image"))
                        json_object_del(ctr, "image");
                else if (streq(what, "command"))
                        json_object_set_new(ctr, "command", json_array());
                else if (streq(what, "claim"))
                        json_object_set_new(jget(pvc, "metadata"), "name", json_string("other"));
                else if (streq(what, "selector"))
                        json_object_set_new(jget(pod, "metadata.labels"), LABEL_CLUSTER,
                                            json_string("elsewhere"));
                else if (streq(what, "label"))
                        json_object_set_new(jget(pod, "metadata.labels"), "bad key!",
                                            json_string("x"));
                else if (streq(what, "namespace"))
                        json_object_del(jget(pvc, "metadata"), "namespace");
                else if (streq(what, "storage"))
                        json_object_del(jget(pvc, "spec.resources.requests"), "storage");
                else if (streq(what, "pdb"))
                        json_object_set_new(
                            jget(find_object(objs, "PodDisruptionBudget", NULL), "spec"),
                            "minAvailable", json_integer(2));
                strbuf errs = STRBUF_INIT;
                k8s_check_set(objs, &errs);
                if (errs.len == 0)
                        print_error("breakage \"%s\" went unnoticed\n", what);
                assert_true(errs.len > 0);
                sb_release(&errs);
                json_decref(objs);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_matrix),
            cmocka_unit_test(test_learner_cluster),
            cmocka_unit_test(test_checker_catches),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

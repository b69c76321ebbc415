/*
 * Adoption on the hosts target, the pure half (targets/hosts-adopt.h):
 * reading a kubeadm-style etcd manifest (YAML and JSON, `--k=v` and
 * `--k v` flags, command and args), and the decision over the spec, what
 * each machine runs and etcd's member list: adopt (IDs kept, which members
 * restart and which file each replaces), members named after their nodes
 * (kubeadm) found by their peer URL and given gitcd's name for their
 * machine, nothing to adopt, and every refusal (count, names that clash,
 * a manifest and etcd that disagree, data dir, TLS, learners, unhealthy,
 * unreadable);
 * a cluster with TLS (kubeadm's flags and files): adopted with an https
 * peer URL when the spec says tls.provider auto on both surfaces, and
 * each TLS refusal with what to set.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/spec.h"
#include "targets/hosts-adopt.h"
#include "util/xalloc.h"

#define KUBEADM_YAML                                                                               \
        "apiVersion: v1\n"                                                                         \
        "kind: Pod\n"                                                                              \
        "metadata:\n"                                                                              \
        "  name: etcd\n"                                                                           \
        "  namespace: kube-system\n"                                                               \
        "spec:\n"                                                                                  \
        "  containers:\n"                                                                          \
        "  - name: sidecar\n"                                                                      \
        "    command: [sleep, infinity]\n"                                                         \
        "  - name: etcd\n"                                                                         \
        "    image: registry.k8s.io/etcd:3.5.16-0\n"                                               \
        "    command:\n"                                                                           \
        "    - etcd\n"                                                                             \
        "    - --advertise-client-urls=http://10.0.0.11:2379\n"                                    \
        "    - --data-dir=/var/lib/etcd/prod\n"                                                    \
        "    - --initial-advertise-peer-urls=http://10.0.0.11:2380\n"                              \
        "    - --initial-cluster=prod-0=http://10.0.0.11:2380,prod-1=http://10.0.0.12:2380\n"      \
        "    args: [--name, prod-0]\n"

static void test_parse_kubeadm_yaml(void **state)
{
        (void)state;
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(
            hosts_running_parse_manifest("etcd.yaml", KUBEADM_YAML, strlen(KUBEADM_YAML), &r, &d),
            0);
        assert_string_equal(r.name, "prod-0");
        assert_string_equal(r.data_dir, "/var/lib/etcd/prod");
        assert_string_equal(r.advertise_client_urls, "http://10.0.0.11:2379");
        assert_string_equal(r.initial_advertise_peer_urls, "http://10.0.0.11:2380");
        assert_non_null(strstr(r.initial_cluster, "prod-1=http://10.0.0.12:2380"));
        assert_false(r.tls);
        assert_string_equal(r.file, "etcd.yaml");
        hosts_running_release(&r);
        diag_list_release(&d);
}

static void test_parse_json_and_tls(void **state)
{
        (void)state;
        const char *j =
            "# a comment\n{\"kind\":\"Pod\",\"spec\":{\"containers\":[{\"command\":"
            "[\"etcd\",\"--name=a-0\",\"--data-dir\",\"/d\",\"--cert-file=/p/s.crt\"]}]}}";
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(hosts_running_parse_manifest("m.yaml", j, strlen(j), &r, &d), 0);
        assert_string_equal(r.name, "a-0");
        assert_string_equal(r.data_dir, "/d");
        assert_true(r.tls);
        hosts_running_release(&r);
        diag_list_release(&d);
}

static void parse_fails(const char *text, const char *want)
{
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(hosts_running_parse_manifest("m.yaml", text, strlen(text), &r, &d),
                         -EINVAL);
        assert_true(d.n > 0);
        bool found = false;
        for (size_t i = 0; i < d.n; i++)
                found = found || strstr(d.items[i].message, want);
        if (!found)
                fail_msg("no diagnostic with \"%s\" for:\n%s", want, text);
        assert_null(r.name);
        diag_list_release(&d);
}

static void test_parse_refusals(void **state)
{
        (void)state;
        parse_fails("kind: Deployment\n", "kind is not Pod");
        parse_fails("[1, 2]\n", "no mapping");
        parse_fails("kind: Pod\nspec: {containers: []}\n", "no containers");
        parse_fails("kind: Pod\nspec: {containers: [{name: a}, {name: b}]}\n", "no container");
        parse_fails("kind: Pod\nspec: {containers: [{command: [etcd, --name=x]}]}\n",
                    "no --name or no --data-dir");
        parse_fails("kind: Pod\nspec: {containers: [{command: {a: b}}]}\n", "not a list");
        parse_fails("kind: Pod\nkind: Pod\n", "uplicate");
        parse_fails("kind: [Pod\n", "");
}

/* ---- the decision -------------------------------------------------------- */

/* The spec; tls: the spec.tls block ("" for none). */
static etcd_cluster *cluster_tls(int replicas, const char *tls)
{
        char *y = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: "
                            "prod}\nspec:\n  replicas: %d\n%s  hosts:\n    mode: staticPod\n"
                            "    machines:\n"
                            "    - {address: 10.0.0.11, dataDir: /var/lib/etcd/prod}\n"
                            "    - {address: 10.0.0.12, dataDir: /var/lib/etcd/prod}\n"
                            "    - {address: 10.0.0.13, dataDir: /var/lib/etcd/prod}\n",
                            replicas, tls);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        int k = spec_load_buffer("prod.yaml", y, strlen(y), &set, &d);
        if (k < 0 || set.n != 1) {
                diag_print(&d, stderr);
                fail_msg("spec does not load");
        }
        free(y);
        diag_list_release(&d);
        etcd_cluster *c = set.items[0];
        free(set.items);
        return c;
}

static etcd_cluster *cluster(int replicas)
{
        return cluster_tls(replicas, "");
}

#define SPEC_TLS "  tls: {provider: auto, client: {enabled: true}, peer: {enabled: true}}\n"

static hosts_running *running(const char *name, const char *data_dir, bool gitcd_file)
{
        hosts_running *r = XNEW(hosts_running);
        r->name = xstrdup(name);
        r->data_dir = xstrdup(data_dir);
        r->file = xstrdup(gitcd_file ? "/etc/kubernetes/manifests/etcd-default-prod.yaml"
                                     : "/etc/kubernetes/manifests/etcd.yaml");
        r->gitcd_file = gitcd_file;
        r->initial_cluster = xstrdup("prod-0=http://10.0.0.11:2380");
        return r;
}

typedef struct world {
        etcd_cluster *c;
        hosts_running *run[3];
        etcd_members list;
        etcd_member m[3];
} world;

static void world_init(world *w, int replicas)
{
        memset(w, 0, sizeof(*w));
        w->c = cluster(replicas);
        for (size_t i = 0; i < 3; i++) {
                char *name = xasprintf("prod-%zu", i);
                w->run[i] = running(name, "/var/lib/etcd/prod", i == 2);
                w->m[i].id = 0x1000 + i;
                w->m[i].name = name;
                w->m[i].peer_urls = xcalloc(1, sizeof(char *));
                w->m[i].peer_urls[0] = xasprintf("http://10.0.0.1%zu:2380", i + 1);
                w->m[i].n_peer_urls = 1;
                w->m[i].client_urls = xcalloc(1, sizeof(char *));
                w->m[i].client_urls[0] = xasprintf("http://10.0.0.1%zu:2379", i + 1);
                w->m[i].n_client_urls = 1;
        }
        w->list.cluster_id = 0xabcdef;
        w->list.members = w->m;
        w->list.n = 3;
}

/* The world of a kubeadm cluster with TLS (kubeadm's flags and files), spec tls as given. */
static void world_init_tls(world *w, const char *tls)
{
        world_init(w, 3);
        etcd_cluster_free(w->c);
        w->c = cluster_tls(3, tls);
        for (size_t i = 0; i < 3; i++) {
                hosts_running *r = w->run[i];
                r->gitcd_file = false;
                str_assign(&r->file, xstrdup("/etc/kubernetes/manifests/etcd.yaml"));
                r->tls = true;
                r->advertise_client_urls = xasprintf("https://10.0.0.1%zu:2379", i + 1);
                r->initial_advertise_peer_urls = xasprintf("https://10.0.0.1%zu:2380", i + 1);
                r->trusted_ca_file = xstrdup("/etc/kubernetes/pki/etcd/ca.crt");
                r->peer_trusted_ca_file = xstrdup("/etc/kubernetes/pki/etcd/ca.crt");
                r->cert_file = xstrdup("/etc/kubernetes/pki/etcd/server.crt");
                r->peer_cert_file = xstrdup("/etc/kubernetes/pki/etcd/peer.crt");
                str_assign(&w->m[i].peer_urls[0], xasprintf("https://10.0.0.1%zu:2380", i + 1));
                str_assign(&w->m[i].client_urls[0], xasprintf("https://10.0.0.1%zu:2379", i + 1));
        }
}

static void world_release(world *w)
{
        for (size_t i = 0; i < 3; i++) {
                if (w->run[i]) {
                        hosts_running_release(w->run[i]);
                        free(w->run[i]);
                }
                free(w->m[i].name);
                free(w->m[i].peer_urls[0]);
                free(w->m[i].peer_urls);
                free(w->m[i].client_urls[0]);
                free(w->m[i].client_urls);
        }
        etcd_cluster_free(w->c);
}

static void refused(world *w, bool healthy, bool with_list, const char *want)
{
        adopt_plan p;
        char *why = NULL;
        int k =
            hosts_adopt_decide(w->c, 2380, w->run, with_list ? &w->list : NULL, healthy, &p, &why);
        if (k != -EPERM || !why || !strstr(why, want))
                fail_msg("want a refusal with \"%s\", got %d: %s", want, k, why ? why : "");
        assert_int_equal(p.n, 0);
        free(why);
}

static void test_decide_adopts(void **state)
{
        (void)state;
        world w;
        world_init(&w, 3);
        adopt_plan p;
        char *why = NULL;
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, &w.list, true, &p, &why), 1);
        assert_null(why);
        assert_int_equal(p.n, 3);
        assert_int_equal(p.cluster_id, 0xabcdef);
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(p.steps[i].machine, i);
                assert_int_equal(p.steps[i].ordinal, (int)i);
                assert_int_equal(p.steps[i].id, 0x1000 + i);
                assert_string_equal(p.steps[i].member, w.m[i].name);
                assert_string_equal(p.steps[i].running_name, w.m[i].name);
        }
        /* kubeadm's manifest is replaced (one restart); gitcd's own file is kept */
        assert_true(p.steps[0].restart);
        assert_string_equal(p.steps[0].replaces, "/etc/kubernetes/manifests/etcd.yaml");
        assert_false(p.steps[2].restart);
        assert_null(p.steps[2].replaces);
        assert_string_equal(p.initial_cluster, "prod-0=http://10.0.0.11:2380");
        adopt_plan_release(&p);
        world_release(&w);
}

/* Member i is named name, in its manifest and in etcd. */
static void rename_member(world *w, size_t i, const char *name)
{
        str_assign(&w->m[i].name, xstrdup(name));
        str_assign(&w->run[i]->name, xstrdup(name));
}

static void test_decide_adopts_node_names(void **state)
{
        (void)state;
        world w;
        world_init(&w, 3);
        rename_member(&w, 0, "node-c"); /* names in no order: the machine decides */
        rename_member(&w, 1, "node-a");
        rename_member(&w, 2, "cp-1.example.com");
        /* etcd lists them in another order than the machines */
        etcd_member m0 = w.m[0];
        w.m[0] = w.m[2], w.m[2] = m0;
        adopt_plan p;
        char *why = NULL;
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, &w.list, true, &p, &why), 1);
        assert_null(why);
        assert_int_equal(p.n, 3);
        static const char *const was[] = {"node-c", "node-a", "cp-1.example.com"};
        static const uint64_t ids[] = {0x1000, 0x1001, 0x1002};
        for (size_t i = 0; i < 3; i++) {
                char want[16];
                snprintf(want, sizeof(want), "prod-%zu", i);
                assert_int_equal(p.steps[i].machine, i);
                assert_int_equal(p.steps[i].ordinal, (int)i);
                assert_string_equal(p.steps[i].member, want);
                assert_string_equal(p.steps[i].running_name, was[i]);
                assert_int_equal(p.steps[i].id, ids[i]);
                assert_true(p.steps[i].restart);
        }
        /* even from gitcd's own file (machine 2), the new name needs the restart */
        assert_null(p.steps[2].replaces);
        /* gitcd's manifest says the new names in --initial-cluster too */
        assert_string_equal(p.initial_cluster, "prod-0=http://10.0.0.11:2380");
        adopt_plan_release(&p);
        str_assign(&w.run[0]->initial_cluster,
                   xstrdup("node-c=http://10.0.0.11:2380,gone=http://10.9.9.9:2380,"
                           "node-a=http://10.0.0.12:2380,prod-7=http://10.0.0.13:2380,odd"));
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, &w.list, true, &p, &why), 1);
        assert_string_equal(
            p.initial_cluster,
            "prod-0=http://10.0.0.11:2380,gone=http://"
            "10.9.9.9:2380,prod-1=http://10.0.0.12:2380,prod-7=http://10.0.0.13:2380,odd");
        adopt_plan_release(&p);
        world_release(&w);

        /* gitcd's names are kept where they are; the others take their machine's */
        world_init(&w, 3);
        rename_member(&w, 0, "prod-5");
        rename_member(&w, 1, "node-b");
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, &w.list, true, &p, &why), 1);
        assert_string_equal(p.steps[0].member, "prod-5");
        assert_int_equal(p.steps[0].ordinal, 5);
        assert_string_equal(p.steps[1].member, "prod-1");
        assert_string_equal(p.steps[1].running_name, "node-b");
        assert_string_equal(p.steps[2].member, "prod-2");
        assert_false(p.steps[2].restart);
        int ord[3];
        assert_int_equal(hosts_adopt_ordinals(w.c, w.run, ord, &why), 0);
        assert_int_equal(ord[0], 5);
        assert_int_equal(ord[1], 1);
        assert_int_equal(ord[2], 2);
        adopt_plan_release(&p);
        world_release(&w);
}

static void test_decide_nothing_runs(void **state)
{
        (void)state;
        world w;
        world_init(&w, 3);
        for (size_t i = 0; i < 3; i++) {
                hosts_running_release(w.run[i]);
                free(w.run[i]);
                w.run[i] = NULL;
        }
        adopt_plan p;
        char *why = NULL;
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, NULL, false, &p, &why), 0);
        assert_null(why);
        world_release(&w);
}

static void test_decide_refusals(void **state)
{
        (void)state;
        world w;

        world_init(&w, 1); /* the spec wants 1, 3 run */
        refused(&w, true, true, "has 3 members, the spec 1 replicas");
        world_release(&w);

        world_init(&w, 3);
        refused(&w, true, false, "could not be read");
        refused(&w, false, true, "not every member is healthy");
        world_release(&w);

        world_init(&w, 3);
        str_assign(&w.run[1]->data_dir, xstrdup("/srv/etcd"));
        refused(&w, true, true, "--data-dir /srv/etcd but the spec's dataDir is");
        world_release(&w);

        world_init(&w, 3); /* TLS flags with plain http URLs */
        w.run[0]->tls = true;
        refused(&w, true, true,
                "runs etcd with TLS (/etc/kubernetes/manifests/etcd.yaml) but "
                "the spec has no TLS; set tls.provider: auto");
        world_release(&w);

        world_init(&w, 3); /* the manifest and etcd disagree on who runs there */
        str_assign(&w.run[1]->name, xstrdup("prod-7"));
        refused(&w, true, true,
                "10.0.0.12 runs member prod-7 (/etc/kubernetes/manifests/etcd.yaml), but etcd "
                "lists prod-1 at its peer URL http://10.0.0.12:2380");
        world_release(&w);

        world_init(&w, 3);
        rename_member(&w, 1, "node-b");
        str_assign(&w.run[1]->name, xstrdup("node-x"));
        refused(&w, true, true,
                "runs member node-x (/etc/kubernetes/manifests/etcd.yaml), but "
                "etcd lists node-b at its peer URL");
        world_release(&w);

        world_init(&w, 3); /* etcd lists a member at that URL that never started */
        rename_member(&w, 1, "node-b");
        str_assign(&w.m[1].name, NULL);
        refused(&w, true, true, "but etcd lists a member that never started at its peer URL");
        world_release(&w);

        world_init(&w, 3); /* nobody at the machine's peer URL, nobody by that name */
        rename_member(&w, 1, "node-b");
        str_assign(&w.m[1].name, xstrdup("node-z"));
        str_assign(&w.m[1].peer_urls[0], xstrdup("http://10.9.9.9:2380"));
        refused(&w, true, true,
                "10.0.0.12 runs member node-b, which etcd does not list (no member has the "
                "peer URL http://10.0.0.12:2380)");
        world_release(&w);

        world_init(&w, 3);
        w.m[2].is_learner = true;
        refused(&w, true, true, "learner");
        world_release(&w);

        world_init(&w, 3);
        rename_member(&w, 2, "node-c");
        w.m[2].is_learner = true;
        refused(&w, true, true, "member node-c is a learner; promote it first");
        world_release(&w);

        world_init(&w, 3);
        str_assign(&w.m[0].peer_urls[0], xstrdup("http://192.168.1.1:2380"));
        refused(&w, true, true, "its peer URL is http://192.168.1.1:2380");
        world_release(&w);

        world_init(&w, 3); /* a node-named member elsewhere than its machine's peer URL */
        rename_member(&w, 0, "node-a");
        str_assign(&w.m[0].peer_urls[0], xstrdup("http://192.168.1.1:2380"));
        refused(&w, true, true,
                "member node-a on 10.0.0.11: its peer URL is http://192.168.1.1:2380, the "
                "spec's http://10.0.0.11:2380");
        world_release(&w);

        world_init(&w, 3); /* one name on two machines */
        rename_member(&w, 0, "prod-1");
        refused(&w, true, true, "member prod-1 runs on two machines (10.0.0.11 and 10.0.0.12)");
        world_release(&w);

        world_init(&w, 3); /* a node name would take the name another member has */
        rename_member(&w, 0, "prod-2");
        rename_member(&w, 2, "node-c");
        refused(&w, true, true,
                "member node-c on 10.0.0.13 would be named prod-2 (its machine's position in "
                "spec.hosts), the name of member prod-2 on 10.0.0.11");
        world_release(&w);

        world_init(&w, 3); /* one machine does not run its member */
        hosts_running_release(w.run[1]);
        free(w.run[1]);
        w.run[1] = NULL;
        refused(&w, true, true, "etcd lists 3 members but 2 of the spec's machines run etcd");
        world_release(&w);
}

/* ---- TLS ------------------------------------------------------------------ */

static void test_parse_kubeadm_tls(void **state)
{
        (void)state;
        const char *y = "kind: Pod\nspec:\n  containers:\n  - name: etcd\n    command:\n"
                        "    - etcd\n    - --name=prod-0\n    - --data-dir=/var/lib/etcd\n"
                        "    - --advertise-client-urls=https://10.0.0.11:2379\n"
                        "    - --cert-file=/etc/kubernetes/pki/etcd/server.crt\n"
                        "    - --client-cert-auth=true\n"
                        "    - --trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt\n"
                        "    - --peer-cert-file\n    - /etc/kubernetes/pki/etcd/peer.crt\n"
                        "    - --peer-trusted-ca-file=/etc/kubernetes/pki/etcd/peer-ca.crt\n";
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(hosts_running_parse_manifest("etcd.yaml", y, strlen(y), &r, &d), 0);
        assert_true(r.tls);
        assert_string_equal(r.trusted_ca_file, "/etc/kubernetes/pki/etcd/ca.crt");
        assert_string_equal(r.peer_trusted_ca_file, "/etc/kubernetes/pki/etcd/peer-ca.crt");
        assert_string_equal(r.cert_file, "/etc/kubernetes/pki/etcd/server.crt");
        assert_string_equal(r.peer_cert_file, "/etc/kubernetes/pki/etcd/peer.crt");
        /* kubeadm's key lies beside its certificate */
        char *key = hosts_running_ca_key_file(&r);
        assert_string_equal(key, "/etc/kubernetes/pki/etcd/ca.key");
        free(key);
        str_assign(&r.trusted_ca_file, xstrdup("/etc/etcd/ca.pem"));
        assert_null(hosts_running_ca_key_file(&r));
        str_assign(&r.trusted_ca_file, xstrdup("/etc/etcd/.crt"));
        assert_null(hosts_running_ca_key_file(&r));
        hosts_running_release(&r);
        diag_list_release(&d);

        /* explicitly off is no TLS */
        const char *off = "kind: Pod\nspec: {containers: [{command: [etcd, --name=a-0, "
                          "--data-dir=/d, --client-cert-auth=false]}]}\n";
        assert_int_equal(hosts_running_parse_manifest("m.yaml", off, strlen(off), &r, &d), 0);
        assert_false(r.tls);
        hosts_running_release(&r);
        diag_list_release(&d);
}

static void test_decide_adopts_tls(void **state)
{
        (void)state;
        world w;
        world_init_tls(&w, SPEC_TLS);
        char *why = NULL;
        assert_int_equal(hosts_adopt_check_tls(w.c, w.run, &why), 1);
        assert_null(why);
        adopt_plan p;
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, &w.list, true, &p, &why), 1);
        assert_null(why);
        assert_int_equal(p.n, 3);
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(p.steps[i].id, 0x1000 + i);
                assert_true(p.steps[i].restart);
                assert_string_equal(p.steps[i].peer_url, w.m[i].peer_urls[0]);
                assert_true(strneq(p.steps[i].client_url, "https://", 8));
        }
        adopt_plan_release(&p);
        world_release(&w);

        /* kubeadm's node names, with TLS: found by their https peer URLs */
        world_init_tls(&w, SPEC_TLS);
        rename_member(&w, 0, "cp-a");
        rename_member(&w, 1, "cp-b");
        rename_member(&w, 2, "cp-c");
        assert_int_equal(hosts_adopt_check_tls(w.c, w.run, &why), 1);
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, &w.list, true, &p, &why), 1);
        assert_string_equal(p.steps[1].member, "prod-1");
        assert_string_equal(p.steps[1].running_name, "cp-b");
        assert_string_equal(p.steps[1].peer_url, "https://10.0.0.12:2380");
        adopt_plan_release(&p);
        world_release(&w);

        /* without TLS anywhere the TLS half has nothing to do */
        world_init(&w, 3);
        assert_int_equal(hosts_adopt_check_tls(w.c, w.run, &why), 0);
        assert_null(why);
        world_release(&w);
}

/* The TLS half refuses (and so does the whole decision) with want in the reason. */
static void refused_tls(world *w, const char *want)
{
        char *why = NULL;
        int k = hosts_adopt_check_tls(w->c, w->run, &why);
        if (k != -EPERM || !why || !strstr(why, want))
                fail_msg("want a TLS refusal with \"%s\", got %d: %s", want, k, why ? why : "");
        free(why);
        refused(w, true, true, want);
}

static void test_decide_refusals_tls(void **state)
{
        (void)state;
        world w;

        world_init_tls(&w, ""); /* the spec has no TLS */
        refused_tls(&w, "10.0.0.11 runs etcd with TLS (/etc/kubernetes/manifests/etcd.yaml) but "
                        "the spec has no TLS; set tls.provider: auto with tls.client.enabled and "
                        "tls.peer.enabled true");
        world_release(&w);

        world_init_tls(&w, "  tls: {provider: auto, peer: {enabled: false}}\n");
        refused_tls(&w, "does not enable both client and peer TLS; set tls.provider: auto");
        world_release(&w);

        world_init_tls(&w,
                       "  tls: {provider: secrets, client: {enabled: true, secretRef: {name: a}}, "
                       "peer: {enabled: true, secretRef: {name: b}}, operatorClient: {secretRef: "
                       "{name: c}}}\n");
        refused_tls(&w, "asks for another TLS provider than auto");
        world_release(&w);

        world_init(&w, 3); /* a cluster without TLS, a spec with */
        etcd_cluster_free(w.c);
        w.c = cluster_tls(3, SPEC_TLS);
        refused_tls(&w, "10.0.0.11 runs etcd without TLS (/etc/kubernetes/manifests/etcd.yaml) "
                        "but the spec asks for TLS; remove spec.tls");
        world_release(&w);

        world_init_tls(&w, SPEC_TLS); /* one machine without TLS */
        w.run[2]->tls = false;
        refused_tls(&w, "10.0.0.13 runs etcd without TLS");
        world_release(&w);

        world_init_tls(&w, SPEC_TLS);
        str_assign(&w.run[1]->advertise_client_urls,
                   xstrdup("https://10.0.0.12:2379,http://127.0.0.1:2379"));
        refused_tls(&w, "advertises client URLs https://10.0.0.12:2379,http://127.0.0.1:2379");
        world_release(&w);

        world_init_tls(&w, SPEC_TLS);
        str_assign(&w.run[1]->initial_advertise_peer_urls, xstrdup("http://10.0.0.12:2380"));
        refused_tls(&w, "advertises peer URLs http://10.0.0.12:2380");
        world_release(&w);

        world_init_tls(&w, SPEC_TLS);
        str_assign(&w.run[0]->peer_trusted_ca_file, NULL);
        refused_tls(&w, "has no --peer-trusted-ca-file");
        world_release(&w);

        world_init_tls(&w, SPEC_TLS);
        str_assign(&w.run[2]->trusted_ca_file, xstrdup("/etc/etcd/ca.pem"));
        refused_tls(&w, "the CA file /etc/etcd/ca.pem does not end in .crt");
        world_release(&w);

        world_init_tls(&w, SPEC_TLS); /* clashing names: refused before any CA is read */
        rename_member(&w, 0, "node-a");
        rename_member(&w, 1, "prod-0");
        refused_tls(&w, "member node-a on 10.0.0.11 would be named prod-0");
        world_release(&w);

        world_init_tls(&w, SPEC_TLS); /* etcd lists an http peer URL */
        str_assign(&w.m[0].peer_urls[0], xstrdup("http://10.0.0.11:2380"));
        refused(&w, true, true,
                "its peer URL is http://10.0.0.11:2380, the spec's https://10.0.0.11:2380");
        world_release(&w);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_kubeadm_yaml),
            cmocka_unit_test(test_parse_json_and_tls),
            cmocka_unit_test(test_parse_refusals),
            cmocka_unit_test(test_decide_adopts),
            cmocka_unit_test(test_decide_adopts_node_names),
            cmocka_unit_test(test_decide_nothing_runs),
            cmocka_unit_test(test_decide_refusals),
            cmocka_unit_test(test_parse_kubeadm_tls),
            cmocka_unit_test(test_decide_adopts_tls),
            cmocka_unit_test(test_decide_refusals_tls),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

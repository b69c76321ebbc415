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
#include "util/strbuf.h"
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
                    "without --data-dir");
        parse_fails("kind: Pod\nspec: {containers: [{command: [etcd, --name=x, --data-dir=/d, "
                    "--config-file=/etc/etcd.yml]}]}\n",
                    "--config-file");
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
        key = hosts_running_ca_key_file(&r);
        assert_string_equal(key, "/etc/etcd/ca-key.pem");
        free(key);
        str_assign(&r.trusted_ca_file, xstrdup("/etc/etcd/ca.cer"));
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
        str_assign(&w.run[2]->trusted_ca_file, xstrdup("/etc/etcd/ca.cer"));
        refused_tls(&w, "the CA file /etc/etcd/ca.cer ends in neither .crt nor .pem");
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

/* ---- systemd units ------------------------------------------------------- */

/* Debian's etcd-server package: the unit, and /etc/default/etcd as an operator edits it. */
#define DEBIAN_UNIT                                                                                \
        "[Unit]\n"                                                                                 \
        "Description=etcd - highly-available key value store\n"                                    \
        "Documentation=https://etcd.io/docs\n"                                                     \
        "Documentation=man:etcd\n"                                                                 \
        "After=network.target\n"                                                                   \
        "Wants=network-online.target\n"                                                            \
        "\n"                                                                                       \
        "[Service]\n"                                                                              \
        "Environment=DAEMON_ARGS=\n"                                                               \
        "Environment=ETCD_NAME=%H\n"                                                               \
        "Environment=ETCD_DATA_DIR=/var/lib/etcd/default\n"                                        \
        "EnvironmentFile=-/etc/default/%p\n"                                                       \
        "Type=notify\n"                                                                            \
        "User=etcd\n"                                                                              \
        "PermissionsStartOnly=true\n"                                                              \
        "#ExecStart=/bin/sh -c \"GOMAXPROCS=$(nproc) /usr/bin/etcd $DAEMON_ARGS\"\n"               \
        "ExecStart=/usr/bin/etcd $DAEMON_ARGS\n"                                                   \
        "Restart=on-abnormal\n"                                                                    \
        "#RestartSec=10s\n"                                                                        \
        "LimitNOFILE=65536\n"                                                                      \
        "\n"                                                                                       \
        "[Install]\n"                                                                              \
        "WantedBy=multi-user.target\n"                                                             \
        "Alias=etcd2.service\n"

#define DEBIAN_DEFAULT                                                                             \
        "## etcd(1) daemon options\n"                                                              \
        "## See \"/usr/share/doc/etcd-server/op-guide/configuration.md.gz\"\n"                     \
        "\n"                                                                                       \
        "### Member flags\n"                                                                       \
        "\n"                                                                                       \
        "##### --name\n"                                                                           \
        "## Human-readable name for this member.\n"                                                \
        "## default: host name returned by `hostname`.\n"                                          \
        "# ETCD_NAME=\"hostname\"\n"                                                               \
        "\n"                                                                                       \
        "##### --data-dir\n"                                                                       \
        "## Path to the data directory.\n"                                                         \
        "## default: \"/var/lib/etcd/default/\"\n"                                                 \
        "ETCD_DATA_DIR=\"/var/lib/etcd/prod\"\n"                                                   \
        "ETCD_INITIAL_CLUSTER=\"node-a=http://10.0.0.11:2380,node-b=http://10.0.0.12:2380,"        \
        "node-c=http://10.0.0.13:2380\"\n"                                                         \
        "ETCD_LISTEN_PEER_URLS=\"http://10.0.0.11:2380\"\n"                                        \
        "  export ETCD_ADVERTISE_CLIENT_URLS='http://10.0.0.11:2379'\n"                            \
        "DAEMON_ARGS=\"--initial-advertise-peer-urls http://10.0.0.11:2380 \\\n"                   \
        "  --listen-client-urls=http://10.0.0.11:2379\"\n"

/* kubespray: /etc/systemd/system/etcd.service and /etc/etcd.env (TLS on both surfaces). */
#define KUBESPRAY_UNIT                                                                             \
        "[Unit]\n"                                                                                 \
        "Description=etcd\n"                                                                       \
        "After=network.target\n"                                                                   \
        "\n"                                                                                       \
        "[Service]\n"                                                                              \
        "Type=notify\n"                                                                            \
        "User=root\n"                                                                              \
        "EnvironmentFile=/etc/etcd.env\n"                                                          \
        "ExecStart=/usr/local/bin/etcd\n"                                                          \
        "NotifyAccess=all\n"                                                                       \
        "Restart=always\n"                                                                         \
        "RestartSec=10s\n"                                                                         \
        "LimitNOFILE=40000\n"                                                                      \
        "\n"                                                                                       \
        "[Install]\n"                                                                              \
        "WantedBy=multi-user.target\n"

#define KUBESPRAY_ENV                                                                              \
        "# Environment file for etcd v3.5.16\n"                                                    \
        "ETCD_DATA_DIR=/var/lib/etcd\n"                                                            \
        "ETCD_ADVERTISE_CLIENT_URLS=https://10.0.0.11:2379\n"                                      \
        "ETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.11:2380\n"                                \
        "ETCD_INITIAL_CLUSTER_STATE=existing\n"                                                    \
        "ETCD_METRICS=basic\n"                                                                     \
        "ETCD_LISTEN_CLIENT_URLS=https://10.0.0.11:2379,https://127.0.0.1:2379\n"                  \
        "ETCD_ELECTION_TIMEOUT=5000\n"                                                             \
        "ETCD_HEARTBEAT_INTERVAL=250\n"                                                            \
        "ETCD_INITIAL_CLUSTER_TOKEN=k8s_etcd\n"                                                    \
        "ETCD_LISTEN_PEER_URLS=https://10.0.0.11:2380\n"                                           \
        "ETCD_NAME=etcd1\n"                                                                        \
        "ETCD_PROXY=off\n"                                                                         \
        "ETCD_INITIAL_CLUSTER=etcd1=https://10.0.0.11:2380,etcd2=https://10.0.0.12:2380,"          \
        "etcd3=https://10.0.0.13:2380\n"                                                           \
        "ETCD_AUTO_COMPACTION_RETENTION=8\n"                                                       \
        "ETCD_SNAPSHOT_COUNT=10000\n"                                                              \
        "\n"                                                                                       \
        "# TLS settings\n"                                                                         \
        "ETCD_TRUSTED_CA_FILE=/etc/ssl/etcd/ssl/ca.pem\n"                                          \
        "ETCD_CERT_FILE=/etc/ssl/etcd/ssl/member-node1.pem\n"                                      \
        "ETCD_KEY_FILE=/etc/ssl/etcd/ssl/member-node1-key.pem\n"                                   \
        "ETCD_CLIENT_CERT_AUTH=true\n"                                                             \
        "\n"                                                                                       \
        "ETCD_PEER_TRUSTED_CA_FILE=/etc/ssl/etcd/ssl/ca.pem\n"                                     \
        "ETCD_PEER_CERT_FILE=/etc/ssl/etcd/ssl/member-node1.pem\n"                                 \
        "ETCD_PEER_KEY_FILE=/etc/ssl/etcd/ssl/member-node1-key.pem\n"                              \
        "ETCD_PEER_CLIENT_CERT_AUTH=True\n"

/*
 * The pipeline hosts.c runs: the unit, then each file it names (texts[j]
 * for env_files[j]; NULL: the file does not exist), then etcd's view.
 */
static int unit_running(const char *unit, const char *const *texts, const char *hostname,
                        hosts_running *r, diag_list *d)
{
        hosts_unit u = {0};
        hosts_unit_context ctx = {.unit_name = "etcd.service", .hostname = hostname};
        int k = hosts_unit_parse("etcd.service", unit, strlen(unit), &ctx, &u, d);
        char **env = NULL;
        size_t n_env = 0;
        for (size_t j = 0; k == 0 && j < u.n_env_files; j++) {
                if (!texts || !texts[j]) {
                        assert_true(u.env_file_optional[j]);
                        continue;
                }
                k = hosts_env_file_parse(u.env_files[j], texts[j], strlen(texts[j]), &env, &n_env,
                                         d);
        }
        if (k == 0)
                k = hosts_running_from_unit("etcd.service", &u, env, n_env, r, d);
        strv_free(env);
        hosts_unit_release(&u);
        return k;
}

static void test_unit_debian(void **state)
{
        (void)state;
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        /* the file overrides Environment=; ETCD_NAME comes from %H; $DAEMON_ARGS splits */
        const char *texts[] = {DEBIAN_DEFAULT};
        assert_int_equal(unit_running(DEBIAN_UNIT, texts, "node-a", &r, &d), 0);
        assert_string_equal(r.name, "node-a");
        assert_string_equal(r.data_dir, "/var/lib/etcd/prod");
        assert_string_equal(r.advertise_client_urls, "http://10.0.0.11:2379");
        assert_string_equal(r.initial_advertise_peer_urls, "http://10.0.0.11:2380");
        assert_non_null(strstr(r.initial_cluster, "node-c=http://10.0.0.13:2380"));
        assert_false(r.tls);
        hosts_running_release(&r);

        /* without /etc/default/etcd (optional): the unit's own defaults */
        assert_int_equal(unit_running(DEBIAN_UNIT, NULL, "node-b", &r, &d), 0);
        assert_string_equal(r.name, "node-b");
        assert_string_equal(r.data_dir, "/var/lib/etcd/default");
        assert_null(r.advertise_client_urls);
        hosts_running_release(&r);

        /* as `systemctl cat` shows it (what hosts.c reads): the package's unit, then a
         * drop-in that replaces ExecStart= and adds to the environment */
        const char *cat = "# /lib/systemd/system/etcd.service\n" DEBIAN_UNIT
                          "\n# /etc/systemd/system/etcd.service.d/override.conf\n"
                          "[Service]\nEnvironment=ETCD_DATA_DIR=/srv/etcd\nExecStart=\n"
                          "ExecStart=/usr/local/bin/etcd --name=cp-1\n";
        assert_int_equal(unit_running(cat, texts, "node-a", &r, &d), 0);
        assert_string_equal(r.name, "cp-1");
        /* /etc/default/etcd (the file) still wins over Environment= */
        assert_string_equal(r.data_dir, "/var/lib/etcd/prod");
        hosts_running_release(&r);
        assert_int_equal(unit_running(cat, NULL, "node-a", &r, &d), 0);
        assert_string_equal(r.data_dir, "/srv/etcd");
        hosts_running_release(&r);

        /* the unit's file list and user, as hosts.c reads them */
        hosts_unit u = {0};
        hosts_unit_context ctx = {.unit_name = "etcd.service", .hostname = "node-a"};
        assert_int_equal(
            hosts_unit_parse("etcd.service", DEBIAN_UNIT, strlen(DEBIAN_UNIT), &ctx, &u, &d), 0);
        assert_int_equal(u.n_env_files, 1);
        assert_string_equal(u.env_files[0], "/etc/default/etcd");
        assert_true(u.env_file_optional[0]);
        assert_string_equal(u.user, "etcd");
        assert_int_equal(u.n_exec, 2);
        hosts_unit_release(&u);
        assert_int_equal(d.n, 0);
        diag_list_release(&d);
}

static void test_unit_kubespray(void **state)
{
        (void)state;
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        const char *texts[] = {KUBESPRAY_ENV};
        assert_int_equal(unit_running(KUBESPRAY_UNIT, texts, NULL, &r, &d), 0);
        assert_string_equal(r.name, "etcd1");
        assert_string_equal(r.data_dir, "/var/lib/etcd");
        assert_string_equal(r.advertise_client_urls, "https://10.0.0.11:2379");
        assert_string_equal(r.initial_advertise_peer_urls, "https://10.0.0.11:2380");
        assert_string_equal(r.trusted_ca_file, "/etc/ssl/etcd/ssl/ca.pem");
        assert_string_equal(r.peer_trusted_ca_file, "/etc/ssl/etcd/ssl/ca.pem");
        assert_string_equal(r.cert_file, "/etc/ssl/etcd/ssl/member-node1.pem");
        assert_string_equal(r.peer_cert_file, "/etc/ssl/etcd/ssl/member-node1.pem");
        assert_true(r.tls);
        /* kubespray's CA is ca.pem, its key ca-key.pem beside it */
        char *key = hosts_running_ca_key_file(&r);
        assert_string_equal(key, "/etc/ssl/etcd/ssl/ca-key.pem");
        free(key);
        hosts_running_release(&r);
        diag_list_release(&d);
}

/* Written by hand: continuations, quotes, escapes, prefixes, a flag beside its variable. */
#define HAND_UNIT                                                                                  \
        "# etcd for prod, a comment that ends in a backslash \\\n"                                 \
        "[Service]\n"                                                                              \
        "Environment=\"ETCD_NAME=from env\" ETCD_DATA_DIR=/wrong 'PEER=http://10.0.0.11:2380'\n"   \
        "Environment=ETCD_CLIENT_CERT_AUTH=false\n"                                                \
        "ExecStart=/bin/false\n"                                                                   \
        "ExecStart=\n"                                                                             \
        "ExecStart=-@/opt/etcd/bin/etcd etcd \\\n"                                                 \
        "    --name prod-0 \\\n"                                                                   \
        "# a comment inside the command\n"                                                         \
        "    \"--data-dir=/var/lib/etcd/my prod\" \\\n"                                            \
        "    --initial-advertise-peer-urls=${PEER} \\\n"                                           \
        "    --advertise-client-urls 'http://10.0.0.11:2379' \\\n"                                 \
        "    --initial-cluster=prod-0=$${PEER}\\x2c\n"                                             \
        "[Install]\n"                                                                              \
        "ExecStart=/not/this\n"

static void test_unit_hand_written(void **state)
{
        (void)state;
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(unit_running(HAND_UNIT, NULL, NULL, &r, &d), 0);
        /* the command line wins over ETCD_NAME and ETCD_DATA_DIR */
        assert_string_equal(r.name, "prod-0");
        assert_string_equal(r.data_dir, "/var/lib/etcd/my prod");
        assert_string_equal(r.initial_advertise_peer_urls, "http://10.0.0.11:2380");
        assert_string_equal(r.advertise_client_urls, "http://10.0.0.11:2379");
        assert_string_equal(r.initial_cluster, "prod-0=${PEER},");
        assert_false(r.tls);
        hosts_running_release(&r);

        /* gitcd's own unit (targets/hosts.c unit_text): single-quoted words */
        const char *own = "# gitcd-member: prod-1\n# gitcd-config-hash: abc\n[Unit]\n"
                          "Description=etcd member prod-1 of default/prod (managed by gitcd)\n\n"
                          "[Service]\nType=notify\nExecStart='/usr/local/bin/etcd' "
                          "'--name=prod-1' '--data-dir=/var/lib/etcd/prod' "
                          "'--advertise-client-urls=http://10.0.0.12:2379'\nRestart=always\n";
        assert_int_equal(unit_running(own, NULL, NULL, &r, &d), 0);
        assert_string_equal(r.name, "prod-1");
        assert_string_equal(r.data_dir, "/var/lib/etcd/prod");
        hosts_running_release(&r);

        /* a word of gitcd's own unit reads back as written, '%', '$' and quotes included */
        const char *odd[] = {"--name=prod-%n$1", "--data-dir=/var/lib/etcd/100% ${X} it's", NULL};
        strbuf ob = STRBUF_INIT;
        sb_append(&ob, "[Service]\nExecStart='/usr/local/bin/etcd'");
        for (size_t i = 0; odd[i]; i++) {
                _cleanup_free_ char *w = hosts_unit_word(odd[i]);
                sb_printf(&ob, " %s", w);
        }
        sb_append(&ob, "\n");
        assert_int_equal(unit_running(sb_str(&ob), NULL, NULL, &r, &d), 0);
        assert_string_equal(r.name, "prod-%n$1");
        assert_string_equal(r.data_dir, "/var/lib/etcd/100% ${X} it's");
        hosts_running_release(&r);
        sb_release(&ob);

        /* ':' turns expansion off; without any name etcd calls itself "default" */
        const char *plain = "[Service]\nEnvironment=D=/x\nExecStart=:/usr/bin/etcd --data-dir=$D\n";
        assert_int_equal(unit_running(plain, NULL, NULL, &r, &d), 0);
        assert_string_equal(r.name, "default");
        assert_string_equal(r.data_dir, "$D");
        hosts_running_release(&r);
        assert_int_equal(d.n, 0);
        diag_list_release(&d);
}

static void unit_fails(const char *unit, const char *env, const char *want)
{
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        const char *texts[] = {env};
        assert_int_equal(unit_running(unit, env ? texts : NULL, "h", &r, &d), -EINVAL);
        assert_true(d.n > 0);
        bool found = false;
        for (size_t i = 0; i < d.n; i++)
                found = found || strstr(d.items[i].message, want);
        if (!found)
                fail_msg("no diagnostic with \"%s\" for:\n%s", want, unit);
        assert_null(r.name);
        diag_list_release(&d);
}

static void test_unit_refusals(void **state)
{
        (void)state;
        unit_fails("[Unit]\nDescription=x\n", NULL, "no ExecStart=");
        unit_fails("[Service]\nExecStart=/a\nExecStart=/b\n", NULL, "more than one ExecStart=");
        unit_fails("[Service]\nExecStart=/usr/bin/etcd \"--name=x\n", NULL, "not closed");
        unit_fails("[Service]\nExecStart=/usr/bin/etcd --name=%Z\n", NULL, "%Z is not supported");
        unit_fails("[Service]\nExecStart=/usr/bin/etcd --data-dir=/d\\q\n", NULL, "bad escape");
        unit_fails("[Service]\nExecStart=/usr/bin/etcd --name=x\n", NULL, "without --data-dir");
        unit_fails("[Service]\nExecStart=/usr/bin/etcd --data-dir=/d ${X\n", NULL, "${");
        unit_fails("[Service]\nEnvironment=ETCD_CONFIG_FILE=/etc/etcd/etcd.yml\n"
                   "ExecStart=/usr/bin/etcd\n",
                   NULL, "--config-file");
        unit_fails("[Service]\nEnvironment=1X=2\nExecStart=/usr/bin/etcd\n", NULL,
                   "not NAME=VALUE");
        unit_fails("[Service]\nEnvironmentFile=etc/x\nExecStart=/usr/bin/etcd\n", NULL,
                   "not an absolute path");
        unit_fails("[Service\nExecStart=/usr/bin/etcd\n", NULL, "without its ]");
        unit_fails("[Service]\njust words\n", NULL, "neither a section nor Key=Value");
        unit_fails("[Service]\nEnvironmentFile=/etc/e\nExecStart=/usr/bin/etcd\n",
                   "ETCD_DATA_DIR=\"/d\n", "not closed");
        /* a variable of 100 words used 50 times: refused, never thousands of words */
        strbuf big = STRBUF_INIT;
        sb_append(&big, "[Service]\nEnvironment=\"A=");
        for (int i = 0; i < 100; i++)
                sb_append(&big, " a");
        sb_append(&big, "\"\nExecStart=/usr/bin/etcd --data-dir=/d");
        for (int i = 0; i < 50; i++)
                sb_append(&big, " $A");
        sb_append(&big, "\n");
        unit_fails(sb_str(&big), NULL, "longer than");
        sb_release(&big);
        char *huge = xcalloc(2u << 20, 1);
        memset(huge, '#', (2u << 20) - 1);
        unit_fails(huge, NULL, "larger than");
        free(huge);
}

static void test_env_file(void **state)
{
        (void)state;
        const char *text = "# comment\n; also a comment\n\n"
                           "A=plain value  \n"
                           "export B='single $quoted'\n"
                           "C=\"double \\\"q\\\" \\$x \\n\"\n"
                           "D=one\\\ntwo\n"
                           "not an assignment\n"
                           "1BAD=x\n"
                           "E = spaced\n";
        char **env = NULL;
        size_t n = 0;
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(hosts_env_file_parse("f", text, strlen(text), &env, &n, &d), 0);
        assert_int_equal(n, 5);
        assert_string_equal(env[0], "A=plain value");
        assert_string_equal(env[1], "B=single $quoted");
        assert_string_equal(env[2], "C=double \"q\" $x \\n");
        assert_string_equal(env[3], "D=onetwo");
        assert_string_equal(env[4], "E=spaced");
        strv_free(env);
        env = NULL;
        n = 0;
        assert_int_equal(d.n, 0);

        /* more than 1 MiB (hosts.c reads one byte more than that): refused, not cut short */
        size_t big = (1u << 20) + 1;
        char *huge = xmalloc(big + 1);
        memset(huge, 'x', big);
        memcpy(huge, "A=", 2);
        huge[big] = 0;
        assert_int_equal(hosts_env_file_parse("f", huge, big, &env, &n, &d), -EINVAL);
        assert_int_equal(n, 0);
        free(huge);
        assert_int_equal(d.n, 1);
        diag_list_release(&d);
}

/* Debian units on three machines, members named after the machines: adopted as for kubeadm. */
static void test_decide_adopts_units(void **state)
{
        (void)state;
        world w;
        world_init(&w, 3);
        static const char *const host[] = {"node-a", "node-b", "node-c"};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *def =
                    xasprintf("ETCD_DATA_DIR=/var/lib/etcd/prod\n"
                              "ETCD_ADVERTISE_CLIENT_URLS=http://10.0.0.1%zu:2379\n"
                              "DAEMON_ARGS=\"--initial-advertise-peer-urls "
                              "http://10.0.0.1%zu:2380\"\n",
                              i + 1, i + 1);
                const char *texts[] = {def};
                diag_list d = DIAG_LIST_INIT;
                hosts_running_release(w.run[i]);
                assert_int_equal(unit_running(DEBIAN_UNIT, texts, host[i], w.run[i], &d), 0);
                str_assign(&w.run[i]->file, xstrdup("/etc/systemd/system/etcd.service"));
                str_assign(&w.m[i].name, xstrdup(host[i]));
                diag_list_release(&d);
        }
        adopt_plan p;
        char *why = NULL;
        assert_int_equal(hosts_adopt_decide(w.c, 2380, w.run, &w.list, true, &p, &why), 1);
        for (size_t i = 0; i < 3; i++) {
                char want[16];
                snprintf(want, sizeof(want), "prod-%zu", i);
                assert_string_equal(p.steps[i].member, want);
                assert_string_equal(p.steps[i].running_name, host[i]);
                assert_true(p.steps[i].restart);
                assert_string_equal(p.steps[i].replaces, "/etc/systemd/system/etcd.service");
        }
        adopt_plan_release(&p);
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
            cmocka_unit_test(test_unit_debian),
            cmocka_unit_test(test_unit_kubespray),
            cmocka_unit_test(test_unit_hand_written),
            cmocka_unit_test(test_unit_refusals),
            cmocka_unit_test(test_env_file),
            cmocka_unit_test(test_decide_adopts_units),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

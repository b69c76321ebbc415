/*
 * The hosts target end to end, through the real `gitcd plan`, `gitcd
 * apply --target hosts` and `gitcd status`: five real sshd "machines" on
 * 127.0.0.2-6 (tests/harness/sshd.h), real etcd 3.5.16 members, host keys
 * checked against a real known_hosts file. The host agent
 * (tests/harness/hostagent.h) is a simulator: it plays kubelet for each
 * machine's static Pod manifest folder, because no kubelet runs here.
 *
 * One lifecycle under a writer whose every acknowledged key is read back:
 * the refusals (spec.hosts with another target, --target hosts without
 * spec.hosts), the plan per machine, bootstrap 3 across three machines,
 * 3 → 5 → 3, a machine's data disk wiped (the member is replaced, quorum
 * kept), a machine that stops answering SSH (quorum kept, another cluster
 * still changes); and, first, a machine with a wrong host key (refused,
 * nothing written on it).
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/harness/hostagent.h"
#include "tests/harness/sshd.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MACHINES 5
#define VERSION  "3.5.16"

static sshd_lab *lab;
static hostagent *agent;
static char *ports; /* --hosts-ports */

static char *machine_path(size_t i, const char *path)
{
        return xasprintf("%s%s", lab->machines[i].root, path);
}

/* ---- a writer that records every acknowledged put ----------------------- */

typedef struct writer {
        pthread_t thread;
        char *endpoints;
        volatile int stop;
        int acked;
} writer;

static void *writer_main(void *arg)
{
        writer *w = arg;
        etcd_client_opts o = {
            .endpoints = w->endpoints, .call_timeout_ms = 3000, .dial_timeout_ms = 500};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) < 0)
                return NULL;
        int next = 0;
        while (!w->stop) {
                char key[32];
                snprintf(key, sizeof(key), "w/%05d", next);
                if (etcd_put(c, key, key, strlen(key), NULL) == 0)
                        w->acked = ++next;
                usleep(20 * 1000);
        }
        etcd_client_free(c);
        return NULL;
}

static writer *writer_start(const char *endpoints)
{
        writer *w = XNEW(writer);
        w->endpoints = xstrdup(endpoints);
        assert_int_equal(pthread_create(&w->thread, NULL, writer_main, w), 0);
        return w;
}

static void writer_check(writer *w, e2e *e, const char *name)
{
        w->stop = 1;
        pthread_join(w->thread, NULL);
        assert_true(w->acked > 10);
        etcd_client *c = e2e_client(e, name);
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, "w/", true, &l), 0);
        assert_true(l->n >= (size_t)w->acked);
        for (int i = 0; i < w->acked; i++) {
                char key[32];
                snprintf(key, sizeof(key), "w/%05d", i);
                assert_string_equal(l->kvs[i].key, key);
        }
        etcd_kv_list_free(l);
        etcd_client_free(c);
        free(w->endpoints);
        free(w);
}

/* ---- the cluster files and the commands --------------------------------- */

/* A cluster on machines [first, first + n) of the lab, static Pods. */
static void write_cluster(e2e *e, const char *name, int replicas, size_t first, size_t n)
{
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb,
                  "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: %s\n"
                  "spec:\n  replicas: %d\n  version: \"" VERSION "\"\n  hosts:\n"
                  "    mode: staticPod\n    machines:\n",
                  name, replicas);
        for (size_t i = first; i < first + n; i++) {
                _cleanup_free_ char *data = machine_path(i, "/var/lib/etcd");
                _cleanup_free_ char *pods = machine_path(i, "/etc/kubernetes/manifests");
                sb_printf(&sb,
                          "    - address: %s\n      ssh: {port: %d}\n      dataDir: %s/%s\n"
                          "      manifestDir: %s\n",
                          lab->machines[i].address, lab->machines[i].port, data, name, pods);
        }
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, sb_str(&sb));
        sb_release(&sb);
}

/* gitcd <cmd> --source S --target hosts <the lab's SSH flags> [extra...] */
static int hosts_cmd(e2e *e, const char *cmd, const char *known_hosts, char **ret_out,
                     char **ret_err, const char *extra1, const char *extra2)
{
        const char *args[] = {cmd,
                              "--source",
                              e->source,
                              "--target",
                              "hosts",
                              "--hosts-ssh-key",
                              lab->client_key,
                              "--hosts-known-hosts",
                              known_hosts ? known_hosts : lab->known_hosts,
                              "--hosts-ports",
                              ports,
                              extra1,
                              extra2,
                              NULL};
        return e2e_runv(e, ret_out, ret_err, args);
}

static void apply_ok(e2e *e, const char *timeout)
{
        _cleanup_free_ char *out = NULL, *err = NULL;
        int k = hosts_cmd(e, "apply", NULL, &out, &err, "--timeout", timeout);
        if (k != 0) {
                _cleanup_free_ char *st = NULL;
                e2e_run(e, &st, "status", NULL);
                fail_msg("gitcd apply --target hosts exited %d:\n%s\nstatus:\n%s", k, err, st);
        }
}

static void assert_voters(e2e *e, const char *name, size_t n)
{
        etcd_members *l = e2e_members(e, name);
        if (l->n != n)
                fail_msg("%s: %zu members in etcd, want %zu", name, l->n, n);
        for (size_t i = 0; i < l->n; i++)
                assert_false(l->members[i].is_learner);
        etcd_members_free(l);
}

/* The lab machine a member's client URL points at. */
static size_t machine_of(e2e *e, const char *name, const char *member)
{
        json_t *st = e2e_status(e, name);
        size_t i, found = (size_t)-1;
        json_t *m;
        json_array_foreach(json_object_get(st, "members"), i, m)
        {
                if (!streq_ptr(json_string_value(json_object_get(m, "name")), member))
                        continue;
                const char *u = json_string_value(json_object_get(m, "client_url"));
                for (size_t j = 0; u && j < MACHINES; j++) {
                        _cleanup_free_ char *pre =
                            xasprintf("http://%s:", lab->machines[j].address);
                        if (strneq(u, pre, strlen(pre)))
                                found = j;
                }
        }
        json_decref(st);
        if (found == (size_t)-1)
                fail_msg("member %s of %s is on no machine", member, name);
        return found;
}

/* Progress on stderr, with the seconds since the test started (never asserted). */
static void stage(const char *what)
{
        static int64_t start;
        if (!start)
                start = now_mono_ms();
        fprintf(stderr, "[%5.1fs] %s\n", (double)(now_mono_ms() - start) / 1000.0, what);
}

static void test_lifecycle(void **state)
{
        (void)state;
        stage("refusals and plan");
        e2e *e = e2e_new();
        const char *cl = "hostly";

        /* Refusals first, on a fresh state: nothing is created by either. */
        write_cluster(e, cl, 3, 0, MACHINES);
        _cleanup_free_ char *out = NULL, *err = NULL;
        const char *local[] = {"apply", "--source", e->source, "--timeout", "20s", NULL};
        assert_int_not_equal(e2e_runv(e, &out, &err, local), 0);
        assert_non_null(strstr(err, "spec.hosts"));
        assert_non_null(strstr(err, "needs --target hosts"));
        free(out), free(err), out = err = NULL;
        e2e_write_file(
            e, "plain.yaml",
            "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: plain}\n");
        assert_int_not_equal(hosts_cmd(e, "plan", NULL, &out, &err, NULL, NULL), 0);
        if (!strstr(out, "default/plain has none") && !strstr(err, "default/plain has none"))
                fail_msg("plan --target hosts took in a cluster without spec.hosts:\n%s%s", out,
                         err);
        free(out), free(err), out = err = NULL;
        _cleanup_free_ char *plain = xasprintf("%s/plain.yaml", e->source);
        assert_int_equal(unlink(plain), 0);

        /* The plan lists, per machine, the files and commands apply writes and runs. */
        assert_int_equal(hosts_cmd(e, "plan", NULL, &out, &err, NULL, NULL), 0);
        assert_non_null(strstr(out, "no machine was contacted"));
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *manifest =
                    machine_path(i, "/etc/kubernetes/manifests/etcd-default-hostly.yaml");
                assert_non_null(strstr(out, manifest));
        }
        free(out), free(err), out = err = NULL;
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *data = machine_path(i, "/var/lib/etcd");
                assert_false(path_exists(data)); /* neither refusals nor the plan wrote */
        }

        /* Bootstrap 3 across three machines, then 3 → 5 → 3 under a writer. */
        stage("bootstrap 3");
        apply_ok(e, "90s");
        assert_voters(e, cl, 3);
        _cleanup_free_ char *eps = e2e_endpoints(e, cl);
        writer *w = writer_start(eps);
        write_cluster(e, cl, 5, 0, MACHINES);
        stage("scale to 5");
        apply_ok(e, "90s");
        assert_voters(e, cl, 5);
        write_cluster(e, cl, 3, 0, MACHINES);
        stage("scale to 3");
        apply_ok(e, "90s");
        assert_voters(e, cl, 3);

        /* Member 1's machine gets a new data disk: replaced, never restarted empty. */
        size_t wiped = machine_of(e, cl, "hostly-1");
        _cleanup_free_ char *dir = machine_path(wiped, "/var/lib/etcd/hostly");
        assert_int_equal(rm_rf(dir), 0);
        stage("data disk wiped");
        apply_ok(e, "90s");
        assert_voters(e, cl, 3);
        etcd_members *l = e2e_members(e, cl);
        for (size_t i = 0; i < l->n; i++)
                assert_string_not_equal(l->members[i].name, "hostly-1");
        etcd_members_free(l);
        int removes = e2e_audit_count(e, cl, "member.remove");
        assert_true(removes >= 3);

        /*
         * Machine of member 0 stops answering SSH: the cluster keeps quorum
         * (its etcd still runs, nothing is removed or replaced on the
         * strength of a machine that does not answer) and another cluster
         * on other machines is still created.
         */
        size_t down = machine_of(e, cl, "hostly-0");
        size_t other = down == MACHINES - 1 ? MACHINES - 2 : MACHINES - 1;
        /* the other cluster gets a machine no hostly member uses */
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *marker = machine_path(i, "/var/lib/etcd/hostly/gitcd-member");
                if (!path_exists(marker) && i != down)
                        other = i;
        }
        stage("a machine down");
        write_cluster(e, "solo", 1, other, 1);
        assert_int_equal(sshd_machine_stop(lab, down), 0);
        (void)hosts_cmd(e, "apply", NULL, &out, &err, "--timeout", "40s");
        free(out), free(err), out = err = NULL;
        assert_true(e2e_wait_ready(e, "solo", 1, 10));
        assert_voters(e, cl, 3);
        _cleanup_free_ char *m0 = machine_path(down, "/var/lib/etcd/hostly/gitcd-member");
        assert_true(path_exists(m0)); /* its member was left alone */
        assert_int_equal(e2e_audit_count(e, cl, "member.remove"), removes);
        assert_int_equal(sshd_machine_start(lab, down), 0);
        apply_ok(e, "90s");
        writer_check(w, e, cl);

        stage("done");
        e2e_free(e);
}

/*
 * A machine whose host key is not the one known_hosts lists: refused before
 * anything is sent, nothing written on it, and the user is told why. Its
 * own state and source, before the lifecycle.
 */
static void test_wrong_host_key(void **state)
{
        (void)state;
        stage("wrong host key");
        e2e *e = e2e_new();
        size_t spare = MACHINES - 1;
        _cleanup_free_ char *bad_kh = sshd_lab_known_hosts_with_wrong_key(lab, spare);
        write_cluster(e, "keyed", 1, spare, 1);
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_not_equal(hosts_cmd(e, "apply", bad_kh, &out, &err, "--timeout", "8s"), 0);
        /* the reason reaches the user: apply's output or the cluster's status */
        _cleanup_free_ char *st = NULL, *st_json = NULL;
        e2e_run(e, &st, "status", NULL);
        e2e_run(e, &st_json, "status", "-o", "json", "default/keyed", NULL);
        if (!strstr(out, "host key") && !strstr(err, "host key") && !strstr(st_json, "host key"))
                fail_msg("no word of the host key:\n%s%s\nstatus:\n%s%s", out, err, st, st_json);
        _cleanup_free_ char *keyed = machine_path(spare, "/var/lib/etcd/keyed");
        assert_false(path_exists(keyed));
        _cleanup_free_ char *keyed_pod =
            machine_path(spare, "/etc/kubernetes/manifests/etcd-default-keyed.yaml");
        assert_false(path_exists(keyed_pod));
        e2e_free(e);
}

static int setup(void **state)
{
        (void)state;
        if (!sshd_available() || !e2e_have_version(VERSION)) {
                fprintf(stderr, "sshd or etcd " VERSION " is not installed\n");
                exit(77);
        }
        signal(SIGPIPE, SIG_IGN);
        if (sshd_lab_start(MACHINES, &lab) < 0)
                return -1;
        ports =
            xasprintf("%d,%d,%d", harness_free_port(), harness_free_port(), harness_free_port());
        _cleanup_free_ char *etcd_bin = harness_etcd_path(VERSION, "etcd");
        const char *dirs[MACHINES + 1] = {0};
        char *owned[MACHINES];
        for (size_t i = 0; i < MACHINES; i++) {
                owned[i] = machine_path(i, "/etc/kubernetes/manifests");
                (void)mkdir_p(owned[i], 0755);
                dirs[i] = owned[i];
        }
        int k = hostagent_start(dirs, etcd_bin, lab->dir, &agent);
        for (size_t i = 0; i < MACHINES; i++)
                free(owned[i]);
        return k < 0 ? -1 : 0;
}

static int teardown(void **state)
{
        (void)state;
        hostagent_free(agent);
        sshd_lab_free(lab);
        free(ports);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_wrong_host_key),
            cmocka_unit_test(test_lifecycle),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

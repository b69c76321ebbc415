/*
 * The target contract (targets/target.h), checked the same way against
 * every target: the fake (tests/fake/), the local target (real etcd
 * processes; skipped without the etcd 3.5.16 binary) and the Kubernetes
 * target (a real kube-apiserver without a kubelet; skipped with the reason
 * when the kube-apiserver is not built) and the hosts target (a real sshd
 * "machine" on 127.0.0.2 with real etcd, the host agent of
 * tests/harness/hostagent.h playing kubelet for its static Pod folder;
 * skipped without sshd). Where a kubelet would be needed (a Kubernetes
 * member running, the PVC writer's Pod Ready), this test plays it or
 * checks only what the target does without one, as each case says.
 *
 * What every target must do, whatever runs the members: placing a member
 * is stable; every operation is idempotent; an unknown member is absent;
 * the status reports the config hash the member was started with; a
 * stopped member keeps its place, a removed one is gone from the list; no
 * client TLS identity for a cluster without client TLS; a member's status
 * reports the identity of its data, and once its data is wiped (the way
 * each target loses it: a deleted folder, a deleted PVC) the member the
 * reconciler recorded is reported data lost and never started empty (every
 * target; the hosts target's own test also wipes a running member's disk);
 * the revision of a stopped member's data is read
 * with etcd's own tool, never while the member runs, and a member without
 * data has none. Then, the optional operations: a member removed with its
 * data kept is gone, and the kept data dropped (drop_kept_data, twice is
 * once); housekeeping and events (tick, wait_event, take_events) never
 * fail and name clusters as "namespace/name"; tls.provider auto's leaves
 * (tls_certificates), the member's own and the shared ones, renewed near
 * their end and not before (renew_tls); a snapshot never restored over a
 * member's data (-EEXIST), and, where members run, restored into a new
 * member that then starts on it (restore_member, with a snapshot etcdctl
 * saved; the fake takes any file); a Secret's keys as files
 * (secret_folder) and the PVC writer, one per cluster at a time
 * (writer_start, writer_stop), on the Kubernetes target, the only one with
 * them.
 *
 * Every target is also held to its kind in the registry (targets/registry.h:
 * its name, its capabilities, whether it adopts: adopt operations on the
 * hosts target only, checked absent on every other), and to the set of
 * operations it has (the same through the locked wrapper). Every case runs
 * a second time through the locked wrapper (targets/locked.h), as `gitcd
 * run --workers N` drives a target. The hosts target's adopt operations are
 * checked on a member it runs: what the survey finds, the marker a claim
 * reads back, the health probe, an idempotent retire.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include <cmocka.h>

#include "api/spec.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "reconciler/membership.h"
#include "render/render.h"
#include "snapstore/receiver.h"
#include "targets/hosts.h"
#include "targets/kubernetes.h"
#include "targets/local.h"
#include "targets/locked.h"
#include "targets/registry.h"
#include "tests/fake/fake.h"
#include "tests/harness/harness.h"
#include "tests/harness/hostagent.h"
#include "tests/harness/kubeapi.h"
#include "tests/harness/sshd.h"
#include "util/fs.h"
#include "util/xalloc.h"

typedef struct subject subject;
struct subject {
        const char *name;
        target *t;
        const char *ns;
        bool runs_members;      /* members really start (a kubelet or a process) */
        const char *spec_extra; /* more of the spec (the hosts target's machines) */
        /* Lose a member's data the way it happens on this target. */
        void (*wipe)(const subject *sub, const etcd_cluster *c, const member_plan *mp);
        void *ctx; /* for wipe */
        /* Let time pass for the members (the fake's clock); NULL: it passes by itself. */
        void (*advance)(const subject *sub);
        /* Save a snapshot of the running member mp to path; NULL: any file (the fake). */
        void (*snapshot)(const subject *sub, const member_plan *mp, const char *path);
};

static etcd_cluster *load_cluster(const char *ns, const char *name, const char *extra)
{
        _cleanup_free_ char *yaml = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "  namespace: %s\n"
                                              "spec:\n"
                                              "  replicas: 1\n"
                                              "  version: \"3.5.16\"\n"
                                              "  storage:\n"
                                              "    size: 1Gi\n"
                                              "%s",
                                              name, ns, extra ? extra : "");
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        int r = spec_load_buffer("conformance.yaml", yaml, strlen(yaml), &set, &diags);
        if (r < 0)
                diag_print(&diags, stderr);
        assert_int_equal(r, 0);
        etcd_cluster *c = set.items[0];
        set.n = 0;
        cluster_set_release(&set);
        diag_list_release(&diags);
        return c;
}

/* A one-member plan, its entry placed by the target (as the reconciler builds it). */
static membership_plan *plan_one(target *t, const etcd_cluster *c)
{
        membership_plan *p = membership_plan_new(c);
        member_plan *mp = membership_plan_add(p);
        mp->name = render_member_name(c, 0);
        mp->ordinal = 0;
        assert_int_equal(t->ops->place_member(t, c, mp), 0);
        mp->initial_cluster = xasprintf("%s=%s", mp->name, mp->peer_url);
        mp->initial_cluster_state = xstrdup("new");
        mp->config_hash = render_member_config_hash(c, p, 0);
        return p;
}

static bool listed(target *t, const etcd_cluster *c, const char *name)
{
        char **names = NULL;
        size_t n = 0;
        assert_int_equal(t->ops->list_members(t, c->namespace_, c->name, &names, &n), 0);
        bool found = false;
        for (size_t i = 0; i < n; i++) {
                found = found || streq(names[i], name);
                free(names[i]);
        }
        free(names);
        return found;
}

static target_member_status status(target *t, const etcd_cluster *c, const char *name)
{
        target_member_status s = {0};
        assert_int_equal(t->ops->member_status(t, c, name, &s), 0);
        return s;
}

/*
 * The target is what its kind in the registry says (the fake is of no
 * kind): the same name and capabilities, adopt operations exactly when the
 * kind adopts; and a PVC writer exactly with TARGET_CAP_PVC_WRITER.
 */
static void check_kind(const subject *sub)
{
        const target_ops *ops = sub->t->ops;
        assert_true(!ops->writer_start == !ops->writer_stop);
        assert_int_equal(!!(ops->caps & TARGET_CAP_PVC_WRITER), ops->writer_start != NULL);
        if (ops->adopt) {
                assert_non_null(ops->adopt->survey);
                assert_non_null(ops->adopt->claim);
                assert_non_null(ops->adopt->retire);
                assert_non_null(ops->adopt->member_healthy);
        }
        const target_kind *kind = target_kind_find(sub->name);
        if (streq(sub->name, "fake")) {
                assert_null(kind);
                return;
        }
        assert_non_null(kind);
        assert_string_equal(ops->name, kind->name);
        assert_int_equal(ops->caps, kind->caps);
        assert_int_equal(ops->adopt != NULL, kind->adopt != NULL);
}

static void run_contract(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target\n", sub->name);
        check_kind(sub);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);

        /* Required operations. */
        assert_non_null(t->ops->place_member);
        assert_non_null(t->ops->client_tls);
        assert_non_null(t->ops->member_status);

        /* An unknown member is absent. */
        target_member_status s = status(t, c, "nobody-7");
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);

        /* Placing is stable. */
        membership_plan *p = plan_one(t, c);
        const member_plan *mp = &p->members[0];
        member_plan again = {.name = xstrdup(mp->name), .ordinal = 0};
        assert_int_equal(t->ops->place_member(t, c, &again), 0);
        assert_string_equal(again.peer_url, mp->peer_url);
        assert_string_equal(again.client_url, mp->client_url);
        assert_string_equal(again.data_dir, mp->data_dir);
        member_plan_release(&again);

        /* Shared objects and the member: twice is once. */
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        s = status(t, c, mp->name);
        int restarts = s.restarts;
        target_member_status_release(&s);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        s = status(t, c, mp->name);
        assert_int_equal(s.restarts, restarts);
        /* What it was started with, as the plan's config hash. */
        if (sub->runs_members || s.config_hash)
                assert_string_equal(s.config_hash, mp->config_hash);
        target_member_status_release(&s);
        assert_true(listed(t, c, mp->name));

        /* No client TLS: no client identity. */
        char *ca = (char *)1, *cert = (char *)1, *key = (char *)1;
        assert_int_equal(t->ops->client_tls(t, c, &ca, &cert, &key), 0);
        assert_null(ca);
        assert_null(cert);
        assert_null(key);

        /* Stopped: not running, still held; twice is once. */
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        s = status(t, c, mp->name);
        assert_true(s.state == MEMBER_STOPPED || s.state == MEMBER_ABSENT);
        target_member_status_release(&s);
        assert_true(listed(t, c, mp->name));

        /* Removed: absent and not listed; twice is once; unknown is fine. */
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        assert_int_equal(t->ops->stop_member(t, c, "nobody-7"), 0);
        s = status(t, c, mp->name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);
        assert_false(listed(t, c, mp->name));

        membership_plan_free(p);
        etcd_cluster_free(c);
}

/* Data wiped: the recorded member is reported data lost and refused a start. */
static void run_data_wiped(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target, data wiped\n", sub->name);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        membership_plan *p = plan_one(t, c);
        member_plan *mp = &p->members[0];
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);

        /* It has data, under an identity the reconciler records. */
        target_member_status s = status(t, c, mp->name);
        assert_non_null(s.data_identity);
        assert_false(membership_check_identity(s.data_identity, &s));
        mp->data_identity = xstrdup(s.data_identity);
        target_member_status_release(&s);
        /* Its own data: started as before. */
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        s = status(t, c, mp->name);
        assert_string_equal(s.data_identity, mp->data_identity);
        target_member_status_release(&s);

        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        sub->wipe(sub, c, mp);
        s = status(t, c, mp->name);
        assert_true(s.data_identity == NULL || !streq(s.data_identity, mp->data_identity));
        assert_true(membership_check_identity(mp->data_identity, &s));
        assert_int_equal(s.state, MEMBER_DATA_LOST);
        target_member_status_release(&s);
        /* Never started empty: it must be replaced. */
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), -ESTALE);
        assert_non_null(strstr(target_last_error(t), mp->name));
        s = status(t, c, mp->name);
        assert_true(membership_check_identity(mp->data_identity, &s));
        assert_true(s.state != MEMBER_READY && s.state != MEMBER_STARTING);
        target_member_status_release(&s);

        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        assert_false(listed(t, c, mp->name));
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/* Until the member answers health checks (at most a minute), as a member that ran. */
static void wait_ready(const subject *sub, const etcd_cluster *c, const char *name)
{
        target *t = sub->t;
        for (int i = 0; i < 600; i++) {
                if (sub->advance)
                        sub->advance(sub);
                target_member_status s = status(t, c, name);
                member_runtime_state state = s.state;
                target_member_status_release(&s);
                if (state == MEMBER_READY)
                        return;
                if (t->ops->tick)
                        (void)t->ops->tick(t);
                usleep(100 * 1000);
        }
        fail_msg("member %s did not become ready", name);
}

/*
 * data_revision: -ENOENT for a member without data, -EBUSY while it runs;
 * once it ran and stopped, the revision etcd's tool reads in its data (a
 * fresh member's store holds no key yet: 0 or more), the same when asked
 * again (reading changes nothing). Beside it the optional member_logs of
 * target_debug_ops: -ENOENT for a member the target does not hold, and the
 * stopped member's log within the bound asked.
 */
static void run_data_revision(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target, data revision\n", sub->name);
        assert_non_null(t->ops->data_revision);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        _cleanup_free_ char *tool = harness_etcd_path("3.5.16", "etcdutl");
        if (!tool)
                tool = xstrdup("etcdutl");
        int64_t rev = -1;
        assert_int_equal(t->ops->data_revision(t, c, "nobody-7", tool, &rev), -ENOENT);
        assert_int_equal(rev, -1);
        membership_plan *p = plan_one(t, c);
        const member_plan *mp = &p->members[0];
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        target_member_status s = status(t, c, mp->name);
        bool runs = s.state == MEMBER_STARTING || s.state == MEMBER_READY;
        target_member_status_release(&s);
        if (runs) {
                assert_int_equal(t->ops->data_revision(t, c, mp->name, tool, &rev), -EBUSY);
                assert_non_null(strstr(target_last_error(t), mp->name));
        }
        if (sub->runs_members) {
                wait_ready(sub, c, mp->name);
                assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
                int k = t->ops->data_revision(t, c, mp->name, tool, &rev);
                if (k < 0)
                        fail_msg("data_revision: %s", target_last_error(t));
                assert_true(rev >= 0);
                int64_t again = -1;
                assert_int_equal(t->ops->data_revision(t, c, mp->name, tool, &again), 0);
                assert_int_equal(again, rev);
        }
        /* member_logs: -ENOENT for a member it does not hold; a stopped member's log, bounded */
        if (t->ops->debug && t->ops->debug->member_logs) {
                char *text = NULL, *from = NULL;
                assert_int_equal(t->ops->debug->member_logs(t, c, "nobody-7", 4096, &text, &from),
                                 -ENOENT);
                assert_null(text);
                if (sub->runs_members) {
                        int k = t->ops->debug->member_logs(t, c, mp->name, 4096, &text, &from);
                        if (k < 0)
                                fail_msg("member_logs: %s", target_last_error(t));
                        assert_true(strlen(text) > 0 && strlen(text) <= 4096);
                        assert_non_null(from);
                        free(text);
                        free(from);
                }
        }
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        assert_int_equal(t->ops->data_revision(t, c, mp->name, tool, &rev), -ENOENT);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/*
 * The adopt operations on a member the target runs (a cluster gitcd
 * created whose state store was lost): nothing runs before it starts; then
 * the survey finds it as it runs, on gitcd's own file under its own name
 * (no restart, nothing to retire), with its etcd member ID; a claim reads
 * back the marker its data holds; the probe says healthy while it runs and
 * not once it stopped; retiring what gitcd did not write is harmless.
 */
static void run_adopt(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target, adopt operations\n", sub->name);
        const target_adopt_ops *ao = t->ops->adopt;
        assert_non_null(ao);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        adopt_plan ap = {0};
        char *why = NULL;
        assert_int_equal(ao->survey(t, c, &ap, &why), 0);
        assert_int_equal(ap.n, 0);
        assert_null(why);

        membership_plan *p = plan_one(t, c);
        const member_plan *mp = &p->members[0];
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
        wait_ready(sub, c, mp->name);

        int k = ao->survey(t, c, &ap, &why);
        if (k != 1)
                fail_msg("survey: %d: %s", k, why ? why : target_last_error(t));
        assert_int_equal(ap.n, 1);
        const adopt_step *st = &ap.steps[0];
        assert_string_equal(st->member, mp->name);
        assert_string_equal(st->running_name, mp->name);
        assert_string_equal(st->peer_url, mp->peer_url);
        assert_false(st->restart);
        assert_null(st->replaces);
        assert_non_null(st->where);
        assert_true(st->id != 0);
        assert_true(ap.cluster_id != 0);

        target_member_status s = status(t, c, mp->name);
        char *identity = NULL;
        assert_int_equal(ao->claim(t, c, st, &identity), 0);
        assert_string_equal(identity, s.data_identity);
        free(identity);
        target_member_status_release(&s);

        assert_int_equal(ao->member_healthy(t, c, st->client_url), 1);
        assert_int_equal(ao->retire(t, c, st), 0);
        assert_int_equal(ao->retire(t, c, st), 0);
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        bool stopped = false;
        for (int i = 0; i < 600 && !stopped; i++) {
                stopped = ao->member_healthy(t, c, st->client_url) == 0;
                if (!stopped)
                        usleep(100 * 1000);
        }
        assert_true(stopped);

        adopt_plan_release(&ap);
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/* A member of c ensured (and, where members run, ready): the plan, its entry placed. */
static membership_plan *start_one(const subject *sub, const etcd_cluster *c)
{
        target *t = sub->t;
        membership_plan *p = plan_one(t, c);
        assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
        if (t->ops->ensure_member(t, c, p, 0) < 0)
                fail_msg("ensure_member: %s", target_last_error(t));
        if (sub->runs_members)
                wait_ready(sub, c, p->members[0].name);
        return p;
}

/*
 * The optional operations a target has: the same through the locked
 * wrapper as without it (it forwards each one, and adds none); the
 * Secrets and the PVC writer are the Kubernetes target's alone.
 */
static unsigned ops_present(const target_ops *o)
{
        const void *opt[] = {o->drop_kept_data, o->list_members,   o->tick,
                             o->wait_event,     o->take_events,    o->tls_certificates,
                             o->renew_tls,      o->restore_member, o->data_revision,
                             o->secret_folder,  o->writer_start,   o->writer_stop,
                             o->adopt,          o->ensure_shared,  o->stop_member,
                             o->remove_member,  o->debug};
        unsigned bits = 0;
        for (size_t i = 0; i < ARRAY_SIZE(opt); i++)
                bits |= (opt[i] != NULL) << i;
        return bits;
}

static void check_ops(const subject *sub, unsigned unlocked)
{
        const target_ops *o = sub->t->ops;
        assert_int_equal(ops_present(o), unlocked);
        /* every target here keeps data aside, restores, reads revisions, renews TLS */
        assert_non_null(o->drop_kept_data);
        assert_non_null(o->restore_member);
        assert_non_null(o->data_revision);
        assert_true(!o->tls_certificates == !o->renew_tls);
        assert_non_null(o->tls_certificates);
        bool kube = streq(sub->name, "kubernetes");
        assert_int_equal(o->secret_folder != NULL, kube);
        assert_int_equal(o->writer_start != NULL, kube);
        assert_int_equal(o->adopt != NULL, streq(sub->name, "hosts"));
        /* the members' logs for an incident bundle: where the target keeps them */
        assert_int_equal(o->debug != NULL,
                         streq(sub->name, "local") || streq(sub->name, "hosts") || kube);
}

/*
 * Removed with its data kept: absent and not listed, twice is once; the
 * kept data dropped, twice is once, and for a member with none kept.
 */
static void run_kept_data(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target, kept data\n", sub->name);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        membership_plan *p = start_one(sub, c);
        const char *name = p->members[0].name;
        assert_int_equal(t->ops->remove_member(t, c, name, true), 0);
        assert_int_equal(t->ops->remove_member(t, c, name, true), 0);
        target_member_status s = status(t, c, name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);
        assert_false(listed(t, c, name));
        assert_int_equal(t->ops->drop_kept_data(t, c, name), 0);
        assert_int_equal(t->ops->drop_kept_data(t, c, name), 0);
        assert_int_equal(t->ops->drop_kept_data(t, c, "nobody-7"), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/*
 * Events: housekeeping and waiting never fail; an event wait times out or
 * reports one; the clusters with events are "namespace/name", whenever
 * they are taken.
 */
static void run_events(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target, events\n", sub->name);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        membership_plan *p = start_one(sub, c);
        assert_int_equal(t->ops->stop_member(t, c, p->members[0].name), 0);
        if (t->ops->tick)
                assert_true(t->ops->tick(t) >= 0);
        if (t->ops->wait_event) {
                int k = t->ops->wait_event(t, 50);
                assert_true(k == 0 || k == 1);
        }
        assert_int_equal(t->ops->remove_member(t, c, p->members[0].name, false), 0);
        if (t->ops->take_events) {
                for (int round = 0; round < 2; round++) {
                        char **v = NULL;
                        size_t n = 0;
                        assert_int_equal(t->ops->take_events(t, &v, &n), 0);
                        for (size_t i = 0; i < n; i++) {
                                assert_non_null(strchr(v[i], '/'));
                                free(v[i]);
                        }
                        free(v);
                }
        }
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/* Whether cert is a leaf of member (NULL: a leaf every member shares). */
static bool leaf_of(const target_cert *cert, const char *member)
{
        if (streq(cert->surface, TARGET_CERT_CA))
                return false;
        return member ? cert->member && streq(cert->member, member) : !cert->member;
}

/* The earliest end of member's leaves (NULL: the shared ones), 0 when it has none; their
 * serials in *ret_serials. */
static int64_t leaves_of(target *t, const etcd_cluster *c, const membership_plan *p,
                         const char *member, char **ret_serials)
{
        target_cert *certs = NULL;
        size_t n = 0;
        assert_int_equal(t->ops->tls_certificates(t, c, p, &certs, &n), 0);
        int64_t end = 0;
        char *serials = xstrdup("");
        for (size_t i = 0; i < n; i++) {
                if (!leaf_of(&certs[i], member))
                        continue;
                if (!end || certs[i].not_after_ms < end)
                        end = certs[i].not_after_ms;
                char *more = xasprintf("%s%s,", serials, certs[i].serial);
                free(serials);
                serials = more;
        }
        target_certs_free(certs, n);
        *ret_serials = serials;
        return end;
}

/*
 * Renewal of member's leaves (NULL: the shared ones), when it has any:
 * nothing is due long before they end; near their end they are reissued
 * (new serials, ending no earlier); long before the new ones end,
 * nothing is due again. Whether it had any.
 */
static bool check_renewal(const subject *sub, const etcd_cluster *c, const membership_plan *p,
                          const char *member)
{
        target *t = sub->t;
        _cleanup_free_ char *serials = NULL, *renewed = NULL;
        int64_t end = leaves_of(t, c, p, member, &serials);
        if (!end)
                return false;
        int64_t before = (int64_t)c->tls.renew_before_seconds * 1000;
        assert_int_equal(t->ops->renew_tls(t, c, p, member, end - before - 60 * 1000), 0);
        int k = t->ops->renew_tls(t, c, p, member, end - 1000);
        if (k <= 0)
                fail_msg("renew_tls: %d: %s", k, target_last_error(t));
        int64_t again = leaves_of(t, c, p, member, &renewed);
        assert_true(again >= end);
        assert_string_not_equal(renewed, serials);
        assert_int_equal(t->ops->renew_tls(t, c, p, member, again - before - 60 * 1000), 0);
        return true;
}

/*
 * tls.provider auto: the target holds leaves for the member, its own or
 * shared by every member (and the cluster CA); each kind is renewed as
 * check_renewal says, and the member is ready on the renewed ones.
 */
static void run_tls(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target, TLS renewal\n", sub->name);
        _cleanup_free_ char *extra =
            xasprintf("%s  tls:\n    provider: auto\n    client: {enabled: true}\n"
                      "    peer: {enabled: true}\n",
                      sub->spec_extra ? sub->spec_extra : "");
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, extra);
        membership_plan *p = start_one(sub, c);
        const char *name = p->members[0].name;
        bool own = check_renewal(sub, c, p, name);
        bool shared = check_renewal(sub, c, p, NULL);
        assert_true(own || shared);
        if (sub->runs_members)
                wait_ready(sub, c, name);

        assert_int_equal(t->ops->remove_member(t, c, name, false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/*
 * restore_member: never over a member's data (-EEXIST, and the member as
 * before); into a member placed and never started, the snapshot's data,
 * on which it starts (where members run) with the snapshot's revision or
 * more, as data_revision reads it once stopped.
 */
static void run_restore(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        fprintf(stderr, "conformance: %s target, restore\n", sub->name);
        _cleanup_free_ char *tool = harness_etcd_path("3.5.16", "etcdutl");
        if (!tool)
                tool = xstrdup("etcdutl");
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-conformance-snap");
        assert_non_null(dir);
        _cleanup_free_ char *snap = xasprintf("%s/snap.db", dir);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        membership_plan *p = start_one(sub, c);
        const member_plan *mp = &p->members[0];
        if (sub->snapshot)
                sub->snapshot(sub, mp, snap);
        else
                assert_int_equal(write_file_atomic(snap, "7\n", 2, 0600), 0);
        target_restore rs = {.snapshot = snap, .tool = tool};
        assert_int_equal(t->ops->restore_member(t, c, p, 0, &rs), -EEXIST);
        target_member_status s = status(t, c, mp->name);
        assert_true(s.state != MEMBER_ABSENT && s.state != MEMBER_DATA_LOST);
        target_member_status_release(&s);
        assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
        membership_plan_free(p);

        if (sub->runs_members) {
                p = plan_one(t, c);
                mp = &p->members[0];
                assert_int_equal(t->ops->ensure_shared(t, c, p), 0);
                int k = t->ops->restore_member(t, c, p, 0, &rs);
                if (k < 0)
                        fail_msg("restore_member: %s", target_last_error(t));
                assert_int_equal(t->ops->restore_member(t, c, p, 0, &rs), -EEXIST);
                assert_int_equal(t->ops->ensure_member(t, c, p, 0), 0);
                wait_ready(sub, c, mp->name);
                assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
                int64_t rev = -1;
                if (t->ops->data_revision(t, c, mp->name, tool, &rev) < 0)
                        fail_msg("data_revision: %s", target_last_error(t));
                assert_true(rev >= 1);
                assert_int_equal(t->ops->remove_member(t, c, mp->name, false), 0);
                membership_plan_free(p);
        }
        etcd_cluster_free(c);
        (void)rm_rf(dir);
}

/*
 * secret_folder (the Kubernetes target's): a Secret's keys as files 0600
 * in a folder 0700; -ENOENT for a Secret that is not there.
 */
static void run_secret(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        if (!t->ops->secret_folder)
                return;
        fprintf(stderr, "conformance: %s target, secrets\n", sub->name);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        char *dir = NULL;
        assert_int_equal(t->ops->secret_folder(t, c, "nobody-secret", &dir), -ENOENT);
        assert_null(dir);
        _cleanup_free_ char *name = xasprintf("%s-creds", cluster_name);
        json_t *secret = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                                   "Secret", "metadata", "name", name, "namespace", c->namespace_,
                                   "data", "accessKey", "a2V5"); /* "key" */
        assert_int_equal(kube_apply(sub->ctx, secret, "test", false, false, NULL), 0);
        json_decref(secret);
        assert_int_equal(t->ops->secret_folder(t, c, name, &dir), 0);
        _cleanup_free_ char *file = xasprintf("%s/accessKey", dir);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(file, 1024, &text, &len), 0);
        assert_int_equal(len, 3);
        assert_memory_equal(text, "key", 3);
        struct stat st;
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(stat(dir, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
        free(dir);
        etcd_cluster_free(c);
}

/* Plays the kubelet for cluster's writer Pod (no kubelet here): Running and Ready. */
typedef struct writer_kubelet {
        kube_client *admin;
        const char *ns;
        const char *cluster;
} writer_kubelet;

static void *ready_writer(void *arg)
{
        const writer_kubelet *k = arg;
        static const kube_gvr pods = {"", "v1", "pods", true};
        _cleanup_free_ char *sel = xasprintf(
            "gitcd.io/cluster=%s,app.kubernetes.io/component=snapshot-writer", k->cluster);
        for (int i = 0; i < 1200; i++) {
                json_t *items = NULL;
                if (kube_list(k->admin, &pods, k->ns, sel, &items, NULL) == 0 &&
                    json_array_size(items) > 0) {
                        json_t *md = json_object_get(json_array_get(items, 0), "metadata");
                        const char *name = json_string_value(json_object_get(md, "name"));
                        _cleanup_free_ char *path =
                            xasprintf("/api/v1/namespaces/%s/pods/%s/status", k->ns, name);
                        json_t *body = json_pack("{s:{s:s, s:s, s:[{s:s, s:s}]}}", "status",
                                                 "phase", "Running", "podIP", "127.0.0.1",
                                                 "conditions", "type", "Ready", "status", "True");
                        (void)kube_request(k->admin, "PATCH", path, "application/merge-patch+json",
                                           body, "patch", "pods/status", k->ns, NULL);
                        json_decref(body);
                        json_decref(items);
                        return NULL;
                }
                json_decref(items);
                usleep(50 * 1000);
        }
        return NULL;
}

/*
 * The PVC writer (the Kubernetes target's): started on a claim of the
 * cluster's namespace once its Pod is Ready, with the address to send to;
 * a second writer of the same cluster refused at once (-EAGAIN, nothing
 * handed out) while the first is in use; stopped, and the cluster's turn
 * free again for the next.
 */
static void run_writer(const subject *sub, const char *cluster_name)
{
        target *t = sub->t;
        if (!t->ops->writer_start)
                return;
        fprintf(stderr, "conformance: %s target, PVC writer\n", sub->name);
        etcd_cluster *c = load_cluster(sub->ns, cluster_name, sub->spec_extra);
        _cleanup_free_ char *claim = xasprintf("%s-backups", cluster_name);
        json_t *pvc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion",
                                "v1", "kind", "PersistentVolumeClaim", "metadata", "name", claim,
                                "namespace", c->namespace_, "spec", "accessModes", "ReadWriteOnce",
                                "resources", "requests", "storage", "1Gi");
        assert_int_equal(kube_apply(sub->ctx, pvc, "test", false, false, NULL), 0);
        json_decref(pvc);
        writer_kubelet k = {.admin = sub->ctx, .ns = c->namespace_, .cluster = c->name};
        for (int round = 0; round < 2; round++) {
                pthread_t kubelet;
                assert_int_equal(pthread_create(&kubelet, NULL, ready_writer, &k), 0);
                void *handle = NULL;
                receiver_peer peer = {0};
                int r = t->ops->writer_start(t, c, claim, "", &handle, &peer);
                pthread_join(kubelet, NULL);
                if (r < 0)
                        fail_msg("writer_start: %s", target_last_error(t));
                assert_non_null(handle);
                assert_non_null(peer.url);
                void *other = NULL;
                receiver_peer other_peer = {0};
                assert_int_equal(t->ops->writer_start(t, c, claim, "", &other, &other_peer),
                                 -EAGAIN);
                assert_null(other);
                assert_null(other_peer.url);
                assert_int_equal(t->ops->writer_stop(t, c, handle), 0);
        }
        etcd_cluster_free(c);
}

/*
 * The cases beyond the contract, on clusters named after prefix: the
 * operations the target has (unlocked: those of the target unwrapped),
 * kept data, events, TLS renewal, restore, Secrets, the PVC writer.
 */
static void run_more(const subject *sub, const char *prefix, unsigned unlocked)
{
        check_ops(sub, unlocked);
        _cleanup_free_ char *kept = xasprintf("%s-kept", prefix);
        _cleanup_free_ char *events = xasprintf("%s-events", prefix);
        _cleanup_free_ char *tls = xasprintf("%s-tls", prefix);
        _cleanup_free_ char *restore = xasprintf("%s-restore", prefix);
        _cleanup_free_ char *secret = xasprintf("%s-secret", prefix);
        _cleanup_free_ char *writer = xasprintf("%s-writer", prefix);
        run_kept_data(sub, kept);
        run_events(sub, events);
        run_tls(sub, tls);
        run_restore(sub, restore);
        run_secret(sub, secret);
        run_writer(sub, writer);
}

static void advance_fake(const subject *sub)
{
        fake_world_advance(sub->ctx, 100);
}

static void wipe_fake(const subject *sub, const etcd_cluster *c, const member_plan *mp)
{
        (void)c;
        fake_lose_data(sub->ctx, mp->name);
}

static void wipe_folder(const subject *sub, const etcd_cluster *c, const member_plan *mp)
{
        (void)sub;
        (void)c;
        assert_int_equal(rm_rf(mp->data_dir), 0);
}

static void wipe_claim(const subject *sub, const etcd_cluster *c, const member_plan *mp)
{
        static const kube_gvr pvcs = {"", "v1", "persistentvolumeclaims", true};
        _cleanup_free_ char *claim = xasprintf("data-%s", mp->name);
        assert_int_equal(kube_delete(sub->ctx, &pvcs, c->namespace_, claim, NULL), 0);
}

/* A snapshot of the running member with etcd's own etcdctl. */
static void snapshot_etcdctl(const subject *sub, const member_plan *mp, const char *path)
{
        (void)sub;
        _cleanup_free_ char *bin = harness_etcd_path("3.5.16", "etcdctl");
        assert_non_null(bin);
        _cleanup_free_ char *cmd =
            xasprintf("ETCDCTL_API=3 '%s' --endpoints %s put conformance-key v >/dev/null && "
                      "ETCDCTL_API=3 '%s' --endpoints %s snapshot save '%s' >/dev/null 2>&1",
                      bin, mp->client_url, bin, mp->client_url, path);
        assert_int_equal(system(cmd), 0);
}

/* t as it is, or wrapped in the locked target (which then owns it). */
static target *maybe_locked(target *t, bool locked)
{
        if (!locked)
                return t;
        target *lk = NULL;
        assert_int_equal(target_locked_new(t, &lk), 0);
        return lk;
}

static void test_fake(void **state)
{
        (void)state;
        for (int locked = 0; locked < 2; locked++) {
                fake_world *w = fake_world_new();
                subject sub = {.name = "fake",
                               .ns = "default",
                               .runs_members = true,
                               .wipe = wipe_fake,
                               .ctx = w};
                assert_int_equal(fake_target_new(w, &sub.t), 0);
                sub.t = maybe_locked(sub.t, locked);
                assert_null(sub.t->ops->adopt);
                run_contract(&sub, "conf");
                run_data_wiped(&sub, "conf"); /* the fake holds one cluster */
                target_free(sub.t);
                fake_world_free(w);
                /* a world of its own: the cluster the cases above formed and removed is gone */
                w = fake_world_new();
                sub.ctx = w;
                sub.advance = advance_fake;
                assert_int_equal(fake_target_new(w, &sub.t), 0);
                sub.t = maybe_locked(sub.t, locked);
                run_data_revision(&sub, "conf");
                target_free(sub.t);
                fake_world_free(w);
                /* the other cases, each in a world of its own */
                static void (*const cases[])(const subject *, const char *) = {
                    run_kept_data, run_events, run_tls, run_restore, run_secret, run_writer};
                for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                        w = fake_world_new();
                        w->cert_life_ms = 90LL * 24 * 3600 * 1000;
                        sub.ctx = w;
                        assert_int_equal(fake_target_new(w, &sub.t), 0);
                        unsigned unlocked = ops_present(sub.t->ops);
                        sub.t = maybe_locked(sub.t, locked);
                        check_ops(&sub, unlocked);
                        cases[i](&sub, "conf");
                        target_free(sub.t);
                        fake_world_free(w);
                }
        }
}

static void test_local(void **state)
{
        (void)state;
        if (!harness_have_etcd("3.5.16"))
                skip();
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-conformance");
        assert_non_null(dir);
        local_target_opts o = {.state_dir = dir, .health_timeout_ms = 1000};
        subject sub = {.name = "local",
                       .ns = "default",
                       .runs_members = true,
                       .wipe = wipe_folder,
                       .snapshot = snapshot_etcdctl};
        assert_int_equal(local_target_new(&o, &sub.t), 0);
        assert_null(sub.t->ops->adopt);
        unsigned unlocked = ops_present(sub.t->ops);
        run_contract(&sub, "conf");
        run_data_wiped(&sub, "wiped");
        run_data_revision(&sub, "revision");
        run_more(&sub, "more", unlocked);
        /* again through the locked wrapper, on clusters of their own */
        sub.t = maybe_locked(sub.t, true);
        run_contract(&sub, "conf-locked");
        run_data_wiped(&sub, "wiped-locked");
        run_data_revision(&sub, "revision-locked");
        run_more(&sub, "more-locked", unlocked);
        target_free(sub.t);
        (void)rm_rf(dir);
}

static void test_kubernetes(void **state)
{
        (void)state;
        _cleanup_free_ char *bin = kubeapi_find_binary();
        if (!bin) {
                fprintf(stderr, "kube-apiserver not built: skipping the Kubernetes target\n");
                skip();
        }
        kubeapi *api = NULL;
        int r = kubeapi_start(&api);
        if (r == -ENOENT) {
                fprintf(stderr, "kube-apiserver not found: skipping the Kubernetes target\n");
                skip();
        }
        assert_int_equal(r, 0);
        kube_config *cfg = NULL;
        char *err = NULL;
        assert_int_equal(kube_config_load(kubeapi_kubeconfig(api), "admin", &cfg, &err), 0);
        _cleanup_free_ char *state_dir = xasprintf("%s/gitcd-state", kubeapi_dir(api));
        kubernetes_target_opts o = {
            .config = cfg, .state_dir = state_dir, .volume_delete_wait_ms = 500};
        /* No kubelet here: Pods never run, so the hash is checked only when reported. */
        kube_client *admin = kubeapi_client(api, "admin");
        assert_non_null(admin);
        subject sub = {.name = "kubernetes",
                       .ns = KUBEAPI_NAMESPACE,
                       .runs_members = false,
                       .wipe = wipe_claim,
                       .ctx = admin};
        assert_int_equal(kubernetes_target_new(&o, &sub.t), 0);
        kube_config_free(cfg);
        assert_null(sub.t->ops->adopt);
        unsigned unlocked = ops_present(sub.t->ops);
        run_contract(&sub, "conf");
        run_data_wiped(&sub, "wiped");
        run_data_revision(&sub, "revision");
        run_more(&sub, "more", unlocked);
        /* again through the locked wrapper, on clusters of their own */
        sub.t = maybe_locked(sub.t, true);
        run_contract(&sub, "conf-locked");
        run_data_wiped(&sub, "wiped-locked");
        run_data_revision(&sub, "revision-locked");
        run_more(&sub, "more-locked", unlocked);
        target_free(sub.t);
        kube_client_free(admin);
        kubeapi_free(api);
}

static void test_hosts(void **state)
{
        (void)state;
        if (!sshd_available() || !harness_have_etcd("3.5.16")) {
                fprintf(stderr, "sshd or etcd 3.5.16 not installed: skipping the hosts target\n");
                skip();
        }
        sshd_lab *lab = NULL;
        assert_int_equal(sshd_lab_start(1, &lab), 0);
        const sshd_machine *m = &lab->machines[0];
        _cleanup_free_ char *pods = xasprintf("%s/etc/kubernetes/manifests", m->root);
        _cleanup_free_ char *etcd_bin = harness_etcd_path("3.5.16", "etcd");
        assert_int_equal(mkdir_p(pods, 0755), 0);
        const char *dirs[] = {pods, NULL};
        hostagent *agent = NULL;
        assert_int_equal(hostagent_start(dirs, etcd_bin, lab->dir, &agent), 0);
        _cleanup_free_ char *extra =
            xasprintf("  hosts:\n    mode: staticPod\n    machines:\n    - address: %s\n"
                      "      ssh: {port: %d}\n      dataDir: %s/var/lib/etcd/conf\n"
                      "      manifestDir: %s\n",
                      m->address, m->port, m->root, pods);
        _cleanup_free_ char *state_dir = xasprintf("%s/gitcd-state", lab->dir);
        hosts_target_opts o = {
            .ssh = {.known_hosts = lab->known_hosts,
                    .key_file = lab->client_key,
                    .connect_timeout_ms = 5000,
                    .command_timeout_ms = 20000},
            .client_port = harness_free_port(),
            .peer_port = harness_free_port(),
            .metrics_port = harness_free_port(),
            .health_timeout_ms = 1000,
            .state_dir = state_dir,
        };
        subject sub = {.name = "hosts",
                       .ns = "default",
                       .runs_members = true,
                       .wipe = wipe_folder,
                       .spec_extra = extra,
                       .snapshot = snapshot_etcdctl};
        assert_int_equal(hosts_target_new(&o, &sub.t), 0);
        unsigned unlocked = ops_present(sub.t->ops);
        run_contract(&sub, "conf");
        run_data_revision(&sub, "conf");
        run_adopt(&sub, "conf");
        run_more(&sub, "more", unlocked);
        /* again through the locked wrapper (one machine: one cluster at a time) */
        run_data_wiped(&sub, "conf");
        sub.t = maybe_locked(sub.t, true);
        run_contract(&sub, "conf");
        run_data_revision(&sub, "conf");
        run_adopt(&sub, "conf");
        run_more(&sub, "more-locked", unlocked);
        run_data_wiped(&sub, "conf");
        target_free(sub.t);
        hostagent_free(agent);
        sshd_lab_free(lab);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fake),
            cmocka_unit_test(test_local),
            cmocka_unit_test(test_kubernetes),
            cmocka_unit_test(test_hosts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

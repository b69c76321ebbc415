/*
 * bench/takeover: the live takeover of an old operator's cluster on the
 * Kubernetes target (spec.adopt, docs/migration.md) beside the same
 * member replacements done by hand, on identical clusters.
 *
 * Each run lays out a 3-member cluster as the old operator left it
 * (tests/harness/layouts.h: coreos by default, etcdio or improbable; the
 * real kube-apiserver, the real StatefulSet/ReplicaSet controllers for the
 * last two, and the node simulator running the Pods as local etcd
 * processes of the cached version, as e2e-kubernetes-takeover does: no
 * kubelet can run here), in a namespace of its own, stops the operator as
 * docs/migration.md says (coreos paused, etcd-io's Deployment scaled to 0,
 * improbable's resource deleted with --cascade=orphan; not timed), and
 * starts a writer through the client addresses of every Pod of the
 * namespace (one put every 20 ms; a failed put is retried under the same
 * key), and lets the cluster idle for etcd's 5 s health interval (etcd
 * refuses a membership change until every voter has been connected that
 * long, which a cluster running for days always has: without this wait
 * both sides would first wait on the freshly laid-out cluster). Then,
 * timed:
 *
 *   gitcd    `gitcd apply` of an EtcdCluster with spec.adopt on the
 *            kubernetes target, from exec to exit (survey, record, one
 *            learner added, its Pod started, promoted, an old member
 *            removed, the old leader last, each its own pass);
 *   by hand  for each old member, followers first and the leader last,
 *            what a person types: `etcdctl member add NAME --learner`
 *            (the real etcdctl of that version from the cache), a minimal
 *            bare Pod for the new member (etcd of the same image with the
 *            ETCD_INITIAL_CLUSTER etcdctl printed and
 *            --initial-cluster-state existing, its data in an emptyDir,
 *            the DNS name NAME.byhand.NS.svc; not the Services, Secrets
 *            and client Service gitcd also makes), `etcdctl member
 *            promote` retried until etcd says the learner has caught up,
 *            `etcdctl move-leader` when the old member leads, `etcdctl
 *            member remove`, and for coreos' bare Pods the old Pod
 *            deleted (a StatefulSet's or ReplicaSet's Pod would only be
 *            recreated, and is left, as gitcd leaves it). Each step is
 *            retried every 50 ms until etcd accepts it; no other wait.
 *
 * Both are timed the same way, by a thread listing the members every 25
 * ms: per member, the new member seen (a learner) -> a voter -> the old
 * member gone, and the whole from the start to the last old member gone.
 * The gap before a member is the time from the previous old member gone
 * (or the start) to the next learner seen: before the first, gitcd's
 * start, survey and record (by hand, the first command); before the
 * others, mostly etcd's 5 s health interval after the promotion, on both
 * sides. For gitcd it also prints its audit log as a timeline (the
 * events' times in ms from the state store) and the steps etcd refused
 * (journaled, abandoned, tried again); by hand, how often each command
 * was typed before etcd took it.
 *
 * Prints figures, and the writer's for each run (acknowledged puts,
 * failed puts, the most retries of one key, the longest from a key's
 * first try to its acknowledgement), and checks every acknowledged key is
 * there at the end. Several rounds alternate the order (gitcd first in
 * odd rounds) and print medians. Never fails on timing: exits 0 unless a
 * step failed or an acknowledged write was lost (1), or the lab could not
 * start (77); an assertion of the e2e lab's helpers ends it at once.
 *
 *   bench-takeover [coreos|etcdio|improbable] [VERSION] [ROUNDS] [gitcd|hand]
 *
 * (gitcd or hand: that side alone, its figures only.)
 *
 * Built with the test suite (it needs the harness); needs root for the
 * lab's private /etc/hosts, kube-apiserver (and kube-controller-manager
 * for etcdio and improbable) from scripts/setup.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "kube/client.h"
#include "state/state.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "tests/harness/layouts.h"
#include "tests/harness/writer.h"
#include "util/http.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define OLD        "old"
#define CLUSTER    "kc"
#define N_OLD      3
#define MAX_NEW    8
#define LIST_MS    25 /* the member list is read this often */
#define RETRY_MS   50 /* a by-hand step etcd refused is typed again after this */
#define STEP_MS    120000
#define MAX_ROUNDS 9
#define IDLE_MS    5500 /* etcd's health interval (5 s), and a little */

static kube_lab *lab;
static layout_kind kind = LAYOUT_COREOS;
static const char *from = "coreos";
static const char *version = "3.5.16";
static char *etcdctl_bin;
static bool g_skipped, h_skipped; /* one side alone */
static const kube_gvr pods = {"", "v1", "pods", true};
static const kube_gvr deployments = {"apps", "v1", "deployments", true};
static const kube_gvr coreos = {"etcd.database.coreos.com", "v1beta2", "etcdclusters", true};
static const kube_gvr improbable = {"etcd.improbable.io", "v1alpha1", "etcdclusters", true};

typedef struct run {
        const char *how; /* "gitcd", "by hand" */
        char ns[32];
        layout_opts lo;
        char *old_pods[N_OLD];
        bool ok;
        /* the member-list thread's findings, read once it has stopped */
        pthread_t lister;
        volatile int stop;
        uint64_t old_ids[N_OLD];
        char *old_names[N_OLD];
        char *old_clients[N_OLD]; /* each old member's advertised client URL */
        int64_t gone[N_OLD];      /* ms after t0, -1 while there */
        size_t n_gone;
        int gone_order[N_OLD];
        uint64_t new_ids[MAX_NEW];
        int64_t added[MAX_NEW], promoted[MAX_NEW];
        size_t n_new;
        int64_t t0, exited; /* exited: gitcd apply's exit, ms after t0 */
        harness_writer *w;
        int lost;
        int typed[N_OLD][3]; /* by hand: how often member add, promote, remove were typed */
} run;

/* ---- the cluster's addresses, the writer, the member list -------------- */

/* The client URLs of every Pod of the run the simulator runs now: old, gitcd's, by hand's. */
static char *endpoints(const run *r)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < N_OLD + 2 * MAX_NEW; i++) {
                _cleanup_free_ char *name = i < N_OLD ? xstrdup(r->old_pods[i])
                                            : i < N_OLD + MAX_NEW
                                                ? xasprintf("%s-%zu", CLUSTER, i - N_OLD)
                                                : xasprintf("new-%zu", i - N_OLD - MAX_NEW);
                _cleanup_free_ char *a = nodesim_pod_address(lab->sim, r->ns, name);
                if (a)
                        sb_printf(&sb, "%shttp://%s:2379", sb.len ? "," : "", a);
        }
        return sb_detach(&sb);
}

static etcd_client *connect_run(void *data)
{
        _cleanup_free_ char *eps = endpoints(data);
        etcd_client_opts o = {.endpoints = eps, .call_timeout_ms = 3000, .dial_timeout_ms = 1000};
        etcd_client *c = NULL;
        return etcd_client_new(&o, &c) < 0 ? NULL : c;
}

static bool reconnect_always(int error)
{
        (void)error;
        return true;
}

static bool is_old(const run *r, uint64_t id, size_t *ret_i)
{
        for (size_t i = 0; i < N_OLD; i++)
                if (r->old_ids[i] == id) {
                        *ret_i = i;
                        return true;
                }
        return false;
}

static void observe(run *r, const etcd_members *l)
{
        int64_t t = now_mono_ms() - r->t0;
        size_t oi;
        for (size_t i = 0; i < l->n; i++) {
                const etcd_member *m = &l->members[i];
                if (is_old(r, m->id, &oi))
                        continue;
                size_t j = 0;
                while (j < r->n_new && r->new_ids[j] != m->id)
                        j++;
                if (j == r->n_new && j < MAX_NEW) {
                        r->new_ids[j] = m->id;
                        r->added[j] = t;
                        r->promoted[j] = -1;
                        r->n_new++;
                }
                if (j < r->n_new && !m->is_learner && r->promoted[j] < 0)
                        r->promoted[j] = t;
        }
        for (size_t i = 0; i < N_OLD; i++)
                if (r->gone[i] < 0 && !etcd_members_find(l, r->old_ids[i])) {
                        r->gone[i] = t;
                        r->gone_order[r->n_gone++] = (int)i;
                }
}

static void *lister_main(void *arg)
{
        run *r = arg;
        etcd_client *c = NULL;
        while (!r->stop) {
                if (!c)
                        c = connect_run(r);
                etcd_members *l = NULL;
                if (c && etcd_member_list(c, &l) == 0) {
                        observe(r, l);
                        etcd_members_free(l);
                } else {
                        etcd_client_free(c);
                        c = NULL;
                }
                usleep(LIST_MS * 1000);
        }
        etcd_client_free(c);
        return NULL;
}

/* ---- the old operator's cluster --------------------------------------- */

static int stop_operator(run *r)
{
        if (kind == LAYOUT_COREOS) {
                _cleanup_free_ char *path = NULL;
                (void)kube_resource_path(&coreos, r->ns, OLD, &path);
                json_t *patch = json_pack("{s:{s:b}}", "spec", "paused", true);
                int k = kube_request(lab->admin, "PATCH", path, "application/merge-patch+json",
                                     patch, "patch", "etcdclusters", r->ns, NULL);
                json_decref(patch);
                return k < 0 ? k : 0;
        }
        if (kind == LAYOUT_IMPROBABLE) {
                if (kube_delete(lab->admin, &improbable, r->ns, OLD, "Orphan") < 0)
                        return -EIO;
                json_t *o = NULL;
                for (int64_t end = now_mono_ms() + 60000;
                     kube_get(lab->admin, &improbable, r->ns, OLD, &o) == 0; o = NULL) {
                        json_decref(o);
                        if (now_mono_ms() > end)
                                return -ETIMEDOUT;
                        usleep(200 * 1000);
                }
                return 0;
        }
        /* etcd-io: its Deployment scaled to 0, and the status a deployment controller writes */
        const char *ns = "etcd-operator-system", *name = "etcd-operator-controller-manager";
        _cleanup_free_ char *path = NULL;
        (void)kube_resource_path(&deployments, ns, name, &path);
        json_t *spec = json_pack("{s:{s:i}}", "spec", "replicas", 0);
        int k = kube_request(lab->admin, "PATCH", path, "application/merge-patch+json", spec,
                             "patch", "deployments", ns, NULL);
        json_decref(spec);
        _cleanup_free_ char *status_path = xasprintf("%s/status", path);
        json_t *st = json_pack("{s:{s:i, s:i, s:i, s:i}}", "status", "replicas", 0, "readyReplicas",
                               0, "availableReplicas", 0, "updatedReplicas", 0);
        if (k >= 0)
                k = kube_request(lab->admin, "PATCH", status_path, "application/merge-patch+json",
                                 st, "patch", "deployments/status", ns, NULL);
        json_decref(st);
        return k < 0 ? k : 0;
}

/* Lay the old cluster out in namespace ns, healthy, its operator stopped, the writer going. */
static int lay_out(run *r, const char *how, int round)
{
        memset(r, 0, sizeof(*r));
        r->how = how;
        snprintf(r->ns, sizeof(r->ns), "tk-%s-%d", how[0] == 'g' ? "gitcd" : "hand", round);
        r->lo = (layout_opts){
            .name = OLD, .ns = r->ns, .size = N_OLD, .version = version, .operator_replicas = 1};
        if (layout_create(lab->admin, kind, &r->lo) < 0 ||
            layout_wait_healthy(lab->admin, kind, &r->lo, 180) < 0) {
                fprintf(stderr, "%s: the %s layout is not healthy\n", r->ns, from);
                return -EIO;
        }
        _cleanup_free_ char *sel = layout_member_selector(kind, &r->lo);
        json_t *items = NULL;
        if (kube_list(lab->admin, &pods, r->ns, sel, &items, NULL) < 0 ||
            json_array_size(items) != N_OLD) {
                json_decref(items);
                return -EIO;
        }
        for (size_t i = 0; i < N_OLD; i++)
                r->old_pods[i] = xstrdup(json_string_value(json_object_get(
                    json_object_get(json_array_get(items, i), "metadata"), "name")));
        json_decref(items);
        if (stop_operator(r) < 0) {
                fprintf(stderr, "%s: the operator was not stopped: %s\n", r->ns,
                        kube_client_last_error(lab->admin));
                return -EIO;
        }
        etcd_client *c = connect_run(r);
        etcd_members *l = NULL;
        if (!c || etcd_member_list(c, &l) < 0 || l->n != N_OLD) {
                etcd_members_free(l);
                etcd_client_free(c);
                return -EIO;
        }
        for (size_t i = 0; i < N_OLD; i++) {
                r->old_ids[i] = l->members[i].id;
                r->old_names[i] = xstrdup(l->members[i].name);
                if (l->members[i].n_client_urls > 0)
                        r->old_clients[i] = xstrdup(l->members[i].client_urls[0]);
                r->gone[i] = -1;
        }
        etcd_members_free(l);
        etcd_client_free(c);
        harness_writer_opts wo = {.prefix = "t/",
                                  .interval_ms = 20,
                                  .connect = connect_run,
                                  .data = r,
                                  .reconnect_on = reconnect_always};
        r->w = harness_writer_start(&wo);
        for (int64_t end = now_mono_ms() + 60000; r->w->acked < 20 && now_mono_ms() < end;)
                usleep(20 * 1000);
        /* idle: a cluster that has run a while, which etcd takes a new member into at once */
        usleep(IDLE_MS * 1000);
        return r->w->acked < 20 ? -EIO : 0;
}

static void timing_start(run *r)
{
        r->t0 = now_mono_ms();
        if (pthread_create(&r->lister, NULL, lister_main, r) != 0)
                abort();
}

/* Stop timing and the writer; every acknowledged key read back (r->lost: how many missing). */
static void finish(run *r)
{
        /* the last removal seen before the lister stops */
        for (int64_t end = now_mono_ms() + 10000; r->n_gone < N_OLD && now_mono_ms() < end;)
                usleep(LIST_MS * 1000);
        r->stop = 1;
        pthread_join(r->lister, NULL);
        for (int target = r->w->acked + 20, i = 0; r->w->acked < target && i < 3000; i++)
                usleep(10 * 1000);
        harness_writer_stop(r->w);
        etcd_client *c = connect_run(r);
        etcd_kv_list *l = NULL;
        r->lost = r->w->acked;
        if (c && etcd_get(c, "t/", true, &l) == 0) {
                size_t j = 0;
                for (int i = 0; i < r->w->acked; i++) {
                        char key[64];
                        snprintf(key, sizeof(key), "t/%05d", i);
                        while (j < l->n && strcmp(l->kvs[j].key, key) < 0)
                                j++;
                        if (j < l->n && streq(l->kvs[j].key, key))
                                r->lost--;
                }
        }
        etcd_kv_list_free(l);
        etcd_client_free(c);
        if (r->n_gone < N_OLD)
                r->ok = false;
}

/* Stop what the run left running: its Pods (and the controllers that would recreate them). */
static void clear_away(run *r)
{
        static const kube_gvr owners[] = {{"apps", "v1", "statefulsets", true},
                                          {"apps", "v1", "replicasets", true}};
        for (size_t g = 0; g < 3; g++) {
                const kube_gvr *gvr = g < 2 ? &owners[g] : &pods;
                json_t *items = NULL;
                if (kube_list(lab->admin, gvr, r->ns, NULL, &items, NULL) < 0)
                        continue;
                size_t i;
                json_t *o;
                json_array_foreach(items, i, o)
                {
                        const char *name = json_string_value(
                            json_object_get(json_object_get(o, "metadata"), "name"));
                        (void)kube_delete(lab->admin, gvr, r->ns, name, "Background");
                }
                json_decref(items);
        }
}

static void run_release(run *r)
{
        harness_writer_free(r->w);
        for (size_t i = 0; i < N_OLD; i++) {
                free(r->old_pods[i]);
                free(r->old_names[i]);
                free(r->old_clients[i]);
        }
}

/* ---- gitcd's run ------------------------------------------------------ */

/*
 * gitcd's steps from its audit log (the state store read directly: the events' times in
 * ms), oldest first, as seconds after the apply began: where its time between steps went.
 */
static void audit_timeline(e2e *e, const run *r, int64_t wall0, strbuf *sb)
{
        _cleanup_free_ char *path = xasprintf("%s/state.db", e->state_dir);
        _cleanup_free_ char *id = xasprintf("%s/%s", r->ns, CLUSTER);
        state_db *db = NULL;
        state_audit_list l = {0};
        state_audit_filter f = {.cluster = id};
        if (state_open(path, STATE_OPEN_READ_ONLY, &db) < 0 || state_audit_query(db, &f, &l) < 0) {
                state_close(db);
                return;
        }
        for (size_t i = l.n; i-- > 0;) {
                const state_audit_event *ev = l.items[i];
                if (streq(ev->action, "member.adopt"))
                        continue;
                json_t *after = ev->after_json ? json_loads(ev->after_json, 0, NULL) : NULL;
                const char *m = json_string_value(json_object_get(after, "member"));
                sb_printf(sb, "%s%.2f %s%s%s", sb->len ? ", " : "",
                          (double)(ev->time_ms - wall0) / 1000.0,
                          strncmp(ev->action, "member.", 7) == 0 ? ev->action + 7 : ev->action,
                          m ? " " : "", m ? m : "");
                json_decref(after);
        }
        state_audit_list_release(&l);
        /* steps etcd refused (journaled, then abandoned: gitcd waited and tried again) */
        bool first = true;
        int journaled = 0;
        state_op *op = NULL;
        for (int64_t opid = 1; state_op_get(db, opid, &op) == 0; opid++) {
                journaled++;
                if (op->state == STATE_OP_ABANDONED && streq_ptr(op->cluster, id)) {
                        sb_printf(sb, "%s%.2f %s",
                                  first ? "; refused by etcd, tried again: " : ", ",
                                  (double)(op->started_ms - wall0) / 1000.0,
                                  strncmp(op->kind, "member.", 7) == 0 ? op->kind + 7 : op->kind);
                        first = false;
                }
                state_op_free(op);
                op = NULL;
        }
        sb_printf(sb, " (%d operations journaled)", journaled);
        state_close(db);
}

static void gitcd_run(run *r, strbuf *audit)
{
        e2e *e = e2e_new();
        _cleanup_free_ char *y = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                           "kind: EtcdCluster\n"
                                           "metadata:\n  name: %s\n  namespace: %s\n"
                                           "spec:\n  replicas: 3\n  version: \"%s\"\n"
                                           "  adopt:\n    from: %s\n    name: %s\n",
                                           CLUSTER, r->ns, version, from, OLD);
        e2e_write_file(e, "cluster.yaml", y);
        const char *args[] = {
            "apply",     "-q",       "--source",   e->source,      "--timeout",
            "600s",      "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(lab->api),
            "--context", "gitcd",    NULL};
        _cleanup_free_ char *out = NULL, *err = NULL;
        int64_t wall0 = now_wall_ms();
        timing_start(r);
        int k = e2e_runv(e, &out, &err, args);
        r->exited = now_mono_ms() - r->t0;
        r->ok = k == 0;
        if (k != 0)
                fprintf(stderr, "%s: gitcd apply exited %d: %s%s\n", r->ns, k, out ? out : "",
                        err ? err : "");
        finish(r);
        audit_timeline(e, r, wall0, audit);
        e2e_free(e);
}

/* ---- by hand ----------------------------------------------------------- */

/* argv run to its end: 0, or -EIO when it failed; its stdout and stderr in *ret_out either way. */
static int run_capture(char *const *argv, char **ret_out)
{
        int fd[2];
        if (pipe2(fd, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY);
                if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(fd[1], 1) < 0 || dup2(fd[1], 2) < 0)
                        _exit(127);
                execv(argv[0], argv);
                _exit(127);
        }
        close(fd[1]);
        strbuf sb = STRBUF_INIT;
        char buf[4096];
        ssize_t n;
        while ((n = read(fd[0], buf, sizeof(buf))) != 0)
                if (n > 0 && sb.len < 65536)
                        sb_append_len(&sb, buf, (size_t)n);
                else if (n < 0 && errno != EINTR)
                        break;
        close(fd[0]);
        int st = 0;
        while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        *ret_out = sb_detach(&sb);
        return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* etcdctl --endpoints=eps ARGS... (NULL-terminated): 0 or -EIO, its output in *ret_out. */
static int etcdctl(const char *eps, char **ret_out, ...)
{
        char *argv[16];
        size_t n = 0;
        _cleanup_free_ char *e = xasprintf("--endpoints=%s", eps);
        argv[n++] = etcdctl_bin;
        argv[n++] = e;
        argv[n++] = "--dial-timeout=1s";
        argv[n++] = "--command-timeout=5s";
        va_list ap;
        va_start(ap, ret_out);
        for (char *a = va_arg(ap, char *); a && n < 15; a = va_arg(ap, char *))
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        char *out = NULL;
        int k = run_capture(argv, &out);
        if (ret_out)
                *ret_out = out;
        else
                free(out);
        return k;
}

/*
 * The same etcdctl command (args NULL-terminated) typed again every RETRY_MS until etcd
 * accepts it, STEP_MS at most, through every address the run has now: 0 or -ETIMEDOUT,
 * the last output in *ret_out. An error saying done_too (not NULL) is taken as done: a
 * removal etcd applied but whose answer was lost (the leader stepping down) says "member
 * not found" when typed again.
 */
static int etcdctl_until(run *r, int *tries, const char *done_too, char **ret_out,
                         const char *const *args)
{
        int k = -ETIMEDOUT;
        for (int64_t end = now_mono_ms() + STEP_MS; now_mono_ms() < end;) {
                (*tries)++;
                _cleanup_free_ char *eps = endpoints(r);
                free(*ret_out);
                *ret_out = NULL;
                k = etcdctl(eps, ret_out, args[0], args[1], args[2], args[3], args[4], NULL);
                if (k < 0 && done_too && *ret_out && strstr(*ret_out, done_too))
                        k = 0;
                if (k == 0)
                        break;
                usleep(RETRY_MS * 1000);
        }
        return k;
}

static int create_pod(run *r, const char *name, const char *initial)
{
        _cleanup_free_ char *peer = xasprintf("http://%s.byhand.%s.svc:2380", name, r->ns);
        _cleanup_free_ char *client = xasprintf("http://%s.byhand.%s.svc:2379", name, r->ns);
        _cleanup_free_ char *a_name = xasprintf("--name=%s", name);
        _cleanup_free_ char *a_peer = xasprintf("--initial-advertise-peer-urls=%s", peer);
        _cleanup_free_ char *a_client = xasprintf("--advertise-client-urls=%s", client);
        _cleanup_free_ char *a_initial = xasprintf("--initial-cluster=%s", initial);
        _cleanup_free_ char *image = xasprintf("quay.io/coreos/etcd:v%s", version);
        json_t *cmd = json_pack("[s, s, s, s, s, s, s, s, s]", "etcd", "--data-dir=/var/etcd/data",
                                a_name, a_peer, "--listen-peer-urls=http://0.0.0.0:2380",
                                "--listen-client-urls=http://0.0.0.0:2379", a_client, a_initial,
                                "--initial-cluster-state=existing");
        json_t *pod = json_pack(
            "{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:s, s:[{s:s, s:s, s:o, s:[{s:s, s:s}]}], "
            "s:[{s:s, s:{}}]}}",
            "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", r->ns,
            "labels", "app", "byhand", "spec", "hostname", name, "subdomain", "byhand",
            "containers", "name", "etcd", "image", image, "command", cmd, "volumeMounts", "name",
            "data", "mountPath", "/var/etcd", "volumes", "name", "data", "emptyDir");
        _cleanup_free_ char *path = NULL;
        (void)kube_resource_path(&pods, r->ns, NULL, &path);
        int k = kube_request(lab->admin, "POST", path, NULL, pod, "create", "pods", r->ns, NULL);
        json_decref(pod);
        return k < 0 ? k : 0;
}

/* In etcdctl's simple output of `endpoint status` of one endpoint: "URL, ID, VER, SIZE, LEADER, ..." */
static bool leads(const char *status_line)
{
        const char *p = status_line;
        for (int field = 0; p && field < 4; field++)
                p = strchr(p + 1, ',');
        return p && strncmp(p, ", true", 6) == 0;
}

static int replace_one(run *r, size_t n, size_t old)
{
        _cleanup_free_ char *name = xasprintf("new-%zu", n);
        _cleanup_free_ char *peer =
            xasprintf("--peer-urls=http://%s.byhand.%s.svc:2380", name, r->ns);
        char hex[17], *out = NULL;
        int k =
            etcdctl_until(r, &r->typed[n][0], NULL, &out,
                          (const char *const[]){"member", "add", name, peer, "--learner", NULL});
        /* "Member 8e9e05c52164694d added to cluster ...\n\nETCD_INITIAL_CLUSTER=\"...\"" */
        const char *m = out ? strstr(out, "Member ") : NULL;
        const char *ic = out ? strstr(out, "ETCD_INITIAL_CLUSTER=\"") : NULL;
        if (k < 0 || !m || !ic || sscanf(m, "Member %16s", hex) != 1) {
                fprintf(stderr, "%s: member add: %s\n", r->ns, out ? out : "");
                free(out);
                return -EIO;
        }
        ic += strlen("ETCD_INITIAL_CLUSTER=\"");
        _cleanup_free_ char *initial = xstrndup(ic, strcspn(ic, "\""));
        if (create_pod(r, name, initial) < 0) {
                fprintf(stderr, "%s: Pod %s: %s\n", r->ns, name,
                        kube_client_last_error(lab->admin));
                free(out);
                return -EIO;
        }
        k = etcdctl_until(r, &r->typed[n][1], NULL, &out,
                          (const char *const[]){"member", "promote", hex, NULL, NULL, NULL});
        /* the old one leading: leadership moved to the new voter first (sent to the leader) */
        _cleanup_free_ char *old_ep = xstrdup_null(r->old_clients[old]);
        char *st = NULL;
        if (k == 0 && old_ep && etcdctl(old_ep, &st, "endpoint", "status", NULL) == 0 && leads(st))
                for (int64_t end = now_mono_ms() + STEP_MS;
                     (k = etcdctl(old_ep, NULL, "move-leader", hex, NULL)) < 0 &&
                     now_mono_ms() < end;)
                        usleep(RETRY_MS * 1000);
        free(st);
        char old_hex[17];
        etcd_member_id_format(r->old_ids[old], old_hex);
        if (k == 0)
                k = etcdctl_until(
                    r, &r->typed[n][2], "member not found", &out,
                    (const char *const[]){"member", "remove", old_hex, NULL, NULL, NULL});
        if (k < 0)
                fprintf(stderr, "%s: replacing %s: %s\n", r->ns, r->old_names[old], out ? out : "");
        free(out);
        if (k == 0 && kind == LAYOUT_COREOS)
                /* coreos names each Pod after its member */
                k = kube_delete(lab->admin, &pods, r->ns, r->old_names[old], "Background") < 0
                        ? -EIO
                        : 0;
        return k;
}

static void hand_run(run *r)
{
        /* followers first, the leader last, as gitcd does */
        size_t order[N_OLD], n = 0, leader = N_OLD;
        for (size_t i = 0; i < N_OLD; i++) {
                _cleanup_free_ char *ep = xstrdup_null(r->old_clients[i]);
                char *st = NULL;
                if (ep && etcdctl(ep, &st, "endpoint", "status", NULL) == 0 && leads(st))
                        leader = i;
                else
                        order[n++] = i;
                free(st);
        }
        if (leader < N_OLD)
                order[n++] = leader;
        timing_start(r);
        r->ok = n == N_OLD;
        for (size_t i = 0; r->ok && i < N_OLD; i++)
                r->ok = replace_one(r, i, order[i]) == 0;
        r->exited = now_mono_ms() - r->t0;
        finish(r);
}

/* ---- figures ----------------------------------------------------------- */

static double sec(int64_t ms)
{
        return (double)ms / 1000.0;
}

/* Member i's replacement: learner seen -> old member gone; its gap: previous gone -> learner. */
static int64_t member_ms(const run *r, size_t i)
{
        if (i >= r->n_new || i >= r->n_gone)
                return -1;
        return r->gone[r->gone_order[i]] - r->added[i];
}

static int64_t gap_ms(const run *r, size_t i)
{
        return r->added[i] - (i == 0 ? 0 : r->gone[r->gone_order[i - 1]]);
}

static int64_t total_ms(const run *r)
{
        return r->n_gone == N_OLD ? r->gone[r->gone_order[N_OLD - 1]] : -1;
}

static void print_run(const run *r, int round)
{
        printf("round %d, %s (namespace %s)%s\n", round, r->how, r->ns, r->ok ? "" : ": FAILED");
        for (size_t i = 0; i < N_OLD && i < r->n_new && i < r->n_gone; i++) {
                printf("  member %zu (%s): gap %5.2f s, learner -> voter %5.2f s, voter -> old "
                       "gone %5.2f s: %5.2f s\n",
                       i + 1, r->old_names[r->gone_order[i]], sec(gap_ms(r, i)),
                       sec(r->promoted[i] - r->added[i]),
                       sec(r->gone[r->gone_order[i]] - r->promoted[i]), sec(member_ms(r, i)));
                if (r->how[0] != 'g')
                        printf("    typed until etcd took it: member add x%d, promote x%d, remove "
                               "x%d\n",
                               r->typed[i][0], r->typed[i][1], r->typed[i][2]);
        }
        if (total_ms(r) >= 0)
                printf("  whole: %.2f s to the last old member gone", sec(total_ms(r)));
        else
                printf("  whole: %zu of %d old members gone", r->n_gone, N_OLD);
        if (r->exited > 0)
                printf(" (%s at %.2f s)",
                       r->how[0] == 'g' ? "gitcd apply exited" : "the last command done",
                       sec(r->exited));
        printf("\n  writer: %d acknowledged, %d failed puts, %d retries of one key at most, "
               "%d ms the longest put, %d lost\n",
               r->w->acked, r->w->failed, r->w->max_retries, r->w->max_latency_ms, r->lost);
}

static int cmp64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

static int64_t median(int64_t *v, int n)
{
        for (int i = 0; i < n; i++)
                if (v[i] < 0)
                        return -1;
        qsort(v, (size_t)n, sizeof(*v), cmp64);
        return n ? v[n / 2] : -1;
}

static void print_ratio(const char *what, int64_t g, int64_t h)
{
        if (g > 0 && h < 0 && h_skipped)
                printf("  %-28s gitcd %6.2f s\n", what, sec(g));
        else if (h > 0 && g < 0 && g_skipped)
                printf("  %-28s by hand %6.2f s\n", what, sec(h));
        else if (g > 0 && h > 0)
                printf("  %-28s gitcd %6.2f s   by hand %6.2f s   %5.2fx\n", what, sec(g), sec(h),
                       (double)g / (double)h);
        else
                printf("  %-28s failed (gitcd %lld ms, by hand %lld ms)\n", what, (long long)g,
                       (long long)h);
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        int rounds = 1;
        const char *only = NULL; /* "gitcd" or "hand": that side alone */
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "coreos"))
                        kind = LAYOUT_COREOS, from = "coreos";
                else if (streq(argv[i], "etcdio"))
                        kind = LAYOUT_ETCDIO, from = "etcd-io";
                else if (streq(argv[i], "improbable"))
                        kind = LAYOUT_IMPROBABLE, from = "improbable";
                else if (streq(argv[i], "gitcd") || streq(argv[i], "hand")) {
                        only = argv[i];
                        g_skipped = streq(only, "hand");
                        h_skipped = !g_skipped;
                } else if (strchr(argv[i], '.'))
                        version = argv[i];
                else if (atoi(argv[i]) >= 1 && atoi(argv[i]) <= MAX_ROUNDS)
                        rounds = atoi(argv[i]);
                else {
                        fprintf(stderr, "usage: bench-takeover [coreos|etcdio|improbable] "
                                        "[VERSION] [ROUNDS 1-9] [gitcd|hand]\n");
                        return 2;
                }
        }
        if (!getenv("GITCD_BIN"))
                setenv("GITCD_BIN", GITCD_BIN, 1);
        if (!getenv("GITCD_SOURCE_ROOT"))
                setenv("GITCD_SOURCE_ROOT", GITCD_SOURCE_ROOT, 1);
        etcdctl_bin = harness_etcd_path(version, "etcdctl");
        if (kind != LAYOUT_COREOS) {
                char *cm = kubeapi_find_controller_manager();
                free(cm);
                if (!cm) {
                        fprintf(stderr, "needs kube-controller-manager (run scripts/setup)\n");
                        return 77;
                }
        }
        lab = kube_lab_start("default", version);
        if (!lab)
                return 77;
        if (kind != LAYOUT_COREOS && kubeapi_start_controllers(lab->api) < 0) {
                fprintf(stderr, "the controllers did not start\n");
                kube_lab_free(lab);
                return 1;
        }
        double load[3] = {0};
        (void)getloadavg(load, 3);
        printf("bench-takeover: a 3-member %s cluster of etcd %s taken over on the kubernetes "
               "target, gitcd against by hand\n(load average at the start %.1f %.1f %.1f)\n\n",
               from, version, load[0], load[1], load[2]);
        fflush(stdout);

        bool broke = false;
        int64_t g_total[MAX_ROUNDS], h_total[MAX_ROUNDS], g_member[N_OLD][MAX_ROUNDS],
            h_member[N_OLD][MAX_ROUNDS];
        for (int i = 0; i < MAX_ROUNDS; i++) {
                g_total[i] = h_total[i] = -1;
                for (size_t m = 0; m < N_OLD; m++)
                        g_member[m][i] = h_member[m][i] = -1;
        }
        strbuf audit = STRBUF_INIT;
        for (int round = 1; round <= rounds; round++) {
                for (int side = 0; side < 2; side++) {
                        bool gitcd = (side == 0) == (round % 2 == 1);
                        if (only && streq(only, "gitcd") != gitcd)
                                continue;
                        run r;
                        if (lay_out(&r, gitcd ? "gitcd" : "by hand", round) < 0) {
                                r.ok = false;
                                if (r.w)
                                        harness_writer_stop(r.w);
                        } else if (gitcd) {
                                sb_reset(&audit);
                                gitcd_run(&r, &audit);
                        } else {
                                hand_run(&r);
                        }
                        if (r.w)
                                print_run(&r, round);
                        if (gitcd && audit.len)
                                printf("  gitcd's audit log, s after the apply began: %s\n",
                                       sb_str(&audit));
                        fflush(stdout);
                        broke = broke || !r.ok || r.lost > 0 || !r.w;
                        int64_t *tot = gitcd ? g_total : h_total;
                        tot[round - 1] = r.ok ? total_ms(&r) : -1;
                        for (size_t i = 0; i < N_OLD; i++)
                                (gitcd ? g_member : h_member)[i][round - 1] =
                                    r.ok ? member_ms(&r, i) : -1;
                        clear_away(&r);
                        run_release(&r);
                }
        }
        (void)getloadavg(load, 3);
        printf("\n%s of %d round%s (load average at the end %.1f %.1f %.1f):\n",
               rounds > 1 ? "medians" : "figures", rounds, rounds > 1 ? "s" : "", load[0], load[1],
               load[2]);
        for (size_t i = 0; i < N_OLD; i++) {
                char what[64];
                snprintf(what, sizeof(what), "member %zu (learner -> gone)", i + 1);
                print_ratio(what, median(g_member[i], rounds), median(h_member[i], rounds));
        }
        print_ratio("whole takeover", median(g_total, rounds), median(h_total, rounds));
        sb_release(&audit);
        kube_lab_free(lab);
        free(etcdctl_bin);
        if (broke)
                printf("\nsomething broke (a step failed or a write was lost): exit 1\n");
        return broke ? 1 : 0;
}

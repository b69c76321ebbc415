/*
 * The local target against real etcd (3.5.16 and 3.4.23): members as
 * supervised processes. The membership plan is built by hand here, the way
 * the reconciler will build it: place_member() for addresses, then the
 * initial cluster filled in from every member's peer URL.
 *
 * Every process the target starts is recorded (pid files and statuses) and
 * killed, with its process group, at teardown and at exit, so a failing
 * test leaves no etcd behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "render/render.h"
#include "reconciler/membership.h"
#include "api/spec.h"
#include "tests/harness/harness.h"
#include "targets/local.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define START_TIMEOUT_MS 30000

/* --- process bookkeeping: every pid the target started dies at the end ---- */

/*
 * Pids seen in this test case: killed (with their process group) at the
 * case's teardown; the harness also kills them at exit or on a fatal signal.
 */
static pid_t tracked[256];
static size_t n_tracked;

static void track(pid_t pid)
{
        if (pid <= 0)
                return;
        for (size_t i = 0; i < n_tracked; i++)
                if (tracked[i] == pid)
                        return;
        if (n_tracked < ARRAY_SIZE(tracked))
                tracked[n_tracked++] = pid;
        harness_track_pid(pid);
}

static void kill_tracked(void)
{
        for (size_t i = 0; i < n_tracked; i++) {
                (void)kill(-tracked[i], SIGKILL);
                (void)kill(tracked[i], SIGKILL);
                (void)waitpid(tracked[i], NULL, 0);
                harness_untrack_pid(tracked[i]);
        }
        n_tracked = 0;
}

/* Track the pid in every member's pid file of the cluster. */
static void track_pid_files(const char *state_dir, const char *ns, const char *cluster)
{
        _cleanup_free_ char *dir = xasprintf("%s/clusters/%s/%s", state_dir, ns, cluster);
        for (int i = 0; i < 8; i++) {
                _cleanup_free_ char *path = xasprintf("%s/%s-%d/pid", dir, cluster, i);
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (read_file(path, 64, &data, &len) == 0)
                        track((pid_t)atol(data));
        }
}

/* --- fixtures --------------------------------------------------------------- */

static char *root_dir;

typedef struct fixture {
        const char *version;
        char *state_dir;
        const char *etcd_dir; /* NULL: the default lookup */
        etcd_cluster *cluster;
        target *t;
        membership_plan *plan;
        int backoff_base_ms;
        int stop_timeout_ms; /* 0: 10 s */
} fixture;

/* The cluster as an operator writes it, through the real loader. */
static etcd_cluster *load_cluster_with(const char *name, const char *version, int replicas,
                                       const char *extra_spec)
{
        _cleanup_free_ char *yaml = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "  namespace: default\n"
                                              "spec:\n"
                                              "  replicas: %d\n"
                                              "  version: \"%s\"\n"
                                              "%s",
                                              name, replicas, version, extra_spec);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        int r = spec_load_buffer("test.yaml", yaml, strlen(yaml), &set, &diags);
        if (r < 0)
                diag_print(&diags, stderr);
        assert_int_equal(r, 0);
        assert_int_equal(set.n, 1);
        etcd_cluster *c = set.items[0];
        set.n = 0;
        cluster_set_release(&set);
        diag_list_release(&diags);
        return c;
}

static etcd_cluster *load_cluster(const char *name, const char *version, int replicas)
{
        return load_cluster_with(name, version, replicas, "");
}

static target *new_target(fixture *f)
{
        local_target_opts o = {
            .state_dir = f->state_dir,
            .etcd_dir = f->etcd_dir,
            .health_timeout_ms = 1000,
            .backoff_base_ms = f->backoff_base_ms,
            .backoff_max_ms = f->backoff_base_ms ? f->backoff_base_ms * 8 : 0,
            .stop_timeout_ms = f->stop_timeout_ms ? f->stop_timeout_ms : 10000,
        };
        target *t = NULL;
        assert_int_equal(local_target_new(&o, &t), 0);
        assert_non_null(t);
        return t;
}

static int fixture_setup(void **state, const char *version, const char *name, int backoff)
{
        if (!harness_have_etcd(version)) {
                print_message("etcd %s not installed\n", version);
                return -1;
        }
        fixture *f = XNEW(fixture);
        f->version = version;
        f->state_dir = xasprintf("%s/%s-%s", root_dir, name, version);
        f->backoff_base_ms = backoff;
        f->cluster = load_cluster(name, version, 1);
        f->t = new_target(f);
        f->plan = XNEW(membership_plan);
        f->plan->cluster_token = xasprintf("%s-token", name);
        *state = f;
        return 0;
}

static int fixture_teardown(void **state)
{
        fixture *f = *state;
        if (!f)
                return 0;
        track_pid_files(f->state_dir, "default", f->cluster->name);
        kill_tracked();
        target_free(f->t);
        membership_plan_free(f->plan);
        etcd_cluster_free(f->cluster);
        (void)rm_rf(f->state_dir);
        free(f->state_dir);
        free(f);
        return 0;
}

/* Add n members to the plan, all "new" with each other (a static bootstrap). */
static void place_members(fixture *f, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                member_plan *mp = membership_plan_add(f->plan);
                mp->name = xasprintf("%s-%zu", f->cluster->name, i);
                mp->ordinal = (int)i;
                assert_int_equal(f->t->ops->place_member(f->t, f->cluster, mp), 0);
        }
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < f->plan->n; i++)
                sb_printf(&ic, "%s%s=%s", i ? "," : "", f->plan->members[i].name,
                          f->plan->members[i].peer_url);
        for (size_t i = 0; i < f->plan->n; i++) {
                member_plan *mp = &f->plan->members[i];
                free(mp->initial_cluster);
                free(mp->initial_cluster_state);
                mp->initial_cluster = xstrdup(sb_str(&ic));
                mp->initial_cluster_state = xstrdup("new");
        }
        sb_release(&ic);
}

/* The member's etcd process (the local target's own fact, not in the shared status). */
#define PID(f, member)                                                                             \
        local_target_member_pid((f)->t, (f)->cluster->namespace_, (f)->cluster->name, (member))

/*
 * The member's status as the reconciler sees it: the plan entry stands for
 * the member record, which takes the data identity the target reports once
 * the member ran (here: was ready) and forgets it when the member is
 * removed (its member.json is gone); membership_check_identity() then judges data loss.
 */
static target_member_status status_of(fixture *f, const char *member)
{
        target_member_status s = {0};
        assert_int_equal(f->t->ops->member_status(f->t, f->cluster, member, &s), 0);
        track(PID(f, member));
        for (size_t i = 0; i < f->plan->n; i++) {
                member_plan *mp = &f->plan->members[i];
                if (!streq(mp->name, member))
                        continue;
                _cleanup_free_ char *held = xasprintf("%s/clusters/default/%s/%s/member.json",
                                                      f->state_dir, f->cluster->name, member);
                if (!path_exists(held))
                        str_assign(&mp->data_identity, NULL);
                else if (!mp->data_identity && s.state == MEMBER_READY)
                        mp->data_identity = xstrdup_null(s.data_identity);
                (void)membership_check_identity(mp->data_identity, &s);
        }
        return s;
}

/* Drive the target (tick + wait_event) until the member reaches want. */
static target_member_status wait_state(fixture *f, const char *member, member_runtime_state want,
                                       int timeout_ms)
{
        int64_t deadline = now_mono_ms() + timeout_ms;
        for (;;) {
                assert_true(f->t->ops->tick(f->t) >= 0);
                target_member_status s = status_of(f, member);
                if (s.state == want)
                        return s;
                if (now_mono_ms() > deadline) {
                        _cleanup_free_ char *log =
                            xasprintf("%s/clusters/default/%s/%s/etcd.log", f->state_dir,
                                      f->cluster->name, member);
                        print_error("member %s: want %s, still %s (%s); log %s\n", member,
                                    member_runtime_state_name(want),
                                    member_runtime_state_name(s.state), s.detail, log);
                        target_member_status_release(&s);
                        fail();
                }
                target_member_status_release(&s);
                (void)f->t->ops->wait_event(f->t, 100);
        }
}

static char *proc_cmdline(pid_t pid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%ld/cmdline", (long)pid);
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &data, &len) < 0)
                return NULL;
        for (size_t i = 0; i + 1 < len; i++)
                if (data[i] == '\0')
                        data[i] = ' ';
        return data;
}

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        sb_append_len(userdata, ptr, size * nmemb);
        return size * nmemb;
}

/* POST <client_url>/v3/cluster/member/list through the gateway; the JSON answer. */
static json_t *member_list(const char *client_url)
{
        _cleanup_free_ char *url = xasprintf("%s/v3/cluster/member/list", client_url);
        CURL *h = curl_easy_init();
        strbuf sb = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{}");
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &sb);
        CURLcode cr = curl_easy_perform(h);
        curl_easy_cleanup(h);
        json_t *o = cr == CURLE_OK ? json_loads(sb_str(&sb), 0, NULL) : NULL;
        sb_release(&sb);
        return o;
}

/* The member id of the member answering at client_url (decimal string, newly allocated). */
static char *member_id(const char *client_url)
{
        json_t *o = member_list(client_url);
        assert_non_null(o);
        const char *id =
            json_string_value(json_object_get(json_object_get(o, "header"), "member_id"));
        assert_non_null(id);
        char *r = xstrdup(id);
        json_decref(o);
        return r;
}

/* --- single-member lifecycle ------------------------------------------------ */

static int setup_single(void **state, const char *version)
{
        return fixture_setup(state, version, "solo", 0);
}

static int setup_single_35(void **state)
{
        return setup_single(state, "3.5.16");
}

static int setup_single_34(void **state)
{
        return setup_single(state, "3.4.23");
}

/* The same place for the member from another target instance (gitcd restarted). */
static void assert_placed_again(fixture *f, const char *name, const char *client_url,
                                const char *peer_url)
{
        etcd_cluster *c = f->cluster;
        target *t2 = new_target(f);
        member_plan again = {.name = (char *)name};
        assert_int_equal(t2->ops->place_member(t2, c, &again), 0);
        assert_string_equal(again.client_url, client_url);
        assert_string_equal(again.peer_url, peer_url);
        again.name = NULL;
        free(again.peer_url);
        free(again.client_url);
        free(again.listen_peer_url);
        free(again.listen_client_url);
        free(again.listen_metrics_url);
        free(again.data_dir);
        free(again.tls_dir);
        target_free(t2);
}

/* The exit names its cluster, so a daemon observes just that one. */
static void assert_exit_event(fixture *f)
{
        target *t = f->t;
        char **events = NULL;
        size_t n_events = 0;
        assert_int_equal(t->ops->take_events(t, &events, &n_events), 0);
        assert_true(n_events >= 1);
        _cleanup_free_ char *cluster_id = xasprintf(
            "%s/%s", f->cluster->namespace_ ? f->cluster->namespace_ : "default", f->cluster->name);
        assert_string_equal(events[0], cluster_id);
        for (size_t i = 0; i < n_events; i++)
                free(events[i]);
        free(events);
}

/*
 * A new target (gitcd restarted) adopts the running member pid, even
 * without its pid file, and supervises it. The member's pid after its
 * restart.
 */
static pid_t adopt_running(fixture *f, const char *name, pid_t pid)
{
        etcd_cluster *c = f->cluster;
        target *t = f->t;
        target_member_status s;
        int64_t t0;
        target_free(t);
        t = f->t = new_target(f);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_READY);
        assert_int_equal(PID(f, name), pid);
        target_member_status_release(&s);
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        s = status_of(f, name);
        assert_int_equal(PID(f, name), pid);
        target_member_status_release(&s);
        /* Without its pid file (lost between fork and recording), /proc still finds it. */
        target_free(t);
        t = f->t = NULL;
        _cleanup_free_ char *pid_file =
            xasprintf("%s/clusters/default/%s/%s/pid", f->state_dir, c->name, name);
        assert_int_equal(unlink(pid_file), 0);
        t = f->t = new_target(f);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_READY);
        assert_int_equal(PID(f, name), pid);
        target_member_status_release(&s);
        assert_true(path_exists(pid_file));
        /* ... and supervises it: its death is an event too. */
        t0 = now_mono_ms();
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(t->ops->wait_event(t, 10000), 1);
        assert_true(now_mono_ms() - t0 < 900);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_CRASHED);
        target_member_status_release(&s);
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        pid = PID(f, name);
        target_member_status_release(&s);
        return pid;
}

/* Stop: STOPPED, and no restart, not even by a new target. */
static void stop_stays_stopped(fixture *f, const char *name, pid_t pid, const member_plan *mp)
{
        etcd_cluster *c = f->cluster;
        target *t = f->t;
        target_member_status s;
        assert_int_equal(t->ops->stop_member(t, c, name), 0);
        assert_int_equal(kill(pid, 0), -1);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_STOPPED);
        assert_int_equal(PID(f, name), 0);
        target_member_status_release(&s);
        assert_int_equal(t->ops->wait_event(t, 1500), 0);
        assert_true(t->ops->tick(t) >= 0);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_STOPPED);
        target_member_status_release(&s);
        assert_int_equal(t->ops->stop_member(t, c, name), 0); /* idempotent */

        /*
         * A new target (gitcd restarted) leaves it stopped: without a pid file
         * nothing is restarted, and member.json keeps no "stopped" of its own
         * (whether it should run is the state store's).
         */
        target_free(f->t);
        f->t = t = new_target(f);
        assert_true(t->ops->tick(t) >= 0);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_STOPPED);
        assert_int_equal(PID(f, name), 0);
        target_member_status_release(&s);
        {
                /* <member dir>/data -> <member dir>/member.json */
                int dir_len = (int)(strrchr(mp->data_dir, '/') - mp->data_dir);
                _cleanup_free_ char *json_path =
                    xasprintf("%.*s/member.json", dir_len, mp->data_dir);
                _cleanup_free_ char *json = NULL;
                size_t len = 0;
                assert_int_equal(read_file(json_path, 1 << 20, &json, &len), 0);
                assert_null(strstr(json, "\"stopped\""));
        }
}

/* Its data deleted: DATA_LOST, not started as a new member; listed until removed. */
static void data_lost_then_removed(fixture *f, const char *name, const member_plan *mp)
{
        etcd_cluster *c = f->cluster;
        target *t = f->t;
        target_member_status s;
        assert_int_equal(rm_rf(mp->data_dir), 0);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_DATA_LOST);
        target_member_status_release(&s);
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), -ESTALE);
        assert_non_null(strstr(target_last_error(t), name));
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_DATA_LOST);
        assert_int_equal(PID(f, name), 0);
        target_member_status_release(&s);

        /* Listed while it exists; remove deletes its directory. */
        char **names = NULL;
        size_t n = 0;
        assert_int_equal(t->ops->list_members(t, c->namespace_, c->name, &names, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(names[0], name);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        _cleanup_free_ char *mdir =
            xasprintf("%s/clusters/default/%s/%s", f->state_dir, c->name, name);
        assert_true(path_is_dir(mdir));
        assert_int_equal(t->ops->remove_member(t, c, name, false), 0);
        assert_false(path_exists(mdir));
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);
        assert_int_equal(t->ops->list_members(t, c->namespace_, c->name, &names, &n), 0);
        assert_int_equal(n, 0);
        free(names);
        assert_int_equal(t->ops->remove_member(t, c, name, false), 0); /* idempotent */
}

static void test_lifecycle(void **state)
{
        fixture *f = *state;
        target *t = f->t;
        etcd_cluster *c = f->cluster;

        /* Plan: 127.0.0.1 ports, stable across calls and target instances. */
        place_members(f, 1);
        member_plan *mp = &f->plan->members[0];
        const char *name = mp->name;
        assert_true(strneq(mp->client_url, "http://127.0.0.1:", 17));
        assert_true(strneq(mp->peer_url, "http://127.0.0.1:", 17));
        assert_true(strneq(mp->listen_metrics_url, "http://127.0.0.1:", 17));
        assert_string_equal(mp->listen_client_url, mp->client_url);
        assert_string_not_equal(mp->client_url + 17, mp->peer_url + 17);
        _cleanup_free_ char *client_url = xstrdup(mp->client_url);
        _cleanup_free_ char *peer_url = xstrdup(mp->peer_url);
        assert_int_equal(t->ops->place_member(t, c, mp), 0);
        assert_string_equal(mp->client_url, client_url);
        assert_placed_again(f, name, client_url, peer_url);
        target_member_status s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);

        /* Start: the rendered command, as a process of its own. */
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        s = status_of(f, name);
        assert_true(s.state == MEMBER_STARTING || s.state == MEMBER_READY);
        pid_t pid = PID(f, name);
        assert_true(pid > 0);
        target_member_status_release(&s);
        _cleanup_free_ char *cmdline = proc_cmdline(pid);
        assert_non_null(cmdline);
        _cleanup_free_ char *want_name = xasprintf("--name=%s", name);
        _cleanup_free_ char *want_adv = xasprintf("--advertise-client-urls=%s", client_url);
        _cleanup_free_ char *want_peer = xasprintf("--initial-advertise-peer-urls=%s", peer_url);
        assert_non_null(strstr(cmdline, want_name));
        assert_non_null(strstr(cmdline, want_adv));
        assert_non_null(strstr(cmdline, want_peer));
        _cleanup_free_ char *want_bin = xasprintf("/%s/etcd ", f->version);
        assert_non_null(strstr(cmdline, want_bin));
        assert_int_equal(getsid(pid), pid); /* its own session */
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        assert_int_equal(PID(f, name), pid);
        target_member_status_release(&s);
        _cleanup_free_ char *id = member_id(client_url);

        /* Idempotent: nothing happens the second time. */
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_READY);
        assert_int_equal(PID(f, name), pid);
        target_member_status_release(&s);

        /* kill -9: the exit is seen at once, well before the 1 s backoff. */
        int64_t t0 = now_mono_ms();
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(t->ops->wait_event(t, 10000), 1);
        int64_t seen = now_mono_ms() - t0;
        print_message("exit noticed after %lld ms\n", (long long)seen);
        assert_true(seen < 900); /* the backoff is 1000 ms */
        assert_exit_event(f);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_CRASHED);
        assert_int_equal(PID(f, name), 0);
        assert_non_null(strstr(s.detail, "signal 9"));
        target_member_status_release(&s);
        /* ensure_member during the backoff leaves the restart to tick(). */
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_CRASHED);
        target_member_status_release(&s);
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        assert_true(PID(f, name) > 0 && PID(f, name) != pid);
        assert_int_equal(s.restarts, 1);
        pid = PID(f, name);
        target_member_status_release(&s);
        _cleanup_free_ char *id2 = member_id(client_url);
        assert_string_equal(id, id2); /* same data, same member */

        pid = adopt_running(f, name, pid);
        t = f->t;

        /* A changed spec (different command) restarts it with the new command. */
        char *old_token = f->plan->cluster_token;
        f->plan->cluster_token = xasprintf("%s-changed", old_token);
        free(old_token);
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        assert_true(PID(f, name) != pid);
        pid = PID(f, name);
        target_member_status_release(&s);
        _cleanup_free_ char *cmdline2 = proc_cmdline(pid);
        assert_non_null(strstr(cmdline2, "-changed"));

        stop_stays_stopped(f, name, pid, mp);
        t = f->t;

        /* A started-again stopped member is the same member. */
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        target_member_status_release(&s);
        _cleanup_free_ char *id3 = member_id(client_url);
        assert_string_equal(id, id3);
        assert_int_equal(t->ops->stop_member(t, c, name), 0);

        data_lost_then_removed(f, name, mp);
}

/* --- adoption of a member whose parent is gone ------------------------------ */

static int setup_orphan(void **state)
{
        int r = fixture_setup(state, "3.5.16", "orphan", 0);
        if (r == 0) {
                fixture *f = *state;
                f->stop_timeout_ms = 500;
                target_free(f->t);
                f->t = new_target(f);
        }
        return r;
}

static pid_t parent_of(pid_t pid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%ld/stat", (long)pid);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, 4096, &data, &len) < 0)
                return 0;
        const char *p = strrchr(data, ')');
        char st;
        long ppid = 0;
        if (!p || sscanf(p + 1, " %c %ld", &st, &ppid) != 2)
                return 0;
        return (pid_t)ppid;
}

static void test_adopt_orphan(void **state)
{
        fixture *f = *state;
        place_members(f, 1);
        const char *name = f->plan->members[0].name;

        /* Another gitcd process starts the member and exits. */
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                local_target_opts o = {.state_dir = f->state_dir};
                target *t2 = NULL;
                int r = local_target_new(&o, &t2);
                if (r == 0)
                        r = t2->ops->ensure_member(t2, f->cluster, f->plan, 0);
                _exit(r == 0 ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        track_pid_files(f->state_dir, "default", f->cluster->name);

        /* This process never started it, yet supervises it. */
        target_free(f->t);
        f->t = new_target(f);
        target_member_status s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        pid_t pid = PID(f, name);
        target_member_status_release(&s);
        assert_true(pid > 0);
        assert_true(parent_of(pid) != getpid());
        int64_t t0 = now_mono_ms();
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(f->t->ops->wait_event(f->t, 10000), 1);
        assert_true(now_mono_ms() - t0 < 900);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_CRASHED);
        assert_non_null(strstr(s.detail, "status unknown"));
        target_member_status_release(&s);
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        assert_true(PID(f, name) != pid);
        assert_int_equal(parent_of(PID(f, name)), getpid());
        pid = PID(f, name);
        target_member_status_release(&s);

        /* It dies while no gitcd runs: the next target finds it CRASHED and restarts it. */
        target_free(f->t);
        f->t = NULL;
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        f->t = new_target(f);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_CRASHED);
        assert_int_equal(PID(f, name), 0);
        target_member_status_release(&s);
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        pid = PID(f, name);
        target_member_status_release(&s);

        /* A process that ignores SIGTERM (here: stopped) is killed after the grace period. */
        assert_int_equal(kill(pid, SIGSTOP), 0);
        assert_int_equal(f->t->ops->stop_member(f->t, f->cluster, name), 0);
        assert_int_equal(kill(pid, 0), -1);
        s = status_of(f, name);
        assert_int_equal(s.state, MEMBER_STOPPED);
        assert_non_null(strstr(s.detail, "stopped"));
        target_member_status_release(&s);
}

/* --- only gitcd's own process is taken over ------------------------------------ */

/*
 * The etcd binary in a folder of its own that every user may read (a
 * copy), so that another user can run the very file a member runs.
 */
static int setup_impostors(void **state)
{
        int r = fixture_setup(state, "3.5.16", "impostor", 0);
        if (r != 0)
                return r;
        fixture *f = *state;
        _cleanup_free_ char *bin = harness_etcd_path("3.5.16", "etcd");
        char *etcd_dir = xasprintf("%s/etcd-bin", root_dir);
        _cleanup_free_ char *cmd = xasprintf("mkdir -p '%s/3.5.16' && cp '%s' '%s/3.5.16/etcd' && "
                                             "chmod -R a+rX '%s' && chmod a+x '%s'",
                                             etcd_dir, bin, etcd_dir, etcd_dir, root_dir);
        assert_int_equal(system(cmd), 0);
        f->etcd_dir = etcd_dir;
        f->stop_timeout_ms = 500;
        target_free(f->t);
        f->t = new_target(f);
        return 0;
}

static int teardown_impostors(void **state)
{
        fixture *f = *state;
        char *etcd_dir = f ? (char *)f->etcd_dir : NULL;
        int r = fixture_teardown(state);
        free(etcd_dir);
        return r;
}

/* /proc/<pid>/cmdline as an argument vector. */
static char **argv_of(pid_t pid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%ld/cmdline", (long)pid);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 1 << 20, &data, &len), 0);
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
                n += data[i] == '\0';
        char **v = xcalloc(n + 1, sizeof(char *));
        size_t k = 0;
        for (size_t off = 0; off < len; off += strlen(data + off) + 1)
                v[k++] = xstrdup(data + off);
        return v;
}

/* Run exe with argv (argv[0] kept as it is), as uid/gid unless uid is -1; silent. */
static pid_t start_impostor(const char *exe, char *const *argv, uid_t uid, gid_t gid)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                (void)setsid();
                int fd = open("/dev/null", O_RDWR);
                dup2(fd, 0);
                dup2(fd, 1);
                dup2(fd, 2);
                if (uid != (uid_t)-1 &&
                    (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0))
                        _exit(126);
                execv(exe, argv);
                _exit(127);
        }
        track(pid);
        return pid;
}

/* Wait until the impostor serves the member's client URL (it really runs the member's etcd). */
static void wait_serving(pid_t pid, const char *client_url)
{
        int64_t deadline = now_mono_ms() + START_TIMEOUT_MS;
        for (;;) {
                assert_int_equal(kill(pid, 0), 0);
                json_t *l = member_list(client_url);
                if (l) {
                        json_decref(l);
                        return;
                }
                assert_true(now_mono_ms() < deadline);
                usleep(100 * 1000);
        }
}

/*
 * Restart the target (gitcd restarted) while impostor runs the member's very
 * command line: it is not adopted (the member has no pid and does not run),
 * and stopping the member leaves the impostor alone.
 */
static void check_not_adopted(fixture *f, const char *name, pid_t impostor)
{
        target_free(f->t);
        f->t = new_target(f);
        target_member_status s = status_of(f, name);
        assert_int_not_equal(PID(f, name), impostor);
        assert_int_equal(PID(f, name), 0);
        /* crashed when a pid file said it ran, stopped when none did: never running */
        assert_true(s.state == MEMBER_CRASHED || s.state == MEMBER_STOPPED);
        target_member_status_release(&s);
        assert_int_equal(f->t->ops->stop_member(f->t, f->cluster, name), 0);
        assert_int_equal(kill(impostor, 0), 0);
        assert_int_equal(kill(impostor, SIGKILL), 0);
        assert_int_equal(waitpid(impostor, NULL, 0), impostor);
}

static void test_adopt_only_ours(void **state)
{
        fixture *f = *state;
        place_members(f, 1);
        const char *name = f->plan->members[0].name;
        assert_int_equal(f->t->ops->ensure_member(f->t, f->cluster, f->plan, 0), 0);
        target_member_status s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        target_member_status_release(&s);
        pid_t pid = PID(f, name);
        char **argv = argv_of(pid);
        target_free(f->t);
        f->t = NULL;
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);

        /* the member's command line, run by another executable (a copy of etcd) */
        _cleanup_free_ char *copy = xasprintf("%s/not-the-member-etcd", root_dir);
        _cleanup_free_ char *cp = xasprintf("cp '%s' '%s'", argv[0], copy);
        assert_int_equal(system(cp), 0);
        pid_t other_exe = start_impostor(copy, argv, (uid_t)-1, (gid_t)-1);
        wait_serving(other_exe, f->plan->members[0].client_url);
        check_not_adopted(f, name, other_exe);

        /* the member's very binary and command line, run by another user */
        struct passwd *pw = geteuid() == 0 ? getpwnam("gitcd-test") : NULL;
        if (pw) {
                _cleanup_free_ char *open_up = xasprintf(
                    "chmod a+rx '%s' '%s/clusters' '%s/clusters/default' "
                    "'%s/clusters/default/%s' '%s/clusters/default/%s/%s' && "
                    "chown -R %u:%u '%s/clusters/default/%s/%s/data'",
                    f->state_dir, f->state_dir, f->state_dir, f->state_dir, f->cluster->name,
                    f->state_dir, f->cluster->name, name, (unsigned)pw->pw_uid,
                    (unsigned)pw->pw_gid, f->state_dir, f->cluster->name, name);
                assert_int_equal(system(open_up), 0);
                pid_t other_user = start_impostor(argv[0], argv, pw->pw_uid, pw->pw_gid);
                wait_serving(other_user, f->plan->members[0].client_url);
                check_not_adopted(f, name, other_user);
        } else {
                print_message("not root or no gitcd-test account: another user's etcd not tried\n");
        }
        strv_free(argv);
}

/* --- a version change is a restart onto the new binary, with the same data ------ */

static int setup_upgrade(void **state)
{
        if (!harness_have_etcd("3.5.16"))
                return -1;
        int r = fixture_setup(state, "3.4.23", "upgrade", 0);
        if (r == 0) {
                /* A relative state directory works as well as an absolute one. */
                fixture *f = *state;
                assert_int_equal(chdir(root_dir), 0);
                free(f->state_dir);
                f->state_dir = xstrdup("upgrade-3.4.23");
                target_free(f->t);
                f->t = new_target(f);
        }
        return r;
}

static void test_upgrade(void **state)
{
        fixture *f = *state;
        target *t = f->t;
        place_members(f, 1);
        const char *name = f->plan->members[0].name;
        const char *url = f->plan->members[0].client_url;
        assert_int_equal(t->ops->ensure_member(t, f->cluster, f->plan, 0), 0);
        target_member_status s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        pid_t old_pid = PID(f, name);
        target_member_status_release(&s);
        _cleanup_free_ char *id = member_id(url);

        etcd_cluster_free(f->cluster);
        f->cluster = load_cluster("upgrade", "3.5.16", 1);
        assert_int_equal(t->ops->ensure_member(t, f->cluster, f->plan, 0), 0);
        s = wait_state(f, name, MEMBER_READY, START_TIMEOUT_MS);
        assert_true(PID(f, name) != old_pid);
        assert_int_equal(s.restarts, 0); /* asked for: not a crash */
        _cleanup_free_ char *cmdline = proc_cmdline(PID(f, name));
        target_member_status_release(&s);
        assert_non_null(strstr(cmdline, "/3.5.16/etcd "));
        _cleanup_free_ char *id2 = member_id(url);
        assert_string_equal(id, id2);
        assert_int_equal(t->ops->stop_member(t, f->cluster, name), 0);
}

/* A member gets a minimal environment: nothing secret from gitcd's own reaches it. */
static void test_minimal_environment(void **state)
{
        fixture *f = *state;
        target *t = f->t;
        setenv("GITCD_TEST_TOKEN", "s3cr3t-token", 1);
        setenv("SSH_AUTH_SOCK", "/tmp/gitcd-test-agent.sock", 1);
        setenv("GIT_ASKPASS_PASSPHRASE", "s3cr3t-passphrase", 1);
        place_members(f, 1);
        const char *name = f->plan->members[0].name;
        assert_int_equal(t->ops->ensure_member(t, f->cluster, f->plan, 0), 0);
        unsetenv("GITCD_TEST_TOKEN");
        unsetenv("SSH_AUTH_SOCK");
        unsetenv("GIT_ASKPASS_PASSPHRASE");
        target_member_status s = status_of(f, name);
        target_member_status_release(&s);
        pid_t pid = PID(f, name);
        assert_true(pid > 0);
        _cleanup_free_ char *path = xasprintf("/proc/%ld/environ", (long)pid);
        _cleanup_free_ char *env = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 1024 * 1024, &env, &len), 0);
        bool has_path = false;
        for (size_t off = 0; off < len; off += strlen(env + off) + 1) {
                const char *e = env + off;
                assert_null(strstr(e, "s3cr3t"));
                assert_false(strneq(e, "SSH_AUTH_SOCK=", 14));
                assert_false(strneq(e, "GITCD_TEST_TOKEN=", 17));
                has_path = has_path || strneq(e, "PATH=", 5);
        }
        assert_true(has_path);
        assert_int_equal(t->ops->stop_member(t, f->cluster, name), 0);
}

/* --- tls.provider: auto ------------------------------------------------------ */

static int setup_tls(void **state)
{
        int r = fixture_setup(state, "3.5.16", "secure", 0);
        if (r == 0) {
                fixture *f = *state;
                etcd_cluster_free(f->cluster);
                f->cluster = load_cluster_with("secure", "3.5.16", 1,
                                               "  tls:\n"
                                               "    provider: auto\n"
                                               "    client:\n"
                                               "      enabled: true\n"
                                               "    peer:\n"
                                               "      enabled: true\n");
        }
        return r;
}

static char *slurp(const char *path)
{
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &data, &len) < 0)
                return NULL;
        return data;
}

static void test_tls_auto(void **state)
{
        fixture *f = *state;
        target *t = f->t;
        etcd_cluster *c = f->cluster;
        place_members(f, 1);
        member_plan *mp = &f->plan->members[0];
        assert_true(strneq(mp->client_url, "https://127.0.0.1:", 18));
        assert_true(strneq(mp->peer_url, "https://127.0.0.1:", 18));
        assert_true(strneq(mp->listen_metrics_url, "http://127.0.0.1:", 17));

        /* ensure_shared issues the CA and the member's certificates, once. */
        assert_int_equal(t->ops->ensure_shared(t, c, f->plan), 0);
        _cleanup_free_ char *ca =
            xasprintf("%s/clusters/default/%s/pki/ca.crt", f->state_dir, c->name);
        assert_true(path_exists(ca));
        const char *subs[] = {"client", "peer", "operator"};
        for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
                _cleanup_free_ char *crt = xasprintf("%s/%s/tls.crt", mp->tls_dir, subs[i]);
                _cleanup_free_ char *key = xasprintf("%s/%s/tls.key", mp->tls_dir, subs[i]);
                _cleanup_free_ char *cacrt = xasprintf("%s/%s/ca.crt", mp->tls_dir, subs[i]);
                assert_true(path_exists(crt) && path_exists(cacrt));
                struct stat st;
                assert_int_equal(stat(key, &st), 0);
                assert_int_equal(st.st_mode & 0777, 0600);
        }
        _cleanup_free_ char *crt_path = xasprintf("%s/client/tls.crt", mp->tls_dir);
        _cleanup_free_ char *before = slurp(crt_path);
        assert_int_equal(t->ops->ensure_shared(t, c, f->plan), 0);
        _cleanup_free_ char *after = slurp(crt_path);
        assert_string_equal(before, after); /* still current: not reissued */

        /* The member serves TLS with client-certificate auth; health uses the operator cert. */
        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        target_member_status s = wait_state(f, mp->name, MEMBER_READY, START_TIMEOUT_MS);
        _cleanup_free_ char *cmdline = proc_cmdline(PID(f, mp->name));
        target_member_status_release(&s);
        _cleanup_free_ char *want = xasprintf("--cert-file=%s", crt_path);
        assert_non_null(strstr(cmdline, want));
        assert_non_null(strstr(cmdline, "--client-cert-auth=true"));
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
}

/* --- crash loop ------------------------------------------------------------- */

/*
 * This target finds etcd through PATH: no <etcd_dir>/<version>/etcd, and the
 * first etcd on PATH (/usr/bin/etcd, when Debian's etcd-server is
 * installed) may be another version, so the --version check must pick.
 */
static int setup_crashloop(void **state)
{
        _cleanup_free_ char *bin = harness_etcd_path("3.5.16", "etcd");
        if (!bin)
                return -1;
        *strrchr(bin, '/') = '\0';
        const char *old = getenv("PATH");
        _cleanup_free_ char *path = xasprintf("/usr/bin:%s:%s", bin, old ? old : "/bin");
        setenv("PATH", path, 1);
        int r = fixture_setup(state, "3.5.16", "loop", 50);
        if (r == 0) {
                fixture *f = *state;
                target_free(f->t);
                f->etcd_dir = "/nonexistent";
                f->t = new_target(f);
        }
        return r;
}

static void test_crash_loop(void **state)
{
        fixture *f = *state;
        target *t = f->t;
        etcd_cluster *c = f->cluster;
        place_members(f, 1);
        member_plan *mp = &f->plan->members[0];

        /* A version that is nowhere: a clear error, and nothing changes. */
        _cleanup_(etcd_cluster_freep) etcd_cluster *other = load_cluster("loop", "3.5.15", 1);
        assert_int_equal(t->ops->ensure_member(t, other, f->plan, 0), -ENOENT);
        assert_non_null(strstr(target_last_error(t), "etcd 3.5.15 not found"));
        target_member_status s = status_of(f, mp->name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);

        /* A corrupt write-ahead log: etcd exits right after it starts. */
        _cleanup_free_ char *wal = xasprintf("%s/member/wal", mp->data_dir);
        assert_int_equal(mkdir_p(wal, 0700), 0);
        _cleanup_free_ char *seg = xasprintf("%s/0000000000000000-0000000000000000.wal", wal);
        char junk[4096];
        for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = (char)(0x5a ^ (i * 131));
        assert_int_equal(write_file_atomic(seg, junk, sizeof(junk), 0600), 0);

        assert_int_equal(t->ops->ensure_member(t, c, f->plan, 0), 0);
        /* Found on PATH, past /usr/bin/etcd of another version. */
        _cleanup_free_ char *mj =
            xasprintf("%s/clusters/default/loop/%s/member.json", f->state_dir, mp->name);
        json_t *rec = json_load_file(mj, 0, NULL);
        assert_non_null(rec);
        const char *bin = json_string_value(json_array_get(json_object_get(rec, "command"), 0));
        assert_non_null(bin);
        assert_non_null(strstr(bin, "/3.5.16/etcd"));
        assert_string_equal(json_string_value(json_object_get(rec, "version")), "3.5.16");
        json_decref(rec);
        s = wait_state(f, mp->name, MEMBER_CRASH_LOOP, 60000);
        print_message("crash loop after %d restarts: %s\n", s.restarts, s.detail);
        assert_true(s.restarts >= 4);
        target_member_status_release(&s);

        /* Stopping ends the restarts. */
        assert_int_equal(t->ops->stop_member(t, c, mp->name), 0);
        assert_int_equal(t->ops->wait_event(t, 300), 0);
        assert_true(t->ops->tick(t) >= 0);
        s = status_of(f, mp->name);
        assert_int_equal(PID(f, mp->name), 0);
        assert_int_equal(s.state, MEMBER_STOPPED);
        target_member_status_release(&s);

        /* remove with keep_data moves data/ aside under .removed/. */
        assert_int_equal(t->ops->remove_member(t, c, mp->name, true), 0);
        _cleanup_free_ char *removed =
            xasprintf("%s/clusters/default/%s/.removed", f->state_dir, c->name);
        assert_true(path_is_dir(removed));
        s = status_of(f, mp->name);
        assert_int_equal(s.state, MEMBER_ABSENT);
        target_member_status_release(&s);
        /* A member of a longer name is not this one's: its kept data stays. */
        _cleanup_free_ char *longer = xasprintf("%s/%s0-123", removed, mp->name);
        assert_int_equal(mkdir_p(longer, 0700), 0);
        /* drop_kept_data deletes what was kept of this member (a recovery, once healthy). */
        assert_int_equal(t->ops->drop_kept_data(t, c, mp->name), 0);
        DIR *d = opendir(removed);
        assert_non_null(d);
        int n = 0;
        for (struct dirent *de; (de = readdir(d));)
                if (de->d_name[0] != '.') {
                        assert_string_equal(de->d_name, strrchr(longer, '/') + 1);
                        n++;
                }
        closedir(d);
        assert_int_equal(n, 1);
        assert_int_equal(t->ops->drop_kept_data(t, c, mp->name), 0); /* nothing left: 0 */
}

/* --- a three-member static cluster ------------------------------------------ */

static int setup_trio_35(void **state)
{
        return fixture_setup(state, "3.5.16", "trio", 0);
}

static int setup_trio_34(void **state)
{
        return fixture_setup(state, "3.4.23", "trio", 0);
}

static void test_three_members(void **state)
{
        fixture *f = *state;
        target *t = f->t;
        etcd_cluster *c = f->cluster;
        c->replicas = 3;
        place_members(f, 3);
        for (size_t i = 0; i < 3; i++)
                for (size_t j = 0; j < i; j++)
                        assert_string_not_equal(f->plan->members[i].client_url,
                                                f->plan->members[j].client_url);
        assert_int_equal(t->ops->ensure_shared(t, c, f->plan), 0);
        _cleanup_free_ char *objects =
            xasprintf("%s/clusters/default/%s/objects", f->state_dir, c->name);
        assert_true(path_is_dir(objects));
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->ensure_member(t, c, f->plan, i), 0);
        for (size_t i = 0; i < 3; i++) {
                target_member_status s =
                    wait_state(f, f->plan->members[i].name, MEMBER_READY, START_TIMEOUT_MS);
                target_member_status_release(&s);
        }
        json_t *list = member_list(f->plan->members[0].client_url);
        assert_non_null(list);
        assert_int_equal(json_array_size(json_object_get(list, "members")), 3);
        json_decref(list);

        /* One member down: the other two keep quorum and report READY. */
        assert_int_equal(t->ops->stop_member(t, c, f->plan->members[2].name), 0);
        target_member_status s = status_of(f, f->plan->members[0].name);
        assert_int_equal(s.state, MEMBER_READY);
        target_member_status_release(&s);

        /* Two down: the last one runs but has no leader, so it is only STARTING. */
        assert_int_equal(t->ops->stop_member(t, c, f->plan->members[1].name), 0);
        int64_t deadline = now_mono_ms() + START_TIMEOUT_MS;
        for (;;) {
                s = status_of(f, f->plan->members[0].name);
                bool done = s.state == MEMBER_STARTING && streq(s.detail, "no leader");
                if (!done && now_mono_ms() > deadline)
                        print_error("still %s (%s)\n", member_runtime_state_name(s.state),
                                    s.detail);
                assert_true(PID(f, f->plan->members[0].name) > 0);
                target_member_status_release(&s);
                if (done)
                        break;
                assert_true(now_mono_ms() <= deadline);
                (void)t->ops->wait_event(t, 200);
        }
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->remove_member(t, c, f->plan->members[i].name, false), 0);
}

/*
 * spec.tls.peer.selfSigned: three members speaking https to each other with
 * the certificates each etcd makes for itself (--peer-auto-tls), clients on
 * plain http; etcd lists their https peer URLs.
 */
static int setup_self_signed(void **state, const char *version)
{
        int r = fixture_setup(state, version, "selfpeer", 0);
        if (r == 0) {
                fixture *f = *state;
                etcd_cluster_free(f->cluster);
                f->cluster = load_cluster_with("selfpeer", version, 3,
                                               "  tls:\n"
                                               "    provider: none\n"
                                               "    peer:\n"
                                               "      selfSigned: true\n");
        }
        return r;
}

static int setup_self_signed_35(void **state)
{
        return setup_self_signed(state, "3.5.16");
}

static int setup_self_signed_34(void **state)
{
        return setup_self_signed(state, "3.4.23");
}

static void test_peer_self_signed(void **state)
{
        fixture *f = *state;
        target *t = f->t;
        etcd_cluster *c = f->cluster;
        place_members(f, 3);
        for (size_t i = 0; i < 3; i++) {
                assert_true(strneq(f->plan->members[i].peer_url, "https://", 8));
                assert_true(strneq(f->plan->members[i].client_url, "http://", 7));
        }
        assert_int_equal(t->ops->ensure_shared(t, c, f->plan), 0);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(t->ops->ensure_member(t, c, f->plan, i), 0);
        for (size_t i = 0; i < 3; i++) {
                target_member_status s =
                    wait_state(f, f->plan->members[i].name, MEMBER_READY, START_TIMEOUT_MS);
                target_member_status_release(&s);
        }
        json_t *list = member_list(f->plan->members[0].client_url);
        assert_non_null(list);
        json_t *members = json_object_get(list, "members");
        assert_int_equal(json_array_size(members), 3);
        size_t i;
        json_t *m;
        json_array_foreach(members, i, m)
        {
                const char *peer =
                    json_string_value(json_array_get(json_object_get(m, "peerURLs"), 0));
                assert_non_null(peer);
                assert_true(strneq(peer, "https://", 8));
        }
        json_decref(list);
        for (size_t j = 0; j < 3; j++)
                assert_int_equal(t->ops->remove_member(t, c, f->plan->members[j].name, false), 0);
}

int main(void)
{
        root_dir = harness_tmpdir("gitcd-target");
        if (!root_dir)
                return 1;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (!harness_have_etcd("3.5.16") && !harness_have_etcd("3.4.23"))
                return 77;

        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_lifecycle, setup_single_35, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_lifecycle, setup_single_34, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_adopt_orphan, setup_orphan, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_adopt_only_ours, setup_impostors,
                                            teardown_impostors),
            cmocka_unit_test_setup_teardown(test_upgrade, setup_upgrade, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_minimal_environment, setup_single_35,
                                            fixture_teardown),
            cmocka_unit_test_setup_teardown(test_tls_auto, setup_tls, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_crash_loop, setup_crashloop, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_three_members, setup_trio_35, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_three_members, setup_trio_34, fixture_teardown),
            cmocka_unit_test_setup_teardown(test_peer_self_signed, setup_self_signed_35,
                                            fixture_teardown),
            cmocka_unit_test_setup_teardown(test_peer_self_signed, setup_self_signed_34,
                                            fixture_teardown),
        };
        int r = cmocka_run_group_tests_name("target-local", tests, NULL, NULL);
        curl_global_cleanup();
        free(root_dir);
        return r;
}

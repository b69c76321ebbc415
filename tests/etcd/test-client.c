/*
 * gitcd's etcd client against a real 3-member etcd cluster of the version
 * given as argv[1] (3.5.16 or 3.4.23): every call, the learner life cycle,
 * leadership moves, snapshots, fail-over, deadlines, reconnects and auth.
 *
 * One cluster serves every case, so the cases run in the order listed and
 * the ones that change the cluster for good (membership, auth) come last.
 * Nothing here waits on a fixed sleep: conditions that take a moment
 * (a learner catching up, a new leader being visible) are polled within a
 * generous bound.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char *version = "3.5.16";
static harness_cluster *cluster;
static etcd_client *cl; /* a client on all three endpoints */

static etcd_client *client_on(const char *endpoints, int timeout_ms)
{
        etcd_client_opts o = {.endpoints = endpoints, .call_timeout_ms = timeout_ms};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

static int setup(void **state)
{
        harness_opts o = {.version = version, .members = 3};
        int r = harness_cluster_start(&o, &cluster);
        if (r < 0) {
                fprintf(stderr, "cannot start etcd %s: %s\n", version, strerror(-r));
                return -1;
        }
        cl = client_on(cluster->endpoints, 10000);
        return 0;
}

static int teardown(void **state)
{
        etcd_client_free(cl);
        harness_cluster_free(cluster);
        return 0;
}

#define assert_ok(c, expr)                                                                         \
        do {                                                                                       \
                int _r = (expr);                                                                   \
                if (_r != 0)                                                                       \
                        fail_msg("%s = %d (%s): %s", #expr, _r, etcd_strerror(_r),                 \
                                 etcd_client_last_error(c));                                       \
        } while (0)

static uint64_t member_id_of(size_t i)
{
        etcd_endpoint_status *s = NULL;
        assert_ok(cl, etcd_status(cl, cluster->members[i].client_url, &s));
        uint64_t id = s->member_id;
        etcd_endpoint_status_free(s);
        return id;
}

static bool all_published(const etcd_members *l)
{
        for (size_t i = 0; i < l->n; i++)
                if (l->members[i].n_client_urls == 0)
                        return false;
        return true;
}

static void test_member_list(void **state)
{
        etcd_members *l = NULL;
        /* members publish their client URLs through raft just after start-up */
        int64_t until = now_mono_ms() + 20000;
        for (;;) {
                assert_ok(cl, etcd_member_list(cl, &l));
                if (all_published(l) || now_mono_ms() > until)
                        break;
                etcd_members_free(l);
                usleep(100 * 1000);
        }
        assert_int_equal(l->n, 3);
        assert_true(l->cluster_id != 0);
        for (size_t i = 0; i < 3; i++) {
                const etcd_member *m = etcd_members_find(l, member_id_of(i));
                assert_non_null(m);
                assert_string_equal(m->name, cluster->members[i].name);
                assert_int_equal(m->n_peer_urls, 1);
                assert_string_equal(m->peer_urls[0], cluster->members[i].peer_url);
                assert_int_equal(m->n_client_urls, 1);
                assert_string_equal(m->client_urls[0], cluster->members[i].client_url);
                assert_false(m->is_learner);
        }
        etcd_members_free(l);
}

static void test_status(void **state)
{
        uint64_t leader = 0;
        for (size_t i = 0; i < 3; i++) {
                etcd_endpoint_status *s = NULL;
                assert_ok(cl, etcd_status(cl, cluster->members[i].client_url, &s));
                assert_string_equal(s->version, version);
                assert_true(s->db_size > 0);
                assert_true(s->db_size_in_use > 0);
                assert_true(s->leader != 0);
                assert_true(s->raft_term > 0);
                assert_true(s->raft_index > 0);
                assert_false(s->is_learner);
                assert_int_equal(s->n_errors, 0);
                if (leader == 0)
                        leader = s->leader;
                assert_true(s->leader == leader);
                etcd_endpoint_status_free(s);
        }
}

static void test_kv(void **state)
{
        int64_t rev = 0;
        assert_ok(cl, etcd_put(cl, "/t/a", "one", 3, &rev));
        assert_true(rev > 0);
        assert_ok(cl, etcd_put(cl, "/t/b", "two", 3, NULL));
        assert_ok(cl, etcd_put(cl, "/u", "other", 5, NULL));

        etcd_kv_list *l = NULL;
        assert_ok(cl, etcd_get(cl, "/t/a", false, &l));
        assert_int_equal(l->n, 1);
        assert_string_equal(l->kvs[0].key, "/t/a");
        assert_string_equal(l->kvs[0].value, "one");
        assert_int_equal(l->kvs[0].mod_revision, rev);
        etcd_kv_list_free(l);

        assert_ok(cl, etcd_get(cl, "/t/", true, &l));
        assert_int_equal(l->n, 2);
        assert_string_equal(l->kvs[1].value, "two");
        etcd_kv_list_free(l);

        assert_ok(cl, etcd_get(cl, "/missing", false, &l));
        assert_int_equal(l->n, 0);
        etcd_kv_list_free(l);

        /* compare-and-put: wins on the right revision, loses on a stale one */
        bool ok = false;
        assert_ok(cl, etcd_txn_put_if(cl, "/t/a", rev, "new", 3, &ok));
        assert_true(ok);
        assert_ok(cl, etcd_txn_put_if(cl, "/t/a", rev, "stale", 5, &ok));
        assert_false(ok);
        assert_ok(cl, etcd_txn_put_if(cl, "/t/fresh", 0, "x", 1, &ok));
        assert_true(ok);
        assert_ok(cl, etcd_get(cl, "/t/a", false, &l));
        assert_string_equal(l->kvs[0].value, "new");
        int64_t now_rev = l->revision;
        etcd_kv_list_free(l);

        int64_t deleted = 0;
        assert_ok(cl, etcd_delete(cl, "/t/", true, &deleted));
        assert_int_equal(deleted, 3);

        uint32_t h1 = 0, h2 = 0;
        assert_ok(cl, etcd_hash_kv(cl, cluster->members[0].client_url, now_rev, &h1, NULL));
        /* a follower may not have applied now_rev yet: "future revision" for a moment */
        int hr;
        int64_t hash_until = now_mono_ms() + 10000;
        while ((hr = etcd_hash_kv(cl, cluster->members[1].client_url, now_rev, &h2, NULL)) ==
                   ETCD_ERR_FUTURE_REV &&
               now_mono_ms() < hash_until)
                usleep(50 * 1000);
        assert_ok(cl, hr);
        assert_true(h1 == h2);

        assert_ok(cl, etcd_compact(cl, now_rev, true));
        assert_ok(cl, etcd_get(cl, "/u", false, &l));
        assert_int_equal(l->n, 1);
        etcd_kv_list_free(l);

        /* over etcd's default --max-request-bytes (1.5 MiB) */
        size_t big_len = 1700 * 1024;
        char *big = xmalloc(big_len);
        memset(big, 'x', big_len);
        assert_int_equal(etcd_put(cl, "/big", big, big_len, NULL), ETCD_ERR_REQUEST_TOO_LARGE);
        assert_non_null(strstr(etcd_client_last_error(cl), "too large"));
        free(big);

        /* bad input is refused before anything is sent */
        assert_int_equal(etcd_put(cl, "", "x", 1, NULL), -EINVAL);
        assert_non_null(strstr(etcd_client_last_error(cl), "key"));

        /* alarms: a healthy cluster has none */
        etcd_alarm *alarms = NULL;
        size_t n = 9;
        assert_ok(cl, etcd_alarm_list(cl, &alarms, &n));
        assert_int_equal(n, 0);
        free(alarms);
}

/* One client per thread: clients share nothing, so threads need no locking. */
static void *thread_puts(void *arg)
{
        long t = (long)arg;
        etcd_client_opts o = {.endpoints = cluster->endpoints, .call_timeout_ms = 10000};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) < 0)
                return (void *)1L;
        long bad = 0;
        for (int i = 0; i < 50; i++) {
                char key[64], val[32];
                snprintf(key, sizeof(key), "/threads/%ld/%d", t, i);
                snprintf(val, sizeof(val), "%d", i);
                if (etcd_put(c, key, val, strlen(val), NULL) < 0)
                        bad++;
        }
        etcd_client_free(c);
        return (void *)bad;
}

static void test_threads(void **state)
{
        pthread_t th[4];
        for (long t = 0; t < 4; t++)
                assert_int_equal(pthread_create(&th[t], NULL, thread_puts, (void *)t), 0);
        for (long t = 0; t < 4; t++) {
                void *ret = NULL;
                assert_int_equal(pthread_join(th[t], &ret), 0);
                assert_int_equal((long)ret, 0);
        }
        etcd_kv_list *l = NULL;
        assert_ok(cl, etcd_get(cl, "/threads/", true, &l));
        assert_int_equal(l->n, 200);
        etcd_kv_list_free(l);
}

/* A NOSPACE alarm: writes are refused with their own code, status reports it, disarm clears it. */
static void test_nospace_alarm(void **state)
{
        uint64_t id = member_id_of(0);
        assert_ok(cl, etcd_alarm_activate(cl, id, ETCD_ALARM_NOSPACE));
        etcd_alarm *a = NULL;
        size_t n = 0;
        assert_ok(cl, etcd_alarm_list(cl, &a, &n));
        assert_int_equal(n, 1);
        assert_true(a[0].member_id == id);
        assert_int_equal(a[0].type, ETCD_ALARM_NOSPACE);
        free(a);

        assert_int_equal(etcd_put(cl, "/full", "x", 1, NULL), ETCD_ERR_NOSPACE);
        assert_non_null(strstr(etcd_client_last_error(cl), "disarm"));
        etcd_endpoint_status *s = NULL;
        assert_ok(cl, etcd_status(cl, cluster->members[0].client_url, &s));
        assert_true(s->n_errors > 0);
        /* what maintenance asks the Alarm call on (maintenance/maintenance.c) */
        assert_true(etcd_status_may_report_alarm(s));
        etcd_endpoint_status *d = etcd_endpoint_status_dup(s);
        assert_int_equal(d->n_errors, s->n_errors);
        assert_string_equal(d->errors[0], s->errors[0]);
        assert_true(d->member_id == s->member_id);
        etcd_endpoint_status_free(d);
        etcd_endpoint_status_free(s);

        assert_ok(cl, etcd_alarm_disarm(cl, id, ETCD_ALARM_NOSPACE));
        assert_ok(cl, etcd_alarm_list(cl, &a, &n));
        assert_int_equal(n, 0);
        free(a);
        /* no alarm: every member's Status says so, on both etcd versions */
        for (size_t i = 0; i < cluster->n; i++) {
                assert_ok(cl, etcd_status(cl, cluster->members[i].client_url, &s));
                assert_false(etcd_status_may_report_alarm(s));
                etcd_endpoint_status_free(s);
        }
        assert_ok(cl, etcd_put(cl, "/full", "x", 1, NULL));
}

static void test_one_endpoint_dead(void **state)
{
        char *eps = xasprintf("http://127.0.0.1:%d,%s", harness_free_port(), cluster->endpoints);
        etcd_client *c = client_on(eps, 5000);
        etcd_members *l = NULL;
        assert_ok(c, etcd_member_list(c, &l));
        assert_int_equal(l->n, 3);
        etcd_members_free(l);
        /* the client sticks to the endpoint that answered */
        assert_ok(c, etcd_put(c, "/failover", "ok", 2, NULL));
        etcd_client_free(c);
        free(eps);
}

static void test_all_endpoints_dead(void **state)
{
        int p1 = harness_free_port(), p2 = harness_free_port();
        char *eps = xasprintf("http://127.0.0.1:%d,http://127.0.0.1:%d", p1, p2);
        etcd_client *c = client_on(eps, 3000);
        etcd_members *l = NULL;
        int64_t t0 = now_mono_ms();
        int r = etcd_member_list(c, &l);
        int64_t took = now_mono_ms() - t0;
        assert_int_equal(r, ETCD_ERR_UNREACHABLE);
        assert_null(l);
        const char *msg = etcd_client_last_error(c);
        char *u1 = xasprintf("http://127.0.0.1:%d", p1);
        char *u2 = xasprintf("http://127.0.0.1:%d", p2);
        assert_non_null(strstr(msg, u1));
        assert_non_null(strstr(msg, u2));
        assert_non_null(strstr(msg, "cannot connect"));
        assert_null(strstr(msg, "curl"));
        assert_true(took < 3000 + 2000); /* within the deadline (plus slack for a slow box) */
        free(u1);
        free(u2);
        etcd_client_free(c);
        free(eps);
}

/* A port that accepts connections (the kernel does) but never answers. */
static void test_silent_endpoint_deadline(void **state)
{
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 16), 0);
        socklen_t len = sizeof(a);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        char *eps = xasprintf("http://127.0.0.1:%d", ntohs(a.sin_port));
        etcd_client *c = client_on(eps, 1000);
        etcd_endpoint_status *s = NULL;
        int64_t t0 = now_mono_ms();
        int r = etcd_status(c, NULL, &s);
        int64_t took = now_mono_ms() - t0;
        assert_int_equal(r, ETCD_ERR_TIMEOUT);
        assert_true(took >= 900);
        assert_true(took < 1000 + 4000);
        assert_non_null(strstr(etcd_client_last_error(c), "did not answer"));
        etcd_client_free(c);
        free(eps);

        /* a silent endpoint before good ones: a read still succeeds within its deadline */
        eps = xasprintf("http://127.0.0.1:%d,%s", ntohs(a.sin_port), cluster->endpoints);
        c = client_on(eps, 2000);
        etcd_members *l = NULL;
        assert_ok(c, etcd_member_list(c, &l));
        etcd_members_free(l);
        etcd_client_free(c);

        /* a write is not sent twice: it fails with the deadline, and the next call
         * starts on another endpoint */
        c = client_on(eps, 1000);
        assert_int_equal(etcd_put(c, "/silent", "x", 1, NULL), ETCD_ERR_TIMEOUT);
        assert_ok(c, etcd_put(c, "/silent", "y", 1, NULL));
        etcd_client_free(c);
        free(eps);
        close(fd);
}

/* One client keeps its connection; it must survive the member restarting. */
static void test_reconnect_after_restart(void **state)
{
        etcd_client *c = client_on(cluster->members[2].client_url, 5000);
        etcd_endpoint_status *s = NULL;
        assert_ok(c, etcd_status(c, NULL, &s));
        etcd_endpoint_status_free(s);

        /* restart between two calls: the kept connection is dead */
        assert_int_equal(harness_member_stop(cluster, 2), 0);
        assert_int_equal(harness_member_restart(cluster, 2), 0);
        assert_ok(c, etcd_status(c, NULL, &s));
        etcd_endpoint_status_free(s);

        /* a call while it is down fails cleanly, the next one after it is back works */
        assert_int_equal(harness_member_stop(cluster, 2), 0);
        assert_int_equal(etcd_status(c, NULL, &s), ETCD_ERR_UNREACHABLE);
        assert_int_equal(harness_member_restart(cluster, 2), 0);
        assert_ok(c, etcd_status(c, NULL, &s));
        etcd_endpoint_status_free(s);
        etcd_client_free(c);
}

static int run_quiet(const char *fmt, ...) _printf_(1, 2);
static int run_quiet(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *cmd = xvasprintf(fmt, ap);
        va_end(ap);
        int r = system(cmd);
        free(cmd);
        return r;
}

static void test_snapshot(void **state)
{
        /* about 1 MB of data, so the snapshot streams as many messages */
        size_t vlen = 100 * 1024;
        char *v = xmalloc(vlen);
        for (size_t i = 0; i < vlen; i++)
                v[i] = (char)('a' + i % 26);
        for (int i = 0; i < 10; i++) {
                char key[32];
                snprintf(key, sizeof(key), "/snap/%d", i);
                assert_ok(cl, etcd_put(cl, key, v, vlen, NULL));
        }
        free(v);
        char *dir = harness_tmpdir("etcd-snap");
        char *path = xasprintf("%s/snap.db", dir);
        etcd_snapshot_info info = {0};
        assert_ok(cl, etcd_snapshot_save(cl, cluster->members[0].client_url, path, &info));
        assert_true(info.checksum_ok);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal((uint64_t)st.st_size, info.size);
        assert_true(info.size > 1000 * 1000);
        char *part = xasprintf("%s.part", path);
        assert_int_not_equal(access(part, F_OK), 0);

        /* etcd's own tool accepts the file (it checks the sha256 trailer too) */
        const char *tool = cluster->etcdutl_bin ? cluster->etcdutl_bin : cluster->etcdctl_bin;
        assert_int_equal(
            run_quiet("ETCDCTL_API=3 '%s' snapshot status '%s' >/dev/null 2>&1", tool, path), 0);

        /* an unwritable destination fails with a clear message and leaves nothing */
        char *bad = xasprintf("%s/no/such/dir/snap.db", dir);
        assert_int_equal(etcd_snapshot_save(cl, NULL, bad, NULL), -ENOENT);
        assert_non_null(strstr(etcd_client_last_error(cl), "cannot create"));
        free(bad);
        free(part);
        free(path);
        free(dir);
}

static void test_defragment(void **state)
{
        for (size_t i = 0; i < 3; i++)
                assert_ok(cl, etcd_defragment(cl, cluster->members[i].client_url));
        etcd_endpoint_status *s = NULL;
        assert_ok(cl, etcd_status(cl, cluster->members[0].client_url, &s));
        assert_true(s->db_size > 0);
        etcd_endpoint_status_free(s);
}

static uint64_t current_leader(void)
{
        etcd_endpoint_status *s = NULL;
        assert_ok(cl, etcd_status(cl, NULL, &s));
        uint64_t l = s->leader;
        etcd_endpoint_status_free(s);
        return l;
}

static void test_move_leader(void **state)
{
        uint64_t leader = current_leader();
        uint64_t target = 0;
        for (size_t i = 0; i < 3 && !target; i++) {
                uint64_t id = member_id_of(i);
                if (id != leader)
                        target = id;
        }
        assert_ok(cl, etcd_move_leader(cl, target));
        int64_t until = now_mono_ms() + 20000;
        while (current_leader() != target && now_mono_ms() < until)
                usleep(100 * 1000);
        assert_true(current_leader() == target);
        /* to the leader itself: nothing to do */
        assert_ok(cl, etcd_move_leader(cl, target));
        /* to a member that does not exist */
        int r = etcd_move_leader(cl, 0x1234);
        assert_int_equal(r, ETCD_ERR_BAD_LEADER_TRANSFEREE);
}

/* test_learner_lifecycle: the learner id promoted as soon as it has caught up */
static void promote_caught_up(uint64_t id)
{
        int64_t until = now_mono_ms() + 60000;
        int r;
        while ((r = etcd_member_promote(cl, id)) != 0 && etcd_err_is_transient(r) &&
               now_mono_ms() < until)
                usleep(200 * 1000);
        if (r != 0)
                fail_msg("promote: %s", etcd_client_last_error(cl));

        /* MemberList answers from the member asked, which may apply the change a moment later */
        etcd_members *l = NULL;
        const etcd_member *pm = NULL;
        until = now_mono_ms() + 20000;
        for (;;) {
                assert_ok(cl, etcd_member_list(cl, &l));
                pm = etcd_members_find(l, id);
                if ((pm && !pm->is_learner) || now_mono_ms() > until)
                        break;
                etcd_members_free(l);
                usleep(100 * 1000);
        }
        assert_int_equal(l->n, 4);
        assert_non_null(pm);
        assert_false(pm->is_learner);
        assert_string_equal(pm->name, "m3");
        etcd_members_free(l);
}

static void test_learner_lifecycle(void **state)
{
        int peer = harness_free_port(), client_port = harness_free_port();
        char *peer_url = xasprintf("http://127.0.0.1:%d", peer);
        char *client_url = xasprintf("http://127.0.0.1:%d", client_port);
        const char *urls[] = {peer_url};
        uint64_t id = 0;
        etcd_members *after = NULL;
        /* etcd refuses membership changes until the leader has seen every member for
         * a few seconds ("unhealthy cluster"); the restarts above make that likely */
        int r;
        int64_t until = now_mono_ms() + 60000;
        while ((r = etcd_member_add(cl, urls, 1, true, &id, &after)) == ETCD_ERR_UNHEALTHY &&
               now_mono_ms() < until)
                usleep(200 * 1000);
        assert_ok(cl, r);
        assert_true(id != 0);
        assert_int_equal(after->n, 4);
        const etcd_member *nm = etcd_members_find(after, id);
        assert_non_null(nm);
        assert_true(nm->is_learner);
        assert_string_equal(nm->name, "");

        /* a peer URL in use, and a second learner, are refused with their own codes */
        const char *taken[] = {cluster->members[0].peer_url};
        assert_int_equal(etcd_member_add(cl, taken, 1, true, NULL, NULL), ETCD_ERR_PEER_URL_EXISTS);
        assert_non_null(strstr(etcd_client_last_error(cl), "peer URL"));
        char *other = xasprintf("http://127.0.0.1:%d", harness_free_port());
        const char *other_urls[] = {other};
        /* etcd decides this when it applies the proposal; a proposal dropped while the
         * first learner's configuration change is still pending comes back as a timeout */
        until = now_mono_ms() + 60000;
        while ((r = etcd_member_add(cl, other_urls, 1, true, NULL, NULL)) == ETCD_ERR_TIMEOUT &&
               now_mono_ms() < until)
                usleep(200 * 1000);
        assert_int_equal(r, ETCD_ERR_TOO_MANY_LEARNERS);
        free(other);

        /* a learner that has not even started cannot be in sync */
        assert_int_equal(etcd_member_promote(cl, id), ETCD_ERR_MEMBER_NOT_IN_SYNC);
        assert_non_null(strstr(etcd_client_last_error(cl), "in sync"));
        assert_true(etcd_err_is_transient(ETCD_ERR_MEMBER_NOT_IN_SYNC));

        /* promoting a voter is a different error */
        assert_int_equal(etcd_member_promote(cl, member_id_of(0)), ETCD_ERR_MEMBER_NOT_LEARNER);

        /* start it */
        char *ic = NULL;
        for (size_t i = 0; i < after->n; i++) {
                const etcd_member *m = &after->members[i];
                char *prev = ic;
                ic = xasprintf("%s%s%s=%s", prev ? prev : "", prev ? "," : "",
                               m->id == id ? "m3" : m->name, m->peer_urls[0]);
                free(prev);
        }
        size_t idx = 0;
        assert_int_equal(harness_member_start_joining(cluster, "m3", peer, client_port, ic, &idx),
                         0);
        free(ic);

        /* once it serves, it reports itself as a learner and refuses writes */
        etcd_client *lc = client_on(client_url, 3000);
        etcd_endpoint_status *s = NULL;
        until = now_mono_ms() + 60000;
        while (etcd_status(lc, NULL, &s) < 0 && now_mono_ms() < until)
                usleep(100 * 1000);
        if (!s) {
                _cleanup_free_ char *log = NULL;
                size_t len = 0;
                (void)read_file(cluster->members[idx].log_path, 1 << 24, &log, &len);
                fail_msg("the learner never served (%s); its log ends:\n%s",
                         etcd_client_last_error(lc),
                         log ? log + (len > 3000 ? len - 3000 : 0) : "(none)");
        }
        assert_true(s->is_learner);
        etcd_endpoint_status_free(s);
        assert_int_equal(etcd_put(lc, "/learner", "x", 1, NULL), ETCD_ERR_LEARNER_NOT_SUPPORTED);
        etcd_client_free(lc);

        /* a client that lists the learner first goes on to a voter */
        char *eps = xasprintf("%s,%s", client_url, cluster->endpoints);
        etcd_client *fc = client_on(eps, 5000);
        assert_ok(fc, etcd_put(fc, "/learner", "via-voter", 9, NULL));
        etcd_client_free(fc);
        free(eps);

        promote_caught_up(id);

        /* update its peer URL to the same value (a no-op change etcd accepts) */
        assert_ok(cl, etcd_member_update(cl, id, urls, 1));

        /* and remove it again */
        assert_ok(cl, etcd_member_remove(cl, id));
        etcd_members *l = NULL;
        until = now_mono_ms() + 20000;
        for (;;) {
                assert_ok(cl, etcd_member_list(cl, &l));
                if (l->n == 3 || now_mono_ms() > until)
                        break;
                etcd_members_free(l);
                usleep(100 * 1000);
        }
        assert_int_equal(l->n, 3);
        assert_null(etcd_members_find(l, id));
        etcd_members_free(l);
        assert_int_equal(etcd_member_remove(cl, id), ETCD_ERR_MEMBER_NOT_FOUND);
        assert_non_null(strstr(etcd_client_last_error(cl), "member list"));

        etcd_members_free(after);
        free(peer_url);
        free(client_url);
}

static void test_auth(void **state)
{
        bool enabled = true;
        int r = etcd_auth_status(cl, &enabled);
        if (strneq(version, "3.4", 3)) {
                assert_int_equal(r, ETCD_ERR_UNIMPLEMENTED);
        } else {
                assert_ok(cl, r);
                assert_false(enabled);
        }

        /* a client with credentials made while auth is still off works, and keeps
         * working once auth is switched on */
        etcd_client_opts o = {.endpoints = cluster->endpoints,
                              .user = "root",
                              .password = "s3cret-pw",
                              .call_timeout_ms = 5000};
        etcd_client *early = NULL;
        assert_int_equal(etcd_client_new(&o, &early), 0);
        assert_ok(early, etcd_put(early, "/auth", "early", 5, NULL));

        assert_ok(cl, etcd_user_add(cl, "root", "s3cret-pw"));
        assert_int_equal(etcd_user_add(cl, "root", "again"), ETCD_ERR_USER_EXISTS);
        assert_ok(cl, etcd_role_add(cl, "root"));
        assert_ok(cl, etcd_user_grant_role(cl, "root", "root"));
        assert_ok(cl, etcd_auth_enable(cl));

        /* without credentials */
        assert_int_equal(etcd_put(cl, "/auth", "x", 1, NULL), ETCD_ERR_UNAUTHENTICATED);
        assert_non_null(strstr(etcd_client_last_error(cl), "--user"));

        assert_ok(early, etcd_put(early, "/auth", "later", 5, NULL));
        etcd_client_free(early);

        /* wrong password: a clear error that does not repeat the password */
        o.password = "wrong-pw";
        etcd_client *bad = NULL;
        assert_int_equal(etcd_client_new(&o, &bad), 0);
        assert_int_equal(etcd_put(bad, "/auth", "x", 1, NULL), ETCD_ERR_AUTH_FAILED);
        const char *msg = etcd_client_last_error(bad);
        assert_non_null(strstr(msg, "root"));
        assert_non_null(strstr(msg, "password"));
        assert_null(strstr(msg, "wrong-pw"));
        etcd_client_free(bad);

        /* the right one works; the token survives being invalidated (auth off and on) */
        o.password = "s3cret-pw";
        etcd_client *good = NULL;
        assert_int_equal(etcd_client_new(&o, &good), 0);
        assert_ok(good, etcd_put(good, "/auth", "x", 1, NULL));
        if (!strneq(version, "3.4", 3)) {
                assert_ok(good, etcd_auth_status(good, &enabled));
                assert_true(enabled);
        }
        assert_ok(good, etcd_auth_disable(good));
        assert_ok(good, etcd_auth_enable(good));
        assert_ok(good, etcd_put(good, "/auth", "y", 1, NULL));
        etcd_kv_list *l = NULL;
        assert_ok(good, etcd_get(good, "/auth", false, &l));
        assert_string_equal(l->kvs[0].value, "y");
        etcd_kv_list_free(l);

        /* UserList needs credentials once auth is on (how 3.4 is told to have it on) */
        char **users = NULL;
        size_t n_users = 0;
        assert_int_equal(etcd_user_list(cl, &users, &n_users), ETCD_ERR_UNAUTHENTICATED);
        assert_ok(good, etcd_user_list(good, &users, &n_users));
        assert_int_equal(n_users, 1);
        assert_string_equal(users[0], "root");
        free(users[0]);
        free(users);

        /* a password change: the old one is refused, a client given both as password and
         * fallback gets in with whichever etcd has */
        assert_ok(good, etcd_user_change_password(good, "root", "n3w-pw"));
        o.password = "s3cret-pw";
        assert_int_equal(etcd_client_new(&o, &bad), 0);
        assert_int_equal(etcd_put(bad, "/auth", "x", 1, NULL), ETCD_ERR_AUTH_FAILED);
        etcd_client_free(bad);
        o.fallback_password = "n3w-pw";
        etcd_client *both = NULL;
        assert_int_equal(etcd_client_new(&o, &both), 0);
        assert_ok(both, etcd_put(both, "/auth", "z", 1, NULL));
        assert_ok(both, etcd_put(both, "/auth", "z", 1, NULL));
        assert_null(strstr(etcd_client_last_error(both), "pw"));
        etcd_client_free(both);
        o.password = "n3w-pw";
        o.fallback_password = "s3cret-pw";
        assert_int_equal(etcd_client_new(&o, &both), 0);
        assert_ok(both, etcd_put(both, "/auth", "z", 1, NULL));
        /* the change made the tokens of the old password stale: good must be made again */
        assert_int_equal(etcd_put(good, "/auth", "x", 1, NULL), ETCD_ERR_AUTH_FAILED);
        etcd_client_free(good);

        assert_ok(both, etcd_auth_disable(both));
        etcd_client_free(both);
}

int main(int argc, char **argv)
{
        if (argc > 1)
                version = argv[1];
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed\n", version);
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_member_list),
            cmocka_unit_test(test_status),
            cmocka_unit_test(test_kv),
            cmocka_unit_test(test_threads),
            cmocka_unit_test(test_nospace_alarm),
            cmocka_unit_test(test_one_endpoint_dead),
            cmocka_unit_test(test_all_endpoints_dead),
            cmocka_unit_test(test_silent_endpoint_deadline),
            cmocka_unit_test(test_reconnect_after_restart),
            cmocka_unit_test(test_snapshot),
            cmocka_unit_test(test_defragment),
            cmocka_unit_test(test_move_leader),
            cmocka_unit_test(test_learner_lifecycle),
            cmocka_unit_test(test_auth),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

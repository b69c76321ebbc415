/*
 * Restore drills (snapshots/drill.h) against real etcd (3.5.16, and 3.4.23
 * whose restore tool is etcdctl) on loopback, a real SQLite state store and
 * a local-folder destination:
 *   - a gzip snapshot is drilled and verified by HashKV at its revision
 *     against the live member, with its restore time recorded and audited;
 *     no throwaway etcd and no scratch folder are left;
 *   - the live member compacted after the snapshot but not past its
 *     revision: the throwaway is compacted to the same point and the
 *     HashKV comparison still proves it;
 *   - the live member compacted past the revision: the drill falls back to
 *     the revision and the key count recorded with the snapshot, says so,
 *     and a key count that does not match fails it;
 *   - a "live cluster" holding other data at the same revision fails the
 *     HashKV comparison;
 *   - a stored file with a flipped byte, and a missing one, fail their
 *     drill before anything is restored, and the restore candidate stays
 *     the snapshot proven before;
 *   - a drill that does not fit on the scratch folder's file system does
 *     not start and says how much it needs (unverified, no candidate lost);
 *   - drills run one at a time: with the lock held elsewhere a drill is
 *     refused at once (no record) or waits for it;
 *   - what a killed drill left (its folder, its etcd still running) is
 *     removed, and its record closed as unverified.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "api/spec.h"
#include "etcd/client.h"
#include "snapshots/drill.h"
#include "snapshots/schedule.h"
#include "snapshots/snapshot.h"
#include "state/snapshots.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define CLUSTER "default/drill"

typedef struct fixture {
        harness_cluster *hc;
        char *dir;    /* the state folder */
        char *folder; /* the destination folder */
        char *db_path;
        state_db *db;
} fixture;

/* Record the cluster (spec.snapshots to a local folder) with the harness members. */
static void record_members(fixture *f, harness_cluster *hc)
{
        for (size_t i = 0; i < hc->n; i++) {
                state_member m = {.cluster = CLUSTER,
                                  .name = xasprintf("drill-%zu", i),
                                  .ordinal = (int)i,
                                  .client_url = hc->members[i].client_url,
                                  .peer_url = hc->members[i].peer_url};
                assert_int_equal(state_member_put(f->db, &m, 1000), 0);
                free(m.name);
        }
}

static void fixture_start(fixture *f, const char *version, const char *extra)
{
        harness_opts o = {.version = version, .members = 1};
        assert_int_equal(harness_cluster_start(&o, &f->hc), 0);
        f->dir = harness_tmpdir("drill");
        f->folder = path_join(f->dir, "backups");
        f->db_path = path_join(f->dir, "state.db");
        assert_int_equal(state_open(f->db_path, STATE_OPEN_READ_WRITE, &f->db), 0);
        char *yaml = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata:\n  name: drill\nspec:\n  replicas: 1\n"
                               "  version: \"%s\"\n"
                               "  snapshots:\n    schedule: \"0 * * * *\"\n%s"
                               "    destination:\n      local:\n        path: %s\n",
                               version, extra, f->folder);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("c.yaml", yaml, strlen(yaml), &set, &d), 0);
        json_t *j = spec_to_json(set.items[0]);
        char *json = json_dumps(j, JSON_COMPACT);
        assert_true(state_cluster_set_desired(f->db, CLUSTER, json, NULL, NULL, 1000) >= 0);
        record_members(f, f->hc);
        free(json);
        json_decref(j);
        cluster_set_release(&set);
        diag_list_release(&d);
        free(yaml);
}

static void fixture_stop(fixture *f)
{
        state_close(f->db);
        harness_cluster_free(f->hc);
        free(f->folder);
        free(f->db_path);
        free(f->dir);
}

static etcd_client *client(fixture *f)
{
        etcd_client_opts o = {.endpoints = f->hc->endpoints};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

/* Put n keys "<prefix><i>"; returns the revision after the last. */
static int64_t put_keys(fixture *f, const char *prefix, int n)
{
        etcd_client *c = client(f);
        int64_t rev = 0;
        for (int i = 0; i < n; i++) {
                char key[64], val[32];
                snprintf(key, sizeof(key), "%s%05d", prefix, i);
                snprintf(val, sizeof(val), "v%d", i);
                assert_int_equal(etcd_put(c, key, val, strlen(val), &rev), 0);
        }
        etcd_client_free(c);
        return rev;
}

static snapshot_job *job_of(fixture *f)
{
        snapshot_job *job = NULL;
        char *err = NULL;
        assert_int_equal(
            snapshot_job_from_state(f->db, NULL, CLUSTER, "manual", 0, f->dir, &job, &err), 0);
        return job;
}

static int64_t take(fixture *f)
{
        snapshot_job *job = job_of(f);
        char *err = NULL;
        int64_t id = 0;
        if (snapshot_take(f->db, job, &id, &err) < 0)
                fail_msg("snapshot failed: %s", err);
        snapshot_job_free(job);
        return id;
}

/* One drill of snapshot id; its record (asserted to exist). */
static state_snapshot_drill *drill(fixture *f, int64_t id, const char *want_result)
{
        snapshot_job *job = job_of(f);
        state_snapshot_drill *d = NULL;
        char *err = NULL;
        snapshot_drill_opts o = {.trigger = "manual"};
        if (snapshot_drill(f->db, job, id, &o, &d, &err) < 0)
                fail_msg("drill of snapshot %lld did not run: %s", (long long)id, err);
        snapshot_job_free(job);
        if (want_result && !streq(d->result, want_result))
                fail_msg("drill of snapshot %lld: %s (%s), wanted %s", (long long)id, d->result,
                         d->message, want_result);
        return d;
}

static void sql(fixture *f, const char *text)
{
        sqlite3 *raw = NULL;
        assert_int_equal(sqlite3_open(f->db_path, &raw), SQLITE_OK);
        sqlite3_busy_timeout(raw, 5000);
        char *err = NULL;
        if (sqlite3_exec(raw, text, NULL, NULL, &err) != SQLITE_OK)
                fail_msg("%s: %s", text, err);
        sqlite3_close(raw);
}

/* A process whose command line names path; 0 when none. */
static pid_t process_naming(const char *path)
{
        DIR *d = opendir("/proc");
        assert_non_null(d);
        pid_t found = 0;
        struct dirent *e;
        while ((e = readdir(d)) && !found) {
                char *end = NULL;
                long pid = strtol(e->d_name, &end, 10);
                if (*end || pid <= 0)
                        continue;
                char p[64];
                snprintf(p, sizeof(p), "/proc/%ld/cmdline", pid);
                char *cmd = NULL;
                size_t n = 0;
                if (read_file(p, 1 << 20, &cmd, &n) < 0)
                        continue;
                for (size_t off = 0; off < n && !found; off += strlen(cmd + off) + 1)
                        if (strstr(cmd + off, path))
                                found = (pid_t)pid;
                free(cmd);
        }
        closedir(d);
        return found;
}

/* Entries of the scratch folder other than its lock. */
static size_t scratch_entries(fixture *f)
{
        char *dir = path_join(f->dir, SNAPSHOT_DRILL_DIR);
        DIR *d = opendir(dir);
        free(dir);
        if (!d)
                return 0;
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
                if (!streq(e->d_name, ".") && !streq(e->d_name, "..") &&
                    !streq(e->d_name, SNAPSHOT_DRILL_LOCK))
                        n++;
        closedir(d);
        return n;
}

static void assert_nothing_left(fixture *f)
{
        char *dir = path_join(f->dir, SNAPSHOT_DRILL_DIR);
        assert_int_equal(scratch_entries(f), 0);
        assert_int_equal(process_naming(dir), 0);
        free(dir);
}

static void test_hashkv_then_fallback_after_compaction(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", "    compression: gzip\n");
        put_keys(&f, "a/", 200);
        int64_t id = take(&f);

        state_snapshot_drill *d = drill(&f, id, "verified");
        assert_string_equal(d->method, "hashkv");
        assert_non_null(strstr(d->message, "matches drill-0's"));
        assert_true(d->restore_ms > 0 && d->duration_ms >= d->restore_ms);
        assert_int_equal(d->key_count, 200);
        state_snapshot_drill_free(d);
        assert_nothing_left(&f);
        state_snapshot *s = NULL;
        assert_int_equal(state_snapshot_get(f.db, id, &s), 0);
        assert_string_equal(s->verify_result, "verified");
        assert_int_equal(s->key_count, 200);
        assert_true(s->verify_restore_ms > 0);
        int64_t rev = s->revision;
        state_snapshot_free(s);
        state_audit_filter af = {.cluster = CLUSTER, .action = "snapshot.verified"};
        state_audit_list al = {0};
        assert_int_equal(state_audit_query(f.db, &af, &al), 0);
        assert_int_equal(al.n, 1);
        assert_non_null(strstr(al.items[0]->after_json, "\"method\":\"hashkv\""));
        state_audit_list_release(&al);

        /* compacted after the snapshot, not past it: the throwaway is compacted alike */
        put_keys(&f, "a/", 50); /* overwrites: compaction has something to remove */
        etcd_client *c = client(&f);
        assert_int_equal(etcd_compact(c, rev - 100, true), 0);
        d = drill(&f, id, "verified");
        assert_string_equal(d->method, "hashkv");
        char *at = xasprintf("compacted at %lld", (long long)(rev - 100));
        assert_non_null(strstr(d->message, at));
        free(at);
        state_snapshot_drill_free(d);

        /* compacted past the snapshot's revision: the revision and the recorded key count */
        int64_t now_rev = put_keys(&f, "b/", 10);
        assert_int_equal(etcd_compact(c, now_rev, true), 0);
        etcd_client_free(c);
        d = drill(&f, id, "verified");
        assert_string_equal(d->method, "revision-and-count");
        assert_non_null(strstr(d->message, "compacted revision"));
        assert_non_null(strstr(d->message, "200 keys"));
        state_snapshot_drill_free(d);

        /* ... which fails the drill when they differ */
        char *q = xasprintf("UPDATE snapshots SET key_count = 201 WHERE id = %lld", (long long)id);
        sql(&f, q);
        free(q);
        d = drill(&f, id, "verify-failed");
        assert_non_null(strstr(d->message, "serves 200 keys"));
        state_snapshot_drill_free(d);
        assert_nothing_left(&f);
        fixture_stop(&f);
}

/* The members now hold other data at the snapshot's revision: HashKV tells. */
static void test_hashkv_mismatch(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", "");
        put_keys(&f, "k/", 20);
        int64_t id = take(&f);
        /* another cluster, the same number of writes with other values */
        harness_opts o = {.version = "3.5.16", .members = 1};
        harness_cluster *other = NULL;
        assert_int_equal(harness_cluster_start(&o, &other), 0);
        etcd_client_opts co = {.endpoints = other->endpoints};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&co, &c), 0);
        for (int i = 0; i < 20; i++) {
                char key[32];
                snprintf(key, sizeof(key), "k/%05d", i);
                assert_int_equal(etcd_put(c, key, "other", 5, NULL), 0);
        }
        etcd_client_free(c);
        record_members(&f, other);
        state_snapshot_drill *d = drill(&f, id, "verify-failed");
        assert_string_equal(d->method, "hashkv");
        assert_non_null(strstr(d->message, "other data than the cluster had"));
        state_snapshot_drill_free(d);
        harness_cluster_free(other);
        fixture_stop(&f);
}

/* Damaged and missing files fail their drills; the candidate stays the proven one. */
static void test_damaged_missing_and_no_room(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", "");
        put_keys(&f, "k/", 30);
        int64_t good = take(&f);
        state_snapshot_drill_free(drill(&f, good, "verified"));
        put_keys(&f, "k/", 5);
        int64_t bad = take(&f);
        state_snapshot *s = NULL;
        assert_int_equal(state_snapshot_get(f.db, bad, &s), 0);
        /* one byte flipped in the middle of the stored file */
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(s->location, 1 << 26, &data, &len), 0);
        data[len / 2] ^= 0x40;
        assert_int_equal(write_file_atomic(s->location, data, len, 0600), 0);
        free(data);
        state_snapshot_drill *d = drill(&f, bad, "verify-failed");
        assert_non_null(strstr(d->message, "is damaged: the SHA-256"));
        assert_int_equal(d->restore_ms, 0); /* refused before anything was restored */
        state_snapshot_drill_free(d);
        state_snapshot_list l = {0};
        assert_int_equal(state_snapshot_list_for(f.db, CLUSTER, 0, &l), 0);
        assert_int_equal(snapshot_restore_candidate(&l)->id, good);
        state_snapshot_list_release(&l);
        /* gone from the destination */
        assert_int_equal(unlink(s->location), 0);
        d = drill(&f, bad, "verify-failed");
        assert_non_null(strstr(d->message, "is missing"));
        state_snapshot_drill_free(d);
        state_snapshot_free(s);

        /* no room: not started, unverified, and the earlier proof stands */
        char *q = xasprintf("UPDATE snapshots SET db_size = %lld WHERE id = %lld",
                            (long long)1 << 50, (long long)good);
        sql(&f, q);
        free(q);
        d = drill(&f, good, "unverified");
        assert_non_null(strstr(d->message, "not started: the drill needs"));
        assert_non_null(strstr(d->message, "MiB free"));
        state_snapshot_drill_free(d);
        assert_int_equal(state_snapshot_get(f.db, good, &s), 0);
        assert_string_equal(s->verify_result, "verified");
        state_snapshot_free(s);
        assert_nothing_left(&f);
        fixture_stop(&f);
}

static void test_etcd34(void **unused)
{
        (void)unused;
        if (!harness_have_etcd("3.4.23"))
                skip();
        fixture f = {0};
        fixture_start(&f, "3.4.23", "    compression: gzip\n");
        put_keys(&f, "k/", 50);
        int64_t id = take(&f);
        state_snapshot_drill *d = drill(&f, id, "verified");
        assert_string_equal(d->method, "hashkv");
        state_snapshot_drill_free(d);
        assert_nothing_left(&f);
        fixture_stop(&f);
}

typedef struct holder {
        char *path;
        int fd;
        int hold_ms;
} holder;

static void *release_later(void *userdata)
{
        holder *h = userdata;
        msleep(h->hold_ms);
        close(h->fd);
        return NULL;
}

/* One drill at a time; what a killed drill left is removed by the next. */
static void test_one_at_a_time_and_leftovers(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", "");
        put_keys(&f, "k/", 10);
        int64_t id = take(&f);

        /* the lock held (as by another gitcd): refused at once, nothing recorded */
        char *dir = path_join(f.dir, SNAPSHOT_DRILL_DIR);
        assert_int_equal(mkdir_p(dir, 0700), 0);
        holder h = {.path = path_join(dir, SNAPSHOT_DRILL_LOCK), .hold_ms = 1500};
        pid_t pid = 0;
        assert_int_equal(lock_file_try(h.path, &h.fd, &pid), 0);
        snapshot_job *job = job_of(&f);
        state_snapshot_drill *d = NULL;
        char *err = NULL;
        snapshot_drill_opts o = {.trigger = "manual"};
        assert_int_equal(snapshot_drill(f.db, job, id, &o, &d, &err), -EBUSY);
        assert_non_null(strstr(err, "another restore drill"));
        free(err);
        err = NULL;
        state_snapshot_drill_list dl = {0};
        assert_int_equal(state_snapshot_drill_list_for(f.db, CLUSTER, 0, &dl), 0);
        assert_int_equal(dl.n, 0);
        state_snapshot_drill_list_release(&dl);
        /* ... or waits for it */
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, release_later, &h), 0);
        o.lock_wait_ms = 60 * 1000;
        int64_t t0 = now_mono_ms();
        assert_int_equal(snapshot_drill(f.db, job, id, &o, &d, &err), 0);
        assert_true(now_mono_ms() - t0 >= 1000);
        assert_string_equal(d->result, "verified");
        pthread_join(t, NULL);
        state_snapshot_drill_free(d);

        /* a killed drill's leftovers: its folder, its etcd (here a stand-in naming the
         * folder), its record still running */
        char *left = path_join(dir, "7-abcdef");
        assert_int_equal(mkdir_p(left, 0700), 0);
        char *log = path_join(left, "etcd.log");
        assert_int_equal(write_file_atomic(log, "", 0, 0600), 0);
        pid_t child = fork();
        if (child == 0) {
                execlp("tail", "tail", "-f", log, (char *)NULL);
                _exit(127);
        }
        harness_track_pid(child);
        for (int i = 0; i < 100 && process_naming(left) == 0; i++)
                msleep(20);
        char *pid_file = path_join(left, "etcd.pid");
        char *text = xasprintf("%ld\n", (long)child);
        assert_int_equal(write_file_atomic(pid_file, text, strlen(text), 0600), 0);
        int64_t stale = 0;
        assert_int_equal(state_snapshot_drill_begin(f.db, id, "schedule", 0, 1000, &stale), 0);
        d = drill(&f, id, "verified");
        state_snapshot_drill_free(d);
        /* killed (and reaped by the cleanup, as this process started it) */
        assert_true(kill(child, 0) < 0 && errno == ESRCH);
        harness_untrack_pid(child);
        assert_false(path_exists(left));
        assert_int_equal(state_snapshot_drill_get(f.db, stale, &d), 0);
        assert_string_equal(d->result, "unverified");
        assert_string_equal(d->message, "gitcd stopped while it ran");
        state_snapshot_drill_free(d);
        assert_nothing_left(&f);

        free(text);
        free(pid_file);
        free(log);
        free(left);
        free(h.path);
        free(dir);
        snapshot_job_free(job);
        fixture_stop(&f);
}

int main(void)
{
        if (!harness_have_etcd("3.5.16")) {
                fprintf(stderr, "etcd 3.5.16 not installed; skipping\n");
                return 77;
        }
        char *etcd_dir = harness_etcd_dir();
        setenv("GITCD_ETCD_DIR", etcd_dir, 1);
        free(etcd_dir);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hashkv_then_fallback_after_compaction),
            cmocka_unit_test(test_hashkv_mismatch),
            cmocka_unit_test(test_damaged_missing_and_no_room),
            cmocka_unit_test(test_etcd34),
            cmocka_unit_test(test_one_at_a_time_and_leftovers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

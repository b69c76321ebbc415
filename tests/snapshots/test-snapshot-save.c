/*
 * The snapshot pipeline against real etcd (3.5.16 and 3.4.23 on loopback)
 * and a real local-folder destination, through snapshots/snapshot.h:
 *   - a snapshot is taken from a follower, verified, gzip-compressed,
 *     stored and recorded with the revision of the data and the SHA-256 of
 *     the stored file, and audited; with a follower that does not answer
 *     (stopped), from the other one, without waiting for the first;
 *   - the stored file decompresses to a snapshot etcd's own tool reads,
 *     holding every key written before it;
 *   - an upload that fails is recorded as failed and never counts;
 *   - a snapshot aborted (gitcd stopping) is recorded as failed, nothing
 *     stored, no temporary file left;
 *   - retention by count and by age deletes only recorded snapshots (a
 *     foreign file in the folder survives), records the deletions, and
 *     retries a deletion that failed;
 *   - the same against S3 (a real s3rver on loopback): stored under the
 *     prefix, retention deletes only recorded keys, fetched back intact;
 *   - a restore of 100,000 keys through etcd's own tool gives a data
 *     directory that etcd starts from with every key and value; a damaged
 *     or missing snapshot is refused before anything is restored.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <zlib.h>

#include "api/spec.h"
#include "etcd/client.h"
#include "snapshots/declared.h"
#include "snapstore/restore.h"
#include "snapshots/snapshot.h"
#include "snapstore/tool.h"
#include "state/snapshots.h"
#include "snapstore/destination.h"
#include "targets/target.h"
#include "tests/harness/harness.h"
#include "tests/harness/s3rver.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define CLUSTER "default/snap"

typedef struct fixture {
        harness_cluster *hc;
        char *dir;    /* temporary root */
        char *folder; /* the destination folder */
        state_db *db;
} fixture;

/* Record the cluster with a spec using `snapshots_yaml` and the harness members. */
static void record_cluster(fixture *f, const char *version, const char *snapshots_yaml)
{
        char *yaml = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata:\n  name: snap\nspec:\n  replicas: %zu\n"
                               "  version: %s\n%s",
                               f->hc->n, version, snapshots_yaml);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("c.yaml", yaml, strlen(yaml), &set, &d), 0);
        assert_int_equal(set.n, 1);
        json_t *j = spec_to_json(set.items[0]);
        char *json = json_dumps(j, JSON_COMPACT);
        assert_true(state_cluster_set_desired(f->db, CLUSTER, json, NULL, NULL, 1000) >= 0);
        for (size_t i = 0; i < f->hc->n; i++) {
                state_member m = {.cluster = CLUSTER,
                                  .name = xasprintf("snap-%zu", i),
                                  .ordinal = (int)i,
                                  .client_url = f->hc->members[i].client_url,
                                  .peer_url = f->hc->members[i].peer_url};
                assert_int_equal(state_member_put(f->db, &m, 1000), 0);
                free(m.name);
        }
        free(json);
        json_decref(j);
        cluster_set_release(&set);
        diag_list_release(&d);
        free(yaml);
}

static void fixture_start(fixture *f, const char *version, size_t members, const char *extra)
{
        harness_opts o = {.version = version, .members = members};
        assert_int_equal(harness_cluster_start(&o, &f->hc), 0);
        f->dir = harness_tmpdir("snapshot-save");
        f->folder = path_join(f->dir, "backups");
        char *db = path_join(f->dir, "state.db");
        assert_int_equal(state_open(db, STATE_OPEN_READ_WRITE, &f->db), 0);
        free(db);
        char *snap = xasprintf("  snapshots:\n    schedule: \"0 * * * *\"\n%s"
                               "    destination:\n      local:\n        path: %s\n",
                               extra, f->folder);
        record_cluster(f, version, snap);
        free(snap);
}

static void fixture_stop(fixture *f)
{
        state_close(f->db);
        harness_cluster_free(f->hc);
        free(f->folder);
        free(f->dir);
}

static etcd_client *client(fixture *f)
{
        etcd_client_opts o = {.endpoints = f->hc->endpoints};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

/* Put n keys "k/<i>" = "v<i>"; returns the revision after the last. */
static int64_t put_keys(fixture *f, int n)
{
        etcd_client *c = client(f);
        int64_t rev = 0;
        for (int i = 0; i < n; i++) {
                char key[32], val[32];
                snprintf(key, sizeof(key), "k/%05d", i);
                snprintf(val, sizeof(val), "v%d", i);
                assert_int_equal(etcd_put(c, key, val, strlen(val), &rev), 0);
        }
        etcd_client_free(c);
        return rev;
}

static int64_t take(fixture *f, char **ret_error)
{
        snapshot_job *job = NULL;
        char *err = NULL;
        assert_int_equal(
            snapshot_job_from_state(f->db, NULL, CLUSTER, "manual", 0, f->dir, &job, &err), 0);
        int64_t id = 0;
        int r = snapshot_take(f->db, job, &id, &err);
        snapshot_job_free(job);
        if (ret_error)
                *ret_error = err;
        else {
                if (r < 0)
                        fail_msg("snapshot failed: %s", err);
                free(err);
        }
        assert_true(id > 0);
        return r < 0 ? -id : id;
}

static void file_sha256(const char *path, char out[65])
{
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 1 << 30, &data, &len), 0);
        unsigned char md[32];
        unsigned int n = 0;
        EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
        for (int i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
        free(data);
}

static void gunzip(const char *from, const char *to)
{
        gzFile in = gzopen(from, "rb");
        assert_non_null(in);
        FILE *out = fopen(to, "wb");
        assert_non_null(out);
        char buf[65536];
        int n;
        while ((n = gzread(in, buf, sizeof(buf))) > 0)
                assert_int_equal(fwrite(buf, 1, (size_t)n, out), (size_t)n);
        assert_int_equal(n, 0);
        gzclose(in);
        fclose(out);
}

static uint64_t leader_id(fixture *f)
{
        etcd_client *c = client(f);
        etcd_endpoint_status *st = NULL;
        assert_int_equal(etcd_status(c, NULL, &st), 0);
        uint64_t l = st->leader;
        etcd_endpoint_status_free(st);
        etcd_client_free(c);
        return l;
}

static uint64_t member_id_of(fixture *f, const char *member)
{
        size_t i = (size_t)atoi(member + strlen("snap-"));
        etcd_client *c = client(f);
        etcd_endpoint_status *st = NULL;
        assert_int_equal(etcd_status(c, f->hc->members[i].client_url, &st), 0);
        uint64_t id = st->member_id;
        etcd_endpoint_status_free(st);
        etcd_client_free(c);
        return id;
}

static void test_save_gzip_from_follower(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", 3, "    compression: gzip\n");
        int64_t rev = put_keys(&f, 300);

        int64_t id = take(&f, NULL);
        state_snapshot *s = NULL;
        assert_int_equal(state_snapshot_get(f.db, id, &s), 0);
        assert_string_equal(s->result, "succeeded");
        assert_string_equal(s->compression, "gzip");
        assert_int_equal(s->revision, rev);
        assert_string_equal(s->etcd_version, "3.5.16");
        assert_true(s->db_size > s->size); /* compressed */
        assert_true(member_id_of(&f, s->member) != leader_id(&f));

        /* the stored object: where the record says, with the recorded SHA-256 and size */
        char *path = path_join(f.folder, s->key);
        assert_string_equal(s->location, path);
        struct stat stt;
        assert_int_equal(stat(path, &stt), 0);
        assert_int_equal(stt.st_size, s->size);
        char sha[65];
        file_sha256(path, sha);
        assert_string_equal(sha, s->sha256);

        /* it decompresses to a snapshot etcd's own tool reads, at the same revision */
        char *raw = path_join(f.dir, "raw.db");
        gunzip(path, raw);
        snapshot_status st;
        char *why = NULL;
        assert_int_equal(snapshot_file_status(f.hc->etcdutl_bin, raw, &st, &why), 0);
        assert_int_equal(st.revision, rev);
        assert_int_equal(st.total_size + 32, s->db_size); /* etcd's sha256 trailer */

        /* audited */
        state_audit_filter af = {.cluster = CLUSTER, .action = "snapshot.save"};
        state_audit_list al = {0};
        assert_int_equal(state_audit_query(f.db, &af, &al), 0);
        assert_int_equal(al.n, 1);
        assert_string_equal(al.items[0]->outcome, "success");
        assert_non_null(strstr(al.items[0]->after_json, s->sha256));
        state_audit_list_release(&al);

        /*
         * Every member is asked at once: with the first follower stopped (SIGSTOP: its
         * port accepts, nothing answers until the call's 5 s deadline), the other
         * follower is taken without waiting for it.
         */
        uint64_t leader = leader_id(&f);
        size_t stopped = 0, other = 0;
        bool have_stopped = false;
        for (size_t i = 0; i < f.hc->n; i++) {
                char name[32];
                snprintf(name, sizeof(name), "snap-%zu", i);
                if (member_id_of(&f, name) == leader)
                        continue;
                if (have_stopped) {
                        other = i;
                } else {
                        stopped = i;
                        have_stopped = true;
                }
        }
        assert_true(have_stopped && other != stopped);
        assert_int_equal(kill(f.hc->members[stopped].pid, SIGSTOP), 0);
        int64_t t0 = now_mono_ms();
        int64_t id2 = take(&f, NULL);
        int64_t took = now_mono_ms() - t0;
        assert_int_equal(kill(f.hc->members[stopped].pid, SIGCONT), 0);
        state_snapshot *s2 = NULL;
        assert_int_equal(state_snapshot_get(f.db, id2, &s2), 0);
        char want[32];
        snprintf(want, sizeof(want), "snap-%zu", other);
        assert_string_equal(s2->member, want);
        printf("# with snap-%zu stopped, taken from %s in %lld ms\n", stopped, s2->member,
               (long long)took);
        assert_true(took < 4500);
        state_snapshot_free(s2);

        free(raw);
        free(path);
        state_snapshot_free(s);
        fixture_stop(&f);
}

static void test_save_etcd34_uncompressed(void **unused)
{
        (void)unused;
        if (!harness_have_etcd("3.4.23"))
                skip();
        fixture f = {0};
        fixture_start(&f, "3.4.23", 1, "");
        int64_t rev = put_keys(&f, 20);
        int64_t id = take(&f, NULL);
        state_snapshot *s = NULL;
        assert_int_equal(state_snapshot_get(f.db, id, &s), 0);
        assert_string_equal(s->result, "succeeded");
        assert_string_equal(s->compression, "none");
        assert_int_equal(s->revision, rev);
        assert_int_equal(s->size, s->db_size);
        char *path = path_join(f.folder, s->key);
        char sha[65];
        file_sha256(path, sha);
        assert_string_equal(sha, s->sha256);
        free(path);
        state_snapshot_free(s);
        fixture_stop(&f);
}

static void test_failed_upload_never_counts(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", 1, "");
        /* the destination folder cannot be created: a file is in the way */
        assert_int_equal(write_file_atomic(f.folder, "x", 1, 0600), 0);
        char *err = NULL;
        int64_t id = take(&f, &err);
        assert_true(id < 0);
        assert_non_null(err);
        state_snapshot *s = NULL;
        assert_int_equal(state_snapshot_get(f.db, -id, &s), 0);
        assert_string_equal(s->result, "failed");
        assert_non_null(s->error);
        assert_null(s->key);

        state_audit_filter af = {.cluster = CLUSTER, .action = "snapshot.save"};
        state_audit_list al = {0};
        assert_int_equal(state_audit_query(f.db, &af, &al), 0);
        assert_int_equal(al.n, 1);
        assert_string_equal(al.items[0]->outcome, "failure");
        state_audit_list_release(&al);

        /* a record cannot be turned into a success afterwards */
        state_snapshot late = {
            .result = "succeeded",
            .key = "x",
            .sha256 = "0000000000000000000000000000000000000000000000000000000000000000"};
        assert_int_equal(state_snapshot_finish(f.db, -id, &late, now_wall_ms()), -EALREADY);
        free(err);
        state_snapshot_free(s);
        fixture_stop(&f);
}

static snapshot_spec *spec_of(fixture *f, etcd_cluster **ret_c)
{
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        json_t *j = json_loads(sc->desired_json, 0, NULL);
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_from_json(j, CLUSTER, ret_c, &d), 0);
        json_decref(j);
        diag_list_release(&d);
        state_cluster_free(sc);
        return &(*ret_c)->snapshots;
}

static void test_retention(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", 1, "    retention:\n      count: 2\n      maxAge: 1h\n");
        put_keys(&f, 5);
        etcd_cluster *c = NULL;
        snapshot_spec *spec = spec_of(&f, &c);

        /* a declared one-off snapshot (an EtcdSnapshot document), to the same folder: taken
         * once, and never retention's although it is the oldest */
        state_snapshot_request q = {.object = (char *)"EtcdSnapshot default/before-upgrade",
                                    .identity = (char *)"0123"};
        assert_int_equal(state_snapshot_requests_sync(f.db, CLUSTER, &q, 1, 1000), 1);
        state_snapshot_request_list pending = {0};
        assert_int_equal(state_snapshot_requests_list(f.db, CLUSTER, true, &pending), 0);
        assert_int_equal(pending.n, 1);
        snapshot_job *job = NULL;
        char *err = NULL;
        assert_int_equal(snapshot_declared_job(f.db, NULL, pending.items[0], f.dir, &job, &err), 0);
        int64_t declared = 0;
        if (snapshot_take(f.db, job, &declared, &err) < 0)
                fail_msg("declared snapshot: %s", err);
        assert_int_equal(snapshot_take(f.db, job, NULL, &err), -EALREADY); /* never twice */
        free(err);
        snapshot_job_free(job);
        state_snapshot_request_list_release(&pending);
        assert_int_equal(state_snapshot_requests_list(f.db, CLUSTER, true, &pending), 0);
        assert_int_equal(pending.n, 0);

        int64_t ids[4];
        for (int i = 0; i < 4; i++)
                ids[i] = take(&f, NULL);
        /* somebody else's file under the same folder and prefix */
        char *foreign_dir = path_join(f.folder, "default/snap");
        char *foreign = path_join(foreign_dir, "hand-made-backup.db");
        assert_int_equal(write_file_atomic(foreign, "mine", 4, 0600), 0);

        /* make the deletion of the oldest fail: a non-empty folder in its place */
        state_snapshot *oldest = NULL;
        assert_int_equal(state_snapshot_get(f.db, ids[0], &oldest), 0);
        char *oldest_path = path_join(f.folder, oldest->key);
        assert_int_equal(unlink(oldest_path), 0);
        char *blocker = path_join(oldest_path, "x");
        assert_int_equal(mkdir_p(oldest_path, 0700), 0);
        assert_int_equal(write_file_atomic(blocker, "x", 1, 0600), 0);

        int64_t now = now_wall_ms();
        assert_int_equal(snapshot_retention(f.db, CLUSTER, spec, f.dir, NULL, NULL, now), 1);
        state_snapshot_list l = {0};
        assert_int_equal(state_snapshot_list_for(f.db, CLUSTER, 0, &l), 0);
        assert_int_equal(l.n, 5);
        assert_string_equal(l.items[4]->trigger, "declared");
        assert_string_equal(l.items[4]->declared_by, "EtcdSnapshot default/before-upgrade");
        assert_string_equal(l.items[4]->result, "succeeded");
        assert_int_equal(l.items[4]->expired_ms, 0);
        assert_true(path_exists(l.items[4]->location));
        /* newest first: two kept, the third deleted, the oldest expired with the failure */
        assert_int_equal(l.items[0]->expired_ms, 0);
        assert_int_equal(l.items[1]->expired_ms, 0);
        assert_true(l.items[2]->deleted_ms > 0);
        assert_false(path_exists(l.items[2]->location));
        assert_true(l.items[3]->expired_ms > 0);
        assert_int_equal(l.items[3]->deleted_ms, 0);
        assert_non_null(l.items[3]->delete_error);
        assert_true(path_exists(l.items[0]->location));
        assert_true(path_exists(l.items[1]->location));
        assert_true(path_exists(foreign));
        state_snapshot_list_release(&l);

        /* next time the failed deletion is retried (and nothing else goes) */
        assert_int_equal(unlink(blocker), 0);
        assert_int_equal(rmdir(oldest_path), 0);
        assert_int_equal(write_file_atomic(oldest_path, "again", 5, 0600), 0);
        assert_int_equal(snapshot_retention(f.db, CLUSTER, spec, f.dir, NULL, NULL, now), 1);
        assert_false(path_exists(oldest_path));
        state_snapshot_free(oldest);
        assert_int_equal(state_snapshot_get(f.db, ids[0], &oldest), 0);
        assert_true(oldest->deleted_ms > 0);
        assert_null(oldest->delete_error);

        /* by age: two hours later only the newest is kept (never the last one) */
        assert_int_equal(
            snapshot_retention(f.db, CLUSTER, spec, f.dir, NULL, NULL, now + 2 * 3600 * 1000), 1);
        assert_int_equal(state_snapshot_list_for(f.db, CLUSTER, 0, &l), 0);
        assert_int_equal(l.items[0]->expired_ms, 0);
        assert_true(path_exists(l.items[0]->location));
        assert_true(l.items[1]->deleted_ms > 0);
        assert_true(path_exists(foreign));
        assert_int_equal(l.items[4]->id, declared);
        assert_true(path_exists(l.items[4]->location)); /* kept whatever its age */
        state_snapshot_list_release(&l);

        state_audit_filter af = {.cluster = CLUSTER, .action = "snapshot.delete"};
        state_audit_list al = {0};
        assert_int_equal(state_audit_query(f.db, &af, &al), 0);
        assert_int_equal(al.n, 4); /* one failure, three successes */
        state_audit_list_release(&al);

        free(blocker);
        free(oldest_path);
        state_snapshot_free(oldest);
        free(foreign);
        free(foreign_dir);
        etcd_cluster_free(c);
        fixture_stop(&f);
}

/* Start etcd on a restored data dir; returns its pid, the client URL in *ret_url. */
static pid_t start_restored(fixture *f, const char *data_dir, const char *name,
                            const char *peer_url, char **ret_url)
{
        char *client = xasprintf("http://127.0.0.1:%d", harness_free_port());
        char *cluster = xasprintf("%s=%s", name, peer_url);
        char *log = path_join(f->dir, "restored.log");
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (!freopen(log, "w", stderr) || !freopen(log, "a", stdout))
                        _exit(126);
                execl(f->hc->etcd_bin, f->hc->etcd_bin, "--name", name, "--data-dir", data_dir,
                      "--listen-client-urls", client, "--advertise-client-urls", client,
                      "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                      "--initial-cluster", cluster, (char *)NULL);
                _exit(127);
        }
        harness_track_pid(pid);
        free(cluster);
        free(log);
        *ret_url = client;
        return pid;
}

#define MANY 100000

/* every key of test_restore_many_keys, with its value, in ranges of 1000 */
static void assert_many_keys(etcd_client *rc)
{
        int seen = 0;
        for (int p = 0; p < MANY / 1000; p++) {
                char prefix[32];
                snprintf(prefix, sizeof(prefix), "k/%03d", p);
                etcd_kv_list *l = NULL;
                assert_int_equal(etcd_get(rc, prefix, true, &l), 0);
                assert_int_equal(l->n, 1000);
                for (size_t i = 0; i < l->n; i++) {
                        int n = atoi(l->kvs[i].key + 2);
                        assert_int_equal(n, p * 1000 + (int)i);
                        char want[32];
                        snprintf(want, sizeof(want), "value-%d", n);
                        assert_int_equal(l->kvs[i].value_len, strlen(want));
                        assert_memory_equal(l->kvs[i].value, want, strlen(want));
                        seen++;
                }
                etcd_kv_list_free(l);
        }
        assert_int_equal(seen, MANY);
}

static void test_restore_many_keys(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", 1, "    compression: gzip\n");
        etcd_client *c = client(&f);
        for (int i = 0; i < MANY; i++) {
                char key[32], val[32];
                snprintf(key, sizeof(key), "k/%06d", i);
                snprintf(val, sizeof(val), "value-%d", i);
                assert_int_equal(etcd_put(c, key, val, strlen(val), NULL), 0);
        }
        etcd_client_free(c);
        int64_t id = take(&f, NULL);
        state_snapshot *s = NULL;
        assert_int_equal(state_snapshot_get(f.db, id, &s), 0);

        /* fetch (size and SHA-256 checked), unpack (etcd's hash checked), restore */
        char *fetched = path_join(f.dir, "fetched");
        char *raw = path_join(f.dir, "raw.db");
        char *data = path_join(f.dir, "restored");
        char *err = NULL;
        assert_int_equal(snapshot_fetch(f.db, s, f.dir, NULL, fetched, &err), 0);
        int64_t size = 0;
        assert_int_equal(snapshot_unpack(fetched, raw, &size, &err), 0);
        assert_int_equal(size, s->db_size);
        char *peer = xasprintf("http://127.0.0.1:%d", harness_free_port());
        snapshot_restore_opts o = {.tool = f.hc->etcdutl_bin,
                                   .snapshot = raw,
                                   .data_dir = data,
                                   .name = "r0",
                                   .peer_url = peer,
                                   .token = "restored"};
        if (snapshot_restore_dir(&o, &err) < 0)
                fail_msg("restore: %s", err);
        /* never over an existing folder */
        assert_int_equal(snapshot_restore_dir(&o, &err), -EEXIST);
        free(err);
        err = NULL;

        char *url = NULL;
        pid_t pid = start_restored(&f, data, "r0", peer, &url);
        etcd_client_opts co = {.endpoints = url};
        etcd_client *rc = NULL;
        assert_int_equal(etcd_client_new(&co, &rc), 0);
        etcd_endpoint_status *st = NULL;
        for (int i = 0; i < 200 && etcd_status(rc, NULL, &st) < 0; i++)
                usleep(100 * 1000);
        assert_non_null(st);
        etcd_endpoint_status_free(st);

        assert_many_keys(rc);
        etcd_client_free(rc);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        harness_untrack_pid(pid);

        /* a damaged object is refused on its SHA-256 before anything is restored */
        char *stored = path_join(f.folder, s->key);
        FILE *fp = fopen(stored, "r+b");
        assert_non_null(fp);
        fseek(fp, s->size / 2, SEEK_SET);
        int ch = fgetc(fp);
        fseek(fp, s->size / 2, SEEK_SET);
        fputc(ch ^ 0x55, fp);
        fclose(fp);
        unlink(fetched);
        assert_int_equal(snapshot_fetch(f.db, s, f.dir, NULL, fetched, &err), -EBADMSG);
        assert_non_null(strstr(err, "SHA-256"));
        free(err);
        err = NULL;
        /* and a missing one as missing */
        assert_int_equal(unlink(stored), 0);
        assert_int_equal(snapshot_fetch(f.db, s, f.dir, NULL, fetched, &err), -ENOENT);
        assert_non_null(strstr(err, "missing"));
        free(err);
        err = NULL;
        /* a file damaged inside (etcd's own sha256 no longer matches) */
        char *bad = path_join(f.dir, "bad.db");
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(read_file(raw, 1 << 30, &buf, &len), 0);
        buf[len / 3] ^= 1;
        assert_int_equal(write_file_atomic(bad, buf, len, 0600), 0);
        char *bad_raw = path_join(f.dir, "bad-raw.db");
        assert_int_equal(snapshot_unpack(bad, bad_raw, &size, &err), -EBADMSG);
        assert_non_null(strstr(err, "sha256"));
        assert_false(path_exists(bad_raw));
        free(err);

        free(bad_raw);
        free(buf);
        free(bad);
        free(stored);
        free(url);
        free(peer);
        free(data);
        free(raw);
        free(fetched);
        state_snapshot_free(s);
        fixture_stop(&f);
}

/*
 * A target that reads Secrets itself (as the Kubernetes target does): it
 * writes the Secret's keys into a folder of its own, here from `k8s_secret`
 * (NULL: the Secret does not exist).
 */
static const char *k8s_secret;

static int stub_secret_folder(target *t, const etcd_cluster *c, const char *name, char **ret_dir)
{
        (void)c;
        assert_string_equal(name, "s3creds");
        if (!k8s_secret)
                return target_fail(t, -ENOENT, "no Secret %s", name);
        *ret_dir = xstrdup(k8s_secret);
        return 0;
}

static const target_ops stub_ops = {.name = "stub", .secret_folder = stub_secret_folder};

/* A manual snapshot with the credentials a target read from its Secret. */
static int64_t take_with_target(fixture *f, char **ret_error)
{
        target stub = {.ops = &stub_ops};
        snapshot_job *job = NULL;
        char *err = NULL;
        assert_int_equal(
            snapshot_job_from_state(f->db, &stub, CLUSTER, "manual", 0, f->dir, &job, &err), 0);
        free(stub.last_error);
        int64_t id = 0;
        int r = snapshot_take(f->db, job, &id, &err);
        snapshot_job_free(job);
        *ret_error = err;
        return r < 0 ? -id : id;
}

/*
 * The target's Secret: missing fails the snapshot, recorded; then its keys
 * are used and the state folder's Secret folder is not looked at.
 */
static void snapshot_with_target_secret(fixture *f)
{
        k8s_secret = NULL;
        char *why = NULL;
        int64_t failed = take_with_target(f, &why);
        assert_true(failed < 0);
        assert_non_null(strstr(why, "S3 credentials Secret default/s3creds: not found"));
        free(why);
        state_snapshot *rec = NULL;
        assert_int_equal(state_snapshot_get(f->db, -failed, &rec), 0);
        assert_string_equal(rec->result, "failed");
        state_snapshot_free(rec);
        char *k8s_dir = path_join(f->dir, "k8s-secret");
        assert_int_equal(mkdir_p(k8s_dir, 0700), 0);
        char *kid = path_join(k8s_dir, "accessKeyID");
        assert_int_equal(write_file_atomic(kid, "WRONG", 5, 0600), 0);
        char *kkey = path_join(k8s_dir, "secretAccessKey");
        assert_int_equal(write_file_atomic(kkey, HARNESS_S3RVER_KEY, 6, 0600), 0);
        k8s_secret = k8s_dir;
        assert_true(take_with_target(f, &why) < 0); /* s3rver refuses that access key */
        assert_non_null(strstr(why, "403"));
        free(why);
        assert_int_equal(write_file_atomic(kid, HARNESS_S3RVER_KEY, 6, 0600), 0);
        int64_t ok = take_with_target(f, &why);
        if (ok < 0)
                fail_msg("snapshot with the target's Secret failed: %s", why);
        free(why);
        free(kid);
        free(kkey);
        free(k8s_dir);
}

static void test_s3_destination(void **unused)
{
        (void)unused;
        char *bin = harness_s3rver_path();
        if (!bin)
                skip();
        free(bin);
        harness_s3rver *s3 = NULL;
        assert_int_equal(harness_s3rver_start(NULL, &s3), 0);
        harness_opts o = {.version = "3.5.16", .members = 1};
        fixture f = {0};
        assert_int_equal(harness_cluster_start(&o, &f.hc), 0);
        f.dir = harness_tmpdir("snapshot-s3");
        char *db = path_join(f.dir, "state.db");
        assert_int_equal(state_open(db, STATE_OPEN_READ_WRITE, &f.db), 0);
        free(db);
        /* the credentials Secret, as a folder on the gitcd host */
        char *secret = path_join(f.dir, "secrets/default/s3creds");
        assert_int_equal(mkdir_p(secret, 0700), 0);
        char *id = path_join(secret, "accessKeyID"), *key = path_join(secret, "secretAccessKey");
        assert_int_equal(write_file_atomic(id, HARNESS_S3RVER_KEY, 6, 0600), 0);
        assert_int_equal(write_file_atomic(key, HARNESS_S3RVER_KEY, 6, 0600), 0);
        char *yaml = xasprintf("  snapshots:\n    schedule: \"0 * * * *\"\n"
                               "    compression: gzip\n    retention:\n      count: 2\n"
                               "    destination:\n      s3:\n        endpoint: %s\n"
                               "        bucket: %s\n        key: backups/\n"
                               "        region: us-east-1\n        forcePathStyle: true\n"
                               "        credentialsSecretRef:\n          name: s3creds\n",
                               s3->endpoint_ip, s3->bucket);
        record_cluster(&f, "3.5.16", yaml);
        free(yaml);
        put_keys(&f, 10);
        etcd_cluster *c = NULL;
        snapshot_spec *spec = spec_of(&f, &c);

        /* an object gitcd did not write, under the same prefix */
        snapshot_dest *dest = NULL;
        char *err = NULL;
        snapshot_dest_context ctx = {.state_dir = f.dir, .namespace_ = "default"};
        assert_int_equal(snapshot_dest_open(&spec->destination, &ctx, &dest, &err), 0);
        char *foreign_file = path_join(f.dir, "foreign");
        assert_int_equal(write_file_atomic(foreign_file, "mine", 4, 0600), 0);
        assert_int_equal(
            snapshot_dest_put_file(dest, "default/snap/foreign.db", foreign_file, NULL, &err), 0);

        int64_t ids[3];
        for (int i = 0; i < 3; i++)
                ids[i] = take(&f, NULL);
        state_snapshot *newest = NULL, *oldest = NULL;
        assert_int_equal(state_snapshot_get(f.db, ids[2], &newest), 0);
        assert_int_equal(state_snapshot_get(f.db, ids[0], &oldest), 0);
        assert_non_null(strstr(newest->location, "/backups/default/snap/"));
        dest_object obj = {0};
        assert_int_equal(snapshot_dest_stat(dest, newest->key, &obj, &err), 0);
        assert_int_equal(obj.size, newest->size);
        dest_object_release(&obj);

        assert_int_equal(snapshot_retention(f.db, CLUSTER, spec, f.dir, NULL, NULL, now_wall_ms()),
                         1);
        assert_int_equal(snapshot_dest_stat(dest, oldest->key, &obj, &err), -ENOENT);
        free(err);
        err = NULL;
        assert_int_equal(snapshot_dest_stat(dest, "default/snap/foreign.db", &obj, &err), 0);
        dest_object_release(&obj);

        snapshot_with_target_secret(&f);

        /* fetched back through the record, intact */
        char *fetched = path_join(f.dir, "fetched");
        char *raw = path_join(f.dir, "raw.db");
        if (snapshot_fetch(f.db, newest, f.dir, NULL, fetched, &err) < 0)
                fail_msg("fetch: %s", err);
        int64_t size = 0;
        assert_int_equal(snapshot_unpack(fetched, raw, &size, &err), 0);
        assert_int_equal(size, newest->db_size);

        /* `gitcd snapshot restore --print-spec`: a spec that names the object, and validates */
        char *spec_file = path_join(f.dir, "restore.yaml");
        char *cmd =
            xasprintf("'%s' snapshot restore %lld --print-spec --state '%s/state.db' > '%s'",
                      getenv("GITCD_BIN"), (long long)newest->id, f.dir, spec_file);
        assert_int_equal(system(cmd), 0);
        char *printed = NULL;
        size_t plen = 0;
        assert_int_equal(read_file(spec_file, 1 << 20, &printed, &plen), 0);
        char *want = xasprintf("        s3:\n          endpoint: %s\n          bucket: %s\n"
                               "          key: backups/%s\n",
                               s3->endpoint_ip, s3->bucket, newest->key);
        if (!strstr(printed, want))
                fail_msg("printed spec:\n%s\nwithout:\n%s", printed, want);
        free(cmd);
        cmd = xasprintf("'%s' validate '%s' 2>/dev/null", getenv("GITCD_BIN"), spec_file);
        assert_int_equal(system(cmd), 0);

        free(want);
        free(printed);
        free(cmd);
        free(spec_file);
        free(raw);
        free(fetched);
        state_snapshot_free(newest);
        state_snapshot_free(oldest);
        free(foreign_file);
        snapshot_dest_free(dest);
        free(id);
        free(key);
        free(secret);
        etcd_cluster_free(c);
        state_close(f.db);
        harness_cluster_free(f.hc);
        free(f.dir);
        harness_s3rver_free(s3);
}

static void test_abort_records_failure(void **unused)
{
        (void)unused;
        fixture f = {0};
        fixture_start(&f, "3.5.16", 1, "");
        put_keys(&f, 10);
        snapshot_job *job = NULL;
        char *err = NULL;
        assert_int_equal(
            snapshot_job_from_state(f.db, NULL, CLUSTER, "schedule", 60000, f.dir, &job, &err), 0);
        atomic_bool cancel = true; /* what snapshot_scheduler_free sets on SIGTERM */
        job->cancel = &cancel;
        int64_t id = 0;
        assert_int_equal(snapshot_take(f.db, job, &id, &err), -ECANCELED);
        assert_string_equal(err, "aborted: gitcd is stopping");
        state_snapshot *s = NULL;
        assert_int_equal(state_snapshot_get(f.db, id, &s), 0);
        assert_string_equal(s->result, "failed");
        assert_string_equal(s->trigger, "schedule");
        assert_int_equal(s->slot_ms, 60000);
        assert_null(s->key);
        assert_false(path_exists(f.folder));
        char *tmp = path_join(f.dir, "snapshots-tmp");
        char *ls = xasprintf("test -z \"$(ls -A '%s')\"", tmp);
        assert_int_equal(system(ls), 0);
        free(ls);
        free(tmp);
        state_snapshot_free(s);
        free(err);
        snapshot_job_free(job);
        fixture_stop(&f);
}

int main(void)
{
        if (!harness_have_etcd("3.5.16")) {
                fprintf(stderr, "etcd 3.5.16 not installed; skipping\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_save_gzip_from_follower),
            cmocka_unit_test(test_save_etcd34_uncompressed),
            cmocka_unit_test(test_failed_upload_never_counts),
            cmocka_unit_test(test_abort_records_failure),
            cmocka_unit_test(test_retention),
            cmocka_unit_test(test_s3_destination),
            cmocka_unit_test(test_restore_many_keys),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

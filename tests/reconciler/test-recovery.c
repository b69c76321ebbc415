/*
 * Disaster recovery through whole reconciler passes on the fake world
 * (tests/fake/fake.h): two of three members lost for good, the survivor
 * restarted alone with --force-new-cluster once and the cluster grown back
 * with learners; what `gitcd status` is given while quorum is lost; every
 * refusal; a spec token acted on once; and gitcd killed at each phase of a
 * recovery resumes it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "api/spec.h"
#include "reconciler/reconcile.h"
#include "reconciler/recovery.h"
#include "state/recovery.h"
#include "state/restores.h"
#include "state/snapshots.h"
#include "tests/fake/fixture.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"
#define COMMIT  "0123456789abcdef0123456789abcdef01234567"

static void prepare(fx *f)
{
        f->w->now_ms = 1700000000000;
}

/* The fake target restores without running etcd's tool; it only has to be found. */
static const fx_config config = {
    .name = "recovery",
    .cluster = CLUSTER,
    .etcdutl = "#!/bin/sh\nexit 2\n",
    .prepare = prepare,
};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

/* Offer "demo" with replicas and extra lines under spec, from COMMIT by Alice. */
static void offer_n(fx *f, int replicas, const char *extra)
{
        state_revision rev = {.repository = "repo",
                              .ref = "refs/heads/main",
                              .commit = COMMIT,
                              .author_name = "Alice",
                              .author_email = "alice@example.com",
                              .fetched_ms = f->w->now_ms};
        assert_int_equal(state_revision_record(f->db, &rev), 0);
        reconcile_origin origin = {.commit = COMMIT, .author = "Alice <alice@example.com>"};
        fx_offer(f, &origin, "  replicas: %d\n  version: \"3.5.16\"\n  storage:\n    size: 1Gi\n%s",
                 replicas, extra ? extra : "");
}

static void offer(fx *f, const char *extra)
{
        offer_n(f, 3, extra);
}

/* Exactly 3 healthy voters, each recorded and running what its record says. */
static void assert_whole(fx *f)
{
        size_t learners = 0;
        assert_int_equal(fake_etcd_count(f->w, &learners), 3);
        assert_int_equal(learners, 0);
        assert_int_equal(fake_procs_running(f->w), 3);
        state_member_list l = {0};
        assert_int_equal(state_member_list_for(f->db, CLUSTER, false, &l), 0);
        assert_int_equal(l.n, 3);
        for (size_t i = 0; i < l.n; i++) {
                fake_proc *p = fake_proc_find(f->w, l.items[i]->name);
                assert_non_null(p);
                assert_true(p->running);
                assert_false(p->force); /* --force-new-cluster is never left in a command */
                assert_string_equal(l.items[i]->config_hash, p->config_hash);
        }
        state_member_list_release(&l);
}

static state_recovery *last_recovery(fx *f)
{
        state_recovery_list l = {0};
        assert_int_equal(state_recovery_list_for(f->db, CLUSTER, 1, &l), 0);
        assert_int_equal(l.n, 1);
        state_recovery *r = l.items[0];
        free(l.items);
        return r;
}

/*
 * Three members; demo-0 has applied the most (raft index 900). Then demo-1's
 * data is deleted and demo-2's host is gone for good (its data still there):
 * quorum is lost, and gitcd only waits.
 */
static uint64_t lose_quorum(fx *f)
{
        offer(f, NULL);
        fx_converge(f, NULL);
        assert_whole(f);
        fake_proc_find(f->w, "demo-0")->raft_index = 900;
        fake_proc_find(f->w, "demo-0")->revision = 420;
        fake_proc_find(f->w, "demo-2")->raft_index = 950;
        uint64_t id0 = fake_etcd_find(f->w, "demo-0")->id;
        fake_lose_data(f->w, "demo-1");
        fake_kill(f->w, "demo-2", true);
        pass_result res;
        assert_int_equal(fx_converge_n(f, 40, &res), PASS_WAITING);
        assert_string_equal(res.reason, "QuorumLost");
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);
        assert_int_equal(f->w->forced_starts, 0);
        return id0;
}

static void test_status_proposes_the_survivor(void **state)
{
        fx *f = *state;
        lose_quorum(f);
        _cleanup_free_ char *json = NULL;
        int64_t when = 0;
        assert_int_equal(state_recovery_assessment_get(f->db, CLUSTER, &json, &when), 0);
        /* demo-2 has the higher index but does not answer: demo-0 is the safest source. */
        assert_non_null(strstr(json, "\"name\":\"demo-0\""));
        assert_non_null(strstr(json, "\"raft_index\":900"));
        assert_non_null(strstr(json, "\"revision\":420"));
        assert_non_null(strstr(json, "gitcd recover default/demo --from-member demo-0"));
        assert_null(strstr(json, "--from-member demo-2"));
}

static void test_recover_from_member(void **state)
{
        fx *f = *state;
        uint64_t id0 = lose_quorum(f);
        int64_t rid = 0;
        assert_int_equal(
            recovery_request(f->db, CLUSTER, "demo-0", 0, NULL, "bob", f->w->now_ms, &rid), 0);
        /* One at a time. */
        assert_int_equal(
            recovery_request(f->db, CLUSTER, "demo-0", 0, NULL, "bob", f->w->now_ms, NULL), -EBUSY);
        fx_converge(f, NULL);
        assert_whole(f);
        /* The survivor kept its identity (and data); it was forced exactly once. */
        assert_int_equal(fake_etcd_find(f->w, "demo-0")->id, id0);
        assert_int_equal(f->w->forced_starts, 1);
        assert_null(fake_etcd_find(f->w, "demo-1"));
        assert_null(fake_etcd_find(f->w, "demo-2"));
        assert_non_null(fake_etcd_find(f->w, "demo-3"));
        assert_non_null(fake_etcd_find(f->w, "demo-4"));

        _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
        assert_int_equal(r->id, rid);
        assert_string_equal(r->result, "succeeded");
        assert_string_equal(r->seed, "demo-0");
        assert_string_equal(r->aside, "demo-1,demo-2");
        assert_int_equal(r->revision, 420);
        assert_int_equal(r->raft_index, 900);
        /* demo-2's data was kept aside until the cluster was whole, then deleted. */
        assert_true(r->cleaned_ms > 0);
        assert_int_equal(f->w->kept_dropped, 1);
        assert_false(fake_kept(f->w, "demo-2"));

        assert_int_equal(fx_audit_count_by(f, "recovery.requested", "bob"), 1);
        assert_int_equal(fx_audit_count_by(f, "recovery.started", "bob"), 1);
        assert_int_equal(fx_audit_count_by(f, "recovery.succeeded", "bob"), 1);
        assert_int_equal(fx_audit_count_by(f, "recovery.cleaned", NULL), 1);
        /* Healthy again: nothing more is proposed. */
        char *json = NULL;
        assert_int_equal(state_recovery_assessment_get(f->db, CLUSTER, &json, NULL), -ENOENT);
}

static void test_data_stays_aside_until_whole(void **state)
{
        fx *f = *state;
        lose_quorum(f);
        assert_int_equal(
            recovery_request(f->db, CLUSTER, "demo-0", 0, NULL, "bob", f->w->now_ms, NULL), 0);
        pass_result res;
        for (int i = 0; i < 20 && f->w->forced_starts == 0; i++)
                (void)fx_converge_n(f, 1, &res);
        assert_int_equal(f->w->forced_starts, 1);
        assert_true(fake_kept(f->w, "demo-2"));
        assert_null(fake_proc_find(f->w, "demo-2"));
        fx_converge(f, NULL);
        assert_false(fake_kept(f->w, "demo-2"));
}

/* Refused: each leaves the world as it was and says why. */
static void refused(fx *f, const char *member, int64_t snapshot, const char *why)
{
        int starts = f->w->forced_starts;
        size_t n = fake_etcd_count(f->w, NULL);
        assert_int_equal(
            recovery_request(f->db, CLUSTER, member, snapshot, NULL, "bob", f->w->now_ms, NULL), 0);
        (void)fx_converge_n(f, 5, NULL);
        _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
        assert_string_equal(r->result, "refused");
        if (!strstr(r->error, why))
                fprintf(stderr, "refused for: %s\n", r->error);
        assert_non_null(strstr(r->error, why));
        assert_int_equal(f->w->forced_starts, starts);
        assert_int_equal(fake_etcd_count(f->w, NULL), n);
        assert_false(fake_kept(f->w, "demo-0"));
}

static void test_refusals(void **state)
{
        fx *f = *state;
        offer(f, NULL);
        fx_converge(f, NULL);
        /* Quorum is not lost: a recovery would split the cluster. */
        refused(f, "demo-0", 0, "quorum is not lost");
        assert_whole(f);

        fake_lose_data(f->w, "demo-1");
        fake_kill(f->w, "demo-2", true);
        (void)fx_converge_n(f, 20, NULL);
        refused(f, "demo-1", 0, "has no data");
        refused(f, "demo-2", 0, "unreachable");
        refused(f, "demo-9", 0, "not a member");
        refused(f, NULL, 42, "snapshot 42");
        assert_int_equal(fx_audit_count_by(f, "recovery.refused", "bob"), 5);
        assert_int_equal(fake_procs_present(f->w), 3);
}

/* A recorded snapshot in a local folder whose file holds data, recorded with sha256. */
static int64_t record_snapshot_bytes(fx *f, const void *data, size_t len, const char *sha256)
{
        _cleanup_free_ char *folder = xasprintf("%s/backups", f->dir);
        _cleanup_free_ char *dir = xasprintf("%s/default/demo", folder);
        assert_int_equal(mkdir_p(dir, 0700), 0);
        _cleanup_free_ char *file = xasprintf("%s/s.db", dir);
        assert_int_equal(write_file_atomic(file, data, len, 0600), 0);
        int64_t id = 0;
        assert_int_equal(state_snapshot_begin(f->db, CLUSTER, "manual", 0, f->w->now_ms, &id), 0);
        _cleanup_free_ char *dest = xasprintf("local:%s", folder);
        state_snapshot s = {.result = "succeeded",
                            .member = "demo-0",
                            .revision = 7,
                            .size = (int64_t)len,
                            .db_size = (int64_t)len,
                            .sha256 = (char *)sha256,
                            .compression = "none",
                            .etcd_version = "3.5.16",
                            .destination = dest,
                            .key = "default/demo/s.db",
                            .location = file};
        assert_int_equal(state_snapshot_finish(f->db, id, &s, f->w->now_ms), 0);
        return id;
}

static int64_t record_snapshot(fx *f, const char *text, const char *sha256)
{
        return record_snapshot_bytes(f, text, strlen(text), sha256);
}

static void test_refuses_a_corrupt_snapshot(void **state)
{
        fx *f = *state;
        lose_quorum(f);
        /* The file's SHA-256 is not the recorded one: damaged after it was taken. */
        int64_t bad =
            record_snapshot(f, "not what was recorded",
                            "0000000000000000000000000000000000000000000000000000000000000000");
        refused(f, NULL, bad, "is damaged");
        /* Its file is gone from the destination. */
        int64_t gone = record_snapshot(
            f, "x", "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881");
        _cleanup_free_ char *file = xasprintf("%s/backups/default/demo/s.db", f->dir);
        assert_int_equal(unlink(file), 0);
        refused(f, NULL, gone, "is missing");
        assert_int_equal(fake_procs_present(f->w), 3);
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
        unsigned char md[32];
        unsigned int n = 0;
        assert_int_equal(EVP_Digest(data, len, md, &n, EVP_sha256(), NULL), 1);
        for (int i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* A snapshot file as etcd writes it (512-byte pages, then etcd's sha256 trailer), recorded. */
static int64_t record_good_snapshot(fx *f)
{
        unsigned char file[512 + 32];
        memset(file, 'k', 512);
        memcpy(file, "00000007", 8); /* the fake's data holds revision 7, as recorded */
        unsigned int n = 0;
        assert_int_equal(EVP_Digest(file, 512, file + 512, &n, EVP_sha256(), NULL), 1);
        char sha[65];
        sha256_hex(file, sizeof(file), sha);
        return record_snapshot_bytes(f, file, sizeof(file), sha);
}

/* Every member's data lost: the snapshot becomes the seed of a new cluster ID. */
static void lose_everything(fx *f)
{
        offer(f, NULL);
        fx_converge(f, NULL);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_lose_data(f->w, name);
        }
        pass_result res;
        assert_int_equal(fx_converge_n(f, 40, &res), PASS_WAITING);
        assert_string_equal(res.reason, "QuorumLost");
}

static void assert_restored(fx *f, uint64_t old_cluster)
{
        assert_whole(f);
        assert_int_equal(f->w->restores, 1);
        assert_int_not_equal(f->w->cluster_id, old_cluster);
        assert_non_null(fake_etcd_find(f->w, "demo-3")); /* the new seed: a new name */
        assert_null(fake_etcd_find(f->w, "demo-0"));
        _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
        assert_string_equal(r->result, "succeeded");
        assert_string_equal(r->seed, "demo-3");
        assert_string_equal(r->aside, "demo-0,demo-1,demo-2");
        assert_int_equal(r->revision, 7);
        state_member *m = NULL;
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-3", &m), 0);
        assert_true(m->seed);
        state_member_free(m);
}

static void test_recover_from_snapshot(void **state)
{
        fx *f = *state;
        lose_everything(f);
        uint64_t old_cluster = f->w->cluster_id;
        int64_t id = record_good_snapshot(f);
        /* status proposes the snapshot: no member answers. */
        _cleanup_free_ char *json = NULL;
        (void)fx_converge_n(f, 30, NULL);
        assert_int_equal(state_recovery_assessment_get(f->db, CLUSTER, &json, NULL), 0);
        _cleanup_free_ char *cmd =
            xasprintf("gitcd recover default/demo --from-snapshot %lld", (long long)id);
        assert_non_null(strstr(json, cmd));
        assert_int_equal(
            recovery_request(f->db, CLUSTER, NULL, id, NULL, "bob", f->w->now_ms, NULL), 0);
        fx_converge(f, NULL);
        assert_restored(f, old_cluster);
}

/*
 * From a snapshot with --bump-revision auto: the seed is restored with a
 * bump of at least etcd's recommended 1,000,000,000, sized from the write
 * rate between the cluster's two newest snapshots; recorded (restore of
 * origin recovery) and said in the audit log.
 */
static void test_recover_from_snapshot_bumped(void **state)
{
        fx *f = *state;
        lose_everything(f);
        uint64_t old_cluster = f->w->cluster_id;
        int64_t id = record_good_snapshot(f);
        revision_bump bump = {.mode = BUMP_AUTO};
        int64_t rid = 0;
        assert_int_equal(
            recovery_request(f->db, CLUSTER, NULL, id, &bump, "bob", f->w->now_ms, &rid), 0);
        fx_converge(f, NULL);
        assert_restored(f, old_cluster);
        fake_proc *seed = fake_proc_find(f->w, "demo-3");
        assert_int_equal(seed->restored_bump, 1000000000);
        state_restore *rec = NULL;
        assert_int_equal(state_restore_latest(f->db, CLUSTER, &rec), 0);
        assert_string_equal(rec->origin, "recovery");
        assert_int_equal(rec->recovery_id, rid);
        assert_string_equal(rec->members, "demo-3");
        assert_int_equal(rec->snapshot_revision, 7);
        assert_int_equal(rec->revision, 7 + 1000000000);
        assert_non_null(strstr(rec->sizing, "gitcd recover --bump-revision"));
        state_restore_free(rec);
        assert_int_equal(fx_audit_count(f, "recovery.restored"), 1);
}

/* spec.role kubernetes-control-plane: a recovery from a snapshot bumps by default. */
static void test_recover_control_plane_bumps(void **state)
{
        fx *f = *state;
        offer(f, "  role: kubernetes-control-plane\n");
        fx_converge(f, NULL);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_lose_data(f->w, name);
        }
        (void)fx_converge_n(f, 40, NULL);
        int64_t id = record_good_snapshot(f);
        assert_int_equal(
            recovery_request(f->db, CLUSTER, NULL, id, NULL, "bob", f->w->now_ms, NULL), 0);
        fx_converge(f, NULL);
        assert_int_equal(fake_proc_find(f->w, "demo-3")->restored_bump, 1000000000);
        state_restore *rec = NULL;
        assert_int_equal(state_restore_latest(f->db, CLUSTER, &rec), 0);
        assert_non_null(strstr(rec->sizing, "the default of spec.role kubernetes-control-plane"));
        state_restore_free(rec);
}

/* etcd 3.4.23's etcdctl cannot bump: a bump asked for is refused, with the version. */
static void test_bump_refused_on_34(void **state)
{
        fx *f = *state;
        reconcile_origin origin = {.commit = COMMIT, .author = "Alice <alice@example.com>"};
        fx_offer(f, &origin, "  replicas: 3\n  version: \"3.4.23\"\n  storage:\n    size: 1Gi\n");
        fx_converge(f, NULL);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_lose_data(f->w, name);
        }
        (void)fx_converge_n(f, 40, NULL);
        int64_t id = record_good_snapshot(f);
        revision_bump bump = {.mode = BUMP_FIXED, .amount = 5000};
        assert_int_equal(
            recovery_request(f->db, CLUSTER, NULL, id, &bump, "bob", f->w->now_ms, NULL), 0);
        (void)fx_converge_n(f, 10, NULL);
        _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
        assert_string_equal(r->result, "refused");
        assert_non_null(strstr(r->error, "etcd 3.4.23's restore tool cannot make"));
        assert_non_null(strstr(r->error, "3.4.27"));
        assert_int_equal(f->w->restores, 0);
}

/*
 * gitcd killed after the new seed was recorded, before it was restored; a
 * person then puts data set aside back where the seed's data goes: the
 * seed holds data the restore did not make (an older revision), so the
 * recovery fails with the reason and the seed never starts on it.
 */
static void test_seed_with_old_data_refused(void **state)
{
        fx *f = *state;
        lose_everything(f);
        int64_t id = record_good_snapshot(f);
        assert_int_equal(
            recovery_request(f->db, CLUSTER, NULL, id, NULL, "bob", f->w->now_ms, NULL), 0);
        fx_run_until_killed(f, "recovery.seed.before-restore");
        fake_proc *seed = fake_proc_find(f->w, "demo-3");
        assert_non_null(seed);
        seed->has_data = true;
        seed->foreign_revision = 3;
        (void)fx_converge_n(f, 10, NULL);
        _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
        assert_string_equal(r->result, "failed");
        assert_non_null(strstr(r->error, "member demo-3 holds data at revision 3, older than the "
                                         "restore it was made for"));
        seed = fake_proc_find(f->w, "demo-3");
        assert_int_equal(seed->starts, 0);
        assert_int_equal(seed->restored_revision, 0);
        assert_int_equal(f->w->restores, 0);
        /* the lifecycle after the failed recovery refuses to start it too */
        assert_true(fx_audit_count(f, "member.refused") >= 1);
}

/* A learner never becomes the cluster: it may lack writes the voters committed. */
static void test_refuses_a_learner(void **state)
{
        fx *f = *state;
        offer(f, NULL);
        fx_converge(f, NULL);
        f->w->learner_sync_ms = 1000 * 1000 * 1000; /* the new learner never catches up */
        offer_n(f, 4, NULL);
        for (int i = 0; i < 100 && !fake_etcd_find(f->w, "demo-3"); i++)
                (void)fx_converge_n(f, 1, NULL);
        for (int i = 0; i < 20; i++)
                (void)fx_converge_n(f, 1, NULL);
        assert_true(fake_etcd_find(f->w, "demo-3")->learner);
        fake_kill(f->w, "demo-1", true);
        fake_kill(f->w, "demo-2", true);
        (void)fx_converge_n(f, 20, NULL);
        refused(f, "demo-3", 0, "is a learner");
}

static void test_spec_token_acts_once(void **state)
{
        fx *f = *state;
        lose_quorum(f);
        offer(f, "  recovery:\n    from:\n      member: demo-0\n    token: incident-1\n");
        fx_converge(f, NULL);
        assert_whole(f);
        assert_int_equal(f->w->forced_starts, 1);
        assert_int_equal(fx_audit_count_by(f, "recovery.succeeded", "Alice <alice@example.com>"),
                         1);
        _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
        assert_string_equal(r->token, "incident-1");
        assert_string_equal(r->commit, COMMIT);

        /* Quorum lost again, same commit: the token was used, nothing happens by itself. */
        fake_lose_data(f->w, "demo-3");
        fake_lose_data(f->w, "demo-4");
        pass_result res;
        assert_int_equal(fx_converge_n(f, 40, &res), PASS_WAITING);
        assert_string_equal(res.reason, "QuorumLost");
        assert_int_equal(f->w->forced_starts, 1);
        state_recovery_list l = {0};
        assert_int_equal(state_recovery_list_for(f->db, CLUSTER, 0, &l), 0);
        assert_int_equal(l.n, 1);
        state_recovery_list_release(&l);
}

/* ---- crash points -------------------------------------------------------- */

static void test_crash_points(void **state)
{
        (void)state;
        static const struct {
                const char *failpoint;
                bool snapshot;
        } points[] = {
            {"recovery.aside.after-target", false},   {"recovery.force.after-target", false},
            {"recovery.forced.after-restart", false}, {"recovery.aside.after-target", true},
            {"recovery.seed.before-restore", true},   {"recovery.seed.after-restore", true},
        };
        for (size_t i = 0; i < ARRAY_SIZE(points); i++) {
                void *st = NULL;
                setup(&st);
                fx *f = st;
                if (points[i].snapshot) {
                        lose_everything(f);
                        uint64_t old_cluster = f->w->cluster_id;
                        int64_t id = record_good_snapshot(f);
                        assert_int_equal(recovery_request(f->db, CLUSTER, NULL, id, NULL, "bob",
                                                          f->w->now_ms, NULL),
                                         0);
                        fx_run_until_killed(f, points[i].failpoint);
                        fx_converge(f, NULL);
                        assert_restored(f, old_cluster);
                } else {
                        uint64_t id0 = lose_quorum(f);
                        assert_int_equal(recovery_request(f->db, CLUSTER, "demo-0", 0, NULL, "bob",
                                                          f->w->now_ms, NULL),
                                         0);
                        fx_run_until_killed(f, points[i].failpoint);
                        fx_converge(f, NULL);
                        assert_whole(f);
                        assert_int_equal(fake_etcd_find(f->w, "demo-0")->id, id0);
                        assert_int_equal(f->w->forced_starts, 1);
                }
                _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
                assert_string_equal(r->result, "succeeded");
                assert_true(r->cleaned_ms > 0);
                fx_teardown(&st);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_status_proposes_the_survivor, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_recover_from_member, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_data_stays_aside_until_whole, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_refusals, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_refuses_a_learner, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_refuses_a_corrupt_snapshot, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_recover_from_snapshot, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_recover_from_snapshot_bumped, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_recover_control_plane_bumps, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_bump_refused_on_34, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_seed_with_old_data_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_spec_token_acts_once, setup, fx_teardown),
            cmocka_unit_test(test_crash_points),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

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
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "api/spec.h"
#include "reconciler/reconcile.h"
#include "reconciler/recovery.h"
#include "state/recovery.h"
#include "state/snapshots.h"
#include "tests/fake/fake.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define CLUSTER    "default/demo"
#define MAX_PASSES 400
#define COMMIT     "0123456789abcdef0123456789abcdef01234567"

typedef struct fx {
        char *dir;
        char *db_path;
        char *etcd_dir; /* etcd's tools by version: a stand-in etcdutl for 3.5.16 */
        fake_world *w;
        state_db *db;
        target *t;
        reconciler *r;
} fx;

static void fx_open(fx *f)
{
        assert_int_equal(state_open(f->db_path, STATE_OPEN_READ_WRITE, &f->db), 0);
        assert_int_equal(fake_target_new(f->w, &f->t), 0);
        fake_world_make_current(f->w);
        reconciler_opts o = {
            .db = f->db,
            .target = f->t,
            .etcd = &fake_etcd_ops,
            .etcd_userdata = f->w,
            .etcd_dir = f->etcd_dir,
            .wall_ms = fake_clock_ms,
            .mono_ms = fake_clock_ms,
        };
        assert_int_equal(reconciler_new(&o, &f->r), 0);
}

static void fx_close(fx *f)
{
        reconciler_free(f->r);
        f->r = NULL;
        target_free(f->t);
        f->t = NULL;
        state_close(f->db);
        f->db = NULL;
}

static int setup(void **state)
{
        fx *f = XNEW(fx);
        char tmpl[] = "/tmp/gitcd-recovery-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        f->dir = xstrdup(tmpl);
        f->db_path = xasprintf("%s/state.db", f->dir);
        /* The fake target restores without running etcd's tool; it only has to be found. */
        f->etcd_dir = xasprintf("%s/etcd", f->dir);
        _cleanup_free_ char *tooldir = xasprintf("%s/3.5.16", f->etcd_dir);
        assert_int_equal(mkdir_p(tooldir, 0755), 0);
        _cleanup_free_ char *tool = xasprintf("%s/etcdutl", tooldir);
        FILE *fp = fopen(tool, "we");
        assert_non_null(fp);
        fputs("#!/bin/sh\nexit 2\n", fp);
        assert_int_equal(fclose(fp), 0);
        assert_int_equal(chmod(tool, 0755), 0);
        f->w = fake_world_new();
        f->w->now_ms = 1700000000000;
        fx_open(f);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fx *f = *state;
        fx_close(f);
        fake_world_free(f->w);
        (void)rm_rf(f->dir);
        free(f->dir);
        free(f->db_path);
        free(f->etcd_dir);
        free(f);
        return 0;
}

/* Offer "demo" with replicas and extra lines under spec, from COMMIT by Alice. */
static void offer_n(fx *f, int replicas, const char *extra)
{
        strbuf y = STRBUF_INIT;
        sb_printf(&y,
                  "apiVersion: gitcd.io/v1alpha1\n"
                  "kind: EtcdCluster\n"
                  "metadata:\n  name: demo\n  namespace: default\n"
                  "spec:\n  replicas: %d\n  version: \"3.5.16\"\n  storage:\n    size: 1Gi\n",
                  replicas);
        if (extra)
                sb_append(&y, extra);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        int k = spec_load_buffer("demo.yaml", sb_str(&y), y.len, &set, &d);
        for (size_t i = 0; i < d.n; i++)
                fprintf(stderr, "%s\n", d.items[i].message);
        assert_int_equal(k, 0);
        assert_int_equal(set.n, 1);
        state_revision rev = {.repository = "repo",
                              .ref = "refs/heads/main",
                              .commit = COMMIT,
                              .author_name = "Alice",
                              .author_email = "alice@example.com",
                              .fetched_ms = f->w->now_ms};
        assert_int_equal(state_revision_record(f->db, &rev), 0);
        reconcile_origin origin = {.commit = COMMIT, .author = "Alice <alice@example.com>"};
        assert_int_equal(reconciler_offer(f->r, set.items[0], &origin), 0);
        cluster_set_release(&set);
        diag_list_release(&d);
        sb_release(&y);
}

static void offer(fx *f, const char *extra)
{
        offer_n(f, 3, extra);
}

static pass_outcome converge_n(fx *f, int max_passes, pass_result *ret)
{
        pass_result res = {0};
        for (int i = 0; i < max_passes; i++) {
                assert_int_equal(reconciler_pass(f->r, CLUSTER, &res), 0);
                if (res.outcome == PASS_CONVERGED || res.outcome == PASS_FAILED)
                        break;
                if (res.outcome != PASS_PROGRESSED)
                        fake_world_advance(f->w, res.poll_ms > 0 ? res.poll_ms : 200);
        }
        if (ret)
                *ret = res;
        return res.outcome;
}

static void converge(fx *f)
{
        pass_result res;
        pass_outcome o = converge_n(f, MAX_PASSES, &res);
        if (o != PASS_CONVERGED)
                fprintf(stderr, "not converged: %s %s: %s\n", pass_outcome_name(o), res.reason,
                        res.message);
        assert_int_equal(o, PASS_CONVERGED);
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

static int audit_count(fx *f, const char *action, const char *author)
{
        state_audit_filter flt = {.cluster = CLUSTER, .action = action};
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(f->db, &flt, &l), 0);
        int n = 0;
        for (size_t i = 0; i < l.n; i++)
                if (!author || streq_ptr(l.items[i]->author, author))
                        n++;
        state_audit_list_release(&l);
        return n;
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
        converge(f);
        assert_whole(f);
        fake_proc_find(f->w, "demo-0")->raft_index = 900;
        fake_proc_find(f->w, "demo-0")->revision = 420;
        fake_proc_find(f->w, "demo-2")->raft_index = 950;
        uint64_t id0 = fake_etcd_find(f->w, "demo-0")->id;
        fake_lose_data(f->w, "demo-1");
        fake_kill(f->w, "demo-2", true);
        pass_result res;
        assert_int_equal(converge_n(f, 40, &res), PASS_WAITING);
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
        assert_int_equal(recovery_request(f->db, CLUSTER, "demo-0", 0, "bob", f->w->now_ms, &rid),
                         0);
        /* One at a time. */
        assert_int_equal(recovery_request(f->db, CLUSTER, "demo-0", 0, "bob", f->w->now_ms, NULL),
                         -EBUSY);
        converge(f);
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

        assert_int_equal(audit_count(f, "recovery.requested", "bob"), 1);
        assert_int_equal(audit_count(f, "recovery.started", "bob"), 1);
        assert_int_equal(audit_count(f, "recovery.succeeded", "bob"), 1);
        assert_int_equal(audit_count(f, "recovery.cleaned", NULL), 1);
        /* Healthy again: nothing more is proposed. */
        char *json = NULL;
        assert_int_equal(state_recovery_assessment_get(f->db, CLUSTER, &json, NULL), -ENOENT);
}

static void test_data_stays_aside_until_whole(void **state)
{
        fx *f = *state;
        lose_quorum(f);
        assert_int_equal(recovery_request(f->db, CLUSTER, "demo-0", 0, "bob", f->w->now_ms, NULL),
                         0);
        pass_result res;
        for (int i = 0; i < 20 && f->w->forced_starts == 0; i++)
                (void)converge_n(f, 1, &res);
        assert_int_equal(f->w->forced_starts, 1);
        assert_true(fake_kept(f->w, "demo-2"));
        assert_null(fake_proc_find(f->w, "demo-2"));
        converge(f);
        assert_false(fake_kept(f->w, "demo-2"));
}

/* Refused: each leaves the world as it was and says why. */
static void refused(fx *f, const char *member, int64_t snapshot, const char *why)
{
        int starts = f->w->forced_starts;
        size_t n = fake_etcd_count(f->w, NULL);
        assert_int_equal(
            recovery_request(f->db, CLUSTER, member, snapshot, "bob", f->w->now_ms, NULL), 0);
        (void)converge_n(f, 5, NULL);
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
        converge(f);
        /* Quorum is not lost: a recovery would split the cluster. */
        refused(f, "demo-0", 0, "quorum is not lost");
        assert_whole(f);

        fake_lose_data(f->w, "demo-1");
        fake_kill(f->w, "demo-2", true);
        (void)converge_n(f, 20, NULL);
        refused(f, "demo-1", 0, "has no data");
        refused(f, "demo-2", 0, "unreachable");
        refused(f, "demo-9", 0, "not a member");
        refused(f, NULL, 42, "snapshot 42");
        assert_int_equal(audit_count(f, "recovery.refused", "bob"), 5);
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
        converge(f);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_lose_data(f->w, name);
        }
        pass_result res;
        assert_int_equal(converge_n(f, 40, &res), PASS_WAITING);
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
        (void)converge_n(f, 30, NULL);
        assert_int_equal(state_recovery_assessment_get(f->db, CLUSTER, &json, NULL), 0);
        _cleanup_free_ char *cmd =
            xasprintf("gitcd recover default/demo --from-snapshot %lld", (long long)id);
        assert_non_null(strstr(json, cmd));
        assert_int_equal(recovery_request(f->db, CLUSTER, NULL, id, "bob", f->w->now_ms, NULL), 0);
        converge(f);
        assert_restored(f, old_cluster);
}

/* A learner never becomes the cluster: it may lack writes the voters committed. */
static void test_refuses_a_learner(void **state)
{
        fx *f = *state;
        offer(f, NULL);
        converge(f);
        f->w->learner_sync_ms = 1000 * 1000 * 1000; /* the new learner never catches up */
        offer_n(f, 4, NULL);
        for (int i = 0; i < 100 && !fake_etcd_find(f->w, "demo-3"); i++)
                (void)converge_n(f, 1, NULL);
        for (int i = 0; i < 20; i++)
                (void)converge_n(f, 1, NULL);
        assert_true(fake_etcd_find(f->w, "demo-3")->learner);
        fake_kill(f->w, "demo-1", true);
        fake_kill(f->w, "demo-2", true);
        (void)converge_n(f, 20, NULL);
        refused(f, "demo-3", 0, "is a learner");
}

static void test_spec_token_acts_once(void **state)
{
        fx *f = *state;
        lose_quorum(f);
        offer(f, "  recovery:\n    from:\n      member: demo-0\n    token: incident-1\n");
        converge(f);
        assert_whole(f);
        assert_int_equal(f->w->forced_starts, 1);
        assert_int_equal(audit_count(f, "recovery.succeeded", "Alice <alice@example.com>"), 1);
        _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
        assert_string_equal(r->token, "incident-1");
        assert_string_equal(r->commit, COMMIT);

        /* Quorum lost again, same commit: the token was used, nothing happens by itself. */
        fake_lose_data(f->w, "demo-3");
        fake_lose_data(f->w, "demo-4");
        pass_result res;
        assert_int_equal(converge_n(f, 40, &res), PASS_WAITING);
        assert_string_equal(res.reason, "QuorumLost");
        assert_int_equal(f->w->forced_starts, 1);
        state_recovery_list l = {0};
        assert_int_equal(state_recovery_list_for(f->db, CLUSTER, 0, &l), 0);
        assert_int_equal(l.n, 1);
        state_recovery_list_release(&l);
}

/* ---- crash points -------------------------------------------------------- */

static void run_until_killed(fx *f, const char *failpoint)
{
        fx_close(f);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("GITCD_FAILPOINT", failpoint, 1);
                fx_open(f);
                (void)converge_n(f, MAX_PASSES, NULL);
                _exit(0);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status))
                fprintf(stderr, "failpoint %s was not reached\n", failpoint);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
        fx_open(f);
}

static void test_crash_points(void **state)
{
        (void)state;
        static const struct {
                const char *failpoint;
                bool snapshot;
        } points[] = {
            {"recovery.aside.after-target", false},   {"recovery.force.after-target", false},
            {"recovery.forced.after-restart", false}, {"recovery.aside.after-target", true},
            {"recovery.seed.after-restore", true},
        };
        for (size_t i = 0; i < ARRAY_SIZE(points); i++) {
                void *st = NULL;
                setup(&st);
                fx *f = st;
                if (points[i].snapshot) {
                        lose_everything(f);
                        uint64_t old_cluster = f->w->cluster_id;
                        int64_t id = record_good_snapshot(f);
                        assert_int_equal(
                            recovery_request(f->db, CLUSTER, NULL, id, "bob", f->w->now_ms, NULL),
                            0);
                        run_until_killed(f, points[i].failpoint);
                        converge(f);
                        assert_restored(f, old_cluster);
                } else {
                        uint64_t id0 = lose_quorum(f);
                        assert_int_equal(recovery_request(f->db, CLUSTER, "demo-0", 0, "bob",
                                                          f->w->now_ms, NULL),
                                         0);
                        run_until_killed(f, points[i].failpoint);
                        converge(f);
                        assert_whole(f);
                        assert_int_equal(fake_etcd_find(f->w, "demo-0")->id, id0);
                        assert_int_equal(f->w->forced_starts, 1);
                }
                _cleanup_(state_recovery_freep) state_recovery *r = last_recovery(f);
                assert_string_equal(r->result, "succeeded");
                assert_true(r->cleaned_ms > 0);
                teardown(&st);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_status_proposes_the_survivor, setup, teardown),
            cmocka_unit_test_setup_teardown(test_recover_from_member, setup, teardown),
            cmocka_unit_test_setup_teardown(test_data_stays_aside_until_whole, setup, teardown),
            cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
            cmocka_unit_test_setup_teardown(test_refuses_a_learner, setup, teardown),
            cmocka_unit_test_setup_teardown(test_refuses_a_corrupt_snapshot, setup, teardown),
            cmocka_unit_test_setup_teardown(test_recover_from_snapshot, setup, teardown),
            cmocka_unit_test_setup_teardown(test_spec_token_acts_once, setup, teardown),
            cmocka_unit_test(test_crash_points),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * spec.bootstrap.restore through whole reconciler passes on the fake world
 * (tests/fake/fake.h): every member of the static initial cluster is
 * restored from the snapshot through the target and they form a new
 * cluster (bootstrap.mode: learners: the seed alone is restored and the
 * others join it as learners); no member ever starts empty beside restored
 * ones, whatever gitcd is killed at; a
 * snapshot that is missing, damaged, from a newer etcd or larger than the
 * storage is refused with nothing created; a target that cannot restore
 * refuses by name; and gitcd killed around the restore converges with each
 * member restored exactly once and never restored over.
 *
 * With a revision bump (spec.role kubernetes-control-plane, or
 * bumpRevision written) every member is restored with the same bump,
 * decided once and recorded before the first member is restored, also
 * across a crash at any point; and a member the restore is for that holds
 * data gitcd did not restore (from before the restore) is refused a start,
 * with the reason in Degraded and the audit log, until a person moves that
 * data away.
 *
 * The snapshot files are real files checked by the real pipeline (size,
 * SHA-256, etcd's sha256 trailer); etcd's tool is a script standing in for
 * etcdutl that reports the revision the test wrote into the file (the fake
 * target reads it too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <zlib.h>

#include "api/spec.h"
#include "reconciler/reconcile.h"
#include "state/restores.h"
#include "state/snapshots.h"
#include "tests/fake/fixture.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CLUSTER  "default/demo"
#define REVISION 4242

/* A file shaped like an etcd snapshot: data (revision first) and etcd's sha256 trailer. */
static void write_snapshot(const char *path, size_t data_len, bool corrupt)
{
        assert_true(data_len % 512 == 0 && data_len >= 512);
        unsigned char *buf = xcalloc(data_len + 32, 1);
        snprintf((char *)buf, 9, "%08d", REVISION);
        for (size_t i = 8; i < data_len; i++)
                buf[i] = (unsigned char)(i * 7);
        unsigned int len = 0;
        EVP_Digest(buf, data_len, buf + data_len, &len, EVP_sha256(), NULL);
        if (corrupt)
                buf[data_len / 2] ^= 0x55;
        FILE *fp = fopen(path, "we");
        assert_non_null(fp);
        assert_int_equal(fwrite(buf, 1, data_len + 32, fp), data_len + 32);
        fclose(fp);
        free(buf);
}

/* The snapshot file the spec names, <dir>/backups/snap.db (f->data). */
static char *snap_path(const fx *f)
{
        return f->data;
}

static void prepare(fx *f)
{
        _cleanup_free_ char *backups = xasprintf("%s/backups", f->dir);
        assert_int_equal(mkdir_p(backups, 0700), 0);
        f->data = xasprintf("%s/snap.db", backups);
        write_snapshot(snap_path(f), 8192, false);
}

static void release(fx *f)
{
        free(f->data);
}

/* etcd's tool: `snapshot status` reports the revision the test wrote into the file. */
static const fx_config config = {
    .name = "restore",
    .cluster = CLUSTER,
    .etcdutl = "#!/bin/sh\n"
               "if [ \"$1 $2\" = \"snapshot status\" ]; then\n"
               "  rev=$(head -c 8 \"$5\" | sed 's/^0*//')\n"
               "  echo \"{\\\"hash\\\":1,\\\"revision\\\":$rev,\\\"totalKey\\\":3,"
               "\\\"totalSize\\\":$(stat -c %s \"$5\")}\"\n"
               "  exit 0\n"
               "fi\n"
               "echo \"unexpected: $*\" >&2\n"
               "exit 2\n",
    .prepare = prepare,
    .release = release,
};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

static const char *offer_mode = "static"; /* spec.bootstrap.mode of the next offers */
static const char *offer_extra = "";      /* more of spec (role), for the next offers */
static const char *offer_bump = "";       /* more of spec.bootstrap.restore (bumpRevision) */

static void offer_source(fx *f, int replicas, const char *storage, const char *source)
{
        fx_offer(f, NULL,
                 "  replicas: %d\n  version: \"3.5.16\"\n  storage:\n    size: %s\n%s"
                 "  bootstrap:\n    mode: %s\n    restore:\n%s      source:\n%s",
                 replicas, storage, offer_extra, offer_mode, offer_bump, source);
}

static void offer_restore(fx *f, int replicas, const char *storage)
{
        _cleanup_free_ char *source =
            xasprintf("        local:\n          path: %s\n", snap_path(f));
        offer_source(f, replicas, storage, source);
}

static bool learners_mode(void)
{
        return streq(offer_mode, "learners");
}

/*
 * Three voters on the restored data: every member restored once and started
 * together (static), or the seed restored once and the others joined as
 * learners; never a member started empty beside restored ones.
 */
static void assert_restored_cluster(fx *f)
{
        size_t learners = 0;
        assert_int_equal(fake_etcd_count(f->w, &learners), 3);
        assert_int_equal(learners, 0);
        assert_int_equal(fake_procs_running(f->w), 3);
        assert_int_equal(f->w->data_revision, REVISION);
        assert_int_equal(f->w->diverged, 0);
        fake_proc *seed = fake_proc_find(f->w, "demo-0");
        assert_non_null(seed);
        assert_int_equal(seed->restored_revision, REVISION);
        if (learners_mode()) {
                assert_int_equal(f->w->restores, 1);
                assert_int_equal(f->w->adds, 2);
                assert_int_equal(fake_proc_find(f->w, "demo-1")->restored_revision, 0);
        } else {
                assert_int_equal(f->w->restores, 3);
                assert_int_equal(f->w->adds, 0);
                assert_int_equal(fake_proc_find(f->w, "demo-1")->restored_revision, REVISION);
                assert_int_equal(fake_proc_find(f->w, "demo-2")->restored_revision, REVISION);
        }
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->phase, "Running");
        assert_string_equal(sc->cluster_id, "5e57023d1ca7a1c3");
        state_cluster_free(sc);
}

/* Refused: the pass fails with RestoreRefused and the reason; nothing was created. */
static void assert_refused(fx *f, const char *words)
{
        pass_result res;
        assert_int_equal(fx_converge_n(f, 20, &res), PASS_FAILED);
        assert_string_equal(res.reason, "RestoreRefused");
        if (!strstr(res.message, words))
                fprintf(stderr, "message: %s\n", res.message);
        assert_non_null(strstr(res.message, words));
        assert_int_equal(fake_procs_present(f->w), 0);
        assert_int_equal(f->w->restores, 0);
        assert_int_equal(fake_etcd_count(f->w, NULL), 0);
        state_member_list l = {0};
        assert_int_equal(state_member_list_for(f->db, CLUSTER, true, &l), 0);
        assert_int_equal(l.n, 0);
        state_member_list_release(&l);
        assert_int_equal(fx_audit_count(f, "restore.refused"), 1);
        assert_int_equal(fx_audit_count(f, "member.restore"), 0);
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->terminal_reason, "RestoreRefused");
        state_cluster_free(sc);
        /* Terminal until the spec changes: more passes change nothing. */
        assert_int_equal(fx_converge_n(f, 5, &res), PASS_FAILED);
        assert_int_equal(fx_audit_count(f, "restore.refused"), 1);
        assert_int_equal(fake_procs_present(f->w), 0);
}

static void test_restore_three(void **state)
{
        fx *f = *state;
        offer_restore(f, 3, "1Gi");
        fx_converge(f, NULL);
        assert_restored_cluster(f);
        assert_int_equal(fx_audit_count(f, "member.restore"), learners_mode() ? 1 : 3);
        /* The temporary copy is gone. */
        _cleanup_free_ char *work = xasprintf("%s/restore-tmp/default/demo", f->dir);
        assert_false(path_exists(work));

        /* Converged: later passes never restore again, even with the seed's process gone. */
        fake_kill(f->w, "demo-0", false);
        fake_world_advance(f->w, 2000);
        fx_converge(f, NULL);
        assert_int_equal(f->w->restores, learners_mode() ? 1 : 3);
}

/* bootstrap.mode: learners: the seed alone is restored, the others join it. */
static void test_restore_three_learners(void **state)
{
        offer_mode = "learners";
        test_restore_three(state);
        offer_mode = "static";
}

/* A gzip-compressed snapshot (spec.snapshots.compression: gzip) is unpacked, then restored. */
static void test_restore_gzip(void **state)
{
        fx *f = *state;
        _cleanup_free_ char *data = NULL;
        size_t n = 0;
        assert_int_equal(read_file(snap_path(f), 1 << 20, &data, &n), 0);
        _cleanup_free_ char *gz = xasprintf("%s.gz", snap_path(f));
        gzFile out = gzopen(gz, "wb");
        assert_non_null(out);
        assert_int_equal(gzwrite(out, data, (unsigned)n), (int)n);
        assert_int_equal(gzclose(out), Z_OK);
        assert_int_equal(rename(gz, snap_path(f)), 0);
        offer_restore(f, 3, "1Gi");
        fx_converge(f, NULL);
        assert_restored_cluster(f);
}

static void test_missing_snapshot_refused(void **state)
{
        fx *f = *state;
        assert_int_equal(unlink(snap_path(f)), 0);
        offer_restore(f, 3, "1Gi");
        assert_refused(f, "is missing");

        /* Fixed by a person and a new spec: the cluster is created from it. */
        write_snapshot(snap_path(f), 8192, false);
        offer_restore(f, 1, "1Gi");
        fx_converge(f, NULL);
        assert_int_equal(f->w->restores, 1);
        assert_int_equal(f->w->data_revision, REVISION);
}

static void test_corrupt_snapshot_refused(void **state)
{
        fx *f = *state;
        write_snapshot(snap_path(f), 8192, true);
        offer_restore(f, 3, "1Gi");
        assert_refused(f, "is damaged: etcd's sha256 over its 8192 bytes of data does not match");
}

static void test_cut_short_snapshot_refused(void **state)
{
        fx *f = *state;
        assert_int_equal(truncate(snap_path(f), 5000), 0);
        offer_restore(f, 3, "1Gi");
        assert_refused(f, "no sha256 trailer");
}

static void test_too_large_snapshot_refused(void **state)
{
        fx *f = *state;
        write_snapshot(snap_path(f), 16384, false);
        offer_restore(f, 3, "8Ki");
        assert_refused(f, "more than spec.storage.size 8Ki");
}

/* A record of the file says it came from a newer etcd, or has another SHA-256. */
static int64_t record(fx *f, const char *version, const char *sha256, int64_t size)
{
        int64_t id = 0;
        _cleanup_free_ char *destination = xasprintf("local:%s/backups", f->dir);
        assert_int_equal(state_snapshot_begin(f->db, "default/old", "manual", 0, 1000, &id), 0);
        state_snapshot s = {.result = "succeeded",
                            .member = "old-0",
                            .revision = REVISION,
                            .size = size,
                            .db_size = size,
                            .sha256 = (char *)sha256,
                            .compression = "none",
                            .etcd_version = (char *)version,
                            .destination = destination,
                            .key = "snap.db",
                            .location = snap_path(f)};
        assert_int_equal(state_snapshot_finish(f->db, id, &s, 2000), 0);
        return id;
}

static void sha256_of(const char *path, char hex[65], int64_t *ret_size)
{
        _cleanup_free_ char *data = NULL;
        size_t n = 0;
        assert_int_equal(read_file(path, 1 << 20, &data, &n), 0);
        unsigned char md[32];
        EVP_Digest(data, n, md, NULL, EVP_sha256(), NULL);
        for (int i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", md[i]);
        *ret_size = (int64_t)n;
}

/* source.snapshot: a snapshot gitcd recorded, by its id. */
static void test_restore_by_snapshot_id(void **state)
{
        fx *f = *state;
        char hex[65];
        int64_t size = 0;
        sha256_of(snap_path(f), hex, &size);
        int64_t id = record(f, "3.5.16", hex, size);
        _cleanup_free_ char *source = xasprintf("        snapshot: %lld\n", (long long)id);
        offer_source(f, 3, "1Gi", source);
        fx_converge(f, NULL);
        assert_restored_cluster(f);
}

static void test_unknown_snapshot_id_refused(void **state)
{
        fx *f = *state;
        offer_source(f, 3, "1Gi", "        snapshot: 99\n");
        assert_refused(f, "snapshot 99 is missing: gitcd has no record of it");
}

static void test_damaged_recorded_snapshot_refused(void **state)
{
        fx *f = *state;
        char hex[65];
        int64_t size = 0;
        sha256_of(snap_path(f), hex, &size);
        int64_t id = record(f, "3.5.16", hex, size);
        write_snapshot(snap_path(f), 8192, true);
        _cleanup_free_ char *source = xasprintf("        snapshot: %lld\n", (long long)id);
        offer_source(f, 3, "1Gi", source);
        assert_refused(f, "is damaged: the SHA-256 of");
}

static void test_newer_etcd_refused(void **state)
{
        fx *f = *state;
        struct stat st;
        assert_int_equal(stat(snap_path(f), &st), 0);
        unsigned char md[32];
        char hex[65];
        _cleanup_free_ char *data = NULL;
        size_t n = 0;
        assert_int_equal(read_file(snap_path(f), 1 << 20, &data, &n), 0);
        EVP_Digest(data, (size_t)st.st_size, md, NULL, EVP_sha256(), NULL);
        for (int i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", md[i]);
        record(f, "3.6.0", hex, st.st_size);
        offer_restore(f, 3, "1Gi");
        assert_refused(f, "was taken from etcd 3.6.0, newer than spec.version 3.5.16");
}

static void test_recorded_sha256_checked(void **state)
{
        fx *f = *state;
        struct stat st;
        assert_int_equal(stat(snap_path(f), &st), 0);
        record(f, "3.5.16", "0000000000000000000000000000000000000000000000000000000000000000",
               st.st_size);
        offer_restore(f, 3, "1Gi");
        assert_refused(f, "is damaged: its SHA-256 is");
}

static void test_target_without_restore_refused(void **state)
{
        fx *f = *state;
        static target_ops no_restore; /* the fake's table without restore_member */
        no_restore = *f->t->ops;
        no_restore.restore_member = NULL;
        no_restore.name = "norestore";
        f->t->ops = &no_restore;
        offer_restore(f, 3, "1Gi");
        assert_refused(f, "the norestore target cannot restore a snapshot yet");
}

/* A target whose Memory medium dies with the member: nothing to restore into, refused. */
static void test_memory_medium_refused(void **state)
{
        fx *f = *state;
        static target_ops memory; /* the fake's table, with the capability */
        memory = *f->t->ops;
        memory.caps |= TARGET_CAP_MEMORY_MEDIUM;
        memory.name = "memorytarget";
        f->t->ops = &memory;
        _cleanup_free_ char *source =
            xasprintf("        local:\n          path: %s\n", snap_path(f));
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  storage:\n    size: 1Gi\n"
                 "    medium: Memory\n"
                 "  bootstrap:\n    mode: %s\n    restore:\n      source:\n%s",
                 offer_mode, source);
        assert_refused(f, "spec.storage.medium Memory keeps a member's data in memory on the "
                          "memorytarget target");
}

/* Every member restored got the same bump, the one recorded; 1: the members checked. */
static int assert_same_bump(fx *f, int64_t want)
{
        state_restore *rec = NULL;
        assert_int_equal(state_restore_latest(f->db, CLUSTER, &rec), 0);
        assert_string_equal(rec->origin, "bootstrap");
        assert_int_equal(rec->snapshot_revision, REVISION);
        assert_int_equal(rec->revision, REVISION + rec->bump);
        if (want >= 0)
                assert_int_equal(rec->bump, want);
        int checked = 0;
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_proc *p = fake_proc_find(f->w, name);
                if (p && p->restored_revision) {
                        assert_int_equal(p->restored_bump, rec->bump);
                        checked++;
                }
        }
        state_restore_free(rec);
        return checked;
}

static void crash_at(const char *const *points, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                void *st = NULL;
                setup(&st);
                fx *f = st;
                offer_restore(f, 3, "1Gi");
                fx_run_until_killed(f, points[i]);
                fx_converge(f, NULL);
                assert_restored_cluster(f);
                fx_assert_no_pending_ops(f);
                if (*offer_extra)
                        assert_int_equal(assert_same_bump(f, 1000000000), learners_mode() ? 1 : 3);
                fx_teardown(&st);
        }
}

static void test_crash_points(void **state)
{
        (void)state;
        static const char *const points[] = {
            "bootstrap.after-records",       "bootstrap.after-journal",
            "restore.before-target",         "restore.after-target",
            "bootstrap.after-first-restore", "bootstrap.after-first-start"};
        crash_at(points, sizeof(points) / sizeof(points[0]));
}

/* The same crash points with a revision bump: one bump for every member, whatever is killed. */
static void test_crash_points_bumped(void **state)
{
        offer_extra = "  role: kubernetes-control-plane\n";
        test_crash_points(state);
        offer_extra = "";
}

/*
 * spec.role kubernetes-control-plane: the restore bumps by default, sized
 * auto (a file gitcd did not take: etcd's recommended 1,000,000,000); a
 * written bumpRevision is used as written; both recorded and audited once.
 */
static void test_restore_bumps_revision(void **state)
{
        fx *f = *state;
        offer_extra = "  role: kubernetes-control-plane\n";
        offer_restore(f, 3, "1Gi");
        fx_converge(f, NULL);
        offer_extra = "";
        assert_restored_cluster(f);
        assert_int_equal(assert_same_bump(f, 1000000000), 3);
        assert_int_equal(fx_audit_count(f, "restore.recorded"), 1);
        state_restore *rec = NULL;
        assert_int_equal(state_restore_latest(f->db, CLUSTER, &rec), 0);
        assert_string_equal(rec->members, "demo-0,demo-1,demo-2");
        assert_non_null(strstr(rec->sizing, "the default of spec.role kubernetes-control-plane"));
        assert_non_null(strstr(rec->sizing, "etcd's recommended bump"));
        state_restore_free(rec);
}

static void test_restore_bump_written(void **state)
{
        fx *f = *state;
        offer_bump = "      bumpRevision: 5000\n";
        offer_restore(f, 3, "1Gi");
        fx_converge(f, NULL);
        offer_bump = "";
        assert_restored_cluster(f);
        assert_int_equal(assert_same_bump(f, 5000), 3);
        state_restore *rec = NULL;
        assert_int_equal(state_restore_latest(f->db, CLUSTER, &rec), 0);
        assert_non_null(strstr(rec->sizing, "spec.bootstrap.restore.bumpRevision"));
        state_restore_free(rec);
}

/* A general cluster restores without a bump (etcd's default), recorded as such. */
static void test_restore_without_bump(void **state)
{
        fx *f = *state;
        offer_restore(f, 3, "1Gi");
        fx_converge(f, NULL);
        assert_restored_cluster(f);
        assert_int_equal(assert_same_bump(f, 0), 3);
}

static const char *condition_reason(fx *f, const char *type, const char **ret_status)
{
        static char reason[64];
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        reason[0] = '\0';
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, type)) {
                        snprintf(reason, sizeof(reason), "%s", sc->conditions[i].reason);
                        *ret_status = streq(sc->conditions[i].status, "True") ? "True" : "False";
                }
        state_cluster_free(sc);
        return reason;
}

/*
 * A member the restore is for comes back holding data gitcd did not put
 * there (a machine back with its old data folder, a folder put back by
 * hand) after gitcd was killed between the records and the restores: its
 * revision (5000: past the snapshot's 4242, so only the bump tells it from
 * the restored data) is below the restore's, so it is refused a start,
 * said in Degraded (DataBehindRestore) and the audit log once, never
 * restored over and never started; the others form the cluster. The data
 * moved away by a person, it is restored and started like the others.
 */
static void test_member_behind_restore_refused(void **state)
{
        fx *f = *state;
        offer_extra = "  role: kubernetes-control-plane\n";
        offer_restore(f, 3, "1Gi");
        offer_extra = "";
        fx_run_until_killed(f, "bootstrap.after-records");
        fake_proc *old = fake_proc_find(f->w, "demo-2");
        assert_non_null(old);
        old->has_data = true;
        old->foreign_revision = 5000;

        pass_result res;
        assert_int_equal(fx_converge_n(f, 8, &res), PASS_BLOCKED);
        assert_non_null(strstr(res.message, "member demo-2 holds data at revision 5000, older "
                                            "than the restore it was made for"));
        old = fake_proc_find(f->w, "demo-2");
        assert_false(old->running);
        assert_int_equal(old->starts, 0);
        assert_int_equal(old->restored_revision, 0);
        assert_true(old->revision_reads >= 1);
        assert_int_equal(fake_proc_find(f->w, "demo-0")->restored_bump, 1000000000);
        const char *status = NULL;
        assert_string_equal(condition_reason(f, "Degraded", &status), "DataBehindRestore");
        assert_string_equal(status, "True");
        assert_int_equal(fx_audit_count(f, "member.refused"), 1);
        /* still refused after the pause: said once */
        assert_int_equal(fx_converge_n(f, 3, &res), PASS_BLOCKED);
        assert_int_equal(fx_audit_count(f, "member.refused"), 1);
        assert_int_equal(fake_proc_find(f->w, "demo-2")->starts, 0);

        /* moved away by a person: restored from the snapshot like the others */
        old = fake_proc_find(f->w, "demo-2");
        old->has_data = false;
        old->foreign_revision = 0;
        fx_converge(f, NULL);
        assert_restored_cluster(f);
        assert_int_equal(assert_same_bump(f, 1000000000), 3);
        assert_string_equal(condition_reason(f, "Degraded", &status), "QuorumHealthy");
        assert_string_equal(status, "False");
}

/* The restored data itself (after a crash between a member's restore and its start) starts. */
static void test_restored_member_starts_after_crash(void **state)
{
        fx *f = *state;
        offer_extra = "  role: kubernetes-control-plane\n";
        offer_restore(f, 3, "1Gi");
        offer_extra = "";
        fx_run_until_killed(f, "bootstrap.after-first-restore");
        fx_converge(f, NULL);
        assert_restored_cluster(f);
        assert_true(fake_proc_find(f->w, "demo-0")->revision_reads >= 1);
        assert_int_equal(fx_audit_count(f, "member.refused"), 0);
}

static void test_crash_points_learners(void **state)
{
        (void)state;
        static const char *const points[] = {"start-seed.after-record", "restore.before-target",
                                             "restore.after-target", "start-seed.after-start"};
        offer_mode = "learners";
        crash_at(points, sizeof(points) / sizeof(points[0]));
        offer_mode = "static";
}

/*
 * gitcd stopped after the members' records were written; the snapshot is gone when
 * it comes back: refused (terminal, RestoreRefused), no member ever started empty.
 */
static void test_snapshot_gone_after_crash_refused(void **state)
{
        fx *f = *state;
        offer_restore(f, 3, "1Gi");
        fx_run_until_killed(f, "bootstrap.after-records");
        assert_int_equal(unlink(snap_path(f)), 0);
        pass_result res;
        assert_int_equal(fx_converge_n(f, 20, &res), PASS_FAILED);
        assert_string_equal(res.reason, "RestoreRefused");
        assert_int_equal(f->w->restores, 0);
        assert_int_equal(fake_procs_running(f->w), 0);
        assert_int_equal(fake_etcd_count(f->w, NULL), 0);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_proc *p = fake_proc_find(f->w, name);
                assert_true(!p || (!p->has_data && p->starts == 0));
        }
        assert_int_equal(fx_audit_count(f, "restore.refused"), 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_restore_three, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_restore_three_learners, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_restore_gzip, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_missing_snapshot_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_corrupt_snapshot_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_cut_short_snapshot_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_too_large_snapshot_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_newer_etcd_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_recorded_sha256_checked, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_target_without_restore_refused, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_memory_medium_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_restore_by_snapshot_id, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_unknown_snapshot_id_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_damaged_recorded_snapshot_refused, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_snapshot_gone_after_crash_refused, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_restore_bumps_revision, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_restore_bump_written, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_restore_without_bump, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_member_behind_restore_refused, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_restored_member_starts_after_crash, setup,
                                            fx_teardown),
            cmocka_unit_test(test_crash_points),
            cmocka_unit_test(test_crash_points_bumped),
            cmocka_unit_test(test_crash_points_learners),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

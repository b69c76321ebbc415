/*
 * Disaster recovery on the hosts target, end to end: three real sshd
 * "machines" on 127.0.0.2-4 (tests/harness/sshd.h), real etcd 3.5.16, the
 * real `gitcd` binary with the lab's SSH flags. The host agent
 * (tests/harness/hostagent.h) is the one simulated part: it plays kubelet
 * for each machine's static Pod folder, because no kubelet runs here (it
 * restarts a killed etcd as kubelet does; an etcd whose data directory was
 * deleted then refuses to start, "already bootstrapped", and stays down).
 *
 *  1. three members under a writer (every acknowledged put and its
 *     revision recorded), a snapshot taken to a local folder on the way
 *     (`gitcd snapshot save --target hosts`);
 *  2. two members killed on their machines and their data directories
 *     deleted for good, one of the two machines gone for good as well
 *     (its sshd stopped): gitcd changes nothing while that machine is
 *     listed and does not answer; once spec.hosts lists a spare machine
 *     in its place, gitcd only waits (QuorumLost) and `gitcd status`
 *     proposes the survivor; a commit of spec.recovery from the survivor,
 *     applied and killed right after the survivor's forced start: the
 *     lost member's machine that answers is free, what its data directory
 *     held set aside beside it (<dataDir>.removed-<member>-<ms>), the gone
 *     machine untouched; the next `gitcd apply` resumes it: every
 *     acknowledged write the survivor held is there, three healthy voters
 *     on the survivor's machine, the other lost member's and the spare,
 *     the survivor kept its member ID and runs without
 *     --force-new-cluster, and what was set aside is deleted once the
 *     cluster is whole;
 *  3. every member's data lost: `gitcd recover --from-snapshot` without
 *     --target (the target recorded for the cluster, hosts), killed just
 *     before the restore; a member/ folder without a write-ahead log (what
 *     an etcd that was starting leaves) appears on the seed's machine, and
 *     the next `gitcd apply` still restores the snapshot there: every
 *     write up to the snapshot's revision is there, three healthy voters
 *     of a new cluster ID, nothing set aside left on the machines and
 *     nothing of the restore on gitcd's host.
 */
#include <dirent.h>
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
#include "tests/e2e/hosts-lab.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MACHINES 3 /* the cluster's */
#define LAB      4 /* and a spare machine */
#define NAME     "demo"
#define VERSION  "3.5.16"
#define MAX_KEYS 100000

static hosts_lab *L;
/* The lab machines spec.hosts lists, in order. */
static size_t on[MACHINES] = {0, 1, 2};

/* Progress on stderr, with the seconds since the test started (never asserted). */
static void stage(const char *what)
{
        static int64_t start;
        if (!start)
                start = now_mono_ms();
        fprintf(stderr, "[%5.1fs] %s\n", (double)(now_mono_ms() - start) / 1000.0, what);
}

/*
 * gitcd <args...> <the lab's SSH flags>, killed at failpoint when not NULL.
 * Without "--target hosts" in args, the command finds the target recorded
 * for the cluster.
 */
static int hosts_run(e2e *e, const char *failpoint, char **ret_out, char **ret_err, ...)
{
        const char *const flags[] = {"--hosts-ssh-key",   L->ssh->client_key, "--hosts-known-hosts",
                                     L->ssh->known_hosts, "--hosts-ports",    L->ports};
        const char *args[32];
        size_t n = 0;
        va_list ap;
        va_start(ap, ret_err);
        for (const char *a; (a = va_arg(ap, const char *));) {
                assert_true(n + ARRAY_SIZE(flags) + 3 < ARRAY_SIZE(args));
                args[n++] = a;
        }
        va_end(ap);
        for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
                args[n++] = flags[i];
        /* apply and plan with the lab's policy (its folders are under the lab's) */
        if (n > 0 && (streq(args[0], "apply") || streq(args[0], "plan"))) {
                args[n++] = "--config";
                args[n++] = L->config;
        }
        args[n] = NULL;
        return e2e_runv_failpoint(e, failpoint, ret_out, ret_err, args);
}

static uint64_t member_id(e2e *e, const char *member)
{
        etcd_members *l = e2e_members(e, NAME);
        uint64_t id = 0;
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->members[i].name, member))
                        id = l->members[i].id;
        etcd_members_free(l);
        return id;
}

/* The lab machine a member's client URL points at. */
static size_t machine_of(e2e *e, const char *member)
{
        json_t *st = e2e_status(e, NAME);
        size_t i, found = (size_t)-1;
        json_t *m;
        json_array_foreach(json_object_get(st, "members"), i, m)
        {
                if (!streq_ptr(json_string_value(json_object_get(m, "name")), member))
                        continue;
                const char *u = json_string_value(json_object_get(m, "client_url"));
                for (size_t j = 0; u && j < LAB; j++) {
                        _cleanup_free_ char *pre =
                            xasprintf("http://%s:", L->ssh->machines[j].address);
                        if (strneq(u, pre, strlen(pre)))
                                found = j;
                }
        }
        json_decref(st);
        if (found == (size_t)-1)
                fail_msg("member %s is on no machine", member);
        return found;
}

/* The etcd process whose arguments contain word (0 when none). */
static pid_t process_with(const char *word)
{
        DIR *d = opendir("/proc");
        pid_t found = 0;
        for (struct dirent *de; d && !found && (de = readdir(d));) {
                char *end = NULL;
                long pid = strtol(de->d_name, &end, 10);
                if (pid <= 0 || *end)
                        continue;
                _cleanup_free_ char *p = xasprintf("/proc/%ld/cmdline", pid);
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (read_file(p, 1 << 16, &data, &len) < 0)
                        continue;
                for (size_t i = 0; i < len; i += strlen(data + i) + 1)
                        if (strstr(data + i, word))
                                found = (pid_t)pid;
        }
        if (d)
                closedir(d);
        return found;
}

static pid_t etcd_on(size_t machine)
{
        _cleanup_free_ char *data = hosts_lab_data_dir(L, machine, NAME);
        _cleanup_free_ char *flag = xasprintf("--data-dir=%s", data);
        return process_with(flag);
}

/* The machine's member is gone for good: its etcd killed, its data directory deleted. */
static void destroy(size_t machine)
{
        pid_t pid = etcd_on(machine);
        assert_true(pid > 0);
        kill(pid, SIGKILL);
        for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
                usleep(20 * 1000);
        _cleanup_free_ char *data = hosts_lab_data_dir(L, machine, NAME);
        assert_int_equal(rm_rf(data), 0);
}

/* How many folders beside the data directory on machine i were set aside ("<dir>.removed-*"). */
static int set_aside_on(size_t machine)
{
        _cleanup_free_ char *parent = hosts_lab_path(L, machine, "/var/lib/etcd");
        DIR *d = opendir(parent);
        int n = 0;
        for (struct dirent *de; d && (de = readdir(d));)
                if (strneq(de->d_name, NAME ".removed-", strlen(NAME ".removed-")))
                        n++;
        if (d)
                closedir(d);
        return n;
}

/* The text of machine i's static Pod manifest for the cluster, NULL when there is none. */
static char *manifest_of(size_t machine)
{
        _cleanup_free_ char *dir = hosts_lab_manifests(L, machine);
        _cleanup_free_ char *path = xasprintf("%s/etcd-default-" NAME ".yaml", dir);
        char *text = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &text, &len) < 0)
                return NULL;
        return text;
}

/* The member the data identity marker on machine i names, NULL when there is no marker. */
static char *marker_of(size_t machine)
{
        _cleanup_free_ char *data = hosts_lab_data_dir(L, machine, NAME);
        _cleanup_free_ char *path = xasprintf("%s/gitcd-member", data);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (read_file(path, 4096, &text, &len) < 0)
                return NULL;
        const char *p = strstr(text, "member=");
        if (!p)
                return NULL;
        p += strlen("member=");
        return xstrndup(p, strcspn(p, "\n"));
}

/*
 * Every machine holds exactly one member etcd lists (its marker names it),
 * and nothing was left set aside beside any data directory.
 */
static void assert_machines_hold_members(e2e *e)
{
        for (size_t j = 0; j < MACHINES; j++) {
                size_t i = on[j];
                _cleanup_free_ char *holder = marker_of(i);
                if (!holder)
                        fail_msg("machine %zu holds no member", i);
                if (!member_id(e, holder))
                        fail_msg("machine %zu holds %s, which etcd does not list", i, holder);
                if (set_aside_on(i) != 0)
                        fail_msg("machine %zu still has data set aside", i);
        }
}

static json_t *last_recovery(e2e *e)
{
        json_t *st = e2e_status(e, NAME);
        json_t *r = json_incref(json_array_get(json_object_get(st, "recoveries"), 0));
        json_decref(st);
        assert_non_null(r);
        return r;
}

static bool cmdline_has(pid_t pid, const char *word)
{
        _cleanup_free_ char *p = xasprintf("/proc/%ld/cmdline", (long)pid);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(p, 1 << 16, &data, &len) < 0)
                return false;
        bool found = false;
        for (size_t i = 0; i < len; i += strlen(data + i) + 1)
                found = found || strstr(data + i, word);
        return found;
}

/* A snapshot saved into a local folder: its id, and its revision in *ret_rev. */
static int64_t take_snapshot(e2e *e, int64_t *ret_rev)
{
        _cleanup_free_ char *backups = path_join(e->root, "backups");
        char *out = NULL, *err = NULL;
        int k = hosts_run(e, NULL, &out, &err, "snapshot", "save", "default/" NAME, "--to", backups,
                          NULL);
        if (k != 0)
                fail_msg("snapshot save exited %d: %s%s", k, out, err);
        free(out), free(err), out = err = NULL;
        assert_int_equal(e2e_run(e, &out, "snapshot", "list", "default/" NAME, "-o", "json", NULL),
                         0);
        json_t *snap = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        free(out), out = NULL;
        assert_non_null(snap);
        int64_t snap_id = json_integer_value(json_object_get(snap, "id"));
        int64_t snap_rev = json_integer_value(json_object_get(snap, "revision"));
        json_decref(snap);
        assert_true(snap_id > 0 && snap_rev > 0);
        *ret_rev = snap_rev;
        return snap_id;
}

/* Quorum lost: status proposes the recovery from demo-0, in JSON and in text. */
static void assert_recovery_proposed(e2e *e)
{
        char *out = NULL;
        json_t *st = e2e_status(e, NAME);
        assert_string_equal(json_string_value(json_object_get(st, "phase")), "QuorumLost");
        json_t *proposal = json_object_get(json_object_get(st, "quorum_loss"), "proposal");
        assert_non_null(proposal);
        assert_string_equal(json_string_value(json_object_get(proposal, "command")),
                            "gitcd recover default/" NAME " --from-member demo-0");
        json_decref(st);
        assert_int_equal(e2e_run(e, &out, "status", "default/" NAME, NULL), 0);
        if (!strstr(out, "Run: gitcd recover default/" NAME " --from-member demo-0"))
                fail_msg("gitcd status proposes no recovery:\n%s", out);
        free(out), out = NULL;
}

/* A --target that is not the cluster's is refused, and nothing is recorded. */
static void refuse_wrong_target(e2e *e)
{
        char *out = NULL, *err = NULL;
        const char *const wrong[] = {
            "recover", "default/" NAME, "--from-member", "demo-0", "--target", "local", NULL};
        assert_int_not_equal(e2e_runv(e, &out, &err, wrong), 0);
        if (!strstr(err, "runs on the hosts target"))
                fail_msg("gitcd recover --target local: no word of the cluster's target:\n%s%s",
                         out, err);
        free(out), free(err), out = err = NULL;
        json_t *st = e2e_status(e, NAME);
        assert_int_equal(json_array_size(json_object_get(st, "recoveries")), 0);
        json_decref(st);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.requested"), 0);
}

/*
 * After the kill: only demo-0's machine (m0) runs, with --force-new-cluster;
 * the lost member's machine holds its data set aside; the gone one is as it was.
 */
static void assert_forced_start_only(size_t m0, size_t lost, size_t gone)
{
        for (size_t j = 0; j < MACHINES; j++) {
                size_t i = on[j];
                _cleanup_free_ char *pod = manifest_of(i);
                if (i == m0) {
                        assert_int_equal(set_aside_on(i), 0);
                        assert_non_null(pod);
                        assert_non_null(strstr(pod, "--force-new-cluster"));
                        continue;
                }
                assert_int_equal(set_aside_on(i), i == lost ? 1 : 0);
                assert_null(pod);
                _cleanup_free_ char *holder = marker_of(i);
                assert_null(holder);
        }
        _cleanup_free_ char *gone_pod = manifest_of(gone);
        assert_non_null(gone_pod); /* what gitcd could not reach, it did not change */
}

/*
 * Every machine's data set aside, one machine holding the seed; there, a
 * member/ folder an etcd left without a write-ahead log.
 */
static void seed_leftover(void)
{
        size_t seed = LAB;
        for (size_t j = 0; j < MACHINES; j++) {
                size_t i = on[j];
                _cleanup_free_ char *holder = marker_of(i);
                assert_int_equal(set_aside_on(i), 1);
                if (holder) {
                        assert_int_equal(seed, LAB); /* one machine holds the seed */
                        seed = i;
                }
        }
        assert_true(seed < LAB);
        _cleanup_free_ char *seed_data = hosts_lab_data_dir(L, seed, NAME);
        _cleanup_free_ char *leftover = xasprintf("%s/member/snap", seed_data);
        assert_int_equal(mkdir_p(leftover, 0700), 0);
        _cleanup_free_ char *leftover_db = xasprintf("%s/db", leftover);
        assert_int_equal(write_file_atomic(leftover_db, "", 0, 0600), 0);
}

/* Nothing of the restore is left on gitcd's host. */
static void assert_no_restore_left(e2e *e)
{
        _cleanup_free_ char *local = xasprintf("%s/hosts/default/" NAME, e->state_dir);
        DIR *d = opendir(local);
        for (struct dirent *de; d && (de = readdir(d));)
                assert_null(strstr(de->d_name, "restore-"));
        if (d)
                closedir(d);
}

/* The members beside demo-0's (on m0) lose their data: on *lost, and on *gone. */
static void lose_two_members(size_t m0, size_t *lost, size_t *gone)
{
        for (size_t j = 0; j < MACHINES; j++) {
                if (on[j] == m0)
                        continue;
                destroy(on[j]);
                if (*lost == MACHINES)
                        *lost = on[j];
                else
                        *gone = on[j];
        }
}

/*
 * Recovered from demo-0 (id0 on m0): the same cluster, demo-0 without
 * --force-new-cluster, at least what the snapshot held, no acknowledged
 * write lost before the loss; what was set aside deleted.
 */
static void assert_recovered_from_member(e2e *e, harness_writer *w, uint64_t old_cluster,
                                         uint64_t id0, size_t m0, int64_t snap_rev,
                                         int acked_at_loss)
{
        assert_true(e2e_wait_ready(e, NAME, 3, 30));
        assert_int_equal(e2e_assert_voters(e, NAME, 3), old_cluster);
        assert_int_equal(member_id(e, "demo-0"), id0);
        assert_int_equal(machine_of(e, "demo-0"), m0);
        _cleanup_free_ char *pod0 = manifest_of(m0);
        assert_non_null(pod0);
        assert_null(strstr(pod0, "--force-new-cluster"));
        assert_false(cmdline_has(etcd_on(m0), "--force-new-cluster"));
        json_t *r = last_recovery(e);
        assert_string_equal(json_string_value(json_object_get(r, "result")), "succeeded");
        int64_t rev = json_integer_value(json_object_get(r, "revision"));
        json_decref(r);
        /* The survivor held at least what the snapshot held, before the loss. */
        assert_true(rev >= snap_rev);
        int kept = e2e_writer_kept(w, e, NAME, rev);
        assert_true(kept >= 50 && kept <= acked_at_loss);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.succeeded"), 1);
        /* The cluster is whole: what was set aside is deleted, every machine holds a member. */
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.cleaned"), 1);
        assert_machines_hold_members(e);
}

/* Recovered from the snapshot (snap_rev): a new cluster ID, the snapshot's writes kept. */
static void assert_recovered_from_snapshot(e2e *e, harness_writer *w, uint64_t old_cluster,
                                           int64_t snap_rev)
{
        assert_true(e2e_wait_ready(e, NAME, 3, 30));
        uint64_t new_cluster = e2e_assert_voters(e, NAME, 3);
        assert_true(new_cluster != old_cluster);
        json_t *r = last_recovery(e);
        assert_string_equal(json_string_value(json_object_get(r, "result")), "succeeded");
        assert_int_equal(json_integer_value(json_object_get(r, "revision")), snap_rev);
        json_decref(r);
        int kept = e2e_writer_kept(w, e, NAME, snap_rev);
        assert_true(kept >= 50);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.succeeded"), 2);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.restored"), 1);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.cleaned"), 2);
        assert_machines_hold_members(e);
}

static void test_recovery(void **unused)
{
        (void)unused;
        stage("bootstrap 3");
        e2e *e = e2e_new();
        hosts_lab_write_cluster(L, e, NAME, VERSION, 3, 0, MACHINES);
        hosts_lab_apply_ok(L, e, "90s");
        uint64_t old_cluster = e2e_assert_voters(e, NAME, 3);
        size_t m0 = machine_of(e, "demo-0");
        uint64_t id0 = member_id(e, "demo-0");

        /* 1. A writer; a snapshot on the way. */
        _cleanup_free_ char *eps = e2e_endpoints(e, NAME);
        harness_writer *w = harness_writer_start(&(harness_writer_opts){
            .endpoints = eps, .max = MAX_KEYS, .interval_ms = 5, .call_timeout_ms = 2000});
        harness_writer_wait(w, 50);
        stage("snapshot");
        int64_t snap_rev = 0, snap_id = take_snapshot(e, &snap_rev);
        char *out = NULL, *err = NULL;
        int k;
        harness_writer_wait(w, w->acked + 50);

        /*
         * 2. Two members' data deleted for good while the writer writes; one
         * of their machines is gone as well.
         */
        stage("two members lost, one machine gone");
        size_t lost = MACHINES, gone = MACHINES;
        lose_two_members(m0, &lost, &gone);
        assert_int_equal(sshd_machine_stop(L->ssh, gone), 0);
        int acked_at_loss = w->acked;
        /* A listed machine that does not answer is never guessed about: nothing changes. */
        assert_int_not_equal(hosts_run(e, NULL, &out, &err, "apply", "--target", "hosts",
                                       "--source", e->source, "--timeout", "4s", NULL),
                             0);
        if (!strstr(err, L->ssh->machines[gone].address))
                fail_msg("gitcd apply names no unreachable machine:\n%s%s", out, err);
        free(out), free(err), out = err = NULL;
        /* The machine is replaced in spec.hosts by the spare (a commit a person reviews). */
        for (size_t j = 0; j < MACHINES; j++)
                if (on[j] == gone)
                        on[j] = MACHINES; /* the spare, LAB - 1 */
        hosts_lab_write_cluster_on(L, e, NAME, VERSION, 3, on, MACHINES, NULL);
        /* gitcd does nothing by itself: an apply only waits, and says what it knows. */
        assert_int_not_equal(hosts_run(e, NULL, &out, &err, "apply", "--target", "hosts",
                                       "--source", e->source, "--timeout", "8s", NULL),
                             0);
        free(out), free(err), out = err = NULL;
        assert_recovery_proposed(e);

        /* A --target that is not the cluster's is refused, and nothing is recorded. */
        refuse_wrong_target(e);

        /*
         * The recovery asked by a commit (spec.recovery), applied and killed
         * once demo-0 was started alone: the lost member's machine that
         * answers is free, what its data directory held set aside beside
         * it, and demo-0's static Pod carries --force-new-cluster for this
         * one start. The gone machine is not listed any more: nothing is
         * asked of it.
         */
        stage("spec.recovery from demo-0, killed after its forced start");
        hosts_lab_write_cluster_on(L, e, NAME, VERSION, 3, on, MACHINES,
                                   "  recovery:\n    from: {member: demo-0}\n"
                                   "    token: incident-1\n");
        k = hosts_run(e, "recovery.force.after-target", &out, &err, "apply", "--target", "hosts",
                      "--source", e->source, "--timeout", "120s", NULL);
        if (k != 128 + SIGKILL)
                fail_msg("gitcd apply was not killed after the forced start (%d):\n%s\n%s", k, out,
                         err);
        free(out), free(err), out = err = NULL;
        assert_forced_start_only(m0, lost, gone);
        /* The next gitcd resumes it where it stopped, and grows the cluster back. */
        stage("resumed by apply");
        k = hosts_run(e, NULL, &out, &err, "apply", "--target", "hosts", "--source", e->source,
                      "--timeout", "120s", NULL);
        if (k != 0)
                fail_msg("gitcd apply after the killed recovery exited %d:\n%s\n%s", k, out, err);
        free(out), free(err), out = err = NULL;
        stage("recovered");
        harness_writer_stop(w);
        assert_recovered_from_member(e, w, old_cluster, id0, m0, snap_rev, acked_at_loss);

        /* 3. Every member's data lost: the snapshot becomes the seed of a new cluster ID. */
        stage("every member lost");
        for (size_t j = 0; j < MACHINES; j++)
                destroy(on[j]);
        _cleanup_free_ char *id = xasprintf("%lld", (long long)snap_id);
        /*
         * No --target: gitcd recover drives the target recorded for the
         * cluster, as status proposes it. Killed just before the snapshot
         * is restored onto the new seed's machine, where an etcd that was
         * starting when its static Pod was removed left a member/ folder
         * without a write-ahead log (etcd creates member/snap/db before it
         * finds it cannot join): that is no data, and the seed is still
         * restored, never started empty.
         */
        stage("recover from the snapshot, killed before the restore");
        k = hosts_run(e, "recovery.seed.before-restore", &out, &err, "recover", "default/" NAME,
                      "--from-snapshot", id, "--timeout", "120s", NULL);
        if (k != 128 + SIGKILL)
                fail_msg("gitcd recover was not killed before the restore (%d):\n%s\n%s", k, out,
                         err);
        free(out), free(err), out = err = NULL;
        seed_leftover();
        stage("resumed by apply");
        k = hosts_run(e, NULL, &out, &err, "apply", "--target", "hosts", "--source", e->source,
                      "--timeout", "120s", NULL);
        if (k != 0)
                fail_msg("gitcd apply after the killed recovery exited %d:\n%s\n%s", k, out, err);
        free(out), free(err), out = err = NULL;
        stage("recovered");
        assert_recovered_from_snapshot(e, w, old_cluster, snap_rev);
        /* Nothing of the restore is left on gitcd's host. */
        assert_no_restore_left(e);

        harness_writer_free(w);
        e2e_free(e);
        stage("done");
}

static int setup(void **state)
{
        (void)state;
        L = hosts_lab_start(LAB, VERSION);
        return L ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        hosts_lab_free(L);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_recovery),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

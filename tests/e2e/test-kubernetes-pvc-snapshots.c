/*
 * Snapshots into a PersistentVolumeClaim on the Kubernetes target, against
 * the real kube-apiserver and the node simulator (tests/e2e/kube-lab.h,
 * which maps a claim to a folder); skipped (77) without them or without
 * root. The operator's claim "backups" exists before the cluster; a file of
 * theirs is in its folder. A 1-member cluster whose spec.snapshots.destination
 * is pvc {claimName: backups, subPath: etcd/snaps} with retention count 1 is
 * applied and filled with keys, then:
 *   - `gitcd snapshot save` killed while the snapshot's bytes are on their way
 *     to the writer Pod: the writer Pod and its Secret are left, and nothing
 *     in the claim's folder looks like a snapshot (the writer removes the
 *     temporary of a transfer cut short);
 *   - the next `gitcd snapshot save` deletes the leftover writer, stores the
 *     snapshot at <subPath>/<namespace>/<name>/... in the claim's folder with
 *     the recorded SHA-256, location pvc://backups/etcd/snaps/..., and
 *     leaves no writer Pod or Secret behind;
 *   - a third one: retention by count deletes the second's file (a recorded
 *     key) and nothing else: the operator's file stays;
 *   - a second cluster whose bootstrap.restore.source is that file in the
 *     claim is created holding every key (fetched through a writer Pod);
 *   - `gitcd snapshot restore ID --into` of a record in a claim, without a
 *     usable Kubernetes configuration, is refused and names the flags to add;
 *   - `gitcd run` records the snapshot the killed save left running as
 *     failed, takes its first scheduled snapshot into the claim and proves
 *     it restores (a restore drill, verify: every): fetched back through a
 *     writer Pod, restored on gitcd's host, verified by HashKV against the
 *     member, no writer left.
 * Then, with that scheduled snapshot (test_restore_from_claim and
 * test_bootstrap_from_claim, reusing the lab, the state and the keys):
 *   - `gitcd snapshot restore ID --into DIR --print-spec` with the target's
 *     flags fetches it through a writer Pod: etcd started on DIR serves every
 *     key, the spec printed names the file in the claim, no writer is left;
 *   - a third cluster created with bootstrap.restore.source.snapshot: ID holds
 *     every key;
 *   - the first cluster's member loses its Pod and its PersistentVolumeClaim
 *     (its data): `gitcd recover --from-snapshot ID` makes a new member of
 *     the snapshot, fetched through a writer Pod, holding every key;
 *   - last (test_writers_side_by_side, whose retention deletes older files):
 *     `gitcd snapshot save` while another process holds a live writer of
 *     the cluster waits for it, leaves it alone, and succeeds after it; a
 *     cozystack EtcdSnapshot with spec.destination.pvc is taken into that
 *     folder of the claim by `gitcd run`.
 */
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/spec.h"
#include "kube/kubeconfig.h"
#include "snapstore/receiver.h"
#include "targets/kubernetes.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NS      "default"
#define VERSION "3.5.16"
#define CL      "kp"
#define KEYS    1500
#define WRITERS "app.kubernetes.io/component=snapshot-writer"

static kube_lab *lab;

/* What the tests after test_pvc_snapshots take over: its state and a snapshot in the claim. */
static struct {
        e2e *e;
        long long id;       /* a succeeded snapshot of CL in the claim, holding KEYS keys */
        long long revision; /* the revision it was taken at */
        char *key;          /* its key under the destination's folder */
        char *folder;       /* the claim's folder (the node simulator's) */
} kept;

static const kube_gvr PODS = {"", "v1", "pods", true};
static const kube_gvr SECRETS = {"", "v1", "secrets", true};
static const kube_gvr PVCS = {"", "v1", "persistentvolumeclaims", true};

static size_t count(const kube_gvr *gvr, const char *selector)
{
        return kube_lab_count(lab, gvr, NS, selector);
}

static int save(e2e *e, const char *failpoint, char **ret_err)
{
        const char *args[] = {
            "snapshot",  "save",  NS "/" CL, "--kubeconfig", kubeapi_kubeconfig(lab->api),
            "--context", "gitcd", NULL};
        return e2e_runv_failpoint(e, failpoint, NULL, ret_err, args);
}

/* The newest record of the cluster (`gitcd snapshot list -o json`, newest first). */
static json_t *newest(e2e *e)
{
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "snapshot", "list", NS "/" CL, "-o", "json", NULL), 0);
        json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        free(out);
        assert_non_null(j);
        return j;
}

static char *file_sha256(const char *path)
{
        char *hex = xmalloc(65);
        assert_int_equal(hash_file_sha256_hex(path, hex, NULL), 0);
        return hex;
}

/* Every file under dir, relative ("" separated by newlines), hidden ones included. */
static char *files_under(const char *dir)
{
        path_list files = {0}, dirs = {0};
        strbuf sb = STRBUF_INIT;
        if (list_tree(dir, &files, &dirs) == 0)
                for (size_t i = 0; i < files.n; i++)
                        sb_printf(&sb, "%s\n", files.paths[i]);
        path_list_release(&files);
        path_list_release(&dirs);
        return sb_detach(&sb);
}

/*
 * Two writers of one cluster at once, in two processes: while this test
 * holds a live writer of the cluster (through a Kubernetes target of its
 * own on gitcd's state folder), `gitcd snapshot save` waits, saying so,
 * and leaves that writer alone (it still stores a file); once it is
 * stopped, the save runs and succeeds. Then a cozystack EtcdSnapshot with
 * spec.destination.pvc is taken once by `gitcd run` into that folder of
 * the claim. Runs last: the save's retention (count 1) deletes the files
 * of the snapshots before it.
 */
static void writers_side_by_side(e2e *e, const char *claim_folder)
{
        kube_config *cfg = NULL;
        char *kerr = NULL;
        if (kube_config_load(kubeapi_kubeconfig(lab->api), "gitcd", &cfg, &kerr) < 0)
                fail_msg("kubeconfig: %s", kerr);
        kubernetes_target_opts o = {.config = cfg, .state_dir = e->state_dir};
        target *t = NULL;
        assert_int_equal(kubernetes_target_new(&o, &t), 0);
        kube_config_free(cfg);
        static const char spec[] = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                   "metadata: {name: " CL ", namespace: " NS "}\n"
                                   "spec: {replicas: 1, version: \"" VERSION "\"}\n";
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("kp.yaml", spec, strlen(spec), &set, &diags), 0);
        diag_list_release(&diags);
        void *ours = NULL;
        receiver_peer peer = {0};
        if (t->ops->writer_start(t, set.items[0], "backups", "etcd/snaps", &ours, &peer) < 0)
                fail_msg("writer_start: %s", target_last_error(t));

        const char *args[] = {
            "snapshot",  "save",  NS "/" CL, "--kubeconfig", kubeapi_kubeconfig(lab->api),
            "--context", "gitcd", NULL};
        pid_t save = e2e_start(e, args, "save-beside.log");
        _cleanup_free_ char *log = NULL;
        for (int64_t end = now_mono_ms() + 30000; now_mono_ms() < end; usleep(100 * 1000)) {
                free(log);
                log = e2e_read_log(e, "save-beside.log");
                if (log && strstr(log, "waiting up to"))
                        break;
        }
        _cleanup_free_ char *holder = xasprintf("in use by gitcd pid %ld", (long)getpid());
        if (!log || !strstr(log, holder))
                fail_msg("snapshot save does not wait for the writer in use:\n%s", log);
        assert_int_equal(count(&PODS, WRITERS), 1);
        _cleanup_free_ char *mine = path_join(e->root, "beside.db");
        assert_int_equal(write_file_atomic(mine, "beside", 6, 0600), 0);
        char *err = NULL;
        if (receiver_put(&peer, "beside/ours.db", mine, NULL, &err) < 0)
                fail_msg("the writer in use was disturbed: %s", err);
        _cleanup_free_ char *landed = path_join(claim_folder, "beside/ours.db");
        assert_true(path_exists(landed));
        assert_int_equal(receiver_remove(&peer, "beside/ours.db", &err), 0);
        assert_int_equal(t->ops->writer_stop(t, set.items[0], ours), 0);
        int k = e2e_wait_exit(save);
        free(log);
        log = e2e_read_log(e, "save-beside.log");
        if (k != 0)
                fail_msg("snapshot save exited %d:\n%s", k, log);
        json_t *rec = newest(e);
        assert_string_equal(json_string_value(json_object_get(rec, "result")), "succeeded");
        _cleanup_free_ char *file =
            path_join(claim_folder, json_string_value(json_object_get(rec, "key")));
        _cleanup_free_ char *sum = file_sha256(file);
        assert_string_equal(sum, json_string_value(json_object_get(rec, "sha256")));
        json_decref(rec);
        assert_int_equal(count(&PODS, WRITERS), 0);
        cluster_set_release(&set);
        target_free(t);

        /* a cozystack EtcdSnapshot into a folder of the claim, taken once by gitcd run */
        e2e_write_file(e, "once.yaml",
                       "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                       "kind: EtcdSnapshot\n"
                       "metadata:\n"
                       "  name: once\n"
                       "  namespace: " NS "\n"
                       "spec:\n"
                       "  clusterRef:\n"
                       "    name: " CL "\n"
                       "  destination:\n"
                       "    pvc:\n"
                       "      claimName: backups\n"
                       "      subPath: etcd/declared\n");
        const char *run[] = {
            "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(lab->api), "--context",
            "gitcd",    NULL};
        pid_t d = e2e_start_daemon(e, run);
        json_t *taken = NULL;
        for (int64_t end = now_mono_ms() + 60000; !taken && now_mono_ms() < end;
             usleep(300 * 1000)) {
                char *out = NULL;
                assert_int_equal(
                    e2e_run(e, &out, "snapshot", "list", NS "/" CL, "-o", "json", NULL), 0);
                char *save_ptr = NULL;
                for (char *line = strtok_r(out, "\n", &save_ptr); line && !taken;
                     line = strtok_r(NULL, "\n", &save_ptr)) {
                        json_t *j = json_loads(line, 0, NULL);
                        if (streq_ptr(json_string_value(json_object_get(j, "declared_by")),
                                      "EtcdSnapshot " NS "/once") &&
                            json_integer_value(json_object_get(j, "id")) > 0 &&
                            !streq_ptr(json_string_value(json_object_get(j, "result")), "running"))
                                taken = json_incref(j);
                        json_decref(j);
                }
                free(out);
        }
        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        assert_non_null(taken);
        if (!streq_ptr(json_string_value(json_object_get(taken, "result")), "succeeded"))
                fail_msg("EtcdSnapshot: %s", json_string_value(json_object_get(taken, "error")));
        const char *key = json_string_value(json_object_get(taken, "key"));
        _cleanup_free_ char *want = xasprintf("pvc://backups/etcd/declared/%s", key);
        assert_string_equal(json_string_value(json_object_get(taken, "location")), want);
        _cleanup_free_ char *declared =
            xasprintf("%s/node/volumes/" NS "/backups/etcd/declared/%s", lab->root, key);
        _cleanup_free_ char *dsum = file_sha256(declared);
        assert_string_equal(dsum, json_string_value(json_object_get(taken, "sha256")));
        json_decref(taken);
        assert_int_equal(count(&PODS, WRITERS), 0);
}

/* A snapshot save killed with a part sent: nothing that looks like one is left. Its id. */
static json_int_t save_killed_midway(e2e *e, const char *folder)
{
        _cleanup_free_ char *err = NULL;
        int k = save(e, "receiver.put-body", &err);
        if (k != 128 + SIGKILL)
                fail_msg("snapshot save was not killed mid-transfer (%d): %s", k, err);
        assert_int_equal(count(&PODS, WRITERS), 1);
        assert_int_equal(count(&SECRETS, WRITERS), 1);
        char *listing = NULL;
        for (int64_t end = now_mono_ms() + 20000; now_mono_ms() < end; usleep(200 * 1000)) {
                free(listing);
                listing = files_under(folder);
                if (streq(listing, NS "/" CL "/made-by-the-operator.db\n"))
                        break;
        }
        assert_string_equal(listing, NS "/" CL "/made-by-the-operator.db\n");
        free(listing);
        json_t *killed = newest(e);
        json_int_t killed_id = json_integer_value(json_object_get(killed, "id"));
        assert_string_equal(json_string_value(json_object_get(killed, "result")), "running");
        json_decref(killed);
        return killed_id;
}

/* A restore of snapshot second that cannot reach the claim's writer: refused, saying what to add. */
static void refuse_restore_without_writer(e2e *e, json_t *second)
{
        _cleanup_free_ char *id =
            xasprintf("%lld", (long long)json_integer_value(json_object_get(second, "id")));
        _cleanup_free_ char *into = path_join(e->root, "restored");
        _cleanup_free_ char *nowhere = path_join(e->root, "no-kubeconfig");
        const char *restore[] = {"snapshot", "restore",      id,      "--into",
                                 into,       "--kubeconfig", nowhere, NULL};
        _cleanup_free_ char *err = NULL;
        assert_int_not_equal(e2e_runv(e, NULL, &err, restore), 0);
        assert_non_null(strstr(err, "Kubernetes target"));
        assert_non_null(strstr(err, "--kubeconfig"));
        assert_false(path_exists(into));
}

/*
 * gitcd run records the snapshot killed_id as failed, and takes its first
 * scheduled snapshot from its worker thread, through a writer: its record.
 */
static json_t *run_until_scheduled(e2e *e, json_int_t killed_id)
{
        const char *run[] = {
            "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(lab->api), "--context",
            "gitcd",    NULL};
        pid_t d = e2e_start_daemon(e, run);
        bool failed = false, scheduled = false;
        json_t *sched = NULL;
        for (int64_t end = now_mono_ms() + 90000; !(failed && scheduled) && now_mono_ms() < end;
             usleep(300 * 1000)) {
                char *out = NULL;
                assert_int_equal(
                    e2e_run(e, &out, "snapshot", "list", NS "/" CL, "-o", "json", NULL), 0);
                char *save_ptr = NULL;
                for (char *line = strtok_r(out, "\n", &save_ptr); line;
                     line = strtok_r(NULL, "\n", &save_ptr)) {
                        json_t *o = json_loads(line, 0, NULL);
                        const char *res = json_string_value(json_object_get(o, "result"));
                        if (json_integer_value(json_object_get(o, "id")) == killed_id)
                                failed = streq_ptr(res, "failed");
                        /* taken, and (verify: every) drilled through a writer Pod */
                        if (streq_ptr(json_string_value(json_object_get(o, "trigger")),
                                      "schedule") &&
                            (streq_ptr(res, "failed") ||
                             json_is_string(json_object_get(o, "verify_result")))) {
                                scheduled = true;
                                json_decref(sched);
                                sched = json_incref(o);
                        }
                        json_decref(o);
                }
                free(out);
        }
        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        assert_true(failed);
        /* and takes its first scheduled snapshot from its worker thread, through a writer */
        assert_true(scheduled);
        return sched;
}

/* A cluster created from the file key2 in the claim: fetched through a writer Pod. */
static void restore_from_claim(e2e *e, const char *const *apply, const char *key2)
{
        _cleanup_free_ char *restored = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                                  "kind: EtcdCluster\n"
                                                  "metadata:\n"
                                                  "  name: kq\n"
                                                  "  namespace: " NS "\n"
                                                  "spec:\n"
                                                  "  replicas: 1\n"
                                                  "  version: \"" VERSION "\"\n"
                                                  "  bootstrap:\n"
                                                  "    restore:\n"
                                                  "      source:\n"
                                                  "        pvc:\n"
                                                  "          claimName: backups\n"
                                                  "          subPath: etcd/snaps/%s\n",
                                                  key2);
        e2e_write_file(e, "kq.yaml", restored);
        _cleanup_free_ char *err = NULL;
        int k = e2e_runv(e, NULL, &err, apply);
        if (k != 0)
                fail_msg("apply of the restored cluster exited %d: %s", k, err);
        _cleanup_free_ char *eps_kq = e2e_endpoints(e, "kq");
        e2e_check_keys(eps_kq, KEYS);
        assert_int_equal(count(&PODS, WRITERS), 0);
}

/* The operator's own file in the claim's folder. Newly allocated path. */
static char *operator_file(const char *folder)
{
        _cleanup_free_ char *theirs_dir = path_join(folder, NS "/" CL);
        assert_int_equal(mkdir_p(theirs_dir, 0755), 0);
        char *theirs = path_join(theirs_dir, "made-by-the-operator.db");
        assert_int_equal(write_file_atomic(theirs, "theirs", 6, 0644), 0);
        return theirs;
}

static void test_pvc_snapshots(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        json_t *claim = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion",
                                  "v1", "kind", "PersistentVolumeClaim", "metadata", "name",
                                  "backups", "namespace", NS, "spec", "accessModes",
                                  "ReadWriteOnce", "resources", "requests", "storage", "1Gi");
        assert_int_equal(kube_apply(lab->admin, claim, "e2e", false, false, NULL), 0);
        json_decref(claim);
        _cleanup_free_ char *folder =
            xasprintf("%s/node/volumes/" NS "/backups/etcd/snaps", lab->root);

        e2e_write_file(e, CL ".yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: " CL "\n"
                       "  namespace: " NS "\n"
                       "spec:\n"
                       "  replicas: 1\n"
                       "  version: \"" VERSION "\"\n"
                       "  snapshots:\n"
                       "    schedule: \"0 0 1 1 *\"\n"
                       "    retention:\n"
                       "      count: 1\n"
                       "    destination:\n"
                       "      pvc:\n"
                       "        claimName: backups\n"
                       "        subPath: etcd/snaps\n");
        const char *apply[] = {
            "apply",     "-q",       "--source",   e->source,      "--timeout",
            "120s",      "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(lab->api),
            "--context", "gitcd",    NULL};
        _cleanup_free_ char *err = NULL;
        int k = e2e_runv(e, NULL, &err, apply);
        if (k != 0)
                fail_msg("apply exited %d: %s", k, err);
        /* the operator's file (the simulator has seen the claim by now: it keeps its folder) */
        _cleanup_free_ char *theirs = operator_file(folder);
        _cleanup_free_ char *eps = e2e_endpoints(e, CL);
        e2e_fill_keys(eps, KEYS);

        /* killed with a part of the snapshot sent: nothing that looks like one is left */
        json_int_t killed_id = save_killed_midway(e, folder);

        /* the next one removes the leftover writer and stores the snapshot */
        free(err);
        err = NULL;
        k = save(e, NULL, &err);
        if (k != 0)
                fail_msg("snapshot save exited %d: %s", k, err);
        assert_int_equal(count(&PODS, WRITERS), 0);
        assert_int_equal(count(&SECRETS, WRITERS), 0);
        json_t *first = newest(e);
        assert_string_equal(json_string_value(json_object_get(first, "result")), "succeeded");
        const char *key1 = json_string_value(json_object_get(first, "key"));
        const char *loc1 = json_string_value(json_object_get(first, "location"));
        assert_non_null(key1);
        _cleanup_free_ char *want_loc = xasprintf("pvc://backups/etcd/snaps/%s", key1);
        assert_string_equal(loc1, want_loc);
        assert_true(strneq(key1, NS "/" CL "/", strlen(NS "/" CL "/")));
        _cleanup_free_ char *file1 = path_join(folder, key1);
        _cleanup_free_ char *sum1 = file_sha256(file1);
        assert_string_equal(sum1, json_string_value(json_object_get(first, "sha256")));

        /* a third: retention (count 1) deletes the second's file, and only that */
        free(err);
        err = NULL;
        k = save(e, NULL, &err);
        if (k != 0)
                fail_msg("snapshot save exited %d: %s", k, err);
        json_t *second = newest(e);
        const char *key2 = json_string_value(json_object_get(second, "key"));
        assert_non_null(key2);
        assert_string_not_equal(key1, key2);
        _cleanup_free_ char *file2 = path_join(folder, key2);
        _cleanup_free_ char *sum2 = file_sha256(file2);
        assert_string_equal(sum2, json_string_value(json_object_get(second, "sha256")));
        assert_false(path_exists(file1));
        assert_true(path_exists(theirs));
        _cleanup_free_ char *listing = files_under(folder);
        _cleanup_free_ char *want =
            xasprintf("%s\n%s", key2, NS "/" CL "/made-by-the-operator.db\n");
        _cleanup_free_ char *want_rev =
            xasprintf("%s\n%s\n", NS "/" CL "/made-by-the-operator.db", key2);
        if (!streq(listing, want) && !streq(listing, want_rev))
                fail_msg("the claim's folder holds:\n%s", listing);
        assert_int_equal(count(&PODS, WRITERS), 0);

        restore_from_claim(e, apply, key2);
        assert_true(path_exists(file2));

        refuse_restore_without_writer(e, second);

        /* gitcd run records the snapshot it was killed in as failed, and takes its first
         * scheduled snapshot from its worker thread, through a writer */
        json_t *sched = run_until_scheduled(e, killed_id);
        if (!streq_ptr(json_string_value(json_object_get(sched, "result")), "succeeded"))
                fail_msg("scheduled snapshot: %s",
                         json_string_value(json_object_get(sched, "error")));
        if (!streq_ptr(json_string_value(json_object_get(sched, "verify_result")), "verified"))
                fail_msg("the restore drill of the scheduled snapshot: %s: %s",
                         json_string_value(json_object_get(sched, "verify_result")),
                         json_string_value(json_object_get(sched, "verify_message")));
        assert_string_equal(json_string_value(json_object_get(sched, "verify_method")), "hashkv");
        const char *sched_key = json_string_value(json_object_get(sched, "key"));
        _cleanup_free_ char *file3 = path_join(folder, sched_key);
        _cleanup_free_ char *sum3 = file_sha256(file3);
        assert_string_equal(sum3, json_string_value(json_object_get(sched, "sha256")));
        kept.id = (long long)json_integer_value(json_object_get(sched, "id"));
        kept.revision = (long long)json_integer_value(json_object_get(sched, "revision"));
        kept.key = xstrdup(sched_key);
        json_decref(sched);
        assert_int_equal(count(&PODS, WRITERS), 0);
        json_decref(first);
        json_decref(second);
        kept.e = e; /* freed in main, after the tests that use it */
        kept.folder = xstrdup(folder);
}

/* Start etcd on a restored data directory; its pid, the client URL in *ret_url. */
static pid_t start_restored(e2e *e, const char *data_dir, const char *name, const char *peer_url,
                            char **ret_url)
{
        char *client = xasprintf("http://127.0.0.1:%d", harness_free_port());
        _cleanup_free_ char *cluster = xasprintf("%s=%s", name, peer_url);
        _cleanup_free_ char *bin = harness_etcd_path(VERSION, "etcd");
        _cleanup_free_ char *log = path_join(e->root, "restored.log");
        assert_non_null(bin);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (!freopen(log, "w", stderr) || !freopen(log, "a", stdout))
                        _exit(126);
                execl(bin, bin, "--name", name, "--data-dir", data_dir, "--listen-client-urls",
                      client, "--advertise-client-urls", client, "--listen-peer-urls", peer_url,
                      "--initial-advertise-peer-urls", peer_url, "--initial-cluster", cluster,
                      (char *)NULL);
                _exit(127);
        }
        harness_track_pid(pid);
        etcd_client_opts o = {.endpoints = client};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        etcd_endpoint_status *st = NULL;
        for (int i = 0; i < 200 && etcd_status(c, NULL, &st) < 0; i++)
                usleep(100 * 1000);
        etcd_client_free(c);
        if (!st)
                fail_msg("etcd on the restored folder does not serve; see %s", log);
        etcd_endpoint_status_free(st);
        *ret_url = client;
        return pid;
}

/* `gitcd snapshot restore ID` of a snapshot in the claim, through the target's writer. */
static void test_restore_from_claim(void **state)
{
        (void)state;
        if (!kept.e)
                skip();
        e2e *e = kept.e;
        _cleanup_free_ char *id = xasprintf("%lld", kept.id);
        _cleanup_free_ char *into = path_join(e->root, "restored-from-claim");
        _cleanup_free_ char *peer = xasprintf("http://127.0.0.1:%d", harness_free_port());
        const char *restore[] = {"snapshot",  "restore",      id,
                                 "--into",    into,           "--print-spec",
                                 "--name",    "r0",           "--peer-url",
                                 peer,        "--kubeconfig", kubeapi_kubeconfig(lab->api),
                                 "--context", "gitcd",        NULL};
        _cleanup_free_ char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, restore);
        if (k != 0)
                fail_msg("snapshot restore exited %d: %s", k, err);
        _cleanup_free_ char *restored = xasprintf("restored pvc://backups/etcd/snaps/%s", kept.key);
        assert_non_null(strstr(out, restored));
        _cleanup_free_ char *source = xasprintf("        pvc:\n          claimName: backups\n"
                                                "          subPath: etcd/snaps/%s\n",
                                                kept.key);
        if (!strstr(out, source))
                fail_msg("the printed spec has no pvc source for the file:\n%s", out);
        assert_int_equal(count(&PODS, WRITERS), 0);
        assert_int_equal(count(&SECRETS, WRITERS), 0);

        _cleanup_free_ char *url = NULL;
        pid_t pid = start_restored(e, into, "r0", peer, &url);
        e2e_check_keys(url, KEYS);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        harness_untrack_pid(pid);
}

/* A new cluster whose bootstrap.restore.source.snapshot is the id of a snapshot in the claim. */
static void test_bootstrap_from_claim(void **state)
{
        (void)state;
        if (!kept.e)
                skip();
        e2e *e = kept.e;
        _cleanup_free_ char *spec = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: kr\n"
                                              "  namespace: " NS "\n"
                                              "spec:\n"
                                              "  replicas: 1\n"
                                              "  version: \"" VERSION "\"\n"
                                              "  bootstrap:\n"
                                              "    restore:\n"
                                              "      source:\n"
                                              "        snapshot: %lld\n",
                                              kept.id);
        e2e_write_file(e, "kr.yaml", spec);
        const char *apply[] = {
            "apply",     "-q",       "--source",   e->source,      "--timeout",
            "120s",      "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(lab->api),
            "--context", "gitcd",    NULL};
        _cleanup_free_ char *err = NULL;
        int k = e2e_runv(e, NULL, &err, apply);
        if (k != 0)
                fail_msg("apply of the cluster restored from snapshot %lld exited %d: %s", kept.id,
                         k, err);
        _cleanup_free_ char *eps = e2e_endpoints(e, "kr");
        e2e_check_keys(eps, KEYS);
        assert_int_equal(count(&PODS, WRITERS), 0);
        _cleanup_free_ char *file =
            xasprintf("%s/node/volumes/" NS "/backups/etcd/snaps/%s", lab->root, kept.key);
        assert_true(path_exists(file));
}

/* Delete an object and wait until it is gone. */
static void delete_and_wait(const kube_gvr *gvr, const char *name)
{
        int r = kube_delete(lab->admin, gvr, NS, name, "Background");
        if (r < 0 && r != -ENOENT)
                fail_msg("delete %s %s: %s", gvr->resource, name,
                         kube_client_last_error(lab->admin));
        for (int64_t end = now_mono_ms() + 30000; now_mono_ms() < end; usleep(200 * 1000)) {
                json_t *live = NULL;
                r = kube_get(lab->admin, gvr, NS, name, &live);
                json_decref(live);
                if (r == -ENOENT)
                        return;
        }
        fail_msg("%s %s is not gone after 30 s", gvr->resource, name);
}

/* The first cluster's only member loses its data: recovered from the snapshot in the claim. */
static void test_recover_from_claim(void **state)
{
        (void)state;
        if (!kept.e)
                skip();
        e2e *e = kept.e;
        json_t *st = e2e_status(e, CL);
        json_t *members = json_object_get(st, "members");
        assert_int_equal(json_array_size(members), 1);
        _cleanup_free_ char *member =
            xstrdup(json_string_value(json_object_get(json_array_get(members, 0), "name")));
        json_decref(st);
        /* its volume: the claim its Pod mounts */
        json_t *pod = NULL;
        assert_int_equal(kube_get(lab->admin, &PODS, NS, member, &pod), 0);
        _cleanup_free_ char *claim = NULL;
        json_t *vols = json_object_get(json_object_get(pod, "spec"), "volumes");
        for (size_t i = 0; i < json_array_size(vols) && !claim; i++) {
                json_t *c = json_object_get(json_array_get(vols, i), "persistentVolumeClaim");
                if (c)
                        claim = xstrdup(json_string_value(json_object_get(c, "claimName")));
        }
        json_decref(pod);
        assert_non_null(claim);
        delete_and_wait(&PODS, member);
        delete_and_wait(&PVCS, claim);

        _cleanup_free_ char *id = xasprintf("%lld", kept.id);
        const char *recover[] = {"recover",
                                 NS "/" CL,
                                 "--from-snapshot",
                                 id,
                                 "--timeout",
                                 "120s",
                                 "--kubeconfig",
                                 kubeapi_kubeconfig(lab->api),
                                 "--context",
                                 "gitcd",
                                 NULL};
        _cleanup_free_ char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, recover);
        if (k != 0)
                fail_msg("gitcd recover --from-snapshot %s exited %d:\n%s\n%s", id, k, out, err);
        st = e2e_status(e, CL);
        json_t *r = json_array_get(json_object_get(st, "recoveries"), 0);
        assert_string_equal(json_string_value(json_object_get(r, "result")), "succeeded");
        assert_string_equal(json_string_value(json_object_get(r, "from")), "snapshot");
        assert_string_equal(json_string_value(json_object_get(r, "source")), id);
        assert_int_equal(json_integer_value(json_object_get(r, "revision")), kept.revision);
        json_decref(st);
        _cleanup_free_ char *eps = e2e_endpoints(e, CL);
        e2e_check_keys(eps, KEYS);
        assert_int_equal(count(&PODS, WRITERS), 0);
}

/* Last: the save in it applies retention (count 1), which deletes the earlier files. */
static void test_writers_side_by_side(void **unused)
{
        (void)unused;
        if (!kept.e || !kept.folder)
                fail_msg("test_pvc_snapshots left nothing to work on");
        writers_side_by_side(kept.e, kept.folder);
}

int main(void)
{
        lab = kube_lab_start(NS, VERSION);
        if (!lab)
                return 77;
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pvc_snapshots), cmocka_unit_test(test_restore_from_claim),
            cmocka_unit_test(test_bootstrap_from_claim), cmocka_unit_test(test_recover_from_claim),
            cmocka_unit_test(test_writers_side_by_side)};
        int failed = cmocka_run_group_tests(tests, NULL, NULL);
        e2e_free(kept.e);
        free(kept.key);
        free(kept.folder);
        kube_lab_free(lab);
        return failed;
}

/*
 * Snapshots on the Kubernetes target, against the real kube-apiserver and
 * node simulator of tests/harness/kubeapi.h and a real s3rver
 * (tests/harness/s3rver.h); skipped (77) without them or without root.
 *
 * One cluster with client TLS (gitcd's CA, its client identity in a
 * Secret-backed folder) and spec.snapshots to S3 with the credentials in a
 * Kubernetes Secret; gitcd's own environment holds no S3 credentials, so
 * every upload below must have read that Secret through the API server:
 *   - `gitcd run --target kubernetes` takes the first scheduled snapshot as
 *     soon as the cluster is available, from the member's Pod, recorded as
 *     succeeded; the object in the bucket has the recorded SHA-256, and its
 *     restore drill, fetching it back with the Secret's credentials, proves
 *     it restores; a
 *     second cluster's goes, gzip-compressed, into the local folder its
 *     spec names, with the recorded SHA-256;
 *   - `gitcd snapshot save NS/NAME` with no option, beside the daemon, opens
 *     the target the state store recorded for the cluster (kubernetes): a
 *     manual snapshot, uploaded with the Secret's credentials, whose object
 *     has the recorded SHA-256; with --to, the same into a local folder;
 *   - `gitcd snapshot save --target local` is refused: the cluster runs on
 *     the kubernetes target.
 * Then etcd auth on the same target: the second cluster gets spec.auth with
 * rootCredentialsSecretRef, a Secret made through the API server; auth goes
 * on with that password (a client without credentials is refused, `gitcd
 * etcd --cluster` is accepted), a new value in the Secret changes etcd's,
 * and neither password reaches gitcd's log.
 */
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

#include "api/spec.h"
#include "api/yaml.h"
#include "kube/client.h"
#include "snapstore/destination.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "tests/harness/s3rver.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NS      "default"
#define VERSION "3.5.16"
#define NODE    "node-1"

static kubeapi *api;
static nodesim *sim;
static kube_client *admin;
static kube_lab *lab; /* api, sim, admin and root are its */
static harness_s3rver *s3;
static char *root;

/* The SHA-256 of a file, in hex. */
static char *file_sha256(const char *path)
{
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 1 << 30, &data, &len), 0);
        unsigned char md[32];
        unsigned int n = 0;
        assert_int_equal(EVP_Digest(data, len, md, &n, EVP_sha256(), NULL), 1);
        free(data);
        char *hex = xmalloc(65);
        for (size_t i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", md[i]);
        return hex;
}

/* Every record of `gitcd snapshot list -o json` for the cluster, as a JSON array. */
static json_t *records(e2e *e, const char *cluster)
{
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "snapshot", "list", "-o", "json", cluster, NULL), 0);
        json_t *all = json_array();
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_t *o = json_loads(line, 0, NULL);
                if (!o)
                        fail_msg("not JSON: %s", line);
                json_array_append_new(all, o);
        }
        free(out);
        return all;
}

/* The newest record with this trigger and a final result; NULL when none yet. */
static json_t *finished_record(e2e *e, const char *cluster, const char *trigger)
{
        json_t *all = records(e, cluster);
        json_t *found = NULL;
        size_t i;
        json_t *o;
        json_array_foreach(all, i, o)
        {
                const char *t = json_string_value(json_object_get(o, "trigger"));
                const char *res = json_string_value(json_object_get(o, "result"));
                if (streq_ptr(t, trigger) && res && !streq(res, "running")) {
                        found = json_incref(o);
                        break; /* newest first */
                }
        }
        json_decref(all);
        return found;
}

static const char *jstr(json_t *o, const char *k)
{
        const char *s = json_string_value(json_object_get(o, k));
        if (!s)
                fail_msg("record without %s", k);
        return s;
}

/* Fetch the record's object from the bucket with s3rver's own key; its SHA-256. */
static char *bucket_sha256(const storage_location *loc, json_t *rec)
{
        s3_credentials creds = {.access_key_id = (char *)HARNESS_S3RVER_KEY,
                                .secret_access_key = (char *)HARNESS_S3RVER_KEY};
        snapshot_dest_context ctx = {.namespace_ = NS, .credentials = &creds};
        snapshot_dest *d = NULL;
        char *err = NULL;
        if (snapshot_dest_open(loc, &ctx, &d, &err) < 0)
                fail_msg("%s", err);
        _cleanup_free_ char *copy = path_join(root, "fetched.db");
        (void)unlink(copy);
        if (snapshot_dest_get_file(d, jstr(rec, "key"), copy, &err) < 0)
                fail_msg("%s", err);
        snapshot_dest_free(d);
        return file_sha256(copy);
}

/* The Secret kl-root in NS, with key password (base64). */
static void root_secret(const char *password_b64)
{
        json_t *secret = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                                   "Secret", "metadata", "name", "kl-root", "namespace", NS, "data",
                                   "password", password_b64);
        assert_int_equal(kube_apply(admin, secret, "e2e", false, false, NULL), 0);
        json_decref(secret);
}

/* Wait (60 s at most) until the cluster's audit log holds n events of action. */
static bool wait_audit(e2e *e, const char *name, const char *action, int n)
{
        for (int64_t end = now_mono_ms() + 60 * 1000; now_mono_ms() < end; usleep(300 * 1000))
                if (e2e_audit_count(e, name, action) >= n)
                        return true;
        return false;
}

/* The other cluster's first scheduled snapshot, gzip-compressed in the spec's local folder. */
static void assert_local_scheduled(e2e *e, const char *spec_folder)
{
        json_t *sched = NULL;
        int64_t end = now_mono_ms() + 60 * 1000;
        while (!(sched = finished_record(e, NS "/kl", "schedule")) && now_mono_ms() < end)
                usleep(300 * 1000);
        if (!sched)
                fail_msg("no scheduled snapshot of kl recorded in time");
        if (!streq(jstr(sched, "result"), "succeeded"))
                fail_msg("scheduled snapshot of kl %s: %s", jstr(sched, "result"),
                         json_string_value(json_object_get(sched, "error")));
        assert_string_equal(jstr(sched, "member"), "kl-0");
        assert_string_equal(jstr(sched, "compression"), "gzip");
        const char *file = jstr(sched, "location");
        assert_true(strneq(file, spec_folder, strlen(spec_folder)));
        _cleanup_free_ char *file_sum = file_sha256(file);
        assert_string_equal(file_sum, jstr(sched, "sha256"));
        json_decref(sched);
}

/*
 * On demand, beside the daemon, with no option at all: the recorded
 * target, and the API server of $KUBECONFIG as for apply and run.
 */
static void save_on_demand(e2e *e, const char *kc, const storage_location *loc)
{
        char *out = NULL, *err = NULL;
        setenv("KUBECONFIG", kc, 1);
        const char *save[] = {"snapshot", "save", NS "/ks", NULL};
        int k = e2e_runv(e, &out, &err, save);
        unsetenv("KUBECONFIG");
        if (k != 0)
                fail_msg("snapshot save: exit %d: %s", k, err);
        free(out);
        free(err);
        json_t *manual = finished_record(e, NS "/ks", "manual");
        assert_non_null(manual);
        assert_string_equal(jstr(manual, "result"), "succeeded");
        assert_string_equal(jstr(manual, "member"), "ks-0");
        assert_true(strneq(jstr(manual, "location"), "s3://", 5));
        _cleanup_free_ char *manual_sum = bucket_sha256(loc, manual);
        assert_string_equal(manual_sum, jstr(manual, "sha256"));
        json_decref(manual);
}

/* Into a local folder on the gitcd host. */
static void save_to_folder(e2e *e, const char *kc)
{
        _cleanup_free_ char *folder = path_join(root, "local-snaps");
        const char *to[] = {"snapshot",     "save", NS "/ks",    "--to",  folder,
                            "--kubeconfig", kc,     "--context", "gitcd", NULL};
        char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, to);
        if (k != 0)
                fail_msg("snapshot save --to: exit %d: %s", k, err);
        free(out);
        free(err);
        json_t *local = finished_record(e, NS "/ks", "manual");
        assert_non_null(local);
        assert_string_equal(jstr(local, "result"), "succeeded");
        const char *where = jstr(local, "location");
        assert_true(strneq(where, folder, strlen(folder)));
        _cleanup_free_ char *local_sum = file_sha256(where);
        assert_string_equal(local_sum, jstr(local, "sha256"));
        json_decref(local);
}

/* Another target than the recorded one: refused, nothing taken. */
static void refuse_other_target(e2e *e)
{
        json_t *before = records(e, NS "/ks");
        const char *wrong[] = {"snapshot", "save", NS "/ks", "--target", "local", NULL};
        char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, wrong);
        assert_int_equal(k, 1);
        assert_non_null(strstr(err, "runs on the kubernetes target"));
        free(out);
        free(err);
        json_t *after = records(e, NS "/ks");
        assert_int_equal(json_array_size(after), json_array_size(before));
        json_decref(before);
        json_decref(after);
}

/*
 * etcd auth on the Kubernetes target, root's password from a Secret read
 * through the API server: on, then rotated by a new value in the Secret.
 */
static void auth_from_secret(e2e *e, const char *kc, const char *spec2)
{
        root_secret("Zmlyc3Qtc2VjcmV0LXB3LTAxMjM0NTY3ODk="); /* first-secret-pw-0123456789 */
        _cleanup_free_ char *spec_auth =
            xasprintf("%s  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n"
                      "      name: kl-root\n",
                      spec2);
        e2e_write_file(e, "kl.yaml", spec_auth);
        assert_true(wait_audit(e, "kl", "auth.enable", 1));
        etcd_client *anon = e2e_client(e, "kl");
        assert_true(etcd_put(anon, "anon", "x", 1, NULL) < 0); /* refused without credentials */
        etcd_client_free(anon);
        const char *cli_put[] = {"etcd",  "--cluster", NS "/kl",   "--kubeconfig", kc,  "--context",
                                 "gitcd", "put",       "auth-key", "v1",           NULL};
        char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, cli_put);
        if (k != 0)
                fail_msg("gitcd etcd --cluster: exit %d: %s", k, err);
        assert_null(strstr(out, "first-secret-pw"));
        assert_null(strstr(err, "first-secret-pw"));
        free(out);
        free(err);
        root_secret("c2Vjb25kLXNlY3JldC1wdy05ODc2NTQzMjEw"); /* second-secret-pw-9876543210 */
        assert_true(wait_audit(e, "kl", "auth.password-change", 1));
        k = e2e_runv(e, &out, &err, cli_put);
        if (k != 0)
                fail_msg("gitcd etcd --cluster after the change: exit %d: %s", k, err);
        free(out);
        free(err);
        _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
        assert_null(strstr(log, "first-secret-pw"));
        assert_null(strstr(log, "second-secret-pw"));
}

static void test_snapshots(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        /* the folders on the gitcd host a spec names, under the lab's */
        e2e_set_policy(e, "localSnapshotRoots: [%s]", root);
        /* "S3RVER" twice: the key s3rver knows (it checks the access key ID only) */
        json_t *secret =
            json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind",
                      "Secret", "metadata", "name", "ks-s3", "namespace", NS, "data", "accessKeyID",
                      "UzNSVkVS", "secretAccessKey", "UzNSVkVS");
        assert_int_equal(kube_apply(admin, secret, "e2e", false, false, NULL), 0);
        json_decref(secret);
        _cleanup_free_ char *spec = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: ks\n"
                                              "  namespace: " NS "\n"
                                              "spec:\n"
                                              "  replicas: 1\n"
                                              "  version: \"" VERSION "\"\n"
                                              "  tls:\n"
                                              "    provider: auto\n"
                                              "    client:\n"
                                              "      enabled: true\n"
                                              "  snapshots:\n"
                                              "    schedule: \"0 0 1 1 *\"\n"
                                              "    destination:\n"
                                              "      s3:\n"
                                              "        endpoint: %s\n"
                                              "        bucket: %s\n"
                                              "        key: backups\n"
                                              "        forcePathStyle: true\n"
                                              "        credentialsSecretRef:\n"
                                              "          name: ks-s3\n",
                                              s3->endpoint_ip, s3->bucket);
        e2e_write_file(e, "ks.yaml", spec);
        /* a second cluster whose spec names a folder on the gitcd host, gzip-compressed */
        _cleanup_free_ char *spec_folder = path_join(root, "spec-snaps");
        _cleanup_free_ char *spec2 = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                               "kind: EtcdCluster\n"
                                               "metadata:\n"
                                               "  name: kl\n"
                                               "  namespace: " NS "\n"
                                               "spec:\n"
                                               "  replicas: 1\n"
                                               "  version: \"" VERSION "\"\n"
                                               "  snapshots:\n"
                                               "    schedule: \"0 0 1 1 *\"\n"
                                               "    compression: gzip\n"
                                               "    destination:\n"
                                               "      local:\n"
                                               "        path: %s\n",
                                               spec_folder);
        e2e_write_file(e, "kl.yaml", spec2);
        const char *kc = kubeapi_kubeconfig(api);
        const char *args[] = {"--target", "kubernetes", "--kubeconfig", kc, "--context",
                              "gitcd",    NULL};
        pid_t d = e2e_start_daemon(e, args);
        assert_true(e2e_wait_ready(e, "ks", 1, 120));
        assert_true(e2e_wait_ready(e, "kl", 1, 120));

        storage_location loc = {.kind = DEST_S3,
                                .s3 = {.endpoint = s3->endpoint_ip,
                                       .bucket = s3->bucket,
                                       .key = (char *)"backups",
                                       .force_path_style = true}};

        /* The first scheduled snapshot, taken by the daemon as soon as the cluster is available. */
        json_t *sched = NULL;
        int64_t end = now_mono_ms() + 60 * 1000;
        while (!(sched = finished_record(e, NS "/ks", "schedule")) && now_mono_ms() < end)
                usleep(300 * 1000);
        if (!sched)
                fail_msg("no scheduled snapshot recorded in time");
        if (!streq(jstr(sched, "result"), "succeeded"))
                fail_msg("scheduled snapshot %s: %s", jstr(sched, "result"),
                         json_string_value(json_object_get(sched, "error")));
        assert_string_equal(jstr(sched, "member"), "ks-0");
        _cleanup_free_ char *sched_sum = bucket_sha256(&loc, sched);
        assert_string_equal(sched_sum, jstr(sched, "sha256"));
        /* ... and drilled (verify: every): fetched back with the Secret's credentials too */
        end = now_mono_ms() + 60 * 1000;
        while (!json_is_string(json_object_get(sched, "verify_result")) && now_mono_ms() < end) {
                usleep(300 * 1000);
                json_decref(sched);
                sched = finished_record(e, NS "/ks", "schedule");
        }
        if (!streq_ptr(jstr(sched, "verify_result"), "verified"))
                fail_msg("the restore drill of the scheduled snapshot: %s: %s",
                         jstr(sched, "verify_result"), jstr(sched, "verify_message"));
        json_decref(sched);

        /* The other cluster's first scheduled snapshot, in the spec's local folder. */
        assert_local_scheduled(e, spec_folder);

        save_on_demand(e, kc, &loc);

        save_to_folder(e, kc);
        refuse_other_target(e);

        auth_from_secret(e, kc, spec2);

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        e2e_free(e);
}

int main(void)
{
        _cleanup_free_ char *s3bin = harness_s3rver_path();
        if (!s3bin)
                return 77;
        /* gitcd's environment holds no S3 credentials: the Secret is the only source */
        unsetenv("AWS_ACCESS_KEY_ID");
        unsetenv("AWS_SECRET_ACCESS_KEY");
        unsetenv("AWS_SESSION_TOKEN");
        lab = kube_lab_start(NS, VERSION);
        if (!lab)
                return 77;
        api = lab->api;
        sim = lab->sim;
        admin = lab->admin;
        root = lab->root;
        assert_int_equal(harness_s3rver_start(&(harness_s3rver_opts){0}, &s3), 0);

        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_snapshots),
        };
        int failed = cmocka_run_group_tests(tests, NULL, NULL);

        harness_s3rver_free(s3);
        kube_lab_free(lab);
        return failed;
}

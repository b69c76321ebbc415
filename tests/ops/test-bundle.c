/*
 * The incident bundle (ops/bundle.h) without etcd: a cluster recorded in a
 * real state store whose members do not answer (one at a closed port, one
 * with no client URL) still gets a whole bundle, read back with
 * libarchive: README.txt, gitcd's records, an error.txt per member; no
 * root password (also where it is not under a secret-looking key), no
 * token and no private key in any file; mode 0600. Which conditions take
 * a bundle in gitcd run, once per episode; the automatic bundle's worker
 * writes under <state>/bundles, audits debug.bundle with the path and
 * queues the webhook notification whose payload carries it; the
 * newest BUNDLE_KEEP of a cluster are kept. The same on real etcd, with
 * quorum lost: tests/e2e/test-bundle.c (slow suite).
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
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

#include "ops/bundle.h"
#include "ops/config.h"
#include "ops/notify.h"
#include "state/notify-queue.h"
#include "util/diag.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define CLUSTER  "default/u"
#define PASSWORD "unit-root-pw-93b7d1f0aa64"
#define TOKEN    "tok-unit-4c2e9d"
#define PEM_KEY                                                                                    \
        "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE "       \
        "KEY-----"

typedef struct fixture {
        char *dir;
        char *state_dir;
        char *db_path;
        state_db *db;
} fixture;

static int setup(void **state)
{
        fixture *f = XNEW(fixture);
        f->dir = harness_tmpdir("bundle");
        f->state_dir = xasprintf("%s/state", f->dir);
        f->db_path = xasprintf("%s/state.db", f->state_dir);
        assert_int_equal(state_open(f->db_path, STATE_OPEN_READ_WRITE, &f->db), 0);
        const char *spec = "{\"apiVersion\":\"gitcd.io/v1alpha1\",\"kind\":\"EtcdCluster\","
                           "\"metadata\":{\"name\":\"u\",\"namespace\":\"default\"},"
                           "\"spec\":{\"replicas\":2,\"version\":\"3.5.16\","
                           "\"repair\":{\"recheck\":true,\"token\":\"" TOKEN "\"}}}";
        assert_true(state_cluster_set_desired(f->db, CLUSTER, spec, NULL, NULL, 1000) >= 0);
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d", harness_free_port());
        state_member m0 = {.cluster = CLUSTER, .name = "u-0", .client_url = url};
        state_member m1 = {.cluster = CLUSTER, .name = "u-1", .ordinal = 1};
        assert_int_equal(state_member_put(f->db, &m0, 1000), 0);
        assert_int_equal(state_member_put(f->db, &m1, 1000), 0);
        /* secrets where a careless bundle would pick them up */
        _cleanup_free_ char *adir = xasprintf("%s/auth/default/u", f->state_dir);
        assert_int_equal(mkdir_p(adir, 0700), 0);
        _cleanup_free_ char *pw = xasprintf("%s/root-password.etcd", adir);
        assert_int_equal(write_file_atomic(pw, PASSWORD "\n", strlen(PASSWORD) + 1, 0600), 0);
        state_audit_event ev = {.time_ms = 2000,
                                .cluster = CLUSTER,
                                .action = "test.event",
                                .reason = "a person pasted " PASSWORD " here",
                                .after_json = "{\"note\":\"" PEM_KEY "\"}",
                                .outcome = "success"};
        assert_int_equal(state_audit_append(f->db, &ev, NULL), 0);
        int64_t id;
        assert_int_equal(state_op_begin(f->db, CLUSTER, "member.add-learner", "u-1",
                                        "{\"token\":\"" TOKEN "\",\"n\":1}", 3000, &id),
                         0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture *f = *state;
        state_close(f->db);
        (void)rm_rf(f->dir);
        free(f->dir);
        free(f->state_dir);
        free(f->db_path);
        free(f);
        return 0;
}

/* Every file of the .tar.gz at path: names (one a line) into *names, contents into *all. */
static void read_bundle(const char *path, char **ret_names, char **ret_all)
{
        struct archive *a = archive_read_new();
        archive_read_support_filter_gzip(a);
        archive_read_support_format_tar(a);
        assert_int_equal(archive_read_open_filename(a, path, 16384), ARCHIVE_OK);
        strbuf names = STRBUF_INIT, all = STRBUF_INIT;
        struct archive_entry *e;
        while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
                const char *name = archive_entry_pathname(e);
                const char *slash = strchr(name, '/');
                assert_non_null(slash); /* everything under one top folder */
                sb_printf(&names, "%s\n", slash + 1);
                char buf[8192];
                for (la_ssize_t n; (n = archive_read_data(a, buf, sizeof(buf))) > 0;)
                        sb_append_len(&all, buf, (size_t)n);
                sb_appendc(&all, '\n');
        }
        archive_read_free(a);
        *ret_names = sb_detach(&names);
        *ret_all = sb_detach(&all);
}

static bool has_file(const char *names, const char *file)
{
        _cleanup_free_ char *line = xasprintf("%s\n", file);
        size_t n = strlen(line);
        for (const char *p = names; (p = strstr(p, line)); p += n)
                if (p == names || p[-1] == '\n')
                        return true;
        return false;
}

static json_t *fake_status(state_db *db, const char *cluster)
{
        (void)db;
        return json_pack("{s:s,s:s}", "name", cluster, "from", "status");
}

static void test_members_not_answering(void **state)
{
        fixture *f = *state;
        _cleanup_free_ char *out = xasprintf("%s/b.tar.gz", f->dir);
        bundle_request rq = {.db = f->db,
                             .state_dir = f->state_dir,
                             .cluster = CLUSTER,
                             .reason = "unit test",
                             .path = out,
                             .status_json = fake_status};
        _cleanup_free_ char *path = NULL, *error = NULL;
        assert_int_equal(bundle_take(&rq, &path, &error), 0);
        assert_string_equal(path, out);
        struct stat st;
        assert_int_equal(stat(out, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);

        _cleanup_free_ char *names = NULL, *all = NULL;
        read_bundle(out, &names, &all);
        const char *const want[] = {"README.txt",           "cluster/spec.json",
                                    "gitcd/status.json",    "gitcd/audit.json",
                                    "gitcd/journal.json",   "members/u-0/error.txt",
                                    "members/u-1/error.txt"};
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                if (!has_file(names, want[i]))
                        fail_msg("%s is not in the bundle:\n%s", want[i], names);
        assert_false(has_file(names, "members/u-0/status.json"));
        assert_non_null(strstr(all, "cluster:  " CLUSTER));
        assert_non_null(strstr(all, "why:      unit test"));
        assert_non_null(strstr(all, "\"from\": \"status\""));
        assert_non_null(strstr(all, "member.add-learner")); /* the journal row in flight */
        assert_non_null(strstr(all, "no client URL recorded"));
        assert_non_null(strstr(all, "no target opened"));
        assert_null(strstr(all, PASSWORD));
        assert_null(strstr(all, TOKEN));
        assert_null(strstr(all, "PRIVATE KEY"));
        assert_non_null(strstr(all, "a person pasted [redacted] here"));

        /* no such cluster: nothing written */
        _cleanup_free_ char *none = xasprintf("%s/none.tar.gz", f->dir);
        rq.cluster = "default/none";
        rq.path = none;
        _cleanup_free_ char *p2 = NULL, *e2 = NULL;
        assert_int_equal(bundle_take(&rq, &p2, &e2), -ENOENT);
        assert_non_null(strstr(e2, "default/none"));
        assert_int_not_equal(access(none, F_OK), 0);
}

static void set(fixture *f, const char *type, const char *status, const char *reason)
{
        assert_true(state_cluster_set_condition(f->db, CLUSTER, type, status, reason, "m", 5000) >=
                    0);
}

static void test_trouble_and_episodes(void **state)
{
        fixture *f = *state;
        bundler *b = bundler_new(f->db_path, f->state_dir, fake_status);
        set(f, "Available", "True", "QuorumHealthy");
        set(f, "DataConsistent", "True", "Agree");
        assert_null(bundler_due(b, f->db, CLUSTER));

        set(f, "Available", "False", "QuorumLost");
        char *due = bundler_due(b, f->db, CLUSTER);
        assert_string_equal(due, "QuorumLost");
        free(due);
        assert_null(bundler_due(b, f->db, CLUSTER)); /* the same episode */
        set(f, "CorruptAlarm", "True", "CorruptAlarm");
        set(f, "DataConsistent", "False", "CorruptAlarm");
        due = bundler_due(b, f->db, CLUSTER); /* a new kind of trouble */
        assert_string_equal(due, "QuorumLost,CorruptAlarm,DataInconsistent");
        free(due);
        set(f, "Available", "True", "QuorumHealthy");
        set(f, "CorruptAlarm", "False", "NoAlarm");
        set(f, "DataConsistent", "True", "Agree");
        assert_null(bundler_due(b, f->db, CLUSTER));
        set(f, "Available", "False", "QuorumLost"); /* a new episode */
        due = bundler_due(b, f->db, CLUSTER);
        assert_string_equal(due, "QuorumLost");

        /* the worker: the bundle under <state>/bundles, audited and notified with its path */
        static const char conf[] = "allowPlainHTTP: [127.0.0.1]\n"
                                   "notifications:\n"
                                   "  webhooks:\n"
                                   "    - name: t\n"
                                   "      url: http://127.0.0.1:9/hook\n";
        ops_config *cfg = NULL;
        diag_list diags = {0};
        assert_int_equal(ops_config_load_buffer("gitcd.yaml", conf, strlen(conf), &cfg, &diags), 0);
        diag_list_release(&diags);
        ops_notifier *n = NULL;
        assert_int_equal(ops_notifier_start(f->db_path, cfg, &n), 0);
        bundler_start(b, CLUSTER, due, NULL, n);
        bundler_free(b);
        ops_notifier_stop(n);
        ops_config_free(cfg);
        state_audit_list al = {0};
        state_audit_filter af = {.cluster = CLUSTER, .action = "debug.bundle"};
        assert_int_equal(state_audit_query(f->db, &af, &al), 0);
        assert_int_equal(al.n, 1);
        assert_string_equal(al.items[0]->outcome, "success");
        assert_non_null(strstr(al.items[0]->reason, "QuorumLost"));
        assert_non_null(strstr(al.items[0]->after_json, "/bundles/default_u-"));
        const char *p = strstr(al.items[0]->after_json, "\"path\":\"");
        assert_non_null(p);
        _cleanup_free_ char *written = xstrndup(p + 8, strcspn(p + 8, "\""));
        struct stat st;
        assert_int_equal(stat(written, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        state_audit_list_release(&al);
        state_notification_list nl = {0};
        assert_int_equal(state_notify_due(f->db, INT64_MAX / 2, 10, &nl), 0);
        assert_int_equal(nl.n, 1);
        assert_string_equal(nl.items[0]->event, "debug.bundle");
        _cleanup_free_ char *field = xasprintf("\"bundle\":\"%s\"", written);
        assert_non_null(strstr(nl.items[0]->payload, field));
        state_notification_list_release(&nl);

        /* UpgradeFailed and NOSPACE, each by its own condition */
        state_condition conds[] = {
            {.type = "Progressing", .status = "False", .reason = "UpgradeFailed"},
            {.type = "NoSpaceAlarm", .status = "True", .reason = "NoSpace"},
        };
        state_cluster sc = {.name = CLUSTER, .conditions = conds, .n_conditions = 2};
        _cleanup_free_ char *words = bundle_trouble(&sc);
        assert_string_equal(words, "UpgradeFailed,NoSpaceAlarm");
}

static void test_retention(void **state)
{
        fixture *f = *state;
        _cleanup_free_ char *dir = xasprintf("%s/bundles", f->dir);
        assert_int_equal(mkdir_p(dir, 0700), 0);
        for (int i = 0; i < 12; i++) {
                _cleanup_free_ char *p =
                    xasprintf("%s/default_u-202601%02dT000000.000Z.tar.gz", dir, i + 1);
                assert_int_equal(write_file_atomic(p, "x", 1, 0600), 0);
        }
        _cleanup_free_ char *other = xasprintf("%s/default_u2-20260101T000000.000Z.tar.gz", dir);
        _cleanup_free_ char *stray = xasprintf("%s/default_u-notes.txt", dir);
        assert_int_equal(write_file_atomic(other, "x", 1, 0600), 0);
        assert_int_equal(write_file_atomic(stray, "x", 1, 0600), 0);
        assert_int_equal(bundle_prune(dir, CLUSTER, BUNDLE_KEEP), 2);
        _cleanup_free_ char *gone = xasprintf("%s/default_u-20260102T000000.000Z.tar.gz", dir);
        _cleanup_free_ char *kept = xasprintf("%s/default_u-20260103T000000.000Z.tar.gz", dir);
        assert_int_not_equal(access(gone, F_OK), 0);
        assert_int_equal(access(kept, F_OK), 0);
        assert_int_equal(access(other, F_OK), 0);
        assert_int_equal(access(stray, F_OK), 0);
        assert_int_equal(bundle_prune(dir, CLUSTER, BUNDLE_KEEP), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_members_not_answering, setup, teardown),
            cmocka_unit_test_setup_teardown(test_trouble_and_episodes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The small value syntaxes of an EtcdCluster: Kubernetes quantities,
 * versions, DNS-1123 names, label keys and values, cron schedules and the
 * "did you mean" suggestion.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/internal.h"
#include "api/spec.h"
#include "util/xalloc.h"

static void test_quantity_bytes(void **state)
{
        static const struct {
                const char *in;
                int64_t bytes;
        } ok[] = {
            {"1Gi", 1073741824LL},
            {"500M", 500000000LL},
            {"0.5", 1},
            {"100m", 1},
            {"1", 1},
            {"0", 0},
            {"1Ki", 1024},
            {"1.5Gi", 1610612736LL},
            {"0.1Gi", 107374183LL}, /* 107374182.4 rounded up */
            {"8Gi", 8589934592LL},
            {"1e3", 1000},
            {"2E", 2000000000000000000LL},
            {"1k", 1000},
            {"+5Mi", 5242880},
            {"1073741824", 1073741824LL},
            {".5Ki", 512},
            {"1Ei", 1152921504606846976LL},
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                int64_t v = -1;
                assert_int_equal(quantity_parse(ok[i].in, &v), 0);
                assert_int_equal(v, ok[i].bytes);
        }
        static const char *const bad[] = {"",    "Gi",   "10GB", "1.2.3Gi", "1 Gi", "lots",
                                          "1Gb", "0x10", "1..5", "1.",      "Gi1",  "1iG"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                int64_t v = 42;
                assert_int_equal(quantity_parse(bad[i], &v), -EINVAL);
                assert_int_equal(v, 42); /* untouched on failure */
        }
        int64_t v;
        assert_int_equal(quantity_parse("-1Gi", &v), -ERANGE);
        assert_int_equal(quantity_parse("16Ei", &v), -ERANGE);
        assert_int_equal(quantity_parse("99999999999999999999999999999999", &v), -ERANGE);
}

static void test_quantity_millis(void **state)
{
        int64_t m;
        assert_int_equal(quantity_parse_millis("2", &m), 0);
        assert_int_equal(m, 2000);
        assert_int_equal(quantity_parse_millis("500m", &m), 0);
        assert_int_equal(m, 500);
        assert_int_equal(quantity_parse_millis("1.5", &m), 0);
        assert_int_equal(m, 1500);
        assert_int_equal(quantity_parse_millis("0.0001", &m), 0);
        assert_int_equal(m, 1); /* rounded up */
        assert_int_equal(quantity_parse_millis("two", &m), -EINVAL);
}

static void test_semver(void **state)
{
        semver v;
        assert_int_equal(semver_parse("3.5.16", &v), 0);
        assert_int_equal(v.major, 3);
        assert_int_equal(v.minor, 5);
        assert_int_equal(v.patch, 16);
        assert_int_equal(semver_parse("v3.6.0", &v), 0);
        assert_int_equal(v.minor, 6);
        static const char *const bad[] = {
            "3.5",  "3.5.16-rc.1", "3.5.16+build", "v",      "3.05.1", "3.5.x", "",
            "3..1", "3.5.16.1",    "V3.5.1",       " 3.5.1", "3.5.1 ", "-3.5.1"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(semver_parse(bad[i], &v), -EINVAL);
        semver a = {3, 5, 16}, b = {3, 6, 0}, c = {3, 5, 16};
        assert_true(semver_cmp(&a, &b) < 0);
        assert_true(semver_cmp(&b, &a) > 0);
        assert_int_equal(semver_cmp(&a, &c), 0);
}

static void test_dns(void **state)
{
        assert_true(dns1123_label_valid("quickstart"));
        assert_true(dns1123_label_valid("a"));
        assert_true(dns1123_label_valid("etcd-0"));
        assert_true(dns1123_label_valid("0abc"));
        assert_false(dns1123_label_valid(""));
        assert_false(dns1123_label_valid("-a"));
        assert_false(dns1123_label_valid("a-"));
        assert_false(dns1123_label_valid("My"));
        assert_false(dns1123_label_valid("a_b"));
        assert_false(dns1123_label_valid("a.b"));
        assert_true(dns1123_label_valid(
            "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abc")); /* 63 */
        assert_false(dns1123_label_valid(
            "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcd")); /* 64 */
        assert_true(dns1123_subdomain_valid("etcd-ca.example.com"));
        assert_true(dns1123_subdomain_valid("a"));
        assert_false(dns1123_subdomain_valid("a..b"));
        assert_false(dns1123_subdomain_valid(".a"));
        assert_false(dns1123_subdomain_valid("a."));
        assert_false(dns1123_subdomain_valid("A.b"));
        assert_false(dns1123_subdomain_valid(NULL));
}

static void test_labels(void **state)
{
        assert_true(k8s_qualified_name_valid("team"));
        assert_true(k8s_qualified_name_valid("app.kubernetes.io/name"));
        assert_true(k8s_qualified_name_valid("Team_A.x"));
        assert_false(k8s_qualified_name_valid("-bad"));
        assert_false(k8s_qualified_name_valid("Bad.Prefix/x"));
        assert_false(k8s_qualified_name_valid("a/"));
        assert_false(k8s_qualified_name_valid("/a"));
        assert_true(k8s_label_value_valid(""));
        assert_true(k8s_label_value_valid("v1.2_3-x"));
        assert_false(k8s_label_value_valid("two words"));
        assert_false(k8s_label_value_valid("-x"));
}

static void test_cron(void **state)
{
        static const char *const ok[] = {
            "0 * * * *",     "*/15 * * * *",   "15 */6 * * *",          "30 3 * * sun",
            "0 0 1 jan *",   "0 0 1-15/2 * *", "0,30 8-18 * * mon-fri", "0 0 * * 7",
            "59 23 31 12 6",
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                char *why = NULL;
                assert_int_equal(cron_check(ok[i], &why), 0);
                assert_null(why);
        }
        static const struct {
                const char *in;
                const char *why;
        } bad[] = {
            {"0 * * *", "a cron schedule has 5 fields (minute hour day-of-month month "
                        "day-of-week), got 4"},
            {"", "a cron schedule has 5 fields (minute hour day-of-month month "
                 "day-of-week), got 0"},
            {"60 * * * *", "minute \"60\" is out of range 0-59"},
            {"0 24 * * *", "hour \"24\" is out of range 0-23"},
            {"0 0 0 * *", "day of month \"0\" is out of range 1-31"},
            {"0 0 * 13 *", "month \"13\" is out of range 1-12"},
            {"0 0 * * 8", "day of week \"8\" is out of range 0-7"},
            {"*/0 * * * *", "minute field \"*/0\" is not valid"},
            {"5-1 * * * *", "minute range \"5-1\" runs backwards"},
            {"0 0 * foo *", "month field \"foo\" is not valid"},
            {"0,,1 * * * *", "minute field \"0,,1\" is not valid"},
            {"@daily", "a cron schedule has 5 fields (minute hour day-of-month month "
                       "day-of-week), got 1"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *why = NULL;
                assert_int_equal(cron_check(bad[i].in, &why), -EINVAL);
                assert_string_equal(why, bad[i].why);
                free(why);
        }
}

static void test_suggestions(void **state)
{
        static const char *const fields[] = {"replicas", "version", "storage", "storageClassName",
                                             NULL};
        assert_string_equal(closest_word("replica", fields), "replicas");
        assert_string_equal(closest_word("Replicas", fields), "replicas");
        assert_string_equal(closest_word("verison", fields), "version");
        assert_string_equal(closest_word("storageclassname", fields), "storageClassName");
        assert_null(closest_word("flavour", fields));
        assert_int_equal(edit_distance("kitten", "sitting"), 3);
        assert_int_equal(edit_distance("", "abc"), 3);
}

/* Paths of a spec: absolute, normalized, conservative; an owned folder never a system folder. */
static void test_paths(void **state)
{
        static const char *const ok[] = {"/var/lib/etcd/default-demo",
                                         "/etc/etcd/default-demo/pki",
                                         "/srv/etcd",
                                         "/data",
                                         "/home/alice/etcd",
                                         "/tmp/gitcd-lab-Xy12/m1/var/lib/etcd",
                                         "/root/.cache/gitcd/etcd-v3.5.16/etcd",
                                         "/mnt/disk1/etcd_data+v3@1",
                                         NULL};
        for (size_t i = 0; ok[i]; i++) {
                char *why = NULL;
                if (spec_path_check(ok[i], SPEC_PATH_OWNED, &why) != 0)
                        fail_msg("%s: %s", ok[i], why);
                assert_null(why);
        }
        static const struct {
                const char *in;
                const char *why; /* a part of the reason */
        } bad[] = {
            {"", "absolute"},
            {"var/lib/etcd", "absolute"},
            {"/", "root folder"},
            {"/etc", "system folder"},
            {"/var/lib", "system folder"},
            {"/usr/local/bin", "system folder"},
            {"/root/.ssh", "system folder"},
            {"/home/alice", "home folder"},
            {"/usr/local", "system folder"},
            {"/srv/etcd/", "trailing"},
            {"/srv//etcd", "//"},
            {"/srv/./etcd", "\".\""},
            {"/srv/etcd/..", "\"..\""},
            {"/srv/etcd/a b", "only letters"},
            {"/srv/etcd/a\nb", "only letters"},
            {"/srv/etcd/$(id)", "only letters"},
            {"/srv/etcd/`id`", "only letters"},
            {"/srv/etcd/it's", "only letters"},
            {"/srv/etcd/a\"b", "only letters"},
            {"/srv/etcd/a\\b", "only letters"},
            {"/srv/etcd/100%n", "only letters"},
            {"/srv/etcd/a;b", "only letters"},
            {"/srv/etcd/x=y", "only letters"},
            {"/srv/\xc3\xa9t\xc3\xa9", "only letters"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *why = NULL;
                assert_int_equal(spec_path_check(bad[i].in, SPEC_PATH_OWNED, &why), -EINVAL);
                if (!strstr(why, bad[i].why))
                        fail_msg("%s: \"%s\" does not say %s", bad[i].in, why, bad[i].why);
                free(why);
        }
        /* above a system folder: its parents are refused too */
        for (const char *const *d = spec_system_dirs(); *d; d++) {
                char *why = NULL;
                _cleanup_free_ char *dir = xstrdup(*d);
                if (dir[strlen(dir) - 1] == '/')
                        continue;
                for (char *slash; (slash = strrchr(dir, '/')) && slash != dir;) {
                        *slash = '\0';
                        assert_int_equal(spec_path_check(dir, SPEC_PATH_OWNED, &why), -EINVAL);
                        free(why);
                        why = NULL;
                }
        }
        /* folders gitcd writes files into, and files: the system folders are fine there */
        char *why = NULL;
        assert_int_equal(spec_path_check("/etc/systemd/system", SPEC_PATH_FOLDER, &why), 0);
        assert_int_equal(spec_path_check("/etc/kubernetes/manifests", SPEC_PATH_FOLDER, &why), 0);
        assert_int_equal(spec_path_check("/usr/local/bin/etcd", SPEC_PATH_FILE, &why), 0);
        assert_int_equal(spec_path_check("/", SPEC_PATH_FOLDER, &why), -EINVAL);
        free(why);
}

static void test_addresses(void **state)
{
        static const char *const hosts[] = {
            "10.0.0.1", "::1", "fd00::12", "node-1.example.com", "Node1", "localhost", "a", NULL};
        for (size_t i = 0; hosts[i]; i++)
                assert_true(host_address_valid(hosts[i]));
        static const char *const bad_hosts[] = {
            "",          "-a",  "a-",    "a..b",  "a b",  "cp2;reboot", "10.0.0.1\n",
            "1.2.3.999", "a_b", "[::1]", "$(id)", "a.b.", NULL};
        for (size_t i = 0; bad_hosts[i]; i++)
                if (host_address_valid(bad_hosts[i]))
                        fail_msg("\"%s\" taken for a host", bad_hosts[i]);
        assert_true(advertise_address_valid("10.0.0.1"));
        assert_true(advertise_address_valid("node-1.example.com"));
        assert_false(advertise_address_valid("fd00::12"));
        assert_true(host_port_valid("collector:4317", true));
        assert_true(host_port_valid("[::1]:4317", true));
        assert_true(host_port_valid("10.0.0.1:1", true));
        assert_false(host_port_valid("collector", true));
        assert_true(host_port_valid("collector", false));
        assert_false(host_port_valid("collector:0", true));
        assert_false(host_port_valid("collector:65536", true));
        assert_false(host_port_valid("collector:43a", true));
        assert_false(host_port_valid("::1:4317", true));
        assert_true(http_url_valid("https://s3.eu-west-1.amazonaws.com", false));
        assert_true(http_url_valid("http://127.0.0.1:9000", false));
        assert_true(http_url_valid("http://minio:9000/storage", true));
        assert_false(http_url_valid("http://minio:9000/storage", false));
        assert_false(http_url_valid("file:///etc/passwd", true));
        assert_false(http_url_valid("http://a/b?c", true));
        assert_false(http_url_valid("http://a/%2e%2e", true));
        assert_false(http_url_valid("http://user@host", true));
        assert_false(http_url_valid("javascript:alert(1)", true));
}

/* Image repositories by the OCI distribution reference grammar (name only, no tag). */
static void test_images(void **state)
{
        static const char *const ok[] = {"quay.io/coreos/etcd",
                                         "gcr.io/etcd-development/etcd",
                                         "registry.k8s.io/etcd",
                                         "localhost:5000/etcd",
                                         "etcd",
                                         "my_org/etc__d",
                                         "a/b-c--d/e.f",
                                         "[::1]:5000/etcd",
                                         NULL};
        for (size_t i = 0; ok[i]; i++)
                if (!image_repository_valid(ok[i]))
                        fail_msg("\"%s\" refused", ok[i]);
        static const char *const bad[] = {"",
                                          "Quay.io:99999/etcd",
                                          "quay.io/CoreOS/etcd",
                                          "quay.io/coreos/etcd:v3.5.16",
                                          "quay.io/coreos/etcd@sha256:00",
                                          "quay.io/coreos/etcd;id",
                                          "quay.io//etcd",
                                          "quay.io/etcd/",
                                          "-etcd",
                                          "etcd-",
                                          "e___d",
                                          "quay.io/coreos/etcd\n",
                                          "quay.io/\"etcd\"",
                                          NULL};
        for (size_t i = 0; bad[i]; i++)
                if (image_repository_valid(bad[i]))
                        fail_msg("\"%s\" accepted", bad[i]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_quantity_bytes), cmocka_unit_test(test_quantity_millis),
            cmocka_unit_test(test_semver),         cmocka_unit_test(test_dns),
            cmocka_unit_test(test_labels),         cmocka_unit_test(test_cron),
            cmocka_unit_test(test_suggestions),    cmocka_unit_test(test_paths),
            cmocka_unit_test(test_addresses),      cmocka_unit_test(test_images),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

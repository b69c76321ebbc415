/*
 * The etcd flags a spec may set (api/flags.c): the four classes (allowed,
 * allowed by the operator's policy, set by gitcd, refused), the versions
 * that have each flag (down to the patch that added it), the type of every
 * value, and that no flag of the table takes a value with a character
 * that means something to a shell, a systemd unit or etcd's flag parser.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/flags.h"
#include "api/internal.h"
#include "util/xalloc.h"

static const semver v3_4_23 = {3, 4, 23}, v3_5_12 = {3, 5, 12}, v3_5_14 = {3, 5, 14},
                    v3_5_16 = {3, 5, 16}, v3_6_0 = {3, 6, 0};

/* etcd_flag_check's result, and its sentence holds want (NULL: it passed). */
static void check(const char *flag, const char *value, const semver *v, int want_r,
                  const char *want)
{
        char *why = NULL;
        int r = etcd_flag_check(flag, value, v, &why);
        if (r != want_r)
                fail_msg("--%s=%s: %d (%s), expected %d", flag, value, r, why ? why : "", want_r);
        if (want && (!why || !strstr(why, want)))
                fail_msg("--%s=%s: \"%s\" does not say \"%s\"", flag, value, why ? why : "", want);
        if (!want_r)
                assert_null(why);
        free(why);
}

static void test_classes(void **state)
{
        (void)state;
        check("max-txn-ops", "512", &v3_5_16, 0, NULL);
        check("data-dir", "/x", &v3_5_16, -EPERM, "--data-dir is set by gitcd; use spec.storage");
        check("peer-cert-file", "/x", &v3_5_16, -EPERM, "use spec.tls.peer");
        check("listen-client-http-urls", "http://a:1", &v3_5_16, -EPERM, "spec.tls");
        check("discovery-token", "x", &v3_6_0, -EPERM, "spec.replicas");
        check("strict-reconfig-check", "false", &v3_5_16, -EPERM, "quorum");
        check("strict-reconfig-check", "true", &v3_5_16, -EPERM, "refused");
        check("experimental-peer-skip-client-san-verification", "true", &v3_5_16, -EPERM,
              "refused");
        check("peer-skip-client-san-verification", "true", &v3_6_0, -EPERM, "refused");
        check("unsafe-no-fsync", "true", &v3_5_16, -EPERM, "refused");
        check("unsafe-anything-later", "true", &v3_5_16, -EPERM, "refused");
        check("force-new-cluster", "true", NULL, -EPERM, "one-member cluster");
        check("log-outputs", "stderr", &v3_5_16, -EPERM, "standard error");
        check("max-learners", "2", &v3_6_0, -EPERM, "learner");
        check("enable-v2", "true", &v3_4_23, -EPERM, "v2");
        check("proxy-dial-timeout", "1000", &v3_4_23, -EPERM, "proxy");
        check("config-file", "/etc/etcd.conf", &v3_5_16, -EPERM, "ignores");
        /* names as etcd spells them */
        check("STRICT_RECONFIG_CHECK", "false", &v3_5_16, -EPERM, "--strict-reconfig-check");
        check("Max_Txn_Ops", "512", &v3_5_16, 0, NULL);

        /* allowed only by the operator's policy: accepted here, the policy decides */
        check("enable-pprof", "true", &v3_5_16, 0, NULL);
        check("enable-pprof", "", &v3_5_16, 0, NULL);
        check("experimental-enable-distributed-tracing", "true", &v3_5_16, 0, NULL);
        check("experimental-distributed-tracing-address", "collector:4317", &v3_5_16, 0, NULL);
        check("distributed-tracing-sampling-rate", "1000000", &v3_6_0, 0, NULL);
        check("distributed-tracing-sampling-rate", "1000001", &v3_6_0, -EINVAL, NULL);
        assert_true(etcd_flag_needs_policy("enable-pprof"));
        assert_true(etcd_flag_needs_policy("Enable_Pprof"));
        assert_true(etcd_flag_needs_policy("enable-distributed-tracing"));
        assert_true(etcd_flag_needs_policy("distributed-tracing-address"));
        assert_true(etcd_flag_needs_policy("experimental-distributed-tracing-service-name"));
        assert_false(etcd_flag_needs_policy("max-txn-ops"));
        assert_false(etcd_flag_needs_policy("strict-reconfig-check"));
        assert_false(etcd_flag_needs_policy("no-such-flag"));

        /* etcd's corruption checks are set by gitcd from spec.consistency */
        check("experimental-initial-corrupt-check", "true", &v3_4_23, -EPERM,
              "use spec.consistency.etcdChecks");
        check("experimental-compact-hash-check-enabled", "true", &v3_5_16, -EPERM,
              "use spec.consistency.etcdChecks");
        check("experimental-corrupt-check-time", "5m", &v3_5_16, -EPERM,
              "use spec.consistency.etcdCheckInterval");
        check("corrupt-check-time", "5m", &v3_6_0, -EPERM,
              "use spec.consistency.etcdCheckInterval");

        _cleanup_free_ char *n = etcd_flag_normalize("Log_LEVEL");
        assert_string_equal(n, "log-level");
}

static void test_versions(void **state)
{
        (void)state;
        check("log-format", "json", &v3_6_0, 0, NULL);
        check("log-format", "json", &v3_5_16, -ENOENT,
              "--log-format is not an etcd 3.5 flag (etcd 3.6 has it)");
        check("experimental-stop-grpc-service-on-defrag", "true", &v3_4_23, -ENOENT,
              "not an etcd 3.4 flag (etcd 3.5 and 3.6 have it)");
        check("experimental-stop-grpc-service-on-defrag", "true", &v3_5_12, -ENOENT,
              "from 3.5.14 on, not of etcd 3.5.12");
        check("experimental-stop-grpc-service-on-defrag", "true", &v3_5_14, 0, NULL);
        /* the same table decides the flags gitcd adds itself (render/command.c) */
        assert_false(etcd_flag_in_version("experimental-stop-grpc-service-on-defrag", &v3_4_23));
        assert_false(etcd_flag_in_version("experimental-stop-grpc-service-on-defrag", &v3_5_12));
        assert_true(etcd_flag_in_version("experimental-stop-grpc-service-on-defrag", &v3_5_14));
        assert_true(etcd_flag_in_version("experimental_stop_grpc_service_on_defrag", &v3_6_0));
        assert_false(
            etcd_flag_in_version("experimental-stop-grpc-service-on-defrag", &(semver){0, 0, 0}));
        assert_false(etcd_flag_in_version("no-such-flag", &v3_5_14));
        check("debug", "true", &v3_5_16, -ENOENT, "etcd 3.4 has it");
        check("max-txn-opz", "1", &v3_5_16, -ENOENT, "did you mean --max-txn-ops?");
        check("experimental-x", "1", &v3_4_23, -ENOENT, "--experimental-x is not an etcd 3.4 flag");
        /* one name, a type per minor: capnslog is gone from 3.5 */
        check("logger", "capnslog", &v3_4_23, 0, NULL);
        check("logger", "capnslog", &v3_5_16, -EINVAL, "one of zap");
        /* without a version: the name against every minor */
        check("log-format", "json", NULL, 0, NULL);
        check("no-such-flag", "1", NULL, -ENOENT, "is not an etcd flag");
        /* a minor gitcd does not run: as without a version */
        static const semver v3_3 = {3, 3, 0};
        check("max-txn-ops", "1", &v3_3, 0, NULL);
}

static void test_types(void **state)
{
        (void)state;
        static const struct {
                const char *flag;
                const char *value;
                bool ok;
        } cases[] = {
            {"pre-vote", "true", true},
            {"pre-vote", "", true},
            {"pre-vote", "F", true},
            {"pre-vote", "0", true},
            {"pre-vote", "yes", false},
            {"pre-vote", "on", false},
            {"backend-batch-limit", "-5", true},
            {"backend-batch-limit", "9223372036854775807", true},
            {"backend-batch-limit", "9223372036854775808", false},
            {"backend-batch-limit", "0x10", false},
            {"backend-batch-limit", "1_000", false},
            {"max-txn-ops", "18446744073709551615", true},
            {"max-txn-ops", "18446744073709551616", false},
            {"max-txn-ops", "+5", false},
            {"max-txn-ops", "", false},
            {"max-concurrent-streams", "4294967295", true},
            {"max-concurrent-streams", "4294967296", false},
            {"grpc-keepalive-timeout", "0", true},
            {"grpc-keepalive-timeout", "20s", true},
            {"grpc-keepalive-timeout", "1h30m", true},
            {"grpc-keepalive-timeout", "1.5s", true},
            {"grpc-keepalive-timeout", "300ms", true},
            {"grpc-keepalive-timeout", "2us", true},
            {"grpc-keepalive-timeout", "2\xc2\xb5s", true},
            {"grpc-keepalive-timeout", "5", false},
            {"grpc-keepalive-timeout", "-1s", false},
            {"grpc-keepalive-timeout", "1d", false},
            {"grpc-keepalive-timeout", "1h 30m", false},
            {"grpc-keepalive-timeout", "s", false},
            {"grpc-keepalive-timeout", ".s", false},
            {"log-level", "warn", true},
            {"log-level", "WARN", false},
            {"metrics", "extensive", true},
            {"cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", true},
            {"cipher-suites",
             "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", true},
            {"cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,", false},
            {"cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA", false},
            {"tls-min-version", "TLS1.3", true},
            {"tls-min-version", "TLS1.0", false},
            {"cors", "*", true},
            {"cors", "https://ui.example.com,http://10.0.0.1:8080", true},
            {"cors", "https://ui.example.com/path", false},
            {"host-whitelist", "*", true},
            {"host-whitelist", "etcd.example.com,10.0.0.1,::1", true},
            {"host-whitelist", "etcd.example.com,", false},
            {"log-package-levels", "etcdmain=CRITICAL,etcdserver=DEBUG", true},
            {"experimental-distributed-tracing-address", "0.0.0.0:4317", true},
            {"experimental-distributed-tracing-address", "[::1]:4317", true},
            {"experimental-distributed-tracing-address", "collector", false},
            {"experimental-distributed-tracing-service-name", "etcd-prod", true},
            {"feature-gates", "CompactHashCheck=true,InitialCorruptCheck=false", true},
            {"feature-gates", "CompactHashCheck=1", true},
            {"feature-gates", "CompactHashCheck", false},
            {"feature-gates", "CompactHashCheck=yes", false},
            {"feature-gates", "NoSuchGate=true", false},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const semver *v = strstr(cases[i].flag, "feature-gates")        ? &v3_6_0
                                  : strstr(cases[i].flag, "log-package-levels") ? &v3_4_23
                                                                                : &v3_5_16;
                check(cases[i].flag, cases[i].value, v, cases[i].ok ? 0 : -EINVAL, NULL);
        }
}

/*
 * No flag of the table takes a value with a character that a shell, a
 * systemd unit or etcd's own parsing would read as more than text.
 */
static void test_no_value_carries_syntax(void **state)
{
        (void)state;
        static const char *const bases[] = {"true",      "1",      "1s",
                                            "info",      "x",      "http://a",
                                            "a.example", "TLS1.2", "CompactHashCheck=true",
                                            NULL};
        static const char specials[] = "\n\r\t\x01\x1b\x7f \\'\"%$;`&|<>()#!~{}[]?*";
        size_t names = 0;
        for (size_t i = 0; etcd_flag_row_name(i); i++, names++) {
                _cleanup_free_ char *name = xstrdup(etcd_flag_row_name(i));
                char *star = strchr(name, '*');
                if (star)
                        strcpy(star, "x");
                for (size_t b = 0; bases[b]; b++)
                        for (size_t s = 0; s < sizeof(specials) - 1; s++) {
                                _cleanup_free_ char *v =
                                    xasprintf("%s%c%s", bases[b], specials[s], bases[b]);
                                char *why = NULL;
                                if (etcd_flag_check(name, v, NULL, &why) == 0)
                                        fail_msg("--%s=%s is accepted", name, v);
                                free(why);
                        }
        }
        assert_true(names > 100);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_classes),
            cmocka_unit_test(test_versions),
            cmocka_unit_test(test_types),
            cmocka_unit_test(test_no_value_carries_syntax),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

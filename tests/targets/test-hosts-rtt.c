/*
 * The hosts target's peer round-trip time, the pure half
 * (targets/hosts-rtt.h): the reader of what the script printed (strict:
 * a line it does not know, a number that is not one, a peer that is not
 * a host and port, output cut short are errors naming the line), the
 * slowest peer's median and the slowest connect; hosts that are not host
 * names or addresses refused before any script is written; and the
 * script itself run here with sh against a TCP socket this test listens
 * on (loopback) and a port nothing listens on, once with a connect
 * wrapper that sleeps 150 ms before connecting (the test's slow link: a
 * wrapper the test controls, not a slow network).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "tests/harness/harness.h"
#include "targets/hosts-rtt.h"
#include "util/macro.h"
#include "util/xalloc.h"

static int parse(const char *text, rtt_result *r, char **why)
{
        return rtt_parse(text, strlen(text), r, why);
}

static void test_parse_median_and_max(void **state)
{
        (void)state;
        rtt_result r = {0};
        char *why = NULL;
        assert_int_equal(parse("gitcd-rtt 1\n"
                               "rtt=10.0.0.2:2380 400\nrtt=10.0.0.2:2380 300\n"
                               "rtt=10.0.0.2:2380 90000\n"
                               "rtt=node-3.example:2380 1000\nrtt=node-3.example:2380 1200\n"
                               "rtt=node-3.example:2380 1100\n"
                               "fail=10.0.0.4:2380\n"
                               "end\n",
                               &r, &why),
                         0);
        assert_int_equal(r.n_samples, 6);
        assert_int_equal(r.n_peers, 2);
        assert_int_equal(r.n_failed, 1);
        /* the slowest peer's median, not one lost SYN's 90 ms */
        assert_int_equal(r.slowest_us, 1100);
        assert_int_equal(r.max_us, 90000);
        assert_null(r.error);
        rtt_result_release(&r);

        /* a peer timed, then killed by timeout: timed; no bash 5: the complaint, no figure */
        assert_int_equal(parse("gitcd-rtt 1\nrtt=::1:2380 7\nfail=::1:2380\nend", &r, &why), 0);
        assert_int_equal(r.n_peers, 1);
        assert_int_equal(r.n_failed, 0);
        rtt_result_release(&r);
        assert_int_equal(
            parse("gitcd-rtt 1\nerror=bash 5 is needed ($EPOCHREALTIME)\nend\n", &r, &why), 0);
        assert_string_equal(r.error, "bash 5 is needed ($EPOCHREALTIME)");
        assert_int_equal(r.n_peers, 0);
        rtt_result_release(&r);
}

static void test_parse_refuses(void **state)
{
        (void)state;
        struct {
                const char *text, *why;
        } cases[] = {
            {"", "line 1: the machine printed nothing"},
            {"gitcd-preflight 1\nend\n", "line 1: not a gitcd peer RTT (version 1)"},
            {"gitcd-rtt 1\nrtt=10.0.0.2:2380 1\n", "line 2: the output stops before its end"},
            {"gitcd-rtt 1\nrtt=10.0.0.2:2380 -1\nend\n",
             "line 2: a connect time is not a number of microseconds"},
            {"gitcd-rtt 1\nrtt=10.0.0.2:2380 99999999999999999999\nend\n",
             "line 2: a connect time is not a number of microseconds"},
            {"gitcd-rtt 1\nrtt=10.0.0.2:2380\nend\n",
             "line 2: a connect time is not a number of microseconds"},
            {"gitcd-rtt 1\nrtt=a/b:2380 1\nend\n", "line 2: not a peer address"},
            {"gitcd-rtt 1\nrtt=10.0.0.2:70000 1\nend\n", "line 2: not a peer address"},
            {"gitcd-rtt 1\nfail=10.0.0.2\nend\n", "line 2: not a peer address"},
            {"gitcd-rtt 1\nerror=a\nerror=b\nend\n", "line 3: a second error"},
            {"gitcd-rtt 1\nhello\nend\n", "line 2: unexpected line"},
            {"gitcd-rtt 1\nend\nrtt=10.0.0.2:2380 1\n", "line 3: text after the end"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                rtt_result r = {0};
                char *why = NULL;
                if (parse(cases[i].text, &r, &why) != -EINVAL)
                        fail_msg("case %zu: read", i);
                if (!streq(why, cases[i].why))
                        fail_msg("case %zu: \"%s\", not \"%s\"", i, why, cases[i].why);
                assert_null(r.error);
                free(why);
        }
        /* a NUL byte */
        rtt_result r = {0};
        char *why = NULL;
        assert_int_equal(rtt_parse("gitcd-rtt 1\nrtt=a\0:1 2\nend\n", 24, &r, &why), -EINVAL);
        assert_string_equal(why, "line 2: a NUL byte");
        free(why);
        /* more samples of one peer than the bound */
        char *big = xstrdup("gitcd-rtt 1\n");
        for (int i = 0; i <= RTT_MAX_SAMPLES_PER; i++) {
                char *more = xasprintf("%srtt=10.0.0.2:2380 %d\n", big, i);
                free(big);
                big = more;
        }
        assert_int_equal(parse(big, &r, &why), -EINVAL);
        assert_non_null(strstr(why, "more than 100 samples of 10.0.0.2:2380"));
        free(why);
        free(big);
}

static void test_hosts_refused(void **state)
{
        (void)state;
        const char *bad[] = {"", "-x", "a/b", "$(touch x)", "a b", "a;b", "a'b", "10.0.0.1\n"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                rtt_peer p = {bad[i], 2380};
                if (rtt_script(&p, 1, NULL))
                        fail_msg("host \"%s\" reached a script", bad[i]);
        }
        rtt_peer ok[] = {{"10.0.0.2", 2380}, {"node-3.example", 2380}, {"fd00::3", 2380}};
        char *s = rtt_script(ok, ARRAY_SIZE(ok), NULL);
        assert_non_null(s);
        free(s);
        rtt_peer port0 = {"10.0.0.2", 0}, port_big = {"10.0.0.2", 65536};
        assert_null(rtt_script(&port0, 1, NULL));
        assert_null(rtt_script(&port_big, 1, NULL));
}

/* A TCP socket listening on 127.0.0.1 (backlog enough for the connects); its port. */
static int listen_loopback(int *ret_port)
{
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 64), 0);
        socklen_t l = sizeof(a);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

/* A port nothing listens on: bound, then closed. */
static int closed_port(void)
{
        int port;
        int fd = listen_loopback(&port);
        close(fd);
        return port;
}

static void run_script(const rtt_peer *peers, size_t n, const char *connect, rtt_result *r)
{
        char *script = rtt_script(peers, n, connect);
        assert_non_null(script);
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-rtt");
        assert_non_null(dir);
        _cleanup_free_ char *tmpl = path_join(dir, "rtt.sh");
        assert_int_equal(write_file_atomic(tmpl, script, strlen(script), 0600), 0);
        char *cmd = xasprintf("sh %s", tmpl);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char buf[65536];
        size_t got = fread(buf, 1, sizeof(buf) - 1, p);
        assert_int_equal(pclose(p), 0);
        char *why = NULL;
        if (rtt_parse(buf, got, r, &why) < 0)
                fail_msg("%s", why);
        unlink(tmpl);
        free(cmd);
        free(script);
}

static void test_script_runs(void **state)
{
        (void)state;
        int port;
        int fd = listen_loopback(&port);
        rtt_peer peers[] = {{"127.0.0.1", port}, {"127.0.0.1", closed_port()}};
        rtt_result r = {0};
        run_script(peers, ARRAY_SIZE(peers), NULL, &r);
        assert_null(r.error);
        assert_int_equal(r.n_peers, 1);
        assert_int_equal(r.n_samples, RTT_SAMPLES);
        assert_int_equal(r.n_failed, 1);
        assert_true(r.slowest_us > 0 && r.slowest_us <= r.max_us);
        assert_true(r.slowest_us < 100000); /* loopback: far below a heartbeat */
        rtt_result_release(&r);

        /* the slow link: a connect wrapper that sleeps first */
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-rtt");
        assert_non_null(dir);
        char *slow = xasprintf("%s/slow connect", dir);
        FILE *f = fopen(slow, "w");
        assert_non_null(f);
        fputs("#!/bin/bash\nsleep 0.15\nexec 3<>\"/dev/tcp/$1/$2\"\n", f);
        fclose(f);
        assert_int_equal(chmod(slow, 0755), 0);
        run_script(peers, 1, slow, &r);
        assert_int_equal(r.n_peers, 1);
        assert_true(r.slowest_us >= 150000);
        rtt_result_release(&r);
        char *rm = xasprintf("rm -rf %s", dir);
        assert_int_equal(system(rm), 0);
        free(rm);
        free(slow);
        close(fd);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_median_and_max),
            cmocka_unit_test(test_parse_refuses),
            cmocka_unit_test(test_hosts_refused),
            cmocka_unit_test(test_script_runs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

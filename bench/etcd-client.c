/*
 * Benchmark: calls per second of gitcd's etcd client against etcdctl for
 * MemberList and Status on a local 3-member cluster started with the test
 * harness. etcdctl is spawned once per call, as a person or a script uses
 * it; gitcd's client is measured twice: one client reused (the connection
 * stays open, as the reconciler uses it) and a new client per call (a new
 * connection every time). Prints figures only; it never fails on timing.
 *
 *   bench-etcd-client [VERSION] [SECONDS-PER-MEASUREMENT]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd/client.h"
#include "tests/harness/harness.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

enum call { CALL_MEMBER_LIST, CALL_STATUS };

static double seconds = 2.0;

static int one_call(etcd_client *c, enum call what, const char *endpoint)
{
        if (what == CALL_MEMBER_LIST) {
                etcd_members *l = NULL;
                int r = etcd_member_list(c, &l);
                etcd_members_free(l);
                return r;
        }
        etcd_endpoint_status *s = NULL;
        int r = etcd_status(c, endpoint, &s);
        etcd_endpoint_status_free(s);
        return r;
}

/* Calls per second of one reused client, or of a fresh client per call. */
static double bench_gitcd(const char *endpoints, const char *endpoint, enum call what, bool reuse)
{
        etcd_client_opts o = {.endpoints = endpoints};
        etcd_client *c = NULL;
        if (reuse && etcd_client_new(&o, &c) < 0)
                return 0;
        long n = 0;
        int64_t t0 = now_mono_ms(), end = t0 + (int64_t)(seconds * 1000);
        while (now_mono_ms() < end) {
                if (!reuse && etcd_client_new(&o, &c) < 0)
                        return 0;
                if (one_call(c, what, endpoint) < 0) {
                        fprintf(stderr, "gitcd call failed: %s\n", etcd_client_last_error(c));
                        etcd_client_free(c);
                        return 0;
                }
                if (!reuse) {
                        etcd_client_free(c);
                        c = NULL;
                }
                n++;
        }
        double took = (double)(now_mono_ms() - t0) / 1000.0;
        etcd_client_free(c);
        return (double)n / took;
}

static int spawn_wait(char *const argv[])
{
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                int fd = open("/dev/null", O_WRONLY);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execv(argv[0], argv);
                _exit(127);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid)
                return -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double bench_etcdctl(const char *etcdctl, const char *endpoints, const char *endpoint,
                            enum call what)
{
        char *ep_flag = xasprintf("--endpoints=%s", what == CALL_STATUS ? endpoint : endpoints);
        char *argv_list[] = {(char *)etcdctl, ep_flag, "member", "list", NULL};
        char *argv_status[] = {(char *)etcdctl, ep_flag, "endpoint", "status", NULL};
        char **argv = what == CALL_MEMBER_LIST ? argv_list : argv_status;
        long n = 0;
        int64_t t0 = now_mono_ms(), end = t0 + (int64_t)(seconds * 1000);
        while (now_mono_ms() < end) {
                if (spawn_wait(argv) != 0) {
                        fprintf(stderr, "etcdctl failed\n");
                        free(ep_flag);
                        return 0;
                }
                n++;
        }
        double took = (double)(now_mono_ms() - t0) / 1000.0;
        free(ep_flag);
        return (double)n / took;
}

int main(int argc, char **argv)
{
        const char *version = argc > 1 ? argv[1] : "3.5.16";
        if (argc > 2)
                seconds = atof(argv[2]) > 0 ? atof(argv[2]) : seconds;
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed\n", version);
                return 1;
        }
        harness_opts o = {.version = version, .members = 3};
        harness_cluster *c = NULL;
        if (harness_cluster_start(&o, &c) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return 1;
        }
        setenv("ETCDCTL_API", "3", 1);
        const char *ep = c->members[0].client_url;
        printf("etcd %s, 3 members on 127.0.0.1, %.1f s per measurement\n\n", version, seconds);
        printf("%-11s %14s %16s %16s %10s\n", "call", "gitcd reused", "gitcd new/call",
               "etcdctl spawn", "ratio");
        const char *names[] = {"MemberList", "Status"};
        for (int w = CALL_MEMBER_LIST; w <= CALL_STATUS; w++) {
                double reused = bench_gitcd(c->endpoints, ep, (enum call)w, true);
                double fresh = bench_gitcd(c->endpoints, ep, (enum call)w, false);
                double ctl = bench_etcdctl(c->etcdctl_bin, c->endpoints, ep, (enum call)w);
                printf("%-11s %12.0f/s %14.0f/s %14.1f/s %9.0fx\n", names[w], reused, fresh, ctl,
                       ctl > 0 ? reused / ctl : 0.0);
                fflush(stdout);
        }
        printf("\nratio = gitcd (reused client) / etcdctl (one process per call)\n");
        harness_cluster_free(c);
        return 0;
}

/*
 * bench-push: how long a commit takes to reach the reconciler with a push
 * webhook, against polling, measured on the same daemon. Prints figures;
 * never fails on timing.
 *
 * The lab of tests/ops/push-lab.h: a real Git server over HTTPS (git
 * http-backend), `gitcd run` reading it with a webhook secret and
 * --interval D, one single-member cluster on real etcd (local target).
 * Each round commits a change of the cluster's spec (its
 * progressDeadlineSeconds, which restarts nothing) and pushes it to the
 * server; the clock starts when `git push` returned and stops when the
 * daemon logs that the reconciler took the new spec in ("accepted spec",
 * the audit log's spec.accepted: the first step of the new commit).
 *
 *   push  N rounds, each followed at once by a signed GitHub push event to
 *         /hooks/github
 *   poll  M rounds without a push: the daemon's poll finds the commit;
 *         each round starts right after the poll that ended the one
 *         before, so it waits about a whole interval (a commit made at a
 *         random moment waits D/2 on average)
 *
 * usage: bench-push [--pushes N] [--polls M] [--interval D]
 *        (defaults: --pushes 20 --polls 3 --interval 10s)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/ops/push-lab.h"
#include "util/http.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static char *cluster_yaml(int deadline)
{
        return xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                         "kind: EtcdCluster\n"
                         "metadata:\n"
                         "  name: alpha\n"
                         "  namespace: default\n"
                         "spec:\n"
                         "  replicas: 1\n"
                         "  version: \"3.5.16\"\n"
                         "  progressDeadlineSeconds: %d\n",
                         deadline);
}

#define ACCEPTED "default/alpha: accepted spec"

/*
 * One round: commit and push the next spec, post the hook when asked; the
 * milliseconds until the daemon accepted it, or -1 after 5 minutes.
 */
static int64_t round_ms(push_lab *l, int deadline, bool hook)
{
        int before = push_lab_log_count(l, ACCEPTED);
        _cleanup_free_ char *yaml = cluster_yaml(deadline);
        _cleanup_free_ char *commit = push_lab_commit(l, "clusters/alpha.yaml", yaml);
        int64_t t0 = now_mono_ms();
        if (hook && push_lab_github_push(l, PUSH_LAB_SECRET, commit) != 202) {
                fprintf(stderr, "bench-push: the hook was not accepted\n");
                return -1;
        }
        while (push_lab_log_count(l, ACCEPTED) <= before) {
                if (now_mono_ms() - t0 > 300000)
                        return -1;
                usleep(5 * 1000);
        }
        return now_mono_ms() - t0;
}

static int cmp(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

static void print_row(const char *what, int64_t *v, int n)
{
        if (n == 0) {
                printf("%-6s  no round finished\n", what);
                return;
        }
        qsort(v, (size_t)n, sizeof(*v), cmp);
        int p50 = (n - 1) / 2, p90 = (int)((n - 1) * 0.9 + 0.5);
        printf("%-6s %3d  %8lld %8lld %8lld %8lld\n", what, n, (long long)v[0], (long long)v[p50],
               (long long)v[p90], (long long)v[n - 1]);
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        int pushes = 20, polls = 3;
        const char *interval = "10s";
        for (int i = 1; i + 1 < argc; i += 2) {
                if (streq(argv[i], "--pushes"))
                        pushes = atoi(argv[i + 1]);
                else if (streq(argv[i], "--polls"))
                        polls = atoi(argv[i + 1]);
                else if (streq(argv[i], "--interval"))
                        interval = argv[i + 1];
                else {
                        fprintf(stderr,
                                "usage: bench-push [--pushes N] [--polls M] [--interval D]\n");
                        return 2;
                }
        }
        if (!getenv("GITCD_BIN"))
                setenv("GITCD_BIN", GITCD_BIN, 1);
        if (!getenv("GITCD_SOURCE_ROOT"))
                setenv("GITCD_SOURCE_ROOT", GITCD_SOURCE_ROOT, 1);
        push_lab *l = push_lab_new();
        if (!l)
                return 77;
        push_lab_start_daemon(l, interval);
        /* the cluster, created by a first push, running before the rounds */
        int64_t first = round_ms(l, 120, true);
        if (first < 0 || !e2e_wait_ready(l->e, "alpha", 1, 300)) {
                fprintf(stderr, "bench-push: the cluster did not start\n");
                push_lab_free(l);
                return 1;
        }
        int64_t *push_ms = xcalloc((size_t)pushes + 1, sizeof(int64_t));
        int64_t *poll_ms = xcalloc((size_t)polls + 1, sizeof(int64_t));
        int n_push = 0, n_poll = 0, deadline = 121;
        for (int i = 0; i < pushes; i++) {
                int64_t ms = round_ms(l, deadline++, true);
                if (ms >= 0)
                        push_ms[n_push++] = ms;
        }
        for (int i = 0; i < polls; i++) {
                int64_t ms = round_ms(l, deadline++, false);
                if (ms >= 0)
                        poll_ms[n_poll++] = ms;
        }
        int fetches = push_lab_fetches(l);
        printf("bench-push: commit pushed to the Git server -> the reconciler accepted its spec\n");
        printf("(gitcd run --interval %s, local target, one single-member cluster on etcd "
               "3.5.16)\n\n",
               interval);
        printf("%-6s %3s  %8s %8s %8s %8s\n", "", "n", "min ms", "p50 ms", "p90 ms", "max ms");
        print_row("push", push_ms, n_push);
        print_row("poll", poll_ms, n_poll);
        printf("\nfetches of the source in all: %d (1 at the start, 1 per push: %d with the "
               "cluster's creation, 1 per poll round)\n",
               fetches, pushes + 1);
        free(push_ms);
        free(poll_ms);
        push_lab_free(l);
        return 0;
}

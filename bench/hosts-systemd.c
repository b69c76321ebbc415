/*
 * bench/hosts-systemd: a bootstrap of 3 members by the hosts target in
 * systemd mode on real systemd, beside the same three units started by
 * hand at once. Three machines boot systemd 252 under systemd-nspawn
 * (tests/harness/nspawn.h: the bookworm root file system scripts/setup
 * caches, sshd, etcd 3.5.16 at /usr/local/bin/etcd, private addresses in
 * this process's own network namespace).
 *
 *   - gitcd: `gitcd apply --target hosts` of a 3-member cluster in mode
 *     systemd on a fresh state store and empty machines, until every
 *     member answers /health;
 *   - by hand: gitcd's three units as it wrote them, stopped, their data
 *     wiped, then `systemctl start` on the three machines in parallel (one
 *     SSH command each; systemd's start of the Type=notify unit returns at
 *     READY=1, once a quorum formed), until every member answers /health.
 *
 * Each figure is the median of 3 runs (BENCH_RUNS=N: N runs, at most 15),
 * gitcd and by hand alternating; the ratio is gitcd / by hand (the aim:
 * 1.5x at most). With GITCD_BIN_BEFORE set, each run also applies with
 * that gitcd (an older build) first, so before, after and by hand
 * alternate on the same machines and the same load; the load average is
 * printed with the figures. Prints figures only; never fails on timing.
 * Needs root, systemd-nspawn and the cached root file system (it says
 * which is missing); it runs gitcd from $GITCD_BIN, else the build tree's
 * cli/gitcd beside bench/. With BENCH_SHOW_APPLY=1 it prints each apply's
 * output (with GITCD_LOG_LEVEL=debug GITCD_LOG_TIME=1: every SSH command,
 * timed).
 *
 *   bench-hosts-systemd
 *   GITCD_BIN_BEFORE=/path/to/older/gitcd BENCH_RUNS=5 bench-hosts-systemd
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd/health.h"
#include "tests/harness/harness.h"
#include "tests/harness/nspawn.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MACHINES   3
#define VERSION    "3.5.16"
#define RUNS_MAX   15
#define CLUSTER    "bench"
#define UNIT       "etcd-default-" CLUSTER ".service"
#define DATA_DIR   "/var/lib/etcd/default-" CLUSTER
#define TIMEOUT_MS 120000

static nspawn_lab *L;
static int runs = 3;

static char *find_gitcd(void)
{
        const char *env = getenv("GITCD_BIN");
        if (env && *env)
                return xstrdup(env);
        _cleanup_free_ char *self = realpath("/proc/self/exe", NULL);
        if (!self)
                return NULL;
        *strrchr(self, '/') = 0; /* <build>/bench */
        return xasprintf("%s/../cli/gitcd", self);
}

/* Run a shell command on every machine at once; true when every one exited 0. */
static bool on_all(const char *command)
{
        pid_t pids[MACHINES];
        for (size_t i = 0; i < MACHINES; i++) {
                pids[i] = fork();
                if (pids[i] == 0)
                        _exit(nspawn_ssh(L, i, command, NULL) == 0 ? 0 : 1);
        }
        bool ok = true;
        for (size_t i = 0; i < MACHINES; i++) {
                int st = 0;
                if (pids[i] < 0 || waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) ||
                    WEXITSTATUS(st) != 0)
                        ok = false;
        }
        return ok;
}

/* Wait until every member answers /health; false after until. */
static bool wait_healthy(int64_t until)
{
        etcd_health_opts o = {.timeout_ms = 1000};
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *url = xasprintf("http://%s:2379", L->machines[i].address);
                for (;;) {
                        _cleanup_free_ char *detail = NULL;
                        if (etcd_member_health(url, &o, &detail) == 1)
                                break;
                        if (now_mono_ms() >= until)
                                return false;
                        msleep(20);
                }
        }
        return true;
}

/* Nothing of the cluster left on the machines: no unit, no data. */
static bool clean_machines(void)
{
        return on_all("systemctl disable --now " UNIT " 2>/dev/null; rm -f "
                      "/etc/systemd/system/" UNIT " && systemctl daemon-reload && rm -rf " DATA_DIR
                      " /etc/etcd/default-" CLUSTER);
}

/* gitcd_bin's apply on a fresh state store, until every member is healthy: ms, or -1. */
static int64_t gitcd_run(const char *gitcd_bin)
{
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-bench-hosts");
        _cleanup_free_ char *src = path_join(dir, "source");
        _cleanup_free_ char *spec = path_join(src, CLUSTER ".yaml");
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb,
                  "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: " CLUSTER
                  "\nspec:\n  replicas: %d\n  version: \"" VERSION "\"\n"
                  "  hosts:\n    mode: systemd\n    machines:\n",
                  MACHINES);
        for (size_t i = 0; i < MACHINES; i++)
                sb_printf(&sb, "    - address: %s\n", L->machines[i].address);
        if (mkdir_p(src, 0755) < 0 || write_file_atomic(spec, sb_str(&sb), sb.len, 0644) < 0) {
                sb_release(&sb);
                return -1;
        }
        sb_release(&sb);
        _cleanup_free_ char *cmd = xasprintf(
            "GITCD_STATE_DIR='%s/state' '%s' apply --source '%s' --target hosts "
            "--hosts-ssh-key '%s' --hosts-known-hosts '%s' --timeout 120s >'%s/apply.log' 2>&1",
            dir, gitcd_bin, src, L->client_key, L->known_hosts, dir);
        int64_t t0 = now_mono_ms();
        int st = system(cmd);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "gitcd apply failed; its output:\n");
                _cleanup_free_ char *show = xasprintf("cat '%s/apply.log' >&2", dir);
                (void)system(show);
                return -1;
        }
        if (!wait_healthy(t0 + TIMEOUT_MS))
                return -1;
        if (getenv("BENCH_SHOW_APPLY")) {
                _cleanup_free_ char *show = xasprintf("cat '%s/apply.log' >&2", dir);
                (void)system(show);
        }
        return now_mono_ms() - t0;
}

/* gitcd's units, stopped and wiped, started by hand at once: ms until healthy, or -1. */
static int64_t by_hand(void)
{
        if (!on_all("systemctl stop " UNIT " && rm -rf " DATA_DIR "/member"))
                return -1;
        int64_t t0 = now_mono_ms();
        if (!on_all("systemctl start " UNIT)) {
                for (size_t i = 0; i < MACHINES; i++) {
                        _cleanup_free_ char *log = NULL;
                        (void)nspawn_ssh(L, i, "journalctl -q -n 15 --no-pager -u " UNIT, &log);
                        fprintf(stderr, "--- %s:\n%s", L->machines[i].address, log ? log : "");
                }
                return -1;
        }
        if (!wait_healthy(t0 + TIMEOUT_MS))
                return -1;
        return now_mono_ms() - t0;
}

static int64_t median(int64_t *v)
{
        for (int i = 0; i < runs; i++)
                if (v[i] < 0)
                        return -1;
        for (int i = 1; i < runs; i++)
                for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
                        int64_t t = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = t;
                }
        return v[runs / 2];
}

static void print_load(const char *when)
{
        double l[3];
        if (getloadavg(l, 3) == 3)
                printf("load average %s: %.2f %.2f %.2f (%ld cores)\n", when, l[0], l[1], l[2],
                       sysconf(_SC_NPROCESSORS_ONLN));
}

int main(void)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        _cleanup_free_ char *why = NULL;
        if (!nspawn_available(&why)) {
                fprintf(stderr, "bench-hosts-systemd: %s\n", why);
                return 1;
        }
        _cleanup_free_ char *etcd = harness_etcd_path(VERSION, "etcd");
        _cleanup_free_ char *gitcd_bin = find_gitcd();
        const char *before_bin = getenv("GITCD_BIN_BEFORE");
        if (before_bin && !*before_bin)
                before_bin = NULL;
        if (!etcd || access(etcd, X_OK) != 0 || !gitcd_bin || access(gitcd_bin, X_OK) != 0 ||
            (before_bin && access(before_bin, X_OK) != 0)) {
                fprintf(stderr, "bench-hosts-systemd: etcd " VERSION " or gitcd (%s%s%s) missing\n",
                        gitcd_bin ? gitcd_bin : "?", before_bin ? ", " : "",
                        before_bin ? before_bin : "");
                return 1;
        }
        const char *n = getenv("BENCH_RUNS");
        if (n && *n)
                runs = MAX(1, MIN(RUNS_MAX, atoi(n)));
        signal(SIGPIPE, SIG_IGN);
        int64_t t0 = now_mono_ms();
        if (nspawn_lab_start(MACHINES, etcd, TIMEOUT_MS, &L) < 0)
                return 1;
        printf("machines: %d booted (systemd 252 under systemd-nspawn) in %.2f s\n", MACHINES,
               (now_mono_ms() - t0) / 1000.0);
        print_load("at the start");

        int64_t b[RUNS_MAX], g[RUNS_MAX], h[RUNS_MAX];
        bool failed = false;
        for (int r = 0; r < runs && !failed; r++) {
                b[r] = 0;
                if (before_bin) {
                        if (!clean_machines()) {
                                fprintf(stderr, "bench-hosts-systemd: cannot clean the machines\n");
                                b[r] = g[r] = h[r] = -1;
                                break;
                        }
                        b[r] = gitcd_run(before_bin);
                }
                if (!clean_machines()) {
                        fprintf(stderr, "bench-hosts-systemd: cannot clean the machines\n");
                        b[r] = g[r] = h[r] = -1;
                        break;
                }
                g[r] = gitcd_run(gitcd_bin);
                h[r] = g[r] < 0 ? -1 : by_hand();
                failed = b[r] < 0 || g[r] < 0 || h[r] < 0;
                if (before_bin)
                        printf("run %d: gitcd before %.2f s, gitcd %.2f s, by hand %.2f s\n", r + 1,
                               b[r] / 1000.0, g[r] / 1000.0, h[r] / 1000.0);
                else
                        printf("run %d: gitcd %.2f s, by hand %.2f s\n", r + 1, g[r] / 1000.0,
                               h[r] / 1000.0);
                fflush(stdout);
        }
        int64_t bm = failed ? -1 : median(b), gm = failed ? -1 : median(g),
                hm = failed ? -1 : median(h);
        printf("\nbootstrap of %d members, systemd mode, median of %d:\n", MACHINES, runs);
        if (gm < 0 || hm < 0 || bm < 0) {
                printf("  a run failed; no figure\n");
        } else {
                if (before_bin)
                        printf("  gitcd before (%s):  %6.2f s  %6.2fx\n", before_bin, bm / 1000.0,
                               (double)bm / (double)hm);
                printf("  gitcd apply until every member is healthy:  %6.2f s\n", gm / 1000.0);
                printf("  by hand (3 x systemctl start at once):       %6.2f s\n", hm / 1000.0);
                printf(
                    "  ratio gitcd / by hand:                       %6.2fx (aim: 1.5x at most)\n",
                    (double)gm / (double)hm);
        }
        print_load("at the end");
        (void)clean_machines();
        nspawn_lab_free(L);
        return 0;
}

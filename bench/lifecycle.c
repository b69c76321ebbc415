/*
 * bench/lifecycle: how fast gitcd drives real etcd on the local target,
 * each figure beside what etcd itself needs for the same change, measured
 * right before it with the same etcd binary (one etcd version, default
 * 3.5.16):
 *
 *   - bootstrap of 3 and of 5 members: `apply` to every member healthy,
 *     against the static-bootstrap limit: N etcd processes started by hand
 *     together with one static --initial-cluster (the test harness), until
 *     every one answers /health;
 *   - one scale-up step on an idle cluster, against the same step by hand
 *     (3 → 4): MemberAdd as a learner, start it, promote it once etcd lets;
 *   - a replaced member after data loss on an idle cluster (no by-hand
 *     figure: by hand it is a remove plus the step above).
 *
 * First, and alone with `bench-lifecycle VERSION apply`: the bootstrap of 3
 * members as a person sees it, `gitcd apply --wait` of a 3-member cluster
 * (the binary, a fresh state folder each run, from exec to exit) against
 * the limit etcd sets: 3 etcd processes of one static initial cluster
 * started at once by hand, each member's /health asked every 20 ms until
 * every one says true (from the first start to the last true). The median
 * of APPLY_RUNS each, alternating, and the ratio (the goal: within 1.3x).
 *
 * "Idle" means every voter has been connected for etcd's 5 s health
 * interval, which etcd waits for before it accepts a membership change.
 * Each figure is the median of 3 runs, by hand and gitcd alternating.
 * Ratios are gitcd / by hand (the target for bootstrap: 1.3x).
 * Prints figures only; never fails on timing, and is not part of the test
 * suite (it needs the harness, so it is built with the tests).
 *
 *   bench-lifecycle [VERSION] [apply]
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd/client.h"
#include "bench/world.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define IDLE_MS        5500 /* etcd's health interval, and a little */
#define RUNS           3    /* each figure is the median of this many runs */
#define APPLY_RUNS     5    /* apply --wait against the /health limit: median of this many */
#define HEALTH_POLL_MS 20   /* how often the limit asks each member's /health */

static bench_world world;

static void write_spec(const char *name, int replicas, const char *version)
{
        _cleanup_free_ char *body =
            xasprintf("  replicas: %d\n  version: \"%s\"\n", replicas, version);
        bench_world_write_spec(&world, name, body);
}

/* The median of RUNS figures; -1 when any run failed. */
static int64_t median(int64_t v[RUNS])
{
        for (int i = 0; i < RUNS; i++)
                if (v[i] < 0)
                        return -1;
        for (int i = 1; i < RUNS; i++)
                for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
                        int64_t x = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = x;
                }
        return v[RUNS / 2];
}

static double sec(int64_t ms)
{
        return (double)ms / 1000.0;
}

static void print_row(const char *what, int64_t by_hand, int64_t gitcd)
{
        if (by_hand > 0 && gitcd > 0)
                printf("  %-34s by hand %6.2f s   gitcd %6.2f s   %5.2fx\n", what, sec(by_hand),
                       sec(gitcd), (double)gitcd / (double)by_hand);
        else if (gitcd > 0)
                printf("  %-34s %25s gitcd %6.2f s\n", what, "", sec(gitcd));
        else
                printf("  %-34s failed (by hand %lld ms, gitcd %lld ms)\n", what,
                       (long long)by_hand, (long long)gitcd);
}

/* ---- gitcd apply --wait against the /health limit ---------------------- */

static void sleep_for_ms(int ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static size_t keep_body(char *p, size_t size, size_t n, void *ud)
{
        sb_append_len(ud, p, size * n);
        return size * n;
}

/* One GET of a member's /health: true when etcd says "health":"true". */
static bool healthy(CURL *h, int client_port)
{
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/health", client_port);
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(h, CURLOPT_PROXY, "");
        bool ok = curl_easy_perform(h) == CURLE_OK &&
                  strstr(sb_str(&body), "\"health\":\"true\"") != NULL;
        sb_release(&body);
        return ok;
}

static pid_t spawn(char *const argv[], char *const envp[])
{
        pid_t pid = fork();
        if (pid == 0) {
                int fd = open("/dev/null", O_RDWR);
                if (fd >= 0) {
                        dup2(fd, 0);
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                if (envp)
                        execve(argv[0], argv, envp);
                else
                        execv(argv[0], argv);
                _exit(127);
        }
        return pid;
}

/* 3 etcd of one static initial cluster started at once, until all answer /health true. */
static int64_t health_limit(const char *version)
{
        _cleanup_free_ char *etcd = harness_etcd_path(version, "etcd");
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-bench-limit");
        int cport[3], pport[3];
        strbuf ic = STRBUF_INIT;
        for (int i = 0; i < 3; i++) {
                cport[i] = harness_free_port();
                pport[i] = harness_free_port();
                sb_printf(&ic, "%sm%d=http://127.0.0.1:%d", i ? "," : "", i, pport[i]);
        }
        pid_t pids[3] = {0};
        CURL *h = curl_easy_init();
        int64_t t0 = now_mono_ms(), ms = -1;
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("--name=m%d", i);
                _cleanup_free_ char *data = xasprintf("--data-dir=%s/m%d", dir, i);
                _cleanup_free_ char *lc =
                    xasprintf("--listen-client-urls=http://127.0.0.1:%d", cport[i]);
                _cleanup_free_ char *ac =
                    xasprintf("--advertise-client-urls=http://127.0.0.1:%d", cport[i]);
                _cleanup_free_ char *lp =
                    xasprintf("--listen-peer-urls=http://127.0.0.1:%d", pport[i]);
                _cleanup_free_ char *ap =
                    xasprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", pport[i]);
                _cleanup_free_ char *icf = xasprintf("--initial-cluster=%s", sb_str(&ic));
                char *argv[] = {etcd,
                                name,
                                data,
                                lc,
                                ac,
                                lp,
                                ap,
                                icf,
                                "--initial-cluster-state=new",
                                "--initial-cluster-token=limit",
                                NULL};
                pids[i] = spawn(argv, NULL);
        }
        bool up[3] = {false, false, false};
        while (now_mono_ms() - t0 < 60000) {
                int n = 0;
                for (int i = 0; i < 3; i++)
                        n += up[i] || (up[i] = healthy(h, cport[i]));
                if (n == 3) {
                        ms = now_mono_ms() - t0;
                        break;
                }
                sleep_for_ms(HEALTH_POLL_MS);
        }
        for (int i = 0; i < 3; i++)
                if (pids[i] > 0) {
                        kill(pids[i], SIGKILL);
                        waitpid(pids[i], NULL, 0);
                }
        curl_easy_cleanup(h);
        sb_release(&ic);
        (void)rm_rf(dir);
        return ms;
}

/* gitcd apply --wait of a 3-member cluster in a fresh state folder, from exec to exit. */
static int64_t apply_wait(const char *version)
{
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-bench-apply");
        _cleanup_free_ char *src = path_join(dir, "src");
        _cleanup_free_ char *spec_path = path_join(src, "etcd.yaml");
        _cleanup_free_ char *state = path_join(dir, "state");
        _cleanup_free_ char *spec = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: boot\n  namespace: default\n"
                                              "spec:\n  replicas: 3\n  version: \"%s\"\n",
                                              version);
        (void)mkdir_p(src, 0755);
        if (write_file_atomic(spec_path, spec, strlen(spec), 0644) < 0)
                return -1;
        _cleanup_free_ char *etcd_dir = harness_etcd_dir();
        _cleanup_free_ char *env_state = xasprintf("GITCD_STATE_DIR=%s", state);
        _cleanup_free_ char *env_etcd = xasprintf("GITCD_ETCD_DIR=%s", etcd_dir);
        char *envp[] = {env_state, env_etcd, "PATH=/usr/bin:/bin", NULL};
        char *argv[] = {GITCD_BIN, "apply", "--source", src, "--wait", "-q", "-o", "plain", NULL};
        int64_t t0 = now_mono_ms();
        pid_t pid = spawn(argv, envp);
        int st = 0;
        bool ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
        int64_t ms = now_mono_ms() - t0;
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *pidf =
                    xasprintf("%s/clusters/default/boot/boot-%d/pid", state, i);
                char *data = NULL;
                size_t len;
                if (read_file(pidf, 64, &data, &len) == 0) {
                        kill((pid_t)atoi(data), SIGKILL);
                        free(data);
                }
        }
        sleep_for_ms(200); /* the killed members let go of their files */
        (void)rm_rf(dir);
        return ok ? ms : -1;
}

static int64_t median_of(int64_t *v, int n)
{
        for (int i = 0; i < n; i++)
                if (v[i] < 0)
                        return -1;
        for (int i = 1; i < n; i++)
                for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
                        int64_t x = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = x;
                }
        return v[n / 2];
}

static void apply_against_limit(const char *version)
{
        int64_t limit[APPLY_RUNS], apply[APPLY_RUNS];
        printf("  %-34s", "apply --wait, 3 members, each run:");
        for (int r = 0; r < APPLY_RUNS; r++) {
                limit[r] = health_limit(version);
                apply[r] = apply_wait(version);
                printf(" %.2f/%.2f", sec(limit[r]), sec(apply[r]));
                fflush(stdout);
        }
        printf("  (limit/apply, s)\n");
        int64_t l = median_of(limit, APPLY_RUNS), a = median_of(apply, APPLY_RUNS);
        if (l > 0 && a > 0)
                printf("  %-34s limit   %6.2f s   apply %6.2f s   %5.2fx\n",
                       "bootstrap of 3 (median of 5)", sec(l), sec(a), (double)a / (double)l);
        else
                printf("  bootstrap of 3: a run failed (limit %lld ms, apply %lld ms)\n",
                       (long long)l, (long long)a);
        printf("  limit: 3 etcd started at once by hand, /health every %d ms until all true\n\n",
               HEALTH_POLL_MS);
}

/* The static-bootstrap limit: n members started together, until every one is healthy. */
static int64_t by_hand_bootstrap(const char *version, size_t n)
{
        harness_opts o = {.version = version, .members = n};
        harness_cluster *c = NULL;
        int64_t t0 = now_mono_ms();
        if (harness_cluster_start(&o, &c) < 0)
                return -1;
        int64_t ms = now_mono_ms() - t0;
        harness_cluster_free(c);
        return ms;
}

/* One learner by hand on an idle 3-member cluster: MemberAdd, start, promote. */
static int64_t by_hand_scale_step(const char *version)
{
        harness_opts o = {.version = version, .members = 3};
        harness_cluster *c = NULL;
        if (harness_cluster_start(&o, &c) < 0)
                return -1;
        etcd_client_opts co = {.endpoints = c->endpoints};
        etcd_client *cl = NULL;
        if (etcd_client_new(&co, &cl) < 0) {
                harness_cluster_free(c);
                return -1;
        }
        usleep(IDLE_MS * 1000);

        int peer_port = harness_free_port(), client_port = harness_free_port();
        char *peer = xasprintf("http://127.0.0.1:%d", peer_port);
        const char *urls[] = {peer};
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < c->n; i++)
                sb_printf(&ic, "%s=%s,", c->members[i].name, c->members[i].peer_url);
        sb_printf(&ic, "m3=%s", peer);

        int64_t t0 = now_mono_ms(), ms = -1;
        uint64_t id = 0;
        size_t idx;
        int k = etcd_member_add(cl, urls, 1, true, &id, NULL);
        if (k >= 0)
                k = harness_member_start_joining(c, "m3", peer_port, client_port, sb_str(&ic),
                                                 &idx);
        while (k >= 0) {
                k = etcd_member_promote(cl, id);
                if (k == 0) {
                        ms = now_mono_ms() - t0;
                        break;
                }
                if (k == ETCD_ERR_MEMBER_NOT_IN_SYNC && now_mono_ms() - t0 < 60000) {
                        k = 0;
                        usleep(50 * 1000);
                }
        }
        sb_release(&ic);
        free(peer);
        etcd_client_free(cl);
        harness_cluster_free(c);
        return ms;
}

/* Kill the newest member of a cluster and delete its data (its host lost the disk). */
static const char *lose_newest(const char *name)
{
        static char victim[128];
        char **names = NULL;
        size_t n = 0;
        victim[0] = '\0';
        if (world.tgt->ops->list_members(world.tgt, "default", name, &names, &n) < 0 || n == 0)
                return NULL;
        snprintf(victim, sizeof(victim), "%s", names[n - 1]);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        _cleanup_free_ char *dir = xasprintf("%s/clusters/default/%s/%s", world.root, name, victim);
        _cleanup_free_ char *pidf = path_join(dir, "pid");
        char *data = NULL;
        size_t len;
        if (read_file(pidf, 64, &data, &len) == 0) {
                kill((pid_t)atoi(data), SIGKILL);
                free(data);
        }
        usleep(100 * 1000);
        _cleanup_free_ char *ddir = path_join(dir, "data");
        (void)rm_rf(ddir);
        return victim;
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        const char *version = argc > 1 ? argv[1] : "3.5.16";
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", version);
                return 1;
        }
        log_set_level(LOG_ERROR);
        printf("gitcd lifecycle benchmark, etcd %s on the local target (loopback)\n", version);
        printf("each gitcd figure beside the same change by hand, measured right before it\n\n");
        apply_against_limit(version);
        if (argc > 2 && streq(argv[2], "apply"))
                return 0;
        bench_world_open(&world, "gitcd-bench");

        /*
         * Bootstrap: the static limit, then gitcd (a static bootstrap, the
         * default), alternating, RUNS times each; every gitcd run is a new
         * cluster, removed once measured.
         */
        static const int sizes[] = {3, 5};
        for (size_t i = 0; i < 2; i++) {
                int n = sizes[i];
                int64_t limit[RUNS], t[RUNS];
                for (int r = 0; r < RUNS; r++) {
                        limit[r] = by_hand_bootstrap(version, (size_t)n);
                        _cleanup_free_ char *name = xasprintf("boot%d-%d", n, r);
                        write_spec(name, n, version);
                        t[r] = bench_world_converge(&world, 120000);
                        if (n != 3 || r != 0) {
                                bench_world_remove_spec(&world, name);
                                bench_world_remove_cluster(&world, name);
                        }
                }
                _cleanup_free_ char *what = xasprintf("bootstrap of %d members", n);
                print_row(what, median(limit), median(t));
        }

        /* Scale-up steps on an idle cluster (boot3-0: 3 → 4 → 5 → 6). */
        int64_t hand_step[RUNS], t_step[RUNS];
        for (int r = 0; r < RUNS; r++) {
                hand_step[r] = by_hand_scale_step(version);
                usleep(IDLE_MS * 1000);
                write_spec("boot3-0", 4 + r, version);
                t_step[r] = bench_world_converge(&world, 120000);
        }
        print_row("scale-up step (idle)", median(hand_step), median(t_step));

        /* Replaced members after data loss, on an idle cluster. */
        int64_t t_rep[RUNS];
        for (int r = 0; r < RUNS; r++) {
                usleep(IDLE_MS * 1000);
                const char *victim = lose_newest("boot3-0");
                t_rep[r] = victim ? bench_world_converge(&world, 120000) : -1;
        }
        print_row("data loss → replaced (idle)", 0, median(t_rep));

        bench_world_close(&world);
        return 0;
}

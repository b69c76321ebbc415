/*
 * bench/tls: what certificate maintenance costs a 3-member cluster on the
 * local target with real etcd (tls.provider auto, client and peer TLS):
 *
 *   - leaf renewal: gitcd's renewal of every member's leaves (server,
 *     peer, its own client identity), from the moment the first leaf is
 *     due until the last is renewed, and how many members restarted;
 *     beside the usual way by hand (kubeadm certs renew and friends): new
 *     files, then every member restarted one at a time, each waited for
 *     until healthy, measured right before on the same etcd binary with
 *     the test harness's TLS cluster.
 *
 *   - CA rotation (tls.auto.rotateCA): from the commit to the rotation's
 *     end (the headline), its own span from its audit events (phase 1
 *     started to phase 3 done: without reading the commit and the rest of
 *     the pass that records it done), each phase's share; beside two rolling restarts by hand
 *     (onto the bundle old+new, then onto the new CA alone: the least a
 *     rotation with no downtime needs, since etcd reads the CAs it trusts
 *     only when it starts), on a harness cluster of the same etcd. The two
 *     alternate, ROUNDS times (3, or the second argument), and the medians
 *     and their ratio are printed with the load average: etcd's graceful
 *     stop takes from a few ms to a second (its peer server's shutdown
 *     waits up to 1 s), so one round alone says little.
 *
 * Leaves live 30 s and are renewed 20 s before they expire, so the first
 * renewal is due about 10 s after the cluster formed; the figure is the
 * time gitcd needs once it is due, not the 10 s of waiting.
 * Prints figures only; never fails on timing, and is not part of the test
 * suite (it needs the harness, so it is built with the tests).
 * GITCD_LOG_LEVEL=debug shows every pass, to see where the time goes.
 *
 *   bench-tls [VERSION [ROUNDS]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pki/pki.h"
#include "bench/world.h"
#include "render/layout.h"
#include "state/carotate.h"
#include "state/state.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MEMBERS      3
#define VALIDITY_S   30
#define RENEW_S      20
#define CLUSTER_NAME "tls3"

static bench_world world;

/* The cluster's spec; rotate_ca: a tls.auto.rotateCA token, or NULL. */
/*
 * The rotations run with leaves of a day (renewed an hour before): with the
 * renewal's 30 s leaves, renewals fell due during a rotation and were
 * counted in it.
 */
static bool long_leaves;

static void write_spec(const char *rotate_ca)
{
        _cleanup_free_ char *rot = rotate_ca ? xasprintf("      rotateCA: %s\n", rotate_ca) : NULL;
        _cleanup_free_ char *body = xasprintf("  replicas: %d\n  tls:\n    provider: auto\n"
                                              "    client:\n      enabled: true\n"
                                              "    peer:\n      enabled: true\n"
                                              "    auto:\n      validity: %ds\n"
                                              "      renewBefore: %ds\n%s",
                                              MEMBERS, long_leaves ? 86400 : VALIDITY_S,
                                              long_leaves ? 3600 : RENEW_S, rot ? rot : "");
        bench_world_write_spec(&world, CLUSTER_NAME, body);
}

static char *member_dir(size_t i)
{
        return xasprintf("%s/clusters/default/" CLUSTER_NAME "/" CLUSTER_NAME "-%zu", world.root,
                         i);
}

static pid_t member_pid(size_t i)
{
        _cleanup_free_ char *dir = member_dir(i);
        _cleanup_free_ char *pidf = path_join(dir, "pid");
        _cleanup_free_ char *data = NULL;
        size_t len;
        return read_file(pidf, 64, &data, &len) == 0 ? (pid_t)atoi(data) : 0;
}

static const char *const surfaces[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER, TLS_SUBDIR_OPERATOR};
#define LEAVES (MEMBERS * ARRAY_SIZE(surfaces))

/* Every member's leaves: serial and expiry; false when one cannot be read. */
static bool read_leaves(char *serials[LEAVES], int64_t not_after[LEAVES])
{
        for (size_t i = 0; i < MEMBERS; i++)
                for (size_t j = 0; j < ARRAY_SIZE(surfaces); j++) {
                        _cleanup_free_ char *mdir = member_dir(i);
                        _cleanup_free_ char *dir = xasprintf("%s/tls/%s", mdir, surfaces[j]);
                        size_t k = i * ARRAY_SIZE(surfaces) + j;
                        free(serials[k]);
                        serials[k] = NULL;
                        if (pki_leaf_info(dir, &not_after[k], &serials[k]) < 0)
                                return false;
                }
        return true;
}

/* Count the members whose process changed since last seen (pids[] updated). */
static int count_restarts(pid_t pids[MEMBERS])
{
        int n = 0;
        for (size_t i = 0; i < MEMBERS; i++) {
                pid_t now = member_pid(i);
                if (now && now != pids[i]) {
                        n++;
                        pids[i] = now;
                }
        }
        return n;
}

/*
 * The usual way by hand: every member restarted in turn, each waited for
 * until healthy, `times` rounds over (ms for all of them, -1 on failure).
 */
static int64_t by_hand_rolling_restarts(const char *version, int times)
{
        harness_opts o = {.version = version, .members = MEMBERS, .tls = true};
        harness_cluster *c = NULL;
        if (harness_cluster_start(&o, &c) < 0)
                return -1;
        int64_t t0 = now_mono_ms(), ms = -1;
        bool ok = true;
        for (int round = 0; round < times && ok; round++)
                for (size_t i = 0; i < c->n && ok; i++)
                        ok = harness_member_stop(c, i) >= 0 && harness_member_restart(c, i) >= 0 &&
                             harness_member_wait_healthy(c, i, 30000) >= 0;
        if (ok)
                ms = now_mono_ms() - t0;
        harness_cluster_free(c);
        return ms;
}

/*
 * What one CA rotation took (ms; -1: it did not finish, or the audit log
 * lacks the event): total, from the commit written to the benchmark's loop
 * seeing the rotation recorded done (the headline: it includes reading the
 * commit and the rest of the pass that records it done); span, the
 * rotation's own, from its audit events (phase 1 started to phase 3 done);
 * and each phase's share of the span.
 */
typedef struct rotation_figures {
        int64_t total, span, phase[4];
        int restarts;
} rotation_figures;

/* When the audit log says the rotation `token` did `what` (wall ms; 0: it did not). */
static int64_t audited_ms(const char *token, const char *what)
{
        state_audit_filter flt = {.cluster = "default/" CLUSTER_NAME, .action = "tls.ca-rotate"};
        state_audit_list l = {0};
        _cleanup_free_ char *head = xasprintf("CA rotation %s, ", token);
        int64_t at = 0;
        if (state_audit_query(world.db, &flt, &l) == 0)
                for (size_t i = 0; i < l.n; i++)
                        if (strneq(l.items[i]->reason, head, strlen(head)) &&
                            strstr(l.items[i]->reason, what))
                                at = l.items[i]->time_ms;
        state_audit_list_release(&l);
        return at;
}

/*
 * Commit rotateCA `token` and run the daemon's loop until the rotation is
 * over; each phase's share from the audit log (several phases can pass in
 * one step of the loop).
 */
static rotation_figures rotate_once(const char *token, pid_t pids[MEMBERS])
{
        rotation_figures f = {.total = -1};
        write_spec(token);
        int64_t t0 = now_mono_ms();
        diag_list diags = DIAG_LIST_INIT;
        (void)driver_sync(world.d, &diags);
        diag_list_release(&diags);
        (void)count_restarts(pids);
        while (now_mono_ms() - t0 < 300000) {
                (void)bench_world_step(&world);
                f.restarts += count_restarts(pids);
                state_ca_rotation *r = NULL;
                int running = state_ca_rotation_running(world.db, "default/" CLUSTER_NAME, &r);
                state_ca_rotation_free(r);
                if (running == -ENOENT &&
                    state_ca_rotation_token_used(world.db, "default/" CLUSTER_NAME, token) == 1) {
                        f.total = now_mono_ms() - t0;
                        break;
                }
        }
        int64_t at[5] = {audited_ms(token, "phase 1 (trust old+new CA): started"),
                         audited_ms(token, "phase 2 (reissue from new CA): started"),
                         audited_ms(token, "phase 3 (drop old CA): started"),
                         audited_ms(token, "phase 3 (drop old CA): done")};
        for (size_t p = 1; p <= 3; p++)
                f.phase[p] = at[p - 1] && at[p] ? at[p] - at[p - 1] : -1;
        f.span = at[0] && at[3] ? at[3] - at[0] : -1;
        return f;
}

static int cmp_ms(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

/* The median of n figures (sorted in place); -1 when one is missing. */
static int64_t median(int64_t *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] < 0)
                        return -1;
        qsort(v, n, sizeof(*v), cmp_ms);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MAX_ROUNDS 9

/*
 * CA rotations, each right after two rolling restarts by hand on a harness
 * cluster: per round, then the medians and their ratio.
 */
static void rotation_rounds(const char *version, int rounds, pid_t pids[MEMBERS])
{
        int64_t hand[MAX_ROUNDS], gitcd[MAX_ROUNDS], span[MAX_ROUNDS], phases[4][MAX_ROUNDS];
        int restarts = 0;
        for (int i = 0; i < rounds; i++) {
                hand[i] = by_hand_rolling_restarts(version, 2);
                _cleanup_free_ char *token = xasprintf("bench-%d", i + 1);
                rotation_figures f = rotate_once(token, pids);
                gitcd[i] = f.total;
                span[i] = f.span;
                for (size_t p = 1; p <= 3; p++)
                        phases[p][i] = f.phase[p];
                restarts = f.restarts;
                printf("  CA rotation, round %d: by hand %6.2f s (2 rolling restarts)   gitcd "
                       "%6.2f s (%.2fx; its own span %.2f s, %.2fx: phases %.2f + %.2f + %.2f "
                       "s, %d restarts)\n",
                       i + 1, hand[i] / 1000.0, f.total / 1000.0,
                       hand[i] > 0 ? (double)f.total / (double)hand[i] : 0.0, f.span / 1000.0,
                       hand[i] > 0 ? (double)f.span / (double)hand[i] : 0.0, f.phase[1] / 1000.0,
                       f.phase[2] / 1000.0, f.phase[3] / 1000.0, f.restarts);
                fflush(stdout);
        }
        int64_t mh = median(hand, (size_t)rounds), mg = median(gitcd, (size_t)rounds),
                ms = median(span, (size_t)rounds);
        double load[3] = {0};
        (void)getloadavg(load, 3);
        if (mh > 0 && mg > 0)
                printf("  %-40s by hand %6.2f s (%d restarts)   gitcd %6.2f s (%d restarts)   "
                       "%5.2fx\n"
                       "  %-40s %6.2f s   %5.2fx\n"
                       "  %-40s phase 1 %.2f s, phase 2 %.2f s, phase 3 %.2f s\n"
                       "  (medians of %d rounds; load average %.2f %.2f %.2f)\n",
                       "CA rotation (3 phases)", mh / 1000.0, 2 * MEMBERS, mg / 1000.0, restarts,
                       (double)mg / (double)mh, "  its own span (audit: phase 1 to 3 done)",
                       ms / 1000.0, mh > 0 && ms > 0 ? (double)ms / (double)mh : 0.0,
                       "  gitcd's phases (medians)", median(phases[1], (size_t)rounds) / 1000.0,
                       median(phases[2], (size_t)rounds) / 1000.0,
                       median(phases[3], (size_t)rounds) / 1000.0, rounds, load[0], load[1],
                       load[2]);
        else
                printf("  CA rotation: a round did not finish (by hand or gitcd)\n");
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        const char *version = argc > 1 ? argv[1] : "3.5.16";
        int rounds = argc > 2 ? atoi(argv[2]) : 3;
        if (rounds < 1 || rounds > MAX_ROUNDS) {
                fprintf(stderr, "ROUNDS is 1 to %d\n", MAX_ROUNDS);
                return 1;
        }
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", version);
                return 1;
        }
        if (!getenv(
                "GITCD_LOG_LEVEL")) /* GITCD_LOG_LEVEL=debug: the passes, to see where the time goes */
                log_set_level(LOG_ERROR);
        bench_world_open(&world, "gitcd-bench-tls");

        printf("gitcd TLS benchmark, etcd %s on the local target (loopback), %d members,\n"
               "client and peer TLS, leaves valid %d s and renewed %d s before expiry\n\n",
               version, MEMBERS, VALIDITY_S, RENEW_S);

        int64_t hand = by_hand_rolling_restarts(version, 1);

        write_spec(NULL);
        if (bench_world_converge(&world, 120000) < 0) {
                fprintf(stderr, "the cluster did not form\n");
                return 1;
        }
        char *before[LEAVES] = {0}, *now[LEAVES] = {0};
        int64_t not_after[LEAVES], ignored[LEAVES];
        pid_t pids[MEMBERS];
        for (size_t i = 0; i < MEMBERS; i++)
                pids[i] = member_pid(i);
        if (!read_leaves(before, not_after)) {
                fprintf(stderr, "cannot read the issued leaves\n");
                return 1;
        }
        int64_t due = INT64_MAX;
        for (size_t k = 0; k < LEAVES; k++)
                if (not_after[k] - RENEW_S * 1000 < due)
                        due = not_after[k] - RENEW_S * 1000;

        /* Run the daemon's loop until every leaf carries a new serial. */
        int64_t done = -1, deadline = now_mono_ms() + 120000;
        int restarts = 0;
        while (now_mono_ms() < deadline) {
                (void)bench_world_step(&world);
                restarts += count_restarts(pids);
                size_t renewed = 0;
                if (read_leaves(now, ignored))
                        for (size_t k = 0; k < LEAVES; k++)
                                renewed += !streq(now[k], before[k]);
                if (renewed == LEAVES) {
                        done = now_wall_ms();
                        break;
                }
        }

        if (done < 0)
                printf("  leaf renewal: not every leaf was renewed within two minutes\n");
        else if (hand > 0)
                printf("  %-40s by hand %6.2f s (%d restarts)   gitcd %6.2f s (%d restarts)   "
                       "%5.2fx\n",
                       "leaf renewal of every member", hand / 1000.0, MEMBERS,
                       (done - due) / 1000.0, restarts, (double)(done - due) / (double)hand);
        else
                printf("  %-40s gitcd %6.2f s (%d restarts); by hand failed\n",
                       "leaf renewal of every member", (done - due) / 1000.0, restarts);

        fflush(stdout);
        long_leaves = true; /* every leaf renewed once more, for a day, before the rotations */
        write_spec(NULL);
        if (bench_world_converge(&world, 120000) < 0) {
                fprintf(stderr, "the cluster did not take its day-long leaves\n");
                return 1;
        }
        rotation_rounds(version, rounds, pids);

        for (size_t k = 0; k < LEAVES; k++) {
                free(before[k]);
                free(now[k]);
        }
        bench_world_close(&world);
        return 0;
}

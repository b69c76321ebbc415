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
 * Leaves live 30 s and are renewed 20 s before they expire, so the first
 * renewal is due about 10 s after the cluster formed; the figure is the
 * time gitcd needs once it is due, not the 10 s of waiting.
 * Prints figures only; never fails on timing, and is not part of the test
 * suite (it needs the harness, so it is built with the tests).
 *
 *   bench-tls [VERSION]
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
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MEMBERS      3
#define VALIDITY_S   30
#define RENEW_S      20
#define CLUSTER_NAME "tls3"

static bench_world world;

/* The cluster's spec; rotate_ca: a tls.auto.rotateCA token, or NULL. */
static void write_spec(const char *rotate_ca)
{
        _cleanup_free_ char *rot = rotate_ca ? xasprintf("      rotateCA: %s\n", rotate_ca) : NULL;
        _cleanup_free_ char *body = xasprintf("  replicas: %d\n  tls:\n    provider: auto\n"
                                              "    client:\n      enabled: true\n"
                                              "    peer:\n      enabled: true\n"
                                              "    auto:\n      validity: %ds\n"
                                              "      renewBefore: %ds\n%s",
                                              MEMBERS, VALIDITY_S, RENEW_S, rot ? rot : "");
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

/* The usual way by hand: every member restarted in turn, each waited for until healthy. */
static int64_t by_hand_rolling_restart(const char *version)
{
        harness_opts o = {.version = version, .members = MEMBERS, .tls = true};
        harness_cluster *c = NULL;
        if (harness_cluster_start(&o, &c) < 0)
                return -1;
        int64_t t0 = now_mono_ms(), ms = -1;
        size_t i;
        for (i = 0; i < c->n; i++)
                if (harness_member_stop(c, i) < 0 || harness_member_restart(c, i) < 0 ||
                    harness_member_wait_healthy(c, i, 30000) < 0)
                        break;
        if (i == c->n)
                ms = now_mono_ms() - t0;
        harness_cluster_free(c);
        return ms;
}

int main(int argc, char **argv)
{
        const char *version = argc > 1 ? argv[1] : "3.5.16";
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", version);
                return 1;
        }
        log_set_level(LOG_ERROR);
        bench_world_open(&world, "gitcd-bench-tls");

        printf("gitcd TLS benchmark, etcd %s on the local target (loopback), %d members,\n"
               "client and peer TLS, leaves valid %d s and renewed %d s before expiry\n\n",
               version, MEMBERS, VALIDITY_S, RENEW_S);

        int64_t hand = by_hand_rolling_restart(version);

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

        /*
         * CA rotation (tls.auto.rotateCA): from the commit to the rotation's
         * end. By hand, with no downtime, it is two rolling restarts (onto
         * the bundle old+new, then onto the new CA alone) with the leaves
         * reissued between them: at least twice the rolling restart above.
         */
        write_spec("bench-1");
        int64_t t0 = now_mono_ms(), rotated = -1;
        diag_list diags = DIAG_LIST_INIT;
        (void)driver_sync(world.d, &diags);
        diag_list_release(&diags);
        restarts = 0;
        while (now_mono_ms() - t0 < 300000) {
                (void)bench_world_step(&world);
                restarts += count_restarts(pids);
                state_ca_rotation *r = NULL;
                int running = state_ca_rotation_running(world.db, "default/" CLUSTER_NAME, &r);
                state_ca_rotation_free(r);
                if (running == -ENOENT && state_ca_rotation_token_used(
                                              world.db, "default/" CLUSTER_NAME, "bench-1") == 1) {
                        rotated = now_mono_ms() - t0;
                        break;
                }
        }
        if (rotated < 0)
                printf("  CA rotation: not finished within five minutes\n");
        else if (hand > 0)
                printf("  %-40s by hand %6.2f s (%d restarts)   gitcd %6.2f s (%d restarts)   "
                       "%5.2fx\n",
                       "CA rotation (3 phases)", 2 * hand / 1000.0, 2 * MEMBERS, rotated / 1000.0,
                       restarts, (double)rotated / (double)(2 * hand));
        else
                printf("  %-40s gitcd %6.2f s (%d restarts); by hand failed\n",
                       "CA rotation (3 phases)", rotated / 1000.0, restarts);

        for (size_t k = 0; k < LEAVES; k++) {
                free(before[k]);
                free(now[k]);
        }
        bench_world_close(&world);
        return 0;
}

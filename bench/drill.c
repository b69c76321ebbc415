/*
 * Benchmark: what a restore drill costs, beside `etcdutl snapshot restore`
 * alone on the same snapshot file.
 *
 *   bench-drill [SIZE-MIB ...] [--version V]     (default 100 1024, 3.5.16)
 *
 * For each size, a one-member cluster (test harness) is filled with SIZE
 * MiB of values (512 KiB each), a snapshot is taken through gitcd's
 * pipeline into a local folder (uncompressed) and recorded in a state store
 * of its own. Then, on that one file:
 *   restore  `etcdutl snapshot restore` (`etcdctl` for 3.4) into a new
 *            folder, alone: what restoring costs at the least;
 *   drill    snapshot_drill(): fetch and check the file, unpack check, the
 *            same restore, a throwaway etcd started on it, HashKV on it and
 *            on the live member, everything removed.
 * Each is measured for wall time, CPU (user + system of gitcd and the
 * processes it waited for: etcd's tool, the throwaway etcd), peak disk
 * (restore: the restored folder; drill: its scratch folder, sampled every
 * 50 ms) and, for the drill, the CPU the live member spent answering
 * (its HashKV walks the whole keyspace). Prints figures and ratios only;
 * it never fails on timing. Needs about three times SIZE free in $TMPDIR.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/spec.h"
#include "etcd/client.h"
#include "snapshots/drill.h"
#include "snapstore/restore.h"
#include "snapshots/snapshot.h"
#include "snapstore/tool.h"
#include "state/snapshots.h"
#include "util/http.h"
#include "util/process.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VALUE_SIZE (512 * 1024)
#define WRITERS    8
#define MIB        (1024.0 * 1024.0)

typedef struct fill {
        pthread_t thread;
        const char *endpoints;
        int from, to;
        int failed;
} fill;

static void *fill_main(void *arg)
{
        fill *f = arg;
        etcd_client_opts o = {.endpoints = f->endpoints, .call_timeout_ms = 30000};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) < 0) {
                f->failed = 1;
                return NULL;
        }
        char *value = xmalloc(VALUE_SIZE);
        for (int i = f->from; i < f->to && !f->failed; i++) {
                for (size_t j = 0; j < VALUE_SIZE; j += 8)
                        snprintf(value + j, 9, "%07x", (unsigned)(i * 131 + (int)j) & 0xfffffff);
                char key[32];
                snprintf(key, sizeof(key), "bench/%08d", i);
                if (etcd_put(c, key, value, VALUE_SIZE, NULL) < 0) {
                        fprintf(stderr, "put %s: %s\n", key, etcd_client_last_error(c));
                        f->failed = 1;
                }
        }
        free(value);
        etcd_client_free(c);
        return NULL;
}

/* Bytes of the regular files under path (not following links). */
static int64_t tree_bytes(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return 0;
        if (!S_ISDIR(st.st_mode))
                return S_ISREG(st.st_mode) ? (int64_t)st.st_blocks * 512 : 0;
        DIR *d = opendir(path);
        if (!d)
                return 0;
        int64_t total = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (streq(e->d_name, ".") || streq(e->d_name, ".."))
                        continue;
                char *p = path_join(path, e->d_name);
                total += tree_bytes(p);
                free(p);
        }
        closedir(d);
        return total;
}

/* Samples the size of a folder every 50 ms, keeping the peak. */
typedef struct sampler {
        pthread_t thread;
        const char *path;
        atomic_bool stop;
        int64_t peak;
} sampler;

static void *sample_main(void *arg)
{
        sampler *s = arg;
        while (!atomic_load(&s->stop)) {
                int64_t b = tree_bytes(s->path);
                if (b > s->peak)
                        s->peak = b;
                msleep(50);
        }
        return NULL;
}

/* CPU seconds (user + system) of this process and of the children it waited for. */
static double cpu_now(void)
{
        struct rusage self, kids;
        getrusage(RUSAGE_SELF, &self);
        getrusage(RUSAGE_CHILDREN, &kids);
        return (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
                        kids.ru_stime.tv_sec) +
               (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec +
                        kids.ru_stime.tv_usec) /
                   1e6;
}

/* CPU seconds a process spent so far, from /proc/PID/stat. */
static double cpu_of(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
        char *text = NULL;
        size_t len = 0;
        if (read_file(path, 65536, &text, &len) < 0)
                return 0;
        const char *p = strrchr(text, ')');
        unsigned long utime = 0, stime = 0;
        /* after the command: state, then fields 4..13, utime is field 14 */
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                        &stime) != 2)
                utime = stime = 0;
        free(text);
        return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

typedef struct figures {
        double wall_s, cpu_s, disk_mib, member_cpu_s;
} figures;

static double ratio(double a, double b)
{
        return b > 0 ? a / b : 0;
}

/* n values written by WRITERS threads: 0, or -1 when etcd refused one. */
static int fill_values(harness_cluster *hc, int n)
{
        fill f[WRITERS];
        for (int i = 0; i < WRITERS; i++) {
                f[i] = (fill){.endpoints = hc->endpoints,
                              .from = (int)((int64_t)n * i / WRITERS),
                              .to = (int)((int64_t)n * (i + 1) / WRITERS)};
                pthread_create(&f[i].thread, NULL, fill_main, &f[i]);
        }
        int failed = 0;
        for (int i = 0; i < WRITERS; i++) {
                pthread_join(f[i].thread, NULL);
                failed |= f[i].failed;
        }
        return failed ? -1 : 0;
}

/* default/bench recorded in the state store: its spec (snapshots into folder) and member. */
static int record_cluster(state_db *db, harness_cluster *hc, const char *version,
                          const char *folder)
{
        _cleanup_free_ char *yaml = xasprintf(
            "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: bench\n"
            "spec:\n  replicas: 1\n  version: \"%s\"\n  snapshots:\n"
            "    schedule: \"0 0 1 1 *\"\n    destination:\n      local:\n        path: %s\n",
            version, folder);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        if (spec_load_buffer("bench.yaml", yaml, strlen(yaml), &set, &d) < 0)
                return -1;
        json_t *j = spec_to_json(set.items[0]);
        _cleanup_free_ char *json = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        cluster_set_release(&set);
        diag_list_release(&d);
        (void)state_cluster_set_desired(db, "default/bench", json, NULL, NULL, 1000);
        state_member m = {.cluster = "default/bench",
                          .name = "bench-0",
                          .client_url = hc->members[0].client_url,
                          .peer_url = hc->members[0].peer_url};
        (void)state_member_put(db, &m, 1000);
        return 0;
}

static int bench_size(long size_mib, const char *version)
{
        harness_opts o = {
            .version = version, .members = 1, .quota_backend_bytes = 8LL * 1024 * 1024 * 1024};
        harness_cluster *hc = NULL;
        if (harness_cluster_start(&o, &hc) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return 1;
        }
        int n = (int)(size_mib * 1024 * 1024 / VALUE_SIZE);
        printf("== %ld MiB (etcd %s, %d values of %d KiB)\n", size_mib, version, n,
               VALUE_SIZE / 1024);
        fflush(stdout);
        if (fill_values(hc, n) < 0) {
                harness_cluster_free(hc);
                return 1;
        }

        /* a state store with the cluster, and its snapshot in a local folder */
        _cleanup_free_ char *dir = path_join(hc->root_dir, "state");
        _cleanup_free_ char *folder = path_join(hc->root_dir, "backups");
        _cleanup_free_ char *db_path = path_join(dir, "state.db");
        (void)mkdir_p(dir, 0700);
        state_db *db = NULL;
        if (state_open(db_path, STATE_OPEN_READ_WRITE, &db) < 0)
                return 1;
        if (record_cluster(db, hc, version, folder) < 0)
                return 1;
        snapshot_job *job = NULL;
        char *err = NULL;
        if (snapshot_job_from_state(db, NULL, "default/bench", "manual", 0, dir, &job, &err) < 0)
                return 1;
        int64_t id = 0;
        if (snapshot_take(db, job, &id, &err) < 0) {
                fprintf(stderr, "snapshot failed: %s\n", err);
                return 1;
        }
        state_snapshot *rec = NULL;
        (void)state_snapshot_get(db, id, &rec);
        printf("snapshot: %.0f MiB, revision %lld, %lld keys\n", (double)rec->db_size / MIB,
               (long long)rec->revision, (long long)rec->key_count);

        /* etcd's tool alone on the same file */
        _cleanup_free_ char *tool = NULL;
        if (snapshot_etcd_tool(NULL, version, &tool) < 0)
                return 1;
        _cleanup_free_ char *restored = path_join(hc->root_dir, "restored");
        figures alone = {0};
        double c0 = cpu_now();
        int64_t t0 = now_mono_ms();
        snapshot_restore_opts ro = {.tool = tool,
                                    .snapshot = rec->location,
                                    .data_dir = restored,
                                    .name = "bench",
                                    .peer_url = "http://127.0.0.1:2380"};
        if (snapshot_restore_dir(&ro, &err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        alone.wall_s = (double)(now_mono_ms() - t0) / 1000.0;
        alone.cpu_s = cpu_now() - c0;
        alone.disk_mib = (double)tree_bytes(restored) / MIB;
        (void)rm_rf(restored);

        /* the drill */
        _cleanup_free_ char *scratch = path_join(dir, SNAPSHOT_DRILL_DIR);
        (void)mkdir_p(scratch, 0700);
        sampler s = {.path = scratch};
        pthread_create(&s.thread, NULL, sample_main, &s);
        figures drill = {0};
        double member0 = cpu_of(hc->members[0].pid);
        c0 = cpu_now();
        t0 = now_mono_ms();
        state_snapshot_drill *dr = NULL;
        snapshot_drill_opts dopts = {.trigger = "manual"};
        int r = snapshot_drill(db, job, id, &dopts, &dr, &err);
        drill.wall_s = (double)(now_mono_ms() - t0) / 1000.0;
        drill.cpu_s = cpu_now() - c0;
        drill.member_cpu_s = cpu_of(hc->members[0].pid) - member0;
        atomic_store(&s.stop, true);
        pthread_join(s.thread, NULL);
        drill.disk_mib = (double)s.peak / MIB;
        if (r < 0 || !streq(dr->result, "verified")) {
                fprintf(stderr, "drill: %s\n", r < 0 ? err : dr->message);
                return 1;
        }
        printf("drill: %s (%s), restore part %.1f s\n\n", dr->result, dr->method,
               (double)dr->restore_ms / 1000.0);
        printf("%-32s %10s %10s %12s\n", "", "wall s", "CPU s", "peak disk MiB");
        printf("%-32s %10.1f %10.1f %12.0f\n", "etcdutl snapshot restore alone", alone.wall_s,
               alone.cpu_s, alone.disk_mib);
        printf("%-32s %10.1f %10.1f %12.0f\n", "restore drill", drill.wall_s, drill.cpu_s,
               drill.disk_mib);
        printf("%-32s %9.1fx %9.1fx %11.1fx\n", "drill / restore alone",
               ratio(drill.wall_s, alone.wall_s), ratio(drill.cpu_s, alone.cpu_s),
               ratio(drill.disk_mib, alone.disk_mib));
        printf("%-32s %10s %10.1f\n", "live member (HashKV)", "", drill.member_cpu_s);
        printf("disk the drill asks for before it starts: %.0f MiB\n\n",
               (double)snapshot_drill_bytes_needed(rec) / MIB);
        fflush(stdout);
        state_snapshot_drill_free(dr);
        state_snapshot_free(rec);
        snapshot_job_free(job);
        free(err);
        state_close(db);
        harness_cluster_free(hc);
        return 0;
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        const char *version = "3.5.16";
        long sizes[8];
        size_t n = 0;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--version") && i + 1 < argc) {
                        version = argv[++i];
                        continue;
                }
                long v = strtol(argv[i], NULL, 10);
                if (v <= 0 || v > 7 * 1024 || n == 8) {
                        fprintf(stderr, "usage: bench-drill [SIZE-MIB (1..7168) ...] "
                                        "[--version V]\n");
                        return 2;
                }
                sizes[n++] = v;
        }
        if (n == 0) {
                sizes[n++] = 100;
                sizes[n++] = 1024;
        }
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", version);
                return 77;
        }
        log_set_level(LOG_ERROR);
        char *etcd_dir = harness_etcd_dir();
        setenv("GITCD_ETCD_DIR", etcd_dir, 1);
        free(etcd_dir);
        int64_t t0 = now_mono_ms();
        for (size_t i = 0; i < n; i++)
                if (bench_size(sizes[i], version) != 0)
                        return 1;
        printf("bench-drill took %.0f s\n", (double)(now_mono_ms() - t0) / 1000.0);
        return 0;
}

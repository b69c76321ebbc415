/*
 * Restore drills (snapshots/drill.h).
 *
 *   lock <state dir>/drills/lock ─▶ remove what killed drills left
 *     ─▶ record the drill running ─▶ room check (statvfs)
 *     ─▶ fetch as a restore does (size, SHA-256) ─▶ unpack (etcd's trailer)
 *     ─▶ etcd's tool restores it ─▶ throwaway etcd serves it
 *     ─▶ compare with the live cluster ─▶ kill etcd, remove the folder
 *     ─▶ finish the record, audit
 *
 * Design decisions:
 *   - The verdict says what it is about. verify-failed only when the
 *     snapshot itself did not restore (missing, damaged, refused by etcd's
 *     tool, etcd would not start on it, other data than the cluster had);
 *     unverified when the drill could not get that far for reasons of the
 *     gitcd host or the network (no room, no etcd binary, the destination
 *     unreachable, gitcd stopping): a restore candidate is never dropped
 *     for a problem of the drill.
 *   - What is compared. etcd's HashKV at the snapshot's revision covers
 *     every key and revision the snapshot holds, and it is what etcd
 *     itself compares between members. It depends on the compaction
 *     point, so the throwaway etcd is compacted to the live member's
 *     compaction point first when that is later than the snapshot's and
 *     not past its revision (the throwaway is ours to change). Once the
 *     live cluster compacted the revision away, the revision served and
 *     the number of keys are compared with the record (snapshot.c counts
 *     the keys on the member when it takes the snapshot).
 *   - Never in the way of the cluster. Only read-only calls reach the live
 *     members (Status through the client, HashKV, a count-only Range); the
 *     throwaway etcd listens on 127.0.0.1 ports the operating system hands
 *     out (never a port recorded for a member), runs niced (+10) and dies
 *     with the thread that started it (PR_SET_PDEATHSIG), so a gitcd
 *     killed with SIGKILL takes it along; its pid file in the drill's
 *     folder lets the next drill kill it should it still run.
 *   - Bounded disk: a drill that does not fit in the scratch folder's file
 *     system with a margin does not start (unverified, saying how much it
 *     needs and how much is free).
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/spec.h"
#include "etcd/client.h"
#include "snapshots/drill.h"
#include "snapstore/restore.h"
#include "snapstore/tool.h"
#include "util/process.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MIB              (1024LL * 1024)
#define WAL_SEGMENT      (64 * MIB) /* etcd preallocates one write-ahead log segment */
#define DRILL_NICE       10
#define LOCK_RETRY_MS    1000
#define PORT_ATTEMPTS    3
#define LIVE_TIMEOUT_MS  60000 /* HashKV walks the member's whole keyspace */
#define LOCAL_TIMEOUT_MS 60000

int64_t snapshot_drill_bytes_needed(const state_snapshot *rec)
{
        int64_t db = rec->db_size > 0 ? rec->db_size : rec->size;
        int64_t need = rec->size + db + WAL_SEGMENT;
        if (!streq_ptr(rec->compression, "none") && rec->compression)
                need += db; /* the unpacked copy beside the fetched file */
        int64_t margin = need / 10 > WAL_SEGMENT ? need / 10 : WAL_SEGMENT;
        return need + margin;
}

/* ---- the lock and what killed drills left ---- */

static bool cancelled(const snapshot_job *job)
{
        return job->cancel && atomic_load(job->cancel);
}

/* The etcd a killed drill started in folder, if it still runs: its pid file names it, and
 * its command line names the folder (a pid reused since is left alone). */
static void kill_leftover(const char *folder)
{
        _cleanup_free_ char *pid_path = path_join(folder, "etcd.pid");
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (read_file(pid_path, 64, &text, &len) < 0)
                return;
        long pid = strtol(text, NULL, 10);
        if (pid <= 1)
                return;
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/%ld/cmdline", pid);
        _cleanup_free_ char *cmd = NULL;
        size_t n = 0;
        if (read_file(proc, 1024 * 1024, &cmd, &n) < 0)
                return;
        bool ours = false;
        for (size_t off = 0; off < n && !ours; off += strlen(cmd + off) + 1)
                ours = strstr(cmd + off, folder) != NULL;
        if (!ours)
                return;
        log_warn("killing etcd (pid %ld) of a restore drill that was cut short", pid);
        (void)kill((pid_t)pid, SIGKILL);
        for (int i = 0; i < 100 && kill((pid_t)pid, 0) == 0; i++) {
                (void)waitpid((pid_t)pid, NULL, WNOHANG); /* ours, when this process started it */
                msleep(50);
        }
}

/* With the lock held: every folder in the scratch folder is a killed drill's. */
static int cleanup_locked(state_db *db, const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        int removed = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (streq(e->d_name, ".") || streq(e->d_name, "..") ||
                    streq(e->d_name, SNAPSHOT_DRILL_LOCK))
                        continue;
                _cleanup_free_ char *p = path_join(dir, e->d_name);
                if (path_is_dir(p))
                        kill_leftover(p);
                if (rm_rf(p) >= 0)
                        removed++;
        }
        closedir(d);
        int k =
            state_snapshot_drill_abandon_running(db, "gitcd stopped while it ran", now_wall_ms());
        if (k > 0)
                log_warn("%d restore drill%s left running by an earlier gitcd recorded as "
                         "unverified",
                         k, k == 1 ? "" : "s");
        return removed;
}

/* Take the scratch folder's lock, waiting up to wait_ms. -EBUSY with *ret_error when held. */
static int take_lock(const char *dir, int64_t wait_ms, atomic_bool *cancel, int *ret_fd,
                     char **ret_error)
{
        int r = mkdir_p(dir, 0700);
        if (r < 0) {
                *ret_error = xasprintf("cannot create %s: %s", dir, strerror(-r));
                return r;
        }
        _cleanup_free_ char *path = path_join(dir, SNAPSHOT_DRILL_LOCK);
        int64_t t0 = now_mono_ms();
        int told = 0;
        for (;;) {
                pid_t holder = 0;
                r = lock_file_try(path, ret_fd, &holder);
                if (r != -EAGAIN) {
                        if (r < 0)
                                *ret_error = xasprintf("cannot lock %s: %s", path, strerror(-r));
                        return r;
                }
                int64_t left = wait_ms - (now_mono_ms() - t0);
                if (left > 0 && !told++)
                        log_warn("another restore drill (gitcd pid %ld) is running in %s; "
                                 "waiting up to %lld s for it to end",
                                 (long)holder, dir, (long long)(wait_ms / 1000));
                if (left <= 0 || (cancel && atomic_load(cancel))) {
                        *ret_error = xasprintf("another restore drill (gitcd pid %ld) is running "
                                               "in %s; drills run one at a time",
                                               (long)holder, dir);
                        return -EBUSY;
                }
                msleep(left < LOCK_RETRY_MS ? left : LOCK_RETRY_MS);
        }
}

int snapshot_drill_cleanup(state_db *db, const char *state_dir)
{
        _cleanup_free_ char *dir = path_join(state_dir, SNAPSHOT_DRILL_DIR);
        if (!path_is_dir(dir))
                return 0;
        int fd = -1;
        _cleanup_free_ char *err = NULL;
        if (take_lock(dir, 0, NULL, &fd, &err) < 0)
                return 0; /* a drill runs: what is there is its own */
        int k = cleanup_locked(db, dir);
        close(fd);
        return k;
}

/* ---- the throwaway etcd ---- */

/* A port the operating system hands out on 127.0.0.1 that no recorded member has. */
static int os_port(const int *avoid, size_t n_avoid)
{
        for (int attempt = 0; attempt < 50; attempt++) {
                _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return -errno;
                struct sockaddr_in sa = {.sin_family = AF_INET,
                                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                socklen_t len = sizeof(sa);
                if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
                        return -errno;
                int port = ntohs(sa.sin_port);
                bool taken = false;
                for (size_t i = 0; i < n_avoid && !taken; i++)
                        taken = avoid[i] == port;
                if (!taken)
                        return port;
        }
        return -EADDRINUSE;
}

static void add_url_port(int **ports, size_t *n, const char *url)
{
        const char *host = url ? strstr(url, "://") : NULL;
        const char *colon = host ? strrchr(host + 3, ':') : NULL;
        if (!colon)
                return;
        int port = atoi(colon + 1);
        if (port <= 0)
                return;
        *ports = xrealloc(*ports, (*n + 1) * sizeof(int));
        (*ports)[(*n)++] = port;
}

/* Every port a recorded member of any cluster uses: the throwaway etcd never takes one. */
static size_t member_ports(state_db *db, int **ret)
{
        *ret = NULL;
        size_t n = 0;
        state_cluster_list cl = {0};
        if (state_cluster_list_all(db, &cl) < 0)
                return 0;
        for (size_t i = 0; i < cl.n; i++) {
                state_member_list ml = {0};
                if (state_member_list_for(db, cl.items[i]->name, false, &ml) < 0)
                        continue;
                for (size_t k = 0; k < ml.n; k++) {
                        add_url_port(ret, &n, ml.items[k]->client_url);
                        add_url_port(ret, &n, ml.items[k]->peer_url);
                }
                state_member_list_release(&ml);
        }
        state_cluster_list_release(&cl);
        return n;
}

typedef struct throwaway {
        pid_t pid;
        char *client_url;
        char *peer_url;
        char *log_path;
} throwaway;

static void throwaway_stop(throwaway *t)
{
        if (t->pid > 0) {
                (void)kill(t->pid, SIGKILL);
                while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                t->pid = 0;
        }
}

static void throwaway_release(throwaway *t)
{
        throwaway_stop(t);
        free(t->client_url);
        free(t->peer_url);
        free(t->log_path);
        *t = (throwaway){0};
}

/* The last lines of etcd's log, on one line, for a message. */
static char *log_tail(const char *path)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (read_file(path, 16 * MIB, &text, &len) < 0 || len == 0)
                return xstrdup("its log is empty");
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                text[--len] = '\0';
        /* the last two lines, at most 600 bytes */
        size_t start = len, lines = 0;
        while (start > 0 && lines < 2) {
                start--;
                if (text[start] == '\n')
                        lines++;
        }
        if (text[start] == '\n')
                start++;
        if (len - start > 600)
                start = len - 600;
        char *tail = xstrdup(text + start);
        for (char *p = tail; *p; p++)
                if (*p == '\n' || *p == '\r' || *p == '\t')
                        *p = ' ';
        return tail;
}

static bool log_says(const char *path, const char *needle)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        return read_file(path, 16 * MIB, &text, &len) >= 0 && strstr(text, needle);
}

/* ---- one drill ---- */

typedef struct drill {
        state_db *db;
        const snapshot_job *job;
        const state_snapshot *rec;
        etcd_cluster *spec;
        char *folder;   /* this drill's folder in the scratch folder */
        char *snapshot; /* the uncompressed snapshot file etcd's tool restores */
        char *data_dir;
        char *tool, *etcd;
        throwaway t;
        etcd_client *local, *live;
        /* the outcome */
        const char *result; /* "verified", "verify-failed", "unverified" */
        const char *method;
        char *message;
        int64_t revision, key_count, restore_ms;
} drill;

static void drill_release(drill *d)
{
        etcd_client_free(d->local);
        etcd_client_free(d->live);
        throwaway_release(&d->t);
        free(d->message);
        free(d->folder);
        free(d->snapshot);
        free(d->data_dir);
        free(d->tool);
        free(d->etcd);
        etcd_cluster_free(d->spec);
        *d = (drill){0};
}

static int verdict(drill *d, const char *result, char *message)
{
        d->result = result;
        free(d->message);
        d->message = message;
        return -1;
}

#define FAILED(d, ...)     verdict((d), "verify-failed", xasprintf(__VA_ARGS__))
#define UNVERIFIED(d, ...) verdict((d), "unverified", xasprintf(__VA_ARGS__))

static int stopping(drill *d)
{
        return UNVERIFIED(d, "aborted: gitcd is stopping");
}

static int check_room(drill *d)
{
        struct statvfs fs;
        if (statvfs(d->folder, &fs) < 0)
                return UNVERIFIED(d, "cannot read the free space of %s: %s", d->folder,
                                  strerror(errno));
        int64_t avail = (int64_t)fs.f_bavail * (int64_t)fs.f_frsize;
        int64_t need = snapshot_drill_bytes_needed(d->rec);
        if (avail < need)
                return UNVERIFIED(d,
                                  "not started: the drill needs %lld MiB in %s (the snapshot, "
                                  "its restored data and etcd's 64 MiB log, with a margin); "
                                  "its file system has %lld MiB free",
                                  (long long)((need + MIB - 1) / MIB), d->folder,
                                  (long long)(avail / MIB));
        return 0;
}

/* Fetch as a restore does, unpack and check etcd's trailer: d->snapshot. */
static int fetch_and_unpack(drill *d)
{
        const snapshot_job *job = d->job;
        bool gz = streq_ptr(d->rec->compression, "gzip");
        _cleanup_free_ char *fetched = path_join(d->folder, gz ? "snapshot.db.gz" : "snapshot.db");
        _cleanup_free_ char *err = NULL;
        int r = snapshot_fetch_secret(d->db, d->rec, job->state_dir, job->secret_dir, job->pvc,
                                      fetched, &err);
        if (r == -ENOENT || r == -EBADMSG)
                return FAILED(d, "%s", err); /* missing, or not what was stored */
        if (r < 0)
                return UNVERIFIED(d, "cannot fetch the snapshot: %s", err);
        if (cancelled(job))
                return stopping(d);
        int64_t size = 0;
        d->snapshot = gz ? path_join(d->folder, "unpacked.db") : xstrdup(fetched);
        r = snapshot_unpack(fetched, gz ? d->snapshot : NULL, &size, &err);
        if (gz)
                (void)unlink(fetched); /* the unpacked copy is what is restored */
        if (r == -EBADMSG)
                return FAILED(d, "%s", err);
        if (r < 0)
                return UNVERIFIED(d, "%s", err);
        return 0;
}

/* Restore into d->data_dir and start etcd on it with two new ports; 1: try other ports. */
static int restore_and_start(drill *d, const int *avoid, size_t n_avoid, int64_t *ret_t0)
{
        int cport = os_port(avoid, n_avoid), pport = -1;
        for (int i = 0; cport > 0 && i < 10 && (pport < 0 || pport == cport); i++)
                pport = os_port(avoid, n_avoid);
        if (cport < 0 || pport < 0 || pport == cport)
                return UNVERIFIED(d, "no free port on 127.0.0.1 for the throwaway etcd");
        free(d->t.client_url);
        free(d->t.peer_url);
        d->t.client_url = xasprintf("http://127.0.0.1:%d", cport);
        d->t.peer_url = xasprintf("http://127.0.0.1:%d", pport);
        (void)rm_rf(d->data_dir);
        *ret_t0 = now_mono_ms();
        _cleanup_free_ char *err = NULL;
        snapshot_restore_opts ro = {.tool = d->tool,
                                    .snapshot = d->snapshot,
                                    .data_dir = d->data_dir,
                                    .name = "drill",
                                    .peer_url = d->t.peer_url,
                                    .token = "gitcd-drill"};
        int r = snapshot_restore_dir(&ro, &err);
        if (r == -EIO)
                return FAILED(d, "%s", err); /* etcd's tool refused the snapshot */
        if (r < 0)
                return UNVERIFIED(d, "%s", err);
        FAILPOINT("drill.after-restore");
        if (cancelled(d->job))
                return stopping(d);
        int64_t db = d->rec->db_size > 0 ? d->rec->db_size : d->rec->size;
        int64_t quota = 2 * db > 2048 * MIB ? 2 * db : 2048 * MIB;
        _cleanup_free_ char *initial = xasprintf("drill=%s", d->t.peer_url);
        _cleanup_free_ char *quota_flag = xasprintf("--quota-backend-bytes=%lld", (long long)quota);
        char *argv[] = {d->etcd,
                        "--name",
                        "drill",
                        "--data-dir",
                        d->data_dir,
                        "--listen-client-urls",
                        d->t.client_url,
                        "--advertise-client-urls",
                        d->t.client_url,
                        "--listen-peer-urls",
                        d->t.peer_url,
                        "--initial-advertise-peer-urls",
                        d->t.peer_url,
                        "--initial-cluster",
                        initial,
                        "--initial-cluster-token",
                        "gitcd-drill",
                        quota_flag,
                        NULL};
        process_spawn_opts po = {.dir = d->folder,
                                 .log_path = d->t.log_path,
                                 .nice = DRILL_NICE,
                                 .die_with_parent = true};
        r = process_spawn(&po, argv, &d->t.pid);
        if (r < 0)
                return UNVERIFIED(d, "cannot start %s: %s", d->etcd, strerror(-r));
        _cleanup_free_ char *pid_path = path_join(d->folder, "etcd.pid");
        _cleanup_free_ char *pid_text = xasprintf("%ld\n", (long)d->t.pid);
        (void)write_file_atomic(pid_path, pid_text, strlen(pid_text), 0600);
        FAILPOINT("drill.after-start");

        /* serving: Status answers with a leader (a single member elects itself) */
        int64_t deadline = now_mono_ms() + 120 * 1000 + 60 * 1000 * (db / (1024 * MIB));
        r = snapshot_job_client(d->job, d->t.client_url, 2000, &d->local);
        if (r < 0)
                return UNVERIFIED(d, "cannot make a client of the throwaway etcd");
        for (;;) {
                int status = 0;
                if (waitpid(d->t.pid, &status, WNOHANG) == d->t.pid) {
                        d->t.pid = 0;
                        if (log_says(d->t.log_path, "address already in use"))
                                return 1;
                        _cleanup_free_ char *tail = log_tail(d->t.log_path);
                        return FAILED(d,
                                      "etcd %s exited (%s %d) before it served the restored "
                                      "snapshot: %s",
                                      d->spec->version, WIFEXITED(status) ? "status" : "signal",
                                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                                      tail);
                }
                etcd_endpoint_status *st = NULL;
                if (etcd_status(d->local, d->t.client_url, &st) == 0) {
                        bool led = st->leader != 0;
                        etcd_endpoint_status_free(st);
                        if (led)
                                return 0;
                }
                if (cancelled(d->job))
                        return stopping(d);
                if (now_mono_ms() > deadline) {
                        _cleanup_free_ char *tail = log_tail(d->t.log_path);
                        return UNVERIFIED(d, "the throwaway etcd did not serve within %lld s: %s",
                                          (long long)((deadline - *ret_t0) / 1000), tail);
                }
                msleep(200);
        }
}

/* The live endpoints in the order to ask: the member the snapshot came from first. */
static void live_order(const drill *d, size_t *order, size_t *n)
{
        const snapshot_job *job = d->job;
        *n = 0;
        for (size_t i = 0; i < job->n_endpoints; i++)
                if (streq_ptr(job->endpoints[i].member, d->rec->member))
                        order[(*n)++] = i;
        for (size_t i = 0; i < job->n_endpoints; i++)
                if (!streq_ptr(job->endpoints[i].member, d->rec->member))
                        order[(*n)++] = i;
}

/*
 * The fallback: the revision served and the keys recorded with the snapshot
 * (counted at the revision etcd's tool reported, which can be earlier than
 * the store's when the last writes were deletions compacted away since).
 */
static int compare_recorded(drill *d, const char *why)
{
        int64_t at = d->rec->revision > 0 ? d->rec->revision : d->revision;
        int64_t count = -1;
        if (d->rec->key_count >= 0 &&
            etcd_count_keys(d->local, d->t.client_url, at, &count, NULL) < 0)
                count = -1;
        if (d->rec->key_count < 0 || count < 0) {
                d->method = "revision";
                return verdict(d, "verified",
                               xasprintf("serves revision %lld as recorded (%s; %s)",
                                         (long long)d->revision, why,
                                         d->rec->key_count < 0
                                             ? "no key count was recorded with this snapshot"
                                             : "its keys at the recorded revision cannot be "
                                               "counted"));
        }
        d->method = "revision-and-count";
        if (count != d->rec->key_count)
                return FAILED(d,
                              "serves %lld keys at revision %lld; %s held %lld when the snapshot "
                              "was taken (%s)",
                              (long long)count, (long long)at, d->rec->member,
                              (long long)d->rec->key_count, why);
        return verdict(d, "verified",
                       xasprintf("serves revision %lld with %lld keys at revision %lld, as %s "
                                 "held when the snapshot was taken (%s)",
                                 (long long)d->revision, (long long)count, (long long)at,
                                 d->rec->member, why));
}

/* Compare what the throwaway etcd serves with the live cluster. */
static int compare(drill *d)
{
        etcd_endpoint_status *st = NULL;
        if (etcd_status(d->local, d->t.client_url, &st) < 0)
                return UNVERIFIED(d, "the throwaway etcd stopped answering: %s",
                                  etcd_client_last_error(d->local));
        d->revision = st->revision;
        etcd_endpoint_status_free(st);
        /*
         * The store's revision, what is compared at: etcd's tool reports the
         * newest revision among the keys, earlier when the last writes were
         * deletions compacted away (0: no key at all), never later.
         */
        int64_t rev = d->revision;
        if (rev < d->rec->revision)
                return FAILED(d, "the restored snapshot serves revision %lld, %lld was recorded",
                              (long long)rev, (long long)d->rec->revision);
        if (etcd_count_keys(d->local, d->t.client_url, rev, &d->key_count, NULL) < 0)
                return UNVERIFIED(d, "the throwaway etcd did not count its keys: %s",
                                  etcd_client_last_error(d->local));

        const snapshot_job *job = d->job;
        if (job->n_endpoints == 0)
                return compare_recorded(d, "the cluster has no member to compare with");
        if (snapshot_job_client(job, NULL, LIVE_TIMEOUT_MS, &d->live) < 0)
                return compare_recorded(d, "the members' client URLs are not usable");
        _cleanup_free_ size_t *order = xcalloc(job->n_endpoints + 1, sizeof(size_t));
        size_t n = 0;
        live_order(d, order, &n);
        strbuf why = STRBUF_INIT;
        for (size_t i = 0; i < n; i++) {
                const snapshot_endpoint *e = &job->endpoints[order[i]];
                uint32_t live_hash = 0;
                int64_t live_compact = 0;
                int r = etcd_hash_kv(d->live, e->client_url, rev, &live_hash, &live_compact);
                if (r == ETCD_ERR_COMPACTED) {
                        sb_release(&why);
                        _cleanup_free_ char *w =
                            xasprintf("%s compacted revision %lld away", e->member, (long long)rev);
                        return compare_recorded(d, w);
                }
                if (r < 0) {
                        sb_printf(&why, "%s%s: %s", why.len ? "; " : "", e->member,
                                  etcd_client_last_error(d->live));
                        continue;
                }
                sb_release(&why);
                uint32_t hash = 0;
                int64_t compact = 0;
                r = etcd_hash_kv(d->local, d->t.client_url, rev, &hash, &compact);
                if (r == 0 && compact < live_compact && live_compact <= rev) {
                        /* the same compaction point first: HashKV depends on it */
                        r = etcd_compact(d->local, live_compact, true);
                        if (r == 0)
                                r = etcd_hash_kv(d->local, d->t.client_url, rev, &hash, &compact);
                }
                if (r < 0)
                        return UNVERIFIED(d, "the throwaway etcd did not hash its keys: %s",
                                          etcd_client_last_error(d->local));
                if (compact != live_compact) {
                        _cleanup_free_ char *w =
                            xasprintf("%s is compacted at revision %lld, the snapshot at %lld",
                                      e->member, (long long)live_compact, (long long)compact);
                        return compare_recorded(d, w);
                }
                d->method = "hashkv";
                char compacted[48] = "never compacted";
                if (compact > 0)
                        snprintf(compacted, sizeof(compacted), "compacted at %lld",
                                 (long long)compact);
                if (hash != live_hash)
                        return FAILED(d,
                                      "HashKV at revision %lld is %08x on the restored snapshot, "
                                      "%08x on %s (both %s): the snapshot holds other data than "
                                      "the cluster had",
                                      (long long)rev, hash, live_hash, e->member, compacted);
                return verdict(d, "verified",
                               xasprintf("HashKV %08x at revision %lld (%s) matches %s's; "
                                         "%lld keys",
                                         hash, (long long)rev, compacted, e->member,
                                         (long long)d->key_count));
        }
        _cleanup_free_ char *w = xasprintf("no member answered HashKV: %s", sb_str(&why));
        sb_release(&why);
        return compare_recorded(d, w);
}

/* The steps; each failing one sets the verdict. */
static void run(drill *d)
{
        const snapshot_job *job = d->job;
        if (check_room(d) < 0)
                return;
        /* the cluster's version: what a restore of it runs */
        const char *version = d->spec->version;
        semver want, from;
        if (d->rec->etcd_version && semver_parse(d->rec->etcd_version, &from) == 0 &&
            semver_parse(version, &want) == 0 &&
            (from.major > want.major || (from.major == want.major && from.minor > want.minor))) {
                FAILED(d,
                       "taken from etcd %s, newer than the cluster's version %s: a restore "
                       "refuses it",
                       d->rec->etcd_version, version);
                return;
        }
        if (snapshot_etcd_tool(job->etcd_dir, version, &d->tool) < 0) {
                UNVERIFIED(d,
                           "no etcd %s tool (etcdutl, or etcdctl for 3.4) on gitcd's host to "
                           "restore with",
                           version);
                return;
        }
        if (snapshot_etcd_binary(job->etcd_dir, version, &d->etcd) < 0) {
                UNVERIFIED(d,
                           "no etcd %s binary on gitcd's host to start the restored data "
                           "with (put it in <etcd dir>/%s/)",
                           version, version);
                return;
        }
        if (fetch_and_unpack(d) < 0)
                return;
        int *avoid = NULL;
        size_t n_avoid = member_ports(d->db, &avoid);
        int64_t t0 = 0;
        int r = 1;
        for (int attempt = 0; r == 1 && attempt < PORT_ATTEMPTS; attempt++) {
                throwaway_stop(&d->t);
                etcd_client_free(d->local);
                d->local = NULL;
                r = restore_and_start(d, avoid, n_avoid, &t0);
        }
        free(avoid);
        if (r == 1)
                UNVERIFIED(d, "the throwaway etcd found its ports taken %d times", PORT_ATTEMPTS);
        if (r != 0)
                return;
        d->restore_ms = now_mono_ms() - t0;
        if (cancelled(job)) {
                stopping(d);
                return;
        }
        (void)compare(d);
}

static void audit(state_db *db, const drill *d, int64_t drill_id, int64_t duration_ms)
{
        json_t *after = json_pack("{s:I, s:I, s:s, s:s?, s:s?}", "drill", (json_int_t)drill_id,
                                  "snapshot", (json_int_t)d->rec->id, "result", d->result, "method",
                                  d->method, "location", d->rec->location);
        if (d->revision)
                json_object_set_new(after, "revision", json_integer(d->revision));
        if (d->key_count >= 0 && d->revision)
                json_object_set_new(after, "keys", json_integer(d->key_count));
        if (d->restore_ms)
                json_object_set_new(after, "restore_ms", json_integer(d->restore_ms));
        _cleanup_free_ char *text = json_dumps(after, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(after);
        bool ok = streq(d->result, "verified");
        const char *action = ok                               ? "snapshot.verified"
                             : streq(d->result, "unverified") ? "snapshot.unverified"
                                                              : "snapshot.verify_failed";
        state_audit_event ev = {.time_ms = now_wall_ms(),
                                .cluster = d->rec->cluster,
                                .action = (char *)action,
                                .reason = d->message,
                                .after_json = text,
                                .outcome = ok ? "success" : "failure",
                                .duration_ms = duration_ms};
        if (state_audit_append(db, &ev, NULL) < 0)
                log_warn("%s: cannot audit the drill of snapshot %lld: %s", d->rec->cluster,
                         (long long)d->rec->id, state_last_error());
}

int snapshot_drill(state_db *db, const snapshot_job *job, int64_t id,
                   const snapshot_drill_opts *opts, state_snapshot_drill **ret, char **ret_error)
{
        assert(db && job && job->state_dir && ret && ret_error);
        snapshot_drill_opts o = opts ? *opts : (snapshot_drill_opts){0};
        const char *trigger = o.trigger ? o.trigger : "snapshot";
        _cleanup_(state_snapshot_freep) state_snapshot *rec = NULL;
        int r = state_snapshot_get(db, id, &rec);
        if (r < 0) {
                *ret_error = xstrdup(state_last_error());
                return r;
        }
        if (!streq_ptr(rec->cluster, job->cluster) || !streq_ptr(rec->result, "succeeded") ||
            rec->deleted_ms) {
                *ret_error = xasprintf(
                    "snapshot %lld %s", (long long)id,
                    !streq_ptr(rec->cluster, job->cluster) ? "is not one of this cluster"
                    : rec->deleted_ms                      ? "was deleted by retention"
                                      : "did not succeed; only a stored snapshot is drilled");
                return -ENOENT;
        }
        _cleanup_free_ char *dir = path_join(job->state_dir, SNAPSHOT_DRILL_DIR);
        int lock_fd = -1;
        r = take_lock(dir, o.lock_wait_ms, job->cancel, &lock_fd, ret_error);
        if (r < 0)
                return r;
        (void)cleanup_locked(db, dir);
        int64_t started = now_wall_ms(), t0 = now_mono_ms(), drill_id = 0;
        r = state_snapshot_drill_begin(db, id, trigger, o.slot_ms, started, &drill_id);
        if (r < 0) {
                *ret_error = xstrdup(state_last_error());
                close(lock_fd);
                return r;
        }

        drill d = {.db = db, .job = job, .rec = rec, .key_count = -1};
        d.spec = spec_from_json_text(job->spec_json, job->cluster);
        _cleanup_free_ char *tmpl = xasprintf("%s/%lld-XXXXXX", dir, (long long)id);
        if (!d.spec)
                UNVERIFIED(&d, "the cluster's recorded spec cannot be read");
        else if (!mkdtemp(tmpl))
                UNVERIFIED(&d, "cannot create a folder in %s: %s", dir, strerror(errno));
        else {
                d.folder = xstrdup(tmpl);
                d.data_dir = path_join(d.folder, "data");
                d.t.log_path = path_join(d.folder, "etcd.log");
                run(&d);
        }
        if (!d.result)
                UNVERIFIED(&d, "the drill ended without a verdict");
        /* the throwaway etcd and the folder go whatever the verdict */
        etcd_client_free(d.local);
        etcd_client_free(d.live);
        d.local = d.live = NULL;
        throwaway_release(&d.t);
        if (d.folder)
                (void)rm_rf(d.folder);

        int64_t duration = now_mono_ms() - t0;
        state_snapshot_drill fin = {.result = (char *)d.result,
                                    .method = (char *)d.method,
                                    .message = d.message,
                                    .revision = d.revision,
                                    .key_count = d.revision ? d.key_count : -1,
                                    .restore_ms = d.restore_ms,
                                    .duration_ms = duration};
        r = state_snapshot_drill_finish(db, drill_id, &fin, now_wall_ms());
        if (r >= 0)
                audit(db, &d, drill_id, duration);
        close(lock_fd);
        log_debug("%s: drill of snapshot %lld: %s: %s", job->cluster, (long long)id, d.result,
                  d.message);
        drill_release(&d);
        if (r < 0) {
                *ret_error = xstrdup(state_last_error());
                return r;
        }
        r = state_snapshot_drill_get(db, drill_id, ret);
        if (r < 0) {
                *ret_error = xstrdup(state_last_error());
                return r;
        }
        return 0;
}

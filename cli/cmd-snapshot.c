/*
 * gitcd snapshot: take a snapshot by hand and list the recorded ones.
 *
 *   gitcd snapshot save CLUSTER   one snapshot now, through the same
 *                                 pipeline as scheduled ones (snapshots/)
 *   gitcd snapshot list [CLUSTER] the records in the state store, with the
 *                                 latest restore drill of each
 *   gitcd snapshot verify ID      a restore drill of a recorded snapshot now
 *                                 (snapshots/drill.h); save --verify runs one
 *                                 of the snapshot it took
 *   gitcd snapshot restore SNAP   a recorded snapshot (by id) or a file into a
 *                                 new data directory, or an EtcdCluster
 *                                 spec that restores it (snapstore/restore.h)
 *   gitcd snapshot receive        the receiver the Kubernetes target runs in
 *                                 a short-lived Pod to fill a volume
 *                                 (snapstore/receiver.h); not for people
 *
 * save writes to the state store next to a running daemon (SQLite WAL; it
 * does not take the daemon's lock: a snapshot changes nothing in the
 * cluster). It reaches the members at the client URLs the reconciler
 * recorded, through the target the cluster runs on -- the one the state
 * store recorded when its spec was taken in, or --target -- for gitcd's
 * client identity and the S3 credentials Secret (on Kubernetes a Secret
 * read through the API server, locally a folder).
 *
 * restore runs on gitcd's host and opens no target, but for a recorded
 * snapshot in a PersistentVolumeClaim: that one is fetched through the
 * target's writer Pod (snapshot_fetch_on), the target found and opened as
 * save finds and opens it, and only once the record turns out to need it.
 *
 * Like the other commands beside the daemon, every subcommand takes what
 * its command line leaves out -- the state database, the target's
 * settings, the etcd binaries -- from the daemon's configuration file
 * (--config, or /etc/gitcd/gitcd.yaml when present: cli_daemon_config).
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "api/spec.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "snapshots/drill.h"
#include "snapstore/destination.h"
#include "snapstore/receiver.h"
#include "snapstore/restore.h"
#include "snapshots/schedule.h"
#include "snapshots/snapshot.h"
#include "snapstore/tool.h"
#include "state/snapshots.h"
#include "targets/registry.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd snapshot save NS/NAME [--to PATH] [--verify] [--target T ...]\n"
    "                           [options]\n"
    "       gitcd snapshot list [NS/NAME] [-o table|json] [options]\n"
    "       gitcd snapshot verify ID [--target T ...] [options]\n"
    "       gitcd snapshot restore ID|FILE (--into DIR | --print-spec)\n"
    "                              [--target T ...] [options]\n"
    "       gitcd snapshot receive (--data-dir DIR | --store-dir DIR)\n"
    "                              --secret-dir DIR [--listen ADDR] [--max-bytes N]\n\n"
    "save: take a snapshot of a cluster now from a healthy member (a follower when\n"
    "      one is healthy), verify it (etcd's sha256, and the file read as etcd's\n"
    "      snapshot status reads it: every page and bucket), compress it as\n"
    "      spec.snapshots.compression says, store it in spec.snapshots.destination\n"
    "      and record it; then apply the retention to that destination. With a\n"
    "      PersistentVolumeClaim destination it waits up to 10 minutes while\n"
    "      another snapshot writer of the cluster is in use (gitcd run's, say).\n"
    "list: show the recorded snapshots, newest first, after the declared ones\n"
    "      (EtcdSnapshot, EtcdBackup documents) `gitcd run` has not taken yet,\n"
    "      with what the latest restore drill of each found (VERIFY) and, marked\n"
    "      *, each cluster's restore candidate (what `gitcd recover\n"
    "      --from-snapshot latest` restores).\n"
    "verify: run a restore drill of snapshot ID now and print what it found: fetch\n"
    "      it back from its destination as a restore would (size and SHA-256\n"
    "      against the record), restore it with etcd's tool for the cluster's\n"
    "      version into <state dir>/drills/, start a throwaway etcd on 127.0.0.1\n"
    "      on it and compare what it serves with the live cluster (HashKV at the\n"
    "      snapshot's revision while the cluster has it, else the revision and the\n"
    "      key count recorded with the snapshot). Read-only toward the members.\n"
    "      Recorded (verified, verify-failed or unverified) and audited; one drill\n"
    "      at a time per state folder (waits up to 10 minutes for another). The\n"
    "      target is opened as for save. Exit 0 only when verified.\n"
    "restore: check a snapshot (a record's size and SHA-256, etcd's own hash,\n"
    "      etcd's tool) and restore it with etcd's tool for the version into a new\n"
    "      data directory for one member (--into), or print an EtcdCluster spec\n"
    "      with bootstrap.restore pointing at it (--print-spec). A recorded\n"
    "      snapshot in a PersistentVolumeClaim is fetched through a writer Pod of\n"
    "      the Kubernetes target, opened as for save; other snapshots need no\n"
    "      target.\n"
    "receive: what gitcd runs in a short-lived Pod on the Kubernetes target to\n"
    "      put a restored member's data into its PersistentVolumeClaim: an HTTPS\n"
    "      server (the certificate tls.crt, tls.key and the bearer token `token`\n"
    "      from --secret-dir) that takes the files, checks each one's SHA-256 and\n"
    "      renames the whole folder to --data-dir at the end. With --store-dir it\n"
    "      keeps snapshot files in that folder instead (PUT, HEAD, GET and\n"
    "      DELETE of one file; each PUT checked and renamed into place). It serves\n"
    "      until SIGTERM.\n\n"
    "Options:\n";

static volatile sig_atomic_t receive_stop;

static void on_receive_signal(int sig)
{
        (void)sig;
        receive_stop = 1;
}

/* A printable copy: control characters become spaces, empty becomes "-". */
static char *clean(const char *s)
{
        if (isempty(s))
                return xstrdup("-");
        char *c = xstrdup(s);
        for (unsigned char *p = (unsigned char *)c; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        *p = ' ';
        return c;
}

static volatile sig_atomic_t drill_stop;
static atomic_bool drill_cancel;

static void on_drill_signal(int sig)
{
        (void)sig;
        drill_stop = 1;
        atomic_store(&drill_cancel, true);
}

/*
 * Run a restore drill of snapshot id with job (the cluster's), print what
 * it found; 0 when verified, else -errno or 1.
 */
static int drill_and_print(state_db *db, snapshot_job *job, int64_t id)
{
        /* Ctrl-C stops the drill between steps; its throwaway etcd dies with us anyway */
        struct sigaction sa = {.sa_handler = on_drill_signal}, old_int, old_term;
        sigemptyset(&sa.sa_mask);
        (void)sigaction(SIGINT, &sa, &old_int);
        (void)sigaction(SIGTERM, &sa, &old_term);
        job->cancel = &drill_cancel;
        snapshot_drill_opts o = {.trigger = "manual", .lock_wait_ms = SNAPSHOT_WRITER_WAIT_MS};
        _cleanup_(state_snapshot_drill_freep) state_snapshot_drill *d = NULL;
        _cleanup_free_ char *error = NULL;
        int r = snapshot_drill(db, job, id, &o, &d, &error);
        (void)sigaction(SIGINT, &old_int, NULL);
        (void)sigaction(SIGTERM, &old_term, NULL);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot verify: snapshot %lld: %s\n", (long long)id, error);
                return r;
        }
        _cleanup_(state_snapshot_freep) state_snapshot *rec = NULL;
        (void)state_snapshot_get(db, id, &rec);
        printf("restore drill %lld of snapshot %lld of %s: %s\n  %s\n", (long long)d->id,
               (long long)id, job->cluster, d->result, d->message ? d->message : "");
        if (d->restore_ms > 0) {
                int64_t bytes = rec && rec->db_size > 0 ? rec->db_size : rec ? rec->size : 0;
                printf("  restored and served in %.1f s (%.1f MB/s); the drill took %.1f s\n",
                       (double)d->restore_ms / 1000.0,
                       (double)bytes / 1e6 / ((double)d->restore_ms / 1000.0),
                       (double)d->duration_ms / 1000.0);
        }
        return streq(d->result, "verified") ? 0 : 1;
}

static int do_save(const char *cluster, const char *path, const char *to, bool verify,
                   const runner_flags *tf, const ops_config *file)
{
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s\n", state_last_error());
                return EXIT_FAIL;
        }
        _cleanup_free_ char *state_dir = runner_state_dir(path);
        /* kept until the job is freed: a pvc destination writes through it */
        _cleanup_(target_freep) target *t = NULL;
        r = runner_open_cluster_target(db, cluster, tf, file, state_dir, "gitcd snapshot", &t);
        if (r < 0) {
                state_close(db);
                return EXIT_FAIL;
        }
        _cleanup_free_ char *error = NULL;
        _cleanup_(snapshot_job_freep) snapshot_job *job = NULL;
        r = snapshot_job_from_state(db, t, cluster, "manual", 0, state_dir, &job, &error);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s\n", error);
                state_close(db);
                return EXIT_FAIL;
        }
        job->etcd_dir = xstrdup_null(runner_etcd_dir(tf, file));
        if (to) {
                job->override = XNEW(storage_location);
                job->override->kind = DEST_LOCAL;
                job->override->path = xstrdup(to);
        }
        int64_t id = 0;
        r = snapshot_take(db, job, &id, &error);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s: snapshot %lld failed: %s\n", cluster,
                        (long long)id, error);
                state_close(db);
                return EXIT_FAIL;
        }
        state_snapshot *s = NULL;
        if (state_snapshot_get(db, id, &s) == 0) {
                printf("snapshot %lld of %s: revision %lld from %s, %lld bytes%s, sha256 %s\n"
                       "stored at %s\n",
                       (long long)s->id, cluster, (long long)s->revision, s->member,
                       (long long)s->size, streq_ptr(s->compression, "gzip") ? " (gzip)" : "",
                       s->sha256, s->location);
                state_snapshot_free(s);
        }
        if (!to) {
                etcd_cluster *c = spec_from_json_text(job->spec_json, cluster);
                if (c) {
                        int k = snapshot_retention(db, cluster, &c->snapshots, state_dir,
                                                   job->secret_dir, job->pvc, now_wall_ms());
                        if (k > 0)
                                printf("retention: deleted %d older snapshot%s\n", k,
                                       k == 1 ? "" : "s");
                }
                etcd_cluster_free(c);
        }
        r = verify ? drill_and_print(db, job, id) : 0;
        state_close(db);
        return r == 0 ? EXIT_OK : EXIT_FAIL;
}

static int do_verify(const char *what, const char *path, const runner_flags *tf,
                     const ops_config *file)
{
        if (!what) {
                fprintf(stderr,
                        "gitcd snapshot verify: name the snapshot: gitcd snapshot verify ID\n");
                return EXIT_USAGE;
        }
        state_db *db = NULL;
        _cleanup_(state_snapshot_freep) state_snapshot *rec = NULL;
        int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
        if (r >= 0)
                r = state_snapshot_get(db, strtoll(what, NULL, 10), &rec);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot verify: %s\n", state_last_error());
                state_close(db);
                return EXIT_FAIL;
        }
        _cleanup_free_ char *state_dir = runner_state_dir(path);
        _cleanup_(target_freep) target *t = NULL;
        r = runner_open_cluster_target(db, rec->cluster, tf, file, state_dir,
                                       "gitcd snapshot verify", &t);
        if (r < 0) {
                state_close(db);
                return EXIT_FAIL;
        }
        _cleanup_free_ char *error = NULL;
        _cleanup_(snapshot_job_freep) snapshot_job *job = NULL;
        r = snapshot_job_from_state(db, t, rec->cluster, "manual", 0, state_dir, &job, &error);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot verify: %s\n", error);
                state_close(db);
                return EXIT_FAIL;
        }
        job->etcd_dir = xstrdup_null(runner_etcd_dir(tf, file));
        r = drill_and_print(db, job, rec->id);
        state_close(db);
        return r == 0 ? EXIT_OK : EXIT_FAIL;
}

static json_t *snapshot_json(const state_snapshot *s)
{
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(s->id));
        json_object_set_new(o, "cluster", cli_json_string(s->cluster));
        json_object_set_new(o, "trigger", cli_json_string(s->trigger));
        json_object_set_new(o, "scheduled_for", cli_json_time(s->slot_ms));
        json_object_set_new(o, "started", cli_json_time(s->started_ms));
        json_object_set_new(o, "finished", cli_json_time(s->finished_ms));
        json_object_set_new(o, "result", cli_json_string(s->result));
        json_object_set_new(o, "error", cli_json_string(s->error));
        json_object_set_new(o, "member", cli_json_string(s->member));
        json_object_set_new(o, "etcd_version", cli_json_string(s->etcd_version));
        json_object_set_new(o, "revision", json_integer(s->revision));
        json_object_set_new(o, "size", json_integer(s->size));
        json_object_set_new(o, "db_size", json_integer(s->db_size));
        json_object_set_new(o, "sha256", cli_json_string(s->sha256));
        json_object_set_new(o, "compression", cli_json_string(s->compression));
        json_object_set_new(o, "destination", cli_json_string(s->destination));
        json_object_set_new(o, "key", cli_json_string(s->key));
        json_object_set_new(o, "location", cli_json_string(s->location));
        json_object_set_new(o, "duration_ms", json_integer(s->duration_ms));
        json_object_set_new(o, "expired", cli_json_time(s->expired_ms));
        json_object_set_new(o, "deleted", cli_json_time(s->deleted_ms));
        json_object_set_new(o, "delete_error", cli_json_string(s->delete_error));
        json_object_set_new(o, "declared_by", cli_json_string(s->declared_by));
        json_object_set_new(o, "key_count",
                            s->key_count >= 0 ? json_integer(s->key_count) : json_null());
        /* the latest restore drill */
        json_object_set_new(o, "verify_result", cli_json_string(s->verify_result));
        json_object_set_new(o, "verified", cli_json_time(s->verify_ms));
        json_object_set_new(o, "verify_trigger", cli_json_string(s->verify_trigger));
        json_object_set_new(o, "verify_method", cli_json_string(s->verify_method));
        json_object_set_new(o, "verify_message", cli_json_string(s->verify_message));
        json_object_set_new(o, "verify_restore_ms",
                            s->verify_result ? json_integer(s->verify_restore_ms) : json_null());
        int64_t bytes = s->db_size > 0 ? s->db_size : s->size;
        json_object_set_new(o, "verify_restore_bytes_per_second",
                            s->verify_restore_ms > 0
                                ? json_integer(bytes * 1000 / s->verify_restore_ms)
                                : json_null());
        json_object_set_new(o, "verify_duration_ms",
                            s->verify_result ? json_integer(s->verify_duration_ms) : json_null());
        return o;
}

/* What a person wants to know in one word: kept, deleted, failed, ... */
static const char *snapshot_state(const state_snapshot *s)
{
        if (!streq_ptr(s->result, "succeeded"))
                return s->result ? s->result : "-";
        if (s->deleted_ms)
                return "deleted";
        if (s->expired_ms)
                return "expired";
        return "succeeded";
}

static int do_list(const char *cluster, const char *path, bool json)
{
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_ONLY, &db);
        state_snapshot_list l = {0};
        state_snapshot_request_list pending = {0};
        if (r >= 0)
                r = state_snapshot_list_for(db, cluster, 0, &l);
        if (r >= 0)
                r = state_snapshot_requests_list(db, cluster, true, &pending);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s\n", state_last_error());
                state_snapshot_list_release(&l);
                state_close(db);
                return EXIT_FAIL;
        }
        /* each cluster's restore candidate (records newest first, grouped here by cluster) */
        int64_t *candidates = xcalloc(l.n + 1, sizeof(int64_t));
        size_t n_candidates = 0;
        for (size_t i = 0; i < l.n; i++) {
                bool seen = false;
                for (size_t k = 0; k < i && !seen; k++)
                        seen = streq(l.items[k]->cluster, l.items[i]->cluster);
                if (seen)
                        continue;
                state_snapshot_list one = {.items = xcalloc(l.n, sizeof(state_snapshot *))};
                for (size_t k = i; k < l.n; k++)
                        if (streq(l.items[k]->cluster, l.items[i]->cluster))
                                one.items[one.n++] = l.items[k];
                const state_snapshot *c = snapshot_restore_candidate(&one);
                if (c)
                        candidates[n_candidates++] = c->id;
                free(one.items);
        }
        if (!json && l.n == 0 && pending.n == 0)
                fprintf(stderr, "gitcd snapshot: no snapshots recorded in %s\n", path);
        else if (!json)
                printf("%-5s %-24s %-20s %-8s %-9s %-15s %-9s %-10s %-10s %s\n", "ID", "CLUSTER",
                       "STARTED", "TRIGGER", "RESULT", "VERIFY", "REVISION", "SIZE", "MEMBER",
                       "LOCATION / ERROR");
        /* declared snapshots not taken yet (`gitcd run` takes them) */
        for (size_t i = 0; i < pending.n; i++) {
                const state_snapshot_request *q = pending.items[i];
                char when[40];
                format_rfc3339(q->seen_ms, when, sizeof(when));
                if (json) {
                        json_t *o = json_pack("{s:n, s:s, s:s, s:s, s:s, s:s}", "id", "cluster",
                                              q->cluster, "trigger", "declared", "requested", when,
                                              "result", "pending", "declared_by", q->object);
                        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
                        if (text)
                                puts(text);
                        free(text);
                        json_decref(o);
                        continue;
                }
                _cleanup_free_ char *c = clean(q->cluster), *obj = clean(q->object);
                printf("%-5s %-24s %-20s %-8s %-9s %-15s %-9s %-10s %-10s (%s)\n", "-", c, when,
                       "declared", "pending", "-", "-", "-", "-", obj);
        }
        state_snapshot_request_list_release(&pending);
        bool any_candidate = false;
        for (size_t i = 0; i < l.n; i++) {
                const state_snapshot *s = l.items[i];
                bool candidate = false;
                for (size_t k = 0; k < n_candidates && !candidate; k++)
                        candidate = candidates[k] == s->id;
                any_candidate = any_candidate || candidate;
                if (json) {
                        json_t *o = snapshot_json(s);
                        json_object_set_new(o, "restore_candidate", json_boolean(candidate));
                        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
                        if (text)
                                puts(text);
                        free(text);
                        json_decref(o);
                        continue;
                }
                char when[40];
                format_rfc3339(s->started_ms, when, sizeof(when));
                _cleanup_free_ char *c = clean(s->cluster), *m = clean(s->member);
                _cleanup_free_ char *where =
                    clean(streq_ptr(s->result, "succeeded")
                              ? (s->delete_error ? s->delete_error : s->location)
                              : s->error);
                _cleanup_free_ char *by = s->declared_by ? clean(s->declared_by) : NULL;
                _cleanup_free_ char *verify = xasprintf(
                    "%s%s", s->verify_result ? s->verify_result : "-", candidate ? " *" : "");
                printf("%-5lld %-24s %-20s %-8s %-9s %-15s %-9lld %-10lld %-10s %s%s%s%s\n",
                       (long long)s->id, c, when, s->trigger, snapshot_state(s), verify,
                       (long long)s->revision, (long long)s->size, m, where, by ? " (" : "",
                       by ? by : "", by ? ")" : "");
        }
        if (!json && any_candidate)
                printf("* the restore candidate of its cluster (gitcd recover NS/NAME "
                       "--from-snapshot latest)\n");
        free(candidates);
        state_snapshot_list_release(&l);
        state_close(db);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "gitcd snapshot: writing the output failed\n");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(state_db *, state_close);

typedef struct restore_flags {
        const char *into;
        bool print_spec;
        const char *version;
        const char *name;
        const char *peer_url;
        const char *etcd_dir;
        const char *state; /* the state database's path */
        /* the target of a recorded snapshot's cluster: the command line's, the file's */
        const runner_flags *tf;
        const ops_config *file;
} restore_flags;

static bool all_digits(const char *s)
{
        if (isempty(s))
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* The cluster's current spec from the store, or NULL. */
static etcd_cluster *recorded_spec(state_db *db, const char *cluster)
{
        state_cluster *sc = NULL;
        if (!db || state_cluster_get(db, cluster, &sc) < 0)
                return NULL;
        etcd_cluster *c = spec_from_json_text(state_cluster_spec_json(sc), cluster);
        state_cluster_free(sc);
        return c;
}

/*
 * The restore source of a spec: where the snapshot is, as
 * bootstrap.restore.source. An S3 object takes the endpoint, region, path
 * style and credentials of the cluster's destination it was stored in.
 */
static int restore_source(state_db *db, const state_snapshot *rec, const char *file, strbuf *out,
                          char **ret_error)
{
        if (!rec || strneq(rec->destination ? rec->destination : "", "local:", 6)) {
                sb_printf(out, "        local:\n          path: %s\n", rec ? rec->location : file);
                return 0;
        }
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = recorded_spec(db, rec->cluster);
        _cleanup_free_ char *id = c ? snapshot_destination_id(&c->snapshots.destination) : NULL;
        const char *loc = rec->location ? rec->location : "";
        const char *slash = strneq(loc, "s3://", 5) ? strchr(loc + 5, '/') : NULL;
        const storage_location *dest = c ? &c->snapshots.destination : NULL;
        if (dest && streq_ptr(id, rec->destination) && dest->kind == DEST_PVC &&
            !isempty(rec->key)) {
                /* the file in the claim: the destination's folder, then the key */
                _cleanup_free_ char *folder = xstrdup(dest->sub_path ? dest->sub_path : "");
                size_t n = strlen(folder);
                while (n > 0 && folder[n - 1] == '/')
                        folder[--n] = '\0';
                sb_printf(out, "        pvc:\n          claimName: %s\n          subPath: %s%s%s\n",
                          dest->claim_name, folder, n ? "/" : "", rec->key);
                return 0;
        }
        if (!dest || !streq_ptr(id, rec->destination) || dest->kind != DEST_S3 || !slash) {
                *ret_error = xasprintf("%s is in %s, no longer the destination of %s: write "
                                       "spec.bootstrap.restore.source by hand",
                                       loc, rec->destination, rec->cluster);
                return -EINVAL;
        }
        const s3_location *s3 = &c->snapshots.destination.s3;
        sb_printf(out, "        s3:\n");
        if (s3->endpoint)
                sb_printf(out, "          endpoint: %s\n", s3->endpoint);
        sb_printf(out, "          bucket: %s\n          key: %s\n", s3->bucket, slash + 1);
        if (s3->region)
                sb_printf(out, "          region: %s\n", s3->region);
        if (s3->force_path_style)
                sb_printf(out, "          forcePathStyle: true\n");
        sb_printf(out, "          credentialsSecretRef:\n            name: %s\n",
                  s3->credentials_secret);
        return 0;
}

/* Check the snapshot at input (in work/) and restore it or print a spec; -errno + *ret_error. */
static int restore_checked(state_db *db, const state_snapshot *rec, const char *input,
                           const char *work, const char *version, const restore_flags *f,
                           char **ret_error)
{
        _cleanup_free_ char *raw = path_join(work, "snapshot.db");
        int64_t size = 0;
        int r = snapshot_unpack(input, raw, &size, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *tool = NULL;
        r = snapshot_etcd_tool(f->etcd_dir, version, &tool);
        if (r < 0) {
                *ret_error = xasprintf("no etcd %s tool (etcdutl, or etcdctl for 3.4) found to "
                                       "restore with",
                                       version);
                return r;
        }
        snapshot_status st;
        r = snapshot_file_status(tool, raw, &st, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *cluster_name =
            rec ? xstrdup(strchr(rec->cluster, '/') + 1) : xstrdup("restored");
        _cleanup_free_ char *ns =
            rec ? xstrndup(rec->cluster, strcspn(rec->cluster, "/")) : xstrdup("default");
        _cleanup_free_ char *name = f->name ? xstrdup(f->name) : xasprintf("%s-0", cluster_name);
        const char *peer = f->peer_url ? f->peer_url : "http://127.0.0.1:2380";
        const char *label = rec ? rec->location : input;
        if (f->into) {
                snapshot_restore_opts o = {.tool = tool,
                                           .snapshot = raw,
                                           .data_dir = f->into,
                                           .name = name,
                                           .peer_url = peer,
                                           .token = cluster_name};
                r = snapshot_restore_dir(&o, ret_error);
                if (r < 0)
                        return r;
                printf("restored %s (revision %lld, %lld keys) with etcd %s into %s\n"
                       "start it with: etcd --data-dir %s --name %s "
                       "--initial-advertise-peer-urls %s (a new cluster of one member)\n",
                       label, (long long)st.revision, (long long)st.total_keys, version, f->into,
                       f->into, name, peer);
        }
        if (f->print_spec) {
                /* the source first: a spec that cannot be written is not printed at all */
                _cleanup_free_ char *abs = rec ? NULL : realpath(input, NULL);
                strbuf src = STRBUF_INIT;
                r = restore_source(db, rec, abs ? abs : input, &src, ret_error);
                if (r < 0) {
                        sb_release(&src);
                        return r;
                }
                printf("# %s: revision %lld, %lld keys, %lld bytes, checked\n"
                       "# gitcd apply creates the cluster from it: the first member restored\n"
                       "# (a new cluster ID), the others joining it as learners\n"
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: %s-restored\n"
                       "  namespace: %s\n"
                       "spec:\n"
                       "  replicas: 3\n"
                       "  version: \"%s\"\n"
                       "  bootstrap:\n"
                       "    restore:\n"
                       "      source:\n",
                       label, (long long)st.revision, (long long)st.total_keys, (long long)size,
                       cluster_name, ns, version);
                fputs(sb_str(&src), stdout);
                sb_release(&src);
        }
        return 0;
}

/* The etcd version to restore with; refuses a snapshot from a newer minor. */
static int restore_version(const state_snapshot *rec, const restore_flags *f,
                           const char **ret_version)
{
        const char *version = f->version;
        if (!version)
                version = rec && rec->etcd_version ? rec->etcd_version : GITCD_DEFAULT_VERSION;
        semver want, from;
        if (semver_parse(version, &want) < 0) {
                fprintf(stderr, "gitcd snapshot restore: --version: \"%s\" is not a version\n",
                        version);
                return -EINVAL;
        }
        if (rec && rec->etcd_version && semver_parse(rec->etcd_version, &from) == 0 &&
            (from.major > want.major || (from.major == want.major && from.minor > want.minor))) {
                fprintf(stderr,
                        "gitcd snapshot restore: refused: snapshot %lld was taken from etcd %s, "
                        "newer than %s; restore it with %d.%d or later\n",
                        (long long)rec->id, rec->etcd_version, version, from.major, from.minor);
                return -EINVAL;
        }
        *ret_version = version;
        return 0;
}

/*
 * Fetch a record into path. A record only a target's writer reads (in a
 * PersistentVolumeClaim) is fetched through the target its cluster runs
 * on, opened as save opens it, and only then: other records need no
 * target. -ECANCELED when the target could not be opened (its words are
 * printed), else as snapshot_fetch().
 */
static int fetch_recorded(state_db *db, const state_snapshot *rec, const char *state_dir,
                          const restore_flags *f, const char *path, char **ret_error)
{
        static const char hint[] = "add --target kubernetes with its --kubeconfig and "
                                   "--context, as for gitcd apply (or target: and kubeconfig: "
                                   "in the configuration file)";
        int r = snapshot_fetch(db, rec, state_dir, NULL, path, ret_error);
        if (r != -EOPNOTSUPP)
                return r;
        free(*ret_error);
        *ret_error = NULL;
        _cleanup_(target_freep) target *t = NULL;
        if (runner_open_cluster_target(db, rec->cluster, f->tf, f->file, state_dir,
                                       "gitcd snapshot restore", &t) < 0) {
                fprintf(stderr,
                        "gitcd snapshot restore: refused: snapshot %lld is in %s, which only "
                        "the Kubernetes target reads: %s\n",
                        (long long)rec->id, rec->location, hint);
                return -ECANCELED;
        }
        r = snapshot_fetch_on(db, rec, state_dir, t, path, ret_error);
        if (r == -EOPNOTSUPP) {
                free(*ret_error);
                *ret_error = xasprintf("snapshot %lld is in %s, a PersistentVolumeClaim only the "
                                       "Kubernetes target reads (through a writer Pod), and %s "
                                       "is not on it here: %s",
                                       (long long)rec->id, rec->location, rec->cluster, hint);
        }
        return r;
}

static int do_restore(const char *what, const restore_flags *f)
{
        _cleanup_(state_snapshot_freep) state_snapshot *rec = NULL;
        _cleanup_(state_closep) state_db *db = NULL;
        _cleanup_free_ char *state_dir = NULL, *error = NULL;
        if (!what)
                return EXIT_USAGE; /* check_args refuses a restore without ID|FILE first */
        if (all_digits(what)) {
                int r = state_open(f->state, STATE_OPEN_READ_ONLY, &db);
                if (r >= 0)
                        r = state_snapshot_get(db, strtoll(what, NULL, 10), &rec);
                if (r < 0) {
                        fprintf(stderr, "gitcd snapshot restore: %s\n", state_last_error());
                        return EXIT_FAIL;
                }
                state_dir = runner_state_dir(f->state);
        } else if (!path_exists(what)) {
                fprintf(stderr,
                        "gitcd snapshot restore: refused: %s: no such file (and not a snapshot "
                        "id)\n",
                        what);
                return EXIT_FAIL;
        }
        const char *version = NULL;
        if (restore_version(rec, f, &version) < 0)
                return EXIT_FAIL;

        /* work next to the new data directory (snapshots can be large) */
        _cleanup_free_ char *parent = NULL;
        if (f->into) {
                _cleanup_free_ char *copy = xstrdup(f->into);
                parent = xstrdup(dirname(copy));
        } else {
                const char *t = getenv("TMPDIR");
                parent = xstrdup(isempty(t) ? "/tmp" : t);
        }
        _cleanup_free_ char *work = xasprintf("%s/.gitcd-restore-XXXXXX", parent);
        if (!mkdtemp(work)) {
                fprintf(stderr, "gitcd snapshot restore: cannot create a folder in %s: %m\n",
                        parent);
                return EXIT_FAIL;
        }
        _cleanup_free_ char *fetched = path_join(work, "fetched");
        int r = rec ? fetch_recorded(db, rec, state_dir, f, fetched, &error) : 0;
        if (r == -ECANCELED) {
                (void)rm_rf(work);
                return EXIT_FAIL;
        }
        if (r >= 0)
                r = restore_checked(db, rec, rec ? fetched : what, work, version, f, &error);
        (void)rm_rf(work);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot restore: refused: %s\n", error);
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

/* --max-bytes N: a number of bytes into *(int64_t *)dest; -EINVAL. */
static int parse_max_bytes(const char *arg, void *dest)
{
        char *end = NULL;
        errno = 0;
        long long v = strtoll(arg, &end, 10);
        if (errno || !end || *end || v < 0)
                return -EINVAL;
        *(int64_t *)dest = v;
        return 0;
}

/* What the command line of gitcd snapshot save, list, verify and restore says. */
typedef struct snapshot_args {
        const char *verb, *cluster, *state_flag, *config, *to, *etcd_dir;
        int json; /* the index of -o's value in output_names: 1 for json */
        bool verify, target_flag;
        restore_flags rf;
        runner_flags tf;
} snapshot_args;

/* What the command line of gitcd snapshot receive says. */
typedef struct receive_args {
        const char *data_dir, *store_dir, *secret_dir, *listen;
        int64_t max_bytes;
} receive_args;

/* The verbs share one help; receive parses its rows, the other verbs theirs. */
enum { GROUP_VERBS = 0, GROUP_RECEIVE = 1 };

static const char *const output_names[] = {"table", "json", NULL};

#define COPY_ROWS(out, rows) (memcpy((out), (rows), sizeof(rows)), ARRAY_SIZE(rows))

/* The rows of save, list, verify and restore before --state, into out; their number. */
static size_t verb_rows(snapshot_args *a, const char *target_help, cli_opt *out)
{
        const cli_opt rows[] = {
            {.kind = CLI_OPT_STRING,
             .name = "to",
             .arg = "PATH",
             .dest = &a->to,
             .help = "save: store in this folder instead (an absolute path)"},
            {.kind = CLI_OPT_TEXT,
             .name = "--verify",
             .help = "save: then run a restore drill of it, as verify does\n"
                     "(exit 1 unless verified)"},
            {.kind = CLI_OPT_TEXT, .name = "--target T", .help = target_help},
            {.kind = CLI_OPT_TEXT,
             .name = "--kubeconfig F, --context C, --cluster-domain D, --snapshot-image I",
             .help = "save, verify, restore ID, kubernetes target: as for apply\n"
                     "and run (the image is that of the writer Pod of a claim)"},
            {.kind = CLI_OPT_TEXT,
             .name = "--hosts-ssh-key F, --hosts-passphrase-file F, --hosts-known-hosts F,"},
            {.kind = CLI_OPT_TEXT,
             .name = "--hosts-ports C,P,M",
             .help = "save, verify, hosts target: as for apply and run"},
            {.kind = CLI_OPT_STRING,
             .name = "etcd-dir",
             .arg = "DIR",
             .dest = &a->etcd_dir,
             .help = "where etcd binaries are by version (as for apply/run)"},
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FMT",
             .dest = &a->json,
             .choices = output_names,
             .help = "list: table (default) or json",
             .bad = "-o takes table or json",
             .show_arg = true},
            {.kind = CLI_OPT_STRING,
             .name = "into",
             .arg = "DIR",
             .dest = &a->rf.into,
             .help = "restore: the new data directory (must not exist)"},
            {.kind = CLI_OPT_SET,
             .name = "print-spec",
             .dest = &a->rf.print_spec,
             .help = "restore: print an EtcdCluster spec that restores it"},
            {.kind = CLI_OPT_STRING,
             .name = "version",
             .arg = "V",
             .dest = &a->rf.version,
             .help = "restore: the etcd version to restore with (default: the\n"
                     "version it was taken from, else " GITCD_DEFAULT_VERSION ")"},
            {.kind = CLI_OPT_STRING,
             .name = "name",
             .arg = "NAME",
             .dest = &a->rf.name,
             .help = "restore: the member's name (default: <cluster>-0)"},
            {.kind = CLI_OPT_STRING,
             .name = "peer-url",
             .arg = "URL",
             .dest = &a->rf.peer_url,
             .help = "restore: its peer URL (default http://127.0.0.1:2380)"},
            /* said above; here after the restore options, as getopt lists "--ver" */
            {.kind = CLI_OPT_SET, .name = "verify", .dest = &a->verify},
        };
        return COPY_ROWS(out, rows);
}

/* --state, --config, then receive's rows, the target's and --help, into out; their number. */
static size_t other_rows(snapshot_args *a, receive_args *r, cli_opt *out)
{
        const cli_opt rows[] = {
            {.kind = CLI_OPT_STRING,
             .name = "state",
             .arg = "PATH",
             .dest = &a->state_flag,
             .help = "the state database (default: the configuration's state,\n"
                     "else $GITCD_STATE_DIR/state.db, else ./.gitcd/state.db)"},
            {.kind = CLI_OPT_STRING,
             .name = "config",
             .arg = "FILE",
             .dest = &a->config,
             .help = "the daemon's configuration file (default:\n" OPS_CONFIG_DEFAULT_PATH
                     " when present): what the\n"
                     "command line leaves out -- the state, etcdDir and, for\n"
                     "save and restore ID, the settings of the target the\n"
                     "cluster runs on\n"
                     "(those of other targets are ignored)"},
            {.kind = CLI_OPT_STRING,
             .name = "data-dir",
             .arg = "DIR",
             .dest = &r->data_dir,
             .group = GROUP_RECEIVE,
             .help = "receive: etcd's data directory to create (the\n"
                     "files are staged in DIR.receive beside it)"},
            {.kind = CLI_OPT_STRING,
             .name = "store-dir",
             .arg = "DIR",
             .dest = &r->store_dir,
             .group = GROUP_RECEIVE,
             .help = "receive: the snapshot folder to keep files in, instead\n"
                     "of --data-dir"},
            {.kind = CLI_OPT_STRING,
             .name = "secret-dir",
             .arg = "DIR",
             .dest = &r->secret_dir,
             .group = GROUP_RECEIVE,
             .help = "receive: the folder with tls.crt, tls.key and token\n"
                     "(tls.key and token must be its own: docs/operating.md)"},
            {.kind = CLI_OPT_STRING,
             .name = "listen",
             .arg = "ADDR",
             .dest = &r->listen,
             .group = GROUP_RECEIVE,
             .help = "receive: host:port to serve on (default 0.0.0.0:8443)"},
            {.kind = CLI_OPT_CUSTOM,
             .name = "max-bytes",
             .arg = "N",
             .dest = &r->max_bytes,
             .parse = parse_max_bytes,
             .group = GROUP_RECEIVE,
             .help = "receive: the most bytes taken in all (default: no limit)",
             .bad = "--max-bytes takes a number of bytes",
             .show_arg = true},
            CLI_TARGET_HIDDEN_ROWS(&a->tf),
            {.kind = CLI_OPT_HELP, .help = "show this help"},
        };
        return COPY_ROWS(out, rows);
}

/* The command of gitcd snapshot's verbs (group), its rows into a and r. */
typedef struct snapshot_command {
        cli_command cmd;
        cli_opt opts[48];
        char *target_help;
} snapshot_command;

/* The verbs, for completion. */
static const char *const snapshot_verbs[] = {"save", "list", "verify", "restore", "receive", NULL};

static void command_init(snapshot_command *c, const char *prog, int group, snapshot_args *a,
                         receive_args *r)
{
        _cleanup_free_ char *kinds = target_kind_names(", ", ", ");
        c->target_help = xasprintf("save, verify, restore ID: the target the cluster runs\n"
                                   "on (%s); default: the one recorded\n"
                                   "in the state store when gitcd took the cluster's spec in,\n"
                                   "else the configuration's target, else local",
                                   kinds);
        size_t n = verb_rows(a, c->target_help, c->opts);
        n += other_rows(a, r, c->opts + n);
        assert(n <= ARRAY_SIZE(c->opts));
        c->cmd = (cli_command){.prog = prog,
                               .usage = usage_text,
                               .footer = "",
                               .opts = c->opts,
                               .n_opts = n,
                               .width = 19,
                               .group = (unsigned char)group,
                               .operands = snapshot_verbs};
}

/* The help of gitcd snapshot on out. */
static void usage(FILE *out)
{
        snapshot_args a = {0};
        receive_args r = {0};
        snapshot_command c;
        command_init(&c, "gitcd snapshot", GROUP_VERBS, &a, &r);
        cli_help(&c.cmd, out);
        free(c.target_help);
}

/* gitcd snapshot receive: serve until SIGTERM or SIGINT. */
static int cmd_receive(int argc, char **argv)
{
        snapshot_args unused = {0};
        receive_args ra = {.listen = "0.0.0.0:8443"};
        snapshot_command c;
        command_init(&c, "gitcd snapshot receive", GROUP_RECEIVE, &unused, &ra);
        int status = cli_parse(&c.cmd, argc - 1, argv + 1);
        free(c.target_help);
        if (status >= 0)
                return status;
        const char *data_dir = ra.data_dir, *store_dir = ra.store_dir, *secret_dir = ra.secret_dir;
        if (optind + 1 < argc || !data_dir == !store_dir || !secret_dir) {
                fprintf(stderr, "gitcd snapshot receive: one of --data-dir and --store-dir, and "
                                "--secret-dir, are required, and nothing else\n");
                return EXIT_USAGE;
        }
        _cleanup_free_ char *cert = path_join(secret_dir, "tls.crt");
        _cleanup_free_ char *key = path_join(secret_dir, "tls.key");
        _cleanup_free_ char *token = path_join(secret_dir, "token");
        receiver_opts o = {.data_dir = data_dir,
                           .store_dir = store_dir,
                           .listen = ra.listen,
                           .cert_file = cert,
                           .key_file = key,
                           .token_file = token,
                           .max_bytes = ra.max_bytes};
        struct sigaction sa = {.sa_handler = on_receive_signal};
        sigemptyset(&sa.sa_mask);
        (void)sigaction(SIGTERM, &sa, NULL);
        (void)sigaction(SIGINT, &sa, NULL);
        sigset_t stop, old;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        /* blocked but for the wait below: a signal never falls between check and wait */
        (void)sigprocmask(SIG_BLOCK, &stop, &old);
        receiver *r = NULL;
        _cleanup_free_ char *err = NULL;
        if (receiver_start(&o, &r, &err) < 0) {
                fprintf(stderr, "gitcd snapshot receive: %s\n", err);
                return EXIT_FAILURE;
        }
        log_info("receiver: serving %s on port %d", data_dir ? data_dir : store_dir,
                 receiver_port(r));
        sigset_t wait_set = old;
        sigdelset(&wait_set, SIGTERM);
        sigdelset(&wait_set, SIGINT);
        while (!receive_stop)
                sigsuspend(&wait_set);
        receiver_stop(r);
        return EXIT_OK;
}

/* The options of argv (after the verb) into a: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, snapshot_args *a)
{
        const char *verb = a->verb;
        receive_args unused = {0};
        snapshot_command c;
        command_init(&c, "gitcd snapshot", GROUP_VERBS, a, &unused);
        int status = cli_parse(&c.cmd, argc - 1, argv + 1);
        free(c.target_help);
        if (status >= 0)
                return status;
        a->target_flag = runner_target_given(&a->tf);
        int rest = argc - 1 - optind;
        char **args = argv + 1 + optind;
        a->cluster = rest > 0 ? args[0] : NULL;
        if (rest > 1 || (!streq(verb, "list") && !a->cluster)) {
                usage(stderr);
                return EXIT_USAGE;
        }
        return -1;
}

/* The options that go together for a->verb: -1 to go on, else EXIT_USAGE (printed). */
static int check_args(snapshot_args *a)
{
        const char *verb = a->verb, *cluster = a->cluster, *to = a->to, *etcd_dir = a->etcd_dir;
        bool json = a->json, verify = a->verify, target_flag = a->target_flag;
        bool restore_flag =
            a->rf.into || a->rf.print_spec || a->rf.version || a->rf.name || a->rf.peer_url;
        if (target_flag && !streq(verb, "save") && !streq(verb, "verify") &&
            !(streq(verb, "restore") && all_digits(cluster))) {
                fprintf(stderr,
                        "gitcd snapshot %s: --target and the target's options are for save "
                        "and verify, and for restore of a recorded snapshot (by id)\n",
                        verb);
                return EXIT_USAGE;
        }
        if (verify && !streq(verb, "save")) {
                fprintf(stderr,
                        "gitcd snapshot %s: --verify is for save (verify ID runs a "
                        "drill of a recorded snapshot)\n",
                        verb);
                return EXIT_USAGE;
        }
        if (streq(verb, "verify") && (!all_digits(cluster) || to || json || restore_flag)) {
                fprintf(stderr, "gitcd snapshot verify: takes one snapshot id (gitcd snapshot "
                                "list), the target's options, --etcd-dir, --state and "
                                "--config\n");
                return EXIT_USAGE;
        }
        if (a->tf.target && !target_kind_find(a->tf.target)) {
                runner_unknown_target("gitcd snapshot", a->tf.target);
                return EXIT_USAGE;
        }
        bool restore = streq(verb, "restore");
        if (restore && !a->rf.into && !a->rf.print_spec) {
                fprintf(stderr, "gitcd snapshot restore: --into DIR or --print-spec\n");
                return EXIT_USAGE;
        }
        if (restore && (to || json)) {
                fprintf(stderr, "gitcd snapshot restore: --to and -o are not for restore\n");
                return EXIT_USAGE;
        }
        if (!restore && restore_flag) {
                fprintf(stderr,
                        "gitcd snapshot %s: --into, --print-spec, --version, --name and "
                        "--peer-url are for restore\n",
                        verb);
                return EXIT_USAGE;
        }
        if (!restore && !streq(verb, "verify") && cluster && !state_cluster_name_valid(cluster)) {
                fprintf(stderr, "gitcd snapshot: clusters are named namespace/name, not '%s'\n",
                        cluster);
                return EXIT_USAGE;
        }
        if (streq(verb, "list") && (to || etcd_dir)) {
                fprintf(stderr, "gitcd snapshot list: --to and --etcd-dir are for save\n");
                return EXIT_USAGE;
        }
        if (streq(verb, "save") && json) {
                fprintf(stderr, "gitcd snapshot save: -o is for list\n");
                return EXIT_USAGE;
        }
        if (streq(verb, "save") && to && to[0] != '/') {
                fprintf(stderr, "gitcd snapshot save: --to takes an absolute folder path\n");
                return EXIT_USAGE;
        }

        return -1;
}

/* The state (or none, for a file restored) and the verb's work. */
static int dispatch(snapshot_args *a)
{
        const char *verb = a->verb, *cluster = a->cluster;
        bool restore = streq(verb, "restore");
        runner_flags *tf = &a->tf;
        restore_flags *rf = &a->rf;
        /* Restoring a file needs no state: an unusable default file is then no matter. */
        bool needs_state = !restore || all_digits(cluster);
        _cleanup_(ops_config_freep) ops_config *file = NULL;
        if (cli_daemon_config(a->config, OPS_CONFIG_DEFAULT_PATH,
                              a->state_flag != NULL || !needs_state, "gitcd snapshot", &file) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *path = cli_state_path(a->state_flag, file);
        tf->etcd_dir = a->etcd_dir;
        if (restore) {
                rf->etcd_dir = runner_etcd_dir(tf, file);
                rf->state = path;
                rf->tf = tf;
                rf->file = file;
                return do_restore(cluster, rf);
        }
        if (streq(verb, "list"))
                return do_list(cluster, path, a->json);
        if (streq(verb, "verify"))
                return do_verify(cluster, path, tf, file);
        return do_save(cluster, path, a->to, a->verify, tf, file);
}

int cmd_snapshot(int argc, char **argv)
{
        if (argc < 2 || streq(argv[1], "-h") || streq(argv[1], "--help")) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : EXIT_OK;
        }
        const char *verb = argv[1];
        if (streq(verb, "receive"))
                return cmd_receive(argc, argv);
        if (!streq(verb, "save") && !streq(verb, "list") && !streq(verb, "restore") &&
            !streq(verb, "verify")) {
                fprintf(stderr,
                        "gitcd snapshot: unknown subcommand '%s' (save, list, verify, restore, "
                        "receive)\n",
                        verb);
                return EXIT_USAGE;
        }
        snapshot_args a = {.verb = verb};
        int status = parse_args(argc, argv, &a);
        if (status < 0)
                status = check_args(&a);
        return status < 0 ? dispatch(&a) : status;
}

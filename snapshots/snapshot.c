/*
 * The snapshot pipeline (snapshots/snapshot.h) and retention.
 *
 * Design decisions:
 *   - Streamed, never held whole: etcd's stream goes chunk by chunk into a
 *     temporary file under <state dir>/snapshots-tmp/ while a SHA-256 runs
 *     over it; compression reads that file and writes a second one.
 *     Temporaries are not fsynced (they are deleted at the end): the
 *     destination makes its copy durable, and every destination checks
 *     that the bytes it stored have the SHA-256 taken on the way in.
 *   - Verified twice before upload: etcd/client.c checks the sha256 trailer
 *     etcd appends, and the file must pass what `etcdutl snapshot status`
 *     checks (bbolt's meta pages, every page reached once, key order, every
 *     bucket walked), read in-process by snapstore/bbolt.c rather than by a
 *     separate etcd process per snapshot; the revision recorded is the one
 *     it reads, the figure etcd's tool would print.
 *   - The record is written "running" first and finished once, after the
 *     destination confirmed the upload; any failure on the way finishes it
 *     "failed" with the reason, so a partial upload never counts.
 *   - The member is a healthy voter that is not the leader when one
 *     exists (a snapshot costs the member disk and network bandwidth),
 *     else the leader.
 *   - The record keeps how many keys the member held at the snapshot's
 *     revision (a count-only Range), what a restore drill compares with
 *     when the cluster no longer has that revision (snapshots/drill.h).
 *   - Keys are <namespace>/<name>/<UTC time>-<record id>-r<revision>.db
 *     (".gz" added when compressed): unique per record, so retention,
 *     which deletes by recorded key, can never delete another snapshot.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "api/spec.h"
#include "etcd/client.h"
#include "etcd/credentials.h"
#include "snapshots/snapshot.h"
#include "snapstore/destination.h"
#include "snapstore/bbolt.h"
#include "snapstore/restore.h"
#include "targets/target.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define CHUNK (256 * 1024)

void snapshot_job_free(snapshot_job *j)
{
        if (!j)
                return;
        free(j->cluster);
        free(j->trigger);
        free(j->reason);
        free(j->declared_by);
        for (size_t i = 0; i < j->n_endpoints; i++) {
                free(j->endpoints[i].member);
                free(j->endpoints[i].client_url);
        }
        free(j->endpoints);
        free(j->ca);
        free(j->cert);
        free(j->key);
        if (j->override) {
                storage_location_release(j->override);
                free(j->override);
        }
        free(j->spec_json);
        free(j->state_dir);
        free(j->secret_dir);
        free(j->secret_error);
        free(j->etcd_dir);
        snapshot_pvc_writer_free(j->pvc);
        free(j);
}

/* ---- the target's writer for pvc locations ---- */

#define WRITER_RETRY_MS 1000

typedef struct target_writer {
        target *t;
        etcd_cluster *c;
        void *handle;        /* the writer running; NULL: none */
        int64_t wait_ms;     /* how long another writer of the cluster in use is waited for */
        atomic_bool *cancel; /* set: stop waiting; NULL: never */
} target_writer;

/*
 * The target starts a writer only when no other of the cluster is in use
 * (-EAGAIN otherwise, at once). The wait is here, between attempts, outside
 * any operation of the target: the writer in use may be this process's
 * own, and its stop needs the cluster's operations free.
 */
static int tw_start(void *userdata, const char *claim, const char *folder,
                    struct receiver_peer *ret_peer, char **ret_error)
{
        target_writer *w = userdata;
        assert(!w->handle);
        int64_t t0 = now_mono_ms();
        bool told = false;
        int r;
        for (;;) {
                r = w->t->ops->writer_start(w->t, w->c, claim, folder, &w->handle, ret_peer);
                if (r != -EAGAIN || now_mono_ms() - t0 >= w->wait_ms ||
                    (w->cancel && atomic_load(w->cancel)))
                        break;
                if (!told)
                        log_warn("%s/%s: %s; waiting up to %lld s for it to end", w->c->namespace_,
                                 w->c->name, target_last_error(w->t),
                                 (long long)(w->wait_ms / 1000));
                told = true;
                int64_t left = w->wait_ms - (now_mono_ms() - t0);
                msleep(left < WRITER_RETRY_MS ? left : WRITER_RETRY_MS);
        }
        if (r < 0) {
                w->handle = NULL;
                *ret_error =
                    r == -EAGAIN && w->wait_ms > 0
                        ? xasprintf("%s (waited %lld s for it to end)", target_last_error(w->t),
                                    (long long)((now_mono_ms() - t0) / 1000))
                        : xstrdup(target_last_error(w->t));
        } else if (told) {
                log_info("%s/%s: the other snapshot writer ended; this one runs", w->c->namespace_,
                         w->c->name);
        }
        return r;
}

static void tw_stop(void *userdata)
{
        target_writer *w = userdata;
        if (w->t->ops->writer_stop(w->t, w->c, w->handle) < 0)
                log_warn("%s/%s: the snapshot writer was not removed (the next one removes it): "
                         "%s",
                         w->c->namespace_, w->c->name, target_last_error(w->t));
        w->handle = NULL;
}

pvc_writer *snapshot_pvc_writer_new(target *t, const etcd_cluster *c)
{
        if (!t || !(t->ops->caps & TARGET_CAP_PVC_WRITER) || !c)
                return NULL;
        _cleanup_free_ char *id = etcd_cluster_id(c);
        etcd_cluster *copy = spec_dup(c, id);
        if (!copy)
                return NULL;
        target_writer *w = XNEW(target_writer);
        w->t = t;
        w->c = copy;
        w->wait_ms = SNAPSHOT_WRITER_WAIT_MS;
        pvc_writer *pw = XNEW(pvc_writer);
        *pw = (pvc_writer){.start = tw_start, .stop = tw_stop, .userdata = w};
        return pw;
}

void snapshot_pvc_writer_set_wait(pvc_writer *pw, int64_t wait_ms, atomic_bool *cancel)
{
        if (!pw)
                return;
        target_writer *w = pw->userdata;
        w->wait_ms = wait_ms > 0 ? wait_ms : 0;
        w->cancel = cancel;
}

void snapshot_pvc_writer_free(pvc_writer *pw)
{
        if (!pw)
                return;
        target_writer *w = pw->userdata;
        assert(!w->handle); /* the destination that started it stopped it */
        etcd_cluster_free(w->c);
        free(w);
        free(pw);
}

int snapshot_fetch_on(state_db *db, const state_snapshot *rec, const char *state_dir, target *t,
                      const char *path, char **ret_error)
{
        assert(t);
        /* the writer of the target, for the spec the record's destination is in */
        etcd_cluster *c = snapshot_record_cluster(db, rec);
        pvc_writer *own = c ? snapshot_pvc_writer_new(t, c) : NULL;
        int r = snapshot_fetch(db, rec, state_dir, own, path, ret_error);
        snapshot_pvc_writer_free(own);
        etcd_cluster_free(c);
        return r;
}

int snapshot_secret_folder(target *t, const etcd_cluster *c, const storage_location *loc,
                           char **ret_dir, char **ret_error)
{
        assert(c && loc && ret_dir);
        *ret_dir = NULL;
        if (!t || !t->ops->secret_folder || loc->kind != DEST_S3 ||
            isempty(loc->s3.credentials_secret))
                return 0;
        int r = t->ops->secret_folder(t, c, loc->s3.credentials_secret, ret_dir);
        if (r < 0) {
                *ret_error = xasprintf(
                    "S3 credentials Secret %s/%s: %s", c->namespace_ ? c->namespace_ : "default",
                    loc->s3.credentials_secret, r == -ENOENT ? "not found" : target_last_error(t));
                *ret_dir = NULL;
        }
        return r;
}

/* The S3 credentials Secret loc names, as the target wrote it; a Secret that
 * cannot be read fails the snapshot, recorded (job->secret_error). */
static void job_read_secret(snapshot_job *j, target *t, const etcd_cluster *c,
                            const storage_location *loc)
{
        free(j->secret_dir);
        free(j->secret_error);
        j->secret_dir = j->secret_error = NULL;
        (void)snapshot_secret_folder(t, c, loc, &j->secret_dir, &j->secret_error);
}

void snapshot_job_set_destination(snapshot_job *job, target *t, const storage_location *loc)
{
        assert(job && loc);
        if (job->override) {
                storage_location_release(job->override);
                free(job->override);
        }
        job->override = XNEW(storage_location);
        json_t *lj = spec_location_to_json(loc);
        int r = spec_location_from_json(lj, job->override);
        assert(r == 0);
        (void)r;
        json_decref(lj);
        free(job->secret_dir);
        free(job->secret_error);
        job->secret_dir = job->secret_error = NULL;
        if (!t)
                return;
        etcd_cluster *c = spec_from_json_text(job->spec_json, job->cluster);
        if (c)
                job_read_secret(job, t, c, job->override);
        etcd_cluster_free(c);
}

int snapshot_job_from_state(state_db *db, target *t, const char *cluster, const char *trigger,
                            int64_t slot_ms, const char *state_dir, snapshot_job **ret,
                            char **ret_error)
{
        state_cluster *sc = NULL;
        int r = state_cluster_get(db, cluster, &sc);
        if (r < 0) {
                *ret_error = xstrdup(state_last_error());
                return r;
        }
        const char *json = state_cluster_spec_json(sc);
        if (!json) {
                state_cluster_free(sc);
                *ret_error = xasprintf("%s has no recorded spec", cluster);
                return -ENOENT;
        }
        _cleanup_(snapshot_job_freep) snapshot_job *j = XNEW(snapshot_job);
        j->cluster = xstrdup(cluster);
        j->trigger = xstrdup(trigger);
        j->slot_ms = slot_ms;
        j->spec_json = xstrdup(json);
        j->state_dir = xstrdup(state_dir);
        state_cluster_free(sc);

        state_member_list ml = {0};
        r = state_member_list_for(db, cluster, false, &ml);
        if (r < 0) {
                *ret_error = xstrdup(state_last_error());
                return r;
        }
        const state_member *first = NULL;
        j->endpoints = xcalloc(ml.n + 1, sizeof(snapshot_endpoint));
        for (size_t i = 0; i < ml.n; i++) {
                const state_member *m = ml.items[i];
                if (m->dormant || isempty(m->client_url))
                        continue;
                first = first ? first : m;
                j->endpoints[j->n_endpoints].member = xstrdup(m->name);
                j->endpoints[j->n_endpoints++].client_url = xstrdup(m->client_url);
        }
        if (t) {
                etcd_cluster *c = spec_from_json_text(j->spec_json, cluster);
                if (c) {
                        if (first && target_client_tls(t, c, &j->ca, &j->cert, &j->key) < 0)
                                log_warn("%s: no client certificate for gitcd: %s", cluster,
                                         target_last_error(t));
                        job_read_secret(j, t, c, &c->snapshots.destination);
                        j->pvc = snapshot_pvc_writer_new(t, c);
                }
                etcd_cluster_free(c);
        }
        state_member_list_release(&ml);
        *ret = TAKE_PTR(j);
        return 0;
}

/* with spec.auth: etcd's root, as every client of the cluster (etcd/credentials.h) */
static void job_credentials(const snapshot_job *job, auth_creds *ret)
{
        if (job->state_dir && auth_credentials(job->state_dir, job->cluster, ret) < 0)
                log_warn("%s: cannot read the etcd root password files", job->cluster);
}

/* A client of endpoints: the job's members' TLS identity when tls, cr's credentials. */
static int job_client(const snapshot_job *job, const char *endpoints, bool tls,
                      const auth_creds *cr, int call_timeout_ms, etcd_client **ret)
{
        etcd_client_opts o = {.endpoints = endpoints,
                              .cacert = tls ? job->ca : NULL,
                              .cert = tls ? job->cert : NULL,
                              .key = tls ? job->key : NULL,
                              .user = cr->user,
                              .password = cr->password,
                              .fallback_password = cr->fallback_password,
                              .call_timeout_ms = call_timeout_ms,
                              .dial_timeout_ms = 2000};
        return etcd_client_new(&o, ret);
}

int snapshot_job_client(const snapshot_job *job, const char *endpoints, int call_timeout_ms,
                        etcd_client **ret)
{
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; !endpoints && i < job->n_endpoints; i++)
                sb_printf(&eps, "%s%s", i ? "," : "", job->endpoints[i].client_url);
        auth_creds cr = {0};
        job_credentials(job, &cr);
        int r = job_client(job, endpoints ? endpoints : sb_str(&eps), !endpoints, &cr,
                           call_timeout_ms, ret);
        auth_creds_release(&cr);
        sb_release(&eps);
        return r;
}

static bool cancelled(const snapshot_job *j)
{
        return j->cancel && atomic_load(j->cancel);
}

static int open_dest(const storage_location *loc, const char *state_dir, const char *secret_dir,
                     const pvc_writer *pvc, const char *cluster, snapshot_dest **ret,
                     char **ret_error)
{
        _cleanup_free_ char *ns = xstrndup(cluster, strcspn(cluster, "/"));
        snapshot_dest_context ctx = {
            .state_dir = state_dir, .namespace_ = ns, .secret_dir = secret_dir, .pvc = pvc};
        return snapshot_dest_open(loc, &ctx, ret, ret_error);
}

/* ---- the pipeline ---- */

typedef struct sink {
        int fd;
        int err;
        hash_ctx *sha;
        const snapshot_job *job;
} sink;

static int sink_write(sink *s, const void *data, size_t len)
{
        hash_update(s->sha, data, len);
        int r = write_all(s->fd, data, len);
        if (r < 0)
                s->err = r;
        return r;
}

static int stream_chunk(const void *data, size_t len, void *userdata)
{
        sink *s = userdata;
        FAILPOINT("snapshot.streaming");
        if (cancelled(s->job))
                return s->err = -ECANCELED;
        return sink_write(s, data, len);
}

/* A new empty temporary file under dir; its path in *ret_path. */
static int temp_file(const char *dir, const char *suffix, char **ret_path)
{
        char *path = xasprintf("%s/snap-XXXXXX%s", dir, suffix);
        int fd = mkstemps(path, (int)strlen(suffix));
        if (fd < 0) {
                int r = -errno;
                free(path);
                return r;
        }
        fchmod(fd, 0600);
        *ret_path = path;
        return fd;
}

/* gzip src into a new temporary file; SHA-256 and size of the output. */
static int compress_gzip(const snapshot_job *job, const char *dir, const char *src, char **ret_path,
                         char sha_out[65], int64_t *ret_size, char **ret_error)
{
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return -errno;
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int out = temp_file(dir, ".gz", &path);
        if (out < 0) {
                *ret_error =
                    xasprintf("cannot create a temporary file in %s: %s", dir, strerror(-out));
                return out;
        }
        assert(path);
        sink s = {.fd = out, .sha = hash_sha256_new(), .job = job};
        z_stream z = {0};
        if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                abort();
        _cleanup_free_ uint8_t *ibuf = xmalloc(CHUNK);
        _cleanup_free_ uint8_t *obuf = xmalloc(CHUNK);
        int64_t size = 0;
        int r = 0, flush = Z_NO_FLUSH;
        while (r == 0 && flush != Z_FINISH) {
                ssize_t n = read(in, ibuf, CHUNK);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (cancelled(job)) {
                        r = -ECANCELED;
                        break;
                }
                flush = n == 0 ? Z_FINISH : Z_NO_FLUSH;
                z.next_in = ibuf;
                z.avail_in = (uInt)n;
                do {
                        z.next_out = obuf;
                        z.avail_out = CHUNK;
                        int zr = deflate(&z, flush);
                        assert(zr != Z_STREAM_ERROR);
                        (void)zr;
                        size_t have = CHUNK - z.avail_out;
                        if (have && (r = sink_write(&s, obuf, have)) < 0)
                                break;
                        size += (int64_t)have;
                } while (z.avail_out == 0);
        }
        deflateEnd(&z);
        if (r < 0) {
                hash_free(s.sha);
                unlink(path);
                if (r != -ECANCELED)
                        *ret_error = xasprintf("compressing the snapshot failed: %s", strerror(-r));
                return r;
        }
        hash_final_hex(s.sha, sha_out);
        hash_free(s.sha);
        *ret_size = size;
        *ret_path = TAKE_PTR(path);
        return 0;
}

/*
 * Choosing the member: every member is asked its Status at once, each by a
 * client of its own in a thread of its own (a client holds one connection
 * at a time), and the first healthy follower to answer is taken; the leader
 * only once every member has answered or failed and no follower is healthy.
 * The caller leaves as soon as it has its answer: a member still being
 * asked (one that does not answer holds its thread up to the dial timeout)
 * finishes on its own, and the last one out frees the race. The chosen
 * member's client, its connection open, takes the snapshot.
 */
typedef struct status_ask {
        etcd_client *cl;
        char *url, *member;
        etcd_endpoint_status *st; /* NULL when the call failed: error says why */
        char *error;
        bool done;
        struct status_race *race;
} status_ask;

typedef struct status_race {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        size_t n, n_done, refs; /* refs: the threads still running, and the caller */
        status_ask asks[];
} status_race;

static void status_ask_release(status_ask *a)
{
        etcd_client_free(a->cl);
        etcd_endpoint_status_free(a->st);
        free(a->url);
        free(a->member);
        free(a->error);
        *a = (status_ask){0};
}

/* Drop one reference under the lock (held on entry, released here); the last frees all. */
static void status_race_unref(status_race *race)
{
        bool last = --race->refs == 0;
        pthread_mutex_unlock(&race->lock);
        if (!last)
                return;
        for (size_t i = 0; i < race->n; i++)
                status_ask_release(&race->asks[i]);
        pthread_cond_destroy(&race->cond);
        pthread_mutex_destroy(&race->lock);
        free(race);
}

static void ask_status(status_ask *a)
{
        etcd_endpoint_status *st = NULL;
        int r = etcd_status(a->cl, a->url, &st);
        char *error = r < 0 ? xstrdup(etcd_client_last_error(a->cl)) : NULL;
        status_race *race = a->race;
        pthread_mutex_lock(&race->lock);
        a->st = st;
        a->error = error;
        a->done = true;
        race->n_done++;
        pthread_cond_broadcast(&race->cond);
}

static void *status_main(void *arg)
{
        status_ask *a = arg;
        ask_status(a);
        status_race_unref(a->race);
        return NULL;
}

static bool status_healthy(const etcd_endpoint_status *st)
{
        return st && !st->is_learner && st->leader != 0 && st->n_errors == 0;
}

/* The index of the first done, healthy follower (or leader), or -1; under the lock. */
static ssize_t race_pick(const status_race *race, bool leader)
{
        for (size_t i = 0; i < race->n; i++) {
                const etcd_endpoint_status *st = race->asks[i].st;
                if (race->asks[i].done && status_healthy(st) &&
                    (st->member_id == st->leader) == leader)
                        return (ssize_t)i;
        }
        return -1;
}

/*
 * Start asking every member of job its Status (one thread each). NULL when
 * their clients cannot be made (race_pick_member then says so): the race
 * is started before the snapshot's record is first committed, so that the
 * commit's fsync and the members' answers overlap.
 */
static status_race *race_start(const snapshot_job *job)
{
        size_t n = job->n_endpoints;
        status_race *race = xcalloc(1, sizeof(*race) + n * sizeof(race->asks[0]));
        pthread_mutex_init(&race->lock, NULL);
        pthread_cond_init(&race->cond, NULL);
        race->n = n;
        race->refs = 1;
        auth_creds cr = {0};
        job_credentials(job, &cr);
        int r = 0;
        for (size_t i = 0; r == 0 && i < n; i++) {
                status_ask *a = &race->asks[i];
                a->race = race;
                a->url = xstrdup(job->endpoints[i].client_url);
                a->member = xstrdup(job->endpoints[i].member);
                r = job_client(job, a->url, true, &cr, 5000, &a->cl);
        }
        auth_creds_release(&cr);
        if (r < 0) {
                pthread_mutex_lock(&race->lock);
                status_race_unref(race);
                return NULL;
        }
        for (size_t i = 0; i < n; i++) {
                status_ask *a = &race->asks[i];
                pthread_t th;
                pthread_mutex_lock(&race->lock);
                race->refs++;
                pthread_mutex_unlock(&race->lock);
                if (pthread_create(&th, NULL, status_main, a) == 0) {
                        pthread_detach(th);
                        continue;
                }
                ask_status(a); /* no thread: asked here, in turn */
                race->refs--;
                pthread_mutex_unlock(&race->lock);
        }
        return race;
}

/* The caller leaves the race without an answer (a step before it failed). */
static void race_abandon(status_race *race)
{
        if (!race)
                return;
        pthread_mutex_lock(&race->lock);
        for (size_t i = 0; i < race->n; i++)
                if (race->asks[i].done)
                        status_ask_release(&race->asks[i]);
        status_race_unref(race);
}

/* The healthy voter to take the snapshot from: a follower when one answers, else the leader. */
static int race_pick_member(status_race *race, size_t *ret_idx, etcd_client **ret_client,
                            char **ret_version, char **ret_error)
{
        if (!race) {
                *ret_error = xstrdup("the members' client URLs are not usable");
                return -EINVAL;
        }
        size_t n = race->n;
        pthread_mutex_lock(&race->lock);
        ssize_t idx;
        while ((idx = race_pick(race, false)) < 0 && race->n_done < n)
                pthread_cond_wait(&race->cond, &race->lock);
        if (idx < 0)
                idx = race_pick(race, true);
        if (idx < 0) {
                strbuf why = STRBUF_INIT;
                for (size_t i = 0; i < n; i++) {
                        const status_ask *a = &race->asks[i];
                        const etcd_endpoint_status *st = a->st;
                        sb_printf(&why, "%s%s: %s", why.len ? "; " : "", a->member,
                                  !st               ? a->error
                                  : st->is_learner  ? "a learner"
                                  : st->leader == 0 ? "knows no leader"
                                                    : st->errors[0]);
                }
                *ret_error =
                    xasprintf("no healthy voter answered%s%s", why.len ? ": " : "", sb_str(&why));
                sb_release(&why);
                status_race_unref(race);
                return -EHOSTUNREACH;
        }
        status_ask *a = &race->asks[idx];
        *ret_idx = (size_t)idx;
        *ret_version = xstrdup_null(a->st->version);
        *ret_client = TAKE_PTR(a->cl);
        /* what the threads that are done left; the others free theirs when the race ends */
        for (size_t i = 0; i < n; i++)
                if (race->asks[i].done)
                        status_ask_release(&race->asks[i]);
        status_race_unref(race);
        return 0;
}

static void audit_snapshot(state_db *db, const snapshot_job *job, const state_snapshot *rec,
                           int64_t id, int64_t now_ms)
{
        json_t *after = json_object();
        json_object_set_new(after, "id", json_integer(id));
        json_object_set_new(after, "trigger", json_string(job->trigger));
        if (job->declared_by)
                json_object_set_new(after, "declared_by", json_string(job->declared_by));
        if (rec->member)
                json_object_set_new(after, "member", json_string(rec->member));
        if (streq_ptr(rec->result, "succeeded")) {
                json_object_set_new(after, "revision", json_integer(rec->revision));
                if (rec->key_count >= 0)
                        json_object_set_new(after, "keys", json_integer(rec->key_count));
                json_object_set_new(after, "size", json_integer(rec->size));
                json_object_set_new(after, "sha256", json_string(rec->sha256));
                json_object_set_new(after, "compression", json_string(rec->compression));
                json_object_set_new(after, "location", json_string(rec->location));
        }
        _cleanup_free_ char *text = json_dumps(after, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(after);
        bool ok = streq_ptr(rec->result, "succeeded");
        _cleanup_free_ char *reason =
            ok ? xstrdup(job->reason                       ? job->reason
                         : streq(job->trigger, "schedule") ? "scheduled snapshot"
                         : streq(job->trigger, "declared") ? "declared snapshot"
                                                           : "snapshot by hand")
               : xasprintf("%s%ssnapshot failed: %s", job->declared_by ? job->declared_by : "",
                           job->declared_by ? ": " : "", rec->error ? rec->error : "");
        state_audit_event ev = {
            .time_ms = now_ms,
            .cluster = job->cluster,
            .action = "snapshot.save",
            .reason = reason,
            .after_json = text,
            .outcome = ok ? "success" : "failure",
            .duration_ms = rec->duration_ms,
        };
        if (state_audit_append(db, &ev, NULL) < 0)
                log_warn("%s: cannot audit snapshot %lld: %s", job->cluster, (long long)id,
                         state_last_error());
}

static char *snapshot_key(const char *cluster, int64_t now_ms, int64_t id, int64_t revision,
                          snapshot_compression comp)
{
        char when[40];
        format_rfc3339(now_ms, when, sizeof(when)); /* 2026-11-23T14:00:00Z */
        strbuf sb = STRBUF_INIT;
        for (const char *p = when; *p; p++)
                if (*p != '-' && *p != ':')
                        sb_appendc(&sb, *p);
        char *key = xasprintf("%s/%s-%lld-r%lld.db%s", cluster, sb_str(&sb), (long long)id,
                              (long long)revision, comp == COMPRESSION_GZIP ? ".gz" : "");
        sb_release(&sb);
        return key;
}

/*
 * One snapshot on its way, handed from step to step (snapshot_take). Every
 * step returns 0 or a negative errno with ->error set; the record (rec)
 * points into the fields below and is finished once, by take_finish.
 */
typedef struct take_ctx {
        const snapshot_job *job;
        int64_t id, started;
        state_snapshot rec;
        char *error;
        char raw_sha[65], stored_sha[65];
        char *tmp_dir, *raw_path, *gz_path, *version, *dest_id, *key, *location, *compression, *why;
        etcd_cluster *spec;
        snapshot_compression comp;
        etcd_client *cl;
        snapshot_dest *dest;
        const snapshot_endpoint *from;
        status_race *race; /* the members being asked, until take_member */
        hash_ctx *sha;     /* the stream's SHA-256, made ready while they answer */
} take_ctx;

/* Where it goes: the recorded spec's destination (or --to), opened. */
static int take_destination(take_ctx *t)
{
        const snapshot_job *job = t->job;
        t->spec = spec_from_json_text(job->spec_json, job->cluster);
        if (!t->spec) {
                t->error = xstrdup("the cluster's recorded spec cannot be read");
                return -EBADMSG;
        }
        const storage_location *loc =
            job->override ? job->override : &t->spec->snapshots.destination;
        if (loc->kind == DEST_NONE) {
                t->error = xstrdup("the cluster has no snapshot destination (spec.snapshots."
                                   "destination, or --to)");
                return -EINVAL;
        }
        t->comp = t->spec->snapshots.compression;
        t->compression = xstrdup(t->comp == COMPRESSION_GZIP ? "gzip" : "none");
        t->dest_id = snapshot_destination_id(loc);
        if (job->secret_error) {
                t->error = xstrdup(job->secret_error);
                return -ENOKEY;
        }
        return open_dest(loc, job->state_dir, job->secret_dir, job->pvc, job->cluster, &t->dest,
                         &t->error);
}

/* From whom: a healthy voter (not the leader when one can). */
static int take_member(take_ctx *t)
{
        const snapshot_job *job = t->job;
        if (job->n_endpoints == 0) {
                t->error = xstrdup("the cluster has no members with a client URL");
                return -EHOSTUNREACH;
        }
        /* OpenSSL's first digest builds its method store (about a million instructions):
         * done here, while the members answer, instead of after */
        t->sha = hash_sha256_new();
        size_t idx = 0;
        status_race *race = TAKE_PTR(t->race);
        int r = race_pick_member(race, &idx, &t->cl, &t->version, &t->error);
        if (r < 0)
                return r;
        t->from = &job->endpoints[idx];
        t->rec.member = t->from->member;
        t->rec.etcd_version = t->version;
        return 0;
}

/* etcd's stream into a temporary file, hashed on the way; the member's db size recorded. */
static int take_stream(take_ctx *t)
{
        int r = mkdir_p(t->tmp_dir, 0700);
        if (r < 0) {
                t->error = xasprintf("cannot create %s: %s", t->tmp_dir, strerror(-r));
                return r;
        }
        int fd = temp_file(t->tmp_dir, ".db", &t->raw_path);
        if (fd < 0) {
                t->error = xasprintf("cannot create a temporary file in %s: %s", t->tmp_dir,
                                     strerror(-fd));
                return fd;
        }
        sink s = {.fd = fd, .sha = TAKE_PTR(t->sha), .job = t->job};
        etcd_snapshot_info info = {0};
        r = etcd_snapshot(t->cl, t->from->client_url, stream_chunk, &s, &info);
        if (r >= 0)
                hash_final_hex(s.sha, t->raw_sha);
        hash_free(s.sha);
        close(fd);
        if (r < 0) {
                if (s.err == -ECANCELED)
                        t->error = xstrdup("aborted: gitcd is stopping");
                else if (s.err < 0)
                        t->error = xasprintf("cannot write %s: %s", t->raw_path, strerror(-s.err));
                else
                        t->error = xasprintf("from %s: %s", t->from->member,
                                             etcd_client_last_error(t->cl));
                return s.err < 0 ? s.err : r == ETCD_ERR_SNAPSHOT_CHECKSUM ? -EBADMSG : -EIO;
        }
        t->rec.db_size = (int64_t)info.size;
        t->rec.revision = info.revision; /* until the file says */
        return 0;
}

/* The file must be a sound etcd database; the revision it holds, and the keys at that revision. */
static int take_verify(take_ctx *t)
{
        snapshot_status status = {0};
        int r = bbolt_check_file(t->raw_path, &status, &t->why);
        if (r < 0) {
                t->error = xasprintf("the snapshot from %s failed verification: %s",
                                     t->from->member, t->why);
                return r;
        }
        if (status.revision > 0)
                t->rec.revision = status.revision;
        /* what a restore drill compares with once the cluster compacted this revision away;
         * revision 0: the file holds no key at all */
        if (t->rec.revision == 0)
                t->rec.key_count = 0;
        else if (etcd_count_keys(t->cl, t->from->client_url, t->rec.revision, &t->rec.key_count,
                                 NULL) < 0) {
                log_debug("%s: cannot count the keys at revision %lld on %s: %s", t->job->cluster,
                          (long long)t->rec.revision, t->from->member,
                          etcd_client_last_error(t->cl));
                t->rec.key_count = -1;
        }
        return 0;
}

/* Compressed when the spec asks, then uploaded under a key of its own. */
static int take_store(take_ctx *t)
{
        const snapshot_job *job = t->job;
        if (t->comp == COMPRESSION_GZIP) {
                int64_t size = 0;
                int r = compress_gzip(job, t->tmp_dir, t->raw_path, &t->gz_path, t->stored_sha,
                                      &size, &t->error);
                if (r == -ECANCELED)
                        t->error = xstrdup("aborted: gitcd is stopping");
                if (r < 0)
                        return r;
                t->rec.size = size;
        } else {
                memcpy(t->stored_sha, t->raw_sha, sizeof(t->stored_sha));
                t->rec.size = t->rec.db_size;
        }
        if (cancelled(job)) {
                t->error = xstrdup("aborted: gitcd is stopping");
                return -ECANCELED;
        }
        t->key = snapshot_key(job->cluster, t->started, t->id, t->rec.revision, t->comp);
        int r = snapshot_dest_put_file(t->dest, t->key, t->gz_path ? t->gz_path : t->raw_path,
                                       t->stored_sha, &t->error);
        if (r < 0)
                return r;
        t->location = snapshot_dest_location(t->dest, t->key);
        t->rec.result = "succeeded";
        t->rec.sha256 = t->stored_sha;
        t->rec.key = t->key;
        t->rec.location = t->location;
        return 0;
}

/*
 * The record finished once, the outcome audited in the same transaction,
 * everything freed. An upload the state could not record is deleted again
 * and audited as failed. Returns r, or the recording's -errno.
 */
static int take_finish(state_db *db, take_ctx *t, int64_t t0, int r)
{
        if (t->raw_path)
                unlink(t->raw_path);
        if (t->gz_path)
                unlink(t->gz_path);
        t->rec.error = t->error;
        t->rec.compression = t->compression;
        t->rec.destination = t->dest_id;
        t->rec.duration_ms = now_mono_ms() - t0;
        int64_t now = now_wall_ms();
        /* the record and its audit line in one commit (one fsync, not two) */
        int k = state_begin(db);
        if (k >= 0) {
                k = state_snapshot_finish(db, t->id, &t->rec, now);
                if (k >= 0)
                        audit_snapshot(db, t->job, &t->rec, t->id, now);
                k = k < 0 ? (state_rollback(db), k) : state_commit(db);
        }
        if (k < 0) {
                if (r >= 0) {
                        /* uploaded, but not recorded: it must not count; remove it again */
                        t->error = xasprintf("cannot record the snapshot: %s", state_last_error());
                        (void)snapshot_dest_delete(t->dest, t->key, NULL);
                        r = k;
                }
                t->rec.result = "failed";
                t->rec.error = t->error;
                audit_snapshot(db, t->job, &t->rec, t->id, now);
        }
        if (r < 0)
                log_debug("%s: snapshot %lld failed: %s", t->job->cluster, (long long)t->id,
                          t->error);
        snapshot_dest_free(t->dest);
        etcd_client_free(t->cl);
        hash_free(t->sha);
        etcd_cluster_free(t->spec);
        free(t->tmp_dir);
        free(t->raw_path);
        free(t->gz_path);
        free(t->version);
        free(t->dest_id);
        free(t->key);
        free(t->location);
        free(t->compression);
        free(t->why);
        return r;
}

/* The steps of a snapshot, in order; the first that fails ends it. */
static int (*const take_steps[])(take_ctx *t) = {
    take_destination, take_member, take_stream, take_verify, take_store,
};

int snapshot_take(state_db *db, const snapshot_job *job, int64_t *ret_id, char **ret_error)
{
        assert(db && job && job->cluster && job->trigger);
        int64_t t0 = now_mono_ms(), started = now_wall_ms();
        int64_t id = 0;
        /* the members answer while the record's first commit reaches the disk */
        status_race *race = job->n_endpoints > 0 ? race_start(job) : NULL;
        int r =
            job->request_id > 0
                ? state_snapshot_begin_declared(db, job->request_id, started, &id)
                : state_snapshot_begin(db, job->cluster, job->trigger, job->slot_ms, started, &id);
        if (r < 0) {
                race_abandon(race);
                *ret_error = xstrdup(state_last_error());
                if (ret_id)
                        *ret_id = 0;
                return r;
        }
        take_ctx t = {
            .job = job,
            .id = id,
            .started = started,
            .rec = {.result = "failed", .key_count = -1},
            .tmp_dir = path_join(job->state_dir, "snapshots-tmp"),
            .race = race,
        };
        r = 0;
        for (size_t i = 0; i < ARRAY_SIZE(take_steps) && r >= 0; i++)
                r = take_steps[i](&t);
        race_abandon(TAKE_PTR(t.race)); /* a step before take_member failed */
        r = take_finish(db, &t, t0, r < 0 ? r : 0);
        if (ret_id)
                *ret_id = id;
        if (r < 0)
                *ret_error = t.error;
        else
                free(t.error);
        return r;
}

/* ---- retention ---- */

int snapshot_retention(state_db *db, const char *cluster, const snapshot_spec *spec,
                       const char *state_dir, const char *secret_dir, const pvc_writer *pvc,
                       int64_t now_ms)
{
        assert(db && cluster && spec);
        if (spec->destination.kind == DEST_NONE)
                return 0;
        state_snapshot_list l = {0};
        int r = state_snapshot_list_for(db, cluster, 0, &l);
        if (r < 0)
                return r;
        _cleanup_free_ char *dest_id = snapshot_destination_id(&spec->destination);
        /* decide: newest first; the newest is always kept */
        int kept = 0;
        bool any = false;
        for (size_t i = 0; i < l.n; i++) {
                state_snapshot *s = l.items[i];
                /* a declared snapshot was asked for by a document: never retention's */
                if (!streq_ptr(s->result, "succeeded") || !streq_ptr(s->destination, dest_id) ||
                    s->deleted_ms || s->expired_ms || streq_ptr(s->trigger, "declared"))
                        continue;
                int64_t taken = s->finished_ms ? s->finished_ms : s->started_ms;
                bool too_old =
                    spec->retention_max_age_ms > 0 && now_ms - taken > spec->retention_max_age_ms;
                if (kept == 0 || (kept < spec->retention_count && !too_old)) {
                        kept++;
                        continue;
                }
                if (state_snapshot_expire(db, s->id, now_ms) >= 0) {
                        s->expired_ms = now_ms;
                        any = true;
                }
        }
        for (size_t i = 0; i < l.n && !any; i++)
                any = l.items[i]->expired_ms && !l.items[i]->deleted_ms &&
                      streq_ptr(l.items[i]->destination, dest_id);
        if (!any) {
                state_snapshot_list_release(&l);
                return 0;
        }
        snapshot_dest *dest = NULL;
        _cleanup_free_ char *open_error = NULL;
        r = open_dest(&spec->destination, state_dir, secret_dir, pvc, cluster, &dest, &open_error);
        int deleted = 0;
        /* act: every expired record not deleted yet, this time or left from a failed try */
        for (size_t i = 0; i < l.n; i++) {
                state_snapshot *s = l.items[i];
                if (!s->expired_ms || s->deleted_ms || !streq_ptr(s->destination, dest_id) ||
                    isempty(s->key))
                        continue;
                _cleanup_free_ char *err = NULL;
                int k = dest ? snapshot_dest_delete(dest, s->key, &err) : r;
                if (k == -ENOENT)
                        k = 0; /* already gone: the goal is reached */
                if (k < 0 && !err)
                        err = xstrdup(open_error ? open_error : strerror(-k));
                (void)state_snapshot_deleted(db, s->id, k < 0 ? err : NULL, now_ms);
                json_t *after = json_pack("{s:I, s:s}", "id", (json_int_t)s->id, "location",
                                          s->location ? s->location : "");
                _cleanup_free_ char *text = json_dumps(after, JSON_COMPACT | JSON_PRESERVE_ORDER);
                json_decref(after);
                _cleanup_free_ char *reason =
                    k < 0 ? xasprintf("retention: deleting failed (retried next time): %s", err)
                          : xstrdup("retention: older than the retention allows");
                state_audit_event ev = {.time_ms = now_ms,
                                        .cluster = (char *)cluster,
                                        .action = "snapshot.delete",
                                        .reason = reason,
                                        .before_json = text,
                                        .outcome = k < 0 ? "failure" : "success"};
                (void)state_audit_append(db, &ev, NULL);
                if (k < 0)
                        log_warn("%s: cannot delete snapshot %s: %s", cluster,
                                 s->location ? s->location : s->key, err);
                else
                        deleted++;
        }
        snapshot_dest_free(dest);
        state_snapshot_list_release(&l);
        return deleted;
}

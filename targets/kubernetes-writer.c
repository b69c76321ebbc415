/*
 * Snapshots in a PersistentVolumeClaim on the Kubernetes target
 * (writer_start/writer_stop): the snapshot receiver in store mode, in a Pod
 * that mounts the operator's claim at subPath, one per cluster at a time
 * under a lock file (kubernetes_writer_lock); and data_revision, what
 * revision a member's data holds, read by etcd's tool in a Pod.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "render/layout.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/xalloc.h"
#include "targets/kubernetes-internal.h"

#define COMPONENT_WRITER "snapshot-writer"
#define WRITER_MOUNT     "/snapshots"
#define WRITER_LOCK_FILE "snapshot-writer.lock"

/* --- Snapshots in a PersistentVolumeClaim (writer_start/writer_stop) ------- */

typedef struct kt_writer {
        char *ns, *name, *url;
        receiver_secret sec;
        int lock_fd; /* kubernetes_writer_lock, held until the writer is deleted */
} kt_writer;

/* Frees the handle and lets go of the cluster's writer lock: delete the writer first. */
static void kt_writer_free(kt_writer *w)
{
        if (!w)
                return;
        if (w->lock_fd >= 0)
                close(w->lock_fd);
        receiver_secret_release(&w->sec);
        free(w->ns);
        free(w->name);
        free(w->url);
        free(w);
}

/* Delete a writer's Pod (awaited) and Secret; either may be gone already. */
static int delete_writer(kubernetes_target *kt, const kt_writer *w)
{
        int d = kt_delete_pod(kt, w->ns, w->name);
        int s = kube_delete(kt->kc, &GVR_SECRETS, w->ns, w->name, "Background");
        if (s < 0 && s != -ENOENT && d >= 0)
                d = kube_fail(kt, s);
        return d;
}

int kubernetes_writer_lock(const char *state_dir, const char *ns, const char *cluster, int *ret_fd,
                           pid_t *ret_holder)
{
        assert(state_dir && ret_fd);
        if (!target_name_is_component(ns) || !target_name_is_component(cluster))
                return -EINVAL;
        _cleanup_free_ char *dir = cluster_dir_in(state_dir, ns, cluster);
        int r = mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = path_join(dir, WRITER_LOCK_FILE);
        return lock_file_try(path, ret_fd, ret_holder);
}

/*
 * Order, each step safe to cut short: the claim must exist (it is the
 * operator's); the cluster's writer lock is taken (-EAGAIN when another
 * writer of the cluster is in use); the cluster's writers a killed gitcd
 * left go; a Secret
 * (certificate, key, token made for this writer alone) and the Pod
 * `<cluster>-snapshot-<random>` (restartPolicy Never, activeDeadlineSeconds)
 * are created; gitcd waits until it is Ready. A failure deletes both.
 */
int kt_writer_start(target *t, const etcd_cluster *c, const char *claim, const char *folder,
                    void **ret_handle, receiver_peer *ret_peer)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(claim))
                return target_fail(t, -EINVAL, "\"%s\" is not a PersistentVolumeClaim name",
                                   claim ? claim : "");
        kt_note_namespace(kt, ns);
        json_t *live = NULL;
        int r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &live);
        json_decref(live);
        if (r == -ENOENT)
                return target_fail(t, -ENOENT,
                                   "PersistentVolumeClaim %s/%s not found: snapshots go into a "
                                   "claim you create (gitcd never creates, resizes or deletes "
                                   "it)",
                                   ns, claim);
        if (r < 0)
                return kube_fail(kt, r);
        kt_writer *w = XNEW(kt_writer);
        pid_t holder = 0;
        r = kubernetes_writer_lock(kt->state_dir, ns, c->name, &w->lock_fd, &holder);
        if (r < 0) {
                w->lock_fd = -1;
                kt_writer_free(w);
                if (r != -EAGAIN)
                        return target_fail(t, r,
                                           "cannot lock the snapshot writer of %s/%s in %s: %s", ns,
                                           c->name, kt->state_dir, strerror(-r));
                if (holder == getpid())
                        return target_fail(t, -EAGAIN,
                                           "another snapshot writer of %s/%s is in use by this "
                                           "gitcd",
                                           ns, c->name);
                if (holder > 0)
                        return target_fail(t, -EAGAIN,
                                           "another snapshot writer of %s/%s is in use by gitcd "
                                           "pid %ld",
                                           ns, c->name, (long)holder);
                return target_fail(t, -EAGAIN,
                                   "another snapshot writer of %s/%s is in use by another gitcd "
                                   "of %s",
                                   ns, c->name, kt->state_dir);
        }
        /* ours alone now: any writer of the cluster is a leftover */
        if ((r = kt_sweep_receivers(kt, c, COMPONENT_WRITER)) < 0) {
                kt_writer_free(w);
                return r;
        }
        if ((r = receiver_secret_new(&w->sec)) < 0) {
                kt_writer_free(w);
                return target_fail(t, r, "cannot make the snapshot writer's certificate: %s",
                                   pki_last_error());
        }
        unsigned char rnd[4];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                kt_writer_free(w);
                return target_fail(t, -EIO, "no random bytes for the writer's name");
        }
        w->ns = xstrdup(ns);
        w->name =
            xasprintf("%s-snapshot-%02x%02x%02x%02x", c->name, rnd[0], rnd[1], rnd[2], rnd[3]);
        _cleanup_(json_decrefp) json_t *labels =
            json_pack("{s:s, s:s, s:s}", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE,
                      LABEL_CLUSTER, c->name, LABEL_KEY_COMPONENT, COMPONENT_WRITER);
        _cleanup_(json_decrefp) json_t *secret =
            kt_receiver_secret_object(labels, ns, w->name, &w->sec);
        _cleanup_free_ char *mode = xasprintf("--store-dir=%s", WRITER_MOUNT);
        _cleanup_(json_decrefp) json_t *pod =
            kt_receiver_pod(kt, labels, ns, w->name, w->name, mode,
                            json_pack("{s:{s:s}}", "persistentVolumeClaim", "claimName", claim),
                            WRITER_MOUNT, isempty(folder) ? NULL : folder, 0, NULL);
        if ((r = kt_adapt(kt, pod)) >= 0 && (r = kt_apply(kt, secret, false)) >= 0)
                r = kt_apply(kt, pod, false);
        _cleanup_free_ char *address = NULL;
        if (r >= 0)
                r = kt_wait_receiver(kt, ns, w->name, &address);
        if (r < 0) {
                _cleanup_free_ char *keep = xstrdup(target_last_error(t));
                (void)delete_writer(kt, w);
                kt_writer_free(w);
                return target_fail(t, r, "snapshot writer for PersistentVolumeClaim %s/%s: %s", ns,
                                   claim, keep);
        }
        w->url = xasprintf("https://%s:%d", address, RECEIVER_PORT);
        log_debug("kubernetes target: snapshot writer %s/%s serves claim %s", ns, w->name, claim);
        *ret_peer = (receiver_peer){.url = w->url, .token = w->sec.token, .pin = w->sec.pin};
        *ret_handle = w;
        return 0;
}

int kt_writer_stop(target *t, const etcd_cluster *c, void *handle)
{
        kubernetes_target *kt = KT(t);
        (void)c;
        kt_writer *w = handle;
        if (!w)
                return 0;
        int r = delete_writer(kt, w);
        kt_writer_free(w);
        return r;
}

/*
 * The revision of a stopped member's data (data_revision): its PVC's
 * member/snap/db is read through a writer Pod (the store-mode receiver of
 * snapshots in a claim, writer_start) mounting the member's PVC, fetched
 * into <state>/kubernetes/<ns>/<name>/revision-<member>.db on gitcd's host
 * with its SHA-256 checked end to end, read there with etcd's tool and
 * deleted. Only when the member has no Pod (ReadWriteOnce: the writer would
 * not get the volume, and a running member writes it). The writer takes
 * the cluster's writer turn, as a snapshot into a claim does.
 */
int kt_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                     int64_t *ret_revision)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(member) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        if (c->storage.medium == MEDIUM_MEMORY)
                return target_fail(
                    t, -ENOENT, "member %s keeps its data in memory: none without its Pod", member);
        kt_note_namespace(kt, ns);
        _cleanup_(json_decrefp) json_t *pod = NULL;
        int r = kube_get(kt->kc, &GVR_PODS, ns, member, &pod);
        if (r >= 0)
                return target_fail(t, -EBUSY, "member %s has a Pod: its data is in use", member);
        if (r != -ENOENT)
                return kube_fail(kt, r);
        _cleanup_free_ char *claim = pvc_name(member);
        _cleanup_(json_decrefp) json_t *pvc = NULL;
        r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &pvc);
        if (r < 0 && r != -ENOENT)
                return kube_fail(kt, r);
        if (r == -ENOENT || !streq_ptr(obj_label(pvc, LABEL_MEMBER), member) ||
            obj_terminating(pvc) || restore_pending(pvc))
                return target_fail(t, -ENOENT,
                                   "member %s holds no data (no PersistentVolumeClaim "
                                   "%s of its own)",
                                   member, claim);
        _cleanup_free_ char *dir = cluster_dir(kt, ns, c->name);
        if ((r = mkdir_p(dir, 0700)) < 0)
                return target_fail(t, r, "cannot create %s: %s", dir, strerror(-r));
        _cleanup_free_ char *copy = xasprintf("%s/revision-%s.db", dir, member);
        _cleanup_close_ int fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return target_fail(t, -errno, "cannot create %s: %s", copy, strerror(errno));
        void *handle = NULL;
        receiver_peer peer = {0};
        r = kt_writer_start(t, c, claim, NULL, &handle, &peer);
        if (r < 0) {
                (void)unlink(copy);
                return r;
        }
        /* the data folder's name inside the volume, mounted at its parent */
        const char *base = strrchr(RENDER_STEADY_DATA_DIR, '/') + 1;
        _cleanup_free_ char *key = xasprintf("%s/member/snap/db", base);
        _cleanup_free_ char *err = NULL;
        r = receiver_fetch(&peer, key, fd, &err);
        (void)kt_writer_stop(t, c, handle);
        if (r == -ENOENT)
                r = target_fail(t, -ENOENT,
                                "member %s holds no data (its PersistentVolumeClaim %s has no "
                                "%s)",
                                member, claim, key);
        else if (r < 0)
                r = target_fail(t, r,
                                "member %s: cannot read %s of its PersistentVolumeClaim %s: %s",
                                member, key, claim, err);
        else
                r = target_db_revision(t, member, tool, copy, ret_revision);
        (void)unlink(copy);
        return r;
}

/*
 * Restores on the Kubernetes target (restore_member): etcd's tool runs on
 * gitcd's host, as on the other targets, and a short-lived receiver Pod
 * (`gitcd snapshot receive`, snapstore/receiver.h) only puts the files into
 * the member's PVC, each checked by SHA-256 on both ends. The PVC annotation
 * gitcd.io/restore=pending is the marker while it runs.
 */

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "targets/locked.h"
#include "render/layout.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/kubernetes-internal.h"

#define COMPONENT_RECEIVER   "snapshot-receiver"
#define LABEL_RESTORE_MEMBER "gitcd.io/restore-member"
#define RECEIVER_SECRET_DIR  "/etc/gitcd/receive"
#define RECEIVER_READY_MS    (180 * 1000)
#define RECEIVER_DEADLINE_S  3600

/* --- Restore into a member's PVC (restore_member) ------------------------- */

static char *receiver_selector(const etcd_cluster *c, const char *component)
{
        return xasprintf("%s=%s,%s=%s,%s=%s", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE,
                         LABEL_CLUSTER, c->name, LABEL_KEY_COMPONENT, component);
}

/*
 * The receivers (Pods and Secrets) of the cluster's restores
 * (COMPONENT_RECEIVER) or snapshot writers (COMPONENT_WRITER): what a gitcd
 * killed mid-way left. Found by label, deleted, and the Pods awaited.
 */
int kt_sweep_receivers(kubernetes_target *kt, const etcd_cluster *c, const char *component)
{
        const char *ns = ns_of(c);
        _cleanup_free_ char *sel = receiver_selector(c, component);
        const kube_gvr *kinds[] = {&GVR_PODS, &GVR_SECRETS};
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                json_t *items = NULL;
                int r = kube_list(kt->kc, kinds[k], ns, sel, &items, NULL);
                if (r < 0)
                        return kube_fail(kt, r);
                size_t i;
                json_t *o;
                json_array_foreach(items, i, o)
                {
                        if (!managed_by_gitcd(o) ||
                            !streq_ptr(obj_label(o, LABEL_CLUSTER), c->name))
                                continue;
                        log_debug("kubernetes target: removing the snapshot receiver %s %s/%s",
                                  kinds[k]->resource, ns, obj_name(o));
                        r = kinds[k] == &GVR_PODS
                                ? kt_delete_pod(kt, ns, obj_name(o))
                                : kube_delete(kt->kc, kinds[k], ns, obj_name(o), "Background");
                        if (r < 0 && r != -ENOENT) {
                                json_decref(items);
                                return kinds[k] == &GVR_PODS ? r : kube_fail(kt, r);
                        }
                }
                json_decref(items);
        }
        return 0;
}

static char *receiver_name(const char *member)
{
        return xasprintf("%s-restore", member);
}

/* Delete member's receiver Pod (awaited) and Secret; either may be gone already. */
int kt_delete_receiver(kubernetes_target *kt, const char *ns, const char *member)
{
        _cleanup_free_ char *name = receiver_name(member);
        int d = kt_delete_pod(kt, ns, name);
        int s = kube_delete(kt->kc, &GVR_SECRETS, ns, name, "Background");
        if (s < 0 && s != -ENOENT && d >= 0)
                d = kube_fail(kt, s);
        return d;
}

/* The receiver's Secret: its certificate, key and bearer token. */
json_t *kt_receiver_secret_object(const json_t *labels, const char *ns, const char *name,
                                  const receiver_secret *s)
{
        json_t *data = json_object();
        const char *keys[] = {"tls.crt", "tls.key", "token"};
        const char *values[] = {s->cert_pem, s->key_pem, s->token};
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                char *b64 = kube_base64_encode(values[i], strlen(values[i]));
                json_object_set_new(data, keys[i], json_string(b64));
                explicit_bzero(b64, strlen(b64));
                free(b64);
        }
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:O}, s:s, s:o}", "apiVersion", "v1", "kind",
                         "Secret", "metadata", "name", name, "namespace", ns, "labels", labels,
                         "type", "Opaque", "data", data);
}

/*
 * A receiver's Pod: `gitcd snapshot receive` with mode ("--data-dir=..." or
 * "--store-dir=..."), its Secret mounted read-only, volume (taken) mounted
 * at mount (sub_path: the folder of the volume mounted; NULL: its root),
 * max_bytes (0: no limit), placed as placement (a Pod spec whose
 * nodeSelector, tolerations and affinity are copied; NULL: anywhere).
 */
json_t *kt_receiver_pod(kubernetes_target *kt, const json_t *labels, const char *ns,
                        const char *name, const char *secret, const char *mode, json_t *volume,
                        const char *mount, const char *sub_path, int64_t max_bytes,
                        const json_t *placement)
{
        _cleanup_free_ char *a_secret = xasprintf("--secret-dir=%s", RECEIVER_SECRET_DIR);
        _cleanup_free_ char *a_listen = xasprintf("--listen=0.0.0.0:%d", RECEIVER_PORT);
        json_t *cmd =
            json_pack("[s,s,s,s,s,s]", "gitcd", "snapshot", "receive", mode, a_secret, a_listen);
        if (max_bytes > 0)
                json_array_append_new(cmd, json_sprintf("--max-bytes=%lld", (long long)max_bytes));
        json_t *data_mount = json_pack("{s:s, s:s}", "name", "data", "mountPath", mount);
        if (!isempty(sub_path))
                json_object_set_new(data_mount, "subPath", json_string(sub_path));
        json_t *c = json_pack(
            "{s:s, s:s, s:s, s:o, s:[{s:s, s:i, s:s}], s:{s:{s:s, s:i, s:s}, s:i, "
            "s:i}, s:[o, {s:s, s:s, s:b}]}",
            "name", "receive", "image", kt->snapshot_image, "imagePullPolicy", "IfNotPresent",
            "command", cmd, "ports", "name", "receive", "containerPort", RECEIVER_PORT, "protocol",
            "TCP", "readinessProbe", "httpGet", "path", "/healthz", "port", RECEIVER_PORT, "scheme",
            "HTTPS", "periodSeconds", 1, "timeoutSeconds", 5, "volumeMounts", data_mount, "name",
            "receive", "mountPath", RECEIVER_SECRET_DIR, "readOnly", 1);
        json_object_set_new(volume, "name", json_string("data"));
        json_t *s =
            json_pack("{s:s, s:i, s:i, s:b, s:b, s:[o], s:[o, {s:s, s:{s:s, s:i}}]}",
                      "restartPolicy", "Never", "activeDeadlineSeconds", RECEIVER_DEADLINE_S,
                      "terminationGracePeriodSeconds", 5, "enableServiceLinks", 0,
                      "automountServiceAccountToken", 0, "containers", c, "volumes", volume, "name",
                      "receive", "secret", "secretName", secret, "defaultMode", 0400);
        /*
         * The files must be etcd's: the member's container runs as its etcd
         * image's user (root; render sets no securityContext), while gitcd's
         * image defaults to 65532, which could not even write into a new
         * volume's root folder (nor into a claim whose owner is unknown).
         */
        json_object_set_new(c, "securityContext", json_pack("{s:i}", "runAsUser", 0));
        static const char *const keys[] = {"nodeSelector", "tolerations", "affinity"};
        for (size_t k = 0; placement && k < ARRAY_SIZE(keys); k++) {
                json_t *v = json_object_get(placement, keys[k]);
                if (v)
                        json_object_set_new(s, keys[k], json_deep_copy(v));
        }
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:O}, s:o}", "apiVersion", "v1", "kind", "Pod",
                         "metadata", "name", name, "namespace", ns, "labels", labels, "spec", s);
}

/*
 * The restore receiver's Pod, placed as the member's (its nodeSelector,
 * tolerations and affinity) and mounting the member's data volume where the
 * member mounts it (both read from the rendered member Pod).
 */
static json_t *receiver_pod_object(kubernetes_target *kt, const json_t *member_pod,
                                   const json_t *labels, const char *ns, const char *name,
                                   const char *secret, const char *data_dir, int64_t max_bytes)
{
        const json_t *spec = json_object_get(member_pod, "spec");
        const json_t *ctr = json_array_get(json_object_get(spec, "containers"), 0);
        const char *mount = NULL;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m)
        {
                if (streq_ptr(json_string_value(json_object_get(m, "name")), "data"))
                        mount = json_string_value(json_object_get(m, "mountPath"));
        }
        json_t *data_volume = NULL;
        json_array_foreach(json_object_get(spec, "volumes"), i, m)
        {
                if (streq_ptr(json_string_value(json_object_get(m, "name")), "data"))
                        data_volume = m;
        }
        if (!mount || !data_volume)
                return NULL;
        _cleanup_free_ char *a_data = xasprintf("--data-dir=%s", data_dir);
        return kt_receiver_pod(kt, labels, ns, name, secret, a_data, json_deep_copy(data_volume),
                               mount, NULL, max_bytes, spec);
}

/* Wait until the receiver's Pod is Ready; its address. */
int kt_wait_receiver(kubernetes_target *kt, const char *ns, const char *name, char **ret_address)
{
        int64_t deadline = now_mono_ms() + RECEIVER_READY_MS;
        _cleanup_free_ char *why = NULL;
        for (;;) {
                json_t *pod = NULL;
                int r = kube_get(kt->kc, &GVR_PODS, ns, name, &pod);
                if (r < 0)
                        return kube_fail(kt, r);
                const json_t *status = json_object_get(pod, "status");
                const char *phase = json_string_value(json_object_get(status, "phase"));
                const char *ip = json_string_value(json_object_get(status, "podIP"));
                int restarts = 0;
                bool crash_loop = false;
                const char *waiting = NULL;
                kt_container_facts(pod, &restarts, &crash_loop, &waiting);
                free(why);
                why = xasprintf("%s%s%s", phase ? phase : "Pending", waiting ? ": " : "",
                                waiting ? waiting : "");
                bool ready = kt_pod_ready(pod) && !isempty(ip);
                bool ended = streq_ptr(phase, "Failed") || streq_ptr(phase, "Succeeded");
                if (ready)
                        *ret_address = strchr(ip, ':') ? xasprintf("[%s]", ip) : xstrdup(ip);
                json_decref(pod); /* phase, ip and waiting point into it */
                if (ready)
                        return 0;
                if (ended)
                        return target_fail(&kt->base, -EIO,
                                           "the snapshot receiver Pod %s/%s ended (%s)", ns, name,
                                           why);
                if (now_mono_ms() >= deadline)
                        return target_fail(&kt->base, -ETIMEDOUT,
                                           "the snapshot receiver Pod %s/%s is not Ready after "
                                           "%d s (%s)",
                                           ns, name, RECEIVER_READY_MS / 1000, why);
                target_blocking_begin();
                msleep(POLL_MS);
                target_blocking_end();
        }
}

/* The sum of the sizes of the files under dir. */
static int64_t tree_bytes(const char *dir)
{
        _cleanup_(path_list_release) path_list files = {0}, dirs = {0};
        if (list_tree(dir, &files, &dirs) < 0)
                return -1;
        int64_t sum = 0;
        for (size_t i = 0; i < files.n; i++) {
                _cleanup_free_ char *p = path_join(dir, files.paths[i]);
                struct stat st;
                if (stat(p, &st) < 0)
                        return -1;
                sum += st.st_size;
        }
        return sum;
}

/*
 * Restore on gitcd's host, then deliver through a receiver Pod that mounts
 * the member's PVC (docs/snapshots.md, "Creating a cluster from a snapshot").
 * Order, each step safe to cut short:
 *   1. receivers a killed gitcd left are deleted (sweep_receivers);
 *   2. the PVC is applied with gitcd.io/restore=pending: from then on the
 *      member is ABSENT for member_status and ensure_member refuses to
 *      start it, whatever the volume holds;
 *   3. etcd's tool restores into <state>/kubernetes/<ns>/<cluster>/restore-<member>/;
 *   4. a Secret (certificate, key, token made for this receiver alone) and
 *      the receiver Pod; gitcd waits until it is Ready;
 *   5. receiver_deliver(): every file with its SHA-256 into <data>.receive
 *      on the volume, then the rename to the data directory;
 *   6. the Pod and the Secret are deleted, then the annotation is lifted.
 * A volume that holds etcd data while still pending was filled by an
 * earlier run whose step 6 did not finish: it counts as restored.
 */
/*
 * A member's data may be restored only where it has none: no Pod of it runs
 * and its PVC is absent or still marked pending (fitted to the server here).
 */
static int restorable(kubernetes_target *kt, const member_plan *mp, const json_t *pod, json_t *pvc)
{
        _cleanup_(json_decrefp) json_t *live = NULL;
        int r;
        if ((r = kt_get_owned(kt, pod, &live)) < 0)
                return r;
        if (live)
                return target_fail(&kt->base, -EEXIST,
                                   "member %s runs already; a snapshot is never restored over it",
                                   mp->name);
        if ((r = kt_adapt(kt, pvc)) < 0 || (r = kt_get_owned(kt, pvc, &live)) < 0)
                return r;
        if (live && obj_terminating(live))
                return target_fail(&kt->base, -EBUSY,
                                   "member %s: its PersistentVolumeClaim %s is being "
                                   "deleted; the restore waits",
                                   mp->name, obj_name(pvc));
        if (live && !restore_pending(live))
                return target_fail(&kt->base, -EEXIST,
                                   "member %s has data already (its PersistentVolumeClaim %s); a "
                                   "snapshot is never restored over it",
                                   mp->name, obj_name(pvc));
        return 0;
}

int kt_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                      const target_restore *rs)
{
        kubernetes_target *kt = KT(t);
        if (idx >= p->n || isempty(p->members[idx].name) || !p->members[idx].peer_url)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        const char *ns = ns_of(c);
        /* refused before anything is created (TARGET_CAP_MEMORY_MEDIUM) */
        if (c->storage.medium == MEDIUM_MEMORY)
                return target_fail(t, -EOPNOTSUPP,
                                   "member %s: storage.medium Memory keeps no data to restore "
                                   "into; a snapshot needs a PersistentVolumeClaim",
                                   mp->name);
        kt_note_namespace(kt, ns);
        _cleanup_free_ char *rpath = NULL; /* the names must make a path (checked here) */
        int r = kt_record_path(kt, ns, c->name, mp->name, &rpath);
        if (r < 0)
                return r;
        _cleanup_(json_decrefp) json_t *pvc = NULL, *pod = NULL;
        r = kt_member_objects(kt, c, p, idx, &pvc, &pod);
        if (r < 0)
                return r;
        if ((r = restorable(kt, mp, pod, pvc)) < 0)
                return r;

        if ((r = kt_sweep_receivers(kt, c, COMPONENT_RECEIVER)) < 0)
                return r;
        _cleanup_(json_decrefp) json_t *pending = json_deep_copy(pvc);
        kt_set_annotation(pending, ANNOTATION_RESTORE, RESTORE_PENDING);
        if ((r = kt_apply(kt, pending, false)) < 0)
                return r;

        _cleanup_free_ char *home = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *local = xasprintf("%s/restore-%s", home, mp->name);
        if ((r = target_restore_into(t, p, idx, rs, local)) < 0)
                return r;

        receiver_secret sec = {0};
        if ((r = receiver_secret_new(&sec)) < 0) {
                (void)rm_rf(local);
                return target_fail(t, r, "member %s: cannot make the receiver's certificate: %s",
                                   mp->name, pki_last_error());
        }
        _cleanup_free_ char *name = receiver_name(mp->name);
        _cleanup_(json_decrefp) json_t *labels = json_pack(
            "{s:s, s:s, s:s, s:s}", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE, LABEL_CLUSTER,
            c->name, LABEL_KEY_COMPONENT, COMPONENT_RECEIVER, LABEL_RESTORE_MEMBER, mp->name);
        _cleanup_(json_decrefp) json_t *secret = kt_receiver_secret_object(labels, ns, name, &sec);
        const char *data_dir = isempty(mp->data_dir) ? RENDER_STEADY_DATA_DIR : mp->data_dir;
        int64_t bytes = tree_bytes(local);
        _cleanup_(json_decrefp) json_t *rpod =
            bytes < 0 ? NULL
                      : receiver_pod_object(kt, pod, labels, ns, name, name, data_dir, bytes);
        if (bytes < 0)
                r = target_fail(t, -EIO, "member %s: cannot read the restored data in %s", mp->name,
                                local);
        else if (!rpod)
                r = target_fail(t, -EINVAL, "member %s: the rendered Pod mounts no data volume",
                                mp->name);
        if (r >= 0 && (r = kt_adapt(kt, rpod)) >= 0 && (r = kt_apply(kt, secret, false)) >= 0)
                r = kt_apply(kt, rpod, false);
        _cleanup_free_ char *address = NULL;
        if (r >= 0)
                r = kt_wait_receiver(kt, ns, name, &address);
        if (r >= 0)
                FAILPOINT("kubernetes.restore.receiver-ready");
        if (r >= 0) {
                _cleanup_free_ char *url = xasprintf("https://%s:%d", address, RECEIVER_PORT);
                receiver_peer peer = {.url = url, .token = sec.token, .pin = sec.pin};
                _cleanup_free_ char *why = NULL;
                target_blocking_begin();
                r = receiver_deliver(&peer, local, &why);
                target_blocking_end();
                if (r >= 0)
                        FAILPOINT("kubernetes.restore.after-delivery");
                if (r == -EEXIST) {
                        /* pending and full: an earlier run delivered it and stopped after */
                        log_info("kubernetes target: member %s/%s/%s: its volume holds the "
                                 "restored data already",
                                 ns, c->name, mp->name);
                        r = 0;
                } else if (r < 0) {
                        (void)target_fail(t, r,
                                          "member %s: delivery into its "
                                          "PersistentVolumeClaim failed: %s",
                                          mp->name, why);
                }
        }
        receiver_secret_release(&sec);
        (void)rm_rf(local);
        /* the receiver goes whatever happened; its failure to go fails the restore */
        _cleanup_free_ char *keep_error = r < 0 ? xstrdup(target_last_error(t)) : NULL;
        int d = kt_delete_receiver(kt, ns, mp->name);
        if (r < 0)
                return target_fail(t, r, "%s", keep_error);
        if (d < 0)
                return d;
        /* filled: the PVC as the member applies it, without the annotation */
        if ((r = kt_apply(kt, pvc, false)) < 0)
                return r;
        log_debug("kubernetes target: restored member %s/%s/%s from %s", ns, c->name, mp->name,
                  rs->snapshot);
        return 0;
}

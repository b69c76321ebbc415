/*
 * The Kubernetes target: members are the rendered Pods and PVCs, applied
 * to a kube-apiserver through kube/client.h (layout on disk and the
 * operations' specifics: targets/kubernetes.h).
 *
 * Decisions a reader needs:
 * - Every write is a server-side apply with field manager "gitcd", never
 *   forced, of an object fitted to the server (kube_adapt_object: PDB
 *   policy/v1beta1 on 1.20). gitcd never deletes or changes an object that
 *   lacks app.kubernetes.io/managed-by=gitcd: a GET precedes every apply,
 *   and a name held by a foreign object is an error naming it.
 * - Nothing half-applied: before the first write for a spec (per rendered
 *   spec hash, per process) every object of render_cluster() for the
 *   steady plan (Services, PDB, TLS objects, each member's PVC and Pod) is
 *   dry-run applied; a live Pod whose spec will change is dry-run deleted
 *   instead, as Pod specs are immutable. The first failure (an RBAC 403
 *   names verb, resource and namespace) is returned and nothing is written.
 * - Shared objects come from the steady plan of the spec, not from the
 *   partial plan the reconciler passes when it starts one member: Services
 *   and certificates then never change with the members (certificates cover
 *   every member through the headless-Service wildcard). Only the PDB's
 *   maxUnavailable follows the voters of the passed plan (fit_pdb).
 * - Pod specs are immutable, so a Pod carries gitcd.io/pod-hash, a hash of
 *   its rendered spec. A live Pod with another hash is deleted and awaited
 *   (terminationGracePeriodSeconds + 15 s) before the new one is applied.
 *   Labels and annotations (the role label on promotion) change in place.
 * - Data identity: the PVC's UID, reported by member_status (none for a
 *   terminating PVC). The reconciler records it in the member record once
 *   the member joined etcd and calls a missing or different one data loss;
 *   ensure_member refuses a plan entry whose data_identity is not the live
 *   PVC's (-ESTALE): it must be replaced, not restarted on an empty volume.
 *   With storage.medium Memory there is no identity: a member without a
 *   Pod is ABSENT (its data died with it).
 * - Two clients: one for calls, one for watches (a client is
 *   single-threaded and a watch holds its connection). wait_event watches
 *   gitcd's Pods in the namespaces this target has touched (one: that one;
 *   several: all) from the last resourceVersion and returns on the first
 *   change; -ESTALE relists (and reports a change); on -EACCES/-EIO it
 *   sleeps out the timeout and returns 0, as the reconciler observes the
 *   world on every pass anyway.
 * - Threads (targets/locked.h): the call client, the tables and the event
 *   list are shared state, used under the wrapper's shared lock. Waits let
 *   go of it: the sleeps between GETs while a deleted Pod or PVC goes away
 *   (a grace period of one cluster then holds up no other cluster), and
 *   wait_event's list and watch, which use only the watch client and the
 *   watch position; those have a mutex of their own (watch_lock), held for
 *   the whole wait, as a client serves one thread at a time. The watch
 *   callback takes the shared lock back to record an event.
 * - Restores (restore_member): etcd's tool runs on gitcd's host, as on the
 *   other targets, and a short-lived receiver Pod (`gitcd snapshot receive`,
 *   snapstore/receiver.h) only puts the files into the member's PVC, each
 *   checked by SHA-256 on both ends. The PVC annotation
 *   gitcd.io/restore=pending is the marker (as the local target's
 *   data.restore/ and the hosts target's member.restore/): while it is
 *   there the member is ABSENT and ensure_member refuses to start it.
 * - Snapshots in a PersistentVolumeClaim (writer_start/writer_stop): the
 *   same receiver, in store mode, in a Pod that mounts the operator's claim
 *   at subPath; gitcd only ever creates and deletes the Pod and its Secret,
 *   never the claim. One writer per cluster at a time, across processes
 *   sharing the state folder and across threads of one: a lock file per
 *   cluster (kubernetes_writer_lock) is held from before the leftover
 *   clean-up until the writer is deleted. The lock dies with its process,
 *   so a writer Pod of the cluster found while holding it is what a killed
 *   gitcd left, and is deleted by label; a writer in use is never deleted.
 *   Taking the lock never waits (a wait would hold the cluster's operations
 *   in this process, among them the stop that frees it): a held lock is
 *   -EAGAIN naming the holder, and the caller decides how long to try again
 *   (snapshots/snapshot.c). Restore receivers need no such lock: they are
 *   started only by restore_member, one call that runs whole under the
 *   cluster's lock, and only by a reconciler, which holds the state
 *   folder's own lock (gitcd.lock: apply, run, recover).
 * - tls.provider auto: gitcd is the CA (pki/), keeps it under state_dir,
 *   issues one certificate per surface whose names are exactly those render
 *   gives cert-manager, and applies them as kubernetes.io/tls Secrets.
 */

#include <assert.h>
#include <pthread.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pki/auto.h"
#include "targets/locked.h"
#include "render/layout.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/kubernetes-internal.h"

#define ANNOTATION_REMOVED "gitcd.io/removed-from"
#define RECORD_MAX         65536
#define SHARED_RECHECK_MS  (60 * 1000) /* re-check unchanged shared objects this often */

static const target_ops kubernetes_ops;

static const char *obj_uid(const json_t *obj)
{
        return json_string_value(json_object_get(metadata(obj), "uid"));
}

void kt_note_namespace(kubernetes_target *kt, const char *ns)
{
        for (size_t i = 0; i < kt->n_namespaces; i++)
                if (streq(kt->namespaces[i], ns))
                        return;
        kt->namespaces =
            xgrow(kt->namespaces, &kt->alloc_namespaces, kt->n_namespaces + 1, sizeof(char *));
        kt->namespaces[kt->n_namespaces++] = xstrdup(ns);
}

/* FNV-1a 64 of the object dumped with sorted keys, as 16 hex digits. */
char *kt_json_hash(const json_t *o)
{
        char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = text ? text : ""; *p; p++) {
                h ^= (unsigned char)*p;
                h *= 1099511628211ULL;
        }
        free(text);
        return xasprintf("%016llx", (unsigned long long)h);
}

/* --- member records ---------------------------------------------------- */

/*
 * What this target notes of a member: only that it saw it run (for the
 * message about an in-memory member whose Pod is gone). Whether it ran and
 * the identity of its data are the member record's (state/); files of an
 * older gitcd also held "initialized" and "pvcUID", which are ignored: the
 * reconciler records the PVC UID the first pass after the upgrade sees.
 */
typedef struct member_record {
        bool exists;
} member_record;

int kt_record_path(kubernetes_target *kt, const char *ns, const char *cluster, const char *member,
                   char **ret)
{
        if (!target_name_is_component(ns) || !target_name_is_component(cluster) ||
            !target_name_is_component(member))
                return target_fail(&kt->base, -EINVAL, "invalid member name \"%s/%s/%s\"", ns,
                                   cluster, member);
        *ret = xasprintf("%s/kubernetes/%s/%s/%s.json", kt->state_dir, ns, cluster, member);
        return 0;
}

/* The record of a member; an empty one (exists false) when there is none. */
static int record_load(kubernetes_target *kt, const char *ns, const char *cluster,
                       const char *member, member_record *ret)
{
        _cleanup_free_ char *path = NULL;
        int r = kt_record_path(kt, ns, cluster, member, &path);
        if (r < 0)
                return r;
        *ret = (member_record){0};
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        r = read_file(path, RECORD_MAX, &data, &len);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return target_fail(&kt->base, r, "cannot read %s: %s", path, strerror(-r));
        json_t *o = json_loadb(data, len, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return target_fail(&kt->base, -EBADMSG, "cannot read %s: not a JSON object", path);
        }
        ret->exists = true;
        json_decref(o);
        return 0;
}

static int record_save(kubernetes_target *kt, const char *ns, const char *cluster,
                       const char *member)
{
        _cleanup_free_ char *path = NULL;
        int r = kt_record_path(kt, ns, cluster, member, &path);
        if (r < 0)
                return r;
        _cleanup_free_ char *dir = cluster_dir(kt, ns, cluster);
        r = mkdir_p(dir, 0700);
        if (r < 0)
                return target_fail(&kt->base, r, "cannot create %s: %s", dir, strerror(-r));
        json_t *o = json_pack("{s:s}", "member", member);
        char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(o);
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, text ? text : "{}");
        sb_appendc(&sb, '\n');
        free(text);
        r = write_file_atomic(path, sb.buf, sb.len, 0644);
        sb_release(&sb);
        if (r < 0)
                return target_fail(&kt->base, r, "cannot write %s: %s", path, strerror(-r));
        return 0;
}

static void record_remove(kubernetes_target *kt, const char *ns, const char *cluster,
                          const char *member)
{
        _cleanup_free_ char *path = NULL;
        if (kt_record_path(kt, ns, cluster, member, &path) == 0)
                (void)unlink(path);
}

int kt_gvr_of(kubernetes_target *kt, const json_t *obj, kube_gvr *ret)
{
        const char *av = json_string_value(json_object_get(obj, "apiVersion"));
        const char *kind = obj_kind(obj);
        if (!av || !kind || kube_gvr_for_kind(av, kind, ret) < 0)
                return target_fail(&kt->base, -EINVAL, "kind %s %s is not one gitcd knows",
                                   av ?: "?", kind ?: "?");
        return 0;
}

/* --- operations -------------------------------------------------------------- */

static int kt_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        kubernetes_target *kt = KT(t);
        if (isempty(mp->name))
                return target_fail(t, -EINVAL, "member plan without a name");
        const char *ns = ns_of(c);
        const char *peer_scheme = render_peer_scheme(c);
        const char *client_scheme = render_client_tls(c) ? "https" : "http";
        _cleanup_free_ char *headless = render_headless_service_name(c);
        /* The format of membership_plan_steady (render/plan.c). */
        _cleanup_free_ char *host =
            xasprintf("%s.%s.%s.svc.%s", mp->name, headless, ns, kt->domain);
        str_assign(&mp->peer_url, xasprintf("%s://%s:%d", peer_scheme, host, ETCD_PEER_PORT));
        str_assign(&mp->client_url, xasprintf("%s://%s:%d", client_scheme, host, ETCD_CLIENT_PORT));
        str_assign(&mp->listen_peer_url, xasprintf("%s://0.0.0.0:%d", peer_scheme, ETCD_PEER_PORT));
        str_assign(&mp->listen_client_url,
                   xasprintf("%s://0.0.0.0:%d", client_scheme, ETCD_CLIENT_PORT));
        str_assign(&mp->listen_metrics_url, xasprintf("http://0.0.0.0:%d", ETCD_METRICS_PORT));
        str_assign(&mp->data_dir, xstrdup(RENDER_STEADY_DATA_DIR));
        str_assign(&mp->tls_dir, xstrdup(RENDER_STEADY_TLS_DIR));
        /* The CA the member trusts: part of its config hash (pki/auto.h). */
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *tls = path_join(cdir, "tls");
        char *tls_version = NULL;
        int r = pki_auto_trust_version(cdir, c, kt_tls_leaves_exist(tls), &tls_version);
        if (r < 0)
                return pki_fail(kt, r, "the cluster CA", cdir);
        if (!tls_version) {
                r = kt_secrets_trust_version(kt, c, &tls_version);
                if (r < 0)
                        return r;
        }
        str_assign(&mp->tls_version, tls_version);
        return 0;
}

int kubernetes_target_objects(target *t, const etcd_cluster *c, const membership_plan *members,
                              json_t **ret)
{
        if (kubernetes_servers_is(t)) {
                int r = kubernetes_servers_raw(t, c, &t);
                if (r < 0)
                        return r;
        }
        assert(t && t->ops == &kubernetes_ops);
        kubernetes_target *kt = KT(t);
        _cleanup_(membership_plan_freep) membership_plan *steady =
            membership_plan_steady(c, kt->domain);
        return kt_applied_objects(kt, c, steady, members, true, ret);
}

const target_plan_ops kubernetes_plan_ops = {.kube_objects = kt_plan_kube_objects};

int kt_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        kt_note_namespace(kt, ns);
        _cleanup_(membership_plan_freep) membership_plan *steady =
            membership_plan_steady(c, kt->domain);
        _cleanup_(json_decrefp) json_t *all = render_cluster(c, steady);
        _cleanup_free_ char *hash = kt_json_hash(all);
        kt->tls_issued = 0;
        int r = kt_tls_issue(kt, c, steady);
        _cleanup_(json_decrefp) json_t *shared = NULL;
        if (r >= 0)
                r = kt_applied_objects(kt, c, steady, p, false, &shared);
        if (r >= 0)
                r = kt_adapt_all(kt, shared);
        if (r >= 0)
                r = kt_adapt_all(kt, all);
        if (r < 0)
                return r;

        _cleanup_free_ char *key = xasprintf("%s/%s/%s", ns, c->name, hash);
        if (!kt_preflight_done(kt, key)) {
                r = kt_preflight_cluster(kt, shared, all);
                if (r < 0) {
                        _cleanup_free_ char *msg = xstrdup(target_last_error(t));
                        return target_fail(t, r, "cluster %s/%s: nothing applied: %s", ns, c->name,
                                           msg);
                }
                kt->preflighted = xgrow(kt->preflighted, &kt->alloc_preflighted,
                                        kt->n_preflighted + 1, sizeof(char *));
                kt->preflighted[kt->n_preflighted++] = TAKE_PTR(key);
        }

        /* Nothing changed since the last full check, and it is recent: no calls at all. */
        _cleanup_free_ char *roles = kt_plan_roles(p);
        _cleanup_free_ char *shared_hash = kt_json_hash(shared);
        _cleanup_free_ char *mark_hash = xasprintf("%s/%s", shared_hash, roles);
        _cleanup_free_ char *mark_key = xasprintf("%s/%s", ns, c->name);
        shared_mark *mark = kt_find_mark(kt, mark_key);
        int64_t now = now_mono_ms();
        if (streq_ptr(mark->hash, mark_hash) && now - mark->at_mono < SHARED_RECHECK_MS)
                return 0;

        size_t i;
        json_t *o;
        json_array_foreach(shared, i, o)
        {
                json_t *live = NULL;
                r = kt_get_owned(kt, o, &live);
                json_decref(live);
                if (r >= 0)
                        r = kt_apply(kt, o, false);
                if (r < 0)
                        return r;
        }
        r = kt_prune(kt, c, shared);
        if (r >= 0)
                r = kt_sync_roles(kt, c, p);
        if (r < 0)
                return r;
        str_assign(&mark->hash, TAKE_PTR(mark_hash));
        mark->at_mono = now;
        return 0;
}

static int kt_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        kubernetes_target *kt = KT(t);
        if (idx >= p->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        const char *ns = ns_of(c);
        if (isempty(mp->name))
                return target_fail(t, -EINVAL, "member plan without a name");
        kt_note_namespace(kt, ns);
        _cleanup_free_ char *rpath = NULL; /* the names must make a path (checked here) */
        int r = kt_record_path(kt, ns, c->name, mp->name, &rpath);
        if (r < 0)
                return r;
        json_t *pvc = NULL, *pod = NULL, *live = NULL;
        r = kt_member_objects(kt, c, p, idx, &pvc, &pod);
        if (r < 0)
                return r;
        if (pvc) {
                r = kt_adapt(kt, pvc);
                if (r >= 0)
                        r = kt_get_owned(kt, pvc, &live);
                if (r < 0)
                        goto out;
                /* A restore into it has not finished: the member never starts on part of it. */
                if (live && !obj_terminating(live) && restore_pending(live)) {
                        r = target_fail(t, -EBUSY,
                                        "member %s: its PersistentVolumeClaim %s waits for a "
                                        "snapshot restore to finish; it does not start before",
                                        mp->name, obj_name(pvc));
                        goto out;
                }
                /* The record's data identity: a member that ran never starts on another volume. */
                if (mp->data_identity && (!live || obj_terminating(live) ||
                                          !streq_ptr(obj_uid(live), mp->data_identity))) {
                        r = target_fail(t, -ESTALE,
                                        "member %s: its PersistentVolumeClaim %s is %s; it cannot "
                                        "rejoin with the same identity and must be replaced",
                                        mp->name, obj_name(pvc),
                                        !live                   ? "gone"
                                        : obj_terminating(live) ? "being deleted"
                                                                : "a new one");
                        goto out;
                }
                json_decref(live);
                live = NULL;
                r = kt_apply(kt, pvc, false);
                if (r < 0)
                        goto out;
        }

        r = kt_adapt(kt, pod);
        if (r < 0)
                goto out;
        r = kt_get_owned(kt, pod, &live);
        if (r < 0)
                goto out;
        /* A Pod that ended (evicted, node lost: phase Failed) never runs again: replace it. */
        const char *phase =
            json_string_value(json_object_get(json_object_get(live, "status"), "phase"));
        bool ended = streq_ptr(phase, "Failed") || streq_ptr(phase, "Succeeded");
        /* Same spec, other config hash: what it mounts changed (a new CA). No hash: older gitcd. */
        const char *live_config = live ? obj_annotation(live, ANNOTATION_CONFIG_HASH) : NULL;
        bool other_config = mp->config_hash && live_config && !streq(live_config, mp->config_hash);
        if (live && (obj_terminating(live) || ended || other_config ||
                     !streq_ptr(obj_annotation(live, ANNOTATION_POD_HASH),
                                obj_annotation(pod, ANNOTATION_POD_HASH)))) {
                if (!obj_terminating(live))
                        log_debug("kubernetes target: member %s/%s/%s %s; recreating its Pod", ns,
                                  c->name, mp->name, ended ? "ended" : "has another spec");
                r = kt_delete_pod(kt, ns, mp->name);
                if (r < 0)
                        goto out;
        }
        r = kt_apply(kt, pod, false);
out:
        json_decref(live);
        json_decref(pvc);
        json_decref(pod);
        return r < 0 ? r : 0;
}

static int kt_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        /* Whether it is stopped on purpose is the member record's (state/: dormant). */
        _cleanup_free_ char *path = NULL;
        int r = kt_record_path(kt, ns, c->name, member, &path);
        if (r < 0)
                return r;
        kt_note_namespace(kt, ns);
        r = kt_delete_pod(kt, ns, member);
        return r < 0 ? r : 0;
}

/* Keep a removed member's volume: take it out of the cluster's labels so nothing lists it. */
static int detach_pvc(kubernetes_target *kt, const char *ns, const char *cluster,
                      const char *member, const char *name)
{
        _cleanup_free_ char *path = NULL;
        int r = kube_resource_path(&GVR_PVCS, ns, name, &path);
        if (r < 0)
                return target_fail(&kt->base, r, "invalid name %s/%s", ns, name);
        _cleanup_free_ char *from = xasprintf("%s/%s", cluster, member);
        json_t *patch =
            json_pack("{s:{s:{s:n, s:n}, s:{s:s}}}", "metadata", "labels", LABEL_CLUSTER,
                      LABEL_MEMBER, "annotations", ANNOTATION_REMOVED, from);
        _cleanup_free_ char *what = xasprintf("persistentvolumeclaims \"%s\"", name);
        r = kube_request(kt->kc, "PATCH", path, "application/merge-patch+json", patch, "patch",
                         what, ns, NULL);
        json_decref(patch);
        if (r < 0 && r != -ENOENT)
                return kube_fail(kt, r);
        return 0;
}

/*
 * Delete a member's PVC and wait (bounded) until it is gone, so a removed
 * member is really gone when the call returns. One still held by its
 * protection finalizer after the wait is left to finish on its own.
 */
static int delete_pvc(kubernetes_target *kt, const char *ns, const char *name)
{
        int r = kube_delete(kt->kc, &GVR_PVCS, ns, name, "Background");
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return kube_fail(kt, r);
        int64_t deadline = now_mono_ms() + kt->volume_delete_wait_ms;
        while (now_mono_ms() < deadline) {
                json_t *live = NULL;
                r = kube_get(kt->kc, &GVR_PVCS, ns, name, &live);
                json_decref(live);
                if (r == -ENOENT)
                        return 0;
                if (r < 0)
                        return kube_fail(kt, r);
                target_blocking_begin();
                msleep(POLL_MS);
                target_blocking_end();
        }
        log_debug("kubernetes target: PersistentVolumeClaim %s/%s is still being deleted", ns,
                  name);
        return 0;
}

static int kt_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        _cleanup_free_ char *rpath = NULL;
        int r = kt_record_path(kt, ns, c->name, member, &rpath);
        if (r < 0)
                return r;
        kt_note_namespace(kt, ns);
        r = kt_delete_pod(kt, ns, member);
        /* a restore's receiver that a killed gitcd left would hold the volume */
        if (r >= 0)
                r = kt_delete_receiver(kt, ns, member);
        if (r < 0)
                return r;
        _cleanup_free_ char *claim = pvc_name(member);
        json_t *live = NULL;
        r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &live);
        if (r >= 0) {
                bool managed = managed_by_gitcd(live);
                json_decref(live);
                if (!managed)
                        return target_fail(t, -EEXIST,
                                           "PersistentVolumeClaim %s/%s exists and is not "
                                           "managed by gitcd",
                                           ns, claim);
                if (keep_data)
                        r = detach_pvc(kt, ns, c->name, member, claim);
                else
                        r = delete_pvc(kt, ns, claim);
                if (r < 0)
                        return r;
        } else if (r != -ENOENT) {
                return kube_fail(kt, r);
        }
        record_remove(kt, ns, c->name, member);
        return 0;
}

/*
 * The volume remove_member(keep_data) detached from member: deleted only
 * when its removed-from annotation still names this cluster's member, so
 * a claim someone took over since is never touched.
 */
static int kt_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        _cleanup_free_ char *claim = pvc_name(member);
        json_t *live = NULL;
        int r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &live);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return kube_fail(kt, r);
        _cleanup_free_ char *from = xasprintf("%s/%s", c->name, member);
        bool kept = managed_by_gitcd(live) && !obj_label(live, LABEL_MEMBER) &&
                    streq_ptr(obj_annotation(live, ANNOTATION_REMOVED), from);
        json_decref(live);
        if (!kept)
                return 0;
        kt_note_namespace(kt, ns);
        return delete_pvc(kt, ns, claim);
}

/* Container facts of a Pod: restarts, CrashLoopBackOff, the first waiting reason. */
void kt_container_facts(const json_t *pod, int *ret_restarts, bool *ret_crash_loop,
                        const char **ret_waiting)
{
        json_t *statuses = json_object_get(json_object_get(pod, "status"), "containerStatuses");
        size_t i;
        json_t *cs;
        *ret_restarts = 0;
        *ret_crash_loop = false;
        *ret_waiting = NULL;
        json_array_foreach(statuses, i, cs)
        {
                *ret_restarts += (int)json_integer_value(json_object_get(cs, "restartCount"));
                const char *reason = json_string_value(json_object_get(
                    json_object_get(json_object_get(cs, "state"), "waiting"), "reason"));
                if (streq_ptr(reason, "CrashLoopBackOff"))
                        *ret_crash_loop = true;
                if (reason && !*ret_waiting)
                        *ret_waiting = reason;
        }
}

bool kt_pod_ready(const json_t *pod)
{
        json_t *conds = json_object_get(json_object_get(pod, "status"), "conditions");
        size_t i;
        json_t *cd;
        json_array_foreach(conds, i, cd)
        {
                if (streq_ptr(json_string_value(json_object_get(cd, "type")), "Ready"))
                        return streq_ptr(json_string_value(json_object_get(cd, "status")), "True");
        }
        return false;
}

static int64_t state_since(kubernetes_target *kt, const char *ns, const char *cluster,
                           const char *member, member_runtime_state s)
{
        _cleanup_free_ char *key = xasprintf("%s/%s/%s", ns, cluster, member);
        int64_t now = now_mono_ms();
        for (size_t i = 0; i < kt->n_seen; i++) {
                state_seen *e = &kt->seen[i];
                if (!streq(e->key, key))
                        continue;
                if (e->state != s) {
                        e->state = s;
                        e->since_mono = now;
                }
                return e->since_mono;
        }
        kt->seen = xgrow(kt->seen, &kt->alloc_seen, kt->n_seen + 1, sizeof(state_seen));
        kt->seen[kt->n_seen++] = (state_seen){.key = TAKE_PTR(key), .state = s, .since_mono = now};
        return now;
}

static int kt_member_status(target *t, const etcd_cluster *c, const char *member,
                            target_member_status *ret_status)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        member_record rec = {0};
        int r = record_load(kt, ns, c->name, member, &rec);
        if (r < 0)
                return r;
        kt_note_namespace(kt, ns);
        bool memory = c->storage.medium == MEDIUM_MEMORY;
        json_t *pod = NULL, *pvc = NULL;
        r = kube_get(kt->kc, &GVR_PODS, ns, member, &pod);
        if (r < 0 && r != -ENOENT) {
                r = kube_fail(kt, r);
                goto out;
        }
        if (!memory) {
                char *claim = pvc_name(member);
                r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &pvc);
                free(claim);
                if (r < 0 && r != -ENOENT) {
                        r = kube_fail(kt, r);
                        goto out;
                }
                /* A volume kept by remove_member(keep_data) belongs to no member. */
                if (pvc && !streq_ptr(obj_label(pvc, LABEL_MEMBER), member)) {
                        json_decref(pvc);
                        pvc = NULL;
                }
        }
        r = 0;

        member_runtime_state state;
        char *detail = NULL;
        int restarts = 0;
        if (!pod) {
                if (memory) {
                        state = MEMBER_ABSENT;
                        detail =
                            xstrdup(rec.exists ? "Pod gone; its in-memory data too" : "no Pod");
                } else if (pvc && !obj_terminating(pvc) && restore_pending(pvc)) {
                        /* what it holds is not the member's until the restore finished */
                        state = MEMBER_ABSENT;
                        detail = xstrdup("no Pod; its PersistentVolumeClaim waits for a "
                                         "snapshot restore");
                } else if (pvc && !obj_terminating(pvc)) {
                        state = MEMBER_STOPPED;
                        detail = xstrdup("no Pod; its PersistentVolumeClaim is kept");
                } else {
                        state = MEMBER_ABSENT;
                        detail = xstrdup("no Pod and no PersistentVolumeClaim");
                }
        } else {
                bool crash_loop;
                const char *waiting;
                kt_container_facts(pod, &restarts, &crash_loop, &waiting);
                const char *phase =
                    json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
                if (obj_terminating(pod)) {
                        state = MEMBER_STARTING;
                        detail = xstrdup("terminating");
                } else if (streq_ptr(phase, "Failed")) {
                        state = MEMBER_CRASHED;
                        const char *reason = json_string_value(
                            json_object_get(json_object_get(pod, "status"), "reason"));
                        detail = xasprintf("Pod failed%s%s", reason ? ": " : "", reason ?: "");
                } else if (crash_loop) {
                        state = MEMBER_CRASH_LOOP;
                        detail = xasprintf("CrashLoopBackOff after %d restarts", restarts);
                } else if (streq_ptr(phase, "Running") && kt_pod_ready(pod)) {
                        state = MEMBER_READY;
                        detail = xstrdup("Running and Ready");
                        if (!rec.exists && record_save(kt, ns, c->name, member) < 0)
                                log_warn("kubernetes target: %s", target_last_error(t));
                } else {
                        state = MEMBER_STARTING;
                        detail = xasprintf(
                            "%s%s%s", phase ? phase : "Pending",
                            waiting ? ": " : (streq_ptr(phase, "Running") ? ", not Ready" : ""),
                            waiting ?: "");
                }
        }
        *ret_status = (target_member_status){
            .state = state,
            .restarts = restarts,
            .state_since_ms = state_since(kt, ns, c->name, member, state),
            .config_hash = pod ? xstrdup_null(obj_annotation(pod, ANNOTATION_CONFIG_HASH)) : NULL,
            /* The PVC is the member's data: a terminating one holds none any more. */
            .data_identity = pvc && !obj_terminating(pvc) && !restore_pending(pvc)
                                 ? xstrdup_null(obj_uid(pvc))
                                 : NULL,
            .detail = detail,
        };
out:
        json_decref(pod);
        json_decref(pvc);
        return r;
}

static void add_name(char ***v, size_t *n, size_t *alloc, const char *name)
{
        if (isempty(name))
                return;
        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i], name))
                        return;
        *v = xgrow(*v, alloc, *n + 2, sizeof(char *));
        (*v)[(*n)++] = xstrdup(name);
        (*v)[*n] = NULL;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int kt_list_members(target *t, const char *namespace_, const char *cluster,
                           char ***ret_names, size_t *ret_n)
{
        kubernetes_target *kt = KT(t);
        if (!target_name_is_component(namespace_) || !target_name_is_component(cluster))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", namespace_,
                                   cluster);
        kt_note_namespace(kt, namespace_);
        _cleanup_free_ char *sel = xasprintf("%s=%s,%s=%s", LABEL_APP_MANAGED_BY,
                                             LABEL_MANAGED_BY_VALUE, LABEL_CLUSTER, cluster);
        char **names = NULL;
        size_t n = 0, alloc = 0;
        const kube_gvr *kinds[] = {&GVR_PODS, &GVR_PVCS};
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                json_t *items = NULL;
                int r = kube_list(kt->kc, kinds[k], namespace_, sel, &items, NULL);
                if (r < 0) {
                        strv_free(names);
                        return kube_fail(kt, r);
                }
                size_t i;
                json_t *o;
                json_array_foreach(items, i, o)
                {
                        /* A volume on its way out (its member removed) holds no member. */
                        if (kinds[k] == &GVR_PVCS && obj_terminating(o))
                                continue;
                        add_name(&names, &n, &alloc, obj_label(o, LABEL_MEMBER));
                }
                json_decref(items);
        }
        _cleanup_free_ char *dir = cluster_dir(kt, namespace_, cluster);
        DIR *d = opendir(dir);
        if (d) {
                struct dirent *e;
                while ((e = readdir(d))) {
                        size_t l = strlen(e->d_name);
                        if (e->d_name[0] == '.' || l <= 5 || !streq(e->d_name + l - 5, ".json"))
                                continue;
                        _cleanup_free_ char *name = xstrndup(e->d_name, l - 5);
                        add_name(&names, &n, &alloc, name);
                }
                closedir(d);
        }
        if (!names)
                names = xcalloc(1, sizeof(char *));
        qsort(names, n, sizeof(char *), cmp_str);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

static void kt_free(target *t)
{
        kubernetes_target *kt = KT(t);
        target_event_set_release(&kt->events);
        kube_client_free(kt->kc);
        kube_client_free(kt->wc);
        free(kt->state_dir);
        free(kt->domain);
        free(kt->snapshot_image);
        for (size_t i = 0; i < kt->n_namespaces; i++)
                free(kt->namespaces[i]);
        free(kt->namespaces);
        free(kt->watch_scope);
        free(kt->watch_rv);
        pthread_mutex_destroy(&kt->watch_lock);
        for (size_t i = 0; i < kt->n_preflighted; i++)
                free(kt->preflighted[i]);
        free(kt->preflighted);
        for (size_t i = 0; i < kt->n_seen; i++)
                free(kt->seen[i].key);
        free(kt->seen);
        for (size_t i = 0; i < kt->n_marks; i++) {
                free(kt->marks[i].key);
                free(kt->marks[i].hash);
        }
        free(kt->marks);
        free(kt);
}

static const target_ops kubernetes_ops = {
    .name = "kubernetes",
    .caps = KUBERNETES_TARGET_CAPS,
    .place_member = kt_place_member,
    .ensure_shared = kt_ensure_shared,
    .ensure_member = kt_ensure_member,
    .stop_member = kt_stop_member,
    .remove_member = kt_remove_member,
    .member_status = kt_member_status,
    .list_members = kt_list_members,
    .drop_kept_data = kt_drop_kept_data,
    .tick = kt_tick,
    .wait_event = kt_wait_event,
    .take_events = kt_take_events,
    .client_tls = kt_client_tls,
    .tls_certificates = kt_tls_certificates,
    .renew_tls = kt_renew_tls,
    .secret_folder = kt_secret_folder,
    .restore_member = kt_restore_member,
    .data_revision = kt_data_revision,
    .writer_start = kt_writer_start,
    .writer_stop = kt_writer_stop,
    .debug = &kt_debug_ops,
    .takeover = &kt_takeover_ops,
    .free = kt_free,
};

int kubernetes_target_new(const kubernetes_target_opts *opts, target **ret)
{
        if (!opts || !opts->config || isempty(opts->state_dir))
                return -EINVAL;
        char *abs_state = NULL;
        int r = target_state_dir(opts->state_dir, &abs_state);
        if (r < 0)
                return r;
        kubernetes_target *kt = XNEW(kubernetes_target);
        pthread_mutex_init(&kt->watch_lock, NULL);
        kt->base.ops = &kubernetes_ops;
        kt->state_dir = abs_state;
        kt->volume_delete_wait_ms =
            opts->volume_delete_wait_ms > 0 ? opts->volume_delete_wait_ms : 30000;
        kt->snapshot_image =
            xstrdup(isempty(opts->snapshot_image) ? KUBERNETES_DEFAULT_SNAPSHOT_IMAGE
                                                  : opts->snapshot_image);
        kt->domain = xstrdup(isempty(opts->cluster_domain) ? RENDER_DEFAULT_CLUSTER_DOMAIN
                                                           : opts->cluster_domain);
        char *err = NULL;
        r = kube_client_new(opts->config, &kt->kc, &err);
        if (r >= 0)
                r = kube_client_new(opts->config, &kt->wc, &err);
        if (r >= 0) /* target_wake() ends wait_event's watch */
                kube_client_set_interrupt(kt->wc, target_wake_pending);
        if (r < 0) {
                log_error("kubernetes target: %s", err ? err : strerror(-r));
                free(err);
                kt_free(&kt->base);
                return r;
        }
        *ret = &kt->base;
        return 0;
}

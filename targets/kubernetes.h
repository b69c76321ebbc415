/*
 * The Kubernetes target: every etcd member is a bare Pod with a
 * PersistentVolumeClaim, applied to a kube-apiserver with server-side apply
 * (field manager "gitcd", never forced). The objects are exactly the
 * rendered ones (render/render.h), fitted to the server's API versions
 * (kube/adapt.h).
 *
 * On disk, under opts.state_dir:
 *
 *   kubernetes/<namespace>/<cluster>/
 *       <member>.json           that the target saw the member run (written
 *                               when it is first seen Ready); its data
 *                               identity (the PVC UID) is the member record's
 *       pki/ca.crt, ca.key      the cluster CA (tls.provider auto)
 *       tls/client|peer|operator/  the issued certificates (auto), copied
 *                               into the "<cluster>-<surface>-tls" Secrets
 *       operator/               gitcd's client identity read from the
 *                               operator Secret (providers secrets and
 *                               cert-manager), mode 0600
 *       secrets/<name>/         a Secret gitcd itself reads (S3 credentials
 *                               of spec.snapshots), one file per key, 0600
 *       snapshot-writer.lock    held by the cluster's snapshot writer in use
 *                               (kubernetes_writer_lock), its holder's pid
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "kube/kubeconfig.h"
#include "targets/registry.h"
#include "targets/target.h"

typedef struct kubernetes_target_opts {
        /* Required: where the API server is and how to authenticate (copied). */
        const kube_config *config;
        /* Required: folder for the member records and TLS files. */
        const char *state_dir;
        /* DNS domain of the cluster's Services; NULL = RENDER_DEFAULT_CLUSTER_DOMAIN. */
        const char *cluster_domain;
        /*
         * remove_member waits this long for a deleted PVC to be gone (its
         * kubernetes.io/pvc-protection finalizer is lifted once no Pod uses
         * it); a PVC still there then is left to finish on its own. 0: 30 s.
         */
        int volume_delete_wait_ms;
        /*
         * The image of the Pods that put a restored snapshot into a member's
         * PVC (`gitcd snapshot receive`); NULL = KUBERNETES_DEFAULT_SNAPSHOT_IMAGE.
         */
        const char *snapshot_image;
} kubernetes_target_opts;

/* gitcd's own image of this version (targets/registry.h). */
#define KUBERNETES_DEFAULT_SNAPSHOT_IMAGE TARGET_DEFAULT_SNAPSHOT_IMAGE

/*
 * Behaviour of the operations (targets/target.h) specific to this target:
 *   place_member    headless-Service DNS names under the cluster domain on the
 *                  standard ports, listening on 0.0.0.0; data in
 *                  RENDER_STEADY_DATA_DIR, certificates in RENDER_STEADY_TLS_DIR.
 *   ensure_shared  the first time a spec is seen (per process), dry-runs every
 *                  object of the cluster first and writes nothing when one
 *                  fails (-EACCES for RBAC, -EEXIST for a name held by an
 *                  object gitcd does not manage); then applies the Services,
 *                  the PodDisruptionBudget (maxUnavailable from the voters of
 *                  the plan passed), Certificates or (auto) the TLS Secrets,
 *                  and deletes gitcd's shared objects of the cluster that are
 *                  no longer rendered.
 *   ensure_member  PVC then Pod; a live Pod whose gitcd.io/pod-hash differs,
 *                  or that ended (phase Failed), is deleted and awaited
 *                  (-ETIMEDOUT) before the new one is applied; -ESTALE when
 *                  the plan entry's data_identity is not the live PVC's UID
 *                  (gone, being deleted or replaced); -EBUSY while the PVC
 *                  carries gitcd.io/restore=pending (a restore not finished).
 *   member_status  a member whose PVC is pending a restore and that has no
 *                  Pod is ABSENT (what the volume holds is not its data yet).
 *   restore_member etcd's tool restores on gitcd's host; a receiver Pod
 *                  `<member>-restore` (snapshot_image, `gitcd snapshot
 *                  receive`, labelled app.kubernetes.io/component=
 *                  snapshot-receiver) mounts the member's PVC, and a Secret
 *                  of the same name holds its certificate, key and token;
 *                  the files go to it over HTTPS (snapstore/receiver.h),
 *                  then both are deleted. Leftovers of a killed gitcd are
 *                  deleted by label first (and by remove_member).
 *   remove_member  Pod (awaited) and the receiver of a restore a killed gitcd
 *                  left, then the PVC (awaited up to
 *                  volume_delete_wait_ms), then the record; keep_data
 *                  detaches the PVC from the cluster's labels instead.
 *   list_members   a NULL-terminated, sorted array; free each name and the array.
 *   wait_event     watches gitcd's Pods; 1 on the first change, 0 on timeout
 *                  (also when the watch cannot be made: it then just sleeps).
 *   client_tls     auto: the issued operator files; secrets / cert-manager:
 *                  the operator Secret's keys written to operator/.
 *   secret_folder  the Secret's keys written to secrets/<name>/ (get on
 *                  secrets, which gitcd's RBAC grants in deploy/).
 */

/*
 * The cluster-wide objects this target applies for c (before API-version
 * adaptation and the Secrets of tls.provider auto, whose content it
 * issues): render_shared_objects() of the steady plan with the
 * PodDisruptionBudget fitted to the voters of members (NULL: of the steady
 * plan). `gitcd plan --target kubernetes` compares against exactly this.
 */
json_t *kubernetes_shared_objects(const etcd_cluster *c, const membership_plan *steady,
                                  const membership_plan *members);

/*
 * Exactly the objects this target applies for c, in the order it applies
 * them: kubernetes_shared_objects() (the PDB fitted to the voters of
 * members; NULL: of the steady plan), the TLS Secrets of tls.provider auto
 * made from the certificates issued in its state folder (none before they
 * are issued: ensure_shared issues them), then each member of members:
 * its PVC and its Pod carrying gitcd.io/pod-hash and gitcd.io/config-hash.
 * ensure_shared and ensure_member apply these, and `gitcd plan --target
 * kubernetes` compares the live objects with them. Reads files, writes
 * nothing. Not yet fitted to the server's API versions
 * (kube_adapt_object(), which changes no Pod). t must be a Kubernetes
 * target; -errno with target_last_error() when a file cannot be read.
 */
int kubernetes_target_objects(target *t, const etcd_cluster *c, const membership_plan *members,
                              json_t **ret);

/*
 * What gitcd plan says of the Kubernetes target (target_plan_ops):
 * kube_objects is kubernetes_target_objects() with a target,
 * kubernetes_shared_objects() of the steady plan without.
 */
extern const target_plan_ops kubernetes_plan_ops;

/*
 * The lock of cluster ns/cluster's snapshot writer (writer_start), a lock
 * file in the target's folder of the cluster under state_dir: held by a
 * writer from before the cluster's leftover writers are deleted until it is
 * deleted itself, released by its process ending however it ends. Never
 * waits: -EAGAIN with *ret_holder (when not NULL) the holder's pid (0 when
 * unknown) while another open lock, of this process or another, holds it;
 * -EINVAL for names that make no path. On success *ret_fd holds the lock
 * until closed.
 */
int kubernetes_writer_lock(const char *state_dir, const char *ns, const char *cluster, int *ret_fd,
                           pid_t *ret_holder);

/* What the Kubernetes target can do beyond every target (TARGET_CAP_*). */
#define KUBERNETES_TARGET_CAPS                                                                     \
        (TARGET_CAP_TLS_FROM_SECRETS | TARGET_CAP_MEMORY_MEDIUM | TARGET_CAP_CONTAINER_IMAGES |    \
         TARGET_CAP_PVC_WRITER | TARGET_CAP_KUBE_CONTEXTS | TARGET_CAP_PEER_SELF_SIGNED)

/*
 * The Kubernetes target as the kind opens it (targets/kubernetes-servers.c):
 * each cluster on the API server of its kubeconfig context
 * (etcd_cluster.kube_context, else context, else the kubeconfig's current
 * one), one kubernetes target per distinct server and credentials, opened
 * on first use, each behind a lock of its own, so that a server that does
 * not answer holds up only its own clusters.
 */
typedef struct kubernetes_servers_opts {
        const char *kubeconfig; /* NULL: in-cluster, else $KUBECONFIG or ~/.kube/config */
        const char *context;    /* the default context; NULL: the kubeconfig's current one */
        const char *state_dir;  /* required */
        const char *cluster_domain;
        const char *snapshot_image;
        /* Where a warning for a person goes (TLS verification off); NULL: log_warn(). */
        void (*warn)(void *userdata, const char *message);
        void *warn_userdata;
} kubernetes_servers_opts;

/*
 * 0, or -errno with *ret_error a sentence (the default context's
 * kubeconfig does not load: nothing is contacted yet).
 */
int kubernetes_servers_new(const kubernetes_servers_opts *o, target **ret, char **ret_error);
/* Whether t is one of kubernetes_servers_new()'s. */
bool kubernetes_servers_is(const target *t);
/*
 * The kubernetes target (without its lock: one thread, gitcd plan) that
 * runs c, opened when needed. 0 or -errno with target_last_error(t).
 */
int kubernetes_servers_raw(target *t, const etcd_cluster *c, target **ret);
/*
 * Whether kubeconfig (NULL: the default lookup) has context: 0, or -errno
 * with *ret_error saying what it has (newly allocated). Contacts nothing.
 */
int kubernetes_context_check(const char *kubeconfig, const char *context, char **ret_error);

/*
 * -EINVAL without config or state_dir; -errno when the state folder cannot
 * be created or the client cannot be made (a message is logged).
 */
int kubernetes_target_new(const kubernetes_target_opts *opts, target **ret);

/*
 * Test harness: a real kube-apiserver v1.20.2 on loopback beside its own
 * real etcd, and a node simulator that plays kubelet (and scheduler) for
 * the Pods gitcd creates. For tests only; never part of the product.
 *
 * The apiserver runs with RBAC, a static token file and a serving
 * certificate from a fresh CA (flags: tests/kube/apiserver.md). The
 * kubeconfig written into the harness folder has three contexts, all with
 * the default namespace "gitcd-test":
 *   "admin"   user "admin" in system:masters;
 *   "limited" user "limited", no permissions at all;
 *   "gitcd"   user "system:serviceaccount:gitcd:gitcd" (groups
 *             system:serviceaccounts, system:serviceaccounts:gitcd): exactly
 *             what deploy/'s RBAC objects grant to gitcd's ServiceAccount.
 *
 * Every process started here is tracked by tests/harness/harness.h and
 * killed when the test ends, however it ends.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "kube/client.h"

#define KUBEAPI_NAMESPACE "gitcd-test"

typedef struct kubeapi kubeapi;

/*
 * The kube-apiserver binary: $GITCD_KUBE_APISERVER, else
 * $GITCD_CACHE_DIR/kube/v1.20.2/kube-apiserver, else
 * $XDG_CACHE_HOME/gitcd/kube/..., else ~/.cache/gitcd/kube/... NULL when
 * absent (the caller skips with exit 77).
 */
char *kubeapi_find_binary(void);

/*
 * The kube-controller-manager binary, the same way: $GITCD_KUBE_CONTROLLER_MANAGER,
 * else kube/v1.20.2/kube-controller-manager in the cache (built beside
 * kube-apiserver by scripts/build-kube-apiserver). NULL when absent.
 */
char *kubeapi_find_controller_manager(void);

/*
 * Start etcd (3.5.16) and the apiserver in a new temporary folder, wait
 * until /readyz answers, create the namespace KUBEAPI_NAMESPACE. -ENOENT
 * when the binary is missing; other errors abort the test.
 */
int kubeapi_start(kubeapi **ret);
/* Stop the apiserver and its etcd, remove the folder. NULL is a no-op. */
void kubeapi_free(kubeapi *k);

const char *kubeapi_dir(const kubeapi *k);        /* the harness folder */
const char *kubeapi_kubeconfig(const kubeapi *k); /* path of the kubeconfig */
const char *kubeapi_server(const kubeapi *k);     /* "https://127.0.0.1:PORT" */

/* A new client for one of the kubeconfig's contexts ("admin", "limited", "gitcd"). */
kube_client *kubeapi_client(const kubeapi *k, const char *context);

/*
 * Start a real kube-controller-manager against this apiserver with only the
 * statefulset, replicaset and garbagecollector controllers (admin
 * credentials, no leader election, its own secure port, no insecure one)
 * and wait until its /healthz answers. A StatefulSet or ReplicaSet then
 * gets its Pods (and a StatefulSet its PVCs from volumeClaimTemplates), a
 * deleted Pod is recreated, and deleting an owner deletes its dependents.
 * No scheduler, kubelet, endpoints or deployment controller: the node
 * simulator schedules and runs the Pods; a Deployment stays as written.
 * Idempotent. -ENOENT when the binary is missing (the caller skips with
 * 77); -ECHILD or -ETIMEDOUT (its log's end printed) when it does not come
 * up. Stopped by kubeapi_free() or kubeapi_stop_controllers();
 * kubeapi_pause() leaves it running.
 */
int kubeapi_start_controllers(kubeapi *k);
void kubeapi_stop_controllers(kubeapi *k);

/* Create a namespace (idempotent). 0 or negative errno. */
int kubeapi_create_namespace(kubeapi *k, const char *ns);

/*
 * Stop the apiserver process (SIGTERM, wait) and keep it down; etcd and
 * the stored objects stay. kubeapi_resume() starts it again on the same
 * port with the same flags and waits until it is ready.
 */
void kubeapi_pause(kubeapi *k);
void kubeapi_resume(kubeapi *k);

/*
 * Give this process (and every child it starts from now on) a private
 * mount namespace in which /etc/hosts is a bind mount of a file of its
 * own, so the node simulator can make Pod DNS names resolve. Needs root
 * (CLONE_NEWNS); returns -EPERM otherwise (the caller skips with 77).
 * Returns the path of the file that now backs /etc/hosts. Call once, before
 * starting any thread.
 */
int kubeapi_private_hosts(const char *dir, char **ret_hosts_path);

/* ---- the node simulator ---- */

typedef struct nodesim nodesim;

/*
 * Start a node simulator for node `node` in a child process, talking to
 * the apiserver as "admin". It registers a Node object, binds unscheduled
 * Pods of every namespace to its node (the scheduler's job), and for each
 * Pod bound to it:
 *   - gives it its own loopback address 127.0.0.x (stable for the Pod's
 *     namespace/name while the simulator runs), so every member keeps
 *     etcd's standard ports 2379/2380/2381;
 *   - maps its volumes to folders under work_dir: a PVC claim to
 *     volumes/<ns>/<claim> (which lives as long as the PVC object does; the
 *     folder is removed when the PVC is deleted), an emptyDir to a folder of
 *     the Pod, a Secret to a folder holding its decoded keys (the volume's
 *     defaultMode; 0644, Kubernetes' default, when unset), laid out as the
 *     kubelet's atomic writer does (each key a link into ..data, swapped
 *     in one rename) and synced with the Secret every 5 s while the Pod
 *     runs (the kubelet: about a minute);
 *   - runs the first container's command as a local process: argv[0]
 *     "etcd" (any folder: "/usr/local/bin/etcd") becomes the binary for the
 *     image tag's version (~/.cache/gitcd/etcd/<version>/etcd; the tag
 *     "v3.5.16" -> 3.5.16), and so does a container without a command
 *     whose image is named etcd (".../etcd:v3.5.16": the image's
 *     entrypoint); argv[0] "gitcd" (gitcd's own image, any tag) becomes
 *     $GITCD_BIN, the gitcd under test, and its --listen=0.0.0.0:PORT
 *     listens on the Pod's address. Anything else (a shell, "sh -c ...")
 *     is refused (CreateContainerError). Init containers are not run;
 *   - gives the container its environment as the kubelet does: envFrom
 *     (configMapRef, secretRef, prefix), then env in order, each value and
 *     then every command and args element $(VAR)-expanded with the
 *     container's variables ("$$" is "$", an undefined $(VAR) stays as
 *     written: tests/harness/podenv.h); valueFrom fieldRef (metadata.name,
 *     metadata.namespace, metadata.uid, status.podIP, status.hostIP,
 *     spec.nodeName, spec.serviceAccountName), configMapKeyRef and
 *     secretKeyRef; anything else, or a missing source that is not
 *     optional, is CreateContainerConfigError;
 *   - rewrites etcd's settings for the host, in flags and in ETCD_*
 *     variables alike: a path under a volume's mountPath points into its
 *     folder (a claim's folder, or the subPath / expanded subPathExpr
 *     folder in it, made when missing); etcd's data and WAL folders
 *     outside any volume go into the Pod's own folder (its container file
 *     system), never the machine's; listen URLs on 0.0.0.0 listen on the
 *     Pod's address; its output goes to work_dir/logs/<ns>_<pod>.log;
 *   - writes "<address> <hostname>.<subdomain>.<ns>.svc.cluster.local
 *     <hostname>.<subdomain>.<ns>.svc <hostname>.<subdomain>" lines for its
 *     Pods into hosts_path (the last is the name a Pod of the namespace
 *     finds through its DNS search path; the hosts file is one for every
 *     namespace, so the first line with a name wins). Only its own lines
 *     (each ends in "# nodesim <pid>") are replaced, under an flock, in
 *     place (the file is bind-mounted over /etc/hosts): two simulators of
 *     one test (two API servers) share the file. hostAliases are not
 *     applied;
 *   - writes Pod status through the API: Pending until the process runs,
 *     then Running with podIP, and the Ready condition from the container's
 *     readinessProbe (an HTTP or HTTPS GET on the Pod's address, no
 *     certificate check, as a kubelet) every second; an exec probe is not
 *     run (ready while the process runs), nor are liveness and startup
 *     probes;
 *     restarts an exited process with a back-off (restartCount,
 *     CrashLoopBackOff as the waiting reason after 3 quick exits); with
 *     restartPolicy Never it does not: the Pod turns Succeeded (exit code
 *     0) or Failed, its container terminated with the exit code;
 *   - on deletion (deletionTimestamp set): stops the process (SIGTERM, then
 *     SIGKILL after the grace period, at most 10 s) and deletes the Pod with
 *     gracePeriodSeconds=0, as a kubelet does;
 *   - removes the kubernetes.io/pvc-protection finalizer of a deleted PVC
 *     once no Pod of the node uses it (the controller-manager's job).
 * hosts_path may be NULL (no DNS names). 0 or negative errno.
 */
int nodesim_start(const kubeapi *k, const char *node, const char *work_dir, const char *hosts_path,
                  nodesim **ret);
/* Stop the simulator and every process it started. NULL is a no-op. */
void nodesim_free(nodesim *s);
/* The address the simulator gave a Pod, NULL if none yet (newly allocated). */
char *nodesim_pod_address(const nodesim *s, const char *ns, const char *pod);
/*
 * The process id of a Pod's running container (its process group leader),
 * 0 when none runs. As seen at the simulator's last pass (every ~0.4 s).
 */
pid_t nodesim_pod_pid(const nodesim *s, const char *ns, const char *pod);

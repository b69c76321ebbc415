/*
 * The Kubernetes objects of a cluster: per member a Pod and a
 * PersistentVolumeClaim, and the shared Services, PodDisruptionBudget and
 * (cert-manager) Certificates. Pure: the model and the plan in, JSON out.
 *
 * Decisions worth knowing:
 * - Members are bare Pods, not a StatefulSet: gitcd adds, promotes and
 *   removes members one at a time through etcd's API, and names are never
 *   reused, which a StatefulSet's ordinals cannot express.
 * - The headless Service "<name>-headless" selects every member and
 *   publishes not-ready addresses, so peers resolve each other while the
 *   cluster bootstraps. The client Service "<name>" selects voters only:
 *   a learner refuses client requests, so it must not receive traffic
 *   until it is promoted (the role label changes in place then).
 * - The PodDisruptionBudget covers voters with maxUnavailable =
 *   (voters - 1) / 2, the failures a quorum survives; a paused cluster has
 *   none (nothing runs).
 * - Readiness probes the plain-HTTP metrics listener: /readyz from etcd
 *   3.5.11 on (where it was introduced), /health before. No liveness probe:
 *   restarting a slow-but-alive member under load makes things worse.
 * - The data volume is mounted at the parent of the data dir, so etcd
 *   creates its data folder itself with the mode it insists on.
 * - Without a user affinity, members prefer different nodes (weight 100).
 * - GOMAXPROCS follows the CPU limit (rounded up, at least 1), so the Go
 *   runtime does not schedule more threads than the container may use.
 * - A paused cluster renders its shared objects and the dormant member's
 *   volume, but no Pod.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "render/render-internal.h"
#include "render/render.h"
#include "api/spec.h"
#include "util/xalloc.h"

#define TERMINATION_GRACE_SECONDS 60

static const member_plan *plan_member(const membership_plan *p, size_t idx)
{
        return p && idx < p->n ? &p->members[idx] : NULL;
}

static json_t *object_new(const char *api_version, const char *kind, json_t *metadata)
{
        json_t *o = json_object();
        json_object_set_new(o, "apiVersion", json_string(api_version));
        json_object_set_new(o, "kind", json_string(kind));
        json_object_set_new(o, "metadata", metadata);
        return o;
}

static void set_copy(json_t *obj, const char *key, const json_t *value)
{
        if (value && !json_is_null(value))
                json_object_set_new(obj, key, json_deep_copy(value));
}

/* A CPU limit (a quantity string or a JSON number) -> millicores, rounded up; -1 if neither. */
static long long cpu_millis(const json_t *q)
{
        if (json_is_integer(q))
                return json_integer_value(q) * 1000;
        if (json_is_real(q))
                return (long long)ceil(json_real_value(q) * 1000.0);
        int64_t millis;
        if (!json_is_string(q) || quantity_parse_millis(json_string_value(q), &millis) < 0)
                return -1;
        return (long long)millis;
}

static json_t *gomaxprocs_env(const etcd_cluster *c)
{
        const json_t *cpu = json_object_get(json_object_get(c->resources, "limits"), "cpu");
        long long millis = cpu ? cpu_millis(cpu) : -1;
        if (millis < 0)
                return NULL;
        long long procs = MAX((millis + 999) / 1000, 1LL);
        _cleanup_free_ char *v = xasprintf("%lld", procs);
        return json_pack("[{s:s, s:s}]", "name", "GOMAXPROCS", "value", v);
}

static const char *readiness_path(const etcd_cluster *c)
{
        const semver *v = &c->ver;
        bool readyz = v->major > 3 || (v->major == 3 && v->minor > 5) ||
                      (v->major == 3 && v->minor == 5 && v->patch >= 11);
        return readyz ? "/readyz" : "/health";
}

static char *pvc_name(const member_plan *m)
{
        return xasprintf("data-%s", m->name);
}

/* The data folder's parent, where the data volume is mounted. */
static char *data_mount_path(const member_plan *m)
{
        const char *dir = isempty(m->data_dir) ? RENDER_STEADY_DATA_DIR : m->data_dir;
        const char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return xstrdup(dir);
        return xstrndup(dir, (size_t)(slash - dir));
}

static json_t *default_affinity(const etcd_cluster *c)
{
        return json_pack("{s:{s:[{s:i, s:{s:{s:o}, s:s}}]}}", "podAntiAffinity",
                         "preferredDuringSchedulingIgnoredDuringExecution", "weight", 100,
                         "podAffinityTerm", "labelSelector", "matchLabels",
                         render_selector(c, false), "topologyKey", "kubernetes.io/hostname");
}

static json_t *container_port(const char *name, int port)
{
        return json_pack("{s:s, s:i, s:s}", "name", name, "containerPort", port, "protocol", "TCP");
}

json_t *render_member_pod(const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        const member_plan *m = plan_member(p, idx);
        if (!m)
                return NULL;
        _cleanup_free_ char *headless = render_headless_service_name(c);
        _cleanup_free_ char *image = xasprintf(
            "%s:v%d.%d.%d", isempty(c->repository) ? GITCD_DEFAULT_REPOSITORY : c->repository,
            c->ver.major, c->ver.minor, c->ver.patch);
        int metrics_port = render_url_port(m->listen_metrics_url, ETCD_METRICS_PORT);

        json_t *command = json_array();
        char **argv = render_member_command(c, p, idx);
        for (char **a = argv; a && *a; a++)
                json_array_append_new(command, json_string(*a));
        strv_free(argv);

        json_t *volumes = json_array(), *mounts = json_array();
        _cleanup_free_ char *mount = data_mount_path(m);
        json_array_append_new(mounts, json_pack("{s:s, s:s}", "name", "data", "mountPath", mount));
        if (c->storage.medium == MEDIUM_MEMORY) {
                json_t *ed = json_pack("{s:s}", "medium", "Memory");
                if (!isempty(c->storage.size))
                        json_object_set_new(ed, "sizeLimit", json_string(c->storage.size));
                json_array_append_new(volumes,
                                      json_pack("{s:s, s:o}", "name", "data", "emptyDir", ed));
        } else {
                _cleanup_free_ char *claim = pvc_name(m);
                json_array_append_new(volumes,
                                      json_pack("{s:s, s:{s:s}}", "name", "data",
                                                "persistentVolumeClaim", "claimName", claim));
        }
        render_tls_volumes(c, m, volumes, mounts);

        json_t *ctr = json_object();
        json_object_set_new(ctr, "name", json_string(RENDER_ETCD_CONTAINER));
        json_object_set_new(ctr, "image", json_string(image));
        json_object_set_new(ctr, "imagePullPolicy", json_string("IfNotPresent"));
        json_object_set_new(ctr, "command", command);
        json_t *env = gomaxprocs_env(c);
        if (env)
                json_object_set_new(ctr, "env", env);
        json_object_set_new(
            ctr, "ports",
            json_pack(
                "[o,o,o]",
                container_port("client", render_url_port(m->listen_client_url, ETCD_CLIENT_PORT)),
                container_port("peer", render_url_port(m->listen_peer_url, ETCD_PEER_PORT)),
                container_port("metrics", metrics_port)));
        json_object_set_new(ctr, "readinessProbe",
                            json_pack("{s:{s:s, s:i, s:s}, s:i, s:i, s:i, s:i}", "httpGet", "path",
                                      readiness_path(c), "port", metrics_port, "scheme", "HTTP",
                                      "periodSeconds", 5, "timeoutSeconds", 5, "successThreshold",
                                      1, "failureThreshold", 3));
        set_copy(ctr, "resources", c->resources);
        json_object_set_new(ctr, "volumeMounts", mounts);

        json_t *spec = json_object();
        json_object_set_new(spec, "hostname", json_string(m->name));
        json_object_set_new(spec, "subdomain", json_string(headless));
        json_object_set_new(spec, "restartPolicy", json_string("Always"));
        json_object_set_new(spec, "terminationGracePeriodSeconds",
                            json_integer(TERMINATION_GRACE_SECONDS));
        json_object_set_new(spec, "enableServiceLinks", json_false());
        json_object_set_new(spec, "containers", json_pack("[o]", ctr));
        json_object_set_new(spec, "volumes", volumes);
        set_copy(spec, "nodeSelector", c->node_selector);
        set_copy(spec, "tolerations", c->tolerations);
        if (c->affinity && !json_is_null(c->affinity))
                set_copy(spec, "affinity", c->affinity);
        else
                json_object_set_new(spec, "affinity", default_affinity(c));
        set_copy(spec, "topologySpreadConstraints", c->topology_spread_constraints);

        json_t *pod =
            object_new("v1", "Pod", render_metadata(c, m->name, COMPONENT_MEMBER, m, true));
        json_object_set_new(pod, "spec", spec);
        return pod;
}

json_t *render_member_pvc(const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        const member_plan *m = plan_member(p, idx);
        if (!m || c->storage.medium == MEDIUM_MEMORY)
                return NULL;
        _cleanup_free_ char *name = pvc_name(m);
        json_t *spec = json_object();
        json_object_set_new(spec, "accessModes", json_pack("[s]", "ReadWriteOnce"));
        if (!isempty(c->storage.storage_class))
                json_object_set_new(spec, "storageClassName",
                                    json_string(c->storage.storage_class));
        json_object_set_new(
            spec, "resources",
            json_pack("{s:{s:s}}", "requests", "storage",
                      isempty(c->storage.size) ? GITCD_DEFAULT_STORAGE_SIZE : c->storage.size));
        json_t *pvc = object_new("v1", "PersistentVolumeClaim",
                                 render_metadata(c, name, COMPONENT_DATA, m, false));
        json_object_set_new(pvc, "spec", spec);
        return pvc;
}

static json_t *service_port(const char *name, int port)
{
        return json_pack("{s:s, s:i, s:i, s:s}", "name", name, "port", port, "targetPort", port,
                         "protocol", "TCP");
}

static json_t *headless_service(const etcd_cluster *c)
{
        _cleanup_free_ char *name = render_headless_service_name(c);
        json_t *spec = json_object();
        json_object_set_new(spec, "clusterIP", json_string("None"));
        json_object_set_new(spec, "publishNotReadyAddresses", json_true());
        json_object_set_new(spec, "selector", render_selector(c, false));
        json_object_set_new(spec, "ports",
                            json_pack("[o,o]", service_port("client", ETCD_CLIENT_PORT),
                                      service_port("peer", ETCD_PEER_PORT)));
        json_t *svc = object_new("v1", "Service",
                                 render_metadata(c, name, COMPONENT_PEER_SERVICE, NULL, false));
        json_object_set_new(svc, "spec", spec);
        return svc;
}

static json_t *client_service(const etcd_cluster *c)
{
        _cleanup_free_ char *name = render_client_service_name(c);
        json_t *spec = json_object();
        json_object_set_new(spec, "type", json_string("ClusterIP"));
        json_object_set_new(spec, "selector", render_selector(c, true));
        json_object_set_new(spec, "ports",
                            json_pack("[o]", service_port("client", ETCD_CLIENT_PORT)));
        json_t *svc = object_new("v1", "Service",
                                 render_metadata(c, name, COMPONENT_CLIENT_SERVICE, NULL, false));
        json_object_set_new(svc, "spec", spec);
        return svc;
}

static json_t *disruption_budget(const etcd_cluster *c, const membership_plan *p)
{
        size_t voters = 0;
        for (size_t i = 0; p && i < p->n; i++)
                if (!p->members[i].learner)
                        voters++;
        if (render_paused(c) || voters == 0)
                return NULL;
        json_t *spec = json_pack("{s:I, s:{s:o}}", "maxUnavailable", (json_int_t)((voters - 1) / 2),
                                 "selector", "matchLabels", render_selector(c, true));
        json_t *pdb = object_new("policy/v1", "PodDisruptionBudget",
                                 render_metadata(c, c->name, COMPONENT_PDB, NULL, false));
        json_object_set_new(pdb, "spec", spec);
        return pdb;
}

json_t *render_shared_objects(const etcd_cluster *c, const membership_plan *p)
{
        json_t *out = json_array();
        json_array_append_new(out, headless_service(c));
        json_array_append_new(out, client_service(c));
        json_t *pdb = disruption_budget(c, p);
        if (pdb)
                json_array_append_new(out, pdb);
        render_certificates(c, p, out);
        return out;
}

json_t *render_cluster(const etcd_cluster *c, const membership_plan *p)
{
        json_t *out = render_shared_objects(c, p);
        for (size_t i = 0; i < p->n; i++) {
                json_t *pvc = render_member_pvc(c, p, i);
                if (pvc)
                        json_array_append_new(out, pvc);
                if (!render_paused(c))
                        json_array_append_new(out, render_member_pod(c, p, i));
        }
        return out;
}

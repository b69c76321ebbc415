/*
 * Metadata every rendered object shares: names, labels, annotations and
 * selectors, plus the small facts about a cluster several objects need
 * (namespace, paused, which TLS surfaces are on, where certificates live).
 *
 * Labels merge three layers, later winning: additionalMetadata (every
 * object), podTemplate (Pods only), then gitcd's own keys. gitcd's keys
 * must win because Services, the PodDisruptionBudget and anti-affinity
 * select on them; user keys under "gitcd.io/" are dropped altogether, so a
 * Service never carries a stray gitcd.io/role. Maps are emitted with sorted keys so the output does not
 * depend on the order a spec happened to list them in.
 */
#include <stdlib.h>
#include <string.h>

#include "render/render-internal.h"
#include "util/xalloc.h"

const char *render_namespace(const etcd_cluster *c)
{
        return isempty(c->namespace_) ? "default" : c->namespace_;
}

bool render_paused(const etcd_cluster *c)
{
        return c->replicas <= 0;
}

bool render_client_tls(const etcd_cluster *c)
{
        return c->tls.provider != TLS_PROVIDER_NONE && c->tls.client.enabled;
}

bool render_peer_tls(const etcd_cluster *c)
{
        return c->tls.provider != TLS_PROVIDER_NONE && c->tls.peer.enabled;
}

bool render_peer_self_signed(const etcd_cluster *c)
{
        return c->tls.peer.self_signed && !render_peer_tls(c);
}

const char *render_peer_scheme(const etcd_cluster *c)
{
        return render_peer_tls(c) || render_peer_self_signed(c) ? "https" : "http";
}

char *render_tls_secret_name(const etcd_cluster *c, const char *subdir)
{
        if (streq(subdir, TLS_SUBDIR_CA_BUNDLE))
                return render_client_tls(c) || render_peer_tls(c)
                           ? xstrdup_null(c->tls.ca_bundle_secret)
                           : NULL;
        bool on = streq(subdir, TLS_SUBDIR_PEER) ? render_peer_tls(c) : render_client_tls(c);
        if (!on)
                return NULL;
        if (c->tls.provider == TLS_PROVIDER_SECRETS) {
                const char *s = streq(subdir, TLS_SUBDIR_CLIENT) ? c->tls.client.secret
                                : streq(subdir, TLS_SUBDIR_PEER) ? c->tls.peer.secret
                                                                 : c->tls.operator_client_secret;
                return isempty(s) ? NULL : xstrdup(s);
        }
        return xasprintf("%s-%s-tls", c->name, subdir);
}

char *render_tls_file(const etcd_cluster *c, const member_plan *m, const char *subdir,
                      const char *file)
{
        const char *dir = isempty(m->tls_dir) ? RENDER_STEADY_TLS_DIR : m->tls_dir;
        if (streq(file, "ca.crt") && !isempty(c->tls.ca_bundle_secret))
                subdir = TLS_SUBDIR_CA_BUNDLE;
        return xasprintf("%s/%s/%s", dir, subdir, file);
}

json_t *render_selector(const etcd_cluster *c, bool voters_only)
{
        json_t *s = json_object();
        json_object_set_new(s, LABEL_APP_INSTANCE, json_string(c->name));
        json_object_set_new(s, LABEL_CLUSTER, json_string(c->name));
        if (voters_only)
                json_object_set_new(s, LABEL_ROLE, json_string("voter"));
        return s;
}

json_t *render_client_selector(const etcd_cluster *c)
{
        return render_selector(c, true);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A copy of obj (a flat string map) with its keys in sorted order. */
static json_t *sorted_copy(json_t *obj)
{
        size_t n = json_object_size(obj), i = 0;
        const char **keys = xcalloc(n ? n : 1, sizeof(char *));
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v) keys[i++] = k;
        qsort(keys, n, sizeof(char *), cmp_str);
        json_t *out = json_object();
        for (i = 0; i < n; i++)
                json_object_set(out, keys[i], json_object_get(obj, keys[i]));
        free(keys);
        return out;
}

/* Add a user's map; keys under gitcd's own prefix ("gitcd.io/") are reserved and skipped. */
static void overlay(json_t *obj, const kv_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                if (strneq(l->items[i].key, GITCD_LABEL_PREFIX, strlen(GITCD_LABEL_PREFIX)))
                        continue;
                json_object_set_new(obj, l->items[i].key, json_string(l->items[i].value ?: ""));
        }
}

json_t *render_metadata(const etcd_cluster *c, const char *name, const char *component,
                        const member_plan *m, bool pod)
{
        json_t *labels = json_object();
        overlay(labels, &c->additional_labels);
        if (pod)
                overlay(labels, &c->pod_labels);
        _cleanup_free_ char *version =
            xasprintf("%d.%d.%d", c->ver.major, c->ver.minor, c->ver.patch);
        json_object_set_new(labels, LABEL_APP_NAME, json_string("etcd"));
        json_object_set_new(labels, LABEL_APP_INSTANCE, json_string(c->name));
        json_object_set_new(labels, LABEL_APP_MANAGED_BY, json_string(LABEL_MANAGED_BY_VALUE));
        json_object_set_new(labels, LABEL_APP_COMPONENT, json_string(component));
        json_object_set_new(labels, LABEL_APP_VERSION, json_string(version));
        json_object_set_new(labels, LABEL_CLUSTER, json_string(c->name));
        if (m) {
                json_object_set_new(labels, LABEL_MEMBER, json_string(m->name));
                json_object_set_new(labels, LABEL_ROLE,
                                    json_string(m->learner ? "learner" : "voter"));
        }

        json_t *annotations = json_object();
        overlay(annotations, &c->additional_annotations);
        if (pod)
                overlay(annotations, &c->pod_annotations);

        json_t *md = json_object();
        json_object_set_new(md, "name", json_string(name));
        json_object_set_new(md, "namespace", json_string(render_namespace(c)));
        json_object_set_new(md, "labels", sorted_copy(labels));
        if (json_object_size(annotations) > 0)
                json_object_set_new(md, "annotations", sorted_copy(annotations));
        json_decref(labels);
        json_decref(annotations);
        return md;
}

int render_url_port(const char *url, int fallback)
{
        if (isempty(url))
                return fallback;
        const char *host = strstr(url, "://");
        host = host ? host + 3 : url;
        const char *colon = strrchr(host, ':');
        if (!colon || strchr(colon, ']'))
                return fallback;
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || (*end && *end != '/') || port <= 0 || port > 65535)
                return fallback;
        return (int)port;
}

/*
 * A structural check of rendered Kubernetes objects, written from the API
 * reference of each kind gitcd renders: the fields the API server requires,
 * name and label syntax, and the references between objects (Service and
 * PodDisruptionBudget selectors match Pods, every claim a Pod mounts is
 * rendered, every mount names a volume). Problems are appended to a buffer,
 * one line each, so a test can print all of them.
 */
#pragma once

#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "api/spec.h"
#include "util/strbuf.h"

static inline bool k8s_dns1035_label(const char *s)
{
        return dns1123_label_valid(s) && s[0] >= 'a' && s[0] <= 'z';
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63; empty allowed when allow_empty. */
static inline bool k8s_label_value(const char *s, bool allow_empty)
{
        size_t n = strlen(s);
        if (n == 0)
                return allow_empty;
        if (n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i]))
                        return false;
        return true;
}

/* A qualified name: [prefix/]name, prefix a DNS subdomain. */
static inline bool k8s_qualified_name(const char *s)
{
        const char *slash = strchr(s, '/');
        if (!slash)
                return k8s_label_value(s, false);
        char prefix[254];
        size_t pl = (size_t)(slash - s);
        if (pl == 0 || pl >= sizeof(prefix))
                return false;
        memcpy(prefix, s, pl);
        prefix[pl] = '\0';
        return dns1123_subdomain_valid(prefix) && k8s_label_value(slash + 1, false);
}

#define K8S_FAIL(errs, obj, ...)                                                                   \
        do {                                                                                       \
                sb_printf(                                                                         \
                    errs, "%s %s: ", json_string_value(json_object_get(obj, "kind")) ?: "?",       \
                    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"))   \
                        ?: "?");                                                                   \
                sb_printf(errs, __VA_ARGS__);                                                      \
                sb_appendc(errs, '\n');                                                            \
        } while (0)

static inline json_t *k8s_get(json_t *v, const char *a, const char *b, const char *c)
{
        v = json_object_get(v, a);
        if (b)
                v = json_object_get(v, b);
        if (c)
                v = json_object_get(v, c);
        return v;
}

static inline void k8s_check_string_map(json_t *o, json_t *map, const char *what, bool values,
                                        strbuf *errs)
{
        if (!map)
                return;
        if (!json_is_object(map)) {
                K8S_FAIL(errs, o, "%s is not a map", what);
                return;
        }
        const char *k;
        json_t *v;
        json_object_foreach(map, k, v)
        {
                if (!k8s_qualified_name(k))
                        K8S_FAIL(errs, o, "%s key \"%s\" is not a qualified name", what, k);
                if (!json_is_string(v))
                        K8S_FAIL(errs, o, "%s \"%s\" is not a string", what, k);
                else if (values && !k8s_label_value(json_string_value(v), true))
                        K8S_FAIL(errs, o, "%s \"%s\" has an invalid value \"%s\"", what, k,
                                 json_string_value(v));
        }
}

static inline bool k8s_port_ok(json_t *p)
{
        return json_is_integer(p) && json_integer_value(p) > 0 && json_integer_value(p) < 65536;
}

static inline void k8s_check_pod(json_t *o, json_t *spec, strbuf *errs)
{
        json_t *ctrs = json_object_get(spec, "containers");
        if (!json_is_array(ctrs) || json_array_size(ctrs) == 0) {
                K8S_FAIL(errs, o, "spec.containers is empty");
                return;
        }
        const char *hostname = json_string_value(json_object_get(spec, "hostname"));
        if (hostname && !dns1123_label_valid(hostname))
                K8S_FAIL(errs, o, "spec.hostname \"%s\" is not a DNS label", hostname);
        const char *sub = json_string_value(json_object_get(spec, "subdomain"));
        if (sub && !dns1123_label_valid(sub))
                K8S_FAIL(errs, o, "spec.subdomain \"%s\" is not a DNS label", sub);
        const char *rp = json_string_value(json_object_get(spec, "restartPolicy"));
        if (rp && strcmp(rp, "Always") && strcmp(rp, "OnFailure") && strcmp(rp, "Never"))
                K8S_FAIL(errs, o, "spec.restartPolicy \"%s\" is invalid", rp);

        json_t *volumes = json_object_get(spec, "volumes");
        size_t i, j;
        json_t *v, *w;
        json_array_foreach(volumes, i, v)
        {
                const char *name = json_string_value(json_object_get(v, "name"));
                if (!name || !dns1123_label_valid(name))
                        K8S_FAIL(errs, o, "volume %zu has no valid name", i);
                json_array_foreach(volumes, j, w) if (j > i && name &&
                                                      json_equal(json_object_get(w, "name"),
                                                                 json_object_get(v, "name")))
                    K8S_FAIL(errs, o, "volume name \"%s\" is used twice", name);
                size_t sources = !!json_object_get(v, "persistentVolumeClaim") +
                                 !!json_object_get(v, "emptyDir") + !!json_object_get(v, "secret");
                if (sources != 1)
                        K8S_FAIL(errs, o, "volume \"%s\" has %zu sources", name ?: "?", sources);
                if (json_object_get(v, "secret") && !k8s_get(v, "secret", "secretName", NULL))
                        K8S_FAIL(errs, o, "secret volume \"%s\" has no secretName", name ?: "?");
        }

        json_t *c;
        json_array_foreach(ctrs, i, c)
        {
                const char *name = json_string_value(json_object_get(c, "name"));
                if (!name || !dns1123_label_valid(name))
                        K8S_FAIL(errs, o, "container %zu has no valid name", i);
                const char *image = json_string_value(json_object_get(c, "image"));
                if (!image || !*image || strchr(image, ' '))
                        K8S_FAIL(errs, o, "container %zu has no valid image", i);
                json_t *cmd = json_object_get(c, "command");
                if (!json_is_array(cmd) || json_array_size(cmd) == 0)
                        K8S_FAIL(errs, o, "container %zu has no command", i);
                json_array_foreach(cmd, j, v) if (!json_is_string(v))
                    K8S_FAIL(errs, o, "command word %zu is not a string", j);
                json_array_foreach(json_object_get(c, "env"), j, v)
                {
                        if (!json_is_string(json_object_get(v, "name")) ||
                            !json_is_string(json_object_get(v, "value")))
                                K8S_FAIL(errs, o, "env %zu needs a string name and value", j);
                }
                json_array_foreach(json_object_get(c, "ports"), j, v)
                {
                        if (!k8s_port_ok(json_object_get(v, "containerPort")))
                                K8S_FAIL(errs, o, "container port %zu is out of range", j);
                        const char *pn = json_string_value(json_object_get(v, "name"));
                        if (pn && (strlen(pn) > 15 || !k8s_dns1035_label(pn)))
                                K8S_FAIL(errs, o, "port name \"%s\" is invalid", pn);
                }
                json_t *probe = json_object_get(c, "readinessProbe");
                if (probe && !k8s_port_ok(k8s_get(probe, "httpGet", "port", NULL)))
                        K8S_FAIL(errs, o, "readinessProbe has no valid httpGet port");
                json_array_foreach(json_object_get(c, "volumeMounts"), j, v)
                {
                        const char *mp = json_string_value(json_object_get(v, "mountPath"));
                        if (!mp || mp[0] != '/')
                                K8S_FAIL(errs, o, "volumeMount %zu has no absolute path", j);
                        bool found = false;
                        size_t k;
                        json_array_foreach(volumes, k, w) found =
                            found ||
                            json_equal(json_object_get(w, "name"), json_object_get(v, "name"));
                        if (!found)
                                K8S_FAIL(errs, o, "volumeMount %zu names no volume", j);
                }
        }
}

/* One object on its own. */
static inline void k8s_check_object(json_t *o, strbuf *errs)
{
        static const char *const kinds[][2] = {
            {"v1", "Pod"},
            {"v1", "Service"},
            {"v1", "PersistentVolumeClaim"},
            {"policy/v1", "PodDisruptionBudget"},
            {"cert-manager.io/v1", "Certificate"},
        };
        const char *api = json_string_value(json_object_get(o, "apiVersion"));
        const char *kind = json_string_value(json_object_get(o, "kind"));
        bool known = false;
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                known = known ||
                        (api && kind && !strcmp(api, kinds[i][0]) && !strcmp(kind, kinds[i][1]));
        if (!known) {
                K8S_FAIL(errs, o, "unexpected apiVersion/kind %s/%s", api ?: "-", kind ?: "-");
                return;
        }
        json_t *md = json_object_get(o, "metadata");
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        bool svc = !strcmp(kind, "Service");
        if (!name || !(svc ? k8s_dns1035_label(name) : dns1123_subdomain_valid(name)))
                K8S_FAIL(errs, o, "metadata.name is not a valid %s name", kind);
        if (!ns || !dns1123_label_valid(ns))
                K8S_FAIL(errs, o, "metadata.namespace is missing or invalid");
        k8s_check_string_map(o, json_object_get(md, "labels"), "label", true, errs);
        k8s_check_string_map(o, json_object_get(md, "annotations"), "annotation", false, errs);
        json_t *spec = json_object_get(o, "spec");
        if (!json_is_object(spec)) {
                K8S_FAIL(errs, o, "spec is missing");
                return;
        }
        if (!strcmp(kind, "Pod")) {
                k8s_check_pod(o, spec, errs);
        } else if (!strcmp(kind, "PersistentVolumeClaim")) {
                json_t *am = json_object_get(spec, "accessModes");
                if (!json_is_array(am) || json_array_size(am) == 0)
                        K8S_FAIL(errs, o, "spec.accessModes is empty");
                if (!json_is_string(k8s_get(spec, "resources", "requests", "storage")))
                        K8S_FAIL(errs, o, "spec.resources.requests.storage is missing");
        } else if (svc) {
                json_t *ports = json_object_get(spec, "ports");
                if (!json_is_array(ports) || json_array_size(ports) == 0)
                        K8S_FAIL(errs, o, "spec.ports is empty");
                size_t i;
                json_t *p;
                json_array_foreach(ports, i, p)
                {
                        if (!k8s_port_ok(json_object_get(p, "port")))
                                K8S_FAIL(errs, o, "port %zu is out of range", i);
                        if (json_array_size(ports) > 1 && !json_object_get(p, "name"))
                                K8S_FAIL(errs, o, "port %zu needs a name", i);
                }
                json_t *sel = json_object_get(spec, "selector");
                if (!json_is_object(sel) || json_object_size(sel) == 0)
                        K8S_FAIL(errs, o, "spec.selector is empty");
                k8s_check_string_map(o, sel, "selector", true, errs);
        } else if (!strcmp(kind, "PodDisruptionBudget")) {
                json_t *mu = json_object_get(spec, "maxUnavailable");
                json_t *ma = json_object_get(spec, "minAvailable");
                if (!!mu == !!ma)
                        K8S_FAIL(errs, o, "exactly one of maxUnavailable/minAvailable is needed");
                if (mu && (!json_is_integer(mu) || json_integer_value(mu) < 0))
                        K8S_FAIL(errs, o, "maxUnavailable is not a non-negative integer");
                json_t *ml = k8s_get(spec, "selector", "matchLabels", NULL);
                if (!json_is_object(ml) || json_object_size(ml) == 0)
                        K8S_FAIL(errs, o, "spec.selector.matchLabels is empty");
        } else { /* Certificate */
                const char *secret = json_string_value(json_object_get(spec, "secretName"));
                if (!secret || !dns1123_subdomain_valid(secret))
                        K8S_FAIL(errs, o, "spec.secretName is missing or invalid");
                const char *issuer = json_string_value(k8s_get(spec, "issuerRef", "name", NULL));
                if (!issuer || !*issuer)
                        K8S_FAIL(errs, o, "spec.issuerRef.name is missing");
                if (!json_object_get(spec, "dnsNames") && !json_object_get(spec, "commonName"))
                        K8S_FAIL(errs, o, "neither dnsNames nor commonName is set");
        }
}

/* True when every key/value of selector is among labels. */
static inline bool k8s_selects(json_t *selector, json_t *labels)
{
        const char *k;
        json_t *v;
        json_object_foreach(selector, k,
                            v) if (!json_equal(v, json_object_get(labels, k))) return false;
        return json_object_size(selector) > 0;
}

/*
 * Objects together: unique kind/namespace/name, every Pod selected by some
 * Service and every voter by the client Service (when one is rendered),
 * every claim a Pod mounts rendered too.
 */
static inline void k8s_check_set(json_t *objs, strbuf *errs)
{
        size_t i, j;
        json_t *o, *p;
        json_array_foreach(objs, i, o)
        {
                k8s_check_object(o, errs);
                json_array_foreach(objs, j, p)
                {
                        if (j > i &&
                            json_equal(json_object_get(o, "kind"), json_object_get(p, "kind")) &&
                            json_equal(k8s_get(o, "metadata", "name", NULL),
                                       k8s_get(p, "metadata", "name", NULL)) &&
                            json_equal(k8s_get(o, "metadata", "namespace", NULL),
                                       k8s_get(p, "metadata", "namespace", NULL)))
                                K8S_FAIL(errs, o, "rendered twice");
                }
                if (strcmp(json_string_value(json_object_get(o, "kind")) ?: "", "Pod"))
                        continue;
                json_t *labels = k8s_get(o, "metadata", "labels", NULL);
                bool selected = false;
                json_array_foreach(objs, j, p)
                {
                        const char *kind = json_string_value(json_object_get(p, "kind")) ?: "";
                        json_t *sel = NULL;
                        if (!strcmp(kind, "Service"))
                                sel = k8s_get(p, "spec", "selector", NULL);
                        else if (!strcmp(kind, "PodDisruptionBudget"))
                                sel = k8s_get(p, "spec", "selector", "matchLabels");
                        else
                                continue;
                        bool match = k8s_selects(sel, labels);
                        selected = selected || (match && !strcmp(kind, "Service"));
                        /* Voters are selected by every Service and the budget. */
                        const char *role =
                            json_string_value(json_object_get(labels, "gitcd.io/role"));
                        if (role && !strcmp(role, "voter") && !match)
                                K8S_FAIL(errs, o, "voter not selected by %s %s", kind,
                                         json_string_value(k8s_get(p, "metadata", "name", NULL)));
                }
                if (!selected)
                        K8S_FAIL(errs, o, "no Service selects this Pod");
                json_array_foreach(k8s_get(o, "spec", "volumes", NULL), j, p)
                {
                        const char *claim = json_string_value(
                            k8s_get(p, "persistentVolumeClaim", "claimName", NULL));
                        if (!claim)
                                continue;
                        bool found = false;
                        size_t k;
                        json_t *q;
                        json_array_foreach(objs, k, q) found =
                            found ||
                            (!strcmp(json_string_value(json_object_get(q, "kind")) ?: "",
                                     "PersistentVolumeClaim") &&
                             !strcmp(json_string_value(k8s_get(q, "metadata", "name", NULL)) ?: "",
                                     claim));
                        if (!found)
                                K8S_FAIL(errs, o, "claim \"%s\" is not rendered", claim);
                }
        }
}

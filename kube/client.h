/*
 * gitcd's Kubernetes API client: JSON over HTTPS (libcurl), one connection
 * reused across calls (HTTP/2 when the server offers it over TLS).
 *
 * Objects are jansson values. Writes use server-side apply with the field
 * manager "gitcd" and never force: a field owned by another manager makes
 * the apply fail with a message naming that manager and the fields.
 *
 * Errors: every call returns 0 or a negative errno, and
 * kube_client_last_error() holds a sentence for a person (the verb, the
 * resource, the namespace and the server's reason). Mapping of HTTP statuses:
 *   401/403 -EACCES, 404 -ENOENT, 409 -EEXIST (AlreadyExists) or -EBUSY
 *   (apply conflict, or an optimistic-lock conflict), 410 -ESTALE (resource
 *   version too old: relist), 400/422 -EINVAL, other 4xx -EPROTO,
 *   5xx/429/connection errors after retries -EIO.
 * Requests that fail with 429 (Retry-After honoured), 5xx or a lost
 * connection are retried with backoff (100 ms doubling, capped at 2 s,
 * 5 tries in all); other 4xx are never retried. Tokens and keys never appear
 * in a message.
 *
 * Threads: a client is not thread-safe; use one per thread.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube/kubeconfig.h"

typedef struct kube_client kube_client;

/* A resource type: group ("" for core), version, plural resource name. */
typedef struct kube_gvr {
        const char *group;
        const char *version;
        const char *resource;
        bool namespaced;
} kube_gvr;

/* ---- pure functions: no I/O ---- */

/*
 * The resource type of a kind gitcd renders ("v1"/"Pod",
 * "policy/v1"/"PodDisruptionBudget", "cert-manager.io/v1"/"Certificate",
 * ...). -ENOENT for a kind gitcd does not know.
 */
int kube_gvr_for_kind(const char *api_version, const char *kind, kube_gvr *ret_gvr);
/* "/api/v1" or "/apis/G/V". */
char *kube_group_version_path(const char *group, const char *version);
/*
 * The collection URL path of a resource type ("/api/v1/namespaces/NS/pods",
 * "/apis/policy/v1/poddisruptionbudgets" when ns is NULL), with "/NAME"
 * appended when name is not NULL. Names and namespaces are not escaped:
 * Kubernetes names are DNS labels; -EINVAL for anything else.
 */
int kube_resource_path(const kube_gvr *gvr, const char *ns, const char *name, char **ret_path);
/*
 * The request of a server-side apply of obj: the URL path with its query
 * (fieldManager, force, dryRun) and the body (compact JSON, which is valid
 * YAML for application/apply-patch+yaml). The namespace comes from
 * obj.metadata.namespace, else default_ns for namespaced kinds. -EINVAL
 * (with *ret_error) for an object without apiVersion, kind or metadata.name,
 * or of an unknown kind.
 */
int kube_apply_request(const json_t *obj, const char *default_ns, const char *field_manager,
                       bool force, bool dry_run, char **ret_path, char **ret_body,
                       char **ret_error);
/*
 * Turn a failed response into a message (and its negative errno): status is
 * the HTTP status, body the server's Status object (may be NULL or not
 * JSON), verb/resource/ns say what was attempted ("patch", "pods", "db").
 */
int kube_status_error(long status, const char *body, const char *verb, const char *resource,
                      const char *ns, char **ret_message);

/* ---- the client ---- */

/*
 * Create a client from a configuration (copied). The token file, if any, is
 * read now. No connection is made until the first call.
 */
int kube_client_new(const kube_config *cfg, kube_client **ret_client, char **ret_error);
void kube_client_free(kube_client *c);
/* The message for the last failure; "" when the last call succeeded. */
const char *kube_client_last_error(const kube_client *c);
/* The HTTP version the last response came over (2 for HTTP/2, 1 for 1.x, 0 none yet). */
int kube_client_http_version(const kube_client *c);
/* The default namespace of the configuration. */
const char *kube_client_namespace(const kube_client *c);

/* GET an absolute URL path ("/api/v1/namespaces/db/pods/x"). -ENOENT when it does not exist. */
int kube_get_path(kube_client *c, const char *path, json_t **ret_obj);
/* GET one object. ns NULL for cluster-scoped kinds. */
int kube_get(kube_client *c, const kube_gvr *gvr, const char *ns, const char *name,
             json_t **ret_obj);
/*
 * LIST a resource type in a namespace (NULL = all namespaces or a
 * cluster-scoped type), optionally filtered by a label selector
 * ("app=etcd,gitcd.io/cluster=a"). Returns the items array and the list's
 * resourceVersion (to start a watch from).
 */
int kube_list(kube_client *c, const kube_gvr *gvr, const char *ns, const char *label_selector,
              json_t **ret_items, char **ret_resource_version);
/*
 * Any other request: method ("POST", "PUT", "PATCH", "DELETE", "GET") on an
 * absolute path with its query, with an optional JSON body sent as
 * content_type (NULL = "application/json"; "application/merge-patch+json"
 * for a merge patch). verb, resource and ns only word the error message
 * ("patch", "pods/status \"a-0\"", "db"). ret_obj (may be NULL) gets the
 * response body. Same retries and error mapping as every other call.
 */
int kube_request(kube_client *c, const char *method, const char *path, const char *content_type,
                 const json_t *body, const char *verb, const char *resource, const char *ns,
                 json_t **ret_obj);
/*
 * A plain-text GET (Accept: text/plain, application/json: the API server
 * refuses a request that does not accept its JSON errors), for subresources that answer
 * text, such as a Pod's log ("/api/v1/namespaces/NS/pods/NAME/log?..."):
 * at most max_bytes are read, a longer answer is cut there (*ret_cut true,
 * the rest never read), and the call ends after timeout_ms (0 = the
 * client's 30 s). *ret_text is NUL-ended; ret_len (may be NULL) gets its
 * length, as the text may hold NUL bytes. The same credentials, TLS,
 * retries and error mapping as every other call; verb, resource and ns
 * only word the error message ("get", "pods/log \"a-0\"", "db").
 */
int kube_get_text(kube_client *c, const char *path, size_t max_bytes, int timeout_ms,
                  const char *verb, const char *resource, const char *ns, char **ret_text,
                  size_t *ret_len, bool *ret_cut);
/*
 * Server-side apply of obj with the given field manager (NULL = "gitcd").
 * force=false keeps other managers' fields: a conflict is -EBUSY with a
 * message naming the manager and the fields. dry_run asks the server to
 * validate and return the result without persisting. ret_obj (may be NULL)
 * gets the object the server returned.
 */
int kube_apply(kube_client *c, const json_t *obj, const char *field_manager, bool force,
               bool dry_run, json_t **ret_obj);
/*
 * DELETE one object with propagationPolicy ("Foreground", "Background",
 * "Orphan"; NULL = server default). -ENOENT when it is already gone.
 */
int kube_delete(kube_client *c, const kube_gvr *gvr, const char *ns, const char *name,
                const char *propagation);

/*
 * Watch events. type is "ADDED", "MODIFIED", "DELETED" or "BOOKMARK"; object
 * is borrowed. Return 0 to continue, anything else to stop the watch (that
 * value is then returned by kube_watch).
 */
typedef int (*kube_watch_fn)(const char *type, const json_t *object, void *userdata);
/*
 * Watch a resource type from resource_version (the one kube_list returned)
 * for at most timeout_seconds (the server ends the stream then; 0 = the
 * server default). Returns 0 when the stream ended normally: watch again
 * from the last event's metadata.resourceVersion. -ESTALE (410 Gone) means
 * the version is too old: list again and watch from the new version.
 * -EIO when the connection broke (after retries if no event had arrived
 * yet): watch again from the last event's version. Watches are not
 * paginated and lists are not either (no limit/continue): gitcd lists
 * its own labelled objects in one namespace.
 */
int kube_watch(kube_client *c, const kube_gvr *gvr, const char *ns, const char *label_selector,
               const char *resource_version, int timeout_seconds, kube_watch_fn fn, void *userdata);

/*
 * The same watch, ended by us after timeout_ms (milliseconds; the server
 * is asked to end it at the next whole second) or as soon as the client's
 * interrupt (kube_client_set_interrupt) says so: 0 when the time ran out,
 * the interrupt ended it or the server did, the callback's value when it
 * stopped the watch, and the errors of kube_watch. For "wait until
 * something changes or this much time passes" loops.
 */
/*
 * What ends a kube_watch_for early: asked while the watch waits, about
 * every second (libcurl's progress callback) and at once on data; true ends
 * it. NULL: none.
 */
void kube_client_set_interrupt(kube_client *c, bool (*interrupt)(void));
int kube_watch_for(kube_client *c, const kube_gvr *gvr, const char *ns, const char *label_selector,
                   const char *resource_version, int timeout_ms, kube_watch_fn fn, void *userdata);

/* ---- discovery ---- */

/*
 * The version of group ("" for core) that the server prefers among those
 * offering resource, e.g. "v1" for ("policy", "poddisruptionbudgets") on a
 * server with policy/v1, "v1beta1" on an older one. Discovery documents are
 * fetched once per client and cached. -ENOENT when no version offers it.
 */
int kube_preferred_version(kube_client *c, const char *group, const char *resource,
                           char **ret_version);
/* 1 when group/version offers resource, 0 when not, negative on error. */
int kube_has_resource(kube_client *c, const char *group, const char *version, const char *resource);

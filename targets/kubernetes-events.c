/*
 * The Kubernetes target's events: wait_event watches gitcd's Pods in the
 * namespaces the target has touched (one: that one; several: all) from the
 * last resourceVersion, on a client of its own under watch_lock, and records
 * the clusters whose Pods changed for take_events. -ESTALE relists; on
 * -EACCES/-EIO it sleeps out the timeout, as every pass observes anyway.
 */

#include <pthread.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "targets/locked.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/kubernetes-internal.h"

#define WATCH_MIN_MS 50 /* shorter waits just sleep */

int kt_tick(target *t)
{
        (void)t;
        return 0;
}

/* The events list is shared: record under the shared lock (let go of around the watch). */
static void record_event(kubernetes_target *kt, char *id)
{
        target_blocking_end();
        if (id)
                target_event_set_add(&kt->events, id);
        else
                kt->events_unknown = true;
        target_blocking_begin();
}

static int on_watch_event(const char *type, const json_t *object, void *userdata)
{
        kubernetes_target *kt = userdata;
        const char *rv = json_string_value(json_object_get(metadata(object), "resourceVersion"));
        if (rv)
                str_assign(&kt->watch_rv, xstrdup(rv));
        if (streq_ptr(type, "BOOKMARK"))
                return 0;
        const char *ns = json_string_value(json_object_get(metadata(object), "namespace"));
        const char *cluster = json_string_value(
            json_object_get(json_object_get(metadata(object), "labels"), LABEL_CLUSTER));
        record_event(kt, ns && cluster ? xasprintf("%s/%s", ns, cluster) : NULL);
        return 1;
}

/* The clusters whose Pods had watch events; -ESTALE when the watch started over (all). */
int kt_take_events(target *t, char ***ret_clusters, size_t *ret_n)
{
        kubernetes_target *kt = KT(t);
        target_event_set_take(&kt->events, ret_clusters, ret_n);
        if (kt->events_unknown) {
                kt->events_unknown = false;
                return -ESTALE;
        }
        return 0;
}

/* Sleep out a wait outside the shared lock. */
static void wait_sleep(int64_t ms)
{
        target_blocking_begin();
        (void)target_sleep(ms);
        target_blocking_end();
}

/* With watch_lock held and the shared lock let go; the scope is a copy. */
static int watch_pods(kubernetes_target *kt, const char *scope, int64_t deadline)
{
        if (!streq_ptr(kt->watch_scope, scope)) {
                str_assign(&kt->watch_scope, xstrdup(scope));
                str_assign(&kt->watch_rv, NULL);
        }
        const char *ns = *scope ? scope : NULL;
        _cleanup_free_ char *sel = xasprintf("%s=%s", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE);
        int r = 0;
        if (!kt->watch_rv) {
                json_t *items = NULL;
                char *rv = NULL;
                r = kube_list(kt->wc, &GVR_PODS, ns, sel, &items, &rv);
                json_decref(items);
                if (r >= 0)
                        kt->watch_rv = rv;
        }
        while (r >= 0) {
                int64_t left = deadline - now_mono_ms();
                if (left < WATCH_MIN_MS) {
                        (void)target_sleep(left);
                        return 0;
                }
                if (target_wake_take())
                        return 0;
                r = kube_watch_for(kt->wc, &GVR_PODS, ns, sel, kt->watch_rv, (int)left,
                                   on_watch_event, kt);
                if (r > 0)
                        return 1;
                if (r == -ESTALE) {
                        /* Too old: list again; something may have changed meanwhile. */
                        str_assign(&kt->watch_rv, NULL);
                        record_event(kt, NULL);
                        return 1;
                }
        }
        /* -EACCES, -EIO: the next reconciler pass observes the world anyway. */
        log_debug("kubernetes target: cannot watch Pods: %s", kube_client_last_error(kt->wc));
        (void)target_sleep(deadline - now_mono_ms());
        return 0;
}

int kt_wait_event(target *t, int timeout_ms)
{
        kubernetes_target *kt = KT(t);
        int64_t deadline = now_mono_ms() + (timeout_ms < 0 ? 60000 : timeout_ms);
        if (kt->n_namespaces == 0 || timeout_ms < WATCH_MIN_MS) {
                wait_sleep(timeout_ms < 0 ? 1000 : timeout_ms);
                return 0;
        }
        _cleanup_free_ char *scope = xstrdup(kt->n_namespaces == 1 ? kt->namespaces[0] : "");
        target_blocking_begin();
        pthread_mutex_lock(&kt->watch_lock);
        int r = watch_pods(kt, scope, deadline);
        pthread_mutex_unlock(&kt->watch_lock);
        target_blocking_end();
        return r;
}

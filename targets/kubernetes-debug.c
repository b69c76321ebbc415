/*
 * The Kubernetes target's operations for an incident bundle
 * (target_debug_ops): a member's log, read through the API server's Pod
 * log subresource (GET .../pods/NAME/log, which the API server proxies to
 * the kubelet of the Pod's node), never by reaching a node directly.
 *
 * The Pod is the member's name in the cluster's namespace, and it is read
 * only when it is gitcd's Pod of that member (its labels say so): a Pod of
 * the same name that something else made is not ours to read. The log is
 * the container render/ names RENDER_ETCD_CONTAINER. A Pod on no node
 * has no log (the API server would answer an empty one): -ENOENT, said.
 *
 * Bounds: the kubelet is asked for the last lines (tailLines) and at most
 * KT_LOG_LIMIT_FACTOR times max_bytes of them (limitBytes, which the
 * kubelet applies from the first of those lines); the client reads no
 * more than that whatever the server sends, for at most KT_LOG_TIMEOUT_MS
 * per attempt; the newest max_bytes are kept, cut at a line start. etcd's
 * log lines are a few hundred bytes, so the lines asked for rarely pass
 * limitBytes; when they do, the newest lines are the ones lost, and the
 * text says the kubelet cut it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "render/layout.h"
#include "util/strbuf.h"
#include "util/xalloc.h"
#include "targets/kubernetes-internal.h"

#define KT_LOG_TIMEOUT_MS   10000
#define KT_LOG_LIMIT_FACTOR 4
#define KT_LOG_LINE_GUESS   100 /* bytes: tailLines = max_bytes / this */
#define KT_LOG_MIN_LINES    100

static int kt_member_logs(target *t, const etcd_cluster *c, const char *member, size_t max_bytes,
                          char **ret_text, char **ret_source)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        _cleanup_free_ char *pod_path = NULL;
        if (max_bytes == 0 || kube_resource_path(&GVR_PODS, ns, member, &pod_path) < 0)
                return target_fail(t, -EINVAL, "member %s: not a Kubernetes name", member);

        json_t *pod = NULL;
        int r = kube_get(kt->kc, &GVR_PODS, ns, member, &pod);
        if (r == -ENOENT)
                return target_fail(t, r, "%s/%s: no Pod of member %s in namespace %s",
                                   c->namespace_, c->name, member, ns);
        if (r < 0)
                return kube_fail(kt, r);
        bool ours = managed_by_gitcd(pod) && streq_ptr(obj_label(pod, LABEL_MEMBER), member) &&
                    streq_ptr(obj_label(pod, LABEL_CLUSTER), c->name);
        bool placed =
            !isempty(json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName")));
        json_decref(pod);
        if (!ours)
                return target_fail(t, -ENOENT,
                                   "%s/%s: Pod %s in namespace %s is not gitcd's Pod of member %s",
                                   c->namespace_, c->name, member, ns, member);
        /* the API server answers an empty log for it: say why there is none */
        if (!placed)
                return target_fail(t, -ENOENT,
                                   "%s/%s: Pod %s in namespace %s is on no node yet: it has no log",
                                   c->namespace_, c->name, member, ns);

        size_t limit = max_bytes * KT_LOG_LIMIT_FACTOR;
        size_t lines = MAX(max_bytes / KT_LOG_LINE_GUESS, (size_t)KT_LOG_MIN_LINES);
        _cleanup_free_ char *path = xasprintf("%s/log?container=%s&tailLines=%zu&limitBytes=%zu",
                                              pod_path, RENDER_ETCD_CONTAINER, lines, limit);
        _cleanup_free_ char *what = xasprintf("pods/log \"%s\"", member);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        bool cut = false;
        r = kube_get_text(kt->kc, path, limit, KT_LOG_TIMEOUT_MS, "get", what, ns, &text, &len,
                          &cut);
        if (r < 0)
                return kube_fail(kt, r);
        /* the bundle writes it as a string: a NUL byte in the log becomes a space */
        for (size_t i = 0; i < len; i++)
                if (text[i] == '\0')
                        text[i] = ' ';
        *ret_text = len <= max_bytes ? xstrndup(text, len) : target_text_tail(text, len, max_bytes);
        *ret_source = xasprintf("the log of container %s of Pod %s in namespace %s (tailLines=%zu, "
                                "limitBytes=%zu%s)",
                                RENDER_ETCD_CONTAINER, member, ns, lines, limit,
                                cut || len >= limit ? ", cut there" : "");
        return 0;
}

const target_debug_ops kt_debug_ops = {
    .member_logs = kt_member_logs,
};

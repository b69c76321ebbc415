/*
 * Rendered objects fitted to the server's API versions, through the
 * client's cached discovery (see kube/adapt.h). Only the version changes:
 * gitcd renders no field whose meaning differs between the versions it
 * maps.
 */
#include <errno.h>
#include <string.h>

#include "kube/adapt.h"
#include "util/macro.h"
#include "util/xalloc.h"

int kube_adapt_object(kube_client *c, json_t *obj, char **ret_error)
{
        const char *api_version = json_string_value(json_object_get(obj, "apiVersion"));
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        _cleanup_free_ char *group = NULL, *version = NULL;
        kube_gvr gvr;
        int r;

        if (!api_version || !kind) {
                if (ret_error)
                        *ret_error = xstrdup("object without apiVersion or kind");
                return -EINVAL;
        }
        const char *slash = strchr(api_version, '/');
        if (!slash)
                return 0; /* the core group: v1 everywhere */
        if (kube_gvr_for_kind(api_version, kind, &gvr) < 0) {
                if (ret_error)
                        *ret_error =
                            xasprintf("kind %s %s is not one gitcd knows", api_version, kind);
                return -ENOENT;
        }
        group = xstrndup(api_version, (size_t)(slash - api_version));
        r = kube_preferred_version(c, group, gvr.resource, &version);
        if (r == -ENOENT) {
                if (ret_error)
                        *ret_error = xasprintf("the Kubernetes API server does not serve %s in "
                                               "group %s (needed for %s \"%s\")",
                                               gvr.resource, group, kind,
                                               json_string_value(json_object_get(
                                                   json_object_get(obj, "metadata"), "name")));
                return r;
        }
        if (r < 0) {
                if (ret_error)
                        *ret_error = xstrdup(kube_client_last_error(c));
                return r;
        }
        if (!streq(version, slash + 1)) {
                _cleanup_free_ char *v = xasprintf("%s/%s", group, version);
                json_object_set_new(obj, "apiVersion", json_string(v));
        }
        return 0;
}

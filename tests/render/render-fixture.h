/*
 * Helpers for the render tests: hand-built models (as the parser would fill
 * them, defaults included) and a dotted-path lookup into rendered JSON.
 */
#pragma once

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "render/render.h"
#include "api/model.h"
#include "util/xalloc.h"

/* A native cluster with the parser's defaults: version 3.5.16, 1Gi on disk, no TLS. */
static inline etcd_cluster *fixture_cluster(const char *name, int replicas)
{
        etcd_cluster *c = etcd_cluster_new();
        c->api_version = xstrdup(GITCD_API_VERSION);
        c->kind = xstrdup("EtcdCluster");
        c->name = xstrdup(name);
        c->namespace_ = xstrdup("prod");
        c->replicas = replicas;
        c->version = xstrdup("3.5.16");
        c->ver = (semver){3, 5, 16};
        c->repository = xstrdup(GITCD_DEFAULT_REPOSITORY);
        c->storage.size = xstrdup("10Gi");
        c->storage.size_bytes = 10LL << 30;
        return c;
}

/*
 * Look up "a.b.0.c" in a JSON value: object keys, or array indexes for
 * all-digit components. NULL when absent.
 */
static inline json_t *jget(json_t *v, const char *path)
{
        char *copy = xstrdup(path), *save = NULL;
        for (char *tok = strtok_r(copy, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save)) {
                if (json_is_array(v) && tok[0] >= '0' && tok[0] <= '9')
                        v = json_array_get(v, (size_t)strtoul(tok, NULL, 10));
                else
                        v = json_object_get(v, tok);
        }
        free(copy);
        return v;
}

static inline const char *jstr(json_t *v, const char *path)
{
        return json_string_value(jget(v, path));
}

/* The first object of a kind (and name, when given) in a rendered array. */
static inline json_t *find_object(json_t *objs, const char *kind, const char *name)
{
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                if (strcmp(jstr(o, "kind"), kind) == 0 &&
                    (!name || strcmp(jstr(o, "metadata.name"), name) == 0))
                        return o;
        }
        return NULL;
}

static inline size_t count_kind(json_t *objs, const char *kind)
{
        size_t i, n = 0;
        json_t *o;
        json_array_foreach(objs, i, o) if (strcmp(jstr(o, "kind"), kind) == 0) n++;
        return n;
}

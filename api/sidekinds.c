/*
 * The snapshot kinds other operators keep in documents of their own, next
 * to the EtcdCluster they name: improbable's EtcdBackupSchedule and
 * EtcdBackup (etcd.improbable.io/v1alpha1) and cozystack's EtcdSnapshot
 * (etcd-operator.cozystack.io/v1alpha2).
 *
 * Design: such a document is read while loading (side_kind_read) and
 * joined onto the cluster it names once every document was read
 * (side_kinds_attach), so the order of documents and files does not
 * matter. What maps onto the model becomes part of the cluster, exactly as
 * if spec.snapshots had been written in it (so plan, normalize and the
 * scheduler see one thing); what does not map is an error at the document,
 * never a silent skip:
 *
 *   EtcdBackupSchedule  spec.schedule -> spec.snapshots.schedule;
 *                       spec.backupSpec.destination.objectURLTemplate
 *                       "s3://BUCKET/PREFIX/{{...}}" -> an s3 destination
 *                       (the bucket and the prefix before the first
 *                       template field; gitcd names the objects; S3
 *                       credentials from gitcd's environment, since the
 *                       improbable API has no field for them);
 *                       spec.backupSpec.source.clusterURL names the cluster
 *                       (its host's first label; the second, when there is
 *                       one, must be the document's namespace).
 *                       gs:// is refused (gitcd has no GCS client).
 *   EtcdRestore         (coreos) spec.etcdCluster.name names the cluster;
 *                       backupStorageType S3 with s3.{path "BUCKET/KEY",
 *                       awsSecret, endpoint, forcePathStyle} ->
 *                       spec.bootstrap.restore.source.s3 (the cluster is
 *                       created from it; ABS, GCS and OSS are refused).
 *   EtcdRestore         (improbable) spec.clusterTemplate.clusterName names
 *                       the cluster (its EtcdCluster document must be in
 *                       Git; clusterTemplate.spec is not read, a warning);
 *                       spec.source.objectURL "s3://BUCKET/KEY" with
 *                       gocloud.dev's query (endpoint, region,
 *                       s3ForcePathStyle, disableSSL) ->
 *                       spec.bootstrap.restore.source.s3 (credentials from
 *                       gitcd's environment); gs:// is refused. The same
 *                       query is read in objectURLTemplate.
 *   EtcdBackup          (improbable) one snapshot: spec.source and
 *                       spec.destination as in a schedule's backupSpec.
 *   EtcdSnapshot        (cozystack) one snapshot of spec.clusterRef.name to
 *                       spec.destination.s3 or .pvc {claimName, subPath}
 *                       (as spec.snapshots.destination: pvc is a folder in
 *                       the claim, written by the Kubernetes target, and
 *                       other targets refuse it, spec_refuse_for_target),
 *                       or without a destination to the cluster's
 *                       spec.snapshots destination.
 *
 * The one-off kinds are not spec: they join the cluster as declared
 * snapshots (etcd_cluster.declared), outside the normalized form and its
 * hash, each identified by kind, namespace, name and a hash of what it asks;
 * the driver records each as a request that `gitcd run` takes once
 * (state/snapshots.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

void side_list_release(side_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                side_doc *s = &l->items[i];
                free(s->kind);
                free(s->name);
                free(s->namespace_);
                free(s->file);
                free(s->cluster);
                free(s->schedule);
                storage_location_release(&s->destination);
        }
        free(l->items);
        *l = (side_list){0};
}

static const char *str_of(const ynode *n)
{
        return n && n->kind == YNODE_SCALAR && !ynode_is_null(n) ? n->str : NULL;
}

/* "http://main.prod.svc:2379" -> "main", namespace "prod". */
static int cluster_of_url(const char *url, char **ret_name, char **ret_ns)
{
        const char *p = strstr(url, "://");
        p = p ? p + 3 : url;
        size_t host_len = strcspn(p, ":/");
        if (host_len == 0)
                return -EINVAL;
        _cleanup_free_ char *host = xstrndup(p, host_len);
        char *dot = strchr(host, '.');
        if (dot)
                *dot = '\0';
        if (!dns1123_label_valid(host))
                return -EINVAL;
        *ret_name = xstrdup(host);
        *ret_ns = NULL;
        if (dot) {
                char *ns = dot + 1;
                ns[strcspn(ns, ".")] = '\0';
                if (*ns && !streq(ns, "svc"))
                        *ret_ns = xstrdup(ns);
        }
        return 0;
}

/* %XX escapes of a URL query value decoded; NULL when one is malformed. */
static char *url_unescape(const char *s, size_t n)
{
        char *out = xmalloc(n + 1), *o = out;
        for (size_t i = 0; i < n; i++) {
                if (s[i] != '%') {
                        *o++ = s[i] == '+' ? ' ' : s[i];
                        continue;
                }
                if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) ||
                    !isxdigit((unsigned char)s[i + 2])) {
                        free(out);
                        return NULL;
                }
                char hex[3] = {s[i + 1], s[i + 2], '\0'};
                long v = strtol(hex, NULL, 16);
                if (v == 0) { /* a NUL inside a value */
                        free(out);
                        return NULL;
                }
                *o++ = (char)v;
                i += 2;
        }
        *o = '\0';
        return out;
}

/*
 * The query of an improbable object URL (gocloud.dev's s3blob options:
 * endpoint, region, disableSSL, s3ForcePathStyle) onto an s3 location.
 * Returns false (an error at `at`) for an option gitcd does not know.
 */
static bool read_s3_query(reader *r, const ynode *at, const char *field, const char *query,
                          s3_location *out)
{
        bool plain_http = false;
        while (query && *query) {
                size_t len = strcspn(query, "&");
                const char *eq = memchr(query, '=', len);
                size_t klen = eq ? (size_t)(eq - query) : len;
                _cleanup_free_ char *key = xstrndup(query, klen);
                _cleanup_free_ char *value =
                    eq ? url_unescape(eq + 1, len - klen - 1) : xstrdup("");
                if (!value) {
                        rd_error(r, at, "%s: the value of \"%s\" is not a valid URL escape", field,
                                 key);
                        return false;
                }
                if (streq(key, "endpoint") && *value) {
                        free(out->endpoint);
                        out->endpoint = TAKE_PTR(value);
                } else if (streq(key, "region") && *value) {
                        free(out->region);
                        out->region = TAKE_PTR(value);
                } else if (streq(key, "s3ForcePathStyle")) {
                        out->force_path_style = streq(value, "true") || streq(value, "1");
                } else if (streq(key, "disableSSL")) {
                        plain_http = streq(value, "true") || streq(value, "1");
                } else if (*key) {
                        rd_error(r, at,
                                 "%s: query parameter \"%s\" is not supported (gitcd reads "
                                 "endpoint, region, s3ForcePathStyle and disableSSL)",
                                 field, key);
                        return false;
                }
                query += len;
                if (*query == '&')
                        query++;
        }
        if (plain_http && out->endpoint && !strstr(out->endpoint, "://")) {
                char *e = xasprintf("http://%s", out->endpoint);
                free(out->endpoint);
                out->endpoint = e;
        }
        return true;
}

/*
 * improbable's EtcdBackupSpec (the spec of an EtcdBackup, the backupSpec of
 * an EtcdBackupSchedule) at bs, spelt `path` in messages: source.clusterURL
 * names the cluster, destination.objectURLTemplate the S3 bucket and prefix.
 */
static void read_backup_spec(reader *r, const ynode *bs, const char *path, side_doc *s)
{
        const ynode *src = NULL, *dst = NULL;
        static const char *const kb[] = {"source", "destination", NULL};
        rd_keys(r, bs, path, kb, NULL);
        _cleanup_free_ char *psrc = rd_join(path, "source");
        _cleanup_free_ char *pdst = rd_join(path, "destination");
        if (rd_map(r, bs, path, "source", NULL, &src)) {
                static const char *const k[] = {"clusterURL", NULL};
                rd_keys(r, src, psrc, k, NULL);
                _cleanup_free_ char *url = NULL, *ns = NULL;
                const ynode *at = rd_get(src, "clusterURL", NULL);
                if (rd_string(r, src, psrc, "clusterURL", NULL, &url)) {
                        if (cluster_of_url(url, &s->cluster, &ns) < 0)
                                rd_error(r, at,
                                         "%s.clusterURL: \"%s\" does not name a cluster "
                                         "(http://NAME.NAMESPACE.svc:2379)",
                                         psrc, url);
                        else if (ns && !streq(ns, s->namespace_))
                                rd_error(r, at,
                                         "%s.clusterURL: \"%s\" is a cluster of namespace %s; "
                                         "the %s is in %s",
                                         psrc, url, ns, s->kind, s->namespace_);
                        s->cluster_line = at->line;
                        s->cluster_col = at->col;
                } else if (!at) {
                        rd_error(r, src, "%s.clusterURL is required", psrc);
                }
        } else if (!rd_get(bs, "source", NULL)) {
                rd_error(r, bs, "%s is required", psrc);
        }
        if (!rd_map(r, bs, path, "destination", NULL, &dst)) {
                if (!rd_get(bs, "destination", NULL))
                        rd_error(r, bs, "%s is required", pdst);
                return;
        }
        static const char *const kd[] = {"objectURLTemplate", NULL};
        rd_keys(r, dst, pdst, kd, NULL);
        const ynode *at = rd_get(dst, "objectURLTemplate", NULL);
        _cleanup_free_ char *url = NULL;
        if (!rd_string(r, dst, pdst, "objectURLTemplate", NULL, &url)) {
                if (!at)
                        rd_error(r, dst, "%s.objectURLTemplate is required", pdst);
                return;
        }
        if (strneq(url, "gs://", 5)) {
                rd_error(r, at,
                         "%s.objectURLTemplate: \"%s\": Google Cloud Storage is not supported; "
                         "gitcd stores snapshots in S3-compatible storage (s3://BUCKET/PREFIX) or "
                         "a local folder (spec.snapshots in the cluster)",
                         pdst, url);
                return;
        }
        if (!strneq(url, "s3://", 5)) {
                rd_error(r, at, "%s.objectURLTemplate: \"%s\" is not an s3:// URL", pdst, url);
                return;
        }
        const char *bucket = url + 5;
        size_t blen = strcspn(bucket, "/?");
        if (blen == 0 || memchr(bucket, '{', blen)) {
                rd_error(r, at, "%s.objectURLTemplate: \"%s\" names no bucket", pdst, url);
                return;
        }
        /* the prefix: the path before the first template field, up to its last '/' */
        const char *p = bucket[blen] == '/' ? bucket + blen + 1 : bucket + blen;
        size_t plen = strcspn(p, "{?");
        while (plen > 0 && p[plen - 1] != '/')
                plen--;
        while (plen > 0 && p[plen - 1] == '/')
                plen--;
        const char *q = strchr(bucket, '?');
        _cleanup_free_ char *field = rd_join(pdst, "objectURLTemplate");
        if (q && !read_s3_query(r, at, field, q + 1, &s->destination.s3))
                return;
        s->destination.kind = DEST_S3;
        s->destination.s3.bucket = xstrndup(bucket, blen);
        s->destination.s3.key = plen ? xstrndup(p, plen) : NULL;
}

static void read_backup_schedule(reader *r, const ynode *root, side_doc *s)
{
        const ynode *spec = NULL, *bs = NULL;
        if (!rd_map(r, root, "", "spec", NULL, &spec)) {
                rd_error(r, root, "EtcdBackupSchedule: spec is required");
                return;
        }
        static const char *const ks[] = {"schedule", "backupSpec", NULL};
        rd_keys(r, spec, "spec", ks, NULL);
        if (rd_string(r, spec, "spec", "schedule", NULL, &s->schedule)) {
                _cleanup_free_ char *why = NULL;
                if (cron_check(s->schedule, &why) < 0)
                        rd_error(r, rd_get(spec, "schedule", NULL), "spec.schedule: %s", why);
        } else if (!rd_get(spec, "schedule", NULL)) {
                rd_error(r, spec, "spec.schedule is required");
        }
        if (rd_map(r, spec, "spec", "backupSpec", NULL, &bs))
                read_backup_spec(r, bs, "spec.backupSpec", s);
        else if (!rd_get(spec, "backupSpec", NULL))
                rd_error(r, spec, "spec.backupSpec is required");
}

/* improbable EtcdBackup: one snapshot, now (spec: an EtcdBackupSpec). */
static void read_backup(reader *r, const ynode *root, side_doc *s)
{
        const ynode *spec = NULL;
        if (rd_map(r, root, "", "spec", NULL, &spec))
                read_backup_spec(r, spec, "spec", s);
        else
                rd_error(r, root, "EtcdBackup: spec is required");
}

/*
 * cozystack EtcdSnapshot: one snapshot of spec.clusterRef.name to
 * spec.destination (s3 or pvc, read as spec.snapshots.destination; absent:
 * the cluster's spec.snapshots destination).
 */
static void read_cozystack_snapshot(reader *r, const ynode *root, side_doc *s)
{
        const ynode *spec = NULL, *ref = NULL, *dst = NULL;
        if (!rd_map(r, root, "", "spec", NULL, &spec)) {
                rd_error(r, root, "EtcdSnapshot: spec is required");
                return;
        }
        static const char *const ks[] = {"clusterRef", "destination", NULL};
        rd_keys(r, spec, "spec", ks, NULL);
        if (rd_map(r, spec, "spec", "clusterRef", NULL, &ref)) {
                static const char *const k[] = {"name", NULL};
                rd_keys(r, ref, "spec.clusterRef", k, NULL);
                const ynode *at = rd_get(ref, "name", NULL);
                if (rd_string(r, ref, "spec.clusterRef", "name", NULL, &s->cluster)) {
                        s->cluster_line = at->line;
                        s->cluster_col = at->col;
                } else if (!at) {
                        rd_error(r, ref, "spec.clusterRef.name is required");
                }
        } else if (!rd_get(spec, "clusterRef", NULL)) {
                rd_error(r, spec, "spec.clusterRef is required");
        }
        if (!rd_map(r, spec, "spec", "destination", NULL, &dst))
                return;
        read_location(r, dst, "spec.destination", "spec.snapshots.destination", false,
                      &s->destination);
        const ynode *pvc = rd_get(dst, "pvc", NULL);
        if (s->destination.kind == DEST_PVC && pvc) {
                s->destination_line = pvc->line;
                s->destination_col = pvc->col;
        }
}

static void read_coreos_restore(reader *r, const ynode *root, side_doc *s)
{
        const ynode *spec = NULL, *ec = NULL, *s3 = NULL;
        if (!rd_map(r, root, "", "spec", NULL, &spec)) {
                rd_error(r, root, "EtcdRestore: spec is required");
                return;
        }
        static const char *const ks[] = {
            "etcdCluster", "backupStorageType", "s3", "abs", "gcs", "oss", NULL};
        rd_keys(r, spec, "spec", ks, NULL);
        if (rd_map(r, spec, "spec", "etcdCluster", NULL, &ec)) {
                static const char *const k[] = {"name", NULL};
                rd_keys(r, ec, "spec.etcdCluster", k, NULL);
                const ynode *at = rd_get(ec, "name", NULL);
                if (rd_string(r, ec, "spec.etcdCluster", "name", NULL, &s->cluster)) {
                        s->cluster_line = at->line;
                        s->cluster_col = at->col;
                } else if (!at) {
                        rd_error(r, ec, "spec.etcdCluster.name is required");
                }
        } else if (!rd_get(spec, "etcdCluster", NULL)) {
                rd_error(r, spec, "spec.etcdCluster is required");
        }
        _cleanup_free_ char *type = NULL;
        const ynode *tat = rd_get(spec, "backupStorageType", NULL);
        if (!rd_string(r, spec, "spec", "backupStorageType", NULL, &type)) {
                if (!tat)
                        rd_error(r, spec, "spec.backupStorageType is required");
                return;
        }
        if (!streq(type, "S3")) {
                rd_error(r, tat,
                         "spec.backupStorageType: \"%s\" is not supported; gitcd restores from "
                         "S3-compatible storage, a local file or a snapshot it recorded",
                         type);
                return;
        }
        if (!rd_map(r, spec, "spec", "s3", NULL, &s3)) {
                if (!rd_get(spec, "s3", NULL))
                        rd_error(r, spec, "spec.s3 is required");
                return;
        }
        static const char *const k3[] = {"path", "awsSecret", "endpoint", "forcePathStyle", NULL};
        rd_keys(r, s3, "spec.s3", k3, NULL);
        _cleanup_free_ char *path = NULL;
        const ynode *pat = rd_get(s3, "path", NULL);
        if (rd_string(r, s3, "spec.s3", "path", NULL, &path)) {
                const char *slash = strchr(path, '/');
                if (!slash || slash == path || !slash[1])
                        rd_error(r, pat, "spec.s3.path: \"%s\" is not BUCKET/KEY", path);
                else {
                        s->destination.s3.bucket = xstrndup(path, (size_t)(slash - path));
                        s->destination.s3.key = xstrdup(slash + 1);
                }
        } else if (!pat) {
                rd_error(r, s3, "spec.s3.path is required");
        }
        rd_string(r, s3, "spec.s3", "awsSecret", NULL, &s->destination.s3.credentials_secret);
        rd_string(r, s3, "spec.s3", "endpoint", NULL, &s->destination.s3.endpoint);
        rd_bool(r, s3, "spec.s3", "forcePathStyle", NULL, &s->destination.s3.force_path_style);
        s->destination.kind = DEST_S3;
        s->restore = true;
}

/*
 * improbable EtcdRestore: spec.source.objectURL "s3://BUCKET/KEY[?query]"
 * is the snapshot, spec.clusterTemplate.clusterName the cluster it
 * creates. gitcd creates that cluster from its EtcdCluster document in Git,
 * so clusterTemplate.spec is not read (a warning says so).
 */
static void read_improbable_restore(reader *r, const ynode *root, side_doc *s)
{
        const ynode *spec = NULL, *src = NULL, *tmpl = NULL;
        if (!rd_map(r, root, "", "spec", NULL, &spec)) {
                rd_error(r, root, "EtcdRestore: spec is required");
                return;
        }
        static const char *const ks[] = {"source", "clusterTemplate", NULL};
        rd_keys(r, spec, "spec", ks, NULL);
        if (rd_map(r, spec, "spec", "clusterTemplate", NULL, &tmpl)) {
                static const char *const k[] = {"clusterName", "metadata", "spec", NULL};
                rd_keys(r, tmpl, "spec.clusterTemplate", k, NULL);
                const ynode *at = rd_get(tmpl, "clusterName", NULL);
                if (rd_string(r, tmpl, "spec.clusterTemplate", "clusterName", NULL, &s->cluster)) {
                        s->cluster_line = at->line;
                        s->cluster_col = at->col;
                } else if (!at) {
                        rd_error(r, tmpl, "spec.clusterTemplate.clusterName is required");
                }
                const ynode *ts = rd_get(tmpl, "spec", NULL);
                if (ts)
                        rd_warning(r, ts,
                                   "spec.clusterTemplate.spec is not read: gitcd creates the "
                                   "cluster from its EtcdCluster document in Git, which must "
                                   "be among the files");
        } else if (!rd_get(spec, "clusterTemplate", NULL)) {
                rd_error(r, spec, "spec.clusterTemplate is required");
        }
        if (!rd_map(r, spec, "spec", "source", NULL, &src)) {
                if (!rd_get(spec, "source", NULL))
                        rd_error(r, spec, "spec.source is required");
                return;
        }
        static const char *const k[] = {"objectURL", NULL};
        rd_keys(r, src, "spec.source", k, NULL);
        const ynode *at = rd_get(src, "objectURL", NULL);
        _cleanup_free_ char *url = NULL;
        if (!rd_string(r, src, "spec.source", "objectURL", NULL, &url)) {
                if (!at)
                        rd_error(r, src, "spec.source.objectURL is required");
                return;
        }
        if (strneq(url, "gs://", 5)) {
                rd_error(r, at,
                         "spec.source.objectURL: \"%s\": Google Cloud Storage is not supported; "
                         "gitcd restores from S3-compatible storage, a local file or a snapshot "
                         "it recorded",
                         url);
                return;
        }
        const char *bucket = strneq(url, "s3://", 5) ? url + 5 : NULL;
        size_t blen = bucket ? strcspn(bucket, "/?") : 0;
        const char *key = bucket && bucket[blen] == '/' ? bucket + blen + 1 : NULL;
        size_t klen = key ? strcspn(key, "?") : 0;
        if (blen == 0 || klen == 0) {
                rd_error(r, at, "spec.source.objectURL: \"%s\" is not s3://BUCKET/KEY", url);
                return;
        }
        const char *q = strchr(bucket, '?');
        if (q && !read_s3_query(r, at, "spec.source.objectURL", q + 1, &s->destination.s3))
                return;
        s->destination.kind = DEST_S3;
        s->destination.s3.bucket = xstrndup(bucket, blen);
        s->destination.s3.key = xstrndup(key, klen);
        s->restore = true;
}

bool side_kind_read(const char *file, const ydoc *doc, spec_dialect d, const char *kind,
                    side_list *out, diag_list *diags)
{
        bool schedule = d == DIALECT_IMPROBABLE && streq(kind, "EtcdBackupSchedule");
        bool one_off = (d == DIALECT_IMPROBABLE && streq(kind, "EtcdBackup")) ||
                       (d == DIALECT_COZYSTACK && streq(kind, "EtcdSnapshot"));
        bool restore =
            (d == DIALECT_COREOS || d == DIALECT_IMPROBABLE) && streq(kind, "EtcdRestore");
        if (!schedule && !one_off && !restore)
                return false;
        const ynode *root = doc->root;
        const ynode *meta = ynode_get(root, "metadata");
        const char *name = str_of(ynode_get(meta, "name"));
        const char *ns = str_of(ynode_get(meta, "namespace"));
        reader r = {.file = file, .diags = diags, .c = etcd_cluster_new()};
        r.c->line = root->line;
        r.c->col = root->col;
        out->items = xgrow(out->items, &out->alloc, out->n + 1, sizeof(side_doc));
        side_doc *s = &out->items[out->n++];
        *s = (side_doc){.dialect = d,
                        .kind = xstrdup(kind),
                        .name = xstrdup(name ? name : ""),
                        .namespace_ = xstrdup(ns ? ns : "default"),
                        .file = xstrdup(file ? file : "<input>"),
                        .line = root->line,
                        .col = root->col};
        size_t errors = diag_count(diags, DIAG_ERROR);
        rd_check_controls(&r, root);
        s->one_off = one_off;
        if (restore && d == DIALECT_IMPROBABLE)
                read_improbable_restore(&r, root, s);
        else if (restore)
                read_coreos_restore(&r, root, s);
        else if (one_off && d == DIALECT_COZYSTACK)
                read_cozystack_snapshot(&r, root, s);
        else if (one_off)
                read_backup(&r, root, s);
        else
                read_backup_schedule(&r, root, s);
        s->maps = diag_count(diags, DIAG_ERROR) == errors;
        etcd_cluster_free(r.c);
        kv_list_release(&r.names);
        return true;
}

/* Where a location is, for a note: "s3://bucket/prefix", "/folder". */
static char *location_text(const storage_location *l)
{
        if (l->kind == DEST_S3)
                return xasprintf("s3://%s/%s", l->s3.bucket, l->s3.key ? l->s3.key : "");
        if (l->kind == DEST_LOCAL)
                return xstrdup(l->path);
        if (l->kind == DEST_PVC)
                return xasprintf("pvc://%s%s%s", l->claim_name, l->sub_path ? "/" : "",
                                 l->sub_path ? l->sub_path : "");
        return xstrdup("?");
}

/*
 * A one-off snapshot joins its cluster as a declared_snapshot, identified
 * by its kind, namespace, name and a hash of what it asks (the cluster and
 * the destination), so an edited document is a new request.
 */
static void attach_one_off(etcd_cluster *c, side_doc *s, diag_list *diags)
{
        const storage_location *dest =
            s->destination.kind != DEST_NONE ? &s->destination : &c->snapshots.destination;
        if (dest->kind == DEST_NONE) {
                diag_add(diags, DIAG_ERROR, s->file, s->line, s->col,
                         "%s \"%s\" names no destination, and cluster %s/%s has no "
                         "spec.snapshots.destination to use instead",
                         s->kind, s->name, s->namespace_, s->cluster);
                return;
        }
        json_t *what = json_pack("{s:s, s:s, s:s, s:s, s:o}", "kind", s->kind, "namespace",
                                 s->namespace_, "name", s->name, "cluster", s->cluster,
                                 "destination", spec_location_to_json(&s->destination));
        _cleanup_free_ char *text = json_dumps(what, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(what);
        _cleanup_free_ char *where = location_text(dest);
        c->declared = xrealloc(c->declared, (c->n_declared + 1) * sizeof(*c->declared));
        declared_snapshot *ds = &c->declared[c->n_declared++];
        *ds = (declared_snapshot){
            .object = xasprintf("%s %s/%s", s->kind, s->namespace_, s->name),
            .identity = spec_text_hash(text),
            .destination = s->destination,
            .file = xstrdup_null(s->file),
            .line = s->destination_line ? s->destination_line : s->line,
            .col = s->destination_line ? s->destination_col : s->col,
        };
        s->destination = (storage_location){0};
        diag_add(diags, DIAG_NOTE, s->file, s->line, s->col,
                 "%s \"%s\" read as one snapshot of %s/%s to %s%s, taken once by `gitcd run` "
                 "(gitcd names the object; retention never deletes it; `gitcd snapshot list` "
                 "shows it)",
                 s->kind, s->name, s->namespace_, s->cluster, where,
                 ds->destination.kind == DEST_NONE ? " (the cluster's spec.snapshots.destination)"
                                                   : "");
}

void side_kinds_attach(cluster_set *set, side_list *l, diag_list *diags)
{
        for (size_t i = 0; i < l->n; i++) {
                side_doc *s = &l->items[i];
                if (!s->maps || !s->cluster)
                        continue;
                etcd_cluster *c = cluster_set_find(set, s->namespace_, s->cluster);
                if (!c) {
                        diag_add(diags, DIAG_ERROR, s->file, s->cluster_line, s->cluster_col,
                                 "%s \"%s\" names cluster %s/%s, which is not defined in the "
                                 "files read",
                                 s->kind, s->name, s->namespace_, s->cluster);
                        continue;
                }
                if (s->one_off) {
                        attach_one_off(c, s, diags);
                        continue;
                }
                if (s->restore) {
                        if (c->restore.enabled) {
                                diag_add(diags, DIAG_ERROR, s->file, s->line, s->col,
                                         "%s \"%s\": cluster %s/%s has a "
                                         "spec.bootstrap.restore already",
                                         s->kind, s->name, s->namespace_, s->cluster);
                                continue;
                        }
                        c->restore.enabled = true;
                        c->restore.source = s->destination;
                        s->destination = (storage_location){0};
                        diag_add(diags, DIAG_NOTE, s->file, s->line, s->col,
                                 "%s \"%s\" read as spec.bootstrap.restore of %s/%s: the cluster "
                                 "is created from s3://%s/%s when it does not exist yet%s",
                                 s->kind, s->name, s->namespace_, s->cluster,
                                 c->restore.source.s3.bucket, c->restore.source.s3.key,
                                 c->restore.source.s3.credentials_secret
                                     ? " (gitcd reads the keys accessKeyID and secretAccessKey "
                                       "from awsSecret, not AWS credentials files)"
                                     : "");
                        continue;
                }
                if (c->snapshots.enabled || c->snapshots.schedule) {
                        int line, col;
                        etcd_cluster_loc(c, "spec.snapshots", &line, &col);
                        diag_add(diags, DIAG_ERROR, s->file, s->line, s->col,
                                 "%s \"%s\": cluster %s/%s has snapshots already (%s:%d:%d); "
                                 "one schedule per cluster",
                                 s->kind, s->name, s->namespace_, s->cluster, c->file, line, col);
                        continue;
                }
                c->snapshots.enabled = true;
                c->snapshots.schedule = TAKE_PTR(s->schedule);
                c->snapshots.destination.kind = DEST_S3;
                c->snapshots.destination.s3.bucket = TAKE_PTR(s->destination.s3.bucket);
                c->snapshots.destination.s3.key = TAKE_PTR(s->destination.s3.key);
                diag_add(diags, DIAG_NOTE, s->file, s->line, s->col,
                         "%s \"%s\" read as spec.snapshots of %s/%s: schedule \"%s\", s3://%s/%s "
                         "(gitcd names the objects; keeps the newest %d; S3 credentials from "
                         "gitcd's environment)",
                         s->kind, s->name, s->namespace_, s->cluster, c->snapshots.schedule,
                         c->snapshots.destination.s3.bucket,
                         c->snapshots.destination.s3.key ? c->snapshots.destination.s3.key : "",
                         c->snapshots.retention_count);
        }
}

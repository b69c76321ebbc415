/*
 * Loading EtcdCluster documents: files and directories -> YAML documents ->
 * one dialect reader per apiVersion -> defaults -> validation -> the set.
 *
 * Design: every document gets its own diagnostics list; a document with an
 * error is dropped but the others are still read, and every problem of a
 * run is reported in one go. Kinds that are not EtcdCluster are skipped
 * with a note, so a whole GitOps folder (Deployments, Secrets, ...) can be
 * pointed at without noise turning into failure; so are files found in a
 * folder that hold no Kubernetes object at all (CI workflows), while a file
 * named directly is always checked strictly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "util/fs.h"
#include "util/strmap.h"
#include "util/xalloc.h"

static const struct {
        spec_dialect dialect;
        void (*read)(reader *r, const ynode *spec);
        const char *const *other_kinds; /* other kinds of that API group, not read yet */
} dialects[] = {
    {DIALECT_GITCD, read_spec_gitcd, NULL},
    {DIALECT_COREOS, read_spec_coreos, (const char *const[]){"EtcdBackup", NULL}},
    {DIALECT_ETCDIO, read_spec_etcdio,
     (const char *const[]){"EtcdBackup", "EtcdRestore", "EtcdMember", "EtcdMirror", NULL}},
    {DIALECT_IMPROBABLE, read_spec_improbable, (const char *const[]){"EtcdPeer", NULL}},
    /* EtcdBackup, EtcdBackupSchedule, EtcdRestore (improbable), EtcdSnapshot (cozystack),
     * EtcdRestore (coreos): api/sidekinds.c */
    {DIALECT_COZYSTACK, read_spec_cozystack, NULL},
};

static const char *scalar_string(const ynode *n)
{
        if (n && n->kind == YNODE_SCALAR && streq(ynode_type_name(n), "string"))
                return n->str;
        return NULL;
}

static void read_metadata(reader *r, const ynode *root)
{
        etcd_cluster *c = r->c;
        const ynode *meta = NULL;
        if (!rd_map(r, root, "", "metadata", NULL, &meta)) {
                if (!rd_get(root, "metadata", NULL))
                        rd_error(r, NULL, "metadata.name is required");
                return;
        }
        static const char *const known[] = {"name", "namespace", "labels", "annotations", NULL};
        static const char *const ignored[] = {"generateName",
                                              "uid",
                                              "resourceVersion",
                                              "generation",
                                              "creationTimestamp",
                                              "deletionTimestamp",
                                              "managedFields",
                                              "finalizers",
                                              "ownerReferences",
                                              "selfLink",
                                              NULL};
        rd_keys(r, meta, "metadata", known, ignored);

        if (rd_string(r, meta, "metadata", "name", NULL, &c->name)) {
                const ynode *v = rd_get(meta, "name", NULL);
                size_t len = strlen(c->name);
                if (!dns1123_label_valid(c->name))
                        rd_error(r, v,
                                 "metadata.name: \"%s\" is not a DNS-1123 label (lower-case "
                                 "letters, digits and '-', starting and ending with a letter or "
                                 "digit)",
                                 c->name);
                else if (!(c->name[0] >= 'a' && c->name[0] <= 'z'))
                        rd_error(r, v,
                                 "metadata.name: \"%s\" must start with a letter: gitcd names "
                                 "a Service after the cluster, and Service names are DNS-1035 "
                                 "labels",
                                 c->name);
                else if (len > GITCD_MAX_NAME_LEN)
                        rd_error(r, v,
                                 "metadata.name: \"%s\" is %zu characters; at most %d fit so "
                                 "that \"<name>-headless\" and member names stay within 63",
                                 c->name, len, GITCD_MAX_NAME_LEN);
        } else if (!rd_get(meta, "name", NULL)) {
                rd_error(r, meta, "metadata.name is required");
        }
        if (rd_string(r, meta, "metadata", "namespace", NULL, &c->namespace_) &&
            !dns1123_label_valid(c->namespace_))
                rd_error(r, rd_get(meta, "namespace", NULL),
                         "metadata.namespace: \"%s\" is not a DNS-1123 label", c->namespace_);
        rd_kv(r, meta, "metadata", "labels", NULL, true, &c->labels);
        rd_kv(r, meta, "metadata", "annotations", NULL, false, &c->annotations);
}

/* One EtcdCluster document of a known dialect. */
static etcd_cluster *read_cluster(const char *file, const ydoc *doc, spec_dialect d,
                                  diag_list *diags)
{
        const ynode *root = doc->root;
        etcd_cluster *c = etcd_cluster_new();
        c->dialect = d;
        c->file = xstrdup(file ? file : "<input>");
        c->line = root->line;
        c->col = root->col;
        c->api_version = xstrdup(dialect_api_version(d));
        c->kind = xstrdup("EtcdCluster");

        reader r = {.file = file, .diags = diags, .c = c};
        static const char *const known[] = {"apiVersion", "kind", "metadata", "spec", NULL};
        static const char *const ignored[] = {"status", NULL};
        rd_keys(&r, root, "", known, ignored);
        rd_check_controls(&r, root);
        read_metadata(&r, root);

        const ynode *spec = NULL;
        if (rd_map(&r, root, "", "spec", NULL, &spec) || !rd_get(root, "spec", NULL)) {
                for (size_t i = 0; i < ARRAY_SIZE(dialects); i++)
                        if (dialects[i].dialect == d)
                                dialects[i].read(&r, spec);
        }
        spec_fill_defaults(c);
        spec_validate(&r);
        kv_list_release(&r.names);
        return c;
}

static void load_document(const char *file, const ydoc *doc, cluster_set *out, side_list *sides,
                          diag_list *diags)
{
        const ynode *root = doc->root;
        reader r = {.file = file, .diags = diags, .c = NULL};
        if (!root)
                return;
        if (root->kind != YNODE_MAP) {
                rd_error(&r, root,
                         "a document must be a mapping (apiVersion, kind, metadata, "
                         "spec), got %s %s",
                         streq(ynode_type_name(root), "integer") ? "an" : "a",
                         ynode_type_name(root));
                return;
        }
        const ynode *av = ynode_get(root, "apiVersion");
        const ynode *kind = ynode_get(root, "kind");
        const char *av_s = scalar_string(av), *kind_s = scalar_string(kind);
        bool bad = false;
        if (!av || ynode_is_null(av)) {
                rd_error(&r, root, "document has no apiVersion");
                bad = true;
        } else if (!av_s) {
                rd_type_error(&r, av, "apiVersion", "a string");
                bad = true;
        }
        if (!kind || ynode_is_null(kind)) {
                rd_error(&r, root, "document has no kind");
                bad = true;
        } else if (!kind_s) {
                rd_type_error(&r, kind, "kind", "a string");
                bad = true;
        }
        if (bad)
                return;

        const ynode *meta = ynode_get(root, "metadata");
        const char *name = scalar_string(ynode_get(meta, "name"));
        _cleanup_free_ char *what =
            name ? xasprintf("%s %s \"%s\"", av_s, kind_s, name) : xasprintf("%s %s", av_s, kind_s);

        for (size_t i = 0; i < ARRAY_SIZE(dialects); i++) {
                if (!streq(av_s, dialect_api_version(dialects[i].dialect)))
                        continue;
                if (streq(kind_s, "EtcdCluster")) {
                        diag_list mine = DIAG_LIST_INIT;
                        etcd_cluster *c = read_cluster(file, doc, dialects[i].dialect, &mine);
                        if (diag_has_errors(&mine))
                                etcd_cluster_free(c);
                        else
                                cluster_set_add(out, c);
                        diag_move(diags, &mine);
                        return;
                }
                if (side_kind_read(file, doc, dialects[i].dialect, kind_s, sides, diags))
                        return;
                const char *const *others = dialects[i].other_kinds;
                for (size_t j = 0; others && others[j]; j++) {
                        if (streq(kind_s, others[j])) {
                                rd_note(&r, root,
                                        "skipping %s (%s resources are not read by gitcd yet)",
                                        what, kind_s);
                                return;
                        }
                }
                if (dialects[i].dialect == DIALECT_GITCD) {
                        static const char *const kinds[] = {"EtcdCluster", NULL};
                        const char *best = closest_word(kind_s, kinds);
                        if (best)
                                rd_error(&r, kind,
                                         "unknown kind \"%s\" in %s; did you mean \"%s\"?", kind_s,
                                         av_s, best);
                        else
                                rd_error(&r, kind,
                                         "unknown kind \"%s\" in %s (gitcd reads "
                                         "EtcdCluster)",
                                         kind_s, av_s);
                        return;
                }
                rd_note(&r, root, "skipping %s (not an EtcdCluster)", what);
                return;
        }

        if (streq(kind_s, "EtcdCluster")) {
                const char *all[ARRAY_SIZE(dialects) + 1];
                for (size_t i = 0; i < ARRAY_SIZE(dialects); i++)
                        all[i] = dialect_api_version(dialects[i].dialect);
                all[ARRAY_SIZE(dialects)] = NULL;
                const char *best = closest_word(av_s, all);
                if (best)
                        rd_error(&r, av,
                                 "unknown apiVersion \"%s\" for EtcdCluster; did you "
                                 "mean \"%s\"?",
                                 av_s, best);
                else
                        rd_error(&r, av,
                                 "unknown apiVersion \"%s\" for EtcdCluster (gitcd reads %s, %s, "
                                 "%s, %s and %s)",
                                 av_s, all[0], all[1], all[2], all[3], all[4]);
                return;
        }
        rd_note(&r, root, "skipping %s (not an EtcdCluster)", what);
}

/* The revision's YAML budget ran out in file: the n files after it are not read. */
static void note_unread(const char *file, size_t n, diag_list *diags)
{
        if (n > 0)
                diag_add(diags, DIAG_NOTE, file, 0, 0,
                         "%zu more file(s) after this one were not read: the YAML budget of "
                         "one revision is spent",
                         n);
}

int spec_load_buffer(const char *file, const char *buf, size_t len, cluster_set *out,
                     diag_list *diags)
{
        spec_buffer one = {.file = file, .data = buf, .len = len};
        return spec_load_buffers(&one, 1, out, diags);
}

/* Whether any document of a file has an apiVersion or a kind (is meant as a Kubernetes object). */
static bool has_kubernetes_object(const ydoc_list *docs)
{
        for (size_t i = 0; i < docs->n; i++) {
                const ynode *root = docs->docs[i].root;
                if (root && root->kind == YNODE_MAP &&
                    (ynode_get(root, "apiVersion") || ynode_get(root, "kind")))
                        return true;
        }
        return false;
}

int spec_load_buffers(const spec_buffer *bufs, size_t n, cluster_set *out, diag_list *diags)
{
        diag_list mine = DIAG_LIST_INIT;
        side_list sides = {0};
        cluster_set loaded = {0};
        yaml_budget budget = yaml_revision_budget;
        for (size_t b = 0; b < n; b++) {
                ydoc_list docs = {0};
                diag_list file = DIAG_LIST_INIT;
                yaml_parse_budget(bufs[b].file, bufs[b].data, bufs[b].len, NULL, &budget, &docs,
                                  &file);
                /*
                 * A folder may hold YAML that is not Kubernetes at all (CI
                 * workflows, Helm values): found by scanning, a file that
                 * parses and has no apiVersion or kind anywhere is skipped. A
                 * file named directly is meant to be checked, so it stays strict.
                 */
                if (bufs[b].scanned && docs.n > 0 && !diag_has_errors(&file) &&
                    !has_kubernetes_object(&docs)) {
                        diag_add(&file, DIAG_NOTE, bufs[b].file, 0, 0,
                                 "skipping this file: no document has an apiVersion or a kind "
                                 "(not a Kubernetes object)");
                        ydoc_list_release(&docs);
                }
                for (size_t i = 0; i < docs.n; i++)
                        load_document(bufs[b].file, &docs.docs[i], &loaded, &sides, &file);
                ydoc_list_release(&docs);
                diag_move(&mine, &file);
                if (budget.spent) {
                        note_unread(bufs[b].file, n - b - 1, &mine);
                        break;
                }
        }
        /* after every buffer: a side kind may name a cluster of another file */
        side_kinds_attach(&loaded, &sides, &mine);
        side_list_release(&sides);
        for (size_t i = 0; i < loaded.n; i++)
                cluster_set_add(out, loaded.items[i]);
        free(loaded.items);
        bool errors = diag_has_errors(&mine);
        diag_move(diags, &mine);
        return errors ? -EINVAL : 0;
}

/* The key two definitions of one cluster share (a NULL field stays apart from ""). */
static char *cluster_key(const etcd_cluster *c)
{
        return xasprintf("%c%s\x1f%c%s", c->namespace_ ? 'n' : '-',
                         c->namespace_ ? c->namespace_ : "", c->name ? 'n' : '-',
                         c->name ? c->name : "");
}

int spec_check_duplicates(const cluster_set *set, diag_list *diags)
{
        int r = 0;
        strmap first = STRMAP_INIT; /* each cluster's first definition, so this stays linear */
        for (size_t i = 0; i < set->n; i++) {
                const etcd_cluster *b = set->items[i];
                _cleanup_free_ char *key = cluster_key(b);
                size_t j = 0;
                if (strmap_put(&first, key, i) || !strmap_get(&first, key, &j))
                        continue;
                const etcd_cluster *a = set->items[j];
                _cleanup_free_ char *id = etcd_cluster_id(b);
                int al, ac, bl, bc;
                etcd_cluster_loc(a, "metadata.name", &al, &ac);
                etcd_cluster_loc(b, "metadata.name", &bl, &bc);
                diag_add(diags, DIAG_ERROR, b->file, bl, bc,
                         "cluster %s is defined twice; first defined at %s:%d:%d", id, a->file, al,
                         ac);
                diag_add(diags, DIAG_NOTE, a->file, al, ac,
                         "cluster %s is defined again at %s:%d:%d", id, b->file, bl, bc);
                r = -EINVAL;
        }
        strmap_release(&first);
        return r;
}

/*
 * Expand each path on its own, so one missing path does not hide the others.
 * A file is read once however it is named: every path taken and its real
 * path go in a map, so a folder of many files costs one realpath() each.
 */
static int expand_all(char *const *paths, size_t n, path_list *out, path_list *named,
                      diag_list *diags)
{
        static const char *const suffixes[] = {".yaml", ".yml", NULL};
        int ret = 0;
        strmap seen_paths = STRMAP_INIT, seen_real = STRMAP_INIT;
        for (size_t i = 0; i < n; i++) {
                path_list one = {0};
                const char *bad = NULL;
                if (!path_is_dir(paths[i])) {
                        _cleanup_free_ char *real = realpath(paths[i], NULL);
                        path_list_add(named, real ? real : paths[i]);
                }
                int r = expand_paths(&paths[i], 1, suffixes, &one, &bad);
                if (r < 0) {
                        diag_add(diags, DIAG_ERROR, bad ? bad : paths[i], 0, 0, "%s",
                                 r == -ENOENT ? "no such file or directory" : strerror(-r));
                        if (ret == 0)
                                ret = r;
                }
                for (size_t j = 0; j < one.n; j++) {
                        /* The same file named twice (directly and through a folder) is read once. */
                        _cleanup_free_ char *real = realpath(one.paths[j], NULL);
                        bool seen = strmap_get(&seen_paths, one.paths[j], NULL) ||
                                    (real && strmap_get(&seen_real, real, NULL));
                        if (seen)
                                continue;
                        (void)strmap_put(&seen_paths, one.paths[j], out->n);
                        if (real)
                                (void)strmap_put(&seen_real, real, out->n);
                        path_list_add(out, one.paths[j]);
                }
                path_list_release(&one);
        }
        strmap_release(&seen_paths);
        strmap_release(&seen_real);
        return ret;
}

static bool path_listed(const path_list *l, const char *path)
{
        _cleanup_free_ char *real = realpath(path, NULL);
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->paths[i], real ? real : path))
                        return true;
        return false;
}

void spec_file_list_release(spec_file_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free((char *)l->items[i].file);
                free((char *)l->items[i].data);
        }
        free(l->items);
        *l = (spec_file_list){0};
}

int spec_read_paths(char *const *paths, size_t n, spec_file_list *ret, diag_list *diags)
{
        path_list files = {0}, named = {0};
        int missing = expand_all(paths, n, &files, &named, diags);
        spec_file_list l = {0};
        bool errors = missing < 0;
        l.items = xcalloc(files.n + 1, sizeof(*l.items));
        for (size_t i = 0; i < files.n; i++) {
                char *buf = NULL;
                size_t len = 0;
                if (yaml_read_file(files.paths[i], NULL, &buf, &len, diags) < 0) {
                        errors = true;
                        continue;
                }
                l.items[l.n++] = (spec_buffer){.file = xstrdup(files.paths[i]),
                                               .data = buf,
                                               .len = len,
                                               .scanned = !path_listed(&named, files.paths[i])};
        }
        path_list_release(&files);
        path_list_release(&named);
        *ret = l;
        if (missing == -ENOENT)
                return -ENOENT;
        return errors ? -EINVAL : 0;
}

int spec_load_paths(char *const *paths, size_t n, cluster_set *out, diag_list *diags)
{
        spec_file_list files = {0};
        int r = spec_read_paths(paths, n, &files, diags);
        cluster_set loaded = {0};
        bool errors = r < 0;
        if (spec_load_buffers(files.items, files.n, &loaded, diags) < 0)
                errors = true;
        spec_file_list_release(&files);
        if (spec_check_duplicates(&loaded, diags) < 0)
                errors = true;
        for (size_t i = 0; i < loaded.n; i++)
                cluster_set_add(out, loaded.items[i]);
        free(loaded.items);
        if (r == -ENOENT)
                return -ENOENT;
        return errors ? -EINVAL : 0;
}

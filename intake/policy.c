/*
 * The operator's policy (see policy.h): its built-in defaults, its parser
 * and its rules.
 *
 * Decisions:
 * - Patterns are exact strings in which `*` stands for any run of
 *   characters other than '/' (so `team-*` never reaches into another
 *   path segment, and `registry.example.com/` followed by a star allows
 *   the repositories directly under that registry). Nothing else is
 *   special: a pattern
 *   cannot be misread as a regular expression.
 * - Paths on a machine are compared component by component, after
 *   refusing any path with "." or ".." components or a relative one:
 *   /var/lib/etcd2 is not inside /var/lib/etcd, and /var/lib/etcd/../..
 *   never gets that far. Every folder may be its root itself: kubeadm's
 *   etcd keeps its data in /var/lib/etcd, the default data root, and is
 *   adopted as it is. The one thing then outside the root is what a
 *   disaster recovery sets aside beside a data directory,
 *   <dataDir>.removed-<member>-<ms>, a name gitcd makes (never the spec)
 *   and deletes by that exact pattern.
 * - Roots themselves are checked when the file is read: absolute,
 *   normalized, and neither / nor a system folder (/etc, /usr, /var/lib,
 *   ...), so a policy cannot be widened to the whole machine by accident.
 * - The etcd binary of a systemd machine is a program gitcd runs as root
 *   (`<etcdBinary> --version`, then the unit's ExecStart=), so it is
 *   matched against patterns of absolute paths (hosts.etcdBinaries) whose
 *   file name is never a bare `*`: `/opt/etcd/` + `*` + `/etcd` allows every
 *   version installed side by side, while a pattern such as `/usr/bin/` +
 *   `*` would allow any program there and is refused. The default is where
 *   etcd's release tarball (docs/hosts.md), Debian's etcd-server package
 *   and a side-by-side upgrade put it.
 * - Paths on the gitcd host that a spec names (a local snapshot folder, a
 *   local file to restore, the folder of an EtcdSnapshot beside the
 *   cluster) must lie in one of the localSnapshotRoots, on every target: a
 *   folder may be a root itself, a file lies strictly inside one. The
 *   default is one fixed folder, /var/lib/gitcd/snapshots (the packaged
 *   daemon's <state dir>/snapshots), never a folder that depends on where
 *   the state of the command at hand lies: `gitcd plan` in CI, with a
 *   state of its own, must judge a spec as the daemon does.
 * - A source's policy overrides the top-level one key by key; a key's list
 *   replaces the inherited list whole (no merging of lists: what a source
 *   may do is read in one place).
 * - Every message of a refusal starts at the policy key's location and
 *   names the spec's (file:line:col of both), so `gitcd plan` shows which
 *   line of the operator's file refused which line of the commit.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/flags.h"
#include "api/spec.h"
#include "intake/policy.h"
#include "targets/registry.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static const char *const change_names[] = {
    [POLICY_CHANGE_RECOVERY] = "recovery",          [POLICY_CHANGE_SCALE_DOWN] = "scaleDown",
    [POLICY_CHANGE_MINOR_UPGRADE] = "minorUpgrade", [POLICY_CHANGE_CA_ROTATION] = "caRotation",
    [POLICY_CHANGE_DELETION] = "clusterDeletion",   [POLICY_CHANGE_AUTH_OFF] = "authOff",
};

const char *policy_change_name(policy_change k)
{
        assert((size_t)k < ARRAY_SIZE(change_names));
        return change_names[k];
}

/* ---- building, copying, freeing ----------------------------------------- */

static policy_at at_builtin(void)
{
        return (policy_at){.file = xstrdup(POLICY_BUILTIN)};
}

static policy_at at_copy(const policy_at *a)
{
        return (policy_at){.file = xstrdup_null(a->file), .line = a->line, .col = a->col};
}

static void list_set(policy_list *l, const char *const *items, size_t n)
{
        l->items = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                l->items[i] = xstrdup(items[i]);
        l->n = n;
        l->at = at_builtin();
}

static void list_release(policy_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i]);
        free(l->items);
        free(l->at.file);
        *l = (policy_list){0};
}

static void list_copy(policy_list *dst, const policy_list *src)
{
        dst->items = xcalloc(src->n + 1, sizeof(char *));
        for (size_t i = 0; i < src->n; i++)
                dst->items[i] = xstrdup(src->items[i]);
        dst->n = src->n;
        dst->at = at_copy(&src->at);
}

static void root_release(policy_root *r)
{
        free(r->path);
        free(r->at.file);
        *r = (policy_root){0};
}

static void root_copy(policy_root *dst, const policy_root *src)
{
        dst->path = xstrdup_null(src->path);
        dst->at = at_copy(&src->at);
}

policy *policy_builtin(void)
{
        policy *p = XNEW(policy);
        static const char *const any[] = {"*"};
        static const char *const any_cluster[] = {"*/*"};
        static const char *const images[] = {GITCD_DEFAULT_REPOSITORY};
        static const char *const binaries[] = {"/usr/bin/etcd", "/usr/local/bin/etcd",
                                               "/opt/etcd/*/etcd"};
        static const char *const local_roots[] = {POLICY_DEFAULT_LOCAL_ROOT};
        list_set(&p->namespaces, any, 1);
        list_set(&p->clusters, any_cluster, 1);
        list_set(&p->targets, any, 1);
        list_set(&p->machines, any, 1);
        list_set(&p->images, images, ARRAY_SIZE(images));
        list_set(&p->etcd_flags, NULL, 0);
        list_set(&p->etcd_binaries, binaries, ARRAY_SIZE(binaries));
        list_set(&p->local_roots, local_roots, ARRAY_SIZE(local_roots));
        p->data_root = (policy_root){.path = xstrdup("/var/lib/etcd"), .at = at_builtin()};
        p->tls_root = (policy_root){.path = xstrdup("/etc/etcd"), .at = at_builtin()};
        p->unit_root = (policy_root){.path = xstrdup("/etc/systemd/system"), .at = at_builtin()};
        p->manifest_root =
            (policy_root){.path = xstrdup("/etc/kubernetes/manifests"), .at = at_builtin()};
        for (size_t k = 0; k < POLICY_N_CHANGES; k++)
                p->approvals[k] = (policy_approval){.signers = 0, .at = at_builtin()};
        return p;
}

policy *policy_copy(const policy *src)
{
        policy *p = XNEW(policy);
        list_copy(&p->namespaces, &src->namespaces);
        list_copy(&p->clusters, &src->clusters);
        list_copy(&p->targets, &src->targets);
        list_copy(&p->machines, &src->machines);
        list_copy(&p->images, &src->images);
        list_copy(&p->etcd_flags, &src->etcd_flags);
        list_copy(&p->etcd_binaries, &src->etcd_binaries);
        list_copy(&p->local_roots, &src->local_roots);
        root_copy(&p->data_root, &src->data_root);
        root_copy(&p->tls_root, &src->tls_root);
        root_copy(&p->unit_root, &src->unit_root);
        root_copy(&p->manifest_root, &src->manifest_root);
        for (size_t k = 0; k < POLICY_N_CHANGES; k++)
                p->approvals[k] = (policy_approval){.signers = src->approvals[k].signers,
                                                    .at = at_copy(&src->approvals[k].at)};
        return p;
}

void policy_free(policy *p)
{
        if (!p)
                return;
        list_release(&p->namespaces);
        list_release(&p->clusters);
        list_release(&p->targets);
        list_release(&p->machines);
        list_release(&p->images);
        list_release(&p->etcd_flags);
        list_release(&p->etcd_binaries);
        list_release(&p->local_roots);
        root_release(&p->data_root);
        root_release(&p->tls_root);
        root_release(&p->unit_root);
        root_release(&p->manifest_root);
        for (size_t k = 0; k < POLICY_N_CHANGES; k++)
                free(p->approvals[k].at.file);
        free(p);
}

bool policy_wants_approvals(const policy *p, const policy_at **ret_at)
{
        for (size_t k = 0; k < POLICY_N_CHANGES; k++)
                if (p->approvals[k].signers > 0) {
                        if (ret_at)
                                *ret_at = &p->approvals[k].at;
                        return true;
                }
        return false;
}

/* ---- patterns and paths ------------------------------------------------- */

bool policy_glob(const char *pattern, const char *s)
{
        /* Iterative with one backtracking point per '*' run: linear enough for short names. */
        const char *star = NULL, *resume = NULL;
        while (*s) {
                if (*pattern == '*') {
                        star = pattern++;
                        resume = s;
                } else if (*pattern == *s) {
                        pattern++;
                        s++;
                } else if (star && *resume != '/') {
                        pattern = star + 1;
                        s = ++resume;
                } else {
                        return false;
                }
        }
        while (*pattern == '*')
                pattern++;
        return *pattern == '\0';
}

bool policy_list_matches(const policy_list *l, const char *s)
{
        for (size_t i = 0; s && i < l->n; i++)
                if (policy_glob(l->items[i], s))
                        return true;
        return false;
}

/* The next component of an absolute path at *p ("" at the end); -EINVAL for "." and "..". */
static int next_component(const char **p, const char **ret, size_t *ret_len)
{
        while (**p == '/')
                (*p)++;
        const char *start = *p;
        while (**p && **p != '/')
                (*p)++;
        size_t n = (size_t)(*p - start);
        if ((n == 1 && start[0] == '.') || (n == 2 && start[0] == '.' && start[1] == '.'))
                return -EINVAL;
        *ret = start;
        *ret_len = n;
        return 0;
}

int policy_path_within(const char *root, const char *path, bool strict)
{
        if (!root || !path || path[0] != '/' || root[0] != '/')
                return -EINVAL;
        const char *r = root, *q = path;
        for (;;) {
                const char *rc, *pc;
                size_t rn, pn;
                if (next_component(&r, &rc, &rn) < 0)
                        return -EINVAL;
                if (next_component(&q, &pc, &pn) < 0)
                        return -EINVAL;
                if (rn == 0) {
                        /* the root is used up: path is it, or inside it */
                        if (pn == 0)
                                return strict ? 0 : 1;
                        /* the rest of path must be clean too */
                        while (pn > 0)
                                if (next_component(&q, &pc, &pn) < 0)
                                        return -EINVAL;
                        return 1;
                }
                if (pn != rn || memcmp(rc, pc, rn) != 0) {
                        while (pn > 0)
                                if (next_component(&q, &pc, &pn) < 0)
                                        return -EINVAL;
                        return 0;
                }
        }
}

/* ---- the parser --------------------------------------------------------- */

typedef struct parser {
        const char *file;
        diag_list *diags;
        bool bad;
} parser;

static void err(parser *p, const ynode *n, const char *fmt, ...) _printf_(3, 4);
static void err(parser *p, const ynode *n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        diag_add(p->diags, DIAG_ERROR, p->file, n ? n->line : 0, n ? n->col : 0, "%s", msg);
        p->bad = true;
}

static policy_at at_of(parser *p, const ynode *key)
{
        return (policy_at){.file = xstrdup(p->file), .line = key->line, .col = key->col};
}

/* A plain string without whitespace or control characters, or NULL (an error said why). */
static const char *word(parser *p, const ynode *n, const char *key)
{
        if (n->kind != YNODE_SCALAR || ynode_is_null(n) || n->len == 0 ||
            strlen(n->str) != n->len) {
                err(p, n, "%s: each entry must be a non-empty string", key);
                return NULL;
        }
        for (const char *c = n->str; *c; c++)
                if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c)) {
                        err(p, n, "%s: \"%s\" contains a space or a control character", key,
                            n->str);
                        return NULL;
                }
        return n->str;
}

typedef bool (*entry_check)(parser *p, const ynode *n, const char *key, const char *s);
static bool check_local_root(parser *p, const ynode *n, const char *key, const char *s);

/* A sequence of words into l (replacing it), each passed through check. */
static void parse_list(parser *p, const ynode *key, const ynode *v, const char *name,
                       entry_check check, policy_list *l)
{
        if (v->kind != YNODE_SEQ) {
                err(p, v, "%s must be a sequence of %s, not %s", name,
                    check == check_local_root ? "folders" : "patterns", ynode_type_name(v));
                return;
        }
        policy_list out = {.items = xcalloc(v->n + 1, sizeof(char *)), .at = at_of(p, key)};
        for (size_t i = 0; i < v->n; i++) {
                const char *s = word(p, v->values[i], name);
                if (s && (!check || check(p, v->values[i], name, s)))
                        out.items[out.n++] = xstrdup(s);
        }
        list_release(l);
        *l = out;
}

static bool check_no_slash(parser *p, const ynode *n, const char *key, const char *s)
{
        if (!strchr(s, '/'))
                return true;
        err(p, n, "%s: \"%s\" has a '/'", key, s);
        return false;
}

static bool check_cluster(parser *p, const ynode *n, const char *key, const char *s)
{
        const char *slash = strchr(s, '/');
        if (slash && slash != s && slash[1] && !strchr(slash + 1, '/'))
                return true;
        err(p, n, "%s: \"%s\" is not NAMESPACE/NAME (either may be a pattern: team-a/*)", key, s);
        return false;
}

static bool check_target(parser *p, const ynode *n, const char *key, const char *s)
{
        if (streq(s, "*") || target_kind_find(s))
                return true;
        _cleanup_free_ char *kinds = target_kind_names(", ", ", ");
        err(p, n, "%s: unknown target '%s' (%s, or *)", key, s, kinds);
        return false;
}

static bool check_image(parser *p, const ynode *n, const char *key, const char *s)
{
        if (!strchr(s, '@') && s[strlen(s) - 1] != '/' && s[0] != '/')
                return true;
        err(p, n, "%s: \"%s\" is not an image repository (registry/path, without a tag or digest)",
            key, s);
        return false;
}

static bool check_flag(parser *p, const ynode *n, const char *key, const char *s)
{
        if (s[0] != '-' && !strchr(s, '='))
                return true;
        err(p, n, "%s: \"%s\": name a flag without leading dashes or a value (enable-pprof)", key,
            s);
        return false;
}

/* Folders a root may never be: the whole machine, or a folder the system owns. */
static const char *const system_folders[] = {
    "/",         "/bin",           "/boot", "/dev",     "/etc",     "/home",    "/lib",
    "/lib32",    "/lib64",         "/opt",  "/proc",    "/root",    "/run",     "/sbin",
    "/srv",      "/sys",           "/tmp",  "/usr",     "/usr/bin", "/usr/lib", "/usr/local",
    "/usr/sbin", "/usr/local/bin", "/var",  "/var/lib", "/var/log", "/var/run", "/var/tmp",
};

/* A root: absolute, normalized, neither / nor a system folder. */
static bool check_root(parser *p, const ynode *v, const char *name, const char *s)
{
        /* normalized: absolute, no empty, "." or ".." component, no trailing '/' */
        bool clean = s[0] == '/' && !strstr(s, "//") && !strstr(s, "/./") && !strstr(s, "/../") &&
                     (strlen(s) == 1 || s[strlen(s) - 1] != '/');
        size_t n = strlen(s);
        if (clean && ((n >= 2 && streq(s + n - 2, "/.")) || (n >= 3 && streq(s + n - 3, "/.."))))
                clean = false;
        if (!clean) {
                err(p, v, "%s: \"%s\" is not an absolute, normalized path", name, s);
                return false;
        }
        for (size_t i = 0; i < ARRAY_SIZE(system_folders); i++)
                if (streq(s, system_folders[i])) {
                        err(p, v, "%s: \"%s\" is %s; name the folder gitcd may use inside it", name,
                            s, streq(s, "/") ? "the whole machine" : "a system folder");
                        return false;
                }
        return true;
}

static void parse_root(parser *p, const ynode *key, const ynode *v, const char *name,
                       policy_root *r)
{
        const char *s = word(p, v, name);
        if (!s || !check_root(p, v, name, s))
                return;
        root_release(r);
        *r = (policy_root){.path = xstrdup(s), .at = at_of(p, key)};
}

/*
 * An etcd binary pattern: a path as a spec writes one (spec_path_check,
 * with each `*` read as a letter) whose file name is more than stars.
 */
static bool check_binary(parser *p, const ynode *n, const char *key, const char *s)
{
        _cleanup_free_ char *plain = xstrdup(s);
        for (char *c = plain; *c; c++)
                if (*c == '*')
                        *c = 'x';
        _cleanup_free_ char *why = NULL;
        if (spec_path_check(plain, SPEC_PATH_FILE, &why) < 0) {
                err(p, n, "%s: \"%s\" is not an absolute, normalized path of a file (it %s)", key,
                    s, why);
                return false;
        }
        const char *file = strrchr(s, '/') + 1;
        if (strspn(file, "*") == strlen(file)) {
                err(p, n,
                    "%s: \"%s\" allows any program in its folder, which gitcd would run as root; "
                    "name the binary (/opt/etcd/*/etcd)",
                    key, s);
                return false;
        }
        return true;
}

/* A root on the gitcd host: a root, and no pattern (roots are compared, not matched). */
static bool check_local_root(parser *p, const ynode *n, const char *key, const char *s)
{
        if (strchr(s, '*')) {
                err(p, n, "%s: \"%s\": a root is a folder, not a pattern", key, s);
                return false;
        }
        return check_root(p, n, key, s);
}

static void parse_hosts(parser *p, const ynode *m, policy *out)
{
        if (m->kind != YNODE_MAP) {
                err(p, m, "policy.hosts must be a mapping, not %s", ynode_type_name(m));
                return;
        }
        for (size_t i = 0; i < m->n; i++) {
                const ynode *k = m->keys[i], *v = m->values[i];
                const char *key = k->str;
                if (streq(key, "machines"))
                        parse_list(p, k, v, "policy.hosts.machines", check_no_slash,
                                   &out->machines);
                else if (streq(key, "dataRoot"))
                        parse_root(p, k, v, "policy.hosts.dataRoot", &out->data_root);
                else if (streq(key, "tlsRoot"))
                        parse_root(p, k, v, "policy.hosts.tlsRoot", &out->tls_root);
                else if (streq(key, "unitRoot"))
                        parse_root(p, k, v, "policy.hosts.unitRoot", &out->unit_root);
                else if (streq(key, "manifestRoot"))
                        parse_root(p, k, v, "policy.hosts.manifestRoot", &out->manifest_root);
                else if (streq(key, "etcdBinaries"))
                        parse_list(p, k, v, "policy.hosts.etcdBinaries", check_binary,
                                   &out->etcd_binaries);
                else
                        err(p, k,
                            "unknown key '%s' in policy.hosts (machines, dataRoot, tlsRoot, "
                            "unitRoot, manifestRoot, etcdBinaries)",
                            key);
        }
}

static void parse_approvals(parser *p, const ynode *m, policy *out)
{
        if (m->kind != YNODE_MAP) {
                err(p, m, "policy.approvals must be a mapping of change kinds to signers, not %s",
                    ynode_type_name(m));
                return;
        }
        for (size_t i = 0; i < m->n; i++) {
                const ynode *k = m->keys[i], *v = m->values[i];
                size_t kind = 0;
                while (kind < POLICY_N_CHANGES && !streq(k->str, change_names[kind]))
                        kind++;
                if (kind == POLICY_N_CHANGES) {
                        err(p, k,
                            "unknown change kind '%s' in policy.approvals (recovery, scaleDown, "
                            "minorUpgrade, caRotation, clusterDeletion, authOff)",
                            k->str);
                        continue;
                }
                char *end = NULL;
                long n = v->kind == YNODE_SCALAR && !v->quoted ? strtol(v->str, &end, 10) : -1;
                if (v->kind != YNODE_SCALAR || v->quoted || !end || end == v->str || *end ||
                    n < 0 || n > POLICY_MAX_SIGNERS) {
                        err(p, v,
                            "policy.approvals.%s: the number of distinct trusted signers the "
                            "change needs, from 0 to %d",
                            k->str, POLICY_MAX_SIGNERS);
                        continue;
                }
                free(out->approvals[kind].at.file);
                out->approvals[kind] = (policy_approval){.signers = (int)n, .at = at_of(p, k)};
        }
}

/* The keys of a policy: a list of patterns each, or a section with a reader of its own. */
typedef struct policy_key {
        const char *key;
        const char *name;  /* lists: for messages */
        entry_check check; /* lists: each entry's check */
        size_t list;       /* lists: offsetof(policy, the list) */
        void (*section)(parser *p, const ynode *m, policy *out);
} policy_key;

static const policy_key policy_keys[] = {
    {"namespaces", "policy.namespaces", check_no_slash, offsetof(policy, namespaces), NULL},
    {"clusters", "policy.clusters", check_cluster, offsetof(policy, clusters), NULL},
    {"targets", "policy.targets", check_target, offsetof(policy, targets), NULL},
    {"hosts", NULL, NULL, 0, parse_hosts},
    {"localSnapshotRoots", "policy.localSnapshotRoots", check_local_root,
     offsetof(policy, local_roots), NULL},
    {"images", "policy.images", check_image, offsetof(policy, images), NULL},
    {"etcdFlags", "policy.etcdFlags", check_flag, offsetof(policy, etcd_flags), NULL},
    {"approvals", NULL, NULL, 0, parse_approvals},
};

int policy_parse(const ynode *n, const char *file, const policy *base, policy **ret,
                 diag_list *diags)
{
        assert(n && file && ret);
        parser p = {.file = file, .diags = diags};
        if (n->kind != YNODE_MAP) {
                err(&p, n, "policy must be a mapping, not %s", ynode_type_name(n));
                return -EINVAL;
        }
        policy *out = base ? policy_copy(base) : policy_builtin();
        for (size_t i = 0; i < n->n; i++) {
                const ynode *k = n->keys[i], *v = n->values[i];
                const policy_key *pk = NULL;
                for (size_t j = 0; !pk && j < ARRAY_SIZE(policy_keys); j++)
                        if (streq(k->str, policy_keys[j].key))
                                pk = &policy_keys[j];
                if (pk && pk->section)
                        pk->section(&p, v, out);
                else if (pk)
                        parse_list(&p, k, v, pk->name, pk->check,
                                   (policy_list *)((char *)out + pk->list));
                else
                        err(&p, k,
                            "unknown key '%s' in policy (namespaces, clusters, targets, hosts, "
                            "localSnapshotRoots, images, etcdFlags, approvals)",
                            k->str);
        }
        if (p.bad) {
                policy_free(out);
                return -EINVAL;
        }
        *ret = out;
        return 0;
}

/* ---- judging a cluster -------------------------------------------------- */

/* "a, b, c", or "none". */
static char *list_text(const policy_list *l)
{
        if (l->n == 0)
                return xstrdup("none");
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < l->n; i++)
                sb_printf(&sb, "%s%s", i ? ", " : "", l->items[i]);
        return sb_detach(&sb);
}

typedef struct judge {
        const etcd_cluster *c;
        char *id;
        const char *then; /* what happens to the cluster */
        diag_list *diags;
        size_t n;
} judge;

static void refuse(judge *j, const policy_at *at, const char *key, const char *spec_path,
                   const char *fmt, ...) _printf_(5, 6);
static void refuse(judge *j, const policy_at *at, const char *key, const char *spec_path,
                   const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *what = xvasprintf(fmt, ap);
        va_end(ap);
        int line, col;
        etcd_cluster_loc(j->c, spec_path, &line, &col);
        diag_add(j->diags, DIAG_ERROR, at->file ? at->file : POLICY_BUILTIN, at->line, at->col,
                 "policy.%s: %s (%s:%d:%d) %s; %s", key, j->id, j->c->file ? j->c->file : "?", line,
                 col, what, j->then);
        j->n++;
}

/* Whether the spec wrote path itself (not a default, not a parent). */
static bool written(const etcd_cluster *c, const char *path)
{
        for (size_t i = 0; i < c->n_locs; i++)
                if (streq(c->locs[i].path, path))
                        return true;
        return false;
}

/* Where machine i's field was written: its own key, else the hosts-level one. */
static char *host_field_path(const etcd_cluster *c, size_t i, const char *field)
{
        char *own = xasprintf("spec.hosts.machines[%zu].%s", i, field);
        if (written(c, own))
                return own;
        _cleanup_free_ char *top = xasprintf("spec.hosts.%s", field);
        if (written(c, top)) {
                free(own);
                return TAKE_PTR(top);
        }
        return own; /* a default: the machine's entry is the place to write another */
}

static void judge_root(judge *j, const policy_root *r, const char *key, const etcd_cluster *c,
                       size_t i, const char *field, const char *path)
{
        int k = policy_path_within(r->path, path, false);
        if (k == 1)
                return;
        _cleanup_free_ char *at = host_field_path(c, i, field);
        const char *machine = c->hosts.items[i].address;
        if (k < 0)
                refuse(j, &r->at, key, at,
                       "has %s %s on %s, which is not an absolute path free "
                       "of . and .. components",
                       field, path, machine);
        else
                refuse(j, &r->at, key, at, "has %s %s on %s, which is not in %s", field, path,
                       machine, r->path);
}

/* systemd: the program gitcd runs as root on machine i. */
static void check_binary_allowed(judge *j, const policy *p, const etcd_cluster *c, size_t i)
{
        const host_spec *h = &c->hosts.items[i];
        if (policy_list_matches(&p->etcd_binaries, h->etcd_binary))
                return;
        _cleanup_free_ char *at = host_field_path(c, i, "etcdBinary");
        _cleanup_free_ char *allowed = list_text(&p->etcd_binaries);
        refuse(j, &p->etcd_binaries.at, "hosts.etcdBinaries", at,
               "runs %s as etcd on %s, a program this source may not run there (allowed: %s)",
               h->etcd_binary, h->address, allowed);
}

static void check_hosts(judge *j, const policy *p, const etcd_cluster *c)
{
        _cleanup_free_ char *machines = list_text(&p->machines);
        for (size_t i = 0; i < c->hosts.n; i++) {
                const host_spec *h = &c->hosts.items[i];
                if (!policy_list_matches(&p->machines, h->address)) {
                        _cleanup_free_ char *at = xasprintf("spec.hosts.machines[%zu].address", i);
                        refuse(j, &p->machines.at, "hosts.machines", at,
                               "places a member on %s, a machine this source may not use "
                               "(allowed: %s)",
                               h->address, machines);
                }
                judge_root(j, &p->data_root, "hosts.dataRoot", c, i, "dataDir", h->data_dir);
                judge_root(j, &p->tls_root, "hosts.tlsRoot", c, i, "tlsDir", h->tls_dir);
                if (h->mode == HOST_MODE_SYSTEMD) {
                        judge_root(j, &p->unit_root, "hosts.unitRoot", c, i, "unitDir",
                                   h->unit_dir);
                        check_binary_allowed(j, p, c, i);
                } else
                        judge_root(j, &p->manifest_root, "hosts.manifestRoot", c, i, "manifestDir",
                                   h->manifest_dir);
        }
}

/*
 * Whether path lies in one of the local roots: a folder in one or one
 * itself, a file strictly inside. 1, 0, or -EINVAL when path is not an
 * absolute path free of "." and "..".
 */
static int local_within(const policy_list *roots, const char *path, bool file)
{
        int k = 0;
        for (size_t i = 0; i < roots->n && k == 0; i++)
                k = policy_path_within(roots->items[i], path, file);
        return k;
}

static char *local_refusal(const policy_list *roots, const char *what, const char *path, int k)
{
        if (k < 0)
                return xasprintf("%s %s on the gitcd host, which is not an absolute path free of . "
                                 "and .. components",
                                 what, path);
        _cleanup_free_ char *allowed = list_text(roots);
        return xasprintf("%s %s on the gitcd host, which is not in %s%s", what, path,
                         roots->n > 1 ? "any of " : "", allowed);
}

/* A location of the spec on the gitcd host (spec_path: where the spec names it). */
static void check_local(judge *j, const policy *p, const storage_location *l, bool file,
                        const char *what, const char *spec_path)
{
        if (l->kind != DEST_LOCAL || !l->path)
                return;
        int k = local_within(&p->local_roots, l->path, file);
        if (k == 1)
                return;
        _cleanup_free_ char *why = local_refusal(&p->local_roots, what, l->path, k);
        refuse(j, &p->local_roots.at, "localSnapshotRoots", spec_path, "%s", why);
}

/* The folder an EtcdSnapshot document beside the cluster names, at that document's line. */
static void check_declared(judge *j, const policy *p, const declared_snapshot *ds)
{
        const storage_location *l = &ds->destination;
        if (l->kind != DEST_LOCAL || !l->path)
                return;
        int k = local_within(&p->local_roots, l->path, false);
        if (k == 1)
                return;
        _cleanup_free_ char *why =
            local_refusal(&p->local_roots, "writes a snapshot to", l->path, k);
        const policy_at *at = &p->local_roots.at;
        diag_add(j->diags, DIAG_ERROR, at->file ? at->file : POLICY_BUILTIN, at->line, at->col,
                 "policy.localSnapshotRoots: %s (%s, %s:%d:%d) %s; %s", j->id, ds->object,
                 ds->file ? ds->file : "?", ds->line, ds->col, why, j->then);
        j->n++;
}

static bool runs_pods(const etcd_cluster *c)
{
        for (size_t i = 0; i < c->hosts.n; i++)
                if (c->hosts.items[i].mode == HOST_MODE_STATIC_POD)
                        return true;
        return false;
}

size_t policy_check(const policy *p, const etcd_cluster *c, const char *target_name,
                    bool hosts_target, bool runs_images, bool exists, diag_list *diags)
{
        assert(p && c);
        judge j = {.c = c,
                   .id = etcd_cluster_id(c),
                   .then = exists ? "the cluster is not changed (its last accepted spec stays in "
                                    "force)"
                                  : "the cluster is not taken in",
                   .diags = diags};

        if (!policy_list_matches(&p->namespaces, c->namespace_)) {
                _cleanup_free_ char *allowed = list_text(&p->namespaces);
                refuse(&j, &p->namespaces.at, "namespaces", "metadata.namespace",
                       "is in namespace %s, which this source may not define (allowed: %s)",
                       c->namespace_, allowed);
        }
        bool cluster_ok = false;
        for (size_t i = 0; i < p->clusters.n && !cluster_ok; i++) {
                const char *pat = p->clusters.items[i], *slash = strchr(pat, '/');
                if (!slash)
                        continue;
                _cleanup_free_ char *ns = xstrndup(pat, (size_t)(slash - pat));
                cluster_ok = policy_glob(ns, c->namespace_) && policy_glob(slash + 1, c->name);
        }
        if (!cluster_ok) {
                _cleanup_free_ char *allowed = list_text(&p->clusters);
                refuse(&j, &p->clusters.at, "clusters", "metadata.name",
                       "is not a cluster this source may define (allowed: %s)", allowed);
        }
        if (target_name && !policy_list_matches(&p->targets, target_name)) {
                _cleanup_free_ char *allowed = list_text(&p->targets);
                refuse(&j, &p->targets.at, "targets", "metadata.name",
                       "would run on the %s target, which this source may not use (allowed: %s)",
                       target_name, allowed);
        }
        if (hosts_target && c->hosts.set)
                check_hosts(&j, p, c);
        if (runs_images || (hosts_target && runs_pods(c))) {
                const char *repo =
                    isempty(c->repository) ? GITCD_DEFAULT_REPOSITORY : c->repository;
                if (!policy_list_matches(&p->images, repo)) {
                        _cleanup_free_ char *allowed = list_text(&p->images);
                        refuse(&j, &p->images.at, "images", "spec.repository",
                               "runs the image repository %s, which this source may not run "
                               "(allowed: %s)",
                               repo, allowed);
                }
        }
        check_local(&j, p, &c->snapshots.destination, false, "writes snapshots to",
                    "spec.snapshots.destination.local.path");
        check_local(&j, p, &c->restore.source, true, "restores from",
                    "spec.bootstrap.restore.source.local.path");
        for (size_t i = 0; i < c->n_declared; i++)
                check_declared(&j, p, &c->declared[i]);
        for (size_t i = 0; i < c->options.extra_flags.n; i++) {
                const char *flag = c->options.extra_flags.items[i].key;
                if (!etcd_flag_needs_policy(flag))
                        continue;
                _cleanup_free_ char *name = xstrdup(flag);
                for (char *q = name; *q; q++)
                        *q = *q == '_' ? '-' : (char)tolower((unsigned char)*q);
                if (policy_list_matches(&p->etcd_flags, name))
                        continue;
                _cleanup_free_ char *allowed = list_text(&p->etcd_flags);
                _cleanup_free_ char *at = xasprintf("spec.options.extraFlags.%s", flag);
                refuse(&j, &p->etcd_flags.at, "etcdFlags", at,
                       "sets --%s, which a spec may set only where the operator's policy allows "
                       "it (allowed: %s)",
                       flag, allowed);
        }
        free(j.id);
        return j.n;
}

/* ---- changes that need approvals ----------------------------------------- */

static bool recovery_asked(const etcd_cluster *prev, const etcd_cluster *next)
{
        const recovery_spec *a = &prev->recovery, *b = &next->recovery;
        if (b->from == RECOVERY_NONE)
                return false;
        return a->from != b->from || !streq_ptr(a->token, b->token) ||
               !streq_ptr(a->member, b->member) || a->snapshot_id != b->snapshot_id;
}

unsigned policy_changes(const etcd_cluster *prev, const etcd_cluster *next)
{
        if (!prev)
                return 0;
        if (!next)
                return 1u << POLICY_CHANGE_DELETION;
        unsigned k = 0;
        if (recovery_asked(prev, next))
                k |= 1u << POLICY_CHANGE_RECOVERY;
        if (next->replicas < prev->replicas)
                k |= 1u << POLICY_CHANGE_SCALE_DOWN;
        semver a, b;
        if (semver_parse(prev->version, &a) == 0 && semver_parse(next->version, &b) == 0 &&
            (a.major != b.major || a.minor != b.minor))
                k |= 1u << POLICY_CHANGE_MINOR_UPGRADE;
        if (!isempty(next->tls.rotate_ca_token) &&
            !streq_ptr(prev->tls.rotate_ca_token, next->tls.rotate_ca_token))
                k |= 1u << POLICY_CHANGE_CA_ROTATION;
        if (prev->auth.enabled && !next->auth.enabled)
                k |= 1u << POLICY_CHANGE_AUTH_OFF;
        return k;
}

int policy_signers_needed(const policy *p, unsigned changes, unsigned *ret_kinds)
{
        int most = 0;
        unsigned kinds = 0;
        for (size_t k = 0; k < POLICY_N_CHANGES; k++) {
                if (!(changes & (1u << k)) || p->approvals[k].signers <= 0)
                        continue;
                if (p->approvals[k].signers > most) {
                        most = p->approvals[k].signers;
                        kinds = 0;
                }
                if (p->approvals[k].signers == most)
                        kinds |= 1u << k;
        }
        if (ret_kinds)
                *ret_kinds = kinds;
        return most;
}

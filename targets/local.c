/*
 * The local target: etcd members as supervised processes on this host
 * (layout on disk and restart policy: targets/local.h).
 *
 * The command line comes only from render_member_command(), the same
 * flags the Kubernetes Pod gets; argv[0] "etcd" becomes the binary for
 * the cluster's version. A member is started detached (util/process.h:
 * its own session and process group, stdin /dev/null, output appended to
 * etcd.log, every other descriptor closed), so it is our child while we
 * run and survives us when we exit. member.json records the command last
 * started; a process is "ours" only when /proc/<pid>/cmdline equals a
 * recorded or desired command, it runs as gitcd's user and its executable
 * is that command's binary (process_runs), so a recycled pid is never
 * signalled and another user's etcd with a member's flags is never taken
 * over.
 *
 * Exit notification uses pidfds for every member, children and adopted
 * processes alike, in one epoll set: wait_event() waits on it, so a death
 * is seen at once, not at the next reconciler pass, and a tick or a wait
 * asks the set once whatever the number of members. waitid(P_PIDFD) reaps our children and
 * gives their exit status; for an adopted process that is not our child
 * the status is unknown.
 *
 * Threads (targets/locked.h): the member table, the event list and every
 * record are the target's shared state. These waits let go of the shared
 * lock: a stop waiting for its process to exit (the member is marked
 * `stopping`, so that no other thread reaps or restarts it meanwhile), a
 * health probe (on copies of the URL and paths), and wait_event's wait on
 * the epoll set, after which the set is asked again under the lock rather
 * than trusting what the wait saw (the table may have changed, several
 * threads may wait at once). A snapshot restore (etcd's tool, into this
 * member's folder) runs outside it too. A member started meanwhile has its
 * pidfd added to the set at once and wakes the waiters through an eventfd.
 */

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "snapstore/tool.h"
#include "targets/local-tls.h"
#include "util/process.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/local-internal.h"

/* --- string vectors ---------------------------------------------------- */

static size_t strv_len(char *const *v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static char **strv_copy(char *const *v)
{
        size_t n = strv_len(v);
        char **r = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                r[i] = xstrdup(v[i]);
        return r;
}

static bool strv_equal(char *const *a, char *const *b)
{
        if (!a || !b)
                return a == b;
        size_t i = 0;
        for (; a[i] && b[i]; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return !a[i] && !b[i];
}

/* --- member records ---------------------------------------------------- */

void local_member_free(local_member *m)
{
        if (!m)
                return;
        if (m->pidfd >= 0)
                close(m->pidfd);
        free(m->ns);
        free(m->cluster);
        free(m->name);
        free(m->dir);
        free(m->client_url);
        free(m->tls_dir);
        strv_free(m->command);
        free(m->config_hash);
        free(m->version);
        free(m->last_exit);
        free(m);
}

local_member *local_member_new(local_target *lt, const char *ns, const char *cluster,
                               const char *name)
{
        local_member *m = XNEW(local_member);
        m->ns = xstrdup(ns);
        m->cluster = xstrdup(cluster);
        m->name = xstrdup(name);
        m->dir = xasprintf("%s/clusters/%s/%s/%s", lt->state_dir, ns, cluster, name);
        m->pidfd = -1;
        return m;
}

/*
 * The members in memory are looked up by name through member_index, not by
 * going through them all: every pass looks its members up several times, so
 * a walk would grow with the square of the clusters.
 */
static char *member_key(const char *ns, const char *cluster, const char *name)
{
        return xasprintf("%s/%s/%s", ns, cluster, name);
}

local_member *lt_find_loaded(local_target *lt, const char *ns, const char *cluster,
                             const char *name)
{
        _cleanup_free_ char *key = member_key(ns, cluster, name);
        size_t i = 0;
        if (!strmap_get(&lt->member_index, key, &i))
                return NULL;
        local_member *m = lt->members[i];
        assert(streq(m->ns, ns) && streq(m->cluster, cluster) && streq(m->name, name));
        return m;
}

static void add_loaded(local_target *lt, local_member *m)
{
        lt->members =
            xgrow(lt->members, &lt->alloc_members, lt->n_members + 1, sizeof(local_member *));
        _cleanup_free_ char *key = member_key(m->ns, m->cluster, m->name);
        (void)strmap_put(&lt->member_index, key, lt->n_members);
        lt->members[lt->n_members++] = m;
}

static void drop_loaded(local_target *lt, local_member *m)
{
        for (size_t i = 0; i < lt->n_members; i++) {
                if (lt->members[i] != m)
                        continue;
                memmove(lt->members + i, lt->members + i + 1,
                        (lt->n_members - i - 1) * sizeof(local_member *));
                lt->n_members--;
                lt_watch_exit(lt, m, false);
                /* the indexes after it moved: the map is made again (a member removed is rare) */
                strmap_release(&lt->member_index);
                for (size_t j = 0; j < lt->n_members; j++) {
                        local_member *o = lt->members[j];
                        _cleanup_free_ char *key = member_key(o->ns, o->cluster, o->name);
                        (void)strmap_put(&lt->member_index, key, j);
                }
                break;
        }
        local_member_free(m);
}

/*
 * The member's record: from memory, or loaded from disk (and adopted).
 * -ENOENT when the member has no member.json.
 */
int lt_get_member(local_target *lt, const char *ns, const char *cluster, const char *name,
                  local_member **ret)
{
        if (!target_name_is_component(ns) || !target_name_is_component(cluster) ||
            !target_name_is_component(name))
                return target_fail(&lt->base, -EINVAL, "invalid member name \"%s/%s/%s\"", ns,
                                   cluster, name);
        local_member *m = lt_find_loaded(lt, ns, cluster, name);
        if (!m) {
                int r = lt_member_load(lt, ns, cluster, name, &m);
                if (r == -ENOENT)
                        return r;
                if (r < 0)
                        return target_fail(&lt->base, r,
                                           "cannot read %s/clusters/%s/%s/%s/member.json: %s",
                                           lt->state_dir, ns, cluster, name, strerror(-r));
                lt_adopt(lt, m);
                add_loaded(lt, m);
                /* Data of an older gitcd, which wrote no marker: it is this member's. */
                _cleanup_free_ char *identity = lt_data_identity(m);
                if (!identity && lt_member_has_data(m) && lt_write_marker(lt, m) >= 0)
                        log_debug("local target: member %s/%s/%s: data identity marker written", ns,
                                  cluster, name);
        }
        *ret = m;
        return 0;
}

/* --- operations -------------------------------------------------------- */

/* The member's record, created (folder and all) on first use. */
int lt_get_or_create_member(local_target *lt, const etcd_cluster *c, const char *name,
                            local_member **ret)
{
        local_member *m = NULL;
        int r = lt_get_member(lt, c->namespace_, c->name, name, &m);
        if (r == -ENOENT) {
                m = local_member_new(lt, c->namespace_, c->name, name);
                r = mkdir_p(m->dir, 0700);
                if (r < 0) {
                        r = target_fail(&lt->base, r, "cannot create %s: %s", m->dir, strerror(-r));
                        local_member_free(m);
                        return r;
                }
                m->created_ms = now_wall_ms();
                add_loaded(lt, m);
        } else if (r < 0) {
                return r;
        }
        *ret = m;
        return 0;
}

static int local_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        local_target *lt = LT(t);
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");
        local_member *m = NULL;
        int r = lt_get_or_create_member(lt, c, mp->name, &m);
        if (r < 0)
                return r;
        if (m->client_port <= 0 || m->peer_port <= 0 || m->metrics_port <= 0) {
                r = lt_allocate_ports(lt, m);
                if (r < 0)
                        return r;
        }
        const char *cs = render_client_tls(c) ? "https" : "http";
        const char *ps = render_peer_scheme(c);
        str_assign(&mp->client_url, xasprintf("%s://127.0.0.1:%d", cs, m->client_port));
        str_assign(&mp->peer_url, xasprintf("%s://127.0.0.1:%d", ps, m->peer_port));
        str_assign(&mp->listen_client_url, xstrdup(mp->client_url));
        str_assign(&mp->listen_peer_url, xstrdup(mp->peer_url));
        str_assign(&mp->listen_metrics_url, xasprintf("http://127.0.0.1:%d", m->metrics_port));
        str_assign(&mp->data_dir, xasprintf("%s/data", m->dir));
        str_assign(&mp->tls_dir, xasprintf("%s/tls", m->dir));
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *tls_error = NULL;
        char *tls_version = NULL;
        r = local_tls_version(cdir, c, &tls_version, &tls_error);
        if (r < 0)
                return target_fail(t, r, "%s", tls_error);
        str_assign(&mp->tls_version, tls_version);
        if (!streq_ptr(m->client_url, mp->client_url) || !streq_ptr(m->tls_dir, mp->tls_dir)) {
                str_assign(&m->client_url, xstrdup(mp->client_url));
                str_assign(&m->tls_dir, xstrdup(mp->tls_dir));
                r = lt_member_save(m);
                if (r < 0)
                        return target_fail(t, r, "member %s: cannot write member.json: %s", m->name,
                                           strerror(-r));
        }
        return 0;
}

/* "Service-demo-headless.json": a file name for a rendered object. */
static char *object_file_name(json_t *obj, size_t index)
{
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        const char *name =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        if (!target_name_is_component(kind) || !target_name_is_component(name))
                return xasprintf("object-%zu.json", index);
        strbuf sb = STRBUF_INIT;
        for (const char *p = kind; *p; p++)
                sb_appendc(&sb, (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p));
        sb_printf(&sb, "-%s.json", name);
        return sb_detach(&sb);
}

static int local_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        local_target *lt = LT(t);
        if (!target_name_is_component(c->namespace_) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", c->namespace_,
                                   c->name);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *odir = path_join(cdir, "objects");
        int r = mkdir_p(odir, 0755);
        if (r < 0)
                return target_fail(t, r, "cannot create %s: %s", odir, strerror(-r));
        _cleanup_free_ char *tls_error = NULL;
        r = local_tls_ensure(cdir, c, p, NULL, false, (int64_t)time(NULL) * 1000, &tls_error);
        if (r < 0)
                return target_fail(t, r, "cluster %s/%s: %s", c->namespace_, c->name,
                                   tls_error ? tls_error : "TLS material cannot be issued");
        r = 0;
        json_t *objs = render_shared_objects(c, p);
        if (!objs)
                return target_fail(t, -EINVAL, "cluster %s/%s: shared objects cannot be rendered",
                                   c->namespace_, c->name);
        if (json_is_object(objs)) {
                json_t *arr = json_array();
                json_array_append_new(arr, objs);
                objs = arr;
        }
        char **names = xcalloc(json_array_size(objs) + 1, sizeof(char *));
        size_t i;
        json_t *obj;
        json_array_foreach(objs, i, obj)
        {
                names[i] = object_file_name(obj, i);
                _cleanup_free_ char *path = path_join(odir, names[i]);
                char *text = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                if (!text)
                        continue;
                size_t len = strlen(text);
                _cleanup_free_ char *old = NULL;
                size_t old_len = 0;
                bool same = read_file(path, MEMBER_JSON_MAX, &old, &old_len) == 0 &&
                            old_len == len + 1 && memcmp(old, text, len) == 0;
                if (!same) {
                        strbuf sb = STRBUF_INIT;
                        sb_append(&sb, text);
                        sb_appendc(&sb, '\n');
                        int w = write_file_atomic(path, sb.buf, sb.len, 0644);
                        sb_release(&sb);
                        if (w < 0 && r >= 0)
                                r = target_fail(t, w, "cannot write %s: %s", path, strerror(-w));
                }
                free(text);
        }
        json_decref(objs);
        /* Prune files of objects the cluster no longer has. */
        DIR *d = opendir(odir);
        if (d) {
                struct dirent *e;
                while ((e = readdir(d))) {
                        size_t l = strlen(e->d_name);
                        if (e->d_name[0] == '.' || l < 5 || !streq(e->d_name + l - 5, ".json"))
                                continue;
                        bool keep = false;
                        for (size_t k = 0; names[k] && !keep; k++)
                                keep = streq(names[k], e->d_name);
                        if (!keep)
                                (void)unlinkat(dirfd(d), e->d_name, 0);
                }
                closedir(d);
        }
        strv_free(names);
        return r < 0 ? r : 0;
}

static int local_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p,
                               size_t idx)
{
        local_target *lt = LT(t);
        if (idx >= p->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");
        const char *bin = NULL;
        int r = lt_resolve_etcd(lt, c->version, &bin);
        if (r < 0)
                return r;
        _cleanup_(strv_freep) char **argv = render_member_command(c, p, idx);
        if (!argv || !argv[0])
                return target_fail(t, -EINVAL, "member %s: no command rendered", mp->name);
        str_assign(&argv[0], xstrdup(bin));

        local_member *m = NULL;
        r = lt_get_or_create_member(lt, c, mp->name, &m);
        if (r < 0)
                return r;

        lt_poll_exit(lt, m);
        _cleanup_free_ char *identity = lt_data_identity(m);
        if (mp->data_identity && !streq_ptr(identity, mp->data_identity))
                return target_fail(t, -ESTALE,
                                   "member %s: its data directory is %s; it cannot rejoin "
                                   "with the same identity and must be replaced",
                                   m->name, identity ? "not the one it ran with" : "gone");
        if (!identity && (r = lt_write_marker(lt, m)) < 0)
                return r;
        /* Same command, other config hash: the TLS material it trusts changed (a new CA). */
        bool other_config =
            mp->config_hash && m->config_hash && !streq(m->config_hash, mp->config_hash);
        if (m->pid) {
                if (!other_config && process_runs(m->pid, argv)) {
                        /* Running this very command (started by an older gitcd): note its hash. */
                        if (mp->config_hash && !streq_ptr(m->config_hash, mp->config_hash)) {
                                str_assign(&m->config_hash, xstrdup(mp->config_hash));
                                r = lt_member_save(m);
                                if (r < 0)
                                        return target_fail(
                                            t, r, "member %s: cannot write member.json: %s",
                                            m->name, strerror(-r));
                        }
                        return 0;
                }
                log_debug("local target: member %s runs an older command or config; restarting it",
                          m->name);
                r = lt_stop_process(lt, m);
                if (r < 0)
                        return r;
        } else if (m->crashed && !m->stopped && !other_config && strv_equal(m->command, argv)) {
                /* Same command, waiting out its backoff: tick() restarts it. */
                return 0;
        }

        strv_free(m->command);
        m->command = strv_copy(argv);
        str_assign(&m->config_hash, xstrdup_null(mp->config_hash));
        str_assign(&m->version, xstrdup(c->version));
        if (mp->client_url)
                str_assign(&m->client_url, xstrdup(mp->client_url));
        if (mp->tls_dir)
                str_assign(&m->tls_dir, xstrdup(mp->tls_dir));
        return lt_start_member(lt, m);
}

static int local_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = lt_get_member(lt, c->namespace_, c->name, member, &m);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        lt_poll_exit(lt, m);
        r = lt_stop_process(lt, m);
        if (r < 0)
                return r;
        m->stopped = true;
        m->crashed = false;
        r = lt_member_save(m);
        if (r < 0)
                return target_fail(t, r, "member %s: cannot write member.json: %s", member,
                                   strerror(-r));
        return 0;
}

static int local_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = lt_get_member(lt, c->namespace_, c->name, member, &m);
        if (r < 0 && r != -ENOENT)
                return r;
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *mdir = path_join(cdir, member);
        if (m) {
                lt_poll_exit(lt, m);
                r = lt_stop_process(lt, m);
                if (r < 0)
                        return r;
                m->stopped = true;
        }
        if (keep_data) {
                _cleanup_free_ char *data = path_join(mdir, "data");
                if (path_is_dir(data)) {
                        _cleanup_free_ char *removed = path_join(cdir, ".removed");
                        r = mkdir_p(removed, 0700);
                        _cleanup_free_ char *dest =
                            xasprintf("%s/%s-%lld", removed, member, (long long)now_wall_ms());
                        if (r >= 0 && rename(data, dest) < 0)
                                r = -errno;
                        if (r < 0)
                                return target_fail(t, r, "member %s: cannot keep its data: %s",
                                                   member, strerror(-r));
                }
        }
        r = rm_rf(mdir);
        if (m)
                drop_loaded(lt, m);
        if (r < 0)
                return target_fail(t, r, "cannot remove %s: %s", mdir, strerror(-r));
        return 0;
}

/* The folders remove_member(keep_data) made for member: .removed/<member>-<ms>. */
static int local_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        local_target *lt = LT(t);
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *removed = path_join(cdir, ".removed");
        char **dirs = NULL;
        size_t n = 0;
        int r = lt_list_subdirs(removed, &dirs, &n);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return target_fail(t, r, "cannot list %s: %s", removed, strerror(-r));
        _cleanup_free_ char *prefix = xasprintf("%s-", member);
        for (size_t i = 0; i < n; i++) {
                const char *rest =
                    strncmp(dirs[i], prefix, strlen(prefix)) == 0 ? dirs[i] + strlen(prefix) : NULL;
                /* "<member>-<ms>" only: demo-1 must not take demo-10's folder. */
                if (r >= 0 && rest && *rest && strspn(rest, "0123456789") == strlen(rest)) {
                        _cleanup_free_ char *p = path_join(removed, dirs[i]);
                        r = rm_rf(p);
                        if (r < 0)
                                (void)target_fail(t, r, "cannot remove %s: %s", p, strerror(-r));
                }
                free(dirs[i]);
        }
        free(dirs);
        return r < 0 ? r : 0;
}

static int local_list_members(target *t, const char *namespace_, const char *cluster,
                              char ***ret_names, size_t *ret_n)
{
        local_target *lt = LT(t);
        if (!target_name_is_component(namespace_) || !target_name_is_component(cluster))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", namespace_,
                                   cluster);
        _cleanup_free_ char *cdir = cluster_dir(lt, namespace_, cluster);
        char **dirs = NULL;
        size_t n = 0;
        int r = lt_list_subdirs(cdir, &dirs, &n);
        if (r == -ENOENT) {
                *ret_names = xcalloc(1, sizeof(char *));
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return target_fail(t, r, "cannot list %s: %s", cdir, strerror(-r));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *mj = xasprintf("%s/%s/member.json", cdir, dirs[i]);
                if (path_exists(mj))
                        dirs[k++] = dirs[i];
                else
                        free(dirs[i]);
        }
        dirs[k] = NULL;
        *ret_names = dirs;
        *ret_n = k;
        return 0;
}

static void local_free(target *t)
{
        local_target *lt = LT(t);
        target_event_set_release(&lt->events);
        for (size_t i = 0; i < lt->n_members; i++)
                local_member_free(lt->members[i]);
        free(lt->members);
        strmap_release(&lt->member_index);
        for (size_t i = 0; i < lt->n_binaries; i++) {
                free(lt->binaries[i].version);
                free(lt->binaries[i].path);
        }
        free(lt->binaries);
        free(lt->state_dir);
        free(lt->etcd_dir);
        if (lt->wake_fd >= 0)
                close(lt->wake_fd);
        if (lt->epoll_fd >= 0)
                close(lt->epoll_fd);
        free(lt);
}

/*
 * gitcd's client identity: the operator/ folder of a member of the cluster
 * (each member's is issued from the cluster CA), the first in name order
 * that has one. None yet: no client TLS identity (NULLs).
 */
static int local_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                            char **ret_key)
{
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!render_client_tls(c))
                return 0;
        char **names = NULL;
        size_t n = 0;
        int r = local_list_members(t, c->namespace_, c->name, &names, &n);
        if (r < 0)
                return r;
        local_target *lt = LT(t);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *op = xasprintf("%s/%s/tls/%s", cdir, names[i], "operator");
                _cleanup_free_ char *cert = path_join(op, "tls.crt");
                if (!*ret_ca && path_exists(cert)) {
                        *ret_ca = path_join(op, "ca.crt");
                        *ret_cert = TAKE_PTR(cert);
                        *ret_key = path_join(op, "tls.key");
                }
        }
        strv_free(names);
        return 0;
}

static int local_tls_certs(target *t, const etcd_cluster *c, const membership_plan *p,
                           target_cert **ret_certs, size_t *ret_n)
{
        local_target *lt = LT(t);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        return local_tls_certificates(cdir, c, p, ret_certs, ret_n);
}

/* Renewal: the member's own folders, swapped whole (pki/auto.c); the process keeps running. */
static int local_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                           const char *member, int64_t now_ms)
{
        local_target *lt = LT(t);
        if (!member)
                return 0; /* every leaf lives in a member's folder */
        if (!target_name_is_component(c->namespace_) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", c->namespace_,
                                   c->name);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *tls_error = NULL;
        int r = local_tls_ensure(cdir, c, p, member, true, now_ms, &tls_error);
        if (r < 0)
                return target_fail(t, r, "cluster %s/%s: %s", c->namespace_, c->name,
                                   tls_error ? tls_error : "TLS material cannot be renewed");
        return r;
}

/*
 * The member's log: its etcd writes stdout and stderr to etcd.log in its
 * folder (local-process.c). Its last max_bytes, read from the end, so a
 * large log costs no more than the tail.
 */
static int local_member_logs(target *t, const etcd_cluster *c, const char *member, size_t max_bytes,
                             char **ret_text, char **ret_source)
{
        local_target *lt = (local_target *)t;
        local_member *m = NULL;
        int r = lt_get_member(lt, c->namespace_, c->name, member, &m);
        if (r == -ENOENT)
                return target_fail(t, r, "%s/%s: no member %s here", c->namespace_, c->name,
                                   member);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = member_file(m, "etcd.log");
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return target_fail(t, -errno, "%s: %s", path, strerror(errno));
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return target_fail(t, -EINVAL, "%s: not a regular file", path);
        size_t size = (size_t)st.st_size;
        size_t want = MIN(size, max_bytes);
        _cleanup_free_ char *buf = xmalloc(want + 1);
        size_t got = 0;
        while (got < want) {
                ssize_t n = pread(fd, buf + got, want - got, (off_t)(size - want + got));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return target_fail(t, -errno, "%s: %s", path, strerror(errno));
                if (n == 0)
                        break;
                got += (size_t)n;
        }
        /* cut at a line start unless the whole file fits */
        *ret_text = size <= max_bytes ? xstrndup(buf, got) : target_text_tail(buf, got, got - 1);
        *ret_source = TAKE_PTR(path);
        return 0;
}

static const target_debug_ops local_debug_ops = {
    .member_logs = local_member_logs,
};

static const target_ops local_ops = {
    .name = "local",
    .caps = LOCAL_TARGET_CAPS,
    .place_member = local_place_member,
    .ensure_shared = local_ensure_shared,
    .ensure_member = local_ensure_member,
    .stop_member = local_stop_member,
    .remove_member = local_remove_member,
    .drop_kept_data = local_drop_kept_data,
    .member_status = local_member_status,
    .list_members = local_list_members,
    .tick = local_tick,
    .wait_event = local_wait_event,
    .take_events = local_take_events,
    .client_tls = local_client_tls,
    .tls_certificates = local_tls_certs,
    .renew_tls = local_renew_tls,
    .restore_member = local_restore_member,
    .data_revision = local_data_revision,
    .debug = &local_debug_ops,
    .free = local_free,
};

static void adopt_member(local_target *lt, const char *ns, const char *cluster, const char *member,
                         void *userdata)
{
        (void)userdata;
        local_member *m = NULL;
        (void)lt_get_member(lt, ns, cluster, member, &m);
}

/* Load every member recorded under state_dir, adopting the running ones. */
static void adopt_all(local_target *lt)
{
        lt_for_each_member_dir(lt, adopt_member, NULL);
}

int local_target_new(const local_target_opts *opts, target **ret)
{
        if (!opts || isempty(opts->state_dir))
                return -EINVAL;
        /* Absolute, because members run in their own directory and get these paths as flags. */
        char *abs_state = NULL;
        int r = target_state_dir(opts->state_dir, &abs_state);
        if (r < 0)
                return r;
        local_target *lt = XNEW(local_target);
        lt->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        lt->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (lt->epoll_fd < 0) {
                r = -errno;
                if (lt->wake_fd >= 0)
                        close(lt->wake_fd);
                free(abs_state);
                free(lt);
                return r;
        }
        if (lt->wake_fd >= 0) {
                struct epoll_event ev = {.events = EPOLLIN, .data.fd = lt->wake_fd};
                if (epoll_ctl(lt->epoll_fd, EPOLL_CTL_ADD, lt->wake_fd, &ev) < 0) {
                        close(lt->wake_fd);
                        lt->wake_fd = -1;
                }
        }
        lt->base.ops = &local_ops;
        lt->state_dir = abs_state;
        if (!isempty(opts->etcd_dir)) {
                lt->etcd_dir = xstrdup(opts->etcd_dir);
        } else {
                lt->etcd_dir = etcd_default_dir();
        }
        lt->health_timeout_ms = opts->health_timeout_ms > 0 ? opts->health_timeout_ms : 2000;
        lt->backoff_base_ms = opts->backoff_base_ms > 0 ? opts->backoff_base_ms : 1000;
        lt->backoff_max_ms = opts->backoff_max_ms > 0 ? opts->backoff_max_ms : 30000;
        if (lt->backoff_max_ms < lt->backoff_base_ms)
                lt->backoff_max_ms = lt->backoff_base_ms;
        lt->stop_timeout_ms = opts->stop_timeout_ms > 0 ? opts->stop_timeout_ms : 10000;
        adopt_all(lt);
        *ret = &lt->base;
        return 0;
}

/*
 * A local member's folder: member.json (the command last started, exits,
 * backoff), the gitcd-member marker in the data directory (its data
 * identity), the folders of the state directory walked for the members they
 * hold, and the data put there by a snapshot restore or read back from it.
 */

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/local-internal.h"

int lt_member_save(local_member *m)
{
        json_t *o = json_object();
        json_object_set_new(o, "namespace", json_string(m->ns));
        json_object_set_new(o, "cluster", json_string(m->cluster));
        json_object_set_new(o, "name", json_string(m->name));
        json_t *ports = json_object();
        json_object_set_new(ports, "client", json_integer(m->client_port));
        json_object_set_new(ports, "peer", json_integer(m->peer_port));
        json_object_set_new(ports, "metrics", json_integer(m->metrics_port));
        json_object_set_new(o, "ports", ports);
        if (m->client_url)
                json_object_set_new(o, "clientURL", json_string(m->client_url));
        if (m->tls_dir)
                json_object_set_new(o, "tlsDir", json_string(m->tls_dir));
        if (m->command) {
                json_t *cmd = json_array();
                for (size_t i = 0; m->command[i]; i++)
                        json_array_append_new(cmd, json_string(m->command[i]));
                json_object_set_new(o, "command", cmd);
        }
        if (m->config_hash)
                json_object_set_new(o, "configHash", json_string(m->config_hash));
        if (m->version)
                json_object_set_new(o, "version", json_string(m->version));
        char buf[64];
        format_rfc3339(m->created_ms, buf, sizeof(buf));
        json_object_set_new(o, "created", json_string(buf));
        json_object_set_new(o, "createdMs", json_integer(m->created_ms));
        json_object_set_new(o, "restarts", json_integer(m->restarts));
        json_t *exits = json_array();
        for (size_t i = 0; i < m->n_exits; i++)
                json_array_append_new(exits, json_integer(m->exits[i]));
        json_object_set_new(o, "exits", exits);
        if (m->last_exit)
                json_object_set_new(o, "lastExit", json_string(m->last_exit));

        char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!text)
                return -ENOMEM;
        _cleanup_free_ char *path = member_file(m, "member.json");
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, text);
        sb_appendc(&sb, '\n');
        free(text);
        int r = write_file_atomic(path, sb.buf, sb.len, 0644);
        sb_release(&sb);
        return r;
}

static const char *json_str(json_t *o, const char *key)
{
        return json_string_value(json_object_get(o, key));
}

/* Read member.json into a new record. -ENOENT when there is none, -EBADMSG when unreadable. */
int lt_member_load(local_target *lt, const char *ns, const char *cluster, const char *name,
                   local_member **ret)
{
        _cleanup_(local_member_freep) local_member *m = local_member_new(lt, ns, cluster, name);
        _cleanup_free_ char *path = member_file(m, "member.json");
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(path, MEMBER_JSON_MAX, &data, &len);
        if (r < 0)
                return r;
        json_t *o = json_loadb(data, len, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return -EBADMSG;
        }
        json_t *ports = json_object_get(o, "ports");
        m->client_port = (int)json_integer_value(json_object_get(ports, "client"));
        m->peer_port = (int)json_integer_value(json_object_get(ports, "peer"));
        m->metrics_port = (int)json_integer_value(json_object_get(ports, "metrics"));
        m->client_url = xstrdup_null(json_str(o, "clientURL"));
        m->tls_dir = xstrdup_null(json_str(o, "tlsDir"));
        json_t *cmd = json_object_get(o, "command");
        if (json_is_array(cmd) && json_array_size(cmd) > 0) {
                size_t n = json_array_size(cmd);
                m->command = xcalloc(n + 1, sizeof(char *));
                for (size_t i = 0; i < n; i++) {
                        const char *s = json_string_value(json_array_get(cmd, i));
                        m->command[i] = xstrdup(s ? s : "");
                }
        }
        m->config_hash = xstrdup_null(json_str(o, "configHash"));
        m->version = xstrdup_null(json_str(o, "version"));
        m->created_ms = json_integer_value(json_object_get(o, "createdMs"));
        m->restarts = (int)json_integer_value(json_object_get(o, "restarts"));
        json_t *exits = json_object_get(o, "exits");
        for (size_t i = 0; i < json_array_size(exits) && m->n_exits < MAX_EXITS_KEPT; i++)
                m->exits[m->n_exits++] = json_integer_value(json_array_get(exits, i));
        m->last_exit = xstrdup_null(json_str(o, "lastExit"));
        json_decref(o);
        *ret = TAKE_PTR(m);
        return 0;
}

/*
 * Whether etcd left data in the member's folder: anything in data/member.
 * Asked each pass; a folder with a subfolder (etcd's wal and snap, once it
 * has run) answers from one stat, without reading the folder.
 */
bool lt_member_has_data(const local_member *m)
{
        _cleanup_free_ char *path = xasprintf("%s/data/member", m->dir);
        struct stat sb;
        if (stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode))
                return false;
        if (sb.st_nlink > 2)
                return true;
        DIR *d = opendir(path);
        if (!d)
                return false;
        bool any = false;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (!streq(e->d_name, ".") && !streq(e->d_name, "..")) {
                        any = true;
                        break;
                }
        }
        closedir(d);
        return any;
}

/*
 * The data identity marker (TARGET_DATA_MARKER) in the member's data
 * directory: written before the member first starts, gone with a wiped
 * directory. Its id is the data identity member_status reports.
 */
static char *marker_path(const local_member *m)
{
        return xasprintf("%s/data/" TARGET_DATA_MARKER, m->dir);
}

/* The id in the member's marker; NULL without one (or one naming another member). */
char *lt_data_identity(const local_member *m)
{
        _cleanup_free_ char *path = marker_path(m), *text = NULL;
        size_t len = 0;
        if (read_file(path, 4096, &text, &len) < 0)
                return NULL;
        return target_data_marker_id(text, m->name);
}

int lt_write_marker(local_target *lt, const local_member *m)
{
        _cleanup_free_ char *data_dir = xasprintf("%s/data", m->dir);
        int r = mkdir_p(data_dir, 0700);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot create %s: %s", m->name,
                                   data_dir, strerror(-r));
        _cleanup_free_ char *text = target_data_marker_new(m->name);
        if (!text)
                return target_fail(&lt->base, -EIO,
                                   "member %s: no random bytes for a data identity", m->name);
        _cleanup_free_ char *path = marker_path(m);
        r = write_file_atomic(path, text, strlen(text), 0600);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot write %s: %s", m->name, path,
                                   strerror(-r));
        return 0;
}

/* Names of the subdirectories of path (no dot entries), sorted. */
int lt_list_subdirs(const char *path, char ***ret, size_t *ret_n)
{
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        char **v = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *p = path_join(path, e->d_name);
                if (!path_is_dir(p))
                        continue;
                v = xgrow(v, &alloc, n + 2, sizeof(char *));
                v[n++] = xstrdup(e->d_name);
                v[n] = NULL;
        }
        closedir(d);
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
                        char *tmp = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = tmp;
                }
        if (!v)
                v = xcalloc(1, sizeof(char *));
        *ret = v;
        *ret_n = n;
        return 0;
}

/* Call fn for every <namespace>/<cluster>/<member> folder under state_dir/clusters. */
void lt_for_each_member_dir(local_target *lt,
                            void (*fn)(local_target *lt, const char *ns, const char *cluster,
                                       const char *member, void *userdata),
                            void *userdata)
{
        _cleanup_free_ char *root = xasprintf("%s/clusters", lt->state_dir);
        _cleanup_(strv_freep) char **nss = NULL;
        size_t n_ns = 0;
        if (lt_list_subdirs(root, &nss, &n_ns) < 0)
                return;
        for (size_t i = 0; i < n_ns; i++) {
                _cleanup_free_ char *nsdir = path_join(root, nss[i]);
                _cleanup_(strv_freep) char **cls = NULL;
                size_t n_cl = 0;
                if (lt_list_subdirs(nsdir, &cls, &n_cl) < 0)
                        continue;
                for (size_t j = 0; j < n_cl; j++) {
                        _cleanup_free_ char *cldir = path_join(nsdir, cls[j]);
                        _cleanup_(strv_freep) char **mems = NULL;
                        size_t n_m = 0;
                        if (lt_list_subdirs(cldir, &mems, &n_m) < 0)
                                continue;
                        for (size_t k = 0; k < n_m; k++)
                                fn(lt, nss[i], cls[j], mems[k], userdata);
                }
        }
}

/*
 * spec.bootstrap.restore: etcd's tool restores the snapshot into data.restore/
 * beside the member's data folder, which is then renamed to data/. A crash
 * midway leaves data.restore/ (thrown away by the next try) and no data.
 */
int local_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                         const target_restore *rs)
{
        local_target *lt = LT(t);
        if (idx >= p->n || !p->members[idx].name || !p->members[idx].peer_url)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        local_member *m = NULL;
        int r = lt_get_or_create_member(lt, c, mp->name, &m);
        if (r < 0)
                return r;
        lt_poll_exit(lt, m);
        if (m->pid || lt_member_has_data(m))
                return target_fail(t, -EEXIST,
                                   "member %s has data already; a snapshot is never restored "
                                   "over it",
                                   m->name);
        _cleanup_free_ char *data = xasprintf("%s/data", m->dir);
        _cleanup_free_ char *tmp = xasprintf("%s/data.restore", m->dir);
        if ((r = target_restore_into(t, p, idx, rs, tmp)) < 0)
                return r;
        /* data/ may exist empty (created for a start that never happened) */
        (void)rm_rf(data);
        if (rename(tmp, data) < 0) {
                r = -errno;
                (void)rm_rf(tmp);
                return target_fail(t, r, "member %s: cannot rename %s to %s: %s", m->name, tmp,
                                   data, strerror(-r));
        }
        r = fsync_parent_dir(data);
        if (r < 0)
                return target_fail(t, r, "member %s: cannot sync %s: %s", m->name, m->dir,
                                   strerror(-r));
        return 0;
}

/*
 * The revision of a stopped member's data: etcd's tool reads
 * data/member/snap/db where it is (read-only; the member does not run). A
 * folder without member.json (put there by hand) is read too: its data is
 * what would start.
 */
int local_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                        int64_t *ret_revision)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = lt_get_member(lt, c->namespace_, c->name, member, &m);
        if (r < 0 && r != -ENOENT)
                return r;
        if (m) {
                lt_poll_exit(lt, m);
                if (m->pid)
                        return target_fail(t, -EBUSY,
                                           "member %s runs (pid %ld): its data is being written",
                                           member, (long)m->pid);
        }
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *db = xasprintf("%s/%s/data/member/snap/db", cdir, member);
        if (!path_exists(db))
                return target_fail(t, -ENOENT, "member %s holds no data (no %s)", member, db);
        return target_db_revision(t, member, tool, db, ret_revision);
}

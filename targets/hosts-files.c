/*
 * What the hosts target writes and reads on a machine: the data identity
 * marker, the systemd unit or static Pod manifest of a member (and what plan
 * shows of them: hosts_machine_effects, hosts_machine_adoption), the restored
 * data sent to a machine (restore_member: etcd's tool runs on gitcd's host)
 * and the data read back from one (data_revision). Design: targets/hosts.c.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "targets/locked.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

int ht_write_marker(hosts_target *ht, const host_spec *h, const char *name, char **ret_text)
{
        _cleanup_free_ char *text = target_data_marker_new(name);
        if (!text)
                return target_fail(&ht->base, -EIO, "no random bytes for a data identity");
        /*
         * One command, the marker on its standard input: the folder made and
         * the file written atomically as hosts_install_command writes any
         * file. A placement claims its machines one after another, and this
         * is one round trip where a folder's mkdir and an SFTP upload (a
         * session opened on the machine first) were several.
         */
        _cleanup_free_ char *qd = ssh_quote(h->data_dir), *path = marker_path(h);
        _cleanup_free_ char *install = hosts_install_script(path, 0600);
        _cleanup_free_ char *cmd = xasprintf("mkdir -p -m 0700 -- %s && %s", qd, install);
        int k = ht_run_input(ht, h, cmd, text, strlen(text), NULL);
        if (k < 0)
                return k;
        log_debug("hosts target: wrote %s on %s (%zu bytes, mode 0600)", path, h->address,
                  strlen(text));
        if (ret_text)
                *ret_text = TAKE_PTR(text);
        return 0;
}

char **hosts_machine_effects(const etcd_cluster *c, size_t i)
{
        assert(i < c->hosts.n);
        const host_spec *h = &c->hosts.items[i];
        char **l = xcalloc(8, sizeof(char *));
        size_t n = 0;
        _cleanup_free_ char *file = ht_member_file(c, h), *marker = marker_path(h);
        _cleanup_free_ char *unit = unit_name(c);
        /* paths and names are validated free of shell characters: shown unquoted */
        const char *via = streq(h->ssh_user, "root") ? "" : ", through sudo -n";
        l[n++] = xasprintf("ssh %s@%s port %d (host key checked against known_hosts)", h->ssh_user,
                           h->address, h->ssh_port);
        l[n++] = xasprintf("mkdir -p -m 0700 %s, then write %s (0600)%s: the data identity "
                           "marker, when the member is placed",
                           h->data_dir, marker,
                           streq(h->ssh_user, "root") ? "" : " (both through sudo -n)");
        if (c->tls.provider == TLS_PROVIDER_AUTO && (render_client_tls(c) || render_peer_tls(c)))
                l[n++] =
                    xasprintf("write the member's leaves into %s/%s (tls.crt, tls.key, ca.crt; "
                              "0600 in folders 0700%s), before it starts and when renewed",
                              h->tls_dir,
                              render_client_tls(c) && render_peer_tls(c) ? "{client,peer}"
                              : render_client_tls(c)                     ? "client"
                                                                         : "peer",
                              via);
        if (h->mode == HOST_MODE_STATIC_POD) {
                l[n++] = xasprintf("write %s (0600%s): the member's static Pod, run by kubelet; "
                                   "rewritten when its configuration changes",
                                   file, via);
        } else {
                l[n++] = xasprintf("write %s (0644%s): the member's unit, ExecStart=%s; rewritten "
                                   "when its configuration changes",
                                   file, via, h->etcd_binary);
                l[n++] = xasprintf("systemctl enable --no-reload %s && systemctl daemon-reload "
                                   "&& systemctl restart --no-block %s (after each rewrite%s; "
                                   "for a new unit the daemon-reload only when systemd shows it "
                                   "is needed (LoadState, NeedDaemonReload); queued, not waited "
                                   "on: gitcd waits on etcd's health; a new cluster's members are "
                                   "started together once every machine is ready)",
                                   unit, unit, via);
        }
        return l;
}

char *hosts_machine_adoption(const etcd_cluster *c, size_t i)
{
        assert(i < c->hosts.n);
        const host_spec *h = &c->hosts.items[i];
        _cleanup_free_ char *own = ht_member_file(c, h);
        if (h->mode == HOST_MODE_SYSTEMD)
                return xasprintf(
                    "before creating anything, apply reads %s and, when systemd says it is "
                    "active, the unit " HOSTS_FOREIGN_UNIT " as `systemctl cat` shows it, "
                    "wherever it lies, with its drop-ins (ExecStart=, Environment= and the "
                    "EnvironmentFile= files it names, read over SSH; etcd's flags and its "
                    "ETCD_* variables); if etcd already runs from one of them, apply adopts "
                    "that cluster instead of bootstrapping: %sit imports the member etcd lists "
                    "with its peer URL on this machine's advertiseAddress %s, whatever its "
                    "--name, with its etcd member ID, as %s-%zu (the machine's position; a "
                    "member already named %s-<n> keeps that name), writes the marker into its "
                    "running data dir (which must be %s), and, one member at a time with every "
                    "member healthy, runs systemctl disable --now " HOSTS_FOREIGN_UNIT "%s (the "
                    "file stays), waits until that etcd stopped, and starts the unit below "
                    "(one restart, which renames a member named otherwise in etcd, keeping its "
                    "ID and data; no restart for gitcd's own unit with the same configuration), "
                    "or it refuses and changes nothing (docs/hosts.md, \"Adopting a running "
                    "cluster\")",
                    own,
                    auto_tls(c) ? "with TLS, it first imports the CA the running etcd trusts "
                                  "(--trusted-ca-file, and the ca.key beside it) as the "
                                  "cluster's CA; "
                                : "",
                    h->advertise_address, c->name, i, c->name, h->data_dir,
                    streq(h->ssh_user, "root") ? "" : " (through sudo -n)");
        return xasprintf(
            "before creating anything, apply reads %s/" HOSTS_KUBEADM_MANIFEST " (kubeadm) and %s; "
            "if etcd already runs from one of them, apply adopts that cluster instead of "
            "bootstrapping: %sit imports the member etcd lists with its peer URL on this machine's "
            "advertiseAddress %s, whatever its --name, with its etcd member ID, as %s-%zu (the "
            "machine's position; a "
            "member already named %s-<n> keeps that name), writes the marker into its running "
            "data dir (which must be %s), and, one member at a time with every member healthy, "
            "replaces " HOSTS_KUBEADM_MANIFEST " by the manifest below (one restart, which renames "
            "a member named otherwise, such as kubeadm's node name, in etcd, keeping its ID and "
            "data; no restart for gitcd's own file with the same configuration), or it refuses "
            "and changes nothing (docs/hosts.md, \"Adopting a running cluster\")",
            h->manifest_dir, own,
            auto_tls(c) ? "with TLS, it first imports the CA the running etcd trusts "
                          "(--trusted-ca-file, and the ca.key beside it) as the cluster's CA; "
                        : "",
            h->advertise_address, c->name, i, c->name, h->data_dir);
}

/* The systemd unit of member mp running argv (targets/hosts-unit.c writes it). */
int ht_unit_text(const etcd_cluster *c, const member_plan *mp, char *const *argv, char **ret_text,
                 char **ret_why)
{
        _cleanup_free_ char *cluster = xasprintf("%s/%s", c->namespace_, c->name);
        hosts_unit_meta m = {
            .member = mp->name, .config_hash = mp->config_hash, .cluster = cluster};
        return hosts_unit_render(&m, argv, ret_text, ret_why);
}

static bool has_control(const char *s)
{
        for (const char *p = s ? s : ""; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                        return true;
        return false;
}

/*
 * A kubelet static Pod, written as JSON (valid YAML) after the two header
 * comments; jansson escapes every string. A value with a control character
 * is refused all the same (-EINVAL, *ret_why): intake refuses them, and the
 * header comments end at a newline.
 */
int ht_manifest_text(const etcd_cluster *c, const member_plan *mp, char *const *argv,
                     char **ret_text, char **ret_why)
{
        bool bad = has_control(mp->name) || has_control(mp->config_hash) || has_control(c->name) ||
                   has_control(c->repository) || has_control(c->version) ||
                   has_control(mp->data_dir) || has_control(mp->tls_dir);
        for (size_t i = 0; argv[i]; i++)
                bad = bad || has_control(argv[i]);
        if (bad) {
                *ret_why = xstrdup("a value of the manifest holds a control character");
                return -EINVAL;
        }
        json_t *cmd = json_array();
        for (size_t i = 0; argv[i]; i++)
                json_array_append_new(cmd, json_string(argv[i]));
        _cleanup_free_ char *image = xasprintf("%s:v%s", c->repository, c->version);
        json_t *pod = json_pack(
            "{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s,s:s}},s:{s:b,s:s,s:[{s:s,s:s,s:o,s:[{s:s,s:s}]}],"
            "s:[{s:s,s:{s:s,s:s}}]}}",
            "apiVersion", "v1", "kind", "Pod", "metadata", "name", mp->name, "namespace",
            "kube-system", "labels", "app.kubernetes.io/name", "etcd", "app.kubernetes.io/instance",
            c->name, "app.kubernetes.io/managed-by", "gitcd", "spec", "hostNetwork", 1,
            "priorityClassName", "system-node-critical", "containers", "name", "etcd", "image",
            image, "command", cmd, "volumeMounts", "name", "data", "mountPath", mp->data_dir,
            "volumes", "name", "data", "hostPath", "path", mp->data_dir, "type",
            "DirectoryOrCreate");
        assert(pod);
        if (auto_tls(c) && mp->tls_dir) {
                json_t *spec = json_object_get(pod, "spec");
                json_t *ctr = json_array_get(json_object_get(spec, "containers"), 0);
                json_array_append_new(json_object_get(ctr, "volumeMounts"),
                                      json_pack("{s:s,s:s,s:b}", "name", "tls", "mountPath",
                                                mp->tls_dir, "readOnly", 1));
                json_array_append_new(json_object_get(spec, "volumes"),
                                      json_pack("{s:s,s:{s:s,s:s}}", "name", "tls", "hostPath",
                                                "path", mp->tls_dir, "type", "Directory"));
        }
        _cleanup_free_ char *body = json_dumps(pod, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(pod);
        *ret_text = xasprintf(NAME_PREFIX "%s\n" HASH_PREFIX "%s\n%s\n", mp->name,
                              mp->config_hash ? mp->config_hash : "", body);
        return 0;
}

/* The files and folders under dir, relative to it (folders before what they hold). */
/*
 * Send one local file to path on machine h atomically (upload()), mapped
 * from disk rather than read into memory: a snapshot of gigabytes costs
 * page cache, not gitcd's heap.
 */
static int upload_file(hosts_target *ht, const host_spec *h, const char *local, const char *path)
{
        _cleanup_close_ int fd = open(local, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return target_fail(&ht->base, -errno, "cannot open %s: %s", local, strerror(errno));
        struct stat st;
        if (fstat(fd, &st) < 0)
                return target_fail(&ht->base, -errno, "cannot stat %s: %s", local, strerror(errno));
        size_t len = (size_t)st.st_size;
        void *data = NULL;
        if (len > 0) {
                data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
                if (data == MAP_FAILED)
                        return target_fail(&ht->base, -errno, "cannot map %s: %s", local,
                                           strerror(errno));
                (void)madvise(data, len, MADV_SEQUENTIAL);
        }
        int k = ht_upload(ht, h, path, data, len, 0600);
        if (data)
                (void)munmap(data, len);
        return k;
}

/*
 * spec.bootstrap.restore, and a disaster recovery from a snapshot, on a
 * machine. etcd's tool (rs->tool, the gitcd host's, as for the local
 * target) restores into <state>/hosts/<ns>/<name>/restore-<member>/ on the
 * gitcd host; its files go to <data_dir>/member.restore/ on the machine,
 * each written atomically, and one command renames that folder to
 * <data_dir>/member/ and syncs. All or nothing: a failure or a crash
 * midway leaves member.restore/ (removed by the next try) and no member/,
 * so the member is not seen to have data and is restored again, never
 * started empty. A machine whose member/ holds a write-ahead log (etcd's
 * data), or running the member, is never restored over (-EEXIST); a
 * member/ without one is no data (what an etcd that was starting left) and
 * is replaced by the restored one.
 */
int hosts_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                         const target_restore *rs)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                ht_remember(ht, c);
        if (idx >= p->n || !p->members[idx].name || !p->members[idx].peer_url)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        if (ht_check_machines(ht, c) < 0)
                return -EINVAL;
        const member_plan *mp = &p->members[idx];
        if (!target_name_is_component(mp->name))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", mp->name);
        const host_spec *h = NULL;
        _cleanup_(ht_view_release) machine_view v = {0};
        int k = ht_member_machine(ht, c, mp, &h, &v);
        if (k < 0)
                return k;
        _cleanup_free_ char *stage = xasprintf("%s/member.restore", h->data_dir);
        _cleanup_free_ char *final = xasprintf("%s/member", h->data_dir);
        _cleanup_free_ char *qs = ssh_quote(stage), *qf = ssh_quote(final);
        /* etcd's data is its write-ahead log: a member/ without one holds nothing etcd uses */
        _cleanup_free_ char *has_wal = xasprintf("ls -- %s/wal/*.wal >/dev/null 2>&1", qf);
        bool wal = false;
        if (v.has_data && !v.file_member) {
                _cleanup_free_ char *cmd = xasprintf("if %s; then echo wal; fi", has_wal);
                _cleanup_free_ char *out = NULL;
                if ((k = ht_exec_cmd(ht, h, cmd, NULL, 0, &out)) < 0)
                        return k;
                wal = out && strneq(out, "wal", 3);
        }
        if (wal || v.file_member)
                return target_fail(t, -EEXIST,
                                   "member %s has data already on %s; a snapshot is never "
                                   "restored over it",
                                   mp->name, h->address);
        if (!v.claimed_by && (k = ht_write_marker(ht, h, mp->name, NULL)) < 0)
                return k;

        _cleanup_free_ char *home = NULL;
        if ((k = ht_tls_home(ht, c, &home)) < 0)
                return k;
        _cleanup_free_ char *local = xasprintf("%s/restore-%s", home, mp->name);
        if ((k = target_restore_into(t, p, idx, rs, local)) < 0)
                return k;

        _cleanup_free_ char *src = path_join(local, "member");
        _cleanup_(path_list_release) path_list files = {0}, dirs = {0};
        k = list_tree(src, &files, &dirs);
        if (k < 0)
                (void)target_fail(t, k, "member %s: cannot read the restored data in %s: %s",
                                  mp->name, src, strerror(-k));
        if (k >= 0) {
                _cleanup_(sb_release) strbuf cmd = STRBUF_INIT;
                sb_printf(&cmd, "rm -rf -- %s && mkdir -m 0700 -- %s", qs, qs);
                for (size_t i = 0; i < dirs.n; i++) {
                        _cleanup_free_ char *d = path_join(stage, dirs.paths[i]);
                        _cleanup_free_ char *qd = ssh_quote(d);
                        sb_printf(&cmd, " && mkdir -m 0700 -- %s", qd);
                }
                k = run(ht, h, sb_str(&cmd), NULL);
        }
        for (size_t i = 0; k >= 0 && i < files.n; i++) {
                _cleanup_free_ char *from = path_join(src, files.paths[i]);
                _cleanup_free_ char *to = path_join(stage, files.paths[i]);
                k = upload_file(ht, h, from, to);
        }
        (void)rm_rf(local);
        if (k < 0)
                return k;
        /*
         * member/ may not exist: its absence is what says "not restored yet".
         * A member/ without a write-ahead log is what an etcd that was
         * starting left behind (it creates member/snap/db before it finds it
         * cannot start, and kubelet or systemd may start it once more after
         * its file is gone): no data, removed, so the snapshot goes in.
         */
        _cleanup_free_ char *qdd = ssh_quote(h->data_dir);
        _cleanup_free_ char *cmd = xasprintf("if [ -e %s ] && ! %s; then rm -rf -- %s; fi; "
                                             "[ ! -e %s ] && mv -- %s %s && sync %s",
                                             qf, has_wal, qf, qf, qs, qf, qdd);
        if ((k = run(ht, h, cmd, NULL)) < 0)
                return k;
        log_debug("hosts target: restored member %s on %s from %s", mp->name, h->address,
                  rs->snapshot);
        return 0;
}

/*
 * Copy the file at path on machine h into fd as `cat` prints it (through
 * sudo for a user other than root), at most max bytes: a stall times out,
 * a large file does not.
 */
static int fetch_file(hosts_target *ht, const host_spec *h, const char *path, int fd, uint64_t max)
{
        _cleanup_free_ char *q = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf("cat -- %s", q);
        _cleanup_free_ char *full = hosts_command(h, cmd);
        _cleanup_free_ char *transport = NULL, *err = NULL;
        ssh_conn *conn = NULL;
        int status = -1;
        target_blocking_begin();
        int k = ssh_pool_get(ht->pool, h->address, h->ssh_port, h->ssh_user, &conn, &transport);
        if (k >= 0) {
                k = ssh_exec_to_fd(conn, full, fd, max, &status, &err);
                if (k < 0)
                        transport = xstrdup(ssh_last_error(conn));
                ssh_pool_put(ht->pool, conn);
        }
        target_blocking_end();
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, transport);
        if (status != 0)
                return ht_command_failed(ht, h, cmd, status, err);
        return 0;
}

/*
 * The revision of a stopped member's data on its machine: member/snap/db
 * is copied over SSH into <state>/hosts/<ns>/<name>/revision-<member>.db on
 * gitcd's host (the machines need no etcd tool, as for restores), read
 * there with etcd's tool and deleted. A member/ without a write-ahead log
 * holds no data (what an etcd that could not start left), as for restores.
 */
int hosts_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                        int64_t *ret_revision)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                ht_remember(ht, c);
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        _cleanup_(ht_view_release) machine_view v = {0};
        int idx = -1;
        int k = ht_locate(ht, c, member, &idx, &v);
        if (k < 0)
                return k;
        if (idx < 0)
                return target_fail(t, -ENOENT, "member %s is on no machine of spec.hosts", member);
        const host_spec *h = &c->hosts.items[idx];
        if (v.file_member || v.foreign_file)
                return target_fail(t, -EBUSY, "%s: member %s runs there: its data is being written",
                                   h->address, member);
        _cleanup_free_ char *wal = xasprintf("%s/member/wal", h->data_dir);
        _cleanup_free_ char *db = xasprintf("%s/member/snap/db", h->data_dir);
        _cleanup_free_ char *qw = ssh_quote(wal), *qd = ssh_quote(db);
        _cleanup_free_ char *test =
            xasprintf("if ls -- %s/*.wal >/dev/null 2>&1 && [ -f %s ]; then echo data; fi", qw, qd);
        _cleanup_free_ char *out = NULL;
        if (v.has_data && (k = ht_exec_cmd(ht, h, test, NULL, 0, &out)) < 0)
                return k;
        if (!out || !strneq(out, "data", 4))
                return target_fail(t, -ENOENT,
                                   "%s: member %s holds no data (no %s with a "
                                   "write-ahead log beside it)",
                                   h->address, member, db);
        _cleanup_free_ char *home = NULL;
        if ((k = ht_tls_home(ht, c, &home)) < 0)
                return k;
        _cleanup_free_ char *copy = xasprintf("%s/revision-%s.db", home, member);
        _cleanup_close_ int fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return target_fail(t, -errno, "cannot create %s: %s", copy, strerror(errno));
        k = fetch_file(ht, h, db, fd, UINT64_C(64) << 30);
        if (k >= 0)
                k = target_db_revision(t, member, tool, copy, ret_revision);
        (void)unlink(copy);
        return k;
}

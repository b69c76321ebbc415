/*
 * The hosts target (see hosts.h): members on the machines of spec.hosts,
 * driven over SSH (targets/ssh.c).
 *
 * Design: the machines themselves hold the only target-specific facts, so
 * nothing is recorded on the gitcd side. Which machine holds a member is
 * the data identity marker in the machine's data directory (written when
 * the member is placed: it claims the machine); whether it should run is
 * the presence of its unit file or manifest; which configuration it runs
 * is the config hash written into that file. One probe (one SSH command)
 * reads all three; every operation starts from a probe, so the target is
 * level-based like the reconciler and survives a gitcd restart unchanged.
 *
 * A member whose file exists but whose marker is gone lost its data disk:
 * it is reported MEMBER_DATA_LOST and ensure_member refuses to start it
 * empty (-ESTALE), so the reconciler replaces it. A machine that does not
 * answer is never guessed about: when the member's machine cannot be
 * probed, status and list fail with the transport's error instead of
 * reporting "absent" (which would make the reconciler create it again).
 *
 * Not yet: TLS material (ensure_shared refuses TLS), SSH users other than
 * root (sudo), adoption of members gitcd did not create.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "api/spec.h"
#include "render/render.h"
#include "targets/hosts.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define HASH_PREFIX "# gitcd-config-hash: "
#define NAME_PREFIX "# gitcd-member: "
#define PROBE_MAX   (64u * 1024u)

typedef struct hosts_target {
        target base; /* first: target * converts to hosts_target * */
        hosts_target_opts o;
        char *systemctl;
        ssh_pool *pool;
        /*
         * A copy of each cluster an operation was called with:
         * list_members gets only the cluster's name and needs its machines.
         */
        etcd_cluster **seen;
        size_t n_seen, alloc_seen;
} hosts_target;

/* What one probe of a machine found for a cluster. */
typedef struct machine_view {
        int error;         /* 0, or why the machine could not be probed */
        char *claimed_by;  /* the member named by the marker, NULL without marker */
        char *identity;    /* the marker's id: the member's data identity */
        bool has_data;     /* <dataDir>/member exists (etcd wrote its data) */
        char *file_member; /* the member named by the unit file or manifest, NULL without */
        char *file_hash;   /* the config hash written in it */
} machine_view;

DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);

static hosts_target *HT(target *t)
{
        return (hosts_target *)t;
}

/* Remember c's machines for list_members (a copy through the normalized form). */
static void remember(hosts_target *ht, const etcd_cluster *c)
{
        size_t i;
        for (i = 0; i < ht->n_seen; i++)
                if (streq(ht->seen[i]->namespace_, c->namespace_) &&
                    streq(ht->seen[i]->name, c->name))
                        break;
        if (i < ht->n_seen) {
                _cleanup_free_ char *a = spec_hash(ht->seen[i]), *b = spec_hash(c);
                if (streq(a, b))
                        return;
        }
        json_t *j = spec_to_json(c);
        etcd_cluster *copy = NULL;
        diag_list d = DIAG_LIST_INIT;
        int k = spec_from_json(j, "hosts target", &copy, &d);
        json_decref(j);
        diag_list_release(&d);
        if (k < 0)
                return; /* cannot happen for a validated spec; list_members then reports it */
        if (i < ht->n_seen) {
                etcd_cluster_free(ht->seen[i]);
                ht->seen[i] = copy;
                return;
        }
        ht->seen = xgrow(ht->seen, &ht->alloc_seen, ht->n_seen + 1, sizeof(*ht->seen));
        ht->seen[ht->n_seen++] = copy;
}

static void view_release(machine_view *v)
{
        free(v->claimed_by);
        free(v->identity);
        free(v->file_member);
        free(v->file_hash);
        memset(v, 0, sizeof(*v));
}

static char *marker_path(const host_spec *h)
{
        return xasprintf("%s/" TARGET_DATA_MARKER, h->data_dir);
}

/* The unit file or manifest of the cluster's member on machine h. */
static char *member_file(const etcd_cluster *c, const host_spec *h)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return xasprintf("%s/etcd-%s-%s.yaml", h->manifest_dir, c->namespace_, c->name);
        return xasprintf("%s/etcd-%s-%s.service", h->unit_dir, c->namespace_, c->name);
}

static char *unit_name(const etcd_cluster *c)
{
        return xasprintf("etcd-%s-%s.service", c->namespace_, c->name);
}

static int conn(hosts_target *ht, const host_spec *h, ssh_conn **ret)
{
        const char *err = NULL;
        if (!streq(h->ssh_user, "root"))
                return target_fail(&ht->base, -EOPNOTSUPP,
                                   "%s: ssh.user %s: only root is supported yet (sudo is not)",
                                   h->address, h->ssh_user);
        int k = ssh_pool_get(ht->pool, h->address, h->ssh_port, h->ssh_user, ret, &err);
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, err ? err : strerror(-k));
        return 0;
}

/* Run a command; a non-zero exit is -EIO with its stderr. */
static int run(hosts_target *ht, const host_spec *h, const char *cmd, char **ret_out)
{
        ssh_conn *c = NULL;
        _cleanup_free_ char *out = NULL, *err = NULL;
        int status = -1;
        int k = conn(ht, h, &c);
        if (k < 0)
                return k;
        k = ssh_exec(c, cmd, NULL, 0, &status, &out, &err);
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, ssh_last_error(c));
        if (status != 0)
                return target_fail(&ht->base, -EIO, "%s: `%s` failed (exit %d): %s", h->address,
                                   cmd, status, isempty(err) ? "no message" : err);
        if (ret_out)
                *ret_out = TAKE_PTR(out);
        return 0;
}

static char *line_value(const char *text, const char *prefix)
{
        size_t n = strlen(prefix);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (strneq(p, prefix, n)) {
                        const char *end = strchr(p + n, '\n');
                        return xstrndup(p + n, end ? (size_t)(end - p - n) : strlen(p + n));
                }
        }
        return NULL;
}

/*
 * One SSH command reads the marker, whether etcd data exists, and the
 * header lines of the member file.
 */
static int probe(hosts_target *ht, const etcd_cluster *c, const host_spec *h, machine_view *v)
{
        _cleanup_free_ char *marker = marker_path(h), *file = member_file(c, h);
        _cleanup_free_ char *qm = ssh_quote(marker), *qf = ssh_quote(file);
        _cleanup_free_ char *member_dir = xasprintf("%s/member", h->data_dir);
        _cleanup_free_ char *qd = ssh_quote(member_dir);
        _cleanup_free_ char *cmd = xasprintf(
            "if [ -f %s ]; then sed -n 's/^member=/marker=/p; s/^id=/marker-id=/p' %s; fi; "
            "if [ -d %s ]; then echo data=yes; fi; "
            "if [ -f %s ]; then head -n 3 %s; fi",
            qm, qm, qd, qf, qf);
        _cleanup_free_ char *out = NULL;
        memset(v, 0, sizeof(*v));
        int k = run(ht, h, cmd, &out);
        if (k < 0) {
                v->error = k;
                return k;
        }
        v->claimed_by = line_value(out, "marker=");
        v->identity = line_value(out, "marker-id=");
        _cleanup_free_ char *data = line_value(out, "data=");
        v->has_data = data != NULL;
        v->file_member = line_value(out, NAME_PREFIX);
        v->file_hash = line_value(out, HASH_PREFIX);
        return 0;
}

/* The machine advertising the host part of url ("http://10.0.0.11:2380"), or -1. */
static int machine_of_url(const etcd_cluster *c, const char *url)
{
        const char *p = url ? strstr(url, "://") : NULL;
        if (!p)
                return -1;
        p += 3;
        const char *end = strrchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        for (size_t i = 0; i < c->hosts.n; i++)
                if (strlen(c->hosts.items[i].advertise_address) == n &&
                    strneq(c->hosts.items[i].advertise_address, p, n))
                        return (int)i;
        return -1;
}

/*
 * Find the machine holding member `name` (by marker or by its file). 0
 * with *ret_idx -1 when no machine holds it and every machine answered;
 * the error of an unreachable machine when it is not found elsewhere.
 */
static int locate(hosts_target *ht, const etcd_cluster *c, const char *name, int *ret_idx,
                  machine_view *ret_view)
{
        int unreachable = 0;
        for (size_t i = 0; i < c->hosts.n; i++) {
                machine_view v;
                if (probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        unreachable = v.error;
                        continue;
                }
                if (streq_ptr(v.claimed_by, name) || streq_ptr(v.file_member, name)) {
                        *ret_idx = (int)i;
                        *ret_view = v;
                        return 0;
                }
                view_release(&v);
        }
        *ret_idx = -1;
        return unreachable;
}

static int write_marker(hosts_target *ht, const host_spec *h, const char *name)
{
        _cleanup_free_ char *text = target_data_marker_new(name);
        if (!text)
                return target_fail(&ht->base, -EIO, "no random bytes for a data identity");
        _cleanup_free_ char *qd = ssh_quote(h->data_dir);
        _cleanup_free_ char *mk = xasprintf("mkdir -p -m 0700 -- %s", qd);
        int k = run(ht, h, mk, NULL);
        if (k < 0)
                return k;
        ssh_conn *sc = NULL;
        if ((k = conn(ht, h, &sc)) < 0)
                return k;
        _cleanup_free_ char *path = marker_path(h);
        k = ssh_upload(sc, path, text, strlen(text), 0600);
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, ssh_last_error(sc));
        return 0;
}

static int hosts_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        if (!c->hosts.set || c->hosts.n == 0)
                return target_fail(t, -EINVAL, "cluster %s/%s has no spec.hosts", c->namespace_,
                                   c->name);
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");

        int idx = machine_of_url(c, mp->peer_url);
        if (idx < 0) {
                machine_view v;
                int k = locate(ht, c, mp->name, &idx, &v);
                if (idx >= 0)
                        view_release(&v);
                (void)k; /* an unreachable machine cannot be claimed: look for a free one */
        }
        for (size_t i = 0; idx < 0 && i < c->hosts.n; i++) {
                machine_view v;
                if (probe(ht, c, &c->hosts.items[i], &v) < 0)
                        continue;
                bool free_machine = !v.claimed_by && !v.file_member;
                view_release(&v);
                if (!free_machine)
                        continue;
                int k = write_marker(ht, &c->hosts.items[i], mp->name);
                if (k < 0)
                        return k;
                idx = (int)i;
                log_debug("hosts target: member %s placed on %s", mp->name,
                          c->hosts.items[i].address);
        }
        if (idx < 0)
                return target_fail(t, -ENOSPC,
                                   "no free machine for member %s in spec.hosts.machines (every "
                                   "reachable machine holds a member of %s/%s)",
                                   mp->name, c->namespace_, c->name);

        const host_spec *h = &c->hosts.items[idx];
        int cp = ht->o.client_port, pp = ht->o.peer_port, mport = ht->o.metrics_port;
        str_assign(&mp->client_url, xasprintf("http://%s:%d", h->advertise_address, cp));
        str_assign(&mp->peer_url, xasprintf("http://%s:%d", h->advertise_address, pp));
        str_assign(&mp->listen_client_url, xstrdup(mp->client_url));
        str_assign(&mp->listen_peer_url, xstrdup(mp->peer_url));
        str_assign(&mp->listen_metrics_url, xasprintf("http://%s:%d", h->advertise_address, mport));
        str_assign(&mp->data_dir, xstrdup(h->data_dir));
        str_assign(&mp->tls_dir, xstrdup(h->tls_dir));
        return 0;
}

static int hosts_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        (void)p;
        if (render_client_tls(c) || render_peer_tls(c))
                return target_fail(t, -EOPNOTSUPP,
                                   "cluster %s/%s: TLS on the hosts target is not supported yet",
                                   c->namespace_, c->name);
        return 0;
}

/* A systemd unit running argv. Words are single-quoted (systemd accepts POSIX quoting). */
static char *unit_text(const etcd_cluster *c, const member_plan *mp, char *const *argv)
{
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, NAME_PREFIX "%s\n" HASH_PREFIX "%s\n", mp->name,
                  mp->config_hash ? mp->config_hash : "");
        sb_printf(&sb,
                  "[Unit]\nDescription=etcd member %s of %s/%s (managed by gitcd)\n"
                  "After=network-online.target\nWants=network-online.target\n\n"
                  "[Service]\nType=notify\nExecStart=",
                  mp->name, c->namespace_, c->name);
        for (size_t i = 0; argv[i]; i++) {
                _cleanup_free_ char *q = ssh_quote(argv[i]);
                sb_printf(&sb, "%s%s", i ? " " : "", q);
        }
        sb_append(&sb, "\nRestart=always\nRestartSec=5\nLimitNOFILE=65536\n\n"
                       "[Install]\nWantedBy=multi-user.target\n");
        return sb_detach(&sb);
}

/* A kubelet static Pod, written as JSON (valid YAML) after the two header comments. */
static char *manifest_text(const etcd_cluster *c, const member_plan *mp, char *const *argv)
{
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
        _cleanup_free_ char *body = json_dumps(pod, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(pod);
        return xasprintf(NAME_PREFIX "%s\n" HASH_PREFIX "%s\n%s\n", mp->name,
                         mp->config_hash ? mp->config_hash : "", body);
}

static int hosts_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p,
                               size_t idx)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        if (idx >= p->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        int m = machine_of_url(c, mp->peer_url);
        if (m < 0)
                return target_fail(t, -EINVAL, "member %s: its peer URL %s is on no machine",
                                   mp->name, mp->peer_url ? mp->peer_url : "(none)");
        const host_spec *h = &c->hosts.items[m];
        _cleanup_(view_release) machine_view v = {0};
        int k = probe(ht, c, h, &v);
        if (k < 0)
                return k;
        if (v.claimed_by && !streq(v.claimed_by, mp->name))
                return target_fail(t, -EBUSY, "%s holds member %s of %s/%s, not %s", h->address,
                                   v.claimed_by, c->namespace_, c->name, mp->name);
        if (!v.claimed_by && v.file_member)
                return target_fail(t, -ESTALE,
                                   "member %s: the data identity marker on %s is gone (a wiped "
                                   "data disk); it cannot rejoin with the same identity and must "
                                   "be replaced",
                                   mp->name, h->address);
        if (mp->data_identity && v.claimed_by && !streq_ptr(v.identity, mp->data_identity))
                return target_fail(t, -ESTALE,
                                   "member %s: the data on %s is not the data it ran with; it "
                                   "must be replaced",
                                   mp->name, h->address);
        if (!v.claimed_by && (k = write_marker(ht, h, mp->name)) < 0)
                return k;

        bool pod = h->mode == HOST_MODE_STATIC_POD;
        _cleanup_free_ char *unit = unit_name(c);
        _cleanup_free_ char *qu = ssh_quote(unit);
        if (v.file_member && streq_ptr(v.file_hash, mp->config_hash)) {
                if (pod)
                        return 0; /* kubelet keeps it running */
                _cleanup_free_ char *cmd = xasprintf("%s is-active --quiet %s || %s start %s",
                                                     ht->systemctl, qu, ht->systemctl, qu);
                return run(ht, h, cmd, NULL);
        }

        _cleanup_(strv_freep) char **argv = render_member_command(c, p, idx);
        if (!argv || !argv[0])
                return target_fail(t, -EINVAL, "member %s: no command rendered", mp->name);
        if (!pod)
                str_assign(&argv[0], xstrdup(h->etcd_binary));
        _cleanup_free_ char *text = pod ? manifest_text(c, mp, argv) : unit_text(c, mp, argv);
        _cleanup_free_ char *path = member_file(c, h);
        ssh_conn *sc = NULL;
        if ((k = conn(ht, h, &sc)) < 0)
                return k;
        k = ssh_upload(sc, path, text, strlen(text), pod ? 0600 : 0644);
        if (k < 0)
                return target_fail(t, k, "%s: %s", h->address, ssh_last_error(sc));
        log_debug("hosts target: wrote %s on %s for member %s", path, h->address, mp->name);
        if (pod)
                return 0;
        /* one remote command, so the restart happens even if gitcd stops half-way */
        _cleanup_free_ char *cmd = xasprintf("%s daemon-reload && %s enable %s && %s restart %s",
                                             ht->systemctl, ht->systemctl, qu, ht->systemctl, qu);
        return run(ht, h, cmd, NULL);
}

/* Stop the member on machine h: remove its file (after stopping the unit). */
static int stop_on(hosts_target *ht, const etcd_cluster *c, const host_spec *h)
{
        _cleanup_free_ char *path = member_file(c, h), *unit = unit_name(c);
        _cleanup_free_ char *qp = ssh_quote(path), *qu = ssh_quote(unit);
        _cleanup_free_ char *cmd = NULL;
        if (h->mode == HOST_MODE_STATIC_POD)
                cmd = xasprintf("rm -f -- %s", qp);
        else
                cmd = xasprintf("if [ -f %s ]; then %s disable --now %s && rm -f -- %s && "
                                "%s daemon-reload; fi",
                                qp, ht->systemctl, qu, qp, ht->systemctl);
        return run(ht, h, cmd, NULL);
}

static int hosts_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        _cleanup_(view_release) machine_view v = {0};
        int idx;
        int k = locate(ht, c, member, &idx, &v);
        if (idx < 0)
                return k; /* not found: 0, or the error of a machine that did not answer */
        if (!v.file_member)
                return 0;
        return stop_on(ht, c, &c->hosts.items[idx]);
}

static int hosts_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        _cleanup_(view_release) machine_view v = {0};
        int idx;
        int k = locate(ht, c, member, &idx, &v);
        if (idx < 0)
                return k;
        const host_spec *h = &c->hosts.items[idx];
        if ((k = stop_on(ht, c, h)) < 0)
                return k;
        if (keep_data)
                return 0;
        _cleanup_free_ char *qd = ssh_quote(h->data_dir);
        _cleanup_free_ char *cmd = xasprintf("rm -rf -- %s", qd);
        return run(ht, h, cmd, NULL);
}

static size_t ignore_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        strbuf *sb = userdata;
        size_t n = size * nmemb;
        if (sb->len + n > 65536)
                return 0;
        sb_append_len(sb, ptr, n);
        return n;
}

/*
 * GET <client URL>/health from etcd itself: 1 healthy, 0 not (detail says
 * why). NOSPACE is excluded, as on the local target (targets/local.c).
 */
static int health(hosts_target *ht, const char *client_url, char **ret_detail)
{
        _cleanup_free_ char *url = xasprintf("%s/health?exclude=NOSPACE", client_url);
        CURL *h = curl_easy_init();
        strbuf body = STRBUF_INIT;
        if (!h) {
                *ret_detail = xstrdup("cannot create an HTTP handle");
                return 0;
        }
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ht->o.health_timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ht->o.health_timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ignore_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        CURLcode cr = curl_easy_perform(h);
        curl_easy_cleanup(h);
        int ok = 0;
        if (cr != CURLE_OK) {
                *ret_detail = xasprintf("not answering yet (%s)", curl_easy_strerror(cr));
        } else {
                json_t *o = json_loadb(sb_str(&body), body.len, 0, NULL);
                json_t *hv = json_object_get(o, "health");
                ok = (json_is_string(hv) && streq(json_string_value(hv), "true")) ||
                     json_is_true(hv);
                *ret_detail = xstrdup(ok ? "healthy" : "no leader or unhealthy");
                json_decref(o);
        }
        sb_release(&body);
        return ok;
}

static int hosts_member_status(target *t, const etcd_cluster *c, const char *member,
                               target_member_status *ret_status)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                remember(ht, c);
        _cleanup_(view_release) machine_view v = {0};
        int idx;
        int k = locate(ht, c, member, &idx, &v);
        if (k < 0)
                return k;
        if (idx < 0) {
                *ret_status = (target_member_status){.state = MEMBER_ABSENT,
                                                     .detail = xstrdup("on no machine")};
                return 0;
        }
        const host_spec *h = &c->hosts.items[idx];
        member_runtime_state state;
        char *detail = NULL;
        if (!v.claimed_by) {
                state = MEMBER_DATA_LOST;
                detail = xasprintf("%s: the data identity marker in %s is gone (wiped data disk)",
                                   h->address, h->data_dir);
        } else if (!v.file_member) {
                state = v.has_data ? MEMBER_STOPPED : MEMBER_ABSENT;
                detail = xasprintf("%s: %s", h->address,
                                   v.has_data ? "stopped, data kept" : "placed, not started");
        } else {
                _cleanup_free_ char *url =
                    xasprintf("http://%s:%d", h->advertise_address, ht->o.client_port);
                _cleanup_free_ char *why = NULL;
                state = health(ht, url, &why) ? MEMBER_READY : MEMBER_STARTING;
                detail = xasprintf("%s: %s", h->address, why);
        }
        *ret_status = (target_member_status){
            .state = state,
            .config_hash = state == MEMBER_READY || state == MEMBER_STARTING
                               ? xstrdup_null(v.file_hash)
                               : NULL,
            .data_identity = v.claimed_by ? xstrdup_null(v.identity) : NULL,
            .detail = detail,
        };
        return 0;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_name(char ***names, size_t *n, size_t *alloc, const char *name)
{
        for (size_t i = 0; i < *n; i++)
                if (streq((*names)[i], name))
                        return;
        *names = xgrow(*names, alloc, *n + 2, sizeof(char *));
        (*names)[(*n)++] = xstrdup(name);
        (*names)[*n] = NULL;
}

static int hosts_list_members(target *t, const char *namespace_, const char *cluster,
                              char ***ret_names, size_t *ret_n)
{
        hosts_target *ht = HT(t);
        const etcd_cluster *c = NULL;
        for (size_t i = 0; i < ht->n_seen && !c; i++)
                if (streq(ht->seen[i]->namespace_, namespace_) && streq(ht->seen[i]->name, cluster))
                        c = ht->seen[i];
        if (!c)
                return target_fail(t, -ENOENT,
                                   "the machines of %s/%s are not known yet (no operation on the "
                                   "cluster so far)",
                                   namespace_, cluster);
        char **names = xcalloc(1, sizeof(char *));
        size_t n = 0, alloc = 1;
        int k = 0;
        for (size_t i = 0; i < c->hosts.n; i++) {
                machine_view v;
                if (probe(ht, c, &c->hosts.items[i], &v) < 0) {
                        k = v.error;
                        break;
                }
                if (v.claimed_by)
                        add_name(&names, &n, &alloc, v.claimed_by);
                if (v.file_member)
                        add_name(&names, &n, &alloc, v.file_member);
                view_release(&v);
        }
        if (k < 0) {
                strv_free(names);
                return k; /* never a partial list: a missing name means "delete" to the caller */
        }
        qsort(names, n, sizeof(char *), cmp_str);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

static int hosts_tick(target *t)
{
        ssh_pool_new_pass(HT(t)->pool);
        return 0;
}

static int hosts_wait_event(target *t, int timeout_ms)
{
        (void)t;
        /* no events from remote machines: the reconciler polls */
        if (timeout_ms > 0)
                msleep(timeout_ms);
        return 0;
}

static int hosts_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                            char **ret_key)
{
        (void)t;
        (void)c;
        *ret_ca = *ret_cert = *ret_key = NULL;
        return 0;
}

static void hosts_free(target *t)
{
        hosts_target *ht = HT(t);
        ssh_pool_free(ht->pool);
        free(ht->systemctl);
        for (size_t i = 0; i < ht->n_seen; i++)
                etcd_cluster_free(ht->seen[i]);
        free(ht->seen);
        free(ht);
}

static const target_ops hosts_ops = {
    .name = "hosts",
    .caps = 0,
    .place_member = hosts_place_member,
    .ensure_shared = hosts_ensure_shared,
    .ensure_member = hosts_ensure_member,
    .stop_member = hosts_stop_member,
    .remove_member = hosts_remove_member,
    .member_status = hosts_member_status,
    .list_members = hosts_list_members,
    .tick = hosts_tick,
    .wait_event = hosts_wait_event,
    .client_tls = hosts_client_tls,
    .free = hosts_free,
};

int hosts_target_new(const hosts_target_opts *opts, target **ret)
{
        if (!opts || !opts->ssh.known_hosts)
                return -EINVAL;
        hosts_target *ht = XNEW(hosts_target);
        ht->base.ops = &hosts_ops;
        ht->o = *opts;
        ht->systemctl = xstrdup(opts->systemctl ? opts->systemctl : "systemctl");
        if (!ht->o.client_port)
                ht->o.client_port = 2379;
        if (!ht->o.peer_port)
                ht->o.peer_port = 2380;
        if (!ht->o.metrics_port)
                ht->o.metrics_port = 2381;
        if (!ht->o.health_timeout_ms)
                ht->o.health_timeout_ms = 2000;
        ht->pool = ssh_pool_new(&opts->ssh);
        *ret = &ht->base;
        return 0;
}

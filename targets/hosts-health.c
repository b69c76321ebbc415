/*
 * The hosts target's member status: a member's state from the probe of its
 * machine and the health GET of its client URL (targets/health.h), with
 * the process start time etcd reports; hosts_member_healthy for adoption.
 */

#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <jansson.h>
#include "etcd/health.h"
#include "targets/health.h"
#include "util/strbuf.h"
#include "util/http.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

/* A static Pod whose manifest is younger than this is checked to run it (member_status). */
#define RESTART_CHECK_S 300

struct body {
        strbuf sb;
        size_t cap;
};

static size_t collect_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct body *b = userdata;
        size_t n = size * nmemb;
        if (b->sb.len + n > b->cap)
                return 0;
        sb_append_len(&b->sb, ptr, n);
        return n;
}

/* GET <client URL><path> from etcd itself, with gitcd's client identity; at most cap bytes. */
static CURLcode member_get(hosts_target *ht, const etcd_cluster *c, const char *client_url,
                           const char *path, struct body *b)
{
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (render_client_tls(c))
                (void)ht_tls_client_files(ht, c, &ca, &cert, &key);
        _cleanup_free_ char *url = xasprintf("%s%s", client_url, path);
        /* A member is asked directly, never through a proxy (util/http.h). */
        http_opts ho = {.proxy = HTTP_PROXY_NONE,
                        .timeout_ms = ht->o.health_timeout_ms,
                        .connect_timeout_ms = ht->o.health_timeout_ms};
        if (ca)
                ho.tls = (http_tls){.ca_file = ca, .cert_file = cert, .key_file = key};
        CURL *h = http_handle_new(&ho);
        if (!h)
                return CURLE_OUT_OF_MEMORY;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
        CURLcode cr = etcd_http_perform(h, url, &b->sb);
        curl_easy_cleanup(h);
        return cr;
}

/*
 * The member's health (etcd_member_health, the one definition), asked
 * with gitcd's client identity when the cluster serves TLS.
 */
static int health(hosts_target *ht, const etcd_cluster *c, const char *client_url,
                  char **ret_detail)
{
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (render_client_tls(c))
                (void)ht_tls_client_files(ht, c, &ca, &cert, &key);
        etcd_health_opts o = {.timeout_ms = ht->o.health_timeout_ms};
        if (ca)
                o.tls = (http_tls){.ca_file = ca, .cert_file = cert, .key_file = key};
        return etcd_member_health(client_url, &o, ret_detail);
}

/*
 * When the etcd answering at client_url started (Unix seconds, the
 * machine's clock), from process_start_time_seconds of its /metrics; -1
 * when it cannot be told.
 */
static double process_started(hosts_target *ht, const etcd_cluster *c, const char *client_url)
{
        struct body b = {.sb = STRBUF_INIT, .cap = 8u << 20};
        double t = -1;
        if (member_get(ht, c, client_url, "/metrics", &b) == CURLE_OK) {
                static const char key[] = "\nprocess_start_time_seconds ";
                const char *p = strstr(sb_str(&b.sb), key);
                char *end = NULL;
                double v = p ? strtod(p + strlen(key), &end) : 0;
                if (p && end != p + strlen(key) && v > 0)
                        t = v;
        }
        sb_release(&b.sb);
        return t;
}

int hosts_member_status(target *t, const etcd_cluster *c, const char *member,
                        target_member_status *ret_status)
{
        hosts_target *ht = HT(t);
        if (c->hosts.set)
                ht_remember(ht, c);
        _cleanup_(ht_view_release) machine_view v = {0};
        int idx;
        int k = ht_locate(ht, c, member, &idx, &v);
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
        const char *running_hash = NULL;
        if (!v.claimed_by) {
                state = MEMBER_DATA_LOST;
                detail = xasprintf("%s: the data identity marker in %s is gone (wiped data disk)",
                                   h->address, h->data_dir);
        } else if (!v.file_member && v.foreign_file && v.has_data) {
                /* adopted, not moved yet (reconciler/adopt.c stopped half-way): kubeadm's
                 * etcd.yaml or the unit etcd.service runs it; a configuration hash of none
                 * of gitcd's makes the rolling restart move it, one member at a time */
                _cleanup_free_ char *url =
                    xasprintf("%s://%s:%d", render_client_tls(c) ? "https" : "http",
                              h->advertise_address, ht->o.client_port);
                _cleanup_free_ char *why = NULL;
                state = health(ht, c, url, &why) ? MEMBER_READY : MEMBER_STARTING;
                bool pod = h->mode == HOST_MODE_STATIC_POD;
                detail = xasprintf("%s: run by %s: %s", h->address,
                                   pod ? HOSTS_KUBEADM_MANIFEST : HOSTS_FOREIGN_UNIT, why);
                running_hash = pod ? "kubeadm" : HOSTS_FOREIGN_UNIT;
        } else if (!v.file_member) {
                state = v.has_data ? MEMBER_STOPPED : MEMBER_ABSENT;
                detail = xasprintf("%s: %s", h->address,
                                   v.has_data ? "stopped, data kept" : "placed, not started");
        } else {
                _cleanup_free_ char *url =
                    xasprintf("%s://%s:%d", render_client_tls(c) ? "https" : "http",
                              h->advertise_address, ht->o.client_port);
                _cleanup_free_ char *why = NULL;
                state = health(ht, c, url, &why) ? MEMBER_READY : MEMBER_STARTING;
                /* a kubelet restarts a static Pod onto a changed manifest when it next looks
                 * (every 20 s): until then the etcd answering is the one from before */
                if (state == MEMBER_READY && h->mode == HOST_MODE_STATIC_POD &&
                    v.file_mtime_s > 0 && v.file_age_s < RESTART_CHECK_S) {
                        double started = process_started(ht, c, url);
                        /* the start time is the boot time (whole seconds) plus the
                         * process's age: up to a second early; the file's, truncated.
                         * Not read (a slow or refused /metrics): not known to have
                         * restarted, so not ready either */
                        if (started < 0) {
                                state = MEMBER_STARTING;
                                str_assign(&why, xstrdup("answers, but its start time could not "
                                                         "be read (/metrics): not known yet "
                                                         "whether the kubelet restarted it onto "
                                                         "the manifest"));
                        } else if (started < (double)v.file_mtime_s - 1) {
                                state = MEMBER_STARTING;
                                str_assign(&why, xstrdup("still the etcd started before its "
                                                         "manifest changed: the kubelet has not "
                                                         "restarted it yet"));
                        }
                }
                detail = xasprintf("%s: %s", h->address, why);
        }
        *ret_status = (target_member_status){
            .state = state,
            .config_hash = state == MEMBER_READY || state == MEMBER_STARTING
                               ? xstrdup_null(running_hash ? running_hash : v.file_hash)
                               : NULL,
            .data_identity = v.claimed_by ? xstrdup_null(v.identity) : NULL,
            .detail = detail,
        };
        return 0;
}

int hosts_member_healthy(target *t, const etcd_cluster *c, const char *client_url)
{
        _cleanup_free_ char *why = NULL;
        return health(HT(t), c, client_url, &why);
}

/*
 * The local target's member status: whether the member's process runs, and
 * the health GET of its client URL (targets/health.h), made with the shared
 * lock let go, on copies of the URL and paths.
 */

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include "targets/health.h"
#include "targets/locked.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/local-internal.h"

#define CRASH_LOOP_EXITS 5

/* --- health ------------------------------------------------------------ */

static size_t collect_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        strbuf *sb = userdata;
        size_t n = size * nmemb;
        if (sb->len + n > 65536)
                return 0;
        sb_append_len(sb, ptr, n);
        return n;
}

/*
 * GET <client_url>/health without the NOSPACE and CORRUPT alarms
 * (TARGET_HEALTH_PATH, targets/health.h): 1 healthy, 0 not (detail says
 * why).
 */
static int check_health(local_target *lt, local_member *m, char **ret_detail)
{
        if (!m->client_url) {
                *ret_detail = xstrdup("no client URL recorded");
                return 0;
        }
        _cleanup_free_ char *base = xstrdup(m->client_url);
        char *comma = strchr(base, ',');
        if (comma)
                *comma = '\0';
        _cleanup_free_ char *url = xasprintf("%s" TARGET_HEALTH_PATH, base);
        /* A member is asked directly, never through a proxy (util/http.h). */
        http_opts ho = {.proxy = HTTP_PROXY_NONE,
                        .timeout_ms = lt->health_timeout_ms,
                        .connect_timeout_ms = lt->health_timeout_ms};
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (strneq(base, "https:", 6) && m->tls_dir) {
                const char *cas[] = {"operator/ca.crt", "client/ca.crt"};
                for (size_t i = 0; i < ARRAY_SIZE(cas) && !ca; i++) {
                        char *p = xasprintf("%s/%s", m->tls_dir, cas[i]);
                        if (path_exists(p))
                                ca = p;
                        else
                                free(p);
                }
                ho.tls.ca_file = ca;
                cert = xasprintf("%s/operator/tls.crt", m->tls_dir);
                key = xasprintf("%s/operator/tls.key", m->tls_dir);
                if (path_exists(cert) && path_exists(key)) {
                        ho.tls.cert_file = cert;
                        ho.tls.key_file = key;
                }
        }
        CURL *h = http_handle_new(&ho);
        if (!h) {
                *ret_detail = xstrdup("cannot create an HTTP handle");
                return 0;
        }
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        /* The handle, URL and paths are this call's own: other clusters' operations go on. */
        target_blocking_begin();
        CURLcode cr = target_health_perform(h, url, &body);
        target_blocking_end();
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(h);
        int healthy = 0;
        if (cr != CURLE_OK) {
                *ret_detail = xasprintf("not answering yet (%s)", curl_easy_strerror(cr));
        } else {
                json_t *o = json_loadb(sb_str(&body), body.len, 0, NULL);
                json_t *hv = json_object_get(o, "health");
                if ((json_is_string(hv) && streq(json_string_value(hv), "true")) ||
                    json_is_true(hv)) {
                        healthy = 1;
                        *ret_detail = xstrdup("healthy");
                } else if (hv) {
                        const char *reason = json_string_value(json_object_get(o, "reason"));
                        if (isempty(reason) || strstr(reason, "NO LEADER"))
                                *ret_detail = xstrdup("no leader");
                        else
                                *ret_detail = xasprintf("unhealthy: %s", reason);
                } else {
                        *ret_detail = xasprintf("unexpected /health answer (HTTP %ld)", code);
                }
                json_decref(o);
        }
        sb_release(&body);
        return healthy;
}

int local_member_status(target *t, const etcd_cluster *c, const char *member,
                        target_member_status *ret_status)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = lt_get_member(lt, c->namespace_, c->name, member, &m);
        if (r == -ENOENT) {
                *ret_status = (target_member_status){.state = MEMBER_ABSENT,
                                                     .detail = xstrdup("no member directory")};
                return 0;
        }
        if (r < 0)
                return r;
        lt_poll_exit(lt, m);

        member_runtime_state state;
        char *detail = NULL;
        bool has_data = lt_member_has_data(m);
        int recent = lt_count_recent_exits(m);
        if (m->pid) {
                _cleanup_free_ char *why = NULL;
                if (check_health(lt, m, &why)) {
                        state = MEMBER_READY;
                        if (!m->ready_mono)
                                m->ready_mono = now_mono_ms();
                        detail = TAKE_PTR(why);
                } else if (recent >= CRASH_LOOP_EXITS) {
                        state = MEMBER_CRASH_LOOP;
                        detail = xasprintf("%d exits in 5 minutes; running again, %s", recent, why);
                } else {
                        state = MEMBER_STARTING;
                        detail = TAKE_PTR(why);
                }
        } else if (m->crashed) {
                state = recent >= CRASH_LOOP_EXITS ? MEMBER_CRASH_LOOP : MEMBER_CRASHED;
                int64_t wait = m->restart_at_mono - now_mono_ms();
                detail = xasprintf("%s; %d exits in 5 minutes; restart in %lld ms",
                                   m->last_exit ? m->last_exit : "exited", recent,
                                   (long long)(wait > 0 ? wait : 0));
        } else if (!has_data) {
                state = MEMBER_ABSENT;
                detail = xstrdup(m->command ? "not running, no data" : "planned, not started");
        } else {
                state = MEMBER_STOPPED;
                detail = xstrdup(m->stopped ? "stopped" : "not running");
        }

        int64_t now = now_mono_ms();
        if (!m->have_state || m->last_state != state) {
                m->have_state = true;
                m->last_state = state;
                m->state_since_mono = now;
        }
        *ret_status = (target_member_status){
            .state = state,
            .restarts = m->restarts,
            .state_since_ms = m->state_since_mono,
            .config_hash = xstrdup_null(m->config_hash),
            .data_identity = lt_data_identity(m),
            .detail = detail,
        };
        return 0;
}

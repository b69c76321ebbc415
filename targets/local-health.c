/*
 * The local target's member status: whether the member's process runs, and
 * etcd_member_health() of its client URL (etcd/health.h), made with the
 * shared lock let go, on copies of the URL and paths.
 */

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include "etcd/health.h"
#include "targets/locked.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/local-internal.h"

#define CRASH_LOOP_EXITS 5

/* --- health ------------------------------------------------------------ */

/*
 * The member's health (etcd_member_health, the one definition), asked with
 * gitcd's operator identity from its TLS folder when it serves TLS, the
 * shared lock let go of around the GET: the URL and paths are this call's
 * own copies, and other clusters' operations go on.
 */
static int check_health(local_target *lt, local_member *m, char **ret_detail)
{
        etcd_health_opts o = {.timeout_ms = lt->health_timeout_ms,
                              .wait_begin = target_blocking_begin,
                              .wait_end = target_blocking_end};
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (m->client_url && strneq(m->client_url, "https:", 6) && m->tls_dir) {
                const char *cas[] = {"operator/ca.crt", "client/ca.crt"};
                for (size_t i = 0; i < ARRAY_SIZE(cas) && !ca; i++) {
                        char *p = xasprintf("%s/%s", m->tls_dir, cas[i]);
                        if (path_exists(p))
                                ca = p;
                        else
                                free(p);
                }
                o.tls.ca_file = ca;
                cert = xasprintf("%s/operator/tls.crt", m->tls_dir);
                key = xasprintf("%s/operator/tls.key", m->tls_dir);
                if (path_exists(cert) && path_exists(key)) {
                        o.tls.cert_file = cert;
                        o.tls.key_file = key;
                }
        }
        return etcd_member_health(m->client_url, &o, ret_detail);
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

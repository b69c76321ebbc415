/*
 * TLS switched on for a running cluster (reconciler/tlsswitch.h), with no
 * lost write and never more than one member restarting.
 *
 * What etcd allows (3.4 and 3.5, measured): a client port serves http and
 * https at once (etcd tells the two apart per connection), a peer port
 * serves one scheme only; a member dials https peers with its peer
 * certificate even while its own peer listener is still plain; a member
 * whose peers cannot dial it yet still exchanges raft messages over the
 * connections it dials itself (rafthttp's stream readers and pipeline).
 *
 * The member records are the journal: a record's client and peer URLs say
 * which scheme gitcd settled for that member, and membership.c plans a
 * member whose record still says http half way (TLS files and flags, peer
 * listener plain, clients on both schemes). So, from the commit that turns
 * TLS on:
 *
 *   1. every member restarts once onto the half-way plan (the ordinary
 *      rolling restart of decide(): one at a time, quorum kept, leader
 *      last); it can now dial https peers and serves https to clients;
 *   2. a converged pass moves every record's client URL to https at once:
 *      gitcd itself now talks TLS to every member (no restart);
 *   3. a converged pass moves one member's record peer URL to https
 *      (followers first, the leader last): its plan is now the spec's
 *      (https peer listener, https clients only), and the rolling restart
 *      restarts it. Its peers reach it again once
 *   4. a converged pass sets its peer URL in etcd's membership
 *      (MemberUpdate) to the recorded one; then 3 for the next member.
 *
 * Every step is idempotent and decided from the records and etcd's member
 * list, so gitcd killed at any point resumes where it was. Audit:
 * tls.enable, the step in the reason.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/membership.h"
#include "reconciler/tlsswitch.h"
#include "util/failpoint.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define POLL_NEXT_MS 200

static void audit(const tlsswitch_env *env, const char *what)
{
        state_audit_event ev = {
            .time_ms = env->now_ms,
            .cluster = (char *)env->cluster,
            .commit = (char *)env->commit,
            .author = (char *)env->author,
            .action = (char *)"tls.enable",
            .reason = (char *)what,
            .outcome = (char *)"success",
        };
        if (state_audit_append(env->db, &ev, NULL) < 0)
                log_warn("%s: could not write the audit event tls.enable: %s", env->cluster,
                         state_last_error());
        log_info("%s: TLS switched on: %s", env->cluster, what);
}

static bool is_http(const char *url)
{
        return url && strneq(url, "http://", 7);
}

static const etcd_member *etcd_member_named(const etcd_members *l, const char *name)
{
        for (size_t i = 0; l && i < l->n; i++)
                if (streq_ptr(l->members[i].name, name))
                        return &l->members[i];
        return NULL;
}

static void step_taken(pass_result *res, const char *member, const char *fmt, ...) _printf_(3, 4);
static void step_taken(pass_result *res, const char *member, const char *fmt, ...)
{
        res->outcome = PASS_WAITING;
        res->poll_ms = POLL_NEXT_MS;
        snprintf(res->reason, sizeof(res->reason), "EnablingTLS");
        snprintf(res->member, sizeof(res->member), "%s", member ? member : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->message, sizeof(res->message), fmt, ap);
        va_end(ap);
}

/* Step 4: a member whose record says https while etcd still lists its http peer URL. */
static int update_membership(const tlsswitch_env *env, pass_result *res)
{
        for (size_t i = 0; i < env->records->n; i++) {
                const state_member *m = env->records->items[i];
                const etcd_member *em = etcd_member_named(env->etcd, m->name);
                if (m->removed_ms || !em || is_http(m->peer_url) || em->n_peer_urls != 1 ||
                    !is_http(em->peer_urls[0]))
                        continue;
                /* The same address, only the scheme moves (host:port after "://"). */
                if (!streq(em->peer_urls[0] + 7, m->peer_url + 8))
                        continue;
                int k = env->ops->update_peer(env->conn, em->id, m->peer_url);
                if (k < 0) {
                        step_taken(res, m->name, "TLS: cannot move %s's peer URL to %s: %s",
                                   m->name, m->peer_url, env->ops->last_error(env->conn));
                        res->poll_ms = 1000;
                        return k;
                }
                FAILPOINT("tls-switch.peer-updated"); /* done, not audited: done again, a no-op */
                _cleanup_free_ char *what = xasprintf(
                    "%s: etcd's membership now lists its peer URL %s", m->name, m->peer_url);
                audit(env, what);
                step_taken(res, m->name, "TLS: %s's peer URL in etcd is now %s", m->name,
                           m->peer_url);
                return 1;
        }
        return 0;
}

/* Store record m, changed in place (the pass's own copy of the records). */
static int put(const tlsswitch_env *env, const state_member *m, pass_result *res)
{
        int k = state_member_put(env->db, m, env->now_ms);
        if (k < 0)
                step_taken(res, m->name, "TLS: cannot record %s: %s", m->name, state_last_error());
        return k;
}

int tlsswitch_converged(const tlsswitch_env *env, pass_result *res)
{
        const etcd_cluster *c = env->c;
        bool client = render_client_tls(c), peer = render_peer_tls(c);
        if (!client && !peer)
                return 0;
        bool any = false;
        for (size_t i = 0; i < env->records->n; i++) {
                const state_member *m = env->records->items[i];
                any = any || (!m->removed_ms && ((client && is_http(m->client_url)) ||
                                                 (peer && is_http(m->peer_url))));
        }
        int k = peer && env->etcd ? update_membership(env, res) : 0;
        if (k != 0 || !any)
                return k;

        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        if ((k = membership_plan_for_records(env->target, c, env->records->items, env->records->n,
                                             &p)) < 0) {
                step_taken(res, NULL, "TLS: %s", target_last_error(env->target));
                return k;
        }
        /* Step 2: gitcd's own endpoints, every member at once (each serves both schemes). */
        bool clients_moved = false;
        if ((k = state_begin(env->db)) < 0)
                return k;
        for (size_t i = 0; k >= 0 && client && i < env->records->n; i++) {
                state_member *m = env->records->items[i];
                if (m->removed_ms || !is_http(m->client_url))
                        continue;
                const member_plan *mp = &p->members[i];
                _cleanup_free_ char *want = xstrndup(mp->client_url, strcspn(mp->client_url, ","));
                if (is_http(want))
                        continue;
                str_assign(&m->client_url, TAKE_PTR(want));
                k = put(env, m, res);
                clients_moved = true;
        }
        k = k < 0 ? k : state_commit(env->db);
        if (k < 0) {
                (void)state_rollback(env->db);
                return k;
        }
        if (clients_moved) {
                FAILPOINT("tls-switch.clients-moved");
                audit(env, "every member's client URL is https: gitcd speaks TLS to the members");
                step_taken(res, NULL, "TLS: gitcd's client moved to https");
                return 1;
        }

        /* Step 3: the next member's peer side, followers first. */
        const state_member *next = NULL;
        size_t next_i = 0;
        for (int pass = 0; pass < 2 && !next && peer; pass++)
                for (size_t i = 0; i < env->records->n && !next; i++) {
                        const state_member *m = env->records->items[i];
                        const etcd_member *em = etcd_member_named(env->etcd, m->name);
                        bool leader = em && em->id == env->leader;
                        if (!m->removed_ms && is_http(m->peer_url) && (pass == 1 || !leader)) {
                                next = m;
                                next_i = i;
                        }
                }
        if (!next)
                return 0;
        state_member *m = env->records->items[next_i];
        const member_plan *mp = &p->members[next_i];
        /* The target's own plan for it, before membership.c made it half way. */
        _cleanup_free_ char *want =
            strneq(mp->peer_url, "http://", 7) ? xasprintf("https://%s", mp->peer_url + 7) : NULL;
        if (!want)
                return 0;
        str_assign(&m->peer_url, TAKE_PTR(want));
        if ((k = put(env, m, res)) < 0)
                return k;
        FAILPOINT("tls-switch.peer-recorded"); /* recorded, not restarted yet */
        _cleanup_free_ char *what = xasprintf(
            "%s: peer URL %s recorded; it restarts onto TLS for its peers", m->name, m->peer_url);
        audit(env, what);
        step_taken(res, m->name, "TLS: %s moves its peer side to %s", m->name, m->peer_url);
        return 1;
}

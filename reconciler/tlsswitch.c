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
 *
 * TLS switched off (tls.provider auto to none, or a surface disabled) is
 * the same path walked back. A member whose peer URL goes plain must keep
 * its peer certificate until every peer it dials listens plain too, so the
 * record's URLs alone cannot say when the certificates may go: the
 * cluster's tls_off column is the journal of the switch (the surfaces
 * going off), written before the first step and cleared by the last.
 * While it is set, tlsswitch_prepare() keeps those surfaces on in the
 * reconciler's copy of the spec and membership.c plans each member plain
 * where its record moved. From the commit that turns TLS off:
 *
 *   0. the journal records the surfaces (tlsswitch_prepare());
 *   1. every member restarts once serving clients on both schemes (the
 *      ordinary rolling restart), when the client surface goes off;
 *   2. a converged pass moves every record's client URL to http: gitcd's
 *      own client speaks plain http (no restart);
 *   3. a converged pass moves one member's record peer URL to http
 *      (followers first, the leader last): the rolling restart restarts it
 *      onto a plain peer listener, its certificates kept (its peers that
 *      still listen TLS want them). Its peers dial it at the https URL
 *      etcd lists until
 *   4. a converged pass sets its peer URL in etcd's membership to the
 *      recorded http one (MemberUpdate); then 3 for the next member. Only
 *      the member between its 3 and 4 is unreachable to dial, as in the
 *      switch on, and it still dials every peer itself;
 *   5. a converged pass with every record and every peer URL in etcd on
 *      plain http, and no CA rotation under way, clears the journal: every
 *      member restarts without TLS (the rolling restart, the spec's own
 *      plan).
 *
 * Audit: tls.disable, the step in the reason. The cluster CA and the
 * files already issued stay where they are, unused (a later switch on
 * issues from the same CA again).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/membership.h"
#include "reconciler/tlsswitch.h"
#include "util/failpoint.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define POLL_NEXT_MS 200

static bool switching_off(const tlsswitch_env *env)
{
        return env->c->tls.off_client || env->c->tls.off_peer;
}

static void audit_as(const tlsswitch_env *env, bool off, const char *what)
{
        state_audit_event ev = {
            .time_ms = env->now_ms,
            .cluster = (char *)env->cluster,
            .commit = (char *)env->commit,
            .author = (char *)env->author,
            .action = (char *)(off ? "tls.disable" : "tls.enable"),
            .reason = (char *)what,
            .outcome = (char *)"success",
        };
        if (state_audit_append(env->db, &ev, NULL) < 0)
                log_warn("%s: could not write the audit event %s: %s", env->cluster,
                         off ? "tls.disable" : "tls.enable", state_last_error());
        log_info("%s: TLS switched %s: %s", env->cluster, off ? "off" : "on", what);
}

static void audit(const tlsswitch_env *env, const char *what)
{
        audit_as(env, switching_off(env), what);
}

static bool is_http(const char *url)
{
        return url && strneq(url, "http://", 7);
}

static bool is_https(const char *url)
{
        return url && strneq(url, "https://", 8);
}

/* url without its scheme ("host:port"), or NULL when it has neither http nor https. */
static const char *address(const char *url)
{
        return is_http(url) ? url + 7 : is_https(url) ? url + 8 : NULL;
}

/* url with http:// in place of https://. */
static char *as_http(const char *url)
{
        return xasprintf("http://%s", address(url));
}

static const etcd_member *etcd_member_named(const etcd_members *l, const char *name)
{
        for (size_t i = 0; l && i < l->n; i++)
                if (streq_ptr(l->members[i].name, name))
                        return &l->members[i];
        return NULL;
}

static void step_taken(const tlsswitch_env *env, pass_result *res, const char *member,
                       const char *fmt, ...) _printf_(4, 5);
static void step_taken(const tlsswitch_env *env, pass_result *res, const char *member,
                       const char *fmt, ...)
{
        res->outcome = PASS_WAITING;
        res->poll_ms = POLL_NEXT_MS;
        snprintf(res->reason, sizeof(res->reason), "%s",
                 switching_off(env) ? "DisablingTLS" : "EnablingTLS");
        snprintf(res->member, sizeof(res->member), "%s", member ? member : "");
        va_list ap;
        va_start(ap, fmt);
        str_assign(&res->message, xvasprintf(fmt, ap));
        va_end(ap);
}

/*
 * Step 4: a member whose record's peer URL has another scheme than the one
 * etcd still lists for it (https recorded when switching on, http off).
 */
static int update_membership(const tlsswitch_env *env, pass_result *res)
{
        for (size_t i = 0; i < env->records->n; i++) {
                const state_member *m = env->records->items[i];
                const etcd_member *em = etcd_member_named(env->etcd, m->name);
                if (m->removed_ms || !em || em->n_peer_urls != 1 ||
                    streq_ptr(em->peer_urls[0], m->peer_url))
                        continue;
                /* The same address, only the scheme moves (host:port after "://"). */
                const char *a = address(em->peer_urls[0]), *b = address(m->peer_url);
                if (!a || !b || !streq(a, b))
                        continue;
                int k = env->ops->update_peer(env->conn, em->id, m->peer_url);
                if (k < 0) {
                        step_taken(env, res, m->name, "TLS: cannot move %s's peer URL to %s: %s",
                                   m->name, m->peer_url, env->ops->last_error(env->conn));
                        res->poll_ms = 1000;
                        return k;
                }
                /* done, not audited: done again, a no-op */
                FAILPOINT(switching_off(env) ? "tls-switch-off.peer-updated"
                                             : "tls-switch.peer-updated");
                _cleanup_free_ char *what = xasprintf(
                    "%s: etcd's membership now lists its peer URL %s", m->name, m->peer_url);
                audit(env, what);
                step_taken(env, res, m->name, "TLS: %s's peer URL in etcd is now %s", m->name,
                           m->peer_url);
                return 1;
        }
        return 0;
}

/*
 * The record of the member whose peer side moves next: the first live one
 * whose peer URL still has the old scheme (still(url)), followers first,
 * the leader last. SIZE_MAX: none.
 */
static size_t next_peer(const tlsswitch_env *env, bool (*still)(const char *url))
{
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < env->records->n; i++) {
                        const state_member *m = env->records->items[i];
                        const etcd_member *em = etcd_member_named(env->etcd, m->name);
                        bool leader = em && em->id == env->leader;
                        if (!m->removed_ms && still(m->peer_url) && (pass == 1 || !leader))
                                return i;
                }
        return SIZE_MAX;
}

/* Store record m, changed in place (the pass's own copy of the records). */
static int put(const tlsswitch_env *env, const state_member *m, pass_result *res)
{
        int k = state_member_put(env->db, m, env->now_ms);
        if (k < 0)
                step_taken(env, res, m->name, "TLS: cannot record %s: %s", m->name,
                           state_last_error());
        return k;
}

/* The surfaces as the journal spells them: "client", "peer", "client,peer"; NULL: none. */
static const char *surfaces_name(bool client, bool peer)
{
        return client && peer ? "client,peer" : client ? "client" : peer ? "peer" : NULL;
}

/* Steps 2 to 5 of the switch off (see the top of the file). */
static int switch_off_converged(const tlsswitch_env *env, pass_result *res)
{
        const tls_spec *t = &env->c->tls;
        int k = t->off_peer && env->etcd ? update_membership(env, res) : 0;
        if (k != 0)
                return k;

        /* Step 2: gitcd's own endpoints, every member at once (each serves both schemes). */
        bool clients_moved = false;
        if ((k = state_begin(env->db)) < 0)
                return k;
        for (size_t i = 0; k >= 0 && t->off_client && i < env->records->n; i++) {
                state_member *m = env->records->items[i];
                if (m->removed_ms || !is_https(m->client_url))
                        continue;
                str_assign(&m->client_url, as_http(m->client_url));
                k = put(env, m, res);
                clients_moved = true;
        }
        k = k < 0 ? k : state_commit(env->db);
        if (k < 0) {
                (void)state_rollback(env->db);
                return k;
        }
        if (clients_moved) {
                FAILPOINT("tls-switch-off.clients-moved");
                audit(env, "every member's client URL is http: gitcd speaks plain http to the "
                           "members");
                step_taken(env, res, NULL, "TLS off: gitcd's client moved to http");
                return 1;
        }

        /* Step 3: the next member's peer side, followers first. */
        size_t next_i = t->off_peer ? next_peer(env, is_https) : SIZE_MAX;
        if (next_i != SIZE_MAX) {
                state_member *m = env->records->items[next_i];
                str_assign(&m->peer_url, as_http(m->peer_url));
                if ((k = put(env, m, res)) < 0)
                        return k;
                FAILPOINT("tls-switch-off.peer-recorded"); /* recorded, not restarted yet */
                _cleanup_free_ char *what =
                    xasprintf("%s: peer URL %s recorded; it restarts onto a plain peer listener",
                              m->name, m->peer_url);
                audit(env, what);
                step_taken(env, res, m->name, "TLS off: %s moves its peer side to %s", m->name,
                           m->peer_url);
                return 1;
        }

        /* Step 5: once etcd lists no https peer URL, the certificates may go. */
        for (size_t i = 0; t->off_peer && i < (env->etcd ? env->etcd->n : 0); i++)
                for (size_t j = 0; j < env->etcd->members[i].n_peer_urls; j++)
                        if (is_https(env->etcd->members[i].peer_urls[j])) {
                                step_taken(env, res, env->etcd->members[i].name,
                                           "TLS off: waiting for etcd to list %s's peer URL "
                                           "%s on http",
                                           env->etcd->members[i].name,
                                           env->etcd->members[i].peer_urls[j]);
                                res->poll_ms = 1000;
                                return 1;
                        }
        if (t->off_peer && !env->etcd)
                return 0;
        /* A CA rotation under way ends first: its phases need the CA folders it moves. */
        if (t->ca_rotation_phase) {
                step_taken(env, res, NULL,
                           "TLS off: waiting for the CA rotation (phase %d) to finish before the "
                           "members restart without TLS",
                           t->ca_rotation_phase);
                res->poll_ms = 1000;
                return 1;
        }
        if ((k = state_cluster_set_tls_off(env->db, env->cluster, NULL)) < 0) {
                step_taken(env, res, NULL, "TLS off: cannot record the end: %s",
                           state_last_error());
                return k;
        }
        FAILPOINT("tls-switch-off.finished"); /* recorded, not restarted yet */
        _cleanup_free_ char *what =
            xasprintf("every member runs plain http for %s; they restart without TLS there",
                      surfaces_name(t->off_client, t->off_peer));
        audit(env, what);
        step_taken(env, res, NULL, "TLS off: every member restarts without TLS");
        return 1;
}

bool tlsswitch_pending(const tlsswitch_env *env)
{
        if (switching_off(env))
                return true;
        bool client = render_client_tls(env->c), peer = render_peer_tls(env->c);
        for (size_t i = 0; i < env->records->n; i++) {
                const state_member *m = env->records->items[i];
                if (!m->removed_ms &&
                    ((client && is_http(m->client_url)) || (peer && is_http(m->peer_url))))
                        return true;
        }
        return false;
}

int tlsswitch_converged(const tlsswitch_env *env, pass_result *res)
{
        if (switching_off(env))
                return switch_off_converged(env, res);
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
                step_taken(env, res, NULL, "TLS: %s", target_last_error(env->target));
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
                step_taken(env, res, NULL, "TLS: gitcd's client moved to https");
                return 1;
        }

        /* Step 3: the next member's peer side, followers first. */
        size_t next_i = peer ? next_peer(env, is_http) : SIZE_MAX;
        if (next_i == SIZE_MAX)
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
        step_taken(env, res, m->name, "TLS: %s moves its peer side to %s", m->name, m->peer_url);
        return 1;
}

int tlsswitch_prepare(const tlsswitch_env *env, etcd_cluster *c)
{
        tls_spec *t = &c->tls;
        /* The spec's own settings first: the previous pass may have kept surfaces on. */
        if (t->off_client || t->off_peer) {
                t->provider = t->own_provider;
                t->client.enabled = t->own_client;
                t->peer.enabled = t->own_peer;
                t->off_client = t->off_peer = false;
        }
        _cleanup_free_ char *journal = NULL;
        int k = state_cluster_tls_off(env->db, env->cluster, &journal);
        if (k < 0)
                return k;
        /* Only auto's own files can be kept on: other providers are refused by the rules. */
        bool may = t->provider == TLS_PROVIDER_NONE || t->provider == TLS_PROVIDER_AUTO;
        bool plain_client = may && !render_client_tls(c);
        /* https peer records are etcd's own peer TLS, not a switch off, with selfSigned */
        bool plain_peer = may && !render_peer_tls(c) && !render_peer_self_signed(c);
        bool rec_client = false, rec_peer = false;
        /* the records only when the spec has a surface plain (each pass of a TLS cluster) */
        if (plain_client || plain_peer) {
                state_member_list l = {0};
                if ((k = state_member_list_for(env->db, env->cluster, false, &l)) < 0)
                        return k;
                for (size_t i = 0; i < l.n; i++) {
                        const state_member *m = l.items[i];
                        rec_client = rec_client || (!m->removed_ms && is_https(m->client_url));
                        rec_peer = rec_peer || (!m->removed_ms && is_https(m->peer_url));
                }
                state_member_list_release(&l);
        }
        bool was_client = journal && strstr(journal, "client");
        bool was_peer = journal && strstr(journal, "peer");
        bool off_client = plain_client && (rec_client || was_client);
        bool off_peer = plain_peer && (rec_peer || was_peer);
        const char *now = surfaces_name(off_client, off_peer);
        if (!streq_ptr(now, journal)) {
                /* Started (journal written before any step), or a surface turned on again. */
                if ((k = state_cluster_set_tls_off(env->db, env->cluster, now)) < 0)
                        return k;
                _cleanup_free_ char *what =
                    !now ? xstrdup("given up: the spec switched TLS on again; the switch on "
                                   "resumes from where the members are")
                    : journal
                        ? xasprintf("now on %s only: the spec switched the other surface on again",
                                    now)
                        : xasprintf("started on %s: members keep their certificates until every "
                                    "one of them moved to plain http",
                                    now);
                audit_as(env, true, what);
                if (now)
                        FAILPOINT("tls-switch-off.started");
        }
        if (!now)
                return 0;
        t->own_provider = t->provider;
        t->own_client = t->client.enabled;
        t->own_peer = t->peer.enabled;
        t->off_client = off_client;
        t->off_peer = off_peer;
        t->provider = TLS_PROVIDER_AUTO;
        /* Surfaces plain in the spec and not going off stay plain (enabled: true with none). */
        t->client.enabled = off_client || (t->own_provider != TLS_PROVIDER_NONE && t->own_client);
        t->peer.enabled = off_peer || (t->own_provider != TLS_PROVIDER_NONE && t->own_peer);
        return 0;
}

/*
 * The membership plan builder (reconciler/membership.h). Decision: a plan
 * is never assembled by hand elsewhere; callers ask for the members they
 * need and free the plan with membership_plan_free(), so a field added to
 * member_plan is filled and freed in exactly one place. The same holds
 * for data loss: targets report the data identity they see, the record
 * holds the one the member ran with, and membership_check_identity() alone
 * compares them.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "reconciler/membership.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

bool membership_check_identity(const char *recorded, target_member_status *s)
{
        assert(s);
        if (!recorded || streq_ptr(recorded, s->data_identity))
                return false;
        char *why = s->data_identity
                        ? xasprintf("its data is not the data it ran with (identity %s, not %s)",
                                    s->data_identity, recorded)
                        : xasprintf("its data is gone (no data with identity %s)", recorded);
        if (s->detail) {
                char *both = xasprintf("%s; %s", why, s->detail);
                free(why);
                why = both;
        }
        free(s->detail);
        s->detail = why;
        s->state = MEMBER_DATA_LOST;
        return true;
}

static bool is_http(const char *url)
{
        return url && strneq(url, "http://", 7);
}

/* url with http:// in place of https:// (a copy of url otherwise). */
static char *as_http(const char *url)
{
        if (url && strneq(url, "https://", 8))
                return xasprintf("http://%s", url + 8);
        return xstrdup_null(url);
}

bool membership_tls_switching(member_plan *mp, const char *rec_peer_url, const char *rec_client_url,
                              const etcd_cluster *c)
{
        const tls_spec *t = &c->tls;
        /* A record on http with peer TLS on: half way on, or moved on the way off. */
        bool peer_plain = render_peer_tls(c) && is_http(rec_peer_url);
        bool peer_moving_on = peer_plain && !t->off_peer;
        bool client_on = render_client_tls(c) && !t->off_client;
        bool both = t->off_client || (client_on && (is_http(rec_client_url) || peer_moving_on));
        if (peer_plain) {
                str_assign(&mp->peer_url, as_http(mp->peer_url));
                str_assign(&mp->listen_peer_url, as_http(mp->listen_peer_url));
        }
        if (both)
                (void)member_plan_listen_plain(mp);
        return peer_plain || both;
}

/* rec: the member's record when gitcd has one (what place_member is told of it), else NULL. */
static int plan_append(membership_plan *p, target *t, const etcd_cluster *c, const char *name,
                       int ordinal, bool learner, const char *initial_cluster,
                       const char *initial_state, const state_member *rec)
{
        assert(p && t && c && name);
        member_plan *mp = membership_plan_add(p);
        mp->name = xstrdup(name);
        mp->ordinal = ordinal;
        mp->learner = learner;
        if (rec) {
                mp->peer_url = xstrdup_null(rec->peer_url);
                mp->client_url = xstrdup_null(rec->client_url);
                mp->data_identity = xstrdup_null(rec->data_identity);
        }
        int k = t->ops->place_member(t, c, mp);
        if (k < 0) {
                member_plan_release(mp);
                p->n--;
                return k;
        }
        member_plan_allow_plain(c, mp);
        mp->initial_cluster = xstrdup(initial_cluster ? initial_cluster : "");
        mp->initial_cluster_state = xstrdup(initial_state ? initial_state : "existing");
        mp->config_hash = render_member_config_hash(c, p, p->n - 1);
        return 0;
}

int membership_plan_append(membership_plan *p, target *t, const etcd_cluster *c, const char *name,
                           int ordinal, bool learner, const char *initial_cluster,
                           const char *initial_state)
{
        return plan_append(p, t, c, name, ordinal, learner, initial_cluster, initial_state, NULL);
}

int membership_plan_for_records(target *t, const etcd_cluster *c, state_member *const *recs,
                                size_t n, membership_plan **ret_plan)
{
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_new(c);
        for (size_t i = 0; i < n; i++) {
                const state_member *rec = recs[i];
                int k = plan_append(p, t, c, rec->name, rec->ordinal, rec->learner,
                                    rec->initial_cluster, rec->initial_cluster_state, rec);
                if (k < 0)
                        return k;
                member_plan *mp = &p->members[p->n - 1];
                if (membership_tls_switching(mp, rec->peer_url, rec->client_url, c)) {
                        free(mp->config_hash);
                        mp->config_hash = render_member_config_hash(c, p, p->n - 1);
                }
        }
        *ret_plan = TAKE_PTR(p);
        return 0;
}

int membership_plan_static(target *t, const etcd_cluster *c, int first_ordinal, int n,
                           membership_plan **ret_plan)
{
        assert(n > 0);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_new(c);
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *name = render_member_name(c, first_ordinal + i);
                int k =
                    membership_plan_append(p, t, c, name, first_ordinal + i, false, NULL, "new");
                if (k < 0)
                        return k;
        }
        /* The addresses are known only once every member is placed: then the one list. */
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < p->n; i++)
                sb_printf(&ic, "%s%s=%s", i ? "," : "", p->members[i].name, p->members[i].peer_url);
        for (size_t i = 0; i < p->n; i++) {
                member_plan *mp = &p->members[i];
                free(mp->initial_cluster);
                mp->initial_cluster = xstrdup(sb_str(&ic));
                free(mp->config_hash);
                mp->config_hash = render_member_config_hash(c, p, i);
        }
        sb_release(&ic);
        *ret_plan = TAKE_PTR(p);
        return 0;
}

/*
 * Static bootstrap (reconciler/bootstrap.h): the rule that picks it, and
 * the two effects of the step, records then starts.
 *
 * Why it is safe to resume: the records of the whole initial set are
 * written in one transaction before any member starts, and a member's
 * record keeps the --initial-cluster and state it was created with, so
 * after a crash at any point the next pass starts the members still absent
 * with exactly the command the others got (same list, same token). A
 * second "new" cluster is never planned over it: STEP_BOOTSTRAP needs no
 * member recorded and no cluster ID recorded, and the records of a static
 * set are only ever removed through etcd's own membership (rule 6, after
 * the cluster formed).
 *
 * Starting: a target with ensure_members (the hosts target) prepares the
 * members side by side and starts them at once, in one operation; the
 * others get ensure_member for each member in turn. Either way each
 * started member's config hash is recorded after, and a member that did
 * not start is started by the next pass (STEP_START_MEMBER), as after a
 * crash: the records written before hold everything it needs.
 *
 * Why the others wait for a member that does not start: a static initial
 * cluster is one unit. Two of three members form a quorum, but replacing
 * the third would be a membership change on a cluster that never was
 * whole; the progress deadline ends it as BootstrapFailed, naming the
 * member, for a person to look at.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/bootstrap.h"
#include "reconciler/membership.h"
#include "util/failpoint.h"
#include "util/xalloc.h"

static void set(step *s, step_kind kind, const obs_member *m, const char *fmt, ...) _printf_(4, 5);

static void set(step *s, step_kind kind, const obs_member *m, const char *fmt, ...)
{
        s->kind = kind;
        s->member = m ? m->name : NULL;
        s->member_id = m ? m->id : 0;
        s->ordinal = m ? m->ordinal : 0;
        s->reason = REASON_BOOTSTRAPPING;
        va_list ap;
        va_start(ap, fmt);
        str_assign(&s->message, xvasprintf(fmt, ap));
        va_end(ap);
}

bool decide_bootstrap(const desired *want, const observation *obs, step *s)
{
        if (obs->n == 0) {
                if (want->replicas < 2 || !want->static_bootstrap || obs->bootstrapped)
                        return false;
                set(s, STEP_BOOTSTRAP, NULL,
                    "start %d members at once with a static initial cluster", want->replicas);
                s->ordinal = obs->next_ordinal;
                s->count = want->replicas;
                return true;
        }
        if (want->replicas == 0)
                return false; /* a pause: the usual rules stop what runs */
        const obs_member *unready = NULL;
        bool any = false;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!m->static_initial || (obs->etcd_listed && !m->in_etcd))
                        continue; /* not in the set, or etcd removed it: the usual rules */
                any = true;
                if (m->runtime == MEMBER_ABSENT || m->runtime == MEMBER_STOPPED) {
                        set(s, STEP_START_MEMBER, m, "start member %s of the initial cluster",
                            m->name);
                        return true;
                }
                if (m->runtime != MEMBER_READY && (!unready || m->ordinal < unready->ordinal))
                        unready = m;
        }
        if (!any)
                return false;
        if (unready)
                set(s, STEP_WAIT, unready,
                    "waiting for member %s of the initial cluster to start (%s)", unready->name,
                    member_runtime_state_name(unready->runtime));
        else if (!obs->etcd_listed)
                set(s, STEP_WAIT, NULL, "waiting for the initial cluster to form");
        else
                return false; /* every member runs: the next observation lists their names */
        return true;
}

bool bootstrap_in_progress(const observation *obs)
{
        if (!obs->bootstrapped)
                return true;
        for (size_t i = 0; i < obs->n; i++)
                if (obs->members[i].static_initial && obs->members[i].in_etcd)
                        return true;
        return false;
}

int bootstrap_static_plan(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
                          int first_ordinal, int n, membership_plan **ret_plan, char **ret_error)
{
        /*
         * A current record or a target member of one of these names was made
         * by someone else (another gitcd on this state): never take it over.
         * Asked before anything is placed, so our own placement is never
         * mistaken for theirs.
         */
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *name = render_member_name(c, first_ordinal + i);
                state_member *other = NULL;
                int k = state_member_get(db, cluster, name, &other);
                bool taken = k >= 0 && other->removed_ms == 0;
                state_member_free(other);
                if (taken || target_holds_member(t, c, name)) {
                        str_assign(
                            ret_error,
                            xasprintf(
                                "member %s already exists (another gitcd on this state?); not "
                                "touched",
                                name));
                        return -EEXIST;
                }
        }
        int k = membership_plan_static(t, c, first_ordinal, n, ret_plan);
        if (k < 0)
                str_assign(ret_error, xstrdup(target_last_error(t)));
        return k;
}

int bootstrap_static_record(state_db *db, const char *cluster, const etcd_cluster *c,
                            const membership_plan *plan, int64_t now_ms, char **ret_error)
{
        int k = state_begin(db);
        if (k < 0)
                goto fail;
        for (size_t i = 0; i < plan->n; i++) {
                const member_plan *mp = &plan->members[i];
                state_member m = {
                    .cluster = (char *)cluster,
                    .name = mp->name,
                    .ordinal = mp->ordinal,
                    .peer_url = mp->peer_url,
                    .client_url = mp->client_url,
                    .version = c->version,
                    .state = (char *)"absent",
                    .initial_cluster = mp->initial_cluster,
                    .initial_cluster_state = mp->initial_cluster_state,
                };
                k = state_member_put(db, &m, now_ms);
                if (k < 0) {
                        (void)state_rollback(db);
                        goto fail;
                }
        }
        k = state_commit(db);
        if (k < 0)
                goto fail;
        return 0;
fail:
        str_assign(ret_error,
                   xasprintf("cannot record the initial members: %s", state_last_error()));
        return k;
}

int bootstrap_static_start(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
                           const membership_plan *plan, int64_t now_ms, char **ret_error)
{
        int k = t->ops->ensure_shared(t, c, plan);
        if (k < 0) {
                str_assign(ret_error, xstrdup(target_last_error(t)));
                return k;
        }
        /* a target that prepares the members side by side starts them all in one operation */
        _cleanup_free_ int *started = NULL;
        int first = 0;
        if (t->ops->ensure_members) {
                started = xcalloc(plan->n, sizeof(int));
                first = t->ops->ensure_members(t, c, plan, started);
                if (first < 0)
                        str_assign(ret_error, xstrdup(target_last_error(t)));
        }
        for (size_t i = 0; i < plan->n; i++) {
                const member_plan *mp = &plan->members[i];
                k = started ? started[i] : t->ops->ensure_member(t, c, plan, i);
                if (k < 0) {
                        if (first == 0)
                                str_assign(ret_error, xasprintf("member %s: %s", mp->name,
                                                                target_last_error(t)));
                        first = first ? first : k;
                        continue;
                }
                state_member *rec = NULL;
                k = state_member_get(db, cluster, mp->name, &rec);
                if (k >= 0) {
                        free(rec->config_hash);
                        rec->config_hash = xstrdup_null(mp->config_hash);
                        k = state_member_put(db, rec, now_ms);
                        state_member_free(rec);
                }
                if (k < 0 && first == 0) {
                        str_assign(ret_error,
                                   xasprintf("member %s: %s", mp->name, state_last_error()));
                        first = k;
                }
                if (i == 0)
                        FAILPOINT("bootstrap.after-first-start");
        }
        return first;
}

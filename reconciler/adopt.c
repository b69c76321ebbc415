/*
 * Adoption of a cluster already running where the target would place its
 * members (see adopt.h), the steps: the target surveys what runs there
 * (target_adopt_ops.survey: on the hosts target, what each machine runs;
 * with TLS, the members' CA imported as the cluster's auto CA on the gitcd
 * host first, so that gitcd's client certificate, and later the members'
 * leaves, come from the CA the cluster's other clients already use; etcd's
 * member list and health; the decision, targets/hosts-adopt.c) and says
 * whether gitcd may take it over; then, in this order:
 *
 *   1. write the data identity marker into each running member's data
 *      directory (so a later wipe is data loss, not an empty restart);
 *   2. record every member (etcd's member ID, initialized, "existing",
 *      the marker's id as data identity) and the cluster ID, in one
 *      transaction: from here on decide() never bootstraps the cluster;
 *   3. one member at a time, every member healthy first: move it onto
 *      gitcd's rendered manifest or unit (the target retires what ran it:
 *      kubeadm's etcd.yaml removed, or `systemctl disable --now
 *      etcd.service`; wait until the old etcd stopped answering, write
 *      gitcd's, wait until healthy and until etcd lists the member's ID
 *      under gitcd's name) and record the config hash it runs with. A
 *      member already on gitcd's own file (a cluster gitcd created whose
 *      state store was lost) is rewritten only when its config hash
 *      differs.
 *
 * Names: a member is recorded under gitcd's name "<cluster>-<ordinal>"
 * (the survey's: its own when it already has that form, else its
 * machine's position), never under kubeadm's node name. etcd takes a
 * member's name from --name at every start and publishes it to the
 * cluster (the ID and data stay; --initial-cluster is ignored on existing
 * data), so step 3's restart is the rename. Until then the member core
 * finds a member that still carries its old name by its peer URL, which is
 * what a pass after a crash in step 3 relies on.
 *
 * Nothing is written on the machines before the decision, so a refusal
 * changes nothing there; the only earlier write is the imported CA on the
 * gitcd host, which is the CA the members already trust (a refusal after
 * it leaves it in place, and the next try finds it equal).
 * Everything runs inside one reconciler pass of the cluster, on the target
 * the cluster runs on (shared between the driver's workers: the locked
 * wrapper forwards the adopt operations under the cluster's lock, as every
 * other); each wait has a deadline, after which the pass fails and the
 * reconciler carries on from the records like after any other failed step.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "etcd/client.h"
#include "reconciler/adopt.h"
#include "reconciler/membership.h"
#include "util/failpoint.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define STOP_TIMEOUT_MS  30000
#define READY_TIMEOUT_MS 90000

static void audit(state_db *db, const char *cluster, const char *action, const char *reason,
                  const char *after, const char *outcome, int64_t now, const char *commit,
                  const char *author)
{
        state_audit_event ev = {.time_ms = now,
                                .cluster = (char *)cluster,
                                .commit = (char *)commit,
                                .author = (char *)author,
                                .action = (char *)action,
                                .reason = (char *)reason,
                                .after_json = (char *)after,
                                .outcome = (char *)outcome};
        if (state_audit_append(db, &ev, NULL) < 0)
                log_warn("%s: could not write the audit event %s: %s", cluster, action,
                         state_last_error());
}

/*
 * A refusal, audited once: `gitcd run` tries a blocked cluster again every
 * 30 s, and the same refusal again is no new event.
 */
static void audit_refusal(state_db *db, const char *cluster, const char *why, int64_t now,
                          const char *commit, const char *author)
{
        state_audit_filter f = {.cluster = cluster, .action = "cluster.adopt", .limit = 1};
        state_audit_list l = {0};
        bool again = state_audit_query(db, &f, &l) == 0 && l.n == 1 &&
                     streq_ptr(l.items[0]->reason, why) &&
                     streq_ptr(l.items[0]->outcome, "rejected");
        state_audit_list_release(&l);
        if (!again)
                audit(db, cluster, "cluster.adopt", why, NULL, "rejected", now, commit, author);
}

/* Wait until client_url answers healthy (want 1) or stops answering healthy (want 0). */
static bool wait_health(target *t, const etcd_cluster *c, const char *url, int want, int ms)
{
        int64_t end = now_mono_ms() + ms;
        for (;;) {
                if (t->ops->adopt->member_healthy(t, c, url) == want)
                        return true;
                if (now_mono_ms() > end)
                        return false;
                msleep(300);
        }
}

static bool all_healthy(target *t, const etcd_cluster *c, const adopt_plan *ap)
{
        for (size_t i = 0; i < ap->n; i++)
                if (!ap->steps[i].client_url ||
                    !t->ops->adopt->member_healthy(t, c, ap->steps[i].client_url))
                        return false;
        return true;
}

/*
 * etcd's member list through endpoints (comma separated), with gitcd's
 * client identity when the cluster has client TLS; NULL if none answer.
 */
static etcd_members *member_list_at(target *t, const etcd_cluster *c, const char *endpoints)
{
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (isempty(endpoints) || target_client_tls(t, c, &ca, &cert, &key) < 0)
                return NULL;
        etcd_client_opts o = {.endpoints = endpoints,
                              .cacert = ca,
                              .cert = cert,
                              .key = key,
                              .call_timeout_ms = 5000,
                              .dial_timeout_ms = 2000};
        etcd_client *ec = NULL;
        etcd_members *l = NULL;
        if (etcd_client_new(&o, &ec) < 0)
                return NULL;
        if (etcd_member_list(ec, &l) < 0)
                l = NULL;
        etcd_client_free(ec);
        return l;
}

/* Wait until etcd lists member s (its ID) under gitcd's name for it. */
static bool wait_renamed(target *t, const etcd_cluster *c, const adopt_plan *ap,
                         const adopt_step *s, int ms)
{
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < ap->n; i++)
                if (ap->steps[i].client_url)
                        sb_printf(&eps, "%s%s", eps.len ? "," : "", ap->steps[i].client_url);
        int64_t end = now_mono_ms() + ms;
        bool done = false;
        while (!done) {
                etcd_members *l = member_list_at(t, c, sb_str(&eps));
                for (size_t i = 0; l && i < l->n; i++)
                        done = done || (l->members[i].id == s->id &&
                                        streq_ptr(l->members[i].name, s->member));
                etcd_members_free(l);
                if (done || now_mono_ms() > end)
                        break;
                msleep(300);
        }
        sb_release(&eps);
        return done;
}

static int import(state_db *db, const char *cluster, const adopt_plan *ap, char **identities,
                  int64_t now, char **msg)
{
        int k = state_begin(db);
        for (size_t i = 0; k >= 0 && i < ap->n; i++) {
                const adopt_step *s = &ap->steps[i];
                char id[17];
                snprintf(id, sizeof(id), "%016llx", (unsigned long long)s->id);
                state_member m = {.cluster = (char *)cluster,
                                  .name = s->member,
                                  .ordinal = s->ordinal,
                                  .member_id = id,
                                  .peer_url = s->peer_url,
                                  .client_url = s->client_url,
                                  .initialized = true,
                                  .state = (char *)"ready",
                                  .initial_cluster = ap->initial_cluster,
                                  .initial_cluster_state = (char *)"existing",
                                  .data_identity = identities[i]};
                k = state_member_put(db, &m, now);
        }
        if (k >= 0) {
                char cid[17];
                snprintf(cid, sizeof(cid), "%016llx", (unsigned long long)ap->cluster_id);
                k = state_cluster_set_id(db, cluster, cid, now);
        }
        if (k >= 0)
                k = state_commit(db);
        if (k < 0) {
                str_assign(
                    msg, xasprintf("adoption: cannot record the members: %s", state_last_error()));
                (void)state_rollback(db);
        }
        return k;
}

/* Step 3 for member s (plan entry idx). */
static int move_member(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
                       const membership_plan *p, size_t idx, const adopt_step *s,
                       const adopt_plan *ap, int64_t now, char **msg)
{
        const member_plan *mp = &p->members[idx];
        if (!all_healthy(t, c, ap)) {
                str_assign(
                    msg,
                    xasprintf("adoption: not every member is healthy before moving %s; it goes on "
                              "at the next pass",
                              s->member));
                return -EAGAIN;
        }
        int k;
        if (s->replaces) {
                if (streq(s->member, s->running_name))
                        log_info("%s: adoption: member %s moves from %s to gitcd's file", cluster,
                                 s->member, s->replaces);
                else
                        log_info("%s: adoption: member %s (ID %016llx) moves from %s to gitcd's "
                                 "file as %s",
                                 cluster, s->running_name, (unsigned long long)s->id, s->replaces,
                                 s->member);
                if ((k = t->ops->adopt->retire(t, c, s)) < 0)
                        goto fail;
                if (s->client_url && !wait_health(t, c, s->client_url, 0, STOP_TIMEOUT_MS)) {
                        str_assign(msg,
                                   xasprintf("adoption: member %s did not stop after %s was %s",
                                             s->member, s->replaces, s->retired));
                        return -ETIMEDOUT;
                }
        }
        if ((k = t->ops->ensure_member(t, c, p, idx)) < 0)
                goto fail;
        if (s->client_url && !wait_health(t, c, s->client_url, 1, READY_TIMEOUT_MS)) {
                str_assign(msg, xasprintf("adoption: member %s is not healthy on gitcd's file",
                                          s->member));
                return -ETIMEDOUT;
        }
        if (!wait_renamed(t, c, ap, s, READY_TIMEOUT_MS)) {
                str_assign(
                    msg,
                    xasprintf(
                        "adoption: etcd does not list member %016llx as %s after its restart on "
                        "gitcd's file",
                        (unsigned long long)s->id, s->member));
                return -ETIMEDOUT;
        }
        state_member *rec = NULL;
        if ((k = state_member_get(db, cluster, s->member, &rec)) < 0) {
                str_assign(msg, xasprintf("adoption: %s", state_last_error()));
                return k;
        }
        str_assign(&rec->config_hash, xstrdup_null(mp->config_hash));
        k = state_member_put(db, rec, now);
        state_member_free(rec);
        return k;
fail:
        str_assign(msg, xasprintf("adoption: member %s: %s", s->member, target_last_error(t)));
        return k;
}

static int adopt(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
                 const char *commit, const char *author, int64_t (*wall_ms)(void), char **msg)
{
        state_member_list recs = {0};
        int k = state_member_list_for(db, cluster, true, &recs);
        size_t n_recs = recs.n;
        state_member_list_release(&recs);
        if (k < 0 || n_recs > 0)
                return 0; /* adoption is for a cluster with no records only */

        _cleanup_(adopt_plan_release) adopt_plan ap = {0};
        char *why = NULL;
        k = t->ops->adopt->survey(t, c, &ap, &why);
        if (k == -EPERM) {
                str_assign(msg, xasprintf("adoption refused: %s", why));
                audit_refusal(db, cluster, *msg, wall_ms(), commit, author);
                log_error("%s: %s", cluster, *msg);
        } else if (k < 0) {
                str_assign(msg, xasprintf("adoption: %s", target_last_error(t)));
        }
        free(why);
        if (k <= 0)
                return k;

        /* 1. markers */
        char **ids = xcalloc(ap.n + 1, sizeof(char *));
        for (size_t i = 0; i < ap.n && k >= 0; i++) {
                k = t->ops->adopt->claim(t, c, &ap.steps[i], &ids[i]);
                if (k < 0)
                        str_assign(msg, xasprintf("adoption: %s", target_last_error(t)));
        }
        /* 2. records */
        if (k >= 0)
                k = import(db, cluster, &ap, ids, wall_ms(), msg);
        strv_free(ids);
        if (k < 0)
                return k;
        json_t *summary = json_pack("{s:s, s:[]}", "cluster_id", "", "members");
        char cid[17];
        snprintf(cid, sizeof(cid), "%016llx", (unsigned long long)ap.cluster_id);
        json_object_set_new(summary, "cluster_id", json_string(cid));
        for (size_t i = 0; i < ap.n; i++) {
                const adopt_step *s = &ap.steps[i];
                char id[17];
                snprintf(id, sizeof(id), "%016llx", (unsigned long long)s->id);
                json_t *m = json_pack("{s:s, s:s, s:s, s:b}", "name", s->member, "id", id,
                                      "machine", s->where, "restart", s->restart);
                if (s->replaces)
                        json_object_set_new(m, "replaces", json_string(s->replaces));
                if (!streq(s->member, s->running_name))
                        json_object_set_new(m, "renamed_from", json_string(s->running_name));
                _cleanup_free_ char *mj = json_dumps(m, JSON_COMPACT);
                audit(db, cluster, "member.adopt", "imported from the running cluster", mj,
                      "success", wall_ms(), commit, author);
                json_array_append_new(json_object_get(summary, "members"), m);
        }
        _cleanup_free_ char *sj = json_dumps(summary, JSON_COMPACT);
        json_decref(summary);
        audit(db, cluster, "cluster.adopt", "the machines already ran this cluster", sj, "success",
              wall_ms(), commit, author);

        /* 3. one member at a time onto gitcd's files */
        state_member_list l = {0};
        if ((k = state_member_list_for(db, cluster, false, &l)) < 0) {
                str_assign(msg, xasprintf("adoption: %s", state_last_error()));
                return k;
        }
        membership_plan *p = NULL;
        k = membership_plan_for_records(t, c, l.items, l.n, &p);
        if (k < 0)
                str_assign(msg, xasprintf("adoption: %s", target_last_error(t)));
        if (k >= 0)
                k = t->ops->ensure_shared(t, c, p);
        for (size_t i = 0; k >= 0 && i < ap.n; i++) {
                for (size_t j = 0; k >= 0 && j < p->n; j++)
                        if (streq(p->members[j].name, ap.steps[i].member))
                                k = move_member(db, t, cluster, c, p, j, &ap.steps[i], &ap,
                                                wall_ms(), msg);
                if (i == 0)
                        FAILPOINT("adopt.after-first-move");
        }
        membership_plan_free(p);
        state_member_list_release(&l);
        if (k < 0)
                return k;
        str_assign(msg,
                   xasprintf("adopted the running cluster %s (%zu members, IDs kept)", cid, ap.n));
        log_info("%s: %s", cluster, *msg);
        return 1;
}

int adopt_try(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
              const char *commit, const char *author, int64_t (*wall_ms)(void), char **msg)
{
        if (!t || !t->ops->adopt)
                return 0;
        return adopt(db, t, cluster, c, commit, author, wall_ms ? wall_ms : now_wall_ms, msg);
}

/*
 * Plans (see plan.h): the revision taken in through the driver's intake, each
 * cluster compared with the spec gitcd accepted last, and the result printed
 * for people or tools.
 *
 * Design decision: the comparison is made on the normalized JSON form
 * (spec_to_json) of both sides, the same form the state store keeps, so a
 * dialect change or a reordered file is "unchanged" and every reported
 * change is a real one. The steps are derived from the two specs alone
 * (replicas, version, flags), following the reconciler's order of rules:
 * membership changes first, one at a time, then rolling restarts. They say
 * what will happen, not which member: members are chosen by the
 * reconciler when it acts. Invalid documents are attributed to the cluster
 * they name (found in the YAML when the model could not be built), so a
 * rejection is shown under the cluster it concerns, with its location.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/plan.h"
#include "intake/intake.h"
#include "intake/order.h"
#include "reconciler/hold.h"
#include "state/takeovers.h"
#include "util/strbuf.h"
#include "render/render.h"
#include "targets/registry.h"
#include "api/spec.h"
#include "api/yaml.h"
#include "util/escape.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static const char *const action_names[] = {
    [PLAN_CREATE] = "create",     [PLAN_UPDATE] = "update",       [PLAN_DELETE] = "delete",
    [PLAN_REJECTED] = "rejected", [PLAN_UNCHANGED] = "unchanged", [PLAN_HELD] = "held",
};

const char *plan_action_name(plan_action a)
{
        return (size_t)a < ARRAY_SIZE(action_names) ? action_names[a] : "unknown";
}

/* ---- building items ------------------------------------------------------ */

/*
 * Items are found by name through p->by_name and clusters' applied records
 * through an index too, so planning N clusters takes time in proportion to
 * N (bench/plan), not N².
 */
static plan_item *item_add(plan *p, const char *name, plan_action action)
{
        p->items = xgrow(p->items, &p->alloc, p->n + 1, sizeof(*p->items));
        (void)strmap_put(&p->by_name, name, p->n);
        plan_item *it = &p->items[p->n++];
        memset(it, 0, sizeof(*it));
        it->name = xstrdup(name);
        it->action = action;
        it->diags = (diag_list)DIAG_LIST_INIT;
        it->tier = -1;
        return it;
}

static plan_item *item_find(plan *p, const char *name)
{
        size_t i;
        return strmap_get(&p->by_name, name, &i) ? &p->items[i] : NULL;
}

static void strv_add(char ***v, size_t *n, const char *fmt, ...) _printf_(3, 4);
static void strv_add(char ***v, size_t *n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        *v = xrealloc(*v, (*n + 1) * sizeof(char *));
        (*v)[(*n)++] = xvasprintf(fmt, ap);
        va_end(ap);
}

#define STEP(it, ...) strv_add(&(it)->steps, &(it)->n_steps, __VA_ARGS__)
#define NOTE(it, ...) strv_add(&(it)->notes, &(it)->n_notes, __VA_ARGS__)

static void item_release(plan_item *it)
{
        etcd_cluster_free(it->spec);
        free(it->name);
        free(it->file);
        for (size_t i = 0; i < it->n_changes; i++) {
                free(it->changes[i].path);
                json_decref(it->changes[i].from);
                json_decref(it->changes[i].to);
        }
        free(it->changes);
        for (size_t i = 0; i < it->n_steps; i++)
                free(it->steps[i]);
        free(it->steps);
        for (size_t i = 0; i < it->n_notes; i++)
                free(it->notes[i]);
        free(it->notes);
        free(it->wait);
        diag_list_release(&it->diags);
}

void plan_free(plan *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++)
                item_release(&p->items[i]);
        free(p->items);
        diag_list_release(&p->diags);
        strmap_release(&p->by_name);
        free(p);
}

/* ---- the field-by-field diff ------------------------------------------- */

bool plan_key_looks_secret(const char *key)
{
        static const char *const words[] = {"password", "token", "secret", "key", "credential"};
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (strcasestr(key, words[i]))
                        return true;
        return false;
}

/* "a.b" + "c" -> "a.b.c"; keys that would be ambiguous are quoted: a["x.y"]. */
static char *path_child(const char *prefix, const char *key)
{
        bool plain = *key && !strpbrk(key, ".[]\" ");
        if (plain)
                return isempty(prefix) ? xstrdup(key) : xasprintf("%s.%s", prefix, key);
        return xasprintf("%s[\"%s\"]", prefix ? prefix : "", key);
}

static void change_add(plan_item *it, const char *path, const json_t *from, const json_t *to,
                       bool secret)
{
        it->changes = xrealloc(it->changes, (it->n_changes + 1) * sizeof(*it->changes));
        it->changes[it->n_changes++] = (plan_change){
            .path = xstrdup(path),
            .from = from ? json_deep_copy(from) : NULL,
            .to = to ? json_deep_copy(to) : NULL,
            .redacted = secret,
        };
}

static void diff_json(plan_item *it, const char *path, const json_t *a, const json_t *b,
                      bool secret)
{
        bool ao = json_is_object(a), bo = json_is_object(b);
        if ((ao || !a) && (bo || !b) && (a || b)) {
                const char *key;
                json_t *v;
                if (a)
                        json_object_foreach((json_t *)a, key, v)
                        {
                                _cleanup_free_ char *p = path_child(path, key);
                                diff_json(it, p, v, b ? json_object_get(b, key) : NULL,
                                          secret || plan_key_looks_secret(key));
                        }
                if (b)
                        json_object_foreach((json_t *)b, key, v)
                        {
                                if (a && json_object_get(a, key))
                                        continue;
                                _cleanup_free_ char *p = path_child(path, key);
                                diff_json(it, p, NULL, v, secret || plan_key_looks_secret(key));
                        }
                return;
        }
        if (a && b && json_equal((json_t *)a, (json_t *)b))
                return;
        change_add(it, path, a, b, secret);
}

static int cmp_change(const void *x, const void *y)
{
        return strcmp(((const plan_change *)x)->path, ((const plan_change *)y)->path);
}

static bool changed_under(const plan_item *it, const char *prefix)
{
        size_t n = strlen(prefix);
        for (size_t i = 0; i < it->n_changes; i++) {
                const char *p = it->changes[i].path;
                if (strneq(p, prefix, n) && (p[n] == '\0' || p[n] == '.' || p[n] == '['))
                        return true;
        }
        return false;
}

/* ---- steps ---------------------------------------------------------------- */

static const char *plural(int n, const char *one, const char *many)
{
        return n == 1 ? one : many;
}

static void steps_add_learners(plan_item *it, int n)
{
        STEP(it, "add %d %s one at a time, each promoted to voter once it has started", n,
             plural(n, "learner", "learners"));
}

/* What a restore does to the revision (spec.bootstrap.restore.bumpRevision, or its role's). */
static void steps_bump(plan_item *it, const etcd_cluster *c)
{
        const revision_bump *b = &c->restore.bump;
        if (b->mode == BUMP_AUTO)
                STEP(it, "raise the restored revision by a bump sized from the write rate when it "
                         "runs (auto: at least 1000000000) and mark every revision up to it "
                         "compacted, so watchers that saw later revisions list again");
        else if (b->amount > 0)
                STEP(it,
                     "raise the restored revision by %lld and mark every revision up to it "
                     "compacted, so watchers that saw later revisions list again",
                     (long long)b->amount);
        else
                STEP(it, "keep the snapshot's revision (no bump: clients watching revisions past "
                         "it must list again by themselves)");
}

/* spec.adopt with spec.tls: the old CA is kept (targets/kubernetes-takeover-tls.c). */
static void steps_takeover_tls(plan_item *it, const etcd_cluster *c)
{
        if (c->tls.provider == TLS_PROVIDER_AUTO)
                STEP(it,
                     "keep the old cluster's CA: check that its members' peer, server and client "
                     "CAs are one CA and that Secret %s/%s holds it and its key, then import it "
                     "as the cluster's CA (never rotated) and issue gitcd's certificates from it; "
                     "clients keep their CA file",
                     c->namespace_, c->adopt.ca_secret ? c->adopt.ca_secret : "?");
        else if (c->tls.provider == TLS_PROVIDER_SECRETS)
                STEP(it, "keep the old cluster's CA: check that its members' peer, server and "
                         "client CAs are one CA and that the spec's Secrets carry it as their "
                         "ca.crt (gitcd's members use them); clients keep their CA file");
}

/* spec.adopt: the takeover's steps, as reconciler/takeover.c and decide()'s rule 8b take them. */
static void steps_takeover(plan_item *it, const etcd_cluster *c)
{
        int want = c->replicas > 0 ? c->replicas : 1;
        bool coreos = c->adopt.from == ADOPT_FROM_COREOS;
        /* what tells gitcd that the old operator stopped (targets/kubernetes-takeover.c) */
        const char *stopped = coreos ? "its resource must be paused"
                                     : "its operator's Deployment must be scaled to 0 (or its "
                                       "resource deleted with --cascade=orphan)";
        STEP(it,
             "find the %s cluster %s/%s (nothing changed if refused): %s, every member healthy "
             "and started, no learner, every member on etcd %s, and gitcd's names and labels "
             "must not meet the old objects",
             adopt_from_name(c->adopt.from), c->adopt.namespace_, c->adopt.name, stopped,
             c->version);
        steps_takeover_tls(it, c);
        STEP(it, "record the old members and the cluster ID before any change: no new cluster "
                 "is started");
        STEP(it,
             "replace the old members one membership change at a time, every voter healthy "
             "first: add a learner of gitcd's and promote it, then remove one old member (a "
             "follower first; the old leader last, after moving leadership to a voter of "
             "gitcd's), until %d %s of gitcd's remain (same cluster ID and data)",
             want, plural(want, "member", "members"));
        if (c->adopt.from == ADOPT_FROM_COZYSTACK)
                STEP(it, "gitcd's members join the old ones' peer https with etcd's own "
                         "self-signed certificates (spec.tls.peer.selfSigned); every old member "
                         "must run with --peer-auto-tls");
        /* coreos and cozystack (aenix) make a client Service (targets/kubernetes-takeover.c) */
        if (coreos || c->adopt.from == ADOPT_FROM_COZYSTACK)
                STEP(it, "once gitcd has a voter, point the old client Service at gitcd's voters "
                         "(its selector before kept on it as gitcd.io/selector-before)");
        else
                STEP(it,
                     "the old cluster has no client Service: clients move to gitcd's client "
                     "Service %s (docs/migration.md)",
                     c->name);
        STEP(it, "leave the old operator's objects for you to delete (listed when the takeover "
                 "finishes); gitcd deletes none of them");
}

static void steps_create(plan_item *it, const etcd_cluster *c)
{
        if (c->kube_context)
                STEP(it, "run it on the API server of kubeconfig context \"%s\"", c->kube_context);
        if (c->adopt.from != ADOPT_FROM_NONE) {
                steps_takeover(it, c);
                return;
        }
        if (c->replicas == 0) {
                STEP(it, "record the cluster as paused: no member is started");
                return;
        }
        if (c->restore.enabled) {
                STEP(it, "check the snapshot of spec.bootstrap.restore (nothing is created if it "
                         "is refused)");
                steps_bump(it, c);
        }
        if (c->replicas == 1) {
                if (c->restore.enabled)
                        STEP(it, "restore the snapshot into its single member (a new cluster ID)");
                STEP(it, "start its single member on etcd %s", c->version);
                return;
        }
        if (c->bootstrap_mode == BOOTSTRAP_STATIC) {
                if (c->restore.enabled)
                        STEP(it,
                             "restore the snapshot into each of the %d members (a new cluster "
                             "ID)",
                             c->replicas);
                STEP(it, "start all %d members at once on etcd %s with a static initial cluster",
                     c->replicas, c->version);
                return;
        }
        if (c->restore.enabled)
                STEP(it, "restore the snapshot into the seed member (a new cluster ID)");
        STEP(it, "start the seed member alone on etcd %s", c->version);
        steps_add_learners(it, c->replicas - 1);
}

/*
 * The order members roll in for a version change, as the reconciler takes
 * it (reconciler/decide.c, rule 13): followers first, the highest ordinal
 * first, the leader last (etcd hands its leadership over as it stops). Only members not on
 * the new version yet. Returns how many, 0 when the records are unknown.
 */
static int roll_order(const state_member_list *ml, const char *leader, const char *version,
                      strbuf *out)
{
        if (!ml)
                return 0;
        const state_member **v = xcalloc(ml->n + 1, sizeof(*v));
        size_t n = 0;
        for (size_t i = 0; i < ml->n; i++)
                if (!streq_ptr(ml->items[i]->version, version))
                        v[n++] = ml->items[i];
        /* Highest ordinal first (insertion sort: a handful of members). */
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && v[j]->ordinal > v[j - 1]->ordinal; j--) {
                        const state_member *t = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = t;
                }
        const state_member *lead = NULL;
        int k = 0;
        for (size_t i = 0; i < n; i++) {
                if (leader && streq(v[i]->name, leader)) {
                        lead = v[i];
                        continue;
                }
                sb_printf(out, "%s%s (%s)", k++ ? ", " : "", v[i]->name,
                          v[i]->version ? v[i]->version : "?");
        }
        if (lead)
                sb_printf(out, "%s%s (%s, the leader: it hands leadership over as it stops)",
                          k++ ? ", " : "", lead->name, lead->version ? lead->version : "?");
        free(v);
        return k;
}

static void steps_version(plan_item *it, const etcd_cluster *prev, const etcd_cluster *next,
                          const state_member_list *ml, const char *leader, int keep)
{
        semver a, b;
        if (next->snapshots.enabled && semver_parse(prev->version, &a) == 0 &&
            semver_parse(next->version, &b) == 0 && a.minor != b.minor)
                STEP(it, "take a snapshot (spec.snapshots) before the first member moves to %s",
                     next->version);
        strbuf order = STRBUF_INIT;
        int n = roll_order(ml, leader, next->version, &order);
        if (n > 0)
                STEP(it, "restart %d %s one at a time on %s in this order: %s", n,
                     plural(n, "member", "members"), next->version, sb_str(&order));
        else
                STEP(it, "restart %d %s one at a time on %s, followers first, the leader last",
                     keep, plural(keep, "member", "members"), next->version);
        sb_release(&order);
        STEP(it,
             "after each: wait until it serves %s, has caught up with the leader's raft "
             "index and the cluster has stayed healthy for the settle time; a member that "
             "does not come back stops the rollout (UpgradeFailed), the others untouched",
             next->version);
}

/* The surfaces a step names. */
static const char *surfaces(bool client, bool peer)
{
        return client && peer ? "client and peer" : client ? "client" : "peer";
}

/*
 * TLS switched on (plain to tls.provider auto) or off (auto to plain) for
 * keep running members: the steps of reconciler/tlsswitch.c.
 */
static void steps_tls(plan_item *it, const etcd_cluster *prev, const etcd_cluster *next, int keep)
{
        bool ac = render_client_tls(prev), ap = render_peer_tls(prev);
        bool bc = render_client_tls(next), bp = render_peer_tls(next);
        bool on = next->tls.provider == TLS_PROVIDER_AUTO && (bc || bp) && (!ac || bc) &&
                  (!ap || bp) && (ac != bc || ap != bp);
        bool off = prev->tls.provider == TLS_PROVIDER_AUTO && (ac || ap) && (!bc || ac) &&
                   (!bp || ap) && (ac != bc || ap != bp);
        const char *m = plural(keep, "member", "members");
        if (on) {
                bool client = bc && !ac, peer = bp && !ap;
                STEP(it,
                     "switch TLS on (%s): restart %d %s one at a time onto their certificates%s%s",
                     surfaces(client, peer), keep, m, peer ? ", peer listeners still plain" : "",
                     client ? ", clients served on http and https" : "");
                if (client)
                        STEP(it, "move gitcd's own client to https (no restart)");
                if (peer)
                        STEP(it, "then one member at a time, followers first, the leader last: "
                                 "restart it onto https for its peers, then update its peer URL "
                                 "in etcd's membership (MemberUpdate)");
                else if (!next->tls.client.allow_plain)
                        STEP(it, "restart %d %s one at a time onto https alone for clients", keep,
                             m);
        } else if (off) {
                bool client = ac && !bc, peer = ap && !bp;
                if (client && prev->tls.client.allow_plain)
                        STEP(it,
                             "switch TLS off (%s): the members already serve clients on http "
                             "beside https (allowPlainHTTP)",
                             surfaces(client, peer));
                else if (client)
                        STEP(it,
                             "switch TLS off (%s): restart %d %s one at a time serving clients on "
                             "http beside https",
                             surfaces(client, peer), keep, m);
                if (client)
                        STEP(it, "move gitcd's own client to http (no restart)");
                if (peer)
                        STEP(it,
                             "%sone member at a time, followers first, the leader last: restart "
                             "it onto a plain peer listener (its certificates kept for the peers "
                             "still on TLS), then update its peer URL in etcd's membership "
                             "(MemberUpdate)",
                             client ? "then " : "switch TLS off (peer): ");
                STEP(it,
                     "restart %d %s one at a time without TLS for %s (the CA and the "
                     "certificates stay on disk, unused)",
                     keep, m, surfaces(client, peer));
        }
}

static void steps_update(plan_item *it, const etcd_cluster *prev, const etcd_cluster *next,
                         const state_member_list *ml, const char *leader)
{
        int p = prev->replicas, n = next->replicas;
        bool version = !streq_ptr(prev->version, next->version);
        /* etcd's own corruption checks are member flags too (render/command.c) */
        bool flags = changed_under(it, "spec.options") ||
                     changed_under(it, "spec.consistency.etcdChecks") ||
                     changed_under(it, "spec.consistency.etcdCheckInterval");

        if (p > 0 && n > p) {
                steps_add_learners(it, n - p);
        } else if (p > 0 && n > 0 && n < p) {
                STEP(it, "remove %d %s one at a time, newest first, moving leadership away first",
                     p - n, plural(p - n, "member", "members"));
        } else if (p > 0 && n == 0) {
                if (p > 1)
                        STEP(it,
                             "scale down to 1 member (remove %d, newest first, moving leadership "
                             "away first), then stop it; data kept",
                             p - 1);
                else
                        STEP(it, "stop the only member; data kept");
        } else if (p == 0 && n > 0) {
                STEP(it, "resume: start the stopped member again with its data");
                if (n > 1)
                        steps_add_learners(it, n - 1);
        }

        /* Members that exist before and after roll onto the new command. */
        int keep = p == 0 ? 0 : MIN(p, n);
        /* A new tls.auto.rotateCA token starts a CA rotation (reconciler/carotate.c) at phase 1. */
        const char *token = next->tls.rotate_ca_token;
        if (keep > 0 && next->tls.provider == TLS_PROVIDER_AUTO && !isempty(token) &&
            !streq_ptr(prev->tls.rotate_ca_token, token) &&
            (render_client_tls(next) || render_peer_tls(next))) {
                STEP(it,
                     "rotate the cluster CA (rotateCA %s), starting at phase 1 of 3: create a "
                     "new CA and restart %d %s one at a time to trust the old and the new CA",
                     token, keep, plural(keep, "member", "members"));
                STEP(it, "phase 2 of 3: reissue each member's certificates from the new CA, "
                         "one member at a time, no restart");
                STEP(it,
                     "phase 3 of 3: delete the old CA and its key, restart %d %s one at a time "
                     "to trust the new CA alone",
                     keep, plural(keep, "member", "members"));
        }
        if (keep > 0)
                steps_tls(it, prev, next, keep);
        if (keep > 0 && (version || flags)) {
                if (version)
                        steps_version(it, prev, next, ml, leader, keep);
                else
                        STEP(it,
                             "restart %d %s one at a time with the new flags, followers first, "
                             "the leader last",
                             keep, plural(keep, "member", "members"));
        }
        if (it->n_steps == 0) {
                if (n == 0)
                        STEP(it, "record the new settings; the paused member starts with them "
                                 "when resumed");
                else
                        STEP(it, "apply the changed settings to the cluster's objects; no member "
                                 "restarts");
        }
}

/* ---- comparing one cluster ---------------------------------------------- */

/* The clusters applied before, by name. */
typedef struct applied_index {
        const state_cluster_list *l; /* NULL: nothing applied yet */
        strmap by_name;
} applied_index;

static void applied_index_init(applied_index *x, const state_cluster_list *l)
{
        *x = (applied_index){.l = l, .by_name = STRMAP_INIT};
        for (size_t i = 0; l && i < l->n; i++)
                (void)strmap_put(&x->by_name, l->items[i]->name, i);
}

static const state_cluster *applied_find(const applied_index *x, const char *id)
{
        size_t i;
        return x->l && strmap_get(&x->by_name, id, &i) ? x->l->items[i] : NULL;
}

/* The member records of an applied cluster, when the caller gave them. */
static const state_member_list *members_find(const plan_input *in, const char *id)
{
        for (size_t i = 0; in->members && in->applied && i < in->applied->n; i++)
                if (streq(in->applied->items[i]->name, id))
                        return &in->members[i];
        return NULL;
}

/*
 * The reconciler latches the accepted spec (observed_hash) when it takes
 * it up, and clears the progress deadline once the cluster converged: either
 * one missing means the accepted spec is not fully applied yet.
 */
static void note_in_progress(plan_item *it, const state_cluster *sc)
{
        if (!sc->desired_hash)
                return;
        _cleanup_free_ char *from =
            sc->desired_commit ? xasprintf("the spec accepted from commit %.7s", sc->desired_commit)
                               : xstrdup("the accepted spec");
        if (!streq_ptr(sc->observed_hash, sc->desired_hash))
                NOTE(it, "still being applied: the reconciler has not yet taken up %s", from);
        else if (sc->progress_deadline_ms > 0)
                NOTE(it,
                     "still being applied: the reconciler is working towards %s (not "
                     "converged yet)",
                     from);
}

static plan_item *plan_cluster(plan *p, const etcd_cluster *c, const state_cluster *sc,
                               const state_member_list *ml)
{
        _cleanup_free_ char *id = etcd_cluster_id(c);
        json_auto_t *next = spec_to_json(c);
        json_auto_t *prev_json =
            sc && sc->desired_json ? json_loads(sc->desired_json, 0, NULL) : NULL;

        plan_item *it = item_add(p, id, PLAN_CREATE);
        it->file = xstrdup_null(c->file);
        it->line = c->line;
        if (!prev_json) {
                steps_create(it, c);
                return it;
        }
        if (json_equal(prev_json, next)) {
                it->action = PLAN_UNCHANGED;
                note_in_progress(it, sc);
                return it;
        }

        _cleanup_(etcd_cluster_freep) etcd_cluster *prev = NULL;
        diag_list ignore = DIAG_LIST_INIT;
        int k = spec_from_json(prev_json, id, &prev, &ignore);
        diag_list_release(&ignore);
        it->action = PLAN_UPDATE;
        diff_json(it, NULL, prev_json, next, false);
        if (it->n_changes > 1)
                qsort(it->changes, it->n_changes, sizeof(*it->changes), cmp_change);
        if (k < 0) {
                /* A record this gitcd cannot read back: the reconciler takes the new spec as is. */
                NOTE(it, "the recorded spec could not be read back; the new spec replaces it");
        } else {
                const char **running = xcalloc((ml ? ml->n : 0) + 1, sizeof(char *));
                size_t n_running = 0;
                for (size_t i = 0; ml && i < ml->n; i++)
                        if (ml->items[i]->initialized) /* holds data */
                                running[n_running++] = ml->items[i]->version;
                /* No record at all: nothing known, the specs alone decide. */
                k = spec_check_transition_running(prev, c, ml && ml->n ? running : NULL, n_running,
                                                  &it->diags);
                free(running);
                if (k < 0) {
                        it->action = PLAN_REJECTED;
                        NOTE(it, "the last accepted spec stays in force");
                } else
                        steps_update(it, prev, c, ml, sc->leader);
        }
        note_in_progress(it, sc);
        return it;
}

/*
 * The holds on the cluster (reconciler/hold.h) as the next pass would
 * judge them: suspended, outside the maintenance windows (what waits, and
 * until when), the override token in force or spent.
 */
/* A takeover recorded (state/takeovers.h): under way, or finished with what is left to delete. */
static void note_takeover(plan_item *it, const plan_input *in, const etcd_cluster *c)
{
        _cleanup_free_ char *id = etcd_cluster_id(c);
        _cleanup_(state_takeover_freep) state_takeover *t = NULL;
        if (!in->db || c->adopt.from == ADOPT_FROM_NONE || state_takeover_get(in->db, id, &t) < 0)
                return;
        if (!t->finished_ms) {
                NOTE(it, "taking over %s (cluster %s): under way", t->source, t->cluster_id);
                steps_takeover(it, c);
                return;
        }
        json_t *objs = json_loads(t->objects_json ? t->objects_json : "[]", 0, NULL);
        strbuf sb = STRBUF_INIT;
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                sb_printf(&sb, "%s%s", i ? ", " : "", json_string_value(o));
        }
        json_decref(objs);
        NOTE(it, "taken over from %s (cluster %s); left for you to delete: %s", t->source,
             t->cluster_id, sb.len ? sb_str(&sb) : "nothing");
        sb_release(&sb);
}

static void note_holds(plan_item *it, const plan_input *in, const etcd_cluster *c)
{
        hold_state hs;
        if (in->db) {
                if (hold_read(in->db, it->name, c, in->now_ms, &hs) < 0)
                        return;
        } else {
                hold_input hi = {.c = c, .now_ms = in->now_ms};
                hold_assess(&hi, &hs);
        }
        char when[32];
        /* the windows matter to a change, or to one still being applied */
        bool pending = it->action == PLAN_UPDATE || it->n_notes > 0;
        if (hs.suspended)
                NOTE(it,
                     "held (%s): %s: no voluntary step until it is resumed; certificate "
                     "renewal and scheduled snapshots go on",
                     REASON_SUSPENDED, hs.suspended_message);
        if (pending && in->now_ms && hs.windows && !hs.in_window && !hs.override_active) {
                if (hs.next_window_ms)
                        hold_format_minute(hs.next_window_ms, when, sizeof(when));
                NOTE(it,
                     "held (%s): restarts, upgrades, CA rotation, the TLS switch and "
                     "scheduled defragmentation wait for the window at %s",
                     REASON_MAINTENANCE_WINDOW,
                     hs.next_window_ms ? when : "(none opens within five years)");
        }
        if (pending && hs.windows && hs.override_active && !hs.in_window)
                NOTE(it,
                     "the maintenance override %s lets held disruptive steps run now; it is "
                     "spent when the cluster converges",
                     c->maintenance.override);
        if (pending && c->maintenance.override && hs.override_spent_ms) {
                hold_format_minute(hs.override_spent_ms, when, sizeof(when));
                NOTE(it, "the maintenance override %s was spent at %s: it lets nothing run",
                     c->maintenance.override, when);
        }
        hold_state_release(&hs);
}

static void plan_removed(plan *p, const state_cluster *sc, bool prune, bool revision_has_errors,
                         const intake_input *ii)
{
        const char *phase = sc->phase ? sc->phase : "";
        plan_item *it = item_add(p, sc->name, PLAN_DELETE);
        if (revision_has_errors) {
                it->action = PLAN_UNCHANGED;
                NOTE(it, "not in the valid documents of this revision; nothing is removed while "
                         "the revision has invalid documents");
                return;
        }
        if (streq(phase, "Pruned")) {
                it->action = PLAN_UNCHANGED;
                NOTE(it, "pruned earlier: members stopped; data is kept");
                return;
        }
        if (!prune && streq(phase, "Orphaned")) {
                it->action = PLAN_UNCHANGED;
                NOTE(it, "orphaned: members keep running (use --prune to stop them; data is "
                         "kept)");
                return;
        }
        /* The policy's gate on removals (clusterDeletion), as the driver asks it. */
        intake_prior prior = {
            .id = sc->name, .json = sc->desired_json, .commit = sc->desired_commit};
        intake_cluster gone;
        if (spec_intake_removal(ii, &prior, &gone) == 0 && gone.verdict == INTAKE_HELD) {
                it->action = PLAN_HELD;
                NOTE(it, "removed from the source, %s; until then gitcd keeps it as accepted",
                     gone.why);
                intake_cluster_release(&gone);
                return;
        }
        intake_cluster_release(&gone);
        if (!prune) {
                NOTE(it, "orphaned: members keep running (use --prune to stop them; data is "
                         "kept)");
                return;
        }
        int n = sc->desired_replicas;
        if (n > 0)
                STEP(it, "stop its %d %s; data is kept", n, plural(n, "member", "members"));
        else
                STEP(it, "stop its members; data is kept");
}

/* ---- attributing diagnostics to clusters -------------------------------- */

typedef struct file_docs {
        const char *file;
        ydoc_list docs;
        bool parsed;
} file_docs;

static const char *scalar(const ynode *n)
{
        return n && n->kind == YNODE_SCALAR && !isempty(n->str) ? n->str : NULL;
}

/* The "namespace/name" the document at `line` of file names, or NULL. */
static char *owner_of(file_docs *fd, yaml_budget *budget, const strmap *files,
                      const source_revision *rev, const char *file, int line)
{
        size_t i;
        if (!file || line <= 0 || !strmap_get(files, file, &i))
                return NULL;
        const source_file *sf = &rev->files[i];
        if (!fd[i].parsed) {
                diag_list ignore = DIAG_LIST_INIT;
                fd[i].file = sf->path;
                (void)yaml_parse_budget(sf->path, sf->content, sf->len, NULL, budget, &fd[i].docs,
                                        &ignore);
                diag_list_release(&ignore);
                fd[i].parsed = true;
        }
        const ydoc *doc = NULL;
        for (size_t d = 0; d < fd[i].docs.n; d++)
                if (fd[i].docs.docs[d].line <= line)
                        doc = &fd[i].docs.docs[d];
        if (!doc || !doc->root)
                return NULL;
        const ynode *meta = ynode_get(doc->root, "metadata");
        const char *name = scalar(ynode_get(meta, "name"));
        const char *ns = scalar(ynode_get(meta, "namespace"));
        if (!name)
                return NULL;
        return xasprintf("%s/%s", ns ? ns : "default", name);
}

static void diag_copy(diag_list *dst, const diag *d)
{
        diag_add(dst, d->severity, d->file, d->line, d->col, "%s", d->message);
}

static void attribute_diags(plan *p, const source_revision *rev, const diag_list *diags)
{
        file_docs *fd = xcalloc(rev->n_files + 1, sizeof(*fd));
        yaml_budget budget = yaml_revision_budget; /* the files are parsed again, once each */
        char **dest = xcalloc(diags->n + 1, sizeof(char *)); /* where each error went */
        strmap files = STRMAP_INIT;                          /* path → index in rev->files */
        for (size_t i = 0; i < rev->n_files; i++)
                (void)strmap_put(&files, rev->files[i].path, i);
        /* Errors first: they make the rejected items the other diagnostics join. */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < diags->n; i++) {
                        const diag *d = &diags->items[i];
                        if ((d->severity == DIAG_ERROR) != (pass == 0))
                                continue;
                        _cleanup_free_ char *owner =
                            owner_of(fd, &budget, &files, rev, d->file, d->line);
                        const char *name = owner ? owner : d->file ? d->file : "(revision)";
                        /* A note right after an error explains that error: keep them together. */
                        if (pass == 1 && i > 0 && dest[i - 1] &&
                            streq_ptr(diags->items[i - 1].file, d->file))
                                name = dest[i - 1];
                        plan_item *it = item_find(p, name);
                        if (it && d->severity == DIAG_ERROR && it->action != PLAN_REJECTED) {
                                /*
                                 * A valid cluster has no errors: the document that does
                                 * was not read far enough to be told apart (a syntax error
                                 * after it in the same file). Report it under the file.
                                 */
                                name = d->file ? d->file : "(revision)";
                                it = item_find(p, name);
                        }
                        if (!it && d->severity == DIAG_ERROR) {
                                it = item_add(p, name, PLAN_REJECTED);
                                it->file = xstrdup_null(d->file);
                                it->line = d->line;
                        }
                        if (d->severity == DIAG_ERROR)
                                dest[i] = xstrdup(name);
                        diag_copy(it ? &it->diags : &p->diags, d);
                }
        for (size_t i = 0; i < p->n; i++)
                diag_sort(&p->items[i].diags);
        for (size_t i = 0; i < diags->n; i++)
                free(dest[i]);
        free(dest);
        for (size_t i = 0; i < rev->n_files; i++)
                ydoc_list_release(&fd[i].docs);
        free(fd);
        strmap_release(&files);
}

/* ---- the order (spec.dependsOn) -------------------------------------------- */

/* The spec this revision defines for id, from the intake's result; NULL: none. */
static const etcd_cluster *taken_spec(const intake_result *taken, const char *id)
{
        const intake_cluster *c = intake_find(taken, id);
        return c && c->verdict != INTAKE_DUPLICATE ? c->spec : NULL;
}

/*
 * The gate the driver would put on a change (or a creation) of ic with
 * upstreams, judged now over what the state store holds: the same function
 * and facts the driver reads (intake/order.h), so plan says what apply does.
 */
static void plan_gate(const plan_input *in, const intake_result *taken, const intake_cluster *ic,
                      plan_item *it)
{
        const etcd_cluster *c = ic->spec;
        if (!c->n_depends_on || (it->action != PLAN_CREATE && it->action != PLAN_UPDATE))
                return;
        order_upstream *ups = xcalloc(c->n_depends_on + 1, sizeof(*ups));
        char **ids = xcalloc(c->n_depends_on + 1, sizeof(char *));
        char **hashes = xcalloc(c->n_depends_on + 1, sizeof(char *));
        const char *commit = in->rev->commit_id[0] ? in->rev->commit_id : NULL;
        for (size_t j = 0; j < c->n_depends_on; j++) {
                ids[j] = order_resolve(c, c->depends_on[j]);
                const etcd_cluster *up = taken_spec(taken, ids[j]);
                hashes[j] = up ? spec_hash(up) : NULL;
                const state_cluster *sc = NULL;
                for (size_t i = 0; in->applied && i < in->applied->n && !sc; i++)
                        if (streq(in->applied->items[i]->name, ids[j]))
                                sc = in->applied->items[i];
                order_upstream_from_state(ids[j], sc, in->verdicts, commit, hashes[j], &ups[j]);
                /* an upstream the revision refuses now holds it as the driver's would */
                const intake_cluster *uc = intake_find(taken, ids[j]);
                if (uc && uc->verdict == INTAKE_REFUSED) {
                        ups[j].failed_reason = "refused";
                        ups[j].failed_message = uc->why;
                } else if (uc && uc->verdict == INTAKE_HELD) {
                        ups[j].held = uc->why;
                }
        }
        order_gate g;
        if (order_gate_decide(commit, c->soak_seconds, ups, c->n_depends_on, in->now_ms, &g) == 0 &&
            g.kind != ORDER_RELEASE) {
                it->wait_reason = g.reason;
                it->wait = TAKE_PTR(g.message);
        }
        order_gate_release(&g);
        for (size_t j = 0; j < c->n_depends_on; j++) {
                free(ids[j]);
                free(hashes[j]);
        }
        free(ids);
        free(hashes);
        free(ups);
}

/* ---- the plan ----------------------------------------------------------- */

static int cmp_item(const void *x, const void *y)
{
        return strcmp(((const plan_item *)x)->name, ((const plan_item *)y)->name);
}

int plan_compute(const plan_input *in, plan **ret)
{
        if (!in || !in->rev || !ret)
                return -EINVAL;
        const source_revision *rev = in->rev;
        plan *p = XNEW(plan);
        p->diags = (diag_list)DIAG_LIST_INIT;

        /* The intake apply and run use (intake/intake.h): one rule, so plan and apply agree. */
        applied_index applied;
        applied_index_init(&applied, in->applied);
        size_t n_priors = in->applied ? in->applied->n : 0;
        intake_prior *priors = xcalloc(n_priors + 1, sizeof(*priors));
        for (size_t i = 0; i < n_priors; i++) {
                const state_cluster *sc = in->applied->items[i];
                priors[i] = (intake_prior){
                    .id = sc->name, .json = sc->desired_json, .commit = sc->desired_commit};
        }
        intake_input ii = {.rev = rev,
                           .mode = INTAKE_APPLY,
                           .caps = in->caps,
                           .target = in->target ? in->target : target_kind_default()->name,
                           .policy = in->policy,
                           .kube = in->kube,
                           .priors = priors,
                           .n_priors = n_priors,
                           .src = in->src};
        intake_result taken;
        int k = spec_intake(&ii, &taken);
        if (k < 0) {
                free(priors);
                strmap_release(&applied.by_name);
                plan_free(p);
                return k;
        }
        bool errors = taken.errors;
        _cleanup_free_ int *tiers = order_tiers(&taken);
        for (size_t i = 0; i < taken.n; i++) {
                intake_cluster *ic = &taken.items[i];
                if (ic->verdict == INTAKE_DUPLICATE || ic->verdict == INTAKE_REFUSED) {
                        /* Defined twice: neither definition is taken in. Refused: not either. */
                        plan_item *it = item_add(p, ic->id, PLAN_REJECTED);
                        it->file = xstrdup_null(ic->spec->file);
                        it->line = ic->spec->line;
                        for (size_t d = 0; d < ic->diags.n; d++)
                                diag_copy(&it->diags, &ic->diags.items[d]);
                        if (ic->verdict == INTAKE_REFUSED && ic->exists)
                                NOTE(it, "the last accepted spec stays in force");
                        continue;
                }
                plan_item *it = plan_cluster(p, ic->spec, applied_find(&applied, ic->id),
                                             members_find(in, ic->id));
                it->tier = tiers[i];
                plan_gate(in, &taken, ic, it);
                note_holds(it, in, ic->spec);
                note_takeover(it, in, ic->spec);
                if (ic->verdict == INTAKE_HELD) {
                        /* Not offered: the steps say what follows once it is approved. */
                        it->action = PLAN_HELD;
                        NOTE(it, "held: %s; the last accepted spec stays in force until then",
                             ic->why);
                        continue;
                }
                if (it->action != PLAN_REJECTED)
                        it->spec = TAKE_PTR(ic->spec);
        }
        attribute_diags(p, rev, &taken.diags);

        for (size_t i = 0; in->applied && i < in->applied->n; i++) {
                const state_cluster *sc = in->applied->items[i];
                if (!item_find(p, sc->name))
                        plan_removed(p, sc, in->prune, errors, &ii);
        }
        free(priors);

        if (p->n > 1)
                qsort(p->items, p->n, sizeof(*p->items), cmp_item);
        for (size_t i = 0; i < p->n; i++) {
                switch (p->items[i].action) {
                case PLAN_CREATE:
                        p->n_create++;
                        break;
                case PLAN_UPDATE:
                        p->n_update++;
                        break;
                case PLAN_DELETE:
                        p->n_delete++;
                        break;
                case PLAN_REJECTED:
                        p->n_rejected++;
                        break;
                case PLAN_UNCHANGED:
                        p->n_unchanged++;
                        break;
                case PLAN_HELD:
                        p->n_held++;
                        break;
                }
        }
        intake_result_release(&taken);
        strmap_release(&applied.by_name);
        strmap_release(&p->by_name); /* the items are sorted now: the index is stale */
        *ret = p;
        return 0;
}

bool plan_has_changes(const plan *p)
{
        return p->n_create + p->n_update + p->n_delete > 0;
}

bool plan_has_errors(const plan *p)
{
        if (p->n_rejected > 0 || diag_has_errors(&p->diags))
                return true;
        for (size_t i = 0; i < p->n; i++)
                if (diag_has_errors(&p->items[i].diags))
                        return true;
        return false;
}

/* ---- printing ------------------------------------------------------------ */

/* A value for people: strings bare, the rest as compact JSON; absent is "(none)". */
static char *value_text(const json_t *v, bool redacted)
{
        if (!v)
                return xstrdup("(none)");
        if (redacted)
                return xstrdup("(redacted)");
        if (json_is_string(v))
                return xstrdup(json_string_value(v));
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        return s ? s : xstrdup("?");
}

#define C_RESET   "\033[0m"
#define C_GREEN   "\033[32m"
#define C_YELLOW  "\033[33m"
#define C_RED     "\033[31m"
#define C_BOLDRED "\033[1;31m"
#define C_DIM     "\033[2m"

static void print_item(const plan_item *it, const plan_print_opts *o, FILE *out)
{
        static const char marks[] = {
            [PLAN_CREATE] = '+',   [PLAN_UPDATE] = '~',    [PLAN_DELETE] = '-',
            [PLAN_REJECTED] = '!', [PLAN_UNCHANGED] = '=', [PLAN_HELD] = '?',
        };
        static const char *const colors[] = {
            [PLAN_CREATE] = C_GREEN,     [PLAN_UPDATE] = C_YELLOW, [PLAN_DELETE] = C_RED,
            [PLAN_REJECTED] = C_BOLDRED, [PLAN_UNCHANGED] = C_DIM, [PLAN_HELD] = C_YELLOW,
        };
        const char *on = o->color ? colors[it->action] : "";
        const char *off = o->color ? C_RESET : "";

        /* names, Git paths and messages come from the commit: escaped (util/escape.h) */
        _cleanup_free_ char *name = str_escape(it->name), *file = str_escape(it->file);
        fprintf(out, "%s%c %s %s%s", on, marks[it->action], plan_action_name(it->action), name,
                off);
        if (file && it->action != PLAN_REJECTED)
                fprintf(out, "  (%s:%d)", file, it->line);
        fputc('\n', out);
        for (size_t i = 0; i < it->n_changes; i++) {
                const plan_change *c = &it->changes[i];
                _cleanup_free_ char *from = value_text(c->from, c->redacted);
                _cleanup_free_ char *to = value_text(c->to, c->redacted);
                _cleanup_free_ char *path = str_escape(c->path);
                fprintf(out, "    %s: %s → %s\n", path, from, to);
        }
        for (size_t i = 0; i < it->diags.n; i++) {
                _cleanup_free_ char *line = diag_format(&it->diags.items[i]);
                fprintf(out, "    %s\n", line);
        }
        for (size_t i = 0; i < it->n_notes; i++) {
                _cleanup_free_ char *note = str_escape(it->notes[i]);
                fprintf(out, "    %s\n", note);
        }
        if (it->wait) {
                _cleanup_free_ char *wait = str_escape(it->wait);
                fprintf(out, "    %s: %s; taken in then, the steps below follow\n", it->wait_reason,
                        wait);
        }
        if (it->n_steps > 0) {
                fprintf(out, "    Steps:\n");
                for (size_t i = 0; i < it->n_steps; i++)
                        fprintf(out, "      %zu. %s\n", i + 1, it->steps[i]);
        }
}

static void first_line(const char *s, strbuf *out)
{
        if (!s)
                return;
        sb_append_len(out, s, strcspn(s, "\n"));
}

/*
 * "Order (spec.dependsOn):", a line per tier, then what waits on what;
 * nothing when no cluster has upstreams.
 */
static void print_order(const plan *p, FILE *out)
{
        int top = -1;
        for (size_t i = 0; i < p->n; i++)
                top = MAX(top, p->items[i].tier);
        if (top < 1)
                return;
        fprintf(out, "Order (spec.dependsOn), each tier after the one before:\n");
        for (int t = 0; t <= top; t++) {
                fprintf(out, "  %d:", t);
                for (size_t i = 0; i < p->n; i++)
                        if (p->items[i].tier == t) {
                                _cleanup_free_ char *name = str_escape(p->items[i].name);
                                fprintf(out, " %s", name);
                        }
                fputc('\n', out);
        }
        for (size_t i = 0; i < p->n; i++)
                if (p->items[i].wait) {
                        _cleanup_free_ char *name = str_escape(p->items[i].name);
                        _cleanup_free_ char *wait = str_escape(p->items[i].wait);
                        fprintf(out, "  %s: %s\n", name, wait);
                }
        fputc('\n', out);
}

void plan_print_text(const plan *p, const source_revision *rev, const plan_print_opts *o, FILE *out)
{
        if (rev->commit_id[0]) {
                strbuf msg = STRBUF_INIT;
                first_line(rev->message, &msg);
                fprintf(out, "Revision %.12s", rev->commit_id);
                if (rev->ref)
                        fprintf(out, " (%s)", rev->ref);
                fprintf(out, " of %s\n", rev->repository ? rev->repository : "?");
                _cleanup_free_ char *who = str_escape(rev->author.name ? rev->author.name : "");
                _cleanup_free_ char *mail = str_escape(rev->author.email ? rev->author.email : "");
                _cleanup_free_ char *subject = str_escape(sb_str(&msg));
                fprintf(out, "  by %s <%s>: %s\n", who, mail, subject);
                sb_release(&msg);
        } else {
                fprintf(out, "Directory %s\n", rev->repository ? rev->repository : "?");
        }
        fputc('\n', out);

        bool listed = false;
        for (size_t i = 0; i < p->n; i++) {
                const plan_item *it = &p->items[i];
                if (it->action == PLAN_UNCHANGED && !o->verbose && it->n_notes == 0)
                        continue;
                print_item(it, o, out);
                listed = true;
        }
        if (o->show_diag && p->diags.n > 0) {
                if (listed)
                        fputc('\n', out);
                diag_print(&p->diags, out);
                listed = true;
        }
        if (listed)
                fputc('\n', out);
        print_order(p, out);
        if (!plan_has_changes(p) && p->n_rejected == 0 && p->n_held == 0)
                fprintf(out, "No changes: nothing to create, change or delete.\n");
        fprintf(out, "Plan: %d to create, %d to change, %d to delete, %d rejected", p->n_create,
                p->n_update, p->n_delete, p->n_rejected);
        if (p->n_held > 0)
                fprintf(out, ", %d held waiting for approvals", p->n_held);
        fprintf(out, ".\n");
}

static json_t *json_str_or_null(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *person_json(const source_person *pp)
{
        if (!pp->name && !pp->email)
                return json_null();
        return json_pack("{s:o,s:o,s:I}", "name", json_str_or_null(pp->name), "email",
                         json_str_or_null(pp->email), "time", (json_int_t)pp->time);
}

static json_t *diags_json(const diag_list *l)
{
        static const char *const sev[] = {"note", "warning", "error"};
        json_t *a = json_array();
        for (size_t i = 0; i < l->n; i++) {
                const diag *d = &l->items[i];
                _cleanup_free_ char *text = diag_format(d);
                json_array_append_new(
                    a, json_pack("{s:s,s:o,s:i,s:i,s:s,s:s}", "severity", sev[d->severity], "file",
                                 json_str_or_null(d->file), "line", d->line, "column", d->col,
                                 "message", d->message, "text", text));
        }
        return a;
}

static json_t *strv_json(char **v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *change_value(const json_t *v, bool redacted)
{
        if (!v)
                return json_null();
        if (redacted)
                return json_string("(redacted)");
        return json_deep_copy(v);
}

json_t *plan_to_json(const plan *p, const source_revision *rev)
{
        json_t *r =
            json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "repository", json_str_or_null(rev->repository),
                      "ref", json_str_or_null(rev->ref), "commit",
                      rev->commit_id[0] ? json_string(rev->commit_id) : json_null(), "author",
                      person_json(&rev->author), "committer", person_json(&rev->committer),
                      "message", json_str_or_null(rev->message));
        json_t *clusters = json_array();
        for (size_t i = 0; i < p->n; i++) {
                const plan_item *it = &p->items[i];
                json_t *changes = json_array();
                for (size_t c = 0; c < it->n_changes; c++) {
                        const plan_change *ch = &it->changes[c];
                        json_array_append_new(
                            changes, json_pack("{s:s,s:o,s:o,s:b}", "path", ch->path, "from",
                                               change_value(ch->from, ch->redacted), "to",
                                               change_value(ch->to, ch->redacted), "redacted",
                                               ch->redacted));
                }
                json_t *wait = it->wait ? json_pack("{s:s,s:s}", "reason", it->wait_reason,
                                                    "message", it->wait)
                                        : json_null();
                json_array_append_new(
                    clusters,
                    json_pack("{s:s,s:s,s:o,s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "name", it->name,
                              "action", plan_action_name(it->action), "file",
                              json_str_or_null(it->file), "line", it->line, "changes", changes,
                              "steps", strv_json(it->steps, it->n_steps), "notes",
                              strv_json(it->notes, it->n_notes), "diagnostics",
                              diags_json(&it->diags), "tier",
                              it->tier >= 0 ? json_integer(it->tier) : json_null(), "wait", wait));
        }
        json_t *summary =
            json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:b}", "create", p->n_create, "update", p->n_update,
                      "delete", p->n_delete, "rejected", p->n_rejected, "unchanged", p->n_unchanged,
                      "held", p->n_held, "changes", plan_has_changes(p));
        return json_pack("{s:o,s:o,s:o,s:o}", "revision", r, "clusters", clusters, "diagnostics",
                         diags_json(&p->diags), "summary", summary);
}

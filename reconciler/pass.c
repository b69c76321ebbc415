/*
 * One pass over one cluster: an ordered array of small steps.
 *
 * A pass observes the world, compares it with the latched spec, and takes
 * at most one safe step; the same pass repeated is harmless. Each step is
 * a function of the pass's one context (pass_ctx: the cluster, its world,
 * decide()'s step, the result) that either lets the next step run or ends
 * the pass, the pass_result filled with its typed outcome: converged,
 * progressed (pass again at once), waiting (requeue after poll_ms), blocked
 * (retry after a long backoff) or failed (terminal until the spec changes);
 * or it ends the pass with an error, when the pass could not run at all.
 *
 *   begin                latch the spec; end when terminal, unsupported, blocked
 *   holds                hold.h: suspended, the maintenance windows, an override
 *   tls-switch-prepare   TLS switched off: the surfaces still on, set on the spec
 *   ca-rotation-prepare  CA rotation: its phase set on the spec
 *   observe              a crashed run's journal closed; the world; upkeep
 *   recovery             disaster recovery: a pass that is the recovery's ends here
 *   consistency-prepare  consistency.c: the freeze, a repair asked for (its member
 *                        taken for lost), etcd's CORRUPT alarm as last listed
 *   decide               decide.c: the one safe step
 *   hold                 hold.h: a step a hold keeps back becomes a wait that says why
 *   upgrade              the gates of a rolling version change around the step
 *   consistency          the members' data compared when due; the freeze over the step
 *   conditions           the result says what was decided; conditions and phase
 *   deadline             converged: cleared; overdue: terminal; held by the freeze: cleared
 *   held                 a step held (suspended, outside the windows): the pass ends blocked,
 *                        requeued for the next window
 *       converged only:  ca-rotation, tls-switch, auth (never while frozen), maintenance
 *                        (while frozen: the alarms only); the first that takes a step
 *                        ends the pass; each asks hold.h first
 *   override-spent       converged: a maintenance override token is spent
 *   slow-leader          converged: the voters' disk figures once per window; a leader
 *                        whose disk is an outlier hands leadership over (slowleader.c)
 *   freeze               frozen, or a step held: the pass ends blocked (or waiting)
 *   act                  a step to take: journal-before-act (act.c)
 *
 * The membership state machine (its diagram and invariants) is decide.c's;
 * the effects, each journaled before it acts, are act.c's.
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "pki/auto.h"
#include "reconciler/takeover.h"
#include "reconciler/auth.h"
#include "reconciler/carotate.h"
#include "reconciler/consistency.h"
#include "reconciler/hold.h"
#include "reconciler/internal.h"
#include "reconciler/proof.h"
#include "reconciler/recovery.h"
#include "reconciler/tlsswitch.h"
#include "state/carotate.h"
#include "state/holds.h"
#include "state/recovery.h"
#include "util/xalloc.h"

/* Everything one pass knows, from the step that learns it on. */
typedef struct pass_ctx {
        reconciler *r;
        cluster_ctx *x;
        pass_result *res;
        world w;
        const etcd_cluster *c; /* the latched spec (x->latched), from "begin" on */
        carotate_env ca_env;   /* set up before observing, asked again once converged */
        bool first_pass;       /* this process's first over the cluster (from "observe" on) */
        desired want;          /* from "decide" on */
        step s;                /* decide()'s step, from "decide" on; "upgrade" may rewrite it */
        bool decided;
        consistency_pass cons; /* from "consistency-prepare" on: the freeze, a repair */
        bool cons_ready;       /* cons was filled */
        bool corrupt_listed;   /* maintenance listed an active CORRUPT alarm this pass */
        hold_state holds;      /* from "holds" on (reconciler/hold.h) */
        bool holds_ready;
        bool ca_start_waits;      /* a new rotateCA token waits for the holds to lift */
        bool renewed_under_hold;  /* a renewal ran in the place of a held step */
        const char *held;         /* a step held this pass: its reason word (REASON_SUSPENDED...) */
        const char *held_message; /* points into holds */
        int error;                /* PASS_NEXT_ERROR: the -errno reconciler_pass() returns */
        /* gitcd's client identity toward the members, asked of the target once (pass_tls) */
        bool tls_read;
        char *tls_ca, *tls_cert, *tls_key;
} pass_ctx;

/* gitcd's client identity (cluster_client_tls), read at the first step that needs it. */
static void pass_tls(pass_ctx *p, const char **ret_ca, const char **ret_cert, const char **ret_key)
{
        if (!p->tls_read) {
                cluster_client_tls(p->r, p->c, &p->tls_ca, &p->tls_cert, &p->tls_key);
                p->tls_read = true;
        }
        *ret_ca = p->tls_ca;
        *ret_cert = p->tls_cert;
        *ret_key = p->tls_key;
}

/* What a step tells the pass. */
typedef enum pass_next {
        PASS_NEXT_CONTINUE, /* the next step runs */
        PASS_NEXT_END,      /* the pass ends here, with res filled */
        PASS_NEXT_ERROR,    /* the pass could not run: error holds -errno, res->message why */
} pass_next;

/* Which passes a step runs in. */
typedef enum pass_when {
        PASS_WHEN_ALWAYS,
        /* decide() chose no step, no converged-only step before took one, not frozen */
        PASS_WHEN_CONVERGED,
        /* as CONVERGED, frozen or not; or the freeze (or a missing proof) held the step */
        PASS_WHEN_IDLE,
        /* decide() chose a step (after the deadline let it through) that was not held */
        PASS_WHEN_STEP,
} pass_when;

typedef struct pass_step {
        const char *name;
        pass_next (*run)(pass_ctx *p);
        pass_when when;
} pass_step;

static pass_next pass_error(pass_ctx *p, int k)
{
        assert(k < 0);
        p->error = k;
        return PASS_NEXT_ERROR;
}

/* The state store failed in what a step did first: the pass could not run. */
static pass_next pass_state_error(pass_ctx *p, int k, const char *what)
{
        pass_say(p->res, "%s: %s", what, state_last_error());
        return pass_error(p, k);
}

/* ---- before observing ---------------------------------------------------- */

/* The commit and author behind the latched spec, for audit events. */
static void origin_of(reconciler *r, const state_cluster *sc, char **ret_commit, char **ret_author)
{
        *ret_commit = NULL;
        *ret_author = NULL;
        if (!sc || isempty(sc->desired_commit))
                return;
        *ret_commit = xstrdup(sc->desired_commit);
        state_revision *rev = NULL;
        if (state_revision_get(r->opts.db, sc->desired_commit, &rev) == 0 && rev) {
                if (rev->author_name)
                        *ret_author = xasprintf("%s <%s>", rev->author_name,
                                                rev->author_email ? rev->author_email : "");
                state_revision_free(rev);
        }
}

/*
 * Before observing: latch the spec, and end the pass at once when the
 * cluster is terminal, asks for what the target cannot do, or waits out a
 * refused step.
 */
static pass_next pass_begin(pass_ctx *p)
{
        reconciler *r = p->r;
        cluster_ctx *x = p->x;
        world *w = &p->w;
        pass_result *res = p->res;
        /* the specs' texts only when the latched spec is not the recorded one (latch) */
        int k = state_cluster_get_brief(r->opts.db, x->name, &w->sc);
        if (k < 0)
                return pass_error(p, k);
        k = reconciler_latch(r, x, w->sc);
        if (k < 0) {
                pass_say(res, "cannot latch the spec: %s",
                         k == -EBADMSG ? "the stored spec does not parse" : state_last_error());
                return pass_error(p, k);
        }
        assert(x->latched);
        machines_apply_timeouts(r, x);
        const etcd_cluster *c = p->c = x->latched;
        origin_of(r, w->sc, &w->commit, &w->author);

        /* Terminal until the spec changes: stored as such when the deadline passed. */
        if (w->sc->terminal_reason) {
                res->outcome = PASS_FAILED;
                snprintf(res->reason, sizeof(res->reason), "%s", w->sc->terminal_reason);
                pass_say(res, "%s", w->sc->terminal_message ? w->sc->terminal_message : "");
                return PASS_NEXT_END;
        }

        const target_ops *ops = r->opts.target->ops;
        if ((c->tls.provider == TLS_PROVIDER_SECRETS ||
             c->tls.provider == TLS_PROVIDER_CERT_MANAGER) &&
            !(ops->caps & TARGET_CAP_TLS_FROM_SECRETS)) {
                res->outcome = PASS_FAILED;
                snprintf(res->reason, sizeof(res->reason), "Unsupported");
                pass_say(res,
                         "tls.provider %s needs Kubernetes; on the %s target use "
                         "tls.provider auto",
                         tls_provider_name(c->tls.provider), ops->name);
                return PASS_NEXT_END;
        }

        /* A step the target refused: not again before the pause is over. */
        if (x->blocked_until && mono(r) < x->blocked_until) {
                res->outcome = PASS_BLOCKED;
                res->poll_ms = (int)(x->blocked_until - mono(r));
                pass_say(res, "%s", x->blocked_message ? x->blocked_message : "");
                return PASS_NEXT_END;
        }
        x->blocked_until = 0;
        return PASS_NEXT_CONTINUE;
}

/*
 * The holds on the cluster (reconciler/hold.h): spec.suspend or `gitcd
 * suspend`, the maintenance windows at this pass's wall clock, whether
 * spec.maintenance.override's token was spent.
 */
static pass_next pass_holds(pass_ctx *p)
{
        int k = hold_read(p->r->opts.db, p->x->name, p->c, wall(p->r), &p->holds);
        if (k < 0)
                return pass_state_error(p, k, "holds");
        p->holds_ready = true;
        return PASS_NEXT_CONTINUE;
}

/* Whether a hold keeps work of class cls back; p->held and p->held_message say which. */
static bool pass_held(pass_ctx *p, hold_class cls)
{
        const char *msg = NULL;
        const char *word = hold_judge(&p->holds, cls, &msg);
        if (!word)
                return false;
        p->held = word;
        p->held_message = msg;
        return true;
}

/*
 * The pass ends on held work: blocked (a person or the clock must act),
 * its message "WHAT: why" (what NULL: the message already says both).
 */
static pass_next pass_end_held(pass_ctx *p, const char *what)
{
        pass_result *res = p->res;
        res->outcome = PASS_BLOCKED;
        res->held = true;
        snprintf(res->reason, sizeof(res->reason), "%s", p->held);
        if (what)
                pass_say(res, "%s: %s", what, p->held_message ? p->held_message : "held");
        /* The daemon wakes at the window; a person's resume is seen within the blocked poll. */
        int64_t wait = POLL_BLOCKED_MS;
        if (streq(p->held, REASON_MAINTENANCE_WINDOW) && p->holds.next_window_ms)
                wait = MIN(MAX(p->holds.next_window_ms - wall(p->r), 1000), 3600 * 1000);
        res->poll_ms = (int)wait;
        return PASS_NEXT_END;
}

/* TLS switched off (reconciler/tlsswitch.h): the surfaces still on, set on the spec. */
static pass_next pass_tls_switch_prepare(pass_ctx *p)
{
        tlsswitch_env pre = {.db = p->r->opts.db,
                             .cluster = p->x->name,
                             .commit = p->w.commit,
                             .author = p->w.author,
                             .now_ms = wall(p->r)};
        int k = tlsswitch_prepare(&pre, p->x->latched);
        return k < 0 ? pass_state_error(p, k, "TLS switch") : PASS_NEXT_CONTINUE;
}

/*
 * CA rotation (reconciler/carotate.h): its phase is set on the spec before
 * observing. The environment is kept for the converged pass's step: the
 * records it points to are the ones "observe" reads.
 */
static pass_next pass_ca_rotation_prepare(pass_ctx *p)
{
        reconciler *r = p->r;
        p->ca_env = (carotate_env){
            .db = r->opts.db,
            .target = r->opts.target,
            .c = p->x->latched,
            .cluster = p->x->name,
            .bootstrapped = p->w.sc && !isempty(p->w.sc->cluster_id),
            .records = &p->w.records,
            .commit = p->w.commit,
            .author = p->w.author,
            .now_ms = wall(r),
            .start_held =
                hold_judge(&p->holds, hold_work_class(HOLD_WORK_CA_ROTATION), NULL) != NULL,
            .ret_start_waits = &p->ca_start_waits};
        int k = carotate_prepare(&p->ca_env);
        return k < 0 ? pass_state_error(p, k, "CA rotation") : PASS_NEXT_CONTINUE;
}

/* ---- observe, decide ----------------------------------------------------- */

/* Observe the world: the journal left by an earlier run, the target, etcd, the records. */
/* A takeover (spec.adopt, reconciler/takeover.h): the old cluster found, judged, recorded. */
static pass_next pass_takeover(pass_ctx *p)
{
        return takeover_prepare(p->r, p->x, p->c, p->w.commit, p->w.author, p->res)
                   ? PASS_NEXT_END
                   : PASS_NEXT_CONTINUE;
}

static pass_next pass_observe(pass_ctx *p)
{
        reconciler *r = p->r;
        cluster_ctx *x = p->x;
        world *w = &p->w;
        /* The first pass of this process: time gitcd was not running does not count. */
        p->first_pass = !x->journal_checked;
        journal_recover(r, x);
        (void)r->opts.target->ops->tick(r->opts.target);
        int k = world_observe(r, x, p->c, w);
        if (k < 0) {
                pass_say(p->res, "cannot observe: %s",
                         w->target_failed ? target_last_error(r->opts.target) : state_last_error());
                if (w->target_failed)
                        world_record_unknown(r, x, w);
                return pass_error(p, k);
        }
        world_record(r, x, p->c, w);
        takeover_observed(r, x, p->c, w);
        /* Suspended: the target's shared objects and strays are left as they are too. */
        if (!w->quiet && !p->holds.suspended)
                act_upkeep(r, x, p->c, w);
        assert(w->obs.n == w->n);
        return PASS_NEXT_CONTINUE;
}

/* Disaster recovery (reconciler/recovery.c): a pass that is the recovery's ends here. */
static pass_next pass_recovery(pass_ctx *p)
{
        reconciler *r = p->r;
        cluster_ctx *x = p->x;
        world *w = &p->w;
        if (pass_held(p, hold_work_class(HOLD_WORK_RECOVERY))) {
                /* a recovery asked for (running, or a spec token not used yet) waits */
                state_recovery *run = NULL;
                bool asked = state_recovery_running(r->opts.db, x->name, &run) == 0;
                state_recovery_free(run);
                const recovery_spec *rc = &p->c->recovery;
                asked = asked || (rc->from != RECOVERY_NONE && rc->token &&
                                  state_recovery_token_used(r->opts.db, x->name, rc->token) == 0);
                if (asked)
                        return pass_end_held(p, "the recovery");
                p->held = NULL;
                p->held_message = NULL;
        }
        recovery_env env = {
            .db = r->opts.db,
            .target = r->opts.target,
            .etcd = r->opts.etcd,
            .conn = x->client,
            .c = p->c,
            .cluster = x->name,
            .records = &w->records,
            .obs = &w->obs,
            .quorum = world_has_quorum(w),
            .latched_json = state_cluster_spec_json(w->sc),
            .latched_hash = x->latched_hash,
            .commit = w->commit,
            .author = w->author,
            .etcd_dir = r->opts.etcd_dir,
            .now_ms = wall(r),
        };
        int k = recovery_pass(&env, p->res);
        if (k < 0)
                return pass_error(p, k);
        if (k == 0)
                return PASS_NEXT_CONTINUE;
        (void)state_cluster_set_phase(r->opts.db, x->name, "Recovering", wall(r));
        return PASS_NEXT_END;
}

/* What the consistency check gets from the pass (reconciler/consistency.h). */
static consistency_env cons_env(pass_ctx *p)
{
        reconciler *r = p->r;
        world *w = &p->w;
        return (consistency_env){
            .db = r->opts.db,
            .etcd = r->opts.etcd,
            .conn = p->x->client,
            .c = p->c,
            .cluster = p->x->name,
            .sc = w->sc,
            .records = &w->records,
            .obs = &w->obs,
            .commit = w->commit,
            .author = w->author,
            .now_ms = wall(r),
        };
}

/*
 * The freeze and a repair, before deciding: a member a person asked to
 * replace is taken for lost by decide() (reconciler/consistency.h).
 */
static pass_next pass_consistency_prepare(pass_ctx *p)
{
        consistency_env env = cons_env(p);
        int k = consistency_prepare(&env, &p->cons);
        p->cons_ready = true;
        if (k < 0)
                return pass_state_error(p, k, "consistency");
        return PASS_NEXT_CONTINUE;
}

/* The one safe step (reconciler/decide.h). */
static pass_next pass_decide(pass_ctx *p)
{
        int64_t life_s = 0, renew_s = 0;
        pki_auto_lifetime(p->c, &life_s, &renew_s);
        p->want = (desired){.replicas = p->c->replicas,
                            .static_bootstrap = p->c->bootstrap_mode == BOOTSTRAP_STATIC,
                            .renew_before_ms = renew_s * 1000,
                            .takeover = p->x->takeover};
        decide(&p->want, &p->w.obs, &p->s);
        p->decided = true;
        return PASS_NEXT_CONTINUE;
}

/*
 * A step a hold keeps back (reconciler/hold.h) becomes a wait that says
 * why, before the rollout's gates (no snapshot before a held upgrade) and
 * the conditions (which show it: Progressing with the hold's reason).
 */
static pass_next pass_hold(pass_ctx *p)
{
        step *s = &p->s;
        if (!pass_held(p, hold_step_class(s)))
                return PASS_NEXT_CONTINUE;
        /* Renewal is never held, nor kept waiting by a held step decided before it. */
        if (decide_renewal(&p->want, &p->w.obs, s)) {
                p->held = NULL;
                p->renewed_under_hold = true;
                return PASS_NEXT_CONTINUE;
        }
        _cleanup_free_ char *what = xstrdup(s->message ? s->message : step_kind_name(s->kind));
        s->kind = STEP_WAIT;
        s->reason = p->held;
        step_say(s, "%s: %s", what, p->held_message ? p->held_message : "held");
        return PASS_NEXT_CONTINUE;
}

/* A rolling version change (rollout.c): the step may wait; UpgradeFailed ends the pass. */
static pass_next pass_upgrade(pass_ctx *p)
{
        if (rollout_pass(p->r, p->x, p->c, &p->w, &p->s, p->res) == 0)
                return PASS_NEXT_END; /* terminal, res filled */
        /* The member in flight still settles: that wait is the pass's, not the hold's. */
        if (p->held && !streq_ptr(p->s.reason, p->held))
                p->held = NULL;
        return PASS_NEXT_CONTINUE;
}

/*
 * The members' data compared when a check is due, and the freeze over the
 * step decided (reconciler/proof.h): a held step becomes a wait that says
 * why, which the conditions then show.
 */
static pass_next pass_consistency(pass_ctx *p)
{
        consistency_env env = cons_env(p);
        int k = consistency_after_decide(&env, &p->cons, &p->s, p->s.kind == STEP_CONVERGED);
        if (k < 0)
                return pass_state_error(p, k, "consistency");
        p->w.frozen = p->cons.frozen;
        p->w.frozen_message = p->cons.frozen ? p->cons.message : NULL;
        return PASS_NEXT_CONTINUE;
}

/* The result says what was decided; the conditions and the phase are stored. */
static pass_next pass_conditions(pass_ctx *p)
{
        pass_result *res = p->res;
        const step *s = &p->s;
        res->step = s->kind;
        snprintf(res->member, sizeof(res->member), "%s", s->member ? s->member : "");
        snprintf(res->reason, sizeof(res->reason), "%s", s->reason ? s->reason : "");
        pass_say(res, "%s", s->message);
        conditions_update(p->r, p->x, &p->w, &p->want, s);
        consistency_env env = cons_env(p);
        (void)consistency_record_condition(&env, &p->cons);
        return PASS_NEXT_CONTINUE;
}

/* The progress deadline (conditions.c): converged goes on to the converged-only steps. */
static pass_next pass_deadline(pass_ctx *p)
{
        pass_result *res = p->res;
        if ((p->cons.held && p->cons.frozen) || p->held) {
                /* Held for a person: no deadline runs out meanwhile. */
                const state_cluster *sc = p->w.sc;
                if (sc->progress_deadline_ms)
                        (void)state_cluster_latch(p->r->opts.db, p->x->name,
                                                  state_cluster_spec_json(sc), p->x->latched_hash,
                                                  0, wall(p->r));
                return PASS_NEXT_CONTINUE;
        }
        if (progress_deadline(p->r, p->x, p->c, &p->w, &p->s, p->first_pass, res))
                return PASS_NEXT_CONTINUE;
        if (res->outcome != PASS_CONVERGED)
                return PASS_NEXT_END; /* terminal */
        /* Converged: look again when the next certificate is due for renewal. */
        int64_t due = certs_next_renewal_ms(&p->want, &p->w.obs);
        if (due)
                res->poll_ms = (int)MIN(MAX(due - p->w.obs.now_ms, 1000), 3600 * 1000);
        return PASS_NEXT_CONTINUE;
}

/* A step held (pass_hold): the pass ends blocked, its message the step's and why. */
static pass_next pass_held_step(pass_ctx *p)
{
        return p->held ? pass_end_held(p, NULL) : PASS_NEXT_CONTINUE;
}

/* ---- a converged cluster ------------------------------------------------- */

/* CA rotation (reconciler/carotate.h): the rotation's next step. */
static pass_next pass_ca_rotation(pass_ctx *p)
{
        if (pass_held(p, hold_work_class(HOLD_WORK_CA_ROTATION))) {
                state_ca_rotation *run = NULL;
                bool running = state_ca_rotation_running(p->r->opts.db, p->x->name, &run) == 0;
                state_ca_rotation_free(run);
                if (running || p->ca_start_waits)
                        return pass_end_held(p, "the CA rotation");
                p->held = NULL;
                return PASS_NEXT_CONTINUE;
        }
        bool new_identity = false;
        int k = carotate_converged(&p->ca_env, p->res, &new_identity);
        if (k == 0)
                return PASS_NEXT_CONTINUE;
        if (new_identity && p->x->client) /* dial again with the new certificate */
                cluster_client_drop(p->r, p->x);
        return k < 0 ? pass_error(p, k) : PASS_NEXT_END;
}

/* TLS switched on or off (reconciler/tlsswitch.h): the switch's next step. */
static pass_next pass_tls_switch(pass_ctx *p)
{
        reconciler *r = p->r;
        world *w = &p->w;
        tlsswitch_env ts = {.db = r->opts.db,
                            .target = r->opts.target,
                            .c = p->c,
                            .cluster = p->x->name,
                            .records = &w->records,
                            .etcd = w->etcd,
                            .leader = w->leader,
                            .ops = r->opts.etcd,
                            .conn = p->x->client,
                            .commit = w->commit,
                            .author = w->author,
                            .now_ms = wall(r)};
        if (pass_held(p, hold_work_class(HOLD_WORK_TLS_SWITCH))) {
                if (tlsswitch_pending(&ts))
                        return pass_end_held(p, "the TLS switch");
                p->held = NULL;
                return PASS_NEXT_CONTINUE;
        }
        int k = tlsswitch_converged(&ts, p->res);
        if (k == 0)
                return PASS_NEXT_CONTINUE;
        return k < 0 ? pass_error(p, k) : PASS_NEXT_END;
}

/*
 * etcd auth of a converged cluster (reconciler/auth.h): one step when etcd's
 * auth differs from spec.auth. A step may change the credentials clients
 * use, so the cluster's connection is made again on the next pass.
 */
static pass_next pass_auth(pass_ctx *p)
{
        reconciler *r = p->r;
        cluster_ctx *x = p->x;
        pass_result *res = p->res;
        if (!x->client_endpoints)
                return PASS_NEXT_CONTINUE;
        if (pass_held(p, hold_work_class(HOLD_WORK_AUTH))) {
                p->held = NULL; /* suspended: etcd's auth is left as it is */
                return PASS_NEXT_CONTINUE;
        }
        const char *ca, *cert, *key;
        pass_tls(p, &ca, &cert, &key);
        char *secret_pw = NULL;
        _cleanup_free_ char *secret_error = NULL;
        (void)auth_secret_password(r->opts.target, p->c, r->opts.state_dir, &secret_pw,
                                   &secret_error);
        auth_env env = {
            .etcd = r->opts.etcd,
            .etcd_userdata = r->opts.etcd_userdata,
            .base = {.endpoints = x->client_endpoints,
                     .cacert = ca,
                     .cert = cert,
                     .key = key,
                     .call_timeout_ms = r->opts.etcd_timeout_ms},
            .state_dir = r->opts.state_dir,
            .cluster = x->name,
            .want = p->c->auth.enabled,
            .db = r->opts.db,
            .now_ms = wall(r),
            .commit = p->w.commit,
            .author = p->w.author,
            .secret_password = secret_pw,
            .secret_error = secret_error,
        };
        int k = auth_pass(&env, &res->message);
        if (secret_pw) {
                explicit_bzero(secret_pw, strlen(secret_pw));
                free(secret_pw);
        }
        if (k == 0)
                return PASS_NEXT_CONTINUE;
        if (k > 0) {
                res->outcome = PASS_PROGRESSED;
                cluster_client_drop(r, x);
                return PASS_NEXT_END;
        }
        log_warn("%s: etcd auth: %s", x->name, res->message ? res->message : "");
        res->outcome = PASS_WAITING;
        res->poll_ms = 10 * POLL_RETRY_MS; /* a person may have to act: not every second */
        snprintf(res->reason, sizeof(res->reason), "AuthPending");
        return PASS_NEXT_END;
}

/*
 * Maintenance of a converged cluster (maintenance/maintenance.h): at most
 * one step per pass; a run in progress keeps the pass from reporting
 * converged, so `gitcd apply` waits for it. Idle, it may only shorten the
 * converged pass's poll_ms.
 */
static pass_next pass_maintenance(pass_ctx *p)
{
        reconciler *r = p->r;
        const world *w = &p->w;
        pass_result *res = p->res;
        if (!r->maint || (p->cons.held && !p->cons.frozen))
                return PASS_NEXT_CONTINUE;
        const char **names = xcalloc(w->records.n + 1, sizeof(char *));
        const char **urls = xcalloc(w->records.n + 1, sizeof(char *));
        size_t n = 0;
        for (size_t i = 0; i < w->records.n; i++) {
                const state_member *m = w->records.items[i];
                if (!m->dormant && !m->learner && !isempty(m->client_url)) {
                        names[n] = m->name;
                        urls[n++] = m->client_url;
                }
        }
        const char *ca, *cert, *key;
        pass_tls(p, &ca, &cert, &key);
        auth_creds cr = {0};
        (void)auth_credentials(r->opts.state_dir, w->sc->name, &cr);
        maint_cluster mc = {.cluster = w->sc->name,
                            .spec = p->c,
                            .sc = w->sc,
                            .names = names,
                            .client_urls = urls,
                            .n = n,
                            .cacert = ca,
                            .cert = cert,
                            .key = key,
                            .user = cr.user,
                            .password = cr.password,
                            .looked = w->looked,
                            .commit = w->commit,
                            .author = w->author,
                            .frozen = p->cons.frozen};
        const char *why = NULL;
        if (hold_judge(&p->holds, hold_work_class(HOLD_WORK_NOSPACE_DEFRAG), &why))
                mc.held_all = why;
        if (hold_judge(&p->holds, hold_work_class(HOLD_WORK_DEFRAG), &why)) {
                mc.held_disruptive = why;
                mc.held_until_ms = p->holds.next_window_ms;
        }
        maint_result mr = {0};
        if (maintenance_pass(r->maint, &mc, &mr) == 0 && mr.outcome != MAINT_OUT_IDLE) {
                res->outcome = mr.outcome == MAINT_OUT_ACTED ? PASS_PROGRESSED : PASS_WAITING;
                res->poll_ms = mr.poll_ms;
                pass_say(res, "%s", mr.message);
        } else if (mr.poll_ms > 0 && (res->poll_ms == 0 || mr.poll_ms < res->poll_ms)) {
                res->poll_ms = mr.poll_ms;
        }
        p->corrupt_listed = mr.corrupt;
        maint_result_release(&mr);
        auth_creds_release(&cr);
        free(names);
        free(urls);
        return res->outcome == PASS_CONVERGED ? PASS_NEXT_CONTINUE : PASS_NEXT_END;
}

/*
 * The freeze: an active CORRUPT alarm maintenance just listed freezes the
 * cluster; a frozen cluster with nothing else to do, or a step the freeze
 * held, ends the pass blocked (a person must act; gitcd apply stops and
 * says why); a step waiting for a proof ends it waiting. Otherwise the
 * converged pass is requeued in time for the next check.
 */
static pass_next pass_freeze(pass_ctx *p)
{
        pass_result *res = p->res;
        consistency_env env = cons_env(p);
        if (p->corrupt_listed && consistency_alarm(&env, &p->cons) > 0) {
                p->w.frozen = true;
                p->w.frozen_message = p->cons.message;
                conditions_update(p->r, p->x, &p->w, &p->want, &p->s);
                (void)consistency_record_condition(&env, &p->cons);
        }
        int64_t until = p->cons.next_check_ms > 0 ? p->cons.next_check_ms - env.now_ms : 0;
        int next = (int)MIN(MAX(until, 1000), POLL_BLOCKED_MS);
        if (p->cons.frozen) {
                res->outcome = PASS_BLOCKED;
                res->poll_ms = next;
                res->frozen = true;
                snprintf(res->reason, sizeof(res->reason), "DataInconsistent");
                pass_say(res, "%s", p->cons.message);
                return PASS_NEXT_END;
        }
        if (p->cons.held) {
                res->outcome = PASS_WAITING;
                res->poll_ms = (int)PROOF_RETRY_MS;
                pass_say(res, "%s", p->cons.message);
                return PASS_NEXT_END;
        }
        if (p->cons.next_check_ms > 0 && (res->poll_ms == 0 || next < res->poll_ms))
                res->poll_ms = next;
        return PASS_NEXT_CONTINUE;
}

/*
 * A converged cluster spends spec.maintenance.override's token (recorded
 * once per cluster, audited maintenance.override with the commit): the same
 * token later lets nothing run.
 */
static pass_next pass_override_spent(pass_ctx *p)
{
        reconciler *r = p->r;
        const char *token = p->c->maintenance.override;
        if (!token || p->holds.override_spent_ms)
                return PASS_NEXT_CONTINUE;
        int k = state_override_spend(r->opts.db, p->x->name, token, p->w.commit, wall(r));
        if (k < 0) {
                log_warn("%s: could not record the maintenance override as spent: %s", p->x->name,
                         state_last_error());
                return PASS_NEXT_CONTINUE;
        }
        if (k > 0) {
                _cleanup_free_ char *why =
                    xasprintf("maintenance override %s spent: the cluster converged", token);
                json_t *j = json_pack("{s:s}", "override", token);
                _cleanup_free_ char *after = j ? json_dumps(j, JSON_COMPACT) : NULL;
                json_decref(j);
                audit(r, p->x->name, "maintenance.override", why, NULL, after, "success", 0,
                      p->w.commit, p->w.author);
                log_info("%s: %s", p->x->name, why);
        }
        return PASS_NEXT_CONTINUE;
}

/*
 * A converged cluster whose leader's disk is an outlier: leadership moves to
 * the healthiest voter (slowleader.c), at most once per interval; voluntary
 * work (hold.h), so only a suspension holds it.
 */
static pass_next pass_slow_leader(pass_ctx *p)
{
        const char *why = NULL;
        const char *held =
            hold_judge(&p->holds, hold_work_class(HOLD_WORK_SLOW_LEADER), &why) ? why : NULL;
        if (slow_leader_pass(p->r, p->x, p->c, &p->w, held, p->res) > 0)
                return PASS_NEXT_END;
        return PASS_NEXT_CONTINUE;
}

/* ---- a step to take ------------------------------------------------------ */

/* The step decided (act.c); one that could not even start is tried again soon. */
static pass_next pass_act(pass_ctx *p)
{
        pass_result *res = p->res;
        int k = act_step(p->r, p->x, p->c, &p->w, &p->s, res);
        if (k < 0 && res->outcome != PASS_WAITING) {
                res->outcome = PASS_WAITING;
                res->poll_ms = POLL_RETRY_MS;
                if (!res->message || !res->message[0])
                        pass_say(res, "%s", strerror(-k));
        }
        return PASS_NEXT_END;
}

/* ---- the pass ------------------------------------------------------------ */

/*
 * The steps of a pass, in order. To add one: write `static pass_next
 * pass_<name>(pass_ctx *p)` above (what it needs from the pass goes into
 * pass_ctx, filled by the step that learns it) and add its row where it
 * belongs, with the passes it runs in (.when). A step that ends the pass
 * fills res first (its outcome, and a message that says why). A check
 * that may hold back the step decided goes after "decide": before
 * "conditions" when it rewrites p->s (a wait that says why, which the
 * conditions then show), or just before "act" (PASS_WHEN_STEP) when it
 * ends the pass itself; either way nothing has been acted on yet.
 */
static const pass_step pass_steps[] = {
    {"begin", pass_begin, PASS_WHEN_ALWAYS},
    {"holds", pass_holds, PASS_WHEN_ALWAYS},
    {"tls-switch-prepare", pass_tls_switch_prepare, PASS_WHEN_ALWAYS},
    {"ca-rotation-prepare", pass_ca_rotation_prepare, PASS_WHEN_ALWAYS},
    {"takeover", pass_takeover, PASS_WHEN_ALWAYS},
    {"observe", pass_observe, PASS_WHEN_ALWAYS},
    {"recovery", pass_recovery, PASS_WHEN_ALWAYS},
    {"consistency-prepare", pass_consistency_prepare, PASS_WHEN_ALWAYS},
    {"decide", pass_decide, PASS_WHEN_ALWAYS},
    {"hold", pass_hold, PASS_WHEN_ALWAYS},
    {"upgrade", pass_upgrade, PASS_WHEN_ALWAYS},
    {"consistency", pass_consistency, PASS_WHEN_ALWAYS},
    {"conditions", pass_conditions, PASS_WHEN_ALWAYS},
    {"deadline", pass_deadline, PASS_WHEN_ALWAYS},
    {"held", pass_held_step, PASS_WHEN_ALWAYS},
    {"ca-rotation", pass_ca_rotation, PASS_WHEN_CONVERGED},
    {"tls-switch", pass_tls_switch, PASS_WHEN_CONVERGED},
    {"auth", pass_auth, PASS_WHEN_CONVERGED},
    {"maintenance", pass_maintenance, PASS_WHEN_IDLE},
    {"freeze", pass_freeze, PASS_WHEN_IDLE},
    {"override-spent", pass_override_spent, PASS_WHEN_CONVERGED},
    {"slow-leader", pass_slow_leader, PASS_WHEN_CONVERGED},
    {"act", pass_act, PASS_WHEN_STEP},
};

static bool pass_step_applies(const pass_ctx *p, pass_when when)
{
        switch (when) {
        case PASS_WHEN_ALWAYS:
                return true;
        case PASS_WHEN_CONVERGED:
                assert(p->decided);
                return p->s.kind == STEP_CONVERGED && p->res->outcome == PASS_CONVERGED &&
                       !p->cons.frozen;
        case PASS_WHEN_IDLE:
                assert(p->decided);
                return (p->s.kind == STEP_CONVERGED && p->res->outcome == PASS_CONVERGED) ||
                       p->cons.held;
        case PASS_WHEN_STEP:
                assert(p->decided);
                return p->s.kind != STEP_CONVERGED && !p->cons.held;
        }
        return false;
}

/* The steps in order, until one does not continue (each pass ends at one, said at debug level). */
static int pass_run(pass_ctx *p)
{
        const pass_step *last = NULL;
        pass_next next = PASS_NEXT_CONTINUE;
        for (size_t i = 0; i < ARRAY_SIZE(pass_steps) && next == PASS_NEXT_CONTINUE; i++) {
                if (!pass_step_applies(p, pass_steps[i].when))
                        continue;
                last = &pass_steps[i];
                next = last->run(p);
        }
        assert(last);
        log_debug("%s: the pass ended at %s: %s", p->x->name, last->name,
                  next == PASS_NEXT_ERROR ? strerror(-p->error)
                                          : pass_outcome_name(p->res->outcome));
        return next == PASS_NEXT_ERROR ? p->error : 0;
}

/*
 * The held state, audited once per change (cluster.held, cluster.released)
 * and not every pass; only a pass that decided judges it.
 */
static void pass_audit_held(pass_ctx *p)
{
        reconciler *r = p->r;
        if (!p->holds_ready || (!p->decided && !p->res->held) || p->renewed_under_hold)
                return; /* a renewal in a held step's place changes no hold */
        const char *held = p->res->held ? p->res->reason : NULL;
        if (streq_ptr(held, p->holds.held_recorded))
                return; /* unchanged: no write */
        int k = state_hold_set_held(r->opts.db, p->x->name, held, wall(r));
        if (k <= 0)
                return;
        const char *msg = p->res->message ? p->res->message : "";
        audit(r, p->x->name, held ? "cluster.held" : "cluster.released",
              held ? msg : "no step is held any more", NULL, NULL, "success", 0, p->w.commit,
              p->w.author);
        if (held)
                log_info("%s: held (%s): %s", p->x->name, held, msg);
        else
                log_info("%s: no step is held any more", p->x->name);
}

static void pass_ctx_release(pass_ctx *p)
{
        free(p->tls_ca);
        free(p->tls_cert);
        free(p->tls_key);
        hold_state_release(&p->holds);
        consistency_pass_release(&p->cons);
        step_release(&p->s);
        world_release(&p->w);
}

void pass_say(pass_result *res, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        str_assign(&res->message, xvasprintf(fmt, ap));
        va_end(ap);
}

void pass_result_release(pass_result *r)
{
        if (!r)
                return;
        free(r->message);
        r->message = NULL;
        free(r->machines_message);
        r->machines_message = NULL;
}

int reconciler_pass(reconciler *r, const char *cluster, pass_result *res)
{
        memset(res, 0, sizeof(*res));
        _cleanup_(pass_ctx_release) pass_ctx p = {
            .r = r,
            .x = cluster_ctx_get(r, cluster),
            .res = res,
        };
        int k = pass_run(&p);
        if (k >= 0)
                pass_audit_held(&p);
        /* the machines' preflights, placement's included, once the cluster was observed */
        if (p.c && p.w.sc)
                machines_pass(r, p.x->name, p.c, &p.w, res);
        if (p.cons_ready)
                res->frozen = p.cons.frozen;
        /* a converged pass says what it found, e.g. "3 of 3 voters healthy" */
        if (k >= 0 && res->outcome == PASS_CONVERGED && isempty(res->message))
                pass_say(res, "%s",
                         p.s.kind == STEP_CONVERGED && !isempty(p.s.message) ? p.s.message
                                                                             : "converged");
        if (!res->message)
                res->message = xstrdup("");
        quiet_pass_end(&p.x->quiet, p.w.quiet, k >= 0 && res->outcome == PASS_CONVERGED, p.w.digest,
                       mono(r));
        return k;
}

/*
 * What a cluster's conditions and phase say, and when gitcd gives up.
 *
 * One checker per condition (Available, Progressing, Degraded,
 * CertificatesExpiring), each a function of the facts a pass gathered
 * once (pass_facts), returning type, status, typed reason and message;
 * the store keeps lastTransitionTime, which moves only when the status
 * does, and a status change is audited (condition.changed). The clock is
 * the reconciler's, injected for tests. SnapshotsHealthy has its one
 * checker in snapshots/, MachineHealthy in machines.c (from the machines'
 * preflights, stored through conditions_machines()).
 *
 * The progress deadline belongs here too: a latched spec that does not
 * converge within spec.progressDeadlineSeconds of work is given up on, and
 * the cluster is terminal (DeadlineExceeded, BootstrapFailed before the
 * first quorum) until the spec changes. Every way into the terminal state
 * (the deadline, a refused restore, a failed rollout) goes through
 * conditions_terminal(), so all of them read the same in `gitcd status`.
 */
#include <assert.h>
#include <string.h>

#include "reconciler/bootstrap.h"
#include "reconciler/hold.h"
#include "reconciler/internal.h"
#include "reconciler/machines.h"
#include "reconciler/proof.h"
#include "snapshots/scheduler.h"
#include "util/xalloc.h"

/* Every reason a condition can give; names are what the store and `gitcd status` show. */
typedef enum cond_reason {
        CR_QUORUM_HEALTHY,
        CR_QUORUM_LOST,
        CR_PAUSED,
        CR_WAITING_FOR_SEED,
        CR_SCALING_UP,
        CR_SCALING_DOWN,
        CR_REPLACING_MEMBER,
        CR_UPGRADING,
        CR_RECOVERING,
        CR_MEMBER_UNHEALTHY,
        CR_SPEC_REJECTED,
        CR_DEADLINE_EXCEEDED,
        CR_BOOTSTRAP_FAILED,
        CR_CERTS_EXPIRED,
        CR_RENEWING_CERTS,
        CR_CERTS_VALID,
        CR_RENEWAL_DUE,
        CR_BOOTSTRAPPING,
        CR_DATA_BEHIND_RESTORE,
        CR_FROZEN,
        CR_DATA_INCONSISTENT,
        CR_SUSPENDED,
        CR_MAINTENANCE_WINDOW,
        CR_MACHINE_UNREACHABLE,
        CR_MACHINES_PASSED,
        CR_MACHINE_DEGRADED,
        CR_TAKING_OVER,
        _CR_MAX,
} cond_reason;

static const char *const cond_reason_names[_CR_MAX] = {
    [CR_QUORUM_HEALTHY] = REASON_QUORUM_HEALTHY,
    [CR_QUORUM_LOST] = REASON_QUORUM_LOST,
    [CR_PAUSED] = REASON_PAUSED,
    [CR_WAITING_FOR_SEED] = REASON_WAITING_FOR_SEED,
    [CR_SCALING_UP] = REASON_SCALING_UP,
    [CR_SCALING_DOWN] = REASON_SCALING_DOWN,
    [CR_REPLACING_MEMBER] = REASON_REPLACING_MEMBER,
    [CR_UPGRADING] = REASON_UPGRADING,
    [CR_RECOVERING] = REASON_RECOVERING,
    [CR_MEMBER_UNHEALTHY] = "MemberUnhealthy",
    [CR_SPEC_REJECTED] = "SpecRejected",
    [CR_DEADLINE_EXCEEDED] = "DeadlineExceeded",
    [CR_BOOTSTRAP_FAILED] = "BootstrapFailed",
    [CR_CERTS_EXPIRED] = REASON_CERTS_EXPIRED,
    [CR_RENEWING_CERTS] = REASON_RENEWING_CERTS,
    [CR_CERTS_VALID] = "CertificatesValid",
    [CR_RENEWAL_DUE] = "RenewalDue",
    [CR_BOOTSTRAPPING] = REASON_BOOTSTRAPPING,
    [CR_DATA_BEHIND_RESTORE] = "DataBehindRestore",
    [CR_FROZEN] = REASON_FROZEN,
    [CR_DATA_INCONSISTENT] = "DataInconsistent",
    [CR_SUSPENDED] = REASON_SUSPENDED,
    [CR_MAINTENANCE_WINDOW] = REASON_MAINTENANCE_WINDOW,
    [CR_MACHINE_UNREACHABLE] = "MachineUnreachable",
    [CR_MACHINES_PASSED] = REASON_MACHINES_PASSED,
    [CR_MACHINE_DEGRADED] = REASON_MACHINE_DEGRADED,
    [CR_TAKING_OVER] = REASON_TAKING_OVER,
};

static const char *cond_reason_name(cond_reason r)
{
        assert(r >= 0 && r < _CR_MAX && cond_reason_names[r]);
        return cond_reason_names[r];
}

/* The typed form of a step's reason (decide.h's REASON_*); NULL: quorum healthy. */
static cond_reason cond_reason_of_step(const step *s)
{
        if (!s->reason)
                return CR_QUORUM_HEALTHY;
        for (int i = 0; i < _CR_MAX; i++)
                if (streq(cond_reason_names[i], s->reason))
                        return (cond_reason)i;
        assert(!"decide() gave a reason the conditions do not know");
        return CR_QUORUM_HEALTHY;
}

/* The facts every condition is judged from, gathered once per pass. */
typedef struct pass_facts {
        bool quorum;
        bool paused;
        bool bootstrapped;
        bool converged;
        int healthy_voters;
        int voters;
        const step *s;
        const char *rejected_message; /* non-NULL: the desired spec was refused */
        const char *stale_message;    /* non-NULL: a member was refused a start (act.c) */
        const char *frozen_message;   /* non-NULL: the members' data differs (consistency.h) */
        char *health;                 /* "N of M voters healthy" */
        const obs_cert *soonest;      /* the certificate that expires first; NULL: none */
        int64_t renew_at_ms;          /* when it enters its renewal window */
        int64_t now_ms;
        char *cert_message;
} pass_facts;

typedef struct condition_check {
        const char *type;
        bool skip; /* the condition does not apply to this cluster: not stored */
        bool status;
        cond_reason reason;
        const char *message;
} condition_check;

static condition_check check_available(const pass_facts *f)
{
        condition_check c = {.type = "Available"};
        if (f->paused) {
                c.reason = CR_PAUSED;
                c.message = "paused: replicas is 0";
        } else if (f->quorum) {
                c.status = true;
                c.reason = CR_QUORUM_HEALTHY;
                c.message = f->health;
        } else if (!f->bootstrapped) {
                c.reason = CR_WAITING_FOR_SEED;
                c.message = "the cluster has not formed yet";
        } else {
                c.reason = CR_QUORUM_LOST;
                c.message = f->health;
        }
        return c;
}

static condition_check check_progressing(const pass_facts *f)
{
        /* a step the freeze holds is not in flight: it waits for a person */
        bool held = f->s->reason && streq(f->s->reason, REASON_FROZEN);
        return (condition_check){
            .type = "Progressing",
            .status = !f->converged && !held,
            .reason = cond_reason_of_step(f->s),
            .message = f->s->message ? f->s->message : "",
        };
}

static condition_check check_degraded(const pass_facts *f)
{
        condition_check c = {.type = "Degraded", .message = f->health};
        if (f->rejected_message) {
                c.status = true;
                c.reason = CR_SPEC_REJECTED;
                c.message = f->rejected_message;
                return c;
        }
        if (f->frozen_message) {
                c.status = true;
                c.reason = CR_DATA_INCONSISTENT;
                c.message = f->frozen_message;
                return c;
        }
        if (f->stale_message) {
                c.status = true;
                c.reason = CR_DATA_BEHIND_RESTORE;
                c.message = f->stale_message;
                return c;
        }
        bool unhealthy = !f->paused && f->bootstrapped && f->healthy_voters < f->voters;
        c.status = unhealthy || (!f->quorum && f->bootstrapped && !f->paused);
        c.reason = !unhealthy  ? CR_QUORUM_HEALTHY
                   : f->quorum ? CR_MEMBER_UNHEALTHY
                               : CR_QUORUM_LOST;
        return c;
}

/* CertificatesExpiring: True from the moment a leaf enters its renewal window until renewed. */
static condition_check check_certificates_expiring(const pass_facts *f)
{
        condition_check c = {.type = "CertificatesExpiring", .message = f->cert_message};
        if (!f->soonest) {
                c.skip = true;
                return c;
        }
        c.status = f->renew_at_ms <= f->now_ms;
        c.reason = f->soonest->not_after_ms <= f->now_ms ? CR_CERTS_EXPIRED
                   : c.status                            ? CR_RENEWAL_DUE
                                                         : CR_CERTS_VALID;
        return c;
}

/* "the peer certificate of demo-1 expires 2026-11-23T14:31:22Z" */
static char *cert_message(const obs_cert *c, int64_t now_ms)
{
        if (!c)
                return NULL;
        char when[40];
        format_rfc3339(c->not_after_ms, when, sizeof(when));
        return xasprintf("the %s certificate%s%s %s %s", c->surface, c->member ? " of " : "",
                         c->member ? c->member : "",
                         c->not_after_ms <= now_ms ? "expired" : "expires", when);
}

static const char *phase_of(const pass_facts *f)
{
        return f->paused           ? "Paused"
               : !f->bootstrapped  ? "Bootstrapping"
               : !f->quorum        ? "QuorumLost"
               : f->frozen_message ? "Frozen"
               : f->converged      ? "Running"
                                   : "Progressing";
}

/* Store a condition; its change (status) is audited. 1 when the status changed. */
static int set_cond(reconciler *r, const char *cluster, const char *type, bool status,
                    const char *reason, const char *message, const char *commit, const char *author)
{
        int k = state_cluster_set_condition(r->opts.db, cluster, type, status ? "True" : "False",
                                            reason, message, wall(r));
        if (k == 1) {
                _cleanup_free_ char *after =
                    xasprintf("{\"type\":\"%s\",\"status\":\"%s\",\"reason\":\"%s\"}", type,
                              status ? "True" : "False", reason);
                audit(r, cluster, "condition.changed", message, NULL, after, "success", 0, commit,
                      author);
        }
        return k;
}

static void store_check(reconciler *r, const char *cluster, const world *w,
                        const condition_check *c)
{
        if (c->skip)
                return;
        int k = set_cond(r, cluster, c->type, c->status, cond_reason_name(c->reason), c->message,
                         w->commit, w->author);
        if (k == 1 && c->status && streq(c->type, "CertificatesExpiring")) {
                audit(r, cluster, "tls.renewal-due", c->message, NULL, NULL, "success", 0,
                      w->commit, w->author);
                log_info("%s: certificate renewal due: %s", cluster, c->message);
        }
}

void conditions_update(reconciler *r, cluster_ctx *x, const world *w, const desired *want,
                       const step *s)
{
        /* a refusal stands while the step is to start that member again (act.c says it anew) */
        if (x->stale_message) {
                _cleanup_free_ char *who = s->member ? xasprintf("member %s ", s->member) : NULL;
                if (s->kind != STEP_START_MEMBER || !who ||
                    !strneq(x->stale_message, who, strlen(who))) {
                        free(x->stale_message);
                        x->stale_message = NULL;
                }
        }
        pass_facts f = {
            .soonest = certs_soonest(&w->obs),
            .renew_at_ms = certs_next_renewal_ms(want, &w->obs),
            .now_ms = w->obs.now_ms,
            .cert_message = cert_message(certs_soonest(&w->obs), w->obs.now_ms),
            .quorum = world_has_quorum(w),
            .paused = s->reason && streq(s->reason, REASON_PAUSED),
            .bootstrapped = w->obs.bootstrapped,
            .converged = s->kind == STEP_CONVERGED,
            .healthy_voters = w->healthy_voters,
            .voters = w->voters,
            .s = s,
            .rejected_message = x->rejected_hash ? x->rejected_message : NULL,
            .stale_message = x->stale_message,
            .frozen_message = w->frozen ? (w->frozen_message ? w->frozen_message : "frozen") : NULL,
            .health = xasprintf("%d of %d voters healthy", w->healthy_voters, w->voters),
        };
        const condition_check checks[] = {
            check_available(&f),
            check_progressing(&f),
            check_degraded(&f),
            check_certificates_expiring(&f),
        };
        for (size_t i = 0; i < ARRAY_SIZE(checks); i++)
                store_check(r, x->name, w, &checks[i]);
        if (x->latched) /* SnapshotsHealthy: its one checker lives in snapshots/ */
                (void)snapshot_record_health(r->opts.db, x->name, &x->latched->snapshots, wall(r));
        (void)state_cluster_set_phase(r->opts.db, x->name, phase_of(&f), wall(r));
        free(f.health);
        free(f.cert_message);
}

void conditions_refused(reconciler *r, const char *cluster, const world *w, const char *message)
{
        set_cond(r, cluster, "Degraded", true, cond_reason_name(CR_DATA_BEHIND_RESTORE), message,
                 w->commit, w->author);
}

void conditions_unreachable(reconciler *r, const char *cluster, const world *w, const char *message)
{
        set_cond(r, cluster, "Degraded", true, cond_reason_name(CR_MACHINE_UNREACHABLE), message,
                 w->commit, w->author);
}

void conditions_machines(reconciler *r, const char *cluster, const world *w, bool healthy,
                         const char *message)
{
        set_cond(r, cluster, "MachineHealthy", healthy,
                 cond_reason_name(healthy ? CR_MACHINES_PASSED : CR_MACHINE_DEGRADED), message,
                 w->commit, w->author);
}

void conditions_terminal(reconciler *r, const char *cluster, const world *w, const char *reason,
                         const char *message, const char *action, const char *subject,
                         pass_result *res)
{
        set_cond(r, cluster, "Progressing", false, reason, message, w->commit, w->author);
        set_cond(r, cluster, "Degraded", true, reason, message, w->commit, w->author);
        if (state_cluster_set_terminal(r->opts.db, cluster, reason, message, wall(r)) < 0)
                log_warn("%s: cannot record the terminal state: %s", cluster, state_last_error());
        audit(r, cluster, action, message, NULL, subject, "failure", 0, w->commit, w->author);
        res->outcome = PASS_FAILED;
        snprintf(res->reason, sizeof(res->reason), "%s", reason);
        pass_say(res, "%s", message);
}

/*
 * Work after convergence (a replacement, a restart), or the first pass of
 * this process past the deadline (time gitcd was not running does not
 * count): a fresh deadline. Past it: the latched spec is given up on and
 * the cluster is terminal (stored as such) until a new spec is latched.
 */
int progress_deadline(reconciler *r, cluster_ctx *x, const etcd_cluster *c, const world *w,
                      const step *s, bool first_pass, pass_result *res)
{
        int64_t now = wall(r);
        const char *latched_json = state_cluster_spec_json(w->sc);
        if (s->kind == STEP_CONVERGED) {
                if (w->sc->progress_deadline_ms)
                        (void)state_cluster_latch(r->opts.db, x->name, latched_json,
                                                  x->latched_hash, 0, now);
                res->outcome = PASS_CONVERGED;
                return 0;
        }
        if (w->sc->progress_deadline_ms == 0 || (first_pass && now > w->sc->progress_deadline_ms)) {
                (void)state_cluster_latch(r->opts.db, x->name, latched_json, x->latched_hash,
                                          now + (int64_t)c->progress_deadline_seconds * 1000, now);
                return 1;
        }
        if (now <= w->sc->progress_deadline_ms)
                return 1;

        cond_reason why =
            bootstrap_in_progress(&w->obs) ? CR_BOOTSTRAP_FAILED : CR_DEADLINE_EXCEEDED;
        /* a member refused for data from before a restore: the reason it never converged */
        _cleanup_free_ char *msg =
            x->stale_message
                ? xasprintf("no convergence within %ds: %s", c->progress_deadline_seconds,
                            x->stale_message)
                : xasprintf("no convergence within %ds: %s", c->progress_deadline_seconds,
                            s->message ? s->message : "");
        conditions_terminal(r, x->name, w, cond_reason_name(why), msg, "deadline.exceeded", NULL,
                            res);
        log_error("%s: %s", x->name, msg);
        return 0;
}

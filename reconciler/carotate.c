/*
 * CA rotation with no downtime (reconciler/carotate.h), for tls.provider
 * auto on every target: the logic lives here and in pki/auto.c; targets
 * only deliver files (local and hosts: each member's tls_dir; Kubernetes:
 * the auto-TLS Secrets).
 *
 * A new tls.auto.rotateCA token starts a rotation; its row in the state
 * store (state/carotate.h) is its journal: the phase is written before
 * the pass that acts on it, and every effect of a phase is idempotent, so
 * gitcd killed at any point resumes the phase the row says.
 *
 *   phase 1  trust old+new: pki/auto.c creates the new CA beside the old
 *            one; every member's ca.crt becomes the bundle old+new and the
 *            bundle's fingerprint enters the members' config hash, so the
 *            ordinary rolling restart (decide() rule 13: followers first,
 *            leader last, one member at a time, never without quorum, the
 *            upgrade gates in between) brings each member onto it. etcd
 *            needs that restart: it builds its trust pools (ClientCAs,
 *            RootCAs) once, when its listeners start, while leaves are
 *            reloaded per handshake (client/pkg/transport/listener.go).
 *   phase 2  reissue: the new CA becomes the signer (the bundle, hence the
 *            config hash, is unchanged: no restart); each member's leaves,
 *            gitcd's own client certificate among them, are reissued from
 *            it through the target's renew_tls, every member one after
 *            the other in one converged pass (each recorded before the
 *            next; reissue_all says why that is safe), then the shared
 *            ones.
 *            The phase ends when every member serves, on its client and
 *            peer URLs, the leaf the target now holds for it (a TLS
 *            handshake reads the serial): on Kubernetes the kubelet
 *            delivers a Secret's new content to the Pods only at its next
 *            sync, and phase 3 must not restart a member onto the new CA
 *            alone while a peer still shows an old-CA leaf.
 *   phase 3  drop old: the old CA, key included, is deleted; the bundle is
 *            the new CA alone, and the rolling restart runs again.
 * A rotation moves on only from a converged pass: every member healthy
 * and running what its config hash says, which is exactly "the phase's
 * restarts are done"; the pass that moves it on ends "progressed", so the
 * next phase's first step comes in the very next pass, not after a poll.
 * Phase 2, which restarts nothing, runs in the very pass that ends phase
 * 1: what it needs (every member healthy on the bundle) is what that pass
 * has just seen, and its row says phase 2 before the first reissue.
 * Audit: tls.ca-rotate, with the phase in the reason.
 *
 * A token first seen before the cluster formed is consumed without a
 * rotation: its first CA is new anyway. A token seen once is never acted
 * on again (one row per token, whatever became of it).
 *
 * A CA that nears its own end starts a rotation by itself: when the CA the
 * target reported last (TARGET_CERT_CA in the recorded certificates) has
 * less than CA_RENEW_BEFORE_MS left, the token "ca-expiry-<its serial>"
 * starts one exactly as a rotateCA token would; it names that CA, so it
 * acts once, and the CA that replaces it is good for years again.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/carotate.h"
#include "pki/pki.h"
#include "reconciler/decide.h"
#include "reconciler/membership.h"
#include "render/layout.h"
#include "state/carotate.h"
#include "util/failpoint.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* A reissued leaf not served yet (a Kubernetes Secret the kubelet has not synced), a failed reissue. */
#define POLL_AGAIN_MS 1000
/* One TLS handshake to a member, to read the leaf it serves. */
#define SERVED_TIMEOUT_MS 3000
/* How long before the CA's own notAfter a rotation starts by itself (it is made for 10 years). */
#define CA_RENEW_BEFORE_MS (365LL * 24 * 3600 * 1000)

static const char *const phase_names[] = {"finished", "trust old+new CA", "reissue from new CA",
                                          "drop old CA"};

/* A tls.ca-rotate audit event with this reason and outcome. */
static void audit_event(const carotate_env *env, const char *reason, const char *outcome)
{
        state_audit_event ev = {
            .time_ms = env->now_ms,
            .cluster = (char *)env->cluster,
            .commit = (char *)env->commit,
            .author = (char *)env->author,
            .action = (char *)"tls.ca-rotate",
            .reason = (char *)reason,
            .outcome = (char *)outcome,
        };
        if (state_audit_append(env->db, &ev, NULL) < 0)
                log_warn("%s: could not write the audit event tls.ca-rotate: %s", env->cluster,
                         state_last_error());
}

static void audit(const carotate_env *env, const char *token, int phase, const char *what)
{
        _cleanup_free_ char *reason =
            xasprintf("CA rotation %s, phase %d (%s): %s", token, phase, phase_names[phase], what);
        audit_event(env, reason, "success");
        log_info("%s: %s", env->cluster, reason);
}

/*
 * A CA gitcd took over with the cluster (adoption of a kubeadm cluster:
 * pki_ca_imported) is never rotated by it: others hold certificates it
 * signed (the kube-apiserver's etcd client certificate; kubeadm signs new
 * ones from its own copy on the machines), and phase 3 would cut them off.
 */
static bool ca_taken_over(const carotate_env *env)
{
        target *t = env->target;
        if (!t || !t->ops->tls_certificates)
                return false;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        target_cert *certs = NULL;
        size_t n = 0;
        bool taken = false;
        if (membership_plan_for_records(t, env->c, env->records->items, env->records->n, &p) >= 0 &&
            t->ops->tls_certificates(t, env->c, p, &certs, &n) >= 0)
                for (size_t i = 0; i < n; i++)
                        taken = taken ||
                                (streq_ptr(certs[i].surface, TARGET_CERT_CA) && certs[i].imported);
        target_certs_free(certs, n);
        return taken;
}

/* The rotation `token` would start, refused: audited (and logged) once per reason. */
static void refuse_taken_over(const carotate_env *env, const char *token)
{
        _cleanup_free_ char *reason = xasprintf(
            "CA rotation %s refused: the cluster CA was taken over when gitcd adopted the "
            "cluster, and others hold certificates it signed (the kube-apiserver's etcd client "
            "certificate); rotating it would cut them off. Replace it with the tools that issued "
            "them (kubeadm), then adopt the cluster again",
            token);
        state_audit_filter f = {.cluster = env->cluster, .action = "tls.ca-rotate", .limit = 1};
        state_audit_list l = {0};
        bool again = state_audit_query(env->db, &f, &l) == 0 && l.n == 1 &&
                     streq_ptr(l.items[0]->reason, reason);
        state_audit_list_release(&l);
        if (again)
                return;
        audit_event(env, reason, "rejected");
        log_error("%s: %s", env->cluster, reason);
}

/* A CA within CA_RENEW_BEFORE_MS of its notAfter (as last recorded) starts a rotation, once. */
static int expiry_rotation(const carotate_env *env)
{
        state_cert_list l = {0};
        int k = state_certs_list(env->db, env->cluster, &l);
        if (k < 0)
                return k;
        const state_cert *ca = NULL;
        for (size_t i = 0; i < l.n; i++)
                if (streq_ptr(l.items[i]->surface, TARGET_CERT_CA))
                        ca = l.items[i];
        if (ca && ca->not_after_ms - env->now_ms < CA_RENEW_BEFORE_MS) {
                _cleanup_free_ char *token = xasprintf("ca-expiry-%s", ca->serial);
                k = state_ca_rotation_token_used(env->db, env->cluster, token);
                if (k == 0 && ca_taken_over(env)) {
                        refuse_taken_over(env, token);
                } else if (k == 0) {
                        k = state_ca_rotation_start(env->db, env->cluster, token, false,
                                                    env->now_ms);
                        if (k == -EBUSY)
                                k = 0; /* another rotation runs: it replaces this CA too */
                        else if (k >= 0) {
                                char when[40];
                                format_rfc3339(ca->not_after_ms, when, sizeof(when));
                                _cleanup_free_ char *what = xasprintf(
                                    "started by itself: the CA %s %s %s; a new CA beside it, "
                                    "trusted by every member before it signs",
                                    ca->serial,
                                    ca->not_after_ms <= env->now_ms ? "expired on" : "expires on",
                                    when);
                                audit(env, token, 1, what);
                                if (ca->not_after_ms <= env->now_ms)
                                        log_error("%s: the cluster CA expired on %s: members "
                                                  "cannot verify each other until the rotation "
                                                  "is done",
                                                  env->cluster, when);
                        }
                }
        }
        state_cert_list_release(&l);
        return k < 0 ? k : 0;
}

int carotate_prepare(const carotate_env *env)
{
        etcd_cluster *c = env->c;
        c->tls.ca_rotation_phase = 0;
        if (c->tls.provider != TLS_PROVIDER_AUTO || (!render_client_tls(c) && !render_peer_tls(c)))
                return 0;
        const char *token = c->tls.rotate_ca_token;
        if (!isempty(token)) {
                int k = state_ca_rotation_token_used(env->db, env->cluster, token);
                if (k < 0)
                        return k;
                if (k == 0 && env->bootstrapped && env->start_held) {
                        if (env->ret_start_waits)
                                *env->ret_start_waits = true;
                } else if (k == 0 && env->bootstrapped && ca_taken_over(env)) {
                        refuse_taken_over(env, token);
                } else if (k == 0) {
                        k = state_ca_rotation_start(env->db, env->cluster, token,
                                                    !env->bootstrapped, env->now_ms);
                        if (k == -EBUSY)
                                log_info("%s: rotateCA %s waits for the running CA rotation",
                                         env->cluster, token);
                        else if (k < 0)
                                return k;
                        else if (env->bootstrapped) {
                                audit(env, token, 1,
                                      "started: a new CA beside the old one, trusted by "
                                      "every member before it signs");
                                FAILPOINT("ca-rotate.phase-1"); /* recorded, not acted on */
                        }
                }
        }
        if (env->bootstrapped) {
                int k = expiry_rotation(env);
                if (k < 0)
                        return k;
        }
        _cleanup_(state_ca_rotation_freep) state_ca_rotation *rot = NULL;
        int k = state_ca_rotation_running(env->db, env->cluster, &rot);
        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return k;
        c->tls.ca_rotation_phase = rot->phase;
        return 0;
}

/* Is name in the comma-separated list? */
static bool done_has(const char *list, const char *name)
{
        size_t n = strlen(name);
        for (const char *p = list; p && *p;) {
                size_t len = strcspn(p, ",");
                if (len == n && strncmp(p, name, n) == 0)
                        return true;
                p += len + (p[len] == ',');
        }
        return false;
}

/*
 * Phase 2: reissue the leaves of the next member not done ("*": the shared
 * ones) and record it done (*done, the comma-separated list, follows).
 * 1: one reissued; 0: every member is done; negative: the target failed.
 */
static int reissue_next(const carotate_env *env, const char *token, char **done, pass_result *res)
{
        target *t = env->target;
        const char *next = NULL;
        for (size_t i = 0; i < env->records->n && !next; i++) {
                const state_member *m = env->records->items[i];
                if (m->removed_ms == 0 && !done_has(*done, m->name))
                        next = m->name;
        }
        if (!next && !done_has(*done, "*"))
                next = "*";
        if (!next)
                return 0;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        int k = membership_plan_for_records(t, env->c, env->records->items, env->records->n, &p);
        if (k >= 0)
                k = t->ops->renew_tls
                        ? t->ops->renew_tls(t, env->c, p, streq(next, "*") ? NULL : next,
                                            env->now_ms)
                        : -EOPNOTSUPP;
        if (k < 0) {
                pass_say(res, "CA rotation: cannot reissue the certificates of %s: %s", next,
                         target_last_error(t));
                return k;
        }
        char *list = isempty(*done) ? xstrdup(next) : xasprintf("%s,%s", *done, next);
        free(*done);
        *done = list;
        int issued = k;
        FAILPOINT("ca-rotate.after-reissue"); /* reissued, not recorded: done again, idempotent */
        k = state_ca_rotation_set_done(env->db, env->cluster, list);
        if (k < 0)
                return k;
        _cleanup_free_ char *what =
            xasprintf("%s: %d certificate(s) reissued from the new CA",
                      streq(next, "*") ? "shared certificates" : next, issued);
        audit(env, token, 2, what);
        return 1;
}

/*
 * Phase 2's rule: every member's leaves, then the shared ones, reissued in
 * one pass, one member after the other, each recorded before the next.
 * Nothing restarts and quorum is never at stake: every running member
 * and gitcd's client already trust old and new (phase 1 ended on a
 * converged pass, every member running the bundle), and etcd reads a leaf
 * per handshake, so a reissued leaf is only ever shown to parties that
 * trust its CA. A pass between two members would observe nothing a
 * reissue can change (the health of a member does not depend on its leaf
 * while its trust holds both CAs). Returns the number reissued now, or a
 * negative errno (the members done so far stay recorded: the next pass
 * goes on from there).
 */
static int reissue_all(const carotate_env *env, const state_ca_rotation *rot, pass_result *res)
{
        _cleanup_free_ char *done = xstrdup_null(rot->members_done);
        int n = 0, k;
        while ((k = reissue_next(env, rot->token, &done, res)) > 0)
                n++;
        return k < 0 ? k : n;
}

/* The first URL of a comma-separated list, when it is https (NULL: nothing to look at). */
static char *first_https(const char *urls)
{
        if (!urls || strncmp(urls, "https://", 8) != 0)
                return NULL;
        return xstrndup(urls, strcspn(urls, ","));
}

/* The serial the target holds for member's surface (its own folder, or the one all share). */
static const char *held_serial(const target_cert *v, size_t n, const char *member,
                               const char *surface)
{
        const char *shared = NULL;
        for (size_t i = 0; i < n; i++) {
                if (!streq_ptr(v[i].surface, surface))
                        continue;
                if (streq_ptr(v[i].member, member))
                        return v[i].serial;
                if (!v[i].member)
                        shared = v[i].serial;
        }
        return shared;
}

/*
 * The end of phase 2: does every member serve, on its client and peer
 * URLs, the leaf the target now holds for it? The target delivered the
 * reissued leaves, but a member serves them only once they reach it: a
 * file swap at once, a Kubernetes Secret volume when the kubelet next
 * syncs it (up to a minute or so). Phase 3 restarts members onto the new
 * CA alone, so a peer still serving an old-CA leaf would cut off the
 * first member restarted. 1: all do; 0: not yet (res->message says who).
 */
static int members_serve_reissued(const carotate_env *env, pass_result *res)
{
        target *t = env->target;
        if (!t->ops->tls_certificates)
                return 1;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        target_cert *certs = NULL;
        size_t n = 0;
        int k = membership_plan_for_records(t, env->c, env->records->items, env->records->n, &p);
        if (k >= 0)
                k = t->ops->tls_certificates(t, env->c, p, &certs, &n);
        if (k < 0) {
                pass_say(res, "CA rotation: cannot list the reissued certificates: %s",
                         target_last_error(t));
                return 0;
        }
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        (void)target_client_tls(t, env->c, &ca, &cert, &key);
        int ok = 1;
        for (size_t i = 0; ok && i < env->records->n; i++) {
                const state_member *m = env->records->items[i];
                if (m->removed_ms != 0)
                        continue;
                const struct {
                        const char *surface, *urls;
                } looks[] = {{TLS_SUBDIR_CLIENT, m->client_url}, {TLS_SUBDIR_PEER, m->peer_url}};
                for (size_t j = 0; ok && j < ARRAY_SIZE(looks); j++) {
                        _cleanup_free_ char *url = first_https(looks[j].urls);
                        const char *held = held_serial(certs, n, m->name, looks[j].surface);
                        if (!url || !held)
                                continue;
                        _cleanup_free_ char *served = NULL;
                        if (pki_served_serial(url, cert, key, SERVED_TIMEOUT_MS, &served) < 0)
                                pass_say(res,
                                         "CA rotation phase 2/3: waiting for %s to serve its "
                                         "reissued %s certificate: %s",
                                         m->name, looks[j].surface, pki_last_error());
                        else if (!streq(served, held))
                                pass_say(res,
                                         "CA rotation phase 2/3: waiting for %s to serve its "
                                         "reissued %s certificate (%s serves serial %s, the "
                                         "new one is %s)",
                                         m->name, looks[j].surface, url, served, held);
                        else
                                continue;
                        ok = 0;
                }
        }
        target_certs_free(certs, n);
        return ok;
}

/*
 * Record the end of `phase` (a converged pass: every member healthy and
 * running what the phase wants) and the start of the next, audited; 0 or a
 * negative errno.
 */
static int finish_phase(const carotate_env *env, const char *token, int phase)
{
        int next = phase == 3 ? 0 : phase + 1;
        int k = state_ca_rotation_advance(env->db, env->cluster, next, env->now_ms);
        if (k < 0)
                return k;
        _cleanup_free_ char *fp = xasprintf("ca-rotate.phase-%d", next);
        failpoint(fp); /* recorded, nothing acted on yet */
        audit(env, token, phase, "done, every member healthy");
        if (next)
                audit(env, token, next,
                      next == 2 ? "started: the new CA signs; every member's leaves "
                                  "reissued from it, one after the other"
                                : "started: the old CA and its key are deleted; "
                                  "members restart onto the new CA alone");
        return 0;
}

int carotate_converged(const carotate_env *env, pass_result *res, bool *ret_new_identity)
{
        *ret_new_identity = false;
        _cleanup_(state_ca_rotation_freep) state_ca_rotation *rot = NULL;
        int k = state_ca_rotation_running(env->db, env->cluster, &rot);
        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return k;
        /* The phase this pass observed under is the one to finish. */
        if (rot->phase != env->c->tls.ca_rotation_phase)
                return 0;
        int first = rot->phase, phase = first;
        /* A running rotation is in phase 1, 2 or 3 (the table's CHECK; 0 is finished). */
        assert(phase >= 1 && phase <= 3);
        res->outcome = PASS_WAITING;
        res->poll_ms = POLL_AGAIN_MS;
        snprintf(res->reason, sizeof(res->reason), "RotatingCA");
        if (phase == 1) {
                k = finish_phase(env, rot->token, 1);
                if (k < 0)
                        return k;
                /*
                 * Phase 2 in this same pass: what it needs is what this
                 * converged pass has just seen, every member healthy and
                 * running the bundle old+new (and gitcd's client trusts
                 * both). Its row says phase 2 before anything is reissued,
                 * so a crash from here on resumes phase 2. The spec of this
                 * pass moves to phase 2, so the target opens the CA as
                 * phase 2 wants it (the new one signs).
                 */
                state_ca_rotation_free(rot);
                rot = NULL;
                k = state_ca_rotation_running(env->db, env->cluster, &rot);
                if (k < 0)
                        return k;
                env->c->tls.ca_rotation_phase = phase = rot->phase;
                assert(phase == 2);
        }
        if (phase == 2) {
                k = reissue_all(env, rot, res);
                if (k < 0 || !members_serve_reissued(env, res))
                        return 1;
                *ret_new_identity = true; /* gitcd's client certificate is the new CA's */
                k = finish_phase(env, rot->token, 2);
        } else
                k = finish_phase(env, rot->token, 3);
        if (k < 0)
                return k;
        /* The next phase's first step is allowed at once: pass again without waiting. */
        res->outcome = PASS_PROGRESSED;
        res->poll_ms = 0;
        if (phase == 3)
                pass_say(res, "CA rotation phase 3/3 (%s) done; the rotation is complete",
                         phase_names[3]);
        else if (first == 1)
                pass_say(res,
                         "CA rotation phases 1/3 (%s) and 2/3 (%s) done in one pass; phase 3/3 "
                         "(%s) begins",
                         phase_names[1], phase_names[2], phase_names[3]);
        else
                pass_say(res, "CA rotation phase 2/3 (%s) done; phase 3/3 (%s) begins",
                         phase_names[2], phase_names[3]);
        return 1;
}

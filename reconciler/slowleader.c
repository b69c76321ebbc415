/*
 * Leadership moved off a slow disk (spec.leadership.avoidSlowMembers): the
 * effects around slowdisk.h's pure judgement.
 *
 * A converged pass of a cluster with two voters or more (a single voter has
 * nobody to hand leadership to) scrapes every healthy voter's /metrics at most once per
 * window (a quarter of the interval, 2 to 30 s; passes come at the
 * observation cadence, 30 s by default, which this step never shortens: a
 * fleet's /metrics reads stay what its operator chose) through the one
 * metrics GET
 * (etcd/health.h, as the incident bundle does), keeps the scrape per member
 * in the cluster's context, and judges the window between it and the one
 * before. The numbers are etcd's own on every target; the target only says
 * which members run. When the leader is an outlier, MoveLeader goes to the
 * healthiest voter through act.c (journaled, audited member.move-leader
 * with reason SlowDisk and the figures in its message and its JSON:
 * member, from, reason, metric, p99_ms, median_ms, samples), at most once per
 * interval: the last move's time lives in the cluster's context, not the
 * state store, because a restart also forgets the scrapes, so after one
 * the first window only measures, and at most one extra move can follow.
 *
 * The work is voluntary (hold.h): held while suspended (and never on a
 * frozen cluster: the step runs only when converged), not disruptive,
 * because an election is one round trip, no member restarts and clients
 * keep their connections; so no maintenance window holds it.
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "etcd/health.h"
#include "reconciler/etcd-ops.h"
#include "reconciler/internal.h"
#include "util/xalloc.h"

#define SLOW_METRICS_MAX   (8u << 20)
#define SLOW_WINDOW_MIN_MS 2000
#define SLOW_WINDOW_MAX_MS 30000

void slow_track_release(slow_track *t)
{
        for (size_t i = 0; i < t->n; i++)
                free(t->m[i].name);
        free(t->m);
        *t = (slow_track){0};
}

static int64_t interval_ms(const etcd_cluster *c)
{
        int s = c->leadership.interval_seconds ? c->leadership.interval_seconds
                                               : LEADERSHIP_INTERVAL_DEFAULT_S;
        return (int64_t)s * 1000;
}

static int64_t window_ms(const etcd_cluster *c)
{
        return MIN(MAX(interval_ms(c) / 4, SLOW_WINDOW_MIN_MS), SLOW_WINDOW_MAX_MS);
}

static const slow_scrape *previous(const slow_track *t, const char *name, uint64_t id)
{
        for (size_t i = 0; i < t->n; i++)
                if (streq(t->m[i].name, name) && t->m[i].id == id)
                        return &t->m[i];
        return NULL;
}

/* One member's scrape; 0 with *ret, or -errno (logged at debug level). */
static int scrape(reconciler *r, const char *cluster, const char *client_url, const char *ca,
                  const char *cert, const char *key, disk_scrape *ret)
{
        char *text = NULL, *why = NULL;
        int k;
        if (r->opts.member_metrics)
                k = r->opts.member_metrics(r->opts.etcd_userdata, client_url, &text, &why);
        else {
                etcd_health_opts ho = {.timeout_ms = r->opts.etcd_timeout_ms,
                                       .tls = {.ca_file = ca, .cert_file = cert, .key_file = key}};
                k = etcd_member_metrics(client_url, &ho, SLOW_METRICS_MAX, &text, &why);
        }
        if (k >= 0)
                k = slowdisk_parse(text, strlen(text), ret, &why);
        if (k < 0)
                log_debug("%s: the disk figures of %s: %s", cluster, client_url,
                          why ? why : strerror(-k));
        free(text);
        free(why);
        return k;
}

int slow_leader_pass(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w,
                     const char *held, pass_result *res)
{
        slow_track *t = &x->slow;
        if (c->leadership.avoid_slow_off) {
                int64_t moved = t->moved_ms; /* switched off and on: still once an interval */
                slow_track_release(t);
                t->moved_ms = moved;
                return 0;
        }
        if (!r->opts.member_metrics && r->opts.etcd != &etcd_membership_real)
                return 0; /* a fake etcd seam: no member to ask */
        /* One voter: there is nobody to hand leadership to, so nothing to measure. */
        size_t voters = 0;
        for (size_t i = 0; i < w->n; i++)
                voters += w->views[i].em && !w->views[i].em->is_learner;
        if (voters < 2) {
                slow_track_release(t);
                return 0;
        }
        int64_t now = mono(r);
        if (t->scraped_ms && now - t->scraped_ms < window_ms(c))
                return 0; /* no pass is asked for: the observation cadence stays the operator's */

        /* This window's scrapes, each judged against the member's last. */
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        cluster_client_tls(r, c, &ca, &cert, &key);
        slow_scrape *fresh = xcalloc(w->n + 1, sizeof(slow_scrape));
        slow_member *judged = xcalloc(w->n + 1, sizeof(slow_member));
        size_t nf = 0, nj = 0;
        for (size_t i = 0; i < w->n; i++) {
                const member_view *v = &w->views[i];
                if (!v->em || v->em->is_learner || !v->rec || isempty(v->rec->client_url))
                        continue;
                slow_member *m = &judged[nj++];
                *m = (slow_member){.name = v->name,
                                   .id = v->em->id,
                                   .voter = true,
                                   .healthy = v->ts.state == MEMBER_READY};
                disk_scrape s;
                if (!m->healthy || scrape(r, x->name, v->rec->client_url, ca, cert, key, &s) < 0)
                        continue;
                const slow_scrape *before = previous(t, v->name, v->em->id);
                if (before &&
                    slowdisk_p99(&before->s.wal, &s.wal, &m->wal_p99, &m->wal_samples) == 0 &&
                    slowdisk_p99(&before->s.commit, &s.commit, &m->commit_p99,
                                 &m->commit_samples) == 0)
                        m->measured = true;
                fresh[nf++] = (slow_scrape){.name = xstrdup(v->name), .id = v->em->id, .s = s};
        }
        int64_t moved = t->moved_ms;
        slow_track_release(t);
        *t = (slow_track){.m = fresh, .n = nf, .scraped_ms = now, .moved_ms = moved};

        slow_verdict vd;
        slowdisk_judge(judged, nj, w->leader, &vd);
        int taken = 0;
        if (vd.kind == SLOW_NO_TARGET)
                log_info("%s: %s", x->name, vd.message);
        else if (vd.kind == SLOW_MOVE && t->moved_ms && now - t->moved_ms < interval_ms(c))
                log_debug("%s: %s: not yet, leadership was moved %lld s ago (at most once every "
                          "%lld s)",
                          x->name, vd.message, (long long)(now - t->moved_ms) / 1000,
                          (long long)interval_ms(c) / 1000);
        else if (vd.kind == SLOW_MOVE && held)
                log_debug("%s: %s: held: %s", x->name, vd.message, held);
        else if (vd.kind == SLOW_MOVE) {
                t->moved_ms = now;
                json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:f,s:f,s:I}", "member", vd.to->name,
                                      "from", vd.from->name, "reason", "SlowDisk", "metric",
                                      vd.metric, "p99_ms", vd.p99 * 1000, "median_ms",
                                      vd.median * 1000, "samples", (json_int_t)vd.samples);
                _cleanup_free_ char *after = j ? json_dumps(j, JSON_COMPACT) : NULL;
                json_decref(j);
                step s = {.kind = STEP_MOVE_LEADER,
                          .member = vd.to->name,
                          .member_id = vd.to->id,
                          .reason = "SlowDisk",
                          .message = xstrdup(vd.message),
                          .audit_after = after};
                res->step = STEP_MOVE_LEADER;
                snprintf(res->member, sizeof(res->member), "%s", vd.to->name);
                snprintf(res->reason, sizeof(res->reason), "SlowDisk");
                int k = act_step(r, x, c, w, &s, res);
                if (k < 0) {
                        res->outcome = PASS_WAITING;
                        res->poll_ms = POLL_RETRY_MS;
                        pass_say(res, "%s: %s", s.message, strerror(-k));
                }
                step_release(&s);
                taken = 1;
        }
        free(judged);
        return taken;
}

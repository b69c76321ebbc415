/*
 * gitcd status: what the state store knows about each cluster, as the
 * reconciler last recorded it.
 *
 * Without an argument: one line per cluster. With NS/NAME: that line, then
 * the desired and latched specs, its members, the expiry of its
 * certificates (tls.provider auto), its last defragmentation run, its
 * conditions in full (the NoSpaceAlarm, CorruptAlarm and DataConsistent
 * conditions among them) and the last check of its members' data with the
 * freeze and the repairs asked for.
 * READY counts current members whose last observed state is "ready"
 * against the desired replicas. A member the last pass could not see (its
 * machine does not answer) is "unknown", with what was last seen of it and
 * when under the members table. The database is opened read-only, so this
 * is safe to run next to a running reconciler; it shows the last committed
 * state, never a half-written one. Text from the store has its control
 * characters escaped (util/escape.h) before it reaches the terminal.
 *
 * Audit events that could not be written are shown too (after the table;
 * as "audit_failures" in each JSON object): a lost audit event must be
 * visible to whoever looks at the clusters. So are the intake's verdicts
 * (state/verdicts.h): a cluster whose commit the operator's policy refused,
 * or whose change waits for approvals or for the clusters it depends on
 * (spec.dependsOn: "held ...: WaitingForDependency: waits for staging to
 * converge on abc1234 and soak 60 s (until <time>)"), runs on a spec other
 * than its commit's, and one never taken in has no row of its own.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "api/spec.h"
#include "reconciler/hold.h"
#include "state/holds.h"
#include "state/takeovers.h"
#include "state/maintenance.h"
#include "state/preflights.h"
#include "state/carotate.h"
#include "state/consistency.h"
#include "state/recovery.h"
#include "state/restores.h"
#include "state/state.h"
#include "state/verdicts.h"
#include "util/escape.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd status [NS/NAME] [options]\n\n"
    "Show clusters from the state store; for one cluster also its members,\n"
    "certificate expiry dates, a running CA rotation's phase, the last\n"
    "defragmentation, the conditions (etcd's NOSPACE and CORRUPT alarms\n"
    "among them) and the last check that the members hold the same data\n"
    "(FROZEN, with the repair to run, when they do not; the repairs asked).\n"
    "A member whose machine did not answer in the last pass is \"unknown\",\n"
    "with the state last seen and when, and Degraded names the machine.\n"
    "On the hosts target with the preflight on, the machines' last preflights\n"
    "(the member each held, fdatasync p50/p99/max, free space, clock offset,\n"
    "peer RTT, the verdict), etcd's timeouts derived from the peer RTT, and\n"
    "MachineHealthy among the conditions.\n\n"
    "Options:\n";

/* A printable copy: control characters escaped, empty becomes "-". */
static char *clean(const char *s)
{
        if (isempty(s))
                return xstrdup("-");
        return str_escape(s);
}

/*
 * The kubeconfig context of the cluster's API server, as the spec gitcd
 * works toward records it (spec.kubernetes.context, or its source's,
 * written there by the intake); NULL: none recorded (the daemon's default
 * context, or a target of another kind). Newly allocated.
 */
static char *kube_context_of(const state_cluster *c)
{
        const char *text = state_cluster_spec_json(c);
        json_t *j = text ? json_loads(text, 0, NULL) : NULL;
        const char *ctx = json_string_value(
            json_object_get(json_object_get(json_object_get(j, "spec"), "kubernetes"), "context"));
        char *r = xstrdup_null(ctx);
        json_decref(j);
        return r;
}

typedef struct table {
        size_t cols;
        char **cells; /* rows * cols */
        size_t rows;
        size_t alloc;
} table;

static void table_add(table *t, const char *const *row)
{
        t->cells = xgrow(t->cells, &t->alloc, (t->rows + 1) * t->cols, sizeof(char *));
        for (size_t c = 0; c < t->cols; c++)
                t->cells[t->rows * t->cols + c] = clean(row[c]);
        t->rows++;
}

static size_t text_width(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                if ((*s & 0xc0) != 0x80)
                        n++;
        return n;
}

static void table_print(table *t, const char *indent)
{
        size_t *w = xcalloc(t->cols, sizeof(size_t));
        for (size_t i = 0; i < t->rows * t->cols; i++)
                w[i % t->cols] = MAX(w[i % t->cols], text_width(t->cells[i]));
        strbuf sb = STRBUF_INIT;
        for (size_t r = 0; r < t->rows; r++) {
                sb_append(&sb, indent);
                for (size_t c = 0; c < t->cols; c++) {
                        const char *s = t->cells[r * t->cols + c];
                        sb_append(&sb, s);
                        if (c + 1 < t->cols)
                                for (size_t n = text_width(s); n < w[c] + 2; n++)
                                        sb_appendc(&sb, ' ');
                }
                sb_appendc(&sb, '\n');
        }
        fputs(sb_str(&sb), stdout);
        sb_release(&sb);
        for (size_t i = 0; i < t->rows * t->cols; i++)
                free(t->cells[i]);
        free(t->cells);
        free(w);
        t->cells = NULL;
        t->rows = t->alloc = 0;
}

static size_t ready_members(const state_member_list *ml)
{
        size_t n = 0;
        for (size_t i = 0; i < ml->n; i++)
                if (streq_ptr(ml->items[i]->state, "ready") && !ml->items[i]->dormant)
                        n++;
        return n;
}

static char *conditions_short(const state_cluster *c)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < c->n_conditions; i++)
                sb_printf(&sb, "%s%s=%s", i ? "," : "", c->conditions[i].type,
                          c->conditions[i].status);
        return sb_detach(&sb);
}

static const char *cluster_version(const state_cluster *c)
{
        return c->version ? c->version : c->desired_version;
}

static void cluster_row(table *t, const state_cluster *c, const state_member_list *ml, int64_t now)
{
        char ready[48], age[32];
        size_t want = c->desired_replicas >= 0 ? (size_t)c->desired_replicas : ml->n;
        snprintf(ready, sizeof(ready), "%zu/%zu", ready_members(ml), want);
        format_age(now - c->created_ms, age, sizeof(age));
        _cleanup_free_ char *conds = conditions_short(c);
        const char *row[] = {c->name, ready, cluster_version(c), c->cluster_id, c->phase,
                             age,     conds};
        table_add(t, row);
}

static const char *const cluster_heads[] = {"NAME",  "READY", "VERSION",   "CLUSTER ID",
                                            "PHASE", "AGE",   "CONDITIONS"};

static const char *member_role(const state_member *m)
{
        if (m->dormant)
                return "dormant";
        return m->learner ? "learner" : "voter";
}

/* "succeeded 2026-11-23T03:00:12Z (schedule): main-1, main-2, main-0 (leader moved away)" */
static char *maint_run_text(const state_maint_run *r)
{
        char when[40];
        format_rfc3339(r->finished_ms ? r->finished_ms : r->started_ms, when, sizeof(when));
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, "%s %s (%s)", r->result, when, r->trigger);
        if (!isempty(r->members_done))
                sb_printf(&sb, ": %s done", r->members_done);
        if (r->leader)
                sb_printf(&sb, ", leadership moved from %s", r->leader);
        if (r->compact_revision)
                sb_printf(&sb, ", compacted to revision %lld", (long long)r->compact_revision);
        if (r->disarmed)
                sb_printf(&sb, ", NOSPACE disarmed");
        if (r->error)
                sb_printf(&sb, ": %s", r->error);
        _cleanup_free_ char *text = sb_detach(&sb);
        return clean(text);
}

/*
 * A member gitcd could not see in its last pass (its machine does not
 * answer): why, and what was last observed of it and when.
 */
static void print_unknown(const state_member *x, int64_t now)
{
        if (!streq_ptr(x->state, "unknown"))
                return;
        _cleanup_free_ char *name = clean(x->name);
        _cleanup_free_ char *why =
            clean(x->unreachable ? x->unreachable : "the target did not say");
        _cleanup_free_ char *seen = clean(x->seen_state ? x->seen_state : "nothing");
        if (x->seen_ms > 0) {
                char when[40], age[32];
                format_rfc3339(x->seen_ms, when, sizeof(when));
                format_age(now - x->seen_ms, age, sizeof(age));
                printf("  %s is unknown: %s; last seen %s at %s (%s ago)\n", name, why, seen, when,
                       age);
        } else
                printf("  %s is unknown: %s; never seen by this gitcd\n", name, why);
}

static void print_detail(const state_cluster *c, const state_member_list *ml,
                         const state_cert_list *cl, const state_maint_run *run, int64_t now)
{
        table t = {.cols = ARRAY_SIZE(cluster_heads)};
        table_add(&t, cluster_heads);
        cluster_row(&t, c, ml, now);
        table_print(&t, "");

        char when[40];
        _cleanup_free_ char *commit = clean(c->desired_commit);
        _cleanup_free_ char *hash = clean(c->desired_hash);
        printf("\nDesired:   commit %.12s, spec %.12s\n", commit, hash);
        if (c->observed_hash) {
                _cleanup_free_ char *ohash = clean(c->observed_hash);
                printf("Target:    spec %.12s%s\n", ohash,
                       streq_ptr(c->observed_hash, c->desired_hash)
                           ? " (up to date)"
                           : " (differs from the desired spec)");
        } else
                printf("Target:    none latched yet\n");
        _cleanup_free_ char *kube_context = kube_context_of(c);
        if (kube_context) {
                _cleanup_free_ char *kc = clean(kube_context);
                printf("Context:   %s (kubeconfig context of its API server)\n", kc);
        }
        if (c->progress_deadline_ms > 0) {
                format_rfc3339(c->progress_deadline_ms, when, sizeof(when));
                printf("Deadline:  %s%s\n", when,
                       now > c->progress_deadline_ms ? " (exceeded)" : "");
        }

        printf("\nMembers:\n");
        if (ml->n == 0)
                printf("  (none)\n");
        else {
                table m = {.cols = 6};
                const char *heads[] = {"NAME", "ID", "ROLE", "VERSION", "PEER URL", "STATE"};
                table_add(&m, heads);
                for (size_t i = 0; i < ml->n; i++) {
                        const state_member *x = ml->items[i];
                        bool leads = c->leader && streq(c->leader, x->name);
                        _cleanup_free_ char *role =
                            xasprintf("%s%s%s", member_role(x), leads ? " (leader)" : "",
                                      x->seed && !x->dormant ? " (seed)" : "");
                        const char *row[] = {x->name,    x->member_id, role,
                                             x->version, x->peer_url,  x->state};
                        table_add(&m, row);
                }
                table_print(&m, "  ");
                for (size_t i = 0; i < ml->n; i++)
                        print_unknown(ml->items[i], now);
        }

        if (cl->n > 0) {
                printf("\nCertificates:\n");
                table k = {.cols = 5};
                const char *heads[] = {"MEMBER", "SURFACE", "EXPIRES", "IN", "SERIAL"};
                table_add(&k, heads);
                for (size_t i = 0; i < cl->n; i++) {
                        const state_cert *x = cl->items[i];
                        char age[32];
                        format_rfc3339(x->not_after_ms, when, sizeof(when));
                        if (x->not_after_ms > now)
                                format_age(x->not_after_ms - now, age, sizeof(age));
                        else
                                snprintf(age, sizeof(age), "expired");
                        _cleanup_free_ char *member =
                            clean(isempty(x->member) ? "(all)" : x->member);
                        _cleanup_free_ char *surface = clean(x->surface);
                        _cleanup_free_ char *serial = clean(x->serial);
                        const char *row[] = {member, surface, when, age, serial};
                        table_add(&k, row);
                }
                table_print(&k, "  ");
        }

        /* the history window: etcd's auto-compaction, as the latched spec sets it */
        json_t *spec = c->observed_json ? json_loads(c->observed_json, 0, NULL) : NULL;
        json_t *opt = json_object_get(json_object_get(spec, "spec"), "options");
        const char *mode = json_string_value(json_object_get(opt, "autoCompactionMode"));
        const char *keep = json_string_value(json_object_get(opt, "autoCompactionRetention"));
        if (mode && keep) {
                _cleanup_free_ char *m = clean(mode), *k = clean(keep);
                printf("\nHistory:   etcd compacts automatically (%s, retention %s)\n", m, k);
        } else if (c->observed_json)
                printf("\nHistory:   kept until compacted (no options.autoCompactionRetention)\n");
        json_decref(spec);
        if (run) {
                _cleanup_free_ char *text = maint_run_text(run);
                printf("Defrag:    last run %s\n", text);
        }

        printf("\nConditions:\n");
        if (c->n_conditions == 0)
                printf("  (none)\n");
        else {
                table k = {.cols = 5};
                const char *heads[] = {"TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"};
                table_add(&k, heads);
                for (size_t i = 0; i < c->n_conditions; i++) {
                        const state_condition *x = &c->conditions[i];
                        format_rfc3339(x->last_transition_ms, when, sizeof(when));
                        const char *row[] = {x->type, x->status, x->reason, when, x->message};
                        table_add(&k, row);
                }
                table_print(&k, "  ");
        }
}

static json_t *audit_failures_json(const state_audit_failures *f)
{
        json_t *o = json_object();
        json_object_set_new(o, "count", json_integer(f->count));
        json_object_set_new(o, "last_time", cli_json_time(f->last_ms));
        json_object_set_new(o, "last_action", cli_json_string(f->last_action));
        json_object_set_new(o, "last_error", cli_json_string(f->last_error));
        return o;
}

/* "Audit log: 2 events could not be written; the last (member.remove, at T): why". */
static void print_audit_failures(const state_audit_failures *f)
{
        if (f->count == 0)
                return;
        char when[40];
        format_rfc3339(f->last_ms, when, sizeof(when));
        _cleanup_free_ char *action = clean(f->last_action);
        _cleanup_free_ char *error = clean(f->last_error);
        printf("\nAudit log: %lld event%s could not be written; the last (%s, at %s): %s\n",
               (long long)f->count, f->count == 1 ? "" : "s", action, when, error);
}

static json_t *maint_run_json(const state_maint_run *r)
{
        if (!r)
                return json_null();
        json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:s}", "trigger", r->trigger, "result",
                              r->result, "started", cli_json_time(r->started_ms), "finished",
                              cli_json_time(r->finished_ms), "members_done", r->members_done);
        json_object_set_new(o, "leader_moved_from", cli_json_string(r->leader));
        json_object_set_new(o, "compact_revision",
                            r->compact_revision ? json_integer(r->compact_revision) : json_null());
        json_object_set_new(o, "disarmed", json_boolean(r->disarmed));
        json_object_set_new(o, "error", cli_json_string(r->error));
        return o;
}

static json_t *cluster_json(const state_cluster *c, const state_member_list *ml,
                            const state_cert_list *cl, const state_maint_run *run,
                            const state_audit_failures *af)
{
        json_t *o = json_object();
        json_object_set_new(o, "name", cli_json_string(c->name));
        json_object_set_new(o, "phase", cli_json_string(c->phase));
        json_object_set_new(o, "cluster_id", cli_json_string(c->cluster_id));
        json_object_set_new(o, "version", cli_json_string(cluster_version(c)));
        json_object_set_new(o, "ready", json_integer((json_int_t)ready_members(ml)));
        json_object_set_new(o, "replicas",
                            c->desired_replicas >= 0 ? json_integer(c->desired_replicas)
                                                     : json_null());
        json_object_set_new(o, "created", cli_json_time(c->created_ms));
        json_object_set_new(o, "desired_commit", cli_json_string(c->desired_commit));
        json_object_set_new(o, "desired_hash", cli_json_string(c->desired_hash));
        _cleanup_free_ char *kube_context = kube_context_of(c);
        json_object_set_new(o, "kube_context", cli_json_string(kube_context));
        json_object_set_new(o, "observed_hash", cli_json_string(c->observed_hash));
        json_object_set_new(o, "progress_deadline", cli_json_time(c->progress_deadline_ms));
        json_t *conds = json_array();
        for (size_t i = 0; i < c->n_conditions; i++) {
                const state_condition *x = &c->conditions[i];
                json_t *k = json_object();
                json_object_set_new(k, "type", cli_json_string(x->type));
                json_object_set_new(k, "status", cli_json_string(x->status));
                json_object_set_new(k, "reason", cli_json_string(x->reason));
                json_object_set_new(k, "message", cli_json_string(x->message));
                json_object_set_new(k, "last_transition_time",
                                    cli_json_time(x->last_transition_ms));
                json_array_append_new(conds, k);
        }
        json_object_set_new(o, "conditions", conds);
        json_t *members = json_array();
        for (size_t i = 0; i < ml->n; i++) {
                const state_member *x = ml->items[i];
                json_t *m = json_object();
                json_object_set_new(m, "name", cli_json_string(x->name));
                json_object_set_new(m, "id", cli_json_string(x->member_id));
                json_object_set_new(m, "role", json_string(member_role(x)));
                json_object_set_new(m, "seed", json_boolean(x->seed));
                json_object_set_new(m, "leader",
                                    json_boolean(c->leader && streq(c->leader, x->name)));
                json_object_set_new(m, "version", cli_json_string(x->version));
                json_object_set_new(m, "peer_url", cli_json_string(x->peer_url));
                json_object_set_new(m, "client_url", cli_json_string(x->client_url));
                json_object_set_new(m, "state", cli_json_string(x->state));
                json_object_set_new(m, "last_seen_ms",
                                    x->seen_ms > 0 ? json_integer((json_int_t)x->seen_ms)
                                                   : json_null());
                if (streq_ptr(x->state, "unknown")) {
                        json_object_set_new(m, "last_seen_state", cli_json_string(x->seen_state));
                        json_object_set_new(m, "unreachable", cli_json_string(x->unreachable));
                }
                json_array_append_new(members, m);
        }
        json_object_set_new(o, "members", members);
        json_t *certs = json_array();
        for (size_t i = 0; i < cl->n; i++) {
                const state_cert *x = cl->items[i];
                json_array_append_new(
                    certs, json_pack("{s:o,s:s,s:o,s:s}", "member",
                                     isempty(x->member) ? json_null() : json_string(x->member),
                                     "surface", x->surface, "not_after",
                                     cli_json_time(x->not_after_ms), "serial", x->serial));
        }
        json_object_set_new(o, "certificates", certs);
        json_object_set_new(o, "leader", cli_json_string(c->leader));
        json_object_set_new(o, "last_defrag", maint_run_json(run));
        json_object_set_new(o, "audit_failures", audit_failures_json(af));
        return o;
}

/*
 * While quorum is lost: what the reconciler last knew of each member, the
 * latest snapshot and the source it proposes, with the command to run;
 * then the recoveries asked for.
 */
static void print_recovery(state_db *db, const char *cluster)
{
        char when[40];
        _cleanup_free_ char *text = NULL;
        int64_t seen = 0;
        json_t *a = state_recovery_assessment_get(db, cluster, &text, &seen) == 0
                        ? json_loads(text, 0, NULL)
                        : NULL;
        if (a) {
                format_rfc3339(seen, when, sizeof(when));
                printf("\nQuorum lost; what gitcd knew at %s:\n", when);
                table m = {.cols = 5};
                const char *heads[] = {"MEMBER", "STATE", "REACHABLE", "RAFT INDEX", "REVISION"};
                table_add(&m, heads);
                size_t i;
                json_t *x;
                json_array_foreach(json_object_get(a, "members"), i, x)
                {
                        bool up = json_is_true(json_object_get(x, "reachable"));
                        _cleanup_free_ char *index =
                            up ? xasprintf("%" JSON_INTEGER_FORMAT,
                                           json_integer_value(json_object_get(x, "raft_index")))
                               : xstrdup("-");
                        _cleanup_free_ char *rev =
                            up ? xasprintf("%" JSON_INTEGER_FORMAT,
                                           json_integer_value(json_object_get(x, "revision")))
                               : xstrdup("-");
                        _cleanup_free_ char *name =
                            clean(json_string_value(json_object_get(x, "name")));
                        _cleanup_free_ char *state =
                            clean(json_string_value(json_object_get(x, "state")));
                        const char *row[] = {name, state, up ? "yes" : "no", index, rev};
                        table_add(&m, row);
                }
                table_print(&m, "  ");
                json_t *s = json_object_get(a, "snapshot");
                if (s) {
                        format_rfc3339(json_integer_value(json_object_get(s, "finished_ms")), when,
                                       sizeof(when));
                        _cleanup_free_ char *loc =
                            clean(json_string_value(json_object_get(s, "location")));
                        const char *v = json_string_value(json_object_get(s, "verify_result"));
                        printf("  Latest snapshot: %" JSON_INTEGER_FORMAT
                               " (revision %" JSON_INTEGER_FORMAT ", %s%s) at %s\n",
                               json_integer_value(json_object_get(s, "id")),
                               json_integer_value(json_object_get(s, "revision")), when,
                               streq_ptr(v, "verified") ? ", proven to restore by its drill"
                                                        : ", not proven by a restore drill",
                               loc);
                } else
                        printf("  Latest snapshot: none recorded (or none a restore could "
                               "take)\n");
                json_t *p = json_object_get(a, "proposal");
                if (p) {
                        _cleanup_free_ char *why =
                            clean(json_string_value(json_object_get(p, "why")));
                        _cleanup_free_ char *cmd =
                            clean(json_string_value(json_object_get(p, "command")));
                        printf("  Safest source: %s\n  Run: %s\n"
                               "  (or commit spec.recovery with the same source and a new "
                               "token)\n",
                               why, cmd);
                } else
                        printf("  No member answers and no snapshot is recorded: nothing to "
                               "recover from.\n");
                json_decref(a);
        }
        state_recovery_list l = {0};
        if (state_recovery_list_for(db, cluster, 5, &l) < 0 || l.n == 0) {
                state_recovery_list_release(&l);
                return;
        }
        printf("\nRecoveries:\n");
        table k = {.cols = 7};
        const char *heads[] = {"ID", "FROM", "ASKED BY", "WHEN", "RESULT", "REVISION", "DETAIL"};
        table_add(&k, heads);
        for (size_t i = 0; i < l.n; i++) {
                const state_recovery *r = l.items[i];
                _cleanup_free_ char *id = xasprintf("%lld", (long long)r->id);
                _cleanup_free_ char *from = xasprintf("%s %s", r->source_kind, r->source);
                _cleanup_free_ char *by = clean(r->requested_by);
                _cleanup_free_ char *rev =
                    r->revision ? xasprintf("%lld", (long long)r->revision) : xstrdup("-");
                _cleanup_free_ char *res = streq(r->result, "running")
                                               ? xasprintf("running (%s)", r->phase)
                                               : xstrdup(r->result);
                _cleanup_free_ char *detail =
                    clean(r->error                        ? r->error
                          : r->cleaned_ms                 ? "data set aside deleted"
                          : streq(r->result, "succeeded") ? "data set aside kept until healthy"
                                                          : NULL);
                format_rfc3339(r->requested_ms, when, sizeof(when));
                const char *row[] = {id, from, by, when, res, rev, detail};
                table_add(&k, row);
        }
        table_print(&k, "  ");
        state_recovery_list_release(&l);
}

/*
 * The snapshots restored into the cluster (spec.bootstrap.restore, recoveries
 * from a snapshot), newest first: the revision bump each was made with and
 * how it was sized, and the revision its members' data starts at.
 */
/* A takeover of the cluster from another operator (spec.adopt), when one was recorded. */
static void print_takeover(state_db *db, const char *cluster)
{
        _cleanup_(state_takeover_freep) state_takeover *t = NULL;
        if (state_takeover_get(db, cluster, &t) < 0)
                return;
        _cleanup_free_ char *from = clean(t->source);
        printf("\nTakeover from %s (cluster %s): %s\n", from, t->cluster_id,
               t->finished_ms ? "finished" : "under way");
        if (t->service_selector_before) {
                _cleanup_free_ char *svc = clean(t->service);
                _cleanup_free_ char *before = clean(t->service_selector_before);
                printf("  old client Service %s selects gitcd's voters (before: %s)\n", svc,
                       before);
        }
        json_t *objs = json_loads(t->objects_json ? t->objects_json : "[]", 0, NULL);
        printf("  %s:\n", t->finished_ms ? "left for you to delete"
                                         : "the old operator's objects (never deleted by gitcd)");
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                _cleanup_free_ char *line = clean(json_string_value(o));
                printf("    %s\n", line);
        }
        json_decref(objs);
}

/* The same for -o json: "takeover", or null. */
static void takeover_json(state_db *db, const char *cluster, json_t *o)
{
        _cleanup_(state_takeover_freep) state_takeover *t = NULL;
        if (state_takeover_get(db, cluster, &t) < 0) {
                json_object_set_new(o, "takeover", json_null());
                return;
        }
        json_t *objs = json_loads(t->objects_json ? t->objects_json : "[]", 0, NULL);
        json_object_set_new(
            o, "takeover",
            json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "source", cli_json_string(t->source),
                      "cluster_id", cli_json_string(t->cluster_id), "started",
                      cli_json_time(t->started_ms), "finished",
                      t->finished_ms ? cli_json_time(t->finished_ms) : json_null(), "service",
                      cli_json_string(t->service), "service_selector_before",
                      cli_json_string(t->service_selector_before), "objects",
                      objs ? objs : json_array()));
}

static void print_restores(state_db *db, const char *cluster)
{
        state_restore_list l = {0};
        if (state_restore_list_for(db, cluster, 5, &l) < 0 || l.n == 0) {
                state_restore_list_release(&l);
                return;
        }
        printf("\nRestores:\n");
        table k = {.cols = 7};
        const char *heads[] = {"ID",   "FROM",      "WHEN",   "SNAPSHOT REV",
                               "BUMP", "STARTS AT", "MEMBERS"};
        table_add(&k, heads);
        for (size_t i = 0; i < l.n; i++) {
                const state_restore *r = l.items[i];
                char when[40];
                format_rfc3339(r->recorded_ms, when, sizeof(when));
                _cleanup_free_ char *id = xasprintf("%lld", (long long)r->id);
                _cleanup_free_ char *from =
                    r->recovery_id ? xasprintf("recovery %lld", (long long)r->recovery_id)
                                   : xstrdup("bootstrap");
                _cleanup_free_ char *snap = xasprintf("%lld", (long long)r->snapshot_revision);
                _cleanup_free_ char *bump = xasprintf("%lld", (long long)r->bump);
                _cleanup_free_ char *at = xasprintf("%lld", (long long)r->revision);
                _cleanup_free_ char *members = clean(r->members);
                const char *row[] = {id, from, when, snap, bump, at, members};
                table_add(&k, row);
        }
        table_print(&k, "  ");
        for (size_t i = 0; i < l.n; i++) {
                _cleanup_free_ char *from = clean(l.items[i]->source);
                _cleanup_free_ char *sizing = clean(l.items[i]->sizing);
                printf("  %lld: %s; bump %s\n", (long long)l.items[i]->id, from, sizing);
        }
        state_restore_list_release(&l);
}

/* The same for -o json: "restores", newest first. */
static void restores_json(state_db *db, const char *cluster, json_t *o)
{
        json_t *v = json_array();
        state_restore_list l = {0};
        if (state_restore_list_for(db, cluster, 5, &l) == 0)
                for (size_t i = 0; i < l.n; i++) {
                        const state_restore *r = l.items[i];
                        json_t *j =
                            json_pack("{s:I, s:s, s:s, s:I, s:I, s:o, s:I, s:s, s:o}", "id",
                                      (json_int_t)r->id, "origin", r->origin, "source", r->source,
                                      "snapshot_revision", (json_int_t)r->snapshot_revision, "bump",
                                      (json_int_t)r->bump, "sizing", cli_json_string(r->sizing),
                                      "revision", (json_int_t)r->revision, "members", r->members,
                                      "recorded", cli_json_time(r->recorded_ms));
                        if (r->recovery_id)
                                json_object_set_new(j, "recovery",
                                                    json_integer((json_int_t)r->recovery_id));
                        json_array_append_new(v, j);
                }
        state_restore_list_release(&l);
        json_object_set_new(o, "restores", v);
}

/* The running CA rotation (tls.auto.rotateCA): its phase and the members done in it. */
static const char *const ca_phase_names[] = {"finished", "trust old+new CA", "reissue from new CA",
                                             "drop old CA"};

static void print_ca_rotation(state_db *db, const char *cluster)
{
        state_ca_rotation *r = NULL;
        if (state_ca_rotation_running(db, cluster, &r) < 0)
                return;
        char when[40];
        format_rfc3339(r->phase_ms, when, sizeof(when));
        _cleanup_free_ char *token = clean(r->token);
        _cleanup_free_ char *done = clean(isempty(r->members_done) ? "none yet" : r->members_done);
        printf("\nCA rotation: rotateCA %s, phase %d of 3 (%s) since %s", token, r->phase,
               ca_phase_names[r->phase & 3], when);
        if (r->phase == 2)
                printf("; reissued: %s\n", done);
        else
                printf("; members restart one at a time (see Members)\n");
        state_ca_rotation_free(r);
}

/* The same for -o json: "ca_rotation" (or null). */
static void ca_rotation_json(state_db *db, const char *cluster, json_t *o)
{
        state_ca_rotation *r = NULL;
        if (state_ca_rotation_running(db, cluster, &r) < 0) {
                json_object_set_new(o, "ca_rotation", json_null());
                return;
        }
        json_object_set_new(o, "ca_rotation",
                            json_pack("{s:s,s:i,s:s,s:s,s:o,s:o}", "token", r->token, "phase",
                                      r->phase, "phase_name", ca_phase_names[r->phase & 3],
                                      "members_done", r->members_done, "started",
                                      cli_json_time(r->started_ms), "phase_since",
                                      cli_json_time(r->phase_ms)));
        state_ca_rotation_free(r);
}

/* The same for -o json: "quorum_loss" (or null) and "recoveries". */
static void recovery_json(state_db *db, const char *cluster, json_t *o)
{
        _cleanup_free_ char *text = NULL;
        json_t *a = state_recovery_assessment_get(db, cluster, &text, NULL) == 0
                        ? json_loads(text, 0, NULL)
                        : NULL;
        json_object_set_new(o, "quorum_loss", a ? a : json_null());
        json_t *v = json_array();
        state_recovery_list l = {0};
        if (state_recovery_list_for(db, cluster, 5, &l) == 0)
                for (size_t i = 0; i < l.n; i++) {
                        const state_recovery *r = l.items[i];
                        json_array_append_new(
                            v,
                            json_pack("{s:I, s:s, s:s, s:o, s:o, s:s, s:s, s:I, s:o, s:o}", "id",
                                      (json_int_t)r->id, "from", r->source_kind, "source",
                                      r->source, "requested_by", cli_json_string(r->requested_by),
                                      "requested", cli_json_time(r->requested_ms), "result",
                                      r->result, "phase", r->phase, "revision",
                                      (json_int_t)r->revision, "error", cli_json_string(r->error),
                                      "cleaned", cli_json_time(r->cleaned_ms)));
                }
        state_recovery_list_release(&l);
        json_object_set_new(o, "recoveries", v);
}

/* "demo-0 9e1b44d0, demo-1 3a0f12cc" from the row's hashes. */
static char *hashes_text(const state_consistency *v)
{
        json_t *h = v->hashes ? json_loads(v->hashes, 0, NULL) : NULL;
        strbuf sb = STRBUF_INIT;
        const char *key;
        json_t *val;
        json_object_foreach(h, key, val)
        {
                sb_printf(&sb, "%s%s %s", sb.len ? ", " : "", key, json_string_value(val));
        }
        json_decref(h);
        _cleanup_free_ char *text = sb_detach(&sb);
        return clean(text);
}

/*
 * The members' data: the last check (gitcd's HashKV of every member), the
 * freeze with what a person can run, and the repairs asked for.
 */
static void print_consistency(state_db *db, const char *cluster)
{
        char when[40];
        state_consistency *v = NULL;
        if (state_consistency_get(db, cluster, &v) == 0) {
                printf("\n");
                if (v->frozen_ms) {
                        format_rfc3339(v->frozen_ms, when, sizeof(when));
                        _cleanup_free_ char *msg = clean(v->frozen_message);
                        printf("FROZEN since %s: %s\n", when, msg);
                }
                if (v->checked_ms) {
                        format_rfc3339(v->checked_ms, when, sizeof(when));
                        _cleanup_free_ char *hashes = hashes_text(v);
                        _cleanup_free_ char *minority = clean(v->minority);
                        _cleanup_free_ char *compacted =
                            v->compact_revision > 0
                                ? xasprintf("compacted at %lld", (long long)v->compact_revision)
                                : xstrdup("never compacted");
                        printf("Data:      %s at revision %lld (%s), checked %s in %lld ms\n"
                               "           %s\n",
                               streq_ptr(v->verdict, "agree")      ? "every member agrees"
                               : streq_ptr(v->verdict, "minority") ? "a MINORITY differs"
                                                                   : "NO MAJORITY agrees",
                               (long long)v->revision, compacted, when, (long long)v->duration_ms,
                               hashes);
                        if (!isempty(v->minority))
                                printf("           minority: %s\n", minority);
                } else
                        printf("Data:      not compared yet\n");
                if (v->attempt_error && v->attempt_ms > v->checked_ms) {
                        format_rfc3339(v->attempt_ms, when, sizeof(when));
                        _cleanup_free_ char *err = clean(v->attempt_error);
                        printf("           last attempt %s did not conclude: %s\n", when, err);
                }
                state_consistency_free(v);
        }
        state_repair_list l = {0};
        if (state_repair_list_for(db, cluster, 5, &l) < 0 || l.n == 0) {
                state_repair_list_release(&l);
                return;
        }
        printf("\nRepairs:\n");
        table k = {.cols = 6};
        const char *heads[] = {"ID", "ASKED", "ASKED BY", "WHEN", "RESULT", "DETAIL"};
        table_add(&k, heads);
        for (size_t i = 0; i < l.n; i++) {
                const state_repair *r = l.items[i];
                _cleanup_free_ char *id = xasprintf("%lld", (long long)r->id);
                _cleanup_free_ char *what =
                    r->member ? xasprintf("replace %s", r->member) : xstrdup("recheck");
                _cleanup_free_ char *by = clean(r->requested_by);
                _cleanup_free_ char *res = streq(r->result, "running")
                                               ? xasprintf("running (%s)", r->phase)
                                               : xstrdup(r->result);
                _cleanup_free_ char *replaced =
                    r->replacement ? xasprintf("replaced by %s", r->replacement) : NULL;
                _cleanup_free_ char *detail = clean(r->error ? r->error : replaced);
                format_rfc3339(r->requested_ms, when, sizeof(when));
                const char *row[] = {id, what, by, when, res, detail};
                table_add(&k, row);
        }
        table_print(&k, "  ");
        state_repair_list_release(&l);
}

/*
 * The machines' last preflights (the hosts target's, docs/hosts.md): each
 * machine measured for the cluster, the member it held then, and what was
 * measured. Nothing when none was (the preflight is off, or another target).
 */
static void print_machines(state_db *db, const char *cluster)
{
        state_preflight_list l = {0};
        if (state_preflight_list_get(db, cluster, &l) < 0 || l.n == 0) {
                state_preflight_list_release(&l);
                return;
        }
        printf("\nMachines (last preflight):\n");
        for (size_t i = 0; i < l.n; i++) {
                _cleanup_free_ char *machine = clean(l.items[i]->machine);
                _cleanup_free_ char *member =
                    l.items[i]->member ? str_escape(l.items[i]->member) : xstrdup("free");
                _cleanup_free_ char *text = cli_preflight_text(l.items[i]);
                printf("  %s (%s): %s\n", machine, member, text);
        }
        state_preflight_list_release(&l);
        state_timeouts t;
        if (state_timeouts_get(db, cluster, &t) > 0) {
                char when[40] = "";
                format_rfc3339(t.time_ms, when, sizeof(when));
                printf("  etcd's timeouts from the peer RTT: heartbeat %d ms, election %d ms "
                       "(slowest link's median %.1f ms, derived %s)\n",
                       t.heartbeat_ms, t.election_ms, t.rtt_us / 1000.0, when);
        }
}

/* The same for -o json: "machines", by machine. */
static void machines_json(state_db *db, const char *cluster, json_t *o)
{
        json_t *v = json_array();
        state_preflight_list l = {0};
        if (state_preflight_list_get(db, cluster, &l) == 0)
                for (size_t i = 0; i < l.n; i++)
                        json_array_append_new(v, cli_preflight_json(l.items[i]));
        state_preflight_list_release(&l);
        json_object_set_new(o, "machines", v);
        state_timeouts t;
        json_object_set_new(o, "derived_timeouts",
                            state_timeouts_get(db, cluster, &t) > 0
                                ? json_pack("{s:i,s:i,s:I,s:o}", "heartbeat_ms", t.heartbeat_ms,
                                            "election_ms", t.election_ms, "rtt_us",
                                            (json_int_t)t.rtt_us, "derived",
                                            cli_json_time(t.time_ms))
                                : json_null());
}

/* The same for -o json: "consistency" (or null) and "repairs". */
static void consistency_json(state_db *db, const char *cluster, json_t *o)
{
        state_consistency *v = NULL;
        if (state_consistency_get(db, cluster, &v) < 0) {
                json_object_set_new(o, "consistency", json_null());
        } else {
                json_t *h = v->hashes ? json_loads(v->hashes, 0, NULL) : NULL;
                json_t *minority = json_array();
                _cleanup_free_ char *list = xstrdup_null(v->minority);
                char *save = NULL;
                for (char *n = list ? strtok_r(list, ",", &save) : NULL; n;
                     n = strtok_r(NULL, ",", &save))
                        json_array_append_new(minority, json_string(n));
                json_t *c = json_object();
                json_object_set_new(c, "checked", cli_json_time(v->checked_ms));
                json_object_set_new(c, "revision",
                                    v->checked_ms ? json_integer(v->revision) : json_null());
                json_object_set_new(c, "compact_revision",
                                    v->checked_ms ? json_integer(v->compact_revision)
                                                  : json_null());
                json_object_set_new(c, "verdict", cli_json_string(v->verdict));
                json_object_set_new(c, "agree", json_boolean(streq_ptr(v->verdict, "agree")));
                json_object_set_new(c, "hashes", h ? h : json_object());
                json_object_set_new(c, "minority", minority);
                json_object_set_new(c, "duration_ms", json_integer(v->duration_ms));
                json_object_set_new(c, "last_attempt", cli_json_time(v->attempt_ms));
                json_object_set_new(
                    c, "last_attempt_error",
                    cli_json_string(v->attempt_ms > v->checked_ms ? v->attempt_error : NULL));
                json_object_set_new(c, "frozen", json_boolean(v->frozen_ms != 0));
                json_object_set_new(c, "frozen_since", cli_json_time(v->frozen_ms));
                json_object_set_new(c, "frozen_cause", cli_json_string(v->frozen_cause));
                json_object_set_new(c, "frozen_message", cli_json_string(v->frozen_message));
                json_object_set_new(o, "consistency", c);
                state_consistency_free(v);
        }
        json_t *a = json_array();
        state_repair_list l = {0};
        if (state_repair_list_for(db, cluster, 5, &l) == 0)
                for (size_t i = 0; i < l.n; i++) {
                        const state_repair *r = l.items[i];
                        json_array_append_new(
                            a,
                            json_pack("{s:I, s:s, s:o, s:o, s:o, s:s, s:s, s:o, s:o, s:o}", "id",
                                      (json_int_t)r->id, "kind", r->kind, "member",
                                      cli_json_string(r->member), "requested_by",
                                      cli_json_string(r->requested_by), "requested",
                                      cli_json_time(r->requested_ms), "result", r->result, "phase",
                                      r->phase, "replacement", cli_json_string(r->replacement),
                                      "error", cli_json_string(r->error), "finished",
                                      cli_json_time(r->finished_ms)));
                }
        state_repair_list_release(&l);
        json_object_set_new(o, "repairs", a);
}

static void print_json_line(json_t *o)
{
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s)
                puts(s);
        free(s);
        json_decref(o);
}

/* The verdicts on cluster in l, as JSON: [{"source", "verdict", "message", "commit", "time"}]. */
static json_t *verdicts_json(const state_verdict_list *l, const char *cluster)
{
        json_t *a = json_array();
        for (size_t i = 0; i < l->n; i++) {
                const state_verdict *v = l->items[i];
                if (!streq(v->cluster, cluster))
                        continue;
                json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:o,s:o}", "source", v->source,
                                                   "verdict", v->verdict, "message", v->message,
                                                   "commit", cli_json_string(v->commit), "time",
                                                   cli_json_time(v->time_ms)));
        }
        return a;
}

static bool listed(const state_cluster_list *cl, const char *cluster)
{
        for (size_t i = 0; i < cl->n; i++)
                if (streq(cl->items[i]->name, cluster))
                        return true;
        return false;
}

/*
 * "Not as committed:" and a line per verdict (every cluster's, or one's):
 * "  prod/main: held at 4f1b2c3d4e5f (source platform): waiting for ...".
 */
static void print_verdicts(const state_verdict_list *l, const char *cluster)
{
        bool head = false;
        for (size_t i = 0; i < l->n; i++) {
                const state_verdict *v = l->items[i];
                if (cluster && !streq(v->cluster, cluster))
                        continue;
                if (!head)
                        printf("\nNot as committed (the operator's policy, or spec.dependsOn):\n");
                head = true;
                _cleanup_free_ char *name = clean(v->cluster), *from = clean(v->source);
                _cleanup_free_ char *message = clean(v->message);
                _cleanup_free_ char *at = v->commit ? str_escape(v->commit) : NULL;
                if (at)
                        printf("  %s: %s at %.12s (source %s): %s\n", name, v->verdict, at, from,
                               message);
                else
                        printf("  %s: %s (source %s): %s\n", name, v->verdict, from, message);
        }
}

/*
 * The holds on a cluster (reconciler/hold.h) as the pass judges them now,
 * from the spec gitcd works toward and the state store: 0 with *ret
 * filled, or -errno (the spec does not parse: no holds shown).
 */
static int holds_of(state_db *db, const state_cluster *c, int64_t now, hold_state *ret)
{
        const char *text = state_cluster_spec_json(c);
        if (!text)
                return -ENOENT;
        json_t *j = json_loads(text, 0, NULL);
        etcd_cluster *spec = NULL;
        diag_list diags = {0};
        int r = j ? spec_from_json(j, c->name, &spec, &diags) : -EINVAL;
        json_decref(j);
        diag_list_release(&diags);
        if (r >= 0)
                r = hold_read(db, c->name, spec, now, ret);
        etcd_cluster_free(spec);
        return r;
}

/* "Holds:" lines: suspended, the windows, the override, a step held since when. */
static void print_holds(state_db *db, const state_cluster *c, int64_t now)
{
        hold_state hs;
        if (holds_of(db, c, now, &hs) < 0)
                return;
        _cleanup_(state_hold_freep) state_hold *h = NULL;
        (void)state_hold_get(db, c->name, &h);
        char when[40];
        bool any = hs.suspended || hs.windows || (h && h->held);
        if (any)
                printf("\n");
        if (hs.suspended) {
                _cleanup_free_ char *msg = clean(hs.suspended_message);
                printf("Suspended: %s\n", msg);
        }
        if (hs.windows && hs.in_window) {
                hold_format_minute(hs.window_end_ms, when, sizeof(when));
                printf("Windows:   inside a maintenance window until %s\n", when);
        } else if (hs.windows && hs.next_window_ms) {
                hold_format_minute(hs.next_window_ms, when, sizeof(when));
                printf("Windows:   outside the maintenance windows; disruptive steps wait for "
                       "the next at %s\n",
                       when);
        } else if (hs.windows) {
                printf("Windows:   outside the maintenance windows; none opens within five "
                       "years\n");
        }
        if (hs.windows && hs.override_active)
                printf("Override:  a maintenance override is in force until the cluster "
                       "converges\n");
        else if (hs.override_spent_ms) {
                hold_format_minute(hs.override_spent_ms, when, sizeof(when));
                printf("Override:  the maintenance override token was spent at %s\n", when);
        }
        if (h && h->held) {
                format_rfc3339(h->held_ms, when, sizeof(when));
                _cleanup_free_ char *word = clean(h->held);
                printf("Held:      a step held (%s) since %s\n", word, when);
        }
        hold_state_release(&hs);
}

static void holds_json(state_db *db, const state_cluster *c, int64_t now, json_t *o)
{
        hold_state hs;
        if (holds_of(db, c, now, &hs) < 0)
                return;
        _cleanup_(state_hold_freep) state_hold *h = NULL;
        (void)state_hold_get(db, c->name, &h);
        json_object_set_new(o, "suspended", json_boolean(hs.suspended));
        json_object_set_new(o, "suspended_message", cli_json_string(hs.suspended_message));
        json_object_set_new(o, "maintenance_windows", json_boolean(hs.windows));
        json_object_set_new(o, "in_window", json_boolean(hs.windows && hs.in_window));
        json_object_set_new(o, "next_window", cli_json_time(hs.next_window_ms));
        json_object_set_new(o, "override_spent", cli_json_time(hs.override_spent_ms));
        json_object_set_new(o, "held", cli_json_string(h ? h->held : NULL));
        json_object_set_new(o, "held_since", cli_json_time(h && h->held ? h->held_ms : 0));
        hold_state_release(&hs);
}

/* One cluster's object of `gitcd status -o json` (and of an incident bundle). */
static json_t *status_json(state_db *db, const state_cluster *c, const state_member_list *ml,
                           const state_cert_list *certs, const state_maint_run *run,
                           const state_audit_failures *af, const state_verdict_list *vl,
                           int64_t now)
{
        json_t *o = cluster_json(c, ml, certs, run, af);
        recovery_json(db, c->name, o);
        restores_json(db, c->name, o);
        takeover_json(db, c->name, o);
        ca_rotation_json(db, c->name, o);
        json_object_set_new(o, "intake", verdicts_json(vl, c->name));
        consistency_json(db, c->name, o);
        machines_json(db, c->name, o);
        holds_json(db, c, now, o);
        return o;
}

json_t *cli_status_cluster_json(state_db *db, const char *name)
{
        state_cluster *c = NULL;
        if (state_cluster_get(db, name, &c) < 0)
                return NULL;
        state_verdict_list vl = {0};
        if (state_verdict_list_get(db, name, &vl) < 0)
                vl = (state_verdict_list){0};
        state_audit_failures af = {0};
        (void)state_audit_failures_get(db, &af);
        state_member_list ml = {0};
        if (state_member_list_for(db, name, false, &ml) < 0)
                ml = (state_member_list){0};
        state_cert_list certs = {0};
        if (state_certs_list(db, name, &certs) < 0)
                certs = (state_cert_list){0};
        state_maint_run_list runs = {0};
        if (state_maint_run_list_for(db, name, 1, &runs) < 0)
                runs = (state_maint_run_list){0};
        json_t *o =
            status_json(db, c, &ml, &certs, runs.n ? runs.items[0] : NULL, &af, &vl, now_wall_ms());
        state_member_list_release(&ml);
        state_cert_list_release(&certs);
        state_maint_run_list_release(&runs);
        state_audit_failures_release(&af);
        state_verdict_list_release(&vl);
        state_cluster_free(c);
        return o;
}

static int show(state_db *db, const char *name, bool json)
{
        state_cluster_list cl = {0};
        state_verdict_list vl = {0};
        int r = state_verdict_list_get(db, name, &vl);
        if (r < 0)
                vl = (state_verdict_list){0}; /* a store from before verdicts were kept */
        if (name) {
                state_cluster *c = NULL;
                r = state_cluster_get(db, name, &c);
                if (r == -ENOENT && vl.n > 0) {
                        /* never taken in: only its verdicts say why */
                        if (json)
                                print_json_line(json_pack("{s:s,s:o}", "name", name, "intake",
                                                          verdicts_json(&vl, name)));
                        else
                                print_verdicts(&vl, name);
                        state_verdict_list_release(&vl);
                        return 0;
                }
                if (r < 0) {
                        state_verdict_list_release(&vl);
                        return r;
                }
                cl.items = xmalloc(sizeof(*cl.items));
                cl.items[0] = c;
                cl.n = 1;
        } else {
                r = state_cluster_list_all(db, &cl);
                if (r < 0)
                        return r;
        }
        state_audit_failures af = {0};
        r = state_audit_failures_get(db, &af);
        if (r < 0) {
                state_cluster_list_release(&cl);
                state_verdict_list_release(&vl);
                return r;
        }
        int64_t now = now_wall_ms();
        table t = {.cols = ARRAY_SIZE(cluster_heads)};
        if (!json && !name) {
                if (cl.n == 0)
                        fprintf(stderr, "gitcd status: no clusters in %s\n", state_path(db));
                else
                        table_add(&t, cluster_heads);
        }
        for (size_t i = 0; i < cl.n && r >= 0; i++) {
                state_member_list ml = {0};
                r = state_member_list_for(db, cl.items[i]->name, false, &ml);
                if (r < 0)
                        break;
                /* Certificates: none recorded (or a store from before they were) shows none. */
                state_cert_list certs = {0};
                if (state_certs_list(db, cl.items[i]->name, &certs) < 0)
                        certs = (state_cert_list){0};
                /* The last defragmentation run, when there is one. */
                state_maint_run_list runs = {0};
                if (state_maint_run_list_for(db, cl.items[i]->name, 1, &runs) < 0)
                        runs = (state_maint_run_list){0};
                const state_maint_run *run = runs.n ? runs.items[0] : NULL;
                if (json) {
                        print_json_line(
                            status_json(db, cl.items[i], &ml, &certs, run, &af, &vl, now));
                } else if (name) {
                        print_detail(cl.items[i], &ml, &certs, run, now);
                        print_holds(db, cl.items[i], now);
                        print_recovery(db, cl.items[i]->name);
                        print_restores(db, cl.items[i]->name);
                        print_takeover(db, cl.items[i]->name);
                        print_ca_rotation(db, cl.items[i]->name);
                        print_consistency(db, cl.items[i]->name);
                        print_machines(db, cl.items[i]->name);
                } else
                        cluster_row(&t, cl.items[i], &ml, now);
                state_member_list_release(&ml);
                state_cert_list_release(&certs);
                state_maint_run_list_release(&runs);
        }
        if (t.rows > 0)
                table_print(&t, "");
        free(t.cells);
        /* clusters with a verdict but no record: never taken in */
        for (size_t i = 0; json && !name && r >= 0 && i < vl.n; i++) {
                const char *cluster = vl.items[i]->cluster;
                if (listed(&cl, cluster) || (i > 0 && streq(vl.items[i - 1]->cluster, cluster)))
                        continue;
                print_json_line(
                    json_pack("{s:s,s:o}", "name", cluster, "intake", verdicts_json(&vl, cluster)));
        }
        if (r >= 0 && !json)
                print_verdicts(&vl, name);
        if (r >= 0 && !json)
                print_audit_failures(&af);
        state_audit_failures_release(&af);
        state_cluster_list_release(&cl);
        state_verdict_list_release(&vl);
        return r;
}

int cmd_status(int argc, char **argv)
{
        const char *state_flag = NULL, *config = NULL;
        int json = 0;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FMT",
             .dest = &json,
             .choices = cli_output_formats,
             .help = "table (default) or json",
             .bad = "-o takes table or json",
             .show_arg = true},
            CLI_RECORDS_ROWS(&state_flag, &config),
        };
        const cli_command cmd = {.prog = "gitcd status",
                                 .usage = usage_text,
                                 .footer = "",
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 20};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        const char *name = NULL;
        if (optind < argc)
                name = argv[optind++];
        if (optind < argc) {
                fprintf(stderr, "gitcd status: unexpected argument '%s'\n", argv[optind]);
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        if (name && !state_cluster_name_valid(name)) {
                fprintf(stderr, "gitcd status: clusters are named namespace/name, not '%s'\n",
                        name);
                return EXIT_USAGE;
        }

        _cleanup_(ops_config_freep) ops_config *file = NULL;
        if (cli_daemon_config(config, OPS_CONFIG_DEFAULT_PATH, state_flag != NULL, "gitcd status",
                              &file) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *path = cli_state_path(state_flag, file);
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_ONLY, &db);
        /* one snapshot for the clusters and their members */
        if (r >= 0)
                r = state_begin(db);
        if (r >= 0) {
                r = show(db, name, json);
                (void)state_rollback(db);
        }
        if (r < 0)
                fprintf(stderr, "gitcd status: %s\n", state_last_error());
        state_close(db);
        if (r >= 0 && (fflush(stdout) != 0 || ferror(stdout))) {
                fprintf(stderr, "gitcd status: writing the output failed\n");
                return EXIT_FAIL;
        }
        return r < 0 ? EXIT_FAIL : EXIT_OK;
}

/*
 * The rules of the consistency check (reconciler/proof.h): the revision,
 * the majority, the freeze gate and the DataConsistent condition. Pure:
 * no I/O, no clock (the caller passes the time), so every rule is tested
 * table by table (tests/reconciler/test-proof.c).
 *
 * Why majority by quorum: a group of equal hashes that holds a quorum of
 * the voters is the group every write acknowledged since the divergence
 * went through (a write needs a quorum), so its data is the cluster's. Two
 * groups can never both hold one. Anything less (1-1 of two members, three
 * different hashes) gives no side the right to be copied: gitcd freezes and
 * names everyone.
 */
#include <assert.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/proof.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

int64_t proof_revision(const proof_answer *a, size_t n)
{
        int64_t rev = 0;
        for (size_t i = 0; i < n; i++) {
                if (a[i].revision <= 0)
                        return 0;
                if (rev == 0 || a[i].revision < rev)
                        rev = a[i].revision;
        }
        return rev;
}

const char *proof_verdict_name(proof_verdict v)
{
        switch (v) {
        case PROOF_AGREE:
                return "agree";
        case PROOF_MINORITY:
                return "minority";
        case PROOF_NO_MAJORITY:
                return "no-majority";
        case PROOF_INCONCLUSIVE:
                return "inconclusive";
        }
        return "unknown";
}

void proof_result_release(proof_result *r)
{
        if (!r)
                return;
        free(r->hashes);
        free(r->majority);
        free(r->minority);
        free(r->message);
        memset(r, 0, sizeof(*r));
}

static char *hashes_json(const proof_answer *a, size_t n)
{
        json_t *o = json_object();
        for (size_t i = 0; i < n; i++) {
                if (!a[i].hashed)
                        continue;
                char hex[9];
                snprintf(hex, sizeof(hex), "%08" PRIx32, a[i].hash);
                json_object_set_new(o, a[i].name, json_string(hex));
        }
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        return s;
}

/* The names of the answers whose hash is (in true) or is not (in false) h, comma-separated. */
static char *names_with(const proof_answer *a, size_t n, uint32_t h, bool in)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < n; i++)
                if ((a[i].hash == h) == in)
                        sb_printf(&sb, "%s%s", sb.len ? "," : "", a[i].name);
        return sb_detach(&sb);
}

/* "demo-0 9e1b44d0, demo-1 3a0f12cc" */
static char *names_and_hashes(const proof_answer *a, size_t n)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < n; i++)
                sb_printf(&sb, "%s%s %08" PRIx32, i ? ", " : "", a[i].name, a[i].hash);
        return sb_detach(&sb);
}

/* Commas to ", " for a sentence. */
static char *spaced(const char *list)
{
        strbuf sb = STRBUF_INIT;
        for (const char *p = list; p && *p; p++) {
                sb_appendc(&sb, *p);
                if (*p == ',')
                        sb_appendc(&sb, ' ');
        }
        return sb_detach(&sb);
}

void proof_judge(const proof_answer *a, size_t n, int voters, int64_t revision, proof_result *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->revision = revision;
        for (size_t i = 0; i < n; i++) {
                if (!a[i].hashed) {
                        ret->verdict = PROOF_INCONCLUSIVE;
                        ret->message = xasprintf("%s did not answer at revision %" PRId64,
                                                 a[i].name, revision);
                        return;
                }
                if (a[i].compact_revision != a[0].compact_revision) {
                        ret->verdict = PROOF_INCONCLUSIVE;
                        ret->message = xasprintf(
                            "%s and %s hashed above different compactions (%" PRId64 ", %" PRId64
                            "); compared again later",
                            a[0].name, a[i].name, a[0].compact_revision, a[i].compact_revision);
                        return;
                }
        }
        if (n == 0) {
                ret->verdict = PROOF_INCONCLUSIVE;
                ret->message = xstrdup("no member to compare");
                return;
        }
        ret->compact_revision = a[0].compact_revision;
        ret->hashes = hashes_json(a, n);

        /* The largest group of equal hashes (the first of two of a size). */
        size_t best = 0, best_n = 0;
        for (size_t i = 0; i < n; i++) {
                size_t same = 0;
                for (size_t j = 0; j < n; j++)
                        same += a[j].hash == a[i].hash;
                if (same > best_n) {
                        best = i;
                        best_n = same;
                }
        }
        uint32_t h = a[best].hash;
        if (best_n == n) {
                ret->verdict = PROOF_AGREE;
                ret->majority = names_with(a, n, h, true);
                ret->message =
                    xasprintf("%zu member%s agree%s at revision %" PRId64 " (hash %08" PRIx32 ")",
                              n, n == 1 ? "" : "s", n == 1 ? "s" : "", revision, h);
                return;
        }
        size_t quorum = (size_t)(voters > 0 ? voters : (int)n) / 2 + 1;
        if (best_n >= quorum) {
                ret->verdict = PROOF_MINORITY;
                ret->majority = names_with(a, n, h, true);
                ret->minority = names_with(a, n, h, false);
                _cleanup_free_ char *min = spaced(ret->minority), *maj = spaced(ret->majority);
                strbuf odd = STRBUF_INIT;
                for (size_t i = 0; i < n; i++)
                        if (a[i].hash != h)
                                sb_printf(&odd, "%s%08" PRIx32, odd.len ? ", " : "", a[i].hash);
                ret->message = xasprintf("data of %s differs from %s at revision %" PRId64
                                         " (hash %s; the majority's %08" PRIx32 ")",
                                         min, maj, revision, sb_str(&odd), h);
                sb_release(&odd);
                return;
        }
        ret->verdict = PROOF_NO_MAJORITY;
        strbuf all = STRBUF_INIT;
        for (size_t i = 0; i < n; i++)
                sb_printf(&all, "%s%s", i ? "," : "", a[i].name);
        ret->minority = sb_detach(&all);
        _cleanup_free_ char *each = names_and_hashes(a, n);
        ret->message = xasprintf("the members' data differs at revision %" PRId64
                                 " and no side holds a quorum of the %d voters (%s): no side "
                                 "is trusted",
                                 revision, voters, each);
}

int64_t proof_next_check_ms(const state_consistency *row, int64_t interval_ms)
{
        if (!row)
                return 0;
        bool failed = row->attempt_ms > row->checked_ms && row->attempt_error;
        int64_t retry = failed ? row->attempt_ms + MIN(PROOF_RETRY_MS, interval_ms) : 0;
        if (row->checked_ms == 0 || row->due)
                return retry;
        return MAX(retry, row->checked_ms + interval_ms);
}

bool proof_step_copies(const step *s)
{
        return s->kind == STEP_ADD_LEARNER ||
               (s->kind == STEP_REMOVE_MEMBER && streq_ptr(s->reason, REASON_REPLACING_MEMBER));
}

bool proof_fresh(const state_consistency *row, int64_t now_ms)
{
        return row && streq_ptr(row->verdict, "agree") && !row->due && !row->frozen_ms &&
               row->checked_ms > 0 && now_ms - row->checked_ms <= PROOF_FRESH_MS;
}

bool proof_listed(const char *list, const char *name)
{
        if (isempty(list) || isempty(name))
                return false;
        size_t n = strlen(name);
        for (const char *p = list; p && *p;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len == n && strneq(p, name, n))
                        return true;
                p = end ? end + 1 : NULL;
        }
        return false;
}

static const obs_member *obs_find(const observation *obs, const char *name)
{
        for (size_t i = 0; name && i < obs->n; i++)
                if (streq(obs->members[i].name, name))
                        return &obs->members[i];
        return NULL;
}

static const obs_member *obs_by_id(const observation *obs, uint64_t id)
{
        for (size_t i = 0; id && i < obs->n; i++)
                if (obs->members[i].in_etcd && obs->members[i].id == id)
                        return &obs->members[i];
        return NULL;
}

/* The ready voter outside the minority with the lowest ordinal, other than not. */
static const obs_member *majority_leader(const proof_freeze *f, const observation *obs,
                                         const char * not )
{
        const obs_member *best = NULL;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!m->in_etcd || m->learner || m->runtime != MEMBER_READY ||
                    proof_listed(f->minority, m->name) || streq_ptr(m->name, not ))
                        continue;
                if (!best || m->ordinal < best->ordinal)
                        best = m;
        }
        return best;
}

static void hold(step *s, const char *why)
{
        _cleanup_free_ char *msg = xasprintf("frozen (%s): %s waits", why, s->message);
        s->kind = STEP_WAIT;
        s->reason = REASON_FROZEN;
        str_assign(&s->message, xstrdup(msg));
}

/*
 * The step is the repair's: leadership must be outside the minority first.
 * true: s goes as it is; false: s became that move.
 */
static bool lead_from_majority(const proof_freeze *f, const observation *obs, step *s,
                               const char *leaving)
{
        const obs_member *leader = obs_by_id(obs, obs->leader_id);
        if (!leader || !proof_listed(f->minority, leader->name))
                return true;
        const obs_member *to = majority_leader(f, obs, leaving);
        if (!to)
                return true; /* decide's quorum rules will wait anyway */
        s->kind = STEP_MOVE_LEADER;
        s->member = to->name;
        s->member_id = to->id;
        s->ordinal = to->ordinal;
        s->reason = REASON_REPLACING_MEMBER;
        str_assign(&s->message,
                   xasprintf("move leadership from %s (minority) to %s before the repair goes on",
                             leader->name, to->name));
        return true;
}

bool proof_gate(const proof_freeze *f, const observation *obs, step *s)
{
        if (!f->frozen)
                return true;
        const char *why = streq_ptr(f->cause, "alarm")         ? "etcd raised CORRUPT"
                          : streq_ptr(f->cause, "no-majority") ? "no side holds a quorum"
                                                               : "members' data differs";
        const obs_member *m = obs_find(obs, s->member);
        bool repair = f->repair_member != NULL;
        bool replaced_gone = repair && !(obs_find(obs, f->repair_member) &&
                                         obs_find(obs, f->repair_member)->in_etcd);
        bool is_replacement =
            repair && f->repair_replacement && s->member && streq(s->member, f->repair_replacement);
        switch (s->kind) {
        case STEP_WAIT:
        case STEP_RENEW_CERTS:
                return true;
        case STEP_START_MEMBER:
                /* on its own data; a new member (it would copy the leader's) only as the
                 * replacement */
                if (!m || !m->unstarted || is_replacement)
                        return true;
                break;
        case STEP_PROMOTE:
                if (is_replacement)
                        return true;
                break;
        case STEP_MOVE_LEADER: {
                if (!repair)
                        break;
                const obs_member *to = m;
                if (to && !proof_listed(f->minority, to->name))
                        return true;
                const obs_member *other = majority_leader(f, obs, f->repair_member);
                if (!other)
                        break;
                s->member = other->name;
                s->member_id = other->id;
                s->ordinal = other->ordinal;
                str_assign(
                    &s->message,
                    xasprintf(
                        "move leadership to %s (outside the minority) before the repair goes on",
                        other->name));
                return true;
        }
        case STEP_REMOVE_MEMBER:
                if (repair && streq_ptr(s->member, f->repair_member))
                        return lead_from_majority(f, obs, s, f->repair_member);
                break;
        case STEP_DELETE_MEMBER:
                if (repair && streq_ptr(s->member, f->repair_member))
                        return true;
                break;
        case STEP_ADD_LEARNER:
                /* once: a replacement that never joined (its MemberAdd failed) is added again */
                if (repair && replaced_gone &&
                    (!f->repair_replacement || !obs_find(obs, f->repair_replacement)))
                        return lead_from_majority(f, obs, s, NULL);
                break;
        case STEP_CONVERGED:
        case STEP_STOP_MEMBER:
        case STEP_RESTART_MEMBER:
        case STEP_START_SEED:
        case STEP_BOOTSTRAP:
                break;
        }
        if (s->kind == STEP_CONVERGED)
                return true; /* nothing to hold: the pass says frozen itself */
        hold(s, why);
        return false;
}

void proof_check_condition(const state_consistency *row, proof_condition *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (row && row->frozen_ms) {
                ret->status = "False";
                ret->reason = streq_ptr(row->frozen_cause, "alarm")         ? "CorruptAlarm"
                              : streq_ptr(row->frozen_cause, "no-majority") ? "NoMajority"
                                                                            : "Mismatch";
                ret->message = xstrdup(row->frozen_message ? row->frozen_message : "frozen");
                return;
        }
        if (!row || row->checked_ms == 0 || !streq_ptr(row->verdict, "agree")) {
                ret->status = "Unknown";
                ret->reason = "NotChecked";
                ret->message = xstrdup("the members' data has not been compared yet");
                return;
        }
        ret->status = "True";
        ret->reason = "Agree";
        size_t n = 0;
        json_t *h = row->hashes ? json_loads(row->hashes, 0, NULL) : NULL;
        n = h ? json_object_size(h) : 0;
        json_decref(h);
        ret->message = n == 1 ? xasprintf("a single member at revision %" PRId64
                                          ": no other to compare its data with",
                                          row->revision)
                              : xasprintf("%zu members hold the same data at revision %" PRId64, n,
                                          row->revision);
}

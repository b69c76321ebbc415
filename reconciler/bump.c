/*
 * The revision bump of a restore (reconciler/bump.h): one function from
 * what gitcd recorded to a number and a sentence saying how it was chosen.
 * Pure: the caller reads the records and the clock.
 */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "reconciler/bump.h"
#include "util/xalloc.h"

/* An age for people: "45 s", "12 min", "5 h", "9 d" (rounded). Newly allocated. */
static char *age_text(int64_t ms)
{
        int64_t s = ms / 1000;
        if (s < 120)
                return xasprintf("%" PRId64 " s", s);
        if (s < 2 * 3600)
                return xasprintf("%" PRId64 " min", (s + 30) / 60);
        if (s < 2 * 86400)
                return xasprintf("%" PRId64 " h", (s + 1800) / 3600);
        return xasprintf("%" PRId64 " d", (s + 43200) / 86400);
}

void bump_decision_release(bump_decision *d)
{
        if (!d)
                return;
        free(d->sizing);
        d->sizing = NULL;
}

void bump_decide(const bump_inputs *in, bump_decision *out)
{
        assert(in && out);
        const char *who = in->asked_by ? in->asked_by : "bumpRevision";
        if (in->want.mode != BUMP_AUTO) {
                out->amount = in->want.mode == BUMP_FIXED ? in->want.amount : 0;
                int64_t past = in->seen_revision - in->snapshot_revision;
                _cleanup_free_ char *short_of =
                    past > out->amount
                        ? xasprintf("; short of revision %" PRId64 ", which the cluster reached",
                                    in->seen_revision)
                        : xstrdup("");
                out->sizing = out->amount > 0
                                  ? xasprintf("%" PRId64 " (%s%s)", out->amount, who, short_of)
                                  : xasprintf("none (%s%s)", who, short_of);
                return;
        }
        /* Each way of estimating says what it found; the larger estimate wins. */
        double estimate = 0;
        _cleanup_free_ char *by_rate = NULL, *by_seen = NULL;
        int64_t span_ms = in->newer_ms - in->older_ms;
        int64_t span_rev = in->newer_revision - in->older_revision;
        if (in->older_ms > 0 && span_ms > 0 && span_rev >= 0 && in->snapshot_ms > 0) {
                double rate = (double)span_rev * 1000.0 / (double)span_ms;
                int64_t age_ms = in->now_ms > in->snapshot_ms ? in->now_ms - in->snapshot_ms : 0;
                _cleanup_free_ char *age = age_text(age_ms);
                estimate = rate * (double)age_ms / 1000.0;
                by_rate = xasprintf(
                    "%.1f revisions/s between its two newest snapshots × %s since this one", rate,
                    age);
        } else {
                by_rate = xstrdup(in->snapshot_ms > 0
                                      ? "no write rate known (fewer than two snapshots)"
                                      : "no write rate known (a snapshot gitcd did not take)");
        }
        if (in->seen_revision > in->snapshot_revision) {
                int64_t gap = in->seen_revision - in->snapshot_revision;
                if ((double)gap > estimate)
                        estimate = (double)gap;
                by_seen = xasprintf("; the cluster reached revision %" PRId64 ", %" PRId64
                                    " past the snapshot",
                                    in->seen_revision, gap);
        } else {
                by_seen = xstrdup("");
        }
        double want = estimate * BUMP_AUTO_SAFETY;
        if (!isfinite(want) || want > (double)GITCD_MAX_REVISION_BUMP)
                want = (double)GITCD_MAX_REVISION_BUMP;
        int64_t sized = (int64_t)ceil(want);
        if (sized <= BUMP_AUTO_FLOOR && estimate <= 0) {
                out->amount = BUMP_AUTO_FLOOR;
                out->sizing = xasprintf("auto (%s): %" PRId64 ", etcd's recommended bump (%s%s)",
                                        who, out->amount, by_rate, by_seen);
        } else if (sized <= BUMP_AUTO_FLOOR) {
                out->amount = BUMP_AUTO_FLOOR;
                out->sizing =
                    xasprintf("auto (%s): %" PRId64
                              ", etcd's recommended bump (%s%s; × %d = %" PRId64 " is less)",
                              who, out->amount, by_rate, by_seen, BUMP_AUTO_SAFETY, sized);
        } else {
                out->amount = sized;
                out->sizing = xasprintf("auto (%s): %" PRId64 " (%s%s; × %d)", who, out->amount,
                                        by_rate, by_seen, BUMP_AUTO_SAFETY);
        }
}

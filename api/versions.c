/*
 * The etcd version policy as one table (see api/versions.h for the rules).
 *
 * A row per etcd minor gitcd runs: the lowest patch a member must run before
 * the cluster may move to the next minor (etcd's upgrade guide: "make sure
 * that all of your 3.5 members are updated to 3.5.26 or later" before 3.6),
 * and how etcd downgrades out of it. Everything a refusal says comes from
 * this table, so adding a minor (3.7) is adding a row.
 */
#include <stdlib.h>
#include <string.h>

#include "api/versions.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

typedef struct minor_rule {
        int major, minor;
        /* The lowest patch of this minor that may move to the next minor; 0: any. */
        int min_patch_before_next;
        const char *min_patch_why;
        /* How etcd leaves this minor for the one below, NULL: it does not. */
        const char *downgrade_path;
        /*
         * The first patch whose restore tool takes --bump-revision and
         * --mark-compacted (etcd's CHANGELOG-3.5 at v3.5.10, CHANGELOG-3.4 at
         * v3.4.27; 3.6 has them from its first release); 0: every patch.
         */
        int restore_bump_from_patch;
} minor_rule;

static const minor_rule rules[] = {
    {3, 4, 0, NULL, NULL, 27},
    {3, 5, 26,
     "etcd's upgrade guide asks every 3.5 member to run 3.5.26 or later before 3.6 "
     "(3.5.24 to 3.5.26 fix upgrade blockers)",
     NULL, 10},
    {3, 6, 0, NULL,
     "etcd downgrades 3.6 to 3.5 only through its downgrade API (etcdctl downgrade "
     "validate/enable 3.5) before the binaries change, which gitcd does not drive",
     0},
};

static const minor_rule *rule_of(int major, int minor)
{
        for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
                if (rules[i].major == major && rules[i].minor == minor)
                        return &rules[i];
        return NULL;
}

bool version_supported(const semver *v)
{
        return rule_of(v->major, v->minor) != NULL;
}

const char *version_supported_list(void)
{
        return "3.4, 3.5 and 3.6";
}

bool version_has_restore_bump(const semver *v, char **ret_first)
{
        const minor_rule *r = rule_of(v->major, v->minor);
        if (ret_first)
                *ret_first = NULL;
        if (!r)
                return false;
        if (v->patch >= r->restore_bump_from_patch)
                return true;
        if (ret_first)
                *ret_first = xasprintf("%d.%d.%d", r->major, r->minor, r->restore_bump_from_patch);
        return false;
}

const char *version_move_name(version_move m)
{
        switch (m) {
        case VERSION_SAME:
                return "no change";
        case VERSION_PATCH_UPGRADE:
                return "patch upgrade";
        case VERSION_PATCH_DOWNGRADE:
                return "patch downgrade";
        case VERSION_MINOR_UPGRADE:
                return "minor upgrade";
        case VERSION_ROLLBACK:
                return "rollback of an unfinished upgrade";
        case VERSION_REFUSED:
                return "refused";
        }
        return "unknown";
}

static version_move refuse(char **ret_reason, char *why)
{
        *ret_reason = why;
        return VERSION_REFUSED;
}

/* One move judged alone (no rollback), from a version to another. */
static version_move check_one(const semver *a, const semver *b, char **ret_reason)
{
        if (a->major != b->major)
                return refuse(ret_reason,
                              xasprintf("%d.%d.%d → %d.%d.%d changes the major version; etcd has "
                                        "no in-place path between major versions (create a new "
                                        "cluster and restore a snapshot into it)",
                                        a->major, a->minor, a->patch, b->major, b->minor,
                                        b->patch));
        if (a->minor == b->minor) {
                int c = semver_cmp(a, b);
                return c == 0  ? VERSION_SAME
                       : c < 0 ? VERSION_PATCH_UPGRADE
                               : VERSION_PATCH_DOWNGRADE;
        }
        if (b->minor > a->minor + 1) {
                strbuf steps = STRBUF_INIT;
                for (int m = a->minor + 1; m < b->minor; m++)
                        sb_printf(&steps, "%s%d.%d.x", m == a->minor + 1 ? "" : ", then to ",
                                  a->major, m);
                char *why = xasprintf("%d.%d.%d → %d.%d.%d skips minor %d.%d; upgrade to %s "
                                      "first, then to %d.%d.x",
                                      a->major, a->minor, a->patch, b->major, b->minor, b->patch,
                                      a->major, a->minor + 1, sb_str(&steps), b->major, b->minor);
                sb_release(&steps);
                return refuse(ret_reason, why);
        }
        if (b->minor == a->minor + 1) {
                const minor_rule *r = rule_of(a->major, a->minor);
                if (r && r->min_patch_before_next && a->patch < r->min_patch_before_next)
                        return refuse(ret_reason,
                                      xasprintf("%d.%d.%d → %d.%d.%d: %s; upgrade to %d.%d.%d or "
                                                "a later %d.%d patch first",
                                                a->major, a->minor, a->patch, b->major, b->minor,
                                                b->patch, r->min_patch_why, a->major, a->minor,
                                                r->min_patch_before_next, a->major, a->minor));
                return VERSION_MINOR_UPGRADE;
        }
        /* Down one minor or more. */
        if (a->minor - b->minor > 1)
                return refuse(ret_reason,
                              xasprintf("%d.%d.%d → %d.%d.%d downgrades more than one minor "
                                        "version; etcd downgrades one minor at a time",
                                        a->major, a->minor, a->patch, b->major, b->minor,
                                        b->patch));
        const minor_rule *r = rule_of(a->major, a->minor);
        if (r && r->downgrade_path)
                return refuse(ret_reason,
                              xasprintf("%d.%d.%d → %d.%d.%d is a downgrade: %s; keep %d.%d.x, "
                                        "or create a new %d.%d cluster and restore a snapshot "
                                        "into it",
                                        a->major, a->minor, a->patch, b->major, b->minor, b->patch,
                                        r->downgrade_path, a->major, a->minor, b->major, b->minor));
        return refuse(ret_reason,
                      xasprintf("%d.%d.%d → %d.%d.%d is a downgrade etcd does not support; keep "
                                "%d.%d.x, or create a new %d.%d cluster and restore a snapshot "
                                "into it",
                                a->major, a->minor, a->patch, b->major, b->minor, b->patch,
                                a->major, a->minor, b->major, b->minor));
}

version_move version_check_move(const semver *from, const semver *to, const semver *running,
                                size_t n_running, char **ret_reason)
{
        *ret_reason = NULL;
        /* Between versions (some member still runs another one than `from`)? */
        bool unfinished = false, back_to_running = false;
        for (size_t i = 0; i < n_running; i++) {
                if (semver_cmp(&running[i], from) != 0)
                        unfinished = true;
                if (semver_cmp(&running[i], to) == 0)
                        back_to_running = true;
        }
        if (unfinished && back_to_running && semver_cmp(from, to) > 0)
                return VERSION_ROLLBACK;

        version_move m = check_one(from, to, ret_reason);
        if (m == VERSION_REFUSED)
                return m;
        /* Every member must be able to make the move, not only the spec's version. */
        for (size_t i = 0; i < n_running; i++) {
                if (semver_cmp(&running[i], from) == 0)
                        continue;
                char *why = NULL;
                if (check_one(&running[i], to, &why) == VERSION_REFUSED) {
                        *ret_reason = xasprintf("members still run %d.%d.%d: %s", running[i].major,
                                                running[i].minor, running[i].patch, why);
                        free(why);
                        return VERSION_REFUSED;
                }
        }
        return m;
}

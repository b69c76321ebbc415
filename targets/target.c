/*
 * The small pieces every target shares: state names for messages and
 * status output, status release, and the last-error slot that each
 * operation fills before returning a negative errno.
 *
 * Design: the error message lives in the target object (not in a global),
 * so two targets in one process never overwrite each other's explanation.
 * target_free() dispatches to the implementation and then releases the
 * common part.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "pki/pki.h"
#include "render/layout.h"
#include "snapstore/restore.h"
#include "snapstore/tool.h"
#include "targets/locked.h"
#include "targets/target.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

const char *member_runtime_state_name(member_runtime_state s)
{
        switch (s) {
        case MEMBER_ABSENT:
                return "absent";
        case MEMBER_STOPPED:
                return "stopped";
        case MEMBER_STARTING:
                return "starting";
        case MEMBER_READY:
                return "ready";
        case MEMBER_CRASHED:
                return "crashed";
        case MEMBER_CRASH_LOOP:
                return "crash-loop";
        case MEMBER_DATA_LOST:
                return "data-lost";
        }
        return "unknown";
}

void target_certs_free(target_cert *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].member);
                free(v[i].surface);
                free(v[i].serial);
        }
        free(v);
}

void target_certs_add_ca(target_cert **v, size_t *n, const char *pki_dir)
{
        int64_t not_after = 0;
        char *serial = NULL;
        if (pki_ca_info(pki_dir, &not_after, &serial) < 0)
                return;
        *v = xrealloc(*v, (*n + 1) * sizeof(**v));
        (*v)[(*n)++] = (target_cert){.member = NULL,
                                     .surface = xstrdup(TARGET_CERT_CA),
                                     .not_after_ms = not_after,
                                     .serial = serial,
                                     .imported = pki_ca_imported(pki_dir)};
}

void target_member_status_release(target_member_status *s)
{
        if (!s)
                return;
        free(s->detail);
        s->detail = NULL;
        free(s->config_hash);
        s->config_hash = NULL;
        free(s->data_identity);
        s->data_identity = NULL;
}

char *target_data_marker_new(const char *member)
{
        assert(member);
        unsigned char raw[16];
        if (RAND_bytes(raw, sizeof(raw)) != 1)
                return NULL;
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, "member=%s\nid=", member);
        char hex[2 * sizeof(raw) + 1];
        hex_encode(raw, sizeof(raw), hex);
        sb_printf(&sb, "%s\n", hex);
        return sb_detach(&sb);
}

/* The value of the line "<key>=" in text, or NULL. */
static char *marker_value(const char *text, const char *key)
{
        size_t n = strlen(key);
        for (const char *p = text; p && *p;) {
                const char *end = strchr(p, '\n');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len > n && strneq(p, key, n) && p[n] == '=')
                        return xstrndup(p + n + 1, len - n - 1);
                p = end ? end + 1 : NULL;
        }
        return NULL;
}

char *target_data_marker_id(const char *text, const char *member)
{
        if (!text || !member)
                return NULL;
        _cleanup_free_ char *who = marker_value(text, "member");
        if (!streq_ptr(who, member))
                return NULL;
        char *id = marker_value(text, "id");
        if (isempty(id)) {
                free(id);
                return NULL;
        }
        return id;
}

bool target_name_is_component(const char *s)
{
        return !isempty(s) && !strchr(s, '/') && s[0] != '.';
}

const char *target_last_error(const target *t)
{
        if (t && t->ops && t->ops->last_error)
                return t->ops->last_error(t);
        if (!t || !t->last_error)
                return "";
        return t->last_error;
}

int(target_fail)(target *t, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        free(t->last_error);
        t->last_error = msg;
        return err;
}

void target_free(target *t)
{
        if (!t)
                return;
        char *err = t->last_error;
        t->last_error = NULL;
        if (t->ops && t->ops->free)
                t->ops->free(t);
        free(err);
}

bool target_holds_member(target *t, const etcd_cluster *c, const char *name)
{
        char **names = NULL;
        size_t n = 0;
        bool found = false;
        if (t->ops->list_members(t, c->namespace_, c->name, &names, &n) < 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                found = found || streq(names[i], name);
                free(names[i]);
        }
        free(names);
        return found;
}

int target_state_dir(const char *dir, char **ret_abs)
{
        int r = mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        *ret_abs = realpath(dir, NULL);
        return *ret_abs ? 0 : -errno;
}

void target_event_set_add(target_event_set *s, char *id)
{
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->ids[i], id)) {
                        free(id);
                        return;
                }
        s->ids = xrealloc(s->ids, (s->n + 1) * sizeof(char *));
        s->ids[s->n++] = id;
}

void target_event_set_take(target_event_set *s, char ***ret_ids, size_t *ret_n)
{
        *ret_ids = s->ids;
        *ret_n = s->n;
        *s = (target_event_set){0};
}

void target_event_set_release(target_event_set *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->ids[i]);
        free(s->ids);
        *s = (target_event_set){0};
}

static atomic_bool wake_pending;
/* A thread that waits on a target's behalf sees no wake (target_wake_ignore). */
static __thread bool wake_ignored;

void target_wake(void)
{
        atomic_store(&wake_pending, true);
}

bool target_wake_pending(void)
{
        return !wake_ignored && atomic_load(&wake_pending);
}

bool target_wake_take(void)
{
        return !wake_ignored && atomic_exchange(&wake_pending, false);
}

void target_wake_ignore(void)
{
        wake_ignored = true;
}

/* How often target_sleep looks for a wake. */
#define WAKE_SLICE_MS 20

int target_sleep(int64_t ms)
{
        int64_t deadline = now_mono_ms() + ms;
        int woken = 0;
        for (;;) {
                if (target_wake_take()) {
                        woken = 1;
                        break;
                }
                int64_t left = deadline - now_mono_ms();
                if (left <= 0)
                        break;
                msleep(MIN(left, WAKE_SLICE_MS));
        }
        return woken;
}

int target_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                      char **ret_key)
{
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!render_client_tls(c))
                return 0;
        assert(t->ops->client_tls);
        return t->ops->client_tls(t, c, ret_ca, ret_cert, ret_key);
}

const char *target_restore_initial_cluster(const member_plan *mp)
{
        if (!streq_ptr(mp->initial_cluster_state, "new") || isempty(mp->initial_cluster) ||
            !strchr(mp->initial_cluster, ','))
                return NULL;
        return mp->initial_cluster;
}

int target_restore_into(target *t, const membership_plan *p, size_t idx, const target_restore *rs,
                        const char *dir)
{
        const member_plan *mp = &p->members[idx];
        (void)rm_rf(dir);
        _cleanup_free_ char *error = NULL;
        snapshot_restore_opts o = {.tool = rs->tool,
                                   .snapshot = rs->snapshot,
                                   .data_dir = dir,
                                   .name = mp->name,
                                   .peer_url = mp->peer_url,
                                   .token = p->cluster_token,
                                   .initial_cluster = target_restore_initial_cluster(mp),
                                   .bump_revision = rs->bump_revision};
        /* a big snapshot takes a while: the tool works on this member's folder alone */
        target_blocking_begin();
        int r = snapshot_restore_dir(&o, &error);
        target_blocking_end();
        if (r < 0) {
                (void)rm_rf(dir);
                return target_fail(t, r, "member %s: %s", mp->name, error);
        }
        return 0;
}

int target_db_revision(target *t, const char *member, const char *tool, const char *db,
                       int64_t *ret_revision)
{
        snapshot_status st;
        _cleanup_free_ char *why = NULL;
        target_blocking_begin();
        int r = snapshot_file_status(tool, db, &st, &why);
        target_blocking_end();
        if (r < 0)
                return target_fail(t, -EBADMSG, "member %s: %s cannot read %s: %s", member, tool,
                                   db, why ? why : strerror(-r));
        *ret_revision = st.revision;
        return 0;
}

void takeover_survey_release(takeover_survey *s)
{
        free(s->source);
        free(s->endpoints);
        strv_free(s->objects);
        free(s->service);
        memset(s, 0, sizeof(*s));
}

void adopt_plan_release(adopt_plan *p)
{
        for (size_t i = 0; i < p->n; i++) {
                free(p->steps[i].member);
                free(p->steps[i].where);
                free(p->steps[i].running_name);
                free(p->steps[i].peer_url);
                free(p->steps[i].client_url);
                free(p->steps[i].replaces);
        }
        free(p->steps);
        free(p->initial_cluster);
        memset(p, 0, sizeof(*p));
}

char *target_text_tail(const char *text, size_t len, size_t max_bytes)
{
        if (len <= max_bytes)
                return xstrndup(text, len);
        const char *p = text + (len - max_bytes);
        const char *nl = memchr(p, '\n', max_bytes);
        if (nl && nl + 1 < text + len)
                p = nl + 1; /* start at a whole line */
        return xstrndup(p, (size_t)(text + len - p));
}

/*
 * The etcd client: typed calls on top of etcd/grpc.c, with endpoint
 * fail-over, authentication and error messages a person can act on.
 *
 * Design decisions to know:
 *  - Every call goes through rpc_any() (cluster-wide: any member may
 *    answer) or rpc_at() (one named member). Both share one deadline for
 *    the whole call, fail-overs included, so a dead or silent endpoint can
 *    never make a call wait longer than opts.call_timeout_ms.
 *  - Fail-over happens only when the request cannot have been acted on
 *    (connection refused, or no byte came back in time) or when a learner
 *    refused the call; an error etcd itself returned is final. A read may
 *    spend only half of the remaining time on one endpoint while others
 *    are left; a write keeps the whole deadline, so a write that timed out
 *    is never sent again (a MemberAdd never runs twice because of a retry
 *    here). After a fail-over the next call starts on the next endpoint.
 *  - A member that is not serving is skipped (etcd 3.5.14+ with
 *    --experimental-stop-grpc-service-on-defrag says NOT_SERVING on
 *    grpc.health.v1.Health/Check while it defragments). The client asks
 *    the health service only on failure, never before every call: a small
 *    read (one key, the member list, ...) first gets a short deadline
 *    (opts.read_first_try_ms, 1 s by default) while other endpoints are
 *    left, and when it passes with nothing back, or a call fails with
 *    UNAVAILABLE, the client asks that endpoint's health. A read over a
 *    prefix is not cut that early: etcd sends a Range's answer in one
 *    message at the end, so a slow large read looks exactly like a stuck
 *    member, and cutting it would send it to a second member. NOT_SERVING
 *    marks the member down for DOWN_MS, for every client of the process
 *    (etcd/marks.h): calls, writes as well as reads, try the endpoints
 *    that are up first (etcd/select.c), and an endpoint whose mark has run
 *    out is asked again before a call is sent there. etcd_defragment holds
 *    its member down in the same marks while its call runs, so the
 *    process's writes go elsewhere before they are sent, and lets the
 *    calls already sent there finish before it sends the Defragment. Whether a call
 *    already sent moves on is decided by the fail-over rule above,
 *    unchanged: a write that may have been applied is never sent again. A
 *    background prober was rejected (a client is single-threaded and its
 *    calls hold their connection only while they run); asking before each
 *    call costs a round trip when all is well.
 *  - Connections are the process's, not the client's (etcd/pool.h): a
 *    call takes the endpoint's idle connection for the client's TLS
 *    identity (or opens one) and hands it back when it ends, kept only
 *    after a whole gRPC answer and never from a member that says its
 *    server stopped. A short-lived client (one step, one status read)
 *    thus reuses the connection the cluster's observation keeps warm, and
 *    an idle cluster's connection is closed after etcd_pool_idle_ms().
 *  - With a user configured, the client authenticates lazily on the first
 *    call and once more when etcd says the token is invalid or stale.
 *  - The client talks only to the endpoints it was configured with, with
 *    the scheme given there. A URL a member advertises is never dialled:
 *    per-member calls must name a configured endpoint, and MoveLeader
 *    finds the leader among the configured endpoints (as etcdctl does).
 *    So neither the password nor the token goes anywhere else, and an
 *    https:// cluster is never spoken to in plain http:// because a member
 *    advertises it.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etcd/client.h"
#include "etcd/grpc.h"
#include "etcd/health.pb-c.h"
#include "etcd/marks.h"
#include "etcd/pool.h"
#include "etcd/rpc.pb-c.h"
#include "etcd/select.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAX_MESSAGE (64u * 1024u * 1024u)
/* The health question's own deadline. */
#define PROBE_MS 500
/* How long an endpoint that said NOT_SERVING is tried last. */
#define DOWN_MS 3000
/* How long a Defragment waits for the process's calls already sent to its member. */
#define DRAIN_MS 2000

struct endpoint {
        char *url;
        etcd_mark *mark; /* whether it serves, calls in flight: the process's (marks.h) */
};

struct etcd_client {
        struct endpoint *eps; /* the configured endpoints: the only ones ever dialled */
        size_t n_eps;
        size_t preferred; /* index of the endpoint that answered last */

        grpc_tls_opts tls;
        char *cacert;
        char *cert;
        char *key;
        char *user;
        char *password;
        char *fallback_password; /* tried once when password is refused */
        char *token;
        bool auth_not_enabled; /* Authenticate said auth is off: send no token */

        int call_timeout_ms;
        int dial_timeout_ms;
        int snapshot_timeout_ms;
        int read_first_try_ms;
        char *last_error;
        uint64_t not_serving;   /* times an endpoint was found not serving */
        uint64_t timer_wakeups; /* grpc_conn_timer_wakeups of this client's calls */
};

/* ---- small helpers ---- */

static void wipe_free(char *s)
{
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

static void set_error(etcd_client *c, const char *fmt, ...) _printf_(2, 3);
static void set_error(etcd_client *c, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        free(c->last_error);
        c->last_error = xvasprintf(fmt, ap);
        va_end(ap);
}

static void clear_error(etcd_client *c)
{
        free(c->last_error);
        c->last_error = NULL;
}

const char *etcd_client_last_error(const etcd_client *c)
{
        return c && c->last_error ? c->last_error : "";
}

uint64_t etcd_client_timer_wakeups(const etcd_client *c)
{
        return c->timer_wakeups;
}

uint64_t etcd_client_not_serving(const etcd_client *c)
{
        return c->not_serving;
}

size_t etcd_client_endpoint_count(const etcd_client *c)
{
        return c->n_eps;
}

const char *etcd_client_endpoint(const etcd_client *c, size_t i)
{
        return i < c->n_eps ? c->eps[i].url : NULL;
}

void etcd_member_id_format(uint64_t id, char buf[static 17])
{
        snprintf(buf, 17, "%016llx", (unsigned long long)id);
        /* etcdctl prints without leading zeros */
        size_t z = 0;
        while (buf[z] == '0' && buf[z + 1] != '\0')
                z++;
        memmove(buf, buf + z, 17 - z);
}

int etcd_member_id_parse(const char *s, uint64_t *ret_id)
{
        if (isempty(s))
                return -EINVAL;
        if (strneq(s, "0x", 2) || strneq(s, "0X", 2))
                s += 2;
        if (!*s || strlen(s) > 16)
                return -EINVAL;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                      (*p >= 'A' && *p <= 'F')))
                        return -EINVAL;
        *ret_id = strtoull(s, NULL, 16);
        return 0;
}

static const char *method_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* What a person can do about an error, or NULL. */
static const char *hint(int r)
{
        switch (r) {
        case ETCD_ERR_MEMBER_NOT_IN_SYNC:
                return "the learner has not caught up with the leader yet; retry shortly";
        case ETCD_ERR_TOO_MANY_LEARNERS:
                return "promote or remove the pending learner first";
        case ETCD_ERR_PEER_URL_EXISTS:
                return "another member already uses that peer URL";
        case ETCD_ERR_MEMBER_NOT_FOUND:
                return "check the ID with `gitcd etcd member list`";
        case ETCD_ERR_MEMBER_NOT_LEARNER:
                return "only learners can be promoted";
        case ETCD_ERR_UNHEALTHY:
        case ETCD_ERR_NOT_ENOUGH_STARTED:
                return "the change could cost quorum; wait until every member is healthy";
        case ETCD_ERR_NO_LEADER:
                return "the cluster has no leader: is a quorum of members running?";
        case ETCD_ERR_AUTH_FAILED:
                return "check the user name and password";
        case ETCD_ERR_PERMISSION_DENIED:
                return "the user lacks a role that allows this call";
        case ETCD_ERR_UNAUTHENTICATED:
                return "authentication is enabled: pass --user";
        case ETCD_ERR_NOSPACE:
                return "the database quota is full: compact, defragment, then disarm the alarm";
        case ETCD_ERR_REQUEST_TOO_LARGE:
                return "etcd accepts requests up to --max-request-bytes (1.5 MiB by default)";
        case ETCD_ERR_BAD_LEADER_TRANSFEREE:
                return "the target must be a started voting member";
        case ETCD_ERR_UNIMPLEMENTED:
                return "this etcd version does not have the call";
        default:
                return NULL;
        }
}

static void set_call_error(etcd_client *c, const char *path, const char *url, int r,
                           const grpc_result *res)
{
        const char *h = hint(r);
        if (res->detail)
                set_error(c, "%s: %s", method_name(path), res->detail);
        else if (res->grpc_message)
                set_error(c, "%s via %s: %s%s%s", method_name(path), url, res->grpc_message,
                          h ? " (" : "", h ? h : "");
        else
                set_error(c, "%s via %s: %s%s%s", method_name(path), url, etcd_strerror(r),
                          h ? " (" : "", h ? h : "");
        if (!res->detail && h) {
                char *m = xasprintf("%s)", c->last_error);
                free(c->last_error);
                c->last_error = m;
        }
}

/* ---- construction ---- */

static char *normalize_url(const char *s, size_t len, bool tls)
{
        while (len > 0 && (s[0] == ' ' || s[0] == '\t')) {
                s++;
                len--;
        }
        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '/'))
                len--;
        if (len == 0)
                return NULL;
        const char *scheme = memmem(s, len, "://", 3);
        const char *host = scheme ? scheme + 3 : s;
        size_t host_len = len - (size_t)(host - s);
        /* a user name or password in the URL: etcd does not use them, and
         * they would end up in error messages */
        size_t authority = 0;
        while (authority < host_len && host[authority] != '/')
                authority++;
        if (memchr(host, '@', authority))
                return NULL;
        if ((len > 7 && strneq(s, "http://", 7)) || (len > 8 && strneq(s, "https://", 8)))
                return xstrndup(s, len);
        if (scheme)
                return NULL; /* some other scheme */
        return xasprintf("%s%.*s", tls ? "https://" : "http://", (int)len, s);
}

int etcd_client_new(const etcd_client_opts *opts, etcd_client **ret_client)
{
        if (!opts || isempty(opts->endpoints))
                return -EINVAL;
        bool tls = !isempty(opts->cacert) || !isempty(opts->cert);
        etcd_client *c = XNEW(etcd_client);
        const char *p = opts->endpoints;
        while (*p) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                char *url = normalize_url(p, len, tls);
                if (!url) {
                        etcd_client_free(c);
                        return -EINVAL;
                }
                c->eps = xrealloc(c->eps, (c->n_eps + 1) * sizeof(*c->eps));
                c->eps[c->n_eps++] = (struct endpoint){.url = url, .mark = etcd_marks_ref(url)};
                if (!comma)
                        break;
                p = comma + 1;
        }
        if (c->n_eps == 0) {
                etcd_client_free(c);
                return -EINVAL;
        }
        c->cacert = xstrdup_null(isempty(opts->cacert) ? NULL : opts->cacert);
        c->cert = xstrdup_null(isempty(opts->cert) ? NULL : opts->cert);
        c->key = xstrdup_null(isempty(opts->key) ? NULL : opts->key);
        c->tls = (grpc_tls_opts){.cacert = c->cacert, .cert = c->cert, .key = c->key};
        c->user = xstrdup_null(isempty(opts->user) ? NULL : opts->user);
        c->password = xstrdup_null(opts->password);
        c->fallback_password = xstrdup_null(opts->fallback_password);
        c->call_timeout_ms = opts->call_timeout_ms > 0 ? opts->call_timeout_ms : 5000;
        c->dial_timeout_ms = opts->dial_timeout_ms > 0 ? opts->dial_timeout_ms : 2000;
        c->snapshot_timeout_ms = opts->snapshot_timeout_ms > 0 ? opts->snapshot_timeout_ms : 600000;
        c->read_first_try_ms = opts->read_first_try_ms > 0 ? opts->read_first_try_ms : 1000;
        *ret_client = c;
        return 0;
}

void etcd_client_free(etcd_client *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_eps; i++) {
                etcd_marks_unref(c->eps[i].mark);
                free(c->eps[i].url);
        }
        free(c->eps);
        free(c->cacert);
        free(c->cert);
        free(c->key);
        free(c->user);
        wipe_free(c->password);
        wipe_free(c->fallback_password);
        wipe_free(c->token);
        free(c->last_error);
        free(c);
}

void etcd_client_close_idle(etcd_client *c)
{
        for (size_t i = 0; c && i < c->n_eps; i++)
                etcd_pool_close_url(c->eps[i].url);
}

static bool is_configured(const etcd_client *c, const struct endpoint *ep)
{
        return ep >= c->eps && ep < c->eps + c->n_eps;
}

/*
 * The configured endpoint a URL names, or NULL. A URL with a scheme must
 * match exactly (http:// never stands for a configured https:// endpoint);
 * one without a scheme matches the configured endpoint of that host and
 * port, whatever its scheme.
 */
static struct endpoint *configured_endpoint(etcd_client *c, const char *url_in)
{
        bool has_scheme = strstr(url_in, "://") != NULL;
        _cleanup_free_ char *url = normalize_url(url_in, strlen(url_in), false);
        if (!url)
                return NULL;
        const char *host = strstr(url, "://") + 3;
        for (size_t i = 0; i < c->n_eps; i++) {
                const char *ep = c->eps[i].url;
                if (has_scheme ? streq(ep, url) : streq(strstr(ep, "://") + 3, host))
                        return &c->eps[i];
        }
        return NULL;
}

static char *endpoint_list(const etcd_client *c)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < c->n_eps; i++)
                sb_printf(&sb, "%s%s", i ? ", " : "", c->eps[i].url);
        return sb_detach(&sb);
}

/* ---- one call on one endpoint ---- */

struct unary_buf {
        uint8_t *data;
        size_t len;
        bool got;
};

static int collect_unary(const uint8_t *msg, size_t len, void *userdata)
{
        struct unary_buf *b = userdata;
        if (b->got)
                return ETCD_ERR_PROTOCOL; /* a unary call answers once */
        b->data = xmalloc(len ? len : 1);
        if (len)
                memcpy(b->data, msg, len);
        b->len = len;
        b->got = true;
        return 0;
}

struct call {
        const char *path;
        const ProtobufCMessage *req;
        const ProtobufCMessageDescriptor *resp_desc; /* unary: decode into *ret_resp */
        ProtobufCMessage *resp;
        grpc_msg_fn stream_fn; /* streaming: each message goes here instead */
        void *stream_ud;
        int64_t deadline;         /* monotonic ms, for the whole call */
        bool read_only;           /* safe to cut short and repeat on another endpoint */
        bool large;               /* a read whose answer's size is unknown (select.h) */
        int64_t attempt_deadline; /* for the current endpoint; set by rpc_any() */
};

/* The deadline of the current attempt. */
static int64_t attempt_deadline(const struct call *call)
{
        if (call->attempt_deadline > 0 && call->attempt_deadline < call->deadline)
                return call->attempt_deadline;
        return call->deadline;
}

static int rpc_raw(etcd_client *c, struct endpoint *ep, struct call *call, const char *token,
                   grpc_result *res)
{
        int64_t left = attempt_deadline(call) - now_mono_ms();
        *res = (grpc_result){.grpc_status = -1};
        if (left <= 0) {
                res->detail = xasprintf("deadline passed before %s could be tried", ep->url);
                return ETCD_ERR_TIMEOUT;
        }
        etcd_pool_conn *pc = NULL;
        int r = etcd_pool_take(ep->url, &c->tls, &pc);
        if (r < 0) {
                res->detail = xasprintf("invalid endpoint URL %s", ep->url);
                return r;
        }
        size_t len = protobuf_c_message_get_packed_size(call->req);
        uint8_t *buf = xmalloc(len ? len : 1);
        protobuf_c_message_pack(call->req, buf);
        grpc_call_opts o = {
            .token = token,
            .timeout_ms = left,
            .connect_timeout_ms = c->dial_timeout_ms,
            .max_message = MAX_MESSAGE,
        };
        struct unary_buf ub = {0};
        grpc_conn *conn = etcd_pool_conn_grpc(pc);
        uint64_t wakeups = grpc_conn_timer_wakeups(conn);
        etcd_mark_enter(ep->mark);
        r = grpc_call(conn, call->path, buf, len, &o,
                      call->stream_fn ? call->stream_fn : collect_unary,
                      call->stream_fn ? call->stream_ud : &ub, res);
        etcd_mark_leave(ep->mark);
        c->timer_wakeups += grpc_conn_timer_wakeups(conn) - wakeups;
        /*
         * Kept for the next call only after a whole gRPC answer (the stream
         * is closed), and not from a member that says its server stopped
         * (removed from its cluster, or stopping): it never serves on that
         * connection again, and its process waits for the connection to
         * close before it exits. Nor is any other idle one to it: the next
         * client dials afresh, and finds the member gone. A proposal the
         * member's raft dropped (its leader being removed or handing over)
         * is taken the same way: the member may be the one leaving.
         */
        bool stopped = r == ETCD_ERR_SERVER_STOPPED || r == ETCD_ERR_PROPOSAL_DROPPED;
        etcd_pool_give(pc, res->grpc_status >= 0 && !stopped);
        if (stopped)
                etcd_pool_close_url(ep->url);
        free(buf);
        if (r == 0 && call->resp_desc) {
                call->resp = protobuf_c_message_unpack(call->resp_desc, NULL, ub.len, ub.data);
                if (!call->resp) {
                        res->detail = xasprintf("%s sent a response gitcd cannot decode", ep->url);
                        r = ETCD_ERR_PROTOCOL;
                }
        }
        free(ub.data);
        return r;
}

static int authenticate(etcd_client *c, struct endpoint *ep, int64_t deadline, grpc_result *res)
{
        Etcdserverpb__AuthenticateRequest req = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
        req.name = c->user;
        req.password = c->password ? c->password : (char *)"";
        struct call call = {
            .path = "/etcdserverpb.Auth/Authenticate",
            .req = &req.base,
            .resp_desc = &etcdserverpb__authenticate_response__descriptor,
            .deadline = deadline,
        };
        /* the password goes only to an endpoint the operator configured */
        assert(is_configured(c, ep));
        int r = rpc_raw(c, ep, &call, NULL, res);
        if (r == ETCD_ERR_AUTH_FAILED && c->fallback_password) {
                /* the other password of a change in progress: from now on the one used */
                char *other = c->fallback_password;
                c->fallback_password = c->password;
                c->password = other;
                req.password = c->password;
                grpc_result_release(res);
                *res = (grpc_result){.grpc_status = -1};
                call.resp = NULL;
                r = rpc_raw(c, ep, &call, NULL, res);
                if (r == ETCD_ERR_AUTH_FAILED) { /* neither: keep the order given */
                        c->password = c->fallback_password;
                        c->fallback_password = other;
                }
        }
        if (r == ETCD_ERR_AUTH_NOT_ENABLED) {
                c->auth_not_enabled = true;
                grpc_result_release(res);
                *res = (grpc_result){.grpc_status = -1};
                return 0;
        }
        if (r < 0)
                return r;
        Etcdserverpb__AuthenticateResponse *resp = (void *)call.resp;
        wipe_free(c->token);
        if (resp->token) {
                c->token = xstrdup(resp->token);
                explicit_bzero(resp->token, strlen(resp->token));
        } else {
                c->token = xstrdup("");
        }
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

/* One call on one endpoint, authenticating first (and once more on a stale token). */
static int rpc_once(etcd_client *c, struct endpoint *ep, struct call *call, grpc_result *res)
{
        bool fresh = false;
        int r;
        if (c->user && !c->token && !c->auth_not_enabled) {
                r = authenticate(c, ep, attempt_deadline(call), res);
                if (r == ETCD_ERR_LEARNER_NOT_SUPPORTED) {
                        /* a learner cannot authenticate: the call goes without a token
                         * (Status needs none; others fail over as a learner's refusal) */
                        grpc_result_release(res);
                        return rpc_raw(c, ep, call, NULL, res);
                }
                if (r < 0)
                        return r;
                grpc_result_release(res);
                fresh = true;
        }
        r = rpc_raw(c, ep, call, c->auth_not_enabled ? NULL : c->token, res);
        /* a stale token, or auth switched on since we found it off */
        bool again =
            r == ETCD_ERR_INVALID_TOKEN || (r == ETCD_ERR_UNAUTHENTICATED && c->auth_not_enabled);
        if (again && c->user && !fresh) {
                log_debug("etcd: token refused by %s; authenticating again", ep->url);
                grpc_result_release(res);
                wipe_free(c->token);
                c->token = NULL;
                c->auth_not_enabled = false;
                r = authenticate(c, ep, attempt_deadline(call), res);
                if (r < 0)
                        return r;
                grpc_result_release(res);
                r = rpc_raw(c, ep, call, c->auth_not_enabled ? NULL : c->token, res);
        }
        return r;
}

static void set_auth_error(etcd_client *c, const char *url, int r, const grpc_result *res)
{
        if (r == ETCD_ERR_AUTH_FAILED)
                set_error(c, "authenticating as user '%s' via %s: wrong user name or password",
                          c->user, url);
        else
                set_call_error(c, "/etcdserverpb.Auth/Authenticate", url, r, res);
}

static bool should_fail_over(int r, const grpc_result *res)
{
        return res->failover_ok || r == ETCD_ERR_LEARNER_NOT_SUPPORTED;
}

static void report(etcd_client *c, struct call *call, struct endpoint *ep, int r,
                   const grpc_result *res)
{
        if (r == ETCD_ERR_AUTH_FAILED)
                set_auth_error(c, ep->url, r, res);
        else
                set_call_error(c, call->path, ep->url, r, res);
}

/*
 * Ask ep's gRPC health service (grpc.health.v1.Health/Check, service "")
 * whether it serves, within PROBE_MS and the call's deadline. NOT_SERVING
 * marks it down for DOWN_MS; any other answer, or none, clears the mark (the
 * call itself then says what is wrong). Returns false only for NOT_SERVING.
 */
static bool probe_serving(etcd_client *c, struct endpoint *ep, int64_t deadline)
{
        Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
        req.service = (char *)"";
        struct call call = {
            .path = "/grpc.health.v1.Health/Check",
            .req = &req.base,
            .resp_desc = &grpc__health__v1__health_check_response__descriptor,
            .deadline = MIN(deadline, now_mono_ms() + PROBE_MS),
        };
        grpc_result res;
        int r = rpc_raw(c, ep, &call, NULL, &res);
        grpc_result_release(&res);
        bool serving = true;
        if (r == 0) {
                Grpc__Health__V1__HealthCheckResponse *resp = (void *)call.resp;
                serving = resp->status !=
                          GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
                protobuf_c_message_free_unpacked(call.resp, NULL);
        }
        if (serving) {
                etcd_mark_up(ep->mark);
                return true;
        }
        etcd_mark_down(ep->mark, now_mono_ms() + DOWN_MS);
        c->not_serving++;
        log_debug("etcd: %s is not serving (defragmenting?); trying it last for %d ms", ep->url,
                  DOWN_MS);
        return false;
}

/*
 * A cluster-wide call: the preferred endpoint first, then the others, the
 * ones marked not serving last (etcd/select.c, etcd/marks.h), for writes as
 * for reads. A small read's first attempt gets opts.read_first_try_ms while
 * others are left, any other read's attempts at most half of the remaining
 * time, so one hung member cannot eat the whole deadline
 * (etcd_select_attempt_deadline). A write keeps the whole deadline on the
 * endpoint it was sent to: if that endpoint times out there is no time left
 * to send it again, so it is never applied twice. A read cut short with
 * nothing back, or a call that failed with UNAVAILABLE, makes the client ask
 * that endpoint's health (probe_serving); a read that got UNAVAILABLE from a
 * member not serving moves on too.
 */
static int rpc_any(etcd_client *c, struct call *call, int64_t timeout_ms)
{
        call->deadline = now_mono_ms() + timeout_ms;
        int last = ETCD_ERR_UNREACHABLE;
        /* "cannot connect to any endpoint" only when no TCP connection could be made */
        bool all_unreachable = true;
        /* The order is fixed at the start: c->preferred moves on a fail-over
         * below, and must not shift the endpoints still to try (with two
         * endpoints that sent the call back to the first one). */
        const size_t start = c->preferred;
        assert(start < c->n_eps);
        /* no allocation for the usual few endpoints */
        size_t order_buf[8];
        int64_t down_buf[8];
        _cleanup_free_ size_t *order_heap = NULL;
        _cleanup_free_ int64_t *down_heap = NULL;
        size_t *order = order_buf;
        int64_t *down = down_buf;
        if (c->n_eps > ARRAY_SIZE(order_buf)) {
                order_heap = xcalloc(c->n_eps, sizeof(*order));
                down_heap = xcalloc(c->n_eps, sizeof(*down));
                order = order_heap;
                down = down_heap;
        }
        for (size_t i = 0; i < c->n_eps; i++)
                down[i] = etcd_mark_until(c->eps[i].mark);
        etcd_select_order(c->n_eps, start, down, now_mono_ms(), order);
        etcd_call_kind kind = !call->read_only ? ETCD_CALL_WRITE
                              : call->large    ? ETCD_CALL_LARGE_READ
                                               : ETCD_CALL_SMALL_READ;
        bool tried = false;
        size_t requeued = 0;
        for (size_t k = 0; k < c->n_eps; k++) {
                bool others_left = k + 1 < c->n_eps;
                /*
                 * Counted in flight before the hold is looked at: a
                 * defragmentation of this process that begins meanwhile
                 * either waits for this call (etcd_mark_drain) or this call
                 * sees its hold, and the endpoint goes last.
                 */
                while (!etcd_mark_enter_unless_held(c->eps[order[k]].mark)) {
                        if (!others_left || requeued == c->n_eps) {
                                etcd_mark_enter(c->eps[order[k]].mark);
                                break;
                        }
                        size_t held = order[k];
                        memmove(&order[k], &order[k + 1], (c->n_eps - k - 1) * sizeof(*order));
                        order[c->n_eps - 1] = held;
                        requeued++;
                }
                size_t i = order[k];
                struct endpoint *ep = &c->eps[i];
                /* a mark run out: ask before sending the call there again */
                if (others_left && etcd_select_probe_first(down[i], now_mono_ms()) &&
                    !probe_serving(c, ep, call->deadline)) {
                        etcd_mark_leave(ep->mark);
                        c->preferred = order[k + 1];
                        continue;
                }
                grpc_result res;
                call->attempt_deadline = etcd_select_attempt_deadline(
                    kind, !tried, others_left, now_mono_ms(), call->deadline, c->read_first_try_ms);
                tried = true;
                int r = rpc_once(c, ep, call, &res);
                etcd_mark_leave(ep->mark);
                call->attempt_deadline = 0;
                if (r == 0) {
                        c->preferred = i;
                        grpc_result_release(&res);
                        clear_error(c);
                        return 0;
                }
                last = r;
                if (!res.no_connection)
                        all_unreachable = false;
                report(c, call, ep, r, &res);
                bool fail_over = should_fail_over(r, &res);
                bool cut_short =
                    call->read_only && r == ETCD_ERR_TIMEOUT && now_mono_ms() < call->deadline;
                if ((cut_short || r == ETCD_ERR_UNAVAILABLE) && now_mono_ms() < call->deadline &&
                    !probe_serving(c, ep, call->deadline) && call->read_only)
                        fail_over = true; /* a read: safe to repeat elsewhere */
                bool again = fail_over && now_mono_ms() < call->deadline;
                log_debug("etcd: %s via %s failed (%s)%s", method_name(call->path), ep->url,
                          etcd_strerror(r), again ? ", trying the next endpoint" : "");
                if (fail_over)
                        c->preferred = others_left ? order[k + 1] : (i + 1) % c->n_eps;
                grpc_result_release(&res);
                if (!again)
                        return r;
        }
        if (all_unreachable) {
                _cleanup_free_ char *list = endpoint_list(c);
                set_error(c,
                          "%s: cannot connect to any etcd endpoint (%s): check that etcd is "
                          "running there and that --endpoints is right",
                          method_name(call->path), list);
        }
        return last;
}

/* A call to one configured endpoint. */
static int rpc_on(etcd_client *c, struct endpoint *ep, struct call *call, int64_t timeout_ms)
{
        assert(is_configured(c, ep));
        call->deadline = now_mono_ms() + timeout_ms;
        grpc_result res;
        int r = rpc_once(c, ep, call, &res);
        if (r == 0)
                clear_error(c);
        else
                report(c, call, ep, r, &res);
        grpc_result_release(&res);
        return r;
}

/* A call to one named member: url must name a configured endpoint. */
static int rpc_at(etcd_client *c, const char *url, struct call *call, int64_t timeout_ms)
{
        if (!url)
                return rpc_any(c, call, timeout_ms);
        struct endpoint *ep = configured_endpoint(c, url);
        if (!ep) {
                _cleanup_free_ char *list = endpoint_list(c);
                set_error(c,
                          "%s: '%s' is not one of the configured endpoints (%s); gitcd talks "
                          "only to those, with the scheme given there",
                          method_name(call->path),
                          strchr(url, '@') ? "(a URL with user info)" : url, list);
                return -EINVAL;
        }
        return rpc_on(c, ep, call, timeout_ms);
}

#define UNARY(path_, req_, desc_)                                                                  \
        (struct call)                                                                              \
        {                                                                                          \
                .path = (path_), .req = &(req_).base, .resp_desc = &(desc_),                       \
        }
#define READ(path_, req_, desc_)                                                                   \
        (struct call)                                                                              \
        {                                                                                          \
                .path = (path_), .req = &(req_).base, .resp_desc = &(desc_), .read_only = true,    \
        }

/* ---- Cluster ---- */

static void member_from_pb(etcd_member *m, const Etcdserverpb__Member *pb)
{
        m->id = pb->id;
        m->name = xstrdup(pb->name ? pb->name : "");
        m->n_peer_urls = pb->n_peerurls;
        m->peer_urls = xcalloc(pb->n_peerurls + 1, sizeof(char *));
        for (size_t i = 0; i < pb->n_peerurls; i++)
                m->peer_urls[i] = xstrdup(pb->peerurls[i]);
        m->n_client_urls = pb->n_clienturls;
        m->client_urls = xcalloc(pb->n_clienturls + 1, sizeof(char *));
        for (size_t i = 0; i < pb->n_clienturls; i++)
                m->client_urls[i] = xstrdup(pb->clienturls[i]);
        m->is_learner = pb->islearner;
}

static etcd_members *list_from_pb(const Etcdserverpb__ResponseHeader *h,
                                  Etcdserverpb__Member *const *members, size_t n)
{
        etcd_members *l = XNEW(etcd_members);
        if (h) {
                l->cluster_id = h->cluster_id;
                l->responder_id = h->member_id;
        }
        l->members = xcalloc(n ? n : 1, sizeof(etcd_member));
        l->n = n;
        for (size_t i = 0; i < n; i++)
                member_from_pb(&l->members[i], members[i]);
        return l;
}

void etcd_members_free(etcd_members *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++) {
                etcd_member *m = &l->members[i];
                free(m->name);
                for (size_t j = 0; j < m->n_peer_urls; j++)
                        free(m->peer_urls[j]);
                for (size_t j = 0; j < m->n_client_urls; j++)
                        free(m->client_urls[j]);
                free(m->peer_urls);
                free(m->client_urls);
        }
        free(l->members);
        free(l);
}

static char **urls_dup(char *const *v, size_t n)
{
        char **out = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                out[i] = xstrdup(v[i]);
        return out;
}

etcd_members *etcd_members_dup(const etcd_members *l)
{
        etcd_members *d = XNEW(etcd_members);
        d->cluster_id = l->cluster_id;
        d->responder_id = l->responder_id;
        d->n = l->n;
        d->members = xcalloc(l->n ? l->n : 1, sizeof(etcd_member));
        for (size_t i = 0; i < l->n; i++) {
                const etcd_member *m = &l->members[i];
                d->members[i] = (etcd_member){
                    .id = m->id,
                    .name = xstrdup(m->name ? m->name : ""),
                    .peer_urls = urls_dup(m->peer_urls, m->n_peer_urls),
                    .n_peer_urls = m->n_peer_urls,
                    .client_urls = urls_dup(m->client_urls, m->n_client_urls),
                    .n_client_urls = m->n_client_urls,
                    .is_learner = m->is_learner,
                };
        }
        return d;
}

const etcd_member *etcd_members_find(const etcd_members *l, uint64_t id)
{
        for (size_t i = 0; l && i < l->n; i++)
                if (l->members[i].id == id)
                        return &l->members[i];
        return NULL;
}

int etcd_member_list(etcd_client *c, etcd_members **ret_list)
{
        Etcdserverpb__MemberListRequest req = ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
        struct call call = READ("/etcdserverpb.Cluster/MemberList", req,
                                etcdserverpb__member_list_response__descriptor);
        int r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__MemberListResponse *resp = (void *)call.resp;
        *ret_list = list_from_pb(resp->header, resp->members, resp->n_members);
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

static int check_urls(etcd_client *c, const char *what, const char *const *urls, size_t n)
{
        if (n == 0) {
                set_error(c, "%s: at least one peer URL is needed", what);
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (isempty(urls[i]) ||
                    !(strneq(urls[i], "http://", 7) || strneq(urls[i], "https://", 8))) {
                        set_error(c, "%s: peer URL '%s' must start with http:// or https://", what,
                                  urls[i] ? urls[i] : "");
                        return -EINVAL;
                }
        return 0;
}

int etcd_member_add(etcd_client *c, const char *const *peer_urls, size_t n_peer_urls,
                    bool is_learner, uint64_t *ret_id, etcd_members **ret_list)
{
        int r = check_urls(c, "MemberAdd", peer_urls, n_peer_urls);
        if (r < 0)
                return r;
        Etcdserverpb__MemberAddRequest req = ETCDSERVERPB__MEMBER_ADD_REQUEST__INIT;
        req.peerurls = (char **)peer_urls;
        req.n_peerurls = n_peer_urls;
        req.islearner = is_learner;
        struct call call = UNARY("/etcdserverpb.Cluster/MemberAdd", req,
                                 etcdserverpb__member_add_response__descriptor);
        r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__MemberAddResponse *resp = (void *)call.resp;
        if (ret_id)
                *ret_id = resp->member ? resp->member->id : 0;
        if (ret_list)
                *ret_list = list_from_pb(resp->header, resp->members, resp->n_members);
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_member_remove(etcd_client *c, uint64_t id)
{
        Etcdserverpb__MemberRemoveRequest req = ETCDSERVERPB__MEMBER_REMOVE_REQUEST__INIT;
        req.id = id;
        struct call call = UNARY("/etcdserverpb.Cluster/MemberRemove", req,
                                 etcdserverpb__member_remove_response__descriptor);
        int r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_member_update(etcd_client *c, uint64_t id, const char *const *peer_urls,
                       size_t n_peer_urls)
{
        int r = check_urls(c, "MemberUpdate", peer_urls, n_peer_urls);
        if (r < 0)
                return r;
        Etcdserverpb__MemberUpdateRequest req = ETCDSERVERPB__MEMBER_UPDATE_REQUEST__INIT;
        req.id = id;
        req.peerurls = (char **)peer_urls;
        req.n_peerurls = n_peer_urls;
        struct call call = UNARY("/etcdserverpb.Cluster/MemberUpdate", req,
                                 etcdserverpb__member_update_response__descriptor);
        r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_member_promote(etcd_client *c, uint64_t id)
{
        Etcdserverpb__MemberPromoteRequest req = ETCDSERVERPB__MEMBER_PROMOTE_REQUEST__INIT;
        req.id = id;
        struct call call = UNARY("/etcdserverpb.Cluster/MemberPromote", req,
                                 etcdserverpb__member_promote_response__descriptor);
        int r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

/* ---- Maintenance ---- */

void etcd_endpoint_status_free(etcd_endpoint_status *s)
{
        if (!s)
                return;
        free(s->endpoint);
        free(s->version);
        for (size_t i = 0; i < s->n_errors; i++)
                free(s->errors[i]);
        free(s->errors);
        free(s);
}

etcd_endpoint_status *etcd_endpoint_status_dup(const etcd_endpoint_status *s)
{
        if (!s)
                return NULL;
        etcd_endpoint_status *d = XNEW(etcd_endpoint_status);
        *d = *s;
        d->endpoint = xstrdup_null(s->endpoint);
        d->version = xstrdup_null(s->version);
        d->errors = xcalloc(s->n_errors + 1, sizeof(char *));
        for (size_t i = 0; i < s->n_errors; i++)
                d->errors[i] = xstrdup(s->errors[i]);
        return d;
}

/* etcd's ErrNoLeader, as Status lists it when the member knows no leader. */
#define STATUS_NO_LEADER "etcdserver: no leader"

bool etcd_status_may_report_alarm(const etcd_endpoint_status *s)
{
        for (size_t i = 0; i < s->n_errors; i++)
                if (!streq(s->errors[i], STATUS_NO_LEADER))
                        return true;
        return false;
}

int etcd_status(etcd_client *c, const char *endpoint, etcd_endpoint_status **ret_status)
{
        Etcdserverpb__StatusRequest req = ETCDSERVERPB__STATUS_REQUEST__INIT;
        struct call call = READ("/etcdserverpb.Maintenance/Status", req,
                                etcdserverpb__status_response__descriptor);
        int r = rpc_at(c, endpoint, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__StatusResponse *resp = (void *)call.resp;
        etcd_endpoint_status *s = XNEW(etcd_endpoint_status);
        s->endpoint = xstrdup(endpoint ? endpoint : c->eps[c->preferred].url);
        s->version = xstrdup(resp->version ? resp->version : "");
        s->db_size = resp->dbsize;
        s->db_size_in_use = resp->dbsizeinuse;
        s->leader = resp->leader;
        s->raft_index = resp->raftindex;
        s->raft_applied_index = resp->raftappliedindex;
        s->raft_term = resp->raftterm;
        s->is_learner = resp->islearner;
        if (resp->header) {
                s->member_id = resp->header->member_id;
                s->cluster_id = resp->header->cluster_id;
                s->revision = resp->header->revision;
        }
        s->n_errors = resp->n_errors;
        s->errors = xcalloc(resp->n_errors + 1, sizeof(char *));
        for (size_t i = 0; i < resp->n_errors; i++)
                s->errors[i] = xstrdup(resp->errors[i]);
        protobuf_c_message_free_unpacked(call.resp, NULL);
        *ret_status = s;
        return 0;
}

static int alarm_call(etcd_client *c, Etcdserverpb__AlarmRequest *req,
                      Etcdserverpb__AlarmResponse **ret_resp)
{
        struct call call = UNARY("/etcdserverpb.Maintenance/Alarm", *req,
                                 etcdserverpb__alarm_response__descriptor);
        call.read_only = req->action == ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET;
        int r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        *ret_resp = (void *)call.resp;
        return 0;
}

int etcd_alarm_list(etcd_client *c, etcd_alarm **ret_alarms, size_t *ret_n)
{
        Etcdserverpb__AlarmRequest req = ETCDSERVERPB__ALARM_REQUEST__INIT;
        req.action = ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET;
        Etcdserverpb__AlarmResponse *resp;
        int r = alarm_call(c, &req, &resp);
        if (r < 0)
                return r;
        etcd_alarm *a = NULL;
        if (resp->n_alarms) {
                a = xcalloc(resp->n_alarms, sizeof(*a));
                for (size_t i = 0; i < resp->n_alarms; i++) {
                        a[i].member_id = resp->alarms[i]->memberid;
                        a[i].type = (etcd_alarm_type)resp->alarms[i]->alarm;
                }
        }
        *ret_n = resp->n_alarms;
        *ret_alarms = a;
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return 0;
}

static int alarm_change(etcd_client *c, Etcdserverpb__AlarmRequest__AlarmAction action,
                        uint64_t member_id, etcd_alarm_type type)
{
        Etcdserverpb__AlarmRequest req = ETCDSERVERPB__ALARM_REQUEST__INIT;
        req.action = action;
        req.memberid = member_id;
        req.alarm = (Etcdserverpb__AlarmType)type;
        Etcdserverpb__AlarmResponse *resp;
        int r = alarm_call(c, &req, &resp);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return 0;
}

int etcd_alarm_disarm(etcd_client *c, uint64_t member_id, etcd_alarm_type type)
{
        return alarm_change(c, ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__DEACTIVATE, member_id,
                            type);
}

int etcd_alarm_activate(etcd_client *c, uint64_t member_id, etcd_alarm_type type)
{
        return alarm_change(c, ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE, member_id,
                            type);
}

int etcd_defragment(etcd_client *c, const char *endpoint)
{
        Etcdserverpb__DefragmentRequest req = ETCDSERVERPB__DEFRAGMENT_REQUEST__INIT;
        struct call call = UNARY("/etcdserverpb.Maintenance/Defragment", req,
                                 etcdserverpb__defragment_response__descriptor);
        /*
         * The member does not serve while it defragments: every client of
         * this process tries it last until the call returns (etcd/marks.h),
         * so their writes go to another member before they are sent. The
         * calls they had already sent there are let finish first (at most
         * DRAIN_MS), or they would wait for the whole defragmentation.
         */
        struct endpoint *ep = endpoint ? configured_endpoint(c, endpoint) : NULL;
        if (ep) {
                etcd_mark_hold(ep->mark);
                if (!etcd_mark_drain(ep->mark, now_mono_ms() + DRAIN_MS))
                        log_debug("etcd: calls still in flight on %s after %d ms; defragmenting "
                                  "it anyway",
                                  ep->url, DRAIN_MS);
        }
        /* Defragmenting a large database takes a while: allow more than a plain call. */
        int r = rpc_at(c, endpoint, &call, MAX(c->call_timeout_ms, 60000));
        if (ep)
                etcd_mark_release(ep->mark, r == 0);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

/*
 * The configured endpoint of the member leader, or NULL. The endpoint that
 * answered last is asked first (first_member is its member ID), then every
 * other one by Status, all within timeout_ms. A URL the leader advertises
 * is never used: it might not be one the operator configured.
 */
static struct endpoint *leader_endpoint(etcd_client *c, uint64_t leader, uint64_t first_member,
                                        int64_t timeout_ms)
{
        size_t first = c->preferred;
        if (first_member == leader)
                return &c->eps[first];
        int64_t deadline = now_mono_ms() + timeout_ms;
        for (size_t k = 1; k < c->n_eps; k++) {
                struct endpoint *ep = &c->eps[(first + k) % c->n_eps];
                int64_t left = deadline - now_mono_ms();
                if (left <= 0)
                        break;
                Etcdserverpb__StatusRequest req = ETCDSERVERPB__STATUS_REQUEST__INIT;
                struct call call = READ("/etcdserverpb.Maintenance/Status", req,
                                        etcdserverpb__status_response__descriptor);
                if (rpc_on(c, ep, &call, left) < 0)
                        continue;
                Etcdserverpb__StatusResponse *resp = (void *)call.resp;
                bool found = resp->header && resp->header->member_id == leader;
                protobuf_c_message_free_unpacked(call.resp, NULL);
                if (found)
                        return ep;
        }
        return NULL;
}

int etcd_move_leader(etcd_client *c, uint64_t target_id)
{
        etcd_endpoint_status *st = NULL;
        int r = etcd_status(c, NULL, &st);
        if (r < 0)
                return r;
        uint64_t leader = st->leader, responder = st->member_id;
        etcd_endpoint_status_free(st);
        if (leader == 0) {
                set_error(c, "MoveLeader: the cluster has no leader: is a quorum of members "
                             "running?");
                return ETCD_ERR_NO_LEADER;
        }
        if (leader == target_id) {
                clear_error(c);
                return 0;
        }
        struct endpoint *ep = leader_endpoint(c, leader, responder, c->call_timeout_ms);
        if (!ep) {
                char id[17];
                etcd_member_id_format(leader, id);
                _cleanup_free_ char *list = endpoint_list(c);
                set_error(c,
                          "MoveLeader: the leader %s is not reachable through the configured "
                          "endpoints (%s); add its client URL to them",
                          id, list);
                return ETCD_ERR_UNAVAILABLE;
        }
        Etcdserverpb__MoveLeaderRequest req = ETCDSERVERPB__MOVE_LEADER_REQUEST__INIT;
        req.targetid = target_id;
        struct call call = UNARY("/etcdserverpb.Maintenance/MoveLeader", req,
                                 etcdserverpb__move_leader_response__descriptor);
        r = rpc_on(c, ep, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_hash_kv(etcd_client *c, const char *endpoint, int64_t revision, uint32_t *ret_hash,
                 int64_t *ret_compact_revision)
{
        Etcdserverpb__HashKVRequest req = ETCDSERVERPB__HASH_KVREQUEST__INIT;
        req.revision = revision;
        struct call call = READ("/etcdserverpb.Maintenance/HashKV", req,
                                etcdserverpb__hash_kvresponse__descriptor);
        call.large = true; /* small, but computed over every key: as slow as a large read */
        int r = rpc_at(c, endpoint, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__HashKVResponse *resp = (void *)call.resp;
        if (ret_hash)
                *ret_hash = resp->hash;
        if (ret_compact_revision)
                *ret_compact_revision = resp->compact_revision;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

/* Snapshot: decode each streamed message, pass the blob on, hash all but the last 32 bytes. */
struct snap_state {
        etcd_snapshot_fn fn;
        void *userdata;
        hash_ctx *sha;
        uint8_t tail[32];
        size_t tail_len;
        uint64_t size;
        int64_t revision;
        bool got_header;
};

static int snap_feed(struct snap_state *st, const uint8_t *data, size_t len)
{
        if (len == 0)
                return 0;
        int r = st->fn(data, len, st->userdata);
        if (r < 0)
                return r;
        st->size += len;
        if (st->tail_len + len <= sizeof(st->tail)) {
                memcpy(st->tail + st->tail_len, data, len);
                st->tail_len += len;
                return 0;
        }
        size_t to_hash = st->tail_len + len - sizeof(st->tail);
        size_t from_tail = MIN(to_hash, st->tail_len);
        size_t from_data = to_hash - from_tail;
        hash_update(st->sha, st->tail, from_tail);
        hash_update(st->sha, data, from_data);
        memmove(st->tail, st->tail + from_tail, st->tail_len - from_tail);
        st->tail_len -= from_tail;
        memcpy(st->tail + st->tail_len, data + from_data, len - from_data);
        st->tail_len += len - from_data;
        return 0;
}

static int snap_msg(const uint8_t *msg, size_t len, void *userdata)
{
        struct snap_state *st = userdata;
        Etcdserverpb__SnapshotResponse *resp =
            etcdserverpb__snapshot_response__unpack(NULL, len, msg);
        if (!resp)
                return ETCD_ERR_PROTOCOL;
        if (!st->got_header && resp->header) {
                st->revision = resp->header->revision;
                st->got_header = true;
        }
        int r = snap_feed(st, resp->blob.data, resp->blob.len);
        etcdserverpb__snapshot_response__free_unpacked(resp, NULL);
        return r;
}

int etcd_snapshot(etcd_client *c, const char *endpoint, etcd_snapshot_fn fn, void *userdata,
                  etcd_snapshot_info *ret_info)
{
        if (!fn)
                return -EINVAL;
        struct snap_state st = {.fn = fn, .userdata = userdata, .sha = hash_sha256_new()};
        Etcdserverpb__SnapshotRequest req = ETCDSERVERPB__SNAPSHOT_REQUEST__INIT;
        struct call call = {
            .path = "/etcdserverpb.Maintenance/Snapshot",
            .req = &req.base,
            .stream_fn = snap_msg,
            .stream_ud = &st,
        };
        int r = rpc_at(c, endpoint, &call, c->snapshot_timeout_ms);
        if (r == 0) {
                uint8_t digest[HASH_SHA256_LEN];
                hash_final(st.sha, digest);
                bool ok = st.tail_len == 32 && memcmp(digest, st.tail, 32) == 0;
                if (!ok) {
                        set_error(c,
                                  "Snapshot: the sha256 etcd appended does not match the "
                                  "%llu bytes received; the snapshot is damaged",
                                  (unsigned long long)st.size);
                        r = ETCD_ERR_SNAPSHOT_CHECKSUM;
                } else if (ret_info) {
                        *ret_info = (etcd_snapshot_info){
                            .size = st.size, .revision = st.revision, .checksum_ok = true};
                }
        }
        hash_free(st.sha);
        return r;
}

struct file_sink {
        int fd;
        int err;
};

static int write_sink(const void *data, size_t len, void *userdata)
{
        struct file_sink *s = userdata;
        int r = write_all(s->fd, data, len);
        if (r < 0)
                s->err = r;
        return r;
}

int etcd_snapshot_save(etcd_client *c, const char *endpoint, const char *path,
                       etcd_snapshot_info *ret_info)
{
        if (isempty(path))
                return -EINVAL;
        char *part = xasprintf("%s.part", path);
        struct file_sink sink = {.fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
        etcd_snapshot_info info = {0};
        int r;
        if (sink.fd < 0) {
                r = -errno;
                set_error(c, "Snapshot: cannot create %s: %s", part, strerror(-r));
                goto out;
        }
        r = etcd_snapshot(c, endpoint, write_sink, &sink, &info);
        if (r < 0) {
                if (sink.err < 0)
                        set_error(c, "Snapshot: cannot write %s: %s", part, strerror(-sink.err));
                goto out;
        }
        if (fsync(sink.fd) < 0 || close(sink.fd) < 0) {
                r = -errno;
                sink.fd = -1;
                set_error(c, "Snapshot: cannot write %s: %s", part, strerror(-r));
                goto out;
        }
        sink.fd = -1;
        if (rename(part, path) < 0) {
                r = -errno;
                set_error(c, "Snapshot: cannot rename %s to %s: %s", part, path, strerror(-r));
                goto out;
        }
        if (ret_info)
                *ret_info = info;
        r = 0;
out:
        if (sink.fd >= 0)
                close(sink.fd);
        if (r < 0)
                unlink(part);
        free(part);
        return r;
}

/* ---- KV ---- */

void etcd_kv_list_free(etcd_kv_list *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++) {
                free(l->kvs[i].key);
                free(l->kvs[i].value);
        }
        free(l->kvs);
        free(l);
}

static ProtobufCBinaryData bytes_of(const void *p, size_t n)
{
        return (ProtobufCBinaryData){.len = n, .data = (uint8_t *)p};
}

/* The end of the range of keys starting with prefix (etcd's "prefix + 1"); newly allocated. */
static uint8_t *prefix_end(const char *key, size_t *ret_len)
{
        size_t n = strlen(key);
        uint8_t *end = xmalloc(n + 1);
        memcpy(end, key, n);
        while (n > 0) {
                if (end[n - 1] < 0xff) {
                        end[n - 1]++;
                        *ret_len = n;
                        return end;
                }
                n--;
        }
        end[0] = 0; /* every key: "\0" means "to the end" */
        *ret_len = 1;
        return end;
}

static int check_key(etcd_client *c, const char *what, const char *key)
{
        if (isempty(key)) {
                set_error(c, "%s: the key must not be empty", what);
                return -EINVAL;
        }
        return 0;
}

static char *dup_bytes(const ProtobufCBinaryData *b)
{
        char *s = xmalloc(b->len + 1);
        if (b->len)
                memcpy(s, b->data, b->len);
        s[b->len] = '\0';
        return s;
}

int etcd_put(etcd_client *c, const char *key, const void *value, size_t value_len,
             int64_t *ret_revision)
{
        int r = check_key(c, "Put", key);
        if (r < 0)
                return r;
        Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
        req.key = bytes_of(key, strlen(key));
        req.value = bytes_of(value, value_len);
        struct call call =
            UNARY("/etcdserverpb.KV/Put", req, etcdserverpb__put_response__descriptor);
        r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__PutResponse *resp = (void *)call.resp;
        if (ret_revision)
                *ret_revision = resp->header ? resp->header->revision : 0;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_get(etcd_client *c, const char *key, bool prefix, etcd_kv_list **ret_list)
{
        int r = check_key(c, "Range", key);
        if (r < 0)
                return r;
        Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
        _cleanup_free_ uint8_t *end = NULL;
        size_t end_len = 0;
        req.key = bytes_of(key, strlen(key));
        if (prefix) {
                end = prefix_end(key, &end_len);
                req.range_end = bytes_of(end, end_len);
        }
        struct call call =
            READ("/etcdserverpb.KV/Range", req, etcdserverpb__range_response__descriptor);
        call.large = prefix; /* one key is small; a prefix may hold any number */
        r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__RangeResponse *resp = (void *)call.resp;
        etcd_kv_list *l = XNEW(etcd_kv_list);
        l->revision = resp->header ? resp->header->revision : 0;
        l->more = resp->more;
        l->n = resp->n_kvs;
        l->kvs = xcalloc(resp->n_kvs ? resp->n_kvs : 1, sizeof(etcd_kv));
        for (size_t i = 0; i < resp->n_kvs; i++) {
                const Mvccpb__KeyValue *kv = resp->kvs[i];
                l->kvs[i] = (etcd_kv){
                    .key = dup_bytes(&kv->key),
                    .key_len = kv->key.len,
                    .value = dup_bytes(&kv->value),
                    .value_len = kv->value.len,
                    .create_revision = kv->create_revision,
                    .mod_revision = kv->mod_revision,
                    .version = kv->version,
                    .lease = kv->lease,
                };
        }
        protobuf_c_message_free_unpacked(call.resp, NULL);
        *ret_list = l;
        return 0;
}

int etcd_count_keys(etcd_client *c, const char *endpoint, int64_t revision, int64_t *ret_count,
                    int64_t *ret_revision)
{
        static const uint8_t all[1] = {0}; /* key and range_end "\0": every key */
        Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
        req.key = bytes_of(all, 1);
        req.range_end = bytes_of(all, 1);
        req.revision = revision;
        req.serializable = true;
        req.count_only = true;
        struct call call =
            READ("/etcdserverpb.KV/Range", req, etcdserverpb__range_response__descriptor);
        int r = rpc_at(c, endpoint, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__RangeResponse *resp = (void *)call.resp;
        *ret_count = resp->count;
        if (ret_revision)
                *ret_revision = resp->header ? resp->header->revision : 0;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_delete(etcd_client *c, const char *key, bool prefix, int64_t *ret_deleted)
{
        int r = check_key(c, "DeleteRange", key);
        if (r < 0)
                return r;
        Etcdserverpb__DeleteRangeRequest req = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
        _cleanup_free_ uint8_t *end = NULL;
        size_t end_len = 0;
        req.key = bytes_of(key, strlen(key));
        if (prefix) {
                end = prefix_end(key, &end_len);
                req.range_end = bytes_of(end, end_len);
        }
        struct call call = UNARY("/etcdserverpb.KV/DeleteRange", req,
                                 etcdserverpb__delete_range_response__descriptor);
        r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__DeleteRangeResponse *resp = (void *)call.resp;
        if (ret_deleted)
                *ret_deleted = resp->deleted;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_txn_put_if(etcd_client *c, const char *key, int64_t expected_mod_revision,
                    const void *value, size_t value_len, bool *ret_succeeded)
{
        int r = check_key(c, "Txn", key);
        if (r < 0)
                return r;
        Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
        cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
        cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
        cmp.key = bytes_of(key, strlen(key));
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        cmp.mod_revision = expected_mod_revision;
        Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
        put.key = bytes_of(key, strlen(key));
        put.value = bytes_of(value, value_len);
        Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
        op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        op.request_put = &put;
        Etcdserverpb__Compare *cmps[] = {&cmp};
        Etcdserverpb__RequestOp *ops[] = {&op};
        Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
        req.compare = cmps;
        req.n_compare = 1;
        req.success = ops;
        req.n_success = 1;
        struct call call =
            UNARY("/etcdserverpb.KV/Txn", req, etcdserverpb__txn_response__descriptor);
        r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__TxnResponse *resp = (void *)call.resp;
        if (ret_succeeded)
                *ret_succeeded = resp->succeeded;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_compact(etcd_client *c, int64_t revision, bool physical)
{
        Etcdserverpb__CompactionRequest req = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
        req.revision = revision;
        req.physical = physical;
        struct call call =
            UNARY("/etcdserverpb.KV/Compact", req, etcdserverpb__compaction_response__descriptor);
        int r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

/* ---- Auth ---- */

static int simple_call(etcd_client *c, struct call *call)
{
        int r = rpc_any(c, call, c->call_timeout_ms);
        if (r < 0)
                return r;
        protobuf_c_message_free_unpacked(call->resp, NULL);
        return 0;
}

int etcd_auth_enable(etcd_client *c)
{
        Etcdserverpb__AuthEnableRequest req = ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;
        struct call call = UNARY("/etcdserverpb.Auth/AuthEnable", req,
                                 etcdserverpb__auth_enable_response__descriptor);
        int r = simple_call(c, &call);
        if (r == 0)
                c->auth_not_enabled = false; /* authenticate on the next call */
        return r;
}

int etcd_auth_disable(etcd_client *c)
{
        Etcdserverpb__AuthDisableRequest req = ETCDSERVERPB__AUTH_DISABLE_REQUEST__INIT;
        struct call call = UNARY("/etcdserverpb.Auth/AuthDisable", req,
                                 etcdserverpb__auth_disable_response__descriptor);
        return simple_call(c, &call);
}

int etcd_auth_status(etcd_client *c, bool *ret_enabled)
{
        Etcdserverpb__AuthStatusRequest req = ETCDSERVERPB__AUTH_STATUS_REQUEST__INIT;
        struct call call = READ("/etcdserverpb.Auth/AuthStatus", req,
                                etcdserverpb__auth_status_response__descriptor);
        int r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__AuthStatusResponse *resp = (void *)call.resp;
        *ret_enabled = resp->enabled;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

int etcd_user_add(etcd_client *c, const char *name, const char *password)
{
        if (isempty(name)) {
                set_error(c, "UserAdd: the user name must not be empty");
                return -EINVAL;
        }
        Etcdserverpb__AuthUserAddRequest req = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
        req.name = (char *)name;
        req.password = (char *)(password ? password : "");
        struct call call = UNARY("/etcdserverpb.Auth/UserAdd", req,
                                 etcdserverpb__auth_user_add_response__descriptor);
        return simple_call(c, &call);
}

int etcd_role_add(etcd_client *c, const char *name)
{
        if (isempty(name)) {
                set_error(c, "RoleAdd: the role name must not be empty");
                return -EINVAL;
        }
        Etcdserverpb__AuthRoleAddRequest req = ETCDSERVERPB__AUTH_ROLE_ADD_REQUEST__INIT;
        req.name = (char *)name;
        struct call call = UNARY("/etcdserverpb.Auth/RoleAdd", req,
                                 etcdserverpb__auth_role_add_response__descriptor);
        return simple_call(c, &call);
}

int etcd_user_grant_role(etcd_client *c, const char *user, const char *role)
{
        if (isempty(user) || isempty(role)) {
                set_error(c, "UserGrantRole: user and role must not be empty");
                return -EINVAL;
        }
        Etcdserverpb__AuthUserGrantRoleRequest req =
            ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;
        req.user = (char *)user;
        req.role = (char *)role;
        struct call call = UNARY("/etcdserverpb.Auth/UserGrantRole", req,
                                 etcdserverpb__auth_user_grant_role_response__descriptor);
        return simple_call(c, &call);
}

int etcd_user_change_password(etcd_client *c, const char *name, const char *password)
{
        if (isempty(name) || isempty(password)) {
                set_error(c, "UserChangePassword: user name and password must not be empty");
                return -EINVAL;
        }
        Etcdserverpb__AuthUserChangePasswordRequest req =
            ETCDSERVERPB__AUTH_USER_CHANGE_PASSWORD_REQUEST__INIT;
        req.name = (char *)name;
        req.password = (char *)password;
        struct call call = UNARY("/etcdserverpb.Auth/UserChangePassword", req,
                                 etcdserverpb__auth_user_change_password_response__descriptor);
        return simple_call(c, &call);
}

int etcd_user_list(etcd_client *c, char ***ret_users, size_t *ret_n)
{
        Etcdserverpb__AuthUserListRequest req = ETCDSERVERPB__AUTH_USER_LIST_REQUEST__INIT;
        struct call call = READ("/etcdserverpb.Auth/UserList", req,
                                etcdserverpb__auth_user_list_response__descriptor);
        int r = rpc_any(c, &call, c->call_timeout_ms);
        if (r < 0)
                return r;
        Etcdserverpb__AuthUserListResponse *resp = (void *)call.resp;
        char **users = xcalloc(resp->n_users + 1, sizeof(char *));
        for (size_t i = 0; i < resp->n_users; i++)
                users[i] = xstrdup(resp->users[i]);
        *ret_n = resp->n_users;
        *ret_users = users;
        protobuf_c_message_free_unpacked(call.resp, NULL);
        return 0;
}

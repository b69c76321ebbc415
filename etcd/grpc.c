/*
 * gRPC over libcurl HTTP/2. The design decision to know: responses are
 * parsed incrementally in curl's write callback by a small frame state
 * machine (5-byte prefix, then the message), and each complete message is
 * handed to the caller's callback at once. A server stream such as etcd's
 * Snapshot therefore never sits in memory whole, only one message at a
 * time. gRPC's status arrives last, in HTTP/2 trailers, which libcurl
 * passes to the header callback after the body; a "trailers-only" reply
 * (an error before any message) carries it in the ordinary headers, which
 * go through the same callback, so one parser handles both.
 *
 * The transfer is driven on a multi handle of our own, not with
 * curl_easy_perform: libcurl 7.88's HTTP/2 can hold the end of an answer in
 * its buffer with no timer set, and curl_easy_perform then waits a whole
 * second on a quiet socket before it looks again (drive() says how the
 * loop avoids that and counts any wait that slips through).
 *
 * curl's own error text never leaves this file: transport failures become
 * an etcd_err code plus a sentence written here. The server's grpc-message
 * is outside input: it is percent-decoded and then escaped (util/escape.h)
 * here, so no control character from it reaches an error message or a log.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/errors.h"
#include "etcd/grpc.h"
#include "util/escape.h"
#include "util/http.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

struct grpc_conn {
        CURL *curl;
        CURLM *multi; /* drives curl: the connection cache lives here (see drive) */
        uint64_t timer_wakeups;
        char *url;
        bool tls;
        bool h2_up; /* an HTTP/2 connection is open (see pick_http_version) */
        char *cacert;
        char *cert;
        char *key;
};

#define USER_AGENT "gitcd/" GITCD_VERSION " grpc-c"

/* TCP connections the process's calls opened (grpc_connections_opened). */
static _Atomic uint64_t connections_opened;

/* The state of one call, shared by curl's callbacks. */
struct call_state {
        const grpc_call_opts *opts;
        grpc_msg_fn on_msg;
        void *userdata;
        grpc_result *res;
        int cb_err; /* code returned by on_msg, or a framing error */

        grpc_frames frames;

        long http_status;
        long http_status_line; /* from the status line, known before the body */
        bool saw_grpc_content_type;
        bool saw_headers;
        uint64_t delivered; /* header lines and body bytes handed to us so far */
};

/*
 * The handle set-up of a call (util/http.h): etcd members are reached
 * directly, never through a proxy; opts NULL: the connection's alone.
 */
static http_opts call_http_opts(const grpc_conn *conn, const grpc_call_opts *opts, char *errbuf)
{
        http_opts o = {
            .proxy = HTTP_PROXY_NONE,
            .user_agent = USER_AGENT,
            .errbuf = errbuf,
            .tls = {.ca_file = conn->cacert, .cert_file = conn->cert, .key_file = conn->key},
        };
        if (opts) {
                o.timeout_ms = (long)MAX(opts->timeout_ms, 1);
                o.connect_timeout_ms =
                    (long)MAX(MIN(opts->connect_timeout_ms, opts->timeout_ms), 1);
        }
        return o;
}

int grpc_conn_new(const char *url, const grpc_tls_opts *tls, grpc_conn **ret_conn)
{
        if (isempty(url))
                return -EINVAL;
        bool is_tls = strneq(url, "https://", 8);
        if (!is_tls && !strneq(url, "http://", 7))
                return -EINVAL;
        grpc_conn *c = XNEW(grpc_conn);
        c->url = xstrdup(url);
        size_t n = strlen(c->url);
        while (n > 0 && c->url[n - 1] == '/')
                c->url[--n] = '\0';
        c->tls = is_tls;
        if (tls) {
                c->cacert = xstrdup_null(tls->cacert);
                c->cert = xstrdup_null(tls->cert);
                c->key = xstrdup_null(tls->key);
        }
        http_opts o = call_http_opts(c, NULL, NULL);
        c->curl = http_handle_new(&o);
        c->multi = c->curl ? curl_multi_init() : NULL;
        if (!c->multi) {
                grpc_conn_free(c);
                return -ENOMEM;
        }
        *ret_conn = c;
        return 0;
}

void grpc_conn_free(grpc_conn *conn)
{
        if (!conn)
                return;
        curl_multi_cleanup(conn->multi); /* first: it closes the kept connection */
        curl_easy_cleanup(conn->curl);
        free(conn->url);
        free(conn->cacert);
        free(conn->cert);
        free(conn->key);
        free(conn);
}

const char *grpc_conn_url(const grpc_conn *conn)
{
        return conn->url;
}

uint64_t grpc_conn_timer_wakeups(const grpc_conn *conn)
{
        return conn->timer_wakeups;
}

uint64_t grpc_connections_opened(void)
{
        return atomic_load(&connections_opened);
}

void grpc_result_release(grpc_result *res)
{
        if (!res)
                return;
        free(res->grpc_message);
        free(res->detail);
        res->grpc_message = NULL;
        res->detail = NULL;
}

static int hexval(int ch)
{
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

char *grpc_percent_decode(const char *s)
{
        size_t n = strlen(s);
        char *out = xmalloc(n + 1);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                int hi, lo;
                if (s[i] == '%' && i + 2 < n && (hi = hexval((unsigned char)s[i + 1])) >= 0 &&
                    (lo = hexval((unsigned char)s[i + 2])) >= 0) {
                        out[o++] = (char)(hi * 16 + lo);
                        i += 2;
                } else {
                        out[o++] = s[i];
                }
        }
        out[o] = '\0';
        return out;
}

/* Header and trailer lines: "HTTP/2 200", "grpc-status: 14", "grpc-message: ...". */
static size_t on_header(char *data, size_t size, size_t nitems, void *userdata)
{
        struct call_state *st = userdata;
        size_t len = size * nitems;
        st->saw_headers = true;
        st->delivered++;

        /* Strip the CRLF and split name: value. */
        size_t end = len;
        while (end > 0 && (data[end - 1] == '\r' || data[end - 1] == '\n'))
                end--;
        if (end >= 5 && strneq(data, "HTTP/", 5)) {
                const char *sp = memchr(data, ' ', end);
                if (sp)
                        st->http_status_line = strtol(sp + 1, NULL, 10);
                st->saw_grpc_content_type = false; /* a new response starts */
                return len;
        }
        const char *colon = memchr(data, ':', end);
        if (!colon)
                return len;
        size_t name_len = (size_t)(colon - data);
        const char *v = colon + 1;
        while (v < data + end && (*v == ' ' || *v == '\t'))
                v++;
        size_t v_len = (size_t)(data + end - v);

        if (name_len == 11 && strncasecmp(data, "grpc-status", 11) == 0) {
                char buf[16];
                size_t k = MIN(v_len, sizeof(buf) - 1);
                memcpy(buf, v, k);
                buf[k] = '\0';
                st->res->grpc_status = (int)strtol(buf, NULL, 10);
        } else if (name_len == 12 && strncasecmp(data, "grpc-message", 12) == 0) {
                /* the server's text: decoded, then escaped before anyone prints it */
                _cleanup_free_ char *raw = xstrndup(v, v_len);
                _cleanup_free_ char *decoded = grpc_percent_decode(raw);
                free(st->res->grpc_message);
                st->res->grpc_message = str_escape(decoded);
        } else if (name_len == 12 && strncasecmp(data, "content-type", 12) == 0) {
                if (v_len >= 16 && strncasecmp(v, "application/grpc", 16) == 0)
                        st->saw_grpc_content_type = true;
        }
        return len;
}

/* Feed response bytes to the frame parser; complete messages go to on_msg. */
void grpc_frames_init(grpc_frames *f, size_t max_message)
{
        *f = (grpc_frames){.max_message = max_message};
}

void grpc_frames_release(grpc_frames *f)
{
        free(f->msg);
        f->msg = NULL;
        f->msg_alloc = 0;
}

bool grpc_frames_partial(const grpc_frames *f)
{
        return f->prefix_len != 0 || f->in_message;
}

int grpc_frames_feed(grpc_frames *f, const uint8_t *data, size_t len, grpc_msg_fn on_msg,
                     void *userdata)
{
        const uint8_t *p = data;
        size_t left = len;
        while (left > 0) {
                if (!f->in_message) {
                        size_t k = MIN(5 - f->prefix_len, left);
                        memcpy(f->prefix + f->prefix_len, p, k);
                        f->prefix_len += k;
                        p += k;
                        left -= k;
                        if (f->prefix_len < 5)
                                break;
                        if (f->prefix[0] != 0)
                                return ETCD_ERR_PROTOCOL; /* compressed: we never ask for it */
                        f->msg_len = ((size_t)f->prefix[1] << 24) | ((size_t)f->prefix[2] << 16) |
                                     ((size_t)f->prefix[3] << 8) | (size_t)f->prefix[4];
                        if (f->msg_len > f->max_message)
                                return ETCD_ERR_RESOURCE_EXHAUSTED;
                        f->msg_have = 0;
                        if (f->msg_len > f->msg_alloc) {
                                f->msg = xrealloc(f->msg, f->msg_len);
                                f->msg_alloc = f->msg_len;
                        }
                        f->prefix_len = 0;
                        f->in_message = true;
                }
                size_t k = MIN(f->msg_len - f->msg_have, left);
                if (k > 0) {
                        memcpy(f->msg + f->msg_have, p, k);
                        f->msg_have += k;
                        p += k;
                        left -= k;
                }
                if (f->msg_have < f->msg_len)
                        break;
                f->in_message = false;
                if (on_msg) {
                        static const uint8_t empty[1];
                        int r = on_msg(f->msg_len ? f->msg : empty, f->msg_len, userdata);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* Feed response bytes to the frame parser; complete messages go to on_msg. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct call_state *st = userdata;
        size_t len = size * nmemb;
        st->res->bytes_in += len;
        st->delivered += len;
        if (!st->saw_grpc_content_type || st->http_status_line != 200)
                return len; /* not a gRPC answer: reported after the transfer */
        int r = grpc_frames_feed(&st->frames, (const uint8_t *)data, len, st->on_msg, st->userdata);
        if (r < 0) {
                st->cb_err = r;
                return 0; /* curl ends the transfer with CURLE_WRITE_ERROR */
        }
        return len;
}

/* Turn a curl failure into an etcd_err and a sentence for a person. */
static int transport_error(grpc_conn *conn, CURLcode cc, const char *errbuf, struct call_state *st)
{
        grpc_result *res = st->res;
        bool nothing_back = !st->saw_headers && res->bytes_in == 0;
        switch (cc) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
                res->failover_ok = true;
                res->no_connection = true;
                res->detail = xasprintf("cannot connect to %s", conn->url);
                return ETCD_ERR_UNREACHABLE;
        case CURLE_OPERATION_TIMEDOUT:
                res->failover_ok = nothing_back;
                res->detail = xasprintf("%s did not answer within %lld ms", conn->url,
                                        (long long)st->opts->timeout_ms);
                return ETCD_ERR_TIMEOUT;
        case CURLE_PEER_FAILED_VERIFICATION:
                res->detail = xasprintf("the certificate of %s is not trusted by the given CA or "
                                        "does not match its name",
                                        conn->url);
                return ETCD_ERR_TLS;
        case CURLE_SSL_CACERT_BADFILE:
                res->detail = xasprintf("cannot read the CA bundle %s", conn->cacert ?: "(system)");
                return ETCD_ERR_TLS_FILES;
        case CURLE_SSL_CERTPROBLEM:
                res->detail =
                    xasprintf("cannot use the client certificate %s or its key", conn->cert ?: "");
                return ETCD_ERR_TLS_FILES;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM: {
                /* A TLS server that wants a client certificate ends the handshake
                 * (TLS 1.2), or completes it and then sends an alert and closes
                 * (TLS 1.3), which curl sees as a failed read or write. */
                curl_off_t connect_us = 0, tls_us = 0;
                curl_easy_getinfo(conn->curl, CURLINFO_CONNECT_TIME_T, &connect_us);
                curl_easy_getinfo(conn->curl, CURLINFO_APPCONNECT_TIME_T, &tls_us);
                long new_conns = 0;
                curl_easy_getinfo(conn->curl, CURLINFO_NUM_CONNECTS, &new_conns);
                /* a fresh TLS connection dropped before any answer: refused by TLS */
                bool handshake_failed =
                    conn->tls && new_conns > 0 && connect_us > 0 && (tls_us == 0 || nothing_back);
                bool alert = conn->tls && errbuf &&
                             (strstr(errbuf, "certificate required") ||
                              strstr(errbuf, "handshake failure") ||
                              strstr(errbuf, "bad certificate") || strstr(errbuf, "unknown ca"));
                if ((handshake_failed || alert) && !conn->cert) {
                        res->detail = xasprintf("%s rejected the TLS connection: it requires a "
                                                "client certificate (--cert/--key)",
                                                conn->url);
                        return ETCD_ERR_TLS;
                }
                if (handshake_failed || alert) {
                        res->detail = xasprintf("%s rejected the TLS connection: it does not "
                                                "accept the client certificate %s",
                                                conn->url, conn->cert);
                        return ETCD_ERR_TLS;
                }
                res->failover_ok = nothing_back;
                res->detail =
                    xasprintf("the connection to %s broke%s", conn->url,
                              conn->tls ? "" : " (if it is a TLS endpoint, use https://)");
                return nothing_back ? ETCD_ERR_UNREACHABLE : ETCD_ERR_UNAVAILABLE;
        }
        default:
                res->detail =
                    xasprintf("call to %s failed (transport error %d)", conn->url, (int)cc);
                return ETCD_ERR_UNAVAILABLE;
        }
}

/* A transfer that ended because the connection broke, not by an answer. */
static bool broke_silently(CURLcode cc)
{
        return cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR || cc == CURLE_GOT_NOTHING ||
               cc == CURLE_PARTIAL_FILE || cc == CURLE_HTTP2 || cc == CURLE_HTTP2_STREAM;
}

/*
 * The HTTP version to ask curl for. https:// negotiates HTTP/2 with ALPN.
 * Plain http:// needs "prior knowledge" (etcd does not answer h2c upgrades)
 * for a new connection, but libcurl 7.88 breaks when prior knowledge is
 * asked again on a connection it reuses (curl issue 10634, fixed in
 * 7.89), so a call that reuses the open connection asks for plain
 * HTTP/2, which leaves the established session alone. Calls that open a
 * connection force a fresh one, so prior knowledge never meets reuse.
 */
static long pick_http_version(const grpc_conn *conn, bool reuse)
{
        if (conn->tls)
                return CURL_HTTP_VERSION_2TLS;
        return reuse ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
}

/* The length-prefixed request frame (uncompressed). Newly allocated, req_len + 5 bytes. */
static uint8_t *request_frame(const uint8_t *req, size_t req_len)
{
        uint8_t *frame = xmalloc(req_len + 5);
        frame[0] = 0;
        frame[1] = (uint8_t)(req_len >> 24);
        frame[2] = (uint8_t)(req_len >> 16);
        frame[3] = (uint8_t)(req_len >> 8);
        frame[4] = (uint8_t)req_len;
        if (req_len)
                memcpy(frame + 5, req, req_len);
        return frame;
}

/* The call's headers: gRPC's, its deadline, the auth token; curl's own Expect and Accept off. */
static struct curl_slist *call_headers(const grpc_call_opts *opts)
{
        struct curl_slist *headers = NULL;
        char timeout_hdr[64];
        /* gRPC allows at most 8 digits: switch to seconds for very long deadlines */
        long long tmo = MAX(opts->timeout_ms, 1);
        if (tmo <= 99999999)
                snprintf(timeout_hdr, sizeof(timeout_hdr), "grpc-timeout: %lldm", tmo);
        else
                snprintf(timeout_hdr, sizeof(timeout_hdr), "grpc-timeout: %lldS",
                         MIN(tmo / 1000, 99999999LL));
        headers = curl_slist_append(headers, "content-type: application/grpc+proto");
        headers = curl_slist_append(headers, "te: trailers");
        headers = curl_slist_append(headers, timeout_hdr);
        headers = curl_slist_append(headers, "Expect:");
        headers = curl_slist_append(headers, "Accept:");
        if (opts->token) {
                char *token_hdr = xasprintf("token: %s", opts->token);
                headers = curl_slist_append(headers, token_hdr); /* copied */
                free(token_hdr);
        }
        return headers;
}

/*
 * How long one wait for the socket may last when libcurl names no timer of
 * its own: a safety net only (see drive), as in curl_easy_perform.
 */
#define SAFETY_WAIT_MS 1000

/*
 * The transfer of conn's handle, driven on conn's multi handle. libcurl
 * 7.88's HTTP/2 reads up to 32 KB from the socket at once but hands a
 * transfer at most its buffer's worth per run; the rest (often the last
 * DATA frame and the trailers with END_STREAM) stays in libcurl's buffer
 * without a timer, so curl_easy_perform, waiting only on the socket, sat
 * in poll() for its whole 1 s fallback before looking again. Here a run
 * that handed us anything (a header line, body bytes) is followed at once
 * by another, and only a run that handed us nothing waits on the socket;
 * a run after a wait that timed out with no timer of libcurl's and that
 * then hands us something counts as a timer wake-up (grpc_conn_timer_wakeups):
 * time the call lost to a timer, which this loop exists to keep at 0.
 */
static CURLcode drive(grpc_conn *conn, struct call_state *st)
{
        CURLM *m = conn->multi;
        if (curl_multi_add_handle(m, conn->curl) != CURLM_OK)
                return CURLE_FAILED_INIT;
        CURLcode cc = CURLE_FAILED_INIT;
        bool waited_on_timer = false;
        for (;;) {
                uint64_t before = st->delivered;
                int running = 0;
                if (curl_multi_perform(m, &running) != CURLM_OK)
                        break;
                bool delivered = st->delivered != before;
                if (waited_on_timer && delivered)
                        conn->timer_wakeups++;
                waited_on_timer = false;
                if (!running) {
                        CURLMsg *msg;
                        int left;
                        while ((msg = curl_multi_info_read(m, &left)))
                                if (msg->msg == CURLMSG_DONE && msg->easy_handle == conn->curl)
                                        cc = msg->data.result;
                        break;
                }
                if (delivered)
                        continue; /* libcurl may hold more of what it read: ask again */
                long curl_ms = -1;
                curl_multi_timeout(m, &curl_ms);
                int ready = 0;
                if (curl_multi_poll(m, NULL, 0, SAFETY_WAIT_MS, &ready) != CURLM_OK)
                        break;
                waited_on_timer = ready == 0 && (curl_ms < 0 || curl_ms >= SAFETY_WAIT_MS);
        }
        curl_multi_remove_handle(m, conn->curl);
        return cc;
}

/*
 * The call performed on conn's handle (set up by grpc_call), on the kept
 * HTTP/2 connection when there is one, and once again on a fresh one when
 * the kept one turns out to be gone. The curl code of the last attempt.
 */
static CURLcode perform(grpc_conn *conn, struct call_state *st, char *errbuf)
{
        CURL *c = conn->curl;
        CURLcode cc;
        for (int attempt = 0;; attempt++) {
                bool reuse = conn->h2_up && attempt == 0;
                curl_easy_setopt(c, CURLOPT_HTTP_VERSION, pick_http_version(conn, reuse));
                curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, (long)!reuse);
                cc = drive(conn, st);
                long hv = 0, opened = 0;
                if (curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0)
                        atomic_fetch_add(&connections_opened, (uint64_t)opened);
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st->http_status);
                curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &hv);
                conn->h2_up = cc == CURLE_OK && hv == CURL_HTTP_VERSION_2_0;
                if (!reuse)
                        break;
                /* The kept connection was gone and curl opened an HTTP/1.1 one,
                 * which etcd answers with a 404 without running anything; or it
                 * broke before a byte of the answer came back: redo the call
                 * once on a fresh connection to the same member. (A call that
                 * broke with nothing back may go to another member anyway, so
                 * this sends nothing a fail-over would not.) */
                bool downgraded = !conn->tls && cc == CURLE_OK && hv != CURL_HTTP_VERSION_2_0;
                if (!downgraded &&
                    !(broke_silently(cc) && !st->saw_headers && st->res->bytes_in == 0))
                        break;
                log_debug("etcd: %s: kept connection was closed (curl %d); reconnecting", conn->url,
                          (int)cc);
                grpc_result *res = st->res;
                grpc_result_release(res);
                *res = (grpc_result){.grpc_status = -1};
                grpc_frames_release(&st->frames);
                *st = (struct call_state){
                    .opts = st->opts, .on_msg = st->on_msg, .userdata = st->userdata, .res = res};
                grpc_frames_init(&st->frames, st->opts->max_message);
                errbuf[0] = '\0';
        }
        return cc;
}

/* What the call came to: etcd's error for its gRPC status, or why it is not one. */
static int call_outcome(grpc_conn *conn, const char *path, struct call_state *st, CURLcode cc,
                        const char *errbuf)
{
        grpc_result *res = st->res;
        if (st->cb_err < 0 && cc == CURLE_WRITE_ERROR) {
                int r = st->cb_err;
                if (r == ETCD_ERR_PROTOCOL)
                        res->detail = xasprintf("%s sent a compressed gRPC message", conn->url);
                else if (r == ETCD_ERR_RESOURCE_EXHAUSTED)
                        res->detail = xasprintf("%s sent a message larger than %zu bytes",
                                                conn->url, st->opts->max_message);
                return r;
        }
        if (cc != CURLE_OK) {
                log_debug("etcd: %s%s: curl %d: %s", conn->url, path, (int)cc, errbuf);
                return transport_error(conn, cc, errbuf, st);
        }
        if (st->http_status != 200 || !st->saw_grpc_content_type) {
                res->detail = xasprintf("%s is not a gRPC server (HTTP status %ld)", conn->url,
                                        st->http_status);
                return ETCD_ERR_PROTOCOL;
        }
        if (res->grpc_status < 0) {
                res->detail = xasprintf("%s ended the call without a gRPC status", conn->url);
                return ETCD_ERR_PROTOCOL;
        }
        if (grpc_frames_partial(&st->frames)) {
                res->detail = xasprintf("%s ended the call in the middle of a message", conn->url);
                return ETCD_ERR_PROTOCOL;
        }
        return etcd_err_from_grpc(res->grpc_status, res->grpc_message);
}

int grpc_call(grpc_conn *conn, const char *path, const uint8_t *req, size_t req_len,
              const grpc_call_opts *opts, grpc_msg_fn on_msg, void *userdata, grpc_result *res)
{
        *res = (grpc_result){.grpc_status = -1};
        struct call_state st = {
            .opts = opts,
            .on_msg = on_msg,
            .userdata = userdata,
            .res = res,
        };
        grpc_frames_init(&st.frames, opts->max_message);
        char errbuf[CURL_ERROR_SIZE] = "";
        uint8_t *frame = request_frame(req, req_len);
        char *url = xasprintf("%s%s", conn->url, path);
        struct curl_slist *headers = call_headers(opts);
        int r;

        CURL *c = conn->curl;
        http_opts ho = call_http_opts(conn, opts, errbuf);
        if (http_setup(c, &ho) < 0) {
                res->detail = xasprintf("call to %s: libcurl refused the HTTP set-up", conn->url);
                r = ETCD_ERR_INTERNAL;
        } else {
                curl_easy_setopt(c, CURLOPT_URL, url);
                curl_easy_setopt(c, CURLOPT_POST, 1L);
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, frame);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(req_len + 5));
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
                curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
                curl_easy_setopt(c, CURLOPT_HEADERDATA, &st);
                curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
                curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);
                CURLcode cc = perform(conn, &st, errbuf);
                curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
                r = call_outcome(conn, path, &st, cc, errbuf);
        }
        curl_slist_free_all(headers);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
        free(frame);
        grpc_frames_release(&st.frames);
        free(url);
        return r;
}

/* ---- a plain GET on the connection (grpc_conn_get) ---------------------- */

typedef struct get_state {
        struct call_state st; /* drive()'s: only delivered is used */
        strbuf body;
        size_t max;
} get_state;

static size_t get_on_header(char *data, size_t size, size_t nitems, void *userdata)
{
        (void)data;
        get_state *g = userdata;
        g->st.delivered++;
        return size * nitems;
}

static size_t get_on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
        get_state *g = userdata;
        size_t n = size * nmemb;
        g->st.delivered++;
        if (g->body.len + n > g->max)
                return 0; /* more than asked for: the transfer ends with an error */
        sb_append_len(&g->body, data, n);
        return n;
}

int grpc_conn_get(grpc_conn *conn, const char *path, long timeout_ms, size_t max, char **ret_body,
                  size_t *ret_len, long *ret_status, char **ret_error)
{
        *ret_body = NULL;
        *ret_len = 0;
        *ret_status = 0;
        *ret_error = NULL;
        if (!conn->tls) {
                *ret_error = xasprintf("%s serves gRPC only over plain HTTP/2", conn->url);
                return -EPROTONOSUPPORT;
        }
        char errbuf[CURL_ERROR_SIZE] = "";
        grpc_call_opts co = {.timeout_ms = timeout_ms, .connect_timeout_ms = timeout_ms};
        http_opts ho = call_http_opts(conn, &co, errbuf);
        CURL *c = conn->curl;
        if (http_setup(c, &ho) < 0) {
                *ret_error =
                    xasprintf("GET %s%s: libcurl refused the HTTP set-up", conn->url, path);
                return -EIO;
        }
        _cleanup_free_ char *url = xasprintf("%s%s", conn->url, path);
        get_state g = {.body = STRBUF_INIT, .max = max};
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, get_on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &g);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, get_on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
        CURLcode cc = CURLE_OK;
        long hv = 0;
        for (int attempt = 0;; attempt++) {
                bool reuse = conn->h2_up && attempt == 0;
                curl_easy_setopt(c, CURLOPT_HTTP_VERSION, pick_http_version(conn, reuse));
                curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, (long)!reuse);
                cc = drive(conn, &g.st);
                long opened = 0;
                if (curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0)
                        atomic_fetch_add(&connections_opened, (uint64_t)opened);
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, ret_status);
                curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &hv);
                conn->h2_up = cc == CURLE_OK && hv == CURL_HTTP_VERSION_2_0;
                /* the kept connection was gone before a byte came back: once on a fresh one */
                if (!reuse || !broke_silently(cc) || g.st.delivered > 0)
                        break;
                sb_reset(&g.body);
                errbuf[0] = '\0';
        }
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
        /* the handle goes back to its gRPC calls' callbacks at their set-up: none are left here */
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, NULL);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, NULL);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, NULL);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, NULL);
        if (cc != CURLE_OK) {
                *ret_error =
                    xasprintf("GET %s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc));
                sb_release(&g.body);
                return -EIO;
        }
        *ret_len = g.body.len;
        *ret_body = sb_detach(&g.body);
        return 0;
}

/*
 * Starting gitcd's HTTP servers on libmicrohttpd (see httpd.h).
 *
 * Design: the options are collected into one MHD_OPTION_ARRAY so that an
 * optional one (TLS, a completion callback, a per-address limit) is simply
 * left out, not passed as a placeholder in a variadic call.
 *
 * The guard (httpd.h) keeps the connections in libmicrohttpd's socket
 * contexts, in accept order, and acts only from libmicrohttpd's callbacks,
 * which all run on its one polling thread: no lock. It closes a pending
 * connection with shutdown(2) on its socket, which libmicrohttpd still
 * owns and closes itself at its next look, so a descriptor is never closed
 * twice or under its feet; the deadlines are looked at when a connection
 * comes in, the one moment a slot is wanted. libmicrohttpd's idle timeout
 * (per connection: shorter while pending) closes the rest.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "util/fs.h"
#include "util/httpd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAX_CONFIG_FILE_BYTES (1024 * 1024)

_printf_(2, 0) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        size_t n = strlen(msg);
        while (n && msg[n - 1] == '\n')
                msg[--n] = 0;
        log_debug("%s: %s", (const char *)cls, msg);
}

int httpd_parse_listen(const char *listen, struct addrinfo **ret)
{
        const char *colon = strrchr(listen, ':');
        if (!colon || !colon[1])
                return -EINVAL;
        _cleanup_free_ char *host = xstrndup(listen, (size_t)(colon - listen));
        if (host[0] == '[') {
                size_t n = strlen(host);
                if (n < 2 || host[n - 1] != ']')
                        return -EINVAL;
                memmove(host, host + 1, n - 2);
                host[n - 2] = 0;
        }
        for (const char *p = colon + 1; *p; p++)
                if (*p < '0' || *p > '9')
                        return -EINVAL;
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
        if (getaddrinfo(*host ? host : NULL, colon + 1, &hints, ret) != 0)
                return -EINVAL;
        return 0;
}

int httpd_read_file(const char *path, const char *what, char **ret, char **ret_err)
{
        size_t len = 0;
        *ret = NULL;
        int k = read_file(path, MAX_CONFIG_FILE_BYTES, ret, &len);
        if (k < 0)
                *ret_err = xasprintf("cannot read the %s %s: %s", what, path, strerror(-k));
        return k;
}

int httpd_read_secret(const char *path, const char *what, char **ret, char **ret_err)
{
        size_t len = 0;
        *ret = NULL;
        return read_secret_file(path, what, MAX_CONFIG_FILE_BYTES, ret, &len, ret_err);
}

int httpd_read_token(const char *path, char **ret, char **ret_err)
{
        int k = httpd_read_secret(path, "token file", ret, ret_err);
        if (k < 0)
                return k;
        (*ret)[strcspn(*ret, "\r\n")] = 0;
        if (!**ret) {
                *ret_err = xasprintf("the token file %s is empty", path);
                free(*ret);
                *ret = NULL;
                return -EINVAL;
        }
        return 0;
}

/* ---- the guard (runs on libmicrohttpd's one thread: no lock) ---- */

/* One accepted connection, from its accept to its close (libmicrohttpd's socket context). */
typedef struct guarded {
        struct guarded *prev, *next; /* accept order, oldest first */
        struct httpd *server;
        struct MHD_Connection *conn;
        int fd;
        char peer[INET6_ADDRSTRLEN]; /* the client address, without its port */
        int64_t deadline_ms;         /* when pending */
        bool trusted;
        bool closing; /* shut down by the guard: its close is on the way */
} guarded;

struct httpd {
        struct MHD_Daemon *mhd;
        httpd_config c;
        guarded *oldest, *newest;
        size_t n_pending;                                  /* neither trusted nor closing */
        unsigned long accepted, evicted, expired, trusted; /* read under the atomics below */
};

static void peer_of(struct MHD_Connection *conn, char ret[INET6_ADDRSTRLEN])
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        ret[0] = '\0';
        if (sa && sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, ret,
                          INET6_ADDRSTRLEN);
        else if (sa && sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                          ret, INET6_ADDRSTRLEN);
}

/*
 * Close a pending connection: shutdown() makes libmicrohttpd see the end
 * of its stream and close it at its next look (the descriptor stays its).
 */
static void drop(httpd *h, guarded *g, unsigned long *counter)
{
        assert(!g->trusted && !g->closing);
        (void)shutdown(g->fd, SHUT_RDWR);
        g->closing = true;
        h->n_pending--;
        __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}

static size_t pending_of(const httpd *h, const char *peer, guarded **ret_oldest)
{
        size_t n = 0;
        *ret_oldest = NULL;
        for (guarded *g = h->oldest; g; g = g->next)
                if (!g->trusted && !g->closing && streq(g->peer, peer)) {
                        if (!n)
                                *ret_oldest = g;
                        n++;
                }
        return n;
}

/* A new connection came in: make the room the limits say (see httpd.h). */
static void make_room(httpd *h, const guarded *fresh)
{
        int64_t now = now_mono_ms();
        for (guarded *g = h->oldest; g; g = g->next)
                if (g != fresh && !g->trusted && !g->closing && now >= g->deadline_ms)
                        drop(h, g, &h->expired);
        guarded *oldest = NULL;
        if (h->c.per_peer_pending && pending_of(h, fresh->peer, &oldest) > h->c.per_peer_pending)
                drop(h, oldest, &h->evicted);
        if (h->c.max_pending && h->n_pending > h->c.max_pending) {
                /* the oldest pending connection of the address that holds the most */
                guarded *victim = NULL;
                size_t most = 0;
                for (guarded *g = h->oldest; g; g = g->next) {
                        if (g->trusted || g->closing || g == fresh)
                                continue;
                        guarded *first = NULL;
                        size_t n = pending_of(h, g->peer, &first);
                        if (n > most) {
                                most = n;
                                victim = first == fresh ? g : first;
                        }
                }
                if (victim)
                        drop(h, victim, &h->evicted);
        }
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        httpd *h = cls;
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                guarded *g = XNEW(guarded);
                g->server = h;
                const union MHD_ConnectionInfo *ci =
                    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                g->conn = conn;
                g->fd = ci ? ci->connect_fd : -1;
                peer_of(conn, g->peer);
                g->deadline_ms = now_mono_ms() + (int64_t)h->c.deadline_s * 1000;
                g->prev = h->newest;
                if (h->newest)
                        h->newest->next = g;
                else
                        h->oldest = g;
                h->newest = g;
                h->n_pending++;
                __atomic_add_fetch(&h->accepted, 1, __ATOMIC_RELAXED);
                *socket_context = g;
                if (g->fd >= 0)
                        make_room(h, g);
                return;
        }
        guarded *g = *socket_context;
        if (!g)
                return;
        if (!g->trusted && !g->closing)
                h->n_pending--;
        if (g->prev)
                g->prev->next = g->next;
        else
                h->oldest = g->next;
        if (g->next)
                g->next->prev = g->prev;
        else
                h->newest = g->prev;
        free(g);
        *socket_context = NULL;
}

void httpd_trust(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        guarded *g = ci ? ci->socket_context : NULL;
        if (!g || g->trusted || g->closing)
                return;
        httpd *h = g->server;
        g->trusted = true;
        h->n_pending--;
        __atomic_add_fetch(&h->trusted, 1, __ATOMIC_RELAXED);
        unsigned timeout = h->c.trusted_timeout_s ? h->c.trusted_timeout_s : h->c.timeout_s;
        (void)MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, timeout);
}

int httpd_start(const httpd_config *c, httpd **ret, int *ret_port, char **ret_err)
{
        assert(c && c->listen && c->handler && c->log_prefix && ret && ret_port && ret_err);
        *ret = NULL;
        *ret_port = 0;
        struct addrinfo *ai = NULL;
        if (httpd_parse_listen(c->listen, &ai) < 0) {
                *ret_err =
                    xasprintf("--listen %s: expected host:port, [v6]:port or :port", c->listen);
                return -EINVAL;
        }
        httpd *h = XNEW(httpd);
        h->c = *c;
        unsigned limit = c->connection_limit ? c->connection_limit : c->max_pending + 16;
        /* epoll, not select(): every descriptor is served, however high its number */
        unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
        if (ai->ai_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        struct MHD_OptionItem opts[16];
        size_t n = 0;
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log,
                                            (void *)c->log_prefix};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, c->timeout_s, NULL};
        if (limit)
                opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, limit, NULL};
        if (c->per_ip_limit)
                opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                                    c->per_ip_limit, NULL};
        opts[n++] =
            (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, h};
        if (c->completed)
                opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED,
                                                    (intptr_t)c->completed, c->completed_cls};
        if (c->unescape)
                opts[n++] = (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK,
                                                    (intptr_t)c->unescape, NULL};
        if (c->cert_pem) {
                assert(c->key_pem);
                flags |= MHD_USE_TLS;
                opts[n++] =
                    (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)c->cert_pem};
                opts[n++] =
                    (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)c->key_pem};
        }
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        assert(n <= ARRAY_SIZE(opts));
        h->mhd = MHD_start_daemon(flags, 0, NULL, NULL, c->handler, c->handler_cls,
                                  MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
        freeaddrinfo(ai);
        if (!h->mhd) {
                free(h);
                *ret_err = xasprintf("cannot listen on %s (address in use, not local, or a "
                                     "TLS certificate and key that do not load)",
                                     c->listen);
                return -EADDRNOTAVAIL;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
        *ret_port = info ? info->port : 0;
        *ret = h;
        return 0;
}

void httpd_stop(httpd *h)
{
        if (!h)
                return;
        MHD_stop_daemon(h->mhd); /* every connection is closed, and notified, by now */
        while (h->oldest) {      /* should libmicrohttpd not have notified one */
                guarded *g = h->oldest;
                h->oldest = g->next;
                free(g);
        }
        free(h);
}

void httpd_get_stats(const httpd *h, httpd_stats *ret)
{
        assert(h && ret);
        *ret = (httpd_stats){
            .accepted = __atomic_load_n(&h->accepted, __ATOMIC_RELAXED),
            .evicted = __atomic_load_n(&h->evicted, __ATOMIC_RELAXED),
            .expired = __atomic_load_n(&h->expired, __ATOMIC_RELAXED),
            .trusted = __atomic_load_n(&h->trusted, __ATOMIC_RELAXED),
        };
}

enum MHD_Result httpd_reply(struct MHD_Connection *conn, unsigned status, const char *type,
                            char *body)
{
        assert(conn && type && body);
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (status == MHD_HTTP_UNAUTHORIZED)
                MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                        "Bearer realm=\"gitcd\"");
        enum MHD_Result ret = MHD_queue_response(conn, status, r);
        MHD_destroy_response(r);
        return ret;
}

bool httpd_bearer_ok(struct MHD_Connection *conn, const char *token)
{
        assert(conn && token);
        const char *auth =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
                return false;
        const char *given = auth + 7;
        size_t n = strlen(token);
        return strlen(given) == n && CRYPTO_memcmp(given, token, n) == 0;
}

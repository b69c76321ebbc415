/*
 * Starting gitcd's HTTP servers on libmicrohttpd (see httpd.h).
 *
 * Design: the options are collected into one MHD_OPTION_ARRAY so that an
 * optional one (TLS, a completion callback, a connection limit) is simply
 * left out, not passed as a placeholder in a variadic call.
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "util/fs.h"
#include "util/httpd.h"
#include "util/log.h"
#include "util/macro.h"
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

int httpd_start(const httpd_config *c, struct MHD_Daemon **ret, int *ret_port, char **ret_err)
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
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
        if (ai->ai_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        struct MHD_OptionItem opts[10];
        size_t n = 0;
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log,
                                            (void *)c->log_prefix};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, c->timeout_s, NULL};
        if (c->connection_limit)
                opts[n++] =
                    (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, c->connection_limit, NULL};
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
        struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, c->handler, c->handler_cls,
                                                MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
        freeaddrinfo(ai);
        if (!d) {
                *ret_err = xasprintf("cannot listen on %s (address in use, not local, or a "
                                     "TLS certificate and key that do not load)",
                                     c->listen);
                return -EADDRNOTAVAIL;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        *ret_port = info ? info->port : 0;
        *ret = d;
        return 0;
}

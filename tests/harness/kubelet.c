/*
 * The kubelet's container log endpoint for the node simulator: see
 * kubelet.h.
 */
#include "tests/harness/kubelet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "pki/pki.h"
#include "util/fs.h"
#include "util/httpd.h"
#include "util/macro.h"
#include "util/xalloc.h"

/* A log file is served up to its last 16 MiB, as a kubelet's rotated file would be. */
#define KUBELET_LOG_MAX (16u << 20)

struct kubelet_logs {
        char *dir;
        char *cert_pem;
        char *key_pem;
        httpd *server;
};

char *kubelet_logs_select(const char *text, long tail_lines, long limit_bytes)
{
        size_t n = strlen(text);
        const char *start = text;
        if (tail_lines >= 0) {
                /* the last tail_lines lines: a final newline ends the last line */
                size_t end = n > 0 && text[n - 1] == '\n' ? n - 1 : n;
                long seen = 0;
                start = text + n;
                if (tail_lines > 0) {
                        size_t i = end;
                        while (i > 0 && seen < tail_lines) {
                                i--;
                                if (text[i] == '\n' && ++seen == tail_lines) {
                                        i++;
                                        break;
                                }
                        }
                        start = text + (seen < tail_lines ? 0 : i);
                }
        }
        size_t len = strlen(start);
        if (limit_bytes >= 0 && (size_t)limit_bytes < len)
                len = (size_t)limit_bytes;
        return xstrndup(start, len);
}

/* The last KUBELET_LOG_MAX bytes of a file, NUL-terminated. */
static int read_tail(const char *path, char **ret)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        off_t from = st.st_size > (off_t)KUBELET_LOG_MAX ? st.st_size - (off_t)KUBELET_LOG_MAX : 0;
        size_t want = (size_t)(st.st_size - from), got = 0;
        char *buf = xmalloc(want + 1);
        while (got < want) {
                ssize_t k = pread(fd, buf + got, want - got, from + (off_t)got);
                if (k <= 0)
                        break;
                got += (size_t)k;
        }
        close(fd);
        buf[got] = '\0';
        *ret = buf;
        return 0;
}

/* A path part of the URL: a Kubernetes name (no '/', no dot-only name). */
static bool name_ok(const char *s, size_t n)
{
        if (n == 0 || n > 253 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(('a' <= s[i] && s[i] <= 'z') || ('0' <= s[i] && s[i] <= '9') || s[i] == '-' ||
                      s[i] == '.'))
                        return false;
        return true;
}

static long query_long(struct MHD_Connection *conn, const char *key)
{
        const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
        if (!v || !*v)
                return -1;
        char *end = NULL;
        long x = strtol(v, &end, 10);
        return *end || x < 0 ? -2 : x;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, char *body)
{
        struct MHD_Response *rsp =
            MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(rsp, "Content-Type", "text/plain");
        enum MHD_Result r = MHD_queue_response(conn, status, rsp);
        MHD_destroy_response(rsp);
        return r;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
        kubelet_logs *k = cls;
        (void)version;
        (void)upload;
        (void)upload_size;
        (void)con_cls;
        if (!streq(method, "GET"))
                return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, xstrdup("only GET\n"));
        /* /containerLogs/NS/POD/CONTAINER */
        const char *prefix = "/containerLogs/";
        if (!strneq(url, prefix, strlen(prefix)))
                return reply(conn, MHD_HTTP_NOT_FOUND, xstrdup("not found\n"));
        const char *ns = url + strlen(prefix);
        const char *s1 = strchr(ns, '/');
        const char *pod = s1 ? s1 + 1 : NULL;
        const char *s2 = pod ? strchr(pod, '/') : NULL;
        const char *ctr = s2 ? s2 + 1 : NULL;
        if (!ctr || strchr(ctr, '/') || !name_ok(ns, (size_t)(s1 - ns)) ||
            !name_ok(pod, (size_t)(s2 - pod)) || !name_ok(ctr, strlen(ctr)))
                return reply(conn, MHD_HTTP_BAD_REQUEST, xstrdup("bad path\n"));
        long tail = query_long(conn, "tailLines"), limit = query_long(conn, "limitBytes");
        if (tail == -2 || limit == -2)
                return reply(conn, MHD_HTTP_BAD_REQUEST, xstrdup("bad tailLines or limitBytes\n"));
        _cleanup_free_ char *file =
            xasprintf("%s/%.*s_%.*s.log", k->dir, (int)(s1 - ns), ns, (int)(s2 - pod), pod);
        _cleanup_free_ char *text = NULL;
        int r = read_tail(file, &text);
        if (r < 0)
                return reply(
                    conn, MHD_HTTP_NOT_FOUND,
                    xasprintf("no log of container %s of pod %.*s\n", ctr, (int)(s2 - pod), pod));
        return reply(conn, MHD_HTTP_OK, kubelet_logs_select(text, tail, limit));
}

int kubelet_logs_start(const char *logs_dir, kubelet_logs **ret, int *ret_port)
{
        kubelet_logs *k = XNEW(kubelet_logs);
        k->dir = xstrdup(logs_dir);
        const char *const ips[] = {"127.0.0.1", NULL};
        pki_cert_request req = {
            .cn = "node-kubelet", .ip_addresses = ips, .days = 1, .server = true};
        pki_key *ca_key = NULL, *key = NULL;
        pki_cert *ca = NULL, *cert = NULL;
        int r = pki_ca_create("kubelet-ca", 1, &ca_key, &ca);
        if (r >= 0)
                r = pki_cert_issue(ca, ca_key, &req, &key, &cert);
        if (r >= 0)
                r = pki_cert_to_pem(cert, &k->cert_pem);
        if (r >= 0)
                r = pki_key_to_pem(key, &k->key_pem);
        pki_key_free(ca_key);
        pki_key_free(key);
        pki_cert_free(ca);
        pki_cert_free(cert);
        if (r < 0) {
                fprintf(stderr, "kubelet: cannot make a serving certificate: %s\n",
                        pki_last_error());
                kubelet_logs_stop(k);
                return r;
        }
        char *err = NULL;
        r = httpd_start(&(httpd_config){.listen = "127.0.0.1:0",
                                        .cert_pem = k->cert_pem,
                                        .key_pem = k->key_pem,
                                        .timeout_s = 30,
                                        .deadline_s = 30,
                                        .max_pending = 32,
                                        .per_peer_pending = 32,
                                        .log_prefix = "kubelet",
                                        .handler = handle,
                                        .handler_cls = k},
                        &k->server, ret_port, &err);
        if (r < 0) {
                fprintf(stderr, "kubelet: cannot serve logs: %s\n", err ? err : strerror(-r));
                free(err);
                kubelet_logs_stop(k);
                return r;
        }
        *ret = k;
        return 0;
}

void kubelet_logs_stop(kubelet_logs *k)
{
        if (!k)
                return;
        httpd_stop(k->server);
        free(k->dir);
        free(k->cert_pem);
        free(k->key_pem);
        free(k);
}

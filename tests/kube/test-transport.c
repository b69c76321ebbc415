/*
 * The Kubernetes client's HTTP behaviour over real TLS on loopback: mutual
 * TLS from in-memory PEM (CAINFO/SSLCERT/SSLKEY blobs), the bearer token and
 * its re-read after a 401, retries on 429 (Retry-After) and 5xx and none on
 * other 4xx, apply/list/delete/watch request shapes, watch streams split
 * across writes, 410 in a watch, and discovery falling back from policy/v1
 * to policy/v1beta1, and the plain-text GET of a Pod's log (Accept
 * text/plain, its size bound cutting a longer answer, the error kube-apiserver
 * gives when it cannot reach the Pod's kubelet retried and then reported).
 *
 * The server is a small scripted HTTPS/1.1 responder in a child process:
 * it plays the responses kube-apiserver gives in situations a real server
 * cannot be made to produce on demand (429, 503, a rotated token). The
 * behaviour against a real kube-apiserver is covered by test-apiserver.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/harness/harness.h"
#include "kube/client.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static char *tmp;
static pid_t server_pid;
static int port;
static char *ca_pem, *client_cert_pem, *client_key_pem, *token_path, *other_ca_path;

/* ---- the scripted server (child process) ---- */

static int flaky_count, always_count;

static void send_response(SSL *ssl, int status, const char *extra_headers, const char *body)
{
        strbuf sb = STRBUF_INIT;

        sb_printf(&sb,
                  "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                  "Connection: close\r\n%s\r\n%s",
                  status, strlen(body), extra_headers ? extra_headers : "", body);
        SSL_write(ssl, sb.buf, (int)sb.len);
        sb_release(&sb);
}

static void send_stream(SSL *ssl, const char *const *pieces)
{
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Connection: close\r\n\r\n";

        SSL_write(ssl, head, (int)strlen(head));
        for (size_t i = 0; pieces[i]; i++) {
                struct timespec ts = {0, 20 * 1000000L};
                SSL_write(ssl, pieces[i], (int)strlen(pieces[i]));
                nanosleep(&ts, NULL);
        }
}

static char *accept_header; /* the request's Accept, in the child */

static void send_text(SSL *ssl, const char *body)
{
        strbuf sb = STRBUF_INIT;

        sb_printf(&sb,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                  "Connection: close\r\n\r\n%s",
                  strlen(body), body);
        SSL_write(ssl, sb.buf, (int)sb.len);
        sb_release(&sb);
}

static const char *status_body(int code, const char *reason, const char *message)
{
        static char buf[2048];

        snprintf(buf, sizeof(buf),
                 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                 "\"Failure\",\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}",
                 message, reason, code);
        return buf;
}

/* The Pod log subresource: text, cut, an unreachable kubelet, no RBAC. */
static bool handle_log(SSL *ssl, const char *target)
{
        if (streq(target, "/api/v1/namespaces/db/pods/etcd-0/log?container=etcd&"
                          "tailLines=3&limitBytes=4096")) {
                if (!streq_ptr(accept_header, "text/plain, application/json"))
                        send_response(ssl, 406, NULL,
                                      status_body(406, "NotAcceptable", "wants text/plain"));
                else
                        send_text(ssl, "{\"level\":\"info\",\"msg\":\"one\"}\n"
                                       "{\"level\":\"warn\",\"msg\":\"two\"}\n");
                return true;
        }
        if (streq(target, "/api/v1/namespaces/db/pods/etcd-1/log?container=etcd")) {
                static char big[8192];
                memset(big, 'x', sizeof(big) - 1);
                send_text(ssl, big);
                return true;
        }
        if (streq(target, "/api/v1/namespaces/db/pods/etcd-2/log?container=etcd")) {
                /* what kube-apiserver answers when the node's kubelet does not */
                send_response(ssl, 500, NULL,
                              status_body(500, "InternalError",
                                          "Get \\\"https://node-a:10250/containerLogs/db/"
                                          "etcd-2/etcd\\\": dial tcp 127.0.0.9:10250: connect: "
                                          "connection refused"));
                return true;
        }
        if (streq(target, "/api/v1/namespaces/db/pods/etcd-3/log?container=etcd")) {
                send_response(ssl, 403, NULL,
                              status_body(403, "Forbidden",
                                          "pods \\\"etcd-3\\\" is forbidden: cannot get "
                                          "resource \\\"pods/log\\\""));
                return true;
        }
        return false;
}

static void handle(SSL *ssl, const char *method, const char *target, const char *auth,
                   const char *ctype, const char *body)
{
        if (!streq_ptr(auth, "Bearer token-1") && !streq_ptr(auth, "Bearer token-2")) {
                send_response(ssl, 401, NULL, status_body(401, "Unauthorized", "Unauthorized"));
                return;
        }
        if (handle_log(ssl, target))
                return;
        if (streq(target, "/rotate")) {
                if (streq(auth, "Bearer token-2"))
                        send_response(ssl, 200, NULL, "{\"rotated\":true}");
                else
                        send_response(ssl, 401, NULL,
                                      status_body(401, "Unauthorized", "Unauthorized"));
        } else if (streq(target, "/flaky")) {
                flaky_count++;
                if (flaky_count == 1)
                        send_response(ssl, 429, "Retry-After: 1\r\n",
                                      status_body(429, "TooManyRequests", "slow down"));
                else if (flaky_count == 2)
                        send_response(ssl, 503, NULL, "service unavailable");
                else
                        send_response(ssl, 200, NULL, "{\"tries\":3}");
        } else if (streq(target, "/always503")) {
                always_count++;
                char msg[64];
                snprintf(msg, sizeof(msg), "etcd unavailable (try %d)", always_count);
                send_response(ssl, 503, NULL, status_body(503, "ServiceUnavailable", msg));
        } else if (streq(target, "/api")) {
                send_response(ssl, 200, NULL, "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"]}");
        } else if (streq(target, "/api/v1")) {
                send_response(ssl, 200, NULL,
                              "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\","
                              "\"resources\":[{\"name\":\"pods\",\"namespaced\":true},"
                              "{\"name\":\"services\",\"namespaced\":true}]}");
        } else if (streq(target, "/apis")) {
                send_response(ssl, 200, NULL,
                              "{\"kind\":\"APIGroupList\",\"groups\":[{\"name\":\"policy\","
                              "\"versions\":[{\"groupVersion\":\"policy/v1\",\"version\":\"v1\"},"
                              "{\"groupVersion\":\"policy/v1beta1\",\"version\":\"v1beta1\"}],"
                              "\"preferredVersion\":{\"groupVersion\":\"policy/v1\",\"version\":"
                              "\"v1\"}}]}");
        } else if (streq(target, "/apis/policy/v1")) {
                send_response(ssl, 200, NULL,
                              "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                              "\"evictions\"}]}");
        } else if (streq(target, "/apis/policy/v1beta1")) {
                send_response(ssl, 200, NULL,
                              "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                              "\"poddisruptionbudgets\"},{\"name\":\"podsecuritypolicies\"}]}");
        } else if (streq(method, "PATCH") &&
                   streq(target, "/api/v1/namespaces/db/services/etcd?fieldManager=gitcd")) {
                if (!streq_ptr(ctype, "application/apply-patch+yaml"))
                        send_response(ssl, 415, NULL,
                                      status_body(415, "UnsupportedMediaType", "bad type"));
                else
                        send_response(ssl, 200, NULL, body);
        } else if (streq(method, "PATCH") &&
                   strneq(target, "/api/v1/namespaces/db/services/taken?", 37)) {
                send_response(
                    ssl, 409, NULL,
                    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Apply failed "
                    "with 1 conflict: conflict with \\\"kubectl\\\": .spec.ports\","
                    "\"reason\":\"Conflict\",\"details\":{\"causes\":[{\"reason\":"
                    "\"FieldManagerConflict\",\"message\":\"conflict with "
                    "\\\"kubectl\\\"\",\"field\":\".spec.ports\"}]},\"code\":409}");
        } else if (streq(method, "PATCH") && strneq(target, "/api/v1/namespaces/db/pods/", 26)) {
                send_response(ssl, 403, NULL,
                              status_body(403, "Forbidden",
                                          "pods \\\"etcd-0\\\" is forbidden: User "
                                          "\\\"system:serviceaccount:db:gitcd\\\" cannot patch "
                                          "resource \\\"pods\\\" in API group \\\"\\\" in the "
                                          "namespace \\\"db\\\""));
        } else if (streq(target, "/api/v1/namespaces/db/pods?labelSelector=app%3Detcd%2Cgitcd.io%"
                                 "2Fcluster%3Da")) {
                send_response(ssl, 200, NULL,
                              "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"42\"},"
                              "\"items\":[{\"metadata\":{\"name\":\"etcd-0\"}},{\"metadata\":{"
                              "\"name\":\"etcd-1\"}}]}");
        } else if (streq(target, "/api/v1/namespaces/db/pods?watch=1&allowWatchBookmarks=true&"
                                 "resourceVersion=42&timeoutSeconds=5")) {
                static const char *const pieces[] = {
                    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"etcd-2\",",
                    "\"resourceVersion\":\"43\"}}}\n{\"type\":\"MODIFIED\",\"object\":{"
                    "\"metadata\":{\"name\":\"etcd-2\",\"resourceVersion\":\"44\"}}}\n",
                    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":"
                    "\"45\"}}}\n",
                    NULL};
                send_stream(ssl, pieces);
        } else if (streq(target, "/api/v1/namespaces/db/pods?watch=1&allowWatchBookmarks=true&"
                                 "resourceVersion=1")) {
                static const char *const pieces[] = {
                    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"etcd-2\"}}}\n",
                    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":"
                    "\"too old resource version: 1 (45)\",\"reason\":\"Expired\","
                    "\"code\":410}}\n",
                    NULL};
                send_stream(ssl, pieces);
        } else if (streq(method, "DELETE") &&
                   streq(target,
                         "/api/v1/namespaces/db/pods/etcd-0?propagationPolicy=Foreground")) {
                send_response(ssl, 200, NULL, "{\"kind\":\"Pod\"}");
        } else {
                send_response(ssl, 404, NULL, status_body(404, "NotFound", "not found"));
        }
}

static void serve_one(SSL_CTX *ctx, int fd)
{
        SSL *ssl = SSL_new(ctx);
        strbuf in = STRBUF_INIT;
        char buf[4096], method[16], target[1024];
        char *auth = NULL, *ctype = NULL, *end, *line;
        size_t clen = 0, head_len;
        int n;

        free(accept_header);
        accept_header = NULL;
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) <= 0)
                goto out;
        while (!(end = strstr(sb_str(&in), "\r\n\r\n"))) {
                n = SSL_read(ssl, buf, sizeof(buf));
                if (n <= 0)
                        goto out;
                sb_append_len(&in, buf, (size_t)n);
        }
        head_len = (size_t)(end - in.buf) + 4;
        if (sscanf(in.buf, "%15s %1023s", method, target) != 2)
                goto out;
        for (line = strstr(in.buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
                char *v = line + 2, *eol = strstr(v, "\r\n");
                if (strncasecmp(v, "Authorization: ", 15) == 0)
                        auth = xstrndup(v + 15, (size_t)(eol - v - 15));
                else if (strncasecmp(v, "Content-Type: ", 14) == 0)
                        ctype = xstrndup(v + 14, (size_t)(eol - v - 14));
                else if (strncasecmp(v, "Accept: ", 8) == 0)
                        accept_header = xstrndup(v + 8, (size_t)(eol - v - 8));
                else if (strncasecmp(v, "Content-Length: ", 16) == 0)
                        clen = strtoul(v + 16, NULL, 10);
        }
        while (in.len < head_len + clen) {
                n = SSL_read(ssl, buf, sizeof(buf));
                if (n <= 0)
                        goto out;
                sb_append_len(&in, buf, (size_t)n);
        }
        handle(ssl, method, target, auth, ctype, in.buf + head_len);
        SSL_shutdown(ssl);
out:
        free(auth);
        free(ctype);
        sb_release(&in);
        SSL_free(ssl);
        close(fd);
}

static void start_server(const char *cert, const char *key, const char *ca)
{
        struct sockaddr_in addr = {.sin_family = AF_INET};
        socklen_t len = sizeof(addr);
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

        assert_true(SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) == 1);
        assert_true(SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1);
        assert_true(SSL_CTX_load_verify_locations(ctx, ca, NULL) == 1);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        /* Client-certificate sessions can only be resumed with a session id context. */
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"gitcd", 5);

        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
        assert_int_equal(listen(lfd, 16), 0);
        assert_int_equal(getsockname(lfd, (struct sockaddr *)&addr, &len), 0);
        port = ntohs(addr.sin_port);

        server_pid = fork();
        assert_true(server_pid >= 0);
        if (server_pid == 0) {
                /* The server never outlives the test, however the test ends. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() == 1)
                        _exit(0);
                signal(SIGPIPE, SIG_IGN);
                for (;;) {
                        int fd = accept(lfd, NULL, NULL);
                        if (fd >= 0)
                                serve_one(ctx, fd);
                }
        }
        harness_track_pid(server_pid);
        close(lfd);
        SSL_CTX_free(ctx);
}

/* ---- fixtures ---- */

static char *write_pem(const char *name, const char *pem)
{
        char *p = path_join(tmp, name);
        assert_int_equal(write_file_atomic(p, pem, strlen(pem), 0600), 0);
        return p;
}

static int setup(void **state)
{
        const char *const ips[] = {"127.0.0.1", NULL};
        pki_cert_request server_req = {
            .cn = "kube-apiserver", .ip_addresses = ips, .days = 1, .server = true};
        pki_cert_request client_req = {.cn = "gitcd", .days = 1, .client = true};
        pki_key *ca_key = NULL, *skey = NULL, *ckey = NULL, *okey = NULL;
        pki_cert *ca = NULL, *scert = NULL, *ccert = NULL, *oca = NULL;
        _cleanup_free_ char *scert_path = NULL, *skey_path = NULL, *ca_path = NULL;

        tmp = harness_tmpdir("gitcd-kube-transport");
        assert_int_equal(pki_ca_create("test-ca", 1, &ca_key, &ca), 0);
        assert_int_equal(pki_cert_issue(ca, ca_key, &server_req, &skey, &scert), 0);
        assert_int_equal(pki_cert_issue(ca, ca_key, &client_req, &ckey, &ccert), 0);
        assert_int_equal(pki_ca_create("other-ca", 1, &okey, &oca), 0);
        scert_path = path_join(tmp, "server.crt");
        skey_path = path_join(tmp, "server.key");
        assert_int_equal(pki_write_pem(scert_path, skey_path, scert, skey), 0);
        assert_int_equal(pki_cert_to_pem(ca, &ca_pem), 0);
        assert_int_equal(pki_cert_to_pem(ccert, &client_cert_pem), 0);
        assert_int_equal(pki_key_to_pem(ckey, &client_key_pem), 0);
        ca_path = write_pem("ca.crt", ca_pem);
        other_ca_path = path_join(tmp, "other-ca.crt");
        assert_int_equal(pki_write_pem(other_ca_path, NULL, oca, NULL), 0);
        token_path = write_pem("token", "token-1\n");

        start_server(scert_path, skey_path, ca_path);

        pki_key_free(ca_key);
        pki_key_free(skey);
        pki_key_free(ckey);
        pki_key_free(okey);
        pki_cert_free(ca);
        pki_cert_free(scert);
        pki_cert_free(ccert);
        pki_cert_free(oca);
        return 0;
}

static int teardown(void **state)
{
        if (server_pid > 0) {
                kill(server_pid, SIGKILL);
                waitpid(server_pid, NULL, 0);
                harness_untrack_pid(server_pid);
        }
        free(ca_pem);
        free(client_cert_pem);
        free(client_key_pem);
        free(token_path);
        free(other_ca_path);
        free(tmp);
        return 0;
}

/* A configuration with everything in memory, as from *-data fields, and a token file. */
static kube_client *new_client(void)
{
        _cleanup_free_ char *server = xasprintf("https://127.0.0.1:%d", port);
        kube_config cfg = {
            .source = (char *)"test",
            .server = server,
            .namespace = (char *)"db",
            .ca_data = ca_pem,
            .ca_len = strlen(ca_pem),
            .cert_data = client_cert_pem,
            .cert_len = strlen(client_cert_pem),
            .key_data = client_key_pem,
            .key_len = strlen(client_key_pem),
            .token_file = token_path,
        };
        kube_client *c = NULL;
        char *err = NULL;

        assert_int_equal(kube_client_new(&cfg, &c, &err), 0);
        assert_null(err);
        return c;
}

static void test_get_retries_429_and_503(void **state)
{
        kube_client *c = new_client();
        json_t *obj = NULL;
        time_t start = time(NULL);

        assert_int_equal(kube_get_path(c, "/flaky", &obj), 0);
        assert_int_equal(json_integer_value(json_object_get(obj, "tries")), 3);
        /* Retry-After: 1 was honoured. */
        assert_true(time(NULL) - start >= 1);
        assert_string_equal(kube_client_last_error(c), "");
        assert_true(kube_client_http_version(c) >= 1);
        json_decref(obj);

        assert_int_equal(kube_get_path(c, "/always503", &obj), -EIO);
        /* Five tries, the last server message quoted. */
        assert_non_null(strstr(kube_client_last_error(c), "etcd unavailable (try 5)"));
        assert_non_null(strstr(kube_client_last_error(c), "HTTP 503"));

        /* A 404 is not retried. */
        assert_int_equal(kube_get_path(c, "/nothing", &obj), -ENOENT);
        kube_client_free(c);
}

static void test_token_rotation(void **state)
{
        kube_client *c = new_client();
        json_t *obj = NULL;

        /* The client read token-1 at start; the file now holds a rotated token. */
        assert_int_equal(write_file_atomic(token_path, "token-2\n", 8, 0600), 0);
        assert_int_equal(kube_get_path(c, "/rotate", &obj), 0);
        assert_true(json_is_true(json_object_get(obj, "rotated")));
        json_decref(obj);
        assert_int_equal(write_file_atomic(token_path, "token-1\n", 8, 0600), 0);

        kube_client_free(c);

        /* A rejected token stays rejected after one re-read; it is never quoted. */
        assert_int_equal(write_file_atomic(token_path, "wrong-token\n", 12, 0600), 0);
        c = new_client();
        assert_int_equal(write_file_atomic(token_path, "token-1\n", 8, 0600), 0);
        assert_int_equal(write_file_atomic(token_path, "wrong-token\n", 12, 0600), 0);
        assert_int_equal(kube_get_path(c, "/api", &obj), -EACCES);
        assert_non_null(strstr(kube_client_last_error(c), "unauthorized"));
        assert_null(strstr(kube_client_last_error(c), "wrong-token"));
        assert_int_equal(write_file_atomic(token_path, "token-1\n", 8, 0600), 0);
        kube_client_free(c);
}

static void test_apply_list_delete(void **state)
{
        kube_client *c = new_client();
        json_t *svc =
            json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:i}]}}", "apiVersion", "v1", "kind", "Service",
                      "metadata", "name", "etcd", "spec", "ports", "port", 2379);
        json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Pod",
                                "metadata", "name", "etcd-0", "namespace", "db");
        json_t *back = NULL, *items = NULL;
        char *rv = NULL;
        kube_gvr pods = {"", "v1", "pods", true};

        assert_int_equal(kube_apply(c, svc, NULL, false, false, &back), 0);
        assert_true(json_equal(back, svc));
        json_decref(back);

        json_object_set_new(json_object_get(svc, "metadata"), "name", json_string("taken"));
        assert_int_equal(kube_apply(c, svc, NULL, false, false, NULL), -EBUSY);
        assert_non_null(strstr(kube_client_last_error(c),
                               "cannot patch services \"taken\" in namespace \"db\""));
        assert_non_null(
            strstr(kube_client_last_error(c), "conflict with \"kubectl\" at .spec.ports"));

        assert_int_equal(kube_apply(c, pod, NULL, false, false, NULL), -EACCES);
        assert_non_null(strstr(kube_client_last_error(c),
                               "forbidden: gitcd cannot patch pods \"etcd-0\" in namespace \"db\" "
                               "(pods \"etcd-0\" is forbidden: User "
                               "\"system:serviceaccount:db:gitcd\""));
        assert_non_null(strstr(kube_client_last_error(c), "grant it in the Role"));

        assert_int_equal(kube_list(c, &pods, "db", "app=etcd,gitcd.io/cluster=a", &items, &rv), 0);
        assert_int_equal(json_array_size(items), 2);
        assert_string_equal(rv, "42");
        json_decref(items);
        free(rv);

        assert_int_equal(kube_delete(c, &pods, "db", "etcd-0", "Foreground"), 0);
        assert_int_equal(kube_delete(c, &pods, "db", "gone", NULL), -ENOENT);
        assert_int_equal(kube_delete(c, &pods, "db", "etcd-0", "Sideways"), -EINVAL);
        json_decref(svc);
        json_decref(pod);
        kube_client_free(c);
}

struct events {
        strbuf seen;
};

static int on_event(const char *type, const json_t *object, void *userdata)
{
        struct events *ev = userdata;
        const char *rv = json_string_value(
            json_object_get(json_object_get(object, "metadata"), "resourceVersion"));

        sb_printf(&ev->seen, "%s:%s ", type, rv ? rv : "-");
        return 0;
}

static int stop_at_first(const char *type, const json_t *object, void *userdata)
{
        on_event(type, object, userdata);
        return 7;
}

static void test_watch(void **state)
{
        kube_client *c = new_client();
        kube_gvr pods = {"", "v1", "pods", true};
        struct events ev = {STRBUF_INIT};

        assert_int_equal(kube_watch(c, &pods, "db", NULL, "42", 5, on_event, &ev), 0);
        assert_string_equal(sb_str(&ev.seen), "ADDED:43 MODIFIED:44 BOOKMARK:45 ");
        sb_reset(&ev.seen);

        assert_int_equal(kube_watch(c, &pods, "db", NULL, "42", 5, stop_at_first, &ev), 7);
        assert_string_equal(sb_str(&ev.seen), "ADDED:43 ");
        sb_reset(&ev.seen);

        assert_int_equal(kube_watch(c, &pods, "db", NULL, "1", 0, on_event, &ev), -ESTALE);
        assert_string_equal(sb_str(&ev.seen), "ADDED:- ");
        assert_non_null(strstr(kube_client_last_error(c), "too old resource version"));
        sb_release(&ev.seen);
        kube_client_free(c);
}

static void test_discovery(void **state)
{
        kube_client *c = new_client();
        char *v = NULL;

        assert_int_equal(kube_preferred_version(c, "policy", "poddisruptionbudgets", &v), 0);
        assert_string_equal(v, "v1beta1");
        free(v);
        assert_int_equal(kube_preferred_version(c, "", "pods", &v), 0);
        assert_string_equal(v, "v1");
        free(v);
        assert_int_equal(kube_has_resource(c, "cert-manager.io", "v1", "certificates"), 0);
        assert_int_equal(kube_has_resource(c, "policy", "v1", "evictions"), 1);
        assert_int_equal(kube_preferred_version(c, "cert-manager.io", "certificates", &v), -ENOENT);
        assert_non_null(strstr(kube_client_last_error(c), "certificates"));
        kube_client_free(c);
}

static void test_text_get(void **state)
{
        kube_client *c = new_client();
        char *text = NULL;
        size_t len = 0;
        bool cut = true;

        /* the log subresource, asked for as text and given whole */
        assert_int_equal(kube_get_text(c,
                                       "/api/v1/namespaces/db/pods/etcd-0/log?container=etcd&"
                                       "tailLines=3&limitBytes=4096",
                                       4096, 5000, "get", "pods/log \"etcd-0\"", "db", &text, &len,
                                       &cut),
                         0);
        assert_string_equal(text, "{\"level\":\"info\",\"msg\":\"one\"}\n"
                                  "{\"level\":\"warn\",\"msg\":\"two\"}\n");
        assert_int_equal(len, strlen(text));
        assert_false(cut);
        free(text);

        /* a longer answer than asked for is cut at the bound, not refused */
        assert_int_equal(kube_get_text(c, "/api/v1/namespaces/db/pods/etcd-1/log?container=etcd",
                                       1000, 5000, NULL, NULL, "db", &text, &len, &cut),
                         0);
        assert_int_equal(len, 1000);
        assert_int_equal(strlen(text), 1000);
        assert_true(cut);
        free(text);

        /* an unreachable kubelet: retried as any 5xx, then the server's reason */
        text = NULL;
        assert_int_equal(kube_get_text(c, "/api/v1/namespaces/db/pods/etcd-2/log?container=etcd",
                                       1000, 5000, "get", "pods/log \"etcd-2\"", "db", &text, NULL,
                                       NULL),
                         -EIO);
        assert_null(text);
        assert_non_null(strstr(kube_client_last_error(c), "HTTP 500"));
        assert_non_null(strstr(kube_client_last_error(c), "connection refused"));
        assert_non_null(strstr(kube_client_last_error(c), "pods/log \"etcd-2\""));

        /* RBAC without pods/log: the denial says what to grant */
        assert_int_equal(kube_get_text(c, "/api/v1/namespaces/db/pods/etcd-3/log?container=etcd",
                                       1000, 5000, "get", "pods/log \"etcd-3\"", "db", &text, NULL,
                                       NULL),
                         -EACCES);
        assert_non_null(strstr(kube_client_last_error(c), "forbidden: gitcd cannot get pods/log"));

        /* no size, no request */
        assert_int_equal(kube_get_text(c, "/x", 0, 0, NULL, NULL, NULL, &text, NULL, NULL),
                         -EINVAL);
        kube_client_free(c);
}

static void test_tls_failures(void **state)
{
        _cleanup_free_ char *server = xasprintf("https://127.0.0.1:%d", port);
        kube_config wrong_ca = {.source = (char *)"t",
                                .server = server,
                                .ca_file = other_ca_path,
                                .token = (char *)"token-1"};
        kube_config no_cert = {.source = (char *)"t",
                               .server = server,
                               .ca_data = ca_pem,
                               .ca_len = strlen(ca_pem),
                               .token = (char *)"token-1"};
        kube_client *c = NULL;
        json_t *obj = NULL;

        assert_int_equal(kube_client_new(&wrong_ca, &c, NULL), 0);
        assert_int_equal(kube_get_path(c, "/api", &obj), -EIO);
        assert_non_null(strstr(kube_client_last_error(c), server));
        assert_null(strstr(kube_client_last_error(c), "token-1"));
        kube_client_free(c);

        /* insecure-skip-tls-verify: no CA at all, the server's certificate is not checked. */
        kube_config insecure = {.source = (char *)"t",
                                .server = server,
                                .insecure_skip_tls_verify = true,
                                .cert_data = client_cert_pem,
                                .cert_len = strlen(client_cert_pem),
                                .key_data = client_key_pem,
                                .key_len = strlen(client_key_pem),
                                .token = (char *)"token-1"};
        assert_int_equal(kube_client_new(&insecure, &c, NULL), 0);
        assert_int_equal(kube_get_path(c, "/api", &obj), 0);
        json_decref(obj);
        kube_client_free(c);

        /* The server requires a client certificate. */
        assert_int_equal(kube_client_new(&no_cert, &c, NULL), 0);
        assert_int_equal(kube_get_path(c, "/api", &obj), -EIO);
        kube_client_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_get_retries_429_and_503),
            cmocka_unit_test(test_token_rotation),
            cmocka_unit_test(test_apply_list_delete),
            cmocka_unit_test(test_watch),
            cmocka_unit_test(test_discovery),
            cmocka_unit_test(test_text_get),
            cmocka_unit_test(test_tls_failures),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

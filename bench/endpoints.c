/*
 * Benchmark: gitcd's two HTTP servers under idle connections.
 *
 *   - the daemon's --listen endpoint (ops/http.h), with a bearer token:
 *     the latency of /healthz with the token (median and worst of 20
 *     requests, each on a new connection) with no other connection, then
 *     while 1,000 idle connections are held open (opened all at once, as
 *     an attacker would), and how many of those the server closed to make
 *     room;
 *   - the snapshot receiver (`gitcd snapshot receive`, store mode), HTTPS:
 *     an authorized upload of 16 MiB with gitcd's own client, with no other
 *     connection and beside 1,000 idle ones.
 *
 * Both servers run in this process on loopback. Prints figures; never
 * fails on timing (an upload or a request that fails is reported as such).
 *
 *   bench-endpoints [IDLE]     (default 1000)
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ops/http.h"
#include "snapstore/receiver.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/xalloc.h"

#define TOKEN    "bench-token"
#define REQUESTS 20

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static size_t discard(char *p, size_t size, size_t n, void *userdata)
{
        (void)p;
        (void)userdata;
        return size * n;
}

/* GET url with the token on a new connection; the HTTP status (0: no answer). */
static long get(const char *url)
{
        CURL *c = curl_easy_init();
        struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer " TOKEN);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return status;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void healthz_latency(const char *url, const char *when)
{
        double ms[REQUESTS];
        int ok = 0;
        for (int i = 0; i < REQUESTS; i++) {
                double t0 = now_ms();
                ok += get(url) == 200;
                ms[i] = now_ms() - t0;
        }
        qsort(ms, REQUESTS, sizeof(double), cmp_double);
        printf("  /healthz %-34s %2d/%d answered 200, median %8.2f ms, worst %8.2f ms\n", when, ok,
               REQUESTS, ms[REQUESTS / 2], ms[REQUESTS - 1]);
}

/* n TCP connections to 127.0.0.1:port that say nothing (-1 where refused). */
static int *open_idle(int port, size_t n)
{
        int *fds = xcalloc(n, sizeof(int));
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (size_t i = 0; i < n; i++) {
                fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fds[i] >= 0 && connect(fds[i], (struct sockaddr *)&a, sizeof(a)) < 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
        }
        return fds;
}

static void close_all(int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(fds);
}

static int listen_endpoint(const char *dir, size_t idle)
{
        _cleanup_free_ char *tok = path_join(dir, "token");
        if (write_file_atomic(tok, TOKEN "\n", strlen(TOKEN) + 1, 0600) < 0)
                return -1;
        ops_http_opts o = {.listen = "127.0.0.1:0", .token_file = tok};
        ops_http *h = NULL;
        char *err = NULL;
        if (ops_http_start(&o, &h, &err) < 0) {
                fprintf(stderr, "ops_http_start: %s\n", err);
                return -1;
        }
        int port = ops_http_port(h);
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/healthz", port);
        printf("The daemon's --listen endpoint (a bearer token):\n");
        healthz_latency(url, "with no other connection");
        int *fds = open_idle(port, idle);
        _cleanup_free_ char *when = xasprintf("beside %zu idle connections", idle);
        healthz_latency(url, when);
        size_t closed = 0;
        for (size_t i = 0; i < idle; i++) {
                char c;
                closed += fds[i] < 0 || recv(fds[i], &c, 1, MSG_DONTWAIT) == 0;
        }
        printf("  idle connections closed by the server to make room: %zu of %zu\n", closed, idle);
        close_all(fds, idle);
        ops_http_stop(h);
        return 0;
}

static int receiver_upload(const char *dir, size_t idle)
{
        receiver_secret sec = {0};
        if (receiver_secret_new(&sec) < 0)
                return -1;
        const char *names[] = {"tls.crt", "tls.key", "token"};
        const char *values[] = {sec.cert_pem, sec.key_pem, sec.token};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *p = path_join(dir, names[i]);
                if (write_file_atomic(p, values[i], strlen(values[i]), 0600) < 0)
                        return -1;
        }
        _cleanup_free_ char *store = path_join(dir, "store");
        _cleanup_free_ char *cert = path_join(dir, "tls.crt");
        _cleanup_free_ char *key = path_join(dir, "tls.key");
        _cleanup_free_ char *token = path_join(dir, "token");
        _cleanup_free_ char *file = path_join(dir, "snapshot.db");
        size_t size = 16u << 20;
        char *data = xmalloc(size);
        for (size_t i = 0; i < size; i++)
                data[i] = (char)(i * 2654435761u >> 13);
        int k = write_file_atomic(file, data, size, 0600);
        free(data);
        if (k < 0 || mkdir_p(store, 0700) < 0)
                return -1;
        receiver_opts o = {.store_dir = store,
                           .listen = "127.0.0.1:0",
                           .cert_file = cert,
                           .key_file = key,
                           .token_file = token};
        receiver *r = NULL;
        char *err = NULL;
        if (receiver_start(&o, &r, &err) < 0) {
                fprintf(stderr, "receiver_start: %s\n", err);
                return -1;
        }
        _cleanup_free_ char *url = xasprintf("https://127.0.0.1:%d", receiver_port(r));
        receiver_peer p = {.url = url, .token = sec.token, .pin = sec.pin, .timeout_s = 30};
        printf(
            "\nThe snapshot receiver (HTTPS, store mode): an upload of 16 MiB with the token:\n");
        for (int round = 0; round < 2; round++) {
                int *fds = round ? open_idle(receiver_port(r), idle) : NULL;
                double t0 = now_ms();
                _cleanup_free_ char *keyname = xasprintf("bench/%d.db", round);
                k = receiver_put(&p, keyname, file, NULL, &err);
                double ms = now_ms() - t0;
                _cleanup_free_ char *when = round ? xasprintf("beside %zu idle connections", idle)
                                                  : xstrdup("with no other connection");
                if (k < 0) {
                        printf("  %-34s FAILED after %.1f ms: %s\n", when, ms, err);
                        free(err);
                        err = NULL;
                } else {
                        printf("  %-34s %8.1f ms (%.0f MiB/s)\n", when, ms, 16.0 / (ms / 1000.0));
                }
                if (fds)
                        close_all(fds, idle);
        }
        receiver_stop(r);
        receiver_secret_release(&sec);
        return 0;
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        size_t idle = 1000;
        if (argc > 1) {
                long v = strtol(argv[1], NULL, 10);
                if (v < 1 || v > 10000) {
                        fprintf(stderr, "usage: bench-endpoints [IDLE (1..10000)]\n");
                        return 64;
                }
                idle = (size_t)v;
        }
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
        char tmpl[] = "/tmp/gitcd-bench-endpoints-XXXXXX";
        if (!mkdtemp(tmpl))
                return 1;
        int k = listen_endpoint(tmpl, idle);
        if (k >= 0)
                k = receiver_upload(tmpl, idle);
        (void)rm_rf(tmpl);
        curl_global_cleanup();
        return k < 0 ? 1 : 0;
}

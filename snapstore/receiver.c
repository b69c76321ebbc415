/*
 * The receiver of snapstore/receiver.h and the client gitcd sends with.
 *
 * Decisions:
 * - HTTP is libmicrohttpd's; nothing here parses a request line or a
 *   header block. What this file reads from a request is the method, the
 *   path (already unescaped by libmicrohttpd: "%2e%2e" arrives as ".." and
 *   is refused by snapshot_dest_key_valid; a "%00" spoils the whole path
 *   instead of cutting it short), the Authorization,
 *   Content-Length and X-Gitcd-Sha256 headers, and the body.
 * - Never through a link: every folder on the way to a file is opened with
 *   O_NOFOLLOW below the staging folder, and files are created O_EXCL.
 * - A file is whole or absent: written to ".NAME.part" (a name no key can
 *   have), its size and SHA-256 checked, fsynced, renamed; a request cut
 *   short or refused removes its temporary.
 * - All or nothing for the directory: the staging folder is renamed to the
 *   data directory only by /commit, and only when it holds a write-ahead
 *   log and the data directory holds none.
 * - One thread (libmicrohttpd's internal polling thread) runs every
 *   handler: the counters need no lock.
 * - The token is checked on the request line and headers, before any body
 *   is read (the access handler's first call); a connection that has not
 *   shown it is "pending" and bounded by util/httpd.h's guard (a deadline,
 *   a short idle timeout, per-address and total limits, the oldest pending
 *   connection closed for a new one), so idle or slow connections cannot
 *   keep gitcd's uploads and restores out.
 * - The token and the key never reach a log line or an answer.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "pki/pki.h"
#include "snapstore/destination.h"
#include "snapstore/receiver.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/http.h"
#include "util/httpd.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define FILES_PREFIX "/files/"
#define MAX_REPLY    (64 * 1024)
#define PART_SUFFIX  ".part"
#define SHA256_XATTR "user.gitcd.sha256"

/* The connection guard (receiver_start). */
#define RECEIVER_IDLE_S        10  /* a connection that has not shown the token, silent */
#define RECEIVER_DEADLINE_S    15  /* from accept to a request with the token */
#define RECEIVER_UPLOAD_IDLE_S 120 /* one that has, silent (an upload's next bytes) */
#define RECEIVER_PEER_PENDING  4
#define RECEIVER_MAX_PENDING   32
#define RECEIVER_PER_IP        16

struct receiver {
        httpd *server;
        char *data_dir; /* restore mode: the data directory to create; NULL in store mode */
        char *stage;    /* where PUT writes: <data dir>.receive, or the store folder */
        bool store;     /* store mode: PUT writes keys in place; HEAD, GET, DELETE */
        char *token;
        char *cert_pem;
        char *key_pem;
        int64_t max_bytes;
        int64_t taken; /* bytes promised by accepted uploads so far */
        bool committed;
        int port;
};

/* One PUT in progress. */
typedef struct upload {
        int dir_fd; /* the folder the file goes into */
        char *base; /* its name there */
        char *part; /* the temporary's name there */
        int fd;
        hash_ctx *sha;
        char want_sha[HASH_SHA256_HEX];
        int64_t want_size, got;
        unsigned fail_status; /* set: refuse at the end, keep nothing */
        char *fail_text;
} upload;

static void upload_free(upload *u)
{
        if (!u)
                return;
        if (u->fd >= 0)
                close(u->fd);
        if (u->part && u->dir_fd >= 0)
                (void)unlinkat(u->dir_fd, u->part, 0);
        if (u->dir_fd >= 0)
                close(u->dir_fd);
        hash_free(u->sha);
        free(u->base);
        free(u->part);
        free(u->fail_text);
        free(u);
}

/* The receiver answers JSON, or a line of text when it refuses. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, char *body)
{
        return httpd_reply(conn, status, body[0] == '{' ? "application/json" : "text/plain", body);
}

_printf_(3, 4) static enum MHD_Result
    refuse(struct MHD_Connection *conn, unsigned status, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *text = xvasprintf(fmt, ap);
        va_end(ap);
        log_info("receiver: refused (%u): %s", status, text);
        char *body = xasprintf("%s\n", text);
        free(text);
        return reply(conn, status, body);
}

/* Whether dir holds etcd data: a write-ahead log file under member/wal/. */
static bool has_wal(const char *dir)
{
        _cleanup_free_ char *wal = xasprintf("%s/member/wal", dir);
        DIR *d = opendir(wal);
        if (!d)
                return false;
        bool found = false;
        struct dirent *e;
        while (!found && (e = readdir(d))) {
                size_t n = strlen(e->d_name);
                found = n > 4 && streq(e->d_name + n - 4, ".wal");
        }
        closedir(d);
        return found;
}

static bool parse_size(const char *s, int64_t *ret)
{
        if (isempty(s) || strspn(s, "0123456789") != strlen(s) || strlen(s) > 18)
                return false;
        *ret = strtoll(s, NULL, 10);
        return true;
}

/* Open (creating) the folders of key below the staging folder, never through a link. */
static int open_parent(const receiver *r, const char *key, int *ret_fd, char **ret_base)
{
        /* made with the first file: a receiver that took none leaves nothing behind */
        if (mkdir(r->stage, 0700) < 0 && errno != EEXIST)
                return -errno;
        int fd = open(r->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        const char *c = key;
        for (const char *slash; (slash = strchr(c, '/')); c = slash + 1) {
                _cleanup_free_ char *comp = xstrndup(c, (size_t)(slash - c));
                if (mkdirat(fd, comp, 0700) < 0 && errno != EEXIST) {
                        int k = -errno;
                        close(fd);
                        return k;
                }
                int sub = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int k = -errno;
                close(fd);
                if (sub < 0)
                        return k;
                fd = sub;
        }
        *ret_fd = fd;
        *ret_base = xstrdup(c);
        return 0;
}

unsigned receiver_check_put(const char *key, const char *content_length,
                            const char *transfer_encoding, const char *sha256, int64_t room,
                            int64_t *ret_size, const char **ret_why)
{
        assert(ret_size && ret_why);
        if (!key || !snapshot_dest_key_valid(key)) {
                *ret_why = "the file name is not a plain relative path";
                return MHD_HTTP_BAD_REQUEST;
        }
        int64_t size;
        if (transfer_encoding || !parse_size(content_length, &size)) {
                *ret_why = "Content-Length is required (no chunked bodies)";
                return MHD_HTTP_LENGTH_REQUIRED;
        }
        if (!hash_sha256_hex_valid(sha256)) {
                *ret_why = RECEIVER_HEADER_SHA256 " must be 64 lowercase hex digits";
                return MHD_HTTP_BAD_REQUEST;
        }
        if (room >= 0 && size > room) {
                *ret_why = "more bytes than this receiver takes";
                return 413;
        }
        *ret_size = size;
        return 0;
}

/* The first call of a PUT: everything is checked before a byte is read. */
static enum MHD_Result put_begin(receiver *r, struct MHD_Connection *conn, const char *url,
                                 void **con_cls)
{
        const char *key = url + strlen(FILES_PREFIX);
        if (r->committed)
                return refuse(conn, MHD_HTTP_CONFLICT, "the delivery was committed already");
        const char *why = NULL;
        int64_t size = 0;
        unsigned status = receiver_check_put(
            key, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH),
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING),
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, RECEIVER_HEADER_SHA256),
            r->max_bytes > 0 ? r->max_bytes - r->taken : -1, &size, &why);
        if (status)
                return refuse(conn, status, "%s", why);
        const char *sha =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, RECEIVER_HEADER_SHA256);
        upload *u = XNEW(upload);
        u->fd = u->dir_fd = -1;
        u->want_size = size;
        memcpy(u->want_sha, sha, 65);
        int k = open_parent(r, key, &u->dir_fd, &u->base);
        if (k < 0) {
                upload_free(u);
                return refuse(conn,
                              k == -ENOTDIR || k == -ELOOP ? MHD_HTTP_CONFLICT
                                                           : MHD_HTTP_INTERNAL_SERVER_ERROR,
                              "cannot create the folders of %s: %s", key, strerror(-k));
        }
        u->part = xasprintf(".%s" PART_SUFFIX, u->base);
        (void)unlinkat(u->dir_fd, u->part, 0);
        u->fd =
            openat(u->dir_fd, u->part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (u->fd < 0) {
                k = -errno;
                free(u->part);
                u->part = NULL;
                upload_free(u);
                return refuse(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot create %s: %s", key,
                              strerror(-k));
        }
        u->sha = hash_sha256_new();
        r->taken += size;
        *con_cls = u;
        return MHD_YES;
}

static void put_data(upload *u, const char *data, size_t n)
{
        if (u->fail_status)
                return;
        if ((int64_t)n > u->want_size - u->got) {
                u->fail_status = 413;
                u->fail_text = xstrdup("more bytes than Content-Length");
                return;
        }
        hash_update(u->sha, data, n);
        u->got += (int64_t)n;
        int k = write_all(u->fd, data, n);
        if (k < 0) {
                u->fail_status = MHD_HTTP_INSUFFICIENT_STORAGE;
                u->fail_text = xasprintf("cannot write: %s", strerror(-k));
        }
}

/* Check and keep the file; u->part is NULL afterwards only when it was kept. */
static enum MHD_Result put_check(const receiver *r, struct MHD_Connection *conn, const char *key,
                                 upload *u)
{
        if (u->fail_status)
                return refuse(conn, u->fail_status, "%s: %s", key, u->fail_text);
        char hex[HASH_SHA256_HEX];
        hash_final_hex(u->sha, hex);
        if (u->got != u->want_size)
                return refuse(conn, 422, "%s: %lld bytes received, %lld announced", key,
                              (long long)u->got, (long long)u->want_size);
        if (!streq(hex, u->want_sha))
                return refuse(conn, 422,
                              "%s: its SHA-256 is %s, not the %s announced; nothing was kept", key,
                              hex, u->want_sha);
        /* where the file system takes user attributes, the hash stays with the snapshot */
        if (r->store && fsetxattr(u->fd, SHA256_XATTR, hex, 64, 0) < 0 && errno != ENOTSUP)
                log_debug("receiver: %s: cannot keep its SHA-256 in %s: %s", key, SHA256_XATTR,
                          strerror(errno));
        if (fsync(u->fd) < 0 || renameat(u->dir_fd, u->part, u->dir_fd, u->base) < 0)
                return refuse(conn, MHD_HTTP_INSUFFICIENT_STORAGE, "%s: cannot store it: %s", key,
                              strerror(errno));
        free(u->part);
        u->part = NULL; /* renamed: nothing to remove */
        if (fsync(u->dir_fd) < 0 && errno != EINVAL)
                return refuse(conn, MHD_HTTP_INSUFFICIENT_STORAGE, "%s: cannot sync: %s", key,
                              strerror(errno));
        log_debug("receiver: stored %s (%lld bytes)", key, (long long)u->got);
        return reply(conn, MHD_HTTP_CREATED, xasprintf("{\"sha256\":\"%s\"}", hex));
}

/* A file not kept: its temporary goes before the answer, and its bytes back to the budget. */
static void discard(receiver *r, upload *u)
{
        if (!u->part)
                return;
        (void)unlinkat(u->dir_fd, u->part, 0);
        free(u->part);
        u->part = NULL;
        r->taken -= u->want_size;
}

static enum MHD_Result put_end(receiver *r, struct MHD_Connection *conn, const char *url, upload *u)
{
        const char *key = url + strlen(FILES_PREFIX);
        enum MHD_Result ret = put_check(r, conn, key, u);
        if (u->part)
                discard(r, u);
        return ret;
}
static enum MHD_Result commit(receiver *r, struct MHD_Connection *conn)
{
        if (r->committed)
                return reply(conn, MHD_HTTP_OK, xstrdup("{\"committed\":true}"));
        if (has_wal(r->data_dir))
                return refuse(conn, MHD_HTTP_CONFLICT,
                              "%s holds etcd data already; it is never replaced", r->data_dir);
        if (!has_wal(r->stage))
                return refuse(conn, MHD_HTTP_CONFLICT,
                              "nothing to commit: the files received hold no write-ahead log");
        /* A data directory without a write-ahead log is what an etcd that was starting left. */
        int k = rm_rf(r->data_dir);
        if (k >= 0 && rename(r->stage, r->data_dir) < 0)
                k = -errno;
        if (k >= 0)
                k = fsync_parent_dir(r->data_dir);
        if (k < 0)
                return refuse(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot commit %s: %s",
                              r->data_dir, strerror(-k));
        r->committed = true;
        log_info("receiver: %s is complete", r->data_dir);
        return reply(conn, MHD_HTTP_OK, xstrdup("{\"committed\":true}"));
}

unsigned receiver_check_key(const char *method, const char *key, const char **ret_why)
{
        assert(method && ret_why);
        if (!streq(method, "HEAD") && !streq(method, "GET") && !streq(method, "DELETE")) {
                *ret_why = "a stored key is read with HEAD or GET and removed with DELETE";
                return MHD_HTTP_METHOD_NOT_ALLOWED;
        }
        if (!key || !snapshot_dest_key_valid(key)) {
                *ret_why = "the file name is not a plain relative path";
                return MHD_HTTP_BAD_REQUEST;
        }
        return 0;
}

/*
 * Open the folder holding key below the store folder without creating
 * anything and never through a link. -ENOENT when a folder is missing,
 * -ENOTDIR / -ELOOP when one is not a folder.
 */
static int open_existing_parent(const receiver *r, const char *key, int *ret_fd, char **ret_base)
{
        *ret_fd = -1;
        *ret_base = NULL;
        int fd = open(r->stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno > 0 ? -errno : -EIO;
        const char *c = key;
        for (const char *slash; (slash = strchr(c, '/')); c = slash + 1) {
                _cleanup_free_ char *comp = xstrndup(c, (size_t)(slash - c));
                int sub = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int k = errno > 0 ? -errno : -EIO;
                close(fd);
                if (sub < 0)
                        return k;
                fd = sub;
        }
        *ret_fd = fd;
        *ret_base = xstrdup(c);
        return 0;
}

/*
 * HEAD and GET of a stored key: its size (Content-Length), the SHA-256 of
 * the bytes on the volume now (computed, not remembered: what is sent is
 * what is checked) and its time; GET sends the bytes.
 */
static enum MHD_Result store_read(receiver *r, struct MHD_Connection *conn, const char *key)
{
        int dir_fd = -1;
        _cleanup_free_ char *base = NULL;
        int k = open_existing_parent(r, key, &dir_fd, &base);
        if (k >= 0 && !base)
                k = -EINVAL;
        int fd = k < 0 ? -1 : openat(dir_fd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (k >= 0 && fd < 0)
                k = -errno;
        if (dir_fd >= 0)
                close(dir_fd);
        struct stat st;
        if (k >= 0 && fstat(fd, &st) < 0)
                k = -errno;
        if (k >= 0 && !S_ISREG(st.st_mode))
                k = -ENOENT;
        char hex[HASH_SHA256_HEX];
        if (k >= 0)
                k = hash_fd_sha256_hex(fd, 0, -1, hex, NULL);
        if (k >= 0 && lseek(fd, 0, SEEK_SET) < 0)
                k = -errno;
        if (k < 0) {
                if (fd >= 0)
                        close(fd);
                if (k == -ENOENT || k == -ENOTDIR || k == -ELOOP)
                        return refuse(conn, MHD_HTTP_NOT_FOUND, "%s: no such snapshot", key);
                return refuse(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s: cannot read it: %s", key,
                              strerror(-k));
        }
        /* the response owns fd from here on, and closes it */
        struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
        if (!resp) {
                close(fd);
                return MHD_NO;
        }
        _cleanup_free_ char *mtime =
            xasprintf("%lld", (long long)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
        MHD_add_response_header(resp, RECEIVER_HEADER_SHA256, hex);
        MHD_add_response_header(resp, RECEIVER_HEADER_MTIME, mtime);
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* DELETE of one stored key (a file; never a folder, never a listing), then a folder fsync. */
static enum MHD_Result store_delete(receiver *r, struct MHD_Connection *conn, const char *key)
{
        int dir_fd = -1;
        _cleanup_free_ char *base = NULL;
        int k = open_existing_parent(r, key, &dir_fd, &base);
        if (k >= 0 && !base)
                k = -EINVAL;
        struct stat st;
        if (k >= 0 && fstatat(dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                k = -errno;
        if (k >= 0 && !S_ISREG(st.st_mode))
                k = -ENOENT;
        if (k >= 0 && unlinkat(dir_fd, base, 0) < 0)
                k = -errno;
        if (k >= 0 && fsync(dir_fd) < 0 && errno != EINVAL)
                k = -errno;
        if (dir_fd >= 0)
                close(dir_fd);
        if (k == -ENOENT || k == -ENOTDIR || k == -ELOOP)
                return refuse(conn, MHD_HTTP_NOT_FOUND, "%s: no such snapshot", key);
        if (k < 0)
                return refuse(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s: cannot delete it: %s", key,
                              strerror(-k));
        log_info("receiver: deleted %s", key);
        return reply(conn, MHD_HTTP_OK, xstrdup("{\"deleted\":true}"));
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
        receiver *r = cls;
        (void)version;
        upload *u = *con_cls;
        if (u) {
                if (*upload_data_size) {
                        put_data(u, upload_data, *upload_data_size);
                        *upload_data_size = 0;
                        return MHD_YES;
                }
                return put_end(r, conn, url, u);
        }
        if (streq(url, "/healthz") && streq(method, "GET"))
                return reply(conn, MHD_HTTP_OK, xstrdup("ok\n"));
        if (!httpd_bearer_ok(conn, r->token))
                return refuse(conn, MHD_HTTP_UNAUTHORIZED, "a valid bearer token is required");
        httpd_trust(conn); /* no longer pending: it showed the token (see receiver_start) */
        if (streq(method, "PUT") && strneq(url, FILES_PREFIX, strlen(FILES_PREFIX)))
                return put_begin(r, conn, url, con_cls);
        if (*upload_data_size)
                return refuse(conn, MHD_HTTP_BAD_REQUEST, "this request takes no body");
        if (r->store && strneq(url, FILES_PREFIX, strlen(FILES_PREFIX))) {
                const char *key = url + strlen(FILES_PREFIX), *why = NULL;
                unsigned status = receiver_check_key(method, key, &why);
                if (status)
                        return refuse(conn, status, "%s", why);
                return streq(method, "DELETE") ? store_delete(r, conn, key)
                                               : store_read(r, conn, key);
        }
        if (r->store)
                return refuse(conn, MHD_HTTP_NOT_FOUND,
                              "not found; this receiver serves GET /healthz and PUT, HEAD, GET "
                              "and DELETE of /files/KEY");
        if (streq(method, "GET") && streq(url, "/state"))
                return reply(
                    conn, MHD_HTTP_OK,
                    xasprintf("{\"hasData\":%s}", has_wal(r->data_dir) ? "true" : "false"));
        if (streq(method, "POST") && streq(url, "/commit"))
                return commit(r, conn);
        return refuse(conn, MHD_HTTP_NOT_FOUND,
                      "not found; the receiver serves GET /healthz, GET /state, PUT /files/KEY "
                      "and POST /commit");
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode why)
{
        receiver *r = cls;
        (void)conn;
        upload *u = *con_cls;
        if (!u)
                return;
        if (u->part)
                log_info("receiver: an upload was cut short (%d); its temporary is removed",
                         (int)why);
        discard(r, u);
        upload_free(u);
        *con_cls = NULL;
}

/* libmicrohttpd's unescaping, but a %00 makes the whole path invalid rather than cut short. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *uri)
{
        (void)cls;
        (void)conn;
        size_t n = MHD_http_unescape(uri);
        if (strlen(uri) != n) {
                uri[0] = '\x01'; /* a control character: no valid path or key */
                uri[1] = 0;
                return 1;
        }
        return n;
}

int receiver_start(const receiver_opts *o, receiver **ret, char **ret_err)
{
        assert(o && ret && ret_err);
        const char *dir = o->store_dir ? o->store_dir : o->data_dir;
        if (isempty(dir) || dir[0] != '/' || (o->store_dir && o->data_dir) || isempty(o->listen) ||
            !o->cert_file || !o->key_file || !o->token_file) {
                *ret_err = xstrdup("the receiver needs an absolute data directory or store "
                                   "folder (one of them), an address, a certificate, a key and "
                                   "a token file");
                return -EINVAL;
        }
        receiver *r = XNEW(receiver);
        _cleanup_free_ char *d = xstrdup(dir);
        size_t n = strlen(d);
        while (n > 1 && d[n - 1] == '/')
                d[--n] = 0;
        r->store = o->store_dir != NULL;
        if (r->store) {
                r->stage = TAKE_PTR(d);
        } else {
                r->stage = xasprintf("%s.receive", d);
                r->data_dir = TAKE_PTR(d);
        }
        r->max_bytes = o->max_bytes;
        int k = httpd_read_token(o->token_file, &r->token, ret_err);
        if (k >= 0)
                k = httpd_read_file(o->cert_file, "TLS certificate", &r->cert_pem, ret_err);
        if (k >= 0)
                k = httpd_read_secret(o->key_file, "TLS key", &r->key_pem, ret_err);
        if (k < 0)
                goto fail;
        /* What an earlier receiver on this volume staged is never used (a store
         * folder holds snapshots: it is never emptied). */
        k = r->store ? 0 : rm_rf(r->stage);
        if (k < 0) {
                *ret_err = xasprintf("cannot prepare %s: %s", r->stage, strerror(-k));
                goto fail;
        }
        /*
         * Who may hold a connection (util/httpd.h): one that has not shown
         * the token within RECEIVER_DEADLINE_S of its accept, or sent nothing
         * for RECEIVER_IDLE_S, is closed; a client address holds at most
         * RECEIVER_PEER_PENDING such connections and all of them together
         * RECEIVER_MAX_PENDING (the oldest goes for a new one), and at most
         * RECEIVER_PER_IP connections in all. gitcd, with the token, makes
         * one connection at a time: idle connections, from wherever, can
         * no longer keep an upload or a restore out.
         */
        k = httpd_start(&(httpd_config){.listen = o->listen,
                                        .cert_pem = r->cert_pem,
                                        .key_pem = r->key_pem,
                                        .timeout_s = RECEIVER_IDLE_S,
                                        .trusted_timeout_s = RECEIVER_UPLOAD_IDLE_S,
                                        .deadline_s = RECEIVER_DEADLINE_S,
                                        .max_pending = RECEIVER_MAX_PENDING,
                                        .per_peer_pending = RECEIVER_PEER_PENDING,
                                        .per_ip_limit = RECEIVER_PER_IP,
                                        .connection_limit = RECEIVER_MAX_PENDING + 16,
                                        .log_prefix = "receiver",
                                        .handler = handle,
                                        .handler_cls = r,
                                        .completed = completed,
                                        .completed_cls = r,
                                        .unescape = unescape},
                        &r->server, &r->port, ret_err);
        if (k < 0)
                goto fail;
        *ret = r;
        return 0;
fail:
        receiver_stop(r);
        return k;
}

int receiver_port(const receiver *r)
{
        return r->port;
}

void receiver_stop(receiver *r)
{
        if (!r)
                return;
        httpd_stop(r->server);
        /* a delivery not committed is of no use to anyone */
        if (!r->store && !r->committed && r->stage)
                (void)rm_rf(r->stage);
        if (r->token)
                OPENSSL_cleanse(r->token, strlen(r->token));
        free(r->token);
        free(r->cert_pem);
        if (r->key_pem)
                OPENSSL_cleanse(r->key_pem, strlen(r->key_pem));
        free(r->key_pem);
        free(r->data_dir);
        free(r->stage);
        free(r);
}

/* ---- the client ---- */

typedef struct answer {
        strbuf body;
        bool too_long;
        int out_fd;             /* >= 0: a 200 answer's body goes here (GET of a key) */
        hash_ctx *sha;          /* the hash of what went to out_fd */
        int64_t out_bytes;      /* how many */
        int out_err;            /* a failed write to out_fd */
        char sha_hdr[65];       /* X-Gitcd-Sha256 of the answer; "" when absent or malformed */
        int64_t mtime_ms;       /* X-Gitcd-Mtime-Ms; -1 when absent */
        int64_t content_length; /* of the answer; -1 when not given */
        CURL *curl;
} answer;

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
        answer *a = userdata;
        size_t n = size * nmemb;
        long status = 0;
        if (a->out_fd >= 0)
                curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200) {
                hash_update(a->sha, data, n);
                a->out_bytes += (int64_t)n;
                int k = write_all(a->out_fd, data, n);
                if (k < 0) {
                        a->out_err = k;
                        return 0; /* curl stops with CURLE_WRITE_ERROR */
                }
        } else if (a->body.len + n > MAX_REPLY) {
                a->too_long = true;
        } else {
                sb_append_len(&a->body, data, n);
        }
        return n;
}

/* The headers store mode answers with; everything else is ignored. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
        answer *a = userdata;
        size_t n = size * nmemb;
        _cleanup_free_ char *line = xstrndup(data, n);
        line[strcspn(line, "\r\n")] = 0;
        char *colon = strchr(line, ':');
        if (!colon)
                return n;
        *colon = 0;
        const char *v = colon + 1 + strspn(colon + 1, " \t");
        if (strcasecmp(line, RECEIVER_HEADER_SHA256) == 0) {
                bool ok = hash_sha256_hex_valid(v);
                memcpy(a->sha_hdr, ok ? v : "", ok ? HASH_SHA256_HEX : 1);
        } else if (strcasecmp(line, RECEIVER_HEADER_MTIME) == 0) {
                int64_t t;
                a->mtime_ms = parse_size(v, &t) ? t : -1;
        }
        return n;
}

/* A PUT's body from its file; the failpoint kills gitcd with a part of it sent. */
typedef struct body_reader {
        FILE *f;
        int64_t sent;
} body_reader;

static size_t on_read(char *buf, size_t size, size_t nitems, void *userdata)
{
        body_reader *b = userdata;
        if (b->sent > 0)
                FAILPOINT("receiver.put-body");
        size_t n = fread(buf, size, nitems, b->f);
        if (n == 0 && ferror(b->f))
                return CURL_READFUNC_ABORT;
        b->sent += (int64_t)n;
        return n;
}

/*
 * One request. in: a file to send as the body (PUT), or NULL. a: where the
 * answer goes (out_fd -1 unless a GET of a key). Returns the HTTP status
 * (> 0) with the answer's body, or -errno with ret_error.
 */
static int request_to(const receiver_peer *peer, const char *method, const char *path, FILE *in,
                      int64_t in_size, const char *sha_hex, answer *a, char **ret_body,
                      char **ret_error)
{
        assert(peer->pin); /* never a receiver whose key is not pinned */
        long timeout = peer->timeout_s > 0 ? peer->timeout_s : 60;
        char errbuf[CURL_ERROR_SIZE] = "";
        /*
         * The receiver is a Pod gitcd reaches directly, as it reaches the
         * members (util/http.h: no proxy). Its certificate is its own: its
         * public key is pinned instead of a CA.
         */
        http_opts o = {.proxy = HTTP_PROXY_NONE,
                       .https_only = true,
                       .connect_timeout_ms = 10000,
                       .stall_bytes_per_s = 1024,
                       .stall_s = timeout,
                       .errbuf = errbuf,
                       .tls = {.pinned_key = peer->pin}};
        CURL *curl = http_handle_new(&o);
        if (!curl)
                return -ENOMEM;
        a->curl = curl;
        a->body = (strbuf)STRBUF_INIT;
        a->mtime_ms = -1;
        a->sha_hdr[0] = 0;
        _cleanup_free_ char *url = xasprintf("%s%s", peer->url, path);
        _cleanup_free_ char *auth = xasprintf("Authorization: Bearer %s", peer->token);
        struct curl_slist *hdr = curl_slist_append(NULL, auth);
        _cleanup_free_ char *sha =
            sha_hex ? xasprintf(RECEIVER_HEADER_SHA256 ": %s", sha_hex) : NULL;
        if (sha)
                hdr = curl_slist_append(hdr, sha);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, a);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, a);
        body_reader br = {.f = in};
        if (in) {
                curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(curl, CURLOPT_READDATA, &br);
                curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)in_size);
        } else if (streq(method, "POST")) {
                curl_easy_setopt(curl, CURLOPT_POST, 1L);
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
        } else if (streq(method, "HEAD")) {
                curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
        } else if (streq(method, "DELETE")) {
                curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
        }
        CURLcode cc = curl_easy_perform(curl);
        long status = 0;
        curl_off_t length = -1;
        if (cc == CURLE_OK) {
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
                curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        }
        a->content_length = length;
        curl_easy_cleanup(curl);
        a->curl = NULL;
        curl_slist_free_all(hdr);
        OPENSSL_cleanse(auth, strlen(auth));
        if (cc != CURLE_OK) {
                sb_release(&a->body);
                if (a->out_err < 0) {
                        *ret_error = xasprintf("%s %s: cannot write what arrives: %s", method, url,
                                               strerror(-a->out_err));
                        return a->out_err;
                }
                *ret_error = xasprintf("%s %s: %s", method, url, http_error_text(cc, errbuf));
                return cc == CURLE_SSL_PINNEDPUBKEYNOTMATCH ? -EPERM : -EIO;
        }
        char *body = sb_detach(&a->body);
        size_t n = strlen(body);
        while (n && (body[n - 1] == '\n' || body[n - 1] == '\r'))
                body[--n] = 0;
        *ret_body = body;
        return (int)status;
}

static int request(const receiver_peer *peer, const char *method, const char *path, FILE *in,
                   int64_t in_size, const char *sha_hex, char **ret_body, char **ret_error)
{
        answer a = {.out_fd = -1};
        return request_to(peer, method, path, in, in_size, sha_hex, &a, ret_body, ret_error);
}

static int json_answer(const char *body, const char *key, json_t **ret)
{
        json_t *o = json_loads(body, JSON_REJECT_DUPLICATES, NULL);
        json_t *v = json_object_get(o, key);
        if (!v) {
                json_decref(o);
                return -EPROTO;
        }
        *ret = json_incref(v);
        json_decref(o);
        return 0;
}

/* PUT path as key; sha is the file's SHA-256 (NULL: computed here). */
static int send_file(const receiver_peer *peer, const char *path, const char *key,
                     const char *sha_hex, char **ret_error)
{
        char sha[HASH_SHA256_HEX];
        int k = sha_hex ? 0 : hash_file_sha256_hex(path, sha, NULL);
        if (k < 0) {
                *ret_error = xasprintf("cannot read %s: %s", path, strerror(-k));
                return k;
        }
        if (sha_hex)
                memcpy(sha, sha_hex, 65);
        FILE *f = fopen(path, "re");
        struct stat st;
        if (!f || fstat(fileno(f), &st) < 0) {
                k = -errno;
                if (f)
                        fclose(f);
                *ret_error = xasprintf("cannot read %s: %s", path, strerror(-k));
                return k;
        }
        _cleanup_free_ char *url_path = xasprintf(FILES_PREFIX "%s", key);
        _cleanup_free_ char *body = NULL;
        int status = request(peer, "PUT", url_path, f, st.st_size, sha, &body, ret_error);
        fclose(f);
        if (status < 0)
                return status;
        json_t *got = NULL;
        if (status != 201 || json_answer(body, "sha256", &got) < 0) {
                *ret_error = xasprintf("%s: the receiver answered %d: %s", key, status, body);
                return status == 413 ? -EFBIG : status == 422 ? -EBADMSG : -EIO;
        }
        bool same = streq_ptr(json_string_value(got), sha);
        json_decref(got);
        if (!same) {
                *ret_error = xasprintf("%s: the receiver stored other bytes than sent", key);
                return -EBADMSG;
        }
        return 0;
}

int receiver_put(const receiver_peer *peer, const char *key, const char *path,
                 const char *sha256_hex, char **ret_error)
{
        assert(peer && key && path && ret_error);
        return send_file(peer, path, key, sha256_hex, ret_error);
}

/* The -errno of a store-mode answer other than 200. */
static int key_refused(const char *method, const char *key, int status, const char *body,
                       char **ret_error)
{
        *ret_error = xasprintf("%s %s: the receiver answered %d%s%s", method, key, status,
                               isempty(body) ? "" : ": ", body ? body : "");
        return status == 404 ? -ENOENT : status == 401 ? -EACCES : -EIO;
}

int receiver_stat(const receiver_peer *peer, const char *key, int64_t *ret_size,
                  int64_t *ret_mtime_ms, char ret_sha256[65], char **ret_error)
{
        assert(peer && key && ret_size && ret_mtime_ms && ret_sha256 && ret_error);
        _cleanup_free_ char *url_path = xasprintf(FILES_PREFIX "%s", key);
        _cleanup_free_ char *body = NULL;
        answer a = {.out_fd = -1};
        int status = request_to(peer, "HEAD", url_path, NULL, 0, NULL, &a, &body, ret_error);
        if (status < 0)
                return status;
        if (status != 200)
                return key_refused("HEAD", key, status, body, ret_error);
        if (!a.sha_hdr[0] || a.content_length < 0) {
                *ret_error = xasprintf("HEAD %s: the receiver's answer lacks %s or "
                                       "Content-Length",
                                       key, RECEIVER_HEADER_SHA256);
                return -EPROTO;
        }
        *ret_size = a.content_length;
        *ret_mtime_ms = a.mtime_ms;
        memcpy(ret_sha256, a.sha_hdr, 65);
        return 0;
}

int receiver_fetch(const receiver_peer *peer, const char *key, int fd, char **ret_error)
{
        assert(peer && key && fd >= 0 && ret_error);
        _cleanup_free_ char *url_path = xasprintf(FILES_PREFIX "%s", key);
        _cleanup_free_ char *body = NULL;
        answer a = {.out_fd = fd, .sha = hash_sha256_new()};
        int status = request_to(peer, "GET", url_path, NULL, 0, NULL, &a, &body, ret_error);
        char hex[HASH_SHA256_HEX];
        hash_final_hex(a.sha, hex);
        hash_free(a.sha);
        if (status < 0)
                return status;
        if (status != 200)
                return key_refused("GET", key, status, body, ret_error);
        if (!a.sha_hdr[0] || !streq(hex, a.sha_hdr) ||
            (a.content_length >= 0 && a.content_length != a.out_bytes)) {
                *ret_error =
                    xasprintf("GET %s: %lld bytes with SHA-256 %s arrived, the receiver "
                              "announced %lld bytes with %s",
                              key, (long long)a.out_bytes, hex, (long long)a.content_length,
                              a.sha_hdr[0] ? a.sha_hdr : "none");
                return -EBADMSG;
        }
        return 0;
}

int receiver_remove(const receiver_peer *peer, const char *key, char **ret_error)
{
        assert(peer && key && ret_error);
        _cleanup_free_ char *url_path = xasprintf(FILES_PREFIX "%s", key);
        _cleanup_free_ char *body = NULL;
        int status = request(peer, "DELETE", url_path, NULL, 0, NULL, &body, ret_error);
        if (status < 0)
                return status;
        if (status != 200)
                return key_refused("DELETE", key, status, body, ret_error);
        return 0;
}

int receiver_deliver(const receiver_peer *peer, const char *src_dir, char **ret_error)
{
        assert(peer && peer->url && peer->token && peer->pin && src_dir && ret_error);
        _cleanup_free_ char *body = NULL;
        int status = request(peer, "GET", "/state", NULL, 0, NULL, &body, ret_error);
        if (status < 0)
                return status;
        json_t *has = NULL;
        if (status != 200 || json_answer(body, "hasData", &has) < 0) {
                *ret_error = xasprintf("GET /state: the receiver answered %d: %s", status, body);
                return -EIO;
        }
        bool data = json_is_true(has);
        json_decref(has);
        if (data) {
                *ret_error = xstrdup("the volume holds etcd data already");
                return -EEXIST;
        }
        _cleanup_(path_list_release) path_list files = {0}, dirs = {0};
        int k = list_tree(src_dir, &files, &dirs);
        if (k < 0) {
                *ret_error = xasprintf("cannot read %s: %s", src_dir, strerror(-k));
                return k;
        }
        for (size_t i = 0; i < files.n; i++) {
                if (!snapshot_dest_key_valid(files.paths[i])) {
                        *ret_error = xasprintf("%s/%s: a name the receiver would refuse", src_dir,
                                               files.paths[i]);
                        return -EINVAL;
                }
                _cleanup_free_ char *path = path_join(src_dir, files.paths[i]);
                k = send_file(peer, path, files.paths[i], NULL, ret_error);
                if (k < 0)
                        return k;
        }
        free(body);
        body = NULL;
        status = request(peer, "POST", "/commit", NULL, 0, NULL, &body, ret_error);
        if (status < 0)
                return status;
        if (status == 409 && strstr(body, "already")) {
                *ret_error = xasprintf("the volume holds etcd data already: %s", body);
                return -EEXIST;
        }
        if (status != 200) {
                *ret_error = xasprintf("POST /commit: the receiver answered %d: %s", status, body);
                return -EIO;
        }
        return 0;
}

int receiver_pin_of_cert(const char *cert_pem, char **ret_pin)
{
        BIO *bio = BIO_new_mem_buf(cert_pem, -1);
        X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
        BIO_free(bio);
        if (!x)
                return -EINVAL;
        unsigned char *der = NULL;
        int len = i2d_PUBKEY(X509_get0_pubkey(x), &der);
        X509_free(x);
        if (len <= 0)
                return -EINVAL;
        uint8_t md[HASH_SHA256_LEN];
        hash_sha256(der, (size_t)len, md);
        OPENSSL_free(der);
        unsigned char b64[48];
        EVP_EncodeBlock(b64, md, 32);
        *ret_pin = xasprintf("sha256//%s", b64);
        return 0;
}

int receiver_secret_new(receiver_secret *ret)
{
        assert(ret);
        /* A throw-away issuer: the receiver's leaf is what is pinned, by its key. */
        pki_key *ca_key = NULL, *key = NULL;
        pki_cert *ca = NULL, *cert = NULL;
        receiver_secret s = {0};
        pki_cert_request req = {.cn = "gitcd snapshot receiver", .days = 1, .server = true};
        int k = pki_ca_create("gitcd snapshot receiver issuer", 1, &ca_key, &ca);
        if (k >= 0)
                k = pki_cert_issue(ca, ca_key, &req, &key, &cert);
        if (k >= 0)
                k = pki_cert_to_pem(cert, &s.cert_pem);
        if (k >= 0)
                k = pki_key_to_pem(key, &s.key_pem);
        pki_cert_free(ca);
        pki_key_free(ca_key);
        pki_cert_free(cert);
        pki_key_free(key);
        if (k >= 0)
                k = receiver_pin_of_cert(s.cert_pem, &s.pin);
        unsigned char raw[32];
        if (k >= 0 && getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                k = -EIO;
        if (k >= 0) {
                s.token = hex_encode_new(raw, sizeof(raw));
        }
        OPENSSL_cleanse(raw, sizeof(raw));
        if (k < 0) {
                receiver_secret_release(&s);
                return k;
        }
        *ret = s;
        return 0;
}

void receiver_secret_release(receiver_secret *s)
{
        if (!s)
                return;
        if (s->key_pem)
                OPENSSL_cleanse(s->key_pem, strlen(s->key_pem));
        if (s->token)
                OPENSSL_cleanse(s->token, strlen(s->token));
        free(s->cert_pem);
        free(s->key_pem);
        free(s->token);
        free(s->pin);
        *s = (receiver_secret){0};
}

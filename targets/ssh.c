/*
 * The SSH transport (see ssh.h) over libssh2, used in non-blocking mode:
 * every libssh2 call that would block returns EAGAIN, and wait_io() polls
 * the socket in the direction libssh2 asks for, up to the deadline of the
 * current operation. That one loop gives every step (TCP connect,
 * handshake, authentication, channel and SFTP traffic) the same timeout
 * without threads or alarms, and lets a command's stdout, stderr and stdin
 * move together so a chatty command never deadlocks on a full window.
 *
 * libssh2's errors are converted here, once, into a negative errno and a
 * message; nothing above this file sees a LIBSSH2_ERROR_* code.
 *
 * Host keys: before the handshake the session asks for the key types
 * known_hosts lists for the machine first (as OpenSSH's client does), then
 * the key the machine shows is checked strictly against the file
 * (sources/known-hosts.h).
 *
 * Atomic upload: SFTP creates a temporary "<dir>/.<name>.gitcd-<16 random
 * hex digits>" exclusively (LIBSSH2_FXF_EXCL: O_CREAT | O_EXCL on the
 * server, which never follows a symbolic link, so a link planted there
 * cannot make root write elsewhere; a name taken is tried again with
 * another), sets its mode with fsetstat before the first byte, fsyncs it
 * (fsync@openssh.com), and `mv -f` renames it over the destination in the
 * same directory: rename(2) is atomic and replaces a link at the
 * destination instead of following it, while SFTP v3's rename (all OpenSSH
 * speaks) refuses to replace a file. A temporary that was not renamed is
 * removed.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh2.h>
#include <libssh2_sftp.h>

#include "sources/known-hosts.h"
#include "targets/ssh.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_COMMAND_TIMEOUT_MS 60000
#define MAX_OUTPUT                 (16u * 1024u * 1024u)

struct ssh_conn {
        int fd;
        LIBSSH2_SESSION *s;
        LIBSSH2_SFTP *sftp;
        int command_timeout_ms;
        int64_t deadline; /* of the operation under way (monotonic ms) */
        bool broken;
        char *error;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;

static void init_libssh2(void)
{
        init_result = libssh2_init(0);
}

static int fail(ssh_conn *c, int err, const char *fmt, ...) _printf_(3, 4);
static int fail(ssh_conn *c, int err, const char *fmt, ...)
{
        va_list ap;
        assert(err < 0);
        va_start(ap, fmt);
        free(c->error);
        c->error = xvasprintf(fmt, ap);
        va_end(ap);
        /* after a timeout or a transport error the session may be mid-packet */
        if (err == -ETIMEDOUT || err == -EIO || err == -ECONNRESET)
                c->broken = true;
        return err;
}

/* libssh2's own message for the last error of the session. */
static int fail_lib(ssh_conn *c, const char *what)
{
        char *msg = NULL;
        int code = c->s ? libssh2_session_last_error(c->s, &msg, NULL, 0) : 0;
        if (code == LIBSSH2_ERROR_TIMEOUT)
                return fail(c, -ETIMEDOUT, "%s: timed out", what);
        if (code == LIBSSH2_ERROR_SOCKET_DISCONNECT || code == LIBSSH2_ERROR_SOCKET_RECV ||
            code == LIBSSH2_ERROR_SOCKET_SEND)
                return fail(c, -ECONNRESET, "%s: the connection was lost", what);
        return fail(c, -EIO, "%s: %s", what, msg && *msg ? msg : "SSH error");
}

static void start_deadline(ssh_conn *c, int timeout_ms)
{
        c->deadline = now_mono_ms() + timeout_ms;
}

/* After EAGAIN: wait until the socket is ready the way libssh2 wants. 0, or -ETIMEDOUT. */
static int wait_io(ssh_conn *c)
{
        int64_t left = c->deadline - now_mono_ms();
        if (left <= 0)
                return -ETIMEDOUT;
        int dir = libssh2_session_block_directions(c->s);
        struct pollfd p = {.fd = c->fd};
        if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
                p.events |= POLLIN;
        if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
                p.events |= POLLOUT;
        if (!p.events) {
                /* libssh2 wants to be called again without waiting on anything specific */
                p.events = POLLIN;
                left = MIN(left, 10);
        }
        int r = poll(&p, 1, (int)MIN(left, INT_MAX));
        if (r < 0 && errno != EINTR)
                return -errno;
        return 0;
}

/* Repeat a libssh2 call returning an int while it says EAGAIN; leaves the result in rc. */
#define RETRY(c, rc, call, what)                                                                   \
        do {                                                                                       \
                while (((rc) = (call)) == LIBSSH2_ERROR_EAGAIN)                                    \
                        if (wait_io(c) < 0)                                                        \
                                return fail((c), -ETIMEDOUT, "%s: timed out", (what));             \
        } while (0)

/* The same for a call returning a pointer (NULL with EAGAIN as the session's last error). */
#define RETRY_PTR(c, ptr, call, what)                                                              \
        do {                                                                                       \
                while (!((ptr) = (call)) &&                                                        \
                       libssh2_session_last_errno((c)->s) == LIBSSH2_ERROR_EAGAIN)                 \
                        if (wait_io(c) < 0)                                                        \
                                return fail((c), -ETIMEDOUT, "%s: timed out", (what));             \
        } while (0)

static int tcp_connect(ssh_conn *c, const char *host, int port)
{
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *res = NULL;
        char service[16];
        snprintf(service, sizeof(service), "%d", port);
        int k = getaddrinfo(host, service, &hints, &res);
        if (k != 0)
                return fail(c, -EHOSTUNREACH, "cannot resolve %s: %s", host, gai_strerror(k));

        int err = -EHOSTUNREACH;
        for (struct addrinfo *a = res; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                                a->ai_protocol);
                if (fd < 0) {
                        err = -errno;
                        continue;
                }
                if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        err = -errno;
                        close(fd);
                        continue;
                }
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                int64_t left;
                int r = 0;
                while ((left = c->deadline - now_mono_ms()) > 0 &&
                       (r = poll(&p, 1, (int)MIN(left, INT_MAX))) < 0 && errno == EINTR)
                        ;
                if (r <= 0) {
                        err = r < 0 ? -errno : -ETIMEDOUT;
                        close(fd);
                        continue;
                }
                int so = 0;
                socklen_t len = sizeof(so);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) < 0 || so != 0) {
                        err = so ? -so : -errno;
                        close(fd);
                        continue;
                }
                c->fd = fd;
                freeaddrinfo(res);
                return 0;
        }
        freeaddrinfo(res);
        return fail(c, err, "cannot connect to %s port %d: %s", host, port,
                    err == -ETIMEDOUT ? "timed out" : strerror(-err));
}

static int check_host_key(ssh_conn *c, const ssh_opts *o, const char *host, int port)
{
        size_t len = 0;
        int type = 0;
        const char *key = libssh2_session_hostkey(c->s, &len, &type);
        if (!key)
                return fail_lib(c, "reading the host key");
        _cleanup_free_ char *msg = NULL;
        int k = known_hosts_check(o->known_hosts, host, port, (const uint8_t *)key, len, &msg);
        if (k < 0)
                return fail(c, k == -EACCES ? -EACCES : k, "%s", msg ? msg : "host key refused");
        return 0;
}

/*
 * Ask for the host key types known_hosts lists for the host first
 * (known_hosts_algorithms), as OpenSSH's client does: libssh2's own order
 * starts with ECDSA, and a machine listed with its Ed25519 key only would
 * show its ECDSA key and be refused.
 */
static int prefer_known_host_keys(ssh_conn *c, const ssh_opts *o, const char *host, int port)
{
        const char **algs = NULL;
        int n = libssh2_session_supported_algs(c->s, LIBSSH2_METHOD_HOSTKEY, &algs);
        if (n <= 0)
                return 0; /* the library's own order */
        _cleanup_free_ char *prefs =
            known_hosts_algorithms(o->known_hosts, host, port, algs, (size_t)n);
        libssh2_free(c->s, (void *)algs);
        if (!prefs)
                return 0;
        if (libssh2_session_method_pref(c->s, LIBSSH2_METHOD_HOSTKEY, prefs) != 0)
                return fail_lib(c, "setting the host key algorithms");
        log_debug("ssh: host key algorithms for %s port %d: %s", host, port, prefs);
        return 0;
}

static int auth_agent(ssh_conn *c, const char *user)
{
        LIBSSH2_AGENT *agent = libssh2_agent_init(c->s);
        struct libssh2_agent_publickey *id = NULL, *prev = NULL;
        int rc, r = fail(c, -EACCES, "the ssh-agent holds no key %s@ accepts", user);

        if (!agent)
                return fail(c, -ENOMEM, "cannot set up the ssh-agent client");
        if (libssh2_agent_connect(agent) != 0) {
                r = fail(c, -EACCES, "no ssh-agent to authenticate with (is SSH_AUTH_SOCK set?)");
                goto out;
        }
        if (libssh2_agent_list_identities(agent) != 0) {
                r = fail(c, -EACCES, "cannot list the keys of the ssh-agent");
                goto out;
        }
        while (libssh2_agent_get_identity(agent, &id, prev) == 0) {
                while ((rc = libssh2_agent_userauth(agent, user, id)) == LIBSSH2_ERROR_EAGAIN)
                        if (wait_io(c) < 0) {
                                r = fail(c, -ETIMEDOUT, "authentication timed out");
                                goto out;
                        }
                if (rc == 0) {
                        r = 0;
                        break;
                }
                prev = id;
        }
out:
        libssh2_agent_disconnect(agent);
        libssh2_agent_free(agent);
        return r;
}

int ssh_connect(const ssh_opts *o, const char *host, int port, const char *user, ssh_conn **ret,
                char **ret_error)
{
        assert(o && o->known_hosts && host && user && ret);
        _cleanup_(ssh_conn_freep) ssh_conn *c = XNEW(ssh_conn);
        int k, rc;

        c->fd = -1;
        c->command_timeout_ms =
            o->command_timeout_ms > 0 ? o->command_timeout_ms : DEFAULT_COMMAND_TIMEOUT_MS;
        (void)pthread_once(&init_once, init_libssh2);
        if (init_result != 0) {
                k = fail(c, -EIO, "libssh2 cannot be initialized");
                goto err;
        }
        start_deadline(c, o->connect_timeout_ms > 0 ? o->connect_timeout_ms
                                                    : DEFAULT_CONNECT_TIMEOUT_MS);
        if ((k = tcp_connect(c, host, port)) < 0)
                goto err;
        c->s = libssh2_session_init();
        if (!c->s) {
                k = fail(c, -ENOMEM, "cannot create an SSH session");
                goto err;
        }
        libssh2_session_set_blocking(c->s, 0);
        if ((k = prefer_known_host_keys(c, o, host, port)) < 0)
                goto err;
        while ((rc = libssh2_session_handshake(c->s, c->fd)) == LIBSSH2_ERROR_EAGAIN)
                if (wait_io(c) < 0)
                        break;
        if (rc == LIBSSH2_ERROR_EAGAIN) {
                k = fail(c, -ETIMEDOUT, "SSH handshake with %s port %d timed out", host, port);
                goto err;
        }
        if (rc != 0) {
                k = fail_lib(c, "SSH handshake");
                goto err;
        }
        if ((k = check_host_key(c, o, host, port)) < 0)
                goto err;

        if (o->key_file) {
                while ((rc = libssh2_userauth_publickey_fromfile_ex(
                            c->s, user, (unsigned)strlen(user), NULL, o->key_file,
                            o->key_passphrase)) == LIBSSH2_ERROR_EAGAIN)
                        if (wait_io(c) < 0)
                                break;
                if (rc == LIBSSH2_ERROR_EAGAIN)
                        k = fail(c, -ETIMEDOUT, "authentication timed out");
                else if (rc == LIBSSH2_ERROR_FILE)
                        k = fail(c, -EACCES,
                                 "cannot use the key %s (unreadable, or a wrong "
                                 "passphrase)",
                                 o->key_file);
                else if (rc != 0)
                        k = fail(c, -EACCES, "%s@%s refused the key %s", user, host, o->key_file);
                else
                        k = 0;
        } else {
                k = auth_agent(c, user);
        }
        if (k < 0)
                goto err;
        log_debug("ssh: connected to %s@%s port %d", user, host, port);
        *ret = TAKE_PTR(c);
        return 0;
err:
        if (ret_error)
                *ret_error = xstrdup(c->error);
        return k;
}

void ssh_conn_free(ssh_conn *c)
{
        if (!c)
                return;
        if (c->s) {
                /*
                 * Best effort and bounded: libssh2_session_free() blocks until
                 * open channels are closed, which a broken or hung peer never
                 * answers; a shut-down socket makes every wait end at once.
                 */
                libssh2_session_set_blocking(c->s, 1); /* else the frees return EAGAIN */
                libssh2_session_set_timeout(c->s, 1000);
                if (c->broken && c->fd >= 0)
                        (void)shutdown(c->fd, SHUT_RDWR);
                if (c->sftp)
                        (void)libssh2_sftp_shutdown(c->sftp);
                if (!c->broken)
                        (void)libssh2_session_disconnect(c->s, "bye");
                libssh2_session_free(c->s);
        }
        if (c->fd >= 0)
                close(c->fd);
        free(c->error);
        free(c);
}

const char *ssh_last_error(const ssh_conn *c)
{
        return c && c->error ? c->error : "";
}

bool ssh_conn_usable(const ssh_conn *c)
{
        return c && !c->broken;
}

char *ssh_quote(const char *word)
{
        strbuf sb = STRBUF_INIT;
        sb_appendc(&sb, '\'');
        for (const char *p = word; *p; p++) {
                if (*p == '\'')
                        sb_append(&sb, "'\\''");
                else
                        sb_appendc(&sb, *p);
        }
        sb_appendc(&sb, '\'');
        return sb_detach(&sb);
}

/*
 * Where a command's standard output goes: collected in sb (at most
 * MAX_OUTPUT bytes), or, with fd >= 0, written to fd (at most max bytes).
 */
typedef struct out_sink {
        strbuf *sb;
        int fd;
        uint64_t max;
        uint64_t written;
        int error; /* -errno of a failed write to fd */
} out_sink;

/* Read what one stream has now: >0 bytes, 0 nothing now or EOF, <0 error (-EFBIG: too much). */
static ssize_t drain(LIBSSH2_CHANNEL *ch, int stream, out_sink *o)
{
        char buf[16384];
        ssize_t total = 0, n;
        while ((n = libssh2_channel_read_ex(ch, stream, buf, sizeof(buf))) > 0) {
                if (o->fd >= 0) {
                        if (o->written + (uint64_t)n > o->max)
                                return -EFBIG;
                        int k = write_all(o->fd, buf, (size_t)n);
                        if (k < 0) {
                                o->error = k;
                                return -EIO;
                        }
                        o->written += (uint64_t)n;
                } else {
                        if (o->sb->len + (size_t)n > MAX_OUTPUT)
                                return -EFBIG;
                        sb_append_len(o->sb, buf, (size_t)n);
                }
                total += n;
        }
        if (n < 0 && n != LIBSSH2_ERROR_EAGAIN)
                return n;
        return total;
}

static int exec_channel(ssh_conn *c, LIBSSH2_CHANNEL *ch, const char *command,
                        const void *stdin_data, size_t stdin_len, out_sink *out, strbuf *err,
                        int *ret_status)
{
        int rc;
        size_t sent = 0;
        bool eof_sent = false;

        RETRY(c, rc, libssh2_channel_exec(ch, command), "starting the command");
        if (rc != 0)
                return fail_lib(c, "starting the command");
        for (;;) {
                bool progress = false;
                if (!eof_sent && stdin_data && sent < stdin_len) {
                        ssize_t n = libssh2_channel_write(ch, (const char *)stdin_data + sent,
                                                          stdin_len - sent);
                        if (n < 0 && n != LIBSSH2_ERROR_EAGAIN)
                                return fail_lib(c, "writing the command's input");
                        if (n > 0) {
                                sent += (size_t)n;
                                progress = true;
                                /* the timeout bounds a stall, not a long transfer */
                                start_deadline(c, c->command_timeout_ms);
                        }
                }
                if (!eof_sent && (!stdin_data || sent == stdin_len)) {
                        rc = libssh2_channel_send_eof(ch);
                        if (rc == 0)
                                eof_sent = true;
                        else if (rc != LIBSSH2_ERROR_EAGAIN)
                                return fail_lib(c, "closing the command's input");
                }
                out_sink errs = {.sb = err, .fd = -1};
                ssize_t a = drain(ch, 0, out), b = drain(ch, SSH_EXTENDED_DATA_STDERR, &errs);
                if (a == -EIO && out->error < 0)
                        return fail(c, out->error, "writing the command's output: %s",
                                    strerror(-out->error));
                if (out->fd >= 0 && a == -EFBIG)
                        return fail(c, -EFBIG, "the command wrote more than %llu bytes",
                                    (unsigned long long)out->max);
                if (a == -EFBIG || b == -EFBIG)
                        return fail(c, -EIO, "the command wrote more than %u bytes", MAX_OUTPUT);
                if (a < 0 || b < 0)
                        return fail_lib(c, "reading the command's output");
                if (a > 0 || b > 0) {
                        progress = true;
                        /* a long output is a transfer: the timeout bounds a stall */
                        if (out->fd >= 0)
                                start_deadline(c, c->command_timeout_ms);
                }
                if (eof_sent && libssh2_channel_eof(ch))
                        break;
                if (!progress && wait_io(c) < 0)
                        return fail(c, -ETIMEDOUT, "the command did not finish within %d ms",
                                    c->command_timeout_ms);
        }
        RETRY(c, rc, libssh2_channel_close(ch), "closing the channel");
        RETRY(c, rc, libssh2_channel_wait_closed(ch), "closing the channel");
        char *signal = NULL;
        (void)libssh2_channel_get_exit_signal(ch, &signal, NULL, NULL, NULL, NULL, NULL);
        *ret_status = signal ? -1 : libssh2_channel_get_exit_status(ch);
        if (signal)
                libssh2_free(c->s, signal);
        return 0;
}

/* ssh_exec(), its output collected in out or streamed into out_fd (>= 0, at most max bytes). */
static int exec_into(ssh_conn *c, const char *command, const void *stdin_data, size_t stdin_len,
                     strbuf *out, int out_fd, uint64_t max, int *ret_status, strbuf *err)
{
        LIBSSH2_CHANNEL *ch;
        int status = -1;

        if (c->broken)
                return fail(c, -EIO, "the connection failed earlier");
        start_deadline(c, c->command_timeout_ms);
        RETRY_PTR(c, ch, libssh2_channel_open_session(c->s), "opening a channel");
        if (!ch)
                return fail_lib(c, "opening a channel");
        out_sink sink = {.sb = out, .fd = out_fd, .max = max};
        int k = exec_channel(c, ch, command, stdin_data, stdin_len, &sink, err, &status);
        /* on a broken session the channel goes with it (ssh_conn_free) */
        if (!c->broken)
                while (libssh2_channel_free(ch) == LIBSSH2_ERROR_EAGAIN)
                        if (wait_io(c) < 0)
                                break;
        if (k < 0)
                return k;
        log_debug("ssh: `%s` exited with %d", command, status);
        *ret_status = status;
        return 0;
}

int ssh_exec_to_fd(ssh_conn *c, const char *command, int fd, uint64_t max, int *ret_status,
                   char **ret_stderr)
{
        assert(c && command && fd >= 0 && ret_status);
        _cleanup_(sb_release) strbuf err = STRBUF_INIT;
        int k = exec_into(c, command, NULL, 0, NULL, fd, max, ret_status, &err);
        if (k >= 0 && ret_stderr)
                *ret_stderr = xstrdup(sb_str(&err));
        return k;
}

int ssh_exec(ssh_conn *c, const char *command, const void *stdin_data, size_t stdin_len,
             int *ret_status, char **ret_stdout, char **ret_stderr)
{
        assert(c && command && ret_status);
        _cleanup_(sb_release) strbuf out = STRBUF_INIT, err = STRBUF_INIT;
        int status = -1;
        int k = exec_into(c, command, stdin_data, stdin_len, &out, -1, 0, &status, &err);
        if (k < 0)
                return k;
        *ret_status = status;
        if (ret_stdout)
                *ret_stdout = xstrdup(sb_str(&out));
        if (ret_stderr)
                *ret_stderr = xstrdup(sb_str(&err));
        return 0;
}

static int sftp(ssh_conn *c, LIBSSH2_SFTP **ret)
{
        if (!c->sftp) {
                RETRY_PTR(c, c->sftp, libssh2_sftp_init(c->s), "starting SFTP");
                if (!c->sftp)
                        return fail_lib(c, "starting SFTP");
        }
        *ret = c->sftp;
        return 0;
}

static int sftp_fail(ssh_conn *c, const char *what, const char *path)
{
        unsigned long code = c->sftp ? libssh2_sftp_last_error(c->sftp) : 0;
        if (libssh2_session_last_errno(c->s) == LIBSSH2_ERROR_SFTP_PROTOCOL) {
                if (code == LIBSSH2_FX_NO_SUCH_FILE || code == LIBSSH2_FX_NO_SUCH_PATH)
                        return fail(c, -ENOENT, "%s %s: no such file or directory", what, path);
                if (code == LIBSSH2_FX_PERMISSION_DENIED)
                        return fail(c, -EACCES, "%s %s: permission denied", what, path);
                return fail(c, -EIO, "%s %s: SFTP status %lu", what, path, code);
        }
        _cleanup_free_ char *w = xasprintf("%s %s", what, path);
        return fail_lib(c, w);
}

static int write_handle(ssh_conn *c, LIBSSH2_SFTP_HANDLE *h, const char *tmp, const void *data,
                        size_t len, mode_t mode)
{
        LIBSSH2_SFTP_ATTRIBUTES attrs = {.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS,
                                         .permissions = mode & 07777};
        int rc;
        RETRY(c, rc, libssh2_sftp_fsetstat(h, &attrs), "setting the mode of the file");
        if (rc != 0)
                return sftp_fail(c, "setting the mode of", tmp);
        for (size_t off = 0; off < len;) {
                ssize_t n = libssh2_sftp_write(h, (const char *)data + off, len - off);
                if (n == LIBSSH2_ERROR_EAGAIN) {
                        if (wait_io(c) < 0)
                                return fail(c, -ETIMEDOUT, "writing %s: timed out", tmp);
                        continue;
                }
                if (n < 0)
                        return sftp_fail(c, "writing", tmp);
                off += (size_t)n;
                start_deadline(c, c->command_timeout_ms); /* a stall times out, not a big file */
        }
        RETRY(c, rc, libssh2_sftp_fsync(h), "fsync");
        if (rc != 0)
                return sftp_fail(c, "fsync of", tmp);
        return 0;
}

/* "<dir>/.<base>.gitcd-<16 random hex digits>": a temporary name nobody can guess. */
static char *temporary_name(const char *dir, const char *base)
{
        uint64_t r = 0;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
                r = ((uint64_t)now_mono_ms() << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&r;
        return xasprintf("%s/.%s.gitcd-%016llx", dir, base, (unsigned long long)r);
}

/* Best effort: remove a temporary that was not renamed into place (the error is kept). */
static void remove_temporary(ssh_conn *c, LIBSSH2_SFTP *s, const char *tmp)
{
        if (c->broken)
                return;
        int rc;
        while ((rc = libssh2_sftp_unlink_ex(s, tmp, (unsigned)strlen(tmp))) == LIBSSH2_ERROR_EAGAIN)
                if (wait_io(c) < 0)
                        break;
        if (rc != 0)
                log_debug("ssh: %s was left behind", tmp);
}

int ssh_upload(ssh_conn *c, const char *path, const void *data, size_t len, mode_t mode)
{
        assert(c && path && path[0] == '/' && (data || len == 0));
        LIBSSH2_SFTP *s = NULL;
        LIBSSH2_SFTP_HANDLE *h = NULL;
        int k, rc;

        if (c->broken)
                return fail(c, -EIO, "the connection failed earlier");
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *dir = xstrndup(path, (size_t)(slash - path));
        _cleanup_free_ char *tmp = NULL;

        start_deadline(c, c->command_timeout_ms);
        if ((k = sftp(c, &s)) < 0)
                return k;
        /* exclusive: a name taken (by chance, or a planted link) is never opened */
        for (int attempt = 0; !h && attempt < 4; attempt++) {
                free(tmp);
                tmp = temporary_name(dir, slash + 1);
                RETRY_PTR(
                    c, h,
                    libssh2_sftp_open_ex(s, tmp, (unsigned)strlen(tmp),
                                         LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL,
                                         (long)(mode & 07777), LIBSSH2_SFTP_OPENFILE),
                    "opening the file");
                unsigned long code = libssh2_sftp_last_error(s);
                if (!h &&
                    (c->broken || libssh2_session_last_errno(c->s) != LIBSSH2_ERROR_SFTP_PROTOCOL ||
                     (code != LIBSSH2_FX_FILE_ALREADY_EXISTS && code != LIBSSH2_FX_FAILURE)))
                        break;
        }
        if (!h)
                return sftp_fail(c, "creating", tmp);
        k = write_handle(c, h, tmp, data, len, mode);
        if (c->broken)
                return k;
        RETRY(c, rc, libssh2_sftp_close_handle(h), "closing the file");
        if (k >= 0 && rc != 0)
                k = sftp_fail(c, "closing", tmp);
        if (k < 0) {
                remove_temporary(c, s, tmp);
                return k;
        }

        _cleanup_free_ char *qt = ssh_quote(tmp), *qp = ssh_quote(path);
        _cleanup_free_ char *cmd =
            xasprintf("mv -f -- %s %s || { rm -f -- %s; exit 1; }", qt, qp, qt);
        _cleanup_free_ char *err = NULL;
        int status = -1;
        if ((k = ssh_exec(c, cmd, NULL, 0, &status, NULL, &err)) < 0)
                return k;
        if (status != 0)
                return fail(c, -EIO, "renaming %s into place: %s", tmp,
                            isempty(err) ? "mv failed" : err);
        log_debug("ssh: wrote %s (%zu bytes, mode %04o)", path, len, (unsigned)mode);
        return 0;
}

int ssh_read_file(ssh_conn *c, const char *path, size_t max, char **ret_data, size_t *ret_len)
{
        assert(c && path && ret_data);
        _cleanup_(sb_release) strbuf sb = STRBUF_INIT;
        LIBSSH2_SFTP *s = NULL;
        LIBSSH2_SFTP_HANDLE *h;
        char buf[16384];
        ssize_t n;
        int k, rc;

        if (c->broken)
                return fail(c, -EIO, "the connection failed earlier");
        start_deadline(c, c->command_timeout_ms);
        if ((k = sftp(c, &s)) < 0)
                return k;
        RETRY_PTR(c, h,
                  libssh2_sftp_open_ex(s, path, (unsigned)strlen(path), LIBSSH2_FXF_READ, 0,
                                       LIBSSH2_SFTP_OPENFILE),
                  "opening the file");
        if (!h)
                return sftp_fail(c, "reading", path);
        k = 0;
        for (;;) {
                n = libssh2_sftp_read(h, buf, sizeof(buf));
                if (n == LIBSSH2_ERROR_EAGAIN) {
                        if (wait_io(c) < 0)
                                return fail(c, -ETIMEDOUT, "reading %s: timed out", path);
                        continue;
                }
                if (n < 0) {
                        k = sftp_fail(c, "reading", path);
                        break;
                }
                if (n == 0)
                        break;
                if (sb.len + (size_t)n > max) {
                        k = fail(c, -EFBIG, "%s is larger than %zu bytes", path, max);
                        break;
                }
                sb_append_len(&sb, buf, (size_t)n);
        }
        if (c->broken)
                return k;
        RETRY(c, rc, libssh2_sftp_close_handle(h), "closing the file");
        if (k < 0)
                return k;
        if (ret_len)
                *ret_len = sb.len;
        *ret_data = sb.buf ? sb_detach(&sb) : xstrdup("");
        return 0;
}

/* ---- the pool ---- */

typedef struct pool_entry {
        char *key; /* user@host:port */
        ssh_conn *conn;
        bool busy;          /* lent to a thread (ssh_pool_get .. ssh_pool_put) */
        uint64_t failed_in; /* the pass (ssh_pool.pass) its connect failed in; 0: none */
        int error;
        char *message;
} pool_entry;

struct ssh_pool {
        ssh_opts opts;
        char *known_hosts, *key_file, *passphrase;
        pthread_mutex_t lock; /* the table and every entry's busy and failed_in */
        pthread_cond_t put;   /* an entry was given back */
        uint64_t pass;        /* 1, 2, ...: ssh_pool_new_pass() */
        pool_entry **items;   /* each entry stays where it is while lent */
        size_t n, alloc;
};

ssh_pool *ssh_pool_new(const ssh_opts *o)
{
        ssh_pool *p = XNEW(ssh_pool);
        p->opts = *o;
        p->known_hosts = xstrdup_null(o->known_hosts);
        p->key_file = xstrdup_null(o->key_file);
        p->passphrase = xstrdup_null(o->key_passphrase);
        p->opts.known_hosts = p->known_hosts;
        p->opts.key_file = p->key_file;
        p->opts.key_passphrase = p->passphrase;
        p->pass = 1;
        if (pthread_mutex_init(&p->lock, NULL) != 0 || pthread_cond_init(&p->put, NULL) != 0)
                abort();
        return p;
}

void ssh_pool_free(ssh_pool *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++) {
                assert(!p->items[i]->busy);
                ssh_conn_free(p->items[i]->conn);
                free(p->items[i]->key);
                free(p->items[i]->message);
                free(p->items[i]);
        }
        free(p->items);
        free(p->known_hosts);
        free(p->key_file);
        if (p->passphrase)
                explicit_bzero(p->passphrase, strlen(p->passphrase));
        free(p->passphrase);
        pthread_cond_destroy(&p->put);
        pthread_mutex_destroy(&p->lock);
        free(p);
}

void ssh_pool_new_pass(ssh_pool *p)
{
        pthread_mutex_lock(&p->lock);
        p->pass++;
        for (size_t i = 0; i < p->n; i++) {
                pool_entry *e = p->items[i];
                if (!e->busy && e->conn && !ssh_conn_usable(e->conn)) {
                        ssh_conn_free(e->conn);
                        e->conn = NULL;
                }
        }
        pthread_mutex_unlock(&p->lock);
}

int ssh_pool_get(ssh_pool *p, const char *host, int port, const char *user, ssh_conn **ret,
                 char **ret_error)
{
        _cleanup_free_ char *key = xasprintf("%s@%s:%d", user, host, port);
        pthread_mutex_lock(&p->lock);
        pool_entry *e = NULL;
        for (size_t i = 0; i < p->n && !e; i++)
                if (streq(p->items[i]->key, key))
                        e = p->items[i];
        if (!e) {
                p->items = xgrow(p->items, &p->alloc, p->n + 1, sizeof(*p->items));
                e = p->items[p->n++] = XNEW(pool_entry);
                e->key = TAKE_PTR(key);
        }
        while (e->busy)
                pthread_cond_wait(&p->put, &p->lock);
        bool failed_this_pass = e->failed_in == p->pass;
        uint64_t pass = p->pass;
        e->busy = true;
        pthread_mutex_unlock(&p->lock);

        /* The entry is this thread's alone from here: connect without the pool's lock. */
        if (e->conn && !ssh_conn_usable(e->conn)) {
                ssh_conn_free(e->conn);
                e->conn = NULL;
        }
        if (!e->conn && !failed_this_pass) {
                free(e->message);
                e->message = NULL;
                e->error = ssh_connect(&p->opts, host, port, user, &e->conn, &e->message);
        }
        if (e->conn) {
                *ret = e->conn;
                return 0;
        }
        int r = e->error < 0 ? e->error : -EIO;
        if (ret_error)
                *ret_error = xstrdup(e->message ? e->message : strerror(-r));
        pthread_mutex_lock(&p->lock);
        e->failed_in = pass;
        e->busy = false;
        pthread_cond_broadcast(&p->put);
        pthread_mutex_unlock(&p->lock);
        return r;
}

void ssh_pool_put(ssh_pool *p, ssh_conn *c)
{
        if (!c)
                return;
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < p->n; i++)
                if (p->items[i]->conn == c) {
                        assert(p->items[i]->busy);
                        p->items[i]->busy = false;
                        break;
                }
        pthread_cond_broadcast(&p->put);
        pthread_mutex_unlock(&p->lock);
}

/*
 * The libgit2 adapter (see git.h): mirror, fetch, read trees, extract
 * signatures. Every libgit2 error is converted here into -errno plus a
 * message; git_error_last() never leaves this file and git-approvals.c, and because libgit2 is
 * only ever given URLs without credentials (they travel through the
 * credential callback), its messages cannot contain secrets.
 *
 * Design decisions:
 * - One bare mirror per source: every branch and tag is fetched into the
 *   same names (forced), never re-cloned. A poll first
 *   connects and lists the remote's refs (git_remote_ls); when the wanted
 *   ref already has the listed id locally the fetch is skipped, so an
 *   unchanged remote costs one ref advertisement. A commit id that is
 *   already in the mirror needs no network at all.
 * - Host keys are checked by our certificate_check callback against the
 *   configured known_hosts file only (libgit2's own check of
 *   ~/.ssh/known_hosts is overridden): strict, no trust on first use. The
 *   key type asked for comes from the same file (ssh_home).
 * - A lock file next to the mirror (flock) serialises gitcd processes that
 *   share a cache directory.
 * - Files are read from the commit's tree, never checked out: no working
 *   tree to go stale, and symlinks can never point outside the repository.
 *   The walk itself is tree-walk.c, bounded against tree bombs.
 * - Git content is untrusted until verified: the commit's (or tag's)
 *   signature is checked first, then that a tag's signed name is the ref
 *   asked for, then that the head descends from the last applied commit of
 *   the ref (rollback protection); only then is the tree read.
 * - The network part (connect, list, fetch) runs in a process of its own
 *   that the parent kills when the time budget is spent: libgit2 1.5 has no
 *   network timeout, so a server that accepts and then stalls would block
 *   forever, and a socket-level timeout would need a transport of our own
 *   for each protocol. That process is this program started again
 *   (fetch_child_entry), never a fork of the caller: gitcd run has other
 *   threads, and a forked child inherits any lock one of them held at
 *   that instant (the allocator's, OpenSSL's, libgit2's) with nobody left
 *   to release it. Its request (fetch-request.h) arrives on stdin from an
 *   anonymous file; it updates the mirror (under the parent's flock) and
 *   reports back through a pipe; after a kill, stale lock files and the
 *   half-written pack are removed. The size budget (bytes, objects) is
 *   enforced in that process by the transfer-progress callback.
 * - That process is a job (git_fetch_job) that holds the mirror's lock from
 *   start to finish: apply and plan start it and wait, while
 *   gitcd run starts it and polls it without blocking (waitpid WNOHANG and
 *   a non-blocking read of the pipe), so a stalled remote never holds up
 *   the reconciliation of the clusters already taken in. The budget is
 *   checked at each poll; the loop polls at least once a second.
 * - Redirects: libgit2 follows none to another host (follow_redirects
 *   NONE), the TLS certificate callback refuses any host other than the
 *   configured one, and the credential callback hands credentials only to
 *   the configured scheme, host and port.
 * - The HTTPS CA bundle is a process-wide libgit2 setting
 *   (GIT_OPT_SET_SSL_CERT_LOCATIONS): it is set in the fetch's own
 *   process, to the source's bundle or the system's.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <git2.h>
#include <pthread.h>

#include "sources/fetch-request.h"
#include "sources/git.h"
#include "sources/git-internal.h"
#include "sources/heads.h"
#include "sources/known-hosts.h"
#include "sources/revision.h"
#include "sources/sshsig.h"
#include "sources/sshwire.h"
#include "sources/tree-walk.h"
#include "sources/url.h"
#include "util/dload.h"
#include "util/escape.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/process.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define SECRET_MAX_SIZE  (64u * 1024u)
#define SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define SYSTEM_CA_DIR    "/etc/ssl/certs"
/* Set in the environment of the fetch's own process (fetch_child_entry). */
#define FETCH_CHILD_ENV "GITCD_FETCH_CHILD"
/* ...and its argv[0], with no other argument. */
#define FETCH_CHILD_NAME "gitcd-fetch"

/* libgit2's message for the last failure, never NULL. */
static const char *git_message(void)
{
        const git_error *e = git_error_last();

        return e && e->message ? e->message : "unknown error";
}

void git_buf_disposep(git_buf *b)
{
        git_buf_dispose(b);
}

struct git2_fns git2;
static pthread_once_t git2_once = PTHREAD_ONCE_INIT;
static char *git2_error; /* why libgit2 could not be loaded, or NULL */

static void git2_load_once(void)
{
#define GIT2_NAME(f) #f,
        static const char *const names[] = {GIT2_FUNCS(GIT2_NAME)};
#undef GIT2_NAME
        void *fns[ARRAY_SIZE(names)];
        if (dload(GIT2_SONAME, names, ARRAY_SIZE(names), fns, &git2_error) < 0)
                return;
        /* the table is the names' pointers in the same order (the names are macros
         * by now, so it cannot be filled field by field by name) */
        _Static_assert(sizeof(git2) == sizeof(fns), "one pointer per name");
        memcpy(&git2, fns, sizeof(git2));
}

int git2_load(char **ret_error)
{
        pthread_once(&git2_once, git2_load_once);
        if (git2_error) {
                *ret_error =
                    xasprintf("%s (the libgit2-%s package)", git2_error, LIBGIT2_SOVERSION);
                return -ENOENT;
        }
        return 0;
}

int git_adapter_init(char **ret_error)
{
        int r = git2_load(ret_error);
        if (r < 0)
                return r;
        git_libgit2_init();
        return 0;
}

void git_adapter_shutdown(void)
{
        git_libgit2_shutdown();
}

bool git_adapter_is_repository(const char *path)
{
        _cleanup_(git_repository_freep) git_repository *repo = NULL;

        return git_repository_open_ext(&repo, path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) == 0;
}

/* State shared with the libgit2 callbacks of one fetch. */
typedef struct fetch_ctx {
        const source_opts *opts;
        const source_url *url;
        char *error;    /* our own message, preferred over libgit2's */
        int error_code; /* the errno that goes with it */
        unsigned ssh_key_tries;
        unsigned https_tries;
} fetch_ctx;

/* What the fetch (in the child) found, sent back to the parent. */
typedef struct fetch_result {
        bool skipped; /* nothing downloaded */
        unsigned objects;
        size_t bytes;
        char *refname; /* NULL for a commit id */
        git_oid oid;
} fetch_result;

static void ctx_fail(fetch_ctx *c, int code, const char *fmt, ...) _printf_(3, 4);
static void ctx_fail(fetch_ctx *c, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        free(c->error);
        c->error = xvasprintf(fmt, ap);
        c->error_code = code;
        va_end(ap);
}

/* Turn a failed libgit2 call into -errno and a message (our callback's message wins). */
static int convert_error(fetch_ctx *c, int gerr, char **ret_error, const char *what)
{
        if (c && c->error) {
                *ret_error = TAKE_PTR(c->error);
                return c->error_code;
        }
        return git_error_to_errno(gerr, ret_error, what);
}

int git_error_to_errno(int gerr, char **ret_error, const char *what)
{
        const git_error *e = git_error_last();

        *ret_error = xasprintf("%s: %s", what, e && e->message ? e->message : "unknown error");
        switch (gerr) {
        case GIT_ENOTFOUND:
                return -ENOENT;
        case GIT_EAUTH:
        case GIT_ECERTIFICATE:
                return -EACCES;
        case GIT_ELOCKED:
                return -EBUSY;
        default:
                return -EIO;
        }
}

/* A secret from a file (trailing newlines removed) or an environment variable. */
static int read_secret(const char *file, const char *env, char **ret, char **ret_error)
{
        char *data = NULL;
        size_t len = 0;
        int r;

        if (file) {
                r = read_secret_file(file, "secret file", SECRET_MAX_SIZE, &data, &len, ret_error);
                if (r < 0)
                        return r;
                while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
                        data[--len] = '\0';
        } else if (env) {
                const char *v = getenv(env);

                if (!v) {
                        *ret_error = xasprintf("environment variable %s is not set", env);
                        return -ENOENT;
                }
                data = xstrdup(v);
        }
        *ret = data;
        return 0;
}

static void free_secret(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

static char *key_fingerprint_from_pub(const char *key_path)
{
        _cleanup_free_ char *pub = xasprintf("%s.pub", key_path), *data = NULL;
        _cleanup_free_ uint8_t *blob = NULL;
        size_t len, blob_len;
        char *sp, *end;

        if (read_file(pub, SECRET_MAX_SIZE, &data, &len) < 0)
                return NULL;
        sp = strchr(data, ' ');
        if (!sp)
                return NULL;
        end = sp + 1 + strcspn(sp + 1, " \n");
        if (base64_decode(sp + 1, (size_t)(end - sp - 1), &blob, &blob_len) < 0)
                return NULL;
        return ssh_fingerprint(blob, blob_len);
}

/* The port a URL of this kind uses when it names none. */
static int default_port(source_url_kind kind)
{
        return kind == SOURCE_URL_SSH     ? 22
               : kind == SOURCE_URL_HTTPS ? 443
               : kind == SOURCE_URL_HTTP  ? 80
                                          : 0;
}

/*
 * Whether url (as libgit2 reports it to a callback, after any redirect) is
 * the configured server: same kind of URL, host and port. Credentials go
 * nowhere else.
 */
static bool same_server(const source_url *configured, const char *url)
{
        source_url u = {0};
        _cleanup_free_ char *err = NULL;
        bool same;

        if (configured->kind == SOURCE_URL_LOCAL || configured->kind == SOURCE_URL_FILE)
                return true; /* no server: libgit2 asks for no credentials */
        if (!url || source_url_parse(url, &u, &err) < 0)
                return false;
        same = u.kind == configured->kind && streq_ptr(u.host, configured->host) &&
               (u.port ? u.port : default_port(u.kind)) ==
                   (configured->port ? configured->port : default_port(configured->kind));
        source_url_release(&u);
        return same;
}

static int credentials_cb(git_credential **out, const char *url, const char *username_from_url,
                          unsigned int allowed, void *payload)
{
        fetch_ctx *c = payload;
        const source_opts *o = c->opts;
        const char *user = username_from_url ? username_from_url : "git";

        if (!same_server(c->url, url)) {
                ctx_fail(c, -EACCES,
                         "refusing to send credentials for %s to another server (%s): the "
                         "server redirected the fetch",
                         c->url->display, url ? url : "?");
                return GIT_EAUTH;
        }
        if (c->url->kind == SOURCE_URL_SSH) {
                if (allowed & GIT_CREDENTIAL_USERNAME)
                        return git_credential_username_new(out,
                                                           c->url->user ? c->url->user : "git");
                if (!(allowed & GIT_CREDENTIAL_SSH_KEY)) {
                        ctx_fail(c, -EACCES,
                                 "SSH server %s does not accept public-key authentication",
                                 c->url->host);
                        return GIT_EAUTH;
                }
                if (c->ssh_key_tries++ > 0) {
                        _cleanup_free_ char *fp = NULL;

                        if (o->ssh_key_path && !o->use_ssh_agent)
                                fp = key_fingerprint_from_pub(o->ssh_key_path);
                        if (o->use_ssh_agent)
                                ctx_fail(c, -EACCES,
                                         "SSH authentication as %s@%s failed: the server "
                                         "refused the keys offered by the SSH agent",
                                         user, c->url->host);
                        else
                                ctx_fail(c, -EACCES,
                                         "SSH authentication as %s@%s failed: the server "
                                         "refused the key %s%s%s%s%s",
                                         user, c->url->host, o->ssh_key_path, fp ? " (" : "",
                                         fp ? fp : "", fp ? ")" : "",
                                         o->ssh_key_passphrase_file || o->ssh_key_passphrase_env
                                             ? ", or the key's passphrase is wrong"
                                             : "");
                        return GIT_EAUTH;
                }
                if (o->use_ssh_agent)
                        return git_credential_ssh_key_from_agent(out, user);
                {
                        _cleanup_free_ char *pub = xasprintf("%s.pub", o->ssh_key_path);
                        _cleanup_free_ char *err = NULL;
                        char *pass = NULL;
                        int r;

                        r = read_secret(o->ssh_key_passphrase_file, o->ssh_key_passphrase_env,
                                        &pass, &err);
                        if (r < 0) {
                                ctx_fail(c, -EACCES, "SSH key passphrase: %s", err);
                                return GIT_EAUTH;
                        }
                        r = git_credential_ssh_key_new(out, user, path_exists(pub) ? pub : NULL,
                                                       o->ssh_key_path, pass);
                        free_secret(pass);
                        return r;
                }
        }

        if (allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
                _cleanup_free_ char *err = NULL;
                const char *name = o->https_username ? o->https_username
                                   : c->url->user    ? c->url->user
                                                     : "git";
                char *token = NULL;
                int r;

                if (c->https_tries++ > 0) {
                        ctx_fail(c, -EACCES,
                                 "authentication to %s failed: the server rejected the "
                                 "credentials for user \"%s\"",
                                 c->url->host, name);
                        return GIT_EAUTH;
                }
                if (o->https_token_file || o->https_token_env) {
                        r = read_secret(o->https_token_file, o->https_token_env, &token, &err);
                        if (r < 0) {
                                ctx_fail(c, -EACCES, "HTTPS credentials: %s", err);
                                return GIT_EAUTH;
                        }
                } else if (c->url->password) {
                        token = xstrdup(c->url->password);
                } else {
                        ctx_fail(c, -EACCES,
                                 "%s requires authentication: configure https_token_file or "
                                 "https_token_env",
                                 c->url->host);
                        return GIT_EAUTH;
                }
                r = git_credential_userpass_plaintext_new(out, name, token);
                free_secret(token);
                return r;
        }
        ctx_fail(c, -EACCES, "%s asked for an unsupported kind of authentication", c->url->host);
        return GIT_EAUTH;
}

static int certificate_cb(git_cert *cert, int valid, const char *host, void *payload)
{
        fetch_ctx *c = payload;

        if (cert->cert_type == GIT_CERT_HOSTKEY_LIBSSH2) {
                const git_cert_hostkey *hk = (const git_cert_hostkey *)cert;
                _cleanup_free_ char *msg = NULL;
                int r;

                if (!(hk->type & GIT_CERT_SSH_RAW) || !hk->hostkey) {
                        ctx_fail(c, -EACCES,
                                 "cannot check the host key of %s: the SSH library did not "
                                 "provide it",
                                 c->url->host);
                        return GIT_ECERTIFICATE;
                }
                r = known_hosts_check(c->opts->known_hosts_path, c->url->host,
                                      c->url->port ? c->url->port : 22,
                                      (const uint8_t *)hk->hostkey, hk->hostkey_len, &msg);
                if (r < 0) {
                        ctx_fail(c, -EACCES, "%s", msg);
                        return GIT_ECERTIFICATE;
                }
                log_debug("host key of %s matches %s", c->url->host, c->opts->known_hosts_path);
                return 0;
        }
        if (!host || !streq(host, c->url->host)) {
                ctx_fail(c, -EACCES,
                         "refusing to talk to %s: the fetch from %s was redirected to another "
                         "host",
                         host ? host : "?", c->url->display);
                return GIT_ECERTIFICATE;
        }
        if (valid)
                return 0;
        ctx_fail(c, -EACCES, "the TLS certificate of %s is not trusted (CA: %s)", c->url->host,
                 c->opts->https_ca_file ? c->opts->https_ca_file : "the system's trust store");
        return GIT_ECERTIFICATE;
}

/* The size budget of a fetch: abort as soon as it is exceeded. */
static int transfer_cb(const git_indexer_progress *st, void *payload)
{
        fetch_ctx *c = payload;

        if (st->received_bytes > c->opts->max_fetch_bytes) {
                ctx_fail(c, -EFBIG,
                         "the fetch from %s exceeds the budget of %zu bytes: aborted (the "
                         "repository is too large, or the server sends too much)",
                         c->url->display, c->opts->max_fetch_bytes);
                return -1;
        }
        if (st->total_objects > c->opts->max_fetch_objects ||
            st->received_objects > c->opts->max_fetch_objects) {
                ctx_fail(c, -EFBIG,
                         "the fetch from %s exceeds the budget of %zu objects (%u announced): "
                         "aborted",
                         c->url->display, c->opts->max_fetch_objects, st->total_objects);
                return -1;
        }
        return 0;
}

static bool is_commit_id(const char *ref)
{
        if (!ref || strlen(ref) != GIT_OID_HEXSZ)
                return false;
        for (const char *p = ref; *p; p++)
                if (!strchr("0123456789abcdefABCDEF", *p))
                        return false;
        return true;
}

/* Find a ref in the remote's advertisement; NULL when absent. */
static const git_remote_head *find_head(const git_remote_head **heads, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (streq(heads[i]->name, name))
                        return heads[i];
        return NULL;
}

/*
 * Pick the ref the user asked for from the advertisement: the remote's HEAD
 * branch (or main, master), or "refs/..." as given, or a branch, or a tag.
 */
static int resolve_remote_ref(git_remote *remote, const char *ref, const git_remote_head **heads,
                              size_t n, char **ret_name, git_oid *ret_oid)
{
        const git_remote_head *h = NULL;
        _cleanup_free_ char *name = NULL;

        if (!ref) {
                git_buf def = {0};

                if (git_remote_default_branch(&def, remote) == 0) {
                        name = xstrdup(def.ptr);
                        git_buf_dispose(&def);
                        h = find_head(heads, n, name);
                }
                if (!h) {
                        free(name);
                        name = xstrdup("refs/heads/main");
                        h = find_head(heads, n, name);
                }
                if (!h) {
                        free(name);
                        name = xstrdup("refs/heads/master");
                        h = find_head(heads, n, name);
                }
        } else if (strneq(ref, "refs/", 5)) {
                name = xstrdup(ref);
                h = find_head(heads, n, name);
        } else {
                name = xasprintf("refs/heads/%s", ref);
                h = find_head(heads, n, name);
                if (!h) {
                        free(name);
                        name = xasprintf("refs/tags/%s", ref);
                        h = find_head(heads, n, name);
                }
        }
        if (!h)
                return -ENOENT;
        *ret_name = TAKE_PTR(name);
        *ret_oid = h->oid;
        return 0;
}

/* Who made a commit, cut to the bounds before anything else reads it. */
static void person(source_person *p, const git_signature *s)
{
        p->name = str_cut(s->name ? s->name : "", SOURCE_MAX_PERSON_BYTES);
        p->email = str_cut(s->email ? s->email : "", SOURCE_MAX_PERSON_BYTES);
        p->time = (int64_t)s->when.time;
        p->offset_minutes = s->when.offset;
}

/* tree-walk.c's operations over a repository. */
typedef struct repo_walk {
        git_repository *repo;
        git_odb *odb;
} repo_walk;

static int rw_open_tree(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], void **ret_tree,
                        size_t *ret_n, char **ret_error)
{
        repo_walk *rw = userdata;
        git_tree *tree = NULL;
        git_oid oid;

        git_oid_fromraw(&oid, id);
        if (git_tree_lookup(&tree, rw->repo, &oid) < 0) {
                *ret_error = xstrdup(git_message());
                return -EIO;
        }
        *ret_tree = tree;
        *ret_n = git_tree_entrycount(tree);
        return 0;
}

static void rw_entry(void *userdata, void *tree, size_t i, tree_walk_entry *ret)
{
        const git_tree_entry *e = git_tree_entry_byindex(tree, i);

        (void)userdata;
        assert(e);
        ret->name = git_tree_entry_name(e);
        ret->mode = (uint32_t)git_tree_entry_filemode(e); /* normalised, as git reads it */
        memcpy(ret->id, git_tree_entry_id(e)->id, TREE_WALK_ID_SIZE);
}

static void rw_close_tree(void *userdata, void *tree)
{
        (void)userdata;
        git_tree_free(tree);
}

static int rw_blob_size(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], size_t *ret_size,
                        char **ret_error)
{
        repo_walk *rw = userdata;
        git_object_t type;
        git_oid oid;

        git_oid_fromraw(&oid, id);
        if (git_odb_read_header(ret_size, &type, rw->odb, &oid) < 0) {
                *ret_error = xstrdup(git_message());
                return -EIO;
        }
        if (type != GIT_OBJECT_BLOB) {
                *ret_error = xstrdup("the entry does not name a blob");
                return -EIO;
        }
        return 0;
}

static int rw_blob_read(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], char **ret_content,
                        size_t *ret_len, char **ret_error)
{
        repo_walk *rw = userdata;
        _cleanup_(git_blob_freep) git_blob *blob = NULL;
        git_oid oid;
        size_t size;
        char *content;

        git_oid_fromraw(&oid, id);
        if (git_blob_lookup(&blob, rw->repo, &oid) < 0) {
                *ret_error = xstrdup(git_message());
                return -EIO;
        }
        size = (size_t)git_blob_rawsize(blob);
        content = xmalloc(size + 1);
        memcpy(content, git_blob_rawcontent(blob), size);
        content[size] = '\0';
        *ret_content = content;
        *ret_len = size;
        return 0;
}

static const tree_walk_ops repo_walk_ops = {
    .open_tree = rw_open_tree,
    .entry = rw_entry,
    .close_tree = rw_close_tree,
    .blob_size = rw_blob_size,
    .blob_read = rw_blob_read,
};

static int read_files(git_repository *repo, git_commit *commit, const char *subpath,
                      size_t max_size, size_t max_total, source_revision *rev, char **ret_error)
{
        _cleanup_(git_tree_freep) git_tree *root = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        tree_walk_limits lim = {.max_file_size = max_size, .max_total_size = max_total};
        repo_walk rw = {.repo = repo};
        const git_oid *start;
        _cleanup_(git_tree_entry_freep) git_tree_entry *e = NULL;

        if (git_commit_tree(&root, commit) < 0 || git_repository_odb(&odb, repo) < 0) {
                *ret_error = xasprintf("cannot read the tree of commit %s: %s", rev->commit_id,
                                       git_message());
                return -EIO;
        }
        rw.odb = odb;
        start = git_tree_id(root);
        if (!isempty(subpath)) {
                if (git_tree_entry_bypath(&e, root, subpath) < 0) {
                        *ret_error = xasprintf("path \"%s\" does not exist in commit %s", subpath,
                                               rev->commit_id);
                        return -ENOENT;
                }
                if (git_tree_entry_type(e) != GIT_OBJECT_TREE) {
                        *ret_error = xasprintf("path \"%s\" in commit %s is not a folder", subpath,
                                               rev->commit_id);
                        return -ENOTDIR;
                }
                start = git_tree_entry_id(e);
        }
        return tree_walk(&repo_walk_ops, &rw, start->id, subpath, &lim, rev, ret_error);
}

/* Split a tag object's raw content into signed payload and signature, as git does. */
static bool split_tag_signature(const char *raw, size_t len, size_t *ret_payload_len)
{
        static const char *const markers[] = {
            "-----BEGIN PGP SIGNATURE-----",
            "-----BEGIN PGP MESSAGE-----",
            "-----BEGIN SIGNED MESSAGE-----",
            "-----BEGIN SSH SIGNATURE-----",
        };

        for (size_t off = 0; off < len;) {
                const char *nl = memchr(raw + off, '\n', len - off);

                for (size_t i = 0; i < ARRAY_SIZE(markers); i++) {
                        size_t ml = strlen(markers[i]);

                        if (len - off >= ml && memcmp(raw + off, markers[i], ml) == 0) {
                                *ret_payload_len = off;
                                return true;
                        }
                }
                if (!nl)
                        break;
                off = (size_t)(nl - raw) + 1;
        }
        return false;
}

/*
 * Fill the signature fields of rev for the commit, or for the annotated tag
 * when tag_oid is given. Returns 0 (verdict recorded either way), or a
 * negative errno when allowed_signers cannot be read or the objects cannot.
 */
static int check_signature(git_repository *repo, const git_oid *commit_oid, const git_oid *tag_oid,
                           int64_t when, const char *allowed_signers, source_revision *rev,
                           char **ret_error)
{
        _cleanup_(git_buf_disposep) git_buf sig = {0};
        _cleanup_(git_buf_disposep) git_buf data = {0};
        _cleanup_(git_odb_object_freep) git_odb_object *obj = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        sshsig_verdict v = {0};
        const char *what = tag_oid ? "tag" : "commit";
        const char *armored, *payload;
        size_t armored_len, payload_len;
        int r;

        rev->signature_checked = true;
        if (tag_oid) {
                const char *raw;
                size_t len;

                if (git_repository_odb(&odb, repo) < 0 || git_odb_read(&obj, odb, tag_oid) < 0) {
                        *ret_error = xasprintf("cannot read the tag object: %s", git_message());
                        return -EIO;
                }
                raw = git_odb_object_data(obj);
                len = git_odb_object_size(obj);
                if (!split_tag_signature(raw, len, &payload_len)) {
                        rev->signature_reason = xstrdup("the tag is not signed");
                        return 0;
                }
                payload = raw;
                armored = raw + payload_len;
                armored_len = len - payload_len;
        } else {
                r = git_commit_extract_signature(&sig, &data, repo, (git_oid *)commit_oid, NULL);
                if (r == GIT_ENOTFOUND) {
                        rev->signature_reason = xstrdup("the commit is not signed");
                        return 0;
                }
                if (r < 0) {
                        *ret_error =
                            xasprintf("cannot read the commit's signature: %s", git_message());
                        return -EIO;
                }
                armored = sig.ptr;
                armored_len = sig.size;
                payload = data.ptr;
                payload_len = data.size;
        }
        if (armored_len > SIGNATURE_MAX_SIZE) {
                rev->signature_reason = xasprintf("the %s's signature is too large", what);
                return 0;
        }
        r = sshsig_verify(armored, armored_len, payload, payload_len, allowed_signers, when, &v,
                          ret_error);
        if (r < 0)
                return r;
        rev->signature_verified = v.verified;
        rev->signature_reason = TAKE_PTR(v.reason);
        rev->signer_fingerprint = TAKE_PTR(v.fingerprint);
        rev->signer_identity = TAKE_PTR(v.identity);
        sshsig_verdict_release(&v);
        return 0;
}

/* Lock the mirror; without block, -EAGAIN when someone else (maybe this process) holds it. */
static int take_lock(const char *mirror_path, bool block, int *ret_fd, char **ret_error)
{
        _cleanup_free_ char *path = xasprintf("%s.lock", mirror_path);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

        if (fd < 0) {
                int r = -errno;

                *ret_error = xasprintf("cannot create lock file %s: %s", path, strerror(-r));
                return r;
        }
        while (flock(fd, LOCK_EX | (block ? 0 : LOCK_NB)) < 0) {
                int r = -errno;

                if (r == -EINTR)
                        continue;
                close(fd);
                if (r == -EWOULDBLOCK)
                        r = -EAGAIN;
                *ret_error = r == -EAGAIN ? xasprintf("%s is in use by another fetch", path)
                                          : xasprintf("cannot lock %s: %s", path, strerror(-r));
                return r;
        }
        *ret_fd = fd;
        return 0;
}

static int open_mirror(const char *mirror_path, git_repository **ret, char **ret_error)
{
        git_repository *repo = NULL;
        int r;

        if (path_exists(mirror_path)) {
                r = git_repository_open_bare(&repo, mirror_path);
                if (r == GIT_ENOTFOUND) {
                        /* Not a repository (an interrupted first fetch): start over. */
                        log_debug("%s is not a repository, recreating it", mirror_path);
                        r = rm_rf(mirror_path);
                        if (r < 0) {
                                *ret_error = xasprintf("cannot remove broken mirror %s: %s",
                                                       mirror_path, strerror(-r));
                                return r;
                        }
                        r = git_repository_init(&repo, mirror_path, 1);
                }
        } else
                r = git_repository_init(&repo, mirror_path, 1);
        if (r < 0)
                return convert_error(NULL, r, ret_error, "cannot open the mirror");
        *ret = repo;
        return 0;
}

/*
 * Connect, list, and fetch unless the wanted ref is unchanged. Runs in the
 * fetch child (see run_fetch). On success res->refname (NULL for a commit
 * id) and res->oid name what was asked for.
 */
static int update_mirror(fetch_ctx *c, git_repository *repo, fetch_result *res, char **ret_error)
{
        static char *refspec_strs[] = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
        git_strarray refspecs = {refspec_strs, ARRAY_SIZE(refspec_strs)};
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        _cleanup_free_ char *refname = NULL;
        git_fetch_options fo = GIT_FETCH_OPTIONS_INIT;
        git_remote_connect_options co = GIT_REMOTE_CONNECT_OPTIONS_INIT;
        git_remote_callbacks cb = GIT_REMOTE_CALLBACKS_INIT;
        git_remote_create_options ro = GIT_REMOTE_CREATE_OPTIONS_INIT;
        const git_remote_head **heads;
        const git_indexer_progress *stats;
        const char *ref = c->opts->ref;
        git_oid want, local;
        size_t n;
        int r;

        if (is_commit_id(ref)) {
                git_odb *odb;
                bool have;

                git_oid_fromstr(&want, ref);
                if (git_repository_odb(&odb, repo) < 0)
                        return convert_error(NULL, -1, ret_error, "cannot open the mirror");
                have = git_odb_exists(odb, &want);
                git_odb_free(odb);
                if (have) {
                        res->skipped = true;
                        res->refname = NULL;
                        res->oid = want;
                        return 0;
                }
        }

        cb.credentials = credentials_cb;
        cb.certificate_check = certificate_cb;
        cb.transfer_progress = transfer_cb;
        cb.payload = c;
        /*
         * No url.<base>.insteadOf rewriting: the URL fetched is the URL
         * configured (this also avoids a leak in libgit2 1.5's config regex).
         */
        ro.repository = repo;
        ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
        r = git_remote_create_with_opts(&remote, c->url->fetch_url, &ro);
        if (r < 0)
                return convert_error(c, r, ret_error, "invalid Git URL");
        co.callbacks = cb;
        co.follow_redirects = GIT_REMOTE_REDIRECT_NONE;
        r = git_remote_connect_ext(remote, GIT_DIRECTION_FETCH, &co);
        if (r < 0)
                return convert_error(c, r, ret_error, "cannot connect");
        r = git_remote_ls(&heads, &n, remote);
        if (r < 0)
                return convert_error(c, r, ret_error, "cannot list the remote's refs");

        if (!is_commit_id(ref)) {
                r = resolve_remote_ref(remote, ref, heads, n, &refname, &want);
                if (r < 0) {
                        *ret_error =
                            ref ? xasprintf("ref \"%s\" not found in %s", ref, c->url->display)
                                : xasprintf("%s has no default branch (HEAD, main or "
                                            "master); set a ref",
                                            c->url->display);
                        return r;
                }
                if (git_reference_name_to_id(&local, repo, refname) == 0 &&
                    git_oid_equal(&local, &want)) {
                        log_debug("%s: %s unchanged, fetch skipped", c->url->display, refname);
                        res->skipped = true;
                        git_remote_disconnect(remote);
                        res->refname = TAKE_PTR(refname);
                        res->oid = want;
                        return 0;
                }
        }

        fo.callbacks = cb;
        fo.prune = GIT_FETCH_NO_PRUNE;
        fo.update_fetchhead = 0;
        fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
        fo.follow_redirects = GIT_REMOTE_REDIRECT_NONE;
        r = git_remote_fetch(remote, &refspecs, &fo, NULL);
        if (r < 0)
                return convert_error(c, r, ret_error, "fetch failed");
        stats = git_remote_stats(remote);
        res->objects = stats->received_objects;
        res->bytes = stats->received_bytes;
        log_debug("%s: fetched %u objects, %zu bytes", c->url->display, stats->received_objects,
                  stats->received_bytes);
        res->refname = TAKE_PTR(refname);
        res->oid = want;
        return 0;
}

/*
 * In the fetch child of an SSH source: which host key libssh2 asks the
 * server for. libgit2 sets it from the first line ~/.ssh/known_hosts holds
 * for the host (and libssh2 starts with ECDSA without one), not from the
 * configured file, so a server listed with its Ed25519 key only would show
 * its ECDSA key and be refused. So this child's HOME is a folder beside
 * the mirror whose .ssh/known_hosts holds the configured file's lines for
 * the host, the preferred type first (known_hosts_lines); the key the
 * server shows is then checked against the configured file as always
 * (certificate_cb). Public keys only; the parent's HOME is untouched.
 */
static int ssh_home(fetch_ctx *c, const char *mirror_path, char **ret_error)
{
        _cleanup_free_ char *home = xasprintf("%s.ssh-home", mirror_path);
        _cleanup_free_ char *dir = xasprintf("%s/.ssh", home);
        _cleanup_free_ char *path = xasprintf("%s/known_hosts", dir);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_file(c->opts->known_hosts_path, 16u * 1024u * 1024u, &text, &len);
        if (r < 0) {
                *ret_error = xasprintf("cannot read known_hosts file %s: %s",
                                       c->opts->known_hosts_path, strerror(-r));
                return r;
        }
        _cleanup_free_ char *lines =
            known_hosts_lines(text, len, c->url->host, c->url->port ? c->url->port : 22);
        r = mkdir_p(dir, 0700);
        if (r >= 0)
                r = write_file_atomic(path, lines, strlen(lines), 0600);
        if (r < 0) {
                *ret_error = xasprintf("cannot write %s: %s", path, strerror(-r));
                return r;
        }
        if (setenv("HOME", home, 1) < 0) {
                r = -errno;
                *ret_error = xasprintf("cannot set HOME for the fetch: %s", strerror(-r));
                return r;
        }
        return 0;
}

/*
 * Point libgit2's TLS at the source's CA bundle, or at the system's. The
 * setting is process-wide: it is made in the fetch's own process.
 */
static int set_trust(const char *ca_file, char **ret_error)
{
        const char *file = ca_file, *dir = NULL;
        int r;

        if (!file) {
                if (path_exists(SYSTEM_CA_BUNDLE))
                        file = SYSTEM_CA_BUNDLE;
                else if (path_is_dir(SYSTEM_CA_DIR))
                        dir = SYSTEM_CA_DIR;
                else
                        return 0;
        }
        r = git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, file, dir);
        if (r < 0)
                return convert_error(NULL, r, ret_error, "cannot load the CA certificates");
        return 0;
}

/*
 * The fetch's report, written to fd: lines "r=", "skipped=", "objects=",
 * "bytes=", "oid=", "ref=" and last "error=" (the rest of the stream).
 */
static void child_report(int fd, int r, const fetch_result *res, const char *err)
{
        char hex[GIT_OID_HEXSZ + 1] = "";
        strbuf out = STRBUF_INIT;

        if (r >= 0)
                git_oid_tostr(hex, sizeof(hex), &res->oid);
        sb_printf(&out, "r=%d\nskipped=%d\nobjects=%u\nbytes=%zu\noid=%s\nref=%s\nerror=%s", r,
                  res->skipped, res->objects, res->bytes, hex, res->refname ? res->refname : "",
                  err ? err : "");
        (void)write_all(fd, sb_str(&out), out.len);
        sb_release(&out);
}

/*
 * The fetch itself, in its own process: update the mirror, write the
 * report to fd, then exit without running any exit handler.
 */
static _noreturn_ void fetch_child(fetch_ctx *c, const char *mirror_path, int fd)
{
        git_repository *repo = NULL;
        fetch_result res = {0};
        char *err = NULL;
        int r = 0;

        if (c->url->kind == SOURCE_URL_SSH)
                r = ssh_home(c, mirror_path, &err);
        else if (c->url->kind == SOURCE_URL_HTTPS)
                r = set_trust(c->opts->https_ca_file, &err);
        if (r >= 0) {
                r = git_repository_open_bare(&repo, mirror_path);
                if (r < 0)
                        r = convert_error(NULL, r, &err, "cannot open the mirror");
                else
                        r = update_mirror(c, repo, &res, &err);
        }
        child_report(fd, r, &res, err);
        _exit(0);
}

/*
 * Where the fetch's own process begins: gitcd's binary (or whichever
 * program linked this file and started the fetch: /proc/self/exe) started
 * again by git_adapter_fetch_start() as FETCH_CHILD_NAME with
 * FETCH_CHILD_ENV set, its request on stdin (fetch-request.h) and its
 * report going to stdout. It runs as a constructor, before main() (glibc
 * hands constructors argc and argv), so every program that fetches can be
 * its own fetch process whatever its main() does; without both marks it
 * returns at once, and the variable alone (left in an environment by
 * mistake) is dropped, not obeyed. A fresh process image, not a fork of
 * the caller: the caller has other threads, and a fork would copy
 * whatever lock one of them held at that instant (the allocator's,
 * OpenSSL's, libgit2's) into a child that then waits on it until its time
 * budget kills it.
 */
__attribute__((constructor)) static void fetch_child_entry(int argc, char **argv)
{
        const char *mark = getenv(FETCH_CHILD_ENV);
        _cleanup_free_ char *text = NULL, *err = NULL;
        fetch_request req;
        fetch_result res = {0};
        size_t len = 0;
        int r;

        if (!mark)
                return;
        (void)unsetenv(FETCH_CHILD_ENV);
        if (!streq(mark, "1") || argc != 1 || !argv || !streq_ptr(argv[0], FETCH_CHILD_NAME))
                return;
        r = read_file("/proc/self/fd/0", FETCH_REQUEST_MAX_SIZE, &text, &len);
        if (r < 0) {
                err = xasprintf("cannot read the fetch request: %s", strerror(-r));
        } else {
                r = fetch_request_decode(text, len, &req, &err);
        }
        if (r >= 0) {
                log_set_level((enum log_level)req.log_level);
                r = git_adapter_init(&err);
        }
        if (r < 0) {
                child_report(STDOUT_FILENO, r, &res, err);
                _exit(0);
        }
        fetch_ctx c = {.opts = &req.opts, .url = &req.url};
        fetch_child(&c, req.mirror_path, STDOUT_FILENO);
}

/* The value of "key=" in the child's report (up to the end of its line), or NULL. */
static char *report_field(const char *report, const char *key, bool rest)
{
        size_t kl = strlen(key);

        for (const char *p = report; p && *p;) {
                const char *nl = strchr(p, '\n');

                if (strneq(p, key, kl) && p[kl] == '=')
                        return rest || !nl ? xstrdup(p + kl + 1)
                                           : xstrndup(p + kl + 1, (size_t)(nl - p - kl - 1));
                p = nl ? nl + 1 : NULL;
        }
        return NULL;
}

static int remove_leftover(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        size_t n = strlen(path);

        (void)st;
        if (flag != FTW_F)
                return 0;
        if ((n > 5 && streq(path + n - 5, ".lock")) ||
            strneq(path + ftw->base, "pack_git2_", strlen("pack_git2_")))
                (void)unlink(path);
        return 0;
}

/*
 * A killed fetch may leave lock files (refs/heads/x.lock, packed-refs.lock)
 * that would make every later fetch fail, and a half-written pack
 * (objects/pack/pack_git2_*). We hold the mirror's flock, so no other gitcd
 * is writing: remove them.
 */
static void remove_stale_locks(const char *mirror_path)
{
        (void)nftw(mirror_path, remove_leftover, 16, FTW_PHYS);
}

/*
 * Check that the annotated tag obj carries the name of the ref it was
 * reached through: a ref refs/tags/v2 that points at the signed tag object
 * of v1 would otherwise pass for a signed v2. NULL when it does, else why not.
 */
static char *tag_name_mismatch(git_object *obj, const char *refname)
{
        const char *name = git_tag_name((git_tag *)obj);

        if (!refname)
                return NULL; /* an object id was asked for: nothing to match */
        if (!strneq(refname, "refs/tags/", 10))
                return xasprintf("%s is not a tag ref but points at the tag object \"%s\"", refname,
                                 name ? name : "");
        if (!name || !streq(name, refname + 10))
                return xasprintf("the signed tag object is named \"%s\", not \"%s\": %s "
                                 "points at another tag's object",
                                 name ? name : "", refname + 10, refname);
        return NULL;
}

static bool commit_in_mirror(git_repository *repo, const git_oid *id)
{
        _cleanup_(git_odb_freep) git_odb *odb = NULL;

        return git_repository_odb(&odb, repo) == 0 && git_odb_exists(odb, id);
}

/*
 * Rollback protection: NULL when commit may follow the last commit applied
 * from refname, else why not.
 */
static char *rollback_refusal(git_repository *repo, const char *heads_path, const char *refname,
                              const git_oid *commit, char **ret_error, int *ret_r)
{
        char last_hex[GIT_OID_HEXSZ + 1];
        git_oid last;
        int r;

        *ret_r = 0;
        if (!refname || !heads_path)
                return NULL;
        r = heads_get(heads_path, refname, last_hex);
        if (r == -ENOENT)
                return NULL;
        if (r < 0) {
                *ret_error = xasprintf("cannot read %s: %s", heads_path, strerror(-r));
                *ret_r = r;
                return NULL;
        }
        if (git_oid_fromstr(&last, last_hex) < 0 || git_oid_equal(&last, commit))
                return NULL;
        r = git_graph_descendant_of(repo, commit, &last);
        if (r == 1)
                return NULL;
        if (r < 0 && !commit_in_mirror(repo, &last))
                return xasprintf("the last commit applied from %s (%s) is no longer in the "
                                 "mirror, so the new head cannot be shown to descend from it; "
                                 "refusing a possible rollback (--allow-rollback accepts it)",
                                 refname, last_hex);
        return xasprintf("the new head of %s does not descend from %s, the last commit applied "
                         "from it: refusing a rollback (--allow-rollback accepts it)",
                         refname, last_hex);
}

static int read_revision(const git_fetch_request *req, git_repository *repo, const char *refname,
                         const git_oid *want, source_revision *rev, char **ret_error)
{
        const source_opts *opts = req->opts;
        _cleanup_(git_object_freep) git_object *obj = NULL;
        _cleanup_(git_object_freep) git_object *peeled = NULL;
        git_commit *commit;
        const git_oid *tag_oid = NULL;
        int64_t when;
        int r;

        r = git_object_lookup(&obj, repo, want, GIT_OBJECT_ANY);
        if (r < 0) {
                char hex[GIT_OID_HEXSZ + 1];

                git_oid_tostr(hex, sizeof(hex), want);
                *ret_error = refname ? xasprintf("%s (%s) is missing from the mirror", refname, hex)
                                     : xasprintf("commit %s not found in %s", hex, rev->repository);
                return -ENOENT;
        }
        if (git_object_type(obj) == GIT_OBJECT_TAG)
                tag_oid = git_object_id(obj);
        r = git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT);
        if (r < 0) {
                *ret_error =
                    xasprintf("%s does not point to a commit", refname ? refname : opts->ref);
                return -ENOENT;
        }
        commit = (git_commit *)peeled;
        git_oid_tostr(rev->commit_id, sizeof(rev->commit_id), git_commit_id(commit));
        rev->ref = xstrdup_null(refname);
        person(&rev->author, git_commit_author(commit));
        person(&rev->committer, git_commit_committer(commit));
        rev->message = str_cut(git_commit_message(commit) ? git_commit_message(commit) : "",
                               SOURCE_MAX_MESSAGE_BYTES);

        /* Nothing of the tree is read before the commit is trusted. */
        if (opts->verify_signatures) {
                when = rev->committer.time;
                if (tag_oid) {
                        const git_signature *tagger = git_tag_tagger((git_tag *)obj);

                        if (tagger)
                                when = (int64_t)tagger->when.time;
                }
                r = check_signature(repo, git_commit_id(commit), tag_oid, when,
                                    opts->allowed_signers_path, rev, ret_error);
                if (r < 0)
                        return r;
                if (!rev->signature_verified) {
                        rev->refusal = xstrdup(rev->signature_reason);
                        *ret_error = xasprintf("%s %s of %s is not signed by a trusted key: %s",
                                               tag_oid ? "tag" : "commit",
                                               tag_oid ? refname : rev->commit_id, rev->repository,
                                               rev->signature_reason);
                        return -EPERM;
                }
                if (tag_oid) {
                        rev->refusal = tag_name_mismatch(obj, refname);
                        if (rev->refusal) {
                                rev->signature_verified = false;
                                *ret_error = xasprintf("tag %s of %s refused: %s", refname,
                                                       rev->repository, rev->refusal);
                                return -EPERM;
                        }
                }
        }
        if (!opts->allow_rollback) {
                rev->refusal = rollback_refusal(repo, req->heads_path, refname,
                                                git_commit_id(commit), ret_error, &r);
                if (r < 0)
                        return r;
                if (rev->refusal) {
                        *ret_error = xasprintf("commit %s of %s refused: %s", rev->commit_id,
                                               rev->repository, rev->refusal);
                        return -EPERM;
                }
        }
        return read_files(repo, commit, req->subpath, opts->max_file_size, opts->max_total_size,
                          rev, ret_error);
}

int git_adapter_read_at(const git_fetch_request *req, const char *spec, source_revision *rev,
                        char **ret_error)
{
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_object_freep) git_object *obj = NULL;
        git_reference *ref = NULL;
        int fd = -1;
        int r;

        assert(req && spec && rev);
        if (isempty(spec) || spec[0] == '-') {
                *ret_error = xasprintf("\"%s\" is not a revision", spec);
                return -EINVAL;
        }
        r = take_lock(req->mirror_path, true, &fd, ret_error);
        if (r < 0)
                return r;
        r = git_repository_open_bare(&repo, req->mirror_path);
        if (r < 0) {
                close(fd);
                return convert_error(NULL, r, ret_error, "cannot open the mirror");
        }
        r = git_revparse_ext(&obj, &ref, repo, spec);
        if (r < 0) {
                *ret_error =
                    r == GIT_EAMBIGUOUS
                        ? xasprintf("revision \"%s\" is ambiguous in %s", spec, rev->repository)
                        : xasprintf("revision \"%s\" not found in %s (a commit, "
                                    "branch or tag): %s",
                                    spec, rev->repository, git_message());
                close(fd);
                return r == GIT_EAMBIGUOUS ? -EINVAL : -ENOENT;
        }
        /* Any commit may be looked at: no rollback check, signatures as the source says. */
        source_opts opts = *req->opts;
        opts.allow_rollback = true;
        opts.ref = spec;
        git_fetch_request at = *req;
        at.opts = &opts;
        _cleanup_free_ char *refname = ref ? xstrdup(git_reference_name(ref)) : NULL;
        git_reference_free(ref);
        r = read_revision(&at, repo, refname, git_object_id(obj), rev, ret_error);
        close(fd);
        return r;
}

/*
 * A fetch in flight: the child running update_mirror, the pipe its report
 * comes through, and the mirror's lock, held until the job ends.
 */
struct git_fetch_job {
        const source_opts *opts; /* borrowed from the request: for the messages */
        const source_url *url;
        char *mirror_path;
        int lock_fd;
        int rfd;    /* -1 once the report is complete */
        pid_t pid;  /* 0 once reaped */
        int status; /* the child's wait status, once reaped */
        bool timed_out;
        int64_t deadline_ms; /* monotonic */
        strbuf report;
};

static void close_fd(int *fd)
{
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

/* Read what the child wrote so far, waiting at most wait_ms for more. */
static void job_read(git_fetch_job *job, int wait_ms)
{
        while (job->rfd >= 0) {
                struct pollfd pfd = {.fd = job->rfd, .events = POLLIN};
                char chunk[4096];
                ssize_t k;
                int r;

                r = poll(&pfd, 1, wait_ms);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return;
                k = read(job->rfd, chunk, sizeof(chunk));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN)
                        return;
                if (k <= 0) {
                        close_fd(&job->rfd);
                        return;
                }
                sb_append_len(&job->report, chunk, (size_t)k);
        }
}

/* Kill the child when the budget is spent. */
static void job_check_deadline(git_fetch_job *job)
{
        if (job->pid > 0 && !job->timed_out && now_mono_ms() >= job->deadline_ms) {
                job->timed_out = true;
                (void)kill(job->pid, SIGKILL);
                close_fd(&job->rfd);
        }
}

/* Reap the child; block only when told to (or after a kill). True once reaped. */
static bool job_reap(git_fetch_job *job, bool block)
{
        pid_t p;

        if (job->pid <= 0)
                return true;
        do
                p = waitpid(job->pid, &job->status, block || job->timed_out ? 0 : WNOHANG);
        while (p < 0 && errno == EINTR);
        if (p == 0)
                return false;
        job->pid = 0;
        return true;
}

/*
 * Start the fetch's own process (fetch_child_entry): this program again,
 * its request in an anonymous file as stdin, its report on a pipe.
 */
static int spawn_fetch(const git_fetch_request *req, pid_t *ret_pid, int *ret_fd, char **ret_error)
{
        _cleanup_free_ char *request =
            fetch_request_encode(req->opts, req->url, req->mirror_path, (int)log_get_level());
        _cleanup_close_ int in = memfd_create("gitcd-fetch-request", MFD_CLOEXEC);
        int r, fds[2];

        if (in < 0 || write_all(in, request, strlen(request)) < 0 || lseek(in, 0, SEEK_SET) < 0) {
                r = -errno;
                *ret_error = xasprintf("cannot write the fetch request: %s", strerror(-r));
                return r;
        }
        if (pipe2(fds, O_CLOEXEC) < 0) {
                r = -errno;
                *ret_error = xasprintf("cannot create a pipe: %s", strerror(-r));
                return r;
        }
        size_t n = 0;
        while (environ[n])
                n++;
        _cleanup_free_ char **envp = xcalloc(n + 2, sizeof(char *));
        memcpy(envp, environ, n * sizeof(char *));
        envp[n] = (char *)FETCH_CHILD_ENV "=1";
        char *argv[] = {(char *)FETCH_CHILD_NAME, NULL};
        r = process_spawn_helper("/proc/self/exe", argv, envp, in, fds[1], ret_pid);
        close(fds[1]);
        if (r < 0) {
                close(fds[0]);
                *ret_error = xasprintf("cannot start the fetch: %s", strerror(-r));
                return r;
        }
        *ret_fd = fds[0];
        return 0;
}

int git_adapter_fetch_start(const git_fetch_request *req, bool block, git_fetch_job **ret,
                            char **ret_error)
{
        const source_opts *opts = req->opts;
        const source_url *url = req->url;
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_close_ int lock_fd = -1;
        git_fetch_job *job;
        int rfd = -1, r;
        pid_t pid = 0;

        assert(opts->fetch_timeout_s > 0 && opts->max_fetch_bytes > 0 &&
               opts->max_fetch_objects > 0);
        if (url->kind == SOURCE_URL_SSH && !(git_libgit2_features() & GIT_FEATURE_SSH)) {
                *ret_error = xstrdup("this libgit2 was built without SSH support");
                return -EOPNOTSUPP;
        }

        r = take_lock(req->mirror_path, block, &lock_fd, ret_error);
        if (r < 0)
                return r;
        r = open_mirror(req->mirror_path, &repo, ret_error);
        if (r < 0)
                return r;
        git_repository_free(TAKE_PTR(repo));

        r = spawn_fetch(req, &pid, &rfd, ret_error);
        if (r < 0)
                return r;
        job = XNEW(git_fetch_job);
        *job = (git_fetch_job){
            .opts = opts,
            .url = url,
            .mirror_path = xstrdup(req->mirror_path),
            .lock_fd = lock_fd,
            .rfd = rfd,
            .pid = pid,
            .deadline_ms = now_mono_ms() + (int64_t)opts->fetch_timeout_s * 1000,
            .report = STRBUF_INIT,
        };
        lock_fd = -1; /* the job holds it now */
        *ret = job;
        return 0;
}

int git_adapter_fetch_poll(git_fetch_job *job, bool wait)
{
        assert(job);
        while (job->rfd >= 0) {
                int64_t left;

                job_check_deadline(job);
                if (job->rfd < 0)
                        break;
                left = job->deadline_ms - now_mono_ms();
                job_read(job, wait ? (int)MIN(MAX(left, 0), 60000) : 0);
                if (!wait)
                        break;
        }
        job_check_deadline(job);
        if (job->rfd >= 0)
                return -EAGAIN;
        return job_reap(job, wait) ? 0 : -EAGAIN;
}

void git_adapter_fetch_abort(git_fetch_job *job)
{
        if (!job)
                return;
        if (job->pid > 0) {
                (void)kill(job->pid, SIGKILL);
                job->timed_out = true;
                (void)job_reap(job, true);
                remove_stale_locks(job->mirror_path);
        }
        close_fd(&job->rfd);
        close_fd(&job->lock_fd);
        sb_release(&job->report);
        free(job->mirror_path);
        free(job);
}

/*
 * The outcome of a finished job (see git_adapter_fetch_poll): -ETIMEDOUT
 * when the budget was spent (the child was killed).
 */
static int job_result(git_fetch_job *job, fetch_result *res, char **ret_error)
{
        _cleanup_free_ char *report = NULL, *rs = NULL, *oid = NULL;
        int status = job->status, r;

        assert(job->pid == 0 && job->rfd < 0);
        report = sb_detach(&job->report);
        if (job->timed_out) {
                remove_stale_locks(job->mirror_path);
                *ret_error = xasprintf("the fetch from %s took longer than %u s and was "
                                       "aborted (the server stopped answering, or the transfer "
                                       "is too slow)",
                                       job->url->display, job->opts->fetch_timeout_s);
                return -ETIMEDOUT;
        }
        rs = report_field(report, "r", false);
        if (!rs || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                remove_stale_locks(job->mirror_path);
                *ret_error =
                    WIFSIGNALED(status)
                        ? xasprintf("the fetch from %s died (signal %d)", job->url->display,
                                    WTERMSIG(status))
                        : xasprintf("the fetch from %s failed without a report", job->url->display);
                return -EIO;
        }
        r = atoi(rs);
        if (r < 0) {
                *ret_error = report_field(report, "error", true);
                if (!*ret_error)
                        *ret_error = xstrdup("fetch failed");
                return r;
        }
        {
                _cleanup_free_ char *sk = report_field(report, "skipped", false);
                _cleanup_free_ char *ob = report_field(report, "objects", false);
                _cleanup_free_ char *by = report_field(report, "bytes", false);
                _cleanup_free_ char *ref = report_field(report, "ref", false);

                oid = report_field(report, "oid", false);
                if (!oid || git_oid_fromstr(&res->oid, oid) < 0) {
                        *ret_error = xstrdup("the fetch reported no commit");
                        return -EIO;
                }
                res->skipped = sk && streq(sk, "1");
                res->objects = ob ? (unsigned)strtoul(ob, NULL, 10) : 0;
                res->bytes = by ? (size_t)strtoull(by, NULL, 10) : 0;
                res->refname = !isempty(ref) ? TAKE_PTR(ref) : NULL;
        }
        return 0;
}

int git_adapter_fetch_finish(git_fetch_job *job, const git_fetch_request *req, source_revision *rev,
                             char ret_head[41], char **ret_error)
{
        /* Freed last: the mirror stays locked while the revision is read. */
        _cleanup_(git_adapter_fetch_abortp) git_fetch_job *owned = job;
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        fetch_result res = {0};
        int r;

        assert(job && job->pid == 0 && job->rfd < 0);
        r = job_result(owned, &res, ret_error);
        if (r < 0)
                return r;
        rev->fetch_skipped = res.skipped;
        rev->received_objects = res.objects;
        rev->received_bytes = res.bytes;
        git_oid_tostr(ret_head, GIT_OID_HEXSZ + 1, &res.oid);
        if (req->refused_head && streq(ret_head, req->refused_head)) {
                /* The ref still names what was refused: nothing new to judge. */
                rev->ref = TAKE_PTR(res.refname);
                return 1;
        }
        r = git_repository_open_bare(&repo, req->mirror_path);
        if (r < 0)
                r = convert_error(NULL, r, ret_error, "cannot open the mirror");
        else
                r = read_revision(req, repo, res.refname, &res.oid, rev, ret_error);
        free(res.refname);
        return r;
}

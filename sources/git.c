/*
 * The libgit2 adapter (see git.h): mirror, fetch, read trees, extract
 * signatures. Every libgit2 error is converted here into -errno plus a
 * message; git_error_last() never leaves this file, and because libgit2 is
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
 *   ~/.ssh/known_hosts is overridden): strict, no trust on first use.
 * - A lock file next to the mirror (flock) serialises gitcd processes that
 *   share a cache directory.
 * - Files are read from the commit's tree, never checked out: no working
 *   tree to go stale, and symlinks can never point outside the repository.
 * - The HTTPS CA bundle is a process-wide libgit2 setting
 *   (GIT_OPT_SET_SSL_CERT_LOCATIONS): it is set before each HTTPS fetch,
 *   to the source's bundle or the system's. Two
 *   threads fetching HTTPS sources with different CAs at once would race;
 *   gitcd fetches sources one at a time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <git2.h>

#include "sources/git.h"
#include "sources/known-hosts.h"
#include "sources/revision.h"
#include "sources/sshsig.h"
#include "sources/sshwire.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define SECRET_MAX_SIZE    (64u * 1024u)
#define SIGNATURE_MAX_SIZE (1024u * 1024u)
#define SYSTEM_CA_BUNDLE   "/etc/ssl/certs/ca-certificates.crt"
#define SYSTEM_CA_DIR      "/etc/ssl/certs"

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_remote *, git_remote_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree_entry *, git_tree_entry_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_blob *, git_blob_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb *, git_odb_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb_object *, git_odb_object_free)

/* libgit2's message for the last failure, never NULL. */
static const char *git_message(void)
{
        const git_error *e = git_error_last();

        return e && e->message ? e->message : "unknown error";
}

static void git_buf_disposep(git_buf *b)
{
        git_buf_dispose(b);
}

void git_adapter_init(void)
{
        git_libgit2_init();
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
        const git_error *e = git_error_last();

        if (c && c->error) {
                *ret_error = TAKE_PTR(c->error);
                return c->error_code;
        }
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
                r = read_file(file, SECRET_MAX_SIZE, &data, &len);
                if (r < 0) {
                        *ret_error =
                            xasprintf("cannot read secret file %s: %s", file, strerror(-r));
                        return r;
                }
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

static int credentials_cb(git_credential **out, const char *url, const char *username_from_url,
                          unsigned int allowed, void *payload)
{
        fetch_ctx *c = payload;
        const source_opts *o = c->opts;
        const char *user = username_from_url ? username_from_url : "git";

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
        if (valid)
                return 0;
        ctx_fail(c, -EACCES, "the TLS certificate of %s is not trusted (CA: %s)", c->url->host,
                 c->opts->https_ca_file ? c->opts->https_ca_file : "the system's trust store");
        return GIT_ECERTIFICATE;
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

static void person(source_person *p, const git_signature *s)
{
        p->name = xstrdup(s->name ? s->name : "");
        p->email = xstrdup(s->email ? s->email : "");
        p->time = (int64_t)s->when.time;
        p->offset_minutes = s->when.offset;
}

typedef struct walk_ctx {
        git_repository *repo;
        git_odb *odb;
        source_revision *rev;
        size_t max_size;
        size_t max_total;
        size_t total;
        char *error;
} walk_ctx;

static int read_tree(walk_ctx *w, const git_tree *tree, const char *prefix, unsigned depth)
{
        size_t n = git_tree_entrycount(tree);

        if (depth > SOURCE_MAX_DEPTH) {
                w->error = xasprintf("folders nested deeper than %u levels at %s", SOURCE_MAX_DEPTH,
                                     prefix);
                return -EFBIG;
        }

        for (size_t i = 0; i < n; i++) {
                const git_tree_entry *e = git_tree_entry_byindex(tree, i);
                const char *name = git_tree_entry_name(e);
                _cleanup_free_ char *path =
                    isempty(prefix) ? xstrdup(name) : xasprintf("%s/%s", prefix, name);
                git_filemode_t mode = git_tree_entry_filemode(e);
                int r;

                if (name[0] == '.')
                        continue; /* .git*, .github and other hidden entries */
                if (mode == GIT_FILEMODE_TREE) {
                        _cleanup_(git_tree_freep) git_tree *sub = NULL;

                        r = git_tree_lookup(&sub, w->repo, git_tree_entry_id(e));
                        if (r < 0) {
                                w->error =
                                    xasprintf("cannot read folder %s: %s", path, git_message());
                                return -EIO;
                        }
                        r = read_tree(w, sub, path, depth + 1);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (mode == GIT_FILEMODE_COMMIT) {
                        revision_add_note(w->rev, path, "submodule (not followed)");
                        continue;
                }
                if (!source_name_is_yaml(name))
                        continue;
                if (mode == GIT_FILEMODE_LINK) {
                        revision_add_note(w->rev, path, "symbolic link (not followed)");
                        continue;
                }
                {
                        _cleanup_(git_blob_freep) git_blob *blob = NULL;
                        git_object_t type;
                        size_t size;
                        char *content;

                        r = git_odb_read_header(&size, &type, w->odb, git_tree_entry_id(e));
                        if (r < 0) {
                                w->error = xasprintf("cannot read %s: %s", path, git_message());
                                return -EIO;
                        }
                        if (size > w->max_size) {
                                revision_add_note(w->rev, path, "larger than %zu bytes (%zu)",
                                                  w->max_size, size);
                                continue;
                        }
                        if (w->rev->n_files >= SOURCE_MAX_FILES) {
                                w->error = xasprintf("more than %u YAML files", SOURCE_MAX_FILES);
                                return -EFBIG;
                        }
                        if (size > w->max_total - w->total) {
                                w->error = xasprintf("the YAML files add up to more than %zu "
                                                     "bytes",
                                                     w->max_total);
                                return -EFBIG;
                        }
                        r = git_blob_lookup(&blob, w->repo, git_tree_entry_id(e));
                        if (r < 0) {
                                w->error = xasprintf("cannot read %s: %s", path, git_message());
                                return -EIO;
                        }
                        size = (size_t)git_blob_rawsize(blob);
                        content = xmalloc(size + 1);
                        memcpy(content, git_blob_rawcontent(blob), size);
                        content[size] = '\0';
                        w->total += size;
                        revision_add_file(w->rev, path, content, size);
                }
        }
        return 0;
}

static int read_files(git_repository *repo, git_commit *commit, const char *subpath,
                      size_t max_size, size_t max_total, source_revision *rev, char **ret_error)
{
        _cleanup_(git_tree_freep) git_tree *root = NULL;
        _cleanup_(git_tree_freep) git_tree *sub = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        walk_ctx w = {.repo = repo, .rev = rev, .max_size = max_size, .max_total = max_total};
        int r;

        if (git_commit_tree(&root, commit) < 0 || git_repository_odb(&odb, repo) < 0) {
                *ret_error = xasprintf("cannot read the tree of commit %s: %s", rev->commit_id,
                                       git_message());
                return -EIO;
        }
        w.odb = odb;
        if (!isempty(subpath)) {
                _cleanup_(git_tree_entry_freep) git_tree_entry *e = NULL;

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
                if (git_tree_lookup(&sub, repo, git_tree_entry_id(e)) < 0) {
                        *ret_error = xasprintf("cannot read folder %s: %s", subpath, git_message());
                        return -EIO;
                }
        }
        r = read_tree(&w, sub ? sub : root, subpath, 0);
        if (r < 0) {
                *ret_error = w.error;
                return r;
        }
        revision_sort(rev);
        return 0;
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

static int take_lock(const char *mirror_path, int *ret_fd, char **ret_error)
{
        _cleanup_free_ char *path = xasprintf("%s.lock", mirror_path);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

        if (fd < 0) {
                int r = -errno;

                *ret_error = xasprintf("cannot create lock file %s: %s", path, strerror(-r));
                return r;
        }
        while (flock(fd, LOCK_EX) < 0) {
                int r = -errno;

                if (r == -EINTR)
                        continue;
                close(fd);
                *ret_error = xasprintf("cannot lock %s: %s", path, strerror(-r));
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
 * Connect, list, and fetch unless the wanted ref is unchanged. On success
 * *ret_refname (NULL for a commit id) and *ret_oid name what was asked for.
 */
static int update_mirror(fetch_ctx *c, git_repository *repo, source_revision *rev,
                         char **ret_refname, git_oid *ret_oid, char **ret_error)
{
        static char *refspec_strs[] = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
        git_strarray refspecs = {refspec_strs, ARRAY_SIZE(refspec_strs)};
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        _cleanup_free_ char *refname = NULL;
        git_fetch_options fo = GIT_FETCH_OPTIONS_INIT;
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
                        rev->fetch_skipped = true;
                        *ret_refname = NULL;
                        *ret_oid = want;
                        return 0;
                }
        }

        cb.credentials = credentials_cb;
        cb.certificate_check = certificate_cb;
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
        r = git_remote_connect(remote, GIT_DIRECTION_FETCH, &cb, NULL, NULL);
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
                        rev->fetch_skipped = true;
                        git_remote_disconnect(remote);
                        *ret_refname = TAKE_PTR(refname);
                        *ret_oid = want;
                        return 0;
                }
        }

        fo.callbacks = cb;
        fo.prune = GIT_FETCH_NO_PRUNE;
        fo.update_fetchhead = 0;
        fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
        r = git_remote_fetch(remote, &refspecs, &fo, NULL);
        if (r < 0)
                return convert_error(c, r, ret_error, "fetch failed");
        stats = git_remote_stats(remote);
        rev->received_objects = stats->received_objects;
        rev->received_bytes = stats->received_bytes;
        log_debug("%s: fetched %u objects, %zu bytes", c->url->display, stats->received_objects,
                  stats->received_bytes);
        *ret_refname = TAKE_PTR(refname);
        *ret_oid = want;
        return 0;
}

static int read_revision(const source_opts *opts, git_repository *repo, const char *refname,
                         const git_oid *want, const char *subpath, source_revision *rev,
                         char **ret_error)
{
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
        rev->message = xstrdup(git_commit_message(commit) ? git_commit_message(commit) : "");

        r = read_files(repo, commit, subpath, opts->max_file_size, opts->max_total_size, rev,
                       ret_error);
        if (r < 0)
                return r;

        if (!opts->verify_signatures)
                return 0;
        when = rev->committer.time;
        if (tag_oid) {
                const git_signature *tagger = git_tag_tagger((git_tag *)obj);

                if (tagger)
                        when = (int64_t)tagger->when.time;
        }
        r = check_signature(repo, git_commit_id(commit), tag_oid, when, opts->allowed_signers_path,
                            rev, ret_error);
        if (r < 0)
                return r;
        if (!rev->signature_verified) {
                *ret_error = xasprintf(
                    "%s %s of %s is not signed by a trusted key: %s", tag_oid ? "tag" : "commit",
                    tag_oid ? refname : rev->commit_id, rev->repository, rev->signature_reason);
                return -EPERM;
        }
        return 0;
}

/*
 * Point libgit2's TLS at the source's CA bundle, or back at the system's.
 * The setting is process-wide, so it is made before every HTTPS fetch.
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

int git_adapter_fetch(const source_opts *opts, const source_url *url, const char *mirror_path,
                      const char *subpath, source_revision *rev, char **ret_error)
{
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_free_ char *refname = NULL;
        _cleanup_close_ int lock_fd = -1;
        fetch_ctx c = {.opts = opts, .url = url};
        git_oid want;
        int r;

        if (url->kind == SOURCE_URL_SSH && !(git_libgit2_features() & GIT_FEATURE_SSH)) {
                *ret_error = xstrdup("this libgit2 was built without SSH support");
                return -EOPNOTSUPP;
        }
        if (url->kind == SOURCE_URL_HTTPS) {
                r = set_trust(opts->https_ca_file, ret_error);
                if (r < 0)
                        return r;
        }

        r = take_lock(mirror_path, &lock_fd, ret_error);
        if (r < 0)
                return r;
        r = open_mirror(mirror_path, &repo, ret_error);
        if (r < 0)
                return r;
        r = update_mirror(&c, repo, rev, &refname, &want, ret_error);
        free(c.error);
        if (r < 0)
                return r;
        return read_revision(opts, repo, refname, &want, subpath, rev, ret_error);
}

/*
 * The push receiver's judgement (see push.h): a forge's webhook request
 * against the configured sources, and the inbox to the daemon's loop.
 *
 * What each forge sends (its push event's JSON, parsed with jansson):
 *
 *   github  X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>
 *           X-GitHub-Event: push (ping when the hook is made)
 *           ref, after, repository.{clone_url, ssh_url, html_url, git_url, url}
 *   gitea   X-Gitea-Signature: <hex HMAC-SHA256 of the body>
 *           X-Gitea-Event: push
 *           ref, after, repository.{clone_url, ssh_url, html_url}
 *   gitlab  X-Gitlab-Token: <the secret itself> (GitLab signs nothing)
 *           X-Gitlab-Event: Push Hook, Tag Push Hook
 *           ref, after, project.{git_http_url, git_ssh_url, web_url},
 *           repository.{git_http_url, git_ssh_url, homepage, url}
 *   generic X-Gitcd-Signature: sha256=<hex HMAC-SHA256 of the body>
 *           {"repository": URL, "ref": "refs/heads/BRANCH", "after": COMMIT (optional)}
 *
 * Decisions. The order of the checks gives nothing away to a caller
 * without a secret but whether gitcd has a source with a webhook for that
 * repository (404), which a forge's own delivery log shows anyway:
 * malformed (400), no such source (404), signature (401), then what the
 * signed request asks (not a push, a deletion, a ref no source follows:
 * 200 "ignored"; otherwise 202 with the sources to fetch). A repository
 * shared by several sources is signed by any of their secrets, and a
 * signature fetches only the sources whose secret made it. The secret is
 * compared in constant time: an HMAC as hex with CRYPTO_memcmp, GitLab's
 * token as the SHA-256 of each side (so neither its length nor its bytes
 * show in the time taken). URLs are compared in one normalized form
 * (push_url_normalize), lowercase: the forges gitcd knows treat owner and
 * repository names without regard to case.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "ops/push.h"
#include "util/hash.h"
#include "util/macro.h"
#include "util/xalloc.h"

static const char *const forge_names[PUSH_FORGE_COUNT] = {"github", "gitlab", "gitea", "generic"};

const char *push_forge_name(push_forge f)
{
        assert(f < PUSH_FORGE_COUNT);
        return forge_names[f];
}

int push_forge_from_path(const char *path, push_forge *ret)
{
        if (!path || strncmp(path, "/hooks/", 7) != 0)
                return -ENOENT;
        for (size_t i = 0; i < PUSH_FORGE_COUNT; i++)
                if (streq(path + 7, forge_names[i])) {
                        *ret = (push_forge)i;
                        return 0;
                }
        return -ENOENT;
}

static const struct {
        const char *name;
        unsigned status;
} outcomes[PUSH_OUTCOME_COUNT] = {
    [PUSH_QUEUED] = {"accepted", 202},           [PUSH_IGNORED] = {"ignored", 200},
    [PUSH_UNAUTHORIZED] = {"unauthorized", 401}, [PUSH_UNKNOWN] = {"unknown", 404},
    [PUSH_MALFORMED] = {"malformed", 400},       [PUSH_TOO_LARGE] = {"too_large", 413},
    [PUSH_BAD_METHOD] = {"bad_method", 405},
};

const char *push_outcome_name(push_outcome o)
{
        assert(o < PUSH_OUTCOME_COUNT);
        return outcomes[o].name;
}

unsigned push_outcome_status(push_outcome o)
{
        assert(o < PUSH_OUTCOME_COUNT);
        return outcomes[o].status;
}

/* ---- URLs and refs ---- */

static void lowercase(char *s)
{
        for (; *s; s++)
                *s = (char)tolower((unsigned char)*s);
}

/* host (without user and port) and path of a URL or scp-like address; false when neither. */
static bool split_url(const char *url, char **ret_host, const char **ret_path)
{
        const char *sep = strstr(url, "://");
        const char *auth, *path;
        if (sep) {
                if (strncasecmp(url, "file://", 7) == 0)
                        return false;
                auth = sep + 3;
                path = auth + strcspn(auth, "/");
        } else {
                /* scp-like: [user@]host:path, with no '/' before the ':' */
                const char *colon = strchr(url, ':');
                if (!colon || colon == url || memchr(url, '/', (size_t)(colon - url)))
                        return false;
                auth = url;
                path = colon + 1;
        }
        const char *end = sep ? path : strchr(url, ':');
        const char *at = memrchr(auth, '@', (size_t)(end - auth));
        if (at)
                auth = at + 1;
        size_t n = (size_t)(end - auth);
        if (sep && n > 0 && auth[0] == '[') {
                const char *close = memchr(auth, ']', n);
                if (!close)
                        return false;
                n = (size_t)(close + 1 - auth);
        } else if (sep) {
                const char *colon = memchr(auth, ':', n);
                if (colon)
                        n = (size_t)(colon - auth);
        }
        if (n == 0)
                return false;
        *ret_host = xstrndup(auth, n);
        *ret_path = path;
        return true;
}

char *push_url_normalize(const char *url)
{
        char *host = NULL;
        const char *path = NULL;
        if (isempty(url) || !split_url(url, &host, &path))
                return NULL;
        while (*path == '/')
                path++;
        size_t n = strcspn(path, "?#");
        while (n > 0 && path[n - 1] == '/')
                n--;
        if (n >= 4 && strncasecmp(path + n - 4, ".git", 4) == 0)
                n -= 4;
        while (n > 0 && path[n - 1] == '/')
                n--;
        char *ret = n ? xasprintf("%s/%.*s", host, (int)n, path) : NULL;
        free(host);
        if (ret)
                lowercase(ret);
        return ret;
}

bool push_url_same(const char *a, const char *b)
{
        _cleanup_free_ char *x = push_url_normalize(a);
        _cleanup_free_ char *y = push_url_normalize(b);
        return x && y && streq(x, y);
}

bool push_ref_matches(const char *source_ref, const char *ref)
{
        if (!ref)
                return false;
        if (!source_ref)
                return strncmp(ref, "refs/heads/", 11) == 0 && ref[11];
        if (strncmp(source_ref, "refs/", 5) == 0)
                return streq(source_ref, ref);
        if (strncmp(ref, "refs/heads/", 11) == 0)
                return streq(ref + 11, source_ref);
        if (strncmp(ref, "refs/tags/", 10) == 0)
                return streq(ref + 10, source_ref);
        return false;
}

/* ---- signatures ---- */

/* Whether hex (any case) is the lowercase hex expected, in constant time for a 64-digit one. */
static bool hex_same(const char *hex, const char *expected)
{
        size_t n = strlen(expected);
        if (strlen(hex) != n)
                return false;
        char lower[HASH_SHA256_HEX];
        assert(n < sizeof(lower));
        for (size_t i = 0; i < n; i++)
                lower[i] = (char)tolower((unsigned char)hex[i]);
        return CRYPTO_memcmp(lower, expected, n) == 0;
}

bool push_signature_ok(push_forge forge, const char *secret, const char *sig, const char *body,
                       size_t len)
{
        if (!secret || !*secret || !sig)
                return false;
        if (forge == PUSH_GITLAB) {
                uint8_t a[HASH_SHA256_LEN], b[HASH_SHA256_LEN];
                hash_sha256(sig, strlen(sig), a);
                hash_sha256(secret, strlen(secret), b);
                return CRYPTO_memcmp(a, b, sizeof(a)) == 0;
        }
        if (forge != PUSH_GITEA) {
                if (strncmp(sig, "sha256=", 7) != 0)
                        return false;
                sig += 7;
        }
        _cleanup_free_ char *want = hash_hmac_sha256_hex(secret, strlen(secret), body, len);
        return hex_same(sig, want);
}

/* ---- reading each forge's payload ---- */

static const char *json_str(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The repository URLs a payload names, up to max. */
static size_t payload_urls(push_forge forge, json_t *root, const char **urls, size_t max)
{
        static const char *const hub_keys[] = {"clone_url", "ssh_url", "html_url", "git_url",
                                               "url"};
        static const char *const lab_project[] = {"git_http_url", "git_ssh_url", "web_url",
                                                  "http_url", "ssh_url"};
        static const char *const lab_repo[] = {"git_http_url", "git_ssh_url", "homepage", "url"};
        size_t n = 0;
#define ADD_KEYS(obj, keys)                                                                        \
        for (size_t i_ = 0; i_ < ARRAY_SIZE(keys) && n < max; i_++)                                \
                if (json_str(obj, keys[i_]))                                                       \
                        urls[n++] = json_str(obj, keys[i_]);
        switch (forge) {
        case PUSH_GITHUB:
        case PUSH_GITEA:
                ADD_KEYS(json_object_get(root, "repository"), hub_keys);
                break;
        case PUSH_GITLAB:
                ADD_KEYS(json_object_get(root, "project"), lab_project);
                ADD_KEYS(json_object_get(root, "repository"), lab_repo);
                break;
        case PUSH_GENERIC:
                if (json_str(root, "repository") && n < max)
                        urls[n++] = json_str(root, "repository");
                break;
        default:
                break;
        }
#undef ADD_KEYS
        return n;
}

static bool printable_word(const char *s);

/* The repository's default branch as the payload names it (the remote's HEAD), or NULL. */
static const char *default_branch(push_forge forge, json_t *root)
{
        json_t *repo = json_object_get(root, forge == PUSH_GITLAB ? "project" : "repository");
        const char *b = json_str(repo, "default_branch");
        return b && *b && printable_word(b) ? b : NULL;
}

/* Whether the request is a push by the forge's event header (absent: taken for one). */
static bool is_push_event(push_forge forge, const char *event)
{
        if (!event || forge == PUSH_GENERIC)
                return true;
        if (forge == PUSH_GITLAB)
                return streq(event, "Push Hook") || streq(event, "Tag Push Hook");
        return streq(event, "push");
}

static const char *signature_header(push_forge forge)
{
        static const char *const names[PUSH_FORGE_COUNT] = {
            "X-Hub-Signature-256", "X-Gitlab-Token", "X-Gitea-Signature", "X-Gitcd-Signature"};
        return names[forge];
}

static void verdict(push_verdict *v, push_outcome o, char *message)
{
        v->outcome = o;
        free(v->message);
        v->message = message;
}

/* The sources with a secret whose URL is one of urls; their indexes into ret (n of them). */
static size_t candidates(const push_source *sources, size_t n, const char **urls, size_t n_urls,
                         size_t *ret)
{
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                if (!sources[i].secret)
                        continue;
                _cleanup_free_ char *mine = push_url_normalize(sources[i].url);
                for (size_t j = 0; mine && j < n_urls; j++) {
                        _cleanup_free_ char *theirs = push_url_normalize(urls[j]);
                        if (theirs && streq(mine, theirs)) {
                                ret[k++] = i;
                                break;
                        }
                }
        }
        return k;
}

/* No space, control character or byte over 0x7e: what may reach a log line as a ref. */
static bool printable_word(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f)
                        return false;
        return true;
}

/* A full commit id: 40 (SHA-1) or 64 (SHA-256) hex digits. */
static bool is_commit_id(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        return (n == 40 || n == 64) && strspn(s, "0123456789abcdefABCDEF") == n;
}

static bool all_zeros(const char *s)
{
        if (!s || !*s)
                return false;
        for (; *s; s++)
                if (*s != '0')
                        return false;
        return true;
}

/* The signed request: what it asks for, once the sources whose secret signed it are known. */
static void judge_signed(const push_request *req, json_t *root, const push_source *sources,
                         const size_t *signers, size_t n_signers, push_verdict *v)
{
        if (!is_push_event(req->forge, req->event)) {
                verdict(v, PUSH_IGNORED, xasprintf("ignored: a %s event, not a push", req->event));
                return;
        }
        const char *ref = json_str(root, "ref");
        if (!ref || !*ref) {
                verdict(v, PUSH_MALFORMED, xstrdup("the payload has no \"ref\" string"));
                return;
        }
        if (!printable_word(ref)) {
                verdict(v, PUSH_MALFORMED, xstrdup("the payload's \"ref\" is not a Git ref"));
                return;
        }
        v->ref = xstrdup(ref);
        const char *after = json_str(root, "after");
        if (!after && req->forge == PUSH_GITLAB)
                after = json_str(root, "checkout_sha");
        if (is_commit_id(after)) /* logged and audited: only a commit id, nothing else */
                v->commit = xstrdup(after);
        if (all_zeros(after)) {
                verdict(v, PUSH_IGNORED, xasprintf("ignored: %s was deleted", ref));
                return;
        }
        /* a source without ref follows the remote's HEAD: its default branch, when named */
        const char *head = default_branch(req->forge, root);
        _cleanup_free_ char *head_ref = head ? xasprintf("refs/heads/%s", head) : NULL;
        v->sources = xcalloc(n_signers + 1, sizeof(char *));
        for (size_t i = 0; i < n_signers; i++)
                if (push_ref_matches(sources[signers[i]].ref ? sources[signers[i]].ref : head_ref,
                                     ref))
                        v->sources[v->n_sources++] = xstrdup(sources[signers[i]].name);
        if (!v->n_sources) {
                verdict(v, PUSH_IGNORED, xasprintf("ignored: no source follows %s", ref));
                return;
        }
        verdict(v, PUSH_QUEUED, xasprintf("queued: a fetch of %zu source(s)", v->n_sources));
}

void push_judge(const push_request *req, const push_source *sources, size_t n, push_verdict *v)
{
        assert(req && v && (sources || n == 0));
        *v = (push_verdict){0};
        json_error_t jerr;
        json_t *root =
            req->body ? json_loadb(req->body, req->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
        if (!json_is_object(root)) {
                verdict(v, PUSH_MALFORMED,
                        xstrdup(root ? "the payload is not a JSON object"
                                     : "the payload is not JSON (send it as application/json)"));
                json_decref(root);
                return;
        }
        const char *urls[16];
        size_t n_urls = payload_urls(req->forge, root, urls, ARRAY_SIZE(urls));
        if (!n_urls) {
                verdict(v, PUSH_MALFORMED, xstrdup("the payload names no repository URL"));
                json_decref(root);
                return;
        }
        v->repository = xstrdup(urls[0]);
        size_t *found = xcalloc(n + 1, sizeof(size_t));
        size_t n_found = candidates(sources, n, urls, n_urls, found);
        if (!n_found) {
                verdict(v, PUSH_UNKNOWN,
                        xstrdup("no source with a webhook secret has this "
                                "repository"));
        } else if (!req->signature) {
                verdict(v, PUSH_UNAUTHORIZED,
                        xasprintf("missing %s", signature_header(req->forge)));
        } else {
                size_t n_signers = 0;
                for (size_t i = 0; i < n_found; i++)
                        if (push_signature_ok(req->forge, sources[found[i]].secret, req->signature,
                                              req->body, req->len))
                                found[n_signers++] = found[i];
                if (!n_signers)
                        verdict(v, PUSH_UNAUTHORIZED,
                                xasprintf("%s does not match", signature_header(req->forge)));
                else
                        judge_signed(req, root, sources, found, n_signers, v);
        }
        free(found);
        json_decref(root);
}

void push_verdict_release(push_verdict *v)
{
        if (!v)
                return;
        for (size_t i = 0; i < v->n_sources; i++)
                free(v->sources[i]);
        free(v->sources);
        free(v->message);
        free(v->repository);
        free(v->ref);
        free(v->commit);
        *v = (push_verdict){0};
}

/* ---- the inbox ---- */

struct push_inbox {
        pthread_mutex_t lock;
        push_item *items;
        size_t n, alloc;
        void (*wake)(void *cls);
        void *cls;
};

push_inbox *push_inbox_new(void (*wake)(void *cls), void *cls)
{
        push_inbox *in = XNEW(push_inbox);
        pthread_mutex_init(&in->lock, NULL);
        in->wake = wake;
        in->cls = cls;
        return in;
}

void push_items_free(push_item *items, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(items[i].source);
                free(items[i].commit);
                free(items[i].ref);
        }
        free(items);
}

void push_inbox_free(push_inbox *in)
{
        if (!in)
                return;
        push_items_free(in->items, in->n);
        pthread_mutex_destroy(&in->lock);
        free(in);
}

void push_inbox_put(push_inbox *in, const char *source, push_forge forge, const char *ref,
                    const char *commit)
{
        assert(in && source);
        pthread_mutex_lock(&in->lock);
        size_t i = 0;
        while (i < in->n && !streq(in->items[i].source, source))
                i++;
        if (i == in->n) {
                in->items = xgrow(in->items, &in->alloc, in->n + 1, sizeof(push_item));
                in->items[in->n++] = (push_item){.source = xstrdup(source)};
        }
        push_item *it = &in->items[i];
        it->forge = forge;
        str_assign(&it->commit, xstrdup_null(commit));
        str_assign(&it->ref, xstrdup_null(ref));
        it->count++;
        pthread_mutex_unlock(&in->lock);
        if (in->wake)
                in->wake(in->cls);
}

void push_inbox_take(push_inbox *in, push_item **ret, size_t *ret_n)
{
        assert(in && ret && ret_n);
        pthread_mutex_lock(&in->lock);
        *ret = in->items;
        *ret_n = in->n;
        in->items = NULL;
        in->n = in->alloc = 0;
        pthread_mutex_unlock(&in->lock);
}

/*
 * The push receiver: a forge's push webhook (POST /hooks/github,
 * /hooks/gitlab, /hooks/gitea, /hooks/generic on `gitcd run --listen`)
 * judged against the configured sources, and the inbox that hands the
 * sources to fetch from the HTTP thread to the daemon's loop.
 *
 * push_judge() is pure: headers and body in, a verdict out (the HTTP
 * status, a sentence, the sources to fetch). It reads no file, no clock
 * and no state store, so the HTTP thread may call it, a fuzz target drives
 * it and the unit tests hold it to every forge's scheme. The secrets are
 * read by the caller when the server starts (ops/http.c).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest body a hook takes: bigger ones are answered 413. */
#define PUSH_MAX_BODY (1024 * 1024)

typedef enum push_forge {
        PUSH_GITHUB = 0,
        PUSH_GITLAB,
        PUSH_GITEA,
        PUSH_GENERIC,
        PUSH_FORGE_COUNT
} push_forge;

/* "github", "gitlab", "gitea", "generic". */
const char *push_forge_name(push_forge f);
/* The forge of a path under /hooks/ ("/hooks/github"); -ENOENT for none. */
int push_forge_from_path(const char *path, push_forge *ret);

/* What the receiver knows of one configured source. */
typedef struct push_source {
        const char *name;
        const char *url;    /* as configured (any form git takes) */
        const char *ref;    /* branch, "refs/heads/B", tag, "refs/tags/T", commit; NULL: HEAD */
        const char *secret; /* the webhook secret; NULL: never triggered by a push */
} push_source;

/* One request, as the HTTP server received it. Headers may be NULL (absent). */
typedef struct push_request {
        push_forge forge;
        const char *signature; /* X-Hub-Signature-256, X-Gitea-Signature, X-Gitlab-Token,
                                  X-Gitcd-Signature */
        const char *event;     /* X-GitHub-Event, X-Gitea-Event, X-Gitlab-Event; NULL */
        const char *body;      /* not NUL-terminated */
        size_t len;
} push_request;

/* The verdict's words, also the `result` label of gitcd_webhook_requests_total. */
typedef enum push_outcome {
        PUSH_QUEUED = 0,   /* 202: fetches queued */
        PUSH_IGNORED,      /* 200: signed, but another branch, a tag, or not a push */
        PUSH_UNAUTHORIZED, /* 401: no secret of a matching source signs it */
        PUSH_UNKNOWN,      /* 404: no source with a webhook secret for that repository */
        PUSH_MALFORMED,    /* 400 */
        PUSH_TOO_LARGE,    /* 413 (the server judges this one) */
        PUSH_BAD_METHOD,   /* 405 (the server judges this one) */
        PUSH_OUTCOME_COUNT
} push_outcome;

const char *push_outcome_name(push_outcome o);
/* The HTTP status of an outcome. */
unsigned push_outcome_status(push_outcome o);

typedef struct push_verdict {
        push_outcome outcome;
        char *message;  /* one line for the reply (no secret); never NULL after push_judge */
        char **sources; /* PUSH_QUEUED: the names of the sources to fetch */
        size_t n_sources;
        char *repository; /* as the payload names it, when it could be read */
        char *ref;        /* "refs/heads/main", when it could be read */
        char *commit;     /* the commit after the push, when the payload has one */
} push_verdict;

/*
 * Judge a request against sources. The repository and ref are read from
 * the body (per forge, see push.c), the sources of that repository that
 * have a secret are found (push_url_same), the signature is checked
 * against each of their secrets in constant time, then the ref against
 * theirs. Always fills *ret (release with push_verdict_release).
 */
void push_judge(const push_request *req, const push_source *sources, size_t n, push_verdict *ret);
void push_verdict_release(push_verdict *v);

/*
 * A repository URL in the form two URLs of one repository share: no
 * scheme, no user, no port, no ".git" and no trailing slash, lowercase
 * ("git@github.com:o/r.git", "https://github.com/O/r" and
 * "ssh://git@github.com:22/o/r/" are all "github.com/o/r"). NULL for what
 * is not a remote repository URL (a local path, file://). Newly allocated.
 */
char *push_url_normalize(const char *url);
/* Whether a and b name the same repository (both normalize, to the same form). */
bool push_url_same(const char *a, const char *b);

/*
 * Whether ref (as pushed: "refs/heads/main", "refs/tags/v1") is what a
 * source of source_ref follows: a branch name matches refs/heads/<it>, a
 * tag name refs/tags/<it>, a bare name either; NULL (a source without
 * ref, which follows the remote's HEAD, when the payload does not name
 * the repository's default branch) matches every branch. push_judge()
 * gives a source without ref "refs/heads/<default_branch>" when the
 * payload names it (GitHub's and Gitea's repository.default_branch,
 * GitLab's project.default_branch).
 */
bool push_ref_matches(const char *source_ref, const char *ref);

/*
 * Whether sig is the forge's signature of body under secret, compared in
 * constant time: "sha256=<hex HMAC-SHA256>" (github, generic), "<hex
 * HMAC-SHA256>" (gitea), the secret itself (gitlab's token).
 */
bool push_signature_ok(push_forge forge, const char *secret, const char *sig, const char *body,
                       size_t len);

/*
 * The inbox from the HTTP thread to the daemon's loop: a set of source
 * names (a name put twice before the loop takes it is there once, so a
 * flood of pushes holds one entry per source), with the forge and commit
 * of the last push of each. push_inbox_put() calls wake(cls) after adding,
 * outside the lock.
 */
typedef struct push_inbox push_inbox;

typedef struct push_item {
        char *source;
        push_forge forge;
        char *commit; /* NULL when the payload had none */
        char *ref;
        unsigned count; /* pushes coalesced into this item */
} push_item;

push_inbox *push_inbox_new(void (*wake)(void *cls), void *cls);
void push_inbox_free(push_inbox *in); /* NULL: no-op */
void push_inbox_put(push_inbox *in, const char *source, push_forge forge, const char *ref,
                    const char *commit);
/* Take every item (in the order they came in); *ret_n may be 0. Release with push_items_free. */
void push_inbox_take(push_inbox *in, push_item **ret, size_t *ret_n);
void push_items_free(push_item *items, size_t n);

/*
 * Sources: where gitcd reads EtcdCluster definitions from.
 *
 * A source is either a plain local directory (read as is, no Git involved:
 * for CI on a checkout) or a Git repository reached through a local path,
 * file://, ssh:// (or scp-like user@host:path) or https://. Git sources are
 * mirrored into a bare repository per source inside a cache directory and
 * fetched incrementally; files are read straight from the commit's tree.
 *
 * source_fetch() returns a source_revision: the commit, who made it, whether
 * its signature was verified, and the YAML files under the chosen path.
 * Errors are a negative errno plus a message from source_last_error(); the
 * message never contains credentials.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SOURCE_DEFAULT_MAX_FILE_SIZE     (4u * 1024u * 1024u)
#define SOURCE_DEFAULT_MAX_TOTAL_SIZE    (256u * 1024u * 1024u)
#define SOURCE_MAX_FILES                 100000u  /* more YAML files: -EFBIG */
#define SOURCE_MAX_DEPTH                 64u      /* deeper folders: -EFBIG */
#define SOURCE_MAX_ENTRIES               1000000u /* tree entries visited in all: -EFBIG */
#define SOURCE_MAX_REPEATED_TREES        10000u   /* folders read again (same tree): -EFBIG */
#define SOURCE_MAX_NOTES                 1000u    /* notes kept; the rest are counted */
#define SOURCE_DEFAULT_FETCH_TIMEOUT_S   120u
#define SOURCE_DEFAULT_MAX_FETCH_BYTES   (1024u * 1024u * 1024u)
#define SOURCE_DEFAULT_MAX_FETCH_OBJECTS 1000000u
/*
 * Commit text is cut to these before anything else is done with a commit
 * (" [cut: N bytes in all]" appended, util/escape.h str_cut): an author or
 * committer name or email, and the message.
 */
#define SOURCE_MAX_PERSON_BYTES  1024u
#define SOURCE_MAX_MESSAGE_BYTES (64u * 1024u)

typedef struct source_opts {
        const char
            *url_or_path;      /* directory, repository path, file://, ssh://, scp-like, https:// */
        const char *ref;       /* branch, tag or 40-hex commit id; NULL: the remote's HEAD */
        const char *subpath;   /* folder inside the repository or directory; NULL: the root */
        const char *cache_dir; /* holds one bare mirror per Git source; required for Git */
        bool plain_directory;  /* read a local directory as files even if it is a checkout */
        size_t max_file_size;  /* files larger than this are skipped; 0: 4 MiB */
        size_t max_total_size; /* all files together; more fails with -EFBIG; 0: 256 MiB */

        /* SSH */
        const char *ssh_key_path;            /* private key file */
        const char *ssh_key_passphrase_file; /* file holding the key's passphrase */
        const char *ssh_key_passphrase_env;  /* or the name of an environment variable */
        bool use_ssh_agent;                  /* authenticate with $SSH_AUTH_SOCK */
        const char *known_hosts_path;        /* required for SSH; host keys are checked strictly */

        /* HTTPS */
        const char *https_ca_file;    /* PEM bundle; NULL: the system's trust store */
        const char *https_token_file; /* file holding a token or password */
        const char *https_token_env;  /* or the name of an environment variable */
        const char *https_username;   /* NULL: "git" (a token usually ignores the name) */

        /* Signed commits */
        bool verify_signatures;
        const char *allowed_signers_path; /* OpenSSH allowed_signers format */

        /*
         * Rollback protection: a new head of a ref that does not descend
         * from the last commit applied from it (source_mark_applied) is
         * refused unless this is set.
         */
        bool allow_rollback;

        /* Budgets of one fetch (connect, list, download); 0: the defaults. */
        unsigned fetch_timeout_s;
        size_t max_fetch_bytes;
        size_t max_fetch_objects;
} source_opts;

typedef struct source_person {
        char *name;         /* at most SOURCE_MAX_PERSON_BYTES, then cut with a marker */
        char *email;        /* the same */
        int64_t time;       /* seconds since the epoch */
        int offset_minutes; /* time-zone offset */
} source_person;

typedef struct source_file {
        char *path; /* inside the repository (or directory), '/'-separated */
        char *content;
        size_t len;
} source_file;

typedef struct source_note {
        char *path;
        char *reason; /* "symbolic link", "submodule", "larger than 4194304 bytes" */
} source_note;

typedef struct source_revision {
        char *repository;   /* URL without credentials, or the directory's absolute path */
        char *ref;          /* the ref asked for, resolved: "refs/heads/main", or NULL */
        char commit_id[41]; /* 40 hex digits; "" for a plain directory */
        source_person author;
        source_person committer;
        char *message; /* at most SOURCE_MAX_MESSAGE_BYTES, then cut with a marker */

        bool signature_checked;   /* verify_signatures was on */
        bool signature_verified;  /* a trusted key made a valid signature */
        char *signature_reason;   /* why not verified (or what was verified) */
        char *signer_fingerprint; /* "SHA256:..." of the signing key, when known */
        char *signer_identity;    /* principals from allowed_signers, when trusted */

        source_file *files; /* sorted by path */
        size_t n_files;
        source_note *notes; /* skipped entries, sorted by path */
        size_t n_notes;
        size_t notes_omitted; /* while reading: notes beyond SOURCE_MAX_NOTES */

        /*
         * Why source_fetch() refused the revision (-EPERM): an untrusted
         * signature, a tag whose signed name is not the ref, or a rollback.
         * refusal_repeated: the same head was refused by an earlier fetch of
         * this source and was not evaluated again.
         */
        char *refusal;
        bool refusal_repeated;

        /* How the mirror was updated by this fetch. */
        bool fetch_skipped;        /* the remote ref was unchanged: nothing downloaded */
        unsigned received_objects; /* objects downloaded */
        size_t received_bytes;
} source_revision;

typedef struct source source;

/*
 * Check the options and classify the location. Nothing is fetched yet.
 * -EINVAL for unusable options (the message says which), -ENOENT for a
 * missing local path. On failure *ret_error (if given) receives the message,
 * to be freed by the caller.
 */
int source_open(const source_opts *opts, source **ret, char **ret_error);
void source_free(source *s);

/*
 * Fetch (for Git) and read the revision. Returns 0 with *ret filled, or:
 *   -EPERM   the revision is refused: verify_signatures is on and the
 *            commit (or tag) is unsigned, signed by an untrusted key, the
 *            signature is invalid or the tag's signed name is not the ref;
 *            or the new head does not descend from the last commit applied
 *            from the ref (a rollback) and allow_rollback is off. *ret is
 *            still filled with the commit's description but no files
 *            (refusal says why; for signatures signature_verified = false
 *            and signature_reason says why) so the caller can record the
 *            refused revision and keep applying the last good one. As long
 *            as the same head stays refused, later fetches only list the
 *            remote's refs and return the same refusal with
 *            refusal_repeated set.
 *   -ENOENT  the ref or the subpath does not exist
 *   -EFBIG   the files under the subpath add up to more than max_total_size,
 *            or there are more than SOURCE_MAX_FILES, or folders nest deeper
 *            than SOURCE_MAX_DEPTH
 *   -EACCES  authentication or host-key verification failed, or the
 *            server redirected to another host
 *   -ETIMEDOUT  the fetch took longer than fetch_timeout_s
 *   -EFBIG   (also) the fetch exceeded max_fetch_bytes or max_fetch_objects, or
 *            the tree has more than SOURCE_MAX_ENTRIES entries or repeats
 *            folders more than SOURCE_MAX_REPEATED_TREES times
 *   -EIO     the transfer failed
 * Other failures leave *ret untouched. The message is in source_last_error().
 */
int source_fetch(source *s, source_revision **ret);

/*
 * A fetch that does not block the caller (gitcd run): source_fetch_start()
 * starts the network part in a child process and returns at once;
 * source_fetch_poll() says, without blocking, whether it has ended
 * (0) or still runs (-EAGAIN); source_fetch() then takes in its outcome
 * (the time budget still applies: a stalled fetch ends with -ETIMEDOUT).
 * source_fetch() without a start does all three, waiting. A start while a
 * fetch is in flight, and both calls on a plain directory, do nothing and
 * return 0; a start that fails returns 0 too and leaves its error to
 * source_fetch(), except -EAGAIN: the mirror is locked (by another gitcd
 * sharing the cache, or by a fetch in flight of another source with the
 * same URL), nothing was started, try again later. source_free() kills a
 * fetch in flight.
 */
int source_fetch_start(source *s);
int source_fetch_poll(source *s);

/*
 * Remember that rev (returned by source_fetch() with 0) was applied: its
 * commit becomes the one later heads of the same ref must descend from.
 * Stored beside the mirror in the cache directory; a no-op for a plain
 * directory or a commit id. 0 or a negative errno (message in
 * source_last_error()).
 */
int source_mark_applied(source *s, const source_revision *rev);

/*
 * Approvals (docs/security.md): who signed for the state of some files.
 * Walking the first-parent chain back from rev's commit (a revision this
 * source returned), every commit counts while the files at `paths` are
 * byte-identical to the head's (the same blob ids, or absent in both) and
 * it is not since_commit (the commit the accepted spec came from: what it
 * signed was accepted already) or older; no paths: the whole tree under
 * the source's path. A commit counts with the signer of a valid
 * signature by a key of allowed_signers (judged at the commit's time, as
 * the head is); each signer (the principals of its allowed_signers line)
 * once. At most max_commits commits are looked at (0: the default).
 */
#define SOURCE_SIGNERS_MAX_COMMITS 100u

typedef struct source_signer_list {
        char **names; /* distinct trusted signers, newest first */
        size_t n;
        unsigned walked; /* commits looked at */
        bool bounded;    /* the walk stopped at max_commits, not at a change */
} source_signer_list;

/*
 * 0 with *ret filled (no signers for a plain directory or without
 * verify_signatures), or a negative errno with source_last_error():
 * -ENOENT rev's commit is not in the mirror, -EIO it cannot be read.
 */
int source_signers(source *s, const source_revision *rev, const char *const *paths, size_t n_paths,
                   const char *since_commit, unsigned max_commits, source_signer_list *ret);
void source_signer_list_release(source_signer_list *r);

/*
 * The revision spec names in a Git source's mirror as source_fetch() left
 * it (a commit id, a branch, a tag, or a revparse expression such as
 * "main~1"): *ret as source_fetch() would fill it, without the rollback
 * check. Branches and tags are those of the last fetch (a fetch that found
 * --ref unchanged downloads nothing, so other refs may be older than the
 * remote's). 0, or a negative errno with source_last_error():
 * -EOPNOTSUPP for a plain directory (it has no revisions), -ENOENT spec
 * names nothing, -EINVAL ambiguous, -EPERM an untrusted signature.
 */
int source_read_at(source *s, const char *spec, source_revision **ret);

/* The message of the last failure, or "" when there was none. */
const char *source_last_error(const source *s);
/* The location without credentials (for logs and records). */
const char *source_display_url(const source *s);
/* The bare mirror's path for a Git source; NULL for a directory. */
const char *source_mirror_path(const source *s);

void source_revision_free(source_revision *r);

/* "https://user:secret@host/x" -> "https://host/x"; scp-like and ssh keep the user. */
char *source_redact_url(const char *url);

static inline void source_freep(source **s)
{
        source_free(*s);
}
static inline void source_revision_freep(source_revision **r)
{
        source_revision_free(*r);
}

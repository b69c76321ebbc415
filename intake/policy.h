/*
 * The operator's policy: what the commits of a source may make gitcd do,
 * written in gitcd's configuration file (`policy:`, and per source), where
 * Git cannot change it. Without a file, gitcd's built-in policy bounds a
 * source too (policy_builtin()).
 *
 * A policy holds: the namespaces and clusters a source may define, the
 * targets it may use, for the hosts target the machines it may place
 * members on, the roots every folder gitcd creates or deletes on a
 * machine must lie in and the etcd binaries it may run there, the folders
 * on the gitcd host itself a spec may name for snapshots (written to, or
 * restored from), the image repositories it may run, the etcd flags
 * beyond the safe set it may set, and which kinds of change need more than
 * one trusted signer (approvals). docs/operating.md lists every key;
 * docs/security.md the threat and the approvals design.
 *
 * Everything here is pure: parsing a YAML node, matching patterns and
 * paths, judging one cluster. The intake (intake.h) applies it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api/model.h"
#include "api/yaml.h"
#include "util/diag.h"

#define POLICY_BUILTIN     "(built-in policy)" /* the "file" of the built-in keys */
#define POLICY_MAX_SIGNERS 16

/* Where a key was written, for the messages of a refusal. */
typedef struct policy_at {
        char *file; /* the configuration file; POLICY_BUILTIN for a built-in default */
        int line, col;
} policy_at;

/*
 * A list of patterns (`*` matches any run of characters but '/'), or of
 * roots (absolute, normalized folders, no pattern) where a field says so.
 */
typedef struct policy_list {
        char **items;
        size_t n;
        policy_at at;
} policy_list;

/* An absolute, normalized folder that paths on a machine must lie in. */
typedef struct policy_root {
        char *path;
        policy_at at;
} policy_root;

/* Kinds of change that may need more than one trusted signer. */
typedef enum policy_change {
        POLICY_CHANGE_RECOVERY,      /* spec.recovery: a new recovery */
        POLICY_CHANGE_SCALE_DOWN,    /* fewer replicas (pausing included) */
        POLICY_CHANGE_MINOR_UPGRADE, /* spec.version to another minor (or major) version */
        POLICY_CHANGE_CA_ROTATION,   /* a new tls.auto.rotateCA */
        POLICY_CHANGE_DELETION,      /* the cluster removed from the source */
        POLICY_CHANGE_AUTH_OFF,      /* spec.auth switched off */
        POLICY_N_CHANGES,
} policy_change;

/* "recovery", "scaleDown", "minorUpgrade", "caRotation", "clusterDeletion", "authOff". */
const char *policy_change_name(policy_change k);

typedef struct policy_approval {
        int signers; /* distinct trusted signers it needs; 0: no more than any change */
        policy_at at;
} policy_approval;

typedef struct policy {
        policy_list namespaces;    /* namespaces a source may define */
        policy_list clusters;      /* "namespace/name" patterns it may define */
        policy_list targets;       /* target names it may use */
        policy_list machines;      /* hosts: spec.hosts addresses it may place members on */
        policy_root data_root;     /* hosts: every dataDir in it (or the root itself) */
        policy_root tls_root;      /* hosts: every tlsDir inside (or the root itself) */
        policy_root unit_root;     /* hosts, systemd: every unitDir inside */
        policy_root manifest_root; /* hosts, staticPod: every manifestDir inside */
        policy_list etcd_binaries; /* hosts, systemd: etcdBinary patterns (absolute paths) */
        /*
         * Roots on the gitcd host: every local snapshot folder in one of
         * them (or one itself), every local file a restore reads inside one.
         */
        policy_list local_roots;
        policy_list images;     /* image repositories (Kubernetes, hosts staticPod) */
        policy_list etcd_flags; /* flags beyond the safe set (etcd_flag_needs_policy) */
        policy_approval approvals[POLICY_N_CHANGES];
} policy;

/* The built-in policy.localSnapshotRoots: the packaged daemon's <state dir>/snapshots. */
#define POLICY_DEFAULT_LOCAL_ROOT "/var/lib/gitcd/snapshots"

/* gitcd's built-in policy (docs/operating.md, "The policy"). */
policy *policy_builtin(void);
policy *policy_copy(const policy *p);
void policy_free(policy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(policy *, policy_free);

/*
 * Parse a `policy:` mapping of the configuration file at `file`. Keys it
 * leaves out are base's (NULL: the built-in policy's): a source's policy
 * overrides the top-level one key by key, a list replacing the whole list.
 * Every problem is a diagnostic at file:line:col; -EINVAL when there was
 * one (*ret untouched), else 0.
 */
int policy_parse(const ynode *n, const char *file, const policy *base, policy **ret,
                 diag_list *diags);

/* Whether any change kind needs signers; *ret_at (may be NULL) the first such key. */
bool policy_wants_approvals(const policy *p, const policy_at **ret_at);

/* `*` matches any run of characters but '/'; everything else itself. */
bool policy_glob(const char *pattern, const char *s);
bool policy_list_matches(const policy_list *l, const char *s);

/*
 * Whether path lies in root, component by component (never a string
 * prefix: /var/lib/etcd2 is not in /var/lib/etcd). With strict the root
 * itself does not count. 1 inside, 0 outside, -EINVAL when path is not an
 * absolute path without "." or ".." components.
 */
int policy_path_within(const char *root, const char *path, bool strict);

/*
 * Judge one cluster against the policy: an error diagnostic at the policy
 * key's location for every rule it breaks, naming where the spec asks for
 * it; returns how many. target_name is the target's name; hosts_target and
 * runs_images say whether it runs members on spec.hosts and runs container
 * images (the hosts target's staticPod machines run images too). Paths on
 * the gitcd host (local snapshot folders and restore files, those of the
 * snapshot documents beside the cluster included) are judged on every
 * target. exists picks "not changed" over "not taken in" in the messages.
 */
size_t policy_check(const policy *p, const etcd_cluster *c, const char *target_name,
                    bool hosts_target, bool runs_images, bool exists, diag_list *diags);

/* The kinds of change (1u << policy_change) from prev to next; next NULL: a removal. */
unsigned policy_changes(const etcd_cluster *prev, const etcd_cluster *next);

/*
 * The distinct signers the changes need (the largest of their approvals);
 * *ret_kinds (may be NULL) the kinds that need that many. 0: nothing more
 * than the revision itself.
 */
int policy_signers_needed(const policy *p, unsigned changes, unsigned *ret_kinds);

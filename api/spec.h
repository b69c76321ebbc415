/*
 * Loading, validating and comparing EtcdCluster definitions.
 *
 * Every function here is pure except spec_load_paths() (which reads files).
 * Problems in the input are diagnostics, never errno: a caller prints all
 * of them. A document with any error is not added to the set; the other
 * documents still are, so one bad file never hides the good ones.
 */
#pragma once

#include <jansson.h>

#include "api/model.h"
#include "api/yaml.h"
#include "util/diag.h"

/*
 * Parse one buffer of YAML (one or more documents). EtcdCluster documents
 * of every known dialect are validated and appended to out; documents of
 * other kinds are skipped with a note. Returns 0, or -EINVAL when any
 * error diagnostic was added.
 */
int spec_load_buffer(const char *file, const char *buf, size_t len, cluster_set *out,
                     diag_list *diags);

/* Buffers read together: documents of one buffer may name clusters of another
 * (EtcdBackupSchedule, EtcdSnapshot, EtcdRestore beside the EtcdCluster). */
typedef struct spec_buffer {
        const char *file;
        const char *data;
        size_t len;
        /*
         * Found by scanning a folder rather than named: when none of its
         * documents has an apiVersion or a kind (a CI workflow), the file is
         * skipped with a note.
         */
        bool scanned;
} spec_buffer;
int spec_load_buffers(const spec_buffer *bufs, size_t n, cluster_set *out, diag_list *diags);

/* Files read from disk (spec_read_paths); the list owns every string. */
typedef struct spec_file_list {
        spec_buffer *items;
        size_t n;
} spec_file_list;

/*
 * Read files and directories (recursively, *.yaml and *.yml, sorted; each
 * file once however it is named), without parsing them: files found in a
 * directory are marked scanned. A path that does not exist or a file that
 * cannot be read is a diagnostic. Returns 0, -EINVAL on any error
 * diagnostic, or -ENOENT when a path does not exist; *ret holds what could
 * be read either way (spec_file_list_release).
 */
int spec_read_paths(char *const *paths, size_t n, spec_file_list *ret, diag_list *diags);
void spec_file_list_release(spec_file_list *l);

/*
 * Load files and directories (recursively, *.yaml and *.yml, sorted). A
 * file found in a directory whose documents have neither apiVersion nor
 * kind (a CI workflow) is skipped with a note; a file named in paths is
 * always checked. Also reports clusters defined twice (namespace/name) across all inputs,
 * naming both places. Returns 0, -EINVAL on any error diagnostic, or
 * -ENOENT when a path does not exist (also a diagnostic).
 */
int spec_load_paths(char *const *paths, size_t n, cluster_set *out, diag_list *diags);

/* Report duplicate namespace/name pairs in a set (both places named). 0 or -EINVAL. */
int spec_check_duplicates(const cluster_set *set, diag_list *diags);

/*
 * Fields gitcd reads and validates but does not act on yet (spec.auth,
 * spec.snapshots, spec.bootstrap.restore, in whatever dialect):
 * the one list of them lives in api/unsupported.c. A field written
 * explicitly off (auth.enabled: false) is not "used".
 */
typedef enum spec_unsupported_mode {
        SPEC_UNSUPPORTED_WARN,   /* validate: a warning that apply, run and plan refuse it */
        SPEC_UNSUPPORTED_CREATE, /* an error: the cluster is not created */
        SPEC_UNSUPPORTED_CHANGE, /* an error: the existing cluster is not changed */
} spec_unsupported_mode;

/* One diagnostic per such field that c uses, at file:line:col; returns how many. */
size_t spec_check_unsupported(const etcd_cluster *c, spec_unsupported_mode mode, diag_list *diags);

/*
 * The rule `apply`, `run` and `plan` share: every cluster of set that uses a
 * field not supported yet is removed from the set (and freed), with an error
 * per field. exists(id) (NULL: nothing exists yet) tells whether the cluster
 * "namespace/name" was applied before, which picks "not created" or "not
 * changed". Returns 0, or -EOPNOTSUPP when a cluster was refused.
 */
int spec_refuse_unsupported(cluster_set *set, bool (*exists)(const char *id, void *userdata),
                            void *userdata, diag_list *diags);

/*
 * The target-dependent rule apply, run and plan share (api/unsupported.c):
 * a cluster with spec.hosts is taken in only by the hosts target
 * (hosts_target true), and the hosts target takes in only clusters with
 * spec.hosts; snapshots in a PersistentVolumeClaim
 * (spec.snapshots.destination.pvc, or a one-off snapshot's, such as a
 * cozystack EtcdSnapshot's spec.destination.pvc or the cluster's claim it
 * falls back to) are taken in only by a target that runs writer Pods
 * (pvc_target: the Kubernetes target). Every other cluster
 * is removed from the set (and freed) with an error at its location.
 * Returns 0, or -EOPNOTSUPP when one was refused.
 */
int spec_refuse_for_target(cluster_set *set, bool hosts_target, bool pvc_target, diag_list *diags);

/*
 * spec.tls.peer.selfSigned (etcd's own peer certificates) is taken in only
 * by a target that plans https peer URLs for it (can: the target has
 * TARGET_CAP_PEER_SELF_SIGNED); otherwise the cluster is removed from the
 * set (and freed) with an error at the field. 0, or -EOPNOTSUPP.
 */
int spec_refuse_peer_self_signed(cluster_set *set, bool can, diag_list *diags);

/*
 * The normalized native form: {"apiVersion": "gitcd.io/v1alpha1",
 * "kind": "EtcdCluster", "metadata": {...}, "spec": {...}} with every
 * default filled in and keys in a fixed order. Two specs that mean the same
 * compare equal here, whatever their dialect.
 */
json_t *spec_to_json(const etcd_cluster *c);
/* Parse the normalized form back (e.g. from the state store). 0 or -EINVAL. */
int spec_from_json(const json_t *j, const char *origin, etcd_cluster **ret, diag_list *diags);
/*
 * The same from JSON text (a spec the state store or a snapshot job holds),
 * for a reader that only needs the model: NULL for NULL text or text that
 * is not a readable spec. The diagnostics are dropped: gitcd wrote the text
 * itself, and a reader that gets NULL says in its own words what it could
 * not read.
 */
etcd_cluster *spec_from_json_text(const char *text, const char *origin);
/* A deep copy of a model, through its normalized form; NULL only for one that is not valid. */
etcd_cluster *spec_dup(const etcd_cluster *c, const char *origin);
/* sha256 of the compact, key-sorted normalized JSON, as 64 hex digits. */
char *spec_hash(const etcd_cluster *c);
/* sha256 of text, as 64 hex digits. */
char *spec_text_hash(const char *text);

/* A location (spec.snapshots.destination, ...) in the normalized form, and back. */
json_t *spec_location_to_json(const storage_location *l);
/* 0, or -EINVAL when j is not such a form (out untouched). */
int spec_location_from_json(const json_t *j, storage_location *ret);

/*
 * Transition rules between the accepted spec and a new one (pure):
 * storage medium immutable; storage size never shrinks; TLS and auth
 * immutable after creation; the version moves as the version policy says
 * (api/versions.h: patches freely, one minor up from the minimum patch,
 * downgrades of a minor refused except the rollback of an unfinished
 * upgrade). Each refusal is an error diagnostic located at the field in
 * `next`, saying why and what to do instead. Returns 0 or -EPERM.
 */
int spec_check_transition(const etcd_cluster *prev, const etcd_cluster *next, diag_list *diags);
/*
 * The same, knowing the versions the members that hold data (joined etcd
 * once) were last started with (state records; NULL entries are skipped):
 * every member must be able to make the move, and going back to a version
 * some of them still run is the rollback of an unfinished upgrade. running
 * NULL: not known (the specs alone decide); non-NULL with n_running 0: no
 * member ever held data (a cluster that never formed), so any version goes.
 */
int spec_check_transition_running(const etcd_cluster *prev, const etcd_cluster *next,
                                  const char *const *running, size_t n_running, diag_list *diags);

/* Kubernetes quantity ("1Gi", "500M", "0.5", "100m") -> bytes (rounded up). 0 or -EINVAL. */
int quantity_parse(const char *s, int64_t *ret_value);
/* Kubernetes quantity of CPU ("2", "500m", "1.5") -> millicores. 0 or -EINVAL. */
int quantity_parse_millis(const char *s, int64_t *ret_millis);
/* RFC 1123 DNS label (<= 63, [a-z0-9-], alnum at both ends). */
bool dns1123_label_valid(const char *s);
/* RFC 1123 subdomain (<= 253, dot-separated labels). */
bool dns1123_subdomain_valid(const char *s);

/* An IPv4 or IPv6 address. */
bool ip_address_valid(const char *s);
/* A host name: dot-separated labels of letters, digits and '-' (either case), <= 253. */
bool host_name_valid(const char *s);
/* A host name or an IP address (where SSH connects). */
bool host_address_valid(const char *s);
/* A host name or an IPv4 address: what gitcd writes into a member's URLs unbracketed. */
bool advertise_address_valid(const char *s);
/* host, or host:port (1-65535) when port_required is false; an IPv6 host in brackets. */
bool host_port_valid(const char *s, bool port_required);
/* http:// or https:// and host[:port]; with allow_path, a path of unreserved characters. */
bool http_url_valid(const char *s, bool allow_path);
/*
 * An image repository by the OCI distribution reference grammar, without
 * tag or digest (gitcd adds ":v<version>"): [registry[:port]/]path, each
 * path component lower-case letters and digits with '.', '_', "__" or
 * '-' between them; at most 255 characters.
 */
bool image_repository_valid(const char *s);
/* Whether s[0..len) holds a control character (a byte below 0x20, or 0x7f). */
bool str_has_control(const char *s, size_t len);

#define SPEC_PATH_MAX 1024

/* What a path in a spec names, which decides the rules it follows (spec_path_check). */
typedef enum spec_path_kind {
        SPEC_PATH_FILE,   /* a file gitcd runs or reads (etcdBinary, a snapshot to restore) */
        SPEC_PATH_FOLDER, /* a folder gitcd writes files of its own into (unitDir, manifestDir) */
        SPEC_PATH_OWNED,  /* a folder gitcd takes whole (dataDir, tlsDir, a snapshot folder) */
} spec_path_kind;

/*
 * A path of a spec: absolute, normalized (no "." or ".." component, no
 * "//", no trailing '/'), at most SPEC_PATH_MAX characters of letters,
 * digits and "/._-+@", never "/"; an owned folder is never one of the
 * machine's system folders (spec_system_dirs) nor a parent of one. 0, or
 * -EINVAL with a newly allocated reason ("must be an absolute path") in
 * *ret_why.
 */
int spec_path_check(const char *path, spec_path_kind kind, char **ret_why);
/* The system folders an owned folder never is nor holds (NULL-terminated, for docs and tests). */
const char *const *spec_system_dirs(void);

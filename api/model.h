/*
 * The EtcdCluster model: what every dialect is parsed into, what render/
 * turns into Kubernetes objects, what the state store keeps (as normalized
 * JSON) and what the reconciler drives toward.
 *
 * Five dialects map onto this one model (docs/api.md has the field-by-field
 * table). The model always holds defaults filled in, so two specs that mean
 * the same thing compare equal through spec_to_json().
 *
 * Ownership: an etcd_cluster owns every string and JSON value in it;
 * etcd_cluster_free() releases all of it.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/diag.h"
#include "util/macro.h"

#define GITCD_API_VERSION               "gitcd.io/v1alpha1"
#define GITCD_DEFAULT_VERSION           "3.5.16"
#define GITCD_DEFAULT_REPOSITORY        "quay.io/coreos/etcd"
#define GITCD_DEFAULT_REPLICAS          3
#define GITCD_DEFAULT_STORAGE_SIZE      "1Gi"
#define GITCD_DEFAULT_PROGRESS_DEADLINE 600
#define GITCD_DEFAULT_SOAK_SECONDS      60
#define GITCD_MAX_SOAK_SECONDS          86400
#define GITCD_MAX_KUBE_CONTEXT          253 /* bytes of spec.kubernetes.context */
#define GITCD_MAX_RECOMMENDED_REPLICAS  7

typedef enum spec_dialect {
        DIALECT_GITCD,      /* gitcd.io/v1alpha1 */
        DIALECT_COREOS,     /* etcd.database.coreos.com/v1beta2 */
        DIALECT_ETCDIO,     /* operator.etcd.io/v1alpha1 */
        DIALECT_IMPROBABLE, /* etcd.improbable.io/v1alpha1 */
        DIALECT_COZYSTACK,  /* etcd-operator.cozystack.io/v1alpha2 */
} spec_dialect;

const char *dialect_api_version(spec_dialect d);
/* Short name for messages: "gitcd", "coreos", "etcd-io", "improbable", "cozystack". */
const char *dialect_name(spec_dialect d);

typedef struct semver {
        int major;
        int minor;
        int patch;
} semver;

/* "3.5.16" or "v3.5.16" -> {3,5,16}; -EINVAL otherwise (no pre-release suffixes). */
int semver_parse(const char *s, semver *ret);
int semver_cmp(const semver *a, const semver *b);

typedef struct kv {
        char *key;
        char *value;
} kv;

/* An ordered string map (labels, annotations, extra flags). Keys are unique. */
typedef struct kv_list {
        kv *items;
        size_t n;
        size_t alloc;
} kv_list;

/* Set key (replacing an existing value). */
void kv_set(kv_list *l, const char *key, const char *value);
const char *kv_get(const kv_list *l, const char *key);
void kv_list_release(kv_list *l);

typedef enum storage_medium { MEDIUM_DISK, MEDIUM_MEMORY } storage_medium;

typedef struct storage_spec {
        storage_medium medium;
        char *size;          /* Kubernetes quantity as written, e.g. "10Gi" */
        int64_t size_bytes;  /* parsed */
        char *storage_class; /* NULL: the cluster's default class */
} storage_spec;

typedef enum tls_provider {
        TLS_PROVIDER_NONE,         /* plain HTTP on both surfaces */
        TLS_PROVIDER_AUTO,         /* gitcd issues a CA and leaf certificates */
        TLS_PROVIDER_CERT_MANAGER, /* cert-manager Certificates from issuers */
        TLS_PROVIDER_SECRETS,      /* the user supplies Secrets */
} tls_provider;

const char *tls_provider_name(tls_provider p); /* "none", "auto", "cert-manager", "secrets" */

typedef struct issuer_ref {
        char *name;  /* NULL when unset */
        char *kind;  /* "Issuer" (default) or "ClusterIssuer" */
        char *group; /* default "cert-manager.io" */
} issuer_ref;

typedef struct tls_surface_spec {
        bool enabled;
        /* secrets provider: a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt */
        char *secret;
        /* cert-manager provider: the issuer for this surface's certificates */
        issuer_ref issuer;
        /* client only (allowPlainHTTP): plain http on the client port besides https */
        bool allow_plain;
        /*
         * peer only (selfSigned): https between members with the certificates
         * each etcd makes for itself (--peer-auto-tls), no CA; never with a
         * provider's peer certificates (enabled). render_peer_self_signed().
         */
        bool self_signed;
} tls_surface_spec;

#define TLS_DAY_SECONDS INT64_C(86400)
#define TLS_MAX_DAYS    3650

/* Seconds as the coarsest exact duration: 7776000 -> "90d", 90 -> "90s", 5400 -> "90m". */
char *duration_format_s(int64_t seconds);
/*
 * Milliseconds as the coarsest exact Go duration (hours at most, which both
 * the spec and etcd's flags read): 14400000 -> "4h", 300000 -> "5m".
 */
char *duration_format_ms(int64_t ms);

typedef struct tls_spec {
        tls_provider provider;
        tls_surface_spec client; /* client-facing server certificate */
        tls_surface_spec peer;   /* member-to-member certificate */
        /* the client identity gitcd itself uses toward etcd when client TLS is on */
        char *operator_client_secret;      /* secrets provider */
        issuer_ref operator_client_issuer; /* cert-manager provider */
        char *ca_bundle_secret;            /* optional extra trust bundle */
        /* auto: leaf lifetime in seconds, default 90 days (tls.auto.validity / validityDays) */
        int64_t validity_seconds;
        /* auto: renew this long before expiry, default 30 days (renewBefore / renewBeforeDays) */
        int64_t renew_before_seconds;
        /* auto: tls.auto.rotateCA, a new value starts one CA rotation (reconciler/carotate.c) */
        char *rotate_ca_token;
        /*
         * Not read from the spec: the CA rotation phase (0: none, 1..3) the
         * reconciler has recorded for the cluster, set on its latched copy so
         * that the targets' pki_auto_open() brings the CA folders to it.
         */
        int ca_rotation_phase;
        /*
         * Not read from the spec: the surfaces the spec switched off that the
         * members still run with TLS (reconciler/tlsswitch.c, its journal).
         * The reconciler's latched copy keeps them on, provider auto, until
         * every member moved to plain http; own_* are the spec's own values.
         */
        bool off_client, off_peer;
        tls_provider own_provider;
        bool own_client, own_peer;
} tls_spec;

typedef struct auth_spec {
        bool enabled;
        char *
            root_credentials_secret; /* Secret with "username"/"password"; NULL: gitcd creates one */
} auth_spec;

typedef struct etcd_options {
        char *quota_backend;             /* quantity as written; NULL: etcd's default (2 GiB) */
        int64_t quota_backend_bytes;     /* 0 when unset */
        char *auto_compaction_mode;      /* "periodic" | "revision" | NULL */
        char *auto_compaction_retention; /* "1h", "1000", ... | NULL */
        int64_t snapshot_count;          /* 0 when unset */
        int heartbeat_interval_ms;       /* 0 when unset (etcd: 100) */
        int election_timeout_ms;         /* 0 when unset (etcd: 1000) */
        kv_list extra_flags;             /* flag name without "--" -> value */
} etcd_options;

typedef enum destination_kind { DEST_NONE, DEST_PVC, DEST_S3, DEST_LOCAL } destination_kind;

typedef struct s3_location {
        char *endpoint;
        char *bucket;
        char *key; /* object key (restore) or key prefix (snapshots) */
        char *region;
        bool force_path_style;
        char *credentials_secret;
} s3_location;

typedef struct storage_location {
        destination_kind kind;
        char *claim_name; /* DEST_PVC */
        char *sub_path;   /* DEST_PVC: folder (snapshots) or file (restore) */
        s3_location s3;   /* DEST_S3 */
        char *path; /* DEST_LOCAL: a directory (snapshots) or file (restore) on the gitcd host */
} storage_location;

/* Free the strings of l and zero it. */
void storage_location_release(storage_location *l);

typedef enum snapshot_compression {
        COMPRESSION_NONE, /* stored as etcd wrote it */
        COMPRESSION_GZIP, /* gzip (zlib), ".gz" keys */
} snapshot_compression;

/* spec.snapshots.verify: restore drills of the cluster's snapshots (snapshots/drill.h). */
typedef enum snapshot_verify {
        VERIFY_EVERY,    /* the default: a drill of each snapshot once it is stored */
        VERIFY_SCHEDULE, /* at the cron times of verify_schedule: the newest snapshot */
        VERIFY_OFF,
} snapshot_verify;

typedef struct snapshot_spec {
        bool enabled;
        char *schedule;                   /* 5-field cron expression */
        snapshot_verify verify;           /* default VERIFY_EVERY */
        char *verify_schedule;            /* VERIFY_SCHEDULE: a 5-field cron expression */
        snapshot_compression compression; /* default none */
        int retention_count;              /* keep this many newest; default 7 */
        int64_t retention_max_age_ms;     /* 0: no age limit */
        storage_location destination;
} snapshot_spec;

/*
 * A one-off snapshot a document in Git asks for (cozystack EtcdSnapshot,
 * improbable EtcdBackup; api/sidekinds.c). Not part of the spec: neither
 * normalized nor hashed, so adding such a document changes nothing in the
 * cluster; the driver records it as a request that is taken once
 * (state/snapshots.h).
 */
typedef struct declared_snapshot {
        char *object;                 /* "EtcdSnapshot ns/name" */
        char *identity;               /* sha256 hex over kind, namespace, name and what it asks */
        storage_location destination; /* DEST_NONE: the cluster's spec.snapshots destination */
        char *file;                   /* the document: its spec.destination.pvc, else its start */
        int line, col;
} declared_snapshot;

typedef struct defrag_spec {
        bool enabled;
        char *schedule;                 /* cron; NULL: only thresholds */
        char *free_space_above;         /* quantity as written, NULL when unset */
        int64_t free_space_above_bytes; /* defrag when dbSize - dbSizeInUse exceeds this */
        int quota_usage_above_percent;  /* defrag when dbSize/quota exceeds this; 0 unset */
        bool disarm_nospace; /* on a NOSPACE alarm: compact, defragment, then disarm it */
} defrag_spec;

/*
 * spec.maintenance: when disruptive steps may run (reconciler/hold.h). A
 * window opens at each cron time of its schedule (UTC) and stays open for
 * duration_ms; no windows: disruptive steps run at any time.
 */
typedef struct maint_window {
        char *schedule;      /* 5-field cron expression */
        char *duration;      /* as written ("4h") */
        int64_t duration_ms; /* 1 minute to 7 days */
} maint_window;

typedef struct maintenance_spec {
        maint_window *windows;
        size_t n_windows;
        char *override; /* a token that lets held disruptive steps run once; NULL: none */
} maintenance_spec;

/*
 * spec.leadership: leadership moved away from a leader whose disk is an
 * outlier (reconciler/slowdisk.h). Zero is the default: on, every 600 s
 * at most.
 */
typedef struct leadership_spec {
        bool avoid_slow_off;  /* avoidSlowMembers: false */
        int interval_seconds; /* intervalSeconds, 10 to 86400; 0: not written (600) */
} leadership_spec;

#define LEADERSHIP_INTERVAL_DEFAULT_S 600

/*
 * How much a restore raises etcd's store revision (bumpRevision of
 * spec.bootstrap.restore and spec.recovery): etcd's restore tool with
 * --bump-revision N --mark-compacted, so that every watcher and informer
 * that saw a revision of the data before the restore gets "revision
 * compacted" and lists again, instead of waiting for revisions that never
 * come. BUMP_UNSET (not written) becomes the role's default in
 * spec_fill_defaults (revision_bump_default); after it, a mode is always
 * AUTO (sized when the restore runs, reconciler/bump.h) or FIXED (amount
 * revisions; 0: no bump).
 */
typedef enum bump_mode { BUMP_UNSET = 0, BUMP_FIXED, BUMP_AUTO } bump_mode;

typedef struct revision_bump {
        bump_mode mode;
        int64_t amount; /* BUMP_FIXED: revisions to add, 0 .. GITCD_MAX_REVISION_BUMP */
} revision_bump;

/* 10^12 revisions: ten years of 3,000 writes a second; more is a typo. */
#define GITCD_MAX_REVISION_BUMP INT64_C(1000000000000)

/*
 * "auto", "off" or a number of revisions (decimal, 0 .. GITCD_MAX_REVISION_BUMP;
 * 0 and "off" are no bump) as a user writes it (`gitcd recover
 * --bump-revision`). -EINVAL for anything else, -ERANGE above the maximum.
 */
int revision_bump_parse(const char *text, revision_bump *ret);
/* "auto", or the amount in decimal ("0": none). Newly allocated. */
char *revision_bump_format(const revision_bump *b);
bool revision_bump_equal(const revision_bump *a, const revision_bump *b);

typedef struct restore_spec {
        bool enabled;
        int64_t snapshot_id;     /* source.snapshot: a snapshot gitcd recorded; 0: source */
        storage_location source; /* bootstrap.restore.source (pvc, s3, local) */
        revision_bump bump;      /* bootstrap.restore.bumpRevision */
} restore_spec;

/*
 * spec.recovery: an explicit disaster recovery after quorum loss, acted on
 * once per token (reconciler/recovery.c). Every dialect but the native one
 * leaves it unset.
 */
typedef enum recovery_source {
        RECOVERY_NONE,
        RECOVERY_FROM_MEMBER,   /* restart the named member alone (force-new-cluster) */
        RECOVERY_FROM_SNAPSHOT, /* restore a recorded snapshot as the new seed */
} recovery_source;

typedef struct recovery_spec {
        recovery_source from;
        char *member;        /* RECOVERY_FROM_MEMBER */
        int64_t snapshot_id; /* RECOVERY_FROM_SNAPSHOT: the record's id (`gitcd snapshot list`) */
        char *token;         /* any string; the recovery runs once per token */
        revision_bump bump;  /* recovery.bumpRevision: RECOVERY_FROM_SNAPSHOT only */
} recovery_spec;

/*
 * spec.role: what the cluster is for, where gitcd acts on it differently.
 * ROLE_KUBERNETES (kubernetes-control-plane): it backs a Kubernetes API
 * server, whose watchers and informers hold revisions, so a restore bumps
 * the revision by default. ROLE_GENERAL (the default, zero): any other use;
 * a restore bumps only when asked.
 */
typedef enum cluster_role { ROLE_GENERAL = 0, ROLE_KUBERNETES } cluster_role;

const char *cluster_role_name(cluster_role r); /* "general", "kubernetes-control-plane" */

/*
 * spec.consistency: the proofs that a cluster's members hold the same data
 * (docs/consistency.md). etcd's own corruption checks are member flags
 * (render/command.c renders what each minor needs); gitcd's own check
 * compares every member's HashKV at one revision (reconciler/consistency.c).
 * Every dialect gets the defaults: etcd's checks on, gitcd's every 5 min.
 */
#define GITCD_DEFAULT_CHECK_INTERVAL_MS      (INT64_C(5) * 60 * 1000)
#define GITCD_DEFAULT_ETCD_CHECK_INTERVAL_MS (INT64_C(4) * 3600 * 1000)

typedef struct consistency_spec {
        bool etcd_checks;               /* etcd's initial, periodic and compaction checks */
        int64_t etcd_check_interval_ms; /* etcd's periodic check of the latest revision */
        int64_t check_interval_ms;      /* gitcd's cross-member check */
        char *reason;                   /* why etcd_checks is off: required then, refused else */
} consistency_spec;

/*
 * spec.repair: a person's answer to members found holding different data,
 * acted on once per token (reconciler/consistency.c), as `gitcd repair`
 * does: replace a member of the minority from the majority, or prove again
 * and lift the freeze when every member agrees. Every dialect but the
 * native one leaves it unset.
 */
typedef struct repair_spec {
        bool set;
        char *replace; /* the member to replace; NULL with recheck */
        bool recheck;
        char *token; /* any string; the repair runs once per token */
} repair_spec;

/*
 * spec.bootstrap.mode: how a brand-new cluster forms. Static (the default,
 * zero, so every dialect maps to it): every member at once with one static
 * --initial-cluster. Learners: a seed alone, then one learner at a time.
 * Every later change uses learners either way.
 */
typedef enum bootstrap_mode {
        BOOTSTRAP_STATIC = 0,
        BOOTSTRAP_LEARNERS,
} bootstrap_mode;

const char *bootstrap_mode_name(bootstrap_mode m); /* "static", "learners" */

/*
 * spec.hosts: the machines members run on when gitcd drives bare-metal
 * hosts over SSH (targets/hosts.c). One member per host; the list order is
 * the placement order, unless machines name failure domains (domains,
 * placement: api/domains.h). Every field is filled in by spec_fill_defaults():
 * per-host values override the hosts-level defaults.
 */
typedef enum host_mode {
        HOST_MODE_SYSTEMD,    /* a unit file in unit_dir, started with systemctl */
        HOST_MODE_STATIC_POD, /* a Pod manifest in manifest_dir, run by kubelet */
} host_mode;

const char *host_mode_name(host_mode m); /* "systemd", "staticPod" */

typedef struct host_spec {
        char *address;           /* where SSH connects: a host name or an IP address */
        int ssh_port;            /* default 22 */
        char *ssh_user;          /* default "root"; others use `sudo -n` */
        char *advertise_address; /* the member's peer/client address; default address */
        char *data_dir;          /* default /var/lib/etcd/<namespace>-<name> */
        host_mode mode;
        char *manifest_dir; /* staticPod: default /etc/kubernetes/manifests */
        char *unit_dir;     /* systemd: default /etc/systemd/system */
        char *etcd_binary;  /* systemd: default /usr/local/bin/etcd */
        char *tls_dir;      /* TLS material on the host: default /etc/etcd/<namespace>-<name>/pki */
        kv_list domains;    /* machines[].domains: failure domains {rack: r1, power: pdu-a} */
} host_spec;

/*
 * spec.hosts.placement: what a placement in which losing one failure
 * domain value loses quorum does (api/domains.h). Strict (the default)
 * refuses the spec, preferred warns and places members anyway.
 */
typedef enum host_placement {
        HOST_PLACEMENT_STRICT = 0,
        HOST_PLACEMENT_PREFERRED,
} host_placement;

const char *host_placement_name(host_placement p); /* "strict", "preferred" */

typedef struct hosts_spec {
        bool set;           /* spec.hosts was written */
        host_spec defaults; /* the hosts-level fields (address, advertise_address unused) */
        bool mode_set;      /* defaults.mode was written */
        host_placement placement;
        host_spec *items;
        size_t n;
} hosts_spec;

/*
 * spec.adopt (native dialect, the Kubernetes target): take over a cluster
 * another operator runs, member by member (reconciler/takeover.h,
 * docs/migration.md). from names the operator whose objects hold it; name
 * and namespace are its custom resource's, defaulting to this cluster's.
 * A dialect document never implies it: committing an operator's manifest
 * describes a cluster, it does not ask gitcd to take one over.
 */
typedef enum adopt_from {
        ADOPT_FROM_NONE = 0,
        ADOPT_FROM_COREOS,
        ADOPT_FROM_ETCDIO,
        ADOPT_FROM_IMPROBABLE,
        ADOPT_FROM_COZYSTACK,
} adopt_from;

const char *adopt_from_name(adopt_from f); /* "coreos", "etcd-io", "improbable", "cozystack" */

typedef struct adopt_spec {
        adopt_from from;  /* NONE: spec.adopt not written */
        char *name;       /* the old cluster's name (default: this cluster's) */
        char *namespace_; /* its namespace (default: this cluster's) */
        /*
         * spec.adopt.ca.secret: a kubernetes.io/tls Secret in the cluster's
         * namespace holding the old cluster's CA (tls.crt) and its key
         * (tls.key), imported as the tls.provider auto CA before anything is
         * issued, so gitcd's members get leaves the old members trust
         * (coreos only; targets/kubernetes-takeover-tls.c). NULL: not written.
         */
        char *ca_secret;
} adopt_spec;

/* Where a field was written, for diagnostics from later stages (transitions, plan). */
typedef struct spec_loc {
        char *path; /* "spec.replicas", "spec.storage.size", ... (native names) */
        int line;
        int col;
} spec_loc;

typedef struct etcd_cluster {
        spec_dialect dialect;
        char *api_version; /* as written */
        char *kind;        /* "EtcdCluster" */

        char *name;
        char *namespace_; /* default "default" */
        kv_list labels;
        kv_list annotations;

        char *file; /* source file (or path inside a Git tree) */
        int line;   /* the document's start */
        int col;
        spec_loc *locs;
        size_t n_locs;
        size_t alloc_locs;

        int replicas; /* 0 = paused */
        char *version;
        semver ver;
        char *repository;

        storage_spec storage;
        tls_spec tls;
        auth_spec auth;

        /* Kubernetes structures passed through as written (NULL when unset). */
        json_t *resources;
        json_t *affinity;
        json_t *topology_spread_constraints;
        json_t *node_selector;
        json_t *tolerations;

        kv_list additional_labels;      /* additionalMetadata.labels */
        kv_list additional_annotations; /* additionalMetadata.annotations */
        kv_list pod_labels;             /* podTemplate.metadata.labels */
        kv_list pod_annotations;        /* podTemplate.metadata.annotations */

        etcd_options options;
        int progress_deadline_seconds; /* default 600 */
        snapshot_spec snapshots;
        defrag_spec defrag;
        /* spec.suspend: no voluntary step (reconciler/hold.h); also coreos spec.paused */
        bool suspend;
        maintenance_spec maintenance;
        leadership_spec leadership; /* spec.leadership */
        restore_spec restore;
        recovery_spec recovery;
        cluster_role role; /* spec.role */
        consistency_spec consistency;
        repair_spec repair;
        bootstrap_mode bootstrap_mode; /* spec.bootstrap.mode */
        hosts_spec hosts;
        adopt_spec adopt; /* spec.adopt */
        /*
         * spec.dependsOn (native dialect): clusters of the same source this
         * one's changes wait for, as written ("name" or "namespace/name";
         * the namespace defaults to the cluster's own). intake/order.h
         * resolves them and gates on them.
         */
        char **depends_on;
        size_t n_depends_on;
        /* spec.rollout.soakSeconds: how long each upstream stays healthy first (default 60). */
        int soak_seconds;
        /*
         * spec.kubernetes.context: the kubeconfig context (the API server)
         * the Kubernetes target runs the cluster's members on; NULL: the
         * source's, else the configuration's (docs/kubernetes.md, "Several
         * API servers"). A name, never syntax: it is looked up in the
         * kubeconfig, and fixed once the cluster exists (api/transition.c).
         */
        char *kube_context;
        declared_snapshot *declared; /* one-off snapshots documents ask for (not spec) */
        size_t n_declared;
} etcd_cluster;

/*
 * The bump a restore of c makes when bumpRevision is not written: auto for
 * a kubernetes-control-plane cluster whose etcd version's restore tool can
 * bump (api/versions.h, version_has_restore_bump), else none (FIXED 0).
 */
revision_bump revision_bump_default(const etcd_cluster *c);

etcd_cluster *etcd_cluster_new(void);
void etcd_cluster_free(etcd_cluster *c);

/* The name of c's member with this ordinal, "<name>-<ordinal>" (render_member_name's rule). */
char *spec_member_name(const etcd_cluster *c, int ordinal);
DEFINE_TRIVIAL_CLEANUP_FUNC(etcd_cluster *, etcd_cluster_free);

/* Record / look up where a field was written. Lookups fall back to the document. */
void etcd_cluster_set_loc(etcd_cluster *c, const char *path, int line, int col);
void etcd_cluster_loc(const etcd_cluster *c, const char *path, int *ret_line, int *ret_col);

/* "namespace/name", newly allocated. */
char *etcd_cluster_id(const etcd_cluster *c);

/* An ordered set of clusters, as loaded from files or a Git tree. */
typedef struct cluster_set {
        etcd_cluster **items;
        size_t n;
        size_t alloc;
} cluster_set;

void cluster_set_add(cluster_set *s, etcd_cluster *c); /* takes ownership */
etcd_cluster *cluster_set_find(const cluster_set *s, const char *namespace_, const char *name);
void cluster_set_release(cluster_set *s);

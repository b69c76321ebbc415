/*
 * The registry of target kinds: every kind of target gitcd runs members
 * on, in one table (targets/registry.c), with what the rest of gitcd needs
 * of a kind before or without opening one: its name (--target, the
 * configuration's target:, policy.targets, the state store's record of
 * where a cluster runs, target_ops.name), a line for the help texts, what
 * it can do (TARGET_CAP_*: exactly the caps of every target it opens; the
 * conformance suite holds each kind to it), how to open one from the
 * settings the command line and the configuration give, which of those
 * settings are its own, and its optional operation tables: adoption
 * (target_adopt_ops, targets/target.h, which an opened target carries
 * too) and what `gitcd plan` can say of the kind without contacting
 * anything (target_plan_ops).
 *
 * Nothing outside targets/ names a kind: it looks the name up here and
 * asks the kind's capabilities and tables; what differs between kinds is
 * a capability or a table, never a comparison with a name.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "targets/target.h"

/*
 * The settings a target is opened with, as the command line and the
 * configuration file give them (strings borrowed). Each kind reads its
 * own and ignores the others.
 */
typedef struct target_settings {
        const char *state_dir; /* required: where the kind keeps its files */
        /* local: etcd binaries as <etcd_dir>/<version>/etcd; NULL: the default lookup */
        const char *etcd_dir;
        /* kubernetes */
        const char *kubeconfig;     /* NULL: in-cluster, else $KUBECONFIG or ~/.kube/config */
        const char *kube_context;   /* NULL: the kubeconfig's current one */
        const char *cluster_domain; /* NULL: cluster.local */
        const char *snapshot_image; /* NULL: TARGET_DEFAULT_SNAPSHOT_IMAGE */
        /* hosts */
        const char *ssh_key;                      /* NULL: the ssh-agent at $SSH_AUTH_SOCK */
        const char *ssh_passphrase_file;          /* of ssh_key */
        const char *known_hosts;                  /* NULL: ~/.ssh/known_hosts */
        int client_port, peer_port, metrics_port; /* 0: 2379, 2380, 2381 */
        bool preflight;                           /* hosts target: measure before placing */
        int64_t preflight_sync_p99_ms;            /* 0: 10 ms */
        int64_t preflight_clock_offset_ms;        /* 0: 500 ms */
        int64_t preflight_interval_ms;            /* 0: 10 minutes */
        /*
         * Where a warning for a person goes (TLS verification switched off
         * in a kubeconfig); NULL: log_warn().
         */
        void (*warn)(void *userdata, const char *message);
        void *warn_userdata;
} target_settings;

/*
 * What `gitcd plan` can say of a kind from the spec alone, without
 * contacting anything of the target's (cli/cmd-plan.c, plan/drift.c).
 * Each operation may be NULL: the kind has nothing of that to say.
 */
typedef struct target_plan_ops {
        /*
         * A kind that runs members on the machines of spec.hosts: what apply
         * writes and runs on machine i of c, one line each (the SSH login,
         * the data identity marker, the unit file or manifest, the commands,
         * each saying when it goes through `sudo -n`). NULL-terminated,
         * newly allocated (strv_free).
         */
        char **(*machine_effects)(const etcd_cluster *c, size_t i);
        /*
         * For a cluster gitcd has no records of: what apply reads on machine
         * i first and how it adopts a cluster already running there (or
         * refuses). Newly allocated.
         */
        char *(*machine_adoption)(const etcd_cluster *c, size_t i);
        /*
         * A kind that applies Kubernetes objects: exactly the objects it
         * applies for c, in the order it applies them, not yet fitted to
         * the server's API versions (what plan/drift.h compares with the
         * live ones). With t, a target of this kind (its state folder holds
         * the TLS material it issued), and members, the plan of the
         * recorded members: the shared objects with the PodDisruptionBudget
         * fitted to their voters, the TLS Secrets, each member's objects.
         * t NULL: the shared objects of steady (the steady plan) alone.
         * 0, or -errno with target_last_error(t).
         */
        int (*kube_objects)(target *t, const etcd_cluster *c, const membership_plan *steady,
                            const membership_plan *members, json_t **ret);
} target_plan_ops;

/*
 * gitcd's own image of this version, as deploy/build-image names it: what
 * the Kubernetes target's receiver and writer Pods run by default.
 */
#define TARGET_DEFAULT_SNAPSHOT_IMAGE "gitcd:" GITCD_VERSION

typedef struct target_kind {
        const char *name;    /* "local", "kubernetes", "hosts" */
        const char *summary; /* for --target's help: "etcd processes on this host" */
        unsigned caps;       /* TARGET_CAP_*: the caps of every target it opens */
        /*
         * Open a target of this kind with s. 0, or -errno with *ret_error a
         * sentence for a person (newly allocated; no secret in it).
         */
        int (*open)(const target_settings *s, target **ret, char **ret_error);
        /*
         * Whether s gives a setting that is this kind's own (a kind no
         * source uses refuses them: its settings would be ignored); NULL:
         * the kind has none. options names them as command-line options,
         * for that refusal.
         */
        bool (*settings_given)(const target_settings *s);
        const char *options;
        /*
         * A kind with TARGET_CAP_KUBE_CONTEXTS: whether the kubeconfig of s
         * has context (for the intake, intake_kube.check). 0, or -errno with
         * *ret_error what it has instead (newly allocated). Contacts nothing.
         */
        int (*check_context)(const target_settings *s, const char *context, char **ret_error);
        /* Adoption of a running cluster (what its targets' ops.adopt are); NULL: none. */
        const target_adopt_ops *adopt;
        /* What gitcd plan says of the kind; NULL: nothing of its own. */
        const target_plan_ops *plan;
} target_kind;

/* Every kind, the default first. */
#define TARGET_KIND_COUNT 3
extern const target_kind target_kinds[TARGET_KIND_COUNT];

/* The kind named name, or NULL when there is none (name may be NULL). */
const target_kind *target_kind_find(const char *name);
/* The kind used when none is named: local. */
const target_kind *target_kind_default(void);
/* The kind named name, the default when name is NULL; NULL for an unknown name. */
const target_kind *target_kind_or_default(const char *name);
/* Its position in target_kinds[]. */
size_t target_kind_index(const target_kind *k);

/*
 * The names of every kind, for messages and help texts: "local, kubernetes,
 * hosts" with sep ", " and last ", "; "local, kubernetes or hosts" with last
 * " or ". Newly allocated.
 */
char *target_kind_names(const char *sep, const char *last);

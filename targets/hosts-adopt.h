/*
 * Adoption on the hosts target, the pure half: reading the etcd a machine
 * already runs (kubeadm's static Pod manifest, the systemd unit
 * etcd.service with its environment files, or a file gitcd wrote before
 * its state store was lost) and deciding, from the spec, what each
 * machine runs and etcd's member list, whether gitcd may take the cluster
 * over, and what it does on each machine. No I/O: the effects are in
 * reconciler/adopt.c, the SSH reads in targets/hosts-adopt-machine.c.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/model.h"
#include "etcd/client.h"
#include "targets/target.h"
#include "util/diag.h"

/* kubeadm's stacked etcd: <manifestDir>/etcd.yaml; systemd: <unitDir>/etcd.service. */
#define HOSTS_KUBEADM_MANIFEST "etcd.yaml"
#define HOSTS_FOREIGN_UNIT     "etcd.service"

/* The etcd one machine runs, from its manifest or unit. */
typedef struct hosts_running {
        char *file;      /* the manifest's or unit's path on the machine */
        bool gitcd_file; /* the file is gitcd's own member file (etcd-<ns>-<name>.yaml/.service) */
        char *config_hash; /* gitcd's config hash header of that file, else NULL */
        char *name;        /* --name */
        char *data_dir;    /* --data-dir */
        char *initial_cluster;
        char *advertise_client_urls; /* --advertise-client-urls (comma separated) */
        char *initial_advertise_peer_urls;
        char *trusted_ca_file;      /* --trusted-ca-file: the CA clients are checked against */
        char *peer_trusted_ca_file; /* --peer-trusted-ca-file */
        char *cert_file;            /* --cert-file */
        char *peer_cert_file;       /* --peer-cert-file */
        bool tls;                   /* any TLS flag: certificate, trusted CA or client-cert-auth */
} hosts_running;

void hosts_running_release(hosts_running *r);

/*
 * Read a Pod manifest (YAML or JSON; what kubelet reads) into r: the
 * container named "etcd" (else the only container), its command and args
 * as etcd flags (`--k=v` or `--k v`). origin names the file in
 * diagnostics. -EINVAL with diagnostics for anything that is not such a
 * Pod, or without --name or --data-dir.
 */
int hosts_running_parse_manifest(const char *origin, const char *text, size_t len, hosts_running *r,
                                 diag_list *diags);

/*
 * What etcd makes of its arguments (after argv[0]) and environment (env:
 * "NAME=VALUE" entries, the last one of a name wins): the flags of
 * hosts_running, each from the command line (Go's flag syntax: -k, --k,
 * --k=v, --k v) or else from ETCD_<FLAG>, as etcd reads them. name is
 * default_name when neither sets it (etcd's own default is "default"; NULL
 * to refuse). -EINVAL with the reason in *ret_why, r untouched, without
 * --name or --data-dir, or with --config-file (etcd then ignores the
 * rest). r->file is left for the caller.
 */
int hosts_running_from_flags(char *const *args, size_t n_args, char *const *env, size_t n_env,
                             const char *default_name, hosts_running *r, char **ret_why);

/* A systemd unit, as far as adoption reads it (targets/hosts-unit.c). */
typedef struct hosts_unit {
        char **exec; /* ExecStart='s words, unquoted, variables not yet replaced */
        size_t n_exec;
        bool exec_argv0;    /* the `@` prefix: exec[0] is the program, exec[1] its argv[0] */
        bool exec_expand;   /* no `:` prefix: $VAR and ${VAR} are replaced */
        char **environment; /* Environment= assignments "NAME=VALUE", in order */
        size_t n_environment;
        char **env_files;        /* EnvironmentFile= paths, in order */
        bool *env_file_optional; /* its `-` prefix: a missing file is no error */
        size_t n_env_files;
        char *user; /* User=, or NULL (root) */
} hosts_unit;

/* What the specifiers of a unit (%n, %p, %H, ...) stand for. */
typedef struct hosts_unit_context {
        const char *unit_name; /* "etcd.service" */
        const char *hostname;  /* the machine's host name (%H); NULL: unknown */
} hosts_unit_context;

void hosts_unit_release(hosts_unit *u);

/* The two comment lines that open gitcd's unit files and manifests. */
#define HOSTS_MEMBER_PREFIX "# gitcd-member: "
#define HOSTS_HASH_PREFIX   "# gitcd-config-hash: "

/*
 * One word of a unit's ExecStart= as systemd reads it back exactly
 * (systemd.service(5) "Command lines", systemd.syntax(7)): in double
 * quotes, with '\\', '"' and '\'' escaped by a backslash (systemd unescapes
 * C-style inside quotes), '%' doubled (specifiers are replaced inside
 * quotes too) and '$' doubled (so are variables, when the command runs).
 * NULL when word holds a control character (a byte below 0x20, or 0x7f):
 * no escape of one is written, the value is refused. Newly allocated.
 */
char *hosts_unit_word(const char *word);

/* What gitcd's own unit for a member says besides its command. */
typedef struct hosts_unit_meta {
        const char *member;      /* the member: the HOSTS_MEMBER_PREFIX line, Description= */
        const char *config_hash; /* the HOSTS_HASH_PREFIX line; NULL: empty */
        const char *cluster;     /* "namespace/name", in Description= */
} hosts_unit_meta;

/*
 * gitcd's own systemd unit running argv (argv[0] an absolute path without
 * quotes, '\\' or '$', which systemd would refuse or not replace there): the
 * two comment lines, [Unit] with Description= ('%' doubled there, as
 * everywhere systemd replaces specifiers), [Service] with Type=notify,
 * ExecStart= of hosts_unit_word() words, the restart policy, and
 * [Install]. 0 with the text in *ret_text; -EINVAL, with a newly allocated
 * reason in *ret_why and nothing in *ret_text, when a value holds a control
 * character or argv[0] is not such a path: nothing a spec wrote can
 * add a line to the unit.
 */
int hosts_unit_render(const hosts_unit_meta *m, char *const *argv, char **ret_text, char **ret_why);

/*
 * The command a unit runs, as systemd builds it when it starts the unit:
 * ExecStart='s words (argv[0] first, or, with '@', the name it gives
 * the program) with the variables of env ("NAME=VALUE" entries, the last
 * one of a name wins) replaced, "$$" turned into '$'; no variable is
 * replaced after the ':' prefix. 0 with a NULL-terminated list in *ret
 * (strv_free it); -EINVAL with a newly allocated reason in *ret_why beyond
 * the limits or for an unclosed "${".
 */
int hosts_unit_command(const hosts_unit *u, char *const *env, size_t n_env, char ***ret,
                       char **ret_why);

/*
 * Read a unit file's [Service] section: ExecStart=, Environment=,
 * EnvironmentFile= and User=, with systemd's quoting, continuation lines
 * and specifiers. -EINVAL with diagnostics (origin:line) for text that is
 * not such a unit (no ExecStart=, more than one, an unclosed quote, an
 * unknown specifier, the limits), ret untouched.
 */
int hosts_unit_parse(const char *origin, const char *text, size_t len,
                     const hosts_unit_context *ctx, hosts_unit *ret, diag_list *diags);

/*
 * Append the assignments of an environment file (EnvironmentFile=, as
 * systemd reads it: NAME=VALUE lines, `#` and `;` comments, an optional
 * `export`, single and double quotes, backslash continuations) to *env as
 * "NAME=VALUE" (NULL-terminated, *n_env counted). Lines that assign no
 * valid name are skipped, as systemd skips them. -EINVAL with diagnostics
 * for an unclosed quote or the limits.
 */
int hosts_env_file_parse(const char *origin, const char *text, size_t len, char ***env,
                         size_t *n_env, diag_list *diags);

/*
 * The etcd unit u starts: its ExecStart= with the variables replaced from
 * Environment= and then file_env (the environment files' assignments, in
 * the order the unit names them: they win over Environment=), read as
 * hosts_running_from_flags() does with that environment. r->file is
 * origin. -EINVAL with a diagnostic otherwise.
 */
int hosts_running_from_unit(const char *origin, const hosts_unit *u, char *const *file_env,
                            size_t n_file_env, hosts_running *r, diag_list *diags);

/*
 * The TLS half of the decision, which comes first: adoption has to read
 * etcd's member list over TLS, with a client certificate from the
 * running cluster's CA, before hosts_adopt_decide() can rule. Returns 0
 * when no machine runs etcd with TLS and the spec asks for none, 1 when
 * every running member uses TLS on both surfaces, the spec says
 * tls.provider auto with client and peer TLS and the CA may be imported
 * (every --trusted-ca-file and --peer-trusted-ca-file set, https URLs),
 * and -EPERM with what to change in *ret_why otherwise (the names
 * hosts_adopt_ordinals() refuses, TLS on one side only, plain http URLs
 * beside TLS flags, a missing CA flag, a spec with TLS for a cluster
 * without).
 */
int hosts_adopt_check_tls(const etcd_cluster *c, hosts_running *const *running, char **ret_why);

/*
 * Where the key of r's CA lies on its machine: kubeadm keeps ca.key
 * beside ca.crt, so --trusted-ca-file with ".crt" changed to ".key".
 * NULL when that file name does not end in ".crt". Newly allocated.
 */
char *hosts_running_ca_key_file(const hosts_running *r);

/* The ordinal of a member named "<cluster>-<ordinal>" (gitcd's names), or -1. */
int hosts_adopt_ordinal(const char *cluster, const char *member);

/*
 * The ordinal, and so gitcd's name "<cluster>-<ordinal>", adoption gives
 * the member each machine runs, in ret_ordinals[i] (-1 where running[i]
 * is NULL; c->hosts.n entries): n for a member already named
 * "<cluster>-<n>" (a cluster gitcd created, or renamed by hand: the name
 * is kept), else i, the machine's position in spec.hosts (kubeadm names
 * each member after its node: that name is replaced by gitcd's when the
 * member restarts on gitcd's manifest, and etcd keeps its ID and data).
 * -EPERM with the reason in *ret_why, ret_ordinals untouched, when two
 * machines would hold one name.
 */
int hosts_adopt_ordinals(const etcd_cluster *c, hosts_running *const *running, int *ret_ordinals,
                         char **ret_why);

/*
 * Decide adoption. running[i] is what machine i runs (NULL: nothing);
 * list is etcd's member list read through one of the advertised client
 * URLs (NULL when none answered), healthy whether every member answered
 * /health. Returns 0 when no machine runs etcd (bootstrap as usual), 1
 * with *plan filled when the cluster can be adopted, -EPERM with the
 * reason in *ret_why when it must be refused (nothing is changed then).
 * Each machine's member is the one etcd lists at that machine's peer URL
 * (its advertise address and peer_port, https:// with TLS), whatever its
 * name, and it must be the member the machine's manifest names.
 * Refused: whatever hosts_adopt_check_tls() refuses, a member count that
 * is not spec.replicas or not one member per running machine, a machine
 * whose member etcd does not list at its peer URL (or lists under another
 * name), one member on two machines, learners, a member list that cannot
 * be read or a member that is not healthy, and a running data directory
 * that is not the spec's dataDir.
 */
int hosts_adopt_decide(const etcd_cluster *c, int peer_port, hosts_running *const *running,
                       const etcd_members *list, bool healthy, adopt_plan *plan, char **ret_why);

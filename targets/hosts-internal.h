/*
 * What the files of the hosts target share and nothing else does: the
 * target's state (hosts_target), a probe's view of a machine, and the calls
 * one concern makes into another. hosts.c is the member lifecycle (probe,
 * place, ensure, stop, remove, list); hosts-commands.c the machine's shell
 * commands over SSH; hosts-files.c what gitcd writes and reads on a machine
 * (units, manifests, markers, restored data); hosts-health.c member_status
 * and the health probe; hosts-adopt-machine.c the reads and writes of an
 * adoption; hosts-tls.c tls.provider auto on the machines.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "targets/hosts-adopt.h"
#include "targets/hosts.h"
#include "targets/ssh.h"
#include "util/xalloc.h"

#define HASH_PREFIX HOSTS_HASH_PREFIX
#define NAME_PREFIX HOSTS_MEMBER_PREFIX

typedef struct hosts_target {
        target base; /* first: target * converts to hosts_target * */
        hosts_target_opts o;
        char *systemctl;
        char *state_dir; /* o.state_dir, owned */
        ssh_pool *pool;
        /*
         * A copy of each cluster an operation was called with:
         * list_members gets only the cluster's name and needs its machines.
         */
        etcd_cluster **seen;
        size_t n_seen, alloc_seen;
        /* This pass's probes (see probe()); cleared by tick. */
        struct probe_cache *cache;
        size_t n_cache, alloc_cache;
        /* Each machine's last preflight per cluster (hosts-machines.c). */
        struct preflight_entry **preflights;
        size_t n_preflights, alloc_preflights;
} hosts_target;

typedef struct preflight_entry preflight_entry;

/* What one probe of a machine found for a cluster. */
typedef struct machine_view {
        int error;            /* 0, or why the machine could not be probed */
        char *claimed_by;     /* the member named by the marker, NULL without marker */
        char *identity;       /* the marker's id: the member's data identity */
        bool has_data;        /* <dataDir>/member exists (etcd wrote its data) */
        char *file_member;    /* the member named by the unit file or manifest, NULL without */
        char *file_hash;      /* the config hash written in it */
        int64_t file_age_s;   /* seconds since the file was written, by the machine's clock */
        int64_t file_mtime_s; /* when it was written (the machine's clock, Unix seconds) */
        bool foreign_file;    /* kubeadm's etcd.yaml is in the manifest folder, or
                                 systemd says the unit etcd.service is active */
} machine_view;

/* One probe's answer, kept for the rest of the pass. */
typedef struct probe_cache {
        char *machine; /* "address:port" */
        char *command; /* the probe command: names the cluster's paths */
        char *out;     /* what it printed */
} probe_cache;

/* hosts.c */
void ht_remember(hosts_target *ht, const etcd_cluster *c);
void ht_view_release(machine_view *v);
char *ht_member_file(const etcd_cluster *c, const host_spec *h);
char *ht_line_value(const char *text, const char *prefix);
int ht_probe(hosts_target *ht, const etcd_cluster *c, const host_spec *h, machine_view *v);
/*
 * Probe every machine of c side by side (ht_each) when more than one has
 * no probe cached yet, so that the loops that probe them one by one after
 * it find the answers kept; a machine that does not answer is left to
 * them (asked again, its error theirs to report).
 */
void ht_probe_all(hosts_target *ht, const etcd_cluster *c);
int ht_machine_of_url(const etcd_cluster *c, const char *url);
int ht_locate(hosts_target *ht, const etcd_cluster *c, const char *name, int *ret_idx,
              machine_view *ret_view);
int ht_check_machines(hosts_target *ht, const etcd_cluster *c);
int ht_member_machine(hosts_target *ht, const etcd_cluster *c, const member_plan *mp,
                      const host_spec **ret_h, machine_view *ret_view);

/* hosts-commands.c */
int ht_command_failed(hosts_target *ht, const host_spec *h, const char *cmd, int status,
                      const char *err);
void ht_forget_probes(hosts_target *ht, const host_spec *h);
int ht_run_input(hosts_target *ht, const host_spec *h, const char *cmd, const void *in,
                 size_t in_len, char **ret_out);
int ht_exec_cmd(hosts_target *ht, const host_spec *h, const char *cmd, const void *in,
                size_t in_len, char **ret_out);
int ht_upload(hosts_target *ht, const host_spec *h, const char *path, const void *data, size_t len,
              mode_t mode);

/* hosts-parallel.c */
/*
 * fn(ht, arg, i) for each i in [0, n): with side_by_side, each on a
 * thread of its own at once, else one after another on the calling thread;
 * returns when every one has. Each runs as the calling operation would:
 * the wrapper's shared lock held except around its SSH steps (ssh_step),
 * so fn uses the target as any operation does; the calling operation's
 * cluster lock stays held throughout. Machines differ per i (the pool
 * lends a connection to one thread at a time: two on one machine would
 * wait for each other). Each fn keeps its own result and message: the
 * target's message is the last one set.
 */
void ht_each(hosts_target *ht, size_t n, bool side_by_side,
             void (*fn)(hosts_target *ht, void *arg, size_t i), void *arg);

/* hosts-files.c */
/* Write a new data identity marker for member name on h; its text in *ret_text (may be NULL). */
int ht_write_marker(hosts_target *ht, const host_spec *h, const char *name, char **ret_text);
int ht_unit_text(const etcd_cluster *c, const member_plan *mp, char *const *argv, char **ret_text,
                 char **ret_why);
int ht_manifest_text(const etcd_cluster *c, const member_plan *mp, char *const *argv,
                     char **ret_text, char **ret_why);
int hosts_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                         const target_restore *rs);
int hosts_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                        int64_t *ret_revision);

/* hosts-machines.c */
bool ht_preflight_refuses(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                          char **refused);
void ht_preflight_placed(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                         const char *member);
int ht_preflight_wait(hosts_target *ht, const char *member, const char *refused,
                      const char *why_not);
void ht_preflights_free(hosts_target *ht);
extern const target_machine_ops hosts_machine_ops;

/* hosts-debug.c */
extern const target_debug_ops hosts_debug_ops;

/* hosts-health.c */
int hosts_member_status(target *t, const etcd_cluster *c, const char *member,
                        target_member_status *ret_status);

/* hosts-adopt-machine.c */
int ht_wait_stopped(hosts_target *ht, const host_spec *h, const char *member, bool foreign);
int ht_retire_kubeadm(hosts_target *ht, const host_spec *h);
int ht_retire_foreign_unit(hosts_target *ht, const host_spec *h, const char *member);
char *ht_foreign_file(const host_spec *h);
char *ht_foreign_active_test(hosts_target *ht, const host_spec *h, const char *quoted);

/* hosts-tls.c */
int ht_tls_home(hosts_target *ht, const etcd_cluster *c, char **ret);
int ht_tls_issue(hosts_target *ht, const etcd_cluster *c, const membership_plan *p,
                 const char *only, bool renew, int64_t now_ms);
int ht_tls_upload(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                  const member_plan *mp);
int ht_tls_client_files(hosts_target *ht, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                        char **ret_key);
int hosts_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                     char **ret_key);
int hosts_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                           target_cert **ret_certs, size_t *ret_n);
int hosts_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p, const char *member,
                    int64_t now_ms);

static inline hosts_target *HT(target *t)
{
        return (hosts_target *)t;
}

static inline char *marker_path(const host_spec *h)
{
        return xasprintf("%s/" TARGET_DATA_MARKER, h->data_dir);
}

static inline char *unit_name(const etcd_cluster *c)
{
        return xasprintf("etcd-%s-%s.service", c->namespace_, c->name);
}

static inline char *machine_key(const host_spec *h)
{
        return xasprintf("%s:%d", h->address, h->ssh_port);
}

static inline int run(hosts_target *ht, const host_spec *h, const char *cmd, char **ret_out)
{
        return ht_run_input(ht, h, cmd, NULL, 0, ret_out);
}

/* ---- TLS (tls.provider auto) --------------------------------------------- */

static inline bool auto_tls(const etcd_cluster *c)
{
        return c->tls.provider == TLS_PROVIDER_AUTO && (render_client_tls(c) || render_peer_tls(c));
}

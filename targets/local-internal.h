/*
 * What the files of the local target share and nothing else does: the
 * target's state (local_target), a member as the target keeps it
 * (local_member), and the calls one concern makes into another. local.c is
 * the member table and lifecycle; local-process.c the etcd processes (start,
 * stop, exits, restarts, pidfd events); local-files.c a member's folder
 * (member.json, the data identity marker, restored data); local-ports.c the
 * ports a member listens on; local-health.c member_status and the health
 * probe. Where tls.provider auto leaves go is local-tls.c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "targets/local.h"
#include "util/macro.h"
#include "util/strmap.h"
#include "util/xalloc.h"

#define MAX_EXITS_KEPT  8
#define MEMBER_JSON_MAX (1024 * 1024)

typedef struct local_member {
        char *ns;
        char *cluster;
        char *name;
        char *dir; /* <state>/clusters/<ns>/<cluster>/<name> */

        /* Persisted in member.json. */
        int client_port;
        int peer_port;
        int metrics_port;
        char *client_url; /* advertised, for health checks */
        char *tls_dir;
        char **command;    /* last started; argv[0] is the binary */
        char *config_hash; /* the plan's config hash it was last started with, or NULL */
        char *version;
        int64_t created_ms;
        int restarts;
        int64_t exits[MAX_EXITS_KEPT]; /* wall ms of recent unexpected exits, oldest first */
        size_t n_exits;
        char *last_exit;

        /* Runtime. */
        /* Stopped by stop_member, or found without a process after a gitcd restart: tick()
         * restarts only what ensure_member started. Whether it should run is state/'s. */
        bool stopped;
        pid_t pid;
        int pidfd;
        int64_t started_mono;
        int64_t ready_mono; /* first seen ready in this run; 0 unknown */
        bool crashed;       /* exited on its own; a restart is pending */
        bool stopping;      /* stop_process waits for its exit outside the shared lock */
        int64_t restart_at_mono;
        int backoff_ms; /* next delay; 0: the base */
        bool have_state;
        member_runtime_state last_state;
        int64_t state_since_mono;
} local_member;

typedef struct etcd_binary {
        char *version;
        char *path;
} etcd_binary;

typedef struct local_target {
        target base;
        char *state_dir;
        char *etcd_dir;
        int health_timeout_ms;
        int backoff_base_ms;
        int backoff_max_ms;
        int stop_timeout_ms;
        local_member **members;
        size_t n_members;
        size_t alloc_members;
        strmap member_index; /* "ns/cluster/name" → its index in members */
        etcd_binary *binaries;
        size_t n_binaries;
        size_t alloc_binaries;
        target_event_set events; /* clusters with a member event not taken yet (take_events) */
        int wake_fd;             /* eventfd: a member started, wait_event looks again; -1 without */
        /*
         * epoll set of every running member's pidfd (not while it is being
         * stopped: its stop reaps it) and wake_fd, so that a tick or a wait
         * for events learns of exits in one call whatever the number of
         * members.
         */
        int epoll_fd;
} local_target;

/* local.c */
void local_member_free(local_member *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(local_member *, local_member_free);
local_member *local_member_new(local_target *lt, const char *ns, const char *cluster,
                               const char *name);
local_member *lt_find_loaded(local_target *lt, const char *ns, const char *cluster,
                             const char *name);
int lt_get_member(local_target *lt, const char *ns, const char *cluster, const char *name,
                  local_member **ret);
int lt_get_or_create_member(local_target *lt, const etcd_cluster *c, const char *name,
                            local_member **ret);

/* local-process.c */
int lt_count_recent_exits(const local_member *m);
void lt_poll_exit(local_target *lt, local_member *m);
/* Add m's pidfd to (watch true) or take it out of the target's epoll set. */
void lt_watch_exit(local_target *lt, local_member *m, bool watch);
void lt_adopt(local_target *lt, local_member *m);
int lt_resolve_etcd(local_target *lt, const char *version, const char **ret_path);
int lt_start_member(local_target *lt, local_member *m);
int lt_stop_process(local_target *lt, local_member *m);
int local_tick(target *t);
int local_wait_event(target *t, int timeout_ms);
int local_take_events(target *t, char ***ret_clusters, size_t *ret_n);

/* local-files.c */
int lt_member_save(local_member *m);
int lt_member_load(local_target *lt, const char *ns, const char *cluster, const char *name,
                   local_member **ret);
bool lt_member_has_data(const local_member *m);
char *lt_data_identity(const local_member *m);
int lt_write_marker(local_target *lt, const local_member *m);
int lt_list_subdirs(const char *path, char ***ret, size_t *ret_n);
void lt_for_each_member_dir(local_target *lt,
                            void (*fn)(local_target *lt, const char *ns, const char *cluster,
                                       const char *member, void *userdata),
                            void *userdata);
int local_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                         const target_restore *rs);
int local_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                        int64_t *ret_revision);

/* local-ports.c */
int lt_allocate_ports(local_target *lt, local_member *m);

/* local-health.c */
int local_member_status(target *t, const etcd_cluster *c, const char *member,
                        target_member_status *ret_status);

static inline local_target *LT(target *t)
{
        return (local_target *)t;
}

static inline char *cluster_dir(local_target *lt, const char *ns, const char *cluster)
{
        return xasprintf("%s/clusters/%s/%s", lt->state_dir, ns, cluster);
}

static inline char *member_file(const local_member *m, const char *file)
{
        return xasprintf("%s/%s", m->dir, file);
}

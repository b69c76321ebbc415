/*
 * A gitcd world for the benchmarks that drive real etcd through the
 * reconciler in-process: a temporary state folder, its state store, the
 * local target, a plain-directory source of specs and the driver over
 * them, stepped the way `gitcd run` steps it. Everything it made is
 * removed by bench_world_close(), and on SIGINT/SIGTERM.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reconciler/driver.h"
#include "targets/target.h"

typedef struct bench_world {
        char root[64]; /* the temporary state folder */
        char *src_dir; /* specs: <src_dir>/<name>.yaml */
        state_db *db;
        target *tgt; /* the local target */
        source *src;
        driver *d;
} bench_world;

/* Make the world under /tmp/<prefix>-XXXXXX; exits the program on failure. */
void bench_world_open(bench_world *w, const char *prefix);
/* Remove every cluster's members and the folder. */
void bench_world_close(bench_world *w);

/* Write (or replace) <name>.yaml with an EtcdCluster of that name; body is its spec's lines. */
void bench_world_write_spec(bench_world *w, const char *name, const char *body);
void bench_world_remove_spec(bench_world *w, const char *name);
/* Remove a cluster's members from the target (its spec should be gone first). */
void bench_world_remove_cluster(bench_world *w, const char *name);

/* One step of the daemon's loop, waiting at most 200 ms; false once nothing is waiting. */
bool bench_world_step(bench_world *w);
/* Sync the specs and step until converged: elapsed ms, or -1 after timeout_ms or a failure. */
int64_t bench_world_converge(bench_world *w, int64_t timeout_ms);

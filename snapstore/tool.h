/*
 * etcd's own tools for snapshot files, on gitcd's host: finding the tool
 * (etcdutl, etcdctl for 3.4) and the etcd binary of a version, and what
 * `snapshot status` says about a file. Restores and drills run the tool of
 * the cluster's version; a saved snapshot is checked in-process instead
 * (snapstore/bbolt.h computes the same figures), and gitcd never writes
 * etcd's database format.
 */
#pragma once

#include <stdint.h>

/*
 * Where etcd binaries are found by version when no folder is given (the
 * local target's --etcd-dir default, and the tools here): $GITCD_ETCD_DIR,
 * else ~/.cache/gitcd/etcd (the home folder of $HOME, else of the user).
 */
char *etcd_default_dir(void);

/*
 * The etcd tool that reads snapshot files for an etcd version: etcdutl from
 * 3.5 on, etcdctl before, looked up as the local target looks up etcd:
 * <etcd_dir>/<version>/, then $GITCD_ETCD_DIR/<version>/, then
 * ~/.cache/gitcd/etcd/<version>/, then PATH when its version matches.
 * -ENOENT when not found.
 */
int snapshot_etcd_tool(const char *etcd_dir, const char *version, char **ret_path);

/*
 * etcd's own binary for a version, looked up as snapshot_etcd_tool() looks
 * up the tool (`etcd --version` must name the version for one on PATH);
 * an absolute path. What a restore drill runs (snapshots/drill.h).
 */
int snapshot_etcd_binary(const char *etcd_dir, const char *version, char **ret_path);

/* What `etcdutl snapshot status` says about a snapshot file (or bbolt_check() computes). */
typedef struct snapshot_status {
        uint32_t hash;
        int64_t revision;
        int64_t total_keys;
        int64_t total_size;
} snapshot_status;

/*
 * Run the tool's `snapshot status` on an uncompressed snapshot file.
 * -EBADMSG with *ret_error when etcd's tool refuses the file.
 */
int snapshot_file_status(const char *tool, const char *path, snapshot_status *ret,
                         char **ret_error);

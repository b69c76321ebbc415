/*
 * End-to-end test helpers: drive the real `gitcd` binary (GITCD_BIN) the
 * way a user does — EtcdCluster files in a source folder, `gitcd apply`,
 * `gitcd status -o json` — against real etcd processes on the local
 * target, and check the result through gitcd's own etcd client.
 *
 * Every etcd process gitcd starts is found through the pid files under the
 * test's state folder and killed at teardown (and at exit, even when a test
 * fails), so no member outlives the test.
 */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "etcd/client.h"
#include "util/macro.h"
#include "tests/harness/writer.h"

typedef struct e2e {
        char *root;      /* temporary folder */
        char *source;    /* root/source: the EtcdCluster files */
        char *state_dir; /* root/state: GITCD_STATE_DIR */
        const char *bin; /* gitcd */
        char *config;    /* root/gitcd.yaml once e2e_set_policy() wrote it; NULL: none */
} e2e;

e2e *e2e_new(void);
/* Kill every member process, remove the folders. */
void e2e_free(e2e *e);

/*
 * The operator's policy of this test: write root/gitcd.yaml holding
 * `policy: {<fmt...>}` (keys in YAML's flow style: "localSnapshotRoots:
 * [/x]") and give it with --config to every later apply, plan and run these
 * helpers start (e2e_apply, e2e_run*, e2e_start*) that names no --config of
 * its own. Without it they give none (gitcd then reads /etc/gitcd/gitcd.yaml
 * where it exists, else takes its built-in policy).
 */
void e2e_set_policy(e2e *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write source/<file> with a native EtcdCluster named `name` in namespace default. */
void e2e_write_cluster(e2e *e, const char *file, const char *name, int replicas,
                       const char *version);
/* Write source/<file> with the given text. */
void e2e_write_file(e2e *e, const char *file, const char *text);

/*
 * Run `gitcd apply --source <source> --timeout <timeout_s>s` with
 * GITCD_STATE_DIR set and, when failpoint is not NULL, GITCD_FAILPOINT.
 * Returns the exit status, or 128+signal when it was killed.
 */
int e2e_apply(e2e *e, const char *failpoint, int timeout_s);
/* e2e_apply without a failpoint that must succeed: fails the test with `gitcd status` otherwise. */
void e2e_apply_ok(e2e *e, int timeout_s);
/*
 * Run gitcd with a NULL-terminated argument vector; stdout and stderr are
 * captured when ret_stdout / ret_stderr are not NULL. Returns the exit status.
 */
int e2e_runv(e2e *e, char **ret_stdout, char **ret_stderr, const char *const *args);
/* e2e_runv with GITCD_FAILPOINT set to failpoint (NULL: unset); 128+signal when killed. */
int e2e_runv_failpoint(e2e *e, const char *failpoint, char **ret_stdout, char **ret_stderr,
                       const char *const *args);
/* Run gitcd with arguments (NULL-terminated) and capture stdout; returns the exit status. */
int e2e_run(e2e *e, char **ret_stdout, const char *arg, ...) __attribute__((sentinel));

/*
 * Start `gitcd run --source <source> --interval 1s` plus extra_args
 * (NULL-terminated, may be NULL) in the background, its stderr in
 * <root>/daemon.log; tracked for teardown. Returns its pid.
 */
pid_t e2e_start_daemon(e2e *e, const char *const *extra_args);
/*
 * Start `gitcd args...` (NULL-terminated) in the background with
 * GITCD_STATE_DIR set, stdout and stderr in <root>/<log_name>; tracked for
 * teardown. Returns its pid; e2e_wait_exit() reaps it.
 */
pid_t e2e_start(e2e *e, const char *const *args, const char *log_name);
/* Wait for a process from e2e_start(); its exit status, or 128+signal. */
int e2e_wait_exit(pid_t pid);
/* The text of <root>/<log_name> (newly allocated, "" when missing). */
char *e2e_read_log(e2e *e, const char *log_name);
/* What the shell command fmt printed on stdout; a non-zero exit status fails the test. */
char *e2e_sh(const char *fmt, ...) _printf_(1, 2);
/* The pid written in the state folder's lock file (apply and run hold it), 0 when none. */
pid_t e2e_lock_pid(e2e *e);
/* Poll `gitcd status` until default/<name> is Running with n ready members; false on timeout. */
bool e2e_wait_ready(e2e *e, const char *name, int n, int timeout_s);
/* `gitcd status -o json default/<name>`, parsed. */
json_t *e2e_status(e2e *e, const char *name);
/* Comma-separated client URLs of the cluster's members, from status. */
char *e2e_endpoints(e2e *e, const char *name);
/* A client for the cluster (endpoints from status). */
etcd_client *e2e_client(e2e *e, const char *name);
/* The member list through the client; asserts it is readable. */
etcd_members *e2e_members(e2e *e, const char *name);
/* Count of actions in the audit log (gitcd log -o json --action A). */
int e2e_audit_count(e2e *e, const char *name, const char *action);
/* The pid of a member's etcd process (from its pid file), 0 when none. */
pid_t e2e_member_pid(e2e *e, const char *name, const char *member);
/* The member folder: <state>/clusters/default/<name>/<member>. */
char *e2e_member_dir(e2e *e, const char *name, const char *member);
/* Kill every etcd process started under this test's state folder. */
void e2e_kill_members(e2e *e);
/* Whether an etcd version's binaries are installed. */
bool e2e_have_version(const char *version);

/* TLS (tls.provider auto, local target); shared by the TLS end-to-end tests. */
/* The serial (upper-case hex) a member's client port presents, via openssl s_client; NULL: none. */
char *e2e_served_serial(const char *url, const char *ca);
typedef struct e2e_tls_files {
        char *ca, *crt, *key;
} e2e_tls_files;
/* A member's operator/ folder: gitcd's own client identity, renewed with the member. */
e2e_tls_files e2e_operator_files(e2e *e, const char *name, const char *member);
void e2e_tls_files_release(e2e_tls_files *f);
/* A client of every member's client URL with these files. */
etcd_client *e2e_tls_client(e2e *e, const char *name, const e2e_tls_files *f);
/*
 * Keys k/000000 ... k/<n-1> with values derived from their number, written
 * through endpoints by 8 clients at once (etcd commits concurrent puts together).
 */
void e2e_fill_keys(const char *endpoints, int n);
/*
 * Every key and value of e2e_fill_keys, read through each endpoint in turn:
 * a read on a follower is served from its own data, so a member that did
 * not get the keys (a member not restored from a snapshot) shows it.
 */
void e2e_check_keys(const char *endpoints, int n);
/* A put that may be retried once, after a short pause; false when both attempts failed. */
bool e2e_put_retry(etcd_client *c, const char *key, char **ret_error);

/*
 * The acknowledged-writes writer (tests/harness/writer.h) read back
 * through cluster name's recorded endpoints: w stopped, more than
 * min_acked puts acknowledged and every acknowledged key there in order.
 */
void e2e_writer_check(harness_writer *w, e2e *e, const char *name, int min_acked);
/* w stopped, every acknowledged key whose put revision is at most rev is in name's data: how many. */
int e2e_writer_kept(harness_writer *w, e2e *e, const char *name, int64_t rev);

/* Cluster name has n members in etcd, every one a voter; returns its cluster ID. */
uint64_t e2e_assert_voters(e2e *e, const char *name, size_t n);

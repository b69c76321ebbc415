/*
 * The hosts target's peer round-trip time, the pure half: the script one
 * member machine runs to time TCP connects to every other machine's etcd
 * peer address, and the reader of what it printed. Nothing here touches
 * the network or the clock: hosts-machines.c runs the script over the
 * target's SSH pool as part of a machine's preflight.
 *
 * The script needs only bash (5, for $EPOCHREALTIME) and coreutils'
 * timeout on the machine: each connect is bash's /dev/tcp inside the
 * shell (no process start-up inside the timed span), RTT_SAMPLES connects
 * per peer, each peer under `timeout RTT_PEER_TIMEOUT_S`, so a peer that
 * drops packets costs at most that. A connect that fails (nothing listens
 * yet, or the peer is unreachable) is counted as such, not timed.
 *
 * Bounds: at most RTT_MAX_PEERS peers; a machine's preflight spends at
 * most RTT_PEER_TIMEOUT_S seconds per peer.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define RTT_SAMPLES         5
#define RTT_PEER_TIMEOUT_S  3
#define RTT_MAX_PEERS       64
#define RTT_MAX_SAMPLES_PER 100 /* the reader refuses more samples of one peer */

/* One peer to time: a host name or IP address and its etcd peer port. */
typedef struct rtt_peer {
        const char *host;
        int port;
} rtt_peer;

typedef struct rtt_result {
        int64_t n_samples;  /* connects timed, over every peer */
        int64_t n_peers;    /* peers with at least one connect timed */
        int64_t n_failed;   /* peers no connect reached */
        int64_t slowest_us; /* the slowest peer's median connect time (0: none timed) */
        int64_t max_us;     /* the slowest connect of all */
        char *error;        /* the script's own complaint (no bash 5), or NULL */
} rtt_result;

/*
 * Whether host may reach the script: a host name or an IP address
 * (letters, digits, '.', '-', ':', 1 to 253 characters, not starting with
 * '-'). It is quoted anyway; this keeps a '/' out of /dev/tcp's path.
 */
int rtt_host_valid(const char *host);

/*
 * The script timing peers[0..n) for hosts_command(), or NULL (-EINVAL)
 * when a host is not valid, a port is out of 1..65535 or n is above
 * RTT_MAX_PEERS. connect: a command given the host and the port that
 * connects and returns (a test's wrapper); NULL: bash's /dev/tcp.
 */
char *rtt_script(const rtt_peer *peers, size_t n, const char *connect);

/*
 * Read what rtt_script printed. 0 and *ret filled, or -EINVAL with
 * *ret_why ("line N: ...") and *ret untouched.
 */
int rtt_parse(const char *out, size_t len, rtt_result *ret, char **ret_why);

void rtt_result_release(rtt_result *r);

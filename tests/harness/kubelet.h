/*
 * The kubelet's container log endpoint, for the node simulator
 * (tests/harness/nodesim.c): what kube-apiserver's pods/log subresource
 * proxies to. A real kubelet serves
 *
 *   GET /containerLogs/NAMESPACE/POD/CONTAINER?tailLines=N&limitBytes=N
 *
 * over https on its node's kubelet port; the apiserver dials the node's
 * address (the simulator registers InternalIP 127.0.0.1 and this port as
 * its kubeletEndpoint; the harness starts the apiserver with
 * --kubelet-preferred-address-types=InternalIP) and, with no
 * --kubelet-certificate-authority, does not verify the serving certificate.
 * This serves the simulator's log file of the Pod (LOGS_DIR/NS_POD.log)
 * with a self-signed certificate. For tests only.
 */
#pragma once

typedef struct kubelet_logs kubelet_logs;

/*
 * Serve logs_dir on 127.0.0.1, on a free port (in *ret_port). Call in the
 * process that keeps serving (libmicrohttpd's thread starts here). 0 or
 * negative errno, with a message on stderr.
 */
int kubelet_logs_start(const char *logs_dir, kubelet_logs **ret, int *ret_port);
void kubelet_logs_stop(kubelet_logs *k);

/*
 * What the endpoint answers for a log file's text: the last tail_lines
 * lines (< 0: all), then at most limit_bytes of them (< 0: no limit), as
 * the kubelet applies them. A new string.
 */
char *kubelet_logs_select(const char *text, long tail_lines, long limit_bytes);

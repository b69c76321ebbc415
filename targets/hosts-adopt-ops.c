/*
 * The adopt operations of the hosts target (target_adopt_ops,
 * targets/target.h): what the machines of spec.hosts already run, read
 * over SSH (hosts-adopt-machine.c: hosts_adopt_read, the CA import) and from etcd, and
 * the decision (hosts-adopt.c, pure) on whether gitcd may take it over.
 * The steps of an adoption (markers, records, members moved one at a time
 * onto gitcd's files) are the reconciler's (reconciler/adopt.c), which
 * asks only for these operations and never knows the target.
 *
 * Design: the survey reads everything first and decides once: every
 * machine's manifest or unit, then, when they run with TLS, the TLS half
 * of the decision and the import of the members' CA (the one write, on
 * gitcd's host: etcd's member list is read with a client certificate from
 * that CA), then etcd's member list and every member's health, then
 * hosts_adopt_decide(). Nothing is written on the machines before the
 * decision, so a refusal changes nothing there. The machines are read side
 * by side (ht_each): each read is one command, most of it the machine's
 * first SSH connection of the run.
 */
#include <errno.h>
#include <stdlib.h>

#include "etcd/client.h"
#include "targets/hosts-adopt.h"
#include "targets/hosts.h"
#include "targets/locked.h"
#include "util/strbuf.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

static void running_free_all(hosts_running **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (v[i]) {
                        hosts_running_release(v[i]);
                        free(v[i]);
                }
        free(v);
}

/*
 * etcd's member list through the running members' advertised client URLs,
 * with gitcd's client identity when the cluster has client TLS; NULL if
 * none answer. Waits on the network with the wrapper's shared lock let go.
 */
static etcd_members *member_list(target *t, const etcd_cluster *c, hosts_running *const *running,
                                 size_t n)
{
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < n; i++)
                if (running[i] && !isempty(running[i]->advertise_client_urls))
                        sb_printf(&eps, "%s%s", eps.len ? "," : "",
                                  running[i]->advertise_client_urls);
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        etcd_members *l = NULL;
        if (eps.len > 0 && target_client_tls(t, c, &ca, &cert, &key) >= 0) {
                etcd_client_opts o = {.endpoints = sb_str(&eps),
                                      .cacert = ca,
                                      .cert = cert,
                                      .key = key,
                                      .call_timeout_ms = 5000,
                                      .dial_timeout_ms = 2000};
                etcd_client *ec = NULL;
                target_blocking_begin();
                if (etcd_client_new(&o, &ec) >= 0 && etcd_member_list(ec, &l) < 0)
                        l = NULL;
                etcd_client_free(ec);
                target_blocking_end();
        }
        sb_release(&eps);
        return l;
}

/* What every machine runs, read side by side (ht_each); the answers of machine i in slot i. */
typedef struct survey_read {
        const etcd_cluster *c;
        hosts_running **running;
        int *result;
        char **why;     /* hosts_adopt_read's reason */
        char **message; /* the target's message of a failure */
} survey_read;

static void read_one(hosts_target *ht, void *arg, size_t i)
{
        survey_read *r = arg;
        r->result[i] = hosts_adopt_read(&ht->base, r->c, i, &r->running[i], &r->why[i]);
        if (r->result[i] < 0)
                r->message[i] = xstrdup(target_last_error(&ht->base));
}

/*
 * Every machine read at once (the first SSH connection to each is most of
 * a read); the result is the one of reading them in order: the first
 * machine that failed, with its own message and reason.
 */
static int read_machines(target *t, const etcd_cluster *c, hosts_running **running, char **ret_why)
{
        size_t n = c->hosts.n;
        _cleanup_free_ int *result = xcalloc(n + 1, sizeof(int));
        _cleanup_free_ char **why = xcalloc(n + 1, sizeof(char *));
        _cleanup_free_ char **message = xcalloc(n + 1, sizeof(char *));
        survey_read r = {
            .c = c, .running = running, .result = result, .why = why, .message = message};
        ht_each(HT(t), n, true, read_one, &r);
        int k = 0;
        for (size_t i = 0; i < n; i++) {
                if (k == 0 && result[i] < 0) {
                        k = result[i];
                        *ret_why = TAKE_PTR(why[i]);
                        (void)target_fail(t, k, "%s", message[i] ? message[i] : "");
                }
                free(why[i]);
                free(message[i]);
        }
        return k;
}

static int survey(target *t, const etcd_cluster *c, adopt_plan *ret, char **ret_why)
{
        *ret_why = NULL;
        if (!c->hosts.set)
                return 0;
        size_t n = c->hosts.n;
        hosts_running **running = xcalloc(n + 1, sizeof(*running));
        int k = read_machines(t, c, running, ret_why);
        /* TLS first: the member list is read with a certificate from the cluster's CA */
        if (k >= 0)
                k = hosts_adopt_check_tls(c, running, ret_why);
        if (k > 0)
                k = hosts_adopt_import_ca(t, c, running, ret_why);
        etcd_members *list = NULL;
        if (k >= 0) {
                bool healthy = false, any = false;
                for (size_t i = 0; i < n; i++)
                        any = any || running[i];
                if (any) {
                        list = member_list(t, c, running, n);
                        healthy = list != NULL;
                        for (size_t i = 0; list && i < list->n; i++) {
                                const etcd_member *em = &list->members[i];
                                healthy = healthy && em->n_client_urls > 0 &&
                                          hosts_member_healthy(t, c, em->client_urls[0]) == 1;
                        }
                }
                k = hosts_adopt_decide(c, hosts_target_peer_port(t), running, list, healthy, ret,
                                       ret_why);
        }
        running_free_all(running, n);
        etcd_members_free(list);
        return k;
}

static int claim(target *t, const etcd_cluster *c, const adopt_step *s, char **ret_identity)
{
        return hosts_adopt_claim(t, c, s->machine, s->member, ret_identity);
}

static int retire(target *t, const etcd_cluster *c, const adopt_step *s)
{
        return hosts_adopt_retire(t, c, s->machine, s->member);
}

const target_adopt_ops hosts_adopt_ops = {
    .survey = survey,
    .claim = claim,
    .retire = retire,
    .member_healthy = hosts_member_healthy,
};

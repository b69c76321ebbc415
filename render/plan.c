/*
 * Membership plans: who the members of a cluster are and how each one
 * starts (name, addresses, initial cluster, state, token, folders).
 *
 * The reconciler and the targets build plans for the cluster as it really
 * is (learners, replacements, local ports); render only reads them. The
 * one plan render builds itself is the steady state of a fresh cluster on
 * Kubernetes, used by `gitcd render`: replicas voters with ordinals
 * 0..replicas-1, the seed started "new" with only itself, each later member
 * "existing" with the members before it plus itself (the order a one-at-a-
 * time bootstrap adds them in). A paused cluster (replicas 0) keeps exactly
 * one dormant member, ordinal 0, whose volume holds the data; render
 * gives it a volume but no Pod.
 *
 * The cluster token is "<namespace>-<name>": stable across renders and
 * restarts, distinct between clusters that share a network.
 */
#include <string.h>

#include "render/render-internal.h"
#include "render/render.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

char *render_headless_service_name(const etcd_cluster *c)
{
        return xasprintf("%s-headless", c->name);
}

char *render_client_service_name(const etcd_cluster *c)
{
        return xstrdup(c->name);
}

char *render_member_name(const etcd_cluster *c, int ordinal)
{
        return spec_member_name(c, ordinal);
}

member_plan *membership_plan_add(membership_plan *p)
{
        p->members = xgrow(p->members, &p->alloc, p->n + 1, sizeof(member_plan));
        member_plan *m = &p->members[p->n++];
        memset(m, 0, sizeof(*m));
        return m;
}

void member_plan_release(member_plan *m)
{
        if (!m)
                return;
        free(m->name);
        free(m->peer_url);
        free(m->client_url);
        free(m->listen_peer_url);
        free(m->listen_client_url);
        free(m->listen_metrics_url);
        free(m->initial_cluster);
        free(m->initial_cluster_state);
        free(m->data_dir);
        free(m->tls_dir);
        free(m->tls_version);
        free(m->config_hash);
        free(m->data_identity);
        memset(m, 0, sizeof(*m));
}

char *membership_cluster_token(const etcd_cluster *c)
{
        return xasprintf("%s-%s", render_namespace(c), c->name);
}

membership_plan *membership_plan_new(const etcd_cluster *c)
{
        membership_plan *p = XNEW(membership_plan);
        p->cluster_token = membership_cluster_token(c);
        return p;
}

void membership_plan_free(membership_plan *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++)
                member_plan_release(&p->members[i]);
        free(p->members);
        free(p->cluster_token);
        free(p);
}

bool member_plan_listen_plain(member_plan *m)
{
        const char *l = m->listen_client_url;
        if (!l || !strneq(l, "https://", 8) || strchr(l, ','))
                return false;
        char *both = xasprintf("http://%s,%s", l + 8, l);
        free(m->listen_client_url);
        m->listen_client_url = both;
        return true;
}

void member_plan_allow_plain(const etcd_cluster *c, member_plan *m)
{
        if (render_client_tls(c) && c->tls.client.allow_plain)
                (void)member_plan_listen_plain(m);
}

membership_plan *membership_plan_steady(const etcd_cluster *c, const char *cluster_domain)
{
        const char *domain =
            isempty(cluster_domain) ? RENDER_DEFAULT_CLUSTER_DOMAIN : cluster_domain;
        const char *ns = render_namespace(c);
        const char *peer_scheme = render_peer_scheme(c);
        const char *client_scheme = render_client_tls(c) ? "https" : "http";
        int n = c->replicas > 0 ? c->replicas : 1;
        _cleanup_free_ char *headless = render_headless_service_name(c);
        strbuf initial = STRBUF_INIT;

        membership_plan *p = membership_plan_new(c);
        for (int i = 0; i < n; i++) {
                member_plan *m = membership_plan_add(p);
                m->name = render_member_name(c, i);
                m->ordinal = i;
                m->learner = false;
                _cleanup_free_ char *host =
                    xasprintf("%s.%s.%s.svc.%s", m->name, headless, ns, domain);
                m->peer_url = xasprintf("%s://%s:%d", peer_scheme, host, ETCD_PEER_PORT);
                m->client_url = xasprintf("%s://%s:%d", client_scheme, host, ETCD_CLIENT_PORT);
                m->listen_peer_url = xasprintf("%s://0.0.0.0:%d", peer_scheme, ETCD_PEER_PORT);
                m->listen_client_url =
                    xasprintf("%s://0.0.0.0:%d", client_scheme, ETCD_CLIENT_PORT);
                /* Plain HTTP: health and metrics only, so probes need no certificates. */
                m->listen_metrics_url = xasprintf("http://0.0.0.0:%d", ETCD_METRICS_PORT);
                member_plan_allow_plain(c, m);
                if (i > 0)
                        sb_appendc(&initial, ',');
                sb_printf(&initial, "%s=%s", m->name, m->peer_url);
                m->initial_cluster = xstrdup(sb_str(&initial));
                m->initial_cluster_state = xstrdup(i == 0 ? "new" : "existing");
                m->data_dir = xstrdup(RENDER_STEADY_DATA_DIR);
                m->tls_dir = xstrdup(RENDER_STEADY_TLS_DIR);
                m->config_hash = render_member_config_hash(c, p, p->n - 1);
        }
        sb_release(&initial);
        return p;
}

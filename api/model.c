/*
 * The EtcdCluster model: constructors, destructors and the small value
 * types (semver, kv_list, cluster_set) every stage shares.
 *
 * Design: the model owns all of its strings and JSON values, so freeing a
 * cluster is one call; locations (spec_loc) are kept per native field path
 * so later stages (transitions, plans) can point at the line a user wrote,
 * whatever dialect the document used.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/model.h"
#include "api/versions.h"
#include "util/xalloc.h"

const char *dialect_api_version(spec_dialect d)
{
        switch (d) {
        case DIALECT_GITCD:
                return GITCD_API_VERSION;
        case DIALECT_COREOS:
                return "etcd.database.coreos.com/v1beta2";
        case DIALECT_ETCDIO:
                return "operator.etcd.io/v1alpha1";
        case DIALECT_IMPROBABLE:
                return "etcd.improbable.io/v1alpha1";
        case DIALECT_COZYSTACK:
                return "etcd-operator.cozystack.io/v1alpha2";
        }
        return "unknown";
}

const char *dialect_name(spec_dialect d)
{
        switch (d) {
        case DIALECT_GITCD:
                return "gitcd";
        case DIALECT_COREOS:
                return "coreos";
        case DIALECT_ETCDIO:
                return "etcd-io";
        case DIALECT_IMPROBABLE:
                return "improbable";
        case DIALECT_COZYSTACK:
                return "cozystack";
        }
        return "unknown";
}

const char *adopt_from_name(adopt_from f)
{
        switch (f) {
        case ADOPT_FROM_NONE:
                break;
        case ADOPT_FROM_COREOS:
                return "coreos";
        case ADOPT_FROM_ETCDIO:
                return "etcd-io";
        case ADOPT_FROM_IMPROBABLE:
                return "improbable";
        case ADOPT_FROM_COZYSTACK:
                return "cozystack";
        }
        return "none";
}

const char *bootstrap_mode_name(bootstrap_mode m)
{
        return m == BOOTSTRAP_LEARNERS ? "learners" : "static";
}

const char *cluster_role_name(cluster_role r)
{
        return r == ROLE_KUBERNETES ? "kubernetes-control-plane" : "general";
}

int revision_bump_parse(const char *text, revision_bump *ret)
{
        if (!text)
                return -EINVAL;
        if (streq(text, "auto")) {
                *ret = (revision_bump){.mode = BUMP_AUTO};
                return 0;
        }
        if (streq(text, "off")) {
                *ret = (revision_bump){.mode = BUMP_FIXED};
                return 0;
        }
        size_t n = strlen(text);
        if (n == 0 || n > 19 || strspn(text, "0123456789") != n)
                return -EINVAL;
        int64_t v = 0;
        for (size_t i = 0; i < n; i++) {
                if (v > GITCD_MAX_REVISION_BUMP)
                        return -ERANGE;
                v = v * 10 + (text[i] - '0');
        }
        if (v > GITCD_MAX_REVISION_BUMP)
                return -ERANGE;
        *ret = (revision_bump){.mode = BUMP_FIXED, .amount = v};
        return 0;
}

char *revision_bump_format(const revision_bump *b)
{
        if (b->mode == BUMP_AUTO)
                return xstrdup("auto");
        return xasprintf("%" PRId64, b->mode == BUMP_FIXED ? b->amount : 0);
}

bool revision_bump_equal(const revision_bump *a, const revision_bump *b)
{
        if (a->mode != b->mode)
                return false;
        return a->mode != BUMP_FIXED || a->amount == b->amount;
}

const char *tls_provider_name(tls_provider p)
{
        switch (p) {
        case TLS_PROVIDER_NONE:
                return "none";
        case TLS_PROVIDER_AUTO:
                return "auto";
        case TLS_PROVIDER_CERT_MANAGER:
                return "cert-manager";
        case TLS_PROVIDER_SECRETS:
                return "secrets";
        }
        return "none";
}

/* A decimal number without sign or leading zeros (except "0"), at most 9 digits. */
static int parse_component(const char *s, const char **ret_end, int *ret)
{
        const char *p = s;
        int v = 0;
        if (*p < '0' || *p > '9')
                return -EINVAL;
        if (*p == '0' && p[1] >= '0' && p[1] <= '9')
                return -EINVAL;
        while (*p >= '0' && *p <= '9') {
                if (p - s >= 9)
                        return -EINVAL;
                v = v * 10 + (*p - '0');
                p++;
        }
        *ret_end = p;
        *ret = v;
        return 0;
}

int semver_parse(const char *s, semver *ret)
{
        semver v;
        const char *p = s;
        if (!s)
                return -EINVAL;
        if (*p == 'v')
                p++;
        if (parse_component(p, &p, &v.major) < 0 || *p++ != '.')
                return -EINVAL;
        if (parse_component(p, &p, &v.minor) < 0 || *p++ != '.')
                return -EINVAL;
        if (parse_component(p, &p, &v.patch) < 0 || *p != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

int semver_cmp(const semver *a, const semver *b)
{
        if (a->major != b->major)
                return a->major < b->major ? -1 : 1;
        if (a->minor != b->minor)
                return a->minor < b->minor ? -1 : 1;
        if (a->patch != b->patch)
                return a->patch < b->patch ? -1 : 1;
        return 0;
}

void kv_set(kv_list *l, const char *key, const char *value)
{
        for (size_t i = 0; i < l->n; i++) {
                if (streq(l->items[i].key, key)) {
                        free(l->items[i].value);
                        l->items[i].value = xstrdup(value);
                        return;
                }
        }
        l->items = xgrow(l->items, &l->alloc, l->n + 1, sizeof(kv));
        l->items[l->n].key = xstrdup(key);
        l->items[l->n].value = xstrdup(value);
        l->n++;
}

const char *kv_get(const kv_list *l, const char *key)
{
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->items[i].key, key))
                        return l->items[i].value;
        return NULL;
}

void kv_list_release(kv_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->items[i].key);
                free(l->items[i].value);
        }
        free(l->items);
        l->items = NULL;
        l->n = l->alloc = 0;
}

revision_bump revision_bump_default(const etcd_cluster *c)
{
        if (c->role == ROLE_KUBERNETES && version_has_restore_bump(&c->ver, NULL))
                return (revision_bump){.mode = BUMP_AUTO};
        return (revision_bump){.mode = BUMP_FIXED};
}

etcd_cluster *etcd_cluster_new(void)
{
        etcd_cluster *c = XNEW(etcd_cluster);
        c->dialect = DIALECT_GITCD;
        c->replicas = GITCD_DEFAULT_REPLICAS;
        c->progress_deadline_seconds = GITCD_DEFAULT_PROGRESS_DEADLINE;
        c->soak_seconds = GITCD_DEFAULT_SOAK_SECONDS;
        c->storage.medium = MEDIUM_DISK;
        c->tls.provider = TLS_PROVIDER_NONE;
        c->tls.validity_seconds = 90 * TLS_DAY_SECONDS;
        c->tls.renew_before_seconds = 30 * TLS_DAY_SECONDS;
        c->snapshots.retention_count = 7;
        c->consistency.etcd_checks = true;
        c->consistency.etcd_check_interval_ms = GITCD_DEFAULT_ETCD_CHECK_INTERVAL_MS;
        c->consistency.check_interval_ms = GITCD_DEFAULT_CHECK_INTERVAL_MS;
        return c;
}

static void issuer_ref_release(issuer_ref *r)
{
        free(r->name);
        free(r->kind);
        free(r->group);
        memset(r, 0, sizeof(*r));
}

static void surface_release(tls_surface_spec *s)
{
        free(s->secret);
        issuer_ref_release(&s->issuer);
}

void storage_location_release(storage_location *l)
{
        free(l->claim_name);
        free(l->sub_path);
        free(l->s3.endpoint);
        free(l->s3.bucket);
        free(l->s3.key);
        free(l->s3.region);
        free(l->s3.credentials_secret);
        free(l->path);
        memset(l, 0, sizeof(*l));
}

const char *host_mode_name(host_mode m)
{
        return m == HOST_MODE_STATIC_POD ? "staticPod" : "systemd";
}

char *spec_member_name(const etcd_cluster *c, int ordinal)
{
        return xasprintf("%s-%d", c->name, ordinal);
}

const char *host_placement_name(host_placement p)
{
        return p == HOST_PLACEMENT_PREFERRED ? "preferred" : "strict";
}

static void host_spec_release(host_spec *h)
{
        free(h->address);
        free(h->ssh_user);
        free(h->advertise_address);
        free(h->data_dir);
        free(h->manifest_dir);
        free(h->unit_dir);
        free(h->etcd_binary);
        free(h->tls_dir);
        kv_list_release(&h->domains);
        memset(h, 0, sizeof(*h));
}

void etcd_cluster_free(etcd_cluster *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_declared; i++) {
                free(c->declared[i].object);
                free(c->declared[i].identity);
                free(c->declared[i].file);
                storage_location_release(&c->declared[i].destination);
        }
        free(c->declared);
        free(c->api_version);
        free(c->kind);
        free(c->name);
        free(c->namespace_);
        kv_list_release(&c->labels);
        kv_list_release(&c->annotations);
        free(c->file);
        for (size_t i = 0; i < c->n_locs; i++)
                free(c->locs[i].path);
        free(c->locs);
        free(c->version);
        free(c->repository);
        free(c->storage.size);
        free(c->storage.storage_class);
        surface_release(&c->tls.client);
        surface_release(&c->tls.peer);
        free(c->tls.operator_client_secret);
        issuer_ref_release(&c->tls.operator_client_issuer);
        free(c->tls.ca_bundle_secret);
        free(c->tls.rotate_ca_token);
        free(c->auth.root_credentials_secret);
        json_decref(c->resources);
        json_decref(c->affinity);
        json_decref(c->topology_spread_constraints);
        json_decref(c->node_selector);
        json_decref(c->tolerations);
        kv_list_release(&c->additional_labels);
        kv_list_release(&c->additional_annotations);
        kv_list_release(&c->pod_labels);
        kv_list_release(&c->pod_annotations);
        free(c->options.quota_backend);
        free(c->options.auto_compaction_mode);
        free(c->options.auto_compaction_retention);
        kv_list_release(&c->options.extra_flags);
        free(c->snapshots.schedule);
        free(c->snapshots.verify_schedule);
        storage_location_release(&c->snapshots.destination);
        free(c->defrag.schedule);
        free(c->defrag.free_space_above);
        for (size_t i = 0; i < c->maintenance.n_windows; i++) {
                free(c->maintenance.windows[i].schedule);
                free(c->maintenance.windows[i].duration);
        }
        free(c->maintenance.windows);
        free(c->maintenance.override);
        storage_location_release(&c->restore.source);
        free(c->recovery.member);
        free(c->recovery.token);
        free(c->consistency.reason);
        free(c->repair.replace);
        free(c->repair.token);
        free(c->adopt.name);
        free(c->adopt.namespace_);
        free(c->adopt.ca_secret);
        for (size_t i = 0; i < c->n_depends_on; i++)
                free(c->depends_on[i]);
        free(c->depends_on);
        free(c->kube_context);
        host_spec_release(&c->hosts.defaults);
        for (size_t i = 0; i < c->hosts.n; i++)
                host_spec_release(&c->hosts.items[i]);
        free(c->hosts.items);
        free(c);
}

void etcd_cluster_set_loc(etcd_cluster *c, const char *path, int line, int col)
{
        for (size_t i = 0; i < c->n_locs; i++) {
                if (streq(c->locs[i].path, path)) {
                        c->locs[i].line = line;
                        c->locs[i].col = col;
                        return;
                }
        }
        c->locs = xgrow(c->locs, &c->alloc_locs, c->n_locs + 1, sizeof(spec_loc));
        c->locs[c->n_locs].path = xstrdup(path);
        c->locs[c->n_locs].line = line;
        c->locs[c->n_locs].col = col;
        c->n_locs++;
}

void etcd_cluster_loc(const etcd_cluster *c, const char *path, int *ret_line, int *ret_col)
{
        /* The field itself, else its nearest recorded parent, else the document. */
        _cleanup_free_ char *p = xstrdup(path ? path : "");
        for (;;) {
                for (size_t i = 0; i < c->n_locs; i++) {
                        if (streq(c->locs[i].path, p)) {
                                *ret_line = c->locs[i].line;
                                *ret_col = c->locs[i].col;
                                return;
                        }
                }
                char *dot = strrchr(p, '.');
                if (!dot)
                        break;
                *dot = '\0';
        }
        *ret_line = c->line;
        *ret_col = c->col;
}

char *etcd_cluster_id(const etcd_cluster *c)
{
        return xasprintf("%s/%s", c->namespace_ ? c->namespace_ : "default",
                         c->name ? c->name : "");
}

void cluster_set_add(cluster_set *s, etcd_cluster *c)
{
        s->items = xgrow(s->items, &s->alloc, s->n + 1, sizeof(etcd_cluster *));
        s->items[s->n++] = c;
}

etcd_cluster *cluster_set_find(const cluster_set *s, const char *namespace_, const char *name)
{
        for (size_t i = 0; i < s->n; i++) {
                etcd_cluster *c = s->items[i];
                if (streq_ptr(c->namespace_, namespace_) && streq_ptr(c->name, name))
                        return c;
        }
        return NULL;
}

void cluster_set_release(cluster_set *s)
{
        for (size_t i = 0; i < s->n; i++)
                etcd_cluster_free(s->items[i]);
        free(s->items);
        s->items = NULL;
        s->n = s->alloc = 0;
}

char *duration_format_s(int64_t seconds)
{
        static const struct {
                int64_t unit;
                char suffix;
        } units[] = {{TLS_DAY_SECONDS, 'd'}, {3600, 'h'}, {60, 'm'}};
        for (size_t i = 0; i < ARRAY_SIZE(units); i++)
                if (seconds != 0 && seconds % units[i].unit == 0)
                        return xasprintf("%" PRId64 "%c", seconds / units[i].unit, units[i].suffix);
        return xasprintf("%" PRId64 "s", seconds);
}

char *duration_format_ms(int64_t ms)
{
        static const struct {
                int64_t unit;
                const char *suffix;
        } units[] = {{3600000, "h"}, {60000, "m"}, {1000, "s"}};
        for (size_t i = 0; i < ARRAY_SIZE(units); i++)
                if (ms != 0 && ms % units[i].unit == 0)
                        return xasprintf("%" PRId64 "%s", ms / units[i].unit, units[i].suffix);
        return xasprintf("%" PRId64 "ms", ms);
}

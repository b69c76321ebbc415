/*
 * The normalized form of an EtcdCluster: native field names, every default
 * filled in, keys in one fixed order. It is what the state store keeps,
 * what `spec_hash` digests and how two specs from different dialects are
 * compared.
 *
 * Design: reading the normalized form back goes through the ordinary
 * loader (JSON is YAML), so there is exactly one parser and one set of
 * rules; a stored spec that no longer validates is reported like any file.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/spec.h"
#include "util/hash.h"
#include "util/xalloc.h"

static json_t *kv_json(const kv_list *l)
{
        json_t *o = json_object();
        for (size_t i = 0; i < l->n; i++)
                json_object_set_new(o, l->items[i].key, json_string(l->items[i].value));
        return o;
}

static void set_str(json_t *o, const char *key, const char *v)
{
        if (v)
                json_object_set_new(o, key, json_string(v));
}

static json_t *ref_json(const char *name)
{
        return json_pack("{s:s}", "name", name);
}

static void set_ref(json_t *o, const char *key, const char *name)
{
        if (name)
                json_object_set_new(o, key, ref_json(name));
}

static void set_issuer(json_t *o, const char *key, const issuer_ref *i)
{
        if (!i->name)
                return;
        json_t *j = json_object();
        set_str(j, "name", i->name);
        set_str(j, "kind", i->kind);
        set_str(j, "group", i->group);
        json_object_set_new(o, key, j);
}

static void set_copy(json_t *o, const char *key, const json_t *v)
{
        if (v)
                json_object_set_new(o, key, json_deep_copy(v));
}

static json_t *location_json(const storage_location *l)
{
        json_t *o = json_object();
        json_t *j = json_object();
        switch (l->kind) {
        case DEST_PVC:
                set_str(j, "claimName", l->claim_name);
                set_str(j, "subPath", l->sub_path);
                json_object_set_new(o, "pvc", j);
                break;
        case DEST_S3:
                set_str(j, "endpoint", l->s3.endpoint);
                set_str(j, "bucket", l->s3.bucket);
                set_str(j, "key", l->s3.key);
                set_str(j, "region", l->s3.region);
                json_object_set_new(j, "forcePathStyle", json_boolean(l->s3.force_path_style));
                set_ref(j, "credentialsSecretRef", l->s3.credentials_secret);
                json_object_set_new(o, "s3", j);
                break;
        case DEST_LOCAL:
                set_str(j, "path", l->path);
                json_object_set_new(o, "local", j);
                break;
        case DEST_NONE:
                json_decref(j);
                break;
        }
        return o;
}

static json_t *tls_json(const tls_spec *t)
{
        json_t *o = json_object();
        json_object_set_new(o, "provider", json_string(tls_provider_name(t->provider)));
        if (t->provider == TLS_PROVIDER_NONE) {
                if (t->peer.self_signed)
                        json_object_set_new(o, "peer", json_pack("{s:b}", "selfSigned", 1));
                return o;
        }
        const tls_surface_spec *s[2] = {&t->client, &t->peer};
        static const char *const names[2] = {"client", "peer"};
        for (size_t i = 0; i < 2; i++) {
                json_t *j = json_object();
                json_object_set_new(j, "enabled", json_boolean(s[i]->enabled));
                set_ref(j, "secretRef", s[i]->secret);
                set_issuer(j, "issuerRef", &s[i]->issuer);
                if (s[i]->allow_plain) /* only when set: the hashes of existing specs stay */
                        json_object_set_new(j, "allowPlainHTTP", json_true());
                if (s[i]->self_signed) /* only when set, as allowPlainHTTP */
                        json_object_set_new(j, "selfSigned", json_true());
                json_object_set_new(o, names[i], j);
        }
        if (t->operator_client_secret || t->operator_client_issuer.name) {
                json_t *j = json_object();
                set_ref(j, "secretRef", t->operator_client_secret);
                set_issuer(j, "issuerRef", &t->operator_client_issuer);
                json_object_set_new(o, "operatorClient", j);
        }
        set_ref(o, "caBundleSecretRef", t->ca_bundle_secret);
        if (t->provider == TLS_PROVIDER_AUTO) {
                /* Whole days keep the older form (stable hashes); anything finer a duration. */
                json_t *a = json_object();
                if (t->validity_seconds % TLS_DAY_SECONDS ||
                    t->renew_before_seconds % TLS_DAY_SECONDS) {
                        _cleanup_free_ char *va = duration_format_s(t->validity_seconds);
                        _cleanup_free_ char *rb = duration_format_s(t->renew_before_seconds);
                        json_object_set_new(a, "validity", json_string(va));
                        json_object_set_new(a, "renewBefore", json_string(rb));
                } else {
                        json_object_set_new(a, "validityDays",
                                            json_integer(t->validity_seconds / TLS_DAY_SECONDS));
                        json_object_set_new(
                            a, "renewBeforeDays",
                            json_integer(t->renew_before_seconds / TLS_DAY_SECONDS));
                }
                set_str(a, "rotateCA", t->rotate_ca_token);
                json_object_set_new(o, "auto", a);
        }
        return o;
}

/* spec.hosts with every machine's fields filled in; the hosts level keeps only the mode. */
static json_t *hosts_json(const hosts_spec *hs)
{
        json_t *o = json_object(), *machines = json_array();
        set_str(o, "mode", host_mode_name(hs->defaults.mode));
        /* the default left out: specs written before the field keep their hash */
        if (hs->placement != HOST_PLACEMENT_STRICT)
                set_str(o, "placement", host_placement_name(hs->placement));
        for (size_t i = 0; i < hs->n; i++) {
                const host_spec *h = &hs->items[i];
                json_t *m = json_object();
                set_str(m, "address", h->address);
                set_str(m, "advertiseAddress", h->advertise_address);
                json_object_set_new(m, "ssh", json_object());
                json_object_set_new(json_object_get(m, "ssh"), "port", json_integer(h->ssh_port));
                set_str(json_object_get(m, "ssh"), "user", h->ssh_user);
                set_str(m, "dataDir", h->data_dir);
                set_str(m, "tlsDir", h->tls_dir);
                set_str(m, "manifestDir", h->manifest_dir);
                set_str(m, "unitDir", h->unit_dir);
                set_str(m, "etcdBinary", h->etcd_binary);
                if (h->domains.n) {
                        json_t *d = json_object();
                        for (size_t j = 0; j < h->domains.n; j++)
                                set_str(d, h->domains.items[j].key, h->domains.items[j].value);
                        json_object_set_new(m, "domains", d);
                }
                json_array_append_new(machines, m);
        }
        json_object_set_new(o, "machines", machines);
        return o;
}

/*
 * bumpRevision only when it differs from the role's default: a spec that
 * writes the default means what one that leaves it out means, and specs
 * written before the field existed keep their hash.
 */
static void set_bump(json_t *o, const etcd_cluster *c, const revision_bump *b)
{
        revision_bump def = revision_bump_default(c);
        if (b->mode == BUMP_UNSET || revision_bump_equal(b, &def))
                return;
        if (b->mode == BUMP_AUTO)
                set_str(o, "bumpRevision", "auto");
        else
                json_object_set_new(o, "bumpRevision", json_integer(b->amount));
}

/* spec.options */
static json_t *options_json(const etcd_options *o)
{
        json_t *opt = json_object();
        set_str(opt, "quotaBackendBytes", o->quota_backend);
        set_str(opt, "autoCompactionMode", o->auto_compaction_mode);
        set_str(opt, "autoCompactionRetention", o->auto_compaction_retention);
        if (o->snapshot_count)
                json_object_set_new(opt, "snapshotCount", json_integer(o->snapshot_count));
        if (o->heartbeat_interval_ms)
                json_object_set_new(opt, "heartbeatInterval",
                                    json_integer(o->heartbeat_interval_ms));
        if (o->election_timeout_ms)
                json_object_set_new(opt, "electionTimeout", json_integer(o->election_timeout_ms));
        json_object_set_new(opt, "extraFlags", kv_json(&o->extra_flags));
        return opt;
}

/* spec.snapshots */
static json_t *snapshots_json(const snapshot_spec *s)
{
        json_t *snap = json_object();
        json_object_set_new(snap, "enabled", json_boolean(s->enabled));
        set_str(snap, "schedule", s->schedule);
        if (s->compression == COMPRESSION_GZIP)
                set_str(snap, "compression", "gzip");
        /* The default (every) is left out, so specs written before it existed keep their hash. */
        if (s->verify == VERIFY_OFF)
                set_str(snap, "verify", "off");
        else if (s->verify == VERIFY_SCHEDULE)
                set_str(snap, "verify", s->verify_schedule);
        json_t *ret = json_object();
        json_object_set_new(ret, "count", json_integer(s->retention_count));
        if (s->retention_max_age_ms > 0) {
                _cleanup_free_ char *age = duration_format_ms(s->retention_max_age_ms);
                set_str(ret, "maxAge", age);
        }
        json_object_set_new(snap, "retention", ret);
        if (s->destination.kind != DEST_NONE)
                json_object_set_new(snap, "destination", location_json(&s->destination));
        return snap;
}

/* spec.defrag */
static json_t *defrag_json(const defrag_spec *d)
{
        json_t *df = json_object();
        json_object_set_new(df, "enabled", json_boolean(d->enabled));
        set_str(df, "schedule", d->schedule);
        set_str(df, "freeSpaceAbove", d->free_space_above);
        if (d->quota_usage_above_percent)
                json_object_set_new(df, "quotaUsageAbovePercent",
                                    json_integer(d->quota_usage_above_percent));
        if (d->disarm_nospace)
                json_object_set_new(df, "disarmNoSpace", json_true());
        return df;
}

/* spec.leadership, only when not the default: older specs keep their hash. */
static void set_leadership(json_t *spec, const leadership_spec *ls)
{
        if (!ls->avoid_slow_off && !ls->interval_seconds)
                return;
        json_t *l = json_object();
        if (ls->avoid_slow_off)
                json_object_set_new(l, "avoidSlowMembers", json_false());
        if (ls->interval_seconds)
                json_object_set_new(l, "intervalSeconds", json_integer(ls->interval_seconds));
        json_object_set_new(spec, "leadership", l);
}

/* spec.suspend and spec.maintenance, only when written: older specs keep their hash. */
static void set_holds(json_t *spec, const etcd_cluster *c)
{
        if (c->suspend)
                json_object_set_new(spec, "suspend", json_true());
        const maintenance_spec *ms = &c->maintenance;
        if (ms->n_windows == 0 && !ms->override)
                return;
        json_t *m = json_object();
        if (ms->n_windows) {
                json_t *ws = json_array();
                for (size_t i = 0; i < ms->n_windows; i++)
                        json_array_append_new(ws, json_pack("{s:s?,s:s?}", "schedule",
                                                            ms->windows[i].schedule, "duration",
                                                            ms->windows[i].duration));
                json_object_set_new(m, "windows", ws);
        }
        set_str(m, "override", ms->override);
        json_object_set_new(spec, "maintenance", m);
}

/*
 * What a cluster is asked to do from its spec: bootstrap (a restore),
 * recovery, consistency, repair, each only when it differs from the
 * default.
 */
static void set_requests(json_t *spec, const etcd_cluster *c)
{
        /* The default mode is left out, so specs written before it existed keep their hash. */
        if (c->restore.enabled || c->bootstrap_mode != BOOTSTRAP_STATIC) {
                json_t *b = json_object();
                if (c->bootstrap_mode != BOOTSTRAP_STATIC)
                        set_str(b, "mode", bootstrap_mode_name(c->bootstrap_mode));
                if (c->restore.enabled) {
                        json_t *rs = json_pack(
                            "{s:o}", "source",
                            c->restore.snapshot_id
                                ? json_pack("{s:I}", "snapshot", (json_int_t)c->restore.snapshot_id)
                                : location_json(&c->restore.source));
                        set_bump(rs, c, &c->restore.bump);
                        json_object_set_new(b, "restore", rs);
                }
                json_object_set_new(spec, "bootstrap", b);
        }
        if (c->recovery.from != RECOVERY_NONE) {
                json_t *from =
                    c->recovery.from == RECOVERY_FROM_SNAPSHOT
                        ? json_pack("{s:I}", "snapshot", (json_int_t)c->recovery.snapshot_id)
                        : json_object();
                if (c->recovery.from == RECOVERY_FROM_MEMBER)
                        set_str(from, "member", c->recovery.member);
                json_t *rc = json_pack("{s:o}", "from", from);
                set_str(rc, "token", c->recovery.token);
                set_bump(rc, c, &c->recovery.bump);
                json_object_set_new(spec, "recovery", rc);
        }
        /* Only what differs from the defaults, so specs written before it keep their hash. */
        const consistency_spec *cs = &c->consistency;
        json_t *co = json_object();
        if (!cs->etcd_checks)
                json_object_set_new(co, "etcdChecks", json_false());
        if (cs->etcd_check_interval_ms != GITCD_DEFAULT_ETCD_CHECK_INTERVAL_MS) {
                _cleanup_free_ char *iv = duration_format_ms(cs->etcd_check_interval_ms);
                set_str(co, "etcdCheckInterval", iv);
        }
        if (cs->check_interval_ms != GITCD_DEFAULT_CHECK_INTERVAL_MS) {
                _cleanup_free_ char *iv = duration_format_ms(cs->check_interval_ms);
                set_str(co, "checkInterval", iv);
        }
        set_str(co, "reason", cs->reason);
        if (json_object_size(co) > 0)
                json_object_set_new(spec, "consistency", co);
        else
                json_decref(co);
        if (c->adopt.from != ADOPT_FROM_NONE) {
                json_t *ad = json_pack("{s:s, s:s?, s:s?}", "from", adopt_from_name(c->adopt.from),
                                       "name", c->adopt.name, "namespace", c->adopt.namespace_);
                if (c->adopt.ca_secret)
                        json_object_set_new(ad, "ca",
                                            json_pack("{s:s}", "secret", c->adopt.ca_secret));
                json_object_set_new(spec, "adopt", ad);
        }
        if (c->repair.set) {
                json_t *rp = json_object();
                set_str(rp, "replace", c->repair.replace);
                if (c->repair.recheck)
                        json_object_set_new(rp, "recheck", json_true());
                set_str(rp, "token", c->repair.token);
                json_object_set_new(spec, "repair", rp);
        }
}

json_t *spec_to_json(const etcd_cluster *c)
{
        json_t *meta = json_object();
        set_str(meta, "name", c->name);
        set_str(meta, "namespace", c->namespace_ ? c->namespace_ : "default");
        json_object_set_new(meta, "labels", kv_json(&c->labels));
        json_object_set_new(meta, "annotations", kv_json(&c->annotations));

        json_t *spec = json_object();
        json_object_set_new(spec, "replicas", json_integer(c->replicas));
        set_str(spec, "version", c->version ? c->version : GITCD_DEFAULT_VERSION);
        set_str(spec, "repository", c->repository ? c->repository : GITCD_DEFAULT_REPOSITORY);
        /* The default role is left out, so specs written before it existed keep their hash. */
        if (c->role != ROLE_GENERAL)
                set_str(spec, "role", cluster_role_name(c->role));

        json_t *st = json_object();
        set_str(st, "size", c->storage.size ? c->storage.size : GITCD_DEFAULT_STORAGE_SIZE);
        set_str(st, "medium", c->storage.medium == MEDIUM_MEMORY ? "Memory" : "Disk");
        set_str(st, "storageClassName", c->storage.storage_class);
        json_object_set_new(spec, "storage", st);

        json_object_set_new(spec, "tls", tls_json(&c->tls));

        json_t *auth = json_object();
        json_object_set_new(auth, "enabled", json_boolean(c->auth.enabled));
        set_ref(auth, "rootCredentialsSecretRef", c->auth.root_credentials_secret);
        json_object_set_new(spec, "auth", auth);

        set_copy(spec, "resources", c->resources);
        set_copy(spec, "affinity", c->affinity);
        set_copy(spec, "topologySpreadConstraints", c->topology_spread_constraints);
        set_copy(spec, "nodeSelector", c->node_selector);
        set_copy(spec, "tolerations", c->tolerations);

        json_object_set_new(spec, "additionalMetadata",
                            json_pack("{s:o,s:o}", "labels", kv_json(&c->additional_labels),
                                      "annotations", kv_json(&c->additional_annotations)));
        json_object_set_new(spec, "podTemplate",
                            json_pack("{s:{s:o,s:o}}", "metadata", "labels",
                                      kv_json(&c->pod_labels), "annotations",
                                      kv_json(&c->pod_annotations)));

        json_object_set_new(spec, "options", options_json(&c->options));

        json_object_set_new(spec, "progressDeadlineSeconds",
                            json_integer(c->progress_deadline_seconds));

        json_object_set_new(spec, "snapshots", snapshots_json(&c->snapshots));

        json_object_set_new(spec, "defrag", defrag_json(&c->defrag));

        set_holds(spec, c);
        set_leadership(spec, &c->leadership);
        set_requests(spec, c);
        if (c->hosts.set)
                json_object_set_new(spec, "hosts", hosts_json(&c->hosts));
        /* Left out when not written (the default soak too), so earlier specs keep their hash. */
        if (c->n_depends_on) {
                json_t *deps = json_array();
                for (size_t i = 0; i < c->n_depends_on; i++)
                        json_array_append_new(deps, json_string(c->depends_on[i]));
                json_object_set_new(spec, "dependsOn", deps);
        }
        if (c->soak_seconds != GITCD_DEFAULT_SOAK_SECONDS)
                json_object_set_new(spec, "rollout",
                                    json_pack("{s:i}", "soakSeconds", c->soak_seconds));
        if (c->kube_context)
                json_object_set_new(spec, "kubernetes",
                                    json_pack("{s:s}", "context", c->kube_context));

        return json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", GITCD_API_VERSION, "kind",
                         "EtcdCluster", "metadata", meta, "spec", spec);
}

int spec_from_json(const json_t *j, const char *origin, etcd_cluster **ret, diag_list *diags)
{
        if (!j || !json_is_object(j)) {
                diag_add(diags, DIAG_ERROR, origin, 0, 0, "the stored spec is not a JSON object");
                return -EINVAL;
        }
        _cleanup_free_ char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!text) {
                diag_add(diags, DIAG_ERROR, origin, 0, 0, "the stored spec cannot be serialized");
                return -EINVAL;
        }
        cluster_set set = {0};
        int r = spec_load_buffer(origin, text, strlen(text), &set, diags);
        if (r < 0 || set.n != 1) {
                if (r >= 0)
                        diag_add(diags, DIAG_ERROR, origin, 0, 0,
                                 "the stored spec is not one EtcdCluster");
                cluster_set_release(&set);
                return -EINVAL;
        }
        *ret = set.items[0];
        free(set.items);
        return 0;
}

etcd_cluster *spec_from_json_text(const char *text, const char *origin)
{
        if (!text)
                return NULL;
        json_t *j = json_loads(text, 0, NULL);
        diag_list d = DIAG_LIST_INIT;
        etcd_cluster *c = NULL;
        if (j && spec_from_json(j, origin, &c, &d) < 0)
                c = NULL;
        json_decref(j);
        diag_list_release(&d);
        return c;
}

etcd_cluster *spec_dup(const etcd_cluster *c, const char *origin)
{
        assert(c);
        json_t *j = spec_to_json(c);
        diag_list d = DIAG_LIST_INIT;
        etcd_cluster *copy = NULL;
        if (!j || spec_from_json(j, origin, &copy, &d) < 0)
                copy = NULL;
        json_decref(j);
        diag_list_release(&d);
        return copy;
}

json_t *spec_location_to_json(const storage_location *l)
{
        return location_json(l);
}

/* A string member of o, copied; NULL when absent. -EINVAL when not a string. */
static int get_str(const json_t *o, const char *key, char **ret)
{
        const json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return -EINVAL;
        *ret = xstrdup(json_string_value(v));
        return 0;
}

static int get_ref(const json_t *o, const char *key, char **ret)
{
        const json_t *v = json_object_get(o, key);
        return v ? get_str(v, "name", ret) : 0;
}

int spec_location_from_json(const json_t *j, storage_location *ret)
{
        storage_location l = {0};
        const json_t *m;
        int r = 0;
        if (!json_is_object(j))
                return -EINVAL;
        if ((m = json_object_get(j, "s3"))) {
                l.kind = DEST_S3;
                r = get_str(m, "endpoint", &l.s3.endpoint);
                r = r < 0 ? r : get_str(m, "bucket", &l.s3.bucket);
                r = r < 0 ? r : get_str(m, "key", &l.s3.key);
                r = r < 0 ? r : get_str(m, "region", &l.s3.region);
                r = r < 0 ? r : get_ref(m, "credentialsSecretRef", &l.s3.credentials_secret);
                l.s3.force_path_style = json_is_true(json_object_get(m, "forcePathStyle"));
                if (r >= 0 && !l.s3.bucket)
                        r = -EINVAL;
        } else if ((m = json_object_get(j, "local"))) {
                l.kind = DEST_LOCAL;
                r = get_str(m, "path", &l.path);
                if (r >= 0 && !l.path)
                        r = -EINVAL;
        } else if ((m = json_object_get(j, "pvc"))) {
                l.kind = DEST_PVC;
                r = get_str(m, "claimName", &l.claim_name);
                r = r < 0 ? r : get_str(m, "subPath", &l.sub_path);
        }
        if (r < 0) {
                storage_location_release(&l);
                return r;
        }
        *ret = l;
        return 0;
}

static char *sha256_hex(const char *text)
{
        if (!text)
                abort(); /* only on out-of-memory, which gitcd treats as fatal */
        return hash_sha256_hex_new(text, strlen(text));
}

char *spec_text_hash(const char *text)
{
        return sha256_hex(text);
}

char *spec_hash(const etcd_cluster *c)
{
        json_t *j = spec_to_json(c);
        _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        return sha256_hex(text);
}

/*
 * Spec intake (see intake.h): the rules every command that takes in a
 * revision shares, in one place and one order.
 *
 * Design decision: the intake decides, the callers act. It returns every
 * cluster the revision defines validly with a verdict, and the diagnostics
 * of everything else; the driver offers what is taken and audits the rest,
 * plan prints the same verdicts. Duplicates are found after the refusals,
 * as both callers always did: a cluster whose second definition was
 * refused for an unsupported field counts as defined once.
 *
 * The operator's policy comes last, per cluster, and never marks the
 * revision as having errors: a cluster it refuses is named (the driver
 * neither offers nor orphans it: one that exists keeps its accepted spec),
 * and every other cluster of the revision goes on, orphans included.
 * Approvals are counted only for a change that needs them, once per
 * revision, so a cluster that waits costs one walk of at most
 * SOURCE_SIGNERS_MAX_COMMITS commits per new head.
 */
#include <errno.h>
#include <stdlib.h>

#include "intake/intake.h"
#include "intake/order.h"
#include "util/strbuf.h"
#include "util/strmap.h"
#include "util/xalloc.h"

static const char *const verdict_names[] = {
    [INTAKE_TAKEN] = "taken",
    [INTAKE_DUPLICATE] = "duplicate",
    [INTAKE_REFUSED] = "refused",
    [INTAKE_HELD] = "held",
};

const char *intake_verdict_name(intake_verdict v)
{
        return (size_t)v < ARRAY_SIZE(verdict_names) ? verdict_names[v] : "unknown";
}

void intake_cluster_release(intake_cluster *c)
{
        if (!c)
                return;
        free(c->id);
        etcd_cluster_free(c->spec);
        free(c->why);
        diag_list_release(&c->diags);
        *c = (intake_cluster){.diags = DIAG_LIST_INIT};
}

void intake_result_release(intake_result *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n; i++)
                intake_cluster_release(&r->items[i]);
        free(r->items);
        diag_list_release(&r->diags);
        *r = (intake_result){.diags = DIAG_LIST_INIT};
}

const intake_cluster *intake_find(const intake_result *r, const char *id)
{
        for (size_t i = 0; i < r->n; i++)
                if (streq(r->items[i].id, id))
                        return &r->items[i];
        return NULL;
}

/* Parse and validate every file (the files of a revision read together). */
static bool load(const intake_input *in, cluster_set *set, diag_list *diags)
{
        if (!in->rev)
                return spec_load_buffers(in->files, in->n_files, set, diags) < 0;
        const source_revision *rev = in->rev;
        spec_buffer *bufs = xcalloc(rev->n_files + 1, sizeof(*bufs));
        for (size_t i = 0; i < rev->n_files; i++)
                bufs[i] = (spec_buffer){.file = rev->files[i].path,
                                        .data = rev->files[i].content,
                                        .len = rev->files[i].len};
        bool errors = spec_load_buffers(bufs, rev->n_files, set, diags) < 0;
        free(bufs);
        return errors;
}

/* The clusters accepted before, by name. */
typedef struct prior_index {
        const intake_input *in;
        strmap by_id;
} prior_index;

static const intake_prior *prior_find(const prior_index *x, const char *id)
{
        size_t i;
        return strmap_get(&x->by_id, id, &i) ? &x->in->priors[i] : NULL;
}

static bool prior_exists(const char *id, void *userdata)
{
        return prior_find(userdata, id) != NULL;
}

/* Each cluster once, in the order of its first definition; one defined twice is a duplicate. */
static void verdicts(cluster_set *set, const prior_index *priors, intake_result *r)
{
        strmap first = STRMAP_INIT;
        for (size_t i = 0; i < set->n; i++) {
                char *id = etcd_cluster_id(set->items[i]);
                size_t at = 0;
                if (!strmap_put(&first, id, r->n) && strmap_get(&first, id, &at)) {
                        r->items[at].verdict = INTAKE_DUPLICATE;
                        free(id);
                        etcd_cluster_free(set->items[i]);
                        set->items[i] = NULL;
                        continue;
                }
                r->items = xgrow(r->items, &r->alloc, r->n + 1, sizeof(*r->items));
                r->items[r->n++] = (intake_cluster){.id = id,
                                                    .spec = TAKE_PTR(set->items[i]),
                                                    .verdict = INTAKE_TAKEN,
                                                    .exists = prior_exists(id, (void *)priors),
                                                    .diags = DIAG_LIST_INIT};
        }
        strmap_release(&first);
        set->n = 0;
}

/* The policy in force: the caller's, else the built-in one (*owned to free). */
static const policy *policy_of(const intake_input *in, policy **owned)
{
        *owned = NULL;
        if (in->policy)
                return in->policy;
        return *owned = policy_builtin();
}

/* "recovery", "recovery and scaleDown", "recovery, scaleDown and authOff". */
static char *kinds_text(unsigned kinds)
{
        strbuf sb = STRBUF_INIT;
        size_t total = 0, k = 0;
        for (size_t i = 0; i < POLICY_N_CHANGES; i++)
                total += (kinds >> i) & 1u;
        for (size_t i = 0; i < POLICY_N_CHANGES; i++) {
                if (!(kinds & (1u << i)))
                        continue;
                k++;
                if (k > 1)
                        sb_append(&sb, k == total ? " and " : ", ");
                sb_append(&sb, policy_change_name((policy_change)i));
        }
        return sb_detach(&sb);
}

/* The files that define c: its own and those of the documents that name it. */
static const char **defining_files(const etcd_cluster *c, size_t *ret_n)
{
        const char **v = xcalloc(c->n_declared + 2, sizeof(char *));
        size_t n = 0;
        if (c->file)
                v[n++] = c->file;
        for (size_t i = 0; i < c->n_declared; i++) {
                const char *f = c->declared[i].file;
                bool seen = !f;
                for (size_t j = 0; j < n && !seen; j++)
                        seen = streq(v[j], f);
                if (!seen)
                        v[n++] = f;
        }
        *ret_n = n;
        return v;
}

static int count_signers(const intake_input *in, const char *const *paths, size_t n_paths,
                         const char *since, source_signer_list *ret, char **ret_error)
{
        *ret = (source_signer_list){0};
        if (in->signers)
                return in->signers(in->signers_userdata, paths, n_paths, since, ret);
        if (!in->src || !in->rev)
                return 0;
        int k = source_signers(in->src, in->rev, paths, n_paths, since, 0, ret);
        if (k < 0)
                *ret_error = xstrdup(source_last_error(in->src));
        return k;
}

/*
 * Whether the changes of c have the signers they need: HELD with a reason
 * when not. paths NULL: the whole source (a removal).
 */
static void gate(const intake_input *in, const policy *pol, const char *const *paths,
                 size_t n_paths, const char *since, intake_cluster *c)
{
        unsigned kinds = 0;
        c->needed = policy_signers_needed(pol, c->changes, &kinds);
        if (c->needed <= 0)
                return;
        source_signer_list who = {0};
        _cleanup_free_ char *error = NULL;
        int k = count_signers(in, paths, n_paths, since, &who, &error);
        c->n_signers = k < 0 ? 0 : who.n;
        if (k >= 0 && (int)who.n >= c->needed) {
                source_signer_list_release(&who);
                return;
        }
        _cleanup_free_ char *what = kinds_text(kinds);
        strbuf sb = STRBUF_INIT;
        int more = c->needed - (int)c->n_signers;
        sb_printf(&sb, "waiting for %d more approval%s (%s need%s %d distinct signers, has %zu",
                  more, more == 1 ? "" : "s", what, strchr(what, ' ') ? "" : "s", c->needed,
                  c->n_signers);
        for (size_t i = 0; i < who.n; i++)
                sb_printf(&sb, "%s%s", i ? ", " : ": ", who.names[i]);
        sb_append(&sb, ")");
        if (k < 0)
                sb_printf(&sb, "; the signatures could not be counted: %s",
                          error ? error : "unknown error");
        else if (who.bounded)
                sb_printf(&sb, "; only the last %u commits are counted", who.walked);
        else if (!in->src && !in->signers)
                sb_append(&sb, "; no history to count signatures in");
        source_signer_list_release(&who);
        c->verdict = INTAKE_HELD;
        c->why = sb_detach(&sb);
}

/* The spec accepted before, parsed back; NULL when there is none or it cannot be read. */
static etcd_cluster *prior_spec(const intake_prior *p)
{
        return p ? spec_from_json_text(p->json, p->id) : NULL;
}

/* The policy and the approvals for one cluster taken in so far. */
static void judge(const intake_input *in, const policy *pol, const prior_index *priors,
                  intake_cluster *c)
{
        bool hosts = in->caps & TARGET_CAP_HOSTS_INVENTORY;
        if (policy_check(pol, c->spec, in->target, hosts, in->caps & TARGET_CAP_CONTAINER_IMAGES,
                         c->exists, &c->diags) > 0) {
                c->verdict = INTAKE_REFUSED;
                strbuf sb = STRBUF_INIT;
                for (size_t i = 0; i < c->diags.n; i++) {
                        _cleanup_free_ char *line = diag_format(&c->diags.items[i]);
                        sb_printf(&sb, "%s%s", i ? "; " : "", line);
                }
                c->why = sb_detach(&sb);
                return;
        }
        const intake_prior *p = prior_find(priors, c->id);
        _cleanup_(etcd_cluster_freep) etcd_cluster *prev = prior_spec(p);
        c->changes = policy_changes(prev, c->spec);
        if (!c->changes)
                return;
        size_t n = 0;
        _cleanup_free_ const char **files = defining_files(c->spec, &n);
        gate(in, pol, files, n, p ? p->commit : NULL, c);
}

/*
 * The kubeconfig context of each cluster: spec.kubernetes.context, else the
 * source's (written into the spec, so that the state store records where
 * the cluster runs and a later change of either is a transition the rules
 * judge, api/transition.c), else none (the target's default). Refused: a
 * context off a target that runs clusters on contexts, and one the
 * kubeconfig does not have. -EOPNOTSUPP when a cluster was refused.
 */
static int kube_contexts(const intake_input *in, cluster_set *set, diag_list *diags)
{
        static const intake_kube none = {0};
        const intake_kube *kube = in->kube ? in->kube : &none;
        size_t kept = 0;
        int r = 0;
        for (size_t i = 0; i < set->n; i++) {
                etcd_cluster *c = set->items[i];
                bool from_source = false;
                if (!c->kube_context && kube->context && in->caps & TARGET_CAP_KUBE_CONTEXTS) {
                        c->kube_context = xstrdup(kube->context);
                        from_source = true;
                }
                int line = 0, col = 0;
                const char *file = c->file;
                if (from_source && kube->file) {
                        file = kube->file;
                        line = kube->line;
                        col = kube->col;
                } else {
                        etcd_cluster_loc(c,
                                         from_source ? "metadata.name" : "spec.kubernetes.context",
                                         &line, &col);
                }
                _cleanup_free_ char *err = NULL;
                int k = 0;
                if (c->kube_context && !(in->caps & TARGET_CAP_KUBE_CONTEXTS)) {
                        err = xasprintf("spec.kubernetes.context: target %s does not run clusters "
                                        "on a kubeconfig context; the cluster is not taken in "
                                        "(use --target kubernetes, or remove the field)",
                                        in->target ? in->target : "(this one)");
                        k = -EOPNOTSUPP;
                } else if (c->kube_context && kube->check) {
                        _cleanup_free_ char *why = NULL;
                        k = kube->check(kube->userdata, c->kube_context, &why);
                        if (k < 0)
                                err = xasprintf("%s: %s; cluster %s/%s is not taken in",
                                                from_source ? "kubernetes.context"
                                                            : "spec.kubernetes.context",
                                                why ? why : strerror(-k), c->namespace_, c->name);
                }
                if (k >= 0) {
                        set->items[kept++] = c;
                        continue;
                }
                diag_add(diags, DIAG_ERROR, file, line, col, "%s", err);
                etcd_cluster_free(c);
                r = -EOPNOTSUPP;
        }
        set->n = kept;
        return r;
}

static void index_priors(const intake_input *in, prior_index *x)
{
        *x = (prior_index){.in = in, .by_id = STRMAP_INIT};
        for (size_t i = 0; in->priors && i < in->n_priors; i++)
                (void)strmap_put(&x->by_id, in->priors[i].id, i);
}

int spec_intake(const intake_input *in, intake_result *ret)
{
        if (!in || !ret || (!in->rev && in->n_files > 0 && !in->files))
                return -EINVAL;
        intake_result r = {.diags = DIAG_LIST_INIT};
        cluster_set set = {0};
        bool validate = in->mode == INTAKE_VALIDATE;
        prior_index priors;
        index_priors(in, &priors);

        r.errors = load(in, &set, &r.diags);
        if (spec_check_duplicates(&set, &r.diags) < 0)
                r.errors = true;
        if (validate) {
                /* A valid file that apply would refuse is still valid: a warning. */
                for (size_t i = 0; i < set.n; i++)
                        (void)spec_check_unsupported(set.items[i], SPEC_UNSUPPORTED_WARN, &r.diags);
        } else {
                if (spec_refuse_unsupported(&set, prior_exists, &priors, &r.diags) < 0)
                        r.errors = true;
                if (spec_refuse_for_target(&set, in->caps & TARGET_CAP_HOSTS_INVENTORY,
                                           in->caps & TARGET_CAP_PVC_WRITER, &r.diags) < 0)
                        r.errors = true;
                if (spec_refuse_peer_self_signed(&set, in->caps & TARGET_CAP_PEER_SELF_SIGNED,
                                                 &r.diags) < 0)
                        r.errors = true;
                if (kube_contexts(in, &set, &r.diags) < 0)
                        r.errors = true;
        }
        for (size_t i = 0; in->rev && i < in->rev->n_notes; i++)
                diag_add(&r.diags, DIAG_NOTE, in->rev->notes[i].path, 0, 0, "skipped: %s",
                         in->rev->notes[i].reason);

        verdicts(&set, &priors, &r);
        cluster_set_release(&set);
        /* spec.dependsOn: names of this source's clusters, without a cycle (order.h). */
        order_check(in, &r);
        if (!validate) {
                policy *owned = NULL;
                const policy *pol = policy_of(in, &owned);
                for (size_t i = 0; i < r.n; i++)
                        if (r.items[i].verdict == INTAKE_TAKEN)
                                judge(in, pol, &priors, &r.items[i]);
                policy_free(owned);
        }
        strmap_release(&priors.by_id);
        *ret = r;
        return 0;
}

int spec_intake_removal(const intake_input *in, const intake_prior *prior, intake_cluster *ret)
{
        if (!in || !prior || !ret)
                return -EINVAL;
        intake_cluster c = {.id = xstrdup(prior->id),
                            .verdict = INTAKE_TAKEN,
                            .exists = true,
                            .changes = 1u << POLICY_CHANGE_DELETION,
                            .diags = DIAG_LIST_INIT};
        policy *owned = NULL;
        const policy *pol = policy_of(in, &owned);
        /* No file defines it any more: the whole source must stay as it is. */
        gate(in, pol, NULL, 0, prior->commit, &c);
        policy_free(owned);
        *ret = c;
        return 0;
}

/*
 * Failure domains (see domains.h): placement that spreads members over
 * every key, and the judgement of a placement against the loss of one
 * domain value.
 *
 * A member set of n keeps quorum while n/2+1 of its members run, so a
 * domain value may hold at most (n-1)/2 of them. Placement is greedy: each
 * new member takes the machine whose domain values hold the fewest members
 * already (the largest count over the keys, then their sum, then list
 * order). For one key this fills the values evenly, which is the best any
 * placement can do; with several keys a spec may still need its machines
 * reordered, and the judgement says whether one key alone makes the loss
 * unavoidable (its values cannot hold n members at (n-1)/2 each).
 */
#include <string.h>

#include "api/domains.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

bool hosts_have_domains(const hosts_spec *hs)
{
        for (size_t i = 0; i < hs->n; i++)
                if (hs->items[i].domains.n)
                        return true;
        return false;
}

/* Every key some machine names, in order of first appearance. */
static size_t domain_keys(const hosts_spec *hs, const char ***ret_keys)
{
        const char **keys = NULL;
        size_t n = 0, alloc = 0;
        for (size_t i = 0; i < hs->n; i++)
                for (size_t j = 0; j < hs->items[i].domains.n; j++) {
                        const char *k = hs->items[i].domains.items[j].key;
                        bool seen = false;
                        for (size_t x = 0; x < n && !seen; x++)
                                seen = streq(keys[x], k);
                        if (seen)
                                continue;
                        keys = xgrow(keys, &alloc, n + 1, sizeof(*keys));
                        keys[n++] = k;
                }
        *ret_keys = keys;
        return n;
}

/* Whether machines a and b share key's value (a machine without the key shares it with none). */
static bool same_domain(const hosts_spec *hs, size_t a, size_t b, const char *key)
{
        if (a == b)
                return true;
        const char *va = kv_get(&hs->items[a].domains, key);
        const char *vb = kv_get(&hs->items[b].domains, key);
        return va && vb && streq(va, vb);
}

int domains_pick(const hosts_spec *hs, const bool *taken, const bool *candidate)
{
        const char **keys = NULL;
        size_t n_keys = domain_keys(hs, &keys);
        int best = -1;
        size_t best_worst = 0, best_sum = 0;
        for (size_t i = 0; i < hs->n; i++) {
                if (!candidate[i] || taken[i])
                        continue;
                size_t worst = 0, sum = 0;
                for (size_t k = 0; k < n_keys; k++) {
                        size_t count = 1; /* the new member */
                        for (size_t j = 0; j < hs->n; j++)
                                if (taken[j] && j != i && same_domain(hs, i, j, keys[k]))
                                        count++;
                        worst = MAX(worst, count);
                        sum += count;
                }
                if (best < 0 || worst < best_worst || (worst == best_worst && sum < best_sum)) {
                        best = (int)i;
                        best_worst = worst;
                        best_sum = sum;
                }
        }
        free(keys);
        return best;
}

void domains_place(const hosts_spec *hs, size_t n, size_t *ret_idx)
{
        bool *taken = xcalloc(hs->n + 1, sizeof(bool));
        bool *all = xcalloc(hs->n + 1, sizeof(bool));
        for (size_t i = 0; i < hs->n; i++)
                all[i] = true;
        for (size_t k = 0; k < n && k < hs->n; k++) {
                int i = domains_pick(hs, taken, all);
                ret_idx[k] = (size_t)i;
                taken[i] = true;
        }
        free(taken);
        free(all);
}

/*
 * Whether key alone allows a placement of n members on these machines
 * with at most (n-1)/2 in any one value (a machine without the key is a
 * value of its own).
 */
static bool key_avoidable(const hosts_spec *hs, const char *key, size_t n, size_t *ret_values)
{
        size_t cap = (n - 1) / 2, room = 0, values = 0;
        for (size_t i = 0; i < hs->n; i++) {
                bool first = true;
                size_t machines = 0;
                for (size_t j = 0; j < hs->n; j++)
                        if (same_domain(hs, i, j, key)) {
                                if (j < i)
                                        first = false;
                                machines++;
                        }
                if (!first)
                        continue;
                values++;
                room += MIN(machines, cap);
        }
        *ret_values = values;
        return room >= n;
}

size_t domains_risks(const hosts_spec *hs, const size_t *placement, size_t n,
                     domain_risk **ret_risks)
{
        *ret_risks = NULL;
        if (n < 3)
                return 0;
        const char **keys = NULL;
        size_t n_keys = domain_keys(hs, &keys);
        size_t quorum = n / 2 + 1, n_risks = 0, alloc = 0;
        domain_risk *risks = NULL;
        for (size_t k = 0; k < n_keys; k++)
                for (size_t a = 0; a < n; a++) {
                        const char *value = kv_get(&hs->items[placement[a]].domains, keys[k]);
                        if (!value)
                                continue;
                        bool first = true;
                        size_t count = 0;
                        for (size_t b = 0; b < n; b++)
                                if (same_domain(hs, placement[a], placement[b], keys[k])) {
                                        if (b < a)
                                                first = false;
                                        count++;
                                }
                        if (!first || n - count >= quorum)
                                continue;
                        risks = xgrow(risks, &alloc, n_risks + 1, sizeof(*risks));
                        domain_risk *r = &risks[n_risks++];
                        *r = (domain_risk){.key = xstrdup(keys[k]),
                                           .value = xstrdup(value),
                                           .members = xcalloc(count, sizeof(size_t)),
                                           .replicas = n};
                        for (size_t b = 0; b < n; b++)
                                if (same_domain(hs, placement[a], placement[b], keys[k]))
                                        r->members[r->n++] = b;
                        r->avoidable = key_avoidable(hs, keys[k], n, &r->values);
                }
        free(keys);
        *ret_risks = risks;
        return n_risks;
}

void domain_risks_free(domain_risk *risks, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(risks[i].key);
                free(risks[i].value);
                free(risks[i].members);
        }
        free(risks);
}

char *domain_risk_summary(const domain_risk *r, char *const *names)
{
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, "%s=%s holds ", r->key, r->value);
        for (size_t i = 0; i < r->n; i++)
                sb_printf(&sb, "%s%s", i ? ", " : "", names[r->members[i]]);
        sb_printf(&sb, " of %zu members: losing %s loses quorum", r->replicas, r->value);
        return sb_detach(&sb);
}

char *domain_risk_message(const domain_risk *r, char *const *names)
{
        strbuf sb = STRBUF_INIT;
        _cleanup_free_ char *summary = domain_risk_summary(r, names);
        sb_append(&sb, summary);
        size_t cap = (r->replicas - 1) / 2;
        if (!r->avoidable)
                sb_printf(&sb,
                          "; no placement on these machines avoids it: %zu members need "
                          "machines in enough %s values to hold at most %zu member%s each, and "
                          "they name %zu",
                          r->replicas, r->key, cap, cap == 1 ? "" : "s", r->values);
        else
                sb_printf(&sb, "; list the machines so that every %s holds at most %zu member%s",
                          r->key, cap, cap == 1 ? "" : "s");
        return sb_detach(&sb);
}

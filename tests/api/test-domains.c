/*
 * Failure domains (api/domains.h): where members go on machines that name
 * racks, power feeds and zones, and which placements lose quorum with one
 * domain value. Many shapes: 1, 3 and 5 members, one key and several,
 * machines that leave a key out, and domains that cannot be spread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/domains.h"
#include "api/spec.h"
#include "util/xalloc.h"

/*
 * Machines from a compact description: one string per machine,
 * "rack=r1,power=a" (an empty string names no domain).
 */
static hosts_spec machines(const char *const *desc, size_t n)
{
        hosts_spec hs = {.set = true, .items = xcalloc(n, sizeof(host_spec)), .n = n};
        for (size_t i = 0; i < n; i++) {
                hs.items[i].address = xasprintf("10.0.0.%zu", i + 1);
                char *copy = xstrdup(desc[i]), *save = NULL;
                for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
                        char *eq = strchr(p, '=');
                        *eq = '\0';
                        kv_set(&hs.items[i].domains, p, eq + 1);
                }
                free(copy);
        }
        return hs;
}

static void machines_free(hosts_spec *hs)
{
        for (size_t i = 0; i < hs->n; i++) {
                free(hs->items[i].address);
                kv_list_release(&hs->items[i].domains);
        }
        free(hs->items);
}

#define PLACE(hs, n, ...)                                                                          \
        do {                                                                                       \
                size_t got_[16], want_[] = {__VA_ARGS__};                                          \
                domains_place(&(hs), (n), got_);                                                   \
                assert_int_equal(ARRAY_LEN(want_), (n));                                           \
                for (size_t i_ = 0; i_ < (n); i_++)                                                \
                        assert_int_equal(got_[i_], want_[i_]);                                     \
        } while (0)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static char *const names5[] = {"hs-0", "hs-1", "hs-2", "hs-3", "hs-4"};

static void test_no_domains_list_order(void **state)
{
        (void)state;
        const char *d[] = {"", "", "", ""};
        hosts_spec hs = machines(d, 4);
        assert_false(hosts_have_domains(&hs));
        PLACE(hs, 3, 0, 1, 2);
        size_t p[] = {0, 1, 2};
        domain_risk *r = NULL;
        assert_int_equal(domains_risks(&hs, p, 3, &r), 0);
        assert_null(r);
        machines_free(&hs);
}

static void test_spread_over_racks(void **state)
{
        (void)state;
        /* the racks come in blocks; list order would put two members in r1 */
        const char *d[] = {"rack=r1", "rack=r1", "rack=r2", "rack=r2", "rack=r3", "rack=r3"};
        hosts_spec hs = machines(d, 6);
        assert_true(hosts_have_domains(&hs));
        PLACE(hs, 3, 0, 2, 4);
        PLACE(hs, 5, 0, 2, 4, 1, 3);
        size_t p[5];
        domains_place(&hs, 5, p);
        domain_risk *r = NULL;
        assert_int_equal(domains_risks(&hs, p, 5, &r), 0);
        machines_free(&hs);
}

static void test_one_rack_loses_quorum(void **state)
{
        (void)state;
        const char *d[] = {"rack=r1", "rack=r1", "rack=r1"};
        hosts_spec hs = machines(d, 3);
        size_t p[3];
        domains_place(&hs, 3, p);
        domain_risk *r = NULL;
        size_t n = domains_risks(&hs, p, 3, &r);
        assert_int_equal(n, 1);
        assert_string_equal(r[0].key, "rack");
        assert_string_equal(r[0].value, "r1");
        assert_int_equal(r[0].n, 3);
        assert_false(r[0].avoidable);
        char *msg = domain_risk_message(&r[0], names5);
        assert_non_null(strstr(msg, "rack=r1 holds hs-0, hs-1, hs-2 of 3 members: losing r1 "
                                    "loses quorum; no placement on these machines avoids it"));
        free(msg);
        domain_risks_free(r, n);
        machines_free(&hs);
}

static void test_two_of_three_in_one_rack(void **state)
{
        (void)state;
        const char *d[] = {"rack=r1", "rack=r1", "rack=r2"};
        hosts_spec hs = machines(d, 3);
        size_t p[3];
        domains_place(&hs, 3, p);
        domain_risk *r = NULL;
        size_t n = domains_risks(&hs, p, 3, &r);
        assert_int_equal(n, 1);
        char *names[3];
        for (size_t i = 0; i < 3; i++)
                names[i] = names5[i];
        char *msg = domain_risk_message(&r[0], names);
        /* placed in order 0, 2, 1: members hs-0 and hs-2 are the ones in r1 */
        assert_non_null(strstr(msg, "rack=r1 holds hs-0, hs-2 of 3 members: losing r1 loses "
                                    "quorum"));
        assert_false(r[0].avoidable);
        assert_int_equal(r[0].values, 2);
        free(msg);
        domain_risks_free(r, n);
        machines_free(&hs);
}

static void test_single_member_never_judged(void **state)
{
        (void)state;
        const char *d[] = {"rack=r1", "rack=r1"};
        hosts_spec hs = machines(d, 2);
        PLACE(hs, 1, 0);
        size_t p[] = {0, 1};
        domain_risk *r = NULL;
        assert_int_equal(domains_risks(&hs, p, 1, &r), 0);
        assert_int_equal(domains_risks(&hs, p, 2, &r), 0);
        machines_free(&hs);
}

static void test_several_keys(void **state)
{
        (void)state;
        /* racks spread in list order, but r1 and r2 share the power feed a */
        const char *d[] = {"rack=r1,power=a", "rack=r2,power=a", "rack=r3,power=b",
                           "rack=r4,power=c"};
        hosts_spec hs = machines(d, 4);
        PLACE(hs, 3, 0, 2, 3);
        size_t p[3];
        domains_place(&hs, 3, p);
        domain_risk *r = NULL;
        assert_int_equal(domains_risks(&hs, p, 3, &r), 0);
        /* the list-order placement is judged on both keys */
        size_t bad[] = {0, 1, 2};
        size_t n = domains_risks(&hs, bad, 3, &r);
        assert_int_equal(n, 1);
        assert_string_equal(r[0].key, "power");
        assert_string_equal(r[0].value, "a");
        assert_true(r[0].avoidable);
        domain_risks_free(r, n);
        machines_free(&hs);
}

static void test_machine_without_key_is_alone(void **state)
{
        (void)state;
        /* the unnamed machine shares no rack: it goes before a second r1 */
        const char *d[] = {"rack=r1", "rack=r1", "", "rack=r2"};
        hosts_spec hs = machines(d, 4);
        PLACE(hs, 3, 0, 2, 3);
        size_t p[3];
        domains_place(&hs, 3, p);
        domain_risk *r = NULL;
        assert_int_equal(domains_risks(&hs, p, 3, &r), 0);
        machines_free(&hs);
}

static void test_five_members_three_racks(void **state)
{
        (void)state;
        /* 5 members tolerate 2 lost: three racks of two machines hold 2, 2, 1 */
        const char *d[] = {"rack=r1", "rack=r1", "rack=r1", "rack=r2", "rack=r2", "rack=r3"};
        hosts_spec hs = machines(d, 6);
        size_t p[5];
        domains_place(&hs, 5, p);
        domain_risk *r = NULL;
        assert_int_equal(domains_risks(&hs, p, 5, &r), 0);
        machines_free(&hs);

        /* two racks: 5 members put 3 in one of them, whatever the order */
        const char *d2[] = {"rack=r1", "rack=r2", "rack=r1", "rack=r2", "rack=r1"};
        hosts_spec hs2 = machines(d2, 5);
        domains_place(&hs2, 5, p);
        size_t n = domains_risks(&hs2, p, 5, &r);
        assert_int_equal(n, 1);
        assert_string_equal(r[0].value, "r1");
        assert_int_equal(r[0].n, 3);
        assert_false(r[0].avoidable);
        char *msg = domain_risk_message(&r[0], names5);
        assert_non_null(strstr(msg, "5 members need machines in enough rack values to hold at "
                                    "most 2 members each, and they name 2"));
        free(msg);
        domain_risks_free(r, n);
        machines_free(&hs2);
}

static void test_pick_with_members_placed(void **state)
{
        (void)state;
        const char *d[] = {"zone=a", "zone=a", "zone=b", "zone=b", "zone=c"};
        hosts_spec hs = machines(d, 5);
        bool taken[5] = {true, false, true, false, false};
        bool cand[5] = {false, true, false, true, true};
        assert_int_equal(domains_pick(&hs, taken, cand), 4);
        cand[4] = false; /* zone c unreachable: the first of the rest */
        assert_int_equal(domains_pick(&hs, taken, cand), 1);
        bool none[5] = {0};
        assert_int_equal(domains_pick(&hs, taken, none), -1);
        machines_free(&hs);
}

static const char spec_head[] = "apiVersion: gitcd.io/v1alpha1\n"
                                "kind: EtcdCluster\n"
                                "metadata: {name: hs}\n"
                                "spec:\n"
                                "  replicas: 3\n"
                                "  hosts:\n"
                                "    mode: systemd\n";

/* What intake says about text: its diagnostics joined, and the load's result. */
static int load(const char *tail, char **ret_text)
{
        _cleanup_free_ char *text = xasprintf("%s%s", spec_head, tail);
        cluster_set set = {0};
        diag_list d = {0};
        int k = spec_load_buffer("hs.yaml", text, strlen(text), &set, &d);
        _cleanup_free_ char *all = xstrdup("");
        for (size_t i = 0; i < d.n; i++) {
                char *more = xasprintf("%s%s\n", all, d.items[i].message);
                free(all);
                all = more;
        }
        *ret_text = TAKE_PTR(all);
        cluster_set_release(&set);
        diag_list_release(&d);
        return k;
}

static void test_intake_strict_refuses(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL;
        assert_true(load("    machines:\n"
                         "    - {address: h1, domains: {rack: r1}}\n"
                         "    - {address: h2, domains: {rack: r1}}\n"
                         "    - {address: h3, domains: {rack: r1}}\n",
                         &out) < 0);
        assert_non_null(strstr(out, "spec.hosts.placement strict: rack=r1 holds hs-0, hs-1, hs-2 "
                                    "of 3 members: losing r1 loses quorum"));
}

static void test_intake_preferred_warns(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL;
        assert_int_equal(load("    placement: preferred\n"
                              "    machines:\n"
                              "    - {address: h1, domains: {rack: r1}}\n"
                              "    - {address: h2, domains: {rack: r1}}\n"
                              "    - {address: h3, domains: {rack: r1}}\n",
                              &out),
                         0);
        assert_non_null(strstr(out, "spec.hosts.placement preferred: rack=r1 holds"));
}

static void test_intake_spread_is_quiet(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL;
        assert_int_equal(load("    machines:\n"
                              "    - {address: h1, domains: {rack: r1, power: a}}\n"
                              "    - {address: h2, domains: {rack: r1, power: a}}\n"
                              "    - {address: h3, domains: {rack: r2, power: b}}\n"
                              "    - {address: h4, domains: {rack: r3, power: c}}\n",
                              &out),
                         0);
        assert_string_equal(out, "");
}

static void test_intake_bad_domains(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL;
        assert_true(load("    placement: sometimes\n"
                         "    machines:\n"
                         "    - {address: h1, domains: {rack: \"r 1\"}}\n"
                         "    - {address: h2, domains: {\"$(reboot)\": r2}}\n"
                         "    - {address: h3, domains: [r3]}\n",
                         &out) < 0);
        assert_non_null(strstr(out, "\"sometimes\" is not one of"));
        assert_non_null(strstr(out, "\"r 1\" is not a valid label value"));
        assert_non_null(strstr(out, "\"$(reboot)\" is not a valid key"));
        assert_non_null(strstr(out, "spec.hosts.machines[2].domains"));
}

static void test_intake_missing_key_warned(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL;
        assert_int_equal(load("    machines:\n"
                              "    - {address: h1, domains: {rack: r1}}\n"
                              "    - {address: h2}\n"
                              "    - {address: h3, domains: {rack: r2}}\n",
                              &out),
                         0);
        assert_non_null(strstr(out, "spec.hosts.machines[1] (h2) names no rack while "
                                    "spec.hosts.machines[0] does: it is counted in a rack of its "
                                    "own"));
}

static void test_intake_placement_without_domains(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL;
        assert_int_equal(load("    placement: preferred\n"
                              "    machines: [{address: h1}, {address: h2}, {address: h3}]\n",
                              &out),
                         0);
        assert_non_null(strstr(out, "spec.hosts.placement: no machine names domains, so there is "
                                    "nothing to judge"));
}

static void test_normalized_round_trip(void **state)
{
        (void)state;
        static const char text[] = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                   "metadata: {name: hs}\nspec:\n  replicas: 1\n  hosts:\n"
                                   "    mode: systemd\n    placement: preferred\n"
                                   "    machines:\n"
                                   "    - {address: h1, domains: {rack: r1, zone: z1}}\n"
                                   "    - {address: h2}\n";
        cluster_set set = {0};
        diag_list d = {0};
        assert_int_equal(spec_load_buffer("hs.yaml", text, strlen(text), &set, &d), 0);
        etcd_cluster *c = set.items[0];
        json_t *j = spec_to_json(c);
        json_t *m0 = json_array_get(
            json_object_get(json_object_get(json_object_get(j, "spec"), "hosts"), "machines"), 0);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(m0, "domains"), "zone")), "z1");
        _cleanup_(etcd_cluster_freep) etcd_cluster *back = NULL;
        assert_int_equal(spec_from_json(j, "stored", &back, &d), 0);
        json_decref(j);
        assert_int_equal(back->hosts.placement, HOST_PLACEMENT_PREFERRED);
        assert_string_equal(kv_get(&back->hosts.items[0].domains, "rack"), "r1");
        assert_int_equal(back->hosts.items[1].domains.n, 0);
        _cleanup_free_ char *h1 = spec_hash(c), *h2 = spec_hash(back);
        assert_string_equal(h1, h2);
        cluster_set_release(&set);
        diag_list_release(&d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_no_domains_list_order),
            cmocka_unit_test(test_spread_over_racks),
            cmocka_unit_test(test_one_rack_loses_quorum),
            cmocka_unit_test(test_two_of_three_in_one_rack),
            cmocka_unit_test(test_single_member_never_judged),
            cmocka_unit_test(test_several_keys),
            cmocka_unit_test(test_machine_without_key_is_alone),
            cmocka_unit_test(test_five_members_three_racks),
            cmocka_unit_test(test_pick_with_members_placed),
            cmocka_unit_test(test_intake_strict_refuses),
            cmocka_unit_test(test_intake_preferred_warns),
            cmocka_unit_test(test_intake_spread_is_quiet),
            cmocka_unit_test(test_intake_bad_domains),
            cmocka_unit_test(test_intake_missing_key_warned),
            cmocka_unit_test(test_intake_placement_without_domains),
            cmocka_unit_test(test_normalized_round_trip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

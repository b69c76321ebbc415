/*
 * spec.auth through reconciler_pass, on the fake world (tests/fake/fake.h),
 * whose etcd refuses membership changes and auth calls without root's
 * password once auth is on. What an operator would notice:
 *  - auth switched on for a running cluster: root created with the password
 *    gitcd generated into the state folder (0600), auth enabled, and every
 *    later step (a scale-up) authenticated; never a call refused;
 *  - auth on from creation; a new root-password changes etcd's; auth off;
 *  - auth switched on outside gitcd: a clear message until it is given the
 *    password, then taken on;
 *  - gitcd killed at every point of enabling auth or of a password change:
 *    started again it finishes, with the password in the files being the
 *    one etcd has and no call refused for lack of it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "reconciler/auth.h"
#include "reconciler/reconcile.h"
#include "tests/fake/fixture.h"
#include "util/fs.h"
#include "util/xalloc.h"

static const fx_config config = {.name = "auth", .state_dir = true};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

static void offer(fx *f, int replicas, const char *auth)
{
        fx_offer(f, NULL,
                 "  replicas: %d\n  version: \"3.5.16\"\n"
                 "  progressDeadlineSeconds: 3600\n%s",
                 replicas, auth);
}

#define AUTH_ON  "  auth:\n    enabled: true\n"
#define AUTH_OFF ""

static char *auth_file(fx *f, const char *name)
{
        return xasprintf("%s/auth/%s/%s", f->state_dir, f->cluster, name);
}

/* A password file's first line; NULL when it is missing. */
static char *read_pw(fx *f, const char *name)
{
        _cleanup_free_ char *path = auth_file(f, name);
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, 4096, &data, &len) == -ENOENT)
                return NULL;
        assert_non_null(data);
        data[strcspn(data, "\n")] = '\0';
        return data;
}

static void write_pw(fx *f, const char *password)
{
        _cleanup_free_ char *path = auth_file(f, "root-password");
        _cleanup_free_ char *dir = auth_file(f, "");
        assert_int_equal(mkdir_p(dir, 0700), 0);
        _cleanup_free_ char *line = xasprintf("%s\n", password);
        assert_int_equal(write_file_atomic(path, line, strlen(line), 0600), 0);
}

/* The stored AuthEnabled condition's status and reason (NULL: none). */
static void auth_condition(fx *f, char **ret_status, char **ret_reason)
{
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, f->cluster, &sc), 0);
        *ret_status = *ret_reason = NULL;
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, "AuthEnabled")) {
                        *ret_status = xstrdup(sc->conditions[i].status);
                        *ret_reason = xstrdup(sc->conditions[i].reason);
                }
        state_cluster_free(sc);
}

static void assert_condition(fx *f, const char *status, const char *reason)
{
        _cleanup_free_ char *st = NULL, *why = NULL;
        auth_condition(f, &st, &why);
        if (!status) {
                assert_null(st);
                return;
        }
        assert_non_null(st);
        assert_string_equal(st, status);
        assert_string_equal(why, reason);
}

/* Auth is on in etcd with the password of root-password, recorded as etcd's; nothing pending. */
static void assert_auth_on(fx *f)
{
        assert_true(f->w->auth.enabled);
        _cleanup_free_ char *wanted = read_pw(f, "root-password");
        _cleanup_free_ char *applied = read_pw(f, "root-password.etcd");
        _cleanup_free_ char *next = read_pw(f, "root-password.next");
        assert_non_null(wanted);
        assert_string_equal(f->w->auth.root_password, wanted);
        assert_non_null(applied);
        assert_string_equal(applied, wanted);
        assert_null(next);
        assert_condition(f, "True", "Enabled");
        /* what every gitcd client of the cluster is given */
        auth_creds cr = {0};
        assert_int_equal(auth_credentials(f->state_dir, f->cluster, &cr), 0);
        assert_string_equal(cr.user, "root");
        assert_string_equal(cr.password, wanted);
        assert_null(cr.fallback_password);
        auth_creds_release(&cr);
}

static void auth_switched_on_off_and_rotated(void **state)
{
        fx *f = *state;
        offer(f, 3, AUTH_OFF);
        fx_converge(f, NULL);
        assert_false(f->w->auth.enabled);
        _cleanup_free_ char *dir = xasprintf("%s/auth", f->state_dir);
        assert_false(path_exists(dir)); /* nothing asked, nothing written */
        assert_condition(f, NULL, NULL);

        offer(f, 3, AUTH_ON);
        fx_converge(f, NULL);
        assert_auth_on(f);
        assert_int_equal(fx_audit_count(f, "auth.enable"), 1);
        _cleanup_free_ char *path = auth_file(f, "root-password");
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_true(strlen(f->w->auth.root_password) >= 32);

        /* membership changes under auth: gitcd authenticates */
        offer(f, 5, AUTH_ON);
        fx_converge(f, NULL);
        assert_int_equal(fake_etcd_count(f->w, NULL), 5);
        assert_int_equal(f->w->auth_refusals, 0);

        /* the operator replaces the password: etcd's follows */
        write_pw(f, "second-password-0123456789");
        fx_converge(f, NULL);
        assert_auth_on(f);
        assert_string_equal(f->w->auth.root_password, "second-password-0123456789");
        assert_int_equal(fx_audit_count(f, "auth.password-change"), 1);
        fx_converge(f, NULL); /* nothing more to do */
        assert_int_equal(fx_audit_count(f, "auth.password-change"), 1);

        /* gitcd started again: the recorded password still opens etcd */
        fx_close(f);
        fx_open(f);
        offer(f, 4, AUTH_ON);
        fx_converge(f, NULL);
        assert_int_equal(fake_etcd_count(f->w, NULL), 4);

        offer(f, 4, AUTH_OFF);
        fx_converge(f, NULL);
        assert_false(f->w->auth.enabled);
        assert_int_equal(fx_audit_count(f, "auth.disable"), 1);
        assert_condition(f, "False", "Disabled");

        /* on again: the same root user and password */
        offer(f, 4, AUTH_ON);
        fx_converge(f, NULL);
        assert_auth_on(f);
        assert_int_equal(fx_audit_count(f, "auth.enable"), 2);
        assert_int_equal(f->w->auth_refusals, 0);
        fx_assert_no_pending_ops(f);
}

static void auth_on_at_creation(void **state)
{
        fx *f = *state;
        write_pw(f, "chosen-by-the-operator-42"); /* a password put there before */
        offer(f, 3, AUTH_ON);
        fx_converge(f, NULL);
        assert_auth_on(f);
        assert_string_equal(f->w->auth.root_password, "chosen-by-the-operator-42");
        assert_int_equal(f->w->auth_refusals, 0);
}

/* The audit log never holds a password. */
static void audit_holds_no_password(void **state)
{
        fx *f = *state;
        offer(f, 1, AUTH_ON);
        fx_converge(f, NULL);
        write_pw(f, "rotated-secret-password-xyz");
        fx_converge(f, NULL);
        state_audit_filter flt = {.cluster = f->cluster};
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(f->db, &flt, &l), 0);
        assert_true(l.n > 0);
        for (size_t i = 0; i < l.n; i++) {
                const state_audit_event *ev = l.items[i];
                const char *fields[] = {ev->reason, ev->before_json, ev->after_json};
                for (size_t j = 0; j < 3; j++)
                        assert_null(fields[j] ? strstr(fields[j], "rotated-secret") : NULL);
        }
        state_audit_list_release(&l);
}

/*
 * Auth switched on outside gitcd, with a root password gitcd does not know:
 * it says what to do and waits; given the password, it takes the cluster on.
 */
static void auth_on_outside_gitcd(void **state)
{
        fx *f = *state;
        offer(f, 3, AUTH_OFF);
        fx_converge(f, NULL);
        f->w->auth.enabled = f->w->auth.root_user = f->w->auth.root_role = true;
        f->w->auth.root_granted = true;
        snprintf(f->w->auth.root_password, sizeof(f->w->auth.root_password), "foreign-pw-1234");

        offer(f, 3, AUTH_ON);
        pass_result res;
        assert_int_equal(fx_converge_n(f, 5, &res), PASS_WAITING);
        assert_non_null(strstr(res.message, "etcd refuses root's password"));
        assert_non_null(strstr(res.message, "root-password"));
        assert_condition(f, "False", "PasswordRefused");
        _cleanup_free_ char *next = read_pw(f, "root-password.next");
        assert_null(next);
        assert_string_equal(f->w->auth.root_password, "foreign-pw-1234");

        write_pw(f, "foreign-pw-1234");
        fx_converge(f, NULL);
        assert_auth_on(f);
        /* and from then on a new password is set as usual */
        write_pw(f, "rotated-after-adoption-99");
        fx_converge(f, NULL);
        assert_auth_on(f);
        assert_string_equal(f->w->auth.root_password, "rotated-after-adoption-99");
}

static const char *const enable_points[] = {"auth.after-next", "auth.after-user",
                                            "auth.before-enable", "auth.after-enable"};

static void killed_while_enabling(void **state)
{
        fx *f = *state;
        offer(f, 3, AUTH_OFF);
        fx_converge(f, NULL);
        for (size_t i = 0; i < ARRAY_SIZE(enable_points); i++) {
                offer(f, 3, AUTH_ON);
                fx_run_until_killed(f, enable_points[i]);
                fx_converge(f, NULL);
                assert_auth_on(f);
                /* and a membership change afterwards is authenticated */
                offer(f, 4, AUTH_ON);
                fx_converge(f, NULL);
                assert_int_equal(f->w->auth_refusals, 0);
                offer(f, 3, AUTH_OFF);
                fx_converge(f, NULL);
                assert_false(f->w->auth.enabled);
        }
}

static void killed_while_rotating(void **state)
{
        fx *f = *state;
        offer(f, 3, AUTH_ON);
        fx_converge(f, NULL);
        const char *points[] = {"auth.after-next", "auth.after-change"};
        for (size_t i = 0; i < ARRAY_SIZE(points); i++) {
                _cleanup_free_ char *pw = xasprintf("rotation-%zu-abcdefghijklmnop", i);
                write_pw(f, pw);
                fx_run_until_killed(f, points[i]);
                /* the first pass after the kill observes etcd: one of the two passwords works */
                offer(f, 4 + (int)i, AUTH_ON);
                fx_converge(f, NULL);
                assert_auth_on(f);
                assert_string_equal(f->w->auth.root_password, pw);
                assert_int_equal(f->w->auth_refusals, 0);
        }
}

#define AUTH_SECRET                                                                                \
        "  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: etcd-root\n"

/* The Secret of rootCredentialsSecretRef as the local target finds it: a folder on gitcd's host. */
static void write_secret(fx *f, const char *password)
{
        _cleanup_free_ char *dir = xasprintf("%s/secrets/default/etcd-root", f->state_dir);
        assert_int_equal(mkdir_p(dir, 0700), 0);
        _cleanup_free_ char *path = path_join(dir, "password");
        if (!password) {
                (void)unlink(path);
                return;
        }
        _cleanup_free_ char *line = xasprintf("%s\n", password);
        assert_int_equal(write_file_atomic(path, line, strlen(line), 0600), 0);
}

static void root_password_from_secret(void **state)
{
        fx *f = *state;
        offer(f, 3, AUTH_OFF);
        fx_converge(f, NULL);

        /* the Secret is missing: auth waits, says which Secret and what to create, nothing
         * is enabled and no password is made up */
        offer(f, 3, AUTH_SECRET);
        pass_result res = {0};
        for (int i = 0; i < 20; i++)
                res = fx_pass(f);
        assert_false(f->w->auth.enabled);
        assert_string_equal(res.reason, "AuthPending");
        assert_non_null(strstr(res.message, "root credentials Secret default/etcd-root"));
        assert_non_null(strstr(res.message, "secrets/default/etcd-root/password"));
        _cleanup_free_ char *none = read_pw(f, "root-password");
        assert_null(none);
        assert_condition(f, "False", "AuthFailed");

        /* the Secret appears: its password is root's */
        write_secret(f, "from-the-secret-0123456789");
        fx_converge(f, NULL);
        assert_auth_on(f);
        assert_string_equal(f->w->auth.root_password, "from-the-secret-0123456789");
        assert_int_equal(fx_audit_count(f, "auth.enable"), 1);

        /* a new value in the Secret rotates etcd's password, once */
        write_secret(f, "rotated-in-the-secret-987654");
        fx_converge(f, NULL);
        assert_auth_on(f);
        assert_string_equal(f->w->auth.root_password, "rotated-in-the-secret-987654");
        assert_int_equal(fx_audit_count(f, "auth.password-change"), 1);
        fx_converge(f, NULL);
        assert_int_equal(fx_audit_count(f, "auth.password-change"), 1);

        /* the key removed from the Secret: auth stays on with the password etcd has */
        write_secret(f, NULL);
        for (int i = 0; i < 5; i++)
                res = fx_pass(f);
        assert_true(f->w->auth.enabled);
        assert_string_equal(f->w->auth.root_password, "rotated-in-the-secret-987654");
        assert_non_null(strstr(res.message, "etcd-root"));
        assert_null(strstr(res.message, "rotated-in-the-secret"));
        assert_int_equal(f->w->auth_refusals, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(auth_switched_on_off_and_rotated, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(auth_on_at_creation, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(audit_holds_no_password, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(auth_on_outside_gitcd, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(killed_while_enabling, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(killed_while_rotating, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(root_password_from_secret, setup, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

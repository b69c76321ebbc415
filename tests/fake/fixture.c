/*
 * The shared fixture of the fake-world reconciler tests (fixture.h).
 *
 * Design: the fixture owns every handle and path it makes; a test file
 * adds only what is its own through fx_config (a hook before the first
 * open, one at teardown, and fx.data). Failures are cmocka assertions, so
 * a helper that cannot do its part fails the test that called it.
 */
#include <assert.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/spec.h"
#include "tests/fake/fixture.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* etcd's tool for 3.5.16, the version the fake-world specs run, as config->etcdutl says. */
static void write_etcdutl(fx *f)
{
        f->etcd_dir = xasprintf("%s/etcd", f->dir);
        _cleanup_free_ char *tooldir = xasprintf("%s/3.5.16", f->etcd_dir);
        assert_int_equal(mkdir_p(tooldir, 0755), 0);
        _cleanup_free_ char *tool = xasprintf("%s/etcdutl", tooldir);
        FILE *fp = fopen(tool, "we");
        assert_non_null(fp);
        fputs(f->config->etcdutl, fp);
        assert_int_equal(fclose(fp), 0);
        assert_int_equal(chmod(tool, 0755), 0);
}

int fx_setup(void **state, const fx_config *config)
{
        assert(config && config->name);
        fx *f = XNEW(fx);
        f->config = config;
        f->cluster = config->cluster ? config->cluster : FX_CLUSTER;
        f->dir = xasprintf("/tmp/gitcd-%s-XXXXXX", config->name);
        assert_non_null(mkdtemp(f->dir));
        f->db_path = xasprintf("%s/state.db", f->dir);
        if (config->etcdutl)
                write_etcdutl(f);
        if (config->state_dir)
                f->state_dir = xasprintf("%s/state", f->dir);
        f->w = fake_world_new();
        if (config->prepare)
                config->prepare(f);
        fx_open(f);
        *state = f;
        return 0;
}

int fx_teardown(void **state)
{
        fx *f = *state;
        fx_close(f);
        pass_result_release(&f->last);
        if (f->config->release)
                f->config->release(f);
        fake_world_free(f->w);
        (void)rm_rf(f->dir);
        free(f->dir);
        free(f->db_path);
        free(f->etcd_dir);
        free(f->state_dir);
        free(f);
        *state = NULL;
        return 0;
}

void fx_open(fx *f)
{
        assert_int_equal(state_open(f->db_path, STATE_OPEN_READ_WRITE, &f->db), 0);
        assert_int_equal(fake_target_new(f->w, &f->t), 0);
        fake_world_make_current(f->w);
        reconciler_opts o = {
            .db = f->db,
            .target = f->t,
            .etcd = &fake_etcd_ops,
            .etcd_userdata = f->w,
            .etcd_dir = f->etcd_dir,
            .state_dir = f->state_dir,
            .wall_ms = fake_clock_ms,
            .mono_ms = fake_clock_ms,
            .member_metrics = f->config->member_metrics,
        };
        assert_int_equal(reconciler_new(&o, &f->r), 0);
}

void fx_close(fx *f)
{
        reconciler_free(f->r);
        f->r = NULL;
        target_free(f->t);
        f->t = NULL;
        state_close(f->db);
        f->db = NULL;
}

void fx_offer(fx *f, const reconcile_origin *origin, const char *fmt, ...)
{
        const char *slash = strchr(f->cluster, '/');
        assert(slash);
        const char *name = slash + 1;
        strbuf y = STRBUF_INIT;
        sb_printf(&y,
                  "apiVersion: gitcd.io/v1alpha1\n"
                  "kind: EtcdCluster\n"
                  "metadata:\n  name: %s\n  namespace: %.*s\n"
                  "spec:\n",
                  name, (int)(slash - f->cluster), f->cluster);
        va_list ap;
        va_start(ap, fmt);
        sb_vprintf(&y, fmt, ap);
        va_end(ap);
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        int k = spec_load_buffer(file, sb_str(&y), y.len, &set, &d);
        for (size_t i = 0; k < 0 && i < d.n; i++)
                fprintf(stderr, "%s\n", d.items[i].message);
        assert_int_equal(k, 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(reconciler_offer(f->r, set.items[0], origin), 0);
        cluster_set_release(&set);
        diag_list_release(&d);
        sb_release(&y);
}

void fx_wait(fx *f, const pass_result *res)
{
        fake_world_advance(f->w, res->poll_ms > 0 ? res->poll_ms : 200);
}

pass_result fx_pass(fx *f)
{
        pass_result_release(&f->last);
        pass_result res = {0};
        assert_int_equal(reconciler_pass(f->r, f->cluster, &res), 0);
        if (res.outcome == PASS_WAITING || res.outcome == PASS_BLOCKED)
                fx_wait(f, &res);
        f->last = res;
        return res;
}

pass_outcome fx_converge_n(fx *f, int max_passes, pass_result *ret)
{
        pass_result res = {0};
        for (int i = 0; i < max_passes; i++) {
                res = fx_pass(f);
                if (res.outcome == PASS_CONVERGED || res.outcome == PASS_FAILED)
                        break;
        }
        if (ret)
                *ret = res;
        return res.outcome;
}

void fx_converge(fx *f, pass_result *ret)
{
        pass_result res;
        pass_outcome o = fx_converge_n(f, FX_MAX_PASSES, &res);
        if (o != PASS_CONVERGED)
                fprintf(stderr, "not converged: %s %s: %s\n", pass_outcome_name(o), res.reason,
                        res.message);
        assert_int_equal(o, PASS_CONVERGED);
        if (ret)
                *ret = res;
}

void fx_run_until_killed(fx *f, const char *failpoint)
{
        fx_close(f);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("GITCD_FAILPOINT", failpoint, 1);
                fx_open(f);
                (void)fx_converge_n(f, FX_MAX_PASSES, NULL);
                _exit(0); /* the failpoint was never reached */
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status))
                fprintf(stderr, "failpoint %s was not reached\n", failpoint);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
        fx_open(f);
}

int fx_audit_count_by(fx *f, const char *action, const char *author)
{
        state_audit_filter flt = {.cluster = f->cluster, .action = action};
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(f->db, &flt, &l), 0);
        int n = 0;
        for (size_t i = 0; i < l.n; i++)
                if (!author || streq_ptr(l.items[i]->author, author))
                        n++;
        state_audit_list_release(&l);
        return n;
}

int fx_audit_count(fx *f, const char *action)
{
        return fx_audit_count_by(f, action, NULL);
}

void fx_assert_no_pending_ops(fx *f)
{
        state_op_list l = {0};
        assert_int_equal(state_op_list_pending(f->db, f->cluster, &l), 0);
        assert_int_equal(l.n, 0);
        state_op_list_release(&l);
}

int fx_total_starts(fx *f)
{
        int n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present)
                        n += f->w->procs[i].starts;
        return n;
}

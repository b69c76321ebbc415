/*
 * The store under hostile conditions: a file that is not a database, a
 * corrupt database, a read-only directory, a full disk and a file-size
 * limit. Each gives a clear error (through the real binary where a command
 * applies) and a non-zero exit, nothing crashes, and nothing already stored
 * is lost.
 *
 * The full disk is a real 1 MiB tmpfs when this runs as root and mount
 * works; the file-size limit (RLIMIT_FSIZE with SIGXFSZ ignored, in a
 * child) runs always, so the ENOSPC-like path is covered either way. The
 * read-only directory is tested as an unprivileged user (nobody) when
 * running as root, since root ignores directory permissions.
 */
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "tests/state/state-test.h"
#include "util/timeutil.h"

#define T0     1790000000000LL
#define NOBODY 65534

static char *mounted_dir;

static void unmount_at_exit(void)
{
        if (mounted_dir)
                (void)umount2(mounted_dir, MNT_DETACH);
}

static char *read_all(const char *path, size_t *ret_len)
{
        char *data = NULL;
        assert_int_equal(read_file(path, 1 << 26, &data, ret_len), 0);
        return data;
}

static void fill_db(const char *path, int events)
{
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", "{}", NULL, "abcd", T0), 1);
        char reason[600];
        memset(reason, 'r', sizeof(reason) - 1);
        reason[sizeof(reason) - 1] = '\0';
        for (int i = 0; i < events; i++) {
                state_audit_event ev = {.time_ms = T0 + i,
                                        .cluster = "prod/main",
                                        .action = "member.promote",
                                        .reason = reason};
                assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        }
        state_close(db);
}

static void expect_cli_error(const char *path, const char *needle)
{
        char *const cmds[][4] = {{"log", "--state", (char *)path, NULL},
                                 {"status", "--state", (char *)path, NULL}};
        for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
                run_result r = {0};
                assert_int_equal(run_gitcd(cmds[i], &r), 0);
                if (r.status != 1 || !strstr(r.err, needle))
                        fail_msg("gitcd %s: status %d, stderr: %s (wanted \"%s\")", cmds[i][0],
                                 r.status, r.err, needle);
                assert_non_null(strstr(r.err, path)); /* names the file */
                assert_int_equal(r.out[0], '\0');
                run_result_release(&r);
        }
}

static void test_not_a_database(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        static const char text[] = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                   "this is a YAML file, not a database, and it is long enough "
                                   "to fill the SQLite header and then some more bytes\n";
        assert_int_equal(write_file_atomic(path, text, sizeof(text) - 1, 0644), 0);
        expect_cli_error(path, "not a gitcd state database");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), -EBADMSG);
        /* nothing was changed */
        size_t len;
        _cleanup_free_ char *after = read_all(path, &len);
        assert_int_equal(len, sizeof(text) - 1);
        assert_memory_equal(after, text, len);
}

static void test_corrupt_database(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        fill_db(path, 200);
        size_t len;
        _cleanup_free_ char *data = read_all(path, &len);
        assert_true(len > 16 * 4096);
        /* scribble over pages in the middle of the file (the audit table) */
        for (size_t off = len / 2; off < len / 2 + 3 * 4096; off++)
                data[off] = (char)(off * 7);
        assert_int_equal(write_file_atomic(path, data, len, 0644), 0);
        expect_cli_error(path, "corrupt");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), -EBADMSG);
        assert_non_null(strstr(state_last_error(), "restore it from a backup"));

        /* a damaged header reads as "not a database" */
        _cleanup_free_ char *path2 = test_db_path();
        fill_db(path2, 5);
        _cleanup_free_ char *d2 = read_all(path2, &len);
        memcpy(d2, "SQLite format 9\0", 16);
        assert_int_equal(write_file_atomic(path2, d2, len, 0644), 0);
        expect_cli_error(path2, "not a gitcd state database");
}

/* Run fn in a child as nobody (when root); returns the child's exit status. */
static int as_unprivileged(void (*fn)(const char *), const char *arg)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (geteuid() == 0 &&
                    (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
                        _exit(99);
                fn(arg);
                _exit(0);
        }
        harness_track_pid(pid);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void create_in_readonly_dir(const char *dir)
{
        _cleanup_free_ char *path = path_join(dir, "state.db");
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
        if (r != -EACCES) {
                fprintf(stderr, "expected -EACCES, got %d: %s\n", r, state_last_error());
                _exit(1);
        }
        if (!strstr(state_last_error(), dir) || !strstr(state_last_error(), "ermission")) {
                fprintf(stderr, "unclear error: %s\n", state_last_error());
                _exit(2);
        }
        fprintf(stderr, "# read-only dir, create: %s\n", state_last_error());
        if (path_exists(path))
                _exit(3);
}

static void write_existing_in_readonly_dir(const char *dir)
{
        _cleanup_free_ char *path = path_join(dir, "state.db");
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
        if (r >= 0) {
                /* opened: then writing must fail cleanly */
                state_audit_event ev = {.time_ms = T0, .action = "member.promote"};
                r = state_audit_append(db, &ev, NULL);
                state_close(db);
        }
        if (r != -EROFS && r != -EACCES) {
                fprintf(stderr, "expected -EROFS or -EACCES, got %d: %s\n", r, state_last_error());
                _exit(1);
        }
        fprintf(stderr, "# read-only dir, write: %s\n", state_last_error());
}

static void read_in_readonly_dir(const char *dir)
{
        _cleanup_free_ char *path = path_join(dir, "state.db");
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_ONLY, &db);
        if (r < 0) {
                fprintf(stderr, "read-only open failed: %s\n", state_last_error());
                _exit(1);
        }
        state_audit_list l = {0};
        r = state_audit_query(db, NULL, &l);
        if (r < 0 || l.n != 3) {
                fprintf(stderr, "query: %d, %zu rows: %s\n", r, l.n, state_last_error());
                _exit(2);
        }
        state_audit_list_release(&l);
        state_close(db);
}

static void log_in_readonly_dir(const char *dir)
{
        _cleanup_free_ char *path = path_join(dir, "state.db");
        char *args[] = {"log", "--state", path, "-o", "json", NULL};
        run_result r = {0};
        if (run_gitcd(args, &r) < 0 || r.status != 0 || count_lines(r.out) != 3) {
                fprintf(stderr, "gitcd log as an unprivileged user: %d: %s\n", r.status, r.err);
                _exit(1);
        }
        run_result_release(&r);
}

static void test_read_only_directory(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        _cleanup_free_ char *dir = xstrdup(path);
        *strrchr(dir, '/') = '\0';
        _cleanup_free_ char *ro = path_join(dir, "ro");
        assert_int_equal(mkdir(ro, 0755), 0);
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(chmod(ro, 0555), 0);
        assert_int_equal(as_unprivileged(create_in_readonly_dir, ro), 0);

        /* a database that exists, in a folder and file the user may only read */
        _cleanup_free_ char *ro2 = path_join(dir, "ro2");
        _cleanup_free_ char *db2 = path_join(ro2, "state.db");
        fill_db(db2, 3);
        assert_int_equal(chmod(db2, 0444), 0);
        assert_int_equal(chmod(ro2, 0555), 0);
        assert_int_equal(as_unprivileged(write_existing_in_readonly_dir, ro2), 0);
        assert_int_equal(as_unprivileged(read_in_readonly_dir, ro2), 0);
        assert_int_equal(as_unprivileged(log_in_readonly_dir, ro2), 0);
        /* also without the -wal and -shm files (a database copied in, say) */
        _cleanup_free_ char *wal = xasprintf("%s-wal", db2);
        _cleanup_free_ char *shm = xasprintf("%s-shm", db2);
        (void)unlink(wal);
        (void)unlink(shm);
        assert_int_equal(as_unprivileged(read_in_readonly_dir, ro2), 0);
        assert_int_equal(as_unprivileged(log_in_readonly_dir, ro2), 0);
        assert_false(path_exists(wal));
        assert_int_equal(chmod(ro, 0755), 0);
        assert_int_equal(chmod(ro2, 0755), 0);

        /* the data is intact */
        state_db *db = NULL;
        assert_int_equal(state_open(db2, STATE_OPEN_READ_ONLY, &db), 0);
        assert_int_equal(state_check_integrity(db), 0);
        state_close(db);
}

/* Append 512-byte events until the store refuses; returns how many were stored. */
static int fill_until_error(state_db *db, int *ret_error)
{
        char reason[512];
        memset(reason, 'x', sizeof(reason) - 1);
        reason[sizeof(reason) - 1] = '\0';
        for (int i = 0; i < 100000; i++) {
                state_audit_event ev = {.time_ms = T0 + i,
                                        .cluster = "full/disk",
                                        .action = "member.promote",
                                        .reason = reason};
                int r = state_audit_append(db, &ev, NULL);
                if (r < 0) {
                        *ret_error = r;
                        return i;
                }
        }
        *ret_error = 0;
        return 100000;
}

static void check_after_full(const char *path, int stored)
{
        /* `gitcd log` still shows everything stored before the disk filled */
        char *args[] = {"log", "--state", (char *)path, "-o", "json", NULL};
        run_result r = {0};
        assert_int_equal(run_gitcd(args, &r), 0);
        if (r.status != 0)
                fail_msg("gitcd log after a full disk: %s", r.err);
        assert_int_equal(count_lines(r.out), (size_t)stored);
        run_result_release(&r);
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), 0);
        assert_int_equal(state_check_integrity(db), 0);
        state_close(db);
}

static void test_full_disk(void **state)
{
        (void)state;
        _cleanup_free_ char *base = test_db_path();
        _cleanup_free_ char *dir = xasprintf("%s.mnt", base);
        assert_int_equal(mkdir(dir, 0755), 0);
        if (mount("tmpfs", dir, "tmpfs", 0, "size=1m") < 0) {
                printf("# full disk: mount failed (%s); only the file-size limit case runs\n",
                       strerror(errno));
                skip();
        }
        mounted_dir = dir;
        atexit(unmount_at_exit);
        printf("# full disk: a real 1 MiB tmpfs\n");
        _cleanup_free_ char *path = path_join(dir, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        int err;
        int stored = fill_until_error(db, &err);
        printf("# stored %d events before: %s\n", stored, state_last_error());
        assert_int_equal(err, -ENOSPC);
        assert_non_null(strstr(state_last_error(), "no space left on device"));
        assert_non_null(strstr(state_last_error(), path));
        assert_true(stored > 0);
        /* still usable for reading while full, and closes cleanly */
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        assert_int_equal(l.n, (size_t)stored);
        state_audit_list_release(&l);
        state_close(db);
        check_after_full(path, stored);
        /* a writer that starts on the full disk gets a clear error or works; never a crash */
        int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
        if (r >= 0) {
                state_audit_event ev = {.time_ms = T0, .action = "x", .reason = "y"};
                if (state_audit_append(db, &ev, NULL) == 0)
                        stored++;
                state_close(db);
        }
        printf("# a writer starting on the full disk: %s\n", r < 0 ? state_last_error() : "opened");
        check_after_full(path, stored);
        mounted_dir = NULL;
        assert_int_equal(umount2(dir, MNT_DETACH), 0);
}

static void test_file_size_limit(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        fill_db(path, 1);
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(fds[0]);
                signal(SIGXFSZ, SIG_IGN);
                struct rlimit rl = {.rlim_cur = 256 * 1024, .rlim_max = 256 * 1024};
                if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
                        _exit(2);
                state_db *db = NULL;
                if (state_open(path, STATE_OPEN_READ_WRITE, &db) < 0)
                        _exit(3);
                int err;
                int stored = fill_until_error(db, &err);
                char msg[1200];
                snprintf(msg, sizeof(msg), "%d %d %s", stored, err, state_last_error());
                state_close(db);
                if (write(fds[1], msg, strlen(msg)) < 0)
                        _exit(4);
                _exit(0);
        }
        harness_track_pid(pid);
        close(fds[1]);
        _cleanup_free_ char *msg = slurp_fd(fds[0]);
        close(fds[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        int stored = 0, err = 0, off = 0;
        assert_int_equal(sscanf(msg, "%d %d %n", &stored, &err, &off), 2);
        printf("# file-size limit: stored %d events before: %s\n", stored, msg + off);
        assert_int_equal(err, -EFBIG);
        assert_non_null(strstr(msg + off, "file size limit exceeded"));
        assert_true(stored > 0);
        check_after_full(path, stored + 1);
}

/* `gitcd log -o json` of path: its exit status, and the number of events it printed. */
static int log_events(const char *path, size_t *ret_events)
{
        char *args[] = {"log", "--state", (char *)path, "-o", "json", NULL};
        run_result r = {0};
        assert_int_equal(run_gitcd(args, &r), 0);
        int status = r.status;
        *ret_events = count_lines(r.out);
        run_result_release(&r);
        return status;
}

/*
 * A short-lived command (every gitcd command but `run`) leaves its commits in
 * the WAL instead of checkpointing them at close: they are durable there, the
 * next opener (a command, the daemon, a reader, `gitcd log`) sees them, and a
 * command killed after a commit and before its close loses nothing either.
 */
static void test_short_lived_leaves_the_wal(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        _cleanup_free_ char *wal = xasprintf("%s-wal", path);
        fill_db(path, 3); /* a long-lived writer checkpoints at close: the WAL is empty */
        struct stat st;
        assert_int_equal(stat(wal, &st), 0);
        assert_int_equal(st.st_size, 0);

        state_set_short_lived(true);
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        state_audit_event ev = {.time_ms = T0, .cluster = "prod/main", .action = "snapshot.save"};
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        state_close(db);
        assert_int_equal(stat(wal, &st), 0);
        assert_true(st.st_size > 0); /* not checkpointed */
        size_t n = 0;
        assert_int_equal(log_events(path, &n), 0);
        assert_int_equal(n, 4);

        /* killed after its commit, before its close */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                state_db *w = NULL;
                if (state_open(path, STATE_OPEN_READ_WRITE, &w) < 0 ||
                    state_audit_append(w, &ev, NULL) < 0)
                        _exit(1);
                raise(SIGKILL);
                _exit(2);
        }
        int ws;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
                ;
        assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
        assert_int_equal(log_events(path, &n), 0);
        assert_int_equal(n, 5);

        /* the next short-lived writers append to the same WAL, which stays short (the
         * next opener reads it whole): a close that leaves 64 pages or more empties it */
        int appended = 0, emptied = 0;
        off_t last = st.st_size;
        for (int i = 0; i < 60; i++) {
                assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
                assert_int_equal(state_audit_append(db, &ev, NULL), 0);
                state_close(db);
                assert_int_equal(stat(wal, &st), 0);
                if (st.st_size >= 80 * (4096 + 24))
                        fail_msg("after %d commits the WAL has %lld bytes", i + 1,
                                 (long long)st.st_size);
                appended += st.st_size > last;
                emptied += st.st_size == 0;
                last = st.st_size;
        }
        assert_true(appended > 40);
        assert_true(emptied > 0);
        /* a long-lived writer checkpoints at close */
        state_set_short_lived(false);
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_check_integrity(db), 0);
        state_close(db);
        assert_int_equal(stat(wal, &st), 0);
        assert_int_equal(st.st_size, 0);
        assert_int_equal(log_events(path, &n), 0);
        assert_int_equal(n, 65);
}

/*
 * A short-lived writer does not read the whole file at open (no quick_check):
 * a damaged page fails, as "corrupt", only when it is read (here by the full
 * check); readers (`gitcd log`, `gitcd status`) and the daemon still refuse
 * the file at open.
 */
static void test_short_lived_corrupt_database(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        fill_db(path, 200);
        size_t len;
        _cleanup_free_ char *data = read_all(path, &len);
        for (size_t off = len / 2; off < len / 2 + 3 * 4096; off++)
                data[off] = (char)(off * 7);
        assert_int_equal(write_file_atomic(path, data, len, 0644), 0);

        state_set_short_lived(true);
        state_db *db = NULL;
        if (state_open(path, STATE_OPEN_READ_WRITE, &db) < 0)
                fail_msg("short-lived open: %s", state_last_error());
        assert_int_equal(state_check_integrity(db), -EBADMSG);
        assert_non_null(strstr(state_last_error(), "restore it from a backup"));
        state_close(db);
        assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), -EBADMSG);
        state_set_short_lived(false);
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), -EBADMSG);
        expect_cli_error(path, "corrupt");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_not_a_database),
            cmocka_unit_test(test_corrupt_database),
            cmocka_unit_test(test_read_only_directory),
            cmocka_unit_test(test_full_disk),
            cmocka_unit_test(test_file_size_limit),
            cmocka_unit_test(test_short_lived_leaves_the_wal),
            cmocka_unit_test(test_short_lived_corrupt_database),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

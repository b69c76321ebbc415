/*
 * gitcd snapshot: take a snapshot by hand and list the recorded ones.
 *
 *   gitcd snapshot save CLUSTER   one snapshot now, through the same
 *                                 pipeline as scheduled ones (snapshots/)
 *   gitcd snapshot list [CLUSTER] the records in the state store
 *
 * save writes to the state store next to a running daemon (SQLite WAL; it
 * does not take the daemon's lock: a snapshot changes nothing in the
 * cluster). It reaches the members at the client URLs the reconciler
 * recorded, with gitcd's client identity from the local target's folders.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "api/spec.h"
#include "cli/cli.h"
#include "snapshots/snapshot.h"
#include "state/snapshots.h"
#include "targets/local.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static void usage(FILE *out)
{
        fprintf(out,
                "usage: gitcd snapshot save NS/NAME [options]\n"
                "       gitcd snapshot list [NS/NAME] [-o table|json] [--state PATH]\n\n"
                "save: take a snapshot of a cluster now from a healthy member (a follower when\n"
                "      one is healthy), verify it with etcd's own tool, compress it as\n"
                "      spec.snapshots.compression says, store it in spec.snapshots.destination\n"
                "      and record it; then apply the retention to that destination.\n"
                "list: show the recorded snapshots, newest first.\n\n"
                "Options:\n"
                "  --to PATH          save: store in this folder instead (an absolute path)\n"
                "  --etcd-dir DIR     where etcd binaries are by version (as for apply/run)\n"
                "  -o, --output FMT   list: table (default) or json\n"
                "  --state PATH       the state database (default: $GITCD_STATE_DIR/state.db,\n"
                "                     else ./.gitcd/state.db)\n"
                "  -h, --help         show this help\n");
}

/* A printable copy: control characters become spaces, empty becomes "-". */
static char *clean(const char *s)
{
        if (isempty(s))
                return xstrdup("-");
        char *c = xstrdup(s);
        for (unsigned char *p = (unsigned char *)c; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        *p = ' ';
        return c;
}

static char *state_dir_of(const char *db_path)
{
        _cleanup_free_ char *copy = xstrdup(db_path);
        char *abs = realpath(dirname(copy), NULL);
        if (abs)
                return abs;
        copy = xstrdup(db_path);
        return xstrdup(dirname(copy));
}

static int do_save(const char *cluster, const char *state_flag, const char *to,
                   const char *etcd_dir)
{
        _cleanup_free_ char *path = cli_state_path(state_flag);
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s\n", state_last_error());
                return EXIT_FAIL;
        }
        _cleanup_free_ char *state_dir = state_dir_of(path);
        target *t = NULL;
        local_target_opts lo = {.state_dir = state_dir, .etcd_dir = etcd_dir};
        r = local_target_new(&lo, &t);
        if (r < 0)
                fprintf(stderr, "gitcd snapshot: warning: cannot open the local target in %s: %s\n",
                        state_dir, strerror(-r));
        _cleanup_free_ char *error = NULL;
        _cleanup_(snapshot_job_freep) snapshot_job *job = NULL;
        r = snapshot_job_from_state(db, t, cluster, "manual", 0, state_dir, &job, &error);
        target_free(t);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s\n", error);
                state_close(db);
                return EXIT_FAIL;
        }
        job->etcd_dir = xstrdup_null(etcd_dir);
        if (to) {
                job->override = XNEW(storage_location);
                job->override->kind = DEST_LOCAL;
                job->override->path = xstrdup(to);
        }
        int64_t id = 0;
        r = snapshot_take(db, job, &id, &error);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s: snapshot %lld failed: %s\n", cluster,
                        (long long)id, error);
                state_close(db);
                return EXIT_FAIL;
        }
        state_snapshot *s = NULL;
        if (state_snapshot_get(db, id, &s) == 0) {
                printf("snapshot %lld of %s: revision %lld from %s, %lld bytes%s, sha256 %s\n"
                       "stored at %s\n",
                       (long long)s->id, cluster, (long long)s->revision, s->member,
                       (long long)s->size, streq_ptr(s->compression, "gzip") ? " (gzip)" : "",
                       s->sha256, s->location);
                state_snapshot_free(s);
        }
        if (!to) {
                json_t *j = json_loads(job->spec_json, 0, NULL);
                diag_list d = DIAG_LIST_INIT;
                etcd_cluster *c = NULL;
                if (j && spec_from_json(j, cluster, &c, &d) >= 0) {
                        int k = snapshot_retention(db, cluster, &c->snapshots, state_dir,
                                                   now_wall_ms());
                        if (k > 0)
                                printf("retention: deleted %d older snapshot%s\n", k,
                                       k == 1 ? "" : "s");
                }
                json_decref(j);
                diag_list_release(&d);
                etcd_cluster_free(c);
        }
        state_close(db);
        return EXIT_OK;
}

static json_t *jstr(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *jtime(int64_t ms)
{
        char buf[40];
        if (ms <= 0)
                return json_null();
        format_rfc3339(ms, buf, sizeof(buf));
        return json_string(buf);
}

static json_t *snapshot_json(const state_snapshot *s)
{
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(s->id));
        json_object_set_new(o, "cluster", jstr(s->cluster));
        json_object_set_new(o, "trigger", jstr(s->trigger));
        json_object_set_new(o, "scheduled_for", jtime(s->slot_ms));
        json_object_set_new(o, "started", jtime(s->started_ms));
        json_object_set_new(o, "finished", jtime(s->finished_ms));
        json_object_set_new(o, "result", jstr(s->result));
        json_object_set_new(o, "error", jstr(s->error));
        json_object_set_new(o, "member", jstr(s->member));
        json_object_set_new(o, "etcd_version", jstr(s->etcd_version));
        json_object_set_new(o, "revision", json_integer(s->revision));
        json_object_set_new(o, "size", json_integer(s->size));
        json_object_set_new(o, "db_size", json_integer(s->db_size));
        json_object_set_new(o, "sha256", jstr(s->sha256));
        json_object_set_new(o, "compression", jstr(s->compression));
        json_object_set_new(o, "destination", jstr(s->destination));
        json_object_set_new(o, "key", jstr(s->key));
        json_object_set_new(o, "location", jstr(s->location));
        json_object_set_new(o, "duration_ms", json_integer(s->duration_ms));
        json_object_set_new(o, "expired", jtime(s->expired_ms));
        json_object_set_new(o, "deleted", jtime(s->deleted_ms));
        json_object_set_new(o, "delete_error", jstr(s->delete_error));
        return o;
}

/* What a person wants to know in one word: kept, deleted, failed, ... */
static const char *snapshot_state(const state_snapshot *s)
{
        if (!streq_ptr(s->result, "succeeded"))
                return s->result ? s->result : "-";
        if (s->deleted_ms)
                return "deleted";
        if (s->expired_ms)
                return "expired";
        return "succeeded";
}

static int do_list(const char *cluster, const char *state_flag, bool json)
{
        _cleanup_free_ char *path = cli_state_path(state_flag);
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_ONLY, &db);
        state_snapshot_list l = {0};
        if (r >= 0)
                r = state_snapshot_list_for(db, cluster, 0, &l);
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot: %s\n", state_last_error());
                state_close(db);
                return EXIT_FAIL;
        }
        if (!json && l.n == 0)
                fprintf(stderr, "gitcd snapshot: no snapshots recorded in %s\n", path);
        else if (!json)
                printf("%-5s %-24s %-20s %-8s %-9s %-9s %-10s %-10s %s\n", "ID", "CLUSTER",
                       "STARTED", "TRIGGER", "RESULT", "REVISION", "SIZE", "MEMBER",
                       "LOCATION / ERROR");
        for (size_t i = 0; i < l.n; i++) {
                const state_snapshot *s = l.items[i];
                if (json) {
                        json_t *o = snapshot_json(s);
                        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
                        if (text)
                                puts(text);
                        free(text);
                        json_decref(o);
                        continue;
                }
                char when[40];
                format_rfc3339(s->started_ms, when, sizeof(when));
                _cleanup_free_ char *c = clean(s->cluster), *m = clean(s->member);
                _cleanup_free_ char *where =
                    clean(streq_ptr(s->result, "succeeded")
                              ? (s->delete_error ? s->delete_error : s->location)
                              : s->error);
                printf("%-5lld %-24s %-20s %-8s %-9s %-9lld %-10lld %-10s %s\n", (long long)s->id,
                       c, when, s->trigger, snapshot_state(s), (long long)s->revision,
                       (long long)s->size, m, where);
        }
        state_snapshot_list_release(&l);
        state_close(db);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "gitcd snapshot: writing the output failed\n");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

enum { OPT_STATE = 256, OPT_TO, OPT_ETCD_DIR };

int cmd_snapshot(int argc, char **argv)
{
        static const struct option options[] = {
            {"output", required_argument, NULL, 'o'},
            {"state", required_argument, NULL, OPT_STATE},
            {"to", required_argument, NULL, OPT_TO},
            {"etcd-dir", required_argument, NULL, OPT_ETCD_DIR},
            {"help", no_argument, NULL, 'h'},
            {0},
        };
        if (argc < 2 || streq(argv[1], "-h") || streq(argv[1], "--help")) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : EXIT_OK;
        }
        const char *verb = argv[1];
        if (!streq(verb, "save") && !streq(verb, "list")) {
                fprintf(stderr, "gitcd snapshot: unknown subcommand '%s' (save, list)\n", verb);
                return EXIT_USAGE;
        }
        const char *state_flag = NULL, *to = NULL, *etcd_dir = NULL;
        bool json = false;
        int opt;
        optind = 0;
        while ((opt = getopt_long(argc - 1, argv + 1, "o:h", options, NULL)) != -1) {
                switch (opt) {
                case 'o':
                        if (streq(optarg, "json") || streq(optarg, "table")) {
                                json = streq(optarg, "json");
                                break;
                        }
                        fprintf(stderr, "gitcd snapshot: -o takes table or json, not '%s'\n",
                                optarg);
                        return EXIT_USAGE;
                case OPT_STATE:
                        state_flag = optarg;
                        break;
                case OPT_TO:
                        to = optarg;
                        break;
                case OPT_ETCD_DIR:
                        etcd_dir = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return EXIT_OK;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        int rest = argc - 1 - optind;
        char **args = argv + 1 + optind;
        const char *cluster = rest > 0 ? args[0] : NULL;
        if (rest > 1 || (streq(verb, "save") && !cluster)) {
                usage(stderr);
                return EXIT_USAGE;
        }
        if (cluster && !state_cluster_name_valid(cluster)) {
                fprintf(stderr, "gitcd snapshot: clusters are named namespace/name, not '%s'\n",
                        cluster);
                return EXIT_USAGE;
        }
        if (streq(verb, "list")) {
                if (to || etcd_dir) {
                        fprintf(stderr, "gitcd snapshot list: --to and --etcd-dir are for save\n");
                        return EXIT_USAGE;
                }
                return do_list(cluster, state_flag, json);
        }
        if (json) {
                fprintf(stderr, "gitcd snapshot save: -o is for list\n");
                return EXIT_USAGE;
        }
        if (to && to[0] != '/') {
                fprintf(stderr, "gitcd snapshot save: --to takes an absolute folder path\n");
                return EXIT_USAGE;
        }
        return do_save(cluster, state_flag, to, etcd_dir);
}

/*
 * gitcd etcd: a debugging window onto a live etcd cluster through gitcd's
 * own client (etcd/client.h), the same code the reconciler uses. Commands
 * mirror etcdctl's names and output shapes where that helps people who know
 * etcdctl (member IDs in hex, "OK" after a put), and every command can print
 * JSON for scripts. Flags may appear anywhere on the line.
 *
 * The password comes from $GITCD_ETCD_PASSWORD or --password-file (the
 * documented ways), or from --user name:password, which cli/main.c blanks
 * out of the process's command line with a warning. It is never printed,
 * not even in errors.
 *
 * --cluster NAMESPACE/NAME takes everything from what gitcd recorded
 * instead: the members' client URLs from the state store, gitcd's own
 * client identity from the target the cluster runs on (target_client_tls,
 * the one owner), and root's credentials when gitcd enabled auth
 * (auth_credentials, the one owner). None of it is printed. The state
 * database and the target's settings the command line leaves out come from
 * the daemon's configuration file (--config, or /etc/gitcd/gitcd.yaml when
 * present), read only with --cluster.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "etcd/client.h"
#include "etcd/credentials.h"
#include "targets/registry.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

enum output { OUT_TABLE, OUT_JSON };

struct etcd_cli {
        etcd_client_opts opts;
        char *endpoints, *ca, *cert, *key; /* owned: from --cluster */
        char *fallback_password;           /* --cluster: a password change in flight */
        char *user;                        /* owned copies: --user may carry the password */
        char *password;
        enum output out;
        bool prefix;
        bool learner;
        const char *peer_urls;
        cli_command cmd; /* its option table, for the help (opts owned) */
};

static const char usage_text[] =
    "usage: gitcd etcd [options] <command> [args]\n\n"
    "Talk to an etcd cluster directly with gitcd's own client.\n\n"
    "Commands:\n"
    "  member list                              list members (IDs in hex)\n"
    "  member add NAME --peer-urls URL[,URL] [--learner]\n"
    "                                           add a member (a learner with --learner)\n"
    "  member remove ID                         remove a member\n"
    "  member promote ID                        promote a learner to a voter\n"
    "  member update ID --peer-urls URL[,URL]   change a member's peer URLs\n"
    "  status                                   status of every endpoint\n"
    "  put KEY VALUE                            store a value\n"
    "  get KEY [--prefix]                       read a key (or a prefix)\n"
    "  del KEY [--prefix]                       delete a key (or a prefix)\n"
    "  snapshot save FILE                       stream a snapshot into FILE\n"
    "  defrag                                   defragment every endpoint\n"
    "  move-leader ID                           hand leadership to member ID\n"
    "  alarm list | alarm disarm                show or clear alarms\n\n"
    "Options:\n";

static void wipe_free(char *s)
{
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

/* The password in the first line of path (a trailing newline is not part of it). */
static int read_password_file(const char *path, char **ret_password)
{
        char *data = NULL;
        size_t len = 0;
        int r = read_file(path, 64 * 1024, &data, &len);
        if (r < 0) {
                fprintf(stderr, "gitcd: etcd: --password-file %s: %s\n", path, strerror(-r));
                return r;
        }
        size_t n = strcspn(data, "\r\n");
        char *pw = xstrndup(data, n);
        explicit_bzero(data, len);
        free(data);
        wipe_free(*ret_password);
        *ret_password = pw;
        return 0;
}

static int fail(etcd_client *c, const char *what, int r)
{
        const char *msg = c ? etcd_client_last_error(c) : "";
        fprintf(stderr, "gitcd: etcd %s: %s\n", what, *msg ? msg : etcd_strerror(r));
        return EXIT_FAIL;
}

static void dump_json(json_t *j)
{
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s)
                puts(s);
        free(s);
        json_decref(j);
}

static json_t *json_strings(char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *json_hex(uint64_t id)
{
        char buf[17];
        etcd_member_id_format(id, buf);
        return json_string(buf);
}

static json_t *member_json(const etcd_member *m)
{
        json_t *o = json_object();
        json_object_set_new(o, "id", json_hex(m->id));
        json_object_set_new(o, "name", json_string(m->name));
        json_object_set_new(o, "peerURLs", json_strings(m->peer_urls, m->n_peer_urls));
        json_object_set_new(o, "clientURLs", json_strings(m->client_urls, m->n_client_urls));
        json_object_set_new(o, "isLearner", json_boolean(m->is_learner));
        return o;
}

static json_t *members_json(const etcd_members *l)
{
        json_t *o = json_object();
        json_object_set_new(o, "clusterID", json_hex(l->cluster_id));
        json_t *a = json_array();
        for (size_t i = 0; i < l->n; i++)
                json_array_append_new(a, member_json(&l->members[i]));
        json_object_set_new(o, "members", a);
        return o;
}

static char *join(char *const *v, size_t n)
{
        size_t len = 1;
        for (size_t i = 0; i < n; i++)
                len += strlen(v[i]) + 1;
        char *s = xcalloc(1, len);
        for (size_t i = 0; i < n; i++) {
                if (i)
                        strcat(s, ",");
                strcat(s, v[i]);
        }
        return s;
}

static int parse_id(const char *s, uint64_t *ret)
{
        if (etcd_member_id_parse(s, ret) < 0) {
                fprintf(stderr,
                        "gitcd: etcd: '%s' is not a member ID (16 hex digits, as "
                        "`gitcd etcd member list` prints)\n",
                        s);
                return -EINVAL;
        }
        return 0;
}

/* Split "a,b,c" into a NULL-terminated array of copies. */
static char **split_commas(const char *s, size_t *ret_n)
{
        size_t n = 0;
        char **v = NULL;
        const char *p = s;
        while (*p) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                if (len > 0) {
                        v = xrealloc(v, (n + 2) * sizeof(char *));
                        v[n++] = xstrndup(p, len);
                        v[n] = NULL;
                }
                if (!comma)
                        break;
                p = comma + 1;
        }
        *ret_n = n;
        return v;
}

static void free_strv(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* gitcd etcd member list */
static int member_list(struct etcd_cli *cli, etcd_client *c)
{
        int r;
        etcd_members *l = NULL;
        r = etcd_member_list(c, &l);
        if (r < 0)
                return fail(c, "member list", r);
        if (cli->out == OUT_JSON) {
                dump_json(members_json(l));
        } else {
                printf("%-16s  %-9s  %-12s  %-28s  %-28s  %s\n", "ID", "STATUS", "NAME",
                       "PEER ADDRS", "CLIENT ADDRS", "IS LEARNER");
                for (size_t i = 0; i < l->n; i++) {
                        const etcd_member *m = &l->members[i];
                        char id[17];
                        etcd_member_id_format(m->id, id);
                        char *peers = join(m->peer_urls, m->n_peer_urls);
                        char *clients = join(m->client_urls, m->n_client_urls);
                        printf("%-16s  %-9s  %-12s  %-28s  %-28s  %s\n", id,
                               isempty(m->name) ? "unstarted" : "started", m->name, peers, clients,
                               m->is_learner ? "true" : "false");
                        free(peers);
                        free(clients);
                }
        }
        etcd_members_free(l);
        return EXIT_OK;
}

/* gitcd etcd member add NAME: the environment a new member starts with, as etcdctl prints it. */
static int member_add(struct etcd_cli *cli, etcd_client *c, int argc, char **argv)
{
        int r;
        if (argc != 2) {
                fprintf(stderr, "gitcd: etcd member add: expected NAME\n");
                return EXIT_USAGE;
        }
        if (isempty(cli->peer_urls)) {
                fprintf(stderr, "gitcd: etcd member add: --peer-urls is required\n");
                return EXIT_USAGE;
        }
        size_t n = 0;
        char **urls = split_commas(cli->peer_urls, &n);
        uint64_t id = 0;
        etcd_members *l = NULL;
        r = etcd_member_add(c, (const char *const *)urls, n, cli->learner, &id, &l);
        free_strv(urls, n);
        if (r < 0)
                return fail(c, "member add", r);
        char idbuf[17], cidbuf[17];
        etcd_member_id_format(id, idbuf);
        etcd_member_id_format(l->cluster_id, cidbuf);
        if (cli->out == OUT_JSON) {
                json_t *o = members_json(l);
                json_object_set_new(o, "added", json_string(idbuf));
                dump_json(o);
        } else {
                printf("Member %s added to cluster %s\n\n", idbuf, cidbuf);
                printf("ETCD_NAME=\"%s\"\nETCD_INITIAL_CLUSTER=\"", argv[1]);
                bool first = true;
                for (size_t i = 0; i < l->n; i++) {
                        const etcd_member *m = &l->members[i];
                        const char *name = m->id == id ? argv[1] : m->name;
                        if (isempty(name))
                                continue;
                        for (size_t j = 0; j < m->n_peer_urls; j++) {
                                printf("%s%s=%s", first ? "" : ",", name, m->peer_urls[j]);
                                first = false;
                        }
                }
                printf("\"\nETCD_INITIAL_CLUSTER_STATE=\"existing\"\n");
        }
        etcd_members_free(l);
        return EXIT_OK;
}

static int do_member(struct etcd_cli *cli, etcd_client *c, int argc, char **argv)
{
        if (argc < 1) {
                fprintf(stderr, "gitcd: etcd member: expected list, add, remove, promote or "
                                "update\n");
                return EXIT_USAGE;
        }
        const char *sub = argv[0];
        int r;
        if (streq(sub, "list")) {
                if (argc != 1)
                        goto extra;
                return member_list(cli, c);
        }
        if (streq(sub, "add"))
                return member_add(cli, c, argc, argv);
        if (streq(sub, "remove") || streq(sub, "promote") || streq(sub, "update")) {
                if (argc != 2) {
                        fprintf(stderr, "gitcd: etcd member %s: expected one member ID\n", sub);
                        return EXIT_USAGE;
                }
                uint64_t id;
                if (parse_id(argv[1], &id) < 0)
                        return EXIT_USAGE;
                char idbuf[17];
                etcd_member_id_format(id, idbuf);
                if (streq(sub, "remove")) {
                        r = etcd_member_remove(c, id);
                        if (r < 0)
                                return fail(c, "member remove", r);
                        printf("Member %s removed\n", idbuf);
                } else if (streq(sub, "promote")) {
                        r = etcd_member_promote(c, id);
                        if (r < 0)
                                return fail(c, "member promote", r);
                        printf("Member %s promoted\n", idbuf);
                } else {
                        if (isempty(cli->peer_urls)) {
                                fprintf(stderr,
                                        "gitcd: etcd member update: --peer-urls is required\n");
                                return EXIT_USAGE;
                        }
                        size_t n = 0;
                        char **urls = split_commas(cli->peer_urls, &n);
                        r = etcd_member_update(c, id, (const char *const *)urls, n);
                        free_strv(urls, n);
                        if (r < 0)
                                return fail(c, "member update", r);
                        printf("Member %s updated\n", idbuf);
                }
                return EXIT_OK;
        }
        fprintf(stderr, "gitcd: etcd member: unknown command '%s'\n", sub);
        return EXIT_USAGE;
extra:
        fprintf(stderr, "gitcd: etcd member %s: unexpected argument '%s'\n", sub, argv[1]);
        return EXIT_USAGE;
}

static void human_size(int64_t n, char *buf, size_t size)
{
        const char *units[] = {"B", "kB", "MB", "GB", "TB"};
        double v = (double)n;
        size_t u = 0;
        while (v >= 1000 && u + 1 < ARRAY_SIZE(units)) {
                v /= 1000;
                u++;
        }
        if (u == 0)
                snprintf(buf, size, "%" PRId64 " B", n);
        else
                snprintf(buf, size, "%.1f %s", v, units[u]);
}

static int do_status(struct etcd_cli *cli, etcd_client *c)
{
        int ret = EXIT_OK;
        json_t *arr = cli->out == OUT_JSON ? json_array() : NULL;
        if (!arr)
                printf("%-26s  %-16s  %-8s  %-9s  %-9s  %-9s  %-10s  %-9s  %-10s  %s\n", "ENDPOINT",
                       "ID", "VERSION", "DB SIZE", "IN USE", "IS LEADER", "IS LEARNER", "RAFT TERM",
                       "RAFT INDEX", "ERRORS");
        for (size_t i = 0; i < etcd_client_endpoint_count(c); i++) {
                const char *ep = etcd_client_endpoint(c, i);
                etcd_endpoint_status *s = NULL;
                int r = etcd_status(c, ep, &s);
                if (r < 0) {
                        fail(c, "status", r);
                        ret = EXIT_FAIL;
                        continue;
                }
                char id[17], leader[17];
                etcd_member_id_format(s->member_id, id);
                etcd_member_id_format(s->leader, leader);
                char *errs = join(s->errors, s->n_errors);
                if (arr) {
                        json_t *o = json_object();
                        json_object_set_new(o, "endpoint", json_string(ep));
                        json_object_set_new(o, "id", json_string(id));
                        json_object_set_new(o, "version", json_string(s->version));
                        json_object_set_new(o, "dbSize", json_integer(s->db_size));
                        json_object_set_new(o, "dbSizeInUse", json_integer(s->db_size_in_use));
                        json_object_set_new(o, "leader", json_string(leader));
                        json_object_set_new(o, "isLeader", json_boolean(s->leader == s->member_id));
                        json_object_set_new(o, "isLearner", json_boolean(s->is_learner));
                        json_object_set_new(o, "raftTerm", json_integer((json_int_t)s->raft_term));
                        json_object_set_new(o, "raftIndex",
                                            json_integer((json_int_t)s->raft_index));
                        json_object_set_new(o, "raftAppliedIndex",
                                            json_integer((json_int_t)s->raft_applied_index));
                        json_object_set_new(o, "errors", json_strings(s->errors, s->n_errors));
                        json_array_append_new(arr, o);
                } else {
                        char db[32], inuse[32];
                        human_size(s->db_size, db, sizeof(db));
                        human_size(s->db_size_in_use, inuse, sizeof(inuse));
                        printf("%-26s  %-16s  %-8s  %-9s  %-9s  %-9s  %-10s  %-9" PRIu64
                               "  %-10" PRIu64 "  %s\n",
                               ep, id, s->version, db, inuse,
                               s->leader == s->member_id ? "true" : "false",
                               s->is_learner ? "true" : "false", s->raft_term, s->raft_index, errs);
                }
                free(errs);
                etcd_endpoint_status_free(s);
        }
        if (arr)
                dump_json(arr);
        return ret;
}

static json_t *bytes_json(const char *s, size_t len)
{
        json_t *j = json_stringn(s, len);
        return j ? j : json_null(); /* not UTF-8: shown as null */
}

static int do_get(struct etcd_cli *cli, etcd_client *c, const char *key)
{
        etcd_kv_list *l = NULL;
        int r = etcd_get(c, key, cli->prefix, &l);
        if (r < 0)
                return fail(c, "get", r);
        if (cli->out == OUT_JSON) {
                json_t *o = json_object();
                json_object_set_new(o, "revision", json_integer(l->revision));
                json_t *a = json_array();
                for (size_t i = 0; i < l->n; i++) {
                        const etcd_kv *item = &l->kvs[i];
                        json_t *k = json_object();
                        json_object_set_new(k, "key", bytes_json(item->key, item->key_len));
                        json_object_set_new(k, "value", bytes_json(item->value, item->value_len));
                        json_object_set_new(k, "createRevision",
                                            json_integer(item->create_revision));
                        json_object_set_new(k, "modRevision", json_integer(item->mod_revision));
                        json_object_set_new(k, "version", json_integer(item->version));
                        json_array_append_new(a, k);
                }
                json_object_set_new(o, "kvs", a);
                dump_json(o);
        } else {
                for (size_t i = 0; i < l->n; i++) {
                        fwrite(l->kvs[i].key, 1, l->kvs[i].key_len, stdout);
                        putchar('\n');
                        fwrite(l->kvs[i].value, 1, l->kvs[i].value_len, stdout);
                        putchar('\n');
                }
        }
        etcd_kv_list_free(l);
        return EXIT_OK;
}

static int do_defrag(etcd_client *c)
{
        int ret = EXIT_OK;
        for (size_t i = 0; i < etcd_client_endpoint_count(c); i++) {
                const char *ep = etcd_client_endpoint(c, i);
                int r = etcd_defragment(c, ep);
                if (r < 0) {
                        fail(c, "defrag", r);
                        ret = EXIT_FAIL;
                        continue;
                }
                printf("Finished defragmenting etcd member[%s]\n", ep);
        }
        return ret;
}

static int do_alarm(struct etcd_cli *cli, etcd_client *c, int argc, char **argv)
{
        if (argc != 1 || !(streq(argv[0], "list") || streq(argv[0], "disarm"))) {
                fprintf(stderr, "gitcd: etcd alarm: expected list or disarm\n");
                return EXIT_USAGE;
        }
        etcd_alarm *a = NULL;
        size_t n = 0;
        int r = etcd_alarm_list(c, &a, &n);
        if (r < 0)
                return fail(c, "alarm list", r);
        json_t *arr = cli->out == OUT_JSON ? json_array() : NULL;
        for (size_t i = 0; i < n; i++) {
                const char *type = a[i].type == ETCD_ALARM_NOSPACE   ? "NOSPACE"
                                   : a[i].type == ETCD_ALARM_CORRUPT ? "CORRUPT"
                                                                     : "NONE";
                char id[17];
                etcd_member_id_format(a[i].member_id, id);
                if (streq(argv[0], "disarm")) {
                        r = etcd_alarm_disarm(c, a[i].member_id, a[i].type);
                        if (r < 0) {
                                free(a);
                                json_decref(arr);
                                return fail(c, "alarm disarm", r);
                        }
                }
                if (arr) {
                        json_t *o = json_object();
                        json_object_set_new(o, "memberID", json_string(id));
                        json_object_set_new(o, "alarm", json_string(type));
                        json_array_append_new(arr, o);
                } else {
                        printf("%smemberID:%s alarm:%s\n",
                               streq(argv[0], "disarm") ? "disarmed " : "", id, type);
                }
        }
        if (arr)
                dump_json(arr);
        free(a);
        return EXIT_OK;
}

static int run(struct etcd_cli *cli, etcd_client *c, int argc, char **argv)
{
        const char *cmd = argv[0];
        int r;
        if (streq(cmd, "member"))
                return do_member(cli, c, argc - 1, argv + 1);
        if (streq(cmd, "status")) {
                if (argc != 1)
                        goto usage;
                return do_status(cli, c);
        }
        if (streq(cmd, "put")) {
                if (argc != 3)
                        goto usage;
                r = etcd_put(c, argv[1], argv[2], strlen(argv[2]), NULL);
                if (r < 0)
                        return fail(c, "put", r);
                puts("OK");
                return EXIT_OK;
        }
        if (streq(cmd, "get")) {
                if (argc != 2)
                        goto usage;
                return do_get(cli, c, argv[1]);
        }
        if (streq(cmd, "del")) {
                if (argc != 2)
                        goto usage;
                int64_t n = 0;
                r = etcd_delete(c, argv[1], cli->prefix, &n);
                if (r < 0)
                        return fail(c, "del", r);
                printf("%" PRId64 "\n", n);
                return EXIT_OK;
        }
        if (streq(cmd, "snapshot")) {
                if (argc != 3 || !streq(argv[1], "save"))
                        goto usage;
                etcd_snapshot_info info;
                r = etcd_snapshot_save(c, NULL, argv[2], &info);
                if (r < 0)
                        return fail(c, "snapshot save", r);
                if (cli->out == OUT_JSON) {
                        json_t *o = json_object();
                        json_object_set_new(o, "path", json_string(argv[2]));
                        json_object_set_new(o, "size", json_integer((json_int_t)info.size));
                        json_object_set_new(o, "revision", json_integer(info.revision));
                        json_object_set_new(o, "sha256Verified", json_true());
                        dump_json(o);
                } else {
                        printf("Snapshot saved at %s (%" PRIu64 " bytes, sha256 verified)\n",
                               argv[2], info.size);
                }
                return EXIT_OK;
        }
        if (streq(cmd, "defrag")) {
                if (argc != 1)
                        goto usage;
                return do_defrag(c);
        }
        if (streq(cmd, "move-leader")) {
                if (argc != 2)
                        goto usage;
                uint64_t id;
                if (parse_id(argv[1], &id) < 0)
                        return EXIT_USAGE;
                r = etcd_move_leader(c, id);
                if (r < 0)
                        return fail(c, "move-leader", r);
                printf("Leadership transferred to %s\n", argv[1]);
                return EXIT_OK;
        }
        if (streq(cmd, "alarm"))
                return do_alarm(cli, c, argc - 1, argv + 1);
        fprintf(stderr, "gitcd: etcd: unknown command '%s'\n", cmd);
        cli_help(&cli->cmd, stderr);
        return EXIT_USAGE;
usage:
        fprintf(stderr, "gitcd: etcd %s: wrong arguments (see gitcd etcd --help)\n", cmd);
        return EXIT_USAGE;
}

/*
 * --cluster: the endpoints, client identity and credentials gitcd uses for
 * a recorded cluster. Prints why on failure.
 */
static int from_cluster(struct etcd_cli *cli, const char *cluster, const char *state_flag,
                        const char *config, const runner_flags *tf)
{
        _cleanup_(ops_config_freep) ops_config *file = NULL;
        if (cli_daemon_config(config, OPS_CONFIG_DEFAULT_PATH, state_flag != NULL, "gitcd: etcd",
                              &file) < 0)
                return -EINVAL;
        _cleanup_free_ char *path = cli_state_path(state_flag, file);
        state_db *db = NULL;
        if (state_open(path, STATE_OPEN_READ_ONLY, &db) < 0) {
                fprintf(stderr, "gitcd: etcd: %s\n", state_last_error());
                return -ENOENT;
        }
        _cleanup_free_ char *state_dir = runner_state_dir(path);
        state_cluster *sc = NULL;
        state_member_list ml = {0};
        etcd_cluster *c = NULL;
        target *t = NULL;
        int r = state_cluster_get(db, cluster, &sc);
        if (r >= 0)
                r = state_member_list_for(db, cluster, false, &ml);
        if (r < 0)
                fprintf(stderr, "gitcd: etcd: %s\n", state_last_error());
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; r >= 0 && i < ml.n; i++)
                if (!ml.items[i]->dormant && !isempty(ml.items[i]->client_url))
                        sb_printf(&eps, "%s%s", eps.len ? "," : "", ml.items[i]->client_url);
        if (r >= 0 && !eps.len) {
                fprintf(stderr, "gitcd: etcd: %s has no member with a client URL yet\n", cluster);
                r = -ENOENT;
        }
        if (r >= 0 &&
            !(c = spec_from_json_text(sc ? state_cluster_spec_json(sc) : NULL, cluster))) {
                fprintf(stderr, "gitcd: etcd: %s has no readable recorded spec\n", cluster);
                r = -EINVAL;
        }
        if (r >= 0)
                r = runner_open_cluster_target(db, cluster, tf, file, state_dir, "gitcd: etcd", &t);
        if (r >= 0 && (r = target_client_tls(t, c, &cli->ca, &cli->cert, &cli->key)) < 0)
                fprintf(stderr, "gitcd: etcd: %s: no client certificate for gitcd: %s\n", cluster,
                        target_last_error(t));
        if (r >= 0) {
                auth_creds cr = {0};
                if ((r = auth_credentials(state_dir, cluster, &cr)) < 0)
                        fprintf(stderr, "gitcd: etcd: %s: cannot read root's password: %s\n",
                                cluster, strerror(-r));
                cli->user = TAKE_PTR(cr.user);
                cli->password = TAKE_PTR(cr.password);
                cli->fallback_password = TAKE_PTR(cr.fallback_password);
                auth_creds_release(&cr);
        }
        if (r >= 0)
                cli->endpoints = sb_detach(&eps);
        sb_release(&eps);
        target_free(t);
        etcd_cluster_free(c);
        state_member_list_release(&ml);
        state_cluster_free(sc);
        state_close(db);
        if (r < 0)
                return r;
        cli->opts.endpoints = cli->endpoints;
        cli->opts.cacert = cli->ca;
        cli->opts.cert = cli->cert;
        cli->opts.key = cli->key;
        return 0;
}

/* What the command line says besides the connection (struct etcd_cli). */
typedef struct etcd_args {
        const char *cluster, *state_flag, *config;
        const char *endpoints; /* --endpoints, over the default */
        runner_flags tf;
        bool target_flag, connection_flag;
} etcd_args;

/* --user NAME[:PASS] into the struct etcd_cli at dest. */
static int parse_user(const char *arg, void *dest)
{
        struct etcd_cli *cli = dest;
        free(cli->user);
        const char *colon = strchr(arg, ':');
        if (colon) {
                cli->user = xstrndup(arg, (size_t)(colon - arg));
                wipe_free(cli->password);
                cli->password = xstrdup(colon + 1);
        } else {
                cli->user = xstrdup(arg);
        }
        return 0;
}

/* --password-file F: its first line into *(char **)dest; -errno, printed. */
static int parse_password_file(const char *arg, void *dest)
{
        return read_password_file(arg, dest) < 0 ? -EINVAL : 0;
}

/* --timeout D: each call's deadline, and the dial's (at most 2s), into the etcd_client_opts at dest. */
static int parse_timeout(const char *arg, void *dest)
{
        etcd_client_opts *o = dest;
        int64_t ms;
        if (parse_duration_ms(arg, &ms) < 0 || ms <= 0 || ms > INT32_MAX)
                return -EINVAL;
        o->call_timeout_ms = (int)ms;
        o->dial_timeout_ms = (int)MIN(ms, 2000);
        return 0;
}

static const char *const output_names[] = {"table", "json", NULL};

/* gitcd etcd's option table, the options into cli, out and a. Newly allocated. */
static cli_opt *option_table(struct etcd_cli *cli, int *out, etcd_args *a, size_t *ret_n)
{
        const cli_opt opts[] = {
            {.kind = CLI_OPT_STRING,
             .name = "endpoints",
             .arg = "URLS",
             .dest = &a->endpoints,
             .help = "comma-separated client URLs (default $GITCD_ETCD_ENDPOINTS,\n"
                     "else http://127.0.0.1:2379)"},
            {.kind = CLI_OPT_STRING,
             .name = "cacert",
             .arg = "FILE",
             .dest = &cli->opts.cacert,
             .help = "CA bundle to verify https:// endpoints"},
            {.kind = CLI_OPT_STRING,
             .name = "cert",
             .arg = "FILE",
             .dest = &cli->opts.cert,
             .help = "client certificate (mTLS)"},
            {.kind = CLI_OPT_STRING,
             .name = "key",
             .arg = "FILE",
             .dest = &cli->opts.key,
             .help = "client key (mTLS)"},
            {.kind = CLI_OPT_STRING,
             .name = "cluster",
             .arg = "NS/NAME",
             .dest = &a->cluster,
             .help = "a cluster gitcd runs: its members, gitcd's client\n"
                     "certificate and, with auth on, root's credentials,\n"
                     "as gitcd recorded them (with --state, --target and\n"
                     "the target's options as for apply; not with\n"
                     "--endpoints, --cacert, --cert, --key, --user)"},
            {.kind = CLI_OPT_STRING,
             .name = "config",
             .arg = "FILE",
             .dest = &a->config,
             .help = "with --cluster: the daemon's configuration file,\n"
                     "for the state and the settings of the target the\n"
                     "cluster runs on that the command line leaves out\n"
                     "(default: " OPS_CONFIG_DEFAULT_PATH " when present)"},
            {.kind = CLI_OPT_CUSTOM,
             .name = "user",
             .arg = "NAME",
             .dest = cli,
             .parse = parse_user,
             .help = "authenticate as NAME; the password comes from\n"
                     "$GITCD_ETCD_PASSWORD or --password-file"},
            {.kind = CLI_OPT_CUSTOM,
             .name = "password-file",
             .arg = "F",
             .dest = &cli->password,
             .parse = parse_password_file,
             .help = "read the password from the first line of F\n"
                     "(--user NAME:PASS works too, but every user of\n"
                     "the host can read it until gitcd blanks it out)"},
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FMT",
             .dest = out,
             .choices = output_names,
             .help = "table (default) or json",
             .bad = "--output takes table or json"},
            {.kind = CLI_OPT_CUSTOM,
             .name = "timeout",
             .arg = "DUR",
             .dest = &cli->opts,
             .parse = parse_timeout,
             .help = "deadline of each call (default 5s)",
             .bad = "--timeout takes a duration such as 5s or 500ms"},
            {.kind = CLI_OPT_SET,
             .name = "prefix",
             .dest = &cli->prefix,
             .help = "get/del: every key starting with KEY"},
            {.kind = CLI_OPT_SET,
             .name = "learner",
             .dest = &cli->learner,
             .help = "member add: add as a learner"},
            {.kind = CLI_OPT_STRING,
             .name = "peer-urls",
             .arg = "URLS",
             .dest = &cli->peer_urls,
             .help = "member add/update: the member's peer URLs"},
            /* said in --cluster's help */
            {.kind = CLI_OPT_STRING, .name = "state", .dest = &a->state_flag},
            CLI_TARGET_HIDDEN_ROWS(&a->tf),
            {.kind = CLI_OPT_HELP, .help = "show this help"},
        };
        *ret_n = ARRAY_SIZE(opts);
        cli_opt *copy = xmalloc(sizeof(opts));
        memcpy(copy, opts, sizeof(opts));
        return copy;
}

/* The options into cli and a: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct etcd_cli *cli, etcd_args *a)
{
        int out = (int)cli->out;
        cli->cmd =
            (cli_command){.prog = "gitcd: etcd", .usage = usage_text, .footer = "", .width = 20};
        cli->cmd.opts = option_table(cli, &out, a, &cli->cmd.n_opts);
        int status = cli_parse(&cli->cmd, argc, argv);
        if (status < 0 && optind >= argc) {
                cli_help(&cli->cmd, stderr);
                status = EXIT_USAGE;
        }
        cli->out = (enum output)out;
        if (a->endpoints)
                cli->opts.endpoints = a->endpoints;
        a->connection_flag = a->endpoints || cli->opts.cacert || cli->opts.cert || cli->opts.key ||
                             cli->user || cli->password;
        a->target_flag = runner_target_given(&a->tf);
        return status;
}

/*
 * The options that go together, the connection gitcd recorded for
 * --cluster, and the password: -1 to go on, else the exit status.
 */
static int check_args(struct etcd_cli *cli, etcd_args *a)
{
        if (!a->cluster && (a->target_flag || a->state_flag || a->config)) {
                fprintf(stderr, "gitcd: etcd: --state, --config, --target and the target's "
                                "options go with --cluster\n");
                return EXIT_USAGE;
        }
        if (a->cluster && a->connection_flag) {
                fprintf(stderr, "gitcd: etcd: --cluster takes the endpoints, certificates and "
                                "credentials gitcd recorded: not with --endpoints, --cacert, "
                                "--cert, --key, --user or --password-file\n");
                return EXIT_USAGE;
        }
        if (a->tf.target && !target_kind_find(a->tf.target)) {
                runner_unknown_target("gitcd: etcd", a->tf.target);
                return EXIT_USAGE;
        }
        if (a->cluster && from_cluster(cli, a->cluster, a->state_flag, a->config, &a->tf) < 0)
                return EXIT_FAIL;
        if (cli->user && !cli->password) {
                const char *pw = getenv("GITCD_ETCD_PASSWORD");
                if (!pw) {
                        fprintf(stderr,
                                "gitcd: etcd: --user %s needs a password: set "
                                "GITCD_ETCD_PASSWORD or use --password-file FILE\n",
                                cli->user);
                        return EXIT_USAGE;
                }
                cli->password = xstrdup(pw);
        }
        return -1;
}

/* The client for cli's options; -errno with why printed (never the endpoints' secrets). */
static int client_open(struct etcd_cli *cli, etcd_client **ret)
{
        cli->opts.user = cli->user;
        cli->opts.password = cli->password;
        cli->opts.fallback_password = cli->fallback_password;
        int r = etcd_client_new(&cli->opts, ret);
        if (r < 0 && cli->opts.endpoints && strchr(cli->opts.endpoints, '@'))
                /* never echo the list: it may hold a password */
                fprintf(stderr, "gitcd: etcd: --endpoints must not carry a user name or "
                                "password: use --user NAME and $GITCD_ETCD_PASSWORD\n");
        else if (r < 0)
                fprintf(stderr,
                        "gitcd: etcd: --endpoints '%s' is not a list of http:// or "
                        "https:// URLs\n",
                        cli->opts.endpoints);
        return r;
}

int cmd_etcd(int argc, char **argv)
{
        struct etcd_cli cli = {.out = OUT_TABLE};
        const char *env_ep = getenv("GITCD_ETCD_ENDPOINTS");
        cli.opts.endpoints = isempty(env_ep) ? "http://127.0.0.1:2379" : env_ep;
        etcd_args a = {0};
        etcd_client *c = NULL;
        int ret = parse_args(argc, argv, &cli, &a);
        if (ret < 0)
                ret = check_args(&cli, &a);
        if (ret < 0)
                ret = client_open(&cli, &c) < 0 ? EXIT_USAGE
                                                : run(&cli, c, argc - optind, argv + optind);
        etcd_client_free(c);
        free(cli.user);
        wipe_free(cli.password);
        wipe_free(cli.fallback_password);
        free(cli.endpoints);
        free(cli.ca);
        free(cli.cert);
        free(cli.key);
        free((cli_opt *)cli.cmd.opts);
        return ret;
}

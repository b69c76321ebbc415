/*
 * Helpers shared by the spec/ files and their tests, not part of the
 * module's public contract (api/spec.h): syntax checks for cron
 * schedules and Kubernetes label keys and values, the "did you mean"
 * suggestion, and the limits on names and replica counts.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api/model.h"
#include "api/yaml.h"
#include "util/diag.h"

/*
 * A standard 5-field cron expression (minute hour day-of-month month
 * day-of-week; lists, ranges, steps, names jan-dec and sun-sat).
 * 0, or -EINVAL with a newly allocated explanation in *ret_why.
 */
int cron_check(const char *expr, char **ret_why);

/* Kubernetes qualified name (label/annotation key): [prefix/]name. */
bool k8s_qualified_name_valid(const char *s);
/* Kubernetes label value: empty, or <= 63 of [A-Za-z0-9-_.] with alnum ends. */
bool k8s_label_value_valid(const char *s);

/* The name of row i of the etcd flag table (api/flags.c), NULL past its end: for tests. */
const char *etcd_flag_row_name(size_t i);

/* Levenshtein distance (bytes, case-insensitive). */
size_t edit_distance(const char *a, const char *b);
/* The closest of the candidates (NULL-terminated), or NULL when none is close. */
const char *closest_word(const char *word, const char *const *candidates);

/* The largest metadata.name that leaves room for "<name>-headless" in 63 characters. */
#define GITCD_MAX_NAME_LEN (63 - 9)
#define GITCD_MAX_REPLICAS 99

/* Readers of native-shaped blocks that other dialects share (api/native.c). */
struct reader;
struct ynode;
void native_read_storage(struct reader *r, const struct ynode *spec);
void native_read_auth(struct reader *r, const struct ynode *spec);
void native_read_additional_metadata(struct reader *r, const struct ynode *spec);

/*
 * Snapshot kinds kept in documents of their own (api/sidekinds.c): read
 * while loading, joined onto the cluster they name once every document
 * was read.
 */
typedef struct side_doc {
        spec_dialect dialect;
        char *kind;
        char *name;
        char *namespace_;
        char *file;
        int line, col;
        char *cluster; /* the cluster it names, in namespace_ */
        int cluster_line, cluster_col;
        bool maps;    /* read without errors: it is joined onto its cluster */
        bool restore; /* a restore source (coreos EtcdRestore) */
        bool one_off; /* one snapshot (EtcdSnapshot, EtcdBackup); neither: a schedule */
        char *schedule;
        storage_location destination;          /* where snapshots go, or the snapshot to restore */
        int destination_line, destination_col; /* a one-off's spec.destination.pvc; 0: none */
} side_doc;

typedef struct side_list {
        side_doc *items;
        size_t n;
        size_t alloc;
} side_list;

struct ydoc;
/* A document of a side kind of dialect d: read into out (true); other kinds: false. */
bool side_kind_read(const char *file, const struct ydoc *doc, spec_dialect d, const char *kind,
                    side_list *out, diag_list *diags);
/* Join what was read onto the clusters of set; a cluster not in set is an error. */
void side_kinds_attach(cluster_set *set, side_list *l, diag_list *diags);
void side_list_release(side_list *l);

/*
 * The YAML loader: libyaml events -> a small tree of nodes that keeps the
 * source position (line, column) of every node, so validation can point at
 * the exact place of a problem. Also the deterministic YAML emitter used by
 * `gitcd render -o yaml`.
 *
 * Hostile input is bounded by yaml_limits: file size, document count,
 * nesting depth and the total number of nodes after alias expansion (a
 * "billion laughs" file is a diagnostic, not an out-of-memory); and the
 * files of one revision together by a yaml_budget.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/diag.h"
#include "util/strbuf.h"

typedef enum ynode_kind { YNODE_SCALAR, YNODE_MAP, YNODE_SEQ } ynode_kind;

typedef struct ynode ynode;
struct ynode {
        ynode_kind kind;
        int line;  /* 1-based */
        int col;   /* 1-based */
        char *tag; /* explicit tag ("!!str", "tag:yaml.org,2002:int"), or NULL */
        /* YNODE_SCALAR */
        char *str;   /* NUL-terminated value */
        size_t len;  /* bytes in str (the value may contain NUL) */
        bool quoted; /* single/double quoted or block scalar: always a string */
        /* YNODE_MAP: keys[i] -> values[i]; YNODE_SEQ: values[i] */
        ynode **keys;
        ynode **values;
        size_t n;
};

typedef struct yaml_limits {
        size_t max_file_bytes; /* default 4 MiB */
        size_t max_documents;  /* default 1000 */
        size_t max_depth;      /* default 64 */
        size_t max_nodes;      /* default 1,000,000, counted after alias expansion */
} yaml_limits;

extern const yaml_limits yaml_default_limits;
/* For the small files beside the specs (kubeconfig, gitcd's own configuration,
 * etcd manifests on adopted machines): at most 100,000 nodes after alias
 * expansion, so a hostile file costs tens of MiB, not hundreds. */
extern const yaml_limits yaml_config_limits;

/*
 * What all the files of one revision may cost together, after alias
 * expansion (the per-file limits alone let 100,000 small alias bombs cost
 * hours). One budget is handed to every parse of the revision's files and
 * spent as they are parsed; a parse that would go past it stops with a
 * diagnostic, and so does every later one.
 */
typedef struct yaml_budget {
        size_t max_nodes;             /* nodes */
        size_t max_aliases;           /* alias expansions */
        size_t max_bytes;             /* bytes of scalar text */
        size_t nodes, aliases, bytes; /* spent so far */
        bool spent;                   /* a parse stopped on this budget */
} yaml_budget;

/* A revision's budget: 20,000,000 nodes, 1,000,000 aliases, 1 GiB of text. */
extern const yaml_budget yaml_revision_budget;

typedef struct ydoc {
        char *file;
        int index;   /* 0-based document number in the file */
        int line;    /* where the document starts */
        ynode *root; /* NULL for an empty document */
} ydoc;

typedef struct ydoc_list {
        ydoc *docs;
        size_t n;
        size_t alloc;
} ydoc_list;

/*
 * Parse a buffer holding one or more YAML documents, appending them to out.
 * Syntax errors and limit violations become diagnostics (file:line:col) and
 * the function returns -EINVAL; documents parsed before the error are kept.
 * Duplicate keys in a mapping are errors. lim may be NULL for the defaults.
 */
int yaml_parse(const char *file, const char *buf, size_t len, const yaml_limits *lim,
               ydoc_list *out, diag_list *diags);
/*
 * yaml_parse() that also spends budget (NULL: none). A budget that runs
 * out is a diagnostic at the place it ran out, and -EINVAL; a budget spent
 * already is -EINVAL at once, without a diagnostic (the caller says which
 * files were not read).
 */
int yaml_parse_budget(const char *file, const char *buf, size_t len, const yaml_limits *lim,
                      yaml_budget *budget, ydoc_list *out, diag_list *diags);
/* Read and parse a file; an unreadable or oversized file is a diagnostic and -errno. */
int yaml_load_file(const char *path, const yaml_limits *lim, ydoc_list *out, diag_list *diags);
/* Only read it, within lim's size: the text (NUL-terminated) and its length. */
int yaml_read_file(const char *path, const yaml_limits *lim, char **ret_buf, size_t *ret_len,
                   diag_list *diags);
void ydoc_list_release(ydoc_list *l);

/* Map lookup by key; NULL when absent or when map is not a mapping. */
ynode *ynode_get(const ynode *map, const char *key);
/* A plain scalar "", "~", "null", "Null", "NULL". */
bool ynode_is_null(const ynode *n);
/* "mapping", "sequence", "string", "integer", "number", "boolean", "null": for messages. */
const char *ynode_type_name(const ynode *n);
/*
 * Convert to JSON with the YAML 1.2 core schema for plain scalars (integers,
 * floats, true/false, null); quoted scalars stay strings. Used for pass-
 * through Kubernetes structures such as affinity and tolerations.
 */
json_t *ynode_to_json(const ynode *n);

/*
 * Emit a JSON value as YAML, deterministically: object keys in their order,
 * strings quoted wherever a plain scalar would read back as another type.
 * Each call appends one document (starting with "---" when `document_start`).
 */
int yaml_emit_json(const json_t *value, bool document_start, strbuf *out);

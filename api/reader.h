/*
 * The typed reader every dialect uses to turn a YAML tree into the model.
 *
 * Each helper reads one field of a mapping, checks its type, records where
 * it was written (under its native path, e.g. "spec.replicas", so later
 * stages can point at it) and remembers how the user spelled it (e.g.
 * "spec.size" in the coreos dialect) so messages use the user's words.
 * Helpers return true when the field was present and well-typed; a type
 * error is a diagnostic, never a crash, and leaves the output untouched.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "api/yaml.h"
#include "util/diag.h"

typedef struct reader {
        const char *file;
        diag_list *diags;
        etcd_cluster *c;
        kv_list names;   /* native path -> path as written, when they differ */
        bool tls_failed; /* TLS could not be read; skip the TLS rules */
} reader;

void rd_diag(reader *r, enum diag_severity sev, const ynode *at, const char *fmt, ...)
    _printf_(4, 5);
#define rd_error(r, at, ...)   rd_diag((r), DIAG_ERROR, (at), __VA_ARGS__)
#define rd_warning(r, at, ...) rd_diag((r), DIAG_WARNING, (at), __VA_ARGS__)
#define rd_note(r, at, ...)    rd_diag((r), DIAG_NOTE, (at), __VA_ARGS__)
/* A diagnostic at the place a native field was written (or the document). */
void rd_diag_at(reader *r, enum diag_severity sev, const char *native, const char *fmt, ...)
    _printf_(4, 5);
/* The field's path as the user wrote it (falls back to the native path). */
const char *rd_name(const reader *r, const char *native);

/* Record a field: its location (the value for scalars, the key otherwise) and spelling. */
void rd_record(reader *r, const char *native, const char *written, const ynode *key,
               const ynode *value);

/*
 * Every scalar of a document gitcd reads, keys included, without a control
 * character (bytes below 0x20, and 0x7f): an error at each one found (the
 * first twenty). Spec content reaches unit files, manifests and command
 * lines, where a newline or an escape would become syntax.
 */
void rd_check_controls(reader *r, const ynode *root);

/* "parent.key" (or "key" when parent is empty), newly allocated. */
char *rd_join(const char *parent, const char *key);

/*
 * Check every key of a mapping: keys in `known` are fine, keys in `ignored`
 * get a warning ("<path>.<key> is not supported by gitcd and is ignored"),
 * anything else is an error with the closest known key as a suggestion.
 * Either list may be NULL; both are NULL-terminated.
 */
void rd_keys(reader *r, const ynode *map, const char *path, const char *const *known,
             const char *const *ignored);

/* The value of `key` in map and its key node; NULL when absent or null. */
const ynode *rd_get(const ynode *map, const char *key, const ynode **ret_key);

/* A type error: "<path>: expected <what>, got <type>". */
void rd_type_error(reader *r, const ynode *at, const char *path, const char *what);

/*
 * Field readers: `parent` is the written path of the mapping, `native` the
 * native path of the field (NULL: same as written). Each returns true when
 * the field is present, not null and of the right type.
 */
bool rd_map(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
            const ynode **ret);
bool rd_string(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
               char **ret);
/* Any scalar (string, number, boolean) as text, e.g. a flag value. */
bool rd_scalar(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
               char **ret);
bool rd_int(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
            int64_t min, int64_t max, int64_t *ret);
bool rd_bool(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
             bool *ret);
/* A quantity written as a string ("10Gi") or an integer (bytes). */
bool rd_quantity(reader *r, const ynode *map, const char *parent, const char *key,
                 const char *native, char **ret_text, int64_t *ret_bytes);
/* One of `values` (NULL-terminated); returns the index. */
bool rd_enum(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
             const char *const *values, int *ret);
/* A mapping of strings to strings; keys are Kubernetes qualified names. */
bool rd_kv(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
           bool label_values, kv_list *ret);
/* A Kubernetes structure passed through: `object` true for a mapping, false for a sequence. */
bool rd_json(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
             bool object, json_t **ret);
/* A {name: x} reference (Kubernetes LocalObjectReference). */
bool rd_ref(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
            char **ret);

/*
 * Go-style duration ("90s", "1h30m", "7d") -> milliseconds: util's
 * parse_duration_ms() without its bare-seconds form. 0, -EINVAL or -ERANGE.
 */
int duration_parse_ms(const char *s, int64_t *ret_ms);

/* The per-dialect spec readers (api/native.c, api/dialect-*.c). */
void read_spec_gitcd(reader *r, const ynode *spec);
void read_spec_coreos(reader *r, const ynode *spec);
void read_spec_etcdio(reader *r, const ynode *spec);
void read_spec_improbable(reader *r, const ynode *spec);
void read_spec_cozystack(reader *r, const ynode *spec);

/*
 * Shared pieces of the native reader that other dialects reuse: a backup
 * location ({pvc|s3|local}; `restore` selects file semantics for subPath and
 * key) and an issuer reference ({name, kind, group}).
 */
void read_location(reader *r, const ynode *map, const char *path, const char *native, bool restore,
                   storage_location *out);
void read_issuer(reader *r, const ynode *map, const char *parent, const char *key,
                 const char *native, issuer_ref *out);
/* One etcd flag ("--name=value" split already) onto the model's options. */
void apply_etcd_flag(reader *r, const ynode *at, const char *path, const char *flag,
                     const char *value);

/* Defaults and semantic rules (api/validate.c), run after a dialect reader. */
void spec_fill_defaults(etcd_cluster *c);
void spec_validate(reader *r);
/* A PersistentVolumeClaimSpec (coreos, improbable): storage size and class. */
void read_pvc_spec(reader *r, const ynode *pvc, const char *path);

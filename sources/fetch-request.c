/*
 * The fetch request (fetch-request.h). Every string field is null or a JSON
 * string of hex digits: a path or a URL given on gitcd's command line may
 * hold any bytes but NUL, and JSON strings only UTF-8. The numbers are
 * checked against their C types on the way back.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "sources/fetch-request.h"
#include "util/hash.h"
#include "util/xalloc.h"

static json_t *str_or_null(const char *s)
{
        if (!s)
                return json_null();
        _cleanup_free_ char *hex = hex_encode_new(s, strlen(s));
        return json_string(hex);
}

char *fetch_request_encode(const source_opts *o, const source_url *u, const char *mirror_path,
                           int log_level)
{
        json_t *url = json_object();
        json_object_set_new(url, "kind", json_integer(u->kind));
        json_object_set_new(url, "user", str_or_null(u->user));
        json_object_set_new(url, "password", str_or_null(u->password));
        json_object_set_new(url, "host", str_or_null(u->host));
        json_object_set_new(url, "port", json_integer(u->port));
        json_object_set_new(url, "path", str_or_null(u->path));
        json_object_set_new(url, "fetch_url", str_or_null(u->fetch_url));
        json_object_set_new(url, "display", str_or_null(u->display));

        json_t *opts = json_object();
        json_object_set_new(opts, "ref", str_or_null(o->ref));
        json_object_set_new(opts, "ssh_key_path", str_or_null(o->ssh_key_path));
        json_object_set_new(opts, "ssh_key_passphrase_file",
                            str_or_null(o->ssh_key_passphrase_file));
        json_object_set_new(opts, "ssh_key_passphrase_env", str_or_null(o->ssh_key_passphrase_env));
        json_object_set_new(opts, "use_ssh_agent", json_boolean(o->use_ssh_agent));
        json_object_set_new(opts, "known_hosts_path", str_or_null(o->known_hosts_path));
        json_object_set_new(opts, "https_ca_file", str_or_null(o->https_ca_file));
        json_object_set_new(opts, "https_token_file", str_or_null(o->https_token_file));
        json_object_set_new(opts, "https_token_env", str_or_null(o->https_token_env));
        json_object_set_new(opts, "https_username", str_or_null(o->https_username));
        json_object_set_new(opts, "fetch_timeout_s", json_integer(o->fetch_timeout_s));
        json_object_set_new(opts, "max_fetch_bytes", json_integer((json_int_t)o->max_fetch_bytes));
        json_object_set_new(opts, "max_fetch_objects",
                            json_integer((json_int_t)o->max_fetch_objects));

        json_t *root = json_object();
        json_object_set_new(root, "url", url);
        json_object_set_new(root, "opts", opts);
        json_object_set_new(root, "mirror", str_or_null(mirror_path));
        json_object_set_new(root, "log_level", json_integer(log_level));
        char *text = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        assert(text); /* only hex, numbers and fixed keys */
        return text;
}

static int unhex(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * A string field (NULL for null), decoded in place in the request's own
 * JSON value; false when it is neither null nor whole bytes of hex other
 * than NUL.
 */
static bool get_str(json_t *o, const char *key, const char **ret)
{
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return true;
        }
        if (!json_is_string(v) || json_string_length(v) % 2)
                return false;
        size_t n = json_string_length(v) / 2;
        const char *hex = json_string_value(v);
        char *bytes = (char *)hex; /* the decoded text is never longer */
        for (size_t i = 0; i < n; i++) {
                int hi = unhex(hex[2 * i]), lo = unhex(hex[2 * i + 1]);
                if (hi < 0 || lo < 0 || (hi | lo) == 0)
                        return false;
                bytes[i] = (char)(hi << 4 | lo);
        }
        bytes[n] = 0;
        *ret = bytes;
        return true;
}

static bool get_int(json_t *o, const char *key, json_int_t min, json_int_t max, json_int_t *ret)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_integer(v))
                return false;
        *ret = json_integer_value(v);
        return *ret >= min && *ret <= max;
}

static char *dup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

int fetch_request_decode(const char *text, size_t len, fetch_request *ret, char **ret_error)
{
        json_error_t jerr;
        json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                *ret_error = xasprintf("the fetch request is not JSON: %s", jerr.text);
                return -EINVAL;
        }
        json_t *url = json_object_get(root, "url"), *opts = json_object_get(root, "opts");
        fetch_request r = {.root = root};
        source_url *u = &r.url;
        source_opts *o = &r.opts;
        const char *user, *password, *host, *path, *fetch_url, *display;
        json_int_t kind, port, level, timeout, bytes, objects;
        bool ok = json_is_object(url) && json_is_object(opts) &&
                  get_int(url, "kind", SOURCE_URL_LOCAL, SOURCE_URL_HTTP, &kind) &&
                  get_str(url, "user", &user) && get_str(url, "password", &password) &&
                  get_str(url, "host", &host) && get_int(url, "port", 0, 65535, &port) &&
                  get_str(url, "path", &path) && get_str(url, "fetch_url", &fetch_url) &&
                  fetch_url && get_str(url, "display", &display) && display &&
                  get_str(opts, "ref", &o->ref) &&
                  get_str(opts, "ssh_key_path", &o->ssh_key_path) &&
                  get_str(opts, "ssh_key_passphrase_file", &o->ssh_key_passphrase_file) &&
                  get_str(opts, "ssh_key_passphrase_env", &o->ssh_key_passphrase_env) &&
                  json_is_boolean(json_object_get(opts, "use_ssh_agent")) &&
                  get_str(opts, "known_hosts_path", &o->known_hosts_path) &&
                  get_str(opts, "https_ca_file", &o->https_ca_file) &&
                  get_str(opts, "https_token_file", &o->https_token_file) &&
                  get_str(opts, "https_token_env", &o->https_token_env) &&
                  get_str(opts, "https_username", &o->https_username) &&
                  get_int(opts, "fetch_timeout_s", 1, UINT_MAX, &timeout) &&
                  get_int(opts, "max_fetch_bytes", 1, INT64_MAX, &bytes) &&
                  get_int(opts, "max_fetch_objects", 1, INT64_MAX, &objects) &&
                  get_str(root, "mirror", &r.mirror_path) && r.mirror_path &&
                  get_int(root, "log_level", 0, INT_MAX, &level);
        if (!ok) {
                json_decref(root);
                *ret_error = xstrdup("the fetch request is malformed");
                return -EINVAL;
        }
        *u = (source_url){
            .kind = (source_url_kind)kind,
            .user = dup_or_null(user),
            .password = dup_or_null(password),
            .host = dup_or_null(host),
            .port = (int)port,
            .path = dup_or_null(path),
            .fetch_url = xstrdup(fetch_url),
            .display = xstrdup(display),
        };
        o->use_ssh_agent = json_is_true(json_object_get(opts, "use_ssh_agent"));
        o->fetch_timeout_s = (unsigned)timeout;
        o->max_fetch_bytes = (size_t)bytes;
        o->max_fetch_objects = (size_t)objects;
        r.log_level = (int)level;
        *ret = r;
        return 0;
}

void fetch_request_release(fetch_request *r)
{
        source_url_release(&r->url);
        json_decref(r->root);
        *r = (fetch_request){0};
}

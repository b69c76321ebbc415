/*
 * A small S3 client for snapshot files: PUT (single or multipart), GET to a
 * file, HEAD and DELETE of one object, over libcurl, signed with libcurl's own
 * AWS Signature Version 4 (CURLOPT_AWS_SIGV4).
 *
 * Errors are negative errno with a message in *ret_error (optional; never
 * holding the secret key or the session token):
 *   -ENOENT        no such object (404)
 *   -EACCES        the server refused the credentials or the request (403)
 *   -EPROTO        TLS failed (certificate not trusted, wrong host name)
 *   -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -EIO   the server failed or
 *                  could not be reached, after every retry
 *   -EBADMSG       the server answered something that is not S3
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "snapstore/destination.h" /* s3_credentials */

typedef struct s3_client s3_client;

typedef struct s3_config {
        /* "https://host[:port][/path]" or "http://..."; no scheme means https.
         * NULL: AWS, https://s3.<region>.amazonaws.com. */
        const char *endpoint;
        const char *bucket;
        const char *region; /* NULL: "us-east-1" */
        /* true: <endpoint>/<bucket>/<key>; false: <scheme>://<bucket>.<host>/<key>. */
        bool path_style;
        const s3_credentials *credentials; /* copied; ca_file used for HTTPS */
        /* Extra name resolution, libcurl's CURLOPT_RESOLVE syntax "host:port:address",
         * NULL-terminated; NULL for none (tests point bucket.host at loopback with it). */
        const char *const *resolve;
        int64_t multipart_threshold; /* files larger than this go multipart; 0: 64 MiB */
        int64_t part_size;           /* 0: 16 MiB; S3 refuses parts under 5 MiB but the last */
        int max_attempts;            /* per request; 0: 5 */
        int backoff_ms;              /* first wait between attempts, doubled each time; 0: 500 */
        int backoff_max_ms;          /* cap on one wait; 0: 20000 */
        /* Told before each wait for a retry (attempt: the attempt that failed, from 1). */
        void (*on_retry)(void *userdata, int attempt, const char *why);
        /* Told as an upload reads its file (bytes handed to the network so far). */
        void (*on_progress)(void *userdata, int64_t bytes_sent, int64_t bytes_total);
        void *userdata;
} s3_config;

typedef struct s3_object_info {
        int64_t size;
        int64_t mtime_ms;
        char *sha256_hex; /* x-amz-meta-sha256, NULL when absent */
        char *etag;       /* without quotes */
} s3_object_info;

void s3_object_info_release(s3_object_info *o);

/* A client for one bucket; does not touch the network. -EINVAL for a bad endpoint. */
int s3_client_new(const s3_config *cfg, s3_client **ret, char **ret_error);
void s3_client_free(s3_client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(s3_client *, s3_client_free);

/*
 * Upload a file as key; sha256_hex (when not NULL) is stored as x-amz-meta-sha256.
 * Up to the threshold one PUT; above it a multipart upload that is completed
 * only after every part succeeded and aborted on any failure, so a failed
 * upload never leaves an object behind.
 */
int s3_put_file(s3_client *c, const char *key, const char *path, const char *sha256_hex,
                char **ret_error);
/* Download key into path: path.part, fsync, rename. -ENOENT when absent. */
int s3_get_file(s3_client *c, const char *key, const char *path, char **ret_error);
/* -ENOENT when absent (HEAD first: S3 deletes of missing keys succeed silently). */
int s3_delete(s3_client *c, const char *key, char **ret_error);
int s3_head(s3_client *c, const char *key, s3_object_info *ret, char **ret_error);

/* "s3://bucket/key" */
char *s3_object_location(const s3_client *c, const char *key);

/*
 * The one place requests are signed: set CURLOPT_AWS_SIGV4
 * ("aws:amz:<region>:<service>"), the access key and secret, and append the
 * session token header to *headers when there is one. Exposed for the test
 * that checks libcurl's signatures against AWS's published examples.
 */
void s3_sign_setup(CURL *h, const char *region, const char *service, const s3_credentials *creds,
                   struct curl_slist **headers);

/* The text of the first <tag>...</tag> in an S3 XML answer, entities decoded; NULL when absent. */
char *s3_xml_value(const char *xml, size_t len, const char *tag);

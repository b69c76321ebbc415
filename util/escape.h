/*
 * Escaping of untrusted text for output: log lines, the audit log, tables
 * and CI output. Anything that came from outside gitcd (Git paths, author
 * names, commit messages, etcd's grpc-message, Kubernetes Status text)
 * goes through str_escape() before a person or a log parser sees it, so it
 * can neither drive the terminal (ESC sequences) nor forge a line of its
 * own (a newline).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/strbuf.h"

/*
 * Append s (len bytes; a NUL inside is escaped too) to sb with every
 * control character escaped: \n, \r, \t as those two characters, any other
 * C0 byte and DEL as \xHH, a C1 control (U+0080..U+009F) as \u0080..\u009f,
 * and each byte that is not part of valid UTF-8 as \xHH. Everything else,
 * backslashes included, is copied unchanged, so the result is valid UTF-8
 * without control characters and escaping it again changes nothing: layers
 * may each escape what they print without doubling backslashes.
 */
void sb_append_escaped(strbuf *sb, const char *s, size_t len);
/* A newly allocated escaped copy of the string s; NULL for NULL. */
char *str_escape(const char *s);
/* True when str_escape(s) would differ from s. */
bool str_needs_escape(const char *s);
/*
 * A copy of untrusted text of at most max bytes of s: longer text is cut
 * at a character boundary and " [cut: N bytes in all]" is appended, so
 * whoever reads it knows there was more. NULL for NULL.
 */
char *str_cut(const char *s, size_t max);

/*
 * Logging to stderr with levels. The level comes from GITCD_LOG_LEVEL
 * (debug, info, warn, error) or log_set_level(); the default is info.
 * Library-like code logs at debug level only; the reconciler and the CLI
 * log once, where a decision is made. Secrets never reach a log line.
 */
#pragma once

#include <stdbool.h>

#include "util/macro.h"

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3, LOG_QUIET = 4 };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* True when log_set_level() was called or GITCD_LOG_LEVEL is set. */
bool log_level_is_explicit(void);
/* Parse "debug", "info", "warn", "error", "quiet"; -EINVAL otherwise. */
int log_level_from_string(const char *s, enum log_level *ret_level);
void log_msg(enum log_level level, const char *fmt, ...) _printf_(2, 3);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
